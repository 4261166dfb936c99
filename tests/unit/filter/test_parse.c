/* Line parser and name normalisation: every format with its real-world quirks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "filter/parse.h"

struct out {
	char text[1024];
};

static void add(struct out *o, const char *s)
{
	size_t n = strlen(o->text);
	snprintf(o->text + n, sizeof(o->text) - n, "%s%s", n ? " " : "", s);
}

static void on_rule(void *arg, enum nx_filter_kind kind, const char *name, size_t len)
{
	char buf[300];
	assert_int_equal(strlen(name), len);
	snprintf(buf, sizeof(buf), "%s:%s", nx_filter_kind_name(kind), name);
	add(arg, buf);
}

static void on_skip(void *arg, enum nx_filter_skip why)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "skip:%s", nx_filter_skip_name(why));
	add(arg, buf);
}

static void on_important(void *arg)
{
	add(arg, "important");
}

static const struct nx_filter_parse_cb cbs = {on_rule, on_skip, on_important};

/* Parse one line; returns the emitted items as text ("" when nothing). */
static const char *parse(enum nx_filter_format fmt, const char *line, enum nx_filter_line *cls)
{
	static struct out o;
	o.text[0] = '\0';
	enum nx_filter_line c = nx_filter_parse_line(line, strlen(line), fmt, &cbs, &o);
	if (cls) {
		*cls = c;
	}
	return o.text;
}

#define AUTO NX_FILTER_FMT_AUTO

static void check(enum nx_filter_format fmt, const char *line, const char *want)
{
	const char *got = parse(fmt, line, NULL);
	if (strcmp(got, want) != 0) {
		print_error("line [%s] fmt %s: got [%s] want [%s]\n", line,
			    nx_filter_format_name(fmt), got, want);
		fail();
	}
}

static void test_comments_blank(void **state)
{
	enum nx_filter_line c;
	parse(AUTO, "", &c);
	assert_int_equal(c, NX_FILTER_LINE_BLANK);
	parse(AUTO, "  \t\r", &c);
	assert_int_equal(c, NX_FILTER_LINE_BLANK);
	parse(AUTO, "# comment", &c);
	assert_int_equal(c, NX_FILTER_LINE_COMMENT);
	parse(AUTO, "   ! adblock comment", &c);
	assert_int_equal(c, NX_FILTER_LINE_COMMENT);
	parse(AUTO, "[Adblock Plus 2.0]", &c);
	assert_int_equal(c, NX_FILTER_LINE_COMMENT);
	parse(AUTO, "\xef\xbb\xbf! Title: with BOM", &c);
	assert_int_equal(c, NX_FILTER_LINE_COMMENT);
	check(AUTO, "\xef\xbb\xbf||bom.example^", "abp_sub:bom.example");
}

static void test_hosts(void **state)
{
	check(AUTO, "0.0.0.0 ads.example.com", "plain:ads.example.com");
	check(AUTO, "127.0.0.1\tTrack.Example.COM.\r", "plain:track.example.com");
	check(AUTO, ":: v6.example", "plain:v6.example");
	check(AUTO, "::1 a.example b.example  c.example # inline",
	      "plain:a.example plain:b.example "
	      "plain:c.example");
	check(AUTO, "0.0.0.0 www.ruclicks.com  #[clicksagent.com]", "plain:www.ruclicks.com");
	check(AUTO, "127.0.0.1 localhost", "skip:localhost");
	check(AUTO, "::1 localhost ip6-localhost ip6-loopback",
	      "skip:localhost skip:localhost skip:localhost");
	check(AUTO, "255.255.255.255 broadcasthost", "skip:localhost");
	check(AUTO, "127.0.0.1 localhost.localdomain", "skip:localhost");
	check(AUTO, "0.0.0.0 0.0.0.0", "skip:localhost");
	check(AUTO, "fe80::1%lo0 ifaced.example", "plain:ifaced.example");
	check(AUTO, "0.0.0.0 bad..name good.example", "skip:invalid_name plain:good.example");
	check(AUTO, "invalidIP localhost", "skip:malformed");
	check(NX_FILTER_FMT_HOSTS, "plain.example", "plain:plain.example");
	check(NX_FILTER_FMT_DOMAINS, "0.0.0.0 x.example", "skip:format_mismatch");
}

static void test_domains(void **state)
{
	check(AUTO, "Example.COM", "plain:example.com");
	check(AUTO, "trailing.dot.example.", "plain:trailing.dot.example");
	check(AUTO, "first# comment", "plain:first");
	check(AUTO, "second.example # other", "plain:second.example");
	check(AUTO, "under_score.example.org", "plain:under_score.example.org");
	check(AUTO, "-leading-hyphen.example.com", "plain:-leading-hyphen.example.com");
	check(AUTO, "192.168.1.1", "skip:ip_rule");
	check(AUTO, "2001:db8::1", "skip:ip_rule");
	check(AUTO, "a..b", "skip:invalid_name");
	check(AUTO, "foo*bar", "skip:pattern");
	check(AUTO, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com",
	      "plain:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com");
	check(AUTO, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com",
	      "skip:invalid_name");
	check(AUTO, "local", "skip:localhost");
	check(AUTO, "ip6-allnodes", "skip:localhost");
	check(AUTO, "a b", "skip:malformed");
	check(NX_FILTER_FMT_DOMAINS, "*.w.example", "skip:format_mismatch");
	check(NX_FILTER_FMT_DOMAINS, "||x.example^", "skip:format_mismatch");
	/* total length: 253 is the limit */
	char name[300];
	memset(name, 'a', sizeof(name));
	for (int i = 63; i < 300; i += 64) {
		name[i] = '.';
	}
	name[253] = '\0';
	char want[320];
	snprintf(want, sizeof(want), "plain:%s", name);
	check(AUTO, name, want);
	name[253] = 'b';
	name[254] = '\0';
	check(AUTO, name, "skip:invalid_name");
}

static void test_idn(void **state)
{
	check(AUTO, "müller.com", "plain:xn--mller-kva.com");
	check(AUTO, "MÜNCHEN.example.de", "plain:xn--mnchen-3ya.example.de");
	check(AUTO, "belgië.icom.museum", "plain:xn--belgi-rsa.icom.museum");
	check(AUTO, "الأردن.icom.museum", "plain:xn--igbhzh7gpa.icom.museum");
	check(AUTO, "한국.icom.museum", "plain:xn--3e0b707e.icom.museum");
	check(AUTO, "xn----7sbhlqiujscje.xn--p1ai", "plain:xn----7sbhlqiujscje.xn--p1ai");
	/* non-transitional: ß is kept (xn--), not mapped to "ss" */
	check(AUTO, "straße.de", "plain:xn--strae-oqa.de");
	check(AUTO, "xn---mllerk1va.com", "skip:idn");
	check(AUTO, "||bücher.example^", "abp_sub:xn--bcher-kva.example");
	check(AUTO, "bad\xff\xfe.example", "skip:idn");
}

static void test_adblock(void **state)
{
	check(AUTO, "||ads.example^", "abp_sub:ads.example");
	check(AUTO, "||Ads.Example.^", "abp_sub:ads.example");
	check(AUTO, "||abp-no-caret.example.org", "abp_sub:abp-no-caret.example.org");
	check(AUTO, "||example3.org|", "abp_sub:example3.org");
	check(AUTO, "|exact.example^", "abp_exact:exact.example");
	check(AUTO, "|exact.example|", "abp_exact:exact.example");
	check(AUTO, "|cdn.taboola.com^|", "abp_exact:cdn.taboola.com");
	check(AUTO, "@@||ok.example^", "allow_sub:ok.example");
	check(AUTO, "@@||cmp.osano.com^|", "allow_sub:cmp.osano.com");
	check(AUTO, "@@|only.example^", "allow_exact:only.example");
	check(AUTO, "@@|only.example|", "allow_exact:only.example");
	check(AUTO, "||imp.example^$important", "important abp_sub:imp.example");
	check(AUTO, "@@||imp.example^$important", "important allow_sub:imp.example");
	check(AUTO, "||x.example^$badfilter", "bad_abp_sub:x.example");
	check(AUTO, "@@|x.example^$badfilter", "bad_allow_exact:x.example");
	check(AUTO, "||x.example^$important,badfilter", "skip:modifier");
	check(AUTO, "||x.example^$third-party", "skip:modifier");
	check(AUTO, "||x.example^$dnstype=AAAA", "skip:modifier");
	check(AUTO, "||x.example^$client=127.0.0.1", "skip:modifier");
	check(AUTO, "||x.example^$", "skip:modifier");
	check(AUTO, "||example2.org/*", "skip:path");
	check(AUTO, "||example.org/ads.js", "skip:path");
	check(AUTO, "||example.org:8080^", "skip:path");
	check(AUTO, "/^stats?\\./", "skip:regex");
	check(AUTO, "@@/^stats?\\./", "skip:regex");
	check(AUTO, "/ads[0-9]+\\.example$/$important", "skip:regex");
	check(AUTO, "/sub.", "skip:path");
	check(AUTO, "://example.org", "skip:pattern");
	check(AUTO, "-adx-*.rayjump.com^", "skip:pattern");
	check(AUTO, "||*.example^", "skip:pattern");
	check(AUTO, "||ad*.example^", "skip:pattern");
	check(AUTO, "example.com^", "skip:pattern");
	check(AUTO, "188.72.219.36^", "skip:ip_rule");
	check(AUTO, "||164.132.74.156^", "skip:ip_rule");
	check(AUTO, ".bbelements.com^", "wild:bbelements.com");
	check(AUTO, ".adonweb.ru", "skip:pattern");
	check(AUTO, "example.com##.ad-banner", "skip:cosmetic");
	check(AUTO, "example.com#@#.ad", "skip:cosmetic");
	check(AUTO, "||api.thetake.com^ # https://thetake.ai/", "abp_sub:api.thetake.com");
	check(AUTO, "wykop.pl$badfilter", "skip:modifier");
	check(AUTO, "@@plain.example", "allow_exact:plain.example");
	check(NX_FILTER_FMT_ADBLOCK, "host.example", "plain:host.example");
	check(NX_FILTER_FMT_ADBLOCK, "0.0.0.0 h.example", "plain:h.example");
	check(NX_FILTER_FMT_ADBLOCK, "*.w.example", "skip:pattern");
}

static void test_wildcard(void **state)
{
	check(AUTO, "*.wild.example", "wild:wild.example");
	check(AUTO, "*.MixedCaseWildcard.Example.com", "wild:mixedcasewildcard.example.com");
	check(AUTO, "*.deep.sub.wildcard.example.org", "wild:deep.sub.wildcard.example.org");
	check(AUTO, "invalid.*.wildcard", "skip:pattern");
	check(AUTO, "*.*.x.example", "skip:pattern");
	check(NX_FILTER_FMT_WILDCARD, "*.w.example", "wild:w.example");
	check(NX_FILTER_FMT_WILDCARD, "plain.example", "plain:plain.example");
	check(NX_FILTER_FMT_HOSTS, "*.w.example", "skip:format_mismatch");
}

static void test_format_names(void **state)
{
	enum nx_filter_format f;
	assert_int_equal(nx_filter_format_parse("adblock", &f), 0);
	assert_int_equal(f, NX_FILTER_FMT_ADBLOCK);
	assert_int_not_equal(nx_filter_format_parse("nope", &f), 0);
	assert_string_equal(nx_filter_skip_name(NX_FILTER_SKIP_line_too_long), "line_too_long");
	assert_true(nx_filter_name_valid("a.b", 3));
	assert_false(nx_filter_name_valid("A.b", 3));
	assert_false(nx_filter_name_valid("a.", 2));
	assert_false(nx_filter_name_valid(".a", 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_comments_blank), cmocka_unit_test(test_hosts),
	    cmocka_unit_test(test_domains),	   cmocka_unit_test(test_idn),
	    cmocka_unit_test(test_adblock),	   cmocka_unit_test(test_wildcard),
	    cmocka_unit_test(test_format_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

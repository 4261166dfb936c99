/*
 * The AdGuard rule language through the side structure and nx_filter_lists_decide: each
 * modifier, $important against @@, $badfilter, regex bounds, hosts answers, subdomains, the
 * rewrite answer builder, the user-rule entry (add_line) and its error messages, memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <time.h>

#include "base/err.h"

#include "base/stats.h"
#include "dns/msg.h"
#include "dns/wire.h"
#include "filter/compile.h"
#include "filter/lists.h"
#include "filter/side_impl.h" /* side_label_key, for its false positives */
#include "helpers.h"

static char *g_dir;

struct lists {
	struct nx_filter_snap *snap;
	struct nx_filter_side *side;
	struct nx_filter_compile_report rep;
};

/* One list text, compiled as source 0 with the side on -> snapshot + side. */
static void lists_of(struct lists *l, const char *text, bool hosts_listed, bool subdomains)
{
	char in[4300], path[4300];
	snprintf(in, sizeof(in), "%s/s.txt", g_dir);
	th_write(in, text, strlen(text));
	struct nx_filter_compile_opts o = {
	    .name = "s", .side = true, .hosts_listed = hosts_listed, .subdomains = subdomains};
	assert_int_equal(nx_filter_compile_file(in, g_dir, &o, &l->rep), 0);
	struct nx_filter_snap_source src = {"s", g_dir};
	snprintf(path, sizeof(path), "%s/s.nxs", g_dir);
	struct nx_filter_snap_build_opts bo = {.seed = 7};
	assert_int_equal(nx_filter_snap_build(path, &src, 1, &bo, NULL), 0);
	assert_int_equal(nx_filter_snap_open(path, &l->snap), 0);
	assert_int_equal(nx_filter_side_open(&src, 1, &l->side), 0);
}

static void lists_free(struct lists *l)
{
	nx_filter_snap_free(l->snap);
	nx_filter_side_free(l->side);
	memset(l, 0, sizeof(*l));
}

struct q {
	const char *host;
	uint16_t qtype;
	const char *ip;
	const char *name;
	const char *tags[4];
};

static struct sockaddr_storage g_ss;
static uint8_t g_wire[NX_DNS_NAME_MAX];

static void qctx_of(const struct q *in, struct nx_filter_qctx *q)
{
	memset(q, 0, sizeof(*q));
	int wl = nx_dns_name_from_text(in->host, g_wire);
	assert_true(wl > 0);
	q->wire = g_wire;
	q->wlen = (size_t)wl;
	q->qtype = in->qtype ? in->qtype : 1;
	q->eligible = ~0ull;
	q->client_name = in->name;
	if (in->ip) {
		memset(&g_ss, 0, sizeof(g_ss));
		struct sockaddr_in *s4 = (struct sockaddr_in *)&g_ss;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&g_ss;
		if (inet_pton(AF_INET, in->ip, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
		} else {
			assert_int_equal(inet_pton(AF_INET6, in->ip, &s6->sin6_addr), 1);
			s6->sin6_family = AF_INET6;
		}
		q->client = (const struct sockaddr *)&g_ss;
	}
	while (q->ntags < 4 && in->tags[q->ntags]) {
		q->ntags++;
	}
	q->tags = in->tags;
}

static enum nx_filter_action decide(const struct lists *l, const struct q *in,
				    struct nx_filter_result *r)
{
	struct nx_filter_qctx q;
	qctx_of(in, &q);
	return nx_filter_lists_decide(l->snap, l->side, &q, r);
}

/* The deciding side rule's text ("" when the snapshot decided or nothing matched). */
static const char *winner(const struct lists *l, const struct nx_filter_result *r)
{
	static char buf[512];
	size_t len = 0;
	const char *t = nx_filter_side_rule_text(l->side, r->side_rule, &len);
	snprintf(buf, sizeof(buf), "%.*s", (int)len, t ? t : "");
	return buf;
}

#define ACT(l, ...)                                                                                \
	({                                                                                         \
		struct nx_filter_result r_;                                                        \
		decide((l), &(struct q){__VA_ARGS__}, &r_);                                        \
	})

static void test_important(void **state)
{
	struct lists l;
	lists_of(&l,
		 "@@||a.example^\n||a.example^$important\n"
		 "||b.example^$important\n@@||b.example^$important\n"
		 "@@||c.example^\n||c.example^\n",
		 false, false);
	struct nx_filter_result r;
	assert_int_equal(decide(&l, &(struct q){"a.example"}, &r), NX_FILTER_ACT_BLOCK);
	assert_string_equal(winner(&l, &r), "||a.example^$important");
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_rule);
	assert_int_equal(decide(&l, &(struct q){"x.a.example"}, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.matched_off, 2); /* the rule's name inside the query */
	assert_int_equal(decide(&l, &(struct q){"b.example"}, &r), NX_FILTER_ACT_ALLOW);
	assert_string_equal(winner(&l, &r), "@@||b.example^$important");
	/* without $important the snapshot's exception wins, as before */
	assert_int_equal(decide(&l, &(struct q){"c.example"}, &r), NX_FILTER_ACT_ALLOW);
	assert_int_equal(r.side_rule, -1);
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_exception);
	assert_int_equal(l.rep.important, 0); /* honoured, no longer "as plain" */
	lists_free(&l);
}

static void test_badfilter(void **state)
{
	struct lists l;
	lists_of(&l,
		 "||h1.example^$ctag=pc\n||h1.example^$ctag=pc,badfilter\n"
		 "||h2.example^$important\n||h2.example^$important,badfilter\n"
		 "||h3.example^$dnstype=A\n||h3.example^$dnstype=AAAA,badfilter\n"
		 "/ad[0-9]\\./\n/ad[0-9]\\./$badfilter\n",
		 false, false);
	assert_int_equal(ACT(&l, "h1.example", .tags = {"pc"}), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "h2.example"), NX_FILTER_ACT_NONE);
	/* a badfilter names one exact rule: another value leaves it alone */
	assert_int_equal(ACT(&l, "h3.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "ad1.example"), NX_FILTER_ACT_NONE);
	struct nx_filter_side_stats st;
	nx_filter_side_stats(l.side, &st);
	assert_int_equal(st.badfilter, 4);
	assert_int_equal(st.cancelled, 3);
	lists_free(&l);
}

/* A list's $badfilter cancels only its own rules; a user's cancels the rule in any list. */
static void test_badfilter_origins(void **state)
{
	struct nx_filter_side_builder *b;
	assert_int_equal(nx_filter_side_builder_new(&b), 0);
	char err[256];
	static const struct {
		const char *line;
		unsigned origin;
	} lines[] = {
	    {"||a.example^$dnstype=A", 0},
	    {"||a.example^$dnstype=A,badfilter", 1}, /* another list: no effect */
	    {"||b.example^$dnsrewrite=10.0.0.1", 3},
	    {"||b.example^$dnsrewrite=10.0.0.1,badfilter", NX_FILTER_ORIGIN_USER_DENY},
	};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		assert_int_equal(nx_filter_side_add_line(b, lines[i].line, strlen(lines[i].line),
							 lines[i].origin, err, sizeof(err)),
				 0);
	}
	struct nx_filter_side *s;
	assert_int_equal(nx_filter_side_build(b, &s), 0);
	struct lists l = {.side = s};
	assert_int_equal(ACT(&l, "a.example", .qtype = 1), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "b.example", .qtype = 1), NX_FILTER_ACT_NONE);
	struct nx_filter_side_stats st;
	nx_filter_side_stats(s, &st);
	assert_int_equal(st.cancelled, 1);
	nx_filter_side_free(s);
}

static void test_client(void **state)
{
	struct lists l;
	lists_of(&l,
		 "||v4.example^$client=192.168.1.7\n"
		 "||net.example^$client=10.1.0.0/16\n"
		 "||not.example^$client=~10.1.0.0/16\n"
		 "||v6.example^$client=2001:db8::/32\n"
		 "||name.example^$client='Frank\\'s laptop'|kid\n"
		 "@@||exc.example^$client=10.1.2.3\n||exc.example^\n",
		 false, false);
	assert_int_equal(ACT(&l, "v4.example", .ip = "192.168.1.7"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "v4.example", .ip = "192.168.1.8"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "v4.example"), NX_FILTER_ACT_NONE); /* no address known */
	assert_int_equal(ACT(&l, "v4.example", .ip = "::ffff:192.168.1.7"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "net.example", .ip = "10.1.255.1"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "net.example", .ip = "10.2.0.1"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "not.example", .ip = "10.1.0.1"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "not.example", .ip = "10.9.0.1"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "v6.example", .ip = "2001:db8:1::5"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "v6.example", .ip = "2001:db9::5"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "name.example", .name = "Frank's laptop"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "name.example", .name = "kid"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "name.example", .name = "Franks laptop"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "exc.example", .ip = "10.1.2.3"), NX_FILTER_ACT_ALLOW);
	assert_int_equal(ACT(&l, "exc.example", .ip = "10.1.2.4"), NX_FILTER_ACT_BLOCK);
	lists_free(&l);
}

static void test_ctag_dnstype(void **state)
{
	struct lists l;
	lists_of(&l,
		 "||t.example^$ctag=pc|printer\n||nt.example^$ctag=~kid\n"
		 "||aaaa.example^$dnstype=AAAA\n||notaaaa.example^$dnstype=~aaaa\n"
		 "||mix.example^$dnstype=~A|AAAA\n"
		 "$dnstype=ANY,ctag=kid\n",
		 false, false);
	assert_int_equal(ACT(&l, "t.example", .tags = {"phone", "printer"}), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "t.example", .tags = {"phone"}), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "t.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "nt.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "nt.example", .tags = {"kid"}), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "aaaa.example", .qtype = 28), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "aaaa.example", .qtype = 1), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "notaaaa.example", .qtype = 28), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "notaaaa.example", .qtype = 16), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "mix.example", .qtype = 28), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "mix.example", .qtype = 5), NX_FILTER_ACT_NONE);
	/* a catch-all restricted by type and tag */
	assert_int_equal(ACT(&l, "any.where", .qtype = 255, .tags = {"kid"}), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "any.where", .qtype = 255), NX_FILTER_ACT_NONE);
	lists_free(&l);
}

static void test_denyallow(void **state)
{
	struct lists l;
	lists_of(&l,
		 "*^$denyallow=good.example|fine.org|zone.example\n||zone.example^$denyallow=ok."
		 "zone.example\n",
		 false, false);
	assert_int_equal(ACT(&l, "evil.net"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "good.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "www.good.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "notgood.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "a.fine.org"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "ok.zone.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "x.ok.zone.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "bad.zone.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "192.168.1.1"), NX_FILTER_ACT_NONE); /* IP literals spared */
	lists_free(&l);
}

/* First answer RR of a reply built by nx_dns_build_answer (owner compressed). */
static int answers(const uint8_t *buf, int len, uint16_t *type, const uint8_t **rdata,
		   uint16_t *rdlen, int max)
{
	struct nx_dns_msg m;
	assert_int_equal(nx_dns_msg_parse(buf, (size_t)len, &m), 0);
	size_t off = m.question_end;
	int n = 0;
	for (; n < m.ancount && n < max; n++) {
		assert_int_equal(buf[off], 0xc0);
		off += 2;
		type[n] = (uint16_t)(buf[off] << 8 | buf[off + 1]);
		rdlen[n] = (uint16_t)(buf[off + 8] << 8 | buf[off + 9]);
		rdata[n] = buf + off + 10;
		off += 10 + rdlen[n];
	}
	return n;
}

static int rewrite(const struct lists *l, const char *host, uint16_t qtype, uint8_t *buf,
		   size_t cap, struct nx_filter_result *r)
{
	struct nx_filter_qctx q;
	qctx_of(&(struct q){host, qtype}, &q);
	nx_filter_lists_decide(l->snap, l->side, &q, r);
	struct nx_dns_question qq = {.qtype = qtype, .qclass = 1};
	memcpy(qq.name, q.wire, q.wlen);
	qq.name_len = (uint8_t)q.wlen;
	struct nx_dns_reply_ctx ctx = {.id = 7, .q = &qq, .max_size = 512};
	return nx_filter_rewrite_answer(l->side, &q, r, &ctx, 300, buf, cap);
}

static void test_dnsrewrite(void **state)
{
	struct lists l;
	lists_of(&l,
		 "||a.example^$dnsrewrite=10.0.0.1\n||a.example^$dnsrewrite=NOERROR;A;10.0.0.2\n"
		 "||a.example^$dnsrewrite=NOERROR;AAAA;2001:db8::1\n"
		 "||c.example^$dnsrewrite=target.example\n||c.example^$dnsrewrite=10.9.9.9\n"
		 "||t.example^$dnsrewrite=NOERROR;TXT;hello world\n"
		 "||nx.example^$dnsrewrite=NXDOMAIN;;\n||r.example^$dnsrewrite=REFUSED;;\n"
		 "||plain.example^\n||plain.example^$dnsrewrite=10.0.0.3\n"
		 "@@||exc.example^$dnsrewrite\n||exc.example^$dnsrewrite=10.0.0.4\n",
		 false, false);
	uint8_t buf[512];
	struct nx_filter_result r;
	uint16_t type[8], rdlen[8];
	const uint8_t *rd[8];
	int len = rewrite(&l, "a.example", 1, buf, sizeof(buf), &r);
	assert_int_equal(r.action, NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_rewrite);
	assert_int_equal(r.rewrite, NX_FILTER_RW_RECORDS);
	assert_true(len > 0);
	assert_int_equal(buf[3] & 0xf, 0);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 2); /* both A rules, list order */
	assert_int_equal(type[0], 1);
	assert_memory_equal(rd[0], "\x0a\x00\x00\x01", 4);
	assert_memory_equal(rd[1], "\x0a\x00\x00\x02", 4);
	len = rewrite(&l, "a.example", 28, buf, sizeof(buf), &r);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 1);
	assert_int_equal(type[0], 28);
	len = rewrite(&l, "a.example", 16, buf, sizeof(buf), &r);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 0); /* NODATA */
	assert_int_equal(buf[3] & 0xf, 0);
	len = rewrite(&l, "c.example", 1, buf, sizeof(buf), &r);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 1); /* CNAME replaces the A */
	assert_int_equal(type[0], 5);
	assert_memory_equal(rd[0],
			    "\x06target\x07"
			    "example\x00",
			    16);
	len = rewrite(&l, "t.example", 16, buf, sizeof(buf), &r);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 1);
	assert_int_equal(rdlen[0], 12);
	assert_memory_equal(rd[0], "\x0bhello world", 12);
	len = rewrite(&l, "nx.example", 1, buf, sizeof(buf), &r);
	assert_int_equal(r.rewrite, NX_FILTER_RW_NXDOMAIN);
	assert_int_equal(buf[3] & 0xf, 3);
	len = rewrite(&l, "r.example", 1, buf, sizeof(buf), &r);
	assert_int_equal(buf[3] & 0xf, 5);
	/* a rewrite is more specific than a plain block of the same name */
	len = rewrite(&l, "plain.example", 1, buf, sizeof(buf), &r);
	assert_int_equal(r.rewrite, NX_FILTER_RW_RECORDS);
	assert_int_equal(ACT(&l, "exc.example"), NX_FILTER_ACT_ALLOW);
	/* no rewrite: the builder refuses */
	assert_int_equal(rewrite(&l, "none.example", 1, buf, sizeof(buf), &r), -EINVAL);
	/* too small a buffer */
	assert_true(rewrite(&l, "a.example", 1, buf, 20, &r) < 0);
	lists_free(&l);
}

static void test_regex(void **state)
{
	struct lists l;
	lists_of(&l,
		 "/^ad[0-9]+\\./\n@@/^ad7\\./\n||stats.example^\n@@/^stats?\\./\n"
		 "/sub.\n://104.154.\n||path.example/*\n||deep.example/ads/x.js\n.120x600.\n",
		 false, false);
	struct nx_filter_result r;
	assert_int_equal(decide(&l, &(struct q){"ad12.example"}, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.matched_len, 0);
	assert_int_equal(ACT(&l, "AD12.Example"), NX_FILTER_ACT_BLOCK); /* any case */
	assert_int_equal(ACT(&l, "ad7.example"), NX_FILTER_ACT_ALLOW);
	assert_int_equal(ACT(&l, "xad1.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "stats.example"), NX_FILTER_ACT_ALLOW);
	assert_int_equal(ACT(&l, "sub.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "2sub.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "104.154.1.1"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "1.104.154.1"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "path.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "deep.example"), NX_FILTER_ACT_NONE); /* a real path: skipped */
	/* ".x." cannot be a name: AdGuard's URL substring */
	assert_int_equal(ACT(&l, "ads.120x600.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "a120x600.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(l.rep.skipped[NX_FILTER_SKIP_path], 1);
	/* the prefilter's literals never hide a match: optional characters, groups, classes,
	 * quantifiers and escapes around the literal part */
	struct lists l2;
	lists_of(&l2,
		 "/^ad(s)?\\.pre\\./\n/colou?r\\.pre/\n/x{0,2}yz\\.pre/\n/[a-c]bc\\.pre/\n"
		 "/a\\d+b\\.pre/\n/^(foo|bar)\\.pre$/\n/qq|zz\\.pre/\n/m\\-n\\.pre/\n"
		 "||w*ld.pre^\n",
		 false, false);
	static const char *const hit[] = {"ad.pre.x", "ads.pre.x", "color.pre",	 "colour.pre",
					  "yz.pre",   "xxyz.pre",  "abc.pre",	 "cbc.pre",
					  "a12b.pre", "foo.pre",   "bar.pre",	 "qq.other",
					  "m-n.pre",  "wld.pre",   "wxyzld.pre", "a.w1ld.pre"};
	for (size_t i = 0; i < sizeof(hit) / sizeof(hit[0]); i++) {
		if (ACT(&l2, hit[i]) != NX_FILTER_ACT_BLOCK) {
			print_error("%s not matched\n", hit[i]);
			fail();
		}
	}
	static const char *const miss[] = {"adx.pre", "colr.pre", "dbc.pre",
					   "ab.pre",  "baz.pre",  "mn.pre"};
	for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
		if (ACT(&l2, miss[i]) != NX_FILTER_ACT_NONE) {
			print_error("%s matched\n", miss[i]);
			fail();
		}
	}
	lists_free(&l2);
	/* a name with a byte no list name has: regexes are not tried on it */
	uint8_t w[] = "\x04"
		      "ad1\x01"
		      "\x07"
		      "example";
	struct nx_filter_qctx q = {.wire = w, .wlen = sizeof(w), .qtype = 1, .eligible = ~0ull};
	assert_int_equal(nx_filter_lists_decide(l.snap, l.side, &q, &r), NX_FILTER_ACT_NONE);
	lists_free(&l);
}

/* The prefilter automaton: a rule runs only where its literal is, and never misses a match
 * because of it: literals longer than the automaton's keys, literals every match begins with
 * (^lit, ^(a|b)), a second literal of a URL pattern, literals inside "http://", one no DNS
 * name holds; one automaton for many rules whatever their count. */
static void test_prefilter(void **state)
{
	struct lists l;
	lists_of(&l,
		 "/averyveryverylongliteral\\.example/\n"
		 "/^(mon|tue|wed)\\d\\.pre$/\n"
		 "/^ads?\\.start/\n"
		 "||ad-*.amazon.test^\n"
		 "/http/\n"
		 "://only-url.\n"
		 "@@/\\.(gif|png)#(ad)/\n"
		 "/62.76.25.2(7|8)/\n",
		 false, false);
	struct nx_filter_side_stats st;
	nx_filter_side_stats(l.side, &st);
	assert_int_equal(st.regexes, 8);
	assert_int_equal(st.never, 1);	    /* the '#' rule: no name holds '#' */
	assert_int_equal(st.unfiltered, 0); /* every other rule has a literal */
	assert_true(st.ac_states > 10 && st.ac_dense >= 1 && st.ac_bytes > 0);
	static const char *const hit[] = {"averyveryverylongliteral.example",
					  "x.averyveryverylongliteral.example.org",
					  "mon1.pre",
					  "TUE2.pre",
					  "wed3.pre",
					  "ad.start.x",
					  "ads.start",
					  "ad-1.amazon.test",
					  "x.ad-y.amazon.test",
					  "http.example",
					  "a.xhttpx.b",
					  "only-url.example",
					  "a.62x76x25x27.b",
					  "62.76.25.28"};
	for (size_t i = 0; i < sizeof(hit) / sizeof(hit[0]); i++) {
		if (ACT(&l, hit[i]) != NX_FILTER_ACT_BLOCK) {
			print_error("%s not matched\n", hit[i]);
			fail();
		}
	}
	static const char *const miss[] = {
	    /* the automaton holds the first 8 bytes: the rest is compared at the hit */
	    "averyveryverylongliteraX.example", "averyver.example",
	    /* at the start only */
	    "xmon1.pre", "a.mon1.pre", "thu1.pre", "mon12.pre", "x.ads.start", "bads.start",
	    /* both literals of the pattern */
	    "x.amazon.test", "ad-x.amazon.testx", "bad-1.amazon.test",
	    /* "http" of "http://name/" is not in the name */
	    "example", "htt.ptx",
	    /* the URL rule needs "://only-url." at the name's start */
	    "x.only-url.example", "a.gif", "62.76.25.26"};
	for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
		if (ACT(&l, miss[i]) != NX_FILTER_ACT_NONE) {
			print_error("%s matched\n", miss[i]);
			fail();
		}
	}
	lists_free(&l);
	/* many rules, one walk: 2000 regexes of distinct literals, each found only in its own
	 * name (a hit per literal; the automaton's size grows with the literals, not its walk) */
	struct nx_filter_side_builder *b;
	assert_int_equal(nx_filter_side_builder_new(&b), 0);
	char line[64], err[256];
	for (unsigned i = 0; i < 2000; i++) {
		int n = snprintf(line, sizeof(line), "/k%ux\\.lit/", i * 7919u);
		assert_int_equal(nx_filter_side_add_line(b, line, (size_t)n,
							 NX_FILTER_ORIGIN_USER_DENY, err,
							 sizeof(err)),
				 0);
	}
	struct nx_filter_side *side;
	assert_int_equal(nx_filter_side_build(b, &side), 0);
	nx_filter_side_stats(side, &st);
	print_message("2000 regexes: automaton %llu states (%llu dense), %llu B\n",
		      (unsigned long long)st.ac_states, (unsigned long long)st.ac_dense,
		      (unsigned long long)st.ac_bytes);
	for (unsigned i = 0; i < 2000; i += 97) {
		char name[64];
		uint8_t w[NX_DNS_NAME_MAX];
		snprintf(name, sizeof(name), "a.k%ux.lit", i * 7919u);
		int wl = nx_dns_name_from_text(name, w);
		struct nx_filter_qctx q = {
		    .wire = w, .wlen = (size_t)wl, .qtype = 1, .eligible = ~0ull};
		struct nx_filter_result r;
		assert_int_equal(nx_filter_lists_decide(NULL, side, &q, &r), NX_FILTER_ACT_BLOCK);
		size_t tl;
		const char *t = nx_filter_side_rule_text(side, r.side_rule, &tl);
		char want[64];
		int wn = snprintf(want, sizeof(want), "/k%ux\\.lit/", i * 7919u);
		assert_int_equal(tl, (size_t)wn);
		assert_memory_equal(t, want, tl);
		snprintf(name, sizeof(name), "a.k%uy.lit", i * 7919u);
		wl = nx_dns_name_from_text(name, w);
		q.wlen = (size_t)wl;
		assert_int_equal(nx_filter_lists_decide(NULL, side, &q, &r), NX_FILTER_ACT_NONE);
	}
	nx_filter_side_free(side);
	nx_filter_lists_thread_done();
}

/* User rules of the AdGuard language limited to config groups: the rule applies only to a
 * client in one of them; the same rule without groups applies to everyone. */
static void test_user_groups(void **state)
{
	struct nx_filter_side_builder *b;
	assert_int_equal(nx_filter_side_builder_new(&b), 0);
	char err[256];
	const char *kids = "||games.test^$dnstype=A", *all = "/^ads[0-9]\\./";
	assert_int_equal(nx_filter_side_add_line_groups(b, kids, strlen(kids),
							NX_FILTER_ORIGIN_USER_DENY, 1ull << 2, err,
							sizeof(err)),
			 0);
	assert_int_equal(nx_filter_side_add_line_groups(
			     b, all, strlen(all), NX_FILTER_ORIGIN_USER_DENY, 0, err, sizeof(err)),
			 0);
	struct nx_filter_side *side;
	assert_int_equal(nx_filter_side_build(b, &side), 0);
	uint8_t w[NX_DNS_NAME_MAX];
	struct nx_filter_result r;
	int wl = nx_dns_name_from_text("x.games.test", w);
	struct nx_filter_qctx q = {.wire = w, .wlen = (size_t)wl, .qtype = 1, .groups = 1ull << 2};
	assert_int_equal(nx_filter_lists_decide(NULL, side, &q, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.reason, NX_FILTER_R_user_deny);
	q.groups = 1ull << 0 | 1ull << 3; /* other groups */
	assert_int_equal(nx_filter_lists_decide(NULL, side, &q, &r), NX_FILTER_ACT_NONE);
	q.groups = 1ull << 2 | 1ull << 5;
	q.qtype = 28; /* the rule's own modifiers still apply */
	assert_int_equal(nx_filter_lists_decide(NULL, side, &q, &r), NX_FILTER_ACT_NONE);
	wl = nx_dns_name_from_text("ads1.test", w);
	q = (struct nx_filter_qctx){.wire = w, .wlen = (size_t)wl, .qtype = 1, .groups = 0};
	assert_int_equal(nx_filter_lists_decide(NULL, side, &q, &r), NX_FILTER_ACT_BLOCK);
	nx_filter_side_free(side);
	nx_filter_lists_thread_done();
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The stated bound: a crafted exponential pattern against a crafted name stops at
 * NX_FILTER_RE_MATCH_LIMIT steps (counted), however the name and the pattern are chosen. */
static void test_regex_bound(void **state)
{
	struct lists l;
	lists_of(&l, "/^(a|aa)+$/\n/^(a|a?)+$/\n/(x+x+)+y/\n", false, false);
	char name[80];
	memset(name, 'a', 62);
	memcpy(name + 62, "b.x", 4);
	uint64_t hits0 = nx_stat_read(NX_STAT_FILTER_REGEX_LIMIT);
	double t0 = now_s();
	for (int i = 0; i < 20; i++) {
		assert_int_equal(ACT(&l, name), NX_FILTER_ACT_NONE);
	}
	double per_query = (now_s() - t0) / 20;
	uint64_t hits = nx_stat_read(NX_STAT_FILTER_REGEX_LIMIT) - hits0;
	print_message("pathological regex: %.3f ms per query, %llu limit hits\n", per_query * 1e3,
		      (unsigned long long)hits);
	/* without the limit ^(a|aa)+$ on 62 a's is ~fib(62) = 4e12 steps: hours */
	assert_true(hits >= 20);
	/* 3 regexes x 2 subjects x 20000 steps: well under 50 ms even under ASan */
	assert_true(per_query < 0.05);
	lists_free(&l);
}

static void test_hosts_answers(void **state)
{
	struct lists l;
	const char *hosts = "0.0.0.0 null.lan\n10.0.0.5 nas.lan nas2.lan\n10.0.0.6 nas.lan\n"
			    "fd00::5 nas.lan\n127.0.0.1 lo.lan\n";
	lists_of(&l, hosts, true, false);
	uint8_t buf[512];
	struct nx_filter_result r;
	uint16_t type[8], rdlen[8];
	const uint8_t *rd[8];
	assert_int_equal(ACT(&l, "null.lan"), NX_FILTER_ACT_BLOCK);
	int len = rewrite(&l, "nas.lan", 1, buf, sizeof(buf), &r);
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_hosts);
	assert_int_equal(r.rewrite, NX_FILTER_RW_HOSTS);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 2);
	assert_memory_equal(rd[0], "\x0a\x00\x00\x05", 4);
	assert_memory_equal(rd[1], "\x0a\x00\x00\x06", 4);
	len = rewrite(&l, "nas.lan", 28, buf, sizeof(buf), &r);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 1);
	assert_int_equal(rdlen[0], 16);
	len = rewrite(&l, "nas.lan", 16, buf, sizeof(buf), &r);
	assert_int_equal(answers(buf, len, type, rd, rdlen, 8), 0);
	assert_int_equal(ACT(&l, "sub.nas.lan"), NX_FILTER_ACT_NONE); /* hosts: exact */
	assert_int_equal(ACT(&l, "lo.lan"), NX_FILTER_ACT_BLOCK);     /* null address */
	rewrite(&l, "nas2.lan", 1, buf, sizeof(buf), &r);
	assert_int_equal(r.rewrite, NX_FILTER_RW_HOSTS);
	assert_int_equal(l.rep.n_side, 4);
	lists_free(&l);
	/* hosts_answers: null -> every listed address blocks, nothing answers */
	lists_of(&l, hosts, false, false);
	assert_int_equal(decide(&l, &(struct q){"nas.lan"}, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.rewrite, NX_FILTER_RW_NONE);
	assert_int_equal(l.rep.n_side, 0);
	lists_free(&l);
}

static void test_subdomains(void **state)
{
	struct lists l;
	lists_of(&l, "ads.example\n0.0.0.0 t.example\n", false, true);
	struct nx_filter_result r;
	assert_int_equal(decide(&l, &(struct q){"ads.example"}, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_domain);
	assert_int_equal(decide(&l, &(struct q){"x.y.ads.example"}, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_wildcard);
	assert_int_equal(ACT(&l, "a.t.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "notads.example"), NX_FILTER_ACT_NONE);
	lists_free(&l);
	lists_of(&l, "ads.example\n", false, false);
	assert_int_equal(ACT(&l, "x.ads.example"), NX_FILTER_ACT_NONE); /* default: exact */
	lists_free(&l);
}

/* Indexed rules are looked up only when some label of the query has the (length, first byte,
 * last byte) key of an indexed name's first label: the name and each parent, any case, the
 * key's false positives (same key, other label) still refused by the index. The snapshot probe
 * over the copy's label offsets decides as the text matcher. */
static void test_label_prefilter(void **state)
{
	struct lists l;
	lists_of(&l,
		 "||ads.example^$dnstype=A\n|exact-only.test^$dnstype=A\n"
		 "||averyverylonglabel.example.org^$dnstype=A\n*.wild.example$dnstype=A\n"
		 "||plain.example^\n@@||ok.plain.example^\n*.w.example\n",
		 false, false);
	struct nx_filter_result r;
	static const char *const hit[] = {"ads.example",	 "ADS.Example", "x.y.AdS.example",
					  "exact-only.test",	 "EXACT-ONLY.TEST",
					  "averyverylonglabel.example.org",
					  "a.AveryVeryLongLabel.example.org", "x.wild.example"};
	for (size_t i = 0; i < sizeof(hit) / sizeof(hit[0]); i++) {
		assert_int_equal(decide(&l, &(struct q){hit[i]}, &r), NX_FILTER_ACT_BLOCK);
		assert_int_equal(r.reason, NX_FILTER_R_blocklist_rule);
		assert_int_equal(ACT(&l, hit[i], .qtype = 28), NX_FILTER_ACT_NONE);
	}
	/* same first-label key (a?s, e?y), other names; the apex of a *.x rule; a parent only */
	static const char *const miss[] = {"axs.example", "ads.examplf", "x.exact-only.test",
					   "exaaa-only.test", "wild.example", "example",
					   "averyverylonglabel.example.orf"};
	for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
		assert_int_equal(decide(&l, &(struct q){miss[i]}, &r), NX_FILTER_ACT_NONE);
	}
	static const char *const snap[] = {"plain.example", "a.b.plain.example", "ok.plain.example",
					   "x.ok.plain.example", "w.example", "a.w.example",
					   "example", "nothing.test", "a.b.c.d.e.f.g"};
	for (size_t i = 0; i < sizeof(snap) / sizeof(snap[0]); i++) {
		struct nx_filter_result a, b;
		uint16_t starts[128];
		unsigned nl = 0;
		size_t len = strlen(snap[i]);
		starts[nl++] = 0;
		for (size_t k = 0; k < len; k++) {
			if (snap[i][k] == '.') {
				starts[nl++] = (uint16_t)(k + 1);
			}
		}
		nx_filter_snap_match(l.snap, snap[i], len, ~0ull, &a);
		nx_filter_snap_match_labels(l.snap, snap[i], len, starts, nl, ~0ull, &b);
		assert_int_equal(a.action, b.action);
		assert_int_equal(a.reason, b.reason);
		assert_int_equal(a.source, b.source);
		assert_int_equal(a.matched_off, b.matched_off);
		assert_int_equal(a.matched_len, b.matched_len);
		assert_int_equal(decide(&l, &(struct q){snap[i]}, &r), a.action);
		assert_int_equal(r.reason, a.reason);
	}
	assert_int_equal(ACT(&l, "ok.plain.example"), NX_FILTER_ACT_ALLOW);
	assert_int_equal(ACT(&l, "w.example"), NX_FILTER_ACT_NONE);
	/* the snapshot's match through the label offsets: matched_len runs to the end of the
	 * wire name, past its root label when the buffer holds one, else to wlen */
	uint8_t w[NX_DNS_NAME_MAX];
	int wl = nx_dns_name_from_text("a.B.plain.example", w);
	assert_true(wl > 0 && w[wl - 1] == 0);
	for (int drop = 0; drop <= 1; drop++) {
		struct nx_filter_qctx q = {
		    .wire = w, .wlen = (size_t)(wl - drop), .qtype = 1, .eligible = ~0ull};
		assert_int_equal(nx_filter_lists_decide(l.snap, l.side, &q, &r), NX_FILTER_ACT_BLOCK);
		assert_int_equal(r.matched_off, 4);
		assert_int_equal(r.matched_len, wl - drop - 4);
	}
	lists_free(&l);
}

/* The walk's paths: a key that runs across a dot (the state at the label's end is sparse or
 * has keys), upper case on either side of it, a rule that runs without a hit (the scan is
 * skipped only when none exists), an unclean name (never scanned), and the label key's
 * false positives (same key as "ads", another label: the hash runs and finds nothing). */
static void test_walk_paths(void **state)
{
	(void)state;
	struct lists l;
	lists_of(&l, "/track\\.me/\n/ads[0-9]\\.t/\n||ads.example^$dnstype=A\n", false, false);
	static const char *const hit[] = {"track.me",	  "x.track.me.example", "TRACK.ME",
					  "a.Track.mE.b", "xtrack.mex",		"ads1.t",
					  "x.ADS2.T.y",	  "ads.example",	"a.b.ADS.example"};
	for (size_t i = 0; i < sizeof(hit) / sizeof(hit[0]); i++) {
		if (ACT(&l, hit[i]) != NX_FILTER_ACT_BLOCK) {
			print_error("%s not matched\n", hit[i]);
			fail();
		}
	}
	/* "qabcdefgm" and "ads": the same label key (side_label_key), so the hash runs */
	assert_int_equal(side_label_key(9, 'q', 'm'), side_label_key(3, 'a', 's'));
	static const char *const miss[] = {"track.mx",
					   "trackme",
					   "ads.t",
					   "adsx.t",
					   "qabcdefgm.example",
					   "QABCDEFGM.EXAMPLE",
					   "x.qabcdefgm.example",
					   "ads.examplf",
					   "example"};
	for (size_t i = 0; i < sizeof(miss) / sizeof(miss[0]); i++) {
		if (ACT(&l, miss[i]) != NX_FILTER_ACT_NONE) {
			print_error("%s matched\n", miss[i]);
			fail();
		}
	}
	/* a byte that is no list-name byte (its own class in the walk): scanned rules never run
	 * on the name, indexed ones still find the clean parents right of the label */
	static const char *const unclean[] = {"x+y.track.me", "track.m+e", "a+.ads1.t",
					      "ads.ex+ample", "ads1.t+"};
	for (size_t i = 0; i < sizeof(unclean) / sizeof(unclean[0]); i++) {
		if (ACT(&l, unclean[i]) != NX_FILTER_ACT_NONE) {
			print_error("%s matched\n", unclean[i]);
			fail();
		}
	}
	assert_int_equal(ACT(&l, "x+y.ads.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "a.x!Y.ADS.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "ads1.t.x+y"), NX_FILTER_ACT_NONE);
	lists_free(&l);
	/* a rule without a literal runs on every clean name: no hit needed */
	lists_of(&l, "$dnstype=AAAA\n/ads[0-9]\\.t/\n", false, false);
	assert_int_equal(ACT(&l, "nothing.test", .qtype = 28), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "nothing.test"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "ads1.t"), NX_FILTER_ACT_BLOCK);
	lists_free(&l);
}

static void test_eligible_and_snapshot_size(void **state)
{
	struct lists l;
	/* side rules never become snapshot entries: bytes per entry do not change */
	lists_of(&l, "||a.example^\n||b.example^$client=10.0.0.1\n/re[0-9]/\n", false, false);
	assert_int_equal(nx_filter_snap_entries(l.snap), 1);
	assert_int_equal(l.rep.n_side, 2);
	struct nx_filter_qctx q;
	qctx_of(&(struct q){"b.example", .ip = "10.0.0.1"}, &q);
	struct nx_filter_result r;
	assert_int_equal(nx_filter_lists_decide(l.snap, l.side, &q, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.source, 0);
	q.eligible = 0; /* source 0 not in this client's groups */
	assert_int_equal(nx_filter_lists_decide(l.snap, l.side, &q, &r), NX_FILTER_ACT_NONE);
	lists_free(&l);
}

static void test_add_line_errors(void **state)
{
	static const struct {
		const char *line, *msg;
	} bad[] = {
	    {"||x.example^$unknown", "unknown modifier 'unknown'"},
	    {"||x.example^$dnstype=", "$dnstype needs a value"},
	    {"||x.example^$dnstype=TXT|", "$dnstype: empty value after '|'"},
	    {"||x.example^$dnstype=NONE", "$dnstype: unknown type 'NONE'"},
	    {"*^$denyallow=~x.example", "$denyallow values cannot be negated"},
	    {"*^$denyallow", "$denyallow needs a value"},
	    {"$third-party", "unknown modifier 'third-party'"},
	    {"*$important", "rule matches every name"},
	    {"/unclosed(/", "regex: missing closing parenthesis"},
	    {"||x.example^$dnsrewrite=NOERROR;MX;10 mx.example", "unsupported type 'MX'"},
	    {"||x.example^$dnsrewrite=NOERROR;A;not-an-ip", "is not an A address"},
	    {"||x.example^$", "'$' without modifiers"},
	    {"||bad..name^$important", "not a usable host name"},
	    {"10.0.0.1 localhost", "not a usable name (localhost)"},
	};
	struct nx_filter_side_builder *b;
	assert_int_equal(nx_filter_side_builder_new(&b), 0);
	char err[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = nx_filter_side_add_line(b, bad[i].line, strlen(bad[i].line),
						 NX_FILTER_ORIGIN_USER_DENY, err, sizeof(err));
		if (rc != NX_EFORMAT || !strstr(err, bad[i].msg)) {
			print_error("%s: rc %d, '%s' (want '%s')\n", bad[i].line, rc, err,
				    bad[i].msg);
			fail();
		}
	}
	/* good user rules: plain name exact, *.x proper subdomains, /re/, AdGuard syntax */
	static const char *const good[] = {"exact.example", "*.wild.example",
					   "/^re[0-9]\\./", "||sub.example^$dnstype=AAAA",
					   "# comment",	    ""};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(nx_filter_side_add_line(b, good[i], strlen(good[i]),
							 NX_FILTER_ORIGIN_USER_DENY, err,
							 sizeof(err)),
				 0);
	}
	assert_int_equal(nx_filter_side_add_line(b, "allowed.example", 15,
						 NX_FILTER_ORIGIN_USER_ALLOW, err, sizeof(err)),
			 0);
	assert_int_equal(nx_filter_side_add_line(b, "x", 1, 99, err, sizeof(err)), -EINVAL);
	struct nx_filter_side *s;
	assert_int_equal(nx_filter_side_build(b, &s), 0);
	struct nx_filter_side_stats st;
	nx_filter_side_stats(s, &st);
	assert_int_equal(st.rules, 5);
	assert_int_equal(st.refused, 14);
	struct lists l = {.side = s};
	struct nx_filter_result r;
	assert_int_equal(decide(&l, &(struct q){"exact.example"}, &r), NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.reason, NX_FILTER_R_user_deny);
	assert_int_equal(r.source, -1);
	assert_int_equal(ACT(&l, "x.exact.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "wild.example"), NX_FILTER_ACT_NONE);
	assert_int_equal(ACT(&l, "a.wild.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "re5.example"), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "sub.example", .qtype = 28), NX_FILTER_ACT_BLOCK);
	assert_int_equal(ACT(&l, "sub.example", .qtype = 1), NX_FILTER_ACT_NONE);
	assert_int_equal(decide(&l, &(struct q){"allowed.example"}, &r), NX_FILTER_ACT_ALLOW);
	assert_int_equal(r.reason, NX_FILTER_R_user_allow);
	nx_filter_side_free(s);
}

static void test_caps_and_memory(void **state)
{
	int64_t before = th_owner_bytes(NX_OWNER_filter_side);
	struct nx_filter_side_builder *b;
	assert_int_equal(nx_filter_side_builder_new(&b), 0);
	char line[64], err[256];
	unsigned refused = 0;
	for (unsigned i = 0; i < NX_FILTER_SIDE_REGEX_MAX + 3; i++) {
		int n = snprintf(line, sizeof(line), "/^r%u\\./", i);
		int rc = nx_filter_side_add_line(b, line, (size_t)n, 0, err, sizeof(err));
		if (rc == NX_ELIMIT) {
			assert_non_null(strstr(err, "regex / pattern rules"));
			refused++;
		} else {
			assert_int_equal(rc, 0);
		}
	}
	assert_int_equal(refused, 3);
	struct nx_filter_side *s;
	assert_int_equal(nx_filter_side_build(b, &s), 0);
	struct nx_filter_side_stats st;
	nx_filter_side_stats(s, &st);
	assert_int_equal(st.regexes, NX_FILTER_SIDE_REGEX_MAX);
	int64_t held = th_owner_bytes(NX_OWNER_filter_side) - before;
	print_message("side: %u regex rules, %llu bytes counted, %lld on the ledger\n",
		      NX_FILTER_SIDE_REGEX_MAX, (unsigned long long)st.bytes, (long long)held);
	assert_true(held > 0);
	assert_true((uint64_t)held >= st.bytes / 2);
	nx_filter_side_free(s);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_side), before);
	nx_filter_side_free(NULL);
	nx_filter_side_builder_free(NULL);
}

/* Concurrent readers: four threads decide over one side structure (regexes included) and
 * must all see the single-thread answers; each thread's PCRE2 block goes back at its exit. */
struct reader {
	const struct lists *l;
	unsigned wrong;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	static const struct {
		const char *host;
		enum nx_filter_action want;
	} probes[] = {{"ad12.example", NX_FILTER_ACT_BLOCK},
		      {"ad7.example", NX_FILTER_ACT_ALLOW},
		      {"x.example", NX_FILTER_ACT_NONE},
		      {"t.example", NX_FILTER_ACT_BLOCK}};
	for (int i = 0; i < 20000; i++) {
		struct nx_filter_qctx q;
		uint8_t w[NX_DNS_NAME_MAX];
		const char *h = probes[i % 4].host;
		memset(&q, 0, sizeof(q));
		q.wlen = (size_t)nx_dns_name_from_text(h, w);
		q.wire = w;
		q.qtype = 1;
		q.eligible = ~0ull;
		static const char *const tag[] = {"pc"};
		q.tags = tag;
		q.ntags = 1;
		struct nx_filter_result r;
		rd->wrong +=
		    nx_filter_lists_decide(rd->l->snap, rd->l->side, &q, &r) != probes[i % 4].want;
	}
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	struct lists l;
	lists_of(&l, "/^ad[0-9]+\\./\n@@/^ad7\\./\n||t.example^$ctag=pc\n", false, false);
	int64_t before = th_owner_bytes(NX_OWNER_filter_side);
	pthread_t th[4];
	struct reader rd[4];
	for (int i = 0; i < 4; i++) {
		rd[i] = (struct reader){&l, 0};
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(rd[i].wrong, 0);
	}
	/* the four threads' PCRE2 blocks were returned by the thread-exit destructor */
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_side), before);
	lists_free(&l);
}

static int setup(void **state)
{
	g_dir = th_tmpdir();
	return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
	nx_filter_lists_thread_done();
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_side), 0); /* every side freed */
	th_rmtree(g_dir);
	free(g_dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_important),
	    cmocka_unit_test(test_badfilter),
	    cmocka_unit_test(test_client),
	    cmocka_unit_test(test_ctag_dnstype),
	    cmocka_unit_test(test_denyallow),
	    cmocka_unit_test(test_dnsrewrite),
	    cmocka_unit_test(test_regex),
	    cmocka_unit_test(test_regex_bound),
	    cmocka_unit_test(test_prefilter),
	    cmocka_unit_test(test_user_groups),
	    cmocka_unit_test(test_hosts_answers),
	    cmocka_unit_test(test_subdomains),
	    cmocka_unit_test(test_label_prefilter),
	    cmocka_unit_test(test_walk_paths),
	    cmocka_unit_test(test_eligible_and_snapshot_size),
	    cmocka_unit_test(test_add_line_errors),
	    cmocka_unit_test(test_caps_and_memory),
	    cmocka_unit_test(test_concurrent_readers),
	    cmocka_unit_test(test_badfilter_origins),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

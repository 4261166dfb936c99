/* filter.*, groups, clients and cache.*: defaults, valid forms, errors at file:line:col. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <regex.h>

#include "filter/side.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"

static void test_defaults(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("");
	assert_true(c->filter_enabled);
	assert_int_equal(c->n_sources, 0);
	assert_null(c->sources);
	assert_int_equal(c->refresh_interval_s, 86400);
	assert_int_equal(c->n_allow_rules, 0);
	assert_int_equal(c->n_deny_rules, 0);
	assert_string_equal(c->block_mode, "null");
	assert_int_equal(c->block_mode_id, NX_CONF_BLOCK_NULL);
	assert_false(c->has_block_v4);
	assert_false(c->has_block_v6);
	assert_int_equal(c->block_ttl, 10);
	assert_int_equal(c->n_groups, 1);
	assert_string_equal(c->groups[0].name, "default");
	assert_int_equal(c->groups[0].sources_mask, 0);
	assert_true(c->groups[0].filtering);
	assert_int_equal(c->n_clients, 0);
	assert_int_equal(c->n_locals, 0);
	assert_int_equal(c->cache_size, 10000);
	assert_int_equal(c->cache_min_ttl, 0);
	assert_int_equal(c->cache_max_ttl, 86400);
	assert_int_equal(c->cache_neg_max_ttl, 3600);
	assert_false(c->cache_serve_stale);
	assert_false(c->cache_prefetch);
	nx_conf_free(c);

	/* empty sections and null lists are the defaults too */
	c = load_ok("filter:\n  sources:\n  allow:\n  deny: []\ngroups:\nclients:\n"
		    "local_records:\ncache: {}\n");
	assert_int_equal(c->n_sources, 0);
	assert_int_equal(c->n_groups, 1);
	assert_int_equal(c->n_clients, 0);
	assert_int_equal(c->n_locals, 0);
	nx_conf_free(c);
}

/* ---- filter.sources ---- */

static void test_sources(void **state)
{
	(void)state;
	char cwd[PATH_MAX], want[PATH_MAX + 64];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	struct nx_conf *c =
	    load_ok("filter:\n"
		    "  enabled: false\n"
		    "  sources:\n"
		    "    - name: ads\n"
		    "      url: \"https://example.com/hosts.txt\"\n"
		    "    - {name: mine-2, path: lists/mine.txt, format: adblock,\n"
		    "       groups: [kids, default], enabled: false}\n"
		    "    - {name: abs_1, path: /srv/block.txt, format: wildcard}\n"
		    "    - {name: h, url: HTTP://x, format: hosts, groups: [kids]}\n"
		    "groups:\n"
		    "  kids: {}\n");
	assert_false(c->filter_enabled);
	assert_int_equal(c->n_sources, 4);
	const struct nx_conf_source *s = c->sources;
	assert_string_equal(s[0].name, "ads");
	assert_string_equal(s[0].url, "https://example.com/hosts.txt");
	assert_null(s[0].path);
	assert_string_equal(s[0].format, "auto");
	assert_int_equal(s[0].n_groups, 1);
	assert_string_equal(s[0].groups[0], "default");
	assert_true(s[0].enabled);

	assert_string_equal(s[1].name, "mine-2");
	assert_null(s[1].url);
	snprintf(want, sizeof(want), "%s/lists/mine.txt", cwd); /* load_string: the cwd */
	assert_string_equal(s[1].path, want);
	assert_string_equal(s[1].format, "adblock");
	assert_int_equal(s[1].n_groups, 2);
	assert_string_equal(s[1].groups[0], "kids");
	assert_string_equal(s[1].groups[1], "default");
	assert_false(s[1].enabled);

	assert_string_equal(s[2].path, "/srv/block.txt");
	assert_string_equal(s[2].format, "wildcard");
	assert_string_equal(s[3].url, "HTTP://x");
	assert_string_equal(s[3].format, "hosts");

	/* default: ads, abs_1 (disabled mine-2 is in no mask); kids: h */
	assert_int_equal(c->n_groups, 2);
	assert_int_equal(c->groups[0].sources_mask, 0x5);
	assert_string_equal(c->groups[1].name, "kids");
	assert_int_equal(c->groups[1].sources_mask, 0x8);
	nx_conf_free(c);
}

/* hosts_answers defaults by source kind (a downloaded list may not redirect names); subdomains
 * defaults to exact entries. */
static void test_source_answers_subdomains(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("filter:\n"
				    "  sources:\n"
				    "    - {name: u, url: \"https://example.com/h.txt\"}\n"
				    "    - {name: p, path: /srv/hosts}\n"
				    "    - {name: u2, url: \"https://example.com/h2.txt\", "
				    "hosts_answers: listed, subdomains: true}\n"
				    "    - {name: p2, path: /srv/h2, hosts_answers: null}\n");
	const struct nx_conf_source *s = c->sources;
	assert_false(s[0].hosts_listed);
	assert_false(s[0].hosts_answers_set);
	assert_false(s[0].subdomains);
	assert_true(s[1].hosts_listed);
	assert_true(s[2].hosts_listed);
	assert_true(s[2].hosts_answers_set);
	assert_true(s[2].subdomains);
	assert_false(s[3].hosts_listed);
	nx_conf_free(c);
	load_bad("filter:\n  sources:\n    - {name: a, path: x, hosts_answers: yes}\n",
		 "t.yaml:3:41: filter.sources[0].hosts_answers: 'yes' is not one of null, listed");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, subdomains: 1}\n",
		 "t.yaml:3:38: filter.sources[0].subdomains: expected true or false, got '1'");
}

static void test_source_path_from_file(void **state)
{
	(void)state;
	const char *dir = getenv("TMPDIR");
	char tmpl[512];
	snprintf(tmpl, sizeof(tmpl), "%s/nx-conf-dir-XXXXXX", dir && *dir ? dir : "/tmp");
	assert_non_null(mkdtemp(tmpl));
	char path[600];
	snprintf(path, sizeof(path), "%s/nxdns.yaml", tmpl);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("filter:\n  sources:\n    - {name: a, path: sample.txt}\n"
	      "    - {name: b, path: ../up/b.txt}\n",
	      fp);
	fclose(fp);
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	char want[PATH_MAX + 700];
	snprintf(want, sizeof(want), "%s/sample.txt", tmpl);
	assert_string_equal(c->sources[0].path, want);
	snprintf(want, sizeof(want), "%s/../up/b.txt", tmpl);
	assert_string_equal(c->sources[1].path, want);
	nx_conf_free(c);

	/* a config path relative to the cwd: its directory is made absolute from the cwd */
	char old[PATH_MAX];
	assert_non_null(getcwd(old, sizeof(old)));
	char *slash = strrchr(tmpl, '/');
	*slash = '\0';
	assert_int_equal(chdir(tmpl), 0);
	char rel[600];
	snprintf(rel, sizeof(rel), "%s/nxdns.yaml", slash + 1);
	int rc = nx_conf_load(rel, &c, err, sizeof(err));
	char real[PATH_MAX];
	assert_non_null(getcwd(real, sizeof(real))); /* TMPDIR may be behind a symlink */
	assert_int_equal(chdir(old), 0);
	*slash = '/';
	assert_int_equal(rc, 0);
	snprintf(want, sizeof(want), "%s/%s/sample.txt", real, slash + 1);
	assert_string_equal(c->sources[0].path, want);
	nx_conf_free(c);
	unlink(path);
	rmdir(tmpl);
}

static void test_source_errors(void **state)
{
	(void)state;
	load_bad("filter:\n  sources:\n    - {name: ads, url: \"http://a\"}\n"
		 "    - {name: ads, path: x}\n",
		 "t.yaml:4:14: filter.sources[1].name: duplicate source 'ads' (same as "
		 "filter.sources[0])");
	load_bad("filter:\n  sources:\n    - name: ads\n      url: \"http://a\"\n"
		 "      path: /x\n",
		 "t.yaml:5:7: filter.sources[0]: give either url or path, not both");
	load_bad("filter:\n  sources:\n    - name: ads\n      path: /x\n      url: \"http://a\"\n",
		 "t.yaml:5:7: filter.sources[0]: give either url or path, not both");
	load_bad("filter:\n  sources:\n    - name: ads\n      format: hosts\n",
		 "t.yaml:3:7: filter.sources[0]: needs a url or a path");
	load_bad("filter:\n  sources:\n    - {url: \"http://a\"}\n",
		 "t.yaml:3:7: filter.sources[0]: missing 'name'");
	load_bad("filter:\n  sources:\n    - {name: Ads, url: \"http://a\"}\n",
		 "t.yaml:3:14: filter.sources[0].name: 'Ads' is not a valid name (1..64 of a-z, "
		 "0-9, '_', '-', starting with a letter or digit)");
	load_bad("filter:\n  sources:\n    - {name: _x, url: \"http://a\"}\n",
		 "t.yaml:3:14: filter.sources[0].name: '_x' is not a valid name (1..64 of a-z, "
		 "0-9, '_', '-', starting with a letter or digit)");
	load_bad("filter:\n  sources:\n    - {name: a, url: \"ftp://a/b\"}\n",
		 "t.yaml:3:22: filter.sources[0].url: 'ftp://a/b' is not an http:// or https:// "
		 "URL");
	load_bad(
	    "filter:\n  sources:\n    - {name: a, url: \"https://\"}\n",
	    "t.yaml:3:22: filter.sources[0].url: 'https://' is not an http:// or https:// URL");
	load_bad("filter:\n  sources:\n    - {name: a, url: \"https://a b\"}\n",
		 "t.yaml:3:22: filter.sources[0].url: URL contains a space or control character");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, format: abp}\n",
		 "t.yaml:3:34: filter.sources[0].format: 'abp' is not one of auto, hosts, domains, "
		 "adblock, wildcard");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, urll: y}\n",
		 "t.yaml:3:26: unknown key 'filter.sources[0].urll' (did you mean 'url'?)");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, path: y}\n",
		 "t.yaml:3:26: duplicate key 'filter.sources[0].path' (first at line 3)");
	load_bad(
	    "filter:\n  sources:\n    - ads\n",
	    "t.yaml:3:7: filter.sources[0]: expected a mapping {name, url or path, ...}, got a "
	    "scalar");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, enabled: no}\n",
		 "t.yaml:3:35: filter.sources[0].enabled: expected true or false, got 'no'");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, groups: []}\n",
		 "t.yaml:3:34: filter.sources[0].groups: needs 1..64 entries, got 0");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, groups: [default, kids]}\n",
		 "t.yaml:3:44: filter.sources[0].groups[1]: unknown group 'kids'");
	load_bad("filter:\n  sources:\n    - {name: a, path: x, groups: [Kids]}\n",
		 "t.yaml:3:35: filter.sources[0].groups[0]: unknown group 'Kids'");

	/* at most 64 sources */
	char y[8192];
	size_t n = (size_t)snprintf(y, sizeof(y), "filter:\n  sources:\n");
	for (int i = 0; i < 65; i++) {
		n += (size_t)snprintf(y + n, sizeof(y) - n, "    - {name: s%d, path: p}\n", i);
	}
	load_bad(y, "t.yaml:3:5: filter.sources: needs 0..64 entries, got 65");
	y[n - strlen("    - {name: s64, path: p}\n")] = '\0';
	struct nx_conf *c = load_ok(y);
	assert_int_equal(c->n_sources, 64);
	assert_int_equal(c->groups[0].sources_mask, UINT64_MAX);
	nx_conf_free(c);
}

/* ---- filter.refresh_interval ---- */

static void test_duration(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		unsigned secs;
	} ok[] = {
	    {"90m", 5400},    {"24h", 86400}, {"3600", 3600},	{"\"120\"", 120}, {"60s", 60},
	    {"30d", 2592000}, {"1m", 60},     {"'2d'", 172800}, {"60", 60},	  {"1h", 3600},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char y[128];
		snprintf(y, sizeof(y), "filter:\n  refresh_interval: %s\n", ok[i].text);
		struct nx_conf *c = load_ok(y);
		assert_int_equal(c->refresh_interval_s, ok[i].secs);
		nx_conf_free(c);
	}
#define BAD_DUR(t)                                                                                 \
	"t.yaml:2:21: filter.refresh_interval: expected a duration (seconds, or a "                \
	"number with s, m, h or d: 90m, 24h), got " t
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"5x", BAD_DUR("'5x'")},
	    {"1.5h", BAD_DUR("'1.5h'")},
	    {"h", BAD_DUR("'h'")},
	    {"24H", BAD_DUR("'24H'")},
	    {"1h30m", BAD_DUR("'1h30m'")},
	    {"-60", BAD_DUR("'-60'")},
	    {"[1h]", BAD_DUR("a list")},
	    {"99999999999999", BAD_DUR("'99999999999999'")},
	    {"59", "t.yaml:2:21: filter.refresh_interval: 59 is out of range 1m..30d"},
	    {"59s", "t.yaml:2:21: filter.refresh_interval: 59s is out of range 1m..30d"},
	    {"31d", "t.yaml:2:21: filter.refresh_interval: 31d is out of range 1m..30d"},
	};
#undef BAD_DUR
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char y[128];
		snprintf(y, sizeof(y), "filter:\n  refresh_interval: %s\n", bad[i].text);
		load_bad(y, bad[i].msg);
	}
}

/* ---- filter.allow / filter.deny ---- */

static void test_rules(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("filter:\n"
				    "  allow: [Good.Example., \"*.CDN.example\", x_y-z.lan]\n"
				    "  deny:\n"
				    "    - ads.example\n"
				    "    - '*.tracker.example'\n"
				    "    - '/^AD[0-9]+\\./'\n");
	assert_int_equal(c->n_allow_rules, 3);
	assert_string_equal(c->allow_rules[0], "good.example");
	assert_string_equal(c->allow_rules[1], "*.cdn.example");
	assert_string_equal(c->allow_rules[2], "x_y-z.lan");
	assert_int_equal(c->n_deny_rules, 3);
	assert_string_equal(c->deny_rules[0], "ads.example");
	assert_string_equal(c->deny_rules[1], "*.tracker.example");
	assert_string_equal(c->deny_rules[2], "/^AD[0-9]+\\./"); /* regex text kept as written */
	nx_conf_free(c);
}

static void test_rule_errors(void **state)
{
	(void)state;
	/* a regex is PCRE2 (the side structure's): the message is the side parser's, at the field */
	load_bad("filter:\n  deny:\n    - ok.example\n    - /a(b/\n",
		 "t.yaml:4:7: filter.deny[1]: '/a(b/': regex: missing closing parenthesis at offset 3");
	char msg[256], want[512];
	load_bad("filter:\n  allow: [\"//\"]\n", "t.yaml:2:11: filter.allow[0]: '//': empty regex");
	const char *bad[] = {"/[z-a]/", "||x.example^$third-party", "||x.example^$dnstype=NONE",
			     "@@||x.example^$client="};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(nx_filter_side_line_ok(bad[i], strlen(bad[i]), msg, sizeof(msg)));
		assert_true(msg[0] != '\0');
		snprintf(want, sizeof(want), "t.yaml:2:11: filter.allow[0]: '%s': %s", bad[i], msg);
		char yaml[256];
		snprintf(yaml, sizeof(yaml), "filter:\n  allow: [\"%s\"]\n", bad[i]);
		load_bad(yaml, want);
	}
	/* an AdGuard-language rule may be limited to groups too (the user side structure keeps
	 * the mask with the rule) */
	struct nx_conf *gc = load_ok("groups:\n  kids: {}\nfilter:\n  deny:\n    - {rule: "
				     "'||x.example^$important', groups: [kids]}\n");
	uint64_t kids = 0;
	for (size_t g = 0; g < gc->n_groups; g++) {
		if (strcmp(gc->groups[g].name, "kids") == 0) {
			kids = 1ull << g;
		}
	}
	assert_true(kids != 0);
	assert_int_equal(nx_conf_rule_groups(gc, 1, 0), kids);
	nx_conf_free(gc);
	load_bad("filter:\n  deny: [a..b]\n",
		 "t.yaml:2:10: filter.deny[0]: 'a..b': not a name, *.name or /regex/ (empty label, "
		 "label longer than 63 bytes or name longer than 255)");
	load_bad("filter:\n  deny: [\"*\"]\n",
		 "t.yaml:2:10: filter.deny[0]: '*': not a name, *.name or /regex/ (names may "
		 "contain only letters, digits, '-', '_' and dots)");
	load_bad("filter:\n  deny: [\"*.\"]\n",
		 "t.yaml:2:10: filter.deny[0]: '*.': not a name, *.name or /regex/ (empty name)");
	load_bad("filter:\n  deny: [\"a.*.b\"]\n",
		 "t.yaml:2:10: filter.deny[0]: 'a.*.b': not a name, *.name or /regex/ (names may "
		 "contain only letters, digits, '-', '_' and dots)");
	load_bad("filter:\n  deny: [\"bücher.example\"]\n",
		 "t.yaml:2:10: filter.deny[0]: 'bücher.example': not a name, *.name or /regex/ "
		 "(non-ASCII name: write it in punycode (xn--...))");
	load_bad("filter:\n  deny: [[a]]\n",
		 "t.yaml:2:10: filter.deny[0]: expected a name, *.name or /regex/, got a list");
	load_bad("filter:\n  deny: ads.example\n",
		 "t.yaml:2:9: filter.deny: expected a list, got a scalar");
}

/* ---- block mode and addresses ---- */

static void test_block_mode(void **state)
{
	(void)state;
	static const struct {
		const char *mode;
		int id;
	} modes[] = {{"null", NX_CONF_BLOCK_NULL},
		     {"\"null\"", NX_CONF_BLOCK_NULL},
		     {"nxdomain", NX_CONF_BLOCK_NXDOMAIN},
		     {"refused", NX_CONF_BLOCK_REFUSED}};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char y[128];
		snprintf(y, sizeof(y), "filter:\n  block_mode: %s\n  block_ttl: 0\n",
			 modes[i].mode);
		struct nx_conf *c = load_ok(y);
		assert_int_equal(c->block_mode_id, modes[i].id);
		assert_int_equal(c->block_ttl, 0);
		nx_conf_free(c);
	}

	struct nx_conf *c = load_ok("filter:\n  block_mode: custom\n"
				    "  block_addresses: [\"192.0.2.1\", \"2001:db8::1\"]\n"
				    "  block_ttl: 86400\n");
	assert_int_equal(c->block_mode_id, NX_CONF_BLOCK_CUSTOM);
	assert_string_equal(c->block_mode, "custom");
	assert_true(c->has_block_v4);
	static const uint8_t v4[4] = {192, 0, 2, 1};
	assert_memory_equal(c->block_v4, v4, 4);
	assert_true(c->has_block_v6);
	static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
	assert_memory_equal(c->block_v6, v6, 16);
	assert_int_equal(c->block_ttl, 86400);
	nx_conf_free(c);

	c = load_ok("filter:\n  block_addresses: [\"::\"]\n  block_mode: custom\n");
	assert_false(c->has_block_v4);
	assert_true(c->has_block_v6);
	nx_conf_free(c);

	load_bad("filter:\n  block_mode: custom\n",
		 "t.yaml:2:15: filter.block_mode: custom needs filter.block_addresses (one IPv4 "
		 "and/or one IPv6 address)");
	load_bad("filter:\n  block_addresses: []\n  block_mode: custom\n",
		 "t.yaml:3:15: filter.block_mode: custom needs filter.block_addresses (one IPv4 "
		 "and/or one IPv6 address)");
	load_bad("filter:\n  block_mode: blackhole\n",
		 "t.yaml:2:15: filter.block_mode: 'blackhole' is not one of null, nxdomain, "
		 "refused, custom");
	load_bad("filter:\n  block_mode:\n",
		 "t.yaml:2:3: filter.block_mode: expected one of the listed words, got null");
	load_bad("filter:\n  block_addresses: [1.2.3.4, 5.6.7.8]\n",
		 "t.yaml:2:30: filter.block_addresses[1]: only one IPv4 address may be given");
	load_bad("filter:\n  block_addresses: [\"::1\", \"::2\"]\n",
		 "t.yaml:2:28: filter.block_addresses[1]: only one IPv6 address may be given");
	load_bad("filter:\n  block_addresses: [\"1.2.3.4:53\"]\n",
		 "t.yaml:2:21: filter.block_addresses[0]: '1.2.3.4:53' is not an IP address (no "
		 "port, no name)");
	load_bad("filter:\n  block_addresses: [a, b, c]\n",
		 "t.yaml:2:20: filter.block_addresses: needs 0..2 entries, got 3");
	load_bad("filter:\n  block_ttl: 86401\n",
		 "t.yaml:2:14: filter.block_ttl: 86401 is out of range 0..86400");
}

/* ---- groups ---- */

static void test_groups(void **state)
{
	(void)state;
	struct nx_conf *c =
	    load_ok("groups:\n"
		    "  kids:\n"
		    "    sources: [b, c]\n"
		    "  guests: {filtering: false}\n"
		    "  default: {sources: [d], filtering: true}\n"
		    "  empty:\n"
		    "filter:\n"
		    "  sources:\n"
		    "    - {name: a, url: \"http://a\"}\n"
		    "    - {name: b, url: \"http://b\", groups: [kids]}\n"
		    "    - {name: c, url: \"http://c\", groups: [guests, default]}\n"
		    "    - {name: d, url: \"http://d\", groups: [kids]}\n"
		    "    - {name: e, url: \"http://e\", groups: [kids], enabled: false}\n");
	assert_int_equal(c->n_groups, 4);
	/* default first, then file order */
	assert_string_equal(c->groups[0].name, "default");
	assert_int_equal(c->groups[0].sources_mask, 0x1 | 0x4 | 0x8);
	assert_true(c->groups[0].filtering);
	assert_string_equal(c->groups[1].name, "kids");
	assert_int_equal(c->groups[1].sources_mask, 0x2 | 0x4 | 0x8); /* e disabled */
	assert_true(c->groups[1].filtering);
	assert_string_equal(c->groups[2].name, "guests");
	assert_int_equal(c->groups[2].sources_mask, 0x4);
	assert_false(c->groups[2].filtering);
	assert_string_equal(c->groups[3].name, "empty");
	assert_int_equal(c->groups[3].sources_mask, 0);
	assert_true(c->groups[3].filtering);
	nx_conf_free(c);

	/* the default group may turn filtering off for unknown clients */
	c = load_ok("groups:\n  default: {filtering: false}\n");
	assert_int_equal(c->n_groups, 1);
	assert_false(c->groups[0].filtering);
	nx_conf_free(c);
}

static void test_group_errors(void **state)
{
	(void)state;
	load_bad("filter:\n  sources:\n    - {name: ads, path: x}\n"
		 "groups:\n  kids:\n    sources: [ads, adz]\n",
		 "t.yaml:6:20: groups.kids.sources[1]: unknown source 'adz' (did you mean 'ads'?)");
	load_bad("groups:\n  kids:\n    sources: [ads]\n",
		 "t.yaml:3:15: groups.kids.sources[0]: unknown source 'ads'");
	/* resolution happens after every key: the first unknown name in file order wins */
	load_bad("groups:\n  kids: {sources: [x]}\n"
		 "filter:\n  sources: [{name: a, path: p, groups: [y]}]\n",
		 "t.yaml:2:20: groups.kids.sources[0]: unknown source 'x'");
	load_bad("filter:\n  sources:\n    - {name: a, path: p, groups: [kid]}\n"
		 "groups:\n  kids: {}\n",
		 "t.yaml:3:35: filter.sources[0].groups[0]: unknown group 'kid' (did you mean "
		 "'kids'?)");
	load_bad("groups:\n  Kids: {}\n",
		 "t.yaml:2:3: groups: 'Kids' is not a valid group name (1..64 of a-z, 0-9, '_', "
		 "'-', starting with a letter or digit)");
	load_bad("groups:\n  kids: {filtring: false}\n",
		 "t.yaml:2:10: unknown key 'groups.kids.filtring' (did you mean 'filtering'?)");
	load_bad("groups:\n  kids: {filter: false}\n",
		 "t.yaml:2:10: unknown key 'groups.kids.filter'");
	load_bad("groups:\n  kids: {filtering: off}\n",
		 "t.yaml:2:21: groups.kids.filtering: expected true or false, got 'off'");
	load_bad("groups:\n  kids: [a]\n",
		 "t.yaml:2:9: groups.kids: expected a mapping, got a list");
	load_bad("groups:\n  kids: {}\n  kids: {}\n",
		 "t.yaml:3:3: duplicate key 'groups.kids' (first at line 2)");
	load_bad(
	    "groups: [kids]\n",
	    "t.yaml:1:9: groups: expected a mapping of group: {sources, filtering}, got a list");
	load_bad("groups:\n  kids: {sources: [\"A b\"]}\n",
		 "t.yaml:2:20: groups.kids.sources[0]: unknown source 'A b'");

	char y[8192];
	size_t n = (size_t)snprintf(y, sizeof(y), "groups:\n");
	for (int i = 0; i < 64; i++) {
		n += (size_t)snprintf(y + n, sizeof(y) - n, "  g%d: {}\n", i);
	}
	load_bad(y, "t.yaml:2:3: groups: at most 64 groups (\"default\" included), got 65");
	/* 63 others + default fits */
	y[n - strlen("  g63: {}\n")] = '\0';
	struct nx_conf *c = load_ok(y);
	assert_int_equal(c->n_groups, 64);
	nx_conf_free(c);
}

/* ---- clients and the policy lookup ---- */

static const char clients_yaml[] = "filter:\n"
				   "  sources:\n"
				   "    - {name: a, path: p}\n" /* default */
				   "    - {name: b, path: p, groups: [kids]}\n"
				   "    - {name: c, path: p, groups: [work]}\n"
				   "groups:\n"
				   "  kids: {}\n"
				   "  work: {}\n"
				   "  open: {filtering: false}\n"
				   "clients:\n"
				   "  - name: tablet\n"
				   "    ids: [192.168.1.50, \"fd00::50\"]\n"
				   "    groups: [kids]\n"
				   "  - name: office lan\n"
				   "    ids: [192.168.1.0/24]\n"
				   "    groups: [work, kids]\n"
				   "  - {name: printer, ids: [192.168.1.60], groups: [open]}\n"
				   "  - {name: mixed, ids: [192.168.1.61], groups: [open, work]}\n"
				   "  - {name: plain, ids: [\"10.1.0.0/16\"]}\n";

static void sa4(struct sockaddr_storage *ss, const char *ip)
{
	struct sockaddr_in *s = (struct sockaddr_in *)ss;
	memset(ss, 0, sizeof(*ss));
	s->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, ip, &s->sin_addr), 1);
}

static void sa6(struct sockaddr_storage *ss, const char *ip)
{
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof(*ss));
	s->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, ip, &s->sin6_addr), 1);
}

static void policy(const struct nx_conf *c, const struct sockaddr_storage *ss, uint64_t want_mask,
		   bool want_filtering, int want_idx)
{
	uint64_t mask = 0xdead;
	bool filt = !want_filtering;
	int idx = 99;
	nx_conf_client_policy(c, (const struct sockaddr *)ss, &mask, &filt, &idx);
	assert_int_equal(mask, want_mask);
	assert_int_equal(filt, want_filtering);
	assert_int_equal(idx, want_idx);
}

static void test_clients(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok(clients_yaml);
	assert_int_equal(c->n_clients, 5);
	const struct nx_conf_client *cl = c->clients;
	assert_string_equal(cl[0].name, "tablet");
	assert_int_equal(cl[0].n_ids, 2);
	assert_int_equal(cl[0].ids[0].family, AF_INET);
	assert_int_equal(cl[0].ids[0].prefix, 32);
	assert_int_equal(cl[0].ids[1].family, AF_INET6);
	assert_int_equal(cl[0].n_groups, 1);
	assert_string_equal(cl[0].groups[0], "kids");
	assert_int_equal(cl[0].groups_mask_sources, 0x2);
	assert_true(cl[0].filtering);
	assert_string_equal(cl[1].name, "office lan");
	assert_int_equal(cl[1].groups_mask_sources, 0x6); /* OR of work and kids */
	assert_true(cl[1].filtering);
	assert_int_equal(cl[2].groups_mask_sources, 0);
	assert_false(cl[2].filtering);
	assert_int_equal(cl[3].groups_mask_sources, 0x4);
	assert_true(cl[3].filtering); /* any of its groups filters */
	assert_int_equal(cl[4].n_groups, 1);
	assert_string_equal(cl[4].groups[0], "default");
	assert_int_equal(cl[4].groups_mask_sources, 0x1);

	struct sockaddr_storage ss;
	sa4(&ss, "192.168.1.50"); /* /32 of tablet beats the /24 of office lan */
	policy(c, &ss, 0x2, true, 0);
	sa4(&ss, "192.168.1.51");
	policy(c, &ss, 0x6, true, 1);
	sa4(&ss, "192.168.1.60");
	policy(c, &ss, 0, false, 2);
	sa4(&ss, "192.168.1.61");
	policy(c, &ss, 0x4, true, 3);
	sa4(&ss, "10.1.200.3");
	policy(c, &ss, 0x1, true, 4);
	sa6(&ss, "fd00::50");
	policy(c, &ss, 0x2, true, 0);
	sa6(&ss, "::ffff:192.168.1.50"); /* IPv4-mapped: matched as IPv4 */
	policy(c, &ss, 0x2, true, 0);
	sa6(&ss, "::ffff:192.168.1.99");
	policy(c, &ss, 0x6, true, 1);
	/* unknown clients: the default group */
	sa4(&ss, "192.168.2.1");
	policy(c, &ss, 0x1, true, -1);
	sa6(&ss, "fd00::51");
	policy(c, &ss, 0x1, true, -1);
	/* NULL out pointers are allowed */
	nx_conf_client_policy(c, (const struct sockaddr *)&ss, NULL, NULL, NULL);
	nx_conf_free(c);

	/* default group with filtering off applies to unknown clients */
	c = load_ok("groups:\n  default: {filtering: false}\n");
	sa4(&ss, "192.168.1.1");
	policy(c, &ss, 0, false, -1);
	nx_conf_free(c);
}

static void test_client_errors(void **state)
{
	(void)state;
	load_bad("groups:\n  kids: {}\nclients:\n  - name: tablet\n    ids: [10.0.0.1]\n"
		 "    groups: [kids, kidz, work]\n",
		 "t.yaml:6:20: clients[0].groups[1]: unknown group 'kidz' (did you mean 'kids'?)");
	load_bad("clients:\n  - {name: a, ids: [10.0.0.1], groups: [nope]}\n",
		 "t.yaml:2:41: clients[0].groups[0]: unknown group 'nope'");
	load_bad("clients:\n  - {name: a, ids: [10.0.0.0/8]}\n  - {name: a, ids: [10.0.0.1]}\n",
		 "t.yaml:3:12: clients[1].name: duplicate client 'a' (same as clients[0])");
	load_bad("clients:\n  - {name: a, ids: [10.0.0.0/8, \"fd00::1\"]}\n"
		 "  - {name: b, ids: [10.1.0.0/16, \"fd00:0::1/128\"]}\n",
		 "t.yaml:3:34: clients[1].ids[1]: 'fd00:0::1/128' is already clients[0].ids[1]");
	load_bad("clients:\n  - {name: a, ids: [10.0.0.1, 10.0.0.1/32]}\n",
		 "t.yaml:2:31: clients[0].ids[1]: '10.0.0.1/32' is already clients[0].ids[0]");
	load_bad("clients:\n  - {name: a}\n", "t.yaml:2:5: clients[0]: missing 'ids'");
	load_bad("clients:\n  - {ids: [10.0.0.1]}\n", "t.yaml:2:5: clients[0]: missing 'name'");
	load_bad("clients:\n  - {name: a, ids: []}\n",
		 "t.yaml:2:20: clients[0].ids: needs 1..16 entries, got 0");
	load_bad("clients:\n  - {name: a, ids: [laptop]}\n",
		 "t.yaml:2:21: clients[0].ids[0]: bad address 'laptop': not an IP address or "
		 "address/prefix");
	load_bad("clients:\n  - {name: \"\", ids: [10.0.0.1]}\n",
		 "t.yaml:2:12: clients[0].name: a name is 1..64 bytes without control characters");
	load_bad("clients:\n  - {name: a, ids: [10.0.0.1], mac: x}\n",
		 "t.yaml:2:32: unknown key 'clients[0].mac'");
	load_bad("clients: {a: 1}\n", "t.yaml:1:10: clients: expected a list, got a mapping");
}

/* ---- cache.* ---- */

static void test_cache(void **state)
{
	(void)state;
	struct nx_conf *c =
	    load_ok("cache:\n  size: 0\n  min_ttl: 30\n  max_ttl: 30\n"
		    "  negative_max_ttl: 0\n  serve_stale: true\n  prefetch: true\n");
	assert_int_equal(c->cache_size, 0);
	assert_int_equal(c->cache_min_ttl, 30);
	assert_int_equal(c->cache_max_ttl, 30);
	assert_int_equal(c->cache_neg_max_ttl, 0);
	assert_true(c->cache_serve_stale);
	assert_true(c->cache_prefetch);
	nx_conf_free(c);
	c = load_ok("cache: {size: 16777216, max_ttl: 1}\n");
	assert_int_equal(c->cache_size, 16777216);
	assert_int_equal(c->cache_max_ttl, 1);
	nx_conf_free(c);

	load_bad("cache:\n  size: 16777217\n",
		 "t.yaml:2:9: cache.size: 16777217 is out of range 0..16777216");
	load_bad("cache:\n  max_ttl: 0\n",
		 "t.yaml:2:12: cache.max_ttl: 0 is out of range 1..604800");
	load_bad("cache:\n  min_ttl: 86401\n",
		 "t.yaml:2:12: cache.min_ttl: 86401 is out of range 0..86400");
	load_bad("cache:\n  negative_max_ttl: 86401\n",
		 "t.yaml:2:21: cache.negative_max_ttl: 86401 is out of range 0..86400");
	load_bad("cache:\n  max_ttl: 60\n  min_ttl: 61\n",
		 "t.yaml:3:12: cache.min_ttl (61) must not exceed cache.max_ttl (60)");
	/* min_ttl left at its default: the position is max_ttl's */
	load_bad("cache:\n  min_ttl: 90000\n",
		 "t.yaml:2:12: cache.min_ttl: 90000 is out of range 0..86400");
	load_bad("cache:\n  prefetch: 1\n",
		 "t.yaml:2:13: cache.prefetch: expected true or false, got '1'");
}

/* Every allocation failure point of the new keys unwinds without leaking. */
static void test_alloc_failures(void **state)
{
	(void)state;
	static const char y[] =
	    "filter:\n"
	    "  sources:\n"
	    "    - {name: a, path: p}\n"
	    "    - {name: b, url: \"http://b\", groups: [kids]}\n"
	    "  allow: [a.example, '*.b.example']\n"
	    "  deny: ['/^x/']\n"
	    "groups:\n"
	    "  kids: {sources: [a]}\n"
	    "clients:\n"
	    "  - {name: t, ids: [10.0.0.1, \"fd00::1\"], groups: [kids, default]}\n"
	    "  - {name: u, ids: [10.0.0.2]}\n"
	    "local_records:\n"
	    "  - {name: nas.lan, type: A, value: 192.168.1.10}\n"
	    "  - {name: nas.lan, type: TXT, value: hello}\n";
	int failed = 0;
	for (long n = 0; n < 5000; n++) {
		struct nx_conf *c = NULL;
		char err[NX_CONF_ERR_MAX] = "";
		nx_mem_fail_after(n);
		int rc = nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err));
		nx_mem_fail_after(-1);
		if (rc == 0) {
			assert_int_equal(c->n_clients, 2);
			assert_int_equal(c->n_sources, 2);
			assert_int_equal(c->n_allow_rules, 2);
			assert_int_equal(c->n_locals, 2);
			assert_int_equal(c->clients[0].groups_mask_sources, 0x3);
			nx_conf_free(c);
			break;
		}
		assert_int_equal(rc, NX_ECONFIG);
		assert_null(c);
		if (!strstr(err, "out of memory")) {
			fail_msg("allocation %ld: %s", n, err);
		}
		failed++;
	}
	assert_true(failed > 30);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_defaults),	   T(test_sources),	   T(test_source_path_from_file),
	    T(test_source_errors), T(test_duration),	   T(test_rules),
	    T(test_rule_errors),   T(test_block_mode),	   T(test_groups),
	    T(test_group_errors),  T(test_clients),	   T(test_client_errors),
	    T(test_cache),	   T(test_alloc_failures), T(test_source_answers_subdomains),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

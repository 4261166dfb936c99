/*
 * External suites in ../shared/suites (skipped when NX_SHARED_DIR is absent):
 *   blocky-list-parsing: golden edge-case list, per-line parser cases, name validity,
 *                        subdomain matching;
 *   urlfilter-dns-rules: AdGuard engine cases, single-rule matches, rule validity, priority,
 *                        every one through nx_filter_lists_decide (snapshot + side structure).
 * A case is excluded only when it needs URL or browser context (`excluded` below, with the
 * reason). Where our documented choices differ from the other project (localhost-type names
 * skipped, bare IPs skipped, 63-byte labels), the case is listed in `divergent`: it must
 * diverge exactly there, and everything else must agree. Both lists are in README.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>

#include <arpa/inet.h>

#include "dns/msg.h"
#include "dns/wire.h"
#include "filter/compile.h"
#include "filter/lists.h"
#include "filter/snapshot.h"
#include "helpers.h"

struct tally {
	unsigned run, agree, diverge, skipped;
};

static void report(const char *suite, const struct tally *t)
{
	print_message("%s: %u cases, %u agree, %u documented divergences, %u skipped\n", suite,
		      t->run + t->skipped, t->agree, t->diverge, t->skipped);
}

/* Lines / rules where our documented semantics differ on purpose (see src/filter/README.md). */
static const char *const divergent[] = {
    /* localhost-type names are never list entries (they are the machine itself) */
    "hosts\tlocalhost",
    "hosts\t::1 localhost alias",
    "hostlist\tlocalhost",
    /* bare IPs are answers, not question names (counted as "ip_rule") */
    "valid\t192.168.1.1",
    /* blocky's regex lets a trailing '_' make a 64-byte label; RFC 1035 says 63 */
    "valid\taaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_",
    /* urlfilter: hosts rules include localhost-type names */
    "parse\t::1             localhost ip6-localhost ip6-loopback",
};

static bool is_divergent(const char *key)
{
	for (size_t i = 0; i < sizeof(divergent) / sizeof(divergent[0]); i++) {
		if (strcmp(divergent[i], key) == 0) {
			return true;
		}
	}
	return false;
}

/* Cases that need URL or browser context, which no DNS query carries. */
static const struct {
	const char *key, *why;
} excluded[] = {
    {"parse\t$domain=ya.ru", "$domain restricts by the page that made the request"},
    {"parse\t_prebid_", "a URL substring token for a browser; a bare token is a name here"},
    {"parse\t_728x90.", "a URL substring token for a browser; a bare token is a name here"},
};

static const char *exclusion(const char *key)
{
	for (size_t i = 0; i < sizeof(excluded) / sizeof(excluded[0]); i++) {
		if (strcmp(excluded[i].key, key) == 0) {
			return excluded[i].why;
		}
	}
	return NULL;
}

static void outcome(struct tally *t, const char *key, bool agree)
{
	t->run++;
	bool div = is_divergent(key);
	if (agree && !div) {
		t->agree++;
	} else if (!agree && div) {
		t->diverge++;
	} else {
		print_error("%s: %s\n", key,
			    agree ? "agrees but is listed as divergent" : "differs");
		fail();
	}
}

/* ---- helpers: one list text -> compiled bodies -> snapshot ---- */

static char *g_dir;

static struct nx_filter_snap *snap_of(const char *text, enum nx_filter_format fmt,
				      struct nx_filter_compile_report *rep_out)
{
	char in[4300], path[4300];
	snprintf(in, sizeof(in), "%s/u.txt", g_dir);
	th_write(in, text, strlen(text));
	struct nx_filter_compile_opts o = {.name = "u", .format = fmt};
	struct nx_filter_compile_report rep;
	assert_int_equal(nx_filter_compile_file(in, g_dir, &o, &rep), 0);
	if (rep_out) {
		*rep_out = rep;
	}
	struct nx_filter_snap_source src = {"u", g_dir};
	snprintf(path, sizeof(path), "%s/u.nxs", g_dir);
	assert_int_equal(nx_filter_snap_build(path, &src, 1, NULL, NULL), 0);
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(path, &s), 0);
	return s;
}

static enum nx_filter_action decide(struct nx_filter_snap *s, const char *host)
{
	struct nx_filter_result r;
	char low[300];
	size_t n = strlen(host);
	for (size_t i = 0; i <= n && i < sizeof(low); i++) {
		low[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
	}
	return nx_filter_snap_match(s, low, n, ~0ull, &r);
}

/* Split a TSV line in place into at most n fields. */
static int fields(char *line, char **f, int n)
{
	int k = 0;
	f[k++] = line;
	for (char *p = line; *p && k < n; p++) {
		if (*p == '\t') {
			*p = '\0';
			f[k++] = p + 1;
		}
	}
	return k;
}

static char *shared_file(const char *rel)
{
	const char *sh = th_shared();
	char path[4300];
	snprintf(path, sizeof(path), "%s/suites/%s", sh, rel);
	return th_read(path, NULL);
}

/* ---- parser callback collecting "name|name" ---- */

struct names {
	char text[2048];
	unsigned rules, skips;
};

static void on_rule(void *arg, enum nx_filter_kind kind, const char *name, size_t len)
{
	struct names *n = arg;
	size_t l = strlen(n->text);
	snprintf(n->text + l, sizeof(n->text) - l, "%s%s%s", l ? "|" : "",
		 kind == NX_FILTER_K_WILD ? "*." : "", name);
	n->rules++;
}

static void on_skip(void *arg, enum nx_filter_skip why)
{
	((struct names *)arg)->skips++;
}

/* A side rule: a hosts answer "addr name" counts as its name, any other as its text. */
static void on_side(void *arg, const char *line, size_t len)
{
	struct names *n = arg;
	const char *sp = memchr(line, ' ', len);
	char addr[64];
	uint8_t a[16];
	if (sp && (size_t)(sp - line) < sizeof(addr)) {
		memcpy(addr, line, (size_t)(sp - line));
		addr[sp - line] = '\0';
		if (inet_pton(AF_INET, addr, a) == 1 || inet_pton(AF_INET6, addr, a) == 1) {
			len -= (size_t)(sp + 1 - line);
			line = sp + 1;
		}
	}
	size_t l = strlen(n->text);
	snprintf(n->text + l, sizeof(n->text) - l, "%s%.*s", l ? "|" : "", (int)len, line);
	n->rules++;
}

static enum nx_filter_line parse_names(const char *line, enum nx_filter_format fmt, struct names *n)
{
	static const struct nx_filter_parse_cb cb = {
	    .rule = on_rule, .skip = on_skip, .side = on_side, .hosts_listed = true};
	memset(n, 0, sizeof(*n));
	return nx_filter_parse_line(line, strlen(line), fmt, &cb, n);
}

static void unescape(const char *in, char *out)
{
	while (*in) {
		if (in[0] == '\\' && in[1] == 't') {
			*out++ = '\t';
			in += 2;
		} else if (in[0] == '\\' && in[1] == 'r') {
			*out++ = '\r';
			in += 2;
		} else if (in[0] == '\\' && in[1] == 'n') {
			*out++ = '\n';
			in += 2;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
}

/* ---- blocky ---- */

static void test_blocky_parser_cases(void **state)
{
	if (!th_shared()) {
		skip();
	}
	char *text = shared_file("blocky-list-parsing/parser-cases.tsv");
	assert_non_null(text);
	struct tally t = {0};
	char *save = NULL;
	strtok_r(text, "\n", &save); /* header */
	for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[5];
		if (fields(line, f, 5) < 4) {
			continue;
		}
		const char *parser = f[0], *expect = f[2], *parsed = f[3];
		if (strcmp(parser, "hostsfile") == 0) {
			t.skipped++; /* /etc/hosts records (IP -> name), not a blocklist */
			continue;
		}
		char input[1024];
		unescape(f[1], input);
		enum nx_filter_format fmt =
		    strcmp(parser, "hostlist") == 0 ? NX_FILTER_FMT_DOMAINS : NX_FILTER_FMT_AUTO;
		struct names n;
		enum nx_filter_line cls = parse_names(input, fmt, &n);
		bool agree;
		if (strcmp(expect, "skip") == 0) {
			agree = cls != NX_FILTER_LINE_RULE;
		} else if (strcmp(expect, "error") == 0) {
			agree = cls == NX_FILTER_LINE_RULE && n.rules == 0 && n.skips > 0;
		} else {
			agree = strcmp(n.text, parsed) == 0;
		}
		char key[1200];
		snprintf(key, sizeof(key), "%s\t%s", parser, f[1]);
		outcome(&t, key, agree);
	}
	report("blocky parser-cases", &t);
	free(text);
}

static void test_blocky_validity(void **state)
{
	if (!th_shared()) {
		skip();
	}
	char *text = shared_file("blocky-list-parsing/domain-validation-cases.tsv");
	assert_non_null(text);
	struct tally t = {0};
	char *p = strchr(text, '\n') + 1; /* header */
	while (*p) {
		char *nl = strchr(p, '\n');
		if (nl) {
			*nl = '\0';
		}
		char *f[3];
		if (fields(p, f, 3) >= 2) {
			char input[512], out[NX_FILTER_NAME_MAX + 1];
			unescape(f[0], input);
			size_t olen;
			bool ours = nx_filter_name_norm(input, strlen(input), out, &olen) ==
				    NX_FILTER_SKIP_NONE;
			bool theirs = strcmp(f[1], "true") == 0;
			/* localhost-type names are valid names we skip by design */
			char key[600];
			snprintf(key, sizeof(key), "valid\t%s", f[0]);
			outcome(&t, key, ours == theirs);
		}
		if (!nl) {
			break;
		}
		p = nl + 1;
	}
	report("blocky domain-validation", &t);
	free(text);
}

/* Line-set helpers: is "\nname\n" a line of body? */
static bool has_line(const char *body, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		if (l == n && memcmp(p, name, n) == 0) {
			return true;
		}
	}
	return false;
}

static unsigned count_lines(const char *body)
{
	unsigned n = 0;
	for (const char *p = body; *p; p++) {
		n += *p == '\n';
	}
	return n;
}

/* Blocky reads a plain entry as the name and its subdomains and keeps regexes: compiled with
 * subdomains: true and the side structure, every golden entry must come out the same. */
static void test_blocky_golden(void **state)
{
	if (!th_shared()) {
		skip();
	}
	char *list = shared_file("blocky-list-parsing/edge_cases.txt");
	char *golden = shared_file("blocky-list-parsing/edge_cases.golden");
	assert_non_null(list);
	assert_non_null(golden);
	char in[4300];
	snprintf(in, sizeof(in), "%s/b.txt", g_dir);
	th_write(in, list, strlen(list));
	struct nx_filter_compile_opts o = {.name = "b", .side = true, .subdomains = true};
	struct nx_filter_compile_report rep;
	assert_int_equal(nx_filter_compile_file(in, g_dir, &o, &rep), 0);
	char *ours_list = th_readf(g_dir, "b.list");
	char *ours_wild = th_readf(g_dir, "b.wild");
	char *ours_side = th_readf(g_dir, "b.side");
	unsigned strings = 0, wilds = 0, regex = 0, ips = 0;
	char *save = NULL;
	for (char *line = strtok_r(golden, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[2] = {line, ""};
		if (fields(line, f, 2) < 2) {
			continue;
		}
		size_t l = strlen(f[1]);
		if (l && f[1][l - 1] == '.') {
			f[1][--l] = '\0'; /* blocky keeps "x."; we drop the root dot */
		}
		char re[600];
		if (strcmp(f[0], "regex") == 0) {
			snprintf(re, sizeof(re), "/%s/", f[1]);
			if (!has_line(ours_side, re)) {
				print_error("golden regex %s missing from .side\n", re);
				fail();
			}
			regex++;
		} else if (strchr(f[1], ':') || strspn(f[1], "0123456789.") == l) {
			ips++; /* an address is an answer, not a question name: skipped as ip_rule
				*/
		} else if (strcmp(f[0], "wildcard") == 0) {
			assert_true(has_line(ours_wild, f[1]));
			wilds++;
		} else {
			if (!has_line(ours_list, f[1]) || !has_line(ours_wild, f[1])) {
				print_error("golden string %s is not name + subdomains\n", f[1]);
				fail();
			}
			strings++;
		}
	}
	assert_int_equal(count_lines(ours_list), strings);
	assert_int_equal(count_lines(ours_wild), strings + wilds);
	assert_int_equal(count_lines(ours_side), regex);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_regex], 0);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_ip_rule], 4); /* 3 golden IPs, one twice */
	assert_int_equal(ips, 3);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_invalid_name], 1); /* the 64-byte label */
	print_message("blocky golden: %u strings (name + subdomains), %u wildcards, %u regexes "
		      "agree; 3 IPs skipped by reason\n",
		      strings, wilds, regex);
	free(ours_list);
	free(ours_wild);
	free(ours_side);
	free(list);
	free(golden);
}

static void test_blocky_subdomains(void **state)
{
	if (!th_shared()) {
		skip();
	}
	char *text = shared_file("blocky-list-parsing/subdomain-match-cases.tsv");
	struct tally t = {0};
	char *save = NULL;
	strtok_r(text, "\n", &save);
	for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = {NULL};
		if (fields(line, f, 4) < 3) {
			continue;
		}
		char rule[400];
		snprintf(rule, sizeof(rule), "||%s^\n", f[0]); /* blocky's "string" = x + subtree */
		struct nx_filter_snap *s = snap_of(rule, NX_FILTER_FMT_AUTO, NULL);
		bool blocked = decide(s, f[1]) == NX_FILTER_ACT_BLOCK;
		nx_filter_snap_free(s);
		char key[600];
		snprintf(key, sizeof(key), "sub\t%s\t%s", f[0], f[1]);
		outcome(&t, key, blocked == (strcmp(f[2], "true") == 0));
	}
	report("blocky subdomain-match", &t);
	free(text);
}

/* ---- urlfilter: every case through nx_filter_lists_decide ---- */

struct lists {
	struct nx_filter_snap *snap;
	struct nx_filter_side *side;
	char *side_text; /* <name>.side as written: which rules left the snapshot */
};

/* One rule list -> bodies (side on, hosts answers listed: urlfilter returns hosts IPs) ->
 * snapshot + side structure. */
static void lists_of(struct lists *l, const char *text)
{
	char in[4300], path[4300];
	snprintf(in, sizeof(in), "%s/u.txt", g_dir);
	th_write(in, text, strlen(text));
	struct nx_filter_compile_opts o = {.name = "u", .side = true, .hosts_listed = true};
	struct nx_filter_compile_report rep;
	assert_int_equal(nx_filter_compile_file(in, g_dir, &o, &rep), 0);
	struct nx_filter_snap_source src = {"u", g_dir};
	snprintf(path, sizeof(path), "%s/u.nxs", g_dir);
	assert_int_equal(nx_filter_snap_build(path, &src, 1, NULL, NULL), 0);
	assert_int_equal(nx_filter_snap_open(path, &l->snap), 0);
	assert_int_equal(nx_filter_side_open(&src, 1, &l->side), 0);
	l->side_text = rep.n_side ? th_readf(g_dir, "u.side") : NULL;
}

static void lists_free(struct lists *l)
{
	nx_filter_snap_free(l->snap);
	nx_filter_side_free(l->side);
	free(l->side_text);
}

struct uq {
	struct nx_filter_qctx q;
	uint8_t wire[NX_DNS_NAME_MAX];
	struct sockaddr_storage ss;
	const char *tags[8];
};

/* A case's query (host, qtype, client_ip, client_name, client_tags) as the list levels see it. */
static void uq_of(struct uq *u, json_t *host, json_t *qtype, json_t *ip, json_t *name, json_t *tags)
{
	memset(u, 0, sizeof(*u));
	char low[300];
	snprintf(low, sizeof(low), "%s", json_string_value(host));
	for (char *p = low; *p; p++) {
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	}
	int wl = nx_dns_name_from_text(low, u->wire);
	assert_true(wl > 0);
	u->q.wire = u->wire;
	u->q.wlen = (size_t)wl;
	u->q.eligible = ~0ull;
	u->q.qtype = 1;
	const char *qt = qtype ? json_string_value(qtype) : "A";
	u->q.qtype = strcmp(qt, "AAAA") == 0	? 28
		     : strcmp(qt, "CNAME") == 0 ? 5
		     : strcmp(qt, "TXT") == 0	? 16
						: 1;
	if (ip) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&u->ss;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&u->ss;
		if (inet_pton(AF_INET, json_string_value(ip), &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
		} else {
			assert_int_equal(inet_pton(AF_INET6, json_string_value(ip), &s6->sin6_addr),
					 1);
			s6->sin6_family = AF_INET6;
		}
		u->q.client = (const struct sockaddr *)&u->ss;
	}
	u->q.client_name = name ? json_string_value(name) : NULL;
	size_t i;
	json_t *t;
	json_array_foreach(tags, i, t)
	{
		if (i < 8) {
			u->tags[u->q.ntags++] = json_string_value(t);
		}
	}
	u->q.tags = u->tags;
}

/* The winning rule's text: the side rule's, or "" when the snapshot decided. */
static const char *winner(const struct lists *l, const struct nx_filter_result *r, char *buf,
			  size_t cap)
{
	size_t len = 0;
	const char *t = nx_filter_side_rule_text(l->side, r->side_rule, &len);
	snprintf(buf, cap, "%.*s", (int)len, t ? t : "");
	return buf;
}

static bool null_addr(const char *a)
{
	return strcmp(a, "0.0.0.0") == 0 || strcmp(a, "127.0.0.1") == 0 || strcmp(a, "::") == 0 ||
	       strcmp(a, "::1") == 0;
}

/* Do the addresses our hosts answer gives for qtype equal the non-null ones expected, in
 * order? (A null address blocks instead of answering: README.md.) */
static bool hosts_agree(const struct lists *l, struct uq *u, const struct nx_filter_result *r,
			json_t *want, uint16_t qtype)
{
	char exp[512] = "", got[512] = "";
	size_t i;
	json_t *a;
	json_array_foreach(want, i, a)
	{
		if (!null_addr(json_string_value(a))) {
			strcat(strcat(exp, json_string_value(a)), " ");
		}
	}
	if (r->rewrite == NX_FILTER_RW_HOSTS) {
		uint8_t buf[1024];
		struct nx_dns_question qq = {.qtype = qtype, .qclass = 1};
		memcpy(qq.name, u->q.wire, u->q.wlen);
		qq.name_len = (uint8_t)u->q.wlen;
		struct nx_dns_reply_ctx ctx = {.q = &qq, .max_size = 1024};
		u->q.qtype = qtype;
		int len = nx_filter_rewrite_answer(l->side, &u->q, r, &ctx, 60, buf, sizeof(buf));
		assert_true(len > 0);
		struct nx_dns_msg m;
		assert_int_equal(nx_dns_msg_parse(buf, (size_t)len, &m), 0);
		size_t off = m.question_end;
		for (unsigned k = 0; k < m.ancount; k++) {
			uint16_t rdlen = (uint16_t)(buf[off + 10] << 8 | buf[off + 11]);
			char t[64];
			inet_ntop(rdlen == 4 ? AF_INET : AF_INET6, buf + off + 12, t, sizeof(t));
			strcat(strcat(got, t), " ");
			off += 12 + rdlen;
		}
	}
	if (strcmp(exp, got) != 0) {
		print_error("hosts: want '%s' got '%s'\n", exp, got);
	}
	return strcmp(exp, got) == 0;
}

static void test_urlfilter(void **state)
{
	if (!th_shared()) {
		skip();
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/suites/urlfilter-dns-rules/cases.json", th_shared());
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	struct tally eng = {0}, single = {0}, parse = {0}, prio = {0};
	char wbuf[600];

	size_t gi;
	json_t *g;
	json_array_foreach(json_object_get(root, "engine_groups"), gi, g)
	{
		char text[4096] = "";
		size_t ri;
		json_t *r;
		json_array_foreach(json_object_get(g, "rules"), ri, r)
		{
			strcat(strcat(text, json_string_value(r)), "\n");
		}
		struct lists l;
		lists_of(&l, text);
		size_t ci;
		json_t *c;
		json_array_foreach(json_object_get(g, "cases"), ci, c)
		{
			json_t *q = json_object_get(c, "query"), *e = json_object_get(c, "expect");
			char key[300];
			snprintf(key, sizeof(key), "engine\t%s",
				 json_string_value(json_object_get(c, "name")));
			if (exclusion(key)) {
				eng.skipped++;
				continue;
			}
			struct uq u;
			uq_of(&u, json_object_get(q, "host"), json_object_get(q, "qtype"),
			      json_object_get(q, "client_ip"), json_object_get(q, "client_name"),
			      json_object_get(q, "client_tags"));
			struct nx_filter_result res;
			enum nx_filter_action a =
			    nx_filter_lists_decide(l.snap, l.side, &u.q, &res);
			bool want = json_is_true(json_object_get(e, "matched"));
			bool agree = (a != NX_FILTER_ACT_NONE) == want;
			if (agree && want) {
				agree = (a == NX_FILTER_ACT_ALLOW) ==
					json_is_true(json_object_get(e, "allowlist"));
			}
			const char *w = winner(&l, &res, wbuf, sizeof(wbuf));
			const char *rule = json_string_value(json_object_get(e, "rule"));
			if (agree && rule) {
				/* a side rule must be the one named; a snapshot decision means
				 * the named rule is one the snapshot holds */
				bool in_side = false;
				if (l.side_text) {
					char needle[600];
					snprintf(needle, sizeof(needle), "%s", rule);
					in_side = has_line(l.side_text, needle);
				}
				agree = in_side ? strcmp(w, rule) == 0 : res.side_rule < 0;
			}
			const char *has = json_string_value(json_object_get(e, "rule_contains"));
			const char *hasnt =
			    json_string_value(json_object_get(e, "rule_not_contains"));
			if (agree && has) {
				agree = strstr(w, has) != NULL;
			}
			if (agree && hasnt) {
				agree = strstr(w, hasnt) == NULL;
			}
			json_t *v4 = json_object_get(e, "hosts_v4"),
			       *v6 = json_object_get(e, "hosts_v6");
			if (agree && v4) {
				agree = hosts_agree(&l, &u, &res, v4, 1);
			}
			if (agree && v6) {
				agree = hosts_agree(&l, &u, &res, v6, 28);
			}
			if (!agree) {
				print_error("%s: action %s, winner '%s'\n", key,
					    nx_filter_action_name(a), w);
			}
			outcome(&eng, key, agree);
		}
		lists_free(&l);
	}

	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(root, "single_rule_matches"), i, c)
	{
		const char *rule = json_string_value(json_object_get(c, "rule"));
		char key[600];
		snprintf(key, sizeof(key), "single\t%s\t%s", rule,
			 json_string_value(json_object_get(c, "host")));
		if (exclusion(key)) {
			single.skipped++;
			continue;
		}
		char text[512];
		snprintf(text, sizeof(text), "%s\n", rule);
		struct lists l;
		lists_of(&l, text);
		struct uq u;
		uq_of(&u, json_object_get(c, "host"), json_object_get(c, "qtype"),
		      json_object_get(c, "client_ip"), NULL, NULL);
		struct nx_filter_result res;
		bool m = nx_filter_lists_decide(l.snap, l.side, &u.q, &res) != NX_FILTER_ACT_NONE;
		lists_free(&l);
		outcome(&single, key, m == json_is_true(json_object_get(c, "match")));
	}

	json_array_foreach(json_object_get(root, "rule_parsing"), i, c)
	{
		const char *rule = json_string_value(json_object_get(c, "rule"));
		bool valid = json_is_true(json_object_get(c, "valid"));
		const char *kind = json_string_value(json_object_get(c, "kind"));
		char key[600];
		snprintf(key, sizeof(key), "parse\t%s", rule);
		if (exclusion(key)) {
			parse.skipped++;
			continue;
		}
		struct names n;
		parse_names(rule, NX_FILTER_FMT_AUTO, &n);
		bool ours = n.rules > 0;
		if (strcmp(kind, "hosts") == 0 && (rule[0] == '|' || rule[0] == '@')) {
			/* "is it a hosts-file rule": adblock syntax is a network rule here */
			ours = false;
		}
		bool agree = ours == valid;
		if (agree && valid && strcmp(kind, "hosts") == 0) {
			char want[1024] = "";
			size_t hi;
			json_t *h;
			json_array_foreach(json_object_get(c, "hostnames"), hi, h)
			{
				if (hi) {
					strcat(want, "|");
				}
				strcat(want, json_string_value(h));
			}
			agree = strcmp(want, n.text) == 0;
		}
		outcome(&parse, key, agree);
	}

	json_array_foreach(json_object_get(root, "rule_priority"), i, c)
	{
		const char *l = json_string_value(json_object_get(c, "left"));
		const char *r = json_string_value(json_object_get(c, "right"));
		char key[600];
		snprintf(key, sizeof(key), "prio\t%s\t%s", l, r);
		char text[512];
		snprintf(text, sizeof(text), "%s\n%s\n", l, r);
		struct lists ls;
		lists_of(&ls, text);
		/* a client every rule of the pair applies to: ctag 123, client "123", AAAA */
		static const char *const tag[] = {"123"};
		struct nx_filter_qctx q = {
		    .qtype = 28, .client_name = "123", .tags = tag, .ntags = 1, .eligible = ~0ull};
		uint8_t wire[NX_DNS_NAME_MAX];
		q.wlen = (size_t)nx_dns_name_from_text("example.org", wire);
		q.wire = wire;
		struct nx_filter_result res;
		enum nx_filter_action a = nx_filter_lists_decide(ls.snap, ls.side, &q, &res);
		/* which of the two won: the side rule's text, or the snapshot's plain rule of
		 * the decided action */
		const char *w = winner(&ls, &res, wbuf, sizeof(wbuf));
		if (!*w) {
			bool lallow = strncmp(l, "@@", 2) == 0;
			bool lplain = !strchr(l, '$');
			w = lplain && lallow == (a == NX_FILTER_ACT_ALLOW) ? l : r;
		}
		bool left_high = json_is_true(json_object_get(c, "left_higher_priority"));
		bool agree =
		    a != NX_FILTER_ACT_NONE && (left_high ? strcmp(w, l) == 0 && strcmp(l, r) != 0
							  : strcmp(w, r) == 0 || strcmp(l, r) == 0);
		if (!agree) {
			print_error("%s: won '%s'\n", key, w);
		}
		lists_free(&ls);
		outcome(&prio, key, agree);
	}
	report("urlfilter engine", &eng);
	report("urlfilter single-rule", &single);
	report("urlfilter rule-parsing", &parse);
	report("urlfilter priority", &prio);
	for (size_t k = 0; k < sizeof(excluded) / sizeof(excluded[0]); k++) {
		print_message("  excluded %s: %s\n", excluded[k].key, excluded[k].why);
	}
	assert_true(eng.agree >= 60);
	json_decref(root);
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
	    cmocka_unit_test(test_blocky_parser_cases), cmocka_unit_test(test_blocky_validity),
	    cmocka_unit_test(test_blocky_golden),	cmocka_unit_test(test_blocky_subdomains),
	    cmocka_unit_test(test_urlfilter),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

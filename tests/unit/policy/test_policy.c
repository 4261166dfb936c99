/*
 * The decision ladder, table-driven: every level and every tie-break between levels, sources
 * and rules (src/policy/README.md's table), the answer-target check (CNAME, HTTPS/SVCB), and the
 * local answers (chains, generated PTR, NODATA).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "conf/conf.h"
#include "dns/wire.h"
#include "filter/compile.h"
#include "filter/lists.h"
#include "policy/policy.h"
#include "../filter/helpers.h"

/* Append src to the NUL-terminated dst of cap bytes, cut to fit (strncat's bound, without
 * _FORTIFY_SOURCE's truncation warning). */
static void append(char *dst, size_t cap, const char *src)
{
	size_t l = strlen(dst), n = strlen(src);
	if (n > cap - 1 - l) {
		n = cap - 1 - l;
	}
	memcpy(dst + l, src, n);
	dst[l + n] = '\0';
}

/* s0 (group default), s1 (group kids). Line comments say which level each entry serves. */
static const char S0[] = "||ads.test^\n"	 /* exact + parents */
			 "@@||ok.ads.test^\n"	 /* exception with subdomains */
			 "listed.test\n"	 /* exact */
			 "both.test\n"		 /* in both sources: s0 reported */
			 "allowed.example\n"	 /* user allow beats it */
			 "ads.example\n"	 /* user deny '*.example' beats it */
			 "nas.lan\n"		 /* local records beat it */
			 "||parent.test^\n"	 /* parents */
			 "||deep.parent.test^\n" /* the nearest parent wins */
			 "@@|onlyself.test^\n"	 /* exception without subdomains */
			 "||onlyself.test^\n"
			 "tracker.cdn.net\n" /* a CNAME target */
			 "safe.cdn.net\n";   /* a CNAME target a user allow rule lets through */
static const char S1[] = "||games.test^\n"
			 "both.test\n"
			 "x.parent.test\n"     /* exact in s1 beats a parent in s0 */
			 "@@||listed.test^\n"; /* an exception in any source beats exact */

static const char YAML[] =
    "filter:\n"
    "  sources:\n"
    "    - {name: s0, path: %s/s0.txt}\n"
    "    - {name: s1, path: %s/s1.txt, groups: [kids]}\n"
    "  allow: [allowed.example, rule.example, '*.cdn.example', '/^white[0-9]+[.]example$/',\n"
    "          safe.cdn.net, '||mod.user.test^$client=192.168.1.51']\n"
    "  deny: [rule.example, denied.example, '*.denied.example', nas.lan, z.ok.ads.test,\n"
    "         '/^black[.]/', '*.example', exact.rules.example, '*.rules.example',\n"
    "         '||mod.user.test^$dnstype=A', '||z2.ok.ads.test^$dnstype=A',\n"
    "         '||mod.user.test^$client=192.168.1.52,important']\n"
    "groups:\n"
    "  kids: {}\n"
    "  off: {filtering: false}\n"
    "clients:\n"
    "  - {name: kid, ids: [127.0.0.2, 'id:tablet'], groups: [default, kids],\n"
    "     tags: [device_tablet, user_child]}\n"
    "  - {name: onlykids, ids: [127.0.0.4], groups: [kids]}\n"
    "  - {name: tv, ids: [127.0.0.3], groups: [off]}\n"
    "local_records:\n"
    "  - {name: nas.lan, type: A, value: 192.168.1.10}\n"
    "  - {name: nas.lan, type: AAAA, value: 'fd00::10'}\n"
    "  - {name: alias.lan, type: CNAME, value: nas.lan}\n"
    "  - {name: chain.lan, type: CNAME, value: alias.lan}\n"
    "  - {name: ext.lan, type: CNAME, value: www.example.net}\n"
    "  - {name: text.lan, type: TXT, value: hello}\n"
    "  - {name: 10.1.168.192.in-addr.arpa, type: PTR, value: given.lan}\n"
    "  - {name: printer.lan, type: A, value: 192.168.1.20}\n";

struct fixture {
	char *dir;
	struct nx_conf *c;
	struct nx_filter_rules *rules;
	struct nx_filter_side *user_side;
	struct nx_filter_snap *snap;
	struct nx_policy p;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	f->dir = th_tmpdir();
	th_writef(f->dir, "s0.txt", S0);
	th_writef(f->dir, "s1.txt", S1);
	const char *names[] = {"s0", "s1"};
	struct nx_filter_snap_source src[2];
	for (int i = 0; i < 2; i++) {
		char in[4300];
		snprintf(in, sizeof(in), "%s/%s.txt", f->dir, names[i]);
		struct nx_filter_compile_opts o = {.name = names[i]};
		struct nx_filter_compile_report rep;
		assert_int_equal(nx_filter_compile_file(in, f->dir, &o, &rep), 0);
		src[i] = (struct nx_filter_snap_source){names[i], f->dir};
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/l.nxs", f->dir);
	assert_int_equal(nx_filter_snap_build(path, src, 2, NULL, NULL), 0);
	assert_int_equal(nx_filter_snap_open(path, &f->snap), 0);
	char yaml[sizeof(YAML) + 9000];
	snprintf(yaml, sizeof(yaml), YAML, f->dir, f->dir);
	char err[NX_CONF_ERR_MAX] = "";
	if (nx_conf_load_string("t.yaml", yaml, strlen(yaml), &f->c, err, sizeof(err)) != 0) {
		fail_msg("config: %s", err);
	}
	assert_int_equal(nx_policy_rules_build(f->c, &f->rules), 0);
	assert_int_equal(nx_policy_user_side_build(f->c, &f->user_side), 0);
	f->p = (struct nx_policy){
	    .c = f->c, .rules = f->rules, .user_side = f->user_side, .snap = f->snap};
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	nx_filter_rules_free(f->rules);
	nx_filter_side_free(f->user_side);
	nx_filter_snap_free(f->snap);
	nx_conf_free(f->c);
	nx_filter_lists_thread_done();
	th_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void addr_of(const char *ip, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, ip, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
		ss->ss_family = AF_INET;
	} else {
		assert_int_equal(inet_pton(AF_INET6, ip, &((struct sockaddr_in6 *)ss)->sin6_addr),
				 1);
		ss->ss_family = AF_INET6;
	}
}

struct verdict {
	const char *name;
	const char *client;    /* address; NULL = 192.168.1.50 (no client: default group) */
	const char *client_id; /* DoH/DoT id or NULL */
	bool paused;
	enum nx_filter_action action;
	enum nx_filter_reason reason;
	const char *source; /* list name, rule text or "" */
	const char *matched;
	const char *why;
};

#define BLOCK NX_FILTER_ACT_BLOCK
#define ALLOW NX_FILTER_ACT_ALLOW
#define NONE NX_FILTER_ACT_NONE
#define LOCAL NX_FILTER_ACT_LOCAL
#define R(x) NX_FILTER_R_##x

static const struct verdict cases[] = {
    /* level: local records */
    {"nas.lan", NULL, NULL, false, LOCAL, R(local_record), "", "nas.lan",
     "local beats a user deny rule and a list entry"},
    {"NAS.Lan.", NULL, NULL, false, LOCAL, R(local_record), "", "NAS.Lan", "any case"},
    {"nas.lan", NULL, NULL, true, LOCAL, R(local_record), "", "nas.lan",
     "local beats a pause (the LAN's names stay)"},
    {"nas.lan", "127.0.0.3", NULL, false, LOCAL, R(local_record), "", "nas.lan",
     "local for an unfiltered client too"},
    {"20.1.168.192.in-addr.arpa", NULL, NULL, false, LOCAL, R(local_record), "",
     "20.1.168.192.in-addr.arpa", "the reverse name of a local A is local (generated PTR)"},
    {"30.1.51.198.in-addr.arpa", NULL, NULL, false, NONE, R(none), "", "",
     "a reverse name of no local address is not"},
    {"30.1.168.192.in-addr.arpa", NULL, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "30.1.168.192.in-addr.arpa",
     "a private one is the special-use level's (bogus-priv)"},
    /* level: pause / unfiltered client */
    {"ads.example", NULL, NULL, true, NONE, R(paused), "", "",
     "a pause lets a listed name through"},
    {"denied.example", NULL, NULL, true, NONE, R(paused), "", "", "and a user deny rule"},
    {"ads.example", "127.0.0.3", NULL, false, NONE, R(none), "", "",
     "a client whose groups do not filter"},
    /* level: user allow */
    {"allowed.example", NULL, NULL, false, ALLOW, R(user_allow), "allowed.example",
     "allowed.example", "user allow beats a list entry"},
    {"rule.example", NULL, NULL, false, ALLOW, R(user_allow), "rule.example", "rule.example",
     "user allow beats user deny of the same name"},
    {"a.b.cdn.example", NULL, NULL, false, ALLOW, R(user_allow), "*.cdn.example", "cdn.example",
     "a wildcard allow beats the deny '*.example'"},
    {"white7.example", NULL, NULL, false, ALLOW, R(user_allow), "/^white[0-9]+[.]example$/",
     "white7.example", "a regex allow"},
    /* level: user deny */
    {"denied.example", NULL, NULL, false, BLOCK, R(user_deny), "denied.example", "denied.example",
     "exact deny"},
    {"x.denied.example", NULL, NULL, false, BLOCK, R(user_deny), "*.denied.example",
     "denied.example", "the nearest wildcard deny, not '*.example'"},
    {"z.ok.ads.test", NULL, NULL, false, BLOCK, R(user_deny), "z.ok.ads.test", "z.ok.ads.test",
     "user deny beats a list exception (@@||ok.ads.test^)"},
    {"black.net", NULL, NULL, false, BLOCK, R(user_deny), "/^black[.]/", "black.net",
     "a regex deny"},
    {"exact.rules.example", NULL, NULL, false, BLOCK, R(user_deny), "exact.rules.example",
     "exact.rules.example", "an exact deny beats a wildcard deny of its parent"},
    {"y.rules.example", NULL, NULL, false, BLOCK, R(user_deny), "*.rules.example", "rules.example",
     "then the nearest wildcard"},
    /* levels 3-4 again: user rules in the AdGuard language (the user side structure) */
    {"mod.user.test", NULL, NULL, false, BLOCK, R(user_deny), "||mod.user.test^$dnstype=A",
     "mod.user.test", "a user deny with a modifier"},
    {"x.mod.user.test", NULL, NULL, false, BLOCK, R(user_deny), "||mod.user.test^$dnstype=A",
     "mod.user.test", "||x^ covers the names under x"},
    {"mod.user.test", "192.168.1.51", NULL, false, ALLOW, R(user_allow),
     "||mod.user.test^$client=192.168.1.51", "mod.user.test",
     "a user allow (no @@ needed in filter.allow) beats a user deny"},
    {"mod.user.test", "192.168.1.52", NULL, false, BLOCK, R(user_deny),
     "||mod.user.test^$client=192.168.1.52,important", "mod.user.test",
     "a user $important deny beats a user allow with a modifier"},
    {"z2.ok.ads.test", NULL, NULL, false, BLOCK, R(user_deny), "||z2.ok.ads.test^$dnstype=A",
     "z2.ok.ads.test", "a user rule with a modifier beats a list exception"},
    /* level: list rules (exceptions, exact, parents; sources by index) */
    {"ads.net", NULL, NULL, false, NONE, R(none), "", "", "nothing matches"},
    {"x.ok.ads.net", NULL, NULL, false, NONE, R(none), "", "", "nothing matches below either"},
};

/* The list levels, with names under .test (no user rule covers them). */
static const struct verdict list_cases[] = {
    {"ads.test", NULL, NULL, false, BLOCK, R(blocklist_domain), "s0", "ads.test",
     "exact entry of ||x^"},
    {"x.ads.test", NULL, NULL, false, BLOCK, R(blocklist_wildcard), "s0", "ads.test",
     "parent entry of ||x^"},
    {"ok.ads.test", NULL, NULL, false, ALLOW, R(blocklist_exception), "s0", "ok.ads.test",
     "an exception beats the parent"},
    {"y.ok.ads.test", NULL, NULL, false, ALLOW, R(blocklist_exception), "s0", "ok.ads.test",
     "an @@||x^ exception covers names below"},
    {"onlyself.test", NULL, NULL, false, ALLOW, R(blocklist_exception), "s0", "onlyself.test",
     "an @@|x^ exception covers the name"},
    {"a.onlyself.test", NULL, NULL, false, BLOCK, R(blocklist_wildcard), "s0", "onlyself.test",
     "but not the names below"},
    {"listed.test", NULL, NULL, false, BLOCK, R(blocklist_domain), "s0", "listed.test",
     "s1's exception does not apply to a default client"},
    {"listed.test", "127.0.0.2", NULL, false, ALLOW, R(blocklist_exception), "s1", "listed.test",
     "an exception in any eligible source beats an exact entry in another"},
    {"both.test", "127.0.0.2", NULL, false, BLOCK, R(blocklist_domain), "s0", "both.test",
     "two sources: the lowest index is reported"},
    {"both.test", "127.0.0.4", NULL, false, BLOCK, R(blocklist_domain), "s1", "both.test",
     "unless the client is not eligible for it"},
    {"games.test", NULL, NULL, false, NONE, R(none), "", "", "s1 is not the default group's"},
    {"games.test", "127.0.0.2", NULL, false, BLOCK, R(blocklist_domain), "s1", "games.test",
     "a client in kids"},
    {"games.test", "10.9.9.9", "tablet", false, BLOCK, R(blocklist_domain), "s1", "games.test",
     "a client id picks the client whatever the address"},
    {"games.test", "10.9.9.9", "nobody", false, NONE, R(none), "", "",
     "an unknown client id is the default group"},
    {"x.parent.test", "127.0.0.2", NULL, false, BLOCK, R(blocklist_domain), "s1", "x.parent.test",
     "an exact entry (s1) beats a parent entry (s0)"},
    {"x.parent.test", NULL, NULL, false, BLOCK, R(blocklist_wildcard), "s0", "parent.test",
     "without s1: the parent"},
    {"a.deep.parent.test", NULL, NULL, false, BLOCK, R(blocklist_wildcard), "s0",
     "deep.parent.test", "the nearest parent"},
    {"parent.test", NULL, NULL, false, BLOCK, R(blocklist_domain), "s0", "parent.test",
     "||x^ blocks x itself as exact"},
    {"Ads.TEST.", NULL, NULL, false, BLOCK, R(blocklist_domain), "s0", "Ads.TEST",
     "case and trailing dot"},
    {"ads.test", "::ffff:127.0.0.2", NULL, false, BLOCK, R(blocklist_domain), "s0", "ads.test",
     "an IPv4-mapped address is its IPv4 client"},
};

static void check(struct fixture *f, const struct verdict *v, const char *name)
{
	struct sockaddr_storage ss;
	addr_of(v->client ? v->client : "192.168.1.50", &ss);
	uint8_t wire[NX_DNS_NAME_MAX];
	int wl = nx_dns_name_from_text(name, wire);
	assert_true(wl > 0);
	struct nx_policy p = f->p;
	p.paused = v->paused;
	struct nx_policy_query q;
	nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss,
			     v->client_id);
	struct nx_filter_result r;
	enum nx_filter_action a = nx_policy_decide(&p, &q, &r);
	char matched[NX_DNS_TEXT_MAX] = "";
	if (r.matched_len) {
		nx_dns_name_to_text(wire + r.matched_off, r.matched_len, matched, sizeof(matched));
	}
	const char *src = nx_policy_source_name(&p, &r);
	if (a != v->action || r.action != v->action || r.reason != v->reason ||
	    strcmp(src, v->source) != 0 || strcmp(matched, v->matched) != 0) {
		fail_msg("%s (client %s%s%s%s): want %s/%s/'%s'/'%s', got %s/%s/'%s'/'%s' -- %s",
			 name, v->client ? v->client : "-", v->client_id ? " id " : "",
			 v->client_id ? v->client_id : "", v->paused ? ", paused" : "",
			 nx_filter_action_name(v->action), nx_filter_reason_name(v->reason),
			 v->source, v->matched, nx_filter_action_name(a),
			 nx_filter_reason_name(r.reason), src, matched, v->why);
	}
}

static void test_ladder_levels(void **state)
{
	struct fixture *f = *state;
	for (size_t i = 0; i < NX_ARRAY_LEN(cases); i++) {
		check(f, &cases[i], cases[i].name);
	}
	for (size_t i = 0; i < NX_ARRAY_LEN(list_cases); i++) {
		check(f, &list_cases[i], list_cases[i].name);
	}
}

/* ads.example is listed in s0 and under the deny '*.example': the deny is the earlier level. */
static void test_user_deny_beats_lists(void **state)
{
	struct fixture *f = *state;
	const struct verdict v = {"ads.example", NULL,	    NULL,
				  false,	 BLOCK,	    R(user_deny),
				  "*.example",	 "example", "user deny before the lists"};
	check(f, &v, v.name);
}

/* filter.enabled false: nothing is filtered, local records still answer. */
static void test_filter_disabled(void **state)
{
	const char *yaml = "filter: {enabled: false, deny: [ads.test]}\n"
			   "local_records: [{name: nas.lan, type: A, value: 192.168.1.10}]\n";
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(nx_conf_load_string("t.yaml", yaml, strlen(yaml), &c, err, sizeof(err)),
			 0);
	struct nx_filter_rules *rules = NULL;
	assert_int_equal(nx_policy_rules_build(c, &rules), 0);
	struct nx_policy p = {.c = c, .rules = rules};
	struct sockaddr_storage ss;
	addr_of("192.168.1.50", &ss);
	uint8_t wire[NX_DNS_NAME_MAX];
	int wl = nx_dns_name_from_text("ads.test", wire);
	struct nx_policy_query q;
	nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss, NULL);
	struct nx_filter_result r;
	assert_int_equal(nx_policy_decide(&p, &q, &r), NX_FILTER_ACT_NONE);
	assert_int_equal(r.reason, NX_FILTER_R_none);
	wl = nx_dns_name_from_text("nas.lan", wire);
	nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss, NULL);
	assert_int_equal(nx_policy_decide(&p, &q, &r), NX_FILTER_ACT_LOCAL);
	/* no rules object, no snapshot: the ladder copes */
	p.rules = NULL;
	wl = nx_dns_name_from_text("other.test", wire);
	nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss, NULL);
	assert_int_equal(nx_policy_decide(&p, &q, &r), NX_FILTER_ACT_NONE);
	nx_filter_rules_free(rules);
	nx_conf_free(c);
}

/* The query's context: client resolved once, its name and groups. */
static void test_query_context(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_storage ss;
	addr_of("127.0.0.2", &ss);
	uint8_t wire[NX_DNS_NAME_MAX];
	int wl = nx_dns_name_from_text("x.test", wire);
	struct nx_policy_query q;
	nx_policy_query_init(&f->p, &q, wire, (size_t)wl, NX_DNS_T_AAAA, (struct sockaddr *)&ss,
			     NULL);
	assert_int_equal(q.qtype, NX_DNS_T_AAAA);
	assert_int_equal(q.client, 0);
	assert_string_equal(q.client_name, "kid");
	assert_string_equal(q.client_id, "");
	assert_int_equal(q.groups, 0x3); /* default, kids */
	assert_int_equal(q.eligible, 0x3);
	assert_true(q.filtering);
	assert_int_equal(q.ntags, 2);
	assert_string_equal(q.tags[0], "device_tablet");
	assert_string_equal(q.tags[1], "user_child");
	addr_of("127.0.0.3", &ss);
	nx_policy_query_init(&f->p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss, NULL);
	assert_string_equal(q.client_name, "tv");
	assert_int_equal(q.ntags, 0);
	assert_null(q.tags);
	assert_int_equal(q.groups, 0x4); /* off */
	assert_false(q.filtering);
	addr_of("192.168.1.50", &ss);
	nx_policy_query_init(&f->p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss,
			     "tablet");
	assert_string_equal(q.client_name, "kid");
	assert_string_equal(q.client_id, "tablet");
	nx_policy_query_init(&f->p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss, NULL);
	assert_int_equal(q.client, -1);
	assert_null(q.client_name);
	assert_int_equal(q.groups, 0x1);
	assert_int_equal(q.eligible, 0x1);
}

/* User rules limited to groups apply only to the clients of those groups. */
static void test_rules_limited_to_groups(void **state)
{
	struct fixture *f = *state;
	struct nx_filter_rules *r;
	char err[128];
	assert_int_equal(nx_filter_rules_new(&r), 0);
	assert_int_equal(nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "homework.test", 1u << 1, err,
					     sizeof(err)),
			 0);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, "ads.test", 1u << 1, err, sizeof(err)),
	    0);
	assert_int_equal(nx_filter_rules_finish(r), 0);
	struct nx_policy p = f->p;
	p.rules = r;
	static const struct {
		const char *name, *client;
		enum nx_filter_action action;
		enum nx_filter_reason reason;
	} t[] = {
	    {"homework.test", "192.168.1.50", NONE, R(none)},
	    {"homework.test", "127.0.0.2", BLOCK, R(user_deny)},
	    {"homework.test", "127.0.0.4", BLOCK, R(user_deny)},
	    {"ads.test", "192.168.1.50", BLOCK, R(blocklist_domain)},
	    {"ads.test", "127.0.0.2", ALLOW, R(user_allow)},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		struct sockaddr_storage ss;
		addr_of(t[i].client, &ss);
		uint8_t wire[NX_DNS_NAME_MAX];
		int wl = nx_dns_name_from_text(t[i].name, wire);
		struct nx_policy_query q;
		nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss,
				     NULL);
		struct nx_filter_result res;
		nx_policy_decide(&p, &q, &res);
		if (res.action != t[i].action || res.reason != t[i].reason) {
			fail_msg("%s from %s: got %s/%s", t[i].name, t[i].client,
				 nx_filter_action_name(res.action),
				 nx_filter_reason_name(res.reason));
		}
	}
	nx_filter_rules_free(r);
}

/* The config form: `{rule: x, groups: [...]}` in filter.allow / filter.deny, its errors, and the
 * ladder over it. */
static void test_rules_groups_from_config(void **state)
{
	(void)state;
	const char *yaml = "filter:\n"
			   "  deny: [plain.test, {rule: homework.test, groups: [kids]},\n"
			   "         {rule: '*.games.test', groups: [kids, guests]}]\n"
			   "  allow: [{rule: Homework.Test., groups: [teachers]}]\n"
			   "groups: {kids: {}, guests: {}, teachers: {}}\n"
			   "clients:\n"
			   "  - {name: kid, ids: [127.0.0.2], groups: [kids]}\n"
			   "  - {name: teacher, ids: [127.0.0.5], groups: [kids, teachers]}\n"
			   "  - {name: guest, ids: [127.0.0.6], groups: [guests]}\n";
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	if (nx_conf_load_string("t.yaml", yaml, strlen(yaml), &c, err, sizeof(err)) != 0) {
		fail_msg("config: %s", err);
	}
	assert_int_equal(c->n_deny_rules, 3);
	assert_string_equal(c->deny_rules[1], "homework.test");
	assert_non_null(c->deny_scopes);
	assert_int_equal(c->deny_scopes[0].n_groups, 0);
	assert_int_equal(c->deny_scopes[1].n_groups, 1);
	assert_string_equal(c->deny_scopes[1].groups[0], "kids");
	assert_int_equal(nx_conf_rule_groups(c, 1, 0), 0);
	assert_int_equal(nx_conf_rule_groups(c, 1, 1), 1u << 1);
	assert_int_equal(nx_conf_rule_groups(c, 1, 2), 1u << 1 | 1u << 2);
	assert_int_equal(nx_conf_rule_groups(c, 0, 0), 1u << 3);
	assert_string_equal(c->allow_rules[0], "homework.test");
	struct nx_filter_rules *rules = NULL;
	assert_int_equal(nx_policy_rules_build(c, &rules), 0);
	struct nx_policy p = {.c = c, .rules = rules};
	static const struct {
		const char *name, *client;
		enum nx_filter_action action;
		enum nx_filter_reason reason;
	} t[] = {
	    {"plain.test", "192.168.1.50", BLOCK, R(user_deny)},
	    {"homework.test", "192.168.1.50", NONE, R(none)},
	    {"homework.test", "127.0.0.2", BLOCK, R(user_deny)},
	    {"homework.test", "127.0.0.5", ALLOW, R(user_allow)}, /* teachers' allow wins */
	    {"homework.test", "127.0.0.6", NONE, R(none)},
	    {"a.games.test", "127.0.0.6", BLOCK, R(user_deny)},
	    {"a.games.test", "192.168.1.50", NONE, R(none)},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		struct sockaddr_storage ss;
		addr_of(t[i].client, &ss);
		uint8_t wire[NX_DNS_NAME_MAX];
		int wl = nx_dns_name_from_text(t[i].name, wire);
		struct nx_policy_query q;
		nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A, (struct sockaddr *)&ss,
				     NULL);
		struct nx_filter_result res;
		nx_policy_decide(&p, &q, &res);
		if (res.action != t[i].action || res.reason != t[i].reason) {
			fail_msg("%s from %s: got %s/%s", t[i].name, t[i].client,
				 nx_filter_action_name(res.action),
				 nx_filter_reason_name(res.reason));
		}
	}
	nx_filter_rules_free(rules);
	nx_conf_free(c);

	static const struct {
		const char *yaml, *err;
	} bad[] = {
	    {"filter:\n  deny: [{rule: x.test, groups: [kid]}]\ngroups: {kids: {}}\n",
	     "t.yaml:2:34: filter.deny[0].groups[0]: unknown group 'kid' (did you mean 'kids'?)"},
	    {"filter:\n  allow: [{groups: [default]}]\n",
	     "t.yaml:2:11: filter.allow[0]: missing 'rule'"},
	    {"filter:\n  allow: [{rule: x.test, group: [default]}]\n",
	     "t.yaml:2:26: unknown key 'filter.allow[0].group' (did you mean 'groups'?)"},
	    {"filter:\n  deny: [{rule: 'a..b', groups: [default]}]\n",
	     "t.yaml:2:17: filter.deny[0]: 'a..b': not a name, *.name or /regex/ (empty label, "
	     "label longer than 63 bytes or name longer than 255)"},
	    {"filter:\n  deny: [{rule: x.test, groups: []}]\n",
	     "t.yaml:2:33: filter.deny[0].groups: needs 1..64 entries, got 0"},
	    {"clients: [{name: a, ids: [10.0.0.1], tags: [Device-PC]}]\n",
	     "t.yaml:1:45: clients[0].tags[0]: 'Device-PC': a tag is 1..32 of a-z, 0-9 and '_'"},
	    {"clients: [{name: a, ids: [10.0.0.1], tags: [os_ios, os_ios]}]\n",
	     "t.yaml:1:53: clients[0].tags[1]: duplicate tag 'os_ios'"},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad); i++) {
		c = NULL;
		err[0] = 0;
		assert_int_not_equal(nx_conf_load_string("t.yaml", bad[i].yaml, strlen(bad[i].yaml),
							 &c, err, sizeof(err)),
				     0);
		assert_null(c);
		if (strcmp(err, bad[i].err) != 0) {
			fail_msg("case %zu: got '%s', want '%s'", i, err, bad[i].err);
		}
	}
}

/* ---- a user $badfilter against the lists' snapshot entries (badfilter.c) ---- */

/* b0 and b1: both in the default group. The user rules that cancel them are in BF_YAML. */
static const char B0[] =
    "||x.test^\n"	    /* ||x.test^$badfilter: gone, and below */
    "||k.test^\n"	    /* |k.test^$badfilter: kinds differ, stays */
    "|e.test^\n"	    /* |e.test^$badfilter: gone */
    "e2.test\n"		    /* a plain entry is the same exact-only form */
    "||two.test^\n"	    /* cancelled here, b1 lists it exact */
    "||multi.test^\n"	    /* in both lists: cancelled in both */
    "||example.test^\n"	    /* a parent still blocks ads.example.test */
    "||ads.example.test^\n" /* cancelled */
    "||exc.test^\n"
    "@@||exc.test^\n" /* @@||exc.test^$badfilter: blocked again */
    "||aex.test^\n"
    "@@|aex.test^\n" /* @@|aex.test^$badfilter: blocked again */
    "||aex2.test^\n"
    "@@||aex2.test^\n" /* @@|aex2.test^$badfilter: kinds differ, stays */
    "||g.test^\n"      /* cancelled for the kids group only */
    "||sd.test^\n"     /* cancelled: b1's regex, which tied, decides */
    "||se.test^\n"
    "@@||se.test^\n" /* cancelled: b1's modifier block, which lost, decides */
    "||sr.test^\n"
    "@@||sr.test^\n"; /* cancelled: b1's plain regex ties the block: the snapshot */
static const char B1[] = "two.test\n"
			 "||multi.test^\n"
			 "/^sd[.]test$/\n"
			 "||se.test^$dnstype=A\n"
			 "/^sr[.]test$/\n";

static const char BF_YAML[] =
    "filter:\n"
    "  sources:\n"
    "    - {name: b0, path: %s/b0.txt}\n"
    "    - {name: b1, path: %s/b1.txt}\n"
    "  deny: ['||x.test^$badfilter', '|k.test^$badfilter', '|e.test^$badfilter',\n"
    "         '||two.test^$badfilter', '||multi.test^$badfilter',\n"
    "         '||ads.example.test^$badfilter', '@@||exc.test^$badfilter',\n"
    "         '@@|aex.test^$badfilter', '@@|aex2.test^$badfilter',\n"
    "         {rule: '||g.test^$badfilter', groups: [kids]}, '||sd.test^$badfilter',\n"
    "         '@@||se.test^$badfilter', '@@||sr.test^$badfilter']\n"
    "  allow: ['|e2.test^$badfilter', '||not.badfilter.test^$dnstype=A']\n"
    "groups:\n"
    "  kids: {}\n"
    "clients:\n"
    "  - {name: kid, ids: [127.0.0.2], groups: [default, kids]}\n";

struct bf_case {
	const char *name;
	const char *client; /* NULL: 192.168.1.50, the default group */
	/* with the user $badfilter rules */
	enum nx_filter_action action;
	enum nx_filter_reason reason;
	const char *source, *matched;
	/* without them (p.badfilter NULL): what the lists alone say */
	enum nx_filter_action action0;
	enum nx_filter_reason reason0;
	const char *why;
};

static const struct bf_case bf_cases[] = {
    {"x.test", NULL, NONE, R(none), "", "", BLOCK, R(blocklist_domain),
     "||x^$badfilter cancels a list's ||x^ for x"},
    {"a.x.test", NULL, NONE, R(none), "", "", BLOCK, R(blocklist_wildcard), "and for sub.x"},
    {"k.test", NULL, BLOCK, R(blocklist_domain), "b0", "k.test", BLOCK, R(blocklist_domain),
     "|x^$badfilter does not cancel ||x^ (kinds differ)"},
    {"a.k.test", NULL, BLOCK, R(blocklist_wildcard), "b0", "k.test", BLOCK, R(blocklist_wildcard),
     "nor its subdomains"},
    {"e.test", NULL, NONE, R(none), "", "", BLOCK, R(blocklist_domain),
     "|x^$badfilter cancels an exact entry"},
    {"e2.test", NULL, NONE, R(none), "", "", BLOCK, R(blocklist_domain),
     "a plain entry too (the same snapshot form), from filter.allow as well"},
    {"two.test", NULL, BLOCK, R(blocklist_domain), "b1", "two.test", BLOCK, R(blocklist_domain),
     "a second list listing the name otherwise still blocks"},
    {"a.two.test", NULL, NONE, R(none), "", "", BLOCK, R(blocklist_wildcard),
     "but not below it: only b0 had ||two.test^"},
    {"multi.test", NULL, NONE, R(none), "", "", BLOCK, R(blocklist_domain),
     "the same rule in two lists: cancelled in every list"},
    {"ads.example.test", NULL, BLOCK, R(blocklist_wildcard), "b0", "example.test", BLOCK,
     R(blocklist_domain), "a parent's entry still blocks the cancelled name"},
    {"a.ads.example.test", NULL, BLOCK, R(blocklist_wildcard), "b0", "example.test", BLOCK,
     R(blocklist_wildcard), "and the names below it, from the parent"},
    {"exc.test", NULL, BLOCK, R(blocklist_domain), "b0", "exc.test", ALLOW, R(blocklist_exception),
     "@@||x^$badfilter cancels a list exception: x is blocked again"},
    {"a.exc.test", NULL, BLOCK, R(blocklist_wildcard), "b0", "exc.test", ALLOW,
     R(blocklist_exception), "and sub.x"},
    {"aex.test", NULL, BLOCK, R(blocklist_domain), "b0", "aex.test", ALLOW, R(blocklist_exception),
     "@@|x^$badfilter cancels an exact-only exception"},
    {"aex2.test", NULL, ALLOW, R(blocklist_exception), "b0", "aex2.test", ALLOW,
     R(blocklist_exception), "but not an @@||x^ one"},
    {"g.test", NULL, BLOCK, R(blocklist_domain), "b0", "g.test", BLOCK, R(blocklist_domain),
     "a badfilter limited to a group does not apply to other clients"},
    {"g.test", "127.0.0.2", NONE, R(none), "", "", BLOCK, R(blocklist_domain),
     "it applies to the group's clients"},
    {"sd.test", NULL, BLOCK, R(blocklist_rule), "b1", "", BLOCK, R(blocklist_domain),
     "a side rule that tied the cancelled entry (the snapshot wins ties) decides now"},
    {"se.test", NULL, BLOCK, R(blocklist_rule), "b1", "se.test", ALLOW, R(blocklist_exception),
     "the exception cancelled: a side block with a modifier beats the snapshot's block"},
    {"sr.test", NULL, BLOCK, R(blocklist_domain), "b0", "sr.test", ALLOW, R(blocklist_exception),
     "the exception cancelled: a plain side block ties the snapshot's"},
    {"nothing.test", NULL, NONE, R(none), "", "", NONE, R(none), "no list entry: nothing"},
};

static size_t make_answer(uint8_t *buf, size_t cap, const char *qname, uint16_t qtype,
			  const struct nx_dns_rr_spec *rrs, size_t n, struct nx_dns_msg *m,
			  struct nx_dns_question *qq);

static void test_user_badfilter(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_writef(dir, "b0.txt", B0);
	th_writef(dir, "b1.txt", B1);
	const char *names[] = {"b0", "b1"};
	struct nx_filter_snap_source src[2];
	for (int i = 0; i < 2; i++) {
		char in[4300];
		snprintf(in, sizeof(in), "%s/%s.txt", dir, names[i]);
		struct nx_filter_compile_opts o = {.name = names[i], .side = true};
		struct nx_filter_compile_report rep;
		assert_int_equal(nx_filter_compile_file(in, dir, &o, &rep), 0);
		src[i] = (struct nx_filter_snap_source){names[i], dir};
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/l.nxs", dir);
	struct nx_filter_snap *snap = NULL;
	struct nx_filter_side *side = NULL;
	assert_int_equal(nx_filter_snap_build(path, src, 2, NULL, NULL), 0);
	assert_int_equal(nx_filter_snap_open(path, &snap), 0);
	assert_int_equal(nx_filter_side_open(src, 2, &side), 0);
	char yaml[sizeof(BF_YAML) + 9000];
	snprintf(yaml, sizeof(yaml), BF_YAML, dir, dir);
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	if (nx_conf_load_string("t.yaml", yaml, strlen(yaml), &c, err, sizeof(err)) != 0) {
		fail_msg("config: %s", err);
	}
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	int64_t before = rows[NX_OWNER_filter_rules].bytes;
	struct nx_filter_rules *rules = NULL;
	struct nx_filter_side *user_side = NULL;
	struct nx_policy_badfilter *bf = NULL;
	assert_int_equal(nx_policy_rules_build(c, &rules), 0);
	assert_int_equal(nx_policy_user_side_build(c, &user_side), 0);
	nx_ledger_read(rows);
	int64_t rules_bytes = rows[NX_OWNER_filter_rules].bytes;
	assert_int_equal(nx_policy_badfilter_build(c, &bf), 0);
	/* 14 rules: every $badfilter line, not the one with another modifier */
	assert_int_equal(nx_policy_badfilter_count(bf), 14);
	nx_ledger_read(rows);
	assert_true(rows[NX_OWNER_filter_rules].bytes > rules_bytes); /* charged to the rules */
	struct nx_policy p = {
	    .c = c, .rules = rules, .user_side = user_side, .snap = snap, .side = side};
	for (int with = 0; with < 2; with++) {
		p.badfilter = with ? bf : NULL;
		for (size_t i = 0; i < NX_ARRAY_LEN(bf_cases); i++) {
			const struct bf_case *v = &bf_cases[i];
			struct sockaddr_storage ss;
			addr_of(v->client ? v->client : "192.168.1.50", &ss);
			uint8_t wire[NX_DNS_NAME_MAX];
			int wl = nx_dns_name_from_text(v->name, wire);
			assert_true(wl > 0);
			struct nx_policy_query q;
			nx_policy_query_init(&p, &q, wire, (size_t)wl, NX_DNS_T_A,
					     (struct sockaddr *)&ss, NULL);
			struct nx_filter_result r;
			enum nx_filter_action a = nx_policy_decide(&p, &q, &r);
			char matched[NX_DNS_TEXT_MAX] = "";
			if (r.matched_len) {
				nx_dns_name_to_text(wire + r.matched_off, r.matched_len, matched,
						    sizeof(matched));
			}
			const char *s = nx_policy_source_name(&p, &r);
			bool ok = with ? a == v->action && r.reason == v->reason &&
					     strcmp(s, v->source) == 0 &&
					     strcmp(matched, v->matched) == 0
				       : a == v->action0 && r.reason == v->reason0;
			if (!ok) {
				fail_msg(
				    "%s from %s, %s the badfilter set: got %s/%s/'%s'/'%s' -- %s",
				    v->name, v->client ? v->client : "-", with ? "with" : "without",
				    nx_filter_action_name(a), nx_filter_reason_name(r.reason), s,
				    matched, v->why);
			}
		}
	}
	/* an upstream answer's CNAME target goes through the same list level: x.test is no
	 * longer blocked, exc.test (its exception cancelled) is */
	static const struct {
		const char *target;
		bool blocked0, blocked;
	} tg[] = {{"a.x.test", true, false}, {"exc.test", false, true}};
	for (int with = 0; with < 2; with++) {
		p.badfilter = with ? bf : NULL;
		for (size_t i = 0; i < NX_ARRAY_LEN(tg); i++) {
			uint8_t target[NX_DNS_NAME_MAX];
			int tl = nx_dns_name_from_text(tg[i].target, target);
			struct nx_dns_rr_spec rr = {.type = NX_DNS_T_CNAME,
						    .ttl = 60,
						    .rdata = target,
						    .rdlen = (uint16_t)tl};
			uint8_t buf[1024];
			struct nx_dns_msg m;
			struct nx_dns_question qq;
			make_answer(buf, sizeof(buf), "www.shop.test", NX_DNS_T_A, &rr, 1, &m, &qq);
			struct sockaddr_storage ss;
			addr_of("192.168.1.50", &ss);
			struct nx_policy_query q;
			nx_policy_query_init(&p, &q, qq.name, qq.name_len, qq.qtype,
					     (struct sockaddr *)&ss, NULL);
			struct nx_filter_result r;
			uint8_t mw[NX_DNS_NAME_MAX];
			size_t ml = 0;
			bool b = nx_policy_check_answer(&p, &q, buf, &m, &r, mw, &ml);
			if (b != (with ? tg[i].blocked : tg[i].blocked0)) {
				fail_msg("CNAME to %s %s the badfilter set: blocked %d",
					 tg[i].target, with ? "with" : "without", b);
			}
		}
	}
	nx_policy_badfilter_free(bf);
	nx_ledger_read(rows);
	assert_int_equal(rows[NX_OWNER_filter_rules].bytes, rules_bytes);
	nx_filter_rules_free(rules);
	nx_filter_side_free(user_side);
	nx_ledger_read(rows);
	assert_int_equal(rows[NX_OWNER_filter_rules].bytes, before);
	/* no $badfilter rule: no set at all */
	const char *plain = "filter: {deny: ['||a.test^$dnstype=A', b.test, '@@||c.test^']}\n";
	struct nx_conf *c2 = NULL;
	assert_int_equal(nx_conf_load_string("t.yaml", plain, strlen(plain), &c2, err, sizeof(err)),
			 0);
	bf = (struct nx_policy_badfilter *)1;
	assert_int_equal(nx_policy_badfilter_build(c2, &bf), 0);
	assert_null(bf);
	nx_conf_free(c2);
	/* only $badfilter user rules: the set, and no user side structure to walk per query */
	const char *only =
	    "filter: {deny: ['||a.test^$badfilter'], allow: ['@@|b.test^$badfilter']}\n";
	assert_int_equal(nx_conf_load_string("t.yaml", only, strlen(only), &c2, err, sizeof(err)),
			 0);
	user_side = (struct nx_filter_side *)1;
	assert_int_equal(nx_policy_user_side_build(c2, &user_side), 0);
	assert_null(user_side);
	assert_int_equal(nx_policy_badfilter_build(c2, &bf), 0);
	assert_int_equal(nx_policy_badfilter_count(bf), 2);
	nx_policy_badfilter_free(bf);
	nx_conf_free(c2);
	nx_filter_side_free(side);
	nx_filter_snap_free(snap);
	nx_conf_free(c);
	nx_filter_lists_thread_done();
	th_rmtree(dir);
	free(dir);
}

/* ---- the answer's targets ---- */

/* An upstream-like answer for qname: rrs in order (owner NULL = qname). */
static size_t make_answer(uint8_t *buf, size_t cap, const char *qname, uint16_t qtype,
			  const struct nx_dns_rr_spec *rrs, size_t n, struct nx_dns_msg *m,
			  struct nx_dns_question *qq)
{
	memset(qq, 0, sizeof(*qq));
	int wl = nx_dns_name_from_text(qname, qq->name);
	assert_true(wl > 0);
	qq->name_len = (uint8_t)wl;
	qq->qtype = qtype;
	qq->qclass = 1;
	struct nx_dns_reply_ctx ctx = {.id = 1, .q = qq, .max_size = cap};
	int len =
	    nx_dns_build_answer(buf, cap, &ctx, NX_DNS_NOERROR, false, rrs, n, NULL, 0, -1, NULL);
	assert_true(len > 0);
	assert_int_equal(nx_dns_msg_parse(buf, (size_t)len, m), 0);
	return (size_t)len;
}

static void test_answer_targets(void **state)
{
	struct fixture *f = *state;
	uint8_t tracker[NX_DNS_NAME_MAX], safe[NX_DNS_NAME_MAX], nas[NX_DNS_NAME_MAX],
	    https_rd[NX_DNS_NAME_MAX + 2], svcb_self[3] = {0, 1, 0};
	size_t tl = (size_t)nx_dns_name_from_text("tracker.cdn.net", tracker);
	size_t sl = (size_t)nx_dns_name_from_text("safe.cdn.net", safe);
	size_t nl = (size_t)nx_dns_name_from_text("nas.lan", nas);
	https_rd[0] = 0;
	https_rd[1] = 1;
	memcpy(https_rd + 2, tracker, tl);
	static const uint8_t a4[4] = {192, 0, 2, 1};
	struct {
		const char *why;
		struct nx_dns_rr_spec rrs[2];
		size_t n;
		uint16_t qtype;
		const char *client;
		bool blocked;
	} t[] = {
	    {"a CNAME to a listed name",
	     {{.type = NX_DNS_T_CNAME, .ttl = 60, .rdata = tracker, .rdlen = (uint16_t)tl}},
	     1,
	     NX_DNS_T_A,
	     NULL,
	     true},
	    {"a CNAME to a user-allowed name",
	     {{.type = NX_DNS_T_CNAME, .ttl = 60, .rdata = safe, .rdlen = (uint16_t)sl}},
	     1,
	     NX_DNS_T_A,
	     NULL,
	     false},
	    {"a CNAME to a local name is no reason to block",
	     {{.type = NX_DNS_T_CNAME, .ttl = 60, .rdata = nas, .rdlen = (uint16_t)nl}},
	     1,
	     NX_DNS_T_A,
	     NULL,
	     false},
	    {"an HTTPS TargetName that is listed",
	     {{.type = NX_DNS_T_HTTPS, .ttl = 60, .rdata = https_rd, .rdlen = (uint16_t)(tl + 2)}},
	     1,
	     NX_DNS_T_HTTPS,
	     NULL,
	     true},
	    {"an SVCB TargetName '.' (the owner itself)",
	     {{.type = 64, .ttl = 60, .rdata = svcb_self, .rdlen = 3}},
	     1,
	     64,
	     NULL,
	     false},
	    {"addresses only",
	     {{.type = NX_DNS_T_A, .ttl = 60, .rdata = a4, .rdlen = 4}},
	     1,
	     NX_DNS_T_A,
	     NULL,
	     false},
	    {"a listed CNAME target for an unfiltered client",
	     {{.type = NX_DNS_T_CNAME, .ttl = 60, .rdata = tracker, .rdlen = (uint16_t)tl}},
	     1,
	     NX_DNS_T_A,
	     "127.0.0.3",
	     false},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		uint8_t buf[1024];
		struct nx_dns_msg m;
		struct nx_dns_question qq;
		make_answer(buf, sizeof(buf), "www.shop.test", t[i].qtype, t[i].rrs, t[i].n, &m,
			    &qq);
		struct sockaddr_storage ss;
		addr_of(t[i].client ? t[i].client : "192.168.1.50", &ss);
		struct nx_policy_query q;
		nx_policy_query_init(&f->p, &q, qq.name, qq.name_len, qq.qtype,
				     (struct sockaddr *)&ss, NULL);
		struct nx_filter_result r;
		uint8_t mw[NX_DNS_NAME_MAX];
		size_t ml = 0;
		bool b = nx_policy_check_answer(&f->p, &q, buf, &m, &r, mw, &ml);
		if (b != t[i].blocked) {
			fail_msg("%s: blocked %d, want %d", t[i].why, b, t[i].blocked);
		}
		if (b) {
			char text[NX_DNS_TEXT_MAX];
			nx_dns_name_to_text(mw, ml, text, sizeof(text));
			assert_string_equal(text, "tracker.cdn.net");
			assert_int_equal(r.reason, NX_FILTER_R_blocklist_domain);
			assert_string_equal(nx_policy_source_name(&f->p, &r), "s0");
		}
	}
}

/* ---- local answers ---- */

struct rr_seen {
	uint16_t type;
	char owner[NX_DNS_TEXT_MAX];
	char data[NX_DNS_TEXT_MAX]; /* names and addresses as text */
};

/* Answer section of a reply we built, as (type, owner, data). Returns the count. */
static size_t answer_rrs(const uint8_t *buf, size_t len, int *rcode, bool *aa, struct rr_seen *out,
			 size_t max)
{
	assert_true(len >= 12);
	*rcode = buf[3] & 0xf;
	*aa = (buf[2] & 0x04) != 0;
	unsigned an = (unsigned)(buf[6] << 8 | buf[7]);
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, len);
	rd.pos = 12;
	nx_dns_rd_skip_name(&rd);
	nx_dns_rd_skip(&rd, 4);
	size_t n = 0;
	for (unsigned i = 0; i < an && n < max; i++) {
		uint8_t owner[NX_DNS_NAME_MAX];
		size_t ol = nx_dns_rd_name(&rd, owner);
		struct rr_seen *s = &out[n++];
		s->type = nx_dns_rd_u16(&rd);
		nx_dns_rd_skip(&rd, 6);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		assert_false(rd.err);
		nx_dns_name_to_text(owner, ol, s->owner, sizeof(s->owner));
		size_t at = rd.pos;
		s->data[0] = 0;
		if (s->type == NX_DNS_T_A) {
			inet_ntop(AF_INET, buf + at, s->data, sizeof(s->data));
		} else if (s->type == NX_DNS_T_AAAA) {
			inet_ntop(AF_INET6, buf + at, s->data, sizeof(s->data));
		} else if (s->type == NX_DNS_T_CNAME || s->type == NX_DNS_T_PTR) {
			uint8_t nm[NX_DNS_NAME_MAX];
			size_t l = nx_dns_rd_name(&rd, nm);
			nx_dns_name_to_text(nm, l, s->data, sizeof(s->data));
		}
		rd.pos = at + rdlen;
	}
	return n;
}

static void test_local_answers(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *name;
		uint16_t qtype;
		const char *want; /* "TYPE owner data;" for each record */
		const char *tail; /* a CNAME target that is not local, or "" */
	} t[] = {
	    {"nas.lan", NX_DNS_T_A, "1 nas.lan 192.168.1.10;", ""},
	    {"nas.lan", NX_DNS_T_AAAA, "28 nas.lan fd00::10;", ""},
	    {"nas.lan", NX_DNS_T_TXT, "", ""}, /* NODATA: the name has records, not this type */
	    {"alias.lan", NX_DNS_T_A, "5 alias.lan nas.lan;1 nas.lan 192.168.1.10;", ""},
	    {"chain.lan", NX_DNS_T_AAAA,
	     "5 chain.lan alias.lan;5 alias.lan nas.lan;28 nas.lan fd00::10;", ""},
	    {"alias.lan", NX_DNS_T_CNAME, "5 alias.lan nas.lan;", ""},
	    {"alias.lan", NX_DNS_T_TXT, "5 alias.lan nas.lan;", ""}, /* target lacks the type */
	    {"ext.lan", NX_DNS_T_A, "5 ext.lan www.example.net;", "www.example.net"},
	    {"text.lan", NX_DNS_T_TXT, "16 text.lan ;", ""},
	    {"20.1.168.192.in-addr.arpa", NX_DNS_T_PTR, "12 20.1.168.192.in-addr.arpa printer.lan;",
	     ""},
	    {"10.1.168.192.in-addr.arpa", NX_DNS_T_PTR, "12 10.1.168.192.in-addr.arpa given.lan;",
	     ""}, /* a given PTR wins over the generated one */
	    {"0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa",
	     NX_DNS_T_PTR,
	     "12 0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa nas.lan;",
	     ""},
	    {"20.1.168.192.in-addr.arpa", NX_DNS_T_A, "", ""}, /* NODATA for other types */
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		struct nx_dns_question qq = {.qtype = t[i].qtype, .qclass = 1};
		int wl = nx_dns_name_from_text(t[i].name, qq.name);
		assert_true(wl > 0);
		qq.name_len = (uint8_t)wl;
		assert_true(nx_policy_local_has(f->c, qq.name, qq.name_len));
		struct nx_dns_reply_ctx ctx = {.id = 7, .q = &qq, .max_size = 4096};
		uint8_t out[4096], tail[NX_DNS_NAME_MAX];
		size_t tl = 99;
		int n = nx_policy_local_answer(&f->p, out, sizeof(out), &ctx, tail, &tl);
		assert_true(n > 0);
		int rcode;
		bool aa;
		struct rr_seen rrs[8];
		size_t cnt = answer_rrs(out, (size_t)n, &rcode, &aa, rrs, 8);
		assert_int_equal(rcode, NX_DNS_NOERROR);
		assert_true(aa);
		char got[2048] = "";
		for (size_t k = 0; k < cnt; k++) {
			char one[2 * NX_DNS_TEXT_MAX + 16];
			snprintf(one, sizeof(one), "%u %s %s;", rrs[k].type, rrs[k].owner,
				 rrs[k].data);
			append(got, sizeof(got), one);
		}
		if (strcmp(got, t[i].want) != 0) {
			fail_msg("%s type %u: got '%s', want '%s'", t[i].name, t[i].qtype, got,
				 t[i].want);
		}
		char tails[NX_DNS_TEXT_MAX] = "";
		if (tl) {
			nx_dns_name_to_text(tail, tl, tails, sizeof(tails));
		}
		assert_string_equal(tails, t[i].tail);
	}
}

/*
 * A local CNAME whose target upstream answers NXDOMAIN: the splice keeps the rcode, the local
 * CNAME, and upstream's SOA in the authority section, its names decompressed (the upstream
 * message compresses them against the question) and its TTL min(TTL, MINIMUM) (RFC 2308 5).
 * Table: (SOA TTL, MINIMUM, expected TTL); a NODATA answer (NOERROR, no records) too.
 */
static void test_local_splice_soa(void **state)
{
	struct fixture *f = *state;
	static const struct {
		uint8_t rcode;
		uint32_t ttl, minimum, want_ttl;
	} t[] = {
	    {NX_DNS_NXDOMAIN, 300, 60, 60},  /* MINIMUM below the TTL: the negative TTL */
	    {NX_DNS_NXDOMAIN, 30, 60, 30},   /* a recursive's decremented TTL */
	    {NX_DNS_NOERROR, 300, 120, 120}, /* NODATA for the target */
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		/* upstream: www.example.net A, no answer, SOA example.net with pointers */
		uint8_t up[512];
		size_t n = 0;
		static const uint8_t hdr[12] = {0x12, 0x34, 0x81, 0x80, 0, 1, 0, 0, 0, 1, 0, 0};
		memcpy(up, hdr, 12);
		up[3] = (uint8_t)(0x80 | t[i].rcode);
		n = 12;
		static const uint8_t qname[] = "\3www\7example\3net";
		memcpy(up + n, qname, sizeof(qname)); /* with the root byte */
		n += sizeof(qname);
		static const uint8_t qtc[4] = {0, 1, 0, 1};
		memcpy(up + n, qtc, 4);
		n += 4;
		const uint8_t zone_ptr[2] = {0xc0, 16}; /* "example.net" in the question */
		memcpy(up + n, zone_ptr, 2);
		n += 2;
		const uint8_t fixed[4] = {0, 6, 0, 1};
		memcpy(up + n, fixed, 4);
		n += 4;
		for (int b = 3; b >= 0; b--) {
			up[n++] = (uint8_t)(t[i].ttl >> (8 * b));
		}
		size_t rdlen_at = n;
		n += 2;
		static const uint8_t mname[] = "\2ns", rname[] = "\12hostmaster";
		memcpy(up + n, mname, 3);
		n += 3;
		memcpy(up + n, zone_ptr, 2);
		n += 2;
		memcpy(up + n, rname, 11);
		n += 11;
		memcpy(up + n, zone_ptr, 2);
		n += 2;
		const uint32_t fields[5] = {1, 3600, 600, 86400, t[i].minimum};
		for (int k = 0; k < 5; k++) {
			for (int b = 3; b >= 0; b--) {
				up[n++] = (uint8_t)(fields[k] >> (8 * b));
			}
		}
		up[rdlen_at] = 0;
		up[rdlen_at + 1] = (uint8_t)(n - rdlen_at - 2);
		struct nx_dns_msg um;
		assert_int_equal(nx_dns_msg_parse(up, n, &um), 0);

		struct nx_dns_question qq = {.qtype = NX_DNS_T_A, .qclass = 1};
		int wl = nx_dns_name_from_text("ext.lan", qq.name);
		assert_true(wl > 0);
		qq.name_len = (uint8_t)wl;
		struct nx_dns_reply_ctx ctx = {.id = 7, .q = &qq, .max_size = 4096};
		uint8_t out[4096];
		int len = nx_policy_local_splice(&f->p, out, sizeof(out), &ctx, up, &um);
		assert_true(len > 0);
		struct nx_dns_msg m;
		assert_int_equal(nx_dns_msg_parse(out, (size_t)len, &m), 0);
		assert_int_equal(m.flags & 0xf, t[i].rcode);
		assert_false(m.flags & 0x0400); /* not authoritative: upstream's data */
		int rcode;
		bool aa;
		struct rr_seen rrs[4];
		assert_int_equal(answer_rrs(out, (size_t)len, &rcode, &aa, rrs, 4), 1);
		assert_string_equal(rrs[0].owner, "ext.lan");
		assert_string_equal(rrs[0].data, "www.example.net");
		assert_int_equal(m.nscount, 1);
		/* the authority record, read from our reply alone */
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, out, (size_t)len);
		rd.pos = m.answer_end;
		uint8_t nm[NX_DNS_NAME_MAX];
		char text[NX_DNS_TEXT_MAX];
		nx_dns_name_to_text(nm, nx_dns_rd_name(&rd, nm), text, sizeof(text));
		assert_string_equal(text, "example.net");
		assert_int_equal(nx_dns_rd_u16(&rd), NX_DNS_T_SOA);
		nx_dns_rd_u16(&rd);
		assert_int_equal(nx_dns_rd_u32(&rd), t[i].want_ttl);
		nx_dns_rd_u16(&rd);
		nx_dns_name_to_text(nm, nx_dns_rd_name(&rd, nm), text, sizeof(text));
		assert_string_equal(text, "ns.example.net");
		nx_dns_name_to_text(nm, nx_dns_rd_name(&rd, nm), text, sizeof(text));
		assert_string_equal(text, "hostmaster.example.net");
		nx_dns_rd_skip(&rd, 16);
		assert_int_equal(nx_dns_rd_u32(&rd), t[i].minimum);
		assert_false(rd.err);
	}
}

/* ---- special-use names (special.c) ---- */

/* Three configurations: the defaults with forward zones and rules that try to interfere; every
 * special key flipped from its default, with DoT/DoH listeners on specific addresses and a TLS
 * name; DoT/DoH on wildcard addresses. */
static const char *const SPECIAL_YAML[] = {
    "upstream:\n"
    "  forward_zones: {corp.home.arpa: ['127.0.0.1:5399'], 1.168.192.in-addr.arpa: "
    "['127.0.0.1:5399'],\n"
    "                  printer: ['127.0.0.1:5399'], d.f.ip6.arpa: ['127.0.0.1:5399']}\n"
    "filter:\n"
    "  allow: [mask.icloud.com]\n"
    "  deny: ['*.metric.gstatic.com', use-application-dns.net, '*.localhost', x.home.arpa]\n"
    "groups:\n"
    "  off: {filtering: false}\n"
    "clients:\n"
    "  - {name: tv, ids: [127.0.0.3], groups: [off]}\n"
    "local_records:\n"
    "  - {name: nas.local, type: A, value: 192.168.1.10}\n"
    "  - {name: my.localhost, type: A, value: 192.168.1.11}\n",

    "listener:\n"
    "  dot: ['127.0.0.1:8853', '[::1]:8853']\n"
    "  doh: ['192.0.2.1:8443']\n"
    "tls:\n"
    "  server_name: dns.home.example\n"
    "filter:\n"
    "  deny: ['*.metric.gstatic.com', use-application-dns.net]\n"
    "special:\n"
    "  localhost: false\n"
    "  domain_needed: false\n"
    "  bogus_priv: false\n"
    "  firefox_canary: false\n"
    "  android_probes: false\n"
    "  block_private_relay: true\n"
    "  ddr: true\n",

    "listener:\n"
    "  dot: ['0.0.0.0:853']\n"
    "  doh: ['[::]:443']\n",
};

struct special_case {
	int conf; /* SPECIAL_YAML index */
	const char *name;
	uint16_t qtype;
	const char *client; /* NULL: 192.168.1.50 (default group) */
	bool paused;
	enum nx_filter_action action;
	enum nx_filter_reason reason;
	const char *source;
	const char *why;
};

#define T_SVCB 64
static const struct special_case special_cases[] = {
    /* special.localhost */
    {0, "localhost", NX_DNS_T_A, NULL, false, LOCAL, R(special_localhost), "special.localhost",
     "RFC 6761 6.3"},
    {0, "a.b.LocalHost.", NX_DNS_T_AAAA, NULL, false, LOCAL, R(special_localhost),
     "special.localhost", "below it, any case; beats the deny '*.localhost'"},
    {0, "localhost", NX_DNS_T_TXT, NULL, true, LOCAL, R(special_localhost), "special.localhost",
     "every type, even paused"},
    {0, "my.localhost", NX_DNS_T_A, NULL, false, LOCAL, R(local_record), "", "local records win"},
    {0, "localhost.example", NX_DNS_T_A, NULL, false, NONE, R(none), "", "only the zone"},
    {1, "localhost", NX_DNS_T_A, NULL, false, NONE, R(none), "", "special.localhost: false"},
    /* special.domain_needed: local, invalid, home.arpa */
    {0, "printer.local", NX_DNS_T_A, NULL, false, LOCAL, R(special_use_name),
     "special.domain_needed", "mDNS names never go upstream"},
    {0, "local", NX_DNS_T_SOA, NULL, false, LOCAL, R(special_use_name), "special.domain_needed",
     "the zone itself, any type"},
    {0, "nas.local", NX_DNS_T_A, NULL, false, LOCAL, R(local_record), "", "local records win"},
    {0, "x.invalid", NX_DNS_T_A, "127.0.0.3", false, LOCAL, R(special_use_name),
     "special.domain_needed", "an unfiltered client leaks too"},
    {0, "x.home.arpa", NX_DNS_T_A, NULL, false, LOCAL, R(special_use_name), "special.domain_needed",
     "home.arpa; beats a user deny"},
    {0, "nas.corp.home.arpa", NX_DNS_T_A, NULL, false, NONE, R(none), "",
     "a forward zone covers it: forwarded there"},
    {0, "notlocal", NX_DNS_T_MX, NULL, false, NONE, R(none), "", "a label ending in 'local'"},
    {1, "x.invalid", NX_DNS_T_A, NULL, false, NONE, R(none), "", "special.domain_needed: false"},
    /* single-label A / AAAA / HTTPS */
    {0, "nas", NX_DNS_T_A, NULL, false, LOCAL, R(single_label), "special.domain_needed",
     "single-label A"},
    {0, "NAS.", NX_DNS_T_AAAA, NULL, false, LOCAL, R(single_label), "special.domain_needed",
     "AAAA"},
    {0, "nas", NX_DNS_T_HTTPS, NULL, false, LOCAL, R(single_label), "special.domain_needed",
     "HTTPS"},
    {0, "com", 43 /* DS */, NULL, false, NONE, R(none), "", "com DS: validating stubs need it"},
    {0, "org", 48 /* DNSKEY */, NULL, false, NONE, R(none), "", "org DNSKEY too"},
    {0, "printer", NX_DNS_T_A, NULL, false, NONE, R(none), "", "a forward zone 'printer'"},
    {1, "nas", NX_DNS_T_A, NULL, false, NONE, R(none), "", "special.domain_needed: false"},
    /* special.bogus_priv */
    {0, "1.0.0.10.in-addr.arpa", NX_DNS_T_PTR, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "10/8"},
    {0, "10.in-addr.arpa", NX_DNS_T_SOA, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "the zone apex"},
    {0, "1.0.16.172.in-addr.arpa", NX_DNS_T_PTR, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "172.16/12, first"},
    {0, "1.0.31.172.in-addr.arpa", NX_DNS_T_PTR, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "172.16/12, last"},
    {0, "1.0.32.172.in-addr.arpa", NX_DNS_T_PTR, NULL, false, NONE, R(none), "",
     "172.32 is public"},
    {0, "1.0.15.172.in-addr.arpa", NX_DNS_T_PTR, NULL, false, NONE, R(none), "",
     "172.15 is public"},
    {0, "4.3.2.1.254.169.in-addr.arpa", NX_DNS_T_PTR, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "IPv4 link-local (too deep is still inside)"},
    {0, "9.2.168.192.in-addr.arpa", NX_DNS_T_PTR, NULL, false, LOCAL, R(private_reverse),
     "special.bogus_priv", "192.168/16"},
    {0, "9.1.168.192.in-addr.arpa", NX_DNS_T_PTR, NULL, false, NONE, R(none), "",
     "a forward zone covers 192.168.1/24"},
    {0, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.C.F.ip6.arpa", NX_DNS_T_PTR,
     NULL, false, LOCAL, R(private_reverse), "special.bogus_priv", "fc00::/8, any case"},
    {0, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa", NX_DNS_T_PTR,
     NULL, false, NONE, R(none), "", "fd00::/8 has a forward zone here"},
    {0, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.b.e.f.ip6.arpa", NX_DNS_T_PTR,
     NULL, false, LOCAL, R(private_reverse), "special.bogus_priv", "fe80::/10, last quarter"},
    {0, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.c.e.f.ip6.arpa", NX_DNS_T_PTR,
     NULL, false, NONE, R(none), "", "fec0::/10 is not link-local"},
    {0, "1.2.0.192.in-addr.arpa", NX_DNS_T_PTR, NULL, false, NONE, R(none), "",
     "a public reverse name"},
    {1, "1.0.0.10.in-addr.arpa", NX_DNS_T_PTR, NULL, false, NONE, R(none), "",
     "special.bogus_priv: false"},
    /* special.firefox_canary */
    {0, "use-application-dns.net", NX_DNS_T_A, NULL, false, LOCAL, R(firefox_canary),
     "special.firefox_canary", "NXDOMAIN (beats the same name's user deny)"},
    {0, "x.use-application-dns.net", NX_DNS_T_A, NULL, false, NONE, R(none), "",
     "only the name Firefox asks"},
    {1, "use-application-dns.net", NX_DNS_T_A, NULL, false, BLOCK, R(user_deny),
     "use-application-dns.net", "special.firefox_canary: false: the rules decide"},
    /* special.android_probes */
    {0, "abc123-dnsotls-ds.metric.gstatic.com", NX_DNS_T_A, NULL, false, ALLOW, R(android_probe),
     "special.android_probes", "never blocked by '*.metric.gstatic.com'"},
    {0, "X-DNSOTLS-DS.Metric.gstatic.com", NX_DNS_T_AAAA, NULL, false, ALLOW, R(android_probe),
     "special.android_probes", "any case"},
    {0, "-dnsotls-ds.metric.gstatic.com", NX_DNS_T_A, NULL, false, BLOCK, R(user_deny),
     "*.metric.gstatic.com", "the probe has a random part"},
    {0, "a.b-dnsotls-ds.metric.gstatic.com", NX_DNS_T_A, NULL, false, BLOCK, R(user_deny),
     "*.metric.gstatic.com", "one label only"},
    {1, "abc123-dnsotls-ds.metric.gstatic.com", NX_DNS_T_A, NULL, false, BLOCK, R(user_deny),
     "*.metric.gstatic.com", "special.android_probes: false"},
    /* special.block_private_relay */
    {0, "mask.icloud.com", NX_DNS_T_A, NULL, false, ALLOW, R(user_allow), "mask.icloud.com",
     "off by default"},
    {1, "mask.icloud.com", NX_DNS_T_A, NULL, false, LOCAL, R(private_relay),
     "special.block_private_relay", "on"},
    {1, "MASK-H2.icloud.com", NX_DNS_T_HTTPS, NULL, false, LOCAL, R(private_relay),
     "special.block_private_relay", "the HTTP/2 name, any type"},
    {1, "x.mask.icloud.com", NX_DNS_T_A, NULL, false, NONE, R(none), "", "exactly the two"},
    /* special.ddr: never forwarded, even off */
    {0, "_dns.resolver.arpa", T_SVCB, NULL, false, LOCAL, R(ddr), "special.ddr", "DDR"},
    {0, "resolver.arpa", NX_DNS_T_SOA, NULL, false, LOCAL, R(ddr), "special.ddr", "the whole zone"},
    {0, "_dns.resolver.arpa", T_SVCB, "127.0.0.3", true, LOCAL, R(ddr), "special.ddr",
     "paused, unfiltered client"},
};

static struct nx_conf *special_conf(int i)
{
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	if (nx_conf_load_string("s.yaml", SPECIAL_YAML[i], strlen(SPECIAL_YAML[i]), &c, err,
				sizeof(err)) != 0) {
		fail_msg("config %d: %s", i, err);
	}
	return c;
}

static void test_special_names(void **state)
{
	(void)state;
	struct nx_conf *cs[2] = {special_conf(0), special_conf(1)};
	struct nx_filter_rules *rs[2] = {NULL, NULL};
	for (int i = 0; i < 2; i++) {
		assert_int_equal(nx_policy_rules_build(cs[i], &rs[i]), 0);
	}
	/* the defaults the docs promise */
	assert_true(cs[0]->special_localhost && cs[0]->special_domain_needed &&
		    cs[0]->special_bogus_priv && cs[0]->special_firefox_canary &&
		    cs[0]->special_android_probes && !cs[0]->special_block_private_relay &&
		    cs[0]->special_ddr);
	for (size_t i = 0; i < NX_ARRAY_LEN(special_cases); i++) {
		const struct special_case *v = &special_cases[i];
		struct nx_policy p = {.c = cs[v->conf], .rules = rs[v->conf], .paused = v->paused};
		struct sockaddr_storage ss;
		addr_of(v->client ? v->client : "192.168.1.50", &ss);
		uint8_t wire[NX_DNS_NAME_MAX];
		int wl = nx_dns_name_from_text(v->name, wire);
		assert_true(wl > 0);
		struct nx_policy_query q;
		nx_policy_query_init(&p, &q, wire, (size_t)wl, v->qtype, (struct sockaddr *)&ss,
				     NULL);
		struct nx_filter_result r;
		enum nx_filter_action a = nx_policy_decide(&p, &q, &r);
		const char *src = nx_policy_source_name(&p, &r);
		if (a != v->action || r.reason != v->reason || strcmp(src, v->source) != 0) {
			fail_msg("conf %d %s type %u: want %s/%s/'%s', got %s/%s/'%s' -- %s",
				 v->conf, v->name, v->qtype, nx_filter_action_name(v->action),
				 nx_filter_reason_name(v->reason), v->source,
				 nx_filter_action_name(a), nx_filter_reason_name(r.reason), src,
				 v->why);
		}
		/* a special verdict covers the whole name */
		if (r.reason >= NX_FILTER_R_special_localhost) {
			assert_int_equal(r.matched_off, 0);
			assert_int_equal(r.matched_len, wl);
		}
	}
	for (int i = 0; i < 2; i++) {
		nx_filter_rules_free(rs[i]);
		nx_conf_free(cs[i]);
	}
}

/* The answer for one question through the pipeline's entry (nx_policy_local_answer). */
static int special_reply(struct nx_conf *c, const char *name, uint16_t qtype, uint8_t *out,
			 size_t cap)
{
	struct nx_policy p = {.c = c};
	struct nx_dns_question qq = {.qtype = qtype, .qclass = 1};
	int wl = nx_dns_name_from_text(name, qq.name);
	assert_true(wl > 0);
	qq.name_len = (uint8_t)wl;
	struct nx_policy_query q;
	struct sockaddr_storage ss;
	addr_of("192.168.1.50", &ss);
	nx_policy_query_init(&p, &q, qq.name, qq.name_len, qtype, (struct sockaddr *)&ss, NULL);
	struct nx_filter_result r;
	assert_int_equal(nx_policy_decide(&p, &q, &r), NX_FILTER_ACT_LOCAL);
	struct nx_dns_reply_ctx ctx = {.id = 7, .q = &qq, .max_size = (uint16_t)cap, .edns = true};
	uint8_t tail[NX_DNS_NAME_MAX];
	size_t tl = 99;
	int n = nx_policy_local_answer(&p, out, cap, &ctx, tail, &tl);
	assert_true(n > 12);
	assert_int_equal(tl, 0);
	return n;
}

static void test_special_answers(void **state)
{
	(void)state;
	struct nx_conf *c = special_conf(0);
	static const struct {
		const char *name;
		uint16_t qtype;
		int rcode;
		const char *want;
	} t[] = {
	    {"localhost", NX_DNS_T_A, NX_DNS_NOERROR, "1 localhost 127.0.0.1;"},
	    {"X.LocalHost", NX_DNS_T_AAAA, NX_DNS_NOERROR, "28 X.LocalHost ::1;"},
	    {"localhost", NX_DNS_T_MX, NX_DNS_NOERROR, ""},
	    {"printer.local", NX_DNS_T_A, NX_DNS_NXDOMAIN, ""},
	    {"nas", NX_DNS_T_HTTPS, NX_DNS_NXDOMAIN, ""},
	    {"1.0.0.10.in-addr.arpa", NX_DNS_T_PTR, NX_DNS_NXDOMAIN, ""},
	    {"use-application-dns.net", NX_DNS_T_A, NX_DNS_NXDOMAIN, ""},
	    {"_dns.resolver.arpa", NX_DNS_T_A, NX_DNS_NOERROR, ""},
	    {"_dns.resolver.arpa", T_SVCB, NX_DNS_NOERROR, ""}, /* no DoT / DoH listener */
	    {"resolver.arpa", NX_DNS_T_SOA, NX_DNS_NOERROR, ""},
	    {"x.resolver.arpa", NX_DNS_T_A, NX_DNS_NXDOMAIN, ""},
	};
	uint64_t before = nx_stat_read(NX_STAT_SP_LOCALHOST);
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		uint8_t out[4096];
		int n = special_reply(c, t[i].name, t[i].qtype, out, sizeof(out));
		int rcode;
		bool aa;
		struct rr_seen rrs[4];
		size_t cnt = answer_rrs(out, (size_t)n, &rcode, &aa, rrs, 4);
		char got[1024] = "";
		for (size_t k = 0; k < cnt; k++) {
			char one[2 * NX_DNS_TEXT_MAX + 16];
			snprintf(one, sizeof(one), "%u %s %s;", rrs[k].type, rrs[k].owner,
				 rrs[k].data);
			append(got, sizeof(got), one);
		}
		if (rcode != t[i].rcode || !aa || strcmp(got, t[i].want) != 0) {
			fail_msg("%s type %u: rcode %d aa %d '%s', want %d '%s'", t[i].name,
				 t[i].qtype, rcode, aa, got, t[i].rcode, t[i].want);
		}
	}
	assert_int_equal(nx_stat_read(NX_STAT_SP_LOCALHOST) - before, 3);
	nx_conf_free(c);
}

/* Find SvcParam `key` in one SVCB rdata; returns its value length or -1. */
static int svc_param(const uint8_t *rd, size_t len, size_t params_at, uint16_t key,
		     const uint8_t **val)
{
	size_t at = params_at;
	while (at + 4 <= len) {
		uint16_t k = (uint16_t)(rd[at] << 8 | rd[at + 1]);
		uint16_t l = (uint16_t)(rd[at + 2] << 8 | rd[at + 3]);
		if (k == key) {
			*val = rd + at + 4;
			return l;
		}
		at += 4u + l;
	}
	return -1;
}

static void test_special_ddr(void **state)
{
	(void)state;
	for (int ci = 1; ci <= 2; ci++) {
		struct nx_conf *c = special_conf(ci);
		uint8_t out[4096];
		uint64_t before = nx_stat_read(NX_STAT_SP_DDR);
		int n = special_reply(c, "_dns.resolver.arpa", T_SVCB, out, sizeof(out));
		assert_int_equal(nx_stat_read(NX_STAT_SP_DDR) - before, 1);
		struct nx_dns_msg m;
		assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
		/* conf 1: two DoT listeners, one DoH; conf 2: one of each */
		assert_int_equal(m.ancount, ci == 1 ? 3 : 2);
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, out, (size_t)n);
		rd.pos = m.question_end;
		/* port, hint family (0 none, 4, 6), alpn per record, in listener order */
		static const struct {
			uint16_t port;
			int hint;
			const char *alpn;
			const char *addr;
		} want[2][3] = {
		    {{8853, 4, "dot", "127.0.0.1"},
		     {8853, 6, "dot", "::1"},
		     {8443, 4, "h2", "192.0.2.1"}},
		    {{853, 0, "dot", ""}, {443, 0, "h2", ""}, {0, 0, NULL, NULL}},
		};
		for (unsigned i = 0; i < m.ancount; i++) {
			nx_dns_rd_skip_name(&rd);
			assert_int_equal(nx_dns_rd_u16(&rd), T_SVCB);
			nx_dns_rd_skip(&rd, 6);
			uint16_t rdlen = nx_dns_rd_u16(&rd);
			assert_false(rd.err);
			const uint8_t *r = out + rd.pos;
			rd.pos += rdlen;
			assert_int_equal(r[0] << 8 | r[1], i + 1); /* SvcPriority: ServiceMode */
			uint8_t tgt[NX_DNS_NAME_MAX];
			int tl = ci == 1 ? nx_dns_name_from_text("dns.home.example", tgt) : 1;
			if (ci == 2) {
				tgt[0] = 0;
			}
			assert_memory_equal(r + 2, tgt, (size_t)tl);
			size_t pa = 2 + (size_t)tl;
			const uint8_t *v;
			const char *alpn = want[ci - 1][i].alpn;
			assert_int_equal(svc_param(r, rdlen, pa, 1, &v), 1 + (int)strlen(alpn));
			assert_int_equal(v[0], strlen(alpn));
			assert_memory_equal(v + 1, alpn, strlen(alpn));
			assert_int_equal(svc_param(r, rdlen, pa, 3, &v), 2);
			assert_int_equal(v[0] << 8 | v[1], want[ci - 1][i].port);
			int h4 = svc_param(r, rdlen, pa, 4, &v);
			const uint8_t *v6;
			int h6 = svc_param(r, rdlen, pa, 6, &v6);
			char a[64] = "";
			if (want[ci - 1][i].hint == 4) {
				assert_int_equal(h4, 4);
				assert_int_equal(h6, -1);
				inet_ntop(AF_INET, v, a, sizeof(a));
			} else if (want[ci - 1][i].hint == 6) {
				assert_int_equal(h6, 16);
				assert_int_equal(h4, -1);
				inet_ntop(AF_INET6, v6, a, sizeof(a));
			} else {
				assert_int_equal(h4, -1);
				assert_int_equal(h6, -1);
			}
			assert_string_equal(a, want[ci - 1][i].addr);
			int dl = svc_param(r, rdlen, pa, 7, &v);
			if (strcmp(alpn, "h2") == 0) {
				assert_int_equal(dl, 16);
				assert_memory_equal(v, "/dns-query{?dns}", 16);
			} else {
				assert_int_equal(dl, -1);
			}
		}
		nx_conf_free(c);
	}
}

/* Answer targets meet the special-use level like a query would: Android's probe as a CNAME
 * target is not blocked by the rule that blocks its parent; a special-use target answers
 * locally, so it is no reason to block either. */
static void test_special_targets(void **state)
{
	(void)state;
	struct nx_conf *c = special_conf(0);
	struct nx_filter_rules *rules = NULL;
	assert_int_equal(nx_policy_rules_build(c, &rules), 0);
	struct nx_policy p = {.c = c, .rules = rules};
	static const struct {
		const char *target;
		bool blocked;
	} t[] = {
	    {"abc-dnsotls-ds.metric.gstatic.com", false},
	    {"www.metric.gstatic.com", true}, /* the control: the rule does block */
	    {"printer.local", false},
	    {"localhost", false},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(t); i++) {
		uint8_t target[NX_DNS_NAME_MAX];
		int tl = nx_dns_name_from_text(t[i].target, target);
		assert_true(tl > 0);
		struct nx_dns_rr_spec rr = {
		    .type = NX_DNS_T_CNAME, .ttl = 60, .rdata = target, .rdlen = (uint16_t)tl};
		uint8_t buf[1024];
		struct nx_dns_msg m;
		struct nx_dns_question qq;
		make_answer(buf, sizeof(buf), "www.shop.test", NX_DNS_T_A, &rr, 1, &m, &qq);
		struct sockaddr_storage ss;
		addr_of("192.168.1.50", &ss);
		struct nx_policy_query q;
		nx_policy_query_init(&p, &q, qq.name, qq.name_len, qq.qtype, (struct sockaddr *)&ss,
				     NULL);
		struct nx_filter_result r;
		uint8_t mw[NX_DNS_NAME_MAX];
		size_t ml = 0;
		if (nx_policy_check_answer(&p, &q, buf, &m, &r, mw, &ml) != t[i].blocked) {
			fail_msg("CNAME to %s: blocked %d", t[i].target, !t[i].blocked);
		}
	}
	nx_filter_rules_free(rules);
	nx_conf_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ladder_levels),
	    cmocka_unit_test(test_user_deny_beats_lists),
	    cmocka_unit_test(test_query_context),
	    cmocka_unit_test(test_rules_limited_to_groups),
	    cmocka_unit_test(test_rules_groups_from_config),
	    cmocka_unit_test(test_user_badfilter),
	    cmocka_unit_test(test_answer_targets),
	    cmocka_unit_test(test_local_answers),
	    cmocka_unit_test(test_local_splice_soa),
	    cmocka_unit_test(test_filter_disabled),
	    cmocka_unit_test(test_special_names),
	    cmocka_unit_test(test_special_answers),
	    cmocka_unit_test(test_special_ddr),
	    cmocka_unit_test(test_special_targets),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

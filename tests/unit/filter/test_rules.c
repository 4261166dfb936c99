/* User rules, groups and the full ladder: pause -> local -> allow -> deny -> lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "filter/compile.h"
#include "filter/rules.h"
#include "helpers.h"

static void test_rules_basic(void **state)
{
	int64_t base = th_owner_bytes(NX_OWNER_filter_rules);
	struct nx_filter_rules *r;
	assert_int_equal(nx_filter_rules_new(&r), 0);
	char err[256];
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, "Ok.Example", 0, err, sizeof(err)), 0);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, "*.cdn.example", 0, err, sizeof(err)), 1);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "/^ads?[0-9]*\\./", 0, err, sizeof(err)),
	    0);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "bad.example", 0, err, sizeof(err)), 1);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "*.bad.example", 0, err, sizeof(err)), 2);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "münchen.example", 0, err, sizeof(err)),
	    3);
	/* invalid regex refused with the library's message */
	assert_int_equal(nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "/a(b/", 0, err, sizeof(err)),
			 NX_ECONFIG);
	assert_non_null(strstr(err, "regex"));
	assert_int_equal(nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "a..b", 0, err, sizeof(err)),
			 NX_ECONFIG);
	assert_int_equal(nx_filter_rules_finish(r), 0);
	assert_int_equal(nx_filter_rules_count(r, NX_FILTER_RULES_DENY), 4);
	assert_string_equal(nx_filter_rules_text(r, NX_FILTER_RULES_DENY, 0), "/^ads?[0-9]*\\./");

	struct nx_filter_result res;
	assert_int_equal(nx_filter_rules_match(r, NX_FILTER_RULES_ALLOW, "ok.example", 10, 0, &res),
			 NX_FILTER_ACT_ALLOW);
	assert_int_equal(res.reason, NX_FILTER_R_user_allow);
	assert_int_equal(res.rule, 0);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_ALLOW, "cdn.example", 11, 0, &res),
	    NX_FILTER_ACT_NONE);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_ALLOW, "a.b.cdn.example", 15, 0, &res),
	    NX_FILTER_ACT_ALLOW);
	assert_int_equal(res.matched_off, 4);
	assert_int_equal(res.rule, 1);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "ads1.example", 12, 0, &res),
	    NX_FILTER_ACT_BLOCK);
	assert_int_equal(res.reason, NX_FILTER_R_user_deny);
	assert_int_equal(res.rule, 0);
	assert_int_equal(nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "bad.example", 11, 0, &res),
			 NX_FILTER_ACT_BLOCK);
	assert_int_equal(res.rule, 1);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "x.bad.example", 13, 0, &res),
	    NX_FILTER_ACT_BLOCK);
	assert_int_equal(res.rule, 2);
	assert_int_equal(res.matched_off, 2);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "xn--mnchen-3ya.example", 22, 0, &res),
	    NX_FILTER_ACT_BLOCK);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "good.example", 12, 0, &res),
	    NX_FILTER_ACT_NONE);
	nx_filter_rules_free(r);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_rules), base);
}

static void test_groups(void **state)
{
	struct nx_filter_rules *r;
	assert_int_equal(nx_filter_rules_new(&r), 0);
	assert_int_equal(nx_filter_rules_add_group(r, "default", 0x3, true), 0);
	assert_int_equal(nx_filter_rules_add_group(r, "kids", 0xc, true), 1);
	assert_int_equal(nx_filter_rules_add_group(r, "off", 0x10, false), 2);
	assert_int_equal(nx_filter_rules_add_group(r, "kids", 0, true), NX_ECONFIG);
	assert_int_equal(nx_filter_rules_group(r, "kids"), 1);
	assert_int_equal(nx_filter_rules_group(r, "none"), NX_ENOTFOUND);
	char err[128];
	assert_int_equal(nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "kidsonly.example", 1u << 1,
					     err, sizeof(err)),
			 0);
	nx_filter_rules_finish(r);
	assert_int_equal(nx_filter_rules_sources(r, 1u << 0), 0x3);
	assert_int_equal(nx_filter_rules_sources(r, 1u << 0 | 1u << 1), 0xf);
	assert_int_equal(nx_filter_rules_sources(r, 1u << 2), 0);
	assert_true(nx_filter_rules_filtering(r, 1u << 0));
	assert_false(nx_filter_rules_filtering(r, 1u << 2));
	struct nx_filter_result res;
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "kidsonly.example", 16, 1u << 0, &res),
	    NX_FILTER_ACT_NONE);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "kidsonly.example", 16, 1u << 1, &res),
	    NX_FILTER_ACT_BLOCK);
	/* no groups at all: every source, filtering on */
	assert_int_equal(nx_filter_rules_sources(NULL, 0), ~0ull);
	assert_true(nx_filter_rules_filtering(NULL, 0));
	nx_filter_rules_free(r);
}

static bool local_cb(void *arg, const char *name, size_t len)
{
	return len == 9 && memcmp(name, "nas.lan.x", 9) == 0;
}

static void test_ladder(void **state)
{
	char *dir = th_tmpdir();
	/* source 0 (default group): blocks ads + nas; source 1 (kids group): blocks games */
	th_writef(dir, "s0.txt", "||ads.example^\nnas.lan.x\nallowed.example\nlisted.example\n");
	th_writef(dir, "s1.txt", "||games.example^\n");
	const char *names[] = {"s0", "s1"};
	struct nx_filter_snap_source src[2];
	for (int i = 0; i < 2; i++) {
		char in[4300];
		snprintf(in, sizeof(in), "%s/%s.txt", dir, names[i]);
		struct nx_filter_compile_opts o = {.name = names[i]};
		struct nx_filter_compile_report rep;
		assert_int_equal(nx_filter_compile_file(in, dir, &o, &rep), 0);
		src[i] = (struct nx_filter_snap_source){names[i], dir};
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/l.nxs", dir);
	assert_int_equal(nx_filter_snap_build(path, src, 2, NULL, NULL), 0);
	struct nx_filter_snap *snap;
	assert_int_equal(nx_filter_snap_open(path, &snap), 0);

	struct nx_filter_rules *r;
	nx_filter_rules_new(&r);
	nx_filter_rules_add_group(r, "default", 0x1, true);
	nx_filter_rules_add_group(r, "kids", 0x3, true);
	char err[128];
	nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, "allowed.example", 0, err, sizeof(err));
	nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, "both.example", 0, err, sizeof(err));
	nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "both.example", 0, err, sizeof(err));
	nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "*.denied.example", 0, err, sizeof(err));
	nx_filter_rules_finish(r);

	struct nx_filter_ladder l = {.local = local_cb, .rules = r, .snap = snap};
	const uint64_t dflt = 1u << 0, kids = 1u << 1;
	struct nx_filter_result res;
	static const struct {
		const char *name;
		uint64_t groups;
		enum nx_filter_action action;
		enum nx_filter_reason reason;
		int source;
	} cases[] = {
	    {"ads.example", dflt, NX_FILTER_ACT_BLOCK, NX_FILTER_R_blocklist_domain, 0},
	    {"x.ads.example", dflt, NX_FILTER_ACT_BLOCK, NX_FILTER_R_blocklist_wildcard, 0},
	    {"games.example", dflt, NX_FILTER_ACT_NONE, NX_FILTER_R_none, -1},
	    {"games.example", kids, NX_FILTER_ACT_BLOCK, NX_FILTER_R_blocklist_domain, 1},
	    {"games.example", dflt | kids, NX_FILTER_ACT_BLOCK, NX_FILTER_R_blocklist_domain, 1},
	    {"nas.lan.x", dflt, NX_FILTER_ACT_LOCAL, NX_FILTER_R_local_record, -1},
	    {"allowed.example", dflt, NX_FILTER_ACT_ALLOW, NX_FILTER_R_user_allow, -1},
	    {"both.example", dflt, NX_FILTER_ACT_ALLOW, NX_FILTER_R_user_allow, -1},
	    {"a.denied.example", dflt, NX_FILTER_ACT_BLOCK, NX_FILTER_R_user_deny, -1},
	    {"listed.example", dflt, NX_FILTER_ACT_BLOCK, NX_FILTER_R_blocklist_domain, 0},
	    {"listed.example.", dflt, NX_FILTER_ACT_BLOCK, NX_FILTER_R_blocklist_domain, 0},
	    {"ads.example", 0, NX_FILTER_ACT_NONE, NX_FILTER_R_paused, -1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		nx_filter_decide(&l, cases[i].name, strlen(cases[i].name), cases[i].groups, &res);
		if (res.action != cases[i].action || res.reason != cases[i].reason ||
		    res.source != cases[i].source) {
			print_error("%s: got %s/%s/%d\n", cases[i].name,
				    nx_filter_action_name(res.action),
				    nx_filter_reason_name(res.reason), res.source);
			fail();
		}
	}
	/* pause: global, or every group of the client paused */
	l.paused = true;
	nx_filter_decide(&l, "ads.example", 11, dflt, &res);
	assert_int_equal(res.reason, NX_FILTER_R_paused);
	l.paused = false;
	l.paused_groups = dflt;
	nx_filter_decide(&l, "ads.example", 11, dflt, &res);
	assert_int_equal(res.reason, NX_FILTER_R_paused);
	nx_filter_decide(&l, "ads.example", 11, dflt | kids, &res); /* kids still filters */
	assert_int_equal(res.reason, NX_FILTER_R_blocklist_domain);
	/* no rules, no snapshot: nothing happens */
	struct nx_filter_ladder empty = {0};
	assert_int_equal(nx_filter_decide(&empty, "ads.example", 11, 0, &res), NX_FILTER_ACT_NONE);
	assert_int_equal(res.reason, NX_FILTER_R_none);

	nx_filter_rules_free(r);
	nx_filter_snap_free(snap);
	th_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rules_basic),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_ladder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

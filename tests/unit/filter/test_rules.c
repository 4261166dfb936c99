/* User rules: the three forms, regex errors, rules limited to groups (the ladder:
 * tests/unit/policy). */
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

/* A rule limited to groups matches only for a client in one of them (Pi-hole's per-group
 * domain lists); an unlimited rule matches for every client. */
static void test_rule_groups(void **state)
{
	struct nx_filter_rules *r;
	assert_int_equal(nx_filter_rules_new(&r), 0);
	char err[128];
	assert_int_equal(nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "kidsonly.example", 1u << 1,
					     err, sizeof(err)),
			 0);
	assert_int_equal(nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "*.kidsonly.example",
					     1u << 1 | 1u << 2, err, sizeof(err)),
			 1);
	assert_int_equal(
	    nx_filter_rules_add(r, NX_FILTER_RULES_DENY, "/^all[.]/", 0, err, sizeof(err)), 2);
	nx_filter_rules_finish(r);
	struct nx_filter_result res;
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "kidsonly.example", 16, 1u << 0, &res),
	    NX_FILTER_ACT_NONE);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "kidsonly.example", 16, 1u << 1, &res),
	    NX_FILTER_ACT_BLOCK);
	assert_int_equal(res.rule, 0);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "a.kidsonly.example", 18, 1u << 2, &res),
	    NX_FILTER_ACT_BLOCK);
	assert_int_equal(res.rule, 1);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "a.kidsonly.example", 18, 1u << 0, &res),
	    NX_FILTER_ACT_NONE);
	assert_int_equal(
	    nx_filter_rules_match(r, NX_FILTER_RULES_DENY, "all.example", 11, 1u << 0, &res),
	    NX_FILTER_ACT_BLOCK);
	nx_filter_rules_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rules_basic),
	    cmocka_unit_test(test_rule_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

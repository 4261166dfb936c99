/* Shared by the conf unit tests: ledger checks and load helpers. Include after cmocka.h. */
#pragma once

#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"

static int64_t config_bytes_before;
static int64_t config_count_before;

static inline void config_ledger(int64_t *bytes, int64_t *count)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	*bytes = rows[NX_OWNER_config].bytes;
	*count = rows[NX_OWNER_config].count;
}

/* Setup/teardown pair: every test must give back all NX_OWNER_config memory. */
static inline int ledger_mark(void **state)
{
	(void)state;
	config_ledger(&config_bytes_before, &config_count_before);
	return 0;
}

static inline int ledger_check(void **state)
{
	(void)state;
	int64_t b, n;
	config_ledger(&b, &n);
	assert_int_equal(b, config_bytes_before);
	assert_int_equal(n, config_count_before);
	return 0;
}

#define T(f) cmocka_unit_test_setup_teardown(f, ledger_mark, ledger_check)

/* Load `yaml` as "t.yaml"; fail the test with the loader's message on error. */
static inline struct nx_conf *load_ok(const char *yaml)
{
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	int rc = nx_conf_load_string("t.yaml", yaml, strlen(yaml), &c, err, sizeof(err));
	if (rc) {
		fail_msg("unexpected load error %d: %s", rc, err);
	}
	assert_non_null(c);
	return c;
}

/* Load `yaml` as "t.yaml" and expect NX_ECONFIG with exactly `want` as the message. */
static inline void load_bad(const char *yaml, const char *want)
{
	struct nx_conf *c = (struct nx_conf *)0x1;
	char err[NX_CONF_ERR_MAX] = "";
	int rc = nx_conf_load_string("t.yaml", yaml, strlen(yaml), &c, err, sizeof(err));
	if (rc != NX_ECONFIG) {
		fail_msg("expected NX_ECONFIG for:\n%s\ngot %d", yaml, rc);
	}
	assert_null(c);
	if (strcmp(err, want)) {
		fail_msg("for:\n%s\nwant: %s\ngot:  %s", yaml, want, err);
	}
}

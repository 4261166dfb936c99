/* admin.* (password hash, sessions, metrics auth, TLS paths, API tokens) and logging.* keys. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"

#define HEX64 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define PWHASH "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNo"

static void defaults(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("");
	assert_null(c->admin_password_hash);
	assert_int_equal(c->admin_session_ttl_s, 12 * 3600);
	assert_false(c->admin_metrics_auth);
	assert_false(c->admin_tls);
	assert_null(c->tls_cert);
	assert_null(c->tls_key);
	assert_int_equal(c->n_admin_tokens, 0);
	assert_null(c->admin_tokens);
	assert_true(c->logging_query_log);
	assert_int_equal(c->logging_query_log_buffer_max, 2048);
	assert_int_equal(c->logging_retention_days, 7);
	assert_int_equal(c->logging_privacy, 0);
	assert_int_equal(c->logging_live_max_subscribers, 8);
	nx_conf_free(c);

	/* empty strings and null lists are the defaults too */
	c = load_ok("admin:\n  password_hash: \"\"\n  tokens:\ntls:\n  cert:\n  key: ''\n");
	assert_null(c->admin_password_hash);
	assert_null(c->tls_cert);
	assert_null(c->tls_key);
	assert_int_equal(c->n_admin_tokens, 0);
	nx_conf_free(c);
}

static void values(void **state)
{
	(void)state;
	struct nx_conf *c =
	    load_ok("admin:\n"
		    "  password_hash: \"" PWHASH "\"\n"
		    "  session_ttl: 90m\n"
		    "  metrics_auth: true\n"
		    "  tls: true\n"
		    "  tokens:\n"
		    "    - {name: grafana, hash: \"" HEX64 "\", created: 1700000000}\n"
		    "    - name: ci-2\n"
		    "      hash: " HEX64 "\n"
		    "      created: 0\n"
		    "logging:\n"
		    "  query_log: false\n"
		    "  query_log_buffer_max: 64\n"
		    "  retention_days: 3650\n"
		    "  privacy: 3\n"
		    "  live_max_subscribers: 0\n"
		    "tls:\n"
		    "  cert: /etc/nxdns/cert.pem\n"
		    "  key: key.pem\n");
	assert_string_equal(c->admin_password_hash, PWHASH);
	assert_int_equal(c->admin_session_ttl_s, 5400);
	assert_true(c->admin_metrics_auth);
	assert_true(c->admin_tls);
	assert_string_equal(c->tls_cert, "/etc/nxdns/cert.pem");
	char cwd[PATH_MAX], want[PATH_MAX + 16];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/key.pem", cwd);
	assert_string_equal(c->tls_key, want); /* relative to the config (load_string: cwd) */
	assert_int_equal(c->n_admin_tokens, 2);
	assert_string_equal(c->admin_tokens[0].name, "grafana");
	assert_int_equal(c->admin_tokens[0].hash[0], 0x00);
	assert_int_equal(c->admin_tokens[0].hash[1], 0x11);
	assert_int_equal(c->admin_tokens[0].hash[31], 0xff);
	assert_int_equal(c->admin_tokens[0].created, 1700000000u);
	assert_string_equal(c->admin_tokens[1].name, "ci-2");
	assert_int_equal(c->admin_tokens[1].created, 0);
	assert_false(c->logging_query_log);
	assert_int_equal(c->logging_query_log_buffer_max, 64);
	assert_int_equal(c->logging_retention_days, 3650);
	assert_int_equal(c->logging_privacy, 3);
	assert_int_equal(c->logging_live_max_subscribers, 0);
	nx_conf_free(c);
}

static void errors(void **state)
{
	(void)state;
	load_bad("admin:\n  password_hash: hunter2\n",
		 "t.yaml:2:18: admin.password_hash: not an argon2 hash (set it with `nxdns "
		 "passwd --config FILE`)");
	load_bad("admin:\n  session_ttl: 30s\n",
		 "t.yaml:2:16: admin.session_ttl: 30s is out of range 1m..30d");
	load_bad("tls:\n  cert: c.pem\n",
		 "t.yaml:2:9: tls.cert: tls.cert and tls.key go together (give both, or neither "
		 "for a generated self-signed certificate)");
	load_bad("tls:\n  key: k.pem\n",
		 "t.yaml:2:8: tls.key: tls.cert and tls.key go together (give both, or neither "
		 "for a generated self-signed certificate)");
	/* the keys that moved to tls.*: refused where they are, naming the new keys */
	load_bad("admin:\n  enabled: true\n  tls_cert: c.pem\n  tls_key: k.pem\n",
		 "t.yaml:3:3: admin.tls_cert is no longer a key: the certificate moved to "
		 "tls.cert (shared with DoT and DoH): write tls.cert and set admin.tls: true");
	load_bad("admin:\n  tls_key: k.pem\n",
		 "t.yaml:2:3: admin.tls_key is no longer a key: the key moved to tls.key (shared "
		 "with DoT and DoH): write tls.key and set admin.tls: true");
	load_bad("admin:\n  tls: yes please\n",
		 "t.yaml:2:8: admin.tls: expected true or false, got 'yes please'");
	load_bad("admin:\n  tokens: [{name: a, hash: \"" HEX64 "\"}]\n",
		 "t.yaml:2:12: admin.tokens[0]: missing 'created'");
	load_bad("admin:\n  tokens: [{name: A, hash: \"" HEX64 "\", created: 1}]\n",
		 "t.yaml:2:19: admin.tokens[0].name: 'A' is not a valid name (1..64 of a-z, 0-9, "
		 "'_', '-', starting with a letter or digit)");
	load_bad("admin:\n  tokens: [{name: a, hash: abc, created: 1}]\n",
		 "t.yaml:2:28: admin.tokens[0].hash: expected 64 lower-case hex digits (SHA-256)");
	load_bad("admin:\n  tokens: [{name: a, hash: \"" HEX64 "\", created: 1},\n"
		 "           {name: a, hash: \"" HEX64 "\", created: 2}]\n",
		 "t.yaml:3:19: admin.tokens[1].name: duplicate token 'a' (same as "
		 "admin.tokens[0])");
	load_bad("admin:\n  tokens: [{name: a, hsh: x}]\n",
		 "t.yaml:2:22: unknown key 'admin.tokens[0].hsh' (did you mean 'hash'?)");
	load_bad("logging:\n  privacy: 4\n",
		 "t.yaml:2:12: logging.privacy: 4 is out of range 0..3");
	load_bad("logging:\n  query_log_buffer_max: 63\n",
		 "t.yaml:2:25: logging.query_log_buffer_max: 63 is out of range 64..1048576");
	load_bad("logging:\n  retention_days: 3651\n",
		 "t.yaml:2:19: logging.retention_days: 3651 is out of range 0..3650");
	load_bad("logging:\n  live_max_subscribers: 257\n",
		 "t.yaml:2:25: logging.live_max_subscribers: 257 is out of range 0..256");
	load_bad("logging:\n  query_log: yes\n",
		 "t.yaml:2:14: logging.query_log: expected true or false, got 'yes'");
}

static void too_many_tokens(void **state)
{
	(void)state;
	char *y = malloc(16384);
	assert_non_null(y);
	size_t n = (size_t)sprintf(y, "admin:\n  tokens:\n");
	for (int i = 0; i <= NX_CONF_MAX_TOKENS; i++) {
		n +=
		    (size_t)sprintf(y + n, "  - {name: t%d, hash: \"" HEX64 "\", created: 1}\n", i);
	}
	char want[128];
	snprintf(want, sizeof(want), "t.yaml:3:3: admin.tokens: needs 0..%d entries, got %d",
		 NX_CONF_MAX_TOKENS, NX_CONF_MAX_TOKENS + 1);
	load_bad(y, want);
	free(y);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(defaults),
	    T(values),
	    T(errors),
	    T(too_many_tokens),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

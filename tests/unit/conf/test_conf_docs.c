/*
 * Generated docs: docs/configuration.md must equal nx_conf_write_docs() output (regenerate with
 * `nxdns config-docs > docs/configuration.md`), and the embedded example must load.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"

static char *generate(void (*fn)(FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *fp = open_memstream(&buf, len);
	assert_non_null(fp);
	fn(fp);
	assert_int_equal(fclose(fp), 0);
	assert_non_null(buf);
	return buf;
}

static void test_docs_in_sync(void **state)
{
	(void)state;
	const char *root = getenv("NX_SOURCE_ROOT");
	if (!root || !*root) {
		skip();
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/docs/configuration.md", root);
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		fail_msg("%s is missing: generate it with `nxdns config-docs > "
			 "docs/configuration.md`",
			 path);
	}
	size_t want_len;
	char *want = generate(nx_conf_write_docs, &want_len);
	char *have = malloc(want_len + 2);
	assert_non_null(have);
	size_t have_len = fread(have, 1, want_len + 2, fp);
	fclose(fp);
	if (have_len != want_len || memcmp(have, want, want_len)) {
		size_t i = 0;
		while (i < have_len && i < want_len && have[i] == want[i]) {
			i++;
		}
		size_t line = 1;
		for (size_t j = 0; j < i; j++) {
			line += want[j] == '\n';
		}
		free(have);
		free(want);
		fail_msg("%s differs from the schema from line %zu on: regenerate it with "
			 "`nxdns config-docs > docs/configuration.md`",
			 path, line);
	}
	free(have);
	free(want);
}

static void test_docs_cover_every_key(void **state)
{
	(void)state;
	size_t len;
	char *docs = generate(nx_conf_write_docs, &len);
	static const char *const keys[] = {
		"listener.dns",		 "listener.workers",
		"listener.dns_max_connections", "listener.tcp_idle_timeout_ms",
		"listener.tcp_read_timeout_ms", "upstream.servers",
		"upstream.race",	 "upstream.timeout_ms",
		"upstream.stagger_ms",	 "upstream.forward_zones",
		"query_budget.permits",	 "query_budget.coalesce_max_waiters",
		"access.allow",		 "access.deny",
		"admin.enabled",	 "admin.listen",
		"state_dir",		 "log.level",
		"filter.enabled",	 "filter.sources",
		"filter.refresh_interval", "filter.allow",
		"filter.deny",		 "filter.block_mode",
		"filter.block_addresses", "filter.block_ttl",
		"groups",		 "clients",
		"local_records",	 "cache.size",
		"cache.min_ttl",	 "cache.max_ttl",
		"cache.negative_max_ttl", "cache.serve_stale",
		"cache.prefetch",
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char heading[128];
		snprintf(heading, sizeof(heading), "\n### `%s`\n", keys[i]);
		if (!strstr(docs, heading)) {
			fail_msg("no heading for %s", keys[i]);
		}
	}
	assert_non_null(strstr(docs, "- Default: `[\"9.9.9.9:53\", \"1.1.1.1:53\"]`\n"));
	assert_non_null(strstr(docs, "- Range: 50..60000\n"));
	assert_non_null(strstr(docs, "- Values: error, warn, info, debug\n"));
	assert_non_null(strstr(docs, "- Range: 1m..30d (60..2592000 seconds)\n"));
	assert_non_null(strstr(docs, "- Values: null, nxdomain, refused, custom\n"));
	assert_non_null(strstr(docs, "clamped to 8"));
	assert_non_null(strstr(docs, "```yaml\n"));
	free(docs);
}

static void test_example_loads(void **state)
{
	(void)state;
	size_t len;
	char *ex = generate(nx_conf_write_example, &len);
	struct nx_conf *c = load_ok(ex);
	/* defaults where the example shows no other value */
	assert_int_equal(c->n_listen_dns, 2);
	assert_int_equal(c->race, 2);
	assert_int_equal(c->timeout_ms, 2000);
	assert_string_equal(c->log_level, "info");
	assert_string_equal(c->state_dir, "/var/lib/nxdns");
	/* the example values */
	assert_int_equal(c->n_zones, 2);
	assert_string_equal(c->zones[0].text, "168.192.in-addr.arpa");
	assert_string_equal(c->zones[1].text, "lan");
	assert_int_equal(c->n_allow, 3);
	assert_int_equal(c->n_deny, 1);
	assert_int_equal(c->n_sources, 2);
	assert_string_equal(c->sources[0].url, "https://example.com/hosts.txt");
	assert_int_equal(c->n_groups, 3);
	assert_int_equal(c->groups[0].sources_mask, 0x3); /* ads by default, mine by name */
	assert_int_equal(c->groups[1].sources_mask, 0x3); /* kids: ads listed, mine names it */
	assert_false(c->groups[2].filtering);
	assert_int_equal(c->n_clients, 3);
	assert_int_equal(c->clients[2].n_client_ids, 1);
	assert_int_equal(c->n_listen_dot, 2);
	assert_int_equal(c->n_listen_doh, 1);
	assert_non_null(c->tls_cert);
	assert_string_equal(c->tls_server_name, "dns.home.example");
	assert_int_equal(c->n_upstreams, 3);
	assert_int_equal(c->upstreams[1].kind, NX_CONF_UP_DOT);
	assert_false(c->upstreams[1].resolved); /* a host name: bootstrap resolves it later */
	assert_int_equal(c->upstreams[2].kind, NX_CONF_UP_DOH);
	assert_string_equal(c->upstreams[2].auth_name, "cloudflare-dns.com");
	assert_int_equal(c->n_bootstrap, 1);
	assert_int_equal(c->n_locals, 3);
	assert_int_equal(c->n_allow_rules, 2);
	assert_int_equal(c->n_deny_rules, 3);
	assert_int_equal(c->refresh_interval_s, 86400);
	assert_int_equal(c->cache_size, 10000);
	nx_conf_free(c);
	assert_non_null(strstr(ex, "listener:\n  dns: "));
	assert_non_null(strstr(ex, "\nstate_dir: /var/lib/nxdns\nlog:\n  level: info\n"));
	free(ex);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_docs_in_sync),
		T(test_docs_cover_every_key),
		T(test_example_loads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

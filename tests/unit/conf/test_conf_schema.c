/*
 * The schema as code outside conf/ reads it: every row has an apply mode and the keys that the
 * reload compares (restart) or the settings API shows (editable) have a generic kind; lookups,
 * values and the comparison the reload uses to name restart keys.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>

#include "helpers.h"

static enum nx_conf_apply apply_of(const char *path)
{
	size_t idx;
	assert_int_equal(nx_conf_key_index(path, &idx), 0);
	struct nx_conf_key_info k;
	nx_conf_key_info(idx, &k);
	return k.apply;
}

static void every_key_has_an_apply_mode(void **state)
{
	(void)state;
	assert_true(nx_conf_key_count() > 40);
	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (k.apply < NX_CONF_APPLY_LIVE || k.apply > NX_CONF_APPLY_RESTART) {
			fail_msg("%s has no apply mode (%d)", k.path, (int)k.apply);
		}
		assert_true(nx_conf_apply_name(k.apply)[0] != '\0');
		/* the reload compares restart keys, the API renders editable ones: both need a
		 * generic view of the value */
		if ((k.apply == NX_CONF_APPLY_RESTART || k.editable) && k.kind == NX_CONF_KIND_OTHER) {
			fail_msg("%s is %s%s but has no generic kind", k.path,
				 k.editable ? "editable" : "", k.apply == NX_CONF_APPLY_RESTART
								   ? " restart" : "");
		}
		size_t idx;
		assert_int_equal(nx_conf_key_index(k.path, &idx), 0);
		assert_int_equal(idx, i);
		assert_non_null(k.doc);
		assert_non_null(k.def);
	}
	assert_string_equal(nx_conf_apply_name(0), "");
}

/* What the daemon does with these keys (daemon.c, worker.c, admin/http.c) */
static void apply_modes_follow_the_daemon(void **state)
{
	(void)state;
	const char *restart[] = {"listener.dns", "listener.workers", "listener.dot", "listener.doh",
				 "cache.size", "cache.max_ttl", "cache.serve_stale", "admin.tls",
				 "admin.listen", "state_dir"};
	for (size_t i = 0; i < NX_ARRAY_LEN(restart); i++) {
		assert_int_equal(apply_of(restart[i]), NX_CONF_APPLY_RESTART);
	}
	assert_int_equal(apply_of("tls.cert"), NX_CONF_APPLY_RELOAD);
	assert_int_equal(apply_of("tls.key"), NX_CONF_APPLY_RELOAD);
	assert_int_equal(apply_of("upstream.servers"), NX_CONF_APPLY_LIVE);
	assert_int_equal(apply_of("log.level"), NX_CONF_APPLY_LIVE);
	assert_int_equal(apply_of("filter.block_addresses"), NX_CONF_APPLY_LIVE);
	assert_string_equal(nx_conf_apply_name(NX_CONF_APPLY_RESTART), "restart");
}

static void lookups(void **state)
{
	(void)state;
	size_t idx = 12345;
	assert_int_equal(nx_conf_key_index("cache", &idx), NX_ENOTFOUND);
	assert_int_equal(nx_conf_key_index("cache.sizes", &idx), NX_ENOTFOUND);
	assert_int_equal(nx_conf_key_index("", &idx), NX_ENOTFOUND);
	assert_int_equal(idx, 12345);
	assert_int_equal(nx_conf_key_index("cache.size", &idx), 0);
	struct nx_conf_key_info k;
	nx_conf_key_info(idx, &k);
	assert_string_equal(k.path, "cache.size");
	assert_int_equal(k.kind, NX_CONF_KIND_UINT);
	assert_true(k.editable);
	assert_int_equal(k.min, 0);
	assert_int_equal(k.max, 16777216);
	assert_string_equal(k.def, "10000");
	assert_true(k.range[0] != '\0');

	assert_int_equal(nx_conf_key_index("filter.block_mode", &idx), 0);
	nx_conf_key_info(idx, &k);
	assert_non_null(k.choices);
	assert_string_equal(k.choices[3], "custom");
	/* block_mode custom needs its addresses: both are settings */
	assert_true(k.editable);
	assert_int_equal(nx_conf_key_index("filter.block_addresses", &idx), 0);
	nx_conf_key_info(idx, &k);
	assert_true(k.editable);
	assert_int_equal(k.kind, NX_CONF_KIND_BLOCK_ADDRS);
	/* the password and the tokens are never settings */
	assert_int_equal(nx_conf_key_index("admin.password_hash", &idx), 0);
	nx_conf_key_info(idx, &k);
	assert_false(k.editable);
	assert_int_equal(nx_conf_key_index("filter.sources", &idx), 0);
	nx_conf_key_info(idx, &k);
	assert_int_equal(k.kind, NX_CONF_KIND_OTHER);
}

static void values(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("filter:\n  block_mode: custom\n"
				    "  block_addresses: [\"192.0.2.7\", \"2001:db8::7\"]\n"
				    "  deny: [ads.example]\n"
				    "listener:\n  dns: [\"127.0.0.1:5353\"]\n"
				    "cache:\n  size: 77\n  serve_stale: true\n");
	struct nx_conf_value v;
	size_t idx;
	assert_int_equal(nx_conf_key_index("cache.size", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), 0);
	assert_int_equal(v.kind, NX_CONF_KIND_UINT);
	assert_int_equal(v.u, 77);
	assert_int_equal(nx_conf_key_index("cache.serve_stale", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), 0);
	assert_true(v.b);
	assert_int_equal(nx_conf_key_index("filter.block_mode", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), 0);
	assert_string_equal(v.s, "custom");
	assert_int_equal(nx_conf_key_index("listener.dns", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), 0);
	assert_int_equal(v.n, 1);
	assert_string_equal(((const struct nx_addr *)v.items)[0].text, "127.0.0.1:5353");
	assert_int_equal(nx_conf_key_index("filter.deny", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), 0);
	assert_int_equal(v.kind, NX_CONF_KIND_STRINGS);
	assert_int_equal(v.n, 1);
	assert_string_equal(((char *const *)v.items)[0], "ads.example");
	assert_int_equal(nx_conf_key_index("filter.block_addresses", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), 0);
	uint8_t v4[4], v6[16];
	inet_pton(AF_INET, "192.0.2.7", v4);
	inet_pton(AF_INET6, "2001:db8::7", v6);
	assert_non_null(v.v4);
	assert_non_null(v.v6);
	assert_memory_equal(v.v4, v4, 4);
	assert_memory_equal(v.v6, v6, 16);
	assert_int_equal(nx_conf_key_index("groups", &idx), 0);
	assert_int_equal(nx_conf_key_value(c, idx, &v), -ENOTSUP);
	nx_conf_free(c);
}

/* The reload's comparison: only the keys that differ, whatever their kind. */
static void equal_names_exactly_the_changed_keys(void **state)
{
	(void)state;
	const char *base = "listener:\n  dns: [\"127.0.0.1:5353\"]\n  workers: 2\n"
			   "cache:\n  size: 100\n"
			   "upstream:\n  servers: [\"192.0.2.1:53\"]\n"
			   "access:\n  allow: [\"10.0.0.0/8\"]\n"
			   "admin:\n  listen: \"127.0.0.1:8080\"\n";
	const char *changed = "listener:\n  dns: [\"127.0.0.1:5354\"]\n  workers: 2\n"
			      "cache:\n  size: 200\n"
			      "upstream:\n  servers: [\"192.0.2.1:53\", \"192.0.2.2:53\"]\n"
			      "access:\n  allow: [\"10.0.0.0/16\"]\n"
			      "admin:\n  listen: \"127.0.0.1:8081\"\n  tls: true\n"
			      "filter:\n  block_mode: custom\n  block_addresses: [\"0.0.0.0\"]\n";
	struct nx_conf *a = load_ok(base), *a2 = load_ok(base), *b = load_ok(changed);
	const char *differ[] = {"listener.dns", "cache.size", "upstream.servers", "access.allow",
				"admin.listen", "admin.tls", "filter.block_mode",
				"filter.block_addresses"};
	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (k.kind == NX_CONF_KIND_OTHER) {
			/* no generic comparison: reported as changed, never as equal */
			assert_false(nx_conf_key_equal(a, a2, i));
			continue;
		}
		bool want_differ = false;
		for (size_t j = 0; j < NX_ARRAY_LEN(differ); j++) {
			want_differ |= !strcmp(differ[j], k.path);
		}
		if (!nx_conf_key_equal(a, a2, i)) {
			fail_msg("%s differs between two loads of one file", k.path);
		}
		if (nx_conf_key_equal(a, b, i) == want_differ) {
			fail_msg("%s: expected %s", k.path, want_differ ? "a change" : "no change");
		}
	}
	nx_conf_free(a);
	nx_conf_free(a2);
	nx_conf_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(every_key_has_an_apply_mode),
	    T(apply_modes_follow_the_daemon),
	    T(lookups),
	    T(values),
	    T(equal_names_exactly_the_changed_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

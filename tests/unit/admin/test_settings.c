/*
 * /api/settings and the JSON body helper against a real server and a real YAML file
 * (fixture.h): read, change one or several keys (the file changes in place with its comments,
 * a .bak is kept, the reload hook runs), refusals answer 400 with the field and leave the file
 * as it was, a failed reload is a 500, a request body over the limit a 413.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sys/stat.h>

#include "fixture.h"

static char config[4096];

static int setup(void **state)
{
	snprintf(config, sizeof(config),
		 "# household resolver\n"
		 "admin:\n"
		 "%s"
		 "upstream:\n"
		 "  servers: [\"9.9.9.9:53\", \"1.1.1.1\"]  # quad9, cloudflare\n"
		 "  timeout_ms: 2000  # the whole deadline\n"
		 "\n"
		 "# blocking\n"
		 "filter:\n"
		 "  block_mode: nxdomain\n"
		 "access:\n"
		 "  allow:\n"
		 "    - 192.168.1.0/24   # the LAN\n"
		 "    - 127.0.0.1\n",
		 fx_admin_lines());
	*state = fx_start(config);
	return 0;
}

static int teardown(void **state)
{
	fx_stop(*state);
	return 0;
}

static json_t *setting(const struct fx_resp *r, const char *key)
{
	return json_object_get(json_object_get(r->json, "settings"), key);
}

static void get_settings(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/settings", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	json_t *servers = setting(&r, "upstream.servers");
	assert_int_equal(json_array_size(servers), 2);
	assert_string_equal(json_string_value(json_array_get(servers, 0)), "9.9.9.9:53");
	assert_string_equal(json_string_value(json_array_get(servers, 1)), "1.1.1.1");
	assert_int_equal(json_integer_value(setting(&r, "upstream.race")), 2);
	assert_int_equal(json_integer_value(setting(&r, "upstream.timeout_ms")), 2000);
	assert_string_equal(json_string_value(setting(&r, "filter.block_mode")), "nxdomain");
	assert_int_equal(json_integer_value(setting(&r, "filter.block_ttl")), 10);
	assert_int_equal(json_integer_value(setting(&r, "cache.size")), 10000);
	assert_true(json_is_true(setting(&r, "logging.query_log")));
	assert_int_equal(json_integer_value(setting(&r, "logging.query_log_buffer_max")), 2048);
	assert_int_equal(json_integer_value(setting(&r, "logging.retention_days")), 7);
	assert_int_equal(json_integer_value(setting(&r, "logging.privacy")), 0);
	assert_int_equal(json_integer_value(setting(&r, "logging.live_max_subscribers")), 8);
	json_t *allow = setting(&r, "access.allow");
	assert_int_equal(json_array_size(allow), 2);
	assert_string_equal(json_string_value(json_array_get(allow, 0)), "192.168.1.0/24");
	assert_string_equal(json_string_value(json_array_get(allow, 1)), "127.0.0.1/32");
	assert_int_equal(json_array_size(setting(&r, "access.deny")), 0);
	/* of admin.* only admin.tls (a plain switch, applied on restart); never the secrets */
	assert_true(json_is_false(setting(&r, "admin.tls")));
	assert_null(strstr(r.body, "admin.password_hash"));
	assert_null(strstr(r.body, "admin.tokens"));
	assert_null(strstr(r.body, "admin.totp_secret"));
	assert_null(strstr(r.body, "admin.session_ttl"));
	assert_null(strstr(r.body, "argon2"));
	fx_resp_free(&r);
}

static void put_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"key\": \"upstream.timeout_ms\", \"value\": 1500}");
	fx_expect(&r, 200, NULL);
	assert_int_equal(json_integer_value(setting(&r, "upstream.timeout_ms")), 1500);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 1);
	assert_int_equal(f->conf->timeout_ms, 1500);

	/* the file changed in place; the previous one is the .bak */
	char *text = fx_read(f->path), bak_path[160];
	snprintf(bak_path, sizeof(bak_path), "%s.bak", f->path);
	char *bak = fx_read(bak_path);
	assert_non_null(strstr(text, "  timeout_ms: 1500  # the whole deadline\n"));
	assert_non_null(strstr(text, "# household resolver\n"));
	assert_non_null(strstr(text, "# blocking\n"));
	assert_string_equal(bak, config);
	free(text);
	free(bak);

	/* several at once, as GET shows them */
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"settings\": {\"cache.size\": 500, \"logging.privacy\": 2, "
		"\"upstream.servers\": [\"8.8.8.8:53\"], \"access.allow\": [\"10.0.0.0/8\"], "
		"\"filter.block_mode\": \"null\", \"filter.refresh_interval\": \"90m\", "
		"\"cache.serve_stale\": true}}");
	fx_expect(&r, 200, NULL);
	assert_int_equal(json_integer_value(setting(&r, "cache.size")), 500);
	assert_int_equal(json_integer_value(setting(&r, "filter.refresh_interval")), 5400);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 2);
	assert_int_equal(f->conf->cache_size, 500);
	assert_int_equal(f->conf->logging_privacy, 2);
	assert_int_equal(f->conf->n_upstreams, 1);
	assert_string_equal(f->conf->upstreams[0].text, "8.8.8.8:53");
	assert_int_equal(f->conf->n_allow, 1);
	assert_int_equal(f->conf->block_mode_id, NX_CONF_BLOCK_NULL);
	assert_true(f->conf->cache_serve_stale);
	text = fx_read(f->path);
	assert_non_null(strstr(text, "  servers: [\"8.8.8.8:53\"]  # quad9, cloudflare\n"));
	assert_non_null(strstr(text, "  allow: [\"10.0.0.0/8\"]\n"));
	assert_non_null(strstr(text, "cache:\n  size: 500\n"));
	free(text);

	/* what GET answers can be sent back as it is */
	fx_http(f, &r, "GET", "/api/settings", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	char *again = json_dumps(r.json, 0);
	fx_resp_free(&r);
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, again);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	free(again);
	assert_int_equal(f->conf->cache_size, 500);
}

/* Encrypted upstreams read back in a form the file takes again: text, or the mapping when
 * the text alone cannot carry what was written (a separate name, pins, an address). */
static void encrypted_upstreams_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"key\": \"upstream.servers\", \"value\": [\"9.9.9.9\", "
		"\"tls://dns.quad9.net#dns.quad9.net\", "
		"{\"url\": \"https://1.1.1.1/dns-query\", \"name\": \"cloudflare-dns.com\"}, "
		"{\"url\": \"tls://dns.example\", \"address\": \"192.0.2.9\", "
		"\"pin_sha256\": [\"ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs=\"]}]}");
	fx_expect(&r, 200, NULL);
	json_t *servers = setting(&r, "upstream.servers");
	assert_int_equal(json_array_size(servers), 4);
	assert_string_equal(json_string_value(json_array_get(servers, 0)), "9.9.9.9");
	assert_string_equal(json_string_value(json_array_get(servers, 1)),
			    "tls://dns.quad9.net#dns.quad9.net");
	json_t *m = json_array_get(servers, 2);
	assert_string_equal(json_string_value(json_object_get(m, "url")),
			    "https://1.1.1.1/dns-query");
	assert_string_equal(json_string_value(json_object_get(m, "name")), "cloudflare-dns.com");
	assert_null(json_object_get(m, "address"));
	m = json_array_get(servers, 3);
	assert_string_equal(json_string_value(json_object_get(m, "address")), "192.0.2.9");
	assert_null(json_object_get(m, "name")); /* the host is the name: nothing to add */
	assert_string_equal(json_string_value(json_array_get(json_object_get(m, "pin_sha256"), 0)),
			    "ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs=");
	json_t *body = json_pack("{s:{s:O}}", "settings", "upstream.servers", servers);
	char *again = json_dumps(body, 0);
	json_decref(body);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_upstreams, 4);
	assert_int_equal(f->conf->upstreams[3].n_pins, 1);
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, again);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	free(again);
	assert_int_equal(f->conf->n_upstreams, 4);
	assert_string_equal(f->conf->upstreams[2].auth_name, "cloudflare-dns.com");
	assert_true(f->conf->upstreams[3].resolved);
	assert_int_equal(f->conf->upstreams[3].n_pins, 1);
}

static void refusals_change_nothing(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	static const struct {
		const char *body, *error, *field, *message;
	} cases[] = {
	    {"{\"key\": \"upstream.timeout_ms\", \"value\": 10}", "invalid_setting",
	     "upstream.timeout_ms", "upstream.timeout_ms: 10 is out of range 50..60000"},
	    {"{\"key\": \"upstream.timeout_ms\", \"value\": \"1500\"}", "invalid_setting",
	     "upstream.timeout_ms",
	     "upstream.timeout_ms: expected an unsigned integer, got a quoted string"},
	    {"{\"key\": \"upstream.timeout_ms\", \"value\": 1.5}", "invalid_setting",
	     "upstream.timeout_ms", NULL},
	    {"{\"key\": \"filter.block_mode\", \"value\": \"drop\"}", "invalid_setting",
	     "filter.block_mode", NULL},
	    {"{\"key\": \"access.allow\", \"value\": [\"not an address\"]}", "invalid_setting",
	     "access.allow", NULL},
	    {"{\"key\": \"admin.password_hash\", \"value\": \"x\"}", "invalid_setting",
	     "admin.password_hash", NULL},
	    {"{\"key\": \"no.such\", \"value\": 1}", "invalid_setting", "no.such", NULL},
	    {"{\"settings\": {\"cache.size\": 5, \"upstream.race\": 0}}", "invalid_setting",
	     "upstream.race", "upstream.race: 0 is out of range 1..16"},
	    {"{\"settings\": {\"cache.min_ttl\": 100, \"cache.max_ttl\": 50}}", "invalid_setting",
	     NULL, "cache.min_ttl (100) must not exceed cache.max_ttl (50)"},
	    {"{\"key\": \"cache.size\"}", "bad_request", NULL, NULL},
	    {"{\"value\": 5}", "bad_request", NULL, NULL},
	    {"{\"key\": \"cache.size\", \"value\": 5, \"settings\": {}}", "bad_request", NULL,
	     NULL},
	    {"{\"settings\": {}}", "bad_request", "settings", NULL},
	    {"{\"settings\": 5}", "bad_request", "settings", NULL},
	    {"{\"key\": 5, \"value\": 5}", "bad_request", "key", NULL},
	    {"{\"keys\": 5}", "bad_request", "keys", NULL},
	    {"not json", "bad_request", NULL, NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, cases[i].body);
		if (r.status != 400) {
			fail_msg("%s: want 400, got %d %.*s", cases[i].body, r.status,
				 (int)r.body_len, r.body);
		}
		fx_expect(&r, 400, cases[i].error);
		json_t *field = json_object_get(r.json, "field");
		if (cases[i].field) {
			assert_string_equal(json_string_value(field), cases[i].field);
		} else if (field) {
			fail_msg("%s: unexpected field %s", cases[i].body,
				 json_string_value(field));
		}
		if (cases[i].message) {
			assert_string_equal(fx_str(&r, "message"), cases[i].message);
		}
		fx_resp_free(&r);
	}
	char *text = fx_read(f->path);
	assert_string_equal(text, config);
	free(text);
	char bak_path[160];
	snprintf(bak_path, sizeof(bak_path), "%s.bak", f->path);
	assert_int_equal(access(bak_path, F_OK), -1);
	assert_int_equal(f->reloads, 0);
	assert_int_equal(f->conf->timeout_ms, 2000);
}

static void failed_reload_is_500(void **state)
{
	struct fx *f = *state;
	f->reload_fail = NX_ECONFIG;
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"key\": \"cache.size\", \"value\": 7}");
	fx_expect(&r, 500, "reload_failed");
	assert_non_null(strstr(fx_str(&r, "message"), "reload refused by the test"));
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 1);
}

static void oversized_body_is_413(void **state)
{
	struct fx *f = *state;
	size_t n = NX_ADMIN_MAX_BODY + 100;
	char *body = malloc(n + 1);
	memset(body, ' ', n);
	memcpy(body, "{\"key\": \"cache.size\", \"value\": 5}", 33);
	body[n] = '\0';
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, body);
	fx_expect(&r, 413, "body_too_large");
	fx_resp_free(&r);
	free(body);
	assert_int_equal(f->reloads, 0);
}

static void without_reload_hook(void **state)
{
	(void)state;
	snprintf(config, sizeof(config), "admin:\n%s", fx_admin_lines());
	struct fx *f = fx_start_with(config, true);
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"key\": \"cache.size\", \"value\": 7}");
	fx_expect(&r, 503, "not_configured");
	fx_resp_free(&r);
	char *text = fx_read(f->path);
	assert_string_equal(text, config);
	free(text);
	fx_stop(f);
}

/* ---- schema-driven settings (GET /api/schema, restart_required) ------------------------- */

/* restart_required names the restart keys a change moved, and only those. */
static void restart_required_names_restart_keys(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"settings\": {\"cache.size\": 500, \"upstream.timeout_ms\": 1500}}");
	fx_expect(&r, 200, NULL);
	json_t *need = json_object_get(r.json, "restart_required");
	assert_int_equal(json_array_size(need), 1);
	assert_string_equal(json_string_value(json_array_get(need, 0)), "cache.size");
	assert_int_equal(json_integer_value(setting(&r, "cache.size")), 500);
	fx_resp_free(&r);

	/* a live key alone: nothing waits for a restart */
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"key\": \"upstream.timeout_ms\", \"value\": 900}");
	fx_expect(&r, 200, NULL);
	need = json_object_get(r.json, "restart_required");
	assert_true(json_is_array(need));
	assert_int_equal(json_array_size(need), 0);
	fx_resp_free(&r);

	/* the value it already has: not a change */
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, "{\"key\": \"cache.size\", \"value\": 500}");
	fx_expect(&r, 200, NULL);
	assert_int_equal(json_array_size(json_object_get(r.json, "restart_required")), 0);
	fx_resp_free(&r);
	assert_int_equal(f->conf->timeout_ms, 900);
}

/* block_mode custom can be chosen with its addresses; errors name the field at fault. */
static void block_mode_custom(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"key\": \"filter.block_mode\", \"value\": \"custom\"}");
	fx_expect(&r, 400, "invalid_setting");
	assert_string_equal(json_string_value(json_object_get(r.json, "field")),
			    "filter.block_mode");
	assert_non_null(strstr(fx_str(&r, "message"), "filter.block_addresses"));
	fx_resp_free(&r);
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"settings\": {\"filter.block_mode\": \"custom\", "
		"\"filter.block_addresses\": [\"192.0.2.1:53\"]}}");
	fx_expect(&r, 400, "invalid_setting");
	assert_string_equal(json_string_value(json_object_get(r.json, "field")),
			    "filter.block_addresses");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 0);

	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER,
		"{\"settings\": {\"filter.block_mode\": \"custom\", "
		"\"filter.block_addresses\": [\"192.0.2.1\", \"2001:db8::1\"]}}");
	fx_expect(&r, 200, NULL);
	assert_string_equal(json_string_value(setting(&r, "filter.block_mode")), "custom");
	json_t *addrs = setting(&r, "filter.block_addresses");
	assert_int_equal(json_array_size(addrs), 2);
	assert_string_equal(json_string_value(json_array_get(addrs, 0)), "192.0.2.1");
	assert_string_equal(json_string_value(json_array_get(addrs, 1)), "2001:db8::1");
	fx_resp_free(&r);
	assert_int_equal(f->conf->block_mode_id, NX_CONF_BLOCK_CUSTOM);
	assert_true(f->conf->has_block_v4 && f->conf->has_block_v6);
}

/* A value of key k unlike its current one `cur`, by kind, and what GET then shows. */
static json_t *other_value(const struct nx_conf_key_info *k, json_t *cur)
{
	switch (k->kind) {
	case NX_CONF_KIND_BOOL:
		return json_boolean(!json_is_true(cur));
	case NX_CONF_KIND_UINT: {
		long long v = k->min + 1 == json_integer_value(cur) ? k->min + 2 : k->min + 1;
		return json_integer(v);
	}
	case NX_CONF_KIND_STRING:
		if (k->choices) {
			for (size_t i = 0; k->choices[i]; i++) {
				/* custom needs addresses: block_mode_custom covers it */
				if (strcmp(k->choices[i], json_string_value(cur)) &&
				    strcmp(k->choices[i], "custom")) {
					return json_string(k->choices[i]);
				}
			}
			return NULL;
		}
		return json_string("dns.home.example");
	case NX_CONF_KIND_CIDR_LIST:
		return json_pack("[s]", "192.0.2.0/24");
	case NX_CONF_KIND_UPSTREAMS:
		return json_pack("[s]", "192.0.2.53:53");
	case NX_CONF_KIND_BLOCK_ADDRS:
		return json_pack("[s, s]", "192.0.2.1", "::1");
	default:
		return NULL;
	}
}

/*
 * Every editable key round-trips: what GET shows, PUT back as is, changes nothing and needs no
 * restart; each key set to another value reads back as sent, and restart_required names it
 * exactly when its schema row says "restart".
 */
static void editable_keys_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/settings", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	json_t *all = json_incref(json_object_get(r.json, "settings"));
	fx_resp_free(&r);
	size_t editable = 0;
	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		assert_true(k.editable == (json_object_get(all, k.path) != NULL));
		editable += k.editable;
	}
	assert_int_equal(json_object_size(all), editable);
	assert_true(editable >= 24);

	json_t *body = json_pack("{s:O}", "settings", all);
	char *text = json_dumps(body, 0);
	fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, text);
	fx_expect(&r, 200, NULL);
	assert_true(json_equal(json_object_get(r.json, "settings"), all));
	assert_int_equal(json_array_size(json_object_get(r.json, "restart_required")), 0);
	fx_resp_free(&r);
	free(text);
	json_decref(body);

	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (!k.editable) {
			continue;
		}
		json_t *v = other_value(&k, json_object_get(all, k.path));
		if (!v) {
			fail_msg("%s: no test value for its kind", k.path);
		}
		if (json_equal(v, json_object_get(all, k.path))) {
			fail_msg("%s: the test value is the current one", k.path);
		}
		body = json_pack("{s:s, s:o}", "key", k.path, "value", v);
		text = json_dumps(body, 0);
		fx_http(f, &r, "PUT", "/api/settings", FX_BEARER, text);
		if (r.status != 200) {
			fail_msg("%s: %s answered %d %.*s", k.path, text, r.status, (int)r.body_len,
				 r.body);
		}
		if (!json_equal(setting(&r, k.path), v)) {
			fail_msg("%s: sent %s, read back %s", k.path, text,
				 json_dumps(setting(&r, k.path), JSON_ENCODE_ANY));
		}
		json_t *need = json_object_get(r.json, "restart_required");
		bool named = json_array_size(need) == 1 &&
			     !strcmp(json_string_value(json_array_get(need, 0)), k.path);
		assert_int_equal(json_array_size(need), k.apply == NX_CONF_APPLY_RESTART);
		assert_int_equal(named, k.apply == NX_CONF_APPLY_RESTART);
		fx_resp_free(&r);
		/* and GET agrees with the answer */
		fx_http(f, &r, "GET", "/api/settings", FX_BEARER, NULL);
		assert_true(json_equal(setting(&r, k.path), json_object_get(body, "value")));
		fx_resp_free(&r);
		free(text);
		json_decref(body);
	}
	json_decref(all);
}

static json_t *schema_row(json_t *keys, const char *path)
{
	size_t i;
	json_t *row;
	json_array_foreach(keys, i, row)
	{
		if (!strcmp(json_string_value(json_object_get(row, "path")), path)) {
			return row;
		}
	}
	fail_msg("%s is not in /api/schema", path);
	return NULL;
}

static void schema_route(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/schema", NULL, NULL);
	fx_expect(&r, 401, NULL);
	fx_resp_free(&r);

	fx_http(f, &r, "GET", "/api/schema", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	json_t *keys = json_object_get(r.json, "keys");
	assert_int_equal(json_array_size(keys), nx_conf_key_count());
	size_t i;
	json_t *row;
	json_array_foreach(keys, i, row)
	{
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		assert_string_equal(json_string_value(json_object_get(row, "path")), k.path);
		assert_string_equal(json_string_value(json_object_get(row, "apply")),
				    nx_conf_apply_name(k.apply));
		assert_int_equal(json_is_true(json_object_get(row, "editable")), k.editable);
		assert_string_equal(json_string_value(json_object_get(row, "doc")), k.doc);
		assert_string_equal(json_string_value(json_object_get(row, "default")), k.def);
		/* what the settings page needs to draw an editable key */
		if (k.editable) {
			assert_non_null(json_object_get(row, "default_value"));
		}
	}
	json_t *size = schema_row(keys, "cache.size");
	assert_string_equal(json_string_value(json_object_get(size, "apply")), "restart");
	assert_string_equal(json_string_value(json_object_get(size, "kind")), "uint");
	assert_int_equal(json_integer_value(json_object_get(size, "default_value")), 10000);
	assert_int_equal(json_integer_value(json_object_get(size, "max")), 16777216);
	json_t *cert = schema_row(keys, "tls.cert");
	assert_string_equal(json_string_value(json_object_get(cert, "apply")), "reload");
	assert_false(json_is_true(json_object_get(cert, "editable")));
	json_t *mode = schema_row(keys, "filter.block_mode");
	assert_string_equal(json_string_value(json_object_get(mode, "apply")), "live");
	assert_int_equal(json_array_size(json_object_get(mode, "choices")), 4);
	assert_string_equal(json_string_value(json_object_get(mode, "default_value")), "null");
	json_t *servers = schema_row(keys, "upstream.servers");
	assert_string_equal(json_string_value(json_array_get(
				json_object_get(servers, "default_value"), 0)),
			    "9.9.9.9:53");
	/* the password's row is described but never editable */
	assert_false(json_is_true(json_object_get(schema_row(keys, "admin.password_hash"),
						  "editable")));
	fx_resp_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(get_settings, setup, teardown),
	    cmocka_unit_test_setup_teardown(put_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(encrypted_upstreams_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(refusals_change_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(failed_reload_is_500, setup, teardown),
	    cmocka_unit_test_setup_teardown(oversized_body_is_413, setup, teardown),
	    cmocka_unit_test(without_reload_hook),
	    cmocka_unit_test_setup_teardown(restart_required_names_restart_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(block_mode_custom, setup, teardown),
	    cmocka_unit_test_setup_teardown(editable_keys_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(schema_route, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

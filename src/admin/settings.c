/*
 * /api/settings and the config write path every API edit goes through.
 *
 * GET answers the effective values of the settings table below as {"settings": {"key": value}}
 * with dotted keys; PUT takes {"key": K, "value": V} or {"settings": {K: V, ...}} (the GET shape,
 * so a form can send back what it read), writes them to the YAML file through
 * nx_conf_rewrite_many (validated as a whole, .bak kept, atomic), asks the daemon to reload
 * (hooks.reload) and answers the new view. Values are JSON; they are written as YAML flow text,
 * so the loader's own type checks apply (1500 is a number, "1500" a string and refused where a
 * number belongs). Only the table's keys may be changed here: admin.* (passwords, tokens,
 * listener) has its own routes or needs the file, and listener and state keys need a restart.
 *
 * Threading: control thread. The reload runs inside the request (the config is small).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "admin/impl.h"
#include "base/err.h"
#include "base/log.h"

enum kind { K_UINT, K_BOOL, K_STR, K_ADDRS, K_CIDRS, K_UPSTREAMS };

struct setting {
	const char *key; /* dotted schema key */
	enum kind kind;
	size_t off;   /* offsetof(struct nx_conf, field) */
	size_t off_n; /* element count for lists */
};

#define S(key, kind, field)                                                                        \
	{                                                                                          \
		key, kind, offsetof(struct nx_conf, field), 0                                      \
	}
#define L(key, kind, field, n)                                                                     \
	{                                                                                          \
		key, kind, offsetof(struct nx_conf, field), offsetof(struct nx_conf, n)            \
	}

/* The settings the API reads and changes. A row per key; later routes add theirs here. */
static const struct setting settings[] = {
    L("upstream.servers", K_UPSTREAMS, upstreams, n_upstreams),
    S("upstream.race", K_UINT, race),
    S("upstream.timeout_ms", K_UINT, timeout_ms),
    S("upstream.stagger_ms", K_UINT, stagger_ms),
    L("access.allow", K_CIDRS, allow, n_allow),
    L("access.deny", K_CIDRS, deny, n_deny),
    S("filter.enabled", K_BOOL, filter_enabled),
    S("filter.block_mode", K_STR, block_mode),
    S("filter.block_ttl", K_UINT, block_ttl),
    S("filter.refresh_interval", K_UINT, refresh_interval_s),
    S("cache.size", K_UINT, cache_size),
    S("cache.min_ttl", K_UINT, cache_min_ttl),
    S("cache.max_ttl", K_UINT, cache_max_ttl),
    S("cache.negative_max_ttl", K_UINT, cache_neg_max_ttl),
    S("cache.serve_stale", K_BOOL, cache_serve_stale),
    S("cache.prefetch", K_BOOL, cache_prefetch),
    S("logging.query_log", K_BOOL, logging_query_log),
    S("logging.query_log_buffer_max", K_UINT, logging_query_log_buffer_max),
    S("logging.retention_days", K_UINT, logging_retention_days),
    S("logging.privacy", K_UINT, logging_privacy),
    S("logging.live_max_subscribers", K_UINT, logging_live_max_subscribers),
    S("log.level", K_STR, log_level),
};

#define FIELD(c, s, type) ((const type *)((const char *)(c) + (s)->off))
#define COUNT(c, s) (*(const size_t *)((const char *)(c) + (s)->off_n))

static const struct setting *find_setting(const char *key)
{
	for (size_t i = 0; i < NX_ARRAY_LEN(settings); i++) {
		if (!strcmp(settings[i].key, key)) {
			return &settings[i];
		}
	}
	return NULL;
}

static json_t *cidr_json(const struct nx_cidr *c)
{
	char host[INET6_ADDRSTRLEN], text[INET6_ADDRSTRLEN + 8];
	if (!inet_ntop(c->family, c->addr, host, sizeof(host))) {
		return json_null();
	}
	snprintf(text, sizeof(text), "%s/%u", host, c->prefix);
	return json_string(text);
}

/*
 * An upstream as the file can take it back: its text, or the mapping form when the file gave
 * what the text cannot carry (pins, an address for a host name, a name apart from the url).
 */
static json_t *upstream_json(const struct nx_conf_upstream *u)
{
	bool own_name = u->auth_name && !strchr(u->text, '#') &&
			(!u->host || strcmp(u->auth_name, u->host));
	bool address = u->host && u->resolved;
	if (!own_name && !address && u->n_pins == 0) {
		return json_string(u->text);
	}
	json_t *o = json_pack("{s:s}", "url", u->text);
	if (o && own_name) {
		json_object_set_new(o, "name", json_string(u->auth_name));
	}
	if (o && address) {
		char host[INET6_ADDRSTRLEN];
		const void *ss = &u->addr.ss;
		const void *a = u->addr.ss.ss_family == AF_INET
					? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
					: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
		if (inet_ntop(u->addr.ss.ss_family, a, host, sizeof(host))) {
			json_object_set_new(o, "address", json_string(host));
		}
	}
	if (o && u->n_pins) {
		json_t *pins = json_array();
		for (size_t i = 0; pins && i < u->n_pins; i++) {
			char b64[sodium_base64_ENCODED_LEN(NX_CONF_PIN_BYTES,
							   sodium_base64_VARIANT_ORIGINAL)];
			sodium_bin2base64(b64, sizeof(b64), u->pins[i], NX_CONF_PIN_BYTES,
					  sodium_base64_VARIANT_ORIGINAL);
			json_array_append_new(pins, json_string(b64));
		}
		json_object_set_new(o, "pin_sha256", pins);
	}
	return o;
}

static json_t *setting_json(const struct nx_conf *c, const struct setting *s)
{
	switch (s->kind) {
	case K_UINT:
		return json_integer(*FIELD(c, s, unsigned));
	case K_BOOL:
		return json_boolean(*FIELD(c, s, bool));
	case K_STR: {
		const char *v = *FIELD(c, s, char *);
		return v ? json_string(v) : json_null();
	}
	case K_ADDRS: {
		json_t *a = json_array();
		const struct nx_addr *v = *FIELD(c, s, struct nx_addr *);
		for (size_t i = 0; a && i < COUNT(c, s); i++) {
			json_array_append_new(a, json_string(v[i].text));
		}
		return a;
	}
	case K_CIDRS: {
		json_t *a = json_array();
		const struct nx_cidr *v = *FIELD(c, s, struct nx_cidr *);
		for (size_t i = 0; a && i < COUNT(c, s); i++) {
			json_array_append_new(a, cidr_json(&v[i]));
		}
		return a;
	}
	case K_UPSTREAMS: {
		json_t *a = json_array();
		const struct nx_conf_upstream *v = *FIELD(c, s, struct nx_conf_upstream *);
		for (size_t i = 0; a && i < COUNT(c, s); i++) {
			json_array_append_new(a, upstream_json(&v[i]));
		}
		return a;
	}
	}
	return json_null();
}

static json_t *settings_view(const struct nx_conf *c)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < NX_ARRAY_LEN(settings); i++) {
		json_object_set_new(o, settings[i].key, setting_json(c, &settings[i]));
	}
	return json_pack("{s:o}", "settings", o);
}

int nx_admin_handle_settings_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_conf(req->admin);
	if (!c) {
		return nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	}
	return nx_admin_reply_json(req, 200, settings_view(c));
}

/* ---- writing ------------------------------------------------------------------------------ */

int nx_admin_config_apply(struct nx_admin_req *req, const struct nx_conf_change *ch, size_t n)
{
	return nx_admin_config_apply_field(req, ch, n, NULL);
}

int nx_admin_config_apply_field(struct nx_admin_req *req, const struct nx_conf_change *ch, size_t n,
				const char *field)
{
	struct nx_admin *a = req->admin;
	const struct nx_conf *c = nx_admin_conf(a);
	int rc;
	if (!c || !c->path || c->path[0] == '<' || !a->hooks.reload) {
		rc = nx_admin_reply_error(req, 503, "not_configured", NULL,
					  "this server cannot rewrite and reload its configuration "
					  "file");
		return rc ? rc : 1;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", c->path);
	char err[NX_CONF_ERR_MAX];
	size_t bad = n;
	rc = nx_conf_rewrite_many(path, ch, n, &bad, err, sizeof(err));
	if (rc == NX_ECONFIG) {
		rc = nx_admin_reply_error(req, 400, "invalid_setting",
					  field	    ? field
					  : bad < n ? ch[bad].key
						    : NULL,
					  "%s", err);
		return rc ? rc : 1;
	}
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "cannot write the configuration: %s", err);
		rc = nx_admin_reply_error(req, 500, "write_failed", NULL, "%s", err);
		return rc ? rc : 1;
	}
	err[0] = '\0';
	rc = a->hooks.reload(a->hooks.ud, err, sizeof(err));
	if (rc) {
		nx_log(NX_LOG_WARN, "admin", "reload after an API change failed: %s", err);
		rc = nx_admin_reply_error(req, 500, "reload_failed", NULL,
					  "the file was written but the reload failed: %s", err);
		return rc ? rc : 1;
	}
	return 0;
}

/* JSON value as one line of YAML flow text (JSON is YAML); free(). NULL on failure. */
static char *yaml_of(const json_t *v)
{
	return json_dumps(v, JSON_ENCODE_ANY); /* ", " and ": " separators, one line */
}

int nx_admin_handle_settings_put(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {{"key", JSON_STRING, false},
						       {"value", NX_ADMIN_JSON_ANY, false},
						       {"settings", JSON_OBJECT, false},
						       {NULL}};
	json_t *vals[3];
	json_t *body = nx_admin_req_json(req, fields, vals);
	if (!body) {
		return 0;
	}
	struct nx_conf_change ch[NX_CONF_MAX_CHANGES];
	char *texts[NX_CONF_MAX_CHANGES];
	size_t n = 0;
	int rc = 0;
	json_t *one = NULL;
	json_t *map = vals[2];
	if (!map == !vals[0] || !vals[0] != !vals[1]) {
		rc = nx_admin_reply_error(req, 400, "bad_request", NULL,
					  "send {\"key\": K, \"value\": V} or {\"settings\": "
					  "{K: V, ...}}");
		goto out;
	}
	if (!map) {
		one = json_object();
		if (!one || json_object_set(one, json_string_value(vals[0]), vals[1])) {
			rc = -ENOMEM;
			goto out;
		}
		map = one;
	}
	if (json_object_size(map) == 0 || json_object_size(map) > NX_CONF_MAX_CHANGES) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "settings",
					  "between 1 and %d settings at once", NX_CONF_MAX_CHANGES);
		goto out;
	}
	const char *key;
	json_t *v;
	json_object_foreach(map, key, v)
	{
		if (!find_setting(key)) {
			rc = nx_admin_reply_error(req, 400, "invalid_setting", key,
						  "'%s' is not a setting the API changes", key);
			goto out;
		}
		texts[n] = yaml_of(v);
		if (!texts[n]) {
			rc = -ENOMEM;
			goto out;
		}
		ch[n].key = key;
		ch[n].yaml = texts[n];
		n++;
	}
	rc = nx_admin_config_apply(req, ch, n);
	if (rc == 0) {
		const struct nx_conf *c = nx_admin_conf(req->admin);
		nx_log(NX_LOG_INFO, "admin", "settings changed through the API (%zu key%s)", n,
		       n == 1 ? "" : "s");
		rc = c ? nx_admin_reply_json(req, 200, settings_view(c))
		       : nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	} else if (rc > 0) {
		rc = 0;
	}
out:
	for (size_t i = 0; i < n; i++) {
		free(texts[i]);
	}
	json_decref(one);
	json_decref(body);
	return rc;
}

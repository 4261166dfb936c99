/*
 * /api/settings and the config write path every API edit goes through.
 *
 * GET answers the effective values of the editable schema keys as {"settings": {"key": value}}
 * with dotted keys; PUT takes {"key": K, "value": V} or {"settings": {K: V, ...}} (the GET shape,
 * so a form can send back what it read), writes them to the YAML file through
 * nx_conf_rewrite_many (validated as a whole, .bak kept, atomic), asks the daemon to reload
 * (hooks.reload) and answers the new view. Values are JSON; they are written as YAML flow text,
 * so the loader's own type checks apply (1500 is a number, "1500" a string and refused where a
 * number belongs). Only the schema rows marked editable may be changed here (admin.* (passwords,
 * tokens, listener) has its own routes or needs the file); the answer names in
 * "restart_required" the changed keys that apply only after a restart, compared with the
 * values the process started with (a restart key keeps its boot value across reloads), and
 * GET names in "restart_pending" every restart key whose value in effect is not the running
 * one. GET /api/schema serves the rows themselves, for the settings page.
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

/*
 * The keys shown and changed here are the schema rows marked editable (conf/schema.c): the
 * table there carries each key's type, range, default, doc and apply mode, so a key becomes a
 * setting by one flag on its row and GET /api/schema describes exactly what GET/PUT handle.
 */

/* Index of an editable key: 0, or NX_ENOTFOUND (unknown key, or one the API does not change). */
static int editable_index(const char *key, size_t *idx)
{
	struct nx_conf_key_info k;
	if (nx_conf_key_index(key, idx) < 0) {
		return NX_ENOTFOUND;
	}
	nx_conf_key_info(*idx, &k);
	return k.editable ? 0 : NX_ENOTFOUND;
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

static json_t *addr_json(const uint8_t *bytes, int family)
{
	char host[INET6_ADDRSTRLEN];
	return inet_ntop(family, bytes, host, sizeof(host)) ? json_string(host) : json_null();
}

/*
 * Key idx of c as JSON, in the shape PUT takes back: numbers, booleans, strings (an optional
 * string left empty is ""), lists of strings (addresses as written, prefixes as addr/len),
 * upstreams as upstream_json. NULL for a kind without a generic view (no editable key has one:
 * the schema test checks).
 */
static json_t *value_json(const struct nx_conf *c, size_t idx)
{
	struct nx_conf_value v;
	if (nx_conf_key_value(c, idx, &v) < 0) {
		return NULL;
	}
	json_t *a = NULL;
	switch (v.kind) {
	case NX_CONF_KIND_OTHER:
		return NULL;
	case NX_CONF_KIND_UINT:
		return json_integer(v.u);
	case NX_CONF_KIND_BOOL:
		return json_boolean(v.b);
	case NX_CONF_KIND_STRING:
		return json_string(v.s ? v.s : "");
	case NX_CONF_KIND_ADDR:
		return json_string(((const struct nx_addr *)v.items)->text);
	case NX_CONF_KIND_BLOCK_ADDRS:
		a = json_array();
		if (a && v.v4) {
			json_array_append_new(a, addr_json(v.v4, AF_INET));
		}
		if (a && v.v6) {
			json_array_append_new(a, addr_json(v.v6, AF_INET6));
		}
		return a;
	case NX_CONF_KIND_ADDR_LIST:
	case NX_CONF_KIND_CIDR_LIST:
	case NX_CONF_KIND_UPSTREAMS:
	case NX_CONF_KIND_STRINGS:
		a = json_array();
		break;
	}
	for (size_t i = 0; a && i < v.n; i++) {
		json_t *e = NULL;
		if (v.kind == NX_CONF_KIND_ADDR_LIST) {
			e = json_string(((const struct nx_addr *)v.items)[i].text);
		} else if (v.kind == NX_CONF_KIND_CIDR_LIST) {
			e = cidr_json(&((const struct nx_cidr *)v.items)[i]);
		} else if (v.kind == NX_CONF_KIND_UPSTREAMS) {
			e = upstream_json(&((const struct nx_conf_upstream *)v.items)[i]);
		} else {
			e = json_string(((char *const *)v.items)[i]);
		}
		json_array_append_new(a, e);
	}
	return a;
}

static json_t *settings_object(const struct nx_conf *c)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (k.editable) {
			json_object_set_new(o, k.path, value_json(c, i));
		}
	}
	return o;
}

static const struct nx_conf *boot_conf(const struct nx_admin *a)
{
	return a->hooks.boot_conf ? a->hooks.boot_conf(a->hooks.ud) : NULL;
}

/* Every restart key (editable or not: a hand edit counts too) whose value in effect differs
 * from the one the process started with: what a restart would change. [] without boot_conf. */
static json_t *restart_pending(const struct nx_conf *c, const struct nx_conf *boot)
{
	json_t *a = json_array();
	for (size_t i = 0; a && boot && i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (k.apply == NX_CONF_APPLY_RESTART && !nx_conf_key_equal(boot, c, i)) {
			json_array_append_new(a, json_string(k.path));
		}
	}
	return a;
}

static json_t *settings_view(const struct nx_conf *c, const struct nx_conf *boot)
{
	return json_pack("{s:o, s:o}", "settings", settings_object(c), "restart_pending",
			 restart_pending(c, boot));
}

int nx_admin_handle_settings_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_conf(req->admin);
	if (!c) {
		return nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	}
	return nx_admin_reply_json(req, 200, settings_view(c, boot_conf(req->admin)));
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

/*
 * The keys of a change that only a restart applies, and whose new value differs from the one
 * running: the value the process started with (boot, from hooks.boot_conf), since a restart key
 * keeps that value across every reload; before[i] (key idx[i]'s value before the change) only
 * without that hook. So two edits in a row both say a restart is needed, and an edit back to
 * the boot value says none is.
 */
static json_t *restart_required(const struct nx_conf *c, const struct nx_conf *boot,
				const size_t *idx, json_t *const *before, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(idx[i], &k);
		if (k.apply != NX_CONF_APPLY_RESTART) {
			continue;
		}
		json_t *now = value_json(c, idx[i]);
		json_t *running = boot ? value_json(boot, idx[i]) : json_incref(before[i]);
		if (!now || !running || !json_equal(now, running)) {
			json_array_append_new(a, json_string(k.path));
		}
		json_decref(now);
		json_decref(running);
	}
	return a;
}

int nx_admin_handle_settings_put(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {{"key", JSON_STRING, false},
						       {"value", NX_ADMIN_JSON_ANY, false},
						       {"settings", JSON_OBJECT, false},
						       /* GET's, sent back with the form: ignored */
						       {"restart_pending", JSON_ARRAY, false},
						       {NULL}};
	json_t *vals[4];
	json_t *body = nx_admin_req_json(req, fields, vals);
	if (!body) {
		return 0;
	}
	struct nx_conf_change ch[NX_CONF_MAX_CHANGES];
	char *texts[NX_CONF_MAX_CHANGES];
	size_t idx[NX_CONF_MAX_CHANGES];
	json_t *before[NX_CONF_MAX_CHANGES];
	size_t n = 0;
	int rc = 0;
	json_t *one = NULL;
	json_t *map = vals[2];
	const struct nx_conf *c = nx_admin_conf(req->admin);
	if (!map == !vals[0] || !vals[0] != !vals[1]) {
		rc = nx_admin_reply_error(req, 400, "bad_request", NULL,
					  "send {\"key\": K, \"value\": V} or {\"settings\": "
					  "{K: V, ...}}");
		goto out;
	}
	if (!c) {
		rc = nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
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
		if (editable_index(key, &idx[n]) < 0) {
			rc = nx_admin_reply_error(req, 400, "invalid_setting", key,
						  "'%s' is not a setting the API changes", key);
			goto out;
		}
		texts[n] = yaml_of(v);
		if (!texts[n]) {
			rc = -ENOMEM;
			goto out;
		}
		/* the config in effect is released by the reload: keep what it said */
		before[n] = value_json(c, idx[n]);
		ch[n].key = key;
		ch[n].yaml = texts[n];
		n++;
	}
	rc = nx_admin_config_apply(req, ch, n);
	if (rc == 0) {
		c = nx_admin_conf(req->admin);
		const struct nx_conf *boot = boot_conf(req->admin);
		json_t *restart = c ? restart_required(c, boot, idx, before, n) : NULL;
		nx_log(NX_LOG_INFO, "admin", "settings changed through the API (%zu key%s%s)", n,
		       n == 1 ? "" : "s",
		       json_array_size(restart) ? "; some apply after a restart" : "");
		rc = c ? nx_admin_reply_json(req, 200,
					     json_pack("{s:o, s:o}", "settings", settings_object(c),
						       "restart_required",
						       restart ? restart : json_array()))
		       : nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	} else if (rc > 0) {
		rc = 0;
	}
out:
	for (size_t i = 0; i < n; i++) {
		free(texts[i]);
		json_decref(before[i]);
	}
	json_decref(one);
	json_decref(body);
	return rc;
}

/*
 * GET /api/schema: every schema row the UI may need to draw and explain a setting, in the
 * order of the docs: {"keys": [{path, type, kind, apply, editable, default, default_value?,
 * doc, range, min?, max?, choices?}]}. `default` is the YAML text the docs show;
 * `default_value` (rows with a generic kind) is the default in the shape GET /api/settings
 * answers, taken from a config loaded from no keys at all, so it is the default applied.
 */
int nx_admin_handle_schema(struct nx_admin_req *req)
{
	static const char *const kinds[] = {
		[NX_CONF_KIND_OTHER] = "other",
		[NX_CONF_KIND_BOOL] = "bool",
		[NX_CONF_KIND_UINT] = "uint",
		[NX_CONF_KIND_STRING] = "string",
		[NX_CONF_KIND_ADDR] = "addr",
		[NX_CONF_KIND_ADDR_LIST] = "addr_list",
		[NX_CONF_KIND_CIDR_LIST] = "cidr_list",
		[NX_CONF_KIND_UPSTREAMS] = "upstreams",
		[NX_CONF_KIND_STRINGS] = "strings",
		[NX_CONF_KIND_BLOCK_ADDRS] = "block_addrs",
	};
	struct nx_conf *defaults = NULL;
	char err[NX_CONF_ERR_MAX];
	int rc = nx_conf_load_string("<defaults>", "{}\n", 3, &defaults, err, sizeof(err));
	if (rc < 0) {
		/* the built-in defaults always load (conf tests): this is a broken build */
		nx_log(NX_LOG_ERR, "admin", "the built-in defaults do not load: %s", err);
		return nx_admin_reply_error(req, 500, "internal", NULL, "%s", err);
	}
	json_t *keys = json_array();
	for (size_t i = 0; keys && i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:s}", "path", k.path,
					"type", k.type, "kind",
					(size_t)k.kind < NX_ARRAY_LEN(kinds) ? kinds[k.kind] : "other",
					"apply", nx_conf_apply_name(k.apply), "editable", k.editable,
					"default", k.def, "doc", k.doc, "range", k.range);
		if (!row) {
			json_decref(keys);
			keys = NULL;
			break;
		}
		json_t *dv = value_json(defaults, i);
		if (dv) {
			json_object_set_new(row, "default_value", dv);
		}
		if (k.kind == NX_CONF_KIND_UINT) {
			json_object_set_new(row, "min", json_integer(k.min));
			json_object_set_new(row, "max", json_integer(k.max));
		}
		if (k.choices) {
			json_t *ch = json_array();
			for (size_t j = 0; ch && k.choices[j]; j++) {
				json_array_append_new(ch, json_string(k.choices[j]));
			}
			json_object_set_new(row, "choices", ch);
		}
		json_array_append_new(keys, row);
	}
	nx_conf_free(defaults);
	if (!keys) {
		return -ENOMEM;
	}
	return nx_admin_reply_json(req, 200, json_pack("{s:o}", "keys", keys));
}

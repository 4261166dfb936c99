/*
 * Groups, clients and local records: /api/groups, /api/clients, /api/local-records; and the
 * helpers every list edit uses (api_filter.c too).
 *
 * An edit reads the list from the config in effect (hooks.conf, which a reload replaces),
 * changes it, writes the whole value back as one key through nx_conf_rewrite_many (JSON text is
 * YAML flow style) and reloads: the loader validates the result, so a refused edit answers 400
 * invalid_setting with the loader's reason and changes nothing. Lists are rebuilt from the
 * parsed config (sources, clients, local records, rules lose nothing that matters: a source
 * path becomes absolute, local records come back sorted by name and type), except a group's
 * `sources`, which the loader folds into a mask: those are read as written from the file.
 *
 * Threading: control thread; the file read and the rewrite's fsync block it briefly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libfyaml.h>

#include "admin/impl.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/wire.h"

#define SET_MAX 4 /* keys one edit rewrites (a source removal also edits the groups) */

/* ---- shared helpers -------------------------------------------------------------------------- */

const struct nx_conf *nx_admin_need_conf(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_conf(req->admin);
	if (!c) {
		nx_admin_reply_error(req, 503, "not_configured", NULL, "no configuration");
	}
	return c;
}

const char *nx_admin_path_rest(const struct nx_admin_req *req, const char *prefix)
{
	size_t n = strlen(prefix);
	if (strncmp(req->path, prefix, n) || !req->path[n]) {
		return NULL;
	}
	return req->path + n;
}

int nx_admin_config_set(struct nx_admin_req *req, const char *const *keys, json_t *const *vals,
			size_t n, const char *field)
{
	if (nx_fails_assert(n > 0 && n <= SET_MAX)) {
		return NX_EMALFORMED;
	}
	struct nx_conf_change ch[SET_MAX];
	char *texts[SET_MAX] = {NULL};
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		/* one line, ", " and ": " separators: YAML flow style */
		texts[i] = json_dumps(vals[i], JSON_ENCODE_ANY);
		if (!texts[i]) {
			rc = -ENOMEM;
			goto out;
		}
		ch[i].key = keys[i];
		ch[i].yaml = texts[i];
	}
	rc = nx_admin_config_apply_field(req, ch, n, field);
out:
	for (size_t i = 0; i < n; i++) {
		free(texts[i]);
	}
	return rc;
}

/* One key; takes the reference to `val`. */
static int set1(struct nx_admin_req *req, const char *key, json_t *val, const char *field)
{
	if (!val) {
		return -ENOMEM;
	}
	int rc = nx_admin_config_set(req, &key, &val, 1, field);
	json_decref(val);
	return rc;
}

static json_t *str_array(char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		if (json_array_append_new(a, json_string(v[i]))) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The index of the object whose "name" is name in array a, or -1. */
static ssize_t name_index(const json_t *a, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		const char *n = json_string_value(json_object_get(v, "name"));
		if (n && !strcmp(n, name)) {
			return (ssize_t)i;
		}
	}
	return -1;
}

/* Members of `from` (an edit body) copied onto `to`, except skip (may be NULL). */
static int merge(json_t *to, json_t *from, const char *skip)
{
	const char *k;
	json_t *v;
	json_object_foreach(from, k, v)
	{
		if ((!skip || strcmp(k, skip)) && json_object_set(to, k, v)) {
			return -ENOMEM;
		}
	}
	return 0;
}

/* After an applied edit: answer `status` with the view, or forward 1/<0. */
static int done(struct nx_admin_req *req, int rc, unsigned status,
		json_t *(*view)(const struct nx_conf *c))
{
	if (rc) {
		return rc > 0 ? 0 : rc;
	}
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, status, view(c)) : 0;
}

static int not_found(struct nx_admin_req *req, const char *what, const char *name)
{
	return nx_admin_reply_error(req, 404, "not_found", "name", "no %s named '%s'", what, name);
}

static int exists(struct nx_admin_req *req, const char *what, const char *name)
{
	return nx_admin_reply_error(req, 409, "exists", "name", "a %s named '%s' exists", what,
				    name);
}

/* ---- sources as written ---------------------------------------------------------------------- */

json_t *nx_admin_sources_json(const struct nx_conf *c)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < c->n_sources; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		json_t *o =
		    json_pack("{s:s, s:s, s:s, s:o, s:b}", "name", s->name, s->url ? "url" : "path",
			      s->url ? s->url : s->path, "format", s->format ? s->format : "auto",
			      "groups", str_array(s->groups, s->n_groups), "enabled", s->enabled);
		/* written only when not the default, so a rewrite keeps what the person wrote */
		if (o && s->hosts_answers_set) {
			json_object_set_new(o, "hosts_answers",
					    json_string(s->hosts_listed ? "listed" : "null"));
		}
		if (o && s->subdomains) {
			json_object_set_new(o, "subdomains", json_true());
		}
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* ---- groups ---------------------------------------------------------------------------------- */

static bool lists(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i], s)) {
			return true;
		}
	}
	return false;
}

/*
 * {group: [source names]} for the groups whose `sources` the file lists, as written. NULL when
 * the file cannot be read (then the lists are derived from the masks).
 */
static json_t *groups_written(const struct nx_conf *c)
{
	if (!c->path || c->path[0] == '<') {
		return NULL;
	}
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET | FYPCF_ALLOW_DUPLICATE_KEYS};
	struct fy_document *doc = fy_document_build_from_file(&pc, c->path);
	if (!doc) {
		return NULL;
	}
	json_t *out = json_object();
	struct fy_node *root = fy_document_root(doc);
	struct fy_node *groups = root && fy_node_is_mapping(root)
				     ? fy_node_mapping_lookup_by_string(root, "groups", 6)
				     : NULL;
	void *it = NULL;
	struct fy_node_pair *p;
	while (out && groups && fy_node_is_mapping(groups) &&
	       (p = fy_node_mapping_iterate(groups, &it))) {
		struct fy_node *k = fy_node_pair_key(p), *v = fy_node_pair_value(p);
		const char *name = k ? fy_node_get_scalar0(k) : NULL;
		struct fy_node *src = v && fy_node_is_mapping(v)
					  ? fy_node_mapping_lookup_by_string(v, "sources", 7)
					  : NULL;
		if (!name || !src || !fy_node_is_sequence(src)) {
			continue;
		}
		json_t *names = json_array();
		void *jt = NULL;
		struct fy_node *item;
		while (names && (item = fy_node_sequence_iterate(src, &jt))) {
			const char *s = fy_node_get_scalar0(item);
			if (s) {
				json_array_append_new(names, json_string(s));
			}
		}
		if (!names || json_object_set_new(out, name, names)) {
			json_decref(out);
			out = NULL;
		}
	}
	fy_document_destroy(doc);
	return out;
}

/* A group's sources: as written, else (no file) the mask minus sources that name the group. */
static json_t *group_sources(const struct nx_conf *c, const struct nx_conf_group *g,
			     json_t *written)
{
	if (written) {
		json_t *w = json_object_get(written, g->name);
		return w ? json_incref(w) : json_array();
	}
	json_t *a = json_array();
	for (size_t i = 0; a && i < c->n_sources; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		if ((g->sources_mask >> i & 1) && !lists(s->groups, s->n_groups, g->name)) {
			json_array_append_new(a, json_string(s->name));
		}
	}
	return a;
}

json_t *nx_admin_groups_map(const struct nx_conf *c)
{
	json_t *written = groups_written(c);
	json_t *m = json_object();
	for (size_t i = 0; m && i < c->n_groups; i++) {
		const struct nx_conf_group *g = &c->groups[i];
		json_t *src = group_sources(c, g, written);
		/* "default" exists anyway: written only when it says something */
		if (i == 0 && g->filtering && src && json_array_size(src) == 0) {
			json_decref(src);
			continue;
		}
		json_t *o =
		    src ? json_pack("{s:o, s:b}", "sources", src, "filtering", g->filtering) : NULL;
		if (!o || json_object_set_new(m, g->name, o)) {
			json_decref(m);
			m = NULL;
		}
	}
	json_decref(written);
	return m;
}

static json_t *groups_view(const struct nx_conf *c)
{
	json_t *written = groups_written(c);
	json_t *a = json_array();
	for (size_t i = 0; a && i < c->n_groups; i++) {
		const struct nx_conf_group *g = &c->groups[i];
		json_t *eff = json_array();
		for (size_t j = 0; eff && j < c->n_sources; j++) {
			if (g->sources_mask >> j & 1) {
				json_array_append_new(eff, json_string(c->sources[j].name));
			}
		}
		json_t *o = json_pack("{s:s, s:o, s:b, s:o}", "name", g->name, "sources",
				      group_sources(c, g, written), "filtering", g->filtering,
				      "effective_sources", eff);
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			a = NULL;
		}
	}
	json_decref(written);
	return json_pack("{s:o}", "groups", a);
}

static const struct nx_conf_group *find_group(const struct nx_conf *c, const char *name)
{
	for (size_t i = 0; i < c->n_groups; i++) {
		if (!strcmp(c->groups[i].name, name)) {
			return &c->groups[i];
		}
	}
	return NULL;
}

int nx_admin_handle_groups_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, 200, groups_view(c)) : 0;
}

/* Add (name from the body) or edit (name from the path) a group. */
static int group_write(struct nx_admin_req *req, const char *path_name)
{
	static const struct nx_admin_field add_fields[] = {{"name", JSON_STRING, true},
							   {"sources", JSON_ARRAY, false},
							   {"filtering", NX_ADMIN_JSON_BOOL, false},
							   {NULL}};
	const struct nx_admin_field *fields = path_name ? add_fields + 1 : add_fields;
	json_t *vals[3];
	const struct nx_conf *c = nx_admin_need_conf(req);
	json_t *body = c ? nx_admin_req_json(req, fields, vals) : NULL;
	if (!body) {
		return 0;
	}
	const char *name = path_name ? path_name : json_string_value(vals[0]);
	const struct nx_conf_group *g = find_group(c, name);
	int rc;
	json_t *map = NULL;
	if (!path_name && g) {
		rc = exists(req, "group", name);
		goto out;
	}
	if (path_name && !g) {
		rc = not_found(req, "group", name);
		goto out;
	}
	map = nx_admin_groups_map(c);
	json_t *entry = map ? json_object_get(map, name) : NULL;
	if (map && !entry) {
		entry = json_pack("{s:[]}", "sources");
		if (!entry || json_object_set_new(map, name, entry)) {
			entry = NULL;
		}
	}
	if (!entry || merge(entry, body, "name")) {
		rc = -ENOMEM;
		goto out;
	}
	rc = set1(req, "groups", json_incref(map), NULL);
	rc = done(req, rc, path_name ? 200 : 201, groups_view);
out:
	json_decref(map);
	json_decref(body);
	return rc;
}

int nx_admin_handle_groups_add(struct nx_admin_req *req)
{
	return group_write(req, NULL);
}

int nx_admin_handle_groups_edit(struct nx_admin_req *req)
{
	const char *name = nx_admin_path_rest(req, "/api/groups/");
	return name ? group_write(req, name)
		    : nx_admin_reply_error(req, 404, "not_found", NULL,
					   "name the group: /api/groups/<name>");
}

int nx_admin_handle_groups_delete(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	const char *name = nx_admin_path_rest(req, "/api/groups/");
	if (!c) {
		return 0;
	}
	if (!name || !find_group(c, name)) {
		return not_found(req, "group", name ? name : "");
	}
	if (!strcmp(name, "default")) {
		return nx_admin_reply_error(req, 400, "bad_request", "name",
					    "the default group cannot be deleted");
	}
	json_t *map = nx_admin_groups_map(c);
	if (!map) {
		return -ENOMEM;
	}
	json_object_del(map, name);
	return done(req, set1(req, "groups", map, NULL), 200, groups_view);
}

/* ---- clients --------------------------------------------------------------------------------- */

static json_t *cidr_text(const struct nx_cidr *c)
{
	char host[INET6_ADDRSTRLEN], text[INET6_ADDRSTRLEN + 8];
	if (!inet_ntop(c->family, c->addr, host, sizeof(host))) {
		return json_null();
	}
	unsigned full = c->family == AF_INET ? 32 : 128;
	if (c->prefix == full) {
		return json_string(host); /* a host: as people write it */
	}
	snprintf(text, sizeof(text), "%s/%u", host, c->prefix);
	return json_string(text);
}

static json_t *clients_list(const struct nx_conf *c)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < c->n_clients; i++) {
		const struct nx_conf_client *cl = &c->clients[i];
		json_t *ids = json_array();
		for (size_t j = 0; ids && j < cl->n_ids; j++) {
			json_array_append_new(ids, cidr_text(&cl->ids[j]));
		}
		for (size_t j = 0; ids && j < cl->n_client_ids; j++) {
			/* as written, so a PUT of what was read keeps the client's ids */
			json_array_append_new(ids, json_sprintf("id:%s", cl->client_ids[j]));
		}
		json_t *o = json_pack("{s:s, s:o, s:o}", "name", cl->name, "ids", ids, "groups",
				      str_array(cl->groups, cl->n_groups));
		/* tags only when it has some: the file keeps the form people write */
		if (o && cl->n_tags &&
		    json_object_set_new(o, "tags", str_array(cl->tags, cl->n_tags))) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *clients_view(const struct nx_conf *c)
{
	return json_pack("{s:o}", "clients", clients_list(c));
}

int nx_admin_handle_clients_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, 200, clients_view(c)) : 0;
}

static int client_write(struct nx_admin_req *req, const char *path_name)
{
	static const struct nx_admin_field add_fields[] = {{"name", JSON_STRING, true},
							   {"ids", JSON_ARRAY, true},
							   {"groups", JSON_ARRAY, false},
							   {"tags", JSON_ARRAY, false},
							   {NULL}};
	static const struct nx_admin_field edit_fields[] = {{"ids", JSON_ARRAY, false},
							    {"groups", JSON_ARRAY, false},
							    {"tags", JSON_ARRAY, false},
							    {NULL}};
	json_t *vals[4];
	const struct nx_conf *c = nx_admin_need_conf(req);
	json_t *body =
	    c ? nx_admin_req_json(req, path_name ? edit_fields : add_fields, vals) : NULL;
	if (!body) {
		return 0;
	}
	const char *name = path_name ? path_name : json_string_value(vals[0]);
	json_t *list = clients_list(c);
	ssize_t at = list ? name_index(list, name) : -1;
	int rc;
	if (!list) {
		rc = -ENOMEM;
	} else if (!path_name && at >= 0) {
		rc = exists(req, "client", name);
	} else if (path_name && at < 0) {
		rc = not_found(req, "client", name);
	} else if (path_name) {
		rc = merge(json_array_get(list, (size_t)at), body, NULL);
	} else {
		rc = json_array_append(list, body) ? -ENOMEM : 0;
	}
	if (rc == 0 && !req->replied) {
		rc = done(req, set1(req, "clients", json_incref(list), NULL), path_name ? 200 : 201,
			  clients_view);
	}
	json_decref(list);
	json_decref(body);
	return rc;
}

int nx_admin_handle_clients_add(struct nx_admin_req *req)
{
	return client_write(req, NULL);
}

int nx_admin_handle_clients_edit(struct nx_admin_req *req)
{
	const char *name = nx_admin_path_rest(req, "/api/clients/");
	return name ? client_write(req, name)
		    : nx_admin_reply_error(req, 404, "not_found", NULL,
					   "name the client: /api/clients/<name>");
}

int nx_admin_handle_clients_delete(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	const char *name = nx_admin_path_rest(req, "/api/clients/");
	if (!c) {
		return 0;
	}
	json_t *list = clients_list(c);
	if (!list) {
		return -ENOMEM;
	}
	ssize_t at = name ? name_index(list, name) : -1;
	if (at < 0) {
		json_decref(list);
		return not_found(req, "client", name ? name : "");
	}
	json_array_remove(list, (size_t)at);
	return done(req, set1(req, "clients", list, NULL), 200, clients_view);
}

/* ---- local records --------------------------------------------------------------------------- */

static const struct {
	const char *name;
	uint16_t code;
} rr_types[] = {{"A", 1},   {"AAAA", 28}, {"CNAME", 5}, {"TXT", 16},
		{"PTR", 12}, {"MX", 15},   {"SRV", 33},  {"CAA", 257}};

static const char *type_name(uint16_t code)
{
	for (size_t i = 0; i < NX_ARRAY_LEN(rr_types); i++) {
		if (rr_types[i].code == code) {
			return rr_types[i].name;
		}
	}
	return "?";
}

static int type_code(const char *name)
{
	for (size_t i = 0; i < NX_ARRAY_LEN(rr_types); i++) {
		if (!strcasecmp(rr_types[i].name, name)) {
			return rr_types[i].code;
		}
	}
	return -1;
}

/* The value as written in the config: address, host name, or the TXT text joined. */
static json_t *local_value(const struct nx_conf_local *l)
{
	char text[INET6_ADDRSTRLEN > NX_DNS_NAME_MAX * 4 ? INET6_ADDRSTRLEN
							 : NX_DNS_NAME_MAX * 4 + 1];
	switch (l->type) {
	case 1:
	case 28:
		if (l->rdlen != (l->type == 1 ? 4 : 16) ||
		    !inet_ntop(l->type == 1 ? AF_INET : AF_INET6, l->rdata, text, sizeof(text))) {
			return json_null();
		}
		return json_string(text);
	case 5:
	case 12:
		if (nx_dns_name_to_text(l->rdata, l->rdlen, text, sizeof(text)) < 0) {
			return json_null();
		}
		return json_string(text);
	case 15:
	case 33: {
		/* MX "PREF HOST", SRV "PRIORITY WEIGHT PORT HOST": numbers, then the name */
		size_t fixed = l->type == 15 ? 2 : 6;
		if (l->rdlen <= fixed ||
		    nx_dns_name_to_text(l->rdata + fixed, l->rdlen - fixed, text, sizeof(text)) < 0) {
			return json_null();
		}
		const uint8_t *d = l->rdata;
		return l->type == 15 ? json_sprintf("%u %s", d[0] << 8 | d[1], text)
				     : json_sprintf("%u %u %u %s", d[0] << 8 | d[1], d[2] << 8 | d[3],
						    d[4] << 8 | d[5], text);
	}
	case 257: {
		/* CAA "FLAGS TAG \"VALUE\"", as zone files write it */
		if (l->rdlen < 2 || 2u + l->rdata[1] > l->rdlen) {
			return json_null();
		}
		int tl = l->rdata[1];
		return json_sprintf("%u %.*s \"%.*s\"", l->rdata[0], tl, (const char *)l->rdata + 2,
				    (int)(l->rdlen - 2 - tl), (const char *)l->rdata + 2 + tl);
	}
	default: {
		/* character-strings, each <= 255 bytes: joined they are the text as written */
		char *s = malloc((size_t)l->rdlen + 1);
		size_t n = 0;
		for (size_t off = 0; s && off < l->rdlen;) {
			size_t len = l->rdata[off++];
			len = NX_MIN(len, (size_t)l->rdlen - off);
			memcpy(s + n, l->rdata + off, len);
			n += len;
			off += len;
		}
		json_t *v = s ? json_stringn(s, n) : NULL;
		free(s);
		return v;
	}
	}
}

static json_t *locals_list(const struct nx_conf *c, bool with_index)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < c->n_locals; i++) {
		const struct nx_conf_local *l = &c->locals[i];
		json_t *o =
		    json_pack("{s:s, s:s, s:o, s:I}", "name", l->text, "type", type_name(l->type),
			      "value", local_value(l), "ttl", (json_int_t)l->ttl);
		if (o && with_index) {
			json_object_set_new(o, "index", json_integer((json_int_t)i));
		}
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *locals_view(const struct nx_conf *c)
{
	return json_pack("{s:o}", "local_records", locals_list(c, true));
}

int nx_admin_handle_locals_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, 200, locals_view(c)) : 0;
}

int nx_admin_handle_locals_add(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {{"name", JSON_STRING, true},
						       {"type", JSON_STRING, true},
						       {"value", JSON_STRING, true},
						       {"ttl", JSON_INTEGER, false},
						       {NULL}};
	json_t *vals[4];
	const struct nx_conf *c = nx_admin_need_conf(req);
	json_t *body = c ? nx_admin_req_json(req, fields, vals) : NULL;
	if (!body) {
		return 0;
	}
	json_t *list = locals_list(c, false);
	int rc = list && !json_array_append(list, body) ? 0 : -ENOMEM;
	if (rc == 0) {
		rc = done(req, set1(req, "local_records", json_incref(list), NULL), 201,
			  locals_view);
	}
	json_decref(list);
	json_decref(body);
	return rc;
}

/* Does the record hold `value` (compared in wire form: case, trailing dots, address spelling)? */
static bool local_value_is(const struct nx_conf_local *l, const char *value)
{
	uint8_t buf[NX_DNS_NAME_MAX];
	switch (l->type) {
	case 1:
		return l->rdlen == 4 && inet_pton(AF_INET, value, buf) == 1 &&
		       !memcmp(buf, l->rdata, 4);
	case 28:
		return l->rdlen == 16 && inet_pton(AF_INET6, value, buf) == 1 &&
		       !memcmp(buf, l->rdata, 16);
	case 5:
	case 12: {
		int n = nx_dns_name_from_text(value, buf);
		return n > 0 && nx_dns_name_eq(buf, (size_t)n, l->rdata, l->rdlen);
	}
	default: {
		json_t *v = local_value(l);
		bool eq = v && !strcmp(json_string_value(v), value);
		json_decref(v);
		return eq;
	}
	}
}

/* DELETE /api/local-records?name&type[&value] (every match) or /api/local-records/<index>. */
int nx_admin_handle_locals_delete(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	if (!c) {
		return 0;
	}
	bool *drop = calloc(c->n_locals + 1, sizeof(*drop));
	if (!drop) {
		return -ENOMEM;
	}
	size_t hits = 0;
	int rc = 0;
	const char *index = nx_admin_path_rest(req, "/api/local-records/");
	if (index) {
		char *end;
		unsigned long i = strtoul(index, &end, 10);
		if (*end || !*index || i >= c->n_locals) {
			rc = nx_admin_reply_error(req, 404, "not_found", "index",
						  "no local record at index '%s'", index);
			goto out;
		}
		drop[i] = true;
		hits = 1;
	} else {
		const char *name = nx_admin_req_arg(req, "name");
		const char *type = nx_admin_req_arg(req, "type");
		const char *value = nx_admin_req_arg(req, "value");
		uint8_t wire[NX_DNS_NAME_MAX];
		int wlen = name ? nx_dns_name_from_text(name, wire) : -1;
		int code = type ? type_code(type) : -1;
		if (wlen <= 0) {
			rc = nx_admin_reply_error(req, 400, "bad_request", "name",
						  "name must be a host name (or use "
						  "/api/local-records/<index>)");
			goto out;
		}
		if (code < 0) {
			rc = nx_admin_reply_error(req, 400, "bad_request", "type",
						  "type must be A, AAAA, CNAME, TXT, PTR, MX, SRV or CAA");
			goto out;
		}
		for (size_t i = 0; i < c->n_locals; i++) {
			const struct nx_conf_local *l = &c->locals[i];
			if (l->type == code &&
			    nx_dns_name_eq(wire, (size_t)wlen, l->name, l->name_len) &&
			    (!value || local_value_is(l, value))) {
				drop[i] = true;
				hits++;
			}
		}
		if (!hits) {
			rc = nx_admin_reply_error(req, 404, "not_found", NULL,
						  "no %s record of %s%s%s", type, name,
						  value ? " with value " : "", value ? value : "");
			goto out;
		}
	}
	json_t *list = locals_list(c, false);
	if (!list) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = c->n_locals; i-- > 0;) {
		if (drop[i]) {
			json_array_remove(list, i);
		}
	}
	rc = done(req, set1(req, "local_records", list, NULL), 200, locals_view);
out:
	free(drop);
	return rc;
}

/*
 * Filtering: /api/filter/sources (status from the daemon, add/edit/remove as rewrites of
 * `filter.sources`, refresh one or all), /api/filter/rules (filter.allow / filter.deny),
 * /api/filter/pause and /api/lookup. The status, refresh, pause and lookup come from the
 * daemon's hooks (admin.h); without a hook the route answers 503 not_configured.
 *
 * Threading: control thread.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admin/impl.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "dns/msg.h"
#include "filter/compile.h"

/* A timed pause longer than a month is a typo; for no end send until_resumed (or turn
 * filter.enabled off, which a restart keeps). */
#define PAUSE_MAX_S (30 * 86400)

static int no_hook(struct nx_admin_req *req, const char *what)
{
	return nx_admin_reply_error(req, 503, "not_configured", NULL, "this server has no %s",
				    what);
}

/* ---- sources --------------------------------------------------------------------------------- */

/*
 * Each source's skipped lines per reason ("skipped_by_reason": {reason: {count, first_lines,
 * help}}), read from the meta the last compile wrote in <state_dir>/lists/<name>/: the daemon's
 * status carries only the total, and the meta is the compile report itself, so the two cannot
 * disagree. A source never compiled (or a meta we cannot read) gets {}: the total says 0 then,
 * or the reason is in last_error. One small file per source per GET, on the control thread.
 */
static void add_skip_reasons(const struct nx_conf *c, json_t *list)
{
	size_t i;
	json_t *o;
	json_array_foreach(list, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "name"));
		json_t *skips = NULL;
		char dir[4096];
		int n = snprintf(dir, sizeof(dir), "%s/lists/%s", c->state_dir ? c->state_dir : ".",
				 name ? name : "");
		if (name && n > 0 && (size_t)n < sizeof(dir)) {
			int rc = nx_filter_meta_skips(dir, name, &skips);
			if (rc && rc != -ENOENT) {
				nx_log(NX_LOG_WARN, "admin",
				       "source %s: cannot read %s/%s.meta: %s", name, dir, name,
				       nx_strerror(rc));
			}
		}
		json_object_set_new(o, "skipped_by_reason", skips ? skips : json_object());
	}
}

static ssize_t source_index(const struct nx_conf *c, const char *name);

/*
 * Each source's effective `hosts_answers` ("listed" | "null": the loader's default when the
 * file does not say, `listed` for a path source, `null` for a URL) and `subdomains`, from the
 * config the status was made from: the daemon's status carries neither, and a page that shows
 * only what was written could not tell a person what a hosts line with an address does.
 */
static void add_source_options(const struct nx_conf *c, json_t *list)
{
	size_t i;
	json_t *o;
	json_array_foreach(list, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "name"));
		ssize_t at = name ? source_index(c, name) : -1;
		if (at < 0) {
			continue;
		}
		const struct nx_conf_source *s = &c->sources[at];
		json_object_set_new(o, "hosts_answers",
				    json_string(s->hosts_listed ? "listed" : "null"));
		json_object_set_new(o, "subdomains", json_boolean(s->subdomains));
	}
}

static json_t *sources_view(struct nx_admin *a, const struct nx_conf *c)
{
	const struct nx_admin_hooks *h = &a->hooks;
	json_t *list = h->sources_status ? h->sources_status(h->ud) : nx_admin_sources_json(c);
	if (list) {
		add_skip_reasons(c, list);
		add_source_options(c, list);
	}
	return json_pack("{s:o}", "sources", list ? list : json_array());
}

int nx_admin_handle_sources_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, 200, sources_view(req->admin, c)) : 0;
}

/* After an applied edit: answer status with the view; or forward 1 (answered) / < 0. */
static int sources_done(struct nx_admin_req *req, int rc, unsigned status)
{
	if (rc) {
		return rc > 0 ? 0 : rc;
	}
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, status, sources_view(req->admin, c)) : 0;
}

static ssize_t source_index(const struct nx_conf *c, const char *name)
{
	for (size_t i = 0; i < c->n_sources; i++) {
		if (!strcmp(c->sources[i].name, name)) {
			return (ssize_t)i;
		}
	}
	return -1;
}

/* hosts_answers is null or "listed": any JSON type here, the loader checks the value */
enum { S_NAME, S_URL, S_PATH, S_FORMAT, S_GROUPS, S_ENABLED, S_HOSTS_ANSWERS, S_SUBDOMAINS };
static const struct nx_admin_field source_fields[] = {{"name", JSON_STRING, true},
						      {"url", JSON_STRING, false},
						      {"path", JSON_STRING, false},
						      {"format", JSON_STRING, false},
						      {"groups", JSON_ARRAY, false},
						      {"enabled", NX_ADMIN_JSON_BOOL, false},
						      {"hosts_answers", NX_ADMIN_JSON_ANY, false},
						      {"subdomains", NX_ADMIN_JSON_BOOL, false},
						      {NULL}};

/*
 * Where a path source added or changed through the API may point: under the config file's
 * directory or under <state_dir>/lists. The admin API is reachable from the LAN and the daemon
 * reads whatever it can; without a fence a session could point a "list" at /etc/shadow-like
 * files and read them back through the skip report's line numbers and the lookup route. The
 * two directories are ones the operator already chose (no new key); a source written into the
 * config file by hand is not fenced, since whoever edits the file can read anything anyway.
 * Symbolic links and ".." are resolved before the check (realpath), so a link inside an
 * allowed directory that leads out of it is refused too.
 */
#define SOURCE_DIRS_MAX 2

static size_t source_dirs(const struct nx_conf *c, char dirs[SOURCE_DIRS_MAX][PATH_MAX])
{
	size_t n = 0;
	char tmp[PATH_MAX];
	const char *slash = c->path ? strrchr(c->path, '/') : NULL;
	if (c->path && c->path[0] != '<') { /* "<string>": loaded from memory, no directory */
		int len =
		    slash ? snprintf(tmp, sizeof(tmp), "%.*s", (int)(slash - c->path + 1), c->path)
			  : snprintf(tmp, sizeof(tmp), ".");
		if (len > 0 && (size_t)len < sizeof(tmp) && realpath(tmp, dirs[n])) {
			n++;
		}
	}
	int len = snprintf(tmp, sizeof(tmp), "%s/lists", c->state_dir ? c->state_dir : ".");
	if (len > 0 && (size_t)len < sizeof(tmp) && realpath(tmp, dirs[n])) {
		n++;
	}
	return n;
}

/* Strictly below dir (the directory itself is not a list file). */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/') {
		return path[0] == '/' && path[1] != '\0';
	}
	return !strncmp(path, dir, n) && path[n] == '/' && path[n + 1] != '\0';
}

/*
 * Is `path` (as the body gave it; relative to the config file's directory, as the loader reads
 * it) inside one of source_dirs()? The file need not exist yet, its directory must. Answers
 * 400 path_not_allowed itself (returns 1), or returns 0 when allowed.
 */
static int check_source_path(struct nx_admin_req *req, const struct nx_conf *c, const char *path)
{
	char dirs[SOURCE_DIRS_MAX][PATH_MAX];
	size_t n = source_dirs(c, dirs);
	char full[PATH_MAX], real[PATH_MAX];
	int len;
	if (path[0] == '/' || !n || !c->path || c->path[0] == '<') {
		len = snprintf(full, sizeof(full), "%s", path);
	} else {
		len = snprintf(full, sizeof(full), "%s/%s", dirs[0], path);
	}
	bool ok = false;
	if (len > 0 && (size_t)len < sizeof(full) && path[0]) {
		if (realpath(full, real)) {
			ok = true; /* exists: every link resolved */
		} else if (errno == ENOENT) {
			/* not there yet: resolve its directory, keep the last component */
			char parent[PATH_MAX];
			char *slash = strrchr(full, '/');
			const char *base = slash ? slash + 1 : full;
			if (!slash) {
				snprintf(parent, sizeof(parent), ".");
			} else if (slash == full) {
				snprintf(parent, sizeof(parent), "/");
			} else {
				snprintf(parent, sizeof(parent), "%.*s", (int)(slash - full), full);
			}
			size_t used;
			ok = *base && strcmp(base, "..") && strcmp(base, ".") &&
			     realpath(parent, real) &&
			     (used = strlen(real)) + 1 + strlen(base) < sizeof(real);
			if (ok) {
				snprintf(real + used, sizeof(real) - used, "%s%s",
					 used == 1 ? "" : "/", base);
			}
		}
	}
	bool inside = false;
	for (size_t i = 0; ok && i < n && !inside; i++) {
		inside = under(real, dirs[i]);
	}
	if (inside) {
		return 0;
	}
	json_t *allowed = json_array();
	for (size_t i = 0; allowed && i < n; i++) {
		json_array_append_new(allowed, json_string(dirs[i]));
	}
	json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "error", "path_not_allowed", "field", "path",
			      "message", "", "allowed", allowed ? allowed : json_array());
	if (!o) {
		return -ENOMEM;
	}
	char msg[2 * PATH_MAX + 256];
	snprintf(msg, sizeof(msg),
		 "a path source added through the API must be in %s%s%s (the config file's "
		 "directory and state_dir/lists, subdirectories included); put the list there, "
		 "or name it in the config file by hand",
		 n > 0 ? dirs[0] : "(none: state_dir/lists does not exist)", n > 1 ? " or " : "",
		 n > 1 ? dirs[1] : "");
	json_object_set_new(o, "message", json_string(msg));
	nx_log(NX_LOG_WARN, "admin",
	       "refused a list source path outside the allowed directories: %s", path);
	int rc = nx_admin_reply_json(req, 400, o);
	return rc < 0 ? rc : 1;
}

/* Add (path_name NULL: the body names it) or edit a source. */
static int source_write(struct nx_admin_req *req, const char *path_name)
{
	const struct nx_admin_field *fields = path_name ? source_fields + 1 : source_fields;
	json_t *v[8] = {NULL};
	const struct nx_conf *c = nx_admin_need_conf(req);
	json_t *body = c ? nx_admin_req_json(req, fields, path_name ? v + 1 : v) : NULL;
	if (!body) {
		return 0;
	}
	int rc = 0;
	json_t *list = NULL;
	const char *name = path_name ? path_name : json_string_value(v[S_NAME]);
	ssize_t at = source_index(c, name);
	if (v[S_URL] && v[S_PATH]) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "url",
					  "a source has a url or a path, not both");
		goto out;
	}
	if (!path_name && !v[S_URL] && !v[S_PATH]) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "url",
					  "a source needs a url or a path");
		goto out;
	}
	if (!path_name && at >= 0) {
		rc = nx_admin_reply_error(req, 409, "exists", "name", "a source named '%s' exists",
					  name);
		goto out;
	}
	if (path_name && at < 0) {
		rc = nx_admin_reply_error(req, 404, "not_found", "name", "no source named '%s'",
					  name);
		goto out;
	}
	if (v[S_PATH]) {
		rc = check_source_path(req, c, json_string_value(v[S_PATH]));
		if (rc) {
			rc = rc > 0 ? 0 : rc;
			goto out;
		}
	}
	list = nx_admin_sources_json(c);
	json_t *entry = path_name ? json_array_get(list, (size_t)at) : json_object();
	if (!list || !entry || (!path_name && json_array_append_new(list, entry))) {
		rc = -ENOMEM;
		goto out;
	}
	if (v[S_URL] || v[S_PATH]) {
		json_object_del(entry, "url");
		json_object_del(entry, "path");
	}
	const char *k;
	json_t *x;
	json_object_foreach(body, k, x)
	{
		if (json_object_set(entry, k, x)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	const char *key = "filter.sources";
	rc = nx_admin_config_set(req, &key, &list, 1, NULL);
	if (rc == 0) {
		nx_log(NX_LOG_INFO, "admin", "blocklist source %s %s through the API", name,
		       path_name ? "changed" : "added");
	}
	rc = sources_done(req, rc, path_name ? 200 : 201);
out:
	json_decref(list);
	json_decref(body);
	return rc;
}

int nx_admin_handle_sources_add(struct nx_admin_req *req)
{
	return source_write(req, NULL);
}

int nx_admin_handle_sources_edit(struct nx_admin_req *req)
{
	const char *name = nx_admin_path_rest(req, "/api/filter/sources/");
	if (!name || strchr(name, '/')) {
		return nx_admin_reply_error(req, 404, "not_found", NULL,
					    "name the source: /api/filter/sources/<name>");
	}
	return source_write(req, name);
}

/*
 * Remove a source. A group that lists it by name must drop it first (409 in_use, naming the
 * group): the two keys cannot change in one rewrite while nx_conf_rewrite_many refuses a set of
 * changes one of which is invalid alone.
 */
int nx_admin_handle_sources_delete(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	const char *name = nx_admin_path_rest(req, "/api/filter/sources/");
	if (!c) {
		return 0;
	}
	ssize_t at = name ? source_index(c, name) : -1;
	if (at < 0) {
		return nx_admin_reply_error(req, 404, "not_found", "name", "no source named '%s'",
					    name ? name : "");
	}
	json_t *groups = nx_admin_groups_map(c);
	if (!groups) {
		return -ENOMEM;
	}
	const char *g;
	json_t *entry;
	json_object_foreach(groups, g, entry)
	{
		size_t i;
		json_t *s;
		json_array_foreach(json_object_get(entry, "sources"), i, s)
		{
			if (json_is_string(s) && !strcmp(json_string_value(s), name)) {
				int rc = nx_admin_reply_error(
				    req, 409, "in_use", "name",
				    "the group '%s' lists the source '%s': remove it there first",
				    g, name);
				json_decref(groups);
				return rc;
			}
		}
	}
	json_decref(groups);
	json_t *list = nx_admin_sources_json(c);
	if (!list) {
		return -ENOMEM;
	}
	json_array_remove(list, (size_t)at);
	const char *key = "filter.sources";
	int rc = nx_admin_config_set(req, &key, &list, 1, NULL);
	json_decref(list);
	if (rc == 0) {
		nx_log(NX_LOG_INFO, "admin", "blocklist source %s removed through the API", name);
	}
	return sources_done(req, rc, 200);
}

static int refresh(struct nx_admin_req *req, const char *name)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	if (!h->refresh) {
		return no_hook(req, "blocklist refresh");
	}
	int rc = h->refresh(h->ud, name);
	switch (rc) {
	case 0:
		return nx_admin_reply_json(
		    req, 202, json_pack("{s:s, s:s?}", "refresh", "started", "source", name));
	case NX_ENOTFOUND:
		return nx_admin_reply_error(req, 404, "not_found", "name", "no source named '%s'",
					    name ? name : "");
	case NX_ENOSLOT:
		return nx_admin_reply_error(req, 409, "refresh_running", NULL,
					    "a refresh is already running");
	default:
		return rc < 0 ? rc : -EIO;
	}
}

int nx_admin_handle_sources_refresh_all(struct nx_admin_req *req)
{
	return refresh(req, NULL);
}

/* POST /api/filter/sources/<name>/refresh */
int nx_admin_handle_sources_post(struct nx_admin_req *req)
{
	static const char suffix[] = "/refresh";
	const char *rest = nx_admin_path_rest(req, "/api/filter/sources/");
	size_t n = rest ? strlen(rest) : 0;
	if (n <= sizeof(suffix) - 1 || strcmp(rest + n - (sizeof(suffix) - 1), suffix) ||
	    memchr(rest, '/', n - (sizeof(suffix) - 1))) {
		return nx_admin_reply_error(req, 404, "not_found", NULL, "no route for POST %s",
					    req->path);
	}
	char name[NX_CONF_NAME_MAX + 1];
	size_t len = n - (sizeof(suffix) - 1);
	if (len >= sizeof(name)) {
		return nx_admin_reply_error(req, 404, "not_found", "name", "no such source");
	}
	memcpy(name, rest, len);
	name[len] = '\0';
	return refresh(req, name);
}

/* ---- user rules ------------------------------------------------------------------------------ */

/* The groups a rule is limited to, as written; NULL when it applies to every client. */
static const struct nx_conf_rule_scope *rule_scope(const struct nx_conf *c, bool allow, size_t i)
{
	const struct nx_conf_rule_scope *s = allow ? c->allow_scopes : c->deny_scopes;
	return s && s[i].n_groups ? &s[i] : NULL;
}

static json_t *groups_json(const struct nx_conf_rule_scope *s)
{
	json_t *g = json_array();
	for (size_t j = 0; g && s && j < s->n_groups; j++) {
		json_array_append_new(g, json_string(s->groups[j]));
	}
	return g;
}

/* {allow: [text...], deny: [text...], rules: [{list, rule, groups}...]}: the two plain lists as
 * before, and every rule with the groups it is limited to ([] = every client). */
static json_t *rules_view(const struct nx_conf *c)
{
	json_t *allow = json_array(), *deny = json_array(), *all = json_array();
	for (int l = 0; l < 2; l++) {
		bool is_allow = l == 0;
		char *const *rules = is_allow ? c->allow_rules : c->deny_rules;
		size_t n = is_allow ? c->n_allow_rules : c->n_deny_rules;
		for (size_t i = 0; i < n; i++) {
			json_array_append_new(is_allow ? allow : deny, json_string(rules[i]));
			json_array_append_new(
			    all, json_pack("{s:s, s:s, s:o}", "list", is_allow ? "allow" : "deny",
					   "rule", rules[i], "groups",
					   groups_json(rule_scope(c, is_allow, i))));
		}
	}
	return json_pack("{s:o, s:o, s:o}", "allow", allow, "deny", deny, "rules", all);
}

int nx_admin_handle_rules_get(struct nx_admin_req *req)
{
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, 200, rules_view(c)) : 0;
}

/* The rule as the loader keeps it: names in lower case without a trailing dot; regexes as is. */
static void normalise(const char *rule, char *out, size_t cap)
{
	snprintf(out, cap, "%s", rule);
	size_t n = strlen(out);
	if (nx_conf_rule_needs_side(out)) {
		return; /* as written: an AdGuard rule's modifier values are case-sensitive */
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = (char)tolower((unsigned char)out[i]);
	}
	if (n > 1 && out[n - 1] == '.') {
		out[n - 1] = '\0';
	}
}

#define RULE_MAX 1024 /* bytes of one rule (a regex); the loader has its own limits */

/* Find (list, rule): *list_out "filter.allow"/"filter.deny", *idx the index or -1. false after
 * answering 400. */
static bool rule_find(struct nx_admin_req *req, const struct nx_conf *c, const char *list,
		      const char *rule, const char **key, ssize_t *idx)
{
	char *const *rules;
	size_t n;
	if (list && !strcmp(list, "allow")) {
		*key = "filter.allow";
		rules = c->allow_rules;
		n = c->n_allow_rules;
	} else if (list && !strcmp(list, "deny")) {
		*key = "filter.deny";
		rules = c->deny_rules;
		n = c->n_deny_rules;
	} else {
		nx_admin_reply_error(req, 400, "bad_request", "list", "list must be allow or deny");
		return false;
	}
	if (!rule || !*rule || strlen(rule) >= RULE_MAX) {
		nx_admin_reply_error(req, 400, "bad_request", "rule",
				     "rule must be a name, *.name or /regex/ (up to %d bytes)",
				     RULE_MAX - 1);
		return false;
	}
	char norm[RULE_MAX];
	normalise(rule, norm, sizeof(norm));
	*idx = -1;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(rules[i], norm)) {
			*idx = (ssize_t)i;
		}
	}
	return true;
}

/* One config item: the rule's text, or {rule, groups} when it is limited to groups. */
static json_t *rule_item(const char *rule, json_t *groups)
{
	return groups ? json_pack("{s:s, s:o}", "rule", rule, "groups", groups) : json_string(rule);
}

/* The list as the config file holds it (rules limited to groups keep their groups). */
static json_t *rules_array(const struct nx_conf *c, const char *key)
{
	bool allow = !strcmp(key, "filter.allow");
	char *const *rules = allow ? c->allow_rules : c->deny_rules;
	size_t n = allow ? c->n_allow_rules : c->n_deny_rules;
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		const struct nx_conf_rule_scope *sc = rule_scope(c, allow, i);
		json_array_append_new(a, rule_item(rules[i], sc ? groups_json(sc) : NULL));
	}
	return a;
}

static int rules_done(struct nx_admin_req *req, int rc, unsigned status)
{
	if (rc) {
		return rc > 0 ? 0 : rc;
	}
	const struct nx_conf *c = nx_admin_need_conf(req);
	return c ? nx_admin_reply_json(req, status, rules_view(c)) : 0;
}

/* POST /api/filter/rules {list, rule[, groups]}: groups (names of the config's groups, at least
 * one) limit the rule to those groups' clients; the loader checks the names. */
int nx_admin_handle_rules_add(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {{"list", JSON_STRING, true},
						       {"rule", JSON_STRING, true},
						       {"groups", JSON_ARRAY, false},
						       {NULL}};
	json_t *v[3];
	const struct nx_conf *c = nx_admin_need_conf(req);
	json_t *body = c ? nx_admin_req_json(req, fields, v) : NULL;
	if (!body) {
		return 0;
	}
	const char *key;
	ssize_t idx;
	const char *rule = json_string_value(v[1]);
	int rc = 0;
	if (!rule_find(req, c, json_string_value(v[0]), rule, &key, &idx)) {
		goto out;
	}
	if (idx >= 0) {
		rc = nx_admin_reply_error(req, 409, "exists", "rule", "the %s list has '%s'",
					  json_string_value(v[0]), rule);
		goto out;
	}
	size_t gi;
	json_t *g;
	json_array_foreach(v[2], gi, g)
	{
		if (!json_is_string(g)) {
			rc = nx_admin_reply_error(req, 400, "bad_request", "groups",
						  "groups must be an array of group names");
			goto out;
		}
	}
	if (v[2] && json_array_size(v[2]) == 0) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "groups",
					  "groups must name at least one group (leave it out for "
					  "every client)");
		goto out;
	}
	json_t *a = rules_array(c, key);
	if (!a || json_array_append_new(a, rule_item(rule, v[2] ? json_incref(v[2]) : NULL))) {
		json_decref(a);
		rc = -ENOMEM;
		goto out;
	}
	rc = nx_admin_config_set(req, &key, &a, 1, "rule");
	json_decref(a);
	rc = rules_done(req, rc, 201);
out:
	json_decref(body);
	return rc;
}

/* A body's groups: an array of at least one name (the caller handles absent and null). false
 * after answering 400. */
static bool groups_ok(struct nx_admin_req *req, const json_t *groups)
{
	size_t gi;
	json_t *g;
	json_array_foreach(groups, gi, g)
	{
		if (!json_is_string(g)) {
			nx_admin_reply_error(req, 400, "bad_request", "groups",
					     "groups must be an array of group names");
			return false;
		}
	}
	if (groups && json_array_size(groups) == 0) {
		nx_admin_reply_error(req, 400, "bad_request", "groups",
				     "groups must name at least one group (null for every client)");
		return false;
	}
	return true;
}

/*
 * PUT /api/filter/rules {list, rule, new_rule?, new_list?, groups?}: change one rule in one
 * rewrite: its text (new_rule), its list (new_list: allow <-> deny) and/or its groups (an array
 * of names; null = every client; absent = as they were). One rewrite of one or both lists, so
 * a new text the loader refuses leaves the old rule in place (400 invalid_setting, field
 * rule): a delete and an add from the client would lose the rule in between, and for good if
 * the add is refused.
 */
int nx_admin_handle_rules_edit(struct nx_admin_req *req)
{
	enum { E_LIST, E_RULE, E_NEW_RULE, E_NEW_LIST, E_GROUPS };
	static const struct nx_admin_field fields[] = {
	    {"list", JSON_STRING, true},	  {"rule", JSON_STRING, true},
	    {"new_rule", JSON_STRING, false},	  {"new_list", JSON_STRING, false},
	    {"groups", NX_ADMIN_JSON_ANY, false}, {NULL}};
	json_t *v[5];
	const struct nx_conf *c = nx_admin_need_conf(req);
	json_t *body = c ? nx_admin_req_json(req, fields, v) : NULL;
	if (!body) {
		return 0;
	}
	int rc = 0;
	json_t *from_a = NULL, *to_a = NULL;
	const char *list = json_string_value(v[E_LIST]);
	const char *rule = json_string_value(v[E_RULE]);
	const char *from_key, *to_key;
	ssize_t idx, to_idx;
	if (!rule_find(req, c, list, rule, &from_key, &idx)) {
		goto out;
	}
	if (idx < 0) {
		rc = nx_admin_reply_error(req, 404, "not_found", "rule", "the %s list has no '%s'",
					  list, rule);
		goto out;
	}
	const char *to_list = v[E_NEW_LIST] ? json_string_value(v[E_NEW_LIST]) : list;
	const char *to_rule = v[E_NEW_RULE] ? json_string_value(v[E_NEW_RULE]) : rule;
	if (!rule_find(req, c, to_list, to_rule, &to_key, &to_idx)) {
		goto out; /* answered, naming list or rule */
	}
	bool same_list = !strcmp(from_key, to_key);
	if (to_idx >= 0 && !(same_list && to_idx == idx)) {
		rc = nx_admin_reply_error(req, 409, "exists", "rule", "the %s list has '%s'",
					  to_list, to_rule);
		goto out;
	}
	json_t *groups = NULL; /* the new item's groups (new reference) or NULL: every client */
	if (!v[E_GROUPS]) {
		const struct nx_conf_rule_scope *sc =
		    rule_scope(c, !strcmp(from_key, "filter.allow"), (size_t)idx);
		groups = sc ? groups_json(sc) : NULL;
	} else if (!json_is_null(v[E_GROUPS])) {
		if (!json_is_array(v[E_GROUPS])) {
			rc = nx_admin_reply_error(req, 400, "bad_request", "groups",
						  "groups must be an array of group names or null");
			goto out;
		}
		if (!groups_ok(req, v[E_GROUPS])) {
			goto out;
		}
		groups = json_incref(v[E_GROUPS]);
	}
	char norm[RULE_MAX];
	normalise(to_rule, norm, sizeof(norm));
	json_t *item = rule_item(norm, groups);
	from_a = rules_array(c, from_key);
	to_a = same_list ? json_incref(from_a) : rules_array(c, to_key);
	if (!item || !from_a || !to_a) {
		json_decref(item);
		rc = -ENOMEM;
		goto out;
	}
	if (same_list) {
		rc = json_array_set_new(from_a, (size_t)idx, item) ? -ENOMEM : 0;
	} else {
		json_array_remove(from_a, (size_t)idx);
		rc = json_array_append_new(to_a, item) ? -ENOMEM : 0;
	}
	if (rc) {
		goto out;
	}
	const char *keys[2] = {from_key, to_key};
	json_t *vals[2] = {from_a, to_a};
	rc = nx_admin_config_set(req, keys, vals, same_list ? 1 : 2, "rule");
	if (rc == 0) {
		nx_log(NX_LOG_INFO, "admin", "rule %s '%s' changed to %s '%s' through the API",
		       list, rule, to_list, norm);
	}
	rc = rules_done(req, rc, 200);
out:
	json_decref(from_a);
	json_decref(to_a);
	json_decref(body);
	return rc;
}

/* DELETE /api/filter/rules {list, rule} or /api/filter/rules/<list>/<rule> (rule url-encoded;
 * a regex may hold '/'). */
int nx_admin_handle_rules_delete(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {
	    {"list", JSON_STRING, true}, {"rule", JSON_STRING, true}, {NULL}};
	const struct nx_conf *c = nx_admin_need_conf(req);
	if (!c) {
		return 0;
	}
	json_t *body = NULL;
	char list[16] = "";
	const char *rule = NULL;
	const char *rest = nx_admin_path_rest(req, "/api/filter/rules/");
	if (rest) {
		const char *slash = strchr(rest, '/');
		size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
		snprintf(list, sizeof(list), "%.*s", (int)NX_MIN(n, sizeof(list) - 1), rest);
		rule = slash ? slash + 1 : NULL;
	} else {
		json_t *v[2];
		body = nx_admin_req_json(req, fields, v);
		if (!body) {
			return 0;
		}
		snprintf(list, sizeof(list), "%s", json_string_value(v[0]));
		rule = json_string_value(v[1]);
	}
	const char *key;
	ssize_t idx;
	int rc = 0;
	if (!rule_find(req, c, list, rule, &key, &idx)) {
		goto out;
	}
	if (idx < 0) {
		rc = nx_admin_reply_error(req, 404, "not_found", "rule", "the %s list has no '%s'",
					  list, rule);
		goto out;
	}
	json_t *a = rules_array(c, key);
	if (!a) {
		rc = -ENOMEM;
		goto out;
	}
	json_array_remove(a, (size_t)idx);
	rc = nx_admin_config_set(req, &key, &a, 1, "rule");
	json_decref(a);
	rc = rules_done(req, rc, 200);
out:
	json_decref(body);
	return rc;
}

/* ---- pause ----------------------------------------------------------------------------------- */

/* {paused, until_ms, until_resumed}: until_ms is null for a pause with no end (0 when not
 * paused, as before), so a client that only knew timed pauses cannot mistake one for the other. */
static int pause_view(struct nx_admin_req *req)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	int64_t until = h->paused_until(h->ud);
	bool paused = until > nx_now_wall_ms();
	bool forever = paused && until == NX_ADMIN_PAUSE_UNTIL_RESUMED;
	json_t *o = json_pack("{s:b, s:b}", "paused", paused, "until_resumed", forever);
	if (o) {
		json_object_set_new(o, "until_ms",
				    forever ? json_null()
					    : json_integer((json_int_t)(paused ? until : 0)));
	}
	return nx_admin_reply_json(req, 200, o);
}

int nx_admin_handle_pause_get(struct nx_admin_req *req)
{
	if (!req->admin->hooks.paused_until) {
		return no_hook(req, "pause control");
	}
	return pause_view(req);
}

/*
 * POST /api/filter/pause: {seconds} (1..PAUSE_MAX_S; 0 resumes, as it always did), {resume:
 * true}, or {until_resumed: true}: paused with no end until a resume (or a restart: the pause
 * is not kept on disk). Exactly one of the three.
 */
int nx_admin_handle_pause_set(struct nx_admin_req *req)
{
	static const struct nx_admin_field fields[] = {{"seconds", JSON_INTEGER, false},
						       {"resume", NX_ADMIN_JSON_BOOL, false},
						       {"until_resumed", NX_ADMIN_JSON_BOOL, false},
						       {NULL}};
	const struct nx_admin_hooks *h = &req->admin->hooks;
	if (!h->pause || !h->paused_until) {
		return no_hook(req, "pause control");
	}
	json_t *v[3];
	json_t *body = nx_admin_req_json(req, fields, v);
	if (!body) {
		return 0;
	}
	int rc;
	int64_t until = 0;
	if (v[1] && !json_is_true(v[1])) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "resume",
					  "resume can only be true");
		goto out;
	}
	if (v[2] && !json_is_true(v[2])) {
		rc = nx_admin_reply_error(req, 400, "bad_request", "until_resumed",
					  "until_resumed can only be true");
		goto out;
	}
	if ((v[0] != NULL) + (v[1] != NULL) + (v[2] != NULL) > 1) {
		rc = nx_admin_reply_error(req, 400, "bad_request", v[0] ? "seconds" : "resume",
					  "send one of seconds, resume and until_resumed");
		goto out;
	}
	if (v[2]) {
		until = NX_ADMIN_PAUSE_UNTIL_RESUMED;
	} else if (!v[1]) {
		json_int_t s = v[0] ? json_integer_value(v[0]) : -1;
		if (s < 0 || s > PAUSE_MAX_S) {
			rc = nx_admin_reply_error(req, 400, "bad_request", "seconds",
						  "seconds must be from 0 (resume) to %d, or send "
						  "until_resumed: true",
						  PAUSE_MAX_S);
			goto out;
		}
		until = s ? nx_now_wall_ms() + (int64_t)s * 1000 : 0;
	}
	rc = h->pause(h->ud, until);
	if (rc) {
		goto out;
	}
	nx_log(NX_LOG_INFO, "admin", "filtering %s through the API",
	       until == NX_ADMIN_PAUSE_UNTIL_RESUMED ? "paused until resumed"
	       : until				     ? "paused"
						     : "resumed");
	rc = pause_view(req);
out:
	json_decref(body);
	return rc;
}

/* ---- lookup ---------------------------------------------------------------------------------- */

/* `type`: a mnemonic of the types people ask about, or a number 1..65535 (as `nxdns lookup
 * --type`). -1 when it is neither. */
static int lookup_type(const char *s)
{
	static const struct {
		const char *name;
		uint16_t type;
	} types[] = {
	    {"A", NX_DNS_T_A},
	    {"AAAA", NX_DNS_T_AAAA},
	    {"CNAME", NX_DNS_T_CNAME},
	    {"TXT", NX_DNS_T_TXT},
	    {"PTR", NX_DNS_T_PTR},
	    {"MX", NX_DNS_T_MX},
	    {"NS", NX_DNS_T_NS},
	    {"SOA", NX_DNS_T_SOA},
	    {"HTTPS", NX_DNS_T_HTTPS},
	    {"SRV", 33},
	    {"SVCB", 64},
	    {"CAA", 257},
	    {"ANY", NX_DNS_T_ANY},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(types); i++) {
		if (!strcasecmp(s, types[i].name)) {
			return types[i].type;
		}
	}
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	return *s && isdigit((unsigned char)*s) && !*end && v > 0 && v <= 65535 ? (int)v : -1;
}

/* GET /api/lookup?name[&type][&client][&client_id]: what a query of that type (default A)
 * from that address (default: the default group) with that DoH/DoT client id would get. */
int nx_admin_handle_lookup(struct nx_admin_req *req)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	const char *name = nx_admin_req_arg(req, "name");
	const char *client = nx_admin_req_arg(req, "client");
	const char *type = nx_admin_req_arg(req, "type");
	const char *client_id = nx_admin_req_arg(req, "client_id");
	if (!name || !*name) {
		return nx_admin_reply_error(req, 400, "bad_request", "name", "name is required");
	}
	if (client && !*client) {
		client = NULL;
	}
	if (client_id && !*client_id) {
		client_id = NULL;
	}
	int qtype = type && *type ? lookup_type(type) : NX_DNS_T_A;
	if (qtype < 0) {
		return nx_admin_reply_error(req, 400, "bad_request", "type",
					    "type must be a record type (A, AAAA, HTTPS, MX, ...) "
					    "or its number");
	}
	if (client_id && strlen(client_id) > NX_CONF_CLIENT_ID_MAX) {
		return nx_admin_reply_error(req, 400, "bad_request", "client_id",
					    "a client id has at most %d bytes",
					    NX_CONF_CLIENT_ID_MAX);
	}
	if (!h->lookup) {
		return no_hook(req, "lookup");
	}
	const char *err = NULL;
	json_t *out = h->lookup(h->ud, name, (uint16_t)qtype, client, client_id, &err);
	if (!out) {
		bool about_client = client && err && strstr(err, "client");
		return nx_admin_reply_error(req, 400, "bad_request",
					    about_client ? "client" : "name", "%s",
					    err ? err : "the name cannot be looked up");
	}
	return nx_admin_reply_json(req, 200, out); /* as `nxdns lookup` prints it */
}

/*
 * Which keys a replica takes from its primary, and which admin routes would edit them.
 * One table each: the export, the apply, the docs and the 409 check all read these.
 */
#include <string.h>

#include <jansson.h>

#include "sync/sync.h"

/* A key is synced when it is one of these or lies under one ("filter" covers filter.*). */
static const char *const synced[] = {"filter", "groups", "clients", "local_records"};

bool nx_sync_key_synced(const char *key)
{
	for (size_t i = 0; i < sizeof(synced) / sizeof(synced[0]); i++) {
		size_t n = strlen(synced[i]);
		if (!strncmp(key, synced[i], n) && (key[n] == '\0' || key[n] == '.')) {
			return true;
		}
	}
	return false;
}

/* Routes that change a synced key, whatever their body: {method, path, exact, key}. */
static const struct {
	const char *method; /* NULL: every method but GET/HEAD */
	const char *path;
	bool exact;
	const char *key;
} routes[] = {
    /* POST /api/filter/sources/<name>/refresh and /refresh download; they change nothing */
    {"POST", "/api/filter/sources", true, "filter.sources"},
    {"PUT", "/api/filter/sources/", false, "filter.sources"},
    {"DELETE", "/api/filter/sources/", false, "filter.sources"},
    {NULL, "/api/filter/rules", false, "filter.allow / filter.deny"},
    {NULL, "/api/groups", false, "groups"},
    {NULL, "/api/clients", false, "clients"},
    {NULL, "/api/local-records", false, "local_records"},
    /* a restore replaces the whole file, synced keys included (and would be undone by the
     * next pull): a replica is restored by restoring its primary */
    {"POST", "/api/restore", true, "the configuration a restore would replace"},
};

/* The schema's own (static) text for a synced key named in a settings body; keys the schema
 * does not know answer as their section, which the handler would refuse anyway. */
static const char *synced_name(const char *key)
{
	size_t idx;
	if (!nx_sync_key_synced(key)) {
		return NULL;
	}
	if (nx_conf_key_index(key, &idx) == 0) {
		struct nx_conf_key_info k;
		nx_conf_key_info(idx, &k);
		return k.path;
	}
	return "filter.*";
}

/* PUT /api/settings: {key, value} or {settings: {K: V}}; the first synced key named. */
static const char *settings_key(const char *body)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	json_t *one = json_object_get(j, "key");
	const char *hit = json_is_string(one) ? synced_name(json_string_value(one)) : NULL;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(j, "settings"), k, v)
	{
		if (!hit) {
			hit = synced_name(k);
		}
	}
	json_decref(j);
	return hit;
}

const char *nx_sync_route_synced(const char *method, const char *path, const char *body)
{
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) {
		return NULL;
	}
	if (!strcmp(method, "PUT") && !strcmp(path, "/api/settings")) {
		return settings_key(body);
	}
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (routes[i].method && strcmp(routes[i].method, method)) {
			continue;
		}
		size_t n = strlen(routes[i].path);
		bool match = routes[i].exact ? !strcmp(path, routes[i].path)
					     : !strncmp(path, routes[i].path, n);
		if (match) {
			return routes[i].key;
		}
	}
	return NULL;
}

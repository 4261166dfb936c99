/*
 * The filter and policy API against a real server and a real YAML file (fixture.h): blocklist
 * sources (status from the hook, add/edit/remove round trips through the file and a reload,
 * refresh), user rules, groups, clients, local records, pause/resume and lookup through the
 * fake daemon hooks; refusals answer 400 with the field and leave the file as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <limits.h>

#include "base/clock.h"
#include "fixture.h"

static char config[4096];

static const char *policy_config(void)
{
	snprintf(config, sizeof(config),
		 "# policy\n"
		 "admin:\n"
		 "%s"
		 "filter:\n"
		 "  sources:\n"
		 "    - {name: ads, url: \"https://example.com/hosts.txt\"}\n"
		 "    - {name: mine, path: mine.txt, format: domains, groups: [default, kids]}\n"
		 "  allow: [\"good.example\"]\n"
		 "  deny: [\"ads.example\", \"*.tracker.example\"]\n"
		 "groups:\n"
		 "  kids: {sources: [ads]}  # the children's devices\n"
		 "  guests: {filtering: false}\n"
		 "clients:\n"
		 "  - {name: tablet, ids: [\"192.168.1.50\"], groups: [kids]}\n"
		 "local_records:\n"
		 "  - {name: nas.lan, type: A, value: 192.168.1.10}\n"
		 "  - {name: files.lan, type: CNAME, value: nas.lan}\n",
		 fx_admin_lines());
	return config;
}

static int setup(void **state)
{
	*state = fx_start(policy_config());
	return 0;
}

static int teardown(void **state)
{
	fx_stop(*state);
	return 0;
}

/* Send, expect the status (and error), return the parsed body's member (borrowed until free). */
static void call(struct fx *f, struct fx_resp *r, const char *method, const char *path,
		 const char *body, int status, const char *error)
{
	fx_http(f, r, method, path, FX_BEARER, body);
	fx_expect(r, status, error);
}

static void expect_field(const struct fx_resp *r, const char *field)
{
	const char *got = fx_str(r, "field");
	if (!got || strcmp(got, field)) {
		fail_msg("want field %s: %.*s", field, (int)r->body_len, r->body);
	}
}

/* The request is refused with 400 (error, field) and the file does not change. */
static void refused(struct fx *f, const char *method, const char *path, const char *body,
		    const char *error, const char *field)
{
	char *before = fx_read(f->path);
	int reloads = f->reloads;
	struct fx_resp r;
	call(f, &r, method, path, body, 400, error);
	expect_field(&r, field);
	fx_resp_free(&r);
	char *after = fx_read(f->path);
	assert_string_equal(before, after);
	assert_int_equal(f->reloads, reloads);
	free(before);
	free(after);
}

static const struct nx_conf_source *source(struct fx *f, const char *name)
{
	for (size_t i = 0; i < f->conf->n_sources; i++) {
		if (!strcmp(f->conf->sources[i].name, name)) {
			return &f->conf->sources[i];
		}
	}
	return NULL;
}

static json_t *find_named(json_t *a, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		if (!strcmp(json_string_value(json_object_get(v, "name")), name)) {
			return v;
		}
	}
	return NULL;
}

/* The JSON array as "a,b,c". */
static const char *joined(json_t *a)
{
	static char buf[512];
	buf[0] = '\0';
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		size_t n = strlen(buf);
		snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? "," : "", json_string_value(v));
	}
	return buf;
}

/* ---- sources ---- */

static void sources_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/filter/sources", NULL, 200, NULL);
	json_t *list = json_object_get(r.json, "sources");
	assert_int_equal(json_array_size(list), 2);
	assert_int_equal(json_integer_value(json_object_get(find_named(list, "ads"), "list")), 42);
	fx_resp_free(&r);

	/* add */
	call(f, &r, "POST", "/api/filter/sources",
	     "{\"name\": \"extra\", \"url\": \"https://lists.example/x.txt\", "
	     "\"groups\": [\"kids\"], \"format\": \"hosts\"}",
	     201, NULL);
	assert_int_equal(json_array_size(json_object_get(r.json, "sources")), 3);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 1);
	const struct nx_conf_source *s = source(f, "extra");
	assert_non_null(s);
	assert_string_equal(s->url, "https://lists.example/x.txt");
	assert_string_equal(s->format, "hosts");
	assert_int_equal(s->n_groups, 1);
	assert_string_equal(s->groups[0], "kids");
	char *text = fx_read(f->path);
	assert_non_null(strstr(text, "https://lists.example/x.txt"));
	assert_non_null(strstr(text, "# policy\n"));
	assert_non_null(strstr(text, "# the children's devices"));
	free(text);

	/* edit: a path replaces the url */
	call(f, &r, "PUT", "/api/filter/sources/extra",
	     "{\"enabled\": false, \"path\": \"other.txt\"}", 200, NULL);
	fx_resp_free(&r);
	s = source(f, "extra");
	assert_null(s->url);
	assert_non_null(s->path);
	assert_true(strlen(s->path) > 10 && !strcmp(s->path + strlen(s->path) - 10, "/other.txt"));
	assert_false(s->enabled);
	assert_true(source(f, "ads")->enabled);
	assert_string_equal(source(f, "mine")->format, "domains");

	/* remove: a group that lists it must let go first */
	call(f, &r, "DELETE", "/api/filter/sources/ads", NULL, 409, "in_use");
	assert_non_null(strstr(fx_str(&r, "message"), "'kids'"));
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/groups/kids", "{\"sources\": []}", 200, NULL);
	fx_resp_free(&r);
	call(f, &r, "DELETE", "/api/filter/sources/ads", NULL, 200, NULL);
	fx_resp_free(&r);
	assert_null(source(f, "ads"));
	assert_int_equal(f->conf->n_sources, 2);
	call(f, &r, "GET", "/api/groups", NULL, 200, NULL);
	json_t *kids = find_named(json_object_get(r.json, "groups"), "kids");
	assert_string_equal(joined(json_object_get(kids, "sources")), "");
	/* extra is disabled: only mine (which names kids) is used */
	assert_string_equal(joined(json_object_get(kids, "effective_sources")), "mine");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 4);
	call(f, &r, "DELETE", "/api/filter/sources/extra", NULL, 200, NULL);
	fx_resp_free(&r);

	call(f, &r, "DELETE", "/api/filter/sources/ads", NULL, 404, "not_found");
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/filter/sources/nope", "{\"enabled\": true}", 404, "not_found");
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/sources", "{\"name\": \"mine\", \"path\": \"x.txt\"}", 409,
	     "exists");
	fx_resp_free(&r);
}

static void sources_refusals(void **state)
{
	struct fx *f = *state;
	refused(f, "POST", "/api/filter/sources", "{\"name\": \"Bad Name!\", \"path\": \"x.txt\"}",
		"invalid_setting", "filter.sources");
	refused(f, "POST", "/api/filter/sources",
		"{\"name\": \"x\", \"path\": \"x.txt\", \"format\": \"nope\"}", "invalid_setting",
		"filter.sources");
	refused(f, "POST", "/api/filter/sources",
		"{\"name\": \"x\", \"path\": \"x.txt\", \"url\": \"https://a.example/\"}",
		"bad_request", "url");
	refused(f, "POST", "/api/filter/sources", "{\"name\": \"x\"}", "bad_request", "url");
	refused(f, "POST", "/api/filter/sources", "{\"path\": \"x.txt\"}", "bad_request", "name");
	refused(f, "POST", "/api/filter/sources",
		"{\"name\": \"x\", \"path\": \"x\", \"colour\": 1}", "bad_request", "colour");
	refused(f, "PUT", "/api/filter/sources/mine", "{\"enabled\": \"yes\"}", "bad_request",
		"enabled");
	refused(f, "PUT", "/api/filter/sources/mine", "{\"groups\": [\"nosuchgroup\"]}",
		"invalid_setting", "filter.sources");
	assert_int_equal(f->reloads, 0);
}

/* Path sources through the API stay inside the config file's directory (or state_dir/lists). */
static void sources_path_fence(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	char body[2 * PATH_MAX], real[PATH_MAX];
	assert_non_null(realpath(f->dir, real));
	static const char *const outside[] = {"/etc/passwd",	   "../nxdns-elsewhere.txt",
					      "/tmp/../etc/hosts", "sub/../../x.txt",
					      "nosuchdir/x.txt",   "."};
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
		snprintf(body, sizeof(body), "{\"name\": \"x%zu\", \"path\": \"%s\"}", i,
			 outside[i]);
		refused(f, "POST", "/api/filter/sources", body, "path_not_allowed", "path");
	}
	/* the answer names the allowed directories, in the message and as a list */
	call(f, &r, "PUT", "/api/filter/sources/mine", "{\"path\": \"/etc/passwd\"}", 400,
	     "path_not_allowed");
	assert_non_null(strstr(fx_str(&r, "message"), real));
	json_t *allowed = json_object_get(r.json, "allowed");
	assert_true(json_array_size(allowed) >= 1);
	assert_string_equal(json_string_value(json_array_get(allowed, 0)), real);
	fx_resp_free(&r);
	/* a link inside the directory that leads out of it */
	char link[PATH_MAX + 32];
	snprintf(link, sizeof(link), "%s/passwd.txt", f->dir);
	assert_int_equal(symlink("/etc/passwd", link), 0);
	refused(f, "POST", "/api/filter/sources", "{\"name\": \"l\", \"path\": \"passwd.txt\"}",
		"path_not_allowed", "path");
	snprintf(body, sizeof(body), "{\"name\": \"l\", \"path\": \"%s\"}", link);
	refused(f, "POST", "/api/filter/sources", body, "path_not_allowed", "path");
	assert_int_equal(f->reloads, 0);

	/* inside: relative, absolute (also through a link to the directory), not yet written */
	call(f, &r, "POST", "/api/filter/sources", "{\"name\": \"a\", \"path\": \"a.txt\"}", 201,
	     NULL);
	fx_resp_free(&r);
	snprintf(body, sizeof(body), "{\"name\": \"b\", \"path\": \"%s/b.txt\"}", real);
	call(f, &r, "POST", "/api/filter/sources", body, 201, NULL);
	fx_resp_free(&r);
	snprintf(body, sizeof(body), "{\"path\": \"%s/./c.txt\"}", f->dir);
	call(f, &r, "PUT", "/api/filter/sources/b", body, 200, NULL);
	fx_resp_free(&r);
	/* an edit that does not name a path is not checked again */
	call(f, &r, "PUT", "/api/filter/sources/b", "{\"enabled\": false}", 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 4);
	unlink(link);
}

static void sources_refresh(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "POST", "/api/filter/sources/refresh", NULL, 202, NULL);
	assert_true(json_is_null(json_object_get(r.json, "source")));
	fx_resp_free(&r);
	assert_string_equal(f->refreshed, "*");
	call(f, &r, "POST", "/api/filter/sources/mine/refresh", NULL, 202, NULL);
	assert_string_equal(fx_str(&r, "source"), "mine");
	fx_resp_free(&r);
	assert_string_equal(f->refreshed, "mine");
	assert_int_equal(f->refreshes, 2);
	call(f, &r, "POST", "/api/filter/sources/nope/refresh", NULL, 404, "not_found");
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/sources/mine/other", NULL, 404, "not_found");
	fx_resp_free(&r);
	f->refresh_busy = true;
	call(f, &r, "POST", "/api/filter/sources/refresh", NULL, 409, "refresh_running");
	fx_resp_free(&r);
	assert_int_equal(f->refreshes, 2);
}

/* ---- user rules ---- */

static void rules_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/filter/rules", NULL, 200, NULL);
	assert_string_equal(joined(json_object_get(r.json, "allow")), "good.example");
	assert_string_equal(joined(json_object_get(r.json, "deny")),
			    "ads.example,*.tracker.example");
	fx_resp_free(&r);

	call(f, &r, "POST", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"/^ad[0-9]+[.]/\"}", 201, NULL);
	assert_string_equal(joined(json_object_get(r.json, "deny")),
			    "ads.example,*.tracker.example,/^ad[0-9]+[.]/");
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_deny_rules, 3);
	call(f, &r, "POST", "/api/filter/rules",
	     "{\"list\": \"allow\", \"rule\": \"Fine.Example.\"}", 201, NULL);
	assert_string_equal(joined(json_object_get(r.json, "allow")), "good.example,fine.example");
	fx_resp_free(&r);
	char *text = fx_read(f->path);
	assert_non_null(strstr(text, "/^ad[0-9]+[.]/"));
	free(text);

	/* the same rule spelled differently */
	call(f, &r, "POST", "/api/filter/rules", "{\"list\": \"deny\", \"rule\": \"ADS.example.\"}",
	     409, "exists");
	fx_resp_free(&r);
	refused(f, "POST", "/api/filter/rules", "{\"list\": \"deny\", \"rule\": \"/[/\"}",
		"invalid_setting", "rule");
	refused(f, "POST", "/api/filter/rules", "{\"list\": \"block\", \"rule\": \"x.example\"}",
		"bad_request", "list");
	refused(f, "POST", "/api/filter/rules", "{\"list\": \"deny\", \"rule\": \"\"}",
		"bad_request", "rule");
	refused(f, "POST", "/api/filter/rules", "{\"list\": \"deny\"}", "bad_request", "rule");

	call(f, &r, "DELETE", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"ads.example\"}", 200, NULL);
	fx_resp_free(&r);
	/* by path, url-encoded: the regex holds slashes */
	call(f, &r, "DELETE", "/api/filter/rules/deny/%2F%5Ead%5B0-9%5D%2B%5B.%5D%2F", NULL, 200,
	     NULL);
	assert_string_equal(joined(json_object_get(r.json, "deny")), "*.tracker.example");
	fx_resp_free(&r);
	call(f, &r, "DELETE", "/api/filter/rules/allow/fine.example", NULL, 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_allow_rules, 1);
	assert_int_equal(f->conf->n_deny_rules, 1);
	call(f, &r, "DELETE", "/api/filter/rules/deny/ads.example", NULL, 404, "not_found");
	expect_field(&r, "rule");
	fx_resp_free(&r);
	call(f, &r, "DELETE", "/api/filter/rules/nope/x", NULL, 400, "bad_request");
	expect_field(&r, "list");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 5);
}

/* PUT: text, list and groups in one rewrite; a refused new text keeps the old rule. */
static void rules_edit(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "PUT", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"ads.example\", \"new_rule\": \"Ads2.Example.\"}",
	     200, NULL);
	assert_string_equal(joined(json_object_get(r.json, "deny")),
			    "ads2.example,*.tracker.example");
	fx_resp_free(&r);
	/* groups only */
	call(f, &r, "PUT", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"ads2.example\", \"groups\": [\"kids\"]}", 200, NULL);
	fx_resp_free(&r);
	assert_non_null(f->conf->deny_scopes);
	assert_int_equal(f->conf->deny_scopes[0].n_groups, 1);
	assert_string_equal(f->conf->deny_scopes[0].groups[0], "kids");
	/* a new text keeps the groups unless told */
	call(f, &r, "PUT", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"ads2.example\", \"new_rule\": \"ads3.example\"}",
	     200, NULL);
	fx_resp_free(&r);
	assert_string_equal(f->conf->deny_rules[0], "ads3.example");
	assert_int_equal(f->conf->deny_scopes[0].n_groups, 1);
	/* to the other list, every client again */
	call(f, &r, "PUT", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"ads3.example\", \"new_list\": \"allow\", "
	     "\"groups\": null}",
	     200, NULL);
	assert_string_equal(joined(json_object_get(r.json, "allow")), "good.example,ads3.example");
	assert_string_equal(joined(json_object_get(r.json, "deny")), "*.tracker.example");
	fx_resp_free(&r);
	assert_true(f->conf->allow_scopes == NULL || f->conf->allow_scopes[1].n_groups == 0);
	int reloads = f->reloads;

	/* refusals change nothing */
	char *before = fx_read(f->path);
	refused(f, "PUT", "/api/filter/rules",
		"{\"list\": \"deny\", \"rule\": \"*.tracker.example\", \"new_rule\": \"/[/\"}",
		"invalid_setting", "rule");
	refused(f, "PUT", "/api/filter/rules",
		"{\"list\": \"deny\", \"rule\": \"*.tracker.example\", \"groups\": [\"nosuch\"]}",
		"invalid_setting", "rule");
	call(f, &r, "PUT", "/api/filter/rules",
	     "{\"list\": \"deny\", \"rule\": \"nope.example\", \"new_rule\": \"x.example\"}", 404,
	     "not_found");
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/filter/rules",
	     "{\"list\": \"allow\", \"rule\": \"ads3.example\", \"new_rule\": \"GOOD.example\"}",
	     409, "exists");
	fx_resp_free(&r);
	refused(f, "PUT", "/api/filter/rules",
		"{\"list\": \"allow\", \"rule\": \"ads3.example\", \"new_list\": \"block\"}",
		"bad_request", "list");
	refused(f, "PUT", "/api/filter/rules",
		"{\"list\": \"allow\", \"rule\": \"ads3.example\", \"groups\": []}", "bad_request",
		"groups");
	refused(f, "PUT", "/api/filter/rules",
		"{\"list\": \"allow\", \"rule\": \"ads3.example\", \"groups\": \"kids\"}",
		"bad_request", "groups");
	char *after = fx_read(f->path);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_string_equal(f->conf->deny_rules[0], "*.tracker.example");
	assert_int_equal(f->conf->n_allow_rules, 2);
	/* the loader's refusals reloaded nothing new into effect */
	assert_true(f->reloads >= reloads);
}

/* The record named as DELETE names it, in effect after one PUT. */
static const char *local_value_of(json_t *view, const char *name, const char *type)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(view, "local_records"), i, o)
	{
		if (!strcmp(json_string_value(json_object_get(o, "name")), name) &&
		    !strcmp(json_string_value(json_object_get(o, "type")), type)) {
			return json_string_value(json_object_get(o, "value"));
		}
	}
	return NULL;
}

/* PUT /api/local-records?name&type[&value]: one record changed in one rewrite. */
static void locals_edit(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	/* named as the loader reads names: case and a trailing dot do not matter */
	call(f, &r, "PUT", "/api/local-records?name=NAS.lan.&type=a",
	     "{\"value\": \"192.168.1.11\", \"ttl\": 60}", 200, NULL);
	assert_string_equal(local_value_of(r.json, "nas.lan", "A"), "192.168.1.11");
	fx_resp_free(&r);
	char *text = fx_read(f->path);
	assert_non_null(strstr(text, "192.168.1.11"));
	assert_null(strstr(text, "192.168.1.10"));
	/* the other record kept its place and spelling: nas.lan is still written first */
	assert_true(strstr(text, "nas.lan") < strstr(text, "files.lan"));
	free(text);
	assert_int_equal(f->conf->n_locals, 2);

	/* rename a CNAME named with its value (spelled differently) */
	call(f, &r, "PUT", "/api/local-records?name=files.lan&type=CNAME&value=NAS.LAN.",
	     "{\"name\": \"share.lan\"}", 200, NULL);
	assert_string_equal(local_value_of(r.json, "share.lan", "CNAME"), "nas.lan");
	assert_null(local_value_of(r.json, "files.lan", "CNAME"));
	fx_resp_free(&r);

	/* a second A record of nas.lan: the value must say which */
	call(f, &r, "POST", "/api/local-records",
	     "{\"name\": \"nas.lan\", \"type\": \"A\", \"value\": \"192.168.1.12\"}", 201, NULL);
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/local-records?name=nas.lan&type=A", "{\"ttl\": 30}", 409,
	     "ambiguous");
	expect_field(&r, "value");
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/local-records?name=nas.lan&type=A&value=192.168.001.012",
	     "{\"value\": \"192.168.1.13\"}", 404, "not_found"); /* not an address spelling */
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/local-records?name=nas.lan&type=A&value=192.168.1.12",
	     "{\"value\": \"192.168.1.13\"}", 200, NULL);
	fx_resp_free(&r);

	/* refusals change nothing */
	char *before = fx_read(f->path);
	refused(f, "PUT", "/api/local-records?name=nas.lan&type=A&value=192.168.1.13",
		"{\"value\": \"not-an-address\"}", "invalid_setting", "local_records");
	refused(f, "PUT", "/api/local-records?name=nas.lan&type=A&value=192.168.1.13",
		"{\"type\": \"BOGUS\"}", "invalid_setting", "local_records");
	refused(f, "PUT", "/api/local-records?name=nas.lan&type=A&value=192.168.1.13",
		"{\"ttl\": \"60\"}", "bad_request", "ttl");
	refused(f, "PUT", "/api/local-records?type=A", "{\"ttl\": 1}", "bad_request", "name");
	refused(f, "PUT", "/api/local-records?name=nas.lan", "{\"ttl\": 1}", "bad_request", "type");
	call(f, &r, "PUT", "/api/local-records?name=nope.lan&type=A", "{\"ttl\": 1}", 404,
	     "not_found");
	fx_resp_free(&r);
	char *after = fx_read(f->path);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_int_equal(f->conf->n_locals, 3);
}

/* ---- groups ---- */

static void groups_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/groups", NULL, 200, NULL);
	json_t *g = json_object_get(r.json, "groups");
	assert_int_equal(json_array_size(g), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(g, 0), "name")),
			    "default");
	json_t *kids = find_named(g, "kids");
	assert_string_equal(joined(json_object_get(kids, "sources")), "ads");
	assert_string_equal(joined(json_object_get(kids, "effective_sources")), "ads,mine");
	assert_false(json_is_true(json_object_get(find_named(g, "guests"), "filtering")));
	fx_resp_free(&r);

	call(f, &r, "POST", "/api/groups", "{\"name\": \"teens\", \"sources\": [\"mine\"]}", 201,
	     NULL);
	json_t *teens = find_named(json_object_get(r.json, "groups"), "teens");
	assert_non_null(teens);
	assert_true(json_is_true(json_object_get(teens, "filtering")));
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_groups, 4);

	call(f, &r, "PUT", "/api/groups/guests", "{\"filtering\": true}", 200, NULL);
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/groups/default", "{\"sources\": [\"ads\"]}", 200, NULL);
	fx_resp_free(&r);
	for (size_t i = 0; i < f->conf->n_groups; i++) {
		assert_true(f->conf->groups[i].filtering);
	}
	assert_int_equal(f->conf->groups[0].sources_mask, 3); /* ads listed, mine names default */
	/* kids kept what it had */
	call(f, &r, "GET", "/api/groups", NULL, 200, NULL);
	kids = find_named(json_object_get(r.json, "groups"), "kids");
	assert_string_equal(joined(json_object_get(kids, "sources")), "ads");
	fx_resp_free(&r);

	call(f, &r, "DELETE", "/api/groups/teens", NULL, 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_groups, 3);
	assert_int_equal(f->reloads, 4);

	call(f, &r, "POST", "/api/groups", "{\"name\": \"kids\"}", 409, "exists");
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/groups/nope", "{\"filtering\": true}", 404, "not_found");
	fx_resp_free(&r);
	call(f, &r, "DELETE", "/api/groups/nope", NULL, 404, "not_found");
	fx_resp_free(&r);
	refused(f, "DELETE", "/api/groups/default", NULL, "bad_request", "name");
	/* still used by the client tablet and the source mine */
	refused(f, "DELETE", "/api/groups/kids", NULL, "invalid_setting", "groups");
	refused(f, "POST", "/api/groups", "{\"name\": \"x\", \"sources\": [\"nosuch\"]}",
		"invalid_setting", "groups");
	refused(f, "POST", "/api/groups", "{\"name\": \"x\", \"filtering\": 1}", "bad_request",
		"filtering");
}

/* ---- clients ---- */

static void clients_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/clients", NULL, 200, NULL);
	json_t *tablet = find_named(json_object_get(r.json, "clients"), "tablet");
	assert_string_equal(joined(json_object_get(tablet, "ids")), "192.168.1.50");
	assert_string_equal(joined(json_object_get(tablet, "groups")), "kids");
	fx_resp_free(&r);

	call(f, &r, "POST", "/api/clients",
	     "{\"name\": \"laptop\", \"ids\": [\"192.168.1.60\", \"fd00::/64\"], "
	     "\"groups\": [\"guests\"]}",
	     201, NULL);
	json_t *laptop = find_named(json_object_get(r.json, "clients"), "laptop");
	assert_string_equal(joined(json_object_get(laptop, "ids")), "192.168.1.60,fd00::/64");
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_clients, 2);
	assert_false(f->conf->clients[1].filtering);

	call(f, &r, "PUT", "/api/clients/laptop", "{\"groups\": [\"kids\"]}", 200, NULL);
	fx_resp_free(&r);
	assert_true(f->conf->clients[1].filtering);
	assert_int_equal(f->conf->clients[1].n_ids, 2);

	/* a name with a space, in the path url-encoded */
	call(f, &r, "POST", "/api/clients",
	     "{\"name\": \"guest wifi\", \"ids\": [\"10.9.0.0/16\"]}", 201, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->clients[2].n_groups, 1);
	assert_string_equal(f->conf->clients[2].groups[0], "default");
	call(f, &r, "DELETE", "/api/clients/guest%20wifi", NULL, 200, NULL);
	fx_resp_free(&r);
	call(f, &r, "DELETE", "/api/clients/tablet", NULL, 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_clients, 1);
	assert_string_equal(f->conf->clients[0].name, "laptop");
	assert_int_equal(f->reloads, 5);

	call(f, &r, "POST", "/api/clients", "{\"name\": \"laptop\", \"ids\": [\"10.0.0.1\"]}", 409,
	     "exists");
	fx_resp_free(&r);
	call(f, &r, "PUT", "/api/clients/nope", "{\"ids\": [\"10.0.0.1\"]}", 404, "not_found");
	fx_resp_free(&r);
	refused(f, "POST", "/api/clients", "{\"name\": \"x\", \"ids\": [\"not-an-address\"]}",
		"invalid_setting", "clients");
	refused(f, "POST", "/api/clients", "{\"name\": \"x\"}", "bad_request", "ids");
	refused(f, "PUT", "/api/clients/laptop", "{\"name\": \"y\"}", "bad_request", "name");
}

/* ---- local records ---- */

static void locals_round_trip(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/local-records", NULL, 200, NULL);
	json_t *l = json_object_get(r.json, "local_records");
	assert_int_equal(json_array_size(l), 2);
	json_t *nas = find_named(l, "nas.lan");
	assert_string_equal(json_string_value(json_object_get(nas, "type")), "A");
	assert_string_equal(json_string_value(json_object_get(nas, "value")), "192.168.1.10");
	assert_int_equal(json_integer_value(json_object_get(nas, "ttl")), 300);
	json_t *files = find_named(l, "files.lan");
	assert_string_equal(json_string_value(json_object_get(files, "value")), "nas.lan");
	fx_resp_free(&r);

	call(f, &r, "POST", "/api/local-records",
	     "{\"name\": \"nas.lan\", \"type\": \"AAAA\", \"value\": \"fd00::10\", \"ttl\": 60}",
	     201, NULL);
	fx_resp_free(&r);
	char txt[700];
	char body[800];
	memset(txt, 'x', 600);
	txt[600] = '\0';
	snprintf(body, sizeof(body),
		 "{\"name\": \"info.lan\", \"type\": \"TXT\", \"value\": \"v=1 %s\"}", txt);
	call(f, &r, "POST", "/api/local-records", body, 201, NULL);
	json_t *info = find_named(json_object_get(r.json, "local_records"), "info.lan");
	assert_int_equal(json_string_length(json_object_get(info, "value")), 604);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_locals, 4);

	/* by name, type and value, spelled differently */
	call(f, &r, "DELETE", "/api/local-records?name=NAS.lan.&type=aaaa&value=fd00:0::10", NULL,
	     200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_locals, 3);
	/* by index (GET order: sorted by name) */
	call(f, &r, "GET", "/api/local-records", NULL, 200, NULL);
	json_t *first = json_array_get(json_object_get(r.json, "local_records"), 0);
	char want[64], path[96];
	snprintf(want, sizeof(want), "%s", json_string_value(json_object_get(first, "name")));
	snprintf(path, sizeof(path), "/api/local-records/%lld",
		 (long long)json_integer_value(json_object_get(first, "index")));
	fx_resp_free(&r);
	call(f, &r, "DELETE", path, NULL, 200, NULL);
	assert_null(find_named(json_object_get(r.json, "local_records"), want));
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_locals, 2);
	call(f, &r, "DELETE", "/api/local-records?name=info.lan&type=TXT", NULL, 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_locals, 1);
	assert_int_equal(f->reloads, 5);

	call(f, &r, "DELETE", "/api/local-records?name=nas.lan&type=A&value=10.0.0.1", NULL, 404,
	     "not_found");
	fx_resp_free(&r);
	call(f, &r, "DELETE", "/api/local-records/7", NULL, 404, "not_found");
	fx_resp_free(&r);
	refused(f, "DELETE", "/api/local-records?type=A", NULL, "bad_request", "name");
	refused(f, "DELETE", "/api/local-records?name=nas.lan&type=NS", NULL, "bad_request",
		"type");
	refused(f, "POST", "/api/local-records",
		"{\"name\": \"m.lan\", \"type\": \"MX\", \"value\": \"x\"}", "invalid_setting",
		"local_records");
	refused(f, "POST", "/api/local-records",
		"{\"name\": \"m.lan\", \"type\": \"A\", \"value\": \"300.1.1.1\"}",
		"invalid_setting", "local_records");
	refused(f, "POST", "/api/local-records",
		"{\"name\": \"m.lan\", \"type\": \"A\", \"value\": \"10.0.0.1\", \"ttl\": \"1\"}",
		"bad_request", "ttl");
}

/* ---- during a list rebuild ---- */

/* While the daemon rebuilds lists it answers admin requests from the build's progress hook:
 * reads and /metrics go on, changes answer 503 busy with Retry-After, and nothing reaches the
 * hooks (a change there could start another rebuild inside this one). */
static void busy_refuses_changes(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	nx_admin_set_busy(f->admin, true);
	call(f, &r, "GET", "/api/filter/pause", NULL, 200, NULL);
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/pause", "{\"seconds\": 60}", 503, "busy");
	char v[16];
	assert_non_null(fx_header(&r, "Retry-After", v, sizeof(v)));
	assert_string_equal(v, "1");
	fx_resp_free(&r);
	assert_int_equal(f->paused_until, 0);
	call(f, &r, "DELETE", "/api/filter/rules", "{\"list\": \"deny\", \"rule\": \"x.test\"}",
	     503, "busy");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 0);
	fx_http(f, &r, "GET", "/metrics", NULL, NULL);
	fx_expect(&r, 200, NULL);
	assert_non_null(strstr(r.body, "\nnxdns_lists_rebuilding 1\n"));
	fx_resp_free(&r);
	/* authorization still comes first; HEAD is a read; logging in only touches sessions */
	fx_http(f, &r, "POST", "/api/filter/pause", NULL, "{\"seconds\": 60}");
	fx_expect(&r, 401, NULL);
	fx_resp_free(&r);
	fx_http(f, &r, "HEAD", "/api/filter/pause", FX_BEARER, NULL);
	assert_int_equal(r.status, 200);
	fx_resp_free(&r);
	struct fx_session sess;
	fx_login(f, &sess);

	nx_admin_set_busy(f->admin, false);
	call(f, &r, "POST", "/api/filter/pause", "{\"seconds\": 60}", 200, NULL);
	fx_resp_free(&r);
	assert_true(f->paused_until > 0);
	fx_http(f, &r, "GET", "/metrics", NULL, NULL);
	assert_non_null(strstr(r.body, "\nnxdns_lists_rebuilding 0\n"));
	fx_resp_free(&r);
}

/* ---- pause, lookup ---- */

static void pause_and_resume(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/filter/pause", NULL, 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "paused")));
	assert_int_equal(json_integer_value(json_object_get(r.json, "until_ms")), 0);
	fx_resp_free(&r);

	int64_t t0 = nx_now_wall_ms();
	call(f, &r, "POST", "/api/filter/pause", "{\"seconds\": 60}", 200, NULL);
	assert_true(json_is_true(json_object_get(r.json, "paused")));
	int64_t until = json_integer_value(json_object_get(r.json, "until_ms"));
	fx_resp_free(&r);
	assert_true(until >= t0 + 60000 && until <= nx_now_wall_ms() + 60000);
	assert_int_equal(f->paused_until, until);
	call(f, &r, "GET", "/api/filter/pause", NULL, 200, NULL);
	assert_true(json_is_true(json_object_get(r.json, "paused")));
	fx_resp_free(&r);

	call(f, &r, "POST", "/api/filter/pause", "{\"resume\": true}", 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "paused")));
	fx_resp_free(&r);
	assert_int_equal(f->paused_until, 0);
	f->paused_until = 1;
	call(f, &r, "POST", "/api/filter/pause", "{\"seconds\": 0}", 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->paused_until, 0);
	/* a pause that ran out is not a pause */
	f->paused_until = t0 - 1000;
	call(f, &r, "GET", "/api/filter/pause", NULL, 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "paused")));
	fx_resp_free(&r);

	refused(f, "POST", "/api/filter/pause", "{\"seconds\": -1}", "bad_request", "seconds");
	refused(f, "POST", "/api/filter/pause", "{}", "bad_request", "seconds");
	refused(f, "POST", "/api/filter/pause", "{\"seconds\": 1.5}", "bad_request", "seconds");
	refused(f, "POST", "/api/filter/pause", "{\"resume\": false}", "bad_request", "resume");
	refused(f, "POST", "/api/filter/pause", "{\"seconds\": 99999999}", "bad_request",
		"seconds");
}

/* until_resumed: no end, shown as such, ended by a resume; the old forms still work. */
static void pause_until_resumed(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "POST", "/api/filter/pause", "{\"until_resumed\": true}", 200, NULL);
	assert_true(json_is_true(json_object_get(r.json, "paused")));
	assert_true(json_is_true(json_object_get(r.json, "until_resumed")));
	assert_true(json_is_null(json_object_get(r.json, "until_ms")));
	fx_resp_free(&r);
	assert_true(f->paused_until == NX_ADMIN_PAUSE_UNTIL_RESUMED);
	call(f, &r, "GET", "/api/filter/pause", NULL, 200, NULL);
	assert_true(json_is_true(json_object_get(r.json, "until_resumed")));
	fx_resp_free(&r);
	/* a timed pause replaces it and is not "until resumed" */
	call(f, &r, "POST", "/api/filter/pause", "{\"seconds\": 300}", 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "until_resumed")));
	assert_true(json_integer_value(json_object_get(r.json, "until_ms")) > 0);
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/pause", "{\"until_resumed\": true}", 200, NULL);
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/pause", "{\"resume\": true}", 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "paused")));
	assert_false(json_is_true(json_object_get(r.json, "until_resumed")));
	assert_int_equal(json_integer_value(json_object_get(r.json, "until_ms")), 0);
	fx_resp_free(&r);
	assert_int_equal(f->paused_until, 0);

	refused(f, "POST", "/api/filter/pause", "{\"until_resumed\": false}", "bad_request",
		"until_resumed");
	refused(f, "POST", "/api/filter/pause", "{\"until_resumed\": true, \"seconds\": 60}",
		"bad_request", "seconds");
	refused(f, "POST", "/api/filter/pause", "{\"until_resumed\": true, \"resume\": true}",
		"bad_request", "resume");
	assert_int_equal(f->paused_until, 0);
}

static void lookup(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	call(f, &r, "GET", "/api/lookup?name=ads.example", NULL, 200, NULL);
	assert_string_equal(fx_str(&r, "action"), "block");
	assert_string_equal(fx_str(&r, "name"), "ads.example");
	assert_null(fx_str(&r, "client"));
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup?name=ads.example&client=192.168.1.50", NULL, 200, NULL);
	assert_string_equal(fx_str(&r, "client"), "192.168.1.50");
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup?name=bad.example", NULL, 400, "bad_request");
	expect_field(&r, "name");
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup?name=x.example&client=nope", NULL, 400, "bad_request");
	expect_field(&r, "client");
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup", NULL, 400, "bad_request");
	expect_field(&r, "name");
	fx_resp_free(&r);

	/* type and client id reach the hook */
	call(f, &r, "GET", "/api/lookup?name=ads.example", NULL, 200, NULL);
	assert_int_equal(json_integer_value(json_object_get(r.json, "qtype")), 1);
	assert_null(fx_str(&r, "client_id"));
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup?name=ads.example&type=https&client_id=kid-phone", NULL, 200,
	     NULL);
	assert_int_equal(json_integer_value(json_object_get(r.json, "qtype")), 65);
	assert_string_equal(fx_str(&r, "client_id"), "kid-phone");
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup?name=ads.example&type=28", NULL, 200, NULL);
	assert_int_equal(json_integer_value(json_object_get(r.json, "qtype")), 28);
	fx_resp_free(&r);
	const char *bad_types[] = {"BOGUS", "0", "65536", "-1", "1x"};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad_types); i++) {
		char path[96];
		snprintf(path, sizeof(path), "/api/lookup?name=a.example&type=%s", bad_types[i]);
		call(f, &r, "GET", path, NULL, 400, "bad_request");
		expect_field(&r, "type");
		fx_resp_free(&r);
	}
	call(f, &r, "GET",
	     "/api/lookup?name=a.example&client_id="
	     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	     NULL, 400, "bad_request");
	expect_field(&r, "client_id");
	fx_resp_free(&r);
}

/* A browser session needs its CSRF token for every change here too. */
static void session_needs_csrf(void **state)
{
	struct fx *f = *state;
	struct fx_session s;
	fx_login(f, &s);
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/filter/rules", s.cookie,
		"{\"list\": \"deny\", \"rule\": \"x.example\"}");
	fx_expect(&r, 403, "csrf_required");
	fx_resp_free(&r);
	fx_http(f, &r, "DELETE", "/api/groups/guests", s.cookie, NULL);
	fx_expect(&r, 403, "csrf_required");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 0);
	fx_http(f, &r, "POST", "/api/filter/rules", s.both,
		"{\"list\": \"deny\", \"rule\": \"x.example\"}");
	fx_expect(&r, 201, NULL);
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/local-records", s.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
}

static void without_hooks(void **state)
{
	(void)state;
	struct fx *f = fx_start_with(policy_config(), true);
	f->admin->hooks.refresh = NULL;
	f->admin->hooks.pause = NULL;
	f->admin->hooks.lookup = NULL;
	f->admin->hooks.sources_status = NULL;
	struct fx_resp r;
	call(f, &r, "POST", "/api/clients", "{\"name\": \"x\", \"ids\": [\"10.0.0.1\"]}", 503,
	     "not_configured");
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/sources/refresh", NULL, 503, "not_configured");
	fx_resp_free(&r);
	call(f, &r, "POST", "/api/filter/pause", "{\"seconds\": 5}", 503, "not_configured");
	fx_resp_free(&r);
	call(f, &r, "GET", "/api/lookup?name=a.example", NULL, 503, "not_configured");
	fx_resp_free(&r);
	/* the sources as configured */
	call(f, &r, "GET", "/api/filter/sources", NULL, 200, NULL);
	json_t *mine = find_named(json_object_get(r.json, "sources"), "mine");
	assert_string_equal(json_string_value(json_object_get(mine, "format")), "domains");
	assert_string_equal(joined(json_object_get(mine, "groups")), "default,kids");
	assert_null(json_object_get(mine, "list"));
	fx_resp_free(&r);
	fx_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(sources_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(sources_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(sources_refresh, setup, teardown),
	    cmocka_unit_test_setup_teardown(sources_path_fence, setup, teardown),
	    cmocka_unit_test_setup_teardown(rules_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(groups_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(clients_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(locals_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(pause_and_resume, setup, teardown),
	    cmocka_unit_test_setup_teardown(lookup, setup, teardown),
	    cmocka_unit_test_setup_teardown(session_needs_csrf, setup, teardown),
	    cmocka_unit_test_setup_teardown(busy_refuses_changes, setup, teardown),
	    cmocka_unit_test_setup_teardown(rules_edit, setup, teardown),
	    cmocka_unit_test_setup_teardown(pause_until_resumed, setup, teardown),
	    cmocka_unit_test_setup_teardown(locals_edit, setup, teardown),
	    cmocka_unit_test(without_hooks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

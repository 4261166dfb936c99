/*
 * sync/: which keys and routes are synced, the primary's export read back by the replica's
 * apply through the real loader (host keys kept, path sources placed by content hash), every
 * refusal leaving the replica's file byte for byte, the size cap, the ETag, the prune, and
 * NX_OWNER_sync back to zero.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"
#include "sync/impl.h"

struct fx {
	char dir[64];
	char primary[128], replica[128], list[128], pstate[128], rstate[128];
};

static int64_t sync_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_sync].bytes;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strdup(buf);
}

static struct nx_conf *load(const char *path)
{
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX];
	int rc = nx_conf_load(path, &c, err, sizeof(err));
	if (rc) {
		fail_msg("%s: %s", path, err);
	}
	return c;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/nx-sync-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->primary, sizeof(f->primary), "%s/primary.yaml", f->dir);
	snprintf(f->replica, sizeof(f->replica), "%s/replica.yaml", f->dir);
	snprintf(f->list, sizeof(f->list), "%s/house.txt", f->dir);
	snprintf(f->pstate, sizeof(f->pstate), "%s/pstate", f->dir);
	snprintf(f->rstate, sizeof(f->rstate), "%s/rstate", f->dir);
	mkdir(f->pstate, 0700);
	mkdir(f->rstate, 0700);
	put(f->list, "# by hand\nhouse.example\n");
	char text[2048];
	snprintf(text, sizeof(text),
		 "# the primary\n"
		 "upstream:\n  servers: [\"192.0.2.1:53\"]\n"
		 "filter:\n"
		 "  sources:\n"
		 "    - {name: house, path: house.txt}\n"
		 "    - {name: big, url: \"https://lists.example/big.txt\", groups: [kids]}\n"
		 "  deny: [\"ads.example\", {rule: \"*.tracker.example\", groups: [kids]}]\n"
		 "  block_ttl: 77\n"
		 "groups:\n  kids: {sources: [house, big]}\n"
		 "clients:\n  - {name: tablet, ids: [\"192.168.1.20\"], groups: [kids]}\n"
		 "local_records:\n  - {name: nas.lan, type: A, value: 192.168.1.2}\n"
		 "state_dir: %s\n",
		 f->pstate);
	put(f->primary, text);
	snprintf(text, sizeof(text),
		 "# the replica: its own upstream and a rule of its own the primary replaces\n"
		 "upstream:\n  servers: [\"198.51.100.1:53\"]\n"
		 "cache:\n  size: 123\n"
		 "filter:\n  deny: [\"local-only.example\"]\n"
		 "sync:\n  primary: https://127.0.0.1:8443\n  token: nxdns_x\n"
		 "state_dir: %s\n",
		 f->rstate);
	put(f->replica, text);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	assert_int_equal(sync_bytes(), 0);
	return 0;
}

static void keys_and_routes(void **state)
{
	(void)state;
	static const char *const yes[] = {"filter.sources", "filter.deny", "filter.block_ttl",
					  "filter.enabled", "groups",	   "clients",
					  "local_records"};
	static const char *const no[] = {
	    "upstream.servers", "listener.dns", "admin.tokens", "sync.primary", "tls.cert",
	    "state_dir",	"cache.size",	"access.allow", "filters",	"groupsx"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		assert_true(nx_sync_key_synced(yes[i]));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		assert_false(nx_sync_key_synced(no[i]));
	}
	/* every synced schema key is a filter.* key or one of the three lists */
	size_t n = 0;
	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		n += nx_sync_key_synced(k.path);
	}
	assert_true(n >= 13);

	assert_string_equal(nx_sync_route_synced("POST", "/api/filter/rules", NULL),
			    "filter.allow / filter.deny");
	assert_string_equal(nx_sync_route_synced("DELETE", "/api/filter/rules/deny/x", NULL),
			    "filter.allow / filter.deny");
	assert_string_equal(nx_sync_route_synced("POST", "/api/filter/sources", NULL),
			    "filter.sources");
	assert_string_equal(nx_sync_route_synced("PUT", "/api/filter/sources/a", NULL),
			    "filter.sources");
	assert_string_equal(nx_sync_route_synced("DELETE", "/api/groups/kids", NULL), "groups");
	assert_string_equal(nx_sync_route_synced("PUT", "/api/clients/x", NULL), "clients");
	assert_string_equal(nx_sync_route_synced("POST", "/api/local-records", NULL),
			    "local_records");
	assert_non_null(nx_sync_route_synced("POST", "/api/restore", NULL));
	assert_null(nx_sync_route_synced("GET", "/api/backup", NULL));
	assert_null(nx_sync_route_synced("GET", "/api/filter/rules", NULL));
	assert_null(nx_sync_route_synced("HEAD", "/api/groups", NULL));
	assert_null(nx_sync_route_synced("POST", "/api/filter/sources/refresh", NULL));
	assert_null(nx_sync_route_synced("POST", "/api/filter/sources/a/refresh", NULL));
	assert_null(nx_sync_route_synced("POST", "/api/filter/pause", "{\"seconds\": 5}"));
	assert_null(nx_sync_route_synced("PUT", "/api/settings", "{\"key\": \"cache.size\"}"));
	assert_null(nx_sync_route_synced("PUT", "/api/settings", "not json"));
	assert_null(nx_sync_route_synced("PUT", "/api/settings", NULL));
	assert_string_equal(
	    nx_sync_route_synced("PUT", "/api/settings", "{\"key\": \"filter.block_ttl\"}"),
	    "filter.block_ttl");
	assert_string_equal(nx_sync_route_synced("PUT", "/api/settings",
						 "{\"settings\": {\"cache.size\": 1, "
						 "\"filter.enabled\": false}}"),
			    "filter.enabled");
}

/* The export of the primary file as it stands. */
static char *export_doc(struct fx *f, size_t *len, char *gen, char *etag)
{
	struct nx_conf *p = load(f->primary);
	char err[NX_SYNC_ERR_MAX];
	char *doc = NULL;
	int rc = nx_sync_export(p, &doc, len, gen, etag, err, sizeof(err));
	if (rc) {
		fail_msg("export: %s", err);
	}
	nx_conf_free(p);
	return doc;
}

static int apply_doc(struct fx *f, const char *doc, size_t len, char *err, size_t errlen)
{
	struct nx_conf *r = load(f->replica);
	int rc = nx_sync_apply(r, doc, len, err, errlen);
	nx_conf_free(r);
	return rc;
}

static size_t files_in(const char *dir)
{
	DIR *d = opendir(dir);
	size_t n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		n += e->d_name[0] != '.';
	}
	if (d) {
		closedir(d);
	}
	return n;
}

static void export_apply_round_trip(void **state)
{
	struct fx *f = *state;
	size_t len;
	char gen[NX_SYNC_GEN_LEN], etag[NX_SYNC_ETAG_MAX];
	char *doc = export_doc(f, &len, gen, etag);
	assert_int_equal(strlen(gen), 16);
	assert_int_equal(etag[0], '"');
	assert_true(sync_bytes() > 0); /* the document is charged while it lives */
	json_t *j = json_loads(doc, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "format")), NX_SYNC_FORMAT);
	json_t *keys = json_object_get(j, "keys");
	assert_null(json_object_get(keys, "upstream.servers"));
	assert_null(json_object_get(keys, "state_dir"));
	assert_non_null(json_object_get(keys, "filter.refresh_interval")); /* a default */
	assert_non_null(json_object_get(json_object_get(j, "files"), "house"));
	assert_null(json_object_get(json_object_get(j, "files"), "big")); /* a url source */
	json_decref(j);

	char err[NX_SYNC_ERR_MAX];
	int rc = apply_doc(f, doc, len, err, sizeof(err));
	if (rc) {
		fail_msg("apply: %s", err);
	}
	struct nx_conf *r = load(f->replica);
	/* the primary's keys */
	assert_int_equal(r->n_sources, 2);
	assert_string_equal(r->sources[0].name, "house");
	char want[256];
	snprintf(want, sizeof(want), "%s/sync/house-", f->rstate);
	assert_memory_equal(r->sources[0].path, want, strlen(want));
	char *content = slurp(r->sources[0].path);
	assert_string_equal(content, "# by hand\nhouse.example\n");
	free(content);
	assert_string_equal(r->sources[1].url, "https://lists.example/big.txt");
	assert_int_equal(r->n_deny_rules, 2);
	assert_string_equal(r->deny_rules[0], "ads.example");
	assert_int_equal(r->block_ttl, 77);
	assert_int_equal(r->n_groups, 2);
	assert_int_equal(r->n_clients, 1);
	assert_int_equal(r->n_locals, 1);
	/* its own */
	assert_string_equal(r->upstreams[0].text, "198.51.100.1:53");
	assert_int_equal(r->cache_size, 123);
	assert_string_equal(r->sync_primary, "https://127.0.0.1:8443");
	char *text = slurp(f->replica);
	assert_non_null(strstr(text, "# the replica")); /* comments kept */
	assert_null(strstr(text, "local-only.example"));
	free(text);

	/* the same file again: the same ETag; a change: another, and the old copy is pruned */
	size_t len2;
	char gen2[NX_SYNC_GEN_LEN], etag2[NX_SYNC_ETAG_MAX];
	char *doc2 = export_doc(f, &len2, gen2, etag2);
	assert_string_equal(etag2, etag);
	nx_sync_export_free(doc2, len2);
	put(f->list, "house.example\nmore.example\n");
	doc2 = export_doc(f, &len2, gen2, etag2);
	assert_string_not_equal(etag2, etag);
	assert_int_equal(apply_doc(f, doc2, len2, err, sizeof(err)), 0);
	nx_sync_export_free(doc2, len2);
	char dir[160];
	snprintf(dir, sizeof(dir), "%s/sync", f->rstate);
	assert_int_equal(files_in(dir), 2); /* the old and the new copy */
	nx_conf_free(r);
	r = load(f->replica);
	nx_sync_prune(r);
	assert_int_equal(files_in(dir), 1);
	content = slurp(r->sources[0].path);
	assert_string_equal(content, "house.example\nmore.example\n");
	free(content);
	nx_conf_free(r);
	nx_sync_export_free(doc, len);
}

static void refused(struct fx *f, const char *doc, int want, const char *says)
{
	char *before = slurp(f->replica);
	char err[NX_SYNC_ERR_MAX];
	int rc = apply_doc(f, doc, strlen(doc), err, sizeof(err));
	if (rc != want || !strstr(err, says)) {
		fail_msg("%.80s: %d (%s), wanted %d with '%s'", doc, rc, err, want, says);
	}
	char *after = slurp(f->replica);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void apply_refusals(void **state)
{
	struct fx *f = *state;
	refused(f, "{\"format\": 1, \"keys\": ", NX_EMALFORMED, "not JSON");
	refused(f, "[]", NX_EMALFORMED, "format");
	refused(f, "{\"format\": 2, \"keys\": {}}", NX_EMALFORMED, "format 1");
	refused(f, "{\"format\": 1, \"keys\": {}}", NX_EMALFORMED, "lacks filter.");

	/* a whole document with one key the replica's loader refuses, then one path source
	 * without its content, then one with content that is not base64 */
	size_t len;
	char gen[NX_SYNC_GEN_LEN], etag[NX_SYNC_ETAG_MAX];
	char *doc = export_doc(f, &len, gen, etag);
	json_t *j = json_loads(doc, 0, NULL);
	nx_sync_export_free(doc, len);
	json_t *keys = json_object_get(j, "keys"), *files = json_object_get(j, "files");
	json_object_set_new(keys, "filter.block_ttl", json_string("99999999999"));
	char *t = json_dumps(j, 0);
	refused(f, t, NX_ECONFIG, "filter.block_ttl");
	free(t);
	json_object_set_new(keys, "filter.block_ttl", json_string("77"));
	json_object_set_new(keys, "groups", json_string("{kids: {sources: [nope]}}"));
	t = json_dumps(j, 0);
	refused(f, t, NX_ECONFIG, "refused here");
	free(t);
	json_object_set_new(keys, "groups", json_string("{}"));
	json_object_set_new(files, "house", json_string("###"));
	t = json_dumps(j, 0);
	refused(f, t, NX_EMALFORMED, "not base64");
	free(t);
	json_object_del(files, "house");
	t = json_dumps(j, 0);
	refused(f, t, NX_EMALFORMED, "lacks the content of path source 'house'");
	free(t);
	json_object_set_new(keys, "filter.sources",
			    json_string("[{name: \"../evil\", path: /etc/passwd}]"));
	t = json_dumps(j, 0);
	refused(f, t, NX_EMALFORMED, "not a source name");
	free(t);
	json_decref(j);
}

static void export_caps_path_sources(void **state)
{
	struct fx *f = *state;
	FILE *fp = fopen(f->list, "w");
	assert_non_null(fp);
	for (size_t i = 0; i <= NX_SYNC_FILE_MAX / 16; i++) {
		fputs("0123456789.abcd\n", fp);
	}
	fclose(fp);
	struct nx_conf *p = load(f->primary);
	char err[NX_SYNC_ERR_MAX], gen[NX_SYNC_GEN_LEN], etag[NX_SYNC_ETAG_MAX];
	char *doc = NULL;
	size_t len;
	assert_int_equal(nx_sync_export(p, &doc, &len, gen, etag, err, sizeof(err)), NX_ELIMIT);
	assert_non_null(strstr(err, "source 'house'"));
	assert_null(doc);
	unlink(f->list);
	assert_true(nx_sync_export(p, &doc, &len, gen, etag, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot read"));
	nx_conf_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(keys_and_routes),
	    cmocka_unit_test_setup_teardown(export_apply_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(apply_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(export_caps_path_sources, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Config rewrite (conf/rewrite.c): the in-place text edit keeps comments and layout, falls back
 * to re-emitting when the layout defeats it, and the file replacement validates first, keeps a
 * .bak, preserves the mode and changes nothing on a refused value. Real files in a temp dir.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

/* ---- text edits ---- */

/* Apply one change to `in`; the result must equal `want` and keep the layout. */
static void edit_eq(const char *in, const char *key, const char *yaml, const char *want)
{
	struct nx_conf_change ch = {key, yaml};
	char *out = NULL, err[256] = "";
	size_t len = 0;
	bool kept = false;
	int rc = nx_conf_edit_text(in, strlen(in), &ch, 1, &out, &len, &kept, err, sizeof(err));
	if (rc) {
		fail_msg("edit %s failed: %d %s", key, rc, err);
	}
	if (strcmp(out, want)) {
		fail_msg("edit %s = %s of:\n%s\nwant:\n%s\ngot:\n%s", key, yaml, in, want, out);
	}
	assert_int_equal(len, strlen(want));
	assert_true(kept);
	nx_mem_free(NX_OWNER_config, out, len + 1);
	struct nx_conf *c = load_ok(want); /* every expected text is a valid config */
	nx_conf_free(c);
}

static const char commented[] = "# nxdns at home\n"
				"upstream:\n"
				"  # the resolvers\n"
				"  servers: [\"9.9.9.9:53\"]  # quad9\n"
				"  timeout_ms: 2000 # ms\n"
				"\n"
				"# the cache\n"
				"cache:\n"
				"  size: 100\n";

static void replace_scalar_keeps_comments(void **state)
{
	(void)state;
	edit_eq(commented, "upstream.timeout_ms", "1500",
		"# nxdns at home\nupstream:\n  # the resolvers\n"
		"  servers: [\"9.9.9.9:53\"]  # quad9\n  timeout_ms: 1500 # ms\n\n"
		"# the cache\ncache:\n  size: 100\n");
	edit_eq(commented, "upstream.servers", "[\"1.1.1.1:53\", \"8.8.8.8\"]",
		"# nxdns at home\nupstream:\n  # the resolvers\n"
		"  servers: [\"1.1.1.1:53\", \"8.8.8.8\"]  # quad9\n  timeout_ms: 2000 # ms\n\n"
		"# the cache\ncache:\n  size: 100\n");
	/* quoted scalars: the quotes are part of what is replaced */
	edit_eq("filter:\n  block_mode: \"null\" # default\n", "filter.block_mode", "nxdomain",
		"filter:\n  block_mode: nxdomain # default\n");
	edit_eq("log:\n  level: 'info'\n", "log.level", "\"debug\"", "log:\n  level: \"debug\"\n");
	/* a flow list with brackets and quotes in strings, on the key's line */
	edit_eq("filter:\n  deny: ['/a[b]/', \"x]\"] # rules\n  block_ttl: 5\n", "filter.deny",
		"[\"y.example\"]", "filter:\n  deny: [\"y.example\"] # rules\n  block_ttl: 5\n");
}

static void replace_block_values(void **state)
{
	(void)state;
	/* a block list, indented, with comments inside (gone with the old value) */
	edit_eq("upstream:\n  servers:   # the list\n    - 9.9.9.9:53   # q\n\n    - 1.1.1.1\n"
		"  # race comment stays\n  race: 1\n",
		"upstream.servers", "[\"8.8.8.8:53\"]",
		"upstream:\n  servers: [\"8.8.8.8:53\"]   # the list\n"
		"  # race comment stays\n  race: 1\n");
	/* a block list at the key's own indentation */
	edit_eq("upstream:\n  servers:\n  - 9.9.9.9\n  - 1.1.1.1\n  race: 1\n", "upstream.servers",
		"[\"8.8.8.8\"]", "upstream:\n  servers: [\"8.8.8.8\"]\n  race: 1\n");
	/* the last key of the file, no trailing newline */
	edit_eq("access:\n  allow:\n    - 10.0.0.0/8", "access.allow", "[\"192.168.0.0/16\"]",
		"access:\n  allow: [\"192.168.0.0/16\"]");
	/* a null value */
	edit_eq("cache:\n  size:\n  prefetch: true\n", "cache.size", "5",
		"cache:\n  size: 5\n  prefetch: true\n");
}

static void insert_keys(void **state)
{
	(void)state;
	/* missing key in a section: after its last line, before what follows */
	edit_eq("upstream:\n    race: 1   # one\n    # trailing comment of the section\n"
		"# about cache\ncache:\n  size: 5\n",
		"upstream.timeout_ms", "1500",
		"upstream:\n    race: 1   # one\n    timeout_ms: 1500\n"
		"    # trailing comment of the section\n# about cache\ncache:\n  size: 5\n");
	/* missing section: appended at the end */
	edit_eq("upstream:\n  race: 1\n", "cache.size", "5",
		"upstream:\n  race: 1\ncache:\n  size: 5\n");
	edit_eq("upstream:\n  race: 1", "state_dir", "/tmp/x",
		"upstream:\n  race: 1\nstate_dir: /tmp/x\n");
	/* empty file, comments only */
	edit_eq("", "admin.metrics_auth", "true", "admin:\n  metrics_auth: true\n");
	edit_eq("# nothing yet\n", "admin.metrics_auth", "true",
		"# nothing yet\nadmin:\n  metrics_auth: true\n");
	/* a section with everything under it commented out */
	edit_eq("admin:   # the admin listener\n#  listen: 127.0.0.1:8080\nlog:\n  level: info\n",
		"admin.password_hash", "\"$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA\"",
		"admin:   # the admin listener\n"
		"  password_hash: \"$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA\"\n"
		"#  listen: 127.0.0.1:8080\nlog:\n  level: info\n");
	/* lists of maps as values */
	edit_eq("admin:\n  enabled: true\n", "admin.tokens",
		"[{name: ci, hash: \""
		"0123456789abcdef0123456789abcdef"
		"0123456789abcdef0123456789abcdef\", created: 1700000000}]",
		"admin:\n  enabled: true\n  tokens: [{name: ci, hash: \""
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\", "
		"created: 1700000000}]\n");
}

/* Layouts the splice does not handle are re-emitted: same data, comments gone. */
static void fallback_reemits(void **state)
{
	(void)state;
	static const char *const inputs[] = {
	    "upstream: {race: 1}  # flow\n",
	    "upstream: {race: 1, timeout_ms: 3000}\n",
	    "upstream:\n  servers: &s [\n    \"9.9.9.9\"]\n  timeout_ms: 3000\n",
	};
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		struct nx_conf_change ch[] = {{"upstream.timeout_ms", "1500"},
					      {"upstream.servers", "[\"8.8.8.8\"]"}};
		char *out = NULL, err[256] = "";
		size_t len = 0;
		bool kept = true;
		assert_int_equal(nx_conf_edit_text(inputs[i], strlen(inputs[i]), ch, 2, &out, &len,
						   &kept, err, sizeof(err)),
				 0);
		struct nx_conf *c = load_ok(out);
		assert_int_equal(c->timeout_ms, 1500);
		assert_int_equal(c->n_upstreams, 1);
		assert_string_equal(c->upstreams[0].text, "8.8.8.8");
		nx_conf_free(c);
		if (i == 0) {
			assert_false(kept);
			assert_null(strstr(out, "# flow"));
		}
		nx_mem_free(NX_OWNER_config, out, len + 1);
	}
}

static void edit_errors(void **state)
{
	(void)state;
	char *out = (char *)0x1, err[256];
	size_t len;
	bool kept;
	struct nx_conf_change unknown = {"upstream.timeout", "5"};
	assert_int_equal(nx_conf_edit_text("", 0, &unknown, 1, &out, &len, &kept, err, sizeof(err)),
			 NX_ECONFIG);
	assert_null(out);
	assert_string_equal(err, "unknown key 'upstream.timeout'");
	struct nx_conf_change section = {"upstream", "{race: 1}"};
	assert_int_equal(nx_conf_edit_text("", 0, &section, 1, &out, &len, &kept, err, sizeof(err)),
			 NX_ECONFIG);
	static const char *const bad_values[] = {"a: 1\nb: 2", "[1, 2", "1\n---\n2", ""};
	for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
		struct nx_conf_change ch = {"cache.size", bad_values[i]};
		assert_int_equal(
		    nx_conf_edit_text("", 0, &ch, 1, &out, &len, &kept, err, sizeof(err)),
		    NX_ECONFIG);
		assert_null(out);
	}
	/* a file the parser refuses */
	struct nx_conf_change ok = {"cache.size", "5"};
	const char *broken = "cache: [\n";
	assert_int_equal(
	    nx_conf_edit_text(broken, strlen(broken), &ok, 1, &out, &len, &kept, err, sizeof(err)),
	    NX_ECONFIG);
}

/* ---- files ---- */

static char dir[256];

static int mkdir_tmp(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/nx-rewrite-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return ledger_mark(state);
}

static int rm_tmp(void **state)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d))) {
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	}
	if (d) {
		closedir(d);
	}
	rmdir(dir);
	return ledger_check(state);
}

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		return NULL;
	}
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return strdup(buf);
}

static void spit(const char *path, const char *text)
{
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static int count_files(void)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		n += e->d_name[0] != '.';
	}
	closedir(d);
	return n;
}

static void rewrite_file(void **state)
{
	(void)state;
	char path[300], bak[310];
	snprintf(path, sizeof(path), "%s/nxdns.yaml", dir);
	snprintf(bak, sizeof(bak), "%s.bak", path);
	spit(path, commented);
	assert_int_equal(chmod(path, 0640), 0);
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(nx_conf_rewrite(path, "upstream.timeout_ms", "1500", err, sizeof(err)), 0);
	char *now = slurp(path), *old = slurp(bak);
	assert_non_null(strstr(now, "  timeout_ms: 1500 # ms\n"));
	assert_non_null(strstr(now, "# the cache\n"));
	assert_string_equal(old, commented);
	free(now);
	free(old);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(count_files(), 2); /* no temporary file left behind */
	struct nx_conf *c = NULL;
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(c->timeout_ms, 1500);
	nx_conf_free(c);

	/* the same value again: nothing written, the .bak is still the first version */
	spit(bak, "marker\n");
	assert_int_equal(nx_conf_rewrite(path, "upstream.timeout_ms", "1500", err, sizeof(err)), 0);
	old = slurp(bak);
	assert_string_equal(old, "marker\n");
	free(old);
}

static void rewrite_refused_changes_nothing(void **state)
{
	(void)state;
	char path[300], bak[310];
	snprintf(path, sizeof(path), "%s/nxdns.yaml", dir);
	snprintf(bak, sizeof(bak), "%s.bak", path);
	spit(path, commented);
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(nx_conf_rewrite(path, "upstream.timeout_ms", "10", err, sizeof(err)),
			 NX_ECONFIG);
	assert_string_equal(err, "upstream.timeout_ms: 10 is out of range 50..60000");
	/* a quoted number is a string, not a number */
	assert_int_equal(nx_conf_rewrite(path, "cache.size", "\"5\"", err, sizeof(err)),
			 NX_ECONFIG);
	assert_string_equal(err, "cache.size: expected an unsigned integer, got a quoted string");
	char *now = slurp(path);
	assert_string_equal(now, commented);
	free(now);
	assert_int_equal(access(bak, F_OK), -1);
	assert_int_equal(count_files(), 1);

	/* several: the one at fault is named; a combination is nobody's */
	struct nx_conf_change two[] = {{"cache.size", "5"}, {"upstream.race", "0"}};
	size_t bad = 99;
	assert_int_equal(nx_conf_rewrite_many(path, two, 2, &bad, err, sizeof(err)), NX_ECONFIG);
	assert_int_equal(bad, 1);
	assert_string_equal(err, "upstream.race: 0 is out of range 1..16");
	struct nx_conf_change cross[] = {{"cache.min_ttl", "100"}, {"cache.max_ttl", "50"}};
	assert_int_equal(nx_conf_rewrite_many(path, cross, 2, &bad, err, sizeof(err)), NX_ECONFIG);
	assert_int_equal(bad, 2);
	assert_string_equal(err, "cache.min_ttl (100) must not exceed cache.max_ttl (50)");
	struct nx_conf_change unknown[] = {{"cache.size", "5"}, {"cache.sizes", "5"}};
	assert_int_equal(nx_conf_rewrite_many(path, unknown, 2, &bad, err, sizeof(err)),
			 NX_ECONFIG);
	assert_int_equal(bad, 1);
	now = slurp(path);
	assert_string_equal(now, commented);
	free(now);
	assert_int_equal(count_files(), 1);

	/* several that are fine together: one write */
	assert_int_equal(nx_conf_rewrite_many(path, two, 1, &bad, err, sizeof(err)), 0);
	struct nx_conf_change ok[] = {{"cache.min_ttl", "10"}, {"cache.max_ttl", "50"}};
	assert_int_equal(nx_conf_rewrite_many(path, ok, 2, &bad, err, sizeof(err)), 0);
	struct nx_conf *c = NULL;
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(c->cache_size, 5);
	assert_int_equal(c->cache_min_ttl, 10);
	assert_int_equal(c->cache_max_ttl, 50);
	nx_conf_free(c);

	/* valid only together: min_ttl 100 alone exceeds the current max_ttl (50) */
	struct nx_conf_change together[] = {{"cache.min_ttl", "100"}, {"cache.max_ttl", "200"}};
	assert_int_equal(nx_conf_rewrite_many(path, together, 2, &bad, err, sizeof(err)), 0);
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(c->cache_min_ttl, 100);
	assert_int_equal(c->cache_max_ttl, 200);
	nx_conf_free(c);
}

static void rewrite_new_file_and_symlink(void **state)
{
	(void)state;
	char path[300], link_path[300], err[NX_CONF_ERR_MAX];
	snprintf(path, sizeof(path), "%s/new.yaml", dir);
	assert_int_equal(nx_conf_rewrite(path, "admin.metrics_auth", "true", err, sizeof(err)), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	char *now = slurp(path);
	assert_string_equal(now, "admin:\n  metrics_auth: true\n");
	free(now);
	assert_int_equal(count_files(), 1); /* no .bak of a file that did not exist */

	snprintf(link_path, sizeof(link_path), "%s/link.yaml", dir);
	assert_int_equal(symlink("new.yaml", link_path), 0);
	assert_int_equal(nx_conf_rewrite(link_path, "cache.size", "7", err, sizeof(err)), 0);
	assert_int_equal(lstat(link_path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	now = slurp(path);
	assert_string_equal(now, "admin:\n  metrics_auth: true\ncache:\n  size: 7\n");
	free(now);

	/* a directory that does not exist */
	assert_true(
	    nx_conf_rewrite("/nonexistent-nx/dir/x.yaml", "cache.size", "7", err, sizeof(err)) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(replace_scalar_keeps_comments),
	    T(replace_block_values),
	    T(insert_keys),
	    T(fallback_reemits),
	    T(edit_errors),
	    cmocka_unit_test_setup_teardown(rewrite_file, mkdir_tmp, rm_tmp),
	    cmocka_unit_test_setup_teardown(rewrite_refused_changes_nothing, mkdir_tmp, rm_tmp),
	    cmocka_unit_test_setup_teardown(rewrite_new_file_and_symlink, mkdir_tmp, rm_tmp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The replica's side of an export document: check it, put the path sources' content under
 * state_dir/sync/, and write the synced keys into the config file with the rewrite's own
 * check (nx_conf_rewrite_many loads the result as a reload would; a refused result writes
 * nothing). The caller reloads.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libfyaml.h>
#include <sodium.h>

#include "base/err.h"
#include "base/ledger.h"
#include "sync/impl.h"

#define EXPORT_FILE "export.json" /* the download, kept by the prune */

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n <= NX_CONF_NAME_MAX && s[0] != '-' && s[0] != '_' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int sync_dir(const struct nx_conf *c, char *out, size_t cap)
{
	if (snprintf(out, cap, "%s/" NX_SYNC_DIR, c->state_dir) >= (int)cap) {
		return -ENAMETOOLONG;
	}
	if (mkdir(out, 0700) != 0 && errno != EEXIST) {
		return -errno;
	}
	return 0;
}

/* Write data to `path` unless it exists (content-named: same name, same bytes). */
static int write_once(const char *path, const uint8_t *data, size_t len)
{
	if (access(path, F_OK) == 0) {
		return 0;
	}
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		return -ENAMETOOLONG;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		return -errno;
	}
	int rc = 0;
	for (size_t off = 0; off < len && !rc;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			rc = w < 0 ? -errno : -EIO;
		} else {
			off += (size_t)w;
		}
	}
	if (!rc && fsync(fd) != 0) {
		rc = -errno;
	}
	close(fd);
	if (!rc && rename(tmp, path) != 0) {
		rc = -errno;
	}
	if (rc) {
		unlink(tmp);
	}
	return rc;
}

/* One path source: decode its content from files, write it, return the local path. */
static int place_file(const char *dir, const char *name, json_t *files, char *out, size_t cap,
		      char *err, size_t errlen)
{
	json_t *b64 = json_object_get(files, name);
	if (!json_is_string(b64)) {
		snprintf(err, errlen, "the export lacks the content of path source '%s'", name);
		return NX_EMALFORMED;
	}
	size_t blen = json_string_length(b64);
	size_t max = blen / 4 * 3 + 3;
	if (max > (size_t)NX_SYNC_FILE_MAX + 3) {
		snprintf(err, errlen, "path source '%s': content over %u bytes", name,
			 NX_SYNC_FILE_MAX);
		return NX_ELIMIT;
	}
	uint8_t *bin = nx_mem_alloc(NX_OWNER_sync, max + 1);
	if (!bin) {
		return -ENOMEM;
	}
	size_t len = 0;
	int rc = 0;
	if (sodium_base642bin(bin, max + 1, json_string_value(b64), blen, NULL, &len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0) {
		snprintf(err, errlen, "path source '%s': the content is not base64", name);
		rc = NX_EMALFORMED;
		goto out;
	}
	uint8_t h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(h, bin, len);
	char hex[2 * sizeof(h) + 1];
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	if (snprintf(out, cap, "%s/%s-%.16s.list", dir, name, hex) >= (int)cap) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	rc = write_once(out, bin, len);
	if (rc) {
		snprintf(err, errlen, "cannot write %s: %s", out, nx_strerror(rc));
	}
out:
	nx_mem_free(NX_OWNER_sync, bin, max + 1);
	return rc;
}

/*
 * filter.sources as the primary wrote it, with each path source's `path` pointing at its
 * content under state_dir/sync/. *out is malloc'd (free()).
 */
static int local_sources(const struct nx_conf *c, const char *text, json_t *files, char **out,
			 char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int rc = sync_dir(c, dir, sizeof(dir));
	if (rc) {
		snprintf(err, errlen, "cannot create %s/" NX_SYNC_DIR ": %s", c->state_dir,
			 nx_strerror(rc));
		return rc;
	}
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_AUTO};
	struct fy_document *d = fy_document_build_from_string(&pc, text, FY_NT);
	if (!d) {
		snprintf(err, errlen, "filter.sources: not YAML");
		return NX_EMALFORMED;
	}
	struct fy_node *root = fy_document_root(d);
	rc = 0;
	if (root && fy_node_is_sequence(root)) {
		void *it = NULL;
		struct fy_node *item;
		while (!rc && (item = fy_node_sequence_iterate(root, &it))) {
			struct fy_node_pair *pp =
			    fy_node_is_mapping(item)
				? fy_node_mapping_lookup_pair_by_string(item, "path", FY_NT)
				: NULL;
			if (!pp) {
				continue; /* a url source, or something the loader will refuse */
			}
			struct fy_node *nn = fy_node_mapping_lookup_by_string(item, "name", FY_NT);
			size_t nlen = 0;
			const char *ns =
			    nn && fy_node_is_scalar(nn) ? fy_node_get_scalar(nn, &nlen) : NULL;
			char name[NX_CONF_NAME_MAX + 1];
			if (!ns || nlen > NX_CONF_NAME_MAX) {
				snprintf(err, errlen,
					 "filter.sources: a path source without a "
					 "valid name");
				rc = NX_EMALFORMED;
				break;
			}
			memcpy(name, ns, nlen);
			name[nlen] = '\0';
			if (!name_ok(name)) {
				snprintf(err, errlen, "filter.sources: '%s' is not a source name",
					 name);
				rc = NX_EMALFORMED;
				break;
			}
			char local[PATH_MAX];
			rc = place_file(dir, name, files, local, sizeof(local), err, errlen);
			struct fy_node *v = rc ? NULL : fy_node_create_scalar_copy(d, local, FY_NT);
			if (!rc && (!v || fy_node_pair_set_value(pp, v) != 0)) {
				fy_node_free(v);
				rc = -ENOMEM;
			}
		}
	}
	if (!rc) {
		*out = root
			   ? fy_emit_node_to_string(root, FYECF_MODE_FLOW_ONELINE | FYECF_WIDTH_INF)
			   : strdup(text);
		rc = *out ? 0 : -ENOMEM;
	}
	fy_document_destroy(d);
	return rc;
}

int nx_sync_apply(const struct nx_conf *c, const char *doc, size_t len, char *err, size_t errlen)
{
	err[0] = '\0';
	if (!c->path || c->path[0] == '<') {
		snprintf(err, errlen, "this server has no configuration file to write");
		return NX_ECONFIG;
	}
	json_error_t je;
	json_t *j = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		snprintf(err, errlen, "the export is not JSON (line %d: %s)", je.line, je.text);
		return NX_EMALFORMED;
	}
	json_t *keys = json_object_get(j, "keys"), *files = json_object_get(j, "files");
	json_t *format = json_object_get(j, "format");
	int rc = 0;
	if (!json_is_integer(format) || json_integer_value(format) != NX_SYNC_FORMAT ||
	    !json_is_object(keys) || (files && !json_is_object(files))) {
		snprintf(err, errlen,
			 "the export is not a format %d document {format, keys, files}",
			 NX_SYNC_FORMAT);
		json_decref(j);
		return NX_EMALFORMED;
	}
	struct nx_conf_change ch[NX_CONF_MAX_CHANGES];
	size_t n = 0;
	char *sources = NULL;
	for (size_t i = 0; !rc && i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (!nx_sync_key_synced(k.path)) {
			continue;
		}
		json_t *v = json_object_get(keys, k.path);
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			snprintf(err, errlen, "the export lacks %s (or it is not YAML text)",
				 k.path);
			rc = NX_EMALFORMED;
			break;
		}
		if (nx_fails_assert(n < NX_CONF_MAX_CHANGES)) {
			rc = NX_ELIMIT;
			break;
		}
		ch[n].key = k.path;
		ch[n].yaml = json_string_value(v);
		if (!strcmp(k.path, "filter.sources")) {
			rc = local_sources(c, ch[n].yaml, files, &sources, err, errlen);
			ch[n].yaml = sources;
		}
		n++;
	}
	if (!rc) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s", c->path);
		size_t bad = n;
		char why[NX_CONF_ERR_MAX];
		rc = nx_conf_rewrite_many(path, ch, n, &bad, why, sizeof(why));
		if (rc) {
			snprintf(err, errlen, "the primary's %s is refused here: %s",
				 bad < n ? ch[bad].key : "configuration", why);
		}
	}
	free(sources);
	json_decref(j);
	return rc;
}

/* Is `path` the file `name` directly in `dir`? */
static bool in_dir(const char *path, const char *dir, const char *name)
{
	size_t n = strlen(dir);
	return path && !strncmp(path, dir, n) && path[n] == '/' && !strcmp(path + n + 1, name);
}

void nx_sync_prune(const struct nx_conf *c)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s/" NX_SYNC_DIR, c->state_dir) >= (int)sizeof(dir)) {
		return;
	}
	DIR *dh = opendir(dir);
	if (!dh) {
		return;
	}
	/* sources' paths are resolved at load: compare against the resolved directory too */
	char real[PATH_MAX];
	if (!realpath(dir, real)) {
		snprintf(real, sizeof(real), "%s", dir);
	}
	struct dirent *e;
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.' || !strncmp(e->d_name, EXPORT_FILE, strlen(EXPORT_FILE))) {
			continue;
		}
		bool used = false;
		for (size_t i = 0; !used && i < c->n_sources; i++) {
			used = in_dir(c->sources[i].path, dir, e->d_name) ||
			       in_dir(c->sources[i].path, real, e->d_name);
		}
		if (!used) {
			char full[PATH_MAX];
			if (snprintf(full, sizeof(full), "%s/%s", dir, e->d_name) <
			    (int)sizeof(full)) {
				unlink(full);
			}
		}
	}
	closedir(dh);
}

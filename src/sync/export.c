/*
 * The primary's export document (GET /api/sync/export): the synced keys as its file writes
 * them, and the content of its `path` sources. Built on request from the file, so the
 * document is exactly what a reload of that file gives.
 */
#include <errno.h>
#include <fcntl.h>
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

/* The value of dotted `key` in the document, or NULL when the file does not set it. */
static struct fy_node *node_at(struct fy_document *d, const char *key)
{
	char path[160] = "/";
	size_t n = 1;
	for (const char *p = key; *p && n + 1 < sizeof(path); p++) {
		path[n++] = *p == '.' ? '/' : *p;
	}
	path[n] = '\0';
	struct fy_node *root = fy_document_root(d);
	return root ? fy_node_by_path(root, path, FY_NT, FYNWF_DONT_FOLLOW) : NULL;
}

/* The whole file `path` into a ledger buffer of *len + 1 bytes (NUL-terminated). */
int nx_sync_read_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return NX_ELIMIT;
	}
	size_t cap = (size_t)st.st_size + 1;
	char *buf = nx_mem_alloc(NX_OWNER_sync, cap);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < cap - 1) {
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			break;
		}
		got += (size_t)r;
	}
	close(fd);
	if (got != cap - 1) {
		/* a file that shrank meanwhile: keep the charge equal to the allocation */
		char *b2 = nx_mem_realloc(NX_OWNER_sync, buf, cap, got + 1);
		if (!b2) {
			nx_mem_free(NX_OWNER_sync, buf, cap);
			return -ENOMEM;
		}
		buf = b2;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

/* base64 of a ledger buffer as a JSON string (NULL on no memory). */
static json_t *b64_json(const char *data, size_t len)
{
	size_t cap = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
	char *b = nx_mem_alloc(NX_OWNER_sync, cap);
	if (!b) {
		return NULL;
	}
	sodium_bin2base64(b, cap, (const unsigned char *)data, len, sodium_base64_VARIANT_ORIGINAL);
	json_t *s = json_stringn(b, cap - 1);
	nx_mem_free(NX_OWNER_sync, b, cap);
	return s;
}

static int add_keys(struct fy_document *d, json_t *keys, char *err, size_t errlen)
{
	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (!nx_sync_key_synced(k.path)) {
			continue;
		}
		struct fy_node *n = node_at(d, k.path);
		char *text =
		    n ? fy_emit_node_to_string(n, FYECF_MODE_FLOW_ONELINE | FYECF_WIDTH_INF) : NULL;
		if (n && !text) {
			snprintf(err, errlen, "%s: cannot be written as one line", k.path);
			return -ENOMEM;
		}
		/* an unset key travels as its default: the replica must drop its own value too */
		int rc = json_object_set_new(keys, k.path, json_string(text ? text : k.def));
		free(text);
		if (rc) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

static int add_files(const struct nx_conf *c, json_t *files, char *err, size_t errlen)
{
	for (size_t i = 0; i < c->n_sources; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		if (!s->path) {
			continue;
		}
		char *data;
		size_t len;
		int rc = nx_sync_read_file(s->path, NX_SYNC_FILE_MAX, &data, &len);
		if (rc == NX_ELIMIT) {
			snprintf(err, errlen,
				 "source '%s': %s is larger than the %u bytes a path source may "
				 "carry to replicas (make it a url source)",
				 s->name, s->path, NX_SYNC_FILE_MAX);
			return rc;
		}
		if (rc) {
			snprintf(err, errlen, "source '%s': cannot read %s: %s", s->name, s->path,
				 nx_strerror(rc));
			return rc;
		}
		json_t *v = b64_json(data, len);
		nx_mem_free(NX_OWNER_sync, data, len + 1);
		if (!v || json_object_set_new(files, s->name, v)) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

void nx_sync_etag_of(const char *doc, size_t len, char gen[NX_SYNC_GEN_LEN],
		     char etag[NX_SYNC_ETAG_MAX])
{
	uint8_t h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(h, (const unsigned char *)doc, len);
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(gen, NX_SYNC_GEN_LEN, "%.16s", hex);
	snprintf(etag, NX_SYNC_ETAG_MAX, "\"%s\"", hex);
}

int nx_sync_export(const struct nx_conf *c, char **out, size_t *len, char gen[NX_SYNC_GEN_LEN],
		   char etag[NX_SYNC_ETAG_MAX], char *err, size_t errlen)
{
	err[0] = '\0';
	if (!c->path || c->path[0] == '<') {
		snprintf(err, errlen, "this server has no configuration file to export");
		return NX_ECONFIG;
	}
	/* The keys come from the file, so the path sources' files do too: the file loaded on its
	 * own, with the loader's resolution of their paths (an edit not reloaded yet is
	 * exported whole, or refused whole when it does not load). */
	struct nx_conf *fc = NULL;
	char why[NX_CONF_ERR_MAX];
	int lrc = nx_conf_load(c->path, &fc, why, sizeof(why));
	if (lrc) {
		snprintf(err, errlen, "the configuration file does not load: %s", why);
		return lrc;
	}
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET | FYPCF_DEFAULT_VERSION_AUTO};
	struct fy_document *d = fy_document_build_from_file(&pc, c->path);
	if (!d || fy_document_resolve(d) != 0) {
		fy_document_destroy(d);
		nx_conf_free(fc);
		snprintf(err, errlen, "%s: cannot be parsed again", c->path);
		return NX_ECONFIG;
	}
	json_t *keys = json_object(), *files = json_object();
	json_t *doc =
	    json_pack("{s:i, s:o, s:o}", "format", NX_SYNC_FORMAT, "keys", keys, "files", files);
	int rc = doc ? add_keys(d, keys, err, errlen) : -ENOMEM;
	fy_document_destroy(d);
	if (!rc) {
		rc = add_files(fc, files, err, errlen);
	}
	nx_conf_free(fc);
	char *text = NULL;
	if (!rc) {
		text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
		rc = text ? 0 : -ENOMEM;
	}
	json_decref(doc);
	if (rc) {
		if (!err[0]) {
			snprintf(err, errlen, "%s", nx_strerror(rc));
		}
		return rc;
	}
	*len = strlen(text);
	if (*len > NX_SYNC_EXPORT_MAX) {
		free(text);
		snprintf(err, errlen, "the export would be %zu bytes, over the %u a replica takes",
			 *len, NX_SYNC_EXPORT_MAX);
		return NX_ELIMIT;
	}
	nx_ledger_charge(NX_OWNER_sync, (int64_t)*len + 1, 1); /* jansson's malloc */
	nx_sync_etag_of(text, *len, gen, etag);
	*out = text;
	return 0;
}

void nx_sync_export_free(char *doc, size_t len)
{
	if (doc) {
		nx_ledger_charge(NX_OWNER_sync, -((int64_t)len + 1), -1);
		free(doc);
	}
}

/*
 * Value types of the admin.* keys: the password hash, optional file paths (TLS certificate and
 * key) and the API token list. Nothing here hashes or verifies: conf sits below libsodium's
 * users; it only checks the stored forms (the hash's algorithm prefix, a token's hex digest).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"

#define PWHASH_MAX 127 /* crypto_pwhash_STRBYTES - 1: the longest string libsodium writes */
#define LABEL_MAX 160  /* bytes of a value label: "admin.tokens[31].created" */

/* ---- admin.password_hash: "" (none yet) or an argon2 string from crypto_pwhash_str ---- */

static int pwhash_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key)
{
	char buf[PWHASH_MAX + 2];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "a password hash", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	if (!buf[0]) {
		return 0;
	}
	/* Both variants crypto_pwhash_str_verify() accepts; new hashes are always argon2id. */
	if (strncmp(buf, "$argon2id$", 10) && strncmp(buf, "$argon2i$", 9)) {
		return nx_conf_fail(ld, val, key,
				    "%s: not an argon2 hash (set it with `nxdns passwd --config "
				    "FILE`)",
				    k->path);
	}
	char **f = NX_CONF_FIELD(ld->c, k, char *);
	*f = nx_mem_strdup(NX_OWNER_config, buf);
	return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
}

static void str_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	char **f = NX_CONF_FIELD(c, k, char *);
	if (*f) {
		nx_mem_free(NX_OWNER_config, *f, strlen(*f) + 1);
		*f = NULL;
	}
}

const struct nx_conf_type nx_conf_t_pwhash = {
    .name = "password hash (argon2id string)",
    .parse = pwhash_parse,
    .release = str_release,
};

/* ---- optional path: "" = not set; relative paths resolve against the config's directory ---- */

static int opt_path_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			  struct fy_node *key)
{
	char buf[PATH_MAX];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "a file path", false, buf, sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	char full[PATH_MAX];
	if (buf[0] == '/') {
		strcpy(full, buf);
	} else {
		const char *base = ld->base_dir ? ld->base_dir : ".";
		bool root = !strcmp(base, "/");
		if (strlen(base) + !root + strlen(buf) + 1 > sizeof(full)) {
			return nx_conf_fail(ld, val, key, "%s: path longer than %d bytes", k->path,
					    PATH_MAX - 1);
		}
		nx_conf_label(full, sizeof(full), "%s%s%s", base, root ? "" : "/", buf);
	}
	char **f = NX_CONF_FIELD(ld->c, k, char *);
	*f = nx_mem_strdup(NX_OWNER_config, full);
	return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
}

const struct nx_conf_type nx_conf_t_opt_path = {
    .name = "file path (optional)",
    .parse = opt_path_parse,
    .release = str_release,
};

/* ---- admin.tokens: [{name, hash, created, scope?}] ---- */

/* T_SCOPE is optional (tokens written before scopes existed are admin tokens): it stays last,
 * after the required fields. */
enum { T_NAME, T_HASH, T_CREATED, T_SCOPE, T__COUNT };
static const char *const token_fields[] = {"name", "hash", "created", "scope", NULL};

static int hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	return -1;
}

static int token_one(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
		     struct fy_node *key, void *all_, size_t i)
{
	struct nx_conf_token *all = all_;
	struct nx_conf_token *t = &all[i];
	struct fy_node *v[T__COUNT], *kn[T__COUNT];
	if (nx_conf_is_null(item) || !fy_node_is_mapping(item)) {
		return nx_conf_fail(ld, item, key,
				    "%s: expected a mapping {name, hash, created}, "
				    "got %s",
				    label, nx_conf_node_kind(item));
	}
	int rc = nx_conf_fields(ld, label, item, key, token_fields, v, kn);
	if (rc) {
		return rc;
	}
	for (int f = 0; f < T_SCOPE; f++) {
		if (!v[f]) {
			return nx_conf_fail(ld, item, key, "%s: missing '%s'", label,
					    token_fields[f]);
		}
	}
	char fl[LABEL_MAX];
	char name[NX_CONF_NAME_MAX + 2];
	nx_conf_label(fl, sizeof(fl), "%s.name", label);
	rc = nx_conf_scalar(ld, fl, v[T_NAME], kn[T_NAME], "a name", false, name, sizeof(name));
	if (rc) {
		return rc;
	}
	if (!nx_conf_ident_ok(name)) {
		return nx_conf_fail(ld, v[T_NAME], kn[T_NAME],
				    "%s: '%s' is not a valid name (1..%d of a-z, 0-9, '_', '-', "
				    "starting with a letter or digit)",
				    fl, name, NX_CONF_NAME_MAX);
	}
	for (size_t j = 0; j < i; j++) {
		if (!strcmp(all[j].name, name)) {
			return nx_conf_fail(ld, v[T_NAME], kn[T_NAME],
					    "%s: duplicate token '%s' (same as admin.tokens[%zu])",
					    fl, name, j);
		}
	}
	t->name = nx_mem_strdup(NX_OWNER_config, name);
	if (!t->name) {
		return nx_conf_fail(ld, v[T_NAME], kn[T_NAME], "%s: out of memory", fl);
	}
	char hex[2 * NX_CONF_TOKEN_HASH_BYTES + 2];
	nx_conf_label(fl, sizeof(fl), "%s.hash", label);
	rc = nx_conf_scalar(ld, fl, v[T_HASH], kn[T_HASH], "a SHA-256 hex digest", false, hex,
			    sizeof(hex));
	if (rc) {
		return rc;
	}
	if (strlen(hex) != 2 * NX_CONF_TOKEN_HASH_BYTES) {
		return nx_conf_fail(ld, v[T_HASH], kn[T_HASH],
				    "%s: expected %d lower-case hex digits (SHA-256)", fl,
				    2 * NX_CONF_TOKEN_HASH_BYTES);
	}
	for (size_t b = 0; b < NX_CONF_TOKEN_HASH_BYTES; b++) {
		int hi = hexval(hex[2 * b]), lo = hexval(hex[2 * b + 1]);
		if (hi < 0 || lo < 0) {
			return nx_conf_fail(ld, v[T_HASH], kn[T_HASH],
					    "%s: expected %d lower-case hex digits (SHA-256)", fl,
					    2 * NX_CONF_TOKEN_HASH_BYTES);
		}
		t->hash[b] = (uint8_t)(hi << 4 | lo);
	}
	nx_conf_label(fl, sizeof(fl), "%s.created", label);
	rc = nx_conf_uint_node(ld, fl, v[T_CREATED], kn[T_CREATED], 0, UINT_MAX, &t->created);
	if (rc || !v[T_SCOPE]) {
		return rc;
	}
	char scope[16];
	nx_conf_label(fl, sizeof(fl), "%s.scope", label);
	rc = nx_conf_scalar(ld, fl, v[T_SCOPE], kn[T_SCOPE], "admin or read", false, scope,
			    sizeof(scope));
	if (rc) {
		return rc;
	}
	if (strcmp(scope, "admin") && strcmp(scope, "read")) {
		return nx_conf_fail(ld, v[T_SCOPE], kn[T_SCOPE],
				    "%s: '%s' is not a scope (admin: every route; read: GET "
				    "routes only, for a replica's sync.token)",
				    fl, scope);
	}
	t->read_only = !strcmp(scope, "read");
	return 0;
}

static int tokens_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key)
{
	size_t cnt;
	return nx_conf_parse_items(ld, k, val, key, sizeof(struct nx_conf_token), token_one, &cnt);
}

static void tokens_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_conf_token **f = NX_CONF_FIELD(c, k, struct nx_conf_token *);
	size_t *n = NX_CONF_COUNT(c, k);
	for (size_t i = 0; *f && i < *n; i++) {
		char *s = (*f)[i].name;
		if (s) {
			nx_mem_free(NX_OWNER_config, s, strlen(s) + 1);
		}
	}
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void tokens_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld entries", k->min, k->max);
}

const struct nx_conf_type nx_conf_t_tokens = {
    .name = "list of API tokens",
    .parse = tokens_parse,
    .release = tokens_release,
    .range = tokens_range,
};

/* ---- admin.totp_secret: "" (not enrolled), "off" (removed on purpose) or base32 ---------- */

#define TOTP_B32_MIN 26	 /* characters: 128 bits, RFC 4226's minimum secret length */
#define TOTP_B32_MAX 104 /* characters: 64 bytes, the HMAC-SHA-1 block */

static int totp_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		      struct fy_node *key)
{
	char buf[TOTP_B32_MAX + 2];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "a base32 secret", false, buf, sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	if (!strcmp(buf, "off")) {
		ld->c->admin_totp_off = true;
		return 0;
	}
	size_t n = strlen(buf);
	if (n < TOTP_B32_MIN || n > TOTP_B32_MAX ||
	    strspn(buf, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != n) {
		return nx_conf_fail(ld, val, key,
				    "%s: not a TOTP secret (%d..%d base32 characters A-Z, 2-7; "
				    "enrol through POST /api/auth/totp rather than by hand)",
				    k->path, TOTP_B32_MIN, TOTP_B32_MAX);
	}
	char **f = NX_CONF_FIELD(ld->c, k, char *);
	*f = nx_mem_strdup(NX_OWNER_config, buf);
	return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
}

const struct nx_conf_type nx_conf_t_totp = {
    .name = "TOTP secret (base32)",
    .parse = totp_parse,
    .release = str_release,
};

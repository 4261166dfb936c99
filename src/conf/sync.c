/*
 * Value types of the sync.* keys (a replica that follows a primary, src/sync/README.md): the
 * primary's URL, the API token the replica presents and the optional pin of the primary's
 * key. Only the stored forms are checked here; the pull itself is src/sync/.
 */
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"

#define SYNC_TEXT_MAX 1024 /* bytes of a URL or token as written: a URL is far shorter */

/* An optional string ("" or absent = not set) stored as an owned char *. */
static int opt_text(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		    struct fy_node *key, const char *what, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (nx_conf_is_null(val)) {
		return 0;
	}
	return nx_conf_scalar(ld, k->path, val, key, what, false, buf, cap);
}

static int store(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		 struct fy_node *key, const char *buf)
{
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

/* ---- sync.primary: "" or https://host[:port][/] -------------------------------------------- */

static int primary_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			 struct fy_node *key)
{
	char buf[SYNC_TEXT_MAX];
	int rc = opt_text(ld, k, val, key, "an https:// URL", buf, sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	/* HTTPS only: the replica sends a token and takes its whole filtering policy from the
	 * answer, so neither may cross the network in clear or from an unchecked peer. */
	if (strncmp(buf, "https://", 8) || !buf[8] || buf[8] == '/' || strpbrk(buf, " \t?#")) {
		return nx_conf_fail(ld, val, key,
				    "%s: '%s' is not an https:// URL of the primary's admin "
				    "listener (https://host:port, no query or fragment)",
				    k->path, buf);
	}
	size_t n = strlen(buf);
	while (n > 8 && buf[n - 1] == '/') {
		buf[--n] = '\0'; /* the API paths are appended to it */
	}
	return store(ld, k, val, key, buf);
}

const struct nx_conf_type nx_conf_t_sync_primary = {
    .name = "https:// URL (optional)",
    .parse = primary_parse,
    .release = str_release,
};

/* ---- sync.token: "" or an API token of the primary ------------------------------------------ */

static int token_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		       struct fy_node *key)
{
	char buf[SYNC_TEXT_MAX];
	int rc = opt_text(ld, k, val, key, "an API token", buf, sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	/* it goes into an HTTP header line: printable ASCII only */
	for (const char *p = buf; *p; p++) {
		if (*p <= ' ' || *p > '~') {
			return nx_conf_fail(
			    ld, val, key, "%s: a token is printable ASCII without spaces", k->path);
		}
	}
	return store(ld, k, val, key, buf);
}

const struct nx_conf_type nx_conf_t_sync_token = {
    .name = "API token (optional)",
    .parse = token_parse,
    .release = str_release,
};

/* ---- sync.pin: "" or the base64 SHA-256 of the primary's SubjectPublicKeyInfo --------------- */

static int pin_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		     struct fy_node *key)
{
	char buf[128];
	int rc = opt_text(ld, k, val, key, "a base64 SHA-256 pin", buf, sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	uint8_t pin[NX_CONF_PIN_BYTES];
	char why[160];
	if (nx_conf_pin_parse(buf, pin, why, sizeof(why))) {
		return nx_conf_fail(ld, val, key, "%s: bad pin: %s", k->path, why);
	}
	return store(ld, k, val, key, buf); /* kept as text: libcurl takes "sha256//<base64>" */
}

const struct nx_conf_type nx_conf_t_sync_pin = {
    .name = "base64 SHA-256 pin (optional)",
    .parse = pin_parse,
    .release = str_release,
};

/*
 * Value type of logging.postgresql.dsn: "" (no sink) or a libpq connection string
 * (`key=value ...`) or URI (`postgresql://...`). Only its shape is checked here: libpq parses it
 * when the sink connects (src/pgsink/), and its errors are logged there.
 */
#include <string.h>

#include "base/ledger.h"
#include "conf/impl.h"

#define DSN_MAX 1024 /* bytes of a connection string: a long one is a few hundred */

static int dsn_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		     struct fy_node *key)
{
	char buf[DSN_MAX + 1];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "a libpq connection string", false, buf,
				sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	bool uri = !strncmp(buf, "postgresql://", 13) || !strncmp(buf, "postgres://", 11);
	if (!uri && !strchr(buf, '=')) {
		return nx_conf_fail(ld, val, key,
				    "%s: '%s' is not a libpq connection string "
				    "(host=... dbname=... user=..., or postgresql://user@host/db)",
				    k->path, buf);
	}
	char **f = NX_CONF_FIELD(ld->c, k, char *);
	*f = nx_mem_strdup(NX_OWNER_config, buf);
	return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
}

static void dsn_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	char **f = NX_CONF_FIELD(c, k, char *);
	if (*f) {
		nx_mem_free(NX_OWNER_config, *f, strlen(*f) + 1);
		*f = NULL;
	}
}

const struct nx_conf_type nx_conf_t_pg_dsn = {
    .name = "libpq connection string (optional)",
    .parse = dsn_parse,
    .release = dsn_release,
};

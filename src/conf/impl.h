/*
 * conf internals shared by schema.c, types.c, load.c and docs.c. Never included from outside
 * src/conf/.
 *
 * The schema is a table of keys (struct nx_conf_key); each key names a value type (struct
 * nx_conf_type: parse a YAML node into a field of struct nx_conf, release it, describe its range
 * for the docs). The loader (load.c) walks the YAML mappings against the dotted paths of the
 * table and knows nothing about individual keys: adding a key is a table row, adding a kind of
 * value is a type. A key's default is YAML flow text parsed by the same type, so the default
 * shown in the docs is the default applied.
 *
 * Threading: loading is single-threaded; the table is static const data.
 */
#pragma once

#include <libfyaml.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "conf/conf.h"

#define NX_CONF_FILE_MAX (4u << 20) /* bytes of nxdns.yaml; a hand-edited file is far smaller */
#define NX_CONF_SCALAR_MAX 4096     /* bytes of one scalar value (PATH_MAX) */
#define NX_CONF_MAX_KEYS 256        /* schema rows; the loader keeps a "seen" flag per row */

struct nx_conf_key;

/* Loader state for one load; types report errors through nx_conf_fail(). */
struct nx_conf_ld {
	const char *name;      /* borrowed: file name used in messages */
	char *err;             /* borrowed: caller's buffer */
	size_t errlen;
	struct fy_diag *diag;  /* collects libfyaml errors; also used to find node positions */
	struct nx_conf *c;     /* the config being built */
	bool *seen;            /* per key: set from the file (else the default applies) */
};

struct nx_conf_type {
	const char *name; /* for the docs */
	/*
	 * Parse `val` into the key's field of ld->c. `key` is the mapping key node (positions for
	 * null values, which have none). The field is zero on entry. Returns 0 or NX_ECONFIG (via
	 * nx_conf_fail); on error anything stored in the field must be releasable by `release`.
	 */
	int (*parse)(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		     struct fy_node *key);
	/* Free what parse stored (also after a failed parse); NULL when nothing is owned. */
	void (*release)(const struct nx_conf_key *k, struct nx_conf *c);
	/* Range text for the docs ("" when none). */
	void (*range)(const struct nx_conf_key *k, char *buf, size_t cap);
};

struct nx_conf_key {
	const char *path;                 /* dotted: "listener.workers" */
	const struct nx_conf_type *type;
	size_t off;                       /* offsetof(struct nx_conf, field) */
	size_t off_n;                     /* offsetof the element count for arrays */
	long long min, max;               /* uint: value range; lists: entry count range */
	int default_port;                 /* addr types: port when omitted, -1 = required */
	const char *const *choices;       /* enum: NULL-terminated */
	const char *def;                  /* default as YAML flow text */
	const char *example;              /* for the docs example; NULL = the default */
	const char *doc;                  /* one paragraph of Markdown */
};

extern const struct nx_conf_key nx_conf_keys[];
extern const size_t nx_conf_n_keys;

/* Value types (types.c). */
extern const struct nx_conf_type nx_conf_t_bool;
extern const struct nx_conf_type nx_conf_t_uint;
extern const struct nx_conf_type nx_conf_t_string;
extern const struct nx_conf_type nx_conf_t_enum;
extern const struct nx_conf_type nx_conf_t_addr;
extern const struct nx_conf_type nx_conf_t_addr_list;
extern const struct nx_conf_type nx_conf_t_cidr_list;
extern const struct nx_conf_type nx_conf_t_zone_map;

/* Cross-key checks and derived values after every key has a value (schema.c). */
int nx_conf_schema_finish(struct nx_conf_ld *ld);

/*
 * Format "name:line:col: message" at node n (or at `fallback` when n has no position, e.g. a
 * null value) into ld->err, unless an error is already there. Returns NX_ECONFIG.
 */
int nx_conf_fail(struct nx_conf_ld *ld, struct fy_node *n, struct fy_node *fallback,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* 1-based position of a node; false when it has none. */
bool nx_conf_node_pos(struct nx_conf_ld *ld, struct fy_node *n, int *line, int *col);

/* Scalar helpers (types.c). */
bool nx_conf_is_null(struct fy_node *n);
/* What kind of node this is, for "expected X, got Y" messages. */
const char *nx_conf_node_kind(struct fy_node *n);

/* addr.c: as nx_addr_parse / nx_cidr_parse with the reason for a refusal. */
int nx_addr_parse_why(const char *s, int default_port, struct nx_addr *out, const char **why);
int nx_cidr_parse_why(const char *s, struct nx_cidr *out, const char **why);

/* Field access. */
#define NX_CONF_FIELD(c, k, type) ((type *)((char *)(c) + (k)->off))
#define NX_CONF_COUNT(c, k) ((size_t *)((char *)(c) + (k)->off_n))

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
#include <stdint.h>

#include "conf/conf.h"

#define NX_CONF_FILE_MAX (4u << 20) /* bytes of nxdns.yaml; a hand-edited file is far smaller */
#define NX_CONF_SCALAR_MAX 4096     /* bytes of one scalar value (PATH_MAX) */
#define NX_CONF_MAX_KEYS 256        /* schema rows; the loader keeps a "seen" flag per row */

#define NX_CONF_MAX_REFS 65536 /* name references (group <-> source, client -> group) per load */

struct nx_conf_key;

/* A 1-based position in the file; line 0 = none (a default). */
struct nx_conf_pos {
	int line, col;
};

enum nx_conf_ref_kind {
	NX_CONF_REF_GROUP_SOURCE, /* groups.<from>.sources[j] names a source */
	NX_CONF_REF_SOURCE_GROUP, /* filter.sources[from].groups[j] names a group */
	NX_CONF_REF_CLIENT_GROUP, /* clients[from].groups[j] names a group */
	NX_CONF_REF_ALLOW_GROUP,  /* filter.allow[from].groups[j] names a group */
	NX_CONF_REF_DENY_GROUP,   /* filter.deny[from].groups[j] names a group */
};

/*
 * A name that refers to a source or group, recorded while parsing and resolved after every key
 * has a value (the referenced key may come later in the file, or from its default).
 */
struct nx_conf_ref {
	char name[NX_CONF_NAME_MAX + 1];
	struct nx_conf_pos pos;
	uint8_t kind;   /* enum nx_conf_ref_kind */
	uint32_t from;  /* index of the group, source or client that refers */
	uint32_t j;     /* index of the name in its list */
	uint32_t target; /* resolved index (after nx_conf_groups_finish) */
};

/* Loader state for one load; types report errors through nx_conf_fail(). */
struct nx_conf_ld {
	const char *name;      /* borrowed: file name used in messages */
	const char *base_dir;  /* borrowed: relative paths in values resolve against it */
	char *err;             /* borrowed: caller's buffer */
	size_t errlen;
	struct fy_diag *diag;  /* collects libfyaml errors; also used to find node positions */
	struct nx_conf *c;     /* the config being built */
	bool *seen;            /* per key: set from the file (else the default applies) */
	struct nx_conf_pos *pos; /* per key: position of its value when seen */
	bool in_default;       /* parsing a key's built-in default: its nodes are not in the file */
	struct nx_conf_ref *refs; /* owned (NX_OWNER_config) until the load ends */
	size_t n_refs, cap_refs;
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
	uint8_t apply;                    /* enum nx_conf_apply: how a change takes effect,
					   * from how the daemon uses the field */
	bool editable;                    /* PUT /api/settings may change it (the lists,
					   * groups, clients and admin.* have routes of their own
					   * or stay in the file) */
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
extern const struct nx_conf_type nx_conf_t_duration;    /* seconds into unsigned */
extern const struct nx_conf_type nx_conf_t_sources;     /* filter.c */
extern const struct nx_conf_type nx_conf_t_rules;       /* filter.c */
extern const struct nx_conf_type nx_conf_t_block_addrs; /* filter.c: writes block_v4/v6 */
extern const struct nx_conf_type nx_conf_t_groups;      /* groups.c */
extern const struct nx_conf_type nx_conf_t_clients;     /* groups.c */
extern const struct nx_conf_type nx_conf_t_locals;      /* local.c */
extern const struct nx_conf_type nx_conf_t_upstreams;   /* upstream.c */
extern const struct nx_conf_type nx_conf_t_opt_host;    /* "" or a host name, lower-cased */
extern const struct nx_conf_type nx_conf_t_domains;     /* guard.c: names, each with its subtree */
extern const struct nx_conf_type nx_conf_t_opt_account; /* "" or a user/group name (types.c) */
extern const struct nx_conf_type nx_conf_t_opt_addr;    /* "" or addr:port (len 0 = none) */

/*
 * A key that no longer exists, with where its setting went: the loader names the new keys at
 * the old key's position instead of "unknown key", and the docs list them.
 */
struct nx_conf_moved {
	const char *path; /* dotted old key */
	const char *hint; /* what to write instead, one sentence */
};
extern const struct nx_conf_moved nx_conf_moved_keys[];
extern const size_t nx_conf_n_moved_keys;

/* ---- upstream.c ---- */

/*
 * One upstream as written ("9.9.9.9:53", "tls://dns.quad9.net#dns.quad9.net", ...) into a
 * zeroed *u (strings charged to NX_OWNER_config; free with nx_conf_upstreams_free, also after
 * a failure). 0, or NX_ECONFIG with the reason in why.
 */
int nx_conf_upstream_parse(const char *s, struct nx_conf_upstream *u, char *why, size_t cap);
/* A base64 SHA-256 SPKI pin (44 characters) into out. 0, or NX_ECONFIG with the reason. */
int nx_conf_pin_parse(const char *s, uint8_t out[NX_CONF_PIN_BYTES], char *why, size_t cap);
/*
 * A list of upstreams (strings or {url, name, pin_sha256, address} mappings), min..max
 * entries, into a new owned array (*out, *n set before the entries, so a failed parse is
 * released by nx_conf_upstreams_free). Duplicates are refused.
 */
int nx_conf_upstream_seq(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			 struct fy_node *key, long long min, long long max,
			 struct nx_conf_upstream **out, size_t *n);
/* Free n upstreams and their array; NULL is a no-op. */
void nx_conf_upstreams_free(struct nx_conf_upstream *u, size_t n);
/* Every host-named upstream must be resolvable: an address, bootstrap or plain servers. */
int nx_conf_upstream_finish(struct nx_conf_ld *ld);

/* Cross-key checks and derived values after every key has a value (schema.c). */
int nx_conf_schema_finish(struct nx_conf_ld *ld);
/* Resolve refs into group and client masks; block mode id (groups.c). */
int nx_conf_groups_finish(struct nx_conf_ld *ld);
/* Record a reference for nx_conf_groups_finish; node gives the position (NULL: none). */
int nx_conf_add_ref(struct nx_conf_ld *ld, enum nx_conf_ref_kind kind, uint32_t from, uint32_t j,
		    const char *name, struct fy_node *node);
/*
 * A list of group names (NULL val = absent: {"default"}) into an owned string array, one ref per
 * name (filter.c). *out / *n are set before the names so release frees a partial list.
 */
int nx_conf_group_names(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			struct fy_node *key, enum nx_conf_ref_kind kind, uint32_t from, char ***out,
			size_t *n);
/* Schema row of a dotted path (nx_require: it exists). */
const struct nx_conf_key *nx_conf_key_by_path(const char *path, size_t *idx);

/*
 * Format "name:line:col: message" at node n (or at `fallback` when n has no position, e.g. a
 * null value) into ld->err, unless an error is already there. Returns NX_ECONFIG.
 */
int nx_conf_fail(struct nx_conf_ld *ld, struct fy_node *n, struct fy_node *fallback,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* As nx_conf_fail at a recorded position (line 0: no position). */
int nx_conf_fail_pos(struct nx_conf_ld *ld, struct nx_conf_pos pos, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* 1-based position of a node; false when it has none. */
bool nx_conf_node_pos(struct nx_conf_ld *ld, struct fy_node *n, int *line, int *col);

/* Scalar helpers (types.c). */
bool nx_conf_is_null(struct fy_node *n);
/* What kind of node this is, for "expected X, got Y" messages. */
const char *nx_conf_node_kind(struct fy_node *n);
/*
 * Copy a scalar's text into buf (NUL-terminated); `what` names the expected value in messages,
 * `plain_only` refuses quoted scalars. `label` names the value ("filter.sources[0].url").
 */
int nx_conf_scalar(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		   struct fy_node *key, const char *what, bool plain_only, char *buf, size_t cap);
int nx_conf_bool_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		      struct fy_node *key, bool *out);
int nx_conf_uint_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		      struct fy_node *key, long long min, long long max, unsigned *out);
/* A non-empty string owned by NX_OWNER_config into *out. */
int nx_conf_string_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			struct fy_node *key, char **out);
/* Entry count of a list in [min, max]; null counts as an empty list when null_empty. */
int nx_conf_list_count(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		       struct fy_node *key, long long min, long long max, bool null_empty,
		       size_t *n);

/* Fills element i of `all` from one list item; `label` is "<path>[i]". 0 or an error. */
typedef int (*nx_conf_item_cb)(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
			       struct fy_node *key, void *all, size_t i);
/*
 * A list of mappings (k->min..k->max items, null = empty) into a new zeroed array of `size`-byte
 * elements stored in k's field and count (NX_OWNER_config; the key's release frees it), each
 * item filled by `one`. *n gets the item count. 0 or the first error.
 */
int nx_conf_parse_items(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key, size_t size, nx_conf_item_cb one, size_t *n);
/*
 * The named fields of a mapping (an item of a list of maps, a group): vals[i] / keys[i] for
 * names[i] (NULL-terminated; NULL when absent). Unknown and duplicate keys are errors named
 * "label.key". A null map has no fields.
 */
int nx_conf_fields(struct nx_conf_ld *ld, const char *label, struct fy_node *map,
		   struct fy_node *fallback, const char *const *names, struct fy_node **vals,
		   struct fy_node **keys);
/* Format a value label ("filter.sources[3].url") into out; truncates silently. */
void nx_conf_label(char *out, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* [a-z0-9][a-z0-9_-]{0,63}: source and group names. */
bool nx_conf_ident_ok(const char *s);
/*
 * A host name as written in rules and records: ASCII letters, digits, '-', '_' and dots, no
 * empty label, RFC 1035 lengths; one trailing dot allowed. Writes the lower-cased wire form
 * and returns its length, or 0 with *why set.
 */
size_t nx_conf_host_name(const char *text, uint8_t wire[NX_DNS_NAME_MAX], const char **why);
/* Free an owned array of n owned strings; NULL is a no-op. */
void nx_conf_free_strv(char **v, size_t n);

/* load.c: duplicate keys of a mapping (prefix names them); edit distance for suggestions. */
int nx_conf_check_dups(struct nx_conf_ld *ld, const char *prefix, struct fy_node *map);
size_t nx_conf_edit_distance(const char *a, const char *b);

/* addr.c: as nx_addr_parse / nx_cidr_parse with the reason for a refusal. */
int nx_addr_parse_why(const char *s, int default_port, struct nx_addr *out, const char **why);
int nx_cidr_parse_why(const char *s, struct nx_cidr *out, const char **why);
/* Client address as (family, bytes); IPv4-mapped IPv6 becomes IPv4. False for other families. */
bool nx_conf_client_bytes(const struct sockaddr *sa, int *family, const uint8_t **bytes);
bool nx_conf_prefix_match(const struct nx_cidr *c, int family, const uint8_t *a);

/* Field access. */
#define NX_CONF_FIELD(c, k, type) ((type *)((char *)(c) + (k)->off))
#define NX_CONF_COUNT(c, k) ((size_t *)((char *)(c) + (k)->off_n))

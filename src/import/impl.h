/*
 * import/ internals: the model the readers fill (model.c turns it into YAML and checks each
 * item with the loader), its arena, and the small TOML reader for pihole.toml (toml.c).
 * Not included from outside src/import/.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "import/import.h"

/* Arena chunks (NX_OWNER_import): a whole import is a few KiB to a few MiB of strings. */
#define NX_IMPORT_CHUNK (64 * 1024)

/* A string in a list (arena). */
struct nx_import_str {
	struct nx_import_str *next; /* in arena */
	char s[];
};

/* An append-only list of strings. */
struct nx_import_strv {
	struct nx_import_str *head;  /* in arena */
	struct nx_import_str **tail; /* &last->next, or &head (set by nx_import_strv_push) */
	size_t n;
};

struct nx_import_source {
	struct nx_import_source *next;
	const char *name; /* in arena */
	const char *url;  /* in arena; NULL when path is set */
	const char *path; /* in arena; NULL when url is set */
	bool enabled;
	struct nx_import_strv groups; /* nxdns group names; empty: the loader's default */
};

/* A user rule (filter.allow / filter.deny), in the order read. */
struct nx_import_rule {
	struct nx_import_rule *next;
	bool allow;
	const char *rule;	      /* in arena */
	struct nx_import_strv groups; /* the groups whose clients it is for; empty: every client */
};

struct nx_import_group {
	struct nx_import_group *next;
	const char *name; /* in arena; never "default" (it always exists) */
	bool filtering;
};

struct nx_import_client {
	struct nx_import_client *next;
	const char *name;	      /* in arena */
	struct nx_import_strv ids;    /* addresses, prefixes, id:<client-id> */
	struct nx_import_strv groups; /* empty: default */
};

struct nx_import_record {
	struct nx_import_record *next;
	const char *name, *type, *value; /* in arena */
	unsigned ttl;			 /* seconds; 0: the loader's default (not written) */
};

struct nx_import_zone {
	struct nx_import_zone *next;
	const char *zone;	       /* in arena */
	struct nx_import_strv servers; /* nxdns server strings */
};

struct nx_import_line {
	struct nx_import_line *next;
	enum nx_import_verdict v;
	char text[];
};

struct nx_import_chunk {
	struct nx_import_chunk *next;
	size_t used, cap;
	_Alignas(max_align_t) unsigned char data[];
};

struct nx_import {
	const char *what;   /* "Pi-hole Teleporter", "AdGuard Home" (static) */
	const char *origin; /* in arena: the file read */
	struct nx_import_strv upstreams;
	struct nx_import_strv bootstrap; /* plain servers resolving the upstreams' host names */
	struct nx_import_zone *zones, **zones_tail;
	struct nx_import_source *sources, **sources_tail;
	struct nx_import_strv allow, deny; /* the rules' texts (duplicates are refused) */
	struct nx_import_rule *rules, **rules_tail;
	struct nx_import_group *groups, **groups_tail;
	struct nx_import_client *clients, **clients_tail;
	struct nx_import_record *records, **records_tail;
	const char *block_mode;		   /* in arena or static; NULL: not set */
	struct nx_import_strv block_addrs; /* with block_mode custom */
	bool filter_disabled;		   /* the original had filtering switched off */
	struct nx_import_line *lines, **lines_tail;
	bool oom; /* sticky: an arena allocation failed; the import fails with -ENOMEM */
	struct nx_import_chunk *chunks; /* owned */
};

struct nx_import *nx_import_new(const char *what, const char *origin);
void *nx_import_alloc(struct nx_import *imp, size_t n);
const char *nx_import_strdup(struct nx_import *imp, const char *s);
const char *nx_import_strndup(struct nx_import *imp, const char *s, size_t n);
void nx_import_strv_push(struct nx_import *imp, struct nx_import_strv *v, const char *s);
bool nx_import_strv_has(const struct nx_import_strv *v, const char *s);

/* A report line; printf-style. */
void nx_import_report(struct nx_import *imp, enum nx_import_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Add an item after checking it with the loader alone (with the groups imported so far, which
 * sources and clients may name). On refusal the item is left out and a "not imported" line
 * carries `what` and the loader's message; `what` describes the item in the original's terms.
 * true when it was added.
 */
bool nx_import_add_rule(struct nx_import *imp, bool allow, const char *rule, const char *what);
/* The same for the clients of some groups only (`groups` copied; NULL or empty: every client). */
bool nx_import_add_rule_for(struct nx_import *imp, bool allow, const char *rule,
			    const struct nx_import_strv *groups, const char *what);
bool nx_import_add_bootstrap(struct nx_import *imp, const char *server, const char *what);
bool nx_import_add_upstream(struct nx_import *imp, const char *server, const char *what);
bool nx_import_add_zone_server(struct nx_import *imp, const char *zone, const char *server,
			       const char *what);
bool nx_import_add_source(struct nx_import *imp, struct nx_import_source *s, const char *what);
bool nx_import_add_client(struct nx_import *imp, struct nx_import_client *c, const char *what);
bool nx_import_add_record(struct nx_import *imp, const char *name, const char *type,
			  const char *value, unsigned ttl, const char *what);
/* Groups are added without a check (their names are made valid by nx_import_name). */
void nx_import_add_group(struct nx_import *imp, const char *name, bool filtering);
bool nx_import_has_group(const struct nx_import *imp, const char *name);

/* A valid nxdns name (sources, groups: [a-z0-9_-], 1..64, not starting with _ or -) made
 * from free text, unique among `taken` (suffix -2, -3...). In arena. */
const char *nx_import_name(struct nx_import *imp, const char *text, const char *fallback,
			   bool (*taken)(const struct nx_import *, const char *));
bool nx_import_source_taken(const struct nx_import *imp, const char *name);
bool nx_import_client_taken(const struct nx_import *imp, const char *name);

/* ---- the TOML subset Pi-hole writes (toml.c) ---- */

/*
 * pihole.toml is written by FTL's own writer (src/config/toml_writer.c): [table] headers,
 * `key = value` with basic strings, integers, floats, booleans and arrays (one element per
 * line), comments. The reader keeps every key with its full dotted path; arrays keep their
 * elements' text. Multi-line strings and inline tables are refused (FTL writes neither).
 */
struct nx_toml_val {
	struct nx_toml_val *next; /* in arena */
	const char *key;	  /* full path, "dns.blocking.mode" (arena) */
	bool is_array;
	const char *scalar;	     /* a string's content, or a number's/boolean's text */
	struct nx_import_strv elems; /* is_array: each element as scalar would be */
	unsigned line;
};

/* Parse `text` (len bytes); values into *out (in imp's arena). 0, or NX_ECORRUPT with
 * "line N: why" in err. */
int nx_toml_parse(struct nx_import *imp, const char *text, size_t len, struct nx_toml_val **out,
		  char *err, size_t errlen);
const struct nx_toml_val *nx_toml_get(const struct nx_toml_val *vals, const char *key);

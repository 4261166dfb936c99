/*
 * Configuration: the parsed, validated nxdns.yaml.
 *
 * The schema table (conf/schema.c) is the single source of every key's type, range, default and
 * documentation; docs/configuration.md is generated from it (`nxdns config-docs`) and a test
 * checks the two agree. A `struct nx_conf` is immutable once loaded: a reload builds a new one
 * and swaps it by generation. All memory is charged to NX_OWNER_config and released by
 * nx_conf_free(). Loading is single-threaded (control thread) and never touches the network.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "dns/wire.h"

#define NX_CONF_MAX_WORKERS 8     /* default = online cores capped here; more buys nothing on a Pi */
#define NX_CONF_MAX_UPSTREAMS 16  /* per server list; racing more than a few is pointless */
#define NX_CONF_ERR_MAX 512       /* bytes of the formatted "file:line:col: message" */

/* addr:port, IPv6 as [addr]:port. */
struct nx_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char text[64]; /* as written in the config, for logs and metric labels */
};

struct nx_cidr {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network bytes (first 4 for IPv4), host bits cleared */
	uint8_t prefix;   /* prefix length */
};

struct nx_fwd_zone {
	uint8_t name[NX_DNS_NAME_MAX]; /* lower-cased wire name */
	uint8_t name_len;
	char *text;                    /* owned: as written */
	struct nx_addr *servers;       /* owned array */
	size_t n_servers;
};

struct nx_conf {
	char *path; /* owned: file it came from, or "<built-in>" */

	/* listener.* */
	struct nx_addr *listen_dns; /* owned array */
	size_t n_listen_dns;
	unsigned workers;             /* resolved: never 0 after load */
	unsigned dns_max_connections; /* per listener address */
	unsigned tcp_idle_timeout_ms;
	unsigned tcp_read_timeout_ms;

	/* upstream.* */
	struct nx_addr *upstreams; /* owned array */
	size_t n_upstreams;
	unsigned race;
	unsigned timeout_ms;
	unsigned stagger_ms;
	struct nx_fwd_zone *zones; /* owned array, sorted by label count descending */
	size_t n_zones;

	/* query_budget.* */
	unsigned permits;
	unsigned coalesce_max_waiters;

	/* access.* */
	struct nx_cidr *allow; /* owned; when n_allow == 0 the built-in private ranges apply */
	size_t n_allow;
	struct nx_cidr *deny; /* owned; checked before allow */
	size_t n_deny;

	/* admin.* */
	bool admin_enabled;
	struct nx_addr admin_listen;

	/* top level */
	char *state_dir; /* owned */
	char *log_level; /* owned: error|warn|info|debug */
};

/*
 * Load and validate `path`. On error returns NX_ECONFIG (or -errno when the file cannot be read)
 * and writes "file:line:col: message" into err (NUL-terminated, truncated to errlen).
 * On success *out is a new config owned by the caller (nx_conf_free).
 */
int nx_conf_load(const char *path, struct nx_conf **out, char *err, size_t errlen);

/* Same, from a string; `name` is used in error messages in place of the file name. */
int nx_conf_load_string(const char *name, const char *yaml, size_t len, struct nx_conf **out,
			char *err, size_t errlen);

/* Release; NULL is a no-op. */
void nx_conf_free(struct nx_conf *c);

/* Is the client address allowed (deny first, then allow or the built-in private ranges)? */
bool nx_conf_acl_allows(const struct nx_conf *c, const struct sockaddr *sa);

/* Parse "addr:port" / "[v6]:port" (and bare addr with default_port when >= 0). 0 or NX_ECONFIG. */
int nx_addr_parse(const char *s, int default_port, struct nx_addr *out);
/* Parse "addr/prefix" or a bare address (host route). 0 or NX_ECONFIG. */
int nx_cidr_parse(const char *s, struct nx_cidr *out);
bool nx_cidr_contains(const struct nx_cidr *c, const struct sockaddr *sa);

/* Write docs/configuration.md content generated from the schema to fp. */
void nx_conf_write_docs(FILE *fp);
/* Write the complete example nxdns.yaml (every key; the docs embed it) to fp. */
void nx_conf_write_example(FILE *fp);

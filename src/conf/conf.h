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
/* Attempts one query runs at once (upstream.race is clamped to it): the forwarder's
 * NX_UP_MAX_ATTEMPTS is defined from this, so the docs and the engine cannot drift. */
#define NX_CONF_RACE_CONCURRENT_MAX 8
#define NX_CONF_ERR_MAX 512       /* bytes of the formatted "file:line:col: message" */
#define NX_CONF_MAX_SOURCES 64    /* filter.sources: the matcher's eligibility mask is a uint64_t */
#define NX_CONF_MAX_GROUPS 64     /* incl. "default": the filter's group mask is a uint64_t */
#define NX_CONF_NAME_MAX 64       /* bytes of a source, group or client name */
#define NX_CONF_MAX_TOKENS 32     /* admin.tokens: one per script or dashboard; each check is linear */
#define NX_CONF_TOKEN_HASH_BYTES 32 /* SHA-256 of an API token */
#define NX_CONF_PIN_BYTES 32      /* an RFC 7469 pin: SHA-256 of the SubjectPublicKeyInfo */
#define NX_CONF_MAX_PINS 8        /* pins per upstream: the current key, its backups, a rollover */
#define NX_CONF_UP_TEXT_MAX 128   /* bytes of an upstream as written, NUL included */
#define NX_CONF_CLIENT_ID_MAX 64  /* bytes of a client id (AdGuard Home's ClientID limit) */
/* Entries of the rate-limit table (guard/ratelimit.c): a household has tens of clients and an
 * office hundreds; Blocky caps its buckets at 16384. 8-way sets, 24 bytes each: 96 KiB. */
#define NX_CONF_RATE_LIMIT_SLOTS 4096
#define NX_CONF_TAG_MAX 32        /* bytes of a client tag (AdGuard Home's longest: 21) */

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

/* How an upstream is spoken to. */
enum nx_conf_up_kind {
	NX_CONF_UP_PLAIN = 0, /* `addr:port`: UDP, TCP after a truncated answer */
	NX_CONF_UP_TCP = 1,   /* `tcp://addr[:port]`: TCP only (RFC 7766) */
	NX_CONF_UP_DOT = 2,   /* `tls://host[:port][#name]`: DNS over TLS (RFC 7858) */
	NX_CONF_UP_DOH = 3,   /* `https://host[:port]/path[#name]`: DNS over HTTPS (RFC 8484) */
};

/*
 * One upstream server of upstream.servers or a forward zone. A host written as an IP address
 * is resolved at load; a host name is resolved later, through upstream.bootstrap
 * (nx_up_bootstrap_resolve), unless the mapping form gave `address`.
 */
struct nx_conf_upstream {
	enum nx_conf_up_kind kind;
	struct nx_addr addr;   /* address:port to connect to; valid when `resolved` */
	bool resolved;         /* false only for a host name not resolved yet */
	uint16_t port;         /* port to connect to (host order), also before resolution */
	char *host;            /* owned: lower-cased host name when the host is a name, else NULL */
	char *auth_name;       /* owned: name the server's certificate must match and the SNI sent
				* (`#name`, the mapping's `name`, else the host name), or NULL:
				* the certificate is checked against the address. DoT/DoH only. */
	char *path;            /* owned: DoH request path ("/dns-query"), NULL for other kinds */
	uint8_t (*pins)[NX_CONF_PIN_BYTES]; /* owned array: SPKI SHA-256 pins (RFC 7469); with
					     * any, the server's key must match one */
	size_t n_pins;
	char text[NX_CONF_UP_TEXT_MAX]; /* as written (the url of a mapping), for logs and labels */
	unsigned line, col;    /* position in the file (0 for a default), for later errors */
};

struct nx_fwd_zone {
	uint8_t name[NX_DNS_NAME_MAX]; /* lower-cased wire name */
	uint8_t name_len;
	char *text;                    /* owned: as written */
	struct nx_conf_upstream *servers; /* owned array */
	size_t n_servers;
};

/* filter.sources[i]: one blocklist. Exactly one of url and path is set. */
struct nx_conf_source {
	char *name;     /* owned: [a-z0-9][a-z0-9_-]{0,63}, unique */
	char *url;      /* owned: http:// or https:// URL, or NULL */
	char *path;     /* owned: absolute local path (resolved at load), or NULL */
	char *format;   /* owned: auto|hosts|domains|adblock|wildcard */
	char **groups;  /* owned array of owned names, as written (default: {"default"}) */
	size_t n_groups;
	bool enabled;   /* false: not fetched, not built, in no group's mask */
	/* hosts lines with a non-null address: true answers with it ("listed"), false blocks
	 * ("null"). Default: listed for a path source, null for a url source (a third-party
	 * list must not redirect a name to its own address unless the person opts in). */
	bool hosts_listed;
	bool hosts_answers_set; /* hosts_answers was written (kept by config rewrites) */
	bool subdomains;        /* plain entries mean the name and every name under it */
};

/* filter.allow[i] / filter.deny[i] written `{rule: x, groups: [g, ...]}`: the rule applies only
 * to the clients of those groups (Pi-hole's per-group domain lists). */
struct nx_conf_rule_scope {
	char **groups;  /* owned array of owned group names, as written; NULL: every client */
	size_t n_groups;
	uint64_t mask;  /* bit g = groups[g] of the config; 0 = every client */
};

/* groups.<name>, resolved at load. groups[0] is always "default". */
struct nx_conf_group {
	char *name;            /* owned */
	uint64_t sources_mask; /* bit i = filter.sources[i] (enabled sources only) */
	bool filtering;        /* false: this group's clients are never filtered */
};

/*
 * clients[i]: identified by address and/or by client id; its groups resolved into one source
 * mask at load.
 */
struct nx_conf_client {
	char *name;                   /* owned: as written, unique */
	struct nx_cidr *ids;          /* owned array: addresses / prefixes that identify it */
	size_t n_ids;
	char **client_ids;            /* owned array of owned `id:` names ([a-z0-9-]{1,64}), unique
				       * across all clients */
	size_t n_client_ids;
	uint64_t groups_mask_sources; /* OR of its groups' sources_mask */
	bool filtering;               /* any of its groups filters */
	char **groups;                /* owned array of owned group names (default: {"default"}) */
	size_t n_groups;
	uint64_t groups_mask;         /* bit g = groups[g] of the config is one of its groups */
	char **tags;                  /* owned array of owned tags ($ctag), NULL when none */
	size_t n_tags;
};

/* local_records[i], rdata pre-encoded. c->locals is sorted by (name, type): see local_find. */
struct nx_conf_local {
	uint8_t name[NX_DNS_NAME_MAX]; /* lower-cased wire name */
	uint8_t name_len;
	char *text;                    /* owned: the name as written (logs, API) */
	uint16_t type;                 /* NX_DNS type code: A, AAAA, CNAME, TXT or PTR */
	uint32_t ttl;                  /* seconds */
	uint8_t *rdata;                /* owned: wire rdata (A 4 bytes, AAAA 16, CNAME/PTR an
					* uncompressed wire name, TXT character-strings) */
	uint16_t rdlen;
};

/* admin.tokens[i]: an API token, stored hashed (the secret is shown once, at creation). */
struct nx_conf_token {
	char *name;                                  /* owned: [a-z0-9][a-z0-9_-]{0,63}, unique */
	uint8_t hash[NX_CONF_TOKEN_HASH_BYTES];      /* SHA-256 of the token text */
	unsigned created;                            /* Unix seconds, as written */
	bool read_only;                              /* scope: read (GET/HEAD routes only) */
};

enum nx_conf_block_mode {
	NX_CONF_BLOCK_NULL = 0,     /* 0.0.0.0 / :: for A / AAAA, NODATA otherwise */
	NX_CONF_BLOCK_NXDOMAIN = 1,
	NX_CONF_BLOCK_REFUSED = 2,
	NX_CONF_BLOCK_CUSTOM = 3,   /* filter.block_addresses */
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
	struct nx_addr *listen_dot; /* owned array; empty: no DNS-over-TLS listener */
	size_t n_listen_dot;
	struct nx_addr *listen_doh; /* owned array; empty: no DNS-over-HTTPS listener */
	size_t n_listen_doh;
	unsigned tls_handshake_timeout_ms;
	unsigned doh_max_streams;   /* concurrent HTTP/2 streams per DoH connection */
	unsigned permit_wait_ms;    /* a stream query may pause its connection this long for a
				     * permit before the connection is closed */

	/* tls.*: the server certificate of DoT, DoH and the admin's HTTPS */
	char *tls_cert;        /* owned: absolute PEM path, or NULL (a generated self-signed one) */
	char *tls_key;         /* owned: absolute PEM path; set exactly when tls_cert is */
	char *tls_server_name; /* owned: lower-cased host name without the trailing dot, or NULL */

	/* upstream.* */
	struct nx_conf_upstream *upstreams; /* owned array */
	size_t n_upstreams;
	unsigned race;
	unsigned timeout_ms;
	unsigned stagger_ms;
	struct nx_fwd_zone *zones; /* owned array, sorted by label count descending */
	size_t n_zones;
	struct nx_addr *bootstrap; /* owned array; empty: the plain servers of upstream.servers */
	size_t n_bootstrap;

	/* query_budget.* */
	unsigned permits;
	unsigned coalesce_max_waiters;

	/* access.* */
	struct nx_cidr *allow; /* owned; when n_allow == 0 the built-in private ranges apply */
	size_t n_allow;
	struct nx_cidr *deny; /* owned; checked before allow */
	size_t n_deny;
	bool admit_client_ids; /* a known client id admits a query that allow would refuse (deny
				* still applies); enforced by the pipeline */
	unsigned rl_qps;         /* access.rate_limit.qps: per client prefix; 0 = off */
	unsigned rl_burst;       /* access.rate_limit.burst: queries at once from idle */
	unsigned rl_ipv4_prefix; /* access.rate_limit.ipv4_prefix: clients grouped per prefix */
	unsigned rl_ipv6_prefix; /* access.rate_limit.ipv6_prefix */
	struct nx_cidr *rl_exempt; /* owned: access.rate_limit_exempt, never limited */
	size_t n_rl_exempt;

	/* filter.* */
	bool filter_enabled;
	struct nx_conf_source *sources; /* owned array, config order (index = mask bit) */
	size_t n_sources;
	unsigned refresh_interval_s;
	unsigned first_boot_timeout_s; /* 0: never wait for a download before DNS answers */
	char **allow_rules; /* owned array of owned normalised rules: "name", "*.name", "/re/" */
	size_t n_allow_rules;
	char **deny_rules;  /* same */
	size_t n_deny_rules;
	struct nx_conf_rule_scope *allow_scopes; /* owned array parallel to allow_rules, or NULL
						  * when no allow rule is limited to groups */
	struct nx_conf_rule_scope *deny_scopes;  /* same for deny_rules */
	char *block_mode;   /* owned: null|nxdomain|refused|custom */
	int block_mode_id;  /* enum nx_conf_block_mode */
	bool has_block_v4;  /* filter.block_addresses: at most one of each family */
	uint8_t block_v4[4];
	bool has_block_v6;
	uint8_t block_v6[16];
	unsigned block_ttl;
	bool rebinding_protection; /* strip private addresses from upstream answers */
	char **rebinding_allow;    /* owned array of owned lower-case names (no trailing dot) that
				    * may resolve privately, with their subdomains */
	size_t n_rebinding_allow;

	/* groups, clients, local_records */
	struct nx_conf_group *groups; /* owned array; [0] is "default", then file order */
	size_t n_groups;              /* >= 1 after load */
	struct nx_conf_client *clients; /* owned array, file order */
	size_t n_clients;
	struct nx_conf_local *locals; /* owned array sorted by (name, type), file order within */
	size_t n_locals;

	/* cache.* */
	unsigned cache_size; /* entries; 0 disables the cache */
	unsigned cache_min_ttl;
	unsigned cache_max_ttl;
	unsigned cache_neg_max_ttl;
	bool cache_serve_stale;
	bool cache_prefetch;

	/* admin.* */
	bool admin_enabled;
	struct nx_addr admin_listen;
	char *admin_password_hash;  /* owned: crypto_pwhash_str() text, or NULL (none set yet) */
	unsigned admin_session_ttl_s;
	bool admin_metrics_auth;    /* /metrics and /healthz need a token or session */
	bool admin_tls;             /* HTTPS with tls.cert/tls.key (or the generated certificate) */
	struct nx_conf_token *admin_tokens; /* owned array, file order */
	size_t n_admin_tokens;

	/* logging.* */
	bool logging_query_log;
	unsigned logging_query_log_buffer_max; /* records in the workers -> writer queue */
	unsigned logging_retention_days;       /* 0: never pruned */
	unsigned logging_commit_interval;      /* seconds records wait for their commit; 0: at once */
	unsigned logging_privacy;              /* 0 all, 1 no names, 2 no names/clients, 3 none */
	unsigned logging_live_max_subscribers; /* 0: live stream off */
	/* logging.postgresql.* (the PostgreSQL sink, src/pgsink/; off without a dsn) */
	char *logging_pg_dsn;           /* owned: libpq connection string or URI, or NULL */
	char *logging_pg_hostname;      /* owned: the hostname column, or NULL (the host name) */
	unsigned logging_pg_batch_size; /* records per COPY */
	unsigned logging_pg_flush_ms;   /* longest a record waits before the writer runs */
	unsigned logging_pg_queue_size; /* records between the workers and the writer */
	unsigned logging_pg_retention_days; /* day partitions kept; 0 = all */

	/* top level */
	char *state_dir; /* owned */
	char *log_level; /* owned: error|warn|info|debug */

	/* admin.totp_secret: the TOTP second factor (RFC 6238), base32 as written */
	char *admin_totp_secret; /* owned, or NULL: not enrolled ("" or "off") */
	bool admin_totp_off;	 /* written "off": removed on purpose (a reload may drop it) */
	/* run_as.* (daemon/privdrop.c) */
	char *run_as_user;  /* owned: "" = `nxdns` when that user exists */
	char *run_as_group; /* owned: "" = the user's primary group */

	/* sync.*: following a primary (src/sync/) */
	char *sync_primary;	  /* owned: https://host[:port] without a trailing '/', or NULL */
	char *sync_token;	  /* owned: the primary's API token, or NULL */
	unsigned sync_interval_s; /* seconds between pulls */
	char *sync_pin;		  /* owned: base64 SHA-256 of the primary's SPKI, or NULL */

	/* special.*: special-use names answered or kept from upstream (policy/special.c) */
	bool special_localhost;	     /* localhost, *.localhost -> 127.0.0.1 / ::1 */
	bool special_domain_needed;  /* local, invalid, home.arpa, single-label: never upstream */
	bool special_bogus_priv;     /* private reverse zones: never upstream */
	bool special_firefox_canary; /* use-application-dns.net -> NXDOMAIN */
	bool special_android_probes; /* *-dnsotls-ds.metric.gstatic.com never blocked */
	bool special_block_private_relay; /* mask.icloud.com, mask-h2.icloud.com -> NXDOMAIN */
	bool special_ddr;		  /* _dns.resolver.arpa SVCB: our DoT / DoH listeners */

	/* dnstap.* (export of every answer to a Frame Streams collector) */
	char *dnstap_socket;        /* owned: Unix socket path, or NULL */
	struct nx_addr dnstap_tcp;  /* dnstap.address; len 0 = none */
	unsigned dnstap_queue_bytes; /* all workers' rings together */
	char *dnstap_identity;      /* owned: Dnstap.identity, or NULL (the host name) */
	bool dnstap_forwarder;      /* also FORWARDER_QUERY / FORWARDER_RESPONSE frames */
};

/*
 * Load and validate `path`. On error returns NX_ECONFIG (or -errno when the file cannot be read)
 * and writes "file:line:col: message" into err (NUL-terminated, truncated to errlen).
 * A file without settings (zero bytes, whitespace or comments only, a null document) is
 * NX_ECONFIG: a truncated file must not become the defaults; `{}` asks for them.
 * On success *out is a new config owned by the caller (nx_conf_free).
 */
int nx_conf_load(const char *path, struct nx_conf **out, char *err, size_t errlen);

/* Same, from a string; `name` is used in error messages in place of the file name. An empty
 * string is the defaults here (tests, and the rewrite's check of a candidate text). */
int nx_conf_load_string(const char *name, const char *yaml, size_t len, struct nx_conf **out,
			char *err, size_t errlen);

/* Release; NULL is a no-op. */
void nx_conf_free(struct nx_conf *c);

/* The groups mask (bit g = groups[g]) that filter.allow[i] (list 0) or filter.deny[i] (list 1) is
 * limited to; 0 = every client. */
uint64_t nx_conf_rule_groups(const struct nx_conf *c, int list, size_t i);

/* Does a filter.allow / filter.deny rule need the side structure (AdGuard modifiers, a
 * regex, ||x^, @@) rather than the plain name / *.name table of filter/rules.h?
 * The loader checks such a rule with filter/side.h's parser; the policy compiles it there. */
bool nx_conf_rule_needs_side(const char *rule);

/* Is the client address allowed (deny first, then allow or the built-in private ranges)? */
bool nx_conf_acl_allows(const struct nx_conf *c, const struct sockaddr *sa);
/* Is the address in access.deny (or not an IPv4/IPv6 address at all)? */
bool nx_conf_acl_denied(const struct nx_conf *c, const struct sockaddr *sa);

/*
 * Filtering policy of the client at `sa` (IPv4-mapped IPv6 is matched as IPv4): the client
 * whose ids contain the address with the longest prefix (ids are unique, so no ties) gives
 * the OR of its groups' source masks and whether any of its groups filters; an address no
 * client claims gets the "default" group's. *client_idx is the client's index or -1. Any out
 * pointer may be NULL. Does not look at filter.enabled (the global switch is the caller's).
 * Per query: no allocation, a linear scan of every client id.
 */
void nx_conf_client_policy(const struct nx_conf *c, const struct sockaddr *sa, uint64_t *eligible,
			   bool *filtering, int *client_idx);

/*
 * As nx_conf_client_policy, with the client id a DoH path (`/dns-query/<id>`) or a DoT SNI
 * (`<id>.<tls.server_name>`) carried: a client that lists `id:<client_id>` wins over the
 * address; an unknown id, NULL or "" falls back to the address. The id only picks the policy:
 * it never widens access (the ACL still applies unless access.admit_client_ids). Per query: no
 * allocation, a linear scan of the client ids.
 */
void nx_conf_client_policy_id(const struct nx_conf *c, const struct sockaddr *sa,
			      const char *client_id, uint64_t *eligible, bool *filtering,
			      int *client_idx);
/* Index of the client that lists `id:<id>`, or -1 (NULL, "" and unknown ids). No allocation. */
int nx_conf_client_by_id(const struct nx_conf *c, const char *id);
/* Is `id` a well-formed client id: 1..NX_CONF_CLIENT_ID_MAX of [a-z0-9-]? */
bool nx_conf_client_id_ok(const char *id);

/*
 * Local records of the wire name (any case, len bytes) and type qtype; qtype 255 (ANY) means
 * every type. Returns 0 with c->locals[*first .. *first + *count) (count >= 1), or NX_ENOTFOUND
 * with *count = 0. No allocation.
 */
int nx_conf_local_find(const struct nx_conf *c, const uint8_t *name, size_t len, uint16_t qtype,
		       size_t *first, size_t *count);
/* Does the name have local records of any type (NODATA rather than forwarding)? */
bool nx_conf_local_has_name(const struct nx_conf *c, const uint8_t *name, size_t len);

/* Parse "addr:port" / "[v6]:port" (and bare addr with default_port when >= 0). 0 or NX_ECONFIG. */
int nx_addr_parse(const char *s, int default_port, struct nx_addr *out);
/* Parse "addr/prefix" or a bare address (host route). 0 or NX_ECONFIG (also for host bits set
 * past the prefix: "10.0.0.1/8" is refused, not widened to 10.0.0.0/8). */
int nx_cidr_parse(const char *s, struct nx_cidr *out);
bool nx_cidr_contains(const struct nx_cidr *c, const struct sockaddr *sa);
/* The family and address bytes of a client (IPv4-mapped IPv6 as IPv4: 4 bytes); false for a
 * socket address that is neither family. Pointers into sa. (Also in conf/impl.h.) */
bool nx_conf_client_bytes(const struct sockaddr *sa, int *family, const uint8_t **bytes);
/* Is the address (nx_conf_client_bytes' form) inside the prefix? */
bool nx_conf_prefix_match(const struct nx_cidr *c, int family, const uint8_t *a);

/* Write docs/configuration.md content generated from the schema to fp. */
void nx_conf_write_docs(FILE *fp);
/* Write the complete example nxdns.yaml (every key; the docs embed it) to fp. */
void nx_conf_write_example(FILE *fp);

/* ---- rewriting the file (conf/rewrite.c): the API's and `nxdns passwd`'s edits ------------ */

#define NX_CONF_MAX_CHANGES 64 /* keys changed in one rewrite: a settings form, not a migration */

/* One edit: set the schema key `key` to `yaml`, a one-line YAML value (flow style; JSON text is
 * fine: "1500", "\"nxdomain\"", "[\"9.9.9.9:53\"]"). Both borrowed for the call. */
struct nx_conf_change {
	const char *key;  /* dotted schema key, "upstream.timeout_ms"; sections are not keys */
	const char *yaml;
};

/*
 * Set the keys in the YAML file `path` and replace it atomically:
 *   read the file (a missing file is an empty config; a symlink's target is replaced), apply the
 *   changes in order (missing mappings are created), load the result with nx_conf_load_string
 *   (a refused result changes nothing), keep the current file as `<path>.bak`, write a temporary
 *   file in the same directory, fsync, rename it over the file, fsync the directory.
 * Comments and layout are kept byte for byte outside the changed values, except when the file's
 * layout defeats the in-place edit: the file is then re-emitted by libfyaml without its comments
 * (logged as a warning; the .bak still has them). File mode and owner are kept; a new file is
 * 0600 (it may hold the password hash). No change in the text: nothing is written.
 * Returns 0; NX_ECONFIG when the key is not a schema key, the value is not one line of YAML or
 * the result does not load: err holds the reason without a file position ("upstream.timeout_ms:
 * 10 is out of range 50..60000") and *bad (may be NULL) the index of the change at fault, or n
 * when it is the combination (or the file was already invalid); -errno (err names the step) when
 * the file cannot be read or written. Concurrent rewriters of one file are not serialised: the
 * caller is the one control thread, or a CLI run by hand.
 */
int nx_conf_rewrite_many(const char *path, const struct nx_conf_change *ch, size_t n,
			 size_t *bad, char *err, size_t errlen);
/* One change. */
int nx_conf_rewrite(const char *path, const char *key, const char *yaml, char *err, size_t errlen);

/*
 * The text edit under the rewrite, without validation or I/O (tests, previews): apply the
 * changes to `yaml` (len bytes) into *out (NUL-terminated, *out_len bytes, charged to
 * NX_OWNER_config: release with nx_mem_free(NX_OWNER_config, *out, *out_len + 1)).
 * *kept_layout is false when some change had to re-emit the document (comments lost).
 * 0, NX_ECONFIG (unknown key, bad value text, YAML the parser refuses) or -ENOMEM.
 */
int nx_conf_edit_text(const char *yaml, size_t len, const struct nx_conf_change *ch, size_t n,
		      char **out, size_t *out_len, bool *kept_layout, char *err, size_t errlen);

/* ---- the schema, read-only (conf/schema.c): the settings API, GET /api/schema, the reload -- */

/*
 * When a key's new value takes effect. Every schema row has one (0 is no mode, so a row that
 * forgets it fails the schema test). An API change rewrites the file and reloads, so "live" and
 * "reload" both apply when the API answers; they differ in what they reach.
 */
enum nx_conf_apply {
	NX_CONF_APPLY_LIVE = 1,    /* used by every query and request once the new configuration
				    * is in effect (a reload: SIGHUP or an API change) */
	NX_CONF_APPLY_RELOAD = 2,  /* read again at a reload, but only what starts afterwards
				    * sees it: new connections (a certificate), new sessions,
				    * the list rebuild or the next refresh round */
	NX_CONF_APPLY_RESTART = 3, /* read at start only: a reload keeps the running value and
				    * names the key in the log */
};

/* How a key's value is held in struct nx_conf, for code that reads keys by their schema row. */
enum nx_conf_kind {
	NX_CONF_KIND_OTHER = 0,   /* a structure of its own (sources, groups, ...): no generic view */
	NX_CONF_KIND_BOOL,        /* bool */
	NX_CONF_KIND_UINT,        /* unsigned (durations in seconds) */
	NX_CONF_KIND_STRING,      /* char *, NULL for an optional value left empty */
	NX_CONF_KIND_ADDR,        /* struct nx_addr */
	NX_CONF_KIND_ADDR_LIST,   /* struct nx_addr[n] */
	NX_CONF_KIND_CIDR_LIST,   /* struct nx_cidr[n] */
	NX_CONF_KIND_UPSTREAMS,   /* struct nx_conf_upstream[n] */
	NX_CONF_KIND_STRINGS,     /* char *[n] */
	NX_CONF_KIND_BLOCK_ADDRS, /* filter.block_addresses: block_v4 / block_v6 */
};

/* One schema row as code outside conf/ sees it. Every pointer is static data. */
struct nx_conf_key_info {
	const char *path;           /* dotted key, "cache.size" */
	const char *type;           /* type name as the docs show it */
	enum nx_conf_kind kind;
	enum nx_conf_apply apply;
	bool editable;              /* PUT /api/settings may change it */
	long long min, max;         /* uint: value range; lists: entry count range; else 0 */
	const char *const *choices; /* enum: NULL-terminated values; else NULL */
	const char *def;            /* default as YAML flow text, as the docs show it */
	const char *doc;            /* one paragraph of Markdown */
	char range[256];            /* range text of the docs ("" when none) */
};

/*
 * A key's value in a loaded config, by kind; borrowed from the config (valid while it is).
 * BOOL: b; UINT: u; STRING: s; ADDR: items (one struct nx_addr); lists: items + n;
 * BLOCK_ADDRS: v4 / v6 (NULL when not set).
 */
struct nx_conf_value {
	enum nx_conf_kind kind;
	bool b;
	unsigned u;
	const char *s;
	const void *items;
	size_t n;
	const uint8_t *v4, *v6;
};

/* Schema rows; an index is 0 .. nx_conf_key_count() - 1, in the order of the docs. */
size_t nx_conf_key_count(void);
/* Row idx (nx_require: in range) into *out. */
void nx_conf_key_info(size_t idx, struct nx_conf_key_info *out);
/* Index of a dotted key: 0, or NX_ENOTFOUND (sections and unknown keys). */
int nx_conf_key_index(const char *path, size_t *idx);
/* "live", "reload", "restart" (docs and API words); "" for anything else. */
const char *nx_conf_apply_name(enum nx_conf_apply a);
/* Key idx of c into *v: 0, or -ENOTSUP for a key of kind OTHER. */
int nx_conf_key_value(const struct nx_conf *c, size_t idx, struct nx_conf_value *v);
/*
 * Do a and b hold the same value for key idx? Lists compare in order; upstreams by text,
 * certificate name and pins; addresses as written. A key of kind OTHER is never equal (the
 * caller sees a change it cannot rule out); every restart key has a comparable kind (tested).
 */
bool nx_conf_key_equal(const struct nx_conf *a, const struct nx_conf *b, size_t idx);

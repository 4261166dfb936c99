/*
 * Guard: protections of the network behind nxdns, called from the query pipeline.
 *
 * Rate limiting (access.rate_limit): a fixed-size table of per-prefix GCRA states (the
 * "virtual scheduling" form of a token bucket: one theoretical arrival time per client),
 * shared by every worker and lock-free: each slot is a few atomics updated with CAS, so
 * workers never wait on each other and a client whose queries SO_REUSEPORT spreads over
 * several workers still has one limit. The table never grows: a new client takes the free or
 * least-indebted slot of its set (a flood of spoofed sources recycles slots, counted).
 *
 * Rebinding protection (filter.rebinding_protection): an address classifier and a rewriter
 * that removes private addresses from an upstream answer before it is cached and relayed.
 *
 * Threading: every function may run on any worker at once; the table is the only shared state
 * and is accessed through atomics. Ownership: the table is owned by its creator (the daemon),
 * charged to NX_OWNER_rate_limit; everything else works on caller memory and allocates nothing.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "dns/msg.h"

/* ---- rate limiting ---------------------------------------------------------------------- */

#define NX_GUARD_RL_WAYS 8 /* slots per set: a new client evicts within its set only */
#define NX_GUARD_RL_LOG_INTERVAL_US (60ull * 1000 * 1000) /* one "over its limit" line a minute */

struct nx_guard_rl;

/* The limit as configured (access.rate_limit.*). qps 0 means off (every query passes). */
struct nx_guard_rl_params {
	unsigned qps;	      /* sustained queries per second per prefix */
	unsigned burst;	      /* queries at once from idle, >= 1 */
	unsigned ipv4_prefix; /* 1..32 */
	unsigned ipv6_prefix; /* 1..128 */
};

enum nx_guard_rl_verdict {
	NX_GUARD_RL_PASS = 0,	  /* under the limit */
	NX_GUARD_RL_OVER = 1,	  /* over it: drop or refuse */
	NX_GUARD_RL_OVER_LOG = 2, /* over it, and the prefix's first line in a minute: log */
};

/* The configured limit of c. */
void nx_guard_rl_params_from(const struct nx_conf *c, struct nx_guard_rl_params *out);

/* A table of NX_CONF_RATE_LIMIT_SLOTS slots, zeroed, hashed with `seed` (random per process,
 * so nobody can aim a set of prefixes at one set). Returns 0 or -ENOMEM. */
int nx_guard_rl_new(uint64_t seed, struct nx_guard_rl **out);
/* NULL is a no-op. */
void nx_guard_rl_free(struct nx_guard_rl *t);
/* Bytes the table is charged (constant: the ledger shows it). */
size_t nx_guard_rl_bytes(void);

/*
 * Account one query from the client address (family AF_INET with 4 bytes or AF_INET6 with 16;
 * IPv4-mapped IPv6 must already be unmapped by the caller) at monotonic time now_us. A slot
 * recycled while still holding state counts nxdns_rate_limit_evictions_total. No allocation.
 */
enum nx_guard_rl_verdict nx_guard_rl_check(struct nx_guard_rl *t,
					   const struct nx_guard_rl_params *p, int family,
					   const uint8_t *addr, uint64_t now_us);

/*
 * The pipeline's admission step: is the query from `sa` within c's limit? True when the limit
 * is off (qps 0 or t NULL), the address is in access.rate_limit_exempt, or the table says
 * PASS. A client over its limit is logged here at most once a minute per prefix (warn, a line
 * fail2ban can match: "rate limit: client <addr> (prefix <net>/<len>) over ..."). The caller
 * counts and answers (drop or REFUSED).
 */
bool nx_guard_rl_admit(struct nx_guard_rl *t, const struct nx_conf *c, const struct sockaddr *sa,
		       uint64_t now_us);

/* "192.0.2.0/24" / "2001:db8:0:100::/56": the prefix a client address is limited under. */
void nx_guard_rl_prefix_text(const struct nx_guard_rl_params *p, int family, const uint8_t *addr,
			     char *out, size_t cap);

/* ---- rebinding protection --------------------------------------------------------------- */

/* Is the IPv4 address one a LAN device can have: 0/8, 10/8, 100.64/10, 127/8, 169.254/16,
 * 172.16/12, 192.168/16? (Documentation ranges are not.) */
bool nx_guard_private_v4(const uint8_t a[4]);
/* IPv6: ::, ::1, fc00::/7, fe80::/10, and ::ffff:a.b.c.d with a private a.b.c.d. */
bool nx_guard_private_v6(const uint8_t a[16]);

/* What a strip did. */
struct nx_guard_rebind_report {
	unsigned addresses; /* private addresses removed (A/AAAA records and hint entries) */
	bool emptied;	    /* the answer section kept no record of the asked type */
};

#define NX_GUARD_REBIND_TEXT "rebinding protection: private addresses removed from the answer"

/*
 * Remove private addresses from a parsed upstream answer (msg, m from nx_dns_msg_parse): A and
 * AAAA records of class IN in every section, and the private entries of the ipv4hint/ipv6hint
 * of HTTPS/SVCB records (a hint left empty is removed). Only NOERROR answers are looked at.
 * Returns 0 when nothing is private (out untouched: use msg as it is), else the length of the
 * rewritten message in out, which the caller parses again: names are written uncompressed
 * (records moved, so pointers into them could not stay), the OPT last, and when the answer is
 * left without data (rep->emptied) the OPT carries EDE 15 with NX_GUARD_REBIND_TEXT (one is
 * added for an upstream that sent none), so every relay of it, cache hits included, says why.
 * NX_ETRUNC when out is too small, NX_EMALFORMED for a record that does not parse.
 */
int nx_guard_rebind_strip(const uint8_t *msg, const struct nx_dns_msg *m, uint8_t *out, size_t cap,
			  struct nx_guard_rebind_report *rep);

/* Is the name (wire form, any case) equal to or below one of `domains` (lower-case text
 * without the trailing dot, as filter.rebinding_allow stores them)? */
bool nx_guard_rebind_allowed(char *const *domains, size_t n, const uint8_t *name, size_t len);

/*
 * The pipeline's step for an answer from upstream.servers (not a forward zone) to the query
 * name qname: with c->rebinding_protection and qname outside filter.rebinding_allow, strip
 * (nx_guard_rebind_strip) into out and parse the result into *om. Returns the stripped length
 * (use out/om in place of msg/m, for the cache and every waiter), 0 to use msg as it is, or
 * NX_EMALFORMED when not even the NODATA form below can be built (cannot happen with a 64 KiB
 * out: the caller answers SERVFAIL).
 * Counts nxdns_rebinding_total{result} and nxdns_rebinding_addresses_stripped_total. A strip
 * that fails (out of room, a record it cannot rewrite) answers NODATA with EDE 15 rather than
 * let private addresses through.
 */
int nx_guard_rebind_apply(const struct nx_conf *c, const uint8_t *qname, size_t qlen,
			  const uint8_t *msg, const struct nx_dns_msg *m, uint8_t *out, size_t cap,
			  struct nx_dns_msg *om);

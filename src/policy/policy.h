/*
 * The filtering decision: one ladder for the daemon's workers, `nxdns lookup` and /api/lookup,
 * so they can never disagree. The ladder is a table of levels (policy.c `ladder[]`, README.md),
 * first match wins:
 *
 *   local records -> special-use names -> pause / unfiltered client -> user allow -> user deny
 *   -> list levels
 *
 * and, on an upstream answer, the check of its CNAME and HTTPS/SVCB targets. Also the answers a
 * decision produces (block answer per filter.block_mode with EDE 15, local-record answer).
 *
 * Threading: every function is safe on any thread concurrently; inputs are borrowed and
 * immutable for the call (a config generation, its compiled rules, a snapshot generation).
 * Memory: nothing here allocates, except nx_policy_rules_build (control thread, at load).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "dns/msg.h"
#include "filter/result.h"
#include "filter/rules.h"
#include "filter/side.h"
#include "filter/snapshot.h"

struct nx_policy_badfilter;

/* What a decision is made against: one generation of the configuration and lists. */
struct nx_policy {
	const struct nx_conf *c;	     /* borrowed */
	const struct nx_filter_rules *rules; /* borrowed, may be NULL: no user rules */
	const struct nx_filter_snap *snap;   /* borrowed, may be NULL: no list entries */
	const struct nx_filter_side *side;   /* borrowed, may be NULL: no side rules; the same
					      * generation as snap (loaded from its bodies) */
	const struct nx_filter_side *user_side; /* borrowed, may be NULL: the user rules written
						 * in the AdGuard language (same generation as
						 * rules, nx_policy_user_side_build) */
	const struct nx_policy_badfilter *badfilter; /* borrowed, may be NULL: the user rules
						      * `||x^$badfilter` and kin, which cancel
						      * list entries of the snapshot (same
						      * generation as rules,
						      * nx_policy_badfilter_build) */
	bool paused;			     /* filtering paused now (API / control socket) */
};

/*
 * One question from one client: everything a level may look at. A plain value on the caller's
 * stack, filled by nx_policy_query_init(); later levels (list modifiers: $client, $ctag,
 * $dnstype; special-use names) read it and add nothing to it.
 */
struct nx_policy_query {
	const uint8_t *wire;	     /* borrowed: the query name, wire form, any case */
	size_t wlen;		     /* bytes of wire, root label included */
	uint16_t qtype;		     /* the question's type */
	const struct sockaddr *addr; /* borrowed: the client's address (never NULL) */
	const char *client_id;	     /* borrowed: DoH path / DoT SNI client id, "" when none */
	int client;		 /* index in c->clients, -1: no client claims it (default group) */
	const char *client_name; /* borrowed from c: clients[client].name, NULL when -1 */
	const char *const *tags; /* borrowed from c: the client's tags (clients[].tags), NULL
				  * when it has none */
	size_t ntags;
	uint64_t groups;   /* bit g = c->groups[g] is one of the client's groups */
	uint64_t eligible; /* bit i = filter.sources[i] applies to this client */
	bool filtering;	   /* false: never filtered (its groups filter nothing,
			    * filter.enabled off, paused) */
};

/*
 * Resolve the client of a question against p->c (no allocation; a scan of the clients).
 * wire/addr/client_id are borrowed by q for as long as q is used.
 */
void nx_policy_query_init(const struct nx_policy *p, struct nx_policy_query *q, const uint8_t *wire,
			  size_t wlen, uint16_t qtype, const struct sockaddr *addr,
			  const char *client_id);

/*
 * The ladder for q. Returns out->action: LOCAL (local records), BLOCK, ALLOW (a user allow rule
 * or a list exception), or NONE (resolve; reason `paused` when a pause let it through).
 * out->matched_off/len address the matched name inside q->wire.
 */
enum nx_filter_action nx_policy_decide(const struct nx_policy *p, const struct nx_policy_query *q,
				       struct nx_filter_result *out);

/*
 * Check an upstream answer `m` (bytes `buf`) for the question q (whose client is filtered):
 * every CNAME target and every HTTPS/SVCB TargetName of the answer section goes through the
 * ladder as a query of the same client would (a local target answers locally: not blocked; a
 * user allow rule or a list exception lets it through). When one is
 * blocked: fill out, copy that target (the matched part) into matched_wire, return true. When
 * the verdict carries a rewrite ($dnsrewrite, a hosts answer: out->rewrite), matched_wire is
 * the whole target: the caller answers nx_policy_rewrite_answer for a query of that name, as
 * AdGuard Home answers a rewritten CNAME target with the rewrite, not a block.
 */
bool nx_policy_check_answer(const struct nx_policy *p, const struct nx_policy_query *q,
			    const uint8_t *buf, const struct nx_dns_msg *m,
			    struct nx_filter_result *out, uint8_t matched_wire[NX_DNS_NAME_MAX],
			    size_t *matched_len);

/* The source or rule a result names ("" when none), for EDE text, logs and lookups. */
const char *nx_policy_source_name(const struct nx_policy *p, const struct nx_filter_result *r);

/* "block", "local" or "allow" (NONE and ALLOW both resolve): what `nxdns lookup` prints. */
const char *nx_policy_verdict(enum nx_filter_action a);

/*
 * Build the block answer for the query of ctx (filter.block_mode, filter.block_ttl), with EDE 15
 * whose text names the source or rule. Returns the length or a negative code.
 */
int nx_policy_block_answer(const struct nx_policy *p, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx, const struct nx_filter_result *r);

/*
 * The answer of a list verdict that carries a rewrite (r->rewrite != NX_FILTER_RW_NONE:
 * $dnsrewrite, hosts answers) for q, with filter.block_ttl as TTL. Returns the length or a
 * negative code.
 */
int nx_policy_rewrite_answer(const struct nx_policy *p, const struct nx_policy_query *q,
			     uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx,
			     const struct nx_filter_result *r);

/*
 * Answer from local_records (AA set) for a name that has some: the records of the question's
 * type; a CNAME of the name followed by the target's records when the target is local too;
 * PTR answers generated from local A/AAAA; otherwise NODATA. *cname_len (may be NULL) receives
 * the wire length of a CNAME target that is NOT local (the caller resolves it upstream through
 * the normal forwarding path and builds the answer with nx_policy_local_splice), 0 otherwise;
 * the target is copied into cname_target. Returns the length or a negative code.
 */
int nx_policy_local_answer(const struct nx_policy *p, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx,
			   uint8_t cname_target[NX_DNS_NAME_MAX], size_t *cname_len);

/*
 * The answer to the question of ctx (a local name whose CNAME chain leaves the local records)
 * from the local chain followed by the answer section of `up`/`um`, the validated upstream
 * answer for the chain's first non-local target; the rcode is upstream's (NXDOMAIN stays
 * NXDOMAIN), AA is clear, and a negative answer's SOA (upstream's authority section) follows
 * in the authority section with TTL min(its TTL, MINIMUM) (RFC 2308 5). Returns the length or
 * a negative code.
 */
int nx_policy_local_splice(const struct nx_policy *p, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx, const uint8_t *up,
			   const struct nx_dns_msg *um);

/*
 * Does the name (any case) answer from local records: it has some, or it is the reverse name of
 * a local A/AAAA record (a generated PTR)? The ladder's first level.
 */
bool nx_policy_local_has(const struct nx_conf *c, const uint8_t *wire, size_t wlen);

/* Compile filter.allow / filter.deny of c (validated by the loader). 0 or a negative code,
 * logged. *out is owned by the caller (nx_filter_rules_free). */
int nx_policy_rules_build(const struct nx_conf *c, struct nx_filter_rules **out);

/*
 * Compile the filter.allow / filter.deny rules of c that need the side structure
 * (nx_conf_rule_needs_side: modifiers, regexes, ||x^, @@) with origins
 * NX_FILTER_ORIGIN_USER_ALLOW / _DENY. *out is NULL when there are none (or only $badfilter
 * lines, which nx_policy_badfilter_build takes, and no rule is left), else the caller's
 * (nx_filter_side_free). 0 or a negative code, logged. Control thread, at load.
 */
int nx_policy_user_side_build(const struct nx_conf *c, struct nx_filter_side **out);

/*
 * The set of user rules (filter.allow and filter.deny) that cancel a list's snapshot entry in
 * every source, as a user `$badfilter` does in AdGuard Home: `||x^$badfilter` (the `||x^`
 * entry of x), `|x^$badfilter` (an exact-only entry), `@@||x^$badfilter`, `@@|x^$badfilter`
 * (the exceptions alike), each with its rule's groups. *out is NULL when there are none (the
 * usual case), else the caller's (nx_policy_badfilter_free). Charged to NX_OWNER_filter_rules.
 * 0 or -ENOMEM, logged. Control thread, at load; the set is immutable after.
 */
int nx_policy_badfilter_build(const struct nx_conf *c, struct nx_policy_badfilter **out);
void nx_policy_badfilter_free(struct nx_policy_badfilter *b);
/* Entries of the set (0 for NULL). */
size_t nx_policy_badfilter_count(const struct nx_policy_badfilter *b);

/*
 * The verdict for one name as `nxdns lookup` and /api/lookup print it: {name, action, reason,
 * matched, source} (action: nx_policy_verdict), for a question of type qtype from `client`.
 * Returns a new JSON object (the caller's), or NULL with *err ("invalid name", out of memory).
 */
struct json_t;
struct json_t *nx_policy_lookup_json(const struct nx_policy *p, const char *name, uint16_t qtype,
				     const struct sockaddr *client, const char *client_id,
				     const char **err);

/*
 * The special-use names level (special.c, the special.* keys): is the name (wire, any case) of a
 * question of type qtype one nxdns answers itself (LOCAL: localhost, DDR, the Firefox canary,
 * iCloud Private Relay when blocked, and -- unless a forward zone covers them -- local /
 * invalid / home.arpa, private reverse zones and single-label A/AAAA/HTTPS) or never blocks
 * (ALLOW: Android's Private DNS probe)? Fills out (reason: one of the special reasons) and
 * returns true, else false with out untouched. Counts nothing.
 */
bool nx_policy_special_match(const struct nx_conf *c, const uint8_t *wire, size_t wlen,
			     uint16_t qtype, struct nx_filter_result *out);

/*
 * The answer for a question the special level settled as LOCAL with reason r (AA set):
 * loopback A/AAAA for localhost, the DDR SVCB set, NXDOMAIN for the rest (EDE 15 naming the
 * key for the canary and Private Relay). Returns the length, -EINVAL for a reason that is not
 * a special one, or a negative code from the builder. Counts nothing: nx_policy_local_answer,
 * which dispatches here, counts.
 */
int nx_policy_special_answer(const struct nx_policy *p, uint8_t *out, size_t cap,
			     const struct nx_dns_reply_ctx *ctx, enum nx_filter_reason r);

/* Count one use of a special reason in nxdns_special_names_total{reason} (others: no-op). */
void nx_policy_special_count(enum nx_filter_reason r);

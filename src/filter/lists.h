/*
 * The list levels of the decision ladder in one call: the compact snapshot (plain names,
 * ||x^, exceptions) and the side structure (modifiers, regexes, hosts answers), decided with
 * AdGuard's semantics. The policy module's list level calls nx_filter_lists_decide (and its
 * user levels call it on the user side structure alone), and nx_filter_rewrite_answer writes a
 * $dnsrewrite / hosts answer.
 *
 * Threading: both calls are pure readers of immutable objects: any worker, concurrently, no
 * locks, no allocation after a thread's first regex match (PCRE2's working memory is one
 * fixed block per thread, see nx_filter_lists_thread_done).
 * Ranking (README.md "Which rule wins"): user rules > list rules; then
 * @@…$important > …$important > @@… > blocks / rewrites / hosts answers; within a class the
 * rule with more modifiers ($client, $ctag, $dnstype, $denyallow, $dnsrewrite, a hosts answer
 * counts one) wins; then the snapshot, then the lower source, then the earlier rule.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dns/msg.h"
#include "filter/result.h"
#include "filter/side.h"
#include "filter/snapshot.h"

/* One query as the list levels see it. Plain value; every pointer borrowed for the call. */
struct nx_filter_qctx {
	const uint8_t *wire;	       /* question name, uncompressed wire form (any case) */
	size_t wlen;		       /* its length including the root byte */
	uint16_t qtype;		       /* for $dnstype */
	const struct sockaddr *client; /* client address for $client, or NULL (no address) */
	const char *client_name;       /* configured client name for $client, or NULL */
	const char *const *tags;       /* client tags for $ctag (config's clients[].tags) */
	size_t ntags;
	uint64_t eligible; /* bit i: list source i applies to this client */
	uint64_t groups;   /* bit g: the client is in config group g (user rules with groups) */
};

/*
 * Decide the list levels for q. out gets action NONE / ALLOW / BLOCK with a reason, the
 * source (or -1 for user rules), matched_off/len into q->wire (first length byte of the
 * matched name; 0/0 for regex rules), side_rule (the deciding side rule, -1 when the snapshot
 * decided) and rewrite (what nx_filter_rewrite_answer will write; NONE for a plain block).
 * snap and side may each be NULL (empty). Returns out->action. Never fails: a name that is
 * not a list name (odd bytes) is only matched above its odd label, as the snapshot does.
 */
enum nx_filter_action nx_filter_lists_decide(const struct nx_filter_snap *snap,
					     const struct nx_filter_side *side,
					     const struct nx_filter_qctx *q,
					     struct nx_filter_result *out);

/*
 * Return the calling thread's PCRE2 working block (~80 KiB on NX_OWNER_filter_side, taken on
 * its first regex match). A thread-exit destructor does this for threads that end with
 * pthread_exit or by returning; call it where that does not hold (the main thread, tests).
 */
void nx_filter_lists_thread_done(void);

/*
 * Write the reply for a decision whose out->rewrite is not NONE into buf: $dnsrewrite
 * NOERROR records of the query's type (every matching rewrite rule of the same name, origin
 * and anchor, in list order; CNAME wins over address records as in AdGuard Home; none of the
 * type: NODATA), NXDOMAIN or REFUSED; hosts answers: the listed A / AAAA addresses of the name
 * in list order. TTL is `ttl` seconds. ctx is the client's reply context (id, question, EDNS).
 * Returns the length, NX_ETRUNC (buf too small even for TC), -EINVAL (r has no rewrite).
 */
int nx_filter_rewrite_answer(const struct nx_filter_side *side, const struct nx_filter_qctx *q,
			     const struct nx_filter_result *r, const struct nx_dns_reply_ctx *ctx,
			     uint32_t ttl, uint8_t *buf, size_t cap);

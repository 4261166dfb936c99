/*
 * DNS response cache: one instance shared by every worker thread.
 *
 * What it stores: the wire answer as received from upstream (after the caller validated it),
 * with the offsets of its TTL fields, so a hit is one memcpy into the caller's buffer plus a
 * TTL rewrite. Keyed by (lower-cased qname, qtype, qclass, DO bit, CD bit).
 *
 * Bounds (both always hold, checked by the unit tests):
 *  - entries <= params.size (cache.size), split evenly over the shards;
 *  - live response bytes <= nx_cache_budget_bytes(size) = max(256 * size, 65535). "Response
 *    bytes" are whole stored copies: the message plus a 48-byte header, 2 bytes per TTL field
 *    and the upstream EDE text (nx_cache_stored_size()). The budget is global: an insertion
 *    reserves its bytes atomically first, evicting by CLOCK (shard by shard, round robin, one
 *    shard lock at a time) until the reservation fits. The copy is allocated before its bytes
 *    are reserved (so a failed allocation leaves an old entry untouched): the ledger's
 *    cache_responses may exceed the budget by the copies being inserted at that instant.
 *
 * Eviction: CLOCK with second chance per shard. New entries start unreferenced; a hit sets the
 * reference bit; the hand clears set bits and evicts the first clear one. Entries past their
 * TTL plus the stale window are dropped by lookups and by the hand (counted as `expired`).
 *
 * Threading: every function except nx_cache_new/nx_cache_free may be called from any thread at
 * any time. A shard lock is held only for the index walk and the memcpy; allocation, freeing
 * and the TTL rewrite run outside it. No function ever holds two shard locks.
 *
 * Time: callers pass now_ms from one monotonic clock (nx_now_mono_ms()); the cache never reads
 * a clock itself (tests drive time by hand). A now_ms earlier than an entry's store time counts
 * as age 0.
 *
 * Memory: slot arrays are allocated in nx_cache_new (owner cache_slots, bounded by size); each
 * stored copy is one allocation (owner cache_responses) through params.alloc, so tests can fail
 * allocations. Nothing is allocated on the lookup path.
 *
 * A NULL `struct nx_cache *` is a valid disabled cache: lookups miss (uncounted), puts return
 * NX_ECANCELED, stats read zero. The daemon uses that for cache.size == 0.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ledger.h"
#include "dns/msg.h"

/* Opaque: the shared table. */
struct nx_cache;

/* Byte budget per configured entry (issue 4: budget follows cache.size). */
#define NX_CACHE_BYTES_PER_ENTRY 256
/* Budget floor: one maximum-size DNS message (a near-65535-byte one is still "oversized",
 * because its stored copy adds a header; see nx_cache_stored_size). */
#define NX_CACHE_BYTES_FLOOR 65535
/* Largest accepted cache.size (keeps 256 * size and slot arrays far from overflow). */
#define NX_CACHE_SIZE_MAX (1u << 24)
/* Default and largest shard counts; auto sizing keeps >= 64 entries per shard. */
#define NX_CACHE_SHARDS_DEFAULT 16
#define NX_CACHE_SHARDS_MAX 64
#define NX_CACHE_SHARD_MIN_ENTRIES 64
/* Probation (S3-FIFO's small queue) holds 1/this of each shard's entries, at least one. */
#define NX_CACHE_SMALL_DIVISOR 10
/* RFC 8767 section 4: TTL put on records served stale. */
#define NX_CACHE_STALE_TTL 30
/* Prefetch is signalled when the remaining TTL drops below this share of the stored TTL. */
#define NX_CACHE_PREFETCH_PERCENT 10

/* Defaults for nx_cache_params_default(); the config schema owns the user-facing ones. */
#define NX_CACHE_SIZE_DEFAULT 10000
#define NX_CACHE_MAX_TTL_DEFAULT 86400	    /* s, one day (as unbound's cache-max-ttl) */
#define NX_CACHE_NEG_MAX_TTL_DEFAULT 3600   /* s, RFC 2308 s5 suggests 1..3 hours at most */
#define NX_CACHE_SERVFAIL_TTL_DEFAULT 5	    /* s, RFC 9520 s3.2: >= 1 s, 5 s recommended */
#define NX_CACHE_STALE_WINDOW_DEFAULT 86400 /* s, RFC 8767 s5: 1..3 days; used when enabled */
#define NX_CACHE_PREFETCH_HITS_DEFAULT 3    /* hits before an entry is worth prefetching */

/*
 * Allocator for slots and stored copies. The default charges the ledger through
 * nx_mem_alloc/nx_mem_free. Must be thread-safe when the cache is shared. free(ctx, o, NULL, 0)
 * is never called.
 */
struct nx_cache_alloc {
	void *(*alloc)(void *ctx, enum nx_owner owner, size_t size); /* NULL on failure */
	void (*free)(void *ctx, enum nx_owner owner, void *p, size_t size);
	void *ctx; /* borrowed: passed to both */
};

struct nx_cache_params {
	uint32_t size;	       /* cache.size: max entries, 1..NX_CACHE_SIZE_MAX */
	uint32_t min_ttl;      /* s, cache.min_ttl: RR TTLs raised to this (0 = off) */
	uint32_t max_ttl;      /* s, cache.max_ttl: RR TTLs lowered to this; >= min_ttl */
	uint32_t neg_max_ttl;  /* s, extra cap on negative (NXDOMAIN/NODATA) lifetimes */
	uint32_t servfail_ttl; /* s, lifetime of a cached SERVFAIL; 0 = never cache them */
	uint32_t stale_window; /* s, cache.serve_stale: keep expired entries this long; 0 = off */
	uint32_t prefetch_min_hits; /* cache.prefetch: fresh hits an entry must already have
				     * served before it may signal prefetch; 0 = off */
	uint32_t shards;    /* 0 = auto; else a power of two <= NX_CACHE_SHARDS_MAX, <= size */
	uint64_t hash_seed; /* XXH3 seed; pass a random one (nx_rand_u32) in the daemon */
	const struct nx_cache_alloc *alloc; /* borrowed, copied by nx_cache_new; NULL = ledger */
};

/*
 * The lookup key. The name is read during the call only; any case (the cache lower-cases it).
 */
struct nx_cache_key {
	const uint8_t *name; /* borrowed: uncompressed wire qname */
	uint8_t name_len;    /* 1..255 */
	uint16_t qtype;
	uint16_t qclass;
	bool do_bit; /* the client's EDNS DO bit (answers with/without DNSSEC records differ) */
	bool cd;     /* the client's CD bit */
};

/* The key of a parsed client query (the first question; DO only when an OPT was present). */
static inline void nx_cache_key_from_query(const struct nx_dns_msg *q, struct nx_cache_key *k)
{
	k->name = q->q.name;
	k->name_len = q->q.name_len;
	k->qtype = q->q.qtype;
	k->qclass = q->q.qclass;
	k->do_bit = q->edns.present && q->edns.do_bit;
	k->cd = (q->flags & NX_DNS_F_CD) != 0;
}

/*
 * Diagnostics, one list: field, Prometheus type, metric family, help. Counters only grow.
 * nx_cache_stats() fills a struct nx_cache_stats with these fields.
 */
#define NX_CACHE_STATS(X)                                                                          \
	X(entries, gauge, "nxdns_cache_entries", "DNS cache entries held")                         \
	X(max_entries, gauge, "nxdns_cache_max_entries", "DNS cache entry limit (cache.size)")     \
	X(live_bytes, gauge, "nxdns_cache_response_bytes", "DNS cache stored response bytes")      \
	X(budget_bytes, gauge, "nxdns_cache_max_bytes", "DNS cache response byte budget")          \
	X(slot_bytes, gauge, "nxdns_cache_slot_bytes", "DNS cache slot and index bytes")           \
	X(hits, counter, "nxdns_cache_hits_total", "DNS cache lookups answered fresh")             \
	X(stale_hits, counter, "nxdns_cache_stale_hits_total",                                     \
	  "DNS cache lookups answered with an expired entry (serve-stale)")                        \
	X(misses, counter, "nxdns_cache_misses_total", "DNS cache lookups without a fresh entry")  \
	X(inserts, counter, "nxdns_cache_inserts_total", "DNS cache entries stored")               \
	X(replaced, counter, "nxdns_cache_replaced_total", "DNS cache entries replaced by a put")  \
	X(promoted, counter, "nxdns_cache_promoted_total",                                         \
	  "DNS cache entries moved from probation to the main queue (hit while on probation)")     \
	X(readmitted, counter, "nxdns_cache_readmitted_total",                                     \
	  "DNS cache entries stored straight into the main queue (evicted from probation lately)") \
	X(evictions, counter, "nxdns_cache_evictions_total",                                       \
	  "DNS cache live entries evicted for room (CLOCK)")                                       \
	X(expired, counter, "nxdns_cache_expired_total",                                           \
	  "DNS cache entries dropped past their TTL and stale window")                             \
	X(oversized, counter, "nxdns_cache_oversized_total",                                       \
	  "DNS responses not cached: larger than the whole byte budget")                           \
	X(alloc_failures, counter, "nxdns_cache_alloc_failures_total",                             \
	  "DNS responses not cached: the copy could not be allocated")                             \
	X(no_room, counter, "nxdns_cache_no_room_total",                                           \
	  "DNS responses not cached: concurrent inserts held the budget")                          \
	X(uncacheable, counter, "nxdns_cache_uncacheable_total",                                   \
	  "DNS responses not cached by rule (rcode, TC, TTL 0, negative without SOA)")             \
	X(prefetch, counter, "nxdns_cache_prefetch_signals_total",                                 \
	  "DNS cache hits that asked the caller to prefetch")

struct nx_cache_stats {
#define NX_CACHE_STAT_FIELD(name, type, family, help) uint64_t name;
	NX_CACHE_STATS(NX_CACHE_STAT_FIELD)
#undef NX_CACHE_STAT_FIELD
};

/* Lookup flags. */
enum {
	/* Also answer from an expired entry still inside the stale window (RFC 8767). Use after
	 * upstream failed: a fresh entry is still preferred; nothing found is not counted as a
	 * miss (the first lookup of that query already was). */
	NX_CACHE_LOOKUP_STALE = 1u << 0,
};

/* What a hit produced, beside the bytes. */
struct nx_cache_hit {
	uint16_t len;  /* bytes written to out */
	uint32_t ttl;  /* remaining entry TTL in s (>= 1 when fresh; NX_CACHE_STALE_TTL if stale) */
	uint32_t age;  /* s since the entry was stored */
	bool stale;    /* served from an expired entry: the caller adds EDE 3 (Stale Answer) */
	bool prefetch; /* first hit past the prefetch threshold: the caller may refresh the entry
			* in the background (reported once per stored entry) */
};

/* Fill defaults (size 10000, no clamps but max_ttl one day, stale and prefetch off). */
void nx_cache_params_default(struct nx_cache_params *p);

/* max(NX_CACHE_BYTES_PER_ENTRY * size, NX_CACHE_BYTES_FLOOR). */
uint64_t nx_cache_budget_bytes(uint32_t size);

/* Bytes a response would occupy in the budget (message + header + TTL offsets + EDE text). */
size_t nx_cache_stored_size(const struct nx_dns_msg *m);

/*
 * Create a cache. Returns 0 and *out, -EINVAL on bad params (size 0 or too large, min_ttl >
 * max_ttl, bad shard count, half-set allocator), -ENOMEM (nothing leaked, *out untouched).
 */
int nx_cache_new(const struct nx_cache_params *p, struct nx_cache **out);

/* Free every entry and the cache. No other thread may use it any more. NULL is a no-op. */
void nx_cache_free(struct nx_cache *c);

/*
 * Look up k. On a hit copies the stored message into out[0..cap) with every TTL rewritten to
 * its remaining value (stored TTL minus whole seconds of age, floor 0; NX_CACHE_STALE_TTL for a
 * stale hit) and fills:
 *  - *msg (may be NULL): a view of `out` exactly like nx_dns_msg_parse() gives for those bytes
 *    (offsets, counts, question, upstream EDNS/EDE, ttl_off, min_ttl over answer+authority).
 *    The bytes still carry the upstream id, question case and OPT: pass out + *msg to
 *    nx_dns_relay(..., ttl_sub = 0, ede = hit->stale ? NX_DNS_EDE_STALE : -1, ...) to answer.
 *  - *hit (may be NULL).
 * The entry gets its CLOCK reference bit (fresh hits only).
 * Returns 0 on a hit; NX_ENOTFOUND on a miss (counted unless NX_CACHE_LOOKUP_STALE);
 * NX_ETRUNC when cap is smaller than the stored message (counted as a miss);
 * -EINVAL on a bad key (name_len 0 or NULL name).
 */
int nx_cache_lookup(struct nx_cache *c, const struct nx_cache_key *k, uint64_t now_ms,
		    unsigned flags, uint8_t *out, size_t cap, struct nx_dns_msg *msg,
		    struct nx_cache_hit *hit);

/*
 * Store an upstream answer for k: `buf` holds m->len bytes that m describes (a successful
 * nx_dns_msg_parse of buf, validated by the caller against the query). The bytes are copied;
 * buf and m are not kept. An existing entry for k is replaced (only once the new copy exists).
 * Cached, with entry lifetime:
 *  - NOERROR with answers: min over answer+authority RR TTLs, each clamped to
 *    [min_ttl, max_ttl]; a lifetime of 0 is not cached;
 *  - NXDOMAIN, or NOERROR without answers (NODATA): RFC 2308 - min(SOA TTL, SOA MINIMUM) of
 *    the first SOA in the authority section, clamped to [min_ttl, min(max_ttl, neg_max_ttl)];
 *    the SOA's TTL field is rewritten to that value. Without an SOA: not cached (RFC 2308 s5);
 *  - SERVFAIL: servfail_ttl (not cached when 0).
 * Not cached: TC set, opcode != QUERY, QR clear, other rcodes (incl. extended), qdcount != 1,
 * more RRs than NX_DNS_MAX_TTLS (m->ttl_overflow), a question that is not k's name/type/class.
 * Every RR TTL in the copy is clamped the same way (TTLs with the top bit set count as 0,
 * RFC 2181 s8).
 * Returns 0 stored; NX_EFORMAT not cacheable by rule (counted uncacheable); NX_EMALFORMED m is
 * inconsistent with buf or k (counted uncacheable); NX_ELIMIT larger than the budget (counted
 * oversized) or the budget stayed full (counted no_room); -ENOMEM copy allocation failed
 * (counted; an old entry stays); -EINVAL bad key; NX_ECANCELED when c is NULL. The caller
 * answers the client either way.
 */
int nx_cache_put(struct nx_cache *c, const struct nx_cache_key *k, const uint8_t *buf,
		 const struct nx_dns_msg *m, uint64_t now_ms);

/* Drop every entry (API "flush cache"). Counters keep their values. */
void nx_cache_flush(struct nx_cache *c);

/* Read the diagnostics (locks each shard briefly in turn; figures are per-shard consistent). */
void nx_cache_stats(const struct nx_cache *c, struct nx_cache_stats *out);

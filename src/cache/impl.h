/*
 * Cache internals shared by cache.c (the sharded table) and store.c (what a stored copy looks
 * like: admission rules, TTL clamps, the copy and its view). Never included outside src/cache.
 *
 * A stored copy ("blob") is one allocation charged to NX_OWNER_cache_responses:
 *   struct nx_cache_blob | uint16_t ttl_off[ttl_count] | EDE text | message bytes
 * Its `size` is what the byte budget and the ledger count. Blobs are immutable once linked into
 * a shard; lookups read them under the shard lock only.
 */
#pragma once

#include "cache/cache.h"

#include <assert.h>

struct nx_cache_blob {
	struct nx_cache_blob *next_free; /* link of a "free after unlock" list; unused while live */
	uint32_t size;			 /* whole allocation in bytes (budget + ledger) */
	uint16_t wire_len;		 /* message bytes */
	uint16_t qclass;		 /* key part not kept in the slot */
	uint16_t question_end;		 /* offsets as in struct nx_dns_msg */
	uint16_t answer_end;
	uint16_t authority_end;
	uint16_t opt_off;
	uint16_t opt_len;
	uint16_t opt_index;
	uint16_t udp_size; /* upstream OPT fields (the relay drops/rebuilds the OPT) */
	uint16_t unknown_options;
	int16_t ede_code; /* upstream EDE info-code or -1 */
	uint16_t ttl_count;
	uint8_t ext_rcode;
	uint8_t edns_version;
	uint8_t edns_bits;    /* NX_CACHE_EDNS_* */
	uint8_t ede_text_len; /* <= NX_DNS_EDE_TEXT_MAX */
	uint8_t name_len;     /* qname wire length (the name is at wire offset 12) */
	uint16_t ttl_off[];   /* ttl_count offsets into the message, ascending */
};
static_assert(sizeof(struct nx_cache_blob) == 48, "blob header is part of the byte budget");

#define NX_CACHE_EDNS_PRESENT 0x01
#define NX_CACHE_EDNS_DO 0x02

static inline const char *nx_cache_blob_ede(const struct nx_cache_blob *b)
{
	return (const char *)(b->ttl_off + b->ttl_count);
}

static inline const uint8_t *nx_cache_blob_wire(const struct nx_cache_blob *b)
{
	return (const uint8_t *)nx_cache_blob_ede(b) + b->ede_text_len;
}

/* What nx_cache_plan decided for a response. */
struct nx_cache_plan {
	uint32_t ttl;	  /* entry lifetime in s, >= 1 */
	uint32_t neg_ttl; /* lifetime written into the SOA's TTL (negative answers) */
	uint16_t soa_off; /* TTL offset of the SOA whose TTL becomes neg_ttl, 0 if none */
	uint32_t size;	  /* stored size of the copy */
};

/*
 * Decide whether (buf, m) answering key k (lname: k's name lower-cased) is cached and for how
 * long. Reads only; returns 0, NX_EFORMAT (rule) or NX_EMALFORMED (inconsistent view).
 */
int nx_cache_plan(const struct nx_cache_params *p, const struct nx_cache_key *k,
		  const uint8_t *lname, const uint8_t *buf, const struct nx_dns_msg *m,
		  struct nx_cache_plan *out);

/* Build the stored copy into b (plan->size bytes): header, offsets, EDE text, clamped TTLs. */
void nx_cache_blob_fill(struct nx_cache_blob *b, const struct nx_cache_params *p,
			const struct nx_cache_plan *plan, const uint8_t *buf,
			const struct nx_dns_msg *m);

/*
 * Describe a copy of b's message (at `wire`) in *msg, except min_ttl (see rewrite). Copies the
 * TTL offsets into msg->ttl_off. Called under the shard lock (reads b).
 */
void nx_cache_blob_view(const struct nx_cache_blob *b, const uint8_t *wire, struct nx_dns_msg *msg);

/*
 * Rewrite the TTLs of a copied message: each becomes stored - age (floor 0), or `stale_ttl`
 * when stale. Returns the smallest new TTL over answer+authority (UINT32_MAX if none).
 */
uint32_t nx_cache_rewrite_ttls(uint8_t *wire, const uint16_t *ttl_off, uint16_t n,
			       uint16_t authority_end, uint32_t age, bool stale);

static inline uint16_t nx_cache_rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t nx_cache_rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void nx_cache_wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint8_t nx_cache_lower(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + ('a' - 'A')) : c;
}

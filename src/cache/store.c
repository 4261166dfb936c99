/*
 * What the cache stores: admission rules (RFC 2308 negative caching, brief SERVFAIL), TTL
 * clamps, the stored copy and the view a hit hands back. No locking here: callers own the
 * memory they pass.
 */
#include "cache/impl.h"

#include <string.h>

#include "base/err.h"

/* RFC 2181 s8: a TTL with the top bit set is treated as zero. */
static uint32_t ttl_value(uint32_t t)
{
	return (t & 0x80000000u) ? 0 : t;
}

static uint32_t clamp(uint32_t t, uint32_t lo, uint32_t hi)
{
	if (t > hi) {
		t = hi;
	}
	if (t < lo) {
		t = lo; /* min_ttl wins over the negative cap */
	}
	return t;
}

static uint32_t rr_ttl(const struct nx_cache_params *p, uint32_t wire_ttl)
{
	return clamp(ttl_value(wire_ttl), p->min_ttl, p->max_ttl);
}

size_t nx_cache_stored_size(const struct nx_dns_msg *m)
{
	size_t ede = 0;
	if (m->edns.present && m->edns.ede_code >= 0) {
		ede = NX_MIN((size_t)m->edns.ede_text_len, (size_t)NX_DNS_EDE_TEXT_MAX);
	}
	size_t n = NX_MIN((size_t)m->ttl_count, (size_t)NX_DNS_MAX_TTLS);
	return sizeof(struct nx_cache_blob) + n * sizeof(uint16_t) + ede + m->len;
}

/* Offsets in m must describe buf: checked once here so hits never re-check. */
static int check_view(const struct nx_cache_key *k, const uint8_t *lname, const uint8_t *buf,
		      const struct nx_dns_msg *m)
{
	size_t len = m->len;
	size_t qend = NX_DNS_HDR_LEN + (size_t)k->name_len + 4;
	if (len < qend || nx_cache_rd16(buf + 2) != m->flags || m->question_end != qend ||
	    m->answer_end < qend || m->authority_end < m->answer_end || m->authority_end > len) {
		return NX_EMALFORMED;
	}
	for (size_t i = 0; i < k->name_len; i++) {
		if (nx_cache_lower(buf[NX_DNS_HDR_LEN + i]) != lname[i]) {
			return NX_EMALFORMED;
		}
	}
	if (nx_cache_rd16(buf + qend - 4) != k->qtype ||
	    nx_cache_rd16(buf + qend - 2) != k->qclass) {
		return NX_EMALFORMED;
	}
	/* An RR is owner (>= 1) + type + class before its TTL, rdlength after it. */
	size_t prev = qend + 4;
	for (size_t i = 0; i < m->ttl_count; i++) {
		size_t off = m->ttl_off[i];
		if (off < prev + 1 || off + 6 > len) {
			return NX_EMALFORMED;
		}
		prev = off + 6;
	}
	if (m->edns.present && (m->opt_off < m->authority_end || m->opt_len < 11 ||
				(size_t)m->opt_off + m->opt_len > len)) {
		return NX_EMALFORMED;
	}
	return 0;
}

/*
 * RFC 2308 s5: the negative lifetime is min(SOA TTL, SOA MINIMUM) of the SOA in the authority
 * section. MINIMUM is the last 4 bytes of the SOA RDATA (the two names before it may be
 * compressed; we never need them). Returns the TTL offset of the first SOA, 0 if none.
 */
static uint16_t find_soa(const uint8_t *buf, const struct nx_dns_msg *m, uint32_t *neg)
{
	for (size_t i = 0; i < m->ttl_count; i++) {
		size_t off = m->ttl_off[i];
		if (off < m->answer_end) {
			continue;
		}
		if (off >= m->authority_end) {
			break;
		}
		if (nx_cache_rd16(buf + off - 4) != NX_DNS_T_SOA) {
			continue;
		}
		size_t rdlen = nx_cache_rd16(buf + off + 4);
		size_t end = off + 6 + rdlen;
		if (rdlen < 2 + 20 || end > m->authority_end) {
			continue; /* not a usable SOA: two root names + 5 x u32 at least */
		}
		uint32_t ttl = ttl_value(nx_cache_rd32(buf + off));
		uint32_t minimum = ttl_value(nx_cache_rd32(buf + end - 4));
		*neg = NX_MIN(ttl, minimum);
		return (uint16_t)off;
	}
	return 0;
}

int nx_cache_plan(const struct nx_cache_params *p, const struct nx_cache_key *k,
		  const uint8_t *lname, const uint8_t *buf, const struct nx_dns_msg *m,
		  struct nx_cache_plan *out)
{
	memset(out, 0, sizeof(*out));
	if (m->len < NX_DNS_HDR_LEN) {
		return NX_EMALFORMED;
	}
	uint16_t f = m->flags;
	if (!(f & NX_DNS_F_QR) || NX_DNS_OPCODE(f) != 0 || (f & NX_DNS_F_TC) || !m->has_question ||
	    m->qdcount != 1 || m->ttl_overflow || m->ttl_count > NX_DNS_MAX_TTLS) {
		return NX_EFORMAT;
	}
	int rc = check_view(k, lname, buf, m);
	if (rc) {
		return rc;
	}
	if (m->edns.present && m->edns.ext_rcode != 0) {
		return NX_EFORMAT; /* BADVERS and other extended rcodes */
	}

	/* Lifetime over answer + authority with every RR clamped; the SOA of a negative answer
	 * contributes its negative lifetime instead. */
	bool negative = false;
	uint32_t ttl = UINT32_MAX;
	switch (NX_DNS_RCODE(f)) {
	case NX_DNS_NOERROR:
		negative = m->ancount == 0; /* NODATA */
		break;
	case NX_DNS_NXDOMAIN:
		negative = true;
		break;
	case NX_DNS_SERVFAIL:
		if (p->servfail_ttl == 0) {
			return NX_EFORMAT;
		}
		ttl = p->servfail_ttl;
		break;
	default:
		return NX_EFORMAT;
	}
	if (negative) {
		uint32_t neg = 0;
		out->soa_off = find_soa(buf, m, &neg);
		if (!out->soa_off) {
			return NX_EFORMAT; /* RFC 2308 s5: SHOULD NOT cache without an SOA */
		}
		out->neg_ttl = clamp(neg, p->min_ttl, NX_MIN(p->max_ttl, p->neg_max_ttl));
	}
	if (NX_DNS_RCODE(f) != NX_DNS_SERVFAIL) {
		for (size_t i = 0; i < m->ttl_count && m->ttl_off[i] < m->authority_end; i++) {
			uint16_t off = m->ttl_off[i];
			uint32_t t = off == out->soa_off ? out->neg_ttl
							 : rr_ttl(p, nx_cache_rd32(buf + off));
			ttl = NX_MIN(ttl, t);
		}
		if (ttl == UINT32_MAX) {
			return negative ? NX_EMALFORMED : NX_EFORMAT; /* NOERROR without TTLs */
		}
	}
	if (ttl == 0) {
		return NX_EFORMAT; /* TTL 0: use once, never store (RFC 1035 s3.2.1) */
	}
	out->ttl = ttl;
	out->size = (uint32_t)nx_cache_stored_size(m);
	return 0;
}

void nx_cache_blob_fill(struct nx_cache_blob *b, const struct nx_cache_params *p,
			const struct nx_cache_plan *plan, const uint8_t *buf,
			const struct nx_dns_msg *m)
{
	const struct nx_dns_edns *e = &m->edns;
	bool ede = e->present && e->ede_code >= 0;
	*b = (struct nx_cache_blob){
	    .size = plan->size,
	    .wire_len = m->len,
	    .qclass = nx_cache_rd16(buf + m->question_end - 2),
	    .question_end = m->question_end,
	    .answer_end = m->answer_end,
	    .authority_end = m->authority_end,
	    .opt_off = e->present ? m->opt_off : 0,
	    .opt_len = e->present ? m->opt_len : 0,
	    .opt_index = e->present ? m->opt_index : 0,
	    .udp_size = e->udp_size,
	    .unknown_options = e->unknown_options,
	    .ede_code = (int16_t)(ede ? e->ede_code : -1),
	    .ttl_count = m->ttl_count,
	    .ext_rcode = e->ext_rcode,
	    .edns_version = e->version,
	    .edns_bits = (uint8_t)((e->present ? NX_CACHE_EDNS_PRESENT : 0) |
				   (e->present && e->do_bit ? NX_CACHE_EDNS_DO : 0)),
	    .ede_text_len = (uint8_t)(ede ? NX_MIN(e->ede_text_len, NX_DNS_EDE_TEXT_MAX) : 0),
	    .name_len = (uint8_t)(m->question_end - NX_DNS_HDR_LEN - 4),
	};
	memcpy(b->ttl_off, m->ttl_off, m->ttl_count * sizeof(uint16_t));
	memcpy((char *)nx_cache_blob_ede(b), e->ede_text, b->ede_text_len);
	uint8_t *w = (uint8_t *)nx_cache_blob_wire(b);
	memcpy(w, buf, m->len);
	for (size_t i = 0; i < m->ttl_count; i++) {
		uint16_t off = m->ttl_off[i];
		uint32_t t =
		    off == plan->soa_off ? plan->neg_ttl : rr_ttl(p, nx_cache_rd32(w + off));
		nx_cache_wr32(w + off, t);
	}
}

void nx_cache_blob_view(const struct nx_cache_blob *b, const uint8_t *wire, struct nx_dns_msg *msg)
{
	msg->id = nx_cache_rd16(wire);
	msg->flags = nx_cache_rd16(wire + 2);
	msg->qdcount = nx_cache_rd16(wire + 4);
	msg->ancount = nx_cache_rd16(wire + 6);
	msg->nscount = nx_cache_rd16(wire + 8);
	msg->arcount = nx_cache_rd16(wire + 10);
	msg->has_question = true;
	memcpy(msg->q.name, wire + NX_DNS_HDR_LEN, b->name_len);
	msg->q.name_len = b->name_len;
	msg->q.qtype = nx_cache_rd16(wire + b->question_end - 4);
	msg->q.qclass = nx_cache_rd16(wire + b->question_end - 2);
	msg->question_off = NX_DNS_HDR_LEN;
	msg->question_end = b->question_end;
	msg->answer_end = b->answer_end;
	msg->authority_end = b->authority_end;
	msg->opt_off = b->opt_off;
	msg->opt_len = b->opt_len;
	msg->opt_index = b->opt_index;
	struct nx_dns_edns *e = &msg->edns;
	e->present = b->edns_bits & NX_CACHE_EDNS_PRESENT;
	e->udp_size = b->udp_size;
	e->ext_rcode = b->ext_rcode;
	e->version = b->edns_version;
	e->do_bit = b->edns_bits & NX_CACHE_EDNS_DO;
	e->ede_code = b->ede_code;
	e->ede_text_len = b->ede_text_len;
	memcpy(e->ede_text, nx_cache_blob_ede(b), b->ede_text_len);
	e->unknown_options = b->unknown_options;
	msg->ttl_count = b->ttl_count;
	msg->ttl_overflow = false;
	memcpy(msg->ttl_off, b->ttl_off, b->ttl_count * sizeof(uint16_t));
	msg->min_ttl = UINT32_MAX;
	msg->len = b->wire_len;
}

uint32_t nx_cache_rewrite_ttls(uint8_t *wire, const uint16_t *ttl_off, uint16_t n,
			       uint16_t authority_end, uint32_t age, bool stale)
{
	uint32_t min = UINT32_MAX;
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = wire + ttl_off[i];
		uint32_t t = nx_cache_rd32(p);
		t = stale ? NX_CACHE_STALE_TTL : (t > age ? t - age : 0);
		nx_cache_wr32(p, t);
		if (ttl_off[i] < authority_end) {
			min = NX_MIN(min, t);
		}
	}
	return min;
}

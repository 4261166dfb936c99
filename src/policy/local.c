/*
 * Answers from local_records: the name's records, a CNAME chain through local names, PTR
 * generated from local A/AAAA, NODATA; and the splice of a local CNAME onto an upstream answer
 * for a target that is not local. Nothing allocates: records are described in place
 * (struct nx_dns_rr_spec borrows the config's rdata) and written by the dns builder.
 */
#include "policy/policy.h"

#include <string.h>

#include "base/err.h"
#include "dns/wire.h"

/* Hops of a CNAME chain followed through local names: the loader refuses a CNAME to itself, not
 * a loop through several names; 8 is more than any LAN setup uses (RFC 1034 leaves it to us). */
#define LOCAL_CHAIN_MAX 8
/* Records in one local answer (a name with more is cut, the rest were never wanted by one
 * stub resolver's question; the config's own limit is far larger). */
#define LOCAL_RRS_MAX 48

/* ---- reverse names ---- */

static bool label_is(const uint8_t *l, const char *s)
{
	size_t n = strlen(s);
	if (l[0] != n) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t ch = l[1 + i];
		if (ch >= 'A' && ch <= 'Z') {
			ch = (uint8_t)(ch + 32);
		}
		if (ch != (uint8_t)s[i]) {
			return false;
		}
	}
	return true;
}

static int hex_nibble(uint8_t ch)
{
	if (ch >= '0' && ch <= '9') {
		return ch - '0';
	}
	ch = (uint8_t)(ch | 0x20);
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/*
 * The address a reverse name stands for: d.c.b.a.in-addr.arpa (4 bytes) or the 32 nibbles of
 * ip6.arpa (16 bytes). Returns the address length, or 0 for any other name (partial reverse
 * names included: they are zones, not addresses).
 */
static size_t reverse_addr(const uint8_t *wire, size_t wlen, uint8_t addr[16])
{
	size_t off = 0;
	uint8_t v4[4];
	unsigned n = 0;
	/* IPv4: four decimal labels */
	while (n < 4 && off < wlen && wire[off] >= 1 && wire[off] <= 3) {
		unsigned v = 0;
		bool ok = off + 1 + wire[off] <= wlen;
		for (unsigned i = 0; ok && i < wire[off]; i++) {
			uint8_t ch = wire[off + 1 + i];
			ok = ch >= '0' && ch <= '9' && !(i == 0 && ch == '0' && wire[off] > 1);
			v = v * 10 + (unsigned)(ch - '0');
		}
		if (!ok || v > 255) {
			break;
		}
		v4[3 - n++] = (uint8_t)v;
		off += 1u + wire[off];
	}
	if (n == 4 && off + 14 == wlen && label_is(wire + off, "in-addr") &&
	    label_is(wire + off + 8, "arpa") && wire[off + 13] == 0) {
		memcpy(addr, v4, 4);
		return 4;
	}
	/* IPv6: 32 one-nibble labels, least significant first */
	off = 0;
	for (n = 0; n < 32; n++) {
		int h = off + 2 <= wlen && wire[off] == 1 ? hex_nibble(wire[off + 1]) : -1;
		if (h < 0) {
			return 0;
		}
		unsigned byte = 15 - n / 2;
		if (n % 2 == 0) {
			addr[byte] = (uint8_t)h;
		} else {
			addr[byte] = (uint8_t)(addr[byte] | h << 4);
		}
		off += 2;
	}
	if (off + 10 == wlen && label_is(wire + off, "ip6") && label_is(wire + off + 4, "arpa") &&
	    wire[off + 9] == 0) {
		return 16;
	}
	return 0;
}

/* Local A (alen 4) or AAAA (alen 16) records with this address, appended to rrs as PTRs of
 * `owner`. Returns the new count. A linear scan: only reverse names of local addresses get
 * here, and local_records is a hand-written list. */
static size_t generated_ptrs(const struct nx_conf *c, const uint8_t *addr, size_t alen,
			     struct nx_dns_rr_spec *rrs, size_t n, size_t max)
{
	uint16_t type = alen == 4 ? NX_DNS_T_A : NX_DNS_T_AAAA;
	for (size_t i = 0; i < c->n_locals && n < max; i++) {
		const struct nx_conf_local *l = &c->locals[i];
		if (l->type == type && l->rdlen == alen && !memcmp(l->rdata, addr, alen)) {
			rrs[n++] = (struct nx_dns_rr_spec){.type = NX_DNS_T_PTR,
							   .ttl = l->ttl,
							   .rdata = l->name,
							   .rdlen = l->name_len};
		}
	}
	return n;
}

bool nx_policy_local_has(const struct nx_conf *c, const uint8_t *wire, size_t wlen)
{
	if (c->n_locals == 0) {
		return false;
	}
	if (nx_conf_local_has_name(c, wire, wlen)) {
		return true;
	}
	uint8_t addr[16];
	size_t alen = reverse_addr(wire, wlen, addr);
	struct nx_dns_rr_spec one;
	return alen && generated_ptrs(c, addr, alen, &one, 0, 1) == 1;
}

/* ---- answers ---- */

/* Append the records of (name, qtype) to rrs, `owner` NULL for the question's own name. */
static size_t append_records(const struct nx_conf *c, const uint8_t *name, size_t len,
			     uint16_t qtype, const uint8_t *owner, struct nx_dns_rr_spec *rrs,
			     size_t n)
{
	size_t first = 0, count = 0;
	nx_conf_local_find(c, name, len, qtype, &first, &count);
	for (size_t i = 0; i < count && n < LOCAL_RRS_MAX; i++) {
		const struct nx_conf_local *l = &c->locals[first + i];
		rrs[n++] = (struct nx_dns_rr_spec){.owner = owner,
						   .owner_len = owner ? len : 0,
						   .type = l->type,
						   .ttl = l->ttl,
						   .rdata = l->rdata,
						   .rdlen = l->rdlen};
	}
	return n;
}

/*
 * The local part of an answer: records of the question's type, or the CNAME chain through local
 * names (ending in the last local name's records of that type), or generated PTRs. *tail gets
 * the first CNAME target that is not local (0 when the chain ended locally).
 */
static size_t local_rrs(const struct nx_conf *c, const uint8_t *qname, size_t qlen, uint16_t qt,
			struct nx_dns_rr_spec *rrs, const uint8_t **tail, size_t *tail_len)
{
	*tail = NULL;
	*tail_len = 0;
	size_t n = append_records(c, qname, qlen, qt, NULL, rrs, 0);
	if (n > 0 || qt == NX_DNS_T_CNAME) {
		return n;
	}
	const uint8_t *name = qname, *owner = NULL;
	size_t len = qlen;
	for (unsigned hop = 0; hop < LOCAL_CHAIN_MAX; hop++) {
		size_t first = 0, count = 0;
		/* A name with a CNAME answers every type with it (RFC 1034 3.6.2). */
		if (nx_conf_local_find(c, name, len, NX_DNS_T_CNAME, &first, &count) < 0 ||
		    n >= LOCAL_RRS_MAX) {
			break;
		}
		const struct nx_conf_local *l = &c->locals[first];
		rrs[n++] = (struct nx_dns_rr_spec){.owner = owner,
						   .owner_len = owner ? len : 0,
						   .type = NX_DNS_T_CNAME,
						   .ttl = l->ttl,
						   .rdata = l->rdata,
						   .rdlen = l->rdlen};
		name = owner = l->rdata;
		len = l->rdlen;
		if (!nx_conf_local_has_name(c, name, len)) {
			*tail = name;
			*tail_len = len;
			return n;
		}
		size_t before = n;
		n = append_records(c, name, len, qt, owner, rrs, n);
		if (n > before) {
			return n;
		}
	}
	if (n == 0 && qt == NX_DNS_T_PTR) {
		uint8_t addr[16];
		size_t alen = reverse_addr(qname, qlen, addr);
		if (alen) {
			n = generated_ptrs(c, addr, alen, rrs, n, LOCAL_RRS_MAX);
		}
	}
	return n;
}

int nx_policy_local_answer(const struct nx_policy *p, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx,
			   uint8_t cname_target[NX_DNS_NAME_MAX], size_t *cname_len)
{
	if (cname_len) {
		*cname_len = 0;
	}
	/* The ladder's LOCAL verdict has two sources: local records and, just below them, the
	 * special-use names; local records win here as they do in the ladder. */
	struct nx_filter_result sr;
	if (!nx_policy_local_has(p->c, ctx->q->name, ctx->q->name_len) &&
	    nx_policy_special_match(p->c, ctx->q->name, ctx->q->name_len, ctx->q->qtype, &sr) &&
	    sr.action == NX_FILTER_ACT_LOCAL) {
		nx_policy_special_count((enum nx_filter_reason)sr.reason);
		return nx_policy_special_answer(p, out, cap, ctx, (enum nx_filter_reason)sr.reason);
	}
	uint8_t name[NX_DNS_NAME_MAX];
	memcpy(name, ctx->q->name, ctx->q->name_len);
	nx_dns_name_lower(name, ctx->q->name_len);
	struct nx_dns_rr_spec rrs[LOCAL_RRS_MAX];
	const uint8_t *tail;
	size_t tl;
	size_t n = local_rrs(p->c, name, ctx->q->name_len, ctx->q->qtype, rrs, &tail, &tl);
	if (cname_len) {
		*cname_len = tl;
		if (tl) {
			memcpy(cname_target, tail, tl);
		}
	}
	return nx_dns_build_answer(out, cap, ctx, NX_DNS_NOERROR, true, rrs, n, NULL, 0, -1, NULL);
}

/* Records taken from the upstream answer of a CNAME target: a stub resolver needs the target's
 * addresses, a chain of a few CNAMEs at most before them (more are cut: counted nowhere, the
 * answer stays valid, just shorter). */
#define SPLICE_RRS_MAX 16

/* Room for one record's decompressed owner and rdata. */
struct splice_rr {
	uint8_t owner[NX_DNS_NAME_MAX];
	uint8_t rdata[6 + NX_DNS_NAME_MAX]; /* the fixed fields before a name (SRV: 6) + it */
};

/*
 * The rdata of an upstream record as the builder can copy it: names decompressed for the types
 * that may compress them (RFC 3597 3: only the RFC 1035 types; SRV's target for servers that
 * compress it anyway). Returns the rdata pointer (into s or into the message), or NULL.
 */
static const uint8_t *splice_rdata(const uint8_t *buf, const struct nx_dns_msg *m, size_t at,
				   uint16_t type, uint16_t rdlen, struct splice_rr *s,
				   uint16_t *out_len)
{
	size_t fixed;
	switch (type) {
	case NX_DNS_T_CNAME:
	case NX_DNS_T_PTR:
	case NX_DNS_T_NS:
		fixed = 0;
		break;
	case NX_DNS_T_MX:
		fixed = 2;
		break;
	case 33: /* SRV */
		fixed = 6;
		break;
	default:
		*out_len = rdlen;
		return buf + at;
	}
	if (rdlen < fixed + 1) {
		return NULL;
	}
	memcpy(s->rdata, buf + at, fixed);
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, m->len);
	rd.pos = at + fixed;
	size_t nl = nx_dns_rd_name(&rd, s->rdata + fixed);
	if (rd.err || nl == 0) {
		return NULL;
	}
	nx_dns_name_lower(s->rdata + fixed, nl);
	*out_len = (uint16_t)(fixed + nl);
	return s->rdata;
}

/* SOA records taken from upstream's authority section: one is what a negative answer has. */
#define SPLICE_SOA_MAX 2

struct splice_soa {
	uint8_t owner[NX_DNS_NAME_MAX];
	uint8_t rdata[2 * NX_DNS_NAME_MAX + 20]; /* MNAME, RNAME, five 32-bit fields */
};

/*
 * The SOA records of the authority section of up/um (validated by the engine), decompressed
 * into soa[] and described in auth[]; TTL per RFC 2308 5: min(the record's TTL, MINIMUM).
 * Other authority records (NS of a referral-shaped answer) are not a stub's business. Returns
 * how many.
 */
static size_t splice_soas(const uint8_t *up, const struct nx_dns_msg *um,
			  struct splice_soa soa[SPLICE_SOA_MAX],
			  struct nx_dns_rr_spec auth[SPLICE_SOA_MAX])
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, up, um->len);
	rd.pos = um->answer_end;
	size_t n = 0;
	for (unsigned i = 0; i < um->nscount && n < SPLICE_SOA_MAX; i++) {
		struct splice_soa *s = &soa[n];
		size_t ol = nx_dns_rd_name(&rd, s->owner);
		uint16_t type = nx_dns_rd_u16(&rd);
		nx_dns_rd_u16(&rd); /* class */
		uint32_t ttl = nx_dns_rd_u32(&rd);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		if (rd.err || ol == 0 || nx_dns_rd_left(&rd) < rdlen) {
			return n;
		}
		size_t end = rd.pos + rdlen;
		if (type != NX_DNS_T_SOA) {
			rd.pos = end;
			continue;
		}
		size_t ml = nx_dns_rd_name(&rd, s->rdata);
		size_t rl = ml ? nx_dns_rd_name(&rd, s->rdata + ml) : 0;
		if (rd.err || ml == 0 || rl == 0 || rd.pos + 20 != end) {
			return n; /* the engine validated it: cannot happen */
		}
		memcpy(s->rdata + ml + rl, up + rd.pos, 20);
		rd.pos += 16; /* SERIAL, REFRESH, RETRY, EXPIRE */
		uint32_t minimum = nx_dns_rd_u32(&rd);
		rd.pos = end;
		/* names compressed against the question carry the engine's 0x20 scrambling */
		nx_dns_name_lower(s->owner, ol);
		nx_dns_name_lower(s->rdata, ml);
		nx_dns_name_lower(s->rdata + ml, rl);
		auth[n++] = (struct nx_dns_rr_spec){.owner = s->owner,
						    .owner_len = ol,
						    .type = NX_DNS_T_SOA,
						    .ttl = NX_MIN(ttl, minimum),
						    .rdata = s->rdata,
						    .rdlen = (uint16_t)(ml + rl + 20)};
	}
	return n;
}

int nx_policy_local_splice(const struct nx_policy *p, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx, const uint8_t *up,
			   const struct nx_dns_msg *um)
{
	uint8_t name[NX_DNS_NAME_MAX];
	memcpy(name, ctx->q->name, ctx->q->name_len);
	nx_dns_name_lower(name, ctx->q->name_len);
	struct nx_dns_rr_spec rrs[LOCAL_RRS_MAX + SPLICE_RRS_MAX];
	const uint8_t *tail;
	size_t tl;
	size_t n = local_rrs(p->c, name, ctx->q->name_len, ctx->q->qtype, rrs, &tail, &tl);
	struct splice_rr scratch[SPLICE_RRS_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, up, um->len);
	rd.pos = um->question_end;
	size_t taken = 0;
	for (unsigned i = 0; tl && i < um->ancount && taken < SPLICE_RRS_MAX; i++) {
		struct splice_rr *s = &scratch[taken];
		size_t ol = nx_dns_rd_name(&rd, s->owner);
		uint16_t type = nx_dns_rd_u16(&rd);
		nx_dns_rd_u16(&rd); /* class: IN, as the question's */
		uint32_t ttl = nx_dns_rd_u32(&rd);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		if (rd.err || ol == 0 || nx_dns_rd_left(&rd) < rdlen) {
			return NX_EMALFORMED; /* validated by the engine: cannot happen */
		}
		/* the engine's 0x20 case scrambling of the question stays inside nxdns */
		nx_dns_name_lower(s->owner, ol);
		size_t at = rd.pos;
		rd.pos += rdlen;
		uint16_t dl = 0;
		const uint8_t *data = splice_rdata(up, um, at, type, rdlen, s, &dl);
		if (!data) {
			return NX_EMALFORMED;
		}
		rrs[n++] = (struct nx_dns_rr_spec){.owner = s->owner,
						   .owner_len = ol,
						   .type = type,
						   .ttl = ttl,
						   .rdata = data,
						   .rdlen = dl};
		taken++;
	}
	/* A negative answer for the target (NXDOMAIN, or NODATA) carries the SOA that lets the
	 * stub cache it (RFC 2308 3 and 5): copied from upstream's authority section, names
	 * decompressed, with the negative TTL min(SOA TTL, SOA MINIMUM) a recursive sends. */
	struct nx_dns_rr_spec auth[SPLICE_SOA_MAX];
	struct splice_soa soa[SPLICE_SOA_MAX];
	size_t nauth = 0;
	if (tl) {
		nauth = splice_soas(up, um, soa, auth);
	}
	/* The rcode is the chain's last name's (RFC 6604 2.1): NXDOMAIN when the target has none.
	 * Not authoritative: the tail is upstream's data, not ours. */
	int rcode = um->flags & 0xf;
	return nx_dns_build_answer(out, cap, ctx, rcode, false, rrs, n, auth, nauth, -1, NULL);
}

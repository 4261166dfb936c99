/*
 * Reply builders and the relay (memcpy + patches). See dns/msg.h.
 */
#include "dns/msg.h"

#include <string.h>

#include "base/err.h"
#include "dns/impl.h"

#define EDNS_OPT_EDE 15
#define OPT_FIXED_LEN 11 /* root owner, type, class, ttl, rdlength */
#define EDE_FIXED_LEN 6	 /* option code, option length, info-code */
#define TTL_MAX 0x7fffffffu
#define QNAME_PTR 0xc00c /* compression pointer to the question name at offset 12 */
#define OPCODE_MASK 0x7800

/* An OPT we emit: our payload size, DO echoed, optional extended rcode and EDE. */
struct opt_spec {
	bool on;
	bool do_bit;
	uint8_t ext_rcode;
	int ede;
	const char *text; /* borrowed, not NUL-terminated */
	size_t text_len;
};

static size_t opt_size(const struct opt_spec *o)
{
	if (!o->on) {
		return 0;
	}
	return OPT_FIXED_LEN + (o->ede >= 0 ? EDE_FIXED_LEN + o->text_len : 0);
}

static void wr_opt(struct nx_dns_wr *wr, const struct opt_spec *o)
{
	if (!o->on) {
		return;
	}
	nx_dns_wr_u8(wr, 0);
	nx_dns_wr_u16(wr, NX_DNS_T_OPT);
	nx_dns_wr_u16(wr, NX_DNS_EDNS_OUR_SIZE);
	nx_dns_wr_u32(wr, ((uint32_t)o->ext_rcode << 24) | (o->do_bit ? 0x8000u : 0));
	if (o->ede < 0) {
		nx_dns_wr_u16(wr, 0);
		return;
	}
	nx_dns_wr_u16(wr, (uint16_t)(EDE_FIXED_LEN + o->text_len));
	nx_dns_wr_u16(wr, EDNS_OPT_EDE);
	nx_dns_wr_u16(wr, (uint16_t)(2 + o->text_len));
	nx_dns_wr_u16(wr, (uint16_t)o->ede);
	nx_dns_wr_bytes(wr, o->text, o->text_len);
}

static size_t text_len(const char *t)
{
	return t ? strnlen(t, NX_DNS_EDE_TEXT_MAX) : 0;
}

/* Our OPT for a reply; splits a 12-bit rcode into header and OPT parts. */
static uint16_t reply_opt(const struct nx_dns_reply_ctx *ctx, int rcode, int ede,
			  const char *ede_text, struct opt_spec *o)
{
	o->on = ctx->edns;
	o->do_bit = ctx->do_bit;
	o->ext_rcode = 0;
	o->ede = ede > 0xffff ? NX_DNS_EDE_NONE : ede;
	o->text = ede_text;
	o->text_len = o->ede >= 0 ? text_len(ede_text) : 0;
	if (rcode < 0 || rcode > 0xfff) {
		return NX_DNS_SERVFAIL;
	}
	if (rcode > 0xf) {
		if (!ctx->edns) {
			return NX_DNS_SERVFAIL; /* not expressible without OPT */
		}
		o->ext_rcode = (uint8_t)(rcode >> 4);
	}
	return (uint16_t)(rcode & 0xf);
}

static uint16_t reply_flags(const struct nx_dns_reply_ctx *ctx, uint16_t rcode4, bool aa)
{
	return (uint16_t)(NX_DNS_F_QR | NX_DNS_F_RA | (ctx->qflags & OPCODE_MASK) |
			  (ctx->qflags & (NX_DNS_F_RD | NX_DNS_F_CD)) | (aa ? NX_DNS_F_AA : 0) |
			  rcode4);
}

static size_t max_size(const struct nx_dns_reply_ctx *ctx, size_t cap)
{
	size_t m = ctx->max_size == 0 ? NX_DNS_MSG_MAX : NX_MIN(ctx->max_size, NX_DNS_MSG_MAX);
	return NX_MIN(m, cap);
}

static void wr_header(struct nx_dns_wr *wr, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
		      uint16_t ns, uint16_t ar)
{
	nx_dns_wr_u16(wr, id);
	nx_dns_wr_u16(wr, flags);
	nx_dns_wr_u16(wr, qd);
	nx_dns_wr_u16(wr, an);
	nx_dns_wr_u16(wr, ns);
	nx_dns_wr_u16(wr, ar);
}

static void wr_question(struct nx_dns_wr *wr, const struct nx_dns_question *q)
{
	if (q) {
		nx_dns_wr_name(wr, q->name, q->name_len);
		nx_dns_wr_u16(wr, q->qtype);
		nx_dns_wr_u16(wr, q->qclass);
	}
}

/* Header + question (+OPT): error replies and the truncated form of anything. */
static int write_short(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx, uint16_t flags,
		       const struct opt_spec *o)
{
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, out, cap);
	wr_header(&wr, ctx->id, flags, ctx->q ? 1 : 0, 0, 0, o->on ? 1 : 0);
	wr_question(&wr, ctx->q);
	wr_opt(&wr, o);
	return wr.err ? NX_ETRUNC : (int)wr.pos;
}

int nx_dns_build_error(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx, int rcode,
		       int ede, const char *ede_text)
{
	struct opt_spec o;
	uint16_t rc4 = reply_opt(ctx, rcode, ede, ede_text, &o);
	return write_short(out, max_size(ctx, cap), ctx, reply_flags(ctx, rc4, false), &o);
}

static bool wr_rrs(struct nx_dns_wr *wr, const struct nx_dns_question *q,
		   const struct nx_dns_rr_spec *rrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct nx_dns_rr_spec *rr = &rrs[i];
		if (rr->owner) {
			nx_dns_wr_name(wr, rr->owner, rr->owner_len);
		} else if (q) {
			nx_dns_wr_u16(wr, QNAME_PTR);
		} else {
			return false;
		}
		nx_dns_wr_u16(wr, rr->type);
		nx_dns_wr_u16(wr, q ? q->qclass : NX_DNS_C_IN);
		nx_dns_wr_u32(wr, rr->ttl);
		nx_dns_wr_u16(wr, rr->rdlen);
		nx_dns_wr_bytes(wr, rr->rdata, rr->rdlen);
	}
	return true;
}

int nx_dns_build_answer(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx, int rcode,
			bool aa, const struct nx_dns_rr_spec *rrs, size_t n_rrs,
			const struct nx_dns_rr_spec *authority, size_t n_auth, int ede,
			const char *ede_text)
{
	if (n_rrs > UINT16_MAX || n_auth > UINT16_MAX) {
		return NX_ETRUNC;
	}
	struct opt_spec o;
	uint16_t flags = reply_flags(ctx, reply_opt(ctx, rcode, ede, ede_text, &o), aa);
	size_t limit = max_size(ctx, cap);
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, out, limit);
	wr_header(&wr, ctx->id, flags, ctx->q ? 1 : 0, (uint16_t)n_rrs, (uint16_t)n_auth,
		  o.on ? 1 : 0);
	wr_question(&wr, ctx->q);
	if (!wr_rrs(&wr, ctx->q, rrs, n_rrs) || !wr_rrs(&wr, ctx->q, authority, n_auth)) {
		return NX_EMALFORMED; /* owner NULL without a question */
	}
	wr_opt(&wr, &o);
	if (!wr.err) {
		return (int)wr.pos;
	}
	return write_short(out, limit, ctx, flags | NX_DNS_F_TC, &o);
}

int nx_dns_build_any_hinfo(uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx,
			   uint32_t ttl)
{
	/* RFC 8482 4.2: HINFO with CPU "RFC8482" and an empty OS */
	static const uint8_t rdata[] = {7, 'R', 'F', 'C', '8', '4', '8', '2', 0};
	struct nx_dns_rr_spec rr = {
	    .type = NX_DNS_T_HINFO, .ttl = ttl, .rdata = rdata, .rdlen = sizeof(rdata)};
	if (!ctx->q) {
		return NX_EMALFORMED;
	}
	return nx_dns_build_answer(out, cap, ctx, NX_DNS_NOERROR, false, &rr, 1, NULL, 0,
				   NX_DNS_EDE_NONE, NULL);
}

int nx_dns_build_query(uint8_t *out, size_t cap, uint16_t id, const struct nx_dns_question *q,
		       bool do_bit, bool cd)
{
	struct opt_spec o = {.on = true, .do_bit = do_bit, .ede = NX_DNS_EDE_NONE};
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, out, cap);
	wr_header(&wr, id, (uint16_t)(NX_DNS_F_RD | (cd ? NX_DNS_F_CD : 0)), 1, 0, 0, 1);
	wr_question(&wr, q);
	wr_opt(&wr, &o);
	return wr.err ? NX_ETRUNC : (int)wr.pos;
}

static uint32_t ttl_minus(uint32_t v, uint32_t sub)
{
	if (v > TTL_MAX) {
		v = 0; /* RFC 2181 8 */
	}
	return v > sub ? v - sub : 0;
}

/* Slow path for replies with more RRs than ttl_off holds: walk the (validated) copy. */
static void sub_ttls_walk(uint8_t *out, size_t len, const struct nx_dns_msg *up, unsigned n_rrs,
			  uint32_t sub)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, out, len);
	rd.pos = up->question_end;
	for (unsigned i = 0; i < n_rrs && !rd.err; i++) {
		nx_dns_rd_skip_name(&rd);
		uint16_t type = nx_dns_rd_u16(&rd);
		nx_dns_rd_skip(&rd, 2);
		size_t ttl_off = rd.pos;
		nx_dns_rd_skip(&rd, 4);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		nx_dns_rd_skip(&rd, rdlen);
		if (!rd.err && type != NX_DNS_T_OPT) {
			nx_dns_put32(out + ttl_off, ttl_minus(nx_dns_get32(out + ttl_off), sub));
		}
	}
}

int nx_dns_relay(uint8_t *out, size_t cap, const uint8_t *ubuf, const struct nx_dns_msg *up,
		 const struct nx_dns_reply_ctx *ctx, uint32_t ttl_sub, int ede,
		 const char *ede_text, bool *truncated)
{
	if (truncated) {
		*truncated = false;
	}
	bool rewrite = ctx->q && up->has_question;
	/*
	 * The parser guarantees the first question name is stored uncompressed at offset 12, so
	 * an equal (case-insensitive) name can be copied over it byte for byte.
	 */
	if (rewrite && (up->len < NX_DNS_HDR_LEN + (size_t)up->q.name_len ||
			!nx_dns_name_eq(ubuf + NX_DNS_HDR_LEN, up->q.name_len, ctx->q->name,
					ctx->q->name_len))) {
		return NX_EMALFORMED;
	}
	/* Drop the upstream OPT and every additional RR after it (offsets before it stay valid). */
	size_t keep = up->opt_off ? up->opt_off : up->len;
	uint16_t arcount = up->opt_off ? up->opt_index : up->arcount;

	struct opt_spec o = {.on = ctx->edns, .do_bit = ctx->do_bit, .ede = NX_DNS_EDE_NONE};
	if (ede >= 0 && ede <= 0xffff) {
		o.ede = ede;
		o.text = ede_text;
		o.text_len = text_len(ede_text);
	} else if (up->edns.ede_code >= 0) {
		o.ede = up->edns.ede_code;
		o.text = up->edns.ede_text;
		o.text_len = up->edns.ede_text_len;
	}
	uint16_t flags =
	    (uint16_t)((nx_dns_get16(ubuf + 2) & ~NX_DNS_F_RD) | (ctx->qflags & NX_DNS_F_RD));
	if (up->edns.ext_rcode) {
		if (ctx->edns) {
			o.ext_rcode = up->edns.ext_rcode;
		} else {
			flags = (uint16_t)((flags & ~0xf) | NX_DNS_SERVFAIL);
		}
	}

	size_t limit = max_size(ctx, cap);
	size_t total = keep + opt_size(&o);
	if (total > limit) {
		int n = write_short(out, limit, ctx, flags | NX_DNS_F_TC, &o);
		if (n >= 0 && truncated) {
			*truncated = true;
		}
		return n;
	}

	memcpy(out, ubuf, keep);
	nx_dns_put16(out, ctx->id);
	nx_dns_put16(out + 2, flags);
	nx_dns_put16(out + 10, (uint16_t)(arcount + (o.on ? 1 : 0)));
	if (rewrite) {
		memcpy(out + NX_DNS_HDR_LEN, ctx->q->name, ctx->q->name_len);
	}
	if (up->ttl_overflow) {
		sub_ttls_walk(out, keep, up, (unsigned)up->ancount + up->nscount + arcount,
			      ttl_sub);
	} else {
		for (unsigned i = 0; i < up->ttl_count; i++) {
			size_t off = up->ttl_off[i];
			if (off + 4 > keep) {
				break; /* in message order: the rest lies after the dropped OPT */
			}
			nx_dns_put32(out + off, ttl_minus(nx_dns_get32(out + off), ttl_sub));
		}
	}
	struct nx_dns_wr wr = {.base = out, .cap = limit, .pos = keep};
	wr_opt(&wr, &o);
	if (nx_fails_assert(!wr.err && wr.pos == total)) {
		return NX_ETRUNC;
	}
	return (int)total;
}

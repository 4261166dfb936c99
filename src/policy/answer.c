/* The block answer: filter.block_mode's form, EDE 15 naming what blocked it. */
#include "policy/policy.h"

#include <string.h>

#include "base/err.h"

int nx_policy_block_answer(const struct nx_policy *p, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx, const struct nx_filter_result *r)
{
	const struct nx_conf *c = p->c;
	/* "blocked by list NAME" / "blocked by rule TEXT", cut to the EDE bound: built by hand,
	 * as this runs for every blocked query. */
	char ede[NX_DNS_EDE_TEXT_MAX];
	const char *head =
	    r->reason == NX_FILTER_R_user_deny ? "blocked by rule " : "blocked by list ";
	size_t hl = strlen(head);
	memcpy(ede, head, hl);
	const char *src = nx_policy_source_name(p, r);
	size_t sl = strnlen(src, sizeof(ede) - 1 - hl);
	memcpy(ede + hl, src, sl);
	ede[hl + sl] = 0;
	uint16_t qt = ctx->q ? ctx->q->qtype : 0;
	static const uint8_t zero4[4], zero16[16];
	struct nx_dns_rr_spec rr = {.type = qt, .ttl = c->block_ttl};
	switch (c->block_mode_id) {
	case NX_CONF_BLOCK_NXDOMAIN:
		return nx_dns_build_answer(out, cap, ctx, NX_DNS_NXDOMAIN, false, NULL, 0, NULL, 0,
					   NX_DNS_EDE_BLOCKED, ede);
	case NX_CONF_BLOCK_REFUSED:
		return nx_dns_build_error(out, cap, ctx, NX_DNS_REFUSED, NX_DNS_EDE_BLOCKED, ede);
	case NX_CONF_BLOCK_CUSTOM:
		if (qt == NX_DNS_T_A && c->has_block_v4) {
			rr.rdata = c->block_v4;
			rr.rdlen = 4;
		} else if (qt == NX_DNS_T_AAAA && c->has_block_v6) {
			rr.rdata = c->block_v6;
			rr.rdlen = 16;
		}
		break;
	default: /* null */
		if (qt == NX_DNS_T_A) {
			rr.rdata = zero4;
			rr.rdlen = 4;
		} else if (qt == NX_DNS_T_AAAA) {
			rr.rdata = zero16;
			rr.rdlen = 16;
		}
		break;
	}
	return nx_dns_build_answer(out, cap, ctx, NX_DNS_NOERROR, false, rr.rdata ? &rr : NULL,
				   rr.rdata ? 1 : 0, NULL, 0, NX_DNS_EDE_BLOCKED, ede);
}

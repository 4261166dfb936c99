#include "daemon/decide.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "dns/wire.h"

void nx_decide_policy(const struct nx_decide_ctx *d, const struct sockaddr *client,
		      const char *client_id, struct nx_client_policy *p)
{
	nx_conf_client_policy_id(d->c, client, client_id, &p->eligible, &p->filtering,
				 &p->client);
	if (!d->c->filter_enabled || d->paused) {
		p->filtering = false;
	}
}

/* Wire offset of label number `label` (0 = the whole name). */
static uint16_t wire_label_off(const uint8_t *wire, size_t wlen, unsigned label)
{
	size_t off = 0;
	while (label-- > 0 && off < wlen && wire[off] != 0) {
		off += 1u + wire[off];
	}
	return (uint16_t)NX_MIN(off, wlen);
}

enum nx_filter_action nx_decide(const struct nx_decide_ctx *d, const struct nx_client_policy *p,
				const uint8_t *wire, size_t wlen, struct nx_filter_result *out)
{
	nx_filter_result_clear(out);
	const struct nx_conf *c = d->c;
	if (c->n_locals > 0 && nx_conf_local_has_name(c, wire, wlen)) {
		out->action = NX_FILTER_ACT_LOCAL;
		out->reason = NX_FILTER_R_local_record;
		out->matched_off = 0;
		out->matched_len = (uint16_t)wlen;
		return NX_FILTER_ACT_LOCAL;
	}
	if (!p->filtering) {
		if (d->paused) {
			out->reason = NX_FILTER_R_paused;
		}
		return NX_FILTER_ACT_NONE;
	}
	if (d->rules && (nx_filter_rules_count(d->rules, NX_FILTER_RULES_ALLOW) > 0 ||
			 nx_filter_rules_count(d->rules, NX_FILTER_RULES_DENY) > 0)) {
		char text[NX_DNS_TEXT_MAX];
		int tl = nx_dns_name_to_text(wire, wlen, text, sizeof(text));
		if (tl > 0) {
			for (int i = 0; i < tl; i++) {
				if (text[i] >= 'A' && text[i] <= 'Z') {
					text[i] = (char)(text[i] + 32);
				}
			}
			static const enum nx_filter_rule_list lists[] = {NX_FILTER_RULES_ALLOW,
									 NX_FILTER_RULES_DENY};
			for (int k = 0; k < 2; k++) {
				if (nx_filter_rules_match(d->rules, lists[k], text, (size_t)tl, 0,
							  out) != NX_FILTER_ACT_NONE) {
					unsigned dots = 0;
					for (unsigned j = 0; j < out->matched_off && j < (unsigned)tl; j++) {
						dots += text[j] == '.';
					}
					out->matched_off = wire_label_off(wire, wlen, dots);
					out->matched_len = (uint16_t)(wlen - out->matched_off);
					return (enum nx_filter_action)out->action;
				}
			}
		}
	}
	return nx_filter_snap_match_wire(d->snap, wire, wlen, p->eligible, out);
}

bool nx_decide_cname(const struct nx_decide_ctx *d, const struct nx_client_policy *p,
		     const uint8_t *buf, const struct nx_dns_msg *m, struct nx_filter_result *out,
		     uint8_t matched_wire[NX_DNS_NAME_MAX], size_t *matched_len)
{
	if (!p->filtering || m->ancount == 0) {
		return false;
	}
	/* TTL offsets are in message order: the first ancount belong to the answer section. */
	unsigned n = NX_MIN(m->ancount, m->ttl_count);
	for (unsigned i = 0; i < n; i++) {
		size_t t = m->ttl_off[i];
		if (t < 4 || t + 6 > m->len) {
			continue;
		}
		uint16_t type = (uint16_t)((buf[t - 4] << 8) | buf[t - 3]);
		if (type != NX_DNS_T_CNAME) {
			continue;
		}
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, buf, m->len);
		rd.pos = t + 6;
		uint8_t target[NX_DNS_NAME_MAX];
		size_t tl = nx_dns_rd_name(&rd, target);
		if (tl == 0) {
			continue;
		}
		struct nx_client_policy q = *p;
		struct nx_filter_result r;
		/* Local records of the target are not a reason to block. */
		struct nx_decide_ctx dd = *d;
		if (nx_decide(&dd, &q, target, tl, &r) == NX_FILTER_ACT_BLOCK) {
			*out = r;
			memcpy(matched_wire, target + r.matched_off, r.matched_len);
			*matched_len = r.matched_len;
			out->matched_off = 0;
			return true;
		}
	}
	return false;
}

const char *nx_decide_source_name(const struct nx_decide_ctx *d, const struct nx_filter_result *r)
{
	if (r->source >= 0 && (size_t)r->source < d->c->n_sources) {
		return d->c->sources[r->source].name;
	}
	if (r->reason == NX_FILTER_R_user_deny && d->rules && r->rule >= 0) {
		return nx_filter_rules_text(d->rules, NX_FILTER_RULES_DENY, (unsigned)r->rule);
	}
	if (r->reason == NX_FILTER_R_user_allow && d->rules && r->rule >= 0) {
		return nx_filter_rules_text(d->rules, NX_FILTER_RULES_ALLOW, (unsigned)r->rule);
	}
	return "";
}

int nx_decide_block_answer(const struct nx_decide_ctx *d, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx, const struct nx_filter_result *r)
{
	const struct nx_conf *c = d->c;
	/* "blocked by list NAME" / "blocked by rule TEXT", cut to the EDE bound: built by hand,
	 * as this runs for every blocked query. */
	char ede[NX_DNS_EDE_TEXT_MAX];
	const char *head = r->reason == NX_FILTER_R_user_deny ? "blocked by rule " : "blocked by list ";
	size_t hl = strlen(head);
	memcpy(ede, head, hl);
	const char *src = nx_decide_source_name(d, r);
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

int nx_decide_local_answer(const struct nx_decide_ctx *d, uint8_t *out, size_t cap,
			   const struct nx_dns_reply_ctx *ctx)
{
	const struct nx_conf *c = d->c;
	uint8_t name[NX_DNS_NAME_MAX];
	memcpy(name, ctx->q->name, ctx->q->name_len);
	nx_dns_name_lower(name, ctx->q->name_len);
	size_t first = 0, count = 0;
	uint16_t qt = ctx->q->qtype;
	nx_conf_local_find(c, name, ctx->q->name_len, qt, &first, &count);
	if (count == 0 && qt != NX_DNS_T_CNAME) {
		/* A name with a CNAME answers every type with it (RFC 1034 3.6.2). */
		nx_conf_local_find(c, name, ctx->q->name_len, NX_DNS_T_CNAME, &first, &count);
	}
	enum { MAX_RRS = 32 };
	struct nx_dns_rr_spec rrs[MAX_RRS];
	size_t n = NX_MIN(count, (size_t)MAX_RRS);
	for (size_t i = 0; i < n; i++) {
		const struct nx_conf_local *l = &c->locals[first + i];
		rrs[i] = (struct nx_dns_rr_spec){
			.type = l->type, .ttl = l->ttl, .rdata = l->rdata, .rdlen = l->rdlen};
	}
	return nx_dns_build_answer(out, cap, ctx, NX_DNS_NOERROR, true, rrs, n, NULL, 0, -1, NULL);
}

/* filter.allow / filter.deny, compiled once per generation (the loader validated them). */
int nx_decide_rules_build(const struct nx_conf *c, struct nx_filter_rules **out)
{
	struct nx_filter_rules *r = NULL;
	int rc = nx_filter_rules_new(&r);
	char err[256];
	for (size_t i = 0; rc >= 0 && i < c->n_allow_rules; i++) {
		rc = nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, c->allow_rules[i], 0, err,
					 sizeof(err));
	}
	for (size_t i = 0; rc >= 0 && i < c->n_deny_rules; i++) {
		rc = nx_filter_rules_add(r, NX_FILTER_RULES_DENY, c->deny_rules[i], 0, err,
					 sizeof(err));
	}
	if (rc >= 0) {
		rc = nx_filter_rules_finish(r);
	}
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "filter", "user rules: %s", rc == NX_ECONFIG ? err : nx_strerror(rc));
		nx_filter_rules_free(r);
		return rc;
	}
	*out = r;
	return 0;
}


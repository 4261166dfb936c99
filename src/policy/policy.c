/* The decision ladder: one row per level, first match wins (README.md has the same table). */
#include "policy/policy.h"

#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "dns/wire.h"
#include "filter/lists.h"
#include "policy/badfilter.h"

/* RFC 9460: SVCB's type code (HTTPS, 65, is in dns/msg.h). */
#define T_SVCB 64

void nx_policy_query_init(const struct nx_policy *p, struct nx_policy_query *q, const uint8_t *wire,
			  size_t wlen, uint16_t qtype, const struct sockaddr *addr,
			  const char *client_id)
{
	const struct nx_conf *c = p->c;
	*q = (struct nx_policy_query){
	    .wire = wire,
	    .wlen = wlen,
	    .qtype = qtype,
	    .addr = addr,
	    .client_id = client_id ? client_id : "",
	};
	nx_conf_client_policy_id(c, addr, client_id, &q->eligible, &q->filtering, &q->client);
	if (q->client >= 0) {
		const struct nx_conf_client *cl = &c->clients[q->client];
		q->client_name = cl->name;
		q->groups = cl->groups_mask;
		q->tags = (const char *const *)cl->tags;
		q->ntags = cl->n_tags;
	} else {
		q->groups = UINT64_C(1); /* groups[0] is "default" */
	}
	if (!c->filter_enabled || p->paused) {
		q->filtering = false;
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

/*
 * A level looks at the query and either settles the verdict (fills out, returns true) or lets
 * the next level look (returns false, out untouched). Adding a level is one function and one
 * row of ladder[].
 */
typedef bool (*level_fn)(const struct nx_policy *p, const struct nx_policy_query *q,
			 struct nx_filter_result *out);

/* Local records answer whatever the filter says: pausing filtering must not make the LAN's own
 * names disappear (upstream does not know them). */
static bool level_local(const struct nx_policy *p, const struct nx_policy_query *q,
			struct nx_filter_result *out)
{
	if (!nx_policy_local_has(p->c, q->wire, q->wlen)) {
		return false;
	}
	out->action = NX_FILTER_ACT_LOCAL;
	out->reason = NX_FILTER_R_local_record;
	out->matched_off = 0;
	out->matched_len = (uint16_t)q->wlen;
	return true;
}

/* Special-use names (special.c): before the pause, because keeping `nas` or a private
 * reverse name from the public upstreams is not filtering, and an unfiltered client's leak is
 * a leak too. Android's probe is ALLOW (never blocked): counted here, as no answer of ours
 * marks it later. */
static bool level_special(const struct nx_policy *p, const struct nx_policy_query *q,
			  struct nx_filter_result *out)
{
	if (!nx_policy_special_match(p->c, q->wire, q->wlen, q->qtype, out)) {
		return false;
	}
	if (out->action == NX_FILTER_ACT_ALLOW) {
		nx_policy_special_count((enum nx_filter_reason)out->reason);
	}
	return true;
}

/* Paused, filter.enabled off, or a client whose groups filter nothing: resolve unchecked. */
static bool level_unfiltered(const struct nx_policy *p, const struct nx_policy_query *q,
			     struct nx_filter_result *out)
{
	if (q->filtering) {
		return false;
	}
	out->action = NX_FILTER_ACT_NONE;
	out->reason = p->paused ? NX_FILTER_R_paused : NX_FILTER_R_none;
	return true;
}

static bool user_rules(const struct nx_policy *p, const struct nx_policy_query *q,
		       enum nx_filter_rule_list list, struct nx_filter_result *out)
{
	if (nx_filter_rules_count(p->rules, list) == 0) {
		return false;
	}
	char text[NX_DNS_TEXT_MAX];
	int tl = nx_dns_name_to_text(q->wire, q->wlen, text, sizeof(text));
	if (tl <= 0) {
		return false;
	}
	for (int i = 0; i < tl; i++) {
		if (text[i] >= 'A' && text[i] <= 'Z') {
			text[i] = (char)(text[i] + 32);
		}
	}
	struct nx_filter_result r;
	if (nx_filter_rules_match(p->rules, list, text, (size_t)tl, q->groups, &r) ==
	    NX_FILTER_ACT_NONE) {
		return false;
	}
	/* The rule matched a text suffix: turn its offset into the wire name's. */
	unsigned dots = 0;
	for (unsigned j = 0; j < r.matched_off && j < (unsigned)tl; j++) {
		dots += text[j] == '.';
	}
	r.matched_off = wire_label_off(q->wire, q->wlen, dots);
	r.matched_len = (uint16_t)(q->wlen - r.matched_off);
	*out = r;
	return true;
}

/* The client's view the list modifiers read ($client, $ctag, $dnstype, eligibility). */
static void lists_qctx(const struct nx_policy_query *q, struct nx_filter_qctx *fq)
{
	*fq = (struct nx_filter_qctx){
	    .wire = q->wire,
	    .wlen = q->wlen,
	    .qtype = q->qtype,
	    .client = q->addr,
	    .client_name = q->client_name,
	    .tags = q->tags,
	    .ntags = q->ntags,
	    .eligible = q->eligible,
	    .groups = q->groups,
	};
}

/*
 * The user rules written in the AdGuard language (modifiers, regexes): decided among
 * themselves with AdGuard's ranking (an exception beats a block unless $important), and taken
 * at the level of their verdict: an allow at level 3, a block (or rewrite) at level 4. A
 * regex names no part of the name: the whole name is the matched one, as for rules.h's.
 */
static bool user_side(const struct nx_policy *p, const struct nx_policy_query *q,
		      enum nx_filter_action want, struct nx_filter_result *out)
{
	if (!p->user_side) {
		return false;
	}
	struct nx_filter_qctx fq;
	lists_qctx(q, &fq);
	fq.eligible = 0; /* user rules only: no list source applies */
	struct nx_filter_result r;
	nx_filter_result_clear(&r);
	if (nx_filter_lists_decide(NULL, p->user_side, &fq, &r) != want) {
		return false;
	}
	if (r.matched_len == 0) {
		r.matched_off = 0;
		r.matched_len = (uint16_t)q->wlen;
	}
	*out = r;
	return true;
}

static bool level_user_allow(const struct nx_policy *p, const struct nx_policy_query *q,
			     struct nx_filter_result *out)
{
	return user_rules(p, q, NX_FILTER_RULES_ALLOW, out) ||
	       user_side(p, q, NX_FILTER_ACT_ALLOW, out);
}

static bool level_user_deny(const struct nx_policy *p, const struct nx_policy_query *q,
			    struct nx_filter_result *out)
{
	return user_rules(p, q, NX_FILTER_RULES_DENY, out) ||
	       user_side(p, q, NX_FILTER_ACT_BLOCK, out);
}

/* level_lists with user $badfilter rules: a snapshot verdict may name a cancelled entry,
 * then the lists decide again without it (badfilter.c). */
static __attribute__((noinline)) bool level_lists_badfilter(const struct nx_policy *p,
							    const struct nx_policy_query *q,
							    struct nx_filter_result *out)
{
	struct nx_filter_qctx fq;
	lists_qctx(q, &fq);
	if (nx_filter_lists_decide(p->snap, p->side, &fq, out) == NX_FILTER_ACT_NONE) {
		return false;
	}
	if (out->side_rule < 0) {
		nx_policy_badfilter_apply(p->badfilter, p->snap, p->side, &fq, out);
	}
	return out->action != NX_FILTER_ACT_NONE;
}

/*
 * The list levels (exceptions, exact, parents, and the side rules with their modifiers and
 * regexes) are ONE call into filter/: AdGuard's ranking lives there, with the lists.
 */
static bool level_lists(const struct nx_policy *p, const struct nx_policy_query *q,
			struct nx_filter_result *out)
{
	if (p->badfilter) {
		return level_lists_badfilter(p, q, out);
	}
	/* the usual case: the set costs the one test above (its own function keeps this one's
	 * frame and tail call as they were: callgrind, docs/benchmarks.md) */
	struct nx_filter_qctx fq;
	lists_qctx(q, &fq);
	return nx_filter_lists_decide(p->snap, p->side, &fq, out) != NX_FILTER_ACT_NONE;
}

int nx_policy_rewrite_answer(const struct nx_policy *p, const struct nx_policy_query *q,
			     uint8_t *out, size_t cap, const struct nx_dns_reply_ctx *ctx,
			     const struct nx_filter_result *r)
{
	struct nx_filter_qctx fq;
	lists_qctx(q, &fq);
	bool user = r->reason == NX_FILTER_R_user_allow || r->reason == NX_FILTER_R_user_deny;
	return nx_filter_rewrite_answer(user ? p->user_side : p->side, &fq, r, ctx,
					p->c->block_ttl, out, cap);
}

static const struct level {
	const char *name; /* as README.md's table calls it */
	level_fn fn;
} ladder[] = {
    {"local records", level_local},
    {"special-use names", level_special},
    {"pause / unfiltered client", level_unfiltered},
    {"user allow", level_user_allow},
    {"user deny", level_user_deny},
    {"list rules", level_lists},
};

static enum nx_filter_action decide_from(const struct nx_policy *p, const struct nx_policy_query *q,
					 size_t first, struct nx_filter_result *out)
{
	nx_filter_result_clear(out);
	for (size_t i = first; i < NX_ARRAY_LEN(ladder); i++) {
		if (ladder[i].fn(p, q, out)) {
			return (enum nx_filter_action)out->action;
		}
	}
	nx_filter_result_clear(out);
	return NX_FILTER_ACT_NONE;
}

enum nx_filter_action nx_policy_decide(const struct nx_policy *p, const struct nx_policy_query *q,
				       struct nx_filter_result *out)
{
	return decide_from(p, q, 0, out);
}

/* Is `target` (a name from an answer) blocked for q's client? */
static bool target_blocked(const struct nx_policy *p, const struct nx_policy_query *q,
			   const uint8_t *target, size_t tl, struct nx_filter_result *out,
			   uint8_t matched_wire[NX_DNS_NAME_MAX], size_t *matched_len)
{
	/* The whole ladder, as for a query of the same client: a local target answers locally, so
	 * it is no reason to block; the pause level passes (q is filtered). */
	struct nx_policy_query t = *q;
	t.wire = target;
	t.wlen = tl;
	struct nx_filter_result r;
	if (decide_from(p, &t, 0, &r) != NX_FILTER_ACT_BLOCK) {
		return false;
	}
	*out = r;
	if (r.rewrite != NX_FILTER_RW_NONE) {
		/* the whole target: the rewrite answer is decided on it (nx_policy_rewrite_answer) */
		memcpy(matched_wire, target, tl);
		*matched_len = tl;
		out->matched_len = (uint16_t)tl;
	} else {
		memcpy(matched_wire, target + r.matched_off, r.matched_len);
		*matched_len = r.matched_len;
	}
	out->matched_off = 0;
	return true;
}

bool nx_policy_check_answer(const struct nx_policy *p, const struct nx_policy_query *q,
			    const uint8_t *buf, const struct nx_dns_msg *m,
			    struct nx_filter_result *out, uint8_t matched_wire[NX_DNS_NAME_MAX],
			    size_t *matched_len)
{
	if (!q->filtering || m->ancount == 0) {
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
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, buf, m->len);
		rd.pos = t + 6;
		if (type == T_SVCB || type == NX_DNS_T_HTTPS) {
			/* RFC 9460 2.2: SvcPriority, then TargetName ("." = the owner itself,
			 * already decided as the question or an earlier CNAME target). */
			nx_dns_rd_skip(&rd, 2);
		} else if (type != NX_DNS_T_CNAME) {
			continue;
		}
		uint8_t target[NX_DNS_NAME_MAX];
		size_t tl = nx_dns_rd_name(&rd, target);
		if (rd.err || tl <= 1) {
			continue;
		}
		if (target_blocked(p, q, target, tl, out, matched_wire, matched_len)) {
			return true;
		}
	}
	return false;
}

/* The config's text of the user side rule r names (the side structure's copy is not
 * NUL-terminated): user rules are few, a scan of the list is cheap. */
static const char *user_side_text(const struct nx_policy *p, const struct nx_filter_result *r)
{
	size_t len = 0;
	const char *t = nx_filter_side_rule_text(p->user_side, r->side_rule, &len);
	if (!t) {
		return "";
	}
	bool deny = r->reason == NX_FILTER_R_user_deny;
	char *const *rules = deny ? p->c->deny_rules : p->c->allow_rules;
	size_t n = deny ? p->c->n_deny_rules : p->c->n_allow_rules;
	for (size_t i = 0; i < n; i++) {
		if (strlen(rules[i]) == len && memcmp(rules[i], t, len) == 0) {
			return rules[i];
		}
	}
	return "";
}

const char *nx_policy_source_name(const struct nx_policy *p, const struct nx_filter_result *r)
{
	if (r->source >= 0 && (size_t)r->source < p->c->n_sources) {
		return p->c->sources[r->source].name;
	}
	/* A special-use name's "source" is the key that decides it (enum compares: this runs for
	 * every query-log record). */
	static const struct {
		uint8_t reason;
		const char *key;
	} special_keys[] = {
	    {NX_FILTER_R_special_localhost, "special.localhost"},
	    {NX_FILTER_R_special_use_name, "special.domain_needed"},
	    {NX_FILTER_R_single_label, "special.domain_needed"},
	    {NX_FILTER_R_private_reverse, "special.bogus_priv"},
	    {NX_FILTER_R_firefox_canary, "special.firefox_canary"},
	    {NX_FILTER_R_android_probe, "special.android_probes"},
	    {NX_FILTER_R_private_relay, "special.block_private_relay"},
	    {NX_FILTER_R_ddr, "special.ddr"},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(special_keys); i++) {
		if (r->reason == special_keys[i].reason) {
			return special_keys[i].key;
		}
	}
	const char *t = NULL;
	bool user = r->reason == NX_FILTER_R_user_deny || r->reason == NX_FILTER_R_user_allow;
	if (user && r->rule < 0 && r->side_rule >= 0) {
		return user_side_text(p, r);
	}
	if (r->reason == NX_FILTER_R_user_deny && r->rule >= 0) {
		t = nx_filter_rules_text(p->rules, NX_FILTER_RULES_DENY, (unsigned)r->rule);
	} else if (r->reason == NX_FILTER_R_user_allow && r->rule >= 0) {
		t = nx_filter_rules_text(p->rules, NX_FILTER_RULES_ALLOW, (unsigned)r->rule);
	}
	return t ? t : "";
}

const char *nx_policy_verdict(enum nx_filter_action a)
{
	switch (a) {
	case NX_FILTER_ACT_BLOCK:
		return "block";
	case NX_FILTER_ACT_LOCAL:
		return "local";
	default:
		return "allow";
	}
}

/* filter.allow / filter.deny, compiled once per generation (the loader validated them). */
int nx_policy_rules_build(const struct nx_conf *c, struct nx_filter_rules **out)
{
	struct nx_filter_rules *r = NULL;
	int rc = nx_filter_rules_new(&r);
	char err[256] = "";
	/* rules of the AdGuard language go to the user side structure (nx_policy_user_side_build) */
	for (size_t i = 0; rc >= 0 && i < c->n_allow_rules; i++) {
		if (!nx_conf_rule_needs_side(c->allow_rules[i])) {
			rc = nx_filter_rules_add(r, NX_FILTER_RULES_ALLOW, c->allow_rules[i],
						 nx_conf_rule_groups(c, 0, i), err, sizeof(err));
		}
	}
	for (size_t i = 0; rc >= 0 && i < c->n_deny_rules; i++) {
		if (!nx_conf_rule_needs_side(c->deny_rules[i])) {
			rc = nx_filter_rules_add(r, NX_FILTER_RULES_DENY, c->deny_rules[i],
						 nx_conf_rule_groups(c, 1, i), err, sizeof(err));
		}
	}
	if (rc >= 0) {
		rc = nx_filter_rules_finish(r);
	}
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "filter", "user rules: %s",
		       rc == NX_ECONFIG ? err : nx_strerror(rc));
		nx_filter_rules_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int nx_policy_user_side_build(const struct nx_conf *c, struct nx_filter_side **out)
{
	*out = NULL;
	size_t n = 0;
	for (size_t i = 0; i < c->n_allow_rules; i++) {
		n += nx_conf_rule_needs_side(c->allow_rules[i]);
	}
	for (size_t i = 0; i < c->n_deny_rules; i++) {
		n += nx_conf_rule_needs_side(c->deny_rules[i]);
	}
	if (n == 0) {
		return 0; /* the common case: no side structure, level 3/4 cost one NULL test */
	}
	struct nx_filter_side_builder *b = NULL;
	int rc = nx_filter_side_builder_new(&b);
	char err[256] = "";
	for (int list = 0; rc >= 0 && list < 2; list++) {
		char *const *rules = list ? c->deny_rules : c->allow_rules;
		size_t nr = list ? c->n_deny_rules : c->n_allow_rules;
		unsigned origin = list ? NX_FILTER_ORIGIN_USER_DENY : NX_FILTER_ORIGIN_USER_ALLOW;
		for (size_t i = 0; rc >= 0 && i < nr; i++) {
			if (nx_conf_rule_needs_side(rules[i])) {
				rc = nx_filter_side_add_line_groups(b, rules[i], strlen(rules[i]),
								    origin,
								    nx_conf_rule_groups(c, list, i),
								    err, sizeof(err));
			}
		}
	}
	if (rc < 0) {
		/* the loader checked each line with the same parser: only a cap or memory */
		nx_log(NX_LOG_ERR, "filter", "user rules: %s", err[0] ? err : nx_strerror(rc));
		nx_filter_side_builder_free(b);
		return rc;
	}
	rc = nx_filter_side_build(b, out);
	if (rc == 0) {
		/* only $badfilter lines (nx_policy_badfilter_build's): no rule is left to match, so
		 * no structure, and levels 3/4 stay one NULL test instead of a walk over the name */
		struct nx_filter_side_stats st;
		nx_filter_side_stats(*out, &st);
		if (st.rules == 0) {
			nx_filter_side_free(*out);
			*out = NULL;
		}
	}
	return rc;
}

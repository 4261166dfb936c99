/*
 * A user rule `||x^$badfilter`, `|x^$badfilter`, `@@||x^$badfilter` or `@@|x^$badfilter`
 * turns that rule off in every list, as in AdGuard Home, where custom rules are how a person
 * disables a list's rule. The lists' plain rules live in the compact snapshot, compiled
 * before any config is read, so the cancellation happens here, at decision time: the list
 * level's snapshot verdict is checked against a small sorted set of (name, kinds, groups)
 * built from the config at load (README.md "User $badfilter").
 *
 * The snapshot keeps flags per (source, name), not rule texts; the forms map as the compiler
 * writes them (filter/compile.c on_name): `||x^` is EXACT+WILD, `|x^` (and a plain / hosts
 * entry) EXACT alone, `@@||x^` ALLOW_SUB (+ALLOW_EXACT), `@@|x^` ALLOW_EXACT alone.
 */
#include "policy/badfilter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "filter/parse.h"

/* What one name's badfilter rules cancel (bits of an entry's `kinds`). */
enum {
	BF_SUB = 1u << 0,	  /* ||x^$badfilter: the EXACT+WILD entry of x */
	BF_EXACT = 1u << 1,	  /* |x^$badfilter: the EXACT-only entry of x */
	BF_ALLOW_SUB = 1u << 2,	  /* @@||x^$badfilter: the ALLOW_SUB exception of x */
	BF_ALLOW_EXACT = 1u << 3, /* @@|x^$badfilter: the ALLOW_EXACT-only exception of x */
};

struct bf_entry {
	uint64_t groups;  /* config groups the rule is limited to; 0: every client */
	const char *name; /* into the pool: normalised (lower case, no trailing dot) */
	uint16_t name_len;
	uint8_t kinds; /* BF_* */
};

struct nx_policy_badfilter {
	struct bf_entry *e; /* sorted by name (length, then bytes); one per rule */
	size_t n;
	char *pool;
	size_t pool_len;
	/* bit gate_key(name): some entry's name has that (length, first byte, last byte), the
	 * first and cheapest gate (4096 bits: a few entries leave ~1% of names past it) */
	uint64_t gate[64];
};

static unsigned gate_key(size_t len, unsigned char first, unsigned char last)
{
	return (unsigned)(len * 0x9E5u ^ first * 131u ^ last * 31u) & 4095u;
}

static unsigned char fold(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* ---- build (control thread, at load) ---- */

struct classify {
	unsigned kind; /* BF_* of the line, 0: not a plain badfilter rule */
	char name[NX_FILTER_NAME_MAX + 1];
	size_t len;
};

static void on_rule(void *arg, enum nx_filter_kind kind, const char *name, size_t len)
{
	struct classify *k = arg;
	static const struct {
		enum nx_filter_kind kind;
		unsigned bf;
	} map[] = {
	    {NX_FILTER_K_BAD_ABP_SUB, BF_SUB},
	    {NX_FILTER_K_BAD_ABP_EXACT, BF_EXACT},
	    {NX_FILTER_K_BAD_ALLOW_SUB, BF_ALLOW_SUB},
	    {NX_FILTER_K_BAD_ALLOW_EXACT, BF_ALLOW_EXACT},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(map); i++) {
		if (map[i].kind == kind && len <= NX_FILTER_NAME_MAX) {
			k->kind = map[i].bf;
			memcpy(k->name, name, len);
			k->len = len;
		}
	}
}

/* The list parser's reading of one user rule: the compiler's own classification, so a form
 * the snapshot can hold is recognised exactly as a list's line would be. */
static unsigned classify(const char *rule, struct classify *k)
{
	k->kind = 0;
	if (!strstr(rule, "badfilter")) {
		return 0;
	}
	const struct nx_filter_parse_cb cb = {.rule = on_rule};
	nx_filter_parse_line(rule, strlen(rule), NX_FILTER_FMT_ADBLOCK, &cb, k);
	return k->kind;
}

static int entry_cmp_name(const char *a, size_t al, const char *b, size_t bl)
{
	if (al != bl) {
		return al < bl ? -1 : 1;
	}
	return memcmp(a, b, al);
}

static int entry_cmp(const void *x, const void *y)
{
	const struct bf_entry *a = x, *b = y;
	return entry_cmp_name(a->name, a->name_len, b->name, b->name_len);
}

int nx_policy_badfilter_build(const struct nx_conf *c, struct nx_policy_badfilter **out)
{
	*out = NULL;
	struct classify k;
	size_t n = 0, pool = 0;
	for (int list = 0; list < 2; list++) {
		char *const *rules = list ? c->deny_rules : c->allow_rules;
		size_t nr = list ? c->n_deny_rules : c->n_allow_rules;
		for (size_t i = 0; i < nr; i++) {
			if (classify(rules[i], &k)) {
				n++;
				pool += k.len;
			}
		}
	}
	if (n == 0) {
		return 0; /* the usual case: the list level costs one NULL test */
	}
	struct nx_policy_badfilter *b = nx_mem_calloc(NX_OWNER_filter_rules, 1, sizeof(*b));
	if (b) {
		b->e = nx_mem_calloc(NX_OWNER_filter_rules, n, sizeof(*b->e));
		b->pool = nx_mem_alloc(NX_OWNER_filter_rules, NX_MAX(pool, 1));
	}
	if (!b || !b->e || !b->pool) {
		nx_policy_badfilter_free(b);
		nx_log(NX_LOG_ERR, "filter", "user $badfilter rules: %s", nx_strerror(-ENOMEM));
		return -ENOMEM;
	}
	for (int list = 0; list < 2; list++) {
		char *const *rules = list ? c->deny_rules : c->allow_rules;
		size_t nr = list ? c->n_deny_rules : c->n_allow_rules;
		for (size_t i = 0; i < nr; i++) {
			if (!classify(rules[i], &k)) {
				continue;
			}
			b->e[b->n++] = (struct bf_entry){
			    .groups = nx_conf_rule_groups(c, list, i),
			    .name = b->pool + b->pool_len,
			    .name_len = (uint16_t)k.len,
			    .kinds = (uint8_t)k.kind,
			};
			memcpy(b->pool + b->pool_len, k.name, k.len);
			b->pool_len += k.len;
			unsigned g = gate_key(k.len, (unsigned char)k.name[0],
					      (unsigned char)k.name[k.len - 1]);
			b->gate[g / 64] |= UINT64_C(1) << (g % 64);
		}
	}
	qsort(b->e, b->n, sizeof(*b->e), entry_cmp);
	*out = b;
	return 0;
}

void nx_policy_badfilter_free(struct nx_policy_badfilter *b)
{
	if (!b) {
		return;
	}
	nx_mem_free(NX_OWNER_filter_rules, b->e, b->e ? b->n * sizeof(*b->e) : 0);
	nx_mem_free(NX_OWNER_filter_rules, b->pool, b->pool ? NX_MAX(b->pool_len, 1) : 0);
	nx_mem_free(NX_OWNER_filter_rules, b, sizeof(*b));
}

size_t nx_policy_badfilter_count(const struct nx_policy_badfilter *b)
{
	return b ? b->n : 0;
}

/* ---- the query path ---- */

/* BF_* bits of the rules for exactly `name` that apply to a client in `groups`. */
static unsigned bf_kinds(const struct nx_policy_badfilter *b, const char *name, size_t len,
			 uint64_t groups)
{
	size_t lo = 0, hi = b->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct bf_entry *e = &b->e[mid];
		if (entry_cmp_name(e->name, e->name_len, name, len) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	unsigned kinds = 0;
	for (; lo < b->n; lo++) {
		const struct bf_entry *e = &b->e[lo];
		if (entry_cmp_name(e->name, e->name_len, name, len) != 0) {
			break;
		}
		if (e->groups == 0 || (e->groups & groups)) {
			kinds |= e->kinds;
		}
	}
	return kinds;
}

/* One source's entry flags for a name after the cancellations `kinds` of that name. */
static uint8_t cancel(uint8_t f, unsigned kinds)
{
	const uint8_t ew = NX_FILTER_F_EXACT | NX_FILTER_F_WILD;
	if ((kinds & BF_SUB) && (f & ew) == ew) {
		f &= (uint8_t)~ew;
	}
	if ((kinds & BF_EXACT) && (f & ew) == NX_FILTER_F_EXACT) {
		f &= (uint8_t)~NX_FILTER_F_EXACT;
	}
	if ((kinds & BF_ALLOW_SUB) && (f & NX_FILTER_F_ALLOW_SUB)) {
		f &= (uint8_t) ~(NX_FILTER_F_ALLOW_SUB | NX_FILTER_F_ALLOW_EXACT);
	}
	if ((kinds & BF_ALLOW_EXACT) &&
	    (f & (NX_FILTER_F_ALLOW_SUB | NX_FILTER_F_ALLOW_EXACT)) == NX_FILTER_F_ALLOW_EXACT) {
		f &= (uint8_t)~NX_FILTER_F_ALLOW_EXACT;
	}
	return f;
}

static bool list_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/*
 * The wire name as the snapshot matcher reads it: lower-case text whose label k starts at
 * starts[k] (the wire offset of its length byte, too); *first: the first offset a suffix may
 * start at (past the last label with a byte no list name has); *wend: past the root label.
 * false for a name no list entry can match (malformed, longer than a list name).
 */
struct bf_name {
	char text[NX_FILTER_NAME_MAX + 2];
	uint16_t starts[128];
	unsigned nl;
	size_t len, first, wend;
};

static bool name_of(const uint8_t *wire, size_t wlen, struct bf_name *n)
{
	size_t t = 0, w = 0;
	n->nl = 0;
	n->first = 0;
	while (w < wlen && wire[w] != 0) {
		unsigned l = wire[w];
		if (l > 63 || w + 1 + l > wlen || n->nl == 128 ||
		    t + l + 1 > NX_FILTER_NAME_MAX + 1) {
			return false;
		}
		if (n->nl > 0) {
			n->text[t++] = '.';
		}
		n->starts[n->nl++] = (uint16_t)t;
		bool ok = true;
		for (unsigned i = 0; i < l; i++) {
			unsigned char ch = wire[w + 1 + i];
			if (ch >= 'A' && ch <= 'Z') {
				ch = (unsigned char)(ch + 32);
			}
			ok = ok && list_byte(ch);
			n->text[t++] = (char)ch;
		}
		if (!ok) {
			n->first = t + 1;
		}
		w += 1 + l;
	}
	n->len = t;
	n->wend = (w < wlen && wire[w] == 0) ? w + 1 : w;
	return n->nl > 0 && n->first < t;
}

/*
 * The snapshot's levels 7-9 (filter/snapshot.c match_from_) over the name and its parents,
 * nearest first, with every source's entry of a name reduced by that name's cancellations:
 * an exception (the name's ALLOW_EXACT, a parent's ALLOW_SUB) wins, then the name's EXACT,
 * then the nearest parent's WILD; the lowest eligible source is reported.
 */
static void walk(const struct nx_policy_badfilter *bf, const struct nx_filter_snap *snap,
		 const struct bf_name *n, uint64_t eligible, uint64_t groups,
		 struct nx_filter_result *out)
{
	nx_filter_result_clear(out);
	int exact_src = -1, wild_src = -1;
	size_t wild_off = 0;
	for (unsigned k = 0; k < n->nl; k++) {
		size_t pos = n->starts[k];
		if (pos < n->first) {
			continue;
		}
		uint8_t fl[NX_FILTER_SOURCES_MAX];
		if (nx_filter_snap_lookup(snap, n->text + pos, n->len - pos, fl) == 0) {
			continue;
		}
		unsigned kinds = bf_kinds(bf, n->text + pos, n->len - pos, groups);
		uint64_t allow = 0, block = 0;
		for (uint64_t e = eligible; e; e &= e - 1) {
			int i = __builtin_ctzll(e);
			uint8_t f = kinds ? cancel(fl[i], kinds) : fl[i];
			uint8_t af = pos == 0 ? NX_FILTER_F_ALLOW_EXACT : NX_FILTER_F_ALLOW_SUB;
			uint8_t bfl = pos == 0 ? NX_FILTER_F_EXACT : NX_FILTER_F_WILD;
			allow |= (uint64_t)((f & af) != 0) << i;
			block |= (uint64_t)((f & bfl) != 0) << i;
		}
		if (allow) {
			out->action = NX_FILTER_ACT_ALLOW;
			out->reason = NX_FILTER_R_blocklist_exception;
			out->source = (int16_t)__builtin_ctzll(allow);
			out->matched_off = (uint16_t)pos;
			out->matched_len = (uint16_t)(n->wend - pos);
			return;
		}
		if (block && pos == 0) {
			exact_src = __builtin_ctzll(block);
		} else if (block && wild_src < 0) {
			wild_src = __builtin_ctzll(block);
			wild_off = pos;
		}
	}
	if (exact_src >= 0) {
		out->action = NX_FILTER_ACT_BLOCK;
		out->reason = NX_FILTER_R_blocklist_domain;
		out->source = (int16_t)exact_src;
		out->matched_off = 0;
		out->matched_len = (uint16_t)n->wend;
	} else if (wild_src >= 0) {
		out->action = NX_FILTER_ACT_BLOCK;
		out->reason = NX_FILTER_R_blocklist_wildcard;
		out->source = (int16_t)wild_src;
		out->matched_off = (uint16_t)wild_off;
		out->matched_len = (uint16_t)(n->wend - wild_off);
	}
}

void nx_policy_badfilter_apply(const struct nx_policy_badfilter *bf,
			       const struct nx_filter_snap *snap, const struct nx_filter_side *side,
			       const struct nx_filter_qctx *fq, struct nx_filter_result *out)
{
	/* Only a cancellation at the deciding name can change the verdict: an exception decided
	 * (so no other one lies anywhere), or a block did (no exception anywhere, and the name's
	 * own EXACT beats every parent's WILD, the nearest WILD every farther one). First its
	 * length and end bytes (most verdicts stop here), then the name itself, as text: the
	 * matched suffix is a list name, so only case folding is needed. */
	size_t ml = out->matched_len, mo = out->matched_off;
	if (ml < 3 || ml - 2 > NX_FILTER_NAME_MAX || mo + ml > fq->wlen) {
		return;
	}
	unsigned g = gate_key(ml - 2, fold(fq->wire[mo + 1]), fold(fq->wire[mo + ml - 2]));
	if (!(bf->gate[g / 64] >> (g % 64) & 1)) {
		return;
	}
	char sfx[NX_FILTER_NAME_MAX + 1];
	size_t t = 0;
	for (size_t w = mo; w < mo + ml && fq->wire[w] != 0;) {
		unsigned l = fq->wire[w];
		if (t > 0) {
			sfx[t++] = '.';
		}
		if (l > 63 || w + 1 + l > mo + ml || t + l > NX_FILTER_NAME_MAX) {
			return;
		}
		for (unsigned i = 0; i < l; i++) {
			unsigned char ch = fq->wire[w + 1 + i];
			sfx[t++] = (char)fold(ch);
		}
		w += 1 + l;
	}
	if (!bf_kinds(bf, sfx, t, fq->groups)) {
		return;
	}
	struct bf_name n;
	if (!name_of(fq->wire, fq->wlen, &n) || mo >= n.len) {
		return;
	}
	struct nx_filter_result s;
	walk(bf, snap, &n, fq->eligible, fq->groups, &s);
	/* The side rules lost to the first verdict (a tie goes to the snapshot). They lose to
	 * this one too unless it is weaker: nothing, or a block where an exception stood. */
	if (side && (s.action == NX_FILTER_ACT_NONE ||
		     (s.action == NX_FILTER_ACT_BLOCK && out->action == NX_FILTER_ACT_ALLOW))) {
		struct nx_filter_result r;
		nx_filter_result_clear(&r);
		nx_filter_lists_decide(NULL, side, fq, &r);
		/* against a snapshot block: a side exception, or a side block with a modifier (the
		 * ranking's tie between two plain blocks goes to the snapshot) */
		if (r.action != NX_FILTER_ACT_NONE &&
		    (s.action == NX_FILTER_ACT_NONE || r.action == NX_FILTER_ACT_ALLOW ||
		     nx_filter_side_rule_mods(side, r.side_rule) > 0)) {
			*out = r;
			return;
		}
	}
	*out = s;
}

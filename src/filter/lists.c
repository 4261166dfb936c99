/* The list levels in one call (snapshot + side structure) and the $dnsrewrite / hosts answer. */
#include "filter/lists.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "dns/wire.h"
#include "filter/side_impl.h"

/* ---- PCRE2 working memory: one fixed block per thread, never grown ----
 *
 * pcre2_match keeps its backtracking frames in the match data and grows them (doubling, up to
 * the heap limit) through the match data's allocator. This bump allocator hands out pieces of
 * the calling thread's block and never frees: the sizes only grow, so the total stays below
 * twice the heap limit plus the match data itself. When the block is spent, pcre2 gets NULL
 * and the match ends with PCRE2_ERROR_NOMEMORY (counted as a limit hit, no match).
 * The block is allocated on a thread's first regex match (once per thread, on the ledger
 * under filter_side) rather than as static TLS, which glibc would zero -- and make resident
 * -- in every thread of the process; a thread-exit destructor returns it. */
#define RE_ARENA_BYTES (2u * NX_FILTER_RE_HEAP_KIB * 1024u + 16u * 1024u)

struct re_arena {
	size_t used;
	pcre2_match_data *md; /* in buf */
	_Alignas(max_align_t) unsigned char buf[RE_ARENA_BYTES];
};

static _Thread_local struct re_arena *tl_arena; /* owned by this thread (filter_side) */
static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static bool arena_key_ok;

static void arena_release(void *p)
{
	nx_mem_free(NX_OWNER_filter_side, p, sizeof(struct re_arena));
}

static void arena_key_init(void)
{
	arena_key_ok = pthread_key_create(&arena_key, arena_release) == 0;
}

static void *arena_malloc(PCRE2_SIZE size, void *data)
{
	struct re_arena *a = data;
	size_t n = (size + _Alignof(max_align_t) - 1) & ~(size_t)(_Alignof(max_align_t) - 1);
	if (n > RE_ARENA_BYTES - a->used) {
		return NULL;
	}
	void *p = a->buf + a->used;
	a->used += n;
	return p;
}

static void arena_free(void *p, void *data)
{
	(void)p;
	(void)data;
}

static pcre2_match_data *match_data(void)
{
	if (tl_arena) {
		return tl_arena->md;
	}
	pthread_once(&arena_once, arena_key_init);
	struct re_arena *a = nx_mem_alloc(NX_OWNER_filter_side, sizeof(*a));
	if (!a) {
		return NULL;
	}
	a->used = 0;
	/* the general context lives in the block too */
	pcre2_general_context *g = pcre2_general_context_create(arena_malloc, arena_free, a);
	a->md = g ? pcre2_match_data_create(1, g) : NULL;
	tl_arena = a;
	if (arena_key_ok) {
		pthread_setspecific(arena_key, a);
	}
	return a->md;
}

void nx_filter_lists_thread_done(void)
{
	if (tl_arena) {
		if (arena_key_ok) {
			pthread_setspecific(arena_key, NULL);
		}
		arena_release(tl_arena);
		tl_arena = NULL;
	}
}

int nx_side_re_match(const struct nx_filter_side *s, uint32_t i, const char *subj, size_t len)
{
	pcre2_match_data *md = match_data();
	if (!md) {
		nx_stat_inc(NX_STAT_FILTER_REGEX_LIMIT);
		return -1;
	}
	int rc = pcre2_match(s->re[i], (PCRE2_SPTR)subj, len, 0, 0, md, s->mctx);
	if (rc >= 0) {
		return 1;
	}
	if (rc == PCRE2_ERROR_NOMATCH) {
		return 0;
	}
	nx_stat_inc(NX_STAT_FILTER_REGEX_LIMIT);
	return -1;
}

uint64_t nx_filter_side_regex_limit_hits(void)
{
	return nx_stat_read(NX_STAT_FILTER_REGEX_LIMIT);
}

/* ---- does a rule apply to this client and type ---- */

static bool addr_match(const struct side_val *v, const struct sockaddr *sa)
{
	const uint8_t *a;
	if (!sa) {
		return false;
	}
	if (sa->sa_family == AF_INET && v->family == 4) {
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6 && v->family == 6) {
		a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	} else if (sa->sa_family == AF_INET6 && v->family == 4) {
		/* a v4 client on a dual-stack socket arrives as ::ffff:a.b.c.d */
		const uint8_t *a6 = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (memcmp(a6, mapped, 12) != 0) {
			return false;
		}
		a = a6 + 12;
	} else {
		return false;
	}
	unsigned full = v->prefix / 8, rest = v->prefix % 8;
	if (memcmp(a, v->addr, full) != 0) {
		return false;
	}
	if (rest) {
		uint8_t m = (uint8_t)(0xffu << (8 - rest));
		return (a[full] & m) == (v->addr[full] & m);
	}
	return true;
}

static bool under(const char *name, size_t nlen, const char *dom, size_t dlen)
{
	if (nlen == dlen) {
		return memcmp(name, dom, dlen) == 0;
	}
	return nlen > dlen && name[nlen - dlen - 1] == '.' &&
	       memcmp(name + nlen - dlen, dom, dlen) == 0;
}

static bool is_ipv4_text(const char *s, size_t len)
{
	unsigned dots = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.') {
			dots++;
		} else if (s[i] < '0' || s[i] > '9') {
			return false;
		}
	}
	return dots == 3;
}

/* One kind of restriction: with positives, one must hit; no negative may hit. */
struct tally {
	bool pos, pos_hit, neg_hit;
};

static void tally_add(struct tally *t, bool neg, bool hit)
{
	if (neg) {
		t->neg_hit |= hit;
	} else {
		t->pos = true;
		t->pos_hit |= hit;
	}
}

static bool tally_ok(const struct tally *t)
{
	return !t->neg_hit && (!t->pos || t->pos_hit);
}

bool nx_side_applies(const struct nx_filter_side *s, const struct side_rule *r,
		     const struct nx_filter_qctx *q, const char *name, size_t nlen)
{
	if (r->origin < NX_FILTER_SOURCES_MAX && !(q->eligible >> r->origin & 1u)) {
		return false;
	}
	if (!r->nvals) {
		return true;
	}
	struct tally client = {0}, ctag = {0}, type = {0};
	const struct side_val *v = s->vals + r->vals_off;
	for (uint16_t i = 0; i < r->nvals; i++, v++) {
		const char *str = s->pool + v->off;
		switch (v->kind) {
		case V_ADDR:
			tally_add(&client, v->neg, addr_match(v, q->client));
			break;
		case V_NAME:
			tally_add(&client, v->neg,
				  q->client_name && strlen(q->client_name) == v->len &&
				      memcmp(q->client_name, str, v->len) == 0);
			break;
		case V_CTAG: {
			bool hit = false;
			for (size_t t = 0; t < q->ntags && !hit; t++) {
				hit = strlen(q->tags[t]) == v->len &&
				      memcmp(q->tags[t], str, v->len) == 0;
			}
			tally_add(&ctag, v->neg, hit);
			break;
		}
		case V_DNSTYPE:
			tally_add(&type, v->neg, v->qtype == q->qtype);
			break;
		case V_GROUPS: {
			uint64_t mask;
			memcpy(&mask, v->addr, sizeof(mask));
			if (!(q->groups & mask)) {
				return false;
			}
			break;
		}
		case V_DENY:
			/* $denyallow: the listed domains and everything under them are spared; so
			 * are IP literals, which no domain list means */
			if (under(name, nlen, str, v->len) || is_ipv4_text(name, nlen)) {
				return false;
			}
			break;
		default:
			return false;
		}
	}
	return tally_ok(&client) && tally_ok(&ctag) && tally_ok(&type);
}

/* ---- ranking ---- */

/* Larger is stronger: user rules > list rules; class; specificity. */
static uint32_t rank_of(const struct side_rule *r)
{
	bool user = r->origin >= NX_FILTER_SOURCES_MAX;
	bool allow = r->flags & SR_ALLOW, imp = r->flags & SR_IMPORTANT;
	uint32_t cls = allow && imp ? 4 : imp ? 3 : allow ? 2 : 1;
	return (uint32_t)user << 16 | cls << 8 | r->nmods;
}

static uint32_t snap_rank(enum nx_filter_action a)
{
	return a == NX_FILTER_ACT_ALLOW ? 2u << 8 : a == NX_FILTER_ACT_BLOCK ? 1u << 8 : 0;
}

struct best {
	int64_t rule; /* -1 none */
	uint32_t rank;
	uint8_t origin;
	uint16_t off; /* matched name offset (text == wire offsets) */
};

static void consider(struct best *b, const struct nx_filter_side *s, uint32_t i, uint16_t off)
{
	const struct side_rule *r = &s->rules[i];
	uint32_t rk = rank_of(r);
	if (b->rule >= 0) {
		if (rk < b->rank) {
			return;
		}
		if (rk == b->rank &&
		    (r->origin > b->origin || (r->origin == b->origin && i >= (uint32_t)b->rule))) {
			return;
		}
	}
	b->rule = i;
	b->rank = rk;
	b->origin = r->origin;
	b->off = off;
}

struct scan_state {
	struct best *b;
	const char *text; /* the lower-case name, tlen bytes */
	size_t tlen;
	size_t ulen;   /* "http://name/" in url once built, else 0 */
	unsigned runs; /* regex executions so far (NX_FILTER_RE_PER_QUERY_MAX) */
	bool seen_init;
	uint64_t seen[(NX_FILTER_SIDE_REGEX_MAX + 63) / 64]; /* regexes tried (a literal may
							      * occur twice) */
	char url[NX_DNS_NAME_MAX + 16];
};

/* "http://name/", built the first time a rule needs it (most queries never do). */
static const char *scan_url(struct scan_state *st)
{
	if (!st->ulen) {
		memcpy(st->url, "http://", 7);
		memcpy(st->url + 7, st->text, st->tlen);
		st->url[7 + st->tlen] = '/';
		st->ulen = st->tlen + 8;
	}
	return st->url;
}

/* Try scan rule scan[j]: filters first (cheap), then the regex. lit_found: the prefilter saw
 * the literal in the rule's subject. */
static void try_scan(const struct nx_filter_side *side, const struct nx_filter_qctx *q,
		     struct scan_state *st, uint32_t j, bool lit_found)
{
	uint32_t i = side->scan[j];
	const struct side_rule *r = &side->rules[i];
	if (st->b->rule >= 0 && rank_of(r) < st->b->rank) {
		return; /* cannot win: skip the regex */
	}
	if (!nx_side_applies(side, r, q, st->text, st->tlen)) {
		return;
	}
	bool hit = r->anchor == AN_ANY;
	if (r->anchor == AN_RE_HOST || r->anchor == AN_RE_URL) {
		const struct side_lit *l = &side->lit[r->re];
		const char *subj = l->url ? scan_url(st) : st->text;
		size_t slen = l->url ? st->ulen : st->tlen;
		/* cheap refusals before PCRE2's call cost: too short, a first byte the anchored
		 * regex cannot start with, the literal absent */
		if (slen < l->minlen ||
		    (l->anchored &&
		     !(l->first[(unsigned char)subj[0] / 8] >> ((unsigned char)subj[0] % 8) &
		       1u)) ||
		    (l->len && !l->at_start && !lit_found &&
		     !memmem(subj, slen, side->pool + l->off, l->len)) ||
		    (l->len2 && !memmem(subj, slen, side->pool + l->off2, l->len2))) {
			return;
		}
		if (st->runs >= NX_FILTER_RE_PER_QUERY_MAX) {
			nx_stat_inc(NX_STAT_FILTER_REGEX_LIMIT);
			return;
		}
		st->runs++;
		hit = nx_side_re_match(side, r->re, subj, slen) == 1;
	}
	if (hit) {
		consider(st->b, side, i, 0);
	}
}

/* Keys that end at state value v, the byte at e of "http://name/" being their last: each rule
 * whose whole literal is there (inside the name for a rule run on the name; at its start for
 * one every match begins with) is tried once. */
static void ac_hits(const struct nx_filter_side *side, const struct nx_filter_qctx *q,
		    struct scan_state *st, uint32_t v, size_t e)
{
	size_t name_end = 7 + st->tlen; /* the trailing '/' */
	for (uint32_t y = side_ac_id(side, v); y; y = side->ac_dict[y]) {
		for (uint32_t o = side->ac_out_off[y]; o < side->ac_out_off[y + 1]; o++) {
			const struct side_ac_out *h = &side->ac_out[o];
			const struct side_lit *l = &side->lit[h->re];
			size_t start = e + 1 - h->klen;
			size_t end = start + h->lit_len; /* past the whole literal */
			if ((!l->url && (start < 7 || end > name_end)) ||
			    ((h->flags & SIDE_AC_AT_START) && start != 7)) {
				continue;
			}
			if (!st->seen_init) {
				memset(st->seen, 0, (side->nre + 63) / 64 * sizeof(st->seen[0]));
				st->seen_init = true;
			}
			if (st->seen[h->re / 64] >> (h->re % 64) & 1u) {
				continue;
			}
			if (h->lit_len > h->klen) {
				const char *url = scan_url(st);
				if (end > st->ulen ||
				    memcmp(url + start, side->pool + h->lit_off, h->lit_len) != 0) {
					continue;
				}
			}
			st->seen[h->re / 64] |= 1ull << (h->re % 64);
			try_scan(side, q, st, h->j, true);
		}
	}
}

/* Per byte: the lower-case byte, and 0x100 when it is no list-name byte ([a-z0-9_-]). */
#define FOLD_(c) ((c) >= 'A' && (c) <= 'Z' ? (c) + 32 : (c))
#define LISTB_(c)                                                                                  \
	(((c) >= 'a' && (c) <= 'z') || ((c) >= '0' && (c) <= '9') || (c) == '-' || (c) == '_')
#define T1_(c) (uint16_t)(FOLD_(c) | (LISTB_(FOLD_(c)) ? 0 : 0x100))
#define T4_(c) T1_(c), T1_((c) + 1), T1_((c) + 2), T1_((c) + 3)
#define T16_(c) T4_(c), T4_((c) + 4), T4_((c) + 8), T4_((c) + 12)
#define T64_(c) T16_(c), T16_((c) + 16), T16_((c) + 32), T16_((c) + 48)
static const uint16_t fold_tab[256] = {T64_(0), T64_(64), T64_(128), T64_(192)};
#undef T64_
#undef T16_
#undef T4_
#undef T1_
#undef LISTB_
#undef FOLD_

/* The prefilter automaton's walk, done while the name is lower-cased (one pass over the
 * bytes): the state after each byte of "http://name/" and the hits, replayed once the whole
 * name is known. At most one hit per byte of the name and the closing '/'. */
struct walk {
	uint32_t v;
	unsigned nhit;
	uint32_t hv[NX_DNS_NAME_MAX + 2]; /* state values with SIDE_AC_OUT */
	uint16_t he[NX_DNS_NAME_MAX + 2]; /* offsets in "http://name/" of their last byte */
};

/* side_ac_step on the walk's copies of the table pointers (kept in registers or on the
 * stack by the walk, not reloaded from the side structure each sparse step) */
static inline __attribute__((always_inline)) size_t walk_step(const uint32_t *rows,
							      const uint8_t *sch,
							      const struct side_ac_sparse *ssp,
							      size_t v, unsigned c)
{
	while (v & SIDE_AC_SPARSE) {
		size_t x = v & SIDE_AC_ID;
		if (sch[x] == c) {
			return ssp[x].next;
		}
		v = ssp[x].fail;
	}
	return rows[(v & SIDE_AC_ID) + c];
}

/* Lower-case text form of the wire name; label starts equal wire offsets. *clean: offset of
 * the first label from which every label is a list-name label ([a-z0-9_-]); wlen when none
 * (also for a malformed name). *wend (unless NULL): the wire offset past the root label. out
 * gets a NUL and SIDE_HASH_PAD zero bytes after the name. With side: *named says some label may begin an
 * indexed rule's name (label_bits), and with an automaton wk gets its walk over the bytes
 * (upper case has the classes of lower case). Inlined twice, with and without the side. */
static inline __attribute__((always_inline)) size_t
to_text_(const uint8_t *w, size_t wlen, char *out, uint16_t *starts, unsigned *nl, size_t *clean,
	 size_t *wend, const struct nx_filter_side *side, bool *named, struct walk *wk)
{
	/* Label k's length byte is at wire offset i and its bytes at w[i + 1 ...]; its text is at
	 * out[i ...] (the dot before it at out[i - 1]): one offset serves both forms. Locals: the
	 * byte stores below may alias *nl, *clean. */
	size_t i = 0, cl = 0;
	/* a label must end inside the buffer and inside a text name of NX_DNS_NAME_MAX bytes:
	 * i + 1 + l <= wlen, and i + l <= NX_DNS_NAME_MAX (the text so far, its dot and l) */
	const size_t lim = wlen < NX_DNS_NAME_MAX + 1 ? wlen : NX_DNS_NAME_MAX + 1;
	unsigned n = 0;
	const uint32_t *rows = wk ? side->ac_rows : NULL;
	const uint32_t *fold = wk ? side->ac_fold : NULL;
	const uint8_t *sch = wk ? side->ac_ch : NULL;
	const struct side_ac_sparse *ssp = wk ? side->ac_sp : NULL;
	const unsigned dotc = wk ? side->ac_cls['.'] : 0;
	size_t v = wk ? side->ac_start : 0; /* a state value (size_t: no widening per byte) */
	unsigned nhit = 0;
	uint64_t nm = 0;
	while (i < wlen && w[i] != 0) {
		size_t l = w[i];
		if (__builtin_expect(l > 63 || i + 1 + l > lim || n >= 127, 0)) {
			cl = wlen;
			break;
		}
		starts[n++] = (uint16_t)i;
		if (i) {
			if (wk) {
				v = v < SIDE_AC_BAD ? rows[v + dotc]
						    : walk_step(rows, sch, ssp, v, dotc);
				if (v & SIDE_AC_OUT) {
					wk->hv[nhit] = (uint32_t)v;
					wk->he[nhit++] = (uint16_t)(7 + i - 1);
				}
			}
			out[i - 1] = '.';
		}
		unsigned bad = 0;
		const uint8_t *pe = w + i + 1 + l; /* past the label's bytes */
		char *de = out + i + l;
		if (wk) {
			/* From a dense state without keys (v < SIDE_AC_BAD) the inner loop steps by
			 * one row load a byte and one test of the new state, which covers "sparse",
			 * "keys end here" and "no list-name byte" (the flags sit above SIDE_AC_ID);
			 * only such a state leaves it for the general step, the hit record or the
			 * unclean label. The loop counts a negative index up to 0 from the label's
			 * end (one add and a branch). */
			ptrdiff_t k = -(ptrdiff_t)l;
			while (k < 0) {
				if (v < SIDE_AC_BAD) {
					do {
						uint32_t t = fold[pe[k]];
						de[k] = (char)t;
						v = rows[v + (t >> 16)];
					} while (++k < 0 && v < SIDE_AC_BAD);
					if (v < SIDE_AC_BAD) {
						break;
					}
				} else {
					uint32_t t = fold[pe[k]];
					de[k] = (char)t;
					v = walk_step(rows, sch, ssp, v, t >> 16);
					k++;
				}
				if (__builtin_expect(v & SIDE_AC_BAD, 0)) {
					/* an unclean label: no scanned rule runs on this name, so
					 * the walk goes on from the root, its hits unused */
					bad = 0x100;
					v = 0;
					continue;
				}
				if (v & SIDE_AC_OUT) {
					wk->hv[nhit] = (uint32_t)v;
					wk->he[nhit++] = (uint16_t)(de + k - out + 6);
				}
			}
		} else {
			for (ptrdiff_t k = -(ptrdiff_t)l; k < 0; k++) {
				unsigned f = fold_tab[pe[k]];
				bad |= f;
				de[k] = (char)f;
			}
		}
		if (side) {
			/* bit 0 of nm: some label's bit in label_bits (side_label_key); the
			 * other bits are noise, dropped at the end. All zero without an index. */
			nm |= side->label_bits[side_label_word(l, (unsigned char)out[i])] >>
			      (((unsigned char)de[-1] + l) & 63u);
		}
		i += 1 + l;
		if (__builtin_expect(bad & 0x100, 0)) {
			cl = i; /* only labels after this one */
		}
	}
	size_t o = i ? i - 1 : 0; /* the text's length */
	if (wk) {
		unsigned slc = side->ac_cls['/'];
		v = v < SIDE_AC_BAD ? rows[v + slc] : walk_step(rows, sch, ssp, v, slc);
		if (v & SIDE_AC_OUT) {
			wk->hv[nhit] = (uint32_t)v;
			wk->he[nhit++] = (uint16_t)(7 + o);
		}
		wk->nhit = nhit;
	}
	if (named) {
		*named = nm & 1u;
	}
	*nl = n;
	*clean = cl;
	if (wend) {
		*wend = i < wlen && w[i] == 0 ? i + 1 : i;
	}
	memset(out + o, 0, 1 + SIDE_HASH_PAD); /* the NUL and side_label_hash's padding */
	return o;
}

static size_t to_text(const uint8_t *w, size_t wlen, char *out, uint16_t *starts, unsigned *nl,
		      size_t *clean, size_t *wend)
{
	return to_text_(w, wlen, out, starts, nl, clean, wend, NULL, NULL, NULL);
}

/* The scanned rules (regexes, URL patterns, restricted catch-alls) over a clean name: those
 * without a literal, the URL rules whose literal "http://" holds, then the automaton's hits
 * over the name and the closing '/' (walked by to_text_ from the state after "http://"). */
static void scan_rules(const struct nx_filter_side *side, const struct nx_filter_qctx *q,
		       struct scan_state *st, const struct walk *wk)
{
	for (uint32_t j = 0; j < side->nalways; j++) {
		try_scan(side, q, st, side->always[j], false);
	}
	for (uint32_t j = 0; j < side->npre; j++) {
		try_scan(side, q, st, side->pre[j], true);
	}
	for (unsigned x = 0; wk && x < wk->nhit; x++) {
		ac_hits(side, q, st, wk->hv[x], wk->he[x]);
	}
}

enum nx_filter_action nx_filter_lists_decide(const struct nx_filter_snap *snap,
					     const struct nx_filter_side *side,
					     const struct nx_filter_qctx *q,
					     struct nx_filter_result *out)
{
	char text[NX_DNS_NAME_MAX + 1 + SIDE_HASH_PAD];
	uint16_t starts[128];
	unsigned nl;
	size_t clean, tlen;
	bool named = false;
	struct walk wk;
	bool walked = side && side->ac_rows; /* keys only exist for scanned rules */
	bool *np = side && side->nidx ? &named : NULL;
	if (walked) {
		tlen = to_text_(q->wire, q->wlen, text, starts, &nl, &clean, NULL, side, np, &wk);
	} else if (np) {
		tlen = to_text_(q->wire, q->wlen, text, starts, &nl, &clean, NULL, side, np, NULL);
	} else {
		tlen =
		    to_text_(q->wire, q->wlen, text, starts, &nl, &clean, NULL, NULL, NULL, NULL);
	}
	/* one lower-case copy serves both structures: the snapshot's text matcher for a clean
	 * name (offsets of label starts are the same in text and wire form), its wire matcher,
	 * which knows which parents an odd label leaves, for the rest */
	if (clean == 0 && tlen > 0) {
		nx_filter_snap_match_labels(snap, text, tlen, starts, nl, q->eligible, out);
		if (out->action != NX_FILTER_ACT_NONE) {
			/* a clean name ended at its root label (i = tlen + 1) or at wlen: the
			 * offset past the root, computed only for a match */
			size_t e = tlen + 1;
			size_t wend = e < q->wlen && q->wire[e] == 0 ? e + 1 : e;
			out->matched_len = (uint16_t)(wend - out->matched_off);
		}
	} else {
		nx_filter_snap_match_wire(snap, q->wire, q->wlen, q->eligible, out);
	}
	if (!side || side->nrules == 0) {
		return (enum nx_filter_action)out->action;
	}
	struct best b = {.rule = -1};
	/* the index hash of the name and of every parent, in one pass over the labels from the
	 * last (text has SIDE_HASH_PAD zero bytes past its end) */
	uint64_t hs[128];
	if (named) {
		uint64_t h = SIDE_HASH_BASIS;
		size_t end = tlen;
		for (unsigned k = nl; k-- > 0;) {
			h = side_hash_step(h, side_label_hash(text + starts[k], end - starts[k]));
			hs[k] = h;
			end = starts[k] ? starts[k] - 1u : 0;
		}
	}
	/* indexed rules: the name, then its parents nearest first */
	for (unsigned k = 0; named && k < nl; k++) {
		if (starts[k] < clean) {
			continue;
		}
		/* text offset of label k: wire offset of its length byte */
		const char *nm = text + starts[k];
		size_t len = tlen - starts[k];
		uint64_t h = hs[k];
		if (!(side->name_bits[(h & 4095) / 64] >> (h % 64) & 1u)) {
			continue;
		}
		size_t lo = 0, hi = side->nidx;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (side->idx[mid].h < h) {
				lo = mid + 1;
			} else {
				hi = mid;
			}
		}
		for (size_t j = lo; j < side->nidx && side->idx[j].h == h; j++) {
			const struct side_rule *r = &side->rules[side->idx[j].rule];
			if (r->name_len != len || memcmp(side->pool + r->name_off, nm, len) != 0) {
				continue;
			}
			if ((r->anchor == AN_EXACT && k != 0) || (r->anchor == AN_WILD && k == 0)) {
				continue;
			}
			if (!nx_side_applies(side, r, q, text, tlen)) {
				continue;
			}
			consider(&b, side, side->idx[j].rule, starts[k]);
		}
	}
	/* a walk without hits, and no rule that runs without one: no scanned rule can apply
	 * (most queries), and the scan's state is not even set up */
	if (clean == 0 && tlen > 0 && side->nscan &&
	    ((walked && wk.nhit) || side->nalways || side->npre)) {
		struct scan_state st;
		st.b = &b;
		st.text = text;
		st.tlen = tlen;
		st.ulen = 0;
		st.runs = 0;
		st.seen_init = false;
		scan_rules(side, q, &st, walked ? &wk : NULL);
	}
	if (b.rule < 0) {
		return (enum nx_filter_action)out->action;
	}
	/* the snapshot wins ties: its rules have no modifiers */
	uint32_t sr = snap_rank((enum nx_filter_action)out->action);
	if (sr && b.rank <= sr) {
		return (enum nx_filter_action)out->action;
	}
	const struct side_rule *r = &side->rules[b.rule];
	bool user = r->origin >= NX_FILTER_SOURCES_MAX;
	bool allow = r->flags & SR_ALLOW;
	out->action = allow ? NX_FILTER_ACT_ALLOW : NX_FILTER_ACT_BLOCK;
	out->side_rule = (int32_t)b.rule;
	out->rewrite = allow ? NX_FILTER_RW_NONE : r->rewrite;
	out->source = user ? -1 : r->origin;
	out->rule = -1;
	if (user) {
		out->reason = allow ? NX_FILTER_R_user_allow : NX_FILTER_R_user_deny;
	} else if (allow) {
		out->reason = NX_FILTER_R_blocklist_exception;
	} else if (r->rewrite == NX_FILTER_RW_HOSTS) {
		out->reason = NX_FILTER_R_blocklist_hosts;
	} else if (r->rewrite != NX_FILTER_RW_NONE) {
		out->reason = NX_FILTER_R_blocklist_rewrite;
	} else {
		out->reason = NX_FILTER_R_blocklist_rule;
	}
	if (side_indexed(r->anchor)) {
		out->matched_off = b.off;
		out->matched_len = (uint16_t)(q->wlen - b.off);
	} else {
		out->matched_off = 0;
		out->matched_len = 0;
	}
	return (enum nx_filter_action)out->action;
}

/* ---- the answer ---- */

int nx_filter_rewrite_answer(const struct nx_filter_side *side, const struct nx_filter_qctx *q,
			     const struct nx_filter_result *res, const struct nx_dns_reply_ctx *ctx,
			     uint32_t ttl, uint8_t *buf, size_t cap)
{
	if (!side || res->side_rule < 0 || (uint32_t)res->side_rule >= side->nrules ||
	    res->rewrite == NX_FILTER_RW_NONE) {
		return -EINVAL;
	}
	const struct side_rule *win = &side->rules[res->side_rule];
	if (win->rewrite == NX_FILTER_RW_NXDOMAIN) {
		return nx_dns_build_error(buf, cap, ctx, 3, -1, NULL);
	}
	if (win->rewrite == NX_FILTER_RW_REFUSED) {
		return nx_dns_build_error(buf, cap, ctx, 5, -1, NULL);
	}
	/* the records of every rule like the winner: same name, anchor, origin and kind */
	struct nx_dns_rr_spec rrs[NX_FILTER_REWRITE_RRS_MAX];
	size_t n = 0;
	char text[NX_DNS_NAME_MAX + 1 + SIDE_HASH_PAD];
	uint16_t starts[128];
	unsigned nl;
	size_t clean, wend;
	size_t tlen = to_text(q->wire, q->wlen, text, starts, &nl, &clean, &wend);
	const struct side_rule *cname = NULL;
	uint32_t first = (uint32_t)res->side_rule, last = first + 1;
	size_t lo = 0;
	if (side_indexed(win->anchor)) {
		uint64_t h = side_hash(side->pool + win->name_off, win->name_len);
		size_t hi = side->nidx;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (side->idx[mid].h < h) {
				lo = mid + 1;
			} else {
				hi = mid;
			}
		}
		for (; lo < side->nidx && side->idx[lo].h == h && n < NX_FILTER_REWRITE_RRS_MAX;
		     lo++) {
			const struct side_rule *r = &side->rules[side->idx[lo].rule];
			if (r->name_len != win->name_len || r->anchor != win->anchor ||
			    r->origin != win->origin || r->rewrite != win->rewrite ||
			    (r->flags & (SR_ALLOW | SR_IMPORTANT)) !=
				(win->flags & (SR_ALLOW | SR_IMPORTANT)) ||
			    memcmp(side->pool + r->name_off, side->pool + win->name_off,
				   r->name_len) != 0 ||
			    !nx_side_applies(side, r, q, text, tlen)) {
				continue;
			}
			if (r->rr_type == 5 && !cname) {
				cname = r;
			}
			if (r->rr_type == q->qtype && r->rdlen) {
				rrs[n++] = (struct nx_dns_rr_spec){
				    NULL,
				    0,
				    r->rr_type,
				    ttl,
				    (const uint8_t *)side->pool + r->rdata_off,
				    r->rdlen};
			}
		}
	} else {
		for (uint32_t i = first; i < last; i++) {
			const struct side_rule *r = &side->rules[i];
			if (r->rr_type == 5) {
				cname = r;
			}
			if (r->rr_type == q->qtype && r->rdlen) {
				rrs[n++] = (struct nx_dns_rr_spec){
				    NULL,
				    0,
				    r->rr_type,
				    ttl,
				    (const uint8_t *)side->pool + r->rdata_off,
				    r->rdlen};
			}
		}
	}
	if (cname) {
		/* AdGuard Home: a CNAME rewrite replaces the records of the other rules */
		rrs[0] = (struct nx_dns_rr_spec){
		    NULL, 0, 5, ttl, (const uint8_t *)side->pool + cname->rdata_off, cname->rdlen};
		n = 1;
	}
	return nx_dns_build_answer(buf, cap, ctx, 0, true, rrs, n, NULL, 0, -1, NULL);
}

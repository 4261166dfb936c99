/* The side structure: builder ($badfilter, name index, regex prefilter), loader, accessors. */
#include "filter/side.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "filter/impl.h"
#include "filter/side_impl.h"

/* ---- builder ---- */

struct nx_filter_side_builder {
	struct nx_filter_side s; /* under construction */
	size_t rules_cap, vals_cap, pool_cap, re_cap;
	uint64_t *keys;	    /* canonical-text hash per rule, with its origin (for $badfilter) */
	uint64_t *keys_any; /* the same without the origin (for a user $badfilter) */
	uint64_t *bad;	    /* canonical-text hashes of $badfilter rules */
	size_t nbad, bad_cap;
	/* A user's $badfilter cancels the rule in any list, as in AdGuard Home, where custom
	 * rules are how a person turns off a list's rule. */
	uint64_t *bad_any;
	size_t nbad_any, bad_any_cap;
	pcre2_general_context *gctx;
	pcre2_compile_context *cctx;
	uint64_t groups; /* of the rule being added (nx_filter_side_add_line_groups), 0: none */
	struct parsed p;
};

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap) {
		return 0;
	}
	size_t nc = *cap ? *cap * 2 : 64;
	while (nc < need) {
		nc *= 2;
	}
	void *n = nx_mem_realloc(NX_OWNER_filter_side, *arr, *cap * elem, nc * elem);
	if (!n) {
		return -ENOMEM;
	}
	*arr = n;
	*cap = nc;
	return 0;
}

static int pool_add(struct nx_filter_side_builder *b, const void *p, size_t n, uint32_t *off)
{
	if (b->s.pool_len + n > UINT32_MAX) {
		return NX_ELIMIT;
	}
	int rc = grow((void **)&b->s.pool, &b->pool_cap, b->s.pool_len + n + 1, 1);
	if (rc) {
		return rc;
	}
	*off = (uint32_t)b->s.pool_len;
	if (n) {
		memcpy(b->s.pool + b->s.pool_len, p, n);
	}
	b->s.pool_len += n;
	return 0;
}

int nx_filter_side_builder_new(struct nx_filter_side_builder **out)
{
	*out = NULL;
	struct nx_filter_side_builder *b = nx_mem_calloc(NX_OWNER_filter_side, 1, sizeof(*b));
	if (!b) {
		return -ENOMEM;
	}
	b->gctx = pcre2_general_context_create(nx_side_re_malloc, nx_side_re_free, NULL);
	b->cctx = b->gctx ? pcre2_compile_context_create(b->gctx) : NULL;
	b->s.mctx = b->gctx ? pcre2_match_context_create(b->gctx) : NULL;
	if (!b->cctx || !b->s.mctx) {
		nx_filter_side_builder_free(b);
		return -ENOMEM;
	}
	pcre2_set_match_limit(b->s.mctx, NX_FILTER_RE_MATCH_LIMIT);
	pcre2_set_depth_limit(b->s.mctx, NX_FILTER_RE_DEPTH_LIMIT);
	pcre2_set_heap_limit(b->s.mctx, NX_FILTER_RE_HEAP_KIB);
	*out = b;
	return 0;
}

static void ac_release(struct nx_filter_side *s);

static void side_release(struct nx_filter_side *s, size_t rules_cap, size_t vals_cap,
			 size_t pool_cap, size_t re_cap, size_t idx_n, size_t scan_n)
{
	for (uint32_t i = 0; i < s->nre; i++) {
		pcre2_code_free(s->re[i]);
	}
	nx_mem_free(NX_OWNER_filter_side, s->re, re_cap * sizeof(*s->re));
	nx_mem_free(NX_OWNER_filter_side, s->lit, re_cap * sizeof(*s->lit));
	ac_release(s);
	nx_mem_free(NX_OWNER_filter_side, s->rules, rules_cap * sizeof(*s->rules));
	nx_mem_free(NX_OWNER_filter_side, s->vals, vals_cap * sizeof(*s->vals));
	nx_mem_free(NX_OWNER_filter_side, s->pool, pool_cap);
	nx_mem_free(NX_OWNER_filter_side, s->idx, idx_n * sizeof(*s->idx));
	nx_mem_free(NX_OWNER_filter_side, s->scan, scan_n * sizeof(*s->scan));
	pcre2_match_context_free(s->mctx);
}

void nx_filter_side_builder_free(struct nx_filter_side_builder *b)
{
	if (!b) {
		return;
	}
	side_release(&b->s, b->rules_cap, b->vals_cap, b->pool_cap, b->re_cap, 0, 0);
	nx_mem_free(NX_OWNER_filter_side, b->keys, b->rules_cap * sizeof(*b->keys));
	nx_mem_free(NX_OWNER_filter_side, b->keys_any, b->rules_cap * sizeof(*b->keys_any));
	nx_mem_free(NX_OWNER_filter_side, b->bad, b->bad_cap * sizeof(*b->bad));
	nx_mem_free(NX_OWNER_filter_side, b->bad_any, b->bad_any_cap * sizeof(*b->bad_any));
	pcre2_compile_context_free(b->cctx);
	pcre2_general_context_free(b->gctx);
	nx_mem_free(NX_OWNER_filter_side, b, sizeof(*b));
}

/* Keeps origin-free keys apart from origin 0's (canon_key(0, ...) is both otherwise). */
#define ANY_SALT 0x9e3779b97f4a7c15ull

static uint64_t canon_key(unsigned origin, const char *canon, size_t len)
{
	return XXH3_64bits_withSeed(canon, len, origin + 1);
}

static int add_vals(struct nx_filter_side_builder *b, struct side_rule *r, const struct pval *v,
		    unsigned n, enum side_vkind kind)
{
	for (unsigned i = 0; i < n; i++) {
		int rc =
		    grow((void **)&b->s.vals, &b->vals_cap, b->s.nvals + 1, sizeof(*b->s.vals));
		if (rc) {
			return rc;
		}
		struct side_val *sv = &b->s.vals[b->s.nvals];
		memset(sv, 0, sizeof(*sv));
		sv->kind = (uint8_t)kind;
		sv->neg = v[i].neg;
		char tmp[NX_FILTER_NAME_MAX + 64];
		if (kind == V_DNSTYPE) {
			sv->qtype = nx_side_type_from_text(v[i].s, v[i].len);
		} else if (kind == V_ADDR && v[i].len < sizeof(tmp)) {
			/* address, CIDR, or else a client name */
			memcpy(tmp, v[i].s, v[i].len);
			tmp[v[i].len] = '\0';
			char *slash = strchr(tmp, '/');
			long pfx = -1;
			if (slash) {
				char *end;
				*slash = '\0';
				pfx = strtol(slash + 1, &end, 10);
				if (*end || slash[1] == '\0') {
					pfx = -2;
				}
			}
			if (pfx != -2 && inet_pton(AF_INET, tmp, sv->addr) == 1 && pfx <= 32) {
				sv->family = 4;
				sv->prefix = (uint8_t)(pfx < 0 ? 32 : pfx);
			} else if (pfx != -2 && inet_pton(AF_INET6, tmp, sv->addr) == 1 &&
				   pfx <= 128) {
				sv->family = 6;
				sv->prefix = (uint8_t)(pfx < 0 ? 128 : pfx);
			} else {
				sv->kind = V_NAME;
			}
		} else if (kind == V_ADDR) {
			sv->kind = V_NAME;
		}
		if (sv->kind == V_NAME || kind == V_CTAG || kind == V_DENY) {
			const char *src = v[i].s;
			size_t l = v[i].len;
			char norm[NX_FILTER_NAME_MAX + 1];
			if (kind == V_DENY) {
				size_t nl;
				if (nx_filter_name_norm(src, l, norm, &nl) == NX_FILTER_SKIP_NONE) {
					src = norm;
					l = nl;
				}
			}
			rc = pool_add(b, src, l, &sv->off);
			if (rc) {
				return rc;
			}
			sv->len = (uint16_t)l;
		}
		b->s.nvals++;
		r->nvals++;
	}
	return 0;
}

/* How much a literal narrows the names a regex runs on: its length, less for the strings
 * most names hold. */
static size_t lit_score(const char *lit, size_t len)
{
	static const char *const common[] = {".com", ".net", ".org", "www.",
					     "com",  "net",  "org",  "www"};
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++) {
		if (strlen(common[i]) == len && memcmp(common[i], lit, len) == 0) {
			return len > 2 ? len - 2 : 0;
		}
	}
	return len;
}

static int add_parsed(struct nx_filter_side_builder *b, struct parsed *p, const char *text,
		      size_t tlen, unsigned origin, enum nx_filter_rewrite hosts_rw, uint16_t htype,
		      const uint8_t *haddr, char *err, size_t errlen)
{
	if (p->badfilter) {
		int rc = grow((void **)&b->bad, &b->bad_cap, b->nbad + 1, sizeof(*b->bad));
		if (rc) {
			return rc;
		}
		b->bad[b->nbad++] = canon_key(origin, p->canon, p->canon_len);
		if (origin >= NX_FILTER_SOURCES_MAX) {
			rc = grow((void **)&b->bad_any, &b->bad_any_cap, b->nbad_any + 1,
				  sizeof(*b->bad_any));
			if (rc) {
				return rc;
			}
			b->bad_any[b->nbad_any++] = canon_key(0, p->canon, p->canon_len) ^ ANY_SALT;
		}
		b->s.st.badfilter++;
		return 0;
	}
	if (b->s.nrules >= NX_FILTER_SIDE_RULES_MAX) {
		nx_side_errf(err, errlen, "more than %u side rules", NX_FILTER_SIDE_RULES_MAX);
		return NX_ELIMIT;
	}
	bool scanned = p->anchor == AN_RE_HOST || p->anchor == AN_RE_URL;
	if (scanned && b->s.nre >= NX_FILTER_SIDE_REGEX_MAX) {
		nx_side_errf(err, errlen, "more than %u regex / pattern rules",
			     NX_FILTER_SIDE_REGEX_MAX);
		return NX_ELIMIT;
	}
	size_t old_cap = b->rules_cap;
	int rc = grow((void **)&b->s.rules, &b->rules_cap, b->s.nrules + 1, sizeof(*b->s.rules));
	if (rc) {
		return rc;
	}
	if (b->rules_cap != old_cap) {
		void *nk = nx_mem_realloc(NX_OWNER_filter_side, b->keys, old_cap * sizeof(*b->keys),
					  b->rules_cap * sizeof(*b->keys));
		if (!nk) {
			return -ENOMEM;
		}
		b->keys = nk;
		void *na = nx_mem_realloc(NX_OWNER_filter_side, b->keys_any,
					  old_cap * sizeof(*b->keys_any),
					  b->rules_cap * sizeof(*b->keys_any));
		if (!na) {
			return -ENOMEM;
		}
		b->keys_any = na;
	}
	struct side_rule *r = &b->s.rules[b->s.nrules];
	memset(r, 0, sizeof(*r));
	r->re = UINT32_MAX;
	r->origin = (uint8_t)origin;
	r->anchor = (uint8_t)p->anchor;
	r->vals_off = b->s.nvals;
	if (p->allow || (origin == NX_FILTER_ORIGIN_USER_ALLOW)) {
		r->flags |= SR_ALLOW;
	}
	if (p->important) {
		r->flags |= SR_IMPORTANT;
	}
	r->flags |= (p->nclient ? SR_CLIENT : 0) | (p->nctag ? SR_CTAG : 0) |
		    (p->ntype ? SR_DNSTYPE : 0) | (p->ndeny ? SR_DENY : 0);
	r->nmods = p->nmods;
	r->rewrite = (uint8_t)(hosts_rw != NX_FILTER_RW_NONE ? hosts_rw : p->rewrite);
	if (r->flags & SR_ALLOW) {
		r->rewrite = NX_FILTER_RW_NONE;
	}
	if (hosts_rw != NX_FILTER_RW_NONE) {
		r->nmods = 1; /* a listed address is more specific than a plain block */
		r->rr_type = htype;
		r->rdlen = htype == 1 ? 4 : 16;
		rc = pool_add(b, haddr, r->rdlen, &r->rdata_off);
	} else if (p->rdlen) {
		r->rr_type = p->rr_type;
		r->rdlen = p->rdlen;
		rc = pool_add(b, p->rdata, p->rdlen, &r->rdata_off);
	}
	if (!rc) {
		rc = pool_add(b, text, tlen, &r->text_off);
		r->text_len = (uint16_t)tlen;
	}
	if (!rc && side_indexed(p->anchor)) {
		rc = pool_add(b, p->name, p->nlen, &r->name_off);
		r->name_len = (uint16_t)p->nlen;
	}
	if (!rc) {
		rc = add_vals(b, r, p->client, p->nclient, V_ADDR);
	}
	if (!rc) {
		rc = add_vals(b, r, p->ctag, p->nctag, V_CTAG);
	}
	if (!rc) {
		rc = add_vals(b, r, p->type, p->ntype, V_DNSTYPE);
	}
	if (!rc) {
		rc = add_vals(b, r, p->deny, p->ndeny, V_DENY);
	}
	if (!rc && b->groups && origin >= NX_FILTER_SOURCES_MAX) {
		rc = grow((void **)&b->s.vals, &b->vals_cap, b->s.nvals + 1, sizeof(*b->s.vals));
		if (!rc) {
			struct side_val *sv = &b->s.vals[b->s.nvals++];
			memset(sv, 0, sizeof(*sv));
			sv->kind = V_GROUPS;
			memcpy(sv->addr, &b->groups, sizeof(b->groups));
			r->nvals++;
		}
	}
	if (!rc && scanned) {
		char src[NX_FILTER_LINE_MAX * 2 + 64];
		const char *rs = p->pat + 1;
		size_t rl = p->plen - 2;
		if (p->anchor == AN_RE_URL) {
			if (nx_side_pattern_regex(p->pat, p->plen, src, sizeof(src))) {
				nx_side_errf(err, errlen, "pattern too long");
				return NX_EFORMAT;
			}
			rs = src;
			rl = strlen(src);
		}
		size_t old_re_cap = b->re_cap;
		rc = grow((void **)&b->s.re, &b->re_cap, b->s.nre + 1, sizeof(*b->s.re));
		if (!rc && b->re_cap != old_re_cap) {
			void *nl = nx_mem_realloc(NX_OWNER_filter_side, b->s.lit,
						  old_re_cap * sizeof(*b->s.lit),
						  b->re_cap * sizeof(*b->s.lit));
			if (!nl) {
				/* keep re and lit the same capacity: give the re growth back */
				void *nr = nx_mem_realloc(NX_OWNER_filter_side, b->s.re,
							  b->re_cap * sizeof(*b->s.re),
							  old_re_cap * sizeof(*b->s.re));
				if (nr || old_re_cap == 0) {
					b->s.re = nr;
					b->re_cap = old_re_cap;
				}
				rc = -ENOMEM;
			} else {
				b->s.lit = nl;
			}
		}
		if (!rc) {
			char lit[NX_FILTER_LINE_MAX];
			size_t ll = p->anchor == AN_RE_URL
					? nx_side_lit_pattern(p->pat, p->plen, lit)
					: nx_side_lit_regex(p->pat + 1, p->plen - 2, lit);
			struct side_lit sl = {0, (uint16_t)ll, 0};
			/* ^(mon|tue|...) or ^ads: the start of every match, when that says more
			 * than the longest literal (a position is worth a few bytes; a TLD such
			 * as .com, in most names, is worth little) */
			char alts[NX_FILTER_LINE_MAX + SIDE_AC_ALTS_MAX];
			unsigned nalt = 0;
			size_t shortest = 0, al = 0;
			if (p->anchor == AN_RE_HOST) {
				al = nx_side_lit_regex_start(p->pat + 1, p->plen - 2, alts, &nalt,
							     &shortest);
			}
			if (al && shortest + 3 >= lit_score(lit, ll)) {
				sl.len = (uint16_t)al;
				sl.nalt = (uint8_t)nalt;
				sl.at_start = 1;
				rc = pool_add(b, alts, al, &sl.off);
			} else {
				rc = ll ? pool_add(b, lit, ll, &sl.off) : 0;
			}
			if (!rc && ll && p->anchor == AN_RE_URL) {
				char lit2[NX_FILTER_LINE_MAX];
				size_t l2 = nx_side_lit_pattern2(p->pat, p->plen, lit, ll, lit2);
				if (l2 >= 2) {
					sl.len2 = (uint16_t)l2;
					rc = pool_add(b, lit2, l2, &sl.off2);
				}
			}
			pcre2_code *re =
			    rc ? NULL : nx_side_re_compile(rs, rl, b->cctx, err, errlen);
			if (!rc && !re) {
				return NX_EFORMAT;
			}
			if (!rc) {
				uint32_t ml = 0;
				pcre2_pattern_info(re, PCRE2_INFO_MINLENGTH, &ml);
				sl.minlen = (uint8_t)(ml > 255 ? 255 : ml);
				/* a host pattern (no '/' or ':') says the same of "name" and of
				 * "http://name/"; one with them only makes sense on the URL */
				sl.url = p->anchor == AN_RE_URL && (memchr(p->pat, '/', p->plen) ||
								    memchr(p->pat, ':', p->plen));
				/* an anchored regex with a known set of first bytes: most names
				 * are refused by one bit test, before PCRE2's per-call cost */
				uint32_t opts = 0, fct = 0, fcu = 0;
				const uint8_t *bm = NULL;
				pcre2_pattern_info(re, PCRE2_INFO_ALLOPTIONS, &opts);
				pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODETYPE, &fct);
				pcre2_pattern_info(re, PCRE2_INFO_FIRSTBITMAP, &bm);
				if ((opts & PCRE2_ANCHORED) && fct == 1) {
					pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODEUNIT, &fcu);
					/* caseless: both cases are possible first bytes */
					unsigned lo = fcu | (fcu >= 'A' && fcu <= 'Z' ? 0x20u : 0);
					unsigned up = fcu >= 'a' && fcu <= 'z' ? fcu - 0x20u : lo;
					sl.first[lo / 8] |= (uint8_t)(1u << (lo % 8));
					sl.first[up / 8] |= (uint8_t)(1u << (up % 8));
					sl.anchored = 1;
				} else if ((opts & PCRE2_ANCHORED) && fct == 0 && bm) {
					memcpy(sl.first, bm, 32);
					sl.anchored = 1;
				}
				b->s.re[b->s.nre] = re;
				b->s.lit[b->s.nre] = sl;
				r->re = b->s.nre++;
			}
		}
	}
	if (rc) {
		if (rc == -ENOMEM) {
			nx_side_errf(err, errlen, "out of memory");
		}
		return rc;
	}
	b->keys[b->s.nrules] = canon_key(origin, p->canon, p->canon_len);
	b->keys_any[b->s.nrules] = canon_key(0, p->canon, p->canon_len) ^ ANY_SALT;
	b->s.nrules++;
	return 0;
}

int nx_filter_side_add_line(struct nx_filter_side_builder *b, const char *line, size_t len,
			    unsigned origin, char *err, size_t errlen)
{
	nx_side_errf(err, errlen, "%s", "");
	if (origin >= NX_FILTER_SOURCES_MAX && origin != NX_FILTER_ORIGIN_USER_DENY &&
	    origin != NX_FILTER_ORIGIN_USER_ALLOW) {
		nx_side_errf(err, errlen, "bad origin %u", origin);
		return -EINVAL;
	}
	while (len > 0 && side_space(line[0])) {
		line++;
		len--;
	}
	while (len > 0 && (side_space(line[len - 1]) || line[len - 1] == '\n')) {
		len--;
	}
	if (len == 0 || line[0] == '#' || line[0] == '!') {
		return 0;
	}
	int rc;
	if (len > NX_FILTER_LINE_MAX || len > UINT16_MAX) {
		nx_side_errf(err, errlen, "line longer than %u bytes", NX_FILTER_LINE_MAX);
		rc = NX_EFORMAT;
		goto refused;
	}
	/* hosts line "addr name": an answer */
	size_t t0 = 0;
	while (t0 < len && !side_space(line[t0])) {
		t0++;
	}
	char abuf[64];
	uint8_t addr[16];
	if (t0 < len && t0 < sizeof(abuf)) {
		memcpy(abuf, line, t0);
		abuf[t0] = '\0';
		uint16_t htype = inet_pton(AF_INET, abuf, addr) == 1	? 1
				 : inet_pton(AF_INET6, abuf, addr) == 1 ? 28
									: 0;
		if (htype) {
			size_t pos = t0;
			unsigned names = 0;
			rc = 0;
			while (pos < len && rc == 0) {
				while (pos < len && side_space(line[pos])) {
					pos++;
				}
				if (pos >= len || line[pos] == '#') {
					break;
				}
				size_t t = pos;
				while (t < len && !side_space(line[t])) {
					t++;
				}
				struct parsed *p = &b->p;
				memset(p, 0, offsetof(struct parsed, canon));
				enum nx_filter_skip w =
				    nx_filter_name_norm(line + pos, t - pos, p->name, &p->nlen);
				if (w != NX_FILTER_SKIP_NONE) {
					nx_side_errf(err, errlen,
						     "hosts line: '%.*s' is not a usable name (%s)",
						     (int)(t - pos), line + pos,
						     nx_filter_skip_name(w));
					rc = NX_EFORMAT;
					break;
				}
				p->anchor = AN_EXACT;
				p->canon_len = (size_t)snprintf(p->canon, sizeof(p->canon), "%s %s",
								abuf, p->name);
				rc = add_parsed(b, p, line, len, origin, NX_FILTER_RW_HOSTS, htype,
						addr, err, errlen);
				names++;
				pos = t;
			}
			if (rc == 0 && names == 0) {
				nx_side_errf(err, errlen, "hosts line without a name");
				rc = NX_EFORMAT;
			}
			if (rc) {
				goto refused;
			}
			return 0;
		}
	}
	/* user-rule shorthand "*.x": proper subdomains of x (indexed, no regex slot) */
	char conv[NX_FILTER_LINE_MAX + 8];
	const char *ln = line;
	size_t ll = len;
	bool wild = false;
	if (len > 2 && line[0] == '*' && line[1] == '.' && !memchr(line + 2, '*', len - 2) &&
	    !memchr(line, '$', len)) {
		ll = (size_t)snprintf(conv, sizeof(conv), "||%.*s^", (int)(len - 2), line + 2);
		ln = conv;
		wild = true;
	}
	struct parsed *p = &b->p;
	enum nx_filter_skip w = nx_side_parse_rule(p, ln, ll, err, errlen);
	if (w != NX_FILTER_SKIP_NONE) {
		rc = NX_EFORMAT;
		goto refused;
	}
	if (wild) {
		p->anchor = AN_WILD;
		memcpy(p->canon, line, len);
		p->canon_len = len;
	}
	rc = add_parsed(b, p, line, len, origin, NX_FILTER_RW_NONE, 0, NULL, err, errlen);
	if (rc) {
		goto refused;
	}
	return 0;
refused:
	b->s.st.refused++;
	nx_stat_inc(NX_STAT_FILTER_SIDE_REFUSED);
	return rc;
}

int nx_filter_side_add_line_groups(struct nx_filter_side_builder *b, const char *line, size_t len,
				   unsigned origin, uint64_t groups, char *err, size_t errlen)
{
	b->groups = groups;
	int rc = nx_filter_side_add_line(b, line, len, origin, err, errlen);
	b->groups = 0;
	return rc;
}

int nx_filter_side_load_source(struct nx_filter_side_builder *b, const char *dir, const char *name,
			       unsigned origin)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.side", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return errno == ENOENT ? 0 : -errno;
	}
	struct nx_lr lr;
	int rc = nx_lr_init(&lr, fd);
	if (rc) {
		close(fd);
		return rc;
	}
	char err[256];
	for (;;) {
		const char *line;
		size_t len;
		bool too_long;
		rc = nx_lr_next(&lr, NX_FILTER_LINE_MAX, &line, &len, &too_long);
		if (rc <= 0) {
			break;
		}
		if (too_long) {
			b->s.st.refused++;
			continue;
		}
		int arc = nx_filter_side_add_line(b, line, len, origin, err, sizeof(err));
		if (arc == -ENOMEM) {
			rc = arc;
			break;
		}
	}
	nx_lr_deinit(&lr);
	close(fd);
	return rc < 0 ? rc : 0;
}

static int idx_cmp(const void *a, const void *b)
{
	const struct side_idx *x = a, *y = b;
	if (x->h != y->h) {
		return x->h < y->h ? -1 : 1;
	}
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- the prefilter automaton (side_impl.h) ---- */

/* Build-time view of one key. */
struct ac_key {
	uint32_t j;	  /* scan position */
	uint32_t state;	  /* where it ends (trie id, then final id) */
	uint32_t lit_off; /* the whole literal, in pool */
	uint16_t lit_len;
	uint16_t re;
	uint8_t klen; /* bytes in the automaton */
	uint8_t flags;
};

static int key_state_cmp(const void *a, const void *b)
{
	const struct ac_key *x = a, *y = b;
	if (x->state != y->state) {
		return x->state < y->state ? -1 : 1;
	}
	return x->j < y->j ? -1 : x->j > y->j;
}

static void ac_release(struct nx_filter_side *s)
{
	size_t nst = (size_t)s->ac_nrows + s->ac_nsp;
	nx_mem_free(NX_OWNER_filter_side, s->ac_rows,
		    (size_t)s->ac_nrows * s->ac_nc * sizeof(*s->ac_rows));
	nx_mem_free(NX_OWNER_filter_side, s->ac_sp, s->ac_nsp * sizeof(*s->ac_sp));
	nx_mem_free(NX_OWNER_filter_side, s->ac_ch, s->ac_nsp);
	nx_mem_free(NX_OWNER_filter_side, s->ac_out_off,
		    s->ac_out_off ? (nst + 1) * sizeof(*s->ac_out_off) : 0);
	nx_mem_free(NX_OWNER_filter_side, s->ac_dict, s->ac_dict ? nst * sizeof(*s->ac_dict) : 0);
	nx_mem_free(NX_OWNER_filter_side, s->ac_out, s->ac_nout * sizeof(*s->ac_out));
	nx_mem_free(NX_OWNER_filter_side, s->pre, s->npre * sizeof(*s->pre));
	nx_mem_free(NX_OWNER_filter_side, s->always, s->nalways * sizeof(*s->always));
	s->ac_rows = s->ac_out_off = s->ac_dict = s->pre = s->always = NULL;
	s->ac_sp = NULL;
	s->ac_ch = NULL;
	s->ac_out = NULL;
	s->ac_nrows = s->ac_nsp = s->ac_nout = s->npre = s->nalways = 0;
}

/* The keys of regex rule scan[j] into keys (NULL: count only); returns how many. A key with a
 * byte no subject holds is left out (it never occurs). */
static uint32_t rule_keys(const struct nx_filter_side *s, uint32_t j, struct ac_key *keys)
{
	const struct side_rule *r = &s->rules[s->scan[j]];
	const struct side_lit *l = &s->lit[r->re];
	uint32_t n = 0;
	size_t pos = 0;
	for (unsigned a = 0; a < (l->nalt ? l->nalt : 1u); a++) {
		uint32_t off = l->off;
		size_t len = l->len;
		if (l->nalt) {
			len = (unsigned char)s->pool[l->off + pos];
			off = l->off + (uint32_t)pos + 1;
			pos += len + 1;
		}
		bool possible = len > 0;
		for (size_t k = 0; k < len; k++) {
			possible &= side_subject_byte((unsigned char)s->pool[off + k]);
		}
		if (!possible) {
			continue;
		}
		if (keys) {
			keys[n] = (struct ac_key){
			    j,
			    0,
			    off,
			    (uint16_t)len,
			    (uint16_t)r->re,
			    (uint8_t)(len < SIDE_AC_KEY_MAX ? len : SIDE_AC_KEY_MAX),
			    (uint8_t)(l->at_start ? SIDE_AC_AT_START : 0)};
		}
		n++;
	}
	return n;
}

/*
 * The automaton over scan[]'s literals: a trie of the keys (each literal's first
 * SIDE_AC_KEY_MAX bytes), failure links breadth first, the full transition kept only for
 * dense states. Rules without a literal go to `always`; those whose every key has a byte no
 * subject holds never run; URL rules whose literal lies inside "http://" go to `pre`.
 * Temporary: one next-state table of (1 + key bytes) x classes uint32_t (~0.8 MB for the
 * shared lists), freed before returning.
 */
static int build_ac(struct nx_filter_side *s)
{
	if (s->nscan == 0) {
		return 0;
	}
	uint32_t nkeys = 0, nalw = 0;
	size_t key_bytes = 0;
	for (uint32_t j = 0; j < s->nscan; j++) {
		const struct side_rule *r = &s->rules[s->scan[j]];
		if (r->re == UINT32_MAX || s->lit[r->re].len == 0) {
			nalw++;
			continue;
		}
		uint32_t n = rule_keys(s, j, NULL);
		nkeys += n;
		s->st.never += n == 0;
	}
	s->always = nalw ? nx_mem_calloc(NX_OWNER_filter_side, nalw, sizeof(*s->always)) : NULL;
	struct ac_key *keys =
	    nkeys ? nx_mem_calloc(NX_OWNER_filter_side, nkeys, sizeof(*keys)) : NULL;
	int rc = (s->always || !nalw) && (keys || !nkeys) ? 0 : -ENOMEM;
	uint32_t nk = 0;
	for (uint32_t j = 0; !rc && j < s->nscan; j++) {
		const struct side_rule *r = &s->rules[s->scan[j]];
		if (r->re == UINT32_MAX || s->lit[r->re].len == 0) {
			s->always[s->nalways++] = j;
			s->st.unfiltered += r->re != UINT32_MAX;
			continue;
		}
		nk += rule_keys(s, j, keys + nk);
	}
	key_bytes = 0;
	for (uint32_t k = 0; k < nk; k++) {
		key_bytes += keys[k].klen;
	}
	if (rc || nkeys == 0) {
		nx_mem_free(NX_OWNER_filter_side, keys, nkeys * sizeof(*keys));
		return rc;
	}
	/* byte classes: 1.. for the bytes the keys use, 0 for the rest; A-Z as a-z */
	uint8_t cls[256] = {0};
	unsigned nc = 1;
	for (uint32_t k = 0; k < nkeys; k++) {
		for (unsigned i = 0; i < keys[k].klen; i++) {
			unsigned char c = (unsigned char)s->pool[keys[k].lit_off + i];
			if (!cls[c]) {
				cls[c] = (uint8_t)nc++;
			}
		}
	}
	for (unsigned c = 'a'; c <= 'z'; c++) {
		cls[c - 32] = cls[c];
	}
	/* the rows' stride: the classes, then the walk's class for a byte that is no list-name
	 * byte (SIDE_AC_BAD) */
	unsigned rs = nc + 1;
	if (rs > 255) {
		nx_mem_free(NX_OWNER_filter_side, keys, nkeys * sizeof(*keys));
		return NX_ELIMIT;
	}
	size_t maxst = key_bytes + 1;
	/* the trie, in a full next-state table (0: no child; the root is no one's child) */
	uint32_t *tg = nx_mem_calloc(NX_OWNER_filter_side, maxst * nc, sizeof(*tg));
	uint32_t *fail = nx_mem_calloc(NX_OWNER_filter_side, maxst, sizeof(*fail));
	uint32_t *order = nx_mem_calloc(NX_OWNER_filter_side, maxst, sizeof(*order));
	uint32_t *val = nx_mem_calloc(NX_OWNER_filter_side, maxst, sizeof(*val));
	uint32_t *dict = nx_mem_calloc(NX_OWNER_filter_side, maxst, sizeof(*dict));
	uint32_t *own = nx_mem_calloc(NX_OWNER_filter_side, maxst, sizeof(*own));
	uint8_t *info = nx_mem_calloc(NX_OWNER_filter_side, maxst, 3); /* depth, children, ch */
	rc = tg && fail && order && val && dict && own && info ? 0 : -ENOMEM;
	uint32_t nst = 1;
	for (uint32_t k = 0; !rc && k < nkeys; k++) {
		uint32_t x = 0;
		for (unsigned i = 0; i < keys[k].klen; i++) {
			unsigned c = cls[(unsigned char)s->pool[keys[k].lit_off + i]];
			if (!tg[x * nc + c]) {
				tg[x * nc + c] = nst;
				info[nst * 3] = (uint8_t)(i + 1);
				info[x * 3 + 1]++;
				info[x * 3 + 2] = (uint8_t)c;
				nst++;
			}
			x = tg[x * nc + c];
		}
		keys[k].state = x;
		own[x]++;
	}
	/* breadth first: failure links, dict links, and every missing transition made the
	 * failure's (rows change only once their state is dequeued: a nonzero entry before
	 * that is a child) */
	uint32_t head = 0, tail = 0, ndense = 0;
	if (!rc) {
		order[tail++] = 0;
	}
	while (!rc && head < tail) {
		uint32_t x = order[head++];
		for (unsigned c = 0; c < nc; c++) {
			uint32_t t = tg[x * nc + c];
			if (t) {
				fail[t] = x == 0 ? 0 : tg[fail[x] * nc + c];
				dict[t] = own[fail[t]] ? fail[t] : dict[fail[t]];
				order[tail++] = t;
			} else {
				tg[x * nc + c] = x == 0 ? 0 : tg[fail[x] * nc + c];
			}
		}
	}
	/* values: dense states in breadth-first order take rows, the others sparse slots */
	uint32_t nsp = 0;
	for (uint32_t i = 0; !rc && i < nst; i++) {
		uint32_t x = order[i];
		bool dense = info[x * 3] <= 2 || info[x * 3 + 1] >= 2;
		val[x] = dense ? ndense++ * rs : SIDE_AC_SPARSE | nsp++;
		if (own[x] || dict[x]) {
			val[x] |= SIDE_AC_OUT;
		}
	}
	if (!rc) {
		s->ac_rows =
		    nx_mem_calloc(NX_OWNER_filter_side, (size_t)ndense * rs, sizeof(*s->ac_rows));
		s->ac_sp = nsp ? nx_mem_calloc(NX_OWNER_filter_side, nsp, sizeof(*s->ac_sp)) : NULL;
		s->ac_ch = nsp ? nx_mem_calloc(NX_OWNER_filter_side, nsp, 1) : NULL;
		s->ac_out_off =
		    nx_mem_calloc(NX_OWNER_filter_side, nst + 1, sizeof(*s->ac_out_off));
		s->ac_dict = nx_mem_calloc(NX_OWNER_filter_side, nst, sizeof(*s->ac_dict));
		s->ac_out = nx_mem_calloc(NX_OWNER_filter_side, nkeys, sizeof(*s->ac_out));
		s->ac_nrows = ndense;
		s->ac_nsp = nsp;
		s->ac_nc = (uint8_t)rs;
		s->ac_nout = nkeys;
		if (!s->ac_rows || (nsp && (!s->ac_sp || !s->ac_ch)) || !s->ac_out_off ||
		    !s->ac_dict || !s->ac_out) {
			rc = -ENOMEM; /* ac_release (the builder's free) returns what was taken */
			nx_mem_free(NX_OWNER_filter_side, s->ac_rows,
				    s->ac_rows ? (size_t)ndense * rs * sizeof(*s->ac_rows) : 0);
			nx_mem_free(NX_OWNER_filter_side, s->ac_sp,
				    s->ac_sp ? nsp * sizeof(*s->ac_sp) : 0);
			nx_mem_free(NX_OWNER_filter_side, s->ac_ch, s->ac_ch ? nsp : 0);
			s->ac_ch = NULL;
			nx_mem_free(NX_OWNER_filter_side, s->ac_out_off,
				    s->ac_out_off ? (nst + 1) * sizeof(*s->ac_out_off) : 0);
			nx_mem_free(NX_OWNER_filter_side, s->ac_dict,
				    s->ac_dict ? nst * sizeof(*s->ac_dict) : 0);
			nx_mem_free(NX_OWNER_filter_side, s->ac_out,
				    s->ac_out ? nkeys * sizeof(*s->ac_out) : 0);
			s->ac_rows = s->ac_out_off = s->ac_dict = NULL;
			s->ac_sp = NULL;
			s->ac_out = NULL;
			s->ac_nrows = s->ac_nsp = s->ac_nout = 0;
		}
	}
	if (!rc) {
		memcpy(s->ac_cls, cls, sizeof(cls));
		/* the query's one table per byte: lower case, not-a-list-byte flag, class */
		for (unsigned c = 0; c < 256; c++) {
			unsigned f = c >= 'A' && c <= 'Z' ? c + 32 : c;
			bool listb = (f >= 'a' && f <= 'z') || (f >= '0' && f <= '9') || f == '-' ||
				     f == '_';
			s->ac_fold[c] =
			    f | (listb ? 0u : 0x100u) | (uint32_t)(listb ? cls[c] : nc) << 16;
		}
		for (uint32_t i = 0; i < nst; i++) {
			uint32_t x = order[i];
			uint32_t v = val[x];
			uint32_t id = side_ac_id(s, v);
			s->ac_dict[id] = dict[x] ? side_ac_id(s, val[dict[x]]) : 0;
			if (!(v & SIDE_AC_SPARSE)) {
				for (unsigned c = 0; c < nc; c++) {
					s->ac_rows[(v & SIDE_AC_ID) + c] = val[tg[x * nc + c]];
				}
				s->ac_rows[(v & SIDE_AC_ID) + nc] = SIDE_AC_BAD; /* the root */
				continue;
			}
			struct side_ac_sparse *sp = &s->ac_sp[v & SIDE_AC_ID];
			sp->fail = val[fail[x]];
			s->ac_ch[v & SIDE_AC_ID] = SIDE_AC_NONE;
			if (info[x * 3 + 1] == 1) {
				unsigned c = info[x * 3 + 2];
				/* the child: the one entry a dequeued sparse row kept deeper */
				s->ac_ch[v & SIDE_AC_ID] = (uint8_t)c;
				sp->next = val[tg[x * nc + c]];
			}
		}
		/* outputs grouped by final id */
		for (uint32_t k = 0; k < nkeys; k++) {
			keys[k].state = side_ac_id(s, val[keys[k].state]);
		}
		qsort(keys, nkeys, sizeof(*keys), key_state_cmp);
		for (uint32_t k = 0; k < nkeys; k++) {
			s->ac_out[k] =
			    (struct side_ac_out){keys[k].j,  keys[k].lit_off, keys[k].lit_len,
						 keys[k].re, keys[k].klen,    keys[k].flags};
			s->ac_out_off[keys[k].state + 1]++;
		}
		for (uint32_t i = 0; i < nst; i++) {
			s->ac_out_off[i + 1] += s->ac_out_off[i];
		}
		/* the start state, and the URL rules whose key lies inside "http://" */
		uint32_t *pre = nx_mem_calloc(NX_OWNER_filter_side, nkeys, sizeof(*pre));
		uint32_t npre = 0, v = 0;
		rc = pre ? 0 : -ENOMEM;
		for (const char *p = "http://"; !rc && *p; p++) {
			v = side_ac_step(s, v, cls[(unsigned char)*p]);
			for (uint32_t y = v & SIDE_AC_OUT ? side_ac_id(s, v) : 0; y;
			     y = s->ac_dict[y]) {
				for (uint32_t o = s->ac_out_off[y]; o < s->ac_out_off[y + 1]; o++) {
					const struct side_ac_out *h = &s->ac_out[o];
					bool dup = !s->lit[h->re].url || h->lit_len != h->klen ||
						   (h->flags & SIDE_AC_AT_START);
					for (uint32_t d = 0; d < npre; d++) {
						dup |= pre[d] == h->j;
					}
					if (!dup) {
						pre[npre++] = h->j;
					}
				}
			}
		}
		if (!rc && npre) {
			s->pre = nx_mem_calloc(NX_OWNER_filter_side, npre, sizeof(*s->pre));
			rc = s->pre ? 0 : -ENOMEM;
			if (!rc) {
				memcpy(s->pre, pre, npre * sizeof(*pre));
				s->npre = npre;
			}
		}
		nx_mem_free(NX_OWNER_filter_side, pre, pre ? nkeys * sizeof(*pre) : 0);
		s->ac_start = v;
		s->st.ac_states = nst;
		s->st.ac_dense = ndense;
		s->st.ac_bytes = (size_t)ndense * rs * sizeof(*s->ac_rows) +
				 nsp * (sizeof(*s->ac_sp) + 1) +
				 (nst + 1) * sizeof(*s->ac_out_off) + nst * sizeof(*s->ac_dict) +
				 nkeys * sizeof(*s->ac_out);
	}
	nx_mem_free(NX_OWNER_filter_side, tg, tg ? maxst * nc * sizeof(*tg) : 0);
	nx_mem_free(NX_OWNER_filter_side, fail, fail ? maxst * sizeof(*fail) : 0);
	nx_mem_free(NX_OWNER_filter_side, order, order ? maxst * sizeof(*order) : 0);
	nx_mem_free(NX_OWNER_filter_side, val, val ? maxst * sizeof(*val) : 0);
	nx_mem_free(NX_OWNER_filter_side, dict, dict ? maxst * sizeof(*dict) : 0);
	nx_mem_free(NX_OWNER_filter_side, own, own ? maxst * sizeof(*own) : 0);
	nx_mem_free(NX_OWNER_filter_side, info, info ? maxst * 3 : 0);
	nx_mem_free(NX_OWNER_filter_side, keys, nkeys * sizeof(*keys));
	return rc;
}

int nx_filter_side_build(struct nx_filter_side_builder *b, struct nx_filter_side **out)
{
	*out = NULL;
	struct nx_filter_side *s = &b->s;
	/* $badfilter: cancel rules whose canonical text (same origin) a badfilter names */
	if (b->nbad || b->nbad_any) {
		if (b->nbad) {
			qsort(b->bad, b->nbad, sizeof(*b->bad), key_cmp);
		}
		if (b->nbad_any) {
			qsort(b->bad_any, b->nbad_any, sizeof(*b->bad_any), key_cmp);
		}
		for (uint32_t i = 0; i < s->nrules; i++) {
			if ((b->nbad &&
			     bsearch(&b->keys[i], b->bad, b->nbad, sizeof(*b->bad), key_cmp)) ||
			    (b->nbad_any && bsearch(&b->keys_any[i], b->bad_any, b->nbad_any,
						    sizeof(*b->bad_any), key_cmp))) {
				s->rules[i].dead = 1;
				s->st.cancelled++;
			}
		}
	}
	uint32_t n = 0, nidx = 0, nscan = 0;
	for (uint32_t i = 0; i < s->nrules; i++) {
		if (s->rules[i].dead) {
			continue;
		}
		s->rules[n] = s->rules[i];
		struct side_rule *r = &s->rules[n++];
		if (side_indexed(r->anchor)) {
			nidx++;
		} else {
			nscan++;
		}
	}
	s->nrules = n;
	int rc = 0;
	if (nidx) {
		s->idx = nx_mem_calloc(NX_OWNER_filter_side, nidx, sizeof(*s->idx));
		rc = s->idx ? 0 : -ENOMEM;
	}
	if (!rc && nscan) {
		s->scan = nx_mem_calloc(NX_OWNER_filter_side, nscan, sizeof(*s->scan));
		rc = s->scan ? 0 : -ENOMEM;
	}
	if (rc) {
		nx_mem_free(NX_OWNER_filter_side, s->idx, nidx * sizeof(*s->idx));
		s->idx = NULL;
		nx_filter_side_builder_free(b);
		return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct side_rule *r = &s->rules[i];
		s->st.rules++;
		if (r->rewrite != NX_FILTER_RW_NONE) {
			s->st.rewrites++;
		}
		if (side_indexed(r->anchor)) {
			uint64_t h = side_hash(s->pool + r->name_off, r->name_len);
			s->idx[s->nidx++] = (struct side_idx){h, i, 0};
			s->name_bits[(h & 4095) / 64] |= 1ull << (h % 64);
			const char *nm = s->pool + r->name_off;
			const char *dot = r->name_len ? memchr(nm, '.', r->name_len) : NULL;
			size_t l1 = dot ? (size_t)(dot - nm) : r->name_len;
			if (l1) {
				unsigned key = side_label_key(l1, (unsigned char)nm[0],
							      (unsigned char)nm[l1 - 1]);
				s->label_bits[key / 64] |= 1ull << (key % 64);
			}
			s->st.named++;
		} else {
			s->scan[s->nscan++] = i;
			if (r->re != UINT32_MAX) {
				s->st.regexes++;
			}
		}
	}
	if (s->nidx) {
		qsort(s->idx, s->nidx, sizeof(*s->idx), idx_cmp);
	}
	rc = build_ac(s);
	if (rc) {
		nx_mem_free(NX_OWNER_filter_side, s->idx, nidx * sizeof(*s->idx));
		nx_mem_free(NX_OWNER_filter_side, s->scan, nscan * sizeof(*s->scan));
		s->idx = NULL;
		s->scan = NULL;
		s->nidx = s->nscan = 0;
		nx_filter_side_builder_free(b);
		return rc;
	}
	struct nx_filter_side *o = nx_mem_calloc(NX_OWNER_filter_side, 1, sizeof(*o));
	if (!o) {
		nx_mem_free(NX_OWNER_filter_side, s->idx, nidx * sizeof(*s->idx));
		nx_mem_free(NX_OWNER_filter_side, s->scan, nscan * sizeof(*s->scan));
		s->idx = NULL;
		s->scan = NULL;
		nx_filter_side_builder_free(b);
		return -ENOMEM;
	}
	/* shrink every array to its size: the built object frees by exact sizes */
	*o = *s;
#define SHRINK(field, cap)                                                                         \
	do {                                                                                       \
		size_t want_ = (size_t)o->n##field * sizeof(*o->field);                            \
		if (want_ == 0) {                                                                  \
			nx_mem_free(NX_OWNER_filter_side, o->field, (cap) * sizeof(*o->field));    \
			o->field = NULL;                                                           \
		} else if (want_ != (cap) * sizeof(*o->field)) {                                   \
			void *p_ = nx_mem_realloc(NX_OWNER_filter_side, o->field,                  \
						  (cap) * sizeof(*o->field), want_);               \
			if (p_) {                                                                  \
				o->field = p_;                                                     \
			} else {                                                                   \
				/* keep it, counted at its used size: the free's size */           \
				nx_ledger_charge(NX_OWNER_filter_side,                             \
						 -(int64_t)((cap) * sizeof(*o->field) - want_),    \
						 0);                                               \
			}                                                                          \
		}                                                                                  \
	} while (0)
	SHRINK(rules, b->rules_cap);
	SHRINK(vals, b->vals_cap);
	SHRINK(re, b->re_cap);
	{
		/* lit is parallel to re: same count */
		size_t want = (size_t)o->nre * sizeof(*o->lit), had = b->re_cap * sizeof(*o->lit);
		if (want == 0) {
			nx_mem_free(NX_OWNER_filter_side, o->lit, had);
			o->lit = NULL;
		} else if (want != had) {
			void *p = nx_mem_realloc(NX_OWNER_filter_side, o->lit, had, want);
			if (p) {
				o->lit = p;
			} else {
				nx_ledger_charge(NX_OWNER_filter_side, -(int64_t)(had - want), 0);
			}
		}
	}
#undef SHRINK
	if (o->pool_len == 0) {
		nx_mem_free(NX_OWNER_filter_side, o->pool, b->pool_cap);
		o->pool = NULL;
	} else if (o->pool_len != b->pool_cap) {
		void *p = nx_mem_realloc(NX_OWNER_filter_side, o->pool, b->pool_cap, o->pool_len);
		if (p) {
			o->pool = p;
		} else {
			nx_ledger_charge(NX_OWNER_filter_side,
					 -(int64_t)(b->pool_cap - o->pool_len), 0);
		}
	}
	size_t bytes = sizeof(*o) + o->nrules * sizeof(*o->rules) + o->nvals * sizeof(*o->vals) +
		       o->nidx * sizeof(*o->idx) + o->nscan * sizeof(*o->scan) +
		       o->nre * (sizeof(*o->re) + sizeof(*o->lit)) + o->pool_len + o->st.ac_bytes +
		       o->npre * sizeof(*o->pre) + o->nalways * sizeof(*o->always);
	for (uint32_t i = 0; i < o->nre; i++) {
		size_t sz = 0;
		pcre2_pattern_info(o->re[i], PCRE2_INFO_SIZE, &sz);
		bytes += sz;
	}
	o->st.bytes = bytes;
	/* the builder no longer owns the arrays */
	nx_mem_free(NX_OWNER_filter_side, b->keys, b->rules_cap * sizeof(*b->keys));
	nx_mem_free(NX_OWNER_filter_side, b->keys_any, b->rules_cap * sizeof(*b->keys_any));
	b->keys = b->keys_any = NULL;
	memset(s, 0, sizeof(*s));
	b->rules_cap = b->vals_cap = b->pool_cap = b->re_cap = 0;
	s->mctx = NULL;
	nx_filter_side_builder_free(b);
	*out = o;
	return 0;
}

int nx_filter_side_open(const struct nx_filter_snap_source *src, unsigned n,
			struct nx_filter_side **out)
{
	*out = NULL;
	if (n > NX_FILTER_SOURCES_MAX) {
		return NX_ELIMIT;
	}
	struct nx_filter_side_builder *b;
	int rc = nx_filter_side_builder_new(&b);
	if (rc) {
		return rc;
	}
	for (unsigned i = 0; i < n; i++) {
		rc = nx_filter_side_load_source(b, src[i].dir, src[i].name, i);
		if (rc) {
			nx_filter_side_builder_free(b);
			return rc;
		}
	}
	return nx_filter_side_build(b, out);
}

void nx_filter_side_free(struct nx_filter_side *s)
{
	if (!s) {
		return;
	}
	side_release(s, s->nrules, s->nvals, s->pool_len, s->nre, s->nidx, s->nscan);
	nx_mem_free(NX_OWNER_filter_side, s, sizeof(*s));
}

void nx_filter_side_stats(const struct nx_filter_side *s, struct nx_filter_side_stats *out)
{
	if (!s) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = s->st;
}

const char *nx_filter_side_rule_text(const struct nx_filter_side *s, int32_t idx, size_t *len)
{
	if (!s || idx < 0 || (uint32_t)idx >= s->nrules) {
		return NULL;
	}
	*len = s->rules[idx].text_len;
	return s->pool + s->rules[idx].text_off;
}

int nx_filter_side_rule_origin(const struct nx_filter_side *s, int32_t idx)
{
	if (!s || idx < 0 || (uint32_t)idx >= s->nrules) {
		return -1;
	}
	return s->rules[idx].origin;
}

/*
 * Internals of the side structure shared by side.c (parse, build) and lists.c (match, answer).
 * Never included from outside src/filter.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <xxhash.h>

#include "dns/wire.h"
#include "filter/parse.h"
#include "filter/side.h"

/* How a side rule finds its names. */
enum side_anchor {
	AN_EXACT,   /* |x^, hosts line: x only (indexed) */
	AN_SUB,	    /* ||x^: x and every name under it (indexed) */
	AN_ANY,	    /* empty pattern restricted by modifiers: every name (scanned) */
	AN_RE_HOST, /* /re/: PCRE2 over the lower-case name (scanned) */
	AN_RE_URL,  /* URL pattern: PCRE2 over the name and over "http://name/" (scanned) */
	AN_WILD,    /* *.x (user rules): proper subdomains of x only (indexed) */
};

static inline bool side_indexed(unsigned anchor)
{
	return anchor == AN_EXACT || anchor == AN_SUB || anchor == AN_WILD;
}

/* Can a query subject hold byte c? Scanned rules run on clean names only (labels of
 * [a-z0-9_-], lower case) and on "http://name/". A literal with any other byte never occurs. */
static inline bool side_subject_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
	       c == '.' || c == ':' || c == '/';
}

/* Hosts-line address that blocks instead of answering (0.0.0.0, 127.0.0.1, ::, ::1, scoped). */
bool nx_filter_hosts_null_addr(const char *s, size_t len);

#define SR_ALLOW 0x01u	   /* @@ (or a plain rule of the user allow list) */
#define SR_IMPORTANT 0x02u /* $important */
#define SR_CLIENT 0x04u	   /* has $client values */
#define SR_CTAG 0x08u	   /* has $ctag values */
#define SR_DNSTYPE 0x10u   /* has $dnstype values */
#define SR_DENY 0x20u	   /* has $denyallow values */

/* One rule. Offsets are into the pool (texts, names, rdata, value strings). */
struct side_rule {
	uint32_t text_off;  /* rule text as written */
	uint32_t name_off;  /* anchored name (indexed anchors), lower case */
	uint32_t rdata_off; /* $dnsrewrite / hosts rdata */
	uint32_t vals_off;  /* first of nvals values in the value array */
	uint32_t re;	    /* regex index (AN_RE_*), else UINT32_MAX */
	uint16_t text_len;
	uint16_t name_len;
	uint16_t rdlen;
	uint16_t rr_type; /* RECORDS / HOSTS: A, AAAA, CNAME, TXT */
	uint16_t nvals;
	uint8_t origin;	 /* source index or NX_FILTER_ORIGIN_USER_* */
	uint8_t anchor;	 /* enum side_anchor */
	uint8_t flags;	 /* SR_* */
	uint8_t nmods;	 /* specificity: how many restricting modifiers */
	uint8_t rewrite; /* enum nx_filter_rewrite */
	uint8_t dead;	 /* cancelled by $badfilter (build only) */
};
_Static_assert(sizeof(struct side_rule) == 36, "side_rule is part of the side's memory budget");

/* V_GROUPS: a user rule limited to config groups (addr holds the uint64_t group mask). */
enum side_vkind { V_ADDR, V_NAME, V_CTAG, V_DNSTYPE, V_DENY, V_GROUPS };

/* One value of a $client / $ctag / $dnstype / $denyallow list. */
struct side_val {
	uint8_t kind;	/* enum side_vkind */
	uint8_t neg;	/* written with ~ */
	uint8_t family; /* V_ADDR: 4 or 6 */
	uint8_t prefix; /* V_ADDR: prefix length in bits */
	uint16_t qtype; /* V_DNSTYPE */
	uint16_t len;	/* V_NAME / V_CTAG / V_DENY: string length */
	uint32_t off;	/* string in pool */
	uint8_t addr[16];
};

/* Name index entry: XXH3-64 of the anchored name, rule index; sorted by (h, rule). */
struct side_idx {
	uint64_t h;
	uint32_t rule;
	uint32_t pad;
};

/* A literal every subject matched by regex i contains (lower case), for the prefilter. */
struct side_lit {
	uint32_t off;	  /* in pool */
	uint16_t len;	  /* 0: none known (the regex runs on every clean name) */
	uint8_t minlen;	  /* PCRE2_INFO_MINLENGTH, capped: shorter subjects cannot match */
	uint8_t url;	  /* AN_RE_URL with '/' or ':': matched against "http://name/" only */
	uint8_t anchored; /* anchored at the subject's start and `first` is its first bytes */
	uint8_t nalt;	  /* 0: one literal; else the pool at off holds nalt (length byte,
			   * bytes) alternatives, len bytes in all, one of which every match has */
	uint8_t at_start; /* every match begins with the literal (or one of the alternatives) */
	uint8_t pad;
	uint32_t off2; /* a second literal every match contains (URL patterns: the next longest
			* run), checked before PCRE2 is called */
	uint16_t len2; /* 0: none */
	uint16_t pad2;
	uint8_t first[32]; /* bit c: the first subject byte may be c (PCRE2_INFO_FIRSTBITMAP) */
};

/*
 * The regex prefilter: an Aho-Corasick automaton over the scanned rules' literals, walked once
 * per query over "http://name/" (the lower-case name's bytes; the prefix is the start state).
 * Its cost per query is about one table load per byte whatever the rule count; a rule is a
 * candidate only when its literal occurs (inside the name for a rule run on the name, at its
 * start for a literal every match begins with).
 *
 * Layout: byte classes (the bytes some key has, upper case folded; class 0 for every other
 * byte; the query's walk gives every byte that is no list-name byte a class of its own, the
 * rows' last column, leading to the root flagged SIDE_AC_BAD). A state at depth <= 2 or with
 * two or more children is dense: its row in `ac_rows` holds the next state for every class
 * (the full DFA transition). Any other state is sparse:
 * at most one child and its failure link; a byte other than the child's follows the link to
 * a shallower state, so one byte costs at most SIDE_AC_KEY_MAX lookups and, amortised, two.
 * The root is dense: the walk always ends. A state is named by a 32-bit value: a dense one by
 * the offset of its row (row x classes: no multiply per byte), a sparse one by SIDE_AC_SPARSE
 * and its index; SIDE_AC_OUT says keys end there (or at a suffix: its `dict` chain).
 */
/* Bytes of a literal the automaton holds: its prefix (any part of a mandatory literal is
 * mandatory); a longer literal is compared in place at a hit. Bounds the states. */
#define SIDE_AC_KEY_MAX 8u
/* Keys per regex (the alternatives of an anchored group such as ^(mon|tue|...)). */
#define SIDE_AC_ALTS_MAX 16u
/* States: keys of SIDE_AC_KEY_MAX bytes for every regex, and the root, always fit. */
#define SIDE_AC_STATES_MAX (1u << 24)
_Static_assert(NX_FILTER_SIDE_REGEX_MAX *SIDE_AC_ALTS_MAX *SIDE_AC_KEY_MAX + 1 <=
		   SIDE_AC_STATES_MAX,
	       "every key fits the automaton");
#define SIDE_AC_OUT 0x80000000u	   /* keys end at this state or at its dict chain */
#define SIDE_AC_SPARSE 0x40000000u /* an index into ac_sp, else a row offset into ac_rows */
/* The query's walk only: the byte was no list-name byte (its class is the rows' last column,
 * ac_nc - 1, whose every entry is the root with this flag): the label is not clean. */
#define SIDE_AC_BAD 0x20000000u
#define SIDE_AC_ID 0x1fffffffu
_Static_assert((uint64_t)(NX_FILTER_SIDE_REGEX_MAX *SIDE_AC_ALTS_MAX *SIDE_AC_KEY_MAX + 1) * 256 <=
		   SIDE_AC_ID,
	       "every row offset (states x classes) fits below the flags");
#define SIDE_AC_NONE 0xffu /* ac_ch of a sparse state without a child */

struct side_ac_sparse {
	uint32_t next; /* the child (a state value); its class is ac_ch[] */
	uint32_t fail; /* the longest proper suffix that is a state (a state value) */
};

/* A key that ends at a state: those of state id g (dense: its row; sparse: ac_nrows + its
 * index) are ac_out[ac_out_off[g] .. ac_out_off[g+1]]; a hit at g also yields the keys of its
 * dict chain ac_dict[g], ... (ids; 0 ends it: the root has no keys). */
#define SIDE_AC_AT_START 0x01u /* flags: the literal begins every match (^lit, ^(a|b)) */
struct side_ac_out {
	uint32_t j;	  /* position in scan[] */
	uint32_t lit_off; /* the whole literal, in pool */
	uint16_t lit_len;
	uint16_t re;  /* regex index (the dedup bit) */
	uint8_t klen; /* key length: where the literal starts */
	uint8_t flags;
	uint8_t pad[2];
};

struct nx_filter_side {
	struct side_rule *rules; /* owned (filter_side) */
	uint32_t nrules;
	struct side_val *vals; /* owned */
	uint32_t nvals;
	struct side_idx *idx; /* owned, nidx entries */
	uint32_t nidx;
	uint32_t *scan; /* owned: rules with a scanned anchor, in rule order */
	uint32_t nscan;
	pcre2_code **re; /* owned, nre compiled patterns */
	uint32_t nre;
	struct side_lit *lit; /* owned, nre entries (parallel to re) */
	/* the prefilter (above): scanned rules run when their literal occurs */
	uint32_t *ac_rows;	      /* owned, ac_nrows x ac_nc state values (NULL: no key) */
	struct side_ac_sparse *ac_sp; /* owned, ac_nsp */
	uint8_t *ac_ch;		      /* owned, ac_nsp child classes (SIDE_AC_NONE: a leaf) */
	uint32_t *ac_out_off;	      /* owned, ac_nrows + ac_nsp + 1 offsets into ac_out */
	uint32_t *ac_dict;	      /* owned, ac_nrows + ac_nsp ids */
	struct side_ac_out *ac_out;   /* owned, ac_nout */
	uint32_t ac_nrows, ac_nsp, ac_nout;
	uint32_t ac_start; /* the state after "http://" */
	uint8_t ac_nc;	   /* byte classes */
	uint8_t ac_cls[256];
	/* per byte: its lower case | 0x100 when no list-name byte | its class << 16, for a byte
	 * that is no list-name byte the last class (ac_nc - 1: SIDE_AC_BAD); one load a byte for
	 * the lower-case copy, the walk and the clean-label test together */
	uint32_t ac_fold[256];
	uint32_t *pre; /* owned, npre scan[] positions: URL rules whose literal is in "http://" */
	uint32_t npre;
	uint32_t *always; /* owned, nalways scan[] positions without a literal: every clean name */
	uint32_t nalways;
	/* One bit per bucket: most of a query's names hit nothing, and these 512 B stay in cache
	 * where the index would miss. */
	uint64_t name_bits[64]; /* bit (h & 4095): some indexed rule's name hashes there */
	/* bit side_label_key(first label): an indexed rule's name begins with such a label. A
	 * query whose labels all miss here has no indexed rule to find: no hash is computed. */
	uint64_t label_bits[64];
	char *pool;		/* owned, pool_len bytes */
	size_t pool_len;
	pcre2_match_context *mctx; /* owned: the limits, read-only once built */
	struct nx_filter_side_stats st;
};

/* One step of the prefilter automaton from state value v on byte class c (ac_cls). */
static inline uint32_t side_ac_step(const struct nx_filter_side *s, uint32_t v, unsigned c)
{
	while (v & SIDE_AC_SPARSE) {
		uint32_t i = v & SIDE_AC_ID;
		if (s->ac_ch[i] == c) {
			return s->ac_sp[i].next;
		}
		v = s->ac_sp[i].fail;
	}
	return s->ac_rows[(v & SIDE_AC_ID) + c];
}

/* The id of state value v (for ac_out_off / ac_dict). */
static inline uint32_t side_ac_id(const struct nx_filter_side *s, uint32_t v)
{
	return v & SIDE_AC_SPARSE ? s->ac_nrows + (v & SIDE_AC_ID) : (v & SIDE_AC_ID) / s->ac_nc;
}

/* The name index's hash: each label hashed 8 bytes at a time, the labels combined from the
 * last to the first, so a query gets the hash of the name and of every parent in one pass
 * over its labels (instead of a multiply per byte). side_label_hash reads whole 8-byte words:
 * the caller's buffer has SIDE_HASH_PAD readable bytes past the label's end (masked off). */
#define SIDE_HASH_BASIS 0xcbf29ce484222325ull
#define SIDE_HASH_PAD 8u

static inline uint64_t side_hash_mix(uint64_t h)
{
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static inline uint64_t side_label_hash(const char *p, size_t len)
{
	uint64_t h = (uint64_t)len * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		if (len - i < 8) {
			unsigned bits = (unsigned)(len - i) * 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			w &= (1ull << bits) - 1;
#else
			w &= ~(~0ull >> bits);
#endif
		}
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h;
}

/* The key of a (lower-case) label in label_bits: word side_label_word(len, first), bit
 * (last + len) % 64 of it. The query tests a label with one load and one shift (a 64-bit
 * shift takes its count mod 64: no mask); the build sets bit side_label_key. */
static inline unsigned side_label_word(size_t len, unsigned char first)
{
	return ((unsigned)first ^ (unsigned)(len << 3)) & 63u;
}

static inline unsigned side_label_key(size_t len, unsigned char first, unsigned char last)
{
	return side_label_word(len, first) << 6 | ((last + (unsigned)len) & 63u);
}

/* The hash of label + "." + suffix from the suffix's hash (SIDE_HASH_BASIS for none). */
static inline uint64_t side_hash_step(uint64_t suffix, uint64_t label)
{
	return side_hash_mix((suffix ^ label) * 0x100000001b3ull + 1);
}

/* The hash of a text name of any buffer (copied into a padded one). */
static inline uint64_t side_hash(const char *name, size_t len)
{
	char buf[NX_DNS_NAME_MAX + 1 + SIDE_HASH_PAD] = {0};
	if (len > NX_DNS_NAME_MAX) {
		len = NX_DNS_NAME_MAX;
	}
	memcpy(buf, name, len);
	uint64_t h = SIDE_HASH_BASIS;
	size_t end = len;
	for (size_t i = len; i-- > 0;) {
		if (buf[i] == '.') {
			h = side_hash_step(h, side_label_hash(buf + i + 1, end - i - 1));
			end = i;
		}
	}
	return side_hash_step(h, side_label_hash(buf, end));
}

/* Check one rule line (shared by the compiler's parser and the builder): NONE or the skip
 * reason, with a message in err. */
enum nx_filter_skip nx_filter_side_check(const char *line, size_t len, char *err, size_t errlen);

/* Does r apply to q apart from its name (eligibility, $client, $ctag, $dnstype, $denyallow)?
 * name/nlen: the query name in text form (for $denyallow). */
struct nx_filter_qctx;
bool nx_side_applies(const struct nx_filter_side *s, const struct side_rule *r,
		     const struct nx_filter_qctx *q, const char *name, size_t nlen);
/* Run regex i over subject: 1 match, 0 no match, < 0 limit or error (counted). */
int nx_side_re_match(const struct nx_filter_side *s, uint32_t i, const char *subj, size_t len);

/* ---- the rule parser (side_parse.c), shared with the builder (side.c) ---- */

#define MODVAL_MAX NX_FILTER_SIDE_VALUES_MAX

struct pval {
	const char *s; /* unquoted value, in scratch */
	size_t len;
	bool neg;
};

struct parsed {
	bool allow, important, badfilter;
	enum side_anchor anchor;
	const char *pat; /* pattern between "@@" and "$" */
	size_t plen;
	char name[NX_FILTER_NAME_MAX + 1]; /* indexed anchors */
	size_t nlen;
	bool is_regex;
	/* modifiers */
	unsigned nclient, nctag, ntype, ndeny;
	struct pval client[MODVAL_MAX], ctag[MODVAL_MAX], type[MODVAL_MAX], deny[MODVAL_MAX];
	uint8_t nmods;
	uint8_t rewrite; /* enum nx_filter_rewrite */
	uint16_t rr_type;
	uint8_t rdata[NX_FILTER_TXT_MAX + 1 > NX_DNS_NAME_MAX ? NX_FILTER_TXT_MAX + 1
							      : NX_DNS_NAME_MAX];
	uint16_t rdlen;
	bool has_rewrite;
	/* canonical key for $badfilter: text without the badfilter modifier */
	char canon[NX_FILTER_LINE_MAX + 8];
	size_t canon_len;
	/* value storage for unquoted values */
	char scratch[NX_FILTER_LINE_MAX + 1];
	size_t scratch_used;
};

static inline bool side_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* snprintf into err (may be NULL) */
void nx_side_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* PCRE2 allocator on NX_OWNER_filter_side (compile time) */
void *nx_side_re_malloc(PCRE2_SIZE size, void *data);
void nx_side_re_free(void *p, void *data);
/* DNS type mnemonic or TYPEn -> number; 0 when unknown */
uint16_t nx_side_type_from_text(const char *s, size_t len);
/* One adblock-style rule into p: NONE, or the skip reason with a message in err */
enum nx_filter_skip nx_side_parse_rule(struct parsed *p, const char *line, size_t len, char *err,
				       size_t errlen);
/* The literal every match contains (lower case, into out): its length, 0 when none is known */
size_t nx_side_lit_pattern(const char *s, size_t len, char *out);
/* The longest run of an Adblock URL pattern other than the one at `skip` bytes into the
 * pattern's longest (nx_side_lit_pattern's), lower case, into out: its length or 0. */
size_t nx_side_lit_pattern2(const char *s, size_t len, const char *first, size_t flen, char *out);
size_t nx_side_lit_regex(const char *s, size_t len, char *out);
/* For a regex that begins ^lit or ^(a|b|...)lit: the alternatives every match begins with
 * ((length byte, bytes) each, lower case, into out), *nalt of them (<= SIDE_AC_ALTS_MAX);
 * their total size, 0 when the regex does not begin so. *shortest gets the shortest. */
size_t nx_side_lit_regex_start(const char *s, size_t len, char *out, unsigned *nalt,
			       size_t *shortest);
/* Adblock URL pattern -> PCRE2 source; 0 or NX_ELIMIT (cap) */
int nx_side_pattern_regex(const char *s, size_t len, char *out, size_t cap);
/* Compile caseless, no JIT, no \C; NULL with the message in err */
pcre2_code *nx_side_re_compile(const char *src, size_t len, pcre2_compile_context *cctx, char *err,
			       size_t errlen);

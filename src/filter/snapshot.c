/* Snapshot loader (validating read-only mmap) and the zero-allocation matcher. */
#include "filter/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "filter/impl.h"
#include "filter/parse.h"

struct nx_filter_snap {
	const uint8_t *base; /* mapping (owned), size bytes */
	size_t size;
	const struct nx_snap_hdr *hdr;	   /* in mapping */
	const struct nx_snap_src *src;	   /* in mapping */
	const uint32_t *bkt;		   /* in mapping */
	const struct nx_snap_combo *combo; /* in mapping */
	const uint8_t *rec;		   /* in mapping, NX_SNAP_REC_PAD bytes after the last */
	uint64_t seed;
	uint64_t nent;
	uint32_t nrec, ncombo;
	uint64_t allow_srcs; /* bit i: source i has exception (.allow) entries */
	unsigned kbits, low_bits, combo_bits, rec_bits;
	unsigned nsrc;
};

static const char *const action_names[] = {
#define NX_FILTER_ACTION_NAME(id, text) text,
    NX_FILTER_ACTIONS(NX_FILTER_ACTION_NAME)
#undef NX_FILTER_ACTION_NAME
};
static const char *const reason_names[] = {
#define NX_FILTER_REASON_NAME(id, text) text,
    NX_FILTER_REASONS(NX_FILTER_REASON_NAME)
#undef NX_FILTER_REASON_NAME
};

const char *nx_filter_action_name(enum nx_filter_action a)
{
	return (unsigned)a < sizeof(action_names) / sizeof(action_names[0]) ? action_names[a] : "?";
}

const char *nx_filter_reason_name(enum nx_filter_reason r)
{
	return (unsigned)r < sizeof(reason_names) / sizeof(reason_names[0]) ? reason_names[r] : "?";
}

/* Everything a reader relies on is checked here, before the first match. *allow_srcs: the
 * sources with exception entries (the matcher stops early when no eligible source has any). */
static int validate(const uint8_t *p, size_t size, uint64_t *allow_srcs)
{
	if (size < sizeof(struct nx_snap_hdr)) {
		return NX_ECORRUPT;
	}
	struct nx_snap_hdr h;
	memcpy(&h, p, sizeof(h));
	if (memcmp(h.magic, NX_SNAP_MAGIC, 8) != 0) {
		return NX_ECORRUPT;
	}
	if (h.version != NX_SNAP_VERSION) {
		return NX_EFORMAT; /* another format version: rebuild from the bodies */
	}
	uint64_t want = h.hdr_xxh;
	h.hdr_xxh = 0;
	if (h.endian != NX_SNAP_ENDIAN || h.hdr_size != sizeof(h) ||
	    h.src_size != sizeof(struct nx_snap_src) || XXH3_64bits(&h, sizeof(h)) != want) {
		return NX_ECORRUPT;
	}
	if (h.file_size != size || h.nsources > NX_FILTER_SOURCES_MAX ||
	    h.bucket_bits > NX_SNAP_BUCKET_BITS_MAX || h.nrecords > NX_FILTER_ENTRIES_MAX ||
	    h.ncombos > h.nrecords || h.low_bits == 0 || h.low_bits > NX_SNAP_FIELD_BITS_MAX ||
	    h.combo_bits > NX_SNAP_COMBO_BITS_MAX || (1ull << h.combo_bits) < h.ncombos ||
	    (h.combo_bits > 0 && (1ull << (h.combo_bits - 1)) >= h.ncombos)) {
		return NX_ECORRUPT;
	}
	uint64_t src_end = h.src_off + (uint64_t)h.nsources * sizeof(struct nx_snap_src);
	uint64_t nb = 1ull << h.bucket_bits;
	uint64_t bkt_end = h.bkt_off + (nb + 1) * sizeof(uint32_t);
	uint64_t combo_end = h.combo_off + (uint64_t)h.ncombos * sizeof(struct nx_snap_combo);
	unsigned rbits = h.low_bits + h.combo_bits;
	uint64_t rec_end = h.rec_off + ((uint64_t)h.nrecords * rbits + 7) / 8 + NX_SNAP_REC_PAD;
	if (h.src_off != sizeof(h) || h.bkt_off != src_end || h.bkt_off % 4 != 0 ||
	    h.combo_off < bkt_end || h.combo_off % 8 != 0 || h.combo_off - bkt_end >= 8 ||
	    h.rec_off != combo_end || rec_end != size) {
		return NX_ECORRUPT;
	}
	if (XXH3_64bits(p + h.hdr_size, size - h.hdr_size) != h.body_xxh) {
		return NX_ECORRUPT;
	}
	const struct nx_snap_src *src = (const struct nx_snap_src *)(p + h.src_off);
	for (uint32_t i = 0; i < h.nsources; i++) {
		if (!memchr(src[i].name, '\0', sizeof(src[i].name)) || src[i].name[0] == '\0') {
			return NX_ECORRUPT;
		}
	}
	/* every source set names only existing sources and at least one */
	const struct nx_snap_combo *combo = (const struct nx_snap_combo *)(p + h.combo_off);
	uint64_t valid = h.nsources == 64 ? ~0ull : (1ull << h.nsources) - 1;
	uint64_t allow = 0;
	for (uint32_t i = 0; i < h.ncombos; i++) {
		uint64_t any = 0;
		for (int f = 0; f < NX_SNAP_M__N; f++) {
			any |= combo[i].mask[f];
		}
		if (any == 0 || (any & ~valid) != 0) {
			return NX_ECORRUPT;
		}
		allow |= combo[i].mask[NX_SNAP_M_ALLOW_EXACT] | combo[i].mask[NX_SNAP_M_ALLOW_SUB];
	}
	const uint32_t *bkt = (const uint32_t *)(p + h.bkt_off);
	const uint8_t *rec = p + h.rec_off;
	if (bkt[0] != 0 || bkt[nb] != h.nrecords) {
		return NX_ECORRUPT;
	}
	uint64_t entries = 0;
	for (uint64_t b = 0; b < nb; b++) {
		if (bkt[b] > bkt[b + 1]) {
			return NX_ECORRUPT;
		}
		uint64_t plow = 0, pcombo = 0;
		for (uint32_t i = bkt[b]; i < bkt[b + 1]; i++) {
			uint64_t pos = (uint64_t)i * rbits;
			uint64_t low = nx_snap_get_bits(rec, pos, h.low_bits);
			uint64_t ci = nx_snap_get_bits(rec, pos + h.low_bits, h.combo_bits);
			if (ci >= h.ncombos) {
				return NX_ECORRUPT;
			}
			/* strictly ascending by (fingerprint, source set) */
			if (i > bkt[b] && (low < plow || (low == plow && ci <= pcombo))) {
				return NX_ECORRUPT;
			}
			plow = low;
			pcombo = ci;
			const struct nx_snap_combo *c = &combo[ci];
			entries += (uint64_t)__builtin_popcountll(c->mask[0] | c->mask[1] |
								  c->mask[2] | c->mask[3]);
		}
	}
	if (entries != h.nentries) {
		return NX_ECORRUPT;
	}
	*allow_srcs = allow;
	return 0;
}

int nx_filter_snap_open(const char *path, struct nx_filter_snap **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	if (st.st_size < (off_t)sizeof(struct nx_snap_hdr)) {
		close(fd);
		return NX_ECORRUPT;
	}
	size_t size = (size_t)st.st_size;
	void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	int rc = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (rc != 0) {
		return rc;
	}
	uint64_t allow_srcs = 0;
	rc = validate(m, size, &allow_srcs);
	struct nx_filter_snap *s = NULL;
	if (rc == 0) {
		s = nx_mem_calloc(NX_OWNER_snapshot_map, 1, sizeof(*s));
		rc = s ? 0 : -ENOMEM;
	}
	if (rc != 0) {
		munmap(m, size);
		return rc;
	}
	s->base = m;
	s->size = size;
	s->hdr = m;
	s->src = (const struct nx_snap_src *)(s->base + s->hdr->src_off);
	s->bkt = (const uint32_t *)(s->base + s->hdr->bkt_off);
	s->combo = (const struct nx_snap_combo *)(s->base + s->hdr->combo_off);
	s->rec = s->base + s->hdr->rec_off;
	s->seed = s->hdr->seed;
	s->nent = s->hdr->nentries;
	s->nrec = s->hdr->nrecords;
	s->ncombo = s->hdr->ncombos;
	s->kbits = s->hdr->bucket_bits;
	s->low_bits = s->hdr->low_bits;
	s->combo_bits = s->hdr->combo_bits;
	s->rec_bits = s->low_bits + s->combo_bits;
	s->nsrc = s->hdr->nsources;
	s->allow_srcs = allow_srcs;
	nx_ledger_charge(NX_OWNER_snapshot_map, (int64_t)size, 1);
	*out = s;
	return 0;
}

void nx_filter_snap_free(struct nx_filter_snap *s)
{
	if (!s) {
		return;
	}
	munmap((void *)s->base, s->size);
	nx_ledger_charge(NX_OWNER_snapshot_map, -(int64_t)s->size, -1);
	nx_mem_free(NX_OWNER_snapshot_map, s, sizeof(*s));
}

unsigned nx_filter_snap_nsources(const struct nx_filter_snap *s)
{
	return s ? s->nsrc : 0;
}

const char *nx_filter_snap_source_name(const struct nx_filter_snap *s, unsigned i)
{
	return s && i < s->nsrc ? s->src[i].name : NULL;
}

const uint8_t *nx_filter_snap_source_sha(const struct nx_filter_snap *s, unsigned i)
{
	return s && i < s->nsrc ? s->src[i].sha256 : NULL;
}

uint64_t nx_filter_snap_entries(const struct nx_filter_snap *s)
{
	return s ? s->nent : 0;
}

uint64_t nx_filter_snap_names(const struct nx_filter_snap *s)
{
	return s ? s->nrec : 0;
}

uint64_t nx_filter_snap_combos(const struct nx_filter_snap *s)
{
	return s ? s->ncombo : 0;
}

uint64_t nx_filter_snap_bytes(const struct nx_filter_snap *s)
{
	return s ? s->size : 0;
}

unsigned nx_filter_snap_bucket_bits(const struct nx_filter_snap *s)
{
	return s ? s->kbits : 0;
}

double nx_filter_snap_fp_per_name(const struct nx_filter_snap *s)
{
	if (!s || s->nrec == 0) {
		return 0;
	}
	/* mean records per bucket / 2^low_bits: the chance a random low part equals one */
	return ldexp((double)s->nrec, -(int)(s->kbits + s->low_bits));
}

bool nx_filter_snap_is_current(const struct nx_filter_snap *s, const char *const *names,
			       const uint8_t (*shas)[32], unsigned n)
{
	if (!s || s->nsrc != n) {
		return false;
	}
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(s->src[i].name, names[i]) != 0 ||
		    memcmp(s->src[i].sha256, shas[i], 32)) {
			return false;
		}
	}
	return true;
}

/* The source sets of every record whose fingerprint is name's, OR'd (usually one or none).
 * Returns false when there is none. */
static inline bool find(const struct nx_filter_snap *s, const char *name, size_t len,
			struct nx_snap_combo *out)
{
	struct nx_snap_fp fp = nx_snap_fingerprint(name, len, s->seed, s->kbits, s->low_bits);
	uint32_t i = s->bkt[fp.bucket], end = s->bkt[fp.bucket + 1];
	const unsigned lb = s->low_bits, rb = s->rec_bits;
	uint64_t pos = (uint64_t)i * rb;
	uint64_t low = 0;
	while (i < end && (low = nx_snap_get_bits(s->rec, pos, lb)) < fp.low) {
		i++;
		pos += rb;
	}
	if (i == end || low != fp.low) {
		return false;
	}
	const struct nx_snap_combo *c =
	    &s->combo[nx_snap_get_bits(s->rec, pos + lb, s->combo_bits)];
	*out = *c;
	/* another name with the same fingerprint but another source set (a 2^-(k+38) event) */
	for (i++, pos += rb; i < end && nx_snap_get_bits(s->rec, pos, lb) == fp.low;
	     i++, pos += rb) {
		c = &s->combo[nx_snap_get_bits(s->rec, pos + lb, s->combo_bits)];
		for (int f = 0; f < NX_SNAP_M__N; f++) {
			out->mask[f] |= c->mask[f];
		}
	}
	return true;
}

static inline int lowest(uint64_t m)
{
	return __builtin_ctzll(m);
}

/*
 * Levels 7-9 over the suffixes of name starting at `first` (0: the name itself counts), longest
 * first. An exception at any level beats a block, so the walk normally visits every suffix;
 * when no eligible source has exceptions, the first level that blocks decides (the name itself
 * is visited first, then the nearest parent): one lookup instead of one per label.
 */
static inline __attribute__((always_inline)) enum nx_filter_action
match_from_(const struct nx_filter_snap *s, const char *name, size_t len, size_t first,
	    const uint16_t *starts, unsigned nl, uint64_t eligible, struct nx_filter_result *out)
{
	unsigned lab = 0; /* with starts: the label at pos (first is 0 then) */
	nx_filter_result_clear(out);
	if (!s || s->nrec == 0 || eligible == 0 || first >= len) {
		return NX_FILTER_ACT_NONE;
	}
	int exact_src = -1, wild_src = -1;
	size_t wild_off = 0;
	size_t pos = first;
	bool may_except = (eligible & s->allow_srcs) != 0;
	for (;;) {
		struct nx_snap_combo c;
		if (find(s, name + pos, len - pos, &c)) {
			if (pos == 0) {
				uint64_t m = c.mask[NX_SNAP_M_ALLOW_EXACT] & eligible;
				if (m) {
					out->action = NX_FILTER_ACT_ALLOW;
					out->reason = NX_FILTER_R_blocklist_exception;
					out->source = (int16_t)lowest(m);
					out->matched_off = 0;
					out->matched_len = (uint16_t)len;
					return NX_FILTER_ACT_ALLOW;
				}
				m = c.mask[NX_SNAP_M_EXACT] & eligible;
				if (m) {
					exact_src = lowest(m);
				}
			} else {
				uint64_t m = c.mask[NX_SNAP_M_ALLOW_SUB] & eligible;
				if (m) {
					out->action = NX_FILTER_ACT_ALLOW;
					out->reason = NX_FILTER_R_blocklist_exception;
					out->source = (int16_t)lowest(m);
					out->matched_off = (uint16_t)pos;
					out->matched_len = (uint16_t)(len - pos);
					return NX_FILTER_ACT_ALLOW;
				}
				m = c.mask[NX_SNAP_M_WILD] & eligible;
				if (m && wild_src < 0) {
					wild_src = lowest(m);
					wild_off = pos;
				}
			}
		}
		if (!may_except && (exact_src >= 0 || wild_src >= 0)) {
			break;
		}
		if (starts) {
			if (++lab >= nl) {
				break;
			}
			pos = starts[lab];
			continue;
		}
		const char *dot = memchr(name + pos, '.', len - pos);
		if (!dot) {
			break;
		}
		pos = (size_t)(dot - name) + 1;
		if (pos >= len) {
			break;
		}
	}
	if (exact_src >= 0) {
		out->action = NX_FILTER_ACT_BLOCK;
		out->reason = NX_FILTER_R_blocklist_domain;
		out->source = (int16_t)exact_src;
		out->matched_off = 0;
		out->matched_len = (uint16_t)len;
	} else if (wild_src >= 0) {
		out->action = NX_FILTER_ACT_BLOCK;
		out->reason = NX_FILTER_R_blocklist_wildcard;
		out->source = (int16_t)wild_src;
		out->matched_off = (uint16_t)wild_off;
		out->matched_len = (uint16_t)(len - wild_off);
	}
	return (enum nx_filter_action)out->action;
}

static enum nx_filter_action match_from(const struct nx_filter_snap *s, const char *name,
					size_t len, size_t first, uint64_t eligible,
					struct nx_filter_result *out)
{
	return match_from_(s, name, len, first, NULL, 0, eligible, out);
}

enum nx_filter_action nx_filter_snap_match_labels(const struct nx_filter_snap *s,
						  const char *name, size_t len,
						  const uint16_t *starts, unsigned nl,
						  uint64_t eligible, struct nx_filter_result *out)
{
	if (len > NX_FILTER_NAME_MAX || nl == 0) {
		nx_filter_result_clear(out);
		return NX_FILTER_ACT_NONE;
	}
	return match_from_(s, name, len, 0, starts, nl, eligible, out);
}

enum nx_filter_action nx_filter_snap_match(const struct nx_filter_snap *s, const char *name,
					   size_t len, uint64_t eligible,
					   struct nx_filter_result *out)
{
	if (len > 0 && name[len - 1] == '.') {
		len--;
	}
	if (len > NX_FILTER_NAME_MAX) {
		nx_filter_result_clear(out);
		return NX_FILTER_ACT_NONE;
	}
	return match_from(s, name, len, 0, eligible, out);
}

static inline bool list_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

enum nx_filter_action nx_filter_snap_match_wire(const struct nx_filter_snap *s, const uint8_t *wire,
						size_t wlen, uint64_t eligible,
						struct nx_filter_result *out)
{
	char text[NX_FILTER_NAME_MAX + 2];
	uint16_t woff[128], toff[128];
	unsigned nl = 0;
	size_t t = 0, w = 0, first = 0;
	nx_filter_result_clear(out);
	while (w < wlen) {
		unsigned l = wire[w];
		if (l == 0) {
			break;
		}
		if (l > 63 || w + 1 + l > wlen || nl == 128 || t + l + 1 > NX_FILTER_NAME_MAX + 1) {
			return NX_FILTER_ACT_NONE; /* malformed or longer than any list name */
		}
		if (nl > 0) {
			text[t++] = '.';
		}
		woff[nl] = (uint16_t)w;
		toff[nl] = (uint16_t)t;
		nl++;
		bool ok = true;
		for (unsigned i = 0; i < l; i++) {
			unsigned char c = wire[w + 1 + i];
			if (c >= 'A' && c <= 'Z') {
				c = (unsigned char)(c + 32);
			}
			ok = ok && list_byte(c);
			text[t++] = (char)c;
		}
		if (!ok) {
			first = t + 1; /* this label and those left of it cannot match */
		}
		w += 1 + l;
	}
	if (nl == 0 || first >= t) {
		return NX_FILTER_ACT_NONE;
	}
	size_t wend = (w < wlen && wire[w] == 0) ? w + 1 : w; /* past the root label */
	enum nx_filter_action a = match_from(s, text, t, first, eligible, out);
	if (a != NX_FILTER_ACT_NONE) {
		for (unsigned i = 0; i < nl; i++) {
			if (toff[i] == out->matched_off) {
				out->matched_off = woff[i];
				out->matched_len = (uint16_t)(wend - woff[i]);
				break;
			}
		}
	}
	return a;
}

unsigned nx_filter_snap_lookup(const struct nx_filter_snap *s, const char *name, size_t len,
			       uint8_t flags[NX_FILTER_SOURCES_MAX])
{
	memset(flags, 0, NX_FILTER_SOURCES_MAX);
	struct nx_snap_combo c;
	if (!s || s->nrec == 0 || !find(s, name, len, &c)) {
		return 0;
	}
	unsigned n = 0;
	for (unsigned i = 0; i < NX_FILTER_SOURCES_MAX; i++) {
		for (int f = 0; f < NX_SNAP_M__N; f++) {
			if (c.mask[f] >> i & 1) {
				flags[i] |= (uint8_t)(1u << f);
			}
		}
		n += flags[i] != 0;
	}
	return n;
}

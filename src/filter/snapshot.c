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
	const struct nx_snap_hdr *hdr; /* in mapping */
	const struct nx_snap_src *src; /* in mapping */
	const uint32_t *bkt;	       /* in mapping */
	const uint64_t *ent;	       /* in mapping */
	uint64_t seed;
	uint64_t nent;
	uint64_t allow_srcs; /* bit i: source i has exception (.allow) entries */
	unsigned kbits;
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
	uint64_t want = h.hdr_xxh;
	h.hdr_xxh = 0;
	if (memcmp(h.magic, NX_SNAP_MAGIC, 8) != 0 || h.version != NX_SNAP_VERSION ||
	    h.endian != NX_SNAP_ENDIAN || h.hdr_size != sizeof(h) ||
	    h.src_size != sizeof(struct nx_snap_src) || XXH3_64bits(&h, sizeof(h)) != want) {
		return NX_ECORRUPT;
	}
	if (h.file_size != size || h.nsources > NX_FILTER_SOURCES_MAX ||
	    h.bucket_bits > NX_SNAP_BUCKET_BITS_MAX || h.nentries > NX_FILTER_ENTRIES_MAX) {
		return NX_ECORRUPT;
	}
	uint64_t src_end = h.src_off + (uint64_t)h.nsources * sizeof(struct nx_snap_src);
	uint64_t nb = 1ull << h.bucket_bits;
	uint64_t bkt_end = h.bkt_off + (nb + 1) * sizeof(uint32_t);
	uint64_t ent_end = h.ent_off + h.nentries * sizeof(uint64_t);
	if (h.src_off != sizeof(h) || h.bkt_off != src_end || h.bkt_off % 4 != 0 ||
	    h.ent_off < bkt_end || h.ent_off % 8 != 0 || h.ent_off - bkt_end >= 8 ||
	    ent_end != size) {
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
	const uint32_t *bkt = (const uint32_t *)(p + h.bkt_off);
	const uint64_t *ent = (const uint64_t *)(p + h.ent_off);
	uint64_t allow = 0;
	if (bkt[0] != 0 || bkt[nb] != h.nentries) {
		return NX_ECORRUPT;
	}
	for (uint64_t b = 0; b < nb; b++) {
		if (bkt[b] > bkt[b + 1]) {
			return NX_ECORRUPT;
		}
		for (uint32_t i = bkt[b]; i < bkt[b + 1]; i++) {
			uint64_t e = ent[i];
			if ((e & 0xf) == 0 || ((e >> NX_SNAP_SRC_SHIFT) & 63) >= h.nsources) {
				return NX_ECORRUPT;
			}
			if (e & (NX_FILTER_F_ALLOW_EXACT | NX_FILTER_F_ALLOW_SUB)) {
				allow |= 1ull << ((e >> NX_SNAP_SRC_SHIFT) & 63);
			}
			if (i > bkt[b] &&
			    ent[i - 1] >> NX_SNAP_SRC_SHIFT >= e >> NX_SNAP_SRC_SHIFT) {
				return NX_ECORRUPT; /* strictly ascending by (fingerprint, source)
						     */
			}
		}
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
	s->ent = (const uint64_t *)(s->base + s->hdr->ent_off);
	s->seed = s->hdr->seed;
	s->nent = s->hdr->nentries;
	s->kbits = s->hdr->bucket_bits;
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
	if (!s || s->nent == 0) {
		return 0;
	}
	/* mean entries per bucket / 2^54: the chance a random 54-bit remainder equals one */
	return ldexp((double)s->nent, -(int)(s->kbits + NX_SNAP_REM_BITS));
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

/* Entries of bucket for `fp` with the same remainder: [*lo, *hi). */
static inline void find(const struct nx_filter_snap *s, const char *name, size_t len, uint32_t *lo,
			uint32_t *hi)
{
	struct nx_snap_fp fp = nx_snap_fingerprint(name, len, s->seed, s->kbits);
	uint32_t i = s->bkt[fp.bucket], end = s->bkt[fp.bucket + 1];
	while (i < end && (s->ent[i] >> NX_SNAP_REM_SHIFT) < fp.rem) {
		i++;
	}
	uint32_t j = i;
	while (j < end && (s->ent[j] >> NX_SNAP_REM_SHIFT) == fp.rem) {
		j++;
	}
	*lo = i;
	*hi = j;
}

/*
 * Levels 7-9 over the suffixes of name starting at `first` (0: the name itself counts), longest
 * first. An exception at any level beats a block, so the walk normally visits every suffix;
 * when no eligible source has exceptions, the first level that blocks decides (the name itself
 * is visited first, then the nearest parent): one lookup instead of one per label.
 */
static enum nx_filter_action match_from(const struct nx_filter_snap *s, const char *name,
					size_t len, size_t first, uint64_t eligible,
					struct nx_filter_result *out)
{
	nx_filter_result_clear(out);
	if (!s || s->nent == 0 || eligible == 0 || first >= len) {
		return NX_FILTER_ACT_NONE;
	}
	int exact_src = -1, wild_src = -1;
	size_t wild_off = 0;
	size_t pos = first;
	bool may_except = (eligible & s->allow_srcs) != 0;
	for (;;) {
		uint32_t lo, hi;
		find(s, name + pos, len - pos, &lo, &hi);
		for (uint32_t i = lo; i < hi; i++) {
			uint64_t e = s->ent[i];
			unsigned src = (unsigned)(e >> NX_SNAP_SRC_SHIFT) & 63;
			unsigned f = (unsigned)e & 0xf;
			if (!(eligible >> src & 1)) {
				continue;
			}
			if (pos == 0) {
				if (f & NX_FILTER_F_ALLOW_EXACT) {
					out->action = NX_FILTER_ACT_ALLOW;
					out->reason = NX_FILTER_R_blocklist_exception;
					out->source = (int16_t)src;
					out->matched_off = 0;
					out->matched_len = (uint16_t)len;
					return NX_FILTER_ACT_ALLOW;
				}
				if ((f & NX_FILTER_F_EXACT) && exact_src < 0) {
					exact_src = (int)src;
				}
			} else {
				if (f & NX_FILTER_F_ALLOW_SUB) {
					out->action = NX_FILTER_ACT_ALLOW;
					out->reason = NX_FILTER_R_blocklist_exception;
					out->source = (int16_t)src;
					out->matched_off = (uint16_t)pos;
					out->matched_len = (uint16_t)(len - pos);
					return NX_FILTER_ACT_ALLOW;
				}
				if ((f & NX_FILTER_F_WILD) && wild_src < 0) {
					wild_src = (int)src;
					wild_off = pos;
				}
			}
		}
		if (!may_except && (exact_src >= 0 || wild_src >= 0)) {
			break;
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
	if (!s || s->nent == 0) {
		return 0;
	}
	uint32_t lo, hi;
	find(s, name, len, &lo, &hi);
	unsigned n = 0;
	for (uint32_t i = lo; i < hi; i++) {
		unsigned src = (unsigned)(s->ent[i] >> NX_SNAP_SRC_SHIFT) & 63;
		if (!flags[src]) {
			n++;
		}
		flags[src] |= (uint8_t)(s->ent[i] & 0xf);
	}
	return n;
}

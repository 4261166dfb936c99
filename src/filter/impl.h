/*
 * Filter module internals shared between its files (never included from outside src/filter).
 *
 * Buffered line reader and writer over file descriptors, and the bounded external sort used by
 * the compiler (buffers charged to NX_OWNER_filter_build; single-threaded objects), and the
 * snapshot file layout with its fingerprint and packed-field helpers.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Read buffer of the line reader: also the longest line it can return whole. */
#define NX_FILTER_RD_BUF (64 * 1024)
/* Write buffer of the body / run writers. */
#define NX_FILTER_WR_BUF (64 * 1024)
/* The compiler and the snapshot builder call their on_step hook every this many names. */
#define NX_FILTER_STEP_NAMES 65536

struct nx_lr {
	int fd;		/* borrowed */
	char *buf;	/* owned (filter_build), cap bytes */
	size_t cap;	/* NX_FILTER_RD_BUF unless nx_lr_init_cap chose a smaller buffer */
	size_t pos;	/* next unread byte */
	size_t end;	/* bytes valid in buf */
	bool eof;	/* read(2) returned 0 */
	int err;	/* first read error (-errno), sticky */
	uint64_t bytes; /* bytes consumed so far */
	/* optional: called with every chunk read (checksums) */
	void (*on_data)(void *arg, const void *p, size_t n);
	void *on_data_arg;
};

int nx_lr_init(struct nx_lr *lr, int fd);
/* Same with a cap-byte buffer (the snapshot builder reads every source at once with small
 * ones); lines longer than cap - 1 bytes are reported too long. */
int nx_lr_init_cap(struct nx_lr *lr, int fd, size_t cap);
void nx_lr_deinit(struct nx_lr *lr);
/*
 * Next line without its '\n'. Returns 1 and (*line, *len) valid until the next call; 0 at end
 * of input; negative -errno on read error. A line longer than max_len bytes is consumed whole
 * and reported with *too_long = true and *len = 0.
 */
int nx_lr_next(struct nx_lr *lr, size_t max_len, const char **line, size_t *len, bool *too_long);

struct nx_wr {
	int fd;	     /* borrowed */
	char *buf;   /* owned (filter_build) */
	size_t used; /* bytes pending */
	int err;     /* first write error, sticky */
	uint64_t bytes;
	void (*on_data)(void *arg, const void *p, size_t n);
	void *on_data_arg;
};

int nx_wr_init(struct nx_wr *wr, int fd);
void nx_wr_put(struct nx_wr *wr, const void *p, size_t n);
/* Flush pending bytes; returns 0 or the sticky error. */
int nx_wr_flush(struct nx_wr *wr);
void nx_wr_deinit(struct nx_wr *wr);

/* Write a whole buffer / read exactly (loops over EINTR and short transfers). */
int nx_write_all(int fd, const void *p, size_t n);

/*
 * Bounded external sort of (name, kind) records: records collect in one run buffer of at most
 * run_bytes; a full buffer is sorted, de-duplicated and spilled to an unlinked temp file in
 * tmpdir; finish() merges the runs (at most NX_XSORT_FANIN at a time, more passes when there
 * are more runs) and calls back once per distinct name, in byte order, with the bitmask of the
 * kinds seen for it. Memory: max(run_bytes, FANIN * NX_FILTER_RD_BUF) + one write buffer.
 */
#define NX_XSORT_FANIN 16
#define NX_XSORT_RUN_MIN (64 * 1024)

struct nx_xsort;
typedef int (*nx_xsort_cb)(void *arg, const char *name, size_t len, uint32_t kinds);

int nx_xsort_new(struct nx_xsort **out, size_t run_bytes, const char *tmpdir);
/* 0, or -errno (spill failed), -ENOMEM. */
int nx_xsort_add(struct nx_xsort *x, const char *name, size_t len, unsigned kind);
/* Merge and call cb; a non-zero return from cb stops and is returned. */
int nx_xsort_finish(struct nx_xsort *x, nx_xsort_cb cb, void *arg);
void nx_xsort_free(struct nx_xsort *x);
/* Called where the sort holds the most memory (spill, merge): compile samples the ledger. */
void nx_xsort_set_probe(struct nx_xsort *x, void (*probe)(void *arg), void *arg);
/* Runs spilled so far (tests). */
unsigned nx_xsort_runs(const struct nx_xsort *x);

/* Open a new unique temp file next to `path` ("<path>.tmp-XXXXXX"); returns fd or -errno and the
 * temp name in tmp (cap bytes). */
int nx_tmp_open(const char *path, char *tmp, size_t cap);
/* fsync(fd), close, rename(tmp, path), fsync the directory. Closes fd in every case. */
int nx_tmp_commit(int fd, const char *tmp, const char *path);
/* The same without the directory's fsync: for a group of files committed together, followed by
 * one nx_fsync_dir() of their directory (a compile's bodies). */
int nx_tmp_commit_nodir(int fd, const char *tmp, const char *path);
void nx_fsync_dir(const char *dir);

/* ---- snapshot file format (version 2); README.md describes it for people ---- */

#define NX_SNAP_MAGIC "NXSNAP\x01\n"
/* Version 1: one u64 per (source, name). Version 2: one packed record per distinct name. */
#define NX_SNAP_VERSION 2u
#define NX_SNAP_ENDIAN 0x01020304u
/* k = ceil(log2(names)) - NX_SNAP_LOAD_BITS: at most 2^4 = 16 records per bucket on average. */
#define NX_SNAP_LOAD_BITS 4
#define NX_SNAP_BUCKET_BITS_MAX 28
/*
 * Stored fingerprint bits per record (below the k bucket bits). The matched fingerprint has
 * k + 38 >= log2(names) + 34 bits, so one hashed name falsely matches with probability
 * <= 2^-34 (5.8e-11) and a query of 10 hashed names with <= 5.8e-10 (the bound: 1e-9).
 * Tests narrow it (nx_filter_snap_build_opts.low_bits) to make false matches observable.
 */
#define NX_SNAP_LOW_BITS 38
/* get_bits reads one unaligned u64 and shifts by up to 7: a field has at most 57 bits. */
#define NX_SNAP_FIELD_BITS_MAX 57
/* Source-set indexes: below 2^31 (records are at most NX_FILTER_ENTRIES_MAX). */
#define NX_SNAP_COMBO_BITS_MAX 31
/* Readable bytes after the last record (get_bits loads 8 bytes). */
#define NX_SNAP_REC_PAD 8

struct nx_snap_hdr {
	char magic[8];	      /* NX_SNAP_MAGIC */
	uint32_t version;     /* NX_SNAP_VERSION */
	uint32_t endian;      /* NX_SNAP_ENDIAN as written by the host (native byte order) */
	uint32_t hdr_size;    /* sizeof(struct nx_snap_hdr) */
	uint32_t src_size;    /* sizeof(struct nx_snap_src) */
	uint64_t file_size;   /* whole file */
	uint64_t seed;	      /* XXH3 seed */
	uint32_t nsources;    /* <= NX_FILTER_SOURCES_MAX */
	uint32_t bucket_bits; /* k <= NX_SNAP_BUCKET_BITS_MAX */
	uint64_t nentries;    /* (source, name) entries: sum over records of |source set| */
	uint64_t src_off;     /* struct nx_snap_src[nsources] */
	uint64_t bkt_off;     /* uint32_t[2^k + 1]: bucket b = records bkt[b] .. bkt[b+1]-1 */
	uint64_t combo_off;   /* struct nx_snap_combo[ncombos], 8-aligned */
	uint64_t rec_off;     /* packed records: nrecords * (low_bits + combo_bits) bits + pad */
	uint64_t created;     /* unix seconds */
	uint64_t body_xxh;    /* XXH3_64 of bytes [hdr_size, file_size) */
	uint64_t hdr_xxh;     /* XXH3_64 of this header with hdr_xxh = 0 */
	uint32_t nrecords;    /* distinct fingerprints (names) stored */
	uint32_t ncombos;     /* distinct source sets */
	uint8_t low_bits;     /* stored fingerprint bits per record (NX_SNAP_LOW_BITS) */
	uint8_t combo_bits;   /* bits of a source-set index: ceil(log2(ncombos)) */
	uint8_t reserved[6];
};

struct nx_snap_src {
	char name[64];	    /* NUL-terminated source name */
	uint8_t sha256[32]; /* bodies sha256 (nx_filter_bodies_sha256) */
	uint64_t entries;
	uint64_t list, wild, allow;
};

/* A source set with flags: bit i of mask[f] = source i lists the name with flag f. */
enum { NX_SNAP_M_EXACT, NX_SNAP_M_WILD, NX_SNAP_M_ALLOW_EXACT, NX_SNAP_M_ALLOW_SUB, NX_SNAP_M__N };
struct nx_snap_combo {
	uint64_t mask[NX_SNAP_M__N];
};

_Static_assert(sizeof(struct nx_snap_hdr) == 128, "snapshot header is part of the format");
_Static_assert(sizeof(struct nx_snap_src) == 128, "source record is part of the format");
_Static_assert(sizeof(struct nx_snap_combo) == 32, "source set is part of the format");
_Static_assert(NX_SNAP_LOW_BITS <= NX_SNAP_FIELD_BITS_MAX, "a record field is one u64 load");

/* The name fingerprint: XXH3-128 of the text name (lower case, no trailing dot) with the
 * snapshot's seed. Bucket = top k bits of the high half; stored low part = top low_bits bits
 * of the low half. Inlined (XXH_INLINE_ALL) so the matcher makes no library call. */
#define XXH_INLINE_ALL
#include <xxhash.h>

struct nx_snap_fp {
	uint32_t bucket;
	uint64_t low; /* low_bits bits */
};

static inline struct nx_snap_fp nx_snap_fingerprint(const char *name, size_t len, uint64_t seed,
						    unsigned kbits, unsigned low_bits)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(name, len, seed);
	struct nx_snap_fp fp;
	fp.bucket = kbits ? (uint32_t)(h.high64 >> (64 - kbits)) : 0;
	fp.low = h.low64 >> (64 - low_bits);
	return fp;
}

/* Field of w <= NX_SNAP_FIELD_BITS_MAX bits at bit offset pos of a packed array with
 * NX_SNAP_REC_PAD readable bytes after its last field. Record i starts at bit
 * i * (low_bits + combo_bits): its fingerprint low part, then its source-set index. */
static inline uint64_t nx_snap_get_bits(const uint8_t *p, uint64_t pos, unsigned w)
{
	uint64_t v;
	memcpy(&v, p + (pos >> 3), 8);
	return (v >> (pos & 7)) & ((1ull << w) - 1);
}

/* Write such a field (read-modify-write of 8 bytes: the bits around it are kept; builder). */
static inline void nx_snap_put_bits(uint8_t *p, uint64_t pos, unsigned w, uint64_t val)
{
	uint64_t v, m = ((1ull << w) - 1) << (pos & 7);
	memcpy(&v, p + (pos >> 3), 8);
	v = (v & ~m) | ((val << (pos & 7)) & m);
	memcpy(p + (pos >> 3), &v, 8);
}

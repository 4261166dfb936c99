/*
 * The compact blocklist snapshot: builder, loader (read-only mmap) and matcher.
 *
 * One immutable file holds every source's bodies: one packed record per distinct name (the
 * low 38 bits of its fingerprint below the 2^k hash buckets of a u32 offset table, and an
 * index into a table of the distinct source sets, each four source masks: exact, wild,
 * allow-exact, allow-sub). Sources are never merged: a name's record says which sources list
 * it with which flags, so eligibility and the reported source stay per source. Format,
 * false-match math: src/filter/README.md.
 *
 * Threading: the builder is a blocking job for the control thread (or a job thread); it never
 * touches a mapped snapshot. A struct nx_filter_snap is immutable after open: any number of
 * threads may match on it concurrently with no locking; the owner frees it only after every
 * reader has passed a quiescent point (the daemon's generation swap).
 * Memory: the mapping is charged to NX_OWNER_snapshot_map while open; the builder's arrays and
 * buffers to NX_OWNER_filter_build while it runs (the new file's size + the source-set index +
 * 24 KiB of read buffers per source; bodies are streamed, never held).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/result.h"

/* Sources per snapshot: the eligibility mask is one uint64_t. More are refused (counted). */
#define NX_FILTER_SOURCES_MAX 64
/* Entries per snapshot: offsets are u32. Far above any deployment (2.85M in the seed). */
#define NX_FILTER_ENTRIES_MAX (1u << 31)

/* Entry flags (low 4 bits of an entry). */
#define NX_FILTER_F_EXACT 0x1u	     /* in .list: the name itself is blocked */
#define NX_FILTER_F_WILD 0x2u	     /* in .wild: proper subdomains are blocked */
#define NX_FILTER_F_ALLOW_EXACT 0x4u /* in .allow: the name itself is excepted */
#define NX_FILTER_F_ALLOW_SUB 0x8u   /* in .allow "sub": the name and all below (sets EXACT too) */

struct nx_filter_snap_source {
	const char *name; /* source name; bodies are <dir>/<name>.list .wild .allow (borrowed) */
	const char *dir;  /* borrowed */
};

/* What opts.threads = 2 adds to a build's peak (filter_build): 1 + 4 batches of 1024 names
 * (40 B each) + a 32 KiB name arena (the caller's group, the thread's). */
#define NX_FILTER_SNAP_SPLIT_BYTES (5u * (1024u * 40u + 32u * 1024u + 16u))

struct nx_filter_snap_build_opts {
	/* Hash seed; 0 = random (libsodium). A per-build random seed keeps crafted names from
	 * colliding on purpose across installations. Tests pass a fixed seed. */
	uint64_t seed;
	/* Called after each pass and every 65536 names within one
	 * (progress, tests sampling the ledger, the daemon answering admin requests). */
	void (*on_step)(void *arg);
	void *arg;
	/* Incremental build (NULL: a full one): the snapshot this one replaces (`path` itself is
	 * fine: it is read before the rename) and each source's identity as the caller knows it
	 * (shas[i]: the meta's bodies_sha256, as nx_filter_snap_is_current takes). Sources whose
	 * identity equals prev's for the same index and name keep prev's records; only the others'
	 * bodies are read. Used when prev is a valid version-2 file of the same sources and
	 * widths, the changed sources held at most half of its entries, their new names fit
	 * 2^20 (16 B each) and the bucket count does not grow; otherwise a full build runs. The
	 * seed is prev's (opts.seed, when set, must equal it). */
	const char *prev;
	const uint8_t (*shas)[32];
	/* Tests only: stored fingerprint bits per name (0 = NX_SNAP_LOW_BITS, 38; at most 57).
	 * Narrowed, false matches become observable at the rate README.md states. */
	unsigned low_bits;
	/* Threads per pass: 1 = the caller's only; 2 = the sources' merge (reading, hashing and
	 * checking the bodies, the heap) split in two groups, 2/3 of the body bytes merged on a
	 * second thread, 1/3 by the caller, which merges the two groups' names and counts and
	 * places them: the same bytes as 1, + NX_FILTER_SNAP_SPLIT_BYTES of hand-over batches;
	 * 0 = 2 when there are at least two online CPUs and at least 4 MiB of bodies, else 1. */
	unsigned threads;
};

struct nx_filter_snap_source_stats {
	uint64_t entries; /* distinct names of this source (one entry each) */
	uint64_t list, wild, allow;
	uint64_t bad_lines; /* body lines that are not valid names (skipped) */
};

struct nx_filter_snap_build_report {
	uint64_t entries;     /* (source, name) entries stored (all sources) */
	uint64_t names;	      /* records stored: distinct names (fingerprints) */
	uint64_t combos;      /* distinct source sets (with flags) */
	uint64_t bytes;	      /* file size */
	unsigned bucket_bits; /* k */
	unsigned low_bits;    /* stored fingerprint bits per record */
	uint64_t build_ms;
	uint64_t peak_build_bytes; /* most NX_OWNER_filter_build bytes this build held at once */
	bool incremental;	   /* built from prev + the re-read sources */
	unsigned reread;	   /* sources whose bodies were read (incremental) */
	unsigned passes;	   /* full build: passes over the bodies (2, or 3 when pass 1's
				    * histogram was too coarse or could not be allocated) */
	unsigned sources;
	unsigned refused_sources; /* sources beyond NX_FILTER_SOURCES_MAX (build fails) */
	struct nx_filter_snap_source_stats src[NX_FILTER_SOURCES_MAX];
};

/*
 * Build a snapshot of `n` sources (index = position in `src`) into `path` (temp file, fsync,
 * rename). Reads all sources' bodies at once, three times (count + checksum + source sets,
 * bucket histogram, place; one file descriptor per body is open during a pass); a body that
 * changes between passes aborts with -EAGAIN. Returns 0, -errno, NX_ELIMIT (more than
 * NX_FILTER_SOURCES_MAX sources or NX_FILTER_ENTRIES_MAX names), NX_EFORMAT (bad source name).
 * `rep` may be NULL.
 */
int nx_filter_snap_build(const char *path, const struct nx_filter_snap_source *src, unsigned n,
			 const struct nx_filter_snap_build_opts *opts,
			 struct nx_filter_snap_build_report *rep);

struct nx_filter_snap;

/* Map and validate (header, bounds, checksum, record order). Returns 0, -errno, NX_ECORRUPT,
 * or NX_EFORMAT for a snapshot of another format version (an older nxdns wrote it: rebuild it
 * from the compiled bodies). On success *out owns the mapping. */
int nx_filter_snap_open(const char *path, struct nx_filter_snap **out);
/* Unmap; NULL is a no-op. Only after every reader is done with it. */
void nx_filter_snap_free(struct nx_filter_snap *s);

unsigned nx_filter_snap_nsources(const struct nx_filter_snap *s);
/* Recorded name and bodies sha256 of source i (< nsources); pointers into the mapping. */
const char *nx_filter_snap_source_name(const struct nx_filter_snap *s, unsigned i);
const uint8_t *nx_filter_snap_source_sha(const struct nx_filter_snap *s, unsigned i);
/* (source, name) entries, as the sources' bodies count them. */
uint64_t nx_filter_snap_entries(const struct nx_filter_snap *s);
/* Records: distinct names stored once each with their source set. */
uint64_t nx_filter_snap_names(const struct nx_filter_snap *s);
/* Distinct source sets (with flags) the records index. */
uint64_t nx_filter_snap_combos(const struct nx_filter_snap *s);
uint64_t nx_filter_snap_bytes(const struct nx_filter_snap *s);
unsigned nx_filter_snap_bucket_bits(const struct nx_filter_snap *s);
/* Upper bound on the probability that one absent name hashes onto a stored fingerprint. */
double nx_filter_snap_fp_per_name(const struct nx_filter_snap *s);

/*
 * Boot check: does the snapshot hold exactly these sources, in this order, with these bodies
 * (sha256 from nx_filter_meta_bodies_sha256 / nx_filter_bodies_sha256)? Then map it as is.
 */
bool nx_filter_snap_is_current(const struct nx_filter_snap *s, const char *const *names,
			       const uint8_t (*shas)[32], unsigned n);

/*
 * The hot path (no allocation, no locks, no system calls). Levels 7-9 of the ladder for
 * `name` in text form: lower case, no trailing dot required (one is ignored). `eligible` has
 * bit i set when source i may be used for this client. Walks the name then its parents,
 * nearest first:
 *   7: the name with ALLOW_EXACT, or a parent with ALLOW_SUB -> ALLOW blocklist_exception
 *   8: the name with EXACT                                 -> BLOCK blocklist_domain
 *   9: the nearest parent with WILD                          -> BLOCK blocklist_wildcard
 * At the deciding name the lowest eligible source index is reported. Returns the action.
 * s == NULL behaves as an empty snapshot.
 */
enum nx_filter_action nx_filter_snap_match(const struct nx_filter_snap *s, const char *name,
					   size_t len, uint64_t eligible,
					   struct nx_filter_result *out);
/* Same for an uncompressed wire name (case-insensitive here: labels are lower-cased into a
 * stack copy). matched_off is the offset of the matched name's first length byte. Labels with
 * bytes outside [A-Za-z0-9_-] cannot be list names: only the parents above them are tried. */
enum nx_filter_action nx_filter_snap_match_wire(const struct nx_filter_snap *s, const uint8_t *wire,
						size_t wlen, uint64_t eligible,
						struct nx_filter_result *out);
/* Same as nx_filter_snap_match for a lower-case name without trailing dot whose label k
 * begins at name + starts[k] (nl labels, starts[0] = 0): the parents are taken from starts
 * instead of searching for dots (nx_filter_lists_decide has them from its copy). */
enum nx_filter_action nx_filter_snap_match_labels(const struct nx_filter_snap *s, const char *name,
						  size_t len, const uint16_t *starts, unsigned nl,
						  uint64_t eligible, struct nx_filter_result *out);
/* Debug / tests: flags stored for exactly `name` per source (flags[i] for source i; 0 = none).
 * Returns the number of sources that have an entry. */
unsigned nx_filter_snap_lookup(const struct nx_filter_snap *s, const char *name, size_t len,
			       uint8_t flags[NX_FILTER_SOURCES_MAX]);

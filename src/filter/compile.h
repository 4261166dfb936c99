/*
 * Compile one blocklist source into its bodies.
 *
 * Input: a list file in any supported syntax (auto-detected per line unless forced). Output in
 * OUTDIR, each written to a temp file, fsync'd and renamed:
 *   <name>.list   exact names, one per line, sorted (byte order), unique
 *   <name>.wild   names whose proper subdomains are blocked, same shape
 *   <name>.allow  exceptions "name\tsub" (x and every name under it: @@||x^) or
 *                 "name\texact" (x only: @@|x^), sorted by name, one line per name
 *   <name>.side   rules for the side structure, one checked rule line each, in list order
 *                 (only with opts.side and when there is one; bodies_sha256 then covers it)
 *   <name>.meta   JSON report (see nx_filter_compile_report_json), written last
 * Memory: streaming reader (one 64 KiB buffer) + a bounded external sort (run buffer of
 * run_bytes, spilled to unlinked temp files in OUTDIR) + writers; everything is charged to
 * NX_OWNER_filter_build and returned before the call ends. Blocking I/O: run it off the worker
 * threads (control thread or a job thread). Reentrant (no global state).
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "filter/parse.h"

/* Default run buffer of the external sort: large enough that every real list (<= ~4 MiB,
 * ~200k names) sorts in memory in one run; a larger source spills. */
#define NX_FILTER_RUN_DEFAULT (8u * 1024 * 1024)
/* First line numbers kept per skip reason in the report. */
#define NX_FILTER_SKIP_LINES 5
/* Longest source name (file stem); [A-Za-z0-9_.-], not starting with '.'. */
#define NX_FILTER_SOURCE_NAME_MAX 63

struct nx_filter_compile_opts {
	const char *name;	      /* required: source name, the body file stem */
	enum nx_filter_format format; /* NX_FILTER_FMT_AUTO: per line */
	size_t run_bytes;	      /* 0: NX_FILTER_RUN_DEFAULT */
	/* Keep the previous bodies when the new ones would hold fewer than this many entries
	 * (list+wild+allow): returns NX_ELIMIT, nothing on disk changes. 0: always write. */
	uint64_t refuse_below;
	/* Recorded in the meta as "fetch" when set (borrowed strings). */
	const char *etag;
	const char *last_modified;
	int64_t fetched_at; /* unix seconds, 0 = unset */
	const char *origin; /* URL or path, for the report */
	/* Called every NX_FILTER_STEP_LINES input lines, every 65536 names written
	 * and at the sort's spill and merge points, so that a caller on an event loop can serve
	 * other work during a long compile (the daemon answers admin requests there). NULL: none. */
	void (*on_step)(void *arg);
	void *step_arg;
	/* Write rules the bodies cannot express (modifiers, $important, /regex/, host-matching
	 * URL patterns) to <name>.side for the side structure (filter/side.h) instead of
	 * skipping them. false: today's behaviour (skipped by reason, $important as plain). */
	bool side;
	/* With side: hosts lines with a non-null address answer with it (config
	 * hosts_answers: listed) instead of blocking the name. */
	bool hosts_listed;
	/* Plain entries (hosts and domains lines, bare names) mean the name and every name
	 * under it (config subdomains: true, Blocky's reading) instead of the name only. */
	bool subdomains;
};
#define NX_FILTER_STEP_LINES 4096

struct nx_filter_compile_report {
	char name[NX_FILTER_SOURCE_NAME_MAX + 1];
	char format[16];
	char input_sha256[65];	/* hex of the raw input bytes */
	char bodies_sha256[65]; /* hex, see nx_filter_bodies_sha256() */
	uint64_t input_bytes;
	uint64_t lines;			     /* lines read (a last line without '\n' counts) */
	uint64_t blank;			     /* blank lines */
	uint64_t comments;		     /* # ! comments and [Adblock] headers */
	uint64_t rules_used;		     /* rules produced by lines, before de-duplication */
	uint64_t n_list, n_wild, n_allow;    /* lines in each body */
	uint64_t n_allow_sub, n_allow_exact; /* n_allow = n_allow_sub + n_allow_exact */
	uint64_t skipped_total;
	uint64_t skipped[NX_FILTER_SKIP__COUNT];
	uint64_t skip_lines[NX_FILTER_SKIP__COUNT][NX_FILTER_SKIP_LINES]; /* 1-based, 0 = none */
	uint64_t important;	      /* $important rules honoured as plain rules */
	uint64_t badfilter_rules;     /* $badfilter rules read */
	uint64_t badfilter_cancelled; /* (name, kind) rules they cancelled */
	unsigned sort_runs;	      /* runs spilled by the external sort (0: all in memory) */
	/* Most NX_OWNER_filter_build bytes seen above the value at the start (ledger sampled at
	 * the sort's spill/merge points and every 4096 lines; includes concurrent builds). */
	uint64_t peak_build_bytes;
	uint64_t compile_ms;
	bool kept_previous; /* refuse_below triggered */
	uint64_t n_side;    /* lines written to <name>.side (0: no such file) */
	/* The input's stat before reading (regular files only): the meta's "input_stat", which
	 * lets a later check skip re-hashing an input whose size, inode, mtime and ctime are
	 * unchanged. Recorded only when mtime and ctime are NX_FILTER_STAT_SETTLE_NS older than
	 * the read (a file written again within one timestamp tick must not pass as unchanged). */
	bool input_stat_ok;
	uint64_t input_size, input_ino;
	int64_t input_mtime_ns, input_ctime_ns;
};
/* 2 s: covers the coarsest timestamp granularity of a Linux filesystem (FAT's 2 s). */
#define NX_FILTER_STAT_SETTLE_NS 2000000000LL

/* 1 when `meta` (a parsed .meta) recorded an input_stat equal to the file at `path` now:
 * the input is the one compiled, without reading it; 0 otherwise (hash it). */
int nx_filter_meta_input_unchanged(const json_t *meta, const char *path);
/* After the input at `input` hashed to the meta's input_sha256 with no usable input_stat
 * (compiled while the file was fresh, e.g. just downloaded): record its stat now, when it
 * still equals `before` (taken before hashing) and has settled. 1 recorded, 0 not, -errno. */
struct stat;
int nx_filter_meta_note_input_stat(const char *dir, const char *name, const char *input,
				   const struct stat *before, const char input_sha256[65]);

/* Compile the file at `path` (or fd) into outdir. Returns 0, -errno, NX_EFORMAT (bad name /
 * options), NX_ELIMIT (refuse_below). The report is filled in every case where reading began. */
int nx_filter_compile_file(const char *path, const char *outdir,
			   const struct nx_filter_compile_opts *opts,
			   struct nx_filter_compile_report *rep);
int nx_filter_compile_fd(int fd, const char *outdir, const struct nx_filter_compile_opts *opts,
			 struct nx_filter_compile_report *rep);

/* The report as JSON (new reference; NULL on allocation failure). Also the meta file's body,
 * plus "fetch" when the options carried it. */
json_t *nx_filter_compile_report_json(const struct nx_filter_compile_report *rep);

/* Is `name` usable as a source name / file stem? */
bool nx_filter_source_name_ok(const char *name);

/*
 * sha256 identifying a source's bodies: sha256(sha256(.list) || sha256(.wild) || sha256(.allow)
 * [|| sha256(.side) when .side exists and is not empty]) over the file bytes (a missing body
 * counts as empty), so sources without side rules keep their identity. Computed from the files in
 * dir. Returns 0 or -errno.
 */
int nx_filter_bodies_sha256(const char *dir, const char *name, uint8_t out[32]);
/* The bodies_sha256 recorded in <dir>/<name>.meta. Returns 0, -errno, NX_ECORRUPT. */
int nx_filter_meta_bodies_sha256(const char *dir, const char *name, uint8_t out[32]);

/*
 * The skipped lines per reason recorded in <dir>/<name>.meta: a new JSON object
 * {reason: {count, first_lines: [1-based line numbers, at most NX_FILTER_SKIP_LINES], help}}
 * with only the reasons that occurred, in report order; *out is the caller's reference.
 * Returns 0, -errno (-ENOENT: never compiled), NX_ECORRUPT, -ENOMEM; *out NULL on error.
 */
int nx_filter_meta_skips(const char *dir, const char *name, json_t **out);

/* Hex helpers (64 hex chars <-> 32 bytes). */
void nx_filter_hex(const uint8_t *in, size_t n, char *out);
int nx_filter_unhex(const char *in, uint8_t *out, size_t n);

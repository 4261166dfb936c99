/*
 * The list manager: keeps every filter.sources entry compiled in state_dir/lists/<name>/ and the
 * snapshot state_dir/snapshot.nxs built from them, and hands out snapshot generations.
 *
 * A sync (boot, SIGHUP, the refresh schedule, `nxdns update`) walks the sources in order
 * (downloads, one at a time), then checks and compiles them on a pool of
 * nx_lists_compile_workers() threads (the caller's among them; at most
 * NX_LISTS_COMPILE_WORKERS_MAX, one source per thread at a time): a local file is recompiled
 * when its bytes changed (sha256 against the last compile's meta); a downloaded file
 * (state_dir/lists/<name>/<name>.download, written by the fetcher) likewise. A compile that
 * would replace many entries with none, or that fails, keeps the last good bodies (counted and
 * reported). Memory of the compiles: threads × one compile's bound (compile.h: the 8 MiB run
 * buffer + ~0.3 MiB of readers and writers), ~17 MiB on 2 cores, 34 MiB at most; measured
 * (sampled) in compile_peak_bytes. The snapshot is rebuilt only when some source's bodies
 * changed; otherwise the mapped one stays. Memory peak of a rebuild: old mapping + new file +
 * the builder's arrays (the builder streams the bodies).
 *
 * Threading: control thread (or the CLI) only. Snapshot generations are refcounted: workers hold
 * one each and drop it at their next wake-up (a quiescent point), so the old mapping is unmapped
 * only after every worker has moved on.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/conf.h"
#include "filter/compile.h"
#include "filter/side.h"
#include "filter/snapshot.h"

struct nx_snapref {
	struct nx_filter_snap *snap; /* owned; NULL = empty (no sources) */
	struct nx_filter_side *side; /* owned: the side rules of the same bodies; NULL = none */
	atomic_int refs;
	uint64_t gen;
};

void nx_snapref_acquire(struct nx_snapref *r);
void nx_snapref_release(struct nx_snapref *r);

/* Per-source state, as the API and metrics show it. */
struct nx_source_status {
	char name[NX_FILTER_SOURCE_NAME_MAX + 1];
	bool enabled;
	bool have_bodies;          /* compiled bodies exist (possibly from an earlier run) */
	uint64_t n_list, n_wild, n_allow, skipped, lines;
	int64_t compiled_at;       /* unix seconds of the last compile, 0 = never (this run) */
	int64_t fetched_at;        /* unix seconds of the last successful download */
	char etag[256];
	char last_modified[64];
	char last_error[384];      /* "" when the last attempt succeeded */
	uint64_t errors;           /* failed fetches/compiles since start */
	uint64_t kept_previous;    /* times the last good bodies were kept over a bad new list */
	bool changed;              /* bodies changed in the last sync */
	bool downloading;          /* a download of it runs now (the API shows the start's wait) */
};

struct nx_lists {
	char state_dir[512];
	struct nx_snapref *cur;    /* the current generation (one reference held here) */
	uint64_t gen;
	unsigned n;
	struct nx_source_status st[NX_CONF_MAX_SOURCES];
	/* last snapshot build, for reports */
	uint64_t entries, bytes, build_ms, peak_build_bytes;
	bool rebuilt;
	/* Compile threads wanted (0: the online CPUs), and of the last sync: threads used and
	 * the filter_build bytes of all its compiles together at their sampled peak. */
	unsigned compile_workers;
	/* Snapshot seed for full builds (0: random); tests fix it. An incremental build keeps
	 * the previous snapshot's. */
	uint64_t snap_seed;
	bool build_incremental; /* the last build reused the previous snapshot */
	unsigned compile_threads;
	uint64_t compile_peak_bytes;
	/* Progress hook of compiles and builds (NULL: none): the daemon answers admin requests
	 * there, so the control loop's HTTP side does not stall for a whole rebuild. */
	void (*on_step)(void *arg);
	void *step_arg;
	/* Progress by source (NULL: none), called with step_arg before source i of n is looked
	 * at, and with i == n, name NULL before the snapshot build: the first boot's log and
	 * service status say how far the load is. */
	void (*on_progress)(void *arg, unsigned i, unsigned n, const char *name);
};

#define NX_LISTS_COMPILE_WORKERS_MAX 4

/* Threads a sync compiles with: want (0: the online CPUs), at most the jobs and
 * NX_LISTS_COMPILE_WORKERS_MAX, at least 1. */
unsigned nx_lists_compile_workers(unsigned want, unsigned njobs);

/* Sync options. */
enum {
	NX_LISTS_FETCH = 1u << 0, /* download URL sources first (blocking; for `nxdns update`) */
	NX_LISTS_FORCE = 1u << 1, /* recompile every source and rebuild the snapshot */
};

void nx_lists_init(struct nx_lists *l, const char *state_dir);
void nx_lists_deinit(struct nx_lists *l);

/*
 * Bring bodies and snapshot up to date with config c. On success *changed tells whether a new
 * generation was published in l->cur. Errors of single sources are reported in l->st and never
 * fail the sync; a snapshot build failure keeps the previous generation and returns the error.
 */
int nx_lists_sync(struct nx_lists *l, const struct nx_conf *c, unsigned flags, bool *changed);

int nx_mkdir_p(const char *path);

/* Paths (into caller buffers). */
void nx_lists_source_dir(const struct nx_lists *l, const char *name, char *buf, size_t cap);
void nx_lists_download_path(const struct nx_lists *l, const char *name, char *buf, size_t cap);

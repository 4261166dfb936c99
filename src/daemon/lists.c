#include "daemon/lists.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "filter/fetch.h"

/* A compile that drops a list from this many entries to none is a broken download, not a
 * real list change: keep the last good bodies. */
#define NX_LISTS_SUSPICIOUS_ENTRIES 100
#define NX_LISTS_FETCH_TIMEOUT_MS 60000
#define NX_LISTS_MAX_DOWNLOAD (256ull * 1024 * 1024)

void nx_snapref_acquire(struct nx_snapref *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void nx_snapref_release(struct nx_snapref *r)
{
	if (r && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
		nx_filter_side_free(r->side);
		nx_filter_snap_free(r->snap);
		nx_mem_free(NX_OWNER_misc, r, sizeof(*r));
	}
}

/* A generation owns its snapshot and the side structure loaded from the same bodies, so both
 * are swapped and released together (one refcount: a worker never sees one without the
 * other). */
static struct nx_snapref *snapref_new(struct nx_filter_snap *s, struct nx_filter_side *side,
				      uint64_t gen)
{
	struct nx_snapref *r = nx_mem_calloc(NX_OWNER_misc, 1, sizeof(*r));
	if (!r) {
		return NULL;
	}
	r->snap = s;
	r->side = side;
	r->gen = gen;
	atomic_init(&r->refs, 1);
	return r;
}

void nx_lists_init(struct nx_lists *l, const char *state_dir)
{
	memset(l, 0, sizeof(*l));
	snprintf(l->state_dir, sizeof(l->state_dir), "%s", state_dir);
	l->cur = snapref_new(NULL, NULL, 0);
}

void nx_lists_deinit(struct nx_lists *l)
{
	nx_snapref_release(l->cur);
	l->cur = NULL;
}

void nx_lists_source_dir(const struct nx_lists *l, const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/lists/%s", l->state_dir, name);
}

void nx_lists_download_path(const struct nx_lists *l, const char *name, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/lists/%s/%s.download", l->state_dir, name, name);
}

int nx_mkdir_p(const char *path)
{
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
				return -errno;
			}
			*p = '/';
		}
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
		return -errno;
	}
	return 0;
}

/* sha256 of a file's bytes as hex; 0 or -errno. */
static int file_sha256_hex(const char *path, char out[65])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	uint8_t buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
	}
	int rc = n < 0 ? -errno : 0;
	close(fd);
	uint8_t dig[32];
	crypto_hash_sha256_final(&st, dig);
	nx_filter_hex(dig, 32, out);
	return rc;
}

/* Read what the last compile recorded: input sha, counts, fetch validators. */
static bool read_meta(const char *dir, const char *name, const struct nx_conf_source *s,
		      char input_sha[65], struct nx_source_status *st, const char *input,
		      bool *same_stat)
{
	*same_stat = false;
	char path[700];
	snprintf(path, sizeof(path), "%s/%s.meta", dir, name);
	json_error_t err;
	json_t *j = json_load_file(path, 0, &err);
	if (!j) {
		return false;
	}
	const char *sha = json_string_value(json_object_get(j, "input_sha256"));
	snprintf(input_sha, 65, "%s", sha ? sha : "");
	/* the input's size, inode, mtime and ctime as the compile saw them: unchanged means
	 * the same bytes without hashing them (boot reads no list file) */
	*same_stat = input && input_sha[0] && nx_filter_meta_input_unchanged(j, input) == 1;
	/* bodies compiled with other options than the source's now (or before the side
	 * structure existed): as if the input changed */
	json_t *o = json_object_get(j, "options");
	if (json_is_true(json_object_get(o, "subdomains")) != s->subdomains ||
	    !json_is_true(json_object_get(o, "side")) ||
	    json_is_true(json_object_get(o, "hosts_listed")) != s->hosts_listed) {
		input_sha[0] = '\0';
	}
	json_t *counts = json_object_get(j, "counts");
	json_t *src = counts ? counts : j;
	st->n_list = (uint64_t)json_integer_value(json_object_get(src, "list"));
	st->n_wild = (uint64_t)json_integer_value(json_object_get(src, "wild"));
	st->n_allow = (uint64_t)json_integer_value(json_object_get(src, "allow"));
	st->skipped = (uint64_t)json_integer_value(json_object_get(j, "skipped_total"));
	st->lines = (uint64_t)json_integer_value(json_object_get(j, "lines"));
	json_t *fetch = json_object_get(j, "fetch");
	/* The validators of the last download: the meta's only when they are newer than what
	 * this process already knows (a download since the last compile is newer than the meta). */
	if (fetch && (st->fetched_at == 0 ||
		      json_integer_value(json_object_get(fetch, "fetched_at")) > st->fetched_at)) {
		const char *e = json_string_value(json_object_get(fetch, "etag"));
		const char *lm = json_string_value(json_object_get(fetch, "last_modified"));
		snprintf(st->etag, sizeof(st->etag), "%s", e ? e : "");
		snprintf(st->last_modified, sizeof(st->last_modified), "%s", lm ? lm : "");
		st->fetched_at = json_integer_value(json_object_get(fetch, "fetched_at"));
	}
	json_decref(j);
	return true;
}

static void set_error(struct nx_source_status *st, const char *fmt, const char *what)
	__attribute__((format(printf, 2, 0)));
static void set_error(struct nx_source_status *st, const char *fmt, const char *what)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-truncation"
	/* fmt is always one of this file's literals with one %s (checked at each call site) */
	snprintf(st->last_error, sizeof(st->last_error), fmt, what);
#pragma GCC diagnostic pop
	st->errors++;
	nx_log(NX_LOG_WARN, "filter", "source %s: %s", st->name, st->last_error);
}

/* Fetch one URL source now (blocking, `nxdns update`). */
static void fetch_sync(struct nx_lists *l, const struct nx_conf_source *s,
		       struct nx_source_status *st)
{
	char dest[700];
	nx_lists_download_path(l, s->name, dest, sizeof(dest));
	struct nx_fetch_req req = {
		.url = s->url,
		.dest = dest,
		.etag = st->etag[0] && access(dest, F_OK) == 0 ? st->etag : NULL,
		.last_modified =
			st->last_modified[0] && access(dest, F_OK) == 0 ? st->last_modified : NULL,
		.timeout_ms = NX_LISTS_FETCH_TIMEOUT_MS,
		.max_bytes = NX_LISTS_MAX_DOWNLOAD,
	};
	struct nx_fetch_result res;
	nx_fetch_sync(&req, &res);
	if (res.status == NX_FETCH_OK) {
		st->fetched_at = time(NULL);
		snprintf(st->etag, sizeof(st->etag), "%s", res.etag);
		snprintf(st->last_modified, sizeof(st->last_modified), "%s", res.last_modified);
	} else if (res.status != NX_FETCH_NOT_MODIFIED) {
		set_error(st, "download failed, keeping the last good list: %s", res.error);
	}
}

/* Compile `input` into dir when its bytes differ from the last compile. */
static void compile_if_changed(void (*on_step)(void *), void *step_arg,
			       const struct nx_conf_source *s, const char *input, const char *dir,
			       struct nx_source_status *st, bool force)
{
	char have[65] = "", now[65];
	bool same_stat = false;
	bool meta = read_meta(dir, s->name, s, have, st, input, &same_stat);
	st->have_bodies = meta;
	if (meta && same_stat && have[0] && !force) {
		return;
	}
	/* Without a meta (or after an options change, or forced) the input is compiled whatever
	 * its hash, and the compile hashes it while reading: only check that it can be read. */
	bool need_hash = meta && have[0] && !force;
	struct stat in_st;
	int rc = stat(input, &in_st) == 0 ? 0 : -errno;
	if (rc == 0 && need_hash) {
		rc = file_sha256_hex(input, now);
	} else if (rc == 0) {
		int fd = open(input, O_RDONLY | O_CLOEXEC);
		rc = fd < 0 ? -errno : 0;
		if (fd >= 0) {
			close(fd);
		}
	}
	if (rc < 0) {
		if (s->path || meta) {
			/* a URL source never downloaded yet has no input: not an error */
			if (s->path) {
				set_error(st, "cannot read the list file: %s", nx_strerror(rc));
			}
		}
		return;
	}
	if (need_hash && strcmp(have, now) == 0) {
		/* unchanged; a fresh file's stat is recorded once it has settled, so the next
		 * boot does not hash it again */
		(void)nx_filter_meta_note_input_stat(dir, s->name, input, &in_st, have);
		return;
	}
	enum nx_filter_format fmt = NX_FILTER_FMT_AUTO;
	nx_filter_format_parse(s->format, &fmt);
	uint64_t before = st->n_list + st->n_wild + st->n_allow;
	struct nx_filter_compile_opts opts = {
		.name = s->name,
		.format = fmt,
		.refuse_below = meta && before >= NX_LISTS_SUSPICIOUS_ENTRIES ? 1 : 0,
		.etag = st->etag[0] ? st->etag : NULL,
		.last_modified = st->last_modified[0] ? st->last_modified : NULL,
		.fetched_at = st->fetched_at,
		.origin = s->url ? s->url : s->path,
		.on_step = on_step,
		.step_arg = step_arg,
		.subdomains = s->subdomains,
		.side = true,
		.hosts_listed = s->hosts_listed,
	};
	struct nx_filter_compile_report rep;
	memset(&rep, 0, sizeof(rep));
	rc = nx_filter_compile_file(input, dir, &opts, &rep);
	if (rc == NX_ELIMIT) {
		st->kept_previous++;
		set_error(st, "%s", "the new list compiled to no entries; keeping the last good one");
		return;
	}
	if (rc < 0) {
		set_error(st, "compile failed: %s", nx_strerror(rc));
		return;
	}
	st->have_bodies = true;
	st->changed = true;
	st->n_list = rep.n_list;
	st->n_wild = rep.n_wild;
	st->n_allow = rep.n_allow;
	st->skipped = rep.skipped_total;
	st->lines = rep.lines;
	st->compiled_at = time(NULL);
	st->last_error[0] = 0;
	nx_log(NX_LOG_INFO, "filter",
	       "source %s compiled: %llu exact, %llu wildcard, %llu exceptions, %llu lines skipped",
	       s->name, (unsigned long long)rep.n_list, (unsigned long long)rep.n_wild,
	       (unsigned long long)rep.n_allow, (unsigned long long)rep.skipped_total);
}

/*
 * The compiles of one sync run on a small pool: the calling thread and up to
 * NX_LISTS_COMPILE_WORKERS_MAX - 1 more, one source at a time each (a source's compile touches
 * only its own directory and its own status row). Only the calling thread calls the caller's
 * on_step (the daemon answers admin requests there); every compile's probe samples the
 * filter_build ledger, so the pool's concurrent peak is measured, not assumed.
 */
struct compile_job {
	const struct nx_conf_source *s;
	struct nx_source_status *st;
	const char *dir;
	char input[700];
};

struct compile_pool {
	struct compile_job *jobs;
	unsigned n;
	bool force;
	atomic_uint next;
	_Atomic int64_t peak;  /* filter_build bytes seen by the probes, all threads */
	int64_t base;          /* filter_build bytes before the pool started */
	void (*on_step)(void *arg);
	void *step_arg;
};

struct pool_probe {
	struct compile_pool *p;
	bool caller; /* the sync's own thread: forwards to on_step */
};

static void pool_sample(void *arg)
{
	struct pool_probe *pr = arg;
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	int64_t d = rows[NX_OWNER_filter_build].bytes - pr->p->base;
	int64_t cur = atomic_load_explicit(&pr->p->peak, memory_order_relaxed);
	while (d > cur && !atomic_compare_exchange_weak_explicit(&pr->p->peak, &cur, d,
								 memory_order_relaxed,
								 memory_order_relaxed)) {
	}
	if (pr->caller && pr->p->on_step) {
		pr->p->on_step(pr->p->step_arg);
	}
}

static void pool_run(struct compile_pool *p, bool caller)
{
	struct pool_probe pr = {.p = p, .caller = caller};
	for (;;) {
		unsigned i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
		if (i >= p->n) {
			return;
		}
		struct compile_job *j = &p->jobs[i];
		compile_if_changed(pool_sample, &pr, j->s, j->input, j->dir, j->st, p->force);
	}
}

static void *pool_thread(void *arg)
{
	pool_run(arg, false);
	return NULL;
}

unsigned nx_lists_compile_workers(unsigned want, unsigned njobs)
{
	if (want == 0) {
		long np = sysconf(_SC_NPROCESSORS_ONLN);
		want = np > 0 ? (unsigned)np : 1;
	}
	want = want > NX_LISTS_COMPILE_WORKERS_MAX ? NX_LISTS_COMPILE_WORKERS_MAX : want;
	want = want > njobs ? njobs : want;
	return want ? want : 1;
}

/* Run every job; returns the threads used (the caller's included). */
static unsigned pool_compile(struct nx_lists *l, struct compile_job *jobs, unsigned n, bool force)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	struct compile_pool p = {.jobs = jobs, .n = n, .force = force,
				 .base = rows[NX_OWNER_filter_build].bytes,
				 .on_step = l->on_step, .step_arg = l->step_arg};
	atomic_init(&p.next, 0);
	atomic_init(&p.peak, 0);
	unsigned w = nx_lists_compile_workers(l->compile_workers, n);
	pthread_t th[NX_LISTS_COMPILE_WORKERS_MAX];
	unsigned started = 0;
	for (unsigned i = 1; i < w; i++) {
		if (pthread_create(&th[started], NULL, pool_thread, &p) != 0) {
			break; /* fewer threads: the others take the jobs */
		}
		started++;
	}
	pool_run(&p, true);
	for (unsigned i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
	}
	l->compile_threads = started + 1;
	l->compile_peak_bytes = (uint64_t)atomic_load(&p.peak);
	return started + 1;
}

/* The side structure of the bodies a snapshot was built from, in the snapshot's source order
 * (side rule origins are snapshot source indexes). Logged on failure. */
static int open_side(const struct nx_filter_snap_source *srcs, unsigned n,
		     struct nx_filter_side **out)
{
	int rc = nx_filter_side_open(srcs, n, out);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "filter", "cannot load the side rules, keeping the current lists: %s",
		       nx_strerror(rc));
		return rc;
	}
	struct nx_filter_side_stats ss;
	nx_filter_side_stats(*out, &ss);
	if (ss.rules > 0) {
		nx_log(NX_LOG_INFO, "filter",
		       "side rules: %llu (%llu by name, %llu regex/pattern, %llu answers), %llu bytes",
		       (unsigned long long)ss.rules, (unsigned long long)ss.named,
		       (unsigned long long)ss.regexes, (unsigned long long)ss.rewrites,
		       (unsigned long long)ss.bytes);
	}
	return 0;
}

int nx_lists_sync(struct nx_lists *l, const struct nx_conf *c, unsigned flags, bool *changed)
{
	*changed = false;
	unsigned n = (unsigned)NX_MIN(c->n_sources, NX_CONF_MAX_SOURCES);
	char snap_path[600];
	snprintf(snap_path, sizeof(snap_path), "%s/snapshot.nxs", l->state_dir);
	int rc = nx_mkdir_p(l->state_dir);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "filter", "cannot create %s: %s", l->state_dir, nx_strerror(rc));
		return rc;
	}

	static char dirs[NX_CONF_MAX_SOURCES][600];
	static struct compile_job jobs[NX_CONF_MAX_SOURCES];
	unsigned njobs = 0;
	const char *names[NX_CONF_MAX_SOURCES];
	uint8_t shas[NX_CONF_MAX_SOURCES][32];
	struct nx_filter_snap_source srcs[NX_CONF_MAX_SOURCES];
	for (unsigned i = 0; i < n; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		struct nx_source_status *st = &l->st[i];
		if (strcmp(st->name, s->name) != 0 || i >= l->n) {
			memset(st, 0, sizeof(*st));
			snprintf(st->name, sizeof(st->name), "%s", s->name);
		}
		st->enabled = s->enabled && c->filter_enabled;
		st->changed = false;
		nx_lists_source_dir(l, s->name, dirs[i], sizeof(dirs[i]));
		names[i] = s->name;
		srcs[i].name = s->name;
		srcs[i].dir = dirs[i];
		if (st->enabled && l->on_progress) {
			l->on_progress(l->step_arg, i, n, s->name);
		}
		if (st->enabled) {
			rc = nx_mkdir_p(dirs[i]);
			if (rc < 0) {
				set_error(st, "cannot create its directory: %s", nx_strerror(rc));
			} else {
				struct compile_job *j = &jobs[njobs++];
				*j = (struct compile_job){.s = s, .st = st, .dir = dirs[i]};
				if (s->url) {
					char dummy[65];
					bool same;
					read_meta(dirs[i], s->name, s, dummy, st, NULL, &same);
					if (flags & NX_LISTS_FETCH) {
						fetch_sync(l, s, st);
					}
					nx_lists_download_path(l, s->name, j->input,
							       sizeof(j->input));
				} else {
					snprintf(j->input, sizeof(j->input), "%s", s->path);
				}
			}
		}
	}
	/* every source's compile check (and compile) on the pool, then the identities */
	if (njobs > 0) {
		pool_compile(l, jobs, njobs, (flags & NX_LISTS_FORCE) != 0);
	}
	for (unsigned i = 0; i < n; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		struct nx_source_status *st = &l->st[i];
		/* A disabled source stays in the snapshot as an empty slot, so snapshot indexes are
		 * config indexes (the eligibility masks' bits). Its identity is the sha of empty
		 * bodies, as the builder records it, so an unchanged config never rebuilds. */
		if (!st->enabled) {
			srcs[i].dir = l->state_dir; /* no bodies there: empty */
		}
		if (!st->enabled || nx_filter_meta_bodies_sha256(dirs[i], s->name, shas[i]) < 0) {
			if (nx_filter_bodies_sha256(srcs[i].dir, s->name, shas[i]) < 0) {
				memset(shas[i], 0, 32);
			}
		}
	}
	l->n = n;

	/* Keep the mapped snapshot when it already holds exactly these bodies; at boot, map the one
	 * on disk if it does. */
	if (!(flags & NX_LISTS_FORCE) && l->cur->snap &&
	    nx_filter_snap_is_current(l->cur->snap, names, (const uint8_t(*)[32])shas, n)) {
		l->rebuilt = false;
		return 0;
	}
	if (!l->cur->snap && n > 0) {
		struct nx_filter_snap *s = NULL;
		int orc = nx_filter_snap_open(snap_path, &s);
		if (orc == NX_EFORMAT) {
			nx_log(NX_LOG_INFO, "filter",
			       "%s was written in another snapshot format (an earlier nxdns): "
			       "rebuilding it from the compiled bodies", snap_path);
		} else if (orc < 0 && orc != -ENOENT) {
			nx_log(NX_LOG_WARN, "filter", "cannot map %s (%s): rebuilding it",
			       snap_path, nx_strerror(orc));
		}
		if (orc == 0) {
			if (nx_filter_snap_is_current(s, names, (const uint8_t(*)[32])shas, n)) {
				struct nx_filter_side *side = NULL;
				rc = open_side(srcs, n, &side);
				if (rc < 0) {
					nx_filter_snap_free(s);
					return rc;
				}
				struct nx_snapref *r = snapref_new(s, side, ++l->gen);
				if (!r) {
					nx_filter_side_free(side);
					nx_filter_snap_free(s);
					return -ENOMEM;
				}
				nx_snapref_release(l->cur);
				l->cur = r;
				l->entries = nx_filter_snap_entries(s);
				l->bytes = nx_filter_snap_bytes(s);
				l->rebuilt = false;
				*changed = true;
				nx_log(NX_LOG_INFO, "filter", "mapped snapshot: %llu entries, %llu bytes",
				       (unsigned long long)l->entries, (unsigned long long)l->bytes);
				return 0;
			}
			nx_filter_snap_free(s);
		}
	}
	if (n == 0) {
		if (l->cur->snap) {
			struct nx_snapref *r = snapref_new(NULL, NULL, ++l->gen);
			if (!r) {
				return -ENOMEM;
			}
			nx_snapref_release(l->cur);
			l->cur = r;
			*changed = true;
		}
		l->entries = l->bytes = 0;
		return 0;
	}

	struct nx_filter_snap_build_report rep;
	memset(&rep, 0, sizeof(rep));
	if (l->on_progress) {
		l->on_progress(l->step_arg, n, n, NULL);
	}
	/* incremental when the file on disk is usable: only the changed sources' bodies are read
	 * (the builder checks prev and falls back to a full build) */
	struct nx_filter_snap_build_opts bopts = {
		.on_step = l->on_step,
		.arg = l->step_arg,
		.seed = l->snap_seed,
		.prev = (flags & NX_LISTS_FORCE) ? NULL : snap_path,
		.shas = (const uint8_t(*)[32])shas,
	};
	rc = nx_filter_snap_build(snap_path, srcs, n, &bopts, &rep);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "filter", "snapshot build failed, keeping the current one: %s",
		       nx_strerror(rc));
		return rc;
	}
	struct nx_filter_snap *s = NULL;
	rc = nx_filter_snap_open(snap_path, &s);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "filter", "cannot map the new snapshot: %s", nx_strerror(rc));
		return rc;
	}
	struct nx_filter_side *side = NULL;
	rc = open_side(srcs, n, &side);
	if (rc < 0) {
		nx_filter_snap_free(s);
		return rc;
	}
	struct nx_snapref *r = snapref_new(s, side, ++l->gen);
	if (!r) {
		nx_filter_side_free(side);
		nx_filter_snap_free(s);
		return -ENOMEM;
	}
	nx_snapref_release(l->cur);
	l->cur = r;
	l->entries = rep.entries;
	l->bytes = rep.bytes;
	l->build_ms = rep.build_ms;
	l->peak_build_bytes = rep.peak_build_bytes;
	l->rebuilt = true;
	*changed = true;
	l->build_incremental = rep.incremental;
	nx_log(NX_LOG_INFO, "filter",
	       "snapshot built%s: %llu entries, %llu bytes (%.2f B/entry) in %llu ms",
	       rep.incremental ? " (incremental)" : "", (unsigned long long)rep.entries,
	       (unsigned long long)rep.bytes,
	       rep.entries ? (double)rep.bytes / (double)rep.entries : 0.0,
	       (unsigned long long)rep.build_ms);
	return 0;
}

/*
 * Query-log writer micro-benchmark (not a test): producer threads push synthetic records
 * through nx_qlog into a fresh database, then flush; reports records written per second,
 * drops, the writer thread's CPU time (schedstat, utime/stime) and its read/write system calls
 * (/proc/self/task/<tid>/io: SQLite page reads are pread64, page writes pwrite64).
 *
 *   qlog_bench [--profile burst|household] [--records N] [--rate R] [--producers P]
 *              [--batch B] [--commit-ms M] [--cache-kib K] [--privacy L] [--buffer B] [--dir D] [--keep 1]
 *
 * burst:     every record blocked, 200,000 distinct names in turn, 2 clients (a blocklist hit
 *            storm or a random-subdomain flood);
 * household: 300 names with a skewed popularity, 10 clients, 1 in 5 names blocked, half of
 *            the rest cached.
 * --rate 0 pushes as fast as possible (the rings overwrite: written/s is the writer's ceiling);
 * --rate R paces all producers together to R records/s. Timestamps advance at R/s (50,000/s
 * when unpaced) from a wall-clock base 57 s into a minute, so runs cross minute boundaries the
 * same way whatever the machine's speed.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/ledger.h"
#include "filter/result.h"
#include "querylog/querylog.h"

struct opts {
	const char *profile;
	uint64_t records;
	uint64_t rate;
	unsigned producers;
	unsigned batch;
	unsigned commit_ms; /* params.commit_ms: batched commits (logging.commit_interval) */
	unsigned cache_kib;
	unsigned privacy;
	unsigned buffer;
	const char *dir;
	bool keep;
};

struct producer {
	struct nx_qlog *q;
	const struct opts *o;
	unsigned idx;
	int64_t base_ms;
	uint64_t ts_rate;
	uint64_t t0_us;
};

static bool burst(const struct opts *o)
{
	return strcmp(o->profile, "burst") == 0;
}

static uint32_t xorshift(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* Record number k (over all producers) of the profile. */
static void fill(struct nx_qlog_rec *r, const struct opts *o, uint64_t k, int64_t ts, uint32_t *rnd)
{
	memset(r, 0, sizeof(*r));
	r->ts_ms = ts;
	r->duration_us = 150;
	r->family = AF_INET;
	r->proto = NX_QLOG_PROTO_UDP;
	r->qtype = 1;
	bool blocked, cached = false;
	unsigned host;
	if (burst(o)) {
		unsigned n = (unsigned)(k % 200000);
		snprintf(r->name, sizeof(r->name), "x%06u.ads.tracker-net.example", n);
		host = 10 + (unsigned)(k % 2);
		blocked = true;
	} else {
		/* skewed popularity: u^3 puts most queries on the first few dozen names */
		double u = (double)(xorshift(rnd) % 100000) / 100000.0;
		unsigned n = (unsigned)(300.0 * u * u * u);
		snprintf(r->name, sizeof(r->name), "site%u.household.example", n);
		host = 10 + xorshift(rnd) % 10;
		blocked = n % 5 == 0;
		cached = !blocked && (xorshift(rnd) & 1);
	}
	uint8_t a[4] = {192, 168, 1, (uint8_t)host};
	memcpy(r->client, a, 4);
	if (blocked) {
		r->action = NX_QLOG_ACT_BLOCK;
		r->reason = NX_FILTER_R_blocklist_domain;
		r->upstream = -1;
		snprintf(r->matched, sizeof(r->matched), "%s", r->name);
		snprintf(r->source, sizeof(r->source), "stevenblack");
		snprintf(r->answer, sizeof(r->answer), "A 0.0.0.0");
	} else {
		r->action = NX_QLOG_ACT_NONE;
		r->reason = NX_FILTER_R_none;
		r->cached = cached;
		r->upstream = cached ? -1 : 0;
		snprintf(r->answer, sizeof(r->answer), "A 192.0.2.%u", (unsigned)(k % 250));
	}
}

static void *produce(void *arg)
{
	struct producer *p = arg;
	const struct opts *o = p->o;
	uint64_t mine = o->records / o->producers + (p->idx < o->records % o->producers);
	uint64_t per_s = o->rate / o->producers;
	uint32_t rnd = 0x9e3779b9u ^ (p->idx * 7919u + 1);
	for (uint64_t i = 0; i < mine; i++) {
		if (per_s) {
			for (;;) {
				uint64_t el = nx_now_mono_us() - p->t0_us;
				if (i < per_s * el / 1000000) {
					break;
				}
				struct timespec ts = {0, 200000};
				nanosleep(&ts, NULL);
			}
		}
		uint64_t k = i * o->producers + p->idx;
		struct nx_qlog_rec r;
		fill(&r, o, k, p->base_ms + (int64_t)(k * 1000 / p->ts_rate), &rnd);
		nx_qlog_push(p->q, p->idx, &r);
	}
	return NULL;
}

/* The writer thread: the task named "nx-qlog". */
static int writer_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d) {
		return -1;
	}
	struct dirent *e;
	int tid = -1;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f) {
			continue;
		}
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "nx-qlog", 7) == 0) {
			tid = atoi(e->d_name);
		}
		fclose(f);
	}
	closedir(d);
	return tid;
}

struct tstat {
	uint64_t cpu_ns;       /* schedstat: time on CPU */
	uint64_t utime, stime; /* clock ticks */
	uint64_t syscr, syscw, rchar, wchar;
};

static void thread_stat(int tid, struct tstat *t)
{
	memset(t, 0, sizeof(*t));
	char path[96];
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%" SCNu64, &t->cpu_ns) != 1) {
			t->cpu_ns = 0;
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (f) {
		char buf[1024];
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		char *p = strrchr(buf, ')');
		/* after "pid (comm)": state is field 3; utime and stime are fields 14 and 15 */
		for (int field = 2; p && field < 14; field++) {
			p = strchr(p + 1, ' ');
		}
		if (p) {
			sscanf(p, " %" SCNu64 " %" SCNu64, &t->utime, &t->stime);
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/io", tid);
	f = fopen(path, "r");
	if (f) {
		char line[128];
		while (fgets(line, sizeof(line), f)) {
			sscanf(line, "syscr: %" SCNu64, &t->syscr);
			sscanf(line, "syscw: %" SCNu64, &t->syscw);
			sscanf(line, "rchar: %" SCNu64, &t->rchar);
			sscanf(line, "wchar: %" SCNu64, &t->wchar);
		}
		fclose(f);
	}
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static uint64_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: qlog_bench [--profile burst|household] [--records N] [--rate R]"
			 " [--producers P] [--batch B] [--commit-ms M] [--cache-kib K] [--privacy L] [--buffer B]"
			" [--dir D] [--keep 1]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = {.profile = "burst", .records = 400000, .producers = 2};
	struct nx_qlog_params p;
	nx_qlog_params_default(&p);
	o.batch = p.batch_max;
	o.cache_kib = p.writer_cache_kib;
	o.buffer = p.buffer_max;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (i + 1 >= argc) {
			usage();
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--profile")) {
			o.profile = v;
		} else if (!strcmp(a, "--records")) {
			o.records = strtoull(v, NULL, 10);
		} else if (!strcmp(a, "--rate")) {
			o.rate = strtoull(v, NULL, 10);
		} else if (!strcmp(a, "--producers")) {
			o.producers = (unsigned)atoi(v);
		} else if (!strcmp(a, "--commit-ms")) {
			o.commit_ms = (unsigned)atoi(v);
		} else if (!strcmp(a, "--batch")) {
			o.batch = (unsigned)atoi(v);
		} else if (!strcmp(a, "--cache-kib")) {
			o.cache_kib = (unsigned)atoi(v);
		} else if (!strcmp(a, "--privacy")) {
			o.privacy = (unsigned)atoi(v);
		} else if (!strcmp(a, "--buffer")) {
			o.buffer = (unsigned)atoi(v);
		} else if (!strcmp(a, "--keep")) {
			o.keep = atoi(v) != 0;
		} else if (!strcmp(a, "--dir")) {
			o.dir = v;
		} else {
			usage();
		}
	}
	if (strcmp(o.profile, "burst") && strcmp(o.profile, "household")) {
		usage();
	}
	if (o.producers < 1 || o.producers > 64 || !o.records) {
		usage();
	}

	char dir[256], db[300];
	const char *base = o.dir ? o.dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof(dir), "%s/qlog-bench-XXXXXX", base);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(db, sizeof(db), "%s/querylog.db", dir);

	p.path = db;
	p.producers = o.producers;
	p.buffer_max = o.buffer;
	p.batch_max = o.batch;
	p.commit_ms = o.commit_ms;
	p.writer_cache_kib = o.cache_kib;
	p.privacy = o.privacy;
	struct nx_qlog *q = NULL;
	int rc = nx_qlog_new(&p, &q);
	if (rc) {
		fprintf(stderr, "nx_qlog_new: %d\n", rc);
		return 1;
	}
	int64_t queue_bytes = 0;
	{
		struct nx_ledger_row rows[NX_OWNER__COUNT];
		nx_ledger_read(rows);
		queue_bytes = rows[NX_OWNER_querylog_queue].bytes;
	}
	if (nx_qlog_start(q)) {
		return 1;
	}
	int tid = -1;
	for (int i = 0; i < 100 && tid < 0; i++) {
		tid = writer_tid();
		if (tid < 0) {
			usleep(1000);
		}
	}
	struct tstat s0, s1;
	thread_stat(tid, &s0);

	int64_t now = nx_now_wall_ms();
	int64_t base_ms = now / 60000 * 60000 + 57000;
	struct producer pr[64];
	pthread_t th[64];
	uint64_t t0 = nx_now_mono_us();
	for (unsigned i = 0; i < o.producers; i++) {
		pr[i] = (struct producer){.q = q,
					  .o = &o,
					  .idx = i,
					  .base_ms = base_ms,
					  .ts_rate = o.rate ? o.rate : 50000,
					  .t0_us = t0};
		pthread_create(&th[i], NULL, produce, &pr[i]);
	}
	for (unsigned i = 0; i < o.producers; i++) {
		pthread_join(th[i], NULL);
	}
	uint64_t t_push = nx_now_mono_us() - t0;
	rc = nx_qlog_flush(q, 0, 120000);
	uint64_t t_all = nx_now_mono_us() - t0;
	thread_stat(tid, &s1);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	char wal[320];
	snprintf(wal, sizeof(wal), "%s-wal", db);
	uint64_t db_kib = file_size(db) / 1024, wal_kib = file_size(wal) / 1024;
	nx_qlog_free(q);

	double secs = (double)t_all / 1e6;
	double cpu_s = (double)(s1.cpu_ns - s0.cpu_ns) / 1e9;
	long hz = sysconf(_SC_CLK_TCK);
	printf("profile=%s records=%" PRIu64 " rate=%" PRIu64 " producers=%u batch=%u cache_kib=%u"
	       " privacy=%u commit_ms=%u flush=%d\n",
	       o.profile, o.records, o.rate, o.producers, o.batch, o.cache_kib, o.privacy, o.commit_ms,
	       rc);
	printf("  elapsed %.2f s (push %.2f s)  pushed %" PRIu64 "  written %" PRIu64
	       "  dropped %" PRIu64 " (%.1f%%)  batches %" PRIu64 "\n",
	       secs, (double)t_push / 1e6, st.pushed, st.written, st.dropped_oldest,
	       st.pushed ? 100.0 * (double)st.dropped_oldest / (double)st.pushed : 0.0, st.batches);
	printf("  written/s %.0f  writer cpu %.2f s (%.0f%% of a core; user %.2f s, sys %.2f s)"
	       "  cpu/record %.2f us\n",
	       (double)st.written / secs, cpu_s, 100.0 * cpu_s / secs,
	       (double)(s1.utime - s0.utime) / (double)hz,
	       (double)(s1.stime - s0.stime) / (double)hz,
	       st.written ? cpu_s * 1e6 / (double)st.written : 0.0);
	printf("  writer syscalls: read %" PRIu64 " (%.3f/record, %" PRIu64 " KiB)  write %" PRIu64
	       " (%.3f/record, %" PRIu64 " KiB)\n",
	       s1.syscr - s0.syscr,
	       st.written ? (double)(s1.syscr - s0.syscr) / (double)st.written : 0.0,
	       (s1.rchar - s0.rchar) / 1024, s1.syscw - s0.syscw,
	       st.written ? (double)(s1.syscw - s0.syscw) / (double)st.written : 0.0,
	       (s1.wchar - s0.wchar) / 1024);
	printf("  querylog_queue %" PRId64 " B  sqlite heap high-water %" PRIu64 " B  db %" PRIu64
	       " KiB  wal %" PRIu64 " KiB  queue_peak %" PRIu64 "\n",
	       queue_bytes, st.sqlite_mem_highwater, db_kib, wal_kib, st.queue_peak);
	if (o.keep) {
		printf("  kept %s\n", db);
	} else {
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	}
	return rc ? 1 : 0;
}

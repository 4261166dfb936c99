/*
 * The web admin's reads on a full day of query log (not a test; `scripts/bench ui-reads` runs
 * it and docs/benchmarks.md shows what it printed).
 *
 *   qlog_ui_bench fill DB [--records N] [--hours H] [--window-ms W] [--seed S]
 *   qlog_ui_bench reads DB [--n N]
 *
 * fill: N records (default 1,000,000) over the H hours (24) ending a minute ago, pushed in time
 * order through the real writer (nx_qlog: rings, packing, blocks, aggregates) into DB, one
 * nx_qlog_flush per W ms of record time (250: the writer's flush tick, so blocks are what a
 * household's ~12 queries/s make: a few records each). A household day: quiet at night, busy
 * in the evening; 13 clients with shares of about 1/k; names from a pool of 180,000 with a
 * skewed popularity (1 in 20 contains "google"), 26% blocked, 0.5% local, 55% of the rest
 * cached, 10% NXDOMAIN; 95% UDP, 3% TCP, 2% DoH. Prints the writer thread's CPU per record and
 * the file's bytes per record.
 *
 * reads: the reads the web admin makes, each 2 times untimed then up to N (default 30) times
 * through nx_qlog_query / _summary / _history / _top on one reader connection: median, p95 and
 * max ms. This is the querylog's share of each request; `scripts/bench ui-reads` also times them
 * over HTTP against `nxdns serve` (bench/querylog-api.py).
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "filter/result.h"
#include "querylog/querylog.h"

#define N_CLIENTS 13
#define N_NAMES 180000

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd64(void)
{
	uint64_t x = rnd_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rnd_state = x;
}

static double rnd01(void)
{
	return (double)(rnd64() >> 11) / 9007199254740992.0;
}

static void usage(void)
{
	fprintf(stderr, "usage: qlog_ui_bench fill DB [--records N] [--hours H] [--window-ms W]"
			" [--seed S]\n       qlog_ui_bench reads DB [--n N]\n");
	exit(2);
}

/* ---- fill ---- */

static unsigned pick_client(const double *cum)
{
	double u = rnd01() * cum[N_CLIENTS - 1];
	for (unsigned i = 0; i < N_CLIENTS; i++) {
		if (u < cum[i]) {
			return i;
		}
	}
	return N_CLIENTS - 1;
}

static void make_rec(struct nx_qlog_rec *r, int64_t ts, const double *ccum)
{
	memset(r, 0, sizeof(*r));
	r->ts_ms = ts;
	r->duration_us = (uint32_t)(50 + rnd64() % 30000);
	unsigned c = pick_client(ccum);
	if (c < 12) {
		uint8_t a[4] = {192, 168, 1, (uint8_t)(10 + c)};
		r->family = AF_INET;
		memcpy(r->client, a, 4);
	} else {
		uint8_t a[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2};
		r->family = AF_INET6;
		memcpy(r->client, a, 16);
	}
	unsigned p = (unsigned)(rnd64() % 100);
	r->proto = p < 95 ? NX_QLOG_PROTO_UDP : p < 98 ? NX_QLOG_PROTO_TCP : NX_QLOG_PROTO_DOH;
	r->qtype = (rnd64() & 3) ? 1 : 28;
	/* popularity: u^4 puts most queries on the first few thousand names */
	double u = rnd01();
	unsigned n = (unsigned)(N_NAMES * u * u * u * u);
	static const char *const sld[] = {"cdn", "api", "static", "img", "edge", "mail", "www"};
	if (n % 20 == 7) {
		snprintf(r->name, sizeof(r->name), "%s%u.google.com", sld[n % 7], n);
	} else {
		snprintf(r->name, sizeof(r->name), "%s%u.site%u.example", sld[n % 7], n, n % 9973);
	}
	unsigned d = (unsigned)(rnd64() % 1000);
	if (n % 100 < 26) {
		r->action = NX_QLOG_ACT_BLOCK;
		r->reason = n % 3 ? NX_FILTER_R_blocklist_domain : NX_FILTER_R_blocklist_wildcard;
		r->upstream = -1;
		snprintf(r->matched, sizeof(r->matched), "%s", r->name);
		snprintf(r->source, sizeof(r->source), "%s", n & 1 ? "hagezi_pro" : "stevenblack");
		snprintf(r->answer, sizeof(r->answer), "A 0.0.0.0");
	} else if (d < 5) {
		r->action = NX_QLOG_ACT_LOCAL;
		r->reason = NX_FILTER_R_local_record;
		r->upstream = -1;
		snprintf(r->answer, sizeof(r->answer), "A 192.168.1.2");
	} else {
		r->cached = d < 555;
		r->upstream = r->cached ? -1 : (int16_t)(d & 1);
		if (d % 10 == 9) {
			r->rcode = 3;
		} else {
			snprintf(r->answer, sizeof(r->answer), "A 198.51.100.%u", n % 250);
		}
	}
}

static uint64_t thread_cpu_ns(const char *comm)
{
	DIR *dir = opendir("/proc/self/task");
	uint64_t ns = 0;
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		char path[300], name[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f) {
			continue;
		}
		bool is = fgets(name, sizeof(name), f) && !strncmp(name, comm, strlen(comm));
		fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
		if (is && (f = fopen(path, "r"))) {
			if (fscanf(f, "%" SCNu64, &ns) != 1) {
				ns = 0;
			}
			fclose(f);
		}
	}
	if (dir) {
		closedir(dir);
	}
	return ns;
}

static uint64_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int fill(const char *db, uint64_t records, double hours, unsigned window_ms)
{
	struct nx_qlog_params p;
	nx_qlog_params_default(&p);
	p.path = db;
	p.producers = 1;
	struct nx_qlog *q = NULL;
	int rc = nx_qlog_new(&p, &q);
	if (rc || nx_qlog_start(q)) {
		fprintf(stderr, "qlog_ui_bench: cannot open %s (%d)\n", db, rc);
		return 1;
	}
	unsigned n_min = (unsigned)(hours * 60);
	int64_t end_ms = nx_now_wall_ms() - 60000;
	int64_t start_ms = (end_ms - (int64_t)n_min * 60000) / 60000 * 60000;
	double ccum[N_CLIENTS], acc = 0;
	for (unsigned i = 0; i < N_CLIENTS; i++) {
		ccum[i] = (acc += 1.0 / (i + 1));
	}
	/* records per minute: the day's curve */
	double *w = calloc(n_min, sizeof(*w)), tot = 0;
	for (unsigned m = 0; m < n_min; m++) {
		double h = fmod((double)(start_ms + (int64_t)m * 60000) / 3600000.0, 24.0);
		w[m] = 0.25 + 0.75 * pow(0.5 - 0.5 * cos(2 * M_PI * (h - 4) / 24), 1.5);
		tot += w[m];
	}
	int64_t *ts = malloc(4096 * sizeof(*ts));
	uint64_t pushed = 0, flushes = 0;
	uint64_t cpu0 = thread_cpu_ns("nx-qlog"), t0 = nx_now_mono_us();
	for (unsigned m = 0; m < n_min && !rc; m++) {
		uint64_t k = (uint64_t)((double)records * w[m] / tot + 0.5);
		k = m + 1 == n_min ? (records > pushed ? records - pushed : 0) : k;
		k = k > 4096 ? 4096 : k;
		/* times within the minute, in order */
		for (uint64_t i = 0; i < k; i++) {
			ts[i] = start_ms + (int64_t)m * 60000 + (int64_t)(rnd64() % 60000);
		}
		for (uint64_t i = 1; i < k; i++) {
			for (uint64_t j = i; j > 0 && ts[j - 1] > ts[j]; j--) {
				int64_t t = ts[j];
				ts[j] = ts[j - 1];
				ts[j - 1] = t;
			}
		}
		for (uint64_t i = 0; i < k && !rc; i++) {
			struct nx_qlog_rec r;
			make_rec(&r, ts[i], ccum);
			nx_qlog_push(q, 0, &r);
			pushed++;
			bool last = i + 1 == k || ts[i + 1] / window_ms != ts[i] / window_ms;
			if (last) {
				rc = nx_qlog_flush(q, 0, 60000);
				flushes++;
			}
		}
	}
	uint64_t us = nx_now_mono_us() - t0, cpu = thread_cpu_ns("nx-qlog") - cpu0;
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	nx_qlog_free(q);
	free(w);
	free(ts);
	char wal[4200];
	snprintf(wal, sizeof(wal), "%s-wal", db);
	uint64_t bytes = file_size(db) + file_size(wal);
	printf("{\"records\": %" PRIu64 ", \"written\": %" PRIu64 ", \"dropped\": %" PRIu64
	       ", \"transactions\": %" PRIu64 ", \"hours\": %.1f, \"window_ms\": %u, \"seconds\": "
	       "%.1f, \"writer_cpu_us_per_record\": %.2f, \"db_bytes\": %" PRIu64
	       ", \"bytes_per_record\": %.1f, \"flush_rc\": %d}\n",
	       pushed, st.written, st.dropped_oldest, flushes, hours, window_ms, (double)us / 1e6,
	       st.written ? (double)cpu / 1e3 / (double)st.written : 0.0, bytes,
	       st.written ? (double)bytes / (double)st.written : 0.0, rc);
	return rc || st.written != pushed ? 1 : 0;
}

/* ---- reads ---- */

enum read_kind { R_QUERY, R_SUMMARY, R_HISTORY, R_TOP };

struct read_case {
	const char *label;
	enum read_kind kind;
	struct nx_qlog_filter f;
	enum nx_qlog_top_kind top;
	bool day; /* from = now - 24 h (the dashboard's window) */
	bool page2;
};

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int run_read(struct nx_qlog_reader *r, const struct read_case *c, const char *cursor,
		    json_t **out)
{
	int64_t now = nx_now_wall_ms(), from = c->day ? now - 86400000 : 0;
	const char *bad = NULL;
	switch (c->kind) {
	case R_QUERY: {
		struct nx_qlog_filter f = c->f;
		f.cursor = cursor;
		return nx_qlog_query(r, &f, out, &bad);
	}
	case R_SUMMARY:
		return nx_qlog_summary(r, from, 0, out);
	case R_HISTORY:
		return nx_qlog_history(r, from, now, 3600, out, &bad);
	case R_TOP:
		return nx_qlog_top(r, c->top, from, 0, 10, out, &bad);
	}
	return -1;
}

static int reads(const char *db, unsigned n)
{
	struct nx_qlog_reader *r = NULL;
	if (nx_qlog_reader_open(db, &r)) {
		fprintf(stderr, "qlog_ui_bench: cannot open %s\n", db);
		return 1;
	}
	int64_t now = nx_now_wall_ms();
	const struct read_case cases[] = {
	    {"queries: first page", R_QUERY, {.limit = 100}},
	    {"queries: page 2", R_QUERY, {.limit = 100}, .page2 = true},
	    {"queries: name matching nothing", R_QUERY, {.limit = 100, .name = "no-such-label"}},
	    {"queries: name google", R_QUERY, {.limit = 100, .name = "google"}},
	    {"queries: client 192.168.1.10", R_QUERY, {.limit = 100, .client = "192.168.1.10"}},
	    {"queries: client fd00::1:2", R_QUERY, {.limit = 100, .client = "fd00::1:2"}},
	    {"queries: status=blocked", R_QUERY, {.limit = 100, .status = NX_QLOG_STATUS_BLOCKED}},
	    {"queries: status=local", R_QUERY, {.limit = 100, .status = NX_QLOG_STATUS_LOCAL}},
	    {"queries: protocol=tcp", R_QUERY, {.limit = 100, .protos = 1u << NX_QLOG_PROTO_TCP}},
	    {"queries: 1 h window 12 h ago",
	     R_QUERY,
	     {.limit = 100, .from_ms = now - 13 * 3600000LL, .to_ms = now - 12 * 3600000LL}},
	    {"stats/summary 24 h", R_SUMMARY, .day = true},
	    {"stats/history 24 h (1 h steps)", R_HISTORY, .day = true},
	    {"stats/top domains 24 h", R_TOP, .top = NX_QLOG_TOP_DOMAINS, .day = true},
	    {"stats/top blocked 24 h", R_TOP, .top = NX_QLOG_TOP_BLOCKED, .day = true},
	    {"stats/top clients 24 h", R_TOP, .top = NX_QLOG_TOP_CLIENTS, .day = true},
	};
	double *t = calloc(n + 2, sizeof(*t));
	int fails = 0;
	printf("[");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct read_case *c = &cases[i];
		char cursor[64] = "";
		if (c->page2) {
			json_t *o = NULL;
			if (run_read(r, c, NULL, &o) == 0) {
				const char *nc = json_string_value(json_object_get(o, "next_cursor"));
				snprintf(cursor, sizeof(cursor), "%s", nc ? nc : "");
			}
			json_decref(o);
		}
		size_t items = 0;
		unsigned done = 0;
		for (unsigned k = 0; k < n + 2; k++) {
			json_t *o = NULL;
			uint64_t t0 = nx_now_mono_us();
			int rc = run_read(r, c, cursor[0] ? cursor : NULL, &o);
			uint64_t dt = nx_now_mono_us() - t0;
			if (rc) {
				fprintf(stderr, "qlog_ui_bench: %s: %d\n", c->label, rc);
				fails++;
				break;
			}
			json_t *it = json_object_get(o, c->kind == R_HISTORY ? "points" : "items");
			items = json_array_size(it);
			json_decref(o);
			if (k >= 2) {
				t[done++] = (double)dt / 1000.0;
			}
		}
		if (!done) {
			continue;
		}
		qsort(t, done, sizeof(*t), cmp_d);
		printf("%s\n {\"case\": \"%s\", \"n\": %u, \"items\": %zu, \"median_ms\": %.2f, "
		       "\"p95_ms\": %.2f, \"max_ms\": %.2f}",
		       i ? "," : "", c->label, done, items, t[done / 2],
		       t[(size_t)(0.95 * (done - 1) + 0.5)], t[done - 1]);
		fflush(stdout);
	}
	/* the roll's answer must be the sum of agg_top's, key for key */
	for (int k = 0; k < 3; k++) {
		json_t *a = NULL, *b = NULL;
		const char *bad = NULL;
		int64_t from = nx_now_wall_ms() - 86400000;
		nx_qlog_reader_no_roll(r, false);
		int ra = nx_qlog_top(r, (enum nx_qlog_top_kind)k, from, 0, 100, &a, &bad);
		nx_qlog_reader_no_roll(r, true);
		int rb = nx_qlog_top(r, (enum nx_qlog_top_kind)k, from, 0, 100, &b, &bad);
		nx_qlog_reader_no_roll(r, false);
		bool same = !ra && !rb && json_equal(a, b);
		printf(",\n {\"case\": \"check: top kind %d (100 keys) from agg_roll == from agg_top\","
		       " \"ok\": %s}",
		       k, same ? "true" : "false");
		fails += !same;
		json_decref(a);
		json_decref(b);
	}
	printf("\n]\n");
	free(t);
	nx_qlog_reader_close(r);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		usage();
	}
	const char *mode = argv[1], *db = argv[2];
	uint64_t records = 1000000;
	double hours = 24;
	unsigned window_ms = 250, n = 30;
	for (int i = 3; i < argc; i++) {
		if (i + 1 >= argc) {
			usage();
		}
		const char *a = argv[i], *v = argv[++i];
		if (!strcmp(a, "--records")) {
			records = strtoull(v, NULL, 10);
		} else if (!strcmp(a, "--hours")) {
			hours = atof(v);
		} else if (!strcmp(a, "--window-ms")) {
			window_ms = (unsigned)atoi(v);
		} else if (!strcmp(a, "--seed")) {
			rnd_state ^= strtoull(v, NULL, 10) * 0x2545f4914f6cdd1dull;
		} else if (!strcmp(a, "--n")) {
			n = (unsigned)atoi(v);
		} else {
			usage();
		}
	}
	if (!strcmp(mode, "fill") && records && hours > 0 && window_ms) {
		return fill(db, records, hours, window_ms);
	}
	if (!strcmp(mode, "reads") && n) {
		return reads(db, n);
	}
	usage();
}

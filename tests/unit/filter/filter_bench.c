/*
 * Not a test: the driver bench/filter-bench.sh runs (also usable by hand).
 *
 *   filter_bench compile|snapshot-build|lookup-snapshot ...   the CLI entries (src/cli)
 *   filter_bench lookups SNAPSHOT QUERIES [LABELS] [--side DIR NAME...]
 *       QUERIES: dnsperf input ("name TYPE" per line). Matches every name against all
 *       sources on one core for ~3 s and prints lookups/sec; with LABELS (the workload's
 *       .labels.tsv) also prints, per category, how many names got block / allow / none.
 *       --side: decide through nx_filter_lists_decide (snapshot + the side structure
 *       loaded from DIR/NAME.side, NAME in snapshot source order) instead of the bare
 *       snapshot matcher, and print the side structure's figures.
 *   filter_bench compare SNAPSHOT QUERIES ROUNDS --side DIR NAME...
 *       The cost of the side structure in one process: each round runs the whole workload
 *       through the snapshot's text matcher, its wire matcher and nx_filter_lists_decide
 *       (snapshot + side), and prints ns per query in thread CPU time (what a loaded, shared
 *       machine distorts least: preemption is not counted) with the ratios; then the medians.
 *   filter_bench decisions SNAPSHOT QUERIES --side DIR NAME...
 *       The differential: one line per decision with every field of the result, for each
 *       query as written, in a mixed-case copy (wire bytes upper-cased alternately) and as
 *       AAAA; diff the output of two builds to show a change keeps every decision.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ledger.h"
#include "dns/wire.h"
#include "filter/lists.h"
#include "filter/snapshot.h"

int nx_cli_compile(int argc, char **argv);
int nx_cli_snapshot_build(int argc, char **argv);
int nx_cli_lookup_snapshot(int argc, char **argv);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This thread's CPU time: on a shared machine the wall clock also counts other processes'
 * time slices on the pinned core; CPU time does not (their cache pollution stays). */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct query {
	char *name;
	size_t len;
	char category[32];
	uint8_t wire[256]; /* for the lists path */
	size_t wlen;
	uint16_t qtype;
};

static const struct nx_filter_side *g_side; /* NULL: bare snapshot matcher */

static enum nx_filter_action match(const struct nx_filter_snap *s, const struct query *q,
				   struct nx_filter_result *r)
{
	if (!g_side) {
		return nx_filter_snap_match(s, q->name, q->len, ~0ull, r);
	}
	struct nx_filter_qctx c = {
	    .wire = q->wire, .wlen = q->wlen, .qtype = q->qtype, .eligible = ~0ull};
	return nx_filter_lists_decide(s, g_side, &c, r);
}

static long vm_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			v = strtol(line + kl + 1, NULL, 10);
		}
	}
	if (f) {
		fclose(f);
	}
	return v;
}

/* --side DIR NAME... at argv[i]: load the side structure and print its figures. */
static int load_side(int argc, char **argv, int i, struct nx_filter_side **out)
{
	static struct nx_filter_snap_source src[NX_FILTER_SOURCES_MAX];
	unsigned ns = 0;
	for (int j = i + 2; j < argc && ns < NX_FILTER_SOURCES_MAX; j++) {
		src[ns++] = (struct nx_filter_snap_source){argv[j], argv[i + 1]};
	}
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	double t0 = now();
	if (nx_filter_side_open(src, ns, out) != 0) {
		fprintf(stderr, "cannot load the side structure\n");
		return 1;
	}
	double ms = (now() - t0) * 1e3;
	nx_ledger_read(rows);
	struct nx_filter_side_stats st;
	nx_filter_side_stats(*out, &st);
	printf("side structure: %llu rules (%llu by name, %llu regex/pattern of which %llu "
	       "without a prefilter literal and %llu with one no DNS name holds, %llu "
	       "rewrites/hosts answers), %llu badfilter cancelled %llu, refused %llu; %llu B "
	       "counted, %lld B on NX_OWNER_filter_side; loaded in %.1f ms\n",
	       (unsigned long long)st.rules, (unsigned long long)st.named,
	       (unsigned long long)st.regexes, (unsigned long long)st.unfiltered,
	       (unsigned long long)st.never, (unsigned long long)st.rewrites,
	       (unsigned long long)st.badfilter, (unsigned long long)st.cancelled,
	       (unsigned long long)st.refused, (unsigned long long)st.bytes,
	       (long long)rows[NX_OWNER_filter_side].bytes, ms);
	printf("prefilter automaton: %llu states (%llu with a full row), %llu B of the side's\n",
	       (unsigned long long)st.ac_states, (unsigned long long)st.ac_dense,
	       (unsigned long long)st.ac_bytes);
	return 0;
}

/* QUERIES (dnsperf input) -> lower-case text and wire names; *n gets the count. */
static struct query *load_queries(const char *path, size_t *n_out)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		return NULL;
	}
	size_t n = 0, cap = 1 << 16;
	struct query *q = malloc(cap * sizeof(*q));
	char line[1100];
	while (fgets(line, sizeof(line), f)) {
		char *sp = strpbrk(line, " \t\r\n");
		if (sp) {
			*sp = '\0';
		}
		size_t len = strlen(line);
		if (!len) {
			continue;
		}
		for (size_t i = 0; i < len; i++) {
			line[i] = (char)(line[i] >= 'A' && line[i] <= 'Z' ? line[i] + 32 : line[i]);
		}
		if (n == cap) {
			cap *= 2;
			q = realloc(q, cap * sizeof(*q));
		}
		q[n].name = strdup(line);
		q[n].len = len;
		q[n].category[0] = '\0';
		int wl = nx_dns_name_from_text(line, q[n].wire);
		q[n].wlen = wl > 0 ? (size_t)wl : 1;
		if (wl <= 0) {
			q[n].wire[0] = 0;
		}
		q[n].qtype = 1;
		n++;
	}
	fclose(f);
	*n_out = n;
	return q;
}

static void free_queries(struct query *q, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(q[i].name);
	}
	free(q);
}


static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The snapshot, the side rules named after argv[side_at] ("--side DIR NAME...") and the
 * queries in argv[2]: what compare and decisions both start from. */
struct inputs {
	struct nx_filter_snap *snap;
	struct nx_filter_side *side;
	struct query *q;
	size_t n;
};

static int open_inputs(int argc, char **argv, int side_at, struct inputs *in)
{
	*in = (struct inputs){0};
	if (nx_filter_snap_open(argv[1], &in->snap) != 0) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	if (load_side(argc, argv, side_at, &in->side) != 0) {
		return 1;
	}
	in->q = load_queries(argv[2], &in->n);
	return in->q ? 0 : 1;
}

static void close_inputs(struct inputs *in)
{
	free_queries(in->q, in->n);
	nx_filter_side_free(in->side);
	nx_filter_snap_free(in->snap);
	nx_filter_lists_thread_done();
}

static int compare(int argc, char **argv)
{
	if (argc < 6 || strcmp(argv[4], "--side") != 0) {
		fprintf(stderr, "usage: filter_bench compare SNAPSHOT QUERIES ROUNDS --side DIR "
				"NAME...\n");
		return 2;
	}
	struct inputs in;
	int rounds = atoi(argv[3]);
	if (open_inputs(argc, argv, 4, &in) != 0 || in.n == 0 || rounds < 1 || rounds > 64) {
		return 1;
	}
	struct nx_filter_snap *s = in.snap;
	struct nx_filter_side *side = in.side;
	struct query *q = in.q;
	size_t n = in.n;
	static const char *const what[3] = {"snapshot text matcher", "snapshot wire matcher",
					    "nx_filter_lists_decide (snapshot + side)"};
	double ns[3][64];
	unsigned long blocked[3] = {0};
	struct nx_filter_result r;
	for (int round = 0; round < rounds; round++) {
		for (int v = 0; v < 3; v++) {
			/* whole passes for at least 1 s of CPU time */
			unsigned long done = 0;
			double t0 = cpu_now(), t;
			do {
				for (size_t i = 0; i < n; i++) {
					enum nx_filter_action a;
					if (v == 0) {
						a = nx_filter_snap_match(s, q[i].name, q[i].len,
									 ~0ull, &r);
					} else if (v == 1) {
						a = nx_filter_snap_match_wire(s, q[i].wire,
									      q[i].wlen, ~0ull, &r);
					} else {
						struct nx_filter_qctx c = {.wire = q[i].wire,
									   .wlen = q[i].wlen,
									   .qtype = q[i].qtype,
									   .eligible = ~0ull};
						a = nx_filter_lists_decide(s, side, &c, &r);
					}
					blocked[v] += a == NX_FILTER_ACT_BLOCK;
				}
				done += n;
				t = cpu_now() - t0;
			} while (t < 1.0);
			ns[v][round] = t * 1e9 / (double)done;
		}
		printf("round %d: text %.0f ns, wire %.0f ns, decide %.0f ns per query (CPU time); "
		       "decide / text %.2f, decide / wire %.2f\n",
		       round + 1, ns[0][round], ns[1][round], ns[2][round],
		       ns[2][round] / ns[0][round], ns[2][round] / ns[1][round]);
	}
	for (int v = 0; v < 3; v++) {
		qsort(ns[v], (size_t)rounds, sizeof(double), cmp_double);
		printf("median of %d rounds: %.0f ns per query [%s] (min %.0f, max %.0f)\n", rounds,
		       ns[v][rounds / 2], what[v], ns[v][0], ns[v][rounds - 1]);
	}
	(void)blocked;
	close_inputs(&in);
	return 0;
}

static int decisions(int argc, char **argv)
{
	if (argc < 5 || strcmp(argv[3], "--side") != 0) {
		fprintf(stderr, "usage: filter_bench decisions SNAPSHOT QUERIES --side DIR NAME...\n");
		return 2;
	}
	struct inputs in;
	if (open_inputs(argc, argv, 3, &in) != 0) {
		return 1;
	}
	struct nx_filter_snap *s = in.snap;
	struct nx_filter_side *side = in.side;
	struct query *q = in.q;
	size_t n = in.n;
	for (size_t i = 0; i < n; i++) {
		uint8_t mixed[256];
		memcpy(mixed, q[i].wire, q[i].wlen);
		for (size_t k = 0; k < q[i].wlen; k += 2) {
			if (mixed[k] >= 'a' && mixed[k] <= 'z') {
				mixed[k] = (uint8_t)(mixed[k] - 32);
			}
		}
		for (int v = 0; v < 3; v++) {
			struct nx_filter_qctx c = {.wire = v == 1 ? mixed : q[i].wire,
						   .wlen = q[i].wlen,
						   .qtype = v == 2 ? 28 : q[i].qtype,
						   .eligible = ~0ull};
			struct nx_filter_result r;
			enum nx_filter_action a = nx_filter_lists_decide(s, side, &c, &r);
			printf("%zu.%d %d %d %d %d %d %u %u %u %d\n", i, v, (int)a, r.action, r.reason,
			       r.source, r.rule, r.matched_off, r.matched_len, r.rewrite,
			       r.side_rule);
		}
	}
	close_inputs(&in);
	return 0;
}

static int lookups(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: filter_bench lookups SNAPSHOT QUERIES [LABELS]\n");
		return 2;
	}
	struct nx_filter_snap *s = NULL;
	if (nx_filter_snap_open(argv[1], &s) != 0) {
		fprintf(stderr, "cannot open %s\n", argv[1]);
		return 1;
	}
	struct nx_filter_side *side = NULL;
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--side") != 0 || i + 1 >= argc) {
			continue;
		}
		if (load_side(argc, argv, i, &side) != 0) {
			return 1;
		}
		g_side = side;
		argc = i; /* LABELS, if any, come before --side */
		break;
	}
	size_t n = 0;
	struct query *q = load_queries(argv[2], &n);
	if (!q) {
		return 1;
	}
	char line[1100];
	FILE *f;
	if (argc > 3 && (f = fopen(argv[3], "r"))) {
		size_t i = 0;
		while (fgets(line, sizeof(line), f) && i < n) {
			if (line[0] == '#') {
				continue;
			}
			char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
			char *t3 = t2 ? strpbrk(t2 + 1, "\t\n") : NULL;
			if (t2 && t3) {
				*t3 = '\0';
				snprintf(q[i].category, sizeof(q[i].category), "%s", t2 + 1);
			}
			i++;
		}
		fclose(f);
	}
	/* accuracy per category */
	struct {
		char name[32];
		unsigned long n, block, allow, none;
	} cats[16];
	int ncats = 0;
	struct nx_filter_result r;
	for (size_t i = 0; i < n && argc > 3; i++) {
		int c = 0;
		while (c < ncats && strcmp(cats[c].name, q[i].category) != 0) {
			c++;
		}
		if (c == ncats && ncats < 16) {
			memset(&cats[c], 0, sizeof(cats[c]));
			snprintf(cats[c].name, sizeof(cats[c].name), "%s", q[i].category);
			ncats++;
		}
		enum nx_filter_action a = match(s, &q[i], &r);
		if (g_side && r.side_rule >= 0 && strncmp(q[i].category, "blocked", 7) == 0 &&
		    a != NX_FILTER_ACT_BLOCK) {
			size_t tl = 0;
			const char *t = nx_filter_side_rule_text(g_side, r.side_rule, &tl);
			printf("  %s %s: %s by side rule '%.*s' (source %d)\n", q[i].category,
			       q[i].name, nx_filter_action_name(a), (int)tl, t, r.source);
		}
		cats[c].n++;
		cats[c].block += a == NX_FILTER_ACT_BLOCK;
		cats[c].allow += a == NX_FILTER_ACT_ALLOW;
		cats[c].none += a == NX_FILTER_ACT_NONE;
	}
	for (int c = 0; c < ncats; c++) {
		printf("category %-28s %7lu queries: block %7lu  allow %6lu  none %7lu\n",
		       cats[c].name, cats[c].n, cats[c].block, cats[c].allow, cats[c].none);
	}
	/* throughput: whole workload, repeated for >= 3 s, one core */
	unsigned long done = 0, blocked = 0;
	double t0 = now(), t, c0 = cpu_now();
	do {
		for (size_t i = 0; i < n; i++) {
			blocked += match(s, &q[i], &r) == NX_FILTER_ACT_BLOCK;
		}
		done += n;
		t = now() - t0;
	} while (t < 3.0);
	double cpu = cpu_now() - c0;
	printf("lookups %lu in %.2f s: %.0f lookups/s on one core (%.0f ns each), blocked %.1f%%, "
	       "thread CPU %.0f ns each [%s]\n",
	       done, t, (double)done / t, t * 1e9 / (double)done,
	       100.0 * (double)blocked / (double)done, cpu * 1e9 / (double)done,
	       side ? "nx_filter_lists_decide: snapshot + side structure" : "snapshot matcher");
	printf("snapshot %llu entries, %llu bytes (%.2f B/entry), k=%u, FP bound per name %.3g; "
	       "%llu names, %llu source sets; "
	       "VmRSS %ld KiB, VmHWM %ld KiB (includes the %zu loaded query names)\n",
	       (unsigned long long)nx_filter_snap_entries(s),
	       (unsigned long long)nx_filter_snap_bytes(s),
	       (double)nx_filter_snap_bytes(s) / (double)nx_filter_snap_entries(s),
	       nx_filter_snap_bucket_bits(s), nx_filter_snap_fp_per_name(s),
	       (unsigned long long)nx_filter_snap_names(s),
	       (unsigned long long)nx_filter_snap_combos(s), vm_kib("VmRSS"),
	       vm_kib("VmHWM"), n);
	free_queries(q, n);
	nx_filter_side_free(side);
	nx_filter_snap_free(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(
		    stderr,
		    "usage: filter_bench compile|snapshot-build|lookup-snapshot|lookups|compare|decisions "
		    "...\n");
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "compile") == 0) {
		return nx_cli_compile(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "snapshot-build") == 0) {
		return nx_cli_snapshot_build(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "lookup-snapshot") == 0) {
		return nx_cli_lookup_snapshot(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "lookups") == 0) {
		return lookups(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "compare") == 0) {
		return compare(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "decisions") == 0) {
		return decisions(argc - 1, argv + 1);
	}
	fprintf(stderr, "unknown command %s\n", cmd);
	return 2;
}

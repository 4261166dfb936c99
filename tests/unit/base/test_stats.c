/*
 * Counters and gauges (src/base/stats.c): per-thread blocks summed on read (registered threads)
 * plus the shared atomic block (unregistered threads), gauges with their high-water mark, and the
 * descriptor table the /metrics exposition walks (one family's rows consecutive).
 * Blocks are process-wide and never freed: the block-exhaustion test runs last.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/stats.h"

#define N_REG 4
#define N_UNREG 2
#define INCS 100000

struct worker {
	bool reg;
	enum nx_stat s;
	int rc;
	pthread_barrier_t *go;
};

static void *count_worker(void *arg)
{
	struct worker *w = arg;
	w->rc = w->reg ? nx_stats_thread_register() : 0;
	pthread_barrier_wait(w->go);
	for (int i = 0; i < INCS; i++) {
		nx_stat_inc(w->s);
	}
	return NULL;
}

static void test_counters_sum_across_threads(void **state)
{
	(void)state;
	const enum nx_stat s = NX_STAT_Q_UDP, other = NX_STAT_Q_TCP;
	uint64_t s0 = nx_stat_read(s), o0 = nx_stat_read(other);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, N_REG + N_UNREG);
	struct worker w[N_REG + N_UNREG];
	pthread_t t[N_REG + N_UNREG];
	for (int i = 0; i < N_REG + N_UNREG; i++) {
		w[i] = (struct worker){.reg = i < N_REG, .s = s, .go = &go};
		assert_int_equal(pthread_create(&t[i], NULL, count_worker, &w[i]), 0);
	}
	for (int i = 0; i < N_REG + N_UNREG; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].rc, 0);
	}
	pthread_barrier_destroy(&go);
	/* registered threads' blocks outlive the threads: their counts stay in the sum */
	assert_int_equal(nx_stat_read(s) - s0, (uint64_t)(N_REG + N_UNREG) * INCS);
	assert_int_equal(nx_stat_read(other), o0);
}

static void test_add_and_register_idempotent(void **state)
{
	(void)state;
	const enum nx_stat s = NX_STAT_R_CACHED;
	uint64_t s0 = nx_stat_read(s);
	nx_stat_add(s, 41); /* unregistered (atomic path) */
	nx_stat_inc(s);
	assert_int_equal(nx_stat_read(s) - s0, 42);
	/* this thread: register (twice is fine) and keep counting on its own block */
	assert_int_equal(nx_stats_thread_register(), 0);
	assert_int_equal(nx_stats_thread_register(), 0);
	nx_stat_add(s, 1000);
	nx_stat_add(s, 0);
	assert_int_equal(nx_stat_read(s) - s0, 1042);
}

static void test_gauges_and_peaks(void **state)
{
	(void)state;
	const enum nx_gauge g = NX_GAUGE_TCP_CONNS;
	int64_t v0 = nx_gauge_read(g), p0 = nx_gauge_peak(g);
	assert_true(p0 >= v0);
	nx_gauge_add(g, 5);
	assert_int_equal(nx_gauge_read(g), v0 + 5);
	int64_t p5 = nx_gauge_peak(g);
	assert_true(p5 >= v0 + 5);
	nx_gauge_add(g, -3);
	assert_int_equal(nx_gauge_read(g), v0 + 2);
	assert_int_equal(nx_gauge_peak(g), p5); /* a peak never decreases */
	nx_gauge_add(g, 1);
	assert_int_equal(nx_gauge_peak(g), p5);
	nx_gauge_add(g, 10);
	assert_int_equal(nx_gauge_read(g), v0 + 13);
	assert_int_equal(nx_gauge_peak(g), NX_MAX(p5, v0 + 13));
	nx_gauge_add(g, -13);
	assert_int_equal(nx_gauge_read(g), v0);
	assert_true(nx_gauge_peak(g) >= v0 + 13);
	/* other gauges untouched */
	assert_int_equal(nx_gauge_read(NX_GAUGE_PERMITS_USED), 0);
}

#define G_THREADS 4
#define G_ROUNDS 50000

static void *gauge_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < G_ROUNDS; i++) {
		nx_gauge_add(NX_GAUGE_IN_FLIGHT, 1);
		nx_gauge_add(NX_GAUGE_IN_FLIGHT, -1);
	}
	return NULL;
}

/* Concurrent +1/-1: the value comes back to its start; the peak saw at least one and at most
 * one per thread (each thread holds at most one at a time). */
static void test_gauge_concurrent(void **state)
{
	(void)state;
	int64_t v0 = nx_gauge_read(NX_GAUGE_IN_FLIGHT);
	assert_int_equal(v0, 0);
	assert_int_equal(nx_gauge_peak(NX_GAUGE_IN_FLIGHT), 0);
	pthread_t t[G_THREADS];
	for (int i = 0; i < G_THREADS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, gauge_worker, NULL), 0);
	}
	for (int i = 0; i < G_THREADS; i++) {
		pthread_join(t[i], NULL);
	}
	assert_int_equal(nx_gauge_read(NX_GAUGE_IN_FLIGHT), 0);
	int64_t peak = nx_gauge_peak(NX_GAUGE_IN_FLIGHT);
	assert_true(peak >= 1);
	assert_true(peak <= G_THREADS);
}

static bool is_metric_name(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || *s == '_')) {
		return false;
	}
	for (; *s; s++) {
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) {
			return false;
		}
	}
	return true;
}

static void test_descriptors(void **state)
{
	(void)state;
	for (int i = 0; i < NX_STAT__COUNT; i++) {
		const struct nx_stat_desc *d = nx_stat_desc((enum nx_stat)i);
		assert_non_null(d);
		assert_non_null(d->family);
		assert_non_null(d->labels);
		assert_non_null(d->help);
		assert_true(strlen(d->family) > 0);
		assert_true(is_metric_name(d->family));
		assert_true(strncmp(d->family, "nxdns_", 6) == 0);
		/* counters end in _total (Prometheus convention the exposition relies on) */
		size_t n = strlen(d->family);
		assert_true(n > 6 && strcmp(d->family + n - 6, "_total") == 0);
		bool first =
		    i == 0 || strcmp(nx_stat_desc((enum nx_stat)(i - 1))->family, d->family) != 0;
		/* HELP is printed once per family: on its first row, "" after */
		if (first) {
			assert_true(strlen(d->help) > 0);
		} else {
			assert_string_equal(d->help, "");
		}
	}
}

/* The exposition prints TYPE/HELP when the family changes: a family must never reappear after a
 * different one, and rows of one family must differ by their labels. */
static void test_families_consecutive(void **state)
{
	(void)state;
	for (int i = 1; i < NX_STAT__COUNT; i++) {
		const char *prev = nx_stat_desc((enum nx_stat)(i - 1))->family;
		const char *cur = nx_stat_desc((enum nx_stat)i)->family;
		if (strcmp(prev, cur) == 0) {
			continue;
		}
		/* cur starts a new run: it must not have appeared before i - 1 */
		for (int j = 0; j < i; j++) {
			if (strcmp(nx_stat_desc((enum nx_stat)j)->family, cur) == 0) {
				fail_msg("family %s reappears at row %d after another family", cur,
					 i);
			}
		}
	}
	for (int i = 0; i < NX_STAT__COUNT; i++) {
		const struct nx_stat_desc *a = nx_stat_desc((enum nx_stat)i);
		for (int j = i + 1; j < NX_STAT__COUNT; j++) {
			const struct nx_stat_desc *b = nx_stat_desc((enum nx_stat)j);
			if (strcmp(a->family, b->family) == 0) {
				assert_true(strlen(a->labels) > 0);
				assert_string_not_equal(a->labels, b->labels);
			}
		}
	}
	/* the upstream engine's rejection reasons share one family */
	assert_string_equal(nx_stat_desc(NX_STAT_UP_WRONG_ID)->family,
			    nx_stat_desc(NX_STAT_UP_WRONG_SOURCE)->family);
	assert_string_equal(nx_stat_desc(NX_STAT_UP_WRONG_ID)->labels, "reason=\"wrong_id\"");
}

static void test_gauge_descriptors(void **state)
{
	(void)state;
	for (int i = 0; i < NX_GAUGE__COUNT; i++) {
		const char *fam = nx_gauge_family((enum nx_gauge)i);
		const char *help = nx_gauge_help((enum nx_gauge)i);
		assert_non_null(fam);
		assert_non_null(help);
		assert_true(is_metric_name(fam));
		assert_true(strncmp(fam, "nxdns_", 6) == 0);
		assert_true(strlen(help) > 0);
		for (int j = 0; j < i; j++) {
			assert_string_not_equal(fam, nx_gauge_family((enum nx_gauge)j));
		}
		/* no clash with a counter family either */
		for (int s = 0; s < NX_STAT__COUNT; s++) {
			assert_string_not_equal(fam, nx_stat_desc((enum nx_stat)s)->family);
		}
	}
}

#define MANY_THREADS 80 /* more than the block table holds */

struct many {
	int rc;
	pthread_barrier_t *hold;
};

static void *many_worker(void *arg)
{
	struct many *m = arg;
	m->rc = nx_stats_thread_register();
	nx_stat_add(NX_STAT_COALESCED, 3);
	pthread_barrier_wait(m->hold); /* all alive at once */
	return NULL;
}

/* Last: past the block limit registration fails with NX_ELIMIT, and such threads still count
 * (through the shared atomic block). */
static void test_register_limit(void **state)
{
	(void)state;
	uint64_t c0 = nx_stat_read(NX_STAT_COALESCED);
	pthread_barrier_t hold;
	pthread_barrier_init(&hold, NULL, MANY_THREADS);
	struct many m[MANY_THREADS];
	pthread_t t[MANY_THREADS];
	for (int i = 0; i < MANY_THREADS; i++) {
		m[i] = (struct many){.rc = 1, .hold = &hold};
		assert_int_equal(pthread_create(&t[i], NULL, many_worker, &m[i]), 0);
	}
	int ok = 0, limited = 0;
	for (int i = 0; i < MANY_THREADS; i++) {
		pthread_join(t[i], NULL);
		ok += m[i].rc == 0;
		limited += m[i].rc == NX_ELIMIT;
	}
	pthread_barrier_destroy(&hold);
	assert_int_equal(ok + limited, MANY_THREADS);
	assert_true(limited > 0);
	assert_true(ok > 0);
	assert_int_equal(nx_stat_read(NX_STAT_COALESCED) - c0, 3u * MANY_THREADS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counters_sum_across_threads),
	    cmocka_unit_test(test_add_and_register_idempotent),
	    cmocka_unit_test(test_gauges_and_peaks),
	    cmocka_unit_test(test_gauge_concurrent),
	    cmocka_unit_test(test_descriptors),
	    cmocka_unit_test(test_families_consecutive),
	    cmocka_unit_test(test_gauge_descriptors),
	    cmocka_unit_test(test_register_limit),
	};
	return cmocka_run_group_tests_name("base_stats", tests, NULL, NULL);
}

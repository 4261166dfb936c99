/*
 * Memory ledger (src/base/ledger.c): charges and uncharges per owner (bytes and live count),
 * realloc accounting, strdup, external charges, failure injection, concurrent use.
 * Every test compares deltas against a snapshot, so the order does not matter.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/ledger.h"

struct snap {
	struct nx_ledger_row r[NX_OWNER__COUNT];
};

static struct snap take(void)
{
	struct snap s;
	nx_ledger_read(s.r);
	return s;
}

static int64_t dbytes(const struct snap *a, enum nx_owner o)
{
	struct snap b = take();
	return b.r[o].bytes - a->r[o].bytes;
}

static int64_t dcount(const struct snap *a, enum nx_owner o)
{
	struct snap b = take();
	return b.r[o].count - a->r[o].count;
}

/* Nothing but `o` moved since `a`. */
static void only_owner_moved(const struct snap *a, enum nx_owner o)
{
	struct snap b = take();
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		if (i == (int)o) {
			continue;
		}
		assert_int_equal(b.r[i].bytes, a->r[i].bytes);
		assert_int_equal(b.r[i].count, a->r[i].count);
	}
}

static void test_alloc_free(void **state)
{
	(void)state;
	struct snap s = take();
	void *p = nx_mem_alloc(NX_OWNER_misc, 1000);
	assert_non_null(p);
	memset(p, 0xab, 1000);
	assert_int_equal(dbytes(&s, NX_OWNER_misc), 1000);
	assert_int_equal(dcount(&s, NX_OWNER_misc), 1);
	only_owner_moved(&s, NX_OWNER_misc);
	void *q = nx_mem_alloc(NX_OWNER_config, 24);
	assert_non_null(q);
	assert_int_equal(dbytes(&s, NX_OWNER_config), 24);
	assert_int_equal(dcount(&s, NX_OWNER_config), 1);
	nx_mem_free(NX_OWNER_misc, p, 1000);
	nx_mem_free(NX_OWNER_config, q, 24);
	assert_int_equal(dbytes(&s, NX_OWNER_misc), 0);
	assert_int_equal(dcount(&s, NX_OWNER_misc), 0);
	assert_int_equal(dbytes(&s, NX_OWNER_config), 0);
	assert_int_equal(dcount(&s, NX_OWNER_config), 0);
	/* free(NULL) is a no-op, whatever size is passed */
	nx_mem_free(NX_OWNER_misc, NULL, 0);
	nx_mem_free(NX_OWNER_misc, NULL, 77);
	assert_int_equal(dbytes(&s, NX_OWNER_misc), 0);
	assert_int_equal(dcount(&s, NX_OWNER_misc), 0);
}

static void test_ledger_calloc(void **state)
{
	(void)state;
	struct snap s = take();
	uint32_t *p = nx_mem_calloc(NX_OWNER_cache_slots, 100, sizeof(uint32_t));
	assert_non_null(p);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(p[i], 0);
	}
	assert_int_equal(dbytes(&s, NX_OWNER_cache_slots), 400);
	assert_int_equal(dcount(&s, NX_OWNER_cache_slots), 1);
	only_owner_moved(&s, NX_OWNER_cache_slots);
	nx_mem_free(NX_OWNER_cache_slots, p, 400);
	assert_int_equal(dbytes(&s, NX_OWNER_cache_slots), 0);
	assert_int_equal(dcount(&s, NX_OWNER_cache_slots), 0);
	/* n * size overflows: NULL, nothing charged */
	assert_null(nx_mem_calloc(NX_OWNER_cache_slots, SIZE_MAX / 2, 4));
	assert_int_equal(dbytes(&s, NX_OWNER_cache_slots), 0);
	assert_int_equal(dcount(&s, NX_OWNER_cache_slots), 0);
}

static void test_ledger_realloc(void **state)
{
	(void)state;
	struct snap s = take();
	/* from NULL: a new allocation */
	char *p = nx_mem_realloc(NX_OWNER_filter_build, NULL, 0, 100);
	assert_non_null(p);
	memset(p, 'a', 100);
	assert_int_equal(dbytes(&s, NX_OWNER_filter_build), 100);
	assert_int_equal(dcount(&s, NX_OWNER_filter_build), 1);
	/* grow: bytes follow, still one allocation, content kept */
	p = nx_mem_realloc(NX_OWNER_filter_build, p, 100, 5000);
	assert_non_null(p);
	assert_int_equal(p[0], 'a');
	assert_int_equal(p[99], 'a');
	assert_int_equal(dbytes(&s, NX_OWNER_filter_build), 5000);
	assert_int_equal(dcount(&s, NX_OWNER_filter_build), 1);
	/* shrink */
	p = nx_mem_realloc(NX_OWNER_filter_build, p, 5000, 10);
	assert_non_null(p);
	assert_int_equal(p[9], 'a');
	assert_int_equal(dbytes(&s, NX_OWNER_filter_build), 10);
	assert_int_equal(dcount(&s, NX_OWNER_filter_build), 1);
	only_owner_moved(&s, NX_OWNER_filter_build);
	nx_mem_free(NX_OWNER_filter_build, p, 10);
	assert_int_equal(dbytes(&s, NX_OWNER_filter_build), 0);
	assert_int_equal(dcount(&s, NX_OWNER_filter_build), 0);
}

static void test_strdup(void **state)
{
	(void)state;
	struct snap s = take();
	const char *src = "upstream.example.";
	char *d = nx_mem_strdup(NX_OWNER_config, src);
	assert_non_null(d);
	assert_ptr_not_equal(d, src);
	assert_string_equal(d, src);
	assert_int_equal(dbytes(&s, NX_OWNER_config), (int64_t)strlen(src) + 1);
	assert_int_equal(dcount(&s, NX_OWNER_config), 1);
	nx_mem_free(NX_OWNER_config, d, strlen(src) + 1);
	char *e = nx_mem_strdup(NX_OWNER_config, "");
	assert_non_null(e);
	assert_string_equal(e, "");
	assert_int_equal(dbytes(&s, NX_OWNER_config), 1);
	nx_mem_free(NX_OWNER_config, e, 1);
	assert_int_equal(dbytes(&s, NX_OWNER_config), 0);
	assert_int_equal(dcount(&s, NX_OWNER_config), 0);
}

static void test_external_charge_and_total(void **state)
{
	(void)state;
	struct snap s = take();
	int64_t t0 = nx_ledger_total();
	nx_ledger_charge(NX_OWNER_snapshot_map, 1 << 20, 1);
	assert_int_equal(dbytes(&s, NX_OWNER_snapshot_map), 1 << 20);
	assert_int_equal(dcount(&s, NX_OWNER_snapshot_map), 1);
	assert_int_equal(nx_ledger_total() - t0, 1 << 20);
	/* the total is the sum of the rows */
	struct snap n = take();
	int64_t sum = 0;
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		sum += n.r[i].bytes;
	}
	assert_int_equal(nx_ledger_total(), sum);
	nx_ledger_charge(NX_OWNER_snapshot_map, -(1 << 20), -1);
	assert_int_equal(dbytes(&s, NX_OWNER_snapshot_map), 0);
	assert_int_equal(dcount(&s, NX_OWNER_snapshot_map), 0);
	assert_int_equal(nx_ledger_total(), t0);
}

static void test_rows_named(void **state)
{
	(void)state;
	struct snap s = take();
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		assert_non_null(s.r[i].name);
		assert_non_null(s.r[i].help);
		assert_true(strlen(s.r[i].name) > 0);
		assert_true(strlen(s.r[i].help) > 0);
		for (int j = 0; j < i; j++) {
			assert_string_not_equal(s.r[i].name, s.r[j].name);
		}
		/* metric label values: lower case, digits, '_' */
		for (const char *p = s.r[i].name; *p; p++) {
			assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
				    *p == '_');
		}
	}
	assert_string_equal(s.r[NX_OWNER_exchange_pool].name, "exchange_pool");
	assert_string_equal(s.r[NX_OWNER_upstream_tcp].name, "upstream_tcp");
}

static void test_fail_after(void **state)
{
	(void)state;
	struct snap s = take();
	nx_mem_fail_after(2);
	void *a = nx_mem_alloc(NX_OWNER_misc, 8);
	void *b = nx_mem_calloc(NX_OWNER_misc, 1, 8);
	void *c = nx_mem_alloc(NX_OWNER_misc, 8);
	void *d = nx_mem_realloc(NX_OWNER_misc, NULL, 0, 8);
	char *e = nx_mem_strdup(NX_OWNER_misc, "x");
	nx_mem_fail_after(-1);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(c);
	assert_null(d);
	assert_null(e);
	/* failures charge nothing */
	assert_int_equal(dbytes(&s, NX_OWNER_misc), 16);
	assert_int_equal(dcount(&s, NX_OWNER_misc), 2);
	nx_mem_free(NX_OWNER_misc, a, 8);
	nx_mem_free(NX_OWNER_misc, b, 8);
	/* -1: never fails again */
	void *f = nx_mem_alloc(NX_OWNER_misc, 8);
	assert_non_null(f);
	nx_mem_free(NX_OWNER_misc, f, 8);
	/* 0: the very next allocation fails; a failed realloc leaves the block and its charge */
	void *g = nx_mem_alloc(NX_OWNER_misc, 32);
	assert_non_null(g);
	nx_mem_fail_after(0);
	assert_null(nx_mem_realloc(NX_OWNER_misc, g, 32, 64));
	nx_mem_fail_after(-1);
	assert_int_equal(dbytes(&s, NX_OWNER_misc), 32);
	nx_mem_free(NX_OWNER_misc, g, 32);
	assert_int_equal(dbytes(&s, NX_OWNER_misc), 0);
	assert_int_equal(dcount(&s, NX_OWNER_misc), 0);
}

#define MT_THREADS 4
#define MT_ROUNDS 20000

static void *mt_worker(void *arg)
{
	enum nx_owner o = (enum nx_owner)(intptr_t)arg;
	for (int i = 0; i < MT_ROUNDS; i++) {
		size_t n = 16 + (size_t)(i % 64);
		void *p = nx_mem_alloc(o, n);
		if (!p) {
			return (void *)1;
		}
		nx_mem_free(o, p, n);
	}
	return NULL;
}

/* Concurrent charges never lose an update: the rows return exactly to where they were. */
static void test_concurrent(void **state)
{
	(void)state;
	struct snap s = take();
	pthread_t t[MT_THREADS];
	for (int i = 0; i < MT_THREADS; i++) {
		/* two threads per owner: same-row contention */
		enum nx_owner o = i % 2 ? NX_OWNER_tls : NX_OWNER_sse_rings;
		assert_int_equal(pthread_create(&t[i], NULL, mt_worker, (void *)(intptr_t)o), 0);
	}
	/* meanwhile this thread holds a charge of its own */
	void *mine = nx_mem_alloc(NX_OWNER_tls, 4096);
	for (int i = 0; i < MT_THREADS; i++) {
		void *rv;
		pthread_join(t[i], &rv);
		assert_null(rv);
	}
	assert_int_equal(dbytes(&s, NX_OWNER_tls), 4096);
	assert_int_equal(dcount(&s, NX_OWNER_tls), 1);
	nx_mem_free(NX_OWNER_tls, mine, 4096);
	assert_int_equal(dbytes(&s, NX_OWNER_tls), 0);
	assert_int_equal(dcount(&s, NX_OWNER_tls), 0);
	assert_int_equal(dbytes(&s, NX_OWNER_sse_rings), 0);
	assert_int_equal(dcount(&s, NX_OWNER_sse_rings), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_alloc_free),
	    cmocka_unit_test(test_ledger_calloc),
	    cmocka_unit_test(test_ledger_realloc),
	    cmocka_unit_test(test_strdup),
	    cmocka_unit_test(test_external_charge_and_total),
	    cmocka_unit_test(test_rows_named),
	    cmocka_unit_test(test_fail_after),
	    cmocka_unit_test(test_concurrent),
	};
	return cmocka_run_group_tests_name("base_ledger", tests, NULL, NULL);
}

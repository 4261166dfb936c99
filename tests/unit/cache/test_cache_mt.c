/*
 * The cache shared by 4 threads (as the workers share it): no crash, no torn entries (a hit
 * always carries the asked name and a tag written for that name), bounds hold while running
 * (a sampler thread reads the stats), the ledger balances after free. Meant to run under the
 * ASan/UBSan build too; TSan-clean by construction (all shared state under locks/atomics).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "base/err.h"
#include "base/ledger.h"
#include "cache/cache.h"
#include "msgbuild.h"

enum { THREADS = 4, NAMES = 400 };

struct run {
	struct nx_cache *c;
	uint32_t size;
	size_t max_pad;
	int ops;
	atomic_uint_fast64_t clock_ms;
	atomic_bool stop;
	atomic_int bad; /* failures seen by workers (cmocka asserts are not thread-safe) */
	atomic_uint_fast64_t hits;
	uint64_t max_live;
	uint64_t max_entries;
};

struct worker {
	struct run *r;
	unsigned id;
	struct tmsg msg;
	uint8_t out[NX_DNS_MSG_MAX];
};

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	uint64_t rng = 0x2545f4914f6cdd1dull * (w->id + 1);
	static uint8_t pad[NX_DNS_MSG_MAX]; /* read-only filler */
	for (int op = 0; op < r->ops; op++) {
		unsigned n = (unsigned)(xorshift(&rng) % NAMES);
		char name[64];
		/* mixed case in the query: keys must still meet */
		snprintf(name, sizeof(name), op & 1 ? "N%u.Example.ORG" : "n%u.example.org", n);
		struct tkey k;
		tkey_init(&k, name, NX_DNS_T_A, (n & 3) == 0, false);
		uint64_t now = atomic_fetch_add(&r->clock_ms, xorshift(&rng) % 50);
		unsigned choice = (unsigned)(xorshift(&rng) % 100);
		if (choice < 40) {
			size_t plen = xorshift(&rng) % (r->max_pad + 1);
			tmsg_start(&w->msg, name, NX_DNS_T_A, NX_DNS_C_IN, 0);
			uint8_t rd[8];
			uint32_t tag = (n << 8) | w->id;
			memcpy(rd, &tag, 4);
			memcpy(rd + 4, &tag, 4);
			tmsg_rr(&w->msg, T_AN, NX_DNS_T_A, 1 + (uint32_t)(xorshift(&rng) % 30), rd,
				8);
			if (plen) {
				tmsg_rr(&w->msg, T_AR, NX_DNS_T_TXT, 60, pad, (uint16_t)plen);
			}
			tmsg_finish(&w->msg);
			int rc = nx_cache_put(r->c, &k.k, w->msg.buf, &w->msg.m, now);
			if (rc != 0 && rc != NX_ELIMIT) {
				atomic_fetch_add(&r->bad, 1);
			}
		} else if (choice < 99) {
			struct nx_dns_msg m;
			struct nx_cache_hit h;
			unsigned fl = choice < 90 ? 0 : NX_CACHE_LOOKUP_STALE;
			int rc =
			    nx_cache_lookup(r->c, &k.k, now, fl, w->out, sizeof(w->out), &m, &h);
			if (rc == 0) {
				atomic_fetch_add(&r->hits, 1);
				uint32_t tag, tag2;
				memcpy(&tag, w->out + m.ttl_off[0] + 6, 4);
				memcpy(&tag2, w->out + m.ttl_off[0] + 10, 4);
				bool ok = m.len == h.len && m.q.name_len == k.k.name_len &&
					  tag == tag2 && (tag >> 8) == n && m.ancount == 1;
				for (unsigned i = 0; ok && i < k.k.name_len; i++) {
					ok = (m.q.name[i] | 0x20) == (k.k.name[i] | 0x20);
				}
				if (!ok) {
					atomic_fetch_add(&r->bad, 1);
				}
			} else if (rc != NX_ENOTFOUND) {
				atomic_fetch_add(&r->bad, 1);
			}
		} else if (w->id == 0 && op % 1000 == 999) {
			nx_cache_flush(r->c);
		}
	}
	return NULL;
}

static void *sample(void *arg)
{
	struct run *r = arg;
	while (!atomic_load(&r->stop)) {
		struct nx_cache_stats s;
		nx_cache_stats(r->c, &s);
		r->max_live = s.live_bytes > r->max_live ? s.live_bytes : r->max_live;
		r->max_entries = s.entries > r->max_entries ? s.entries : r->max_entries;
		sched_yield();
	}
	return NULL;
}

static void run_threads(uint32_t size, uint32_t shards, size_t max_pad, int ops)
{
	struct nx_ledger_row before[NX_OWNER__COUNT], after[NX_OWNER__COUNT];
	nx_ledger_read(before);
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = size;
	p.shards = shards;
	p.stale_window = 60;
	p.prefetch_min_hits = 2;
	p.hash_seed = 7;
	static struct run r;
	memset(&r, 0, sizeof(r));
	r.size = size;
	r.max_pad = max_pad;
	r.ops = ops;
	atomic_store(&r.clock_ms, 1000);
	assert_int_equal(nx_cache_new(&p, &r.c), 0);

	static struct worker w[THREADS];
	pthread_t th[THREADS], sampler;
	assert_int_equal(pthread_create(&sampler, NULL, sample, &r), 0);
	for (unsigned i = 0; i < THREADS; i++) {
		w[i].r = &r;
		w[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
	}
	atomic_store(&r.stop, true);
	assert_int_equal(pthread_join(sampler, NULL), 0);

	assert_int_equal(atomic_load(&r.bad), 0);
	assert_true(atomic_load(&r.hits) > 0);
	struct nx_cache_stats s;
	nx_cache_stats(r.c, &s);
	assert_true(r.max_live <= s.budget_bytes);
	assert_true(r.max_entries <= size);
	assert_true(s.live_bytes <= s.budget_bytes);
	assert_true(s.entries <= size);
	assert_true(s.evictions + s.expired > 0);
	print_message("hits %llu stale %llu misses %llu inserts %llu evictions %llu expired %llu "
		      "no_room %llu prefetch %llu peak live %llu/%llu\n",
		      (unsigned long long)s.hits, (unsigned long long)s.stale_hits,
		      (unsigned long long)s.misses, (unsigned long long)s.inserts,
		      (unsigned long long)s.evictions, (unsigned long long)s.expired,
		      (unsigned long long)s.no_room, (unsigned long long)s.prefetch,
		      (unsigned long long)r.max_live, (unsigned long long)s.budget_bytes);
	nx_ledger_read(after);
	assert_int_equal(after[NX_OWNER_cache_responses].bytes -
			     before[NX_OWNER_cache_responses].bytes,
			 (int64_t)s.live_bytes);
	assert_int_equal(after[NX_OWNER_cache_responses].count -
			     before[NX_OWNER_cache_responses].count,
			 (int64_t)s.entries);
	nx_cache_free(r.c);
	nx_ledger_read(after);
	for (int o = 0; o < NX_OWNER__COUNT; o++) {
		assert_int_equal(after[o].bytes, before[o].bytes);
		assert_int_equal(after[o].count, before[o].count);
	}
}

/* Entry-bound pressure: many small answers over 4 shards. */
static void test_threads_entries(void **state)
{
	run_threads(256, 4, 300, 20000);
}

/* Byte-bound pressure: a 65535-byte budget, answers up to 20 KiB, cross-shard evictions. */
static void test_threads_bytes(void **state)
{
	run_threads(64, 8, 20000, 8000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_threads_entries),
	    cmocka_unit_test(test_threads_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

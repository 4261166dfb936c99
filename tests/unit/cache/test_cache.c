/*
 * Cache unit tests: bounds, eviction order (probation, ghost, CLOCK), admission and TTL rules,
 * allocation failures, keys, the hit view, ledger balance. Time is driven by hand (now_ms).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>

#include "base/err.h"
#include "base/ledger.h"
#include "cache/cache.h"
#include "msgbuild.h"

/* ---- test allocator: cmocka's (leaks fail the test), with injectable failures ---- */

struct talloc {
	struct nx_cache_alloc a;
	long fail_after;     /* -1 never; else successes left before every call fails */
	bool fail_responses; /* fail every response-copy allocation */
	unsigned fail_pct;   /* fail this % of response copies (seeded) */
	uint64_t rng;
	int64_t resp_bytes; /* live bytes charged to cache_responses */
	int64_t resp_peak;
	int64_t slot_bytes;
};

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void *t_alloc(void *ctx, enum nx_owner o, size_t n)
{
	struct talloc *t = ctx;
	if (t->fail_after == 0) {
		return NULL;
	}
	if (t->fail_after > 0) {
		t->fail_after--;
	}
	if (o == NX_OWNER_cache_responses &&
	    (t->fail_responses || (t->fail_pct && xorshift(&t->rng) % 100 < t->fail_pct))) {
		return NULL;
	}
	void *p = test_malloc(n);
	if (p) {
		if (o == NX_OWNER_cache_responses) {
			t->resp_bytes += (int64_t)n;
			if (t->resp_bytes > t->resp_peak) {
				t->resp_peak = t->resp_bytes;
			}
		} else {
			t->slot_bytes += (int64_t)n;
		}
	}
	return p;
}

static void t_free(void *ctx, enum nx_owner o, void *p, size_t n)
{
	struct talloc *t = ctx;
	if (o == NX_OWNER_cache_responses) {
		t->resp_bytes -= (int64_t)n;
	} else {
		t->slot_bytes -= (int64_t)n;
	}
	test_free(p);
}

static void talloc_init(struct talloc *t)
{
	*t = (struct talloc){
	    .a = {t_alloc, t_free, t}, .fail_after = -1, .rng = 88172645463325252ull};
	t->a.ctx = t;
}

static struct nx_cache *mk(struct talloc *t, uint32_t size, uint32_t shards,
			   void (*tweak)(struct nx_cache_params *))
{
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = size;
	p.shards = shards;
	p.hash_seed = 42;
	p.alloc = &t->a;
	if (tweak) {
		tweak(&p);
	}
	struct nx_cache *c = NULL;
	assert_int_equal(nx_cache_new(&p, &c), 0);
	assert_non_null(c);
	return c;
}

/* NOERROR answer for name/qtype: one RR with rdata = tag (4 bytes) + pad bytes. */
static struct tmsg g_msg;
static uint8_t g_out[NX_DNS_MSG_MAX];

static void build_answer(const char *name, uint16_t qtype, uint32_t ttl, uint32_t tag, size_t pad)
{
	static uint8_t rd[NX_DNS_MSG_MAX];
	tmsg_start(&g_msg, name, qtype, NX_DNS_C_IN, 0);
	rd[0] = (uint8_t)(tag >> 24);
	rd[1] = (uint8_t)(tag >> 16);
	rd[2] = (uint8_t)(tag >> 8);
	rd[3] = (uint8_t)tag;
	memset(rd + 4, 'x', pad);
	tmsg_rr(&g_msg, T_AN, qtype, ttl, rd, (uint16_t)(4 + pad));
	tmsg_finish(&g_msg);
}

static int put_tag(struct nx_cache *c, const char *name, uint16_t qtype, uint32_t ttl, uint32_t tag,
		   size_t pad, uint64_t now)
{
	struct tkey k;
	tkey_init(&k, name, qtype, false, false);
	build_answer(name, qtype, ttl, tag, pad);
	return nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, now);
}

static uint32_t rd_tag(const uint8_t *buf, const struct nx_dns_msg *m)
{
	const uint8_t *p = buf + m->ttl_off[0] + 6;
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Returns the tag of a hit, or -1 on a miss. */
static int64_t get_tag(struct nx_cache *c, const char *name, uint16_t qtype, uint64_t now,
		       struct nx_cache_hit *hit)
{
	struct tkey k;
	tkey_init(&k, name, qtype, false, false);
	struct nx_dns_msg m;
	int rc = nx_cache_lookup(c, &k.k, now, 0, g_out, sizeof(g_out), &m, hit);
	if (rc == NX_ENOTFOUND) {
		return -1;
	}
	assert_int_equal(rc, 0);
	return rd_tag(g_out, &m);
}

static struct nx_cache_stats st(struct nx_cache *c)
{
	struct nx_cache_stats s;
	nx_cache_stats(c, &s);
	return s;
}

/* ---- bounds under random sequences ---- */

struct model {
	int64_t tag; /* last successfully stored tag, -1 none */
	uint64_t put_ms;
	uint32_t ttl;
};

static void random_run(uint32_t size, uint32_t shards, unsigned fail_pct, uint64_t seed)
{
	enum { NAMES = 300, OPS = 6000 };
	struct talloc t;
	talloc_init(&t);
	t.fail_pct = fail_pct;
	t.rng = seed ^ 0x9e3779b97f4a7c15ull;
	struct nx_cache *c = mk(&t, size, shards, NULL);
	uint64_t budget = nx_cache_budget_bytes(size);
	static struct model mdl[NAMES];
	for (int i = 0; i < NAMES; i++) {
		mdl[i] = (struct model){.tag = -1};
	}
	uint64_t rng = seed, now = 1000;
	uint32_t next_tag = 1;
	unsigned hits = 0;
	int64_t max_copy = 0;
	for (int op = 0; op < OPS; op++) {
		unsigned r = (unsigned)(xorshift(&rng) % 100);
		unsigned n = (unsigned)(xorshift(&rng) % NAMES);
		char name[64];
		snprintf(name, sizeof(name), "n%u.example.org", n);
		now += xorshift(&rng) % 400;
		if (r < 45) {
			/* mostly small answers, some large ones (up to 16 KiB) */
			size_t pad =
			    xorshift(&rng) % 8 == 0 ? xorshift(&rng) % 16384 : xorshift(&rng) % 400;
			uint32_t ttl = 1 + (uint32_t)(xorshift(&rng) % 120);
			uint32_t tag = next_tag++;
			int rc = put_tag(c, name, NX_DNS_T_A, ttl, tag, pad, now);
			if ((int64_t)nx_cache_stored_size(&g_msg.m) > max_copy) {
				max_copy = (int64_t)nx_cache_stored_size(&g_msg.m);
			}
			if (rc == 0) {
				mdl[n] = (struct model){.tag = tag, .put_ms = now, .ttl = ttl};
			} else {
				assert_true(rc == -ENOMEM || rc == NX_ELIMIT);
			}
		} else {
			struct nx_cache_hit hit;
			int64_t got = get_tag(c, name, NX_DNS_T_A, now, &hit);
			if (got >= 0) {
				hits++;
				/* a hit is the latest stored version, still fresh */
				assert_int_equal(got, mdl[n].tag);
				assert_true(now < mdl[n].put_ms + (uint64_t)mdl[n].ttl * 1000);
				assert_int_equal(hit.ttl,
						 mdl[n].ttl - (now - mdl[n].put_ms) / 1000);
			}
		}
		struct nx_cache_stats s = st(c);
		assert_true(s.live_bytes <= budget);
		assert_true(s.entries <= size);
		/* single-threaded: reserved bytes are exactly the bytes held */
		assert_int_equal((int64_t)s.live_bytes, t.resp_bytes);
	}
	struct nx_cache_stats s = st(c);
	/* the copy is allocated before its bytes are reserved (so a failed allocation leaves the
	 * old entry alone): the allocator's peak is at most one copy above the budget */
	assert_true(t.resp_peak <= (int64_t)budget + max_copy);
	assert_true(t.resp_peak > (int64_t)budget / 2);
	assert_true(s.evictions > 0);
	assert_true(hits > 0);
	if (fail_pct) {
		assert_true(s.alloc_failures > 0);
	}
	nx_cache_free(c);
	assert_int_equal(t.resp_bytes, 0);
	assert_int_equal(t.slot_bytes, 0);
}

static void test_budget_random_floor(void **state)
{
	random_run(16, 1, 0, 1); /* budget = 65535 floor: large answers dominate */
	random_run(64, 4, 0, 2);
}

static void test_budget_random_scaled(void **state)
{
	random_run(512, 0, 0, 3);   /* budget = 256 * 512 = 131072 */
	random_run(1024, 16, 0, 4); /* 16 shards of 64 */
}

static void test_budget_random_alloc_failures(void **state)
{
	random_run(128, 2, 7, 5);
}

/* ---- eviction policy: probation FIFO, ghost, main-queue CLOCK ---- */

/* Probation is a FIFO: its oldest entry leaves, or moves to the main queue if it was hit. */
static void test_probation_fifo(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 4, 1, NULL); /* probation's share: 1 */
	const char *names[] = {"a.test", "b.test", "c.test", "d.test",
			       "e.test", "f.test", "g.test"};
	for (int i = 0; i < 4; i++) {
		assert_int_equal(put_tag(c, names[i], NX_DNS_T_A, 300, (uint32_t)i, 0, 1000), 0);
	}
	/* b and d are hit while on probation */
	assert_int_equal(get_tag(c, "b.test", NX_DNS_T_A, 2000, NULL), 1);
	assert_int_equal(get_tag(c, "d.test", NX_DNS_T_A, 2000, NULL), 3);
	/* e: a (oldest, never hit) goes */
	assert_int_equal(put_tag(c, names[4], NX_DNS_T_A, 300, 4, 0, 3000), 0);
	assert_int_equal(get_tag(c, "a.test", NX_DNS_T_A, 3000, NULL), -1);
	/* f: b moves up, c goes */
	assert_int_equal(put_tag(c, names[5], NX_DNS_T_A, 300, 5, 0, 3000), 0);
	/* g: d moves up, e (new, never hit) goes */
	assert_int_equal(put_tag(c, names[6], NX_DNS_T_A, 300, 6, 0, 3000), 0);
	assert_int_equal(get_tag(c, "c.test", NX_DNS_T_A, 3000, NULL), -1);
	assert_int_equal(get_tag(c, "e.test", NX_DNS_T_A, 3000, NULL), -1);
	assert_int_equal(get_tag(c, "b.test", NX_DNS_T_A, 3000, NULL), 1);
	assert_int_equal(get_tag(c, "d.test", NX_DNS_T_A, 3000, NULL), 3);
	assert_int_equal(get_tag(c, "f.test", NX_DNS_T_A, 3000, NULL), 5);
	assert_int_equal(get_tag(c, "g.test", NX_DNS_T_A, 3000, NULL), 6);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.entries, 4);
	assert_int_equal(s.evictions, 3);
	assert_int_equal(s.inserts, 7);
	assert_int_equal(s.promoted, 2);
	assert_int_equal(s.readmitted, 0);
	nx_cache_free(c);
}

/*
 * A scan of names asked for once (10x the cache) cycles through probation and leaves the
 * main queue's working set alone. Plain CLOCK would give each hot entry one second chance
 * and then evict it.
 */
static void test_scan_resistance(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 100, 1, NULL);
	char name[64];
	for (uint32_t i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "hot%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, i, 0, 1000), 0);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 1000, NULL), i);
	}
	for (uint32_t i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "scan%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 1000 + i, 0, 2000), 0);
	}
	for (uint32_t i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "hot%u.test", i);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 3000, NULL), i);
	}
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.entries, 100);
	assert_int_equal(s.evictions, 950); /* every one of them a scanned name */
	assert_int_equal(s.promoted, 50);
	nx_cache_free(c);
}

/*
 * A key evicted from probation and asked for again goes straight to the main queue (the
 * ghost table remembers it), and a refreshed copy keeps its queue: both then outlive a scan
 * although neither was ever hit.
 */
static void test_ghost_readmission(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 20, 1, NULL);
	char name[64];
	for (uint32_t i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "fill%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 100 + i, 0, 1000), 0);
	}
	/* Everything is on probation: x evicts fill0 and queues behind fill1..fill19, so the
	 * twentieth put after it evicts it. */
	assert_int_equal(put_tag(c, "x.test", NX_DNS_T_A, 3600, 1, 0, 1000), 0);
	for (uint32_t i = 0; i < 19; i++) {
		snprintf(name, sizeof(name), "more%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 200 + i, 0, 1000), 0);
	}
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.evictions, 20);
	assert_int_equal(put_tag(c, "more19.test", NX_DNS_T_A, 3600, 219, 0, 1000), 0);
	assert_int_equal(get_tag(c, "x.test", NX_DNS_T_A, 1000, NULL), -1); /* gone... */
	s = st(c);
	assert_int_equal(s.evictions, 21);
	assert_int_equal(s.promoted, 0);
	assert_int_equal(s.readmitted, 0);
	/* ...but remembered: asked for again, it skips probation */
	assert_int_equal(put_tag(c, "x.test", NX_DNS_T_A, 3600, 2, 0, 1000), 0);
	s = st(c);
	assert_int_equal(s.readmitted, 1);
	assert_int_equal(put_tag(c, "x.test", NX_DNS_T_A, 3600, 3, 0, 1000), 0); /* refresh */
	for (uint32_t i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "scan%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 1000 + i, 0, 2000), 0);
	}
	assert_int_equal(get_tag(c, "x.test", NX_DNS_T_A, 2000, NULL), 3);
	s = st(c);
	assert_int_equal(s.replaced, 1);
	assert_int_equal(s.readmitted, 1);
	nx_cache_free(c);
}

/*
 * The main queue is a CLOCK with a 2-bit use count: the hand takes one off each entry it
 * passes and evicts the first it finds at zero, so an entry hit three times outlives one hit
 * once. Slots fill in order (free list), so the hand's path is known.
 */
static void test_main_clock_counts(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 10, 1, NULL); /* probation's share: 1 */
	char name[64];
	for (uint32_t i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "n%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, i, 0, 1000), 0);
	}
	for (uint32_t i = 0; i < 9; i++) {
		snprintf(name, sizeof(name), "n%u.test", i);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 1000, NULL), i);
	}
	for (int k = 0; k < 4; k++) { /* n0's count saturates at 3 */
		assert_int_equal(get_tag(c, "n0.test", NX_DNS_T_A, 1000, NULL), 0);
	}
	/* p1: n0..n8 move up, n9 (never hit) goes; p1 on probation in n9's slot */
	assert_int_equal(put_tag(c, "p1.test", NX_DNS_T_A, 3600, 21, 0, 1000), 0);
	assert_int_equal(get_tag(c, "n9.test", NX_DNS_T_A, 1000, NULL), -1);
	assert_int_equal(get_tag(c, "p1.test", NX_DNS_T_A, 1000, NULL), 21);
	/* p2: p1 moves up, probation is empty, so the main hand runs: pass one takes every count
	 * down (n0 3->2, the rest 1->0), pass two spares n0 (2->1) and evicts n1 */
	assert_int_equal(put_tag(c, "p2.test", NX_DNS_T_A, 3600, 22, 0, 1000), 0);
	assert_int_equal(get_tag(c, "n1.test", NX_DNS_T_A, 1000, NULL), -1);
	assert_int_equal(get_tag(c, "n0.test", NX_DNS_T_A, 1000, NULL), 0);
	for (uint32_t i = 2; i < 9; i++) {
		snprintf(name, sizeof(name), "n%u.test", i);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 1000, NULL), i);
	}
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.promoted, 10);
	assert_int_equal(s.evictions, 2);
	assert_int_equal(s.entries, 10);
	nx_cache_free(c);
}

/* A refreshed copy (prefetch, a stale entry asked again) keeps its place and its use. */
static void test_refresh_keeps_place(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 20, 1, NULL);
	char name[64];
	assert_int_equal(put_tag(c, "k.test", NX_DNS_T_A, 3600, 1, 0, 1000), 0);
	assert_int_equal(get_tag(c, "k.test", NX_DNS_T_A, 1000, NULL), 1); /* hit on probation */
	assert_int_equal(put_tag(c, "k.test", NX_DNS_T_A, 3600, 2, 0, 2000), 0);
	for (uint32_t i = 0; i < 60; i++) { /* k reaches the head of probation: it moves up */
		snprintf(name, sizeof(name), "n%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 100 + i, 0, 2000), 0);
	}
	assert_int_equal(get_tag(c, "k.test", NX_DNS_T_A, 2000, NULL), 2);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.replaced, 1);
	assert_int_equal(s.promoted, 1);
	assert_int_equal(s.entries, 20);
	nx_cache_free(c);
}

/*
 * A refresh when bytes are short: the room is made from other entries, never from the key's
 * own old copy (oldest and unhit on probation here, so the first victim otherwise), which the
 * new copy replaces in place.
 */
static void test_refresh_under_byte_pressure(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 100, 1, NULL); /* 65535 bytes */
	char name[64];
	assert_int_equal(put_tag(c, "k.test", NX_DNS_T_A, 3600, 1, 3000, 1000), 0);
	for (uint32_t i = 0; i < 18; i++) { /* 19 copies of ~3 KB: nearly full, nothing evicted */
		snprintf(name, sizeof(name), "n%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 100 + i, 3000, 1000), 0);
	}
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.entries, 19);
	assert_int_equal(s.evictions, 0);
	/* a 9 KB copy of k does not fit: room comes from n0 on, not from k (the oldest) */
	assert_int_equal(put_tag(c, "k.test", NX_DNS_T_A, 3600, 2, 9000, 2000), 0);
	s = st(c);
	assert_int_equal(s.replaced, 1);
	assert_true(s.evictions >= 1);
	assert_true(s.live_bytes <= s.budget_bytes);
	assert_int_equal(get_tag(c, "k.test", NX_DNS_T_A, 2000, NULL), 2);
	assert_int_equal(get_tag(c, "n0.test", NX_DNS_T_A, 2000, NULL), -1);
	nx_cache_free(c);
}

/* An entry found dead by a lookup was asked for again: its next copy skips probation. */
static void test_dead_entry_readmitted(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 20, 1, NULL);
	assert_int_equal(put_tag(c, "d.test", NX_DNS_T_A, 1, 1, 0, 1000), 0);
	assert_int_equal(get_tag(c, "d.test", NX_DNS_T_A, 3000, NULL), -1); /* dead: unlinked */
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.expired, 1);
	assert_int_equal(s.entries, 0);
	assert_int_equal(put_tag(c, "d.test", NX_DNS_T_A, 300, 2, 0, 3000), 0);
	s = st(c);
	assert_int_equal(s.readmitted, 1);
	nx_cache_free(c);
}

/* A flush empties probation and forgets the ghost table: nothing is readmitted after it. */
static void test_flush_resets_policy(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 10, 1, NULL);
	char name[64];
	for (uint32_t i = 0; i < 11; i++) { /* the eleventh evicts n0 into the ghost table */
		snprintf(name, sizeof(name), "n%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, i, 0, 1000), 0);
	}
	assert_int_equal(st(c).evictions, 1);
	nx_cache_flush(c);
	assert_int_equal(st(c).entries, 0);
	assert_int_equal(put_tag(c, "n0.test", NX_DNS_T_A, 3600, 50, 0, 2000), 0);
	assert_int_equal(st(c).readmitted, 0);
	/* and the emptied shard fills and evicts as a fresh one */
	for (uint32_t i = 1; i < 30; i++) {
		snprintf(name, sizeof(name), "m%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 100 + i, 0, 2000), 0);
	}
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.entries, 10);
	assert_int_equal(s.evictions, 1 + 20);
	nx_cache_free(c);
}

/*
 * Scan resistance when bytes, not entries, fill the cache, over several shards: each put
 * evicts from its own shard, so no shard drains its probation and sweeps its working set.
 */
static void test_scan_resistance_bytes_shards(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 1000, 4, NULL); /* 256,000 bytes: ~300 answers of ~800 */
	char name[64];
	for (uint32_t i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "hot%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, i, 700, 1000), 0);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 1000, NULL), i);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 1000, NULL), i);
	}
	for (uint32_t i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "scan%u.test", i);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 3600, 1000 + i, 700, 2000), 0);
	}
	struct nx_cache_stats s = st(c);
	assert_true(s.entries < 400); /* bytes were the bound */
	for (uint32_t i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "hot%u.test", i);
		assert_int_equal(get_tag(c, name, NX_DNS_T_A, 3000, NULL), i);
	}
	nx_cache_free(c);
}

static void test_byte_eviction(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 100, 1, NULL); /* budget 65535 */
	assert_int_equal(nx_cache_budget_bytes(100), 65535);
	assert_int_equal(put_tag(c, "one.test", NX_DNS_T_A, 300, 1, 30000, 1000), 0);
	assert_int_equal(put_tag(c, "two.test", NX_DNS_T_A, 300, 2, 30000, 1000), 0);
	assert_int_equal(get_tag(c, "one.test", NX_DNS_T_A, 1000, NULL), 1); /* hit */
	/* the third does not fit: probation gives up its oldest; one was hit and moves up, two
	 * goes */
	assert_int_equal(put_tag(c, "three.test", NX_DNS_T_A, 300, 3, 30000, 1000), 0);
	assert_int_equal(get_tag(c, "two.test", NX_DNS_T_A, 1000, NULL), -1);
	assert_int_equal(get_tag(c, "one.test", NX_DNS_T_A, 1000, NULL), 1);
	assert_int_equal(get_tag(c, "three.test", NX_DNS_T_A, 1000, NULL), 3);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.evictions, 1);
	assert_true(s.live_bytes <= s.budget_bytes);
	nx_cache_free(c);
}

static void test_oversized(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 16, 1, NULL);
	assert_int_equal(put_tag(c, "small.test", NX_DNS_T_A, 300, 1, 10, 1000), 0);
	/* a 65522-byte message: its stored copy is larger than the 65535-byte budget */
	build_answer("big.test", NX_DNS_T_TXT, 300, 2, 65480);
	assert_true(nx_cache_stored_size(&g_msg.m) > 65535);
	struct tkey k;
	tkey_init(&k, "big.test", NX_DNS_T_TXT, false, false);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 1000), NX_ELIMIT);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.oversized, 1);
	assert_int_equal(s.entries, 1); /* nothing was evicted for it */
	assert_int_equal(get_tag(c, "small.test", NX_DNS_T_A, 1000, NULL), 1);
	assert_int_equal(get_tag(c, "big.test", NX_DNS_T_TXT, 1000, NULL), -1);
	/* just under the budget fits, evicting the rest */
	build_answer("big.test", NX_DNS_T_TXT, 300, 3, 65400);
	assert_true(nx_cache_stored_size(&g_msg.m) <= 65535);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 1000), 0);
	assert_int_equal(get_tag(c, "big.test", NX_DNS_T_TXT, 1000, NULL), 3);
	assert_int_equal(get_tag(c, "small.test", NX_DNS_T_A, 1000, NULL), -1);
	nx_cache_free(c);
}

/* ---- allocation failures ---- */

static void test_alloc_fail_insert_and_replace(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 32, 1, NULL);
	t.fail_responses = true;
	assert_int_equal(put_tag(c, "new.test", NX_DNS_T_A, 300, 1, 0, 1000), -ENOMEM);
	assert_int_equal(get_tag(c, "new.test", NX_DNS_T_A, 1000, NULL), -1);
	assert_int_equal(st(c).alloc_failures, 1);
	t.fail_responses = false;
	assert_int_equal(put_tag(c, "old.test", NX_DNS_T_A, 300, 7, 0, 1000), 0);
	t.fail_responses = true;
	assert_int_equal(put_tag(c, "old.test", NX_DNS_T_A, 300, 8, 0, 2000), -ENOMEM);
	/* the old entry survives the failed replacement */
	assert_int_equal(get_tag(c, "old.test", NX_DNS_T_A, 2000, NULL), 7);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.alloc_failures, 2);
	assert_int_equal(s.entries, 1);
	assert_int_equal(s.replaced, 0);
	t.fail_responses = false;
	assert_int_equal(put_tag(c, "old.test", NX_DNS_T_A, 300, 9, 0, 2000), 0);
	assert_int_equal(get_tag(c, "old.test", NX_DNS_T_A, 2000, NULL), 9);
	assert_int_equal(st(c).replaced, 1);
	nx_cache_free(c);
}

static void test_alloc_fail_new(void **state)
{
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = 1000; /* 8 shards: 9 allocations */
	for (long n = 0; n < 9; n++) {
		struct talloc t;
		talloc_init(&t);
		t.fail_after = n;
		p.alloc = &t.a;
		struct nx_cache *c = (struct nx_cache *)&t;
		assert_int_equal(nx_cache_new(&p, &c), -ENOMEM);
		assert_ptr_equal(c, (struct nx_cache *)&t); /* untouched */
		assert_int_equal(t.slot_bytes, 0);
	}
	struct talloc t;
	talloc_init(&t);
	t.fail_after = 9;
	p.alloc = &t.a;
	struct nx_cache *c = NULL;
	assert_int_equal(nx_cache_new(&p, &c), 0);
	nx_cache_free(c);
	assert_int_equal(t.slot_bytes, 0);
}

static void test_bad_params(void **state)
{
	struct nx_cache_params p;
	struct nx_cache *c = NULL;
	nx_cache_params_default(&p);
	p.size = 0;
	assert_int_equal(nx_cache_new(&p, &c), -EINVAL);
	nx_cache_params_default(&p);
	p.min_ttl = 100;
	p.max_ttl = 10;
	assert_int_equal(nx_cache_new(&p, &c), -EINVAL);
	nx_cache_params_default(&p);
	p.shards = 3;
	assert_int_equal(nx_cache_new(&p, &c), -EINVAL);
	p.shards = 128;
	assert_int_equal(nx_cache_new(&p, &c), -EINVAL);
	nx_cache_params_default(&p);
	p.size = 2;
	p.shards = 4;
	assert_int_equal(nx_cache_new(&p, &c), -EINVAL);
	nx_cache_params_default(&p);
	p.size = NX_CACHE_SIZE_MAX + 1;
	assert_int_equal(nx_cache_new(&p, &c), -EINVAL);
	assert_null(c);

	/* a NULL cache is a disabled one */
	struct tkey k;
	tkey_init(&k, "x.test", NX_DNS_T_A, false, false);
	build_answer("x.test", NX_DNS_T_A, 300, 1, 0);
	assert_int_equal(nx_cache_put(NULL, &k.k, g_msg.buf, &g_msg.m, 0), NX_ECANCELED);
	assert_int_equal(nx_cache_lookup(NULL, &k.k, 0, 0, g_out, sizeof(g_out), NULL, NULL),
			 NX_ENOTFOUND);
	struct nx_cache_stats s;
	nx_cache_stats(NULL, &s);
	assert_int_equal(s.entries, 0);
	nx_cache_flush(NULL);
	nx_cache_free(NULL);
}

/* ---- TTLs ---- */

static void test_ttl_decay(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, NULL);
	static const uint8_t a[4] = {192, 0, 2, 1};
	tmsg_start(&g_msg, "decay.test", NX_DNS_T_A, NX_DNS_C_IN, 0);
	tmsg_rr(&g_msg, T_AN, NX_DNS_T_A, 300, a, 4);
	tmsg_rr(&g_msg, T_AN, NX_DNS_T_A, 100, a, 4);
	tmsg_rr(&g_msg, T_AR, NX_DNS_T_A, 50, a, 4); /* additional: not in the lifetime */
	tmsg_finish(&g_msg);
	struct tkey k;
	tkey_init(&k, "decay.test", NX_DNS_T_A, false, false);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 1000), 0);

	struct nx_dns_msg m;
	struct nx_cache_hit h;
	assert_int_equal(nx_cache_lookup(c, &k.k, 1000 + 10500, 0, g_out, sizeof(g_out), &m, &h),
			 0);
	assert_int_equal(h.age, 10);
	assert_int_equal(h.ttl, 90);
	assert_false(h.stale);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 0), 290);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 1), 90);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 2), 40);
	assert_int_equal(m.min_ttl, 90);

	/* additional RRs floor at 0; the entry lives 100 s */
	assert_int_equal(nx_cache_lookup(c, &k.k, 1000 + 99999, 0, g_out, sizeof(g_out), &m, &h),
			 0);
	assert_int_equal(h.ttl, 1);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 0), 201);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 1), 1);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 2), 0);
	assert_int_equal(nx_cache_lookup(c, &k.k, 1000 + 100000, 0, g_out, sizeof(g_out), &m, &h),
			 NX_ENOTFOUND);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.expired, 1);
	assert_int_equal(s.entries, 0);
	assert_int_equal(s.hits, 2);
	assert_int_equal(s.misses, 1);
	/* a clock reading before the store time counts as age 0 */
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 5000), 0);
	assert_int_equal(nx_cache_lookup(c, &k.k, 4000, 0, g_out, sizeof(g_out), &m, &h), 0);
	assert_int_equal(h.age, 0);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 1), 100);
	nx_cache_free(c);
}

static void clamp_60_100(struct nx_cache_params *p)
{
	p->min_ttl = 60;
	p->max_ttl = 100;
}

static void test_ttl_clamps(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, clamp_60_100);
	struct nx_cache_hit h;
	assert_int_equal(put_tag(c, "low.test", NX_DNS_T_A, 10, 1, 0, 0), 0);
	assert_int_equal(get_tag(c, "low.test", NX_DNS_T_A, 0, &h), 1);
	assert_int_equal(h.ttl, 60);
	assert_int_equal(get_tag(c, "low.test", NX_DNS_T_A, 59999, &h), 1);
	assert_int_equal(get_tag(c, "low.test", NX_DNS_T_A, 60000, &h), -1);
	assert_int_equal(put_tag(c, "high.test", NX_DNS_T_A, 86400, 2, 0, 0), 0);
	assert_int_equal(get_tag(c, "high.test", NX_DNS_T_A, 0, &h), 2);
	assert_int_equal(h.ttl, 100);
	assert_int_equal(tmsg_ttl_at(g_out, &g_msg.m, 0), 100); /* the RR itself */
	assert_int_equal(get_tag(c, "high.test", NX_DNS_T_A, 100000, &h), -1);
	/* top bit set = 0 (RFC 2181), raised to min_ttl */
	assert_int_equal(put_tag(c, "msb.test", NX_DNS_T_A, 0x80000005u, 3, 0, 0), 0);
	assert_int_equal(get_tag(c, "msb.test", NX_DNS_T_A, 0, &h), 3);
	assert_int_equal(h.ttl, 60);
	nx_cache_free(c);

	/* without min_ttl a TTL of 0 is not stored */
	talloc_init(&t);
	c = mk(&t, 64, 1, NULL);
	assert_int_equal(put_tag(c, "zero.test", NX_DNS_T_A, 0, 1, 0, 0), NX_EFORMAT);
	assert_int_equal(put_tag(c, "msb.test", NX_DNS_T_A, 0x80000000u, 1, 0, 0), NX_EFORMAT);
	assert_int_equal(st(c).uncacheable, 2);
	assert_int_equal(st(c).entries, 0);
	nx_cache_free(c);
}

static int put_negative(struct nx_cache *c, const char *name, int rcode, bool with_cname,
			bool with_soa, uint32_t soa_ttl, uint32_t minimum, uint64_t now)
{
	static const uint8_t target[] = {6, 't', 'a', 'r', 'g', 'e', 't', 0};
	tmsg_start(&g_msg, name, NX_DNS_T_AAAA, NX_DNS_C_IN, (uint16_t)rcode);
	if (with_cname) {
		tmsg_rr(&g_msg, T_AN, NX_DNS_T_CNAME, 600, target, sizeof(target));
	}
	if (with_soa) {
		tmsg_soa(&g_msg, soa_ttl, minimum);
	}
	tmsg_finish(&g_msg);
	struct tkey k;
	tkey_init(&k, name, NX_DNS_T_AAAA, false, false);
	return nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, now);
}

static int get_neg(struct nx_cache *c, const char *name, uint64_t now, struct nx_dns_msg *m,
		   struct nx_cache_hit *h)
{
	struct tkey k;
	tkey_init(&k, name, NX_DNS_T_AAAA, false, false);
	return nx_cache_lookup(c, &k.k, now, 0, g_out, sizeof(g_out), m, h);
}

static void test_negative_caching(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, NULL);
	struct nx_dns_msg m;
	struct nx_cache_hit h;

	/* NXDOMAIN: min(SOA TTL 3600, MINIMUM 300) = 300; the SOA TTL shows the remainder */
	assert_int_equal(put_negative(c, "nx.test", NX_DNS_NXDOMAIN, false, true, 3600, 300, 0), 0);
	assert_int_equal(get_neg(c, "nx.test", 20000, &m, &h), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_NXDOMAIN);
	assert_int_equal(h.ttl, 280);
	assert_int_equal(m.nscount, 1);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 0), 280);
	assert_int_equal(get_neg(c, "nx.test", 300000, &m, &h), NX_ENOTFOUND);

	/* NODATA: min(SOA TTL 60, MINIMUM 900) = 60 */
	assert_int_equal(put_negative(c, "nodata.test", NX_DNS_NOERROR, false, true, 60, 900, 0),
			 0);
	assert_int_equal(get_neg(c, "nodata.test", 59999, &m, &h), 0);
	assert_int_equal(h.ttl, 1);
	assert_int_equal(m.ancount, 0);
	assert_int_equal(get_neg(c, "nodata.test", 60000, &m, &h), NX_ENOTFOUND);

	/* NXDOMAIN after a CNAME: the CNAME (600) keeps its TTL, the entry lives 120 s */
	assert_int_equal(put_negative(c, "alias.test", NX_DNS_NXDOMAIN, true, true, 120, 7200, 0),
			 0);
	assert_int_equal(get_neg(c, "alias.test", 10000, &m, &h), 0);
	assert_int_equal(h.ttl, 110);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 0), 590);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 1), 110);

	/* negative cap (neg_max_ttl 3600 by default) */
	assert_int_equal(
	    put_negative(c, "long.test", NX_DNS_NXDOMAIN, false, true, 86400, 86400, 0), 0);
	assert_int_equal(get_neg(c, "long.test", 0, &m, &h), 0);
	assert_int_equal(h.ttl, NX_CACHE_NEG_MAX_TTL_DEFAULT);

	/* without an SOA: not cached (RFC 2308 s5) */
	uint64_t before = st(c).uncacheable;
	assert_int_equal(put_negative(c, "nosoa.test", NX_DNS_NXDOMAIN, false, false, 0, 0, 0),
			 NX_EFORMAT);
	assert_int_equal(put_negative(c, "nosoa2.test", NX_DNS_NOERROR, false, false, 0, 0, 0),
			 NX_EFORMAT);
	assert_int_equal(get_neg(c, "nosoa.test", 0, &m, &h), NX_ENOTFOUND);
	/* an SOA whose RDATA cannot hold the five counters is no SOA */
	tmsg_start(&g_msg, "short.test", NX_DNS_T_AAAA, NX_DNS_C_IN, NX_DNS_NXDOMAIN);
	tmsg_rr(&g_msg, T_NS, NX_DNS_T_SOA, 300, (const uint8_t *)"\0\0\0\0\0\0\0\0\0\0", 10);
	tmsg_finish(&g_msg);
	struct tkey sk;
	tkey_init(&sk, "short.test", NX_DNS_T_AAAA, false, false);
	assert_int_equal(nx_cache_put(c, &sk.k, g_msg.buf, &g_msg.m, 0), NX_EFORMAT);
	/* SOA MINIMUM 0: lifetime 0, not cached */
	assert_int_equal(put_negative(c, "zero.test", NX_DNS_NXDOMAIN, false, true, 300, 0, 0),
			 NX_EFORMAT);
	assert_int_equal(st(c).uncacheable, before + 4);
	nx_cache_free(c);
}

static void test_servfail_and_rules(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, NULL);
	struct nx_dns_msg m;
	struct nx_cache_hit h;
	struct tkey k;
	tkey_init(&k, "sf.test", NX_DNS_T_AAAA, false, false);

	tmsg_start(&g_msg, "sf.test", NX_DNS_T_AAAA, NX_DNS_C_IN, NX_DNS_SERVFAIL);
	tmsg_finish(&g_msg);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), 0);
	assert_int_equal(nx_cache_lookup(c, &k.k, 4999, 0, g_out, sizeof(g_out), &m, &h), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_SERVFAIL);
	assert_int_equal(h.ttl, 1);
	assert_int_equal(m.min_ttl, UINT32_MAX);
	assert_int_equal(nx_cache_lookup(c, &k.k, 5000, 0, g_out, sizeof(g_out), &m, &h),
			 NX_ENOTFOUND);

	/* never cached: REFUSED, FORMERR, TC, non-QUERY opcode, no QR, extended rcode */
	static const uint16_t bad[] = {NX_DNS_REFUSED, NX_DNS_FORMERR, NX_DNS_NOTIMP, NX_DNS_F_TC,
				       2 << 11 /* STATUS */};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad); i++) {
		build_answer("sf.test", NX_DNS_T_AAAA, 300, 1, 0);
		g_msg.m.flags |= bad[i];
		g_msg.buf[2] = (uint8_t)(g_msg.m.flags >> 8);
		g_msg.buf[3] = (uint8_t)g_msg.m.flags;
		assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EFORMAT);
	}
	build_answer("sf.test", NX_DNS_T_AAAA, 300, 1, 0);
	g_msg.m.flags &= (uint16_t)~NX_DNS_F_QR;
	g_msg.buf[2] &= 0x7f;
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EFORMAT);
	tmsg_start(&g_msg, "sf.test", NX_DNS_T_AAAA, NX_DNS_C_IN, 0);
	tmsg_rr(&g_msg, T_AN, NX_DNS_T_AAAA, 300, (const uint8_t *)"0123456789abcdef", 16);
	tmsg_opt(&g_msg, false, -1, NULL);
	tmsg_finish(&g_msg);
	g_msg.m.edns.ext_rcode = 1; /* BADVERS */
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EFORMAT);
	/* TTL overflow: TTLs we cannot all rewrite */
	build_answer("sf.test", NX_DNS_T_AAAA, 300, 1, 0);
	g_msg.m.ttl_overflow = true;
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EFORMAT);
	/* a question that is not the key's */
	build_answer("other.test", NX_DNS_T_AAAA, 300, 1, 0);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EMALFORMED);
	build_answer("sf.test", NX_DNS_T_A, 300, 1, 0);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EMALFORMED);
	/* offsets past the end */
	build_answer("sf.test", NX_DNS_T_AAAA, 300, 1, 0);
	g_msg.m.ttl_off[0] = (uint16_t)(g_msg.m.len - 3);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EMALFORMED);
	assert_int_equal(st(c).entries, 0);
	assert_int_equal(st(c).uncacheable, 11);
	nx_cache_free(c);

	/* servfail_ttl 0: SERVFAIL never cached */
	talloc_init(&t);
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = 8;
	p.servfail_ttl = 0;
	p.alloc = &t.a;
	assert_int_equal(nx_cache_new(&p, &c), 0);
	tmsg_start(&g_msg, "sf.test", NX_DNS_T_AAAA, NX_DNS_C_IN, NX_DNS_SERVFAIL);
	tmsg_finish(&g_msg);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), NX_EFORMAT);
	nx_cache_free(c);
}

static void stale_100(struct nx_cache_params *p)
{
	p->stale_window = 100;
}

static void test_serve_stale(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, stale_100);
	struct tkey k;
	tkey_init(&k, "stale.test", NX_DNS_T_A, false, false);
	struct nx_dns_msg m;
	struct nx_cache_hit h;
	assert_int_equal(put_tag(c, "stale.test", NX_DNS_T_A, 60, 1, 0, 0), 0);
	/* expired: a normal lookup misses but keeps the entry */
	assert_int_equal(nx_cache_lookup(c, &k.k, 60000, 0, g_out, sizeof(g_out), &m, &h),
			 NX_ENOTFOUND);
	assert_int_equal(st(c).entries, 1);
	/* asked for stale: served, TTL 30 everywhere */
	assert_int_equal(
	    nx_cache_lookup(c, &k.k, 60000, NX_CACHE_LOOKUP_STALE, g_out, sizeof(g_out), &m, &h),
	    0);
	assert_true(h.stale);
	assert_int_equal(h.ttl, NX_CACHE_STALE_TTL);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 0), NX_CACHE_STALE_TTL);
	assert_int_equal(m.min_ttl, NX_CACHE_STALE_TTL);
	assert_int_equal(rd_tag(g_out, &m), 1);
	/* a fresh entry is preferred with the flag too */
	assert_int_equal(put_tag(c, "fresh.test", NX_DNS_T_A, 60, 2, 0, 0), 0);
	struct tkey f;
	tkey_init(&f, "fresh.test", NX_DNS_T_A, false, false);
	assert_int_equal(
	    nx_cache_lookup(c, &f.k, 1000, NX_CACHE_LOOKUP_STALE, g_out, sizeof(g_out), &m, &h), 0);
	assert_false(h.stale);
	assert_int_equal(h.ttl, 59);
	/* past TTL + window: gone, counted expired; a stale lookup that finds nothing is no miss */
	uint64_t misses = st(c).misses;
	assert_int_equal(
	    nx_cache_lookup(c, &k.k, 160000, NX_CACHE_LOOKUP_STALE, g_out, sizeof(g_out), &m, &h),
	    NX_ENOTFOUND);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.misses, misses);
	assert_int_equal(s.expired, 1);
	assert_int_equal(s.stale_hits, 1);
	assert_int_equal(s.entries, 1);
	nx_cache_free(c);

	/* window 0: the flag finds nothing once expired */
	talloc_init(&t);
	c = mk(&t, 64, 1, NULL);
	assert_int_equal(put_tag(c, "stale.test", NX_DNS_T_A, 60, 1, 0, 0), 0);
	assert_int_equal(
	    nx_cache_lookup(c, &k.k, 60000, NX_CACHE_LOOKUP_STALE, g_out, sizeof(g_out), &m, &h),
	    NX_ENOTFOUND);
	assert_int_equal(st(c).entries, 0);
	nx_cache_free(c);
}

static void prefetch_2(struct nx_cache_params *p)
{
	p->prefetch_min_hits = 2;
}

static void test_prefetch(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, prefetch_2);
	struct nx_cache_hit h;
	assert_int_equal(put_tag(c, "pop.test", NX_DNS_T_A, 100, 1, 0, 0), 0);
	assert_int_equal(put_tag(c, "rare.test", NX_DNS_T_A, 100, 2, 0, 0), 0);
	get_tag(c, "pop.test", NX_DNS_T_A, 1000, &h);
	assert_false(h.prefetch);
	get_tag(c, "pop.test", NX_DNS_T_A, 2000, &h);
	assert_false(h.prefetch);
	get_tag(c, "pop.test", NX_DNS_T_A, 90000, &h); /* 10 s left = 10 %: not below */
	assert_false(h.prefetch);
	get_tag(c, "pop.test", NX_DNS_T_A, 90001, &h);
	assert_true(h.prefetch);
	get_tag(c, "pop.test", NX_DNS_T_A, 95000, &h); /* reported once */
	assert_false(h.prefetch);
	get_tag(c, "rare.test", NX_DNS_T_A, 95000, &h); /* 1st hit: not popular */
	assert_false(h.prefetch);
	get_tag(c, "rare.test", NX_DNS_T_A, 96000, &h); /* 2nd hit: had 1 before */
	assert_false(h.prefetch);
	get_tag(c, "rare.test", NX_DNS_T_A, 97000, &h); /* had 2 */
	assert_true(h.prefetch);
	/* a new copy can signal again */
	assert_int_equal(put_tag(c, "pop.test", NX_DNS_T_A, 100, 3, 0, 96000), 0);
	for (int i = 0; i < 2; i++) {
		get_tag(c, "pop.test", NX_DNS_T_A, 97000, &h);
		assert_false(h.prefetch);
	}
	assert_int_equal(get_tag(c, "pop.test", NX_DNS_T_A, 187000, &h), 3);
	assert_true(h.prefetch);
	assert_int_equal(st(c).prefetch, 3);
	nx_cache_free(c);
}

/* ---- keys ---- */

static int put_key(struct nx_cache *c, const char *qname_wire_case, const struct tkey *k,
		   uint32_t tag)
{
	build_answer(qname_wire_case, k->k.qtype, 300, tag, 0);
	return nx_cache_put(c, &k->k, g_msg.buf, &g_msg.m, 0);
}

static int64_t get_key(struct nx_cache *c, const struct tkey *k)
{
	struct nx_dns_msg m;
	int rc = nx_cache_lookup(c, &k->k, 0, 0, g_out, sizeof(g_out), &m, NULL);
	return rc ? -1 : (int64_t)rd_tag(g_out, &m);
}

static void test_key_distinct(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 256, 0, NULL);
	struct tkey plain, lower, upper, aaaa, dobit, cd, both, chaos;
	tkey_init(&plain, "Www.Example.COM", NX_DNS_T_A, false, false);
	tkey_init(&lower, "www.example.com", NX_DNS_T_A, false, false);
	tkey_init(&upper, "WWW.EXAMPLE.COM", NX_DNS_T_A, false, false);
	tkey_init(&aaaa, "www.example.com", NX_DNS_T_AAAA, false, false);
	tkey_init(&dobit, "www.example.com", NX_DNS_T_A, true, false);
	tkey_init(&cd, "www.example.com", NX_DNS_T_A, false, true);
	tkey_init(&both, "www.example.com", NX_DNS_T_A, true, true);
	tkey_init(&chaos, "www.example.com", NX_DNS_T_A, false, false);
	chaos.k.qclass = 3;

	/* upstream echoed mixed (0x20) case */
	assert_int_equal(put_key(c, "wWw.eXample.cOm", &plain, 1), 0);
	assert_int_equal(get_key(c, &lower), 1);
	assert_int_equal(get_key(c, &upper), 1);
	assert_int_equal(get_key(c, &aaaa), -1);
	assert_int_equal(get_key(c, &dobit), -1);
	assert_int_equal(get_key(c, &cd), -1);
	assert_int_equal(get_key(c, &both), -1);
	assert_int_equal(get_key(c, &chaos), -1);
	assert_int_equal(put_key(c, "www.example.com", &aaaa, 2), 0);
	assert_int_equal(put_key(c, "www.example.com", &dobit, 3), 0);
	assert_int_equal(put_key(c, "www.example.com", &cd, 4), 0);
	assert_int_equal(put_key(c, "www.example.com", &both, 5), 0);
	assert_int_equal(get_key(c, &upper), 1);
	assert_int_equal(get_key(c, &aaaa), 2);
	assert_int_equal(get_key(c, &dobit), 3);
	assert_int_equal(get_key(c, &cd), 4);
	assert_int_equal(get_key(c, &both), 5);
	/* a sibling name or a longer one is another key */
	struct tkey w2, sub;
	tkey_init(&w2, "ww2.example.com", NX_DNS_T_A, false, false);
	tkey_init(&sub, "a.www.example.com", NX_DNS_T_A, false, false);
	assert_int_equal(get_key(c, &w2), -1);
	assert_int_equal(get_key(c, &sub), -1);
	/* replacing via another case replaces the same entry */
	assert_int_equal(put_key(c, "WWW.example.com", &upper, 6), 0);
	assert_int_equal(get_key(c, &plain), 6);
	struct nx_cache_stats s = st(c);
	assert_int_equal(s.entries, 5);
	assert_int_equal(s.replaced, 1);
	nx_cache_free(c);
}

/* ---- the hit view ---- */

static void test_hit_view(void **state)
{
	struct talloc t;
	talloc_init(&t);
	struct nx_cache *c = mk(&t, 64, 1, NULL);
	static const uint8_t a[4] = {192, 0, 2, 7};
	tmsg_start(&g_msg, "View.Test", NX_DNS_T_A, NX_DNS_C_IN, NX_DNS_F_AD);
	tmsg_rr(&g_msg, T_AN, NX_DNS_T_A, 300, a, 4);
	tmsg_soa(&g_msg, 500, 500);
	tmsg_rr(&g_msg, T_AR, NX_DNS_T_A, 400, a, 4);
	tmsg_opt(&g_msg, true, 18, "some text");
	tmsg_rr(&g_msg, T_AR, NX_DNS_T_A, 400, a, 4);
	tmsg_finish(&g_msg);
	struct nx_dns_msg want = g_msg.m;
	struct tkey k;
	tkey_init(&k, "view.test", NX_DNS_T_A, true, false);
	assert_int_equal(nx_cache_put(c, &k.k, g_msg.buf, &g_msg.m, 0), 0);

	struct nx_dns_msg m;
	memset(&m, 0xa5, sizeof(m));
	struct nx_cache_hit h;
	/* too small a buffer: NX_ETRUNC, counted as a miss */
	assert_int_equal(nx_cache_lookup(c, &k.k, 2000, 0, g_out, want.len - 1, &m, &h), NX_ETRUNC);
	assert_int_equal(st(c).misses, 1);
	assert_int_equal(nx_cache_lookup(c, &k.k, 2000, 0, g_out, want.len, &m, &h), 0);
	assert_int_equal(h.len, want.len);
	assert_int_equal(m.len, want.len);
	assert_int_equal(m.id, 0x1234);
	assert_int_equal(m.flags, want.flags);
	assert_int_equal(m.qdcount, 1);
	assert_int_equal(m.ancount, 1);
	assert_int_equal(m.nscount, 1);
	assert_int_equal(m.arcount, 3);
	assert_true(m.has_question);
	assert_int_equal(m.q.name_len, want.q.name_len);
	assert_memory_equal(m.q.name, want.q.name, want.q.name_len); /* upstream's case */
	assert_int_equal(m.q.qtype, NX_DNS_T_A);
	assert_int_equal(m.q.qclass, NX_DNS_C_IN);
	assert_int_equal(m.question_off, 12);
	assert_int_equal(m.question_end, want.question_end);
	assert_int_equal(m.answer_end, want.answer_end);
	assert_int_equal(m.authority_end, want.authority_end);
	assert_int_equal(m.opt_off, want.opt_off);
	assert_int_equal(m.opt_len, want.opt_len);
	assert_int_equal(m.opt_index, 1);
	assert_true(m.edns.present);
	assert_true(m.edns.do_bit);
	assert_int_equal(m.edns.udp_size, 1232);
	assert_int_equal(m.edns.ede_code, 18);
	assert_int_equal(m.edns.ede_text_len, 9);
	assert_memory_equal(m.edns.ede_text, "some text", 9);
	assert_int_equal(m.ttl_count, 4);
	assert_false(m.ttl_overflow);
	assert_memory_equal(m.ttl_off, want.ttl_off, 4 * sizeof(uint16_t));
	assert_int_equal(m.min_ttl, 298);
	/* bytes equal the upstream's except the TTL fields */
	for (unsigned i = 0; i < 4; i++) {
		g_msg.buf[want.ttl_off[i]] = g_out[want.ttl_off[i]];
		g_msg.buf[want.ttl_off[i] + 1] = g_out[want.ttl_off[i] + 1];
		g_msg.buf[want.ttl_off[i] + 2] = g_out[want.ttl_off[i] + 2];
		g_msg.buf[want.ttl_off[i] + 3] = g_out[want.ttl_off[i] + 3];
	}
	assert_memory_equal(g_out, g_msg.buf, want.len);
	assert_int_equal(tmsg_ttl_at(g_out, &m, 2), 398);
	/* msg and hit may be NULL */
	assert_int_equal(nx_cache_lookup(c, &k.k, 2000, 0, g_out, sizeof(g_out), NULL, NULL), 0);
	assert_int_equal(tmsg_ttl_at(g_out, &want, 0), 298);
	nx_cache_free(c);
}

/* ---- the ledger: default allocator, back to zero ---- */

static void test_ledger_balance(void **state)
{
	struct nx_ledger_row before[NX_OWNER__COUNT], mid[NX_OWNER__COUNT], after[NX_OWNER__COUNT];
	nx_ledger_read(before);
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = 300;
	struct nx_cache *c = NULL;
	assert_int_equal(nx_cache_new(&p, &c), 0);
	for (uint32_t i = 0; i < 1000; i++) {
		char name[32];
		snprintf(name, sizeof(name), "l%u.test", i % 400);
		assert_int_equal(put_tag(c, name, NX_DNS_T_A, 300, i, i % 700, i), 0);
	}
	nx_ledger_read(mid);
	struct nx_cache_stats s = st(c);
	assert_int_equal(mid[NX_OWNER_cache_responses].bytes -
			     before[NX_OWNER_cache_responses].bytes,
			 (int64_t)s.live_bytes);
	assert_int_equal(mid[NX_OWNER_cache_responses].count -
			     before[NX_OWNER_cache_responses].count,
			 (int64_t)s.entries);
	assert_int_equal(mid[NX_OWNER_cache_slots].bytes - before[NX_OWNER_cache_slots].bytes,
			 (int64_t)s.slot_bytes);
	assert_true(s.live_bytes <= s.budget_bytes);
	assert_int_equal(s.budget_bytes, 256 * 300);
	nx_cache_flush(c);
	assert_int_equal(st(c).entries, 0);
	assert_int_equal(st(c).live_bytes, 0);
	nx_cache_free(c);
	nx_ledger_read(after);
	assert_int_equal(after[NX_OWNER_cache_responses].bytes,
			 before[NX_OWNER_cache_responses].bytes);
	assert_int_equal(after[NX_OWNER_cache_responses].count,
			 before[NX_OWNER_cache_responses].count);
	assert_int_equal(after[NX_OWNER_cache_slots].bytes, before[NX_OWNER_cache_slots].bytes);
	assert_int_equal(after[NX_OWNER_cache_slots].count, before[NX_OWNER_cache_slots].count);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_budget_random_floor),
	    cmocka_unit_test(test_budget_random_scaled),
	    cmocka_unit_test(test_budget_random_alloc_failures),
	    cmocka_unit_test(test_probation_fifo),
	    cmocka_unit_test(test_scan_resistance),
	    cmocka_unit_test(test_ghost_readmission),
	    cmocka_unit_test(test_main_clock_counts),
	    cmocka_unit_test(test_refresh_keeps_place),
	    cmocka_unit_test(test_refresh_under_byte_pressure),
	    cmocka_unit_test(test_dead_entry_readmitted),
	    cmocka_unit_test(test_flush_resets_policy),
	    cmocka_unit_test(test_scan_resistance_bytes_shards),
	    cmocka_unit_test(test_byte_eviction),
	    cmocka_unit_test(test_oversized),
	    cmocka_unit_test(test_alloc_fail_insert_and_replace),
	    cmocka_unit_test(test_alloc_fail_new),
	    cmocka_unit_test(test_bad_params),
	    cmocka_unit_test(test_ttl_decay),
	    cmocka_unit_test(test_ttl_clamps),
	    cmocka_unit_test(test_negative_caching),
	    cmocka_unit_test(test_servfail_and_rules),
	    cmocka_unit_test(test_serve_stale),
	    cmocka_unit_test(test_prefetch),
	    cmocka_unit_test(test_key_distinct),
	    cmocka_unit_test(test_hit_view),
	    cmocka_unit_test(test_ledger_balance),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

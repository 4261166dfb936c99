/*
 * Per-upstream statistics (src/upstream/stats.c): slot lookup by name, outcome counters and the
 * cumulative latency histogram ('le' semantics: bucket[b] counts observations <= bound_b ms).
 * The slots are process-wide: tests run in order and the slot-exhaustion test runs last.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "upstream/impl.h"
#include "upstream/upstream.h"

/* Internal to the module (exchange.c declares it the same way); the engine's only writer. */
void nx_up_stats_outcome(int idx, enum nx_up_outcome o, uint64_t latency_us);
void nx_up_stats_rtt(int idx, uint64_t rtt_us);
void nx_up_stats_resend(int idx);

static const unsigned bounds_ms[NX_UP_LATENCY_NBUCKETS] = NX_UP_LATENCY_BUCKETS_MS;

static struct nx_up_stats_row row_of(int idx)
{
	struct nx_up_stats_row r;
	nx_up_stats_read(idx, &r);
	return r;
}

static void test_index_same_name(void **state)
{
	(void)state;
	int n0 = nx_up_stats_count();
	int a = nx_up_stats_index("192.0.2.1:53");
	int b = nx_up_stats_index("192.0.2.2:53");
	assert_true(a >= 0);
	assert_true(b >= 0);
	assert_int_not_equal(a, b);
	assert_int_equal(nx_up_stats_index("192.0.2.1:53"), a);
	assert_int_equal(nx_up_stats_index("192.0.2.2:53"), b);
	assert_int_equal(nx_up_stats_count(), n0 + 2);
	struct nx_up_stats_row r = row_of(a);
	assert_string_equal(r.name, "192.0.2.1:53");
	for (int o = 0; o < NX_UP_O__COUNT; o++) {
		assert_int_equal(r.outcome[o], 0);
	}
	assert_int_equal(r.count, 0);
}

/* A long server text (a DoH URL, say) truncated to the 63-byte row name must still map to one
 * slot, not a new one per lookup. */
static void test_index_long_name_stable(void **state)
{
	(void)state;
	char name[120];
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memcpy(name, "https://", 8);
	int a = nx_up_stats_index(name);
	assert_true(a >= 0);
	int n = nx_up_stats_count();
	assert_int_equal(nx_up_stats_index(name), a);
	assert_int_equal(nx_up_stats_count(), n);
}

static void test_outcome_names(void **state)
{
	(void)state;
	assert_string_equal(nx_up_outcome_name(NX_UP_O_ANSWER), "answer");
	assert_string_equal(nx_up_outcome_name(NX_UP_O_TIMEOUT), "timeout");
	assert_string_equal(nx_up_outcome_name(NX_UP_O_CANCELLED), "cancelled");
	assert_string_equal(nx_up_outcome_name(NX_UP_O_ERROR), "error");
}

/* The retransmission timeout follows the server's round trips (SRTT + 4 RTTVAR), clamped. */
static void test_rto_estimate(void **state)
{
	(void)state;
	int i = nx_up_stats_index("rto");
	assert_int_equal(nx_up_stats_rto_ms(i), NX_UP_RTO_INITIAL_MS); /* no sample yet */
	assert_int_equal(nx_up_stats_rto_ms(-1), NX_UP_RTO_INITIAL_MS);
	nx_up_stats_rtt(i, 100000); /* 100 ms: srtt 100, rttvar 50 */
	assert_int_equal(nx_up_stats_rto_ms(i), 300);
	nx_up_stats_rtt(i, 100000); /* srtt 100, rttvar 37.5 */
	assert_int_equal(nx_up_stats_rto_ms(i), 250);
	for (int k = 0; k < 40; k++) { /* steady 100 ms: rttvar decays, the floor holds */
		nx_up_stats_rtt(i, 100000);
	}
	assert_int_equal(nx_up_stats_rto_ms(i), NX_UP_RTO_MIN_MS);
	for (int k = 0; k < 40; k++) { /* a slow path (1.5 s): no longer held under 1 s */
		nx_up_stats_rtt(i, 1500000);
	}
	assert_true(nx_up_stats_rto_ms(i) >= 1500);
	for (int k = 0; k < 4; k++) { /* beyond any deadline: capped */
		nx_up_stats_rtt(i, 100000000);
	}
	assert_int_equal(nx_up_stats_rto_ms(i), NX_UP_RTO_MAX_MS);
	int j = nx_up_stats_index("rto-fast");
	nx_up_stats_rtt(j, 150); /* loopback: the floor */
	assert_int_equal(nx_up_stats_rto_ms(j), NX_UP_RTO_MIN_MS);
	/* a re-send to the silent server doubles it until a clean sample (RFC 6298 5.5), and
	 * the next one waits for that doubled timeout */
	uint64_t t = 7000000;
	assert_int_equal(nx_up_stats_probe(j, t), 0);
	assert_int_equal(nx_up_stats_rto_ms(j), 2 * NX_UP_RTO_MIN_MS);
	assert_int_equal(nx_up_stats_probe(j, t), t + 2 * NX_UP_RTO_MIN_MS);
	assert_int_equal(nx_up_stats_probe(j, t + 2 * NX_UP_RTO_MIN_MS - 1),
			 t + 2 * NX_UP_RTO_MIN_MS);
	assert_int_equal(nx_up_stats_rto_ms(j), 2 * NX_UP_RTO_MIN_MS); /* declined: no doubling */
	t += 2 * NX_UP_RTO_MIN_MS;
	assert_int_equal(nx_up_stats_probe(j, t), 0);
	assert_int_equal(nx_up_stats_rto_ms(j), 4 * NX_UP_RTO_MIN_MS);
	for (int n = 0; n < 20; n++) {
		t += NX_UP_RTO_MAX_MS;
		assert_int_equal(nx_up_stats_probe(j, t), 0);
	}
	assert_int_equal(nx_up_stats_rto_ms(j), NX_UP_RTO_MAX_MS);
	nx_up_stats_rtt(j, 150);
	assert_int_equal(nx_up_stats_rto_ms(j), NX_UP_RTO_MIN_MS);
	int k = nx_up_stats_index("rto-backoff-first");
	assert_int_equal(nx_up_stats_probe(k, t), 0); /* before any sample: twice the initial */
	assert_int_equal(nx_up_stats_rto_ms(k), 2 * NX_UP_RTO_INITIAL_MS);
	assert_int_equal(nx_up_stats_probe(-1, t), 0); /* no slot: never paced */
	nx_up_stats_resend(j);
	nx_up_stats_resend(j);
	struct nx_up_stats_row r = row_of(j);
	assert_int_equal(r.resends, 2);
	assert_int_equal(r.rto_ms, NX_UP_RTO_MIN_MS);
	assert_int_equal(row_of(i).resends, 0);
}

static void test_outcomes_counted(void **state)
{
	(void)state;
	int i = nx_up_stats_index("outcomes");
	nx_up_stats_outcome(i, NX_UP_O_TIMEOUT, 0);
	nx_up_stats_outcome(i, NX_UP_O_TIMEOUT, 0);
	nx_up_stats_outcome(i, NX_UP_O_CANCELLED, 0);
	nx_up_stats_outcome(i, NX_UP_O_ERROR, 123456);
	struct nx_up_stats_row r = row_of(i);
	assert_int_equal(r.outcome[NX_UP_O_TIMEOUT], 2);
	assert_int_equal(r.outcome[NX_UP_O_CANCELLED], 1);
	assert_int_equal(r.outcome[NX_UP_O_ERROR], 1);
	assert_int_equal(r.outcome[NX_UP_O_ANSWER], 0);
	/* only answers feed the latency histogram */
	assert_int_equal(r.count, 0);
	assert_true(r.sum_seconds == 0.0);
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		assert_int_equal(r.bucket[b], 0);
	}
}

static void test_buckets_cumulative(void **state)
{
	(void)state;
	int i = nx_up_stats_index("buckets-3ms");
	nx_up_stats_outcome(i, NX_UP_O_ANSWER, 3000); /* 3 ms */
	struct nx_up_stats_row r = row_of(i);
	assert_int_equal(r.outcome[NX_UP_O_ANSWER], 1);
	assert_int_equal(r.count, 1);
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		assert_int_equal(r.bucket[b], bounds_ms[b] >= 5 ? 1 : 0);
	}
	assert_true(r.sum_seconds > 0.0029 && r.sum_seconds < 0.0031);
}

static void test_buckets_le_boundary(void **state)
{
	(void)state;
	int i = nx_up_stats_index("buckets-edge");
	nx_up_stats_outcome(i, NX_UP_O_ANSWER, 5000); /* exactly 5 ms: in le=5 */
	nx_up_stats_outcome(i, NX_UP_O_ANSWER, 5001); /* just over: first in le=10 */
	nx_up_stats_outcome(i, NX_UP_O_ANSWER, 0);    /* 0: in every bucket */
	struct nx_up_stats_row r = row_of(i);
	assert_int_equal(r.count, 3);
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		uint64_t want = 1 + (bounds_ms[b] >= 5) + (bounds_ms[b] >= 10);
		assert_int_equal(r.bucket[b], want);
	}
	/* cumulative: never decreasing with the bound, and the last <= count */
	for (int b = 1; b < NX_UP_LATENCY_NBUCKETS; b++) {
		assert_true(r.bucket[b] >= r.bucket[b - 1]);
	}
	assert_true(r.bucket[NX_UP_LATENCY_NBUCKETS - 1] <= r.count);
}

/* Slower than the top bound: only in count/sum (the +Inf bucket of the exposition). */
static void test_buckets_overflow(void **state)
{
	(void)state;
	int i = nx_up_stats_index("buckets-slow");
	nx_up_stats_outcome(i, NX_UP_O_ANSWER, 6000000); /* 6 s */
	struct nx_up_stats_row r = row_of(i);
	assert_int_equal(r.count, 1);
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		assert_int_equal(r.bucket[b], 0);
	}
	assert_true(r.sum_seconds > 5.99 && r.sum_seconds < 6.01);
}

static void test_bad_index_ignored(void **state)
{
	(void)state;
	int n = nx_up_stats_count();
	nx_up_stats_outcome(-1, NX_UP_O_ANSWER, 1000);
	nx_up_stats_outcome(NX_UP_STATS_MAX, NX_UP_O_ERROR, 0);
	assert_int_equal(nx_up_stats_count(), n);
}

static void test_bounds_sorted(void **state)
{
	(void)state;
	for (int b = 1; b < NX_UP_LATENCY_NBUCKETS; b++) {
		assert_true(bounds_ms[b] > bounds_ms[b - 1]);
	}
}

/* Last: fills every slot. */
static void test_slots_exhausted(void **state)
{
	(void)state;
	char name[32];
	int last = -1;
	for (int k = 0; nx_up_stats_count() < NX_UP_STATS_MAX; k++) {
		snprintf(name, sizeof(name), "fill-%d", k);
		last = nx_up_stats_index(name);
		assert_true(last >= 0);
	}
	assert_int_equal(nx_up_stats_count(), NX_UP_STATS_MAX);
	assert_int_equal(nx_up_stats_index("one-too-many"), -1);
	assert_int_equal(nx_up_stats_count(), NX_UP_STATS_MAX);
	/* existing names still resolve when full */
	assert_int_equal(nx_up_stats_index("192.0.2.1:53"), 0);
	if (last >= 0) {
		assert_int_equal(nx_up_stats_index(name), last);
	}
}

/* EDNS lameness is remembered for NX_UP_EDNS_LAME_MS, per server, then forgotten. */
static void test_edns_memory_expires(void **state)
{
	(void)state;
	int a = nx_up_stats_index("edns-a"), b = nx_up_stats_index("edns-b");
	assert_true(a >= 0 && b >= 0);
	uint64_t t = 1000000;
	assert_true(nx_up_stats_edns_ok(a, t));
	nx_up_stats_edns_lame(a, t);
	assert_false(nx_up_stats_edns_ok(a, t));
	assert_false(nx_up_stats_edns_ok(a, t + NX_UP_EDNS_LAME_MS - 1));
	assert_true(nx_up_stats_edns_ok(a, t + NX_UP_EDNS_LAME_MS));
	assert_true(nx_up_stats_edns_ok(b, t)); /* the other server is untouched */
	assert_true(nx_up_stats_edns_ok(-1, t)); /* no slot: nothing remembered */
	nx_up_stats_edns_lame(-1, t);
	assert_true(nx_up_stats_edns_ok(-1, t));
}

/* 0x20 pauses at a mismatch; of mismatches while paused, none pauses again. */
static void test_caps_pause_on_mismatch(void **state)
{
	(void)state;
	int a = nx_up_stats_index("caps-a");
	int b = nx_up_stats_index("caps-b");
	assert_true(a >= 0 && b >= 0);
	uint64_t t = 5000000;
	assert_true(nx_up_stats_caps_ok(a, t));
	assert_true(nx_up_stats_caps_mismatch(a, t)); /* this one paused it */
	assert_false(nx_up_stats_caps_ok(a, t));
	assert_false(nx_up_stats_caps_mismatch(a, t + 1)); /* already paused: not again */
	assert_false(nx_up_stats_caps_ok(a, t + NX_UP_CAPS_OFF_MS - 1));
	assert_true(nx_up_stats_caps_ok(a, t + NX_UP_CAPS_OFF_MS + 1));
	assert_true(nx_up_stats_caps_ok(b, t)); /* the other server is untouched */
	assert_true(nx_up_stats_caps_mismatch(a, t + NX_UP_CAPS_OFF_MS + 2)); /* expired: again */
	assert_true(nx_up_stats_caps_mismatch(-1, t)); /* no slot: each attempt falls back */
	assert_true(nx_up_stats_caps_ok(-1, t));
}

/* Re-send pacing: the server answered a query sent after ours (ours was lost) or not. */
static void test_heard_after(void **state)
{
	(void)state;
	int a = nx_up_stats_index("heard-a");
	assert_false(nx_up_stats_heard_after(a, 0));
	nx_up_stats_heard(a, 1000);
	assert_true(nx_up_stats_heard_after(a, 999));
	assert_false(nx_up_stats_heard_after(a, 1000));
	nx_up_stats_heard(a, 500); /* an older query's answer: the latest stays */
	assert_true(nx_up_stats_heard_after(a, 999));
	assert_false(nx_up_stats_heard_after(-1, 0));
	nx_up_stats_heard(-1, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_index_same_name),
	    cmocka_unit_test(test_index_long_name_stable),
	    cmocka_unit_test(test_outcome_names),
	    cmocka_unit_test(test_outcomes_counted),
	    cmocka_unit_test(test_rto_estimate),
	    cmocka_unit_test(test_buckets_cumulative),
	    cmocka_unit_test(test_buckets_le_boundary),
	    cmocka_unit_test(test_buckets_overflow),
	    cmocka_unit_test(test_bad_index_ignored),
	    cmocka_unit_test(test_bounds_sorted),
	    cmocka_unit_test(test_edns_memory_expires),
	    cmocka_unit_test(test_caps_pause_on_mismatch),
	    cmocka_unit_test(test_heard_after),
	    cmocka_unit_test(test_slots_exhausted),
	};
	return cmocka_run_group_tests_name("upstream_stats", tests, NULL, NULL);
}

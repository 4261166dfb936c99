#include "upstream/upstream.h"

#include "base/err.h"
#include "upstream/impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct slot {
	char name[64];
	_Atomic uint64_t outcome[NX_UP_O__COUNT];
	_Atomic uint64_t bucket[NX_UP_LATENCY_NBUCKETS];
	_Atomic uint64_t count;
	_Atomic uint64_t sum_us;
	_Atomic uint64_t resends;
	_Atomic uint64_t conns;     /* TCP/DoT/DoH connections opened */
	_Atomic uint32_t srtt_us;   /* smoothed round trip, 0 before the first sample */
	_Atomic uint32_t rttvar_us; /* its mean deviation */
	_Atomic uint32_t backoff_ms; /* timeout doubled by a re-send, until a clean sample */
	_Atomic uint64_t probe_at_ms; /* a silent server takes no re-send before this */
	_Atomic uint64_t heard_sent_us; /* latest send time of a query it answered */
	_Atomic uint64_t plain_until_ms; /* no EDNS before this (impl.h), 0: EDNS */
	_Atomic uint64_t nocaps_until_ms; /* no 0x20 before this, 0: randomise */
};

static struct slot g_slots[NX_UP_STATS_MAX];
static atomic_int g_nslots;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const unsigned g_bounds[NX_UP_LATENCY_NBUCKETS] = NX_UP_LATENCY_BUCKETS_MS;

int nx_up_stats_index(const char *name)
{
	/* Names are stored cut to the slot; compare the cut form so a long name maps to one slot.
	 */
	char cut[sizeof(g_slots[0].name)];
	snprintf(cut, sizeof(cut), "%s", name);
	pthread_mutex_lock(&g_lock);
	int n = atomic_load(&g_nslots);
	for (int i = 0; i < n; i++) {
		if (strcmp(g_slots[i].name, cut) == 0) {
			pthread_mutex_unlock(&g_lock);
			return i;
		}
	}
	int idx = -1;
	if (n < NX_UP_STATS_MAX) {
		idx = n;
		memcpy(g_slots[idx].name, cut, sizeof(cut));
		atomic_store(&g_nslots, n + 1);
	}
	pthread_mutex_unlock(&g_lock);
	return idx;
}

int nx_up_stats_count(void)
{
	return atomic_load(&g_nslots);
}

void nx_up_stats_read(int i, struct nx_up_stats_row *row)
{
	struct slot *s = &g_slots[i];
	memcpy(row->name, s->name, sizeof(row->name));
	for (int o = 0; o < NX_UP_O__COUNT; o++) {
		row->outcome[o] = atomic_load_explicit(&s->outcome[o], memory_order_relaxed);
	}
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		row->bucket[b] = atomic_load_explicit(&s->bucket[b], memory_order_relaxed);
	}
	row->count = atomic_load_explicit(&s->count, memory_order_relaxed);
	row->sum_seconds = (double)atomic_load_explicit(&s->sum_us, memory_order_relaxed) / 1e6;
	row->resends = atomic_load_explicit(&s->resends, memory_order_relaxed);
	row->connections = atomic_load_explicit(&s->conns, memory_order_relaxed);
	row->rto_ms = nx_up_stats_rto_ms(i);
}

void nx_up_stats_conn(int idx)
{
	if (idx >= 0 && idx < NX_UP_STATS_MAX) {
		atomic_fetch_add_explicit(&g_slots[idx].conns, 1, memory_order_relaxed);
	}
}

const char *nx_up_outcome_name(enum nx_up_outcome o)
{
	static const char *const names[] = {"answer", "timeout", "cancelled", "error"};
	return names[o];
}

/* Internal to the module (declared in exchange.c's view through impl below). */
void nx_up_stats_outcome(int idx, enum nx_up_outcome o, uint64_t latency_us);
void nx_up_stats_outcome(int idx, enum nx_up_outcome o, uint64_t latency_us)
{
	if (idx < 0 || idx >= NX_UP_STATS_MAX) {
		return;
	}
	struct slot *s = &g_slots[idx];
	atomic_fetch_add_explicit(&s->outcome[o], 1, memory_order_relaxed);
	if (o != NX_UP_O_ANSWER) {
		return;
	}
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		if (latency_us <= (uint64_t)g_bounds[b] * 1000) {
			atomic_fetch_add_explicit(&s->bucket[b], 1, memory_order_relaxed);
		}
	}
	atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->sum_us, latency_us, memory_order_relaxed);
}

/*
 * Round-trip estimate per server (RFC 6298's SRTT and RTTVAR, gains 1/8 and 1/4), shared by the
 * workers. Updates are relaxed loads and stores, not read-modify-write: two workers' samples
 * landing at once may lose one, which an estimate can afford.
 */
void nx_up_stats_rtt(int idx, uint64_t rtt_us);
void nx_up_stats_rtt(int idx, uint64_t rtt_us)
{
	if (idx < 0 || idx >= NX_UP_STATS_MAX) {
		return;
	}
	struct slot *s = &g_slots[idx];
	uint32_t r = (uint32_t)NX_MIN(NX_MAX(rtt_us, 1), (uint64_t)UINT32_MAX / 8);
	uint32_t srtt = atomic_load_explicit(&s->srtt_us, memory_order_relaxed);
	uint32_t var = atomic_load_explicit(&s->rttvar_us, memory_order_relaxed);
	if (srtt == 0) {
		srtt = r;
		var = r / 2;
	} else {
		uint32_t dev = srtt > r ? srtt - r : r - srtt;
		var = (uint32_t)(((uint64_t)var * 3 + dev) / 4);
		srtt = (uint32_t)(((uint64_t)srtt * 7 + r) / 8);
	}
	atomic_store_explicit(&s->srtt_us, srtt, memory_order_relaxed);
	atomic_store_explicit(&s->rttvar_us, var, memory_order_relaxed);
	atomic_store_explicit(&s->backoff_ms, 0, memory_order_relaxed);
}

/*
 * A query to a server that has answered nothing sent after it went unanswered for its
 * timeout: the server is silent (down, or slow, or its link lost everything), not one datagram
 * lost. It gets one re-send per timeout, not one per waiting query, and each re-send doubles
 * its timeout (RFC 6298 5.5: the backed-off timeout holds until an answer to a query sent once
 * gives a fresh sample; without that, answers that only come after a re-send, which Karn's rule
 * does not sample, would never raise the estimate), so the re-sends to it fall off
 * exponentially, as TCP's one retransmission timer per connection does. A compare-and-swap
 * claims the turn: of the workers' attempts due at once, one re-sends.
 */
uint64_t nx_up_stats_probe(int idx, uint64_t now_ms)
{
	if (idx < 0 || idx >= NX_UP_STATS_MAX) {
		return 0;
	}
	struct slot *s = &g_slots[idx];
	uint64_t at = atomic_load_explicit(&s->probe_at_ms, memory_order_relaxed);
	if (now_ms < at) {
		return at;
	}
	uint32_t next = NX_MIN(2 * nx_up_stats_rto_ms(idx), (uint32_t)NX_UP_RTO_MAX_MS);
	if (!atomic_compare_exchange_strong_explicit(&s->probe_at_ms, &at, now_ms + next,
						     memory_order_relaxed, memory_order_relaxed)) {
		return NX_MAX(at, now_ms + 1); /* another worker's attempt took this turn */
	}
	atomic_store_explicit(&s->backoff_ms, next, memory_order_relaxed);
	return 0;
}

void nx_up_stats_heard(int idx, uint64_t sent_us)
{
	if (idx < 0 || idx >= NX_UP_STATS_MAX) {
		return;
	}
	_Atomic uint64_t *h = &g_slots[idx].heard_sent_us;
	/* load first: most answers are to the latest query, but a lagging worker's are not */
	if (atomic_load_explicit(h, memory_order_relaxed) < sent_us) {
		atomic_store_explicit(h, sent_us, memory_order_relaxed);
	}
}

bool nx_up_stats_heard_after(int idx, uint64_t sent_us)
{
	return idx >= 0 && idx < NX_UP_STATS_MAX &&
	       atomic_load_explicit(&g_slots[idx].heard_sent_us, memory_order_relaxed) > sent_us;
}

void nx_up_stats_resend(int idx);
void nx_up_stats_resend(int idx)
{
	if (idx >= 0 && idx < NX_UP_STATS_MAX) {
		atomic_fetch_add_explicit(&g_slots[idx].resends, 1, memory_order_relaxed);
	}
}

uint32_t nx_up_stats_rto_ms(int idx)
{
	if (idx < 0 || idx >= NX_UP_STATS_MAX) {
		return NX_UP_RTO_INITIAL_MS;
	}
	const struct slot *s = &g_slots[idx];
	uint64_t srtt = atomic_load_explicit(&s->srtt_us, memory_order_relaxed);
	uint64_t var = atomic_load_explicit(&s->rttvar_us, memory_order_relaxed);
	uint64_t backoff = atomic_load_explicit(&s->backoff_ms, memory_order_relaxed);
	uint64_t ms = srtt == 0 ? NX_UP_RTO_INITIAL_MS : (srtt + 4 * var + 999) / 1000;
	ms = NX_MAX(ms, backoff);
	return (uint32_t)NX_MIN(NX_MAX(ms, (uint64_t)NX_UP_RTO_MIN_MS), (uint64_t)NX_UP_RTO_MAX_MS);
}

/* ---- query-form memory (impl.h) ---- */

static bool slot_ok(int idx)
{
	return idx >= 0 && idx < NX_UP_STATS_MAX;
}

bool nx_up_stats_edns_ok(int idx, uint64_t now_ms)
{
	return !slot_ok(idx) ||
	       atomic_load_explicit(&g_slots[idx].plain_until_ms, memory_order_relaxed) <= now_ms;
}

void nx_up_stats_edns_lame(int idx, uint64_t now_ms)
{
	if (slot_ok(idx)) {
		atomic_store_explicit(&g_slots[idx].plain_until_ms, now_ms + NX_UP_EDNS_LAME_MS,
				      memory_order_relaxed);
	}
}

bool nx_up_stats_caps_ok(int idx, uint64_t now_ms)
{
	return !slot_ok(idx) ||
	       atomic_load_explicit(&g_slots[idx].nocaps_until_ms, memory_order_relaxed) <= now_ms;
}

bool nx_up_stats_caps_mismatch(int idx, uint64_t now_ms)
{
	if (!slot_ok(idx)) {
		return true;
	}
	/* exchange, not store: of two mismatches at once (two workers), one pauses the server */
	uint64_t was = atomic_exchange_explicit(&g_slots[idx].nocaps_until_ms,
						now_ms + NX_UP_CAPS_OFF_MS, memory_order_relaxed);
	return was <= now_ms;
}

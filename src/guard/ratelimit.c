/*
 * Per-client rate limiting: GCRA over a fixed, set-associative, lock-free table.
 *
 * GCRA keeps one number per client, its theoretical arrival time (TAT): a query at `now`
 * is allowed when max(TAT, now) + T - now <= burst * T (T = 1/qps), and then TAT becomes
 * max(TAT, now) + T. An idle client (TAT <= now) may send `burst` queries at once, then one
 * every T: a token bucket of depth `burst` refilled at qps, in one 64-bit word, so a CAS
 * updates it without a lock. A slot whose TAT is in the past holds no state at all, which
 * makes it free to recycle; recycling one whose TAT is still ahead forgets a client's debt
 * (that client is limited less, never more) and is counted as an eviction.
 *
 * Races are benign by design: the key and the TAT of a slot are separate atomics, so a worker
 * that matches a key in the instant another worker recycles the slot may charge one query to
 * the newcomer's fresh state. The limit is a protection, not an invoice; no lock is worth it.
 */
#include "guard/guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"

#define SETS (NX_CONF_RATE_LIMIT_SLOTS / NX_GUARD_RL_WAYS)
/* "Over its limit" lines for all clients together: a burst of 60, then one a second. Each
 * prefix logs once a minute, but a flood from thousands of (spoofed) prefixes must not turn
 * into thousands of log lines; the lines held back are counted. */
#define LOG_LINES_BURST 60
#define LOG_LINES_INTERVAL_US 1000000u

struct slot {
	_Atomic uint64_t key;	 /* hash of family, prefix length and masked address; 0 = free */
	_Atomic uint64_t tat;	 /* theoretical arrival time, monotonic µs */
	_Atomic uint64_t logged; /* when the last "over its limit" line was logged (µs); 0 never */
};

static_assert(sizeof(struct slot) == 24, "the documented table size is 24 bytes a slot");
static_assert(NX_CONF_RATE_LIMIT_SLOTS * sizeof(struct slot) == 96 * 1024,
	      "access.rate_limit.qps documents a 96 KiB table");
static_assert(NX_CONF_RATE_LIMIT_SLOTS % NX_GUARD_RL_WAYS == 0, "whole sets");

struct nx_guard_rl {
	uint64_t seed;
	_Atomic uint64_t log_tat; /* GCRA state of the log budget (LOG_LINES_*) */
	struct slot slots[NX_CONF_RATE_LIMIT_SLOTS];
};

size_t nx_guard_rl_bytes(void)
{
	return sizeof(struct nx_guard_rl);
}

int nx_guard_rl_new(uint64_t seed, struct nx_guard_rl **out)
{
	struct nx_guard_rl *t = nx_mem_calloc(NX_OWNER_rate_limit, 1, sizeof(*t));
	if (!t) {
		return -ENOMEM;
	}
	t->seed = seed;
	*out = t;
	return 0;
}

void nx_guard_rl_free(struct nx_guard_rl *t)
{
	if (t) {
		nx_mem_free(NX_OWNER_rate_limit, t, sizeof(*t));
	}
}

void nx_guard_rl_params_from(const struct nx_conf *c, struct nx_guard_rl_params *out)
{
	out->qps = c->rl_qps;
	out->burst = c->rl_burst;
	out->ipv4_prefix = c->rl_ipv4_prefix;
	out->ipv6_prefix = c->rl_ipv6_prefix;
}

/* The address with host bits past `prefix` cleared; returns its byte length. */
static size_t masked(int family, const uint8_t *addr, unsigned prefix, uint8_t out[16])
{
	size_t n = family == AF_INET ? 4 : 16;
	memset(out, 0, 16);
	unsigned full = prefix / 8, rest = prefix % 8;
	memcpy(out, addr, NX_MIN(full, n));
	if (rest && full < n) {
		out[full] = (uint8_t)(addr[full] & (0xff << (8 - rest)));
	}
	return n;
}

static unsigned prefix_of(const struct nx_guard_rl_params *p, int family)
{
	unsigned v = family == AF_INET ? p->ipv4_prefix : p->ipv6_prefix;
	unsigned max = family == AF_INET ? 32 : 128;
	return v == 0 || v > max ? max : v;
}

static uint64_t key_of(const struct nx_guard_rl *t, const struct nx_guard_rl_params *p, int family,
		       const uint8_t *addr)
{
	uint8_t buf[18];
	unsigned pl = prefix_of(p, family);
	buf[0] = family == AF_INET ? 4 : 6;
	buf[1] = (uint8_t)pl;
	size_t n = masked(family, addr, pl, buf + 2);
	uint64_t h = XXH3_64bits_withSeed(buf, n + 2, t->seed);
	return h ? h : 1; /* 0 marks a free slot */
}

/* The slot of `key`, taking the free or least-indebted slot of its set when it has none. */
static struct slot *slot_for(struct nx_guard_rl *t, uint64_t key, uint64_t now_us)
{
	struct slot *set = &t->slots[(key >> 32) % SETS * NX_GUARD_RL_WAYS];
	struct slot *victim = NULL;
	uint64_t victim_tat = UINT64_MAX;
	for (unsigned i = 0; i < NX_GUARD_RL_WAYS; i++) {
		uint64_t k = atomic_load_explicit(&set[i].key, memory_order_acquire);
		if (k == key) {
			return &set[i];
		}
		uint64_t tat = k ? atomic_load_explicit(&set[i].tat, memory_order_relaxed) : 0;
		if (tat < victim_tat) {
			victim = &set[i];
			victim_tat = tat;
		}
	}
	uint64_t old = atomic_load_explicit(&victim->key, memory_order_relaxed);
	if (!atomic_compare_exchange_strong_explicit(&victim->key, &old, key, memory_order_acq_rel,
						     memory_order_relaxed)) {
		/* Another worker took this slot this instant (maybe for the same client): let the
		 * query pass rather than loop; the next one finds a settled set. */
		return NULL;
	}
	uint64_t prev = atomic_exchange_explicit(&victim->tat, now_us, memory_order_relaxed);
	atomic_store_explicit(&victim->logged, 0, memory_order_relaxed);
	if (old != 0 && prev > now_us) {
		nx_stat_inc(NX_STAT_RL_EVICTED);
	}
	return victim;
}

/* One GCRA step: take a unit at now_us if the state allows it (false: over the limit). */
static bool gcra_take(_Atomic uint64_t *state, uint64_t now_us, uint64_t interval,
		      uint64_t tolerance)
{
	uint64_t tat = atomic_load_explicit(state, memory_order_relaxed);
	for (;;) {
		uint64_t next = NX_MAX(tat, now_us) + interval;
		if (next - now_us > tolerance) {
			return false;
		}
		if (atomic_compare_exchange_weak_explicit(state, &tat, next, memory_order_relaxed,
							  memory_order_relaxed)) {
			return true;
		}
	}
}

enum nx_guard_rl_verdict nx_guard_rl_check(struct nx_guard_rl *t,
					   const struct nx_guard_rl_params *p, int family,
					   const uint8_t *addr, uint64_t now_us)
{
	if (!t || p->qps == 0 || (family != AF_INET && family != AF_INET6)) {
		return NX_GUARD_RL_PASS;
	}
	struct slot *s = slot_for(t, key_of(t, p, family, addr), now_us);
	if (!s) {
		return NX_GUARD_RL_PASS;
	}
	uint64_t interval = NX_MAX(1000000u / p->qps, 1u);
	if (gcra_take(&s->tat, now_us, interval, (uint64_t)NX_MAX(p->burst, 1u) * interval)) {
		return NX_GUARD_RL_PASS;
	}
	/* At most one line per NX_GUARD_RL_LOG_INTERVAL_US since the last one (not per calendar
	 * minute, which would allow two lines a moment apart across a minute boundary); the CAS
	 * makes one worker the logger when several see the client over its limit at once. */
	uint64_t last = atomic_load_explicit(&s->logged, memory_order_relaxed);
	if (last != 0 && now_us - last < NX_GUARD_RL_LOG_INTERVAL_US) {
		return NX_GUARD_RL_OVER;
	}
	uint64_t stamp = NX_MAX(now_us, 1u); /* 0 means never logged */
	return atomic_compare_exchange_strong_explicit(&s->logged, &last, stamp,
						       memory_order_relaxed, memory_order_relaxed)
		   ? NX_GUARD_RL_OVER_LOG
		   : NX_GUARD_RL_OVER;
}

void nx_guard_rl_prefix_text(const struct nx_guard_rl_params *p, int family, const uint8_t *addr,
			     char *out, size_t cap)
{
	uint8_t m[16];
	unsigned pl = prefix_of(p, family);
	masked(family, addr, pl, m);
	char a[INET6_ADDRSTRLEN];
	if (!inet_ntop(family, m, a, sizeof(a))) {
		a[0] = 0;
	}
	snprintf(out, cap, "%s/%u", a, pl);
}

static bool exempt(const struct nx_conf *c, int family, const uint8_t *a)
{
	for (size_t i = 0; i < c->n_rl_exempt; i++) {
		if (nx_conf_prefix_match(&c->rl_exempt[i], family, a)) {
			return true;
		}
	}
	return false;
}

bool nx_guard_rl_admit(struct nx_guard_rl *t, const struct nx_conf *c, const struct sockaddr *sa,
		       uint64_t now_us)
{
	int family;
	const uint8_t *a;
	if (!t || c->rl_qps == 0 || !nx_conf_client_bytes(sa, &family, &a) ||
	    exempt(c, family, a)) {
		return true;
	}
	struct nx_guard_rl_params p;
	nx_guard_rl_params_from(c, &p);
	enum nx_guard_rl_verdict v = nx_guard_rl_check(t, &p, family, a, now_us);
	if (v == NX_GUARD_RL_OVER_LOG &&
	    !gcra_take(&t->log_tat, now_us, LOG_LINES_INTERVAL_US,
		       (uint64_t)LOG_LINES_BURST * LOG_LINES_INTERVAL_US)) {
		nx_stat_inc(NX_STAT_RL_LOG_SUPPRESSED);
	} else if (v == NX_GUARD_RL_OVER_LOG) {
		char addr[INET6_ADDRSTRLEN], net[INET6_ADDRSTRLEN + 8];
		if (!inet_ntop(family, a, addr, sizeof(addr))) {
			addr[0] = 0;
		}
		nx_guard_rl_prefix_text(&p, family, a, net, sizeof(net));
		nx_log_client(
		    NX_LOG_WARN, "guard", addr,
		    "rate limit: client %s (prefix %s) over %u queries/s (burst %u), dropping or "
		    "refusing its queries (logged once a minute)",
		    addr, net, p.qps, p.burst);
	}
	return v == NX_GUARD_RL_PASS;
}

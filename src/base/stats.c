#include "base/stats.h"

#include <stdatomic.h>

#include "base/err.h"

/* One block per registered thread; block 0 is shared by unregistered threads (atomic adds). */
#define NX_STATS_MAX_BLOCKS 64 /* threads: fixed and few (workers <= 8 + control + writer) */

struct block {
	_Atomic uint64_t v[NX_STAT__COUNT];
} __attribute__((aligned(64)));

static struct block g_blocks[NX_STATS_MAX_BLOCKS];
static atomic_int g_nblocks = 1;
static _Thread_local struct block *t_block;

static _Atomic int64_t g_gauge[NX_GAUGE__COUNT];
static _Atomic int64_t g_peak[NX_GAUGE__COUNT];

static const struct nx_stat_desc descs[] = {
#define NX_STAT_DESC(id, fam, labels, help) {fam, labels, help},
	NX_COUNTERS(NX_STAT_DESC)
#undef NX_STAT_DESC
};
static const char *const gauge_fams[] = {
#define NX_GAUGE_FAM(id, fam, help) fam,
	NX_GAUGES(NX_GAUGE_FAM)
#undef NX_GAUGE_FAM
};
static const char *const gauge_helps[] = {
#define NX_GAUGE_HELP(id, fam, help) help,
	NX_GAUGES(NX_GAUGE_HELP)
#undef NX_GAUGE_HELP
};

int nx_stats_thread_register(void)
{
	if (t_block) {
		return 0;
	}
	int i = atomic_fetch_add(&g_nblocks, 1);
	if (i >= NX_STATS_MAX_BLOCKS) {
		atomic_fetch_sub(&g_nblocks, 1);
		return NX_ELIMIT;
	}
	t_block = &g_blocks[i];
	return 0;
}

void nx_stat_add(enum nx_stat s, uint64_t n)
{
	struct block *b = t_block;
	if (b) {
		/* single writer: no locked RMW needed */
		uint64_t v = atomic_load_explicit(&b->v[s], memory_order_relaxed);
		atomic_store_explicit(&b->v[s], v + n, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&g_blocks[0].v[s], n, memory_order_relaxed);
	}
}

uint64_t nx_stat_read(enum nx_stat s)
{
	uint64_t sum = 0;
	int n = NX_MIN(atomic_load(&g_nblocks), NX_STATS_MAX_BLOCKS);
	for (int i = 0; i < n; i++) {
		sum += atomic_load_explicit(&g_blocks[i].v[s], memory_order_relaxed);
	}
	return sum;
}

const struct nx_stat_desc *nx_stat_desc(enum nx_stat s)
{
	return &descs[s];
}

void nx_gauge_add(enum nx_gauge g, int64_t delta)
{
	int64_t v = atomic_fetch_add_explicit(&g_gauge[g], delta, memory_order_relaxed) + delta;
	if (delta > 0) {
		int64_t p = atomic_load_explicit(&g_peak[g], memory_order_relaxed);
		while (v > p && !atomic_compare_exchange_weak_explicit(
					&g_peak[g], &p, v, memory_order_relaxed, memory_order_relaxed)) {
		}
	}
}

int64_t nx_gauge_read(enum nx_gauge g)
{
	return atomic_load_explicit(&g_gauge[g], memory_order_relaxed);
}

int64_t nx_gauge_peak(enum nx_gauge g)
{
	return atomic_load_explicit(&g_peak[g], memory_order_relaxed);
}

const char *nx_gauge_family(enum nx_gauge g)
{
	return gauge_fams[g];
}

const char *nx_gauge_help(enum nx_gauge g)
{
	return gauge_helps[g];
}

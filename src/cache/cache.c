/*
 * The sharded table: slots, chained index, the eviction policy, the global byte budget.
 *
 * Each shard is one allocation (header | entry slots | probation ring | bucket heads | ghost
 * cells), locked by its own mutex. Slots are fixed at creation; a free slot has blob == NULL and
 * sits on the shard's free list.
 *
 * Eviction is S3-FIFO (Yang et al., SOSP 2023) over the slots: a new entry starts on probation
 * (SLOT_SMALL, a FIFO ring with a record per slot); the main queue is every other entry, swept
 * by a CLOCK hand with a 2-bit use count. When room is needed and probation holds its share (a
 * tenth of the entries held), the oldest probationer leaves: to the main queue if it was hit
 * while waiting, otherwise out of the cache, its hash remembered in a direct-mapped "ghost"
 * table. A put whose
 * key is in the ghost table (evicted from probation, then asked for again) goes straight to the
 * main queue. So a stream of names asked for once (a scan, a burst of random subdomains) cycles
 * through probation only and never evicts the main queue's working set, which plain CLOCK
 * cannot promise: there, every entry that a sweep finds unreferenced goes.
 * The byte budget is one atomic shared by all shards: a put reserves its copy's bytes with a
 * compare-and-swap that never lets live_bytes pass the budget, evicting from its own shard
 * (then, once that is empty, from the others in round-robin order; one lock at a time) until
 * the reservation fits; never the key's own old copy, which a refresh replaces in place (so a
 * refresh under byte pressure may evict one copy more than it needs, given back when the old
 * copy is freed). Freed bytes are released only after the copy is freed, so live_bytes >=
 * bytes actually held, always <= budget.
 */
#include "cache/cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "cache/impl.h"

#define KEY_DO 0x01
#define KEY_CD 0x02

#define SLOT_PREFETCHED 0x02 /* prefetch already signalled for this stored copy */
#define SLOT_SMALL 0x04	     /* on probation: in the FIFO ring, not in the main queue */
#define SLOT_FREQ_SHIFT 4    /* 2-bit use count: hits, less one per pass of the main hand */
#define SLOT_FREQ_MASK 0x30
#define SLOT_FREQ_MAX 3

struct entry {
	uint64_t hash;
	struct nx_cache_blob *blob; /* owned; NULL = free slot */
	uint64_t stored_ms;	    /* caller's now_ms at put */
	uint32_t ttl;		    /* entry lifetime in s (fresh while age < ttl) */
	uint32_t hits;		    /* fresh hits since stored (saturating) */
	int32_t next;		    /* bucket chain or free list, -1 = end */
	uint16_t qtype;
	uint8_t kflags; /* KEY_DO | KEY_CD */
	uint8_t state;	/* SLOT_* and the use count */
};
/* Slots are allocated up front for cache.size entries: their size is in the memory budget. */
static_assert(sizeof(struct entry) == 40, "cache slot size is part of the memory budget");

struct shard {
	pthread_mutex_t lock;
	struct entry *e; /* cap slots, in this allocation */
	uint64_t *fifo;	 /* probation ring: (low 32 bits of hash << 32) | slot, oldest first */
	int32_t *bucket; /* mask + 1 chain heads, in this allocation */
	uint32_t *ghost; /* ghost_mask + 1 cells: (uint32_t)hash | 1 of probation's evictions */
	size_t alloc_size;
	uint32_t cap;
	uint32_t mask;
	uint32_t count;
	uint32_t hand; /* main queue's CLOCK hand (a slot index) */
	int32_t free_head;
	uint32_t small_count; /* entries on probation; its share: 1/NX_CACHE_SMALL_DIVISOR */
	uint32_t fifo_cap, fifo_head, fifo_len; /* records in the ring, some stale (see fifo_pop) */
	uint32_t ghost_mask;
	/* counters, under lock */
	uint64_t hits, stale_hits, misses, inserts, replaced, evictions, expired, prefetch;
	uint64_t promoted, readmitted;
};

struct nx_cache {
	struct nx_cache_params p; /* p.alloc points at `alloc` below */
	struct nx_cache_alloc alloc;
	uint64_t budget;
	unsigned nshards;
	unsigned shard_bits;
	size_t slot_bytes;
	_Atomic uint64_t live_bytes;
	atomic_uint evict_cursor;
	_Atomic uint64_t oversized, alloc_failures, no_room, uncacheable;
	struct shard *shard[NX_CACHE_SHARDS_MAX]; /* owned */
};

static void *default_alloc(void *ctx, enum nx_owner owner, size_t size)
{
	return nx_mem_alloc(owner, size);
}

static void default_free(void *ctx, enum nx_owner owner, void *p, size_t size)
{
	nx_mem_free(owner, p, size);
}

static const struct nx_cache_alloc ledger_alloc = {default_alloc, default_free, NULL};

void nx_cache_params_default(struct nx_cache_params *p)
{
	*p = (struct nx_cache_params){
	    .size = NX_CACHE_SIZE_DEFAULT,
	    .min_ttl = 0,
	    .max_ttl = NX_CACHE_MAX_TTL_DEFAULT,
	    .neg_max_ttl = NX_CACHE_NEG_MAX_TTL_DEFAULT,
	    .servfail_ttl = NX_CACHE_SERVFAIL_TTL_DEFAULT,
	};
}

uint64_t nx_cache_budget_bytes(uint32_t size)
{
	return NX_MAX((uint64_t)NX_CACHE_BYTES_PER_ENTRY * size, (uint64_t)NX_CACHE_BYTES_FLOOR);
}

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static unsigned auto_shards(uint32_t size)
{
	unsigned n = NX_CACHE_SHARDS_DEFAULT;
	while (n > 1 && size / n < NX_CACHE_SHARD_MIN_ENTRIES) {
		n /= 2;
	}
	return n;
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t n = 1;
	while (n < v) {
		n *= 2;
	}
	return n;
}

static struct shard *shard_new(struct nx_cache *c, uint32_t cap)
{
	uint32_t nb = pow2_at_least(cap);
	/* A record for every slot (an empty cache fills on probation) and a few stale ones. */
	uint32_t fifo_cap = cap + 8;
	size_t size = sizeof(struct shard) + (size_t)cap * sizeof(struct entry) +
		      (size_t)fifo_cap * sizeof(uint64_t) + (size_t)nb * sizeof(int32_t) +
		      (size_t)nb * sizeof(uint32_t);
	struct shard *s = c->alloc.alloc(c->alloc.ctx, NX_OWNER_cache_slots, size);
	if (!s) {
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		c->alloc.free(c->alloc.ctx, NX_OWNER_cache_slots, s, size);
		return NULL;
	}
	s->e = (struct entry *)(s + 1);
	s->fifo = (uint64_t *)(s->e + cap);
	s->bucket = (int32_t *)(s->fifo + fifo_cap);
	s->ghost = (uint32_t *)(s->bucket + nb);
	s->alloc_size = size;
	s->cap = cap;
	s->mask = nb - 1;
	s->fifo_cap = fifo_cap;
	s->ghost_mask = nb - 1;
	for (uint32_t i = 0; i < cap; i++) {
		s->e[i] = (struct entry){.next = i + 1 < cap ? (int32_t)(i + 1) : -1};
	}
	s->free_head = 0;
	memset(s->bucket, 0xff, (size_t)nb * sizeof(int32_t)); /* -1 */
	memset(s->ghost, 0, (size_t)nb * sizeof(uint32_t));
	return s;
}

int nx_cache_new(const struct nx_cache_params *p, struct nx_cache **out)
{
	if (!p || p->size == 0 || p->size > NX_CACHE_SIZE_MAX || p->min_ttl > p->max_ttl) {
		return -EINVAL;
	}
	if (p->shards &&
	    (!is_pow2(p->shards) || p->shards > NX_CACHE_SHARDS_MAX || p->shards > p->size)) {
		return -EINVAL;
	}
	if (p->alloc && (!p->alloc->alloc || !p->alloc->free)) {
		return -EINVAL;
	}
	const struct nx_cache_alloc *a = p->alloc ? p->alloc : &ledger_alloc;
	struct nx_cache *c = a->alloc(a->ctx, NX_OWNER_cache_slots, sizeof(*c));
	if (!c) {
		return -ENOMEM;
	}
	memset(c, 0, sizeof(*c));
	c->p = *p;
	c->alloc = *a;
	c->p.alloc = &c->alloc;
	c->budget = nx_cache_budget_bytes(p->size);
	c->nshards = p->shards ? p->shards : auto_shards(p->size);
	while ((1u << c->shard_bits) < c->nshards) {
		c->shard_bits++;
	}
	c->slot_bytes = sizeof(*c);
	for (unsigned i = 0; i < c->nshards; i++) {
		uint32_t cap = p->size / c->nshards + (i < p->size % c->nshards ? 1 : 0);
		c->shard[i] = shard_new(c, cap);
		if (!c->shard[i]) {
			nx_cache_free(c);
			return -ENOMEM;
		}
		c->slot_bytes += c->shard[i]->alloc_size;
	}
	*out = c;
	return 0;
}

/* Free a list of unlinked copies and give their bytes back to the budget. */
static void release(struct nx_cache *c, struct nx_cache_blob *list)
{
	while (list) {
		struct nx_cache_blob *next = list->next_free;
		uint32_t size = list->size;
		c->alloc.free(c->alloc.ctx, NX_OWNER_cache_responses, list, size);
		atomic_fetch_sub_explicit(&c->live_bytes, size, memory_order_relaxed);
		list = next;
	}
}

/* Unlink slot i (under lock); its copy goes onto *dead. */
static void unlink_slot(struct shard *s, int32_t i, struct nx_cache_blob **dead)
{
	struct entry *e = &s->e[i];
	int32_t *link = &s->bucket[e->hash & s->mask];
	while (*link != i) {
		nx_require(*link >= 0);
		link = &s->e[*link].next;
	}
	*link = e->next;
	if (e->state & SLOT_SMALL) {
		s->small_count--; /* its ring record goes stale */
	}
	e->blob->next_free = *dead;
	*dead = e->blob;
	e->blob = NULL;
	e->next = s->free_head;
	s->free_head = i;
	s->count--;
}

static void flush_shard(struct nx_cache *c, struct shard *s)
{
	struct nx_cache_blob *dead = NULL;
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->cap; i++) {
		if (s->e[i].blob) {
			unlink_slot(s, (int32_t)i, &dead);
		}
	}
	s->hand = 0;
	s->fifo_head = s->fifo_len = 0;
	memset(s->ghost, 0, ((size_t)s->ghost_mask + 1) * sizeof(uint32_t));
	pthread_mutex_unlock(&s->lock);
	release(c, dead);
}

void nx_cache_flush(struct nx_cache *c)
{
	if (!c) {
		return;
	}
	for (unsigned i = 0; i < c->nshards; i++) {
		flush_shard(c, c->shard[i]);
	}
}

void nx_cache_free(struct nx_cache *c)
{
	if (!c) {
		return;
	}
	for (unsigned i = 0; i < c->nshards; i++) {
		struct shard *s = c->shard[i];
		if (!s) {
			continue;
		}
		flush_shard(c, s);
		pthread_mutex_destroy(&s->lock);
		c->alloc.free(c->alloc.ctx, NX_OWNER_cache_slots, s, s->alloc_size);
	}
	struct nx_cache_alloc a = c->alloc;
	a.free(a.ctx, NX_OWNER_cache_slots, c, sizeof(*c));
}

/* Lower-case the name and hash (name, type, class, flags). */
struct hkey {
	uint8_t buf[NX_DNS_NAME_MAX + 5]; /* lower-cased name | qtype | qclass | kflags */
	uint8_t len;
	uint8_t kflags;
	uint64_t hash;
};

static int make_key(const struct nx_cache *c, const struct nx_cache_key *k, struct hkey *h)
{
	if (!k || !k->name || k->name_len == 0) {
		return -EINVAL;
	}
	for (size_t i = 0; i < k->name_len; i++) {
		h->buf[i] = nx_cache_lower(k->name[i]);
	}
	h->len = k->name_len;
	h->kflags = (uint8_t)((k->do_bit ? KEY_DO : 0) | (k->cd ? KEY_CD : 0));
	uint8_t *t = h->buf + k->name_len;
	t[0] = (uint8_t)(k->qtype >> 8);
	t[1] = (uint8_t)k->qtype;
	t[2] = (uint8_t)(k->qclass >> 8);
	t[3] = (uint8_t)k->qclass;
	t[4] = h->kflags;
	h->hash = XXH3_64bits_withSeed(h->buf, (size_t)k->name_len + 5, c->p.hash_seed);
	return 0;
}

static struct shard *shard_of(const struct nx_cache *c, uint64_t hash)
{
	return c->shard[c->shard_bits ? hash >> (64 - c->shard_bits) : 0];
}

static bool key_eq(const struct entry *e, const struct hkey *h, const struct nx_cache_key *k)
{
	const struct nx_cache_blob *b = e->blob;
	if (e->hash != h->hash || e->qtype != k->qtype || e->kflags != h->kflags ||
	    b->qclass != k->qclass || b->name_len != h->len) {
		return false;
	}
	const uint8_t *name = nx_cache_blob_wire(b) + NX_DNS_HDR_LEN;
	for (size_t i = 0; i < h->len; i++) {
		if (nx_cache_lower(name[i]) != h->buf[i]) {
			return false;
		}
	}
	return true;
}

static int32_t find(const struct shard *s, const struct hkey *h, const struct nx_cache_key *k)
{
	for (int32_t i = s->bucket[h->hash & s->mask]; i >= 0; i = s->e[i].next) {
		if (key_eq(&s->e[i], h, k)) {
			return i;
		}
	}
	return -1;
}

enum age_state { FRESH, STALE, DEAD };

static enum age_state age_of(const struct nx_cache *c, const struct entry *e, uint64_t now_ms,
			     uint64_t *age_ms)
{
	uint64_t age = now_ms > e->stored_ms ? now_ms - e->stored_ms : 0;
	uint64_t ttl_ms = (uint64_t)e->ttl * 1000;
	*age_ms = age;
	if (age < ttl_ms) {
		return FRESH;
	}
	return age < ttl_ms + (uint64_t)c->p.stale_window * 1000 ? STALE : DEAD;
}

static unsigned freq_of(const struct entry *e)
{
	return (e->state & SLOT_FREQ_MASK) >> SLOT_FREQ_SHIFT;
}

static void set_freq(struct entry *e, unsigned f)
{
	e->state = (uint8_t)((e->state & ~SLOT_FREQ_MASK) | (f << SLOT_FREQ_SHIFT));
}

static uint32_t ghost_cell(uint64_t hash)
{
	return (uint32_t)hash | 1; /* never 0, the empty cell */
}

static void ghost_add(struct shard *s, uint64_t hash)
{
	s->ghost[(hash >> 32) & s->ghost_mask] = ghost_cell(hash);
}

/* Was this key evicted from probation lately? Forgets it either way it is asked. */
static bool ghost_take(struct shard *s, uint64_t hash)
{
	uint32_t *g = &s->ghost[(hash >> 32) & s->ghost_mask];
	if (*g != ghost_cell(hash)) {
		return false;
	}
	*g = 0;
	return true;
}

/*
 * Take the oldest record off the ring: its slot if it is live, -1 if it was stale. A record is
 * stale when its slot was freed (and maybe reused) since: the slot is no longer on probation,
 * or holds another key.
 */
static int32_t fifo_pop_one(struct shard *s)
{
	uint64_t r = s->fifo[s->fifo_head];
	s->fifo_head = s->fifo_head + 1 == s->fifo_cap ? 0 : s->fifo_head + 1;
	s->fifo_len--;
	int32_t i = (int32_t)(uint32_t)r;
	const struct entry *e = &s->e[i];
	if (e->blob && (e->state & SLOT_SMALL) && (uint32_t)e->hash == (uint32_t)(r >> 32)) {
		return i;
	}
	return -1;
}

/* Oldest live probationer, its record taken off the ring; -1 when none is left. */
static int32_t fifo_pop(struct shard *s)
{
	while (s->fifo_len) {
		int32_t i = fifo_pop_one(s);
		if (i >= 0) {
			return i;
		}
	}
	return -1;
}

/* Move slot i from probation to the main queue; counted as a promotion when it was hit there. */
static void promote(struct shard *s, int32_t i)
{
	if (freq_of(&s->e[i]) > 0) {
		s->promoted++;
	}
	s->e[i].state &= (uint8_t)~SLOT_SMALL;
	s->small_count--;
}

/* Add slot i's record at the tail of the ring (which has room). */
static void fifo_append(struct shard *s, int32_t i)
{
	uint32_t at = s->fifo_head + s->fifo_len;
	if (at >= s->fifo_cap) {
		at -= s->fifo_cap;
	}
	s->fifo[at] = ((uint64_t)(uint32_t)s->e[i].hash << 32) | (uint32_t)i;
	s->fifo_len++;
}

/*
 * Put slot i on probation. The ring has a record for every slot and 8 more, so it is full only
 * when stale records crowd it: then its oldest record goes, and if that one is live its entry
 * moves up, hit or not (rare: it needs 8 stale records and a live one at the head).
 */
static void fifo_push(struct shard *s, int32_t i)
{
	if (s->fifo_len == s->fifo_cap) {
		int32_t j = fifo_pop_one(s);
		if (j >= 0) {
			promote(s, j);
		}
	}
	fifo_append(s, i);
	s->e[i].state |= SLOT_SMALL;
	s->small_count++;
}

static void drop(struct shard *s, int32_t i, enum age_state st, struct nx_cache_blob **dead)
{
	unlink_slot(s, i, dead);
	if (st == DEAD) {
		s->expired++;
	} else {
		s->evictions++;
	}
}

/*
 * Evict from probation (under lock): the oldest probationer that was hit moves to the main
 * queue, one that was not leaves (into the ghost table). The entry with hash *spare (a key
 * being refreshed: its copy replaces this one) is never the victim; unhit, it goes back to
 * the tail. Returns false if probation ran out of candidates.
 */
static bool evict_small(struct nx_cache *c, struct shard *s, uint64_t now_ms,
			struct nx_cache_blob **dead, const uint64_t *spare)
{
	bool spared = false;
	for (;;) {
		int32_t i = fifo_pop(s);
		if (i < 0) {
			return false;
		}
		struct entry *e = &s->e[i];
		uint64_t age;
		enum age_state st = age_of(c, e, now_ms, &age);
		if (st == FRESH && freq_of(e) > 0) {
			promote(s, i);
			continue;
		}
		if (spare && e->hash == *spare) {
			fifo_append(s, i); /* the pop made room */
			if (spared) {
				return false; /* round the whole ring: nothing else is left */
			}
			spared = true;
			continue;
		}
		if (st == FRESH) {
			ghost_add(s, e->hash);
		}
		drop(s, i, st, dead);
		return true;
	}
}

/*
 * Evict from the main queue by CLOCK (under lock): an entry the hand finds with a use count
 * loses one and stays; entries past their TTL get no second chance. Dead ones count as
 * expired, the rest as evictions.
 */
static bool evict_main(struct nx_cache *c, struct shard *s, uint64_t now_ms,
		       struct nx_cache_blob **dead, const uint64_t *spare)
{
	/* Each pass takes one off every count, so the loop ends by the fourth. */
	for (uint64_t step = 0; step <= (SLOT_FREQ_MAX + 1) * (uint64_t)s->cap; step++) {
		int32_t i = (int32_t)s->hand;
		struct entry *e = &s->e[i];
		s->hand = s->hand + 1 == s->cap ? 0 : s->hand + 1;
		if (!e->blob || (e->state & SLOT_SMALL) || (spare && e->hash == *spare)) {
			continue;
		}
		uint64_t age;
		enum age_state st = age_of(c, e, now_ms, &age);
		if (st == FRESH && freq_of(e) > 0) {
			set_freq(e, freq_of(e) - 1);
			continue;
		}
		drop(s, i, st, dead);
		return true;
	}
	nx_require(spare || !"clock found no victim in a non-empty main queue");
	return false; /* only the spared entry is left */
}

/*
 * Evict one entry (under lock), never the one with hash *spare (NULL: any). Returns false on
 * an empty shard, or one holding only that entry.
 */
static bool evict_one(struct nx_cache *c, struct shard *s, uint64_t now_ms,
		      struct nx_cache_blob **dead, const uint64_t *spare)
{
	if (s->count == 0) {
		return false;
	}
	/* Probation gives up an entry while it holds its share of the entries held (not of the
	 * slots: under byte pressure a shard holds fewer entries than it has slots). */
	if ((uint64_t)s->small_count * NX_CACHE_SMALL_DIVISOR >= s->count) {
		if (evict_small(c, s, now_ms, dead, spare)) {
			return true;
		}
	}
	if (s->count == s->small_count) {
		nx_require(spare); /* else probation could always give up an entry */
		return false;
	}
	return evict_main(c, s, now_ms, dead, spare);
}

/*
 * Reserve `size` budget bytes, evicting until they fit: from `own` (the shard the copy goes
 * to) while it has entries, then round robin over the others. Own first keeps each shard's
 * probation and main queue in proportion: a shard that only gave up bytes would drain its
 * probation and then sweep its working set, while the one taking the inserts never evicted.
 */
static bool reserve(struct nx_cache *c, struct shard *own, uint32_t size, uint64_t now_ms,
		    uint64_t spare)
{
	unsigned empty = 0;
	bool own_empty = false;
	for (;;) {
		uint64_t cur = atomic_load_explicit(&c->live_bytes, memory_order_relaxed);
		while (cur + size <= c->budget) {
			if (atomic_compare_exchange_weak_explicit(&c->live_bytes, &cur, cur + size,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				return true;
			}
		}
		struct shard *s = own;
		if (own_empty) {
			unsigned si =
			    atomic_fetch_add_explicit(&c->evict_cursor, 1, memory_order_relaxed) &
			    (c->nshards - 1);
			s = c->shard[si];
		}
		struct nx_cache_blob *dead = NULL;
		pthread_mutex_lock(&s->lock);
		bool ok = evict_one(c, s, now_ms, &dead, &spare);
		pthread_mutex_unlock(&s->lock);
		release(c, dead);
		if (s == own && !ok) {
			own_empty = true;
		}
		/* All shards empty and still no room: other threads hold the bytes in flight. */
		empty = ok ? 0 : empty + 1;
		if (empty >= 2 * c->nshards) {
			return false;
		}
	}
}

int nx_cache_put(struct nx_cache *c, const struct nx_cache_key *k, const uint8_t *buf,
		 const struct nx_dns_msg *m, uint64_t now_ms)
{
	if (!c) {
		return NX_ECANCELED;
	}
	struct hkey h;
	int rc = make_key(c, k, &h);
	if (rc) {
		return rc;
	}
	struct nx_cache_plan plan;
	rc = nx_cache_plan(&c->p, k, h.buf, buf, m, &plan);
	if (rc) {
		atomic_fetch_add_explicit(&c->uncacheable, 1, memory_order_relaxed);
		return rc;
	}
	if (plan.size > c->budget) {
		atomic_fetch_add_explicit(&c->oversized, 1, memory_order_relaxed);
		return NX_ELIMIT;
	}
	/* Copy before touching the table: a failed allocation leaves any old entry alone. */
	struct nx_cache_blob *b = c->alloc.alloc(c->alloc.ctx, NX_OWNER_cache_responses, plan.size);
	if (!b) {
		atomic_fetch_add_explicit(&c->alloc_failures, 1, memory_order_relaxed);
		return -ENOMEM;
	}
	nx_cache_blob_fill(b, &c->p, &plan, buf, m);
	struct shard *s = shard_of(c, h.hash);
	/* Never evicts this key's own old copy: a refresh replaces it in place below. */
	if (!reserve(c, s, plan.size, now_ms, h.hash)) {
		c->alloc.free(c->alloc.ctx, NX_OWNER_cache_responses, b, plan.size);
		atomic_fetch_add_explicit(&c->no_room, 1, memory_order_relaxed);
		return NX_ELIMIT;
	}

	struct nx_cache_blob *dead = NULL;
	pthread_mutex_lock(&s->lock);
	int32_t old = find(s, &h, k);
	if (old >= 0) {
		/* A refreshed copy takes the old one's slot and keeps its place in its queue and
		 * its use count: the key's use is what earned them. */
		struct entry *e = &s->e[old];
		e->blob->next_free = dead;
		dead = e->blob;
		e->blob = b;
		e->stored_ms = now_ms;
		e->ttl = plan.ttl;
		e->hits = 0;
		e->state &= (uint8_t)~SLOT_PREFETCHED;
		s->replaced++;
		s->inserts++;
		pthread_mutex_unlock(&s->lock);
		release(c, dead);
		return 0;
	}
	/* Looked up before evicting: the victim's ghost cell may be this key's. */
	bool main_queue = ghost_take(s, h.hash); /* else probation */
	if (main_queue) {
		s->readmitted++;
	}
	if (s->count == s->cap) {
		evict_one(c, s, now_ms, &dead, NULL);
	}
	int32_t i = s->free_head;
	nx_require(i >= 0);
	struct entry *e = &s->e[i];
	s->free_head = e->next;
	*e = (struct entry){
	    .hash = h.hash,
	    .blob = b,
	    .stored_ms = now_ms,
	    .ttl = plan.ttl,
	    .qtype = k->qtype,
	    .kflags = h.kflags,
	    .next = s->bucket[h.hash & s->mask],
	};
	s->bucket[h.hash & s->mask] = i;
	s->count++;
	s->inserts++;
	if (main_queue) {
		set_freq(e, 1); /* one pass of the hand, as S3-FIFO puts it at the head of main */
	} else {
		fifo_push(s, i);
	}
	pthread_mutex_unlock(&s->lock);
	release(c, dead);
	return 0;
}

int nx_cache_lookup(struct nx_cache *c, const struct nx_cache_key *k, uint64_t now_ms,
		    unsigned flags, uint8_t *out, size_t cap, struct nx_dns_msg *msg,
		    struct nx_cache_hit *hit)
{
	if (!c) {
		return NX_ENOTFOUND;
	}
	struct hkey h;
	int rc = make_key(c, k, &h);
	if (rc) {
		return rc;
	}
	bool want_stale = flags & NX_CACHE_LOOKUP_STALE;
	struct nx_dns_msg local;
	struct nx_dns_msg *view = msg ? msg : &local;
	struct shard *s = shard_of(c, h.hash);
	struct nx_cache_blob *dead = NULL;

	pthread_mutex_lock(&s->lock);
	int32_t i = find(s, &h, k);
	if (i < 0) {
		goto miss;
	}
	struct entry *e = &s->e[i];
	uint64_t age_ms;
	enum age_state st = age_of(c, e, now_ms, &age_ms);
	if (st == DEAD) {
		/* asked for again: its next copy has shown its use and skips probation */
		ghost_add(s, e->hash);
		unlink_slot(s, i, &dead);
		s->expired++;
		goto miss;
	}
	if (st == STALE && !want_stale) {
		goto miss;
	}
	const struct nx_cache_blob *b = e->blob;
	if (cap < b->wire_len) {
		rc = NX_ETRUNC;
		goto miss;
	}
	const uint8_t *wire = nx_cache_blob_wire(b);
	memcpy(out, wire, b->wire_len);
	nx_cache_blob_view(b, out, view);
	bool prefetch = false;
	uint32_t ttl = e->ttl;
	if (st == FRESH) {
		uint64_t ttl_ms = (uint64_t)ttl * 1000;
		if (c->p.prefetch_min_hits && !(e->state & SLOT_PREFETCHED) &&
		    e->hits >= c->p.prefetch_min_hits &&
		    (ttl_ms - age_ms) * 100 < ttl_ms * NX_CACHE_PREFETCH_PERCENT) {
			e->state |= SLOT_PREFETCHED;
			prefetch = true;
			s->prefetch++;
		}
		if (freq_of(e) < SLOT_FREQ_MAX) {
			set_freq(e, freq_of(e) + 1);
		}
		if (e->hits < UINT32_MAX) {
			e->hits++;
		}
		s->hits++;
	} else {
		s->stale_hits++;
	}
	pthread_mutex_unlock(&s->lock);

	uint32_t age = (uint32_t)NX_MIN(age_ms / 1000, (uint64_t)UINT32_MAX);
	view->min_ttl = nx_cache_rewrite_ttls(out, view->ttl_off, view->ttl_count,
					      view->authority_end, age, st == STALE);
	if (hit) {
		*hit = (struct nx_cache_hit){
		    .len = view->len,
		    .ttl = st == STALE ? NX_CACHE_STALE_TTL : ttl - age,
		    .age = age,
		    .stale = st == STALE,
		    .prefetch = prefetch,
		};
	}
	return 0;

miss:
	if (!want_stale || rc) {
		s->misses++;
	}
	pthread_mutex_unlock(&s->lock);
	release(c, dead);
	return rc ? rc : NX_ENOTFOUND;
}

void nx_cache_stats(const struct nx_cache *c, struct nx_cache_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!c) {
		return;
	}
	for (unsigned i = 0; i < c->nshards; i++) {
		struct shard *s = c->shard[i];
		pthread_mutex_lock(&s->lock);
		out->entries += s->count;
		out->hits += s->hits;
		out->stale_hits += s->stale_hits;
		out->misses += s->misses;
		out->inserts += s->inserts;
		out->replaced += s->replaced;
		out->evictions += s->evictions;
		out->expired += s->expired;
		out->prefetch += s->prefetch;
		out->promoted += s->promoted;
		out->readmitted += s->readmitted;
		pthread_mutex_unlock(&s->lock);
	}
	out->max_entries = c->p.size;
	out->live_bytes = atomic_load_explicit(&c->live_bytes, memory_order_relaxed);
	out->budget_bytes = c->budget;
	out->slot_bytes = c->slot_bytes;
	out->oversized = atomic_load_explicit(&c->oversized, memory_order_relaxed);
	out->alloc_failures = atomic_load_explicit(&c->alloc_failures, memory_order_relaxed);
	out->no_room = atomic_load_explicit(&c->no_room, memory_order_relaxed);
	out->uncacheable = atomic_load_explicit(&c->uncacheable, memory_order_relaxed);
}

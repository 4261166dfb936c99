/*
 * Per-producer rings: the hot path (nx_qlog_push) and the writer's drain.
 */
#include "querylog/querylog.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "querylog/impl.h"

int nx_qlog_rings_init(struct nx_qlog *q, unsigned producers, unsigned buffer_max)
{
	q->n_rings = producers;
	q->ring_cap = (buffer_max + producers - 1) / producers;
	q->rings = nx_mem_calloc(NX_OWNER_querylog_queue, producers, sizeof(*q->rings));
	if (!q->rings) {
		return -ENOMEM;
	}
	q->slots = nx_mem_alloc(NX_OWNER_querylog_queue,
				(size_t)producers * q->ring_cap * sizeof(struct nx_qlog_rec));
	if (!q->slots) {
		nx_mem_free(NX_OWNER_querylog_queue, q->rings, producers * sizeof(*q->rings));
		q->rings = NULL;
		return -ENOMEM;
	}
	for (unsigned i = 0; i < producers; i++) {
		struct nx_qlog_ring *r = &q->rings[i];
		pthread_mutex_init(&r->mu, NULL);
		r->slots = q->slots + (size_t)i * q->ring_cap;
		r->cap = q->ring_cap;
		r->half = q->ring_cap / 2 > 1 ? q->ring_cap / 2 : 1;
	}
	return 0;
}

void nx_qlog_rings_deinit(struct nx_qlog *q)
{
	if (!q->rings) {
		return;
	}
	for (unsigned i = 0; i < q->n_rings; i++) {
		pthread_mutex_destroy(&q->rings[i].mu);
	}
	nx_mem_free(NX_OWNER_querylog_queue, q->slots,
		    (size_t)q->n_rings * q->ring_cap * sizeof(struct nx_qlog_rec));
	nx_mem_free(NX_OWNER_querylog_queue, q->rings, q->n_rings * sizeof(*q->rings));
	q->rings = NULL;
	q->slots = NULL;
}

static void wake_writer(struct nx_qlog *q, unsigned why)
{
	pthread_mutex_lock(&q->wmu);
	q->wake |= why;
	if (q->sleeping) {
		pthread_cond_signal(&q->wcond);
	}
	pthread_mutex_unlock(&q->wmu);
}

void nx_qlog_push(struct nx_qlog *q, unsigned producer, const struct nx_qlog_rec *rec)
{
	if (!q || nx_fails_assert(producer < q->n_rings)) {
		return;
	}
	struct nx_qlog_ring *r = &q->rings[producer];
	unsigned why = 0;

	pthread_mutex_lock(&r->mu);
	uint32_t tail = r->head + r->count;
	if (tail >= r->cap) {
		tail -= r->cap;
	}
	memcpy(&r->slots[tail], rec, sizeof(*rec));
	if (r->count == r->cap) {
		/* full: the slot written was the oldest one */
		r->head = r->head + 1 == r->cap ? 0 : r->head + 1;
		r->dropped++;
	} else {
		r->count++;
		if (r->count == 1) {
			why = WAKE_NONEMPTY;
		}
		if (r->count == r->half) {
			why |= WAKE_URGENT;
		}
	}
	r->pushed++;
	pthread_mutex_unlock(&r->mu);

	if (why) {
		wake_writer(q, why);
	}
}

size_t nx_qlog_rings_drain(struct nx_qlog *q, struct nx_qlog_rec *out, size_t max, bool *more)
{
	size_t n = 0;
	uint64_t seen = 0;
	bool left = false;

	for (unsigned k = 0; k < q->n_rings; k++) {
		struct nx_qlog_ring *r = &q->rings[(q->rr + k) % q->n_rings];
		bool first = true;
		for (;;) {
			pthread_mutex_lock(&r->mu);
			if (first) {
				/* occupancy only falls when we drain: this is the ring's high-water
				 * since our last pass (overstated by pushes during the pass) */
				seen += r->count;
				first = false;
			}
			size_t take = NX_MIN((size_t)r->count, max - n);
			take = NX_MIN(take, (size_t)NX_QLOG_DRAIN_CHUNK);
			size_t first_part = NX_MIN(take, (size_t)(r->cap - r->head));
			memcpy(out + n, &r->slots[r->head], first_part * sizeof(*out));
			if (take > first_part) {
				memcpy(out + n + first_part, r->slots,
				       (take - first_part) * sizeof(*out));
			}
			r->head = (uint32_t)((r->head + take) % r->cap);
			r->count -= (uint32_t)take;
			bool remains = r->count > 0;
			pthread_mutex_unlock(&r->mu);
			n += take;
			if (!remains) {
				break;
			}
			if (n == max) {
				left = true;
				break;
			}
		}
	}
	q->rr = (q->rr + 1) % q->n_rings;

	nx_qlog_atomic_max(&q->queue_peak, seen);
	*more = left;
	return n;
}

void nx_qlog_rings_count(struct nx_qlog *q, uint64_t *now, uint64_t *pushed, uint64_t *dropped)
{
	*now = *pushed = *dropped = 0;
	for (unsigned i = 0; i < q->n_rings; i++) {
		struct nx_qlog_ring *r = &q->rings[i];
		pthread_mutex_lock(&r->mu);
		*now += r->count;
		*pushed += r->pushed;
		*dropped += r->dropped;
		pthread_mutex_unlock(&r->mu);
	}
}

unsigned nx_qlog_capacity(const struct nx_qlog *q)
{
	return q ? q->n_rings * q->ring_cap : 0;
}

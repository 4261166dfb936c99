/*
 * Per-producer byte rings of packed records: the hot path (nx_qlog_push) and the writer's
 * drain. A record is stored in the ring as the writer's batch holds it (struct nx_qlog_pk, then
 * the text bytes actually used, 8-byte aligned): the push packs the worker's record straight
 * into the ring, and a drain at privacy 0 is one memcpy per contiguous span into the batch.
 */
#include "querylog/querylog.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "querylog/impl.h"

size_t nx_qlog_ring_bytes(unsigned records)
{
	size_t b = (size_t)records * NX_QLOG_RING_REC_BYTES;
	return NX_MAX(b, (size_t)NX_QLOG_RING_MIN_BYTES);
}

int nx_qlog_rings_init(struct nx_qlog *q, unsigned producers, unsigned buffer_max)
{
	q->n_rings = producers;
	q->ring_cap = (buffer_max + producers - 1) / producers;
	q->ring_bytes = (uint32_t)nx_qlog_ring_bytes(q->ring_cap);
	q->rings = nx_mem_calloc(NX_OWNER_querylog_queue, producers, sizeof(*q->rings));
	if (!q->rings) {
		return -ENOMEM;
	}
	q->slots = nx_mem_alloc(NX_OWNER_querylog_queue, (size_t)producers * q->ring_bytes);
	if (!q->slots) {
		nx_mem_free(NX_OWNER_querylog_queue, q->rings, producers * sizeof(*q->rings));
		q->rings = NULL;
		return -ENOMEM;
	}
	for (unsigned i = 0; i < producers; i++) {
		struct nx_qlog_ring *r = &q->rings[i];
		pthread_mutex_init(&r->mu, NULL);
		r->buf = q->slots + (size_t)i * q->ring_bytes;
		r->cap = q->ring_bytes;
		r->cap_recs = q->ring_cap;
		r->half = q->ring_cap / 2 > 1 ? q->ring_cap / 2 : 1;
		r->half_bytes = q->ring_bytes / 2;
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
	nx_mem_free(NX_OWNER_querylog_queue, q->slots, (size_t)q->n_rings * q->ring_bytes);
	nx_mem_free(NX_OWNER_querylog_queue, q->rings, q->n_rings * sizeof(*q->rings));
	q->rings = NULL;
	q->slots = NULL;
}

/* ---- the packed form ---- */

size_t nx_qlog_pk_size(const struct nx_qlog_pk *pk)
{
	size_t m = pk->matched_len == PK_MATCHED_NAME ? 0 : pk->matched_len;
	size_t n =
	    sizeof(*pk) + pk->name_len + m + pk->source_len + pk->answer_len + pk->client_id_len;
	return (n + 7) & ~(size_t)7;
}

/* Text lengths of a record (bounded: a field the worker left unterminated ends at its last
 * byte, as the writer used to enforce) and whether matched repeats the name. */
struct pk_lens {
	uint8_t name, matched, source, answer, client_id;
	bool same; /* matched == name: stored once */
};

/* strnlen, without the call for the empty fields most records have (matched, source, id) */
#define FIELD_LEN(f) ((uint8_t)((f)[0] ? strnlen((f), sizeof(f) - 1) : 0))

static size_t measure(const struct nx_qlog_rec *r, struct pk_lens *l)
{
	l->name = FIELD_LEN(r->name);
	l->matched = FIELD_LEN(r->matched);
	l->source = FIELD_LEN(r->source);
	l->answer = FIELD_LEN(r->answer);
	l->client_id = FIELD_LEN(r->client_id);
	l->same = l->matched && l->matched == l->name && memcmp(r->matched, r->name, l->name) == 0;
	size_t n = sizeof(struct nx_qlog_pk) + l->name + (l->same ? 0 : l->matched) + l->source +
		   l->answer + l->client_id;
	return (n + 7) & ~(size_t)7;
}

static void write_pk(uint8_t *dst, const struct nx_qlog_rec *r, const struct pk_lens *l)
{
	struct nx_qlog_pk *pk = (struct nx_qlog_pk *)dst;
	*pk = (struct nx_qlog_pk){
	    .ts_ms = r->ts_ms,
	    .duration_us = r->duration_us,
	    .upstream = r->upstream,
	    .qtype = r->qtype,
	    .family = r->family,
	    .proto = r->proto,
	    .rcode = r->rcode,
	    .action = r->action,
	    .reason = r->reason,
	    .cached = r->cached,
	    .name_len = l->name,
	    .matched_len = l->same ? PK_MATCHED_NAME : l->matched,
	    .source_len = l->source,
	    .answer_len = l->answer,
	    .client_id_len = l->client_id,
	};
	memcpy(pk->client, r->client, sizeof(pk->client));
	char *p = (char *)(pk + 1);
	memcpy(p, r->name, l->name);
	p += l->name;
	if (l->matched && !l->same) {
		memcpy(p, r->matched, l->matched);
		p += l->matched;
	}
	if (l->source) {
		memcpy(p, r->source, l->source);
		p += l->source;
	}
	if (l->answer) {
		memcpy(p, r->answer, l->answer);
		p += l->answer;
	}
	if (l->client_id) {
		memcpy(p, r->client_id, l->client_id);
	}
}

size_t nx_qlog_pk_pack(uint8_t *dst, const struct nx_qlog_rec *r)
{
	struct pk_lens l;
	size_t size = measure(r, &l);
	write_pk(dst, r, &l);
	return size;
}

size_t nx_qlog_pk_view(const uint8_t *src, struct nx_qlog_view *v)
{
	const struct nx_qlog_pk *pk = (const struct nx_qlog_pk *)src;
	const char *p = (const char *)(pk + 1);
	v->pk = pk;
	v->name = p;
	p += pk->name_len;
	if (pk->matched_len == PK_MATCHED_NAME) {
		v->matched = v->name;
		v->matched_len = pk->name_len;
	} else {
		v->matched = p;
		v->matched_len = pk->matched_len;
		p += pk->matched_len;
	}
	v->source = p;
	p += pk->source_len;
	v->answer = p;
	p += pk->answer_len;
	v->client_id = p;
	p += pk->client_id_len;
	return ((size_t)(p - (const char *)src) + 7) & ~(size_t)7;
}

static void text_out(char *dst, size_t cap, const char *src, size_t len)
{
	len = NX_MIN(len, cap - 1);
	memcpy(dst, src, len);
	dst[len] = '\0';
}

size_t nx_qlog_pk_unpack(const uint8_t *src, struct nx_qlog_rec *r)
{
	struct nx_qlog_view v;
	size_t size = nx_qlog_pk_view(src, &v);
	const struct nx_qlog_pk *pk = v.pk;
	r->ts_ms = pk->ts_ms;
	r->duration_us = pk->duration_us;
	memcpy(r->client, pk->client, sizeof(r->client));
	r->family = pk->family;
	r->proto = pk->proto;
	r->qtype = pk->qtype;
	r->rcode = pk->rcode;
	r->action = pk->action;
	r->reason = pk->reason;
	r->cached = pk->cached;
	r->upstream = pk->upstream;
	text_out(r->name, sizeof(r->name), v.name, pk->name_len);
	text_out(r->matched, sizeof(r->matched), v.matched, v.matched_len);
	text_out(r->source, sizeof(r->source), v.source, pk->source_len);
	text_out(r->answer, sizeof(r->answer), v.answer, pk->answer_len);
	text_out(r->client_id, sizeof(r->client_id), v.client_id, pk->client_id_len);
	return size;
}

/* ---- the ring ---- */

static void ring_reset(struct nx_qlog_ring *r)
{
	r->head = r->tail = r->wrap = 0;
	r->bytes = 0;
}

/* Overwrite: the oldest record leaves the ring, counted. Under r->mu. */
static void drop_oldest(struct nx_qlog_ring *r)
{
	uint32_t s = (uint32_t)nx_qlog_pk_size((const struct nx_qlog_pk *)(r->buf + r->head));
	r->head += s;
	r->bytes -= s;
	r->count--;
	r->dropped++;
	if (r->wrap && r->head == r->wrap) {
		r->head = 0;
		r->wrap = 0;
	}
	if (!r->count) {
		ring_reset(r);
	}
}

/*
 * size contiguous bytes at the tail for a new record, dropping the oldest records until they
 * are free and the ring holds fewer than cap_recs records. A record never wraps: when the end
 * of the buffer is too short it goes to the front and `wrap` marks where the older data ends.
 * Under r->mu; size <= PK_MAX <= cap, so an empty ring always takes it.
 */
static uint8_t *ring_reserve(struct nx_qlog_ring *r, uint32_t size)
{
	for (;;) {
		if (!r->count) {
			ring_reset(r);
		}
		if (r->count < r->cap_recs) {
			if (!r->wrap) {
				/* data [head, tail) */
				if (r->cap - r->tail >= size) {
					break;
				}
				if (r->head >= size) {
					r->wrap = r->tail;
					r->tail = 0;
					break;
				}
			} else if (r->head - r->tail >= size) {
				/* data [head, wrap) + [0, tail) */
				break;
			}
		}
		drop_oldest(r);
	}
	uint8_t *dst = r->buf + r->tail;
	r->tail += size;
	return dst;
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
	struct pk_lens l;
	uint32_t size = (uint32_t)measure(rec, &l); /* outside the lock */
	unsigned why = 0;

	pthread_mutex_lock(&r->mu);
	uint32_t bytes_before = r->bytes;
	write_pk(ring_reserve(r, size), rec, &l);
	r->count++;
	r->bytes += size;
	if (r->count == 1) {
		why = WAKE_NONEMPTY;
	}
	if (r->count == r->half || (r->bytes >= r->half_bytes && bytes_before < r->half_bytes)) {
		why |= WAKE_URGENT;
	}
	r->pushed++;
	pthread_mutex_unlock(&r->mu);

	if (why) {
		wake_writer(q, why);
	}
}

/*
 * Whole records from the ring's oldest, in order, while max records and `budget` bytes (each
 * counted at its size + extra) allow: one memcpy per contiguous span (at most two). Under
 * r->mu. Returns records taken; *bytes += their bytes, *budget -= what they used.
 */
static size_t ring_take(struct nx_qlog_ring *r, uint8_t *out, size_t max, size_t *budget,
			size_t extra, size_t *bytes)
{
	size_t n = 0;
	while (n < max && r->count) {
		uint32_t end = r->wrap ? r->wrap : r->tail;
		uint32_t p = r->head;
		size_t k = 0;
		while (p < end && n + k < max) {
			size_t s = nx_qlog_pk_size((const struct nx_qlog_pk *)(r->buf + p));
			if (s + extra > *budget) {
				break;
			}
			*budget -= s + extra;
			p += (uint32_t)s;
			k++;
		}
		if (!k) {
			break;
		}
		uint32_t span = p - r->head;
		memcpy(out + *bytes, r->buf + r->head, span);
		*bytes += span;
		r->head = p;
		r->bytes -= span;
		r->count -= (uint32_t)k;
		n += k;
		if (r->wrap && r->head == r->wrap) {
			r->head = 0;
			r->wrap = 0;
		}
		if (!r->count) {
			ring_reset(r);
		}
	}
	return n;
}

size_t nx_qlog_rings_drain(struct nx_qlog *q, uint8_t *out, size_t max, size_t budget, size_t extra,
			   size_t *out_bytes, bool *more)
{
	size_t n = 0, bytes = 0;
	uint64_t seen = 0, seen_bytes = 0;
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
				seen_bytes += r->bytes;
				first = false;
			}
			size_t want = NX_MIN(max - n, (size_t)NX_QLOG_DRAIN_CHUNK);
			size_t take = ring_take(r, out, want, &budget, extra, &bytes);
			bool remains = r->count > 0;
			pthread_mutex_unlock(&r->mu);
			n += take;
			if (!remains) {
				break;
			}
			if (take < want || n == max) {
				/* out of records or bytes: the rest waits for the next batch */
				left = true;
				break;
			}
		}
	}
	q->rr = (q->rr + 1) % q->n_rings;

	nx_qlog_atomic_max(&q->queue_peak, seen);
	nx_qlog_atomic_max(&q->queue_bytes_peak, seen_bytes);
	*out_bytes = bytes;
	*more = left;
	return n;
}

void nx_qlog_rings_count(struct nx_qlog *q, uint64_t *now, uint64_t *pushed, uint64_t *dropped,
			 uint64_t *bytes)
{
	*now = *pushed = *dropped = *bytes = 0;
	for (unsigned i = 0; i < q->n_rings; i++) {
		struct nx_qlog_ring *r = &q->rings[i];
		pthread_mutex_lock(&r->mu);
		*now += r->count;
		*bytes += r->bytes;
		*pushed += r->pushed;
		*dropped += r->dropped;
		pthread_mutex_unlock(&r->mu);
	}
}

unsigned nx_qlog_capacity(const struct nx_qlog *q)
{
	return q ? q->n_rings * q->ring_cap : 0;
}

size_t nx_qlog_capacity_bytes(const struct nx_qlog *q)
{
	return q ? (size_t)q->n_rings * q->ring_bytes : 0;
}

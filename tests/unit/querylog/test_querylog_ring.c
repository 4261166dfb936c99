/*
 * The per-producer byte rings of packed records (ring.c), white-box through impl.h: records of
 * varying sizes wrapping around, drop-oldest with tiny and maximal records mixed, two producers
 * against a concurrent drain, the occupancy gauges, maximal fields round trip (push, drain,
 * privacy, tap). No writer thread unless a test starts one.
 */
#include "helpers.h"

#include <pthread.h>

#include "querylog/impl.h"

/* A record whose name has `len` bytes and whose duration carries its sequence number. */
static struct nx_qlog_rec seqrec(uint32_t seq, size_t len)
{
	char name[NX_QLOG_NAME_MAX];
	len = NX_MIN(len, sizeof(name) - 1);
	for (size_t i = 0; i < len; i++) {
		name[i] = (char)('a' + (seq + i) % 26);
	}
	name[len] = 0;
	struct nx_qlog_rec r = mkrec(T0 + seq, 1 + seq % 200, name);
	r.duration_us = seq;
	return r;
}

/* Every text field at its maximum, unterminated: the push must stop at each field's last byte. */
static struct nx_qlog_rec maxrec(uint32_t seq)
{
	struct nx_qlog_rec r = mkrec(T0 + seq, 7, "x");
	memset(r.name, 'n', sizeof(r.name));
	memset(r.matched, 'm', sizeof(r.matched));
	memset(r.source, 's', sizeof(r.source));
	memset(r.answer, 'a', sizeof(r.answer));
	memset(r.client_id, 'c', sizeof(r.client_id));
	r.name[0] = (char)('A' + seq % 26); /* tells the records apart */
	r.duration_us = seq;
	return r;
}

/* What the ring must give back for r: every text cut to its field's capacity - 1. */
static void terminated(struct nx_qlog_rec *r)
{
	r->name[sizeof(r->name) - 1] = 0;
	r->matched[sizeof(r->matched) - 1] = 0;
	r->source[sizeof(r->source) - 1] = 0;
	r->answer[sizeof(r->answer) - 1] = 0;
	r->client_id[sizeof(r->client_id) - 1] = 0;
}

static void assert_rec_equal(const struct nx_qlog_rec *a, const struct nx_qlog_rec *b)
{
	assert_int_equal(a->ts_ms, b->ts_ms);
	assert_int_equal(a->duration_us, b->duration_us);
	assert_memory_equal(a->client, b->client, sizeof(a->client));
	assert_int_equal(a->family, b->family);
	assert_int_equal(a->proto, b->proto);
	assert_int_equal(a->qtype, b->qtype);
	assert_int_equal(a->rcode, b->rcode);
	assert_int_equal(a->action, b->action);
	assert_int_equal(a->reason, b->reason);
	assert_int_equal(a->cached, b->cached);
	assert_int_equal(a->upstream, b->upstream);
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->matched, b->matched);
	assert_string_equal(a->source, b->source);
	assert_string_equal(a->answer, b->answer);
	assert_string_equal(a->client_id, b->client_id);
}

static struct nx_qlog *ring_new(struct tdir *t, unsigned producers, unsigned buffer_max)
{
	tdir_make(t);
	struct nx_qlog_params p;
	test_params(&p, t->db);
	p.producers = producers;
	p.buffer_max = buffer_max;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	return q;
}

static uint8_t g_out[NX_QLOG_DRAIN_CHUNK * 4 * PK_MAX];

/* Drain up to max records into g_out; returns the count, *bytes their bytes. */
static size_t drain(struct nx_qlog *q, size_t max, size_t *bytes)
{
	bool more;
	return nx_qlog_rings_drain(q, g_out, max, sizeof(g_out), 0, bytes, &more);
}

/* Every record of g_out[0, bytes) unpacked into recs; returns the count. */
static size_t unpack_all(size_t bytes, struct nx_qlog_rec *recs, size_t cap)
{
	size_t n = 0, off = 0;
	while (off < bytes) {
		assert_true(n < cap);
		size_t s = nx_qlog_pk_unpack(g_out + off, &recs[n++]);
		assert_int_equal(s % 8, 0);
		assert_int_equal(s, nx_qlog_pk_size((const struct nx_qlog_pk *)(g_out + off)));
		off += s;
	}
	assert_int_equal(off, bytes);
	return n;
}

/* ---- wrap-around with variable sizes ---- */

static void test_wrap_variable_sizes(void **state)
{
	(void)state;
	struct tdir t;
	struct nx_qlog *q = ring_new(&t, 1, 16); /* 16 records, 2048 bytes */
	struct nx_qlog_ring *r = &q->rings[0];
	assert_int_equal(r->cap, 16 * NX_QLOG_RING_REC_BYTES);
	static struct nx_qlog_rec want[64], got[64];
	uint32_t next = 0, expect = 0;
	unsigned wraps = 0;
	uint32_t rnd = 12345;
	for (int round = 0; round < 2000; round++) {
		/* push 1..4 records of 1..200-byte names, as long as they certainly fit (no drop)
		 */
		unsigned k = 1 + round % 4;
		for (unsigned i = 0; i < k; i++) {
			rnd = rnd * 1103515245u + 12345u;
			size_t len = 1 + (rnd >> 16) % 200;
			struct nx_qlog_rec rec = seqrec(next, len);
			size_t size = nx_qlog_pk_pack(g_out, &rec);
			/* the gap a wrap leaves is shorter than one record (<= 264 B here):
			 * with that spare it certainly fits without a drop */
			if (r->bytes + size + 264 > r->cap || r->count + 1 > r->cap_recs) {
				break;
			}
			uint32_t wrap_before = r->wrap;
			nx_qlog_push(q, 0, &rec);
			wraps += !wrap_before && r->wrap;
			want[next % 64] = rec;
			next++;
		}
		/* drain 1..2: fewer than pushed, so the ring stays populated and goes round */
		size_t bytes = 0;
		size_t n = drain(q, 1 + round % 2, &bytes);
		assert_int_equal(unpack_all(bytes, got, 64), n);
		for (size_t i = 0; i < n; i++) {
			assert_rec_equal(&got[i], &want[expect % 64]);
			expect++;
		}
		assert_true(r->bytes <= r->cap);
	}
	size_t bytes = 0;
	size_t n = drain(q, 64, &bytes);
	assert_int_equal(unpack_all(bytes, got, 64), n);
	for (size_t i = 0; i < n; i++) {
		assert_rec_equal(&got[i], &want[expect++ % 64]);
	}
	assert_int_equal(expect, next);
	assert_true(next > 3000);
	assert_true(wraps > 100); /* it did go round, many times */
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.pushed, next);
	assert_int_equal(st.dropped_oldest, 0);
	assert_int_equal(st.queue_now, 0);
	assert_int_equal(st.queue_bytes, 0);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- drop oldest, tiny and maximal records mixed ---- */

static void test_drop_oldest_mixed(void **state)
{
	(void)state;
	struct tdir t;
	struct nx_qlog *q = ring_new(&t, 1, 16);
	struct nx_qlog_ring *r = &q->rings[0];
	static struct nx_qlog_rec want[400], got[64];
	/* the record bound first: 40 tiny records keep the newest 16 */
	uint32_t seq = 0;
	for (; seq < 40; seq++) {
		want[seq] = seqrec(seq, 1);
		nx_qlog_push(q, 0, &want[seq]);
	}
	assert_int_equal(r->count, 16);
	assert_int_equal(r->dropped, 24);
	/* then the byte bound: a maximal record (744 B) in a 2048-byte ring of 16 x 64 B */
	assert_int_equal(nx_qlog_pk_pack(g_out, &want[0]), 64);
	want[seq] = maxrec(seq);
	nx_qlog_push(q, 0, &want[seq]);
	terminated(&want[seq]);
	seq++;
	assert_int_equal(nx_qlog_pk_pack(g_out, &want[seq - 1]), PK_MAX);
	assert_true(r->bytes <= r->cap);
	/* a mixture: 1 in 3 maximal, the rest 1..60-byte names */
	for (; seq < 400; seq++) {
		want[seq] = seq % 3 ? seqrec(seq, 1 + seq % 60) : maxrec(seq);
		nx_qlog_push(q, 0, &want[seq]);
		terminated(&want[seq]);
		assert_true(r->bytes <= r->cap);
		assert_true(r->count >= 1 && r->count <= r->cap_recs);
	}
	uint64_t kept = r->count, dropped = r->dropped, bytes_held = r->bytes;
	assert_int_equal(kept + dropped, 400);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.pushed, 400);
	assert_int_equal(st.dropped_oldest, dropped);
	assert_int_equal(st.queue_now, kept);
	assert_int_equal(st.queue_bytes, bytes_held);
	/* what is left is the newest `kept`, in order, byte for byte */
	size_t bytes = 0;
	size_t n = drain(q, 64, &bytes);
	assert_int_equal(n, kept);
	assert_int_equal(bytes, bytes_held);
	assert_int_equal(unpack_all(bytes, got, 64), n);
	for (size_t i = 0; i < n; i++) {
		assert_rec_equal(&got[i], &want[400 - kept + i]);
	}
	/* the oldest went first: a drop-oldest ring never keeps fewer than it can hold with the
	 * newest, less one record's worth of gap at the wrap */
	size_t newest_next = nx_qlog_pk_pack(g_out, &want[400 - kept - 1]);
	assert_true(bytes_held + newest_next + PK_MAX > r->cap || kept == r->cap_recs);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- two producers against a concurrent drain ---- */

struct prod {
	struct nx_qlog *q;
	unsigned idx;
	uint32_t n;
};
static atomic_int g_finished;

static void *producer(void *arg)
{
	struct prod *p = arg;
	for (uint32_t i = 0; i < p->n; i++) {
		struct nx_qlog_rec r = i % 7 == 0 ? maxrec(i) : seqrec(i, 1 + i % 90);
		r.client[3] = (uint8_t)p->idx; /* whose */
		r.duration_us = i;
		nx_qlog_push(p->q, p->idx, &r);
	}
	atomic_fetch_add(&g_finished, 1);
	return NULL;
}

static void test_two_producers(void **state)
{
	(void)state;
	struct tdir t;
	struct nx_qlog *q = ring_new(&t, 2, 64);
	struct prod p[2] = {{q, 0, 200000}, {q, 1, 200000}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, producer, &p[i]), 0);
	}
	/* the drain: each producer's records come out in its order, none twice, the texts
	 * intact (a maximal record's name starts with its letter) */
	int64_t last[2] = {-1, -1};
	uint64_t seen[2] = {0, 0};
	static struct nx_qlog_rec got[NX_QLOG_DRAIN_CHUNK * 4];
	bool done = false;
	while (!done) {
		/* once both are finished, one more pass takes what they left */
		done = atomic_load(&g_finished) == 2;
		size_t bytes = 0;
		size_t n;
		do {
			n = drain(q, NX_QLOG_DRAIN_CHUNK * 4, &bytes);
			assert_int_equal(unpack_all(bytes, got, NX_ARRAY_LEN(got)), n);
			for (size_t i = 0; i < n; i++) {
				unsigned who = got[i].client[3];
				assert_true(who < 2);
				assert_true((int64_t)got[i].duration_us > last[who]);
				last[who] = got[i].duration_us;
				seen[who]++;
				if (got[i].duration_us % 7 == 0) {
					assert_int_equal(strlen(got[i].name), NX_QLOG_NAME_MAX - 1);
					assert_int_equal(got[i].name[0],
							 'A' + got[i].duration_us % 26);
					assert_int_equal(strlen(got[i].client_id),
							 NX_QLOG_CLIENT_ID_MAX - 1);
				} else {
					assert_int_equal(strlen(got[i].name),
							 1 + got[i].duration_us % 90);
				}
			}
		} while (n && done);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
	}
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.pushed, 400000);
	assert_int_equal(st.queue_now, 0);
	/* every record drained or dropped, counted per ring */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(seen[i] + q->rings[i].dropped, 200000);
		assert_int_equal(last[i], 199999); /* the newest always survives */
	}
	assert_int_equal(st.dropped_oldest, q->rings[0].dropped + q->rings[1].dropped);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- the occupancy gauges ---- */

static void test_high_water(void **state)
{
	(void)state;
	struct tdir t;
	struct nx_qlog *q = ring_new(&t, 2, 64); /* 2 rings of 32 records, 4096 bytes */
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.queue_capacity, 64);
	assert_int_equal(st.queue_bytes_capacity, 2 * 32 * NX_QLOG_RING_REC_BYTES);
	assert_int_equal(st.queue_peak, 0);
	assert_int_equal(st.queue_bytes_peak, 0);
	size_t sum = 0;
	for (uint32_t i = 0; i < 10; i++) {
		struct nx_qlog_rec r = seqrec(i, 10 + 10 * i);
		sum += nx_qlog_pk_pack(g_out, &r);
		nx_qlog_push(q, i % 2, &r);
	}
	nx_qlog_stats(q, &st);
	assert_int_equal(st.queue_now, 10);
	assert_int_equal(st.queue_bytes, sum);
	size_t bytes = 0;
	assert_int_equal(drain(q, 64, &bytes), 10);
	assert_int_equal(bytes, sum);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.queue_now, 0);
	assert_int_equal(st.queue_bytes, 0);
	assert_int_equal(st.queue_peak, 10); /* seen by the drain before it took them */
	assert_int_equal(st.queue_bytes_peak, sum);
	/* a lower occupancy later leaves the high-water where it was */
	struct nx_qlog_rec r = seqrec(99, 5);
	nx_qlog_push(q, 0, &r);
	assert_int_equal(drain(q, 64, &bytes), 1);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.queue_peak, 10);
	assert_int_equal(st.queue_bytes_peak, sum);
	/* a drain's byte budget stops it at a record boundary and says more is left */
	for (uint32_t i = 0; i < 4; i++) {
		struct nx_qlog_rec x = seqrec(i, 100);
		nx_qlog_push(q, 0, &x);
	}
	struct nx_qlog_rec x = seqrec(0, 100);
	size_t one = nx_qlog_pk_pack(g_out, &x);
	bool more = false;
	assert_int_equal(nx_qlog_rings_drain(q, g_out, 64, 2 * one + one / 2, 0, &bytes, &more), 2);
	assert_int_equal(bytes, 2 * one);
	assert_true(more);
	/* extra per record: the privacy rewrite's room */
	assert_int_equal(nx_qlog_rings_drain(q, g_out, 64, 2 * one, 8, &bytes, &more), 1);
	assert_true(more);
	assert_int_equal(nx_qlog_rings_drain(q, g_out, 64, sizeof(g_out), 0, &bytes, &more), 1);
	assert_false(more);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- maximal fields round trip, through the writer's tap and at privacy 1 and 2 ---- */

static struct nx_qlog_rec g_tapped[8];
static size_t g_ntapped;

static void tap(void *ud, const struct nx_qlog_rec *recs, size_t n)
{
	(void)ud;
	for (size_t i = 0; i < n && g_ntapped < NX_ARRAY_LEN(g_tapped); i++) {
		g_tapped[g_ntapped++] = recs[i];
	}
}

static void test_max_fields_round_trip(void **state)
{
	(void)state;
	struct tdir t;
	struct nx_qlog *q = ring_new(&t, 1, 16);
	struct nx_qlog_rec r = maxrec(3);
	r.family = AF_INET6;
	memset(r.client, 0xfe, sizeof(r.client));
	r.qtype = 65535;
	r.rcode = 15;
	r.upstream = 32767;
	r.cached = 1;
	r.ts_ms = INT64_MAX;
	r.duration_us = UINT32_MAX;
	nx_qlog_push(q, 0, &r);
	struct nx_qlog_rec want = r;
	terminated(&want);
	/* the ring holds the packed form: PK_MAX bytes, not the 744-byte struct copied */
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.queue_bytes, PK_MAX);
	size_t bytes = 0;
	assert_int_equal(drain(q, 64, &bytes), 1);
	assert_int_equal(bytes, PK_MAX);
	struct nx_qlog_rec got;
	assert_int_equal(nx_qlog_pk_unpack(g_out, &got), PK_MAX);
	assert_rec_equal(&got, &want);
	/* matched = name is stored once, and comes back */
	struct nx_qlog_rec b = seqrec(5, 253);
	mkblocked(&b, "a-list");
	assert_int_equal(nx_qlog_pk_pack(g_out, &b), (48 + 253 + 6 + 9 + 7) & ~7);
	nx_qlog_pk_unpack(g_out, &got);
	assert_rec_equal(&got, &b);

	/* through the writer: the tap gets the record as pushed, at privacy 0, 1, 2 */
	for (unsigned privacy = 0; privacy <= 2; privacy++) {
		g_ntapped = 0;
		assert_int_equal(nx_qlog_set_privacy(q, privacy), 0);
		nx_qlog_set_tap(q, tap, NULL);
		struct nx_qlog_rec u = want;
		u.reason = NX_FILTER_R_user_deny; /* its source is rule text: hidden at 1 */
		struct nx_qlog_rec e = u;
		nx_qlog_apply_privacy(&e, privacy);
		nx_qlog_push(q, 0, &u);
		struct nx_qlog_rec tiny = seqrec(6, 1); /* "hidden" is longer than its name */
		tiny.answer[0] = 'x';
		tiny.answer[1] = 0;
		tiny.matched[0] = 'y';
		tiny.matched[1] = 0;
		struct nx_qlog_rec et = tiny;
		nx_qlog_apply_privacy(&et, privacy);
		nx_qlog_push(q, 0, &tiny);
		if (privacy == 0) {
			assert_int_equal(nx_qlog_start(q), 0);
		}
		assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
		assert_int_equal(g_ntapped, 2);
		assert_rec_equal(&g_tapped[0], &e);
		assert_rec_equal(&g_tapped[1], &et);
	}
	nx_qlog_set_tap(q, NULL, NULL);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 6);
	assert_int_equal(st.dropped_oldest, 0);
	nx_qlog_free(q);
	tdir_remove(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wrap_variable_sizes),	  cmocka_unit_test(test_drop_oldest_mixed),
	    cmocka_unit_test(test_two_producers),	  cmocka_unit_test(test_high_water),
	    cmocka_unit_test(test_max_fields_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

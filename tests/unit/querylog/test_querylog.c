/*
 * Query-log writer side against a real SQLite file: producers, drop-oldest, privacy (rows,
 * aggregates, tap), retention, disk errors and recovery, stop, ledger balance.
 */
#include "helpers.h"

#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"

/* ---- two producers ---- */

struct producer {
	struct nx_qlog *q;
	unsigned idx;
	unsigned n;
	uint64_t max_push_us;
};

static void *produce(void *arg)
{
	struct producer *p = arg;
	for (unsigned i = 0; i < p->n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "p%u-%u.example", p->idx, i);
		struct nx_qlog_rec r = mkrec(T0 + i, 10 + p->idx, name);
		uint64_t t = nx_now_mono_us();
		nx_qlog_push(p->q, p->idx, &r);
		t = nx_now_mono_us() - t;
		if (t > p->max_push_us) {
			p->max_push_us = t;
		}
	}
	return NULL;
}

static void test_two_producers(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.batch_max = 128;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	assert_int_equal(nx_qlog_start(q), -EALREADY);

	struct producer pr[2] = {{q, 0, 3000, 0}, {q, 1, 3000, 0}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, produce, &pr[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);

	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.pushed, 6000);
	assert_int_equal(st.written, 6000);
	assert_int_equal(st.dropped_oldest, 0);
	assert_int_equal(st.queue_now, 0);
	assert_true(st.batches >= 6000 / 128);
	assert_true(st.queue_peak >= 1 && st.queue_peak <= 8192);
	assert_int_equal(st.writer_ok, 1);
	assert_int_equal(st.queue_capacity, 8192);

	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 1000);
	assert_int_equal(json_array_size(all), 6000);
	/* fields of one row */
	f.name = "p1-2999.example";
	json_t *one = read_all(t.db, f, 10);
	assert_int_equal(json_array_size(one), 1);
	json_t *row = json_array_get(one, 0);
	assert_int_equal(jint(row, "ts"), T0 + 2999);
	assert_string_equal(jstr(row, "client"), "192.168.1.11");
	assert_string_equal(jstr(row, "proto"), "udp");
	assert_string_equal(jstr(row, "qtype"), "A");
	assert_string_equal(jstr(row, "rcode"), "NOERROR");
	assert_string_equal(jstr(row, "action"), "none");
	assert_string_equal(jstr(row, "reason"), "none");
	assert_string_equal(jstr(row, "answer"), "A 192.0.2.1");
	assert_string_equal(jstr(row, "matched"), "");
	assert_string_equal(jstr(row, "upstream"), "upstream-0");
	assert_int_equal(jint(row, "duration_us"), 1234);
	assert_true(json_is_false(json_object_get(row, "cached")));
	json_decref(one);
	json_decref(all);

	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- drop oldest ---- */

static void test_drop_oldest(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.producers = 1;
	p.buffer_max = NX_QLOG_BUFFER_MIN;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_capacity(q), NX_QLOG_BUFFER_MIN);
	/* writer not started: the ring fills, then overwrites its oldest */
	for (int i = 0; i < 40; i++) {
		char name[32];
		snprintf(name, sizeof(name), "n%d.example", i);
		struct nx_qlog_rec r = mkrec(T0 + i, 1, name);
		nx_qlog_push(q, 0, &r);
	}
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.pushed, 40);
	assert_int_equal(st.dropped_oldest, 40 - NX_QLOG_BUFFER_MIN);
	assert_int_equal(st.queue_now, NX_QLOG_BUFFER_MIN);
	assert_int_equal(st.queue_peak, NX_QLOG_BUFFER_MIN);

	assert_int_equal(nx_qlog_start(q), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, NX_QLOG_BUFFER_MIN);
	assert_int_equal(st.queue_now, 0);

	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 100);
	assert_int_equal(json_array_size(all), NX_QLOG_BUFFER_MIN);
	/* the newest were kept: 39 down to 24 */
	for (int i = 0; i < NX_QLOG_BUFFER_MIN; i++) {
		char name[32];
		snprintf(name, sizeof(name), "n%d.example", 39 - i);
		assert_string_equal(jstr(json_array_get(all, (size_t)i), "name"), name);
	}
	json_decref(all);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- privacy ---- */

struct tapped {
	pthread_mutex_t mu;
	size_t calls, n;
	struct nx_qlog_rec last;
};

static void tap(void *ud, const struct nx_qlog_rec *recs, size_t n)
{
	struct tapped *t = ud;
	pthread_mutex_lock(&t->mu);
	t->calls++;
	t->n += n;
	t->last = recs[n - 1];
	pthread_mutex_unlock(&t->mu);
}

static void privacy_level(unsigned level)
{
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.privacy = level;
	struct tapped tp = {.mu = PTHREAD_MUTEX_INITIALIZER};
	p.tap = tap;
	p.tap_ud = &tp;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);

	/* 3 queries from .10 (one blocked by a user rule), 1 from .11 */
	struct nx_qlog_rec r = mkrec(T0 + 1, 10, "a.example");
	nx_qlog_push(q, 0, &r);
	r = mkrec(T0 + 2, 10, "a.example");
	nx_qlog_push(q, 0, &r);
	r = mkrec(T0 + 3, 11, "b.example");
	nx_qlog_push(q, 1, &r);
	r = mkrec(T0 + 4, 10, "ads.example");
	mkblocked(&r, "||ads.example^");
	r.reason = NX_FILTER_R_user_deny;
	nx_qlog_push(q, 1, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);

	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 100);
	if (level == 3) {
		assert_int_equal(json_array_size(all), 0);
		assert_int_equal(tp.calls, 0);
	} else {
		assert_int_equal(json_array_size(all), 4);
		assert_int_equal(tp.n, 4);
		json_t *blk = json_array_get(all, 0); /* newest: the blocked one */
		assert_string_equal(jstr(blk, "action"), "block");
		assert_string_equal(jstr(blk, "reason"), "user_deny");
		const char *want_name = level >= 1 ? "hidden" : "ads.example";
		assert_string_equal(jstr(blk, "name"), want_name);
		assert_string_equal(jstr(blk, "matched"), want_name);
		assert_string_equal(jstr(blk, "source"), level >= 1 ? "hidden" : "||ads.example^");
		assert_string_equal(jstr(blk, "answer"), level >= 1 ? "hidden" : "A 0.0.0.0");
		assert_string_equal(jstr(blk, "client"), level >= 2 ? "hidden" : "192.168.1.10");
		/* the tap saw the same privacy-applied copy */
		assert_string_equal(tp.last.name, want_name);
		assert_int_equal(tp.last.family, level >= 2 ? 0 : AF_INET);
	}
	json_decref(all);

	/* aggregates: counters at every level, names below 1, clients below 2 */
	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &rd), 0);
	json_t *sum = NULL;
	assert_int_equal(nx_qlog_summary(rd, 0, 0, &sum), 0);
	assert_int_equal(jint(sum, "queries"), 4);
	assert_int_equal(jint(sum, "blocked"), 1);
	assert_int_equal(jint(sum, "forwarded"), 3);
	assert_int_equal(jint(sum, "clients"), level >= 2 ? 0 : 2);
	json_decref(sum);
	json_t *top = NULL;
	assert_int_equal(nx_qlog_top(rd, NX_QLOG_TOP_DOMAINS, 0, 0, 10, &top, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(top, "items")), level >= 1 ? 0 : 3);
	json_decref(top);
	assert_int_equal(nx_qlog_top(rd, NX_QLOG_TOP_BLOCKED, 0, 0, 10, &top, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(top, "items")), level >= 1 ? 0 : 1);
	json_decref(top);
	assert_int_equal(nx_qlog_top(rd, NX_QLOG_TOP_CLIENTS, 0, 0, 10, &top, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(top, "items")), level >= 2 ? 0 : 2);
	json_decref(top);
	nx_qlog_reader_close(rd);

	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 4);
	nx_qlog_free(q);
	tdir_remove(&t);
}

static void test_privacy_levels(void **state)
{
	(void)state;
	for (unsigned level = 0; level <= 3; level++) {
		privacy_level(level);
	}
}

static void test_privacy_runtime(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	struct nx_qlog_rec r = mkrec(T0, 10, "before.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(nx_qlog_set_privacy(q, 4), -EINVAL);
	assert_int_equal(nx_qlog_set_privacy(q, 1), 0);
	r = mkrec(T0 + 1, 10, "after.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 100);
	assert_int_equal(json_array_size(all), 2);
	assert_string_equal(jstr(json_array_get(all, 0), "name"), "hidden");
	assert_string_equal(jstr(json_array_get(all, 1), "name"), "before.example");
	json_decref(all);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- retention ---- */

static void test_retention(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.retention_days = 0; /* enabled after the rows are in: deletions are exact */
	g_now = T0;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	/* 2500 old rows (several retention statements), over 3 minutes; 10 recent ones */
	for (int i = 0; i < 2500; i++) {
		struct nx_qlog_rec r = mkrec(T0 - 10 * DAY_MS + i * 50, 10, "old.example");
		nx_qlog_push(q, (unsigned)i % 2, &r);
		if (i % 1000 == 999) {
			assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
		}
	}
	for (int i = 0; i < 10; i++) {
		struct nx_qlog_rec r = mkrec(T0 - DAY_MS + i, 11, "new.example");
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(nx_qlog_flush(q, NX_QLOG_FLUSH_RETENTION, 10000), 0);
	assert_int_equal(count_rows(t.db), 2510);
	assert_int_equal(nx_qlog_set_retention(q, 7), 0);
	assert_int_equal(nx_qlog_flush(q, NX_QLOG_FLUSH_RETENTION, 10000), 0);
	assert_int_equal(count_rows(t.db), 10);

	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	/* 2500 rows + 3 minute rows + (3 name + 3 client) top rows */
	assert_int_equal(st.retention_deleted, 2500 + 3 + 6);

	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &rd), 0);
	json_t *sum = NULL;
	assert_int_equal(nx_qlog_summary(rd, 0, 0, &sum), 0);
	assert_int_equal(jint(sum, "queries"), 10);
	assert_int_equal(jint(sum, "clients"), 1);
	json_decref(sum);
	json_t *top = NULL;
	assert_int_equal(nx_qlog_top(rd, NX_QLOG_TOP_DOMAINS, 0, 0, 10, &top, NULL), 0);
	json_t *items = json_object_get(top, "items");
	assert_int_equal(json_array_size(items), 1);
	assert_string_equal(jstr(json_array_get(items, 0), "key"), "new.example");
	json_decref(top);
	nx_qlog_reader_close(rd);

	/* 0 = keep forever: the clock moves a year, nothing is deleted */
	assert_int_equal(nx_qlog_set_retention(q, NX_QLOG_RETENTION_MAX + 1), -EINVAL);
	assert_int_equal(nx_qlog_set_retention(q, 0), 0);
	g_now = T0 + 365 * DAY_MS;
	assert_int_equal(nx_qlog_flush(q, NX_QLOG_FLUSH_RETENTION, 10000), 0);
	assert_int_equal(count_rows(t.db), 10);
	/* 1 day: now everything is older */
	assert_int_equal(nx_qlog_set_retention(q, 1), 0);
	assert_int_equal(nx_qlog_flush(q, NX_QLOG_FLUSH_RETENTION, 10000), 0);
	assert_int_equal(count_rows(t.db), 0);
	g_now = T0;
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- disk errors ---- */

static void push_n(struct nx_qlog *q, int n, int64_t ts, uint64_t *max_us)
{
	for (int i = 0; i < n; i++) {
		struct nx_qlog_rec r = mkrec(ts + i, 10, "e.example");
		uint64_t t = nx_now_mono_us();
		nx_qlog_push(q, 0, &r);
		t = nx_now_mono_us() - t;
		if (max_us && t > *max_us) {
			*max_us = t;
		}
	}
}

static uint64_t errors_total(const struct nx_qlog_stats *st)
{
	return st->err_full + st->err_readonly + st->err_busy + st->err_ioerr + st->err_cantopen +
	       st->err_other;
}

/* The database path is a directory: DNS starts, writes fail and are counted, the writer
 * recovers once the directory is gone. */
static void test_error_directory(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(mkdir(t.db, 0700), 0);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	uint64_t max_us = 0;
	push_n(q, 200, T0, &max_us);
	assert_int_equal(nx_qlog_flush(q, 0, 400), NX_ETIMEDOUT);
	push_n(q, 200, T0 + 1000, &max_us);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_true(errors_total(&st) >= 2);
	printf("# directory as database: cantopen %llu ioerr %llu other %llu\n",
	       (unsigned long long)st.err_cantopen, (unsigned long long)st.err_ioerr,
	       (unsigned long long)st.err_other);
	assert_int_equal(st.writer_ok, 0);
	assert_int_equal(st.written, 0);
	assert_int_equal(st.pushed, 400);
	/* never waited on the disk (generous bound for a loaded 2-core machine) */
	assert_true(max_us < 50000);

	assert_int_equal(rmdir(t.db), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 30000), 0);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.writer_ok, 1);
	assert_int_equal(st.written, 400);
	assert_int_equal(count_rows(t.db), 400);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* Another connection holds the write lock: busy counted, records kept, written after. */
static void test_error_busy(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);

	sqlite3 *other = NULL;
	assert_int_equal(sqlite3_open(t.db, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	push_n(q, 50, T0, NULL);
	assert_int_equal(nx_qlog_flush(q, 0, 400), NX_ETIMEDOUT);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_true(st.err_busy >= 1);
	assert_int_equal(st.written, 0);
	assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);

	assert_int_equal(nx_qlog_flush(q, 0, 30000), 0);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 50);
	assert_int_equal(count_rows(t.db), 50);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* A read-only database file (as root, permission bits only bind after seteuid). */
static void test_error_readonly(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	bool root = geteuid() == 0;
	if (root) {
		assert_int_equal(chown(t.dir, 65534, 65534), 0);
		assert_int_equal(seteuid(65534), 0);
	}
	assert_int_equal(nx_qlog_db_migrate(t.db, -1), 0);
	assert_int_equal(chmod(t.db, 0444), 0);

	struct nx_qlog_params p;
	test_params(&p, t.db);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	push_n(q, 30, T0, NULL);
	assert_int_equal(nx_qlog_flush(q, 0, 400), NX_ETIMEDOUT);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_true(st.err_readonly >= 1);
	assert_int_equal(st.written, 0);

	assert_int_equal(chmod(t.db, 0644), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 30000), 0);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 30);
	nx_qlog_free(q);
	assert_int_equal(count_rows(t.db), 30);
	if (root) {
		assert_int_equal(seteuid(0), 0);
	}
	tdir_remove(&t);
}

/* Stop with the database unavailable: every record is accounted for. */
static void test_stop_unwritten(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(mkdir(t.db, 0700), 0);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.batch_max = 16;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	push_n(q, 40, T0, NULL);
	nx_qlog_stop(q);
	nx_qlog_stop(q);
	assert_int_equal(nx_qlog_flush(q, 0, 10), -ESRCH);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.pushed, 40);
	assert_int_equal(st.written + st.dropped_unwritten + st.dropped_oldest + st.queue_now, 40);
	assert_int_equal(st.dropped_unwritten, 40);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- params, ledger, memory figures ---- */

static void test_params_and_ledger(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct nx_qlog *q = NULL;
	test_params(&p, t.db);
	p.producers = 0;
	assert_int_equal(nx_qlog_new(&p, &q), -EINVAL);
	test_params(&p, t.db);
	p.privacy = 4;
	assert_int_equal(nx_qlog_new(&p, &q), -EINVAL);
	test_params(&p, NULL);
	assert_int_equal(nx_qlog_new(&p, &q), -EINVAL);
	nx_qlog_push(NULL, 0, NULL); /* query log off */
	nx_qlog_free(NULL);

	int64_t base_q = ledger_bytes(NX_OWNER_querylog_queue);
	int64_t base_qn = ledger_count(NX_OWNER_querylog_queue);
	int64_t base_sn = ledger_count(NX_OWNER_sqlite);
	nx_qlog_params_default(&p);
	p.path = t.db;
	p.producers = 3;
	assert_int_equal(p.buffer_max, NX_QLOG_BUFFER_DEFAULT);
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	/* 3 rings of ceil(2048 / 3) = 683 records */
	assert_int_equal(nx_qlog_capacity(q), 3 * 683);
	int64_t rings = 3 * 683 * NX_QLOG_REC_SIZE;
	int64_t batch = NX_QLOG_BATCH_DEFAULT * NX_QLOG_REC_SIZE;
	int64_t charged = ledger_bytes(NX_OWNER_querylog_queue) - base_q;
	assert_true(charged >= rings + batch);
	assert_true(charged <= rings + batch + 64 * 1024);
	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &rd), 0);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.writer_cache_kib, NX_QLOG_WRITER_CACHE_KIB);
	assert_int_equal(nx_qlog_reader_cache_kib(rd), NX_QLOG_READER_CACHE_KIB);
	assert_int_equal(ledger_count(NX_OWNER_sqlite) - base_sn, 2); /* 2 connections */
	assert_int_equal(ledger_bytes(NX_OWNER_sqlite), (int64_t)st.sqlite_mem_used);
	printf("# memory: record %d B, default rings (1 producer) %d B, querylog_queue charged "
	       "%lld B for 3 producers; sqlite heap with writer+reader open %llu B (high-water "
	       "%llu B)\n",
	       NX_QLOG_REC_SIZE, NX_QLOG_BUFFER_DEFAULT * NX_QLOG_REC_SIZE, (long long)charged,
	       (unsigned long long)st.sqlite_mem_used,
	       (unsigned long long)st.sqlite_mem_highwater);
	nx_qlog_reader_close(rd);
	nx_qlog_free(q);
	assert_int_equal(ledger_bytes(NX_OWNER_querylog_queue), base_q);
	assert_int_equal(ledger_count(NX_OWNER_querylog_queue), base_qn);
	assert_int_equal(ledger_count(NX_OWNER_sqlite), base_sn);
	int64_t used = 0;
	nx_qlog_sqlite_memory(&used, NULL);
	assert_int_equal(ledger_bytes(NX_OWNER_sqlite), used);

	/* writer cache size is a parameter and is read back */
	test_params(&p, t.db);
	p.writer_cache_kib = 300;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.writer_cache_kib, 300);
	nx_qlog_free(q);
	assert_int_equal(ledger_bytes(NX_OWNER_querylog_queue), base_q);
	tdir_remove(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_producers),
		cmocka_unit_test(test_drop_oldest),
		cmocka_unit_test(test_privacy_levels),
		cmocka_unit_test(test_privacy_runtime),
		cmocka_unit_test(test_retention),
		cmocka_unit_test(test_error_directory),
		cmocka_unit_test(test_error_busy),
		cmocka_unit_test(test_error_readonly),
		cmocka_unit_test(test_stop_unwritten),
		cmocka_unit_test(test_params_and_ledger),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

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
	snprintf(r.client_id, sizeof(r.client_id), "phone"); /* a DoH /dns-query/phone query */
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
		/* the client id names the device: hidden with the address */
		assert_string_equal(jstr(blk, "client_id"), level >= 2 ? "" : "phone");
		assert_string_equal(jstr(json_array_get(all, 1), "client_id"), "");
		/* the tap saw the same privacy-applied copy */
		assert_string_equal(tp.last.client_id, level >= 2 ? "" : "phone");
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
	/* 2500 rows + 3 minute rows + (3 name + 3 client) top rows + 3 minutes' names */
	assert_int_equal(st.retention_deleted, 2500 + 3 + 6 + 3);

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
	/* the writer may still be in its start-up transaction (slow under a sanitizer): wait for
	 * it, then hold the database so its next write is the one that meets SQLITE_BUSY */
	assert_int_equal(sqlite3_busy_timeout(other, 10000), SQLITE_OK);
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
	/* the failed attempts left nothing in the aggregates: counted once */
	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &rd), 0);
	json_t *sum = NULL;
	assert_int_equal(nx_qlog_summary(rd, 0, 0, &sum), 0);
	assert_int_equal(jint(sum, "queries"), 50);
	json_decref(sum);
	json_t *top = NULL;
	assert_int_equal(nx_qlog_top(rd, NX_QLOG_TOP_DOMAINS, 0, 0, 10, &top, NULL), 0);
	json_t *items = json_object_get(top, "items");
	assert_int_equal(json_array_size(items), 1);
	assert_int_equal(jint(json_array_get(items, 0), "count"), 50);
	json_decref(top);
	nx_qlog_reader_close(rd);
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

/* ---- per-minute aggregates: bound, failures, minutes out of order ---- */

static int64_t summary_int(const char *path, const char *field)
{
	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(path, &rd), 0);
	json_t *sum = NULL;
	assert_int_equal(nx_qlog_summary(rd, 0, 0, &sum), 0);
	int64_t v = jint(sum, field);
	json_decref(sum);
	nx_qlog_reader_close(rd);
	return v;
}

/* More distinct names in a minute than NX_QLOG_AGG_KEYS_MAX: the first keys of the minute are
 * counted by name, later new ones under "(other)", across transactions; the next minute
 * starts over. Totals stay exact. */
static void test_agg_bound(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	const int burst = 5000;
	for (int i = 0; i < 100; i++) {
		struct nx_qlog_rec r = mkrec(T0 + i, 10, "popular.example");
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	for (int i = 0; i < burst; i++) {
		char name[64];
		snprintf(name, sizeof(name), "n%05d.burst.example", i);
		struct nx_qlog_rec r = mkrec(T0 + 1000 + i, 10, name);
		mkblocked(&r, "list");
		nx_qlog_push(q, 0, &r);
		if (i == burst / 2) {
			assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
		}
	}
	/* a name first seen after the minute's table is full */
	for (int i = 0; i < 50; i++) {
		struct nx_qlog_rec r = mkrec(T0 + 50000 + i, 10, "late.example");
		nx_qlog_push(q, 0, &r);
	}
	/* the next minute admits it by name (pushed once minute 0 is written: records of a minute
	 * that arrive after a newer one started count that minute's keys afresh) */
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	for (int i = 0; i < 10; i++) {
		struct nx_qlog_rec r = mkrec(T0 + MIN_MS + i, 10, "late.example");
		nx_qlog_push(q, 1, &r);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);

	const int kmax = NX_QLOG_AGG_KEYS_MAX;
	int other_names = burst - (kmax - 1) + 50; /* popular took one key */
	int other_blocked = burst - kmax;
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 100 + burst + 60);
	assert_int_equal(st.agg_other, other_names + other_blocked);
	assert_int_equal(count_rows(t.db), 100 + burst + 60);
	assert_int_equal(summary_int(t.db, "queries"), 100 + burst + 60);
	assert_int_equal(summary_int(t.db, "blocked"), burst);
	assert_int_equal(summary_int(t.db, "clients"), 1);

	char sql[160];
	int64_t m0 = T0 / MIN_MS;
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM agg_top WHERE kind = 0 AND minute = %lld",
		 (long long)m0);
	assert_int_equal(sql_int(t.db, sql), kmax + 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM agg_top WHERE kind = 1 AND minute = %lld",
		 (long long)m0);
	assert_int_equal(sql_int(t.db, sql), kmax + 1);
	snprintf(sql, sizeof(sql), "SELECT SUM(n) FROM agg_top WHERE kind = 0 AND minute = %lld",
		 (long long)m0);
	assert_int_equal(sql_int(t.db, sql), 100 + burst + 50);

	const char *const dom[] = {NX_QLOG_AGG_OTHER, "popular.example", "late.example",
				   "n00000.burst.example"};
	const int domn[] = {other_names, 100, 10, 1};
	expect_top_all(t.db, NX_QLOG_TOP_DOMAINS, 4, dom, domn, 4);
	const char *const blk[] = {NX_QLOG_AGG_OTHER, "n00000.burst.example"};
	const int blkn[] = {other_blocked, 1};
	expect_top_all(t.db, NX_QLOG_TOP_BLOCKED, 2, blk, blkn, 2);
	const char *const cli[] = {"192.168.1.10"};
	const int clin[] = {100 + burst + 60};
	expect_top_all(t.db, NX_QLOG_TOP_CLIENTS, 10, cli, clin, 1);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/*
 * A transaction that fails after its rows and keys were counted (an injected trigger makes
 * one aggregate upsert fail, after the batch already crossed a minute boundary): rolled back,
 * retried, and every aggregate counted exactly once.
 */
static void test_agg_failure_retry(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(nx_qlog_db_migrate(t.db, -1), 0);
	char sql[300];
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE fail(x); INSERT INTO fail VALUES (1);"
		 "CREATE TRIGGER inject BEFORE INSERT ON agg_top WHEN NEW.minute = %lld"
		 " AND EXISTS (SELECT 1 FROM fail) BEGIN SELECT RAISE(ABORT, 'injected'); END;",
		 (long long)(T0 / MIN_MS + 1));
	sql_exec(t.db, sql);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.producers = 1;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	/* one batch: 3 in minute 0, then 2 in minute 1 */
	for (int i = 0; i < 3; i++) {
		struct nx_qlog_rec r = mkrec(T0 + i, 10, "a.example");
		nx_qlog_push(q, 0, &r);
	}
	for (int i = 0; i < 2; i++) {
		struct nx_qlog_rec r = mkrec(T0 + MIN_MS + i, 11, "b.example");
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(nx_qlog_start(q), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 400), NX_ETIMEDOUT);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_true(st.err_other >= 1);
	assert_int_equal(st.written, 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries"), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 0);

	sql_exec(t.db, "DELETE FROM fail");
	assert_int_equal(nx_qlog_flush(q, 0, 30000), 0);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 5);
	assert_int_equal(count_rows(t.db), 5);
	assert_int_equal(summary_int(t.db, "queries"), 5);
	assert_int_equal(summary_int(t.db, "clients"), 2);
	const char *const dom[] = {"a.example", "b.example"};
	const int domn[] = {3, 2};
	expect_top_all(t.db, NX_QLOG_TOP_DOMAINS, 10, dom, domn, 2);
	const char *const cli[] = {"192.168.1.10", "192.168.1.11"};
	expect_top_all(t.db, NX_QLOG_TOP_CLIENTS, 10, cli, domn, 2);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* Poll written (no flush) until it reaches n or timeout_ms passes. */
static uint64_t wait_written(struct nx_qlog *q, uint64_t n, int timeout_ms)
{
	struct nx_qlog_stats st;
	for (int i = 0;; i += 10) {
		nx_qlog_stats(q, &st);
		if (st.written >= n || i >= timeout_ms) {
			return st.written;
		}
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/*
 * Aggregates are upserted at most every agg_ms (not per transaction): the rows commit first,
 * and a record counts as written only once its aggregates are committed too. A flush writes
 * them at once; without one, the interval does.
 */
static void test_agg_deferred(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.producers = 1;
	p.flush_ms = 10;
	p.agg_ms = 60000;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	for (int i = 0; i < 5; i++) {
		struct nx_qlog_rec r = mkrec(T0 + i, 10, "a.example");
		nx_qlog_push(q, 0, &r);
	}
	for (int i = 0; i < 500 && count_rows(t.db) < 5; i++) {
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	assert_int_equal(count_rows(t.db), 5);
	assert_int_equal(wait_written(q, 5, 300), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 30000), 0);
	assert_int_equal(wait_written(q, 5, 0), 5);
	assert_int_equal(summary_int(t.db, "queries"), 5);
	nx_qlog_free(q);

	/* a short interval: written without a flush, aggregates with it */
	p.agg_ms = 50;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	for (int i = 0; i < 3; i++) {
		struct nx_qlog_rec r = mkrec(T0 + 10 + i, 11, "b.example");
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(wait_written(q, 3, 10000), 3);
	assert_int_equal(summary_int(t.db, "queries"), 8);
	assert_int_equal(summary_int(t.db, "clients"), 2);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* Minutes out of order in one batch (a slower ring, more minutes than the table holds at
 * once) and late records after newer minutes: every count lands in its minute. */
static void test_agg_minutes(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	for (int i = 0; i < 10; i++) {
		struct nx_qlog_rec r = mkrec(T0 + MIN_MS + i, 1, "b.example");
		nx_qlog_push(q, 0, &r);
	}
	for (int i = 0; i < 10; i++) {
		struct nx_qlog_rec r = mkrec(T0 + i, 2, "a.example");
		nx_qlog_push(q, 1, &r);
	}
	for (int m = 2; m < 8; m++) {
		struct nx_qlog_rec r = mkrec(T0 + m * MIN_MS, 1, "c.example");
		nx_qlog_push(q, 0, &r);
	}
	for (int i = 0; i < 3; i++) {
		struct nx_qlog_rec r = mkrec(T0 + 30000 + i, 2, "a.example");
		nx_qlog_push(q, 1, &r);
	}
	assert_int_equal(nx_qlog_start(q), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	/* and one more for minute 1, after minute 7 was written */
	struct nx_qlog_rec r = mkrec(T0 + MIN_MS + 59999, 2, "b.example");
	nx_qlog_push(q, 1, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);

	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &rd), 0);
	json_t *h = NULL;
	assert_int_equal(nx_qlog_history(rd, T0, T0 + 8 * MIN_MS, 60, &h, NULL), 0);
	json_t *pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 8);
	const int want[] = {13, 11, 1, 1, 1, 1, 1, 1};
	for (size_t i = 0; i < 8; i++) {
		assert_int_equal(jint(json_array_get(pts, i), "queries"), want[i]);
	}
	json_decref(h);
	nx_qlog_reader_close(rd);
	const char *const dom[] = {"a.example", "b.example", "c.example"};
	const int domn[] = {13, 11, 6};
	expect_top_all(t.db, NX_QLOG_TOP_DOMAINS, 10, dom, domn, 3);
	const char *const cli[] = {"192.168.1.1", "192.168.1.2"};
	const int clin[] = {16, 14};
	expect_top_all(t.db, NX_QLOG_TOP_CLIENTS, 10, cli, clin, 2);
	/* one agg_top row per (kind, minute, key): minute 0 a/.2, minute 1 b/.1/.2, 2..7 c/.1 */
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_top"), 2 + 3 + 6 * 2);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- the packed batch: every field round-trips, long records end batches by bytes ---- */

static void fill_text(char *dst, size_t cap, char c, size_t len)
{
	memset(dst, c, len);
	dst[len] = '\0';
	(void)cap;
}

static void test_packed_fields(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.producers = 1;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);

	/* longest fields, matched == name (stored once), IPv6 client */
	struct nx_qlog_rec big = mkrec(T0, 1, "");
	fill_text(big.name, sizeof(big.name), 'n', NX_QLOG_NAME_MAX - 1);
	memcpy(big.matched, big.name, sizeof(big.name));
	fill_text(big.source, sizeof(big.source), 's', NX_QLOG_SOURCE_MAX - 1);
	fill_text(big.answer, sizeof(big.answer), 'a', NX_QLOG_ANSWER_MAX - 1);
	big.family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", big.client), 1);
	big.action = NX_QLOG_ACT_BLOCK;
	/* matched differs from name; no answer; an unterminated source is cut */
	struct nx_qlog_rec other = mkrec(T0 + 1, 255, "x.parent.example");
	snprintf(other.matched, sizeof(other.matched), "parent.example");
	memset(other.source, 'z', sizeof(other.source));
	other.answer[0] = '\0';
	other.upstream = -1;
	other.rcode = 3;
	other.qtype = 65;
	/* 700 records of the largest size: a batch ends on bytes long before batch_max */
	const int n_big = 700;
	for (int i = 0; i < n_big; i++) {
		big.ts_ms = T0 + 10 + i;
		big.upstream = (int16_t)(i % 20); /* more upstreams than the name cache slots */
		big.name[0] = (char)('a' + i % 26);
		big.matched[0] = big.name[0];
		nx_qlog_push(q, 0, &big);
	}
	nx_qlog_push(q, 0, &other);
	assert_int_equal(nx_qlog_start(q), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, n_big + 1);
	size_t per_batch = nx_qlog_batch_bytes(NX_QLOG_BATCH_DEFAULT) / 680;
	assert_true(st.batches >= (uint64_t)(n_big / per_batch));

	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 1000);
	assert_int_equal(json_array_size(all), n_big + 1);
	for (int i = 0; i < n_big; i++) {
		json_t *row = json_array_get(all, (size_t)(n_big - 1 - i)); /* newest first */
		assert_int_equal(jint(row, "ts"), T0 + 10 + i);
		const char *name = jstr(row, "name");
		assert_int_equal(strlen(name), NX_QLOG_NAME_MAX - 1);
		assert_int_equal(name[0], 'a' + i % 26);
		assert_int_equal(name[1], 'n');
		assert_string_equal(jstr(row, "matched"), name);
		assert_int_equal(strlen(jstr(row, "source")), NX_QLOG_SOURCE_MAX - 1);
		assert_int_equal(strlen(jstr(row, "answer")), NX_QLOG_ANSWER_MAX - 1);
		assert_string_equal(jstr(row, "client"), "2001:db8::1");
		assert_string_equal(jstr(row, "action"), "block");
		char up[32];
		snprintf(up, sizeof(up), "upstream-%d", i % 20);
		assert_string_equal(jstr(row, "upstream"), up);
	}
	/* the oldest: the short one */
	json_t *row = json_array_get(all, n_big);
	assert_string_equal(jstr(row, "name"), "x.parent.example");
	assert_string_equal(jstr(row, "matched"), "parent.example");
	assert_int_equal(strlen(jstr(row, "source")), NX_QLOG_SOURCE_MAX - 1);
	assert_string_equal(jstr(row, "answer"), "");
	assert_string_equal(jstr(row, "client"), "192.168.1.255");
	assert_string_equal(jstr(row, "rcode"), "NXDOMAIN");
	assert_true(json_is_null(json_object_get(row, "upstream")));
	json_decref(all);
	/* null for empty optional text, as before */
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE answer IS NULL"), 1);
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
	/* byte rings: 683 x NX_QLOG_RING_REC_BYTES each */
	int64_t rings = 3 * 683 * NX_QLOG_RING_REC_BYTES;
	assert_int_equal(nx_qlog_capacity_bytes(q), rings);
	assert_int_equal(nx_qlog_ring_bytes(683), 683 * 128);
	assert_int_equal(nx_qlog_ring_bytes(1), NX_QLOG_RING_MIN_BYTES);
	/* packed batch + the drain scratch + the block encoder + the per-minute aggregate table */
	int64_t batch = (int64_t)nx_qlog_batch_bytes(NX_QLOG_BATCH_DEFAULT) +
			NX_QLOG_DRAIN_CHUNK * NX_QLOG_REC_SIZE + NX_QLOG_BLOCK_BYTES;
	assert_int_equal(nx_qlog_batch_bytes(NX_QLOG_BATCH_DEFAULT),
			 NX_QLOG_BATCH_DEFAULT * NX_QLOG_BATCH_REC_BYTES + 744);
	int64_t agg = NX_QLOG_AGG_BYTES;
	int64_t charged = ledger_bytes(NX_OWNER_querylog_queue) - base_q;
	assert_true(charged >= rings + batch + agg);
	assert_true(charged <= rings + batch + agg + 16 * 1024);
	struct nx_qlog_reader *rd = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &rd), 0);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.writer_cache_kib, NX_QLOG_WRITER_CACHE_KIB);
	assert_int_equal(nx_qlog_reader_cache_kib(rd), NX_QLOG_READER_CACHE_KIB);
	assert_int_equal(ledger_count(NX_OWNER_sqlite) - base_sn, 2); /* 2 connections */
	assert_int_equal(ledger_bytes(NX_OWNER_sqlite), (int64_t)st.sqlite_mem_used);
	printf("# memory: record %d B, default rings (1 producer) %d B, batch + scratch %lld B, "
	       "aggregates %lld B, querylog_queue charged %lld B for 3 producers; sqlite heap with "
	       "writer+reader open %llu B (high-water %llu B)\n",
	       NX_QLOG_REC_SIZE, NX_QLOG_BUFFER_DEFAULT * NX_QLOG_RING_REC_BYTES, (long long)batch,
	       (long long)agg, (long long)charged,
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
		cmocka_unit_test(test_agg_bound),
		cmocka_unit_test(test_agg_failure_retry),
		cmocka_unit_test(test_agg_minutes),
		cmocka_unit_test(test_agg_deferred),
		cmocka_unit_test(test_packed_fields),
		cmocka_unit_test(test_params_and_ledger),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

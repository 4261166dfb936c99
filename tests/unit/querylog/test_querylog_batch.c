/*
 * Batched commits (params.commit_ms, logging.commit_interval): drained records are held in
 * the writer's batch (the tap sees them at once) and committed in one transaction when the
 * interval passes, the batch fills, a flush asks, or the writer stops.
 *
 * No timed assertions: "held" is checked after the tap has seen every record with an interval
 * of a minute that the test never waits for; the interval itself by waiting for the commit.
 */
#include "helpers.h"

#include <time.h>

struct counted {
	_Atomic size_t n;
};

static void count_tap(void *ud, const struct nx_qlog_rec *recs, size_t n)
{
	(void)recs;
	struct counted *c = ud;
	atomic_fetch_add(&c->n, n);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Wait (bounded, 20 s) until the tap saw n records. */
static void wait_tapped(struct counted *c, size_t n)
{
	for (int i = 0; i < 4000 && atomic_load(&c->n) < n; i++) {
		sleep_ms(5);
	}
	assert_int_equal(atomic_load(&c->n), n);
}

/* Wait (bounded, 20 s) until at least n records are written. */
static uint64_t wait_written(struct nx_qlog *q, uint64_t n)
{
	struct nx_qlog_stats st;
	for (int i = 0; i < 4000; i++) {
		nx_qlog_stats(q, &st);
		if (st.written >= n) {
			break;
		}
		sleep_ms(5);
	}
	return st.written;
}

static void push_n(struct nx_qlog *q, unsigned from, unsigned n);

/*
 * Push records [from, from + n), wait until the tap saw them, then push one more and wait for
 * it too: the writer drains in turns and a turn's commit (if it made one) ends before its next
 * drain, so once the marker is tapped, a commit of the first n would be complete. Returns the
 * records pushed (n + 1).
 */
static unsigned push_settled(struct nx_qlog *q, struct counted *c, unsigned from, unsigned n)
{
	push_n(q, from, n);
	wait_tapped(c, from + n);
	push_n(q, from + n, 1);
	wait_tapped(c, from + n + 1);
	return n + 1;
}

static void push_n(struct nx_qlog *q, unsigned from, unsigned n)
{
	for (unsigned i = from; i < from + n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "b%u.example", i);
		struct nx_qlog_rec r = mkrec(T0 + i, 1 + i % 5, name);
		nx_qlog_push(q, i % 2, &r);
	}
}

static int64_t stored(const char *db)
{
	return sql_int(db, "SELECT COALESCE(SUM(n), 0) FROM log_blocks");
}

static struct nx_qlog *start_batching(struct nx_qlog_params *p, const char *db, struct counted *c,
				      unsigned commit_ms, unsigned batch_max)
{
	test_params(p, db);
	p->commit_ms = commit_ms;
	p->batch_max = batch_max;
	p->tap = count_tap;
	p->tap_ud = c;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	return q;
}

/* Held until the interval (a minute, never reached here): nothing committed while the tap has
 * seen every record; stop commits them all in one transaction, aggregates included. */
static void test_held_then_flushed_at_stop(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, NX_QLOG_BATCH_HOLD);
	unsigned n = push_settled(q, &c, 0, 300);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.queue_now, 0); /* drained out of the rings ... */
	assert_int_equal(st.written, 0);   /* ... and held, not committed */
	assert_int_equal(st.batches, 0);
	assert_int_equal(stored(t.db), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 0);

	nx_qlog_stop(q);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, n);
	assert_int_equal(st.batches, 1);
	assert_int_equal(st.dropped_unwritten, 0);
	assert_int_equal(stored(t.db), n);
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), n);
	assert_int_equal(count_rows(t.db), n);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* A flush request (what the admin API asks before it reads) commits the held records. */
static void test_flush_commits_held(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, NX_QLOG_BATCH_HOLD);
	unsigned n = push_settled(q, &c, 0, 40);
	assert_int_equal(stored(t.db), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(stored(t.db), n);
	assert_int_equal(count_rows(t.db), n);
	/* the next records are held again */
	unsigned m = push_settled(q, &c, n, 10);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, n);
	assert_int_equal(stored(t.db), n);
	nx_qlog_stop(q);
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, n + m);
	assert_int_equal(st.batches, 2);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* The interval alone commits: a short one, waited for (no flush, no stop). */
static void test_interval_commits(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 100, NX_QLOG_BATCH_HOLD);
	push_n(q, 0, 25);
	assert_int_equal(wait_written(q, 25), 25);
	assert_int_equal(stored(t.db), 25);
	/* a household's batch: its aggregates are counted from the blocks later (or now, at a
	 * flush: the admin API's reads) */
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 0);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), 25);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* A batch commits at the end of the wall clock's minute when that comes before its interval,
 * so a 60 s batch is one block (a block never spans a minute), and the end of a minute
 * before the interval's last minute does not commit it (a longer interval keeps its
 * commits). */
static void test_commit_at_minute_end(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	g_now = T0 + MIN_MS - 300; /* 300 ms before the minute ends */
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, NX_QLOG_BATCH_HOLD);
	push_n(q, 0, 20);
	assert_int_equal(wait_written(q, 20), 20); /* long before the 60 s */
	assert_int_equal(stored(t.db), 20);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks"), 1);
	nx_qlog_free(q);
	tdir_remove(&t);

	struct tdir t2;
	tdir_make(&t2);
	struct counted c2 = {0};
	q = start_batching(&p, t2.db, &c2, 120000, NX_QLOG_BATCH_HOLD);
	unsigned n = push_settled(q, &c2, 0, 20);
	sleep_ms(1000); /* past the minute's end: the interval's last minute is the next one */
	assert_int_equal(stored(t2.db), 0);
	nx_qlog_stop(q);
	assert_int_equal(stored(t2.db), n);
	nx_qlog_free(q);
	tdir_remove(&t2);
	g_now = T0;
}

/* The batch's bound: more records than it holds commit in transactions of at most batch_max
 * records before the interval, without a drop. */
static void test_bound_commits_early(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, 256);
	push_n(q, 0, 1000);
	wait_tapped(&c, 1000);
	uint64_t w = wait_written(q, 1000 - 256 + 1);
	assert_true(w > 1000 - 256); /* what is held fits one batch */
	assert_true(sql_int(t.db, "SELECT MAX(n) FROM log_blocks") <= 256);
	nx_qlog_stop(q);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 1000);
	assert_int_equal(st.dropped_oldest, 0);
	assert_true(st.batches >= 1000 / 256 + 1);
	assert_int_equal(stored(t.db), 1000);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* Records drained at one privacy are not stored under another: a change commits what is
 * held first. */
static void test_privacy_change_commits_first(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, NX_QLOG_BATCH_HOLD);
	push_n(q, 0, 5);
	wait_tapped(&c, 5);
	assert_int_equal(nx_qlog_set_privacy(q, 1), 0);
	push_n(q, 5, 5);
	wait_tapped(&c, 10);
	nx_qlog_stop(q);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 10);
	assert_int_equal(st.batches, 2);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE name = 'hidden'"), 5);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE name LIKE 'b%'"), 5);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* A held batch that crosses a minute commits the old minute's names (agg_names, closed and
 * trusted) and counts in its own transaction: one transaction, and the name filter still
 * finds both minutes' records. */
static void test_batch_across_minutes(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, NX_QLOG_BATCH_HOLD);
	for (unsigned i = 0; i < 10; i++) {
		struct nx_qlog_rec r = mkrec(T0 + i, 1, "first.example");
		nx_qlog_push(q, 0, &r);
	}
	wait_tapped(&c, 10);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	for (unsigned i = 0; i < 10; i++) {
		struct nx_qlog_rec r = mkrec(T0 + MIN_MS + i, 2, "second.example");
		nx_qlog_push(q, 1, &r);
	}
	wait_tapped(&c, 20);
	nx_qlog_stop(q);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 20);
	assert_int_equal(st.batches, 2);
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), 20);
	assert_int_equal(sql_int(t.db,
				 "SELECT COUNT(*) FROM agg_names WHERE open = 0 AND folded = 0"
				 " AND instr(names, 'first.example') > 0"),
			 1);
	struct nx_qlog_filter f = {.name = "first.example"};
	json_t *all = read_all(t.db, f, 100);
	assert_int_equal(json_array_size(all), 10);
	json_decref(all);
	f.name = "second.example";
	all = read_all(t.db, f, 100);
	assert_int_equal(json_array_size(all), 10);
	json_decref(all);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* The held batch's memory is the documented bound, on the query log's owner. */
static void test_hold_memory(void **state)
{
	(void)state;
	assert_int_equal(nx_qlog_batch_bytes(NX_QLOG_BATCH_HOLD),
			 (size_t)NX_QLOG_BATCH_HOLD * NX_QLOG_BATCH_REC_BYTES +
			     nx_qlog_batch_bytes(0));
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	int64_t before = ledger_bytes(NX_OWNER_querylog_queue);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	int64_t prompt = ledger_bytes(NX_OWNER_querylog_queue) - before;
	nx_qlog_free(q);
	p.commit_ms = 60000;
	p.batch_max = NX_QLOG_BATCH_HOLD;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	int64_t held = ledger_bytes(NX_OWNER_querylog_queue) - before;
	assert_int_equal(held - prompt, (int64_t)(nx_qlog_batch_bytes(NX_QLOG_BATCH_HOLD) -
						  nx_qlog_batch_bytes(NX_QLOG_BATCH_DEFAULT)));
	nx_qlog_free(q);
	assert_int_equal(ledger_bytes(NX_OWNER_querylog_queue), before);
	/* out of range */
	p.commit_ms = NX_QLOG_COMMIT_MAX_MS + 1;
	assert_int_equal(nx_qlog_new(&p, &q), -EINVAL);
	tdir_remove(&t);
}

/* ---- aggregates counted from the stored blocks (NX_QLOG_AGG_DEFER_MS) ---- */

/* Records of three minutes, names and clients repeating, one in four blocked. */
static void push_minutes(struct nx_qlog *q, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "m%u.example", i % 7);
		struct nx_qlog_rec r = mkrec(T0 - 2 * MIN_MS + (int64_t)i * 3000, 1 + i % 3, name);
		if (i % 4 == 0) {
			r.action = NX_QLOG_ACT_BLOCK;
			snprintf(r.matched, sizeof(r.matched), "%s", name);
		}
		r.cached = i % 5 == 0;
		nx_qlog_push(q, i % 2, &r);
	}
}

/* Every aggregate row, as one text. */
static char *aggregates(const char *db)
{
	return sql_text(db, "SELECT (SELECT group_concat(x, ';') FROM (SELECT minute || ','"
			    " || queries || ',' || blocked || ',' || cached || ',' || forwarded"
			    " || ',' || udp AS x FROM agg_minute ORDER BY minute)) || '|' ||"
			    " (SELECT group_concat(x, ';') FROM (SELECT kind || ',' || minute || ','"
			    " || key || ',' || n AS x FROM agg_top ORDER BY kind, minute, key)) || '|'"
			    " || (SELECT group_concat(x, ';') FROM (SELECT kind || ',' || key || ','"
			    " || n AS x FROM agg_roll ORDER BY kind, key))");
}

/* The cadence: a household's commits store blocks only (written counts them), the
 * aggregates come when the deferral ends, from the blocks, with the watermark moved to the
 * last; then again for the next records. */
static void test_deferred_cadence(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	test_params(&p, t.db);
	p.commit_ms = 20;
	p.agg_defer_ms = 400;
	p.tap = count_tap;
	p.tap_ud = &c;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	push_minutes(q, 40);
	assert_int_equal(wait_written(q, 40), 40);
	assert_int_equal(stored(t.db), 40);
	/* committed without their aggregates (the deferral has not ended: a commit took 20 ms
	 * after the first; if this box stalled 400 ms the check below still holds) */
	int64_t first = sql_int(t.db, "SELECT COUNT(*) FROM agg_minute");
	int64_t mark = sql_int(t.db, "SELECT block FROM agg_mark");
	if (first == 0) {
		assert_int_equal(mark, 0);
	}
	/* the deferral ends: counted from the blocks, all of them */
	for (int i = 0; i < 4000 && sql_int(t.db, "SELECT COALESCE(SUM(queries), 0) FROM"
					       " agg_minute") < 40;
	     i++) {
		sleep_ms(5);
	}
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), 40);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 2);
	assert_int_equal(sql_int(t.db, "SELECT SUM(blocked) FROM agg_minute"), 10);
	assert_int_equal(sql_int(t.db, "SELECT SUM(n) FROM agg_top WHERE kind = 1"), 10);
	assert_int_equal(sql_int(t.db, "SELECT SUM(n) FROM agg_top WHERE kind = 2"), 40);
	assert_int_equal(sql_int(t.db, "SELECT block FROM agg_mark"),
			 sql_int(t.db, "SELECT MAX(id) FROM log_blocks"));
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_names"), 2);
	/* a flush makes them exact at once; stop too */
	push_minutes(q, 10);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), 50);
	push_minutes(q, 10);
	nx_qlog_stop(q);
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), 60);
	assert_int_equal(sql_int(t.db, "SELECT SUM(n) FROM agg_top WHERE kind = 0"), 60);
	struct nx_qlog_stats st;
	nx_qlog_stats(q, &st);
	assert_int_equal(st.written, 60);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/*
 * A batch held (commit_ms) while the deferred aggregates come due: they go with the batch's
 * commit, so the writer must sleep until then. It used to wake at once on every pass, a busy
 * loop of millions of passes until the commit (found by callgrind: 97% of the daemon's
 * instructions in the writer thread). The count of passes, not a time, is asserted.
 */
static void test_held_batch_no_busy_wait(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	test_params(&p, t.db);
	p.commit_ms = 1000;
	p.agg_defer_ms = 600;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	push_minutes(q, 1);
	assert_int_equal(wait_written(q, 1), 1); /* deferred: aggregates due 600 ms later */
	struct nx_qlog_stats a, b;
	nx_qlog_stats(q, &a);
	push_minutes(q, 1); /* drained within 250 ms, held for 1 s: across the aggregates' due */
	assert_int_equal(wait_written(q, 2), 2);
	nx_qlog_stats(q, &b);
	/* a flush tick every 250 ms, the drain, the commit: a handful; a busy loop: ~10^5+ */
	assert_in_range(b.writer_wakeups - a.writer_wakeups, 1, 100);
	nx_qlog_stop(q);
	nx_qlog_free(q);
	tdir_remove(&t);
}

static void copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	assert_non_null(b);
	if (a) {
		char buf[65536];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), a)) > 0) {
			assert_int_equal(fwrite(buf, 1, n, b), n);
		}
		fclose(a);
	}
	fclose(b);
}

/* A crash while blocks wait for their aggregates: the image of the files at that moment
 * (database and WAL, copied while the writer is idle) opens with the aggregates missing since
 * the watermark rebuilt from the committed records, equal to what the running writer counted;
 * a block that does not decode is skipped, not fatal. */
static void test_rebuild_after_crash(void **state)
{
	(void)state;
	struct tdir t, img;
	tdir_make(&t);
	tdir_make(&img);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 20, NX_QLOG_BATCH_HOLD);
	push_minutes(q, 30);
	assert_int_equal(wait_written(q, 30), 30);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 0); /* 10 min away */
	push_minutes(q, 25);
	assert_int_equal(wait_written(q, 55), 55);
	char wal[320], img_wal[320];
	snprintf(wal, sizeof(wal), "%s-wal", t.db);
	snprintf(img_wal, sizeof(img_wal), "%s-wal", img.db);
	copy_file(t.db, img.db);
	copy_file(wal, img_wal);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0); /* the running writer counts them */
	char *want = aggregates(t.db);
	nx_qlog_free(q);
	assert_int_equal(sql_int(img.db, "SELECT COUNT(*) FROM agg_minute"), 0);
	assert_int_equal(sql_int(img.db, "SELECT COALESCE(SUM(n), 0) FROM log_blocks"), 55);
	/* a block written by hand that is no block: skipped by the rebuild */
	sql_exec(img.db, "INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)"
			 " VALUES (1700000040000, 1700000040000, 1, 0, NULL, '{\"t\":0,\"s\":')");
	struct counted c2 = {0};
	q = start_batching(&p, img.db, &c2, 60000, NX_QLOG_BATCH_HOLD);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	char *got = aggregates(img.db);
	assert_non_null(want);
	assert_non_null(got);
	assert_string_equal(got, want);
	assert_int_equal(sql_int(img.db, "SELECT SUM(queries) FROM agg_minute"), 55);
	assert_int_equal(sql_int(img.db, "SELECT block FROM agg_mark"),
			 sql_int(img.db, "SELECT MAX(id) FROM log_blocks"));
	/* and nothing is counted twice at the next open */
	nx_qlog_free(q);
	q = start_batching(&p, img.db, &c2, 0, NX_QLOG_BATCH_HOLD);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	nx_qlog_free(q);
	assert_int_equal(sql_int(img.db, "SELECT SUM(queries) FROM agg_minute"), 55);
	free(want);
	free(got);
	tdir_remove(&t);
	tdir_remove(&img);
}

/* Larger batches (and commit_interval 0) count as they are written, as before. */
static void test_large_batches_count_at_once(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog_params p;
	struct counted c = {0};
	struct nx_qlog *q = start_batching(&p, t.db, &c, 60000, 256);
	push_n(q, 0, 2000);
	wait_tapped(&c, 2000);
	assert_true(wait_written(q, 1000) >= 1000);
	nx_qlog_stop(q);
	assert_int_equal(sql_int(t.db, "SELECT SUM(queries) FROM agg_minute"), 2000);
	nx_qlog_free(q);
	tdir_remove(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_held_then_flushed_at_stop),
	    cmocka_unit_test(test_flush_commits_held),
	    cmocka_unit_test(test_interval_commits),
	    cmocka_unit_test(test_commit_at_minute_end),
	    cmocka_unit_test(test_bound_commits_early),
	    cmocka_unit_test(test_privacy_change_commits_first),
	    cmocka_unit_test(test_batch_across_minutes),
	    cmocka_unit_test(test_hold_memory),
	    cmocka_unit_test(test_deferred_cadence),
	    cmocka_unit_test(test_held_batch_no_busy_wait),
	    cmocka_unit_test(test_rebuild_after_crash),
	    cmocka_unit_test(test_large_batches_count_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Query-log schema and reader side against a real SQLite file: numbered migrations, keyset
 * pagination with filters, statistics from the aggregates, record JSON.
 */
#include "helpers.h"
#include "querylog/impl.h"

static struct nx_qlog *start_log(const char *path)
{
	struct nx_qlog_params p;
	test_params(&p, path);
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	return q;
}

#define HAS_TABLE(path, t)                                                                         \
	sql_int(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '" t "'")

/* ---- migrations ---- */

static void test_migrations(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	/* each step from empty: version 1 is the log alone */
	assert_int_equal(nx_qlog_db_migrate(t.db, 1), 0);
	assert_int_equal(sql_int(t.db, "PRAGMA user_version"), 1);
	assert_int_equal(HAS_TABLE(t.db, "queries"), 1);
	assert_int_equal(HAS_TABLE(t.db, "agg_minute"), 0);
	sql_exec(t.db, "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action,"
		       " reason, cached, name) VALUES (1700000000000, 5, '10.0.0.1', 0, 1, 0, 0,"
		       " 0, 0, 'kept.example')");
	/* 1 -> 2 keeps the rows and adds the aggregates */
	assert_int_equal(nx_qlog_db_migrate(t.db, -1), 0);
	assert_int_equal(sql_int(t.db, "PRAGMA user_version"), NX_QLOG_SCHEMA_VERSION);
	assert_int_equal(HAS_TABLE(t.db, "agg_minute"), 1);
	assert_int_equal(HAS_TABLE(t.db, "agg_top"), 1);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries"), 1);
	/* idempotent; never downgrades */
	assert_int_equal(nx_qlog_db_migrate(t.db, -1), 0);
	assert_int_equal(nx_qlog_db_migrate(t.db, 1), NX_EFORMAT);
	assert_int_equal(nx_qlog_db_migrate(t.db, 0), -EINVAL);

	/* the writer opens, reopens, and sets WAL after migrating */
	for (int i = 0; i < 2; i++) {
		struct nx_qlog *q = start_log(t.db);
		nx_qlog_free(q);
	}
	assert_int_equal(count_rows(t.db), 1);
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(t.db, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
	sqlite3_finalize(s);
	sqlite3_close(db);

	/* fresh file straight to the latest version */
	struct tdir t2;
	tdir_make(&t2);
	struct nx_qlog *q = start_log(t2.db);
	assert_int_equal(sql_int(t2.db, "PRAGMA user_version"), NX_QLOG_SCHEMA_VERSION);
	nx_qlog_free(q);

	/* a newer schema is refused by writer and reader */
	sql_exec(t2.db, "PRAGMA user_version = 99");
	struct nx_qlog_params p;
	test_params(&p, t2.db);
	assert_int_equal(nx_qlog_new(&p, &q), NX_EFORMAT);
	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(t2.db, &r), NX_EFORMAT);

	/* not a database */
	char side[320];
	snprintf(side, sizeof(side), "%s-wal", t2.db);
	remove(side);
	snprintf(side, sizeof(side), "%s-shm", t2.db);
	remove(side);
	FILE *f = fopen(t2.db, "w");
	assert_non_null(f);
	for (int i = 0; i < 512; i++) {
		fputs("not a database ", f);
	}
	fclose(f);
	assert_int_equal(nx_qlog_new(&p, &q), NX_ECORRUPT);

	char missing[320];
	snprintf(missing, sizeof(missing), "%s/none.db", t2.dir);
	assert_int_equal(nx_qlog_reader_open(missing, &r), -ENOENT);
	tdir_remove(&t2);
	tdir_remove(&t);
	assert_int_equal(ledger_count(NX_OWNER_sqlite), 0);
}

/* ---- keyset pagination with filters ---- */

#define NREC 1000

static struct nx_qlog_rec gen(int i)
{
	char name[64];
	snprintf(name, sizeof(name), "h%d-%d.example", i % 50, i);
	struct nx_qlog_rec r = mkrec(T0 + (i / 7) * 1000, 10 + (unsigned)(i % 3), name);
	if (i % 4 == 0) {
		mkblocked(&r, "list-a");
	} else if (i % 5 == 1) {
		r.cached = 1;
		r.upstream = -1;
	} else if (i % 11 == 2) {
		r.action = NX_QLOG_ACT_LOCAL;
		r.reason = NX_FILTER_R_local_record;
		r.upstream = -1;
	}
	return r;
}

static bool matches(const struct nx_qlog_rec *r, const struct nx_qlog_filter *f)
{
	char client[64];
	inet_ntop(AF_INET, r->client, client, sizeof(client));
	if (f->client && strcmp(f->client, client) != 0) {
		return false;
	}
	if (f->name && !strstr(r->name, f->name)) {
		return false;
	}
	if (f->from_ms && r->ts_ms < f->from_ms) {
		return false;
	}
	if (f->to_ms && r->ts_ms >= f->to_ms) {
		return false;
	}
	bool blocked = r->action == NX_QLOG_ACT_BLOCK, local = r->action == NX_QLOG_ACT_LOCAL;
	switch (f->status) {
	case NX_QLOG_STATUS_ALL:
		return true;
	case NX_QLOG_STATUS_BLOCKED:
		return blocked;
	case NX_QLOG_STATUS_ALLOWED:
		return !blocked;
	case NX_QLOG_STATUS_CACHED:
		return r->cached;
	case NX_QLOG_STATUS_FORWARDED:
		return !blocked && !local && !r->cached;
	case NX_QLOG_STATUS_LOCAL:
		return local;
	}
	return false;
}

static void check_filter(const char *path, struct nx_qlog_filter f, unsigned page)
{
	size_t want = 0;
	for (int i = 0; i < NREC; i++) {
		struct nx_qlog_rec r = gen(i);
		want += matches(&r, &f);
	}
	json_t *all = read_all(path, f, page); /* checks order and uniqueness */
	assert_int_equal(json_array_size(all), want);
	size_t i;
	json_t *it;
	json_array_foreach(all, i, it) {
		/* every row satisfies the filter: regenerate its record from the name */
		int idx = atoi(strchr(jstr(it, "name"), '-') + 1);
		struct nx_qlog_rec r = gen(idx);
		assert_true(matches(&r, &f));
		assert_int_equal(jint(it, "ts"), r.ts_ms);
	}
	json_decref(all);
}

static void test_pagination(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog *q = start_log(t.db);
	for (int i = 0; i < NREC; i++) {
		struct nx_qlog_rec r = gen(i);
		nx_qlog_push(q, (unsigned)i % 2, &r);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);

	struct nx_qlog_filter f = {0};
	check_filter(t.db, f, 37);
	check_filter(t.db, f, 1);
	f.status = NX_QLOG_STATUS_BLOCKED;
	f.client = "192.168.1.10";
	check_filter(t.db, f, 7);
	f = (struct nx_qlog_filter){.status = NX_QLOG_STATUS_FORWARDED};
	check_filter(t.db, f, 50);
	f = (struct nx_qlog_filter){.status = NX_QLOG_STATUS_CACHED};
	check_filter(t.db, f, 50);
	f = (struct nx_qlog_filter){.status = NX_QLOG_STATUS_LOCAL};
	check_filter(t.db, f, 5);
	f = (struct nx_qlog_filter){.status = NX_QLOG_STATUS_ALLOWED, .name = "h1"};
	check_filter(t.db, f, 13);
	f = (struct nx_qlog_filter){.from_ms = T0 + 20000, .to_ms = T0 + 50000};
	check_filter(t.db, f, 10);

	/* bad input names its field */
	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &r), 0);
	json_t *res = NULL;
	const char *bad = NULL;
	f = (struct nx_qlog_filter){.limit = NX_QLOG_QUERY_LIMIT_MAX + 1};
	assert_int_equal(nx_qlog_query(r, &f, &res, &bad), -EINVAL);
	assert_string_equal(bad, "limit");
	const char *cursors[] = {"x", "12", "12.", ".5", "12.5x", "12.-1"};
	for (size_t i = 0; i < NX_ARRAY_LEN(cursors); i++) {
		f = (struct nx_qlog_filter){.cursor = cursors[i]};
		bad = NULL;
		assert_int_equal(nx_qlog_query(r, &f, &res, &bad), -EINVAL);
		assert_string_equal(bad, "cursor");
	}
	f = (struct nx_qlog_filter){.from_ms = 10, .to_ms = 5};
	assert_int_equal(nx_qlog_query(r, &f, &res, &bad), -EINVAL);
	assert_string_equal(bad, "to");
	/* default limit */
	f = (struct nx_qlog_filter){0};
	assert_int_equal(nx_qlog_query(r, &f, &res, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(res, "items")),
			 NX_QLOG_QUERY_LIMIT_DEFAULT);
	assert_true(json_is_string(json_object_get(res, "next_cursor")));
	json_decref(res);
	/* an exact last page has no next cursor */
	f = (struct nx_qlog_filter){.limit = NREC};
	assert_int_equal(nx_qlog_query(r, &f, &res, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(res, "items")), NREC);
	assert_true(json_is_null(json_object_get(res, "next_cursor")));
	json_decref(res);
	nx_qlog_reader_close(r);

	enum nx_qlog_status st;
	assert_int_equal(nx_qlog_status_parse("forwarded", &st), 0);
	assert_int_equal(st, NX_QLOG_STATUS_FORWARDED);
	assert_int_equal(nx_qlog_status_parse("nope", &st), -EINVAL);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* ---- statistics from the aggregates ---- */

static void push_stat(struct nx_qlog *q, int64_t ts, unsigned host, const char *name, char kind)
{
	struct nx_qlog_rec r = mkrec(ts, host, name);
	if (kind == 'b') {
		mkblocked(&r, "list-a");
	} else if (kind == 'c') {
		r.cached = 1;
	} else if (kind == 'l') {
		r.action = NX_QLOG_ACT_LOCAL;
	}
	nx_qlog_push(q, host % 2, &r);
}

static void expect_top(struct nx_qlog_reader *r, enum nx_qlog_top_kind k, const char *const *keys,
		       const int *counts, size_t n)
{
	json_t *top = NULL;
	assert_int_equal(nx_qlog_top(r, k, 0, 0, 0, &top, NULL), 0);
	json_t *items = json_object_get(top, "items");
	assert_int_equal(json_array_size(items), n);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(jstr(json_array_get(items, i), "key"), keys[i]);
		assert_int_equal(jint(json_array_get(items, i), "count"), counts[i]);
	}
	json_decref(top);
}

static void test_stats(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog *q = start_log(t.db);
	/* minute 0: 3 forwarded a (.1), 2 blocked ads (.2) */
	for (int i = 0; i < 3; i++) {
		push_stat(q, T0 + i, 1, "a.example", 'f');
	}
	push_stat(q, T0 + 10, 2, "ads.example", 'b');
	push_stat(q, T0 + 59999, 2, "ads.example", 'b');
	/* minute 1: cached a, local b (.1), blocked ads + tracker (.3) */
	push_stat(q, T0 + MIN_MS, 1, "a.example", 'c');
	push_stat(q, T0 + MIN_MS + 1, 1, "b.example", 'l');
	push_stat(q, T0 + MIN_MS + 2, 3, "ads.example", 'b');
	push_stat(q, T0 + MIN_MS + 3, 3, "tracker.example", 'b');
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0); /* two batches: upserts add up */
	/* minute 2: 2 forwarded c (.2) */
	push_stat(q, T0 + 2 * MIN_MS, 2, "c.example", 'f');
	push_stat(q, T0 + 2 * MIN_MS + 5, 2, "c.example", 'f');
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);

	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &r), 0);
	json_t *s = NULL;
	assert_int_equal(nx_qlog_summary(r, 0, 0, &s), 0);
	assert_int_equal(jint(s, "queries"), 11);
	assert_int_equal(jint(s, "blocked"), 4);
	assert_int_equal(jint(s, "cached"), 1);
	assert_int_equal(jint(s, "local"), 1);
	assert_int_equal(jint(s, "forwarded"), 5);
	assert_int_equal(jint(s, "clients"), 3);
	assert_float_equal(json_real_value(json_object_get(s, "blocked_percent")), 36.36, 0.001);
	json_decref(s);
	/* one minute */
	assert_int_equal(nx_qlog_summary(r, T0 + MIN_MS, T0 + 2 * MIN_MS, &s), 0);
	assert_int_equal(jint(s, "queries"), 4);
	assert_int_equal(jint(s, "blocked"), 2);
	assert_int_equal(jint(s, "clients"), 2);
	json_decref(s);
	assert_int_equal(nx_qlog_summary(r, 5, 5, &s), -EINVAL);

	static const char *const dom[] = {"a.example", "ads.example", "c.example", "b.example",
					  "tracker.example"};
	static const int domn[] = {4, 3, 2, 1, 1};
	expect_top(r, NX_QLOG_TOP_DOMAINS, dom, domn, 5);
	static const char *const blk[] = {"ads.example", "tracker.example"};
	static const int blkn[] = {3, 1};
	expect_top(r, NX_QLOG_TOP_BLOCKED, blk, blkn, 2);
	static const char *const cli[] = {"192.168.1.1", "192.168.1.2", "192.168.1.3"};
	static const int clin[] = {5, 4, 2};
	expect_top(r, NX_QLOG_TOP_CLIENTS, cli, clin, 3);
	json_t *top = NULL;
	const char *bad = NULL;
	assert_int_equal(nx_qlog_top(r, NX_QLOG_TOP_DOMAINS, 0, 0, 2, &top, NULL), 0);
	assert_int_equal(json_array_size(json_object_get(top, "items")), 2);
	json_decref(top);
	assert_int_equal(nx_qlog_top(r, NX_QLOG_TOP_DOMAINS, 0, 0, NX_QLOG_TOP_LIMIT_MAX + 1, &top,
				     &bad),
			 -EINVAL);
	assert_string_equal(bad, "limit");
	enum nx_qlog_top_kind k;
	assert_int_equal(nx_qlog_top_kind_parse("blocked", &k), 0);
	assert_int_equal(k, NX_QLOG_TOP_BLOCKED);
	assert_int_equal(nx_qlog_top_kind_parse("x", &k), -EINVAL);

	/* history: per minute, then 2-minute buckets aligned to the epoch */
	json_t *h = NULL;
	assert_int_equal(nx_qlog_history(r, T0, T0 + 3 * MIN_MS, 60, &h, NULL), 0);
	json_t *pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 3);
	const int q1[] = {5, 4, 2}, b1[] = {2, 2, 0};
	for (size_t i = 0; i < 3; i++) {
		json_t *pt = json_array_get(pts, i);
		assert_int_equal(jint(pt, "t"), T0 + (int64_t)i * MIN_MS);
		assert_int_equal(jint(pt, "queries"), q1[i]);
		assert_int_equal(jint(pt, "blocked"), b1[i]);
	}
	assert_int_equal(jint(json_array_get(pts, 1), "cached"), 1);
	assert_int_equal(jint(json_array_get(pts, 1), "local"), 1);
	assert_int_equal(jint(json_array_get(pts, 2), "forwarded"), 2);
	json_decref(h);
	assert_int_equal(T0 % 120000, 0);
	assert_int_equal(nx_qlog_history(r, T0, T0 + 3 * MIN_MS, 120, &h, NULL), 0);
	pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 2);
	assert_int_equal(jint(json_array_get(pts, 0), "queries"), 9);
	assert_int_equal(jint(json_array_get(pts, 1), "queries"), 2);
	json_decref(h);
	/* empty buckets are zeros */
	assert_int_equal(nx_qlog_history(r, T0 - 2 * MIN_MS, T0, 60, &h, NULL), 0);
	pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 2);
	assert_int_equal(jint(json_array_get(pts, 0), "queries"), 0);
	json_decref(h);
	assert_int_equal(nx_qlog_history(r, T0, T0 + MIN_MS, 30, &h, &bad), -EINVAL);
	assert_string_equal(bad, "step");
	assert_int_equal(nx_qlog_history(r, T0, T0, 60, &h, &bad), -EINVAL);
	assert_string_equal(bad, "to");
	assert_int_equal(nx_qlog_history(r, T0, T0 + 30 * DAY_MS, 60, &h, &bad), -EINVAL);
	assert_string_equal(bad, "step");
	nx_qlog_reader_close(r);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* One "protocols" object against the expected counts in NX_QLOG_PROTOS order. */
static void expect_protos(json_t *o, const int *want)
{
	static const char *const names[] = {"udp", "tcp", "dot", "doh"};
	json_t *p = json_object_get(o, "protocols");
	assert_true(json_is_object(p));
	assert_int_equal(json_object_size(p), NX_QLOG_PROTO__COUNT);
	for (unsigned i = 0; i < NX_QLOG_PROTO__COUNT; i++) {
		json_t *n = json_object_get(p, names[i]);
		assert_true(json_is_integer(n));
		assert_int_equal(json_integer_value(n), want[i]);
	}
}

static void push_proto(struct nx_qlog *q, int64_t ts, unsigned proto, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct nx_qlog_rec r = mkrec(ts + i, 1 + i % 3, "p.example");
		r.proto = (uint8_t)proto;
		nx_qlog_push(q, i % 2, &r);
	}
}

static void test_stats_protocols(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog *q = start_log(t.db);
	/* minute 0: 3 udp, 2 tcp, 1 dot, 4 doh, and one of a protocol nxdns does not know */
	push_proto(q, T0, NX_QLOG_PROTO_UDP, 3);
	push_proto(q, T0 + 100, NX_QLOG_PROTO_TCP, 2);
	push_proto(q, T0 + 200, NX_QLOG_PROTO_DOT, 1);
	push_proto(q, T0 + 300, NX_QLOG_PROTO_DOH, 4);
	push_proto(q, T0 + 400, 9, 1);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	/* a second batch in the same minute adds to its row; minute 1: 5 tcp, 2 dot */
	push_proto(q, T0 + 500, NX_QLOG_PROTO_UDP, 2);
	push_proto(q, T0 + MIN_MS, NX_QLOG_PROTO_TCP, 5);
	push_proto(q, T0 + MIN_MS + 10, NX_QLOG_PROTO_DOT, 2);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 2);

	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &r), 0);
	json_t *s = NULL;
	assert_int_equal(nx_qlog_summary(r, 0, 0, &s), 0);
	assert_int_equal(jint(s, "queries"), 20); /* the unknown one counts in queries only */
	expect_protos(s, (const int[]){5, 7, 3, 4});
	json_decref(s);
	/* the same span as the other figures: minute 1 alone */
	assert_int_equal(nx_qlog_summary(r, T0 + MIN_MS, T0 + 2 * MIN_MS, &s), 0);
	assert_int_equal(jint(s, "queries"), 7);
	expect_protos(s, (const int[]){0, 5, 2, 0});
	json_decref(s);
	/* an empty span: zeros, not missing */
	assert_int_equal(nx_qlog_summary(r, T0 - 10 * MIN_MS, T0, &s), 0);
	expect_protos(s, (const int[]){0, 0, 0, 0});
	json_decref(s);

	/* history: per bucket, empty buckets zero */
	json_t *h = NULL;
	assert_int_equal(nx_qlog_history(r, T0, T0 + 3 * MIN_MS, 60, &h, NULL), 0);
	json_t *pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 3);
	expect_protos(json_array_get(pts, 0), (const int[]){5, 2, 1, 4});
	expect_protos(json_array_get(pts, 1), (const int[]){0, 5, 2, 0});
	expect_protos(json_array_get(pts, 2), (const int[]){0, 0, 0, 0});
	json_decref(h);
	assert_int_equal(nx_qlog_history(r, T0, T0 + 2 * MIN_MS, 120, &h, NULL), 0);
	pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 1);
	expect_protos(json_array_get(pts, 0), (const int[]){5, 7, 3, 4});
	json_decref(h);
	nx_qlog_reader_close(r);
	nx_qlog_free(q);
	tdir_remove(&t);
}

static void test_migration_protocols(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(nx_qlog_db_migrate(t.db, 4), 0);
	/* a version 4 minute row (6 columns), at T0's minute */
	sql_exec(t.db, "INSERT INTO agg_minute VALUES (28333334, 6, 1, 2, 3, 0)");
	assert_int_equal(nx_qlog_db_migrate(t.db, 5), 0);
	assert_int_equal(sql_int(t.db, "PRAGMA user_version"), 5);
	/* the old counters stay; the old minute has no protocol split: zeros */
	assert_int_equal(sql_int(t.db, "SELECT queries * 10 + forwarded FROM agg_minute"), 63);
	assert_int_equal(sql_int(t.db, "SELECT udp + tcp + dot + doh FROM agg_minute"), 0);
	/* the writer adds to the migrated row, by protocol */
	assert_int_equal(T0 / MIN_MS, 28333334);
	struct nx_qlog *q = start_log(t.db);
	push_proto(q, T0 + 1, NX_QLOG_PROTO_DOT, 2);
	push_proto(q, T0 + 2, NX_QLOG_PROTO_UDP, 1);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_minute"), 1);
	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(t.db, &r), 0);
	json_t *s = NULL;
	assert_int_equal(nx_qlog_summary(r, 0, 0, &s), 0);
	assert_int_equal(jint(s, "queries"), 9);
	expect_protos(s, (const int[]){1, 0, 2, 0});
	json_decref(s);
	nx_qlog_reader_close(r);
	nx_qlog_free(q);
	/* a step at a time from empty ends at the same columns as a fresh file */
	struct tdir t2;
	tdir_make(&t2);
	for (int v = 1; v <= NX_QLOG_SCHEMA_VERSION; v++) {
		assert_int_equal(nx_qlog_db_migrate(t2.db, v), 0);
	}
	assert_int_equal(sql_int(t2.db, "SELECT COUNT(*) FROM pragma_table_info('agg_minute')"
					" WHERE name IN ('udp', 'tcp', 'dot', 'doh')"),
			 4);
	tdir_remove(&t2);
	tdir_remove(&t);
	assert_int_equal(ledger_count(NX_OWNER_sqlite), 0);
}

/* ---- one record as JSON (live stream) ---- */

static void test_rec_json(void **state)
{
	(void)state;
	struct nx_qlog_rec r = mkrec(T0, 7, "x.example");
	r.proto = NX_QLOG_PROTO_DOT;
	r.qtype = 28;
	r.rcode = 3;
	r.upstream = -1;
	json_t *o = nx_qlog_rec_to_json(&r, "ignored");
	assert_string_equal(jstr(o, "proto"), "dot");
	assert_string_equal(jstr(o, "qtype"), "AAAA");
	assert_string_equal(jstr(o, "rcode"), "NXDOMAIN");
	assert_string_equal(jstr(o, "client"), "192.168.1.7");
	assert_true(json_is_null(json_object_get(o, "upstream")));
	json_decref(o);
	r.upstream = 2;
	nx_qlog_apply_privacy(&r, 2);
	o = nx_qlog_rec_to_json(&r, "9.9.9.9");
	assert_string_equal(jstr(o, "client"), "hidden");
	assert_string_equal(jstr(o, "name"), "hidden");
	assert_string_equal(jstr(o, "upstream"), "9.9.9.9");
	json_decref(o);
	/* client text: IPv4 is formatted without inet_ntop; it must say the same */
	static const uint8_t v4[][4] = {{0, 0, 0, 0}, {255, 255, 255, 255}, {10, 0, 100, 9},
					{1, 20, 199, 200}, {192, 168, 1, 10}, {100, 99, 9, 10}};
	for (size_t i = 0; i < sizeof(v4) / sizeof(v4[0]); i++) {
		struct nx_qlog_rec c = mkrec(T0, 1, "a.example");
		memcpy(c.client, v4[i], 4);
		char want[INET_ADDRSTRLEN];
		assert_non_null(inet_ntop(AF_INET, v4[i], want, sizeof(want)));
		o = nx_qlog_rec_to_json(&c, NULL);
		assert_string_equal(jstr(o, "client"), want);
		json_decref(o);
	}
	struct nx_qlog_rec c6 = mkrec(T0, 1, "a.example");
	c6.family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "fd00::1:2", c6.client), 1);
	o = nx_qlog_rec_to_json(&c6, NULL);
	assert_string_equal(jstr(o, "client"), "fd00::1:2");
	json_decref(o);
	c6.family = 7;
	o = nx_qlog_rec_to_json(&c6, NULL);
	assert_string_equal(jstr(o, "client"), "unknown");
	json_decref(o);
	/* an unterminated name is cut, never over-read */
	memset(r.name, 'a', sizeof(r.name));
	o = nx_qlog_rec_to_json(&r, NULL);
	assert_int_equal(strlen(jstr(o, "name")), NX_QLOG_NAME_MAX - 1);
	json_decref(o);
}

/* ---- the block store: text, view, trigger, minutes, late records, old schema ---- */

/* The first item of a one-filter query. */
static json_t *first_named(const char *path, const char *needle)
{
	struct nx_qlog_filter f = {.name = needle};
	json_t *all = read_all(path, f, 10);
	json_t *it = json_array_size(all) ? json_incref(json_array_get(all, 0)) : NULL;
	assert_int_equal(json_array_size(all), it ? 1 : 0);
	json_decref(all);
	return it;
}

static void test_block_text(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog *q = start_log(t.db);
	/* JSON's special characters, a control byte, valid UTF-8, an invalid byte */
	static const char *const names[] = {"q\"uote.example", "back\\slash.example",
					     "ctl\x01.example", "caf\xc3\xa9.example",
					     "bad\xff.example"};
	for (size_t i = 0; i < NX_ARRAY_LEN(names); i++) {
		struct nx_qlog_rec r = mkrec(T0 + (int64_t)i, 20 + (unsigned)i, names[i]);
		snprintf(r.source, sizeof(r.source), "src\"%zu", i);
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	/* one transaction, one minute: one block, valid JSON that the view unpacks */
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks"), 1);
	assert_int_equal(sql_int(t.db, "SELECT json_valid(records) FROM log_blocks"), 1);
	assert_int_equal(sql_int(t.db, "SELECT n FROM log_blocks"), 5);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries"), 5);

	for (size_t i = 0; i < NX_ARRAY_LEN(names); i++) {
		/* the whole name as the filter: block skip (raw text) or not, it is found */
		const char *want = i == 4 ? "bad\xef\xbf\xbd.example" : names[i];
		json_t *it = first_named(t.db, want);
		assert_non_null(it);
		assert_string_equal(jstr(it, "name"), want);
		char src[16];
		snprintf(src, sizeof(src), "src\"%zu", i);
		assert_string_equal(jstr(it, "source"), src);
		assert_string_equal(jstr(it, "answer"), "A 192.0.2.1");
		assert_string_equal(jstr(it, "upstream"), "upstream-0");
		assert_int_equal(jint(it, "ts"), T0 + (int64_t)i);
		/* the view says the same as the API */
		char sql[160];
		snprintf(sql, sizeof(sql), "SELECT name FROM queries WHERE id = %lld",
			 (long long)jint(it, "id"));
		char *vn = sql_text(t.db, sql);
		assert_string_equal(vn, want);
		free(vn);
		json_decref(it);
	}
	/* a substring that is in the block's raw text only as escaped JSON finds nothing */
	assert_null(first_named(t.db, "\\u0001"));
	assert_null(first_named(t.db, "nowhere"));
	/* the block lists its clients; the client filter skips by it and still finds them */
	char *cl = sql_text(t.db, "SELECT clients FROM log_blocks");
	assert_string_equal(cl, "[\"192.168.1.20\",\"192.168.1.21\",\"192.168.1.22\","
				"\"192.168.1.23\",\"192.168.1.24\"]");
	free(cl);
	struct nx_qlog_filter f = {.client = "192.168.1.22"};
	json_t *all = read_all(t.db, f, 10);
	assert_int_equal(json_array_size(all), 1);
	json_decref(all);
	f.client = "192.168.1.99";
	all = read_all(t.db, f, 10);
	assert_int_equal(json_array_size(all), 0);
	json_decref(all);
	nx_qlog_free(q);
	tdir_remove(&t);
}

static void test_block_shape(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	struct nx_qlog *q = start_log(t.db);
	/* 40 clients across two minutes in one transaction: two blocks, a client list only where
	 * it fits */
	for (int i = 0; i < 40; i++) {
		struct nx_qlog_rec r = mkrec(T0 - 30000 + i * 1000, 10 + (unsigned)i, "m.example");
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks"), 2);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks WHERE ts_min / 60000 <>"
				       " ts_max / 60000"),
			 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks WHERE clients IS NULL"), 1);
	struct nx_qlog_filter f = {.client = "192.168.1.15"}; /* in the unlisted block */
	json_t *all = read_all(t.db, f, 10);
	assert_int_equal(json_array_size(all), 1);
	json_decref(all);

	/* a late record (a slow answer) lands in a later block with an older ts: pages stay in
	 * ts order across overlapping blocks */
	for (int i = 0; i < 5; i++) {
		struct nx_qlog_rec r = mkrec(T0 + 20000 + i, 9, "new.example");
		nx_qlog_push(q, 0, &r);
	}
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	struct nx_qlog_rec late = mkrec(T0 + 5500, 9, "late.example");
	nx_qlog_push(q, 1, &late);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	f = (struct nx_qlog_filter){0};
	for (unsigned page = 1; page <= 4; page++) {
		all = read_all(t.db, f, page); /* checks (ts, id) strictly decreasing */
		assert_int_equal(json_array_size(all), 46);
		/* 5 new, the 4 m records of T0 + 9000 .. 6000, then it */
		assert_string_equal(jstr(json_array_get(all, 9), "name"), "late.example");
		json_decref(all);
	}

	/* a row inserted through the view is a one-record block; NOT NULL still holds */
	sql_exec(t.db, "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action,"
		       " reason, cached, name) VALUES (1, 2, '10.9.9.9', 0, 1, 0, 2, 0, 0,"
		       " 'sql.example')");
	json_t *it = first_named(t.db, "sql.example");
	assert_non_null(it);
	assert_string_equal(jstr(it, "client"), "10.9.9.9");
	assert_string_equal(jstr(it, "action"), "block");
	assert_true(json_is_null(json_object_get(it, "upstream")));
	assert_string_equal(jstr(it, "matched"), "");
	json_decref(it);
	assert_int_equal(sql_int(t.db, "SELECT blocked FROM log_blocks ORDER BY id DESC LIMIT 1"), 1);
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(t.db, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_not_equal(sqlite3_exec(db, "INSERT INTO queries(ts, name) VALUES (1, 'x')", NULL,
					  NULL, NULL),
			     SQLITE_OK);
	sqlite3_close(db);
	/* values of the wrong type (sqlite3 .import binds text) take the column's type, an empty
	 * optional text is NULL, and bytes that are not UTF-8 reach the API as '?' */
	sql_exec(t.db, "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action,"
		       " reason, cached, upstream, name, matched, source) VALUES ('3', '4',"
		       " '10.8.8.8', '0', '1', '0', '2', '3', '0', '', 'text.example',"
		       " 'text.example', CAST(X'6c69737466ff' AS TEXT))");
	f = (struct nx_qlog_filter){.status = NX_QLOG_STATUS_BLOCKED, .name = "text.example"};
	all = read_all(t.db, f, 10);
	assert_int_equal(json_array_size(all), 1);
	it = json_array_get(all, 0);
	assert_int_equal(jint(it, "ts"), 3);
	assert_int_equal(jint(it, "duration_us"), 4);
	assert_true(json_is_null(json_object_get(it, "upstream")));
	assert_string_equal(jstr(it, "source"), "listf?");
	json_decref(all);
	f = (struct nx_qlog_filter){0};

	/* a block that is not a block is skipped, by the API and by the view, not fatal */
	sql_exec(t.db, "INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)"
		       " VALUES (2, 2, 1, 0, NULL, '[[1,2,')");
	/* nor is a block whose n column undercounts its records */
	sql_exec(t.db, "INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)"
		       " VALUES (5, 6, 1, 0, NULL, '[[5,1,\"10.7.7.7\",0,1,0,0,0,0,null,"
		       "\"n1.example\",null,null,null],[6,1,\"10.7.7.7\",0,1,0,0,0,0,null,"
		       "\"n2.example\",null,null,null]]')");
	all = read_all(t.db, f, 100);
	assert_int_equal(json_array_size(all), 50);
	json_decref(all);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries"), 50);
	nx_qlog_free(q);
	tdir_remove(&t);
}

static void test_migration_to_blocks(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(nx_qlog_db_migrate(t.db, 2), 0);
	/* version 2 rows (within the writer's retention of T0), inserted out of ts order, with NULL and empty optional texts */
	sql_exec(t.db,
		 "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action, reason,"
		 " cached, upstream, name, matched, source, answer) VALUES"
		 " (1700000033000, 7, '10.0.0.3', 1, 28, 3, 0, 0, 0, 'u1', 'c.example', NULL, NULL, NULL),"
		 " (1700000031000, 5, '10.0.0.1', 0, 1, 0, 2, 3, 0, NULL, 'a.example', 'a.example', 'list',"
		 "  'A 0.0.0.0'),"
		 " (1700000032000, 6, 'fd00::1', 0, 1, 0, 0, 0, 1, NULL, 'b\"q.example', NULL, NULL,"
		 "  'A 192.0.2.7'),"
		 /* what a tool may have stored despite the affinity: REAL, text, a BLOB name */
		 " (1700000030000, 2.5, '10.0.0.4', 0, 1, 0, 0, 0, 'yes', '', X'652e6578616d706c65',"
		 "  NULL, NULL, NULL)");
	assert_int_equal(nx_qlog_db_migrate(t.db, 3), 0);
	assert_int_equal(HAS_TABLE(t.db, "log_blocks"), 1);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks"), 4);
	/* 4: the view gains client_id; the 14-value records stay as they are and read as none */
	assert_int_equal(nx_qlog_db_migrate(t.db, 4), 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE client_id IS NULL"), 4);
	/* the reader opens only the latest version (5 changes the aggregates only) */
	assert_int_equal(nx_qlog_db_migrate(t.db, -1), 0);
	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 2);
	assert_int_equal(json_array_size(all), 4);
	json_t *e = json_array_get(all, 3);
	assert_string_equal(jstr(e, "name"), "e.example");
	assert_int_equal(jint(e, "duration_us"), 2);
	assert_true(json_is_false(json_object_get(e, "cached")));
	assert_true(json_is_null(json_object_get(e, "upstream")));
	json_t *c = json_array_get(all, 0), *b = json_array_get(all, 1), *a = json_array_get(all, 2);
	assert_string_equal(jstr(c, "name"), "c.example");
	assert_string_equal(jstr(c, "upstream"), "u1");
	assert_string_equal(jstr(c, "qtype"), "AAAA");
	assert_string_equal(jstr(c, "rcode"), "NXDOMAIN");
	assert_string_equal(jstr(c, "proto"), "tcp");
	assert_string_equal(jstr(c, "answer"), "");
	assert_string_equal(jstr(b, "name"), "b\"q.example");
	assert_string_equal(jstr(b, "client"), "fd00::1");
	assert_true(json_is_true(json_object_get(b, "cached")));
	assert_string_equal(jstr(a, "source"), "list");
	assert_string_equal(jstr(a, "action"), "block");
	assert_int_equal(jint(a, "duration_us"), 5);
	assert_string_equal(jstr(a, "client_id"), "");
	json_decref(all);
	/* and the writer appends after them, with a client id (15 values) */
	struct nx_qlog *q = start_log(t.db);
	struct nx_qlog_rec r = mkrec(T0, 1, "d.example");
	snprintf(r.client_id, sizeof(r.client_id), "phone");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(count_rows(t.db), 5);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE client_id = 'phone'"
				       " AND name = 'd.example'"),
			 1);
	/* the trigger takes a client id too */
	sql_exec(t.db, "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action,"
		       " reason, cached, name, client_id) VALUES"
		       " (1700000034000, 1, '10.0.0.9', 3, 1, 0, 0, 0, 0, 'f.example', 'tablet')");
	/* the filter: exact id; old records have none */
	f.client_id = "phone";
	all = read_all(t.db, f, 2);
	assert_int_equal(json_array_size(all), 1);
	assert_string_equal(jstr(json_array_get(all, 0), "name"), "d.example");
	assert_string_equal(jstr(json_array_get(all, 0), "client_id"), "phone");
	json_decref(all);
	f.client_id = "tablet";
	all = read_all(t.db, f, 2);
	assert_int_equal(json_array_size(all), 1);
	assert_string_equal(jstr(json_array_get(all, 0), "proto"), "doh");
	json_decref(all);
	f.client_id = "phon"; /* exact, not a substring */
	all = read_all(t.db, f, 2);
	assert_int_equal(json_array_size(all), 0);
	json_decref(all);
	nx_qlog_free(q);
	tdir_remove(&t);
}

/* One record through the view's trigger (a block of one, id from SQLite). */
static void insert_by_hand(const char *db)
{
	sql_exec(db, "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action,"
		     " reason, cached, name) VALUES (1700000034000, 5, '10.0.0.1', 0, 1, 0, 0, 0,"
		     " 0, 'old.example')");
}

/* The id of the block the writer stores for one record pushed now. */
static int64_t writer_block_id(const char *db)
{
	struct nx_qlog *q = start_log(db);
	struct nx_qlog_rec r = mkrec(T0 + 1000, 3, "new.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	nx_qlog_free(q);
	return sql_int(db, "SELECT MAX(id) FROM log_blocks");
}

/* 8: log_blocks without AUTOINCREMENT (no sqlite_sequence page a commit): only the schema text
 * changes, the blocks and their ids stay, and ids never go back, not even once every block
 * is gone (retention of everything), before or after the migration. */
static void test_migration_plain_ids(void **state)
{
	(void)state;
	/* a: everything counted, then every block deleted (the newest too): the sequence's high
	 * water moves into the mark, and the writer's next id is above it */
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(nx_qlog_db_migrate(t.db, 7), 0);
	for (int i = 0; i < 3; i++) {
		insert_by_hand(t.db);
	}
	sql_exec(t.db, "UPDATE agg_mark SET block = 2");
	sql_exec(t.db, "DELETE FROM log_blocks");
	int64_t cookie = sql_int(t.db, "PRAGMA schema_version");
	assert_int_equal(nx_qlog_db_migrate(t.db, 8), 0);
	assert_int_equal(sql_int(t.db, "PRAGMA user_version"), 8);
	assert_true(sql_int(t.db, "PRAGMA schema_version") > cookie); /* others reload it */
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM sqlite_master WHERE name ="
				       " 'log_blocks' AND sql LIKE '%AUTOINCREMENT%'"),
			 0);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM sqlite_master WHERE name ="
				       " 'log_blocks' AND sql LIKE '%id INTEGER PRIMARY KEY,%'"),
			 1);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM sqlite_sequence"), 0);
	assert_int_equal(sql_int(t.db, "SELECT block FROM agg_mark"), 3);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM pragma_integrity_check"
				       " WHERE integrity_check <> 'ok'"),
			 0);
	assert_int_equal(writer_block_id(t.db), 4);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM sqlite_sequence"), 0);
	/* retention of everything after the migration: the mark holds the last id */
	sql_exec(t.db, "DELETE FROM log_blocks");
	assert_int_equal(writer_block_id(t.db), 5);
	assert_int_equal(sql_int(t.db, "SELECT block FROM agg_mark"), 5);
	tdir_remove(&t);

	/* b: blocks after the mark (uncounted) keep it where it is and are counted at open; the
	 * blocks and their ids are version 7's */
	struct tdir t2;
	tdir_make(&t2);
	assert_int_equal(nx_qlog_db_migrate(t2.db, 7), 0);
	for (int i = 0; i < 3; i++) {
		insert_by_hand(t2.db);
	}
	sql_exec(t2.db, "UPDATE agg_mark SET block = 1");
	assert_int_equal(nx_qlog_db_migrate(t2.db, -1), 0);
	assert_int_equal(sql_int(t2.db, "SELECT block FROM agg_mark"), 1);
	assert_int_equal(sql_int(t2.db, "SELECT COUNT(*) FROM log_blocks WHERE id IN (1, 2, 3)"), 3);
	assert_int_equal(sql_int(t2.db, "SELECT COUNT(*) FROM queries WHERE name = 'old.example'"),
			 3);
	assert_int_equal(writer_block_id(t2.db), 4);
	/* blocks 2 and 3 counted at open, then the new one; block 1 was under the mark */
	assert_int_equal(sql_int(t2.db, "SELECT SUM(queries) FROM agg_minute"), 3);
	assert_int_equal(sql_int(t2.db, "SELECT block FROM agg_mark"), 4);
	tdir_remove(&t2);

	/* c: a connection with SQLITE_DBCONFIG_DEFENSIVE on (some builds' default) migrates
	 * too, and has it on again after */
	struct tdir t3;
	tdir_make(&t3);
	assert_int_equal(nx_qlog_db_migrate(t3.db, 7), 0);
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(t3.db, &db), SQLITE_OK);
	int on = -1;
	assert_int_equal(sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, &on), SQLITE_OK);
	assert_int_equal(on, 1);
	assert_int_equal(nx_qlog_db_migrate_conn(db, 8), SQLITE_OK);
	on = -1;
	sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, -1, &on);
	assert_int_equal(on, 1);
	sqlite3_close(db);
	assert_int_equal(sql_int(t3.db, "PRAGMA user_version"), 8);
	assert_int_equal(sql_int(t3.db, "SELECT COUNT(*) FROM sqlite_master WHERE name ="
					" 'log_blocks' AND sql LIKE '%AUTOINCREMENT%'"),
			 0);
	tdir_remove(&t3);
}

/* 7: blocks written from now on are objects with a string table; the blocks of version 6
 * (arrays) stay and the view reads both, column for column as the API does. */
static void test_migration_dense_blocks(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	assert_int_equal(nx_qlog_db_migrate(t.db, 6), 0);
	sql_exec(t.db, "INSERT INTO queries(ts, duration_us, client, proto, qtype, rcode, action,"
		       " reason, cached, upstream, name, matched, source, answer, client_id) VALUES"
		       " (1700000034000, 9, '10.0.0.9', 3, 1, 0, 2, 3, 1, 'u0', 'old.example',"
		       " 'old.example', 'list', 'A 0.0.0.0', 'tablet')");
	assert_int_equal(nx_qlog_db_migrate(t.db, 7), 0);
	assert_int_equal(sql_int(t.db, "PRAGMA user_version"), 7);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE name = 'old.example'"
				       " AND client_id = 'tablet' AND matched = 'old.example' AND"
				       " ts = 1700000034000 AND cached = 1"),
			 1);
	/* the writer's records: shared strings, NULLs, a client id, a late record */
	struct nx_qlog *q = start_log(t.db);
	struct nx_qlog_rec r = mkrec(T0 + 59000, 3, "new.example");
	snprintf(r.client_id, sizeof(r.client_id), "phone");
	nx_qlog_push(q, 0, &r);
	struct nx_qlog_rec s2 = mkrec(T0 + 1, 4, "ads.example");
	s2.action = NX_QLOG_ACT_BLOCK;
	snprintf(s2.matched, sizeof(s2.matched), "ads.example");
	snprintf(s2.source, sizeof(s2.source), "blocklist");
	s2.answer[0] = '\0';
	s2.upstream = -1;
	s2.duration_us = 77;
	nx_qlog_push(q, 0, &s2);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	nx_qlog_free(q);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM log_blocks WHERE json_type(records)"
				       " = 'object'"),
			 1);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries"), 3);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE name = 'new.example'"
				       " AND client = '192.168.1.3' AND client_id = 'phone' AND"
				       " matched IS NULL AND source IS NULL AND answer = 'A 192.0.2.1'"
				       " AND upstream IS NOT NULL AND ts = 1700000099000"),
			 1);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM queries WHERE name = 'ads.example'"
				       " AND matched = 'ads.example' AND source = 'blocklist' AND"
				       " answer IS NULL AND upstream IS NULL AND client_id IS NULL AND"
				       " action = 2 AND duration_us = 77 AND ts = 1700000040001"),
			 1);
	/* ids: the view's and the API's agree */
	struct nx_qlog_filter f = {0};
	json_t *all = read_all(t.db, f, 10);
	assert_int_equal(json_array_size(all), 3);
	for (size_t i = 0; i < 3; i++) {
		json_t *it = json_array_get(all, i);
		char sql[160];
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM queries WHERE id = %lld AND ts = %lld",
			 (long long)jint(it, "id"), (long long)jint(it, "ts"));
		assert_int_equal(sql_int(t.db, sql), 1);
	}
	json_decref(all);
	tdir_remove(&t);
}

/* ---- the web admin's day: agg_roll and agg_names (schema 6) ---- */

/* Both ways of nx_qlog_top for one window and kind: the same items, key for key. */
static void top_same(struct nx_qlog_reader *r, enum nx_qlog_top_kind kind, int64_t from, int64_t to,
		     unsigned limit)
{
	json_t *a = NULL, *b = NULL;
	const char *bad = NULL;
	nx_qlog_reader_no_roll(r, false);
	assert_int_equal(nx_qlog_top(r, kind, from, to, limit, &a, &bad), 0);
	nx_qlog_reader_no_roll(r, true);
	assert_int_equal(nx_qlog_top(r, kind, from, to, limit, &b, &bad), 0);
	nx_qlog_reader_no_roll(r, false);
	if (!json_equal(a, b)) {
		char *x = json_dumps(a, 0), *y = json_dumps(b, 0);
		fail_msg("top kind %d from %lld to %lld limit %u: roll %s, sum %s", kind,
			 (long long)from, (long long)to, limit, x, y);
	}
	json_decref(a);
	json_decref(b);
}

static void tops_same(const char *path, int64_t now)
{
	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(path, &r), 0);
	const int64_t windows[][2] = {
	    {now - DAY_MS, 0},				 /* the dashboard's default */
	    {now - DAY_MS + 30 * MIN_MS, now + 1800000}, /* later than the roll, to ahead */
	    {now - DAY_MS - 7 * MIN_MS, 0},		 /* earlier than the roll */
	    {now - DAY_MS, now - 3 * MIN_MS},		 /* ends before the newest minutes */
	    {now - 2 * DAY_MS, now - DAY_MS},		 /* far from the roll: summed */
	    {0, 0},					 /* everything: summed */
	};
	for (size_t w = 0; w < sizeof(windows) / sizeof(windows[0]); w++) {
		for (int k = 0; k < 3; k++) {
			top_same(r, (enum nx_qlog_top_kind)k, windows[w][0], windows[w][1], 3);
			top_same(r, (enum nx_qlog_top_kind)k, windows[w][0], windows[w][1], 100);
		}
	}
	nx_qlog_reader_close(r);
}

/* Names with skewed counts over minutes around the roll's edges, then the clock moves on:
 * the roll (built, subtracted from, rebuilt) answers every window as agg_top's sum does. */
static void test_top_roll(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	g_now = T0 + 10 * MIN_MS + 500;
	struct nx_qlog *q = start_log(t.db);
	const int mins[] = {-1500, -1445, -1441, -1440, -1439, -1438, -1430, -700,
			    -60,   -3,	  -1,	 0,	5,     9,     10};
	int k = 0;
	for (size_t i = 0; i < sizeof(mins) / sizeof(mins[0]); i++) {
		for (int j = 0; j < 12; j++, k++) {
			char name[32];
			/* names 0..5 everywhere (ties broken by key), 6..11 only in some minutes */
			snprintf(name, sizeof(name), "n%d.example", j < 6 ? j : j + (int)i % 4);
			struct nx_qlog_rec r =
			    mkrec(T0 + mins[i] * MIN_MS + j, 1 + (unsigned)(k % 5), name);
			if (j % 3 == 0) {
				mkblocked(&r, "list");
			}
			for (int c = 0; c <= (j * 7 + (int)i) % 5; c++) {
				r.ts_ms++;
				nx_qlog_push(q, 0, &r);
			}
		}
		assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	}
	int64_t lo = sql_int(t.db, "SELECT lo FROM agg_roll_lo");
	assert_int_equal(lo, (T0 + 10 * MIN_MS) / MIN_MS - 1439);
	tops_same(t.db, g_now);

	/* 30 minutes on: the roll subtracts the minutes that left the day */
	g_now += 30 * MIN_MS;
	struct nx_qlog_rec r = mkrec(g_now, 7, "later.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT lo FROM agg_roll_lo"), lo + 30);
	tops_same(t.db, g_now);
	/* 3 hours on: too far to subtract minute by minute, built again */
	g_now += 3 * 60 * MIN_MS;
	r = mkrec(g_now, 8, "much-later.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT lo FROM agg_roll_lo"), lo + 210);
	assert_int_equal(sql_int(t.db, "SELECT COUNT(*) FROM agg_roll WHERE n <= 0"), 0);
	tops_same(t.db, g_now);
	nx_qlog_free(q);
	g_now = T0;
	tdir_remove(&t);
}

static size_t name_rows(const char *path, const char *name)
{
	struct nx_qlog_filter f = {.name = name};
	json_t *all = read_all(path, f, 10);
	size_t n = json_array_size(all);
	json_decref(all);
	return n;
}

/* A name filter skips the minutes whose agg_names row rules the text out, and reads those
 * whose row is missing, open or folded. The proof: a block altered behind the writer's back
 * is found only where the filter reads it. */
static void test_name_skip(void **state)
{
	(void)state;
	struct tdir t;
	tdir_make(&t);
	g_now = T0;
	struct nx_qlog *q = start_log(t.db);
	const char *names[] = {"alpha.example", "beta.example", "gamma.example"};
	for (int m = 0; m < 3; m++) {
		struct nx_qlog_rec r = mkrec(T0 + (m - 2) * MIN_MS + 5, 1, names[m]);
		nx_qlog_push(q, 0, &r);
		assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	}
	int64_t mb = (T0 - MIN_MS) / MIN_MS; /* beta's minute */
	assert_int_equal(name_rows(t.db, "alpha"), 1);
	assert_int_equal(name_rows(t.db, "beta"), 1);
	assert_int_equal(name_rows(t.db, "gamma"), 1); /* its minute is still open */
	assert_int_equal(name_rows(t.db, "example"), 3);
	assert_int_equal(name_rows(t.db, "zzzz"), 0);
	assert_int_equal(
	    sql_int(
		t.db,
		"SELECT open FROM agg_names WHERE minute = (SELECT MAX(minute) FROM agg_names)"),
	    1);

	/* beta's block now holds zzzz: its minute's names say no, so it is not read */
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "UPDATE log_blocks SET records = replace(records, 'beta.example', 'zzzz.example')"
		 " WHERE ts_max / 60000 = %lld",
		 (long long)mb);
	sql_exec(t.db, sql);
	assert_int_equal(name_rows(t.db, "zzzz"), 0);
	/* an open row (a writer that stopped before the minute ended) is not trusted */
	snprintf(sql, sizeof(sql), "UPDATE agg_names SET open = 1 WHERE minute = %lld",
		 (long long)mb);
	sql_exec(t.db, sql);
	assert_int_equal(name_rows(t.db, "zzzz"), 1);
	/* nor a folded one */
	snprintf(sql, sizeof(sql), "UPDATE agg_names SET open = 0, folded = 1 WHERE minute = %lld",
		 (long long)mb);
	sql_exec(t.db, sql);
	assert_int_equal(name_rows(t.db, "zzzz"), 1);
	/* nor a minute without a row (written before schema 6) */
	snprintf(sql, sizeof(sql), "DELETE FROM agg_names WHERE minute = %lld", (long long)mb);
	sql_exec(t.db, sql);
	assert_int_equal(name_rows(t.db, "zzzz"), 1);

	/* names read an hour at a time, newest first: a name three hours back is still found,
	 * past minutes that rule it out, and one in no minute is not */
	g_now = T0 + 200 * MIN_MS;
	for (int m = -150; m <= 0; m += 10) {
		struct nx_qlog_rec old = mkrec(T0 + 200 * MIN_MS + m * MIN_MS, 2,
					       m == -150 ? "needle.example" : "hay.example");
		nx_qlog_push(q, 0, &old);
		assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	}
	assert_int_equal(name_rows(t.db, "needle"), 1);
	assert_int_equal(name_rows(t.db, "hay"), 15);
	assert_int_equal(name_rows(t.db, "nothing-like-it"), 0);

	/* privacy 1 (names hidden) leaves its minute folded: "hidden" is found */
	assert_int_equal(nx_qlog_set_privacy(q, 1), 0);
	g_now = T0 + 202 * MIN_MS;
	struct nx_qlog_rec r = mkrec(T0 + 201 * MIN_MS + 1, 1, "secret.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	r = mkrec(T0 + 202 * MIN_MS + 1, 1, "secret.example");
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 10000), 0);
	assert_int_equal(sql_int(t.db, "SELECT folded FROM agg_names WHERE minute = (SELECT "
				       "MAX(minute) FROM agg_names) - 1"),
			 1);
	assert_int_equal(name_rows(t.db, "hidden"), 2);
	nx_qlog_free(q);
	tdir_remove(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_migrations),
		cmocka_unit_test(test_migration_dense_blocks),
		cmocka_unit_test(test_migration_plain_ids),
		cmocka_unit_test(test_pagination),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_rec_json),
		cmocka_unit_test(test_block_text),
		cmocka_unit_test(test_block_shape),
		cmocka_unit_test(test_migration_to_blocks),
		cmocka_unit_test(test_stats_protocols),
		cmocka_unit_test(test_migration_protocols),
		cmocka_unit_test(test_top_roll),
		cmocka_unit_test(test_name_skip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Query-log test helpers: a temporary directory per test, record builders, a fixed clock,
 * reading every row back through the reader API. Header-only (static) for the two test files.
 */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <stdatomic.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "filter/result.h"
#include "querylog/querylog.h"

#define T0 1700000040000LL /* a fixed wall clock (ms), on a minute boundary */
#define MIN_MS 60000LL
#define DAY_MS (86400000LL)

struct tdir {
	char dir[256];
	char db[300];
};

static inline void tdir_make(struct tdir *t)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(t->dir, sizeof(t->dir), "%s/nxqlog-XXXXXX", base);
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->db, sizeof(t->db), "%s/querylog.db", t->dir);
}

static inline int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static inline void tdir_remove(struct tdir *t)
{
	nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static _Atomic int64_t g_now = T0;
static inline int64_t fixed_now(void *ud)
{
	(void)ud;
	return g_now;
}

static inline int up_name(void *ud, int idx, char *buf, size_t cap)
{
	(void)ud;
	snprintf(buf, cap, "upstream-%d", idx);
	return 0;
}

/* A forwarded A query from 192.168.1.<host> for name at ts. */
static inline struct nx_qlog_rec mkrec(int64_t ts, unsigned host, const char *name)
{
	struct nx_qlog_rec r;
	memset(&r, 0, sizeof(r));
	r.ts_ms = ts;
	r.duration_us = 1234;
	r.family = AF_INET;
	uint8_t a[4] = {192, 168, 1, (uint8_t)host};
	memcpy(r.client, a, 4);
	r.proto = NX_QLOG_PROTO_UDP;
	r.qtype = 1;
	r.rcode = 0;
	r.action = NX_QLOG_ACT_NONE;
	r.reason = NX_FILTER_R_none;
	r.upstream = 0;
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.answer, sizeof(r.answer), "A 192.0.2.1");
	return r;
}

static inline void mkblocked(struct nx_qlog_rec *r, const char *source)
{
	r->action = NX_QLOG_ACT_BLOCK;
	r->reason = NX_FILTER_R_blocklist_domain;
	r->upstream = -1;
	snprintf(r->matched, sizeof(r->matched), "%s", r->name);
	snprintf(r->source, sizeof(r->source), "%s", source);
	snprintf(r->answer, sizeof(r->answer), "A 0.0.0.0");
}

static inline void test_params(struct nx_qlog_params *p, const char *path)
{
	nx_qlog_params_default(p);
	p->path = path;
	p->producers = 2;
	p->buffer_max = 8192;
	p->flush_ms = 5;
	p->now_ms = fixed_now;
	p->upstream_name = up_name;
}

/* Every row matching f (all pages of `page` rows) into a new array; checks the order. */
static inline json_t *read_all(const char *path, struct nx_qlog_filter f, unsigned page)
{
	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(path, &r), 0);
	json_t *all = json_array();
	char cursor[64] = "";
	f.limit = page;
	for (int guard = 0; guard < 100000; guard++) {
		f.cursor = cursor[0] ? cursor : NULL;
		json_t *res = NULL;
		const char *bad = NULL;
		assert_int_equal(nx_qlog_query(r, &f, &res, &bad), 0);
		json_t *items = json_object_get(res, "items");
		assert_true(json_array_size(items) <= page);
		size_t i;
		json_t *it;
		json_array_foreach(items, i, it) {
			json_array_append(all, it);
		}
		json_t *next = json_object_get(res, "next_cursor");
		if (json_is_null(next)) {
			json_decref(res);
			break;
		}
		assert_int_equal(json_array_size(items), page);
		snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
		json_decref(res);
	}
	nx_qlog_reader_close(r);
	/* newest first, (ts, id) strictly decreasing: every row once */
	for (size_t i = 1; i < json_array_size(all); i++) {
		json_t *a = json_array_get(all, i - 1), *b = json_array_get(all, i);
		json_int_t ta = json_integer_value(json_object_get(a, "ts"));
		json_int_t tb = json_integer_value(json_object_get(b, "ts"));
		json_int_t ia = json_integer_value(json_object_get(a, "id"));
		json_int_t ib = json_integer_value(json_object_get(b, "id"));
		assert_true(ta > tb || (ta == tb && ia > ib));
	}
	return all;
}

static inline size_t count_rows(const char *path)
{
	struct nx_qlog_filter f = {0};
	json_t *all = read_all(path, f, 1000);
	size_t n = json_array_size(all);
	json_decref(all);
	return n;
}

static inline const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static inline json_int_t jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* The first row of sql on a separate connection: *db and the stepped statement (the caller
 * finalizes and closes). */
static inline sqlite3_stmt *sql_row(const char *path, const char *sql, sqlite3 **db)
{
	assert_int_equal(sqlite3_open(path, db), SQLITE_OK);
	/* The writer or a checkpoint may hold a lock for a moment (longer under sanitizers). */
	sqlite3_busy_timeout(*db, 5000);
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_prepare_v2(*db, sql, -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	return s;
}

/* One integer from SQL on a separate connection. */
static inline int64_t sql_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = sql_row(path, sql, &db);
	int64_t v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

/* One text from SQL on a separate connection (caller frees; NULL for SQL NULL). */
static inline char *sql_text(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = sql_row(path, sql, &db);
	const char *t = (const char *)sqlite3_column_text(s, 0);
	char *out = t ? strdup(t) : NULL;
	sqlite3_finalize(s);
	sqlite3_close(db);
	return out;
}

static inline void sql_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* Top list of kind k over everything: keys and counts must be exactly these. */
static inline void expect_top_all(const char *path, enum nx_qlog_top_kind k, unsigned limit,
				  const char *const *keys, const int *counts, size_t n)
{
	struct nx_qlog_reader *r = NULL;
	assert_int_equal(nx_qlog_reader_open(path, &r), 0);
	json_t *top = NULL;
	assert_int_equal(nx_qlog_top(r, k, 0, 0, limit, &top, NULL), 0);
	json_t *items = json_object_get(top, "items");
	assert_true(json_array_size(items) >= n);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(jstr(json_array_get(items, i), "key"), keys[i]);
		assert_int_equal(jint(json_array_get(items, i), "count"), counts[i]);
	}
	json_decref(top);
	nx_qlog_reader_close(r);
}

static inline int64_t ledger_bytes(enum nx_owner o)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[o].bytes;
}

static inline int64_t ledger_count(enum nx_owner o)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[o].count;
}

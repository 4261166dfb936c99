/*
 * The query log's life cycle and its writer thread: drain the rings, apply privacy, feed the
 * tap, pack the records into the batch, write one transaction per batch with backoff on
 * failure, run retention in small statements, answer flush requests.
 */
#include "querylog/querylog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "filter/result.h"
#include "querylog/impl.h"

#define DAY_MS (86400 * (int64_t)1000)

static const char *const errkind_names[] = {
#define NX_QLOG_ERRKIND_NAME(k) #k,
	NX_QLOG_ERROR_KINDS(NX_QLOG_ERRKIND_NAME)
#undef NX_QLOG_ERRKIND_NAME
};

void nx_qlog_params_default(struct nx_qlog_params *p)
{
	*p = (struct nx_qlog_params){
		.producers = 1,
		.buffer_max = NX_QLOG_BUFFER_DEFAULT,
		.retention_days = NX_QLOG_RETENTION_DEFAULT,
		.privacy = 0,
		.batch_max = NX_QLOG_BATCH_DEFAULT,
		.writer_cache_kib = NX_QLOG_WRITER_CACHE_KIB,
		.sqlite_soft_heap_kib = NX_QLOG_SQLITE_SOFT_HEAP_KIB,
		.flush_ms = NX_QLOG_FLUSH_MS,
		.agg_ms = NX_QLOG_AGG_WRITE_MS,
		.commit_ms = 0,
		.agg_defer_ms = NX_QLOG_AGG_DEFER_MS,
	};
}

size_t nx_qlog_batch_bytes(unsigned batch_max)
{
	return (size_t)batch_max * NX_QLOG_BATCH_REC_BYTES + PK_MAX;
}

/* ---- records ---- */

static void terminate(char *s, size_t cap)
{
	s[cap - 1] = '\0';
}

static void hide(char *s, size_t cap)
{
	if (s[0]) {
		snprintf(s, cap, "hidden");
	}
}

void nx_qlog_apply_privacy(struct nx_qlog_rec *r, unsigned privacy)
{
	terminate(r->name, sizeof(r->name));
	terminate(r->matched, sizeof(r->matched));
	terminate(r->source, sizeof(r->source));
	terminate(r->answer, sizeof(r->answer));
	terminate(r->client_id, sizeof(r->client_id));
	if (privacy >= 1) {
		snprintf(r->name, sizeof(r->name), "hidden");
		hide(r->matched, sizeof(r->matched));
		hide(r->answer, sizeof(r->answer));
		/* a user rule's text names the domain; a list source's name does not */
		if (r->reason == NX_FILTER_R_user_allow || r->reason == NX_FILTER_R_user_deny) {
			hide(r->source, sizeof(r->source));
		}
	}
	if (privacy >= 2) {
		memset(r->client, 0, sizeof(r->client));
		r->family = 0;
		r->client_id[0] = 0; /* names the device as well as its address does */
	}
}

/* One octet in decimal at p; returns the end. */
static char *octet(char *p, unsigned v)
{
	if (v >= 100) {
		*p++ = (char)('0' + v / 100);
		v %= 100;
		*p++ = (char)('0' + v / 10);
		v %= 10;
	} else if (v >= 10) {
		*p++ = (char)('0' + v / 10);
		v %= 10;
	}
	*p++ = (char)('0' + v);
	return p;
}

int nx_qlog_addr_text(unsigned family, const uint8_t *addr, char *buf, size_t cap)
{
	if (family == AF_INET && cap >= INET_ADDRSTRLEN) {
		/* every record needs it: inet_ntop formats IPv4 through sprintf */
		char *p = buf;
		for (int i = 0; i < 4; i++) {
			p = octet(p, addr[i]);
			*p++ = '.';
		}
		p[-1] = '\0';
		return (int)(p - 1 - buf);
	}
	if (family == AF_INET6 && inet_ntop(AF_INET6, addr, buf, (socklen_t)cap)) {
		return (int)strlen(buf);
	}
	return snprintf(buf, cap, "%s", family == 0 ? "hidden" : "unknown");
}

void nx_qlog_client_text(const struct nx_qlog_rec *rec, char *buf, size_t cap)
{
	nx_qlog_addr_text(rec->family, rec->client, buf, cap);
}

/* ---- writer connection ---- */

static void stmts_finalize(struct nx_qlog *q)
{
	sqlite3_stmt **all = (sqlite3_stmt **)&q->st;
	for (size_t i = 0; i < sizeof(q->st) / sizeof(*all); i++) {
		sqlite3_finalize(all[i]);
		all[i] = NULL;
	}
}

/* agg_minute's protocol columns (db.c migration 5) from the one list: names, then bare "?"
 * placeholders, which SQLite numbers after ?6 in list order (agg.c binds 7 + proto). */
#define PROTO_COL(id, text) ", " text
#define PROTO_PARAM(id, text) ", ?"
#define PROTO_ADD(id, text) ", " text " = " text " + excluded." text

static int stmts_prepare(struct nx_qlog *q)
{
	static const struct {
		size_t off;
		const char *sql;
	} list[] = {
		{offsetof(struct nx_qlog_stmts, insert_block),
		/* the id explicitly (migration 8: no AUTOINCREMENT): above every block and the
		 * aggregates' mark, so ids never go back even when retention removed them all */
		 "INSERT INTO log_blocks(id, ts_min, ts_max, n, blocked, clients, records)"
		 " VALUES (MAX(COALESCE((SELECT MAX(id) FROM log_blocks), 0),"
		 " COALESCE((SELECT block FROM agg_mark WHERE id = 0), 0)) + 1,"
		 " ?1, ?2, ?3, ?4, ?5, ?6)"},
		{offsetof(struct nx_qlog_stmts, minute_upsert),
		 "INSERT INTO agg_minute(minute, queries, blocked, cached, forwarded, local"
		 NX_QLOG_PROTOS(PROTO_COL) ") VALUES (?1, ?2, ?3, ?4, ?5, ?6"
		 NX_QLOG_PROTOS(PROTO_PARAM) ") ON CONFLICT(minute) DO UPDATE SET"
		 " queries = queries + excluded.queries, blocked = blocked + excluded.blocked,"
		 " cached = cached + excluded.cached, forwarded = forwarded + excluded.forwarded,"
		 " local = local + excluded.local" NX_QLOG_PROTOS(PROTO_ADD)},
		{offsetof(struct nx_qlog_stmts, top_upsert),
		 "INSERT INTO agg_top(kind, minute, key, n) VALUES (?1, ?2, ?3, ?4)"
		 " ON CONFLICT(kind, minute, key) DO UPDATE SET n = n + excluded.n"},
		{offsetof(struct nx_qlog_stmts, begin), "BEGIN IMMEDIATE"},
		{offsetof(struct nx_qlog_stmts, commit), "COMMIT"},
		{offsetof(struct nx_qlog_stmts, rollback), "ROLLBACK"},
		{offsetof(struct nx_qlog_stmts, ret_blocks),
		 "DELETE FROM log_blocks WHERE id IN"
		 " (SELECT id FROM log_blocks WHERE ts_max < ?1 ORDER BY ts_max LIMIT ?2)"
		 " RETURNING n"},
		{offsetof(struct nx_qlog_stmts, ret_minute),
		 "DELETE FROM agg_minute WHERE minute IN"
		 " (SELECT minute FROM agg_minute WHERE minute < ?1 ORDER BY minute LIMIT ?2)"},
		{offsetof(struct nx_qlog_stmts, ret_top),
		 "DELETE FROM agg_top WHERE (kind, minute, key) IN"
		 " (SELECT kind, minute, key FROM agg_top WHERE kind = ?1 AND minute < ?2"
		 " ORDER BY minute LIMIT ?3)"},
		{offsetof(struct nx_qlog_stmts, roll_upsert),
		 "INSERT INTO agg_roll(kind, key, n) VALUES (?1, ?2, ?3)"
		 " ON CONFLICT(kind, key) DO UPDATE SET n = n + excluded.n"},
		{offsetof(struct nx_qlog_stmts, roll_lo_get),
		 "SELECT lo FROM agg_roll_lo WHERE id = 0"},
		{offsetof(struct nx_qlog_stmts, roll_lo_set),
		 "INSERT OR REPLACE INTO agg_roll_lo(id, lo) VALUES (0, ?1)"},
		/* kind IN (...): a range of the primary key per kind, not a scan */
		{offsetof(struct nx_qlog_stmts, roll_sub),
		 "INSERT INTO agg_roll(kind, key, n) SELECT kind, key, -SUM(n) FROM agg_top"
		 " WHERE kind IN (0, 1, 2) AND minute >= ?1 AND minute < ?2 GROUP BY kind, key"
		 " ON CONFLICT(kind, key) DO UPDATE SET n = n + excluded.n"},
		{offsetof(struct nx_qlog_stmts, roll_zero),
		 "DELETE FROM agg_roll WHERE kind IN (0, 1, 2) AND n <= 0"},
		{offsetof(struct nx_qlog_stmts, roll_clear), "DELETE FROM agg_roll"},
		{offsetof(struct nx_qlog_stmts, roll_build),
		 "INSERT INTO agg_roll(kind, key, n) SELECT kind, key, SUM(n) FROM agg_top"
		 " WHERE kind IN (0, 1, 2) AND minute >= ?1 GROUP BY kind, key"},
		{offsetof(struct nx_qlog_stmts, names_put),
		 "INSERT INTO agg_names(minute, folded, open, names) VALUES (?1, ?2, ?3, ?4)"
		 " ON CONFLICT(minute) DO UPDATE SET folded = folded OR excluded.folded,"
		 " open = excluded.open, names = names || excluded.names"},
		{offsetof(struct nx_qlog_stmts, mark_get), "SELECT block FROM agg_mark WHERE id = 0"},
		{offsetof(struct nx_qlog_stmts, mark_set),
		 "INSERT OR REPLACE INTO agg_mark(id, block) VALUES (0, ?1)"},
		{offsetof(struct nx_qlog_stmts, max_block), "SELECT MAX(id) FROM log_blocks"},
		{offsetof(struct nx_qlog_stmts, uncounted),
		 "SELECT id, records FROM log_blocks WHERE id > ?1 ORDER BY id"},
		{offsetof(struct nx_qlog_stmts, ret_names),
		 "DELETE FROM agg_names WHERE minute IN"
		 " (SELECT minute FROM agg_names WHERE minute < ?1 ORDER BY minute LIMIT ?2)"},
	};
	int rc;
	for (size_t i = 0; i < NX_ARRAY_LEN(list); i++) {
		sqlite3_stmt **s = (sqlite3_stmt **)((char *)&q->st + list[i].off);
		rc = sqlite3_prepare_v3(q->db, list[i].sql, -1, SQLITE_PREPARE_PERSISTENT, s, NULL);
		if (rc != SQLITE_OK) {
			nx_log(NX_LOG_ERR, "querylog", "prepare: %s", sqlite3_errmsg(q->db));
			stmts_finalize(q);
			return rc;
		}
	}
	return SQLITE_OK;
}

static void conn_close(struct nx_qlog *q)
{
	stmts_finalize(q);
	nx_qlog_db_close(q->db);
	q->db = NULL;
}

/* The aggregates' watermark: blocks after it (deferred, or stored before a crash lost their
 * held counts) are counted from their records at the next aggregate write. SQLite code. */
static int mark_read(struct nx_qlog *q)
{
	sqlite3_stmt *s = q->st.mark_get;
	int rc = sqlite3_step(s);
	int64_t mark = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : INT64_MAX;
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		return rc;
	}
	s = q->st.max_block;
	rc = sqlite3_step(s);
	int64_t max = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		return rc;
	}
	if (mark == INT64_MAX) {
		mark = max; /* no row (written by hand): what is there counts as counted */
	}
	q->agg.mark = mark;
	if (max > mark && !q->agg.uncounted) {
		if (q->agg.pending) {
			/* counts held for blocks that agg_mark covers only once written: cannot
			 * happen (every counted block moves the mark); recount nothing twice */
			q->agg.mark = max;
			return SQLITE_OK;
		}
		q->agg.uncounted = true;
		q->agg.pending = true;
		q->agg.defer_due = 0; /* at the next aggregate write: now */
	}
	return SQLITE_OK;
}

static int conn_open(struct nx_qlog *q)
{
	unsigned rb = 0;
	int rc = nx_qlog_db_open(q->path, ROLE_WRITER, q->writer_cache_kib, &q->db, &rb);
	q->sync_full = -1; /* db.c sets NORMAL; set_sync() decides per batch */
	if (rc == SQLITE_OK) {
		atomic_store(&q->cache_readback, rb);
		rc = stmts_prepare(q);
		if (rc == SQLITE_OK) {
			rc = mark_read(q);
		}
		if (rc != SQLITE_OK) {
			conn_close(q);
		}
	}
	q->reopen = rc != SQLITE_OK;
	return rc;
}

/* ---- writer state ---- */

struct wstate {
	size_t n;		 /* records held in q->batch for (re)writing; 0 = none */
	unsigned privacy;	 /* privacy applied to the held batch */
	unsigned backoff_ms;	 /* current retry interval after a failure; 0 = healthy */
	uint64_t retry_at;	 /* mono ms of the next attempt for a held batch */
	uint64_t pending_since;	 /* mono ms a ring was seen non-empty; 0 = none pending */
	bool urgent;		 /* a ring reached half full */
	bool more;		 /* the last drain left records behind */
	uint64_t retention_at;	 /* mono ms of the next retention run */
	int ret_stage;		 /* -1 idle; 0 queries, 1 agg_minute, 2.. agg_top kinds */
	int64_t ret_cutoff;	 /* wall ms: rows older are deleted */
	uint64_t failures;	 /* consecutive failed attempts (for the recovery log) */
	bool counted;		 /* the held batch is already in the aggregates (a failed
				  * transaction that left the counts held: do not count again) */
	bool agg_force;		 /* write the aggregates in the next transaction (flush, stop) */
	bool agg_batch;		 /* a batch its interval commits takes its aggregates along,
				  * unless they are deferred (NX_QLOG_AGG_DEFER_MS) */
	uint64_t agg_since;	 /* mono ms the aggregates first held an uncommitted count; 0 none */
	uint64_t unagg;		 /* records committed whose aggregates are not yet committed */
	uint64_t held_since;	 /* mono ms the held batch took its first record (commit_ms) */
	uint64_t held_due;	 /* mono ms the held batch commits: held_since + commit_ms, or
				  * earlier at a minute's end (held_due_of) */
	uint64_t synced_at;	 /* mono ms of the last commit made with synchronous = FULL */
};

#define RET_STAGES (2 + 3 + 1) /* blocks, agg_minute, agg_top per kind, agg_names */

static void count_error(struct nx_qlog *q, struct wstate *w, int rc, const char *what)
{
	enum nx_qlog_errkind k = nx_qlog_errkind(rc);
	atomic_fetch_add_explicit(&q->errors[k], 1, memory_order_relaxed);
	atomic_store(&q->writer_ok, 0);
	w->failures++;
	uint64_t now = nx_now_mono_ms();
	if (!q->last_errlog_ms || now - q->last_errlog_ms >= NX_QLOG_ERRLOG_INTERVAL_MS) {
		nx_log(NX_LOG_WARN, "querylog", "%s failed (%s: %s)%s; retrying with backoff", what,
		       errkind_names[k], q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc),
		       q->errs_unlogged ? ", more errors since the last report" : "");
		q->last_errlog_ms = now;
		q->errs_unlogged = 0;
	} else {
		q->errs_unlogged++;
	}
	/* busy: someone holds a lock; full: the disk may free up. Anything else: the file may
	 * have been replaced or fixed, so reopen before the next attempt. */
	if (k != ERR_busy && k != ERR_full) {
		q->reopen = true;
	}
}

static int step_done(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* ---- packed records ---- */

/* Read the packed record at src into *v; returns its size. */
static size_t unpack(const uint8_t *src, struct nx_qlog_view *v)
{
	return nx_qlog_pk_view(src, v);
}

/*
 * The packed record at src again at dst with privacy (>= 1) applied, as
 * nx_qlog_apply_privacy does to a record: names "hidden", a user rule's text hidden, at 2 the
 * client and its id gone. Returns its size: at most PK_PRIVACY_GROWTH more than src's.
 */
static size_t pack_private(uint8_t *dst, const uint8_t *src, unsigned privacy)
{
	static const char hidden[] = "hidden";
	const size_t hl = sizeof(hidden) - 1;
	struct nx_qlog_view v;
	unpack(src, &v);
	struct nx_qlog_pk pk = *v.pk;
	const char *source = v.source;
	size_t sl = pk.source_len;
	if (pk.reason == NX_FILTER_R_user_allow || pk.reason == NX_FILTER_R_user_deny) {
		source = sl ? hidden : source;
		sl = sl ? hl : 0;
	}
	size_t al = pk.answer_len ? hl : 0;
	size_t il = pk.client_id_len;
	if (privacy >= 2) {
		memset(pk.client, 0, sizeof(pk.client));
		pk.family = 0;
		il = 0;
	}
	/* name and a non-empty matched are both "hidden": stored once */
	pk.name_len = (uint8_t)hl;
	pk.matched_len = v.matched_len ? PK_MATCHED_NAME : 0;
	pk.source_len = (uint8_t)sl;
	pk.answer_len = (uint8_t)al;
	pk.client_id_len = (uint8_t)il;
	memcpy(dst, &pk, sizeof(pk)); /* dst and src never overlap (the drain scratch, the batch) */
	char *p = (char *)dst + sizeof(pk);
	memcpy(p, hidden, hl);
	memcpy(p + hl, source, sl);
	memcpy(p + hl + sl, hidden, al);
	memcpy(p + hl + sl + al, v.client_id, il);
	return nx_qlog_pk_size(&pk);
}

/* ---- one transaction ---- */

/* Upstream name of index idx, from a small per-transaction cache in front of the callback. */
static const char *upstream_text(struct nx_qlog *q, int idx)
{
	struct nx_qlog_up_cache *c = &q->up_cache[(unsigned)idx % NX_ARRAY_LEN(q->up_cache)];
	if (c->idx != idx) {
		if (!q->upstream_name ||
		    q->upstream_name(q->upstream_ud, idx, c->name, sizeof(c->name)) < 0) {
			snprintf(c->name, sizeof(c->name), "#%d", idx);
		}
		c->name[sizeof(c->name) - 1] = '\0';
		c->idx = idx;
	}
	return c->name;
}

/* Store the block being encoded as one log_blocks row and start the next. SQLite code. */
static int block_store(struct nx_qlog *q)
{
	struct nx_qlog_blk *b = &q->blk;
	char clients[NX_QLOG_BLOCK_CLIENTS * (6 * NX_QLOG_CLIENT_TEXT_MAX + 3) + 2];
	size_t clen = nx_qlog_blk_clients(b, clients, sizeof(clients));
	size_t len;
	const char *text = nx_qlog_blk_finish(b, &len);
	sqlite3_stmt *s = q->st.insert_block;
	sqlite3_bind_int64(s, 1, b->ts_min);
	sqlite3_bind_int64(s, 2, b->ts_max);
	sqlite3_bind_int(s, 3, (int)b->n);
	sqlite3_bind_int(s, 4, (int)b->blocked);
	if (clen) {
		sqlite3_bind_text(s, 5, clients, (int)clen, SQLITE_STATIC);
	} else {
		sqlite3_bind_null(s, 5);
	}
	sqlite3_bind_text(s, 6, text, (int)len, SQLITE_STATIC);
	int rc = step_done(s);
	sqlite3_clear_bindings(s);
	nx_qlog_blk_reset(b);
	if (rc == SQLITE_OK) {
		q->agg.txn_last = sqlite3_last_insert_rowid(q->db);
	}
	return rc;
}

/* Add one record to the block being encoded (storing it first when full or of another
 * minute). SQLite code. */
static int block_add(struct nx_qlog *q, const struct nx_qlog_view *v)
{
	int rc = SQLITE_OK;
	if (nx_qlog_blk_needs_flush(&q->blk, v->pk->ts_ms)) {
		rc = block_store(q);
	}
	char client[NX_QLOG_CLIENT_TEXT_MAX];
	int client_len = nx_qlog_addr_text(v->pk->family, v->pk->client, client, sizeof(client));
	const char *up = v->pk->upstream < 0 ? NULL : upstream_text(q, v->pk->upstream);
	nx_qlog_blk_add(&q->blk, v, client, (size_t)client_len, up);
	return rc;
}

/* Are the aggregates due in this transaction? */
static bool agg_due(const struct nx_qlog *q, const struct wstate *w, uint64_t now)
{
	return q->agg_ms == 0 || w->agg_force || w->agg_batch ||
	       (w->agg_since && now >= w->agg_since + q->agg_ms);
}

/* The aggregates' counts are committed: the records behind them count as written. */
static void agg_committed(struct nx_qlog *q, struct wstate *w)
{
	if (q->agg.folded) {
		atomic_fetch_add_explicit(&q->agg_other, q->agg.folded, memory_order_relaxed);
	}
	nx_qlog_agg_zero(&q->agg);
	if (w->unagg) {
		atomic_fetch_add_explicit(&q->written, w->unagg, memory_order_relaxed);
	}
	w->unagg = 0;
	w->agg_since = 0;
	w->agg_force = false;
	w->agg_batch = false;
}

/* End the open transaction: COMMIT when rc is SQLITE_OK, else ROLLBACK. The final code. */
static int end_txn(struct nx_qlog *q, int rc)
{
	if (rc == SQLITE_OK) {
		rc = step_done(q->st.commit);
	}
	if (rc != SQLITE_OK && q->db && !sqlite3_get_autocommit(q->db)) {
		step_done(q->st.rollback);
	}
	/* the names in agg_names are those of committed transactions */
	if (rc == SQLITE_OK) {
		q->agg.names_mark = q->agg.names_next;
		if (q->agg.mark_next) {
			q->agg.mark = q->agg.mark_next;
		}
	} else {
		q->agg.names_next = q->agg.names_mark;
	}
	q->agg.mark_next = 0;
	q->agg.txn_last = 0;
	return rc;
}

/* After a transaction that counted the uncounted blocks (nx_qlog_agg_catch_up): committed,
 * they are counted; rolled back, the table's partial counts are dropped and the blocks stay
 * uncounted (counted again at the retry). */
static void caught_up(struct nx_qlog *q, struct wstate *w, bool catch_up, int rc)
{
	if (!catch_up) {
		return;
	}
	if (rc == SQLITE_OK) {
		q->agg.uncounted = false;
		return;
	}
	nx_qlog_agg_clear(&q->agg);
	nx_qlog_agg_zero(&q->agg);
	q->agg.pending = true; /* the blocks still wait */
	w->agg_since = 0;
}

/* A transaction of the held aggregate counts alone, on the connection attempt() opened, with
 * the names that entered the table since the last such write. SQLite code; on failure they
 * stay held. */
static int write_aggregates(struct nx_qlog *q, struct wstate *w)
{
	bool catch_up = q->agg.uncounted; /* then the table holds no counts */
	int rc = step_done(q->st.begin);
	if (rc == SQLITE_OK && catch_up) {
		rc = nx_qlog_agg_catch_up(q);
	} else if (rc == SQLITE_OK) {
		rc = nx_qlog_agg_write(q);
		if (rc == SQLITE_OK) {
			rc = nx_qlog_agg_names_write(q, false);
		}
	}
	rc = end_txn(q, rc);
	caught_up(q, w, catch_up, rc);
	if (rc == SQLITE_OK) {
		agg_committed(q, w);
	}
	return rc;
}

/* Would counting the held batch clear the aggregate table (a new minute)? */
static bool batch_clears_agg(const struct nx_qlog *q)
{
	const uint8_t *p = q->batch, *end = q->batch + q->batch_used;
	struct nx_qlog_view v;
	while (p < end) {
		p += unpack(p, &v);
		if (nx_qlog_agg_would_clear(&q->agg, v.pk->ts_ms)) {
			return true;
		}
	}
	return false;
}

/*
 * One transaction: rows (privacy < 3), counted into the aggregates, which are upserted when
 * due. Rolled back on failure. A transaction that may clear the aggregate table (a new minute)
 * must hold every count in it, so counts of earlier transactions are committed first; a failed
 * transaction then drops all counts and its batch is counted again when retried. A failed
 * transaction that could not clear leaves its counts held (w->counted: not counted again).
 */
/* May the held batch be stored without counting it (NX_QLOG_AGG_DEFER_MS)? */
static bool batch_defers(const struct nx_qlog *q, const struct wstate *w)
{
	return q->commit_ms && q->agg_defer_ms && q->agg_ms && w->privacy == 0 && !w->counted &&
	       !w->agg_force && w->n < NX_QLOG_AGG_DEFER_RECS;
}

/* Store the held batch's blocks alone (a household's commit: their aggregates are counted
 * from them later), or with every uncounted block counted when that is due. SQLite code. */
/* A batch's transaction opens with no upstream names cached and an empty block. */
static int begin_batch(struct nx_qlog *q)
{
	for (size_t i = 0; i < NX_ARRAY_LEN(q->up_cache); i++) {
		q->up_cache[i].idx = -1;
	}
	nx_qlog_blk_reset(&q->blk);
	return step_done(q->st.begin);
}

static int write_deferred(struct nx_qlog *q, struct wstate *w)
{
	int rc = SQLITE_OK;
	if (q->agg.pending && !q->agg.uncounted) {
		rc = write_aggregates(q, w); /* counts held by earlier batches go first */
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	uint64_t now = nx_now_mono_ms();
	bool catch_up = q->agg.uncounted && now >= q->agg.defer_due;
	rc = begin_batch(q);
	const uint8_t *p = q->batch, *end = q->batch + q->batch_used;
	struct nx_qlog_view v;
	while (rc == SQLITE_OK && p < end) {
		p += unpack(p, &v);
		rc = block_add(q, &v);
	}
	if (rc == SQLITE_OK && q->blk.n) {
		rc = block_store(q);
	}
	if (rc == SQLITE_OK && catch_up) {
		rc = nx_qlog_agg_catch_up(q); /* these blocks too */
	}
	rc = end_txn(q, rc);
	caught_up(q, w, catch_up, rc);
	if (rc != SQLITE_OK) {
		return rc;
	}
	/* written now: the stored blocks are what their aggregates will be counted from, even
	 * after a crash (at open) */
	w->counted = false;
	atomic_fetch_add_explicit(&q->written, w->n, memory_order_relaxed);
	if (catch_up) {
		agg_committed(q, w);
	} else {
		if (!q->agg.uncounted) {
			q->agg.uncounted = true;
			q->agg.defer_due = now + q->agg_defer_ms;
		}
		/* the loop's aggregate clock: due when the deferral ends */
		q->agg.pending = true;
		w->agg_since = q->agg.defer_due > q->agg_ms ? q->agg.defer_due - q->agg_ms : 1;
		w->agg_batch = false;
	}
	return SQLITE_OK;
}

static int write_batch(struct nx_qlog *q, struct wstate *w)
{
	int rc = SQLITE_OK;
	if (batch_defers(q, w)) {
		return write_deferred(q, w);
	}
	if (q->agg.uncounted) {
		rc = write_aggregates(q, w); /* count the stored blocks before this batch */
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	/* ... and so are the names in the table: agg_names is appended when a minute's keys leave
	 * the table and here, not in every aggregate write (each append rewrites the minute's
	 * row), and a clearing batch that fails must not lose the names it cleared */
	bool names_held = q->agg.names_next < q->agg.n_names;
	if (!w->counted && (q->agg.pending || names_held) && batch_clears_agg(q)) {
		rc = write_aggregates(q, w);
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	bool clean = !q->agg.pending; /* every count in the table will be this batch's */
	bool agg_now = agg_due(q, w, nx_now_mono_ms());
	rc = begin_batch(q);
	const uint8_t *p = q->batch, *end = q->batch + q->batch_used;
	struct nx_qlog_view v;
	while (rc == SQLITE_OK && p < end) {
		p += unpack(p, &v);
		if (!w->counted) {
			rc = nx_qlog_agg_add(q, &v, w->privacy);
		}
		if (rc == SQLITE_OK && w->privacy < 3) {
			rc = block_add(q, &v);
		}
	}
	if (rc == SQLITE_OK && q->blk.n) {
		rc = block_store(q);
	}
	if (rc == SQLITE_OK && agg_now) {
		rc = nx_qlog_agg_write(q);
	}
	if (rc == SQLITE_OK && q->agg.txn_last) {
		/* counted (held or written): never counted again from the blocks */
		rc = nx_qlog_agg_mark_set(q, q->agg.txn_last);
	}
	rc = end_txn(q, rc);
	if (rc == SQLITE_OK) {
		w->counted = false;
		w->unagg += w->n;
		if (agg_now) {
			agg_committed(q, w);
		} else if (!w->agg_since && q->agg.pending) {
			w->agg_since = nx_now_mono_ms();
		}
	} else if (clean) {
		/* rolled back holding only this batch's counts: counted again when retried */
		nx_qlog_agg_zero(&q->agg);
		w->counted = false;
	} else {
		w->counted = true;
	}
	return rc;
}

/*
 * Batched commits (commit_ms): fsync the commit (synchronous = FULL) when the last fsynced one
 * is an interval old, else NORMAL (the WAL is synced at checkpoints only). A batch committed
 * by its interval (household rates) is always fsynced, so a power loss loses at most the
 * records held; above ~68 q/s batches commit when full, several an interval, and one of them
 * an interval is fsynced (one fsync a commit there stalled the writer: 39% dropped at 150k/s).
 * Returns whether this commit is fsynced. SQLite code in *rc.
 */
static bool set_sync(struct nx_qlog *q, struct wstate *w, uint64_t now, int *rc)
{
	bool full = q->commit_ms && now >= w->synced_at + q->commit_ms;
	if (q->commit_ms && q->sync_full != (int)full) {
		const char *sql = full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL";
		*rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
		q->sync_full = *rc == SQLITE_OK ? (int)full : -1;
	}
	return full;
}

/* Try to store the held batch (or, with none held, the held aggregate counts) once. */
static void attempt(struct nx_qlog *q, struct wstate *w)
{
	int rc = SQLITE_OK;
	if (q->reopen || !q->db) {
		conn_close(q);
		rc = conn_open(q);
	}
	uint64_t now = nx_now_mono_ms();
	bool synced = rc == SQLITE_OK && set_sync(q, w, now, &rc);
	if (rc == SQLITE_OK) {
		rc = w->n ? write_batch(q, w) : write_aggregates(q, w);
	}
	if (rc == SQLITE_OK && synced) {
		w->synced_at = now;
	}
	nx_qlog_sqlite_sync();
	if (rc != SQLITE_OK) {
		count_error(q, w, rc, "query-log write");
		w->backoff_ms = w->backoff_ms ? NX_MIN(w->backoff_ms * 2, NX_QLOG_BACKOFF_MAX_MS)
					      : NX_QLOG_BACKOFF_MIN_MS;
		w->retry_at = nx_now_mono_ms() + w->backoff_ms;
		return;
	}
	if (w->n) {
		atomic_fetch_add_explicit(&q->batches, 1, memory_order_relaxed);
	}
	atomic_store(&q->writer_ok, 1);
	if (w->failures) {
		nx_log(NX_LOG_INFO, "querylog", "writes recovered after %llu failed attempts",
		       (unsigned long long)w->failures);
	}
	w->failures = 0;
	w->backoff_ms = 0;
	w->n = 0;
}

/* Hand the records just added to the batch (privacy applied) to the tap, unpacked into the
 * drain scratch: the tap's form is struct nx_qlog_rec. Never at privacy 3. */
static void tap_batch(struct nx_qlog *q, const uint8_t *p, size_t n)
{
	pthread_mutex_lock(&q->tap_mu);
	if (q->tap) {
		struct nx_qlog_rec *recs = (struct nx_qlog_rec *)q->chunk;
		for (size_t i = 0; i < n; i++) {
			p += nx_qlog_pk_unpack(p, &recs[i]);
		}
		q->tap(q->tap_ud, recs, n);
	}
	pthread_mutex_unlock(&q->tap_mu);
}

/*
 * When a batch that takes its first record now commits: after commit_ms, or at the first end
 * of a wall-clock minute in the interval's last minute if that comes earlier (issue 16). A
 * block never spans a minute, so a 60 s batch from mid-minute to mid-minute was two blocks,
 * each with its own leaf and overflow pages (5-6 pages a commit at 5 q/s); cut at the
 * minute's end it is one. The records of a minute arrive as it runs, so the cut is the
 * wall clock's (the drain before the commit takes what was pushed before it). Never later
 * than the interval: the loss window stays commit_ms + a drain. A flush, a full batch or a
 * privacy change still commit at once.
 */
static uint64_t held_due_of(const struct nx_qlog *q, uint64_t mono)
{
	uint64_t due = mono + q->commit_ms;
	int64_t wall = q->now_ms ? q->now_ms(q->now_ud) : nx_now_wall_ms();
	if (wall <= 0) {
		return due;
	}
	int64_t from = wall + (q->commit_ms > 60000 ? (int64_t)q->commit_ms - 60000 : 0);
	int64_t end = (from / 60000 + 1) * 60000; /* the first minute end after `from` */
	return NX_MIN(due, mono + (uint64_t)(end - wall));
}

/*
 * Drain one batch: chunks of packed records out of the rings into q->batch until batch_max
 * records or the bytes are used up, handed to the tap. At privacy 0 a chunk is copied straight
 * into the batch (the rings hold the batch's format); at 1-3 it goes through the drain scratch
 * and is rewritten into the batch with privacy applied. It is then held until written.
 */
static size_t take_batch(struct nx_qlog *q, struct wstate *w)
{
	unsigned privacy = atomic_load(&q->privacy);
	/* a held batch (commit_ms) grows by each drain */
	if (w->n && privacy != w->privacy) {
		/* the held records were drained at another privacy: commit them first */
		w->more = true;
		return 0;
	}
	size_t n = w->n, used = w->n ? q->batch_used : 0;
	bool more = true;
	while (more) {
		size_t fit = NX_MIN((size_t)NX_QLOG_DRAIN_CHUNK, q->batch_max - n);
		size_t room = q->batch_bytes - used, bytes = 0, got;
		uint8_t *at = q->batch + used;
		if (privacy == 0) {
			got = nx_qlog_rings_drain(q, at, fit, room, 0, &bytes, &more);
		} else {
			size_t scratch = NX_QLOG_DRAIN_CHUNK * sizeof(struct nx_qlog_rec);
			got = nx_qlog_rings_drain(q, q->chunk, fit, NX_MIN(room, scratch),
						  PK_PRIVACY_GROWTH, &bytes, &more);
			const uint8_t *src = q->chunk;
			bytes = 0;
			for (size_t i = 0; i < got; i++) {
				bytes += pack_private(at + bytes, src, privacy);
				src += nx_qlog_pk_size((const struct nx_qlog_pk *)src);
			}
		}
		if (!got) {
			break;
		}
		if (privacy < 3) {
			tap_batch(q, at, got);
		}
		used += bytes;
		n += got;
	}
	w->more = more;
	if (!w->n && n) {
		w->held_since = nx_now_mono_ms();
		w->held_due = held_due_of(q, w->held_since);
	}
	size_t got = n - w->n;
	w->n = n;
	w->privacy = privacy;
	q->batch_used = used;
	return got;
}

/*
 * Is the held batch full: it cannot take a further drain chunk (records or bytes), or it is
 * filling fast (NX_QLOG_HOLD_FAST)? A fast batch commits at NX_QLOG_BATCH_DEFAULT records as
 * without batching: a commit of 4096 records keeps the writer from draining for longer than a
 * ring lasts at 150k records/s (41-44% dropped in qlog_bench against 19-28% at 1024), and at
 * such rates the pages a commit rewrites are already shared by 1024 records (~36 B each).
 */
static bool batch_full(const struct nx_qlog *q, const struct wstate *w, uint64_t now)
{
	return w->n + NX_QLOG_DRAIN_CHUNK > q->batch_max ||
	       (q->batch_bytes - q->batch_used) / PK_MAX < NX_QLOG_DRAIN_CHUNK ||
	       (w->n >= NX_QLOG_BATCH_DEFAULT && now < w->held_since + NX_QLOG_HOLD_FAST_MS);
}

/* Is the held batch to be committed now? Without commit_ms at once; else when its interval
 * has passed, it is full (or records wait behind it), or a flush or stop asks. */
static bool commit_due(const struct nx_qlog *q, const struct wstate *w, uint64_t now, bool flush)
{
	return !q->commit_ms || flush || w->more || batch_full(q, w, now) || now >= w->held_due;
}

/* ---- retention ---- */

static void retention_begin(struct nx_qlog *q, struct wstate *w)
{
	unsigned days = atomic_load(&q->retention_days);
	w->retention_at = nx_now_mono_ms() + NX_QLOG_RETENTION_INTERVAL_MS;
	if (!days || !q->db) {
		w->ret_stage = -1;
		return;
	}
	int64_t now = q->now_ms ? q->now_ms(q->now_ud) : nx_now_wall_ms();
	w->ret_cutoff = now - (int64_t)days * DAY_MS;
	w->ret_stage = 0;
}

/* Old blocks: one DELETE of at most NX_QLOG_RETENTION_BLOCKS blocks whose newest record is
 * older than the cutoff. *rows = records deleted, *stmt_rows = blocks. SQLite code. */
static int retention_blocks(struct nx_qlog *q, int64_t cutoff, int *rows, int *stmt_rows)
{
	sqlite3_stmt *s = q->st.ret_blocks;
	sqlite3_bind_int64(s, 1, cutoff);
	sqlite3_bind_int(s, 2, NX_QLOG_RETENTION_BLOCKS);
	int rc;
	*rows = *stmt_rows = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		*rows += sqlite3_column_int(s, 0);
		++*stmt_rows;
	}
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Before agg_top minutes below cutoff_min go: agg_roll must not count them (it would never
 * subtract them again), so its lower minute moves to the cutoff first (a retention shorter
 * than the roll's day). SQLite code. */
static int roll_past(struct nx_qlog *q, int64_t cutoff_min)
{
	sqlite3_stmt *g = q->st.roll_lo_get;
	int rc = sqlite3_step(g);
	int64_t lo = rc == SQLITE_ROW ? sqlite3_column_int64(g, 0) : INT64_MAX;
	sqlite3_reset(g);
	if (rc != SQLITE_ROW) {
		return rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	if (lo >= cutoff_min) {
		return SQLITE_OK;
	}
	rc = step_done(q->st.begin);
	if (rc == SQLITE_OK) {
		rc = nx_qlog_roll_advance(q, cutoff_min, &lo);
	}
	return end_txn(q, rc);
}

/*
 * One DELETE: at most NX_QLOG_RETENTION_BLOCKS log blocks, or NX_QLOG_RETENTION_ROWS rows of an
 * aggregate table; moves to the next table when done. A block goes once its newest record is
 * past the cutoff (blocks never span two minutes). false on failure (counted; the run is
 * abandoned until the next one).
 */
static bool retention_step(struct nx_qlog *q, struct wstate *w)
{
	int64_t cutoff_min = w->ret_cutoff / 60000;
	int rc, deleted, stmt_rows, stmt_max = NX_QLOG_RETENTION_ROWS;
	if (w->ret_stage == 0) {
		stmt_max = NX_QLOG_RETENTION_BLOCKS;
		rc = retention_blocks(q, w->ret_cutoff, &deleted, &stmt_rows);
	} else {
		sqlite3_stmt *s;
		rc = SQLITE_OK;
		if (w->ret_stage == 1) {
			s = q->st.ret_minute;
			sqlite3_bind_int64(s, 1, cutoff_min);
			sqlite3_bind_int(s, 2, NX_QLOG_RETENTION_ROWS);
		} else if (w->ret_stage == RET_STAGES - 1) {
			s = q->st.ret_names;
			sqlite3_bind_int64(s, 1, cutoff_min);
			sqlite3_bind_int(s, 2, NX_QLOG_RETENTION_ROWS);
		} else {
			s = q->st.ret_top;
			sqlite3_bind_int(s, 1, w->ret_stage - 2);
			sqlite3_bind_int64(s, 2, cutoff_min);
			sqlite3_bind_int(s, 3, NX_QLOG_RETENTION_ROWS);
			if (w->ret_stage == 2) {
				rc = roll_past(q, cutoff_min);
			}
		}
		rc = rc == SQLITE_OK ? step_done(s) : rc;
		deleted = stmt_rows = rc == SQLITE_OK ? sqlite3_changes(q->db) : 0;
	}
	if (rc != SQLITE_OK) {
		count_error(q, w, rc, "query-log retention");
		w->ret_stage = -1;
		return false;
	}
	atomic_fetch_add_explicit(&q->retention_deleted, (uint64_t)deleted, memory_order_relaxed);
	if (stmt_rows < stmt_max && ++w->ret_stage == RET_STAGES) {
		w->ret_stage = -1;
	}
	return true;
}

/* Retention to completion (flush request). 0, or -EIO when the database is unavailable. */
static int retention_full(struct nx_qlog *q, struct wstate *w)
{
	if (w->ret_stage < 0) {
		if ((q->reopen || !q->db) && atomic_load(&q->retention_days)) {
			conn_close(q);
			int rc = conn_open(q);
			if (rc != SQLITE_OK) {
				count_error(q, w, rc, "query-log open");
				return -EIO;
			}
		}
		retention_begin(q, w);
	}
	while (w->ret_stage >= 0) {
		if (!retention_step(q, w)) {
			return -EIO;
		}
	}
	return 0;
}

/* ---- the thread ---- */

static void sleep_until(struct nx_qlog *q, uint64_t deadline_ms)
{
	q->sleeping = true;
	if (deadline_ms == UINT64_MAX) {
		pthread_cond_wait(&q->wcond, &q->wmu);
	} else {
		struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
				      .tv_nsec = (long)(deadline_ms % 1000) * 1000000};
		pthread_cond_timedwait(&q->wcond, &q->wmu, &ts);
	}
	q->sleeping = false;
}

/*
 * Final drain at stop: every record is written or counted dropped_unwritten. Bounded to one
 * queue's worth of records, so producers that still push cannot keep the writer alive.
 */
static void final_flush(struct nx_qlog *q, struct wstate *w)
{
	unsigned failures = 0;
	size_t budget = nx_qlog_capacity(q) + q->batch_max;
	w->agg_force = true;
	for (;;) {
		if (!w->n) {
			if (!budget || !take_batch(q, w)) {
				break;
			}
			budget -= NX_MIN(budget, w->n);
		}
		if (failures >= NX_QLOG_STOP_ATTEMPTS) {
			atomic_fetch_add_explicit(&q->dropped_unwritten, w->n, memory_order_relaxed);
			w->n = 0;
			continue;
		}
		attempt(q, w);
		if (w->n && ++failures < NX_QLOG_STOP_ATTEMPTS) {
			struct timespec ts = {0, NX_QLOG_BACKOFF_MIN_MS * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	/* aggregates still held (the last batch was dropped, or their own write failed) */
	for (unsigned i = 0; q->agg.pending && i < NX_QLOG_STOP_ATTEMPTS; i++) {
		attempt(q, w);
		if (q->agg.pending && i + 1 < NX_QLOG_STOP_ATTEMPTS) {
			struct timespec ts = {0, NX_QLOG_BACKOFF_MIN_MS * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	/* rows that are stored even though their aggregates could not be */
	atomic_fetch_add_explicit(&q->written, w->unagg, memory_order_relaxed);
	w->unagg = 0;
}

void *nx_qlog_writer_main(void *arg)
{
	struct nx_qlog *q = arg;
	struct wstate w = {.ret_stage = -1, .retention_at = nx_now_mono_ms()};

	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	for (;;) {
		bool stop, flush, ret_full;
		uint64_t flush_gen;

		pthread_mutex_lock(&q->wmu);
		for (;;) {
			uint64_t now = nx_now_mono_ms();
			if (q->wake & WAKE_NONEMPTY && !w.pending_since) {
				w.pending_since = now;
			}
			w.urgent |= (q->wake & WAKE_URGENT) != 0;
			q->wake = 0;
			if (q->retention_now) {
				q->retention_now = false;
				w.retention_at = now;
			}
			stop = q->stop;
			flush = q->flush_req != q->flush_done;
			bool go = stop;
			uint64_t deadline = UINT64_MAX;
			if (q->agg.pending && !w.agg_since) {
				w.agg_since = now;
			}
			if ((w.n && w.backoff_ms) || (w.backoff_ms && now < w.retry_at)) {
				/* a failed batch (or aggregate write) waits for its retry time,
				 * whatever else asks */
				go |= now >= w.retry_at;
				deadline = w.retry_at;
			} else {
				if (w.n) {
					/* a held batch (commit_ms): its commit time */
					uint64_t due = w.held_due;
					go |= now >= due;
					deadline = NX_MIN(deadline, due);
				}
				go |= flush || w.urgent || w.more || w.ret_stage >= 0 ||
				      now >= w.retention_at;
				if (w.pending_since) {
					uint64_t due = w.pending_since + q->flush_ms;
					go |= now >= due;
					deadline = NX_MIN(deadline, due);
				}
				deadline = NX_MIN(deadline, w.retention_at);
				if (q->agg.pending && !w.n) {
					/* with a batch held, the aggregates go with its commit
					 * (above): waking for them then would find nothing to do and
					 * spin until the commit */
					uint64_t due = w.agg_since + q->agg_ms;
					go |= now >= due;
					deadline = NX_MIN(deadline, due);
				}
			}
			if (go) {
				break;
			}
			sleep_until(q, deadline);
		}
		flush_gen = q->flush_req;
		ret_full = q->retention_req;
		pthread_mutex_unlock(&q->wmu);
		atomic_fetch_add_explicit(&q->writer_wakeups, 1, memory_order_relaxed);
		if (stop) {
			break;
		}

		uint64_t now = nx_now_mono_ms();
		bool drained = false; /* a full drain pass ran after the flush request was read */
		if (w.n && w.backoff_ms && now >= w.retry_at) {
			attempt(q, &w);
		}
		if (!w.n || !w.backoff_ms) {
			/* a batch due now takes what the rings hold first (its minute's last) */
			bool due = flush || w.urgent || w.more ||
				   (w.pending_since && now >= w.pending_since + q->flush_ms) ||
				   (w.n && q->commit_ms && now >= w.held_due);
			if (due) {
				w.urgent = false;
				w.pending_since = 0;
				w.agg_force |= flush;
				take_batch(q, &w);
				drained = true;
			}
			if (w.n && commit_due(q, &w, now, flush)) {
				/* a batch its interval commits takes its aggregates along (one
				 * transaction a batch); full ones at most every agg_ms, as before */
				w.agg_batch |= q->commit_ms && !w.more && !batch_full(q, &w, now);
				attempt(q, &w);
			}
			if (!w.n && q->agg.pending && now >= w.retry_at &&
			    (flush || agg_due(q, &w, now))) {
				w.agg_force |= flush;
				attempt(q, &w); /* the aggregates alone */
			}
			if ((!w.n || !w.backoff_ms) && !w.more) {
				if (w.ret_stage < 0 && now >= w.retention_at) {
					retention_begin(q, &w);
				}
				if (w.ret_stage >= 0) {
					retention_step(q, &w);
				}
			}
		}

		if (flush && drained && !w.n && !w.more && !q->agg.pending) {
			/* everything pushed before the request is written: answer it */
			int err = ret_full ? retention_full(q, &w) : 0;
			pthread_mutex_lock(&q->wmu);
			q->flush_done = flush_gen;
			q->flush_err = err;
			if (ret_full) {
				q->retention_req = false;
			}
			pthread_cond_broadcast(&q->done);
			pthread_mutex_unlock(&q->wmu);
		}
	}

	final_flush(q, &w);
	nx_qlog_sqlite_sync();
	return NULL;
}

/* ---- life cycle ---- */

static bool params_ok(const struct nx_qlog_params *p)
{
	return p->path && p->path[0] && p->producers >= 1 &&
	       p->producers <= NX_QLOG_PRODUCERS_MAX && p->buffer_max >= NX_QLOG_BUFFER_MIN &&
	       p->buffer_max <= NX_QLOG_BUFFER_MAX && p->buffer_max >= p->producers &&
	       p->retention_days <= NX_QLOG_RETENTION_MAX && p->privacy <= NX_QLOG_PRIVACY_MAX &&
	       p->batch_max >= 1 && p->batch_max <= NX_QLOG_BATCH_MAX &&
	       p->writer_cache_kib >= 64 && p->writer_cache_kib <= (1u << 20) &&
	       p->flush_ms >= 1 && p->flush_ms <= 60000 && p->agg_ms <= 60000 &&
	       p->commit_ms <= NX_QLOG_COMMIT_MAX_MS && p->agg_defer_ms <= 24u * 3600 * 1000;
}

int nx_qlog_new(const struct nx_qlog_params *p, struct nx_qlog **out)
{
	if (!p || !out || !params_ok(p)) {
		return -EINVAL;
	}
	struct nx_qlog *q = nx_mem_calloc(NX_OWNER_querylog_queue, 1, sizeof(*q));
	if (!q) {
		return -ENOMEM;
	}
	pthread_mutex_init(&q->wmu, NULL);
	pthread_mutex_init(&q->tap_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->wcond, &ca);
	pthread_cond_init(&q->done, &ca);
	pthread_condattr_destroy(&ca);
	q->batch_max = p->batch_max;
	q->writer_cache_kib = p->writer_cache_kib;
	q->flush_ms = p->flush_ms;
	q->agg_ms = p->agg_ms;
	q->commit_ms = p->commit_ms;
	q->agg_defer_ms = p->agg_defer_ms;
	q->now_ms = p->now_ms;
	q->now_ud = p->now_ud;
	q->upstream_name = p->upstream_name;
	q->upstream_ud = p->upstream_ud;
	q->tap = p->tap;
	q->tap_ud = p->tap_ud;
	atomic_store(&q->privacy, p->privacy);
	atomic_store(&q->retention_days, p->retention_days);

	int err = -ENOMEM;
	q->path = nx_mem_strdup(NX_OWNER_querylog_queue, p->path);
	if (!q->path) {
		goto fail;
	}
	q->path_bytes = strlen(q->path) + 1;
	err = nx_qlog_rings_init(q, p->producers, p->buffer_max);
	if (err) {
		goto fail;
	}
	err = -ENOMEM;
	q->chunk = nx_mem_alloc(NX_OWNER_querylog_queue,
				NX_QLOG_DRAIN_CHUNK * sizeof(struct nx_qlog_rec));
	q->batch_bytes = nx_qlog_batch_bytes(q->batch_max);
	q->batch = nx_mem_alloc(NX_OWNER_querylog_queue, q->batch_bytes);
	q->blk.buf = nx_mem_alloc(NX_OWNER_querylog_queue, NX_QLOG_BLOCK_BYTES);
	if (!q->chunk || !q->batch || !q->blk.buf) {
		goto fail;
	}
	err = nx_qlog_agg_init(&q->agg);
	if (err) {
		goto fail;
	}

	if (p->sqlite_soft_heap_kib) {
		sqlite3_soft_heap_limit64((int64_t)p->sqlite_soft_heap_kib * 1024);
	}
	int rc = conn_open(q);
	switch (rc & 0xff) {
	case SQLITE_OK:
		atomic_store(&q->writer_ok, 1);
		break;
	case SQLITE_FORMAT:
		err = NX_EFORMAT;
		goto fail;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		nx_log(NX_LOG_ERR, "querylog", "%s is not a usable SQLite database", q->path);
		err = NX_ECORRUPT;
		goto fail;
	default: {
		/* environmental: DNS starts anyway, the writer keeps trying */
		struct wstate w = {0};
		count_error(q, &w, rc, "query-log open");
		q->reopen = true;
		break;
	}
	}
	*out = q;
	return 0;

fail:
	nx_qlog_free(q);
	return err;
}

int nx_qlog_start(struct nx_qlog *q)
{
	if (!q) {
		return -EINVAL;
	}
	pthread_mutex_lock(&q->wmu);
	bool already = q->running;
	q->running = true;
	q->stop = false;
	pthread_mutex_unlock(&q->wmu);
	if (already) {
		return -EALREADY;
	}
	int rc = pthread_create(&q->thread, NULL, nx_qlog_writer_main, q);
	if (rc) {
		pthread_mutex_lock(&q->wmu);
		q->running = false;
		pthread_mutex_unlock(&q->wmu);
		return -rc;
	}
	pthread_setname_np(q->thread, "nx-qlog");
	return 0;
}

int nx_qlog_flush(struct nx_qlog *q, unsigned flags, unsigned timeout_ms)
{
	if (!q) {
		return -ESRCH;
	}
	pthread_mutex_lock(&q->wmu);
	if (!q->running || q->stop) {
		pthread_mutex_unlock(&q->wmu);
		return -ESRCH;
	}
	uint64_t gen = ++q->flush_req;
	if (flags & NX_QLOG_FLUSH_RETENTION) {
		q->retention_req = true;
	}
	pthread_cond_signal(&q->wcond);
	uint64_t deadline = nx_now_mono_ms() + timeout_ms;
	struct timespec ts = {.tv_sec = (time_t)(deadline / 1000),
			      .tv_nsec = (long)(deadline % 1000) * 1000000};
	int err = 0;
	while (q->flush_done < gen && q->running && !q->stop) {
		if (pthread_cond_timedwait(&q->done, &q->wmu, &ts) == ETIMEDOUT) {
			break;
		}
	}
	if (q->flush_done >= gen) {
		err = q->flush_err;
	} else {
		err = q->running && !q->stop ? NX_ETIMEDOUT : -ESRCH;
	}
	pthread_mutex_unlock(&q->wmu);
	return err;
}

void nx_qlog_stop(struct nx_qlog *q)
{
	if (!q) {
		return;
	}
	pthread_mutex_lock(&q->wmu);
	bool running = q->running && !q->stop;
	q->stop = true;
	pthread_cond_signal(&q->wcond);
	pthread_cond_broadcast(&q->done);
	pthread_mutex_unlock(&q->wmu);
	if (!running) {
		return;
	}
	pthread_join(q->thread, NULL);
	pthread_mutex_lock(&q->wmu);
	q->running = false;
	pthread_cond_broadcast(&q->done);
	pthread_mutex_unlock(&q->wmu);
}

void nx_qlog_free(struct nx_qlog *q)
{
	if (!q) {
		return;
	}
	nx_qlog_stop(q);
	conn_close(q);
	nx_qlog_agg_deinit(&q->agg);
	nx_mem_free(NX_OWNER_querylog_queue, q->batch, q->batch ? q->batch_bytes : 0);
	nx_mem_free(NX_OWNER_querylog_queue, q->blk.buf, q->blk.buf ? NX_QLOG_BLOCK_BYTES : 0);
	nx_mem_free(NX_OWNER_querylog_queue, q->chunk,
		    q->chunk ? NX_QLOG_DRAIN_CHUNK * sizeof(struct nx_qlog_rec) : 0);
	nx_qlog_rings_deinit(q);
	nx_mem_free(NX_OWNER_querylog_queue, q->path, q->path_bytes);
	pthread_cond_destroy(&q->wcond);
	pthread_cond_destroy(&q->done);
	pthread_mutex_destroy(&q->wmu);
	pthread_mutex_destroy(&q->tap_mu);
	nx_mem_free(NX_OWNER_querylog_queue, q, sizeof(*q));
}

void nx_qlog_stats(struct nx_qlog *q, struct nx_qlog_stats *st)
{
	memset(st, 0, sizeof(*st));
	int64_t used = 0, hw = 0;
	nx_qlog_sqlite_memory(&used, &hw);
	st->sqlite_mem_used = (uint64_t)used;
	st->sqlite_mem_highwater = (uint64_t)hw;
	if (!q) {
		return;
	}
	nx_qlog_rings_count(q, &st->queue_now, &st->pushed, &st->dropped_oldest, &st->queue_bytes);
	nx_qlog_atomic_max(&q->queue_peak, st->queue_now);
	nx_qlog_atomic_max(&q->queue_bytes_peak, st->queue_bytes);
	st->queue_peak = atomic_load(&q->queue_peak);
	st->queue_bytes_peak = atomic_load(&q->queue_bytes_peak);
	st->queue_capacity = nx_qlog_capacity(q);
	st->queue_bytes_capacity = nx_qlog_capacity_bytes(q);
	st->written = atomic_load(&q->written);
	st->dropped_unwritten = atomic_load(&q->dropped_unwritten);
	st->batches = atomic_load(&q->batches);
	st->writer_wakeups = atomic_load(&q->writer_wakeups);
	st->agg_other = atomic_load(&q->agg_other);
	st->retention_deleted = atomic_load(&q->retention_deleted);
	st->writer_ok = atomic_load(&q->writer_ok);
	st->writer_cache_kib = atomic_load(&q->cache_readback);
	st->err_full = atomic_load(&q->errors[ERR_full]);
	st->err_readonly = atomic_load(&q->errors[ERR_readonly]);
	st->err_busy = atomic_load(&q->errors[ERR_busy]);
	st->err_ioerr = atomic_load(&q->errors[ERR_ioerr]);
	st->err_cantopen = atomic_load(&q->errors[ERR_cantopen]);
	st->err_other = atomic_load(&q->errors[ERR_other]);
}

int nx_qlog_set_privacy(struct nx_qlog *q, unsigned privacy)
{
	if (!q || privacy > NX_QLOG_PRIVACY_MAX) {
		return -EINVAL;
	}
	atomic_store(&q->privacy, privacy);
	return 0;
}

int nx_qlog_set_retention(struct nx_qlog *q, unsigned days)
{
	if (!q || days > NX_QLOG_RETENTION_MAX) {
		return -EINVAL;
	}
	atomic_store(&q->retention_days, days);
	pthread_mutex_lock(&q->wmu);
	q->retention_now = true;
	pthread_cond_signal(&q->wcond);
	pthread_mutex_unlock(&q->wmu);
	return 0;
}

void nx_qlog_set_tap(struct nx_qlog *q, nx_qlog_tap_cb tap, void *ud)
{
	if (!q) {
		return;
	}
	pthread_mutex_lock(&q->tap_mu);
	q->tap = tap;
	q->tap_ud = ud;
	pthread_mutex_unlock(&q->tap_mu);
}

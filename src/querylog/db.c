/*
 * Database: open, numbered migrations (PRAGMA user_version), connection-role pragmas with
 * cache_size read back, SQLite memory in the ledger.
 */
#include "querylog/querylog.h"

#include <errno.h>
#include <stdio.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "querylog/impl.h"

/* Migration 4's INSTEAD OF INSERT trigger (migration 7 creates it again with the view). */
#define QUERIES_INSERT_TRIGGER_V4 \
	"CREATE TRIGGER queries_insert INSTEAD OF INSERT ON queries BEGIN" \
	" SELECT RAISE(ABORT, 'queries: ts, duration_us, client, proto, qtype, rcode, action," \
	" reason, cached and name are NOT NULL')" \
	"  WHERE NEW.ts IS NULL OR NEW.duration_us IS NULL OR NEW.client IS NULL" \
	"  OR NEW.proto IS NULL OR NEW.qtype IS NULL OR NEW.rcode IS NULL OR NEW.action IS NULL" \
	"  OR NEW.reason IS NULL OR NEW.cached IS NULL OR NEW.name IS NULL;" \
	" INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)" \
	" VALUES (CAST(NEW.ts AS INTEGER), CAST(NEW.ts AS INTEGER), 1," \
	" CAST(NEW.action AS INTEGER) = 2, json_array(CAST(NEW.client AS TEXT)), json_array(" \
	" json_array(CAST(NEW.ts AS INTEGER), CAST(NEW.duration_us AS INTEGER)," \
	" CAST(NEW.client AS TEXT), CAST(NEW.proto AS INTEGER), CAST(NEW.qtype AS INTEGER)," \
	" CAST(NEW.rcode AS INTEGER), CAST(NEW.action AS INTEGER), CAST(NEW.reason AS INTEGER)," \
	" CAST(NEW.cached AS INTEGER) <> 0, NULLIF(CAST(NEW.upstream AS TEXT), '')," \
	" CAST(NEW.name AS TEXT), NULLIF(CAST(NEW.matched AS TEXT), '')," \
	" NULLIF(CAST(NEW.source AS TEXT), ''), NULLIF(CAST(NEW.answer AS TEXT), '')," \
	" NULLIF(CAST(NEW.client_id AS TEXT), ''))" \
	"));" \
	" END;"

/*
 * Migrations: index i brings the schema from version i to i + 1. Never edit a released one;
 * append. Each runs in its own transaction together with its user_version bump.
 */
static const char *const migrations[] = {
	/* 1: the per-query log. ts in wall-clock ms; id orders rows inserted in one ms. Indexes
	 * serve the API filters with keyset order (ts DESC, id DESC): an index on (ts) carries the
	 * rowid, so (ts, id) < (?, ?) walks it; (client, ts) the same for one client. Name is a
	 * substring filter (no index can serve it); it walks the ts index. */
	"CREATE TABLE queries ("
	" id INTEGER PRIMARY KEY,"
	" ts INTEGER NOT NULL,"
	" duration_us INTEGER NOT NULL,"
	" client TEXT NOT NULL,"
	" proto INTEGER NOT NULL,"
	" qtype INTEGER NOT NULL,"
	" rcode INTEGER NOT NULL,"
	" action INTEGER NOT NULL,"
	" reason INTEGER NOT NULL,"
	" cached INTEGER NOT NULL,"
	" upstream TEXT,"
	" name TEXT NOT NULL,"
	" matched TEXT,"
	" source TEXT,"
	" answer TEXT);"
	"CREATE INDEX queries_ts ON queries(ts);"
	"CREATE INDEX queries_client_ts ON queries(client, ts);",

	/* 2: per-minute aggregates, maintained by the writer in the batch's transaction, so that
	 * statistics never scan the log. agg_top is keyed (kind, minute, key): a top-N reads one
	 * kind's minute range; retention deletes one kind's old minutes at a time. */
	"CREATE TABLE agg_minute ("
	" minute INTEGER PRIMARY KEY,"
	" queries INTEGER NOT NULL,"
	" blocked INTEGER NOT NULL,"
	" cached INTEGER NOT NULL,"
	" forwarded INTEGER NOT NULL,"
	" local INTEGER NOT NULL);"
	"CREATE TABLE agg_top ("
	" kind INTEGER NOT NULL,"
	" minute INTEGER NOT NULL,"
	" key TEXT NOT NULL,"
	" n INTEGER NOT NULL,"
	" PRIMARY KEY (kind, minute, key)) WITHOUT ROWID;",

	/* 3: the log stored in blocks (querylog/impl.h, block.c): a row per writer transaction
	 * and minute, its records one JSON array. Writing a block costs one INSERT instead of a
	 * row and two index entries per query. `queries` becomes a read-only view with the old
	 * columns (id = block id << 16 | index; a block that is not valid JSON is left out of it),
	 * and an INSTEAD OF trigger still accepts single-row INSERTs (tools, tests, sqlite3 .import)
	 * as one-record blocks, converting each value to its column's type as the table's
	 * affinity did (an empty optional text is NULL). Old rows become one-record blocks the
	 * same way. */
	"CREATE TABLE log_blocks ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" ts_min INTEGER NOT NULL,"
	" ts_max INTEGER NOT NULL,"
	" n INTEGER NOT NULL,"
	" blocked INTEGER NOT NULL,"
	" clients TEXT,"
	" records TEXT NOT NULL);"
	"CREATE INDEX log_blocks_ts_max ON log_blocks(ts_max);"
	"INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)"
	" SELECT CAST(ts AS INTEGER), CAST(ts AS INTEGER), 1, CAST(action AS INTEGER) = 2,"
	" json_array(CAST(client AS TEXT)), json_array("
	" json_array(CAST(ts AS INTEGER), CAST(duration_us AS INTEGER),"
	" CAST(client AS TEXT), CAST(proto AS INTEGER), CAST(qtype AS INTEGER),"
	" CAST(rcode AS INTEGER), CAST(action AS INTEGER), CAST(reason AS INTEGER),"
	" CAST(cached AS INTEGER) <> 0, NULLIF(CAST(upstream AS TEXT), ''),"
	" CAST(name AS TEXT), NULLIF(CAST(matched AS TEXT), ''),"
	" NULLIF(CAST(source AS TEXT), ''), NULLIF(CAST(answer AS TEXT), ''))"
	") FROM queries ORDER BY ts, id;"
	"DROP TABLE queries;"
	"CREATE VIEW queries(id, ts, duration_us, client, proto, qtype, rcode, action, reason,"
	" cached, upstream, name, matched, source, answer) AS"
	" SELECT b.id * 65536 + r.key, r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3,"
	" r.value ->> 4, r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8, r.value ->> 9,"
	" r.value ->> 10, r.value ->> 11, r.value ->> 12, r.value ->> 13"
	" FROM log_blocks AS b, json_each(b.records) AS r WHERE json_valid(b.records);"
	"CREATE TRIGGER queries_insert INSTEAD OF INSERT ON queries BEGIN"
	" SELECT RAISE(ABORT, 'queries: ts, duration_us, client, proto, qtype, rcode, action,"
	" reason, cached and name are NOT NULL')"
	"  WHERE NEW.ts IS NULL OR NEW.duration_us IS NULL OR NEW.client IS NULL"
	"  OR NEW.proto IS NULL OR NEW.qtype IS NULL OR NEW.rcode IS NULL OR NEW.action IS NULL"
	"  OR NEW.reason IS NULL OR NEW.cached IS NULL OR NEW.name IS NULL;"
	" INSERT INTO log_blocks(ts_min, ts_max, n, blocked, clients, records)"
	" VALUES (CAST(NEW.ts AS INTEGER), CAST(NEW.ts AS INTEGER), 1,"
	" CAST(NEW.action AS INTEGER) = 2, json_array(CAST(NEW.client AS TEXT)), json_array("
	" json_array(CAST(NEW.ts AS INTEGER), CAST(NEW.duration_us AS INTEGER),"
	" CAST(NEW.client AS TEXT), CAST(NEW.proto AS INTEGER), CAST(NEW.qtype AS INTEGER),"
	" CAST(NEW.rcode AS INTEGER), CAST(NEW.action AS INTEGER), CAST(NEW.reason AS INTEGER),"
	" CAST(NEW.cached AS INTEGER) <> 0, NULLIF(CAST(NEW.upstream AS TEXT), ''),"
	" CAST(NEW.name AS TEXT), NULLIF(CAST(NEW.matched AS TEXT), ''),"
	" NULLIF(CAST(NEW.source AS TEXT), ''), NULLIF(CAST(NEW.answer AS TEXT), ''))"
	"));"
	" END;",

	/* 4: the client id of DoH/DoT queries, a 15th value of each record (NULL when none);
	 * older records keep 14 values, which the view reads as a NULL client_id. Only the view
	 * and its trigger change: no block is rewritten. */
	"DROP TRIGGER queries_insert;"
	"DROP VIEW queries;"
	"CREATE VIEW queries(id, ts, duration_us, client, proto, qtype, rcode, action, reason,"
	" cached, upstream, name, matched, source, answer, client_id) AS"
	" SELECT b.id * 65536 + r.key, r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3,"
	" r.value ->> 4, r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8, r.value ->> 9,"
	" r.value ->> 10, r.value ->> 11, r.value ->> 12, r.value ->> 13, r.value ->> 14"
	" FROM log_blocks AS b, json_each(b.records) AS r WHERE json_valid(b.records);"
	QUERIES_INSERT_TRIGGER_V4,

	/* 5: queries by protocol, one column per NX_QLOG_PROTOS entry in agg_minute, so the
	 * statistics read them from the same minute rows as the other counters (one upsert per
	 * minute and transaction, as before). Minutes written before this version cannot be split
	 * by protocol (the log may be gone or never kept, privacy 3): they read as 0 in each. */
	"ALTER TABLE agg_minute ADD COLUMN udp INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE agg_minute ADD COLUMN tcp INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE agg_minute ADD COLUMN dot INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE agg_minute ADD COLUMN doh INTEGER NOT NULL DEFAULT 0;",

	/* 6: what the web admin reads without scanning a day (agg.c, reader.c). agg_roll is
	 * agg_top summed over every minute >= agg_roll_lo.lo, one row per (kind, key), kept by the
	 * writer in the transactions that write agg_top (it adds what it upserts there and
	 * subtracts the minute that falls out of the last 24 h), so a top-N over "the last 24 h"
	 * reads the first rows of agg_roll_n and corrects a few edge minutes from agg_top instead
	 * of summing 1440 minutes of keys. No agg_roll_lo row: not built yet (the writer builds it
	 * at its next aggregate write; readers sum agg_top meanwhile). agg_names holds each
	 * minute's distinct query names ("name\n" each), written when the minute's keys leave the
	 * writer's table, so a name filter skips the minutes whose names lack the text without
	 * reading their blocks; a minute is trusted only when complete: `open` = its keys are
	 * still in the writer's table (set when they enter it), `folded` = some name was not
	 * kept (over NX_QLOG_AGG_KEYS_MAX, or privacy >= 1). */
	"CREATE TABLE agg_roll ("
	" kind INTEGER NOT NULL,"
	" key TEXT NOT NULL,"
	" n INTEGER NOT NULL,"
	" PRIMARY KEY (kind, key)) WITHOUT ROWID;"
	"CREATE INDEX agg_roll_n ON agg_roll(kind, n);"
	"CREATE TABLE agg_roll_lo (id INTEGER PRIMARY KEY CHECK (id = 0), lo INTEGER NOT NULL);"
	"CREATE TABLE agg_names ("
	" minute INTEGER PRIMARY KEY,"
	" folded INTEGER NOT NULL,"
	" open INTEGER NOT NULL,"
	" names TEXT NOT NULL);",

	/* 7: blocks written from now on are a JSON object (block.c): {"t": the block's minute in
	 * ms, "s": its distinct strings with s[0] = null, "r": its records as 15 numbers, ts - t
	 * and the text columns as indexes into s}, ~60% fewer bytes than the array of arrays for
	 * a household (issue 16: every byte is written twice, WAL then database). Older blocks
	 * stay as they are: the view reads both (json_type tells them apart). No block is
	 * rewritten; the trigger is migration 4's (it still inserts one-record arrays). */
	"DROP TRIGGER queries_insert;"
	"DROP VIEW queries;"
	"CREATE VIEW queries(id, ts, duration_us, client, proto, qtype, rcode, action, reason,"
	" cached, upstream, name, matched, source, answer, client_id) AS"
	" SELECT b.id * 65536 + r.key, r.value ->> 0, r.value ->> 1, r.value ->> 2, r.value ->> 3,"
	" r.value ->> 4, r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8, r.value ->> 9,"
	" r.value ->> 10, r.value ->> 11, r.value ->> 12, r.value ->> 13, r.value ->> 14"
	" FROM log_blocks AS b, json_each(b.records) AS r"
	" WHERE json_valid(b.records) AND json_type(b.records) = 'array'"
	" UNION ALL"
	" SELECT b.id * 65536 + r.key, (b.records ->> '$.t') + (r.value ->> 0), r.value ->> 1,"
	" b.records ->> ('$.s[' || (r.value ->> 2) || ']'), r.value ->> 3, r.value ->> 4,"
	" r.value ->> 5, r.value ->> 6, r.value ->> 7, r.value ->> 8,"
	" b.records ->> ('$.s[' || (r.value ->> 9) || ']'),"
	" b.records ->> ('$.s[' || (r.value ->> 10) || ']'),"
	" b.records ->> ('$.s[' || (r.value ->> 11) || ']'),"
	" b.records ->> ('$.s[' || (r.value ->> 12) || ']'),"
	" b.records ->> ('$.s[' || (r.value ->> 13) || ']'),"
	" b.records ->> ('$.s[' || (r.value ->> 14) || ']')"
	" FROM log_blocks AS b, json_each(b.records, '$.r') AS r"
	" WHERE json_valid(b.records) AND json_type(b.records) = 'object';"
	QUERIES_INSERT_TRIGGER_V4
	/* and the aggregates' watermark: every block up to agg_mark.block is counted in the
	 * aggregates; the writer counts the later ones from their records (agg.c catch_up: at
	 * low rates it stores blocks only and counts them every NX_QLOG_AGG_DEFER_MS, and after
	 * a crash at open). The blocks that exist now are counted. */
	"CREATE TABLE agg_mark (id INTEGER PRIMARY KEY CHECK (id = 0), block INTEGER NOT NULL);"
	"INSERT INTO agg_mark(id, block) SELECT 0, COALESCE(MAX(id), 0) FROM log_blocks;",
	/* 8: log_blocks without AUTOINCREMENT (issue 16: its sqlite_sequence row was one more
	 * page in every commit, ~14 B a query at 5 q/s). The table's pages are the same either
	 * way, so only the schema text changes (writable_schema, as SQLite's "other ALTER
	 * TABLE" procedure does it; no block is copied); the CREATE/DROP bumps the schema
	 * cookie for other connections. Ids stay monotonic without it: the writer inserts
	 * MAX(MAX(id), agg_mark.block) + 1 (writer.c insert_block), and retention deletes the
	 * oldest blocks, so MAX(id) only falls when every block is gone, and then the mark holds
	 * the last one counted. The sequence's own high water is kept in the mark when nothing
	 * after the mark exists (everything stored is counted), else every id it passed is
	 * still a block's, and the next id is above them anyway. */
	"UPDATE agg_mark SET block = (SELECT seq FROM sqlite_sequence WHERE name = 'log_blocks')"
	" WHERE block < (SELECT seq FROM sqlite_sequence WHERE name = 'log_blocks')"
	" AND COALESCE((SELECT MAX(id) FROM log_blocks), 0) <= block;"
	"DELETE FROM sqlite_sequence WHERE name = 'log_blocks';"
	"PRAGMA writable_schema = ON;"
	"UPDATE sqlite_schema SET sql = replace(sql, 'id INTEGER PRIMARY KEY AUTOINCREMENT,',"
	" 'id INTEGER PRIMARY KEY,') WHERE type = 'table' AND name = 'log_blocks';"
	"PRAGMA writable_schema = RESET;"
	"CREATE TABLE qlog_migration_8 (x);"
	"DROP TABLE qlog_migration_8;",
};
/* Migration 5 names the protocols' columns: a new protocol needs a migration adding its own. */
static_assert(NX_QLOG_PROTO__COUNT == 4, "a new NX_QLOG_PROTOS entry needs an agg_minute column");
static_assert(NX_ARRAY_LEN(migrations) == NX_QLOG_SCHEMA_VERSION, "one migration per version");

/* WAL file kept at most this size after a checkpoint (bytes): bounds the disk use of -wal. */
#define WAL_SIZE_LIMIT (4 * 1024 * 1024)
/* Reader: wait for the writer's checkpoint locks at most this long per statement. */
#define READER_BUSY_TIMEOUT_MS 1000

enum nx_qlog_errkind nx_qlog_errkind(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_FULL:
		return ERR_full;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return ERR_readonly;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return ERR_busy;
	case SQLITE_IOERR:
		return ERR_ioerr;
	case SQLITE_CANTOPEN:
		return ERR_cantopen;
	default:
		return ERR_other;
	}
}

static _Atomic int64_t g_sqlite_charged;

void nx_qlog_sqlite_sync(void)
{
	int64_t now = sqlite3_memory_used();
	int64_t prev = atomic_exchange_explicit(&g_sqlite_charged, now, memory_order_relaxed);
	if (now != prev) {
		nx_ledger_charge(NX_OWNER_sqlite, now - prev, 0);
	}
}

void nx_qlog_sqlite_memory(int64_t *used, int64_t *highwater)
{
	nx_qlog_sqlite_sync();
	if (used) {
		*used = sqlite3_memory_used();
	}
	if (highwater) {
		*highwater = sqlite3_memory_highwater(0);
	}
}

static int read_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK) {
		return rc;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

static int exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static int migrate_steps(sqlite3 *db, int from, int target);

int nx_qlog_db_migrate_conn(sqlite3 *db, int target)
{
	int64_t v = 0;
	int rc = read_int(db, "PRAGMA user_version", &v);
	if (rc != SQLITE_OK) {
		return rc;
	}
	if (v > NX_QLOG_SCHEMA_VERSION || v > target) {
		nx_log(NX_LOG_ERR, "querylog",
		       "database schema version %lld is newer than the target version %d",
		       (long long)v, target);
		return SQLITE_FORMAT;
	}
	/* migration 8 edits sqlite_schema (writable_schema), which a library built with
	 * SQLITE_DBCONFIG_DEFENSIVE on by default refuses: off for the migrations alone, on this
	 * connection, which runs only their fixed SQL */
	int defensive = 0;
	sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, -1, &defensive);
	if (defensive && v < target) {
		sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 0, (int *)NULL);
	}
	rc = migrate_steps(db, (int)v, target);
	if (defensive && v < target) {
		sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
	}
	return rc;
}

static int migrate_steps(sqlite3 *db, int from, int target)
{
	int rc = SQLITE_OK;
	for (int i = from; i < target; i++) {
		rc = exec(db, "BEGIN IMMEDIATE");
		if (rc != SQLITE_OK) {
			return rc;
		}
		char bump[48];
		snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", i + 1);
		rc = exec(db, migrations[i]);
		if (rc == SQLITE_OK) {
			rc = exec(db, bump);
		}
		if (rc == SQLITE_OK) {
			rc = exec(db, "COMMIT");
		}
		if (rc != SQLITE_OK) {
			nx_log(NX_LOG_ERR, "querylog", "migration %d failed: %s", i + 1,
			       sqlite3_errmsg(db));
			exec(db, "ROLLBACK");
			return rc;
		}
		nx_log(NX_LOG_INFO, "querylog", "database schema migrated to version %d", i + 1);
	}
	return SQLITE_OK;
}

static unsigned cache_kib_of(sqlite3 *db, int64_t v)
{
	if (v < 0) {
		return (unsigned)(-v);
	}
	int64_t page = 4096;
	read_int(db, "PRAGMA page_size", &page);
	return (unsigned)(v * page / 1024);
}

static int role_pragmas(sqlite3 *db, enum nx_qlog_role role, unsigned cache_kib,
			unsigned *readback)
{
	char sql[64];
	int rc;
	if (role == ROLE_WRITER) {
		/* journal_mode answers a row: read it to run it */
		sqlite3_stmt *s = NULL;
		rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &s, NULL);
		if (rc == SQLITE_OK) {
			rc = sqlite3_step(s);
			rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
			sqlite3_finalize(s);
		}
		if (rc == SQLITE_OK) {
			rc = exec(db, "PRAGMA synchronous = NORMAL");
		}
		if (rc == SQLITE_OK) {
			snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit = %d", WAL_SIZE_LIMIT);
			int64_t ignored;
			rc = read_int(db, sql, &ignored);
		}
	} else {
		rc = exec(db, "PRAGMA query_only = 1");
	}
	if (rc != SQLITE_OK) {
		return rc;
	}
	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%u", cache_kib);
	rc = exec(db, sql);
	int64_t v = 0;
	if (rc == SQLITE_OK) {
		rc = read_int(db, "PRAGMA cache_size", &v);
	}
	if (rc != SQLITE_OK) {
		return rc;
	}
	*readback = cache_kib_of(db, v);
	nx_log(*readback == cache_kib ? NX_LOG_DEBUG : NX_LOG_WARN, "querylog",
	       "%s connection cache_size %u KiB (asked %u KiB)",
	       role == ROLE_WRITER ? "writer" : "reader", *readback, cache_kib);
	return SQLITE_OK;
}

int nx_qlog_db_open(const char *path, enum nx_qlog_role role, unsigned cache_kib, sqlite3 **out,
		    unsigned *cache_kib_readback)
{
	*out = NULL;
	int flags = SQLITE_OPEN_NOMUTEX |
		    (role == ROLE_WRITER ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
					 : SQLITE_OPEN_READWRITE);
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, flags, NULL);
	if (rc != SQLITE_OK) {
		/* a failed open may still return a handle: release it, it was never charged */
		/* callers count and log (the writer at a bounded rate) */
		nx_log(NX_LOG_DEBUG, "querylog", "%s: open: %s", path,
		       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		nx_qlog_sqlite_sync();
		return rc;
	}
	nx_ledger_charge(NX_OWNER_sqlite, 0, 1);
	sqlite3_extended_result_codes(db, 1);
	sqlite3_busy_timeout(db, role == ROLE_WRITER ? NX_QLOG_BUSY_TIMEOUT_MS
						     : READER_BUSY_TIMEOUT_MS);
	if (role == ROLE_WRITER) {
		/* migrations first: they run with SQLite's own defaults */
		rc = nx_qlog_db_migrate_conn(db, NX_QLOG_SCHEMA_VERSION);
	} else {
		int64_t v = -1;
		rc = read_int(db, "PRAGMA user_version", &v);
		if (rc == SQLITE_OK && v != NX_QLOG_SCHEMA_VERSION) {
			nx_log(NX_LOG_ERR, "querylog", "%s: schema version %lld, want %d", path,
			       (long long)v, NX_QLOG_SCHEMA_VERSION);
			rc = SQLITE_FORMAT;
		}
	}
	if (rc == SQLITE_OK) {
		unsigned rb = 0;
		rc = role_pragmas(db, role, cache_kib, &rb);
		if (cache_kib_readback) {
			*cache_kib_readback = rb;
		}
	}
	if (rc != SQLITE_OK) {
		nx_log(NX_LOG_DEBUG, "querylog", "%s: open: %s", path, sqlite3_errmsg(db));
		nx_qlog_db_close(db);
		return rc;
	}
	*out = db;
	nx_qlog_sqlite_sync();
	return SQLITE_OK;
}

void nx_qlog_db_close(sqlite3 *db)
{
	if (!db) {
		return;
	}
	sqlite3_close_v2(db);
	nx_ledger_charge(NX_OWNER_sqlite, 0, -1);
	nx_qlog_sqlite_sync();
}

int nx_qlog_db_migrate(const char *path, int target)
{
	if (target == -1) {
		target = NX_QLOG_SCHEMA_VERSION;
	}
	if (target < 1 || target > NX_QLOG_SCHEMA_VERSION) {
		return -EINVAL;
	}
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_close(db);
		return -EIO;
	}
	sqlite3_busy_timeout(db, READER_BUSY_TIMEOUT_MS);
	rc = nx_qlog_db_migrate_conn(db, target);
	sqlite3_close(db);
	nx_qlog_sqlite_sync();
	switch (rc & 0xff) {
	case SQLITE_OK:
		return 0;
	case SQLITE_FORMAT:
		return NX_EFORMAT;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return NX_ECORRUPT;
	default:
		return -EIO;
	}
}

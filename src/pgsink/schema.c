/*
 * The PostgreSQL schema: numbered migrations recorded in nxdns_schema_version, day partitions
 * and retention. Every statement runs on the writer thread's one connection.
 *
 * log_entries has Blocky's columns with Blocky's index names (gorm's idx_<table>_<column>),
 * partitioned by range on request_ts, one partition per UTC day (log_entries_pYYYYMMDD) and a
 * DEFAULT partition for a record outside them (a clock far off): retention drops a whole day
 * with DROP TABLE instead of deleting rows, and Blocky's dashboards' `WHERE request_ts ...`
 * prune to the days they read. Blocky adds an `id bigserial` primary key; a partitioned table's
 * primary key must contain the partition key and no dashboard reads id, so there is none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pgsink/impl.h"

/* pg_advisory_xact_lock key: instances sharing a database migrate and partition one at a time */
#define LOCK_KEY "7894748316"
#define DAY_MS (86400 * (int64_t)1000)

/* Migration i takes the schema from version i to i + 1. Append only: a released one never
 * changes (a database made by it has run it already). */
static const char *const migrations[NX_PGSINK_SCHEMA_VERSION] = {
    /* 0 -> 1: Blocky's log_entries, partitioned by day */
    "CREATE TABLE log_entries ("
    " request_ts timestamptz NOT NULL,"
    " client_ip text, client_name text, duration_ms bigint, reason text, response_type text,"
    " question_type text, question_name text, effective_tldp text, answer text,"
    " response_code text, hostname text"
    ") PARTITION BY RANGE (request_ts);"
    "CREATE INDEX idx_log_entries_request_ts ON log_entries (request_ts);"
    "CREATE INDEX idx_log_entries_client_name ON log_entries (client_name);"
    "CREATE INDEX idx_log_entries_response_type ON log_entries (response_type);"
    "CREATE TABLE log_entries_default PARTITION OF log_entries DEFAULT;",
    /* 1 -> 2: nxdns's own columns; the instance filter of the dashboard */
    "ALTER TABLE log_entries ADD COLUMN matched_rule text, ADD COLUMN source_list text,"
    " ADD COLUMN protocol text, ADD COLUMN upstream text, ADD COLUMN nxdns_reason text;"
    "CREATE INDEX idx_log_entries_hostname ON log_entries (hostname);",
};

static void copy_err(const char *msg, char *err, size_t cap)
{
	snprintf(err, cap, "%s", msg && msg[0] ? msg : "unknown error");
	size_t n = strlen(err);
	while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' ')) {
		err[--n] = 0; /* libpq's messages end in a newline */
	}
}

int nx_pg_exec(const struct nx_pq *pq, PGconn *c, const char *sql, char *err, size_t cap)
{
	PGresult *r = pq->PQexec(c, sql);
	ExecStatusType st = r ? pq->PQresultStatus(r) : PGRES_FATAL_ERROR;
	int rc = 0;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		copy_err(r ? pq->PQresultErrorMessage(r) : pq->PQerrorMessage(c), err, cap);
		rc = -1;
	}
	pq->PQclear(r);
	return rc;
}

/* One integer from a one-row query; -1 on error. */
static long long query_int(const struct nx_pq *pq, PGconn *c, const char *sql, char *err,
			   size_t cap)
{
	PGresult *r = pq->PQexec(c, sql);
	long long v = -1;
	if (r && pq->PQresultStatus(r) == PGRES_TUPLES_OK && pq->PQntuples(r) == 1) {
		v = strtoll(pq->PQgetvalue(r, 0, 0), NULL, 10);
	} else {
		copy_err(r ? pq->PQresultErrorMessage(r) : pq->PQerrorMessage(c), err, cap);
	}
	pq->PQclear(r);
	return v;
}

static void rollback(const struct nx_pq *pq, PGconn *c)
{
	char ignored[8];
	nx_pg_exec(pq, c, "ROLLBACK", ignored, sizeof(ignored));
}

int nx_pg_migrate(const struct nx_pq *pq, PGconn *c, char *err, size_t cap)
{
	if (nx_pg_exec(pq, c,
		       "BEGIN; SELECT pg_advisory_xact_lock(" LOCK_KEY ");"
		       "CREATE TABLE IF NOT EXISTS nxdns_schema_version (version integer NOT NULL)",
		       err, cap) < 0) {
		rollback(pq, c);
		return -1;
	}
	long long v = query_int(pq, c, "SELECT COALESCE(MAX(version), 0) FROM nxdns_schema_version",
				err, cap);
	if (v < 0) {
		rollback(pq, c);
		return -1;
	}
	if (v > NX_PGSINK_SCHEMA_VERSION) {
		snprintf(err, cap,
			 "the database's schema is version %lld, newer than this nxdns (%d): "
			 "upgrade nxdns or use another database",
			 v, NX_PGSINK_SCHEMA_VERSION);
		rollback(pq, c);
		return -1;
	}
	if (v == 0 && query_int(pq, c,
				"SELECT count(*) FROM pg_class WHERE relname = 'log_entries'"
				" AND pg_table_is_visible(oid)",
				err, cap) != 0) {
		snprintf(err, cap,
			 "a table log_entries exists that nxdns did not make (Blocky's?): give "
			 "nxdns its own database or schema (dsn options=-csearch_path=...)");
		rollback(pq, c);
		return -1;
	}
	for (long long i = v; i < NX_PGSINK_SCHEMA_VERSION; i++) {
		char sql[128];
		snprintf(sql, sizeof(sql),
			 "DELETE FROM nxdns_schema_version;"
			 "INSERT INTO nxdns_schema_version VALUES (%lld)",
			 i + 1);
		char e[256];
		if (nx_pg_exec(pq, c, migrations[i], e, sizeof(e)) < 0 ||
		    nx_pg_exec(pq, c, sql, e, sizeof(e)) < 0) {
			snprintf(err, cap, "migration to schema %lld: %s", i + 1, e);
			rollback(pq, c);
			return -1;
		}
	}
	return nx_pg_exec(pq, c, "COMMIT", err, cap);
}

static void day_text(int64_t ms, char *out, size_t cap, bool compact)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(out, cap, compact ? "%Y%m%d" : "%Y-%m-%d 00:00:00+00", &tm);
}

int nx_pg_partitions(const struct nx_pq *pq, PGconn *c, int64_t now_ms, unsigned retention_days,
		     char *err, size_t cap)
{
	if (nx_pg_exec(pq, c, "BEGIN; SELECT pg_advisory_xact_lock(" LOCK_KEY ")", err, cap) < 0) {
		rollback(pq, c);
		return -1;
	}
	int64_t today = now_ms - now_ms % DAY_MS;
	for (int d = -1; d <= 2; d++) {
		char name[16], from[32], to[32], sql[256];
		day_text(today + d * DAY_MS, name, sizeof(name), true);
		day_text(today + d * DAY_MS, from, sizeof(from), false);
		day_text(today + (d + 1) * DAY_MS, to, sizeof(to), false);
		snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM pg_class WHERE relname = "
			 "'log_entries_p%s' AND pg_table_is_visible(oid)",
			 name);
		long long have = query_int(pq, c, sql, err, cap);
		if (have < 0) {
			rollback(pq, c);
			return -1;
		}
		if (have > 0) {
			continue;
		}
		/* Rows of that day may sit in the default partition (a clock that jumped, a
		 * database that was away at midnight): PostgreSQL refuses a new partition over
		 * them, so they move into it before it is attached. */
		char big[1024];
		snprintf(big, sizeof(big),
			 "CREATE TABLE log_entries_p%s (LIKE log_entries INCLUDING DEFAULTS);"
			 "WITH moved AS (DELETE FROM log_entries_default WHERE request_ts >= '%s' "
			 "AND request_ts < '%s' RETURNING *) "
			 "INSERT INTO log_entries_p%s SELECT * FROM moved;"
			 "ALTER TABLE log_entries ATTACH PARTITION log_entries_p%s "
			 "FOR VALUES FROM ('%s') TO ('%s')",
			 name, from, to, name, name, from, to);
		if (nx_pg_exec(pq, c, big, err, cap) < 0) {
			rollback(pq, c);
			return -1;
		}
	}
	int dropped = 0;
	if (retention_days > 0) {
		/* a partition of day D holds [D, D + 1): it goes once D + 1 <= cutoff */
		int64_t cutoff = today - (int64_t)retention_days * DAY_MS;
		char cut[16], cutts[32], sql[256];
		day_text(cutoff, cut, sizeof(cut), true);
		day_text(cutoff, cutts, sizeof(cutts), false);
		snprintf(
		    sql, sizeof(sql),
		    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
		    "WHERE i.inhparent = 'log_entries'::regclass "
		    "AND c.relname ~ '^log_entries_p[0-9]{8}$' "
		    "AND substr(c.relname, 14) < '%s' ORDER BY 1",
		    cut);
		PGresult *r = pq->PQexec(c, sql);
		if (!r || pq->PQresultStatus(r) != PGRES_TUPLES_OK) {
			copy_err(r ? pq->PQresultErrorMessage(r) : pq->PQerrorMessage(c), err, cap);
			pq->PQclear(r);
			rollback(pq, c);
			return -1;
		}
		for (int i = 0; i < pq->PQntuples(r); i++) {
			snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS \"%s\"",
				 pq->PQgetvalue(r, i, 0));
			if (nx_pg_exec(pq, c, sql, err, cap) < 0) {
				pq->PQclear(r);
				rollback(pq, c);
				return -1;
			}
			dropped++;
		}
		pq->PQclear(r);
		snprintf(sql, sizeof(sql),
			 "DELETE FROM log_entries_default WHERE request_ts < '%s'", cutts);
		if (nx_pg_exec(pq, c, sql, err, cap) < 0) {
			rollback(pq, c);
			return -1;
		}
	}
	return nx_pg_exec(pq, c, "COMMIT", err, cap) < 0 ? -1 : dropped;
}

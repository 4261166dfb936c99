/*
 * PostgreSQL query-log sink: every answered query becomes a row of `log_entries` in a
 * PostgreSQL database, in the columns and vocabulary of Blocky's query log (so dashboards made
 * for Blocky read it) plus nxdns's own columns. Several instances may share one database: each
 * row names its instance in `hostname`.
 *
 * libpq is not linked: nx_pgsink_new() dlopen()s "libpq.so.5" and resolves the few functions
 * it calls (pq.c), so a box that never configures the sink maps none of libpq's libraries and
 * a box without libpq5 installed still runs nxdns (the sink then logs why and stays off).
 *
 * Queue: one fixed ring of query-log records (struct nx_qlog_rec, 744 B) per producer
 * (worker), so workers never contend with each other. A push copies one record under its
 * ring's mutex: no allocation, no I/O, no formatting. A full ring overwrites its OLDEST record
 * and counts it (nxdns_pgsink_dropped_total{reason="queue_full"}): the DNS path never waits on
 * the database. A push signals the writer only when its ring reaches half full; otherwise the
 * writer wakes every flush interval.
 *
 * Writer: one thread ("nx-pgsink") owns the one connection. It creates and migrates the
 * schema (table nxdns_schema_version, migrations in schema.c) under an advisory lock, keeps a
 * partition per UTC day (yesterday to two days ahead) and drops the partitions older than the
 * retention. It formats up to batch_size records as COPY text and sends them with one
 * `COPY log_entries (...) FROM STDIN`. A batch that fails on a lost connection is kept and sent
 * again after the reconnect (backoff NX_PGSINK_BACKOFF_MIN_MS .. _MAX_MS); one the server
 * refuses on a live connection is dropped and counted (reason="rejected"). While disconnected
 * the rings are left alone: they keep the newest records for when the database returns.
 *
 * Threading: nx_pgsink_push() from producer i only (one thread per ring index);
 * nx_pgsink_set_privacy() from any thread; new/start/stop/free from one control thread.
 *
 * Memory: the rings, the drain scratch and the COPY buffer are allocated in nx_pgsink_new and
 * charged to NX_OWNER_pgsink_queue; nothing is allocated per record. libpq's own connection
 * state and result buffers (malloc'ed by the library: ~40 KiB for a connection, results of a
 * few rows) are not in the ledger.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nx_qlog_rec;

#define NX_PGSINK_SONAME "libpq.so.5"
#define NX_PGSINK_BACKOFF_MIN_MS 250
#define NX_PGSINK_BACKOFF_MAX_MS 10000	 /* a database back is picked up within 10 s */
#define NX_PGSINK_CONNECT_TIMEOUT_S 5	 /* libpq connect_timeout */
#define NX_PGSINK_TCP_TIMEOUT_MS 10000	 /* tcp_user_timeout: a vanished peer costs a reconnect */
#define NX_PGSINK_MAINT_MS (3600 * 1000) /* partitions and retention: hourly and at a new day */
/* The longest COPY line one record makes: every text field escaped at worst (x2) + the rest. */
#define NX_PGSINK_ROW_MAX 4096
/* COPY buffer bytes per record of batch_size: a typical row is 150-250 B. A batch ends at
 * batch_size records or when fewer than NX_PGSINK_ROW_MAX bytes are left. */
#define NX_PGSINK_ROW_AVG 256
#define NX_PGSINK_DSN_MAX 1024
#define NX_PGSINK_HOST_MAX 64
#define NX_PGSINK_SCHEMA_VERSION 2 /* migrations in schema.c */

struct nx_pgsink_params {
	const char *dsn;	 /* libpq connection string or URI; copied */
	const char *hostname;	 /* the `hostname` column; copied */
	const char *soname;	 /* library to dlopen; NULL = NX_PGSINK_SONAME (tests) */
	unsigned producers;	 /* rings (workers), >= 1 */
	unsigned queue_size;	 /* records over all rings, >= producers */
	unsigned batch_size;	 /* records per COPY, >= 1 */
	unsigned flush_ms;	 /* longest a record waits in a ring before the writer runs */
	unsigned retention_days; /* day partitions kept; 0 = never dropped */
	unsigned privacy;	 /* logging.privacy, 0..3 (see nx_pgsink_row) */
	/* upstream stats index -> name (writer thread); NULL: the column stays empty */
	int (*upstream_name)(void *ud, int idx, char *buf, size_t cap);
	void *ud;
};

struct nx_pgsink;

void nx_pgsink_params_default(struct nx_pgsink_params *p);

/* Load libpq and allocate the rings and buffers. 0, -EINVAL (bad params), -ENOMEM,
 * -ENOENT (libpq cannot be loaded or lacks a function: *why says which). Nothing connects
 * until nx_pgsink_start. */
int nx_pgsink_new(const struct nx_pgsink_params *p, struct nx_pgsink **out, char *why,
		  size_t why_cap);
/* Start the writer thread (it connects in the background). 0 or -errno. */
int nx_pgsink_start(struct nx_pgsink *s);
/* Stop the writer: records still queued are sent when connected (one attempt), the rest are
 * counted as dropped (reason="shutdown"). Idempotent. */
void nx_pgsink_stop(struct nx_pgsink *s);
/* Stop if running and release; NULL is a no-op. libpq stays mapped until the process exits
 * (dlclose of a library that loaded OpenSSL is not safe). */
void nx_pgsink_free(struct nx_pgsink *s);

/* Queue one record from producer `idx` (< producers). Never blocks on I/O; overwrites the
 * oldest when full (counted). */
void nx_pgsink_push(struct nx_pgsink *s, unsigned idx, const struct nx_qlog_rec *rec);
void nx_pgsink_set_privacy(struct nx_pgsink *s, unsigned privacy);

/* ---- the row (row.c), for the writer and the tests ---- */

struct nx_pgsink_row_ctx {
	const char *hostname; /* the instance */
	const char *upstream; /* the record's upstream name, or "" */
	unsigned privacy;     /* 1: names "hidden"; 2: and clients "hidden"; 3: no row */
};
/*
 * One COPY text line (tab-separated, '\n'-terminated, \N for NULL) of a record, in the column
 * order of NX_PGSINK_COLUMNS. Blocky's vocabulary: reason "BLOCKED (source)", "CACHED",
 * "RESOLVED (upstream)", "CUSTOM DNS", "SPECIAL"; response_type BLOCKED, CACHED, RESOLVED,
 * CUSTOMDNS, SPECIAL; response_code as miekg/dns names it (NOERROR, NXDOMAIN, ...); answer
 * "A (192.0.2.1)". NUL-terminated. Returns the line's length (without the NUL), 0 when
 * privacy keeps no row, NX_ETRUNC when cap is too small (NX_PGSINK_ROW_MAX always suffices).
 */
int nx_pgsink_row(const struct nx_qlog_rec *r, const struct nx_pgsink_row_ctx *ctx, char *out,
		  size_t cap);
/* The registrable domain of a lower-case name (Blocky's effective_tldp), into out: the last
 * two labels, three when the second-level label is a common public second level under a
 * two-letter country code (co.uk, com.au, ...). An approximation of the Public Suffix List
 * (README: why). "" for a single label. */
void nx_pgsink_etld1(const char *name, char *out, size_t cap);

/* The columns COPY names, in nx_pgsink_row's order. */
#define NX_PGSINK_COLUMNS                                                                          \
	"request_ts, client_ip, client_name, duration_ms, reason, response_type, question_type, "  \
	"question_name, effective_tldp, answer, response_code, hostname, matched_rule, "           \
	"source_list, protocol, upstream, nxdns_reason"

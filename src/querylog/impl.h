/*
 * Query-log internals shared by ring.c, writer.c, db.c, agg.c and reader.c. Never included
 * from outside src/querylog.
 */
#pragma once

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "querylog/querylog.h"

/* ---- rings (ring.c) ---- */

/* One producer's ring. Padded so two rings' hot fields never share a cache line. */
struct nx_qlog_ring {
	union {
		struct {
			pthread_mutex_t mu;
			struct nx_qlog_rec *slots; /* borrowed: a slice of nx_qlog.slots */
			uint32_t head;		   /* oldest record */
			uint32_t count;		   /* records held, <= cap */
			uint32_t cap;
			uint32_t half;		   /* count that wakes the writer early */
			uint64_t pushed;	   /* under mu */
			uint64_t dropped;	   /* under mu: oldest records overwritten */
		};
		char pad_[128];
	};
};
static_assert(sizeof(struct nx_qlog_ring) == 128, "ring header padding");

/* Wake reasons (nx_qlog.wake). */
enum {
	WAKE_NONEMPTY = 1u << 0, /* a ring turned non-empty: write within flush_ms */
	WAKE_URGENT = 1u << 1,	 /* a ring reached half full: write now */
};

/* ---- per-batch aggregation (agg.c) ---- */

#define NX_QLOG_AGG_MINUTES 8 /* distinct minutes combined before an upsert round */

enum nx_qlog_agg_kind { AGG_NAME = 0, AGG_BLOCKED = 1, AGG_CLIENT = 2 };

struct nx_qlog_agg_minute {
	int64_t minute; /* ts_ms / 60000 */
	uint32_t queries, blocked, cached, forwarded, local;
};

struct nx_qlog_agg_key {
	int64_t minute;
	uint32_t hash;
	uint32_t n;   /* 0 = free slot */
	uint16_t rec; /* index of the first record with this key in the batch */
	uint8_t kind; /* enum nx_qlog_agg_kind */
};

/* Write-combining table for one batch: keys point into the batch records. */
struct nx_qlog_agg {
	struct nx_qlog_agg_minute min[NX_QLOG_AGG_MINUTES];
	unsigned n_min;
	struct nx_qlog_agg_key *keys; /* owned (querylog_queue), cap slots, power of two */
	unsigned cap;
	unsigned used;
};

/* ---- database (db.c) ---- */

enum nx_qlog_errkind {
#define NX_QLOG_ERRKIND_ENUM(k) ERR_##k,
	NX_QLOG_ERROR_KINDS(NX_QLOG_ERRKIND_ENUM)
#undef NX_QLOG_ERRKIND_ENUM
	ERR__COUNT
};

/* Connection roles: each sets its own cache_size after migrations. */
enum nx_qlog_role { ROLE_WRITER, ROLE_READER };

/* Map a SQLite result code to our error kind. */
enum nx_qlog_errkind nx_qlog_errkind(int sqlite_rc);

/*
 * Open path (creating it for the writer), migrate (writer only; a reader checks the version),
 * then apply the role pragmas and read cache_size back into *cache_kib. Returns a SQLite code
 * (SQLITE_OK), or SQLITE_FORMAT (newer schema / reader version mismatch), SQLITE_NOTADB.
 * *out is NULL on failure. The connection count in the ledger follows open/close.
 */
int nx_qlog_db_open(const char *path, enum nx_qlog_role role, unsigned cache_kib,
		    sqlite3 **out, unsigned *cache_kib_readback);
void nx_qlog_db_close(sqlite3 *db);
/* Apply migrations up to target on an open connection. SQLite code. */
int nx_qlog_db_migrate_conn(sqlite3 *db, int target);

/* ---- the query log ---- */

/* Prepared statements of the writer connection. */
struct nx_qlog_stmts {
	sqlite3_stmt *insert;
	sqlite3_stmt *minute_upsert;
	sqlite3_stmt *top_upsert;
	sqlite3_stmt *begin;
	sqlite3_stmt *commit;
	sqlite3_stmt *rollback;
	sqlite3_stmt *ret_queries;
	sqlite3_stmt *ret_minute;
	sqlite3_stmt *ret_top;
};

struct nx_qlog {
	/* immutable after new */
	char *path; /* owned (querylog_queue) */
	size_t path_bytes;
	unsigned n_rings;
	uint32_t ring_cap;
	struct nx_qlog_ring *rings;    /* owned, n_rings */
	struct nx_qlog_rec *slots;     /* owned, n_rings * ring_cap */
	struct nx_qlog_rec *batch;     /* owned, batch_max: the writer's drained copies */
	unsigned batch_max;
	unsigned writer_cache_kib;
	unsigned flush_ms;
	nx_qlog_now_cb now_ms;
	void *now_ud;
	nx_qlog_upstream_name_cb upstream_name;
	void *upstream_ud;

	/* writer wake-up and requests, under wmu */
	pthread_mutex_t wmu;
	pthread_cond_t wcond;	 /* writer sleeps here (CLOCK_MONOTONIC) */
	pthread_cond_t done;	 /* flush waiters sleep here */
	unsigned wake;		 /* WAKE_* */
	bool sleeping;		 /* writer is in wcond */
	bool stop;
	bool running;		 /* thread started and not joined */
	uint64_t flush_req;	 /* generation asked by nx_qlog_flush */
	uint64_t flush_done;	 /* generation completed by the writer */
	int flush_err;		 /* result of the last completed flush (retention -EIO) */
	bool retention_req;	 /* a flush asked for a full retention run */
	bool retention_now;	 /* settings changed: run retention soon */
	pthread_t thread;

	/* live tap, under tap_mu (held by the writer while it calls the tap) */
	pthread_mutex_t tap_mu;
	nx_qlog_tap_cb tap;
	void *tap_ud;

	/* settings changed at runtime */
	_Atomic unsigned privacy;
	_Atomic unsigned retention_days;

	/* writer-thread state */
	sqlite3 *db; /* NULL while unavailable */
	struct nx_qlog_stmts st;
	bool reopen;		/* close and reopen before the next attempt */
	struct nx_qlog_agg agg;
	size_t agg_bytes;
	unsigned rr;		/* ring to start the next drain at */
	uint64_t last_errlog_ms; /* mono ms of the last logged write error */
	uint64_t errs_unlogged;

	/* stats written by the writer, read anywhere */
	_Atomic uint64_t written, batches, retention_deleted, dropped_unwritten;
	_Atomic uint64_t errors[ERR__COUNT];
	_Atomic uint64_t queue_peak;
	_Atomic uint64_t writer_ok;
	_Atomic uint64_t cache_readback;
};

/* Raise *a to v if larger (several threads may report a high-water). */
static inline void nx_qlog_atomic_max(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								 memory_order_relaxed)) {
	}
}

/* ring.c */
int nx_qlog_rings_init(struct nx_qlog *q, unsigned producers, unsigned buffer_max);
void nx_qlog_rings_deinit(struct nx_qlog *q);
/*
 * Copy up to max records out of the rings into out, round robin from q->rr, in chunks of
 * NX_QLOG_DRAIN_CHUNK per lock hold. Updates queue_peak with the occupancy seen before the
 * pass. *more: records remain after the pass.
 */
size_t nx_qlog_rings_drain(struct nx_qlog *q, struct nx_qlog_rec *out, size_t max, bool *more);
/* Records held now, pushed and dropped totals (locks each ring briefly). */
void nx_qlog_rings_count(struct nx_qlog *q, uint64_t *now, uint64_t *pushed, uint64_t *dropped);

/* agg.c */
int nx_qlog_agg_init(struct nx_qlog_agg *a, unsigned batch_max, size_t *bytes);
void nx_qlog_agg_deinit(struct nx_qlog_agg *a, size_t bytes);
/* Aggregate recs (privacy already applied) and upsert into the open transaction. SQLite code. */
int nx_qlog_agg_write(struct nx_qlog *q, const struct nx_qlog_rec *recs, size_t n,
		      unsigned privacy);

/* writer.c */
void *nx_qlog_writer_main(void *arg);
/* Text of a record's client (inet_ntop), "hidden" for family 0. */
void nx_qlog_client_text(const struct nx_qlog_rec *rec, char *buf, size_t cap);

/* Ledger sync of SQLite memory (db.c). */
void nx_qlog_sqlite_sync(void);

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

/*
 * One producer's ring: a byte ring of packed records (struct nx_qlog_pk + texts, the batch's
 * format), bounded by cap bytes and cap_recs records (logging.query_log_buffer_max over the
 * rings), whichever fills first. A record is never split: one that does not fit before the
 * end goes to the front, and `wrap` marks where the older data ends. Padded so two rings' hot
 * fields never share a cache line.
 */
struct nx_qlog_ring {
	union {
		struct {
			pthread_mutex_t mu;
			uint8_t *buf;	   /* borrowed: a slice of nx_qlog.slots, cap bytes */
			uint32_t cap;	   /* bytes, a multiple of 8 */
			uint32_t cap_recs; /* records held at most */
			uint32_t head;	   /* byte offset of the oldest record */
			uint32_t tail;	   /* byte offset after the newest */
			uint32_t wrap;	   /* 0: data [head, tail); else [head, wrap) + [0, tail) */
			uint32_t count;	   /* records held, <= cap_recs */
			uint32_t bytes;	   /* bytes of the records held (the gap before wrap not) */
			uint32_t half;	   /* count that wakes the writer early */
			uint32_t half_bytes; /* bytes that wake the writer early */
			uint64_t pushed;   /* under mu */
			uint64_t dropped;  /* under mu: oldest records overwritten */
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

/* ---- packed records (ring.c): the rings' and the writer's batch's format ---- */

/*
 * A record as the rings hold it and the writer's batch keeps it between the drain and the
 * commit: the fixed fields, then name, matched, source, answer and client id bytes without
 * NULs, the whole rounded up to 8 bytes. A blocked record's matched name is usually its query
 * name: stored once (PK_MATCHED_NAME).
 */
struct nx_qlog_pk {
	int64_t ts_ms;
	uint32_t duration_us;
	int16_t upstream;
	uint16_t qtype;
	uint8_t client[16];
	uint8_t family, proto, rcode, action, reason, cached;
	uint8_t name_len, matched_len, source_len, answer_len, client_id_len;
};
static_assert(sizeof(struct nx_qlog_pk) == 48, "packed record header");
#define PK_MATCHED_NAME 0xff /* matched_len: same text as the name */
/* Largest packed record: header + 253 + 253 + 63 + 63 + 64, rounded to 8. */
#define PK_MAX ((sizeof(struct nx_qlog_pk) + 2 * (NX_QLOG_NAME_MAX - 1) +                   \
		 (NX_QLOG_SOURCE_MAX - 1) + (NX_QLOG_ANSWER_MAX - 1) +                      \
		 (NX_QLOG_CLIENT_ID_MAX - 1) + 7) & ~(size_t)7)
static_assert(PK_MAX <= NX_QLOG_RING_MIN_BYTES / 2, "a ring takes two worst-case records");
static_assert(PK_MAX <= sizeof(struct nx_qlog_rec), "the drain scratch holds either form");
/* Most a record grows by when privacy rewrites it (writer.c): name "" -> "hidden" (+6),
 * matched, answer and a user rule's source of 1 byte -> "hidden" (+5 each), the rounding. */
#define PK_PRIVACY_GROWTH 32

/* A packed record read back: pointers into the batch, lengths in pk. */
struct nx_qlog_view {
	const struct nx_qlog_pk *pk;
	const char *name, *matched, *source, *answer, *client_id;
	unsigned matched_len; /* resolved PK_MATCHED_NAME */
};

/* ---- log blocks (block.c): the stored form of the log ---- */

/*
 * The log is stored as rows of log_blocks, one per writer transaction and minute: the records
 * as one JSON array of 15-value arrays (the `queries` view's columns in order; blocks written
 * before schema 4 have 14, without the client id), with the block's
 * time range, record and blocked counts and its distinct clients (NULL when more than
 * NX_QLOG_BLOCK_CLIENTS) so that a reader skips blocks without decoding them. One INSERT per
 * ~1000 records instead of one B-tree insert per record and per index.
 * Item ids (API, view) are block id << NX_QLOG_ID_SHIFT | index in the block.
 */
#define NX_QLOG_ID_SHIFT 16
#define NX_QLOG_BLOCK_RECS_MAX 4096	      /* records per block (<= 1 << NX_QLOG_ID_SHIFT) */
#define NX_QLOG_BLOCK_CLIENTS 16	      /* distinct clients listed per block */
#define NX_QLOG_CLIENT_KEY 17		      /* family + 16 address bytes */
#define NX_QLOG_CLIENT_TEXT_MAX 48	      /* INET6_ADDRSTRLEN (46) rounded up */
/* Largest encoded record: numbers, then every text byte escaped to 6 (client, upstream name of
 * nx_qlog.up_cache, name and matched, source and answer), quotes, commas, brackets. */
#define NX_QLOG_JSON_REC_MAX                                                                       \
	(64 + 6 * (NX_QLOG_CLIENT_TEXT_MAX + 64 + 2 * (NX_QLOG_NAME_MAX - 1) +                      \
		   (NX_QLOG_SOURCE_MAX - 1) + (NX_QLOG_ANSWER_MAX - 1) +                            \
		   (NX_QLOG_CLIENT_ID_MAX - 1)) +                                                   \
	 64)
static_assert(NX_QLOG_BLOCK_RECS_MAX <= (1 << NX_QLOG_ID_SHIFT), "block index fits the id");
static_assert(NX_QLOG_BATCH_MAX <= NX_QLOG_BLOCK_RECS_MAX, "a batch fits a block's index");

/* Distinct strings per block (a full table stores the block, block.c). */
#define NX_QLOG_BLOCK_STRS 4096

/* A block being encoded (writer thread); its areas, string offsets and hash live in buf. */
struct nx_qlog_blk {
	char *buf; /* owned (querylog_queue), NX_QLOG_BLOCK_BYTES */
	size_t used;  /* bytes of the records area */
	size_t sused; /* bytes of the strings area */
	unsigned n_str;
	unsigned n, blocked;
	int64_t base; /* the first record's minute, ms: records store ts - base */
	int64_t ts_min, ts_max;
	unsigned n_clients;
	bool many_clients;
	uint8_t client_key[NX_QLOG_BLOCK_CLIENTS][NX_QLOG_CLIENT_KEY];
};

/* One record decoded from a block (pointers into the decoder's scratch; NULL = JSON null). */
struct nx_qlog_item {
	int64_t ts;
	int64_t duration_us;
	const char *client;
	int proto, qtype, rcode, action, reason;
	bool cached;
	const char *upstream;
	const char *name, *matched, *source, *answer;
	const char *client_id; /* NULL: none (or a block from before schema 4) */
};

void nx_qlog_blk_reset(struct nx_qlog_blk *b);
/* Must the block be stored before a record of ts_ms is added (full, or another minute)? */
bool nx_qlog_blk_needs_flush(const struct nx_qlog_blk *b, int64_t ts_ms);
/* Append one record (privacy applied); client text of client_len bytes; upstream NULL = none. */
void nx_qlog_blk_add(struct nx_qlog_blk *b, const struct nx_qlog_view *v, const char *client,
		     size_t client_len, const char *upstream);
/* Close the block; returns its text (in buf, not NUL-terminated) and *len. */
const char *nx_qlog_blk_finish(struct nx_qlog_blk *b, size_t *len);
/* The block's clients as a JSON array of strings into out; 0 = too many to list (NULL). */
size_t nx_qlog_blk_clients(const struct nx_qlog_blk *b, char *out, size_t cap);
/* Scratch bytes nx_qlog_blk_decode needs for a text of len bytes (strings and their table). */
size_t nx_qlog_blk_scratch_bytes(size_t len);
/*
 * Decode a block's records text (either encoding) into items[0..*n) (at most max). Strings go
 * to scratch (pointer-aligned, nx_qlog_blk_scratch_bytes(len)). 0, or -1 when the text is not
 * a well-formed block.
 */
int nx_qlog_blk_decode(const char *text, size_t len, char *scratch, struct nx_qlog_item *items,
		       size_t max, size_t *n);

/* ---- per-minute aggregation (agg.c) ---- */

enum nx_qlog_agg_kind { AGG_NAME = 0, AGG_BLOCKED = 1, AGG_CLIENT = 2, AGG__KINDS = 3 };

/* Minutes held at once: the newest and stragglers of earlier minutes from a slower ring. */
#define NX_QLOG_AGG_MINUTES 4
/* Live keys over all minutes and kinds: 3 kinds x NX_QLOG_AGG_KEYS_MAX. */
#define NX_QLOG_AGG_LIVE_MAX (AGG__KINDS * NX_QLOG_AGG_KEYS_MAX)
static_assert(NX_QLOG_AGG_LIVE_MAX * 4 <= NX_QLOG_AGG_SLOTS * 3, "aggregate table load");

/* One minute's counters: keys admitted (whole minute), counts of the open transaction. */
struct nx_qlog_agg_minute {
	int64_t minute;	/* ts_ms / 60000 (floor) */
	uint32_t queries, blocked, cached, forwarded, local;
	uint32_t proto[NX_QLOG_PROTO__COUNT]; /* queries by enum nx_qlog_proto */
	uint32_t keys[AGG__KINDS];  /* keys admitted for this minute, <= NX_QLOG_AGG_KEYS_MAX */
	uint32_t other[AGG__KINDS]; /* counts folded into "(other)" in the open transaction */
	bool names_folded; /* some record's name was not kept (fold, privacy): agg_names.folded */
};

/* One key: its bytes live in the pool; n counts the open transaction. 12 bytes. */
struct nx_qlog_agg_key {
	uint32_t hash;
	uint32_t n;
	uint32_t ref; /* 0 = free; else pool offset << 4 | minute index << 2 | kind */
};
static_assert(sizeof(struct nx_qlog_agg_key) == 12, "aggregate slot size");
static_assert(NX_QLOG_AGG_BYTES ==
		  NX_QLOG_AGG_SLOTS * sizeof(struct nx_qlog_agg_key) + NX_QLOG_AGG_POOL_BYTES +
			  NX_QLOG_AGG_NAMES_BYTES,
	      "aggregate memory as documented");

/*
 * The aggregates of the current minute(s), kept across transactions so that a minute's keys
 * are bounded (NX_QLOG_AGG_KEYS_MAX per kind; more fold into "(other)"), and combined in
 * memory: the counts (n, minute counters, other) are those not yet committed; an aggregate
 * write upserts the keys with counts, and they are zeroed once that transaction commits. The
 * table is cleared when a newer minute starts (its counts are always written by then), only in
 * a transaction that holds every count in the table (see writer.c write_batch).
 */
struct nx_qlog_agg {
	struct nx_qlog_agg_minute min[NX_QLOG_AGG_MINUTES];
	unsigned n_min;
	int64_t newest;		      /* newest minute seen since the last clear */
	struct nx_qlog_agg_key *keys; /* owned (querylog_queue), NX_QLOG_AGG_SLOTS */
	uint8_t *pool;		      /* owned (querylog_queue), NX_QLOG_AGG_POOL_BYTES: len, bytes */
	uint32_t pool_used;	      /* offset 0 is never used (ref 0 = free) */
	uint32_t live;		      /* keys in the table */
	uint32_t dirty;		      /* keys with n > 0 */
	uint64_t folded;	      /* counts folded into "(other)" not yet committed */
	bool pending;		      /* some count is not yet committed */
	/* The name keys in the order they entered the table (pool offset << 2 | minute index), so
	 * agg_names gets the new ones without a scan of the slots: names[0, names_mark) are in
	 * agg_names (committed); names_next is the same in the open transaction (back to
	 * names_mark when it rolls back). */
	uint32_t *names; /* owned (querylog_queue), NX_QLOG_AGG_LIVE_MAX */
	uint32_t n_names, names_mark, names_next;
	/* Deferred counting (NX_QLOG_AGG_DEFER_MS): the blocks after `mark` (agg_mark.block,
	 * committed) are not counted yet (`uncounted`; pending is true with it, so that flushes
	 * and stop wait for them). Never both uncounted and counts held in the table: a batch
	 * that defers writes held counts first, one that counts catches up first. */
	int64_t mark;
	int64_t mark_next;  /* agg_mark.block set in the open transaction; 0 = unchanged */
	int64_t txn_last;   /* id of the last block stored in the open transaction; 0 = none */
	bool uncounted;
	uint64_t defer_due; /* mono ms the uncounted blocks are to be counted */
};
static_assert(NX_QLOG_AGG_NAMES_BYTES == NX_QLOG_AGG_LIVE_MAX * 4, "a names entry per live key");

/*
 * agg_roll (db.c migration 6) covers the minutes >= lo; the writer keeps lo within a minute of
 * NX_QLOG_ROLL_MINUTES before now, so "the last 24 h" differs from it by a few edge minutes.
 * Further behind than NX_QLOG_ROLL_REBUILD_MINUTES (a stopped daemon, a clock jump) it is built
 * again from agg_top: one GROUP BY over a day, on the writer thread, instead of subtracting
 * minute by minute. A reader corrects at most NX_QLOG_ROLL_EDGE_MINUTES edge minutes from
 * agg_top; a window further from the roll (an old day, a short window) sums agg_top as before.
 */
#define NX_QLOG_ROLL_MINUTES 1440
#define NX_QLOG_ROLL_REBUILD_MINUTES 60
#define NX_QLOG_ROLL_EDGE_MINUTES 120

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

/* log_blocks rows deleted per retention statement: a block of ~1000 records is ~40 overflow
 * pages that SQLite reads to free, so a statement stays in the milliseconds. */
#define NX_QLOG_RETENTION_BLOCKS 64

/* Prepared statements of the writer connection. */
struct nx_qlog_stmts {
	sqlite3_stmt *insert_block;
	sqlite3_stmt *minute_upsert;
	sqlite3_stmt *top_upsert;
	sqlite3_stmt *begin;
	sqlite3_stmt *commit;
	sqlite3_stmt *rollback;
	sqlite3_stmt *ret_blocks;
	sqlite3_stmt *ret_minute;
	sqlite3_stmt *ret_top;
	sqlite3_stmt *roll_upsert; /* agg_roll += n for (kind, key) */
	sqlite3_stmt *roll_lo_get;
	sqlite3_stmt *roll_lo_set;
	sqlite3_stmt *roll_sub;	   /* agg_roll -= agg_top over minutes [?1, ?2) */
	sqlite3_stmt *roll_zero;   /* rows that reached 0 */
	sqlite3_stmt *roll_clear;
	sqlite3_stmt *roll_build;  /* agg_roll = agg_top summed over minutes >= ?1 */
	sqlite3_stmt *names_put;   /* agg_names: append names, set open, OR folded */
	sqlite3_stmt *ret_names;
	sqlite3_stmt *mark_get;	   /* agg_mark.block: the blocks up to it are counted */
	sqlite3_stmt *mark_set;
	sqlite3_stmt *max_block;
	sqlite3_stmt *uncounted;   /* the blocks after ?1, in id order */
};

struct nx_qlog {
	/* immutable after new */
	char *path; /* owned (querylog_queue) */
	size_t path_bytes;
	unsigned n_rings;
	uint32_t ring_cap;
	uint32_t ring_bytes;	       /* bytes per ring (nx_qlog_ring_bytes(ring_cap)) */
	struct nx_qlog_ring *rings;    /* owned, n_rings */
	uint8_t *slots;		       /* owned, n_rings * ring_bytes */
	/* owned, NX_QLOG_DRAIN_CHUNK records of struct nx_qlog_rec: a drain's packed records
	 * before privacy rewrites them into the batch, then the tap's unpacked copies */
	uint8_t *chunk;
	uint8_t *batch;		       /* owned, batch_bytes: packed records of a transaction */
	size_t batch_bytes;
	unsigned batch_max;	       /* records per transaction */
	unsigned writer_cache_kib;
	unsigned flush_ms;
	unsigned agg_ms;
	unsigned commit_ms;	       /* hold drained records this long; 0 = commit each drain */
	unsigned agg_defer_ms;	       /* count low-rate blocks this long later (agg.c) */
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
	int sync_full;		/* synchronous of db: 1 FULL, 0 NORMAL, -1 as opened (writer.c) */
	struct nx_qlog_agg agg;
	struct nx_qlog_blk blk;	/* the block being encoded (buf owned, querylog_queue) */
	size_t batch_used;	/* bytes of packed records in batch */
	struct nx_qlog_up_cache {
		int idx;	/* upstream index, -1 = empty */
		char name[64];
	} up_cache[8];		/* upstream names of the current transaction */
	unsigned rr;		/* ring to start the next drain at */
	uint64_t last_errlog_ms; /* mono ms of the last logged write error */
	uint64_t errs_unlogged;

	/* stats written by the writer, read anywhere */
	_Atomic uint64_t written, batches, retention_deleted, dropped_unwritten, agg_other;
	_Atomic uint64_t writer_wakeups; /* outer writer-loop passes: a busy loop shows here */
	_Atomic uint64_t errors[ERR__COUNT];
	_Atomic uint64_t queue_peak;
	_Atomic uint64_t queue_bytes_peak;
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
/* Size of the packed record at pk (a multiple of 8). */
size_t nx_qlog_pk_size(const struct nx_qlog_pk *pk);
/* Pack rec at dst (PK_MAX bytes free); returns its size. */
size_t nx_qlog_pk_pack(uint8_t *dst, const struct nx_qlog_rec *rec);
/* Read the packed record at src into *v (pointers into src); returns its size. */
size_t nx_qlog_pk_view(const uint8_t *src, struct nx_qlog_view *v);
/* The packed record at src as a terminated struct nx_qlog_rec (the tap's form); its size. */
size_t nx_qlog_pk_unpack(const uint8_t *src, struct nx_qlog_rec *rec);
/*
 * Copy whole packed records out of the rings into out, round robin from q->rr, in chunks of at
 * most NX_QLOG_DRAIN_CHUNK per lock hold, one memcpy per contiguous span: at most max records,
 * and while their sizes, each plus `extra`, fit in `budget` bytes (out must hold budget bytes).
 * *out_bytes = bytes copied. Updates queue_peak / queue_bytes_peak with the occupancy seen
 * before the pass. *more: records remain after the pass.
 */
size_t nx_qlog_rings_drain(struct nx_qlog *q, uint8_t *out, size_t max, size_t budget,
			   size_t extra, size_t *out_bytes, bool *more);
/* Records held now, pushed and dropped totals, bytes held (locks each ring briefly). */
void nx_qlog_rings_count(struct nx_qlog *q, uint64_t *now, uint64_t *pushed, uint64_t *dropped,
			 uint64_t *bytes);

/* agg.c */
int nx_qlog_agg_init(struct nx_qlog_agg *a);
void nx_qlog_agg_deinit(struct nx_qlog_agg *a);
/*
 * Count one record (privacy already applied) in the open transaction. May upsert and clear
 * the table when a newer minute starts. SQLite code.
 */
int nx_qlog_agg_add(struct nx_qlog *q, const struct nx_qlog_view *v, unsigned privacy);
/* Upsert every count held (minute counters, touched keys, "(other)"); they stay held until
 * nx_qlog_agg_zero() after the COMMIT. */
int nx_qlog_agg_write(struct nx_qlog *q);
/* Zero every count (written and committed, or dropped with a rolled-back transaction that held
 * them all); keys stay admitted. */
void nx_qlog_agg_zero(struct nx_qlog_agg *a);
/* Would counting a record of this minute write and clear the table (a newer minute, or no
 * free minute entry)? */
bool nx_qlog_agg_would_clear(const struct nx_qlog_agg *a, int64_t ts_ms);
/* Drop every key and minute (their counts must have been written). */
void nx_qlog_agg_clear(struct nx_qlog_agg *a);
/*
 * Append to agg_names the names the table holds (of every minute in it) that are not there
 * yet (names[names_next..]), in the open transaction. close: the minutes' keys leave
 * the table (their rows become trusted: open = 0). SQLite code. Called when the table is
 * cleared and in the aggregates-only transaction that precedes a clearing batch (writer.c);
 * the transaction's end moves names_mark (commit) or names_next (rollback).
 */
int nx_qlog_agg_names_write(struct nx_qlog *q, bool close);
/* agg_mark := id in the open transaction (its end makes it q->agg.mark). SQLite code. */
int nx_qlog_agg_mark_set(struct nx_qlog *q, int64_t id);
/*
 * Count the blocks after q->agg.mark from their stored records, in the open transaction (the
 * table must hold no counts): the table's minutes are closed and cleared first, then each
 * block is decoded and counted (privacy 0: only such blocks are deferred) and the counts are
 * upserted, agg_mark moved to the last block. A block that does not decode is skipped and
 * logged. SQLite code (or SQLITE_NOMEM).
 */
int nx_qlog_agg_catch_up(struct nx_qlog *q);
/* agg_roll: its lower minute (INT64_MAX when not built), then move it to at least `min_lo`
 * (subtracting the minutes in between; rebuilt when far behind or not built), in the open
 * transaction. SQLite code. */
int nx_qlog_roll_advance(struct nx_qlog *q, int64_t min_lo, int64_t *lo);

/* writer.c */
void *nx_qlog_writer_main(void *arg);
/* Text of an address (family AF_INET/AF_INET6, else "hidden" for 0 and "unknown"); returns
 * its length. */
int nx_qlog_addr_text(unsigned family, const uint8_t *addr, char *buf, size_t cap);
/* Text of a record's client (nx_qlog_addr_text). */
void nx_qlog_client_text(const struct nx_qlog_rec *rec, char *buf, size_t cap);

/* Ledger sync of SQLite memory (db.c). */
void nx_qlog_sqlite_sync(void);

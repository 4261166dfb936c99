/*
 * Query log: workers push one fixed-size record per answered query; one writer thread stores
 * them in SQLite (querylog.db, WAL) with per-minute aggregates; readers serve the admin API.
 *
 * Queue: one ring per producer (worker), so workers never contend with each other. A ring is a
 * byte ring of packed records (fixed fields + the text bytes actually used, ~90-110 B for a
 * household query, PK_MAX = 744 B at worst) of ceil(buffer_max / producers) x
 * NX_QLOG_RING_REC_BYTES bytes, holding at most ceil(buffer_max / producers) records, with its
 * own mutex, taken by its producer to pack one record into it and by the writer for chunked
 * drains (NX_QLOG_DRAIN_CHUNK records per hold, one memcpy per contiguous span). A full ring
 * (records or bytes) overwrites its OLDEST records and counts them (dropped_oldest): the DNS
 * path never waits on the disk. nx_qlog_push() allocates nothing and makes no system call,
 * except the coalesced wake of the writer when its ring turns non-empty or reaches half full.
 *
 * Writer: drains the rings in chunks of NX_QLOG_DRAIN_CHUNK, applies logging.privacy to each
 * chunk, hands it to the live tap and packs it into the batch (<= batch_max records), then
 * stores the batch in ONE transaction (prepared INSERT reused + upserts of the aggregate keys
 * the batch touched; the aggregates of the current minute are kept in memory). A failed
 * transaction is rolled back, counted by kind (full, readonly, busy, ioerr, cantopen, other),
 * logged at most once a minute and retried with exponential backoff (NX_QLOG_BACKOFF_MIN_MS ..
 * NX_QLOG_BACKOFF_MAX_MS); after every failure but busy/full the connection is reopened before
 * the retry, so a database fixed by the operator (made writable again, a directory removed) is
 * picked up. While it retries, the rings keep taking
 * records and drop their oldest. Retention runs on the writer thread in statements of
 * NX_QLOG_RETENTION_ROWS rows, draining the rings between statements.
 *
 * Schema: numbered migrations (PRAGMA user_version), applied right after open and before the
 * connection-role pragmas (journal_mode, synchronous, cache_size); each role reads its
 * cache_size back. Tables: queries (one row per record, privacy < 3), agg_minute (per-minute
 * counters, queries by protocol since schema 5), agg_top (per-minute counts keyed (minute, kind,
 * key): names, blocked names, clients; at most NX_QLOG_AGG_KEYS_MAX keys per kind and minute, the
 * rest under "(other)"). Statistics read only the aggregates; they are committed with the rows
 * that made them.
 *
 * Privacy (logging.privacy), applied by the writer to rows, aggregates and the live tap alike:
 *   0 everything; 1 names hidden: name/matched/answer stored as "hidden", user-rule text in
 *   `source` hidden, no name aggregates; 2 also clients hidden (client zeroed, family 0, stored
 *   as "hidden", client id emptied), no client aggregates; 3 no per-query rows and no tap: per-minute counters only.
 * A change applies to records drained after it; rows already written stay as written.
 *
 * Threading: nx_qlog_push() from producer i only (one thread per ring index); nx_qlog_stats(),
 * nx_qlog_set_*() and nx_qlog_flush() from any thread; new/start/stop/free from one control
 * thread. A reader (nx_qlog_reader_*) is one SQLite connection: one thread at a time.
 *
 * Memory: rings (packed records, sized in bytes from buffer_max), the writer's packed batch, its
 * drain scratch and the per-minute aggregate
 * table are allocated in nx_qlog_new and charged to NX_OWNER_querylog_queue; nothing is
 * allocated per record. SQLite's own heap
 * (page caches of every connection, schemas, statements) is process-wide and charged to
 * NX_OWNER_sqlite from sqlite3_memory_used() by nx_qlog_sqlite_memory() (the writer syncs
 * it after each batch).
 */
#pragma once

#include <assert.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the record ---- */

#define NX_QLOG_NAME_MAX 254   /* presentation name without the trailing dot (253) + NUL */
#define NX_QLOG_SOURCE_MAX 64  /* list source name or user rule text, truncated, + NUL */
#define NX_QLOG_ANSWER_MAX 64  /* answer summary, truncated, + NUL */
/* DoH `/dns-query/<id>` or DoT SNI `<id>.<tls.server_name>` client id ([a-z0-9-]{1,64}, the
 * transports check it) + NUL: the id as the device sent it, known to the config or not, so a
 * device set up with a mistyped id shows under that id. */
#define NX_QLOG_CLIENT_ID_MAX 65

#define NX_QLOG_PROTOS(X) X(UDP, "udp") X(TCP, "tcp") X(DOT, "dot") X(DOH, "doh")
enum nx_qlog_proto {
#define NX_QLOG_PROTO_ENUM(id, text) NX_QLOG_PROTO_##id,
	NX_QLOG_PROTOS(NX_QLOG_PROTO_ENUM)
#undef NX_QLOG_PROTO_ENUM
	NX_QLOG_PROTO__COUNT
};

/* Same values as enum nx_filter_action (filter/result.h). */
enum nx_qlog_action {
	NX_QLOG_ACT_NONE = 0,  /* no rule: resolved normally */
	NX_QLOG_ACT_ALLOW = 1, /* a rule or list exception allowed it */
	NX_QLOG_ACT_BLOCK = 2, /* answered with the block response */
	NX_QLOG_ACT_LOCAL = 3, /* answered from local records */
};

/*
 * One answered query as the worker builds it on its stack (no pointers, nothing to free) and the
 * live tap receives it. nx_qlog_push packs it into the ring (only the text bytes used). Text
 * fields are NUL-terminated (the push stops at the field's last byte regardless).
 */
struct nx_qlog_rec {
	int64_t ts_ms;		   /* wall clock (nx_now_wall_ms) when the query arrived */
	uint32_t duration_us;	   /* arrival to answer sent */
	uint8_t client[16];	   /* IPv4 in the first 4 bytes when family == AF_INET */
	uint8_t family;		   /* AF_INET / AF_INET6; 0 = hidden (privacy >= 2) */
	uint8_t proto;		   /* enum nx_qlog_proto */
	uint16_t qtype;
	uint8_t rcode;
	uint8_t action;		   /* enum nx_qlog_action */
	uint8_t reason;		   /* enum nx_filter_reason (filter/result.h) */
	uint8_t cached;		   /* 1 answered from cache */
	int16_t upstream;	   /* upstream stats index (upstream/upstream.h), -1 none */
	char name[NX_QLOG_NAME_MAX];	   /* query name, lower-case text, no trailing dot */
	char matched[NX_QLOG_NAME_MAX];	   /* matched rule/list name or "" */
	char source[NX_QLOG_SOURCE_MAX];   /* list source name or user rule text or "" */
	char answer[NX_QLOG_ANSWER_MAX];   /* "A 192.0.2.1", "CNAME x.example" or "" */
	char client_id[NX_QLOG_CLIENT_ID_MAX]; /* client id the query carried, or "" */
};

/* The builder's and the tap's size (not the ring's: see NX_QLOG_RING_REC_BYTES). 38 fixed bytes
 * + 701 text + 5 padding. */
#define NX_QLOG_REC_SIZE 744
static_assert(sizeof(struct nx_qlog_rec) == NX_QLOG_REC_SIZE, "query-log record size changed");

/* ---- limits and defaults ---- */

/*
 * logging.query_log_buffer_max default, in records over all rings. Sized for a household peak
 * of 1000 queries/s through a 2 s disk stall (2000 records) rounded to 2048: 2048 x
 * NX_QLOG_RING_REC_BYTES = 262,144 B (256 KiB) of rings (1.45 MiB when records were a fixed
 * 744 B). In steady state the writer drains every NX_QLOG_FLUSH_MS (250 records at 1000 q/s,
 * ~12 % of the buffer); nxdns_querylog_queue_peak measures the real high-water so the default
 * can be lowered from data.
 */
#define NX_QLOG_BUFFER_DEFAULT 2048
#define NX_QLOG_BUFFER_MIN 16	      /* below this a burst of one worker already drops */
#define NX_QLOG_BUFFER_MAX (1u << 20) /* 128 MiB of rings: far beyond any sane setting */
/*
 * Ring bytes per record of buffer_max: a typical packed record with room to spare (household
 * queries pack to ~90-110 B: 48 B of fixed fields, the name, a short answer summary, a list's
 * name when blocked; a daemon's ring full of blocked `nNNNN.blocked.test` answers held 2048
 records in 212,992 B, 104 B each). A ring holds
 * ceil(buffer_max / producers) records at most and its bytes, whichever fills first: records
 * of the typical size fill the record count, long ones (up to PK_MAX = 744 B) fill the bytes
 * earlier. Every ring takes at least NX_QLOG_RING_MIN_BYTES, two worst-case records.
 */
#define NX_QLOG_RING_REC_BYTES 128
#define NX_QLOG_RING_MIN_BYTES 1488
#define NX_QLOG_PRODUCERS_MAX 256     /* rings; listener.workers is capped far lower */
/*
 * Records per transaction. The writer's batch holds packed records (fixed fields + the text
 * actually used, ~80-120 B for typical names) in batch_max x NX_QLOG_BATCH_REC_BYTES bytes
 * plus one worst-case record: 1024 -> 128 KiB. A batch ends at batch_max records or when the
 * bytes run out (long names), whichever comes first. At 50k q/s the writer wakes about every
 * 20 ms (a ring half full) and takes the whole backlog (~1000 records) in one transaction;
 * at 1000 q/s one transaction per flush tick.
 */
#define NX_QLOG_BATCH_DEFAULT 1024
#define NX_QLOG_BATCH_REC_BYTES 128
#define NX_QLOG_BATCH_MAX 4096
/* The writer's block encoding buffer (owner querylog_queue): a batch's records as stored (one
 * JSON array, ~150 B a record) before its INSERT; a fuller batch takes two blocks. */
#define NX_QLOG_BLOCK_BYTES (192 * 1024)
#define NX_QLOG_FLUSH_MS 250	       /* longest a record waits in a ring before the writer runs */
/*
 * logging.commit_interval (seconds): the writer drains the rings every NX_QLOG_FLUSH_MS as
 * before (the live tap sees each record then), but holds the drained records in its batch and
 * commits them, with their aggregates, in one transaction when the oldest has waited this long,
 * when the batch is full (NX_QLOG_BATCH_HOLD records or its bytes), at a flush request (the
 * admin API asks one before it reads) and at stop. Why: every commit rewrites the pages it
 * touches (~10 B-tree pages of 4 KiB: the block's leaf and index, agg_minute, agg_top per kind,
 * agg_roll, agg_names), once in the WAL and once more at the checkpoint; a commit per 250 ms
 * cost 8-35 KB of writes per query at 5 q/s. Pi-hole commits once a minute for the same reason.
 * Loss window: a kill -9 loses at most the records held (interval + NX_QLOG_FLUSH_MS, or
 * fewer when the batch filled first); a commit is fsynced when the last fsynced one is an
 * interval old (every commit at household rates), so a power loss loses at most the records
 * held there, two intervals' worth when batches fill faster (writer.c set_sync); the database
 * itself is always consistent (WAL). 0 = commit at every drain (the writer before batching,
 * synchronous = NORMAL).
 */
#define NX_QLOG_COMMIT_MAX_MS (3600 * 1000u)
/* Records a held batch takes (batch_max while commit_interval > 0): 4096 x 128 B + one worst
 * record = 513 KiB of querylog_queue, a minute at 68 q/s; faster, a batch commits when full
 * (every ~20 s at 200 q/s) and a block holds one batch (NX_QLOG_BLOCK_RECS_MAX). */
#define NX_QLOG_BATCH_HOLD NX_QLOG_BATCH_MAX
/* A held batch that reaches NX_QLOG_BATCH_DEFAULT records within this long (> 1000 q/s)
 * commits then (writer.c batch_full). */
#define NX_QLOG_HOLD_FAST_MS 1000
/*
 * Aggregates are upserted at most this often (and at a flush request, a new minute, stop),
 * not in every transaction: at 100k q/s over 1000 names a transaction of ~500 records touched
 * ~400 keys, an upsert each (~1.4 us per record of writer CPU). Rows commit first; a record
 * counts as written (nxdns_querylog_written_total) once its aggregates are committed too, so
 * statistics never lag what "written" claims. 0 = in every transaction.
 */
#define NX_QLOG_AGG_WRITE_MS 1000
/*
 * Aggregates derived later from the committed records (issue 16, SD-card wear): with batched
 * commits (commit_ms), privacy 0 and batches of fewer than NX_QLOG_AGG_DEFER_RECS records (a
 * household), a commit stores the records' blocks only; the aggregates of every block after
 * agg_mark.block are counted from the blocks themselves, in one transaction, at most this
 * long after the first of them (or at a flush request, a privacy change, a larger batch, stop,
 * and at open after a crash). 0 = count every batch as it is written.
 */
#define NX_QLOG_AGG_DEFER_MS (10 * 60 * 1000)
#define NX_QLOG_AGG_DEFER_RECS 1024
/* Records copied per ring-lock hold (~6 KiB memcpy of packed household records); also the
 * largest tap call, whose unpacked copies take the writer's 47 KiB scratch (64 x 744 B). */
#define NX_QLOG_DRAIN_CHUNK 64
#define NX_QLOG_BACKOFF_MIN_MS 100     /* first retry after a failed transaction */
#define NX_QLOG_BACKOFF_MAX_MS 10000   /* retry interval cap (doubling) */
#define NX_QLOG_STOP_ATTEMPTS 3	       /* final write attempts at stop before records are dropped */
#define NX_QLOG_BUSY_TIMEOUT_MS 50     /* writer: wait for a foreign lock this long per statement */
#define NX_QLOG_ERRLOG_INTERVAL_MS 60000 /* write errors are logged at most once a minute */
#define NX_QLOG_RETENTION_DEFAULT 7		/* days */
#define NX_QLOG_RETENTION_MAX 3650		/* days; 0 = keep forever */
#define NX_QLOG_RETENTION_ROWS 1000		/* rows deleted per statement */
#define NX_QLOG_RETENTION_INTERVAL_MS 600000	/* retention job every 10 minutes */
#define NX_QLOG_PRIVACY_MAX 3
/*
 * Per-minute aggregates are combined in memory for the whole minute: at most
 * NX_QLOG_AGG_KEYS_MAX keys per kind (domains, blocked, clients) per minute; further keys of
 * that minute are counted under the key NX_QLOG_AGG_OTHER ("(other)") and in agg_other. A
 * household (hundreds of names a minute) never reaches it; a random-subdomain or blocklist
 * burst (200k names a minute) is cut to 4096 rows a minute instead of one per name. Key text
 * lives in a pool of NX_QLOG_AGG_POOL_BYTES (4096 names of ~40 B + 4096 clients; a full pool
 * also folds into "(other)"). Memory: 16384 slots x 12 B + the pool + the names list (48 KiB)
 * = 432 KiB.
 */
#define NX_QLOG_AGG_KEYS_MAX 4096
#define NX_QLOG_AGG_OTHER "(other)" /* the key of folded counts, as nx_qlog_top returns it */
#define NX_QLOG_AGG_POOL_BYTES (192 * 1024)
#define NX_QLOG_AGG_SLOTS 16384 /* hash slots: 3 x 4096 keys at a load <= 3/4 */
/* The name keys in the order they came (4 B each, 3 x 4096 at most): what agg_names is
 * appended from without a scan of the slots. */
#define NX_QLOG_AGG_NAMES_BYTES (3 * NX_QLOG_AGG_KEYS_MAX * 4)
/* 12 B a slot + the pool + the names list: 432 KiB */
#define NX_QLOG_AGG_BYTES                                                                        \
	(NX_QLOG_AGG_SLOTS * 12 + NX_QLOG_AGG_POOL_BYTES + NX_QLOG_AGG_NAMES_BYTES)
/* cache_size per connection role (KiB). SQLite's default is 2 MiB per connection. */
#define NX_QLOG_WRITER_CACHE_KIB 512
#define NX_QLOG_READER_CACHE_KIB 256
/* Process-wide sqlite3_soft_heap_limit64 set by nx_qlog_new (0 in params = leave as is). */
#define NX_QLOG_SQLITE_SOFT_HEAP_KIB 4096
/* Reader limits. */
#define NX_QLOG_QUERY_LIMIT_DEFAULT 100
#define NX_QLOG_QUERY_LIMIT_MAX 1000
#define NX_QLOG_TOP_LIMIT_DEFAULT 10
#define NX_QLOG_TOP_LIMIT_MAX 100
#define NX_QLOG_HISTORY_POINTS_MAX 10080 /* a week of minutes */
/* Latest schema version (PRAGMA user_version) nx_qlog_* writes. */
#define NX_QLOG_SCHEMA_VERSION 8

/* ---- writer side ---- */

struct nx_qlog;

/*
 * Live tap: called on the writer thread after each drained batch, with the privacy-applied
 * copies (never at privacy 3). recs are valid during the call only; do not block.
 */
typedef void (*nx_qlog_tap_cb)(void *ud, const struct nx_qlog_rec *recs, size_t n);
/* Wall clock in ms (retention cutoff). */
typedef int64_t (*nx_qlog_now_cb)(void *ud);
/* Name of upstream stats index idx into buf (NUL-terminated); 0, or <0 when unknown. Called
 * on the writer thread. */
typedef int (*nx_qlog_upstream_name_cb)(void *ud, int idx, char *buf, size_t cap);

struct nx_qlog_params {
	const char *path;	   /* database file; borrowed for nx_qlog_new (copied) */
	unsigned producers;	   /* rings: 1..NX_QLOG_PRODUCERS_MAX (listener.workers) */
	unsigned buffer_max;	   /* logging.query_log_buffer_max: records over all rings */
	unsigned retention_days;   /* logging.retention_days; 0 = keep forever */
	unsigned privacy;	   /* logging.privacy 0..3 */
	unsigned batch_max;	   /* records per transaction, 1..NX_QLOG_BATCH_MAX */
	unsigned writer_cache_kib; /* writer connection cache_size in KiB, >= 64 */
	unsigned sqlite_soft_heap_kib; /* process-wide SQLite soft heap limit; 0 = leave */
	unsigned flush_ms;	   /* writer tick, 1..60000 (NX_QLOG_FLUSH_MS) */
	unsigned agg_ms;	   /* aggregate upsert interval, 0..60000 (NX_QLOG_AGG_WRITE_MS) */
	unsigned commit_ms;	   /* hold drained records up to this long before their commit,
				    * 0..NX_QLOG_COMMIT_MAX_MS; 0 = commit every drain (default) */
	unsigned agg_defer_ms;	   /* NX_QLOG_AGG_DEFER_MS (default), 0 = never defer;
				    * used only with commit_ms */
	nx_qlog_tap_cb tap;	   /* optional live tap (see nx_qlog_set_tap) */
	void *tap_ud;		   /* borrowed */
	nx_qlog_now_cb now_ms;	   /* NULL = nx_now_wall_ms; tests fix the clock */
	void *now_ud;		   /* borrowed */
	nx_qlog_upstream_name_cb upstream_name; /* NULL: upstream stored as "#<index>" */
	void *upstream_ud;	   /* borrowed */
};

/*
 * Write-error kinds (SQLite primary result codes) and the stats fields, one list each.
 * X(field, prometheus type, family, labels, help).
 */
#define NX_QLOG_ERROR_KINDS(X)                                                                     \
	X(full) X(readonly) X(busy) X(ioerr) X(cantopen) X(other)

#define NX_QLOG_STATS(X)                                                                           \
	X(pushed, counter, "nxdns_querylog_pushed_total", "",                                      \
	  "Query-log records pushed by the workers")                                               \
	X(written, counter, "nxdns_querylog_written_total", "",                                    \
	  "Query-log records committed (rows or, at privacy 3, aggregates)")                       \
	X(dropped_oldest, counter, "nxdns_querylog_dropped_total", "reason=\"oldest\"",            \
	  "Query-log records dropped, by reason")                                                  \
	X(dropped_unwritten, counter, "nxdns_querylog_dropped_total", "reason=\"unwritten_at_stop\"", \
	  "")                                                                                      \
	X(err_full, counter, "nxdns_querylog_write_errors_total", "kind=\"full\"",                 \
	  "Query-log transactions that failed, by kind")                                           \
	X(err_readonly, counter, "nxdns_querylog_write_errors_total", "kind=\"readonly\"", "")     \
	X(err_busy, counter, "nxdns_querylog_write_errors_total", "kind=\"busy\"", "")             \
	X(err_ioerr, counter, "nxdns_querylog_write_errors_total", "kind=\"ioerr\"", "")           \
	X(err_cantopen, counter, "nxdns_querylog_write_errors_total", "kind=\"cantopen\"", "")     \
	X(err_other, counter, "nxdns_querylog_write_errors_total", "kind=\"other\"", "")           \
	X(batches, counter, "nxdns_querylog_batches_total", "",                                    \
	  "Query-log transactions committed")                                                      \
	X(writer_wakeups, counter, "nxdns_querylog_writer_wakeups_total", "",                      \
	  "Times the query-log writer thread woke to work (flush ticks, commits, requests)")      \
	X(agg_other, counter, "nxdns_querylog_aggregate_other_total", "",                          \
	  "Aggregate counts stored under the key \"(other)\": a minute's key table was full")     \
	X(retention_deleted, counter, "nxdns_querylog_retention_deleted_total", "",                \
	  "Query-log rows and aggregate rows deleted by retention")                                \
	X(queue_now, gauge, "nxdns_querylog_queue_records", "",                                    \
	  "Query-log records waiting in the rings")                                                \
	X(queue_peak, gauge, "nxdns_querylog_queue_peak", "",                                      \
	  "High-water of records waiting in the rings (read before each drain)")                   \
	X(queue_capacity, gauge, "nxdns_querylog_queue_capacity", "",                              \
	  "Query-log ring capacity in records (all rings)")                                        \
	X(queue_bytes, gauge, "nxdns_querylog_queue_bytes", "",                                    \
	  "Bytes of packed query-log records waiting in the rings")                                \
	X(queue_bytes_peak, gauge, "nxdns_querylog_queue_bytes_peak", "",                          \
	  "High-water of packed record bytes in the rings (read before each drain)")               \
	X(queue_bytes_capacity, gauge, "nxdns_querylog_queue_bytes_capacity", "",                  \
	  "Query-log ring capacity in bytes (all rings)")                                          \
	X(writer_ok, gauge, "nxdns_querylog_writer_ok", "",                                        \
	  "1 when the last query-log transaction succeeded")                                       \
	X(writer_cache_kib, gauge, "nxdns_querylog_writer_cache_kib", "",                          \
	  "cache_size of the writer connection, read back (KiB)")                                  \
	X(sqlite_mem_used, gauge, "nxdns_sqlite_memory_bytes", "",                                 \
	  "SQLite heap in use, process-wide (sqlite3_memory_used)")                                \
	X(sqlite_mem_highwater, gauge, "nxdns_sqlite_memory_peak_bytes", "",                       \
	  "SQLite heap high-water, process-wide")

struct nx_qlog_stats {
#define NX_QLOG_STAT_FIELD(name, type, family, labels, help) uint64_t name;
	NX_QLOG_STATS(NX_QLOG_STAT_FIELD)
#undef NX_QLOG_STAT_FIELD
};

/* Defaults: producers 1, buffer 2048, retention 7, privacy 0, batch 1024, writer cache 512 KiB,
 * soft heap 4 MiB, flush 250 ms, no tap, wall clock, no upstream names. path stays NULL. */
void nx_qlog_params_default(struct nx_qlog_params *p);

/*
 * Allocate the rings and the writer's batch (owner querylog_queue), open and migrate the
 * database and set the writer pragmas. Returns 0 and *out; -EINVAL on bad params; -ENOMEM;
 * NX_EFORMAT when the file has a newer schema than NX_QLOG_SCHEMA_VERSION; NX_ECORRUPT when it is
 * not a database. A database that cannot be opened or written for an environmental reason
 * (cantopen, readonly, full, busy, ioerr) does NOT fail: it is counted and logged, and the
 * writer keeps retrying once started (DNS must not depend on the disk).
 */
int nx_qlog_new(const struct nx_qlog_params *p, struct nx_qlog **out);

/* Start the writer thread. 0, -EALREADY, or -errno from pthread_create. */
int nx_qlog_start(struct nx_qlog *q);

/*
 * Hot path: pack *rec into producer's ring (its fixed fields and the text bytes used, one pass
 * under the ring's mutex; the oldest records are overwritten, counted, when the ring is full).
 * producer < params.producers, and only one thread pushes to a given index. Never blocks on the
 * disk; NULL q is a no-op (query log off).
 */
void nx_qlog_push(struct nx_qlog *q, unsigned producer, const struct nx_qlog_rec *rec);

/* Flags for nx_qlog_flush. */
enum {
	NX_QLOG_FLUSH_RETENTION = 1u << 0, /* also run retention to completion now */
};

/*
 * Wait until every record pushed before the call is committed, held ones included (and, with
 * NX_QLOG_FLUSH_RETENTION, retention ran to completion at the current settings). 0;
 * NX_ETIMEDOUT after timeout_ms (e.g. the database is failing; the work stays pending);
 * -EIO when retention was asked and could not run; -ESRCH when the writer is not running.
 * For tests, shutdown paths and tools, and the admin API before it reads the log (so a held
 * batch is visible at once); never on the DNS path.
 */
int nx_qlog_flush(struct nx_qlog *q, unsigned flags, unsigned timeout_ms);

/*
 * Stop the writer: drain and write what is queued (NX_QLOG_STOP_ATTEMPTS tries when the
 * database fails; what still cannot be written is counted dropped_unwritten), then join.
 * Idempotent; pushes after stop only fill the rings.
 */
void nx_qlog_stop(struct nx_qlog *q);

/* Stop if running, close the database, free everything. NULL is a no-op. */
void nx_qlog_free(struct nx_qlog *q);

/* Snapshot the counters and gauges (also syncs the NX_OWNER_sqlite ledger row). NULL q: zeros
 * except the SQLite figures. */
void nx_qlog_stats(struct nx_qlog *q, struct nx_qlog_stats *st);

/* Reload: new privacy (0..3) / retention (0..NX_QLOG_RETENTION_MAX) take effect on the next
 * batch / at once (a retention run is scheduled). -EINVAL when out of range. */
int nx_qlog_set_privacy(struct nx_qlog *q, unsigned privacy);
int nx_qlog_set_retention(struct nx_qlog *q, unsigned days);

/* Replace the live tap (NULL = none). When this returns the previous tap is not running and
 * will not be called again. */
void nx_qlog_set_tap(struct nx_qlog *q, nx_qlog_tap_cb tap, void *ud);

/* Bytes of the writer's packed batch for batch_max records (NX_QLOG_BATCH_REC_BYTES each on
 * average, plus one worst-case record). */
size_t nx_qlog_batch_bytes(unsigned batch_max);

/* Capacity in records over all rings (producers x ceil(buffer_max / producers)). */
unsigned nx_qlog_capacity(const struct nx_qlog *q);
/* Ring bytes over all rings (producers x nx_qlog_ring_bytes(ceil(buffer_max / producers))). */
size_t nx_qlog_capacity_bytes(const struct nx_qlog *q);
/* Bytes of one ring that holds `records` records: records x NX_QLOG_RING_REC_BYTES, at least
 * NX_QLOG_RING_MIN_BYTES. */
size_t nx_qlog_ring_bytes(unsigned records);

/*
 * SQLite heap, process-wide: sqlite3_memory_used() and its high-water. Also charges the
 * difference since the last call to NX_OWNER_sqlite, so the ledger row follows SQLite.
 */
void nx_qlog_sqlite_memory(int64_t *used, int64_t *highwater);

/*
 * Create or upgrade the schema of the database at path to `target` (1..NX_QLOG_SCHEMA_VERSION;
 * -1 = latest) without role pragmas. For tests and tools. 0; NX_EFORMAT (newer file, or target
 * below the file's version); NX_ECORRUPT; -EIO.
 */
int nx_qlog_db_migrate(const char *path, int target);

/* Privacy applied to one record in place (what the writer does to each copy). */
void nx_qlog_apply_privacy(struct nx_qlog_rec *rec, unsigned privacy);

/*
 * A record as the JSON object the API returns for one row (without "id"): ts, client, proto,
 * qtype, rcode, action, reason, name, matched, source, answer, upstream (name or null),
 * cached, duration_us, client_id ("" when none). For the live stream. NULL on allocation failure.
 */
json_t *nx_qlog_rec_to_json(const struct nx_qlog_rec *rec, const char *upstream);

/* ---- reader side (admin API) ---- */

struct nx_qlog_reader;

/* Open a read connection (no migration: the writer owns the schema; cache_size
 * NX_QLOG_READER_CACHE_KIB, query_only). 0; NX_EFORMAT when the schema version differs from
 * NX_QLOG_SCHEMA_VERSION; -ENOENT / -EIO; -ENOMEM. */
int nx_qlog_reader_open(const char *path, struct nx_qlog_reader **out);
void nx_qlog_reader_close(struct nx_qlog_reader *r);
/* cache_size the reader read back after setting it, in KiB. */
unsigned nx_qlog_reader_cache_kib(const struct nx_qlog_reader *r);
/* Tests and the bench: off = true makes nx_qlog_top sum agg_top always, not read agg_roll
 * (the two must agree). */
void nx_qlog_reader_no_roll(struct nx_qlog_reader *r, bool off);

#define NX_QLOG_STATUSES(X)                                                                        \
	X(ALL, "all")		  /* every row */                                                  \
	X(BLOCKED, "blocked")	  /* action block */                                               \
	X(ALLOWED, "allowed")	  /* everything not blocked (resolved, local, cached) */           \
	X(CACHED, "cached")	  /* answered from the cache */                                    \
	X(FORWARDED, "forwarded") /* answered by an upstream (not blocked, local or cached) */          \
	X(LOCAL, "local")	  /* answered from local records */

enum nx_qlog_status {
#define NX_QLOG_STATUS_ENUM(id, text) NX_QLOG_STATUS_##id,
	NX_QLOG_STATUSES(NX_QLOG_STATUS_ENUM)
#undef NX_QLOG_STATUS_ENUM
};

/* "all", "blocked", ... -> enum. 0 or -EINVAL. */
int nx_qlog_status_parse(const char *s, enum nx_qlog_status *out);

/* "udp", "tcp", "dot", "doh" (NX_QLOG_PROTOS) -> enum; the first len bytes of s. 0 or -EINVAL. */
int nx_qlog_proto_parse(const char *s, size_t len, enum nx_qlog_proto *out);

struct nx_qlog_filter {
	const char *client;	    /* exact client text ("192.168.1.2"), NULL = any; borrowed */
	const char *client_id;	    /* exact client id ("phone"), NULL/"" = any; borrowed */
	const char *name;	    /* substring of the name, NULL/"" = any; borrowed */
	enum nx_qlog_status status;
	int64_t from_ms;	    /* ts >= from_ms; 0 = unbounded */
	int64_t to_ms;		    /* ts < to_ms; 0 = unbounded */
	const char *cursor;	    /* next_cursor of the previous page, NULL = newest first */
	unsigned limit;		    /* 1..NX_QLOG_QUERY_LIMIT_MAX; 0 = NX_QLOG_QUERY_LIMIT_DEFAULT */
	unsigned protos; /* bit 1u << enum nx_qlog_proto per protocol shown; 0 = any (so a
			  * zeroed filter, as every older caller builds, still means any) */
	/* Rows whose client (text, client id or "") this accepts; NULL = any. The admin's client
	 * by name. A block whose client list has no accepted client is skipped undecoded, unless
	 * client_match_ids (it may accept a row by its client id, which the list lacks). */
	bool (*client_match)(const char *client, const char *client_id, void *ud);
	void *client_match_ud; /* borrowed */
	bool client_match_ids;
};

/*
 * Rows newest first (ts DESC, id DESC), keyset-paginated (no OFFSET):
 * {"items": [{"id":..,"ts":..,...}], "next_cursor": "..." | null}. next_cursor is null when no
 * row follows. Returns 0 and *out (caller json_decref); -EINVAL with *bad_field ("limit",
 * "cursor", "status", "from", "to") set when bad_field != NULL; -EIO; -ENOMEM.
 */
int nx_qlog_query(struct nx_qlog_reader *r, const struct nx_qlog_filter *f, json_t **out,
		  const char **bad_field);

/*
 * Totals over the minutes whose start lies in [from_ms, to_ms) (0 = unbounded), from the
 * aggregates: {"from","to","queries","blocked","blocked_percent","cached","forwarded","local",
 * "clients","protocols":{"udp","tcp","dot","doh"}} (clients: distinct clients seen; 0 at
 * privacy >= 2; protocols: queries by NX_QLOG_PROTOS, 0 for minutes written before schema 5).
 * 0, -EINVAL, -EIO, -ENOMEM.
 */
int nx_qlog_summary(struct nx_qlog_reader *r, int64_t from_ms, int64_t to_ms, json_t **out);

/*
 * Time series from the minute aggregates, buckets of step_s seconds (a multiple of 60) aligned
 * to the epoch, covering [from_ms, to_ms) (both required) with empty buckets as zeros:
 * {"from","to","step","points":[{"t": ms,"queries","blocked","cached","forwarded","local",
 * "protocols":{"udp","tcp","dot","doh"}}]}.
 * -EINVAL (*bad_field "from"/"to"/"step") when the range is empty or over
 * NX_QLOG_HISTORY_POINTS_MAX points.
 */
int nx_qlog_history(struct nx_qlog_reader *r, int64_t from_ms, int64_t to_ms, unsigned step_s,
		    json_t **out, const char **bad_field);

#define NX_QLOG_TOP_KINDS(X) X(DOMAINS, "domains") X(BLOCKED, "blocked") X(CLIENTS, "clients")
enum nx_qlog_top_kind {
#define NX_QLOG_TOP_ENUM(id, text) NX_QLOG_TOP_##id,
	NX_QLOG_TOP_KINDS(NX_QLOG_TOP_ENUM)
#undef NX_QLOG_TOP_ENUM
};

/* "domains" | "blocked" | "clients" -> enum. 0 or -EINVAL. */
int nx_qlog_top_kind_parse(const char *s, enum nx_qlog_top_kind *out);

/*
 * Most frequent keys over [from_ms, to_ms) (0 = unbounded): {"kind","items":[{"key","count"}]},
 * by count desc then key. Counts of keys beyond a minute's NX_QLOG_AGG_KEYS_MAX appear under
 * the key NX_QLOG_AGG_OTHER. limit 1..NX_QLOG_TOP_LIMIT_MAX, 0 = default. -EINVAL (*bad_field
 * "limit"/"kind"), -EIO, -ENOMEM.
 */
int nx_qlog_top(struct nx_qlog_reader *r, enum nx_qlog_top_kind kind, int64_t from_ms,
		int64_t to_ms, unsigned limit, json_t **out, const char **bad_field);

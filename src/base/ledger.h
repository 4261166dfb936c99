/*
 * The memory ledger: every long-lived byte is charged to an owner.
 *
 * Owners come from one X-macro list (adding an owner is one line; the enum, the metric label
 * and the help text come from it). nx_mem_* allocate through malloc and charge the owner;
 * nx_ledger_charge() records memory obtained elsewhere (mmap, library pools we size).
 * Charges are relaxed atomics: any thread may allocate or free; readers see a consistent-enough
 * snapshot for reporting. Callers pass the size on free (they know it; no hidden header).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define NX_LEDGER_OWNERS(X)                                                                  \
	X(config, "parsed configuration and its strings")                                   \
	X(worker_buffers, "per-worker receive/send buffers and batch arrays")               \
	X(query_pool, "per-worker fixed pools of in-flight queries and waiters")            \
	X(exchange_pool, "per-worker fixed pools of pending upstream exchanges")            \
	X(tcp_conns, "TCP client connections: handles and read buffers")                    \
	X(tcp_writes, "queued TCP response copies awaiting the socket")                     \
	X(upstream_tcp, "upstream TCP fallback connections and buffers")                    \
	X(upstream_udp, "upstream UDP socket pool (random ports) and its receive batch")    \
	X(cache_slots, "DNS cache entry slots")                                             \
	X(cache_responses, "DNS cache stored response bytes")                               \
	X(snapshot_map, "blocklist snapshot mapping (file-backed)")                         \
	X(filter_build, "transient blocklist compile and snapshot build memory")            \
	X(filter_rules, "user rules, groups, clients and local records")                    \
	X(querylog_queue, "query-log ring between workers and the writer")                  \
	X(sse_rings, "live-stream subscriber rings")                                        \
	X(sqlite, "SQLite page caches and heap")                                            \
	X(admin_http, "admin HTTP server connections and responses")                        \
	X(tls, "TLS sessions and credentials")                                              \
	X(misc, "small long-lived objects not worth their own owner")              \
	X(doh_sessions, "DoH HTTP/2 sessions: nghttp2 state, stream slots, queued copies")        \
	X(doh_upstream, "DoH upstream HTTP/2 client sessions: nghttp2 state, request slots, bodies") \
	X(rate_limit, "per-client rate-limit table (fixed size, allocated when access.rate_limit.qps > 0)") \
	X(import, "nxdns import: the model read from another server's settings (CLI only)") \
	X(client_names, "client names from PTR lookups: the cache table and its lookup state") \
	X(filter_side, "list rules outside the snapshot: modifiers, regexes, hosts answers") \
	X(sync, "replica sync: its status, and an export document while it is built or applied") \
	X(dnstap_queue, "dnstap export: per-worker event rings and the writer's encode buffers") \
	X(pgsink_queue, "PostgreSQL sink: per-worker record rings and the writer's COPY buffer")

enum nx_owner {
#define NX_OWNER_ENUM(name, help) NX_OWNER_##name,
	NX_LEDGER_OWNERS(NX_OWNER_ENUM)
#undef NX_OWNER_ENUM
	NX_OWNER__COUNT
};

struct nx_ledger_row {
	const char *name; /* static */
	const char *help; /* static */
	int64_t bytes;    /* bytes currently charged */
	int64_t count;    /* live allocations (or mapped objects) */
};

/* malloc/calloc/realloc/free charged to owner. NULL on failure (nothing charged). */
void *nx_mem_alloc(enum nx_owner owner, size_t size);
void *nx_mem_calloc(enum nx_owner owner, size_t n, size_t size);
void *nx_mem_realloc(enum nx_owner owner, void *p, size_t old_size, size_t new_size);
/* free(p) and uncharge size; nx_mem_free(o, NULL, 0) is a no-op. */
void nx_mem_free(enum nx_owner owner, void *p, size_t size);
/* Duplicate a string; charged strlen+1. Free with nx_mem_free(owner, s, strlen(s)+1). */
char *nx_mem_strdup(enum nx_owner owner, const char *s);

/* Record memory obtained outside nx_mem_* (mmap, library allocations of known size). */
void nx_ledger_charge(enum nx_owner owner, int64_t bytes, int64_t count);

/* Bytes the calling thread charged to owner (less what it released) since it started: a
 * thread's own share while others charge the same owner. */
int64_t nx_ledger_thread_bytes(enum nx_owner owner);

/* Copy the current table into rows[NX_OWNER__COUNT]. */
void nx_ledger_read(struct nx_ledger_row rows[NX_OWNER__COUNT]);
int64_t nx_ledger_total(void);

/* Test hook: when set, nx_mem_alloc/calloc/realloc fail after `n` more successes (-1 = never). */
void nx_mem_fail_after(long n);

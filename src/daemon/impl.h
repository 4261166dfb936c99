/*
 * daemon/ internals shared by daemon.c (control thread), worker.c and pipeline.c (workers).
 *
 * Config generations: the control thread publishes a `struct nx_confref` under `cref_lock`;
 * each worker takes a reference when woken (uv_async) and drops its old one; every pending
 * upstream operation holds a reference for its lifetime. The last reference frees the config,
 * on whichever thread drops it. So a reload never waits on in-flight work and a worker never
 * sees a config change in the middle of a query.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "cache/cache.h"
#include "conf/conf.h"
#include "daemon/decide.h"
#include "daemon/lists.h"
#include "filter/rules.h"
#include "dns/msg.h"
#include "net/tcp.h"
#include "net/udp.h"
#include "upstream/upstream.h"

#define NX_MAX_LISTENERS 16      /* listener.dns entries (each gets UDP + TCP per worker) */
#define NX_PENDING_BUCKETS 256   /* coalescing table buckets per worker (chains beyond) */

struct nx_confref {
	struct nx_conf *c;          /* owned */
	atomic_int refs;
	uint64_t gen;
	struct nx_up_server *servers; /* owned: upstream.servers */
	size_t n_servers;
	struct nx_up_server **zone_servers; /* owned: per forward zone, same order as c->zones */
	size_t *zone_n;             /* owned */
	struct nx_filter_rules *rules; /* owned: filter.allow / filter.deny, compiled */
};

void nx_confref_acquire(struct nx_confref *r);
void nx_confref_release(struct nx_confref *r);

struct nx_daemon;

struct waiter;
struct pending;

struct nx_worker {
	struct nx_daemon *d;        /* borrowed: outlives workers */
	unsigned idx;
	uv_thread_t thread;
	uv_loop_t loop;
	uv_async_t wake;            /* config swap or stop */
	struct nx_confref *cref;    /* held reference: the worker's current config */
	struct nx_snapref *snap;    /* held reference: the worker's current blocklist snapshot */
	struct nx_udp_batch *batch; /* owned */
	struct nx_udp_sock *udp[NX_MAX_LISTENERS];
	struct nx_tcp_server *tcp[NX_MAX_LISTENERS];
	size_t n_listen;
	struct nx_upstream *up;     /* owned */
	struct pending *table[NX_PENDING_BUCKETS]; /* in-flight upstream ops by key */
	struct pending *free_pending;
	unsigned n_pending_alloc;
	struct waiter *free_waiters;
	unsigned n_waiters_alloc;
	bool stopping;
	struct nx_cache *cache;     /* borrowed: the daemon's, shared by all workers (NULL = off) */
	uint8_t tx[NX_DNS_MSG_MAX]; /* reply scratch for asynchronous answers */
	uint8_t cbuf[NX_DNS_MSG_MAX]; /* a cache hit's stored message, before relaying */
};

struct nx_daemon {
	uv_loop_t loop;             /* control loop (main thread) */
	pthread_mutex_t cref_lock;
	struct nx_confref *cur;     /* under cref_lock; the daemon holds one reference */
	struct nx_lists lists;      /* control thread; lists.cur under cref_lock */
	_Atomic int64_t pause_until_ms; /* wall clock; filtering paused until then (0 = not) */
	uint64_t gen;
	struct nx_worker *workers;  /* owned array */
	unsigned n_workers;
	atomic_int tcp_open[NX_MAX_LISTENERS]; /* open TCP connections per listener address */
	atomic_int permits_used;    /* process-wide query permits held */
	uv_signal_t sig_hup, sig_term, sig_int;
	uv_timer_t trim;            /* periodic malloc_trim */
	struct nx_admin *admin;
	struct nx_cache *cache;     /* owned; NULL when cache.size is 0 */
	struct nx_fetcher *fetcher; /* owned: list downloads on the control loop */
	uv_timer_t refresh_timer;   /* next scheduled refresh */
	bool refresh_running;
	int refresh_idx;            /* source being downloaded */
	int refresh_only;           /* -1: all URL sources, else one index */
	unsigned refresh_downloaded;
	const char *config_path;    /* borrowed (argv) */
};

/* worker.c */
int nx_worker_init(struct nx_worker *w, struct nx_daemon *d, unsigned idx);
int nx_worker_start(struct nx_worker *w);
void nx_worker_wake(struct nx_worker *w);
void nx_worker_join(struct nx_worker *w);
void nx_worker_deinit(struct nx_worker *w);
struct nx_confref *nx_daemon_current(struct nx_daemon *d); /* acquires a reference */
struct nx_snapref *nx_daemon_current_snap(struct nx_daemon *d); /* acquires a reference */

/* daemon.c, refresh.c (control thread) */
int nx_daemon_sync_lists(struct nx_daemon *d, unsigned flags);
int nx_refresh_start(struct nx_daemon *d);
void nx_refresh_stop(struct nx_daemon *d);
int nx_refresh_now(struct nx_daemon *d, int source); /* -1 = all; NX_ENOSLOT if running */

/* pipeline.c */
size_t nx_pipeline_udp(void *ud, const struct nx_udp_pkt *p, uint8_t *out, size_t cap);
void nx_pipeline_tcp(void *ud, struct nx_tcp_conn *c, const uint8_t *msg, size_t len);
void nx_pipeline_shutdown(struct nx_worker *w);

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
#include "policy/policy.h"
#include "daemon/lists.h"
#include "filter/rules.h"
#include "filter/side.h"
#include "guard/guard.h"
#include "dns/msg.h"
#include "net/reply.h"
#include "net/stream.h"
#include "net/udp.h"
#include "querylog/querylog.h"
#include "upstream/upstream.h"

#define NX_MAX_LISTENERS 16      /* listener.dns entries (each gets UDP + TCP per worker) */
/* Stream listeners per worker: TCP for each listener.dns address, then listener.dot, .doh. */
#define NX_MAX_STREAM_LISTENERS (3 * NX_MAX_LISTENERS)
#define NX_COALESCE_SHARDS 16    /* locks of the process-wide in-flight table */
#define NX_COALESCE_BUCKETS 64   /* buckets per shard (chains beyond): 1024 in all */

/*
 * In-flight upstream operations by key, shared by every worker so that identical concurrent
 * queries make one upstream exchange even when SO_REUSEPORT put their clients on different
 * workers. A shard lock covers the bucket chains and every listed operation's waiter list;
 * it is held for a lookup and a list splice, never across I/O.
 */
struct nx_coalesce_shard {
	pthread_mutex_t lock;
	struct pending *buckets[NX_COALESCE_BUCKETS];
} __attribute__((aligned(64)));

/* An answer built by another worker for a handle this worker owns (a stream connection). */
struct nx_handoff {
	struct nx_handoff *next;
	struct nx_reply to;       /* held by the waiter; released by the receiving worker */
	size_t len;               /* 0: nothing to send (the answer could not be built) */
	uint8_t data[];
};

struct nx_confref {
	struct nx_conf *c;          /* owned */
	atomic_int refs;
	uint64_t gen;
	struct nx_up_server *servers; /* owned: upstream.servers */
	size_t n_servers;
	struct nx_up_server **zone_servers; /* owned: per forward zone, same order as c->zones */
	size_t *zone_n;             /* owned */
	struct nx_filter_rules *rules; /* owned: filter.allow / filter.deny, compiled */
	struct nx_filter_side *user_side; /* owned: those of them in the AdGuard language */
	struct nx_policy_badfilter *badfilter; /* owned: their `||x^$badfilter` and kin, which
						* cancel snapshot entries (NULL: none) */
	struct nx_tls_creds *creds; /* referenced: the DoT/DoH certificate, NULL without those */
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
	uv_prepare_t flush;         /* end of each loop turn: send the queued UDP replies */
	/* The loop turn's clock, read by the first query of a turn (nx_pipeline_query), marked
	 * stale by on_flush before the next poll: arrival times cost no clock read per query. */
	bool clk_fresh;
	uint64_t clk_mono_us;       /* nx_now_mono_us() at the turn's first query */
	int64_t clk_wall_ms;        /* nx_now_wall_ms() at the same moment */
	struct nx_confref *cref;    /* held reference: the worker's current config */
	struct nx_snapref *snap;    /* held reference: the worker's current blocklist snapshot */
	struct nx_udp_batch *batch; /* owned */
	struct nx_udp_sock *udp[NX_MAX_LISTENERS];
	size_t n_udp;
	struct nx_stream_server *streams[NX_MAX_STREAM_LISTENERS]; /* see nx_daemon.stream_open */
	size_t n_streams;
	uint8_t *rx;                /* owned: stream receive scratch (NX_STREAM_RX_SCRATCH) */
	struct nx_upstream *up;     /* owned */
	struct pending *free_pending;
	unsigned n_pending_alloc;
	struct waiter *free_waiters;
	unsigned n_waiters_alloc;
	/* set by the main thread at shutdown, read by this worker on every wake: atomic, as a
	 * wake for a reload can be reading it while the main thread sets it */
	atomic_bool stopping;
	pthread_mutex_t inbox_lock;
	struct nx_handoff *inbox;   /* stream answers from other workers (owned, NX_OWNER_tcp_writes) */
	struct nx_cache *cache;     /* borrowed: the daemon's, shared by all workers (NULL = off) */
	struct nx_qlog *qlog;       /* borrowed: the daemon's query log (NULL = off) */
	uint8_t tx[NX_DNS_MSG_MAX]; /* reply scratch for asynchronous answers */
	uint8_t cbuf[NX_DNS_MSG_MAX]; /* a cache hit's stored message, before relaying */
	struct nx_dnstap *dnstap;   /* borrowed: the daemon's dnstap export (NULL = off) */
	struct nx_pgsink *pgsink;   /* borrowed: the daemon's PostgreSQL sink (NULL = off) */
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
	/* Open connections per stream listener, all workers: [0, n_dns) TCP on listener.dns,
	 * then listener.dot, then listener.doh (the order nx_worker_init opens them in). */
	atomic_int stream_open[NX_MAX_STREAM_LISTENERS];
	atomic_int permits_used;    /* process-wide query permits held */
	struct nx_coalesce_shard coalesce[NX_COALESCE_SHARDS];
	uv_barrier_t stop_barrier;  /* workers finish their upstream work before any closes sockets */
	uv_signal_t sig_hup, sig_term, sig_int, sig_usr1;
	unsigned refresh_flags;     /* NX_LISTS_* for the sync that ends the running refresh */
	uv_timer_t trim;            /* periodic malloc_trim */
	struct nx_admin *admin;
	struct nx_cache *cache;     /* owned; NULL when cache.size is 0 */
	struct nx_qlog *qlog;       /* owned; NULL when logging.query_log is off */
	struct nx_fetcher *fetcher; /* owned: list downloads on the control loop */
	uv_timer_t refresh_timer;   /* next scheduled refresh */
	bool refresh_running;
	int refresh_idx;            /* source being downloaded */
	int refresh_only;           /* -1: all URL sources, else one index */
	unsigned refresh_downloaded;
	uint64_t refresh_first_ms;  /* delay of the first scheduled round (0: the default) */
	const char *config_path;    /* borrowed (argv) */
	/* owned: the rate-limit table, created by the control thread the first time a config
	 * turns access.rate_limit on and kept until exit (workers load it acquire; NULL = none) */
	struct nx_guard_rl *_Atomic rate_limit;
	atomic_bool serving;        /* DNS listeners answer (false during the first list load) */
	uv_timer_t watchdog;        /* WATCHDOG=1 to the service manager, when it asked */
	struct nx_names *names;     /* owned: client names from PTR lookups (control loop) */
	struct nx_confref *boot;    /* held reference: the generation the process started with
				     * (restart keys keep its values until a restart) */
	struct nx_sync *sync;       /* owned: following sync.primary (idle without one) */
	struct nx_dnstap *dnstap;   /* owned; NULL until a config turns dnstap on (and it could
				     * be set up), then kept until the daemon stops */
	bool dnstap_on;             /* its writer runs (control thread) */
	/* what the workers push to: d->dnstap while on, else NULL (dnstap_glue.c) */
	struct nx_dnstap *_Atomic dnstap_live;
	struct nx_pgsink *pgsink;   /* owned; NULL when logging.postgresql is off or failed */
};

/* worker.c */
int nx_worker_init(struct nx_worker *w, struct nx_daemon *d, unsigned idx);
int nx_worker_start(struct nx_worker *w);
void nx_worker_wake(struct nx_worker *w);
void nx_worker_join(struct nx_worker *w);
void nx_worker_deinit(struct nx_worker *w);
struct nx_confref *nx_daemon_current(struct nx_daemon *d); /* acquires a reference */
struct nx_snapref *nx_daemon_current_snap(struct nx_daemon *d); /* acquires a reference */

/* certs.c (control thread): the DoT/DoH server credentials for config c, or NULL when no such
 * listener is configured. On a load error the previous ones are kept (referenced again) when
 * there are any, else the error is logged and returned. */
struct nx_tls_creds;
int nx_daemon_load_creds(const struct nx_conf *c, struct nx_tls_creds *prev,
			 struct nx_tls_creds **out);

/* daemon.c, refresh.c (control thread) */
int nx_daemon_sync_lists(struct nx_daemon *d, unsigned flags);
/* admin_glue.c: the control socket and the live tap, after the privilege drop */
void nx_daemon_control_start(struct nx_daemon *d);
int nx_daemon_reload(struct nx_daemon *d, char *err, size_t errlen);
int nx_refresh_start(struct nx_daemon *d);
void nx_refresh_stop(struct nx_daemon *d);
int nx_refresh_now(struct nx_daemon *d, int source, unsigned flags); /* -1 = all; NX_ENOSLOT if running */
/*
 * The start's downloads (before the first list load, DNS not yet answering): every enabled URL
 * source with no list on disk, in parallel, for at most filter.first_boot_timeout, running the
 * control loop meanwhile (the admin answers, changes get 503 busy). A source that fails or is
 * cut off is logged, counted and left out; the others go on. Returns how many sources it waited
 * for (0: none needed, the common boot with bodies on disk: no network wait at all).
 */
unsigned nx_refresh_first_boot(struct nx_daemon *d);

/* sync_glue.c (control thread): a replica's pull (src/sync/); the admin's sync hooks */
struct nx_sync;
int nx_daemon_sync_start(struct nx_daemon *d);
void nx_daemon_sync_stop(struct nx_daemon *d);
json_t *nx_daemon_sync_status(void *ud);
int nx_daemon_sync_now(void *ud);
/* dnstap_glue.c: start/stop on the control thread (start before the workers, stop after
 * them), reconfigure at each reload before the new generation is published (c: the new
 * config); nx_daemon_dnstap_worker on a worker as it takes a generation (and once before it
 * starts): its export pointer and its upstream engine's observer (dnstap.forwarder);
 * nx_daemon_dnstap_answer on a worker, from the pipeline's log_answer. */
struct nx_qlog_rec;
int nx_daemon_dnstap_start(struct nx_daemon *d);
void nx_daemon_dnstap_reconfigure(struct nx_daemon *d, const struct nx_conf *c);
void nx_daemon_dnstap_stop(struct nx_daemon *d);
void nx_daemon_dnstap_worker(struct nx_worker *w);
void nx_daemon_dnstap_answer(struct nx_worker *w, const struct nx_reply *to, unsigned proto,
			     const struct sockaddr *client, const struct nx_qlog_rec *rec,
			     uint64_t t0_us, const uint8_t *reply, size_t rlen);

/* pgsink_glue.c (control thread): start before the workers, stop after them; the pipeline
 * pushes from log_answer (nx_pgsink_push) */
int nx_daemon_pgsink_start(struct nx_daemon *d);
void nx_daemon_pgsink_stop(struct nx_daemon *d);
void nx_daemon_pgsink_reconfigure(struct nx_daemon *d);

/* qlog_glue.c (control thread) */
int nx_daemon_qlog_start(struct nx_daemon *d);
void nx_daemon_qlog_stop(struct nx_daemon *d);
void nx_daemon_qlog_reconfigure(struct nx_daemon *d);

/* pipeline.c */
/* The one entry for a query from any transport: an nx_query_cb (net/reply.h). */
int nx_pipeline_query(void *ud, const struct nx_reply *r, const uint8_t *msg, size_t len,
		      bool truncated, uint8_t *out, size_t cap);
void nx_pipeline_shutdown(struct nx_worker *w);
void nx_pipeline_drain_inbox(struct nx_worker *w);

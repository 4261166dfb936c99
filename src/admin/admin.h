/*
 * Admin HTTP listener: /metrics, /healthz, the JSON API with its authentication (sessions with
 * CSRF tokens, API tokens, the first-run setup token; src/admin/README.md) and the live query
 * stream (Server-Sent Events, fed by nx_admin_live_publish).
 *
 * libmicrohttpd runs without threads of its own, driven from the control thread's libuv loop:
 * MHD's epoll fd is watched with a uv_poll and MHD's next timeout re-arms a uv_timer after each
 * MHD_run(). So every request handler, every hook below and every metrics builder call runs on
 * the control thread, the one that called nx_admin_start(); nothing here is thread-safe except
 * nx_admin_live_publish().
 *
 * Ownership: struct nx_admin is owned by the caller of nx_admin_start() and released by
 * nx_admin_stop() (its memory once the loop has run the handles' close callbacks). Every byte the
 * server holds (its state, request bodies, response buffers, an estimate per MHD connection) is
 * charged to NX_OWNER_admin_http and returns to zero after stop.
 *
 * The metrics builder (nx_metrics_*) writes Prometheus text exposition 0.0.4 into a growable
 * buffer with a sticky error: after the first misuse (bad name, sample outside its family,
 * counter not ending in _total, buffer cap) nothing more is written and the scrape answers 500,
 * so an invalid exposition is never served. The daemon appends its own families through
 * nx_admin_hooks.metrics_extra.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "conf/conf.h"

/* Per-connection limits. Worst-case admin memory = connections x (pool + body) ~ 2.5 MiB. */
#define NX_ADMIN_MAX_CONNECTIONS 32 /* a browser opens ~6, plus scrapers, CLI and SSE streams */
#define NX_ADMIN_CONN_POOL_BYTES (16 * 1024) /* MHD per-connection pool: request line+headers */
#define NX_ADMIN_MAX_BODY (64 * 1024)	     /* settings/rule edits are a few KiB; bigger → 413 */
#define NX_ADMIN_IDLE_TIMEOUT_S 30	     /* idle keep-alive connections are closed after this */
/* A connection that has not sent a whole request line and headers within this many seconds of
 * silence is closed: a half-open connection holds one of the NX_ADMIN_MAX_CONNECTIONS slots. */
#define NX_ADMIN_HEADER_TIMEOUT_S 10
/* Open connections per client address (IPv4, or an IPv6 /64): one host cannot take every slot.
 * A browser opens ~6, plus a live stream and a CLI call; the others stay for everyone else. */
#define NX_ADMIN_MAX_CONNECTIONS_PER_ADDR 10
#define NX_ADMIN_LISTEN_BACKLOG 64
/* The pause hook's "until resumed": INT64_MAX ms is later than any wall clock. */
#define NX_ADMIN_PAUSE_UNTIL_RESUMED INT64_MAX

/* Metrics exposition limits. */
#define NX_METRICS_INITIAL_BYTES (16 * 1024)   /* first scrape; later ones start at the last size */
#define NX_METRICS_MAX_BYTES (4 * 1024 * 1024) /* beyond this a label is unbounded: a bug → 500 */
#define NX_METRICS_NAME_MAX 128		       /* metric family name, bytes without NUL */

struct nx_admin;
struct nx_metrics_buf;
struct nx_tls_creds;

/* Callbacks the daemon provides. All run on the control thread; any may be NULL. */
struct nx_admin_hooks {
	/* Append daemon-owned families (per-upstream series, cache, snapshot, threads) to a
	 * /metrics scrape, after the built-in ones. Errors go into mb (sticky). */
	void (*metrics_extra)(struct nx_metrics_buf *mb, void *ud);
	/* /healthz answers 200 only when this returns true (NULL: always ready). */
	bool (*ready)(void *ud);
	/*
	 * The configuration in effect, borrowed until the next reload. The server reads admin.*
	 * from it on every request (password hash, tokens, session TTL, metrics_auth), the TLS
	 * files at start, its `path` when the API edits the file, and the settings view.
	 * NULL (or a NULL answer): no password can exist, so every authenticated route answers
	 * 401 and nothing can be set up; /metrics and /healthz stay open.
	 */
	const struct nx_conf *(*conf)(void *ud);
	/*
	 * Reload the config file as SIGHUP does, after the API rewrote it (settings, setup
	 * password, tokens). Returns 0 once the new config is in effect (conf() returns it), or a
	 * negative code with a message in err (NUL-terminated). NULL: the API refuses to edit the
	 * file (503), since an edit that is not applied would surprise.
	 */
	int (*reload)(void *ud, char *err, size_t errlen);
	/* Monotonic milliseconds for session expiry and login limits (tests drive it). NULL:
	 * nx_now_mono_ms(). */
	uint64_t (*now_ms)(void *ud);
	/* filter.sources status as JSON: [{name, enabled, url|path, format, groups, list, wild,
	 * allow, skipped, fetched_at, compiled_at, last_error, errors}] (new reference) */
	json_t *(*sources_status)(void *ud);
	/* Start a refresh of one source (name) or all (NULL). 0, NX_ENOTFOUND, NX_ENOSLOT
	 * (running). */
	int (*refresh)(void *ud, const char *source);
	/* Pause filtering until until_ms (wall clock, ms; 0 = resume; NX_ADMIN_PAUSE_UNTIL_RESUMED
	 * = no end: later than any clock, so "now < until" needs no special case). Returns 0. */
	int (*pause)(void *ud, int64_t until_ms);
	int64_t (*paused_until)(void *ud); /* 0 = not paused */
	/* The matcher's verdict, as `nxdns lookup`: {name, action, reason, matched, source}, for a
	 * query of qtype (host order) from the client address and DoH/DoT client id (each may be
	 * NULL: the default group, no id). NULL + *err text on a bad name/client. */
	json_t *(*lookup)(void *ud, const char *name, uint16_t qtype, const char *client,
			  const char *client_id, const char **err);
	/* The DoT/DoH listeners' certificate in effect (borrowed until the next reload), NULL
	 * without those listeners. The Apple profiles embed it when it is the self-signed one. */
	struct nx_tls_creds *(*tls_creds)(void *ud);
	/* The configuration the process started with, borrowed for the server's lifetime: the
	 * settings API compares restart keys with it (a running value is the boot one until a
	 * restart, however many reloads came since). NULL: compared with the config in effect
	 * before the change. */
	const struct nx_conf *(*boot_conf)(void *ud);
	/* The cached PTR name of a client address text (from the forward zones), or NULL (none,
	 * not known yet: a lookup may start, never waited for). Valid until the next call. */
	const char *(*client_ptr)(void *ud, const char *addr);
	/* Does some client address have this PTR name (for client=<name>)? */
	bool (*client_ptr_named)(void *ud, const char *name);
	/* A replica's sync (src/sync/sync.h): GET /api/sync/status's document (new reference)
	 * and POST /api/sync/now (0 started, NX_ENOSLOT running, NX_ENOTFOUND not a replica).
	 * NULL: this server is no replica. */
	json_t *(*sync_status)(void *ud);
	int (*sync_now)(void *ud);
	/* Commit the query-log records the writer holds (logging.commit_interval), waiting a
	 * bounded time, before an API read of the log, so a page shows the newest queries. NULL:
	 * nothing held (no query log). Called on the control thread. */
	void (*qlog_commit)(void *ud);
	void *ud; /* borrowed: passed to every hook; outlives the server (daemon state) */
};

/*
 * Bind `listen` (SO_REUSEADDR; IPV6_V6ONLY off, so [::]:port also takes IPv4), start MHD on it
 * and register its epoll fd and timer on `loop`. When hooks->conf has admin.tls, the listener
 * speaks HTTPS only, with tls.cert and tls.key or, without them, the self-signed certificate of
 * the DoT/DoH listeners in state_dir/tls/ (generated here when missing; files read here: a
 * change needs a restart).
 * Without a password hash in the config a one-time setup token is logged (WARN, "admin setup
 * token: ...").
 * Returns 0 and *out, or -errno (socket/bind/listen: the message names the address and is
 * logged under "admin"; TLS files: the message names the file), -ENOMEM, or NX_ECONFIG (MHD
 * refused to start, or libmicrohttpd lacks TLS). On error nothing stays registered on the loop
 * (except, when libuv cannot watch MHD's epoll fd, two handles already closing: run the loop).
 * `hooks` is copied; NULL means no hooks.
 */
/*
 * After a config reload: read tls.cert / tls.key (or the generated pair) again for the admin's
 * HTTPS; handshakes from then on get it, the listener and its sessions stay. On error the
 * running certificate is kept (logged) and the error returned. No-op without admin.tls.
 */
int nx_admin_tls_reload(struct nx_admin *a);

int nx_admin_start(uv_loop_t *loop, const struct nx_addr *listen,
		   const struct nx_admin_hooks *hooks, struct nx_admin **out);

/*
 * Close the listener and every connection (in-flight requests are dropped), close the loop
 * handles. The memory is released in the close callbacks, so the loop must run once more
 * (uv_run) before uv_loop_close() can succeed. NULL is a no-op. Not from inside a handler.
 */
void nx_admin_stop(struct nx_admin *a);

/*
 * Long work on the control loop (a list compile and snapshot build) calls nx_admin_service
 * from its progress hook: it answers the admin requests that are ready, then waits
 * NX_ADMIN_SERVICE_MS or twice as long as that took, whichever is longer (the work keeps at
 * least two thirds of the thread), so /metrics, /healthz and reads keep answering during a
 * rebuild. It does nothing when called from inside an admin handler (libmicrohttpd is not
 * re-entrant): a rebuild a request starts itself (a settings or source change) serves nothing
 * meanwhile. nx_admin_set_busy marks that work:
 * meanwhile requests other than GET/HEAD, login and logout answer 503 with Retry-After (a
 * change could start another rebuild inside this one), and /metrics shows
 * nxdns_lists_rebuilding 1. NULL a: no-ops.
 */
#define NX_ADMIN_SERVICE_MS 20
void nx_admin_service(struct nx_admin *a);
void nx_admin_set_busy(struct nx_admin *a, bool busy);

/* The bound port (useful after listening on port 0). */
uint16_t nx_admin_port(const struct nx_admin *a);

/* ---- live query stream (GET /api/queries/live) ------------------------------------------- */

struct nx_qlog_rec;

/*
 * Hand query-log records to the live stream. THREAD-SAFE: meant to be called from the query-log
 * writer thread as its tap (nx_qlog_set_tap(q, tap, admin) with a tap that calls this), or from
 * any thread. Returns at once when nobody follows the stream (an atomic count). Otherwise the
 * records are copied into a bounded handoff queue (NX_ADMIN_LIVE_HANDOFF records; when full the
 * rest are dropped and counted, reason handoff_full) and the control loop is woken; it formats
 * each record once and appends it to every subscriber. Never blocks on the network; holds one
 * mutex for a memcpy. `recs` are borrowed for the call. NULL a is a no-op.
 * The tap must be removed (nx_qlog_set_tap(q, NULL, NULL), which waits for a running tap) before
 * nx_admin_stop(): publishing into a stopped server is a use after free.
 */
void nx_admin_live_publish(struct nx_admin *a, const struct nx_qlog_rec *recs, size_t n);

/* ---- metrics builder ---------------------------------------------------------------------- */

enum nx_metric_type { NX_METRIC_COUNTER, NX_METRIC_GAUGE, NX_METRIC_HISTOGRAM };

/*
 * A stand-alone builder (tests, CLI). The server makes its own for each scrape.
 * max_bytes caps the text (0: NX_METRICS_MAX_BYTES). NULL on allocation failure.
 */
struct nx_metrics_buf *nx_metrics_buf_new(size_t max_bytes);
void nx_metrics_buf_free(struct nx_metrics_buf *mb);
/* The text so far (NUL-terminated; borrowed until the next call) and its length. */
const char *nx_metrics_buf_text(const struct nx_metrics_buf *mb, size_t *len);
/* 0, or the first error: NX_EMALFORMED (misuse), NX_ELIMIT (cap), -ENOMEM. */
int nx_metrics_buf_error(const struct nx_metrics_buf *mb);

/*
 * Start a family: writes "# HELP name help" and "# TYPE name type". The name must match
 * [a-zA-Z_:][a-zA-Z0-9_:]*; a counter's must end in "_total" (its samples carry the same name,
 * as in text format 0.0.4); help must be non-empty (escaped here). Each family once per scrape:
 * the caller keeps names unique (the test suite's parser checks it).
 */
void nx_metrics_family(struct nx_metrics_buf *mb, const char *name, enum nx_metric_type type,
		       const char *help);

/*
 * One sample of the current family. `name` is the family name (counter, gauge) or family name +
 * "_bucket" / "_sum" / "_count" (histogram). Labels follow as (key, value) string pairs ended by
 * NULL; keys must match [a-zA-Z_][a-zA-Z0-9_]* and not start with "__"; values are escaped
 * (backslash, double quote, newline). Example:
 *     nx_metrics_sample_u64(mb, "nxdns_upstream_exchanges_total", n,
 *                           "server", u->text, "outcome", "timeout", NULL);
 */
void nx_metrics_sample_u64(struct nx_metrics_buf *mb, const char *name, uint64_t value, ...)
    __attribute__((sentinel));
void nx_metrics_sample_i64(struct nx_metrics_buf *mb, const char *name, int64_t value, ...)
    __attribute__((sentinel));
void nx_metrics_sample_f64(struct nx_metrics_buf *mb, const char *name, double value, ...)
    __attribute__((sentinel));

/*
 * All series of one histogram child (the family must be the current one, of type HISTOGRAM):
 * `counts[i]` is the number of observations in (bounds[i-1], bounds[i]] for i < n and
 * counts[n] those above bounds[n-1] (not cumulative: this writes the cumulative _bucket series,
 * the +Inf bucket, _sum and _count). bounds ascending. Labels as for nx_metrics_sample_*
 * ("le" is added here and must not be passed).
 */
void nx_metrics_histogram(struct nx_metrics_buf *mb, const char *family, const double *bounds,
			  const uint64_t *counts, size_t n, double sum, ...)
    __attribute__((sentinel));

/* ---- process figures (also for /api/memory and `nxdns memory` later) ---------------------- */

struct nx_process_figures {
	int64_t vmrss_bytes;	   /* /proc/self/status VmRSS */
	int64_t rssanon_bytes;	   /* RssAnon */
	int64_t rssfile_bytes;	   /* RssFile */
	int64_t vmhwm_bytes;	   /* VmHWM: peak RSS */
	int64_t threads;	   /* Threads */
	int64_t heap_in_use_bytes; /* mallinfo2: uordblks + hblkhd (allocated, incl. mmapped) */
	int64_t heap_free_bytes;   /* mallinfo2: fordblks (free but retained by malloc) */
	int64_t code_bytes;        /* /proc/self/smaps: resident pages of file mappings other than
				    * the blocklist snapshot: the executable and shared libraries */
	int64_t snapshot_resident_bytes; /* resident pages of the mapped snapshot (*.nxs) */
};

/* Fill *out (fields that could not be read are -1). 0, or -errno when /proc is unreadable. */
int nx_admin_read_process(struct nx_process_figures *out);

/*
 * Worker threads: one libuv loop each, owning its UDP sockets and stream listeners (TCP, DoT,
 * DoH; SO_REUSEPORT), its upstream engine and its pools. Every listener hands its queries to the
 * one pipeline entry, nx_pipeline_query. Sockets and handles are set up by the control thread before
 * the worker's thread starts (the loop is not running yet), so bind errors are reported
 * synchronously at startup.
 */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "daemon/impl.h"

static void stream_limits(const struct nx_conf *c, struct nx_stream_limits *lim)
{
	lim->max_conns = c->dns_max_connections;
	lim->idle_ms = c->tcp_idle_timeout_ms;
	lim->read_ms = c->tcp_read_timeout_ms;
	lim->handshake_ms = c->tls_handshake_timeout_ms;
	lim->permit_wait_ms = c->permit_wait_ms;
	lim->max_streams = c->doh_max_streams;
	snprintf(lim->server_name, sizeof(lim->server_name), "%s",
		 c->tls_server_name ? c->tls_server_name : "");
}

static void on_close_noop(uv_handle_t *h)
{
}

/*
 * Stop order matters with the shared in-flight table: every worker first finishes its upstream
 * operations (answering waiters that may sit on other workers' sockets), then all meet at the
 * barrier, then each drains the stream answers handed to it and closes its sockets.
 */
static void stop_worker(struct nx_worker *w, bool barrier)
{
	if (w->up) {
		nx_upstream_shutdown(w->up);
	}
	if (barrier) {
		uv_barrier_wait(&w->d->stop_barrier);
	}
	nx_pipeline_drain_inbox(w);
	if (w->batch) {
		nx_udp_flush_later(w->batch); /* answers of the operations shutdown just ended */
		uv_close((uv_handle_t *)&w->flush, on_close_noop);
	}
	for (size_t i = 0; i < w->n_udp; i++) {
		nx_udp_close(w->udp[i]);
		w->udp[i] = NULL;
	}
	for (size_t i = 0; i < w->n_streams; i++) {
		nx_stream_close(w->streams[i]);
		w->streams[i] = NULL;
	}
	uv_close((uv_handle_t *)&w->wake, on_close_noop);
}

static void on_flush(uv_prepare_t *p)
{
	struct nx_worker *w = p->data;
	nx_udp_flush_later(w->batch);
	w->clk_fresh = false; /* the next poll brings a new batch: read the clock again */
}

static void on_wake(uv_async_t *a)
{
	struct nx_worker *w = a->data;
	nx_pipeline_drain_inbox(w);
	/* A config swap: take the new generation, drop ours. */
	struct nx_confref *r = nx_daemon_current(w->d);
	if (r != w->cref) {
		nx_confref_release(w->cref);
		w->cref = r;
		struct nx_stream_limits lim;
		stream_limits(r->c, &lim);
		for (size_t i = 0; i < w->n_streams; i++) {
			nx_stream_set_limits(w->streams[i], &lim);
			nx_stream_set_creds(w->streams[i], r->creds); /* a certificate swap */
		}
		nx_upstream_set_max_ops(w->up, r->c->permits);
		nx_daemon_dnstap_worker(w); /* on, off or forwarder changed by a reload */
	} else {
		nx_confref_release(r);
	}
	struct nx_snapref *s = nx_daemon_current_snap(w->d);
	if (s != w->snap) {
		nx_snapref_release(w->snap);
		w->snap = s;
	} else {
		nx_snapref_release(s);
	}
	if (atomic_load(&w->stopping)) {
		stop_worker(w, true);
	}
}

/* Open the next stream listener (its shared connection counter is the next slot). */
static int open_stream(struct nx_worker *w, enum nx_proto proto, const struct nx_addr *a,
		       int listener)
{
	if (w->n_streams >= NX_MAX_STREAM_LISTENERS) {
		return NX_ELIMIT;
	}
	struct nx_stream_limits lim;
	stream_limits(w->cref->c, &lim);
	struct nx_stream_env env = {
		.rx = w->rx,
		.cb = nx_pipeline_query,
		.ud = w,
		.out = w->tx,
	};
	size_t k = w->n_streams;
	int rc = nx_stream_listen(&w->loop, proto, a, listener, &w->d->stream_open[k], &lim,
				  proto == NX_PROTO_TCP ? NULL : w->cref->creds, &env, &w->streams[k]);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "daemon", "cannot listen on %s %s: %s", nx_proto_name(proto),
		       a->text, nx_strerror(rc));
		return rc;
	}
	w->n_streams++;
	return 0;
}

int nx_worker_init(struct nx_worker *w, struct nx_daemon *d, unsigned idx)
{
	memset(w, 0, sizeof(*w));
	w->idx = idx;
	int rc = uv_loop_init(&w->loop);
	if (rc < 0) {
		return rc;
	}
	w->d = d;
	w->cache = d->cache;
	w->qlog = d->qlog;
	w->pgsink = d->pgsink;
	pthread_mutex_init(&w->inbox_lock, NULL);
	w->cref = nx_daemon_current(d);
	w->snap = nx_daemon_current_snap(d);
	const struct nx_conf *c = w->cref->c;
	uv_async_init(&w->loop, &w->wake, on_wake);
	w->wake.data = w;
	w->batch = nx_udp_batch_new();
	if (!w->batch) {
		return -ENOMEM;
	}
	uv_prepare_init(&w->loop, &w->flush);
	w->flush.data = w;
	uv_prepare_start(&w->flush, on_flush);
	rc = nx_upstream_new(&w->loop, c->permits, &w->up);
	if (rc < 0) {
		return rc;
	}
	w->rx = nx_mem_alloc(NX_OWNER_worker_buffers, NX_STREAM_RX_SCRATCH);
	if (!w->rx) {
		return -ENOMEM;
	}
	size_t n = NX_MIN(c->n_listen_dns, NX_MAX_LISTENERS);
	for (size_t i = 0; i < n; i++) {
		const struct nx_addr *a = &c->listen_dns[i];
		rc = nx_udp_open(&w->loop, a, (int)i, w->batch, nx_pipeline_query, w, &w->udp[i]);
		if (rc < 0) {
			nx_log(NX_LOG_ERR, "daemon", "cannot listen on udp %s: %s", a->text,
			       nx_strerror(rc));
			return rc;
		}
		w->n_udp++;
	}
	for (size_t i = 0; i < n; i++) {
		rc = open_stream(w, NX_PROTO_TCP, &c->listen_dns[i], (int)i);
		if (rc < 0) {
			return rc;
		}
	}
	for (size_t i = 0; i < c->n_listen_dot && rc == 0; i++) {
		rc = open_stream(w, NX_PROTO_DOT, &c->listen_dot[i], (int)i);
	}
	for (size_t i = 0; i < c->n_listen_doh && rc == 0; i++) {
		rc = open_stream(w, NX_PROTO_DOH, &c->listen_doh[i], (int)i);
	}
	return rc;
}

static void worker_main(void *arg)
{
	struct nx_worker *w = arg;
	nx_stats_thread_register();
	uv_run(&w->loop, UV_RUN_DEFAULT);
}

int nx_worker_start(struct nx_worker *w)
{
	return uv_thread_create(&w->thread, worker_main, w);
}

void nx_worker_wake(struct nx_worker *w)
{
	uv_async_send(&w->wake);
}

void nx_worker_join(struct nx_worker *w)
{
	uv_thread_join(&w->thread);
}

/* After the thread has exited (or was never started): release everything. */
void nx_worker_deinit(struct nx_worker *w)
{
	if (!w->d) {
		return;
	}
	if (!uv_is_closing((uv_handle_t *)&w->wake)) {
		stop_worker(w, false);
	}
	uv_run(&w->loop, UV_RUN_DEFAULT); /* run close callbacks */
	nx_pipeline_shutdown(w);
	nx_upstream_free(w->up);
	nx_udp_batch_free(w->batch);
	nx_mem_free(NX_OWNER_worker_buffers, w->rx, NX_STREAM_RX_SCRATCH);
	int rc = uv_loop_close(&w->loop);
	if (rc < 0) {
		nx_log(NX_LOG_WARN, "daemon", "worker %u loop close: %s", w->idx, uv_strerror(rc));
	}
	nx_confref_release(w->cref);
	w->cref = NULL;
	nx_snapref_release(w->snap);
	w->snap = NULL;
	pthread_mutex_destroy(&w->inbox_lock);
	w->d = NULL;
}

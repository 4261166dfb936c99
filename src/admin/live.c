/*
 * The live query stream: GET /api/queries/live as Server-Sent Events.
 *
 * The hub sits between the query-log writer thread and the control thread's HTTP server:
 *   writer thread: nx_admin_live_publish() copies records into the handoff queue (mutex, bounded;
 *     full -> dropped, counted handoff_full) and wakes the control loop (uv_async_send);
 *   control thread: on_async() takes the queue in chunks, formats each record once
 *     ("data: {json}\n\n") and appends it to every subscriber's byte ring, resumes the suspended
 *     subscribers and lets MHD send before the next chunk.
 * A subscriber is one MHD response from a content-reader callback (size unknown: chunked):
 * the callback copies bytes out of the ring, and when the ring is empty it suspends the
 * connection and returns 0; appending resumes it. An append that does not fit ends the stream
 * (slow_subscriber): the ring is freed at once, the reader answers end-with-error, and a client
 * that does not read is closed after NX_ADMIN_LIVE_CUTOFF_TIMEOUT_S (MHD calls no reader while
 * its socket is full). An EventSource reconnects by itself after "retry:" ms.
 *
 * Memory (NX_OWNER_sse_rings): per subscriber its struct and ring, from subscribe to
 * unsubscribe; the handoff queue (+ a chunk of scratch records) only while subscribers exist.
 * logging.live_max_subscribers is a cap, not a reservation.
 *
 * Threading: everything but nx_admin_live_publish() runs on the control thread.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "admin/impl.h"
#include "upstream/upstream.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "querylog/querylog.h"

#define BLOCK_BYTES 4096 /* MHD's read size per reader call */

struct nx_admin_live_sub {
	struct nx_admin_live_sub *prev, *next; /* in live.subs while listed */
	struct nx_admin *admin;		       /* borrowed: outlives its connections */
	struct MHD_Connection *conn; /* borrowed: valid until sub_free (MHD's free callback) */
	char *ring;		     /* owned (sse_rings, cap bytes); NULL once the stream ended */
	size_t cap;
	size_t head;	/* first unsent byte */
	size_t len;	/* unsent bytes */
	bool listed;	/* in live.subs and counted in n_subs / active */
	bool suspended; /* the reader suspended the connection (ring empty) */
	bool ended;	/* cut off or stopping: the reader ends the stream */
	bool sent;	/* an event went in since the last keepalive tick */
};

static const size_t queue_bytes =
    (NX_ADMIN_LIVE_HANDOFF + NX_ADMIN_LIVE_CHUNK) * sizeof(struct nx_qlog_rec);

/* ---- publisher side (any thread) ------------------------------------------------------------- */

void nx_admin_live_publish(struct nx_admin *a, const struct nx_qlog_rec *recs, size_t n)
{
	if (!a || n == 0 || atomic_load_explicit(&a->live.active, memory_order_relaxed) == 0) {
		return;
	}
	struct nx_admin_live *l = &a->live;
	uv_mutex_lock(&l->mu);
	if (l->q) {
		size_t take = NX_MIN(n, (size_t)NX_ADMIN_LIVE_HANDOFF - l->q_len);
		for (size_t i = 0; i < take; i++) {
			size_t at = (l->q_head + l->q_len) % NX_ADMIN_LIVE_HANDOFF;
			memcpy(&l->q[at], &recs[i], sizeof(recs[i]));
			l->q_len++;
		}
		l->q_dropped += n - take;
		/* Under the lock: stop clears q under it before it closes the handle. */
		uv_async_send(&l->async);
	}
	uv_mutex_unlock(&l->mu);
}

/* ---- the hub's buffers: only while subscribers exist ----------------------------------------- */

static int hub_activate(struct nx_admin *a)
{
	struct nx_admin_live *l = &a->live;
	if (l->q) {
		return 0;
	}
	struct nx_qlog_rec *q = nx_mem_alloc(NX_OWNER_sse_rings, queue_bytes);
	if (!q) {
		return -ENOMEM;
	}
	uv_mutex_lock(&l->mu);
	l->q = q;
	l->q_head = l->q_len = 0;
	uv_mutex_unlock(&l->mu);
	return 0;
}

static void hub_release_if_idle(struct nx_admin *a)
{
	struct nx_admin_live *l = &a->live;
	if (l->n_subs > 0 || l->draining || !l->q) {
		return;
	}
	uv_mutex_lock(&l->mu);
	struct nx_qlog_rec *q = l->q;
	l->q = NULL;
	l->q_head = l->q_len = 0;
	uint64_t dropped = l->q_dropped;
	l->q_dropped = 0;
	uv_mutex_unlock(&l->mu);
	a->ctr[NX_ADMIN_CTR_SSE_HANDOFF_FULL] += dropped;
	nx_mem_free(NX_OWNER_sse_rings, q, queue_bytes);
	if (!l->stopping) {
		uv_timer_stop(&l->keepalive);
	}
}

/* ---- subscribers ----------------------------------------------------------------------------- */

static void sub_list(struct nx_admin *a, struct nx_admin_live_sub *s)
{
	struct nx_admin_live *l = &a->live;
	s->next = l->subs;
	if (l->subs) {
		l->subs->prev = s;
	}
	l->subs = s;
	s->listed = true;
	l->n_subs++;
	l->peak = NX_MAX(l->peak, l->n_subs);
	atomic_fetch_add_explicit(&l->active, 1, memory_order_relaxed);
}

static void sub_unlist(struct nx_admin_live_sub *s)
{
	if (!s->listed) {
		return;
	}
	struct nx_admin *a = s->admin;
	struct nx_admin_live *l = &a->live;
	if (s->prev) {
		s->prev->next = s->next;
	} else {
		l->subs = s->next;
	}
	if (s->next) {
		s->next->prev = s->prev;
	}
	s->prev = s->next = NULL;
	s->listed = false;
	l->n_subs--;
	atomic_fetch_sub_explicit(&l->active, 1, memory_order_relaxed);
	hub_release_if_idle(a);
}

static void ring_free(struct nx_admin_live_sub *s)
{
	nx_mem_free(NX_OWNER_sse_rings, s->ring, s->ring ? s->cap : 0);
	s->ring = NULL;
	s->head = s->len = 0;
}

/* MHD is done with the response (connection closed, or the queueing failed). */
static void sub_free(void *cls)
{
	struct nx_admin_live_sub *s = cls;
	sub_unlist(s);
	ring_free(s);
	nx_mem_free(NX_OWNER_sse_rings, s, sizeof(*s));
}

static void sub_wake(struct nx_admin_live_sub *s)
{
	if (s->suspended) {
		s->suspended = false;
		MHD_resume_connection(s->conn);
		nx_admin_kick(s->admin);
	}
}

/* End the stream: the ring goes now, the connection when MHD next looks at it. */
static void sub_end(struct nx_admin_live_sub *s)
{
	struct nx_admin *a = s->admin;
	s->ended = true;
	ring_free(s);
	sub_unlist(s);
	sub_wake(s);
	if (!a->live.stopping) {
		/* A client that does not read is never asked for more data: time it out. */
		MHD_set_connection_option(s->conn, MHD_CONNECTION_OPTION_TIMEOUT,
					  (unsigned)NX_ADMIN_LIVE_CUTOFF_TIMEOUT_S);
		nx_admin_kick(a);
	}
}

static void sub_append(struct nx_admin_live_sub *s, const char *data, size_t n)
{
	if (s->ended) {
		return;
	}
	if (n > s->cap - s->len) {
		s->admin->ctr[NX_ADMIN_CTR_SSE_SLOW]++;
		nx_log(NX_LOG_DEBUG, "admin", "live stream subscriber fell %zu bytes behind: ended",
		       s->len);
		sub_end(s);
		return;
	}
	size_t tail = (s->head + s->len) % s->cap;
	size_t first = NX_MIN(n, s->cap - tail);
	memcpy(s->ring + tail, data, first);
	memcpy(s->ring, data + first, n - first);
	s->len += n;
	s->sent = true;
	sub_wake(s);
}

static ssize_t sub_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct nx_admin_live_sub *s = cls;
	if (s->ended) {
		return MHD_CONTENT_READER_END_WITH_ERROR; /* closes the connection */
	}
	if (s->len == 0) {
		MHD_suspend_connection(s->conn); /* resumed by the next append */
		s->suspended = true;
		return 0;
	}
	size_t n = NX_MIN(max, s->len);
	size_t first = NX_MIN(n, s->cap - s->head);
	memcpy(buf, s->ring + s->head, first);
	memcpy(buf + first, s->ring, n - first);
	s->head = (s->head + n) % s->cap;
	s->len -= n;
	if (s->len == 0) {
		s->head = 0;
	}
	return (ssize_t)n;
}

/* Every listed subscriber gets the bytes (the list may shrink while we walk it). */
static void broadcast(struct nx_admin *a, const char *data, size_t n)
{
	struct nx_admin_live_sub *next;
	for (struct nx_admin_live_sub *s = a->live.subs; s; s = next) {
		next = s->next;
		sub_append(s, data, n);
	}
}

/* ---- control thread: drain, keepalive -------------------------------------------------------- */

static void broadcast_rec(struct nx_admin *a, const struct nx_qlog_rec *rec)
{
	/* The same upstream name the query log stores (the tap carries the stats index). */
	char up[sizeof(((struct nx_up_stats_row *)0)->name)] = "";
	if (rec->upstream >= 0 && rec->upstream < nx_up_stats_count()) {
		struct nx_up_stats_row row;
		nx_up_stats_read(rec->upstream, &row);
		memcpy(up, row.name, sizeof(up));
	} else if (rec->upstream >= 0) {
		snprintf(up, sizeof(up), "#%d", rec->upstream);
	}
	json_t *j = nx_qlog_rec_to_json(rec, up[0] ? up : NULL);
	if (!j || nx_admin_client_name_set(a, j)) {
		json_decref(j);
		return; /* no memory: this record is not shown */
	}
	char buf[NX_ADMIN_LIVE_EVENT_MAX];
	memcpy(buf, "data: ", 6);
	size_t n = json_dumpb(j, buf + 6, sizeof(buf) - 8, JSON_COMPACT);
	json_decref(j);
	if (n == 0 || nx_fails_assert(n <= sizeof(buf) - 8)) {
		return;
	}
	buf[6 + n] = '\n';
	buf[7 + n] = '\n';
	broadcast(a, buf, n + 8);
}

static void on_async(uv_async_t *h)
{
	struct nx_admin *a = h->data;
	struct nx_admin_live *l = &a->live;
	if (l->stopping) {
		return;
	}
	l->draining = true; /* q and its scratch stay allocated until the end of this call */
	for (;;) {
		uv_mutex_lock(&l->mu);
		size_t take = 0;
		struct nx_qlog_rec *scratch = NULL;
		if (l->q) {
			scratch = l->q + NX_ADMIN_LIVE_HANDOFF;
			take = NX_MIN(l->q_len, (size_t)NX_ADMIN_LIVE_CHUNK);
			for (size_t i = 0; i < take; i++) {
				memcpy(&scratch[i], &l->q[(l->q_head + i) % NX_ADMIN_LIVE_HANDOFF],
				       sizeof(scratch[i]));
			}
			l->q_head = (l->q_head + take) % NX_ADMIN_LIVE_HANDOFF;
			l->q_len -= take;
		}
		uint64_t dropped = l->q_dropped;
		l->q_dropped = 0;
		uv_mutex_unlock(&l->mu);
		a->ctr[NX_ADMIN_CTR_SSE_HANDOFF_FULL] += dropped;
		if (take == 0) {
			break;
		}
		for (size_t i = 0; i < take && l->subs; i++) {
			broadcast_rec(a, &scratch[i]);
		}
		/* Let MHD send what this chunk added before the next one fills the rings: a batch
		 * larger than a ring reaches a healthy client without cutting it off. */
		nx_admin_run_now(a);
	}
	l->draining = false;
	hub_release_if_idle(a);
}

static void on_keepalive(uv_timer_t *t)
{
	struct nx_admin *a = t->data;
	struct nx_admin_live *l = &a->live;
	static const char ka[] = ": keepalive\n\n";
	struct nx_admin_live_sub *next;
	for (struct nx_admin_live_sub *s = l->subs; s; s = next) {
		next = s->next;
		if (!s->sent) {
			sub_append(s, ka, sizeof(ka) - 1);
		}
		s->sent = false;
	}
	uv_mutex_lock(&l->mu);
	a->ctr[NX_ADMIN_CTR_SSE_HANDOFF_FULL] += l->q_dropped;
	l->q_dropped = 0;
	uv_mutex_unlock(&l->mu);
}

/* ---- the route ------------------------------------------------------------------------------- */

int nx_admin_handle_live(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	struct nx_admin_live *l = &a->live;
	const struct nx_conf *c = nx_admin_conf(a);
	unsigned max = c ? c->logging_live_max_subscribers : 0;
	if (max == 0 || l->stopping) {
		return nx_admin_reply_error(req, 503, "live_disabled", NULL,
					    "the live stream is off (logging.live_max_subscribers "
					    "is 0)");
	}
	if (l->n_subs >= (int64_t)max) {
		a->ctr[NX_ADMIN_CTR_SSE_TOO_MANY]++;
		req->retry_after_s = NX_ADMIN_LIVE_RETRY_MS / 1000;
		return nx_admin_reply_error(req, 429, "too_many_subscribers", NULL,
					    "the live stream has its %u subscribers "
					    "(logging.live_max_subscribers)",
					    max);
	}
	struct nx_admin_live_sub *s = nx_mem_calloc(NX_OWNER_sse_rings, 1, sizeof(*s));
	char *ring = s ? nx_mem_alloc(NX_OWNER_sse_rings, l->ring_bytes) : NULL;
	if (!ring || hub_activate(a)) {
		nx_mem_free(NX_OWNER_sse_rings, ring, ring ? l->ring_bytes : 0);
		nx_mem_free(NX_OWNER_sse_rings, s, s ? sizeof(*s) : 0);
		a->ctr[NX_ADMIN_CTR_SSE_NO_MEMORY]++;
		return nx_admin_reply_static(
		    req, 503,
		    "{\"error\":\"no_memory\",\"message\":\"no memory for a "
		    "live stream subscriber\"}\n");
	}
	/* The subscriber's ring is the bound on how far it may fall behind: keep the kernel's
	 * send buffer small and fixed so autotuning (up to MiBs per socket, owned by no ledger
	 * line) does not hide a reader that stopped reading. */
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci) {
		int sndbuf = NX_ADMIN_LIVE_SNDBUF;
		setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	}
	s->admin = a;
	s->conn = req->conn;
	s->ring = ring;
	s->cap = l->ring_bytes;
	/* The first bytes: the reconnect delay, and the headers go out at once. */
	s->len = (size_t)snprintf(s->ring, s->cap, "retry: %d\n\n", NX_ADMIN_LIVE_RETRY_MS);
	s->len = NX_MIN(s->len, s->cap);
	struct MHD_Response *r =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_BYTES, sub_read, s, sub_free);
	if (!r) {
		ring_free(s);
		nx_mem_free(NX_OWNER_sse_rings, s, sizeof(*s));
		hub_release_if_idle(a);
		return -ENOMEM;
	}
	sub_list(a, s); /* from here sub_free (MHD's) releases it */
	if (l->n_subs == 1) {
		uv_timer_start(&l->keepalive, on_keepalive, l->keepalive_ms, l->keepalive_ms);
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/event-stream; charset=utf-8");
	MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* reverse proxies: do not buffer */
	return nx_admin_reply_response(req, 200, r);
}

/* ---- life cycle ------------------------------------------------------------------------------ */

int nx_admin_live_init(struct nx_admin *a)
{
	struct nx_admin_live *l = &a->live;
	l->ring_bytes = NX_ADMIN_LIVE_RING_BYTES;
	l->keepalive_ms = NX_ADMIN_LIVE_KEEPALIVE_MS;
	int rc = uv_mutex_init(&l->mu);
	if (rc) {
		return rc;
	}
	rc = uv_async_init(a->loop, &l->async, on_async);
	if (rc) {
		uv_mutex_destroy(&l->mu);
		return rc;
	}
	uv_timer_init(a->loop, &l->keepalive);
	l->async.data = a;
	l->keepalive.data = a;
	a->open_handles += 2;
	return 0;
}

void nx_admin_live_stop(struct nx_admin *a)
{
	struct nx_admin_live *l = &a->live;
	l->stopping = true;
	struct nx_admin_live_sub *next;
	for (struct nx_admin_live_sub *s = l->subs; s; s = next) {
		next = s->next;
		sub_end(s); /* resumed: MHD refuses to stop with suspended connections */
	}
	hub_release_if_idle(a);
	uv_close((uv_handle_t *)&l->async, nx_admin_handle_closed);
	uv_close((uv_handle_t *)&l->keepalive, nx_admin_handle_closed);
}

void nx_admin_live_deinit(struct nx_admin *a)
{
	uv_mutex_destroy(&a->live.mu);
}

void nx_admin_live_metrics(struct nx_admin *a, struct nx_metrics_buf *mb)
{
	nx_metrics_family(mb, "nxdns_sse_subscribers", NX_METRIC_GAUGE,
			  "Clients following the live query stream");
	nx_metrics_sample_i64(mb, "nxdns_sse_subscribers", a->live.n_subs, NULL);
	nx_metrics_family(mb, "nxdns_sse_subscribers_peak", NX_METRIC_GAUGE,
			  "Highest nxdns_sse_subscribers");
	nx_metrics_sample_i64(mb, "nxdns_sse_subscribers_peak", a->live.peak, NULL);
}

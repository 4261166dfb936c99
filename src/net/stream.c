#include "net/stream.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "net/h2.h"
#include "net/h2c.h"
#include "net/sockopt.h"
#include "net/stream_impl.h"
#include "net/tls.h"

/* Bytes of DoH queries a connection may keep while it waits for a permit (a record per query:
 * stream id, client id, length, message); beyond it a query's stream is refused at once. */
#define NX_STREAM_PARK_MAX (64 * 1024)
#define H2_REFUSED_STREAM 0x7 /* RFC 9113 7: the request was not processed, retry is safe */

struct wreq {
	uv_write_t req;
	struct nx_stream_conn *c;
	size_t len;
	uint8_t data[];
};

static void conn_close(struct nx_stream_conn *c);
static void arm_timer(struct nx_stream_conn *c);
static void update_reading(struct nx_stream_conn *c);
static void dns_process(struct nx_stream_conn *c);
static void doh_process(struct nx_stream_conn *c);
static void rbuf_trim(struct nx_stream_conn *c, size_t consumed);

/* The messages kept in rbuf: DNS frames, or parked DoH queries. */
static void parked_process(struct nx_stream_conn *c)
{
	if (c->h2) {
		doh_process(c);
	} else {
		dns_process(c);
	}
}

/* Parked DoH query records in rbuf: stream id (4), client id length (1) and bytes, message
 * length (2) and bytes. */
struct parked {
	int32_t stream;
	const char *id; /* NUL-terminated copy on the caller's stack */
	const uint8_t *msg;
	size_t len;
	size_t size; /* bytes of the record */
};

static bool parked_at(const struct nx_stream_conn *c, size_t off, struct parked *p,
		      char id[NX_CLIENT_ID_MAX + 1])
{
	if (c->rlen - off < 7) {
		return false;
	}
	const uint8_t *b = c->rbuf + off;
	p->stream = (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) |
			      ((uint32_t)b[2] << 8) | b[3]);
	size_t il = b[4];
	size_t ml = ((size_t)b[5 + il] << 8) | b[6 + il];
	memcpy(id, b + 5, il);
	id[il] = 0;
	p->id = id;
	p->msg = b + 7 + il;
	p->len = ml;
	p->size = 7 + il + ml;
	return true;
}

static enum nx_gauge conns_gauge(enum nx_proto p)
{
	return p == NX_PROTO_DOT ? NX_GAUGE_DOT_CONNS
	       : p == NX_PROTO_DOH ? NX_GAUGE_DOH_CONNS
				   : NX_GAUGE_TCP_CONNS;
}

/* ---- connection lifetime ---- */

static void maybe_free(struct nx_stream_conn *c)
{
	if (c->handles_open || c->holds || c->writes || c->in_input) {
		return;
	}
	nx_mem_free(NX_OWNER_tcp_conns, c->rbuf, c->rcap);
	if (c->cl) {
		client_free(c);
		return;
	}
	nx_mem_free(NX_OWNER_tcp_conns, c, sizeof(*c));
}

void stream_on_handle_closed(uv_handle_t *h)
{
	struct nx_stream_conn *c = h->data;
	c->handles_open--;
	if (c->handles_open == 0) {
		/* Not earlier: conn_close may run inside a TLS or HTTP/2 callback. */
		nx_h2_free(c->h2);
		c->h2 = NULL;
		nx_h2c_free(c->h2c);
		c->h2c = NULL;
		nx_tls_free(c->tls);
		c->tls = NULL;
	}
	maybe_free(c);
}

static void list_unlink(struct nx_stream_conn *c)
{
	struct nx_stream_server *s = c->srv;
	if (c->prev) {
		c->prev->next = c->next;
	} else {
		s->head = c->next;
	}
	if (c->next) {
		c->next->prev = c->prev;
	} else {
		s->tail = c->prev;
	}
	c->prev = c->next = NULL;
}

static void list_push_head(struct nx_stream_conn *c)
{
	struct nx_stream_server *s = c->srv;
	c->prev = NULL;
	c->next = s->head;
	if (s->head) {
		s->head->prev = c;
	} else {
		s->tail = c;
	}
	s->head = c;
}

/* A query arrived: the connection is the most recently active. */
static void touch(struct nx_stream_conn *c)
{
	c->active_ms = uv_now(c->h.loop);
	if (c->srv && c->srv->head != c) {
		list_unlink(c);
		list_push_head(c);
	}
}

static void conn_close(struct nx_stream_conn *c)
{
	if (!c->open) {
		return;
	}
	c->open = false;
	struct nx_stream_server *s = c->srv;
	if (s) {
		list_unlink(c);
		s->n_open--;
		atomic_fetch_sub(s->open_count, 1);
		nx_gauge_add(conns_gauge(s->proto), -1);
	} else {
		client_closing(c);
	}
	uv_close((uv_handle_t *)&c->h, stream_on_handle_closed);
	uv_close((uv_handle_t *)&c->timer, stream_on_handle_closed);
}

/* Idle: nothing held, written, buffered or waiting (a handshake in progress counts as idle:
 * a connection that never finishes one must not keep a place at the cap). */
static bool conn_idle(const struct nx_stream_conn *c)
{
	return c->holds == 0 && c->writes == 0 && c->rlen == 0 && !c->paused &&
	       (!c->h2 || nx_h2_streams_open(c->h2) == 0);
}

/* Closing after the answers in flight (draining) once they are all out. */
static void maybe_finish_drain(struct nx_stream_conn *c)
{
	if (c->open && c->draining && c->holds == 0 && c->writes == 0 && !c->paused) {
		conn_close(c);
	}
}

/* ---- timers ---- */

static unsigned idle_timeout(const struct nx_stream_conn *c)
{
	const struct nx_stream_limits *l = c->lim;
	if (!c->srv) {
		return l->idle_ms; /* an upstream connection: no cap to make room under */
	}
	unsigned open = (unsigned)NX_MAX(0, atomic_load(c->srv->open_count));
	unsigned cap = NX_MAX(1u, l->max_conns);
	if (open * 4 >= cap * 3) {
		return NX_MIN(l->idle_ms, NX_STREAM_IDLE_FLOOR_MS);
	}
	if (open * 2 >= cap) {
		return NX_MIN(l->idle_ms, NX_MAX(l->idle_ms / 4, NX_STREAM_IDLE_FLOOR_MS));
	}
	return l->idle_ms;
}

/* Give up waiting for a permit. DoH: each parked query's stream is refused (the client may
 * retry it), the connection goes on. DNS streams: the parked queries are dropped, no more are
 * read, and the connection closes once the answers already in flight have been sent. Each
 * dropped query is counted. */
static void give_up_waiting(struct nx_stream_conn *c)
{
	if (c->h2) {
		struct parked p;
		char id[NX_CLIENT_ID_MAX + 1];
		for (size_t off = 0; parked_at(c, off, &p, id); off += p.size) {
			nx_stat_inc(NX_STAT_D_NO_PERMIT);
			nx_h2_reset(c->h2, p.stream, H2_REFUSED_STREAM);
		}
		c->paused = false;
		rbuf_trim(c, c->rlen);
		update_reading(c);
		return;
	}
	size_t dropped = 0;
	for (size_t off = 0; off + 2 <= c->rlen;) {
		size_t mlen = ((size_t)c->rbuf[off] << 8) | c->rbuf[off + 1];
		if (c->rlen - off < 2 + mlen) {
			break;
		}
		dropped += mlen > 0;
		off += 2 + mlen;
	}
	nx_stat_add(NX_STAT_D_NO_PERMIT, NX_MAX(dropped, (size_t)1));
	c->paused = false;
	c->rlen = 0;
	c->draining = true;
	update_reading(c);
	maybe_finish_drain(c);
}

/* Offer the parked messages again; one that still finds no permit parks the connection again
 * without restarting its wait. */
static void retry_paused(struct nx_stream_conn *c)
{
	c->paused = false;
	c->retrying = true;
	parked_process(c);
	c->retrying = false;
}

static void out_begin(struct nx_stream_conn *c);
static void out_end(struct nx_stream_conn *c);

static void on_timeout(uv_timer_t *t)
{
	struct nx_stream_conn *c = t->data;
	if (c->cl) {
		client_timeout(c);
		return;
	}
	if (!c->ready) {
		nx_stat_inc(NX_STAT_D_TLS_HANDSHAKE);
		conn_close(c);
		return;
	}
	if (c->paused) {
		uint64_t now = uv_now(c->h.loop);
		if (now - c->paused_at_ms >= c->lim->permit_wait_ms) {
			give_up_waiting(c);
			return;
		}
		c->retry_ms = NX_MIN(c->retry_ms * 2, NX_STREAM_PERMIT_RETRY_MAX_MS);
		out_begin(c);
		retry_paused(c);
		out_end(c);
		if (c->open) {
			update_reading(c);
			maybe_finish_drain(c);
			arm_timer(c);
		}
		return;
	}
	if (c->rlen > 0) {
		nx_stat_inc(NX_STAT_D_TCP_READ_TIMEOUT);
	} else {
		nx_stat_inc(NX_STAT_TCP_IDLE_CLOSED);
	}
	conn_close(c);
}

/*
 * One timer serves whichever bound applies: the permit retry while paused; a partial message
 * must finish within read_ms of its first byte; an idle connection closes after the (shrinking)
 * idle timeout; while queries are in the pipeline their own deadline bounds the wait.
 */
static void arm_timer(struct nx_stream_conn *c)
{
	if (!c->open) {
		return;
	}
	uint64_t now = uv_now(c->h.loop);
	if (!c->ready) {
		uint64_t end = c->accepted_ms + c->lim->handshake_ms;
		uv_timer_start(&c->timer, on_timeout, end > now ? end - now : 0, 0);
	} else if (c->paused) {
		uint64_t end = c->paused_at_ms + c->lim->permit_wait_ms;
		uint64_t at = NX_MIN(now + c->retry_ms, end);
		uv_timer_start(&c->timer, on_timeout, at > now ? at - now : 0, 0);
	} else if (c->draining) {
		uv_timer_stop(&c->timer);
	} else if (c->rlen > 0 && (c->cl || c->holds < NX_STREAM_MAX_PIPELINE)) {
		uint64_t end = c->msg_start_ms + c->lim->read_ms;
		uv_timer_start(&c->timer, on_timeout, end > now ? end - now : 0, 0);
	} else if (c->holds == 0 && c->writes == 0) {
		/* From the last query, not the last byte: empty frames are not activity. */
		uint64_t end = c->active_ms + idle_timeout(c);
		uv_timer_start(&c->timer, on_timeout, end > now ? end - now : 0, 0);
	} else {
		uv_timer_stop(&c->timer);
	}
}

/* ---- writing ---- */

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = (struct wreq *)req;
	struct nx_stream_conn *c = w->c;
	c->writes--;
	c->queued -= w->len;
	nx_mem_free(NX_OWNER_tcp_writes, w, sizeof(*w) + w->len);
	if (status < 0) {
		conn_close(c);
	}
	if (!c->open) {
		maybe_free(c);
		return;
	}
	maybe_finish_drain(c);
	arm_timer(c);
}

/* Write bufs to the socket: at once when it takes them (no copy), else one queued copy of the
 * rest. Closes the connection (counted) when the queue bound is exceeded or the write fails. */
static int raw_write(struct nx_stream_conn *c, const uv_buf_t *bufs, unsigned n)
{
	size_t total = 0;
	for (unsigned i = 0; i < n; i++) {
		total += bufs[i].len;
	}
	size_t done = 0;
	if (c->writes == 0) {
		int r = uv_try_write((uv_stream_t *)&c->h, bufs, n);
		if (r == (int)total) {
			return 0;
		}
		if (r < 0 && r != UV_EAGAIN) {
			conn_close(c);
			nx_stat_inc(NX_STAT_D_SEND);
			return r;
		}
		done = r > 0 ? (size_t)r : 0;
	}
	size_t rest = total - done;
	if (c->queued + rest > NX_STREAM_MAX_QUEUED) {
		nx_stat_inc(NX_STAT_D_TCP_TOO_BIG);
		conn_close(c);
		return NX_ELIMIT;
	}
	struct wreq *w = nx_mem_alloc(NX_OWNER_tcp_writes, sizeof(*w) + rest);
	if (!w) {
		nx_stat_inc(NX_STAT_D_SEND);
		conn_close(c);
		return -ENOMEM;
	}
	w->c = c;
	w->len = rest;
	/* Copy whatever of the buffers the socket has not taken yet. */
	size_t skip = done, o = 0;
	for (unsigned i = 0; i < n; i++) {
		size_t l = bufs[i].len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		memcpy(w->data + o, bufs[i].base + skip, l - skip);
		o += l - skip;
		skip = 0;
	}
	uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)rest);
	int rc = uv_write(&w->req, (uv_stream_t *)&c->h, &b, 1, on_written);
	if (rc < 0) {
		nx_mem_free(NX_OWNER_tcp_writes, w, sizeof(*w) + rest);
		nx_stat_inc(NX_STAT_D_SEND);
		conn_close(c);
		return rc;
	}
	c->writes++;
	c->queued += rest;
	uv_timer_stop(&c->timer);
	return 0;
}

/* Output batches: under TLS the bytes written between the outermost begin and end leave in as
 * few records as fit (a read's worth of answers, a DNS frame's length and message). */
static void out_begin(struct nx_stream_conn *c)
{
	if (c->tls && c->corks++ == 0) {
		nx_tls_cork(c->tls);
	}
}

static void out_end(struct nx_stream_conn *c)
{
	if (c->tls && --c->corks == 0 && c->open && nx_tls_uncork(c->tls) < 0) {
		conn_close(c);
	}
}

/* Application bytes down the stack: encrypted under TLS, else straight to the socket. */
static int app_write(struct nx_stream_conn *c, const uint8_t *data, size_t len)
{
	if (!c->open) {
		return -ENOTCONN;
	}
	if (c->tls) {
		int rc = nx_tls_write(c->tls, data, len);
		if (rc < 0) {
			conn_close(c);
		}
		return rc;
	}
	uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
	return raw_write(c, &b, 1);
}

/* One DNS message with its two-byte length (RFC 7766, RFC 7858). */
static int dns_send(struct nx_stream_conn *c, const uint8_t *msg, size_t len)
{
	uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
	if (!c->tls) {
		uv_buf_t bufs[2] = {uv_buf_init((char *)hdr, 2),
				    uv_buf_init((char *)msg, (unsigned)len)};
		return raw_write(c, bufs, 2);
	}
	out_begin(c);
	int rc = app_write(c, hdr, 2);
	if (rc == 0) {
		rc = app_write(c, msg, len);
	}
	out_end(c);
	return rc;
}

/* ---- the reply handle ---- */

static int op_send(struct nx_reply *r, const uint8_t *msg, size_t len, bool owner_thread)
{
	struct nx_stream_conn *c = r->t.st.conn;
	if (nx_fails_assert(owner_thread)) {
		return -EINVAL; /* the pipeline hands stream answers to the owning worker */
	}
	if (!c->open) {
		nx_stat_inc(NX_STAT_D_SEND);
		return -ENOTCONN;
	}
	if (!c->h2) {
		return dns_send(c, msg, len);
	}
	out_begin(c);
	int rc = nx_h2_respond(c->h2, r->t.st.stream, msg, len); /* a gone stream is counted there */
	out_end(c);
	return rc;
}

static void op_hold(struct nx_reply *r)
{
	struct nx_stream_conn *c = r->t.st.conn;
	c->holds++;
	update_reading(c);
	arm_timer(c);
}

static void op_release(struct nx_reply *r)
{
	struct nx_stream_conn *c = r->t.st.conn;
	c->holds--;
	if (!c->open) {
		maybe_free(c);
		return;
	}
	if (c->holds == 0) {
		c->active_ms = uv_now(c->h.loop); /* idle from its last answer */
	}
	if (!c->in_input && c->rlen > 0) {
		/* Messages that waited for the pipeline bound, or for a permit: an operation just
		 * ended, so one is likely free now. */
		out_begin(c);
		if (c->paused) {
			retry_paused(c);
		} else {
			parked_process(c);
		}
		out_end(c);
		if (!c->open) {
			maybe_free(c);
			return;
		}
	}
	update_reading(c);
	maybe_finish_drain(c);
	arm_timer(c);
}

/* The connection's local end, read once at accept (immutable: any thread may read it). */
static bool op_local(const struct nx_reply *r, struct sockaddr_storage *out)
{
	const struct nx_stream_conn *c = r->t.st.conn;
	memset(out, 0, sizeof(*out));
	if (c->local.sa.sa_family == AF_INET) {
		memcpy(out, &c->local.in, sizeof(c->local.in));
		return true;
	}
	if (c->local.sa.sa_family == AF_INET6) {
		memcpy(out, &c->local.in6, sizeof(c->local.in6));
		return true;
	}
	return false;
}

static const struct nx_reply_ops stream_ops = {
	.send = op_send,
	.hold = op_hold,
	.release = op_release,
	.local = op_local,
};

/* ---- reading: DNS framing ---- */

/* The pipeline's verdict on one query of stream `stream` (0 on a DNS stream). */
static int offer(struct nx_stream_conn *c, int32_t stream, const char *client_id,
		 const uint8_t *msg, size_t len)
{
	struct nx_stream_server *s = c->srv;
	struct nx_reply r;
	r.ops = &stream_ops;
	memcpy(&r.peer, &c->peer, c->peer_len);
	r.peer_len = c->peer_len;
	r.proto = (uint8_t)s->proto;
	r.datagram = false;
	r.any_thread = false;
	r.listener = (uint8_t)s->listener;
	r.client_id = client_id;
	r.t.st.conn = c;
	r.t.st.stream = stream;
	return s->env.cb(s->env.ud, &r, msg, len, false, s->env.out, NX_DNS_MSG_MAX);
}

/* A query found no permit: the connection parks (the wait starts unless this is a retry). */
static void park(struct nx_stream_conn *c)
{
	c->paused = true;
	if (!c->retrying) {
		c->paused_at_ms = uv_now(c->h.loop);
		c->retry_ms = NX_STREAM_PERMIT_RETRY_MS;
		nx_stat_inc(NX_STAT_STREAM_PAUSED);
	}
}

/*
 * Hand one complete message to the pipeline. Returns false when the connection must stop
 * consuming (paused for a permit, closed): the message is then left where it is.
 */
static bool dns_deliver(struct nx_stream_conn *c, const uint8_t *msg, size_t len)
{
	int rc = offer(c, 0, c->client_id, msg, len);
	if (rc > 0) {
		if (c->open) {
			dns_send(c, c->srv->env.out, (size_t)rc);
		}
		return c->open;
	}
	if (rc == NX_REPLY_BUSY_PERMIT || rc == NX_REPLY_BUSY_WAITERS) {
		park(c);
		return false;
	}
	if (rc == NX_REPLY_BAD_FRAME) {
		nx_stat_inc(NX_STAT_D_BAD_FRAME);
		conn_close(c);
		return false;
	}
	return c->open;
}

/*
 * Consume the complete messages of buf[0..len): returns the bytes consumed. Stops at a partial
 * message, when the connection has its share of queries in the pipeline (the rest waits for a
 * release), when a query finds no permit (paused), or when the connection closes.
 */
static size_t dns_consume(struct nx_stream_conn *c, const uint8_t *buf, size_t len)
{
	size_t off = 0;
	c->in_input = true;
	while (c->open && !c->paused && len - off >= 2 &&
	       (c->cl || c->holds < NX_STREAM_MAX_PIPELINE)) {
		size_t mlen = ((size_t)buf[off] << 8) | buf[off + 1];
		if (len - off < 2 + mlen) {
			break;
		}
		if (mlen == 0) {
			off += 2; /* an empty frame carries nothing: skipped, and not activity */
			continue;
		}
		touch(c);
		if (!(c->cl ? client_frame(c, buf + off + 2, mlen)
			    : dns_deliver(c, buf + off + 2, mlen))) {
			break; /* parked (the message stays) or closed */
		}
		off += 2 + mlen;
	}
	c->in_input = false;
	return off;
}

/* Make room for `need` bytes in rbuf. */
static bool rbuf_reserve(struct nx_stream_conn *c, size_t need)
{
	if (need <= c->rcap) {
		return true;
	}
	uint8_t *nb = nx_mem_realloc(NX_OWNER_tcp_conns, c->rbuf, c->rcap, need);
	if (!nb) {
		return false;
	}
	c->rbuf = nb;
	c->rcap = need;
	return true;
}

/* Keep rbuf only while it holds bytes: an idle connection gives its buffer back. */
static void rbuf_trim(struct nx_stream_conn *c, size_t consumed)
{
	if (consumed > 0) {
		memmove(c->rbuf, c->rbuf + consumed, c->rlen - consumed);
		c->rlen -= consumed;
		if (c->rlen > 0) {
			c->msg_start_ms = uv_now(c->h.loop);
		}
	}
	if (c->rlen == 0 && c->rbuf) {
		nx_mem_free(NX_OWNER_tcp_conns, c->rbuf, c->rcap);
		c->rbuf = NULL;
		c->rcap = 0;
	}
}

/* Messages kept in rbuf (after a pause or the pipeline bound): try them again. */
static void dns_process(struct nx_stream_conn *c)
{
	if (c->rlen == 0) {
		return;
	}
	size_t used = dns_consume(c, c->rbuf, c->rlen);
	if (!c->open) {
		return;
	}
	rbuf_trim(c, used);
}

/* Bytes from the socket (or, under TLS, decrypted): frame them. */
static void dns_input(struct nx_stream_conn *c, const uint8_t *data, size_t len)
{
	if (c->rlen == 0 && !c->paused) {
		/* Common case: whole messages straight from the receive scratch, no copy. */
		size_t used = dns_consume(c, data, len);
		if (!c->open || used == len) {
			return;
		}
		data += used;
		len -= used;
		c->msg_start_ms = uv_now(c->h.loop);
	}
	if (!rbuf_reserve(c, c->rlen + len)) {
		nx_stat_inc(NX_STAT_D_SEND);
		conn_close(c);
		return;
	}
	if (c->rlen == 0) {
		c->msg_start_ms = uv_now(c->h.loop);
	}
	memcpy(c->rbuf + c->rlen, data, len);
	c->rlen += len;
	if (!c->paused) {
		dns_process(c);
	}
}

/* ---- reading: DoH queries (HTTP/2 streams) ---- */

/* One DoH query to the pipeline. False: no permit (the caller parks it). */
static bool doh_deliver(struct nx_stream_conn *c, int32_t stream, const char *client_id,
			const uint8_t *msg, size_t len)
{
	int rc = offer(c, stream, client_id, msg, len);
	if (rc > 0) {
		if (c->open) {
			nx_h2_respond(c->h2, stream, c->srv->env.out, (size_t)rc);
		}
	} else if (rc == NX_REPLY_BUSY_PERMIT || rc == NX_REPLY_BUSY_WAITERS) {
		park(c);
		return false;
	} else if (rc == NX_REPLY_BAD_FRAME) {
		nx_stat_inc(NX_STAT_D_BAD_FRAME);
		nx_h2_error(c->h2, stream, 400); /* not a DNS query: 400, RFC 8484 4.2.1 */
	}
	return true;
}

/* Keep a query for later (no permit now): a record in rbuf, bounded; beyond the bound its
 * stream is refused at once (the client may retry it), counted. */
static void doh_park(struct nx_stream_conn *c, int32_t stream, const char *client_id,
		     const uint8_t *msg, size_t len)
{
	size_t il = strnlen(client_id, NX_CLIENT_ID_MAX);
	size_t need = 7 + il + len;
	if (c->rlen + need > NX_STREAM_PARK_MAX || !rbuf_reserve(c, c->rlen + need)) {
		nx_stat_inc(NX_STAT_D_NO_PERMIT);
		nx_h2_reset(c->h2, stream, H2_REFUSED_STREAM);
		return;
	}
	uint8_t *b = c->rbuf + c->rlen;
	b[0] = (uint8_t)((uint32_t)stream >> 24);
	b[1] = (uint8_t)((uint32_t)stream >> 16);
	b[2] = (uint8_t)((uint32_t)stream >> 8);
	b[3] = (uint8_t)stream;
	b[4] = (uint8_t)il;
	memcpy(b + 5, client_id, il);
	b[5 + il] = (uint8_t)(len >> 8);
	b[6 + il] = (uint8_t)len;
	memcpy(b + 7 + il, msg, len);
	c->rlen += need;
}

static void h2_query(void *ud, int32_t stream, const uint8_t *msg, size_t len,
		     const char *client_id)
{
	struct nx_stream_conn *c = ud;
	if (!c->open) {
		return;
	}
	touch(c);
	/* Behind parked queries, a new one waits its turn. */
	if (c->paused || c->rlen > 0 || !doh_deliver(c, stream, client_id, msg, len)) {
		doh_park(c, stream, client_id, msg, len);
	}
}

/* Offer the parked DoH queries again, in order, until one still finds no permit. */
static void doh_process(struct nx_stream_conn *c)
{
	struct parked p;
	char id[NX_CLIENT_ID_MAX + 1];
	size_t off = 0;
	c->in_input = true;
	while (c->open && !c->paused && parked_at(c, off, &p, id)) {
		if (!doh_deliver(c, p.stream, p.id, p.msg, p.len)) {
			break;
		}
		off += p.size;
	}
	c->in_input = false;
	if (c->open) {
		rbuf_trim(c, off);
	}
}

static int h2_send(void *ud, const uint8_t *data, size_t len)
{
	return app_write(ud, data, len);
}

static const struct nx_h2_io h2_io = {
	.send = h2_send,
	.query = h2_query,
};

/* ---- TLS ---- */

/* Decrypted (or, without TLS, received) bytes up the stack. */
static void app_input(struct nx_stream_conn *c, const uint8_t *data, size_t len)
{
	if (!c->open) {
		return;
	}
	if (c->h2c) {
		client_h2_input(c, data, len);
		return;
	}
	if (!c->h2) {
		dns_input(c, data, len);
		return;
	}
	int rc = nx_h2_feed(c->h2, data, len);
	if (rc < 0 || nx_h2_want_close(c->h2)) {
		/* Protocol error or HTTP/1.x (an error response is queued), or GOAWAY done: close
		 * once what is written has left. Not here: the output may still be corked (the
		 * read's batch), and closing now would throw the error response away; the reader
		 * closes after the batch is flushed (maybe_finish_drain). */
		c->draining = true;
		update_reading(c);
	}
}

static int tls_send(void *ud, const uint8_t *data, size_t len)
{
	struct nx_stream_conn *c = ud;
	if (!c->open) {
		return -ENOTCONN;
	}
	uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
	return raw_write(c, &b, 1);
}

static void tls_recv(void *ud, const uint8_t *data, size_t len)
{
	app_input(ud, data, len);
}

/* "<id>.<server_name>" in the SNI names a client (AdGuard Home's ClientID form). */
static void sni_client_id(struct nx_stream_conn *c)
{
	const char *sni = nx_tls_sni(c->tls);
	const char *base = c->lim->server_name;
	size_t bl = strlen(base);
	if (!sni || bl == 0) {
		return;
	}
	size_t sl = strlen(sni);
	if (sl <= bl + 1 || sni[sl - bl - 1] != '.' || strcmp(sni + sl - bl, base) != 0) {
		return;
	}
	size_t il = sl - bl - 1;
	if (il > NX_CLIENT_ID_MAX) {
		return;
	}
	memcpy(c->client_id, sni, il);
	c->client_id[il] = 0;
	if (!nx_conf_client_id_ok(c->client_id)) {
		c->client_id[0] = 0;
	}
}

static void tls_ready(void *ud)
{
	struct nx_stream_conn *c = ud;
	c->ready = true;
	c->active_ms = uv_now(c->h.loop);
	if (c->cl) {
		client_ready(c);
		return;
	}
	if (c->srv->proto == NX_PROTO_DOT) {
		sni_client_id(c);
		return;
	}
	/* DoH: HTTP/2 from the first decrypted byte; fewer streams when the listener is nearly
	 * full (dnsdist drops to one). */
	const struct nx_stream_limits *l = c->lim;
	unsigned open = (unsigned)NX_MAX(0, atomic_load(c->srv->open_count));
	struct nx_h2_limits hl = {
		.max_streams = open * 4 >= NX_MAX(1u, l->max_conns) * 3 ? 1 : l->max_streams,
		.max_body = NX_DNS_MSG_MAX,
	};
	if (nx_h2_server_new(&hl, &h2_io, c, &c->h2) < 0) {
		nx_stat_inc(NX_STAT_D_SEND);
		conn_close(c);
	}
}

const struct nx_tls_io stream_tls_io = {
	.send = tls_send,
	.recv = tls_recv,
	.ready = tls_ready,
};

void stream_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct nx_stream_conn *c = h->data;
	(void)hint;
	/* The worker's scratch: libuv calls on_read right after, and it consumes everything. */
	*buf = uv_buf_init((char *)c->rx, NX_STREAM_RX_SCRATCH);
}

void stream_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct nx_stream_conn *c = st->data;
	(void)buf;
	if (n == UV_EOF && (c->holds > 0 || c->writes > 0 || c->paused)) {
		/* The client has sent all it will (shutdown for writing): answer what it asked. */
		c->draining = true;
		update_reading(c);
		arm_timer(c);
		return;
	}
	if (n < 0) {
		c->err = (int)n;
		conn_close(c);
		return;
	}
	if (n == 0) {
		return;
	}
	out_begin(c);
	if (c->tls) {
		int rc = nx_tls_feed(c->tls, c->rx, (size_t)n);
		if (rc < 0 && c->open) {
			c->err = rc;
			/* Counted by the TLS layer (nxdns_tls_errors_total); a close_notify is not
			 * an error: the answers it waits for still go out. */
			c->draining = true;
			if (rc != NX_ETLS_CLOSED || (c->holds == 0 && c->writes == 0 && !c->paused)) {
				conn_close(c);
			}
		}
	} else {
		dns_input(c, c->rx, (size_t)n);
	}
	out_end(c);
	if (!c->open) {
		maybe_free(c);
		return;
	}
	update_reading(c);
	maybe_finish_drain(c);
	arm_timer(c);
}

/* Read while the connection may take more queries: below its pipeline share, not waiting for a
 * permit, not draining, and with no unconsumed whole messages waiting (backpressure). */
static void update_reading(struct nx_stream_conn *c)
{
	if (!c->open) {
		return;
	}
	/* An upstream connection always reads: answers must flow whatever is in flight. */
	bool want = c->cl ? !c->draining
			  : !c->paused && !c->draining && c->holds < NX_STREAM_MAX_PIPELINE;
	if (want && !c->reading) {
		if (uv_read_start((uv_stream_t *)&c->h, stream_on_alloc, stream_on_read) == 0) {
			c->reading = true;
		}
	} else if (!want && c->reading) {
		uv_read_stop((uv_stream_t *)&c->h);
		c->reading = false;
	}
}

/* ---- accepting ---- */

static void on_refused_closed(uv_handle_t *h)
{
	nx_mem_free(NX_OWNER_tcp_conns, h, sizeof(uv_tcp_t));
}

static void refuse(uv_stream_t *ls)
{
	nx_stat_inc(NX_STAT_D_CONN_CAP);
	uv_tcp_t *t = nx_mem_alloc(NX_OWNER_tcp_conns, sizeof(*t));
	if (!t) {
		return;
	}
	uv_tcp_init(ls->loop, t);
	if (uv_accept(ls, (uv_stream_t *)t) == 0) {
		/* RST rather than FIN: the client learns at once it was refused. */
		uv_tcp_close_reset(t, on_refused_closed);
	} else {
		uv_close((uv_handle_t *)t, on_refused_closed);
	}
}

/* At the cap: the least recently active idle connection of this worker makes room. */
static bool evict_one(struct nx_stream_server *s)
{
	for (struct nx_stream_conn *c = s->tail; c; c = c->prev) {
		if (conn_idle(c)) {
			nx_stat_inc(NX_STAT_STREAM_EVICTED);
			conn_close(c);
			return true;
		}
	}
	return false;
}

static void on_connection(uv_stream_t *ls, int status)
{
	struct nx_stream_server *s = ls->data;
	if (status < 0) {
		return;
	}
	int n = atomic_fetch_add(s->open_count, 1);
	if (n >= (int)s->lim.max_conns && !evict_one(s)) {
		atomic_fetch_sub(s->open_count, 1);
		refuse(ls);
		return;
	}
	struct nx_stream_conn *c = nx_mem_calloc(NX_OWNER_tcp_conns, 1, sizeof(*c));
	if (!c) {
		atomic_fetch_sub(s->open_count, 1);
		refuse(ls);
		return;
	}
	c->srv = s;
	c->lim = &s->lim;
	c->rx = s->env.rx;
	c->proto = s->proto;
	uv_tcp_init(ls->loop, &c->h);
	uv_timer_init(ls->loop, &c->timer);
	c->h.data = c;
	c->timer.data = c;
	c->handles_open = 2;
	c->open = true;
	s->n_open++;
	nx_gauge_add(conns_gauge(s->proto), 1);
	list_push_head(c);
	if (uv_accept(ls, (uv_stream_t *)&c->h) < 0) {
		conn_close(c);
		return;
	}
	nx_stat_inc(NX_STAT_TCP_ACCEPTED);
	int plen = sizeof(c->peer);
	uv_tcp_getpeername(&c->h, (struct sockaddr *)&c->peer, &plen);
	c->peer_len = (socklen_t)plen;
	int llen = sizeof(c->local);
	if (uv_tcp_getsockname(&c->h, &c->local.sa, &llen) < 0) {
		c->local.sa.sa_family = AF_UNSPEC; /* calloc'd: 0 already; dnstap has none */
	}
	c->active_ms = c->accepted_ms = uv_now(ls->loop);
	c->ready = s->creds == NULL;
	if (s->creds && nx_tls_server_new(s->creds, s->alpn, &stream_tls_io, c, &c->tls) < 0) {
		nx_stat_inc(NX_STAT_D_SEND);
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->h, 1);
	update_reading(c);
	arm_timer(c);
}

int nx_stream_listen(uv_loop_t *loop, enum nx_proto proto, const struct nx_addr *addr,
		     int listener, atomic_int *open_count, const struct nx_stream_limits *lim,
		     struct nx_tls_creds *creds, const struct nx_stream_env *env,
		     struct nx_stream_server **out)
{
	if ((proto == NX_PROTO_TCP) != (creds == NULL) || proto == NX_PROTO_UDP) {
		return -EINVAL; /* DoT and DoH need credentials, TCP takes none */
	}
	int fd = nx_sock_tcp_listen(addr, true, NX_STREAM_BACKLOG);
	if (fd < 0) {
		return fd;
	}
	struct nx_stream_server *s = nx_mem_calloc(NX_OWNER_tcp_conns, 1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->proto = proto;
	s->listener = listener;
	s->open_count = open_count;
	s->lim = *lim;
	s->env = *env;
	s->alpn = proto == NX_PROTO_DOH ? NX_TLS_ALPN_H2 : NX_TLS_ALPN_DOT;
	if (creds) {
		nx_tls_creds_ref(creds);
		s->creds = creds;
	}
	uv_tcp_init(loop, &s->h);
	s->h.data = s;
	int rc = uv_tcp_open(&s->h, fd);
	if (rc == 0) {
		rc = uv_listen((uv_stream_t *)&s->h, NX_STREAM_BACKLOG, on_connection);
	}
	if (rc < 0) {
		nx_stream_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void nx_stream_set_limits(struct nx_stream_server *s, const struct nx_stream_limits *lim)
{
	s->lim = *lim;
}

void nx_stream_set_creds(struct nx_stream_server *s, struct nx_tls_creds *creds)
{
	if (!s->creds || !creds || creds == s->creds) {
		return; /* a plain listener stays plain */
	}
	nx_tls_creds_ref(creds);
	nx_tls_creds_unref(s->creds);
	s->creds = creds;
}

unsigned nx_stream_count(const struct nx_stream_server *s)
{
	return s->n_open;
}

static void on_server_closed(uv_handle_t *h)
{
	struct nx_stream_server *s = h->data;
	nx_tls_creds_unref(s->creds);
	nx_mem_free(NX_OWNER_tcp_conns, s, sizeof(*s));
}

void nx_stream_close(struct nx_stream_server *s)
{
	if (!s) {
		return;
	}
	while (s->head) {
		conn_close(s->head);
	}
	uv_close((uv_handle_t *)&s->h, on_server_closed);
}

/* ---- for stream_client.c ---- */

void stream_conn_close(struct nx_stream_conn *c)
{
	conn_close(c);
}

void stream_arm_timer(struct nx_stream_conn *c)
{
	arm_timer(c);
}

void stream_update_reading(struct nx_stream_conn *c)
{
	update_reading(c);
}

int stream_dns_send(struct nx_stream_conn *c, const uint8_t *msg, size_t len)
{
	return dns_send(c, msg, len);
}

int stream_app_write(struct nx_stream_conn *c, const uint8_t *data, size_t len)
{
	return app_write(c, data, len);
}

void stream_out_begin(struct nx_stream_conn *c)
{
	out_begin(c);
}

void stream_out_end(struct nx_stream_conn *c)
{
	out_end(c);
}

#include "net/stream.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "net/sockopt.h"

struct nx_stream_server {
	uv_tcp_t h;                  /* the listening socket */
	enum nx_proto proto;
	int listener;
	atomic_int *open_count;      /* borrowed: the listener's shared counter */
	struct nx_stream_limits lim;
	struct nx_tls_creds *creds;  /* referenced; NULL for plain TCP */
	struct nx_stream_env env;
	/* Open connections, most recently active first: the tail is the eviction candidate. */
	struct nx_stream_conn *head, *tail;
	unsigned n_open;
};

struct nx_stream_conn {
	uv_tcp_t h;
	uv_timer_t timer;            /* handshake, read, idle or permit-retry, whichever applies */
	struct nx_stream_server *srv; /* borrowed: a server outlives its open connections */
	struct nx_stream_conn *prev, *next;
	struct sockaddr_storage peer;
	socklen_t peer_len;
	/* DNS framing: bytes not consumed yet (a partial message, or whole messages waiting for
	 * the pipeline bound or a permit). Owned, NX_OWNER_tcp_conns; freed when empty. */
	uint8_t *rbuf;
	size_t rcap, rlen;
	uint64_t msg_start_ms;       /* loop time when the current partial message began */
	uint64_t active_ms;          /* loop time of the last query (or the accept): idle since */
	uint64_t paused_at_ms;       /* waiting for a permit since then (valid while paused) */
	unsigned retry_ms;           /* next permit retry interval */
	unsigned holds;              /* queries of this connection held by the pipeline */
	unsigned writes;             /* uv_write requests outstanding */
	size_t queued;               /* bytes in those requests */
	unsigned handles_open;       /* of h and timer; memory is freed when 0 and unheld */
	bool open;                   /* false once closing has started */
	bool reading;
	bool in_input;               /* consuming frames: releases must not re-enter */
	bool paused;                 /* a query found no permit: reading stops, retry on timer */
	bool retrying;               /* re-offering parked messages (the wait goes on) */
	bool draining;               /* no more reading: close once holds and writes are done */
	char client_id[NX_CLIENT_ID_MAX + 1]; /* DoT SNI client id, "" when none */
};

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
	nx_mem_free(NX_OWNER_tcp_conns, c, sizeof(*c));
}

static void on_handle_closed(uv_handle_t *h)
{
	struct nx_stream_conn *c = h->data;
	c->handles_open--;
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
	if (c->srv->head != c) {
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
	list_unlink(c);
	s->n_open--;
	atomic_fetch_sub(s->open_count, 1);
	nx_gauge_add(conns_gauge(s->proto), -1);
	uv_close((uv_handle_t *)&c->h, on_handle_closed);
	uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

/* Idle: nothing held, written, buffered or waiting. */
static bool conn_idle(const struct nx_stream_conn *c)
{
	return c->holds == 0 && c->writes == 0 && c->rlen == 0 && !c->paused;
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
	const struct nx_stream_limits *l = &c->srv->lim;
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

/* Give up waiting for a permit: the parked queries are dropped (counted), no more are read,
 * and the connection closes once the answers already in flight have been sent. */
static void give_up_waiting(struct nx_stream_conn *c)
{
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
	dns_process(c);
	c->retrying = false;
}

static void on_timeout(uv_timer_t *t)
{
	struct nx_stream_conn *c = t->data;
	if (c->paused) {
		uint64_t now = uv_now(c->h.loop);
		if (now - c->paused_at_ms >= c->srv->lim.permit_wait_ms) {
			give_up_waiting(c);
			return;
		}
		c->retry_ms = NX_MIN(c->retry_ms * 2, NX_STREAM_PERMIT_RETRY_MAX_MS);
		retry_paused(c);
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
	if (c->paused) {
		uint64_t end = c->paused_at_ms + c->srv->lim.permit_wait_ms;
		uint64_t at = NX_MIN(now + c->retry_ms, end);
		uv_timer_start(&c->timer, on_timeout, at > now ? at - now : 0, 0);
	} else if (c->draining) {
		uv_timer_stop(&c->timer);
	} else if (c->rlen > 0 && c->holds < NX_STREAM_MAX_PIPELINE) {
		uint64_t end = c->msg_start_ms + c->srv->lim.read_ms;
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

/* One DNS message with its two-byte length (RFC 7766). */
static int dns_send(struct nx_stream_conn *c, const uint8_t *msg, size_t len)
{
	uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
	uv_buf_t bufs[2] = {uv_buf_init((char *)hdr, 2), uv_buf_init((char *)msg, (unsigned)len)};
	return raw_write(c, bufs, 2);
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
	return dns_send(c, msg, len);
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
		if (c->paused) {
			retry_paused(c);
		} else {
			dns_process(c);
		}
		if (!c->open) {
			maybe_free(c);
			return;
		}
	}
	update_reading(c);
	maybe_finish_drain(c);
	arm_timer(c);
}

static const struct nx_reply_ops stream_ops = {
	.send = op_send,
	.hold = op_hold,
	.release = op_release,
};

/* ---- reading: DNS framing ---- */

/*
 * Hand one complete message to the pipeline. Returns false when the connection must stop
 * consuming (paused for a permit, closed): the message is then left where it is.
 */
static bool dns_deliver(struct nx_stream_conn *c, const uint8_t *msg, size_t len)
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
	r.client_id = c->client_id;
	r.t.st.conn = c;
	r.t.st.stream = 0;
	int rc = s->env.cb(s->env.ud, &r, msg, len, false, s->env.out, NX_DNS_MSG_MAX);
	if (rc > 0) {
		if (c->open) {
			dns_send(c, s->env.out, (size_t)rc);
		}
		return c->open;
	}
	if (rc == NX_REPLY_BUSY_PERMIT || rc == NX_REPLY_BUSY_WAITERS) {
		c->paused = true;
		if (!c->retrying) {
			c->paused_at_ms = uv_now(c->h.loop);
			c->retry_ms = NX_STREAM_PERMIT_RETRY_MS;
			nx_stat_inc(NX_STAT_STREAM_PAUSED);
		}
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
	       c->holds < NX_STREAM_MAX_PIPELINE) {
		size_t mlen = ((size_t)buf[off] << 8) | buf[off + 1];
		if (len - off < 2 + mlen) {
			break;
		}
		if (mlen == 0) {
			off += 2; /* an empty frame carries nothing: skipped, and not activity */
			continue;
		}
		touch(c);
		if (!dns_deliver(c, buf + off + 2, mlen)) {
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

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct nx_stream_conn *c = h->data;
	(void)hint;
	/* The worker's scratch: libuv calls on_read right after, and it consumes everything. */
	*buf = uv_buf_init((char *)c->srv->env.rx, NX_STREAM_RX_SCRATCH);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
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
		conn_close(c);
		return;
	}
	if (n == 0) {
		return;
	}
	dns_input(c, c->srv->env.rx, (size_t)n);
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
	bool want = !c->paused && !c->draining && c->holds < NX_STREAM_MAX_PIPELINE;
	if (want && !c->reading) {
		if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) == 0) {
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
	c->active_ms = uv_now(ls->loop);
	uv_tcp_nodelay(&c->h, 1);
	update_reading(c);
	arm_timer(c);
}

int nx_stream_listen(uv_loop_t *loop, enum nx_proto proto, const struct nx_addr *addr,
		     int listener, atomic_int *open_count, const struct nx_stream_limits *lim,
		     struct nx_tls_creds *creds, const struct nx_stream_env *env,
		     struct nx_stream_server **out)
{
	if (proto != NX_PROTO_TCP || creds) {
		return -EPROTONOSUPPORT; /* the TLS layers are not part of this build yet */
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
	(void)s;
	(void)creds;
}

unsigned nx_stream_count(const struct nx_stream_server *s)
{
	return s->n_open;
}

static void on_server_closed(uv_handle_t *h)
{
	nx_mem_free(NX_OWNER_tcp_conns, h->data, sizeof(struct nx_stream_server));
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

#include "net/tcp.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "net/sockopt.h"

struct nx_tcp_server {
	uv_tcp_t h;              /* the listening socket */
	int listener;
	atomic_int *open_count;  /* borrowed: the listener's shared counter */
	struct nx_tcp_limits lim;
	nx_tcp_msg_cb cb;
	void *ud;
	struct nx_tcp_conn *conns; /* open connections (intrusive list) */
	bool closing;
};

struct nx_tcp_conn {
	uv_tcp_t h;
	uv_timer_t timer;            /* idle or read timeout, whichever applies */
	struct nx_tcp_server *srv;   /* borrowed: a server outlives its open connections */
	struct nx_tcp_conn *prev, *next;
	struct sockaddr_storage peer;
	uint8_t *rbuf;               /* owned, NX_OWNER_tcp_conns */
	size_t rcap, rlen;
	uint64_t msg_start_ms;       /* loop time when the current partial message began */
	unsigned holds;              /* queries of this connection being handled */
	unsigned writes;             /* uv_write requests outstanding */
	size_t queued;               /* bytes in those requests */
	unsigned handles_open;       /* of h and timer; memory is freed when 0 and unheld */
	bool open;                   /* false once closing has started */
	bool reading;
};

struct wreq {
	uv_write_t req;
	struct nx_tcp_conn *c;
	size_t len;
	uint8_t data[];
};

static void conn_close(struct nx_tcp_conn *c);
static void arm_timer(struct nx_tcp_conn *c);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

static void maybe_free(struct nx_tcp_conn *c)
{
	if (c->handles_open || c->holds || c->writes) {
		return;
	}
	nx_mem_free(NX_OWNER_tcp_conns, c->rbuf, c->rcap);
	nx_mem_free(NX_OWNER_tcp_conns, c, sizeof(*c));
}

static void on_handle_closed(uv_handle_t *h)
{
	struct nx_tcp_conn *c = h->data;
	c->handles_open--;
	maybe_free(c);
}

static void conn_close(struct nx_tcp_conn *c)
{
	if (!c->open) {
		return;
	}
	c->open = false;
	struct nx_tcp_server *s = c->srv;
	if (c->prev) {
		c->prev->next = c->next;
	} else {
		s->conns = c->next;
	}
	if (c->next) {
		c->next->prev = c->prev;
	}
	atomic_fetch_sub(s->open_count, 1);
	nx_gauge_add(NX_GAUGE_TCP_CONNS, -1);
	uv_close((uv_handle_t *)&c->h, on_handle_closed);
	uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_timeout(uv_timer_t *t)
{
	struct nx_tcp_conn *c = t->data;
	if (c->rlen > 0) {
		nx_stat_inc(NX_STAT_D_TCP_READ_TIMEOUT);
	} else {
		nx_stat_inc(NX_STAT_TCP_IDLE_CLOSED);
	}
	conn_close(c);
}

/* A partial message must finish within read_ms of its first byte; an empty connection with
 * nothing pending closes after idle_ms; while queries are pending the upstream deadline bounds
 * the wait, so no timer runs. */
static void arm_timer(struct nx_tcp_conn *c)
{
	if (!c->open) {
		return;
	}
	uint64_t now = uv_now(c->h.loop);
	if (c->rlen > 0) {
		uint64_t end = c->msg_start_ms + c->srv->lim.read_ms;
		uv_timer_start(&c->timer, on_timeout, end > now ? end - now : 0, 0);
	} else if (c->holds == 0 && c->writes == 0) {
		uv_timer_start(&c->timer, on_timeout, c->srv->lim.idle_ms, 0);
	} else {
		uv_timer_stop(&c->timer);
	}
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct nx_tcp_conn *c = h->data;
	size_t need = c->rlen + 1;
	if (c->rlen >= 2) {
		need = 2 + (((size_t)c->rbuf[0] << 8) | c->rbuf[1]);
	} else if (need < NX_TCP_RBUF_INITIAL) {
		need = NX_TCP_RBUF_INITIAL;
	}
	if (need > c->rcap) {
		uint8_t *nb = nx_mem_realloc(NX_OWNER_tcp_conns, c->rbuf, c->rcap, need);
		if (nb) {
			c->rbuf = nb;
			c->rcap = need;
		}
	}
	*buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

static void update_reading(struct nx_tcp_conn *c)
{
	if (!c->open) {
		return;
	}
	bool want = c->holds < NX_TCP_MAX_PIPELINE;
	if (want && !c->reading) {
		if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) == 0) {
			c->reading = true;
		}
	} else if (!want && c->reading) {
		uv_read_stop((uv_stream_t *)&c->h);
		c->reading = false;
	}
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct nx_tcp_conn *c = st->data;
	if (n < 0) {
		conn_close(c);
		return;
	}
	if (n == 0) {
		if (c->rcap == c->rlen) {
			conn_close(c); /* no memory for the buffer: nothing else to do */
		}
		return;
	}
	if (c->rlen == 0) {
		c->msg_start_ms = uv_now(st->loop);
	}
	c->rlen += (size_t)n;
	/* Keep c alive across callbacks that may close it. */
	c->holds++;
	size_t off = 0;
	while (c->open && c->rlen - off >= 2) {
		size_t mlen = ((size_t)c->rbuf[off] << 8) | c->rbuf[off + 1];
		if (c->rlen - off < 2 + mlen) {
			break;
		}
		c->srv->cb(c->srv->ud, c, c->rbuf + off + 2, mlen);
		off += 2 + mlen;
		if (c->rlen - off > 0) {
			c->msg_start_ms = uv_now(st->loop);
		}
	}
	if (off > 0 && c->open) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	}
	c->rlen -= off;
	c->holds--;
	if (!c->open) {
		maybe_free(c);
		return;
	}
	update_reading(c);
	arm_timer(c);
}

static void on_refused_closed(uv_handle_t *h)
{
	nx_mem_free(NX_OWNER_tcp_conns, h, sizeof(uv_tcp_t));
}

static void on_connection(uv_stream_t *ls, int status)
{
	struct nx_tcp_server *s = ls->data;
	if (status < 0) {
		return;
	}
	int n = atomic_fetch_add(s->open_count, 1);
	if (n >= (int)s->lim.max_conns) {
		atomic_fetch_sub(s->open_count, 1);
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
		return;
	}
	struct nx_tcp_conn *c = nx_mem_calloc(NX_OWNER_tcp_conns, 1, sizeof(*c));
	if (!c) {
		atomic_fetch_sub(s->open_count, 1);
		return;
	}
	c->srv = s;
	uv_tcp_init(ls->loop, &c->h);
	uv_timer_init(ls->loop, &c->timer);
	c->h.data = c;
	c->timer.data = c;
	c->handles_open = 2;
	c->open = true;
	nx_gauge_add(NX_GAUGE_TCP_CONNS, 1);
	c->next = s->conns;
	if (s->conns) {
		s->conns->prev = c;
	}
	s->conns = c;
	if (uv_accept(ls, (uv_stream_t *)&c->h) < 0) {
		conn_close(c);
		return;
	}
	nx_stat_inc(NX_STAT_TCP_ACCEPTED);
	int plen = sizeof(c->peer);
	uv_tcp_getpeername(&c->h, (struct sockaddr *)&c->peer, &plen);
	uv_tcp_nodelay(&c->h, 1);
	update_reading(c);
	arm_timer(c);
}

int nx_tcp_open(uv_loop_t *loop, const struct nx_addr *addr, int listener,
		atomic_int *open_count, const struct nx_tcp_limits *lim, nx_tcp_msg_cb cb, void *ud,
		struct nx_tcp_server **out)
{
	int fd = nx_sock_tcp_listen(addr, true, NX_TCP_BACKLOG);
	if (fd < 0) {
		return fd;
	}
	struct nx_tcp_server *s = nx_mem_calloc(NX_OWNER_tcp_conns, 1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->listener = listener;
	s->open_count = open_count;
	s->lim = *lim;
	s->cb = cb;
	s->ud = ud;
	uv_tcp_init(loop, &s->h);
	s->h.data = s;
	int rc = uv_tcp_open(&s->h, fd);
	if (rc == 0) {
		rc = uv_listen((uv_stream_t *)&s->h, NX_TCP_BACKLOG, on_connection);
	}
	if (rc < 0) {
		s->closing = true;
		nx_tcp_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void nx_tcp_set_limits(struct nx_tcp_server *s, const struct nx_tcp_limits *lim)
{
	s->lim = *lim;
}

static void on_server_closed(uv_handle_t *h)
{
	nx_mem_free(NX_OWNER_tcp_conns, h->data, sizeof(struct nx_tcp_server));
}

void nx_tcp_close(struct nx_tcp_server *s)
{
	if (!s) {
		return;
	}
	while (s->conns) {
		conn_close(s->conns);
	}
	uv_close((uv_handle_t *)&s->h, on_server_closed);
}

static void on_written(uv_write_t *req, int status)
{
	struct wreq *w = (struct wreq *)req;
	struct nx_tcp_conn *c = w->c;
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
	arm_timer(c);
}

int nx_tcp_send(struct nx_tcp_conn *c, const uint8_t *msg, size_t len)
{
	if (!c->open) {
		nx_stat_inc(NX_STAT_D_SEND);
		return -ENOTCONN;
	}
	uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
	size_t done = 0;
	if (c->writes == 0) {
		/* Fast path: the socket usually takes the whole reply, no copy. */
		uv_buf_t bufs[2] = {uv_buf_init((char *)hdr, 2), uv_buf_init((char *)msg, (unsigned)len)};
		int r = uv_try_write((uv_stream_t *)&c->h, bufs, 2);
		if (r == (int)(len + 2)) {
			return 0;
		}
		if (r < 0 && r != UV_EAGAIN) {
			conn_close(c);
			nx_stat_inc(NX_STAT_D_SEND);
			return r;
		}
		done = r > 0 ? (size_t)r : 0;
	}
	size_t rest = len + 2 - done;
	if (c->queued + rest > NX_TCP_MAX_QUEUED) {
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
	/* Copy whatever of [hdr | msg] the socket has not taken yet. */
	size_t o = 0;
	for (size_t i = done; i < len + 2; i++) {
		w->data[o++] = i < 2 ? hdr[i] : msg[i - 2];
	}
	uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)rest);
	int rc = uv_write(&w->req, (uv_stream_t *)&c->h, &b, 1, on_written);
	if (rc < 0) {
		nx_mem_free(NX_OWNER_tcp_writes, w, sizeof(*w) + rest);
		conn_close(c);
		return rc;
	}
	c->writes++;
	c->queued += rest;
	uv_timer_stop(&c->timer);
	return 0;
}

void nx_tcp_hold(struct nx_tcp_conn *c)
{
	c->holds++;
	update_reading(c);
	arm_timer(c);
}

void nx_tcp_release(struct nx_tcp_conn *c)
{
	c->holds--;
	if (!c->open) {
		maybe_free(c);
		return;
	}
	update_reading(c);
	arm_timer(c);
}

void nx_tcp_abort(struct nx_tcp_conn *c)
{
	conn_close(c);
}

bool nx_tcp_is_open(const struct nx_tcp_conn *c)
{
	return c->open;
}

const struct sockaddr *nx_tcp_peer(const struct nx_tcp_conn *c)
{
	return (const struct sockaddr *)&c->peer;
}

int nx_tcp_listener(const struct nx_tcp_conn *c)
{
	return c->srv->listener;
}

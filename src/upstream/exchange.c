#include "upstream/upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "dns/wire.h"

void nx_up_stats_outcome(int idx, enum nx_up_outcome o, uint64_t latency_us);

#define PORT_TRIES 8 /* random source ports tried before letting the kernel pick one */
#define NX_UP_SPARE_OPS 8 /* operations allowed beyond 2 x max_ops while handles close */

enum att_state { ATT_FREE, ATT_UDP, ATT_TCP, ATT_CLOSING };

struct up_tcp {
	uv_tcp_t h;
	uv_connect_t creq;
	uv_write_t wreq;
	struct attempt *a;
	size_t rlen;
	uint8_t wbuf[2 + NX_UP_QUERY_MAX];
	uint8_t rbuf[2 + NX_DNS_MSG_MAX];
};

struct attempt {
	struct op *op;         /* back pointer (the op outlives its attempts) */
	enum att_state state;
	uint8_t server;        /* index into op->servers */
	uint16_t id;           /* transaction id sent */
	int fd;                /* UDP socket, owned while ATT_UDP */
	uv_poll_t poll;        /* on fd */
	struct up_tcp *tcp;    /* owned while ATT_TCP (NX_OWNER_upstream_tcp) */
	uint64_t sent_us;
};

struct op {
	struct nx_upstream *u;
	struct op *next_free;
	bool running;            /* between start and the done callback */
	unsigned handles;        /* libuv handles still open (attempts closing) */
	const struct nx_up_server *servers; /* borrowed (request) */
	uint8_t n_servers;
	uint8_t next_server;     /* next server not yet tried */
	uint8_t race;
	unsigned stagger_ms;
	struct nx_dns_question q;
	uint16_t qlen;
	uint8_t query[NX_UP_QUERY_MAX];
	uv_timer_t deadline;
	uv_timer_t stagger;
	nx_up_done_cb cb;
	void *ud;
	struct attempt att[NX_UP_MAX_ATTEMPTS];
};

struct nx_upstream {
	uv_loop_t *loop;
	struct op *free;         /* idle operations, reused */
	unsigned n_ops;          /* allocated */
	unsigned max_ops;
	unsigned running;
	struct op **all;         /* every allocated op, for shutdown */
	unsigned all_cap;
	bool shutting_down;
	uint8_t rx[NX_DNS_MSG_MAX]; /* one receive buffer per engine (per worker) */
};

static void launch_next(struct op *op);
static void finish(struct op *op, enum nx_up_result res, const uint8_t *msg, size_t len,
		   const struct nx_dns_msg *m, int server);

static int active_attempts(const struct op *op)
{
	int n = 0;
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		n += op->att[i].state == ATT_UDP || op->att[i].state == ATT_TCP;
	}
	return n;
}

static void maybe_recycle(struct op *op)
{
	if (op->running || op->handles > 0) {
		return;
	}
	op->next_free = op->u->free;
	op->u->free = op;
}

static void op_handle_closed(struct op *op)
{
	op->handles--;
	if (op->u->shutting_down) {
		if (op->handles == 0) {
			nx_mem_free(NX_OWNER_exchange_pool, op, sizeof(*op));
		}
		return;
	}
	maybe_recycle(op);
}

static void on_att_closed(uv_handle_t *h)
{
	struct attempt *a = h->data;
	struct op *op = a->op;
	if (h == (uv_handle_t *)&a->poll) {
		close(a->fd);
		a->fd = -1;
	} else {
		nx_mem_free(NX_OWNER_upstream_tcp, a->tcp, sizeof(*a->tcp));
		a->tcp = NULL;
	}
	a->state = ATT_FREE;
	op_handle_closed(op);
}

/* Stop an attempt; its slot frees when libuv has closed the handle. */
static void att_stop(struct attempt *a, enum nx_up_outcome outcome)
{
	if (a->state != ATT_UDP && a->state != ATT_TCP) {
		return;
	}
	nx_up_stats_outcome(a->op->servers[a->server].stats, outcome, 0);
	if (a->state == ATT_UDP) {
		uv_poll_stop(&a->poll);
		uv_close((uv_handle_t *)&a->poll, on_att_closed);
	} else {
		uv_close((uv_handle_t *)&a->tcp->h, on_att_closed);
	}
	a->state = ATT_CLOSING;
}

static void finish(struct op *op, enum nx_up_result res, const uint8_t *msg, size_t len,
		   const struct nx_dns_msg *m, int server)
{
	if (!op->running) {
		return;
	}
	uv_timer_stop(&op->deadline);
	uv_timer_stop(&op->stagger);
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		att_stop(&op->att[i], res == NX_UP_TIMEOUT ? NX_UP_O_TIMEOUT : NX_UP_O_CANCELLED);
	}
	op->running = false;
	op->u->running--;
	op->cb(op->ud, res, msg, len, m, server);
	maybe_recycle(op);
}

/* An attempt failed (error or unusable rcode): count it and move on to the next server. */
static void att_failed(struct attempt *a)
{
	struct op *op = a->op;
	att_stop(a, NX_UP_O_ERROR);
	if (op->next_server < op->n_servers) {
		launch_next(op);
	}
	if (op->running && active_attempts(op) == 0 && op->next_server >= op->n_servers) {
		finish(op, NX_UP_FAILED, NULL, 0, NULL, -1);
	}
}

static bool question_matches(const struct op *op, const struct nx_dns_msg *m)
{
	return m->has_question && m->qdcount == 1 && m->q.qtype == op->q.qtype &&
	       m->q.qclass == op->q.qclass &&
	       nx_dns_name_eq(m->q.name, m->q.name_len, op->q.name, op->q.name_len);
}

static void start_tcp(struct attempt *a);

/* Validate a reply for attempt a (buffer u->rx); returns after acting on it. */
static void on_reply(struct attempt *a, const uint8_t *buf, size_t len, bool via_tcp)
{
	struct op *op = a->op;
	struct nx_dns_msg m;
	/* Over UDP a bad datagram may be a spoofer's: ignore it and keep listening. Over TCP the
	 * one reply has arrived and reading stopped: a bad one fails the attempt. */
	if (nx_dns_hdr_parse(buf, len, &m) < 0) {
		nx_stat_inc(NX_STAT_UP_BAD_REPLY);
		if (via_tcp) {
			att_failed(a);
		}
		return;
	}
	if (m.id != a->id) {
		nx_stat_inc(NX_STAT_UP_WRONG_ID);
		if (via_tcp) {
			att_failed(a);
		}
		return;
	}
	if (!(m.flags & NX_DNS_F_QR) || NX_DNS_OPCODE(m.flags) != 0 ||
	    nx_dns_msg_parse(buf, len, &m) < 0) {
		nx_stat_inc(NX_STAT_UP_BAD_REPLY);
		if (via_tcp) {
			att_failed(a);
		}
		return;
	}
	if (!question_matches(op, &m)) {
		nx_stat_inc(NX_STAT_UP_WRONG_QUESTION);
		if (via_tcp) {
			att_failed(a);
		}
		return;
	}
	if ((m.flags & NX_DNS_F_TC) && !via_tcp) {
		start_tcp(a);
		return;
	}
	int rcode = NX_DNS_RCODE(m.flags);
	if (rcode == NX_DNS_SERVFAIL || rcode == NX_DNS_REFUSED || rcode == NX_DNS_NOTIMP ||
	    rcode == NX_DNS_FORMERR) {
		att_failed(a);
		return;
	}
	uint64_t lat = nx_now_mono_us() - a->sent_us;
	int server = a->server;
	/* Count the winner as an answer before finish() cancels the rest. */
	nx_up_stats_outcome(op->servers[server].stats, NX_UP_O_ANSWER, lat);
	if (a->state == ATT_UDP) {
		uv_poll_stop(&a->poll);
		uv_close((uv_handle_t *)&a->poll, on_att_closed);
	} else {
		uv_close((uv_handle_t *)&a->tcp->h, on_att_closed);
	}
	a->state = ATT_CLOSING;
	finish(op, NX_UP_ANSWER, buf, len, &m, server);
}

static void on_udp_readable(uv_poll_t *h, int status, int events)
{
	struct attempt *a = h->data;
	struct nx_upstream *u = a->op->u;
	if (status < 0) {
		att_failed(a);
		return;
	}
	/* Drain: a spoofer may have queued junk before the real answer. */
	for (int i = 0; i < 16 && a->state == ATT_UDP; i++) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(a->fd, u->rx, sizeof(u->rx), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &flen);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
				return;
			}
			att_failed(a);
			return;
		}
		const struct nx_up_server *sv = &a->op->servers[a->server];
		const struct sockaddr *to = (const struct sockaddr *)&sv->ss;
		bool same = from.ss_family == to->sa_family;
		if (same && to->sa_family == AF_INET) {
			const struct sockaddr_in *x = (const void *)&from, *y = (const void *)to;
			same = x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
		} else if (same) {
			const struct sockaddr_in6 *x = (const void *)&from, *y = (const void *)to;
			same = x->sin6_port == y->sin6_port &&
			       memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
		}
		if (!same) {
			nx_stat_inc(NX_STAT_UP_WRONG_SOURCE);
			continue;
		}
		on_reply(a, u->rx, (size_t)n, false);
	}
}

/* A UDP socket on a random source port (RFC 5452). */
static int open_udp(int family)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	for (int i = 0; i < PORT_TRIES; i++) {
		uint16_t port = (uint16_t)(1024 + nx_rand_uniform(65536 - 1024));
		struct sockaddr_storage ss = {0};
		socklen_t len;
		if (family == AF_INET) {
			struct sockaddr_in *s = (struct sockaddr_in *)&ss;
			s->sin_family = AF_INET;
			s->sin_port = htons(port);
			len = sizeof(*s);
		} else {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
			s->sin6_family = AF_INET6;
			s->sin6_port = htons(port);
			len = sizeof(*s);
		}
		if (bind(fd, (struct sockaddr *)&ss, len) == 0) {
			return fd;
		}
	}
	return fd; /* unbound: the kernel picks an ephemeral port at send */
}

static struct attempt *free_attempt(struct op *op)
{
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		if (op->att[i].state == ATT_FREE) {
			return &op->att[i];
		}
	}
	return NULL;
}

/* Start the next untried server. Returns false when none could be started. */
static bool launch_one(struct op *op)
{
	while (op->next_server < op->n_servers) {
		struct attempt *a = free_attempt(op);
		if (!a) {
			return false;
		}
		uint8_t si = op->next_server++;
		const struct nx_up_server *sv = &op->servers[si];
		int fd = open_udp(sv->ss.ss_family);
		if (fd < 0) {
			nx_up_stats_outcome(sv->stats, NX_UP_O_ERROR, 0);
			continue;
		}
		a->id = (uint16_t)nx_rand_u32();
		op->query[0] = (uint8_t)(a->id >> 8);
		op->query[1] = (uint8_t)a->id;
		if (sendto(fd, op->query, op->qlen, MSG_DONTWAIT, (const struct sockaddr *)&sv->ss,
			   sv->len) < 0) {
			close(fd);
			nx_up_stats_outcome(sv->stats, NX_UP_O_ERROR, 0);
			continue;
		}
		a->fd = fd;
		a->server = si;
		a->sent_us = nx_now_mono_us();
		uv_poll_init(op->u->loop, &a->poll, fd);
		a->poll.data = a;
		op->handles++;
		uv_poll_start(&a->poll, UV_READABLE, on_udp_readable);
		a->state = ATT_UDP;
		return true;
	}
	return false;
}

static void on_stagger(uv_timer_t *t)
{
	struct op *op = t->data;
	launch_next(op);
}

/* Launch one more attempt and schedule the one after it while the race allows. */
static void launch_next(struct op *op)
{
	if (!op->running) {
		return;
	}
	if (active_attempts(op) < op->race) {
		launch_one(op);
	}
	if (op->next_server < op->n_servers && active_attempts(op) < op->race) {
		uv_timer_start(&op->stagger, on_stagger, op->stagger_ms, 0);
	} else {
		uv_timer_stop(&op->stagger);
	}
	if (active_attempts(op) == 0 && op->next_server >= op->n_servers) {
		finish(op, NX_UP_FAILED, NULL, 0, NULL, -1);
	}
}

static void on_deadline(uv_timer_t *t)
{
	struct op *op = t->data;
	finish(op, NX_UP_TIMEOUT, NULL, 0, NULL, -1);
}

/* ---- TCP retry after a truncated UDP answer ---- */

static void tcp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct up_tcp *t = h->data == NULL ? NULL : ((struct attempt *)h->data)->tcp;
	*buf = uv_buf_init((char *)t->rbuf + t->rlen, (unsigned)(sizeof(t->rbuf) - t->rlen));
}

static void tcp_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct attempt *a = st->data;
	if (a->state != ATT_TCP) {
		return;
	}
	struct up_tcp *t = a->tcp;
	if (n < 0) {
		att_failed(a);
		return;
	}
	t->rlen += (size_t)n;
	if (t->rlen < 2) {
		return;
	}
	size_t mlen = ((size_t)t->rbuf[0] << 8) | t->rbuf[1];
	if (t->rlen < 2 + mlen) {
		if (t->rlen == sizeof(t->rbuf)) {
			att_failed(a);
		}
		return;
	}
	uv_read_stop(st);
	/* Copy into the engine buffer: the callback chain may close this handle. */
	memcpy(a->op->u->rx, t->rbuf + 2, mlen);
	on_reply(a, a->op->u->rx, mlen, true);
}

static void tcp_written(uv_write_t *req, int status)
{
	struct attempt *a = req->data;
	if (status < 0 && a->state == ATT_TCP) {
		att_failed(a);
	}
}

static void tcp_connected(uv_connect_t *req, int status)
{
	struct attempt *a = req->data;
	if (a->state != ATT_TCP) {
		return;
	}
	if (status < 0) {
		att_failed(a);
		return;
	}
	struct up_tcp *t = a->tcp;
	struct op *op = a->op;
	t->wbuf[0] = (uint8_t)(op->qlen >> 8);
	t->wbuf[1] = (uint8_t)op->qlen;
	memcpy(t->wbuf + 2, op->query, op->qlen);
	t->wbuf[2] = (uint8_t)(a->id >> 8);
	t->wbuf[3] = (uint8_t)a->id;
	uv_buf_t b = uv_buf_init((char *)t->wbuf, 2u + op->qlen);
	t->wreq.data = a;
	if (uv_write(&t->wreq, (uv_stream_t *)&t->h, &b, 1, tcp_written) < 0 ||
	    uv_read_start((uv_stream_t *)&t->h, tcp_alloc, tcp_read) < 0) {
		att_failed(a);
	}
}

static void start_tcp(struct attempt *a)
{
	struct op *op = a->op;
	/* Close the UDP side; the slot moves to TCP once it is closed... keep it simple: the UDP
	 * handle closes now and the TCP handle lives in its own allocation. */
	struct up_tcp *t = nx_mem_calloc(NX_OWNER_upstream_tcp, 1, sizeof(*t));
	if (!t) {
		att_failed(a);
		return;
	}
	uv_poll_stop(&a->poll);
	/* The UDP handle's close callback must not free the slot: detach it by closing through
	 * a no-op path. We account the TCP handle as a second handle of the op. */
	int fd = a->fd;
	a->fd = -1;
	uv_close((uv_handle_t *)&a->poll, NULL);
	close(fd);
	op->handles--; /* the poll handle is gone (closing with no callback) */
	a->tcp = t;
	t->a = a;
	uv_tcp_init(op->u->loop, &t->h);
	t->h.data = a;
	op->handles++;
	a->state = ATT_TCP;
	t->creq.data = a;
	const struct nx_up_server *sv = &op->servers[a->server];
	if (uv_tcp_connect(&t->creq, &t->h, (const struct sockaddr *)&sv->ss, tcp_connected) < 0) {
		att_failed(a);
	}
}

/* ---- engine ---- */

int nx_upstream_new(uv_loop_t *loop, unsigned max_ops, struct nx_upstream **out)
{
	struct nx_upstream *u = nx_mem_calloc(NX_OWNER_worker_buffers, 1, sizeof(*u));
	if (!u) {
		return -ENOMEM;
	}
	u->loop = loop;
	u->max_ops = max_ops;
	*out = u;
	return 0;
}

void nx_upstream_set_max_ops(struct nx_upstream *u, unsigned max_ops)
{
	u->max_ops = max_ops;
}

static struct op *get_op(struct nx_upstream *u)
{
	if (u->free) {
		struct op *op = u->free;
		u->free = op->next_free;
		return op;
	}
	/* Finished operations rejoin the free list only once their handles have closed (next loop
	 * turn), so allow that many more than the running bound: running <= max_ops is checked by
	 * the caller; this caps the total at twice that. */
	if (u->n_ops >= 2 * u->max_ops + NX_UP_SPARE_OPS || u->shutting_down) {
		return NULL;
	}
	if (u->n_ops == u->all_cap) {
		unsigned cap = u->all_cap ? u->all_cap * 2 : 16;
		struct op **a = nx_mem_realloc(NX_OWNER_exchange_pool, u->all,
					       u->all_cap * sizeof(*a), cap * sizeof(*a));
		if (!a) {
			return NULL;
		}
		u->all = a;
		u->all_cap = cap;
	}
	struct op *op = nx_mem_calloc(NX_OWNER_exchange_pool, 1, sizeof(*op));
	if (!op) {
		return NULL;
	}
	op->u = u;
	uv_timer_init(u->loop, &op->deadline);
	uv_timer_init(u->loop, &op->stagger);
	op->deadline.data = op;
	op->stagger.data = op;
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		op->att[i].op = op;
		op->att[i].fd = -1;
	}
	u->all[u->n_ops++] = op;
	return op;
}

int nx_upstream_start(struct nx_upstream *u, const struct nx_up_req *req, nx_up_done_cb cb,
		      void *ud)
{
	if (u->running >= u->max_ops || req->n_servers == 0 || u->shutting_down) {
		return NX_ENOSLOT;
	}
	struct op *op = get_op(u);
	if (!op) {
		return NX_ENOSLOT;
	}
	int qlen = nx_dns_build_query(op->query, sizeof(op->query), 0, req->q, req->do_bit, req->cd);
	if (qlen < 0) {
		op->next_free = u->free;
		u->free = op;
		return qlen;
	}
	op->qlen = (uint16_t)qlen;
	op->q = *req->q;
	op->servers = req->servers;
	op->n_servers = (uint8_t)NX_MIN(req->n_servers, 255);
	op->next_server = 0;
	op->race = (uint8_t)NX_MAX(1, NX_MIN(req->race, NX_UP_MAX_ATTEMPTS));
	op->stagger_ms = req->stagger_ms;
	op->cb = cb;
	op->ud = ud;
	op->running = true;
	u->running++;
	uv_timer_start(&op->deadline, on_deadline, req->timeout_ms, 0);
	launch_next(op);
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	op_handle_closed(h->data);
}

void nx_upstream_shutdown(struct nx_upstream *u)
{
	u->shutting_down = true;
	for (unsigned i = 0; i < u->n_ops; i++) {
		struct op *op = u->all[i];
		finish(op, NX_UP_FAILED, NULL, 0, NULL, -1);
		op->handles += 2;
		uv_close((uv_handle_t *)&op->deadline, on_timer_closed);
		uv_close((uv_handle_t *)&op->stagger, on_timer_closed);
	}
	u->free = NULL;
	nx_mem_free(NX_OWNER_exchange_pool, u->all, u->all_cap * sizeof(*u->all));
	u->all = NULL;
	u->n_ops = 0;
	u->all_cap = 0;
}

void nx_upstream_free(struct nx_upstream *u)
{
	if (!u) {
		return;
	}
	nx_mem_free(NX_OWNER_worker_buffers, u, sizeof(*u));
}

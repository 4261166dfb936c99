/*
 * The upstream side of the stream layer: a connection nxdns opens to a TCP, DoT or DoH
 * server. It is the same struct nx_stream_conn as a listener's connection (stream_impl.h), so
 * the write queue, the timers, the TLS glue and the DNS framing are the listener's code; this
 * file adds what only a client does: connect, the queries it has in flight (an answer frame
 * counts only for an id it sent and nobody cancelled), a bounded queue while it connects, and
 * telling its owner when it is gone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "net/h2c.h"
#include "net/stream_impl.h"

struct nx_stream_client {
	struct nx_stream_conn c;       /* first: the shared connection (c.cl points back) */
	uv_connect_t connect_req;
	struct nx_stream_limits lim;   /* handshake = connect + handshake, idle, read */
	struct nx_stream_client_io io;
	void *ud;
	bool owner_gone;               /* nx_stream_client_close: no more callbacks */
	bool connected;
	int close_rc;                  /* why it closed, for io->closed */
	struct nx_tls_creds *creds;    /* referenced; NULL for TCP */
	char auth_name[256];           /* "" when the certificate is checked against the IP */
	char peer_ip[INET6_ADDRSTRLEN];
	char authority[NX_H2C_AUTHORITY_MAX + 1]; /* DoH :authority */
	char path[NX_H2C_PATH_MAX + 1];           /* DoH request path */
	uint8_t *resume;               /* owned until the TLS session has taken it */
	size_t resume_len;
	uint16_t ids[NX_STREAM_CLIENT_PIPELINE]; /* DNS ids in flight (TCP, DoT) */
	unsigned n_ids;
	uint8_t *queue;                /* owned: [tag 8][len 2][msg] sent once ready */
	size_t queue_len, queue_cap;
};

static struct nx_stream_client *client_of(struct nx_stream_conn *c)
{
	return c->cl;
}

static void fail(struct nx_stream_client *k, int rc)
{
	if (k->c.open) {
		k->close_rc = rc;
		stream_conn_close(&k->c);
	}
}

/* ---- the shared code's hooks ---- */

void client_closing(struct nx_stream_conn *c)
{
	struct nx_stream_client *k = client_of(c);
	k->n_ids = 0; /* lost with the connection: the owner hears of it in io->closed */
	c->holds = 0;
}

void client_free(struct nx_stream_conn *c)
{
	struct nx_stream_client *k = client_of(c);
	if (!k->owner_gone && k->io.closed) {
		k->io.closed(k->ud, k->close_rc ? k->close_rc : c->err);
	}
	nx_tls_creds_unref(k->creds);
	nx_mem_free(NX_OWNER_upstream_tcp, k->resume, k->resume_len);
	nx_mem_free(NX_OWNER_upstream_tcp, k->queue, k->queue_cap);
	nx_mem_free(NX_OWNER_upstream_tcp, k, sizeof(*k));
}

void client_timeout(struct nx_stream_conn *c)
{
	struct nx_stream_client *k = client_of(c);
	if (!c->ready || c->rlen > 0) {
		nx_stat_inc(NX_STAT_UP_STREAM_TIMEOUT);
		fail(k, -ETIMEDOUT);
		return;
	}
	fail(k, 0); /* idle: the pool opens a new one when it needs it */
}

/* One answer frame from the server. */
bool client_frame(struct nx_stream_conn *c, const uint8_t *msg, size_t len)
{
	struct nx_stream_client *k = client_of(c);
	if (len < 12) {
		nx_stat_inc(NX_STAT_UP_BAD_REPLY);
		fail(k, NX_EMALFORMED); /* the stream is out of step: nothing after it can be read */
		return false;
	}
	uint16_t id = (uint16_t)((msg[0] << 8) | msg[1]);
	for (unsigned i = 0; i < k->n_ids; i++) {
		if (k->ids[i] == id) {
			k->ids[i] = k->ids[--k->n_ids];
			c->holds = k->n_ids;
			c->active_ms = uv_now(c->h.loop);
			if (!k->owner_gone) {
				k->io.answer(k->ud, id, 0, 200, msg, len);
			}
			return c->open;
		}
	}
	nx_stat_inc(NX_STAT_UP_LATE); /* an answer to a query whose attempt has ended */
	return true;
}

/* In flight: DNS ids on a DNS stream, HTTP/2 requests on DoH (the idle timer reads holds). */
static void count_in_flight(struct nx_stream_client *k)
{
	k->c.holds = k->c.h2c ? nx_h2c_in_flight(k->c.h2c) : k->n_ids;
}

/* A DoH response (or a request's failure) from the HTTP/2 session. */
static void h2c_answer(void *ud, uint64_t tag, int rc, int status, const uint8_t *msg,
		       size_t len)
{
	struct nx_stream_conn *c = ud;
	struct nx_stream_client *k = client_of(c);
	count_in_flight(k);
	c->active_ms = uv_now(c->h.loop);
	if (!k->owner_gone) {
		k->io.answer(k->ud, tag, rc, status, msg, len);
	}
}

static int h2c_send(void *ud, const uint8_t *data, size_t len)
{
	return stream_app_write(ud, data, len);
}

static const struct nx_h2c_io h2c_io = {
	.send = h2c_send,
	.answer = h2c_answer,
};

void client_h2_input(struct nx_stream_conn *c, const uint8_t *data, size_t len)
{
	struct nx_stream_client *k = client_of(c);
	int rc = nx_h2c_feed(c->h2c, data, len);
	count_in_flight(k);
	if (rc < 0) {
		fail(k, rc);
	} else if (nx_h2c_want_close(c->h2c)) {
		fail(k, 0); /* GOAWAY and nothing left: the pool opens another when needed */
	}
	stream_arm_timer(c);
}

static int send_now(struct nx_stream_client *k, uint64_t tag, const uint8_t *msg, size_t len)
{
	if (k->c.h2c) {
		stream_out_begin(&k->c);
		int rc = nx_h2c_submit(k->c.h2c, tag, msg, len);
		stream_out_end(&k->c);
		count_in_flight(k);
		stream_arm_timer(&k->c);
		return rc == NX_ELIMIT ? rc : rc < 0 || !k->c.open ? -ENOTCONN : 0;
	}
	if (k->n_ids >= NX_STREAM_CLIENT_PIPELINE) {
		return NX_ELIMIT;
	}
	k->ids[k->n_ids++] = (uint16_t)tag;
	k->c.holds = k->n_ids;
	int rc = stream_dns_send(&k->c, msg, len);
	stream_arm_timer(&k->c);
	return rc < 0 && !k->c.open ? -ENOTCONN : 0;
}

void client_ready(struct nx_stream_conn *c)
{
	struct nx_stream_client *k = client_of(c);
	c->ready = true;
	c->active_ms = uv_now(c->h.loop);
	if (c->proto == NX_PROTO_DOH) {
		stream_out_begin(c);
		int rc = nx_h2c_new(k->authority, k->path, NULL, &h2c_io, c, &c->h2c);
		stream_out_end(c);
		if (rc < 0) {
			fail(k, rc);
			return;
		}
	}
	/* The queries that waited for the handshake, in order. */
	stream_out_begin(c);
	size_t off = 0;
	while (c->open && off + 10 <= k->queue_len) {
		uint64_t tag = 0;
		for (int i = 0; i < 8; i++) {
			tag = (tag << 8) | k->queue[off + i];
		}
		size_t ml = ((size_t)k->queue[off + 8] << 8) | k->queue[off + 9];
		send_now(k, tag, k->queue + off + 10, ml);
		off += 10 + ml;
	}
	stream_out_end(c);
	nx_mem_free(NX_OWNER_upstream_tcp, k->queue, k->queue_cap);
	k->queue = NULL;
	k->queue_len = k->queue_cap = 0;
	if (c->open && !k->owner_gone && k->io.ready) {
		k->io.ready(k->ud);
	}
	stream_arm_timer(c);
}

/* ---- connecting ---- */

static void on_connected(uv_connect_t *req, int status)
{
	struct nx_stream_client *k = req->data;
	struct nx_stream_conn *c = &k->c;
	if (!c->open) {
		return; /* closed while connecting (owner gone, timeout) */
	}
	if (status < 0) {
		nx_stat_inc(NX_STAT_UP_STREAM_CONNECT_FAILED);
		fail(k, status);
		return;
	}
	k->connected = true;
	uv_tcp_nodelay(&c->h, 1);
	stream_update_reading(c);
	if (!k->creds) {
		client_ready(c);
		return;
	}
	enum nx_tls_alpn alpn = c->proto == NX_PROTO_DOH ? NX_TLS_ALPN_H2 : NX_TLS_ALPN_DOT;
	int rc = nx_tls_client_new(k->creds, k->auth_name[0] ? k->auth_name : NULL, k->peer_ip,
				   alpn, k->resume, k->resume_len, &stream_tls_io, c, &c->tls);
	nx_mem_free(NX_OWNER_upstream_tcp, k->resume, k->resume_len);
	k->resume = NULL;
	k->resume_len = 0;
	if (rc < 0) {
		fail(k, rc);
	}
}

int nx_stream_connect(uv_loop_t *loop, const struct sockaddr *sa, socklen_t salen,
		      const struct nx_stream_client_opts *o, const struct nx_stream_client_io *io,
		      void *ud, struct nx_stream_client **out)
{
	bool tls = o->proto == NX_PROTO_DOT || o->proto == NX_PROTO_DOH;
	bool doh = o->proto == NX_PROTO_DOH;
	if (o->proto == NX_PROTO_UDP || tls != (o->creds != NULL) ||
	    salen > sizeof(struct sockaddr_storage) ||
	    (doh && (!o->authority || !o->path || strlen(o->authority) > NX_H2C_AUTHORITY_MAX ||
		     strlen(o->path) > NX_H2C_PATH_MAX))) {
		return -EINVAL;
	}
	struct nx_stream_client *k = nx_mem_calloc(NX_OWNER_upstream_tcp, 1, sizeof(*k));
	if (!k) {
		return -ENOMEM;
	}
	struct nx_stream_conn *c = &k->c;
	k->io = *io;
	k->ud = ud;
	k->lim.handshake_ms = o->connect_ms;
	k->lim.idle_ms = o->idle_ms;
	k->lim.read_ms = o->read_ms;
	if (o->auth_name) {
		snprintf(k->auth_name, sizeof(k->auth_name), "%s", o->auth_name);
	}
	if (doh) {
		snprintf(k->authority, sizeof(k->authority), "%s", o->authority);
		snprintf(k->path, sizeof(k->path), "%s", o->path);
	}
	const void *ip = sa->sa_family == AF_INET6
				 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
				 : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	inet_ntop(sa->sa_family, ip, k->peer_ip, sizeof(k->peer_ip));
	if (o->resume && o->resume_len > 0) {
		k->resume = nx_mem_alloc(NX_OWNER_upstream_tcp, o->resume_len);
		if (k->resume) {
			memcpy(k->resume, o->resume, o->resume_len);
			k->resume_len = o->resume_len;
		}
	}
	if (o->creds) {
		nx_tls_creds_ref(o->creds);
		k->creds = o->creds;
	}
	c->cl = k;
	c->lim = &k->lim;
	c->rx = o->rx;
	c->proto = o->proto;
	memcpy(&c->peer, sa, salen);
	c->peer_len = salen;
	uv_tcp_init(loop, &c->h);
	uv_timer_init(loop, &c->timer);
	c->h.data = c;
	c->timer.data = c;
	c->handles_open = 2;
	c->open = true;
	c->active_ms = c->accepted_ms = uv_now(loop);
	k->connect_req.data = k;
	int rc = uv_tcp_connect(&k->connect_req, &c->h, sa, on_connected);
	if (rc < 0) {
		k->owner_gone = true; /* the caller hears it from the return code */
		stream_conn_close(c);
		return rc;
	}
	stream_arm_timer(c);
	*out = k;
	return 0;
}

/* ---- sending ---- */

static int enqueue(struct nx_stream_client *k, uint64_t tag, const uint8_t *msg, size_t len)
{
	size_t need = k->queue_len + 10 + len;
	if (need > NX_STREAM_CLIENT_QUEUE) {
		return NX_ELIMIT;
	}
	if (need > k->queue_cap) {
		size_t cap = NX_MAX(need, NX_MIN((size_t)NX_STREAM_CLIENT_QUEUE, k->queue_cap * 2));
		uint8_t *q = nx_mem_realloc(NX_OWNER_upstream_tcp, k->queue, k->queue_cap, cap);
		if (!q) {
			return -ENOMEM;
		}
		k->queue = q;
		k->queue_cap = cap;
	}
	uint8_t *b = k->queue + k->queue_len;
	for (int i = 0; i < 8; i++) {
		b[i] = (uint8_t)(tag >> (56 - 8 * i));
	}
	b[8] = (uint8_t)(len >> 8);
	b[9] = (uint8_t)len;
	memcpy(b + 10, msg, len);
	k->queue_len = need;
	return 0;
}

int nx_stream_client_send(struct nx_stream_client *k, uint64_t tag, const uint8_t *msg,
			  size_t len)
{
	if (!k->c.open) {
		return -ENOTCONN;
	}
	if (len < 12 || len > NX_DNS_MSG_MAX) {
		return -EINVAL;
	}
	if (!k->c.ready) {
		return enqueue(k, tag, msg, len);
	}
	return send_now(k, tag, msg, len);
}

void nx_stream_client_cancel(struct nx_stream_client *k, uint64_t tag)
{
	if (k->c.h2c) {
		stream_out_begin(&k->c);
		nx_h2c_cancel(k->c.h2c, tag); /* RST_STREAM CANCEL; no answer comes for it */
		stream_out_end(&k->c);
		count_in_flight(k);
		stream_arm_timer(&k->c);
		return;
	}
	/* Still queued for the handshake: it never goes out. */
	for (size_t off = 0; off + 10 <= k->queue_len;) {
		uint64_t t = 0;
		for (int i = 0; i < 8; i++) {
			t = (t << 8) | k->queue[off + i];
		}
		size_t size = 10 + (((size_t)k->queue[off + 8] << 8) | k->queue[off + 9]);
		if (t == tag) {
			memmove(k->queue + off, k->queue + off + size, k->queue_len - off - size);
			k->queue_len -= size;
			return;
		}
		off += size;
	}
	for (unsigned i = 0; i < k->n_ids; i++) {
		if (k->ids[i] == (uint16_t)tag) {
			k->ids[i] = k->ids[--k->n_ids];
			k->c.holds = k->n_ids;
			if (k->n_ids == 0) {
				k->c.active_ms = uv_now(k->c.h.loop);
			}
			stream_arm_timer(&k->c);
			return;
		}
	}
}

bool nx_stream_client_can_send(const struct nx_stream_client *k)
{
	if (!k->c.open) {
		return false;
	}
	if (!k->c.ready) {
		return k->queue_len + 10 + 512 <= NX_STREAM_CLIENT_QUEUE;
	}
	return k->c.h2c ? nx_h2c_can_submit(k->c.h2c) : k->n_ids < NX_STREAM_CLIENT_PIPELINE;
}

unsigned nx_stream_client_in_flight(const struct nx_stream_client *k)
{
	return k->c.h2c ? nx_h2c_in_flight(k->c.h2c) : k->n_ids;
}

bool nx_stream_client_ready(const struct nx_stream_client *k)
{
	return k->c.open && k->c.ready;
}

bool nx_stream_client_resumed(const struct nx_stream_client *k)
{
	return k->c.tls && nx_tls_resumed(k->c.tls);
}

int nx_stream_client_session(const struct nx_stream_client *k, uint8_t *buf, size_t cap)
{
	return k->c.tls ? nx_tls_session_save(k->c.tls, buf, cap) : -EINVAL;
}

void nx_stream_client_close(struct nx_stream_client *k)
{
	k->owner_gone = true;
	fail(k, 0);
}

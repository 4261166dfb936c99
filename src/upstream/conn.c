/*
 * TCP, DoT and DoH upstream servers: each engine (worker) keeps, per server, a small pool of
 * connections of the stream layer (net/stream.h, the same connection code the listeners use)
 * and puts attempts on them, so DoT pipelines several queries on one TLS connection and DoH
 * multiplexes them as HTTP/2 streams. A connection that fails before it was ever ready puts
 * the server in backoff (attempts then fail at once and the race moves on to the next server
 * instead of waiting for a dead one); one that was ready resets it. The TLS session of the
 * last good connection is kept for resumption of the next.
 *
 * Ids: on a DNS stream the DNS id is the request's tag, random and unique among the attempts
 * on that connection (stream answers cannot be spoofed off-path, but a reused id must not
 * deliver one attempt's answer to another); DoH sends id 0 (RFC 8484 4.1) and tags requests.
 */
#include <errno.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "net/tls.h"
#include "upstream/engine.h"
#include "upstream/impl.h"

#define NX_UP_STREAM_CONNS 2        /* connections per server per worker */
#define NX_UP_STREAM_INFLIGHT 128   /* attempts on one connection (>= DoH's 100 streams) */
#define NX_UP_STREAM_CONNECT_MS 3000 /* connect + TLS handshake */
#define NX_UP_STREAM_IDLE_MS 10000  /* an unused connection closes (RFC 7766 6.2.3 suggests seconds) */
#define NX_UP_STREAM_READ_MS 3000   /* a started answer must complete */
#define NX_UP_BACKOFF_MIN_MS 250    /* first pause after a connection that never got ready */
#define NX_UP_BACKOFF_MAX_MS 8000

struct up_spool;

struct up_sconn {
	struct up_spool *pool;
	struct nx_stream_client *c;     /* NULL: free slot */
	bool was_ready;
	unsigned n;                     /* attempts in att[] */
	struct attempt *att[NX_UP_STREAM_INFLIGHT];
};

struct up_spool {
	struct nx_upstream *u;
	int stats;
	uint64_t backoff_until;         /* loop ms: no new connection before */
	unsigned backoff_ms;
	size_t session_len;             /* TLS resumption blob, 0 when none */
	uint8_t session[NX_TLS_SESSION_MAX];
	struct up_sconn conns[NX_UP_STREAM_CONNS];
};

static void detach(struct up_sconn *sc, struct attempt *a)
{
	for (unsigned i = 0; i < sc->n; i++) {
		if (sc->att[i] == a) {
			sc->att[i] = sc->att[--sc->n];
			break;
		}
	}
	a->sconn = NULL;
}

static void on_answer(void *ud, uint64_t tag, int rc, int status, const uint8_t *msg, size_t len)
{
	struct up_sconn *sc = ud;
	struct attempt *a = NULL;
	for (unsigned i = 0; i < sc->n && !a; i++) {
		if (sc->att[i]->tag == tag) {
			a = sc->att[i];
		}
	}
	if (!a) {
		nx_stat_inc(NX_STAT_UP_LATE);
		return;
	}
	detach(sc, a);
	struct up_spool *p = sc->pool;
	if (p->session_len == 0 && sc->c) {
		int n = nx_stream_client_session(sc->c, p->session, sizeof(p->session));
		p->session_len = n > 0 ? (size_t)n : 0;
	}
	struct op *op = a->op;
	if (rc < 0) {
		(void)status; /* counted by the HTTP/2 client by reason */
		nx_race_failed(&op->race, nx_up_att_index(op, a), uv_now(op->u->loop));
		return;
	}
	nx_up_on_reply(op, a, msg, len, true);
}

static void on_ready(void *ud)
{
	struct up_sconn *sc = ud;
	sc->was_ready = true;
	sc->pool->backoff_ms = 0;
	sc->pool->backoff_until = 0;
}

/* The connection is gone: its attempts fail (the race moves on), and a connection that never
 * got ready pauses new ones to this server. */
static void on_closed(void *ud, int rc)
{
	struct up_sconn *sc = ud;
	struct up_spool *p = sc->pool;
	struct nx_upstream *u = p->u;
	sc->c = NULL;
	uint64_t now = uv_now(u->loop);
	if (!sc->was_ready && rc != 0) {
		p->backoff_ms = p->backoff_ms ? NX_MIN(p->backoff_ms * 2, NX_UP_BACKOFF_MAX_MS)
					      : NX_UP_BACKOFF_MIN_MS;
		p->backoff_until = now + p->backoff_ms;
		p->session_len = 0; /* do not offer a session the server may have refused */
	}
	while (sc->n > 0) {
		struct attempt *a = sc->att[sc->n - 1];
		detach(sc, a);
		nx_race_failed(&a->op->race, nx_up_att_index(a->op, a), now);
	}
}

static const struct nx_stream_client_io sconn_io = {
	.answer = on_answer,
	.ready = on_ready,
	.closed = on_closed,
};

static struct up_spool *spool_get(struct nx_upstream *u, const struct nx_up_server *sv)
{
	if (sv->stats < 0 || sv->stats >= NX_UP_STATS_MAX) {
		return NULL;
	}
	struct up_spool *p = u->spools[sv->stats];
	if (!p) {
		p = nx_mem_calloc(NX_OWNER_upstream_tcp, 1, sizeof(*p));
		if (!p) {
			return NULL;
		}
		p->u = u;
		p->stats = sv->stats;
		for (int i = 0; i < NX_UP_STREAM_CONNS; i++) {
			p->conns[i].pool = p;
		}
		u->spools[sv->stats] = p;
	}
	if (!u->srx) {
		u->srx = nx_mem_alloc(NX_OWNER_upstream_tcp, NX_STREAM_RX_SCRATCH);
		if (!u->srx) {
			return NULL;
		}
	}
	return p;
}

static enum nx_proto proto_of(enum nx_up_transport t)
{
	return t == NX_UP_T_DOT ? NX_PROTO_DOT : t == NX_UP_T_DOH ? NX_PROTO_DOH : NX_PROTO_TCP;
}

/* A connection that can take one more attempt now, opening one when a slot is free. */
static struct up_sconn *sconn_pick(struct up_spool *p, const struct nx_up_server *sv,
				   uint64_t now)
{
	struct up_sconn *best = NULL;
	for (int i = 0; i < NX_UP_STREAM_CONNS; i++) {
		struct up_sconn *sc = &p->conns[i];
		if (!sc->c || sc->n >= NX_UP_STREAM_INFLIGHT || !nx_stream_client_can_send(sc->c)) {
			continue;
		}
		/* A ready one first, then the least loaded. */
		bool r = nx_stream_client_ready(sc->c);
		if (!best || (r && !nx_stream_client_ready(best->c)) ||
		    (r == nx_stream_client_ready(best->c) && sc->n < best->n)) {
			best = sc;
		}
	}
	/* Reuse a connection with room; open a second only when the first is full. */
	if (best) {
		return best;
	}
	if (now < p->backoff_until) {
		nx_stat_inc(NX_STAT_UP_STREAM_BACKOFF);
		return NULL;
	}
	for (int i = 0; i < NX_UP_STREAM_CONNS; i++) {
		struct up_sconn *sc = &p->conns[i];
		if (sc->c) {
			continue;
		}
		struct nx_stream_client_opts o = {
			.proto = proto_of(sv->transport),
			.creds = sv->transport == NX_UP_T_TCP ? NULL : sv->creds,
			.auth_name = sv->auth_name,
			.authority = sv->authority,
			.path = sv->path,
			.resume = p->session_len ? p->session : NULL,
			.resume_len = p->session_len,
			.connect_ms = NX_UP_STREAM_CONNECT_MS,
			.idle_ms = NX_UP_STREAM_IDLE_MS,
			.read_ms = NX_UP_STREAM_READ_MS,
			.rx = p->u->srx,
		};
		sc->was_ready = false;
		sc->n = 0;
		int rc = nx_stream_connect(p->u->loop, (const struct sockaddr *)&sv->ss, sv->len, &o,
					   &sconn_io, sc, &sc->c);
		if (rc < 0) {
			sc->c = NULL;
			nx_stat_inc(NX_STAT_UP_STREAM_CONNECT_FAILED);
			return NULL;
		}
		nx_up_stats_conn(p->stats);
		return sc;
	}
	nx_stat_inc(NX_STAT_UP_STREAM_FULL);
	return NULL;
}

/* A DNS id no other attempt on this connection uses. */
static uint16_t fresh_id(const struct up_sconn *sc)
{
	for (;;) {
		uint16_t id = (uint16_t)nx_rand_u32();
		bool used = false;
		for (unsigned i = 0; i < sc->n && !used; i++) {
			used = (uint16_t)sc->att[i]->tag == id;
		}
		if (!used) {
			return id;
		}
	}
}

int nx_up_conn_send(struct nx_upstream *u, struct op *op, struct attempt *a,
		    const struct nx_up_server *sv)
{
	uint64_t now = uv_now(u->loop);
	struct up_spool *p = spool_get(u, sv);
	if (!p) {
		return -ENOMEM;
	}
	struct up_sconn *sc = sconn_pick(p, sv, now);
	if (!sc) {
		return -EAGAIN; /* the race asks the next server at once */
	}
	bool doh = sv->transport == NX_UP_T_DOH;
	a->id = doh ? 0 : fresh_id(sc);
	a->tag = doh ? ++u->tag_seq : a->id;
	uint8_t q[NX_UP_QUERY_MAX];
	size_t qlen = nx_up_att_query(op, a, q);
	int rc = nx_stream_client_send(sc->c, a->tag, q, qlen);
	if (rc < 0) {
		return rc;
	}
	sc->att[sc->n++] = a;
	a->sconn = sc;
	a->sent_us = nx_now_mono_us();
	a->resent = false;
	return 0;
}

void nx_up_conn_stop(struct attempt *a)
{
	struct up_sconn *sc = a->sconn;
	if (!sc) {
		return;
	}
	if (sc->c) {
		nx_stream_client_cancel(sc->c, a->tag);
	}
	detach(sc, a);
}

void nx_up_conn_shutdown(struct nx_upstream *u)
{
	for (int s = 0; s < NX_UP_STATS_MAX; s++) {
		struct up_spool *p = u->spools[s];
		for (int i = 0; p && i < NX_UP_STREAM_CONNS; i++) {
			if (p->conns[i].c) {
				nx_stream_client_close(p->conns[i].c); /* freed as its handles close */
				p->conns[i].c = NULL;
			}
		}
	}
}

void nx_up_conn_free(struct nx_upstream *u)
{
	for (int s = 0; s < NX_UP_STATS_MAX; s++) {
		nx_mem_free(NX_OWNER_upstream_tcp, u->spools[s], sizeof(struct up_spool));
		u->spools[s] = NULL;
	}
	nx_mem_free(NX_OWNER_upstream_tcp, u->srx, NX_STREAM_RX_SCRATCH);
	u->srx = NULL;
}

/*
 * The engine: libuv time, random-port UDP sockets, TCP fallback, and the operations' race logic
 * (race.c) wired to them through nx_race_io.
 *
 * UDP sockets (RFC 5452): every socket is bound to its own random port, connect()ed to one
 * server, and carries at most NX_UP_SOCK_USES exchanges (each with a random id unique on it)
 * within NX_UP_SOCK_AGE_MS; then it takes no new query, closes once its last exchange ended,
 * and the next query of that server goes out on a fresh random port. So the port of an
 * exchange is close to a fresh draw from 64512 (src/upstream/README.md has the measured
 * figure). The churn is amortised: each server keeps a few spare sockets opened ahead of need
 * (after the turn's sends, as many as the turn used, at most NX_UP_SPARES), the queries of a
 * loop turn on one socket leave in one sendmmsg, and replies are read with recvmmsg into the
 * engine's one batch buffer. A server has at most NX_UP_SOCKS_MAX sockets per engine (a query
 * past that fails its attempt, counted). Replies are matched by (socket, id), then by source
 * address and question.
 *
 * Query forms per attempt: EDNS (OPT, DO as asked) unless the server is remembered as EDNS-lame
 * or this attempt got FORMERR/NOTIMP/BADVERS to EDNS (then it is asked again without OPT in the
 * same attempt, nx_race_retry); the question name's letters 0x20-randomised unless the server
 * is remembered as not preserving case (impl.h) or this attempt already saw a case
 * mismatch. A UDP reply must echo our case exactly, unless the server was found not to
 * preserve case after the query left (then it counts as an answer to an unrandomised query).
 *
 * Connected sockets (as Unbound's udp-connect): the kernel hands us only the server's
 * datagrams; to anyone else the pool's ports look closed, so they cannot be found by scanning
 * (the ICMP side channel of SAD DNS still needs guessing the server's address as source and
 * the 16-bit id within the exchange's lifetime). The server's ICMP port-unreachable reaches the
 * socket (ECONNREFUSED) and fails its waiting exchanges at once instead of at the deadline.
 * What this gives up against a socket per query: a port carries up to NX_UP_SOCK_USES
 * exchanges; 0x20 case randomisation adds up to one bit per letter of the name.
 *
 * A datagram whose id was used on the socket but whose exchange has ended (a race loser's
 * answer, an answer after the deadline) is a late reply: ignored and counted apart from spoofing
 * guesses (reason "late" vs "wrong_id").
 */
#include "upstream/upstream.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "dns/wire.h"
#include "upstream/engine.h"
#include "upstream/impl.h"
#include "upstream/race.h"

void nx_up_stats_outcome(int idx, enum nx_up_outcome o, uint64_t latency_us);
void nx_up_stats_rtt(int idx, uint64_t rtt_us);
void nx_up_stats_resend(int idx);

static const struct nx_race_io g_io;

static struct op *op_of(struct nx_race *r)
{
	return NX_CONTAINER_OF(r, struct op, race);
}

static int att_index(const struct op *op, const struct attempt *a)
{
	return (int)(a - op->att);
}

/* ---- operation pool ---- */

static void maybe_recycle(struct op *op)
{
	if (op->running || op->handles > 0 || op->u->shutting_down) {
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

/* ---- UDP sockets ---- */

static void sock_close(struct up_sock *s)
{
	if (s->closing) {
		return;
	}
	struct nx_upstream *u = s->u;
	if (s->pool->cur == s) {
		s->pool->cur = NULL; /* the struct may be reused for another server */
	}
	s->pooled = false;
	s->closing = true;
	close(s->fd); /* also leaves the epoll set: the fd was never duplicated */
	s->fd = -1;
	s->pool->open--;
	s->pool->used_ms = uv_now(u->loop);
	if (u->in_events) {
		s->next = u->dead; /* the batch may still name s */
		u->dead = s;
	} else if (u->shutting_down) {
		u->n_socks--;
		nx_mem_free(NX_OWNER_upstream_udp, s, sizeof(*s));
	} else {
		s->next = u->free_socks;
		u->free_socks = s;
	}
}

/* s takes no new exchanges: it closes when its last one ends (now, if it has none). */
static void sock_retire(struct up_sock *s)
{
	if (s->pool->cur == s) {
		s->pool->cur = NULL;
	}
	s->pooled = false;
	if (s->outstanding == 0) {
		sock_close(s);
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
	return fd; /* unbound: the kernel picks a (randomised) ephemeral port at send */
}

/*
 * A socket of pool p on a random port, connect()ed to p's server: the kernel then delivers
 * only that server's datagrams (anything else meets a closed port, so the ports cannot be
 * found by scanning from elsewhere) and reports its ICMP errors (a closed port fails the
 * waiting exchanges at once instead of at the deadline). Unbound does the same (udp-connect).
 * NULL when the socket cannot be made or p is at NX_UP_SOCKS_MAX.
 */
static struct up_sock *sock_open(struct nx_upstream *u, struct up_pool *p)
{
	if (p->open >= NX_UP_SOCKS_MAX) {
		return NULL;
	}
	int fd = open_udp(p->ss.ss_family);
	if (fd < 0) {
		return NULL;
	}
	if (connect(fd, (const struct sockaddr *)&p->ss, p->len) != 0) {
		close(fd);
		return NULL;
	}
	struct up_sock *s = u->free_socks;
	if (s) {
		u->free_socks = s->next;
	} else {
		s = nx_mem_alloc(NX_OWNER_upstream_udp, sizeof(*s));
		if (!s) {
			close(fd);
			return NULL;
		}
		u->n_socks++;
	}
	memset(s, 0, sizeof(*s));
	s->u = u;
	s->pool = p;
	s->fd = fd;
	s->born_ms = uv_now(u->loop);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
	if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd);
		s->closing = true;
		s->next = u->free_socks;
		u->free_socks = s;
		return NULL;
	}
	p->open++;
	return s;
}

static bool sock_aged(const struct nx_upstream *u, const struct up_sock *s)
{
	return uv_now(u->loop) - s->born_ms > NX_UP_SOCK_AGE_MS;
}

/* The socket the next exchange of p goes out on: the current one while it has room and is
 * young, else a spare, else a new one. */
static struct up_sock *sock_take(struct nx_upstream *u, struct up_pool *p)
{
	struct up_sock *s = p->cur;
	if (s && sock_aged(u, s)) {
		sock_retire(s);
		s = NULL;
	}
	while (!s && p->n_spare > 0) {
		s = p->spare[--p->n_spare];
		if (sock_aged(u, s)) {
			sock_close(s); /* an idle spare's port is not kept open for long either */
			s = NULL;
		}
	}
	if (!s) {
		if (p->open >= NX_UP_SOCKS_MAX) {
			nx_stat_inc(NX_STAT_UP_SOCK_LIMIT); /* a query refused; spares are not counted */
			return NULL;
		}
		s = sock_open(u, p);
		if (!s) {
			return NULL;
		}
	}
	if (s != p->cur) {
		s->pooled = true;
		p->cur = s;
		if (p->took < UINT8_MAX) {
			p->took++;
		}
	}
	return s;
}

/*
 * After a turn's sends: give each pool that took sockets in that turn as many spares as it took
 * (at most NX_UP_SPARES), so the next burst finds them open. A quiet server keeps one or none.
 */
static void spares_refill(struct nx_upstream *u)
{
	for (struct up_pool *p = u->pools; p; p = p->next) {
		unsigned want = NX_MIN(p->took, NX_UP_SPARES);
		p->took = 0;
		while (p->n_spare < want) {
			struct up_sock *s = sock_open(u, p);
			if (!s) {
				break;
			}
			s->pooled = true;
			p->spare[p->n_spare++] = s;
		}
	}
}

/* Close the sockets of p that wait for new exchanges (cur when idle, the spares). */
static void pool_close_idle(struct up_pool *p)
{
	while (p->n_spare > 0) {
		sock_close(p->spare[--p->n_spare]);
	}
	if (p->cur) {
		sock_retire(p->cur);
	}
}

static bool same_sockaddr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family) {
		return false;
	}
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0 &&
	       x->sin6_scope_id == y->sin6_scope_id;
}

/*
 * The pool of server sv, created on first use. A pool unused for NX_UP_POOL_IDLE_MS (a server
 * gone from the config) closes its spares on the way, and is freed once no socket is left.
 */
static struct up_pool *pool_get(struct nx_upstream *u, const struct nx_up_server *sv)
{
	uint64_t now = uv_now(u->loop);
	struct up_pool **pp = &u->pools, *found = NULL;
	while (*pp) {
		struct up_pool *p = *pp;
		if (!found && same_sockaddr(&p->ss, &sv->ss)) {
			found = p;
		} else if (now - p->used_ms > NX_UP_POOL_IDLE_MS) {
			pool_close_idle(p);
			if (p->open == 0) {
				*pp = p->next;
				nx_mem_free(NX_OWNER_upstream_udp, p, sizeof(*p));
				continue;
			}
		}
		pp = &p->next;
	}
	if (!found) {
		found = nx_mem_calloc(NX_OWNER_upstream_udp, 1, sizeof(*found));
		if (!found) {
			return NULL;
		}
		memcpy(&found->ss, &sv->ss, sizeof(found->ss));
		found->len = sv->len;
		found->next = u->pools;
		u->pools = found;
	}
	found->used_ms = now;
	return found;
}

/* Register attempt a on socket s under a fresh id unique on s; s retires at its last use. */
static void sock_attach(struct up_sock *s, struct attempt *a)
{
	uint16_t id;
	bool dup;
	do {
		id = (uint16_t)nx_rand_u32();
		dup = false;
		for (unsigned i = 0; i < s->uses && !dup; i++) {
			dup = s->ids[i] == id;
		}
	} while (dup);
	unsigned j = s->uses++;
	s->ids[j] = id;
	s->att[j] = a;
	s->outstanding++;
	a->sock = s;
	a->slot = (uint8_t)j;
	a->id = id;
	if (s->uses == NX_UP_SOCK_USES) {
		sock_retire(s); /* outstanding > 0: it stays open for this exchange */
	}
}

static void sock_detach(struct attempt *a)
{
	struct up_sock *s = a->sock;
	a->queued = false; /* a send still queued is dropped */
	if (!s) {
		return;
	}
	s->att[a->slot] = NULL;
	s->outstanding--;
	a->sock = NULL;
	if (!s->pooled && s->outstanding == 0) {
		sock_close(s);
	}
}

/* ---- query forms ---- */

static bool is_letter(uint8_t c)
{
	c |= 0x20;
	return c >= 'a' && c <= 'z';
}

/* Draw a fresh 0x20 pattern for attempt a: one random bit per letter of the name (labels'
 * length bytes are never letters: a label is at most 63 bytes). */
static void caps_draw(struct attempt *a, const struct nx_dns_question *q)
{
	memset(a->caps_mask, 0, sizeof(a->caps_mask));
	uint32_t bits = 0;
	unsigned left = 0;
	for (unsigned pos = 0; pos < q->name_len && q->name[pos];) {
		unsigned llen = q->name[pos];
		for (unsigned i = pos + 1; i <= pos + llen && i < q->name_len; i++) {
			if (!is_letter(q->name[i])) {
				continue;
			}
			if (left == 0) {
				bits = nx_rand_u32();
				left = 32;
			}
			if (bits & 1) {
				a->caps_mask[i / 8] |= (uint8_t)(1u << (i % 8));
			}
			bits >>= 1;
			left--;
		}
		pos += llen + 1;
	}
}

static uint8_t caps_byte(const struct attempt *a, const struct nx_dns_question *q, unsigned i)
{
	bool flip = a->caps && (a->caps_mask[i / 8] >> (i % 8) & 1);
	return (uint8_t)(q->name[i] ^ (flip ? 0x20 : 0));
}

/* Attempt a's query, id included, as it goes on the wire (both transports). Returns its length. */
static size_t att_query(const struct op *op, const struct attempt *a, uint8_t *out)
{
	size_t n = a->edns ? op->qlen : (size_t)op->qlen - OPT_BARE_LEN;
	memcpy(out, op->query, n);
	out[0] = (uint8_t)(a->id >> 8);
	out[1] = (uint8_t)a->id;
	if (!a->edns) {
		out[10] = 0; /* ARCOUNT: the OPT was the only additional record */
		out[11] = 0;
	}
	if (a->caps) {
		for (unsigned i = 0; i < op->q.name_len; i++) {
			out[NX_DNS_HDR_LEN + i] = caps_byte(a, &op->q, i);
		}
	}
	return n;
}

/* The reply's question name is ours byte for byte (0x20: the server preserved our case). */
static bool case_exact(const struct op *op, const struct attempt *a, const struct nx_dns_msg *m)
{
	for (unsigned i = 0; i < op->q.name_len; i++) {
		if (m->q.name[i] != caps_byte(a, &op->q, i)) {
			return false;
		}
	}
	return true;
}

/* ---- replies ---- */

static bool question_matches(const struct op *op, const struct nx_dns_msg *m)
{
	return m->has_question && m->qdcount == 1 && m->q.qtype == op->q.qtype &&
	       m->q.qclass == op->q.qclass &&
	       nx_dns_name_eq(m->q.name, m->q.name_len, op->q.name, op->q.name_len);
}

/* The stats slot of the server attempt a asks. */
static int server_stats(const struct attempt *a)
{
	const struct op *op = a->op;
	return op->servers[op->race.att_server[att_index(op, a)]].stats;
}

/* Show one message of attempt a to the engine's observer (nx_upstream_set_tap). */
static void tap(const struct op *op, const struct attempt *a, bool response, bool tcp,
		const uint8_t *msg, size_t len)
{
	struct nx_upstream *u = op->u;
	if (u->tap) {
		struct nx_up_tap_msg m = {
		    .response = response,
		    .tcp = tcp,
		    .server = &op->servers[op->race.att_server[att_index(op, a)]],
		    .msg = msg,
		    .len = len,
		    .sent_us = a->sent_us,
		};
		u->tap(u->tap_ud, &m);
	}
}

/* Rcodes by which a server may be rejecting our OPT (RFC 6891 7: FORMERR from a server that
 * does not know EDNS, BADVERS for a version it does not speak; NOTIMP from some middleboxes). */
static bool edns_refusal(int rcode)
{
	return rcode == NX_DNS_FORMERR || rcode == NX_DNS_NOTIMP || rcode == NX_DNS_BADVERS;
}

/*
 * Validate a reply for attempt a and act on it. Over UDP a datagram with a wrong id or another
 * question may be a spoofer's guess: it is ignored and the attempt keeps listening. One with
 * the attempt's id that does not parse (or is no response) came from the server, as the socket
 * is connected: its attempt fails at once. Over TCP the one reply has arrived: a bad one fails
 * the attempt.
 */
static void on_reply(struct op *op, struct attempt *a, const uint8_t *buf, size_t len,
		     bool via_tcp)
{
	struct nx_upstream *u = op->u;
	int ai = att_index(op, a);
	uint64_t now = uv_now(u->loop);
	struct nx_dns_msg m;
	enum nx_stat bad = NX_STAT_UP_BAD_REPLY;
	if (nx_dns_hdr_parse(buf, len, &m) < 0) {
		goto reject;
	}
	if (m.id != a->id) {
		bad = NX_STAT_UP_WRONG_ID;
		goto reject;
	}
	bool plain = op->servers[op->race.att_server[ai]].transport == NX_UP_T_PLAIN;
	tap(op, a, true, via_tcp && plain, buf, len); /* the attempt's id: the server's answer */
	int parsed = nx_dns_msg_parse(buf, len, &m);
	if (parsed < 0 || !(m.flags & NX_DNS_F_QR) || NX_DNS_OPCODE(m.flags) != 0) {
		nx_stat_inc(parsed < 0 && m.qdcount > 0 && !m.has_question
				? NX_STAT_UP_MALFORMED_QUESTION
				: NX_STAT_UP_MALFORMED);
		nx_race_failed(&op->race, ai, now);
		return;
	}
	int rcode = (m.edns.ext_rcode << 4) | NX_DNS_RCODE(m.flags);
	/* A server that does not know EDNS may FORMERR without echoing the question. */
	bool bare_error = m.qdcount == 0 && edns_refusal(rcode);
	if (!bare_error && !question_matches(op, &m)) {
		bad = NX_STAT_UP_WRONG_QUESTION;
		goto reject;
	}
	int stats = server_stats(a);
	if (!via_tcp) {
		nx_up_stats_heard(stats, a->sent_us); /* it took the query: re-send pacing */
	}
	if (!via_tcp && a->caps && !bare_error && !case_exact(op, a, &m)) {
		/* The server changed our case: a server that does not preserve it, or a spoofer
		 * who guessed id and port but not the case. Either way the query is asked once
		 * more, unrandomised, and the server gets plain names for a while (impl.h): no
		 * loop of new patterns, which a slow server would answer one by one. A server
		 * paused by another exchange since this query left is as good as asked plain. */
		nx_stat_inc(NX_STAT_UP_WRONG_CASE);
		if (nx_up_stats_caps_mismatch(stats, now)) {
			nx_stat_inc(NX_STAT_UP_CAPS_FALLBACK);
			a->case_refused = true;
			a->retrying = true;
			nx_race_retry(&op->race, ai, now);
			return;
		}
	}
	if (a->edns && edns_refusal(rcode) && !via_tcp) {
		nx_stat_inc(NX_STAT_UP_EDNS_FALLBACK);
		a->edns_refused = true;
		a->retrying = true;
		nx_race_retry(&op->race, ai, now);
		return;
	}
	if (a->edns_refused && !edns_refusal(rcode)) {
		/* It rejected EDNS and takes the plain query: remember it (Unbound's infra cache
		 * does the same); a server that FORMERRs both forms is not marked. */
		nx_up_stats_edns_lame(stats, now);
	}
	if ((m.flags & NX_DNS_F_TC) && !via_tcp) {
		nx_race_truncated(&op->race, ai, now);
		return;
	}
	if (rcode == NX_DNS_SERVFAIL || rcode == NX_DNS_REFUSED || edns_refusal(rcode)) {
		nx_race_failed(&op->race, ai, now);
		return;
	}
	u->cur_msg = buf;
	u->cur_len = len;
	u->cur_m = &m;
	nx_race_answer(&op->race, ai);
	u->cur_msg = NULL;
	u->cur_m = NULL;
	return;
reject:
	nx_stat_inc(bad);
	if (via_tcp) {
		nx_race_failed(&op->race, ai, now);
	}
}

/* One datagram on pool socket s. */
static void on_datagram(struct up_sock *s, uint8_t *buf, size_t len,
			const struct sockaddr_storage *from, bool trunc)
{
	if (len < NX_DNS_HDR_LEN) {
		nx_stat_inc(NX_STAT_UP_BAD_REPLY);
		return;
	}
	uint16_t id = (uint16_t)(buf[0] << 8 | buf[1]);
	int j = -1;
	for (unsigned i = 0; i < s->uses && j < 0; i++) {
		if (s->ids[i] == id) {
			j = (int)i;
		}
	}
	if (j < 0) {
		nx_stat_inc(NX_STAT_UP_WRONG_ID);
		return;
	}
	struct attempt *a = s->att[j];
	if (!a) {
		nx_stat_inc(NX_STAT_UP_LATE);
		return;
	}
	struct op *op = a->op;
	/* (the connected socket already filters; this stays as a second line) */
	if (!same_sockaddr(from, &op->servers[op->race.att_server[att_index(op, a)]].ss)) {
		nx_stat_inc(NX_STAT_UP_WRONG_SOURCE);
		return;
	}
	if (trunc) {
		/* Larger than the size we advertised: validated as the TC answer it amounts to (header
		 * and question, the records cut off), then the whole answer is asked over TCP. */
		struct nx_dns_rd rd;
		nx_dns_rd_init(&rd, buf, len);
		rd.pos = NX_DNS_HDR_LEN;
		nx_dns_rd_skip_name(&rd);
		nx_dns_rd_skip(&rd, 4);
		if (rd.err) {
			/* the server's (id and socket match) but its question does not parse */
			nx_stat_inc(NX_STAT_UP_MALFORMED_QUESTION);
			nx_race_failed(&op->race, att_index(op, a), uv_now(s->u->loop));
			return;
		}
		len = rd.pos;
		buf[2] |= 0x02;           /* TC */
		memset(buf + 6, 0, 6);    /* no AN/NS/AR left */
	}
	on_reply(op, a, buf, len, false);
}

/* ICMP errors a connected socket reports for its server: it cannot be reached there. */
static bool unreachable(int err)
{
	return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
	       err == EHOSTDOWN;
}

/* The server refused or cannot be reached (ICMP on the connected socket): every exchange
 * waiting on s went to that server, and each fails now (the race moves on) instead of at the
 * deadline. */
static void refused(struct up_sock *s)
{
	struct attempt *waiting[NX_UP_SOCK_USES];
	uint16_t ids[NX_UP_SOCK_USES];
	unsigned n = 0;
	for (unsigned j = 0; j < s->uses; j++) {
		if (s->att[j]) {
			ids[n] = s->ids[j];
			waiting[n++] = s->att[j];
		}
	}
	uint64_t now = uv_now(s->u->loop);
	for (unsigned i = 0; i < n; i++) {
		struct attempt *a = waiting[i];
		/* still that exchange? (failing one may end others of the same operation) */
		if (a->sock == s && a->id == ids[i]) {
			nx_race_failed(&a->op->race, att_index(a->op, a), now);
		}
	}
}

/* Events on UDP socket s: a pending error (on a connected socket, the server's ICMP), replies. */
static void sock_events(struct up_sock *s, uint32_t events)
{
	struct nx_upstream *u = s->u;
	if (events & EPOLLERR) {
		/* Take the error (SO_ERROR clears it) and fail the exchanges it concerns. */
		int err = 0;
		socklen_t el = sizeof(err);
		getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (unreachable(err)) {
			refused(s);
		}
	}
	struct mmsghdr mm[RX_BATCH];
	struct iovec iov[RX_BATCH];
	struct sockaddr_storage from[RX_BATCH];
	/* Drain in batches while the socket is open: a spoofer may have queued junk. */
	for (int round = 0; round < 4 && !s->closing && (events & EPOLLIN); round++) {
		for (int i = 0; i < RX_BATCH; i++) {
			iov[i].iov_base = u->rxb[i];
			iov[i].iov_len = RX_SLOT;
			mm[i].msg_hdr = (struct msghdr){
				.msg_name = &from[i],
				.msg_namelen = sizeof(from[i]),
				.msg_iov = &iov[i],
				.msg_iovlen = 1,
			};
			mm[i].msg_len = 0;
		}
		int n = recvmmsg(s->fd, mm, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0 && unreachable(errno)) {
			refused(s); /* ICMP: nothing listens there, or no route */
			continue;
		}
		if (n <= 0) {
			return;
		}
		for (int i = 0; i < n && !s->closing; i++) {
			on_datagram(s, u->rxb[i], mm[i].msg_len, &from[i],
				    (mm[i].msg_hdr.msg_flags & MSG_TRUNC) != 0);
		}
		if (n < RX_BATCH) {
			return;
		}
	}
}

/* The engine's epoll has ready sockets. */
static void on_ep_readable(uv_poll_t *h, int status, int events)
{
	struct nx_upstream *u = h->data;
	(void)status;
	(void)events;
	struct epoll_event ev[EP_BATCH];
	u->in_events = true;
	int n = epoll_wait(u->epfd, ev, EP_BATCH, 0);
	for (int i = 0; i < n; i++) {
		struct up_sock *s = ev[i].data.ptr;
		if (!s->closing) {
			sock_events(s, ev[i].events);
		}
	}
	u->in_events = false;
	while (u->dead) {
		struct up_sock *s = u->dead;
		u->dead = s->next;
		if (u->shutting_down) { /* a done callback in the batch shut the engine down */
			u->n_socks--;
			nx_mem_free(NX_OWNER_upstream_udp, s, sizeof(*s));
		} else {
			s->next = u->free_socks;
			u->free_socks = s;
		}
	}
	/* More than EP_BATCH ready: level-triggered, the loop calls again at once. */
}

/* ---- TCP retry after a truncated UDP answer ---- */

static void on_tcp_closed(uv_handle_t *h)
{
	struct up_tcp *t = h->data;
	struct op *op = t->op;
	nx_mem_free(NX_OWNER_upstream_tcp, t, sizeof(*t));
	op_handle_closed(op);
}

/* The attempt's current TCP connection, or NULL when t is no longer it. */
static struct attempt *tcp_owner(struct up_tcp *t)
{
	struct attempt *a = t->a;
	return a && a->tcp == t ? a : NULL;
}

static void tcp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct up_tcp *t = h->data;
	(void)hint;
	*buf = uv_buf_init((char *)t->rbuf + t->rlen, (unsigned)(sizeof(t->rbuf) - t->rlen));
}

static void tcp_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct up_tcp *t = st->data;
	struct attempt *a = tcp_owner(t);
	(void)buf;
	if (!a) {
		return;
	}
	struct op *op = a->op;
	if (n < 0) {
		nx_race_failed(&op->race, att_index(op, a), uv_now(op->u->loop));
		return;
	}
	t->rlen += (size_t)n;
	if (t->rlen < 2) {
		return;
	}
	size_t mlen = ((size_t)t->rbuf[0] << 8) | t->rbuf[1];
	if (t->rlen < 2 + mlen) {
		if (t->rlen == sizeof(t->rbuf)) {
			nx_race_failed(&op->race, att_index(op, a), uv_now(op->u->loop));
		}
		return;
	}
	uv_read_stop(st);
	/* Copy into the engine buffer: the callback chain closes this connection. */
	memcpy(op->u->rx, t->rbuf + 2, mlen);
	on_reply(op, a, op->u->rx, mlen, true);
}

static void tcp_written(uv_write_t *req, int status)
{
	struct up_tcp *t = req->data;
	struct attempt *a = tcp_owner(t);
	if (status < 0 && a) {
		nx_race_failed(&a->op->race, att_index(a->op, a), uv_now(a->op->u->loop));
	}
}

static void tcp_connected(uv_connect_t *req, int status)
{
	struct up_tcp *t = req->data;
	struct attempt *a = tcp_owner(t);
	if (!a) {
		return;
	}
	struct op *op = a->op;
	if (status < 0) {
		nx_race_failed(&op->race, att_index(op, a), uv_now(op->u->loop));
		return;
	}
	/* the UDP attempt's form (OPT, case), under its id */
	size_t qlen = att_query(op, a, t->wbuf + 2);
	t->wbuf[0] = (uint8_t)(qlen >> 8);
	t->wbuf[1] = (uint8_t)qlen;
	uv_buf_t b = uv_buf_init((char *)t->wbuf, (unsigned)(2 + qlen));
	t->wreq.data = t;
	if (uv_write(&t->wreq, (uv_stream_t *)&t->h, &b, 1, tcp_written) < 0 ||
	    uv_read_start((uv_stream_t *)&t->h, tcp_alloc, tcp_read) < 0) {
		nx_race_failed(&op->race, att_index(op, a), uv_now(op->u->loop));
		return;
	}
	tap(op, a, false, true, t->wbuf + 2, qlen);
}

/* ---- the race's transport (nx_race_io) ---- */

/* Send the queued queries: per socket one sendmmsg; failures reach the race afterwards. */
static void out_flush_once(struct nx_upstream *u)
{
	struct attempt *take[TX_BATCH];
	unsigned n = 0;
	while (u->out_head && n < TX_BATCH) {
		struct attempt *a = u->out_head;
		u->out_head = a->out_next;
		a->in_list = false;
		if (a->queued && a->sock) {
			take[n++] = a;
		}
	}
	if (!u->out_head) {
		u->out_tail = NULL;
	}
	struct attempt *failed[TX_BATCH];
	unsigned n_failed = 0;
	struct mmsghdr mm[TX_BATCH];
	struct iovec iov[TX_BATCH];
	uint8_t wire[TX_BATCH][NX_UP_QUERY_WIRE]; /* each attempt's own form (id, OPT, case) */
	bool sent[TX_BATCH] = {false};
	for (unsigned i = 0; i < n; i++) {
		if (sent[i]) {
			continue;
		}
		struct up_sock *s = take[i]->sock;
		struct attempt *who[TX_BATCH];
		unsigned k = 0;
		for (unsigned j = i; j < n; j++) {
			struct attempt *a = take[j];
			if (sent[j] || a->sock != s) {
				continue;
			}
			sent[j] = true;
			iov[k] = (struct iovec){wire[k], att_query(a->op, a, wire[k])};
			/* no address: the socket is connected to the server */
			mm[k].msg_hdr = (struct msghdr){
				.msg_iov = &iov[k],
				.msg_iovlen = 1,
			};
			who[k++] = a;
		}
		/* An error for one destination (unreachable, refused by a firewall) fails that
		 * query alone, re-send or not: the server said no. A full socket buffer fails
		 * what is left, except re-sends: a spare copy is dropped, the first may still be
		 * answered. Re-sends are counted once they are sent. */
		unsigned off = 0;
		bool sent_ok[TX_BATCH] = {false};
		while (off < k) {
			int r = sendmmsg(s->fd, mm + off, k - off, MSG_DONTWAIT);
			if (r > 0) {
				for (int m = 0; m < r; m++) {
					sent_ok[off + (unsigned)m] = true;
				}
				off += (unsigned)r;
			} else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
				   errno != ENOBUFS && errno != EINTR) {
				failed[n_failed++] = who[off++];
			} else {
				break;
			}
		}
		for (unsigned m = 0; m < k; m++) {
			who[m]->queued = false;
			if (sent_ok[m] && who[m]->resent) {
				nx_up_stats_resend(server_stats(who[m]));
			}
			if (sent_ok[m]) {
				tap(who[m]->op, who[m], false, false, wire[m], iov[m].iov_len);
			}
		}
		for (unsigned m = off; m < k; m++) {
			if (!who[m]->resent) {
				failed[n_failed++] = who[m];
			}
		}
	}
	uint64_t now = uv_now(u->loop);
	for (unsigned i = 0; i < n_failed; i++) {
		struct attempt *a = failed[i];
		nx_race_failed(&a->op->race, att_index(a->op, a), now);
	}
}

static void on_flush(uv_prepare_t *h)
{
	struct nx_upstream *u = h->data;
	while (u->out_head) {
		out_flush_once(u); /* failures may queue sends to the next servers */
	}
	/* After the sends, off their latency: open the sockets the next turn will want. */
	spares_refill(u);
	uv_prepare_stop(h);
	u->flush_on = false;
}

/* Queue attempt a's UDP query for this turn's flush. */
static void queue_send(struct nx_upstream *u, struct attempt *a)
{
	a->queued = true;
	if (!a->in_list) {
		a->in_list = true;
		a->out_next = NULL;
		if (u->out_tail) {
			u->out_tail->out_next = a;
		} else {
			u->out_head = a;
		}
		u->out_tail = a;
	}
	if (!u->flush_on) {
		u->flush_on = true;
		uv_prepare_start(&u->flush, on_flush);
	}
}

/*
 * Queue attempt att's query (a new attempt, or a retry of it in another form) on its server's
 * current socket: queries of one turn on one socket leave together in one sendmmsg.
 */
static int io_send(struct nx_race *r, int att, int srv)
{
	struct op *op = op_of(r);
	struct nx_upstream *u = op->u;
	struct attempt *a = &op->att[att];
	const struct nx_up_server *sv = &op->servers[srv];
	uint64_t now = uv_now(u->loop);
	if (sv->transport != NX_UP_T_PLAIN) {
		a->retrying = false;
		a->edns = nx_up_stats_edns_ok(sv->stats, now);
		a->caps = false; /* off-path spoofing is not a threat on a connection */
		int rc = nx_up_conn_send(u, op, a, sv);
		if (rc == 0 && u->tap) {
			uint8_t q[NX_UP_QUERY_WIRE]; /* as conn.c sent it: its id, our OPT or none */
			tap(op, a, false, false, q, att_query(op, a, q));
		}
		return rc;
	}
	if (!a->retrying) {
		a->edns_refused = false;
		a->case_refused = false;
	}
	a->retrying = false;
	sock_detach(a); /* a retry: the earlier exchange is over (its id's replies are late) */
	a->edns = !a->edns_refused && nx_up_stats_edns_ok(sv->stats, now);
	a->caps = !a->case_refused && nx_up_stats_caps_ok(sv->stats, now);
	if (a->caps) {
		caps_draw(a, &op->q);
	}
	struct up_pool *p = pool_get(u, sv);
	if (!p) {
		return -ENOMEM;
	}
	struct up_sock *s = sock_take(u, p);
	if (!s) {
		return -EMFILE;
	}
	sock_attach(s, a);
	a->sent_us = nx_now_mono_us();
	a->resent = false;
	queue_send(u, a);
	return 0;
}

/*
 * The same query again on the attempt's socket, with its id: either copy's answer counts, so a
 * slow server's answer to the first copy is not thrown away (Unbound sends a fresh query from a
 * new port instead and closes the old one, which makes a slow server's answer miss), and a
 * spoofer faces the same id and port for the same time, not a second pair to aim at. When the
 * server has answered a query sent after this one, this datagram (or its answer) was lost: it
 * goes now. When it has answered nothing since, it is silent: re-sends to it are paced, one
 * per its timeout, each doubling it (stats.c nx_up_stats_probe), so a slow or dead server is
 * not sent a copy of every waiting query.
 */
static uint64_t io_resend_udp(struct nx_race *r, int att, int srv, uint64_t now)
{
	struct op *op = op_of(r);
	struct attempt *a = &op->att[att];
	if (!a->sock) {
		return 0;
	}
	int stats = op->servers[srv].stats;
	if (!nx_up_stats_heard_after(stats, a->sent_us)) {
		uint64_t later = nx_up_stats_probe(stats, now);
		if (later > now) {
			return later;
		}
	}
	a->resent = true;
	queue_send(op->u, a);
	return 0;
}

static uint32_t io_rto(struct nx_race *r, int srv)
{
	const struct nx_up_server *sv = &op_of(r)->servers[srv];
	return sv->transport == NX_UP_T_PLAIN ? nx_up_stats_rto_ms(sv->stats) : 0;
}

static int io_send_tcp(struct nx_race *r, int att, int srv)
{
	struct op *op = op_of(r);
	struct attempt *a = &op->att[att];
	/* The UDP exchange is over: its id stays known to the socket (a late copy is "late"). */
	sock_detach(a);
	struct up_tcp *t = nx_mem_calloc(NX_OWNER_upstream_tcp, 1, sizeof(*t));
	if (!t) {
		return -ENOMEM;
	}
	t->a = a;
	t->op = op;
	uv_tcp_init(op->u->loop, &t->h);
	t->h.data = t;
	op->handles++;
	a->tcp = t;
	t->creq.data = t;
	const struct nx_up_server *sv = &op->servers[srv];
	if (uv_tcp_connect(&t->creq, &t->h, (const struct sockaddr *)&sv->ss, tcp_connected) < 0) {
		return -ECONNREFUSED; /* the race stops the attempt, which closes t */
	}
	return 0;
}

static void io_stop(struct nx_race *r, int att, int srv, enum nx_up_outcome o)
{
	struct op *op = op_of(r);
	struct attempt *a = &op->att[att];
	uint64_t lat = o == NX_UP_O_ANSWER ? nx_now_mono_us() - a->sent_us : 0;
	nx_up_stats_outcome(op->servers[srv].stats, o, lat);
	if (o == NX_UP_O_ANSWER && !a->tcp && !a->resent) {
		/* Karn: an answer to a re-sent query could be to either copy, so only answers to
		 * queries sent once are round-trip samples (and end a backed-off timeout). */
		nx_up_stats_rtt(op->servers[srv].stats, lat);
	}
	sock_detach(a);
	nx_up_conn_stop(a);
	a->retrying = false;
	if (a->tcp) {
		struct up_tcp *t = a->tcp;
		a->tcp = NULL;
		t->a = NULL;
		uv_close((uv_handle_t *)&t->h, on_tcp_closed);
	}
}

static void on_op_timer(uv_timer_t *t)
{
	struct op *op = t->data;
	nx_race_tick(&op->race, uv_now(op->u->loop));
}

static void io_arm(struct nx_race *r, uint64_t at)
{
	struct op *op = op_of(r);
	if (at == UINT64_MAX) {
		uv_timer_stop(&op->timer);
		return;
	}
	uint64_t now = uv_now(op->u->loop);
	uv_timer_start(&op->timer, on_op_timer, at > now ? at - now : 0, 0);
}

static void io_done(struct nx_race *r, enum nx_up_result res, int att, int srv)
{
	struct op *op = op_of(r);
	struct nx_upstream *u = op->u;
	(void)att;
	op->running = false;
	u->running--;
	if (res == NX_UP_ANSWER) {
		op->cb(op->ud, res, u->cur_msg, u->cur_len, u->cur_m, srv);
	} else {
		op->cb(op->ud, res, NULL, 0, NULL, -1);
	}
	maybe_recycle(op);
}

static const struct nx_race_io g_io = {
	.send = io_send,
	.resend = io_resend_udp,
	.rto = io_rto,
	.send_tcp = io_send_tcp,
	.stop = io_stop,
	.arm = io_arm,
	.done = io_done,
};

/* ---- engine ---- */

int nx_upstream_new(uv_loop_t *loop, unsigned max_ops, struct nx_upstream **out)
{
	struct nx_upstream *u = nx_mem_calloc(NX_OWNER_worker_buffers, 1, sizeof(*u));
	if (!u) {
		return -ENOMEM;
	}
	u->rxb = nx_mem_alloc(NX_OWNER_upstream_udp, (size_t)RX_BATCH * RX_SLOT);
	if (!u->rxb) {
		nx_mem_free(NX_OWNER_worker_buffers, u, sizeof(*u));
		return -ENOMEM;
	}
	u->epfd = epoll_create1(EPOLL_CLOEXEC);
	int rc = u->epfd < 0 ? -errno : uv_poll_init(loop, &u->ep_poll, u->epfd);
	if (rc != 0) {
		if (u->epfd >= 0) {
			close(u->epfd);
		}
		nx_mem_free(NX_OWNER_upstream_udp, u->rxb, (size_t)RX_BATCH * RX_SLOT);
		nx_mem_free(NX_OWNER_worker_buffers, u, sizeof(*u));
		return rc;
	}
	u->ep_poll.data = u;
	uv_poll_start(&u->ep_poll, UV_READABLE, on_ep_readable);
	/* Not a reason to keep the loop running: exchanges in flight have their timers. */
	uv_unref((uv_handle_t *)&u->ep_poll);
	u->loop = loop;
	u->max_ops = max_ops;
	uv_prepare_init(loop, &u->flush);
	u->flush.data = u;
	*out = u;
	return 0;
}

void nx_upstream_set_tap(struct nx_upstream *u, nx_up_tap_cb cb, void *ud)
{
	u->tap = cb;
	u->tap_ud = ud;
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
	/* An operation with a TCP retry rejoins the free list only once that connection has
	 * closed (next loop turn), so allow that many more than the running bound: running <=
	 * max_ops is checked by the caller; this caps the total at twice that. */
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
	uv_timer_init(u->loop, &op->timer);
	op->timer.data = op;
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		op->att[i].op = op;
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
	op->cb = cb;
	op->ud = ud;
	op->running = true;
	u->running++;
	/* May complete at once (every server failed to send): cb has then run. */
	nx_race_start(&op->race, &g_io, uv_now(u->loop), (unsigned)NX_MIN(req->n_servers, 255),
		      req->race, req->stagger_ms, req->timeout_ms);
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
		if (op->running) {
			nx_race_abort(&op->race);
		}
		op->handles++;
		uv_close((uv_handle_t *)&op->timer, on_timer_closed);
	}
	nx_up_conn_shutdown(u); /* every attempt has stopped: the pooled connections close */
	/* Every exchange has ended, so retired sockets are closing; close the waiting ones. */
	for (struct up_pool *p = u->pools; p; p = p->next) {
		pool_close_idle(p);
	}
	while (u->free_socks) {
		struct up_sock *s = u->free_socks;
		u->free_socks = s->next;
		u->n_socks--;
		nx_mem_free(NX_OWNER_upstream_udp, s, sizeof(*s));
	}
	/* Every attempt has stopped: nothing queued is sent. */
	while (u->out_head) {
		struct attempt *a = u->out_head;
		u->out_head = a->out_next;
		a->in_list = false;
	}
	u->out_tail = NULL;
	uv_close((uv_handle_t *)&u->flush, NULL); /* u outlives the loop run that closes it */
	uv_close((uv_handle_t *)&u->ep_poll, NULL); /* epfd is closed by nx_upstream_free */
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
	nx_mem_free(NX_OWNER_upstream_udp, u->rxb, (size_t)RX_BATCH * RX_SLOT);
	nx_up_conn_free(u);
	if (u->epfd >= 0) {
		close(u->epfd); /* after the loop closed its poll handle */
	}
	while (u->pools) {
		struct up_pool *p = u->pools;
		u->pools = p->next;
		nx_mem_free(NX_OWNER_upstream_udp, p, sizeof(*p));
	}
	nx_mem_free(NX_OWNER_worker_buffers, u, sizeof(*u));
}

/* ---- for conn.c ---- */

int nx_up_att_index(const struct op *op, const struct attempt *a)
{
	return att_index(op, a);
}

size_t nx_up_att_query(const struct op *op, const struct attempt *a, uint8_t *out)
{
	return att_query(op, a, out);
}

void nx_up_on_reply(struct op *op, struct attempt *a, const uint8_t *buf, size_t len,
		    bool via_stream)
{
	on_reply(op, a, buf, len, via_stream);
}

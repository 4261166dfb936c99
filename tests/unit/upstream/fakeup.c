/* In-process fake upstream server: see fakeup.h. */
#include "fakeup.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns/msg.h"

#define FAKE_SECOND_MS 10 /* the genuine reply follows a spoofed one by this much */
#define FAKE_SPLIT_MS 20  /* gap between the two halves of a split TCP answer */
#define FAKE_SPLIT_AT 1	  /* bytes of the TCP answer (prefix included) in the first write */

static const uint8_t fake_addr[4] = {192, 0, 2, 1};

/* Reply to query `qm` with id `id` for question `q`; an A record unless rcode != 0. */
static int build_reply(const struct nx_dns_msg *qm, uint16_t id, const struct nx_dns_question *q,
		       int rcode, bool tc, uint8_t *out, size_t cap)
{
	struct nx_dns_reply_ctx ctx = {
	    .id = id,
	    .qflags = qm->flags,
	    .q = q,
	    .edns = qm->edns.present,
	    .do_bit = qm->edns.do_bit,
	    .max_size = cap,
	};
	struct nx_dns_rr_spec rr = {
	    .type = NX_DNS_T_A, .ttl = 300, .rdata = fake_addr, .rdlen = sizeof(fake_addr)};
	bool with_a = rcode == NX_DNS_NOERROR && !tc;
	int n = nx_dns_build_answer(out, cap, &ctx, rcode, false, &rr, with_a ? 1 : 0, NULL, 0,
				    NX_DNS_EDE_NONE, NULL);
	if (n > 0 && tc) {
		out[2] |= (uint8_t)(NX_DNS_F_TC >> 8);
	}
	return n;
}

static void pend_fire(uv_timer_t *t)
{
	struct fake_pend *p = t->data;
	struct fake *f = p->f;
	uv_buf_t b = uv_buf_init((char *)p->buf, (unsigned)p->len);
	uv_udp_try_send(p->via_alt ? &f->alt : &f->udp, &b, 1, (const struct sockaddr *)&p->to);
	p->busy = false;
}

/* Send now (delay 0) or after delay_ms. */
static void send_udp(struct fake *f, const uint8_t *buf, size_t len, const struct sockaddr *to,
		     bool via_alt, unsigned delay_ms)
{
	if (delay_ms == 0) {
		uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
		uv_udp_try_send(via_alt ? &f->alt : &f->udp, &b, 1, to);
		return;
	}
	for (int i = 0; i < FAKE_PEND; i++) {
		struct fake_pend *p = &f->pend[i];
		if (p->busy) {
			continue;
		}
		p->busy = true;
		p->via_alt = via_alt;
		memcpy(p->buf, buf, len);
		p->len = len;
		memcpy(&p->to, to, sizeof(struct sockaddr_in));
		uv_timer_start(&p->t, pend_fire, delay_ms, 0);
		return;
	}
}

static void udp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct fake *f = h->data;
	*buf = uv_buf_init((char *)f->rx, sizeof(f->rx));
}

static void udp_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
		     unsigned flags)
{
	struct fake *f = h->data;
	if (n <= 0 || !from) {
		return;
	}
	const uint8_t *q = (const uint8_t *)buf->base;
	struct nx_dns_msg qm;
	if (nx_dns_msg_parse(q, (size_t)n, &qm) < 0 || !qm.has_question) {
		return;
	}
	uint16_t from_port = ntohs(((const struct sockaddr_in *)from)->sin_port);
	if (f->n_udp < FAKE_REC) {
		f->ids[f->n_udp] = qm.id;
		f->sports[f->n_udp] = from_port;
		f->edns[f->n_udp] = qm.edns.present;
		f->do_bit[f->n_udp] = qm.edns.do_bit;
		memcpy(f->qname[f->n_udp], qm.q.name,
		       qm.q.name_len < FAKE_QNAME ? qm.q.name_len : FAKE_QNAME);
	}
	if (f->port_hist) {
		f->port_hist[from_port]++;
	}
	f->n_udp++;
	uint8_t out[FAKE_BUF];
	int len;
	struct nx_dns_question other = qm.q;
	switch (f->mode) {
	case FAKE_NEVER:
		return;
	case FAKE_ANSWER_RESENT: {
		/* the same id from the same port seen before: a re-send (a "lost" first copy) */
		uint16_t sport = ntohs(((const struct sockaddr_in *)from)->sin_port);
		unsigned seen = f->n_udp - 1 < FAKE_REC ? f->n_udp - 1 : FAKE_REC;
		bool again = false;
		for (unsigned i = 0; i < seen && !again; i++) {
			again = f->ids[i] == qm.id && f->sports[i] == sport;
		}
		if (!again) {
			return;
		}
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	}
	case FAKE_DROP_FIRST:
		if (f->n_udp == 1) {
			return;
		}
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_ANSWER:
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_RCODE:
		len = build_reply(&qm, qm.id, &qm.q, f->rcode, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_WRONG_ID_FIRST:
	case FAKE_WRONG_ID_ONLY:
		len = build_reply(&qm, (uint16_t)(qm.id ^ 0x8001), &qm.q, NX_DNS_NOERROR, false,
				  out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, 0);
		if (f->mode == FAKE_WRONG_ID_FIRST) {
			len =
			    build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
			send_udp(f, out, (size_t)len, from, false, FAKE_SECOND_MS);
		}
		return;
	case FAKE_WRONG_SOURCE_FIRST:
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, true, 0);
		send_udp(f, out, (size_t)len, from, false, FAKE_SECOND_MS);
		return;
	case FAKE_WRONG_QUESTION_FIRST:
		other.name_len = (uint8_t)nx_dns_name_from_text("wrong.example.", other.name);
		len = build_reply(&qm, qm.id, &other, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, 0);
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, FAKE_SECOND_MS);
		return;
	case FAKE_UPPER_CASE:
		for (unsigned i = 0; i < other.name_len; i++) {
			other.name[i] = (uint8_t)toupper(other.name[i]);
		}
		len = build_reply(&qm, qm.id, &other, NX_DNS_NOERROR, false, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_TC:
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, true, out, sizeof(out));
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_FORMERR_EDNS:
	case FAKE_FORMERR_EDNS_BARE:
		if (!qm.edns.present) {
			len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out,
					  sizeof(out));
		} else if (f->mode == FAKE_FORMERR_EDNS) {
			len = build_reply(&qm, qm.id, &qm.q, NX_DNS_FORMERR, false, out,
					  sizeof(out));
		} else {
			/* a legacy server's FORMERR: header only, no question, no OPT */
			memset(out, 0, NX_DNS_HDR_LEN);
			out[0] = (uint8_t)(qm.id >> 8);
			out[1] = (uint8_t)qm.id;
			out[2] = 0x80 | 0x01; /* QR, RD */
			out[3] = NX_DNS_FORMERR;
			len = NX_DNS_HDR_LEN;
		}
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_MALFORMED:
		len = build_reply(&qm, qm.id, &qm.q, NX_DNS_NOERROR, false, out, sizeof(out));
		out[7] = 3; /* ANCOUNT 3, one record present */
		send_udp(f, out, (size_t)len, from, false, f->delay_ms);
		return;
	case FAKE_MALFORMED_QUESTION:
		memset(out, 0, 24);
		out[0] = (uint8_t)(qm.id >> 8);
		out[1] = (uint8_t)qm.id;
		out[2] = 0x81; /* QR, RD */
		out[5] = 1;    /* QDCOUNT 1 */
		out[12] = 63;  /* a 63-byte label of which 11 bytes follow */
		memset(out + 13, 'a', 11);
		send_udp(f, out, 24, from, false, f->delay_ms);
		return;
	}
}

/* ---- TCP ---- */

static void conn_closed(uv_handle_t *h)
{
	struct fake_conn *c = h->data;
	c->open = false;
}

static void conn_close(struct fake_conn *c)
{
	if (c->open && !uv_is_closing((uv_handle_t *)&c->h)) {
		uv_timer_stop(&c->t);
		uv_close((uv_handle_t *)&c->h, conn_closed);
	}
}

static void conn_written(uv_write_t *req, int status)
{
	(void)req;
	(void)status;
}

static void conn_write(struct fake_conn *c, int which, size_t off, size_t len)
{
	uv_buf_t b = uv_buf_init((char *)c->wbuf + off, (unsigned)len);
	if (uv_write(&c->wreq[which], (uv_stream_t *)&c->h, &b, 1, conn_written) < 0) {
		conn_close(c);
	}
}

static void conn_second_half(uv_timer_t *t)
{
	struct fake_conn *c = t->data;
	if (c->open && !uv_is_closing((uv_handle_t *)&c->h)) {
		conn_write(c, 1, c->wsplit, c->wlen - c->wsplit);
	}
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct fake_conn *c = h->data;
	*buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(sizeof(c->rbuf) - c->rlen));
}

static void conn_query(struct fake_conn *c, const uint8_t *q, size_t qlen)
{
	struct fake *f = c->f;
	struct nx_dns_msg qm;
	if (nx_dns_msg_parse(q, qlen, &qm) < 0 || !qm.has_question) {
		conn_close(c);
		return;
	}
	f->n_tcp++;
	f->tcp_id = qm.id;
	if (f->tcp_mode == FAKE_TCP_NEVER) {
		return;
	}
	uint16_t id = f->tcp_mode == FAKE_TCP_WRONG_ID ? (uint16_t)(qm.id ^ 0x8001) : qm.id;
	int n = build_reply(&qm, id, &qm.q, NX_DNS_NOERROR, false, c->wbuf + 2, FAKE_BUF);
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->wbuf[0] = (uint8_t)(n >> 8);
	c->wbuf[1] = (uint8_t)n;
	c->wlen = 2 + (size_t)n;
	if (f->tcp_mode == FAKE_TCP_SPLIT) {
		c->wsplit = FAKE_SPLIT_AT;
		conn_write(c, 0, 0, c->wsplit);
		uv_timer_start(&c->t, conn_second_half, FAKE_SPLIT_MS, 0);
		return;
	}
	conn_write(c, 0, 0, c->wlen);
}

static void conn_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct fake_conn *c = st->data;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->rlen += (size_t)n;
	if (c->rlen < 2) {
		return;
	}
	size_t mlen = ((size_t)c->rbuf[0] << 8) | c->rbuf[1];
	if (c->rlen < 2 + mlen) {
		if (c->rlen == sizeof(c->rbuf)) {
			conn_close(c);
		}
		return;
	}
	uv_read_stop(st);
	conn_query(c, c->rbuf + 2, mlen);
}

static void on_connection(uv_stream_t *srv, int status)
{
	struct fake *f = srv->data;
	if (status < 0) {
		return;
	}
	struct fake_conn *c = NULL;
	for (int i = 0; i < FAKE_CONNS; i++) {
		if (!f->conn[i].open) {
			c = &f->conn[i];
			break;
		}
	}
	if (!c) {
		return;
	}
	uv_tcp_init(f->loop, &c->h);
	c->h.data = c;
	c->open = true;
	c->rlen = 0;
	if (uv_accept(srv, (uv_stream_t *)&c->h) < 0 ||
	    uv_read_start((uv_stream_t *)&c->h, conn_alloc, conn_read) < 0) {
		conn_close(c);
	}
}

/* ---- setup ---- */

static int bound_socket(int type, uint16_t port)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -errno;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

static uint16_t local_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	getsockname(fd, (struct sockaddr *)&sa, &len);
	return ntohs(sa.sin_port);
}

int fake_start(struct fake *f, uv_loop_t *loop, bool with_tcp)
{
	f->loop = loop;
	int ufd = -1, tfd = -1;
	for (int tries = 0; tries < 20; tries++) {
		ufd = bound_socket(SOCK_DGRAM, 0);
		if (ufd < 0) {
			return ufd;
		}
		if (!with_tcp) {
			break;
		}
		tfd = bound_socket(SOCK_STREAM, local_port(ufd));
		if (tfd >= 0) {
			break;
		}
		close(ufd);
		ufd = -1;
	}
	if (ufd < 0 || (with_tcp && tfd < 0)) {
		return -EADDRINUSE;
	}
	f->port = local_port(ufd);
	int afd = bound_socket(SOCK_DGRAM, 0);
	if (afd < 0) {
		return afd;
	}
	uv_udp_init(loop, &f->udp);
	uv_udp_init(loop, &f->alt);
	f->udp.data = f;
	f->alt.data = f;
	int rc = uv_udp_open(&f->udp, ufd);
	rc = rc ? rc : uv_udp_open(&f->alt, afd);
	rc = rc ? rc : uv_udp_recv_start(&f->udp, udp_alloc, udp_recv);
	for (int i = 0; i < FAKE_PEND; i++) {
		f->pend[i].f = f;
		uv_timer_init(loop, &f->pend[i].t);
		f->pend[i].t.data = &f->pend[i];
	}
	for (int i = 0; i < FAKE_CONNS; i++) {
		f->conn[i].f = f;
		uv_timer_init(loop, &f->conn[i].t);
		f->conn[i].t.data = &f->conn[i];
	}
	if (with_tcp) {
		uv_tcp_init(loop, &f->tcp);
		f->tcp.data = f;
		f->has_tcp = true;
		rc = rc ? rc : uv_tcp_open(&f->tcp, tfd);
		rc = rc ? rc : uv_listen((uv_stream_t *)&f->tcp, 8, on_connection);
	}
	return rc;
}

void fake_close(struct fake *f)
{
	uv_close((uv_handle_t *)&f->udp, NULL);
	uv_close((uv_handle_t *)&f->alt, NULL);
	if (f->has_tcp) {
		uv_close((uv_handle_t *)&f->tcp, NULL);
	}
	for (int i = 0; i < FAKE_PEND; i++) {
		uv_close((uv_handle_t *)&f->pend[i].t, NULL);
	}
	for (int i = 0; i < FAKE_CONNS; i++) {
		conn_close(&f->conn[i]);
		uv_close((uv_handle_t *)&f->conn[i].t, NULL);
	}
}

static void server_at(uint16_t port, struct nx_up_server *out, int stats)
{
	memset(out, 0, sizeof(*out));
	struct sockaddr_in *sa = (struct sockaddr_in *)&out->ss;
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	out->len = sizeof(*sa);
	out->stats = stats;
}

void fake_server(const struct fake *f, struct nx_up_server *out, int stats)
{
	server_at(f->port, out, stats);
}

void fake_dead_server(struct nx_up_server *out, int stats)
{
	int fd = bound_socket(SOCK_DGRAM, 0);
	uint16_t port = fd >= 0 ? local_port(fd) : 9; /* discard: nothing listens on loopback */
	if (fd >= 0) {
		close(fd);
	}
	server_at(port, out, stats);
}

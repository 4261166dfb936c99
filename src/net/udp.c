#include "net/udp.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "net/sockopt.h"

#define CTL_LEN 64 /* room for one in6_pktinfo cmsg */

struct nx_udp_batch {
	struct mmsghdr rx_msgs[NX_UDP_BATCH];
	struct iovec rx_iov[NX_UDP_BATCH];
	struct sockaddr_storage peers[NX_UDP_BATCH];
	uint8_t rx_ctl[NX_UDP_BATCH][CTL_LEN];
	uint8_t rx[NX_UDP_BATCH][NX_UDP_RX_SLOT];
	struct mmsghdr tx_msgs[NX_UDP_BATCH];
	struct iovec tx_iov[NX_UDP_BATCH];
	uint8_t tx_ctl[NX_UDP_BATCH][CTL_LEN];
	uint8_t tx[NX_UDP_BATCH][NX_UDP_TX_SLOT];
	/* Replies queued by udp_reply_later (later answers) use tx*[0..n_later) between read callbacks. */
	bool busy;                 /* a read callback is filling tx* */
	unsigned n_later;
	struct nx_udp_sock *later_sock[NX_UDP_BATCH];
	struct sockaddr_storage later_peer[NX_UDP_BATCH];
};

struct nx_udp_sock {
	uv_poll_t poll;           /* first: the close callback casts back */
	int fd;                   /* owned */
	int listener;
	bool pktinfo;             /* wildcard bind: echo the destination address */
	union {                   /* the bound address and port (getsockname at open) */
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} local;
	struct nx_udp_batch *b;   /* borrowed: the worker's, outlives its sockets */
	nx_query_cb cb;
	void *ud;
};

static int udp_reply(struct nx_udp_sock *s, const struct sockaddr *peer, socklen_t peer_len,
		     const struct nx_udp_origin *origin, const uint8_t *buf, size_t len);
static int udp_reply_later(struct nx_udp_sock *s, const struct sockaddr *peer, socklen_t peer_len,
			   const struct nx_udp_origin *origin, const uint8_t *buf, size_t len);

/* ---- the reply handle ---- */

/* On the owner thread: queued for the turn's sendmmsg; elsewhere: sendmsg now (thread-safe). */
static int op_send(struct nx_reply *r, const uint8_t *msg, size_t len, bool owner_thread)
{
	const struct sockaddr *peer = (const struct sockaddr *)&r->peer;
	int rc = owner_thread ? udp_reply_later(r->t.udp.sock, peer, r->peer_len, &r->t.udp.origin,
						msg, len)
			      : udp_reply(r->t.udp.sock, peer, r->peer_len, &r->t.udp.origin, msg,
					  len);
	if (rc < 0) {
		nx_stat_inc(NX_STAT_D_SEND);
	}
	return rc;
}

/* A datagram's handle is a value: nothing to keep alive (sockets outlive replies). */
static void op_noop(struct nx_reply *r)
{
	(void)r;
}

/* The bound address, or on a wildcard bind the datagram's destination, with the port. */
static bool op_local(const struct nx_reply *r, struct sockaddr_storage *out)
{
	const struct nx_udp_sock *s = r->t.udp.sock;
	const struct nx_udp_origin *o = &r->t.udp.origin;
	memset(out, 0, sizeof(*out));
	if (s->local.sa.sa_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)out;
		*a = s->local.in;
		if (o->family == AF_INET) {
			a->sin_addr = o->pi.v4.ipi_addr;
		}
		return true;
	}
	if (s->local.sa.sa_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
		*a = s->local.in6;
		if (o->family == AF_INET6) {
			a->sin6_addr = o->pi.v6.ipi6_addr;
		}
		return true;
	}
	return false;
}

static const struct nx_reply_ops udp_ops = {
	.send = op_send,
	.hold = op_noop,
	.release = op_noop,
	.local = op_local,
};

struct nx_udp_batch *nx_udp_batch_new(void)
{
	return nx_mem_calloc(NX_OWNER_worker_buffers, 1, sizeof(struct nx_udp_batch));
}

void nx_udp_batch_free(struct nx_udp_batch *b)
{
	nx_mem_free(NX_OWNER_worker_buffers, b, sizeof(*b));
}

static void origin_from_cmsg(struct msghdr *mh, struct nx_udp_origin *o)
{
	o->family = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			memcpy(&o->pi.v4, CMSG_DATA(c), sizeof(o->pi.v4));
			o->family = AF_INET;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			memcpy(&o->pi.v6, CMSG_DATA(c), sizeof(o->pi.v6));
			o->family = AF_INET6;
		}
	}
}

/* Fill msg_control for a reply from `o`; returns the control length (0 when none). */
static size_t origin_to_cmsg(const struct nx_udp_origin *o, uint8_t *ctl, size_t cap)
{
	if (!o || o->family == 0) {
		return 0;
	}
	struct msghdr mh = {.msg_control = ctl, .msg_controllen = cap};
	memset(ctl, 0, cap);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (o->family == AF_INET) {
		struct in_pktinfo pi = {.ipi_ifindex = 0, .ipi_spec_dst = o->pi.v4.ipi_addr};
		c->cmsg_level = IPPROTO_IP;
		c->cmsg_type = IP_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
		return CMSG_SPACE(sizeof(pi));
	}
	c->cmsg_level = IPPROTO_IPV6;
	c->cmsg_type = IPV6_PKTINFO;
	c->cmsg_len = CMSG_LEN(sizeof(o->pi.v6));
	memcpy(CMSG_DATA(c), &o->pi.v6, sizeof(o->pi.v6));
	return CMSG_SPACE(sizeof(o->pi.v6));
}

/* sendmmsg all of msgs[0..out) on fd; a full buffer or a bad peer drops (counted). */
static void send_all(int fd, struct mmsghdr *msgs, int out)
{
	int sent = 0;
	while (sent < out) {
		int r = sendmmsg(fd, msgs + sent, (unsigned)(out - sent), MSG_DONTWAIT);
		if (r <= 0) {
			/* Socket buffer full or a bad destination: drop the rest, counted. Skip one on
			 * hard errors so a single bad peer cannot sink the batch. */
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				nx_stat_inc(NX_STAT_D_SEND);
				sent++;
				continue;
			}
			nx_stat_add(NX_STAT_D_SEND, (uint64_t)(out - sent));
			break;
		}
		sent += r;
	}
}

void nx_udp_flush_later(struct nx_udp_batch *b)
{
	unsigned n = b->n_later;
	b->n_later = 0;
	bool done[NX_UDP_BATCH] = {false};
	struct mmsghdr group[NX_UDP_BATCH];
	for (unsigned i = 0; i < n; i++) {
		if (done[i]) {
			continue;
		}
		struct nx_udp_sock *s = b->later_sock[i];
		int k = 0;
		for (unsigned j = i; j < n; j++) {
			if (!done[j] && b->later_sock[j] == s) {
				done[j] = true;
				group[k++] = b->tx_msgs[j];
			}
		}
		send_all(s->fd, group, k);
	}
}

/* Queue a reply for the turn's sendmmsg (owner thread only). A reply larger than a slot, or one
 * queued while a read callback fills the batch, is sent at once instead. */
static int udp_reply_later(struct nx_udp_sock *s, const struct sockaddr *peer, socklen_t peer_len,
			   const struct nx_udp_origin *origin, const uint8_t *buf, size_t len)
{
	struct nx_udp_batch *b = s->b;
	if (b->busy || len > NX_UDP_TX_SLOT || peer_len > sizeof(b->later_peer[0])) {
		return udp_reply(s, peer, peer_len, origin, buf, len);
	}
	if (b->n_later == NX_UDP_BATCH) {
		nx_udp_flush_later(b);
	}
	unsigned i = b->n_later++;
	memcpy(b->tx[i], buf, len);
	memcpy(&b->later_peer[i], peer, peer_len);
	b->later_sock[i] = s;
	b->tx_iov[i] = (struct iovec){b->tx[i], len};
	size_t clen = origin_to_cmsg(origin, b->tx_ctl[i], CTL_LEN);
	b->tx_msgs[i].msg_hdr = (struct msghdr){
		.msg_name = &b->later_peer[i],
		.msg_namelen = peer_len,
		.msg_iov = &b->tx_iov[i],
		.msg_iovlen = 1,
		.msg_control = clen ? b->tx_ctl[i] : NULL,
		.msg_controllen = clen,
	};
	return 0;
}

static void read_batches(struct nx_udp_sock *s);

static void on_readable(uv_poll_t *h, int status, int events)
{
	struct nx_udp_sock *s = (struct nx_udp_sock *)h;
	struct nx_udp_batch *b = s->b;
	if (status < 0) {
		return;
	}
	if (b->n_later) {
		nx_udp_flush_later(b); /* the batch arrays are about to be reused */
	}
	b->busy = true;
	read_batches(s);
	b->busy = false;
}

static void read_batches(struct nx_udp_sock *s)
{
	struct nx_udp_batch *b = s->b;
	/* Bounded work per callback so one busy socket cannot starve the loop's other handles. */
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < NX_UDP_BATCH; i++) {
			b->rx_iov[i] = (struct iovec){b->rx[i], NX_UDP_RX_SLOT};
			b->rx_msgs[i].msg_hdr = (struct msghdr){
				.msg_name = &b->peers[i],
				.msg_namelen = sizeof(b->peers[i]),
				.msg_iov = &b->rx_iov[i],
				.msg_iovlen = 1,
				.msg_control = s->pktinfo ? b->rx_ctl[i] : NULL,
				.msg_controllen = s->pktinfo ? CTL_LEN : 0,
			};
		}
		int n = recvmmsg(s->fd, b->rx_msgs, NX_UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			return;
		}
		int out = 0;
		for (int i = 0; i < n; i++) {
			struct msghdr *mh = &b->rx_msgs[i].msg_hdr;
			struct nx_reply r;
			r.ops = &udp_ops;
			r.peer_len = NX_MIN(mh->msg_namelen, (socklen_t)sizeof(r.peer));
			memcpy(&r.peer, &b->peers[i], r.peer_len);
			r.proto = NX_PROTO_UDP;
			r.datagram = true;
			r.any_thread = true;
			r.listener = (uint8_t)s->listener;
			r.client_id = "";
			r.t.udp.sock = s;
			r.t.udp.origin.family = 0;
			if (s->pktinfo) {
				origin_from_cmsg(mh, &r.t.udp.origin);
			}
			int rlen = s->cb(s->ud, &r, b->rx[i], b->rx_msgs[i].msg_len,
					 (mh->msg_flags & MSG_TRUNC) != 0, b->tx[out], NX_UDP_TX_SLOT);
			if (rlen <= 0) {
				if (rlen == NX_REPLY_BUSY_WAITERS) {
					nx_stat_inc(NX_STAT_D_WAITERS);
				} else if (rlen == NX_REPLY_BUSY_PERMIT) {
					nx_stat_inc(NX_STAT_D_NO_SLOT);
				}
				continue;
			}
			b->tx_iov[out] = (struct iovec){b->tx[out], (size_t)rlen};
			size_t clen = origin_to_cmsg(&r.t.udp.origin, b->tx_ctl[out], CTL_LEN);
			b->tx_msgs[out].msg_hdr = (struct msghdr){
				.msg_name = &b->peers[i],
				.msg_namelen = mh->msg_namelen,
				.msg_iov = &b->tx_iov[out],
				.msg_iovlen = 1,
				.msg_control = clen ? b->tx_ctl[out] : NULL,
				.msg_controllen = clen,
			};
			out++;
		}
		send_all(s->fd, b->tx_msgs, out);
		if (n < NX_UDP_BATCH) {
			return;
		}
	}
}

static void on_closed(uv_handle_t *h)
{
	struct nx_udp_sock *s = (struct nx_udp_sock *)h;
	close(s->fd);
	nx_mem_free(NX_OWNER_worker_buffers, s, sizeof(*s));
}

void nx_udp_close(struct nx_udp_sock *s)
{
	if (!s) {
		return;
	}
	uv_poll_stop(&s->poll);
	uv_close((uv_handle_t *)&s->poll, on_closed);
}

int nx_udp_open(uv_loop_t *loop, const struct nx_addr *addr, int listener, struct nx_udp_batch *b,
		nx_query_cb cb, void *ud, struct nx_udp_sock **out)
{
	bool pktinfo = false;
	int fd = nx_sock_udp_listen(addr, true, &pktinfo);
	if (fd < 0) {
		return fd;
	}
	struct nx_udp_sock *s = nx_mem_calloc(NX_OWNER_worker_buffers, 1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->fd = fd;
	s->listener = listener;
	s->pktinfo = pktinfo;
	socklen_t llen = sizeof(s->local);
	if (getsockname(fd, &s->local.sa, &llen) < 0) {
		s->local.sa.sa_family = AF_UNSPEC; /* dnstap then has no response address */
	}
	s->b = b;
	s->cb = cb;
	s->ud = ud;
	int rc = uv_poll_init(loop, &s->poll, fd);
	if (rc < 0) {
		close(fd);
		nx_mem_free(NX_OWNER_worker_buffers, s, sizeof(*s));
		return rc;
	}
	rc = uv_poll_start(&s->poll, UV_READABLE, on_readable);
	if (rc < 0) {
		nx_udp_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* Send one reply now (non-blocking, any thread). 0 or -errno. */
static int udp_reply(struct nx_udp_sock *s, const struct sockaddr *peer, socklen_t peer_len,
		     const struct nx_udp_origin *origin, const uint8_t *buf, size_t len)
{
	uint8_t ctl[CTL_LEN];
	struct iovec iov = {(void *)buf, len};
	size_t clen = origin_to_cmsg(origin, ctl, sizeof(ctl));
	struct msghdr mh = {
		.msg_name = (void *)peer,
		.msg_namelen = peer_len,
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = clen ? ctl : NULL,
		.msg_controllen = clen,
	};
	return sendmsg(s->fd, &mh, MSG_DONTWAIT) < 0 ? -errno : 0;
}

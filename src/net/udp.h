/*
 * UDP DNS listener: one non-blocking SO_REUSEPORT socket per (worker, address), read in batches
 * with recvmmsg and answered in batches with sendmmsg. Immediate answers (blocked, cached,
 * errors) leave in the same sendmmsg as the batch they came in; later answers (upstream) are
 * queued with nx_udp_reply_later() and leave together at the end of the loop turn, or through
 * nx_udp_reply() from another worker's thread.
 *
 * Threading: a socket belongs to one worker loop; every call happens on that loop's thread.
 * Memory: the batch buffers belong to the worker (struct nx_udp_batch, charged to
 * NX_OWNER_worker_buffers) and are shared by all of that worker's UDP sockets, since a batch is
 * handled to completion inside one poll callback.
 */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "conf/conf.h"

#define NX_UDP_BATCH 32     /* datagrams per recvmmsg/sendmmsg: amortises syscalls */
#define NX_UDP_RX_SLOT 2048 /* bytes per received query; larger queries get FORMERR (MSG_TRUNC) */
#define NX_UDP_TX_SLOT 1232 /* bytes per immediate reply: our EDNS size caps every UDP reply */

/* Where a query arrived (for wildcard binds): the reply must leave from that address. */
struct nx_udp_origin {
	sa_family_t family; /* 0 when the socket is bound to a specific address */
	union {
		struct in_pktinfo v4;
		struct in6_pktinfo v6;
	} pi;
};

struct nx_udp_sock;

struct nx_udp_pkt {
	const uint8_t *data;            /* borrowed: valid during the callback only */
	size_t len;
	bool truncated;                 /* datagram was larger than NX_UDP_RX_SLOT */
	const struct sockaddr *peer;    /* borrowed */
	socklen_t peer_len;
	const struct nx_udp_origin *origin; /* borrowed */
	struct nx_udp_sock *sock;       /* the socket it came in on (for later replies) */
	int listener;                   /* index into listener.dns */
};

/* Handle one query; write an immediate reply into out (cap bytes) and return its length, or 0. */
typedef size_t (*nx_udp_query_cb)(void *ud, const struct nx_udp_pkt *p, uint8_t *out, size_t cap);

struct nx_udp_batch; /* opaque, one per worker */

struct nx_udp_batch *nx_udp_batch_new(void);
void nx_udp_batch_free(struct nx_udp_batch *b);

/*
 * Open and start a listener socket on `loop` (reuseport). The socket calls cb(ud, ...) per query.
 * Returns 0 and *out, or -errno (nothing started).
 */
int nx_udp_open(uv_loop_t *loop, const struct nx_addr *addr, int listener, struct nx_udp_batch *b,
		nx_udp_query_cb cb, void *ud, struct nx_udp_sock **out);
/* Stop and close; memory is released in the close callback. NULL is a no-op. */
void nx_udp_close(struct nx_udp_sock *s);

/*
 * Queue a reply to go out with the others of this loop turn in one sendmmsg per socket
 * (nx_udp_flush_later, from the worker's uv_prepare or before the batch arrays are reused).
 * Only on the thread that owns s. A reply larger than NX_UDP_TX_SLOT, or one queued while a
 * read callback is running, is sent at once instead. Returns 0 or -errno (sent at once and
 * failed; the caller counts the drop); a drop at the flush is counted there.
 */
int nx_udp_reply_later(struct nx_udp_sock *s, const struct sockaddr *peer, socklen_t peer_len,
		       const struct nx_udp_origin *origin, const uint8_t *buf, size_t len);
/* Send every queued reply of the worker's batch. */
void nx_udp_flush_later(struct nx_udp_batch *b);

/* Send one reply now (non-blocking). Returns 0 or -errno (the caller counts the drop). */
int nx_udp_reply(struct nx_udp_sock *s, const struct sockaddr *peer, socklen_t peer_len,
		 const struct nx_udp_origin *origin, const uint8_t *buf, size_t len);

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
#include "net/reply.h"

#define NX_UDP_BATCH 32     /* datagrams per recvmmsg/sendmmsg: amortises syscalls */
#define NX_UDP_RX_SLOT 2048 /* bytes per received query; larger queries get FORMERR (MSG_TRUNC) */
#define NX_UDP_TX_SLOT 1232 /* bytes per immediate reply: our EDNS size caps every UDP reply */

struct nx_udp_sock;
struct nx_udp_batch; /* opaque, one per worker */

struct nx_udp_batch *nx_udp_batch_new(void);
void nx_udp_batch_free(struct nx_udp_batch *b);

/*
 * Open and start a listener socket on `loop` (reuseport). Each datagram goes to cb(ud, ...)
 * with a reply handle (net/reply.h: proto UDP, datagram, any_thread); an immediate answer the
 * callback returns leaves in the batch's sendmmsg; NX_REPLY_BUSY_* is dropped and counted
 * (dropped_no_slot, coalesce_waiters_full). Returns 0 and *out, or -errno (nothing started).
 */
int nx_udp_open(uv_loop_t *loop, const struct nx_addr *addr, int listener, struct nx_udp_batch *b,
		nx_query_cb cb, void *ud, struct nx_udp_sock **out);
/* Stop and close; memory is released in the close callback. NULL is a no-op. */
void nx_udp_close(struct nx_udp_sock *s);

/*
 * Send every reply queued on the worker's batch by later answers (a UDP handle's send on its
 * owner thread queues, so that a loop turn's answers leave in one sendmmsg per socket): from
 * the worker's uv_prepare, and before the batch arrays are reused.
 */
void nx_udp_flush_later(struct nx_udp_batch *b);

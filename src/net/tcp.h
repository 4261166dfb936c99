/*
 * TCP DNS listener (RFC 7766): 2-byte length framing, pipelined queries answered in any order,
 * an idle timeout, a read timeout for a message that arrives too slowly (slowloris), a cap on
 * open connections per listener address shared by all workers (beyond it a connection is
 * accepted and closed at once, counted), and a bound on queued response bytes per connection.
 *
 * Threading: a server and its connections belong to one worker loop.
 * Ownership: a connection stays allocated while it is open, while the pipeline holds it
 * (nx_tcp_hold/nx_tcp_release around each query handled asynchronously), and while writes are
 * queued. After close, nx_tcp_send on a held connection is a counted no-op.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "conf/conf.h"

#define NX_TCP_BACKLOG 128
#define NX_TCP_MAX_PIPELINE 32          /* queries in flight per connection before we stop reading */
#define NX_TCP_MAX_QUEUED (256 * 1024)  /* response bytes queued per connection before we close it */
#define NX_TCP_RBUF_INITIAL 512         /* grows to the announced message size, at most 65537 */

struct nx_tcp_server;
struct nx_tcp_conn;

typedef void (*nx_tcp_msg_cb)(void *ud, struct nx_tcp_conn *c, const uint8_t *msg, size_t len);

struct nx_tcp_limits {
	unsigned max_conns;   /* per listener address, all workers together */
	unsigned idle_ms;     /* close a connection with nothing pending for this long */
	unsigned read_ms;     /* a started message must complete within this */
};

/*
 * Listen on `addr` (SO_REUSEPORT) on `loop`. `open_count` is the listener's shared connection
 * counter (owned by the caller, outlives the server). Returns 0 or -errno.
 */
int nx_tcp_open(uv_loop_t *loop, const struct nx_addr *addr, int listener,
		atomic_int *open_count, const struct nx_tcp_limits *lim, nx_tcp_msg_cb cb, void *ud,
		struct nx_tcp_server **out);
void nx_tcp_set_limits(struct nx_tcp_server *s, const struct nx_tcp_limits *lim);
/* Stop listening and close every connection. NULL is a no-op. */
void nx_tcp_close(struct nx_tcp_server *s);

/* Frame and send one message. 0, or a negative code when the connection is gone/over its bound. */
int nx_tcp_send(struct nx_tcp_conn *c, const uint8_t *msg, size_t len);
void nx_tcp_hold(struct nx_tcp_conn *c);
void nx_tcp_release(struct nx_tcp_conn *c);
/* Close now (e.g. no query permit). Safe on a closing connection. */
void nx_tcp_abort(struct nx_tcp_conn *c);
bool nx_tcp_is_open(const struct nx_tcp_conn *c);
const struct sockaddr *nx_tcp_peer(const struct nx_tcp_conn *c);
int nx_tcp_listener(const struct nx_tcp_conn *c);

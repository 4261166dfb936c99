/*
 * Stream connections: the one layer under TCP, DNS-over-TLS and DNS-over-HTTPS listeners.
 *
 * A connection is a socket with a stack of layers (as Knot Resolver's protolayers):
 *
 *   TCP  = socket + DNS framing (RFC 7766 two-byte length)
 *   DoT  = socket + TLS (net/tls.h) + DNS framing            (RFC 7858)
 *   DoH  = socket + TLS + HTTP/2 (net/h2.h) + DNS messages   (RFC 8484)
 *
 * Everything that is about the connection rather than the protocol lives here once: accept and
 * the per-listener cap (shared by all workers), eviction of the oldest idle connection when the
 * cap is reached, the idle timeout that shrinks as the listener fills (as Unbound and dnsdist
 * do), the read (slowloris) and TLS handshake timeouts, the bound on queries in the pipeline per
 * connection, backpressure when no query permit is free (the connection stops reading and asks
 * again; only after listener.permit_wait_ms does it give up: a DNS stream closes once the
 * answers already in flight are sent, an HTTP/2 stream is reset), and the write queue with its
 * byte bound. Every refusal is counted with a reason.
 *
 * Queries go to the pipeline through nx_query_cb with a reply handle (net/reply.h) whose ops
 * frame the answer for the connection's protocol.
 *
 * Memory: every connection reads into its worker's shared receive buffer; only a partial
 * message (or a query waiting for a permit) is copied into a buffer of the connection, freed as
 * soon as it is consumed, so an idle connection holds only its struct (and its TLS / HTTP/2
 * session). Charged to NX_OWNER_tcp_conns (connections, partial messages) and
 * NX_OWNER_tcp_writes (answers the socket did not take at once).
 *
 * Threading: a server and its connections belong to one worker loop; every call is made on it.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "conf/conf.h"
#include "net/reply.h"

#define NX_STREAM_BACKLOG 128
/* Queries of one connection in the pipeline at once before reading pauses (Knot: 100; a stub
 * pipelines a handful): the connection's share of the process-wide permits. */
#define NX_STREAM_MAX_PIPELINE 32
#define NX_STREAM_MAX_QUEUED (256 * 1024) /* answer bytes queued per connection before closing */
#define NX_STREAM_RX_SCRATCH 65536        /* the worker's shared receive buffer */
/* Retry schedule of a connection waiting for a query permit: first retry, then doubling to the
 * cap; a permit frees when any upstream operation ends (typically within milliseconds). */
#define NX_STREAM_PERMIT_RETRY_MS 2
#define NX_STREAM_PERMIT_RETRY_MAX_MS 32
/* The idle timeout shrinks as a listener fills: full timeout below half the cap, a quarter of
 * it from half, the floor from three quarters; at the cap the oldest idle connection goes. */
#define NX_STREAM_IDLE_FLOOR_MS 200

struct nx_stream_server;
struct nx_tls_creds;

struct nx_stream_limits {
	unsigned max_conns;      /* per listener address, all workers together */
	unsigned idle_ms;        /* close a connection with nothing pending for this long */
	unsigned read_ms;        /* a started message must complete within this */
	unsigned handshake_ms;   /* TLS handshake must complete within this */
	unsigned permit_wait_ms; /* how long a query may wait for a permit */
	unsigned max_streams;    /* HTTP/2 concurrent streams per connection */
	char server_name[256];   /* tls.server_name: DoT SNI "<client-id>.<name>", or "" */
};

/* What every listener of a worker shares: the worker's receive scratch and the pipeline. */
struct nx_stream_env {
	uint8_t *rx;             /* NX_STREAM_RX_SCRATCH bytes, borrowed (worker buffers) */
	nx_query_cb cb;          /* the pipeline */
	void *ud;
	uint8_t *out;            /* immediate-answer buffer of NX_DNS_MSG_MAX bytes, borrowed */
};

/*
 * Listen on `addr` (SO_REUSEPORT) on `loop` for `proto` (TCP, DOT or DOH; DOT and DOH need
 * `creds`, which the server references). `open_count` is the listener's shared connection
 * counter (owned by the caller, outlives the server). Returns 0 or -errno / NX_E*.
 */
int nx_stream_listen(uv_loop_t *loop, enum nx_proto proto, const struct nx_addr *addr,
		     int listener, atomic_int *open_count, const struct nx_stream_limits *lim,
		     struct nx_tls_creds *creds, const struct nx_stream_env *env,
		     struct nx_stream_server **out);
void nx_stream_set_limits(struct nx_stream_server *s, const struct nx_stream_limits *lim);
/* New credentials for connections accepted from now on (certificate swap); referenced. */
void nx_stream_set_creds(struct nx_stream_server *s, struct nx_tls_creds *creds);
/* Stop listening and close every connection. NULL is a no-op. */
void nx_stream_close(struct nx_stream_server *s);
/* Open connections of this server (this worker). */
unsigned nx_stream_count(const struct nx_stream_server *s);

/* ---- the upstream side: one connection nxdns opens to a TCP, DoT or DoH server ---- */

/* Queries in flight on one upstream DNS stream (TCP, DoT) before it refuses more (the engine
 * opens another connection or moves on); a DoH connection takes what the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS allows. */
#define NX_STREAM_CLIENT_PIPELINE 64
/* Query bytes a connection keeps for sending while it connects and shakes hands. */
#define NX_STREAM_CLIENT_QUEUE (16 * 1024)

struct nx_stream_client;

struct nx_stream_client_io {
	/* An answer: TCP/DoT, the message whose DNS id is `tag` (an id this connection sent and
	 * nobody cancelled); DoH, the response to request `tag`, or rc < 0 when that request
	 * failed (stream reset, HTTP status other than 200: `status`). msg valid during the call. */
	void (*answer)(void *ud, uint64_t tag, int rc, int status, const uint8_t *msg, size_t len);
	/* Connected and, for DoT/DoH, the handshake is done (queries queued before went out). */
	void (*ready)(void *ud);
	/* The connection is gone: rc 0 after an idle close, else why (-ETIMEDOUT, -ECONNREFUSED,
	 * NX_ETLS_*, ...). Every query still in flight is lost with it. Called once, from the
	 * loop (never inside an nx_stream_client_* call); the client is freed right after. */
	void (*closed)(void *ud, int rc);
};

struct nx_stream_client_opts {
	enum nx_proto proto;           /* NX_PROTO_TCP, _DOT or _DOH */
	struct nx_tls_creds *creds;    /* DoT/DoH: client credentials (referenced) */
	const char *auth_name;         /* SNI and certificate name, or NULL: the peer's IP */
	const char *authority;         /* DoH :authority (host[:port]) */
	const char *path;              /* DoH request path, e.g. "/dns-query" */
	const uint8_t *resume;         /* TLS session to resume (copied), or NULL */
	size_t resume_len;
	unsigned connect_ms;           /* connect + handshake must be done within this */
	unsigned idle_ms;              /* close after this long with nothing in flight */
	unsigned read_ms;              /* a started answer must complete within this */
	uint8_t *rx;                   /* the worker's receive scratch, borrowed */
};

/* Connect to sa. 0 and *out (the io callbacks then follow), or < 0 (nothing happens later). */
int nx_stream_connect(uv_loop_t *loop, const struct sockaddr *sa, socklen_t salen,
		      const struct nx_stream_client_opts *o, const struct nx_stream_client_io *io,
		      void *ud, struct nx_stream_client **out);
/* Send one query: TCP/DoT framed (its DNS id is the tag the answer comes back with); DoH a
 * POST as request `tag`. Before the connection is ready it is queued (bounded). 0, NX_ELIMIT
 * (the pipeline or queue is full: try another connection), -ENOTCONN (closing). */
int nx_stream_client_send(struct nx_stream_client *c, uint64_t tag, const uint8_t *msg,
			  size_t len);
/* Forget a query (its attempt ended): its answer, if it comes, is dropped. */
void nx_stream_client_cancel(struct nx_stream_client *c, uint64_t tag);
/* Could a query be sent (or queued) now? */
bool nx_stream_client_can_send(const struct nx_stream_client *c);
unsigned nx_stream_client_in_flight(const struct nx_stream_client *c);
bool nx_stream_client_ready(const struct nx_stream_client *c);
/* TLS: was the session resumed; save it for the next connection (length or < 0). */
bool nx_stream_client_resumed(const struct nx_stream_client *c);
int nx_stream_client_session(const struct nx_stream_client *c, uint8_t *buf, size_t cap);
/* Close now without calling io again (the owner is going away). */
void nx_stream_client_close(struct nx_stream_client *c);

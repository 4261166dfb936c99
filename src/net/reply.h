/*
 * The reply handle: how the pipeline answers a query without knowing its transport.
 *
 * Every listener (UDP, TCP, DoT, DoH) hands each query to the pipeline through ONE callback,
 * nx_query_cb, with a `struct nx_reply` that names where the answer goes. The handle is a small
 * value owned by the transport side: the pipeline reads its plain fields (peer, protocol, size
 * rules) and acts on it only through nx_reply_hold / nx_reply_send / nx_reply_release, which
 * dispatch to the transport's ops. So the query path has no transport branches, and a new
 * transport is a new ops table, not new cases in the pipeline.
 *
 * Lifetime: the handle passed to nx_query_cb is borrowed for the call. An answer that can be
 * given at once is written into the callback's `out` buffer and returned; the transport sends
 * it (UDP: in the batch's sendmmsg; streams: framed on the connection). To answer later, the
 * pipeline copies the handle and calls nx_reply_hold on the copy (a stream connection then
 * stays allocated), and ends with exactly one nx_reply_release after its nx_reply_send (or
 * instead of it, when there is nothing to send).
 *
 * Threading: nx_reply_send runs on the thread of the loop the query came in on, except for
 * handles with `any_thread` (UDP: sendmsg on the socket is thread-safe and the sockets outlive
 * all upstream work); the pipeline hands answers for other handles to the owning worker.
 */
#pragma once

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The protocols a query can arrive over: metric labels, query-log values, stats offsets. The
 * order is the query log's (querylog.h NX_QLOG_PROTOS) and the nxdns_queries_total rows'. */
#define NX_PROTOS(X) X(UDP, "udp") X(TCP, "tcp") X(DOT, "dot") X(DOH, "doh")

enum nx_proto {
#define NX_PROTO_ENUM(id, text) NX_PROTO_##id,
	NX_PROTOS(NX_PROTO_ENUM)
#undef NX_PROTO_ENUM
	NX_PROTO__COUNT
};

const char *nx_proto_name(enum nx_proto p);

#define NX_CLIENT_ID_MAX 64 /* bytes of a DoH path / DoT SNI client id ([a-z0-9-]) */

/* Where a UDP query arrived (for wildcard binds): the reply must leave from that address. */
struct nx_udp_origin {
	sa_family_t family; /* 0 when the socket is bound to a specific address */
	union {
		struct in_pktinfo v4;
		struct in6_pktinfo v6;
	} pi;
};

struct nx_udp_sock;
struct nx_stream_conn;
struct nx_reply;

struct nx_reply_ops {
	/* Send one answer. `owner_thread`: the caller runs on the loop the query came in on.
	 * Returns 0, or < 0 when it could not be sent (the transport has counted why). */
	int (*send)(struct nx_reply *r, const uint8_t *msg, size_t len, bool owner_thread);
	/* Keep the transport object alive for a later send (on the owner thread). */
	void (*hold)(struct nx_reply *r);
	/* Drop a hold (on the owner thread), after the send or in place of it. */
	void (*release)(struct nx_reply *r);
	/* Our address and port the query came to (the destination of a datagram on a wildcard
	 * bind, the connection's local end), no system call; any thread while the handle is
	 * valid. false when not known. NULL in a table: not known. */
	bool (*local)(const struct nx_reply *r, struct sockaddr_storage *out);
};

struct nx_reply {
	const struct nx_reply_ops *ops; /* the transport's; static tables */
	struct sockaddr_storage peer;   /* the client's address */
	socklen_t peer_len;
	uint8_t proto;                  /* enum nx_proto */
	bool datagram;                  /* size limited by the query's EDNS (or 512), RFC 8482 ANY */
	bool any_thread;                /* send may run on any worker thread (see above) */
	uint8_t listener;               /* index of the listener address in its config list */
	/* DoH path or DoT SNI client id, "" when none. Borrowed: valid during the query
	 * callback only (the pipeline decides policy there). */
	const char *client_id;
	union {                         /* the transport's own; opaque to the pipeline */
		struct {
			struct nx_udp_sock *sock;   /* borrowed: sockets outlive all replies */
			struct nx_udp_origin origin;
		} udp;
		struct {
			struct nx_stream_conn *conn; /* held between hold and release */
			int32_t stream;              /* HTTP/2 stream id, 0 on a DNS stream */
		} st;
	} t;
};

/*
 * What the pipeline returns for a query (nx_query_cb):
 *   > 0                 an immediate answer of that many bytes is in `out`;
 *   0                   no immediate answer: answered later through the handle, or dropped
 *                       (counted by the pipeline);
 *   NX_REPLY_BUSY_*     no query permit / waiter room now: a datagram transport drops it and
 *                       counts nx_reply_busy_stat(); a stream pauses the connection and asks
 *                       again (backpressure) until listener.permit_wait_ms runs out;
 *   NX_REPLY_BAD_FRAME  not a query one can answer (short header, a response): a datagram is
 *                       dropped (counted), a stream connection is closed.
 */
#define NX_REPLY_BUSY_PERMIT (-1)
#define NX_REPLY_BUSY_WAITERS (-2)
#define NX_REPLY_BAD_FRAME (-3)

typedef int (*nx_query_cb)(void *ud, const struct nx_reply *r, const uint8_t *msg, size_t len,
			   bool truncated, uint8_t *out, size_t cap);

static inline void nx_reply_hold(struct nx_reply *r)
{
	r->ops->hold(r);
}

static inline void nx_reply_release(struct nx_reply *r)
{
	r->ops->release(r);
}

static inline bool nx_reply_local(const struct nx_reply *r, struct sockaddr_storage *out)
{
	return r->ops->local && r->ops->local(r, out);
}

static inline int nx_reply_send(struct nx_reply *r, const uint8_t *msg, size_t len,
				bool owner_thread)
{
	return r->ops->send(r, msg, len, owner_thread);
}

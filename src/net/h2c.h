/*
 * One DNS-over-HTTPS client connection to an upstream: HTTP/2 (nghttp2) over memory, many DNS
 * queries multiplexed on it (RFC 8484 4.1 POST). The upstream engine stacks it on a TLS client
 * session: plaintext from TLS goes into nx_h2c_feed, bytes to encrypt leave through io->send,
 * and each request's outcome comes back once through io->answer. No sockets, no timers, no
 * loop: the caller owns the transport, the deadlines and the choice of connection.
 *
 * Threading: a session belongs to one thread (the worker that owns the upstream connection).
 *
 * Callbacks: io->send runs inside nx_h2c_new, _submit, _cancel, _feed and _goaway, and calls no
 * nx_h2c_* (the TLS transform copies what the socket does not take). io->answer
 * runs only inside nx_h2c_feed and nx_h2c_fail_all, never inside nx_h2c_submit or _cancel, and
 * exactly once per accepted request (nx_h2c_submit returned 0) unless that request was
 * cancelled or the session freed first. An answer callback may call nx_h2c_submit,
 * nx_h2c_cancel (of any tag: a request whose answer is due later in the same feed then gets
 * none), nx_h2c_goaway and nx_h2c_fail_all; never nx_h2c_feed or nx_h2c_free.
 *
 * Answers (the rc given to io->answer):
 *   0             :status 200, content-type application/dns-message, a body of at least a DNS
 *                 header and at most max_body bytes: msg/len, valid during the call only;
 *   -EPROTO       any other final :status (http_status says which; no body is kept);
 *   NX_EFORMAT    200 with another content type;
 *   -EMSGSIZE     the body (or its content-length) is over max_body: the stream is reset;
 *   -ENOBUFS      the connection's response buffers are full (NX_H2C_CONN_BODY_MAX): reset;
 *   NX_EMALFORMED 200 with a body shorter than a DNS header;
 *   -EAGAIN       the server did not process it (REFUSED_STREAM, or above the last stream id
 *                 of its GOAWAY, RFC 9113 8.7): safe to send again, elsewhere;
 *   -ECONNRESET   the server reset the stream otherwise, or nghttp2 did on a malformed answer;
 *   rc of nx_h2c_fail_all: the transport broke.
 * http_status is the final status seen (0 when none arrived). Each error is counted under
 * nxdns_doh_upstream_errors_total{reason}.
 *
 * Fatal errors: a call returning any other < 0 code (a failed io->send, -ENOMEM, a protocol
 * error NX_EMALFORMED) leaves the session dead: later calls return the same code, nothing more
 * is sent or answered except by nx_h2c_fail_all. The caller closes the transport, calls
 * nx_h2c_fail_all (the requests in flight get their answers) and nx_h2c_free.
 *
 * Memory (all charged to ledger owner doh_upstream, exactly: nghttp2 allocates through an
 * nghttp2_mem that charges each block): the session with its :authority and :path, nghttp2's
 * state, one fixed-size slot per stream (NX_H2C_INLINE response bytes inline; slots come from a
 * per-connection free list that is released whenever nothing is in flight, so an idle
 * connection holds none), a heap buffer for a response body over NX_H2C_INLINE (bounded per
 * connection by NX_H2C_CONN_BODY_MAX), and a copy of a request body only when the peer's
 * flow-control window does not let all of it out at once. Nothing is allocated per request in
 * the steady state once the free list has grown to the concurrency in use.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Streams one connection keeps in flight at most (our cap on top of the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS): RFC 9113 6.5.2 recommends servers allow >= 100. */
#define NX_H2C_STREAMS_DEFAULT 100
#define NX_H2C_STREAMS_LIMIT 1000 /* above this one connection's slots alone pass 1 MiB */
/* Response bytes kept inside a slot: our advertised EDNS size (NX_DNS_EDNS_OUR_SIZE), so a
 * typical answer needs no allocation; larger ones take a heap buffer. */
#define NX_H2C_INLINE 1232
/* Response body bytes one connection may hold in heap buffers at once: a server that sends
 * many large bodies in parallel cannot make one upstream connection hold more than this. */
#define NX_H2C_CONN_BODY_MAX (256 * 1024)
#define NX_H2C_AUTHORITY_MAX 261 /* a 255-byte name (or [IPv6]) plus ":65535" */
#define NX_H2C_PATH_MAX 1024	 /* the :path of an RFC 8484 URI template without {?dns} */

struct nx_h2c;

struct nx_h2c_io {
	/* Bytes for the transport (TLS), valid during the call only. 0, or < 0: fatal for the
	 * session (the calling nx_h2c_* returns this code). */
	int (*send)(void *ud, const uint8_t *data, size_t len);
	/* The outcome of request `tag` (see "Answers" above). */
	void (*answer)(void *ud, uint64_t tag, int rc, int http_status, const uint8_t *msg,
		       size_t len);
};

struct nx_h2c_limits {
	unsigned max_streams; /* our cap on streams in flight, 1..NX_H2C_STREAMS_LIMIT */
	size_t max_body;      /* bytes of one response body, 12..65535 */
};

/*
 * A client session for https://<authority><path>. `authority` is host[:port] as it goes into
 * :authority (printable ASCII without spaces, 1..NX_H2C_AUTHORITY_MAX bytes), `path` starts
 * with '/' (printable ASCII, at most NX_H2C_PATH_MAX). `lim` NULL: NX_H2C_STREAMS_DEFAULT
 * streams, 65535-byte bodies. `io` and `ud` are borrowed for the session's life. Sends the
 * connection preface and our SETTINGS through io->send before returning. Returns 0 with *out
 * set, -EINVAL (arguments), -ENOMEM, or io->send's error (nothing is left allocated).
 */
int nx_h2c_new(const char *authority, const char *path, const struct nx_h2c_limits *lim,
	       const struct nx_h2c_io *io, void *ud, struct nx_h2c **out);

/*
 * POST `msg` (a DNS message, 12..65535 bytes; RFC 8484 4.1 recommends id 0, the caller
 * decides) as application/dns-message with accept: application/dns-message, under the
 * caller's `tag` (unique among this session's requests in flight). The bytes go to io->send
 * at once as far as the server's flow-control windows allow; only the rest is copied, so `msg`
 * is not referenced after the call. Returns 0 (io->answer comes later), NX_ELIMIT (at the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS or our max_streams: queue or use another
 * connection; counted), -ESHUTDOWN (the connection takes no new requests: GOAWAY either way, or
 * stream ids exhausted), -EINVAL (len), or a fatal error. On any error io->answer is never
 * called for this request.
 */
int nx_h2c_submit(struct nx_h2c *h, uint64_t tag, const uint8_t *msg, size_t len);

/*
 * Abandon request `tag` (its race was lost or its deadline passed): RST_STREAM CANCEL, and its
 * io->answer is not called. Returns 0, NX_ENOTFOUND (no such request, or already answered), or
 * a fatal error. Finds the tag by walking the requests in flight (at most max_streams).
 */
int nx_h2c_cancel(struct nx_h2c *h, uint64_t tag);

/*
 * Plaintext bytes from the transport. Answers completed by them are given to io->answer after
 * nghttp2 has consumed the input, then what nghttp2 wants to send (SETTINGS and PING ACKs,
 * WINDOW_UPDATEs, resets) goes to io->send. Returns 0 or a fatal error: NX_EMALFORMED for a
 * protocol error (our GOAWAY is sent first; counted), -ENOMEM, or io->send's error.
 */
int nx_h2c_feed(struct nx_h2c *h, const uint8_t *data, size_t len);

/* Streams holding a slot: awaiting their answer, or answered or cancelled while nghttp2 still
 * finishes the stream (a request body the server's window held back). */
unsigned nx_h2c_in_flight(const struct nx_h2c *h);

/* True when a submit now would be accepted: alive, no GOAWAY sent or received, stream ids
 * left, and fewer streams in flight than both the server's SETTINGS_MAX_CONCURRENT_STREAMS
 * (100 assumed until its SETTINGS arrive) and our max_streams. */
bool nx_h2c_can_submit(const struct nx_h2c *h);

/* True when the connection is done: dead, or GOAWAY sent or received (or stream ids
 * exhausted) and nothing in flight. The caller closes the transport and frees. */
bool nx_h2c_want_close(const struct nx_h2c *h);

/* Graceful close: GOAWAY NO_ERROR goes out at once; no new requests are accepted, the ones in
 * flight still get their answers. */
void nx_h2c_goaway(struct nx_h2c *h);

/* The transport broke (or the caller gives up on it): every request in flight not cancelled
 * gets io->answer with `rc` (< 0; a non-negative rc becomes -ECONNABORTED, counted), and the
 * session is dead with that code. Idempotent. Nothing is sent. */
void nx_h2c_fail_all(struct nx_h2c *h, int rc);

/* Release everything (NULL is a no-op). Never calls io: requests still in flight get no
 * answer (call nx_h2c_fail_all first when they need one). */
void nx_h2c_free(struct nx_h2c *h);

/*
 * Ledger bytes of one idle client session after the connection preface exchange (our preface
 * and SETTINGS, the server's SETTINGS, both ACKs) with a 16-byte authority and "/dns-query",
 * measured once per process by running that exchange through a real session. What a DoH
 * upstream connection costs here before TLS and its socket.
 */
size_t nx_h2c_idle_bytes(void);

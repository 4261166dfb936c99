/*
 * One DNS-over-HTTPS server connection: HTTP/2 (nghttp2) over memory. The stream layer feeds
 * the plaintext it got from TLS into nx_h2_feed and receives the bytes to encrypt through
 * io->send; complete DoH queries come out through io->query and go back with nx_h2_respond.
 * No sockets, no timers, no loop: the caller owns the connection and its timeouts.
 *
 * Threading: a session belongs to one thread (the worker that owns the connection).
 * Reentrancy: io->query may call nx_h2_respond / nx_h2_error / nx_h2_reset on any stream;
 * no io callback may call nx_h2_free or nx_h2_feed. io->query is never called from inside
 * nghttp2: requests completed by a feed are dispatched after nghttp2 has consumed it.
 *
 * Memory (all charged to ledger owner doh_sessions, exactly: nghttp2 allocates through an
 * nghttp2_mem that charges each block): the session, nghttp2's own state, one fixed-size slot
 * per open stream (taken from a per-connection free list; the list is released whenever no
 * stream is open, so an idle connection holds no slots), a heap copy for a POST body larger
 * than the slot's inline buffer (freed when the query is handed over), and response bytes the
 * peer's flow-control window did not let out at once (bounded per connection by
 * NX_H2_OUT_QUEUE_MAX, freed as the stream completes).
 *
 * Limits, each counted when it bites (base/stats.h): streams beyond max_streams are refused
 * (REFUSED_STREAM; a peer that ignores our acknowledged SETTINGS gets a connection error from
 * nghttp2), a body over max_body is 413, request bodies buffered by one connection beyond
 * NX_H2_CONN_BODY_MAX refuse the stream, a :path over NX_H2_PATH_MAX is 414, queued response
 * bytes beyond NX_H2_OUT_QUEUE_MAX reset the stream. HTTP errors are answered here with a
 * short text body and counted by status (nxdns_doh_http_errors_total).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NX_H2_MAX_STREAMS_DEFAULT 100 /* RFC 9113 6.5.2 recommends >= 100 */
#define NX_H2_MAX_STREAMS_LIMIT 1000  /* above this a connection's slots alone pass 1 MiB */
#define NX_H2_PATH_MAX 1024	      /* :path bytes kept: a 700-byte query fits in GET form */
#define NX_H2_CTYPE_MAX 64	      /* content-type bytes kept; longer is 415 */
/* Request body bytes one connection may buffer at once (Unbound's http-query-buffer-size idea,
 * per connection); response bytes copied for stalled flow-control windows, per connection: two
 * maximal DNS answers. */
#define NX_H2_CONN_BODY_MAX (128 * 1024)
#define NX_H2_OUT_QUEUE_MAX (128 * 1024)

struct nx_h2;

struct nx_h2_io {
	/* Bytes for the transport, valid during the call only. Returns 0, or < 0: fatal for the
	 * connection (every later call returns an error; the caller closes it). */
	int (*send)(void *ud, const uint8_t *data, size_t len);
	/* A complete DoH query on stream `stream`; the query bytes are valid during the call.
	 * client_id is "" when the path carries none. The receiver answers later with
	 * nx_h2_respond (or nx_h2_error / nx_h2_reset); an answer that never comes holds the
	 * stream (and its slot) until the peer resets it or the session is freed. */
	void (*query)(void *ud, int32_t stream, const uint8_t *msg, size_t len,
		      const char *client_id);
};

struct nx_h2_limits {
	unsigned max_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS, 1..NX_H2_MAX_STREAMS_LIMIT */
	size_t max_body;      /* bytes of one POST body, 12..65535 */
};

/*
 * A server session with `lim` (NULL: NX_H2_MAX_STREAMS_DEFAULT streams, 65535-byte bodies).
 * `io` and `ud` are borrowed for the session's life. Sends nothing until the client preface
 * has arrived. Returns 0 with *out set, -EINVAL (limits out of range) or -ENOMEM.
 */
int nx_h2_server_new(const struct nx_h2_limits *lim, const struct nx_h2_io *io, void *ud,
		     struct nx_h2 **out);

/*
 * Plaintext bytes from the transport. Returns 0, or < 0: close the connection. A bad client
 * preface is NX_EMALFORMED (nothing sent); an HTTP/1.x request gets a short
 * `HTTP/1.1 505 HTTP Version Not Supported` with a text body first and is NX_EFORMAT; a
 * protocol error flushes nghttp2's GOAWAY and returns NX_EMALFORMED; a failed io->send
 * returns its error. Also < 0 once nothing is left to do (see nx_h2_want_close).
 * Dispatches the requests completed by these bytes through io->query, then sends what
 * nghttp2 wants to send.
 */
int nx_h2_feed(struct nx_h2 *h, const uint8_t *data, size_t len);

/*
 * Answer `stream`: 200 application/dns-message with cache-control: max-age=<nx_doh_min_ttl>
 * and content-length. The bytes go to io->send at once as far as the peer's flow-control
 * windows allow; only the rest is copied (within NX_H2_OUT_QUEUE_MAX per connection: beyond
 * it the stream is reset with INTERNAL_ERROR and counted). Returns 0, NX_ENOTFOUND when the
 * stream is gone or was already answered (client reset it, connection closing; counted:
 * the caller just drops the answer), NX_ELIMIT (out queue full), -EINVAL (len 0 or > 65535),
 * or a fatal send / nghttp2 error.
 */
int nx_h2_respond(struct nx_h2 *h, int32_t stream, const uint8_t *msg, size_t len);

/* Reset a stream awaiting its answer (e.g. NGHTTP2_REFUSED_STREAM when no permit is left).
 * Returns 0, NX_ENOTFOUND (gone or already answered) or a fatal error. */
int nx_h2_reset(struct nx_h2 *h, int32_t stream, uint32_t h2_error);

/* Answer a stream awaiting its answer with HTTP status 400..599 and a short text body
 * (counted by status). Returns 0, NX_ENOTFOUND, -EINVAL (status) or a fatal error. */
int nx_h2_error(struct nx_h2 *h, int32_t stream, int http_status);

/* Lower (or raise, up to the limit it was created with) the concurrent stream cap: new
 * SETTINGS go out at once; streams already open continue. */
void nx_h2_set_max_streams(struct nx_h2 *h, unsigned n);

/* Streams holding a slot: receiving, awaiting their answer, or sending it. */
unsigned nx_h2_streams_open(const struct nx_h2 *h);

/* True when the connection has nothing left to do: GOAWAY sent or received (or a fatal
 * error) and no stream left. The caller closes the transport. */
bool nx_h2_want_close(const struct nx_h2 *h);

/* Graceful shutdown: GOAWAY with the last stream we accepted; open streams still get their
 * answers, new ones are refused by nghttp2. */
void nx_h2_goaway(struct nx_h2 *h);

/* Release everything (NULL is a no-op). Never calls io. */
void nx_h2_free(struct nx_h2 *h);

/*
 * Ledger bytes of one idle session after the connection preface exchange (client preface +
 * SETTINGS both ways, ACKs), measured once per process by running that exchange through a
 * real session. What a DoH connection costs here before TLS and socket buffers.
 */
size_t nx_h2_idle_bytes(void);

/*
 * net/ internals of the stream layer, shared by stream.c (the connection: reading, writing,
 * timers, the TLS and HTTP/2 glue, DNS framing, and the listener side) and stream_client.c (the
 * upstream side: connect, send queries, take answers). Never included from outside net/.
 *
 * One connection struct serves both roles, so timeouts, write queue, framing and TLS are
 * written once: `srv` is set for a connection a listener accepted, `cl` for one nxdns opened
 * to an upstream; exactly one of them is non-NULL.
 */
#pragma once

#include "net/h2.h"
#include "net/stream.h"
#include "net/tls.h"

struct nx_h2c;

struct nx_stream_server {
	uv_tcp_t h;                  /* the listening socket */
	enum nx_proto proto;
	int listener;
	atomic_int *open_count;      /* borrowed: the listener's shared counter */
	struct nx_stream_limits lim;
	struct nx_tls_creds *creds;  /* referenced; NULL for plain TCP */
	struct nx_stream_env env;
	enum nx_tls_alpn alpn;       /* what TLS offers: "dot" (not required) or "h2" */
	/* Open connections, most recently active first: the tail is the eviction candidate. */
	struct nx_stream_conn *head, *tail;
	unsigned n_open;
};

struct nx_stream_conn {
	uv_tcp_t h;
	uv_timer_t timer;            /* handshake, read, idle or permit-retry, whichever applies */
	struct nx_stream_server *srv; /* listener side: borrowed, outlives its open connections */
	struct nx_stream_client *cl; /* upstream side: the client this connection is (same block) */
	const struct nx_stream_limits *lim; /* the server's, or the client's own */
	uint8_t *rx;                 /* the worker's receive scratch, borrowed */
	enum nx_proto proto;
	struct nx_stream_conn *prev, *next; /* listener side: the server's list */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	union {                      /* listener side: our end (getsockname at accept) */
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} local;
	struct nx_tls *tls;          /* owned (DoT, DoH); freed once the handles have closed */
	struct nx_h2 *h2;            /* owned (DoH listener), made when the handshake is done */
	struct nx_h2c *h2c;          /* owned (DoH upstream), made when the handshake is done */
	uint64_t accepted_ms;        /* accepted or connect started: handshake deadline base */
	unsigned corks;              /* nested output batches: TLS records leave at the outermost end */
	/* DNS framing (TCP, DoT): bytes not consumed yet (a partial message, or whole messages
	 * waiting for the pipeline bound or a permit); DoH listener: queries parked for a permit.
	 * Owned, NX_OWNER_tcp_conns; freed when empty. */
	uint8_t *rbuf;
	size_t rcap, rlen;
	uint64_t msg_start_ms;       /* loop time when the current partial message began */
	uint64_t active_ms;          /* loop time of the last query or answer: idle since */
	uint64_t paused_at_ms;       /* waiting for a permit since then (valid while paused) */
	unsigned retry_ms;           /* next permit retry interval */
	unsigned holds;              /* listener: queries held by the pipeline; upstream: in flight */
	unsigned writes;             /* uv_write requests outstanding */
	size_t queued;               /* bytes in those requests */
	unsigned handles_open;       /* of h and timer; memory is freed when 0 and unheld */
	bool open;                   /* false once closing has started */
	bool reading;
	bool in_input;               /* consuming frames: releases must not re-enter */
	bool paused;                 /* a query found no permit: reading stops, retry on timer */
	bool retrying;               /* re-offering parked messages (the wait goes on) */
	bool ready;                  /* plain, or the TLS handshake is done */
	bool draining;               /* no more reading: close once holds and writes are done */
	int err;                     /* why the socket or TLS failed (0: closed on purpose) */
	char client_id[NX_CLIENT_ID_MAX + 1]; /* DoT SNI client id, "" when none */
};

/* stream.c, for stream_client.c */
void stream_conn_close(struct nx_stream_conn *c);
void stream_arm_timer(struct nx_stream_conn *c);
void stream_update_reading(struct nx_stream_conn *c);
int stream_dns_send(struct nx_stream_conn *c, const uint8_t *msg, size_t len);
int stream_app_write(struct nx_stream_conn *c, const uint8_t *data, size_t len);
void stream_out_begin(struct nx_stream_conn *c);
void stream_out_end(struct nx_stream_conn *c);
void stream_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
void stream_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
void stream_on_handle_closed(uv_handle_t *h);
extern const struct nx_tls_io stream_tls_io;

/* stream_client.c, for stream.c: the upstream role's side of the shared code */
bool client_frame(struct nx_stream_conn *c, const uint8_t *msg, size_t len);
void client_h2_input(struct nx_stream_conn *c, const uint8_t *data, size_t len);
void client_ready(struct nx_stream_conn *c);
void client_closing(struct nx_stream_conn *c);
void client_timeout(struct nx_stream_conn *c);
void client_free(struct nx_stream_conn *c);

/*
 * dnstap export: every answered query becomes a CLIENT_QUERY and a CLIENT_RESPONSE frame sent
 * over Frame Streams (libfstrm, content type "protobuf:dnstap.Dnstap") to a collector on a
 * Unix socket or a TCP address.
 *
 * Queue: one byte ring per producer (worker), so workers never contend with each other. A push
 * copies one event (fixed header, the rule and source texts, the reply bytes) into the
 * producer's ring under its mutex: no allocation, no I/O, no protobuf. A full ring drops its
 * OLDEST events until the new one fits and counts them (nxdns_dnstap_dropped_total{reason=
 * "queue_full"}): the DNS path never waits on the collector. A push wakes the writer only when
 * it sleeps idle, or naps under load and the ring is half full (one load per push otherwise).
 *
 * Events: a client answer (two frames), and with dnstap.forwarder each query sent to an
 * upstream and each answer taken from one (a frame each), pushed by the worker whose engine
 * made the exchange into that worker's ring.
 *
 * Writer: one thread drains the rings, encodes each event into its dnstap protobufs in a
 * preallocated buffer and writes them as frames, up to 128 per writev. It owns the connection:
 * connect and the bidirectional handshake (READY/ACCEPT/START) with a timeout, every write bounded
 * by NX_DNSTAP_IO_TIMEOUT_MS; a failure closes the connection, counts a reconnect and retries with
 * exponential backoff (NX_DNSTAP_BACKOFF_MIN_MS .. NX_DNSTAP_BACKOFF_MAX_MS). While disconnected it
 * leaves the rings alone, so they keep the newest events for when the collector is back. Events
 * drained but lost with a failed write are counted under reason="write_error".
 *
 * Threading: nx_dnstap_push() from producer i only (one thread per ring index); new/start/
 * retarget/stop/free from one control thread.
 *
 * Memory: the rings and the writer's record copy and batch buffer are allocated in nx_dnstap_new
 * and charged to NX_OWNER_dnstap_queue; libfstrm's per-connection state (a few hundred bytes,
 * allocated at each connect) is not. Nothing is allocated per event.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NX_DNSTAP_RULE_MAX 254	/* matched name text, truncated (no NUL stored) */
#define NX_DNSTAP_SOURCE_MAX 64 /* list name or user rule text, truncated */
#define NX_DNSTAP_MSG_MAX 65535 /* a DNS message over TCP */
#define NX_DNSTAP_ID_MAX 255	/* identity and version are cut to this (a host name fits) */
#define NX_DNSTAP_FRAME_MAX (NX_DNSTAP_MSG_MAX + 2048) /* one packed Dnstap (encode.c proves it)   \
							*/
/* Each ring holds at least this many of the largest events, so any event fits. */
#define NX_DNSTAP_RING_MIN (4 * (NX_DNSTAP_MSG_MAX + 512))
#define NX_DNSTAP_IO_TIMEOUT_MS 2000 /* a stalled collector costs a reconnect, not a hang */
#define NX_DNSTAP_BACKOFF_MIN_MS 100
#define NX_DNSTAP_BACKOFF_MAX_MS 5000 /* a collector back is picked up within 5 s */

/* dnstap SocketProtocol values (dnstap.proto): UDP 1, TCP 2, DOT 3, DOH 4. */
enum nx_dnstap_proto {
	NX_DNSTAP_UDP = 1,
	NX_DNSTAP_TCP = 2,
	NX_DNSTAP_DOT = 3,
	NX_DNSTAP_DOH = 4,
};

/* What an event becomes: a client answer is two frames, a forwarder event one. */
enum nx_dnstap_kind {
	NX_DNSTAP_CLIENT = 0,	    /* an answer to a client: CLIENT_QUERY + CLIENT_RESPONSE */
	NX_DNSTAP_FWD_QUERY = 1,    /* a query sent to an upstream: FORWARDER_QUERY */
	NX_DNSTAP_FWD_RESPONSE = 2, /* an upstream's answer to it: FORWARDER_RESPONSE */
};

/* One event, as the pipeline or the upstream engine hands it over. Every pointer is borrowed
 * for the call. Addresses are dnstap's: the initiator's (query_address) and the responder's
 * (response_address), AF_INET or AF_INET6; other families or NULL: not exported. */
struct nx_dnstap_event {
	enum nx_dnstap_kind kind;
	enum nx_dnstap_proto proto;
	const struct sockaddr *client; /* CLIENT: the client; FWD_*: NULL (our socket's port
					* is not kept by the engine) */
	const struct sockaddr *server; /* CLIENT: our address the client asked (listener);
					* FWD_*: the upstream server */
	int64_t query_us;	       /* wall clock, µs since the epoch: CLIENT arrival; FWD_*:
					* the query was sent */
	int64_t response_us;	       /* CLIENT: the answer was made; FWD_RESPONSE: received */
	const char *action;	       /* CLIENT: static text ("none", "block", ...), or NULL */
	const char *reason;	       /* CLIENT: static text ("blocklist", ...), or NULL */
	const char *rule;	       /* CLIENT: matched name, NUL-terminated, or NULL / "" */
	const char *source;	       /* CLIENT: list or rule that decided, or NULL / "" */
	bool cached;		       /* CLIENT: answered from the cache */
	const uint8_t *msg;	       /* wire bytes: CLIENT the answer sent, FWD_QUERY our
					* query, FWD_RESPONSE the upstream's answer */
	size_t msg_len;		       /* <= NX_DNSTAP_MSG_MAX; longer ones are dropped, counted */
};

/* Frames an event of this kind becomes. */
static inline int nx_dnstap_kind_frames(enum nx_dnstap_kind k)
{
	return k == NX_DNSTAP_CLIENT ? 2 : 1;
}

struct nx_dnstap_params {
	const char *socket_path;    /* Unix socket of the collector, or NULL; copied */
	const struct sockaddr *tcp; /* or a TCP address (IPv4/IPv6); copied */
	socklen_t tcp_len;
	unsigned producers;   /* rings (workers), >= 1 */
	size_t queue_bytes;   /* all rings together; each >= NX_DNSTAP_RING_MIN */
	const char *identity; /* Dnstap.identity (host name), copied; NULL = none */
	const char *version;  /* Dnstap.version, copied; NULL = none */
};

struct nx_dnstap;

void nx_dnstap_params_default(struct nx_dnstap_params *p);

/* Allocate the rings and scratch buffers. 0, -EINVAL (no destination, both, or producers 0),
 * -ENAMETOOLONG (socket path), -ENOMEM. Nothing connects until nx_dnstap_start. */
int nx_dnstap_new(const struct nx_dnstap_params *p, struct nx_dnstap **out);
/* Start the writer thread (it connects in the background); again after a stop too. 0 or
 * -errno. */
int nx_dnstap_start(struct nx_dnstap *t);
/* Point the export at another collector and/or identity (p's socket_path, tcp and identity;
 * the rest is ignored): the writer ends its connection (STOP/FINISH) at its next turn and
 * connects to the new destination; queued events go there. A no-op when nothing differs.
 * Control thread; the writer may be running. 0, or -EINVAL / -ENAMETOOLONG (nothing
 * changed). */
int nx_dnstap_retarget(struct nx_dnstap *t, const struct nx_dnstap_params *p);
/* Stop the writer: events still queued are sent when connected (bounded by the I/O timeout),
 * then the stream is closed (STOP/FINISH). Idempotent. */
void nx_dnstap_stop(struct nx_dnstap *t);
/* Stop if running and release; NULL is a no-op. */
void nx_dnstap_free(struct nx_dnstap *t);

/* Queue one event from producer `idx` (< producers). Never blocks on I/O; drops the oldest
 * when full (counted). */
void nx_dnstap_push(struct nx_dnstap *t, unsigned idx, const struct nx_dnstap_event *ev);

/* Encoding (encode.c), for the writer and the tests. A CLIENT event is a CLIENT_QUERY
 * (`response` false) or a CLIENT_RESPONSE; a FWD_* event its one FORWARDER_* message
 * (`response` is ignored). The block decision goes in the CLIENT_RESPONSE's Dnstap.extra as
 * "nxdns action=A reason=R rule=N source=S cached=true" (fields with no value, and cached when
 * false, are left out; the Debian schema has no Policy message). A CLIENT_QUERY's message is
 * rebuilt from the reply: its header (id, opcode, RD, CD) and question; the pipeline keeps no
 * client bytes past a forwarded query. Returns the packed length, or NX_ETRUNC when `cap` is
 * too small. */
struct nx_dnstap_frame_ids {
	const char *identity; /* or NULL */
	const char *version;  /* or NULL */
};
int nx_dnstap_encode(const struct nx_dnstap_event *ev, const struct nx_dnstap_frame_ids *ids,
		     bool response, uint8_t *out, size_t cap);
/* Rebuild the client's query from reply[0..len): header + question. Returns its length, 0 when
 * the reply has no readable question, NX_ETRUNC when cap is too small. */
int nx_dnstap_query_from_reply(const uint8_t *reply, size_t len, uint8_t *out, size_t cap);

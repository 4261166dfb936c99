/*
 * Upstream forwarding engine (one per worker loop).
 *
 * An operation asks plain-DNS upstreams one question: it sends to the first server, then every
 * `stagger_ms` to the next until `race` attempts run at once; the first valid answer wins and the
 * other attempts are cancelled. `timeout_ms` is ONE deadline for the whole operation, including
 * a TCP retry after a truncated UDP answer. A failed attempt (send error, ICMP port unreachable
 * on the connected socket, upstream SERVFAIL/REFUSED, FORMERR/NOTIMP to a plain query, an
 * answer with the attempt's id that does not parse, a broken TCP retry) moves on to the next
 * server at once; a server that stays silent is left to the stagger and the deadline. A
 * FORMERR/NOTIMP/BADVERS to EDNS is asked again without OPT in the same attempt, and the server
 * is remembered as plain for a while (impl.h); so is a server that does not echo the 0x20 case.
 *
 * Anti-spoofing (RFC 5452): each UDP socket is bound to its own random source port,
 * connect()ed to the server (other sources are dropped by the kernel) and carries at most 4
 * exchanges (then a fresh random port), each with a random transaction id (libsodium) unique on
 * it, and the question name's letters in random case (0x20); a UDP reply counts only when it
 * comes from the address the query went to, with the same id and the same question in our case.
 * Spoofing guesses (wrong id, question or case) and late answers to ended exchanges are ignored
 * and counted. See exchange.c for the sockets and README.md for the measured entropy.
 *
 * The race, deadline and retry rules live in race.c behind a transport + clock interface
 * (race.h); this engine supplies libuv time and the sockets.
 *
 * Threading: an engine and its operations belong to one worker loop. Memory: operations come
 * from a free list that grows up to `max_ops` (the process-wide permit count bounds it) and is
 * reused, so steady-state forwarding allocates nothing; socket structs are reused from a free
 * list (NX_OWNER_upstream_udp, with the recvmmsg batch buffers); TCP fallback buffers are allocated
 * on demand (NX_OWNER_upstream_tcp) since truncation is rare.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "conf/conf.h"
#include "dns/msg.h"

#define NX_UP_MAX_ATTEMPTS NX_CONF_RACE_CONCURRENT_MAX /* concurrent attempts per operation */
#define NX_UP_QUERY_MAX 512    /* our upstream query: header + one question + OPT */
#define NX_UP_STATS_MAX 64     /* distinct upstream servers with metric series */
/*
 * Retransmission timeout per server: SRTT + 4 RTTVAR of its answers (RFC 6298, as Unbound's
 * infra cache), doubled by each re-send to a silent server until an answer to a query sent once
 * gives a fresh sample, within [MIN, MAX]; INITIAL before its first answer (Unbound starts at
 * 376 ms). MIN: a loopback or LAN server's estimate can be a few ms, and a re-send sooner than
 * this is more likely a duplicate than a rescue (Unbound's floor is 50 ms, RFC 6298's 1 s).
 * MAX: the largest upstream.timeout_ms; in effect an attempt's timeout is capped by its
 * operation's deadline, as no re-send is due after it. A silent UDP query is sent again after
 * its timeout, then after twice that (race.h, NX_RACE_RESENDS).
 */
#define NX_UP_RTO_INITIAL_MS 400
#define NX_UP_RTO_MIN_MS 200
#define NX_UP_RTO_MAX_MS 60000

/* How a server is asked (the config's kind). */
enum nx_up_transport {
	NX_UP_T_PLAIN, /* UDP, TCP after a truncated answer */
	NX_UP_T_TCP,   /* TCP only, a pooled connection (RFC 7766) */
	NX_UP_T_DOT,   /* DNS over TLS (RFC 7858), a pooled connection */
	NX_UP_T_DOH,   /* DNS over HTTPS (RFC 8484), a pooled HTTP/2 connection */
};

struct nx_tls_creds;

/* One upstream server as the engine uses it (copied out of the config by the daemon). */
struct nx_up_server {
	struct sockaddr_storage ss;
	socklen_t len;
	int stats;                 /* index from nx_up_stats_index(): also the connection pool */
	enum nx_up_transport transport;
	struct nx_tls_creds *creds; /* DoT/DoH: borrowed (the config generation holds it) */
	const char *auth_name;     /* DoT/DoH: SNI + certificate name, or NULL (the IP); borrowed */
	const char *path;          /* DoH: request path; borrowed */
	char authority[262];       /* DoH: :authority, host[:port] as the URL named it */
};

struct nx_up_req {
	const struct nx_dns_question *q; /* borrowed for the call */
	bool do_bit;
	bool cd;
	const struct nx_up_server *servers; /* borrowed: must outlive the operation (conf ref) */
	size_t n_servers;
	unsigned race;
	unsigned stagger_ms;
	unsigned timeout_ms;
};

enum nx_up_result {
	NX_UP_ANSWER,   /* msg/len/parsed describe a validated answer */
	NX_UP_TIMEOUT,  /* the whole-operation deadline expired */
	NX_UP_FAILED,   /* every server failed before the deadline */
};

/*
 * Called exactly once per started operation, on the worker loop. msg and parsed are valid only
 * during the call (they live in the engine's receive buffer). server is the index in the
 * request's server list that answered, or -1.
 */
typedef void (*nx_up_done_cb)(void *ud, enum nx_up_result res, const uint8_t *msg, size_t len,
			      const struct nx_dns_msg *parsed, int server);

struct nx_upstream;

int nx_upstream_new(uv_loop_t *loop, unsigned max_ops, struct nx_upstream **out);
/* Cancels nothing: call when no operation is running (shutdown after the loop drained). */
void nx_upstream_free(struct nx_upstream *u);
/* Close all timers/handles (before uv_loop_close); operations in flight complete as FAILED. */
void nx_upstream_shutdown(struct nx_upstream *u);
void nx_upstream_set_max_ops(struct nx_upstream *u, unsigned max_ops);

/* Start an operation. 0, or NX_ENOSLOT when max_ops are running (cb is then never called). */
int nx_upstream_start(struct nx_upstream *u, const struct nx_up_req *req, nx_up_done_cb cb,
		      void *ud);

/* ---- observing the exchanges (dnstap's FORWARDER_* messages) ---- */

/* One message of an exchange with a server, as it went out or came in. */
struct nx_up_tap_msg {
	bool response;			  /* false: a query sent; true: an answer taken */
	bool tcp;			  /* a plain server asked over TCP (after truncation) */
	const struct nx_up_server *server; /* the server (address, transport); borrowed */
	const uint8_t *msg;		  /* wire bytes, borrowed for the call */
	size_t len;
	uint64_t sent_us;		  /* monotonic µs: when the attempt's query was sent */
};

typedef void (*nx_up_tap_cb)(void *ud, const struct nx_up_tap_msg *m);

/*
 * Set (cb NULL: clear) the engine's observer, called on the engine's loop for every query
 * sent (each UDP datagram, re-sends included; each query handed to a TCP/DoT/DoH connection;
 * the TCP retry after truncation) and every answer with the attempt's id taken from a server
 * (before it is checked further; spoofing guesses with a wrong id are not seen). It must not
 * call back into the engine. Unset it costs a pointer test per message.
 */
void nx_upstream_set_tap(struct nx_upstream *u, nx_up_tap_cb cb, void *ud);

/* ---- per-server statistics (process-wide) ---- */

enum nx_up_outcome { NX_UP_O_ANSWER, NX_UP_O_TIMEOUT, NX_UP_O_CANCELLED, NX_UP_O_ERROR,
		     NX_UP_O__COUNT };

#define NX_UP_LATENCY_BUCKETS_MS {1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}
#define NX_UP_LATENCY_NBUCKETS 12

struct nx_up_stats_row {
	char name[64];
	uint64_t outcome[NX_UP_O__COUNT];
	uint64_t bucket[NX_UP_LATENCY_NBUCKETS]; /* cumulative counts per upper bound */
	uint64_t count;
	double sum_seconds;
	uint64_t resends; /* UDP queries sent again after a silent retransmission timeout */
	uint64_t connections; /* TCP/DoT/DoH connections opened to it (reuse: exchanges / this) */
	uint32_t rto_ms;  /* the retransmission timeout a new query to it gets now */
};

/* Find or create the stats slot for a server text (control thread). -1 when full. */
int nx_up_stats_index(const char *name);
/* Retransmission timeout for a server's slot now (ms). */
uint32_t nx_up_stats_rto_ms(int idx);
/* Number of slots in use; read row i. */
int nx_up_stats_count(void);
void nx_up_stats_read(int i, struct nx_up_stats_row *row);
const char *nx_up_outcome_name(enum nx_up_outcome o);

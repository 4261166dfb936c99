/*
 * The engine's state, shared by exchange.c (operations, UDP sockets, TCP after truncation, the
 * race wiring) and conn.c (pooled TCP/DoT/DoH connections). Internal to src/upstream/.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "dns/msg.h"
#include "net/stream.h"
#include "upstream/race.h"
#include "upstream/upstream.h"

#define PORT_TRIES 8            /* random source ports tried before the kernel picks one */
#define NX_UP_SPARE_OPS 8       /* operations allowed beyond 2 x max_ops while handles close */
#define NX_UP_POOL_IDLE_MS 60000 /* an unused server's spares close, then its pool is freed */
/* Exchanges per socket (port): few, so ports are nearly fresh per exchange (README: 28.45 bits
 * of id + port measured; 3 gives 28.85 but a third more socket churn, 12-17 us a socket), and
 * a burst's queries still leave a few per sendmmsg. */
#define NX_UP_SOCK_USES 4
#define NX_UP_SOCK_AGE_MS 5000  /* a socket (or spare) older than this takes no new exchange */
#define NX_UP_SPARES 8          /* sockets per server opened ahead of the next turn's sends */
/* Open sockets per server and engine: each is a file descriptor; 512 carry >= 512 exchanges
 * at once (2048 when packed), more than a worker's permits keep in flight to one server. */
#define NX_UP_SOCKS_MAX 512
#define OPT_BARE_LEN 11         /* our query's OPT: root owner, type, class, ttl, rdlen 0 */
#define NX_UP_QUERY_WIRE (NX_DNS_HDR_LEN + NX_DNS_NAME_MAX + 4 + OPT_BARE_LEN)
#define RX_BATCH 16             /* datagrams per recvmmsg */
#define EP_BATCH 64             /* socket events per epoll_wait on the engine's own epoll */
#define RX_SLOT NX_DNS_EDNS_OUR_SIZE /* we advertise this size: larger replies come as MSG_TRUNC */
#define TX_BATCH 32             /* queries per sendmmsg */

struct attempt;
struct up_sock;

/* The sockets of one upstream server (by address), each connect()ed to it. */
struct up_pool {
	struct up_pool *next;
	struct sockaddr_storage ss;
	socklen_t len;
	struct up_sock *cur;         /* takes new exchanges until NX_UP_SOCK_USES, or NULL */
	struct up_sock *spare[NX_UP_SPARES]; /* open, no exchange yet */
	uint8_t n_spare;
	uint8_t took;                /* sockets taken (spare or new) since the last flush */
	unsigned open;               /* sockets of this pool not yet closed (any state) */
	uint64_t used_ms;
};

struct up_sock {
	struct nx_upstream *u;
	struct up_pool *pool;
	struct up_sock *next;       /* free list */
	int fd;
	uint8_t uses;               /* exchanges sent on it (ids[0..uses)) */
	uint8_t outstanding;        /* of those, still waiting */
	bool pooled;                /* pool->cur or a spare: may take new exchanges */
	bool closing;               /* closed: fd is -1; the struct waits for reuse */
	uint64_t born_ms;
	uint16_t ids[NX_UP_SOCK_USES];
	struct attempt *att[NX_UP_SOCK_USES]; /* NULL once that exchange ended */
};

struct up_tcp {
	uv_tcp_t h;
	uv_connect_t creq;
	uv_write_t wreq;
	struct attempt *a;
	struct op *op;
	size_t rlen;
	uint8_t wbuf[2 + NX_UP_QUERY_MAX];
	uint8_t rbuf[2 + NX_DNS_MSG_MAX];
};

struct attempt {
	struct op *op;         /* back pointer, set when the op is created */
	struct up_sock *sock;  /* UDP: the socket the query went out on (slot `slot`) */
	struct attempt *out_next; /* send queue link while in_list */
	bool in_list;          /* linked in the engine's send queue */
	bool queued;           /* a UDP send is wanted (cleared when the attempt stops) */
	uint8_t slot;
	uint16_t id;           /* transaction id sent */
	bool resent;           /* the query was queued again (a re-send) */
	bool edns;             /* this query carries our OPT */
	bool caps;             /* its name's letters are 0x20-randomised by caps_mask */
	bool retrying;         /* the next send is a retry of this attempt, not a new one */
	bool edns_refused;     /* FORMERR/NOTIMP/BADVERS to EDNS in this attempt: plain from now */
	bool case_refused;     /* a case mismatch in this attempt: unrandomised from now */
	uint8_t caps_mask[(NX_DNS_NAME_MAX + 7) / 8]; /* bit i: flip the case of name byte i */
	struct up_tcp *tcp;    /* TCP retry in progress (NX_OWNER_upstream_tcp) */
	struct up_sconn *sconn; /* TCP/DoT/DoH server: the pooled connection it is in flight on */
	uint64_t tag;          /* its request on that connection (DNS id, or DoH request tag) */
	uint64_t sent_us;
};

struct op {
	struct nx_race race;
	struct nx_upstream *u;
	struct op *next_free;
	bool running;            /* between start and the done callback */
	unsigned handles;        /* TCP handles still closing (+ the timer at shutdown) */
	const struct nx_up_server *servers; /* borrowed (request) */
	struct nx_dns_question q;
	uint16_t qlen;
	uint8_t query[NX_UP_QUERY_MAX];
	uv_timer_t timer;        /* the race's next wake-up (deadline or stagger) */
	nx_up_done_cb cb;
	void *ud;
	struct attempt att[NX_UP_MAX_ATTEMPTS];
};

struct nx_upstream {
	uv_loop_t *loop;
	struct op *free;         /* idle operations, reused */
	unsigned n_ops;          /* allocated */
	unsigned max_ops;
	unsigned running;
	struct op **all;         /* every allocated op, for shutdown */
	unsigned all_cap;
	bool shutting_down;
	struct up_pool *pools;   /* one per upstream server address in use (NX_OWNER_upstream_udp) */
	/* UDP sends wait for the end of the loop turn (uv_prepare) and go out in sendmmsg
	 * batches per socket: one system call, and one wake-up of the upstream, per batch. */
	uv_prepare_t flush;
	bool flush_on;
	struct attempt *out_head, *out_tail;
	struct up_sock *free_socks;
	unsigned n_socks;        /* allocated up_sock structs (open, closed or free) */
	/*
	 * The UDP sockets are watched by the engine's own epoll instance, which the loop watches
	 * as one poll handle: a socket then costs one epoll_ctl (close() removes it), where a
	 * uv_poll_t per socket costs five system calls more (libuv checks the fd with an epoll
	 * add and delete, sets O_NONBLOCK again, and adds and deletes it), at one socket per 4
	 * exchanges. A socket closed while an epoll_wait batch is being handled waits on `dead`
	 * for reuse until the batch is done, so a stale event cannot reach its next life.
	 */
	int epfd;
	uv_poll_t ep_poll;
	bool in_events;
	struct up_sock *dead;
	/* the answer being delivered (set just before nx_race_answer) */
	const uint8_t *cur_msg;
	size_t cur_len;
	const struct nx_dns_msg *cur_m;
	uint8_t (*rxb)[RX_SLOT]; /* RX_BATCH receive slots (NX_OWNER_upstream_udp) */
	uint8_t rx[NX_DNS_MSG_MAX]; /* a TCP answer, copied out of its connection */
	/* TCP/DoT/DoH servers (conn.c): a pool per server stats slot, made when first used */
	struct up_spool *spools[NX_UP_STATS_MAX];
	uint8_t *srx;            /* the stream layer's receive scratch (NX_OWNER_upstream_tcp) */
	uint64_t tag_seq;        /* DoH request tags */
	nx_up_tap_cb tap;        /* observer of every message (nx_upstream_set_tap), or NULL */
	void *tap_ud;
};


/* exchange.c, for conn.c */
int nx_up_att_index(const struct op *op, const struct attempt *a);
size_t nx_up_att_query(const struct op *op, const struct attempt *a, uint8_t *out);
/* Validate and act on a reply for attempt a (via_stream: a reliable transport, where a bad
 * reply fails the attempt rather than being a spoofing guess). */
void nx_up_on_reply(struct op *op, struct attempt *a, const uint8_t *buf, size_t len,
		    bool via_stream);

/* conn.c: TCP, DoT and DoH servers, over pooled connections of the stream layer */
int nx_up_conn_send(struct nx_upstream *u, struct op *op, struct attempt *a,
		    const struct nx_up_server *sv);
void nx_up_conn_stop(struct attempt *a);
void nx_up_conn_shutdown(struct nx_upstream *u);
void nx_up_conn_free(struct nx_upstream *u);

/*
 * In-process fake upstream DNS server for the upstream engine tests.
 *
 * One fake = a UDP socket and (optionally) a TCP listener on the same 127.0.0.1 port, plus a
 * second UDP socket used to answer from the wrong source. It runs on the test's own uv loop and
 * answers from a script (`mode`, `tcp_mode`, `delay_ms`, `rcode`) so a test can drive each path
 * of the engine: slow, silent, SERVFAIL, spoofed id/source/question, truncated then TCP.
 * It records what it received (ids, source ports, counts) for assertions.
 *
 * Memory: everything lives inside struct fake (fixed arrays, no allocation); the caller owns the
 * struct and must keep it alive until fake_close()'s handles are closed (run the loop).
 * Threading: the loop's thread only.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "upstream/upstream.h"

#define FAKE_REC 128  /* queries recorded (ids, source ports) */
#define FAKE_PEND 64  /* delayed replies in flight at once */
#define FAKE_CONNS 4  /* TCP connections at once */
#define FAKE_BUF 1024 /* largest message we build or receive over TCP */
#define FAKE_QNAME 64 /* bytes of each query's name recorded */

enum fake_mode {
	FAKE_ANSWER,		 /* A answer after delay_ms */
	FAKE_NEVER,		 /* record, never answer */
	FAKE_RCODE,		 /* no-data reply with `rcode` after delay_ms */
	FAKE_WRONG_ID_FIRST,	 /* reply with a wrong id at once, the right one 10 ms later */
	FAKE_WRONG_ID_ONLY,	 /* only the wrong-id reply */
	FAKE_WRONG_SOURCE_FIRST, /* right reply from the other socket, then from ours 10 ms later */
	FAKE_WRONG_QUESTION_FIRST, /* reply for another name at once, the right one 10 ms later */
	FAKE_UPPER_CASE,	   /* right answer, question name upper-cased */
	FAKE_TC,		   /* UDP: empty reply with TC; TCP per tcp_mode */
	FAKE_ANSWER_RESENT,	   /* drop a query's first datagram, answer its re-sends */
	FAKE_DROP_FIRST,	   /* drop the very first datagram received, answer the rest */
	FAKE_FORMERR_EDNS,	   /* FORMERR (question echoed) to a query with OPT, else answer */
	FAKE_FORMERR_EDNS_BARE,	   /* as FORMERR_EDNS, but the FORMERR has no question section */
	FAKE_MALFORMED,		   /* right id and question, then an answer count that overruns */
	FAKE_MALFORMED_QUESTION,   /* right id, QDCOUNT 1, a question name that does not parse */
};

enum fake_tcp_mode {
	FAKE_TCP_ANSWER,   /* A answer in one write */
	FAKE_TCP_SPLIT,	   /* A answer in two writes 20 ms apart (length prefix split) */
	FAKE_TCP_NEVER,	   /* read the query, never answer */
	FAKE_TCP_WRONG_ID, /* A answer with a wrong id */
};

struct fake;

struct fake_pend {
	uv_timer_t t;
	struct fake *f;
	bool busy;
	bool via_alt;
	uint8_t buf[FAKE_BUF];
	size_t len;
	struct sockaddr_storage to;
};

struct fake_conn {
	uv_tcp_t h;
	uv_timer_t t; /* second half of a split write */
	struct fake *f;
	bool open;
	size_t rlen;
	uint8_t rbuf[FAKE_BUF];
	uv_write_t wreq[2];
	uint8_t wbuf[2 + FAKE_BUF];
	size_t wlen;
	size_t wsplit;
};

struct fake {
	uv_loop_t *loop;
	uv_udp_t udp;
	uv_udp_t alt;
	uv_tcp_t tcp;
	bool has_tcp;
	uint16_t port; /* host order */
	/* script */
	enum fake_mode mode;
	enum fake_tcp_mode tcp_mode;
	unsigned delay_ms;
	int rcode;
	/* record */
	unsigned n_udp;
	unsigned n_tcp;
	uint16_t ids[FAKE_REC];
	uint16_t sports[FAKE_REC];
	uint16_t tcp_id;
	bool edns[FAKE_REC];		 /* the query carried an OPT */
	bool do_bit[FAKE_REC];		 /* ... with DO */
	uint8_t qname[FAKE_REC][FAKE_QNAME]; /* its question name as sent (case kept), cut */
	uint32_t *port_hist;		 /* borrowed, optional: 65536 counters, hits per source port */
	uint8_t rx[FAKE_BUF];
	struct fake_pend pend[FAKE_PEND];
	struct fake_conn conn[FAKE_CONNS];
};

/* Open the sockets on 127.0.0.1 (port picked by the kernel; TCP on the same port when asked). */
int fake_start(struct fake *f, uv_loop_t *loop, bool with_tcp);
/* Close every handle (run the loop afterwards). */
void fake_close(struct fake *f);
/* The engine's view of this fake. */
void fake_server(const struct fake *f, struct nx_up_server *out, int stats);
/* A 127.0.0.1 address on which nothing listens (UDP port bound then released). */
void fake_dead_server(struct nx_up_server *out, int stats);

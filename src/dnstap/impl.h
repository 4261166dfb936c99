/*
 * dnstap internals shared by queue.c and writer.c. Not included from outside src/dnstap/.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/un.h>

#include "dnstap/dnstap.h"

/* An event in a ring: this header, then rule_len + source_len text bytes, then the message;
 * the whole record padded to 8 bytes. A header with len 0 (or fewer than its bytes left
 * before the end) means "the rest of the ring is padding": records never wrap. */
struct nx_dnstap_rec {
	uint32_t len; /* whole record, padded */
	uint16_t msg_len;
	uint8_t rule_len;
	uint8_t source_len;
	uint8_t proto;	 /* enum nx_dnstap_proto */
	uint8_t kind;	 /* enum nx_dnstap_kind, | REC_CACHED */
	uint8_t family;	 /* the client (initiator): AF_INET, AF_INET6 or 0 */
	uint8_t sfamily; /* the server (responder) */
	uint16_t port;	 /* host order */
	uint16_t sport;
	uint8_t addr[16];
	uint8_t saddr[16];
	int64_t query_us;
	int64_t response_us;
	const char *action; /* static */
	const char *reason; /* static */
};
#define NX_DNSTAP_REC_CACHED 0x80 /* in kind: answered from the cache */

struct nx_dnstap_ring {
	pthread_mutex_t lock;
	uint8_t *buf; /* owned (NX_OWNER_dnstap_queue), cap bytes, 8-aligned */
	size_t cap;
	size_t head; /* oldest record */
	size_t tail; /* where the next one goes */
	size_t used; /* bytes from head to tail, padding included */
};

/* The writer's copy of one record: the largest record + the texts' NUL-terminated copies. */
#define NX_DNSTAP_SCRATCH                                                                          \
	(sizeof(struct nx_dnstap_rec) + 2 * (NX_DNSTAP_RULE_MAX + NX_DNSTAP_SOURCE_MAX + 1) +      \
	 NX_DNSTAP_MSG_MAX + 8)

/* queue.c: ring primitives (the ring's lock is taken by the caller). */
int nx_dnstap_ring_init(struct nx_dnstap_ring *r, size_t cap);
void nx_dnstap_ring_deinit(struct nx_dnstap_ring *r);
/* Append an event; drops oldest records until it fits, returns how many were dropped, or
 * NX_ETRUNC when the event can never fit (nothing dropped). */
int nx_dnstap_ring_put(struct nx_dnstap_ring *r, const struct nx_dnstap_event *ev);
/* Copy the oldest record into out (cap >= NX_DNSTAP_SCRATCH) and remove it. Returns its length, 0
 * when empty. Pointers of the event `ev` point into `out` and `addrs` (client, server). */
size_t nx_dnstap_ring_take(struct nx_dnstap_ring *r, uint8_t *out, size_t cap,
			   struct nx_dnstap_event *ev, struct sockaddr_storage addrs[2]);
/* Bytes a record of this event takes in a ring. */
size_t nx_dnstap_rec_size(const struct nx_dnstap_event *ev);

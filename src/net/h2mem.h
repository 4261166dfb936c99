/*
 * The nghttp2 allocator of nxdns's HTTP/2 sessions (net/h2.c servers, net/h2c.c clients):
 * every block nghttp2 allocates is charged to a ledger owner, with its size kept in a header
 * in front (nghttp2_mem's free() has no size), so an HTTP/2 session's bytes are exact in the
 * ledger and per session (`bytes`).
 *
 * Blocks of map_min bytes or more get an anonymous mapping of their own instead of heap memory
 * (nghttp2's 16 KiB outbound frame buffer, the one such block of an idle session): a mapping's
 * pages are resident only once written, while a heap block usually reuses pages the TLS
 * handshake just touched and freed, so an idle DoH connection would keep all 16 KiB resident
 * for the few bytes of its SETTINGS frames. nx_h2_mem_idle() gives the pages after the first
 * back (MADV_DONTNEED) when the session has nothing left to send.
 *
 * Threading: a struct nx_h2_mem belongs to its session's thread.
 */
#pragma once

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ledger.h"

struct nx_h2_mem {
	nghttp2_mem mem;     /* handed to nghttp2 (its mem_user_data points back here) */
	enum nx_owner owner; /* charged for every block */
	size_t bytes;	     /* held by nghttp2 now, headers included */
	size_t map_min;	     /* blocks this large or larger are mmap'd; 0: never */
	void *mapped;	     /* borrowed (nghttp2's): the last mmap'd block, NULL when none */
	size_t mapped_len;   /* its size */
	bool dirty;	     /* bytes beyond its first page were sent since the last idle */
};

/* A block nghttp2 asks for that gets its own mapping (the frame buffer is 16,394 bytes). */
#define NX_H2_MEM_MAP_MIN 8192

/* Set up m for owner (map_min: 0 or NX_H2_MEM_MAP_MIN); pass &m->mem to
 * nghttp2_session_*_new3. */
void nx_h2_mem_init(struct nx_h2_mem *m, enum nx_owner owner, size_t map_min);

/* nghttp2_session_mem_send returned len bytes at data: note when they reach past the mapped
 * block's first page (an answer larger than ~4 KiB). */
void nx_h2_mem_sent(struct nx_h2_mem *m, const uint8_t *data, size_t len);

/* After such a send, release the resident pages of the mapped block but its first (a
 * madvise; the contents are dead: call it only when nghttp2 has nothing left to send and no
 * stream is open). Nothing to do, no system call, otherwise. */
void nx_h2_mem_idle(struct nx_h2_mem *m);

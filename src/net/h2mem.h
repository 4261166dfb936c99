/*
 * The nghttp2 allocator of nxdns's HTTP/2 sessions (net/h2.c servers, net/h2c.c clients):
 * every block nghttp2 allocates is charged to a ledger owner, with its size kept in a header
 * in front (nghttp2_mem's free() has no size), so an HTTP/2 session's bytes are exact in the
 * ledger and per session (`bytes`).
 *
 * Threading: a struct nx_h2_mem belongs to its session's thread.
 */
#pragma once

#include <nghttp2/nghttp2.h>
#include <stddef.h>

#include "base/ledger.h"

struct nx_h2_mem {
	nghttp2_mem mem;     /* handed to nghttp2 (its mem_user_data points back here) */
	enum nx_owner owner; /* charged for every block */
	size_t bytes;	     /* held by nghttp2 now, headers included */
};

/* Set up m for owner; pass &m->mem to nghttp2_session_*_new3. */
void nx_h2_mem_init(struct nx_h2_mem *m, enum nx_owner owner);

/*
 * Cross-file internals of the upstream module (exchange.c <-> stats.c); never included from
 * outside src/upstream/ (unit tests of the module excepted).
 *
 * Per-server query-form memory, shared by every worker's engine through the stats slot of the
 * server (atomics, relaxed: a worker that misses another's update sends one query in the old
 * form and learns again). Times are milliseconds on the monotonic clock (uv_now of any loop).
 * An index < 0 (no stats slot) remembers nothing: each attempt then falls back on its own.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * How long a server that answered FORMERR/NOTIMP/BADVERS to EDNS, and then answered the same
 * question without it, gets plain queries: Unbound's infra cache keeps a host's EDNS lameness
 * for its infra-host-ttl, 900 s by default. Long enough that a legacy server costs one extra
 * round trip per quarter hour, short enough that an upgraded one gets EDNS back.
 */
#define NX_UP_EDNS_LAME_MS (15u * 60u * 1000u)
/*
 * 0x20: consecutive case mismatches (replies that match our question except in letter case,
 * with no exact match between them) after which a server gets unrandomised names for
 * NX_UP_CAPS_OFF_MS. Three, as a spoofer would have to guess id and port three times in a row
 * to force it, while a server that does not preserve case costs at most three extra round
 * trips; the pause uses the same 15 minutes as the EDNS memory.
 */
#define NX_UP_CAPS_MISS_MAX 3
#define NX_UP_CAPS_OFF_MS (15u * 60u * 1000u)

/* A TCP/DoT/DoH connection to server idx was opened (nxdns_upstream_connections_total). */
void nx_up_stats_conn(int idx);

/* True: queries to server idx may carry EDNS now. */
bool nx_up_stats_edns_ok(int idx, uint64_t now_ms);
/* Server idx answered a plain query after rejecting EDNS: plain for NX_UP_EDNS_LAME_MS. */
void nx_up_stats_edns_lame(int idx, uint64_t now_ms);
/* True: the question name sent to server idx may be 0x20-randomised now. */
bool nx_up_stats_caps_ok(int idx, uint64_t now_ms);
/*
 * A reply of server idx to a 0x20-randomised query matched our case exactly (`exact`) or only
 * case-insensitively. True when this mismatch paused randomisation for the server (the caller
 * counts it once).
 */
bool nx_up_stats_caps_seen(int idx, bool exact, uint64_t now_ms);

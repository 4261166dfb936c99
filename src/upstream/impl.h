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
 * 0x20: a reply that matches one of our randomised queries except in letter case (the server
 * does not preserve case, or a spoofer guessed id and port but not the case) pauses
 * randomisation for that server for this long, and that query is asked again unrandomised.
 * Unbound falls back per query (its caps fallback re-asks without 0x20); remembering it per
 * server spares a server that never preserves case a second round trip per query. Forcing it
 * takes a correct guess of id and port, which is what the spoofer needed anyway without 0x20;
 * the pause uses the same 15 minutes as the EDNS memory.
 */
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
 * A reply of server idx to a 0x20-randomised query matched our question except in case: pause
 * randomisation for NX_UP_CAPS_OFF_MS. True when this mismatch paused it (the caller counts it
 * and asks again unrandomised); false when it already was paused (by another exchange since this
 * query left: the reply is then as good as one to an unrandomised query). No slot: true.
 */
bool nx_up_stats_caps_mismatch(int idx, uint64_t now_ms);

/*
 * Re-send pacing (exchange.c io_resend_udp). A re-send of a query to server idx whose timeout
 * passed: 0 when it may go now (the server's timeout doubles), else the time in ms before which
 * this server takes no re-send. Used when the server has answered nothing sent after the query.
 */
uint64_t nx_up_stats_probe(int idx, uint64_t now_ms);
/* Server idx answered a query first sent at sent_us (nx_now_mono_us). */
void nx_up_stats_heard(int idx, uint64_t sent_us);
/* True: server idx has answered a query sent after sent_us (so one sent then was lost). */
bool nx_up_stats_heard_after(int idx, uint64_t sent_us);

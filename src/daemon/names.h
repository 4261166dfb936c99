/*
 * Client names from reverse lookups, as Pi-hole's conditional forwarding gets them from the
 * router: an address whose reverse name (x.x.x.x.in-addr.arpa, ...ip6.arpa) falls in a
 * configured forward zone (upstream.forward_zones, e.g. `168.192.in-addr.arpa:
 * ["192.168.1.1"]`) is asked for its PTR there, and the answer is cached. No key of its own:
 * the zone that forwards the LAN's reverse names is what says where to ask. An address outside
 * every zone is never looked up (nothing leaves for public resolvers).
 *
 * Asynchronous and off the DNS path: the admin API asks for a name while it renders rows
 * (nx_names_get), which answers from the cache at once; a miss in a zone queues the address and
 * returns NULL, and the lookup runs on the control loop (one in flight, UDP to the zone's first
 * plain server, NX_NAMES_TIMEOUT_MS, random id, the reply checked for source, id and question).
 * Positive answers are kept for their TTL within [NX_NAMES_TTL_MIN_S, NX_NAMES_TTL_MAX_S],
 * NXDOMAIN / no PTR for NX_NAMES_NEG_TTL_S, a timeout or an error for NX_NAMES_FAIL_TTL_S.
 *
 * Memory: a fixed table of NX_NAMES_SLOTS entries (owner client_names, allocated at
 * nx_names_new); when full, the least recently used finished entry is evicted
 * (nxdns_client_names_evicted_total); a full queue drops the lookup
 * (nxdns_client_names_dropped_total), asked again on a later read.
 *
 * Threading: control thread only.
 */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include "conf/conf.h"

#define NX_NAMES_SLOTS 256	  /* addresses cached: a household's devices, with room */
#define NX_NAMES_TEXT_MAX 128	  /* a PTR name up to 127 bytes; a longer one is not shown */
#define NX_NAMES_QUEUE 32	  /* addresses waiting for their lookup */
#define NX_NAMES_TIMEOUT_MS 1500  /* a LAN router answers in ms; a dead one costs this */
#define NX_NAMES_TTL_MIN_S 60	  /* a 0-TTL answer would be asked on every page */
#define NX_NAMES_TTL_MAX_S 3600	  /* a renamed device shows within the hour */
#define NX_NAMES_NEG_TTL_S 300	  /* NXDOMAIN, NODATA */
#define NX_NAMES_FAIL_TTL_S 60	  /* timeout, SERVFAIL, a reply we cannot use */

struct nx_names;

/* conf() gives the config in effect (the zones are read at each lookup). 0 or -ENOMEM. */
int nx_names_new(uv_loop_t *loop, const struct nx_conf *(*conf)(void *ud), void *ud,
		 struct nx_names **out);
/* Close the handles; the memory goes in their close callbacks (run the loop). NULL: no-op. */
void nx_names_close(struct nx_names *n);
/*
 * The cached PTR name of the address text `addr` ("192.168.1.20", "fd00::20"), or NULL: not
 * known (yet), none, or outside every forward zone. A miss in a zone starts a lookup. The
 * pointer is valid until the next call.
 */
const char *nx_names_get(struct nx_names *n, const char *addr);
/* Does some cached address have `name` (exact)? */
bool nx_names_known(const struct nx_names *n, const char *name);

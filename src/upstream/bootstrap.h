/*
 * Bootstrap: resolve the host names of tls:// and https:// upstreams through plain DNS, once,
 * at start (and on reload), before the config is shared.
 *
 * Loading a config never touches the network; a host-named upstream is loaded with
 * `resolved == false`. This step asks the servers of upstream.bootstrap (or, when that list is
 * empty, the plain servers of upstream.servers) for A, then AAAA, over UDP with a random id,
 * checking each reply's source, id and question, and over TCP when the reply is truncated.
 * The first A address is used, else the first AAAA; a CNAME chain in the answer is followed.
 *
 * Threading: blocking (poll() with one overall deadline); call it on the control thread before
 * the config is published to the workers. It writes into the config's upstreams, which is
 * why it must run before sharing. Memory: a TCP reply buffer, charged to NX_OWNER_upstream_tcp
 * and freed before returning.
 */
#pragma once

#include <stddef.h>

#include "conf/conf.h"

/* UDP re-send interval within one server's turn: a lost datagram costs this, not the turn. */
#define NX_UP_BOOTSTRAP_RESEND_MS 400
/* Least time one server's turn gets while time remains: a turn shorter than a round trip
 * to a distant resolver would fail a server that is merely far away. */
#define NX_UP_BOOTSTRAP_TURN_MIN_MS 200

/*
 * For every upstream (upstream.servers and every forward zone's) that has a host name and no
 * address, resolve the host and fill addr (with the upstream's port) and resolved. A host
 * written several times is asked once. All of it within timeout_ms.
 * Returns 0 (also when nothing needed resolving); NX_ECONFIG with err = "file:line:col: upstream
 * host 'x' cannot be resolved through upstream.bootstrap (reason)" for the first host that
 * cannot be resolved (upstreams resolved before it keep their address); -ENOMEM.
 */
int nx_up_bootstrap_resolve(struct nx_conf *c, unsigned timeout_ms, char *err, size_t errlen);

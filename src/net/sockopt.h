/*
 * Socket creation for listeners: SO_REUSEPORT so each worker owns its own sockets and the kernel
 * spreads load; IPV6_V6ONLY so "[::]:53" and "0.0.0.0:53" coexist; packet-info on wildcard
 * binds so replies leave from the address the query came to. All fds are non-blocking, CLOEXEC.
 */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

#include "conf/conf.h"

/* Returns an fd >= 0 or -errno. */
int nx_sock_udp_listen(const struct nx_addr *a, bool reuseport, bool *pktinfo);
int nx_sock_tcp_listen(const struct nx_addr *a, bool reuseport, int backlog);
/*
 * Is the address free for us? Binds a UDP and a TCP socket WITHOUT SO_REUSEPORT and closes them:
 * with SO_REUSEPORT alone a stale instance on the same port would silently share the traffic.
 * Returns 0 or -errno (-EADDRINUSE: something else listens there).
 */
int nx_sock_probe_free(const struct nx_addr *a);
bool nx_sockaddr_is_wildcard(const struct sockaddr *sa);
/* Compare address+port. */
bool nx_sockaddr_equal(const struct sockaddr *a, const struct sockaddr *b);
/* "addr:port" / "[v6]:port" into buf; returns buf. */
const char *nx_sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap);

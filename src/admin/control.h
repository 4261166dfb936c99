/*
 * The local control socket: state_dir/control.sock, a Unix stream socket on the control loop
 * through which root and the daemon's own user read a running daemon without an API token (as
 * unbound-control and Pi-hole's CLI do): `nxdns memory` uses it by default.
 *
 * Protocol, the smallest that `curl --unix-socket` also speaks: one HTTP/1.0-style request
 * ("GET /api/memory HTTP/1.0", headers ignored, ended by an empty line), answered with
 * "HTTP/1.0 <status>", Content-Type, Content-Length and the body, then the connection closes.
 * Only GET of the read-only routes below; their bodies are produced by the same functions the
 * admin HTTP handlers call (nx_admin_memory_json, nx_admin_render_metrics, hooks.ready), so
 * the answers are the admin API's. Nothing here changes state.
 *
 * Who may connect: the file is mode 0660 (the state directory keeps its own permissions); each
 * accepted peer's SO_PEERCRED uid must be 0 or the daemon's effective uid, else the connection
 * is refused with a 403 line, logged (at most once per NX_ADMIN_CONTROL_LOG_INTERVAL_MS) and
 * counted. The file permissions are the first gate, the uid check the one that holds even when
 * a group or a mode change lets others reach the file.
 *
 * Bounds, each counted (nxdns_control_refused_total{reason}): NX_ADMIN_CONTROL_MAX_CONNECTIONS
 * open at once (connection_cap), NX_ADMIN_CONTROL_REQUEST_MAX bytes of request (oversized),
 * NX_ADMIN_CONTROL_READ_TIMEOUT_MS to send it (read_timeout), NX_ADMIN_CONTROL_WRITE_TIMEOUT_MS
 * for the peer to take the answer (write_timeout).
 *
 * Threading: the server runs on the loop given to start (the control thread); nothing is
 * thread-safe. The client (nx_admin_control_get) is a blocking call for the CLI.
 *
 * Ownership: the server state and each connection (struct, request buffer, answer) are charged
 * to NX_OWNER_admin_http and released after stop once the loop ran the close callbacks.
 */
#pragma once

#include <stddef.h>
#include <uv.h>

#include "admin/admin.h"

#define NX_ADMIN_CONTROL_SOCKET "control.sock" /* file name inside state_dir */
/* The CLI opens one at a time; a few spare for a scraper and a second shell. */
#define NX_ADMIN_CONTROL_MAX_CONNECTIONS 4
/* Request line + headers: ours is ~30 bytes, curl's ~100. More is not a read request. */
#define NX_ADMIN_CONTROL_REQUEST_MAX 1024
/* From accept to the request's empty line: a local client sends it at once. */
#define NX_ADMIN_CONTROL_READ_TIMEOUT_MS 2000
/* For the peer to read the answer (the exposition can be a few MiB on a big config). */
#define NX_ADMIN_CONTROL_WRITE_TIMEOUT_MS 10000
#define NX_ADMIN_CONTROL_BACKLOG 16
/* Refusals of other uids are logged at most this often (a local loop must not flood the log). */
#define NX_ADMIN_CONTROL_LOG_INTERVAL_MS 10000
/* Client side: the largest answer accepted (the metrics cap plus the status and headers). */
#define NX_ADMIN_CONTROL_RESPONSE_MAX (NX_METRICS_MAX_BYTES + 4096)

struct nx_admin_control;

/*
 * Listen on state_dir/control.sock on `loop`. A socket file left by a crashed run (nobody
 * accepts on it) is replaced; a live one (another daemon answers) is not: -EADDRINUSE; a file
 * that is not a socket is never removed: -EEXIST. `hooks` is copied (metrics_extra and ready
 * are used; may be NULL). `admin` (borrowed, may be NULL when the admin listener is off) adds
 * the admin server's families to /metrics, as its own /metrics does; it must outlive the
 * control server (stop this one first).
 * Returns 0 and *out, or -ENAMETOOLONG (path longer than sun_path), -ENOMEM, a libuv error;
 * each logged under "control" with the path. On error nothing stays registered on the loop
 * except a listener handle already closing (run the loop).
 */
int nx_admin_control_start(uv_loop_t *loop, const char *state_dir,
			   const struct nx_admin_hooks *hooks, struct nx_admin *admin,
			   struct nx_admin_control **out);

/*
 * Close the listener and every connection and remove the socket file. Memory is released in
 * the close callbacks (run the loop before uv_loop_close). NULL is a no-op.
 */
void nx_admin_control_stop(struct nx_admin_control *c);

/* Append the control server's families (refusals by reason, requests, open connections) to a
 * scrape; the daemon calls it from its metrics_extra hook. NULL c: nothing. */
void nx_admin_control_metrics(const struct nx_admin_control *c, struct nx_metrics_buf *mb);

/* The socket's path (NUL-terminated, borrowed for the server's life). */
const char *nx_admin_control_path(const struct nx_admin_control *c);

/*
 * Client: GET `route` over the control socket at `sock_path` (blocking, the whole exchange
 * within timeout_ms). Returns 0 with *status (the HTTP status) and *body (malloc'd, NUL-
 * terminated, *len bytes without the NUL; free() it), or -errno from socket/connect (-ENOENT:
 * no daemon there, -EACCES: the file permissions refuse us, -ECONNREFUSED: stale file),
 * NX_ETIMEDOUT, NX_ELIMIT (answer above NX_ADMIN_CONTROL_RESPONSE_MAX), NX_EMALFORMED (not an
 * answer of ours), -ENOMEM, -ENAMETOOLONG. A refused uid is an answer: status 403.
 */
int nx_admin_control_get(const char *sock_path, const char *route, int timeout_ms, unsigned *status,
			 char **body, size_t *len);

/*
 * The local control socket (control.h): a libuv pipe server on the control loop answering one
 * read-only GET per connection, and the blocking client the CLI uses.
 *
 * A connection lives from accept to the close callbacks of its two handles (the pipe and its
 * deadline timer): read the request into a fixed buffer until its empty line, answer, close.
 * One timer covers both halves: NX_ADMIN_CONTROL_READ_TIMEOUT_MS until the request is in, then
 * NX_ADMIN_CONTROL_WRITE_TIMEOUT_MS for the answer to leave.
 */
#include "admin/control.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "admin/impl.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"

/* X(id, reason label): refusals and cut connections, the rows of nxdns_control_refused_total
 * (control.h says what each bound is; peer_uid: neither root nor the daemon's user). */
#define CONTROL_REFUSALS(X)                                                                        \
	X(CONN_CAP, "connection_cap")                                                              \
	X(PEER_UID, "peer_uid")                                                                    \
	X(OVERSIZED, "oversized")                                                                  \
	X(READ_TIMEOUT, "read_timeout")                                                            \
	X(WRITE_TIMEOUT, "write_timeout")                                                          \
	X(BAD_REQUEST, "bad_request")                                                              \
	X(NO_MEMORY, "no_memory")

enum refusal {
#define REFUSAL_ENUM(id, reason) REF_##id,
	CONTROL_REFUSALS(REFUSAL_ENUM)
#undef REFUSAL_ENUM
	    REF__COUNT
};

static const char *const refusal_names[] = {
#define REFUSAL_NAME(id, reason) reason,
    CONTROL_REFUSALS(REFUSAL_NAME)
#undef REFUSAL_NAME
};

struct conn;

struct nx_admin_control {
	uv_loop_t *loop;	     /* borrowed: outlives the server */
	uv_pipe_t listener;	     /* closed at stop */
	struct nx_admin_hooks hooks; /* copied */
	struct nx_admin *admin;	     /* borrowed, may be NULL: outlives us (stopped after) */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uid_t uid;     /* ours (effective): the one non-root uid let in */
	unsigned open; /* handles not yet closed (listener + refusals + conns) */
	bool stopping;
	struct conn *conns[NX_ADMIN_CONTROL_MAX_CONNECTIONS]; /* borrowed slots: open conns */
	unsigned n_conns;
	uint64_t requests; /* answered with the route's own status */
	uint64_t refused[REF__COUNT];
	/* Accepts a connection to refuse it when no memory is left for that: libuv stops
	 * watching the listener until the pending one is accepted. */
	uv_pipe_t spare;
	bool spare_busy;      /* spare is open or closing */
	bool pending;	      /* a connection waits for the spare */
	uint64_t last_log_ms; /* uv_now of the last refusal logged (0: none yet) */
	uint64_t unlogged;    /* refusals since then not logged */
};

/* A body to send after the header: static text, a JSON dump, or a metrics buffer. */
struct body {
	const char *data; /* borrowed from whoever `release` frees, or static */
	size_t len;
	void (*release)(void *cls); /* NULL for static text */
	void *cls;
};

struct conn {
	struct nx_admin_control *ctl; /* borrowed: lives until its last handle closes */
	uv_pipe_t pipe;
	uv_timer_t timer;
	uv_write_t wr;
	unsigned open; /* of pipe and timer */
	int slot;      /* index in ctl->conns */
	bool answered; /* the answer is being written: the timer is the write deadline */
	bool closing;
	struct body body; /* owned until the close callbacks */
	size_t len;	  /* request bytes in req[] */
	char head[256];	  /* status line and headers of the answer */
	char err[256];	  /* an error answer's body (no allocation: also for no memory) */
	char req[NX_ADMIN_CONTROL_REQUEST_MAX];
};

/* A refused connection: only accepted to be told so and closed. */
struct refused {
	struct nx_admin_control *ctl;
	uv_pipe_t pipe;
};

static void maybe_free(struct nx_admin_control *c)
{
	if (c->stopping && c->open == 0) {
		nx_mem_free(NX_OWNER_admin_http, c, sizeof(*c));
	}
}

/* ---- routes ------------------------------------------------------------------------------- */

static void json_release(void *cls)
{
	char *p = cls;
	nx_mem_free(NX_OWNER_admin_http, p, strlen(p) + 1);
}

static void metrics_release(void *cls)
{
	nx_metrics_buf_free(cls);
}

/* The admin API's error document, as static-size text (no allocation: also for no memory). */
static unsigned error_body(struct conn *cn, unsigned status, const char *error, const char *msg)
{
	int n = snprintf(cn->err, sizeof(cn->err), "{\"error\":\"%s\",\"message\":\"%s\"}\n", error,
			 msg);
	cn->body =
	    (struct body){.data = cn->err, .len = (size_t)NX_MIN(n, (int)sizeof(cn->err) - 1)};
	return status;
}

static unsigned route_memory(struct conn *cn)
{
	json_t *j = nx_admin_memory_json();
	size_t n = j ? json_dumpb(j, NULL, 0, JSON_COMPACT) : 0;
	char *p = n ? nx_mem_alloc(NX_OWNER_admin_http, n + 2) : NULL;
	if (!p) {
		json_decref(j);
		cn->ctl->refused[REF_NO_MEMORY]++;
		return error_body(cn, 503, "no_memory", "no memory for the report");
	}
	json_dumpb(j, p, n, JSON_COMPACT);
	json_decref(j);
	p[n] = '\n';
	p[n + 1] = '\0';
	cn->body = (struct body){.data = p, .len = n + 1, .release = json_release, .cls = p};
	return 200;
}

static unsigned route_metrics(struct conn *cn)
{
	struct nx_admin_control *c = cn->ctl;
	struct nx_metrics_buf *mb =
	    nx_metrics_buf_create(NX_METRICS_INITIAL_BYTES, NX_METRICS_MAX_BYTES);
	if (!mb) {
		c->refused[REF_NO_MEMORY]++;
		return error_body(cn, 503, "no_memory", "no memory for the exposition");
	}
	/* What the admin listener's /metrics shows; without it, the daemon's families directly. */
	nx_admin_render_metrics(c->admin, mb);
	if (!c->admin && c->hooks.metrics_extra) {
		c->hooks.metrics_extra(mb, c->hooks.ud);
	}
	if (nx_metrics_buf_error(mb)) {
		int err = nx_metrics_buf_error(mb);
		nx_metrics_buf_free(mb);
		nx_log(NX_LOG_WARN, "control", "/metrics: %s", nx_strerror(err));
		return error_body(cn, 500, "metrics_failed", "the exposition could not be built");
	}
	size_t len;
	const char *text = nx_metrics_buf_text(mb, &len);
	cn->body = (struct body){.data = text, .len = len, .release = metrics_release, .cls = mb};
	return 200;
}

static unsigned route_healthz(struct conn *cn)
{
	const struct nx_admin_hooks *h = &cn->ctl->hooks;
	bool ready = !h->ready || h->ready(h->ud);
	cn->body = (struct body){.data = ready ? "ok\n" : "loading\n", .len = ready ? 3 : 8};
	return ready ? 200 : 503;
}

/* The pause state as GET /api/filter/pause shows it: `nxdns lookup` decides with it. */
static unsigned route_pause(struct conn *cn)
{
	const struct nx_admin_hooks *h = &cn->ctl->hooks;
	int64_t until = h->paused_until ? h->paused_until(h->ud) : 0;
	bool paused = until > nx_now_wall_ms();
	bool forever = paused && until == NX_ADMIN_PAUSE_UNTIL_RESUMED;
	char until_text[24] = "null"; /* a pause until resumed has no end */
	if (!forever) {
		snprintf(until_text, sizeof(until_text), "%lld", (long long)(paused ? until : 0));
	}
	int n = snprintf(cn->err, sizeof(cn->err),
			 "{\"paused\":%s,\"until_ms\":%s,\"until_resumed\":%s}\n",
			 paused ? "true" : "false", until_text, forever ? "true" : "false");
	cn->body =
	    (struct body){.data = cn->err, .len = (size_t)NX_MIN(n, (int)sizeof(cn->err) - 1)};
	return 200;
}

/* The allow-list: read-only routes of the admin API, answered by the same functions. */
static const struct {
	const char *path;
	const char *content_type;
	unsigned (*answer)(struct conn *cn);
} routes[] = {
    {"/api/memory", "application/json", route_memory},
    {"/metrics", NX_METRICS_CONTENT_TYPE, route_metrics},
    {"/healthz", "text/plain; charset=utf-8", route_healthz},
    {"/api/filter/pause", "application/json", route_pause},
};

static const char *reason_phrase(unsigned status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 500:
		return "Internal Server Error";
	default:
		return "Service Unavailable";
	}
}

/*
 * Parse the request line ("GET /path[?query] [HTTP/1.x]") and produce the answer: sets
 * cn->body, returns the status and *content_type.
 */
static unsigned answer(struct conn *cn, const char **content_type)
{
	*content_type = "application/json";
	char *eol = memchr(cn->req, '\n', cn->len);
	size_t n = eol ? (size_t)(eol - cn->req) : 0;
	if (n && cn->req[n - 1] == '\r') {
		n--;
	}
	cn->req[n] = '\0'; /* the request line, as a string (the rest is headers, ignored) */
	char *sp = strchr(cn->req, ' ');
	if (!sp || sp == cn->req) {
		cn->ctl->refused[REF_BAD_REQUEST]++;
		return error_body(cn, 400, "bad_request", "expected: GET <path> HTTP/1.0");
	}
	*sp = '\0';
	char *target = sp + 1;
	target[strcspn(target, " ?")] = '\0';
	if (strcmp(cn->req, "GET") != 0) {
		cn->ctl->refused[REF_BAD_REQUEST]++;
		return error_body(cn, 405, "method_not_allowed",
				  "the control socket only answers GET (read-only routes)");
	}
	for (size_t i = 0; i < NX_ARRAY_LEN(routes); i++) {
		if (strcmp(target, routes[i].path) == 0) {
			*content_type = routes[i].content_type;
			unsigned status = routes[i].answer(cn);
			if (status == 200 || status == 503) {
				cn->ctl->requests++;
			}
			return status;
		}
	}
	cn->ctl->refused[REF_BAD_REQUEST]++;
	return error_body(cn, 404, "not_found",
			  "the control socket answers GET /api/memory, /metrics and /healthz");
}

/* ---- connections -------------------------------------------------------------------------- */

static void conn_closed(uv_handle_t *h)
{
	struct conn *cn = h->data;
	if (--cn->open) {
		return;
	}
	struct nx_admin_control *c = cn->ctl;
	if (cn->body.release) {
		cn->body.release(cn->body.cls);
	}
	nx_mem_free(NX_OWNER_admin_http, cn, sizeof(*cn));
	c->open--;
	maybe_free(c);
}

static void conn_close(struct conn *cn)
{
	if (cn->closing) {
		return;
	}
	cn->closing = true;
	struct nx_admin_control *c = cn->ctl;
	c->conns[cn->slot] = NULL;
	c->n_conns--;
	uv_close((uv_handle_t *)&cn->timer, conn_closed);
	uv_close((uv_handle_t *)&cn->pipe, conn_closed);
}

static void on_deadline(uv_timer_t *t)
{
	struct conn *cn = t->data;
	cn->ctl->refused[cn->answered ? REF_WRITE_TIMEOUT : REF_READ_TIMEOUT]++;
	conn_close(cn);
}

static void on_written(uv_write_t *wr, int status)
{
	conn_close(wr->data);
}

static void respond(struct conn *cn)
{
	uv_read_stop((uv_stream_t *)&cn->pipe);
	const char *type;
	unsigned status = answer(cn, &type);
	int n = snprintf(cn->head, sizeof(cn->head),
			 "HTTP/1.0 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
			 status, reason_phrase(status), type, cn->body.len);
	uv_buf_t bufs[2] = {
	    uv_buf_init(cn->head, (unsigned)NX_MIN(n, (int)sizeof(cn->head) - 1)),
	    uv_buf_init((char *)cn->body.data, (unsigned)cn->body.len),
	};
	cn->answered = true;
	uv_timer_start(&cn->timer, on_deadline, NX_ADMIN_CONTROL_WRITE_TIMEOUT_MS, 0);
	cn->wr.data = cn;
	if (uv_write(&cn->wr, (uv_stream_t *)&cn->pipe, bufs, 2, on_written) < 0) {
		conn_close(cn);
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct conn *cn = h->data;
	buf->base = cn->req + cn->len;
	buf->len = sizeof(cn->req) - 1 - cn->len; /* one byte kept for the line's NUL */
}

/* The request ends at its empty line (CRLF CRLF, or LF LF from a hand-typed client). */
static bool request_complete(const struct conn *cn)
{
	for (size_t i = 1; i < cn->len; i++) {
		if (cn->req[i] == '\n' && (cn->req[i - 1] == '\n' ||
					   (i >= 3 && cn->req[i - 1] == '\r' &&
					    cn->req[i - 2] == '\n' && cn->req[i - 3] == '\r'))) {
			return true;
		}
	}
	return false;
}

#define STR_(x) #x
#define STR(x) STR_(x)
static const char too_large[] =
    "HTTP/1.0 431 Request Header Fields Too Large\r\n"
    "Content-Type: application/json\r\nConnection: close\r\n\r\n"
    "{\"error\":\"too_large\",\"message\":\"the request is limited to " STR(
	NX_ADMIN_CONTROL_REQUEST_MAX) " bytes\"}\n";

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct conn *cn = s->data;
	if (nread < 0) {
		conn_close(cn); /* gone before a whole request: nothing to answer */
		return;
	}
	cn->len += (size_t)nread;
	if (request_complete(cn)) {
		respond(cn);
	} else if (cn->len >= sizeof(cn->req) - 1) {
		cn->ctl->refused[REF_OVERSIZED]++;
		uv_buf_t b = uv_buf_init((char *)too_large, sizeof(too_large) - 1);
		uv_try_write(s, &b, 1); /* best effort: the connection closes either way */
		conn_close(cn);
	}
}

static void log_refusal(struct nx_admin_control *c, uid_t uid, pid_t pid)
{
	uint64_t now = uv_now(c->loop);
	if (c->last_log_ms && now - c->last_log_ms < NX_ADMIN_CONTROL_LOG_INTERVAL_MS) {
		c->unlogged++;
		return;
	}
	nx_log(NX_LOG_WARN, "control",
	       "%s: refused uid %lu (pid %ld): only root and the daemon's user (uid %lu) may use "
	       "it (%llu more refusals not logged since the last)",
	       c->path, (unsigned long)uid, (long)pid, (unsigned long)c->uid,
	       (unsigned long long)c->unlogged);
	c->last_log_ms = now ? now : 1;
	c->unlogged = 0;
}

static void refused_closed(uv_handle_t *h)
{
	struct refused *r = h->data;
	struct nx_admin_control *c = r->ctl;
	nx_mem_free(NX_OWNER_admin_http, r, sizeof(*r));
	c->open--;
	maybe_free(c);
}

static const char busy_text[] =
    "HTTP/1.0 503 Service Unavailable\r\n"
    "Content-Type: application/json\r\nConnection: close\r\n\r\n"
    "{\"error\":\"busy\",\"message\":\"too many control connections\"}\n";
static const char forbidden_text[] =
    "HTTP/1.0 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    "{\"error\":\"forbidden\",\"message\":\"the control socket is for root and the daemon's "
    "user; use the admin API with a token\"}\n";

/* Tell a refused peer why (without waiting for it: one try, a few bytes) and close. */
static void refuse(uv_stream_t *s, const char *text, size_t len, uv_close_cb cb)
{
	uv_buf_t b = uv_buf_init((char *)text, (unsigned)len);
	uv_try_write(s, &b, 1);
	uv_close((uv_handle_t *)s, cb);
}

static uid_t peer_uid(uv_pipe_t *p, pid_t *pid)
{
	uv_os_fd_t fd;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (uv_fileno((uv_handle_t *)p, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		*pid = 0;
		return (uid_t)-1; /* unknown: refused like a stranger */
	}
	*pid = cr.pid;
	return cr.uid;
}

static void accept_refused(struct nx_admin_control *c, enum refusal why);

static void spare_closed(uv_handle_t *h)
{
	struct nx_admin_control *c = h->data;
	c->spare_busy = false;
	c->open--;
	if (c->pending && !c->stopping) {
		c->pending = false;
		accept_refused(c, REF_NO_MEMORY);
	}
	maybe_free(c);
}

/* Over the cap or out of memory: the connection still has to be accepted to be closed. */
static void accept_refused(struct nx_admin_control *c, enum refusal why)
{
	c->refused[why]++;
	struct refused *r = nx_mem_alloc(NX_OWNER_admin_http, sizeof(*r));
	uv_pipe_t *p = r ? &r->pipe : &c->spare;
	uv_close_cb cb = r ? refused_closed : spare_closed;
	if (!r && c->spare_busy) {
		c->pending = true; /* accepted when the spare is closed */
		return;
	}
	if (r) {
		r->ctl = c;
	} else {
		c->spare_busy = true;
	}
	uv_pipe_init(c->loop, p, 0);
	p->data = r ? (void *)r : (void *)c;
	c->open++;
	if (uv_accept((uv_stream_t *)&c->listener, (uv_stream_t *)p) < 0) {
		uv_close((uv_handle_t *)p, cb);
		return;
	}
	refuse((uv_stream_t *)p, busy_text, sizeof(busy_text) - 1, cb);
}

static void on_connection(uv_stream_t *server, int status)
{
	struct nx_admin_control *c = server->data;
	if (status < 0) {
		nx_log(NX_LOG_WARN, "control", "accept on %s: %s", c->path, uv_strerror(status));
		return;
	}
	if (c->n_conns >= NX_ADMIN_CONTROL_MAX_CONNECTIONS) {
		accept_refused(c, REF_CONN_CAP);
		return;
	}
	struct conn *cn = nx_mem_calloc(NX_OWNER_admin_http, 1, sizeof(*cn));
	if (!cn) {
		accept_refused(c, REF_NO_MEMORY);
		return;
	}
	cn->ctl = c;
	uv_pipe_init(c->loop, &cn->pipe, 0);
	uv_timer_init(c->loop, &cn->timer);
	cn->pipe.data = cn->timer.data = cn;
	cn->open = 2;
	c->open++;
	for (cn->slot = 0; c->conns[cn->slot]; cn->slot++) {
	}
	c->conns[cn->slot] = cn;
	c->n_conns++;
	if (uv_accept(server, (uv_stream_t *)&cn->pipe) < 0) {
		conn_close(cn);
		return;
	}
	pid_t pid;
	uid_t uid = peer_uid(&cn->pipe, &pid);
	if (uid != 0 && uid != c->uid) {
		c->refused[REF_PEER_UID]++;
		log_refusal(c, uid, pid);
		uv_buf_t b = uv_buf_init((char *)forbidden_text, sizeof(forbidden_text) - 1);
		uv_try_write((uv_stream_t *)&cn->pipe, &b, 1);
		conn_close(cn);
		return;
	}
	uv_timer_start(&cn->timer, on_deadline, NX_ADMIN_CONTROL_READ_TIMEOUT_MS, 0);
	if (uv_read_start((uv_stream_t *)&cn->pipe, on_alloc, on_read) < 0) {
		conn_close(cn);
	}
}

/* ---- start / stop ------------------------------------------------------------------------- */

/*
 * A socket file already there: left by a crashed run (nobody accepts: removed) or a live
 * daemon's with the same state_dir (kept, refused). Anything else is not ours to remove.
 */
static int clear_stale(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		return errno == ENOENT ? 0 : -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		nx_log(NX_LOG_ERR, "control", "%s exists and is not a socket: not replaced", path);
		return -EEXIST;
	}
	/* non-blocking: a live server with a full backlog answers EAGAIN instead of blocking */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		return -errno;
	}
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	memcpy(sun.sun_path, path, strlen(path) + 1);
	int live = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 || errno == EAGAIN;
	close(fd);
	if (live) {
		nx_log(NX_LOG_ERR, "control",
		       "%s: another process answers on it (a second nxdns "
		       "with this state_dir?)",
		       path);
		return -EADDRINUSE;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		return -errno;
	}
	nx_log(NX_LOG_INFO, "control", "replaced the stale socket %s", path);
	return 0;
}

static void listener_closed(uv_handle_t *h)
{
	struct nx_admin_control *c = h->data;
	c->open--;
	maybe_free(c);
}

int nx_admin_control_start(uv_loop_t *loop, const char *state_dir,
			   const struct nx_admin_hooks *hooks, struct nx_admin *admin,
			   struct nx_admin_control **out)
{
	struct nx_admin_control *c = nx_mem_calloc(NX_OWNER_admin_http, 1, sizeof(*c));
	if (!c) {
		return -ENOMEM;
	}
	int n = snprintf(c->path, sizeof(c->path), "%s/%s", state_dir, NX_ADMIN_CONTROL_SOCKET);
	if (n < 0 || (size_t)n >= sizeof(c->path)) {
		nx_log(NX_LOG_ERR, "control", "%s/%s: longer than a socket path may be (%zu bytes)",
		       state_dir, NX_ADMIN_CONTROL_SOCKET, sizeof(c->path) - 1);
		nx_mem_free(NX_OWNER_admin_http, c, sizeof(*c));
		return -ENAMETOOLONG;
	}
	c->loop = loop;
	c->admin = admin;
	c->uid = geteuid();
	if (hooks) {
		c->hooks = *hooks;
	}
	int rc = clear_stale(c->path);
	if (rc < 0) {
		if (rc != -EEXIST && rc != -EADDRINUSE) {
			nx_log(NX_LOG_ERR, "control", "%s: %s", c->path, nx_strerror(rc));
		}
		nx_mem_free(NX_OWNER_admin_http, c, sizeof(*c));
		return rc;
	}
	const char *step = "uv_pipe_init";
	rc = uv_pipe_init(loop, &c->listener, 0);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "control", "%s: %s: %s", c->path, step, uv_strerror(rc));
		nx_mem_free(NX_OWNER_admin_http, c, sizeof(*c));
		return rc;
	}
	c->listener.data = c;
	c->open = 1;
	step = "bind";
	rc = uv_pipe_bind(&c->listener, c->path);
	/* 0660 whatever the umask: root and the daemon's user (and group) reach the file; the
	 * peer uid check below decides. The directory's permissions are the operator's. */
	if (!rc) {
		step = "chmod";
		rc = chmod(c->path, 0660) < 0 ? -errno : 0;
	}
	if (!rc) {
		step = "listen";
		rc =
		    uv_listen((uv_stream_t *)&c->listener, NX_ADMIN_CONTROL_BACKLOG, on_connection);
	}
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "control", "cannot listen on %s: %s: %s", c->path, step,
		       uv_strerror(rc));
		if (strcmp(step, "bind") != 0) {
			unlink(c->path);
		}
		c->stopping = true;
		uv_close((uv_handle_t *)&c->listener, listener_closed);
		return rc;
	}
	nx_log(NX_LOG_INFO, "control", "control socket %s (root and uid %lu)", c->path,
	       (unsigned long)c->uid);
	*out = c;
	return 0;
}

void nx_admin_control_stop(struct nx_admin_control *c)
{
	if (!c || c->stopping) {
		return;
	}
	c->stopping = true;
	for (size_t i = 0; i < NX_ARRAY_LEN(c->conns); i++) {
		if (c->conns[i]) {
			conn_close(c->conns[i]);
		}
	}
	unlink(c->path);
	uv_close((uv_handle_t *)&c->listener, listener_closed);
}

const char *nx_admin_control_path(const struct nx_admin_control *c)
{
	return c->path;
}

void nx_admin_control_metrics(const struct nx_admin_control *c, struct nx_metrics_buf *mb)
{
	if (!c) {
		return;
	}
	nx_metrics_family(mb, "nxdns_control_requests_total", NX_METRIC_COUNTER,
			  "Requests answered on the local control socket (state_dir/control.sock)");
	nx_metrics_sample_u64(mb, "nxdns_control_requests_total", c->requests, NULL);
	nx_metrics_family(mb, "nxdns_control_refused_total", NX_METRIC_COUNTER,
			  "Control socket connections refused or cut, and requests refused, by "
			  "reason");
	for (int i = 0; i < REF__COUNT; i++) {
		nx_metrics_sample_u64(mb, "nxdns_control_refused_total", c->refused[i], "reason",
				      refusal_names[i], NULL);
	}
	nx_metrics_family(mb, "nxdns_control_connections", NX_METRIC_GAUGE,
			  "Open control socket connections");
	nx_metrics_sample_u64(mb, "nxdns_control_connections", c->n_conns, NULL);
}

/* ---- client ------------------------------------------------------------------------------- */

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for `events` on fd until the deadline: 0, or NX_ETIMEDOUT / -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ms();
		if (left <= 0) {
			return NX_ETIMEDOUT;
		}
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)left);
		if (n > 0) {
			return 0;
		}
		if (n < 0 && errno != EINTR) {
			return -errno;
		}
	}
}

/* Status line and headers → status and the body's offset. */
static int parse_answer(const char *buf, size_t len, unsigned *status, size_t *body_off)
{
	unsigned minor, st;
	char sp;
	if (len < 12 || sscanf(buf, "HTTP/1.%1u %3u%c", &minor, &st, &sp) != 3 || sp != ' ' ||
	    st < 100 || st > 599) {
		return NX_EMALFORMED;
	}
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	if (!end) {
		return NX_EMALFORMED;
	}
	*status = st;
	*body_off = (size_t)(end + 4 - buf);
	return 0;
}

int nx_admin_control_get(const char *sock_path, const char *route, int timeout_ms, unsigned *status,
			 char **body, size_t *len)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(sock_path) >= sizeof(sun.sun_path)) {
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, sock_path, strlen(sock_path) + 1);
	char req[512];
	int rn = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", route);
	if (rn < 0 || (size_t)rn >= sizeof(req)) {
		return NX_ELIMIT;
	}
	int64_t deadline = mono_ms() + timeout_ms;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		return -errno;
	}
	char *buf = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		/* a local connect completes at once or not at all (EAGAIN: backlog full) */
		rc = -errno;
		goto out;
	}
	for (size_t sent = 0; sent < (size_t)rn;) {
		ssize_t w = send(fd, req + sent, (size_t)rn - sent, MSG_NOSIGNAL);
		if (w > 0) {
			sent += (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			if ((rc = wait_fd(fd, POLLOUT, deadline)) < 0) {
				goto out;
			}
		} else {
			break; /* EPIPE: refused before it read; its answer says why */
		}
	}
	for (;;) {
		if (n + 4096 + 1 > cap) {
			size_t ncap = cap ? cap * 2 : 16384;
			char *p = realloc(buf, ncap);
			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			buf = p;
			cap = ncap;
		}
		ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
		if (r > 0) {
			n += (size_t)r;
			if (n > NX_ADMIN_CONTROL_RESPONSE_MAX) {
				rc = NX_ELIMIT;
				goto out;
			}
		} else if (r == 0 || errno == ECONNRESET) {
			break; /* the server closes after the answer (a reset too, if it refused us
				* before reading our request) */
		} else if (errno == EAGAIN) {
			if ((rc = wait_fd(fd, POLLIN, deadline)) < 0) {
				goto out;
			}
		} else if (errno != EINTR) {
			rc = -errno;
			goto out;
		}
	}
	if (buf) {
		buf[n] = '\0'; /* cap keeps a byte for it */
	}
	size_t off;
	rc = buf ? parse_answer(buf, n, status, &off) : NX_EMALFORMED;
	if (rc == 0) {
		memmove(buf, buf + off, n - off);
		buf[n - off] = '\0';
		*body = buf;
		*len = n - off;
		buf = NULL;
	}
out:
	free(buf);
	close(fd);
	return rc;
}

/*
 * The admin HTTP server: our listen socket, libmicrohttpd without threads, driven by libuv.
 *
 * MHD runs in "external epoll" mode: its epoll fd is watched by a uv_poll (readable when any of
 * MHD's sockets is ready) and after every MHD_run() a uv_timer is re-armed from MHD_get_timeout()
 * (connection timeouts, and 0 when MHD still has buffered work). Requests are dispatched through
 * the route table in routes.c once complete; bodies are collected up to NX_ADMIN_MAX_BODY.
 */
#include "admin/admin.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <sodium.h>

#include "admin/impl.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "net/tls.h"
#include "sync/sync.h"

/* ---- replies ------------------------------------------------------------------------------ */

/* A copied body: one ledger-charged allocation that MHD frees through copy_free(). */
struct copy {
	size_t size; /* bytes in data[] */
	char data[];
};

static void copy_free(void *cls)
{
	struct copy *c = cls;
	nx_mem_free(NX_OWNER_admin_http, c, sizeof(*c) + c->size);
}

static struct copy *copy_new(size_t size)
{
	struct copy *c = nx_mem_alloc(NX_OWNER_admin_http, sizeof(*c) + size);
	if (c) {
		c->size = size;
	}
	return c;
}

static void count_status(struct nx_admin *a, unsigned status)
{
	static const enum nx_admin_counter by_class[] = {
	    NX_ADMIN_CTR_RESP_2XX, NX_ADMIN_CTR_RESP_2XX, NX_ADMIN_CTR_RESP_2XX,
	    NX_ADMIN_CTR_RESP_3XX, NX_ADMIN_CTR_RESP_4XX, NX_ADMIN_CTR_RESP_5XX,
	};
	unsigned c = status / 100;
	a->ctr[by_class[c < NX_ARRAY_LEN(by_class) ? c : 5]]++;
}

/* Add the common headers and queue `r` (always destroyed here). */
static int queue(struct nx_admin_req *req, unsigned status, struct MHD_Response *r)
{
	if (!r) {
		return -ENOMEM;
	}
	if (req->replied) {
		MHD_destroy_response(r);
		return NX_EMALFORMED;
	}
	/* Admin answers are live state: never cached by a browser or a proxy. */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (req->set_cookie[0]) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, req->set_cookie);
	}
	if (req->disposition[0]) {
		MHD_add_response_header(r, "Content-Disposition", req->disposition);
	}
	if (req->retry_after_s) {
		char v[16];
		snprintf(v, sizeof(v), "%u", req->retry_after_s);
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, v);
	}
	enum MHD_Result ok = MHD_queue_response(req->conn, status, r);
	MHD_destroy_response(r);
	if (ok != MHD_YES) {
		return -EIO;
	}
	req->replied = true;
	count_status(req->admin, status);
	return 0;
}

static struct MHD_Response *response(const char *content_type, const void *data, size_t len,
				     void (*free_cb)(void *), void *cls)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer_with_free_callback_cls(len, (void *)data, free_cb, cls);
	if (!r) {
		free_cb(cls);
		return NULL;
	}
	if (content_type &&
	    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES) {
		MHD_destroy_response(r); /* frees the buffer through free_cb */
		return NULL;
	}
	return r;
}

int nx_admin_reply_response(struct nx_admin_req *req, unsigned status, struct MHD_Response *r)
{
	return queue(req, status, r);
}

int nx_admin_reply_static(struct nx_admin_req *req, unsigned status, const char *json)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_PERSISTENT);
	if (r && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") !=
		     MHD_YES) {
		MHD_destroy_response(r);
		r = NULL;
	}
	return queue(req, status, r);
}

int nx_admin_reply_buffer(struct nx_admin_req *req, unsigned status, const char *content_type,
			  const void *data, size_t len, void (*free_cb)(void *cls), void *cls)
{
	return queue(req, status, response(content_type, data, len, free_cb, cls));
}

int nx_admin_reply(struct nx_admin_req *req, unsigned status, const char *content_type,
		   const void *data, size_t len)
{
	struct copy *c = copy_new(len);
	if (!c) {
		return -ENOMEM;
	}
	memcpy(c->data, data, len);
	return nx_admin_reply_buffer(req, status, content_type, c->data, len, copy_free, c);
}

/* Serialise `body` (reference stolen) into a charged copy with a trailing newline. */
static struct MHD_Response *json_response(json_t *body)
{
	size_t n = body ? json_dumpb(body, NULL, 0, JSON_COMPACT) : 0;
	struct copy *c = n ? copy_new(n + 1) : NULL;
	if (c) {
		json_dumpb(body, c->data, n, JSON_COMPACT);
		c->data[n] = '\n';
	}
	json_decref(body);
	if (!c) {
		return NULL;
	}
	return response("application/json", c->data, c->size, copy_free, c);
}

int nx_admin_reply_json(struct nx_admin_req *req, unsigned status, json_t *body)
{
	return queue(req, status, json_response(body));
}

#define ERROR_MESSAGE_MAX 512 /* bytes of an error message; longer ones are truncated */

static struct MHD_Response *error_response(const char *error, const char *field, const char *fmt,
					   va_list ap) __attribute__((format(printf, 3, 0)));

static struct MHD_Response *error_response(const char *error, const char *field, const char *fmt,
					   va_list ap)
{
	char msg[ERROR_MESSAGE_MAX];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	json_t *o = json_object();
	if (o) {
		json_object_set_new(o, "error", json_string(error));
		json_object_set_new(o, "message", json_string(msg));
		if (field) {
			json_object_set_new(o, "field", json_string(field));
		}
	}
	return json_response(o);
}

static struct MHD_Response *error_response_l(const char *error, const char *field, const char *fmt,
					     ...) __attribute__((format(printf, 3, 4)));

static struct MHD_Response *error_response_l(const char *error, const char *field, const char *fmt,
					     ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct MHD_Response *r = error_response(error, field, fmt, ap);
	va_end(ap);
	return r;
}

int nx_admin_reply_error(struct nx_admin_req *req, unsigned status, const char *error,
			 const char *field, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct MHD_Response *r = error_response(error, field, fmt, ap);
	va_end(ap);
	return queue(req, status, r);
}

const char *nx_admin_req_arg(const struct nx_admin_req *req, const char *key)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *nx_admin_req_header(const struct nx_admin_req *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* ---- dispatch ----------------------------------------------------------------------------- */

static bool path_matches(const struct nx_admin_route *r, const char *path)
{
	if (r->match == NX_ADMIN_PREFIX) {
		return strncmp(path, r->path, strlen(r->path)) == 0;
	}
	return strcmp(path, r->path) == 0;
}

static bool method_matches(const struct nx_admin_route *r, const char *method)
{
	return strcmp(r->method, method) == 0 ||
	       (strcmp(r->method, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

static void reply_not_allowed(struct nx_admin_req *req)
{
	char allow[64] = "";
	for (size_t i = 0; i < nx_admin_n_routes; i++) {
		const struct nx_admin_route *r = &nx_admin_routes[i];
		if (path_matches(r, req->path) && !strstr(allow, r->method)) {
			size_t n = strlen(allow);
			snprintf(allow + n, sizeof(allow) - n, "%s%s%s", n ? ", " : "", r->method,
				 strcmp(r->method, "GET") ? "" : ", HEAD");
		}
	}
	struct MHD_Response *r = error_response_l(
	    "method_not_allowed", NULL, "%s is not allowed on %s", req->method, req->path);
	if (r) {
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	}
	queue(req, 405, r);
}

static const struct nx_admin_route *find_route(const struct nx_admin_req *req, bool *path_seen)
{
	*path_seen = false;
	for (size_t i = 0; i < nx_admin_n_routes; i++) {
		const struct nx_admin_route *r = &nx_admin_routes[i];
		if (path_matches(r, req->path)) {
			*path_seen = true;
			if (method_matches(r, req->method)) {
				return r;
			}
		}
	}
	return NULL;
}

/* One check for every edit route: a replica's synced keys are the primary's. true when
 * answered 409. */
static bool refused_synced(struct nx_admin_req *req)
{
	const struct nx_conf *sc = nx_admin_conf(req->admin);
	const char *synced = sc && sc->sync_primary
				 ? nx_sync_route_synced(req->method, req->path, req->body)
				 : NULL;
	if (!synced) {
		return false;
	}
	req->admin->ctr[NX_ADMIN_CTR_SYNC_REFUSED]++;
	nx_admin_reply_error(req, 409, "synced_from_primary", NULL,
			     "%s follows the primary %s (sync.primary): change it there", synced,
			     sc->sync_primary);
	return true;
}

static void dispatch(struct nx_admin_req *req)
{
	if (req->upload && req->body_too_large) {
		nx_admin_reply_error(req, 413, "body_too_large", NULL,
				     "uploads are limited to %llu bytes", NX_ADMIN_UPLOAD_MAX);
		return;
	}
	if (req->upload_failed) {
		nx_admin_reply_error(req, 500, "upload_failed", NULL,
				     "the upload could not be written to state_dir (disk full?)");
		return;
	}
	if (req->body_too_large) {
		nx_admin_reply_error(req, 413, "body_too_large", NULL,
				     "request bodies are limited to %d bytes", NX_ADMIN_MAX_BODY);
		return;
	}
	if (req->body_no_memory) {
		nx_admin_reply_error(req, 503, "no_memory", NULL, "no memory for the request body");
		return;
	}
	bool path_seen;
	req->route = find_route(req, &path_seen);
	if (!req->route) {
		if (path_seen) {
			reply_not_allowed(req);
		} else {
			nx_admin_reply_error(req, 404, "not_found", NULL, "no route for %s %s",
					     req->method, req->path);
		}
		return;
	}
	if (!nx_admin_authorize(req)) {
		return; /* 401 or 403 answered */
	}
	if (refused_synced(req)) {
		return;
	}
	if (req->admin->busy && strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0 &&
	    strcmp(req->path, "/api/auth/login") != 0 && strcmp(req->path, "/api/auth/logout") != 0) {
		/* answered from inside a rebuild (nx_admin_service): a change could start another
		 * (logging in and out only touch the session table) */
		struct MHD_Response *r = error_response_l(
		    "busy", NULL, "the block lists are being rebuilt; retry in a moment");
		if (r) {
			MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
		}
		queue(req, 503, r);
		return;
	}
	int rc = req->route->handler(req);
	if (req->replied) {
		return;
	}
	if (rc == 0 && nx_fails_assert(req->replied)) {
		rc = NX_EMALFORMED;
	}
	nx_log(NX_LOG_WARN, "admin", "%s %s: %s", req->method, req->path, nx_strerror(rc));
	nx_admin_reply_error(req, 500, "internal", NULL, "%s", nx_strerror(rc));
}

/*
 * The headers of POST NX_ADMIN_UPLOAD_PATH: authorize now, then open the file the body goes
 * to. false when answered (refused, too large, no file).
 */
static bool upload_begin(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	bool seen;
	req->route = find_route(req, &seen);
	if (!req->route || !nx_admin_authorize(req)) {
		if (!req->replied) {
			dispatch(req);
		}
		return false;
	}
	if (refused_synced(req)) {
		return false; /* a replica's restore: refused before the body is stored */
	}
	const char *cl = nx_admin_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > NX_ADMIN_UPLOAD_MAX) {
		a->ctr[NX_ADMIN_CTR_REF_BODY]++;
		req->upload_fd = -1; /* nothing opened: dispatch only needs the upload's message */
		req->upload = req->body_too_large = true;
		dispatch(req);
		return false;
	}
	const struct nx_conf *c = nx_admin_conf(a);
	char path[4096];
	if (!c ||
	    snprintf(path, sizeof(path), "%s/.upload-XXXXXX", c->state_dir) >= (int)sizeof(path)) {
		nx_admin_reply_error(req, 503, "not_configured", NULL,
				     "no state_dir for the upload");
		return false;
	}
	req->upload_path = nx_mem_strdup(NX_OWNER_admin_http, path);
	int fd = req->upload_path ? mkostemp(req->upload_path, O_CLOEXEC) : -1;
	if (fd < 0) {
		nx_log(NX_LOG_WARN, "admin", "%s: cannot store an upload in %s: %s", req->path,
		       c->state_dir, strerror(errno));
		nx_admin_reply_error(req, 500, "upload_failed", NULL,
				     "cannot store the upload in state_dir: %s", strerror(errno));
		return false;
	}
	req->upload = true;
	req->upload_fd = fd;
	return true;
}

static void upload_write(struct nx_admin_req *req, const char *data, size_t n)
{
	if (req->body_too_large || req->upload_failed) {
		return;
	}
	if (n > NX_ADMIN_UPLOAD_MAX - req->upload_len) {
		req->body_too_large = true;
		req->admin->ctr[NX_ADMIN_CTR_REF_BODY]++;
		return;
	}
	while (n) {
		ssize_t w = write(req->upload_fd, data, n);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			req->upload_failed = true;
			return;
		}
		data += w;
		n -= (size_t)w;
		req->upload_len += (uint64_t)w;
	}
}

/* Append upload data; past the limit remember it and drop the rest (answered 413 at the end). */
static void collect_body(struct nx_admin_req *req, const char *data, size_t n)
{
	if (req->upload) {
		upload_write(req, data, n);
		return;
	}
	if (req->body_too_large || req->body_no_memory) {
		return;
	}
	if (n > NX_ADMIN_MAX_BODY - req->body_len) {
		req->body_too_large = true;
		req->admin->ctr[NX_ADMIN_CTR_REF_BODY]++;
		return;
	}
	if (req->body_len + n + 1 > req->body_cap) {
		size_t cap = NX_MAX(req->body_cap * 2, (size_t)1024);
		cap = NX_MIN(NX_MAX(cap, req->body_len + n + 1), (size_t)NX_ADMIN_MAX_BODY + 1);
		char *b = nx_mem_realloc(NX_OWNER_admin_http, req->body, req->body_cap, cap);
		if (!b) {
			req->body_no_memory = true; /* the rest is drained, 503 at the end */
			req->admin->ctr[NX_ADMIN_CTR_REF_NOMEM]++;
			return;
		}
		req->body = b;
		req->body_cap = cap;
	}
	memcpy(req->body + req->body_len, data, n);
	req->body_len += n;
	req->body[req->body_len] = '\0';
}

/*
 * The request line and headers are in: from now on the connection gets the keep-alive idle
 * time-out instead of the shorter header one it started with (MHD_OPTION_CONNECTION_TIMEOUT).
 */
static void request_arrived(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct nx_admin_conn *c = ci ? ci->socket_context : NULL;
	if (c && !c->got_request) {
		c->got_request = true;
		MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
					  (unsigned)NX_ADMIN_IDLE_TIMEOUT_S);
	}
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **con_cls)
{
	struct nx_admin *a = cls;
	struct nx_admin_req *req = *con_cls;
	if (!req) {
		request_arrived(conn);
		req = nx_mem_calloc(NX_OWNER_admin_http, 1, sizeof(*req));
		if (!req) {
			a->ctr[NX_ADMIN_CTR_REF_NOMEM]++;
			return MHD_NO; /* closes the connection */
		}
		req->admin = a;
		req->conn = conn;
		req->method = method;
		req->path = url;
		*con_cls = req;
		if (!strcmp(method, "POST") && !strcmp(url, NX_ADMIN_UPLOAD_PATH)) {
			return upload_begin(req) || req->replied ? MHD_YES : MHD_NO;
		}
		/* A declared oversized body is refused before it is sent (no 100-continue). */
		const char *cl = nx_admin_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > NX_ADMIN_MAX_BODY) {
			req->body_too_large = true;
			a->ctr[NX_ADMIN_CTR_REF_BODY]++;
			dispatch(req);
			return req->replied ? MHD_YES : MHD_NO;
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		collect_body(req, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (!req->replied) {
		dispatch(req);
	}
	return req->replied ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct nx_admin_req *req = *con_cls;
	if (!req) {
		return;
	}
	nx_mem_free(NX_OWNER_admin_http, req->body, req->body_cap);
	if (req->upload && req->upload_fd >= 0) {
		close(req->upload_fd);
	}
	if (req->upload_path) {
		unlink(req->upload_path); /* a no-op once the restore consumed it */
		nx_mem_free(NX_OWNER_admin_http, req->upload_path, strlen(req->upload_path) + 1);
	}
	nx_mem_free(NX_OWNER_admin_http, req, sizeof(*req));
	*con_cls = NULL;
}

/* The per-address key: an IPv4 address (also IPv4-mapped), or the /64 of an IPv6 one (a host
 * owns its /64, as for the login limiter). Returns the key length, 0 for another family. */
static uint8_t addr_key(const struct sockaddr *sa, uint8_t key[8])
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (sa && sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa && sa->sa_family == AF_INET6) {
		const uint8_t *b =
		    ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
		if (!memcmp(b, mapped, 12)) {
			memcpy(key, b + 12, 4);
			return 4;
		}
		memcpy(key, b, 8);
		return 8;
	}
	return 0;
}

static unsigned conns_of(const struct nx_admin *a, const uint8_t *key, uint8_t len)
{
	unsigned n = 0;
	for (size_t i = 0; len && i < NX_ARRAY_LEN(a->conns); i++) {
		const struct nx_admin_conn *c = &a->conns[i];
		n += c->used && c->key_len == len && !memcmp(c->key, key, len);
	}
	return n;
}

/*
 * The caps are ours (MHD's total limit is one higher and never reached) so that they are
 * counted: the total, then per client address, so that one host opening connections it never
 * finishes (half-open, slow headers) cannot take every slot from the others.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct nx_admin *a = cls;
	if (a->connections >= NX_ADMIN_MAX_CONNECTIONS) {
		a->ctr[NX_ADMIN_CTR_REF_CONN_CAP]++;
		return MHD_NO;
	}
	uint8_t key[8];
	uint8_t len = addr_key(addrlen ? addr : NULL, key);
	if (conns_of(a, key, len) >= NX_ADMIN_MAX_CONNECTIONS_PER_ADDR) {
		a->ctr[NX_ADMIN_CTR_REF_PER_ADDR]++;
		return MHD_NO;
	}
	return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct nx_admin *a = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		a->connections++;
		a->connections_peak = NX_MAX(a->connections_peak, a->connections);
		nx_ledger_charge(NX_OWNER_admin_http, a->conn_charge, 1);
		struct nx_admin_conn *c = NULL;
		for (size_t i = 0; !c && i < NX_ARRAY_LEN(a->conns); i++) {
			c = a->conns[i].used ? NULL : &a->conns[i];
		}
		/* MHD admits at most NX_ARRAY_LEN(a->conns): a connection without a slot is
		 * only uncapped per address and uncounted, never a memory error. */
		if (c) {
			const union MHD_ConnectionInfo *ci =
			    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
			*c = (struct nx_admin_conn){.used = true, .opened_ms = uv_now(a->loop)};
			c->key_len = addr_key(ci ? ci->client_addr : NULL, c->key);
		}
		*socket_context = c;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		a->connections--;
		nx_ledger_charge(NX_OWNER_admin_http, -a->conn_charge, -1);
		struct nx_admin_conn *c = *socket_context;
		if (c) {
			/* Closed before any whole request, after at least the header time-out of
			 * silence: MHD's time-out did it (or the client gave up as late). */
			if (!c->got_request && uv_now(a->loop) - c->opened_ms + 500 >=
						   NX_ADMIN_HEADER_TIMEOUT_S * 1000u) {
				a->ctr[NX_ADMIN_CTR_REF_HEADER_TIMEOUT]++;
			}
			c->used = false;
			*socket_context = NULL;
		}
	}
}

static bool g_starting; /* MHD messages during start are errors; afterwards per-client noise */

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	enum nx_log_level level = g_starting ? NX_LOG_ERR : NX_LOG_DEBUG;
	if (!nx_log_enabled(level)) {
		return;
	}
	char msg[256];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) {
		msg[--n] = '\0';
	}
	nx_log(level, "admin", "libmicrohttpd: %s", msg);
}

/* ---- the libuv side ----------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t);

static void run(struct nx_admin *a)
{
	a->runs++;
	a->in_run++;
	MHD_run(a->mhd);
	a->in_run--;
	MHD_UNSIGNED_LONG_LONG ms;
	if (MHD_get_timeout(a->mhd, &ms) == MHD_YES) {
		uv_timer_start(&a->timer, on_timer, (uint64_t)ms, 0);
	} else {
		uv_timer_stop(&a->timer);
	}
}

static void on_timer(uv_timer_t *t)
{
	run(NX_CONTAINER_OF(t, struct nx_admin, timer));
}

void nx_admin_run_now(struct nx_admin *a)
{
	if (a->mhd) {
		run(a);
	}
}

void nx_admin_service(struct nx_admin *a)
{
	if (!a || !a->mhd || a->in_run) {
		return;
	}
	/* the loop's clock stands still while its thread works: read the real one */
	uint64_t now = uv_hrtime() / 1000000;
	if (now < a->service_ms) {
		return;
	}
	a->services++;
	run(a);
	/* The next turn waits NX_ADMIN_SERVICE_MS, or twice what this one took: however busy the
	 * admin side is, the rebuild keeps at least two thirds of the thread. */
	uint64_t end = uv_hrtime() / 1000000;
	a->service_ms = end + NX_MAX((uint64_t)NX_ADMIN_SERVICE_MS, 2 * (end - now));
}

void nx_admin_set_busy(struct nx_admin *a, bool busy)
{
	if (a) {
		a->busy = busy;
		a->service_ms = 0;
	}
}

void nx_admin_kick(struct nx_admin *a)
{
	if (a->mhd) {
		uv_timer_start(&a->timer, on_timer, 0, 0);
	}
}

static void on_poll(uv_poll_t *p, int status, int events)
{
	struct nx_admin *a = NX_CONTAINER_OF(p, struct nx_admin, poll);
	if (status < 0) {
		nx_log(NX_LOG_WARN, "admin", "poll: %s", uv_strerror(status));
	}
	run(a);
}

void nx_admin_handle_closed(uv_handle_t *h)
{
	struct nx_admin *a = h->data;
	if (--a->open_handles == 0) {
		nx_admin_live_deinit(a);
		nx_mem_free(NX_OWNER_admin_http, a, sizeof(*a));
	}
}

/* ---- start / stop ------------------------------------------------------------------------- */

static const char *addr_text(const struct nx_addr *addr, char *buf, size_t size)
{
	if (addr->text[0]) {
		return addr->text;
	}
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (addr->ss.ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)&addr->ss;
		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		port = ntohs(s->sin_port);
		snprintf(buf, size, "%s:%u", host, port);
	} else if (addr->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&addr->ss;
		inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
		port = ntohs(s->sin6_port);
		snprintf(buf, size, "[%s]:%u", host, port);
	} else {
		snprintf(buf, size, "(address family %d)", addr->ss.ss_family);
	}
	return buf;
}

/* Our own listen socket, so that a bind error names the address and the reason. */
static int open_listener(const struct nx_addr *addr, int *fd_out, uint16_t *port_out)
{
	char text[80];
	const char *step = "socket";
	int family = addr->ss.ss_family;
	int one = 1;
	int zero = 0;
	int fd = -1;
	if (family != AF_INET && family != AF_INET6) {
		nx_log(NX_LOG_ERR, "admin", "cannot listen on %s: not an IP address",
		       addr_text(addr, text, sizeof(text)));
		return -EAFNOSUPPORT;
	}
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		goto fail;
	}
	step = "setsockopt";
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
		goto fail;
	}
	/* [::]:port also takes IPv4 (dual stack); irrelevant for a specific v6 address. */
	if (family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0) {
		goto fail;
	}
	step = "bind";
	if (bind(fd, (const struct sockaddr *)&addr->ss, addr->len) < 0) {
		goto fail;
	}
	step = "listen";
	if (listen(fd, NX_ADMIN_LISTEN_BACKLOG) < 0) {
		goto fail;
	}
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	step = "getsockname";
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		goto fail;
	}
	*port_out = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
					    : ((struct sockaddr_in6 *)&ss)->sin6_port);
	*fd_out = fd;
	return 0;
fail:;
	int err = -errno;
	nx_log(NX_LOG_ERR, "admin", "cannot listen on %s: %s: %s",
	       addr_text(addr, text, sizeof(text)), step, strerror(errno));
	if (fd >= 0) {
		close(fd);
	}
	return err;
}

/* ---- TLS ---------------------------------------------------------------------------------- */

/* Read a PEM file into an NX_OWNER_tls buffer (NUL-terminated, *len + 1 bytes). */
static int read_pem(const char *path, const char *what, char **out, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		int e = errno;
		nx_log(NX_LOG_ERR, "admin", "cannot read the TLS %s %s: %s", what, path,
		       strerror(e));
		return -e;
	}
	char *buf = nx_mem_alloc(NX_OWNER_tls, NX_ADMIN_TLS_FILE_MAX + 1);
	size_t n = buf ? fread(buf, 1, NX_ADMIN_TLS_FILE_MAX + 1, fp) : 0;
	bool err = ferror(fp);
	fclose(fp);
	if (!buf) {
		return -ENOMEM;
	}
	if (err || n == 0 || n > NX_ADMIN_TLS_FILE_MAX) {
		nx_log(NX_LOG_ERR, "admin", "the TLS %s %s is %s", what, path,
		       err ? "unreadable" : n ? "larger than 256 KiB" : "empty");
		nx_mem_free(NX_OWNER_tls, buf, NX_ADMIN_TLS_FILE_MAX + 1);
		return NX_ECONFIG;
	}
	char *p = nx_mem_realloc(NX_OWNER_tls, buf, NX_ADMIN_TLS_FILE_MAX + 1, n + 1);
	if (!p) {
		sodium_memzero(buf, n);
		nx_mem_free(NX_OWNER_tls, buf, NX_ADMIN_TLS_FILE_MAX + 1);
		return -ENOMEM;
	}
	p[n] = '\0';
	*out = p;
	*len = n;
	return 0;
}

static void pem_free(char **pem, size_t len, bool secret)
{
	if (*pem) {
		if (secret) {
			sodium_memzero(*pem, len);
		}
		nx_mem_free(NX_OWNER_tls, *pem, len + 1);
		*pem = NULL;
	}
}

/*
 * The certificate MHD hands GnuTLS for each handshake (MHD_OPTION_HTTPS_CERT_CALLBACK), so that
 * a reload can swap it without restarting the admin server and dropping its sessions. GnuTLS's
 * callback has no user data and the daemon runs one admin server: the pair in use is this
 * static, touched only on the control thread (MHD runs there). Several HTTPS admin servers in
 * one process (unit tests) share it: each load replaces it for all of them, and it is
 * released when the last one stops (g_cert_users).
 */
struct admin_cert {
	gnutls_pcert_st pcert[NX_ADMIN_CERT_CHAIN_MAX];
	unsigned n;
	gnutls_privkey_t key;
	bool loaded;
};
static struct admin_cert g_cert;
static unsigned g_cert_users; /* HTTPS admin servers started and not yet stopped */

static void cert_clear(struct admin_cert *k)
{
	for (unsigned i = 0; i < k->n; i++) {
		gnutls_pcert_deinit(&k->pcert[i]);
	}
	if (k->key) {
		gnutls_privkey_deinit(k->key);
	}
	memset(k, 0, sizeof(*k));
}

/* Parse the PEM pair into k; 0 or NX_ECONFIG with the reason logged. */
static int cert_parse(struct admin_cert *k, const char *cert, size_t clen, const char *key,
		      size_t klen, const char *cert_path)
{
	memset(k, 0, sizeof(*k));
	gnutls_datum_t cd = {.data = (unsigned char *)cert, .size = (unsigned)clen};
	gnutls_datum_t kd = {.data = (unsigned char *)key, .size = (unsigned)klen};
	k->n = NX_ADMIN_CERT_CHAIN_MAX;
	int g = gnutls_pcert_list_import_x509_raw(k->pcert, &k->n, &cd, GNUTLS_X509_FMT_PEM, 0);
	if (g < 0) {
		k->n = 0;
		nx_log(NX_LOG_ERR, "admin", "%s: %s", cert_path, gnutls_strerror(g));
		return NX_ECONFIG;
	}
	g = gnutls_privkey_init(&k->key);
	if (g == 0) {
		g = gnutls_privkey_import_x509_raw(k->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	}
	if (g < 0) {
		nx_log(NX_LOG_ERR, "admin", "the key of %s: %s", cert_path, gnutls_strerror(g));
		cert_clear(k);
		return NX_ECONFIG;
	}
	k->loaded = true;
	return 0;
}

static int cert_retrieve(gnutls_session_t s, const gnutls_datum_t *req_ca, int n_req,
			 const gnutls_pk_algorithm_t *algos, int n_algos, gnutls_pcert_st **pcert,
			 unsigned int *pcert_len, gnutls_privkey_t *key)
{
	(void)s;
	(void)req_ca;
	(void)n_req;
	(void)algos;
	(void)n_algos;
	if (!g_cert.loaded) {
		return -1;
	}
	*pcert = g_cert.pcert;
	*pcert_len = g_cert.n;
	*key = g_cert.key;
	return 0;
}

static void tls_free(struct nx_admin *a)
{
	pem_free(&a->tls_key, a->tls_key_len, true);
	pem_free(&a->tls_cert, a->tls_cert_len, false);
	if (a->tls) {
		a->tls = false;
		if (--g_cert_users == 0) {
			cert_clear(&g_cert);
		}
	}
}

/*
 * Without tls.cert, the self-signed certificate DoT and DoH use: state_dir/tls/{cert,key}.pem,
 * made here when no encrypted DNS listener made it first (nx_tls_selfsigned_ensure reuses the
 * files once they exist, so both sides always serve the same certificate and a browser that
 * accepted it once keeps accepting it). *cert and *key are malloc'd.
 */
static int tls_generated(const struct nx_conf *c, char **cert, char **key)
{
	char err[512] = "";
	bool created = false;
	int rc = 0;
	if (mkdir(c->state_dir, 0750) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(err, sizeof(err), "cannot create state_dir %s: %s", c->state_dir,
			 strerror(errno));
	} else {
		rc = nx_tls_selfsigned_ensure(c->state_dir, c->tls_server_name, cert, key, &created,
					      err, sizeof(err));
	}
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "admin", "admin.tls: no generated certificate: %s", err);
		return rc;
	}
	nx_log(NX_LOG_INFO, "admin", "HTTPS with the self-signed certificate %s%s", *cert,
	       created ? " (generated now)" : "");
	return 0;
}

/* With admin.tls, load tls.cert / tls.key (shared with the DoT and DoH listeners), or the
 * generated certificate when they are not set. */
static int tls_load(struct nx_admin *a)
{
	const struct nx_conf *c = nx_admin_conf(a);
	if (!c || !c->admin_tls) {
		return 0;
	}
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		nx_log(NX_LOG_ERR, "admin", "admin.tls is true but libmicrohttpd has no TLS");
		return NX_ECONFIG;
	}
	char *gcert = NULL, *gkey = NULL;
	int rc = 0;
	if (!c->tls_cert || !c->tls_key) {
		rc = tls_generated(c, &gcert, &gkey);
	}
	const char *cert = gcert ? gcert : c->tls_cert, *key = gkey ? gkey : c->tls_key;
	char *cpem = NULL, *kpem = NULL;
	size_t clen = 0, klen = 0;
	if (!rc) {
		rc = read_pem(cert, "certificate", &cpem, &clen);
	}
	if (!rc) {
		rc = read_pem(key, "key", &kpem, &klen);
	}
	struct admin_cert k;
	if (!rc) {
		rc = cert_parse(&k, cpem, clen, kpem, klen, cert);
	}
	free(gcert);
	free(gkey);
	if (rc) {
		pem_free(&kpem, klen, true);
		pem_free(&cpem, clen, false);
		return rc;
	}
	/* Swap: handshakes from now on get the new pair; the old one is released. The PEM copies
	 * stay (charged to NX_OWNER_tls) as the measure of what the parsed pair holds. */
	cert_clear(&g_cert);
	g_cert = k;
	pem_free(&a->tls_key, a->tls_key_len, true);
	pem_free(&a->tls_cert, a->tls_cert_len, false);
	a->tls_cert = cpem;
	a->tls_cert_len = clen;
	a->tls_key = kpem;
	a->tls_key_len = klen;
	if (!a->tls) {
		a->tls = true;
		g_cert_users++;
		a->conn_charge += NX_ADMIN_TLS_CONN_OVERHEAD_BYTES;
	}
	return 0;
}

int nx_admin_tls_reload(struct nx_admin *a)
{
	if (!a || !a->tls) {
		return 0; /* plain HTTP: admin.tls itself needs a restart */
	}
	int rc = tls_load(a);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "admin", "reload: keeping the HTTPS certificate in use");
		return rc;
	}
	nx_log(NX_LOG_INFO, "admin", "reload: HTTPS certificate reloaded");
	return 0;
}

int nx_admin_start(uv_loop_t *loop, const struct nx_addr *listen,
		   const struct nx_admin_hooks *hooks, struct nx_admin **out)
{
	struct nx_admin *a = nx_mem_calloc(NX_OWNER_admin_http, 1, sizeof(*a));
	if (!a) {
		return -ENOMEM;
	}
	a->loop = loop;
	a->conn_charge = NX_ADMIN_CONN_CHARGE;
	if (hooks) {
		a->hooks = *hooks;
	}
	int fd = -1;
	int rc = nx_admin_auth_init(a);
	if (!rc) {
		rc = tls_load(a);
	}
	if (!rc) {
		rc = open_listener(listen, &fd, &a->port);
	}
	if (rc < 0) {
		goto fail;
	}
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	if (listen->ss.ss_family == AF_INET6) {
		flags |= MHD_USE_DUAL_STACK;
	}
	/* The certificate comes from cert_retrieve at each handshake, so a reload can swap it. */
	struct MHD_OptionItem tls_opts[] = {
	    {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)cert_retrieve},
	    {MHD_OPTION_END, 0, NULL},
	};
	if (a->tls) {
		flags |= MHD_USE_TLS;
	} else {
		tls_opts[0].option = MHD_OPTION_END;
	}
	g_starting = true;
	a->mhd = MHD_start_daemon(
	    flags, 0, on_accept, a, on_access, a, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, a,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)(NX_ADMIN_MAX_CONNECTIONS + 1), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)NX_ADMIN_CONN_POOL_BYTES, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)NX_ADMIN_HEADER_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, a, MHD_OPTION_ARRAY, tls_opts,
	    MHD_OPTION_END);
	g_starting = false;
	if (!a->mhd) {
		/* MHD 0.9.75 closes the listen socket it was given when it fails after reading its
		 * options (ours are constant, so that is the only way it fails): not closed here.
		 */
		char text[80];
		nx_log(NX_LOG_ERR, "admin", "libmicrohttpd refused to start on %s",
		       addr_text(listen, text, sizeof(text)));
		rc = NX_ECONFIG;
		goto fail;
	}
	rc = nx_admin_live_init(a); /* two handles: the hub's async and keepalive timer */
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "admin", "cannot set up the live stream: %s", nx_strerror(rc));
		MHD_stop_daemon(a->mhd);
		goto fail;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	rc = info ? uv_poll_init(loop, &a->poll, info->epoll_fd) : NX_ECONFIG;
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "admin", "cannot watch libmicrohttpd: %s", nx_strerror(rc));
		MHD_stop_daemon(a->mhd);
		a->mhd = NULL;
		/* The hub's handles exist: closing them frees `a` on the next loop turn. */
		tls_free(a);
		nx_admin_auth_deinit(a);
		nx_admin_live_stop(a);
		return rc;
	}
	uv_timer_init(loop, &a->timer);
	a->poll.data = a;
	a->timer.data = a;
	a->open_handles += 2;
	uv_poll_start(&a->poll, UV_READABLE, on_poll);
	run(a);
	char text[80];
	nx_log(NX_LOG_INFO, "admin", "listening on %s (port %u, %s)",
	       addr_text(listen, text, sizeof(text)), a->port, a->tls ? "HTTPS" : "HTTP");
	*out = a;
	return 0;
fail:
	tls_free(a);
	nx_admin_auth_deinit(a);
	nx_mem_free(NX_OWNER_admin_http, a, sizeof(*a));
	return rc;
}

void nx_admin_stop(struct nx_admin *a)
{
	if (!a || !a->mhd) {
		return;
	}
	/* End the live streams first: MHD refuses to stop with suspended connections. Then unwatch
	 * the epoll fd before MHD closes it, and close everything MHD holds. */
	nx_admin_live_stop(a);
	uv_close((uv_handle_t *)&a->poll, nx_admin_handle_closed);
	uv_close((uv_handle_t *)&a->timer, nx_admin_handle_closed);
	MHD_stop_daemon(a->mhd);
	a->mhd = NULL;
	nx_admin_qlog_close(a);
	tls_free(a);
	nx_admin_auth_deinit(a);
}

uint16_t nx_admin_port(const struct nx_admin *a)
{
	return a->port;
}

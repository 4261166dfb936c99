/*
 * Admin module internals shared by its files (http.c, routes.c, metrics.c, later api_*.c).
 * Never included from outside src/admin/ (tests/unit/admin excepted).
 *
 * Threading: everything runs on the control thread (see admin.h).
 * A request lives from MHD's first access-handler call to its completion callback; the route
 * handler runs once, when the whole request (headers and body) is in, and answers through exactly
 * one nx_admin_reply_* call.
 */
#pragma once

#include <jansson.h>
#include <microhttpd.h>

#include "admin/admin.h"
#include "base/ledger.h"

/* Server-owned counters (control thread only, plain integers), rendered in /metrics.
 * X(id, family, labels, help) — rows of one family consecutive, help on the first row. */
#define NX_ADMIN_COUNTERS(X)                                                                       \
	X(RESP_2XX, "nxdns_admin_http_responses_total", "class=\"2xx\"",                           \
	  "Admin HTTP responses, by status class")                                                 \
	X(RESP_3XX, "nxdns_admin_http_responses_total", "class=\"3xx\"", "")                       \
	X(RESP_4XX, "nxdns_admin_http_responses_total", "class=\"4xx\"", "")                       \
	X(RESP_5XX, "nxdns_admin_http_responses_total", "class=\"5xx\"", "")                       \
	X(REF_CONN_CAP, "nxdns_admin_http_refused_total", "reason=\"connection_cap\"",             \
	  "Admin HTTP connections or requests refused, by reason")                                 \
	X(REF_BODY, "nxdns_admin_http_refused_total", "reason=\"body_too_large\"", "")             \
	X(REF_NOMEM, "nxdns_admin_http_refused_total", "reason=\"no_memory\"", "")                 \
	X(METRICS_FAILED, "nxdns_admin_metrics_render_failures_total", "",                         \
	  "Scrapes answered 500 because the exposition could not be built")

enum nx_admin_counter {
#define NX_ADMIN_CTR_ENUM(id, fam, labels, help) NX_ADMIN_CTR_##id,
	NX_ADMIN_COUNTERS(NX_ADMIN_CTR_ENUM)
#undef NX_ADMIN_CTR_ENUM
	    NX_ADMIN_CTR__COUNT
};

/* Prometheus text format 0.0.4; label values may carry UTF-8. */
#define NX_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Estimated MHD memory per connection beyond its pool (struct MHD_Connection, epoll entry). */
#define NX_ADMIN_CONN_OVERHEAD_BYTES 1024
#define NX_ADMIN_CONN_CHARGE (NX_ADMIN_CONN_POOL_BYTES + NX_ADMIN_CONN_OVERHEAD_BYTES)

struct nx_admin {
	uv_loop_t *loop;	     /* borrowed: outlives the server */
	struct MHD_Daemon *mhd;	     /* owned; NULL once stopped */
	uv_poll_t poll;		     /* watches MHD's epoll fd */
	uv_timer_t timer;	     /* MHD's next timeout */
	int open_handles;	     /* handles not yet closed; memory freed when it reaches 0 */
	struct nx_admin_hooks hooks; /* copied from start */
	uint16_t port;		     /* bound port */
	int64_t connections;	     /* open MHD connections (notify callback) */
	int64_t connections_peak;
	uint64_t runs;		   /* MHD_run() calls: a test checks an idle server sleeps */
	size_t last_metrics_bytes; /* size of the previous exposition: next buffer starts there */
	uint64_t ctr[NX_ADMIN_CTR__COUNT];
};

/* Who may call a route (checked before the handler; enforcement arrives with issue 5). */
enum nx_admin_auth {
	NX_ADMIN_AUTH_NONE,    /* always open (/healthz) */
	NX_ADMIN_AUTH_METRICS, /* open unless admin.metrics_auth asks for a token */
	NX_ADMIN_AUTH_SESSION, /* session cookie or bearer token */
	NX_ADMIN_AUTH_CSRF,    /* session + X-CSRF-Token (state-changing), or bearer token */
};

enum nx_admin_match {
	NX_ADMIN_EXACT,	 /* path equals `path` */
	NX_ADMIN_PREFIX, /* path starts with `path` (end it with '/': "/api/filter/sources/") */
};

struct nx_admin_req;

/* Answer through one nx_admin_reply_* and return 0, or return a negative code for a 500. */
typedef int (*nx_admin_handler_cb)(struct nx_admin_req *req);

struct nx_admin_route {
	const char *method; /* "GET" (also matches HEAD), "POST", "PUT", "DELETE" */
	const char *path;
	enum nx_admin_match match;
	enum nx_admin_auth auth;
	nx_admin_handler_cb handler;
};

/* The route table (routes.c): first row whose method and path match wins. */
extern const struct nx_admin_route nx_admin_routes[];
extern const size_t nx_admin_n_routes;

struct nx_admin_req {
	struct nx_admin *admin;	     /* borrowed: the server */
	struct MHD_Connection *conn; /* borrowed: valid until the completion callback */
	const char *method;	     /* borrowed from MHD for the request's life */
	const char *path;	     /* borrowed from MHD: decoded, without the query string */
	const struct nx_admin_route *route; /* matched row, NULL for 404/405 */
	char *body; /* owned (admin_http, body_cap bytes), NUL-terminated; or NULL */
	size_t body_len;
	size_t body_cap;
	bool body_too_large; /* body exceeded NX_ADMIN_MAX_BODY: answer 413 at the end */
	bool body_no_memory; /* the body could not be stored: answer 503 at the end */
	bool replied;	     /* a response is queued */
};

/* Query-string argument or request header (borrowed from MHD), NULL when absent. */
const char *nx_admin_req_arg(const struct nx_admin_req *req, const char *key);
const char *nx_admin_req_header(const struct nx_admin_req *req, const char *name);

/*
 * Replies. Each queues the response and returns 0, or a negative code (-ENOMEM, NX_EMALFORMED
 * when the request already has one); on error the connection is closed without an answer.
 * nx_admin_reply copies `data`.
 */
int nx_admin_reply(struct nx_admin_req *req, unsigned status, const char *content_type,
		   const void *data, size_t len);
/* Steals the reference to `body` (also on error). Content-Type application/json. */
int nx_admin_reply_json(struct nx_admin_req *req, unsigned status, json_t *body);
/* {"error": error, "message": formatted, "field": field} (field omitted when NULL). */
int nx_admin_reply_error(struct nx_admin_req *req, unsigned status, const char *error,
			 const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Answer with `data` as the body without copying: free_cb(cls) is called once MHD is done with
 * it, or before returning on error. */
int nx_admin_reply_buffer(struct nx_admin_req *req, unsigned status, const char *content_type,
			  const void *data, size_t len, void (*free_cb)(void *cls), void *cls);

/* Handlers (routes.c, metrics.c). */
int nx_admin_handle_metrics(struct nx_admin_req *req);
int nx_admin_handle_healthz(struct nx_admin_req *req);
int nx_admin_handle_memory(struct nx_admin_req *req); /* memory.c: GET /api/memory */
json_t *nx_admin_memory_json(void);                   /* memory.c: the report document */

/* Render the whole exposition for `a` (a may be NULL: no server families, no hooks). */
void nx_admin_render_metrics(struct nx_admin *a, struct nx_metrics_buf *mb);

/* A builder whose first buffer is `initial` bytes (the server sizes it from the last scrape). */
struct nx_metrics_buf *nx_metrics_buf_create(size_t initial, size_t max);

/* Internal to the builder: a sample with a pre-formatted, trusted label string ("" or
 * `k="v",...`, as in the NX_COUNTERS table). */
void nx_metrics_sample_raw(struct nx_metrics_buf *mb, const char *name, const char *labels,
			   const char *value);

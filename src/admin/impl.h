/*
 * Admin module internals shared by its files (http.c, routes.c, metrics.c, live.c, api_*.c).
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
#include <stdatomic.h>

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
	X(REF_PER_ADDR, "nxdns_admin_http_refused_total", "reason=\"per_address_cap\"", "")        \
	X(REF_HEADER_TIMEOUT, "nxdns_admin_http_refused_total", "reason=\"header_timeout\"", "")   \
	X(METRICS_FAILED, "nxdns_admin_metrics_render_failures_total", "",                         \
	  "Scrapes answered 500 because the exposition could not be built")                        \
	X(LOGIN_OK, "nxdns_admin_logins_total", "", "Admin logins that opened a session")          \
	X(LOGIN_FAILED, "nxdns_admin_login_failures_total", "",                                    \
	  "Admin logins refused: wrong password or setup token")                                   \
	X(LOGIN_LIMITED, "nxdns_admin_login_rate_limited_total", "",                               \
	  "Admin login attempts answered 429 by the per-address limit")                            \
	X(LOGIN_TRACK_EVICTED, "nxdns_admin_login_tracker_evictions_total", "",                    \
	  "Addresses dropped from the full login-limit table (least recently seen first)")         \
	X(SESSIONS_EVICTED, "nxdns_admin_sessions_evicted_total", "",                              \
	  "Sessions ended early because the session table was full (oldest first)")                \
	X(AUTH_NONE, "nxdns_admin_auth_refused_total", "reason=\"no_credentials\"",                \
	  "Admin requests refused by authentication, by reason")                                   \
	X(AUTH_BAD_TOKEN, "nxdns_admin_auth_refused_total", "reason=\"bad_token\"", "")            \
	X(AUTH_BAD_SESSION, "nxdns_admin_auth_refused_total", "reason=\"bad_session\"", "")        \
	X(AUTH_EXPIRED, "nxdns_admin_auth_refused_total", "reason=\"session_expired\"", "")        \
	X(AUTH_CSRF, "nxdns_admin_auth_refused_total", "reason=\"csrf\"", "")                      \
	X(SSE_TOO_MANY, "nxdns_sse_dropped_total", "reason=\"too_many_subscribers\"",              \
	  "Live-stream losses, by reason: subscribers refused (too_many_subscribers, "             \
	  "no_memory) or cut off (slow_subscriber), records dropped (handoff_full)")               \
	X(SSE_NO_MEMORY, "nxdns_sse_dropped_total", "reason=\"no_memory\"", "")                    \
	X(SSE_SLOW, "nxdns_sse_dropped_total", "reason=\"slow_subscriber\"", "")                   \
	X(SSE_HANDOFF_FULL, "nxdns_sse_dropped_total", "reason=\"handoff_full\"", "")              \
	X(REHASHED, "nxdns_admin_password_rehashed_total", "result=\"ok\"",                        \
	  "Admin password hashes rewritten at login under the current argon2 limits, by result")   \
	X(REHASH_FAILED, "nxdns_admin_password_rehashed_total", "result=\"failed\"", "")           \
	X(TOTP_MISSING, "nxdns_admin_totp_refused_total", "reason=\"missing\"",                    \
	  "Logins and second-factor changes refused for their TOTP code, by reason")               \
	X(TOTP_INVALID, "nxdns_admin_totp_refused_total", "reason=\"invalid\"", "")                \
	X(TOTP_REPLAYED, "nxdns_admin_totp_refused_total", "reason=\"replayed\"", "")          \
	X(AUTH_READ_ONLY, "nxdns_admin_read_only_refused_total", "",                               \
	  "Requests other than GET/HEAD refused because their API token has scope read")           \
	X(SYNC_REFUSED, "nxdns_admin_sync_refused_total", "",                                      \
	  "Edits refused on a replica (409 synced_from_primary): the key follows sync.primary")    \
	X(SYNC_REPLICAS_EVICTED, "nxdns_admin_sync_replicas_evicted_total", "",                    \
	  "Replicas dropped from the full GET /api/sync/replicas table (least recently seen)")

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
/* Estimated GnuTLS session per HTTPS connection (record buffers, handshake state). */
#define NX_ADMIN_TLS_CONN_OVERHEAD_BYTES (40 * 1024)
#define NX_ADMIN_TLS_FILE_MAX (256 * 1024) /* bytes of a PEM certificate chain or key */
#define NX_ADMIN_CERT_CHAIN_MAX 8          /* certificates of the chain served (leaf + CAs) */

/* ---- authentication state (auth.c) --------------------------------------------------------- */

#define NX_ADMIN_SECRET_BYTES 32 /* session ids, CSRF and setup tokens: 256 random bits */
#define NX_ADMIN_SECRET_TEXT 44	 /* their base64url text: 43 characters + NUL */
#define NX_ADMIN_MAX_SESSIONS 64 /* a household has a few browsers; the oldest goes when full */
#define NX_ADMIN_LOGIN_TRACK 256 /* client addresses whose failed logins are remembered (LRU) */
#define NX_ADMIN_LOGIN_FAILS 5	 /* failed logins per address and window before 429 */
#define NX_ADMIN_LOGIN_WINDOW_MS 60000 /* the window: a minute from the first failure */
#define NX_ADMIN_COOKIE_MAX 192	       /* bytes of one Set-Cookie value */
#define NX_ADMIN_SESSION_COOKIE "nxdns_session"

struct nx_admin_session {
	uint8_t id[NX_ADMIN_SECRET_BYTES];   /* the cookie's value, decoded */
	uint8_t csrf[NX_ADMIN_SECRET_BYTES]; /* what X-CSRF-Token must carry, decoded */
	uint64_t created_ms;		     /* admin clock (hooks.now_ms) */
	uint64_t expires_ms;		     /* created + admin.session_ttl at login */
	bool used;
};

/* Failed logins of one client address (IPv4, or the /64 of an IPv6 address). */
struct nx_admin_login_track {
	uint8_t addr[16];
	uint8_t family;	   /* AF_INET or AF_INET6 */
	uint8_t failures;  /* in the current window */
	bool used;
	uint64_t window_ms; /* start of the window: the first failure */
	uint64_t last_ms;   /* last failure: the LRU order */
};

struct nx_admin_auth_state {
	struct nx_admin_session sessions[NX_ADMIN_MAX_SESSIONS];
	struct nx_admin_login_track track[NX_ADMIN_LOGIN_TRACK];
	char setup_token[NX_ADMIN_SECRET_TEXT]; /* "" unless waiting for the first password */
	uint8_t pw_fp[32]; /* BLAKE2b of the password hash the sessions were opened under */
	bool have_pw;	   /* the config had a password hash at the last sync */
	bool synced;	   /* have_pw/pw_fp describe a config seen before */
	/* TOTP: an enrolment shown once and not confirmed yet, and the replay guard */
	uint8_t totp_pending[20];	/* NX_ADMIN_TOTP_KEY_BYTES */
	uint64_t totp_pending_until_ms; /* 0: none pending */
	uint64_t totp_last_step;	/* one past the newest step a code was accepted for */
};

/* How a request was authenticated (set by nx_admin_authorize). */
enum nx_admin_via {
	NX_ADMIN_VIA_NONE,    /* an open route, or not yet checked */
	NX_ADMIN_VIA_SESSION, /* session cookie (+ CSRF token on state changes) */
	NX_ADMIN_VIA_TOKEN,   /* Authorization: Bearer */
};

/* ---- the live stream hub (live.c) -------------------------------------------------------- */

/*
 * Bytes buffered per subscriber (NX_OWNER_sse_rings, allocated at subscribe). An event is one
 * record's JSON (~300 B): 64 KiB holds ~200, most of a writer batch (NX_QLOG_BATCH_DEFAULT);
 * the hub also lets MHD send between chunks of a batch, so only a client that stops reading
 * fills it. A subscriber whose ring would overflow has its stream ended (slow_subscriber).
 */
#define NX_ADMIN_LIVE_RING_BYTES (64 * 1024)
/* Records between the query-log writer and the control thread: one writer batch
 * (NX_QLOG_BATCH_DEFAULT). 256 x 744 B = 186 KiB, allocated only while subscribers exist. */
#define NX_ADMIN_LIVE_HANDOFF 256
#define NX_ADMIN_LIVE_CHUNK 32		 /* records formatted per lock hold, then MHD sends */
#define NX_ADMIN_LIVE_KEEPALIVE_MS 15000 /* ": keepalive" to idle subscribers (proxies, NATs) */
#define NX_ADMIN_LIVE_SNDBUF (32 * 1024) /* kernel send buffer per live stream: the ring is the bound */
#define NX_ADMIN_LIVE_RETRY_MS 3000	 /* "retry:" sent first: EventSource reconnect delay */
#define NX_ADMIN_LIVE_EVENT_MAX 8192	 /* bytes of one formatted event (a record is < 4 KiB) */
#define NX_ADMIN_LIVE_CUTOFF_TIMEOUT_S 1 /* a cut-off client that does not read is closed after */

struct nx_admin_live_sub;

struct nx_admin_live {
	uv_async_t async;      /* publishers -> control loop: drain the handoff */
	uv_timer_t keepalive;  /* repeats every keepalive_ms while subscribers exist */
	uv_mutex_t mu;	       /* guards q, q_head, q_len, q_dropped */
	struct nx_qlog_rec *q; /* owned (sse_rings, HANDOFF + CHUNK records) while active */
	size_t q_head;	       /* first queued record */
	size_t q_len;	       /* queued records */
	uint64_t q_dropped;    /* records refused by a full queue, not yet in ctr[] */
	atomic_int active;     /* subscribers, read by publishers without the lock */
	struct nx_admin_live_sub *subs; /* listed subscribers (doubly linked) */
	int64_t n_subs;			/* listed subscribers (nxdns_sse_subscribers) */
	int64_t peak;			/* its high-water */
	bool draining;			/* inside the drain: q is not released until it ends */
	bool stopping;			/* nx_admin_stop ran: no subscribe, no drain */
	size_t ring_bytes;     /* per subscriber (NX_ADMIN_LIVE_RING_BYTES; tests shrink it) */
	uint64_t keepalive_ms; /* NX_ADMIN_LIVE_KEEPALIVE_MS; tests shorten it */
};

struct nx_qlog_reader;

/* One open MHD connection, for the per-address cap and the header time-out's count (http.c). */
struct nx_admin_conn {
	bool used;
	bool got_request;   /* a whole request line + headers arrived at least once */
	uint8_t key_len;    /* 4 (IPv4) or 8 (an IPv6 /64); 0: unknown address, not capped */
	uint8_t key[8];	    /* the address, or the /64 of an IPv6 one */
	uint64_t opened_ms; /* uv_now at accept */
};

/*
 * A replica as the primary saw it: one per (token name, address), the least recently seen
 * replaced when the table is full (nxdns_admin_sync_replicas_evicted_total). A household has
 * one or two replicas; an office one per site.
 */
#define NX_ADMIN_SYNC_REPLICAS 16
struct nx_admin_replica {
	bool used;
	char token[NX_CONF_NAME_MAX + 1]; /* the admin.tokens name it presented */
	char address[64];		  /* its address as text (IPv6 without brackets) */
	int64_t last_ms;		  /* wall clock of its last export request */
	unsigned status;		  /* what it was answered: 200 or 304 (or 500) */
	char generation[24];		  /* the generation it was given ("" on 500) */
	uint64_t pulls;			  /* export requests seen from it */
};

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
	unsigned in_run;	   /* inside MHD_run (a handler may start a rebuild): no service */
	uint64_t service_ms;	   /* uv_hrtime ms before which nx_admin_service waits */
	uint64_t services;	   /* nx_admin_service runs (during rebuilds) */
	bool busy;		   /* a list rebuild is running: changes answer 503 */
	size_t last_metrics_bytes; /* size of the previous exposition: next buffer starts there */
	uint64_t ctr[NX_ADMIN_CTR__COUNT];
	int64_t conn_charge;	   /* ledger bytes per open connection (more with TLS) */
	bool tls;		   /* HTTPS: cookies are Secure */
	char *tls_cert;		   /* owned (NX_OWNER_tls, tls_cert_len + 1): PEM, kept until stop */
	size_t tls_cert_len;
	char *tls_key; /* owned (NX_OWNER_tls, tls_key_len + 1), wiped before it is freed */
	size_t tls_key_len;
	struct nx_admin_auth_state auth;
	struct nx_admin_live live;   /* the SSE hub */
	struct nx_qlog_reader *qlog; /* owned: opened on first use, closed at stop */
	char qlog_path[4096];	     /* the file qlog was opened on ("" when closed) */
	/* MHD's own limit is NX_ADMIN_MAX_CONNECTIONS + 1: one slot each, found by scanning */
	struct nx_admin_conn conns[NX_ADMIN_MAX_CONNECTIONS + 1];
	/* replicas that pulled GET /api/sync/export with a token (api_sync.c) */
	struct nx_admin_replica replicas[NX_ADMIN_SYNC_REPLICAS];
};

/*
 * Who may call a route (nx_admin_authorize, before the handler). Whatever the column says, a
 * session request with a method other than GET/HEAD must carry the session's X-CSRF-Token.
 */
enum nx_admin_auth {
	NX_ADMIN_AUTH_NONE,    /* always open (login, setup, auth status) */
	NX_ADMIN_AUTH_METRICS, /* /metrics, /healthz: open unless admin.metrics_auth is true */
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
	enum nx_admin_via via; /* set by nx_admin_authorize before the handler runs */
	int session;	       /* index in auth.sessions when via == SESSION, else -1 */
	char set_cookie[NX_ADMIN_COOKIE_MAX]; /* added as Set-Cookie to the reply when non-empty */
	unsigned retry_after_s;		      /* added as Retry-After to the reply when non-zero */
	char disposition[128]; /* added as Content-Disposition to the reply when non-empty */
	/* A body streamed to a file instead of memory (NX_ADMIN_UPLOAD_PATH only) */
	bool upload;	     /* the body goes to upload_fd */
	bool upload_failed;  /* a write failed: answered 500 at the end */
	int upload_fd;	     /* owned while upload (>= 0): closed at completion */
	char *upload_path;   /* owned (admin_http): state_dir/.upload-XXXXXX, unlinked */
	uint64_t upload_len; /* bytes written */
	int token;	     /* index in admin.tokens when via == TOKEN, else -1 */
};

/*
 * The one route whose body is a file, not JSON: a backup archive for POST /api/restore. It is
 * authorized when its headers arrive (nothing is written for a request that would be refused)
 * and streamed to <state_dir>/.upload-XXXXXX up to NX_ADMIN_UPLOAD_MAX (413 past it): an
 * archive with every list's download and bodies is far larger than NX_ADMIN_MAX_BODY and has
 * no business in memory on a box with a 32 MiB budget.
 */
#define NX_ADMIN_UPLOAD_PATH "/api/restore"
#define NX_ADMIN_UPLOAD_MAX (1024ull * 1024 * 1024) /* bytes: all 37 shared lists are ~0.3 GB */

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

/* Queue a response built by the caller (`r` is destroyed here, also on error), with the common
 * headers. 0, -ENOMEM (r NULL), NX_EMALFORMED (already answered), -EIO. */
int nx_admin_reply_response(struct nx_admin_req *req, unsigned status, struct MHD_Response *r);

/* Answer a constant JSON text without allocating from the ledger (for out-of-memory answers). */
int nx_admin_reply_static(struct nx_admin_req *req, unsigned status, const char *json);

/* Make the server call MHD_run() soon (after MHD_resume_connection or a changed connection
 * timeout): the timer fires on the next loop iteration. */
void nx_admin_kick(struct nx_admin *a);
/* MHD_run() now (from a libuv callback, never from inside MHD) and re-arm the timer. */
void nx_admin_run_now(struct nx_admin *a);
/* Close callback of every server handle (h->data is the server): the last one frees it. */
void nx_admin_handle_closed(uv_handle_t *h);

/* ---- auth.c ------------------------------------------------------------------------------- */

/* Set up the auth state at start: libsodium, then a sync (which may log the setup token). */
int nx_admin_auth_init(struct nx_admin *a);
/* Wipe secrets at stop. */
void nx_admin_auth_deinit(struct nx_admin *a);
/*
 * Enforce req->route->auth: true when the handler may run (req->via, req->session set); false
 * when a 401/403 is queued. Per-request it also follows the config: a changed password hash
 * ends every session; no hash (first run) keeps a setup token.
 */
bool nx_admin_authorize(struct nx_admin_req *req);
/* The config in effect (hooks.conf), NULL without one; borrowed until the next reload. */
const struct nx_conf *nx_admin_conf(const struct nx_admin *a);
/* The admin clock: hooks.now_ms or nx_now_mono_ms(). */
uint64_t nx_admin_now_ms(const struct nx_admin *a);

/* ---- body.c: JSON request bodies -------------------------------------------------------- */

#define NX_ADMIN_JSON_ANY (-1)	/* any JSON value */
#define NX_ADMIN_JSON_BOOL (-2) /* true or false */

/* One member of a JSON object body. A table of them ends with a NULL name. */
struct nx_admin_field {
	const char *name;
	int type;      /* a json_type (JSON_STRING, JSON_INTEGER, JSON_OBJECT, JSON_ARRAY, ...) or
			* NX_ADMIN_JSON_ANY / NX_ADMIN_JSON_BOOL; JSON_INTEGER refuses 1.5 and 1e3 */
	bool required;
};

/*
 * Parse the request body as one JSON object whose members are all listed in `fields`, with the
 * listed types. Returns the object (a new reference: json_decref it) and vals[i] = the member
 * named fields[i].name (borrowed from the object) or NULL when absent; or NULL after answering
 * 400 {"error": "bad_request", "message", "field"} (empty body, invalid JSON, not an object, an
 * unknown, duplicate, missing or mistyped member; `field` names it when there is one) or 500.
 */
json_t *nx_admin_req_json(struct nx_admin_req *req, const struct nx_admin_field *fields,
			  json_t **vals);

/* ---- settings.c --------------------------------------------------------------------------- */

/*
 * Write changes to the config file (nx_conf_rewrite_many) and reload through hooks.reload.
 * 0: done, nothing answered (the caller replies; nx_admin_conf() is the new config). 1: the
 * answer is queued: 400 invalid_setting {field, message} for a refused change (the file is
 * unchanged), 503 when there is no config file or no reload hook, 500 when the file cannot be
 * written or the reload fails. < 0: nothing could be answered (the caller returns it: 500).
 * Pointers into the previous config are invalid afterwards.
 */
int nx_admin_config_apply(struct nx_admin_req *req, const struct nx_conf_change *ch, size_t n);
/* Same; a refused change names `field` (when not NULL) instead of the config key. */
int nx_admin_config_apply_field(struct nx_admin_req *req, const struct nx_conf_change *ch, size_t n,
				const char *field);

/* ---- api_config.c: list edits as whole-value rewrites -------------------------------------- */

/*
 * Rewrite config keys to JSON values (written as YAML flow text) and reload, as
 * nx_admin_config_apply: 0 done (nothing answered), 1 answered, < 0 error. keys[i] gets
 * vals[i] (borrowed); field as in nx_admin_config_apply_field.
 */
int nx_admin_config_set(struct nx_admin_req *req, const char *const *keys, json_t *const *vals,
			size_t n, const char *field);
/* The config lists as the API shows and writes them (new references, NULL on no memory). */
json_t *nx_admin_sources_json(const struct nx_conf *c); /* filter.sources as written */
json_t *nx_admin_groups_map(const struct nx_conf *c);	/* the `groups` value to write */
/* The rest of req->path after `prefix` (a route's PREFIX path), or NULL when empty. */
const char *nx_admin_path_rest(const struct nx_admin_req *req, const char *prefix);
/* 503 when there is no config. Returns the config or NULL after answering. */
const struct nx_conf *nx_admin_need_conf(struct nx_admin_req *req);

/* Handlers (routes.c, metrics.c, auth.c, settings.c). */
int nx_admin_handle_auth_status(struct nx_admin_req *req);
int nx_admin_handle_login(struct nx_admin_req *req);
int nx_admin_handle_logout(struct nx_admin_req *req);
int nx_admin_handle_setup(struct nx_admin_req *req);
int nx_admin_handle_tokens_list(struct nx_admin_req *req);
int nx_admin_handle_tokens_create(struct nx_admin_req *req);
int nx_admin_handle_tokens_delete(struct nx_admin_req *req);
int nx_admin_handle_totp_enrol(struct nx_admin_req *req);
int nx_admin_handle_totp_confirm(struct nx_admin_req *req);
int nx_admin_handle_totp_remove(struct nx_admin_req *req);
int nx_admin_handle_backup(struct nx_admin_req *req);
int nx_admin_handle_restore(struct nx_admin_req *req);
int nx_admin_handle_settings_get(struct nx_admin_req *req);
int nx_admin_handle_settings_put(struct nx_admin_req *req);
int nx_admin_handle_schema(struct nx_admin_req *req); /* settings.c: GET /api/schema */
/* Handlers: api_stats.c (statistics and the query list), live.c, api_filter.c, api_config.c. */
int nx_admin_handle_stats_summary(struct nx_admin_req *req);
int nx_admin_handle_stats_history(struct nx_admin_req *req);
int nx_admin_handle_stats_top(struct nx_admin_req *req);
int nx_admin_handle_queries(struct nx_admin_req *req);
int nx_admin_handle_live(struct nx_admin_req *req);
int nx_admin_handle_sources_get(struct nx_admin_req *req);
int nx_admin_handle_sources_add(struct nx_admin_req *req);
int nx_admin_handle_sources_refresh_all(struct nx_admin_req *req);
int nx_admin_handle_sources_post(struct nx_admin_req *req); /* <name>/refresh */
int nx_admin_handle_sources_edit(struct nx_admin_req *req);
int nx_admin_handle_sources_delete(struct nx_admin_req *req);
int nx_admin_handle_rules_get(struct nx_admin_req *req);
int nx_admin_handle_rules_add(struct nx_admin_req *req);
int nx_admin_handle_rules_delete(struct nx_admin_req *req);
int nx_admin_handle_pause_get(struct nx_admin_req *req);
int nx_admin_handle_pause_set(struct nx_admin_req *req);
int nx_admin_handle_lookup(struct nx_admin_req *req);
int nx_admin_handle_groups_get(struct nx_admin_req *req);
int nx_admin_handle_groups_add(struct nx_admin_req *req);
int nx_admin_handle_groups_edit(struct nx_admin_req *req);
int nx_admin_handle_groups_delete(struct nx_admin_req *req);
int nx_admin_handle_clients_get(struct nx_admin_req *req);
int nx_admin_handle_clients_add(struct nx_admin_req *req);
int nx_admin_handle_clients_edit(struct nx_admin_req *req);
int nx_admin_handle_clients_delete(struct nx_admin_req *req);
int nx_admin_handle_locals_get(struct nx_admin_req *req);
int nx_admin_handle_locals_add(struct nx_admin_req *req);
int nx_admin_handle_locals_delete(struct nx_admin_req *req);
/* mobileconfig.c: GET /api/apple/{doh,dot}.mobileconfig[?client_id=] */
int nx_admin_handle_apple_doh(struct nx_admin_req *req);
int nx_admin_handle_apple_dot(struct nx_admin_req *req);
/* api_filter.c: PUT /api/filter/rules (one rule's text, list, groups in one rewrite) */
int nx_admin_handle_rules_edit(struct nx_admin_req *req);
/* api_locals.c: PUT /api/local-records?name&type[&value] (one record in one rewrite) */
int nx_admin_handle_locals_edit(struct nx_admin_req *req);

/* api_sync.c: a replica's export, its status and pull, the primary's replica list */
int nx_admin_handle_sync_export(struct nx_admin_req *req);
int nx_admin_handle_sync_status(struct nx_admin_req *req);
int nx_admin_handle_sync_now(struct nx_admin_req *req);
int nx_admin_handle_sync_replicas(struct nx_admin_req *req);

/* api_stats.c: close the query-log reader (stop). */
void nx_admin_qlog_close(struct nx_admin *a);

/* live.c: set up / tear down the hub (start and stop); the handles count in open_handles. */
int nx_admin_live_init(struct nx_admin *a); /* 0 or a libuv error: nothing registered */
void nx_admin_live_stop(struct nx_admin *a);
void nx_admin_live_deinit(struct nx_admin *a); /* after the handles closed: the mutex */
/* nxdns_sse_subscribers and its peak, for the /metrics page. */
void nx_admin_live_metrics(struct nx_admin *a, struct nx_metrics_buf *mb);

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

/* ---- clients by name (clientname.c): control thread ---- */

/* The config's client that claims client id `client_id` (may be NULL/"") or the address text
 * `client` (longest prefix, as its policy), else the address's PTR name (hooks.client_ptr),
 * or NULL: valid until the next call or reload. */
const char *nx_admin_client_name(const struct nx_admin *a, const char *client,
				 const char *client_id);
/* Does some client address have this PTR name (hooks.client_ptr_named)? */
bool nx_admin_client_ptr_named(const struct nx_admin *a, const char *name);
/* Index of the config's client named `name` (exact), or -1. */
int nx_admin_client_index(const struct nx_admin *a, const char *name);
/* Is text an IPv4 or IPv6 address (what a row's client is unless hidden)? */
bool nx_admin_client_is_addr(const char *text);
/* A `client=` filter by name: the rows nx_admin_client_name gives `name` (querylog's
 * client_match callback; ud = this). */
struct nx_admin_client_match {
	const struct nx_admin *admin; /* borrowed */
	const char *name;	      /* borrowed */
};
bool nx_admin_client_named(const char *client, const char *client_id, void *ud);
/* Set o's "client_name" from its "client" and "client_id" (null when no client claims it).
 * 0 or -1 (no memory). */
int nx_admin_client_name_set(const struct nx_admin *a, json_t *o);

/*
 * Blocklist downloader: conditional GET of one http(s) URL into a file, with libcurl (loaded
 * with dlopen only while a transfer needs it: filter/curl.h).
 *
 * The body streams to `dest` + ".part" (no in-memory body) and is fsync'd and renamed over
 * `dest` only on a complete 200 answer; a 304, an HTTP error, a timeout, a cap or a local
 * write error removes the ".part" and leaves `dest` untouched. Redirects are followed (at most
 * NX_FETCH_MAX_REDIRS, http/https only), compressed encodings are accepted and decoded, TLS
 * peers are verified against the default CA bundle, env proxies apply as libcurl applies them.
 * Two requests must not write the same `dest` at the same time (they share the ".part").
 *
 * Two drivers over the same transfer setup:
 *   - nx_fetch_sync(): blocking (curl_easy_perform), for `nxdns update` and tests;
 *   - struct nx_fetcher: libcurl multi on a libuv loop (CURLMOPT_SOCKETFUNCTION/TIMERFUNCTION
 *     with uv_poll + uv_timer, no threads), for the daemon's control loop.
 *
 * libcurl is not linked: each transfer takes a reference to it (nx_curl_acquire, which
 * dlopen()s it on the first), and a fetcher keeps one from its first transfer until
 * NX_FETCH_LINGER_MS after its last one ended; then it drops its multi handle (and the idle
 * connections in it) and the library is unloaded, so a daemon with only path sources, or
 * between refresh rounds, maps none of libcurl, libssh2, libcrypto, libldap... A transfer that
 * times out or is cancelled keeps the library loaded for good (its resolver thread may outlive
 * it: filter/curl.h). Without the library a request fails with -ELIBACC and a reason naming the
 * package (libcurl3-gnutls).
 *
 * Threading: any thread may start a transfer (loading is serialised inside filter/curl.c). A
 * fetcher and its callbacks belong to the thread running its loop. nx_fetch_sync() is reentrant.
 *
 * Memory: the fetcher and each transfer (a struct + copies of the request strings) are charged
 * to NX_OWNER_filter_build and returned when the transfer ends / the fetcher is closed.
 * libcurl's own buffers (~100 KiB per transfer, connection cache) are not on the ledger.
 */
#pragma once

#include <stdint.h>
#include <uv.h>

/* Redirect hops followed before the request fails (HTTP_ERROR "too many redirects"). */
#define NX_FETCH_MAX_REDIRS 5
/* Body cap used when nx_fetch_req.max_bytes is 0: the largest real lists are ~30 MiB. */
#define NX_FETCH_MAX_BYTES_DEFAULT (256ull * 1024 * 1024)
/* Whole-transfer timeout used when nx_fetch_req.timeout_ms is 0. */
#define NX_FETCH_TIMEOUT_DEFAULT_MS 120000u
/* Longest ETag / Last-Modified kept from a response (with the NUL); longer ones are dropped
 * (a truncated validator is useless), and longer ones are refused in a request. */
#define NX_FETCH_ETAG_MAX 256
#define NX_FETCH_LASTMOD_MAX 64

/* One request. The strings are borrowed for the call (nx_fetcher_start copies them). */
struct nx_fetch_req {
	const char *url;	   /* http:// or https:// (other schemes: -EINVAL) */
	const char *dest;	   /* final path of the body; its directory must exist */
	const char *etag;	   /* previous ETag to send as If-None-Match, or NULL / "" */
	const char *last_modified; /* previous Last-Modified for If-Modified-Since, or NULL / "" */
	unsigned timeout_ms;	   /* whole transfer incl. connect and redirects; 0: default */
	uint64_t max_bytes;	   /* decoded body cap; larger -> TOO_LARGE; 0: default */
	/* A replica's pull from its primary (src/sync/); NULL for list downloads. */
	const char *bearer;	   /* sent as "Authorization: Bearer <bearer>"; no redirects
				    * are followed then (the token stays with the URL's host) */
	const char *pin_sha256;	   /* base64 SHA-256 of the server's SPKI: its key must match,
				    * and the CA chain and host name are not checked */
};

#define NX_FETCH_STATUSES(X)                                                                       \
	X(OK, "ok")			/* 200, dest replaced */                                   \
	X(NOT_MODIFIED, "not_modified") /* 304, dest untouched */                                  \
	X(HTTP_ERROR, "http_error")	/* any other status, too many redirects */                 \
	X(TIMEOUT, "timeout")		/* timeout_ms expired (connect or transfer) */             \
	X(NETWORK, "network")		/* connect, DNS, TLS, reset, truncated, bad encoding */    \
	X(TOO_LARGE, "too_large")	/* body over max_bytes */                                  \
	X(IO, "io")			/* local open/write/fsync/rename failed */

enum nx_fetch_status {
#define NX_FETCH_STATUS_ENUM(name, text) NX_FETCH_##name,
	NX_FETCH_STATUSES(NX_FETCH_STATUS_ENUM)
#undef NX_FETCH_STATUS_ENUM
	NX_FETCH__COUNT
};

/* Outcome of one request (a plain value). */
struct nx_fetch_result {
	enum nx_fetch_status status;
	long http_code; /* last response's status, 0 when none */
	/* Validators of the last response, "" when absent (a 304 may omit them: keep the
	 * previous ones). */
	char etag[NX_FETCH_ETAG_MAX];
	char last_modified[NX_FETCH_LASTMOD_MAX];
	uint64_t bytes;  /* decoded body bytes received (all written to dest on OK) */
	uint64_t ms;     /* wall time of the request */
	char error[256]; /* human-readable reason when not OK / NOT_MODIFIED, else "" */
};

/* "ok", "not_modified", "http_error", "timeout", "network", "too_large", "io"; "?" otherwise. */
const char *nx_fetch_status_name(enum nx_fetch_status s);

/* How long an idle fetcher keeps libcurl loaded after its last transfer (a second download
 * soon after, e.g. a refresh click, reuses it), in ms. */
#define NX_FETCH_LINGER_MS 2000

/* Load libcurl now and keep it for the life of the process: for tools that download many
 * lists (`nxdns update`). 0, or -ELIBACC when it cannot be loaded (the reason is logged). */
int nx_fetch_global_init(void);

/*
 * Blocking fetch. Returns 0 with *res filled for every transfer outcome (errors included);
 * -EINVAL for a bad request (NULL/empty url or dest, a scheme other than http/https, a
 * validator with CR/LF or too long), -ELIBACC (libcurl cannot be loaded: the error names the
 * library and its package), -EIO (libcurl refused the handle) or -ENOMEM, with *res still
 * filled: status NETWORK (-EINVAL, as libcurl would report a bad URL) or IO (the others) and
 * the error.
 */
int nx_fetch_sync(const struct nx_fetch_req *req, struct nx_fetch_result *res);

/* Asynchronous fetcher on a libuv loop (opaque). */
struct nx_fetcher;

/* Called exactly once per started transfer, on the loop thread, with the result (valid for the
 * call only). The callback may start new transfers and may free the fetcher. */
typedef void (*nx_fetch_cb)(void *ud, const struct nx_fetch_result *res);

/* 0 and *out, or -ENOMEM. Does not load libcurl. `loop` is borrowed and must outlive the
 * fetcher's handles. */
int nx_fetcher_new(uv_loop_t *loop, struct nx_fetcher **out);

/*
 * Cancel every transfer (their callbacks are not called, their ".part" files are removed) and
 * close the fetcher. Its libuv handles close through the loop: run the loop once more
 * (uv_run(loop, UV_RUN_DEFAULT) or NOWAIT until it returns 0) before uv_loop_close().
 * nx_fetcher_free(NULL) is a no-op.
 */
void nx_fetcher_free(struct nx_fetcher *f);

/*
 * Start one transfer; the request strings are copied. 0: cb will be called exactly once (unless
 * the fetcher is freed first). Error (cb never called): -EINVAL (as nx_fetch_sync), -ENOMEM,
 * -ELIBACC (libcurl cannot be loaded), -EIO (libcurl refused the handle), -ECANCELED (the
 * fetcher is being freed); nx_fetcher_error() then says why in words.
 */
int nx_fetcher_start(struct nx_fetcher *f, const struct nx_fetch_req *req, nx_fetch_cb cb,
		     void *ud);

/* Transfers started and not yet completed (tests, status). */
unsigned nx_fetcher_active(const struct nx_fetcher *f);

/* Why the last nx_fetcher_start() failed ("" after one that did not). Valid until the next
 * start. */
const char *nx_fetcher_error(const struct nx_fetcher *f);

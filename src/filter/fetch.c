/* Blocklist downloader: one transfer setup, driven by curl_easy_perform or curl multi on libuv. */
#include "filter/fetch.h"

#include <sodium.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "filter/curl.h"
#include "filter/impl.h"

#ifndef NX_VERSION
#define NX_VERSION "0.1.0"
#endif
#define FETCH_USER_AGENT "nxdns/" NX_VERSION
#define FETCH_PROTOCOLS "http,https"
#define PART_SUFFIX ".part"

/* ---- one transfer ---- */

struct xfer {
	const struct nx_curl *cu; /* a reference of ours (nx_curl_acquire), released by xfer_free */
	CURL *easy;		  /* owned */
	struct curl_slist *hdrs;  /* owned: conditional request headers */
	struct nx_fetcher *f;	  /* borrowed: the driving fetcher, NULL for nx_fetch_sync */
	struct xfer *prev, *next; /* f's active list */
	nx_fetch_cb cb;
	void *ud;
	size_t alloc_size; /* the struct and its strings: one filter_build allocation */
	const char *dest;  /* in this allocation */
	const char *part;  /* dest + ".part", in this allocation */
	unsigned timeout_ms;
	uint64_t max_bytes;
	uint64_t t0;	   /* nx_now_mono_ms() at start */
	int fd;		   /* the .part file, -1 until the first byte of a 200 body */
	bool part_created; /* .part exists on disk and is ours to remove */
	int local_err;	   /* first local open/write error (-errno) */
	bool too_large;	   /* the body went over max_bytes */
	bool bad_status;   /* a body arrived with a status other than 200 */
	struct nx_fetch_result res;
	char errbuf[CURL_ERROR_SIZE];
};

static const char *const status_names[] = {
#define NX_FETCH_STATUS_NAME(name, text) [NX_FETCH_##name] = text,
    NX_FETCH_STATUSES(NX_FETCH_STATUS_NAME)
#undef NX_FETCH_STATUS_NAME
};

const char *nx_fetch_status_name(enum nx_fetch_status s)
{
	return (unsigned)s < NX_FETCH__COUNT ? status_names[s] : "?";
}

int nx_fetch_global_init(void)
{
	char err[256];
	return nx_curl_pin(err, sizeof(err));
}

static void set_error(struct nx_fetch_result *res, enum nx_fetch_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_error(struct nx_fetch_result *res, enum nx_fetch_status st, const char *fmt, ...)
{
	res->status = st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->error, sizeof(res->error), fmt, ap);
	va_end(ap);
}

static bool is_http_url(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

/* A validator we send back: no CR/LF (header injection), fits what we would have stored. */
static bool validator_ok(const char *v, size_t cap)
{
	return !v || (strlen(v) < cap && !strpbrk(v, "\r\n"));
}

static const char *check_req(const struct nx_fetch_req *req)
{
	if (!req || !req->url || !*req->url || !req->dest || !*req->dest) {
		return "url and dest are required";
	}
	if (!is_http_url(req->url)) {
		return "only http:// and https:// URLs are supported";
	}
	if (!validator_ok(req->etag, NX_FETCH_ETAG_MAX) ||
	    !validator_ok(req->last_modified, NX_FETCH_LASTMOD_MAX)) {
		return "invalid ETag or Last-Modified";
	}
	if (!validator_ok(req->bearer, NX_FETCH_ETAG_MAX) ||
	    !validator_ok(req->pin_sha256, NX_FETCH_ETAG_MAX)) {
		return "invalid bearer token or pin";
	}
	return NULL;
}

/* Keep a response header value (trimmed) when it fits; a longer one is dropped, not cut. */
static void keep_header(char *dst, size_t cap, const char *v, size_t n)
{
	while (n > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	while (n > 0 &&
	       (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t')) {
		n--;
	}
	if (n < cap) {
		memcpy(dst, v, n);
		dst[n] = '\0';
	} else {
		dst[0] = '\0';
	}
}

static bool header_is(const char *line, size_t n, const char *name, size_t *vstart)
{
	size_t k = strlen(name);
	if (n > k && strncasecmp(line, name, k) == 0 && line[k] == ':') {
		*vstart = k + 1;
		return true;
	}
	return false;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	size_t v;
	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* A new response (redirect hop, 1xx): only the last one's validators count. */
		x->res.etag[0] = '\0';
		x->res.last_modified[0] = '\0';
	} else if (header_is(p, n, "etag", &v)) {
		keep_header(x->res.etag, sizeof(x->res.etag), p + v, n - v);
	} else if (header_is(p, n, "last-modified", &v)) {
		keep_header(x->res.last_modified, sizeof(x->res.last_modified), p + v, n - v);
	}
	return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	if (x->fd < 0) {
		long code = 0;
		x->cu->easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code != 200) {
			/* An error page (or an unfollowed 3xx, a 206...): stop reading it. */
			x->bad_status = true;
			return 0;
		}
		x->fd = open(x->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (x->fd < 0) {
			x->local_err = -errno;
			return 0;
		}
		x->part_created = true;
	}
	if (n > x->max_bytes - x->res.bytes) {
		x->too_large = true;
		return 0;
	}
	int rc = nx_write_all(x->fd, p, n);
	if (rc != 0) {
		x->local_err = rc;
		return 0;
	}
	x->res.bytes += n;
	return n;
}

static void xfer_free(struct xfer *x)
{
	if (!x) {
		return;
	}
	if (x->fd >= 0) {
		close(x->fd);
	}
	if (x->part_created) {
		unlink(x->part);
	}
	if (x->cu) {
		x->cu->easy_cleanup(x->easy);
		x->cu->slist_free_all(x->hdrs);
		nx_curl_release();
	}
	nx_mem_free(NX_OWNER_filter_build, x, x->alloc_size);
}

static char *put_str(char **cur, const char *s)
{
	char *d = *cur;
	size_t n = strlen(s) + 1;
	memcpy(d, s, n);
	*cur += n;
	return d;
}

static int add_header(struct xfer *x, const char *name, const char *value)
{
	if (!value || !*value) {
		return 0;
	}
	char line[32 + NX_FETCH_ETAG_MAX];
	snprintf(line, sizeof(line), "%s: %s", name, value);
	struct curl_slist *l = x->cu->slist_append(x->hdrs, line);
	if (!l) {
		return -ENOMEM;
	}
	x->hdrs = l;
	return 0;
}

/* Build a configured easy handle for req (already checked). On -ELIBACC (libcurl cannot be
 * loaded) err says why. */
static int xfer_new(const struct nx_fetch_req *req, struct xfer **out, char *err, size_t errlen)
{
	int rc;
	size_t ulen = strlen(req->url), dlen = strlen(req->dest);
	size_t size = sizeof(struct xfer) + ulen + 1 + dlen + 1 + dlen + sizeof(PART_SUFFIX);
	struct xfer *x = nx_mem_calloc(NX_OWNER_filter_build, 1, size);
	if (!x) {
		return -ENOMEM;
	}
	x->alloc_size = size;
	x->fd = -1;
	char *cur = (char *)(x + 1);
	const char *url = put_str(&cur, req->url);
	x->dest = put_str(&cur, req->dest);
	x->part = cur;
	memcpy(cur, req->dest, dlen);
	memcpy(cur + dlen, PART_SUFFIX, sizeof(PART_SUFFIX));
	x->timeout_ms = req->timeout_ms ? req->timeout_ms : NX_FETCH_TIMEOUT_DEFAULT_MS;
	x->max_bytes = req->max_bytes ? req->max_bytes : NX_FETCH_MAX_BYTES_DEFAULT;
	x->t0 = nx_now_mono_ms();

	x->cu = nx_curl_acquire(err, errlen);
	if (!x->cu) {
		rc = -ELIBACC;
		goto fail;
	}
	const struct nx_curl *cu = x->cu;
	x->easy = cu->easy_init();
	if (!x->easy) {
		rc = -EIO;
		goto fail;
	}
	char bearer[8 + NX_FETCH_ETAG_MAX];
	if (req->bearer && *req->bearer) {
		snprintf(bearer, sizeof(bearer), "Bearer %s", req->bearer);
	} else {
		bearer[0] = '\0';
	}
	int hrc = add_header(x, "Authorization", bearer);
	sodium_memzero(bearer, sizeof(bearer));
	if (hrc != 0 || add_header(x, "If-None-Match", req->etag) != 0 ||
	    add_header(x, "If-Modified-Since", req->last_modified) != 0) {
		rc = -ENOMEM;
		goto fail;
	}
	CURL *e = x->easy;
	bool bearer_set = req->bearer && *req->bearer;
	/* Every setopt below can only fail on out-of-memory or a libcurl built without the feature:
	 * any failure refuses the request rather than running it with surprising defaults. */
	int bad = 0;
	bad |= cu->easy_setopt(e, CURLOPT_URL, url) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_PRIVATE, x) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_PROTOCOLS_STR, FETCH_PROTOCOLS) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, FETCH_PROTOCOLS) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_FOLLOWLOCATION, bearer_set ? 0L : 1L) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_MAXREDIRS, (long)NX_FETCH_MAX_REDIRS) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_USERAGENT, FETCH_USER_AGENT) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK;
	if (req->pin_sha256 && *req->pin_sha256) {
		/* the pin is the whole check (a self-signed primary has no chain to verify) */
		char pin[16 + NX_FETCH_ETAG_MAX];
		snprintf(pin, sizeof(pin), "sha256//%s", req->pin_sha256);
		bad |= cu->easy_setopt(e, CURLOPT_PINNEDPUBLICKEY, pin) != CURLE_OK;
		bad |= cu->easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK;
		bad |= cu->easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK;
	} else {
		bad |= cu->easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L) != CURLE_OK;
		bad |= cu->easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L) != CURLE_OK;
	}
	bad |= cu->easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)x->timeout_ms) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_HEADERDATA, x) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
	bad |= cu->easy_setopt(e, CURLOPT_WRITEDATA, x) != CURLE_OK;
	if (x->hdrs) {
		bad |= cu->easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs) != CURLE_OK;
	}
	/* Refuse early when Content-Length (of the encoded body) already says too much; the write
	 * callback enforces the cap on the decoded bytes in every case. */
	if (x->max_bytes <= (uint64_t)INT64_MAX) {
		bad |= cu->easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->max_bytes) !=
		       CURLE_OK;
	}
	if (bad) {
		rc = -EIO;
		goto fail;
	}
	*out = x;
	return 0;
fail:
	xfer_free(x);
	return rc;
}

/* The transfer ended with rc: classify it, and commit or discard the .part. */
static void xfer_finish(struct xfer *x, CURLcode rc)
{
	struct nx_fetch_result *res = &x->res;
	x->cu->easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &res->http_code);
	res->status = NX_FETCH_OK;
	res->error[0] = '\0';
	if (x->local_err) {
		set_error(res, NX_FETCH_IO, "writing %s: %s", x->part, nx_strerror(x->local_err));
	} else if (x->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
		set_error(res, NX_FETCH_TOO_LARGE, "body larger than %llu bytes",
			  (unsigned long long)x->max_bytes);
	} else if (x->bad_status) {
		set_error(res, NX_FETCH_HTTP_ERROR, "HTTP status %ld", res->http_code);
	} else if (rc != CURLE_OK) {
		const char *why = x->errbuf[0] ? x->errbuf : x->cu->easy_strerror(rc);
		switch (rc) {
		case CURLE_OPERATION_TIMEDOUT:
			set_error(res, NX_FETCH_TIMEOUT, "timeout after %u ms: %s", x->timeout_ms,
				  why);
			break;
		case CURLE_TOO_MANY_REDIRECTS:
		case CURLE_HTTP_RETURNED_ERROR:
			set_error(res, NX_FETCH_HTTP_ERROR, "%s", why);
			break;
		case CURLE_WRITE_ERROR:
		case CURLE_OUT_OF_MEMORY:
			set_error(res, NX_FETCH_IO, "%s", why);
			break;
		default:
			set_error(res, NX_FETCH_NETWORK, "%s", why);
			break;
		}
	} else if (res->http_code == 304) {
		res->status = NX_FETCH_NOT_MODIFIED;
	} else if (res->http_code != 200) {
		set_error(res, NX_FETCH_HTTP_ERROR, "HTTP status %ld", res->http_code);
	} else {
		if (x->fd < 0) { /* a 200 with an empty body is still the new content */
			x->fd = open(x->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (x->fd < 0) {
				x->local_err = -errno;
				set_error(res, NX_FETCH_IO, "creating %s: %s", x->part,
					  nx_strerror(x->local_err));
			} else {
				x->part_created = true;
			}
		}
		if (x->fd >= 0) {
			int crc =
			    nx_tmp_commit(x->fd, x->part, x->dest); /* closes, unlinks on error */
			x->fd = -1;
			x->part_created = false;
			if (crc != 0) {
				set_error(res, NX_FETCH_IO, "committing %s: %s", x->dest,
					  nx_strerror(crc));
			}
		}
	}
	if (res->status != NX_FETCH_OK && x->fd >= 0) {
		close(x->fd);
		x->fd = -1;
	}
	if (res->status != NX_FETCH_OK && x->part_created) {
		unlink(x->part);
		x->part_created = false;
	}
	res->ms = nx_now_mono_ms() - x->t0;
}

static void fail_result(struct nx_fetch_result *res, int rc, const char *why)
{
	memset(res, 0, sizeof(*res));
	set_error(res, rc == -EINVAL ? NX_FETCH_NETWORK : NX_FETCH_IO, "%s",
		  why && *why ? why : nx_strerror(rc));
}

/* A transfer that ends by timeout (or is abandoned) may leave libcurl's threaded resolver
 * running detached: libcurl must then never be unmapped (curl.h). */
static bool may_leave_resolver(CURLcode rc)
{
	return rc == CURLE_OPERATION_TIMEDOUT;
}

int nx_fetch_sync(const struct nx_fetch_req *req, struct nx_fetch_result *res)
{
	const char *why = check_req(req);
	if (why) {
		fail_result(res, -EINVAL, why);
		return -EINVAL;
	}
	struct xfer *x;
	char err[sizeof(res->error)] = "";
	int rc = xfer_new(req, &x, err, sizeof(err));
	if (rc != 0) {
		fail_result(res, rc, err);
		return rc;
	}
	CURLcode crc = x->cu->easy_perform(x->easy);
	if (may_leave_resolver(crc)) {
		nx_curl_taint();
	}
	xfer_finish(x, crc);
	*res = x->res;
	xfer_free(x);
	return 0;
}

/* ---- the libuv driver ---- */

struct sock {
	uv_poll_t poll;		  /* closing it frees the struct */
	curl_socket_t fd;	  /* libcurl's socket (owned by libcurl) */
	struct nx_fetcher *f;	  /* borrowed: the owner */
	struct sock *prev, *next; /* f's list of open polls */
};

/*
 * The multi handle (and with it the fetcher's reference to libcurl) exists only from the
 * first transfer until NX_FETCH_LINGER_MS after the last one ended: an idle fetcher holds no
 * libcurl state, so the library can be unloaded between refresh rounds.
 */
struct nx_fetcher {
	uv_loop_t *loop;	  /* borrowed */
	const struct nx_curl *cu; /* a reference of ours while multi exists, else NULL */
	CURLM *multi;		  /* owned, NULL while idle */
	uv_timer_t timer;     /* libcurl's timeout, or the linger; its close callback frees us */
	struct xfer *xfers;   /* owned: active transfers */
	struct sock *socks;   /* owned: open poll handles */
	unsigned active;      /* transfers in xfers */
	unsigned dispatching; /* depth of completion dispatch (callbacks may free us) */
	bool dying;	      /* nx_fetcher_free was called */
	bool lingering;	      /* no transfer: the timer runs the linger, libcurl's is ignored */
	char error[256];      /* why the last nx_fetcher_start failed, "" when it did not */
};

static void sock_closed(uv_handle_t *h)
{
	struct sock *k = h->data;
	nx_mem_free(NX_OWNER_filter_build, k, sizeof(*k));
}

static void sock_close(struct nx_fetcher *f, struct sock *k)
{
	if (k->prev) {
		k->prev->next = k->next;
	} else {
		f->socks = k->next;
	}
	if (k->next) {
		k->next->prev = k->prev;
	}
	uv_close((uv_handle_t *)&k->poll, sock_closed);
}

/* Clean up the multi handle (its connection cache included) and drop our libcurl reference. */
static void drop_multi(struct nx_fetcher *f)
{
	if (!f->multi) {
		return;
	}
	f->cu->multi_cleanup(f->multi); /* may still report CURL_POLL_REMOVE for cached conns */
	f->multi = NULL;
	while (f->socks) {
		sock_close(f, f->socks);
	}
	f->cu = NULL;
	f->lingering = false;
	nx_curl_release();
}

static void on_linger(uv_timer_t *t)
{
	struct nx_fetcher *f = NX_CONTAINER_OF(t, struct nx_fetcher, timer);
	if (f->active == 0 && !f->dying) {
		drop_multi(f);
	}
}

static void teardown(struct nx_fetcher *f);

/* Hand every finished transfer to its callback. */
static void dispatch_done(struct nx_fetcher *f)
{
	f->dispatching++;
	CURLMsg *m;
	int left;
	while (!f->dying && f->multi && (m = f->cu->multi_info_read(f->multi, &left))) {
		if (m->msg != CURLMSG_DONE) {
			continue;
		}
		CURL *e = m->easy_handle;
		CURLcode rc = m->data.result; /* m is invalid after remove_handle */
		char *priv = NULL;
		f->cu->easy_getinfo(e, CURLINFO_PRIVATE, &priv);
		struct xfer *x = (struct xfer *)priv;
		f->cu->multi_remove_handle(f->multi, e);
		if (x->prev) {
			x->prev->next = x->next;
		} else {
			f->xfers = x->next;
		}
		if (x->next) {
			x->next->prev = x->prev;
		}
		f->active--;
		if (may_leave_resolver(rc)) {
			nx_curl_taint();
		}
		xfer_finish(x, rc);
		x->cb(x->ud, &x->res);
		xfer_free(x);
	}
	f->dispatching--;
	if (f->dying && f->dispatching == 0) {
		teardown(f);
	} else if (!f->dying && f->dispatching == 0 && f->active == 0 && f->multi &&
		   !f->lingering) {
		f->lingering = true;
		uv_timer_start(&f->timer, on_linger, NX_FETCH_LINGER_MS, 0);
	}
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct sock *k = h->data;
	struct nx_fetcher *f = k->f; /* k may be closed by socket_action */
	int flags = 0;
	if (status < 0) {
		flags = CURL_CSELECT_ERR;
	} else {
		flags |= (events & UV_READABLE) ? CURL_CSELECT_IN : 0;
		flags |= (events & UV_WRITABLE) ? CURL_CSELECT_OUT : 0;
	}
	int running;
	f->cu->multi_socket_action(f->multi, k->fd, flags, &running);
	dispatch_done(f);
}

static void on_timeout(uv_timer_t *t)
{
	struct nx_fetcher *f = NX_CONTAINER_OF(t, struct nx_fetcher, timer);
	int running;
	f->cu->multi_socket_action(f->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	dispatch_done(f);
}

/* CURLMOPT_TIMERFUNCTION: arm or stop the one timer (never act from inside this callback).
 * While lingering the timer is ours: libcurl then only keeps idle connections, which the
 * linger's end closes anyway. */
static int on_curl_timer(CURLM *multi, long ms, void *arg)
{
	struct nx_fetcher *f = arg;
	if (f->lingering) {
		return 0;
	}
	if (ms < 0) {
		uv_timer_stop(&f->timer);
	} else {
		uv_timer_start(&f->timer, on_timeout, (uint64_t)ms, 0);
	}
	return 0;
}

/* CURLMOPT_SOCKETFUNCTION: one uv_poll per libcurl socket, closed on CURL_POLL_REMOVE (before
 * libcurl closes the fd). */
static int on_curl_socket(CURL *e, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct nx_fetcher *f = arg;
	struct sock *k = sockp;
	if (what == CURL_POLL_REMOVE) {
		if (k) {
			sock_close(f, k);
			f->cu->multi_assign(f->multi, s, NULL);
		}
		return 0;
	}
	if (!k) {
		if (f->dying) {
			return -1;
		}
		k = nx_mem_calloc(NX_OWNER_filter_build, 1, sizeof(*k));
		if (!k) {
			return -1;
		}
		if (uv_poll_init_socket(f->loop, &k->poll, s) != 0) {
			nx_mem_free(NX_OWNER_filter_build, k, sizeof(*k));
			return -1;
		}
		k->poll.data = k;
		k->fd = s;
		k->f = f;
		k->next = f->socks;
		if (f->socks) {
			f->socks->prev = k;
		}
		f->socks = k;
		f->cu->multi_assign(f->multi, s, k);
	}
	int ev = 0;
	ev |= (what & CURL_POLL_IN) ? UV_READABLE : 0;
	ev |= (what & CURL_POLL_OUT) ? UV_WRITABLE : 0;
	uv_poll_start(&k->poll, ev, on_poll);
	return 0;
}

static void fetcher_closed(uv_handle_t *h)
{
	struct nx_fetcher *f = h->data;
	nx_mem_free(NX_OWNER_misc, f, sizeof(*f));
}

int nx_fetcher_new(uv_loop_t *loop, struct nx_fetcher **out)
{
	struct nx_fetcher *f = nx_mem_calloc(NX_OWNER_misc, 1, sizeof(*f)); /* long-lived */
	if (!f) {
		return -ENOMEM;
	}
	f->loop = loop;
	uv_timer_init(loop,
		      &f->timer); /* cannot fail; from here on the fetcher closes via the loop */
	f->timer.data = f;
	*out = f;
	return 0;
}

/* Load libcurl and make the multi handle for a first transfer. */
static int make_multi(struct nx_fetcher *f)
{
	f->cu = nx_curl_acquire(f->error, sizeof(f->error));
	if (!f->cu) {
		return -ELIBACC;
	}
	f->multi = f->cu->multi_init();
	int bad = !f->multi;
	if (!bad) {
		CURLM *m = f->multi;
		bad |= f->cu->multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK;
		bad |= f->cu->multi_setopt(m, CURLMOPT_SOCKETDATA, f) != CURLM_OK;
		bad |= f->cu->multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK;
		bad |= f->cu->multi_setopt(m, CURLMOPT_TIMERDATA, f) != CURLM_OK;
	}
	if (bad) {
		snprintf(f->error, sizeof(f->error), "libcurl refused a multi handle");
		drop_multi(f);
		if (f->cu) { /* multi_init itself failed: drop_multi had nothing to clean */
			f->cu = NULL;
			nx_curl_release();
		}
		return -EIO;
	}
	return 0;
}

/* Cancel everything and close the handles; the timer's close callback frees f. */
static void teardown(struct nx_fetcher *f)
{
	if (f->xfers) {
		nx_curl_taint(); /* abandoned mid-transfer: a resolver thread may still run */
	}
	while (f->xfers) {
		struct xfer *x = f->xfers;
		f->xfers = x->next;
		f->cu->multi_remove_handle(f->multi, x->easy);
		xfer_free(x); /* removes the .part */
	}
	f->active = 0;
	drop_multi(f);
	uv_timer_stop(&f->timer);
	uv_close((uv_handle_t *)&f->timer, fetcher_closed);
}

void nx_fetcher_free(struct nx_fetcher *f)
{
	if (!f || f->dying) {
		return;
	}
	f->dying = true;
	if (f->dispatching == 0) {
		teardown(f);
	}
	/* else: dispatch_done tears down once the running callback returns */
}

int nx_fetcher_start(struct nx_fetcher *f, const struct nx_fetch_req *req, nx_fetch_cb cb, void *ud)
{
	if (!f || !cb) {
		return -EINVAL;
	}
	if (f->dying) {
		return -ECANCELED;
	}
	if (check_req(req)) {
		snprintf(f->error, sizeof(f->error), "%s", check_req(req));
		return -EINVAL;
	}
	f->error[0] = '\0';
	int rc = f->multi ? 0 : make_multi(f);
	if (rc != 0) {
		return rc;
	}
	if (f->lingering) {
		f->lingering = false;
		uv_timer_stop(&f->timer);
	}
	struct xfer *x;
	rc = xfer_new(req, &x, f->error, sizeof(f->error));
	if (rc != 0) {
		return rc;
	}
	x->f = f;
	x->cb = cb;
	x->ud = ud;
	if (f->cu->multi_add_handle(f->multi, x->easy) != CURLM_OK) {
		xfer_free(x);
		snprintf(f->error, sizeof(f->error), "libcurl refused the transfer");
		return -EIO;
	}
	x->next = f->xfers;
	if (f->xfers) {
		f->xfers->prev = x;
	}
	f->xfers = x;
	f->active++;
	return 0;
}

unsigned nx_fetcher_active(const struct nx_fetcher *f)
{
	return f ? f->active : 0;
}

const char *nx_fetcher_error(const struct nx_fetcher *f)
{
	return f ? f->error : "";
}

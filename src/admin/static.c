/*
 * Serving the embedded web admin (static.h). Headers, and why:
 * - Content-Encoding: gzip when the client accepts it, else the identity copy; Vary tells
 *   caches the answer depends on Accept-Encoding.
 * - ETag per coding and If-None-Match -> 304: a reload of index.html costs one round trip.
 * - Cache-Control: hashed names are immutable for a year; index.html is "no-cache" (always
 *   revalidated) so a new binary's UI shows on the next load.
 * - Content-Security-Policy: only our own scripts, styles and API (no inline script or
 *   style element, no other host, no framing, no plugins); Referrer-Policy no-referrer;
 *   X-Content-Type-Options nosniff; X-Frame-Options DENY for browsers without CSP level 2.
 *
 * http.c's common reply path marks every answer "Cache-Control: no-store" (right for the API,
 * wrong for files), so this file queues its responses itself and does the same bookkeeping
 * (req->replied, the status-class counter).
 */
#include "admin/static.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "admin/impl.h"
#include "base/err.h"

#define CSP                                                                                        \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "          \
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
#define CACHE_IMMUTABLE "public, max-age=31536000, immutable" /* a year: RFC 8246 */
#define CACHE_REVALIDATE "no-cache"

const struct nx_admin_asset *nx_admin_asset_find(const char *path)
{
	for (size_t i = 0; i < nx_admin_n_assets; i++) {
		if (strcmp(nx_admin_assets[i].path, path) == 0) {
			return &nx_admin_assets[i];
		}
	}
	return NULL;
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* The next comma-separated element of a header list: [*s, end) trimmed; false at the end. */
static bool next_elem(const char **s, const char **b, const char **e)
{
	const char *p = *s;
	while (*p == ',' || is_ows(*p)) {
		p++;
	}
	if (!*p) {
		return false;
	}
	const char *start = p;
	bool quoted = false;
	while (*p && (quoted || *p != ',')) {
		if (*p == '"') {
			quoted = !quoted;
		}
		p++;
	}
	const char *end = p;
	while (end > start && is_ows(end[-1])) {
		end--;
	}
	*b = start;
	*e = end;
	*s = p;
	return true;
}

/* q of a coding's parameters ("; q=0.5"): 0 only for q=0, q=0.0, q=0.00, q=0.000. */
static bool q_is_zero(const char *params, const char *end)
{
	const char *q = params;
	while (q < end) {
		while (q < end && (*q == ';' || is_ows(*q))) {
			q++;
		}
		if (end - q >= 2 && (q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
			q += 2;
			if (q >= end || *q != '0') {
				return false;
			}
			for (q++; q < end && !is_ows(*q) && *q != ';'; q++) {
				if (*q != '.' && *q != '0') {
					return false;
				}
			}
			return true;
		}
		while (q < end && *q != ';') {
			q++;
		}
	}
	return false;
}

bool nx_admin_accepts_gzip(const char *accept_encoding)
{
	if (!accept_encoding) {
		return false;
	}
	const char *s = accept_encoding, *b, *e;
	bool star = false, gzip = false, gzip_refused = false;
	while (next_elem(&s, &b, &e)) {
		const char *semi = memchr(b, ';', (size_t)(e - b));
		const char *tend = semi ? semi : e;
		while (tend > b && is_ows(tend[-1])) {
			tend--;
		}
		size_t tlen = (size_t)(tend - b);
		bool zero = semi && q_is_zero(semi, e);
		if ((tlen == 4 && strncasecmp(b, "gzip", 4) == 0) ||
		    (tlen == 6 && strncasecmp(b, "x-gzip", 6) == 0)) {
			gzip = gzip || !zero;
			gzip_refused = gzip_refused || zero;
		} else if (tlen == 1 && *b == '*') {
			star = !zero;
		}
	}
	return gzip || (star && !gzip_refused);
}

bool nx_admin_etag_matches(const char *if_none_match, const char *etag)
{
	if (!if_none_match) {
		return false;
	}
	size_t elen = strlen(etag);
	const char *s = if_none_match, *b, *e;
	while (next_elem(&s, &b, &e)) {
		if (e - b == 1 && *b == '*') {
			return true;
		}
		if (e - b >= 2 && b[0] == 'W' && b[1] == '/') {
			b += 2;
		}
		if ((size_t)(e - b) == elen && memcmp(b, etag, elen) == 0) {
			return true;
		}
	}
	return false;
}

static bool add_headers(struct MHD_Response *r, const struct nx_admin_asset *f, const char *etag,
			bool gz)
{
	bool ok = MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag) == MHD_YES &&
		  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL,
					  f->immutable ? CACHE_IMMUTABLE : CACHE_REVALIDATE) ==
		      MHD_YES &&
		  MHD_add_response_header(r, "Content-Security-Policy", CSP) == MHD_YES &&
		  MHD_add_response_header(r, "Referrer-Policy", "no-referrer") == MHD_YES &&
		  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES &&
		  MHD_add_response_header(r, "X-Frame-Options", "DENY") == MHD_YES;
	if (ok && f->gz) {
		ok = MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Accept-Encoding") == MHD_YES;
	}
	if (ok && gz) {
		ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip") == MHD_YES;
	}
	return ok;
}

/* Queue `r` (destroyed here) as http.c's queue() does, without its Cache-Control: no-store. */
static int queue_file(struct nx_admin_req *req, unsigned status, struct MHD_Response *r)
{
	if (req->replied) {
		MHD_destroy_response(r);
		return NX_EMALFORMED;
	}
	enum MHD_Result ok = MHD_queue_response(req->conn, status, r);
	MHD_destroy_response(r);
	if (ok != MHD_YES) {
		return -EIO;
	}
	req->replied = true;
	req->admin->ctr[status < 300 ? NX_ADMIN_CTR_RESP_2XX : NX_ADMIN_CTR_RESP_3XX]++;
	return 0;
}

int nx_admin_handle_static(struct nx_admin_req *req)
{
	const struct nx_admin_asset *f = nx_admin_asset_find(req->path);
	if (!f) {
		if (nx_admin_n_assets == 0 && strcmp(req->path, "/") == 0) {
			return nx_admin_reply_error(req, 404, "ui_not_built", NULL,
						    "this nxdns was built without the web admin "
						    "(-Dui=disabled)");
		}
		return nx_admin_reply_error(req, 404, "not_found", NULL, "no file %s", req->path);
	}
	bool gz = f->gz && nx_admin_accepts_gzip(nx_admin_req_header(req, "Accept-Encoding"));
	const char *etag = gz ? f->etag_gz : f->etag;
	bool fresh = nx_admin_etag_matches(nx_admin_req_header(req, "If-None-Match"), etag);
	struct MHD_Response *r;
	if (fresh) {
		r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer(gz ? f->gz_len : f->raw_len,
						    (void *)(gz ? f->gz : f->raw),
						    MHD_RESPMEM_PERSISTENT);
	}
	if (!r) {
		return -ENOMEM;
	}
	if ((!fresh && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
					       f->content_type) != MHD_YES) ||
	    !add_headers(r, f, etag, gz && !fresh)) {
		MHD_destroy_response(r);
		return -ENOMEM;
	}
	return queue_file(req, fresh ? 304 : 200, r);
}

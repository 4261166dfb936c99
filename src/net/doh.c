#include "net/doh.h"

#include <stdbool.h>
#include <string.h>

#include "base/err.h"
#include "dns/msg.h"
#include "dns/wire.h"

static const char doh_path[] = "/dns-query";
static const char doh_ctype[] = "application/dns-message";

/* ---- base64url: an incremental decoder, so percent-decoded bytes stream straight in ---- */

struct b64 {
	uint8_t *out;	/* borrowed: caller's buffer */
	size_t cap;	/* its size */
	size_t n;	/* bytes produced so far */
	uint32_t acc;	/* pending bits, low `bits` of them valid */
	unsigned bits;	/* 0..18 */
	unsigned chars; /* characters consumed */
	int err;	/* sticky: 0, NX_EMALFORMED or NX_ETRUNC */
};

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z') {
		return c - 'A';
	}
	if (c >= 'a' && c <= 'z') {
		return c - 'a' + 26;
	}
	if (c >= '0' && c <= '9') {
		return c - '0' + 52;
	}
	if (c == '-') {
		return 62;
	}
	if (c == '_') {
		return 63;
	}
	return -1; /* includes '=': RFC 8484 4.1 says the padding is omitted */
}

static void b64_push(struct b64 *d, unsigned char c)
{
	if (d->err) {
		return;
	}
	int v = b64_value(c);
	if (v < 0) {
		d->err = NX_EMALFORMED;
		return;
	}
	d->acc = (d->acc << 6) | (uint32_t)v;
	d->bits += 6;
	d->chars++;
	if (d->bits >= 8) {
		d->bits -= 8;
		if (d->n >= d->cap) {
			d->err = NX_ETRUNC;
			return;
		}
		d->out[d->n++] = (uint8_t)(d->acc >> d->bits);
		d->acc &= (1u << d->bits) - 1;
	}
}

static int b64_end(struct b64 *d)
{
	if (d->err) {
		return d->err;
	}
	/* 4n+1 characters cannot encode whole bytes; leftover bits must be zero (canonical) */
	if (d->chars % 4 == 1 || d->acc != 0) {
		return NX_EMALFORMED;
	}
	return 0;
}

int nx_doh_b64url_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
	struct b64 d = {.out = out, .cap = cap};
	for (size_t i = 0; i < len && !d.err; i++) {
		b64_push(&d, (unsigned char)in[i]);
	}
	*out_len = d.n;
	int rc = b64_end(&d);
	if (rc) {
		*out_len = 0;
	}
	return rc;
}

/* ---- path ---- */

static bool client_id_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-';
}

int nx_doh_path_parse(const char *path, size_t len, char client_id[NX_DOH_CLIENT_ID_MAX + 1],
		      const char **query, size_t *query_len)
{
	client_id[0] = '\0';
	*query = NULL;
	*query_len = 0;
	const size_t plen = sizeof(doh_path) - 1;
	if (len < plen || memcmp(path, doh_path, plen) != 0) {
		return NX_ENOTFOUND;
	}
	size_t i = plen;
	if (i < len && path[i] == '/') {
		size_t start = ++i;
		while (i < len && path[i] != '?') {
			unsigned char c = (unsigned char)path[i];
			if (!client_id_char(c) || i - start >= NX_DOH_CLIENT_ID_MAX) {
				client_id[0] = '\0';
				return NX_ENOTFOUND;
			}
			client_id[i - start] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
			i++;
		}
		client_id[i - start] = '\0';
	}
	if (i == len) {
		return 0;
	}
	if (path[i] != '?') {
		return NX_ENOTFOUND; /* "/dns-queryX", "/dns-query.json" */
	}
	*query = path + i + 1;
	*query_len = len - i - 1;
	return 0;
}

/* ---- query string ---- */

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	c |= 0x20;
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	return -1;
}

/* Percent-decode the byte at s[*i] (advancing *i); -1 for a broken escape. */
static int pct_next(const char *s, size_t len, size_t *i)
{
	unsigned char c = (unsigned char)s[*i];
	if (c != '%') {
		(*i)++;
		return c;
	}
	if (len - *i < 3) {
		return -1;
	}
	int hi = hexval((unsigned char)s[*i + 1]), lo = hexval((unsigned char)s[*i + 2]);
	if (hi < 0 || lo < 0) {
		return -1;
	}
	*i += 3;
	return hi << 4 | lo;
}

/* Does the percent-encoded name s[0..len) decode to exactly "dns"? */
static bool name_is_dns(const char *s, size_t len)
{
	static const char want[] = "dns";
	size_t i = 0, k = 0;
	while (i < len) {
		int c = pct_next(s, len, &i);
		if (c < 0 || k >= 3 || c != want[k]) {
			return false;
		}
		k++;
	}
	return k == 3;
}

int nx_doh_query_dns(const char *query, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
	*out_len = 0;
	const char *val = NULL;
	size_t val_len = 0;
	bool found = false;
	size_t i = 0;
	while (i <= len) {
		size_t end = i;
		while (end < len && query[end] != '&') {
			end++;
		}
		size_t eq = i;
		while (eq < end && query[eq] != '=') {
			eq++;
		}
		if (name_is_dns(query + i, eq - i)) {
			if (found) {
				return NX_EMALFORMED; /* two dns= : which one would we answer? */
			}
			found = true;
			val = eq < end ? query + eq + 1 : query + end;
			val_len = eq < end ? end - eq - 1 : 0;
		}
		i = end + 1;
	}
	if (!found) {
		return NX_ENOTFOUND;
	}
	if (val_len == 0) {
		return NX_EMALFORMED;
	}
	struct b64 d = {.out = out, .cap = cap};
	for (size_t k = 0; k < val_len && !d.err;) {
		int c = pct_next(val, val_len, &k);
		if (c < 0) {
			return NX_EMALFORMED;
		}
		b64_push(&d, (unsigned char)c);
	}
	int rc = b64_end(&d);
	if (rc == 0) {
		*out_len = d.n;
	}
	return rc;
}

/* ---- the request ---- */

static bool token_is(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && memcmp(s, lit, n) == 0;
}

/* "application/dns-message" with optional whitespace and parameters, any letter case. */
static bool ctype_ok(const char *s, size_t len)
{
	if (!s) {
		return false;
	}
	size_t i = 0;
	while (i < len && (s[i] == ' ' || s[i] == '\t')) {
		i++;
	}
	const size_t n = sizeof(doh_ctype) - 1;
	if (len - i < n) {
		return false;
	}
	for (size_t k = 0; k < n; k++) {
		unsigned char c = (unsigned char)s[i + k];
		if ((c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c) != (unsigned char)doh_ctype[k]) {
			return false;
		}
	}
	i += n;
	while (i < len && (s[i] == ' ' || s[i] == '\t')) {
		i++;
	}
	return i == len || s[i] == ';';
}

int nx_doh_request(const struct nx_doh_req *in, uint8_t *msg, size_t cap, size_t *msg_len,
		   char client_id[NX_DOH_CLIENT_ID_MAX + 1])
{
	*msg_len = 0;
	const char *query;
	size_t query_len;
	if (!in->path || nx_doh_path_parse(in->path, in->path_len, client_id, &query, &query_len)) {
		return 404;
	}
	int status = 200;
	size_t limit = NX_MIN(cap, (size_t)NX_DOH_MSG_MAX);
	if (in->method && token_is(in->method, in->method_len, "GET")) {
		size_t n = 0;
		int rc = query ? nx_doh_query_dns(query, query_len, msg, limit, &n) : NX_ENOTFOUND;
		if (rc == NX_ETRUNC) {
			status = 414;
		} else if (rc < 0 || n < NX_DNS_HDR_LEN) {
			status = 400;
		} else {
			*msg_len = n;
		}
	} else if (in->method && token_is(in->method, in->method_len, "POST")) {
		if (!ctype_ok(in->content_type, in->content_type_len)) {
			status = 415;
		} else if (in->body_len > limit) {
			status = 413;
		} else if (in->body_len < NX_DNS_HDR_LEN || !in->body) {
			status = 400;
		} else {
			memmove(msg, in->body, in->body_len);
			*msg_len = in->body_len;
		}
	} else {
		status = 405;
	}
	if (status != 200) {
		client_id[0] = '\0';
	}
	return status;
}

/* ---- cache-control ---- */

static uint32_t ttl_value(uint32_t t)
{
	return t > 0x7fffffffu ? 0 : t;
}

uint32_t nx_doh_min_ttl(const uint8_t *msg, size_t len)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, len);
	nx_dns_rd_skip(&rd, 4); /* id, flags */
	uint16_t qd = nx_dns_rd_u16(&rd), an = nx_dns_rd_u16(&rd), ns = nx_dns_rd_u16(&rd);
	nx_dns_rd_skip(&rd, 2); /* arcount */
	for (unsigned i = 0; i < qd && !rd.err; i++) {
		nx_dns_rd_skip_name(&rd);
		nx_dns_rd_skip(&rd, 4);
	}
	bool have = false;
	uint32_t min = UINT32_MAX;
	for (unsigned i = 0; i < an && !rd.err; i++) {
		nx_dns_rd_skip_name(&rd);
		nx_dns_rd_skip(&rd, 4); /* type, class */
		uint32_t ttl = ttl_value(nx_dns_rd_u32(&rd));
		nx_dns_rd_skip(&rd, nx_dns_rd_u16(&rd));
		if (!rd.err) {
			have = true;
			min = NX_MIN(min, ttl);
		}
	}
	if (rd.err) {
		return 0;
	}
	if (have) {
		return min;
	}
	for (unsigned i = 0; i < ns && !rd.err; i++) {
		nx_dns_rd_skip_name(&rd);
		uint16_t type = nx_dns_rd_u16(&rd);
		nx_dns_rd_skip(&rd, 2);
		uint32_t ttl = ttl_value(nx_dns_rd_u32(&rd));
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		const uint8_t *rdata = nx_dns_rd_bytes(&rd, rdlen);
		/* MNAME and RNAME (>= 1 byte each) then five u32: MINIMUM is the last four bytes */
		if (!rd.err && type == NX_DNS_T_SOA && rdlen >= 22) {
			const uint8_t *m = rdata + rdlen - 4;
			uint32_t minimum = (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 |
					   (uint32_t)m[2] << 8 | m[3];
			return NX_MIN(ttl, ttl_value(minimum));
		}
	}
	return 0;
}

/*
 * libFuzzer target for the DoH layer. Input: one mode byte, then fields separated by '\n'.
 *  - mode bit 7 clear: nx_doh_request on (method from bits 0-1: GET, POST, HEAD, "PUT"; path;
 *    content-type; body = the rest, which may hold '\n'). Properties: the status is one we
 *    document; on 200 the message is a header or more, within the buffer, and the client id
 *    is [a-z0-9-]{0,64}; a GET's dns= value decodes canonically (re-encoding it gives the
 *    bytes back); nx_doh_min_ttl never exceeds 2^31-1.
 *  - mode bit 7 set: the rest is raw HTTP/2 from a client, fed to an nx_h2 session after a
 *    valid preface + SETTINGS + ACK, in two pieces split at mode bits 0-6; every query is
 *    answered at once (by stream parity: 200, 503 or a reset). Property: nothing crashes and
 *    the doh_sessions ledger owner is back where it was after nx_h2_free.
 * A broken property aborts. Built with -fsanitize=fuzzer when meson -Dfuzzing=true, and always
 * as fuzz_doh_replay so tests/fuzz/corpus/doh replays in `meson test`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "net/doh.h"
#include "net/h2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_doh: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#x);                                                               \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static uint8_t msg[NX_DOH_MSG_MAX];
static uint8_t again[NX_DOH_MSG_MAX];
static char enc[NX_DOH_MSG_MAX * 2];

static size_t b64url(const uint8_t *in, size_t len, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < len ? in[i + 2] : 0);
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		if (i + 1 < len) {
			out[o++] = a[v >> 6 & 63];
		}
		if (i + 2 < len) {
			out[o++] = a[v & 63];
		}
	}
	return o;
}

static const char *field(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *s = *p;
	const uint8_t *nl = memchr(s, '\n', (size_t)(end - s));
	const uint8_t *e = nl ? nl : end;
	*len = (size_t)(e - s);
	*p = nl ? nl + 1 : end;
	return (const char *)s;
}

static void request(uint8_t mode, const uint8_t *p, const uint8_t *end)
{
	static const char *const methods[] = {"GET", "POST", "HEAD", "PUT"};
	struct nx_doh_req r = {.method = methods[mode & 3],
			       .method_len = strlen(methods[mode & 3])};
	r.path = field(&p, end, &r.path_len);
	r.content_type = field(&p, end, &r.content_type_len);
	r.body = p;
	r.body_len = (size_t)(end - p);
	/* the cap follows the mode byte, so small buffers are exercised too */
	size_t cap = mode & 4 ? 64 : sizeof(msg);
	size_t n = 1;
	char cid[NX_DOH_CLIENT_ID_MAX + 1];
	memset(cid, 'x', sizeof(cid));
	int st = nx_doh_request(&r, msg, cap, &n, cid);
	CHECK(st == 200 || st == 400 || st == 404 || st == 405 || st == 413 || st == 414 ||
	      st == 415);
	size_t cl = strnlen(cid, sizeof(cid));
	CHECK(cl <= NX_DOH_CLIENT_ID_MAX);
	for (size_t i = 0; i < cl; i++) {
		CHECK((cid[i] >= 'a' && cid[i] <= 'z') || (cid[i] >= '0' && cid[i] <= '9') ||
		      cid[i] == '-');
	}
	if (st != 200) {
		CHECK(n == 0 && cl == 0);
	} else {
		CHECK(n >= 12 && n <= cap);
		CHECK(nx_doh_min_ttl(msg, n) <= 0x7fffffffu);
		/* canonical: the decoded bytes re-encode to a value the decoder maps back */
		size_t el = b64url(msg, n, enc);
		size_t n2;
		CHECK(nx_doh_b64url_decode(enc, el, again, sizeof(again), &n2) == 0);
		CHECK(n2 == n && memcmp(again, msg, n) == 0);
	}
	/* the raw decoder on the body: success means re-encoding gives the input back */
	size_t dn;
	if (r.body_len <= sizeof(enc) &&
	    nx_doh_b64url_decode((const char *)r.body, r.body_len, msg, sizeof(msg), &dn) == 0) {
		CHECK(b64url(msg, dn, enc) == r.body_len);
		CHECK(memcmp(enc, r.body, r.body_len) == 0);
	}
	CHECK(nx_doh_min_ttl(r.body, r.body_len) <= 0x7fffffffu);
}

/* ---- raw HTTP/2 ---- */

struct h2fx {
	struct nx_h2 *h;
};

static int h2_send(void *ud, const uint8_t *d, size_t len)
{
	return 0;
}

static void h2_query(void *ud, int32_t stream, const uint8_t *q, size_t len, const char *cid)
{
	struct h2fx *f = ud;
	CHECK(len >= 12 && len <= NX_DOH_MSG_MAX);
	CHECK(strlen(cid) <= NX_DOH_CLIENT_ID_MAX);
	switch (stream % 3) {
	case 0:
		/* echo the query back as the answer: any bytes must be accepted and sent */
		CHECK(nx_h2_respond(f->h, stream, q, len) == 0);
		break;
	case 1:
		CHECK(nx_h2_error(f->h, stream, 503) == 0);
		break;
	default:
		CHECK(nx_h2_reset(f->h, stream, 7) == 0);
		break;
	}
}

static int64_t led(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_doh_sessions].bytes;
}

static void raw_h2(uint8_t mode, const uint8_t *p, size_t len)
{
	static const uint8_t hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
				       "\0\0\0\4\0\0\0\0\0"  /* SETTINGS */
				       "\0\0\0\4\1\0\0\0\0"; /* ACK of ours */
	static const struct nx_h2_io io = {.send = h2_send, .query = h2_query};
	int64_t before = led();
	struct h2fx f;
	struct nx_h2_limits lim = {.max_streams = 4, .max_body = 512};
	CHECK(nx_h2_server_new(&lim, &io, &f, &f.h) == 0);
	CHECK(nx_h2_feed(f.h, hello, sizeof(hello) - 1) == 0);
	size_t cut = NX_MIN((size_t)(mode & 0x7f), len);
	if (nx_h2_feed(f.h, p, cut) == 0) {
		nx_h2_feed(f.h, p + cut, len - cut);
	}
	(void)nx_h2_streams_open(f.h);
	(void)nx_h2_want_close(f.h);
	nx_h2_free(f.h);
	CHECK(led() == before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) {
		return 0;
	}
	uint8_t mode = data[0];
	if (mode & 0x80) {
		raw_h2(mode, data + 1, size - 1);
	} else {
		request(mode, data + 1, data + size);
	}
	return 0;
}

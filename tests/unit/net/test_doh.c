/*
 * RFC 8484 request handling (net/doh.c): every HTTP status nx_doh_request gives, base64url
 * edge cases (padding, alphabet, 4n+1 lengths, non-canonical trailing bits, output bound),
 * query-string forms (other parameters, percent-escapes, duplicates), client id forms, and the
 * cache-control lifetime of answers, negative answers and unwalkable messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "net/doh.h"

/* www.example.com A, id 0x1234, RD */
static const uint8_t query_a[] = {0x12, 0x34, 0x01, 0x00, 0,   1,   0,	 0,   0,   0,	0,
				  0,	3,    'w',  'w',  'w', 7,   'e', 'x', 'a', 'm', 'p',
				  'l',	'e',  3,    'c',  'o', 'm', 0,	 0,   1,   0,	1};

static void b64url(const uint8_t *in, size_t len, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < len) {
			v |= (uint32_t)in[i + 1] << 8;
		}
		if (i + 2 < len) {
			v |= in[i + 2];
		}
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		if (i + 1 < len) {
			out[o++] = a[v >> 6 & 63];
		}
		if (i + 2 < len) {
			out[o++] = a[v & 63];
		}
	}
	out[o] = '\0';
}

static int get(const char *path, uint8_t *msg, size_t cap, size_t *n, char *cid)
{
	struct nx_doh_req r = {
	    .method = "GET", .method_len = 3, .path = path, .path_len = strlen(path)};
	return nx_doh_request(&r, msg, cap, n, cid);
}

static int post(const char *path, const char *ctype, const uint8_t *body, size_t len, uint8_t *msg,
		size_t cap, size_t *n, char *cid)
{
	struct nx_doh_req r = {.method = "POST",
			       .method_len = 4,
			       .path = path,
			       .path_len = strlen(path),
			       .content_type = ctype,
			       .content_type_len = ctype ? strlen(ctype) : 0,
			       .body = body,
			       .body_len = len};
	return nx_doh_request(&r, msg, cap, n, cid);
}

static void test_b64url(void **state)
{
	uint8_t out[16];
	size_t n;
	/* RFC 4648 10 vectors, unpadded */
	static const struct {
		const char *in, *out;
	} ok[] = {{"", ""},	      {"Zg", "f"},	    {"Zm8", "fo"},	   {"Zm9v", "foo"},
		  {"Zm9vYg", "foob"}, {"Zm9vYmE", "fooba"}, {"Zm9vYmFy", "foobar"}};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(
		    nx_doh_b64url_decode(ok[i].in, strlen(ok[i].in), out, sizeof(out), &n), 0);
		assert_int_equal(n, strlen(ok[i].out));
		assert_memory_equal(out, ok[i].out, n);
	}
	/* the url-safe alphabet: 0xfb 0xff -> "-_8" (standard base64 would be "+/8") */
	assert_int_equal(nx_doh_b64url_decode("-_8", 3, out, sizeof(out), &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 0xfb);
	assert_int_equal(out[1], 0xff);
	/* rejected: padding, the standard alphabet, 4n+1, stray bits, whitespace */
	const char *bad[] = {"Zg==", "Zg=", "Zm8=", "+/8", "Zm9vY", "Zh", "Zm9", "Zm 9v", "Zm9v\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(nx_doh_b64url_decode(bad[i], strlen(bad[i]), out, sizeof(out), &n),
				 NX_EMALFORMED);
		assert_int_equal(n, 0);
	}
	/* output bound: nothing written past cap */
	memset(out, 0xaa, sizeof(out));
	assert_int_equal(nx_doh_b64url_decode("Zm9vYmFy", 8, out, 5, &n), NX_ETRUNC);
	assert_int_equal(out[5], 0xaa);
	assert_int_equal(nx_doh_b64url_decode("Zm9vYmFy", 8, out, 6, &n), 0);
}

static void test_path(void **state)
{
	char cid[NX_DOH_CLIENT_ID_MAX + 1];
	const char *q;
	size_t ql;
	assert_int_equal(nx_doh_path_parse("/dns-query", 10, cid, &q, &ql), 0);
	assert_string_equal(cid, "");
	assert_null(q);
	assert_int_equal(nx_doh_path_parse("/dns-query?dns=x", 16, cid, &q, &ql), 0);
	assert_int_equal(ql, 5);
	assert_memory_equal(q, "dns=x", 5);
	assert_int_equal(nx_doh_path_parse("/dns-query/", 11, cid, &q, &ql), 0);
	assert_string_equal(cid, "");
	const char *p = "/dns-query/Laptop-7?dns=x";
	assert_int_equal(nx_doh_path_parse(p, strlen(p), cid, &q, &ql), 0);
	assert_string_equal(cid, "laptop-7");
	assert_memory_equal(q, "dns=x", 5);
	char longest[128] = "/dns-query/";
	memset(longest + 11, 'a', 64);
	assert_int_equal(nx_doh_path_parse(longest, strlen(longest), cid, &q, &ql), 0);
	assert_int_equal(strlen(cid), 64);
	longest[11 + 64] = 'a';
	assert_int_equal(nx_doh_path_parse(longest, strlen(longest), cid, &q, &ql), NX_ENOTFOUND);
	assert_string_equal(cid, "");
	const char *bad[] = {"/",
			     "/dns",
			     "/dns-queryx",
			     "/dns-query.json",
			     "/DNS-QUERY",
			     "/dns-query/a/b",
			     "/dns-query/a_b",
			     "/dns-query/a%2db",
			     "/dns-query/a.b",
			     "dns-query",
			     "/resolve?dns=x",
			     "*"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(nx_doh_path_parse(bad[i], strlen(bad[i]), cid, &q, &ql),
				 NX_ENOTFOUND);
	}
}

static void test_query_string(void **state)
{
	uint8_t out[64];
	size_t n;
	const char *q = "ct=application/dns-message&dns=Zm9v&x=1";
	assert_int_equal(nx_doh_query_dns(q, strlen(q), out, sizeof(out), &n), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(out, "foo", 3);
	/* percent-escapes in the value and in the name */
	q = "%64ns=Zm%39v";
	assert_int_equal(nx_doh_query_dns(q, strlen(q), out, sizeof(out), &n), 0);
	assert_memory_equal(out, "foo", 3);
	q = "dnsx=Zm9v&xdns=Zm9v";
	assert_int_equal(nx_doh_query_dns(q, strlen(q), out, sizeof(out), &n), NX_ENOTFOUND);
	assert_int_equal(nx_doh_query_dns("", 0, out, sizeof(out), &n), NX_ENOTFOUND);
	const char *bad[] = {"dns=Zm9v&dns=Zm9v", "dns=",	"dns",
			     "dns=Zm9v%",	  "dns=Zm9v%3", "dns=Zm9v%zz",
			     "dns=Zg%3D%3D",	  "dns=Zm+v",	"dns=Zm9v&a=1&dns="};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(nx_doh_query_dns(bad[i], strlen(bad[i]), out, sizeof(out), &n),
				 NX_EMALFORMED);
	}
	assert_int_equal(nx_doh_query_dns("dns=Zm9vYmFy", 12, out, 4, &n), NX_ETRUNC);
}

static void test_request_get(void **state)
{
	char path[320], b64[128], cid[NX_DOH_CLIENT_ID_MAX + 1];
	uint8_t msg[512];
	size_t n;
	b64url(query_a, sizeof(query_a), b64);
	snprintf(path, sizeof(path), "/dns-query?dns=%s", b64);
	assert_int_equal(get(path, msg, sizeof(msg), &n, cid), 200);
	assert_int_equal(n, sizeof(query_a));
	assert_memory_equal(msg, query_a, n);
	assert_string_equal(cid, "");
	snprintf(path, sizeof(path), "/dns-query/Kids-Tablet?foo=bar&dns=%s", b64);
	assert_int_equal(get(path, msg, sizeof(msg), &n, cid), 200);
	assert_string_equal(cid, "kids-tablet");
	/* 400: no dns=, bad encoding, duplicate, shorter than a header */
	assert_int_equal(get("/dns-query", msg, sizeof(msg), &n, cid), 400);
	assert_int_equal(get("/dns-query?name=example.com", msg, sizeof(msg), &n, cid), 400);
	assert_int_equal(get("/dns-query?dns=AAAA====", msg, sizeof(msg), &n, cid), 400);
	snprintf(path, sizeof(path), "/dns-query?dns=%s&dns=%s", b64, b64);
	assert_int_equal(get(path, msg, sizeof(msg), &n, cid), 400);
	assert_int_equal(n, 0);
	assert_int_equal(get("/dns-query?dns=AAAAAAAAAAAAAA", msg, sizeof(msg), &n, cid), 400);
	/* 414: more than the caller's buffer */
	snprintf(path, sizeof(path), "/dns-query?dns=%s", b64);
	assert_int_equal(get(path, msg, 20, &n, cid), 414);
	/* 404 wins over everything else, and the client id is cleared */
	snprintf(path, sizeof(path), "/dns-query/bad_id?dns=%s", b64);
	assert_int_equal(get(path, msg, sizeof(msg), &n, cid), 404);
	assert_string_equal(cid, "");
	assert_int_equal(get("/", msg, sizeof(msg), &n, cid), 404);
}

static void test_request_post(void **state)
{
	char cid[NX_DOH_CLIENT_ID_MAX + 1];
	uint8_t msg[512];
	size_t n;
	const char *ct = "application/dns-message";
	assert_int_equal(
	    post("/dns-query", ct, query_a, sizeof(query_a), msg, sizeof(msg), &n, cid), 200);
	assert_int_equal(n, sizeof(query_a));
	assert_memory_equal(msg, query_a, n);
	/* content-type: case, whitespace and parameters are fine */
	const char *good[] = {"Application/DNS-Message", " application/dns-message ",
			      "application/dns-message; charset=binary",
			      "application/dns-message;x"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(post("/dns-query/phone", good[i], query_a, sizeof(query_a), msg,
				      sizeof(msg), &n, cid),
				 200);
		assert_string_equal(cid, "phone");
	}
	/* 415: absent, other types, a longer subtype */
	const char *bad[] = {NULL,
			     "",
			     "text/plain",
			     "application/dns-message-x",
			     "application/dns",
			     "application/json; application/dns-message"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
		    post("/dns-query", bad[i], query_a, sizeof(query_a), msg, sizeof(msg), &n, cid),
		    415);
	}
	/* 400: shorter than a header, empty */
	assert_int_equal(post("/dns-query", ct, query_a, 11, msg, sizeof(msg), &n, cid), 400);
	assert_int_equal(post("/dns-query", ct, NULL, 0, msg, sizeof(msg), &n, cid), 400);
	/* 413: larger than the buffer, and than any DNS message */
	assert_int_equal(post("/dns-query", ct, query_a, sizeof(query_a), msg, 20, &n, cid), 413);
	static uint8_t big[NX_DOH_MSG_MAX + 1];
	static uint8_t bigout[NX_DOH_MSG_MAX + 2];
	assert_int_equal(post("/dns-query", ct, big, sizeof(big), bigout, sizeof(bigout), &n, cid),
			 413);
	assert_int_equal(
	    post("/dns-query", ct, big, NX_DOH_MSG_MAX, bigout, sizeof(bigout), &n, cid), 200);
	/* in place: msg == body */
	uint8_t inplace[64];
	memcpy(inplace, query_a, sizeof(query_a));
	assert_int_equal(
	    post("/dns-query", ct, inplace, sizeof(query_a), inplace, sizeof(query_a), &n, cid),
	    200);
	assert_memory_equal(inplace, query_a, sizeof(query_a));
	/* 404 before 415 */
	assert_int_equal(
	    post("/dns", "text/plain", query_a, sizeof(query_a), msg, sizeof(msg), &n, cid), 404);
}

static void test_request_method(void **state)
{
	char cid[NX_DOH_CLIENT_ID_MAX + 1];
	uint8_t msg[512];
	size_t n;
	const char *methods[] = {"HEAD", "PUT", "DELETE", "OPTIONS", "get", "post", "GETX", ""};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		struct nx_doh_req r = {.method = methods[i],
				       .method_len = strlen(methods[i]),
				       .path = "/dns-query?dns=AAAAAAAAAAAAAAAA",
				       .path_len = 31,
				       .content_type = "application/dns-message",
				       .content_type_len = 23,
				       .body = query_a,
				       .body_len = sizeof(query_a)};
		assert_int_equal(nx_doh_request(&r, msg, sizeof(msg), &n, cid), 405);
	}
	struct nx_doh_req r = {.path = "/dns-query", .path_len = 10};
	assert_int_equal(nx_doh_request(&r, msg, sizeof(msg), &n, cid), 405);
	r.path = NULL;
	r.path_len = 0;
	assert_int_equal(nx_doh_request(&r, msg, sizeof(msg), &n, cid), 404);
}

/* ---- min TTL ---- */

static size_t put_rr(uint8_t *p, uint16_t type, uint32_t ttl, const uint8_t *rdata, uint16_t rdlen)
{
	size_t o = 0;
	p[o++] = 0xc0; /* owner: pointer to the question name */
	p[o++] = 12;
	p[o++] = (uint8_t)(type >> 8);
	p[o++] = (uint8_t)type;
	p[o++] = 0;
	p[o++] = 1;
	p[o++] = (uint8_t)(ttl >> 24);
	p[o++] = (uint8_t)(ttl >> 16);
	p[o++] = (uint8_t)(ttl >> 8);
	p[o++] = (uint8_t)ttl;
	p[o++] = (uint8_t)(rdlen >> 8);
	p[o++] = (uint8_t)rdlen;
	memcpy(p + o, rdata, rdlen);
	return o + rdlen;
}

static size_t response(uint8_t *buf, const uint32_t *an_ttls, unsigned an, bool soa,
		       uint32_t soa_ttl, uint32_t minimum)
{
	memcpy(buf, query_a, sizeof(query_a));
	buf[2] = 0x81;
	buf[3] = 0x80;
	buf[7] = (uint8_t)an;
	buf[9] = soa ? 1 : 0;
	size_t o = sizeof(query_a);
	static const uint8_t a[4] = {192, 0, 2, 1};
	for (unsigned i = 0; i < an; i++) {
		o += put_rr(buf + o, 1, an_ttls[i], a, 4);
	}
	if (soa) {
		uint8_t rd[2 + 2 + 20] = {0xc0, 12, 0xc0, 12};
		for (int k = 0; k < 4; k++) {
			rd[4 + 16 + k] = (uint8_t)(minimum >> (24 - 8 * k));
		}
		rd[4 + 3] = 1; /* serial */
		o += put_rr(buf + o, 6, soa_ttl, rd, sizeof(rd));
	}
	return o;
}

static void test_min_ttl(void **state)
{
	uint8_t buf[512];
	uint32_t ttls[] = {300, 60, 3600};
	size_t n = response(buf, ttls, 3, false, 0, 0);
	assert_int_equal(nx_doh_min_ttl(buf, n), 60);
	/* answers win over the authority SOA */
	n = response(buf, ttls, 1, true, 10, 5);
	assert_int_equal(nx_doh_min_ttl(buf, n), 300);
	/* negative: min(SOA TTL, MINIMUM) */
	n = response(buf, NULL, 0, true, 900, 300);
	assert_int_equal(nx_doh_min_ttl(buf, n), 300);
	n = response(buf, NULL, 0, true, 120, 300);
	assert_int_equal(nx_doh_min_ttl(buf, n), 120);
	/* nothing to go by, a top-bit TTL, truncated and garbage messages: 0 */
	n = response(buf, NULL, 0, false, 0, 0);
	assert_int_equal(nx_doh_min_ttl(buf, n), 0);
	uint32_t neg[] = {0x80000000u, 50};
	n = response(buf, neg, 2, false, 0, 0);
	assert_int_equal(nx_doh_min_ttl(buf, n), 0);
	n = response(buf, ttls, 3, false, 0, 0);
	assert_int_equal(nx_doh_min_ttl(buf, n - 1), 0);
	assert_int_equal(nx_doh_min_ttl(buf, 5), 0);
	assert_int_equal(nx_doh_min_ttl(query_a, sizeof(query_a)), 0);
	/* an SOA too short to hold MINIMUM is not used */
	n = response(buf, NULL, 0, true, 900, 300);
	buf[n - 24 - 1] = 4; /* rdlength 24 -> 4 */
	assert_int_equal(nx_doh_min_ttl(buf, n - 20), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_b64url),	 cmocka_unit_test(test_path),
	    cmocka_unit_test(test_query_string), cmocka_unit_test(test_request_get),
	    cmocka_unit_test(test_request_post), cmocka_unit_test(test_request_method),
	    cmocka_unit_test(test_min_ttl),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

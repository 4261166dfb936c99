/*
 * The DoH HTTP/2 server session (net/h2.c) driven by a real nghttp2 CLIENT session in the same
 * process: bytes from one are fed to the other until both are quiet. Covers GET and POST,
 * several streams answered out of order, every HTTP error status the layer gives itself, an
 * HTTP/1.1 request, a garbage preface, the stream cap, oversized bodies and the per-connection
 * body budget, an answer larger than the client's flow-control window (the copy path), a
 * client reset before the answer, graceful GOAWAY, and the idle cost. Every test ends with the
 * doh_sessions ledger owner back where it started.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "net/doh.h"
#include "net/h2.h"

#define MAXQ 16
#define MAXR 16
#define WIRE_MAX (1u << 20)

struct query {
	int32_t stream;
	uint8_t msg[512];
	size_t len;
	char cid[NX_DOH_CLIENT_ID_MAX + 1];
};

struct resp {
	int32_t stream;
	int status;
	char ctype[64];
	char cc[64];
	char allow[64];
	long clen;
	uint8_t *body; /* test_malloc'd, WIRE_MAX */
	size_t body_len;
	bool closed;
	uint32_t rst;
};

struct fx {
	struct nx_h2 *srv;
	nghttp2_session *cli;
	struct nx_h2_io io;
	uint8_t *wire; /* server -> client bytes not yet fed */
	size_t wire_len;
	int feed_rc; /* last nx_h2_feed result */
	struct query q[MAXQ];
	int nq;
	struct resp r[MAXR];
	int nr;
	int64_t led0;
	bool answer_inline; /* respond from inside io->query */
	/* POST body source for the client */
	const uint8_t *post;
	size_t post_len;
	size_t post_stop; /* defer after this many bytes (0: send all) */
};

static const uint8_t query_a[] = {0x12, 0x34, 0x01, 0x00, 0,   1,   0,	 0,   0,   0,	0,
				  0,	3,    'w',  'w',  'w', 7,   'e', 'x', 'a', 'm', 'p',
				  'l',	'e',  3,    'c',  'o', 'm', 0,	 0,   1,   0,	1};

static int64_t led(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_doh_sessions].bytes;
}

/* query_a answered with one A record of TTL `ttl`, padded with TXT data to `size` bytes. */
static size_t answer(uint8_t *buf, size_t size, uint32_t ttl, uint8_t tag)
{
	memcpy(buf, query_a, sizeof(query_a));
	buf[2] = 0x81;
	buf[3] = 0x80;
	buf[7] = 1;
	size_t o = sizeof(query_a);
	const uint8_t rr[] = {0xc0,
			      12,
			      0,
			      1,
			      0,
			      1,
			      (uint8_t)(ttl >> 24),
			      (uint8_t)(ttl >> 16),
			      (uint8_t)(ttl >> 8),
			      (uint8_t)ttl,
			      0,
			      4,
			      192,
			      0,
			      2,
			      tag};
	memcpy(buf + o, rr, sizeof(rr));
	o += sizeof(rr);
	if (size > o + 12) { /* additional TXT record filling the rest */
		buf[11] = 1;
		size_t rdlen = size - o - 12;
		const uint8_t hdr[] = {
		    0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 9, (uint8_t)(rdlen >> 8), (uint8_t)rdlen};
		memcpy(buf + o, hdr, sizeof(hdr));
		o += sizeof(hdr);
		for (size_t i = 0; i < rdlen; i++) {
			buf[o + i] = (uint8_t)(i % 200 == 0 ? 199 : 'a' + (i + tag) % 26);
		}
		o += rdlen;
	}
	return o;
}

/* ---- server io ---- */

static int srv_send(void *ud, const uint8_t *data, size_t len)
{
	struct fx *f = ud;
	assert_true(f->wire_len + len <= WIRE_MAX);
	memcpy(f->wire + f->wire_len, data, len);
	f->wire_len += len;
	return 0;
}

static void srv_query(void *ud, int32_t stream, const uint8_t *msg, size_t len, const char *cid)
{
	struct fx *f = ud;
	assert_true(f->nq < MAXQ);
	struct query *q = &f->q[f->nq++];
	q->stream = stream;
	memcpy(q->msg, msg, len < sizeof(q->msg) ? len : sizeof(q->msg)); /* a prefix is enough */
	q->len = len;
	snprintf(q->cid, sizeof(q->cid), "%s", cid);
	if (f->answer_inline) {
		uint8_t a[128];
		size_t n = answer(a, 0, 77, (uint8_t)stream);
		assert_int_equal(nx_h2_respond(f->srv, stream, a, n), 0);
	}
}

/* ---- client ---- */

static struct resp *resp_of(struct fx *f, int32_t stream)
{
	for (int i = 0; i < f->nr; i++) {
		if (f->r[i].stream == stream) {
			return &f->r[i];
		}
	}
	assert_true(f->nr < MAXR);
	struct resp *r = &f->r[f->nr++];
	r->stream = stream;
	r->clen = -1;
	r->body = test_malloc(WIRE_MAX);
	return r;
}

static int cli_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name,
		      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		      void *ud)
{
	struct resp *r = resp_of(ud, fr->hd.stream_id);
	char v[64];
	snprintf(v, sizeof(v), "%.*s", (int)valuelen, (const char *)value);
	if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
		r->status = atoi(v);
	} else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
		snprintf(r->ctype, sizeof(r->ctype), "%s", v);
	} else if (namelen == 13 && memcmp(name, "cache-control", 13) == 0) {
		snprintf(r->cc, sizeof(r->cc), "%s", v);
	} else if (namelen == 14 && memcmp(name, "content-length", 14) == 0) {
		r->clen = atol(v);
	} else if (namelen == 5 && memcmp(name, "allow", 5) == 0) {
		snprintf(r->allow, sizeof(r->allow), "%s", v);
	}
	return 0;
}

static int cli_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		    void *ud)
{
	struct resp *r = resp_of(ud, id);
	assert_true(r->body_len + len <= WIRE_MAX);
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	return 0;
}

static int cli_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
	struct resp *r = resp_of(ud, id);
	r->closed = true;
	r->rst = err;
	return 0;
}

static ssize_t cli_read_post(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			     uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct fx *f = ud;
	size_t *off = src->ptr;
	size_t end = f->post_stop ? f->post_stop : f->post_len;
	if (*off == end && f->post_stop) {
		return NGHTTP2_ERR_DEFERRED; /* hold the stream open mid-body */
	}
	size_t n = end - *off < length ? end - *off : length;
	memcpy(buf, f->post + (*off % f->post_len), n);
	*off += n;
	if (*off == f->post_len) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

/* Move bytes both ways until neither side has anything to say. */
static void pump(struct fx *f)
{
	for (int round = 0; round < 1000; round++) {
		bool moved = false;
		const uint8_t *data;
		ssize_t n;
		while ((n = nghttp2_session_mem_send(f->cli, &data)) > 0) {
			moved = true;
			if (f->feed_rc == 0) {
				f->feed_rc = nx_h2_feed(f->srv, data, (size_t)n);
			}
		}
		assert_true(n >= 0);
		if (f->wire_len) {
			moved = true;
			size_t len = f->wire_len;
			f->wire_len = 0;
			/* copy out: feeding may make the server write more */
			uint8_t *tmp = test_malloc(len);
			memcpy(tmp, f->wire, len);
			assert_int_equal(nghttp2_session_mem_recv(f->cli, tmp, len), (ssize_t)len);
			test_free(tmp);
		}
		if (!moved) {
			return;
		}
	}
	fail_msg("pump: no quiet point");
}

static struct fx *fx_new(const struct nx_h2_limits *lim, const nghttp2_settings_entry *iv,
			 size_t niv)
{
	struct fx *f = test_calloc(1, sizeof(*f));
	f->led0 = led();
	f->wire = test_malloc(WIRE_MAX);
	f->io = (struct nx_h2_io){.send = srv_send, .query = srv_query};
	assert_int_equal(nx_h2_server_new(lim, &f->io, f, &f->srv), 0);
	nghttp2_session_callbacks *cb;
	assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
	nghttp2_session_callbacks_set_on_header_callback(cb, cli_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, cli_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, cli_close);
	assert_int_equal(nghttp2_session_client_new(&f->cli, cb, f), 0);
	nghttp2_session_callbacks_del(cb);
	assert_int_equal(nghttp2_submit_settings(f->cli, NGHTTP2_FLAG_NONE, iv, niv), 0);
	return f;
}

static void fx_free(struct fx *f)
{
	nx_h2_free(f->srv);
	assert_int_equal(led(), f->led0);
	nghttp2_session_del(f->cli);
	for (int i = 0; i < f->nr; i++) {
		test_free(f->r[i].body);
	}
	test_free(f->wire);
	test_free(f);
}

static int32_t request(struct fx *f, const char *method, const char *path, const char *ctype,
		       const char *clen, size_t *post_off)
{
	nghttp2_nv nv[6];
	size_t n = 0;
#define ADD(k, v)                                                                                  \
	nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v),               \
			       NGHTTP2_NV_FLAG_NONE}
	ADD(":method", method);
	ADD(":scheme", "https");
	ADD(":authority", "dns.test");
	ADD(":path", path);
	if (ctype) {
		ADD("content-type", ctype);
	}
	if (clen) {
		ADD("content-length", clen);
	}
#undef ADD
	nghttp2_data_provider prd = {.source.ptr = post_off, .read_callback = cli_read_post};
	int32_t id = nghttp2_submit_request(f->cli, NULL, nv, n, post_off ? &prd : NULL, NULL);
	assert_true(id > 0);
	return id;
}

static void get_path(char *out, size_t cap, const char *prefix, const uint8_t *msg, size_t len)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = (size_t)snprintf(out, cap, "%s", prefix);
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)msg[i] << 16 |
			     (i + 1 < len ? (uint32_t)msg[i + 1] << 8 : 0) |
			     (i + 2 < len ? msg[i + 2] : 0);
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
	assert_true(o < cap);
}

/* ---- tests ---- */

static void test_get_and_post(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	char path[256];
	get_path(path, sizeof(path), "/dns-query/Laptop?dns=", query_a, sizeof(query_a));
	int32_t s1 = request(f, "GET", path, NULL, NULL, NULL);
	f->post = query_a;
	f->post_len = sizeof(query_a);
	size_t off = 0;
	int32_t s2 = request(f, "POST", "/dns-query", "application/dns-message", NULL, &off);
	pump(f);
	assert_int_equal(f->feed_rc, 0);
	assert_int_equal(f->nq, 2);
	assert_int_equal(nx_h2_streams_open(f->srv), 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(f->q[i].len, sizeof(query_a));
		assert_memory_equal(f->q[i].msg, query_a, sizeof(query_a));
	}
	assert_int_equal(f->q[0].stream, s1);
	assert_string_equal(f->q[0].cid, "laptop");
	assert_int_equal(f->q[1].stream, s2);
	assert_string_equal(f->q[1].cid, "");
	uint8_t a[128];
	size_t n = answer(a, 0, 42, 1);
	assert_int_equal(nx_h2_respond(f->srv, s1, a, n), 0);
	assert_int_equal(nx_h2_respond(f->srv, s2, a, n), 0);
	/* a second answer to the same stream is refused */
	assert_int_equal(nx_h2_respond(f->srv, s2, a, n), NX_ENOTFOUND);
	pump(f);
	for (int i = 0; i < 2; i++) {
		struct resp *r = resp_of(f, i ? s2 : s1);
		assert_true(r->closed);
		assert_int_equal(r->rst, 0);
		assert_int_equal(r->status, 200);
		assert_string_equal(r->ctype, "application/dns-message");
		assert_string_equal(r->cc, "max-age=42");
		assert_int_equal(r->clen, (long)n);
		assert_int_equal(r->body_len, n);
		assert_memory_equal(r->body, a, n);
	}
	assert_int_equal(nx_h2_streams_open(f->srv), 0);
	assert_false(nx_h2_want_close(f->srv));
	fx_free(f);
}

static void test_answer_inline(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	f->answer_inline = true;
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	int32_t s = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	struct resp *r = resp_of(f, s);
	assert_true(r->closed);
	assert_int_equal(r->status, 200);
	assert_string_equal(r->cc, "max-age=77");
	fx_free(f);
}

static void test_out_of_order(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	int32_t ids[6];
	for (int i = 0; i < 6; i++) {
		ids[i] = request(f, "GET", path, NULL, NULL, NULL);
	}
	pump(f);
	assert_int_equal(f->nq, 6);
	assert_int_equal(nx_h2_streams_open(f->srv), 6);
	for (int i = 5; i >= 0; i--) {
		uint8_t a[128];
		size_t n = answer(a, 0, (uint32_t)(100 + i), (uint8_t)i);
		assert_int_equal(nx_h2_respond(f->srv, ids[i], a, n), 0);
		if (i % 2) {
			pump(f); /* interleave answers with client traffic */
		}
	}
	pump(f);
	for (int i = 0; i < 6; i++) {
		struct resp *r = resp_of(f, ids[i]);
		uint8_t a[128];
		size_t n = answer(a, 0, (uint32_t)(100 + i), (uint8_t)i);
		char cc[32];
		snprintf(cc, sizeof(cc), "max-age=%d", 100 + i);
		assert_true(r->closed);
		assert_string_equal(r->cc, cc);
		assert_int_equal(r->body_len, n);
		assert_memory_equal(r->body, a, n);
	}
	assert_int_equal(nx_h2_streams_open(f->srv), 0);
	fx_free(f);
}

static void expect_status(struct fx *f, int32_t s, int status, enum nx_stat st, uint64_t before)
{
	struct resp *r = resp_of(f, s);
	assert_true(r->closed);
	assert_int_equal(r->status, status);
	assert_string_equal(r->ctype, "text/plain; charset=utf-8");
	assert_int_equal(r->clen, (long)r->body_len);
	assert_true(r->body_len > 4);
	char code[4];
	snprintf(code, sizeof(code), "%d", status);
	assert_memory_equal(r->body, code, 3);
	assert_int_equal(nx_stat_read(st), before + 1);
}

static void test_http_errors(void **state)
{
	struct nx_h2_limits lim = {.max_streams = 16, .max_body = 100};
	struct fx *f = fx_new(&lim, NULL, 0);
	uint64_t e400 = nx_stat_read(NX_STAT_DOH_E400), e404 = nx_stat_read(NX_STAT_DOH_E404),
		 e405 = nx_stat_read(NX_STAT_DOH_E405), e413 = nx_stat_read(NX_STAT_DOH_E413),
		 e414 = nx_stat_read(NX_STAT_DOH_E414), e415 = nx_stat_read(NX_STAT_DOH_E415);
	int32_t s404 = request(f, "GET", "/resolve?dns=AAAA", NULL, NULL, NULL);
	int32_t s405 = request(f, "DELETE", "/dns-query", NULL, NULL, NULL);
	int32_t s400 = request(f, "GET", "/dns-query?name=example.com", NULL, NULL, NULL);
	static uint8_t big[4096];
	memcpy(big, query_a, sizeof(query_a));
	f->post = big;
	f->post_len = sizeof(query_a);
	size_t off1 = 0;
	int32_t s415 = request(f, "POST", "/dns-query", "application/json", NULL, &off1);
	char longpath[NX_H2_PATH_MAX + 64];
	memset(longpath, 'A', sizeof(longpath));
	memcpy(longpath, "/dns-query?dns=", 15);
	longpath[sizeof(longpath) - 1] = '\0';
	int32_t s414 = request(f, "GET", longpath, NULL, NULL, NULL);
	pump(f);
	expect_status(f, s404, 404, NX_STAT_DOH_E404, e404);
	expect_status(f, s405, 405, NX_STAT_DOH_E405, e405);
	assert_string_equal(resp_of(f, s405)->allow, "GET, POST");
	expect_status(f, s400, 400, NX_STAT_DOH_E400, e400);
	expect_status(f, s415, 415, NX_STAT_DOH_E415, e415);
	expect_status(f, s414, 414, NX_STAT_DOH_E414, e414);
	assert_int_equal(f->nq, 0);
	/* 413 twice: announced by content-length, and found while the body arrives */
	f->post_len = 200;
	size_t off2 = 0, off3 = 0;
	int32_t s413a = request(f, "POST", "/dns-query", "application/dns-message", "200", &off2);
	pump(f);
	expect_status(f, s413a, 413, NX_STAT_DOH_E413, e413);
	int32_t s413b = request(f, "POST", "/dns-query", "application/dns-message", NULL, &off3);
	pump(f);
	expect_status(f, s413b, 413, NX_STAT_DOH_E413, e413 + 1);
	assert_int_equal(f->nq, 0);
	assert_int_equal(nx_h2_streams_open(f->srv), 0);
	/* the caller's own error answers */
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	int32_t s503 = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	uint64_t e503 = nx_stat_read(NX_STAT_DOH_E503);
	assert_int_equal(nx_h2_error(f->srv, s503, 200), -EINVAL);
	assert_int_equal(nx_h2_error(f->srv, s503, 503), 0);
	pump(f);
	expect_status(f, s503, 503, NX_STAT_DOH_E503, e503);
	assert_int_equal(f->feed_rc, 0);
	fx_free(f);
}

static void test_http1(void **state)
{
	static const char *reqs[] = {"GET /dns-query?dns=AAAA HTTP/1.1\r\nHost: x\r\n\r\n",
				     "POST /dns-query HTTP/1.1\r\n", "PRI", "GE"};
	for (size_t i = 0; i < 4; i++) {
		struct fx *f = fx_new(NULL, NULL, 0);
		uint64_t before = nx_stat_read(NX_STAT_DOH_HTTP1);
		const char *r = reqs[i];
		int rc = nx_h2_feed(f->srv, (const uint8_t *)r, strlen(r));
		if (i == 2) {
			/* a prefix of the HTTP/2 preface: wait for more, then "PRI / HTTP/1.1" */
			assert_int_equal(rc, 0);
			assert_int_equal(f->wire_len, 0);
			rc = nx_h2_feed(f->srv, (const uint8_t *)"X / HTTP/1.1\r\n", 14);
		}
		assert_int_equal(rc, NX_EFORMAT);
		assert_int_equal(nx_stat_read(NX_STAT_DOH_HTTP1), before + 1);
		assert_true(f->wire_len > 40);
		assert_memory_equal(f->wire, "HTTP/1.1 505 ", 13);
		f->wire[f->wire_len] = '\0';
		/* the stated length is the body's */
		const char *body = strstr((const char *)f->wire, "\r\n\r\n");
		assert_non_null(body);
		assert_int_equal(strlen(body + 4), 38);
		assert_non_null(strstr((const char *)f->wire, "Content-Length: 38\r\n"));
		assert_true(nx_h2_want_close(f->srv));
		assert_int_equal(nx_h2_feed(f->srv, (const uint8_t *)"x", 1), NX_EFORMAT);
		fx_free(f);
	}
}

static void test_bad_preface(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	uint64_t before = nx_stat_read(NX_STAT_DOH_BAD_PREFACE);
	static const uint8_t junk[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01}; /* a TLS ClientHello */
	assert_int_equal(nx_h2_feed(f->srv, junk, sizeof(junk)), NX_EMALFORMED);
	assert_int_equal(nx_stat_read(NX_STAT_DOH_BAD_PREFACE), before + 1);
	assert_int_equal(f->wire_len, 0);
	assert_true(nx_h2_want_close(f->srv));
	/* a valid preface, then a frame that breaks the protocol: GOAWAY and an error */
	struct fx *g = fx_new(NULL, NULL, 0);
	pump(g);
	uint64_t proto = nx_stat_read(NX_STAT_DOH_PROTOCOL);
	/* DATA on stream 0 is a connection error (RFC 9113 6.1) */
	static const uint8_t bad[] = {0, 0, 1, NGHTTP2_DATA, 0, 0, 0, 0, 0, 'x'};
	assert_int_equal(nx_h2_feed(g->srv, bad, sizeof(bad)), NX_EMALFORMED);
	assert_int_equal(nx_stat_read(NX_STAT_DOH_PROTOCOL), proto + 1);
	assert_true(g->wire_len >= 17);
	assert_int_equal(g->wire[3], NGHTTP2_GOAWAY);
	assert_true(nx_h2_want_close(g->srv));
	fx_free(g);
	fx_free(f);
}

static void test_stream_cap(void **state)
{
	struct nx_h2_limits lim = {.max_streams = 2, .max_body = NX_DOH_MSG_MAX};
	struct fx *f = fx_new(&lim, NULL, 0);
	uint64_t before = nx_stat_read(NX_STAT_DOH_STREAM_CAP);
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	/* all four leave before the client has seen our SETTINGS */
	int32_t ids[4];
	for (int i = 0; i < 4; i++) {
		ids[i] = request(f, "GET", path, NULL, NULL, NULL);
	}
	pump(f);
	assert_int_equal(f->nq, 2);
	assert_int_equal(nx_h2_streams_open(f->srv), 2);
	assert_int_equal(nx_stat_read(NX_STAT_DOH_STREAM_CAP), before + 2);
	for (int i = 2; i < 4; i++) {
		assert_true(resp_of(f, ids[i])->closed);
		assert_int_equal(resp_of(f, ids[i])->rst, NGHTTP2_REFUSED_STREAM);
	}
	/* shrinking under pressure: the open ones finish, the next one waits in the client
	 * (which now respects the acknowledged cap) until a slot frees */
	nx_h2_set_max_streams(f->srv, 1);
	pump(f);
	int32_t late = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	assert_int_equal(f->nq, 2);
	uint8_t a[128];
	size_t n = answer(a, 0, 5, 0);
	assert_int_equal(nx_h2_respond(f->srv, ids[0], a, n), 0);
	assert_int_equal(nx_h2_respond(f->srv, ids[1], a, n), 0);
	pump(f);
	assert_int_equal(f->nq, 3);
	assert_int_equal(f->q[2].stream, late);
	assert_int_equal(nx_h2_respond(f->srv, late, a, n), 0);
	pump(f);
	assert_int_equal(resp_of(f, late)->status, 200);
	assert_int_equal(nx_h2_streams_open(f->srv), 0);
	fx_free(f);
}

/* A client that ignores our acknowledged cap: HEADERS without END_STREAM, one stream too many.
 * nghttp2 ends the connection (RFC 9113 5.1.2); the slots never pass the cap. */
static void test_stream_flood(void **state)
{
	struct nx_h2_limits lim = {.max_streams = 2, .max_body = NX_DOH_MSG_MAX};
	struct fx *f = fx_new(&lim, NULL, 0);
	pump(f); /* SETTINGS both ways, acknowledged */
	uint64_t proto = nx_stat_read(NX_STAT_DOH_PROTOCOL);
	nghttp2_hd_deflater *def;
	assert_int_equal(nghttp2_hd_deflate_new(&def, 4096), 0);
	assert_int_equal(nghttp2_hd_deflate_change_table_size(def, 1024), 0); /* our SETTINGS */
	int rc = 0;
	for (int32_t id = 1; id <= 5 && rc == 0; id += 2) {
		nghttp2_nv nv[] = {
		    {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
		    {(uint8_t *)":scheme", (uint8_t *)"https", 7, 5, 0},
		    {(uint8_t *)":authority", (uint8_t *)"dns.test", 10, 8, 0},
		    {(uint8_t *)":path", (uint8_t *)"/dns-query", 5, 10, 0},
		};
		uint8_t fr[9 + 256];
		ssize_t n = nghttp2_hd_deflate_hd(def, fr + 9, 256, nv, 4);
		assert_true(n > 0);
		const uint8_t hd[9] = {0, 0, (uint8_t)n, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS,
				       0, 0, 0,		 (uint8_t)id};
		memcpy(fr, hd, 9);
		rc = nx_h2_feed(f->srv, fr, 9 + (size_t)n);
		assert_true(nx_h2_streams_open(f->srv) <= 2);
	}
	nghttp2_hd_deflate_del(def);
	assert_int_equal(rc, NX_EMALFORMED);
	assert_int_equal(nx_stat_read(NX_STAT_DOH_PROTOCOL), proto + 1);
	assert_true(nx_h2_want_close(f->srv));
	fx_free(f);
}

static void test_body_budget(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	uint64_t before = nx_stat_read(NX_STAT_DOH_BODY_BUDGET);
	static uint8_t body[60000];
	memcpy(body, query_a, sizeof(query_a));
	f->post = body;
	f->post_len = sizeof(body);
	f->post_stop = 50000; /* three streams hold 150000 bytes > NX_H2_CONN_BODY_MAX */
	size_t off[3] = {0};
	int32_t ids[3];
	for (int i = 0; i < 3; i++) {
		ids[i] =
		    request(f, "POST", "/dns-query", "application/dns-message", "60000", &off[i]);
	}
	pump(f);
	assert_int_equal(nx_stat_read(NX_STAT_DOH_BODY_BUDGET), before + 1);
	int refused = 0;
	for (int i = 0; i < 3; i++) {
		struct resp *r = resp_of(f, ids[i]);
		if (r->closed) {
			assert_int_equal(r->rst, NGHTTP2_REFUSED_STREAM);
			refused++;
		}
	}
	assert_int_equal(refused, 1);
	assert_int_equal(nx_h2_streams_open(f->srv), 2);
	/* the two survivors complete and are served */
	f->post_stop = 0;
	for (int i = 0; i < 3; i++) {
		if (!resp_of(f, ids[i])->closed) {
			assert_int_equal(nghttp2_session_resume_data(f->cli, ids[i]), 0);
		}
	}
	pump(f);
	assert_int_equal(f->nq, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(f->q[i].len, sizeof(body));
		assert_memory_equal(f->q[i].msg, query_a, sizeof(query_a));
	}
	fx_free(f);
}

static void test_copy_path(void **state)
{
	/* the client opens a 1000-byte window per stream: a 5000-byte answer must be copied */
	nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1000};
	struct fx *f = fx_new(NULL, &iv, 1);
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	int32_t s = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	assert_int_equal(f->nq, 1);
	int64_t before = led();
	uint8_t *a = test_malloc(5000), *keep = test_malloc(5000);
	size_t n = answer(a, 5000, 30, 9);
	assert_int_equal(n, 5000);
	memcpy(keep, a, n);
	assert_int_equal(nx_h2_respond(f->srv, s, a, n), 0);
	assert_true(led() - before >= 4000); /* the tail beyond the window is ours now */
	memset(a, 0, n);		     /* the caller may reuse its buffer at once */
	pump(f);
	struct resp *r = resp_of(f, s);
	assert_true(r->closed);
	assert_int_equal(r->rst, 0);
	assert_int_equal(r->body_len, n);
	assert_memory_equal(r->body, keep, n);
	assert_true(led() <= before); /* the copy went with the stream */
	test_free(a);
	test_free(keep);
	fx_free(f);
}

static void test_client_reset(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	uint8_t a[128];
	size_t n = answer(a, 0, 1, 0);
	/* one full exchange first, so HPACK tables hold these headers before we measure */
	int32_t s0 = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	assert_int_equal(nx_h2_respond(f->srv, s0, a, n), 0);
	pump(f);
	int64_t idle = led();
	f->nq = 0;
	int32_t s = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	assert_int_equal(f->nq, 1);
	assert_int_equal(nghttp2_submit_rst_stream(f->cli, NGHTTP2_FLAG_NONE, s, NGHTTP2_CANCEL),
			 0);
	pump(f);
	assert_int_equal(nx_h2_streams_open(f->srv), 0);
	uint64_t gone = nx_stat_read(NX_STAT_DOH_STREAM_GONE);
	assert_int_equal(nx_h2_respond(f->srv, s, a, n), NX_ENOTFOUND);
	assert_int_equal(nx_h2_reset(f->srv, s, NGHTTP2_REFUSED_STREAM), NX_ENOTFOUND);
	assert_int_equal(nx_h2_respond(f->srv, 9999, a, n), NX_ENOTFOUND);
	assert_int_equal(nx_stat_read(NX_STAT_DOH_STREAM_GONE), gone + 3);
	/* the idle connection is back to its idle size: no slot kept */
	assert_int_equal(led(), idle);
	/* a reset by us (no permit) reaches the client */
	int32_t s2 = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	assert_int_equal(nx_h2_reset(f->srv, s2, NGHTTP2_REFUSED_STREAM), 0);
	pump(f);
	assert_int_equal(resp_of(f, s2)->rst, NGHTTP2_REFUSED_STREAM);
	assert_int_equal(led(), idle);
	fx_free(f);
}

static void test_goaway(void **state)
{
	struct fx *f = fx_new(NULL, NULL, 0);
	char path[256];
	get_path(path, sizeof(path), "/dns-query?dns=", query_a, sizeof(query_a));
	int32_t s = request(f, "GET", path, NULL, NULL, NULL);
	pump(f);
	nx_h2_goaway(f->srv);
	pump(f);
	assert_false(nx_h2_want_close(f->srv)); /* one stream still owed its answer */
	uint8_t a[128];
	size_t n = answer(a, 0, 3, 0);
	assert_int_equal(nx_h2_respond(f->srv, s, a, n), 0);
	pump(f);
	assert_int_equal(resp_of(f, s)->status, 200);
	assert_true(nx_h2_want_close(f->srv));
	fx_free(f);
}

static void test_idle_bytes(void **state)
{
	size_t idle = nx_h2_idle_bytes();
	assert_true(idle > 1000);
	assert_true(idle < 64 * 1024);
	assert_int_equal(nx_h2_idle_bytes(), idle);
	/* the same figure as a session that went through the exchange with a real client */
	struct fx *f = fx_new(NULL, NULL, 0);
	pump(f);
	assert_int_equal(led() - f->led0, (int64_t)idle);
	print_message("idle DoH session: %zu ledger bytes\n", idle);
	fx_free(f);
}

static void test_limits(void **state)
{
	struct nx_h2 *h;
	struct nx_h2_io io = {.send = srv_send, .query = srv_query};
	struct nx_h2_limits bad[] = {
	    {0, 512}, {NX_H2_MAX_STREAMS_LIMIT + 1, 512}, {10, 11}, {10, NX_DOH_MSG_MAX + 1}};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(nx_h2_server_new(&bad[i], &io, NULL, &h), -EINVAL);
		assert_null(h);
	}
	int64_t l0 = led();
	nx_mem_fail_after(2);
	int rc = nx_h2_server_new(NULL, &io, NULL, &h);
	nx_mem_fail_after(-1);
	assert_int_equal(rc, -ENOMEM);
	assert_int_equal(led(), l0);
	nx_h2_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_get_and_post), cmocka_unit_test(test_answer_inline),
	    cmocka_unit_test(test_out_of_order), cmocka_unit_test(test_http_errors),
	    cmocka_unit_test(test_http1),	 cmocka_unit_test(test_bad_preface),
	    cmocka_unit_test(test_stream_cap),	 cmocka_unit_test(test_stream_flood),
	    cmocka_unit_test(test_body_budget),	 cmocka_unit_test(test_copy_path),
	    cmocka_unit_test(test_client_reset), cmocka_unit_test(test_goaway),
	    cmocka_unit_test(test_idle_bytes),	 cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

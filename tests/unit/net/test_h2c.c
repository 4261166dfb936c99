/*
 * The DoH upstream HTTP/2 client session (net/h2c.c) over memory, against two servers in the
 * same process: the repo's own DoH server session (net/h2.c: many multiplexed queries answered
 * out of order, its graceful GOAWAY) and a raw nghttp2 server session scripted by each test
 * (the request's headers, HTTP statuses, content types, resets, GOAWAY with a last stream id,
 * huge and short bodies, the per-connection body budget, SETTINGS_MAX_CONCURRENT_STREAMS, PING,
 * a tiny flow-control window, interim responses, protocol errors). Every answer is recorded
 * per tag: each must come exactly once (or never, when cancelled). Every test ends with the
 * doh_upstream ledger owner back where it started.
 */
#include <assert.h>
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
#include "net/h2.h"
#include "net/h2c.h"

#define MAXT 128 /* tags a test may use */
#define MAXS 128 /* server-side requests recorded */
#define WIRE_MAX (1u << 20)

static const uint8_t query_a[] = {0x12, 0x34, 0x01, 0x00, 0,   1,   0,	 0,   0,   0,	0,
				  0,	3,    'w',  'w',  'w', 7,   'e', 'x', 'a', 'm', 'p',
				  'l',	'e',  3,    'c',  'o', 'm', 0,	 0,   1,   0,	1};

/* what the client's io->answer reported for one tag */
struct got {
	int calls;
	int rc;
	int status;
	size_t len;
	uint8_t head[64]; /* the first bytes of msg */
	uint32_t hash;	  /* FNV-1a of all of msg */
};

/* one request as the raw server saw it */
struct sreq {
	int32_t stream;
	char method[16], scheme[16], path[64], authority[64], accept[64], ctype[64], clen[16];
	uint8_t body[4096];
	size_t body_len;
	bool done;	/* END_STREAM received */
	bool closed;	/* stream closed */
	uint32_t code;	/* its close error code */
	uint8_t *out;	/* test_malloc'd response body */
	size_t out_len; /* bytes at out */
	size_t out_off; /* bytes given to nghttp2 */
};

/* one query as the repo's own server handed it out */
struct oquery {
	int32_t stream;
	uint8_t msg[512];
	size_t len;
};

struct fx {
	struct nx_h2c *cli;
	struct nx_h2c_io io;
	uint8_t *c2s, *s2c; /* test_malloc'd, WIRE_MAX: bytes not yet fed */
	size_t c2s_len, s2c_len;
	int feed_rc; /* first failing nx_h2c_feed */
	int send_rc; /* what the client's io->send returns */
	int64_t led0;
	struct got got[MAXT];
	int answers; /* io->answer calls in all */
	/* reentrancy hook: called from io->answer */
	void (*on_answer)(struct fx *f, uint64_t tag);
	/* the raw server */
	nghttp2_session *raw;
	struct sreq s[MAXS];
	int ns;
	int ping_acks;
	/* the repo's own server */
	struct nx_h2 *own;
	struct nx_h2_io own_io;
	struct oquery oq[MAXT];
	int noq;
};

static int64_t led(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_doh_upstream].bytes;
}

static uint32_t fnv(const uint8_t *p, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++) {
		h = (h ^ p[i]) * 16777619u;
	}
	return h;
}

/* query_a with DNS id `id` */
static void mkq(uint8_t q[sizeof(query_a)], uint16_t id)
{
	memcpy(q, query_a, sizeof(query_a));
	q[0] = (uint8_t)(id >> 8);
	q[1] = (uint8_t)id;
}

/* ---- client io ---- */

static int cli_send(void *ud, const uint8_t *data, size_t len)
{
	struct fx *f = ud;
	if (f->send_rc) {
		return f->send_rc;
	}
	assert_true(f->c2s_len + len <= WIRE_MAX);
	memcpy(f->c2s + f->c2s_len, data, len);
	f->c2s_len += len;
	return 0;
}

static void cli_answer(void *ud, uint64_t tag, int rc, int status, const uint8_t *msg, size_t len)
{
	struct fx *f = ud;
	assert_true(tag < MAXT);
	struct got *g = &f->got[tag];
	g->calls++;
	g->rc = rc;
	g->status = status;
	g->len = len;
	if (rc == 0) {
		assert_non_null(msg);
		memcpy(g->head, msg, len < sizeof(g->head) ? len : sizeof(g->head));
		g->hash = fnv(msg, len);
	} else {
		assert_null(msg);
		assert_int_equal(len, 0);
	}
	f->answers++;
	if (f->on_answer) {
		f->on_answer(f, tag);
	}
}

/* ---- the raw nghttp2 server ---- */

static struct sreq *sreq_of(struct fx *f, int32_t stream)
{
	for (int i = 0; i < f->ns; i++) {
		if (f->s[i].stream == stream) {
			return &f->s[i];
		}
	}
	assert_true(f->ns < MAXS);
	struct sreq *r = &f->s[f->ns++];
	r->stream = stream;
	return r;
}

static int raw_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name,
		      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
		      void *ud)
{
	struct sreq *r = sreq_of(ud, fr->hd.stream_id);
	char n[32];
	snprintf(n, sizeof(n), "%.*s", (int)namelen, (const char *)name);
	char *dst = !strcmp(n, ":method")	   ? r->method
		    : !strcmp(n, ":scheme")	   ? r->scheme
		    : !strcmp(n, ":path")	   ? r->path
		    : !strcmp(n, ":authority")	   ? r->authority
		    : !strcmp(n, "accept")	   ? r->accept
		    : !strcmp(n, "content-type")   ? r->ctype
		    : !strcmp(n, "content-length") ? r->clen
						   : NULL;
	if (dst) {
		snprintf(dst, 64, "%.*s", (int)valuelen, (const char *)value);
	}
	return 0;
}

static int raw_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		    void *ud)
{
	struct sreq *r = sreq_of(ud, id);
	assert_true(r->body_len + len <= sizeof(r->body));
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	return 0;
}

static int raw_frame(nghttp2_session *s, const nghttp2_frame *fr, void *ud)
{
	struct fx *f = ud;
	if (fr->hd.type == NGHTTP2_PING && (fr->hd.flags & NGHTTP2_FLAG_ACK)) {
		f->ping_acks++;
	}
	if ((fr->hd.type == NGHTTP2_HEADERS || fr->hd.type == NGHTTP2_DATA) &&
	    (fr->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
		sreq_of(f, fr->hd.stream_id)->done = true;
	}
	return 0;
}

static int raw_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct sreq *r = sreq_of(ud, id);
	r->closed = true;
	r->code = code;
	return 0;
}

static ssize_t raw_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct sreq *r = src->ptr;
	size_t n = r->out_len - r->out_off < length ? r->out_len - r->out_off : length;
	memcpy(buf, r->out + r->out_off, n);
	r->out_off += n;
	if (r->out_off == r->out_len) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

/* Answer request number `i` (in arrival order) with a status, a content type (NULL: none),
 * a body (NULL: none) and a content-length when clen. */
static void raw_respond(struct fx *f, int i, const char *status, const char *ctype,
			const uint8_t *body, size_t len, bool clen)
{
	struct sreq *r = &f->s[i];
	char cl[16];
	snprintf(cl, sizeof(cl), "%zu", len);
	nghttp2_nv nv[3];
	size_t n = 0;
#define ADD(k, v)                                                                                  \
	nv[n++] = (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v),               \
			       NGHTTP2_NV_FLAG_NONE}
	ADD(":status", status);
	if (ctype) {
		ADD("content-type", ctype);
	}
	if (clen) {
		ADD("content-length", cl);
	}
#undef ADD
	nghttp2_data_provider prd = {.source.ptr = r, .read_callback = raw_read};
	if (body) {
		r->out = test_malloc(len ? len : 1);
		memcpy(r->out, body, len);
		r->out_len = len;
	}
	assert_int_equal(nghttp2_submit_response(f->raw, r->stream, nv, n, body ? &prd : NULL), 0);
}

/* The DNS answer the raw server gives request i: its query with QR set. */
static void raw_answer_dns(struct fx *f, int i)
{
	uint8_t a[sizeof(f->s[i].body)];
	size_t len = f->s[i].body_len;
	memcpy(a, f->s[i].body, len);
	a[2] |= 0x80;
	raw_respond(f, i, "200", "application/dns-message", a, len, true);
}

/* ---- the repo's own server ---- */

static int own_send(void *ud, const uint8_t *data, size_t len)
{
	struct fx *f = ud;
	assert_true(f->s2c_len + len <= WIRE_MAX);
	memcpy(f->s2c + f->s2c_len, data, len);
	f->s2c_len += len;
	return 0;
}

static void own_query(void *ud, int32_t stream, const uint8_t *msg, size_t len, const char *cid)
{
	struct fx *f = ud;
	assert_true(f->noq < MAXT);
	struct oquery *q = &f->oq[f->noq++];
	q->stream = stream;
	assert_true(len <= sizeof(q->msg));
	memcpy(q->msg, msg, len);
	q->len = len;
}

/* Answer own query i: the query with QR set and a marker byte appended. */
static void own_answer(struct fx *f, int i)
{
	uint8_t a[sizeof(f->oq[i].msg) + 1];
	memcpy(a, f->oq[i].msg, f->oq[i].len);
	a[2] |= 0x80;
	a[f->oq[i].len] = 0xa5;
	assert_int_equal(nx_h2_respond(f->own, f->oq[i].stream, a, f->oq[i].len + 1), 0);
}

/* ---- fixture ---- */

enum peer { RAW, OWN };

/* Move bytes both ways until neither side has anything to say. */
static void pump(struct fx *f)
{
	for (int round = 0; round < 10000; round++) {
		bool moved = false;
		if (f->raw) {
			const uint8_t *d;
			ssize_t n;
			while ((n = nghttp2_session_mem_send(f->raw, &d)) > 0) {
				assert_true(f->s2c_len + (size_t)n <= WIRE_MAX);
				memcpy(f->s2c + f->s2c_len, d, (size_t)n);
				f->s2c_len += (size_t)n;
			}
			assert_true(n >= 0);
		}
		if (f->c2s_len) {
			moved = true;
			size_t len = f->c2s_len;
			uint8_t *tmp = test_malloc(len);
			memcpy(tmp, f->c2s, len);
			f->c2s_len = 0;
			if (f->raw) {
				assert_int_equal(nghttp2_session_mem_recv(f->raw, tmp, len),
						 (ssize_t)len);
			} else {
				assert_int_equal(nx_h2_feed(f->own, tmp, len), 0);
			}
			test_free(tmp);
		}
		if (f->s2c_len) {
			moved = true;
			size_t len = f->s2c_len;
			uint8_t *tmp = test_malloc(len);
			memcpy(tmp, f->s2c, len);
			f->s2c_len = 0;
			if (f->feed_rc == 0) {
				f->feed_rc = nx_h2c_feed(f->cli, tmp, len);
			}
			test_free(tmp);
		}
		if (!moved) {
			return;
		}
	}
	fail_msg("pump: no quiet point");
}

static struct fx *fx_new_at(enum peer peer, const char *authority, const struct nx_h2c_limits *lim,
			    const nghttp2_settings_entry *iv, size_t niv)
{
	struct fx *f = test_calloc(1, sizeof(*f));
	f->led0 = led();
	f->c2s = test_malloc(WIRE_MAX);
	f->s2c = test_malloc(WIRE_MAX);
	if (peer == RAW) {
		nghttp2_session_callbacks *cb;
		assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
		nghttp2_session_callbacks_set_on_header_callback(cb, raw_header);
		nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, raw_data);
		nghttp2_session_callbacks_set_on_frame_recv_callback(cb, raw_frame);
		nghttp2_session_callbacks_set_on_stream_close_callback(cb, raw_close);
		assert_int_equal(nghttp2_session_server_new(&f->raw, cb, f), 0);
		nghttp2_session_callbacks_del(cb);
		assert_int_equal(nghttp2_submit_settings(f->raw, NGHTTP2_FLAG_NONE, iv, niv), 0);
	} else {
		f->own_io = (struct nx_h2_io){.send = own_send, .query = own_query};
		assert_int_equal(nx_h2_server_new(NULL, &f->own_io, f, &f->own), 0);
	}
	f->io = (struct nx_h2c_io){.send = cli_send, .answer = cli_answer};
	assert_int_equal(nx_h2c_new(authority, "/dns-query", lim, &f->io, f, &f->cli), 0);
	assert_true(f->c2s_len > 24); /* the preface and SETTINGS left at once */
	assert_memory_equal(f->c2s, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	return f;
}

static struct fx *fx_new(enum peer peer, const struct nx_h2c_limits *lim,
			 const nghttp2_settings_entry *iv, size_t niv)
{
	return fx_new_at(peer, "dns.test:8443", lim, iv, niv);
}

static void fx_free(struct fx *f)
{
	nx_h2c_free(f->cli);
	assert_int_equal(led(), f->led0);
	nghttp2_session_del(f->raw);
	nx_h2_free(f->own);
	for (int i = 0; i < f->ns; i++) {
		test_free(f->s[i].out);
	}
	test_free(f->c2s);
	test_free(f->s2c);
	test_free(f);
}

/* Submit query_a with DNS id = tag. */
static int submit(struct fx *f, uint64_t tag)
{
	uint8_t q[sizeof(query_a)];
	mkq(q, (uint16_t)tag);
	return nx_h2c_submit(f->cli, tag, q, sizeof(q));
}

/* ---- tests: the repo's own server ---- */

static void test_own_out_of_order(void **state)
{
	struct fx *f = fx_new(OWN, NULL, NULL, 0);
	pump(f);
	enum { N = NX_H2C_STREAMS_DEFAULT }; /* also what the server allows */
	for (uint64_t t = 0; t < N; t++) {
		assert_true(nx_h2c_can_submit(f->cli));
		assert_int_equal(submit(f, t), 0);
		assert_int_equal(f->answers, 0); /* never from inside submit */
	}
	assert_int_equal(nx_h2c_in_flight(f->cli), N);
	assert_false(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, N), NX_ELIMIT);
	pump(f);
	assert_int_equal(f->noq, N);
	/* answer in a scrambled order, in two batches */
	for (int k = 0; k < N; k++) {
		own_answer(f, (k * 7 + 3) % N); /* 7 and 100 are coprime: each once */
		if (k == N / 2) {
			pump(f);
			assert_int_equal(f->answers, N / 2 + 1);
		}
	}
	pump(f);
	assert_int_equal(f->feed_rc, 0);
	assert_int_equal(f->answers, N);
	assert_int_equal(f->got[N].calls, 0);
	for (uint64_t t = 0; t < N; t++) {
		struct got *g = &f->got[t];
		assert_int_equal(g->calls, 1);
		assert_int_equal(g->rc, 0);
		assert_int_equal(g->status, 200);
		assert_int_equal(g->len, sizeof(query_a) + 1);
		/* the answer to this tag's own query: its id, QR, the marker */
		assert_int_equal(g->head[0] << 8 | g->head[1], t);
		assert_true(g->head[2] & 0x80);
		assert_int_equal(g->head[sizeof(query_a)], 0xa5);
	}
	assert_int_equal(nx_h2c_in_flight(f->cli), 0);
	assert_true(nx_h2c_can_submit(f->cli));
	assert_false(nx_h2c_want_close(f->cli));
	fx_free(f);
}

static void test_own_goaway(void **state)
{
	struct fx *f = fx_new(OWN, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	assert_int_equal(f->noq, 3);
	nx_h2_goaway(f->own); /* last stream id: every request it has seen */
	pump(f);
	assert_false(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, 9), -ESHUTDOWN);
	assert_false(nx_h2c_want_close(f->cli));
	for (int i = 0; i < 3; i++) {
		own_answer(f, i);
	}
	pump(f);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 1);
		assert_int_equal(f->got[t].rc, 0);
	}
	assert_int_equal(f->got[9].calls, 0);
	assert_true(nx_h2c_want_close(f->cli));
	fx_free(f);
}

/* Our own GOAWAY: the requests in flight still finish. */
static void test_client_goaway(void **state)
{
	struct fx *f = fx_new(OWN, NULL, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 1), 0);
	pump(f);
	nx_h2c_goaway(f->cli);
	assert_false(nx_h2c_can_submit(f->cli));
	assert_false(nx_h2c_want_close(f->cli));
	assert_int_equal(submit(f, 2), -ESHUTDOWN);
	pump(f);
	own_answer(f, 0);
	pump(f);
	assert_int_equal(f->got[1].calls, 1);
	assert_int_equal(f->got[1].rc, 0);
	assert_true(nx_h2c_want_close(f->cli));
	fx_free(f);
}

static void test_idle_bytes(void **state)
{
	size_t idle = nx_h2c_idle_bytes();
	assert_true(idle > 1000);
	assert_true(idle < 64 * 1024);
	assert_int_equal(nx_h2c_idle_bytes(), idle);
	/* the same figure as a session that went through the exchange with a real server */
	struct fx *f = fx_new_at(OWN, "upstream.example", NULL, NULL, 0);
	pump(f);
	assert_int_equal(led() - f->led0, (int64_t)idle);
	/* after one request the HPACK tables hold the repeated headers; the slot is gone */
	assert_int_equal(submit(f, 1), 0);
	pump(f);
	own_answer(f, 0);
	pump(f);
	assert_int_equal(f->got[1].rc, 0);
	int64_t used = led() - f->led0;
	assert_true(used >= (int64_t)idle);
	assert_true(used < (int64_t)idle + 4096);
	print_message("idle DoH upstream session: %zu ledger bytes (%lld after one query)\n", idle,
		      (long long)used);
	fx_free(f);
}

/* ---- tests: the raw server ---- */

static void test_request_form(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	/* our SETTINGS as the server sees them */
	assert_int_equal(nghttp2_session_get_remote_settings(f->raw, NGHTTP2_SETTINGS_ENABLE_PUSH),
			 0);
	assert_int_equal(
	    nghttp2_session_get_remote_settings(f->raw, NGHTTP2_SETTINGS_HEADER_TABLE_SIZE), 1024);
	uint8_t q[sizeof(query_a)];
	mkq(q, 0);
	assert_int_equal(nx_h2c_submit(f->cli, 77, q, sizeof(q)), 0);
	memset(q, 0xee, sizeof(q)); /* all went out at once: the client keeps no reference */
	assert_int_equal(submit(f, 78), 0);
	pump(f);
	assert_int_equal(f->ns, 2);
	struct sreq *r = &f->s[0];
	assert_string_equal(r->method, "POST");
	assert_string_equal(r->scheme, "https");
	assert_string_equal(r->authority, "dns.test:8443");
	assert_string_equal(r->path, "/dns-query");
	assert_string_equal(r->accept, "application/dns-message");
	assert_string_equal(r->ctype, "application/dns-message");
	assert_string_equal(r->clen, "33");
	assert_true(r->done);
	assert_int_equal(r->body_len, sizeof(query_a));
	mkq(q, 0);
	assert_memory_equal(r->body, q, sizeof(q));
	/* the second request's headers came through the HPACK table just as well */
	assert_string_equal(f->s[1].authority, "dns.test:8443");
	assert_string_equal(f->s[1].accept, "application/dns-message");
	assert_int_equal(f->s[1].body[1], 78);
	/* answer the second first */
	raw_answer_dns(f, 1);
	pump(f);
	assert_int_equal(f->got[78].calls, 1);
	assert_int_equal(f->got[77].calls, 0);
	raw_answer_dns(f, 0);
	pump(f);
	assert_int_equal(f->got[77].calls, 1);
	assert_int_equal(f->got[77].rc, 0);
	assert_int_equal(f->got[77].head[1], 0);
	assert_int_equal(f->got[78].head[1], 78);
	fx_free(f);
}

static void test_http_status(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 4; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_HTTP_STATUS);
	static const uint8_t text[] = "Service Unavailable\n";
	raw_respond(f, 0, "503", "text/plain", text, sizeof(text) - 1, true);
	raw_respond(f, 1, "404", NULL, NULL, 0, false);
	/* a non-200 with a dns-message body is still an HTTP error; its headers alone decide, and
	 * the body still to come is not wanted: the client resets the stream */
	nghttp2_nv nv[] = {
	    {(uint8_t *)":status", (uint8_t *)"400", 7, 3, 0},
	    {(uint8_t *)"content-type", (uint8_t *)"application/dns-message", 12, 23, 0}};
	assert_int_equal(
	    nghttp2_submit_headers(f->raw, NGHTTP2_FLAG_NONE, f->s[2].stream, NULL, nv, 2, NULL),
	    0);
	uint8_t a[sizeof(query_a)];
	mkq(a, 3);
	/* media type names are case-insensitive, parameters allowed */
	raw_respond(f, 3, "200", "Application/DNS-Message ; q=1", a, sizeof(a), true);
	pump(f);
	assert_int_equal(f->got[0].rc, -EPROTO);
	assert_int_equal(f->got[0].status, 503);
	assert_int_equal(f->got[1].rc, -EPROTO);
	assert_int_equal(f->got[1].status, 404);
	assert_int_equal(f->got[2].rc, -EPROTO);
	assert_int_equal(f->got[2].status, 400);
	assert_int_equal(f->got[3].rc, 0);
	assert_int_equal(f->got[3].status, 200);
	assert_int_equal(f->got[3].len, sizeof(a));
	assert_int_equal(f->got[3].hash, fnv(a, sizeof(a)));
	for (int t = 0; t < 4; t++) {
		assert_int_equal(f->got[t].calls, 1);
	}
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_HTTP_STATUS), st0 + 3);
	assert_true(f->s[2].closed);
	assert_int_equal(f->s[2].code, NGHTTP2_CANCEL);
	assert_true(f->s[1].closed);
	assert_int_equal(f->s[1].code, NGHTTP2_NO_ERROR);
	assert_int_equal(nx_h2c_in_flight(f->cli), 0);
	fx_free(f);
}

static void test_content_type(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 4; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_CONTENT_TYPE);
	uint8_t a[sizeof(query_a)];
	mkq(a, 0);
	raw_respond(f, 0, "200", "text/html", a, sizeof(a), true);
	raw_respond(f, 1, "200", NULL, a, sizeof(a), true);
	raw_respond(f, 2, "200", "application/dns-messages", a, sizeof(a), true);
	raw_respond(f, 3, "200", "application/dns", a, sizeof(a), true);
	pump(f);
	for (int t = 0; t < 4; t++) {
		assert_int_equal(f->got[t].calls, 1);
		assert_int_equal(f->got[t].rc, NX_EFORMAT);
		assert_int_equal(f->got[t].status, 200);
	}
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_CONTENT_TYPE), st0 + 4);
	fx_free(f);
}

static void test_short_body(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 0), 0);
	assert_int_equal(submit(f, 1), 0);
	pump(f);
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_SHORT_BODY);
	raw_respond(f, 0, "200", "application/dns-message", query_a, 11, true);
	raw_respond(f, 1, "200", "application/dns-message", NULL, 0, false);
	pump(f);
	assert_int_equal(f->got[0].rc, NX_EMALFORMED);
	assert_int_equal(f->got[1].rc, NX_EMALFORMED);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_SHORT_BODY), st0 + 2);
	fx_free(f);
}

/* Bodies over max_body (announced or streamed), exactly max_body, and the connection budget. */
static void test_huge_body(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	enum { BIG = 200000 }; /* more than a window: the server is still sending at the reset */
	uint8_t *big = test_malloc(BIG);
	for (size_t i = 0; i < BIG; i++) {
		big[i] = (uint8_t)(i * 31 + 7);
	}
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_TOO_LARGE);
	/* announced too large: refused on the headers alone, before any of the body */
	nghttp2_nv nv[] = {
	    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
	    {(uint8_t *)"content-type", (uint8_t *)"application/dns-message", 12, 23, 0},
	    {(uint8_t *)"content-length", (uint8_t *)"65536", 14, 5, 0}};
	assert_int_equal(
	    nghttp2_submit_headers(f->raw, NGHTTP2_FLAG_NONE, f->s[0].stream, NULL, nv, 3, NULL),
	    0);
	pump(f);
	assert_int_equal(f->got[0].calls, 1);
	assert_int_equal(f->got[0].rc, -EMSGSIZE);
	assert_int_equal(f->s[0].code, NGHTTP2_CANCEL);
	raw_respond(f, 1, "200", "application/dns-message", big, BIG, false);  /* streamed */
	raw_respond(f, 2, "200", "application/dns-message", big, 65535, true); /* the limit */
	pump(f);
	assert_int_equal(f->got[0].rc, -EMSGSIZE);
	assert_int_equal(f->got[1].rc, -EMSGSIZE);
	assert_int_equal(f->got[2].rc, 0);
	assert_int_equal(f->got[2].len, 65535);
	assert_int_equal(f->got[2].hash, fnv(big, 65535));
	for (int t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 1);
	}
	assert_int_equal(f->s[0].code, NGHTTP2_CANCEL);
	assert_int_equal(f->s[1].code, NGHTTP2_CANCEL);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_TOO_LARGE), st0 + 2);
	assert_int_equal(nx_h2c_in_flight(f->cli), 0); /* slots and body buffers released */
	test_free(big);
	fx_free(f);
}

/* A smaller max_body, and the per-connection budget for heap bodies. */
static void test_body_budget(void **state)
{
	struct nx_h2c_limits lim = {.max_streams = 10, .max_body = 2000};
	struct fx *f = fx_new(RAW, &lim, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 0), 0);
	assert_int_equal(submit(f, 1), 0);
	pump(f);
	uint8_t body[2001];
	for (size_t i = 0; i < sizeof(body); i++) {
		body[i] = (uint8_t)i;
	}
	raw_respond(f, 0, "200", "application/dns-message", body, 2000, false);
	raw_respond(f, 1, "200", "application/dns-message", body, 2001, false);
	pump(f);
	assert_int_equal(f->got[0].rc, 0);
	assert_int_equal(f->got[0].hash, fnv(body, 2000));
	assert_int_equal(f->got[1].rc, -EMSGSIZE);
	fx_free(f);

	/* five announced 60000-byte bodies: four fit NX_H2C_CONN_BODY_MAX, the fifth does not */
	f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 5; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	enum { LEN = 60000 };
	static_assert(4 * LEN <= NX_H2C_CONN_BODY_MAX && 5 * LEN > NX_H2C_CONN_BODY_MAX,
		      "the test straddles the budget");
	uint8_t *big = test_malloc(LEN);
	for (size_t i = 0; i < LEN; i++) {
		big[i] = (uint8_t)(i * 13);
	}
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_BODY_BUDGET);
	for (int i = 0; i < 5; i++) {
		raw_respond(f, i, "200", "application/dns-message", big, LEN, true);
	}
	pump(f);
	int ok = 0, full = 0;
	for (int t = 0; t < 5; t++) {
		assert_int_equal(f->got[t].calls, 1);
		if (f->got[t].rc == 0) {
			assert_int_equal(f->got[t].hash, fnv(big, LEN));
			ok++;
		} else {
			assert_int_equal(f->got[t].rc, -ENOBUFS);
			full++;
		}
	}
	assert_int_equal(ok, 4);
	assert_int_equal(full, 1);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_BODY_BUDGET), st0 + 1);
	/* the budget is free again: the next large answer fits */
	assert_int_equal(submit(f, 9), 0);
	pump(f);
	raw_respond(f, 5, "200", "application/dns-message", big, LEN, true);
	pump(f);
	assert_int_equal(f->got[9].rc, 0);
	test_free(big);
	fx_free(f);
}

static void test_resets(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	uint64_t rst0 = nx_stat_read(NX_STAT_DOHC_RESET);
	uint64_t ref0 = nx_stat_read(NX_STAT_DOHC_REFUSED);
	nghttp2_submit_rst_stream(f->raw, NGHTTP2_FLAG_NONE, f->s[0].stream,
				  NGHTTP2_INTERNAL_ERROR);
	nghttp2_submit_rst_stream(f->raw, NGHTTP2_FLAG_NONE, f->s[1].stream,
				  NGHTTP2_REFUSED_STREAM);
	/* reset after the headers, mid-body */
	uint8_t a[sizeof(query_a)];
	mkq(a, 2);
	nghttp2_nv nv[] = {
	    {(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
	    {(uint8_t *)"content-type", (uint8_t *)"application/dns-message", 12, 23, 0}};
	assert_int_equal(
	    nghttp2_submit_headers(f->raw, NGHTTP2_FLAG_NONE, f->s[2].stream, NULL, nv, 2, NULL),
	    0);
	pump(f);
	assert_int_equal(f->got[2].calls, 0);
	nghttp2_submit_rst_stream(f->raw, NGHTTP2_FLAG_NONE, f->s[2].stream, NGHTTP2_CANCEL);
	pump(f);
	assert_int_equal(f->got[0].rc, -ECONNRESET);
	assert_int_equal(f->got[1].rc, -EAGAIN);
	assert_int_equal(f->got[2].rc, -ECONNRESET);
	assert_int_equal(f->got[2].status, 200);
	for (int t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 1);
	}
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_RESET), rst0 + 2);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_REFUSED), ref0 + 1);
	assert_int_equal(nx_h2c_in_flight(f->cli), 0);
	fx_free(f);
}

static void test_goaway_last_stream(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 5; t++) {
		assert_int_equal(submit(f, t), 0); /* streams 1, 3, 5, 7, 9 */
	}
	pump(f);
	assert_int_equal(f->ns, 5);
	assert_int_equal(f->s[2].stream, 5);
	uint64_t ref0 = nx_stat_read(NX_STAT_DOHC_REFUSED);
	assert_int_equal(
	    nghttp2_submit_goaway(f->raw, NGHTTP2_FLAG_NONE, 5, NGHTTP2_NO_ERROR, NULL, 0), 0);
	pump(f);
	/* above the last stream id: not processed, retry elsewhere; at once */
	assert_int_equal(f->got[3].calls, 1);
	assert_int_equal(f->got[3].rc, -EAGAIN);
	assert_int_equal(f->got[4].calls, 1);
	assert_int_equal(f->got[4].rc, -EAGAIN);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_REFUSED), ref0 + 2);
	for (int t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 0);
	}
	assert_int_equal(nx_h2c_in_flight(f->cli), 3);
	assert_false(nx_h2c_can_submit(f->cli));
	assert_false(nx_h2c_want_close(f->cli));
	assert_int_equal(submit(f, 10), -ESHUTDOWN);
	/* the rest finish */
	for (int i = 0; i < 3; i++) {
		raw_answer_dns(f, i);
	}
	pump(f);
	for (int t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 1);
		assert_int_equal(f->got[t].rc, 0);
		assert_int_equal(f->got[t].head[1], t);
	}
	assert_int_equal(f->got[10].calls, 0);
	assert_true(nx_h2c_want_close(f->cli));
	assert_int_equal(f->feed_rc, 0);
	fx_free(f);
}

/* Requests sent before the server's SETTINGS arrive may exceed its limit: the ones it refuses
 * come back retryable, the rest are answered. */
static void test_refused_before_settings(void **state)
{
	nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1}};
	struct fx *f = fx_new(RAW, NULL, iv, 1);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(submit(f, t), 0); /* nghttp2 assumes 100 until told */
	}
	uint64_t ref0 = nx_stat_read(NX_STAT_DOHC_REFUSED);
	pump(f);
	assert_int_equal(f->got[1].rc, -EAGAIN);
	assert_int_equal(f->got[2].rc, -EAGAIN);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_REFUSED), ref0 + 2);
	assert_int_equal(f->got[0].calls, 0);
	assert_false(nx_h2c_can_submit(f->cli)); /* one in flight, the limit is now known */
	raw_answer_dns(f, 0);
	pump(f);
	assert_int_equal(f->got[0].rc, 0);
	for (int t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 1);
	}
	assert_true(nx_h2c_can_submit(f->cli));
	fx_free(f);
}

static void test_max_concurrent(void **state)
{
	nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 2}};
	struct fx *f = fx_new(RAW, NULL, iv, 1);
	pump(f);
	assert_true(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, 0), 0);
	assert_true(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, 1), 0);
	assert_false(nx_h2c_can_submit(f->cli));
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_STREAM_LIMIT);
	assert_int_equal(submit(f, 2), NX_ELIMIT);
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_STREAM_LIMIT), st0 + 1);
	assert_int_equal(nx_h2c_in_flight(f->cli), 2);
	pump(f);
	raw_answer_dns(f, 1);
	pump(f);
	assert_int_equal(f->got[1].rc, 0);
	assert_true(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, 2), 0);
	assert_false(nx_h2c_can_submit(f->cli));
	pump(f);
	raw_answer_dns(f, 0);
	raw_answer_dns(f, 2);
	pump(f);
	assert_int_equal(f->got[0].rc, 0);
	assert_int_equal(f->got[2].rc, 0);
	assert_int_equal(f->got[2].calls, 1);
	fx_free(f);

	/* our own cap below the server's */
	struct nx_h2c_limits lim = {.max_streams = 3, .max_body = 65535};
	f = fx_new(RAW, &lim, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	assert_false(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, 3), NX_ELIMIT);
	pump(f);
	assert_int_equal(f->answers, 0);
	fx_free(f); /* requests in flight at free: released (the ledger check), no answer */
}

static void cancel_other(struct fx *f, uint64_t tag)
{
	if (tag == 0) {
		assert_int_equal(nx_h2c_cancel(f->cli, 1), 0);
	}
}

static void test_cancel(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 3; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	assert_int_equal(nx_h2c_cancel(f->cli, 1), 0);
	assert_int_equal(nx_h2c_in_flight(f->cli), 2); /* the RST_STREAM went out: closed */
	assert_int_equal(nx_h2c_cancel(f->cli, 1), NX_ENOTFOUND);
	assert_int_equal(nx_h2c_cancel(f->cli, 55), NX_ENOTFOUND);
	pump(f);
	assert_true(f->s[1].closed);
	assert_int_equal(f->s[1].code, NGHTTP2_CANCEL);
	raw_answer_dns(f, 0);
	raw_answer_dns(f, 2);
	pump(f);
	assert_int_equal(f->got[0].calls, 1);
	assert_int_equal(f->got[1].calls, 0);
	assert_int_equal(f->got[2].calls, 1);
	assert_int_equal(nx_h2c_cancel(f->cli, 0), NX_ENOTFOUND); /* already answered */

	/* a cancel from inside an answer call, of an answer due in the same feed */
	f->answers = 0;
	memset(f->got, 0, sizeof(f->got));
	assert_int_equal(submit(f, 0), 0);
	assert_int_equal(submit(f, 1), 0);
	pump(f);
	f->on_answer = cancel_other;
	raw_answer_dns(f, 3);
	raw_answer_dns(f, 4);
	pump(f);
	assert_int_equal(f->got[0].calls, 1);
	assert_int_equal(f->got[1].calls, 0);
	assert_int_equal(nx_h2c_in_flight(f->cli), 0);
	/* cancel before the response: no answer ever */
	f->on_answer = NULL;
	assert_int_equal(submit(f, 5), 0);
	pump(f);
	assert_int_equal(nx_h2c_cancel(f->cli, 5), 0);
	assert_int_equal(nx_h2c_in_flight(f->cli), 0);
	pump(f);
	assert_int_equal(f->got[5].calls, 0);
	assert_int_equal(f->feed_rc, 0);
	fx_free(f);
}

static void resubmit(struct fx *f, uint64_t tag)
{
	if (tag < 10) {
		int before = f->answers;
		assert_int_equal(submit(f, tag + 10), 0);
		assert_int_equal(f->answers, before); /* not from inside submit */
	}
}

/* An answer call may submit the next request. */
static void test_submit_from_answer(void **state)
{
	struct fx *f = fx_new(OWN, NULL, NULL, 0);
	pump(f);
	f->on_answer = resubmit;
	assert_int_equal(submit(f, 1), 0);
	assert_int_equal(submit(f, 2), 0);
	pump(f);
	own_answer(f, 0);
	own_answer(f, 1);
	pump(f);
	assert_int_equal(f->noq, 4);
	own_answer(f, 3);
	own_answer(f, 2);
	pump(f);
	static const uint64_t tags[] = {1, 2, 11, 12};
	for (size_t i = 0; i < NX_ARRAY_LEN(tags); i++) {
		uint64_t t = tags[i];
		assert_int_equal(f->got[t].calls, 1);
		assert_int_equal(f->got[t].rc, 0);
		assert_int_equal(f->got[t].head[1], t);
	}
	assert_int_equal(f->answers, 4);
	fx_free(f);
}

static void test_fail_all(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	for (uint64_t t = 0; t < 4; t++) {
		assert_int_equal(submit(f, t), 0);
	}
	pump(f);
	raw_answer_dns(f, 2);
	pump(f);
	assert_int_equal(nx_h2c_cancel(f->cli, 3), 0);
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_CONN_LOST);
	nx_h2c_fail_all(f->cli, NX_ETLS_CLOSED);
	assert_int_equal(f->got[0].rc, NX_ETLS_CLOSED);
	assert_int_equal(f->got[1].rc, NX_ETLS_CLOSED);
	assert_int_equal(f->got[2].rc, 0);
	for (int t = 0; t < 3; t++) {
		assert_int_equal(f->got[t].calls, 1);
	}
	assert_int_equal(f->got[3].calls, 0); /* cancelled */
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_CONN_LOST), st0 + 2);
	assert_int_equal(nx_h2c_in_flight(f->cli), 0);
	assert_true(nx_h2c_want_close(f->cli));
	assert_false(nx_h2c_can_submit(f->cli));
	assert_int_equal(submit(f, 5), NX_ETLS_CLOSED);
	assert_int_equal(nx_h2c_feed(f->cli, (const uint8_t *)"x", 1), NX_ETLS_CLOSED);
	nx_h2c_fail_all(f->cli, -EPIPE); /* idempotent */
	assert_int_equal(f->answers, 3);
	fx_free(f);

	f = fx_new(RAW, NULL, NULL, 0);
	assert_int_equal(submit(f, 0), 0); /* before the server's SETTINGS even arrived */
	nx_h2c_fail_all(f->cli, 0);
	assert_int_equal(f->got[0].rc, -ECONNABORTED);
	fx_free(f);
}

static void test_ping(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 0), 0);
	pump(f);
	uint8_t opaque[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	assert_int_equal(nghttp2_submit_ping(f->raw, NGHTTP2_FLAG_NONE, opaque), 0);
	pump(f);
	assert_int_equal(f->ping_acks, 1);
	assert_int_equal(f->got[0].calls, 0);
	raw_answer_dns(f, 0);
	pump(f);
	assert_int_equal(f->got[0].rc, 0);
	fx_free(f);
}

/* 103 Early Hints before the final response (RFC 9110 15.2). */
static void test_interim(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 4), 0);
	pump(f);
	nghttp2_nv nv[] = {{(uint8_t *)":status", (uint8_t *)"103", 7, 3, 0},
			   {(uint8_t *)"content-type", (uint8_t *)"text/html", 12, 9, 0}};
	assert_int_equal(
	    nghttp2_submit_headers(f->raw, NGHTTP2_FLAG_NONE, f->s[0].stream, NULL, nv, 2, NULL),
	    0);
	pump(f);
	assert_int_equal(f->got[4].calls, 0);
	raw_answer_dns(f, 0);
	pump(f);
	assert_int_equal(f->got[4].calls, 1);
	assert_int_equal(f->got[4].rc, 0);
	assert_int_equal(f->got[4].status, 200);
	fx_free(f);
}

/* A window too small for the query: the tail is copied and follows as the window opens. */
static void test_request_copy(void **state)
{
	nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 8}};
	struct fx *f = fx_new(RAW, NULL, iv, 1);
	pump(f);
	uint8_t q[sizeof(query_a)];
	mkq(q, 0x77);
	int64_t before = led();
	assert_int_equal(nx_h2c_submit(f->cli, 7, q, sizeof(q)), 0);
	/* the slot, nghttp2's stream, and a copy of the 25 bytes the window held back */
	assert_true(led() - before >= (int64_t)(sizeof(q) - 8));
	memset(q, 0xee, sizeof(q));
	pump(f);
	assert_int_equal(f->ns, 1);
	assert_true(f->s[0].done);
	assert_int_equal(f->s[0].body_len, sizeof(query_a));
	mkq(q, 0x77);
	assert_memory_equal(f->s[0].body, q, sizeof(q));
	raw_answer_dns(f, 0);
	pump(f);
	assert_int_equal(f->got[7].rc, 0);
	assert_int_equal(f->got[7].head[1], 0x77);
	fx_free(f);
}

static void test_protocol_error(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 0), 0);
	pump(f);
	uint64_t st0 = nx_stat_read(NX_STAT_DOHC_PROTOCOL);
	/* DATA on stream 0 is a connection error (RFC 9113 6.1) */
	static const uint8_t bad[] = {0, 0, 1, NGHTTP2_DATA, 0, 0, 0, 0, 0, 'x'};
	size_t c0 = f->c2s_len;
	assert_int_equal(nx_h2c_feed(f->cli, bad, sizeof(bad)), NX_EMALFORMED);
	assert_true(f->c2s_len > c0); /* our GOAWAY */
	assert_int_equal(nx_stat_read(NX_STAT_DOHC_PROTOCOL), st0 + 1);
	assert_true(nx_h2c_want_close(f->cli));
	assert_int_equal(submit(f, 1), NX_EMALFORMED);
	assert_int_equal(f->got[0].calls, 0);
	nx_h2c_fail_all(f->cli, NX_EMALFORMED);
	assert_int_equal(f->got[0].calls, 1);
	assert_int_equal(f->got[0].rc, NX_EMALFORMED);
	f->c2s_len = 0;
	fx_free(f);
}

static void test_send_failure(void **state)
{
	struct fx *f = fx_new(RAW, NULL, NULL, 0);
	pump(f);
	assert_int_equal(submit(f, 0), 0);
	pump(f);
	f->send_rc = -EPIPE;
	assert_int_equal(submit(f, 1), -EPIPE);
	assert_int_equal(submit(f, 2), -EPIPE);
	assert_int_equal(nx_h2c_cancel(f->cli, 0), -EPIPE);
	assert_int_equal(nx_h2c_in_flight(f->cli), 1);
	nx_h2c_fail_all(f->cli, -EPIPE);
	assert_int_equal(f->got[0].calls, 1);
	assert_int_equal(f->got[0].rc, -EPIPE);
	assert_int_equal(f->got[1].calls, 0); /* its submit failed: never answered */
	fx_free(f);

	/* at creation: nothing is left */
	struct fx g = {.send_rc = -ECONNRESET};
	struct nx_h2c_io io = {.send = cli_send, .answer = cli_answer};
	struct nx_h2c *h;
	int64_t l0 = led();
	assert_int_equal(nx_h2c_new("a", "/", NULL, &io, &g, &h), -ECONNRESET);
	assert_null(h);
	assert_int_equal(led(), l0);
}

static void test_arguments(void **state)
{
	struct fx g = {0};
	g.c2s = test_malloc(WIRE_MAX);
	struct nx_h2c_io io = {.send = cli_send, .answer = cli_answer};
	struct nx_h2c *h;
	char longname[NX_H2C_AUTHORITY_MAX + 2];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	const char *bad_auth[] = {"", "a b", "a\r\nx: y", longname};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad_auth); i++) {
		assert_int_equal(nx_h2c_new(bad_auth[i], "/dns-query", NULL, &io, &g, &h), -EINVAL);
		assert_null(h);
	}
	const char *bad_path[] = {"", "dns-query", "/a b", "/\x7f"};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad_path); i++) {
		assert_int_equal(nx_h2c_new("dns.test", bad_path[i], NULL, &io, &g, &h), -EINVAL);
	}
	struct nx_h2c_limits bad[] = {
	    {0, 512}, {NX_H2C_STREAMS_LIMIT + 1, 512}, {10, 11}, {10, 65536}};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad); i++) {
		assert_int_equal(nx_h2c_new("dns.test", "/dns-query", &bad[i], &io, &g, &h),
				 -EINVAL);
	}
	struct nx_h2c_io half = {.send = cli_send};
	assert_int_equal(nx_h2c_new("dns.test", "/dns-query", NULL, &half, &g, &h), -EINVAL);
	assert_int_equal(g.c2s_len, 0);

	int64_t l0 = led();
	/* every allocation of the constructor failing in turn: -ENOMEM and nothing left */
	long n = 0;
	for (;; n++) {
		nx_mem_fail_after(n);
		int rc = nx_h2c_new("dns.test", "/dns-query", NULL, &io, &g, &h);
		nx_mem_fail_after(-1);
		if (rc == 0) {
			break;
		}
		assert_int_equal(rc, -ENOMEM);
		assert_null(h);
		assert_int_equal(led(), l0);
		g.c2s_len = 0;
	}
	assert_true(n > 3);
	uint8_t q[65536] = {0};
	assert_int_equal(nx_h2c_submit(h, 1, q, 11), -EINVAL);
	assert_int_equal(nx_h2c_submit(h, 1, q, 65536), -EINVAL);
	nx_mem_fail_after(0);
	assert_int_equal(nx_h2c_submit(h, 1, q, 12), -ENOMEM);
	nx_mem_fail_after(-1);
	assert_int_equal(nx_h2c_in_flight(h), 0);
	nx_h2c_free(h);
	assert_int_equal(led(), l0);
	assert_int_equal(g.answers, 0);
	nx_h2c_free(NULL);
	test_free(g.c2s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_own_out_of_order),
	    cmocka_unit_test(test_own_goaway),
	    cmocka_unit_test(test_client_goaway),
	    cmocka_unit_test(test_idle_bytes),
	    cmocka_unit_test(test_request_form),
	    cmocka_unit_test(test_http_status),
	    cmocka_unit_test(test_content_type),
	    cmocka_unit_test(test_short_body),
	    cmocka_unit_test(test_huge_body),
	    cmocka_unit_test(test_body_budget),
	    cmocka_unit_test(test_resets),
	    cmocka_unit_test(test_goaway_last_stream),
	    cmocka_unit_test(test_refused_before_settings),
	    cmocka_unit_test(test_max_concurrent),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_submit_from_answer),
	    cmocka_unit_test(test_fail_all),
	    cmocka_unit_test(test_ping),
	    cmocka_unit_test(test_interim),
	    cmocka_unit_test(test_request_copy),
	    cmocka_unit_test(test_protocol_error),
	    cmocka_unit_test(test_send_failure),
	    cmocka_unit_test(test_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

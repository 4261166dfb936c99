#include "net/h2.h"
#include "net/h2mem.h"

#include <assert.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "net/doh.h"

/*
 * HPACK dynamic tables. The decoder's bound is what we advertise in SETTINGS_HEADER_TABLE_SIZE
 * (RFC 7541 4.2): DoH requests repeat a handful of headers, 1 KiB keeps the useful ones while
 * a hostile client cannot make us hold 4 KiB per connection. Our encoder's table stays empty:
 * four response headers, three of them in the static table, are not worth a per-connection
 * table.
 */
#define H2_HPACK_DECODE_TABLE 1024
#define H2_HPACK_ENCODE_TABLE 0
#define H2_INLINE NX_H2_PATH_MAX /* slot's inline bytes: the :path, then a POST body that fits */

static const char client_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN (sizeof(client_preface) - 1)

#define H2_HTTP1_BODY "DNS-over-HTTPS here requires HTTP/2.\r\n"
#define H2_HTTP1_BODY_LEN "38"
static_assert(sizeof(H2_HTTP1_BODY) - 1 == 38, "H2_HTTP1_BODY_LEN is the body's length");
static const char http1_reply[] = "HTTP/1.1 505 HTTP Version Not Supported\r\n"
				  "Content-Type: text/plain\r\n"
				  "Content-Length: " H2_HTTP1_BODY_LEN "\r\n"
				  "Connection: close\r\n"
				  "\r\n" H2_HTTP1_BODY;

enum { M_NONE, M_GET, M_POST, M_OTHER, M_HEAD };

enum st_state {
	ST_RECV,  /* collecting headers and body */
	ST_READY, /* request complete, queued for dispatch after nghttp2 returns */
	ST_AWAIT, /* handed to io->query, waiting for nx_h2_respond / _error / _reset */
	ST_SEND,  /* our 200 submitted; bytes may still be waiting for the peer's window */
	ST_DONE,  /* answered with an error or reset: further request bytes are ignored */
};

/* One open stream. Fixed size, from the connection's free list. */
struct stream {
	struct stream *next;  /* in h->used or h->spare */
	struct stream *prev;  /* in h->used */
	struct stream *ready; /* next on h->ready_head's queue */
	struct nx_h2 *h;      /* borrowed: the session that owns this slot */
	int32_t id;	      /* HTTP/2 stream id */
	uint8_t state;	      /* enum st_state */
	uint8_t method;	      /* M_* */
	bool queued;	      /* on the ready queue */
	bool path_long;	      /* :path over NX_H2_PATH_MAX: answered 414 */
	bool ctype_long;      /* content-type over NX_H2_CTYPE_MAX: treated as unsupported */
	bool has_clen;	      /* content-length seen */
	uint8_t ctype_len;    /* bytes in ctype */
	uint16_t path_len;    /* bytes of :path at buf[0] */
	uint32_t clen;	      /* content-length value (saturated) */
	uint32_t body_len;    /* body bytes received and kept */
	uint32_t big_cap;     /* bytes allocated at big */
	uint8_t *big;	      /* owned: the body when it does not fit buf after the path */
	const uint8_t *out;   /* response bytes: caller's (during nx_h2_respond), static text,
				 or out_copy; NULL after a failed copy (the reader resets) */
	uint32_t out_len;     /* bytes at out */
	uint32_t out_off;     /* bytes of out already given to nghttp2 */
	uint8_t *out_copy;    /* owned: copy of an unsent response tail, copy_len bytes */
	uint32_t copy_len;    /* bytes at out_copy (charged to h->out_bytes) */
	char ctype[NX_H2_CTYPE_MAX]; /* content-type value */
	uint8_t buf[H2_INLINE];	     /* :path, then the body while it fits */
};
static_assert(sizeof(struct stream) <= 1200, "a stream slot is part of the DoH memory budget");

struct nx_h2 {
	nghttp2_session *s;	   /* owned */
	struct nx_h2_mem mem;  /* nghttp2's allocator and the bytes it holds (net/h2mem.h) */
	const struct nx_h2_io *io; /* borrowed for the session's life */
	void *ud;		   /* borrowed: io's user data */
	struct stream *used;	   /* owned: slots of open streams (doubly linked) */
	struct stream *spare;	   /* owned: free slots, released when no stream is open */
	struct stream *ready_head; /* borrowed from used: requests to dispatch, FIFO */
	struct stream *ready_tail;
	unsigned open;		   /* slots in used */
	unsigned max_streams;	   /* current cap */
	unsigned max_streams_init; /* cap at creation: nx_h2_set_max_streams never exceeds it */
	size_t max_body;	   /* per-stream body limit */
	size_t body_bytes;	   /* request body bytes held by this connection's streams */
	size_t out_bytes;	   /* response bytes copied for stalled windows */
	size_t preface;		   /* client preface bytes matched so far */
	int dead;		   /* 0, or the error that ended the session */
	bool proto_error;	   /* we sent a GOAWAY with an error code */
};

/* ---- slots ---- */

static struct stream *slot_take(struct nx_h2 *h, int32_t id)
{
	struct stream *st = h->spare;
	if (st) {
		h->spare = st->next;
	} else {
		st = nx_mem_alloc(NX_OWNER_doh_sessions, sizeof(*st));
		if (!st) {
			return NULL;
		}
	}
	/* everything before the two buffers; they are written before they are read */
	memset(st, 0, offsetof(struct stream, ctype));
	st->h = h;
	st->id = id;
	st->next = h->used;
	if (h->used) {
		h->used->prev = st;
	}
	h->used = st;
	h->open++;
	return st;
}

static void body_drop(struct nx_h2 *h, struct stream *st)
{
	h->body_bytes -= st->body_len;
	st->body_len = 0;
	nx_mem_free(NX_OWNER_doh_sessions, st->big, st->big_cap);
	st->big = NULL;
	st->big_cap = 0;
}

static void ready_unlink(struct nx_h2 *h, struct stream *st)
{
	struct stream **pp = &h->ready_head, *prev = NULL;
	while (*pp && *pp != st) {
		prev = *pp;
		pp = &(*pp)->ready;
	}
	if (*pp) {
		*pp = st->ready;
		if (h->ready_tail == st) {
			h->ready_tail = prev;
		}
	}
	st->queued = false;
	st->ready = NULL;
}

static void spare_release(struct nx_h2 *h)
{
	while (h->spare) {
		struct stream *n = h->spare->next;
		nx_mem_free(NX_OWNER_doh_sessions, h->spare, sizeof(*h->spare));
		h->spare = n;
	}
}

static void slot_release(struct nx_h2 *h, struct stream *st)
{
	if (st->queued) {
		ready_unlink(h, st);
	}
	body_drop(h, st);
	h->out_bytes -= st->copy_len;
	nx_mem_free(NX_OWNER_doh_sessions, st->out_copy, st->copy_len);
	st->out_copy = NULL;
	st->copy_len = 0;
	if (st->prev) {
		st->prev->next = st->next;
	} else {
		h->used = st->next;
	}
	if (st->next) {
		st->next->prev = st->prev;
	}
	h->open--;
	st->next = h->spare;
	h->spare = st;
	if (h->open == 0) {
		spare_release(h); /* an idle connection holds no slots */
	}
}

static struct stream *stream_get(struct nx_h2 *h, int32_t id)
{
	if (id <= 0) {
		return NULL;
	}
	return nghttp2_session_get_stream_user_data(h->s, id);
}

/* ---- responses ---- */

static ssize_t read_out(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct stream *st = src->ptr;
	if (!st->out) {
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* copy failed: reset the stream */
	}
	size_t n = NX_MIN(length, (size_t)(st->out_len - st->out_off));
	memcpy(buf, st->out + st->out_off, n);
	st->out_off += (uint32_t)n;
	if (st->out_off == st->out_len) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

#define NV(n, v)                                                                                   \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),                          \
		    NGHTTP2_NV_FLAG_NO_COPY_NAME                                                   \
	}

struct err_text {
	int status;
	enum nx_stat stat;
	const char *body;
};

static const struct err_text err_texts[] = {
    {400, NX_STAT_DOH_E400, "400 Bad Request: no valid DNS query (RFC 8484: ?dns= or a body)\n"},
    {404, NX_STAT_DOH_E404, "404 Not Found: DNS queries go to /dns-query\n"},
    {405, NX_STAT_DOH_E405, "405 Method Not Allowed: use GET or POST\n"},
    {413, NX_STAT_DOH_E413, "413 Content Too Large: the DNS query is too large\n"},
    {414, NX_STAT_DOH_E414, "414 URI Too Long: send large queries with POST\n"},
    {415, NX_STAT_DOH_E415, "415 Unsupported Media Type: use application/dns-message\n"},
    {500, NX_STAT_DOH_E500, "500 Internal Server Error\n"},
    {503, NX_STAT_DOH_E503, "503 Service Unavailable: try again later\n"},
    {0, NX_STAT_DOH_EOTHER, "DNS-over-HTTPS error\n"},
};

/* Submit an HTTP error answer (no send: the caller flushes). */
static int answer_error(struct nx_h2 *h, struct stream *st, int status)
{
	const struct err_text *e = err_texts;
	while (e->status && e->status != status) {
		e++;
	}
	nx_stat_inc(e->stat);
	body_drop(h, st);
	st->state = ST_DONE;
	st->out = (const uint8_t *)e->body;
	st->out_len = (uint32_t)strlen(e->body);
	st->out_off = 0;
	char code[8], clen[16];
	snprintf(code, sizeof(code), "%d", status);
	snprintf(clen, sizeof(clen), "%u", (unsigned)st->out_len);
	nghttp2_nv nv[] = {
	    NV(":status", code),
	    NV("content-type", "text/plain; charset=utf-8"),
	    NV("content-length", clen),
	    NV("allow", "GET, POST"),
	};
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_out};
	size_t nvlen = status == 405 ? 4 : 3; /* RFC 9110 15.5.6: 405 carries Allow */
	/* RFC 9110 9.3.2: a response to HEAD has no content (its length may still be said). */
	int rc = nghttp2_submit_response(h->s, st->id, nv, nvlen,
					 st->method == M_HEAD ? NULL : &prd);
	return rc ? NX_EMALFORMED : 0;
}

static int fail(struct nx_h2 *h, int err)
{
	if (!h->dead) {
		h->dead = err;
	}
	return h->dead;
}

/* Hand everything nghttp2 wants to send to the transport. */
static int flush(struct nx_h2 *h)
{
	if (h->dead) {
		return h->dead;
	}
	if (h->preface < H2_PREFACE_LEN) {
		return 0; /* our SETTINGS wait for a verified client preface (HTTP/1.x gets text) */
	}
	for (;;) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(h->s, &data);
		if (n < 0) {
			return fail(h, n == NGHTTP2_ERR_NOMEM ? -ENOMEM : NX_EMALFORMED);
		}
		if (n == 0) {
			if (h->open == 0) {
				nx_h2_mem_idle(&h->mem); /* a large answer's frame pages go back */
			}
			return 0;
		}
		nx_h2_mem_sent(&h->mem, data, (size_t)n);
		int rc = h->io->send(h->ud, data, (size_t)n);
		if (rc < 0) {
			return fail(h, rc);
		}
	}
}

/* ---- nghttp2 callbacks (request side) ---- */

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct nx_h2 *h = ud;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) {
		return 0;
	}
	/* nghttp2 refuses beyond the advertised cap itself; this keeps our slots bounded even
	 * if its count and ours ever disagree (the header block is then ignored). */
	if (h->open >= h->max_streams) {
		nx_stat_inc(NX_STAT_DOH_STREAM_CAP);
		return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id,
						 NGHTTP2_REFUSED_STREAM) == 0
			   ? 0
			   : NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	struct stream *st = slot_take(h, f->hd.stream_id);
	if (!st) {
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
	}
	nghttp2_session_set_stream_user_data(s, f->hd.stream_id, st);
	return 0;
}

static bool is(const uint8_t *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && memcmp(s, lit, n) == 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) {
		return 0; /* trailers carry nothing DoH needs */
	}
	struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st || st->state != ST_RECV) {
		return 0;
	}
	if (is(name, namelen, ":method")) {
		st->method = is(value, valuelen, "GET")	   ? M_GET
			     : is(value, valuelen, "POST") ? M_POST
			     : is(value, valuelen, "HEAD") ? M_HEAD
							   : M_OTHER;
	} else if (is(name, namelen, ":path")) {
		if (valuelen > sizeof(st->buf)) {
			st->path_long = true;
		} else {
			memcpy(st->buf, value, valuelen);
			st->path_len = (uint16_t)valuelen;
		}
	} else if (is(name, namelen, "content-type")) {
		if (valuelen > sizeof(st->ctype)) {
			st->ctype_long = true;
		} else {
			memcpy(st->ctype, value, valuelen);
			st->ctype_len = (uint8_t)valuelen;
		}
	} else if (is(name, namelen, "content-length")) {
		/* nghttp2 has checked it is a number and will check it against the DATA */
		uint64_t v = 0;
		for (size_t i = 0; i < valuelen && v <= UINT32_MAX; i++) {
			v = v * 10 + (uint64_t)(value[i] - '0');
		}
		st->clen = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		st->has_clen = true;
	}
	return 0;
}

static void ready_push(struct nx_h2 *h, struct stream *st)
{
	st->state = ST_READY;
	st->queued = true;
	st->ready = NULL;
	if (h->ready_tail) {
		h->ready_tail->ready = st;
	} else {
		h->ready_head = st;
	}
	h->ready_tail = st;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct nx_h2 *h = ud;
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) {
		return 0;
	}
	struct stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!st || st->state != ST_RECV) {
		return 0;
	}
	int rc = 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
		/* verdicts that need no body: answer now rather than buffer what we refuse */
		if (st->path_long) {
			rc = answer_error(h, st, 414);
		} else if (st->method == M_POST && st->has_clen && st->clen > h->max_body) {
			rc = answer_error(h, st, 413);
		}
	}
	if (rc == 0 && st->state == ST_RECV && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
		ready_push(h, st);
	}
	return rc ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int body_append(struct nx_h2 *h, struct stream *st, const uint8_t *data, size_t len)
{
	size_t need = (size_t)st->body_len + len;
	size_t inline_room = sizeof(st->buf) - st->path_len;
	if (!st->big && need <= inline_room) {
		memcpy(st->buf + st->path_len + st->body_len, data, len);
	} else {
		if (need > st->big_cap) {
			/* content-length (checked <= max_body) sizes it once; else grow by doubling
			 */
			size_t cap = st->has_clen && st->clen >= need
					 ? st->clen
					 : NX_MAX(need, 2 * st->big_cap);
			cap = NX_MIN(NX_MAX(cap, need), h->max_body);
			uint8_t *b =
			    nx_mem_realloc(NX_OWNER_doh_sessions, st->big, st->big_cap, cap);
			if (!b) {
				return -ENOMEM;
			}
			if (!st->big) {
				memcpy(b, st->buf + st->path_len, st->body_len);
			}
			st->big = b;
			st->big_cap = (uint32_t)cap;
		}
		memcpy(st->big + st->body_len, data, len);
	}
	st->body_len = (uint32_t)need;
	h->body_bytes += len;
	return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
			 size_t len, void *ud)
{
	struct nx_h2 *h = ud;
	struct stream *st = nghttp2_session_get_stream_user_data(s, id);
	if (!st || st->state != ST_RECV || st->method != M_POST) {
		return 0; /* nghttp2 still returns the flow-control credit */
	}
	if ((size_t)st->body_len + len > h->max_body) {
		return answer_error(h, st, 413) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
	}
	if (h->body_bytes + len > NX_H2_CONN_BODY_MAX || body_append(h, st, data, len) < 0) {
		nx_stat_inc(NX_STAT_DOH_BODY_BUDGET);
		body_drop(h, st);
		st->state = ST_DONE;
		return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM)
			   ? NGHTTP2_ERR_CALLBACK_FAILURE
			   : 0;
	}
	return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
	struct nx_h2 *h = ud;
	struct stream *st = nghttp2_session_get_stream_user_data(s, id);
	if (st) {
		nghttp2_session_set_stream_user_data(s, id, NULL);
		slot_release(h, st);
	}
	return 0;
}

static int on_invalid_frame(nghttp2_session *s, const nghttp2_frame *f, int lib_error, void *ud)
{
	if (f->hd.type == NGHTTP2_HEADERS && lib_error == NGHTTP2_ERR_REFUSED_STREAM) {
		nx_stat_inc(NX_STAT_DOH_STREAM_CAP); /* beyond SETTINGS not yet acknowledged */
	}
	return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct nx_h2 *h = ud;
	if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR &&
	    !h->proto_error) {
		h->proto_error = true;
		nx_stat_inc(NX_STAT_DOH_PROTOCOL);
	}
	return 0;
}

/* ---- dispatch: completed requests, outside nghttp2 ---- */

static void dispatch(struct nx_h2 *h)
{
	while (h->ready_head && !h->dead) {
		struct stream *st = h->ready_head;
		h->ready_head = st->ready;
		if (!h->ready_head) {
			h->ready_tail = NULL;
		}
		st->queued = false;
		st->ready = NULL;
		int32_t id = st->id;
		static const char *const names[] = {"", "GET", "POST", "OTHER", "HEAD"};
		uint8_t *body = st->big ? st->big : st->buf + st->path_len;
		struct nx_doh_req req = {
		    .method = names[st->method],
		    .method_len = strlen(names[st->method]),
		    .path = (const char *)st->buf,
		    .path_len = st->path_len,
		    .content_type = st->ctype_long ? "?" : st->ctype,
		    .content_type_len = st->ctype_long ? 1 : st->ctype_len,
		    .body = body,
		    .body_len = st->body_len,
		};
		uint8_t get_msg[NX_H2_PATH_MAX]; /* a GET query decodes to 3/4 of its path */
		uint8_t *msg = st->method == M_GET ? get_msg : body;
		size_t cap = st->method == M_GET ? sizeof(get_msg) : st->body_len;
		size_t n;
		char cid[NX_DOH_CLIENT_ID_MAX + 1];
		int status = nx_doh_request(&req, msg, cap, &n, cid);
		if (status != 200) {
			if (answer_error(h, st, status) < 0) {
				nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, id,
							  NGHTTP2_INTERNAL_ERROR);
			}
			continue;
		}
		st->state = ST_AWAIT;
		h->io->query(h->ud, id, msg, n, cid);
		/* the query may have been answered and its stream closed meanwhile */
		st = stream_get(h, id);
		if (st) {
			body_drop(h, st);
		}
	}
}

/* ---- public ---- */

int nx_h2_server_new(const struct nx_h2_limits *lim, const struct nx_h2_io *io, void *ud,
		     struct nx_h2 **out)
{
	*out = NULL;
	struct nx_h2_limits l = {.max_streams = NX_H2_MAX_STREAMS_DEFAULT,
				 .max_body = NX_DOH_MSG_MAX};
	if (lim) {
		l = *lim;
	}
	if (l.max_streams < 1 || l.max_streams > NX_H2_MAX_STREAMS_LIMIT ||
	    l.max_body < NX_DNS_HDR_LEN || l.max_body > NX_DOH_MSG_MAX || !io || !io->send ||
	    !io->query) {
		return -EINVAL;
	}
	struct nx_h2 *h = nx_mem_calloc(NX_OWNER_doh_sessions, 1, sizeof(*h));
	if (!h) {
		return -ENOMEM;
	}
	h->io = io;
	h->ud = ud;
	h->max_streams = h->max_streams_init = l.max_streams;
	h->max_body = l.max_body;
	nx_h2_mem_init(&h->mem, NX_OWNER_doh_sessions, NX_H2_MEM_MAP_MIN);

	int rc = -ENOMEM;
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	if (nghttp2_session_callbacks_new(&cb) || nghttp2_option_new(&opt)) {
		goto fail;
	}
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	/* closed streams kept for RFC 7540 priorities cost memory and buy a DNS server nothing */
	nghttp2_option_set_no_closed_streams(opt, 1);
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, H2_HPACK_ENCODE_TABLE);
	if (nghttp2_session_server_new3(&h->s, cb, h, opt, &h->mem.mem)) {
		goto fail;
	}
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l.max_streams},
	    {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, H2_HPACK_DECODE_TABLE},
	    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
	    {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
	};
	if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, NX_ARRAY_LEN(iv))) {
		goto fail;
	}
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	*out = h;
	return 0;
fail:
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	nx_h2_free(h);
	return rc;
}

/* Does what the peer sent instead of the preface look like an HTTP/1.x request line? */
static bool looks_http1(size_t matched, const uint8_t *rest, size_t n)
{
	uint8_t line[16];
	size_t k = 0;
	for (; k < matched && k < sizeof(line); k++) {
		line[k] = (uint8_t)client_preface[k];
	}
	for (size_t i = 0; i < n && k < sizeof(line); i++) {
		line[k++] = rest[i];
	}
	size_t i = 0;
	while (i < k && line[i] >= 'A' && line[i] <= 'Z') {
		i++;
	}
	/* a method token of capitals, then a space (or the bytes ran out while still capitals) */
	return i > 0 && (i == k || line[i] == ' ');
}

static int check_preface(struct nx_h2 *h, const uint8_t *data, size_t len)
{
	for (size_t i = 0; i < len && h->preface < H2_PREFACE_LEN; i++, h->preface++) {
		if (data[i] == (uint8_t)client_preface[h->preface]) {
			continue;
		}
		if (looks_http1(h->preface, data + i, len - i)) {
			nx_stat_inc(NX_STAT_DOH_HTTP1);
			int rc = h->io->send(h->ud, (const uint8_t *)http1_reply,
					     sizeof(http1_reply) - 1);
			return fail(h, rc < 0 ? rc : NX_EFORMAT);
		}
		nx_stat_inc(NX_STAT_DOH_BAD_PREFACE);
		return fail(h, NX_EMALFORMED);
	}
	return 0;
}

int nx_h2_feed(struct nx_h2 *h, const uint8_t *data, size_t len)
{
	if (h->dead) {
		return h->dead;
	}
	int rc = check_preface(h, data, len);
	if (rc < 0) {
		return rc;
	}
	ssize_t n = nghttp2_session_mem_recv(h->s, data, len);
	if (n < 0) {
		nx_stat_inc(NX_STAT_DOH_PROTOCOL);
		return fail(h, n == NGHTTP2_ERR_NOMEM ? -ENOMEM : NX_EMALFORMED);
	}
	dispatch(h);
	rc = flush(h);
	if (rc < 0) {
		return rc;
	}
	if (nx_h2_want_close(h)) {
		return fail(h, h->proto_error ? NX_EMALFORMED : NX_ECANCELED);
	}
	return 0;
}

int nx_h2_respond(struct nx_h2 *h, int32_t stream, const uint8_t *msg, size_t len)
{
	if (h->dead) {
		return h->dead;
	}
	if (len == 0 || len > NX_DOH_MSG_MAX) {
		return -EINVAL;
	}
	struct stream *st = stream_get(h, stream);
	if (!st || st->state != ST_AWAIT) {
		nx_stat_inc(NX_STAT_DOH_STREAM_GONE);
		return NX_ENOTFOUND;
	}
	char clen[16], cc[32];
	snprintf(clen, sizeof(clen), "%zu", len);
	snprintf(cc, sizeof(cc), "max-age=%u", (unsigned)nx_doh_min_ttl(msg, len));
	nghttp2_nv nv[] = {
	    NV(":status", "200"),
	    NV("content-type", "application/dns-message"),
	    NV("content-length", clen),
	    NV("cache-control", cc),
	};
	st->state = ST_SEND;
	st->out = msg;
	st->out_len = (uint32_t)len;
	st->out_off = 0;
	nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_out};
	if (nghttp2_submit_response(h->s, stream, nv, NX_ARRAY_LEN(nv), &prd)) {
		st->out = NULL;
		return fail(h, -ENOMEM); /* only NOMEM is possible for a valid open stream */
	}
	int rc = flush(h);
	st = stream_get(h, stream); /* gone if the whole answer went out */
	if (!st || st->out != msg) {
		return rc;
	}
	size_t rest = st->out_len - st->out_off;
	if (rc < 0 || rest == 0) {
		st->out = NULL; /* nothing may read the caller's buffer after we return */
		return rc;
	}
	uint8_t *copy = NULL;
	if (h->out_bytes + rest <= NX_H2_OUT_QUEUE_MAX) {
		copy = nx_mem_alloc(NX_OWNER_doh_sessions, rest);
	}
	if (!copy) {
		nx_stat_inc(NX_STAT_DOH_OUT_FULL);
		st->out = NULL;
		nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, stream, NGHTTP2_INTERNAL_ERROR);
		rc = flush(h);
		return rc < 0 ? rc : NX_ELIMIT;
	}
	memcpy(copy, msg + st->out_off, rest);
	st->out = copy;
	st->out_len = (uint32_t)rest;
	st->out_off = 0;
	st->out_copy = copy;
	st->copy_len = (uint32_t)rest;
	h->out_bytes += rest;
	return 0;
}

int nx_h2_reset(struct nx_h2 *h, int32_t stream, uint32_t h2_error)
{
	if (h->dead) {
		return h->dead;
	}
	struct stream *st = stream_get(h, stream);
	if (!st || st->state != ST_AWAIT) {
		nx_stat_inc(NX_STAT_DOH_STREAM_GONE);
		return NX_ENOTFOUND;
	}
	st->state = ST_DONE;
	if (nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, stream, h2_error)) {
		return fail(h, -ENOMEM);
	}
	return flush(h);
}

int nx_h2_error(struct nx_h2 *h, int32_t stream, int http_status)
{
	if (h->dead) {
		return h->dead;
	}
	if (http_status < 400 || http_status > 599) {
		return -EINVAL;
	}
	struct stream *st = stream_get(h, stream);
	if (!st || st->state != ST_AWAIT) {
		nx_stat_inc(NX_STAT_DOH_STREAM_GONE);
		return NX_ENOTFOUND;
	}
	if (answer_error(h, st, http_status) < 0) {
		return fail(h, -ENOMEM);
	}
	return flush(h);
}

void nx_h2_set_max_streams(struct nx_h2 *h, unsigned n)
{
	n = NX_MIN(n, h->max_streams_init);
	if (h->dead || n == h->max_streams) {
		return;
	}
	h->max_streams = n;
	nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, n};
	if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, &iv, 1)) {
		fail(h, -ENOMEM);
		return;
	}
	flush(h);
}

unsigned nx_h2_streams_open(const struct nx_h2 *h)
{
	return h->open;
}

bool nx_h2_want_close(const struct nx_h2 *h)
{
	return h->dead || (!nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s));
}

void nx_h2_goaway(struct nx_h2 *h)
{
	if (h->dead) {
		return;
	}
	if (nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE,
				  nghttp2_session_get_last_proc_stream_id(h->s), NGHTTP2_NO_ERROR,
				  NULL, 0)) {
		fail(h, -ENOMEM);
		return;
	}
	flush(h);
}

void nx_h2_free(struct nx_h2 *h)
{
	if (!h) {
		return;
	}
	/* nghttp2_session_del calls no callbacks: our slots are released here */
	while (h->used) {
		struct stream *st = h->used;
		if (h->s) {
			nghttp2_session_set_stream_user_data(h->s, st->id, NULL);
		}
		slot_release(h, st);
	}
	spare_release(h);
	nghttp2_session_del(h->s);
	nx_mem_free(NX_OWNER_doh_sessions, h, sizeof(*h));
}

/* ---- idle cost ---- */

static int idle_send(void *ud, const uint8_t *data, size_t len)
{
	return 0;
}

static void idle_query(void *ud, int32_t stream, const uint8_t *msg, size_t len, const char *cid)
{
}

size_t nx_h2_idle_bytes(void)
{
	static _Atomic size_t measured;
	size_t v = atomic_load_explicit(&measured, memory_order_relaxed);
	if (v) {
		return v;
	}
	static const struct nx_h2_io io = {.send = idle_send, .query = idle_query};
	struct nx_h2 *h;
	if (nx_h2_server_new(NULL, &io, NULL, &h) < 0) {
		return 0;
	}
	/* client preface, an empty SETTINGS, and the ACK of ours */
	uint8_t in[H2_PREFACE_LEN + 18] = {0};
	memcpy(in, client_preface, H2_PREFACE_LEN);
	static const uint8_t frames[18] = {0,
					   0,
					   0,
					   NGHTTP2_SETTINGS,
					   0,
					   0,
					   0,
					   0,
					   0,
					   0,
					   0,
					   0,
					   NGHTTP2_SETTINGS,
					   NGHTTP2_FLAG_ACK,
					   0,
					   0,
					   0,
					   0};
	memcpy(in + H2_PREFACE_LEN, frames, sizeof(frames));
	if (nx_h2_feed(h, in, sizeof(in)) == 0) {
		v = sizeof(*h) + h->mem.bytes;
		atomic_store_explicit(&measured, v, memory_order_relaxed);
	}
	nx_h2_free(h);
	return v;
}

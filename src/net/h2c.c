#include "net/h2c.h"
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

#define OWNER NX_OWNER_doh_upstream
/*
 * HPACK dynamic tables. Our encoder repeats the same six request headers on every query: a
 * small table (about four entries) turns :authority, :path, accept and content-type into
 * one-byte indices after the first request. The decoder's bound is what we advertise in
 * SETTINGS_HEADER_TABLE_SIZE: responses repeat content-type and a few server headers; 1 KiB
 * keeps those without letting the server make us hold its 4 KiB default.
 */
#define H2C_HPACK_ENCODE_TABLE 512
#define H2C_HPACK_DECODE_TABLE 1024
#define CT_DNS "application/dns-message"

static_assert(NX_H2C_INLINE == NX_DNS_EDNS_OUR_SIZE, "the inline room is our EDNS size");

enum phase {
	P_HEAD,	    /* waiting for the final response header block */
	P_BODY,	    /* 200 dns-message: collecting the body */
	P_ANSWERED, /* outcome decided (queued, delivered) or cancelled */
};

enum qstate {
	Q_NONE,	      /* not owed an answer call (not yet answered, delivered, or cancelled) */
	Q_LISTED,     /* on h->done_head's queue */
	Q_DELIVERING, /* io->answer running for it: the slot must outlive the call */
};

/* One request. Fixed size, from the connection's free list. */
struct req {
	struct req *next;   /* in h->used or h->spare */
	struct req *prev;   /* in h->used */
	struct req *done;   /* next on h->done_head's queue */
	uint64_t tag;	    /* the caller's id */
	int32_t id;	    /* HTTP/2 stream id */
	int rc;		    /* the answer's code once P_ANSWERED */
	uint16_t status;    /* final :status, 0 until seen */
	uint8_t phase;	    /* enum phase */
	uint8_t q;	    /* enum qstate */
	bool closed;	    /* nghttp2 no longer knows the stream (or never opened it) */
	bool cancelled;	    /* nx_h2c_cancel: no answer call */
	bool ctype_ok;	    /* content-type is application/dns-message */
	bool has_clen;	    /* content-length seen */
	uint32_t clen;	    /* content-length value (saturated) */
	uint32_t body_len;  /* response body bytes kept */
	uint32_t big_cap;   /* bytes allocated at big (charged to h->body_bytes) */
	uint8_t *big;	    /* owned: the body when it does not fit buf */
	const uint8_t *out; /* request body: the caller's msg during nx_h2c_submit, then
			       out_copy; NULL once fully read (or a failed copy: reset) */
	uint32_t out_len;   /* bytes at out */
	uint32_t out_off;   /* bytes of out already given to nghttp2 */
	uint8_t *out_copy;  /* owned: the request tail nghttp2 could not take, copy_len bytes */
	uint32_t copy_len;  /* bytes at out_copy */
	uint8_t buf[NX_H2C_INLINE]; /* the response body while it fits */
};
static_assert(sizeof(struct req) <= 1344, "a request slot is part of the upstream budget");

struct nx_h2c {
	nghttp2_session *s;	    /* owned */
	struct nx_h2_mem mem;  /* nghttp2's allocator and the bytes it holds (net/h2mem.h) */
	const struct nx_h2c_io *io; /* borrowed for the session's life */
	void *ud;		    /* borrowed: io's user data */
	struct req *used;	    /* owned: slots of requests in flight (doubly linked) */
	struct req *spare;	    /* owned: free slots, released when nothing is in flight */
	struct req *done_head;	    /* borrowed from used: answers to deliver, FIFO */
	struct req *done_tail;
	struct req *submitting; /* borrowed: the request inside nx_h2c_submit, if any */
	unsigned open;		/* slots in used */
	unsigned max_streams;	/* our cap */
	size_t max_body;	/* per-response body limit */
	size_t body_bytes;	/* heap body bytes held by this connection's slots */
	size_t size;		/* bytes of this struct with its strings */
	int dead;		/* 0, or the error that ended the session */
	bool draining;		/* inside drain(): nested calls leave the queue to it */
	bool goaway_sent;
	bool goaway_recv;
	bool proto_error;      /* we sent a GOAWAY with an error code */
	const char *authority; /* in names[] */
	const char *path;      /* in names[] */
	size_t authority_len;
	size_t path_len;
	char names[]; /* authority NUL path NUL */
};

/* ---- slots ---- */

static struct req *slot_take(struct nx_h2c *h, uint64_t tag)
{
	struct req *r = h->spare;
	if (r) {
		h->spare = r->next;
	} else {
		r = nx_mem_alloc(OWNER, sizeof(*r));
		if (!r) {
			return NULL;
		}
	}
	/* everything before the inline buffer: it is written before it is read */
	memset(r, 0, offsetof(struct req, buf));
	r->tag = tag;
	r->next = h->used;
	if (h->used) {
		h->used->prev = r;
	}
	h->used = r;
	h->open++;
	return r;
}

static void body_drop(struct nx_h2c *h, struct req *r)
{
	h->body_bytes -= r->big_cap;
	nx_mem_free(OWNER, r->big, r->big_cap);
	r->big = NULL;
	r->big_cap = 0;
	r->body_len = 0;
}

static void out_drop(struct req *r)
{
	nx_mem_free(OWNER, r->out_copy, r->copy_len);
	r->out_copy = NULL;
	r->copy_len = 0;
	r->out = NULL;
}

static void spare_release(struct nx_h2c *h)
{
	while (h->spare) {
		struct req *n = h->spare->next;
		nx_mem_free(OWNER, h->spare, sizeof(*h->spare));
		h->spare = n;
	}
}

static void done_unlink(struct nx_h2c *h, struct req *r)
{
	struct req **pp = &h->done_head, *prev = NULL;
	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->done;
	}
	if (*pp) {
		*pp = r->done;
		if (h->done_tail == r) {
			h->done_tail = prev;
		}
	}
	r->done = NULL;
	r->q = Q_NONE;
}

static void slot_release(struct nx_h2c *h, struct req *r)
{
	if (r->q == Q_LISTED) {
		done_unlink(h, r);
	}
	body_drop(h, r);
	out_drop(r);
	if (r->prev) {
		r->prev->next = r->next;
	} else {
		h->used = r->next;
	}
	if (r->next) {
		r->next->prev = r->prev;
	}
	h->open--;
	r->next = h->spare;
	h->spare = r;
	if (h->open == 0) {
		spare_release(h); /* an idle connection holds no slots */
	}
}

/* The slot of stream `id` when nghttp2 no longer has it attached (a request never opened). */
static struct req *slot_by_id(struct nx_h2c *h, int32_t id)
{
	for (struct req *r = h->used; r; r = r->next) {
		if (r->id == id) {
			return r;
		}
	}
	return NULL;
}

/* ---- answers ---- */

static enum nx_stat error_stat(int rc)
{
	switch (rc) {
	case -EPROTO:
		return NX_STAT_DOHC_HTTP_STATUS;
	case NX_EFORMAT:
		return NX_STAT_DOHC_CONTENT_TYPE;
	case -EMSGSIZE:
		return NX_STAT_DOHC_TOO_LARGE;
	case -ENOBUFS:
		return NX_STAT_DOHC_BODY_BUDGET;
	case NX_EMALFORMED:
		return NX_STAT_DOHC_SHORT_BODY;
	case -EAGAIN:
		return NX_STAT_DOHC_REFUSED;
	default:
		return NX_STAT_DOHC_RESET;
	}
}

/* Decide r's outcome (counted under `st` when an error); the answer call happens in drain(),
 * outside nghttp2. */
static void answer_as(struct nx_h2c *h, struct req *r, int rc, enum nx_stat st)
{
	if (r->phase == P_ANSWERED) {
		return;
	}
	r->phase = P_ANSWERED;
	r->rc = rc;
	if (rc < 0) {
		nx_stat_inc(st);
		body_drop(h, r);
	}
	r->q = Q_LISTED;
	r->done = NULL;
	if (h->done_tail) {
		h->done_tail->done = r;
	} else {
		h->done_head = r;
	}
	h->done_tail = r;
}

static void answer_later(struct nx_h2c *h, struct req *r, int rc)
{
	answer_as(h, r, rc, error_stat(rc));
}

/* Deliver the decided answers. Callbacks may submit, cancel or fail_all: each re-enters here
 * only through this loop (nested calls return at once and leave the queue to it). */
static void drain(struct nx_h2c *h)
{
	if (h->draining) {
		return;
	}
	h->draining = true;
	while (h->done_head) {
		struct req *r = h->done_head;
		h->done_head = r->done;
		if (!h->done_head) {
			h->done_tail = NULL;
		}
		r->done = NULL;
		r->q = Q_DELIVERING;
		const uint8_t *body = NULL;
		size_t len = 0;
		if (r->rc == 0) {
			body = r->big ? r->big : r->buf;
			len = r->body_len;
		}
		h->io->answer(h->ud, r->tag, r->rc, r->status, body, len);
		r->q = Q_NONE;
		body_drop(h, r);
		if (r->closed) {
			slot_release(h, r);
		}
	}
	h->draining = false;
}

static int fail(struct nx_h2c *h, int err)
{
	if (!h->dead) {
		h->dead = err;
	}
	return h->dead;
}

/* Hand everything nghttp2 wants to send to the transport. */
static int flush(struct nx_h2c *h)
{
	if (h->dead) {
		return h->dead;
	}
	for (;;) {
		const uint8_t *data;
		ssize_t n = nghttp2_session_mem_send(h->s, &data);
		if (n < 0) {
			return fail(h, n == NGHTTP2_ERR_NOMEM ? -ENOMEM : NX_EMALFORMED);
		}
		if (n == 0) {
			return 0;
		}
		int rc = h->io->send(h->ud, data, (size_t)n);
		if (rc < 0) {
			return fail(h, rc);
		}
	}
}

/* RST_STREAM CANCEL for a response we do not want the rest of (RFC 9113 8.1: "no longer
 * needed"). Inside nghttp2 callbacks only queues the frame; flush sends it. */
static int reset(struct nx_h2c *h, struct req *r)
{
	return nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, r->id, NGHTTP2_CANCEL) ? -ENOMEM
											 : 0;
}

/* ---- request body ---- */

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
			 uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct req *r = src->ptr;
	if (!r->out) {
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* copy failed: reset the stream */
	}
	size_t n = NX_MIN(length, (size_t)(r->out_len - r->out_off));
	memcpy(buf, r->out + r->out_off, n);
	r->out_off += (uint32_t)n;
	if (r->out_off == r->out_len) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

/* ---- nghttp2 callbacks (response side) ---- */

static bool is(const uint8_t *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && memcmp(s, lit, n) == 0;
}

/* application/dns-message, any case, optionally followed by parameters (RFC 9110 8.3.1). */
static bool ctype_is_dns(const uint8_t *v, size_t len)
{
	size_t n = sizeof(CT_DNS) - 1;
	if (len < n) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t c = v[i] >= 'A' && v[i] <= 'Z' ? (uint8_t)(v[i] + 32) : v[i];
		if (c != (uint8_t)CT_DNS[i]) {
			return false;
		}
	}
	size_t i = n;
	while (i < len && (v[i] == ' ' || v[i] == '\t')) {
		i++;
	}
	return i == len || v[i] == ';';
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	if (f->hd.type != NGHTTP2_HEADERS) {
		return 0;
	}
	struct req *r = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!r || r->phase != P_HEAD) {
		return 0; /* trailers, or an answer already decided */
	}
	if (is(name, namelen, ":status")) {
		/* nghttp2 has checked it is three digits */
		unsigned v = 0;
		for (size_t i = 0; i < valuelen; i++) {
			v = v * 10 + (unsigned)(value[i] - '0');
		}
		r->status = (uint16_t)v;
	} else if (is(name, namelen, "content-type")) {
		r->ctype_ok = ctype_is_dns(value, valuelen);
	} else if (is(name, namelen, "content-length")) {
		/* nghttp2 has checked it is a number and will check it against the DATA */
		uint64_t v = 0;
		for (size_t i = 0; i < valuelen && v <= UINT32_MAX; i++) {
			v = v * 10 + (uint64_t)(value[i] - '0');
		}
		r->clen = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		r->has_clen = true;
	}
	return 0;
}

/* A heap body buffer of at least `need` bytes within the connection's budget. */
static int body_grow(struct nx_h2c *h, struct req *r, size_t need)
{
	/* content-length (checked <= max_body) sizes it once; without it, grow by doubling */
	size_t cap =
	    r->has_clen && r->clen >= need ? r->clen : NX_MAX(need, 2 * (size_t)r->big_cap);
	cap = NX_MIN(NX_MAX(cap, need), h->max_body);
	if (h->body_bytes - r->big_cap + cap > NX_H2C_CONN_BODY_MAX) {
		return -ENOBUFS;
	}
	uint8_t *b = nx_mem_realloc(OWNER, r->big, r->big_cap, cap);
	if (!b) {
		return -ENOBUFS; /* as a full budget: this answer is lost, the session goes on */
	}
	if (!r->big) {
		memcpy(b, r->buf, r->body_len);
	}
	h->body_bytes = h->body_bytes - r->big_cap + cap;
	r->big = b;
	r->big_cap = (uint32_t)cap;
	return 0;
}

/* The final header block is in: what it says about the answer (0: read the body). */
static int head_verdict(struct nx_h2c *h, struct req *r)
{
	if (r->status != 200) {
		return -EPROTO;
	}
	if (!r->ctype_ok) {
		return NX_EFORMAT;
	}
	if (r->has_clen && r->clen > h->max_body) {
		return -EMSGSIZE;
	}
	if (r->has_clen && r->clen > sizeof(r->buf)) {
		return body_grow(h, r, r->clen); /* the whole body, allocated once */
	}
	return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct nx_h2c *h = ud;
	if (f->hd.type == NGHTTP2_GOAWAY) {
		/* nghttp2 closes our streams above last_stream_id with REFUSED_STREAM itself */
		h->goaway_recv = true;
		return 0;
	}
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) {
		return 0;
	}
	struct req *r = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
	if (!r || r->phase == P_ANSWERED) {
		return 0;
	}
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
	if (f->hd.type == NGHTTP2_HEADERS && r->phase == P_HEAD) {
		if (r->status >= 100 && r->status < 200) {
			/* an interim response (RFC 9110 15.2): the final one follows */
			r->status = 0;
			r->ctype_ok = false;
			r->has_clen = false;
			return 0;
		}
		int v = head_verdict(h, r);
		if (v < 0) {
			answer_later(h, r, v);
			/* the rest of the stream is of no use: stop it (unless it has ended) */
			return end || reset(h, r) == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
		}
		r->phase = P_BODY;
	}
	if (end && r->phase == P_BODY) {
		answer_later(h, r, r->body_len < NX_DNS_HDR_LEN ? NX_EMALFORMED : 0);
	}
	return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
			 size_t len, void *ud)
{
	struct nx_h2c *h = ud;
	struct req *r = nghttp2_session_get_stream_user_data(s, id);
	if (!r || r->phase != P_BODY) {
		return 0; /* nghttp2 still returns the flow-control credit */
	}
	size_t need = (size_t)r->body_len + len;
	int rc = 0;
	if (need > h->max_body) {
		rc = -EMSGSIZE;
	} else if (!r->big && need <= sizeof(r->buf)) {
		memcpy(r->buf + r->body_len, data, len);
	} else if (need <= r->big_cap || (rc = body_grow(h, r, need)) == 0) {
		memcpy(r->big + r->body_len, data, len);
	}
	if (rc < 0) {
		answer_later(h, r, rc);
		return reset(h, r) == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	r->body_len = (uint32_t)need;
	return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *ud)
{
	struct nx_h2c *h = ud;
	struct req *r = nghttp2_session_get_stream_user_data(s, id);
	if (!r) {
		return 0;
	}
	nghttp2_session_set_stream_user_data(s, id, NULL);
	r->closed = true;
	/* RFC 9113 8.7: REFUSED_STREAM (also nghttp2's code for streams above a GOAWAY's last
	 * stream id) guarantees the server did not process the request */
	answer_later(h, r, error_code == NGHTTP2_REFUSED_STREAM ? -EAGAIN : -ECONNRESET);
	if (r->q == Q_NONE) {
		slot_release(h, r);
	}
	return 0;
}

static int on_frame_not_send(nghttp2_session *s, const nghttp2_frame *f, int lib_error, void *ud)
{
	struct nx_h2c *h = ud;
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) {
		return 0;
	}
	if (nghttp2_session_get_stream_user_data(s, f->hd.stream_id)) {
		return 0; /* the stream was opened: nghttp2 closes it (on_stream_close) */
	}
	/* never opened (GOAWAY received, ids exhausted, or cancelled while queued): no close
	 * callback will come for it */
	struct req *r = slot_by_id(h, f->hd.stream_id);
	if (!r) {
		return 0;
	}
	r->closed = true;
	if (r == h->submitting) {
		r->phase = P_ANSWERED; /* nx_h2c_submit fails instead: no answer call */
		r->rc = -ESHUTDOWN;
		return 0;
	}
	answer_later(h, r, -EAGAIN);
	if (r->q == Q_NONE) {
		slot_release(h, r);
	}
	return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct nx_h2c *h = ud;
	if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR &&
	    !h->proto_error) {
		h->proto_error = true;
		nx_stat_inc(NX_STAT_DOHC_PROTOCOL);
	}
	return 0;
}

/* ---- public ---- */

static bool printable(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] <= ' ' || s[i] >= 0x7f) {
			return false;
		}
	}
	return true;
}

int nx_h2c_new(const char *authority, const char *path, const struct nx_h2c_limits *lim,
	       const struct nx_h2c_io *io, void *ud, struct nx_h2c **out)
{
	*out = NULL;
	struct nx_h2c_limits l = {.max_streams = NX_H2C_STREAMS_DEFAULT,
				  .max_body = NX_DOH_MSG_MAX};
	if (lim) {
		l = *lim;
	}
	if (!authority || !path || !io || !io->send || !io->answer) {
		return -EINVAL;
	}
	size_t alen = strlen(authority), plen = strlen(path);
	if (alen == 0 || alen > NX_H2C_AUTHORITY_MAX || !printable(authority, alen) || plen == 0 ||
	    plen > NX_H2C_PATH_MAX || path[0] != '/' || !printable(path, plen) ||
	    l.max_streams < 1 || l.max_streams > NX_H2C_STREAMS_LIMIT ||
	    l.max_body < NX_DNS_HDR_LEN || l.max_body > NX_DOH_MSG_MAX) {
		return -EINVAL;
	}
	size_t size = sizeof(struct nx_h2c) + alen + 1 + plen + 1;
	struct nx_h2c *h = nx_mem_calloc(OWNER, 1, size);
	if (!h) {
		return -ENOMEM;
	}
	h->size = size;
	memcpy(h->names, authority, alen + 1);
	memcpy(h->names + alen + 1, path, plen + 1);
	h->authority = h->names;
	h->authority_len = alen;
	h->path = h->names + alen + 1;
	h->path_len = plen;
	h->io = io;
	h->ud = ud;
	h->max_streams = l.max_streams;
	h->max_body = l.max_body;
	nx_h2_mem_init(&h->mem, OWNER, 0);

	int rc = -ENOMEM;
	nghttp2_session_callbacks *cb = NULL;
	nghttp2_option *opt = NULL;
	if (nghttp2_session_callbacks_new(&cb) || nghttp2_option_new(&opt)) {
		goto fail;
	}
	nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_frame_not_send);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	/* closed streams kept for RFC 7540 priorities cost memory and buy DNS nothing */
	nghttp2_option_set_no_closed_streams(opt, 1);
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, H2C_HPACK_ENCODE_TABLE);
	if (nghttp2_session_client_new3(&h->s, cb, h, opt, &h->mem.mem)) {
		goto fail;
	}
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
	    {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, H2C_HPACK_DECODE_TABLE},
	    {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
	};
	if (nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, NX_ARRAY_LEN(iv))) {
		goto fail;
	}
	rc = flush(h); /* the preface and our SETTINGS, at once */
	if (rc < 0) {
		goto fail;
	}
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	*out = h;
	return 0;
fail:
	nghttp2_session_callbacks_del(cb);
	nghttp2_option_del(opt);
	nx_h2c_free(h);
	return rc;
}

static bool going_away(const struct nx_h2c *h)
{
	return h->goaway_sent || h->goaway_recv ||
	       nghttp2_session_get_next_stream_id(h->s) > (uint32_t)INT32_MAX;
}

static bool has_room(const struct nx_h2c *h)
{
	uint32_t peer =
	    nghttp2_session_get_remote_settings(h->s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
	return h->open < h->max_streams && h->open < peer;
}

#define NV(n, v, vlen, fl)                                                                         \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen),                             \
		    NGHTTP2_NV_FLAG_NO_COPY_NAME | (fl)                                            \
	}

int nx_h2c_submit(struct nx_h2c *h, uint64_t tag, const uint8_t *msg, size_t len)
{
	if (h->dead) {
		return h->dead;
	}
	if (len < NX_DNS_HDR_LEN || len > NX_DOH_MSG_MAX) {
		return -EINVAL;
	}
	if (going_away(h)) {
		return -ESHUTDOWN;
	}
	if (!has_room(h)) {
		nx_stat_inc(NX_STAT_DOHC_STREAM_LIMIT);
		return NX_ELIMIT;
	}
	struct req *r = slot_take(h, tag);
	if (!r) {
		return -ENOMEM;
	}
	char clen[8];
	int clen_len = snprintf(clen, sizeof(clen), "%zu", len);
	/* the session's strings and the literals outlive the frame; the length is copied */
	const uint8_t nc = NGHTTP2_NV_FLAG_NO_COPY_VALUE;
	nghttp2_nv nv[] = {
	    NV(":method", "POST", 4, nc),
	    NV(":scheme", "https", 5, nc),
	    NV(":authority", h->authority, h->authority_len, nc),
	    NV(":path", h->path, h->path_len, nc),
	    NV("accept", CT_DNS, sizeof(CT_DNS) - 1, nc),
	    NV("content-type", CT_DNS, sizeof(CT_DNS) - 1, nc),
	    NV("content-length", clen, (size_t)clen_len, 0),
	};
	r->out = msg;
	r->out_len = (uint32_t)len;
	nghttp2_data_provider prd = {.source.ptr = r, .read_callback = read_body};
	int32_t id = nghttp2_submit_request(h->s, NULL, nv, NX_ARRAY_LEN(nv), &prd, r);
	if (id < 0) {
		slot_release(h, r);
		return id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -ESHUTDOWN;
	}
	r->id = id;
	h->submitting = r;
	int rc = flush(h);
	h->submitting = NULL;
	if (rc < 0 || r->phase == P_ANSWERED) {
		/* dead, or nghttp2 would not start the stream: this request gets no answer */
		if (rc == 0) {
			rc = r->rc;
		}
		if (!r->closed) {
			nghttp2_session_set_stream_user_data(h->s, id, NULL);
		}
		slot_release(h, r);
		return rc;
	}
	size_t rest = r->out_len - r->out_off;
	if (rest == 0) {
		r->out = NULL; /* all of it went out: nothing refers to msg */
		return 0;
	}
	/* the server's window held some back: keep the tail, not the caller's buffer */
	uint8_t *copy = nx_mem_alloc(OWNER, rest);
	if (!copy) {
		r->out = NULL;
		r->phase = P_ANSWERED;
		r->cancelled = true;
		if (reset(h, r) < 0) {
			return fail(h, -ENOMEM);
		}
		rc = flush(h);
		return rc < 0 ? rc : -ENOMEM;
	}
	memcpy(copy, msg + r->out_off, rest);
	r->out = copy;
	r->out_len = (uint32_t)rest;
	r->out_off = 0;
	r->out_copy = copy;
	r->copy_len = (uint32_t)rest;
	return 0;
}

int nx_h2c_cancel(struct nx_h2c *h, uint64_t tag)
{
	if (h->dead) {
		return h->dead;
	}
	struct req *r = h->used;
	for (; r; r = r->next) {
		bool owed = r->phase != P_ANSWERED || r->q == Q_LISTED;
		if (r->tag == tag && !r->cancelled && owed) {
			break;
		}
	}
	if (!r) {
		return NX_ENOTFOUND;
	}
	if (r->q == Q_LISTED) {
		done_unlink(h, r);
	}
	r->cancelled = true;
	r->phase = P_ANSWERED;
	body_drop(h, r);
	if (r->closed) {
		slot_release(h, r);
		return 0;
	}
	if (reset(h, r) < 0) {
		return fail(h, -ENOMEM);
	}
	return flush(h); /* the stream closes as the RST_STREAM goes out */
}

int nx_h2c_feed(struct nx_h2c *h, const uint8_t *data, size_t len)
{
	if (h->dead) {
		return h->dead;
	}
	ssize_t n = nghttp2_session_mem_recv(h->s, data, len);
	if (n < 0) {
		nx_stat_inc(NX_STAT_DOHC_PROTOCOL);
		fail(h, n == NGHTTP2_ERR_NOMEM ? -ENOMEM : NX_EMALFORMED);
	}
	drain(h); /* answers completed before any error are still good */
	int rc = flush(h);
	drain(h); /* requests nghttp2 would not start while sending */
	if (rc == 0 && h->proto_error) {
		rc = fail(h, NX_EMALFORMED); /* nghttp2 sent GOAWAY: it reads nothing more */
	}
	return rc;
}

unsigned nx_h2c_in_flight(const struct nx_h2c *h)
{
	return h->open;
}

bool nx_h2c_can_submit(const struct nx_h2c *h)
{
	return !h->dead && !going_away(h) && has_room(h);
}

bool nx_h2c_want_close(const struct nx_h2c *h)
{
	return h->dead || (going_away(h) && h->open == 0) ||
	       (!nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s));
}

void nx_h2c_goaway(struct nx_h2c *h)
{
	if (h->dead || h->goaway_sent) {
		return;
	}
	h->goaway_sent = true;
	/* the last stream id names server-initiated streams we processed: none (no push) */
	if (nghttp2_submit_goaway(h->s, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0)) {
		fail(h, -ENOMEM);
		return;
	}
	flush(h);
}

void nx_h2c_fail_all(struct nx_h2c *h, int rc)
{
	if (rc >= 0) {
		rc = -ECONNABORTED;
	}
	fail(h, rc);
	/* nghttp2 is never driven again: every slot is as good as closed */
	struct req *r = h->used;
	while (r) {
		struct req *next = r->next;
		if (!r->closed) {
			r->closed = true;
			nghttp2_session_set_stream_user_data(h->s, r->id, NULL);
		}
		if (r->phase != P_ANSWERED) {
			answer_as(h, r, h->dead, NX_STAT_DOHC_CONN_LOST);
		} else if (r->q == Q_NONE) {
			slot_release(h, r); /* delivered or cancelled, waiting for a close */
		}
		r = next;
	}
	drain(h);
}

void nx_h2c_free(struct nx_h2c *h)
{
	if (!h) {
		return;
	}
	h->done_head = h->done_tail = NULL;
	/* nghttp2_session_del calls no callbacks: our slots are released here */
	while (h->used) {
		struct req *r = h->used;
		r->q = Q_NONE;
		if (h->s && !r->closed) {
			nghttp2_session_set_stream_user_data(h->s, r->id, NULL);
		}
		slot_release(h, r);
	}
	spare_release(h);
	nghttp2_session_del(h->s);
	nx_mem_free(OWNER, h, h->size);
}

/* ---- idle cost ---- */

static int idle_send(void *ud, const uint8_t *data, size_t len)
{
	return 0;
}

static void idle_answer(void *ud, uint64_t tag, int rc, int status, const uint8_t *msg, size_t len)
{
}

size_t nx_h2c_idle_bytes(void)
{
	static _Atomic size_t measured;
	size_t v = atomic_load_explicit(&measured, memory_order_relaxed);
	if (v) {
		return v;
	}
	static const struct nx_h2c_io io = {.send = idle_send, .answer = idle_answer};
	struct nx_h2c *h;
	if (nx_h2c_new("upstream.example", "/dns-query", NULL, &io, NULL, &h) < 0) {
		return 0;
	}
	/* the server's (empty) SETTINGS and its ACK of ours */
	static const uint8_t in[18] = {0,
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
	if (nx_h2c_feed(h, in, sizeof(in)) == 0) {
		v = h->size + h->mem.bytes;
		atomic_store_explicit(&measured, v, memory_order_relaxed);
	}
	nx_h2c_free(h);
	return v;
}

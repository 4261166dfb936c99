/*
 * The live query stream (GET /api/queries/live, Server-Sent Events) against a real server:
 * a client receives records published after it subscribed (also a burst larger than its ring,
 * and a handoff overflow is counted), keepalive comments, a client that stops reading is cut
 * off and counted while its ring goes back to the ledger, the (max+1)th subscriber gets the
 * distinct 429 too_many_subscribers, an allocation failure its own 503 with the slot reusable,
 * and stopping the server with subscribers ends their streams. The sse_rings ledger row is
 * back to zero after every test (fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <time.h>

#include "base/clock.h"
#include "filter/result.h"
#include "fixture.h"
#include "querylog/querylog.h"

#define RAW_MAX (2 * 1024 * 1024)
#define WAIT_MS 10000 /* no wait in this file takes longer unless something is broken */

/* ---- a streaming client in its own thread ---- */

struct sse {
	uint16_t port;
	int rcvbuf;	     /* SO_RCVBUF before connect (0: the default) */
	bool stall;	     /* stop reading once subscribed, until `stop` */
	int want;	     /* done after this many events (0: until stop or EOF) */
	bool want_keepalive; /* done after a keepalive comment */
	atomic_bool subscribed, done, stop, eof;
	atomic_int events;
	int status;
	char *raw; /* the bytes as received */
	size_t raw_len;
	char *body; /* de-chunked */
	size_t body_len;
	size_t pos, chunk_left;
	bool hdr_done, chunked;
	uv_async_t *wake;
	uv_thread_t tid;
};

static void dechunk(struct sse *s)
{
	if (!s->hdr_done) {
		char *e = memmem(s->raw, s->raw_len, "\r\n\r\n", 4);
		if (!e) {
			return;
		}
		s->hdr_done = true;
		sscanf(s->raw, "HTTP/1.%*d %d", &s->status);
		*e = '\0';
		s->chunked = strcasestr(s->raw, "Transfer-Encoding: chunked") != NULL;
		*e = '\r';
		s->pos = (size_t)(e + 4 - s->raw);
	}
	while (s->pos < s->raw_len) {
		if (!s->chunked || s->chunk_left) {
			size_t n = s->raw_len - s->pos;
			if (s->chunked) {
				n = NX_MIN(n, s->chunk_left);
				s->chunk_left -= n;
			}
			n = NX_MIN(n, (size_t)RAW_MAX - s->body_len);
			memcpy(s->body + s->body_len, s->raw + s->pos, n);
			s->body_len += n;
			s->body[s->body_len] = '\0';
			s->pos += n;
			continue;
		}
		char *nl = memmem(s->raw + s->pos, s->raw_len - s->pos, "\r\n", 2);
		if (!nl) {
			break;
		}
		if (nl == s->raw + s->pos) {
			s->pos += 2; /* the CRLF after a chunk's data */
			continue;
		}
		s->chunk_left = strtoul(s->raw + s->pos, NULL, 16);
		s->pos = (size_t)(nl + 2 - s->raw);
		if (!s->chunk_left) {
			s->pos = s->raw_len; /* the last chunk */
		}
	}
}

static int count_events(const struct sse *s)
{
	int n = 0;
	for (const char *p = s->body; (p = strstr(p, "data: ")); p += 6) {
		if (p == s->body || p[-1] == '\n') {
			n++;
		}
	}
	return n;
}

static void sse_thread(void *arg)
{
	struct sse *s = arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->rcvbuf) {
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &s->rcvbuf, sizeof(s->rcvbuf));
	}
	struct timeval tv = {.tv_usec = 20000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(s->port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	static const char req[] = "GET /api/queries/live HTTP/1.1\r\nHost: t\r\n"
				  "Accept: text/event-stream\r\n" FX_BEARER "\r\n";
	uint64_t deadline = nx_now_mono_ms() + WAIT_MS;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1)) {
		goto out;
	}
	char tmp[16384];
	while (!atomic_load(&s->stop) && nx_now_mono_ms() < deadline) {
		if (s->stall && atomic_load(&s->subscribed)) {
			struct timespec ts = {.tv_nsec = 5000000};
			nanosleep(&ts, NULL);
			deadline = nx_now_mono_ms() + WAIT_MS;
			continue;
		}
		ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			atomic_store(&s->eof, true);
			break;
		}
		if (r < 0) {
			continue;
		}
		size_t n = NX_MIN((size_t)r, (size_t)RAW_MAX - s->raw_len);
		memcpy(s->raw + s->raw_len, tmp, n);
		s->raw_len += n;
		dechunk(s);
		if (!atomic_load(&s->subscribed) && strstr(s->body, "retry: ")) {
			atomic_store(&s->subscribed, true);
			uv_async_send(s->wake);
		}
		if (s->hdr_done && s->status != 200) {
			break;
		}
		atomic_store(&s->events, count_events(s));
		if ((s->want && atomic_load(&s->events) >= s->want) ||
		    (s->want_keepalive && strstr(s->body, ": keepalive\n\n"))) {
			break;
		}
	}
	/* a stalled client, told to go on: read what is left until the server closes */
	while (s->stall && !atomic_load(&s->eof) && nx_now_mono_ms() < deadline) {
		ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			atomic_store(&s->eof, true);
		}
	}
out:
	close(fd);
	atomic_store(&s->done, true);
	uv_async_send(s->wake);
}

static struct sse *sse_start(struct fx *f, int want)
{
	struct sse *s = calloc(1, sizeof(*s));
	s->port = nx_admin_port(f->admin);
	s->want = want;
	s->wake = &f->wake;
	s->raw = malloc(RAW_MAX + 1);
	s->body = malloc(RAW_MAX + 1);
	s->body[0] = '\0';
	return s;
}

static void sse_go(struct sse *s)
{
	assert_int_equal(uv_thread_create(&s->tid, sse_thread, s), 0);
}

static void sse_free(struct sse *s)
{
	uv_thread_join(&s->tid);
	free(s->raw);
	free(s->body);
	free(s);
}

/* ---- the loop ---- */

static uv_timer_t tick; /* wakes UV_RUN_ONCE so that a wait can time out */

static void on_tick(uv_timer_t *t)
{
}

/* Turn the loop until pred(arg) or WAIT_MS; fails the test on timeout. */
static void wait_for(struct fx *f, bool (*pred)(void *), void *arg, const char *what)
{
	uv_timer_init(&f->loop, &tick);
	uv_timer_start(&tick, on_tick, 5, 5);
	uint64_t deadline = nx_now_mono_ms() + WAIT_MS;
	while (!pred(arg) && nx_now_mono_ms() < deadline) {
		uv_run(&f->loop, UV_RUN_ONCE);
	}
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	if (!pred(arg)) {
		fail_msg("timed out waiting for %s", what);
	}
}

static bool is_subscribed(void *arg)
{
	return atomic_load(&((struct sse *)arg)->subscribed);
}

static bool is_done(void *arg)
{
	return atomic_load(&((struct sse *)arg)->done);
}

static bool no_subscribers(void *arg)
{
	return ((struct fx *)arg)->admin->live.n_subs == 0;
}

static int64_t sse_ledger(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_sse_rings].bytes;
}

/* ---- records ---- */

static void publish(struct fx *f, int first, int n, size_t name_len)
{
	struct nx_qlog_rec *recs = calloc((size_t)n, sizeof(*recs));
	for (int i = 0; i < n; i++) {
		struct nx_qlog_rec *r = &recs[i];
		r->ts_ms = 1700000000000LL + first + i;
		r->family = AF_INET;
		uint8_t a[4] = {192, 168, 1, 7};
		memcpy(r->client, a, 4);
		r->qtype = 1;
		r->action = NX_QLOG_ACT_BLOCK;
		r->reason = NX_FILTER_R_blocklist_domain;
		r->upstream = -1;
		char pad[200];
		size_t pl = NX_MIN(name_len, sizeof(pad) - 1);
		memset(pad, 'p', pl);
		pad[pl] = '\0';
		snprintf(r->name, sizeof(r->name), "live-%d.%s%sexample", first + i, pad,
			 pl ? "." : "");
	}
	nx_admin_live_publish(f->admin, recs, (size_t)n);
	free(recs);
}

static char config[4096];

static struct fx *start(unsigned max_subscribers)
{
	snprintf(config, sizeof(config),
		 "admin:\n%s"
		 "logging:\n"
		 "  live_max_subscribers: %u\n",
		 fx_admin_lines(), max_subscribers);
	struct fx *f = fx_start(config);
	f->admin->live.keepalive_ms = 100; /* disconnects of idle clients are noticed quickly */
	return f;
}

/* ---- tests ---- */

static void receives_live_records(void **state)
{
	struct fx *f = start(4);
	int64_t base = sse_ledger();
	/* nobody listens: publishing costs nothing and allocates nothing */
	publish(f, 0, 5, 0);
	assert_int_equal(sse_ledger(), base);
	assert_null(f->admin->live.q);

	struct sse *s = sse_start(f, 3);
	sse_go(s);
	wait_for(f, is_subscribed, s, "the subscription");
	assert_int_equal(f->admin->live.n_subs, 1);
	assert_true(sse_ledger() >= base + NX_ADMIN_LIVE_RING_BYTES);
	publish(f, 100, 3, 0);
	wait_for(f, is_done, s, "three events");
	assert_int_equal(s->status, 200);
	assert_int_equal(atomic_load(&s->events), 3);
	assert_true(s->chunked);
	char *hdr_end = strstr(s->raw, "\r\n\r\n");
	*hdr_end = '\0';
	assert_non_null(strcasestr(s->raw, "Content-Type: text/event-stream"));
	assert_non_null(strcasestr(s->raw, "Cache-Control: no-store"));
	*hdr_end = '\r';
	assert_true(strncmp(s->body, "retry: 3000\n\n", 13) == 0);
	/* each event: one data line of a record's JSON */
	const char *ev = strstr(s->body, "data: ");
	json_error_t je;
	json_t *j = json_loadb(ev + 6, strcspn(ev + 6, "\n"), 0, &je);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "name")), "live-100.example");
	assert_string_equal(json_string_value(json_object_get(j, "client")), "192.168.1.7");
	assert_string_equal(json_string_value(json_object_get(j, "action")), "block");
	json_decref(j);
	assert_non_null(strstr(s->body, "live-102.example"));
	assert_null(strstr(s->body, "live-0.example")); /* published before it subscribed */
	sse_free(s);
	/* the client left: noticed at the next keepalive, the slot and the memory come back */
	wait_for(f, no_subscribers, f, "the unsubscription");
	assert_int_equal(sse_ledger(), base);
	assert_null(f->admin->live.q);
	assert_int_equal(f->admin->live.peak, 1);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_SLOW], 0);
	fx_stop(f);
}

/* A burst bigger than a ring reaches a client that reads; the handoff's overflow is counted. */
static void burst_and_handoff_overflow(void **state)
{
	struct fx *f = start(4);
	struct sse *s = sse_start(f, NX_ADMIN_LIVE_HANDOFF);
	sse_go(s);
	wait_for(f, is_subscribed, s, "the subscription");
	/* 300 records of ~400 bytes each (120 KB > the 64 KiB ring), published at once: the
	 * handoff takes 256 and drops 44 */
	publish(f, 0, 300, 100);
	wait_for(f, is_done, s, "the burst");
	assert_int_equal(atomic_load(&s->events), NX_ADMIN_LIVE_HANDOFF);
	assert_true(s->body_len > NX_ADMIN_LIVE_RING_BYTES);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_SLOW], 0);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_HANDOFF_FULL], 300 - NX_ADMIN_LIVE_HANDOFF);
	assert_non_null(strstr(s->body, "live-255."));
	assert_null(strstr(s->body, "live-256."));

	/* the counters and the gauges on /metrics */
	struct nx_metrics_buf *mb = nx_metrics_buf_new(0);
	nx_admin_live_metrics(f->admin, mb);
	assert_int_equal(nx_metrics_buf_error(mb), 0);
	size_t len;
	const char *text = nx_metrics_buf_text(mb, &len);
	assert_non_null(
	    strstr(text, "# TYPE nxdns_sse_subscribers gauge\nnxdns_sse_subscribers 1\n"));
	assert_non_null(strstr(text, "\nnxdns_sse_subscribers_peak 1\n"));
	nx_metrics_buf_free(mb);
	sse_free(s);
	struct fx_resp r;
	fx_http(f, &r, "GET", "/metrics", NULL, NULL);
	fx_expect(&r, 200, NULL);
	assert_non_null(strstr(r.body, "\nnxdns_sse_dropped_total{reason=\"handoff_full\"} 44\n"));
	assert_non_null(
	    strstr(r.body, "\nnxdns_sse_dropped_total{reason=\"slow_subscriber\"} 0\n"));
	assert_non_null(
	    strstr(r.body, "\nnxdns_sse_dropped_total{reason=\"too_many_subscribers\"} 0\n"));
	assert_non_null(strstr(r.body, "\nnxdns_sse_dropped_total{reason=\"no_memory\"} 0\n"));
	fx_resp_free(&r);
	wait_for(f, no_subscribers, f, "the unsubscription");
	fx_stop(f);
}

static bool slow_counted(void *arg)
{
	return ((struct fx *)arg)->admin->ctr[NX_ADMIN_CTR_SSE_SLOW] > 0;
}

/* A client that stops reading is cut off when its ring would overflow, and counted. */
static void slow_subscriber_is_cut_off(void **state)
{
	struct fx *f = start(4);
	int64_t base = sse_ledger();
	f->admin->live.ring_bytes = 4096; /* a tiny ring: a few events */
	struct sse *s = sse_start(f, 0);
	s->stall = true;
	s->rcvbuf = 4096;
	sse_go(s);
	wait_for(f, is_subscribed, s, "the subscription");
	/* the socket buffers fill, then the ring: publish until the hub gives up on it */
	for (int i = 0; i < 400 && !slow_counted(f); i++) {
		publish(f, i * 16, 16, 150);
		for (int k = 0; k < 3; k++) {
			uv_run(&f->loop, UV_RUN_NOWAIT);
		}
	}
	wait_for(f, slow_counted, f, "the cut-off");
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_SLOW], 1);
	/* unsubscribed at once: the slot, the ring and the hub's queue are free */
	assert_int_equal(f->admin->live.n_subs, 0);
	assert_null(f->admin->live.q);
	assert_true(sse_ledger() < base + 4096);
	/* the connection is closed: the client reads what was sent, then EOF */
	atomic_store(&s->stop, true);
	wait_for(f, is_done, s, "the end of the stream");
	assert_true(atomic_load(&s->eof));
	sse_free(s);
	assert_int_equal(sse_ledger(), base);
	fx_stop(f);
}

static void keepalive_to_idle_subscribers(void **state)
{
	struct fx *f = start(4);
	f->admin->live.keepalive_ms = 30;
	struct sse *s = sse_start(f, 0);
	s->want_keepalive = true;
	sse_go(s);
	wait_for(f, is_done, s, "a keepalive");
	assert_non_null(strstr(s->body, "retry: 3000\n\n: keepalive\n\n"));
	assert_int_equal(atomic_load(&s->events), 0);
	sse_free(s);
	wait_for(f, no_subscribers, f, "the unsubscription");
	fx_stop(f);
}

static void subscriber_cap_and_no_memory(void **state)
{
	struct fx *f = start(2);
	struct sse *a = sse_start(f, 0), *b = sse_start(f, 0);
	sse_go(a);
	sse_go(b);
	wait_for(f, is_subscribed, a, "subscriber a");
	wait_for(f, is_subscribed, b, "subscriber b");
	assert_int_equal(f->admin->live.n_subs, 2);
	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/queries/live", FX_BEARER, NULL);
	fx_expect(&r, 429, "too_many_subscribers");
	char v[32];
	assert_non_null(fx_header(&r, "Retry-After", v, sizeof(v)));
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_TOO_MANY], 1);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_NO_MEMORY], 0);
	atomic_store(&a->stop, true);
	wait_for(f, is_done, a, "a to leave");
	sse_free(a);
	wait_for(f, is_subscribed, b, "b"); /* still there */
	struct fx *ff = f;
	while (ff->admin->live.n_subs != 1) {
		uv_run(&f->loop, UV_RUN_ONCE); /* keepalive notices a's socket is gone */
	}

	/* the allocation fails: its own answer, counted, and the slot stays free */
	nx_mem_fail_after(1); /* the request's state, then the subscriber */
	fx_http(f, &r, "GET", "/api/queries/live", FX_BEARER, NULL);
	nx_mem_fail_after(-1);
	fx_expect(&r, 503, "no_memory");
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_NO_MEMORY], 1);
	assert_int_equal(f->admin->live.n_subs, 1);
	struct sse *c = sse_start(f, 1);
	sse_go(c);
	wait_for(f, is_subscribed, c, "subscriber c in the freed slot");
	assert_int_equal(f->admin->live.n_subs, 2);
	publish(f, 0, 1, 0);
	wait_for(f, is_done, c, "c's event");
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SSE_TOO_MANY], 1);
	sse_free(c);
	atomic_store(&b->stop, true);
	wait_for(f, is_done, b, "b to leave");
	sse_free(b);
	wait_for(f, no_subscribers, f, "the unsubscriptions");
	assert_int_equal(f->admin->live.peak, 2);

	/* turned off by the config */
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(
	    nx_conf_rewrite(f->path, "logging.live_max_subscribers", "0", err, sizeof(err)), 0);
	assert_int_equal(fx_hook_reload(f, err, sizeof(err)), 0);
	fx_http(f, &r, "GET", "/api/queries/live", FX_BEARER, NULL);
	fx_expect(&r, 503, "live_disabled");
	fx_resp_free(&r);
	fx_stop(f);
}

/* Stopping the server ends every stream (suspended ones too) and frees their memory. */
static void stop_with_subscribers(void **state)
{
	struct fx *f = start(4);
	struct sse *a = sse_start(f, 0), *b = sse_start(f, 0);
	sse_go(a);
	sse_go(b);
	wait_for(f, is_subscribed, a, "subscriber a");
	wait_for(f, is_subscribed, b, "subscriber b");
	/* let both go idle (suspended) */
	for (int i = 0; i < 5; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
	}
	nx_admin_stop(f->admin);
	f->admin = NULL;
	wait_for(f, is_done, a, "a's end");
	wait_for(f, is_done, b, "b's end");
	assert_true(atomic_load(&a->eof));
	assert_true(atomic_load(&b->eof));
	sse_free(a);
	sse_free(b);
	fx_stop(f); /* the ledger rows are back to zero, uv_loop_close() == 0 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(receives_live_records),
	    cmocka_unit_test(burst_and_handoff_overflow),
	    cmocka_unit_test(slow_subscriber_is_cut_off),
	    cmocka_unit_test(keepalive_to_idle_subscribers),
	    cmocka_unit_test(subscriber_cap_and_no_memory),
	    cmocka_unit_test(stop_with_subscribers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The admin HTTP server on loopback (admin/admin.h): a real libuv loop in the test thread runs
 * the server; a plain blocking-socket client runs in a second thread and wakes the loop when done.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <uv.h>

#include "admin/admin.h"
#include "admin/impl.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"

#include "promcheck.h"

#define CLIENT_TIMEOUT_S 5 /* a blocking client read never hangs the suite longer than this */
#define RESPONSE_MAX (1024 * 1024)

struct ctx {
	uv_loop_t loop;
	uv_async_t wake;
	struct nx_admin *admin;
	struct nx_ledger_row before;
	bool ready; /* what the ready hook answers */
	int extra;  /* what the metrics_extra hook emits: 0 nothing, 1 valid families, 2 misuse */
};

/* ---- hooks -------------------------------------------------------------------------------- */

static bool hook_ready(void *ud)
{
	return ((struct ctx *)ud)->ready;
}

static void hook_extra(struct nx_metrics_buf *mb, void *ud)
{
	struct ctx *c = ud;
	if (c->extra == 1) {
		const double bounds[] = {0.005, 0.05, 0.5};
		const uint64_t counts[] = {4, 3, 2, 1};
		nx_metrics_family(mb, "nxdns_upstream_exchanges_total", NX_METRIC_COUNTER,
				  "Upstream exchanges, by server and outcome");
		nx_metrics_sample_u64(mb, "nxdns_upstream_exchanges_total", 42, "server",
				      "9.9.9.9:53", "outcome", "ok", NULL);
		nx_metrics_family(mb, "nxdns_upstream_latency_seconds", NX_METRIC_HISTOGRAM,
				  "Upstream exchange latency");
		nx_metrics_histogram(mb, "nxdns_upstream_latency_seconds", bounds, counts, 3, 0.75,
				     "server", "odd \"name\"", NULL);
	} else if (c->extra == 2) {
		nx_metrics_family(mb, "nxdns_not_a_counter", NX_METRIC_COUNTER, "bad");
	}
}

/* ---- client ------------------------------------------------------------------------------- */

struct fetch {
	int family; /* AF_INET or AF_INET6 (loopback) */
	uint16_t port;
	const char *request; /* raw bytes sent as they are */
	size_t request_len;  /* 0: strlen(request) */
	const char *tail;    /* optional second write (a body), sent after `request` */
	size_t tail_len;
	char *response; /* malloc'd, NUL-terminated; NULL when the connection failed */
	size_t len;
	atomic_bool done;
	uv_async_t *wake;
};

/* An IPv4 connection from 127.0.0.<host> (any loopback address is ours to bind). */
static int connect_from(uint8_t host, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in src = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl((INADDR_LOOPBACK & ~0xffu) | host)};
	struct sockaddr_in dst = {.sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int connect_to(int family, uint16_t port)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_storage ss = {0};
	socklen_t len;
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		s->sin6_addr = in6addr_loopback;
		len = sizeof(*s);
	}
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static void client(void *arg)
{
	struct fetch *f = arg;
	int fd = connect_to(f->family, f->port);
	if (fd >= 0) {
		size_t n = f->request_len ? f->request_len : strlen(f->request);
		send_all(fd, f->request, n);
		if (f->tail) {
			send_all(fd, f->tail, f->tail_len);
		}
		f->response = malloc(RESPONSE_MAX + 1);
		for (;;) {
			ssize_t r = recv(fd, f->response + f->len, RESPONSE_MAX - f->len, 0);
			if (r <= 0) {
				break;
			}
			f->len += (size_t)r;
		}
		f->response[f->len] = '\0';
		close(fd);
	}
	atomic_store(&f->done, true);
	uv_async_send(f->wake);
}

static void on_wake(uv_async_t *h)
{
}

/* Run the loop until `done` is set by the thread running fn(arg). */
static void run_with(struct ctx *c, void (*fn)(void *), void *arg, atomic_bool *done)
{
	uv_thread_t tid;
	assert_int_equal(uv_thread_create(&tid, fn, arg), 0);
	while (!atomic_load(done)) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	uv_thread_join(&tid);
}

struct resp {
	int status;
	char headers[4096]; /* raw header block */
	const char *body;   /* points into the fetch's response */
	size_t body_len;
};

static void do_fetch(struct ctx *c, struct fetch *f, struct resp *r)
{
	f->wake = &c->wake;
	if (!f->port) {
		f->port = nx_admin_port(c->admin);
	}
	if (!f->family) {
		f->family = AF_INET;
	}
	run_with(c, client, f, &f->done);
	assert_non_null(f->response);
	memset(r, 0, sizeof(*r));
	assert_int_equal(sscanf(f->response, "HTTP/1.%*d %d", &r->status), 1);
	const char *end = strstr(f->response, "\r\n\r\n");
	assert_non_null(end);
	size_t hl = (size_t)(end - f->response);
	assert_true(hl < sizeof(r->headers));
	memcpy(r->headers, f->response, hl);
	r->body = end + 4;
	r->body_len = f->len - hl - 4;
}

/* Value of a response header (case-insensitive name) copied into out, or NULL. */
static const char *header(const struct resp *r, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);
	for (const char *p = strstr(r->headers, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
		const char *h = p + 2;
		if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
			h += n + 1;
			while (*h == ' ') {
				h++;
			}
			const char *e = strstr(h, "\r\n");
			size_t l = e ? (size_t)(e - h) : strlen(h);
			snprintf(out, size, "%.*s", (int)l, h);
			return out;
		}
	}
	return NULL;
}

static void get(struct ctx *c, const char *path, struct resp *r, struct fetch *f)
{
	static char req[256];
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
	memset(f, 0, sizeof(*f));
	f->request = req;
	do_fetch(c, f, r);
}

/* ---- fixture ------------------------------------------------------------------------------ */

static struct nx_ledger_row admin_row(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_admin_http];
}

static void addr4(struct nx_addr *a, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	struct sockaddr_in *s = (struct sockaddr_in *)&a->ss;
	s->sin_family = AF_INET;
	s->sin_port = htons(port);
	s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->len = sizeof(*s);
	snprintf(a->text, sizeof(a->text), "127.0.0.1:%u", port);
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	c->before = admin_row();
	c->ready = true;
	assert_int_equal(uv_loop_init(&c->loop), 0);
	assert_int_equal(uv_async_init(&c->loop, &c->wake, on_wake), 0);
	struct nx_addr a;
	addr4(&a, 0);
	struct nx_admin_hooks hooks = {.metrics_extra = hook_extra, .ready = hook_ready, .ud = c};
	assert_int_equal(nx_admin_start(&c->loop, &a, &hooks, &c->admin), 0);
	assert_true(nx_admin_port(c->admin) > 0);
	*state = c;
	return 0;
}

/* Stop, close the loop (every handle closed) and check the ledger is back where it was. */
static int teardown(void **state)
{
	struct ctx *c = *state;
	nx_admin_stop(c->admin);
	uv_close((uv_handle_t *)&c->wake, NULL);
	uv_run(&c->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&c->loop), 0);
	struct nx_ledger_row now = admin_row();
	assert_int_equal(now.bytes, c->before.bytes);
	assert_int_equal(now.count, c->before.count);
	free(c);
	return 0;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void metrics_scrape(void **state)
{
	struct ctx *c = *state;
	uint64_t udp = nx_stat_read(NX_STAT_Q_UDP);
	nx_stat_add(NX_STAT_Q_UDP, 3);
	c->extra = 1;

	struct fetch f;
	struct resp r;
	char v[256];
	get(c, "/metrics", &r, &f);
	assert_int_equal(r.status, 200);
	assert_non_null(header(&r, "Content-Type", v, sizeof(v)));
	assert_true(strncmp(v, "text/plain; version=0.0.4", 25) == 0);
	assert_string_equal(header(&r, "Cache-Control", v, sizeof(v)), "no-store");

	char want[128];
	snprintf(want, sizeof(want), "\nnxdns_queries_total{proto=\"udp\"} %llu\n",
		 (unsigned long long)(udp + 3));
	assert_non_null(strstr(r.body, want));
	/* the daemon's families follow the built-in ones */
	assert_non_null(strstr(r.body, "\nnxdns_upstream_exchanges_total{server=\"9.9.9.9:53\","
				       "outcome=\"ok\"} 42\n"));
	assert_non_null(strstr(r.body, "\nnxdns_upstream_latency_seconds_bucket{server="
				       "\"odd \\\"name\\\"\",le=\"+Inf\"} 10\n"));
	/* this connection is open while the page renders: charged and counted */
	assert_null(strstr(r.body, "\nnxdns_memory_owner_bytes{owner=\"admin_http\"} 0\n"));
	assert_non_null(strstr(r.body, "\nnxdns_admin_http_connections 1\n"));
	assert_int_equal(promparse_status(r.body, r.body_len), 0);
	free(f.response);

	/* the scrape itself was counted */
	get(c, "/metrics", &r, &f);
	assert_int_equal(r.status, 200);
	assert_true(strstr(r.body, "\nnxdns_admin_http_responses_total{class=\"2xx\"} ") != NULL);
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_RESP_2XX], 2);
	free(f.response);

	/* HEAD: headers only */
	memset(&f, 0, sizeof(f));
	f.request = "HEAD /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	do_fetch(c, &f, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 0);
	free(f.response);
}

static void metrics_misuse_is_500(void **state)
{
	struct ctx *c = *state;
	c->extra = 2;
	struct fetch f;
	struct resp r;
	get(c, "/metrics", &r, &f);
	assert_int_equal(r.status, 500);
	json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "error")), "metrics_failed");
	json_decref(j);
	free(f.response);
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_METRICS_FAILED], 1);
}

static void healthz(void **state)
{
	struct ctx *c = *state;
	struct fetch f;
	struct resp r;
	get(c, "/healthz", &r, &f);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 3);
	assert_memory_equal(r.body, "ok\n", 3);
	free(f.response);

	c->ready = false;
	get(c, "/healthz", &r, &f);
	assert_int_equal(r.status, 503);
	free(f.response);
}

static void not_found_is_json(void **state)
{
	struct ctx *c = *state;
	struct fetch f;
	struct resp r;
	char v[128];
	get(c, "/nope?x=1", &r, &f);
	assert_int_equal(r.status, 404);
	assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "application/json");
	json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "error")), "not_found");
	assert_non_null(strstr(json_string_value(json_object_get(j, "message")), "/nope"));
	json_decref(j);
	free(f.response);
}

static void wrong_method_is_405(void **state)
{
	struct ctx *c = *state;
	struct fetch f = {
	    .request = "POST /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
		       "Content-Length: 5\r\n\r\nhello",
	};
	struct resp r;
	char v[64];
	do_fetch(c, &f, &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(header(&r, "Allow", v, sizeof(v)), "GET, HEAD");
	free(f.response);
}

static void oversized_bodies_are_413(void **state)
{
	struct ctx *c = *state;
	struct resp r;
	char req[256];

	/* declared: refused before the body is sent */
	snprintf(
	    req, sizeof(req),
	    "POST /api/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: %d\r\n\r\n",
	    NX_ADMIN_MAX_BODY + 1);
	struct fetch f = {.request = req};
	do_fetch(c, &f, &r);
	assert_int_equal(r.status, 413);
	free(f.response);

	/* declared and sent anyway (no 100-continue wait): still 413, nothing hangs */
	static char big[NX_ADMIN_MAX_BODY + 1];
	memset(big, 'b', sizeof(big));
	struct fetch e = {.request = req, .tail = big, .tail_len = sizeof(big)};
	do_fetch(c, &e, &r);
	assert_int_equal(r.status, 413);
	free(e.response);

	/* chunked: found out while reading; the rest is drained and 413 answered at the end */
	static char body[NX_ADMIN_MAX_BODY + 16384];
	size_t n = 0;
	const size_t chunk = 8192;
	while (n + chunk + 16 < sizeof(body) - 8 && n < NX_ADMIN_MAX_BODY + 1024) {
		n += (size_t)sprintf(body + n, "%zx\r\n", chunk);
		memset(body + n, 'a', chunk);
		n += chunk;
		n += (size_t)sprintf(body + n, "\r\n");
	}
	n += (size_t)sprintf(body + n, "0\r\n\r\n");
	struct fetch g = {
	    .request = "POST /api/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
		       "Transfer-Encoding: chunked\r\n\r\n",
	    .tail = body,
	    .tail_len = n,
	};
	do_fetch(c, &g, &r);
	assert_int_equal(r.status, 413);
	free(g.response);
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_REF_BODY], 3);
}

/* No memory for the body, nor for an answer: the connection is closed, counted, nothing leaks. */
static void body_without_memory(void **state)
{
	struct ctx *c = *state;
	struct fetch f = {
	    .request = "POST /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
		       "Content-Length: 5\r\n\r\nhello",
	    .port = nx_admin_port(c->admin),
	    .family = AF_INET,
	    .wake = &c->wake,
	};
	nx_mem_fail_after(1); /* the request state succeeds, then every allocation fails */
	run_with(c, client, &f, &f.done);
	nx_mem_fail_after(-1);
	assert_non_null(f.response);
	assert_int_equal(f.len, 0);
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_REF_NOMEM], 1);
	free(f.response);
}

/* NX_ADMIN_MAX_CONNECTIONS idle clients, then one more: refused and counted. */
struct flood {
	uint16_t port;
	int fds[NX_ADMIN_MAX_CONNECTIONS];
	int extra_read; /* recv() result on the connection over the cap */
	atomic_bool opened;
	atomic_bool done;
	uv_async_t *wake;
};

/* Enough client addresses that the total cap is reached before any per-address one. */
#define FLOOD_ADDRS                                                                                \
	((NX_ADMIN_MAX_CONNECTIONS + NX_ADMIN_MAX_CONNECTIONS_PER_ADDR - 1) /                      \
	 NX_ADMIN_MAX_CONNECTIONS_PER_ADDR)

static void flood_open(void *arg)
{
	struct flood *fl = arg;
	for (int i = 0; i < NX_ADMIN_MAX_CONNECTIONS; i++) {
		fl->fds[i] = connect_from((uint8_t)(2 + i % FLOOD_ADDRS), fl->port);
	}
	/* accepted in order: this one comes after the cap is reached (from an address that has
	 * room of its own) */
	int fd = connect_from((uint8_t)(2 + FLOOD_ADDRS), fl->port);
	char b;
	fl->extra_read = fd < 0 ? 0 : (int)recv(fd, &b, 1, 0);
	if (fd >= 0) {
		close(fd);
	}
	atomic_store(&fl->opened, true);
	uv_async_send(fl->wake);
}

static void hold_one(void *arg)
{
	struct flood *fl = arg;
	fl->fds[0] = connect_to(AF_INET, fl->port);
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
	char buf[512];
	send_all(fl->fds[0], req, sizeof(req) - 1);
	(void)!recv(fl->fds[0], buf, sizeof(buf), 0); /* the answer; the connection stays open */
	atomic_store(&fl->opened, true);
	uv_async_send(fl->wake);
}

static void flood_close(void *arg)
{
	struct flood *fl = arg;
	for (int i = 0; i < NX_ADMIN_MAX_CONNECTIONS; i++) {
		if (fl->fds[i] >= 0) {
			close(fl->fds[i]);
		}
	}
	atomic_store(&fl->done, true);
	uv_async_send(fl->wake);
}

static void connection_cap(void **state)
{
	struct ctx *c = *state;
	struct flood fl = {.port = nx_admin_port(c->admin), .wake = &c->wake};
	run_with(c, flood_open, &fl, &fl.opened);
	for (int i = 0; i < NX_ADMIN_MAX_CONNECTIONS; i++) {
		assert_true(fl.fds[i] >= 0);
	}
	assert_true(fl.extra_read <= 0); /* closed without an answer */
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_REF_CONN_CAP], 1);
	assert_int_equal(c->admin->connections, NX_ADMIN_MAX_CONNECTIONS);
	struct nx_ledger_row now = admin_row();
	assert_true(now.bytes - c->before.bytes >=
		    (int64_t)NX_ADMIN_MAX_CONNECTIONS * NX_ADMIN_CONN_CHARGE);

	run_with(c, flood_close, &fl, &fl.done);
	while (c->admin->connections > 0) { /* MHD sees the EOFs */
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	struct fetch f;
	struct resp r;
	get(c, "/metrics", &r, &f);
	assert_int_equal(r.status, 200);
	assert_non_null(
	    strstr(r.body, "\nnxdns_admin_http_refused_total{reason=\"connection_cap\"} 1\n"));
	char want[96];
	snprintf(want, sizeof(want), "\nnxdns_admin_http_connections_peak %d\n",
		 NX_ADMIN_MAX_CONNECTIONS);
	assert_non_null(strstr(r.body, want));
	free(f.response);
}

/* One address gets NX_ADMIN_MAX_CONNECTIONS_PER_ADDR connections; the next is refused and
 * counted, while another address still gets in. */
struct per_addr {
	uint16_t port;
	int fds[NX_ADMIN_MAX_CONNECTIONS_PER_ADDR];
	int extra_read;	 /* recv() on the one over the per-address cap */
	int other_sent;	 /* the request from another address */
	char other[256]; /* its answer */
	atomic_bool opened;
	atomic_bool done;
	uv_async_t *wake;
};

static void per_addr_open(void *arg)
{
	struct per_addr *p = arg;
	for (int i = 0; i < NX_ADMIN_MAX_CONNECTIONS_PER_ADDR; i++) {
		p->fds[i] = connect_from(9, p->port);
	}
	int fd = connect_from(9, p->port);
	char b;
	p->extra_read = fd < 0 ? 0 : (int)recv(fd, &b, 1, 0);
	if (fd >= 0) {
		close(fd);
	}
	fd = connect_from(10, p->port);
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	p->other_sent = fd >= 0 && send_all(fd, req, sizeof(req) - 1);
	if (fd >= 0) {
		ssize_t n = recv(fd, p->other, sizeof(p->other) - 1, 0);
		p->other[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	atomic_store(&p->opened, true);
	uv_async_send(p->wake);
}

static void per_addr_close(void *arg)
{
	struct per_addr *p = arg;
	for (int i = 0; i < NX_ADMIN_MAX_CONNECTIONS_PER_ADDR; i++) {
		if (p->fds[i] >= 0) {
			close(p->fds[i]);
		}
	}
	atomic_store(&p->done, true);
	uv_async_send(p->wake);
}

static void per_address_cap(void **state)
{
	struct ctx *c = *state;
	struct per_addr p = {.port = nx_admin_port(c->admin), .wake = &c->wake};
	run_with(c, per_addr_open, &p, &p.opened);
	for (int i = 0; i < NX_ADMIN_MAX_CONNECTIONS_PER_ADDR; i++) {
		assert_true(p.fds[i] >= 0);
	}
	assert_true(p.extra_read <= 0); /* closed without an answer */
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_REF_PER_ADDR], 1);
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_REF_CONN_CAP], 0);
	assert_true(p.other_sent);
	assert_non_null(strstr(p.other, "HTTP/1.1 200"));
	run_with(c, per_addr_close, &p, &p.done);
	while (c->admin->connections > 0) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	/* the slots are free again: the address is welcome */
	for (size_t i = 0; i < NX_ARRAY_LEN(c->admin->conns); i++) {
		assert_false(c->admin->conns[i].used);
	}
	/* closed at once, not after the header time-out: not counted as one */
	assert_int_equal(c->admin->ctr[NX_ADMIN_CTR_REF_HEADER_TIMEOUT], 0);
}

static void keep_alive_requests(void **state)
{
	struct ctx *c = *state;
	struct fetch f = {
	    .request = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
		       "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
	};
	struct resp r;
	do_fetch(c, &f, &r);
	assert_int_equal(r.status, 200);
	const char *second = strstr(r.body, "HTTP/1.1 200");
	assert_non_null(second);
	free(f.response);
}

static void on_idle_timer(uv_timer_t *t)
{
	*(bool *)t->data = true;
}

/* With a kept-alive idle connection the loop sleeps: MHD's timeout is its idle timeout. */
static void idle_server_sleeps(void **state)
{
	struct ctx *c = *state;
	struct flood fl = {.port = nx_admin_port(c->admin), .wake = &c->wake};
	/* one keep-alive connection, answered once, then left idle */
	uv_thread_t tid;
	assert_int_equal(uv_thread_create(&tid, hold_one, &fl), 0);
	while (!atomic_load(&fl.opened)) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	uv_thread_join(&tid);
	while (c->admin->connections < 1) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	uv_timer_t t;
	bool fired = false;
	uv_timer_init(&c->loop, &t);
	t.data = &fired;
	uint64_t runs = c->admin->runs;
	uv_timer_start(&t, on_idle_timer, 300, 0);
	while (!fired) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	assert_true(c->admin->runs - runs < 5);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&c->loop, UV_RUN_NOWAIT); /* t is on this stack: finish its close here */
	close(fl.fds[0]);
}

/* Independent of the fixture: start errors and an IPv6 listener. */
static void bind_conflict(void **state)
{
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_ledger_row before = admin_row();
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct nx_addr a;
	addr4(&a, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a.ss, a.len), 0);
	assert_int_equal(listen(fd, 1), 0);
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	getsockname(fd, (struct sockaddr *)&sin, &sl);
	addr4(&a, ntohs(sin.sin_port));

	struct nx_admin *admin = NULL;
	assert_int_equal(nx_admin_start(&loop, &a, NULL, &admin), -EADDRINUSE);
	assert_null(admin);
	assert_int_equal(uv_loop_alive(&loop), 0); /* nothing left on the loop */
	close(fd);

	/* not an IP address */
	memset(&a, 0, sizeof(a));
	a.ss.ss_family = AF_UNIX;
	assert_int_equal(nx_admin_start(&loop, &a, NULL, &admin), -EAFNOSUPPORT);

	/* out of memory before anything is opened */
	addr4(&a, 0);
	nx_mem_fail_after(0);
	assert_int_equal(nx_admin_start(&loop, &a, NULL, &admin), -ENOMEM);
	nx_mem_fail_after(-1);

	assert_int_equal(uv_loop_close(&loop), 0);
	struct nx_ledger_row now = admin_row();
	assert_int_equal(now.bytes, before.bytes);
	assert_int_equal(now.count, before.count);
}

static void ipv6_listener(void **state)
{
	struct ctx c = {.ready = true};
	assert_int_equal(uv_loop_init(&c.loop), 0);
	assert_int_equal(uv_async_init(&c.loop, &c.wake, on_wake), 0);
	struct nx_addr a = {0};
	struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a.ss;
	s->sin6_family = AF_INET6;
	s->sin6_addr = in6addr_loopback;
	a.len = sizeof(*s);
	snprintf(a.text, sizeof(a.text), "[::1]:0");
	int rc = nx_admin_start(&c.loop, &a, NULL, &c.admin);
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT) {
		uv_close((uv_handle_t *)&c.wake, NULL);
		uv_run(&c.loop, UV_RUN_DEFAULT);
		uv_loop_close(&c.loop);
		skip(); /* no IPv6 loopback here */
	}
	assert_int_equal(rc, 0);
	struct fetch f = {
	    .family = AF_INET6,
	    .request = "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
	};
	struct resp r;
	do_fetch(&c, &f, &r);
	assert_int_equal(r.status, 200);
	free(f.response);
	nx_admin_stop(c.admin);
	uv_close((uv_handle_t *)&c.wake, NULL);
	uv_run(&c.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&c.loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(metrics_scrape, setup, teardown),
	    cmocka_unit_test_setup_teardown(metrics_misuse_is_500, setup, teardown),
	    cmocka_unit_test_setup_teardown(healthz, setup, teardown),
	    cmocka_unit_test_setup_teardown(not_found_is_json, setup, teardown),
	    cmocka_unit_test_setup_teardown(wrong_method_is_405, setup, teardown),
	    cmocka_unit_test_setup_teardown(oversized_bodies_are_413, setup, teardown),
	    cmocka_unit_test_setup_teardown(body_without_memory, setup, teardown),
	    cmocka_unit_test_setup_teardown(connection_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(per_address_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(keep_alive_requests, setup, teardown),
	    cmocka_unit_test_setup_teardown(idle_server_sleeps, setup, teardown),
	    cmocka_unit_test(bind_conflict),
	    cmocka_unit_test(ipv6_listener),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

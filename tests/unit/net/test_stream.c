/*
 * The stream layer from both ends on a real libuv loop over 127.0.0.1: a listener
 * (nx_stream_listen, TCP and DoT with a self-signed certificate) whose "pipeline" answers every
 * query by echoing it with QR set, and the upstream side (nx_stream_connect) sending queries
 * and taking the answers by id: pipelined answers, DoT with the certificate checked against
 * the peer's IP, TLS session resumption on the second connection, a refused connect, a
 * handshake that never comes, an idle close, a cancelled query whose answer is dropped (late).
 * Each test ends with uv_loop_close() == 0 and the connection owners back where they started.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/ledger.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "net/stream.h"
#include "net/tls.h"

struct fx {
	uv_loop_t loop;
	uint8_t rx[NX_STREAM_RX_SCRATCH];
	uint8_t out[NX_DNS_MSG_MAX];
	struct nx_stream_server *srv;
	atomic_int open_count;
	uint16_t port;
	struct nx_tls_creds *screds, *ccreds;
	char dir[64];
	int64_t led0[NX_OWNER__COUNT];
	/* client side */
	struct nx_stream_client *cl;
	int answers;
	uint16_t answer_ids[16];
	int ready;
	int closed;
	int closed_rc;
	int queries; /* seen by the server */
};

static int echo(void *ud, const struct nx_reply *r, const uint8_t *msg, size_t len,
		bool truncated, uint8_t *out, size_t cap)
{
	struct fx *f = ud;
	f->queries++;
	if (len < 12) {
		return NX_REPLY_BAD_FRAME;
	}
	memcpy(out, msg, len);
	out[2] |= 0x80;
	return (int)len;
}

static uint16_t free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	close(fd);
	return ntohs(a.sin_port);
}

static void ledger_now(int64_t out[NX_OWNER__COUNT])
{
	struct nx_ledger_row led[NX_OWNER__COUNT];
	nx_ledger_read(led);
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		out[i] = led[i].bytes;
	}
}

static const struct nx_stream_limits server_lim = {
	.max_conns = 16,
	.idle_ms = 5000,
	.read_ms = 2000,
	.handshake_ms = 2000,
	.permit_wait_ms = 2000,
	.max_streams = 100,
};

static void listen_on(struct fx *f, enum nx_proto proto)
{
	f->port = free_port();
	char text[32];
	snprintf(text, sizeof(text), "127.0.0.1:%u", f->port);
	struct nx_addr a;
	assert_int_equal(nx_addr_parse(text, 53, &a), 0);
	struct nx_stream_env env = {.rx = f->rx, .cb = echo, .ud = f, .out = f->out};
	assert_int_equal(nx_stream_listen(&f->loop, proto, &a, 0, &f->open_count, &server_lim,
					  proto == NX_PROTO_TCP ? NULL : f->screds, &env, &f->srv),
			 0);
}

static int setup(void **state)
{
	struct fx *f = test_calloc(1, sizeof(*f));
	ledger_now(f->led0);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	snprintf(f->dir, sizeof(f->dir), "/tmp/nx-stream-test.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	char err[256];
	assert_int_equal(nx_tls_selfsigned_write(f->dir, NULL, 0, err, sizeof(err)), 0);
	char cert[128], key[128];
	snprintf(cert, sizeof(cert), "%s/cert.pem", f->dir);
	snprintf(key, sizeof(key), "%s/key.pem", f->dir);
	assert_int_equal(nx_tls_creds_server_load(cert, key, &f->screds, err, sizeof(err)), 0);
	assert_int_equal(nx_tls_creds_client_new_ca(false, cert, NULL, 0, &f->ccreds, err,
						    sizeof(err)),
			 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	nx_stream_close(f->srv);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	int rc = uv_loop_close(&f->loop);
	nx_tls_creds_unref(f->screds);
	nx_tls_creds_unref(f->ccreds);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	int64_t led[NX_OWNER__COUNT];
	ledger_now(led);
	bool balanced = led[NX_OWNER_tcp_conns] == f->led0[NX_OWNER_tcp_conns] &&
			led[NX_OWNER_upstream_tcp] == f->led0[NX_OWNER_upstream_tcp] &&
			led[NX_OWNER_tcp_writes] == f->led0[NX_OWNER_tcp_writes];
	test_free(f);
	return rc == 0 && balanced ? 0 : -1;
}

static void on_answer(void *ud, uint64_t tag, int rc, int status, const uint8_t *msg, size_t len)
{
	struct fx *f = ud;
	assert_int_equal(rc, 0);
	assert_true(len >= 12 && (msg[2] & 0x80));
	assert_int_equal(((msg[0] << 8) | msg[1]), (int)tag);
	if (f->answers < 16) {
		f->answer_ids[f->answers] = (uint16_t)tag;
	}
	f->answers++;
}

static void on_ready(void *ud)
{
	((struct fx *)ud)->ready++;
}

static void on_closed(void *ud, int rc)
{
	struct fx *f = ud;
	f->closed++;
	f->closed_rc = rc;
	f->cl = NULL;
}

static const struct nx_stream_client_io cio = {
	.answer = on_answer,
	.ready = on_ready,
	.closed = on_closed,
};

static void connect_to(struct fx *f, enum nx_proto proto, uint16_t port, unsigned idle_ms,
		       const uint8_t *resume, size_t resume_len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(port)};
	struct nx_stream_client_opts o = {
		.proto = proto,
		.creds = proto == NX_PROTO_TCP ? NULL : f->ccreds,
		.resume = resume,
		.resume_len = resume_len,
		.connect_ms = 500,
		.idle_ms = idle_ms,
		.read_ms = 1000,
		.rx = f->rx,
	};
	assert_int_equal(nx_stream_connect(&f->loop, (struct sockaddr *)&sa, sizeof(sa), &o, &cio,
					   f, &f->cl),
			 0);
}

static void query(uint8_t q[29], uint16_t id)
{
	static const uint8_t tmpl[29] = {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x',
					 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1};
	memcpy(q, tmpl, sizeof(tmpl));
	q[0] = (uint8_t)(id >> 8);
	q[1] = (uint8_t)id;
}

/* Run the loop until cond or ~3 s. */
#define RUN_UNTIL(f, cond)                                                                       \
	do {                                                                                     \
		for (int i_ = 0; i_ < 3000 && !(cond); i_++) {                                   \
			uv_run(&(f)->loop, UV_RUN_NOWAIT);                                       \
			usleep(1000);                                                            \
		}                                                                                \
	} while (0)

static void pipelined(struct fx *f, enum nx_proto proto)
{
	listen_on(f, proto);
	connect_to(f, proto, f->port, 5000, NULL, 0);
	uint8_t q[29];
	/* Queued before the connection is ready, then more once it is. */
	for (uint16_t id = 1; id <= 3; id++) {
		query(q, id);
		assert_int_equal(nx_stream_client_send(f->cl, id, q, sizeof(q)), 0);
	}
	RUN_UNTIL(f, f->answers == 3);
	assert_int_equal(f->ready, 1);
	assert_true(nx_stream_client_ready(f->cl));
	for (uint16_t id = 4; id <= 6; id++) {
		query(q, id);
		assert_int_equal(nx_stream_client_send(f->cl, id, q, sizeof(q)), 0);
	}
	assert_int_equal(nx_stream_client_in_flight(f->cl), 3);
	RUN_UNTIL(f, f->answers == 6);
	assert_int_equal(f->answers, 6);
	assert_int_equal(f->queries, 6);
	assert_int_equal(nx_stream_client_in_flight(f->cl), 0);
	nx_stream_client_close(f->cl);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_int_equal(f->closed, 0); /* the owner closed it: no callback */
}

static void test_tcp_pipelined(void **state)
{
	pipelined(*state, NX_PROTO_TCP);
}

static void test_dot_pipelined(void **state)
{
	pipelined(*state, NX_PROTO_DOT);
}

static void test_dot_resumes(void **state)
{
	struct fx *f = *state;
	listen_on(f, NX_PROTO_DOT);
	connect_to(f, NX_PROTO_DOT, f->port, 5000, NULL, 0);
	uint8_t q[29];
	query(q, 7);
	assert_int_equal(nx_stream_client_send(f->cl, 7, q, sizeof(q)), 0);
	RUN_UNTIL(f, f->answers == 1);
	assert_false(nx_stream_client_resumed(f->cl));
	uint8_t blob[NX_TLS_SESSION_MAX];
	int n = nx_stream_client_session(f->cl, blob, sizeof(blob));
	assert_true(n > 0);
	nx_stream_client_close(f->cl);
	connect_to(f, NX_PROTO_DOT, f->port, 5000, blob, (size_t)n);
	query(q, 8);
	assert_int_equal(nx_stream_client_send(f->cl, 8, q, sizeof(q)), 0);
	RUN_UNTIL(f, f->answers == 2);
	assert_int_equal(f->answers, 2);
	assert_true(nx_stream_client_resumed(f->cl));
	nx_stream_client_close(f->cl);
}

static void test_refused_connect(void **state)
{
	struct fx *f = *state;
	connect_to(f, NX_PROTO_TCP, free_port(), 5000, NULL, 0);
	uint8_t q[29];
	query(q, 9);
	assert_int_equal(nx_stream_client_send(f->cl, 9, q, sizeof(q)), 0); /* queued */
	RUN_UNTIL(f, f->closed == 1);
	assert_int_equal(f->closed, 1);
	assert_int_equal(f->closed_rc, UV_ECONNREFUSED);
	assert_int_equal(f->answers, 0);
}

/* A plain TCP listener where a DoT server should be: the handshake never completes. */
static void test_handshake_timeout(void **state)
{
	struct fx *f = *state;
	listen_on(f, NX_PROTO_TCP);
	uint64_t before = nx_stat_read(NX_STAT_UP_STREAM_TIMEOUT);
	connect_to(f, NX_PROTO_DOT, f->port, 5000, NULL, 0);
	RUN_UNTIL(f, f->closed == 1);
	assert_int_equal(f->closed, 1);
	assert_int_equal(f->closed_rc, -ETIMEDOUT);
	assert_int_equal(f->ready, 0);
	assert_int_equal(nx_stat_read(NX_STAT_UP_STREAM_TIMEOUT), before + 1);
}

static void test_idle_close_and_late_answer(void **state)
{
	struct fx *f = *state;
	listen_on(f, NX_PROTO_TCP);
	connect_to(f, NX_PROTO_TCP, f->port, 300, NULL, 0);
	uint8_t q[29];
	query(q, 10);
	assert_int_equal(nx_stream_client_send(f->cl, 10, q, sizeof(q)), 0);
	RUN_UNTIL(f, f->answers == 1);
	uint64_t late = nx_stat_read(NX_STAT_UP_LATE);
	query(q, 11);
	assert_int_equal(nx_stream_client_send(f->cl, 11, q, sizeof(q)), 0);
	nx_stream_client_cancel(f->cl, 11); /* its attempt ended before the answer came */
	assert_int_equal(nx_stream_client_in_flight(f->cl), 0);
	RUN_UNTIL(f, nx_stat_read(NX_STAT_UP_LATE) == late + 1);
	assert_int_equal(f->queries, 2);
	assert_int_equal(f->answers, 1); /* the late answer was dropped, counted */
	assert_int_equal(nx_stat_read(NX_STAT_UP_LATE), late + 1);
	RUN_UNTIL(f, f->closed == 1);
	assert_int_equal(f->closed, 1);
	assert_int_equal(f->closed_rc, 0); /* closed idle */
}

/* A query cancelled while the connection is still being made never goes out. */
static void test_cancel_while_connecting(void **state)
{
	struct fx *f = *state;
	listen_on(f, NX_PROTO_DOT);
	connect_to(f, NX_PROTO_DOT, f->port, 5000, NULL, 0);
	uint8_t q[29];
	query(q, 12);
	assert_int_equal(nx_stream_client_send(f->cl, 12, q, sizeof(q)), 0);
	query(q, 13);
	assert_int_equal(nx_stream_client_send(f->cl, 13, q, sizeof(q)), 0);
	nx_stream_client_cancel(f->cl, 12);
	RUN_UNTIL(f, f->answers == 1);
	assert_int_equal(f->answers, 1);
	assert_int_equal(f->answer_ids[0], 13);
	assert_int_equal(f->queries, 1);
	nx_stream_client_close(f->cl);
}

int main(void)
{
	nx_stats_thread_register();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tcp_pipelined, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dot_pipelined, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dot_resumes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_connect, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_handshake_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_close_and_late_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel_while_connecting, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The UDP listener's queued replies (a reply handle's send on its owner thread, then
 * nx_udp_flush_later) on a real libuv
 * loop over 127.0.0.1: nothing leaves before the flush, everything leaves at it (in order, from
 * the listener's port), a full queue flushes itself, an oversized reply goes out at once, and a
 * reply queued from inside a read callback goes out at once without clobbering that callback's
 * own batch. Every test ends with uv_loop_close() == 0 and the ledger back where it started.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/ledger.h"
#include "net/udp.h"

struct fx {
	uv_loop_t loop;
	struct nx_udp_batch *b;
	struct nx_udp_sock *s;
	int client;                 /* plain UDP socket talking to the listener */
	uint16_t port;
	int64_t led0;
	/* read callback behaviour */
	int got;
	bool later_from_cb;         /* queue a "later" reply from inside the callback */
	struct nx_reply h;          /* the handle of the last query (a copy, as the pipeline keeps) */
};

static int on_query(void *ud, const struct nx_reply *r, const uint8_t *msg, size_t len,
		    bool truncated, uint8_t *out, size_t cap)
{
	struct fx *f = ud;
	f->got++;
	assert_int_equal(r->proto, NX_PROTO_UDP);
	assert_true(r->datagram && r->any_thread);
	f->h = *r;
	if (f->later_from_cb) {
		assert_int_equal(nx_reply_send(&f->h, (const uint8_t *)"later", 5, true), 0);
	}
	memcpy(out, "now", 3);
	return 3;
}

static void send_query(struct fx *f)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons(f->port)};
	int before = f->got;
	assert_true(sendto(f->client, "q", 1, 0, (struct sockaddr *)&to, sizeof(to)) == 1);
	for (int i = 0; i < 100 && f->got == before; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(f->got, before + 1);
}

static uint16_t free_port(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	close(fd);
	return ntohs(a.sin_port);
}

static int setup(void **state)
{
	struct fx *f = test_calloc(1, sizeof(*f));
	struct nx_ledger_row led[NX_OWNER__COUNT];
	nx_ledger_read(led);
	f->led0 = led[NX_OWNER_worker_buffers].bytes;
	uv_loop_init(&f->loop);
	f->b = nx_udp_batch_new();
	f->port = free_port();
	char text[32];
	snprintf(text, sizeof(text), "127.0.0.1:%u", f->port);
	struct nx_addr a;
	assert_int_equal(nx_addr_parse(text, 53, &a), 0);
	assert_int_equal(nx_udp_open(&f->loop, &a, 0, f->b, on_query, f, &f->s), 0);
	f->client = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in c = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(f->client, (struct sockaddr *)&c, sizeof(c)), 0);
	*state = f;
	/* A first query gives the handle later replies go through; its "now" is read here. */
	send_query(f);
	usleep(20000);
	char buf[16];
	assert_true(recv(f->client, buf, sizeof(buf), 0) == 3);
	f->got = 0;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	nx_udp_close(f->s);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	int rc = uv_loop_close(&f->loop);
	nx_udp_batch_free(f->b);
	close(f->client);
	struct nx_ledger_row led[NX_OWNER__COUNT];
	nx_ledger_read(led);
	int64_t left = led[NX_OWNER_worker_buffers].bytes - f->led0;
	test_free(f);
	return rc == 0 && left == 0 ? 0 : -1;
}

/* Datagrams waiting at the client now (non-blocking after a short settle). */
static int drain(struct fx *f, char (*msgs)[64], int max, uint16_t *from_port)
{
	usleep(20000);
	int n = 0;
	for (;;) {
		struct sockaddr_in src;
		socklen_t sl = sizeof(src);
		char buf[2048];
		ssize_t r = recvfrom(f->client, buf, sizeof(buf), 0, (struct sockaddr *)&src, &sl);
		if (r < 0) {
			return n;
		}
		if (from_port) {
			*from_port = ntohs(src.sin_port);
		}
		if (n < max) {
			size_t k = (size_t)r < 63 ? (size_t)r : 63;
			memcpy(msgs[n], buf, k);
			msgs[n][k] = 0;
		}
		n++;
	}
}

static void later(struct fx *f, const char *text)
{
	assert_int_equal(nx_reply_send(&f->h, (const uint8_t *)text, strlen(text), true), 0);
}

static void test_nothing_before_flush_all_at_it(void **state)
{
	struct fx *f = *state;
	char m[8][64];
	later(f, "one");
	later(f, "two");
	later(f, "three");
	assert_int_equal(drain(f, m, 8, NULL), 0);
	nx_udp_flush_later(f->b);
	uint16_t from = 0;
	assert_int_equal(drain(f, m, 8, &from), 3);
	assert_string_equal(m[0], "one");
	assert_string_equal(m[1], "two");
	assert_string_equal(m[2], "three");
	assert_int_equal(from, f->port);
	nx_udp_flush_later(f->b); /* empty: nothing more */
	assert_int_equal(drain(f, m, 8, NULL), 0);
}

static void test_full_queue_flushes_itself(void **state)
{
	struct fx *f = *state;
	char m[64][64];
	char t[16];
	for (int i = 0; i < NX_UDP_BATCH + 1; i++) {
		snprintf(t, sizeof(t), "r%d", i);
		later(f, t);
	}
	/* the first NX_UDP_BATCH left when the queue was full; the last waits */
	assert_int_equal(drain(f, m, 64, NULL), NX_UDP_BATCH);
	assert_string_equal(m[0], "r0");
	assert_string_equal(m[NX_UDP_BATCH - 1], "r31");
	nx_udp_flush_later(f->b);
	assert_int_equal(drain(f, m, 64, NULL), 1);
	assert_string_equal(m[0], "r32");
}

static void test_oversized_goes_at_once(void **state)
{
	struct fx *f = *state;
	static uint8_t big[NX_UDP_TX_SLOT + 100];
	memset(big, 'x', sizeof(big));
	char m[4][64];
	assert_int_equal(nx_reply_send(&f->h, big, sizeof(big), true), 0);
	assert_int_equal(drain(f, m, 4, NULL), 1);
}

/* A reply queued from inside a read callback goes out at once; the callback's own immediate
 * reply still leaves intact in the batch's sendmmsg. */
static void test_later_inside_read_callback(void **state)
{
	struct fx *f = *state;
	f->later_from_cb = true;
	later(f, "queued-before"); /* flushed by the read callback before it reuses the arrays */
	send_query(f);
	char m[8][64];
	int n = drain(f, m, 8, NULL);
	assert_int_equal(n, 3);
	assert_string_equal(m[0], "queued-before");
	assert_string_equal(m[1], "later");
	assert_string_equal(m[2], "now");
	nx_udp_flush_later(f->b);
	assert_int_equal(drain(f, m, 8, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nothing_before_flush_all_at_it, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_queue_flushes_itself, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_oversized_goes_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_later_inside_read_callback, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

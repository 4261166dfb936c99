/*
 * dnstap unit tests: the byte ring (round trip of every field, wrap-around with padding,
 * drop-oldest counts and order, an event that can never fit), the encoder (each field read
 * back with protobuf-c's own unpacker, the decision in extra, the query rebuilt from the
 * reply, a buffer too small), and the writer with no collector (reconnects counted, pushes
 * never block, stop returns promptly, the ledger balances).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "dnstap/dnstap.pb-c.h"
#include "dnstap/impl.h"

static int64_t owner_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_dnstap_queue].bytes;
}

/* A reply for `name` (dotted, one label per dot) with flags and one A record. */
static size_t reply(uint8_t *out, uint16_t id, uint16_t flags, const char *name)
{
	size_t n = 0;
	const uint8_t hdr[12] = {id >> 8, id & 0xff, flags >> 8, flags & 0xff, 0, 1, 0, 1, 0,
				 0,	  0,	     0};
	memcpy(out, hdr, 12);
	n = 12;
	const char *p = name;
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		out[n++] = (uint8_t)l;
		memcpy(out + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
	}
	out[n++] = 0;
	const uint8_t tail[] = {0,    1,  0, 1, /* A IN */
				0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7};
	memcpy(out + n, tail, sizeof(tail));
	return n + sizeof(tail);
}

static struct nx_dnstap_event event(const struct sockaddr *client, const uint8_t *r, size_t rlen,
				    const char *rule)
{
	return (struct nx_dnstap_event){
	    .proto = NX_DNSTAP_TCP,
	    .client = client,
	    .query_us = 1700000000123456,
	    .response_us = 1700000000234567,
	    .action = "block",
	    .reason = "blocklist",
	    .rule = rule,
	    .source = "ads",
	    .msg = r,
	    .msg_len = rlen,
	};
}

/* ---- the ring ---- */

static void test_ring_round_trip(void **state)
{
	int64_t base = owner_bytes();
	struct nx_dnstap_ring r;
	assert_int_equal(nx_dnstap_ring_init(&r, NX_DNSTAP_RING_MIN), 0);
	assert_true(owner_bytes() >= base + NX_DNSTAP_RING_MIN);
	uint8_t buf[512];
	size_t len = reply(buf, 0x1234, 0x8180, "ads.example.com");
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(5353)};
	inet_pton(AF_INET6, "2001:db8::7", &a6.sin6_addr);
	struct nx_dnstap_event ev = event((struct sockaddr *)&a6, buf, len, "example.com");
	ev.cached = true;
	assert_int_equal(nx_dnstap_ring_put(&r, &ev), 0);
	assert_int_equal(r.used, nx_dnstap_rec_size(&ev));

	static uint8_t scratch[NX_DNSTAP_SCRATCH];
	struct nx_dnstap_event got;
	struct sockaddr_storage ss[2];
	assert_int_equal(nx_dnstap_ring_take(&r, scratch, sizeof(scratch), &got, ss),
			 nx_dnstap_rec_size(&ev));
	assert_int_equal(got.proto, NX_DNSTAP_TCP);
	assert_non_null(got.client);
	const struct sockaddr_in6 *g6 = (const struct sockaddr_in6 *)got.client;
	assert_int_equal(g6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(g6->sin6_port), 5353);
	assert_memory_equal(&g6->sin6_addr, &a6.sin6_addr, 16);
	assert_true(got.query_us == ev.query_us && got.response_us == ev.response_us);
	assert_string_equal(got.action, "block");
	assert_string_equal(got.reason, "blocklist");
	assert_string_equal(got.rule, "example.com");
	assert_string_equal(got.source, "ads");
	assert_true(got.cached);
	assert_int_equal(got.msg_len, len);
	assert_memory_equal(got.msg, buf, len);
	assert_int_equal(r.used, 0);
	assert_int_equal(nx_dnstap_ring_take(&r, scratch, sizeof(scratch), &got, ss), 0);

	assert_int_equal(got.kind, NX_DNSTAP_CLIENT);
	assert_null(got.server);

	/* a forwarder event: no client, the server's IPv4 address and port */
	struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(853)};
	inet_pton(AF_INET, "192.0.2.53", &s4.sin_addr);
	ev = event(NULL, buf, len, NULL);
	ev.kind = NX_DNSTAP_FWD_RESPONSE;
	ev.server = (struct sockaddr *)&s4;
	ev.action = ev.reason = ev.source = NULL;
	assert_int_equal(nx_dnstap_ring_put(&r, &ev), 0);
	assert_true(nx_dnstap_ring_take(&r, scratch, sizeof(scratch), &got, ss) > 0);
	assert_int_equal(got.kind, NX_DNSTAP_FWD_RESPONSE);
	assert_false(got.cached);
	assert_null(got.client);
	assert_non_null(got.server);
	const struct sockaddr_in *gs = (const struct sockaddr_in *)got.server;
	assert_true(gs->sin_family == AF_INET && ntohs(gs->sin_port) == 853);
	assert_memory_equal(&gs->sin_addr, &s4.sin_addr, 4);
	assert_memory_equal(got.msg, buf, len);

	/* no client address, no texts */
	ev = event(NULL, buf, len, NULL);
	ev.source = NULL;
	assert_int_equal(nx_dnstap_ring_put(&r, &ev), 0);
	assert_true(nx_dnstap_ring_take(&r, scratch, sizeof(scratch), &got, ss) > 0);
	assert_null(got.client);
	assert_string_equal(got.rule, "");
	assert_string_equal(got.source, "");
	assert_false(got.cached);
	nx_dnstap_ring_deinit(&r);
	assert_int_equal(owner_bytes(), base);
}

/* Events of varying size through a small ring many times over: FIFO order holds across the
 * wrap, and a full ring drops exactly the oldest. */
static void test_ring_wrap_and_drop_oldest(void **state)
{
	struct nx_dnstap_ring r;
	assert_int_equal(nx_dnstap_ring_init(&r, 4096), 0);
	static uint8_t scratch[NX_DNSTAP_SCRATCH];
	uint8_t buf[1024];
	struct sockaddr_in a4 = {.sin_family = AF_INET};
	unsigned next_put = 0, next_take = 0, dropped = 0;
	for (int round = 0; round < 2000; round++) {
		/* sizes 100..1000: records of 170..1070 bytes, a handful per ring */
		memset(buf, (int)(next_put & 0xff), sizeof(buf));
		a4.sin_port = htons((uint16_t)next_put);
		size_t len = 100 + (size_t)(next_put * 37) % 900;
		struct nx_dnstap_event ev = event((struct sockaddr *)&a4, buf, len, "x");
		int d = nx_dnstap_ring_put(&r, &ev);
		assert_true(d >= 0);
		dropped += (unsigned)d;
		next_take += (unsigned)d; /* the oldest went */
		next_put++;
		assert_true(r.used <= r.cap);
		if (round % 3 == 0) {
			struct nx_dnstap_event got;
			struct sockaddr_storage ss[2];
			size_t n = nx_dnstap_ring_take(&r, scratch, sizeof(scratch), &got, ss);
			assert_true(n > 0);
			unsigned id = ntohs(((const struct sockaddr_in *)got.client)->sin_port);
			assert_int_equal(id, next_take & 0xffff);
			assert_int_equal(got.msg_len, 100 + (size_t)(next_take * 37) % 900);
			assert_int_equal(got.msg[0], next_take & 0xff);
			assert_int_equal(got.msg[got.msg_len - 1], next_take & 0xff);
			next_take++;
		}
	}
	assert_true(dropped > 0);
	/* drain: the rest comes out in order, ending with the last put */
	struct nx_dnstap_event got;
	struct sockaddr_storage ss[2];
	while (nx_dnstap_ring_take(&r, scratch, sizeof(scratch), &got, ss) > 0) {
		assert_int_equal(ntohs(((const struct sockaddr_in *)got.client)->sin_port),
				 next_take & 0xffff);
		next_take++;
	}
	assert_int_equal(next_take, next_put);
	assert_int_equal(r.used, 0);
	nx_dnstap_ring_deinit(&r);
}

static void test_ring_refuses_what_never_fits(void **state)
{
	struct nx_dnstap_ring r;
	assert_int_equal(nx_dnstap_ring_init(&r, 1024), 0);
	uint8_t buf[600] = {0};
	struct nx_dnstap_event ev = event(NULL, buf, sizeof(buf), NULL);
	assert_int_equal(nx_dnstap_ring_put(&r, &ev), NX_ETRUNC);
	assert_int_equal(r.used, 0);
	ev.msg_len = 300;
	assert_int_equal(nx_dnstap_ring_put(&r, &ev), 0);
	nx_dnstap_ring_deinit(&r);
}

/* ---- the encoder ---- */

static Dnstap__Dnstap *unpack(const struct nx_dnstap_event *ev, bool response)
{
	static uint8_t out[NX_DNSTAP_MSG_MAX + 2048];
	const struct nx_dnstap_frame_ids ids = {"box-1", "nxdns test"};
	int n = nx_dnstap_encode(ev, &ids, response, out, sizeof(out));
	assert_true(n > 0);
	Dnstap__Dnstap *d = dnstap__dnstap__unpack(NULL, (size_t)n, out);
	assert_non_null(d);
	assert_int_equal(d->type, DNSTAP__DNSTAP__TYPE__MESSAGE);
	assert_non_null(d->message);
	assert_true(d->has_identity && d->identity.len == 5);
	assert_memory_equal(d->identity.data, "box-1", 5);
	assert_true(d->has_version);
	return d;
}

static void test_encode_query_and_response(void **state)
{
	uint8_t buf[512];
	/* QR AA TC RD RA AD CD + rcode 3: the rebuilt query keeps only RD and CD */
	size_t len =
	    reply(buf, 0xbeef, 0x8000 | 0x0400 | 0x0200 | 0x0100 | 0x0080 | 0x0020 | 0x0010 | 3,
		  "ads.example.com");
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(40000)};
	inet_pton(AF_INET, "192.168.1.20", &a4.sin_addr);
	struct nx_dnstap_event ev = event((struct sockaddr *)&a4, buf, len, "example.com");
	struct sockaddr_in l4 = {.sin_family = AF_INET, .sin_port = htons(53)};
	inet_pton(AF_INET, "192.168.1.2", &l4.sin_addr);
	ev.server = (struct sockaddr *)&l4;

	Dnstap__Dnstap *d = unpack(&ev, false);
	Dnstap__Message *m = d->message;
	assert_int_equal(m->type, DNSTAP__MESSAGE__TYPE__CLIENT_QUERY);
	assert_true(m->has_response_address && m->response_address.len == 4);
	assert_memory_equal(m->response_address.data, &l4.sin_addr, 4);
	assert_true(m->has_response_port && m->response_port == 53);
	assert_true(m->has_socket_family && m->socket_family == DNSTAP__SOCKET_FAMILY__INET);
	assert_true(m->has_socket_protocol && m->socket_protocol == DNSTAP__SOCKET_PROTOCOL__TCP);
	assert_true(m->has_query_address && m->query_address.len == 4);
	assert_memory_equal(m->query_address.data, &a4.sin_addr, 4);
	assert_true(m->has_query_port && m->query_port == 40000);
	assert_true(m->query_time_sec == 1700000000 && m->query_time_nsec == 123456000);
	assert_false(m->has_response_time_sec);
	assert_false(m->has_response_message);
	assert_false(d->has_extra);
	assert_true(m->has_query_message);
	const uint8_t want_hdr[12] = {0xbe, 0xef, 0x01, 0x10, 0, 1, 0, 0, 0, 0, 0, 0};
	assert_memory_equal(m->query_message.data, want_hdr, 12);
	/* header + question exactly: the answer record is not in the rebuilt query */
	assert_int_equal(m->query_message.len, 12 + 17 + 4);
	assert_memory_equal(m->query_message.data + 12, buf + 12, 17 + 4);
	dnstap__dnstap__free_unpacked(d, NULL);

	d = unpack(&ev, true);
	m = d->message;
	assert_int_equal(m->type, DNSTAP__MESSAGE__TYPE__CLIENT_RESPONSE);
	assert_true(m->response_time_sec == 1700000000 && m->response_time_nsec == 234567000);
	assert_true(m->query_time_sec == 1700000000);
	assert_true(m->has_response_message && m->response_message.len == len);
	assert_memory_equal(m->response_message.data, buf, len);
	assert_false(m->has_query_message);
	assert_true(m->has_response_address && m->has_response_port && m->response_port == 53);
	assert_true(d->has_extra);
	const char *want = "nxdns action=block reason=blocklist rule=example.com source=ads";
	assert_int_equal(d->extra.len, strlen(want));
	assert_memory_equal(d->extra.data, want, strlen(want));
	dnstap__dnstap__free_unpacked(d, NULL);

	/* nothing decided, cached, IPv6, DoH */
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
	inet_pton(AF_INET6, "fd00::1", &a6.sin6_addr);
	ev = event((struct sockaddr *)&a6, buf, len, "");
	ev.proto = NX_DNSTAP_DOH;
	ev.action = "none";
	ev.reason = NULL;
	ev.source = "";
	ev.cached = true;
	d = unpack(&ev, true);
	m = d->message;
	assert_true(m->socket_family == DNSTAP__SOCKET_FAMILY__INET6 &&
		    m->socket_protocol == DNSTAP__SOCKET_PROTOCOL__DOH);
	assert_true(m->query_address.len == 16 && m->query_port == 443);
	want = "nxdns action=none cached=true";
	assert_int_equal(d->extra.len, strlen(want));
	assert_memory_equal(d->extra.data, want, strlen(want));
	dnstap__dnstap__free_unpacked(d, NULL);
}

/* FORWARDER_QUERY: our query as sent; FORWARDER_RESPONSE: the answer, both times; the
 * upstream as the responder, nxdns's own end not given; no decision in extra. */
static void test_encode_forwarder(void **state)
{
	uint8_t buf[512];
	size_t len = reply(buf, 0x4242, 0x8180, "fwd.example");
	struct sockaddr_in6 up = {.sin6_family = AF_INET6, .sin6_port = htons(5300)};
	inet_pton(AF_INET6, "2001:db8::53", &up.sin6_addr);
	struct nx_dnstap_event ev = {
	    .kind = NX_DNSTAP_FWD_QUERY,
	    .proto = NX_DNSTAP_UDP,
	    .server = (struct sockaddr *)&up,
	    .query_us = 1700000000000001,
	    .response_us = 1700000000000001,
	    .msg = buf,
	    .msg_len = len,
	};
	assert_int_equal(nx_dnstap_kind_frames(ev.kind), 1);
	for (int response = 0; response <= 1; response++) { /* ignored: the kind decides */
		Dnstap__Dnstap *d = unpack(&ev, response);
		Dnstap__Message *m = d->message;
		assert_int_equal(m->type, DNSTAP__MESSAGE__TYPE__FORWARDER_QUERY);
		assert_true(m->socket_family == DNSTAP__SOCKET_FAMILY__INET6 &&
			    m->socket_protocol == DNSTAP__SOCKET_PROTOCOL__UDP);
		assert_false(m->has_query_address || m->has_query_port);
		assert_true(m->has_response_address && m->response_address.len == 16);
		assert_memory_equal(m->response_address.data, &up.sin6_addr, 16);
		assert_true(m->has_response_port && m->response_port == 5300);
		assert_true(m->has_query_message && m->query_message.len == len);
		assert_memory_equal(m->query_message.data, buf, len);
		assert_false(m->has_response_message || m->has_response_time_sec || d->has_extra);
		assert_true(m->query_time_sec == 1700000000 && m->query_time_nsec == 1000);
		dnstap__dnstap__free_unpacked(d, NULL);
	}
	ev.kind = NX_DNSTAP_FWD_RESPONSE;
	ev.proto = NX_DNSTAP_DOT;
	ev.response_us = 1700000000250000;
	Dnstap__Dnstap *d = unpack(&ev, false);
	Dnstap__Message *m = d->message;
	assert_int_equal(m->type, DNSTAP__MESSAGE__TYPE__FORWARDER_RESPONSE);
	assert_true(m->socket_protocol == DNSTAP__SOCKET_PROTOCOL__DOT);
	assert_true(m->has_response_message && m->response_message.len == len);
	assert_memory_equal(m->response_message.data, buf, len);
	assert_false(m->has_query_message || d->has_extra);
	assert_true(m->query_time_sec == 1700000000 && m->query_time_nsec == 1000);
	assert_true(m->response_time_sec == 1700000000 && m->response_time_nsec == 250000000);
	dnstap__dnstap__free_unpacked(d, NULL);
}

static void test_encode_limits(void **state)
{
	uint8_t buf[512], out[64];
	size_t len = reply(buf, 1, 0x8180, "a.example");
	struct nx_dnstap_event ev = event(NULL, buf, len, NULL);
	assert_int_equal(nx_dnstap_encode(&ev, NULL, true, out, sizeof(out)), NX_ETRUNC);
	/* a reply without a readable question: no query_message, the frame still goes */
	uint8_t q[600];
	assert_int_equal(nx_dnstap_query_from_reply(buf, 11, q, sizeof(q)), 0);
	const uint8_t noq[12] = {0, 1, 0x81, 0x82, 0, 0, 0, 0, 0, 0, 0, 0};
	assert_int_equal(nx_dnstap_query_from_reply(noq, sizeof(noq), q, sizeof(q)), 0);
	uint8_t bad[40];
	memcpy(bad, buf, sizeof(bad));
	bad[12] = 63; /* a label running past the end */
	assert_int_equal(nx_dnstap_query_from_reply(bad, 20, q, sizeof(q)), 0);
	assert_int_equal(nx_dnstap_query_from_reply(buf, len, q, 20), NX_ETRUNC);
	ev.msg = noq;
	ev.msg_len = sizeof(noq);
	static uint8_t big[4096];
	int n = nx_dnstap_encode(&ev, NULL, false, big, sizeof(big));
	assert_true(n > 0);
	Dnstap__Dnstap *d = dnstap__dnstap__unpack(NULL, (size_t)n, big);
	assert_non_null(d);
	assert_false(d->message->has_query_message);
	assert_false(d->has_identity);
	dnstap__dnstap__free_unpacked(d, NULL);
}

/* ---- the writer, no collector ---- */

static void test_writer_without_collector(void **state)
{
	int64_t base = owner_bytes();
	char path[64];
	snprintf(path, sizeof(path), "/tmp/nx-dnstap-none-%d.sock", (int)getpid());
	unlink(path);
	struct nx_dnstap_params p;
	nx_dnstap_params_default(&p);
	struct nx_dnstap *t = NULL;
	assert_int_equal(nx_dnstap_new(&p, &t), -EINVAL); /* no destination */
	struct sockaddr_in a4 = {.sin_family = AF_INET};
	p.socket_path = path;
	p.tcp = (struct sockaddr *)&a4;
	p.tcp_len = sizeof(a4);
	assert_int_equal(nx_dnstap_new(&p, &t), -EINVAL); /* both */
	p.tcp = NULL;
	p.producers = 2;
	p.queue_bytes = 1; /* raised to the per-ring minimum */
	p.identity = "box";
	assert_int_equal(nx_dnstap_new(&p, &t), 0);
	assert_true(owner_bytes() >= base + 2 * NX_DNSTAP_RING_MIN);
	uint64_t rc0 = nx_stat_read(NX_STAT_DNSTAP_RECONNECTS);
	uint64_t full0 = nx_stat_read(NX_STAT_DNSTAP_DROP_FULL);
	uint64_t big0 = nx_stat_read(NX_STAT_DNSTAP_DROP_LARGE);
	assert_int_equal(nx_dnstap_start(t), 0);

	uint8_t buf[1500];
	size_t len = reply(buf, 7, 0x8180, "x.example");
	len = 1400; /* a large answer: ~1.5 KiB per event */
	struct nx_dnstap_event ev = event(NULL, buf, len, "x.example");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 2000; i++) {
		nx_dnstap_push(t, (unsigned)i % 2, &ev);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(took < 1.0); /* pushes never wait for the (absent) collector */
	/* 2 rings of ~258 KiB hold ~350 of these events in all: the rest were dropped */
	uint64_t full = nx_stat_read(NX_STAT_DNSTAP_DROP_FULL) - full0;
	assert_true(full > 1000 && full < 2000);
	ev.msg_len = NX_DNSTAP_MSG_MAX + 1;
	nx_dnstap_push(t, 0, &ev);
	assert_int_equal(nx_stat_read(NX_STAT_DNSTAP_DROP_LARGE) - big0, 1);

	for (int i = 0; i < 100 && nx_stat_read(NX_STAT_DNSTAP_RECONNECTS) - rc0 < 2; i++) {
		usleep(20000);
	}
	assert_true(nx_stat_read(NX_STAT_DNSTAP_RECONNECTS) - rc0 >= 2); /* retried with backoff */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	nx_dnstap_stop(t);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(took < 1.0); /* stop interrupts the backoff */
	nx_dnstap_stop(t);	 /* idempotent */
	/* retarget: refused without a destination (nothing changes), taken while stopped; the
	 * writer starts again after a stop (a reload turning dnstap off, then on) */
	struct nx_dnstap_params q;
	nx_dnstap_params_default(&q);
	assert_int_equal(nx_dnstap_retarget(t, &q), -EINVAL);
	struct sockaddr_in6 c6 = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
	inet_pton(AF_INET6, "::1", &c6.sin6_addr);
	q.tcp = (struct sockaddr *)&c6;
	q.tcp_len = sizeof(c6);
	q.identity = "box-2";
	assert_int_equal(nx_dnstap_retarget(t, &q), 0);
	assert_int_equal(nx_dnstap_retarget(t, &q), 0); /* the same again: a no-op */
	rc0 = nx_stat_read(NX_STAT_DNSTAP_RECONNECTS);
	assert_int_equal(nx_dnstap_start(t), 0);
	for (int i = 0; i < 100 && nx_stat_read(NX_STAT_DNSTAP_RECONNECTS) == rc0; i++) {
		usleep(20000); /* nothing listens on [::1]:9: refused, counted */
	}
	assert_true(nx_stat_read(NX_STAT_DNSTAP_RECONNECTS) > rc0);
	assert_int_equal(nx_dnstap_retarget(t, &p), 0); /* back to the socket, running */
	nx_dnstap_free(t);
	nx_dnstap_free(NULL);
	assert_int_equal(owner_bytes(), base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring_round_trip),
	    cmocka_unit_test(test_ring_wrap_and_drop_oldest),
	    cmocka_unit_test(test_ring_refuses_what_never_fits),
	    cmocka_unit_test(test_encode_query_and_response),
	    cmocka_unit_test(test_encode_forwarder),
	    cmocka_unit_test(test_encode_limits),
	    cmocka_unit_test(test_writer_without_collector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

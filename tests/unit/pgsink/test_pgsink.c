/*
 * pgsink unit tests: the COPY line of each kind of answer in Blocky's vocabulary (resolved,
 * cached, blocked, local, special), COPY escaping, privacy levels, an IPv6 client, a buffer too
 * small; the registrable domain; a missing libpq refused with its reason; the rings dropping
 * their oldest (counted) and the ledger balancing; the writer with no database counting
 * reconnects, stopping promptly and counting what it could not send.
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "filter/result.h"
#include "pgsink/pgsink.h"
#include "querylog/querylog.h"

static int64_t owner_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_pgsink_queue].bytes;
}

static struct nx_qlog_rec rec(const char *name)
{
	struct nx_qlog_rec r;
	memset(&r, 0, sizeof(r));
	r.ts_ms = 1764660645123; /* 2025-12-02 07:30:45.123 UTC */
	r.duration_us = 12345;
	r.family = AF_INET;
	inet_pton(AF_INET, "192.168.1.20", r.client);
	r.proto = NX_QLOG_PROTO_UDP;
	r.qtype = 1;
	r.upstream = -1;
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.answer, sizeof(r.answer), "A 192.0.2.1");
	return r;
}

static const char *line(const struct nx_qlog_rec *r, const char *upstream, unsigned privacy)
{
	static char buf[NX_PGSINK_ROW_MAX];
	struct nx_pgsink_row_ctx ctx = {
	    .hostname = "nx-a", .upstream = upstream, .privacy = privacy};
	int n = nx_pgsink_row(r, &ctx, buf, sizeof(buf));
	assert_true(n >= 0);
	assert_int_equal((size_t)n, strlen(buf));
	return buf;
}

static void test_row_vocabulary(void **state)
{
	struct nx_qlog_rec r = rec("www.example.com");
	assert_string_equal(line(&r, "192.0.2.53:53", 0),
			    "2025-12-02 07:30:45.123+00\t192.168.1.20\t192.168.1.20\t12\t"
			    "RESOLVED (192.0.2.53:53)\tRESOLVED\tA\twww.example.com\texample.com\t"
			    "A (192.0.2.1)\tNOERROR\tnx-a\t\\N\t\\N\tudp\t192.0.2.53:53\t\\N\n");
	r.cached = 1;
	assert_string_equal(
	    line(&r, "", 0),
	    "2025-12-02 07:30:45.123+00\t192.168.1.20\t192.168.1.20\t12\tCACHED\t"
	    "CACHED\tA\twww.example.com\texample.com\tA (192.0.2.1)\tNOERROR\tnx-a\t"
	    "\\N\t\\N\tudp\t\\N\t\\N\n");
	r = rec("ads.tracker.co.uk");
	r.action = NX_QLOG_ACT_BLOCK;
	r.reason = NX_FILTER_R_blocklist_wildcard;
	r.proto = NX_QLOG_PROTO_DOH;
	r.rcode = 3;
	r.answer[0] = 0;
	snprintf(r.matched, sizeof(r.matched), "tracker.co.uk");
	snprintf(r.source, sizeof(r.source), "oisd");
	snprintf(r.client_id, sizeof(r.client_id), "phone");
	assert_string_equal(line(&r, "", 0),
			    "2025-12-02 07:30:45.123+00\t192.168.1.20\tphone\t12\tBLOCKED (oisd)\t"
			    "BLOCKED\tA\tads.tracker.co.uk\ttracker.co.uk\t\tNXDOMAIN\tnx-a\t"
			    "tracker.co.uk\toisd\tdoh\t\\N\tblocklist_wildcard\n");
	r = rec("nas.lan");
	r.action = NX_QLOG_ACT_LOCAL;
	r.reason = NX_FILTER_R_local_record;
	assert_non_null(strstr(line(&r, "", 0), "\tCUSTOM DNS\tCUSTOMDNS\t"));
	r = rec("localhost");
	r.action = NX_QLOG_ACT_LOCAL;
	r.reason = NX_FILTER_R_special_localhost;
	r.qtype = 28;
	r.rcode = 5;
	const char *l = line(&r, "", 0);
	assert_non_null(strstr(l, "\tSPECIAL\tSPECIAL\tAAAA\tlocalhost\t\t"));
	assert_non_null(strstr(l, "\tREFUSED\t"));
}

static void test_row_escapes_privacy(void **state)
{
	struct nx_qlog_rec r = rec("a.example");
	r.action = NX_QLOG_ACT_BLOCK;
	r.reason = NX_FILTER_R_user_deny;
	snprintf(r.source, sizeof(r.source), "x\ty\\z\nw\xc3\xa9");
	const char *l = line(&r, "", 0);
	assert_non_null(strstr(l, "\tBLOCKED (x\\ty\\\\z\\nw\?\?)\t"));
	assert_non_null(strstr(l, "\tx\\ty\\\\z\\nw\?\?\tudp\t"));
	/* 1: names and user-rule text hidden; clients kept */
	snprintf(r.matched, sizeof(r.matched), "a.example");
	l = line(&r, "", 1);
	assert_non_null(strstr(l, "\t192.168.1.20\t192.168.1.20\t12\tBLOCKED (hidden)\tBLOCKED\tA\t"
				  "hidden\thidden\thidden\tNOERROR\tnx-a\thidden\thidden\tudp\t"));
	/* 2: clients too; 3: no row */
	l = line(&r, "", 2);
	assert_non_null(strstr(l, "+00\thidden\thidden\t12\t"));
	char buf[NX_PGSINK_ROW_MAX];
	struct nx_pgsink_row_ctx ctx = {.hostname = "h", .privacy = 3};
	assert_int_equal(nx_pgsink_row(&r, &ctx, buf, sizeof(buf)), 0);
	ctx.privacy = 0;
	assert_int_equal(nx_pgsink_row(&r, &ctx, buf, 40), NX_ETRUNC);
	/* IPv6 client */
	r = rec("b.example");
	r.family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::7", r.client);
	r.proto = NX_QLOG_PROTO_DOT;
	l = line(&r, "", 0);
	assert_non_null(strstr(l, "+00\t2001:db8::7\t2001:db8::7\t"));
	assert_non_null(strstr(l, "\tdot\t"));
}

static void test_etld1(void **state)
{
	static const char *const cases[][2] = {
	    {"www.example.com", "example.com"},
	    {"example.com", "example.com"},
	    {"a.b.c.example.org", "example.org"},
	    {"com", ""},
	    {"www.bbc.co.uk", "bbc.co.uk"},
	    {"bbc.co.uk", "bbc.co.uk"},
	    {"co.uk", ""},
	    {"x.y.example.com.au", "example.com.au"},
	    {"foo.example.co", "example.co"},
	    {"www.example.com.", "example.com"},
	    {"cdn.net.example.de", "example.de"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[256];
		nx_pgsink_etld1(cases[i][0], out, sizeof(out));
		if (strcmp(out, cases[i][1])) {
			fail_msg("%s: '%s', want '%s'", cases[i][0], out, cases[i][1]);
		}
	}
}

static void test_no_libpq(void **state)
{
	int64_t b0 = owner_bytes();
	struct nx_pgsink_params p;
	nx_pgsink_params_default(&p);
	p.dsn = "host=127.0.0.1";
	p.soname = "libnxdns-no-such-pq.so.5";
	struct nx_pgsink *s = (void *)1;
	char why[256];
	assert_int_equal(nx_pgsink_new(&p, &s, why, sizeof(why)), -ENOENT);
	assert_null(s);
	assert_non_null(strstr(why, "cannot load libnxdns-no-such-pq.so.5"));
	p.soname = NULL;
	p.dsn = "";
	assert_int_equal(nx_pgsink_new(&p, &s, why, sizeof(why)), -EINVAL);
	assert_int_equal(owner_bytes(), b0);
	nx_pgsink_free(NULL);
}

/* A loopback TCP port nothing listens on. */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	socklen_t len = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &len);
	close(fd);
	return ntohs(a.sin_port);
}

static void test_rings_and_writer_without_database(void **state)
{
	if (access("/usr/lib/x86_64-linux-gnu/libpq.so.5", R_OK) &&
	    access("/usr/lib/aarch64-linux-gnu/libpq.so.5", R_OK)) {
		skip();
	}
	int64_t b0 = owner_bytes();
	char dsn[128];
	snprintf(dsn, sizeof(dsn), "host=127.0.0.1 port=%d dbname=x connect_timeout=2",
		 closed_port());
	struct nx_pgsink_params p;
	nx_pgsink_params_default(&p);
	p.dsn = dsn;
	p.hostname = "t";
	p.producers = 2;
	p.queue_size = 64; /* 32 a ring */
	p.batch_size = 10;
	p.flush_ms = 10;
	struct nx_pgsink *s;
	char why[256];
	assert_int_equal(nx_pgsink_new(&p, &s, why, sizeof(why)), 0);
	assert_true(owner_bytes() - b0 >= 64 * (int64_t)sizeof(struct nx_qlog_rec));
	uint64_t full0 = nx_stat_read(NX_STAT_PGSINK_DROP_FULL);
	uint64_t rc0 = nx_stat_read(NX_STAT_PGSINK_RECONNECTS);
	uint64_t down0 = nx_stat_read(NX_STAT_PGSINK_DROP_SHUTDOWN);
	struct nx_qlog_rec r = rec("a.example");
	for (int i = 0; i < 100; i++) {
		nx_pgsink_push(s, 0, &r); /* not started: nothing drains */
	}
	nx_pgsink_push(s, 1, &r);
	assert_int_equal(nx_stat_read(NX_STAT_PGSINK_DROP_FULL) - full0, 100 - 32);
	assert_int_equal(nx_pgsink_start(s), 0);
	for (int i = 0; i < 200 && nx_stat_read(NX_STAT_PGSINK_RECONNECTS) - rc0 < 2; i++) {
		usleep(20000);
	}
	assert_true(nx_stat_read(NX_STAT_PGSINK_RECONNECTS) - rc0 >= 2); /* retried with backoff */
	nx_pgsink_push(s, 1, &r);					 /* never blocks */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	nx_pgsink_stop(s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs < 5.0); /* at most one connect attempt in flight */
	/* 32 + 1 + 1 queued, none sent: counted at shutdown */
	assert_int_equal(nx_stat_read(NX_STAT_PGSINK_DROP_SHUTDOWN) - down0, 34);
	nx_pgsink_stop(s); /* idempotent */
	nx_pgsink_free(s);
	assert_int_equal(owner_bytes(), b0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_row_vocabulary),
	    cmocka_unit_test(test_row_escapes_privacy),
	    cmocka_unit_test(test_etld1),
	    cmocka_unit_test(test_no_libpq),
	    cmocka_unit_test(test_rings_and_writer_without_database),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * guard unit tests: the rate-limit table (GCRA limits, refill, prefixes, sets and evictions,
 * the once-a-minute log verdict, exemptions, concurrency, ledger balance), the private-address
 * classifier and the rebinding rewriter (mixed answers, emptied answers with EDE, HTTPS hints,
 * compression pointers into removed records, rebinding_allow). Time is driven by hand.
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
#include <pthread.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "conf/conf.h"
#include "dns/msg.h"
#include "guard/guard.h"

#define SEC 1000000ull
#define T0 (1000 * SEC) /* an arbitrary monotonic start */

static int64_t owner_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_rate_limit].bytes;
}

static const uint8_t *v4(const char *s, uint8_t buf[16])
{
	assert_int_equal(inet_pton(AF_INET, s, buf), 1);
	return buf;
}

static const uint8_t *v6(const char *s, uint8_t buf[16])
{
	assert_int_equal(inet_pton(AF_INET6, s, buf), 1);
	return buf;
}

/* ---- rate limit ---- */

static void rl_burst_then_rate(void **state)
{
	int64_t before = owner_bytes();
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(42, &t), 0);
	assert_int_equal(owner_bytes() - before, (int64_t)nx_guard_rl_bytes());
	struct nx_guard_rl_params p = {.qps = 10, .burst = 5, .ipv4_prefix = 32, .ipv6_prefix = 56};
	uint8_t a[16];
	v4("192.0.2.7", a);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0), NX_GUARD_RL_PASS);
	}
	/* the sixth at the same instant is over, and the first over-limit is the one to log */
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0), NX_GUARD_RL_OVER_LOG);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0), NX_GUARD_RL_OVER);
	/* 10 qps: one more every 100 ms, not before */
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0 + 99000), NX_GUARD_RL_OVER);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0 + 100000), NX_GUARD_RL_PASS);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0 + 100000), NX_GUARD_RL_OVER);
	/* idle for the whole burst's worth: the full burst again */
	uint64_t later = T0 + 2 * SEC;
	for (int i = 0; i < 5; i++) {
		assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, later), NX_GUARD_RL_PASS);
	}
	assert_int_not_equal(nx_guard_rl_check(t, &p, AF_INET, a, later), NX_GUARD_RL_PASS);
	/* another client is untouched */
	uint8_t b[16];
	v4("192.0.2.8", b);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, b, later), NX_GUARD_RL_PASS);
	nx_guard_rl_free(t);
	assert_int_equal(owner_bytes(), before);
}

static void rl_sustained_rate(void **state)
{
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(1, &t), 0);
	struct nx_guard_rl_params p = {
	    .qps = 20, .burst = 10, .ipv4_prefix = 32, .ipv6_prefix = 56};
	uint8_t a[16];
	v4("198.51.100.1", a);
	/* 100 queries per second for 10 s: 10 (burst) + 20 per second pass */
	unsigned passed = 0;
	for (uint64_t i = 0; i < 1000; i++) {
		passed += nx_guard_rl_check(t, &p, AF_INET, a, T0 + i * 10000) == NX_GUARD_RL_PASS;
	}
	assert_in_range(passed, 10 + 20 * 10 - 2, 10 + 20 * 10 + 2);
	nx_guard_rl_free(t);
}

static void rl_prefixes(void **state)
{
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(7, &t), 0);
	struct nx_guard_rl_params p = {.qps = 1, .burst = 2, .ipv4_prefix = 24, .ipv6_prefix = 56};
	uint8_t a[16], b[16], c[16];
	v4("203.0.113.1", a);
	v4("203.0.113.200", b); /* same /24 */
	v4("203.0.114.1", c);	/* another */
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0), NX_GUARD_RL_PASS);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, b, T0), NX_GUARD_RL_PASS);
	assert_int_not_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0), NX_GUARD_RL_PASS);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, c, T0), NX_GUARD_RL_PASS);
	/* IPv6: temporary addresses inside one /56 share the limit; the next /56 does not */
	v6("2001:db8:0:1::1", a);
	v6("2001:db8:0:ff:abcd::9", b);
	v6("2001:db8:0:100::1", c);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET6, a, T0), NX_GUARD_RL_PASS);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET6, b, T0), NX_GUARD_RL_PASS);
	assert_int_not_equal(nx_guard_rl_check(t, &p, AF_INET6, b, T0), NX_GUARD_RL_PASS);
	assert_int_equal(nx_guard_rl_check(t, &p, AF_INET6, c, T0), NX_GUARD_RL_PASS);
	char text[64];
	nx_guard_rl_prefix_text(&p, AF_INET6, b, text, sizeof(text));
	assert_string_equal(text, "2001:db8::/56");
	v4("203.0.113.200", b);
	nx_guard_rl_prefix_text(&p, AF_INET, b, text, sizeof(text));
	assert_string_equal(text, "203.0.113.0/24");
	/* qps 0 is off */
	struct nx_guard_rl_params off = p;
	off.qps = 0;
	for (int i = 0; i < 100; i++) {
		assert_int_equal(nx_guard_rl_check(t, &off, AF_INET, a, T0), NX_GUARD_RL_PASS);
	}
	nx_guard_rl_free(t);
}

static void rl_log_once_a_minute(void **state)
{
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(3, &t), 0);
	struct nx_guard_rl_params p = {.qps = 1, .burst = 1, .ipv4_prefix = 32, .ipv6_prefix = 56};
	uint8_t a[16];
	v4("192.0.2.99", a);
	unsigned logs = 0;
	/* 10 queries a second for 3 minutes: over the limit all along, logged once a minute */
	for (uint64_t i = 0; i < 1800; i++) {
		logs +=
		    nx_guard_rl_check(t, &p, AF_INET, a, T0 + i * 100000) == NX_GUARD_RL_OVER_LOG;
	}
	assert_int_equal(logs, 3); /* at 0 s, 60 s and 120 s */
	/* not once per calendar minute: two moments either side of a minute boundary log once */
	nx_guard_rl_free(t);
	assert_int_equal(nx_guard_rl_new(4, &t), 0);
	uint64_t edge = 60 * SEC * 1000; /* a whole minute of the clock */
	logs = 0;
	for (uint64_t i = 0; i < 20; i++) {
		logs += nx_guard_rl_check(t, &p, AF_INET, a, edge - SEC / 2 + i * SEC / 20) ==
			NX_GUARD_RL_OVER_LOG;
	}
	assert_int_equal(logs, 1);
	nx_guard_rl_free(t);
}

/* A flood of distinct sources: the table stays the same size, live entries are recycled and
 * counted, and a client seen again after the flood starts fresh (limited less, never more). */
static void rl_flood_evicts(void **state)
{
	int64_t before = owner_bytes();
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(99, &t), 0);
	int64_t with_table = owner_bytes();
	struct nx_guard_rl_params p = {.qps = 1, .burst = 1, .ipv4_prefix = 32, .ipv6_prefix = 56};
	uint64_t ev0 = nx_stat_read(NX_STAT_RL_EVICTED);
	uint8_t a[16];
	for (uint32_t i = 0; i < 4 * NX_CONF_RATE_LIMIT_SLOTS; i++) {
		uint32_t ip = htonl(0x0a000000u + i);
		memcpy(a, &ip, 4);
		assert_int_equal(nx_guard_rl_check(t, &p, AF_INET, a, T0), NX_GUARD_RL_PASS);
	}
	assert_int_equal(owner_bytes(), with_table);
	uint64_t ev = nx_stat_read(NX_STAT_RL_EVICTED) - ev0;
	assert_true(ev >= 3 * NX_CONF_RATE_LIMIT_SLOTS - NX_CONF_RATE_LIMIT_SLOTS / 8);
	assert_true(ev <= 3 * NX_CONF_RATE_LIMIT_SLOTS);
	/* entries whose debt is paid are reused without counting */
	uint64_t ev1 = nx_stat_read(NX_STAT_RL_EVICTED);
	for (uint32_t i = 0; i < 4 * NX_CONF_RATE_LIMIT_SLOTS; i++) {
		uint32_t ip = htonl(0x0b000000u + i);
		memcpy(a, &ip, 4);
		(void)nx_guard_rl_check(t, &p, AF_INET, a, T0 + 10 * SEC);
	}
	assert_true(nx_stat_read(NX_STAT_RL_EVICTED) - ev1 <= 3 * NX_CONF_RATE_LIMIT_SLOTS);
	assert_true(nx_stat_read(NX_STAT_RL_EVICTED) - ev1 >= 2 * NX_CONF_RATE_LIMIT_SLOTS);
	nx_guard_rl_free(t);
	assert_int_equal(owner_bytes(), before);
}

static void rl_no_memory(void **state)
{
	struct nx_guard_rl *t = NULL;
	nx_mem_fail_after(0);
	assert_int_equal(nx_guard_rl_new(1, &t), -ENOMEM);
	nx_mem_fail_after(-1);
	assert_null(t);
	nx_guard_rl_free(NULL);
}

static void rl_admit_exempt(void **state)
{
	const char *yaml = "access:\n"
			   "  rate_limit: {qps: 1, burst: 2}\n"
			   "  rate_limit_exempt: [\"192.0.2.0/28\", \"2001:db8::1\"]\n";
	struct nx_conf *c;
	char err[256];
	assert_int_equal(nx_conf_load_string("t", yaml, strlen(yaml), &c, err, sizeof(err)), 0);
	assert_int_equal(c->rl_qps, 1);
	assert_int_equal(c->rl_burst, 2);
	assert_int_equal(c->rl_ipv4_prefix, 32);
	assert_int_equal(c->rl_ipv6_prefix, 56);
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(5, &t), 0);
	struct sockaddr_in in = {.sin_family = AF_INET};
	inet_pton(AF_INET, "192.0.2.5", &in.sin_addr);
	for (int i = 0; i < 50; i++) {
		assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0));
	}
	/* outside the exempt /28, and the same address mapped into IPv6, are limited */
	inet_pton(AF_INET, "192.0.2.16", &in.sin_addr);
	assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0));
	struct sockaddr_in6 m6 = {.sin6_family = AF_INET6};
	inet_pton(AF_INET6, "::ffff:192.0.2.16", &m6.sin6_addr);
	assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&m6, T0));
	assert_false(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0));
	assert_false(nx_guard_rl_admit(t, c, (struct sockaddr *)&m6, T0));
	inet_pton(AF_INET6, "::ffff:192.0.2.3", &m6.sin6_addr); /* exempt through the mapping */
	for (int i = 0; i < 10; i++) {
		assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&m6, T0));
	}
	inet_pton(AF_INET6, "2001:db8::1", &m6.sin6_addr);
	for (int i = 0; i < 10; i++) {
		assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&m6, T0));
	}
	/* no table (qps turned on by a reload that could not allocate): everything passes */
	inet_pton(AF_INET, "192.0.2.16", &in.sin_addr);
	assert_true(nx_guard_rl_admit(NULL, c, (struct sockaddr *)&in, T0));
	nx_guard_rl_free(t);
	nx_conf_free(c);
}

/* Thousands of prefixes over their limit at once must not become thousands of log lines: 60
 * at once, then one a second, the rest counted. */
static void rl_log_budget(void **state)
{
	const char *yaml = "access:\n  rate_limit: {qps: 1, burst: 1}\n";
	struct nx_conf *c;
	char err[256];
	assert_int_equal(nx_conf_load_string("t", yaml, strlen(yaml), &c, err, sizeof(err)), 0);
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(8, &t), 0);
	uint64_t s0 = nx_stat_read(NX_STAT_RL_LOG_SUPPRESSED);
	struct sockaddr_in in = {.sin_family = AF_INET};
	for (uint32_t i = 0; i < 100; i++) {
		in.sin_addr.s_addr = htonl(0xc6336400u + i); /* 198.51.100.i */
		assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0));
		assert_false(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0));
	}
	assert_int_equal(nx_stat_read(NX_STAT_RL_LOG_SUPPRESSED) - s0, 40);
	/* a second later the budget has one line again */
	in.sin_addr.s_addr = htonl(0xc6336500u); /* 198.51.101.0 */
	assert_true(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0 + SEC));
	assert_false(nx_guard_rl_admit(t, c, (struct sockaddr *)&in, T0 + SEC));
	assert_int_equal(nx_stat_read(NX_STAT_RL_LOG_SUPPRESSED) - s0, 40);
	nx_guard_rl_free(t);
	nx_conf_free(c);
}

static void rl_config_errors(void **state)
{
	static const char *const bad[] = {
	    "access:\n  rate_limit: {ipv4_prefix: 33}\n",
	    "access:\n  rate_limit: {ipv6_prefix: 8}\n",
	    "access:\n  rate_limit: {burst: 0}\n",
	    "access:\n  rate_limit: {qps: -1}\n",
	    "access:\n  rate_limit: {rate: 5}\n",
	    "access:\n  rate_limit_exempt: [\"10.0.0.1/8\"]\n",
	    "filter:\n  rebinding_allow: [\"bad name!\"]\n",
	    "filter:\n  rebinding_allow: [\".\"]\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct nx_conf *c = NULL;
		char err[256] = "";
		assert_int_equal(
		    nx_conf_load_string("t", bad[i], strlen(bad[i]), &c, err, sizeof(err)),
		    NX_ECONFIG);
		assert_true(strncmp(err, "t:", 2) == 0);
	}
	struct nx_conf *c;
	char err[256];
	assert_int_equal(nx_conf_load_string("t", "", 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c->rl_qps, 20);
	assert_int_equal(c->rl_burst, 1000);
	assert_true(c->rebinding_protection);
	assert_int_equal(c->n_rebinding_allow, 2);
	assert_string_equal(c->rebinding_allow[0], "plex.direct");
	nx_conf_free(c);
}

struct mt_arg {
	struct nx_guard_rl *t;
	unsigned passed;
};

static void *mt_run(void *ud)
{
	struct mt_arg *a = ud;
	struct nx_guard_rl_params p = {
	    .qps = 10, .burst = 100, .ipv4_prefix = 32, .ipv6_prefix = 56};
	uint8_t addr[16];
	v4("192.0.2.1", addr);
	for (int i = 0; i < 10000; i++) {
		a->passed += nx_guard_rl_check(a->t, &p, AF_INET, addr, T0) == NX_GUARD_RL_PASS;
	}
	return NULL;
}

/* Four threads hammering one client at one instant: exactly the burst passes (the CAS loop
 * loses no update and grants no extra). */
static void rl_threads_share_one_limit(void **state)
{
	struct nx_guard_rl *t;
	assert_int_equal(nx_guard_rl_new(11, &t), 0);
	struct mt_arg args[4] = {{t, 0}, {t, 0}, {t, 0}, {t, 0}};
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, mt_run, &args[i]), 0);
	}
	unsigned total = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		total += args[i].passed;
	}
	/* the first query may race the slot claim and pass without charge: at most one extra per
	 * thread */
	assert_in_range(total, 100, 104);
	nx_guard_rl_free(t);
}

/* ---- classifier ---- */

static void classifier(void **state)
{
	static const char *const priv4[] = {
	    "0.0.0.0",	       "0.1.2.3",     "10.0.0.1",	"10.255.255.255", "100.64.0.1",
	    "100.127.255.254", "127.0.0.1",   "127.8.9.10",	"169.254.1.1",	  "172.16.0.1",
	    "172.31.255.255",  "192.168.0.1", "192.168.255.255"};
	static const char *const pub4[] = {
	    "1.1.1.1",	   "9.9.9.9",	"100.63.255.255", "100.128.0.1", "172.15.255.255",
	    "172.32.0.1",  "192.0.2.1", "198.51.100.7",	  "203.0.113.9", "192.169.0.1",
	    "169.253.1.1", "11.0.0.1",	"128.0.0.1"};
	static const char *const priv6[] = {"::",
					    "::1",
					    "fc00::1",
					    "fd12:3456::1",
					    "fe80::1",
					    "febf::1",
					    "::ffff:10.1.2.3",
					    "::ffff:127.0.0.1",
					    "::ffff:192.168.1.1",
					    "::ffff:0.0.0.0"};
	static const char *const pub6[] = {"2001:db8::1",    "2606:4700::1111", "::2",
					   "fec0::1",	     "ff02::1",		"::ffff:192.0.2.1",
					   "::ffff:8.8.8.8", "fbff::1",		"64:ff9b::a00:1"};
	uint8_t a[16];
	for (size_t i = 0; i < sizeof(priv4) / sizeof(*priv4); i++) {
		assert_true(nx_guard_private_v4(v4(priv4[i], a)));
	}
	for (size_t i = 0; i < sizeof(pub4) / sizeof(*pub4); i++) {
		assert_false(nx_guard_private_v4(v4(pub4[i], a)));
	}
	for (size_t i = 0; i < sizeof(priv6) / sizeof(*priv6); i++) {
		assert_true(nx_guard_private_v6(v6(priv6[i], a)));
	}
	for (size_t i = 0; i < sizeof(pub6) / sizeof(*pub6); i++) {
		assert_false(nx_guard_private_v6(v6(pub6[i], a)));
	}
}

/* ---- rebinding rewriter ---- */

static const uint8_t QNAME[] = "\3www\7example\3com";

static struct nx_dns_question question(uint16_t qtype)
{
	struct nx_dns_question q = {.qtype = qtype, .qclass = NX_DNS_C_IN};
	memcpy(q.name, QNAME, sizeof(QNAME));
	q.name_len = sizeof(QNAME);
	return q;
}

/* An upstream answer built with the codec (owners compressed to the question). */
static size_t build(uint8_t *buf, size_t cap, uint16_t qtype, const struct nx_dns_rr_spec *rrs,
		    size_t n, bool edns)
{
	struct nx_dns_question q = question(qtype);
	struct nx_dns_reply_ctx ctx = {
	    .id = 7, .qflags = NX_DNS_F_RD, .q = &q, .edns = edns, .max_size = cap};
	int len =
	    nx_dns_build_answer(buf, cap, &ctx, NX_DNS_NOERROR, false, rrs, n, NULL, 0, -1, NULL);
	assert_true(len > 0);
	return (size_t)len;
}

static void answer_texts(const uint8_t *buf, const struct nx_dns_msg *m, char *out, size_t cap)
{
	out[0] = 0;
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, m->len);
	rd.pos = m->question_end;
	for (unsigned i = 0; i < m->ancount; i++) {
		uint8_t name[NX_DNS_NAME_MAX];
		size_t nl = nx_dns_rd_name(&rd, name);
		uint16_t type = nx_dns_rd_u16(&rd);
		nx_dns_rd_skip(&rd, 6);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		const uint8_t *p = nx_dns_rd_bytes(&rd, rdlen);
		assert_non_null(p);
		char owner[NX_DNS_TEXT_MAX], val[128] = "?";
		assert_true(nx_dns_name_to_text(name, nl, owner, sizeof(owner)) > 0);
		if (type == NX_DNS_T_A) {
			inet_ntop(AF_INET, p, val, sizeof(val));
		} else if (type == NX_DNS_T_AAAA) {
			inet_ntop(AF_INET6, p, val, sizeof(val));
		}
		size_t o = strlen(out);
		snprintf(out + o, cap - o, "%s%s %s", o ? "," : "", owner, val);
	}
}

static void rebind_mixed(void **state)
{
	uint8_t a1[4] = {192, 0, 2, 1}, a2[4] = {10, 0, 0, 1}, a3[4] = {198, 51, 100, 2},
		a4[4] = {192, 168, 1, 1};
	struct nx_dns_rr_spec rrs[] = {
	    {.type = NX_DNS_T_A, .ttl = 300, .rdata = a1, .rdlen = 4},
	    {.type = NX_DNS_T_A, .ttl = 300, .rdata = a2, .rdlen = 4},
	    {.type = NX_DNS_T_A, .ttl = 300, .rdata = a3, .rdlen = 4},
	    {.type = NX_DNS_T_A, .ttl = 300, .rdata = a4, .rdlen = 4},
	};
	uint8_t buf[512], out[1024];
	size_t len = build(buf, sizeof(buf), NX_DNS_T_A, rrs, 4, true);
	struct nx_dns_msg m, om;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	struct nx_guard_rebind_report rep;
	int n = nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep);
	assert_true(n > 0);
	assert_int_equal(rep.addresses, 2);
	assert_false(rep.emptied);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &om), 0);
	assert_int_equal(om.ancount, 2);
	assert_int_equal(om.id, 7);
	assert_true(om.edns.present);
	assert_int_equal(om.edns.ede_code, -1);
	char t[512];
	answer_texts(out, &om, t, sizeof(t));
	assert_string_equal(t, "www.example.com 192.0.2.1,www.example.com 198.51.100.2");
	/* all public: untouched */
	struct nx_dns_rr_spec pub[] = {rrs[0], rrs[2]};
	len = build(buf, sizeof(buf), NX_DNS_T_A, pub, 2, false);
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	memset(out, 0xee, sizeof(out));
	assert_int_equal(nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep), 0);
	assert_int_equal(out[0], 0xee);
	assert_int_equal(rep.addresses, 0);
}

static void rebind_emptied(void **state)
{
	uint8_t cname[] = "\3cdn\7example\3net";
	uint8_t a[4] = {127, 0, 0, 1};
	struct nx_dns_rr_spec rrs[] = {
	    {.type = NX_DNS_T_CNAME, .ttl = 60, .rdata = cname, .rdlen = sizeof(cname)},
	    {.owner = cname,
	     .owner_len = sizeof(cname),
	     .type = NX_DNS_T_A,
	     .ttl = 60,
	     .rdata = a,
	     .rdlen = 4},
	};
	uint8_t buf[512], out[1024];
	for (int edns = 0; edns < 2; edns++) {
		size_t len = build(buf, sizeof(buf), NX_DNS_T_A, rrs, 2, edns);
		struct nx_dns_msg m, om;
		assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
		struct nx_guard_rebind_report rep;
		int n = nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep);
		assert_true(n > 0);
		assert_true(rep.emptied);
		assert_int_equal(rep.addresses, 1);
		assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &om), 0);
		assert_int_equal(NX_DNS_RCODE(om.flags), NX_DNS_NOERROR);
		assert_int_equal(om.ancount, 1); /* the CNAME stays: NODATA at its target */
		/* EDE 15 with the reason, whether or not the upstream spoke EDNS */
		assert_true(om.edns.present);
		assert_int_equal(om.edns.ede_code, NX_DNS_EDE_BLOCKED);
		assert_int_equal(om.edns.ede_text_len, strlen(NX_GUARD_REBIND_TEXT));
		assert_memory_equal(om.edns.ede_text, NX_GUARD_REBIND_TEXT, om.edns.ede_text_len);
		/* and relaying it to an EDNS client keeps the reason */
		struct nx_dns_question q = question(NX_DNS_T_A);
		struct nx_dns_reply_ctx ctx = {.id = 9, .q = &q, .edns = true, .max_size = 1232};
		uint8_t rel[1232];
		assert_true(nx_dns_relay(rel, sizeof(rel), out, &om, &ctx, 0, -1, NULL, NULL) > 0);
		struct nx_dns_msg rm;
		assert_int_equal(
		    nx_dns_msg_parse(rel, sizeof(rel), &rm) == 0 ||
			nx_dns_msg_parse(rel,
					 (size_t)nx_dns_relay(rel, sizeof(rel), out, &om, &ctx, 0,
							      -1, NULL, NULL),
					 &rm) == 0,
		    1);
		assert_int_equal(rm.edns.ede_code, NX_DNS_EDE_BLOCKED);
	}
	/* AAAA of ::ffff:192.168.0.1 (mapped) and :: */
	uint8_t m1[16] = {[10] = 0xff, [11] = 0xff, 192, 168, 0, 1}, m2[16] = {0};
	struct nx_dns_rr_spec six[] = {
	    {.type = NX_DNS_T_AAAA, .ttl = 60, .rdata = m1, .rdlen = 16},
	    {.type = NX_DNS_T_AAAA, .ttl = 60, .rdata = m2, .rdlen = 16},
	};
	size_t len = build(buf, sizeof(buf), NX_DNS_T_AAAA, six, 2, true);
	struct nx_dns_msg m, om;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	struct nx_guard_rebind_report rep;
	int n = nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep);
	assert_true(n > 0 && rep.emptied && rep.addresses == 2);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &om), 0);
	assert_int_equal(om.ancount, 0);
	/* too small an output buffer is an error, never a partial answer */
	assert_int_equal(nx_guard_rebind_strip(buf, &m, out, 20, &rep), NX_ETRUNC);
}

/* A record whose owner is a pointer into a record that goes: the copy must decompress it. */
static void rebind_pointer_into_removed(void **state)
{
	uint8_t buf[512];
	size_t o = 0;
	const uint8_t hdr[12] = {0, 7, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0};
	memcpy(buf, hdr, 12);
	o = 12;
	memcpy(buf + o, QNAME, sizeof(QNAME));
	o += sizeof(QNAME);
	buf[o++] = 0, buf[o++] = 1, buf[o++] = 0, buf[o++] = 1; /* A IN */
	size_t owner1 = o;
	/* "a" + pointer to the question name: a.www.example.com */
	buf[o++] = 1, buf[o++] = 'a', buf[o++] = 0xc0, buf[o++] = 12;
	const uint8_t rr1[] = {0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 9, 8, 7};
	memcpy(buf + o, rr1, sizeof(rr1));
	o += sizeof(rr1);
	buf[o++] = 0xc0, buf[o++] = (uint8_t)owner1; /* pointer to the removed record's owner */
	const uint8_t rr2[] = {0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 203, 0, 113, 5};
	memcpy(buf + o, rr2, sizeof(rr2));
	o += sizeof(rr2);
	struct nx_dns_msg m, om;
	assert_int_equal(nx_dns_msg_parse(buf, o, &m), 0);
	uint8_t out[512];
	struct nx_guard_rebind_report rep;
	int n = nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep);
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &om), 0);
	char t[256];
	answer_texts(out, &om, t, sizeof(t));
	assert_string_equal(t, "a.www.example.com 203.0.113.5");
	assert_false(rep.emptied); /* a.www is not the question name, but an A is left */
}

static void rebind_https_hints(void **state)
{
	/* HTTPS 1 . alpn=h2 ipv4hint=10.0.0.1,192.0.2.1 ipv6hint=fd00::1 */
	uint8_t rd[64];
	size_t o = 0;
	rd[o++] = 0, rd[o++] = 1, rd[o++] = 0;				 /* prio 1, target . */
	rd[o++] = 0, rd[o++] = 1, rd[o++] = 0, rd[o++] = 3, rd[o++] = 2; /* alpn */
	rd[o++] = 'h', rd[o++] = '2';
	rd[o++] = 0, rd[o++] = 4, rd[o++] = 0, rd[o++] = 8; /* ipv4hint */
	const uint8_t h4[8] = {10, 0, 0, 1, 192, 0, 2, 1};
	memcpy(rd + o, h4, 8);
	o += 8;
	rd[o++] = 0, rd[o++] = 6, rd[o++] = 0, rd[o++] = 16; /* ipv6hint */
	uint8_t h6[16] = {0xfd};
	h6[15] = 1;
	memcpy(rd + o, h6, 16);
	o += 16;
	struct nx_dns_rr_spec rr = {
	    .type = NX_DNS_T_HTTPS, .ttl = 300, .rdata = rd, .rdlen = (uint16_t)o};
	uint8_t buf[512], out[512];
	size_t len = build(buf, sizeof(buf), NX_DNS_T_HTTPS, &rr, 1, true);
	struct nx_dns_msg m, om;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	struct nx_guard_rebind_report rep;
	int n = nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep);
	assert_true(n > 0);
	assert_int_equal(rep.addresses, 2);
	assert_false(rep.emptied);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &om), 0);
	assert_int_equal(om.ancount, 1);
	/* the record: owner (uncompressed now), type, class, ttl, rdlen, then the new RDATA */
	size_t at = om.question_end + sizeof(QNAME) + 8;
	uint16_t rdlen = (uint16_t)(out[at] << 8 | out[at + 1]);
	const uint8_t want[] = {0, 1, 0, 0, 1, 0, 3, 2, 'h', '2', 0, 4, 0, 4, 192, 0, 2, 1};
	assert_int_equal(rdlen, sizeof(want));
	assert_memory_equal(out + at + 2, want, sizeof(want));
}

static void rebind_other_rcodes_untouched(void **state)
{
	uint8_t a[4] = {10, 0, 0, 1};
	struct nx_dns_rr_spec rr = {.type = NX_DNS_T_A, .ttl = 60, .rdata = a, .rdlen = 4};
	struct nx_dns_question q = question(NX_DNS_T_A);
	struct nx_dns_reply_ctx ctx = {.id = 7, .q = &q, .max_size = 512};
	uint8_t buf[512], out[512];
	int len = nx_dns_build_answer(buf, sizeof(buf), &ctx, NX_DNS_NXDOMAIN, false, &rr, 1, NULL,
				      0, -1, NULL);
	struct nx_dns_msg m;
	assert_int_equal(nx_dns_msg_parse(buf, (size_t)len, &m), 0);
	struct nx_guard_rebind_report rep;
	assert_int_equal(nx_guard_rebind_strip(buf, &m, out, sizeof(out), &rep), 0);
}

static void rebind_allow_and_apply(void **state)
{
	char d1[] = "plex.direct", d2[] = "fritz.box";
	char *doms[] = {d1, d2};
	uint8_t w[NX_DNS_NAME_MAX];
	int l = nx_dns_name_from_text("1-2-3-4.ABC.Plex.Direct", w);
	assert_true(nx_guard_rebind_allowed(doms, 2, w, (size_t)l));
	l = nx_dns_name_from_text("fritz.box", w);
	assert_true(nx_guard_rebind_allowed(doms, 2, w, (size_t)l));
	l = nx_dns_name_from_text("notplex.direct", w);
	assert_false(nx_guard_rebind_allowed(doms, 2, w, (size_t)l));
	l = nx_dns_name_from_text("direct", w);
	assert_false(nx_guard_rebind_allowed(doms, 2, w, (size_t)l));
	assert_false(nx_guard_rebind_allowed(doms, 0, w, (size_t)l));

	/* apply: counts, and honours the switch and the allow list */
	const char *yaml = "filter:\n  rebinding_allow: [lan.example]\n";
	struct nx_conf *c;
	char err[256];
	assert_int_equal(nx_conf_load_string("t", yaml, strlen(yaml), &c, err, sizeof(err)), 0);
	uint8_t a[4] = {192, 168, 7, 7};
	struct nx_dns_rr_spec rr = {.type = NX_DNS_T_A, .ttl = 60, .rdata = a, .rdlen = 4};
	uint8_t buf[512], out[512];
	size_t len = build(buf, sizeof(buf), NX_DNS_T_A, &rr, 1, true);
	struct nx_dns_msg m, om;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	uint64_t e0 = nx_stat_read(NX_STAT_REBIND_EMPTIED),
		 r0 = nx_stat_read(NX_STAT_REBIND_RECORDS);
	int n = nx_guard_rebind_apply(c, QNAME, sizeof(QNAME), buf, &m, out, sizeof(out), &om);
	assert_true(n > 0);
	assert_int_equal(om.ancount, 0);
	assert_int_equal(nx_stat_read(NX_STAT_REBIND_EMPTIED) - e0, 1);
	assert_int_equal(nx_stat_read(NX_STAT_REBIND_RECORDS) - r0, 1);
	uint64_t al0 = nx_stat_read(NX_STAT_REBIND_ALLOWED);
	l = nx_dns_name_from_text("nas.lan.example", w);
	assert_int_equal(nx_guard_rebind_apply(c, w, (size_t)l, buf, &m, out, sizeof(out), &om), 0);
	assert_int_equal(nx_stat_read(NX_STAT_REBIND_ALLOWED) - al0, 1);
	c->rebinding_protection = false;
	assert_int_equal(
	    nx_guard_rebind_apply(c, QNAME, sizeof(QNAME), buf, &m, out, sizeof(out), &om), 0);
	nx_conf_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rl_burst_then_rate),
	    cmocka_unit_test(rl_sustained_rate),
	    cmocka_unit_test(rl_prefixes),
	    cmocka_unit_test(rl_log_once_a_minute),
	    cmocka_unit_test(rl_flood_evicts),
	    cmocka_unit_test(rl_no_memory),
	    cmocka_unit_test(rl_admit_exempt),
	    cmocka_unit_test(rl_log_budget),
	    cmocka_unit_test(rl_config_errors),
	    cmocka_unit_test(rl_threads_share_one_limit),
	    cmocka_unit_test(classifier),
	    cmocka_unit_test(rebind_mixed),
	    cmocka_unit_test(rebind_emptied),
	    cmocka_unit_test(rebind_pointer_into_removed),
	    cmocka_unit_test(rebind_https_hints),
	    cmocka_unit_test(rebind_other_rcodes_untouched),
	    cmocka_unit_test(rebind_allow_and_apply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The cache against the real codec: what a hit hands back (bytes + struct nx_dns_msg) is what
 * nx_dns_msg_parse() says about those bytes, and nx_dns_relay() turns it into the client's
 * answer (id, question case, decremented TTLs). Separate executable so the other cache tests
 * never depend on the codec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "cache/cache.h"
#include "msgbuild.h"

static struct tmsg g_msg;
static uint8_t g_out[NX_DNS_MSG_MAX];
static uint8_t g_reply[NX_DNS_MSG_MAX];

static void assert_same_view(const struct nx_dns_msg *a, const struct nx_dns_msg *b)
{
	assert_int_equal(a->id, b->id);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->qdcount, b->qdcount);
	assert_int_equal(a->ancount, b->ancount);
	assert_int_equal(a->nscount, b->nscount);
	assert_int_equal(a->arcount, b->arcount);
	assert_int_equal(a->has_question, b->has_question);
	assert_int_equal(a->q.name_len, b->q.name_len);
	assert_memory_equal(a->q.name, b->q.name, a->q.name_len);
	assert_int_equal(a->q.qtype, b->q.qtype);
	assert_int_equal(a->q.qclass, b->q.qclass);
	assert_int_equal(a->question_off, b->question_off);
	assert_int_equal(a->question_end, b->question_end);
	assert_int_equal(a->answer_end, b->answer_end);
	assert_int_equal(a->authority_end, b->authority_end);
	assert_int_equal(a->edns.present, b->edns.present);
	if (a->edns.present) {
		assert_int_equal(a->opt_off, b->opt_off);
		assert_int_equal(a->opt_len, b->opt_len);
		assert_int_equal(a->opt_index, b->opt_index);
		assert_int_equal(a->edns.udp_size, b->edns.udp_size);
		assert_int_equal(a->edns.ext_rcode, b->edns.ext_rcode);
		assert_int_equal(a->edns.version, b->edns.version);
		assert_int_equal(a->edns.do_bit, b->edns.do_bit);
		assert_int_equal(a->edns.ede_code, b->edns.ede_code);
		assert_int_equal(a->edns.ede_text_len, b->edns.ede_text_len);
		assert_memory_equal(a->edns.ede_text, b->edns.ede_text, a->edns.ede_text_len);
		assert_int_equal(a->edns.unknown_options, b->edns.unknown_options);
	}
	assert_int_equal(a->ttl_count, b->ttl_count);
	assert_int_equal(a->ttl_overflow, b->ttl_overflow);
	assert_memory_equal(a->ttl_off, b->ttl_off, a->ttl_count * sizeof(uint16_t));
	assert_int_equal(a->min_ttl, b->min_ttl);
	assert_int_equal(a->len, b->len);
}

static struct nx_cache *mk(void)
{
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = 64;
	p.stale_window = 3600;
	struct nx_cache *c = NULL;
	assert_int_equal(nx_cache_new(&p, &c), 0);
	return c;
}

/* Parse the hand-built message (checks the builder), cache it, look it up at +age s. */
static void roundtrip(struct nx_cache *c, const struct tkey *k, uint64_t age_ms, unsigned flags,
		      struct nx_dns_msg *view, struct nx_cache_hit *hit)
{
	struct nx_dns_msg parsed;
	assert_int_equal(nx_dns_msg_parse(g_msg.buf, g_msg.m.len, &parsed), 0);
	assert_same_view(&parsed, &g_msg.m);
	assert_int_equal(nx_cache_put(c, &k->k, g_msg.buf, &parsed, 1000), 0);
	assert_int_equal(
	    nx_cache_lookup(c, &k->k, 1000 + age_ms, flags, g_out, sizeof(g_out), view, hit), 0);
	struct nx_dns_msg again;
	assert_int_equal(nx_dns_msg_parse(g_out, view->len, &again), 0);
	assert_same_view(&again, view);
}

static void test_positive_view_and_relay(void **state)
{
	struct nx_cache *c = mk();
	static const uint8_t a[4] = {192, 0, 2, 1};
	tmsg_start(&g_msg, "wWw.Example.ORG", NX_DNS_T_A, NX_DNS_C_IN, 0);
	tmsg_rr(&g_msg, T_AN, NX_DNS_T_A, 300, a, 4);
	tmsg_rr(&g_msg, T_AN, NX_DNS_T_A, 120, a, 4);
	tmsg_rr(&g_msg, T_AR, NX_DNS_T_A, 30, a, 4);
	tmsg_opt(&g_msg, true, 18, "upstream said");
	tmsg_finish(&g_msg);
	struct tkey k;
	tkey_init(&k, "www.example.org", NX_DNS_T_A, true, false);
	struct nx_dns_msg view;
	struct nx_cache_hit hit;
	roundtrip(c, &k, 45500, 0, &view, &hit);
	assert_int_equal(view.min_ttl, 75);
	assert_int_equal(hit.ttl, 75);

	/* relay to a client that asked in its own case */
	struct nx_dns_question q = {.name_len = k.k.name_len, .qtype = NX_DNS_T_A, .qclass = 1};
	tname("WWW.example.org", q.name);
	struct nx_dns_reply_ctx ctx = {.id = 0xbeef,
				       .qflags = NX_DNS_F_RD,
				       .q = &q,
				       .edns = true,
				       .do_bit = true,
				       .max_size = 1232};
	bool trunc = true;
	int n = nx_dns_relay(g_reply, sizeof(g_reply), g_out, &view, &ctx, 0, -1, NULL, &trunc);
	assert_true(n > 0);
	assert_false(trunc);
	struct nx_dns_msg r;
	assert_int_equal(nx_dns_msg_parse(g_reply, (size_t)n, &r), 0);
	assert_int_equal(r.id, 0xbeef);
	assert_memory_equal(r.q.name, q.name, q.name_len);
	assert_int_equal(r.ancount, 2);
	assert_int_equal(tmsg_ttl_at(g_reply, &r, 0), 255);
	assert_int_equal(tmsg_ttl_at(g_reply, &r, 1), 75);
	assert_int_equal(tmsg_ttl_at(g_reply, &r, 2), 0);
	assert_true(r.edns.present);
	assert_int_equal(r.edns.ede_code, 18); /* upstream EDE kept */
	nx_cache_free(c);
}

static void test_negative_and_stale_relay(void **state)
{
	struct nx_cache *c = mk();
	tmsg_start(&g_msg, "gone.example.org", NX_DNS_T_AAAA, NX_DNS_C_IN, NX_DNS_NXDOMAIN);
	tmsg_soa(&g_msg, 3600, 600);
	tmsg_opt(&g_msg, false, -1, NULL);
	tmsg_finish(&g_msg);
	struct tkey k;
	tkey_init(&k, "gone.example.org", NX_DNS_T_AAAA, false, false);
	struct nx_dns_msg view;
	struct nx_cache_hit hit;
	roundtrip(c, &k, 100000, 0, &view, &hit);
	assert_int_equal(hit.ttl, 500);
	assert_int_equal(tmsg_ttl_at(g_out, &view, 0), 500);

	/* past the TTL, asked for stale: TTL 30 and EDE 3 on the relayed answer */
	assert_int_equal(nx_cache_lookup(c, &k.k, 1000 + 700000, NX_CACHE_LOOKUP_STALE, g_out,
					 sizeof(g_out), &view, &hit),
			 0);
	assert_true(hit.stale);
	struct nx_dns_msg again;
	assert_int_equal(nx_dns_msg_parse(g_out, view.len, &again), 0);
	assert_same_view(&again, &view);
	struct nx_dns_reply_ctx ctx = {
	    .id = 7, .qflags = NX_DNS_F_RD, .q = &view.q, .edns = true, .max_size = 1232};
	int n = nx_dns_relay(g_reply, sizeof(g_reply), g_out, &view, &ctx, 0, NX_DNS_EDE_STALE,
			     NULL, NULL);
	assert_true(n > 0);
	struct nx_dns_msg r;
	assert_int_equal(nx_dns_msg_parse(g_reply, (size_t)n, &r), 0);
	assert_int_equal(NX_DNS_RCODE(r.flags), NX_DNS_NXDOMAIN);
	assert_int_equal(r.edns.ede_code, NX_DNS_EDE_STALE);
	assert_int_equal(tmsg_ttl_at(g_reply, &r, 0), NX_CACHE_STALE_TTL);
	nx_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_positive_view_and_relay),
	    cmocka_unit_test(test_negative_and_stale_relay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

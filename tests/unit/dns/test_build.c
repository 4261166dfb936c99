/* Builders and the relay (dns/msg.h): parse what we build and check every field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "helpers.h"

static uint8_t out[70000];
static uint8_t up[70000];
static struct nx_dns_msg m, um;

static struct nx_dns_question cq; /* the client's question, mixed case */

static struct nx_dns_reply_ctx client(bool edns, bool do_bit, size_t max)
{
	fill_question(&cq, "WwW.ExAmple.Com", NX_DNS_T_A);
	struct nx_dns_reply_ctx ctx = {
	    .id = 0x4242,
	    .qflags = NX_DNS_F_RD | NX_DNS_F_CD,
	    .q = &cq,
	    .edns = edns,
	    .do_bit = do_bit,
	    .max_size = max,
	};
	return ctx;
}

static void build_error_edns(void **state)
{
	struct nx_dns_reply_ctx ctx = client(true, true, 1232);
	int n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_NXDOMAIN, NX_DNS_EDE_BLOCKED,
				   "blocked by nxdns");
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.id, 0x4242);
	assert_int_equal(m.flags, NX_DNS_F_QR | NX_DNS_F_RA | NX_DNS_F_RD | NX_DNS_F_CD | 3);
	assert_int_equal(m.qdcount, 1);
	assert_int_equal(m.ancount + m.nscount, 0);
	assert_int_equal(m.arcount, 1);
	assert_int_equal(m.q.name_len, cq.name_len);
	assert_memory_equal(m.q.name, cq.name, cq.name_len); /* client's case */
	assert_int_equal(m.q.qtype, NX_DNS_T_A);
	assert_true(m.edns.present);
	assert_int_equal(m.edns.udp_size, NX_DNS_EDNS_OUR_SIZE);
	assert_true(m.edns.do_bit);
	assert_int_equal(m.edns.ext_rcode, 0);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_BLOCKED);
	assert_int_equal(m.edns.ede_text_len, 16);
	assert_memory_equal(m.edns.ede_text, "blocked by nxdns", 16);
	assert_int_equal(m.edns.unknown_options, 0);

	/* no EDE, no DO */
	ctx.do_bit = false;
	n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_REFUSED, NX_DNS_EDE_NONE, "x");
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_REFUSED);
	assert_false(m.edns.do_bit);
	assert_int_equal(m.edns.ede_code, -1);
	assert_int_equal(m.opt_len, 11);

	/* EDE with NULL text; long text truncated to NX_DNS_EDE_TEXT_MAX */
	n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_SERVFAIL, NX_DNS_EDE_NETWORK_ERROR,
			       NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_NETWORK_ERROR);
	assert_int_equal(m.edns.ede_text_len, 0);
	char longtext[300];
	memset(longtext, 'q', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = 0;
	n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_SERVFAIL, 0, longtext);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.edns.ede_text_len, NX_DNS_EDE_TEXT_MAX);
}

static void build_error_plain(void **state)
{
	struct nx_dns_reply_ctx ctx = client(false, true, 512);
	ctx.qflags = (uint16_t)(2 << 11); /* opcode STATUS, RD clear */
	int n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_NOTIMP, NX_DNS_EDE_BLOCKED, "x");
	assert_int_equal(n, 12 + cq.name_len + 4);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags, NX_DNS_F_QR | NX_DNS_F_RA | (2 << 11) | NX_DNS_NOTIMP);
	assert_int_equal(NX_DNS_OPCODE(m.flags), 2);
	assert_false(m.edns.present); /* no OPT, so no EDE */
	assert_int_equal(m.arcount, 0);

	/* FORMERR without a question */
	ctx.q = NULL;
	n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_FORMERR, NX_DNS_EDE_NONE, NULL);
	assert_int_equal(n, 12);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.qdcount, 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_FORMERR);

	/* no room */
	ctx = client(false, false, 512);
	assert_int_equal(nx_dns_build_error(out, 20, &ctx, NX_DNS_SERVFAIL, -1, NULL), NX_ETRUNC);
	assert_int_equal(nx_dns_build_error(out, 0, &ctx, NX_DNS_SERVFAIL, -1, NULL), NX_ETRUNC);
}

static void build_error_extended_rcode(void **state)
{
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	int n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_BADVERS, NX_DNS_EDE_NONE, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), 0);
	assert_int_equal(m.edns.ext_rcode, 1);
	assert_int_equal((m.edns.ext_rcode << 4) | NX_DNS_RCODE(m.flags), NX_DNS_BADVERS);
	/* not expressible without EDNS */
	ctx.edns = false;
	n = nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_BADVERS, NX_DNS_EDE_NONE, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_SERVFAIL);
}

static void build_any(void **state)
{
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	cq.qtype = NX_DNS_T_ANY;
	int n = nx_dns_build_any_hinfo(out, sizeof(out), &ctx, 3600);
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_NOERROR);
	assert_int_equal(m.ancount, 1);
	assert_int_equal(m.arcount, 1);
	assert_int_equal(m.q.qtype, NX_DNS_T_ANY);
	assert_int_equal(m.ttl_count, 1);
	assert_int_equal(m.min_ttl, 3600);
	const uint8_t *rr = out + m.question_end;
	assert_int_equal(get16(rr), 0xc00c);
	assert_int_equal(get16(rr + 2), NX_DNS_T_HINFO);
	assert_int_equal(get16(rr + 4), NX_DNS_C_IN);
	assert_int_equal(get16(rr + 10), 9);
	assert_memory_equal(rr + 12, "\007RFC8482\000", 9);
	ctx.q = NULL;
	assert_int_equal(nx_dns_build_any_hinfo(out, sizeof(out), &ctx, 1), NX_EMALFORMED);
}

static void build_query(void **state)
{
	struct nx_dns_question q;
	fill_question(&q, "example.org", NX_DNS_T_HTTPS);
	int n = nx_dns_build_query(out, sizeof(out), 0x7777, &q, true, true);
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.id, 0x7777);
	assert_int_equal(m.flags, NX_DNS_F_RD | NX_DNS_F_CD);
	assert_int_equal(m.qdcount, 1);
	assert_int_equal(m.arcount, 1);
	assert_int_equal(m.q.qtype, NX_DNS_T_HTTPS);
	assert_true(m.edns.present);
	assert_int_equal(m.edns.udp_size, 1232);
	assert_true(m.edns.do_bit);
	n = nx_dns_build_query(out, sizeof(out), 1, &q, false, false);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags, NX_DNS_F_RD);
	assert_false(m.edns.do_bit);
	assert_true(m.edns.present);
	assert_int_equal(nx_dns_build_query(out, (size_t)n - 1, 1, &q, false, false), NX_ETRUNC);
}

static void build_answer(void **state)
{
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	const uint8_t a[] = {0, 0, 0, 0};
	const uint8_t a2[] = {10, 1, 2, 3};
	uint8_t other[NX_DNS_NAME_MAX];
	size_t ol = wname("alias.example", other);
	struct nx_dns_rr_spec rrs[] = {
	    {.type = NX_DNS_T_A, .ttl = 10, .rdata = a, .rdlen = 4},
	    {.owner = other,
	     .owner_len = ol,
	     .type = NX_DNS_T_A,
	     .ttl = 20,
	     .rdata = a2,
	     .rdlen = 4},
	};
	uint8_t soa[64];
	struct nx_dns_wr w;
	nx_dns_wr_init(&w, soa, sizeof(soa));
	nx_dns_wr_bytes(&w, "\002ns\300\014\004host\300\014", 12);
	for (int i = 0; i < 5; i++) {
		nx_dns_wr_u32(&w, 60);
	}
	struct nx_dns_rr_spec auth = {.owner = other,
				      .owner_len = ol,
				      .type = NX_DNS_T_SOA,
				      .ttl = 60,
				      .rdata = soa,
				      .rdlen = (uint16_t)w.pos};
	int n = nx_dns_build_answer(out, sizeof(out), &ctx, NX_DNS_NOERROR, true, rrs, 2, &auth, 1,
				    NX_DNS_EDE_FILTERED, "f");
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags,
			 NX_DNS_F_QR | NX_DNS_F_RA | NX_DNS_F_AA | NX_DNS_F_RD | NX_DNS_F_CD);
	assert_int_equal(m.ancount, 2);
	assert_int_equal(m.nscount, 1);
	assert_int_equal(m.arcount, 1);
	assert_int_equal(m.ttl_count, 3);
	assert_int_equal(m.min_ttl, 10);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_FILTERED);
	/* second answer owner is the given name, uncompressed */
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, out, (size_t)n);
	rd.pos = m.ttl_off[0] + 4 + 2 + 4;
	uint8_t nm[NX_DNS_NAME_MAX];
	assert_int_equal(nx_dns_rd_name(&rd, nm), ol);
	assert_memory_equal(nm, other, ol);
	assert_memory_equal(out + rd.pos - ol, other, ol);

	/* NXDOMAIN with only authority, no EDNS */
	ctx.edns = false;
	n = nx_dns_build_answer(out, sizeof(out), &ctx, NX_DNS_NXDOMAIN, false, NULL, 0, &auth, 1,
				NX_DNS_EDE_BLOCKED, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_NXDOMAIN);
	assert_int_equal(m.flags & NX_DNS_F_AA, 0);
	assert_int_equal(m.ancount, 0);
	assert_int_equal(m.nscount, 1);
	assert_false(m.edns.present);

	/* owner NULL needs a question */
	ctx.q = NULL;
	assert_int_equal(
	    nx_dns_build_answer(out, sizeof(out), &ctx, 0, false, rrs, 1, NULL, 0, -1, NULL),
	    NX_EMALFORMED);
}

static void build_answer_truncates(void **state)
{
	struct nx_dns_reply_ctx ctx = client(false, false, 512);
	static uint8_t txt[200];
	memset(txt, 'x', sizeof(txt));
	txt[0] = 199;
	struct nx_dns_rr_spec rrs[3];
	for (int i = 0; i < 3; i++) {
		rrs[i] = (struct nx_dns_rr_spec){
		    .type = NX_DNS_T_TXT, .ttl = 1, .rdata = txt, .rdlen = sizeof(txt)};
	}
	int n = nx_dns_build_answer(out, sizeof(out), &ctx, 0, false, rrs, 2, NULL, 0, -1, NULL);
	assert_true(n > 0 && n <= 512);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags & NX_DNS_F_TC, 0);
	assert_int_equal(m.ancount, 2);
	n = nx_dns_build_answer(out, sizeof(out), &ctx, 0, false, rrs, 3, NULL, 0, -1, NULL);
	assert_true(n > 0 && n <= 512);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags & NX_DNS_F_TC, NX_DNS_F_TC);
	assert_int_equal(m.ancount, 0);
	assert_int_equal(m.qdcount, 1);
	assert_memory_equal(m.q.name, cq.name, cq.name_len);
	/* same over TCP: no truncation */
	ctx.max_size = NX_DNS_MSG_MAX;
	n = nx_dns_build_answer(out, sizeof(out), &ctx, 0, false, rrs, 3, NULL, 0, -1, NULL);
	assert_true(n > 512);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.ancount, 3);
}

/* Upstream answer to www.example.com A (lower case), with its own OPT + EDE optional. */
static size_t upstream(uint16_t nrr, bool opt, int ede, bool opt_not_last, uint8_t ext_rcode)
{
	struct composer c;
	comp_init(&c, up, sizeof(up), 0x0101, NX_DNS_F_QR | NX_DNS_F_RD | NX_DNS_F_RA);
	comp_question(&c, "www.example.com", NX_DNS_T_A);
	for (uint16_t i = 0; i < nrr; i++) {
		const uint8_t a[] = {192, 0, 2, (uint8_t)i};
		comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 100u + i, a, 4);
	}
	const uint8_t ns[] = {3, 'n', 's', '1', 0xc0, 16};
	comp_rr(&c, 2, NULL, 0xc010, NX_DNS_T_NS, 1, 7200, ns, sizeof(ns));
	if (opt) {
		uint8_t opts[64];
		struct nx_dns_wr w;
		nx_dns_wr_init(&w, opts, sizeof(opts));
		nx_dns_wr_u16(&w, 10); /* cookie: must not be relayed */
		nx_dns_wr_u16(&w, 8);
		nx_dns_wr_bytes(&w, "12345678", 8);
		if (ede >= 0) {
			nx_dns_wr_u16(&w, 15);
			nx_dns_wr_u16(&w, 2 + 5);
			nx_dns_wr_u16(&w, (uint16_t)ede);
			nx_dns_wr_bytes(&w, "stale", 5);
		}
		comp_opt(&c, 4096, ext_rcode, true, opts, (uint16_t)w.pos);
	}
	if (opt_not_last) {
		const uint8_t a[] = {1, 1, 1, 1};
		comp_rr(&c, 3, NULL, 0xc00c, NX_DNS_T_A, 1, 5, a, 4);
	}
	assert_int_equal(c.wr.err, 0);
	assert_int_equal(nx_dns_msg_parse(up, c.wr.pos, &um), 0);
	return c.wr.pos;
}

static void relay_basic(void **state)
{
	size_t ulen = upstream(3, true, -1, false, 0);
	struct nx_dns_reply_ctx ctx = client(true, true, 1232);
	bool tc = true;
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, NX_DNS_EDE_NONE, NULL, &tc);
	assert_true(n > 0);
	assert_false(tc);
	assert_int_equal(n, um.opt_off + 11); /* cookie dropped, our bare OPT */
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.id, 0x4242);
	assert_int_equal(m.flags, NX_DNS_F_QR | NX_DNS_F_RD | NX_DNS_F_RA);
	assert_memory_equal(out + 12, cq.name, cq.name_len); /* client's case */
	assert_memory_equal(out + 12 + cq.name_len, up + 12 + cq.name_len,
			    (size_t)um.opt_off - 12 - cq.name_len); /* the rest is the upstream's */
	assert_int_equal(m.ancount, 3);
	assert_int_equal(m.nscount, 1);
	assert_int_equal(m.arcount, 1);
	assert_true(m.edns.present);
	assert_int_equal(m.edns.udp_size, 1232);
	assert_true(m.edns.do_bit);
	assert_int_equal(m.edns.unknown_options, 0);
	assert_int_equal(m.ttl_count, 4);
	(void)ulen;
}

static void relay_ttl_sub(void **state)
{
	upstream(3, true, -1, false, 0);
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 101, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(get32(out + m.ttl_off[0]), 0);	   /* 100 - 101 -> floor 0 */
	assert_int_equal(get32(out + m.ttl_off[1]), 0);	   /* 101 - 101 */
	assert_int_equal(get32(out + m.ttl_off[2]), 1);	   /* 102 - 101 */
	assert_int_equal(get32(out + m.ttl_off[3]), 7099); /* NS */
	assert_int_equal(m.min_ttl, 0);
	/* the upstream buffer is untouched */
	assert_int_equal(get32(up + um.ttl_off[0]), 100);
	/* a TTL with the top bit set counts as 0 */
	up[um.ttl_off[3]] = 0x80;
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(get32(out + m.ttl_off[3]), 0);
	assert_int_equal(get32(out + m.ttl_off[0]), 100);
}

static void relay_ttl_overflow(void **state)
{
	upstream(NX_DNS_MAX_TTLS + 5, true, -1, false, 0);
	assert_true(um.ttl_overflow);
	struct nx_dns_reply_ctx ctx = client(true, false, NX_DNS_MSG_MAX);
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 50, -1, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.ancount, NX_DNS_MAX_TTLS + 5);
	/* walk every answer: ttl = 100 + i - 50 */
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, out, (size_t)n);
	rd.pos = m.question_end;
	for (unsigned i = 0; i < m.ancount; i++) {
		nx_dns_rd_skip_name(&rd);
		nx_dns_rd_skip(&rd, 4);
		assert_int_equal(nx_dns_rd_u32(&rd), 50 + i);
		nx_dns_rd_skip(&rd, nx_dns_rd_u16(&rd));
	}
	nx_dns_rd_skip_name(&rd);
	nx_dns_rd_skip(&rd, 4);
	assert_int_equal(nx_dns_rd_u32(&rd), 7150);
	assert_int_equal(rd.err, 0);
}

static void relay_strip_opt(void **state)
{
	upstream(2, true, NX_DNS_EDE_STALE, false, 0);
	struct nx_dns_reply_ctx ctx = client(false, false, 512);
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(n, um.opt_off);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_false(m.edns.present);
	assert_int_equal(m.arcount, 0);
	assert_int_equal(m.ancount, 2);
}

static void relay_opt_not_last(void **state)
{
	upstream(1, true, -1, true, 0);
	assert_int_equal(um.arcount, 2);
	assert_int_equal(um.opt_index, 0);
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.arcount, 1); /* ours only: the A after the OPT is gone */
	assert_int_equal(m.opt_off, um.opt_off);
	assert_int_equal(m.ttl_count, 2);
	ctx.edns = false;
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.arcount, 0);
	/* no upstream OPT: additional kept as is */
	upstream(1, false, -1, true, 0);
	ctx.edns = true;
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.arcount, 2);
	assert_int_equal(m.opt_index, 1);
}

static void relay_ede(void **state)
{
	upstream(1, true, NX_DNS_EDE_STALE, false, 0);
	assert_int_equal(um.edns.ede_code, NX_DNS_EDE_STALE);
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	/* upstream EDE preserved */
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_STALE);
	assert_int_equal(m.edns.ede_text_len, 5);
	assert_memory_equal(m.edns.ede_text, "stale", 5);
	assert_int_equal(m.edns.unknown_options, 0);
	/* ours wins */
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, NX_DNS_EDE_FILTERED, "ours", NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_FILTERED);
	assert_memory_equal(m.edns.ede_text, "ours", 4);
	/* upstream without OPT, ours added */
	upstream(1, false, -1, false, 0);
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, NX_DNS_EDE_FORGED, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_FORGED);
	assert_int_equal(m.arcount, 1);
}

static void relay_ext_rcode(void **state)
{
	upstream(0, true, -1, false, 2); /* e.g. BADCOOKIE = 23 = (1 << 4) | 7; here ext 2 */
	struct nx_dns_reply_ctx ctx = client(true, false, 1232);
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.edns.ext_rcode, 2);
	ctx.edns = false;
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(NX_DNS_RCODE(m.flags), NX_DNS_SERVFAIL);
}

static void relay_truncates(void **state)
{
	/* 40 A records: 12 + 21 + 40 * 16 + NS 18 > 512 */
	upstream(40, true, -1, false, 0);
	struct nx_dns_reply_ctx ctx = client(false, false, 512);
	bool tc = false;
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, &tc);
	assert_true(tc);
	assert_true(n > 0 && n <= 512);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags & NX_DNS_F_TC, NX_DNS_F_TC);
	assert_int_equal(m.qdcount, 1);
	assert_int_equal(m.ancount + m.nscount + m.arcount, 0);
	assert_int_equal(m.id, 0x4242);
	assert_memory_equal(m.q.name, cq.name, cq.name_len);
	/* with EDNS 1232 it fits */
	ctx = client(true, false, 1232);
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, &tc);
	assert_false(tc);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.ancount, 40);
	/* 100 records do not: TC with our OPT */
	upstream(100, true, -1, false, 0);
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, NX_DNS_EDE_OTHER, "t", &tc);
	assert_true(tc);
	assert_true(n <= 1232);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_true(m.edns.present);
	assert_int_equal(m.arcount, 1);
	assert_int_equal(m.ancount, 0);
	assert_int_equal(m.edns.ede_code, NX_DNS_EDE_OTHER);
	/* a cap below max_size truncates too; below the TC form: NX_ETRUNC */
	ctx = client(false, false, 0);
	n = nx_dns_relay(out, 100, up, &um, &ctx, 0, -1, NULL, &tc);
	assert_true(tc);
	assert_int_equal(n, 12 + cq.name_len + 4);
	assert_int_equal(nx_dns_relay(out, 20, up, &um, &ctx, 0, -1, NULL, &tc), NX_ETRUNC);
}

static void relay_rd_and_question(void **state)
{
	upstream(1, false, -1, false, 0);
	struct nx_dns_reply_ctx ctx = client(false, false, 512);
	ctx.qflags = 0; /* client did not ask for recursion */
	int n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_int_equal(m.flags & NX_DNS_F_RD, 0);
	assert_int_equal(m.flags & NX_DNS_F_RA, NX_DNS_F_RA);
	/* a different question name is refused */
	fill_question(&cq, "www.example.org", NX_DNS_T_A);
	assert_int_equal(nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL),
			 NX_EMALFORMED);
	fill_question(&cq, "ww.example.com", NX_DNS_T_A);
	assert_int_equal(nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL),
			 NX_EMALFORMED);
	/* no client question: bytes relayed as they are */
	ctx.q = NULL;
	n = nx_dns_relay(out, sizeof(out), up, &um, &ctx, 0, -1, NULL, NULL);
	assert_int_equal(nx_dns_msg_parse(out, (size_t)n, &m), 0);
	assert_memory_equal(out + 12, up + 12, 17);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(build_error_edns),
	    cmocka_unit_test(build_error_plain),
	    cmocka_unit_test(build_error_extended_rcode),
	    cmocka_unit_test(build_any),
	    cmocka_unit_test(build_query),
	    cmocka_unit_test(build_answer),
	    cmocka_unit_test(build_answer_truncates),
	    cmocka_unit_test(relay_basic),
	    cmocka_unit_test(relay_ttl_sub),
	    cmocka_unit_test(relay_ttl_overflow),
	    cmocka_unit_test(relay_strip_opt),
	    cmocka_unit_test(relay_opt_not_last),
	    cmocka_unit_test(relay_ede),
	    cmocka_unit_test(relay_ext_rcode),
	    cmocka_unit_test(relay_truncates),
	    cmocka_unit_test(relay_rd_and_question),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

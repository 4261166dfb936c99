/* Whole-message parsing (dns/msg.h): sections, counts, compression, OPT/EDNS/EDE, TTLs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "helpers.h"

static uint8_t buf[70000];
static struct nx_dns_msg m;

static void query_with_edns(void **state)
{
	struct composer c;
	comp_init(&c, buf, sizeof(buf), 0x1234, NX_DNS_F_RD | NX_DNS_F_CD);
	comp_question(&c, "WwW.Example.COM", NX_DNS_T_AAAA);
	comp_opt(&c, 4096, 0, true, NULL, 0);
	assert_int_equal(c.wr.err, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.id, 0x1234);
	assert_int_equal(m.flags, NX_DNS_F_RD | NX_DNS_F_CD);
	assert_int_equal(m.qdcount, 1);
	assert_int_equal(m.arcount, 1);
	assert_true(m.has_question);
	assert_int_equal(m.q.name_len, 17);
	assert_memory_equal(m.q.name, "\003WwW\007Example\003COM", 17); /* case kept */
	assert_int_equal(m.q.qtype, NX_DNS_T_AAAA);
	assert_int_equal(m.q.qclass, NX_DNS_C_IN);
	assert_int_equal(m.question_off, 12);
	assert_int_equal(m.question_end, 12 + 17 + 4);
	assert_int_equal(m.answer_end, m.question_end);
	assert_int_equal(m.authority_end, m.question_end);
	assert_int_equal(m.opt_off, m.question_end);
	assert_int_equal(m.opt_len, 11);
	assert_int_equal(m.opt_index, 0);
	assert_true(m.edns.present);
	assert_int_equal(m.edns.udp_size, 4096);
	assert_true(m.edns.do_bit);
	assert_int_equal(m.edns.version, 0);
	assert_int_equal(m.edns.ede_code, -1);
	assert_int_equal(m.ttl_count, 0);
	assert_int_equal(m.min_ttl, UINT32_MAX);
	assert_int_equal(m.len, c.wr.pos);
	assert_int_equal(nx_dns_udp_limit(&m), 1232);
}

static void query_plain(void **state)
{
	struct composer c;
	comp_init(&c, buf, sizeof(buf), 7, 0);
	comp_question(&c, ".", NX_DNS_T_NS);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_false(m.edns.present);
	assert_int_equal(m.opt_off, 0);
	assert_int_equal(m.q.name_len, 1);
	assert_int_equal(nx_dns_udp_limit(&m), 512);
	/* no question at all */
	comp_init(&c, buf, sizeof(buf), 7, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_false(m.has_question);
	assert_int_equal(m.question_end, 12);
}

/* A typical recursive answer: CNAME chain, A records, authority NS, glue, OPT at the end. */
static size_t build_response(uint8_t *out, size_t cap)
{
	struct composer c;
	comp_init(&c, out, cap, 0xbeef, NX_DNS_F_QR | NX_DNS_F_RD | NX_DNS_F_RA);
	comp_question(&c, "www.example.com", NX_DNS_T_A); /* name at 12 */
	/* www.example.com CNAME cdn.example.com (rdata "cdn" + ptr to example.com at 16) */
	const uint8_t cname[] = {3, 'c', 'd', 'n', 0xc0, 16};
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_CNAME, 1, 300, cname, sizeof(cname));
	size_t cdn_off = c.wr.pos - sizeof(cname);
	const uint8_t a1[] = {192, 0, 2, 1}, a2[] = {192, 0, 2, 2};
	uint16_t cdn_ptr = (uint16_t)(0xc000 | cdn_off);
	comp_rr(&c, 1, NULL, cdn_ptr, NX_DNS_T_A, 1, 60, a1, 4);
	comp_rr(&c, 1, NULL, cdn_ptr, NX_DNS_T_A, 1, 61, a2, 4);
	const uint8_t ns[] = {3, 'n', 's', '1', 0xc0, 16};
	comp_rr(&c, 2, NULL, 0xc010, NX_DNS_T_NS, 1, 86400, ns, sizeof(ns));
	size_t ns_off = c.wr.pos - sizeof(ns);
	comp_rr(&c, 3, NULL, (uint16_t)(0xc000 | ns_off), NX_DNS_T_A, 1, 3600, a1, 4);
	comp_opt(&c, 1232, 0, false, NULL, 0);
	assert_int_equal(c.wr.err, 0);
	return c.wr.pos;
}

static void response_compressed(void **state)
{
	size_t len = build_response(buf, sizeof(buf));
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	assert_int_equal(m.ancount, 3);
	assert_int_equal(m.nscount, 1);
	assert_int_equal(m.arcount, 2);
	assert_int_equal(m.ttl_count, 5);
	assert_false(m.ttl_overflow);
	assert_int_equal(m.min_ttl, 60);
	assert_int_equal(get32(buf + m.ttl_off[0]), 300);
	assert_int_equal(get32(buf + m.ttl_off[1]), 60);
	assert_int_equal(get32(buf + m.ttl_off[2]), 61);
	assert_int_equal(get32(buf + m.ttl_off[3]), 86400);
	assert_int_equal(get32(buf + m.ttl_off[4]), 3600);
	assert_true(m.answer_end > m.question_end);
	assert_true(m.authority_end > m.answer_end);
	assert_int_equal(m.opt_index, 1);
	assert_int_equal(m.opt_off + m.opt_len, len);
	/* the reader decompresses the CNAME target in place */
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, len);
	rd.pos = m.ttl_off[0] + 6;
	uint8_t n[NX_DNS_NAME_MAX];
	size_t l = nx_dns_rd_name(&rd, n);
	assert_int_equal(l, 17);
	assert_memory_equal(n, "\003cdn\007example\003com", 17);
}

static void response_min_ttl_rules(void **state)
{
	/* additional-section TTLs do not count; a TTL with the top bit set counts as 0 */
	struct composer c;
	const uint8_t a[] = {10, 0, 0, 1};
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "a.example", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 500, a, 4);
	comp_rr(&c, 3, NULL, 0xc00c, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.min_ttl, 500);
	assert_int_equal(m.ttl_count, 2);

	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "a.example", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 500, a, 4);
	comp_rr(&c, 2, NULL, 0xc00c, NX_DNS_T_A, 1, 0x80000001u, a, 4);
	comp_rr(&c, 3, NULL, 0xc00c, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.min_ttl, 0);
	assert_int_equal(m.ttl_count, 3);
}

static void ttl_overflow(void **state)
{
	struct composer c;
	const uint8_t a[] = {10, 0, 0, 1};
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "many.example", NX_DNS_T_A);
	for (int i = 0; i < NX_DNS_MAX_TTLS + 2; i++) {
		comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 1000u + (uint32_t)i, a, 4);
	}
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.ttl_count, NX_DNS_MAX_TTLS);
	assert_true(m.ttl_overflow);
	assert_int_equal(m.min_ttl, 1000);
	assert_int_equal(m.ancount, NX_DNS_MAX_TTLS + 2);
}

static void edns_ede(void **state)
{
	/* cookie option (10), EDE 18 "Prohibited by policy", a second EDE, padding (12) */
	uint8_t opts[128];
	struct nx_dns_wr w;
	nx_dns_wr_init(&w, opts, sizeof(opts));
	nx_dns_wr_u16(&w, 10);
	nx_dns_wr_u16(&w, 8);
	nx_dns_wr_bytes(&w, "cookie!!", 8);
	nx_dns_wr_u16(&w, 15);
	nx_dns_wr_u16(&w, 2 + 20);
	nx_dns_wr_u16(&w, 18);
	nx_dns_wr_bytes(&w, "Prohibited by policy", 20);
	nx_dns_wr_u16(&w, 15);
	nx_dns_wr_u16(&w, 2);
	nx_dns_wr_u16(&w, 3);
	nx_dns_wr_u16(&w, 12);
	nx_dns_wr_u16(&w, 0);
	struct composer c;
	comp_init(&c, buf, sizeof(buf), 9, NX_DNS_F_QR | 5);
	comp_question(&c, "blocked.example", NX_DNS_T_A);
	comp_opt(&c, 1400, 1, true, opts, (uint16_t)w.pos);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_true(m.edns.present);
	assert_int_equal(m.edns.udp_size, 1400);
	assert_int_equal(m.edns.ext_rcode, 1);
	assert_true(m.edns.do_bit);
	assert_int_equal(m.edns.ede_code, 18);
	assert_int_equal(m.edns.ede_text_len, 20);
	assert_memory_equal(m.edns.ede_text, "Prohibited by policy", 20);
	assert_int_equal(m.edns.unknown_options, 3);
	assert_int_equal(NX_DNS_RCODE(m.flags), 5);

	/* EDE with a long text: kept truncated; EDE without info-code: counted, not kept */
	nx_dns_wr_init(&w, opts, sizeof(opts));
	nx_dns_wr_u16(&w, 15);
	nx_dns_wr_u16(&w, 1);
	nx_dns_wr_u8(&w, 0);
	comp_init(&c, buf, sizeof(buf), 9, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_opt(&c, 512, 0, false, opts, (uint16_t)w.pos);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.edns.ede_code, -1);
	assert_int_equal(m.edns.unknown_options, 1);
	assert_false(m.edns.do_bit);

	uint8_t big[300];
	nx_dns_wr_init(&w, big, sizeof(big));
	nx_dns_wr_u16(&w, 15);
	nx_dns_wr_u16(&w, 2 + 200);
	nx_dns_wr_u16(&w, 0);
	for (int i = 0; i < 200; i++) {
		nx_dns_wr_u8(&w, (uint8_t)('a' + i % 26));
	}
	comp_init(&c, buf, sizeof(buf), 9, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_opt(&c, 512, 0, false, big, (uint16_t)w.pos);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.edns.ede_code, 0);
	assert_int_equal(m.edns.ede_text_len, NX_DNS_EDE_TEXT_MAX);
	assert_int_equal(m.edns.ede_text[127], 'a' + 127 % 26);
}

static void edns_bad_options(void **state)
{
	/* option length running past the OPT RDATA */
	const uint8_t opts[] = {0, 10, 0, 8, 1, 2, 3};
	struct composer c;
	comp_init(&c, buf, sizeof(buf), 9, 0);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_opt(&c, 512, 0, false, opts, sizeof(opts));
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* a dangling partial option header */
	comp_init(&c, buf, sizeof(buf), 9, 0);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_opt(&c, 512, 0, false, opts, 3);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* header still filled for FORMERR, and the question too */
	assert_int_equal(m.id, 9);
	assert_int_equal(m.arcount, 1);
	assert_true(m.has_question);
	assert_int_equal(m.q.name_len, 3);
}

static void bad_opt_placement(void **state)
{
	struct composer c;
	/* OPT in the answer section */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, ".", 0, NX_DNS_T_OPT, 512, 0, NULL, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* OPT in authority */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 2, ".", 0, NX_DNS_T_OPT, 512, 0, NULL, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* owner not root */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 3, "foo", 0, NX_DNS_T_OPT, 512, 0, NULL, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* two OPTs */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_opt(&c, 512, 0, false, NULL, 0);
	comp_opt(&c, 512, 0, false, NULL, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	assert_int_equal(m.arcount, 2);
	/* OPT not last is fine for the parser (the relay drops what follows) */
	const uint8_t a[] = {1, 2, 3, 4};
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_opt(&c, 512, 0, false, NULL, 0);
	comp_rr(&c, 3, NULL, 0xc00c, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.opt_index, 0);
	assert_int_equal(m.ttl_count, 1);
}

static void counts_and_trailing(void **state)
{
	struct composer c;
	const uint8_t a[] = {1, 2, 3, 4};
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 5, a, 4);
	size_t len = c.wr.pos;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), 0);
	/* trailing byte */
	buf[len] = 0;
	assert_int_equal(nx_dns_msg_parse(buf, len + 1, &m), NX_EMALFORMED);
	/* a count that overruns */
	buf[7] = 2;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), NX_EMALFORMED);
	assert_int_equal(m.ancount, 2);
	buf[7] = 1;
	/* each truncation point is malformed */
	for (size_t l = 0; l < len; l++) {
		assert_int_equal(nx_dns_msg_parse(buf, l, &m), NX_EMALFORMED);
	}
	/* qdcount overrun */
	buf[5] = 2;
	assert_int_equal(nx_dns_msg_parse(buf, len, &m), NX_EMALFORMED);
	assert_true(m.has_question);
	/* short header */
	assert_int_equal(nx_dns_msg_parse(buf, 11, &m), NX_EMALFORMED);
	assert_int_equal(nx_dns_hdr_parse(buf, 11, &m), NX_EMALFORMED);
	assert_int_equal(nx_dns_hdr_parse(buf, 12, &m), 0);
	assert_int_equal(m.qdcount, 2);
	assert_int_equal(m.ancount, 1);
	assert_int_equal(m.flags, NX_DNS_F_QR);
}

static void pointer_targets(void **state)
{
	struct composer c;
	const uint8_t a[] = {1, 2, 3, 4};
	/* question name as a pointer into the header */
	comp_init(&c, buf, sizeof(buf), 0x0100, 0);
	nx_dns_wr_u16(&c.wr, 0xc000);
	nx_dns_wr_u32(&c.wr, 0x00010001);
	comp_count(&c, 0);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	assert_false(m.has_question);

	/* owner pointing into the middle of the question name: a label start, fine */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "www.example.com", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc010, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	/* ... but not into the middle of a label */
	comp_rr(&c, 1, NULL, 0xc011, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);

	/* pointer into opaque RDATA holding a name: allowed (BIND compresses against LP, RRSIG) */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_TXT);
	const uint8_t txt[] = {3, 'a', 'b', 'c', 0};
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_TXT, 1, 5, txt, sizeof(txt));
	size_t txt_off = c.wr.pos - sizeof(txt);
	comp_rr(&c, 1, NULL, (uint16_t)(0xc000 | txt_off), NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);

	/* pointer into the middle of a label: 'x' (0x78) reads as a reserved label type */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00d, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);

	/*
	 * A target whose label runs over the pointer that refers to it (no loop, all bytes
	 * opaque): SOA mname {03 06 'a' 'b' 00}, rname = pointer to mname+1, whose 6-byte label
	 * covers the pointer and the first serial byte, then serial[1] = 0 ends it. A compressor
	 * never writes this; the target must end before the pointing sequence starts.
	 */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	uint8_t soa[27] = {3, 6, 'a', 'b', 0};
	size_t mname = c.wr.pos + 2 + 10;
	soa[5] = (uint8_t)(0xc0 | (mname + 1) >> 8);
	soa[6] = (uint8_t)(mname + 1);
	soa[7] = 0x11;
	comp_rr(&c, 2, NULL, 0xc00c, NX_DNS_T_SOA, 1, 5, soa, sizeof(soa));
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, c.wr.pos);
	rd.pos = mname + 5;
	nx_dns_rd_skip_name(&rd);
	assert_int_equal(rd.err, NX_EMALFORMED); /* the public reader applies the same rule */

	/* pointer to a TTL field (00 00 00 00 reads as the root): rejected, the relay rewrites it
	 */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 0, a, 4);
	size_t ttl_off = c.wr.pos - 4 - 2 - 4;
	size_t good_len = c.wr.pos;
	comp_rr(&c, 1, NULL, (uint16_t)(0xc000 | (ttl_off + 3)), NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* the same bytes reached without a pointer would be fine: the rule is about pointers */
	assert_int_equal(nx_dns_msg_parse(buf, good_len, &m), NX_EMALFORMED); /* count is 2 */
	buf[7] = 1;
	assert_int_equal(nx_dns_msg_parse(buf, good_len, &m), 0);
	/* pointer to the question's type/class bytes: rejected */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", 0x0100); /* qtype 00 01 00 would read as root after 0x01 0x00 */
	comp_rr(&c, 1, NULL, 0xc00f, NX_DNS_T_A, 1, 5, a, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
}

static void rdata_names(void **state)
{
	struct composer c;
	/* CNAME whose name does not fill RDLENGTH */
	const uint8_t cn[] = {1, 'a', 0, 0xff};
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_CNAME, 1, 5, cn, sizeof(cn));
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* CNAME name running past RDLENGTH */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_CNAME, 1, 5, cn, 2);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* A and AAAA have fixed sizes in class IN */
	const uint8_t addr[16] = {0};
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_A);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 1, 5, addr, 5);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_AAAA);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_AAAA, 1, 5, addr, 4);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_AAAA);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_AAAA, 1, 5, addr, 16);
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_A, 255, 0, addr, 0); /* UPDATE-style delete */
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	/* SOA: two names + 20 bytes, compressed */
	uint8_t soa[64];
	struct nx_dns_wr w;
	nx_dns_wr_init(&w, soa, sizeof(soa));
	nx_dns_wr_bytes(&w, "\002ns\300\014", 5);
	nx_dns_wr_bytes(&w, "\004host\300\014", 7);
	for (int i = 0; i < 5; i++) {
		nx_dns_wr_u32(&w, 3600);
	}
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR | NX_DNS_NXDOMAIN);
	comp_question(&c, "nope.example", NX_DNS_T_A);
	comp_rr(&c, 2, NULL, 0xc011, NX_DNS_T_SOA, 1, 900, soa, (uint16_t)w.pos);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.min_ttl, 900);
	/* SOA with 19 fixed bytes */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR | NX_DNS_NXDOMAIN);
	comp_question(&c, "nope.example", NX_DNS_T_A);
	comp_rr(&c, 2, NULL, 0xc011, NX_DNS_T_SOA, 1, 900, soa, (uint16_t)w.pos - 1);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* MX with a pointer to a name inside an earlier CNAME's RDATA: fine */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_MX);
	const uint8_t cname[] = {4, 'm', 'a', 'i', 'l', 0};
	comp_rr(&c, 1, NULL, 0xc00c, NX_DNS_T_CNAME, 1, 5, cname, sizeof(cname));
	size_t cn_off = c.wr.pos - sizeof(cname);
	const uint8_t mx[] = {0, 10, (uint8_t)(0xc0 | cn_off >> 8), (uint8_t)cn_off};
	comp_rr(&c, 1, NULL, (uint16_t)(0xc000 | cn_off), NX_DNS_T_MX, 1, 5, mx, sizeof(mx));
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
}

static void too_long(void **state)
{
	/* 65536 bytes: one TXT-ish opaque RR cannot make it valid, and the size alone rejects */
	struct composer c;
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_TXT);
	static uint8_t blob[65535];
	comp_rr(&c, 1, NULL, 0xc00c, 0xff00, 1, 5, blob, (uint16_t)(65536 - c.wr.pos - 12));
	assert_int_equal(c.wr.pos, 65536);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), NX_EMALFORMED);
	/* one byte shorter parses */
	comp_init(&c, buf, sizeof(buf), 1, NX_DNS_F_QR);
	comp_question(&c, "x", NX_DNS_T_TXT);
	comp_rr(&c, 1, NULL, 0xc00c, 0xff00, 1, 5, blob, (uint16_t)(65535 - c.wr.pos - 12));
	assert_int_equal(c.wr.pos, 65535);
	assert_int_equal(nx_dns_msg_parse(buf, c.wr.pos, &m), 0);
	assert_int_equal(m.len, 65535);
}

static void names_for_logs(void **state)
{
	char b[16];
	assert_string_equal(nx_dns_type_name(NX_DNS_T_AAAA, b), "AAAA");
	assert_string_equal(nx_dns_type_name(NX_DNS_T_HTTPS, b), "HTTPS");
	assert_string_equal(nx_dns_type_name(65280, b), "TYPE65280");
	assert_ptr_equal(nx_dns_type_name(65280, b), b);
	assert_string_equal(nx_dns_rcode_name(NX_DNS_NXDOMAIN), "NXDOMAIN");
	assert_string_equal(nx_dns_rcode_name(NX_DNS_BADVERS), "BADVERS");
	assert_string_equal(nx_dns_rcode_name(13), "UNKNOWN");
	assert_string_equal(nx_dns_rcode_name(-1), "UNKNOWN");
	assert_string_equal(nx_dns_rcode_name(4095), "UNKNOWN");
}

static void udp_limit(void **state)
{
	struct nx_dns_msg q = {0};
	q.edns.udp_size = 4096;
	assert_int_equal(nx_dns_udp_limit(&q), 512);
	q.edns.present = true;
	assert_int_equal(nx_dns_udp_limit(&q), 1232);
	q.edns.udp_size = 100;
	assert_int_equal(nx_dns_udp_limit(&q), 512);
	q.edns.udp_size = 1000;
	assert_int_equal(nx_dns_udp_limit(&q), 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(query_with_edns),	   cmocka_unit_test(query_plain),
	    cmocka_unit_test(response_compressed), cmocka_unit_test(response_min_ttl_rules),
	    cmocka_unit_test(ttl_overflow),	   cmocka_unit_test(edns_ede),
	    cmocka_unit_test(edns_bad_options),	   cmocka_unit_test(bad_opt_placement),
	    cmocka_unit_test(counts_and_trailing), cmocka_unit_test(pointer_targets),
	    cmocka_unit_test(rdata_names),	   cmocka_unit_test(too_long),
	    cmocka_unit_test(names_for_logs),	   cmocka_unit_test(udp_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

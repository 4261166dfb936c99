/*
 * libFuzzer target for the DNS codec: nx_dns_msg_parse on arbitrary bytes and, when it parses,
 * the relay and the reply builders into fixed buffers, whose output must parse again and keep
 * the promised properties (id, question case, OPT, TC, size limit, TTLs never grow). Also the
 * public name reader and the text form round trip. A broken property aborts (= a crash).
 * Built twice: with -fsanitize=fuzzer,... when meson -Dfuzzing=true, and always as part of
 * fuzz_msg_replay (tests/fuzz/replay.c) so the corpora replay in the normal test run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dns/msg.h"
#include "dns/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_msg: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#x);                                                               \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static uint8_t out[NX_DNS_MSG_MAX];
static uint8_t out2[NX_DNS_MSG_MAX];

static uint32_t ttl_norm(uint32_t v)
{
	return v > 0x7fffffffu ? 0 : v;
}

/* Names read with the public reader survive text form and compare equal to themselves. */
static void names(const uint8_t *data, size_t size)
{
	if (size < 2) {
		return;
	}
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, data, size);
	rd.pos = data[0] % size;
	uint8_t name[NX_DNS_NAME_MAX], back[NX_DNS_NAME_MAX];
	size_t start = rd.pos;
	size_t n = nx_dns_rd_name(&rd, name);
	struct nx_dns_rd rd2;
	nx_dns_rd_init(&rd2, data, size);
	rd2.pos = start;
	nx_dns_rd_skip_name(&rd2);
	CHECK((n == 0) == (rd2.err != 0));
	if (n == 0) {
		return;
	}
	CHECK(rd2.pos == rd.pos);
	CHECK(n <= NX_DNS_NAME_MAX);
	CHECK(nx_dns_name_len(name, n) == n);
	char text[NX_DNS_TEXT_MAX];
	int tl = nx_dns_name_to_text(name, n, text, sizeof(text));
	CHECK(tl > 0 && (size_t)tl < sizeof(text));
	CHECK(nx_dns_name_from_text(text, back) == (int)n);
	CHECK(memcmp(name, back, n) == 0);
	CHECK(nx_dns_name_eq(name, n, back, n));
	CHECK(nx_dns_name_in_zone(name, n, back, n));
	nx_dns_name_lower(back, n);
	CHECK(nx_dns_name_eq(name, n, back, n));
	CHECK(nx_dns_name_labels(name, n) <= 127);
}

static void check_relay(const uint8_t *data, const struct nx_dns_msg *m)
{
	struct nx_dns_msg r;
	uint16_t sel = m->id;
	struct nx_dns_reply_ctx ctx = {
	    .id = (uint16_t)(m->id ^ 0x5a5a),
	    .qflags = (uint16_t)(sel & 1 ? NX_DNS_F_RD : 0),
	    .q = m->has_question ? &m->q : NULL,
	    .edns = (sel & 2) != 0,
	    .do_bit = (sel & 4) != 0,
	    .max_size = sel & 8 ? NX_DNS_MSG_MAX : nx_dns_udp_limit(m),
	};
	/* the client's question: same name, other case */
	struct nx_dns_question cq;
	if (ctx.q) {
		cq = m->q;
		nx_dns_name_lower(cq.name, cq.name_len);
		ctx.q = &cq;
	}
	uint32_t ttl_sub = sel & 16 ? (uint32_t)m->len * 977u : 0;
	int ede = sel & 32 ? NX_DNS_EDE_BLOCKED : NX_DNS_EDE_NONE;
	bool tc = false;
	int n = nx_dns_relay(out, sizeof(out), data, m, &ctx, ttl_sub, ede, "fuzz", &tc);
	CHECK(n > 0);
	CHECK((size_t)n <= ctx.max_size);
	CHECK(nx_dns_msg_parse(out, (size_t)n, &r) == 0);
	CHECK(r.id == ctx.id);
	CHECK((r.flags & NX_DNS_F_RD) == (ctx.qflags & NX_DNS_F_RD));
	CHECK(r.edns.present == ctx.edns);
	CHECK(!tc || (r.flags & NX_DNS_F_TC));
	if (ctx.edns) {
		CHECK(r.edns.udp_size == NX_DNS_EDNS_OUR_SIZE);
		CHECK(r.edns.do_bit == ctx.do_bit);
		CHECK(r.edns.unknown_options == 0);
		CHECK(r.edns.ext_rcode == m->edns.ext_rcode);
		if (ede >= 0) {
			CHECK(r.edns.ede_code == ede);
		} else {
			CHECK(r.edns.ede_code == m->edns.ede_code);
		}
	}
	if (ctx.q) {
		CHECK(r.has_question);
		CHECK(r.q.name_len == cq.name_len);
		CHECK(memcmp(r.q.name, cq.name, cq.name_len) == 0);
	}
	if (tc) {
		CHECK(r.ancount == 0 && r.nscount == 0);
		return;
	}
	/* same sections up to the dropped OPT; TTLs only shrink */
	CHECK(r.ancount == m->ancount && r.nscount == m->nscount);
	CHECK(r.answer_end == m->answer_end && r.authority_end == m->authority_end);
	for (unsigned i = 0; i < r.ttl_count && i < m->ttl_count; i++) {
		CHECK(r.ttl_off[i] == m->ttl_off[i]);
		uint32_t before = ttl_norm(
		    (uint32_t)data[m->ttl_off[i]] << 24 | (uint32_t)data[m->ttl_off[i] + 1] << 16 |
		    (uint32_t)data[m->ttl_off[i] + 2] << 8 | data[m->ttl_off[i] + 3]);
		uint32_t after = (uint32_t)out[r.ttl_off[i]] << 24 |
				 (uint32_t)out[r.ttl_off[i] + 1] << 16 |
				 (uint32_t)out[r.ttl_off[i] + 2] << 8 | out[r.ttl_off[i] + 3];
		CHECK(after == (before > ttl_sub ? before - ttl_sub : 0));
	}
	/* relaying the relayed message again is stable */
	ctx.max_size = NX_DNS_MSG_MAX;
	int n2 = nx_dns_relay(out2, sizeof(out2), out, &r, &ctx, 0, ede, "fuzz", &tc);
	CHECK(n2 == n && !tc);
	CHECK(memcmp(out, out2, (size_t)n) == 0);
}

static void check_builders(const struct nx_dns_msg *m)
{
	struct nx_dns_msg r;
	struct nx_dns_reply_ctx ctx = {
	    .id = m->id,
	    .qflags = m->flags,
	    .q = m->has_question ? &m->q : NULL,
	    .edns = m->edns.present,
	    .do_bit = m->edns.do_bit,
	    .max_size = nx_dns_udp_limit(m),
	};
	int rcode = m->edns.present && (m->id & 1) ? NX_DNS_BADVERS : NX_DNS_FORMERR;
	int n = nx_dns_build_error(out, sizeof(out), &ctx, rcode, NX_DNS_EDE_OTHER, "x");
	CHECK(n > 0 && (size_t)n <= ctx.max_size);
	CHECK(nx_dns_msg_parse(out, (size_t)n, &r) == 0);
	CHECK(r.id == m->id && (r.flags & NX_DNS_F_QR));
	CHECK(((int)r.edns.ext_rcode << 4 | NX_DNS_RCODE(r.flags)) == rcode);
	if (!ctx.q) {
		return;
	}
	CHECK(r.q.name_len == m->q.name_len && memcmp(r.q.name, m->q.name, m->q.name_len) == 0);
	n = nx_dns_build_any_hinfo(out, sizeof(out), &ctx, 3600);
	CHECK(n > 0);
	CHECK(nx_dns_msg_parse(out, (size_t)n, &r) == 0);
	CHECK(r.ancount == 1 || (r.flags & NX_DNS_F_TC));
	n = nx_dns_build_query(out, sizeof(out), 7, &m->q, true, false);
	CHECK(n > 0);
	CHECK(nx_dns_msg_parse(out, (size_t)n, &r) == 0);
	CHECK(r.q.qtype == m->q.qtype && r.q.qclass == m->q.qclass);
	CHECK(nx_dns_name_eq(r.q.name, r.q.name_len, m->q.name, m->q.name_len));
	/* an answer whose RDATA is the question name (CNAME) and whose owner is given */
	struct nx_dns_rr_spec rr[2] = {
	    {.type = NX_DNS_T_CNAME, .ttl = 1, .rdata = m->q.name, .rdlen = m->q.name_len},
	    {.owner = m->q.name,
	     .owner_len = m->q.name_len,
	     .type = NX_DNS_T_TXT,
	     .ttl = 2,
	     .rdata = (const uint8_t *)"\003abc",
	     .rdlen = 4},
	};
	n = nx_dns_build_answer(out, sizeof(out), &ctx, NX_DNS_NOERROR, true, rr, 2, rr + 1, 1,
				NX_DNS_EDE_FILTERED, NULL);
	CHECK(n > 0 && (size_t)n <= ctx.max_size);
	CHECK(nx_dns_msg_parse(out, (size_t)n, &r) == 0);
	CHECK((r.ancount == 2 && r.nscount == 1) || (r.flags & NX_DNS_F_TC));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	names(data, size);
	struct nx_dns_msg m;
	if (nx_dns_msg_parse(data, size, &m) < 0) {
		if (size >= NX_DNS_HDR_LEN) {
			/* the FORMERR path: header (and maybe question) from a failed parse */
			struct nx_dns_reply_ctx ctx = {.id = m.id,
						       .qflags = m.flags,
						       .q = m.has_question ? &m.q : NULL,
						       .max_size = NX_DNS_UDP_MIN};
			struct nx_dns_msg r;
			int n =
			    nx_dns_build_error(out, sizeof(out), &ctx, NX_DNS_FORMERR, -1, NULL);
			CHECK(n > 0);
			CHECK(nx_dns_msg_parse(out, (size_t)n, &r) == 0);
		}
		return 0;
	}
	CHECK(m.len == size);
	CHECK(m.question_end <= m.answer_end && m.answer_end <= m.authority_end &&
	      m.authority_end <= size);
	CHECK(!m.opt_off || (m.opt_off >= m.authority_end && m.opt_off + m.opt_len <= size));
	check_relay(data, &m);
	check_builders(&m);
	return 0;
}

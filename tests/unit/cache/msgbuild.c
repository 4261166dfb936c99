#include "msgbuild.h"

#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

uint8_t tname(const char *text, uint8_t out[NX_DNS_NAME_MAX])
{
	size_t n = 0;
	while (*text) {
		const char *dot = strchr(text, '.');
		size_t l = dot ? (size_t)(dot - text) : strlen(text);
		out[n++] = (uint8_t)l;
		memcpy(out + n, text, l);
		n += l;
		text += l + (dot ? 1 : 0);
	}
	out[n++] = 0;
	return (uint8_t)n;
}

void tkey_init(struct tkey *t, const char *name, uint16_t qtype, bool do_bit, bool cd)
{
	t->k = (struct nx_cache_key){
	    .name = t->wire,
	    .name_len = tname(name, t->wire),
	    .qtype = qtype,
	    .qclass = NX_DNS_C_IN,
	    .do_bit = do_bit,
	    .cd = cd,
	};
}

void tmsg_start(struct tmsg *t, const char *qname, uint16_t qtype, uint16_t qclass, uint16_t flags)
{
	memset(&t->m, 0, sizeof(t->m));
	memset(t->buf, 0, NX_DNS_HDR_LEN);
	t->m.id = 0x1234;
	t->m.flags = (uint16_t)(NX_DNS_F_QR | NX_DNS_F_RD | NX_DNS_F_RA | flags);
	t->m.edns.ede_code = -1;
	t->m.min_ttl = UINT32_MAX;
	t->pos = NX_DNS_HDR_LEN;
	uint8_t n = tname(qname, t->buf + t->pos);
	memcpy(t->m.q.name, t->buf + t->pos, n);
	t->m.q.name_len = n;
	t->m.q.qtype = qtype;
	t->m.q.qclass = qclass;
	t->pos += n;
	put16(t->buf + t->pos, qtype);
	put16(t->buf + t->pos + 2, qclass);
	t->pos += 4;
	t->m.qdcount = 1;
	t->m.has_question = true;
	t->m.question_off = NX_DNS_HDR_LEN;
	t->m.question_end = (uint16_t)t->pos;
	t->m.answer_end = t->m.authority_end = (uint16_t)t->pos;
	t->sec = T_AN;
}

static void advance(struct tmsg *t, int sec)
{
	while (t->sec < sec) {
		if (t->sec == T_AN) {
			t->m.answer_end = (uint16_t)t->pos;
		}
		t->m.authority_end = (uint16_t)t->pos;
		t->sec++;
	}
}

void tmsg_rr(struct tmsg *t, int sec, uint16_t type, uint32_t ttl, const uint8_t *rdata,
	     uint16_t rdlen)
{
	advance(t, sec);
	uint8_t *p = t->buf + t->pos;
	put16(p, 0xc00c);
	put16(p + 2, type);
	put16(p + 4, NX_DNS_C_IN);
	put32(p + 6, ttl);
	put16(p + 10, rdlen);
	if (rdlen) {
		memcpy(p + 12, rdata, rdlen);
	}
	uint16_t ttl_off = (uint16_t)(t->pos + 6);
	t->pos += 12 + (size_t)rdlen;
	if (t->m.ttl_count < NX_DNS_MAX_TTLS) {
		t->m.ttl_off[t->m.ttl_count++] = ttl_off;
	} else {
		t->m.ttl_overflow = true;
	}
	if (sec != T_AR && ttl < t->m.min_ttl) {
		t->m.min_ttl = ttl;
	}
	if (sec == T_AN) {
		t->m.ancount++;
		t->m.answer_end = t->m.authority_end = (uint16_t)t->pos;
	} else if (sec == T_NS) {
		t->m.nscount++;
		t->m.authority_end = (uint16_t)t->pos;
	} else {
		t->m.arcount++;
	}
}

void tmsg_soa(struct tmsg *t, uint32_t ttl, uint32_t minimum)
{
	uint8_t rd[24];
	put16(rd, 0xc00c);     /* mname -> qname */
	put16(rd + 2, 0xc00c); /* rname -> qname */
	put32(rd + 4, 2024010101);
	put32(rd + 8, 7200);
	put32(rd + 12, 3600);
	put32(rd + 16, 1209600);
	put32(rd + 20, minimum);
	tmsg_rr(t, T_NS, NX_DNS_T_SOA, ttl, rd, sizeof(rd));
}

void tmsg_opt(struct tmsg *t, bool do_bit, int ede_code, const char *ede_text)
{
	advance(t, T_AR);
	uint8_t *p = t->buf + t->pos;
	size_t tl = ede_text ? strlen(ede_text) : 0;
	uint16_t rdlen = (uint16_t)(ede_code >= 0 ? 4 + 2 + tl : 0);
	p[0] = 0;
	put16(p + 1, NX_DNS_T_OPT);
	put16(p + 3, 1232);
	put32(p + 5, do_bit ? 0x8000 : 0);
	put16(p + 9, rdlen);
	if (ede_code >= 0) {
		put16(p + 11, 15);
		put16(p + 13, (uint16_t)(2 + tl));
		put16(p + 15, (uint16_t)ede_code);
		memcpy(p + 17, ede_text, tl);
	}
	t->m.opt_off = (uint16_t)t->pos;
	t->m.opt_len = (uint16_t)(11 + rdlen);
	t->m.opt_index = t->m.arcount;
	t->m.edns = (struct nx_dns_edns){
	    .present = true,
	    .udp_size = 1232,
	    .do_bit = do_bit,
	    .ede_code = ede_code,
	    .ede_text_len = (uint16_t)tl,
	};
	memcpy(t->m.edns.ede_text, ede_text ? ede_text : "", tl);
	t->pos += t->m.opt_len;
	t->m.arcount++;
}

void tmsg_finish(struct tmsg *t)
{
	advance(t, T_AR);
	put16(t->buf, t->m.id);
	put16(t->buf + 2, t->m.flags);
	put16(t->buf + 4, t->m.qdcount);
	put16(t->buf + 6, t->m.ancount);
	put16(t->buf + 8, t->m.nscount);
	put16(t->buf + 10, t->m.arcount);
	t->m.len = (uint16_t)t->pos;
}

uint32_t tmsg_ttl_at(const uint8_t *buf, const struct nx_dns_msg *m, unsigned i)
{
	const uint8_t *p = buf + m->ttl_off[i];
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

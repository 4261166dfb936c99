/*
 * Whole-message parser: header, sections, OPT/EDNS/EDE, TTL offsets. See dns/msg.h.
 */
#include "dns/msg.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "dns/impl.h"

#define EDNS_OPT_EDE 15	    /* RFC 8914 option code */
#define TTL_MAX 0x7fffffffu /* RFC 2181 8: a TTL with the top bit set means 0 */

enum section { SEC_AN, SEC_NS, SEC_AR };

/* Lives on worker stacks and in per-query slots: keep growth deliberate. */
_Static_assert(sizeof(struct nx_dns_msg) <= 768, "struct nx_dns_msg grew");

static void msg_reset(struct nx_dns_msg *m)
{
	m->id = 0;
	m->flags = 0;
	m->qdcount = m->ancount = m->nscount = m->arcount = 0;
	m->has_question = false;
	m->q.name[0] = 0;
	m->q.name_len = 0;
	m->q.qtype = 0;
	m->q.qclass = 0;
	m->question_off = 0;
	m->question_end = m->answer_end = m->authority_end = 0;
	m->opt_off = m->opt_len = m->opt_index = 0;
	m->edns.present = false;
	m->edns.udp_size = 0;
	m->edns.ext_rcode = 0;
	m->edns.version = 0;
	m->edns.do_bit = false;
	m->edns.ede_code = NX_DNS_EDE_NONE;
	m->edns.ede_text_len = 0;
	m->edns.unknown_options = 0;
	m->ttl_count = 0;
	m->ttl_overflow = false;
	m->min_ttl = UINT32_MAX;
	m->len = 0;
}

int nx_dns_hdr_parse(const uint8_t *buf, size_t len, struct nx_dns_msg *out)
{
	msg_reset(out);
	if (len < NX_DNS_HDR_LEN) {
		return NX_EMALFORMED;
	}
	out->id = nx_dns_get16(buf);
	out->flags = nx_dns_get16(buf + 2);
	out->qdcount = nx_dns_get16(buf + 4);
	out->ancount = nx_dns_get16(buf + 6);
	out->nscount = nx_dns_get16(buf + 8);
	out->arcount = nx_dns_get16(buf + 10);
	out->len = (uint16_t)NX_MIN(len, (size_t)NX_DNS_MSG_MAX);
	return 0;
}

/* OPT RDATA: a sequence of {code, length, data}; the lengths must tile RDLENGTH exactly. */
static int parse_opt(struct nx_dns_edns *e, uint16_t cls, uint32_t ttl, const uint8_t *p,
		     size_t rdlen)
{
	e->present = true;
	e->udp_size = cls;
	e->ext_rcode = (uint8_t)(ttl >> 24);
	e->version = (uint8_t)(ttl >> 16);
	e->do_bit = (ttl & 0x8000) != 0;
	size_t pos = 0;
	while (pos < rdlen) {
		if (rdlen - pos < 4) {
			return NX_EMALFORMED;
		}
		uint16_t code = nx_dns_get16(p + pos);
		uint16_t olen = nx_dns_get16(p + pos + 2);
		pos += 4;
		if (rdlen - pos < olen) {
			return NX_EMALFORMED;
		}
		if (code == EDNS_OPT_EDE && olen >= 2 && e->ede_code < 0) {
			e->ede_code = nx_dns_get16(p + pos);
			size_t tl = NX_MIN((size_t)olen - 2, (size_t)NX_DNS_EDE_TEXT_MAX);
			memcpy(e->ede_text, p + pos + 2, tl);
			e->ede_text_len = (uint16_t)tl;
		} else if (e->unknown_options < UINT16_MAX) {
			e->unknown_options++;
		}
		pos += olen;
	}
	return 0;
}

bool nx_dns_rdata_names(uint16_t type, struct nx_dns_rdata_layout *out)
{
	out->pre = 0;
	out->names = 1;
	out->post = 0;
	switch (type) {
	case 2:	 /* NS */
	case 3:	 /* MD */
	case 4:	 /* MF */
	case 5:	 /* CNAME */
	case 7:	 /* MB */
	case 8:	 /* MG */
	case 9:	 /* MR */
	case 12: /* PTR */
	case 39: /* DNAME */
		return true;
	case 14: /* MINFO */
	case 17: /* RP */
		out->names = 2;
		return true;
	case 15: /* MX */
	case 18: /* AFSDB */
	case 21: /* RT */
	case 36: /* KX */
		out->pre = 2;
		return true;
	case 26: /* PX */
		out->pre = 2;
		out->names = 2;
		return true;
	case 6: /* SOA */
		out->names = 2;
		out->post = 20;
		return true;
	case 33: /* SRV */
		out->pre = 6;
		return true;
	default:
		out->names = 0;
		return false;
	}
}

/*
 * RDATA of the types whose names may be compressed (nx_dns_rdata_names): the names must be
 * valid and the fixed parts must tile RDLENGTH exactly. A and AAAA (class IN) must have their
 * address size. Other types are opaque.
 */
static bool check_rdata(const uint8_t *msg, size_t off, size_t rdlen, uint16_t type, uint16_t cls,
			const uint8_t *fixed)
{
	if (type == NX_DNS_T_A) { /* fixed sizes in class IN (UPDATE uses empty RDATA with ANY/NONE) */
		return cls != NX_DNS_C_IN || rdlen == 4;
	}
	if (type == NX_DNS_T_AAAA) {
		return cls != NX_DNS_C_IN || rdlen == 16;
	}
	struct nx_dns_rdata_layout lay;
	if (!nx_dns_rdata_names(type, &lay)) {
		return true;
	}
	size_t pre = lay.pre, names = lay.names, post = lay.post;
	size_t end = off + rdlen;
	if (rdlen < pre + post) {
		return false;
	}
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, end - post);
	rd.pos = off + pre;
	for (size_t i = 0; i < names; i++) {
		(void)nx_dns_name_walk(&rd, NULL, fixed, NX_DNS_HDR_LEN);
	}
	return !rd.err && rd.pos == end - post;
}

static int parse_rrs(struct nx_dns_msg *m, struct nx_dns_rd *rd, unsigned count, enum section sec,
		     uint8_t *fixed)
{
	for (unsigned i = 0; i < count; i++) {
		size_t owner = rd->pos;
		size_t nlen = nx_dns_name_walk(rd, NULL, fixed, NX_DNS_HDR_LEN);
		size_t fixed_off = rd->pos;
		uint16_t type = nx_dns_rd_u16(rd);
		uint16_t cls = nx_dns_rd_u16(rd);
		size_t ttl_off = rd->pos;
		uint32_t ttl = nx_dns_rd_u32(rd);
		uint16_t rdlen = nx_dns_rd_u16(rd);
		size_t rdoff = rd->pos;
		nx_dns_rd_skip(rd, rdlen);
		if (rd->err) {
			return NX_EMALFORMED;
		}
		nx_dns_mark(fixed, fixed_off, 10);
		if (type == NX_DNS_T_OPT) {
			/* RFC 6891 6.1.1: one OPT, additional section, owner root */
			if (sec != SEC_AR || m->opt_off != 0 || nlen != 1) {
				return NX_EMALFORMED;
			}
			m->opt_off = (uint16_t)owner;
			m->opt_len = (uint16_t)(rd->pos - owner);
			m->opt_index = (uint16_t)i;
			if (parse_opt(&m->edns, cls, ttl, rd->base + rdoff, rdlen) < 0) {
				return NX_EMALFORMED;
			}
			continue;
		}
		if (!check_rdata(rd->base, rdoff, rdlen, type, cls, fixed)) {
			return NX_EMALFORMED;
		}
		if (m->ttl_count < NX_DNS_MAX_TTLS) {
			m->ttl_off[m->ttl_count++] = (uint16_t)ttl_off;
		} else {
			m->ttl_overflow = true;
		}
		if (sec != SEC_AR) {
			uint32_t t = ttl > TTL_MAX ? 0 : ttl;
			if (t < m->min_ttl) {
				m->min_ttl = t;
			}
		}
	}
	return 0;
}

int nx_dns_msg_parse(const uint8_t *buf, size_t len, struct nx_dns_msg *out)
{
	int rc = nx_dns_hdr_parse(buf, len, out);
	if (rc < 0) {
		return rc;
	}
	if (len > NX_DNS_MSG_MAX) {
		return NX_EMALFORMED;
	}
	/* one bit per offset: bytes of fixed fields, which no pointer may reach (see impl.h) */
	uint8_t fixed[(NX_DNS_MSG_MAX + 1) / 8];
	memset(fixed, 0, (len + 7) / 8);

	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, len);
	rd.pos = NX_DNS_HDR_LEN;
	out->question_off = NX_DNS_HDR_LEN;
	for (unsigned i = 0; i < out->qdcount; i++) {
		if (i == 0) {
			size_t n = nx_dns_name_walk(&rd, out->q.name, fixed, NX_DNS_HDR_LEN);
			nx_dns_mark(fixed, rd.pos, NX_MIN((size_t)4, nx_dns_rd_left(&rd)));
			out->q.qtype = nx_dns_rd_u16(&rd);
			out->q.qclass = nx_dns_rd_u16(&rd);
			if (rd.err) {
				return NX_EMALFORMED;
			}
			out->q.name_len = (uint8_t)n;
			out->has_question = true;
		} else {
			(void)nx_dns_name_walk(&rd, NULL, fixed, NX_DNS_HDR_LEN);
			nx_dns_mark(fixed, rd.pos, NX_MIN((size_t)4, nx_dns_rd_left(&rd)));
			nx_dns_rd_skip(&rd, 4);
			if (rd.err) {
				return NX_EMALFORMED;
			}
		}
	}
	out->question_end = (uint16_t)rd.pos;
	if (parse_rrs(out, &rd, out->ancount, SEC_AN, fixed) < 0) {
		return NX_EMALFORMED;
	}
	out->answer_end = (uint16_t)rd.pos;
	if (parse_rrs(out, &rd, out->nscount, SEC_NS, fixed) < 0) {
		return NX_EMALFORMED;
	}
	out->authority_end = (uint16_t)rd.pos;
	if (parse_rrs(out, &rd, out->arcount, SEC_AR, fixed) < 0) {
		return NX_EMALFORMED;
	}
	if (rd.pos != len) {
		return NX_EMALFORMED; /* trailing bytes */
	}
	return 0;
}

size_t nx_dns_udp_limit(const struct nx_dns_msg *q)
{
	if (!q->edns.present) {
		return NX_DNS_UDP_MIN;
	}
	size_t s = q->edns.udp_size;
	if (s < NX_DNS_UDP_MIN) {
		return NX_DNS_UDP_MIN;
	}
	return s > NX_DNS_EDNS_OUR_SIZE ? NX_DNS_EDNS_OUR_SIZE : s;
}

const char *nx_dns_type_name(uint16_t type, char buf[16])
{
	switch (type) {
#define T(n, s)                                                                                    \
	case n:                                                                                    \
		return s;
		T(1, "A")
		T(2, "NS")
		T(5, "CNAME")
		T(6, "SOA")
		T(12, "PTR")
		T(13, "HINFO")
		T(15, "MX")
		T(16, "TXT")
		T(17, "RP")
		T(18, "AFSDB")
		T(24, "SIG")
		T(25, "KEY")
		T(28, "AAAA")
		T(29, "LOC")
		T(33, "SRV")
		T(35, "NAPTR")
		T(36, "KX")
		T(37, "CERT")
		T(39, "DNAME")
		T(41, "OPT")
		T(42, "APL")
		T(43, "DS")
		T(44, "SSHFP")
		T(45, "IPSECKEY")
		T(46, "RRSIG")
		T(47, "NSEC")
		T(48, "DNSKEY")
		T(49, "DHCID")
		T(50, "NSEC3")
		T(51, "NSEC3PARAM")
		T(52, "TLSA")
		T(53, "SMIMEA")
		T(55, "HIP")
		T(59, "CDS")
		T(60, "CDNSKEY")
		T(61, "OPENPGPKEY")
		T(62, "CSYNC")
		T(63, "ZONEMD")
		T(64, "SVCB")
		T(65, "HTTPS")
		T(99, "SPF")
		T(108, "EUI48")
		T(109, "EUI64")
		T(249, "TKEY")
		T(250, "TSIG")
		T(251, "IXFR")
		T(252, "AXFR")
		T(255, "ANY")
		T(256, "URI")
		T(257, "CAA")
#undef T
	default:
		break;
	}
	snprintf(buf, 16, "TYPE%u", (unsigned)type);
	return buf;
}

const char *nx_dns_rcode_name(int rcode)
{
	static const char *const names[] = {
	    "NOERROR",	"FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",   "REFUSED",
	    "YXDOMAIN", "YXRRSET", "NXRRSET",  "NOTAUTH",  "NOTZONE",  "DSOTYPENI",
	    NULL,	NULL,	   NULL,       NULL,	   "BADVERS",  "BADKEY",
	    "BADTIME",	"BADMODE", "BADNAME",  "BADALG",   "BADTRUNC", "BADCOOKIE",
	};
	if (rcode >= 0 && (size_t)rcode < NX_ARRAY_LEN(names) && names[rcode]) {
		return names[rcode];
	}
	return "UNKNOWN";
}

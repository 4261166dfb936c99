/*
 * DNS rebinding protection: which addresses are private, and the rewrite of an upstream answer
 * without them.
 *
 * The common answer has nothing private, so the cost that matters is the scan: one pass over
 * the records reading types and addresses, no copy. Only an answer with something to remove
 * is rewritten, record by record, into a buffer of the caller's; names are decompressed as
 * they are copied, since removing a record moves every byte after it and a compression
 * pointer into moved bytes would decode to garbage.
 */
#include "guard/guard.h"

#include <arpa/inet.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/stats.h"
#include "dns/wire.h"

#define T_SVCB 64	/* RFC 9460 */
#define SVC_IPV4HINT 4	/* SvcParamKey ipv4hint: a list of 4-byte addresses */
#define SVC_IPV6HINT 6	/* SvcParamKey ipv6hint: a list of 16-byte addresses */
#define EDNS_OPT_EDE 15 /* RFC 8914 option code */

bool nx_guard_private_v4(const uint8_t a[4])
{
	return a[0] == 0 ||			       /* 0.0.0.0/8: "this network" */
	       a[0] == 10 ||			       /* RFC 1918 */
	       (a[0] == 100 && (a[1] & 0xc0) == 64) || /* 100.64.0.0/10: CGNAT, RFC 6598 */
	       a[0] == 127 ||			       /* loopback */
	       (a[0] == 169 && a[1] == 254) ||	       /* link-local */
	       (a[0] == 172 && (a[1] & 0xf0) == 16) || /* RFC 1918 */
	       (a[0] == 192 && a[1] == 168);	       /* RFC 1918 */
}

bool nx_guard_private_v6(const uint8_t a[16])
{
	static const uint8_t zero[15] = {0};
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
	if (!memcmp(a, zero, 15) && (a[15] == 0 || a[15] == 1)) {
		return true; /* :: and ::1 */
	}
	if (!memcmp(a, mapped, 12)) {
		return nx_guard_private_v4(a + 12); /* ::ffff:a.b.c.d */
	}
	return (a[0] & 0xfe) == 0xfc ||			/* fc00::/7: ULA */
	       (a[0] == 0xfe && (a[1] & 0xc0) == 0x80); /* fe80::/10: link-local */
}

static bool private_addr(uint16_t type, const uint8_t *p)
{
	return type == NX_DNS_T_A ? nx_guard_private_v4(p) : nx_guard_private_v6(p);
}

static unsigned rr_total(const struct nx_dns_msg *m)
{
	return (unsigned)m->ancount + m->nscount + m->arcount;
}

/* Does an HTTPS/SVCB RDATA carry a private hint address? */
static bool svcb_private(const uint8_t *msg, size_t off, size_t rdlen)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, off + rdlen);
	rd.pos = off;
	nx_dns_rd_skip(&rd, 2);
	nx_dns_rd_skip_name(&rd);
	while (!rd.err && rd.pos < off + rdlen) {
		uint16_t key = nx_dns_rd_u16(&rd);
		uint16_t len = nx_dns_rd_u16(&rd);
		const uint8_t *v = nx_dns_rd_bytes(&rd, len);
		size_t size = key == SVC_IPV4HINT ? 4 : key == SVC_IPV6HINT ? 16 : 0;
		if (!v || size == 0 || len % size) {
			continue;
		}
		for (size_t i = 0; i < len; i += size) {
			if (private_addr(size == 4 ? NX_DNS_T_A : NX_DNS_T_AAAA, v + i)) {
				return true;
			}
		}
	}
	return false;
}

/* One pass without copying: is anything private? A record that does not read is no reason to
 * rewrite (the parser accepted the message, so that does not happen). */
static bool scan(const uint8_t *msg, const struct nx_dns_msg *m)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, m->len);
	rd.pos = m->question_end;
	for (unsigned i = 0, n = rr_total(m); i < n && !rd.err; i++) {
		nx_dns_rd_skip_name(&rd);
		uint16_t type = nx_dns_rd_u16(&rd);
		uint16_t cls = nx_dns_rd_u16(&rd);
		nx_dns_rd_skip(&rd, 4);
		uint16_t rdlen = nx_dns_rd_u16(&rd);
		size_t off = rd.pos;
		const uint8_t *rdata = nx_dns_rd_bytes(&rd, rdlen);
		if (!rdata || cls != NX_DNS_C_IN) {
			continue;
		}
		if ((type == NX_DNS_T_A && rdlen == 4) || (type == NX_DNS_T_AAAA && rdlen == 16)) {
			if (private_addr(type, rdata)) {
				return true;
			}
		} else if ((type == NX_DNS_T_HTTPS || type == T_SVCB) &&
			   svcb_private(msg, off, rdlen)) {
			return true;
		}
	}
	return false;
}

/* Copy an HTTPS/SVCB RDATA without its private hint addresses; a hint left empty goes. */
static int copy_svcb(struct nx_dns_wr *wr, const uint8_t *msg, size_t off, size_t rdlen,
		     unsigned *removed)
{
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, off + rdlen);
	rd.pos = off;
	uint16_t prio = nx_dns_rd_u16(&rd);
	uint8_t target[NX_DNS_NAME_MAX];
	size_t tl = nx_dns_rd_name(&rd, target);
	if (rd.err) {
		return NX_EMALFORMED;
	}
	nx_dns_wr_u16(wr, prio);
	nx_dns_wr_name(wr, target, tl);
	while (rd.pos < off + rdlen) {
		uint16_t key = nx_dns_rd_u16(&rd);
		uint16_t len = nx_dns_rd_u16(&rd);
		const uint8_t *v = nx_dns_rd_bytes(&rd, len);
		if (!v) {
			return NX_EMALFORMED;
		}
		size_t size = key == SVC_IPV4HINT ? 4 : key == SVC_IPV6HINT ? 16 : 0;
		if (size == 0 || len % size) {
			nx_dns_wr_u16(wr, key);
			nx_dns_wr_u16(wr, len);
			nx_dns_wr_bytes(wr, v, len);
			continue;
		}
		size_t start = wr->pos;
		nx_dns_wr_u16(wr, key);
		nx_dns_wr_u16(wr, 0);
		uint16_t kept = 0;
		for (size_t i = 0; i < len; i += size) {
			if (private_addr(size == 4 ? NX_DNS_T_A : NX_DNS_T_AAAA, v + i)) {
				(*removed)++;
			} else {
				nx_dns_wr_bytes(wr, v + i, size);
				kept = (uint16_t)(kept + size);
			}
		}
		if (wr->err) {
			return NX_ETRUNC;
		}
		if (kept == 0) {
			wr->pos = start; /* nothing left of this hint */
		} else {
			nx_dns_wr_put_u16_at(wr, start + 2, kept);
		}
	}
	return wr->err ? NX_ETRUNC : 0;
}

/* Copy an RDATA, decompressing the names of the types that may hold compressed ones. */
static int copy_rdata(struct nx_dns_wr *wr, const uint8_t *msg, uint16_t type, size_t off,
		      size_t rdlen)
{
	struct nx_dns_rdata_layout lay;
	if (!nx_dns_rdata_names(type, &lay) || rdlen < (size_t)lay.pre + lay.post) {
		nx_dns_wr_bytes(wr, msg + off, rdlen);
		return 0;
	}
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, off + rdlen - lay.post);
	rd.pos = off + lay.pre;
	nx_dns_wr_bytes(wr, msg + off, lay.pre);
	for (unsigned i = 0; i < lay.names; i++) {
		uint8_t name[NX_DNS_NAME_MAX];
		size_t nl = nx_dns_rd_name(&rd, name);
		if (rd.err) {
			return NX_EMALFORMED;
		}
		nx_dns_wr_name(wr, name, nl);
	}
	nx_dns_wr_bytes(wr, msg + off + rdlen - lay.post, lay.post);
	return 0;
}

/* Our OPT: the upstream's payload size and flags when it sent one, its options unless the
 * answer was emptied (then EDE 15 alone, so relays carry our reason, not an upstream's). */
struct opt_src {
	bool present;
	uint16_t cls; /* payload size */
	uint32_t ttl; /* extended rcode, version, DO */
	size_t rdoff;
	uint16_t rdlen;
};

static void write_opt(struct nx_dns_wr *wr, const uint8_t *msg, const struct opt_src *o,
		      bool emptied)
{
	nx_dns_wr_u8(wr, 0); /* root */
	nx_dns_wr_u16(wr, NX_DNS_T_OPT);
	nx_dns_wr_u16(wr, o->present ? o->cls : NX_DNS_EDNS_OUR_SIZE);
	nx_dns_wr_u32(wr, o->present ? o->ttl : 0);
	if (!emptied) {
		nx_dns_wr_u16(wr, o->rdlen);
		nx_dns_wr_bytes(wr, msg + o->rdoff, o->rdlen);
		return;
	}
	size_t tl = sizeof(NX_GUARD_REBIND_TEXT) - 1;
	nx_dns_wr_u16(wr, (uint16_t)(4 + 2 + tl));
	nx_dns_wr_u16(wr, EDNS_OPT_EDE);
	nx_dns_wr_u16(wr, (uint16_t)(2 + tl));
	nx_dns_wr_u16(wr, NX_DNS_EDE_BLOCKED);
	nx_dns_wr_bytes(wr, NX_GUARD_REBIND_TEXT, tl);
}

int nx_guard_rebind_strip(const uint8_t *msg, const struct nx_dns_msg *m, uint8_t *out, size_t cap,
			  struct nx_guard_rebind_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	if (NX_DNS_RCODE(m->flags) != NX_DNS_NOERROR || !m->has_question || !scan(msg, m)) {
		return 0;
	}
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, out, cap);
	nx_dns_wr_bytes(&wr, msg, m->question_end); /* header and questions: nothing moves */
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, m->len);
	rd.pos = m->question_end;
	const uint16_t orig[3] = {m->ancount, m->nscount, m->arcount};
	uint16_t kept[3] = {0, 0, 0};
	bool answer_cut = false, answer_data = false;
	struct opt_src opt = {.present = false};
	for (int sec = 0; sec < 3; sec++) {
		for (unsigned i = 0; i < orig[sec]; i++) {
			uint8_t owner[NX_DNS_NAME_MAX];
			size_t ol = nx_dns_rd_name(&rd, owner);
			uint16_t type = nx_dns_rd_u16(&rd);
			uint16_t cls = nx_dns_rd_u16(&rd);
			uint32_t ttl = nx_dns_rd_u32(&rd);
			uint16_t rdlen = nx_dns_rd_u16(&rd);
			size_t off = rd.pos;
			const uint8_t *rdata = nx_dns_rd_bytes(&rd, rdlen);
			if (rd.err || !rdata) {
				return NX_EMALFORMED;
			}
			if (type == NX_DNS_T_OPT) {
				opt = (struct opt_src){true, cls, ttl, off, rdlen};
				continue; /* written last */
			}
			if (cls == NX_DNS_C_IN &&
			    ((type == NX_DNS_T_A && rdlen == 4) ||
			     (type == NX_DNS_T_AAAA && rdlen == 16)) &&
			    private_addr(type, rdata)) {
				rep->addresses++;
				answer_cut |= sec == 0;
				continue;
			}
			nx_dns_wr_name(&wr, owner, ol);
			nx_dns_wr_u16(&wr, type);
			nx_dns_wr_u16(&wr, cls);
			nx_dns_wr_u32(&wr, ttl);
			size_t len_at = wr.pos;
			nx_dns_wr_u16(&wr, 0);
			int rc = cls == NX_DNS_C_IN && (type == NX_DNS_T_HTTPS || type == T_SVCB)
				     ? copy_svcb(&wr, msg, off, rdlen, &rep->addresses)
				     : copy_rdata(&wr, msg, type, off, rdlen);
			if (rc < 0) {
				return rc;
			}
			if (wr.err) {
				return NX_ETRUNC;
			}
			nx_dns_wr_put_u16_at(&wr, len_at, (uint16_t)(wr.pos - len_at - 2));
			kept[sec]++;
			if (sec == 0 && (type == m->q.qtype || m->q.qtype == NX_DNS_T_ANY)) {
				answer_data = true;
			}
		}
	}
	rep->emptied = answer_cut && !answer_data;
	if (opt.present || rep->emptied) {
		write_opt(&wr, msg, &opt, rep->emptied);
		kept[2]++;
	}
	if (wr.err) {
		return NX_ETRUNC;
	}
	nx_dns_wr_put_u16_at(&wr, 6, kept[0]);
	nx_dns_wr_put_u16_at(&wr, 8, kept[1]);
	nx_dns_wr_put_u16_at(&wr, 10, kept[2]);
	return (int)wr.pos;
}

bool nx_guard_rebind_allowed(char *const *domains, size_t n, const uint8_t *name, size_t len)
{
	char text[NX_DNS_TEXT_MAX];
	if (n == 0 || nx_dns_name_to_text(name, len, text, sizeof(text)) < 0) {
		return false;
	}
	size_t tl = strlen(text);
	for (size_t i = 0; i < tl; i++) {
		if (text[i] >= 'A' && text[i] <= 'Z') {
			text[i] = (char)(text[i] + 32);
		}
	}
	for (size_t i = 0; i < n; i++) {
		size_t dl = strlen(domains[i]);
		if (dl <= tl && !memcmp(text + tl - dl, domains[i], dl) &&
		    (dl == tl || text[tl - dl - 1] == '.')) {
			return true;
		}
	}
	return false;
}

/* Header and question of msg, no records, and an OPT with EDE 15: the answer when a rewrite
 * failed. Private addresses never pass because a rewrite could not be done. */
static int emptied_answer(const uint8_t *msg, const struct nx_dns_msg *m, uint8_t *out, size_t cap)
{
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, out, cap);
	nx_dns_wr_bytes(&wr, msg, m->question_end);
	struct opt_src none = {.present = false};
	write_opt(&wr, msg, &none, true);
	nx_dns_wr_put_u16_at(&wr, 6, 0);
	nx_dns_wr_put_u16_at(&wr, 8, 0);
	nx_dns_wr_put_u16_at(&wr, 10, 1);
	return wr.err ? NX_ETRUNC : (int)wr.pos;
}

int nx_guard_rebind_apply(const struct nx_conf *c, const uint8_t *qname, size_t qlen,
			  const uint8_t *msg, const struct nx_dns_msg *m, uint8_t *out, size_t cap,
			  struct nx_dns_msg *om)
{
	if (!c->rebinding_protection) {
		return 0;
	}
	struct nx_guard_rebind_report rep;
	int n = nx_guard_rebind_strip(msg, m, out, cap, &rep);
	if (n == 0) {
		return 0;
	}
	if (nx_guard_rebind_allowed(c->rebinding_allow, c->n_rebinding_allow, qname, qlen)) {
		nx_stat_inc(NX_STAT_REBIND_ALLOWED);
		return 0;
	}
	if (n < 0 || nx_dns_msg_parse(out, (size_t)n, om) < 0) {
		n = emptied_answer(msg, m, out, cap);
		if (n < 0 || nx_dns_msg_parse(out, (size_t)n, om) < 0) {
			return NX_EMALFORMED; /* cannot happen: header + question + OPT fit 64 KiB
					       */
		}
		nx_log(NX_LOG_WARN, "guard",
		       "rebinding: an answer with private addresses could not "
		       "be rewritten; answered without data");
		rep.emptied = true;
	}
	nx_stat_inc(rep.emptied ? NX_STAT_REBIND_EMPTIED : NX_STAT_REBIND_STRIPPED);
	nx_stat_add(NX_STAT_REBIND_RECORDS, rep.addresses);
	if (nx_log_enabled(NX_LOG_DEBUG)) {
		char text[NX_DNS_TEXT_MAX];
		if (nx_dns_name_to_text(qname, qlen, text, sizeof(text)) < 0) {
			text[0] = 0;
		}
		nx_log(NX_LOG_DEBUG, "guard",
		       "rebinding: %u private address%s removed from the "
		       "answer for %s%s",
		       rep.addresses, rep.addresses == 1 ? "" : "es", text,
		       rep.emptied ? " (no data left)" : "");
	}
	return n;
}

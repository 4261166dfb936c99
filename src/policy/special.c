/*
 * The special-use names level (RFC 6761 and friends, the `special.*` keys): names nxdns answers
 * itself or keeps from the public upstreams, the one name it never lets the lists block, and the
 * answers for them. Nothing allocates: names are compared in place against static wire forms,
 * answers are built on the stack by the dns builder.
 */
#include "policy/policy.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "base/err.h"
#include "base/stats.h"
#include "dns/wire.h"

/* RFC 9460: SVCB's type code (HTTPS, 65, is in dns/msg.h). */
#define T_SVCB 64
/* TTL of the localhost and DDR answers: both are fixed for the life of a configuration; five
 * minutes keeps a changed DoT/DoH listener visible to DDR clients soon after a reload. */
#define SPECIAL_TTL 300
/* SVCB records in one DDR answer: one per DoT / DoH listener address, cut after this many (a
 * household server has one or two of each; listener.dot/doh take at most 16 each). */
#define DDR_RECORDS_MAX 16
/* Bytes of one DDR SVCB rdata: priority, TargetName, alpn (4 + 4), port (4 + 2), one hint
 * (4 + 16), dohpath (4 + 16). */
#define DDR_RDATA_MAX (2 + NX_DNS_NAME_MAX + 8 + 6 + 20 + 4 + 16)

/* A wire name from a string literal: sizeof counts the NUL, which is the root label. Label
 * lengths are three-digit octal escapes ("\00210" is 2, "10"): an octal escape ends after three
 * digits, where a hex one would swallow the label's digits. */
struct wname {
	const uint8_t *w;
	size_t len;
};
#define WN(s)                                                                                      \
	{                                                                                          \
		(const uint8_t *)(s), sizeof(s)                                                    \
	}

static const struct wname n_localhost = WN("\011localhost");
static const struct wname n_resolver = WN("\010resolver\004arpa");
static const struct wname n_ddr = WN("\004_dns\010resolver\004arpa");
static const struct wname n_canary = WN("\023use-application-dns\003net");
static const struct wname n_probe_parent = WN("\006metric\007gstatic\003com");
static const struct wname n_relay[] = {
    WN("\004mask\006icloud\003com"),
    WN("\007mask-h2\006icloud\003com"),
};
/* domain-needed: zones that have no meaning on the public DNS. */
static const struct wname n_needed[] = {
    WN("\005local"),	    /* RFC 6762: multicast DNS only */
    WN("\007invalid"),	    /* RFC 6761 6.4: never exists */
    WN("\004home\004arpa"), /* RFC 8375: the home network's own zone */
};
/* bogus-priv: the reverse zones of addresses only a LAN has (172.16/12 is checked apart). */
static const struct wname n_private_rev[] = {
    WN("\00210\007in-addr\004arpa"),	     /* 10/8 */
    WN("\003168\003192\007in-addr\004arpa"), /* 192.168/16 */
    WN("\003254\003169\007in-addr\004arpa"), /* 169.254/16 */
    WN("\001c\001f\003ip6\004arpa"),	     /* fc00::/8 */
    WN("\001d\001f\003ip6\004arpa"),	     /* fd00::/8 */
    WN("\0018\001e\001f\003ip6\004arpa"),    /* fe80::/10 is these four */
    WN("\0019\001e\001f\003ip6\004arpa"),    /* fe90:: */
    WN("\001a\001e\001f\003ip6\004arpa"),    /* fea0:: */
    WN("\001b\001e\001f\003ip6\004arpa"),    /* feb0:: */
};
static const struct wname n_172 = WN("\003172\007in-addr\004arpa");

static bool in(const uint8_t *w, size_t len, const struct wname *z)
{
	return nx_dns_name_in_zone(w, len, z->w, z->len);
}

static bool is(const uint8_t *w, size_t len, const struct wname *z)
{
	return len == z->len && in(w, len, z);
}

/* The label before `zone` in w (w below zone), or NULL. */
static const uint8_t *label_above(const uint8_t *w, size_t len, const struct wname *z)
{
	if (len <= z->len || !in(w, len, z)) {
		return NULL;
	}
	size_t off = 0;
	while (off + 1u + w[off] < len - z->len) {
		off += 1u + w[off];
	}
	return w + off;
}

/* 16.172.in-addr.arpa .. 31.172.in-addr.arpa, and below. */
static bool in_172_private(const uint8_t *w, size_t len)
{
	const uint8_t *l = label_above(w, len, &n_172);
	if (!l || l[0] != 2 || l[1] < '0' || l[1] > '9' || l[2] < '0' || l[2] > '9') {
		return false;
	}
	unsigned v = (unsigned)(l[1] - '0') * 10 + (unsigned)(l[2] - '0');
	return v >= 16 && v <= 31;
}

/* Android's probe: "<random>-dnsotls-ds.metric.gstatic.com", any case. */
static bool is_android_probe(const uint8_t *w, size_t len)
{
	static const char tail[] = "-dnsotls-ds";
	const size_t tl = sizeof(tail) - 1;
	const uint8_t *l = label_above(w, len, &n_probe_parent);
	if (!l || l != w || l[0] <= tl) {
		return false;
	}
	for (size_t i = 0; i < tl; i++) {
		uint8_t ch = l[1 + l[0] - tl + i];
		if (ch >= 'A' && ch <= 'Z') {
			ch = (uint8_t)(ch + 32);
		}
		if (ch != (uint8_t)tail[i]) {
			return false;
		}
	}
	return true;
}

/* A forward zone covers the name: the operator routed it somewhere on purpose (the router's
 * `home.arpa`, its reverse zone). The root as a "zone" is just another upstream: not a cover. */
static bool zone_covers(const struct nx_conf *c, const uint8_t *w, size_t len)
{
	for (size_t i = 0; i < c->n_zones; i++) {
		if (c->zones[i].name_len > 1 &&
		    nx_dns_name_in_zone(w, len, c->zones[i].name, c->zones[i].name_len)) {
			return true;
		}
	}
	return false;
}

static bool set(struct nx_filter_result *out, enum nx_filter_action a, enum nx_filter_reason r,
		size_t wlen)
{
	nx_filter_result_clear(out);
	out->action = (uint8_t)a;
	out->reason = (uint8_t)r;
	out->matched_off = 0;
	out->matched_len = (uint16_t)wlen;
	return true;
}

bool nx_policy_special_match(const struct nx_conf *c, const uint8_t *w, size_t len, uint16_t qtype,
			     struct nx_filter_result *out)
{
	if (len <= 1) {
		return false;
	}
	if (c->special_localhost && in(w, len, &n_localhost)) {
		return set(out, NX_FILTER_ACT_LOCAL, NX_FILTER_R_special_localhost, len);
	}
	/* Answered even with special.ddr off (as NODATA): a public resolver's own DDR answer
	 * would move the LAN's clients to it, past the filter. */
	if (in(w, len, &n_resolver)) {
		return set(out, NX_FILTER_ACT_LOCAL, NX_FILTER_R_ddr, len);
	}
	if (c->special_firefox_canary && is(w, len, &n_canary)) {
		return set(out, NX_FILTER_ACT_LOCAL, NX_FILTER_R_firefox_canary, len);
	}
	if (c->special_block_private_relay &&
	    (is(w, len, &n_relay[0]) || is(w, len, &n_relay[1]))) {
		return set(out, NX_FILTER_ACT_LOCAL, NX_FILTER_R_private_relay, len);
	}
	if (c->special_android_probes && is_android_probe(w, len)) {
		return set(out, NX_FILTER_ACT_ALLOW, NX_FILTER_R_android_probe, len);
	}
	enum nx_filter_reason r = NX_FILTER_R_none;
	if (c->special_domain_needed) {
		for (size_t i = 0; i < NX_ARRAY_LEN(n_needed) && r == NX_FILTER_R_none; i++) {
			if (in(w, len, &n_needed[i])) {
				r = NX_FILTER_R_special_use_name;
			}
		}
	}
	if (r == NX_FILTER_R_none && c->special_bogus_priv) {
		for (size_t i = 0; i < NX_ARRAY_LEN(n_private_rev) && r == NX_FILTER_R_none; i++) {
			if (in(w, len, &n_private_rev[i])) {
				r = NX_FILTER_R_private_reverse;
			}
		}
		if (in_172_private(w, len)) {
			r = NX_FILTER_R_private_reverse;
		}
	}
	/* Only the types a browser or an app asks for a typed-in word: `com DS` or `org DNSKEY`
	 * are what a validating stub needs from the real root. */
	if (r == NX_FILTER_R_none && c->special_domain_needed && nx_dns_name_labels(w, len) == 1 &&
	    (qtype == NX_DNS_T_A || qtype == NX_DNS_T_AAAA || qtype == NX_DNS_T_HTTPS)) {
		r = NX_FILTER_R_single_label;
	}
	if (r == NX_FILTER_R_none || zone_covers(c, w, len)) {
		return false;
	}
	return set(out, NX_FILTER_ACT_LOCAL, r, len);
}

void nx_policy_special_count(enum nx_filter_reason r)
{
	static const struct {
		uint8_t reason;
		enum nx_stat stat;
	} map[] = {
	    {NX_FILTER_R_special_localhost, NX_STAT_SP_LOCALHOST},
	    {NX_FILTER_R_special_use_name, NX_STAT_SP_USE_NAME},
	    {NX_FILTER_R_single_label, NX_STAT_SP_SINGLE_LABEL},
	    {NX_FILTER_R_private_reverse, NX_STAT_SP_PRIVATE_REVERSE},
	    {NX_FILTER_R_firefox_canary, NX_STAT_SP_FIREFOX_CANARY},
	    {NX_FILTER_R_android_probe, NX_STAT_SP_ANDROID_PROBE},
	    {NX_FILTER_R_private_relay, NX_STAT_SP_PRIVATE_RELAY},
	    {NX_FILTER_R_ddr, NX_STAT_SP_DDR},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(map); i++) {
		if (map[i].reason == r) {
			nx_stat_inc(map[i].stat);
			return;
		}
	}
}

/* ---- DDR (RFC 9462) ---- */

static size_t put16(uint8_t *p, size_t at, uint16_t v)
{
	p[at] = (uint8_t)(v >> 8);
	p[at + 1] = (uint8_t)v;
	return at + 2;
}

/* One SVCB rdata (RFC 9460 2.2, keys in ascending order) for a listener at a. */
static uint16_t ddr_rdata(uint8_t *rd, uint16_t prio, const uint8_t *target, size_t tlen, bool doh,
			  const struct nx_addr *a)
{
	size_t at = put16(rd, 0, prio);
	memcpy(rd + at, target, tlen);
	at += tlen;
	/* alpn (1): one id, "dot" or "h2" */
	const char *alpn = doh ? "h2" : "dot";
	size_t al = strlen(alpn);
	at = put16(rd, at, 1);
	at = put16(rd, at, (uint16_t)(1 + al));
	rd[at++] = (uint8_t)al;
	memcpy(rd + at, alpn, al);
	at += al;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a->ss;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->ss;
	bool v6 = a->ss.ss_family == AF_INET6;
	/* port (3) */
	at = put16(rd, at, 3);
	at = put16(rd, at, 2);
	at = put16(rd, at, ntohs(v6 ? s6->sin6_port : s4->sin_port));
	/* ipv4hint (4) / ipv6hint (6): the listener's own address, unless it is the wildcard
	 * (which addresses a client reaches us on is not ours to know). */
	if (!v6 && s4->sin_addr.s_addr != htonl(INADDR_ANY)) {
		at = put16(rd, at, 4);
		at = put16(rd, at, 4);
		memcpy(rd + at, &s4->sin_addr, 4);
		at += 4;
	} else if (v6 && !IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr)) {
		at = put16(rd, at, 6);
		at = put16(rd, at, 16);
		memcpy(rd + at, &s6->sin6_addr, 16);
		at += 16;
	}
	/* dohpath (7, RFC 9461): our one DoH path, as a URI template */
	if (doh) {
		static const char path[] = "/dns-query{?dns}";
		at = put16(rd, at, 7);
		at = put16(rd, at, (uint16_t)(sizeof(path) - 1));
		memcpy(rd + at, path, sizeof(path) - 1);
		at += sizeof(path) - 1;
	}
	return (uint16_t)at;
}

static int ddr_answer(const struct nx_conf *c, uint8_t *out, size_t cap,
		      const struct nx_dns_reply_ctx *ctx)
{
	const struct nx_dns_question *q = ctx->q;
	if (!is(q->name, q->name_len, &n_ddr)) {
		/* resolver.arpa itself exists (it holds _dns); nothing else below it does */
		int rcode =
		    is(q->name, q->name_len, &n_resolver) ? NX_DNS_NOERROR : NX_DNS_NXDOMAIN;
		return nx_dns_build_answer(out, cap, ctx, rcode, true, NULL, 0, NULL, 0, -1, NULL);
	}
	uint8_t rdata[DDR_RECORDS_MAX][DDR_RDATA_MAX];
	struct nx_dns_rr_spec rrs[DDR_RECORDS_MAX];
	size_t n = 0;
	if (c->special_ddr && q->qtype == T_SVCB) {
		uint8_t target[NX_DNS_NAME_MAX] = {0};
		int tl = 1; /* ".": the owner name, for opportunistic discovery (RFC 9462 4.2) */
		if (c->tls_server_name) {
			tl = nx_dns_name_from_text(c->tls_server_name, target);
			if (tl < 0) {
				tl = 1;
				target[0] = 0;
			}
		}
		for (int doh = 0; doh < 2; doh++) {
			const struct nx_addr *l = doh ? c->listen_doh : c->listen_dot;
			size_t nl = doh ? c->n_listen_doh : c->n_listen_dot;
			for (size_t i = 0; i < nl && n < DDR_RECORDS_MAX; i++) {
				uint16_t len = ddr_rdata(rdata[n], (uint16_t)(n + 1), target,
							 (size_t)tl, doh, &l[i]);
				rrs[n] = (struct nx_dns_rr_spec){.type = T_SVCB,
								 .ttl = SPECIAL_TTL,
								 .rdata = rdata[n],
								 .rdlen = len};
				n++;
			}
		}
	}
	return nx_dns_build_answer(out, cap, ctx, NX_DNS_NOERROR, true, rrs, n, NULL, 0, -1, NULL);
}

int nx_policy_special_answer(const struct nx_policy *p, uint8_t *out, size_t cap,
			     const struct nx_dns_reply_ctx *ctx, enum nx_filter_reason r)
{
	const struct nx_dns_question *q = ctx->q;
	if (!q) {
		return NX_EMALFORMED;
	}
	static const uint8_t lo4[4] = {127, 0, 0, 1};
	static const uint8_t lo6[16] = {[15] = 1};
	switch (r) {
	case NX_FILTER_R_special_localhost: {
		/* RFC 6761 6.3: loopback for A and AAAA; the name exists, so NODATA for the rest */
		struct nx_dns_rr_spec rr = {.type = q->qtype, .ttl = SPECIAL_TTL};
		if (q->qtype == NX_DNS_T_A) {
			rr.rdata = lo4;
			rr.rdlen = 4;
		} else if (q->qtype == NX_DNS_T_AAAA) {
			rr.rdata = lo6;
			rr.rdlen = 16;
		}
		return nx_dns_build_answer(out, cap, ctx, NX_DNS_NOERROR, true,
					   rr.rdata ? &rr : NULL, rr.rdata ? 1 : 0, NULL, 0, -1,
					   NULL);
	}
	case NX_FILTER_R_ddr:
		return ddr_answer(p->c, out, cap, ctx);
	case NX_FILTER_R_firefox_canary:
		/* Mozilla's canary: NXDOMAIN (or SERVFAIL) means "this network filters" */
		return nx_dns_build_answer(out, cap, ctx, NX_DNS_NXDOMAIN, true, NULL, 0, NULL, 0,
					   NX_DNS_EDE_BLOCKED, "special.firefox_canary");
	case NX_FILTER_R_private_relay:
		/* Apple: NXDOMAIN / NODATA for the relay names turns Private Relay off here */
		return nx_dns_build_answer(out, cap, ctx, NX_DNS_NXDOMAIN, true, NULL, 0, NULL, 0,
					   NX_DNS_EDE_BLOCKED, "special.block_private_relay");
	case NX_FILTER_R_special_use_name:
	case NX_FILTER_R_single_label:
	case NX_FILTER_R_private_reverse:
		/* These names do not exist on the public DNS; no upstream is asked to say so. */
		return nx_dns_build_answer(out, cap, ctx, NX_DNS_NXDOMAIN, true, NULL, 0, NULL, 0,
					   -1, NULL);
	default:
		return -EINVAL;
	}
}

/*
 * A query-log record as one line of COPY text, in Blocky's columns and vocabulary (Blocky's
 * querylog/database_writer.go and model/models.go) plus nxdns's own columns.
 */
#include "pgsink/pgsink.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/err.h"
#include "dns/msg.h"
#include "filter/result.h"
#include "querylog/querylog.h"

struct out {
	char *p;
	size_t len, cap;
	bool full;
};

static void put_raw(struct out *o, const char *s, size_t n)
{
	if (o->full || o->len + n + 1 > o->cap) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

/* A text field: COPY's escapes for backslash, tab, newline and CR; other control bytes and
 * bytes >= 0x80 become '?' (names reach us as DNS presentation text, already escaped; the
 * database is UTF-8 and one invalid byte would refuse the whole batch). */
static void put_text(struct out *o, const char *s)
{
	for (; *s && !o->full; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[2] = {'\\', 0};
		switch (c) {
		case '\\':
			esc[1] = '\\';
			break;
		case '\t':
			esc[1] = 't';
			break;
		case '\n':
			esc[1] = 'n';
			break;
		case '\r':
			esc[1] = 'r';
			break;
		default:
			break;
		}
		if (esc[1]) {
			put_raw(o, esc, 2);
		} else {
			char ch = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
			put_raw(o, &ch, 1);
		}
	}
}

/* NULL for an empty value (nxdns's own columns), else the text. */
static void put_opt(struct out *o, const char *s)
{
	if (!s || !s[0]) {
		put_raw(o, "\\N", 2);
	} else {
		put_text(o, s);
	}
}

static void tab(struct out *o)
{
	put_raw(o, "\t", 1);
}

/* miekg/dns's RcodeToString, which Blocky stores. */
static const char *rcode_name(unsigned rc, char buf[16])
{
	static const char *const names[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
					    "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
					    "NXRRSET", "NOTAUTH", "NOTZONE"};
	if (rc < sizeof(names) / sizeof(names[0])) {
		return names[rc];
	}
	snprintf(buf, 16, "RCODE%u", rc);
	return buf;
}

static bool special_reason(unsigned reason)
{
	switch (reason) {
	case NX_FILTER_R_special_localhost:
	case NX_FILTER_R_special_use_name:
	case NX_FILTER_R_single_label:
	case NX_FILTER_R_private_reverse:
	case NX_FILTER_R_firefox_canary:
	case NX_FILTER_R_android_probe:
	case NX_FILTER_R_private_relay:
	case NX_FILTER_R_ddr:
		return true;
	default:
		return false;
	}
}

static bool user_rule(unsigned reason)
{
	return reason == NX_FILTER_R_user_allow || reason == NX_FILTER_R_user_deny;
}

static const char *const proto_names[] = {
#define NX_PGSINK_PROTO_NAME(id, text) text,
    NX_QLOG_PROTOS(NX_PGSINK_PROTO_NAME)
#undef NX_PGSINK_PROTO_NAME
};

/* Second-level labels that are public under a two-letter country code (co.uk, com.au, ...):
 * the common cases of the Public Suffix List without loading it (README: why). */
static bool public_second_level(const char *l, size_t n)
{
	static const char *const sl[] = {"co",	"com", "net", "org", "gov", "edu",
					 "ac",	"or",  "ne",  "go",  "gob", "mil",
					 "nom", "ltd", "plc", "sch", "gv",  "info"};
	for (size_t i = 0; i < sizeof(sl) / sizeof(sl[0]); i++) {
		if (strlen(sl[i]) == n && !memcmp(sl[i], l, n)) {
			return true;
		}
	}
	return false;
}

void nx_pgsink_etld1(const char *name, char *out, size_t cap)
{
	out[0] = 0;
	size_t n = strlen(name);
	while (n > 0 && name[n - 1] == '.') {
		n--;
	}
	/* the starts of the last three labels */
	size_t dots[3];
	int nd = 0;
	for (size_t i = n; i-- > 0 && nd < 3;) {
		if (name[i] == '.') {
			dots[nd++] = i;
		}
	}
	if (nd == 0) {
		return; /* one label: no registrable domain */
	}
	size_t tld_len = n - dots[0] - 1;
	size_t start = nd >= 2 ? dots[1] + 1 : 0;
	size_t sld_len = dots[0] - start;
	if (tld_len == 2 && public_second_level(name + start, sld_len)) {
		if (nd < 2) {
			return; /* "co.uk" itself is a public suffix */
		}
		start = nd >= 3 ? dots[2] + 1 : 0;
	}
	size_t len = n - start;
	if (len + 1 > cap) {
		return;
	}
	memcpy(out, name + start, len);
	out[len] = 0;
}

/* "A 192.0.2.1" (the query log's summary) as Blocky writes an answer: "A (192.0.2.1)". */
static void answer_text(const char *summary, char *out, size_t cap)
{
	const char *sp = strchr(summary, ' ');
	if (!sp) {
		snprintf(out, cap, "%s", summary);
		return;
	}
	snprintf(out, cap, "%.*s (%s)", (int)(sp - summary), summary, sp + 1);
}

int nx_pgsink_row(const struct nx_qlog_rec *r, const struct nx_pgsink_row_ctx *ctx, char *buf,
		  size_t cap)
{
	if (ctx->privacy >= 3) {
		return 0;
	}
	bool hide_names = ctx->privacy >= 1, hide_clients = ctx->privacy >= 2;
	struct out o = {.p = buf, .cap = cap};
	char tmp[128];

	/* request_ts: arrival, UTC, milliseconds */
	time_t sec = (time_t)(r->ts_ms / 1000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	int n = snprintf(tmp, sizeof(tmp), "%04d-%02d-%02d %02d:%02d:%02d.%03d+00",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, (int)(r->ts_ms % 1000));
	put_raw(&o, tmp, (size_t)n);
	tab(&o);

	/* client_ip, client_name: the client id the query carried, else the address (Blocky
	 * falls back to the address when no name is known) */
	char ip[INET6_ADDRSTRLEN] = "";
	if (r->family == AF_INET || r->family == AF_INET6) {
		inet_ntop(r->family, r->client, ip, sizeof(ip));
	}
	put_text(&o, hide_clients ? "hidden" : ip);
	tab(&o);
	put_text(&o, hide_clients ? "hidden" : (r->client_id[0] ? r->client_id : ip));
	tab(&o);

	n = snprintf(tmp, sizeof(tmp), "%u", r->duration_us / 1000);
	put_raw(&o, tmp, (size_t)n);
	tab(&o);

	/* reason, response_type */
	const char *source = hide_names && user_rule(r->reason) ? "hidden" : r->source;
	const char *rtype;
	char reason[NX_QLOG_SOURCE_MAX + 128];
	if (r->action == NX_QLOG_ACT_BLOCK) {
		rtype = "BLOCKED";
		const char *why =
		    source[0] ? source : nx_filter_reason_name((enum nx_filter_reason)r->reason);
		snprintf(reason, sizeof(reason), "BLOCKED (%s)", why);
	} else if (special_reason(r->reason)) {
		rtype = "SPECIAL";
		snprintf(reason, sizeof(reason), "SPECIAL");
	} else if (r->action == NX_QLOG_ACT_LOCAL) {
		rtype = "CUSTOMDNS";
		snprintf(reason, sizeof(reason), "CUSTOM DNS");
	} else if (r->cached) {
		rtype = "CACHED";
		snprintf(reason, sizeof(reason), "CACHED");
	} else {
		rtype = "RESOLVED";
		if (ctx->upstream && ctx->upstream[0]) {
			snprintf(reason, sizeof(reason), "RESOLVED (%s)", ctx->upstream);
		} else {
			snprintf(reason, sizeof(reason), "RESOLVED");
		}
	}
	put_text(&o, reason);
	tab(&o);
	put_text(&o, rtype);
	tab(&o);

	/* question_type, question_name, effective_tldp, answer, response_code, hostname */
	char tb[16];
	put_text(&o, nx_dns_type_name(r->qtype, tb));
	tab(&o);
	char etld[NX_QLOG_NAME_MAX];
	nx_pgsink_etld1(r->name, etld, sizeof(etld));
	put_text(&o, hide_names ? "hidden" : r->name);
	tab(&o);
	put_text(&o, hide_names ? "hidden" : etld);
	tab(&o);
	char ans[NX_QLOG_ANSWER_MAX + 4];
	answer_text(r->answer, ans, sizeof(ans));
	put_text(&o, hide_names && ans[0] ? "hidden" : ans);
	tab(&o);
	put_text(&o, rcode_name(r->rcode, tb));
	tab(&o);
	put_text(&o, ctx->hostname ? ctx->hostname : "");
	tab(&o);

	/* nxdns: matched_rule, source_list, protocol, upstream, nxdns_reason */
	put_opt(&o, hide_names && r->matched[0] ? "hidden" : r->matched);
	tab(&o);
	put_opt(&o, source);
	tab(&o);
	put_opt(&o, r->proto < NX_QLOG_PROTO__COUNT ? proto_names[r->proto] : "");
	tab(&o);
	put_opt(&o, ctx->upstream);
	tab(&o);
	put_opt(&o, r->reason == NX_FILTER_R_none
			? ""
			: nx_filter_reason_name((enum nx_filter_reason)r->reason));
	put_raw(&o, "\n", 1);
	if (o.full) {
		return NX_ETRUNC;
	}
	buf[o.len] = 0; /* put_raw kept a byte for it */
	return (int)o.len;
}

/* The side structure's rule parser: AdGuard rules with modifiers, regexes, URL patterns and
 * hosts answers; the literals the prefilter keys on; PCRE2 compile on the ledger. */
#include "filter/side.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "filter/impl.h"
#include "filter/side_impl.h"

/* ---- PCRE2 memory on the ledger (compile time: control thread) ---- */

/* PCRE2's free() gets no size; the ledger wants one: keep it in a header. */
struct re_hdr {
	size_t size;
	max_align_t align;
};

void *nx_side_re_malloc(PCRE2_SIZE size, void *data)
{
	(void)data;
	struct re_hdr *h = nx_mem_alloc(NX_OWNER_filter_side, sizeof(*h) + size);
	if (!h) {
		return NULL;
	}
	h->size = size;
	return h + 1;
}

void nx_side_re_free(void *p, void *data)
{
	(void)data;
	if (p) {
		struct re_hdr *h = (struct re_hdr *)p - 1;
		nx_mem_free(NX_OWNER_filter_side, h, sizeof(*h) + h->size);
	}
}

/* ---- small text helpers ---- */

void nx_side_errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static inline bool host_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_' || c >= 0x80;
}

/* Hosts-line null addresses: these block; any other address is an answer. A zone-scoped
 * address (fe80::1%lo0) cannot be an answer either. */
bool nx_filter_hosts_null_addr(const char *s, size_t len)
{
	char buf[64];
	if (memchr(s, '%', len)) {
		return true;
	}
	if (len == 0 || len >= sizeof(buf)) {
		return true;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	uint8_t a[16];
	if (inet_pton(AF_INET, buf, a) == 1) {
		static const uint8_t any4[4] = {0, 0, 0, 0}, lo4[4] = {127, 0, 0, 1};
		return memcmp(a, any4, 4) == 0 || memcmp(a, lo4, 4) == 0;
	}
	if (inet_pton(AF_INET6, buf, a) == 1) {
		static const uint8_t any6[16] = {0};
		static const uint8_t lo6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
		return memcmp(a, any6, 16) == 0 || memcmp(a, lo6, 16) == 0;
	}
	return true;
}

/* DNS type mnemonic (any case) or TYPEn -> number; 0 when unknown. NONE/OPT are no query
 * types. */
uint16_t nx_side_type_from_text(const char *s, size_t len)
{
	char want[16];
	if (len == 0 || len >= sizeof(want)) {
		return 0;
	}
	memcpy(want, s, len);
	want[len] = '\0';
	if (strncasecmp(want, "TYPE", 4) == 0 && len > 4) {
		char *end;
		unsigned long v = strtoul(want + 4, &end, 10);
		return *end == '\0' && v > 0 && v <= 65535 && v != 41 ? (uint16_t)v : 0;
	}
	char buf[16];
	/* Assigned mnemonics live below 512 and at 32768/32769 (TA, DLV). */
	for (unsigned t = 1; t < 65536; t = (t == 511 ? 32768 : t + 1)) {
		if (t == 32770) {
			break;
		}
		const char *n = nx_dns_type_name((uint16_t)t, buf);
		if (t != 41 && strncmp(n, "TYPE", 4) != 0 && strcasecmp(n, want) == 0) {
			return (uint16_t)t;
		}
	}
	return 0;
}

/* ---- rule parsing (no allocation: results into a caller struct) ---- */

/* End of the pattern: the '$' that starts the modifiers (for /re/ the one right after the
 * closing slash), or len. */
static size_t pattern_end(const char *s, size_t len)
{
	if (len >= 2 && s[0] == '/') {
		for (size_t i = len; i-- > 1;) {
			if (s[i] == '$' && s[i - 1] == '/' && i >= 2) {
				return i;
			}
		}
		if (s[len - 1] == '/') {
			return len;
		}
	}
	const char *d = memchr(s, '$', len);
	return d ? (size_t)(d - s) : len;
}

/* Split modifier text at unquoted, unescaped `sep`; returns the length of the first part. */
static size_t split_at(const char *s, size_t len, char sep)
{
	char q = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\' && i + 1 < len) {
			i++;
			continue;
		}
		if (q) {
			if (s[i] == q) {
				q = 0;
			}
		} else if (s[i] == '\'' || s[i] == '"') {
			q = s[i];
		} else if (s[i] == sep) {
			return i;
		}
	}
	return len;
}

/* Parse "a|~b|'c d'" into vals (unquoted, unescaped copies in p->scratch). */
static int parse_values(struct parsed *p, const char *s, size_t len, struct pval *vals, unsigned *n,
			const char *mod, char *err, size_t errlen)
{
	*n = 0;
	if (len == 0) {
		nx_side_errf(err, errlen, "$%s needs a value", mod);
		return NX_EFORMAT;
	}
	while (len > 0 || *n == 0) {
		size_t part = split_at(s, len, '|');
		const char *v = s;
		size_t vl = part;
		bool neg = false;
		if (vl > 0 && v[0] == '~') {
			neg = true;
			v++;
			vl--;
		}
		if (vl >= 2 && (v[0] == '\'' || v[0] == '"') && v[vl - 1] == v[0]) {
			v++;
			vl -= 2;
		}
		if (vl == 0) {
			nx_side_errf(err, errlen, "$%s: empty value", mod);
			return NX_EFORMAT;
		}
		if (*n >= MODVAL_MAX) {
			nx_side_errf(err, errlen, "$%s: more than %u values", mod, MODVAL_MAX);
			return NX_EFORMAT;
		}
		char *out = p->scratch + p->scratch_used;
		size_t ol = 0;
		for (size_t i = 0; i < vl; i++) {
			if (v[i] == '\\' && i + 1 < vl) {
				i++;
			}
			out[ol++] = v[i];
		}
		p->scratch_used += ol;
		vals[*n] = (struct pval){out, ol, neg};
		(*n)++;
		if (part >= len) {
			break;
		}
		s += part + 1;
		len -= part + 1;
		if (len == 0) {
			nx_side_errf(err, errlen, "$%s: empty value after '|'", mod);
			return NX_EFORMAT;
		}
	}
	return 0;
}

/* $dnsrewrite value: short forms (an address, a name, a bare rcode) or RCODE;TYPE;VALUE. */
static int parse_rewrite(struct parsed *p, const char *v, size_t len, char *err, size_t errlen)
{
	char buf[NX_FILTER_LINE_MAX + 1];
	memcpy(buf, v, len);
	buf[len] = '\0';
	p->has_rewrite = true;
	if (len == 0) {
		if (!p->allow) {
			nx_side_errf(err, errlen,
				     "$dnsrewrite needs a value (only @@ rules may omit it)");
			return NX_EFORMAT;
		}
		return 0;
	}
	char *rc = buf, *ty = NULL, *val = NULL;
	char *semi = strchr(buf, ';');
	if (semi) {
		*semi = '\0';
		ty = semi + 1;
		char *s2 = strchr(ty, ';');
		if (!s2) {
			nx_side_errf(err, errlen, "$dnsrewrite: expected RCODE;TYPE;VALUE");
			return NX_EFORMAT;
		}
		*s2 = '\0';
		val = s2 + 1;
	}
	uint8_t a[16];
	if (!semi) {
		if (strcasecmp(rc, "NXDOMAIN") == 0) {
			p->rewrite = NX_FILTER_RW_NXDOMAIN;
			return 0;
		}
		if (strcasecmp(rc, "REFUSED") == 0) {
			p->rewrite = NX_FILTER_RW_REFUSED;
			return 0;
		}
		if (strcasecmp(rc, "NOERROR") == 0) {
			p->rewrite = NX_FILTER_RW_RECORDS; /* empty NOERROR: NODATA */
			return 0;
		}
		/* short form: an address or a CNAME target */
		val = rc;
		ty = inet_pton(AF_INET, val, a) == 1	? "A"
		     : inet_pton(AF_INET6, val, a) == 1 ? "AAAA"
							: "CNAME";
		rc = "NOERROR";
	}
	if (strcasecmp(rc, "NXDOMAIN") == 0 || strcasecmp(rc, "REFUSED") == 0) {
		if (*ty || *val) {
			nx_side_errf(err, errlen, "$dnsrewrite: %s takes no records", rc);
			return NX_EFORMAT;
		}
		p->rewrite =
		    strcasecmp(rc, "NXDOMAIN") == 0 ? NX_FILTER_RW_NXDOMAIN : NX_FILTER_RW_REFUSED;
		return 0;
	}
	if (strcasecmp(rc, "NOERROR") != 0) {
		nx_side_errf(err, errlen, "$dnsrewrite: unsupported rcode '%s'", rc);
		return NX_EFORMAT;
	}
	p->rewrite = NX_FILTER_RW_RECORDS;
	if (strcasecmp(ty, "A") == 0 && inet_pton(AF_INET, val, a) == 1) {
		p->rr_type = 1;
		memcpy(p->rdata, a, 4);
		p->rdlen = 4;
	} else if (strcasecmp(ty, "AAAA") == 0 && inet_pton(AF_INET6, val, a) == 1) {
		p->rr_type = 28;
		memcpy(p->rdata, a, 16);
		p->rdlen = 16;
	} else if (strcasecmp(ty, "CNAME") == 0) {
		char norm[NX_FILTER_NAME_MAX + 1];
		size_t nl;
		if (nx_filter_name_norm(val, strlen(val), norm, &nl) != NX_FILTER_SKIP_NONE) {
			nx_side_errf(err, errlen, "$dnsrewrite: '%s' is not a host name", val);
			return NX_EFORMAT;
		}
		int wl = nx_dns_name_from_text(norm, p->rdata);
		if (wl <= 0) {
			nx_side_errf(err, errlen, "$dnsrewrite: '%s' is not a host name", val);
			return NX_EFORMAT;
		}
		p->rr_type = 5;
		p->rdlen = (uint16_t)wl;
	} else if (strcasecmp(ty, "TXT") == 0) {
		size_t vl = strlen(val);
		if (vl > NX_FILTER_TXT_MAX) {
			nx_side_errf(err, errlen, "$dnsrewrite: TXT longer than %u bytes",
				     NX_FILTER_TXT_MAX);
			return NX_EFORMAT;
		}
		p->rr_type = 16;
		p->rdata[0] = (uint8_t)vl;
		memcpy(p->rdata + 1, val, vl);
		p->rdlen = (uint16_t)(vl + 1);
	} else if (strcasecmp(ty, "A") == 0 || strcasecmp(ty, "AAAA") == 0) {
		nx_side_errf(err, errlen, "$dnsrewrite: '%s' is not an %s address", val, ty);
		return NX_EFORMAT;
	} else {
		nx_side_errf(err, errlen,
			     "$dnsrewrite: unsupported type '%s' (A, AAAA, CNAME, TXT)", ty);
		return NX_EFORMAT;
	}
	return 0;
}

static int parse_modifiers(struct parsed *p, const char *m, size_t len, char *err, size_t errlen)
{
	if (len == 0) {
		nx_side_errf(err, errlen, "'$' without modifiers");
		return NX_EFORMAT;
	}
	while (len > 0) {
		size_t part = split_at(m, len, ',');
		const char *eq = memchr(m, '=', part);
		size_t kl = eq ? (size_t)(eq - m) : part;
		const char *v = eq ? eq + 1 : m + part;
		size_t vl = eq ? part - kl - 1 : 0;
		int rc = 0;
#define IS(k) (kl == sizeof(k) - 1 && memcmp(m, k, kl) == 0)
		if (IS("important") && !eq) {
			p->important = true;
		} else if (IS("badfilter") && !eq) {
			p->badfilter = true;
		} else if (IS("client")) {
			rc = parse_values(p, v, vl, p->client, &p->nclient, "client", err, errlen);
			p->nmods++;
		} else if (IS("ctag")) {
			rc = parse_values(p, v, vl, p->ctag, &p->nctag, "ctag", err, errlen);
			p->nmods++;
		} else if (IS("dnstype")) {
			rc = parse_values(p, v, vl, p->type, &p->ntype, "dnstype", err, errlen);
			p->nmods++;
		} else if (IS("denyallow")) {
			rc = parse_values(p, v, vl, p->deny, &p->ndeny, "denyallow", err, errlen);
			p->nmods++;
		} else if (IS("dnsrewrite")) {
			rc = parse_rewrite(p, v, vl, err, errlen);
			p->nmods++;
		} else {
			nx_side_errf(err, errlen, "unknown modifier '%.*s'", (int)kl, m);
			return NX_EFORMAT;
		}
#undef IS
		if (rc) {
			return rc;
		}
		if (part >= len) {
			break;
		}
		m += part + 1;
		len -= part + 1;
		if (len == 0) {
			nx_side_errf(err, errlen, "empty modifier after ','");
			return NX_EFORMAT;
		}
	}
	return 0;
}

/* Check the parsed values: 0, or NX_EFORMAT with the message in err. */
static int check_values(struct parsed *p, char *err, size_t errlen)
{
	for (unsigned i = 0; i < p->ntype; i++) {
		if (!nx_side_type_from_text(p->type[i].s, p->type[i].len)) {
			nx_side_errf(err, errlen, "$dnstype: unknown type '%.*s'",
				     (int)p->type[i].len, p->type[i].s);
			return NX_EFORMAT;
		}
	}
	for (unsigned i = 0; i < p->ndeny; i++) {
		char norm[NX_FILTER_NAME_MAX + 1];
		size_t nl;
		if (p->deny[i].neg) {
			nx_side_errf(err, errlen, "$denyallow values cannot be negated");
			return NX_EFORMAT;
		}
		enum nx_filter_skip w =
		    nx_filter_name_norm(p->deny[i].s, p->deny[i].len, norm, &nl);
		if (w != NX_FILTER_SKIP_NONE && w != NX_FILTER_SKIP_localhost) {
			nx_side_errf(err, errlen, "$denyallow: '%.*s' is not a domain",
				     (int)p->deny[i].len, p->deny[i].s);
			return NX_EFORMAT;
		}
	}
	for (unsigned i = 0; i < p->nclient; i++) {
		if (p->client[i].len > 255) {
			/* a client name is a config identifier; an address or CIDR is shorter */
			nx_side_errf(err, errlen, "$client: value longer than 255 bytes");
			return NX_EFORMAT;
		}
	}
	if (p->has_rewrite && p->allow && p->rewrite != NX_FILTER_RW_NONE) {
		nx_side_errf(err, errlen,
			     "@@ with a $dnsrewrite value: write @@...$dnsrewrite alone");
		return NX_EFORMAT;
	}
	return 0;
}

/* Adblock pattern -> PCRE2 source. '^' is a separator (anything but a host character, or the
 * end); '*' any run; '|' anchors; '||' a host-label start after an optional scheme. */
int nx_side_pattern_regex(const char *s, size_t len, char *out, size_t cap)
{
	size_t o = 0;
#define PUT(str)                                                                                   \
	do {                                                                                       \
		size_t l_ = strlen(str);                                                           \
		if (o + l_ >= cap)                                                                 \
			return NX_ELIMIT;                                                          \
		memcpy(out + o, str, l_);                                                          \
		o += l_;                                                                           \
	} while (0)
	size_t i = 0;
	if (len >= 2 && s[0] == '|' && s[1] == '|') {
		PUT("^(?:[a-z][a-z0-9+.-]*://)?(?:[^/:]*\\.)?");
		i = 2;
	} else if (len >= 1 && s[0] == '|') {
		PUT("^");
		i = 1;
	}
	for (; i < len; i++) {
		char c = s[i];
		char one[3] = {c, 0, 0};
		if (c == '*') {
			PUT(".*");
		} else if (c == '^') {
			PUT("(?:[^a-z0-9_.%-]|$)");
		} else if (c == '|' && i == len - 1) {
			PUT("$");
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '%' || c == '/' ||
			   c == ':' || c == '=' || c == '&' || c == ',' || c == '@' || c == '~' ||
			   c == '\'' || c == '"' || c == '#' || c == '!' || c == ';' || c == '<' ||
			   c == '>' || c == '`' || (unsigned char)c >= 0x80) {
			PUT(one);
		} else {
			one[0] = '\\';
			one[1] = c;
			PUT(one);
		}
	}
	out[o] = '\0';
	return 0;
#undef PUT
}

/* A URL pattern that needs a real URL path can never match "http://host/": refuse it rather
 * than keep a regex no query can reach. A '/' after a host part is a path when anything but
 * '*', '^' or '|' follows it. */
static bool needs_path(const char *s, size_t len)
{
	for (size_t i = 1; i < len; i++) {
		if (s[i] != '/' || s[i - 1] == ':' || s[i - 1] == '/' ||
		    (i + 1 < len && s[i + 1] == '/')) {
			continue;
		}
		for (size_t j = i + 1; j < len; j++) {
			if (s[j] != '*' && s[j] != '^' && s[j] != '|') {
				return true;
			}
		}
	}
	return false;
}

static bool wide(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] != '*' && s[i] != '^' && s[i] != '|' && s[i] != '/' && s[i] != ':') {
			return false;
		}
	}
	return true;
}

/* Classify the pattern: indexed anchor with its name, regex, URL pattern, or any. */
static enum nx_filter_skip parse_pattern(struct parsed *p, char *err, size_t errlen)
{
	const char *s = p->pat;
	size_t len = p->plen;
	bool restricted = p->nclient || p->nctag || p->ndeny || p->ntype;
	if (len >= 2 && s[0] == '/' && s[len - 1] == '/') {
		p->anchor = AN_RE_HOST;
		p->is_regex = true;
		return NX_FILTER_SKIP_NONE;
	}
	if (len == 0 || wide(s, len)) {
		if (!restricted) {
			nx_side_errf(err, errlen,
				     "rule matches every name and has no $client/$ctag/"
				     "$dnstype/$denyallow restriction");
			return NX_FILTER_SKIP_pattern;
		}
		if (len == 0 || (len == 1 && s[0] == '*') ||
		    (len == 2 && memcmp(s, "*^", 2) == 0)) {
			p->anchor = AN_ANY;
			return NX_FILTER_SKIP_NONE;
		}
	}
	/* ||x^ |x^ and their terminator variants: the name index. */
	size_t i = 0;
	bool sub = false, start = false;
	if (len >= 2 && s[0] == '|' && s[1] == '|') {
		sub = true;
		i = 2;
	} else if (len >= 1 && s[0] == '|') {
		start = true;
		i = 1;
	}
	size_t h = i;
	while (h < len && host_char((unsigned char)s[h])) {
		h++;
	}
	const char *tail = s + h;
	size_t tl = len - h;
	bool term = tl == 0 || (tl == 1 && (tail[0] == '^' || tail[0] == '|')) ||
		    (tl == 2 && tail[0] == '^' && tail[1] == '|');
	if ((sub || start) && h > i && term && (sub || tl > 0)) {
		enum nx_filter_skip w = nx_filter_name_norm(s + i, h - i, p->name, &p->nlen);
		if (w != NX_FILTER_SKIP_NONE) {
			nx_side_errf(err, errlen, "'%.*s' is not a usable host name (%s)",
				     (int)(h - i), s + i, nx_filter_skip_name(w));
			return w;
		}
		p->anchor = sub ? AN_SUB : AN_EXACT;
		return NX_FILTER_SKIP_NONE;
	}
	if (!sub && !start && h == len && h > 0 && s[0] != '.' && s[h - 1] != '.') {
		/* a bare name is AdGuard's host rule (x only), as in the snapshot: never a
		 * substring pattern (which would also match "notx.org"); ".x." is no name, so it
		 * stays the URL substring AdGuard reads */
		enum nx_filter_skip w = nx_filter_name_norm(s, h, p->name, &p->nlen);
		if (w != NX_FILTER_SKIP_NONE) {
			nx_side_errf(err, errlen, "'%.*s' is not a usable host name (%s)", (int)h,
				     s, nx_filter_skip_name(w));
			return w;
		}
		p->anchor = AN_EXACT;
		return NX_FILTER_SKIP_NONE;
	}
	if (needs_path(s, len)) {
		nx_side_errf(err, errlen, "URL path: a DNS query has none");
		return NX_FILTER_SKIP_path;
	}
	p->anchor = AN_RE_URL;
	return NX_FILTER_SKIP_NONE;
}

/* Parse one adblock-style rule line into p. Returns NONE or the skip reason (+ err). */
enum nx_filter_skip nx_side_parse_rule(struct parsed *p, const char *line, size_t len, char *err,
				       size_t errlen)
{
	memset(p, 0, offsetof(struct parsed, canon));
	p->scratch_used = 0;
	p->canon_len = 0;
	const char *s = line;
	if (len >= 2 && s[0] == '@' && s[1] == '@') {
		p->allow = true;
		s += 2;
		len -= 2;
	}
	size_t pe = pattern_end(s, len);
	p->pat = s;
	p->plen = pe;
	for (size_t i = 0; i < pe; i++) {
		if (side_space(s[i])) {
			/* no name contains one: a list line with a blank here is two tokens, or
			 * a regex that can never match */
			nx_side_errf(err, errlen, "whitespace in the rule's pattern");
			return s[0] == '/' ? NX_FILTER_SKIP_regex : NX_FILTER_SKIP_malformed;
		}
	}
	if (pe < len) {
		if (parse_modifiers(p, s + pe + 1, len - pe - 1, err, errlen) ||
		    check_values(p, err, errlen)) {
			return NX_FILTER_SKIP_modifier;
		}
	}
	enum nx_filter_skip w = parse_pattern(p, err, errlen);
	if (w != NX_FILTER_SKIP_NONE) {
		return w;
	}
	/* canonical text: "@@"? pattern "$" modifiers without badfilter, as written */
	size_t o = 0;
	if (p->allow) {
		memcpy(p->canon, "@@", 2);
		o = 2;
	}
	memcpy(p->canon + o, p->pat, p->plen);
	o += p->plen;
	if (pe < len) {
		const char *m = s + pe + 1, *end = s + len;
		bool first = true;
		while (m < end) {
			size_t part = split_at(m, (size_t)(end - m), ',');
			if (!(part == 9 && memcmp(m, "badfilter", 9) == 0)) {
				p->canon[o++] = first ? '$' : ',';
				memcpy(p->canon + o, m, part);
				o += part;
				first = false;
			}
			m += part + 1;
		}
	}
	p->canon_len = o;
	return NX_FILTER_SKIP_NONE;
}

/* ---- literals for the prefilter ----
 * A literal here is a run of bytes that every subject the rule matches must contain. Getting
 * one wrong would hide a match, so the extractors are conservative: when unsure, no literal
 * (the rule then runs on every clean name). */

static bool run_impossible(const char *run, size_t rl)
{
	for (size_t i = 0; i < rl; i++) {
		unsigned char c = (unsigned char)run[i];
		if (!side_subject_byte((unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c))) {
			return true;
		}
	}
	return false;
}

/* Every run passed here is mandatory, so any of them is a sound literal. The best: one with a
 * byte no query subject holds (the rule never runs: `#`, `?`, `=` in browser rules), else the
 * longest (the fewest names contain it). */
static void keep_longest(const char *run, size_t rl, char *out, size_t *olen)
{
	bool imp = rl > 0 && run_impossible(run, rl), had = *olen > 0 && run_impossible(out, *olen);
	if (had || (!imp && rl <= *olen)) {
		return;
	}
	for (size_t i = 0; i < rl; i++) {
		char c = run[i];
		out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	*olen = rl;
}

/* Adblock URL pattern: the longest run without '*', '^', '|'. */
size_t nx_side_lit_pattern(const char *s, size_t len, char *out)
{
	size_t olen = 0, start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '*' || s[i] == '^' || s[i] == '|') {
			keep_longest(s + start, i - start, out, &olen);
			start = i + 1;
		}
	}
	return olen;
}

size_t nx_side_lit_pattern2(const char *s, size_t len, const char *first, size_t flen, char *out)
{
	size_t olen = 0, start = 0;
	bool skipped = false;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '*' || s[i] == '^' || s[i] == '|') {
			size_t rl = i - start;
			bool same =
			    !skipped && rl == flen && strncasecmp(s + start, first, rl) == 0;
			if (same) {
				skipped = true; /* the first literal itself, once */
			} else if (rl > olen && !run_impossible(s + start, rl)) {
				for (size_t k = 0; k < rl; k++) {
					char c = s[start + k];
					out[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
				}
				olen = rl;
			}
			start = i + 1;
		}
	}
	return olen;
}

/* Past a character class starting at s[i] == '['; len when it does not end. "[]...]" and
 * "[^]...]" start with a literal ']', "[:alpha:]" nests. */
static size_t class_end(const char *s, size_t len, size_t i)
{
	i++;
	if (i < len && s[i] == '^') {
		i++;
	}
	if (i < len && s[i] == ']') {
		i++;
	}
	while (i < len && s[i] != ']') {
		if (s[i] == '\\') {
			i += 2;
		} else if (s[i] == '[' && i + 1 < len && s[i + 1] == ':') {
			const char *e = memchr(s + i + 2, ']', len - i - 2);
			i = e ? (size_t)(e - s) + 1 : len;
		} else {
			i++;
		}
	}
	return i < len ? i + 1 : len;
}

/* Is s[i] == '{' a quantifier ({n}, {n,}, {n,m})? *end gets the '}'. Anything else is a
 * literal '{' to PCRE2 10.42. */
static bool quantifier_at(const char *s, size_t len, size_t i, size_t *end)
{
	size_t j = i + 1, d = 0;
	while (j < len && s[j] >= '0' && s[j] <= '9') {
		j++;
		d++;
	}
	if (d && j < len && s[j] == ',') {
		j++;
		while (j < len && s[j] >= '0' && s[j] <= '9') {
			j++;
		}
	}
	if (d && j < len && s[j] == '}') {
		*end = j;
		return true;
	}
	return false;
}

/* PCRE2 source: the longest run of literal characters at nesting depth 0, outside classes,
 * each not made optional by a quantifier. A top-level '|', inline options or verbs: none. */
size_t nx_side_lit_regex(const char *s, size_t len, char *out)
{
	/* first pass: alternation at the top, inline options ((?x) makes blanks and # text mean
	 * nothing), verbs; an unterminated class */
	int depth = 0;
	for (size_t i = 0; i < len;) {
		char c = s[i];
		if (c == '\\') {
			i += 2;
			continue;
		}
		if (c == '[') {
			size_t e = class_end(s, len, i);
			if (e >= len && s[len - 1] != ']') {
				return 0;
			}
			i = e;
			continue;
		}
		if (c == '(' && i + 1 < len && (s[i + 1] == '?' || s[i + 1] == '*') &&
		    !(i + 2 < len && s[i + 1] == '?' && s[i + 2] == ':')) {
			return 0;
		}
		if (c == '(') {
			depth++;
		} else if (c == ')') {
			depth--;
		} else if (c == '|' && depth <= 0) {
			return 0;
		}
		i++;
	}
	char run[NX_FILTER_LINE_MAX];
	size_t rl = 0, olen = 0;
	depth = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '\\' && i + 1 < len) {
			char e = s[++i];
			bool lit = !((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') ||
				     (e >= '0' && e <= '9'));
			if (lit && depth == 0) {
				run[rl++] = e;
			} else {
				keep_longest(run, rl, out, &olen);
				rl = 0;
			}
			continue;
		}
		size_t qend = i;
		if (c == '?' || c == '*' || (c == '{' && quantifier_at(s, len, i, &qend))) {
			if (rl > 0) {
				rl--; /* the previous character may be absent */
			}
			keep_longest(run, rl, out, &olen);
			rl = 0;
			if (c == '{') {
				i = qend;
			}
			continue;
		}
		if (c == '+') {
			keep_longest(run, rl, out, &olen);
			rl = 0;
			continue;
		}
		if (c == '[') {
			keep_longest(run, rl, out, &olen);
			rl = 0;
			i = class_end(s, len, i) - 1;
			continue;
		}
		if (c == '(' || c == ')' || c == '.' || c == '^' || c == '$' || c == '|' ||
		    c == '{' || c == '}') {
			keep_longest(run, rl, out, &olen);
			rl = 0;
			depth += c == '(' ? 1 : c == ')' ? -1 : 0;
			continue;
		}
		if (depth == 0) {
			run[rl++] = c;
		} else {
			keep_longest(run, rl, out, &olen);
			rl = 0;
		}
	}
	keep_longest(run, rl, out, &olen);
	return olen;
}

static bool plain_lit(char c)
{
	return !strchr("\\^$.|?*+()[]{}", c);
}

size_t nx_side_lit_regex_start(const char *s, size_t len, char *out, unsigned *nalt,
			       size_t *shortest)
{
	*nalt = 0;
	*shortest = 0;
	if (len < 2 || s[0] != '^') {
		return 0;
	}
	/* no alternation at the top (then ^ binds to the first branch only) */
	int depth = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\') {
			i++;
		} else if (s[i] == '[') {
			i = class_end(s, len, i) - 1;
		} else if (s[i] == '(') {
			depth++;
		} else if (s[i] == ')') {
			depth--;
		} else if (s[i] == '|' && depth <= 0) {
			return 0;
		}
	}
	char alt[SIDE_AC_ALTS_MAX][NX_FILTER_LINE_MAX / 16];
	size_t alen[SIDE_AC_ALTS_MAX] = {0};
	unsigned n = 1;
	size_t i = 1;
	if (s[1] == '(') {
		/* a group of plain alternatives: (a|b|c) or (?:a|b|c) */
		i = 2;
		if (i + 1 < len && s[i] == '?' && s[i + 1] == ':') {
			i += 2;
		}
		n = 1;
		for (; i < len && s[i] != ')'; i++) {
			char c = s[i];
			if (c == '|') {
				if (alen[n - 1] == 0 || n == SIDE_AC_ALTS_MAX) {
					return 0;
				}
				n++;
				continue;
			}
			if (c == '\\' && i + 1 < len && !isalnum((unsigned char)s[i + 1])) {
				c = s[++i];
			} else if (!plain_lit(c)) {
				return 0; /* a class, a quantifier, a nested group: not plain */
			}
			if (alen[n - 1] + 1 >= sizeof(alt[0])) {
				return 0;
			}
			alt[n - 1][alen[n - 1]++] = c;
		}
		if (i >= len || alen[n - 1] == 0) {
			return 0;
		}
		i++; /* past ')' */
		if (i < len && (s[i] == '?' || s[i] == '*' || s[i] == '{')) {
			return 0; /* the group may be absent */
		}
		if (i < len && s[i] == '+') {
			i = len; /* repeated: nothing certain follows the first pass */
		}
	}
	/* the literal run that follows, for every alternative; a character a quantifier makes
	 * optional ends it */
	while (i < len) {
		char c = s[i];
		size_t next = i + 1;
		if (c == '\\' && i + 1 < len && !isalnum((unsigned char)s[i + 1])) {
			c = s[i + 1];
			next = i + 2;
		} else if (!plain_lit(c)) {
			break;
		}
		if (next < len && (s[next] == '?' || s[next] == '*' || s[next] == '{')) {
			break;
		}
		bool stop = next < len && s[next] == '+';
		for (unsigned k = 0; k < n; k++) {
			if (alen[k] + 1 >= sizeof(alt[0])) {
				stop = true;
				break;
			}
			alt[k][alen[k]++] = c;
		}
		if (stop) {
			break;
		}
		i = next;
	}
	size_t o = 0, shortest_len = SIZE_MAX;
	for (unsigned k = 0; k < n; k++) {
		if (alen[k] == 0 || alen[k] > 255) {
			return 0;
		}
		out[o++] = (char)alen[k];
		for (size_t b = 0; b < alen[k]; b++) {
			char c = alt[k][b];
			out[o++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		shortest_len = alen[k] < shortest_len ? alen[k] : shortest_len;
	}
	*nalt = n;
	*shortest = shortest_len;
	return o;
}

/* ---- regex compile ---- */

pcre2_code *nx_side_re_compile(const char *src, size_t len, pcre2_compile_context *cctx, char *err,
			       size_t errlen)
{
	int ec;
	PCRE2_SIZE eo;
	/* No JIT ever (MemoryDenyWriteExecute); no \C; caseless because names are lower case
	 * but list authors write [A-Z]. */
	pcre2_code *re =
	    pcre2_compile((PCRE2_SPTR)src, len,
			  PCRE2_CASELESS | PCRE2_NEVER_BACKSLASH_C | PCRE2_NO_AUTO_CAPTURE |
			      PCRE2_NEVER_UTF | PCRE2_NEVER_UCP,
			  &ec, &eo, cctx);
	if (!re) {
		PCRE2_UCHAR msg[120];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		nx_side_errf(err, errlen, "regex: %s at offset %zu", (const char *)msg, (size_t)eo);
	}
	return re;
}

static enum nx_filter_skip check_parsed(struct parsed *pp, const char *line, size_t len, char *err,
					size_t errlen)
{
	enum nx_filter_skip w = nx_side_parse_rule(pp, line, len, err, errlen);
	if (w != NX_FILTER_SKIP_NONE) {
		return w;
	}
	if (pp->anchor == AN_RE_HOST || pp->anchor == AN_RE_URL) {
		char src[NX_FILTER_LINE_MAX * 2 + 64];
		const char *rs = pp->pat + 1;
		size_t rl = pp->plen >= 2 ? pp->plen - 2 : 0;
		if (pp->anchor == AN_RE_URL) {
			if (nx_side_pattern_regex(pp->pat, pp->plen, src, sizeof(src))) {
				nx_side_errf(err, errlen, "pattern too long");
				return NX_FILTER_SKIP_pattern;
			}
			rs = src;
			rl = strlen(src);
		}
		pcre2_general_context *g =
		    pcre2_general_context_create(nx_side_re_malloc, nx_side_re_free, NULL);
		pcre2_compile_context *cc = g ? pcre2_compile_context_create(g) : NULL;
		pcre2_code *re = cc ? nx_side_re_compile(rs, rl, cc, err, errlen) : NULL;
		bool ok = re != NULL;
		if (!cc) {
			nx_side_errf(err, errlen, "out of memory");
		}
		pcre2_code_free(re);
		pcre2_compile_context_free(cc);
		pcre2_general_context_free(g);
		if (!ok) {
			return pp->anchor == AN_RE_HOST ? NX_FILTER_SKIP_regex
							: NX_FILTER_SKIP_pattern;
		}
	}
	return NX_FILTER_SKIP_NONE;
}

/* Compile-time check without keeping anything. */
enum nx_filter_skip nx_filter_side_check(const char *line, size_t len, char *err, size_t errlen)
{
	if (len > NX_FILTER_LINE_MAX) {
		nx_side_errf(err, errlen, "line longer than %u bytes", NX_FILTER_LINE_MAX);
		return NX_FILTER_SKIP_line_too_long;
	}
	/* ~15 KiB: too big for a stack frame, and compile-time only (side lines are rare) */
	struct parsed *pp = nx_mem_alloc(NX_OWNER_filter_build, sizeof(*pp));
	if (!pp) {
		nx_side_errf(err, errlen, "out of memory");
		return NX_FILTER_SKIP_malformed;
	}
	enum nx_filter_skip w = check_parsed(pp, line, len, err, errlen);
	nx_mem_free(NX_OWNER_filter_build, pp, sizeof(*pp));
	return w;
}

bool nx_filter_side_line_ok(const char *line, size_t len, char *err, size_t errlen)
{
	return nx_filter_side_check(line, len, err, errlen) == NX_FILTER_SKIP_NONE;
}

/* The side structure: parse AdGuard rules with modifiers, regexes and hosts answers; build. */
#include "filter/side.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

static void *re_malloc(PCRE2_SIZE size, void *data)
{
	(void)data;
	struct re_hdr *h = nx_mem_alloc(NX_OWNER_filter_side, sizeof(*h) + size);
	if (!h) {
		return NULL;
	}
	h->size = size;
	return h + 1;
}

static void re_free(void *p, void *data)
{
	(void)data;
	if (p) {
		struct re_hdr *h = (struct re_hdr *)p - 1;
		nx_mem_free(NX_OWNER_filter_side, h, sizeof(*h) + h->size);
	}
}

/* ---- small text helpers ---- */

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static inline bool sp(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
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
static uint16_t type_from_text(const char *s, size_t len)
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

#define MODVAL_MAX NX_FILTER_SIDE_VALUES_MAX

struct pval {
	const char *s; /* unquoted value, in scratch */
	size_t len;
	bool neg;
};

struct parsed {
	bool allow, important, badfilter;
	enum side_anchor anchor;
	const char *pat; /* pattern between "@@" and "$" */
	size_t plen;
	char name[NX_FILTER_NAME_MAX + 1]; /* indexed anchors */
	size_t nlen;
	bool is_regex;
	/* modifiers */
	unsigned nclient, nctag, ntype, ndeny;
	struct pval client[MODVAL_MAX], ctag[MODVAL_MAX], type[MODVAL_MAX], deny[MODVAL_MAX];
	uint8_t nmods;
	uint8_t rewrite; /* enum nx_filter_rewrite */
	uint16_t rr_type;
	uint8_t rdata[NX_FILTER_TXT_MAX + 1 > NX_DNS_NAME_MAX ? NX_FILTER_TXT_MAX + 1
							      : NX_DNS_NAME_MAX];
	uint16_t rdlen;
	bool has_rewrite;
	/* canonical key for $badfilter: text without the badfilter modifier */
	char canon[NX_FILTER_LINE_MAX + 8];
	size_t canon_len;
	/* value storage for unquoted values */
	char scratch[NX_FILTER_LINE_MAX + 1];
	size_t scratch_used;
};

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
		errf(err, errlen, "$%s needs a value", mod);
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
			errf(err, errlen, "$%s: empty value", mod);
			return NX_EFORMAT;
		}
		if (*n >= MODVAL_MAX) {
			errf(err, errlen, "$%s: more than %u values", mod, MODVAL_MAX);
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
			errf(err, errlen, "$%s: empty value after '|'", mod);
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
			errf(err, errlen, "$dnsrewrite needs a value (only @@ rules may omit it)");
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
			errf(err, errlen, "$dnsrewrite: expected RCODE;TYPE;VALUE");
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
			errf(err, errlen, "$dnsrewrite: %s takes no records", rc);
			return NX_EFORMAT;
		}
		p->rewrite =
		    strcasecmp(rc, "NXDOMAIN") == 0 ? NX_FILTER_RW_NXDOMAIN : NX_FILTER_RW_REFUSED;
		return 0;
	}
	if (strcasecmp(rc, "NOERROR") != 0) {
		errf(err, errlen, "$dnsrewrite: unsupported rcode '%s'", rc);
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
			errf(err, errlen, "$dnsrewrite: '%s' is not a host name", val);
			return NX_EFORMAT;
		}
		int wl = nx_dns_name_from_text(norm, p->rdata);
		if (wl <= 0) {
			errf(err, errlen, "$dnsrewrite: '%s' is not a host name", val);
			return NX_EFORMAT;
		}
		p->rr_type = 5;
		p->rdlen = (uint16_t)wl;
	} else if (strcasecmp(ty, "TXT") == 0) {
		size_t vl = strlen(val);
		if (vl > NX_FILTER_TXT_MAX) {
			errf(err, errlen, "$dnsrewrite: TXT longer than %u bytes",
			     NX_FILTER_TXT_MAX);
			return NX_EFORMAT;
		}
		p->rr_type = 16;
		p->rdata[0] = (uint8_t)vl;
		memcpy(p->rdata + 1, val, vl);
		p->rdlen = (uint16_t)(vl + 1);
	} else if (strcasecmp(ty, "A") == 0 || strcasecmp(ty, "AAAA") == 0) {
		errf(err, errlen, "$dnsrewrite: '%s' is not an %s address", val, ty);
		return NX_EFORMAT;
	} else {
		errf(err, errlen, "$dnsrewrite: unsupported type '%s' (A, AAAA, CNAME, TXT)", ty);
		return NX_EFORMAT;
	}
	return 0;
}

static int parse_modifiers(struct parsed *p, const char *m, size_t len, char *err, size_t errlen)
{
	if (len == 0) {
		errf(err, errlen, "'$' without modifiers");
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
			errf(err, errlen, "unknown modifier '%.*s'", (int)kl, m);
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
			errf(err, errlen, "empty modifier after ','");
			return NX_EFORMAT;
		}
	}
	return 0;
}

/* Check the parsed values: 0, or NX_EFORMAT with the message in err. */
static int check_values(struct parsed *p, char *err, size_t errlen)
{
	for (unsigned i = 0; i < p->ntype; i++) {
		if (!type_from_text(p->type[i].s, p->type[i].len)) {
			errf(err, errlen, "$dnstype: unknown type '%.*s'", (int)p->type[i].len,
			     p->type[i].s);
			return NX_EFORMAT;
		}
	}
	for (unsigned i = 0; i < p->ndeny; i++) {
		char norm[NX_FILTER_NAME_MAX + 1];
		size_t nl;
		if (p->deny[i].neg) {
			errf(err, errlen, "$denyallow values cannot be negated");
			return NX_EFORMAT;
		}
		enum nx_filter_skip w =
		    nx_filter_name_norm(p->deny[i].s, p->deny[i].len, norm, &nl);
		if (w != NX_FILTER_SKIP_NONE && w != NX_FILTER_SKIP_localhost) {
			errf(err, errlen, "$denyallow: '%.*s' is not a domain", (int)p->deny[i].len,
			     p->deny[i].s);
			return NX_EFORMAT;
		}
	}
	for (unsigned i = 0; i < p->nclient; i++) {
		if (p->client[i].len > 255) {
			/* a client name is a config identifier; an address or CIDR is shorter */
			errf(err, errlen, "$client: value longer than 255 bytes");
			return NX_EFORMAT;
		}
	}
	if (p->has_rewrite && p->allow && p->rewrite != NX_FILTER_RW_NONE) {
		errf(err, errlen, "@@ with a $dnsrewrite value: write @@...$dnsrewrite alone");
		return NX_EFORMAT;
	}
	return 0;
}

/* Adblock pattern -> PCRE2 source. '^' is a separator (anything but a host character, or the
 * end); '*' any run; '|' anchors; '||' a host-label start after an optional scheme. */
static int pattern_regex(const char *s, size_t len, char *out, size_t cap)
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
			errf(err, errlen,
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
			errf(err, errlen, "'%.*s' is not a usable host name (%s)", (int)(h - i),
			     s + i, nx_filter_skip_name(w));
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
			errf(err, errlen, "'%.*s' is not a usable host name (%s)", (int)h, s,
			     nx_filter_skip_name(w));
			return w;
		}
		p->anchor = AN_EXACT;
		return NX_FILTER_SKIP_NONE;
	}
	if (needs_path(s, len)) {
		errf(err, errlen, "URL path: a DNS query has none");
		return NX_FILTER_SKIP_path;
	}
	p->anchor = AN_RE_URL;
	return NX_FILTER_SKIP_NONE;
}

/* Parse one adblock-style rule line into p. Returns NONE or the skip reason (+ err). */
static enum nx_filter_skip parse_rule(struct parsed *p, const char *line, size_t len, char *err,
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
		if (sp(s[i])) {
			/* no name contains one: a list line with a blank here is two tokens, or
			 * a regex that can never match */
			errf(err, errlen, "whitespace in the rule's pattern");
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

static void keep_longest(const char *run, size_t rl, char *out, size_t *olen)
{
	if (rl > *olen) {
		for (size_t i = 0; i < rl; i++) {
			char c = run[i];
			out[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		*olen = rl;
	}
}

/* Adblock URL pattern: the longest run without '*', '^', '|'. */
static size_t lit_of_pattern(const char *s, size_t len, char *out)
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
static size_t lit_of_regex(const char *s, size_t len, char *out)
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

/* ---- regex compile ---- */

static pcre2_code *re_compile(const char *src, size_t len, pcre2_compile_context *cctx, char *err,
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
		errf(err, errlen, "regex: %s at offset %zu", (const char *)msg, (size_t)eo);
	}
	return re;
}

static enum nx_filter_skip check_parsed(struct parsed *pp, const char *line, size_t len, char *err,
					size_t errlen)
{
	enum nx_filter_skip w = parse_rule(pp, line, len, err, errlen);
	if (w != NX_FILTER_SKIP_NONE) {
		return w;
	}
	if (pp->anchor == AN_RE_HOST || pp->anchor == AN_RE_URL) {
		char src[NX_FILTER_LINE_MAX * 2 + 64];
		const char *rs = pp->pat + 1;
		size_t rl = pp->plen >= 2 ? pp->plen - 2 : 0;
		if (pp->anchor == AN_RE_URL) {
			if (pattern_regex(pp->pat, pp->plen, src, sizeof(src))) {
				errf(err, errlen, "pattern too long");
				return NX_FILTER_SKIP_pattern;
			}
			rs = src;
			rl = strlen(src);
		}
		pcre2_general_context *g = pcre2_general_context_create(re_malloc, re_free, NULL);
		pcre2_compile_context *cc = g ? pcre2_compile_context_create(g) : NULL;
		pcre2_code *re = cc ? re_compile(rs, rl, cc, err, errlen) : NULL;
		bool ok = re != NULL;
		if (!cc) {
			errf(err, errlen, "out of memory");
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
		errf(err, errlen, "line longer than %u bytes", NX_FILTER_LINE_MAX);
		return NX_FILTER_SKIP_line_too_long;
	}
	/* ~15 KiB: too big for a stack frame, and compile-time only (side lines are rare) */
	struct parsed *pp = nx_mem_alloc(NX_OWNER_filter_build, sizeof(*pp));
	if (!pp) {
		errf(err, errlen, "out of memory");
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

/* ---- builder ---- */

struct nx_filter_side_builder {
	struct nx_filter_side s; /* under construction */
	size_t rules_cap, vals_cap, pool_cap, re_cap;
	uint64_t *keys;	    /* canonical-text hash per rule, with its origin (for $badfilter) */
	uint64_t *keys_any; /* the same without the origin (for a user $badfilter) */
	uint64_t *bad;	    /* canonical-text hashes of $badfilter rules */
	size_t nbad, bad_cap;
	/* A user's $badfilter cancels the rule in any list, as in AdGuard Home, where custom
	 * rules are how a person turns off a list's rule. */
	uint64_t *bad_any;
	size_t nbad_any, bad_any_cap;
	pcre2_general_context *gctx;
	pcre2_compile_context *cctx;
	struct parsed p;
};

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap) {
		return 0;
	}
	size_t nc = *cap ? *cap * 2 : 64;
	while (nc < need) {
		nc *= 2;
	}
	void *n = nx_mem_realloc(NX_OWNER_filter_side, *arr, *cap * elem, nc * elem);
	if (!n) {
		return -ENOMEM;
	}
	*arr = n;
	*cap = nc;
	return 0;
}

static int pool_add(struct nx_filter_side_builder *b, const void *p, size_t n, uint32_t *off)
{
	if (b->s.pool_len + n > UINT32_MAX) {
		return NX_ELIMIT;
	}
	int rc = grow((void **)&b->s.pool, &b->pool_cap, b->s.pool_len + n + 1, 1);
	if (rc) {
		return rc;
	}
	*off = (uint32_t)b->s.pool_len;
	if (n) {
		memcpy(b->s.pool + b->s.pool_len, p, n);
	}
	b->s.pool_len += n;
	return 0;
}

int nx_filter_side_builder_new(struct nx_filter_side_builder **out)
{
	*out = NULL;
	struct nx_filter_side_builder *b = nx_mem_calloc(NX_OWNER_filter_side, 1, sizeof(*b));
	if (!b) {
		return -ENOMEM;
	}
	b->gctx = pcre2_general_context_create(re_malloc, re_free, NULL);
	b->cctx = b->gctx ? pcre2_compile_context_create(b->gctx) : NULL;
	b->s.mctx = b->gctx ? pcre2_match_context_create(b->gctx) : NULL;
	if (!b->cctx || !b->s.mctx) {
		nx_filter_side_builder_free(b);
		return -ENOMEM;
	}
	pcre2_set_match_limit(b->s.mctx, NX_FILTER_RE_MATCH_LIMIT);
	pcre2_set_depth_limit(b->s.mctx, NX_FILTER_RE_DEPTH_LIMIT);
	pcre2_set_heap_limit(b->s.mctx, NX_FILTER_RE_HEAP_KIB);
	*out = b;
	return 0;
}

static void side_release(struct nx_filter_side *s, size_t rules_cap, size_t vals_cap,
			 size_t pool_cap, size_t re_cap, size_t idx_n, size_t scan_n)
{
	for (uint32_t i = 0; i < s->nre; i++) {
		pcre2_code_free(s->re[i]);
	}
	nx_mem_free(NX_OWNER_filter_side, s->re, re_cap * sizeof(*s->re));
	nx_mem_free(NX_OWNER_filter_side, s->lit, re_cap * sizeof(*s->lit));
	nx_mem_free(NX_OWNER_filter_side, s->tri_off,
		    s->tri_off ? (SIDE_TRI_BUCKETS + 1) * sizeof(*s->tri_off) : 0);
	nx_mem_free(NX_OWNER_filter_side, s->tri_rule, s->ntri * sizeof(*s->tri_rule));
	nx_mem_free(NX_OWNER_filter_side, s->always, s->nalways * sizeof(*s->always));
	nx_mem_free(NX_OWNER_filter_side, s->rules, rules_cap * sizeof(*s->rules));
	nx_mem_free(NX_OWNER_filter_side, s->vals, vals_cap * sizeof(*s->vals));
	nx_mem_free(NX_OWNER_filter_side, s->pool, pool_cap);
	nx_mem_free(NX_OWNER_filter_side, s->idx, idx_n * sizeof(*s->idx));
	nx_mem_free(NX_OWNER_filter_side, s->scan, scan_n * sizeof(*s->scan));
	pcre2_match_context_free(s->mctx);
}

void nx_filter_side_builder_free(struct nx_filter_side_builder *b)
{
	if (!b) {
		return;
	}
	side_release(&b->s, b->rules_cap, b->vals_cap, b->pool_cap, b->re_cap, 0, 0);
	nx_mem_free(NX_OWNER_filter_side, b->keys, b->rules_cap * sizeof(*b->keys));
	nx_mem_free(NX_OWNER_filter_side, b->keys_any, b->rules_cap * sizeof(*b->keys_any));
	nx_mem_free(NX_OWNER_filter_side, b->bad, b->bad_cap * sizeof(*b->bad));
	nx_mem_free(NX_OWNER_filter_side, b->bad_any, b->bad_any_cap * sizeof(*b->bad_any));
	pcre2_compile_context_free(b->cctx);
	pcre2_general_context_free(b->gctx);
	nx_mem_free(NX_OWNER_filter_side, b, sizeof(*b));
}

/* Keeps origin-free keys apart from origin 0's (canon_key(0, ...) is both otherwise). */
#define ANY_SALT 0x9e3779b97f4a7c15ull

static uint64_t canon_key(unsigned origin, const char *canon, size_t len)
{
	return XXH3_64bits_withSeed(canon, len, origin + 1);
}

static int add_vals(struct nx_filter_side_builder *b, struct side_rule *r, const struct pval *v,
		    unsigned n, enum side_vkind kind)
{
	for (unsigned i = 0; i < n; i++) {
		int rc =
		    grow((void **)&b->s.vals, &b->vals_cap, b->s.nvals + 1, sizeof(*b->s.vals));
		if (rc) {
			return rc;
		}
		struct side_val *sv = &b->s.vals[b->s.nvals];
		memset(sv, 0, sizeof(*sv));
		sv->kind = (uint8_t)kind;
		sv->neg = v[i].neg;
		char tmp[NX_FILTER_NAME_MAX + 64];
		if (kind == V_DNSTYPE) {
			sv->qtype = type_from_text(v[i].s, v[i].len);
		} else if (kind == V_ADDR && v[i].len < sizeof(tmp)) {
			/* address, CIDR, or else a client name */
			memcpy(tmp, v[i].s, v[i].len);
			tmp[v[i].len] = '\0';
			char *slash = strchr(tmp, '/');
			long pfx = -1;
			if (slash) {
				char *end;
				*slash = '\0';
				pfx = strtol(slash + 1, &end, 10);
				if (*end || slash[1] == '\0') {
					pfx = -2;
				}
			}
			if (pfx != -2 && inet_pton(AF_INET, tmp, sv->addr) == 1 && pfx <= 32) {
				sv->family = 4;
				sv->prefix = (uint8_t)(pfx < 0 ? 32 : pfx);
			} else if (pfx != -2 && inet_pton(AF_INET6, tmp, sv->addr) == 1 &&
				   pfx <= 128) {
				sv->family = 6;
				sv->prefix = (uint8_t)(pfx < 0 ? 128 : pfx);
			} else {
				sv->kind = V_NAME;
			}
		} else if (kind == V_ADDR) {
			sv->kind = V_NAME;
		}
		if (sv->kind == V_NAME || kind == V_CTAG || kind == V_DENY) {
			const char *src = v[i].s;
			size_t l = v[i].len;
			char norm[NX_FILTER_NAME_MAX + 1];
			if (kind == V_DENY) {
				size_t nl;
				if (nx_filter_name_norm(src, l, norm, &nl) == NX_FILTER_SKIP_NONE) {
					src = norm;
					l = nl;
				}
			}
			rc = pool_add(b, src, l, &sv->off);
			if (rc) {
				return rc;
			}
			sv->len = (uint16_t)l;
		}
		b->s.nvals++;
		r->nvals++;
	}
	return 0;
}

static int add_parsed(struct nx_filter_side_builder *b, struct parsed *p, const char *text,
		      size_t tlen, unsigned origin, enum nx_filter_rewrite hosts_rw, uint16_t htype,
		      const uint8_t *haddr, char *err, size_t errlen)
{
	if (p->badfilter) {
		int rc = grow((void **)&b->bad, &b->bad_cap, b->nbad + 1, sizeof(*b->bad));
		if (rc) {
			return rc;
		}
		b->bad[b->nbad++] = canon_key(origin, p->canon, p->canon_len);
		if (origin >= NX_FILTER_SOURCES_MAX) {
			rc = grow((void **)&b->bad_any, &b->bad_any_cap, b->nbad_any + 1,
				  sizeof(*b->bad_any));
			if (rc) {
				return rc;
			}
			b->bad_any[b->nbad_any++] = canon_key(0, p->canon, p->canon_len) ^ ANY_SALT;
		}
		b->s.st.badfilter++;
		return 0;
	}
	if (b->s.nrules >= NX_FILTER_SIDE_RULES_MAX) {
		errf(err, errlen, "more than %u side rules", NX_FILTER_SIDE_RULES_MAX);
		return NX_ELIMIT;
	}
	bool scanned = p->anchor == AN_RE_HOST || p->anchor == AN_RE_URL;
	if (scanned && b->s.nre >= NX_FILTER_SIDE_REGEX_MAX) {
		errf(err, errlen, "more than %u regex / pattern rules", NX_FILTER_SIDE_REGEX_MAX);
		return NX_ELIMIT;
	}
	size_t old_cap = b->rules_cap;
	int rc = grow((void **)&b->s.rules, &b->rules_cap, b->s.nrules + 1, sizeof(*b->s.rules));
	if (rc) {
		return rc;
	}
	if (b->rules_cap != old_cap) {
		void *nk = nx_mem_realloc(NX_OWNER_filter_side, b->keys, old_cap * sizeof(*b->keys),
					  b->rules_cap * sizeof(*b->keys));
		if (!nk) {
			return -ENOMEM;
		}
		b->keys = nk;
		void *na = nx_mem_realloc(NX_OWNER_filter_side, b->keys_any,
					  old_cap * sizeof(*b->keys_any),
					  b->rules_cap * sizeof(*b->keys_any));
		if (!na) {
			return -ENOMEM;
		}
		b->keys_any = na;
	}
	struct side_rule *r = &b->s.rules[b->s.nrules];
	memset(r, 0, sizeof(*r));
	r->re = UINT32_MAX;
	r->origin = (uint8_t)origin;
	r->anchor = (uint8_t)p->anchor;
	r->vals_off = b->s.nvals;
	if (p->allow || (origin == NX_FILTER_ORIGIN_USER_ALLOW)) {
		r->flags |= SR_ALLOW;
	}
	if (p->important) {
		r->flags |= SR_IMPORTANT;
	}
	r->flags |= (p->nclient ? SR_CLIENT : 0) | (p->nctag ? SR_CTAG : 0) |
		    (p->ntype ? SR_DNSTYPE : 0) | (p->ndeny ? SR_DENY : 0);
	r->nmods = p->nmods;
	r->rewrite = (uint8_t)(hosts_rw != NX_FILTER_RW_NONE ? hosts_rw : p->rewrite);
	if (r->flags & SR_ALLOW) {
		r->rewrite = NX_FILTER_RW_NONE;
	}
	if (hosts_rw != NX_FILTER_RW_NONE) {
		r->nmods = 1; /* a listed address is more specific than a plain block */
		r->rr_type = htype;
		r->rdlen = htype == 1 ? 4 : 16;
		rc = pool_add(b, haddr, r->rdlen, &r->rdata_off);
	} else if (p->rdlen) {
		r->rr_type = p->rr_type;
		r->rdlen = p->rdlen;
		rc = pool_add(b, p->rdata, p->rdlen, &r->rdata_off);
	}
	if (!rc) {
		rc = pool_add(b, text, tlen, &r->text_off);
		r->text_len = (uint16_t)tlen;
	}
	if (!rc && side_indexed(p->anchor)) {
		rc = pool_add(b, p->name, p->nlen, &r->name_off);
		r->name_len = (uint16_t)p->nlen;
	}
	if (!rc) {
		rc = add_vals(b, r, p->client, p->nclient, V_ADDR);
	}
	if (!rc) {
		rc = add_vals(b, r, p->ctag, p->nctag, V_CTAG);
	}
	if (!rc) {
		rc = add_vals(b, r, p->type, p->ntype, V_DNSTYPE);
	}
	if (!rc) {
		rc = add_vals(b, r, p->deny, p->ndeny, V_DENY);
	}
	if (!rc && scanned) {
		char src[NX_FILTER_LINE_MAX * 2 + 64];
		const char *rs = p->pat + 1;
		size_t rl = p->plen - 2;
		if (p->anchor == AN_RE_URL) {
			if (pattern_regex(p->pat, p->plen, src, sizeof(src))) {
				errf(err, errlen, "pattern too long");
				return NX_EFORMAT;
			}
			rs = src;
			rl = strlen(src);
		}
		size_t old_re_cap = b->re_cap;
		rc = grow((void **)&b->s.re, &b->re_cap, b->s.nre + 1, sizeof(*b->s.re));
		if (!rc && b->re_cap != old_re_cap) {
			void *nl = nx_mem_realloc(NX_OWNER_filter_side, b->s.lit,
						  old_re_cap * sizeof(*b->s.lit),
						  b->re_cap * sizeof(*b->s.lit));
			if (!nl) {
				/* keep re and lit the same capacity: give the re growth back */
				void *nr = nx_mem_realloc(NX_OWNER_filter_side, b->s.re,
							  b->re_cap * sizeof(*b->s.re),
							  old_re_cap * sizeof(*b->s.re));
				if (nr || old_re_cap == 0) {
					b->s.re = nr;
					b->re_cap = old_re_cap;
				}
				rc = -ENOMEM;
			} else {
				b->s.lit = nl;
			}
		}
		if (!rc) {
			char lit[NX_FILTER_LINE_MAX];
			size_t ll = p->anchor == AN_RE_URL
					? lit_of_pattern(p->pat, p->plen, lit)
					: lit_of_regex(p->pat + 1, p->plen - 2, lit);
			struct side_lit sl = {0, (uint16_t)ll, 0};
			rc = ll ? pool_add(b, lit, ll, &sl.off) : 0;
			pcre2_code *re = rc ? NULL : re_compile(rs, rl, b->cctx, err, errlen);
			if (!rc && !re) {
				return NX_EFORMAT;
			}
			if (!rc) {
				uint32_t ml = 0;
				pcre2_pattern_info(re, PCRE2_INFO_MINLENGTH, &ml);
				sl.minlen = (uint8_t)(ml > 255 ? 255 : ml);
				/* a host pattern (no '/' or ':') says the same of "name" and of
				 * "http://name/"; one with them only makes sense on the URL */
				sl.url = p->anchor == AN_RE_URL && (memchr(p->pat, '/', p->plen) ||
								    memchr(p->pat, ':', p->plen));
				/* an anchored regex with a known set of first bytes: most names
				 * are refused by one bit test, before PCRE2's per-call cost */
				uint32_t opts = 0, fct = 0, fcu = 0;
				const uint8_t *bm = NULL;
				pcre2_pattern_info(re, PCRE2_INFO_ALLOPTIONS, &opts);
				pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODETYPE, &fct);
				pcre2_pattern_info(re, PCRE2_INFO_FIRSTBITMAP, &bm);
				if ((opts & PCRE2_ANCHORED) && fct == 1) {
					pcre2_pattern_info(re, PCRE2_INFO_FIRSTCODEUNIT, &fcu);
					/* caseless: both cases are possible first bytes */
					unsigned lo = fcu | (fcu >= 'A' && fcu <= 'Z' ? 0x20u : 0);
					unsigned up = fcu >= 'a' && fcu <= 'z' ? fcu - 0x20u : lo;
					sl.first[lo / 8] |= (uint8_t)(1u << (lo % 8));
					sl.first[up / 8] |= (uint8_t)(1u << (up % 8));
					sl.anchored = 1;
				} else if ((opts & PCRE2_ANCHORED) && fct == 0 && bm) {
					memcpy(sl.first, bm, 32);
					sl.anchored = 1;
				}
				b->s.re[b->s.nre] = re;
				b->s.lit[b->s.nre] = sl;
				r->re = b->s.nre++;
			}
		}
	}
	if (rc) {
		if (rc == -ENOMEM) {
			errf(err, errlen, "out of memory");
		}
		return rc;
	}
	b->keys[b->s.nrules] = canon_key(origin, p->canon, p->canon_len);
	b->keys_any[b->s.nrules] = canon_key(0, p->canon, p->canon_len) ^ ANY_SALT;
	b->s.nrules++;
	return 0;
}

int nx_filter_side_add_line(struct nx_filter_side_builder *b, const char *line, size_t len,
			    unsigned origin, char *err, size_t errlen)
{
	errf(err, errlen, "%s", "");
	if (origin >= NX_FILTER_SOURCES_MAX && origin != NX_FILTER_ORIGIN_USER_DENY &&
	    origin != NX_FILTER_ORIGIN_USER_ALLOW) {
		errf(err, errlen, "bad origin %u", origin);
		return -EINVAL;
	}
	while (len > 0 && sp(line[0])) {
		line++;
		len--;
	}
	while (len > 0 && (sp(line[len - 1]) || line[len - 1] == '\n')) {
		len--;
	}
	if (len == 0 || line[0] == '#' || line[0] == '!') {
		return 0;
	}
	int rc;
	if (len > NX_FILTER_LINE_MAX || len > UINT16_MAX) {
		errf(err, errlen, "line longer than %u bytes", NX_FILTER_LINE_MAX);
		rc = NX_EFORMAT;
		goto refused;
	}
	/* hosts line "addr name": an answer */
	size_t t0 = 0;
	while (t0 < len && !sp(line[t0])) {
		t0++;
	}
	char abuf[64];
	uint8_t addr[16];
	if (t0 < len && t0 < sizeof(abuf)) {
		memcpy(abuf, line, t0);
		abuf[t0] = '\0';
		uint16_t htype = inet_pton(AF_INET, abuf, addr) == 1	? 1
				 : inet_pton(AF_INET6, abuf, addr) == 1 ? 28
									: 0;
		if (htype) {
			size_t pos = t0;
			unsigned names = 0;
			rc = 0;
			while (pos < len && rc == 0) {
				while (pos < len && sp(line[pos])) {
					pos++;
				}
				if (pos >= len || line[pos] == '#') {
					break;
				}
				size_t t = pos;
				while (t < len && !sp(line[t])) {
					t++;
				}
				struct parsed *p = &b->p;
				memset(p, 0, offsetof(struct parsed, canon));
				enum nx_filter_skip w =
				    nx_filter_name_norm(line + pos, t - pos, p->name, &p->nlen);
				if (w != NX_FILTER_SKIP_NONE) {
					errf(err, errlen,
					     "hosts line: '%.*s' is not a usable name (%s)",
					     (int)(t - pos), line + pos, nx_filter_skip_name(w));
					rc = NX_EFORMAT;
					break;
				}
				p->anchor = AN_EXACT;
				p->canon_len = (size_t)snprintf(p->canon, sizeof(p->canon), "%s %s",
								abuf, p->name);
				rc = add_parsed(b, p, line, len, origin, NX_FILTER_RW_HOSTS, htype,
						addr, err, errlen);
				names++;
				pos = t;
			}
			if (rc == 0 && names == 0) {
				errf(err, errlen, "hosts line without a name");
				rc = NX_EFORMAT;
			}
			if (rc) {
				goto refused;
			}
			return 0;
		}
	}
	/* user-rule shorthand "*.x": proper subdomains of x (indexed, no regex slot) */
	char conv[NX_FILTER_LINE_MAX + 8];
	const char *ln = line;
	size_t ll = len;
	bool wild = false;
	if (len > 2 && line[0] == '*' && line[1] == '.' && !memchr(line + 2, '*', len - 2) &&
	    !memchr(line, '$', len)) {
		ll = (size_t)snprintf(conv, sizeof(conv), "||%.*s^", (int)(len - 2), line + 2);
		ln = conv;
		wild = true;
	}
	struct parsed *p = &b->p;
	enum nx_filter_skip w = parse_rule(p, ln, ll, err, errlen);
	if (w != NX_FILTER_SKIP_NONE) {
		rc = NX_EFORMAT;
		goto refused;
	}
	if (wild) {
		p->anchor = AN_WILD;
		memcpy(p->canon, line, len);
		p->canon_len = len;
	}
	rc = add_parsed(b, p, line, len, origin, NX_FILTER_RW_NONE, 0, NULL, err, errlen);
	if (rc) {
		goto refused;
	}
	return 0;
refused:
	b->s.st.refused++;
	nx_stat_inc(NX_STAT_FILTER_SIDE_REFUSED);
	return rc;
}

int nx_filter_side_load_source(struct nx_filter_side_builder *b, const char *dir, const char *name,
			       unsigned origin)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.side", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return errno == ENOENT ? 0 : -errno;
	}
	struct nx_lr lr;
	int rc = nx_lr_init(&lr, fd);
	if (rc) {
		close(fd);
		return rc;
	}
	char err[256];
	for (;;) {
		const char *line;
		size_t len;
		bool too_long;
		rc = nx_lr_next(&lr, NX_FILTER_LINE_MAX, &line, &len, &too_long);
		if (rc <= 0) {
			break;
		}
		if (too_long) {
			b->s.st.refused++;
			continue;
		}
		int arc = nx_filter_side_add_line(b, line, len, origin, err, sizeof(err));
		if (arc == -ENOMEM) {
			rc = arc;
			break;
		}
	}
	nx_lr_deinit(&lr);
	close(fd);
	return rc < 0 ? rc : 0;
}

static int idx_cmp(const void *a, const void *b)
{
	const struct side_idx *x = a, *y = b;
	if (x->h != y->h) {
		return x->h < y->h ? -1 : 1;
	}
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The trigram prefilter over scan[]: each rule with a literal of >= 3 bytes is filed under
 * the literal's trigram whose bucket is least loaded (counted over all literals first); the
 * rest go to `always`. */
static int build_prefilter(struct nx_filter_side *s)
{
	if (s->nscan == 0) {
		return 0;
	}
	uint32_t *cnt = nx_mem_calloc(NX_OWNER_filter_side, SIDE_TRI_BUCKETS, sizeof(*cnt));
	uint32_t *pick = nx_mem_calloc(NX_OWNER_filter_side, s->nscan, sizeof(*pick));
	s->tri_off = nx_mem_calloc(NX_OWNER_filter_side, SIDE_TRI_BUCKETS + 1, sizeof(*s->tri_off));
	int rc = cnt && pick && s->tri_off ? 0 : -ENOMEM;
	uint32_t ntri = 0, nalw = 0;
	for (uint32_t j = 0; !rc && j < s->nscan; j++) {
		const struct side_rule *r = &s->rules[s->scan[j]];
		const struct side_lit *l = r->re != UINT32_MAX ? &s->lit[r->re] : NULL;
		if (!l || l->len < 3) {
			continue;
		}
		for (uint16_t k = 0; k + 3 <= l->len; k++) {
			cnt[side_tri(s->pool + l->off + k)]++;
		}
	}
	/* trigrams every query has ("http://" around the name) or most have (the big TLDs, www):
	 * filing a rule there would visit it on nearly every query */
	static const char common[][4] = {"htt", "ttp", "tp:", "p:/", "://", "com", ".co", "om/",
					 "net", ".ne", "et/", "org", ".or", "rg/", "www", "ww."};
	for (size_t c = 0; !rc && c < sizeof(common) / sizeof(common[0]); c++) {
		cnt[side_tri(common[c])] += 1u << 20;
	}
	for (uint32_t j = 0; !rc && j < s->nscan; j++) {
		const struct side_rule *r = &s->rules[s->scan[j]];
		const struct side_lit *l = r->re != UINT32_MAX ? &s->lit[r->re] : NULL;
		if (!l || l->len < 3) {
			pick[j] = UINT32_MAX;
			nalw++;
			continue;
		}
		uint32_t best = side_tri(s->pool + l->off);
		uint16_t pos = 0;
		for (uint16_t k = 1; k + 3 <= l->len; k++) {
			uint32_t t = side_tri(s->pool + l->off + k);
			if (cnt[t] < cnt[best]) {
				best = t;
				pos = k;
			}
		}
		s->lit[r->re].tri_pos = pos;
		pick[j] = best;
		ntri++;
	}
	if (!rc && ntri) {
		s->tri_rule = nx_mem_calloc(NX_OWNER_filter_side, ntri, sizeof(*s->tri_rule));
		rc = s->tri_rule ? 0 : -ENOMEM;
	}
	if (!rc && nalw) {
		s->always = nx_mem_calloc(NX_OWNER_filter_side, nalw, sizeof(*s->always));
		rc = s->always ? 0 : -ENOMEM;
	}
	if (!rc) {
		memset(cnt, 0, SIDE_TRI_BUCKETS * sizeof(*cnt));
		for (uint32_t j = 0; j < s->nscan; j++) {
			if (pick[j] != UINT32_MAX) {
				cnt[pick[j]]++;
			}
		}
		uint32_t acc = 0;
		for (uint32_t bk = 0; bk < SIDE_TRI_BUCKETS; bk++) {
			s->tri_off[bk] = acc;
			acc += cnt[bk];
		}
		s->tri_off[SIDE_TRI_BUCKETS] = acc;
		for (uint32_t bk = 0; bk < SIDE_TRI_BUCKETS; bk++) {
			if (cnt[bk]) {
				s->tri_bits[bk / 64] |= 1ull << (bk % 64);
			}
		}
		memset(cnt, 0, SIDE_TRI_BUCKETS * sizeof(*cnt));
		for (uint32_t j = 0; j < s->nscan; j++) {
			if (pick[j] == UINT32_MAX) {
				s->always[s->nalways++] = j;
				s->st.unfiltered++;
			} else {
				const struct side_rule *r = &s->rules[s->scan[j]];
				const struct side_lit *l = &s->lit[r->re];
				s->tri_rule[s->tri_off[pick[j]] + cnt[pick[j]]++] =
				    (struct side_tri){side_tri_val(s->pool + l->off + l->tri_pos),
						      j,
						      l->off,
						      l->len,
						      l->tri_pos,
						      r->re};
				s->ntri++;
			}
		}
	}
	nx_mem_free(NX_OWNER_filter_side, cnt, cnt ? SIDE_TRI_BUCKETS * sizeof(*cnt) : 0);
	nx_mem_free(NX_OWNER_filter_side, pick, pick ? s->nscan * sizeof(*pick) : 0);
	if (rc) {
		nx_mem_free(NX_OWNER_filter_side, s->tri_off,
			    s->tri_off ? (SIDE_TRI_BUCKETS + 1) * sizeof(*s->tri_off) : 0);
		nx_mem_free(NX_OWNER_filter_side, s->tri_rule, ntri * sizeof(*s->tri_rule));
		nx_mem_free(NX_OWNER_filter_side, s->always, nalw * sizeof(*s->always));
		s->tri_off = s->always = NULL;
		s->tri_rule = NULL;
		s->ntri = s->nalways = 0;
	}
	return rc;
}

int nx_filter_side_build(struct nx_filter_side_builder *b, struct nx_filter_side **out)
{
	*out = NULL;
	struct nx_filter_side *s = &b->s;
	/* $badfilter: cancel rules whose canonical text (same origin) a badfilter names */
	if (b->nbad || b->nbad_any) {
		if (b->nbad) {
			qsort(b->bad, b->nbad, sizeof(*b->bad), key_cmp);
		}
		if (b->nbad_any) {
			qsort(b->bad_any, b->nbad_any, sizeof(*b->bad_any), key_cmp);
		}
		for (uint32_t i = 0; i < s->nrules; i++) {
			if ((b->nbad &&
			     bsearch(&b->keys[i], b->bad, b->nbad, sizeof(*b->bad), key_cmp)) ||
			    (b->nbad_any && bsearch(&b->keys_any[i], b->bad_any, b->nbad_any,
						    sizeof(*b->bad_any), key_cmp))) {
				s->rules[i].dead = 1;
				s->st.cancelled++;
			}
		}
	}
	uint32_t n = 0, nidx = 0, nscan = 0;
	for (uint32_t i = 0; i < s->nrules; i++) {
		if (s->rules[i].dead) {
			continue;
		}
		s->rules[n] = s->rules[i];
		struct side_rule *r = &s->rules[n++];
		if (side_indexed(r->anchor)) {
			nidx++;
		} else {
			nscan++;
		}
	}
	s->nrules = n;
	int rc = 0;
	if (nidx) {
		s->idx = nx_mem_calloc(NX_OWNER_filter_side, nidx, sizeof(*s->idx));
		rc = s->idx ? 0 : -ENOMEM;
	}
	if (!rc && nscan) {
		s->scan = nx_mem_calloc(NX_OWNER_filter_side, nscan, sizeof(*s->scan));
		rc = s->scan ? 0 : -ENOMEM;
	}
	if (rc) {
		nx_mem_free(NX_OWNER_filter_side, s->idx, nidx * sizeof(*s->idx));
		s->idx = NULL;
		nx_filter_side_builder_free(b);
		return rc;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct side_rule *r = &s->rules[i];
		s->st.rules++;
		if (r->rewrite != NX_FILTER_RW_NONE) {
			s->st.rewrites++;
		}
		if (side_indexed(r->anchor)) {
			uint64_t h = side_hash(s->pool + r->name_off, r->name_len);
			s->idx[s->nidx++] = (struct side_idx){h, i, 0};
			s->name_bits[(h & 4095) / 64] |= 1ull << (h % 64);
			s->st.named++;
		} else {
			s->scan[s->nscan++] = i;
			if (r->re != UINT32_MAX) {
				s->st.regexes++;
			}
		}
	}
	if (s->nidx) {
		qsort(s->idx, s->nidx, sizeof(*s->idx), idx_cmp);
	}
	rc = build_prefilter(s);
	if (rc) {
		nx_mem_free(NX_OWNER_filter_side, s->idx, nidx * sizeof(*s->idx));
		nx_mem_free(NX_OWNER_filter_side, s->scan, nscan * sizeof(*s->scan));
		s->idx = NULL;
		s->scan = NULL;
		s->nidx = s->nscan = 0;
		nx_filter_side_builder_free(b);
		return rc;
	}
	struct nx_filter_side *o = nx_mem_calloc(NX_OWNER_filter_side, 1, sizeof(*o));
	if (!o) {
		nx_mem_free(NX_OWNER_filter_side, s->idx, nidx * sizeof(*s->idx));
		nx_mem_free(NX_OWNER_filter_side, s->scan, nscan * sizeof(*s->scan));
		s->idx = NULL;
		s->scan = NULL;
		nx_filter_side_builder_free(b);
		return -ENOMEM;
	}
	/* shrink every array to its size: the built object frees by exact sizes */
	*o = *s;
#define SHRINK(field, cap)                                                                         \
	do {                                                                                       \
		size_t want_ = (size_t)o->n##field * sizeof(*o->field);                            \
		if (want_ == 0) {                                                                  \
			nx_mem_free(NX_OWNER_filter_side, o->field, (cap) * sizeof(*o->field));    \
			o->field = NULL;                                                           \
		} else if (want_ != (cap) * sizeof(*o->field)) {                                   \
			void *p_ = nx_mem_realloc(NX_OWNER_filter_side, o->field,                  \
						  (cap) * sizeof(*o->field), want_);               \
			if (p_) {                                                                  \
				o->field = p_;                                                     \
			} else {                                                                   \
				/* keep it, counted at its used size: the free's size */           \
				nx_ledger_charge(NX_OWNER_filter_side,                             \
						 -(int64_t)((cap) * sizeof(*o->field) - want_),    \
						 0);                                               \
			}                                                                          \
		}                                                                                  \
	} while (0)
	SHRINK(rules, b->rules_cap);
	SHRINK(vals, b->vals_cap);
	SHRINK(re, b->re_cap);
	{
		/* lit is parallel to re: same count */
		size_t want = (size_t)o->nre * sizeof(*o->lit), had = b->re_cap * sizeof(*o->lit);
		if (want == 0) {
			nx_mem_free(NX_OWNER_filter_side, o->lit, had);
			o->lit = NULL;
		} else if (want != had) {
			void *p = nx_mem_realloc(NX_OWNER_filter_side, o->lit, had, want);
			if (p) {
				o->lit = p;
			} else {
				nx_ledger_charge(NX_OWNER_filter_side, -(int64_t)(had - want), 0);
			}
		}
	}
#undef SHRINK
	if (o->pool_len == 0) {
		nx_mem_free(NX_OWNER_filter_side, o->pool, b->pool_cap);
		o->pool = NULL;
	} else if (o->pool_len != b->pool_cap) {
		void *p = nx_mem_realloc(NX_OWNER_filter_side, o->pool, b->pool_cap, o->pool_len);
		if (p) {
			o->pool = p;
		} else {
			nx_ledger_charge(NX_OWNER_filter_side,
					 -(int64_t)(b->pool_cap - o->pool_len), 0);
		}
	}
	size_t bytes = sizeof(*o) + o->nrules * sizeof(*o->rules) + o->nvals * sizeof(*o->vals) +
		       o->nidx * sizeof(*o->idx) + o->nscan * sizeof(*o->scan) +
		       o->nre * (sizeof(*o->re) + sizeof(*o->lit)) + o->pool_len +
		       (o->tri_off ? (SIDE_TRI_BUCKETS + 1) * sizeof(*o->tri_off) : 0) +
		       o->ntri * sizeof(*o->tri_rule) + o->nalways * sizeof(*o->always);
	for (uint32_t i = 0; i < o->nre; i++) {
		size_t sz = 0;
		pcre2_pattern_info(o->re[i], PCRE2_INFO_SIZE, &sz);
		bytes += sz;
	}
	o->st.bytes = bytes;
	/* the builder no longer owns the arrays */
	nx_mem_free(NX_OWNER_filter_side, b->keys, b->rules_cap * sizeof(*b->keys));
	nx_mem_free(NX_OWNER_filter_side, b->keys_any, b->rules_cap * sizeof(*b->keys_any));
	b->keys = b->keys_any = NULL;
	memset(s, 0, sizeof(*s));
	b->rules_cap = b->vals_cap = b->pool_cap = b->re_cap = 0;
	s->mctx = NULL;
	nx_filter_side_builder_free(b);
	*out = o;
	return 0;
}

int nx_filter_side_open(const struct nx_filter_snap_source *src, unsigned n,
			struct nx_filter_side **out)
{
	*out = NULL;
	if (n > NX_FILTER_SOURCES_MAX) {
		return NX_ELIMIT;
	}
	struct nx_filter_side_builder *b;
	int rc = nx_filter_side_builder_new(&b);
	if (rc) {
		return rc;
	}
	for (unsigned i = 0; i < n; i++) {
		rc = nx_filter_side_load_source(b, src[i].dir, src[i].name, i);
		if (rc) {
			nx_filter_side_builder_free(b);
			return rc;
		}
	}
	return nx_filter_side_build(b, out);
}

void nx_filter_side_free(struct nx_filter_side *s)
{
	if (!s) {
		return;
	}
	side_release(s, s->nrules, s->nvals, s->pool_len, s->nre, s->nidx, s->nscan);
	nx_mem_free(NX_OWNER_filter_side, s, sizeof(*s));
}

void nx_filter_side_stats(const struct nx_filter_side *s, struct nx_filter_side_stats *out)
{
	if (!s) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = s->st;
}

const char *nx_filter_side_rule_text(const struct nx_filter_side *s, int32_t idx, size_t *len)
{
	if (!s || idx < 0 || (uint32_t)idx >= s->nrules) {
		return NULL;
	}
	*len = s->rules[idx].text_len;
	return s->pool + s->rules[idx].text_off;
}

int nx_filter_side_rule_origin(const struct nx_filter_side *s, int32_t idx)
{
	if (!s || idx < 0 || (uint32_t)idx >= s->nrules) {
		return -1;
	}
	return s->rules[idx].origin;
}

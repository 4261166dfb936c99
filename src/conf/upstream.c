/*
 * Upstream servers (upstream.servers, the servers of upstream.forward_zones): a plain
 * `addr:port`, a URL (`tcp://`, `tls://`, `https://`) or a mapping {url, name, pin_sha256,
 * address}. Network-free: a host name is kept unresolved for upstream/bootstrap.c, unless the
 * mapping gives the address to connect to.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"

#define WHY_MAX 160	/* bytes of a refusal reason */
#define LABEL_MAX 320	/* bytes of a value label: "upstream.forward_zones.lan[3].pin_sha256[7]" */
#define PIN_TEXT_LEN 44 /* base64 of 32 bytes: 43 characters and one '=' */

static const struct {
	const char *scheme;
	enum nx_conf_up_kind kind;
	uint16_t port; /* default */
} schemes[] = {
    {"tcp", NX_CONF_UP_TCP, 53},
    {"tls", NX_CONF_UP_DOT, 853},
    {"https", NX_CONF_UP_DOH, 443},
};

static bool tls_kind(enum nx_conf_up_kind k)
{
	return k == NX_CONF_UP_DOT || k == NX_CONF_UP_DOH;
}

static void free_str(char **s)
{
	if (*s) {
		nx_mem_free(NX_OWNER_config, *s, strlen(*s) + 1);
		*s = NULL;
	}
}

void nx_conf_upstreams_free(struct nx_conf_upstream *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++) {
		free_str(&u[i].host);
		free_str(&u[i].auth_name);
		free_str(&u[i].path);
		nx_mem_free(NX_OWNER_config, u[i].pins, u[i].n_pins * sizeof(*u[i].pins));
	}
	nx_mem_free(NX_OWNER_config, u, n * sizeof(*u));
}

/* Port text: 1..65535, decimal digits only. -1 with why set otherwise. */
static int port_of(const char *s, char *why, size_t cap)
{
	if (!*s) {
		snprintf(why, cap, "missing port after ':'");
		return -1;
	}
	long v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9') {
			snprintf(why, cap, "port '%s' is not a number", s);
			return -1;
		}
		v = v * 10 + (*p - '0');
		if (v > 65535) {
			break;
		}
	}
	if (v < 1 || v > 65535) {
		snprintf(why, cap, "port must be 1..65535");
		return -1;
	}
	return (int)v;
}

/*
 * A host name for a URL or a certificate: the rules of names in rules and records, and not
 * all-numeric in its last label (that is a mistyped IPv4 address, which no TLD is). Stores the
 * lower-cased text without the trailing dot.
 */
static int host_name(const char *text, const char *what, char **out, char *why, size_t cap)
{
	uint8_t wire[NX_DNS_NAME_MAX];
	const char *w = NULL;
	if (!nx_conf_host_name(text, wire, &w)) {
		snprintf(why, cap, "%s '%s' is not a host name: %s", what, text, w);
		return -1;
	}
	size_t n = strlen(text);
	n -= text[n - 1] == '.';
	for (size_t i = 0; i < n; i++) {
		bool edge = i == 0 || text[i - 1] == '.' || i + 1 == n || text[i + 1] == '.';
		if (text[i] == '-' && edge) {
			snprintf(why, cap,
				 "%s '%s' is not a host name: a label starts or ends with '-'",
				 what, text);
			return -1;
		}
	}
	const char *last = text;
	for (size_t i = 0; i + 1 < n; i++) {
		if (text[i] == '.') {
			last = text + i + 1;
		}
	}
	size_t llen = (size_t)(text + n - last);
	if (strspn(last, "0123456789") >= llen) {
		snprintf(why, cap, "%s '%s' is neither an IP address nor a host name", what, text);
		return -1;
	}
	char *s = nx_mem_alloc(NX_OWNER_config, n + 1);
	if (!s) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		s[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	s[n] = '\0';
	*out = s;
	return 0;
}

/* RFC 3986 path characters (pchar and '/'); a query or fragment is not part of it. */
static bool path_ok(const char *p)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				 "-._~!$&'()*+,;=:@/%";
	return strspn(p, ok) == strlen(p);
}

/* Build addr from a numeric host (brackets stripped) and port. -1 with why when not numeric. */
static int numeric_addr(const char *host, bool bracketed, int port, struct nx_addr *out, char *why,
			size_t cap)
{
	char text[sizeof(out->text)];
	int w = snprintf(text, sizeof(text), bracketed ? "[%s]:%d" : "%s:%d", host, port);
	const char *reason = "not an IP address";
	if (w < 0 || (size_t)w >= sizeof(text) || nx_addr_parse_why(text, -1, out, &reason)) {
		snprintf(why, cap, "%s", reason);
		return -1;
	}
	return 0;
}

/* The text of a URL upstream (s contains "://") into u. 0, or -1 with why. */
static int parse_url(const char *s, const char *sep, struct nx_conf_upstream *u, char *why,
		     size_t cap)
{
	size_t slen = (size_t)(sep - s);
	size_t si = 0;
	for (; si < NX_ARRAY_LEN(schemes); si++) {
		if (strlen(schemes[si].scheme) == slen &&
		    !strncasecmp(s, schemes[si].scheme, slen)) {
			break;
		}
	}
	if (si == NX_ARRAY_LEN(schemes)) {
		if (slen == 4 && !strncasecmp(s, "http", 4)) {
			snprintf(why, cap, "DNS over plain HTTP is not supported: use https://");
		} else {
			snprintf(why, cap,
				 "unknown scheme '%.*s' (expected tcp://, tls:// or https://; a "
				 "plain addr:port is UDP with TCP after truncation)",
				 (int)NX_MIN(slen, (size_t)32), s);
		}
		return -1;
	}
	u->kind = schemes[si].kind;
	int port = schemes[si].port;
	char rest[NX_CONF_UP_TEXT_MAX];
	snprintf(rest, sizeof(rest), "%s", sep + 3);

	char *frag = strchr(rest, '#');
	if (frag) {
		*frag++ = '\0';
		if (!tls_kind(u->kind)) {
			snprintf(why, cap, "a #name applies to tls:// and https:// only");
			return -1;
		}
		if (!*frag) {
			snprintf(why, cap, "the name after '#' is empty");
			return -1;
		}
	}
	char *slash = strchr(rest, '/');
	if (strchr(rest, '?') && u->kind == NX_CONF_UP_DOH) {
		snprintf(why, cap, "the path must not have a query ('?...')");
		return -1;
	}
	if (strchr(rest, '?') || (slash && u->kind != NX_CONF_UP_DOH)) {
		snprintf(why, cap, "%s:// takes no path or query", schemes[si].scheme);
		return -1;
	}
	if (slash) {
		if (!path_ok(slash)) {
			snprintf(why, cap, "the path '%s' has characters a URL path cannot have",
				 slash);
			return -1;
		}
		if (!slash[1]) {
			snprintf(why, cap, "the path is empty (for example /dns-query)");
			return -1;
		}
		u->path = nx_mem_strdup(NX_OWNER_config, slash);
		if (!u->path) {
			snprintf(why, cap, "out of memory");
			return -1;
		}
		*slash = '\0';
	} else if (u->kind == NX_CONF_UP_DOH) {
		snprintf(why, cap, "the path is missing (for example https://%s/dns-query)",
			 rest[0] ? rest : "dns.example");
		return -1;
	}

	/* rest is now the authority: host, [v6] or host:port */
	if (!rest[0]) {
		snprintf(why, cap, "the host is missing");
		return -1;
	}
	if (strchr(rest, '@')) {
		snprintf(why, cap, "user information (user@) is not supported");
		return -1;
	}
	char *host = rest, *port_text = NULL;
	bool bracketed = false;
	if (rest[0] == '[') {
		char *close = strchr(rest, ']');
		if (!close) {
			snprintf(why, cap, "missing ']' after the IPv6 address");
			return -1;
		}
		*close = '\0';
		host = rest + 1;
		bracketed = true;
		if (close[1] == ':') {
			port_text = close + 2;
		} else if (close[1]) {
			snprintf(why, cap, "expected ':port' after ']'");
			return -1;
		}
	} else {
		char *colon = strchr(rest, ':');
		if (colon && strchr(colon + 1, ':')) {
			snprintf(why, cap, "an IPv6 address needs brackets: [addr]:port");
			return -1;
		}
		if (colon) {
			*colon = '\0';
			port_text = colon + 1;
		}
	}
	if (!host[0]) {
		snprintf(why, cap, "the host is missing");
		return -1;
	}
	if (port_text && (port = port_of(port_text, why, cap)) < 0) {
		return -1;
	}
	u->port = (uint16_t)port;
	struct in_addr v4;
	if (bracketed || inet_pton(AF_INET, host, &v4) == 1) {
		if (numeric_addr(host, bracketed, port, &u->addr, why, cap)) {
			return -1;
		}
		u->resolved = true;
	} else if (u->kind == NX_CONF_UP_TCP) {
		snprintf(why, cap,
			 "tcp:// takes an IP address ('%s' is a name: a host name needs "
			 "tls:// or https://)",
			 host);
		return -1;
	} else if (host_name(host, "host", &u->host, why, cap)) {
		return -1;
	}
	if (frag) {
		return host_name(frag, "the name after '#'", &u->auth_name, why, cap);
	}
	if (u->host) {
		u->auth_name = nx_mem_strdup(NX_OWNER_config, u->host);
		if (!u->auth_name) {
			snprintf(why, cap, "out of memory");
			return -1;
		}
	}
	return 0;
}

int nx_conf_upstream_parse(const char *s, struct nx_conf_upstream *u, char *why, size_t cap)
{
	size_t n = strlen(s);
	if (n == 0) {
		snprintf(why, cap, "empty address");
		return NX_ECONFIG;
	}
	if (n >= sizeof(u->text)) {
		snprintf(why, cap, "longer than %zu bytes", sizeof(u->text) - 1);
		return NX_ECONFIG;
	}
	memcpy(u->text, s, n + 1);
	const char *sep = strstr(s, "://");
	if (!sep) {
		const char *w = "bad address";
		if (nx_addr_parse_why(s, 53, &u->addr, &w)) {
			snprintf(why, cap, "%s", w);
			return NX_ECONFIG;
		}
		u->kind = NX_CONF_UP_PLAIN;
		u->resolved = true;
		u->port = ntohs(
		    u->addr.ss.ss_family == AF_INET
			? ((const struct sockaddr_in *)(const void *)&u->addr.ss)->sin_port
			: ((const struct sockaddr_in6 *)(const void *)&u->addr.ss)->sin6_port);
		return 0;
	}
	return parse_url(s, sep, u, why, cap) ? NX_ECONFIG : 0;
}

/* ---- pins: standard base64 of 32 bytes ---- */

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z') {
		return c - 'A';
	}
	if (c >= 'a' && c <= 'z') {
		return c - 'a' + 26;
	}
	if (c >= '0' && c <= '9') {
		return c - '0' + 52;
	}
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int nx_conf_pin_parse(const char *s, uint8_t out[NX_CONF_PIN_BYTES], char *why, size_t cap)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++) {
		if (b64val(s[i]) < 0 && s[i] != '=') {
			unsigned char c = (unsigned char)s[i];
			if (c == '-' || c == '_') {
				snprintf(why, cap,
					 "'%c' is not a base64 character (pins use the "
					 "standard alphabet, with '+' and '/')",
					 c);
			} else if (c > ' ' && c < 0x7f) {
				snprintf(why, cap, "'%c' is not a base64 character", c);
			} else {
				snprintf(why, cap, "byte 0x%02x is not a base64 character", c);
			}
			return NX_ECONFIG;
		}
	}
	if (n != PIN_TEXT_LEN) {
		snprintf(why, cap,
			 "expected %d base64 characters (a SHA-256 of the public key, as `kdig "
			 "+tls-pin` takes it), got %zu",
			 PIN_TEXT_LEN, n);
		return NX_ECONFIG;
	}
	if (s[43] != '=' || memchr(s, '=', 43)) {
		snprintf(why, cap,
			 "does not decode to %d bytes (expected 43 characters and one "
			 "'=')",
			 NX_CONF_PIN_BYTES);
		return NX_ECONFIG;
	}
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t o = 0;
	for (size_t i = 0; i < 43; i++) {
		acc = acc << 6 | (uint32_t)b64val(s[i]);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	/* 43 characters carry 258 bits: the 2 left over must be 0 in a canonical encoding. */
	if (o != NX_CONF_PIN_BYTES || (acc & ((1u << bits) - 1))) {
		snprintf(why, cap, "not canonical base64 (the last character has stray bits)");
		return NX_ECONFIG;
	}
	return 0;
}

/* ---- the YAML forms ---- */

enum { U_URL, U_NAME, U_PINS, U_ADDRESS, U__COUNT };
static const char *const up_fields[] = {"url", "name", "pin_sha256", "address", NULL};

static void set_pos(struct nx_conf_ld *ld, struct nx_conf_upstream *u, struct fy_node *n,
		    struct fy_node *fallback)
{
	int line = 0, col = 0;
	if (ld->in_default) {
		return; /* not in the file: no position to point at */
	}
	if (nx_conf_node_pos(ld, n, &line, &col) || nx_conf_node_pos(ld, fallback, &line, &col)) {
		u->line = (unsigned)line;
		u->col = (unsigned)col;
	}
}

static int url_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		    struct fy_node *key, struct nx_conf_upstream *u)
{
	char buf[NX_CONF_SCALAR_MAX], why[WHY_MAX];
	int rc = nx_conf_scalar(ld, label, val, key, "an upstream (addr:port or a URL)", false, buf,
				sizeof(buf));
	if (rc) {
		return rc;
	}
	if (nx_conf_upstream_parse(buf, u, why, sizeof(why))) {
		bool url = strstr(buf, "://") != NULL;
		return nx_conf_fail(ld, val, key, "%s: bad %s '%.*s': %s", label,
				    url ? "upstream" : "address", NX_CONF_UP_TEXT_MAX, buf, why);
	}
	set_pos(ld, u, val, key);
	return 0;
}

static int pins_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		     struct fy_node *key, struct nx_conf_upstream *u)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, label, val, key, 1, NX_CONF_MAX_PINS, false, &cnt);
	if (rc) {
		return rc;
	}
	u->pins = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*u->pins));
	if (!u->pins) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", label);
	}
	u->n_pins = cnt;
	void *it = NULL;
	struct fy_node *item;
	char buf[128], why[WHY_MAX], ilabel[LABEL_MAX];
	for (size_t j = 0; j < cnt && (item = fy_node_sequence_iterate(val, &it)); j++) {
		nx_conf_label(ilabel, sizeof(ilabel), "%s[%zu]", label, j);
		rc = nx_conf_scalar(ld, ilabel, item, key, "a base64 SHA-256 pin", false, buf,
				    sizeof(buf));
		if (rc) {
			return rc;
		}
		if (nx_conf_pin_parse(buf, u->pins[j], why, sizeof(why))) {
			return nx_conf_fail(ld, item, key, "%s: bad pin: %s", ilabel, why);
		}
		for (size_t p = 0; p < j; p++) {
			if (!memcmp(u->pins[p], u->pins[j], NX_CONF_PIN_BYTES)) {
				return nx_conf_fail(ld, item, key,
						    "%s: duplicate pin (same as [%zu])", ilabel, p);
			}
		}
	}
	return 0;
}

/* `address`: an IP address without port (the url's port applies). */
static int address_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			struct fy_node *key, struct nx_conf_upstream *u)
{
	char buf[128], why[WHY_MAX];
	int rc = nx_conf_scalar(ld, label, val, key, "an IP address", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	bool bracketed = buf[0] == '[';
	char host[128];
	snprintf(host, sizeof(host), "%s", buf + bracketed);
	size_t hl = strlen(host);
	if (bracketed && (hl == 0 || host[hl - 1] != ']')) {
		return nx_conf_fail(ld, val, key,
				    "%s: '%s' is not an IP address (no port here: "
				    "the url's port applies)",
				    label, buf);
	}
	host[hl - bracketed] = '\0';
	struct in_addr v4;
	bool v6 = strchr(host, ':') != NULL;
	if ((!v6 && inet_pton(AF_INET, host, &v4) != 1) ||
	    numeric_addr(host, v6, u->port, &u->addr, why, sizeof(why))) {
		return nx_conf_fail(ld, val, key,
				    "%s: '%s' is not an IP address (no port here: "
				    "the url's port applies)",
				    label, buf);
	}
	u->resolved = true;
	return 0;
}

static int map_node(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
		    struct fy_node *key, struct nx_conf_upstream *u)
{
	struct fy_node *v[U__COUNT], *k[U__COUNT];
	int rc = nx_conf_fields(ld, label, item, key, up_fields, v, k);
	if (rc) {
		return rc;
	}
	char fl[LABEL_MAX];
	if (!v[U_URL]) {
		return nx_conf_fail(ld, item, key, "%s: missing 'url'", label);
	}
	nx_conf_label(fl, sizeof(fl), "%s.url", label);
	rc = url_node(ld, fl, v[U_URL], k[U_URL], u);
	if (rc) {
		return rc;
	}
	for (int f = U_NAME; f <= U_PINS; f++) {
		if (v[f] && !tls_kind(u->kind)) {
			return nx_conf_fail(ld, k[f], NULL,
					    "%s.%s: applies to tls:// and https:// upstreams only",
					    label, up_fields[f]);
		}
	}
	if (v[U_NAME]) {
		nx_conf_label(fl, sizeof(fl), "%s.name", label);
		char buf[NX_DNS_TEXT_MAX], why[WHY_MAX];
		rc = nx_conf_scalar(ld, fl, v[U_NAME], k[U_NAME], "a host name", false, buf,
				    sizeof(buf));
		if (rc) {
			return rc;
		}
		if (strchr(u->text, '#')) {
			return nx_conf_fail(ld, v[U_NAME], k[U_NAME],
					    "%s: the url already names the server after '#': give "
					    "the name once",
					    fl);
		}
		free_str(&u->auth_name);
		if (host_name(buf, "name", &u->auth_name, why, sizeof(why))) {
			return nx_conf_fail(ld, v[U_NAME], k[U_NAME], "%s: %s", fl, why);
		}
	}
	if (v[U_PINS]) {
		nx_conf_label(fl, sizeof(fl), "%s.pin_sha256", label);
		rc = pins_node(ld, fl, v[U_PINS], k[U_PINS], u);
		if (rc) {
			return rc;
		}
	}
	if (v[U_ADDRESS]) {
		nx_conf_label(fl, sizeof(fl), "%s.address", label);
		if (!u->host) {
			return nx_conf_fail(ld, v[U_ADDRESS], k[U_ADDRESS],
					    "%s: only for a url whose host is a name (this url "
					    "already gives an address)",
					    fl);
		}
		rc = address_node(ld, fl, v[U_ADDRESS], k[U_ADDRESS], u);
	}
	return rc;
}

/* Same server twice: same transport, endpoint (host name and port, or address) and path. */
static bool same_upstream(const struct nx_conf_upstream *a, const struct nx_conf_upstream *b)
{
	if (a->kind != b->kind || a->port != b->port || !a->host != !b->host) {
		return false;
	}
	if (a->host ? strcmp(a->host, b->host)
		    : a->addr.len != b->addr.len || memcmp(&a->addr.ss, &b->addr.ss, a->addr.len)) {
		return false;
	}
	return !a->path == !b->path && (!a->path || !strcmp(a->path, b->path));
}

int nx_conf_upstream_seq(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			 struct fy_node *key, long long min, long long max,
			 struct nx_conf_upstream **out, size_t *n)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, label, val, key, min, max, false, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	struct nx_conf_upstream *a = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*a));
	if (!a) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", label);
	}
	*out = a;
	*n = cnt;
	void *it = NULL;
	struct fy_node *item;
	char ilabel[LABEL_MAX];
	for (size_t i = 0; i < cnt && (item = fy_node_sequence_iterate(val, &it)); i++) {
		nx_conf_label(ilabel, sizeof(ilabel), "%s[%zu]", label, i);
		rc = fy_node_is_mapping(item) ? map_node(ld, ilabel, item, key, &a[i])
					      : url_node(ld, ilabel, item, key, &a[i]);
		if (rc) {
			return rc;
		}
		for (size_t j = 0; j < i; j++) {
			if (same_upstream(&a[j], &a[i])) {
				return nx_conf_fail(ld, item, key,
						    "%s: duplicate server '%s' (same as [%zu])",
						    ilabel, a[i].text, j);
			}
		}
	}
	return 0;
}

static int upstreams_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			   struct fy_node *key)
{
	return nx_conf_upstream_seq(ld, k->path, val, key, k->min, k->max,
				    NX_CONF_FIELD(ld->c, k, struct nx_conf_upstream *),
				    NX_CONF_COUNT(ld->c, k));
}

static void upstreams_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_conf_upstream **f = NX_CONF_FIELD(c, k, struct nx_conf_upstream *);
	size_t *n = NX_CONF_COUNT(c, k);
	nx_conf_upstreams_free(*f, *n);
	*f = NULL;
	*n = 0;
}

static void upstreams_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld entries", k->min, k->max);
}

const struct nx_conf_type nx_conf_t_upstreams = {
    .name = "list of upstream servers",
    .parse = upstreams_parse,
    .release = upstreams_release,
    .range = upstreams_range,
};

/* ---- after every key: host names need some way to be resolved ---- */

static bool has_plain(const struct nx_conf *c)
{
	for (size_t i = 0; i < c->n_upstreams; i++) {
		if (c->upstreams[i].kind == NX_CONF_UP_PLAIN) {
			return true;
		}
	}
	return false;
}

static int check_hosts(struct nx_conf_ld *ld, const struct nx_conf_upstream *u, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!u[i].resolved) {
			struct nx_conf_pos at = {(int)u[i].line, (int)u[i].col};
			return nx_conf_fail_pos(
			    ld, at,
			    "upstream host '%s' cannot be resolved: give its "
			    "address (the mapping form's `address`), list plain "
			    "servers in upstream.bootstrap, or add a plain server "
			    "to upstream.servers",
			    u[i].host);
		}
	}
	return 0;
}

int nx_conf_upstream_finish(struct nx_conf_ld *ld)
{
	struct nx_conf *c = ld->c;
	if (c->n_bootstrap > 0 || has_plain(c)) {
		return 0;
	}
	int rc = check_hosts(ld, c->upstreams, c->n_upstreams);
	for (size_t z = 0; !rc && z < c->n_zones; z++) {
		rc = check_hosts(ld, c->zones[z].servers, c->zones[z].n_servers);
	}
	return rc;
}

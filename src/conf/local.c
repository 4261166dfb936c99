/*
 * local_records: parsed and pre-encoded to wire rdata at load, kept sorted by (name, type) so
 * the records of one name (and of one name and type) are contiguous and found by binary search
 * without allocating.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"
#include "dns/msg.h"

#define LABEL_MAX 320  /* bytes of a value label */
#define TXT_CHUNK 255  /* RFC 1035 3.3: one character-string holds at most 255 bytes */
#define TTL_MAX 604800 /* one week: a local record that must live longer is a zone's job */
#define TTL_DEFAULT 300
/* RFC 1035 / 2782 / 8659 type codes not in dns/msg.h's list */
#define T_SRV 33
#define T_CAA 257
/* RFC 8659 4.1: a CAA tag is 1..15 ASCII letters and digits */
#define CAA_TAG_MAX 15

static const struct {
	const char *name;
	uint16_t type;
} rr_types[] = {
    {"A", NX_DNS_T_A},	   {"AAAA", NX_DNS_T_AAAA}, {"CNAME", NX_DNS_T_CNAME},
    {"TXT", NX_DNS_T_TXT}, {"PTR", NX_DNS_T_PTR},   {"MX", NX_DNS_T_MX},
    {"SRV", T_SRV},	   {"CAA", T_CAA},
};

static const char *type_name(uint16_t t)
{
	for (size_t i = 0; i < NX_ARRAY_LEN(rr_types); i++) {
		if (rr_types[i].type == t) {
			return rr_types[i].name;
		}
	}
	return "?";
}

/* Order: name length, name bytes (lower-cased wire), type. */
static int cmp_key(const uint8_t *an, size_t al, uint32_t at, const uint8_t *bn, size_t bl,
		   uint32_t bt)
{
	if (al != bl) {
		return al < bl ? -1 : 1;
	}
	int c = memcmp(an, bn, al);
	if (c) {
		return c;
	}
	return at < bt ? -1 : at > bt;
}

/* ---- parse ---- */

enum { L_NAME, L_TYPE, L_VALUE, L_TTL, L__COUNT };
static const char *const local_fields[] = {"name", "type", "value", "ttl", NULL};

/* Next space-separated field of *s (NUL-terminated into itself); NULL when none is left. */
static char *field(char **s)
{
	char *p = *s;
	while (*p == ' ' || *p == '\t') {
		p++;
	}
	if (!*p) {
		return NULL;
	}
	char *start = p;
	while (*p && *p != ' ' && *p != '\t') {
		p++;
	}
	if (*p) {
		*p++ = '\0';
	}
	*s = p;
	return start;
}

static bool u16_field(char **s, uint16_t *out)
{
	const char *f = field(s);
	if (!f || !*f) {
		return false;
	}
	unsigned long v = 0;
	for (const char *c = f; *c; c++) {
		if (*c < '0' || *c > '9' || v > 65535) {
			return false;
		}
		v = v * 10 + (unsigned long)(*c - '0');
	}
	if (v > 65535) {
		return false;
	}
	*out = (uint16_t)v;
	return true;
}

/* "PREF HOST" (MX) or "PRIORITY WEIGHT PORT HOST" (SRV): n numbers, then a host name. */
static size_t encode_numbers_host(const char *text, unsigned n, uint8_t *buf, const char **why,
				  const char **detail)
{
	char tmp[NX_CONF_SCALAR_MAX];
	snprintf(tmp, sizeof(tmp), "%s", text);
	char *s = tmp;
	size_t pos = 0;
	for (unsigned i = 0; i < n; i++) {
		uint16_t v;
		if (!u16_field(&s, &v)) {
			*why = n == 1 ? "not 'PREFERENCE HOST' (a preference of 0..65535)"
				      : "not 'PRIORITY WEIGHT PORT HOST' (numbers of 0..65535)";
			return 0;
		}
		buf[pos++] = (uint8_t)(v >> 8);
		buf[pos++] = (uint8_t)v;
	}
	const char *host = field(&s);
	uint8_t wire[NX_DNS_NAME_MAX];
	size_t wl = host && !field(&s) ? nx_conf_host_name(host, wire, detail) : 0;
	if (!wl) {
		*why = n == 1 ? "not 'PREFERENCE HOST' (a host name after the preference)"
			      : "not 'PRIORITY WEIGHT PORT HOST' (a host name at the end)";
		return 0;
	}
	memcpy(buf + pos, wire, wl);
	return pos + wl;
}

/* "FLAGS TAG VALUE" (RFC 8659 4.1; the value may be in double quotes, as zone files write it). */
static size_t encode_caa(const char *text, uint8_t *buf, size_t cap, const char **why)
{
	char tmp[NX_CONF_SCALAR_MAX];
	snprintf(tmp, sizeof(tmp), "%s", text);
	char *s = tmp;
	uint16_t flags;
	const char *tag = NULL;
	*why = "not 'FLAGS TAG VALUE' (flags 0..255, a tag of 1..15 letters or digits, a value)";
	if (!u16_field(&s, &flags) || flags > 255 || !(tag = field(&s))) {
		return 0;
	}
	size_t tl = strlen(tag);
	bool ok = tl >= 1 && tl <= CAA_TAG_MAX;
	for (size_t i = 0; ok && i < tl; i++) {
		ok = (tag[i] >= 'a' && tag[i] <= 'z') || (tag[i] >= 'A' && tag[i] <= 'Z') ||
		     (tag[i] >= '0' && tag[i] <= '9');
	}
	while (*s == ' ' || *s == '\t') {
		s++;
	}
	size_t vl = strlen(s);
	if (vl >= 2 && s[0] == '"' && s[vl - 1] == '"') {
		s++;
		vl -= 2;
	}
	if (!ok || 2 + tl + vl > cap) {
		return 0;
	}
	buf[0] = (uint8_t)flags;
	buf[1] = (uint8_t)tl;
	memcpy(buf + 2, tag, tl);
	memcpy(buf + 2 + tl, s, vl);
	return 2 + tl + vl;
}

/*
 * Encode `text` as rdata of type t into buf (cap bytes). Returns rdlen, or 0 with *why (what the
 * value is not) and *detail ("" or the reason).
 */
static size_t encode(uint16_t t, const char *text, uint8_t *buf, size_t cap, const char **why,
		     const char **detail)
{
	*detail = "";
	switch (t) {
	case NX_DNS_T_A:
		if (inet_pton(AF_INET, text, buf) != 1) {
			*why = "not an IPv4 address";
			return 0;
		}
		return 4;
	case NX_DNS_T_AAAA:
		if (inet_pton(AF_INET6, text, buf) != 1) {
			*why = "not an IPv6 address";
			return 0;
		}
		return 16;
	case NX_DNS_T_CNAME:
	case NX_DNS_T_PTR: {
		uint8_t wire[NX_DNS_NAME_MAX];
		size_t wl = nx_conf_host_name(text, wire, detail);
		if (!wl) {
			*why = "not a host name";
			return 0;
		}
		memcpy(buf, wire, wl);
		return wl;
	}
	case NX_DNS_T_MX:
		return encode_numbers_host(text, 1, buf, why, detail);
	case T_SRV:
		return encode_numbers_host(text, 3, buf, why, detail);
	case T_CAA:
		return encode_caa(text, buf, cap, why);
	default: { /* TXT: character-strings of up to 255 bytes; "" is one empty string */
		size_t len = strlen(text), pos = 0, off = 0;
		do {
			size_t chunk = NX_MIN(len - off, (size_t)TXT_CHUNK);
			if (pos + 1 + chunk > cap) {
				*why = "too long";
				return 0;
			}
			buf[pos++] = (uint8_t)chunk;
			memcpy(buf + pos, text + off, chunk);
			pos += chunk;
			off += chunk;
		} while (off < len);
		return pos;
	}
	}
}

/* Conflicts with an earlier record of the same name; j is that record. */
static int conflicts(struct nx_conf_ld *ld, const char *label, struct fy_node *at,
		     struct nx_conf_local *all, size_t i)
{
	const struct nx_conf_local *r = &all[i];
	if (r->type == NX_DNS_T_CNAME && r->rdlen == r->name_len &&
	    !memcmp(r->rdata, r->name, r->name_len)) {
		return nx_conf_fail(ld, at, NULL, "%s: CNAME '%s' points to itself", label,
				    r->text);
	}
	for (size_t j = 0; j < i; j++) {
		const struct nx_conf_local *o = &all[j];
		if (o->name_len != r->name_len || memcmp(o->name, r->name, r->name_len)) {
			continue;
		}
		if (o->type == NX_DNS_T_CNAME && r->type == NX_DNS_T_CNAME) {
			return nx_conf_fail(ld, at, NULL,
					    "%s: '%s' already has a CNAME (local_records[%zu]); a "
					    "name has at most one",
					    label, r->text, j);
		}
		if (o->type == NX_DNS_T_CNAME || r->type == NX_DNS_T_CNAME) {
			return nx_conf_fail(ld, at, NULL,
					    "%s: '%s' cannot have a CNAME and other records "
					    "(local_records[%zu] is %s)",
					    label, r->text, j, type_name(o->type));
		}
		if (o->type == r->type && o->rdlen == r->rdlen &&
		    !memcmp(o->rdata, r->rdata, r->rdlen)) {
			return nx_conf_fail(ld, at, NULL,
					    "%s: duplicate record (same as local_records[%zu])",
					    label, j);
		}
	}
	return 0;
}

static int local_one(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
		     struct fy_node *key, void *all_, size_t i)
{
	struct nx_conf_local *all = all_;
	struct nx_conf_local *r = &all[i];
	if (nx_conf_is_null(item) || !fy_node_is_mapping(item)) {
		return nx_conf_fail(ld, item, key,
				    "%s: expected a mapping {name, type, value, ttl}, got %s",
				    label, nx_conf_node_kind(item));
	}
	struct fy_node *v[L__COUNT], *k[L__COUNT];
	int rc = nx_conf_fields(ld, label, item, key, local_fields, v, k);
	if (rc) {
		return rc;
	}
	for (size_t f = 0; f < L_TTL; f++) {
		if (!v[f]) {
			return nx_conf_fail(ld, item, key, "%s: missing '%s'", label,
					    local_fields[f]);
		}
	}
	char fl[LABEL_MAX], buf[NX_CONF_SCALAR_MAX];
	nx_conf_label(fl, sizeof(fl), "%s.name", label);
	rc = nx_conf_scalar(ld, fl, v[L_NAME], k[L_NAME], "a host name", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	const char *why = NULL;
	size_t wl = nx_conf_host_name(buf, r->name, &why);
	if (!wl) {
		return nx_conf_fail(ld, v[L_NAME], k[L_NAME], "%s: bad name '%s': %s", fl, buf,
				    why);
	}
	r->name_len = (uint8_t)wl;
	r->text = nx_mem_strdup(NX_OWNER_config, buf);
	if (!r->text) {
		return nx_conf_fail(ld, v[L_NAME], k[L_NAME], "%s: out of memory", fl);
	}

	nx_conf_label(fl, sizeof(fl), "%s.type", label);
	rc = nx_conf_scalar(ld, fl, v[L_TYPE], k[L_TYPE], "a record type", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	for (size_t t = 0; t < NX_ARRAY_LEN(rr_types); t++) {
		if (!strcasecmp(buf, rr_types[t].name)) {
			r->type = rr_types[t].type;
		}
	}
	if (!r->type) {
		return nx_conf_fail(ld, v[L_TYPE], k[L_TYPE],
				    "%s: '%s' is not one of A, AAAA, CNAME, TXT, PTR, MX, SRV, CAA",
				    fl, buf);
	}

	nx_conf_label(fl, sizeof(fl), "%s.value", label);
	rc = nx_conf_scalar(ld, fl, v[L_VALUE], k[L_VALUE], "a value", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	uint8_t rd[NX_CONF_SCALAR_MAX + NX_CONF_SCALAR_MAX / TXT_CHUNK + 2];
	const char *detail = "";
	size_t rdlen = encode(r->type, buf, rd, sizeof(rd), &why, &detail);
	if (!rdlen) {
		return nx_conf_fail(ld, v[L_VALUE], k[L_VALUE], "%s: '%s' is %s (type %s)%s%s", fl,
				    buf, why, type_name(r->type), detail[0] ? ": " : "", detail);
	}
	r->rdata = nx_mem_alloc(NX_OWNER_config, rdlen);
	if (!r->rdata) {
		return nx_conf_fail(ld, v[L_VALUE], k[L_VALUE], "%s: out of memory", fl);
	}
	memcpy(r->rdata, rd, rdlen);
	r->rdlen = (uint16_t)rdlen;

	r->ttl = TTL_DEFAULT;
	if (v[L_TTL]) {
		nx_conf_label(fl, sizeof(fl), "%s.ttl", label);
		unsigned ttl;
		rc = nx_conf_uint_node(ld, fl, v[L_TTL], k[L_TTL], 0, TTL_MAX, &ttl);
		if (rc) {
			return rc;
		}
		r->ttl = ttl;
	}
	return conflicts(ld, label, v[L_NAME], all, i);
}

static int idx_cmp(const void *a, const void *b, void *arg)
{
	const struct nx_conf_local *l = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = cmp_key(l[x].name, l[x].name_len, l[x].type, l[y].name, l[y].name_len, l[y].type);
	return c ? c : (x < y ? -1 : x > y); /* stable: file order within a name and type */
}

/* Sort into a new array (same size, so the ledger and release see no difference). */
static int sort_locals(struct nx_conf_ld *ld, struct fy_node *val, struct fy_node *key,
		       struct nx_conf_local **arr, size_t n)
{
	uint32_t *idx = nx_mem_alloc(NX_OWNER_config, n * sizeof(*idx));
	struct nx_conf_local *out = nx_mem_calloc(NX_OWNER_config, n, sizeof(*out));
	if (!idx || !out) {
		nx_mem_free(NX_OWNER_config, idx, idx ? n * sizeof(*idx) : 0);
		nx_mem_free(NX_OWNER_config, out, out ? n * sizeof(*out) : 0);
		return nx_conf_fail(ld, val, key, "local_records: out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		idx[i] = (uint32_t)i;
	}
	qsort_r(idx, n, sizeof(*idx), idx_cmp, *arr);
	for (size_t i = 0; i < n; i++) {
		out[i] = (*arr)[idx[i]];
	}
	nx_mem_free(NX_OWNER_config, idx, n * sizeof(*idx));
	nx_mem_free(NX_OWNER_config, *arr, n * sizeof(**arr));
	*arr = out;
	return 0;
}

static int locals_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key)
{
	size_t cnt;
	int rc = nx_conf_parse_items(ld, k, val, key, sizeof(struct nx_conf_local), local_one, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	return sort_locals(ld, val, key, NX_CONF_FIELD(ld->c, k, struct nx_conf_local *), cnt);
}

static void locals_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_conf_local **f = NX_CONF_FIELD(c, k, struct nx_conf_local *);
	size_t *n = NX_CONF_COUNT(c, k);
	for (size_t i = 0; *f && i < *n; i++) {
		struct nx_conf_local *r = &(*f)[i];
		if (r->text) {
			nx_mem_free(NX_OWNER_config, r->text, strlen(r->text) + 1);
		}
		nx_mem_free(NX_OWNER_config, r->rdata, r->rdlen);
	}
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void locals_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld records; ttl 0..%d seconds", k->min, k->max, TTL_MAX);
}

const struct nx_conf_type nx_conf_t_locals = {
    .name = "list of local records",
    .parse = locals_parse,
    .release = locals_release,
    .range = locals_range,
};

/* ---- lookup ---- */

/* First index whose key is >= (name, type). */
static size_t lower_bound(const struct nx_conf *c, const uint8_t *name, size_t len, uint32_t type)
{
	size_t lo = 0, hi = c->n_locals;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct nx_conf_local *r = &c->locals[mid];
		if (cmp_key(r->name, r->name_len, r->type, name, len, type) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* The name's records of types [tlo, thi). */
static size_t range(const struct nx_conf *c, const uint8_t *name, size_t len, uint32_t tlo,
		    uint32_t thi, size_t *first)
{
	if (!c->n_locals || len == 0 || len > NX_DNS_NAME_MAX) {
		*first = 0;
		return 0;
	}
	uint8_t low[NX_DNS_NAME_MAX];
	memcpy(low, name, len);
	nx_dns_name_lower(low, len);
	*first = lower_bound(c, low, len, tlo);
	return lower_bound(c, low, len, thi) - *first;
}

int nx_conf_local_find(const struct nx_conf *c, const uint8_t *name, size_t len, uint16_t qtype,
		       size_t *first, size_t *count)
{
	bool any = qtype == NX_DNS_T_ANY;
	*count = range(c, name, len, any ? 0 : qtype, any ? 0x10000u : (uint32_t)qtype + 1, first);
	return *count ? 0 : NX_ENOTFOUND;
}

bool nx_conf_local_has_name(const struct nx_conf *c, const uint8_t *name, size_t len)
{
	size_t first;
	return range(c, name, len, 0, 0x10000u, &first) > 0;
}

/*
 * Value types of the schema: each parses a YAML node into one field of struct nx_conf, releases
 * it, and describes its range for the docs. Errors name the key's dotted path and point at the
 * offending node.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <idn2.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"
#include "dns/wire.h"

/* ---- scalar helpers ---- */

bool nx_conf_is_null(struct fy_node *n)
{
	if (!n) {
		return true;
	}
	if (!fy_node_is_scalar(n) || fy_node_is_alias(n) || fy_node_get_style(n) != FYNS_PLAIN) {
		return false;
	}
	size_t len;
	const char *s = fy_node_get_scalar(n, &len);
	if (!s || len == 0) {
		return true;
	}
	return (len == 1 && s[0] == '~') ||
	       (len == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) ||
			     !memcmp(s, "NULL", 4)));
}

const char *nx_conf_node_kind(struct fy_node *n)
{
	if (nx_conf_is_null(n)) {
		return "null";
	}
	if (fy_node_is_alias(n)) {
		return "an alias";
	}
	if (fy_node_is_mapping(n)) {
		return "a mapping";
	}
	if (fy_node_is_sequence(n)) {
		return "a list";
	}
	return "a scalar";
}

/* plain_only: numbers and booleans are not strings, so a quoted "2" is refused. */
int nx_conf_scalar(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		   struct fy_node *key, const char *what, bool plain_only, char *buf, size_t cap)
{
	if (nx_conf_is_null(val) || !fy_node_is_scalar(val) || fy_node_is_alias(val)) {
		return nx_conf_fail(ld, val, key, "%s: expected %s, got %s", label, what,
				    nx_conf_node_kind(val));
	}
	size_t len;
	const char *s = fy_node_get_scalar(val, &len);
	if (!s) {
		return nx_conf_fail(ld, val, key, "%s: expected %s", label, what);
	}
	if (plain_only && fy_node_get_style(val) != FYNS_PLAIN) {
		return nx_conf_fail(ld, val, key, "%s: expected %s, got a quoted string", label,
				    what);
	}
	if (len >= cap) {
		return nx_conf_fail(ld, val, key, "%s: value longer than %zu bytes", label,
				    cap - 1);
	}
	if (memchr(s, '\0', len)) {
		return nx_conf_fail(ld, val, key, "%s: value contains a NUL byte", label);
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

/* ---- bool ---- */

int nx_conf_bool_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		      struct fy_node *key, bool *out)
{
	char buf[16];
	int rc = nx_conf_scalar(ld, label, val, key, "true or false", true, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	if (!strcmp(buf, "true") || !strcmp(buf, "True") || !strcmp(buf, "TRUE")) {
		*out = true;
	} else if (!strcmp(buf, "false") || !strcmp(buf, "False") || !strcmp(buf, "FALSE")) {
		*out = false;
	} else {
		return nx_conf_fail(ld, val, key, "%s: expected true or false, got '%s'", label,
				    buf);
	}
	return 0;
}

static int bool_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		      struct fy_node *key)
{
	return nx_conf_bool_node(ld, k->path, val, key, NX_CONF_FIELD(ld->c, k, bool));
}

const struct nx_conf_type nx_conf_t_bool = {
	.name = "boolean",
	.parse = bool_parse,
};

/* ---- unsigned integer in [min, max] ---- */

int nx_conf_uint_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		      struct fy_node *key, long long min, long long max, unsigned *out)
{
	char buf[NX_CONF_SCALAR_MAX];
	int rc = nx_conf_scalar(ld, label, val, key, "an unsigned integer", true, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	if (!buf[0] || strspn(buf, "0123456789") != strlen(buf)) {
		return nx_conf_fail(ld, val, key, "%s: expected an unsigned integer, got '%s'",
				    label, buf);
	}
	unsigned long long v = 0;
	bool big = false;
	for (const char *p = buf; *p; p++) {
		v = v * 10 + (unsigned)(*p - '0');
		if (v > (unsigned long long)max) {
			big = true;
			break;
		}
	}
	if (big || (long long)v < min) {
		return nx_conf_fail(ld, val, key, "%s: %s is out of range %lld..%lld", label, buf,
				    min, max);
	}
	*out = (unsigned)v;
	return 0;
}

static int uint_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		      struct fy_node *key)
{
	return nx_conf_uint_node(ld, k->path, val, key, k->min, k->max,
				 NX_CONF_FIELD(ld->c, k, unsigned));
}

static void uint_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld", k->min, k->max);
}

const struct nx_conf_type nx_conf_t_uint = {
	.name = "unsigned integer",
	.parse = uint_parse,
	.range = uint_range,
};

/* ---- string (non-empty), stored as an owned char * ---- */

static char *dup_text(const char *s)
{
	return nx_mem_strdup(NX_OWNER_config, s);
}

int nx_conf_string_node(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			struct fy_node *key, char **out)
{
	char buf[NX_CONF_SCALAR_MAX];
	int rc = nx_conf_scalar(ld, label, val, key, "a string", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	if (!buf[0]) {
		return nx_conf_fail(ld, val, key, "%s: must not be empty", label);
	}
	*out = dup_text(buf);
	return *out ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", label);
}

static int string_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key)
{
	return nx_conf_string_node(ld, k->path, val, key, NX_CONF_FIELD(ld->c, k, char *));
}

static void string_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	char **f = NX_CONF_FIELD(c, k, char *);
	if (*f) {
		nx_mem_free(NX_OWNER_config, *f, strlen(*f) + 1);
		*f = NULL;
	}
}

const struct nx_conf_type nx_conf_t_string = {
	.name = "string",
	.parse = string_parse,
	.release = string_release,
};

/* ---- enum: one of k->choices, stored as an owned char * ---- */

static void enum_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	size_t pos = 0;
	buf[0] = '\0';
	for (const char *const *c = k->choices; *c && pos < cap; c++) {
		int w = snprintf(buf + pos, cap - pos, "%s%s", c == k->choices ? "" : ", ", *c);
		if (w < 0) {
			break;
		}
		pos += (size_t)w;
	}
}

static int enum_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		      struct fy_node *key)
{
	char buf[64];
	char one_of[256];
	enum_range(k, one_of, sizeof(one_of));
	size_t len = 0;
	const char *text = val && fy_node_is_scalar(val) && !fy_node_is_alias(val)
				   ? fy_node_get_scalar(val, &len)
				   : NULL;
	bool null_choice = false;
	for (const char *const *c = k->choices; *c; c++) {
		null_choice |= !strcmp(*c, "null");
	}
	int rc = 0;
	if (null_choice && text && len == 4 && !memcmp(text, "null", 4)) {
		strcpy(buf, "null"); /* YAML's null, when "null" is a choice (filter.block_mode) */
	} else {
		rc = nx_conf_scalar(ld, k->path, val, key, "one of the listed words", false, buf,
				    sizeof(buf));
	}
	if (rc) {
		return rc;
	}
	for (const char *const *c = k->choices; *c; c++) {
		if (!strcmp(buf, *c)) {
			char **f = NX_CONF_FIELD(ld->c, k, char *);
			*f = dup_text(*c);
			return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
		}
	}
	return nx_conf_fail(ld, val, key, "%s: '%s' is not one of %s", k->path, buf, one_of);
}

const struct nx_conf_type nx_conf_t_enum = {
	.name = "enumeration",
	.parse = enum_parse,
	.release = string_release,
	.range = enum_range,
};

/* ---- one address, embedded struct nx_addr ---- */

static int addr_one(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		    struct fy_node *key, int default_port, struct nx_addr *out)
{
	char buf[256];
	int rc = nx_conf_scalar(ld, label, val, key, "an address (addr:port)", false, buf,
				sizeof(buf));
	if (rc) {
		return rc;
	}
	const char *why = "bad address";
	if (nx_addr_parse_why(buf, default_port, out, &why)) {
		return nx_conf_fail(ld, val, key, "%s: bad address '%s': %s", label, buf, why);
	}
	return 0;
}

static int addr_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		      struct fy_node *key)
{
	return addr_one(ld, k->path, val, key, k->default_port,
			NX_CONF_FIELD(ld->c, k, struct nx_addr));
}

const struct nx_conf_type nx_conf_t_addr = {
	.name = "address",
	.parse = addr_parse,
};

/* ---- lists ---- */

int nx_conf_list_count(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		       struct fy_node *key, long long min, long long max, bool null_empty,
		       size_t *n)
{
	if (null_empty && nx_conf_is_null(val) && min == 0) {
		*n = 0;
		return 0;
	}
	if (!val || !fy_node_is_sequence(val)) {
		return nx_conf_fail(ld, val, key, "%s: expected a list, got %s", label,
				    nx_conf_node_kind(val));
	}
	int cnt = fy_node_sequence_item_count(val);
	if (cnt < min || cnt > max) {
		return nx_conf_fail(ld, val, key, "%s: needs %lld..%lld entries, got %d", label,
				    min, max, cnt);
	}
	*n = (size_t)cnt;
	return 0;
}

/* A list of addresses into a new owned array (*out, *n set before the entries are parsed). */
static int addr_seq(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		    struct fy_node *key, long long min, long long max, int default_port,
		    struct nx_addr **out, size_t *n)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, label, val, key, min, max, false, &cnt);
	if (rc) {
		return rc;
	}
	if (cnt == 0) {
		return 0;
	}
	struct nx_addr *a = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*a));
	if (!a) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", label);
	}
	*out = a;
	*n = cnt;
	void *it = NULL;
	struct fy_node *item;
	size_t i = 0;
	char ilabel[300];
	while ((item = fy_node_sequence_iterate(val, &it)) && i < cnt) {
		snprintf(ilabel, sizeof(ilabel), "%s[%zu]", label, i);
		rc = addr_one(ld, ilabel, item, key, default_port, &a[i]);
		if (rc) {
			return rc;
		}
		for (size_t j = 0; j < i; j++) {
			if (a[j].len == a[i].len && !memcmp(&a[j].ss, &a[i].ss, a[i].len)) {
				return nx_conf_fail(ld, item, key,
						    "%s: duplicate address '%s' (same as [%zu])",
						    ilabel, a[i].text, j);
			}
		}
		i++;
	}
	return 0;
}

static int addr_list_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k,
			   struct fy_node *val, struct fy_node *key)
{
	return addr_seq(ld, k->path, val, key, k->min, k->max, k->default_port,
			NX_CONF_FIELD(ld->c, k, struct nx_addr *), NX_CONF_COUNT(ld->c, k));
}

static void addr_list_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_addr **f = NX_CONF_FIELD(c, k, struct nx_addr *);
	size_t *n = NX_CONF_COUNT(c, k);
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void list_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld entries", k->min, k->max);
}

const struct nx_conf_type nx_conf_t_addr_list = {
	.name = "list of addresses",
	.parse = addr_list_parse,
	.release = addr_list_release,
	.range = list_range,
};

/* ---- CIDR list ---- */

static int cidr_list_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k,
			   struct fy_node *val, struct fy_node *key)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, k->path, val, key, k->min, k->max, false, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	struct nx_cidr *a = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*a));
	if (!a) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	*NX_CONF_FIELD(ld->c, k, struct nx_cidr *) = a;
	*NX_CONF_COUNT(ld->c, k) = cnt;
	void *it = NULL;
	struct fy_node *item;
	char buf[128], label[300];
	for (size_t i = 0; i < cnt && (item = fy_node_sequence_iterate(val, &it)); i++) {
		snprintf(label, sizeof(label), "%s[%zu]", k->path, i);
		rc = nx_conf_scalar(ld, label, item, key, "an address/prefix", false, buf,
				    sizeof(buf));
		if (rc) {
			return rc;
		}
		const char *why = "bad prefix";
		if (nx_cidr_parse_why(buf, &a[i], &why)) {
			return nx_conf_fail(ld, item, key, "%s: bad prefix '%s': %s", label, buf,
					    why);
		}
	}
	return 0;
}

static void cidr_list_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_cidr **f = NX_CONF_FIELD(c, k, struct nx_cidr *);
	size_t *n = NX_CONF_COUNT(c, k);
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

const struct nx_conf_type nx_conf_t_cidr_list = {
	.name = "list of CIDR prefixes",
	.parse = cidr_list_parse,
	.release = cidr_list_release,
	.range = list_range,
};

/* ---- forward zones: mapping zone name -> list of addresses ---- */

static int zone_cmp(const void *a, const void *b)
{
	const struct nx_fwd_zone *x = a, *y = b;
	unsigned lx = nx_dns_name_labels(x->name, x->name_len);
	unsigned ly = nx_dns_name_labels(y->name, y->name_len);
	if (lx != ly) {
		return lx > ly ? -1 : 1;
	}
	size_t n = NX_MIN(x->name_len, y->name_len);
	int c = memcmp(x->name, y->name, n);
	return c ? c : (int)x->name_len - (int)y->name_len;
}

#define NX_EINVAL_IDN (-100000)

/* A zone name in wire form; a Unicode name becomes its Punycode (IDNA 2008, as list sources). */
static int zone_wire(const char *text, uint8_t wire[NX_DNS_NAME_MAX])
{
	bool ascii = true;
	for (const char *p = text; *p && ascii; p++) {
		ascii = (unsigned char)*p < 0x80;
	}
	if (ascii) {
		return nx_dns_name_from_text(text, wire);
	}
	char *ace = NULL;
	if (idn2_to_ascii_8z(text, &ace, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL) != IDN2_OK) {
		idn2_free(ace);
		return NX_EINVAL_IDN;
	}
	int wl = nx_dns_name_from_text(ace, wire);
	idn2_free(ace);
	return wl;
}

static int zone_map_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k,
			  struct fy_node *val, struct fy_node *key)
{
	if (nx_conf_is_null(val)) {
		return 0; /* "forward_zones:" with nothing under it: none */
	}
	if (!fy_node_is_mapping(val)) {
		return nx_conf_fail(ld, val, key,
				    "%s: expected a mapping of zone: [servers], got %s", k->path,
				    nx_conf_node_kind(val));
	}
	int cnt = fy_node_mapping_item_count(val);
	if (cnt < k->min || cnt > k->max) {
		return nx_conf_fail(ld, val, key, "%s: needs %lld..%lld zones, got %d", k->path,
				    k->min, k->max, cnt);
	}
	if (cnt == 0) {
		return 0;
	}
	struct nx_fwd_zone *z = nx_mem_calloc(NX_OWNER_config, (size_t)cnt, sizeof(*z));
	if (!z) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	struct nx_fwd_zone **f = NX_CONF_FIELD(ld->c, k, struct nx_fwd_zone *);
	size_t *n = NX_CONF_COUNT(ld->c, k);
	*f = z;
	*n = (size_t)cnt;

	void *it = NULL;
	struct fy_node_pair *p;
	size_t i = 0;
	char text[NX_DNS_TEXT_MAX], label[NX_DNS_TEXT_MAX + 64];
	while ((p = fy_node_mapping_iterate(val, &it)) && i < (size_t)cnt) {
		struct fy_node *zk = fy_node_pair_key(p);
		struct fy_node *zv = fy_node_pair_value(p);
		int rc = nx_conf_scalar(ld, k->path, zk, zk, "a zone name", false, text,
					sizeof(text));
		if (rc) {
			return rc;
		}
		uint8_t wire[NX_DNS_NAME_MAX];
		int wl = zone_wire(text, wire);
		if (wl == NX_EINVAL_IDN) {
			return nx_conf_fail(ld, zk, key, "%s: zone name '%s' is not a valid "
					    "internationalized name", k->path, text);
		}
		if (wl <= 0) {
			return nx_conf_fail(ld, zk, key, "%s: bad zone name '%s'", k->path, text);
		}
		nx_dns_name_lower(wire, (size_t)wl);
		for (size_t j = 0; j < i; j++) {
			if (z[j].name_len == wl && !memcmp(z[j].name, wire, (size_t)wl)) {
				return nx_conf_fail(ld, zk, key,
						    "%s: duplicate zone '%s' (same as '%s')",
						    k->path, text, z[j].text);
			}
		}
		memcpy(z[i].name, wire, (size_t)wl);
		z[i].name_len = (uint8_t)wl;
		z[i].text = dup_text(text);
		if (!z[i].text) {
			return nx_conf_fail(ld, zk, key, "%s: out of memory", k->path);
		}
		snprintf(label, sizeof(label), "%s.%s", k->path, text);
		rc = nx_conf_upstream_seq(ld, label, zv, zk, 1, NX_CONF_MAX_UPSTREAMS,
					  &z[i].servers, &z[i].n_servers);
		if (rc) {
			return rc;
		}
		i++;
	}
	qsort(z, *n, sizeof(*z), zone_cmp);
	return 0;
}

static void zone_map_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_fwd_zone **f = NX_CONF_FIELD(c, k, struct nx_fwd_zone *);
	size_t *n = NX_CONF_COUNT(c, k);
	for (size_t i = 0; *f && i < *n; i++) {
		struct nx_fwd_zone *z = &(*f)[i];
		if (z->text) {
			nx_mem_free(NX_OWNER_config, z->text, strlen(z->text) + 1);
		}
		nx_conf_upstreams_free(z->servers, z->n_servers);
	}
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void zone_map_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld zones, each with 1..%d servers", k->min, k->max,
		 NX_CONF_MAX_UPSTREAMS);
}

const struct nx_conf_type nx_conf_t_zone_map = {
	.name = "map: zone name → list of upstream servers",
	.parse = zone_map_parse,
	.release = zone_map_release,
	.range = zone_map_range,
};

/* ---- optional host name: "" = not set; stored lower-cased without the trailing dot ---- */

static int opt_host_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			  struct fy_node *key)
{
	char buf[NX_DNS_TEXT_MAX];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "a host name", false, buf, sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	uint8_t wire[NX_DNS_NAME_MAX];
	const char *why = NULL;
	if (!nx_conf_host_name(buf, wire, &why)) {
		return nx_conf_fail(ld, val, key, "%s: '%s' is not a host name: %s", k->path, buf,
				    why);
	}
	char text[NX_DNS_TEXT_MAX];
	if (nx_dns_name_to_text(wire, nx_dns_name_len(wire, sizeof(wire)), text, sizeof(text)) <
	    0) {
		return nx_conf_fail(ld, val, key, "%s: '%s' is not a host name", k->path, buf);
	}
	char **f = NX_CONF_FIELD(ld->c, k, char *);
	*f = dup_text(text);
	return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
}

const struct nx_conf_type nx_conf_t_opt_host = {
	.name = "host name (optional)",
	.parse = opt_host_parse,
	.release = string_release,
};

/* ---- duration: seconds, or a number with a unit s, m, h, d; stored as unsigned seconds ---- */

static const struct {
	char unit;
	unsigned secs;
} units[] = {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};

/* "90m", "24h", "30d": the largest unit that divides the value; "0s" for zero. */
static void duration_text(unsigned long long v, char *buf, size_t cap)
{
	for (size_t i = 0; i < NX_ARRAY_LEN(units); i++) {
		if (v && v % units[i].secs == 0) {
			snprintf(buf, cap, "%llu%c", v / units[i].secs, units[i].unit);
			return;
		}
	}
	snprintf(buf, cap, "%llus", v);
}

static int duration_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			  struct fy_node *key)
{
	char buf[64];
	static const char what[] = "a duration (seconds, or a number with s, m, h or d: 90m, 24h)";
	int rc = nx_conf_scalar(ld, k->path, val, key, what, false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	size_t digits = strspn(buf, "0123456789");
	unsigned mult = 0;
	if (digits > 0 && digits <= 12 && buf[digits] == '\0') {
		mult = 1;
	} else if (digits > 0 && digits <= 12 && buf[digits + 1] == '\0') {
		for (size_t i = 0; i < NX_ARRAY_LEN(units); i++) {
			if (buf[digits] == units[i].unit) {
				mult = units[i].secs;
			}
		}
	}
	if (!mult) {
		return nx_conf_fail(ld, val, key, "%s: expected %s, got '%s'", k->path, what, buf);
	}
	unsigned long long v = strtoull(buf, NULL, 10) * mult;
	if (v < (unsigned long long)k->min || v > (unsigned long long)k->max) {
		char lo[32], hi[32];
		duration_text((unsigned long long)k->min, lo, sizeof(lo));
		duration_text((unsigned long long)k->max, hi, sizeof(hi));
		return nx_conf_fail(ld, val, key, "%s: %s is out of range %s..%s", k->path, buf, lo,
				    hi);
	}
	*NX_CONF_FIELD(ld->c, k, unsigned) = (unsigned)v;
	return 0;
}

static void duration_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	char lo[32], hi[32];
	duration_text((unsigned long long)k->min, lo, sizeof(lo));
	duration_text((unsigned long long)k->max, hi, sizeof(hi));
	snprintf(buf, cap, "%s..%s (%lld..%lld seconds)", lo, hi, k->min, k->max);
}

const struct nx_conf_type nx_conf_t_duration = {
	.name = "duration",
	.parse = duration_parse,
	.range = duration_range,
};

/* ---- names ---- */

void nx_conf_label(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, cap, fmt, ap);
	va_end(ap);
}

bool nx_conf_ident_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NX_CONF_NAME_MAX || s[0] == '_' || s[0] == '-') {
		return false;
	}
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

size_t nx_conf_host_name(const char *text, uint8_t wire[NX_DNS_NAME_MAX], const char **why)
{
	size_t n = strlen(text);
	if (n == 0 || (n == 1 && text[0] == '.')) {
		*why = "empty name";
		return 0;
	}
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.";
	size_t span = strspn(text, ok);
	if (span != n) {
		unsigned char c = (unsigned char)text[span];
		*why = c >= 0x80 ? "non-ASCII name: write it in punycode (xn--...)"
				 : "names may contain only letters, digits, '-', '_' and dots";
		return 0;
	}
	int wl = nx_dns_name_from_text(text, wire);
	if (wl <= 1) {
		*why = "empty label, label longer than 63 bytes or name longer than 255";
		return 0;
	}
	nx_dns_name_lower(wire, (size_t)wl);
	return (size_t)wl;
}

void nx_conf_free_strv(char **v, size_t n)
{
	if (!v) {
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i]) {
			nx_mem_free(NX_OWNER_config, v[i], strlen(v[i]) + 1);
		}
	}
	nx_mem_free(NX_OWNER_config, v, n * sizeof(*v));
}

#define ITEM_LABEL_MAX 320 /* "filter.sources[12]": path plus index */

int nx_conf_parse_items(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key, size_t size, nx_conf_item_cb one, size_t *n)
{
	size_t cnt;
	*n = 0;
	int rc = nx_conf_list_count(ld, k->path, val, key, k->min, k->max, true, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	void *all = nx_mem_calloc(NX_OWNER_config, cnt, size);
	if (!all) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	*NX_CONF_FIELD(ld->c, k, void *) = all;
	*NX_CONF_COUNT(ld->c, k) = cnt;
	*n = cnt;
	void *it = NULL;
	struct fy_node *item;
	char label[ITEM_LABEL_MAX];
	for (size_t i = 0; i < cnt && (item = fy_node_sequence_iterate(val, &it)); i++) {
		nx_conf_label(label, sizeof(label), "%s[%zu]", k->path, i);
		rc = one(ld, label, item, key, all, i);
		if (rc) {
			return rc;
		}
	}
	return 0;
}

/* ---- optional account name: "" or a user/group name (run_as.*) ---- */

#define NX_CONF_ACCOUNT_MAX 32 /* useradd's limit on Linux */

static int opt_account_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k,
			     struct fy_node *val, struct fy_node *key)
{
	char buf[NX_CONF_ACCOUNT_MAX + 2];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "a user or group name", false, buf,
				sizeof(buf));
	if (rc) {
		return rc;
	}
	/* Debian's adduser rule (NAME_REGEX), which also keeps a number from passing for a uid */
	bool ok = strlen(buf) <= NX_CONF_ACCOUNT_MAX;
	for (size_t i = 0; ok && buf[i]; i++) {
		char ch = buf[i];
		ok = (ch >= 'a' && ch <= 'z') || ch == '_' ||
		     (i > 0 && ((ch >= '0' && ch <= '9') || ch == '-' || ch == '.'));
	}
	if (!ok) {
		return nx_conf_fail(ld, val, key,
				    "%s: '%s' is not a user or group name (lower-case letters, "
				    "digits, '_', '-', '.', at most %d, not starting with a digit)",
				    k->path, buf, NX_CONF_ACCOUNT_MAX);
	}
	char **f = NX_CONF_FIELD(ld->c, k, char *);
	*f = dup_text(buf);
	return *f ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
}

const struct nx_conf_type nx_conf_t_opt_account = {
	.name = "string",
	.parse = opt_account_parse,
	.release = string_release,
};

/* ---- an optional address: null or "" leaves the struct nx_addr zeroed (len 0 = none) ---- */

static int opt_addr_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			  struct fy_node *key)
{
	struct nx_addr *out = NX_CONF_FIELD(ld->c, k, struct nx_addr);
	memset(out, 0, sizeof(*out));
	char buf[256];
	if (nx_conf_is_null(val)) {
		return 0;
	}
	int rc = nx_conf_scalar(ld, k->path, val, key, "an address (addr:port)", false, buf,
				sizeof(buf));
	if (rc || !buf[0]) {
		return rc;
	}
	return addr_one(ld, k->path, val, key, k->default_port, out);
}

const struct nx_conf_type nx_conf_t_opt_addr = {
	.name = "address (optional)",
	.parse = opt_addr_parse,
};

/*
 * Value types of the filter.* keys: blocklist sources, user allow/deny rules and the custom
 * block addresses. Group references of sources are recorded here and resolved in groups.c.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"
#include "filter/side.h"

#define URL_MAX 2048 /* bytes of a source URL; longer ones are not lists anyone publishes */

#define LABEL_MAX 320 /* bytes of a value label: "filter.sources[12].groups[3]" */

static const char *const formats[] = {"auto", "hosts", "domains", "adblock", "wildcard", NULL};

/* ---- a list of group names (sources, clients) ---- */

int nx_conf_group_names(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			struct fy_node *key, enum nx_conf_ref_kind kind, uint32_t from, char ***out,
			size_t *n)
{
	size_t cnt = 1;
	if (val) {
		int rc =
		    nx_conf_list_count(ld, label, val, key, 1, NX_CONF_MAX_GROUPS, false, &cnt);
		if (rc) {
			return rc;
		}
	}
	char **v = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*v));
	if (!v) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", label);
	}
	*out = v;
	*n = cnt;
	void *it = NULL;
	char buf[NX_CONF_NAME_MAX + 2], ilabel[LABEL_MAX];
	for (size_t j = 0; j < cnt; j++) {
		struct fy_node *item = val ? fy_node_sequence_iterate(val, &it) : NULL;
		nx_conf_label(ilabel, sizeof(ilabel), "%s[%zu]", label, j);
		if (item) {
			int rc = nx_conf_scalar(ld, ilabel, item, key, "a group name", false, buf,
						sizeof(buf));
			if (rc) {
				return rc;
			}
			if (!nx_conf_ident_ok(buf)) {
				return nx_conf_fail(ld, item, key, "%s: unknown group '%s'", ilabel,
						    buf);
			}
		} else {
			strcpy(buf, "default");
		}
		v[j] = nx_mem_strdup(NX_OWNER_config, buf);
		if (!v[j]) {
			return nx_conf_fail(ld, item, key, "%s: out of memory", ilabel);
		}
		int rc = nx_conf_add_ref(ld, kind, from, (uint32_t)j, buf, item);
		if (rc) {
			return rc;
		}
	}
	return 0;
}

/* ---- filter.sources ---- */

enum {
	S_NAME,
	S_URL,
	S_PATH,
	S_FORMAT,
	S_GROUPS,
	S_ENABLED,
	S_HOSTS_ANSWERS,
	S_SUBDOMAINS,
	S__COUNT
};
static const char *const source_fields[] = {
    "name", "url", "path", "format", "groups", "enabled", "hosts_answers", "subdomains", NULL};

static int source_url(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		      struct fy_node *key, char **out)
{
	char buf[URL_MAX + 1];
	int rc = nx_conf_scalar(ld, label, val, key, "a URL", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	size_t skip = !strncasecmp(buf, "https://", 8)	? 8
		      : !strncasecmp(buf, "http://", 7) ? 7
							: 0;
	if (!skip || !buf[skip]) {
		return nx_conf_fail(ld, val, key, "%s: '%s' is not an http:// or https:// URL",
				    label, buf);
	}
	for (const char *p = buf; *p; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			return nx_conf_fail(ld, val, key,
					    "%s: URL contains a space or control character", label);
		}
	}
	*out = nx_mem_strdup(NX_OWNER_config, buf);
	return *out ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", label);
}

/* A local path, made absolute against ld->base_dir. */
static int source_path(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		       struct fy_node *key, char **out)
{
	char buf[PATH_MAX];
	int rc = nx_conf_scalar(ld, label, val, key, "a file path", false, buf, sizeof(buf));
	if (rc) {
		return rc;
	}
	if (!buf[0]) {
		return nx_conf_fail(ld, val, key, "%s: must not be empty", label);
	}
	char full[PATH_MAX];
	if (buf[0] == '/') {
		strcpy(full, buf);
	} else {
		const char *base = ld->base_dir ? ld->base_dir : ".";
		bool root = !strcmp(base, "/");
		size_t need = strlen(base) + !root + strlen(buf) + 1;
		if (need > sizeof(full)) {
			return nx_conf_fail(ld, val, key, "%s: path longer than %d bytes", label,
					    PATH_MAX - 1);
		}
		nx_conf_label(full, sizeof(full), "%s%s%s", base, root ? "" : "/", buf);
	}
	*out = nx_mem_strdup(NX_OWNER_config, full);
	return *out ? 0 : nx_conf_fail(ld, val, key, "%s: out of memory", label);
}

/* Which of two key nodes comes later in the file (for "not both" errors). */
static struct fy_node *later(struct nx_conf_ld *ld, struct fy_node *a, struct fy_node *b)
{
	int la = 0, ca = 0, lb = 0, cb = 0;
	nx_conf_node_pos(ld, a, &la, &ca);
	nx_conf_node_pos(ld, b, &lb, &cb);
	return (lb > la || (lb == la && cb > ca)) ? b : a;
}

static int source_one(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
		      struct fy_node *key, void *all_, size_t i)
{
	struct nx_conf_source *all = all_;
	struct nx_conf_source *s = &all[i];
	struct fy_node *v[S__COUNT], *k[S__COUNT];
	s->enabled = true;
	if (nx_conf_is_null(item) || !fy_node_is_mapping(item)) {
		return nx_conf_fail(ld, item, key,
				    "%s: expected a mapping {name, url or path, ...}, "
				    "got %s",
				    label, nx_conf_node_kind(item));
	}
	int rc = nx_conf_fields(ld, label, item, key, source_fields, v, k);
	if (rc) {
		return rc;
	}
	char fl[LABEL_MAX];
	if (!v[S_NAME]) {
		return nx_conf_fail(ld, item, key, "%s: missing 'name'", label);
	}
	nx_conf_label(fl, sizeof(fl), "%s.name", label);
	char name[NX_CONF_NAME_MAX + 2];
	rc = nx_conf_scalar(ld, fl, v[S_NAME], k[S_NAME], "a name", false, name, sizeof(name));
	if (rc) {
		return rc;
	}
	if (!nx_conf_ident_ok(name)) {
		return nx_conf_fail(ld, v[S_NAME], k[S_NAME],
				    "%s: '%s' is not a valid name (1..%d of a-z, 0-9, '_', '-', "
				    "starting with a letter or digit)",
				    fl, name, NX_CONF_NAME_MAX);
	}
	for (size_t j = 0; j < i; j++) {
		if (!strcmp(all[j].name, name)) {
			return nx_conf_fail(
			    ld, v[S_NAME], k[S_NAME],
			    "%s: duplicate source '%s' (same as filter.sources[%zu])", fl, name, j);
		}
	}
	s->name = nx_mem_strdup(NX_OWNER_config, name);
	if (!s->name) {
		return nx_conf_fail(ld, v[S_NAME], k[S_NAME], "%s: out of memory", fl);
	}
	if (v[S_URL] && v[S_PATH]) {
		struct fy_node *at = later(ld, k[S_URL], k[S_PATH]);
		return nx_conf_fail(ld, at, NULL, "%s: give either url or path, not both", label);
	}
	if (!v[S_URL] && !v[S_PATH]) {
		return nx_conf_fail(ld, item, key, "%s: needs a url or a path", label);
	}
	if (v[S_URL]) {
		nx_conf_label(fl, sizeof(fl), "%s.url", label);
		rc = source_url(ld, fl, v[S_URL], k[S_URL], &s->url);
	} else {
		nx_conf_label(fl, sizeof(fl), "%s.path", label);
		rc = source_path(ld, fl, v[S_PATH], k[S_PATH], &s->path);
	}
	if (rc) {
		return rc;
	}
	nx_conf_label(fl, sizeof(fl), "%s.format", label);
	const char *fmt = "auto";
	char fbuf[32];
	if (v[S_FORMAT]) {
		rc = nx_conf_scalar(ld, fl, v[S_FORMAT], k[S_FORMAT], "a format", false, fbuf,
				    sizeof(fbuf));
		if (rc) {
			return rc;
		}
		fmt = NULL;
		for (const char *const *f = formats; *f; f++) {
			if (!strcmp(*f, fbuf)) {
				fmt = *f;
			}
		}
		if (!fmt) {
			return nx_conf_fail(ld, v[S_FORMAT], k[S_FORMAT],
					    "%s: '%s' is not one of auto, hosts, domains, adblock, "
					    "wildcard",
					    fl, fbuf);
		}
	}
	s->format = nx_mem_strdup(NX_OWNER_config, fmt);
	if (!s->format) {
		return nx_conf_fail(ld, item, key, "%s: out of memory", fl);
	}
	nx_conf_label(fl, sizeof(fl), "%s.groups", label);
	rc = nx_conf_group_names(ld, fl, v[S_GROUPS], k[S_GROUPS] ? k[S_GROUPS] : key,
				 NX_CONF_REF_SOURCE_GROUP, (uint32_t)i, &s->groups, &s->n_groups);
	if (rc) {
		return rc;
	}
	if (v[S_ENABLED]) {
		nx_conf_label(fl, sizeof(fl), "%s.enabled", label);
		rc = nx_conf_bool_node(ld, fl, v[S_ENABLED], k[S_ENABLED], &s->enabled);
		if (rc) {
			return rc;
		}
	}
	s->hosts_listed = s->path != NULL;
	if (v[S_HOSTS_ANSWERS]) {
		nx_conf_label(fl, sizeof(fl), "%s.hosts_answers", label);
		char hb[16] = "null"; /* YAML reads a bare null as "no value": the same answer */
		rc = nx_conf_is_null(v[S_HOSTS_ANSWERS])
			 ? 0
			 : nx_conf_scalar(ld, fl, v[S_HOSTS_ANSWERS], k[S_HOSTS_ANSWERS],
					  "null or listed", false, hb, sizeof(hb));
		if (rc) {
			return rc;
		}
		if (strcmp(hb, "null") != 0 && strcmp(hb, "listed") != 0) {
			return nx_conf_fail(ld, v[S_HOSTS_ANSWERS], k[S_HOSTS_ANSWERS],
					    "%s: '%s' is not one of null, listed", fl, hb);
		}
		s->hosts_listed = strcmp(hb, "listed") == 0;
		s->hosts_answers_set = true;
	}
	if (v[S_SUBDOMAINS]) {
		nx_conf_label(fl, sizeof(fl), "%s.subdomains", label);
		rc = nx_conf_bool_node(ld, fl, v[S_SUBDOMAINS], k[S_SUBDOMAINS], &s->subdomains);
	}
	return rc;
}

static int sources_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			 struct fy_node *key)
{
	size_t cnt;
	return nx_conf_parse_items(ld, k, val, key, sizeof(struct nx_conf_source), source_one, &cnt);
}

static void free_str(char *s)
{
	if (s) {
		nx_mem_free(NX_OWNER_config, s, strlen(s) + 1);
	}
}

static void sources_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_conf_source **f = NX_CONF_FIELD(c, k, struct nx_conf_source *);
	size_t *n = NX_CONF_COUNT(c, k);
	for (size_t i = 0; *f && i < *n; i++) {
		struct nx_conf_source *s = &(*f)[i];
		free_str(s->name);
		free_str(s->url);
		free_str(s->path);
		free_str(s->format);
		nx_conf_free_strv(s->groups, s->n_groups);
	}
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void list_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld entries", k->min, k->max);
}

const struct nx_conf_type nx_conf_t_sources = {
    .name = "list of sources",
    .parse = sources_parse,
    .release = sources_release,
    .range = list_range,
};

/* ---- filter.allow / filter.deny ---- */

bool nx_conf_rule_needs_side(const char *rule)
{
	return rule[0] == '/' || rule[0] == '|' || rule[0] == '@' || strchr(rule, '$') != NULL;
}

/* Normalise one rule into out (cap >= NX_CONF_SCALAR_MAX). 0, or NX_ECONFIG with *why. */
static int rule_norm(const char *in, char *out, size_t cap, char *why, size_t whycap)
{
	size_t n = strlen(in);
	if (strcmp(in, "//") == 0) {
		/* an empty regex (the side parser would read it as a URL pattern) */
		snprintf(why, whycap, "empty regex");
		return NX_ECONFIG;
	}
	if (nx_conf_rule_needs_side(in)) {
		/* The AdGuard rule language (modifiers, regexes, ||x^, @@): checked by the same
		 * parser that will compile it (filter/side.h), its message at the field. Kept as
		 * written: modifier values (client names) are case-sensitive. */
		if (!nx_filter_side_line_ok(in, n, why, whycap)) {
			/* PCRE2's compile reports a failed ledger allocation as its own error:
			 * say it as every other allocation failure of the loader does */
			if (strstr(why, "failed to allocate")) {
				snprintf(why, whycap, "out of memory");
			}
			return NX_ECONFIG;
		}
		nx_require(n < cap);
		memcpy(out, in, n + 1);
		return 0;
	}
	bool wild = n >= 2 && in[0] == '*' && in[1] == '.';
	const char *name = wild ? in + 2 : in;
	uint8_t wire[NX_DNS_NAME_MAX];
	const char *w = NULL;
	if (!nx_conf_host_name(name, wire, &w)) {
		snprintf(why, whycap, "not a name, *.name or /regex/ (%s)", w);
		return NX_ECONFIG;
	}
	char text[NX_DNS_TEXT_MAX];
	if (nx_dns_name_to_text(wire, nx_dns_name_len(wire, sizeof(wire)), text, sizeof(text)) <
	    0) {
		snprintf(why, whycap, "not a name");
		return NX_ECONFIG;
	}
	snprintf(out, cap, "%s%s", wild ? "*." : "", text);
	return 0;
}

static const char *const rule_fields[] = {"rule", "groups", NULL};

/* The scopes array of a rules key (filter.allow or filter.deny). */
static struct nx_conf_rule_scope **scopes_of(struct nx_conf *c, const struct nx_conf_key *k)
{
	return strcmp(k->path, "filter.allow") == 0 ? &c->allow_scopes : &c->deny_scopes;
}

static int rules_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
		       struct fy_node *key)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, k->path, val, key, k->min, k->max, true, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	char **v = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*v));
	if (!v) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	*NX_CONF_FIELD(ld->c, k, char **) = v;
	*NX_CONF_COUNT(ld->c, k) = cnt;
	struct nx_conf_rule_scope **scopes = scopes_of(ld->c, k);
	enum nx_conf_ref_kind kind = scopes == &ld->c->allow_scopes ? NX_CONF_REF_ALLOW_GROUP
								    : NX_CONF_REF_DENY_GROUP;
	void *it = NULL;
	struct fy_node *item;
	char label[LABEL_MAX], buf[NX_CONF_SCALAR_MAX], norm[NX_CONF_SCALAR_MAX + 8], why[300];
	for (size_t i = 0; i < cnt && (item = fy_node_sequence_iterate(val, &it)); i++) {
		nx_conf_label(label, sizeof(label), "%s[%zu]", k->path, i);
		struct fy_node *rule = item, *rkey = key, *fv[2] = {0}, *fk[2] = {0};
		if (fy_node_is_mapping(item)) {
			/* {rule: x, groups: [...]}: the rule for those groups' clients only */
			rc = nx_conf_fields(ld, label, item, key, rule_fields, fv, fk);
			if (rc) {
				return rc;
			}
			if (!fv[0]) {
				return nx_conf_fail(ld, item, key, "%s: missing 'rule'", label);
			}
			rule = fv[0];
			rkey = fk[0];
		}
		rc = nx_conf_scalar(ld, label, rule, rkey, "a name, *.name or /regex/", false, buf,
				    sizeof(buf));
		if (rc) {
			return rc;
		}
		if (rule_norm(buf, norm, sizeof(norm), why, sizeof(why))) {
			return nx_conf_fail(ld, rule, rkey, "%s: '%s': %s", label, buf, why);
		}
		v[i] = nx_mem_strdup(NX_OWNER_config, norm);
		if (!v[i]) {
			return nx_conf_fail(ld, item, key, "%s: out of memory", label);
		}
		if (!fv[1]) {
			continue;
		}
		if (!*scopes) {
			*scopes = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(**scopes));
			if (!*scopes) {
				return nx_conf_fail(ld, item, key, "%s: out of memory", label);
			}
		}
		char gl[LABEL_MAX];
		nx_conf_label(gl, sizeof(gl), "%s.groups", label);
		rc = nx_conf_group_names(ld, gl, fv[1], fk[1], kind, (uint32_t)i,
					 &(*scopes)[i].groups, &(*scopes)[i].n_groups);
		if (rc) {
			return rc;
		}
	}
	return 0;
}

static void rules_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	char ***f = NX_CONF_FIELD(c, k, char **);
	size_t *n = NX_CONF_COUNT(c, k);
	struct nx_conf_rule_scope **scopes = scopes_of(c, k);
	for (size_t i = 0; *scopes && i < *n; i++) {
		nx_conf_free_strv((*scopes)[i].groups, (*scopes)[i].n_groups);
	}
	if (*scopes) {
		nx_mem_free(NX_OWNER_config, *scopes, *n * sizeof(**scopes));
	}
	*scopes = NULL;
	nx_conf_free_strv(*f, *n);
	*f = NULL;
	*n = 0;
}

const struct nx_conf_type nx_conf_t_rules = {
    .name = "list of rules",
    .parse = rules_parse,
    .release = rules_release,
    .range = list_range,
};

/* ---- filter.block_addresses: at most one IPv4 and one IPv6 address ---- */

static int block_addrs_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k,
			     struct fy_node *val, struct fy_node *key)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, k->path, val, key, k->min, k->max, true, &cnt);
	if (rc) {
		return rc;
	}
	struct nx_conf *c = ld->c;
	void *it = NULL;
	struct fy_node *item;
	char label[LABEL_MAX], buf[INET6_ADDRSTRLEN + 1];
	for (size_t i = 0; i < cnt && (item = fy_node_sequence_iterate(val, &it)); i++) {
		nx_conf_label(label, sizeof(label), "%s[%zu]", k->path, i);
		rc = nx_conf_scalar(ld, label, item, key, "an IP address", false, buf, sizeof(buf));
		if (rc) {
			return rc;
		}
		uint8_t a[16];
		if (inet_pton(AF_INET, buf, a) == 1) {
			if (c->has_block_v4) {
				return nx_conf_fail(
				    ld, item, key, "%s: only one IPv4 address may be given", label);
			}
			memcpy(c->block_v4, a, 4);
			c->has_block_v4 = true;
		} else if (inet_pton(AF_INET6, buf, a) == 1) {
			if (c->has_block_v6) {
				return nx_conf_fail(
				    ld, item, key, "%s: only one IPv6 address may be given", label);
			}
			memcpy(c->block_v6, a, 16);
			c->has_block_v6 = true;
		} else {
			return nx_conf_fail(ld, item, key,
					    "%s: '%s' is not an IP address (no port, no name)",
					    label, buf);
		}
	}
	return 0;
}

const struct nx_conf_type nx_conf_t_block_addrs = {
    .name = "list of IP addresses",
    .parse = block_addrs_parse,
    .range = list_range,
};

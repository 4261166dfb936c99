/*
 * groups and clients: their value types, the resolution of names between sources, groups and
 * clients into bit masks (after every key has a value), and the per-query client policy.
 */
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"

#define LABEL_MAX 320 /* bytes of a value label */

static void free_str(char *s)
{
	if (s) {
		nx_mem_free(NX_OWNER_config, s, strlen(s) + 1);
	}
}

/* ---- groups: mapping name -> {sources, filtering}; [0] is "default" ---- */

enum { G_SOURCES, G_FILTERING, G__COUNT };
static const char *const group_fields[] = {"sources", "filtering", NULL};

static int group_sources(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
			 struct fy_node *key, uint32_t g)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, label, val, key, 0, NX_CONF_MAX_SOURCES, true, &cnt);
	if (rc) {
		return rc;
	}
	void *it = NULL;
	struct fy_node *item;
	char buf[NX_CONF_NAME_MAX + 2], ilabel[LABEL_MAX];
	for (size_t j = 0; j < cnt && (item = fy_node_sequence_iterate(val, &it)); j++) {
		nx_conf_label(ilabel, sizeof(ilabel), "%s[%zu]", label, j);
		rc =
		    nx_conf_scalar(ld, ilabel, item, key, "a source name", false, buf, sizeof(buf));
		if (rc) {
			return rc;
		}
		if (!nx_conf_ident_ok(buf)) {
			return nx_conf_fail(ld, item, key, "%s: unknown source '%s'", ilabel, buf);
		}
		rc = nx_conf_add_ref(ld, NX_CONF_REF_GROUP_SOURCE, g, (uint32_t)j, buf, item);
		if (rc) {
			return rc;
		}
	}
	return 0;
}

static int groups_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			struct fy_node *key)
{
	bool null = nx_conf_is_null(val);
	if (!null && !fy_node_is_mapping(val)) {
		return nx_conf_fail(ld, val, key,
				    "%s: expected a mapping of group: {sources, filtering}, got %s",
				    k->path, nx_conf_node_kind(val));
	}
	int rc = null ? 0 : nx_conf_check_dups(ld, "groups.", val);
	if (rc) {
		return rc;
	}
	size_t cnt = null ? 0 : (size_t)fy_node_mapping_item_count(val);
	bool has_default = !null && fy_node_mapping_lookup_by_string(val, "default", 7) != NULL;
	size_t n = cnt + !has_default;
	if ((long long)n > k->max) {
		return nx_conf_fail(ld, val, key,
				    "%s: at most %lld groups (\"default\" included), "
				    "got %zu",
				    k->path, k->max, n);
	}
	struct nx_conf_group *g = nx_mem_calloc(NX_OWNER_config, n, sizeof(*g));
	if (!g) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	*NX_CONF_FIELD(ld->c, k, struct nx_conf_group *) = g;
	*NX_CONF_COUNT(ld->c, k) = n;
	g[0].name = nx_mem_strdup(NX_OWNER_config, "default");
	if (!g[0].name) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", k->path);
	}
	g[0].filtering = true;
	void *it = NULL;
	struct fy_node_pair *p;
	size_t next = 1;
	char name[NX_CONF_NAME_MAX + 2], label[LABEL_MAX];
	while (!null && (p = fy_node_mapping_iterate(val, &it))) {
		struct fy_node *gk = fy_node_pair_key(p), *gv = fy_node_pair_value(p);
		rc = nx_conf_scalar(ld, k->path, gk, gk, "a group name", false, name, sizeof(name));
		if (rc) {
			return rc;
		}
		if (!nx_conf_ident_ok(name)) {
			return nx_conf_fail(
			    ld, gk, key,
			    "%s: '%s' is not a valid group name (1..%d of a-z, 0-9, "
			    "'_', '-', starting with a letter or digit)",
			    k->path, name, NX_CONF_NAME_MAX);
		}
		size_t idx = 0;
		if (strcmp(name, "default")) {
			idx = next++;
			g[idx].name = nx_mem_strdup(NX_OWNER_config, name);
			if (!g[idx].name) {
				return nx_conf_fail(ld, gk, key, "%s: out of memory", k->path);
			}
		}
		g[idx].filtering = true;
		nx_conf_label(label, sizeof(label), "%s.%s", k->path, name);
		struct fy_node *fv[G__COUNT], *fk[G__COUNT];
		rc = nx_conf_fields(ld, label, gv, gk, group_fields, fv, fk);
		if (rc) {
			return rc;
		}
		if (fv[G_SOURCES]) {
			nx_conf_label(label, sizeof(label), "%s.%s.sources", k->path, name);
			rc = group_sources(ld, label, fv[G_SOURCES], fk[G_SOURCES], (uint32_t)idx);
			if (rc) {
				return rc;
			}
		}
		if (fv[G_FILTERING]) {
			nx_conf_label(label, sizeof(label), "%s.%s.filtering", k->path, name);
			rc = nx_conf_bool_node(ld, label, fv[G_FILTERING], fk[G_FILTERING],
					       &g[idx].filtering);
			if (rc) {
				return rc;
			}
		}
	}
	return 0;
}

static void groups_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_conf_group **f = NX_CONF_FIELD(c, k, struct nx_conf_group *);
	size_t *n = NX_CONF_COUNT(c, k);
	for (size_t i = 0; *f && i < *n; i++) {
		free_str((*f)[i].name);
	}
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void groups_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "at most %lld groups, \"default\" included", k->max);
}

const struct nx_conf_type nx_conf_t_groups = {
    .name = "map: group name → {sources, filtering}",
    .parse = groups_parse,
    .release = groups_release,
    .range = groups_range,
};

/* ---- clients: list of {name, ids, groups, tags} ---- */

#define MAX_CLIENT_IDS 16 /* addresses/prefixes per client: a device has a few */

/* Tags per client: AdGuard Home's clients carry a few (device_phone, os_ios, user_child). */
#define MAX_CLIENT_TAGS 16

enum { C_NAME, C_IDS, C_GROUPS, C_TAGS, C__COUNT };
static const char *const client_fields[] = {"name", "ids", "groups", "tags", NULL};

/* A tag is 1..NX_CONF_TAG_MAX of a-z, 0-9, '_' (AdGuard Home's $ctag names: device_pc ...). */
static bool tag_ok(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > NX_CONF_TAG_MAX) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= '0' && t[i] <= '9') ||
		      t[i] == '_')) {
			return false;
		}
	}
	return true;
}

static int client_tags(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		       struct fy_node *key, struct nx_conf_client *cl)
{
	size_t cnt;
	int rc = nx_conf_list_count(ld, label, val, key, 0, MAX_CLIENT_TAGS, true, &cnt);
	if (rc || cnt == 0) {
		return rc;
	}
	cl->tags = nx_mem_calloc(NX_OWNER_config, cnt, sizeof(*cl->tags));
	if (!cl->tags) {
		return nx_conf_fail(ld, val, key, "%s: out of memory", label);
	}
	cl->n_tags = cnt;
	void *it = NULL;
	struct fy_node *item;
	char buf[NX_CONF_TAG_MAX + 2], il[LABEL_MAX];
	for (size_t j = 0; j < cnt && (item = fy_node_sequence_iterate(val, &it)); j++) {
		nx_conf_label(il, sizeof(il), "%s[%zu]", label, j);
		rc = nx_conf_scalar(ld, il, item, key, "a tag", false, buf, sizeof(buf));
		if (rc) {
			return rc;
		}
		if (!tag_ok(buf)) {
			return nx_conf_fail(ld, item, key,
					    "%s: '%s': a tag is 1..%d of a-z, 0-9 and '_'", il, buf,
					    NX_CONF_TAG_MAX);
		}
		for (size_t o = 0; o < j; o++) {
			if (!strcmp(cl->tags[o], buf)) {
				return nx_conf_fail(ld, item, key, "%s: duplicate tag '%s'", il,
						    buf);
			}
		}
		cl->tags[j] = nx_mem_strdup(NX_OWNER_config, buf);
		if (!cl->tags[j]) {
			return nx_conf_fail(ld, item, key, "%s: out of memory", il);
		}
	}
	return 0;
}

static bool same_cidr(const struct nx_cidr *a, const struct nx_cidr *b)
{
	return a->family == b->family && a->prefix == b->prefix &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}

#define CLIENT_ID_PREFIX "id:"

bool nx_conf_client_id_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	return n >= 1 && n <= NX_CONF_CLIENT_ID_MAX &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static bool is_client_id(struct fy_node *item)
{
	size_t len;
	const char *s = item && fy_node_is_scalar(item) && !fy_node_is_alias(item)
				? fy_node_get_scalar(item, &len)
				: NULL;
	return s && len >= 3 && !memcmp(s, CLIENT_ID_PREFIX, 3);
}

/* An `id:<client-id>` entry into cl->client_ids[*m], unique over every client so far. */
static int client_id_one(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
			 struct fy_node *key, struct nx_conf_client *all, size_t i, size_t *m,
			 const char *text)
{
	struct nx_conf_client *cl = &all[i];
	const char *id = text + 3;
	if (!nx_conf_client_id_ok(id)) {
		return nx_conf_fail(ld, item, key,
				    "%s: bad client id '%s': 1..%d of a-z, 0-9 and '-' after 'id:'",
				    label, id, NX_CONF_CLIENT_ID_MAX);
	}
	for (size_t a = 0; a <= i; a++) {
		size_t upto = a == i ? *m : all[a].n_client_ids;
		for (size_t b = 0; b < upto; b++) {
			if (!strcmp(all[a].client_ids[b], id)) {
				return nx_conf_fail(ld, item, key,
						    "%s: client id '%s' is already clients[%zu]'s",
						    label, id, a);
			}
		}
	}
	cl->client_ids[*m] = nx_mem_strdup(NX_OWNER_config, id);
	if (!cl->client_ids[*m]) {
		return nx_conf_fail(ld, item, key, "%s: out of memory", label);
	}
	++*m;
	return 0;
}

static int client_ids(struct nx_conf_ld *ld, const char *label, struct fy_node *val,
		      struct fy_node *key, struct nx_conf_client *all, size_t i)
{
	struct nx_conf_client *cl = &all[i];
	size_t cnt;
	int rc = nx_conf_list_count(ld, label, val, key, 1, MAX_CLIENT_IDS, false, &cnt);
	if (rc) {
		return rc;
	}
	/* Both arrays get their exact size up front, so release frees what was allocated. */
	size_t n_named = 0;
	void *it = NULL;
	struct fy_node *item;
	while ((item = fy_node_sequence_iterate(val, &it))) {
		n_named += is_client_id(item);
	}
	if (cnt > n_named) {
		cl->ids = nx_mem_calloc(NX_OWNER_config, cnt - n_named, sizeof(*cl->ids));
		if (!cl->ids) {
			return nx_conf_fail(ld, val, key, "%s: out of memory", label);
		}
		cl->n_ids = cnt - n_named;
	}
	if (n_named) {
		cl->client_ids = nx_mem_calloc(NX_OWNER_config, n_named, sizeof(*cl->client_ids));
		if (!cl->client_ids) {
			return nx_conf_fail(ld, val, key, "%s: out of memory", label);
		}
		cl->n_client_ids = n_named;
	}
	it = NULL;
	char buf[128], ilabel[LABEL_MAX];
	size_t n_cidr = 0, n_id = 0;
	for (size_t j = 0; j < cnt && (item = fy_node_sequence_iterate(val, &it)); j++) {
		nx_conf_label(ilabel, sizeof(ilabel), "%s[%zu]", label, j);
		rc = nx_conf_scalar(ld, ilabel, item, key,
				    "an address, address/prefix or id:<client-id>", false, buf,
				    sizeof(buf));
		if (rc) {
			return rc;
		}
		if (is_client_id(item)) {
			rc = client_id_one(ld, ilabel, item, key, all, i, &n_id, buf);
			if (rc) {
				return rc;
			}
			continue;
		}
		const char *why = "bad prefix";
		size_t c = n_cidr;
		if (nx_cidr_parse_why(buf, &cl->ids[c], &why)) {
			return nx_conf_fail(ld, item, key, "%s: bad address '%s': %s", ilabel, buf,
					    why);
		}
		for (size_t a = 0; a <= i; a++) {
			size_t upto = a == i ? c : all[a].n_ids;
			for (size_t b = 0; b < upto; b++) {
				if (same_cidr(&all[a].ids[b], &cl->ids[c])) {
					return nx_conf_fail(
					    ld, item, key,
					    "%s: '%s' is already clients[%zu].ids[%zu]", ilabel,
					    buf, a, b);
				}
			}
		}
		n_cidr++;
	}
	return 0;
}

static int client_one(struct nx_conf_ld *ld, const char *label, struct fy_node *item,
		      struct fy_node *key, void *all_, size_t i)
{
	struct nx_conf_client *all = all_;
	struct nx_conf_client *cl = &all[i];
	if (nx_conf_is_null(item) || !fy_node_is_mapping(item)) {
		return nx_conf_fail(ld, item, key,
				    "%s: expected a mapping {name, ids, groups, tags}, got %s",
				    label, nx_conf_node_kind(item));
	}
	struct fy_node *v[C__COUNT], *k[C__COUNT];
	int rc = nx_conf_fields(ld, label, item, key, client_fields, v, k);
	if (rc) {
		return rc;
	}
	char fl[LABEL_MAX], name[NX_CONF_NAME_MAX + 2];
	if (!v[C_NAME]) {
		return nx_conf_fail(ld, item, key, "%s: missing 'name'", label);
	}
	nx_conf_label(fl, sizeof(fl), "%s.name", label);
	rc = nx_conf_scalar(ld, fl, v[C_NAME], k[C_NAME], "a name", false, name, sizeof(name));
	if (rc) {
		return rc;
	}
	size_t len = strlen(name);
	bool ctrl = false;
	for (size_t j = 0; j < len; j++) {
		ctrl |= (unsigned char)name[j] < ' ' || name[j] == 0x7f;
	}
	if (len == 0 || len > NX_CONF_NAME_MAX || ctrl) {
		return nx_conf_fail(ld, v[C_NAME], k[C_NAME],
				    "%s: a name is 1..%d bytes without control characters", fl,
				    NX_CONF_NAME_MAX);
	}
	for (size_t j = 0; j < i; j++) {
		if (!strcmp(all[j].name, name)) {
			return nx_conf_fail(ld, v[C_NAME], k[C_NAME],
					    "%s: duplicate client '%s' (same as clients[%zu])", fl,
					    name, j);
		}
	}
	cl->name = nx_mem_strdup(NX_OWNER_config, name);
	if (!cl->name) {
		return nx_conf_fail(ld, v[C_NAME], k[C_NAME], "%s: out of memory", fl);
	}
	if (!v[C_IDS]) {
		return nx_conf_fail(ld, item, key, "%s: missing 'ids'", label);
	}
	nx_conf_label(fl, sizeof(fl), "%s.ids", label);
	rc = client_ids(ld, fl, v[C_IDS], k[C_IDS], all, i);
	if (rc) {
		return rc;
	}
	if (v[C_TAGS]) {
		nx_conf_label(fl, sizeof(fl), "%s.tags", label);
		rc = client_tags(ld, fl, v[C_TAGS], k[C_TAGS], cl);
		if (rc) {
			return rc;
		}
	}
	nx_conf_label(fl, sizeof(fl), "%s.groups", label);
	return nx_conf_group_names(ld, fl, v[C_GROUPS], k[C_GROUPS] ? k[C_GROUPS] : key,
				   NX_CONF_REF_CLIENT_GROUP, (uint32_t)i, &cl->groups,
				   &cl->n_groups);
}

static int clients_parse(struct nx_conf_ld *ld, const struct nx_conf_key *k, struct fy_node *val,
			 struct fy_node *key)
{
	size_t cnt;
	return nx_conf_parse_items(ld, k, val, key, sizeof(struct nx_conf_client), client_one, &cnt);
}

static void clients_release(const struct nx_conf_key *k, struct nx_conf *c)
{
	struct nx_conf_client **f = NX_CONF_FIELD(c, k, struct nx_conf_client *);
	size_t *n = NX_CONF_COUNT(c, k);
	for (size_t i = 0; *f && i < *n; i++) {
		struct nx_conf_client *cl = &(*f)[i];
		free_str(cl->name);
		nx_mem_free(NX_OWNER_config, cl->ids, cl->n_ids * sizeof(*cl->ids));
		nx_conf_free_strv(cl->client_ids, cl->n_client_ids);
		nx_conf_free_strv(cl->groups, cl->n_groups);
		nx_conf_free_strv(cl->tags, cl->n_tags);
	}
	nx_mem_free(NX_OWNER_config, *f, *n * sizeof(**f));
	*f = NULL;
	*n = 0;
}

static void clients_range(const struct nx_conf_key *k, char *buf, size_t cap)
{
	snprintf(buf, cap, "%lld..%lld clients, each with 1..%d ids", k->min, k->max,
		 MAX_CLIENT_IDS);
}

const struct nx_conf_type nx_conf_t_clients = {
    .name = "list of clients",
    .parse = clients_parse,
    .release = clients_release,
    .range = clients_range,
};

/* ---- resolution ---- */

/* Index of `name` in an array of structs whose first member is `char *name`; -1 if absent. */
#define FIND_NAME(arr, n, key, out)                                                                \
	do {                                                                                       \
		(out) = -1;                                                                        \
		for (size_t i_ = 0; i_ < (n); i_++) {                                              \
			if (!strcmp((arr)[i_].name, (key))) {                                      \
				(out) = (long)i_;                                                  \
				break;                                                             \
			}                                                                          \
		}                                                                                  \
	} while (0)

/* " (did you mean 'x'?)" for the closest name within a small edit distance, else "". */
static void hint(const char *name, const char *const *names, size_t n, char *out, size_t cap)
{
	size_t best = (size_t)-1, bi = 0;
	for (size_t i = 0; i < n; i++) {
		size_t d = nx_conf_edit_distance(name, names[i]);
		if (d < best) {
			best = d;
			bi = i;
		}
	}
	size_t len = strlen(name);
	if (n && best <= NX_MAX((size_t)1, len / 3) && best < len) {
		snprintf(out, cap, " (did you mean '%s'?)", names[bi]);
	} else {
		out[0] = '\0';
	}
}

static int unknown(struct nx_conf_ld *ld, const struct nx_conf_ref *r, bool is_source)
{
	const struct nx_conf *c = ld->c;
	const char *names[NX_CONF_MAX_GROUPS > NX_CONF_MAX_SOURCES ? NX_CONF_MAX_GROUPS
								   : NX_CONF_MAX_SOURCES];
	size_t n = 0;
	if (is_source) {
		for (size_t i = 0; i < c->n_sources && n < NX_ARRAY_LEN(names); i++) {
			names[n++] = c->sources[i].name;
		}
	} else {
		for (size_t i = 0; i < c->n_groups && n < NX_ARRAY_LEN(names); i++) {
			names[n++] = c->groups[i].name;
		}
	}
	char h[NX_CONF_NAME_MAX + 32], label[LABEL_MAX];
	hint(r->name, names, n, h, sizeof(h));
	switch (r->kind) {
	case NX_CONF_REF_GROUP_SOURCE:
		nx_conf_label(label, sizeof(label), "groups.%s.sources[%u]",
			      c->groups[r->from].name, r->j);
		break;
	case NX_CONF_REF_SOURCE_GROUP:
		nx_conf_label(label, sizeof(label), "filter.sources[%u].groups[%u]", r->from, r->j);
		break;
	case NX_CONF_REF_ALLOW_GROUP:
	case NX_CONF_REF_DENY_GROUP:
		nx_conf_label(label, sizeof(label), "filter.%s[%u].groups[%u]",
			      r->kind == NX_CONF_REF_ALLOW_GROUP ? "allow" : "deny", r->from, r->j);
		break;
	default:
		nx_conf_label(label, sizeof(label), "clients[%u].groups[%u]", r->from, r->j);
		break;
	}
	return nx_conf_fail_pos(ld, r->pos, "%s: unknown %s '%s'%s", label,
				is_source ? "source" : "group", r->name, h);
}

int nx_conf_groups_finish(struct nx_conf_ld *ld)
{
	struct nx_conf *c = ld->c;
	nx_require(c->n_groups >= 1 && !strcmp(c->groups[0].name, "default"));
	nx_require(c->n_sources <= NX_CONF_MAX_SOURCES);
	/* Pass 1, in file order: every name resolves; group masks. */
	for (size_t i = 0; i < ld->n_refs; i++) {
		struct nx_conf_ref *r = &ld->refs[i];
		long t;
		if (r->kind == NX_CONF_REF_GROUP_SOURCE) {
			FIND_NAME(c->sources, c->n_sources, r->name, t);
			if (t < 0) {
				return unknown(ld, r, true);
			}
			if (c->sources[t].enabled) {
				c->groups[r->from].sources_mask |= UINT64_C(1) << t;
			}
		} else {
			FIND_NAME(c->groups, c->n_groups, r->name, t);
			if (t < 0) {
				return unknown(ld, r, false);
			}
			if (r->kind == NX_CONF_REF_SOURCE_GROUP && c->sources[r->from].enabled) {
				c->groups[t].sources_mask |= UINT64_C(1) << r->from;
			}
		}
		r->target = (uint32_t)t;
	}
	/* Pass 2: clients take the union of their groups' (now complete) masks; user rules limited
	 * to groups take their groups' bits. */
	for (size_t i = 0; i < ld->n_refs; i++) {
		const struct nx_conf_ref *r = &ld->refs[i];
		if (r->kind == NX_CONF_REF_CLIENT_GROUP) {
			struct nx_conf_client *cl = &c->clients[r->from];
			cl->groups_mask_sources |= c->groups[r->target].sources_mask;
			cl->groups_mask |= UINT64_C(1) << r->target;
			cl->filtering |= c->groups[r->target].filtering;
		} else if (r->kind == NX_CONF_REF_ALLOW_GROUP) {
			c->allow_scopes[r->from].mask |= UINT64_C(1) << r->target;
		} else if (r->kind == NX_CONF_REF_DENY_GROUP) {
			c->deny_scopes[r->from].mask |= UINT64_C(1) << r->target;
		}
	}
	return 0;
}

int nx_conf_client_by_id(const struct nx_conf *c, const char *id)
{
	if (!id || !id[0]) {
		return -1;
	}
	for (size_t i = 0; i < c->n_clients; i++) {
		const struct nx_conf_client *cl = &c->clients[i];
		for (size_t j = 0; j < cl->n_client_ids; j++) {
			if (!strcmp(cl->client_ids[j], id)) {
				return (int)i;
			}
		}
	}
	return -1;
}

void nx_conf_client_policy(const struct nx_conf *c, const struct sockaddr *sa, uint64_t *eligible,
			   bool *filtering, int *client_idx)
{
	nx_conf_client_policy_id(c, sa, NULL, eligible, filtering, client_idx);
}

void nx_conf_client_policy_id(const struct nx_conf *c, const struct sockaddr *sa,
			      const char *client_id, uint64_t *eligible, bool *filtering,
			      int *client_idx)
{
	int family;
	const uint8_t *a;
	long best = nx_conf_client_by_id(c, client_id);
	int best_prefix = -1;
	if (best < 0 && nx_conf_client_bytes(sa, &family, &a)) {
		for (size_t i = 0; i < c->n_clients; i++) {
			const struct nx_conf_client *cl = &c->clients[i];
			for (size_t j = 0; j < cl->n_ids; j++) {
				if (cl->ids[j].prefix > best_prefix &&
				    nx_conf_prefix_match(&cl->ids[j], family, a)) {
					best = (long)i;
					best_prefix = cl->ids[j].prefix;
				}
			}
		}
	}
	uint64_t mask = 0;
	bool filt = true;
	if (best >= 0) {
		mask = c->clients[best].groups_mask_sources;
		filt = c->clients[best].filtering;
	} else if (c->n_groups > 0) {
		mask = c->groups[0].sources_mask;
		filt = c->groups[0].filtering;
	}
	if (eligible) {
		*eligible = mask;
	}
	if (filtering) {
		*filtering = filt;
	}
	if (client_idx) {
		*client_idx = (int)best;
	}
}

uint64_t nx_conf_rule_groups(const struct nx_conf *c, int list, size_t i)
{
	const struct nx_conf_rule_scope *s = list == 0 ? c->allow_scopes : c->deny_scopes;
	size_t n = list == 0 ? c->n_allow_rules : c->n_deny_rules;
	return s && i < n ? s[i].mask : 0;
}

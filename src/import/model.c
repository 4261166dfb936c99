/*
 * The import model: an arena, the lists the readers fill, the report, the YAML writer, and
 * the per-item check through the real loader.
 */
#include "import/impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"

/* ---- arena -------------------------------------------------------------------------------- */

struct nx_import *nx_import_new(const char *what, const char *origin)
{
	struct nx_import *imp = nx_mem_calloc(NX_OWNER_import, 1, sizeof(*imp));
	if (!imp) {
		return NULL;
	}
	imp->what = what;
	imp->zones_tail = &imp->zones;
	imp->sources_tail = &imp->sources;
	imp->groups_tail = &imp->groups;
	imp->clients_tail = &imp->clients;
	imp->rules_tail = &imp->rules;
	imp->records_tail = &imp->records;
	imp->lines_tail = &imp->lines;
	imp->origin = nx_import_strdup(imp, origin);
	if (imp->oom) {
		nx_import_free(imp);
		return NULL;
	}
	return imp;
}

void nx_import_free(struct nx_import *imp)
{
	if (!imp) {
		return;
	}
	for (struct nx_import_chunk *c = imp->chunks, *next; c; c = next) {
		next = c->next;
		nx_mem_free(NX_OWNER_import, c, sizeof(*c) + c->cap);
	}
	nx_mem_free(NX_OWNER_import, imp, sizeof(*imp));
}

void *nx_import_alloc(struct nx_import *imp, size_t n)
{
	n = (n + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
	struct nx_import_chunk *c = imp->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > NX_IMPORT_CHUNK ? n : NX_IMPORT_CHUNK;
		c = nx_mem_alloc(NX_OWNER_import, sizeof(*c) + cap);
		if (!c) {
			imp->oom = true;
			return NULL;
		}
		c->cap = cap;
		c->used = 0;
		c->next = imp->chunks;
		imp->chunks = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

const char *nx_import_strndup(struct nx_import *imp, const char *s, size_t n)
{
	char *d = nx_import_alloc(imp, n + 1);
	if (!d) {
		return "";
	}
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

const char *nx_import_strdup(struct nx_import *imp, const char *s)
{
	return nx_import_strndup(imp, s, strlen(s));
}

void nx_import_strv_push(struct nx_import *imp, struct nx_import_strv *v, const char *s)
{
	size_t n = strlen(s);
	struct nx_import_str *e = nx_import_alloc(imp, sizeof(*e) + n + 1);
	if (!e) {
		return;
	}
	memcpy(e->s, s, n + 1);
	if (!v->tail) {
		v->tail = &v->head;
	}
	*v->tail = e;
	v->tail = &e->next;
	v->n++;
}

bool nx_import_strv_has(const struct nx_import_strv *v, const char *s)
{
	for (const struct nx_import_str *e = v->head; e; e = e->next) {
		if (!strcmp(e->s, s)) {
			return true;
		}
	}
	return false;
}

/* ---- report ------------------------------------------------------------------------------- */

void nx_import_report(struct nx_import *imp, enum nx_import_verdict v, const char *fmt, ...)
{
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	struct nx_import_line *l = n >= 0 ? nx_import_alloc(imp, sizeof(*l) + (size_t)n + 1) : NULL;
	if (l) {
		vsnprintf(l->text, (size_t)n + 1, fmt, ap2);
		/* one item, one line: a newline inside the original's text would split it */
		for (char *p = l->text; *p; p++) {
			if (*p == '\n' || *p == '\r') {
				*p = ' ';
			}
		}
		l->v = v;
		*imp->lines_tail = l;
		imp->lines_tail = &l->next;
	}
	va_end(ap2);
}

static const char *verdict_text[] = {
    [NX_IMPORT_IMPORTED] = "imported",
    [NX_IMPORT_NOT_IMPORTED] = "not imported",
    [NX_IMPORT_NO_EQUIVALENT] = "no equivalent",
};

void nx_import_write_report(const struct nx_import *imp, FILE *fp)
{
	for (const struct nx_import_line *l = imp->lines; l; l = l->next) {
		fprintf(fp, "%s: %s\n", verdict_text[l->v], l->text);
	}
	fprintf(fp, "summary: %zu imported, %zu not imported, %zu without an nxdns equivalent\n",
		nx_import_count(imp, NX_IMPORT_IMPORTED),
		nx_import_count(imp, NX_IMPORT_NOT_IMPORTED),
		nx_import_count(imp, NX_IMPORT_NO_EQUIVALENT));
}

size_t nx_import_count(const struct nx_import *imp, enum nx_import_verdict v)
{
	size_t n = 0;
	for (const struct nx_import_line *l = imp->lines; l; l = l->next) {
		n += l->v == v;
	}
	return n;
}

/* ---- names -------------------------------------------------------------------------------- */

bool nx_import_source_taken(const struct nx_import *imp, const char *name)
{
	for (const struct nx_import_source *s = imp->sources; s; s = s->next) {
		if (!strcmp(s->name, name)) {
			return true;
		}
	}
	return false;
}

bool nx_import_client_taken(const struct nx_import *imp, const char *name)
{
	for (const struct nx_import_client *c = imp->clients; c; c = c->next) {
		if (!strcmp(c->name, name)) {
			return true;
		}
	}
	return false;
}

bool nx_import_has_group(const struct nx_import *imp, const char *name)
{
	if (!strcmp(name, "default")) {
		return true;
	}
	for (const struct nx_import_group *g = imp->groups; g; g = g->next) {
		if (!strcmp(g->name, name)) {
			return true;
		}
	}
	return false;
}

static bool group_taken(const struct nx_import *imp, const char *name)
{
	return nx_import_has_group(imp, name);
}

const char *nx_import_name(struct nx_import *imp, const char *text, const char *fallback,
			   bool (*taken)(const struct nx_import *, const char *))
{
	char base[NX_CONF_NAME_MAX + 1];
	size_t n = 0;
	bool dash = false;
	for (const char *p = text ? text : ""; *p && n < NX_CONF_NAME_MAX - 4; p++) {
		char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
			base[n++] = c;
			dash = false;
		} else if (n && !dash) {
			base[n++] = '-'; /* a run of anything else is one dash */
			dash = true;
		}
	}
	while (n && (base[n - 1] == '-' || base[n - 1] == '_')) {
		n--;
	}
	size_t skip = 0;
	while (skip < n && base[skip] == '_') {
		skip++;
	}
	if (n - skip == 0) {
		snprintf(base, sizeof(base), "%s", fallback);
		n = strlen(base);
		skip = 0;
	}
	base[n] = '\0';
	char name[NX_CONF_NAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", base + skip);
	taken = taken ? taken : group_taken;
	for (unsigned i = 2; taken(imp, name); i++) {
		snprintf(name, sizeof(name), "%s-%u", base + skip, i);
	}
	return nx_import_strdup(imp, name);
}

/* ---- YAML --------------------------------------------------------------------------------- */

/* A double-quoted scalar: every string goes out quoted, so "null", "yes" or "08" stay text. */
static void q(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			fprintf(fp, "\\%c", *p);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(fp, "\\x%02x", *p);
		} else {
			fputc(*p, fp);
		}
	}
	fputc('"', fp);
}

static void flow_list(FILE *fp, const struct nx_import_strv *v)
{
	fputc('[', fp);
	for (const struct nx_import_str *e = v->head; e; e = e->next) {
		q(fp, e->s);
		if (e->next) {
			fputs(", ", fp);
		}
	}
	fputc(']', fp);
}

static void emit_groups(FILE *fp, const struct nx_import *imp)
{
	if (!imp->groups) {
		return;
	}
	fputs("groups:\n", fp);
	for (const struct nx_import_group *g = imp->groups; g; g = g->next) {
		fputs("  ", fp);
		q(fp, g->name);
		fprintf(fp, ": {filtering: %s}\n", g->filtering ? "true" : "false");
	}
}

static void emit_source(FILE *fp, const struct nx_import_source *s)
{
	fputs("    - {name: ", fp);
	q(fp, s->name);
	fputs(s->url ? ", url: " : ", path: ", fp);
	q(fp, s->url ? s->url : s->path);
	if (!s->enabled) {
		fputs(", enabled: false", fp);
	}
	if (s->groups.n) {
		fputs(", groups: ", fp);
		flow_list(fp, &s->groups);
	}
	fputs("}\n", fp);
}

static void emit_client(FILE *fp, const struct nx_import_client *c)
{
	fputs("  - {name: ", fp);
	q(fp, c->name);
	fputs(", ids: ", fp);
	flow_list(fp, &c->ids);
	if (c->groups.n) {
		fputs(", groups: ", fp);
		flow_list(fp, &c->groups);
	}
	fputs("}\n", fp);
}

/* One filter.allow / filter.deny entry: the rule, or {rule, groups} for some groups only. */
static void emit_rule_entry(FILE *fp, const struct nx_import_rule *r)
{
	fputs("    - ", fp);
	if (r->groups.n) {
		fputs("{rule: ", fp);
		q(fp, r->rule);
		fputs(", groups: ", fp);
		flow_list(fp, &r->groups);
		fputc('}', fp);
	} else {
		q(fp, r->rule);
	}
	fputc('\n', fp);
}

static void emit_record(FILE *fp, const struct nx_import_record *r)
{
	fputs("  - {name: ", fp);
	q(fp, r->name);
	fputs(", type: ", fp);
	q(fp, r->type);
	fputs(", value: ", fp);
	q(fp, r->value);
	if (r->ttl) {
		fprintf(fp, ", ttl: %u", r->ttl);
	}
	fputs("}\n", fp);
}

static void emit_zone(FILE *fp, const struct nx_import_zone *z)
{
	fputs("    ", fp);
	q(fp, z->zone);
	fputs(": ", fp);
	flow_list(fp, &z->servers);
	fputc('\n', fp);
}

static void emit_all(FILE *fp, const struct nx_import *imp)
{
	if (imp->upstreams.n || imp->zones || imp->bootstrap.n) {
		fputs("upstream:\n", fp);
		if (imp->bootstrap.n) {
			fputs("  bootstrap: ", fp);
			flow_list(fp, &imp->bootstrap);
			fputc('\n', fp);
		}
		if (imp->upstreams.n) {
			fputs("  servers: ", fp);
			flow_list(fp, &imp->upstreams);
			fputc('\n', fp);
		}
		if (imp->zones) {
			fputs("  forward_zones:\n", fp);
			for (const struct nx_import_zone *z = imp->zones; z; z = z->next) {
				emit_zone(fp, z);
			}
		}
	}
	bool filter =
	    imp->filter_disabled || imp->block_mode || imp->sources || imp->allow.n || imp->deny.n;
	if (filter) {
		fputs("filter:\n", fp);
	}
	if (imp->filter_disabled) {
		fputs("  enabled: false\n", fp);
	}
	if (imp->block_mode) {
		fputs("  block_mode: ", fp);
		q(fp, imp->block_mode);
		fputc('\n', fp);
		if (imp->block_addrs.n) {
			fputs("  block_addresses: ", fp);
			flow_list(fp, &imp->block_addrs);
			fputc('\n', fp);
		}
	}
	if (imp->sources) {
		fputs("  sources:\n", fp);
		for (const struct nx_import_source *s = imp->sources; s; s = s->next) {
			emit_source(fp, s);
		}
	}
	const struct nx_import_strv *lists[2] = {&imp->allow, &imp->deny};
	for (int i = 0; i < 2; i++) {
		if (!lists[i]->n) {
			continue;
		}
		fprintf(fp, "  %s:\n", i ? "deny" : "allow");
		for (const struct nx_import_rule *r = imp->rules; r; r = r->next) {
			if (r->allow == !i) {
				emit_rule_entry(fp, r);
			}
		}
	}
	emit_groups(fp, imp);
	if (imp->clients) {
		fputs("clients:\n", fp);
		for (const struct nx_import_client *c = imp->clients; c; c = c->next) {
			emit_client(fp, c);
		}
	}
	if (imp->records) {
		fputs("local_records:\n", fp);
		for (const struct nx_import_record *r = imp->records; r; r = r->next) {
			emit_record(fp, r);
		}
	}
}

/* Load `text` with the real loader; 0, or NX_ECONFIG with the message (its "<import>:L:C: "
 * position dropped: it points into our fragment, not the original). */
static int check_text(char *text, size_t len, char *why, size_t whylen)
{
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX];
	int rc = nx_conf_load_string("<import>", text, len, &c, err, sizeof(err));
	nx_conf_free(c);
	if (rc && why) {
		const char *m = err;
		if (!strncmp(m, "<import>:", 9)) {
			m += 9;
			for (int colons = 0; *m && colons < 2; m++) {
				colons += *m == ':';
			}
			while (*m == ' ') {
				m++;
			}
		}
		/* "filter.deny[0]: " names the fragment's one item: the report names it better */
		const char *idx = strstr(m, "[0]: ");
		if (idx && idx - m < 48 && !memchr(m, ' ', (size_t)(idx - m))) {
			m = idx + 5;
		}
		snprintf(why, whylen, "%s", m);
	}
	return rc;
}

typedef void (*emit_fn)(FILE *fp, const struct nx_import *imp, const void *item);

/* Check one item in a fragment of its own (with the groups imported so far). */
static bool check_item(struct nx_import *imp, emit_fn emit, const void *item, const char *what)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	if (!fp) {
		imp->oom = true;
		return false;
	}
	emit_groups(fp, imp);
	emit(fp, imp, item);
	if (fclose(fp) != 0) {
		free(buf);
		imp->oom = true;
		return false;
	}
	char why[NX_CONF_ERR_MAX];
	int rc = check_text(buf, len, why, sizeof(why));
	free(buf);
	if (rc) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED, "%s: %s", what, why);
		return false;
	}
	return true;
}

static void emit_rule(FILE *fp, const struct nx_import *imp, const void *item)
{
	(void)imp;
	const struct nx_import_rule *r = item;
	fprintf(fp, "filter:\n  %s:\n", r->allow ? "allow" : "deny");
	emit_rule_entry(fp, r);
}

bool nx_import_add_rule_for(struct nx_import *imp, bool allow, const char *rule,
			    const struct nx_import_strv *groups, const char *what)
{
	struct nx_import_strv *v = allow ? &imp->allow : &imp->deny;
	if (nx_import_strv_has(v, rule)) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED, "%s: a duplicate of an earlier rule",
				 what);
		return false;
	}
	struct nx_import_rule *r = nx_import_alloc(imp, sizeof(*r));
	if (!r) {
		return false;
	}
	r->allow = allow;
	r->rule = nx_import_strdup(imp, rule);
	char gtext[512] = "";
	size_t off = 0;
	for (const struct nx_import_str *e = groups ? groups->head : NULL; e; e = e->next) {
		nx_import_strv_push(imp, &r->groups, e->s);
		if (off < sizeof(gtext)) {
			off += (size_t)snprintf(gtext + off, sizeof(gtext) - off, "%s\"%s\"",
						off ? ", " : "", e->s);
		}
	}
	if (imp->oom || !check_item(imp, emit_rule, r, what)) {
		return false;
	}
	nx_import_strv_push(imp, v, r->rule);
	*imp->rules_tail = r;
	imp->rules_tail = &r->next;
	if (r->groups.n) {
		nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> filter.%s \"%s\" for groups %s",
				 what, allow ? "allow" : "deny", rule, gtext);
	} else {
		nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> filter.%s \"%s\"", what,
				 allow ? "allow" : "deny", rule);
	}
	return true;
}

bool nx_import_add_rule(struct nx_import *imp, bool allow, const char *rule, const char *what)
{
	return nx_import_add_rule_for(imp, allow, rule, NULL, what);
}

/* An upstream named by host is resolved through the bootstrap servers or the plain servers
 * imported before it: both go in with it. */
static void emit_upstream(FILE *fp, const struct nx_import *imp, const void *item)
{
	fputs("upstream:\n  servers: [", fp);
	for (const struct nx_import_str *e = imp->upstreams.head; e; e = e->next) {
		q(fp, e->s);
		fputs(", ", fp);
	}
	q(fp, item);
	fputs("]\n", fp);
	if (imp->bootstrap.n) {
		fputs("  bootstrap: ", fp);
		flow_list(fp, &imp->bootstrap);
		fputc('\n', fp);
	}
}

static void emit_bootstrap(FILE *fp, const struct nx_import *imp, const void *item)
{
	(void)imp;
	fputs("upstream:\n  bootstrap: [", fp);
	q(fp, item);
	fputs("]\n", fp);
}

bool nx_import_add_bootstrap(struct nx_import *imp, const char *server, const char *what)
{
	if (nx_import_strv_has(&imp->bootstrap, server)) {
		return false;
	}
	if (!check_item(imp, emit_bootstrap, server, what)) {
		return false;
	}
	nx_import_strv_push(imp, &imp->bootstrap, server);
	nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> upstream.bootstrap \"%s\"", what, server);
	return true;
}

bool nx_import_add_upstream(struct nx_import *imp, const char *server, const char *what)
{
	if (nx_import_strv_has(&imp->upstreams, server)) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "%s: a duplicate of an earlier server", what);
		return false;
	}
	if (!check_item(imp, emit_upstream, server, what)) {
		return false;
	}
	nx_import_strv_push(imp, &imp->upstreams, server);
	nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> upstream.servers \"%s\"", what, server);
	return true;
}

struct zone_item {
	const char *zone, *server;
};

static void emit_zone_item(FILE *fp, const struct nx_import *imp, const void *item)
{
	const struct zone_item *z = item;
	fputs("upstream:\n", fp);
	if (imp->bootstrap.n) {
		fputs("  bootstrap: ", fp);
		flow_list(fp, &imp->bootstrap);
		fputc('\n', fp);
	}
	fputs("  forward_zones:\n    ", fp);
	q(fp, z->zone);
	fputs(": [", fp);
	q(fp, z->server);
	fputs("]\n", fp);
}

bool nx_import_add_zone_server(struct nx_import *imp, const char *zone, const char *server,
			       const char *what)
{
	struct zone_item it = {zone, server};
	if (!check_item(imp, emit_zone_item, &it, what)) {
		return false;
	}
	struct nx_import_zone *z = imp->zones;
	while (z && strcasecmp(z->zone, zone)) {
		z = z->next;
	}
	if (!z) {
		z = nx_import_alloc(imp, sizeof(*z));
		if (!z) {
			return false;
		}
		z->zone = nx_import_strdup(imp, zone);
		*imp->zones_tail = z;
		imp->zones_tail = &z->next;
	}
	if (nx_import_strv_has(&z->servers, server)) {
		return true; /* two originals naming the same pair: one entry */
	}
	nx_import_strv_push(imp, &z->servers, server);
	nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> upstream.forward_zones \"%s\": \"%s\"",
			 what, zone, server);
	return true;
}

static void emit_source_item(FILE *fp, const struct nx_import *imp, const void *item)
{
	(void)imp;
	fputs("filter:\n  sources:\n", fp);
	emit_source(fp, item);
}

bool nx_import_add_source(struct nx_import *imp, struct nx_import_source *s, const char *what)
{
	if (!check_item(imp, emit_source_item, s, what)) {
		return false;
	}
	*imp->sources_tail = s;
	imp->sources_tail = &s->next;
	nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> filter.sources \"%s\"%s%s", what, s->name,
			 s->enabled ? "" : " (disabled)",
			 s->path ? " (a local file: copy it to this machine, same path)" : "");
	return true;
}

static void emit_client_item(FILE *fp, const struct nx_import *imp, const void *item)
{
	(void)imp;
	fputs("clients:\n", fp);
	emit_client(fp, item);
}

bool nx_import_add_client(struct nx_import *imp, struct nx_import_client *c, const char *what)
{
	if (!c->ids.n) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "%s: none of its ids has an nxdns form", what);
		return false;
	}
	if (!check_item(imp, emit_client_item, c, what)) {
		return false;
	}
	*imp->clients_tail = c;
	imp->clients_tail = &c->next;
	nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> clients \"%s\" (%zu ids)", what, c->name,
			 c->ids.n);
	return true;
}

/* The new record with every record already imported under the same name: a CNAME beside
 * other types is refused by the loader here rather than by the final load. */
struct record_item {
	const struct nx_import_record *r;
};

static void emit_record_item(FILE *fp, const struct nx_import *imp, const void *item)
{
	const struct record_item *it = item;
	fputs("local_records:\n", fp);
	for (const struct nx_import_record *r = imp->records; r; r = r->next) {
		if (!strcasecmp(r->name, it->r->name)) {
			emit_record(fp, r);
		}
	}
	emit_record(fp, it->r);
}

bool nx_import_add_record(struct nx_import *imp, const char *name, const char *type,
			  const char *value, unsigned ttl, const char *what)
{
	for (const struct nx_import_record *r = imp->records; r; r = r->next) {
		if (!strcasecmp(r->name, name) && !strcmp(r->type, type) &&
		    !strcasecmp(r->value, value)) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: a duplicate of an earlier record", what);
			return false;
		}
	}
	struct nx_import_record *r = nx_import_alloc(imp, sizeof(*r));
	if (!r) {
		return false;
	}
	r->name = nx_import_strdup(imp, name);
	r->type = nx_import_strdup(imp, type);
	r->value = nx_import_strdup(imp, value);
	r->ttl = ttl;
	struct record_item it = {r};
	if (!check_item(imp, emit_record_item, &it, what)) {
		return false;
	}
	*imp->records_tail = r;
	imp->records_tail = &r->next;
	nx_import_report(imp, NX_IMPORT_IMPORTED, "%s -> local_records %s %s %s", what, name, type,
			 value);
	return true;
}

void nx_import_add_group(struct nx_import *imp, const char *name, bool filtering)
{
	struct nx_import_group *g = nx_import_alloc(imp, sizeof(*g));
	if (!g) {
		return;
	}
	g->name = nx_import_strdup(imp, name);
	g->filtering = filtering;
	*imp->groups_tail = g;
	imp->groups_tail = &g->next;
}

/* ---- the whole text ----------------------------------------------------------------------- */

int nx_import_write_config(const struct nx_import *imp, FILE *out, char *err, size_t errlen)
{
	if (imp->oom) {
		snprintf(err, errlen, "out of memory while importing");
		return -ENOMEM;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&buf, &len);
	if (!fp) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fprintf(fp, "# nxdns configuration imported from %s (", imp->what);
	for (const char *p = imp->origin; *p; p++) {
		fputc(*p == '\n' ? ' ' : *p, fp);
	}
	fputs(") by `nxdns import`.\n"
	      "# What was left out, and why, is in the import's report. Unset keys keep nxdns's\n"
	      "# defaults: see docs/configuration.md.\n",
	      fp);
	size_t header = (size_t)ftell(fp);
	emit_all(fp, imp);
	if ((size_t)ftell(fp) == header) {
		fputs("{}\n", fp); /* nothing imported: the defaults, said explicitly */
	}
	if (fclose(fp) != 0) {
		free(buf);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	char why[NX_CONF_ERR_MAX];
	int rc = check_text(buf, len, why, sizeof(why));
	if (rc) {
		snprintf(err, errlen, "the imported configuration does not load: %s", why);
		free(buf);
		return NX_ECONFIG;
	}
	rc = fwrite(buf, 1, len, out) == len ? 0 : -EIO;
	if (rc) {
		snprintf(err, errlen, "write: %s", strerror(EIO));
	}
	free(buf);
	return rc;
}

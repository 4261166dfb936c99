/*
 * nxdns import pihole TELEPORTER.zip
 *
 * The format, from Pi-hole FTL v6 (github.com/pi-hole/FTL, src/zip/teleporter.c):
 * - a zip written by miniz with members named by their absolute paths without the leading
 *   '/': etc/pihole/pihole.toml (the whole configuration), etc/pihole/gravity.db (an SQLite
 *   database made by `CREATE TABLE x AS SELECT * FROM disk.x` for the tables "group",
 *   adlist, adlist_by_group, domainlist, domainlist_by_group, client, client_by_group),
 *   optionally etc/pihole/dhcp.leases, etc/hosts and etc/pihole/pihole-FTL.db tables.
 * - gravity.db's columns (src/database/gravity-db.c and test/gravity.db.sql, schema 20):
 *   group(id, enabled, name, description) with id 0 "Default"; adlist(id, type 0 block /
 *   1 allow, address, enabled, comment); domainlist(id, type 0 exact allow, 1 exact deny,
 *   2 regex allow, 3 regex deny, domain, enabled, comment); client(id, ip, comment) where ip
 *   is an address, a CIDR range, a MAC address, a host name or ":interface"; the *_by_group
 *   tables link them to groups. An item linked to no group applies to nobody.
 * - pihole.toml keys (src/config/config.c): dns.upstreams ["ip[#port]"], dns.hosts
 *   ["IP NAME [NAME...]"], dns.cnameRecords ["cname[,cname...],target[,ttl]"], dns.revServers
 *   ["enabled,cidr,server[#port][,domain]"], dns.blocking.active, dns.blocking.mode (NULL,
 *   IP_NODATA_AAAA, IP, NX, NODATA), dhcp.active, dhcp.hosts.
 * Regex rules are POSIX ERE with FTL's own options after the first ';' (;querytype=, ;invert,
 * ;reply=: src/regex.c, docs.pi-hole.net/regex/pi-hole/), which have no nxdns form.
 */
#include "import/impl.h"
#include "import/backup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sqlite3.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"

/* Member size caps: a Teleporter gravity.db holds no gravity table (only the lists' settings),
 * a few hundred KiB with thousands of rules; pihole.toml is ~60 KiB with its comments. */
#define PIHOLE_DB_MAX (64u * 1024 * 1024)
#define PIHOLE_TOML_MAX (4u * 1024 * 1024)
#define PIHOLE_GROUPS_MAX 4096 /* rows of "group" read; more is not a household */

struct member {
	unsigned char *buf; /* owned (NX_OWNER_import) */
	size_t len, cap;
	bool present;
};

static int read_member(struct archive *a, struct member *m, size_t max, const char *name, char *err,
		       size_t errlen)
{
	m->cap = 64 * 1024;
	m->buf = nx_mem_alloc(NX_OWNER_import, m->cap);
	if (!m->buf) {
		return -ENOMEM;
	}
	for (;;) {
		if (m->len == m->cap) {
			if (m->cap >= max) {
				snprintf(err, errlen, "%s is larger than %zu MiB", name,
					 max / (1024 * 1024));
				return NX_ELIMIT;
			}
			size_t ncap = m->cap * 2 > max ? max : m->cap * 2;
			unsigned char *nb = nx_mem_realloc(NX_OWNER_import, m->buf, m->cap, ncap);
			if (!nb) {
				return -ENOMEM;
			}
			m->buf = nb;
			m->cap = ncap;
		}
		la_ssize_t r = archive_read_data(a, m->buf + m->len, m->cap - m->len);
		if (r < 0) {
			snprintf(err, errlen, "%s: %s", name, archive_error_string(a));
			return NX_ECORRUPT;
		}
		if (r == 0) {
			break;
		}
		m->len += (size_t)r;
	}
	m->present = true;
	return 0;
}

static void member_free(struct member *m)
{
	nx_mem_free(NX_OWNER_import, m->buf, m->cap);
	m->buf = NULL;
}

/* ---- groups ------------------------------------------------------------------------------- */

struct gmap {
	long long id;
	const char *name; /* nxdns name (arena) */
	const char *orig; /* Pi-hole's name (arena) */
	bool enabled;
};

struct ctx {
	struct nx_import *imp;
	sqlite3 *db;
	struct gmap *groups; /* in arena */
	size_t n_groups;
};

static const struct gmap *group_of(const struct ctx *x, long long id)
{
	for (size_t i = 0; i < x->n_groups; i++) {
		if (x->groups[i].id == id) {
			return &x->groups[i];
		}
	}
	return NULL;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? (const char *)t : "";
}

static int read_groups(struct ctx *x)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(x->db, "SELECT id, enabled, name FROM \"group\" ORDER BY id", -1,
			       &st, NULL) != SQLITE_OK) {
		return NX_ECORRUPT;
	}
	x->groups = nx_import_alloc(x->imp, PIHOLE_GROUPS_MAX * sizeof(*x->groups));
	if (!x->groups) {
		sqlite3_finalize(st);
		return -ENOMEM;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		if (x->n_groups == PIHOLE_GROUPS_MAX) {
			nx_import_report(x->imp, NX_IMPORT_NOT_IMPORTED,
					 "Pi-hole groups after the first %d", PIHOLE_GROUPS_MAX);
			break;
		}
		struct gmap *g = &x->groups[x->n_groups++];
		g->id = sqlite3_column_int64(st, 0);
		g->enabled = sqlite3_column_int(st, 1) != 0;
		g->orig = nx_import_strdup(x->imp, col_text(st, 2));
		if (g->id == 0) {
			/* Pi-hole's "Default" (id 0) holds every client not listed: nxdns's default
			 */
			g->name = "default";
			if (!g->enabled) {
				nx_import_report(
				    x->imp, NX_IMPORT_NO_EQUIVALENT,
				    "Pi-hole group \"%s\" is disabled: nxdns's default "
				    "group cannot be; its lists are left off it",
				    g->orig);
			}
			continue;
		}
		g->name = nx_import_name(x->imp, g->orig, "group", NULL);
		nx_import_add_group(x->imp, g->name, true);
		nx_import_report(
		    x->imp, NX_IMPORT_IMPORTED, "Pi-hole group \"%s\" (id %lld) -> groups \"%s\"%s",
		    g->orig, g->id, g->name,
		    g->enabled ? "" : " (disabled in Pi-hole: imported without lists)");
	}
	sqlite3_finalize(st);
	return 0;
}

/* Names of the enabled groups an item is linked to, and whether it is linked to any. */
static bool item_groups(struct ctx *x, const char *table, const char *col, long long id,
			struct nx_import_strv *out, char *orig, size_t origlen)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT group_id FROM %s WHERE %s = ? ORDER BY group_id", table,
		 col);
	sqlite3_stmt *st;
	bool any = false;
	size_t on = 0;
	orig[0] = '\0';
	if (sqlite3_prepare_v2(x->db, sql, -1, &st, NULL) != SQLITE_OK) {
		return false;
	}
	sqlite3_bind_int64(st, 1, id);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const struct gmap *g = group_of(x, sqlite3_column_int64(st, 0));
		if (!g) {
			continue; /* a link to a group that is gone (no foreign keys in the copy) */
		}
		any = true;
		int n = snprintf(orig + on, origlen - on, "%s\"%s\"", on ? ", " : "", g->orig);
		on = n > 0 && (size_t)n < origlen - on ? on + (size_t)n : on;
		if (g->enabled && !nx_import_strv_has(out, g->name)) {
			nx_import_strv_push(x->imp, out, g->name);
		}
	}
	sqlite3_finalize(st);
	return any;
}

/* ---- adlists ------------------------------------------------------------------------------ */

static const char *url_host(struct nx_import *imp, const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	return nx_import_strndup(imp, p, strcspn(p, "/:?#"));
}

static int read_adlists(struct ctx *x)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(x->db,
			       "SELECT id, type, address, enabled, comment FROM adlist ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK) {
		return NX_ECORRUPT;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(st, 0);
		int type = sqlite3_column_int(st, 1);
		const char *addr = col_text(st, 2);
		bool enabled = sqlite3_column_int(st, 3) != 0;
		const char *comment = col_text(st, 4);
		char what[640], orig[256];
		snprintf(what, sizeof(what), "Pi-hole %s list %.400s (adlist %lld)",
			 type == 1 ? "allow" : "block", addr, id);
		if (type == 1) {
			nx_import_report(x->imp, NX_IMPORT_NO_EQUIVALENT,
					 "%s: nxdns sources are blocklists; subscribed allowlists "
					 "have no equivalent (add its names to filter.allow)",
					 what);
			continue;
		}
		struct nx_import_source *s = nx_import_alloc(x->imp, sizeof(*s));
		if (!s) {
			break;
		}
		if (!strncasecmp(addr, "http://", 7) || !strncasecmp(addr, "https://", 8)) {
			s->url = nx_import_strdup(x->imp, addr);
		} else if (!strncasecmp(addr, "file://", 7)) {
			s->path = nx_import_strdup(x->imp, addr + 7);
		} else {
			nx_import_report(x->imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: not an http(s):// or file:// address", what);
			continue;
		}
		s->name = nx_import_name(x->imp, comment[0] ? comment : url_host(x->imp, addr),
					 "pihole-list", nx_import_source_taken);
		bool linked = item_groups(x, "adlist_by_group", "adlist_id", id, &s->groups, orig,
					  sizeof(orig));
		s->enabled = enabled;
		if (enabled && !s->groups.n) {
			/* Pi-hole applies it to nobody; nxdns would put it in default */
			s->enabled = false;
			size_t n = strlen(what);
			snprintf(what + n, sizeof(what) - n,
				 " [linked to %s in Pi-hole, so it blocks for nobody: imported "
				 "disabled]",
				 linked ? "disabled groups only" : "no group");
		}
		nx_import_add_source(x->imp, s, what);
	}
	sqlite3_finalize(st);
	return 0;
}

/* ---- domainlist --------------------------------------------------------------------------- */

static const char *const type_names[] = {"exact allow", "exact deny", "regex allow", "regex deny"};

static int read_domainlist(struct ctx *x)
{
	sqlite3_stmt *st;
	/* a client taken out of Default (FTL adds every new client to it) */
	bool all_in_default = true;
	if (sqlite3_prepare_v2(x->db,
			       "SELECT 1 FROM client WHERE id NOT IN (SELECT client_id FROM "
			       "client_by_group WHERE group_id = 0) LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK) {
		return NX_ECORRUPT;
	}
	all_in_default = sqlite3_step(st) != SQLITE_ROW;
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(x->db,
			       "SELECT id, type, domain, enabled FROM domainlist ORDER BY id", -1,
			       &st, NULL) != SQLITE_OK) {
		return NX_ECORRUPT;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(st, 0);
		int type = sqlite3_column_int(st, 1);
		const char *dom = col_text(st, 2);
		bool enabled = sqlite3_column_int(st, 3) != 0;
		char what[1400], orig[256];
		if (type < 0 || type > 3) {
			nx_import_report(
			    x->imp, NX_IMPORT_NOT_IMPORTED,
			    "Pi-hole domain \"%.400s\" (domainlist %lld): unknown type "
			    "%d",
			    dom, id, type);
			continue;
		}
		struct nx_import_strv gs = {0};
		bool linked = item_groups(x, "domainlist_by_group", "domainlist_id", id, &gs, orig,
					  sizeof(orig));
		snprintf(what, sizeof(what), "Pi-hole %s \"%.1000s\" (domainlist %lld%s%s)",
			 type_names[type], dom, id, orig[0] ? ", groups " : "", orig);
		if (!enabled) {
			nx_import_report(x->imp, NX_IMPORT_NOT_IMPORTED, "%s: disabled in Pi-hole",
					 what);
			continue;
		}
		if (!gs.n) {
			nx_import_report(x->imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: linked to %s, so Pi-hole applies it to nobody", what,
					 linked ? "disabled groups only" : "no group");
			continue;
		}
		/* Pi-hole's Default holds every client unless one was taken out of it: a rule of
		 * Default alone is then a rule for every client, else for default's clients. */
		bool everyone = gs.n == 1 && !strcmp(gs.head->s, "default") && all_in_default;
		bool allow = type == 0 || type == 2;
		if (type <= 1) {
			nx_import_add_rule_for(x->imp, allow, dom, everyone ? NULL : &gs, what);
			continue;
		}
		/* FTL reads everything after the first ';' as its options (src/regex.c) */
		const char *opt = strchr(dom, ';');
		if (opt) {
			nx_import_report(
			    x->imp, NX_IMPORT_NOT_IMPORTED,
			    "%s: Pi-hole's regex option \"%s\" has no nxdns equivalent", what, opt);
			continue;
		}
		size_t n = strlen(dom);
		char *rule = nx_import_alloc(x->imp, n + 3);
		if (!rule) {
			break;
		}
		rule[0] = '/';
		memcpy(rule + 1, dom, n);
		rule[n + 1] = '/';
		nx_import_add_rule_for(x->imp, allow, rule, everyone ? NULL : &gs, what);
	}
	sqlite3_finalize(st);
	return 0;
}

/* ---- clients ------------------------------------------------------------------------------ */

static bool is_mac(const char *s)
{
	if (strlen(s) != 17) {
		return false;
	}
	for (int i = 0; i < 17; i++) {
		char c = s[i];
		bool hex =
		    (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
		if (i % 3 == 2 ? (c != ':' && c != '-') : !hex) {
			return false;
		}
	}
	return true;
}

static int read_clients(struct ctx *x)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(x->db, "SELECT id, ip, comment FROM client ORDER BY id", -1, &st,
			       NULL) != SQLITE_OK) {
		return NX_ECORRUPT;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(st, 0);
		const char *ip = col_text(st, 1);
		const char *comment = col_text(st, 2);
		char what[600], orig[256];
		snprintf(what, sizeof(what), "Pi-hole client \"%.200s\" (client %lld%s%.200s)", ip,
			 id, comment[0] ? ", " : "", comment);
		struct nx_cidr cidr;
		if (is_mac(ip)) {
			nx_import_report(x->imp, NX_IMPORT_NO_EQUIVALENT,
					 "%s: nxdns sees clients by address or client id, not by "
					 "MAC address",
					 what);
			continue;
		}
		if (ip[0] == ':') {
			nx_import_report(x->imp, NX_IMPORT_NO_EQUIVALENT,
					 "%s: clients by network interface", what);
			continue;
		}
		if (nx_cidr_parse(ip, &cidr) != 0) {
			nx_import_report(x->imp, NX_IMPORT_NO_EQUIVALENT,
					 "%s: clients by host name (list its address instead)",
					 what);
			continue;
		}
		struct nx_import_client *c = nx_import_alloc(x->imp, sizeof(*c));
		if (!c) {
			break;
		}
		c->name = nx_import_name(x->imp, comment[0] ? comment : ip, "client",
					 nx_import_client_taken);
		nx_import_strv_push(x->imp, &c->ids, ip);
		item_groups(x, "client_by_group", "client_id", id, &c->groups, orig, sizeof(orig));
		if (c->groups.n == 1 && !strcmp(c->groups.head->s, "default")) {
			c->groups = (struct nx_import_strv){0}; /* the loader's default */
		}
		nx_import_add_client(x->imp, c, what);
	}
	sqlite3_finalize(st);
	return 0;
}

/* ---- pihole.toml -------------------------------------------------------------------------- */

/* "ip[#port]" (FTL's dnsmasq form) as an nxdns server: "ip", "ip:port", "[v6]:port". */
static void server_text(const char *in, char *out, size_t cap)
{
	char host[256];
	const char *hash = strrchr(in, '#');
	size_t hn = hash ? (size_t)(hash - in) : strlen(in);
	snprintf(host, sizeof(host), "%.*s", (int)hn, in);
	bool v6 = strchr(host, ':') != NULL;
	if (v6) {
		snprintf(out, cap, "[%s]:%s", host, hash ? hash + 1 : "53");
	} else if (hash) {
		snprintf(out, cap, "%s:%s", host, hash + 1);
	} else {
		snprintf(out, cap, "%s", host);
	}
}

static void toml_upstreams(struct nx_import *imp, const struct nx_toml_val *vals)
{
	const struct nx_toml_val *v = nx_toml_get(vals, "dns.upstreams");
	if (!v || !v->is_array) {
		return;
	}
	for (const struct nx_import_str *e = v->elems.head; e; e = e->next) {
		char what[400], srv[300];
		snprintf(what, sizeof(what), "Pi-hole upstream \"%.300s\" (dns.upstreams)", e->s);
		server_text(e->s, srv, sizeof(srv));
		nx_import_add_upstream(imp, srv, what);
	}
}

static void toml_hosts(struct nx_import *imp, const struct nx_toml_val *vals)
{
	const struct nx_toml_val *v = nx_toml_get(vals, "dns.hosts");
	if (!v || !v->is_array) {
		return;
	}
	for (const struct nx_import_str *e = v->elems.head; e; e = e->next) {
		char what[600], addr[64];
		snprintf(what, sizeof(what), "Pi-hole local record \"%.500s\" (dns.hosts)", e->s);
		const char *p = e->s + strspn(e->s, " \t");
		size_t an = strcspn(p, " \t");
		unsigned char bin[16];
		snprintf(addr, sizeof(addr), "%.*s", (int)(an < 63 ? an : 63), p);
		const char *type = inet_pton(AF_INET, addr, bin) == 1	 ? "A"
				   : inet_pton(AF_INET6, addr, bin) == 1 ? "AAAA"
									 : NULL;
		p += an;
		if (!type || !*(p + strspn(p, " \t"))) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: not \"ADDRESS NAME [NAME...]\"", what);
			continue;
		}
		while (*(p += strspn(p, " \t"))) {
			size_t nn = strcspn(p, " \t");
			const char *name = nx_import_strndup(imp, p, nn);
			nx_import_add_record(imp, name, type, addr, 0, what);
			p += nn;
		}
	}
}

static bool all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

static void toml_cnames(struct nx_import *imp, const struct nx_toml_val *vals, unsigned ttl_def)
{
	const struct nx_toml_val *v = nx_toml_get(vals, "dns.cnameRecords");
	if (!v || !v->is_array) {
		return;
	}
	for (const struct nx_import_str *e = v->elems.head; e; e = e->next) {
		char what[600];
		snprintf(what, sizeof(what), "Pi-hole CNAME \"%.500s\" (dns.cnameRecords)", e->s);
		const char *f[32];
		size_t nf = 0;
		for (const char *p = e->s; nf < 32;) {
			size_t n = strcspn(p, ",");
			f[nf++] = nx_import_strndup(imp, p, n);
			if (!p[n]) {
				break;
			}
			p += n + 1;
		}
		unsigned ttl = ttl_def;
		if (nf >= 3 && all_digits(f[nf - 1])) {
			ttl = (unsigned)strtoul(f[--nf], NULL, 10);
		}
		if (nf < 2) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: not \"cname,target[,ttl]\"", what);
			continue;
		}
		for (size_t i = 0; i + 1 < nf; i++) {
			nx_import_add_record(imp, f[i], "CNAME", f[nf - 1], ttl, what);
		}
	}
}

/* The in-addr.arpa / ip6.arpa zone of a prefix on a label boundary; false otherwise. */
static bool reverse_zone(const struct nx_cidr *c, const char *text, char *out, size_t cap)
{
	unsigned char b[16];
	char host[64];
	snprintf(host, sizeof(host), "%.*s", (int)strcspn(text, "/"), text);
	size_t n = 0;
	out[0] = '\0';
	if (inet_pton(AF_INET, host, b) == 1) {
		if (c->prefix % 8 || c->prefix == 0) {
			return false;
		}
		for (int i = c->prefix / 8 - 1; i >= 0; i--) {
			n += (size_t)snprintf(out + n, cap - n, "%u.", b[i]);
		}
		snprintf(out + n, cap - n, "in-addr.arpa");
		return true;
	}
	if (inet_pton(AF_INET6, host, b) == 1) {
		if (c->prefix % 4 || c->prefix == 0) {
			return false;
		}
		for (int i = c->prefix / 4 - 1; i >= 0; i--) {
			unsigned nib = i % 2 ? b[i / 2] & 0xf : b[i / 2] >> 4;
			n += (size_t)snprintf(out + n, cap - n, "%x.", nib);
		}
		snprintf(out + n, cap - n, "ip6.arpa");
		return true;
	}
	return false;
}

static void toml_revservers(struct nx_import *imp, const struct nx_toml_val *vals)
{
	const struct nx_toml_val *v = nx_toml_get(vals, "dns.revServers");
	if (!v || !v->is_array) {
		return;
	}
	for (const struct nx_import_str *e = v->elems.head; e; e = e->next) {
		char what[600], f[4][256] = {"", "", "", ""}, srv[300], zone[128];
		snprintf(what, sizeof(what),
			 "Pi-hole conditional forwarding \"%.500s\" "
			 "(dns.revServers)",
			 e->s);
		const char *p = e->s;
		int nf = 0;
		while (nf < 4) {
			size_t n = strcspn(p, ",");
			snprintf(f[nf++], sizeof(f[0]), "%.*s", (int)n, p);
			if (!p[n]) {
				break;
			}
			p += n + 1;
		}
		struct nx_cidr cidr;
		if (nf < 3 || (strcmp(f[0], "true") && strcmp(f[0], "false")) ||
		    nx_cidr_parse(f[1], &cidr)) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: not \"enabled,cidr,server[#port][,domain]\"", what);
			continue;
		}
		if (strcmp(f[0], "true")) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED, "%s: disabled in Pi-hole",
					 what);
			continue;
		}
		server_text(f[2], srv, sizeof(srv));
		if (f[3][0]) {
			nx_import_add_zone_server(imp, f[3], srv, what);
		}
		if (reverse_zone(&cidr, f[1], zone, sizeof(zone))) {
			nx_import_add_zone_server(imp, zone, srv, what);
		} else {
			nx_import_report(
			    imp, NX_IMPORT_NOT_IMPORTED,
			    "%s: reverse lookups for %s: nxdns forwards whole zones, and "
			    "this prefix does not end on a zone boundary (/8, /16, /24 "
			    "or a multiple of 4 for IPv6)",
			    what, f[1]);
		}
	}
}

static bool toml_true(const struct nx_toml_val *vals, const char *key)
{
	const struct nx_toml_val *v = nx_toml_get(vals, key);
	return v && !v->is_array && v->scalar && !strcmp(v->scalar, "true");
}

static void toml_blocking(struct nx_import *imp, const struct nx_toml_val *vals)
{
	const struct nx_toml_val *a = nx_toml_get(vals, "dns.blocking.active");
	if (a && a->scalar && !strcmp(a->scalar, "false")) {
		imp->filter_disabled = true;
		nx_import_report(imp, NX_IMPORT_IMPORTED,
				 "Pi-hole blocking switched off (dns.blocking.active = false) -> "
				 "filter.enabled false");
	}
	const struct nx_toml_val *m = nx_toml_get(vals, "dns.blocking.mode");
	if (!m || !m->scalar) {
		return;
	}
	if (!strcmp(m->scalar, "NULL")) {
		imp->block_mode = "null";
	} else if (!strcmp(m->scalar, "NX")) {
		imp->block_mode = "nxdomain";
	} else {
		nx_import_report(
		    imp, NX_IMPORT_NO_EQUIVALENT,
		    "Pi-hole blocking mode %s (dns.blocking.mode): nxdns answers null, "
		    "nxdomain, refused or custom addresses (filter.block_mode, "
		    "filter.block_addresses); nxdns's default (null) applies",
		    m->scalar);
		return;
	}
	nx_import_report(imp, NX_IMPORT_IMPORTED,
			 "Pi-hole blocking mode %s (dns.blocking.mode) -> filter.block_mode %s",
			 m->scalar, imp->block_mode);
}

static void toml_unsupported(struct nx_import *imp, const struct nx_toml_val *vals)
{
	static const struct {
		const char *key, *what;
	} flags[] = {
	    {"dhcp.active", "DHCP server"},
	    {"dns.dnssec", "DNSSEC validation"},
	    {"ntp.ipv4.active", "NTP server"},
	    {"ntp.ipv6.active", "NTP server (IPv6)"},
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (toml_true(vals, flags[i].key)) {
			nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT, "Pi-hole %s (%s = true)",
					 flags[i].what, flags[i].key);
		}
	}
	const struct nx_toml_val *h = nx_toml_get(vals, "dhcp.hosts");
	if (h && h->is_array && h->elems.n) {
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
				 "Pi-hole DHCP static leases (dhcp.hosts, %zu entries)",
				 h->elems.n);
	}
}

/* ---- the archive -------------------------------------------------------------------------- */

static int open_db(struct member *m, sqlite3 **db, char *err, size_t errlen)
{
	if (sqlite3_open_v2(":memory:", db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "sqlite: %s", *db ? sqlite3_errmsg(*db) : "out of memory");
		return -ENOMEM;
	}
	/* read-only over our buffer: SQLite neither frees nor grows it */
	if (sqlite3_deserialize(*db, "main", m->buf, (sqlite3_int64)m->len, (sqlite3_int64)m->len,
				SQLITE_DESERIALIZE_READONLY) != SQLITE_OK) {
		snprintf(err, errlen, "etc/pihole/gravity.db: %s", sqlite3_errmsg(*db));
		return NX_ECORRUPT;
	}
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(
	    *db, "SELECT count(*) FROM \"group\", adlist, domainlist, client", -1, &st, NULL);
	sqlite3_finalize(st);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "etc/pihole/gravity.db: not Pi-hole's gravity tables: %s",
			 sqlite3_errmsg(*db));
		return NX_ECORRUPT;
	}
	return 0;
}

/* Pi-hole v5's Teleporter wrote a tar.gz: say so rather than only "unrecognized". */
static const char *v5_hint(const char *path)
{
	unsigned char magic[2] = {0};
	FILE *fp = fopen(path, "rb");
	bool gz = fp && fread(magic, 1, 2, fp) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
	if (fp) {
		fclose(fp);
	}
	return gz ? " (a gzip file: a Pi-hole v5 Teleporter archive? nxdns reads v6's zip)" : "";
}

int nx_import_pihole(const char *zip_path, struct nx_import **out, char *err, size_t errlen)
{
	struct member toml = {0}, db = {0};
	bool leases = false;
	struct nx_import *imp = NULL;
	sqlite3 *sdb = NULL;
	int rc = 0;
	struct archive *a = archive_read_new();
	if (!a) {
		snprintf(err, errlen, "%s", nx_import_archive_error());
		return -ENOMEM;
	}
	archive_read_support_format_zip(a);
	if (archive_read_open_filename(a, zip_path, 64 * 1024) != ARCHIVE_OK) {
		/* an unreadable file is -errno; one libarchive cannot read is not an archive */
		rc = access(zip_path, R_OK) != 0 ? -errno : NX_EFORMAT;
		snprintf(err, errlen, "%s: %s%s", zip_path, archive_error_string(a),
			 v5_hint(zip_path));
		goto out;
	}
	for (;;) {
		struct archive_entry *ent;
		int r = archive_read_next_header(a, &ent);
		if (r == ARCHIVE_EOF) {
			break;
		}
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			snprintf(err, errlen, "%s: not a readable zip archive: %s%s", zip_path,
				 archive_error_string(a), v5_hint(zip_path));
			rc = NX_EFORMAT;
			goto out;
		}
		const char *name = archive_entry_pathname(ent);
		name = name ? name : "";
		struct member *m = !strcmp(name, "etc/pihole/pihole.toml")  ? &toml
				   : !strcmp(name, "etc/pihole/gravity.db") ? &db
									    : NULL;
		leases |= !strcmp(name, "etc/pihole/dhcp.leases");
		if (m && !m->present) {
			rc = read_member(a, m, m == &db ? PIHOLE_DB_MAX : PIHOLE_TOML_MAX, name,
					 err, errlen);
			if (rc) {
				if (rc == -ENOMEM) {
					snprintf(err, errlen, "out of memory");
				}
				goto out;
			}
		}
	}
	if (!toml.present && !db.present) {
		snprintf(err, errlen,
			 "%s: not a Pi-hole v6 Teleporter archive (neither etc/pihole/pihole.toml "
			 "nor etc/pihole/gravity.db in it)",
			 zip_path);
		rc = NX_EFORMAT;
		goto out;
	}
	imp = nx_import_new("Pi-hole Teleporter", zip_path);
	if (!imp) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	struct nx_toml_val *vals = NULL;
	if (toml.present) {
		char why[256];
		if (nx_toml_parse(imp, (const char *)toml.buf, toml.len, &vals, why, sizeof(why))) {
			snprintf(err, errlen, "etc/pihole/pihole.toml: %s", why);
			rc = NX_ECORRUPT;
			goto out;
		}
	} else {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "Pi-hole settings: the archive has no etc/pihole/pihole.toml");
	}
	/* upstreams first: groups must exist before the sources and clients that name them */
	toml_upstreams(imp, vals);
	toml_revservers(imp, vals);
	toml_blocking(imp, vals);
	if (db.present) {
		rc = open_db(&db, &sdb, err, errlen);
		if (rc) {
			goto out;
		}
		struct ctx x = {imp, sdb, NULL, 0};
		rc = read_groups(&x);
		rc = rc ? rc : read_adlists(&x);
		rc = rc ? rc : read_domainlist(&x);
		rc = rc ? rc : read_clients(&x);
		if (rc) {
			snprintf(err, errlen, "etc/pihole/gravity.db: %s",
				 rc == -ENOMEM ? "out of memory" : sqlite3_errmsg(sdb));
			goto out;
		}
	} else {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "Pi-hole lists, groups and clients: the archive has no "
				 "etc/pihole/gravity.db");
	}
	toml_hosts(imp, vals);
	toml_cnames(imp, vals, 0); /* FTL's local-ttl is not in the file: nxdns's default */
	toml_unsupported(imp, vals);
	if (leases) {
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
				 "Pi-hole DHCP leases (etc/pihole/dhcp.leases)");
	}
	if (imp->oom) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory");
	}
out:
	sqlite3_close(sdb);
	archive_read_free(a);
	member_free(&toml);
	member_free(&db);
	if (rc) {
		nx_import_free(imp);
		imp = NULL;
	}
	*out = imp;
	return rc;
}

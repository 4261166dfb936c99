/*
 * nxdns import adguardhome AdGuardHome.yaml
 *
 * The schema, from AdGuard Home (github.com/AdguardTeam/AdGuardHome): internal/home/config.go
 * (filters, whitelist_filters, user_rules, clients.persistent, dhcp, tls), internal/home/
 * clients.go (a persistent client: name, ids, tags, upstreams, use_global_settings,
 * filtering_enabled, parental_enabled, safebrowsing_enabled, safe_search,
 * use_global_blocked_services, blocked_services), internal/dnsforward/config.go
 * (dns.upstream_dns, dns.bootstrap_dns), internal/filtering/filtering.go (filtering.
 * blocking_mode: default, refused, nxdomain, null_ip, custom_ip, with blocking_ipv4/_ipv6;
 * protection_enabled, filtering_enabled, rewrites [{domain, answer, enabled}],
 * blocked_services). Older schemas kept blocking_mode, protection_enabled and rewrites under
 * dns:, so both places are read. An upstream line is "[/domain/.../]upstream ..." for
 * per-domain forwarding ("#" as the upstream: the default ones), "#..." a comment
 * (docs: github.com/AdguardTeam/AdGuardHome/wiki/Configuration#upstreams).
 */
#include "import/impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libfyaml.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"

#define AGH_YAML_MAX (16u * 1024 * 1024) /* bytes: the file with thousands of user rules */

static struct fy_node *at(struct fy_node *root, const char *path)
{
	return root ? fy_node_by_path(root, path, FY_NT, FYNWF_DONT_FOLLOW) : NULL;
}

/* A scalar's text in the arena, NULL when n is not a scalar. */
static const char *text(struct nx_import *imp, struct fy_node *n)
{
	if (!n || !fy_node_is_scalar(n)) {
		return NULL;
	}
	size_t len;
	const char *s = fy_node_get_scalar(n, &len);
	return s ? nx_import_strndup(imp, s, len) : NULL;
}

static int boolean(struct fy_node *n) /* 1, 0, or -1 when absent or not a boolean */
{
	if (!n || !fy_node_is_scalar(n)) {
		return -1;
	}
	size_t len;
	const char *s = fy_node_get_scalar(n, &len);
	if (len == 4 && !strncmp(s, "true", 4)) {
		return 1;
	}
	if (len == 5 && !strncmp(s, "false", 5)) {
		return 0;
	}
	return -1;
}

/* filtering.<key>, else the older dns.<key>. */
static struct fy_node *setting(struct fy_node *root, const char *key)
{
	char p[128];
	snprintf(p, sizeof(p), "/filtering/%s", key);
	struct fy_node *n = at(root, p);
	if (!n) {
		snprintf(p, sizeof(p), "/dns/%s", key);
		n = at(root, p);
	}
	return n;
}

/* ---- upstreams ---------------------------------------------------------------------------- */

/* An AdGuard upstream as an nxdns server, or NULL with *why (no nxdns form). */
static const char *server(struct nx_import *imp, const char *u, const char **why)
{
	static const char *const none[] = {"quic://", "h3://", "sdns://"};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		if (!strncasecmp(u, none[i], strlen(none[i]))) {
			*why = "DNS over QUIC, HTTP/3 and DNSCrypt upstreams have no nxdns "
			       "equivalent";
			return NULL;
		}
	}
	if (!strncasecmp(u, "udp://", 6)) {
		u += 6; /* plain DNS is nxdns's default form */
	}
	unsigned char b[16];
	if (inet_pton(AF_INET6, u, b) == 1) {
		char out[INET6_ADDRSTRLEN + 8];
		snprintf(out, sizeof(out), "[%.*s]:53", INET6_ADDRSTRLEN, u);
		return nx_import_strdup(imp, out);
	}
	return u;
}

static void upstream_line(struct nx_import *imp, const char *line, bool bootstrap)
{
	const char *p = line + strspn(line, " \t");
	if (!*p || *p == '#') {
		return; /* a comment line */
	}
	char what[600];
	snprintf(what, sizeof(what), "AdGuard Home %s \"%.500s\"",
		 bootstrap ? "bootstrap server" : "upstream", line);
	const char *domains = NULL;
	size_t dlen = 0;
	if (!bootstrap && p[0] == '[' && p[1] == '/') {
		const char *end = strstr(p, "/]");
		if (!end) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: no \"/]\" closes the domain list", what);
			return;
		}
		domains = p + 2;
		dlen = (size_t)(end - domains);
		p = end + 2;
	}
	char tok[512];
	bool any = false;
	while (*(p += strspn(p, " \t"))) {
		size_t n = strcspn(p, " \t");
		snprintf(tok, sizeof(tok), "%.*s", (int)n, p);
		p += n;
		any = true;
		if (domains && !strcmp(tok, "#")) {
			nx_import_report(
			    imp, NX_IMPORT_NO_EQUIVALENT,
			    "%s: \"#\" (these domains use the default upstreams) "
			    "exempts a subdomain from a forwarded zone; nxdns forwards "
			    "a zone with everything below it",
			    what);
			continue;
		}
		const char *why = NULL;
		const char *srv = server(imp, tok, &why);
		if (!srv) {
			nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT, "%s: %s", what, why);
			continue;
		}
		if (bootstrap) {
			nx_import_add_bootstrap(imp, srv, what);
		} else if (!domains) {
			nx_import_add_upstream(imp, srv, what);
		} else {
			for (const char *d = domains; d < domains + dlen;) {
				size_t m = strcspn(d, "/");
				m = d + m > domains + dlen ? (size_t)(domains + dlen - d) : m;
				if (m) {
					const char *zone = nx_import_strndup(imp, d, m);
					nx_import_add_zone_server(imp, zone, srv, what);
				}
				d += m + 1;
			}
		}
	}
	if (!any) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED, "%s: no upstream on the line", what);
	}
}

static void upstreams(struct nx_import *imp, struct fy_node *root)
{
	/* bootstrap first: the upstreams named by host are checked against it */
	const char *keys[2] = {"/dns/bootstrap_dns", "/dns/upstream_dns"};
	for (int k = 0; k < 2; k++) {
		struct fy_node *seq = at(root, keys[k]);
		void *it = NULL;
		struct fy_node *n;
		while (seq && fy_node_is_sequence(seq) &&
		       (n = fy_node_sequence_iterate(seq, &it))) {
			const char *s = text(imp, n);
			if (s) {
				upstream_line(imp, s, k == 0);
			}
		}
	}
	const char *file = text(imp, at(root, "/dns/upstream_dns_file"));
	if (file && *file) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "AdGuard Home upstream_dns_file \"%s\": its lines are not read; "
				 "add them to upstream.servers",
				 file);
	}
}

/* ---- blocking ----------------------------------------------------------------------------- */

static void blocking(struct nx_import *imp, struct fy_node *root)
{
	if (boolean(setting(root, "protection_enabled")) == 0) {
		imp->filter_disabled = true;
		nx_import_report(imp, NX_IMPORT_IMPORTED,
				 "AdGuard Home protection switched off (protection_enabled: false) "
				 "-> filter.enabled false");
	} else if (boolean(setting(root, "filtering_enabled")) == 0) {
		imp->filter_disabled = true;
		nx_import_report(
		    imp, NX_IMPORT_IMPORTED,
		    "AdGuard Home filtering switched off (filtering_enabled: false) -> "
		    "filter.enabled false");
	}
	const char *mode = text(imp, setting(root, "blocking_mode"));
	if (!mode) {
		return;
	}
	if (!strcmp(mode, "default") || !strcmp(mode, "null_ip")) {
		/* default: 0.0.0.0 / :: for adblock-style rules (the hosts-style rule's own
		 * address otherwise, which nxdns does not keep) */
		imp->block_mode = "null";
	} else if (!strcmp(mode, "nxdomain") || !strcmp(mode, "refused")) {
		imp->block_mode = mode;
	} else if (!strcmp(mode, "custom_ip")) {
		imp->block_mode = "custom";
		const char *keys[2] = {"blocking_ipv4", "blocking_ipv6"};
		for (int i = 0; i < 2; i++) {
			const char *a = text(imp, setting(root, keys[i]));
			if (a && *a) {
				nx_import_strv_push(imp, &imp->block_addrs, a);
			}
		}
	} else {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "AdGuard Home blocking_mode \"%s\": unknown mode", mode);
		return;
	}
	nx_import_report(imp, NX_IMPORT_IMPORTED,
			 "AdGuard Home blocking_mode \"%s\" -> filter.block_mode %s", mode,
			 imp->block_mode);
}

/* ---- lists and rules ---------------------------------------------------------------------- */

static void filters(struct nx_import *imp, struct fy_node *root)
{
	struct fy_node *seq = at(root, "/filters");
	void *it = NULL;
	struct fy_node *n;
	while (seq && fy_node_is_sequence(seq) && (n = fy_node_sequence_iterate(seq, &it))) {
		const char *url = text(imp, at(n, "/url"));
		const char *name = text(imp, at(n, "/name"));
		const char *id = text(imp, at(n, "/id"));
		char what[700];
		snprintf(what, sizeof(what), "AdGuard Home filter \"%.200s\" %.400s (id %.20s)",
			 name ? name : "", url ? url : "", id ? id : "?");
		if (!url || !*url) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED, "%s: no url", what);
			continue;
		}
		struct nx_import_source *s = nx_import_alloc(imp, sizeof(*s));
		if (!s) {
			return;
		}
		if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8)) {
			s->url = url;
		} else {
			s->path = url; /* AdGuard Home also takes a local file's path here */
		}
		const char *host = url + (strstr(url, "://") ? strstr(url, "://") - url + 3 : 0);
		s->name = nx_import_name(imp, name && *name ? name : host, "adguard-list",
					 nx_import_source_taken);
		s->enabled = boolean(at(n, "/enabled")) != 0;
		nx_import_add_source(imp, s, what);
	}
	struct fy_node *wl = at(root, "/whitelist_filters");
	it = NULL;
	while (wl && fy_node_is_sequence(wl) && (n = fy_node_sequence_iterate(wl, &it))) {
		const char *url = text(imp, at(n, "/url"));
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
				 "AdGuard Home allowlist %s (whitelist_filters): nxdns sources are "
				 "blocklists (add its names to filter.allow)",
				 url ? url : "(no url)");
	}
}

static bool sinkhole(const char *addr)
{
	return !strcmp(addr, "0.0.0.0") || !strcmp(addr, "127.0.0.1") || !strcmp(addr, "::") ||
	       !strcmp(addr, "::1");
}

/* "ADDRESS NAME..." in user_rules: a sinkhole address blocks, another answers. */
static bool hosts_rule(struct nx_import *imp, const char *line, const char *what)
{
	char addr[64];
	size_t an = strcspn(line, " \t");
	if (an >= sizeof(addr)) {
		return false;
	}
	snprintf(addr, sizeof(addr), "%.*s", (int)an, line);
	unsigned char b[16];
	bool v4 = inet_pton(AF_INET, addr, b) == 1;
	if (!v4 && inet_pton(AF_INET6, addr, b) != 1) {
		return false;
	}
	const char *p = line + an;
	while (*(p += strspn(p, " \t")) && *p != '#') {
		size_t n = strcspn(p, " \t");
		const char *name = nx_import_strndup(imp, p, n);
		if (sinkhole(addr)) {
			nx_import_add_rule(imp, false, name, what);
		} else {
			nx_import_add_record(imp, name, v4 ? "A" : "AAAA", addr, 0, what);
		}
		p += n;
	}
	return true;
}

static void user_rules(struct nx_import *imp, struct fy_node *root)
{
	struct fy_node *seq = at(root, "/user_rules");
	void *it = NULL;
	struct fy_node *n;
	size_t comments = 0;
	while (seq && fy_node_is_sequence(seq) && (n = fy_node_sequence_iterate(seq, &it))) {
		const char *r = text(imp, n);
		if (!r) {
			continue;
		}
		r += strspn(r, " \t");
		if (!*r || *r == '!' || *r == '#') {
			comments++;
			continue;
		}
		char what[1200];
		snprintf(what, sizeof(what), "AdGuard Home user rule \"%.1100s\"", r);
		if (hosts_rule(imp, r, what)) {
			continue;
		}
		/* "@@" marks an exception: the rest of the rule goes to the allow list. The
		 * rule's text is kept as written for the loader's AdGuard syntax. */
		bool allow = !strncmp(r, "@@", 2);
		nx_import_add_rule(imp, allow, allow ? r + 2 : r, what);
	}
	if (comments) {
		nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
				 "AdGuard Home user_rules: %zu comment or empty lines", comments);
	}
}

static void rewrites(struct nx_import *imp, struct fy_node *root)
{
	struct fy_node *seq = setting(root, "rewrites");
	void *it = NULL;
	struct fy_node *n;
	while (seq && fy_node_is_sequence(seq) && (n = fy_node_sequence_iterate(seq, &it))) {
		const char *dom = text(imp, at(n, "/domain"));
		const char *ans = text(imp, at(n, "/answer"));
		char what[700];
		snprintf(what, sizeof(what), "AdGuard Home rewrite %.300s -> %.300s",
			 dom ? dom : "?", ans ? ans : "?");
		if (!dom || !ans || !*dom || !*ans) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED, "%s: no domain or answer",
					 what);
			continue;
		}
		if (boolean(at(n, "/enabled")) == 0) {
			nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
					 "%s: disabled in AdGuard Home", what);
			continue;
		}
		if (!strcmp(ans, "A") || !strcmp(ans, "AAAA")) {
			nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
					 "%s: \"%s\" keeps the upstream's answer for that type "
					 "beside rewritten others",
					 what, ans);
			continue;
		}
		unsigned char b[16];
		const char *type = inet_pton(AF_INET, ans, b) == 1    ? "A"
				   : inet_pton(AF_INET6, ans, b) == 1 ? "AAAA"
								      : "CNAME";
		nx_import_add_record(imp, dom, type, ans, 0, what);
	}
}

/* ---- clients ------------------------------------------------------------------------------ */

static bool is_mac(const char *s)
{
	size_t n = strlen(s);
	if (n != 17) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool hex =
		    (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
		if (i % 3 == 2 ? (c != ':' && c != '-') : !hex) {
			return false;
		}
	}
	return true;
}

static void no_equiv_if(struct nx_import *imp, struct fy_node *n, const char *key, const char *who,
			const char *feature)
{
	if (boolean(at(n, key)) == 1) {
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT, "%s: %s", who, feature);
	}
}

static void clients(struct nx_import *imp, struct fy_node *root)
{
	struct fy_node *seq = at(root, "/clients/persistent");
	void *it = NULL;
	struct fy_node *n;
	const char *unfiltered = NULL;
	while (seq && fy_node_is_sequence(seq) && (n = fy_node_sequence_iterate(seq, &it))) {
		const char *name = text(imp, at(n, "/name"));
		char what[300];
		snprintf(what, sizeof(what), "AdGuard Home client \"%.200s\"", name ? name : "");
		struct nx_import_client *c = nx_import_alloc(imp, sizeof(*c));
		if (!c) {
			return;
		}
		c->name = nx_import_name(imp, name, "client", nx_import_client_taken);
		struct fy_node *ids = at(n, "/ids");
		void *it2 = NULL;
		struct fy_node *idn;
		while (ids && fy_node_is_sequence(ids) &&
		       (idn = fy_node_sequence_iterate(ids, &it2))) {
			const char *id = text(imp, idn);
			struct nx_cidr cidr;
			if (!id) {
				continue;
			}
			if (nx_cidr_parse(id, &cidr) == 0) {
				nx_import_strv_push(imp, &c->ids, id);
			} else if (is_mac(id)) {
				nx_import_report(
				    imp, NX_IMPORT_NO_EQUIVALENT,
				    "%s: id %s: nxdns sees clients by address or client "
				    "id, not by MAC address",
				    what, id);
			} else if (nx_conf_client_id_ok(id)) {
				char cid[80];
				snprintf(cid, sizeof(cid), "id:%s", id);
				nx_import_strv_push(imp, &c->ids, cid);
			} else {
				nx_import_report(imp, NX_IMPORT_NOT_IMPORTED,
						 "%s: id \"%s\" is not an address, a range or a "
						 "client id nxdns accepts",
						 what, id);
			}
		}
		bool global = boolean(at(n, "/use_global_settings")) != 0;
		if (!global && boolean(at(n, "/filtering_enabled")) == 0) {
			if (!unfiltered) {
				unfiltered = nx_import_name(imp, "unfiltered", "unfiltered", NULL);
				nx_import_add_group(imp, unfiltered, false);
				nx_import_report(
				    imp, NX_IMPORT_IMPORTED,
				    "AdGuard Home clients with filtering off -> groups "
				    "\"%s\" (filtering: false)",
				    unfiltered);
			}
			nx_import_strv_push(imp, &c->groups, unfiltered);
		}
		if (!global) {
			no_equiv_if(imp, n, "/parental_enabled", what, "parental control");
			no_equiv_if(imp, n, "/safebrowsing_enabled", what, "safe browsing");
			no_equiv_if(imp, n, "/safe_search/enabled", what, "safe search");
		}
		struct fy_node *ups = at(n, "/upstreams");
		if (ups && fy_node_is_sequence(ups) && fy_node_sequence_item_count(ups) > 0) {
			nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
					 "%s: per-client upstreams (nxdns forwards every client to "
					 "the same servers)",
					 what);
		}
		struct fy_node *bs = at(n, "/blocked_services/ids");
		if (boolean(at(n, "/use_global_blocked_services")) == 0 && bs &&
		    fy_node_is_sequence(bs) && fy_node_sequence_item_count(bs) > 0) {
			nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT, "%s: blocked services",
					 what);
		}
		nx_import_add_client(imp, c, what);
	}
}

/* ---- features without an equivalent ------------------------------------------------------- */

static void unsupported(struct nx_import *imp, struct fy_node *root)
{
	if (boolean(at(root, "/dhcp/enabled")) == 1) {
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
				 "AdGuard Home DHCP server (dhcp.enabled: true)");
	}
	struct fy_node *bs = at(root, "/filtering/blocked_services/ids");
	bs = bs ? bs : at(root, "/dns/blocked_services/ids");
	if (bs && fy_node_is_sequence(bs) && fy_node_sequence_item_count(bs) > 0) {
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
				 "AdGuard Home blocked services (%d services)",
				 fy_node_sequence_item_count(bs));
	}
	static const struct {
		const char *key, *what;
	} flags[] = {
	    {"parental_enabled", "parental control"},
	    {"safebrowsing_enabled", "safe browsing"},
	};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (boolean(setting(root, flags[i].key)) == 1) {
			nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT, "AdGuard Home %s (%s: true)",
					 flags[i].what, flags[i].key);
		}
	}
	if (boolean(setting(root, "safe_search/enabled")) == 1) {
		nx_import_report(imp, NX_IMPORT_NO_EQUIVALENT,
				 "AdGuard Home safe search (safe_search.enabled: true)");
	}
	if (boolean(at(root, "/tls/enabled")) == 1) {
		nx_import_report(
		    imp, NX_IMPORT_NOT_IMPORTED,
		    "AdGuard Home encryption (tls.enabled: true): certificates are not "
		    "copied; set listener.dot, listener.doh and tls.* by hand");
	}
}

/* ---- the file ----------------------------------------------------------------------------- */

static int read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	size_t cap = 64 * 1024, n = 0;
	char *b = nx_mem_alloc(NX_OWNER_import, cap);
	int rc = b ? 0 : -ENOMEM;
	while (!rc) {
		if (n == cap) {
			if (cap >= AGH_YAML_MAX) {
				snprintf(err, errlen, "%s: larger than %u MiB", path,
					 AGH_YAML_MAX / (1024 * 1024));
				rc = NX_ELIMIT;
				break;
			}
			char *nb = nx_mem_realloc(NX_OWNER_import, b, cap, cap * 2);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			b = nb;
			cap *= 2;
		}
		size_t r = fread(b + n, 1, cap - n, fp);
		n += r;
		if (r == 0) {
			if (ferror(fp)) {
				snprintf(err, errlen, "%s: read error", path);
				rc = -EIO;
			}
			break;
		}
	}
	fclose(fp);
	if (rc) {
		if (rc == -ENOMEM) {
			snprintf(err, errlen, "out of memory");
		}
		nx_mem_free(NX_OWNER_import, b, cap);
		return rc;
	}
	*buf = b;
	*len = cap; /* the allocation's size, for the free; the text's length is returned */
	return (int)(n > (size_t)AGH_YAML_MAX ? AGH_YAML_MAX : n);
}

int nx_import_adguardhome(const char *yaml_path, struct nx_import **out, char *err, size_t errlen)
{
	*out = NULL;
	char *buf = NULL;
	size_t cap = 0;
	int n = read_file(yaml_path, &buf, &cap, err, errlen);
	if (n < 0) {
		return n;
	}
	struct fy_diag_cfg dc;
	fy_diag_cfg_default(&dc);
	dc.fp = NULL;
	dc.output_fn = NULL;
	dc.colorize = false;
	struct fy_diag *diag = fy_diag_create(&dc);
	if (diag) {
		fy_diag_set_collect_errors(diag, true);
	}
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET, .diag = diag};
	struct fy_document *doc = diag ? fy_document_build_from_string(&pc, buf, (size_t)n) : NULL;
	struct fy_node *root = doc ? fy_document_root(doc) : NULL;
	int rc = 0;
	struct nx_import *imp = NULL;
	if (!doc || !root || !fy_node_is_mapping(root)) {
		void *it = NULL;
		struct fy_diag_error *e = diag ? fy_diag_errors_iterate(diag, &it) : NULL;
		if (e) {
			snprintf(err, errlen, "%s:%d:%d: not valid YAML: %s", yaml_path, e->line,
				 e->column, e->msg);
		} else {
			snprintf(err, errlen, "%s: not an AdGuard Home configuration (no mapping)",
				 yaml_path);
		}
		rc = NX_ECORRUPT;
		goto out;
	}
	if (!at(root, "/dns") && !at(root, "/filters") && !at(root, "/user_rules")) {
		snprintf(err, errlen,
			 "%s: not an AdGuard Home configuration (no dns, filters or user_rules)",
			 yaml_path);
		rc = NX_EFORMAT;
		goto out;
	}
	imp = nx_import_new("AdGuard Home", yaml_path);
	if (!imp) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	upstreams(imp, root);
	blocking(imp, root);
	filters(imp, root);
	user_rules(imp, root);
	rewrites(imp, root);
	clients(imp, root);
	unsupported(imp, root);
	if (imp->oom) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
out:
	fy_document_destroy(doc);
	fy_diag_destroy(diag);
	nx_mem_free(NX_OWNER_import, buf, cap);
	if (rc) {
		nx_import_free(imp);
		imp = NULL;
	}
	*out = imp;
	return rc;
}

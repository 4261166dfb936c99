/*
 * The loader: parse YAML with libfyaml's document API, walk its mappings against the dotted
 * paths of the schema table, hand each value to its key's type, apply defaults to every key the
 * file did not set, then run the cross-key step. Knows no individual key: sections are derived
 * from the paths ("listener" is a section because "listener.dns" is a key).
 */
#include "conf/conf.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "conf/impl.h"

#define PATH_TEXT_MAX 256 /* bytes of a dotted key path in messages */

static void set_err(struct nx_conf_ld *ld, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_err(struct nx_conf_ld *ld, const char *fmt, ...)
{
	if (!ld->err || !ld->errlen || ld->err[0]) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ld->err, ld->errlen, fmt, ap);
	va_end(ap);
}

bool nx_conf_node_pos(struct nx_conf_ld *ld, struct fy_node *n, int *line, int *col)
{
	if (!n) {
		return false;
	}
	if (fy_node_is_scalar(n) && !fy_node_is_alias(n)) {
		struct fy_token *t = fy_node_get_scalar_token(n);
		const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
		if (m) {
			/* A quoted scalar's mark is its first content byte: point at the quote. */
			enum fy_node_style st = fy_node_get_style(n);
			bool quoted = st == FYNS_SINGLE_QUOTED || st == FYNS_DOUBLE_QUOTED;
			*line = m->line + 1;
			*col = m->column + 1 - (quoted && m->column > 0);
			return true;
		}
		return false;
	}
	/*
	 * Collections and aliases: libfyaml 0.7.12 has no public node start mark, but a node
	 * report carries the node's position; the diag collects it instead of printing.
	 */
	void *it = NULL;
	struct fy_diag_error *e, *last = NULL;
	size_t before = 0, after = 0;
	while ((e = fy_diag_errors_iterate(ld->diag, &it))) {
		before++;
	}
	fy_diag_node_report(ld->diag, n, FYET_ERROR, "position");
	it = NULL;
	while ((e = fy_diag_errors_iterate(ld->diag, &it))) {
		after++;
		last = e;
	}
	if (after == before || !last || last->line < 1) {
		return false;
	}
	*line = last->line;
	/* An alias is reported at its name: point at the '*' before it. */
	*col = last->column - (fy_node_is_alias(n) && last->column > 1);
	return true;
}

int nx_conf_fail(struct nx_conf_ld *ld, struct fy_node *n, struct fy_node *fallback,
		 const char *fmt, ...)
{
	if (!ld->err || !ld->errlen || ld->err[0]) {
		return NX_ECONFIG;
	}
	char msg[NX_CONF_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	int line, col;
	if (nx_conf_node_pos(ld, n, &line, &col) || nx_conf_node_pos(ld, fallback, &line, &col)) {
		set_err(ld, "%s:%d:%d: %s", ld->name, line, col, msg);
	} else {
		set_err(ld, "%s: %s", ld->name, msg);
	}
	return NX_ECONFIG;
}

int nx_conf_fail_pos(struct nx_conf_ld *ld, struct nx_conf_pos pos, const char *fmt, ...)
{
	if (!ld->err || !ld->errlen || ld->err[0]) {
		return NX_ECONFIG;
	}
	char msg[NX_CONF_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (pos.line > 0) {
		set_err(ld, "%s:%d:%d: %s", ld->name, pos.line, pos.col, msg);
	} else {
		set_err(ld, "%s: %s", ld->name, msg);
	}
	return NX_ECONFIG;
}

int nx_conf_add_ref(struct nx_conf_ld *ld, enum nx_conf_ref_kind kind, uint32_t from, uint32_t j,
		    const char *name, struct fy_node *node)
{
	if (ld->n_refs == ld->cap_refs) {
		if (ld->cap_refs >= NX_CONF_MAX_REFS) {
			return nx_conf_fail(ld, node, NULL, "more than %u name references",
					    NX_CONF_MAX_REFS);
		}
		size_t cap = ld->cap_refs ? ld->cap_refs * 2 : 32;
		struct nx_conf_ref *r = nx_mem_realloc(NX_OWNER_config, ld->refs,
						       ld->cap_refs * sizeof(*r), cap * sizeof(*r));
		if (!r) {
			return nx_conf_fail(ld, node, NULL, "out of memory");
		}
		ld->refs = r;
		ld->cap_refs = cap;
	}
	struct nx_conf_ref *r = &ld->refs[ld->n_refs];
	memset(r, 0, sizeof(*r));
	nx_require(strlen(name) <= NX_CONF_NAME_MAX);
	strcpy(r->name, name);
	r->kind = (uint8_t)kind;
	r->from = from;
	r->j = j;
	if (!node || !nx_conf_node_pos(ld, node, &r->pos.line, &r->pos.col)) {
		r->pos.line = r->pos.col = 0;
	}
	ld->n_refs++;
	return 0;
}

/* ---- schema lookups ---- */

static const struct nx_conf_key *find_key(const char *path, size_t *idx)
{
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		if (!strcmp(nx_conf_keys[i].path, path)) {
			*idx = i;
			return &nx_conf_keys[i];
		}
	}
	return NULL;
}

/* Is `prefix` ("listener.") the start of some key's path? */
static bool is_section(const char *prefix)
{
	size_t n = strlen(prefix);
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		if (!strncmp(nx_conf_keys[i].path, prefix, n)) {
			return true;
		}
	}
	return false;
}

const struct nx_conf_key *nx_conf_key_by_path(const char *path, size_t *idx)
{
	size_t dummy;
	const struct nx_conf_key *k = find_key(path, idx ? idx : &dummy);
	nx_require(k);
	return k;
}

size_t nx_conf_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 63 || lb > 63) {
		return 64;
	}
	size_t row[64];
	for (size_t j = 0; j <= lb; j++) {
		row[j] = j;
	}
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			best = NX_MIN(best, up + 1);
			best = NX_MIN(best, row[j - 1] + 1);
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/*
 * A known path close to the unknown `key` under `prefix`: a sibling within a small edit
 * distance, else a key anywhere whose path has `key` as a component ("workers" at the top level
 * -> "listener.workers"). Empty when nothing is close.
 */
static void suggest(const char *prefix, const char *key, char *out, size_t cap)
{
	size_t plen = strlen(prefix), best = (size_t)-1;
	out[0] = '\0';
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		const char *p = nx_conf_keys[i].path;
		if (strncmp(p, prefix, plen)) {
			continue;
		}
		char child[64];
		size_t clen = strcspn(p + plen, ".");
		if (clen >= sizeof(child)) {
			continue;
		}
		memcpy(child, p + plen, clen);
		child[clen] = '\0';
		size_t d = nx_conf_edit_distance(key, child);
		if (d < best) {
			best = d;
			snprintf(out, cap, "%.*s", (int)(plen + clen), p);
		}
	}
	size_t klen = strlen(key);
	if (best <= NX_MAX((size_t)1, klen / 3) && best < klen) {
		return;
	}
	out[0] = '\0';
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		const char *p = nx_conf_keys[i].path;
		for (const char *c = p; c; c = strchr(c, '.') ? strchr(c, '.') + 1 : NULL) {
			if (!strncmp(c, key, klen) && (c[klen] == '.' || c[klen] == '\0')) {
				snprintf(out, cap, "%.*s", (int)(c - p + (ptrdiff_t)klen), p);
				return;
			}
		}
	}
}

/* ---- the walk ---- */

static int key_text(struct nx_conf_ld *ld, const char *prefix, struct fy_node *k, char *buf,
		    size_t cap)
{
	if (!k || !fy_node_is_scalar(k) || fy_node_is_alias(k) || nx_conf_is_null(k)) {
		return nx_conf_fail(ld, k, NULL, "%skeys must be plain names, got %s",
				    prefix[0] ? prefix : "", nx_conf_node_kind(k));
	}
	size_t len;
	const char *s = fy_node_get_scalar(k, &len);
	if (!s || len >= cap || memchr(s, '\0', len)) {
		return nx_conf_fail(ld, k, NULL, "unknown key (too long)");
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

/* Duplicate keys: libfyaml is told to allow them so we can name the key and both places. */
int nx_conf_check_dups(struct nx_conf_ld *ld, const char *prefix, struct fy_node *map)
{
	void *it = NULL;
	struct fy_node_pair *p;
	while ((p = fy_node_mapping_iterate(map, &it))) {
		struct fy_node *k = fy_node_pair_key(p);
		size_t len;
		const char *s = k && fy_node_is_scalar(k) ? fy_node_get_scalar(k, &len) : NULL;
		if (!s) {
			continue;
		}
		void *it2 = NULL;
		struct fy_node_pair *q;
		while ((q = fy_node_mapping_iterate(map, &it2)) != p) {
			struct fy_node *k2 = fy_node_pair_key(q);
			size_t len2;
			const char *s2 =
				k2 && fy_node_is_scalar(k2) ? fy_node_get_scalar(k2, &len2) : NULL;
			if (s2 && len2 == len && !memcmp(s, s2, len)) {
				int line = 0, col = 0;
				nx_conf_node_pos(ld, k2, &line, &col);
				return nx_conf_fail(ld, k, NULL,
						    "duplicate key '%s%.*s' (first at line %d)",
						    prefix, (int)len, s, line);
			}
		}
	}
	return 0;
}

static int unknown_key(struct nx_conf_ld *ld, struct fy_node *k, const char *prefix,
		       const char *name, const char *path)
{
	size_t idx;
	if (find_key(path, &idx)) {
		return nx_conf_fail(ld, k, NULL,
				    "unknown key '%s' (write dotted keys as nested mappings)", path);
	}
	for (size_t i = 0; i < nx_conf_n_moved_keys; i++) {
		if (!strcmp(nx_conf_moved_keys[i].path, path)) {
			return nx_conf_fail(ld, k, NULL, "%s is no longer a key: %s", path,
					    nx_conf_moved_keys[i].hint);
		}
	}
	char hint[PATH_TEXT_MAX];
	suggest(prefix, name, hint, sizeof(hint));
	if (hint[0]) {
		return nx_conf_fail(ld, k, NULL, "unknown key '%s' (did you mean '%s'?)", path,
				    hint);
	}
	return nx_conf_fail(ld, k, NULL, "unknown key '%s'", path);
}

/* Walk the mapping `map` whose keys are under `prefix` ("" or "listener."). */
static int walk(struct nx_conf_ld *ld, struct fy_node *map, struct fy_node *mapkey,
		const char *prefix)
{
	if (nx_conf_is_null(map)) {
		return 0; /* "section:" with everything under it commented out */
	}
	if (!fy_node_is_mapping(map)) {
		if (!prefix[0]) {
			return nx_conf_fail(ld, map, mapkey,
					    "expected a mapping of keys at the top level, got %s",
					    nx_conf_node_kind(map));
		}
		return nx_conf_fail(ld, map, mapkey, "%.*s: expected a mapping, got %s",
				    (int)strlen(prefix) - 1, prefix, nx_conf_node_kind(map));
	}
	int rc = nx_conf_check_dups(ld, prefix, map);
	if (rc) {
		return rc;
	}
	void *it = NULL;
	struct fy_node_pair *p;
	while ((p = fy_node_mapping_iterate(map, &it))) {
		struct fy_node *k = fy_node_pair_key(p);
		struct fy_node *v = fy_node_pair_value(p);
		char name[128], path[PATH_TEXT_MAX], sub[PATH_TEXT_MAX + 1];
		rc = key_text(ld, prefix, k, name, sizeof(name));
		if (rc) {
			return rc;
		}
		snprintf(path, sizeof(path), "%s%s", prefix, name);
		snprintf(sub, sizeof(sub), "%s.", path);
		size_t idx;
		const struct nx_conf_key *key = NULL;
		if (strchr(name, '.')) {
			/* a dotted name is never a key or a section at this level */
		} else if ((key = find_key(path, &idx))) {
			ld->seen[idx] = true;
			bool scal = v && fy_node_is_scalar(v) && !nx_conf_is_null(v);
			struct fy_node *at = scal ? v : k;
			if (!nx_conf_node_pos(ld, at, &ld->pos[idx].line, &ld->pos[idx].col)) {
				ld->pos[idx].line = ld->pos[idx].col = 0;
			}
			rc = key->type->parse(ld, key, v, k);
			if (rc) {
				return rc;
			}
			continue;
		} else if (is_section(sub)) {
			rc = walk(ld, v, k, sub);
			if (rc) {
				return rc;
			}
			continue;
		}
		return unknown_key(ld, k, prefix, name, path);
	}
	return 0;
}

int nx_conf_fields(struct nx_conf_ld *ld, const char *label, struct fy_node *map,
		   struct fy_node *fallback, const char *const *names, struct fy_node **vals,
		   struct fy_node **keys)
{
	size_t n = 0;
	while (names[n]) {
		vals[n] = keys[n] = NULL;
		n++;
	}
	if (nx_conf_is_null(map)) {
		return 0;
	}
	if (!fy_node_is_mapping(map)) {
		return nx_conf_fail(ld, map, fallback, "%s: expected a mapping, got %s", label,
				    nx_conf_node_kind(map));
	}
	char prefix[PATH_TEXT_MAX];
	snprintf(prefix, sizeof(prefix), "%s.", label);
	int rc = nx_conf_check_dups(ld, prefix, map);
	if (rc) {
		return rc;
	}
	void *it = NULL;
	struct fy_node_pair *p;
	while ((p = fy_node_mapping_iterate(map, &it))) {
		struct fy_node *k = fy_node_pair_key(p);
		char name[128];
		rc = key_text(ld, prefix, k, name, sizeof(name));
		if (rc) {
			return rc;
		}
		size_t i = 0, best = 0, best_d = (size_t)-1;
		for (; i < n && strcmp(names[i], name); i++) {
			size_t d = nx_conf_edit_distance(name, names[i]);
			if (d < best_d) {
				best_d = d;
				best = i;
			}
		}
		if (i == n) {
			size_t klen = strlen(name);
			if (best_d <= NX_MAX((size_t)1, klen / 3) && best_d < klen) {
				return nx_conf_fail(ld, k, NULL,
						    "unknown key '%s%s' (did you mean '%s'?)",
						    prefix, name, names[best]);
			}
			return nx_conf_fail(ld, k, NULL, "unknown key '%s%s'", prefix, name);
		}
		vals[i] = fy_node_pair_value(p);
		keys[i] = k;
	}
	return 0;
}

/* ---- parsing ---- */

/* First error libfyaml collected, as "name:line:col: message". */
static int yaml_error(struct nx_conf_ld *ld)
{
	void *it = NULL;
	struct fy_diag_error *e;
	while ((e = fy_diag_errors_iterate(ld->diag, &it))) {
		if (e->type >= FYET_ERROR) {
			if (e->line > 0) {
				set_err(ld, "%s:%d:%d: %s", ld->name, e->line, e->column,
					e->msg ? e->msg : "YAML syntax error");
			} else {
				set_err(ld, "%s: %s", ld->name,
					e->msg ? e->msg : "YAML syntax error");
			}
			return NX_ECONFIG;
		}
	}
	set_err(ld, "%s: YAML syntax error", ld->name);
	return NX_ECONFIG;
}

static struct fy_diag *new_diag(void)
{
	struct fy_diag_cfg dc;
	fy_diag_cfg_default(&dc);
	dc.fp = NULL;
	dc.output_fn = NULL;
	dc.colorize = false;
	struct fy_diag *d = fy_diag_create(&dc);
	if (d) {
		fy_diag_set_collect_errors(d, true);
	}
	return d;
}

/*
 * Parse the YAML stream (one document) and walk it. A stream with no document (empty, only
 * comments) or a null document ("---", "~") leaves everything at defaults and sets *empty:
 * nx_conf_load refuses that for a file, nx_conf_load_string accepts it.
 */
static int walk_text(struct nx_conf_ld *ld, const char *yaml, size_t len, bool *empty)
{
	*empty = false;
	struct fy_parse_cfg pc = {
		.flags = FYPCF_QUIET | FYPCF_ALLOW_DUPLICATE_KEYS,
		.diag = ld->diag,
	};
	struct fy_parser *fyp = fy_parser_create(&pc);
	if (!fyp) {
		set_err(ld, "%s: cannot create YAML parser", ld->name);
		return NX_ECONFIG;
	}
	int rc = 0;
	if (fy_parser_set_string(fyp, yaml, len)) {
		set_err(ld, "%s: cannot read YAML input", ld->name);
		rc = NX_ECONFIG;
		goto out;
	}
	struct fy_document *doc = fy_parse_load_document(fyp);
	if (fy_diag_got_error(ld->diag)) {
		fy_parse_document_destroy(fyp, doc);
		rc = yaml_error(ld);
		goto out;
	}
	if (!doc) {
		*empty = true; /* no document at all */
		goto out;
	}
	struct fy_document *extra = fy_parse_load_document(fyp);
	if (extra || fy_diag_got_error(ld->diag)) {
		if (extra) {
			struct fy_node *r = fy_document_root(extra);
			int line = 0, col = 0;
			if (r && nx_conf_node_pos(ld, r, &line, &col)) {
				set_err(ld, "%s:%d:%d: only one YAML document is allowed", ld->name,
					line, col);
			} else {
				set_err(ld, "%s: only one YAML document is allowed", ld->name);
			}
			fy_parse_document_destroy(fyp, extra);
			rc = NX_ECONFIG;
		} else {
			rc = yaml_error(ld);
		}
		fy_parse_document_destroy(fyp, doc);
		goto out;
	}
	struct fy_node *root = fy_document_root(doc);
	*empty = nx_conf_is_null(root);
	rc = walk(ld, root, NULL, "");
	fy_parse_document_destroy(fyp, doc);
out:
	fy_parser_destroy(fyp);
	return rc;
}

/* Apply a key's default (YAML flow text in the table) through its own type. */
static int apply_default(struct nx_conf_ld *ld, const struct nx_conf_key *k)
{
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET, .diag = ld->diag};
	struct fy_document *doc = fy_document_build_from_string(&pc, k->def, strlen(k->def));
	if (!doc) {
		set_err(ld, "<built-in>: default of %s: YAML syntax error", k->path);
		return NX_ECONFIG;
	}
	const char *name = ld->name;
	ld->name = "<built-in default>";
	ld->in_default = true;
	int rc = k->type->parse(ld, k, fy_document_root(doc), NULL);
	ld->in_default = false;
	ld->name = name;
	fy_document_destroy(doc);
	return rc;
}

void nx_conf_free(struct nx_conf *c)
{
	if (!c) {
		return;
	}
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		const struct nx_conf_key *k = &nx_conf_keys[i];
		if (k->type->release) {
			k->type->release(k, c);
		}
	}
	if (c->path) {
		nx_mem_free(NX_OWNER_config, c->path, strlen(c->path) + 1);
	}
	nx_mem_free(NX_OWNER_config, c, sizeof(*c));
}

/*
 * Load from text; relative paths in values resolve against base_dir (absolute). With
 * refuse_empty, a text without settings is an error rather than the defaults.
 */
static int load_text(const char *name, const char *base_dir, const char *yaml, size_t len,
		     bool refuse_empty, struct nx_conf **out, char *err, size_t errlen)
{
	*out = NULL;
	if (err && errlen) {
		err[0] = '\0';
	}
	struct nx_conf_ld ld = {.name = name ? name : "<string>",
				.base_dir = base_dir,
				.err = err,
				.errlen = errlen};
	bool seen[NX_CONF_MAX_KEYS];
	struct nx_conf_pos pos[NX_CONF_MAX_KEYS];
	nx_require(nx_conf_n_keys <= NX_ARRAY_LEN(seen));
	memset(seen, 0, sizeof(seen));
	memset(pos, 0, sizeof(pos));
	ld.seen = seen;
	ld.pos = pos;

	int rc = NX_ECONFIG;
	ld.c = nx_mem_calloc(NX_OWNER_config, 1, sizeof(*ld.c));
	ld.diag = new_diag();
	if (!ld.c || !ld.diag) {
		set_err(&ld, "%s: out of memory", ld.name);
		goto fail;
	}
	ld.c->path = nx_mem_strdup(NX_OWNER_config, ld.name);
	if (!ld.c->path) {
		set_err(&ld, "%s: out of memory", ld.name);
		goto fail;
	}
	bool empty = false;
	rc = walk_text(&ld, yaml, len, &empty);
	if (!rc && empty && refuse_empty) {
		/*
		 * A config file without a single setting is a truncated or clobbered file far more
		 * often than a wish for the defaults, and the defaults are not harmless on a box
		 * that was set up: public upstreams, no lists, no admin password (so the setup
		 * token comes back for anyone on the LAN). Refused like any bad config, at start
		 * and on reload; `{}` still asks for the defaults explicitly.
		 */
		set_err(&ld,
			"%s:1:1: the file has no settings (empty, or only comments); write `{}` to "
			"run with every default",
			ld.name);
		rc = NX_ECONFIG;
	}
	for (size_t i = 0; !rc && i < nx_conf_n_keys; i++) {
		if (!seen[i]) {
			rc = apply_default(&ld, &nx_conf_keys[i]);
		}
	}
	if (!rc) {
		rc = nx_conf_schema_finish(&ld);
	}
	if (rc) {
		goto fail;
	}
	fy_diag_destroy(ld.diag);
	nx_mem_free(NX_OWNER_config, ld.refs, ld.cap_refs * sizeof(*ld.refs));
	*out = ld.c;
	return 0;
fail:
	if (ld.diag) {
		fy_diag_destroy(ld.diag);
	}
	nx_mem_free(NX_OWNER_config, ld.refs, ld.cap_refs * sizeof(*ld.refs));
	nx_conf_free(ld.c);
	return rc ? rc : NX_ECONFIG;
}

int nx_conf_load_string(const char *name, const char *yaml, size_t len, struct nx_conf **out,
			char *err, size_t errlen)
{
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd))) {
		int e = errno;
		*out = NULL;
		if (err && errlen) {
			snprintf(err, errlen, "%s: cannot read the working directory: %s",
				 name ? name : "<string>", strerror(e));
		}
		return NX_ECONFIG;
	}
	return load_text(name, cwd, yaml, len, false, out, err, errlen);
}

/* Directory of `path`, absolute (relative paths are taken from the working directory). */
static int dir_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	if (path[0] == '/') {
		if (dlen == 0) {
			dlen = 1; /* "/nxdns.yaml" */
		}
		if (dlen >= cap) {
			return -ENAMETOOLONG;
		}
		memcpy(out, path, dlen);
		out[dlen] = '\0';
		return 0;
	}
	if (!getcwd(out, cap)) {
		return -errno;
	}
	size_t used = strlen(out);
	if (slash) {
		if (used + 1 + dlen >= cap) {
			return -ENAMETOOLONG;
		}
		out[used] = '/';
		memcpy(out + used + 1, path, dlen);
		out[used + 1 + dlen] = '\0';
	}
	return 0;
}

int nx_conf_load(const char *path, struct nx_conf **out, char *err, size_t errlen)
{
	*out = NULL;
	if (err && errlen) {
		err[0] = '\0';
	}
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		int e = errno;
		if (err && errlen) {
			snprintf(err, errlen, "%s: %s", path, strerror(e));
		}
		return -e;
	}
	size_t cap = 4096, len = 0;
	char *buf = nx_mem_alloc(NX_OWNER_config, cap);
	int rc = buf ? 0 : -ENOMEM;
	while (!rc) {
		if (len == cap) {
			if (cap >= NX_CONF_FILE_MAX) {
				rc = NX_ELIMIT;
				break;
			}
			char *nb = nx_mem_realloc(NX_OWNER_config, buf, cap, cap * 2);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		size_t got = fread(buf + len, 1, cap - len, fp);
		len += got;
		if (got == 0) {
			rc = ferror(fp) ? -EIO : 0;
			break;
		}
	}
	fclose(fp);
	if (rc == NX_ELIMIT) {
		if (err && errlen) {
			snprintf(err, errlen, "%s: larger than %u bytes", path, NX_CONF_FILE_MAX);
		}
		rc = NX_ECONFIG;
	} else if (rc) {
		if (err && errlen) {
			snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		}
	} else {
		char dir[PATH_MAX];
		rc = dir_of(path, dir, sizeof(dir));
		if (rc) {
			if (err && errlen) {
				snprintf(err, errlen, "%s: cannot resolve its directory: %s", path,
					 strerror(-rc));
			}
			rc = NX_ECONFIG;
		} else {
			rc = load_text(path, dir, buf, len, true, out, err, errlen);
		}
	}
	nx_mem_free(NX_OWNER_config, buf, cap);
	return rc;
}

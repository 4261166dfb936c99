/*
 * Config rewrite: set keys of nxdns.yaml from the API or the CLI, validate, replace atomically.
 *
 * libfyaml 0.7.12 cannot emit a document with its comments (its comment support is
 * experimental and keeps almost none of them), and a household's config file is mostly
 * comments. So the edit is made twice:
 *   1. on libfyaml's document (the reference): set the node at the dotted path, creating
 *      mappings as needed;
 *   2. on the text: the old value's bytes are replaced by the new value in flow style (or
 *      "key: value" lines are inserted at the end of the enclosing block mapping), so every
 *      other byte of the file, comments included, stays as it was.
 * The spliced text is re-parsed and must equal the reference document (both emitted in one-line
 * flow style, scalar styles included). When the file's layout defeats the splice (a flow
 * mapping on the path, a multi-line flow value, an anchor) or the check fails, the reference
 * document is emitted instead (block style; comments are lost then, and the log says so). The
 * result must then load with nx_conf_load_string() before anything is written.
 *
 * Threading: any thread, nothing shared. Memory: transient text buffers are charged to
 * NX_OWNER_config; libfyaml's own allocations are not in the ledger (freed before return).
 */
#include "conf/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "conf/impl.h"

#define MAX_DEPTH 8 /* components of a dotted key ("a.b.c"); the schema uses two */

/* ---- a growable text buffer charged to NX_OWNER_config ---- */

struct text {
	char *p;    /* NUL-terminated when cap > 0 */
	size_t len; /* bytes without the NUL */
	size_t cap;
	bool oom; /* sticky: an append failed */
};

static void text_put(struct text *t, const char *s, size_t n)
{
	if (t->oom) {
		return;
	}
	if (t->len + n + 1 > t->cap) {
		size_t cap = NX_MAX(t->cap * 2, t->len + n + 1);
		cap = NX_MAX(cap, (size_t)256);
		char *p = nx_mem_realloc(NX_OWNER_config, t->p, t->cap, cap);
		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

static void text_puts(struct text *t, const char *s)
{
	text_put(t, s, strlen(s));
}

static void text_spaces(struct text *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		text_put(t, " ", 1);
	}
}

static void text_free(struct text *t)
{
	nx_mem_free(NX_OWNER_config, t->p, t->cap);
	memset(t, 0, sizeof(*t));
}

static void fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- the dotted key ---- */

struct path {
	char buf[256];
	const char *comp[MAX_DEPTH];
	size_t n;
};

/* Split a schema key into components; NX_ECONFIG when it is not a key of the schema. */
static int path_split(const char *key, struct path *p, char *err, size_t errlen)
{
	bool known = false;
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		known |= !strcmp(nx_conf_keys[i].path, key);
	}
	if (!known || strlen(key) >= sizeof(p->buf)) {
		fail(err, errlen, "unknown key '%s'", key);
		return NX_ECONFIG;
	}
	strcpy(p->buf, key);
	p->n = 0;
	for (char *s = p->buf; s; p->n++) {
		nx_require(p->n < MAX_DEPTH);
		p->comp[p->n] = s;
		s = strchr(s, '.');
		if (s) {
			*s++ = '\0';
		}
	}
	return 0;
}

/* ---- libfyaml helpers ---- */

/* A diag that collects instead of printing: libfyaml must not write to stderr. */
static struct fy_diag *quiet_diag(void)
{
	struct fy_diag_cfg dc;
	fy_diag_cfg_default(&dc);
	dc.fp = NULL;
	dc.output_fn = NULL;
	dc.colorize = false;
	struct fy_diag *dg = fy_diag_create(&dc);
	if (dg) {
		fy_diag_set_collect_errors(dg, true);
	}
	return dg;
}

/*
 * Parse a one-document YAML stream. A stream without a document (empty, comments only) is an
 * empty document; a syntax error or a second document is NULL.
 */
static struct fy_document *parse_doc(const char *s, size_t len)
{
	struct fy_diag *dg = quiet_diag();
	struct fy_parse_cfg pc = {.flags = FYPCF_QUIET, .diag = dg};
	struct fy_parser *fyp = dg ? fy_parser_create(&pc) : NULL;
	struct fy_document *d = NULL;
	if (!fyp || fy_parser_set_string(fyp, s, len)) {
		fy_parser_destroy(fyp);
		fy_diag_destroy(dg);
		return NULL;
	}
	/* count the documents first (each one is released by the parser that made it) */
	int n = 0;
	while ((d = fy_parse_load_document(fyp))) {
		n++;
		fy_parse_document_destroy(fyp, d);
	}
	bool bad = fy_diag_got_error(dg) || n > 1;
	fy_parser_destroy(fyp);
	d = NULL;
	if (!bad) {
		d = n ? fy_document_build_from_string(&pc, s, len) : fy_document_create(&pc);
	}
	fy_diag_destroy(dg);
	return d;
}

/* Canonical one-line form of a whole document (NULL root: ""), malloc'd by libfyaml. */
static char *canon(struct fy_document *d)
{
	if (!fy_document_root(d)) {
		return strdup("");
	}
	return fy_emit_document_to_string(d, FYECF_MODE_FLOW_ONELINE | FYECF_WIDTH_INF |
						 FYECF_DOC_START_MARK_OFF | FYECF_DOC_END_MARK_OFF);
}

static bool is_null(struct fy_node *n)
{
	return nx_conf_is_null(n);
}

/* Apply one change to the reference document. 0 or NX_ECONFIG (bad value text). */
static int doc_set(struct fy_document *d, const struct path *p, const char *yaml, char *err,
		   size_t errlen)
{
	struct fy_node *val = fy_node_build_from_string(d, yaml, strlen(yaml));
	if (!val) {
		fail(err, errlen, "bad value for %s: not a YAML value", p->buf);
		return NX_ECONFIG;
	}
	struct fy_node *node = fy_document_root(d);
	if (!node || is_null(node) || !fy_node_is_mapping(node)) {
		node = fy_node_create_mapping(d);
		if (!node || fy_document_set_root(d, node)) {
			fail(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < p->n; i++) {
		bool last = i + 1 == p->n;
		struct fy_node_pair *pair =
		    fy_node_mapping_lookup_pair_by_string(node, p->comp[i], FY_NT);
		struct fy_node *next;
		if (last) {
			next = val;
		} else if (pair && fy_node_is_mapping(fy_node_pair_value(pair))) {
			node = fy_node_pair_value(pair);
			continue;
		} else {
			next = fy_node_create_mapping(d);
		}
		if (!next) {
			fail(err, errlen, "out of memory");
			return -ENOMEM;
		}
		if (pair) {
			if (fy_node_pair_set_value(pair, next)) {
				fail(err, errlen, "out of memory");
				return -ENOMEM;
			}
		} else {
			struct fy_node *k = fy_node_create_scalar_copy(d, p->comp[i], FY_NT);
			if (!k || fy_node_mapping_append(node, k, next)) {
				fail(err, errlen, "out of memory");
				return -ENOMEM;
			}
		}
		node = next;
	}
	return 0;
}

/* ---- the text splice ---- */

struct span {
	size_t start, end; /* byte offsets in the source: [start, end) */
};

/* A scalar node's bytes, quotes included. */
static bool scalar_span(struct fy_node *n, struct span *s)
{
	if (!n || !fy_node_is_scalar(n) || fy_node_is_alias(n)) {
		return false;
	}
	struct fy_token *t = fy_node_get_scalar_token(n);
	const struct fy_mark *a = t ? fy_token_start_mark(t) : NULL;
	const struct fy_mark *b = t ? fy_token_end_mark(t) : NULL;
	if (!a || !b) {
		return false;
	}
	enum fy_node_style st = fy_node_get_style(n);
	if (st == FYNS_LITERAL || st == FYNS_FOLDED) {
		return false; /* block scalars: their header is not in the token */
	}
	bool quoted = st == FYNS_SINGLE_QUOTED || st == FYNS_DOUBLE_QUOTED;
	s->start = a->input_pos - (quoted && a->input_pos > 0);
	s->end = b->input_pos + quoted;
	return true;
}

static size_t line_start(const char *s, size_t pos)
{
	while (pos > 0 && s[pos - 1] != '\n') {
		pos--;
	}
	return pos;
}

static size_t line_end(const char *s, size_t len, size_t pos)
{
	while (pos < len && s[pos] != '\n') {
		pos++;
	}
	return pos;
}

/* Indentation of the line at `ls`; *blank when it holds only spaces or a comment. */
static size_t indent_of(const char *s, size_t len, size_t ls, bool *blank, bool *dash)
{
	size_t i = ls;
	while (i < len && s[i] == ' ') {
		i++;
	}
	*blank = i >= len || s[i] == '\n' || s[i] == '\r' || s[i] == '#';
	*dash = i < len && s[i] == '-' && (i + 1 >= len || s[i + 1] == ' ' || s[i + 1] == '\n');
	return i - ls;
}

/*
 * The block a key's value occupies below the key's line: following lines that are blank,
 * comments, more indented than the key, or "- " items at the key's indentation. Returns the end
 * of the last content line in that block, or the end of the key's own line when none.
 */
static size_t value_block_end(const char *s, size_t len, size_t key_pos)
{
	size_t ls = line_start(s, key_pos);
	size_t col = key_pos - ls;
	size_t end = line_end(s, len, key_pos);
	size_t content_end = end;
	size_t pos = end;
	while (pos < len) {
		size_t next = pos + 1; /* s[pos] == '\n' */
		if (next >= len) {
			break;
		}
		bool blank, dash;
		size_t ind = indent_of(s, len, next, &blank, &dash);
		size_t le = line_end(s, len, next);
		if (!blank && (ind < col || (ind == col && !dash))) {
			break;
		}
		if (!blank) {
			content_end = le;
		}
		pos = le;
	}
	return content_end;
}

/*
 * A flow collection that starts at `from` (after spaces) and closes on the same line: its span.
 * Brackets inside quoted strings do not count. False otherwise.
 */
static bool flow_span_on_line(const char *s, size_t len, size_t from, struct span *out)
{
	size_t i = from, le = line_end(s, len, from);
	while (i < le && s[i] == ' ') {
		i++;
	}
	if (i >= le || (s[i] != '[' && s[i] != '{')) {
		return false;
	}
	out->start = i;
	int depth = 0;
	for (; i < le; i++) {
		char c = s[i];
		if (c == '"') {
			for (i++; i < le && s[i] != '"'; i++) {
				i += s[i] == '\\';
			}
		} else if (c == '\'') {
			for (i++; i < le; i++) {
				if (s[i] == '\'') {
					if (i + 1 < le && s[i + 1] == '\'') {
						i++;
						continue;
					}
					break;
				}
			}
		} else if (c == '[' || c == '{') {
			depth++;
		} else if ((c == ']' || c == '}') && --depth == 0) {
			out->end = i + 1;
			return true;
		}
	}
	return false;
}

/* Position right after the ':' that follows a key, or 0 when not found on the key's line. */
static size_t after_colon(const char *s, size_t len, const struct span *key)
{
	size_t i = key->end;
	while (i < len && (s[i] == ' ' || s[i] == '\t')) {
		i++;
	}
	return i < len && s[i] == ':' ? i + 1 : 0;
}

/* The comment at the end of a key line ("  # text"), when the value part is otherwise empty. */
static struct span trailing_comment(const char *s, size_t len, size_t from)
{
	size_t i = from, le = line_end(s, len, from);
	while (i < le && s[i] == ' ') {
		i++;
	}
	struct span c = {le, le};
	if (i < le && s[i] == '#') {
		c.start = from; /* keep the spacing before it */
	}
	return c;
}

/* "c_d:\n  c_d+1: value" at indentation `ind`, without a trailing newline. */
static void put_lines(struct text *t, const struct path *p, size_t d, size_t ind, const char *yaml)
{
	for (size_t j = d; j < p->n; j++) {
		if (j > d) {
			text_puts(t, "\n");
		}
		text_spaces(t, ind + 2 * (j - d));
		text_puts(t, p->comp[j]);
		text_puts(t, ":");
		if (j + 1 == p->n) {
			text_puts(t, " ");
			text_puts(t, yaml);
		}
	}
}

/*
 * Splice one change into the source text `s` (parsed as `d`, untouched). False when the layout
 * is not one this handles; the caller then falls back to emitting the reference document.
 */
static bool splice_text(const char *s, size_t len, struct fy_document *d, const struct path *p,
			const char *yaml, struct text *out)
{
	struct fy_node *node = fy_document_root(d);
	if (!node || is_null(node)) {
		/* no document or an empty one: append the keys at the top level */
		text_put(out, s, len);
		if (len && s[len - 1] != '\n') {
			text_puts(out, "\n");
		}
		put_lines(out, p, 0, 0, yaml);
		text_puts(out, "\n");
		return !out->oom;
	}
	if (!fy_node_is_mapping(node)) {
		return false;
	}
	struct span parent_key = {0, 0}; /* key of the mapping `node` (none for the root) */
	bool at_root = true;
	for (size_t i = 0; i < p->n; i++) {
		struct fy_node_pair *pair =
		    fy_node_mapping_lookup_pair_by_string(node, p->comp[i], FY_NT);
		if (!pair) {
			/* insert "comp: ..." lines at the end of this block mapping */
			void *it = NULL;
			struct fy_node_pair *first = fy_node_mapping_iterate(node, &it);
			struct span fk;
			if (!first || !scalar_span(fy_node_pair_key(first), &fk)) {
				return false;
			}
			size_t ind = fk.start - line_start(s, fk.start);
			if (at_root) {
				if (ind != 0) {
					return false;
				}
				text_put(out, s, len);
				if (len && s[len - 1] != '\n') {
					text_puts(out, "\n");
				}
				put_lines(out, p, i, 0, yaml);
				text_puts(out, "\n");
				return !out->oom;
			}
			size_t at = value_block_end(s, len, parent_key.start);
			if (ind <= parent_key.start - line_start(s, parent_key.start)) {
				return false; /* a flow mapping, or not indented below its key */
			}
			text_put(out, s, at);
			text_puts(out, "\n");
			put_lines(out, p, i, ind, yaml);
			if (at == len) {
				text_puts(out, "\n");
			}
			text_put(out, s + at, len - at);
			return !out->oom;
		}
		struct span key;
		if (!scalar_span(fy_node_pair_key(pair), &key)) {
			return false;
		}
		size_t colon = after_colon(s, len, &key);
		if (!colon) {
			return false;
		}
		struct fy_node *val = fy_node_pair_value(pair);
		bool last = i + 1 == p->n;
		if (!last && val && fy_node_is_mapping(val)) {
			node = val;
			parent_key = key;
			at_root = false;
			continue;
		}
		size_t key_le = line_end(s, len, key.start);
		struct span vs;
		if (last && ((scalar_span(val, &vs) && vs.start >= colon && vs.end <= key_le) ||
			     (!fy_node_is_scalar(val) && flow_span_on_line(s, len, colon, &vs)))) {
			/* a one-line scalar or flow collection: replace its bytes, keep the rest */
			text_put(out, s, vs.start);
			text_puts(out, yaml);
			text_put(out, s + vs.end, len - vs.end);
			return !out->oom;
		}
		if (!last && !is_null(val)) {
			return false; /* a scalar where a section belongs: the file is invalid
					 anyway */
		}
		/* a collection, a multi-line or null value: replace all of it */
		size_t end = value_block_end(s, len, key.start);
		struct span cm = trailing_comment(s, len, colon);
		bool value_on_key_line = cm.start == key_le && colon < key_le;
		for (size_t j = colon; value_on_key_line && j < key_le; j++) {
			value_on_key_line = s[j] == ' ' || s[j] == '\r';
		}
		if (!last) {
			/* "section:" with nothing under it: the new keys go right below */
			text_put(out, s, colon);
			text_put(out, s + cm.start, cm.end - cm.start);
			text_puts(out, "\n");
			put_lines(out, p, i + 1, key.start - line_start(s, key.start) + 2, yaml);
			text_put(out, s + key_le, len - key_le);
			return !out->oom;
		}
		text_put(out, s, colon);
		text_puts(out, " ");
		text_puts(out, yaml);
		text_put(out, s + cm.start, cm.end - cm.start);
		size_t rest = NX_MAX(end, key_le);
		text_put(out, s + rest, len - rest);
		return !out->oom;
	}
	return false;
}

/*
 * Apply one change to `in` (NUL-terminated, len bytes) into `out`; *spliced tells whether the
 * text splice was used (comments kept) or the document was re-emitted.
 */
static int edit_one(const char *in, size_t len, const struct nx_conf_change *ch, struct text *out,
		    bool *spliced, char *err, size_t errlen)
{
	struct path p;
	int rc = path_split(ch->key, &p, err, errlen);
	if (rc) {
		return rc;
	}
	/* The value must be one YAML node on its own. */
	struct fy_document *vd = parse_doc(ch->yaml, strlen(ch->yaml));
	if (!vd || !fy_document_root(vd) || strchr(ch->yaml, '\n')) {
		fy_document_destroy(vd);
		fail(err, errlen, "%s: the new value is not one line of YAML", ch->key);
		return NX_ECONFIG;
	}
	fy_document_destroy(vd);

	struct fy_document *d = parse_doc(in, len);
	struct fy_document *ref = parse_doc(in, len);
	char *want = NULL, *got = NULL;
	struct fy_document *check = NULL;
	if (!d || !ref) {
		fail(err, errlen, "the file is not valid YAML (check it with nxdns check-config)");
		rc = NX_ECONFIG;
		goto out;
	}
	rc = doc_set(ref, &p, ch->yaml, err, errlen);
	if (rc) {
		goto out;
	}
	want = canon(ref);
	if (!want) {
		fail(err, errlen, "cannot emit YAML");
		rc = -ENOMEM;
		goto out;
	}
	*spliced = splice_text(in, len, d, &p, ch->yaml, out);
	if (*spliced) {
		check = parse_doc(out->p, out->len);
		got = check ? canon(check) : NULL;
		*spliced = got && !strcmp(got, want);
	}
	if (!*spliced) {
		out->len = 0;
		out->oom = false;
		char *emitted = fy_emit_document_to_string(
		    ref, FYECF_MODE_PRETTY | FYECF_DOC_START_MARK_OFF | FYECF_DOC_END_MARK_OFF);
		if (!emitted) {
			fail(err, errlen, "cannot emit YAML");
			rc = -ENOMEM;
			goto out;
		}
		text_puts(out, emitted);
		free(emitted);
	}
	if (out->oom) {
		fail(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
out:
	free(want);
	free(got);
	fy_document_destroy(check);
	fy_document_destroy(d);
	fy_document_destroy(ref);
	return rc;
}

int nx_conf_edit_text(const char *yaml, size_t len, const struct nx_conf_change *ch, size_t n,
		      char **out, size_t *out_len, bool *kept_layout, char *err, size_t errlen)
{
	*out = NULL;
	*out_len = 0;
	*kept_layout = true;
	if (err && errlen) {
		err[0] = '\0';
	}
	struct text cur = {0}, next = {0};
	text_put(&cur, yaml, len);
	int rc = cur.oom ? -ENOMEM : 0;
	for (size_t i = 0; !rc && i < n; i++) {
		bool spliced = false;
		next.len = 0;
		text_put(&next, "", 0);
		rc = edit_one(cur.p, cur.len, &ch[i], &next, &spliced, err, errlen);
		*kept_layout &= spliced;
		struct text t = cur;
		cur = next;
		next = t;
	}
	text_free(&next);
	if (rc) {
		text_free(&cur);
		return rc;
	}
	/* hand over exactly len + 1 bytes, so the caller frees what it was told */
	char *p = nx_mem_alloc(NX_OWNER_config, cur.len + 1);
	if (!p) {
		text_free(&cur);
		fail(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memcpy(p, cur.p, cur.len + 1);
	*out = p;
	*out_len = cur.len;
	text_free(&cur);
	return 0;
}

/* ---- files ---- */

/* Read a whole file into a charged buffer (len + 1 bytes, NUL-terminated). -ENOENT if absent. */
static int read_all(const char *path, char **out, size_t *len, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	int rc = 0;
	if (fstat(fd, st) < 0) {
		rc = -errno;
		goto out;
	}
	if ((size_t)st->st_size > NX_CONF_FILE_MAX) {
		rc = NX_ELIMIT;
		goto out;
	}
	size_t cap = (size_t)st->st_size + 1;
	char *buf = nx_mem_alloc(NX_OWNER_config, cap);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < cap - 1) {
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			break;
		}
		got += (size_t)r;
	}
	buf[got] = '\0';
	/* *len is what was read; the caller frees cap = st_size + 1 */
	*out = buf;
	*len = got;
out:
	close(fd);
	return rc;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0) {
			return w < 0 ? -errno : -EIO;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Write `data` to `path` atomically: a temporary file in the same directory, fsync, rename.
 * The mode (and, when we may, the owner) of `like` is kept; a new file is 0600 (it may hold
 * the password hash).
 */
static int replace_file(const char *path, const char *data, size_t len, const struct stat *like,
			const char **step)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp)) {
		*step = "temporary name";
		return -ENAMETOOLONG;
	}
	*step = "create temporary file";
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	int rc = 0;
	*step = "chmod";
	if (fchmod(fd, like ? (like->st_mode & 07777) : 0600) < 0) {
		rc = -errno;
		goto fail;
	}
	if (like && (like->st_uid != geteuid() || like->st_gid != getegid())) {
		(void)!fchown(fd, like->st_uid, like->st_gid); /* best effort: root only */
	}
	*step = "write";
	rc = write_all(fd, data, len);
	if (rc) {
		goto fail;
	}
	*step = "fsync";
	if (fsync(fd) < 0) {
		rc = -errno;
		goto fail;
	}
	*step = "close";
	if (close(fd) < 0) {
		fd = -1;
		rc = -errno;
		goto fail;
	}
	fd = -1;
	*step = "rename";
	if (rename(tmp, path) < 0) {
		rc = -errno;
		goto fail;
	}
	return 0;
fail:
	if (fd >= 0) {
		close(fd);
	}
	unlink(tmp);
	return rc;
}

static void fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash) {
		strcpy(dir, ".");
	} else if (slash == dir) {
		dir[1] = '\0';
	} else {
		*slash = '\0';
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* Drop "name:line:col: " or "name: " so the message is the reason alone. */
static void strip_position(char *err, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(err, name, n) || err[n] != ':') {
		return;
	}
	char *p = err + n + 1;
	char *q = p;
	while (*q >= '0' && *q <= '9') {
		q++;
	}
	if (q > p && *q == ':') {
		p = q + 1;
		q = p;
		while (*q >= '0' && *q <= '9') {
			q++;
		}
		if (q > p && *q == ':') {
			p = q + 1;
		}
	}
	while (*p == ' ') {
		p++;
	}
	memmove(err, p, strlen(p) + 1);
}

/* Load `text` as the config would be: 0, or NX_ECONFIG with the reason in err. */
static int validate(const char *name, const char *text, size_t len, char *err, size_t errlen)
{
	struct nx_conf *c = NULL;
	char e[NX_CONF_ERR_MAX] = "";
	int rc = nx_conf_load_string(name, text, len, &c, e, sizeof(e));
	nx_conf_free(c);
	if (rc) {
		strip_position(e, name);
		fail(err, errlen, "%s", e);
		return NX_ECONFIG;
	}
	return 0;
}

/* Which change an error names: the longest key the message starts with, else n. */
static size_t blame(const struct nx_conf_change *ch, size_t n, const char *msg)
{
	size_t best = n, best_len = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(ch[i].key);
		if (!strncmp(msg, ch[i].key, l) &&
		    (msg[l] == ':' || msg[l] == '[' || msg[l] == '.') && l > best_len) {
			best = i;
			best_len = l;
		}
	}
	return best;
}

int nx_conf_rewrite_many(const char *path, const struct nx_conf_change *ch, size_t n, size_t *bad,
			 char *err, size_t errlen)
{
	size_t bad_dummy;
	bad = bad ? bad : &bad_dummy;
	*bad = n;
	if (err && errlen) {
		err[0] = '\0';
	}
	if (n == 0 || n > NX_CONF_MAX_CHANGES) {
		fail(err, errlen, "between 1 and %d changes at once", NX_CONF_MAX_CHANGES);
		return NX_ECONFIG;
	}
	/* Follow a symlink: the file it names is replaced, the link stays. */
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		if (errno != ENOENT || strlen(path) >= sizeof(real)) {
			int e = errno;
			fail(err, errlen, "%s: %s", path, strerror(e));
			return -e;
		}
		strcpy(real, path);
	}
	char *src = NULL, *dst = NULL;
	size_t src_len = 0, src_cap = 0, dst_len = 0;
	struct stat st;
	bool existed = true;
	int rc = read_all(real, &src, &src_len, &st);
	if (rc == -ENOENT) {
		existed = false;
		rc = 0;
	} else if (rc == NX_ELIMIT) {
		fail(err, errlen, "%s: larger than %u bytes", path, NX_CONF_FILE_MAX);
		return NX_ECONFIG;
	} else if (rc) {
		fail(err, errlen, "%s: %s", path, nx_strerror(rc));
		return rc;
	}
	src_cap = existed ? (size_t)st.st_size + 1 : 0;

	/* The changes are judged together (some are only valid together: min_ttl and max_ttl
	 * raised at once). Only when the combination is refused do we look for the change to
	 * blame: the key the loader's message names, else one that is refused alone (if the
	 * file was valid to begin with). */
	bool kept = true;
	rc = nx_conf_edit_text(src ? src : "", src_len, ch, n, &dst, &dst_len, &kept, err, errlen);
	if (!rc) {
		rc = validate(path, dst, dst_len, err, errlen);
	}
	if (rc) {
		*bad = n == 1 ? 0 : blame(ch, n, err ? err : "");
		/* A message that names one of the changes is the precise answer (a bad
		 * filter.block_addresses sent with block_mode custom: custom alone is refused too,
		 * but the addresses are at fault). */
		if (*bad == n && n > 1 && validate(path, src ? src : "", src_len, NULL, 0) == 0) {
			char one_err[NX_CONF_ERR_MAX];
			for (size_t i = 0; i < n; i++) {
				char *one = NULL;
				size_t one_len = 0;
				bool one_kept = true;
				int r1 = nx_conf_edit_text(src ? src : "", src_len, &ch[i], 1, &one,
							   &one_len, &one_kept, one_err,
							   sizeof(one_err));
				if (!r1) {
					r1 = validate(path, one, one_len, one_err, sizeof(one_err));
				}
				nx_mem_free(NX_OWNER_config, one, one ? one_len + 1 : 0);
				if (r1) {
					*bad = i;
					if (err && errlen) {
						snprintf(err, errlen, "%s", one_err);
					}
					break;
				}
			}
		}
		goto out;
	}
	if (existed && dst_len == src_len && !memcmp(dst, src, src_len)) {
		goto out; /* nothing changes: nothing written */
	}
	if (!kept) {
		nx_log(
		    NX_LOG_WARN, "conf",
		    "%s: rewritten by libfyaml's emitter (its layout defeated an in-place edit): "
		    "comments were dropped; the previous file is %s.bak",
		    path, path);
	}
	char bak[PATH_MAX];
	const char *step = "";
	if (snprintf(bak, sizeof(bak), "%s.bak", real) >= (int)sizeof(bak)) {
		rc = -ENAMETOOLONG;
		step = "backup name";
	}
	if (!rc && existed) {
		rc = replace_file(bak, src, src_len, &st, &step);
	}
	if (!rc) {
		rc = replace_file(real, dst, dst_len, existed ? &st : NULL, &step);
	}
	if (rc) {
		fail(err, errlen, "%s: %s: %s", path, step, nx_strerror(rc));
		goto out;
	}
	fsync_dir(real);
out:
	nx_mem_free(NX_OWNER_config, src, src_cap);
	nx_mem_free(NX_OWNER_config, dst, dst ? dst_len + 1 : 0);
	return rc;
}

int nx_conf_rewrite(const char *path, const char *key, const char *yaml, char *err, size_t errlen)
{
	struct nx_conf_change ch = {.key = key, .yaml = yaml};
	return nx_conf_rewrite_many(path, &ch, 1, NULL, err, errlen);
}

/*
 * The TOML that FTL writes for pihole.toml (Pi-hole v6, src/config/toml_writer.c and the
 * sample in its test/pihole.toml): "[dns]" and "[dns.blocking]" table headers (indented),
 * `key = value` lines, values that are basic strings ("..." with \ escapes), literal strings
 * ('...'), integers, floats, true/false, and arrays of those written one element per line,
 * with `#` comments anywhere a value has ended (FTL appends "### CHANGED, default = ...").
 * That subset is read here; what it does not cover (multi-line strings, inline tables, dotted
 * keys, arrays of tables) is refused with its line number rather than guessed at.
 *
 * The text is untrusted: every read goes through one cursor that checks its end.
 */
#include "import/impl.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"

#define TOML_KEY_MAX 256 /* bytes of a full dotted key; FTL's longest is ~40 */

struct cur {
	const char *p, *end;
	unsigned line;
	char *err;
	size_t errlen;
	bool failed;
};

static int fail(struct cur *c, const char *why)
{
	if (!c->failed) {
		snprintf(c->err, c->errlen, "line %u: %s", c->line, why);
		c->failed = true;
	}
	return NX_ECORRUPT;
}

static void skip_ws(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) {
		c->p++;
	}
}

/* Spaces, comments and newlines (inside arrays). */
static void skip_ws_nl(struct cur *c)
{
	for (;;) {
		skip_ws(c);
		if (c->p < c->end && *c->p == '#') {
			while (c->p < c->end && *c->p != '\n') {
				c->p++;
			}
		}
		if (c->p < c->end && (*c->p == '\n' || *c->p == '\r')) {
			c->line += *c->p == '\n';
			c->p++;
			continue;
		}
		return;
	}
}

/* The rest of a line after a value: spaces, an optional comment, the newline or the end. */
static int end_of_line(struct cur *c)
{
	skip_ws(c);
	if (c->p < c->end && *c->p == '#') {
		while (c->p < c->end && *c->p != '\n') {
			c->p++;
		}
	}
	if (c->p < c->end && *c->p == '\r') {
		c->p++;
	}
	if (c->p < c->end && *c->p != '\n') {
		return fail(c, "unexpected text after the value");
	}
	if (c->p < c->end) {
		c->p++;
		c->line++;
	}
	return 0;
}

static bool bare_key_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '-';
}

/* UTF-8 of a \u or \U escape. */
static size_t utf8(unsigned long cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A string or a bare scalar into the arena; NULL on error (c->failed). */
static const char *scalar(struct nx_import *imp, struct cur *c)
{
	if (c->p >= c->end) {
		fail(c, "a value is missing");
		return NULL;
	}
	char q = *c->p;
	if (q == '"' || q == '\'') {
		if (c->end - c->p >= 3 && c->p[1] == q && c->p[2] == q) {
			fail(c, "multi-line strings are not read (FTL does not write them)");
			return NULL;
		}
		c->p++;
		const char *start = c->p;
		/* the decoded text is never longer than the quoted one */
		size_t cap = 0;
		while (start + cap < c->end && start[cap] != '\n') {
			cap++;
		}
		char *out = nx_import_alloc(imp, cap + 1);
		if (!out) {
			fail(c, "out of memory");
			return NULL;
		}
		size_t n = 0;
		for (;;) {
			if (c->p >= c->end || *c->p == '\n') {
				fail(c, "unterminated string");
				return NULL;
			}
			char ch = *c->p++;
			if (ch == q) {
				break;
			}
			if (ch != '\\' || q == '\'') {
				out[n++] = ch;
				continue;
			}
			if (c->p >= c->end) {
				fail(c, "unterminated string");
				return NULL;
			}
			char e = *c->p++;
			const char *map = e ? strchr("b\bt\tn\nf\fr\r\"\"\\\\", e) : NULL;
			if (map && ((map - "b\bt\tn\nf\fr\r\"\"\\\\") % 2) == 0) {
				out[n++] = map[1];
			} else if (e == 'u' || e == 'U') {
				int digits = e == 'u' ? 4 : 8;
				unsigned long cp = 0;
				for (int i = 0; i < digits; i++) {
					char h = c->p < c->end ? *c->p++ : 0;
					int v = h >= '0' && h <= '9'   ? h - '0'
						: h >= 'a' && h <= 'f' ? h - 'a' + 10
						: h >= 'A' && h <= 'F' ? h - 'A' + 10
								       : -1;
					if (v < 0) {
						fail(c, "bad \\u escape");
						return NULL;
					}
					cp = cp * 16 + (unsigned long)v;
				}
				/* fits: an escape's output is shorter than its text */
				if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
					fail(c, "bad \\u escape");
					return NULL;
				}
				n += utf8(cp, out + n);
			} else {
				fail(c, "unknown escape in a string");
				return NULL;
			}
		}
		out[n] = '\0';
		return out;
	}
	if (q == '{') {
		fail(c, "inline tables are not read (FTL does not write them)");
		return NULL;
	}
	const char *start = c->p;
	while (c->p < c->end &&
	       (bare_key_char(*c->p) || *c->p == '.' || *c->p == '+' || *c->p == ':')) {
		c->p++;
	}
	if (c->p == start) {
		fail(c, "a value is missing");
		return NULL;
	}
	return nx_import_strndup(imp, start, (size_t)(c->p - start));
}

static int parse_array(struct nx_import *imp, struct cur *c, struct nx_toml_val *v)
{
	c->p++; /* '[' */
	v->is_array = true;
	for (;;) {
		skip_ws_nl(c);
		if (c->p >= c->end) {
			return fail(c, "unterminated array");
		}
		if (*c->p == ']') {
			c->p++;
			return 0;
		}
		if (*c->p == '[') {
			return fail(c, "nested arrays are not read (FTL does not write them)");
		}
		const char *s = scalar(imp, c);
		if (!s) {
			return NX_ECORRUPT;
		}
		nx_import_strv_push(imp, &v->elems, s);
		skip_ws_nl(c);
		if (c->p < c->end && *c->p == ',') {
			c->p++;
		} else if (c->p < c->end && *c->p != ']') {
			return fail(c, "expected ',' or ']' in an array");
		}
	}
}

int nx_toml_parse(struct nx_import *imp, const char *text, size_t len, struct nx_toml_val **out,
		  char *err, size_t errlen)
{
	struct cur c = {text, text + len, 1, err, errlen, false};
	char table[TOML_KEY_MAX] = "";
	struct nx_toml_val *head = NULL, **tail = &head;
	if (memchr(text, '\0', len)) {
		return fail(&c, "the file holds a NUL byte");
	}
	for (;;) {
		skip_ws_nl(&c);
		if (c.p >= c.end) {
			break;
		}
		if (*c.p == '[') {
			c.p++;
			if (c.p < c.end && *c.p == '[') {
				return fail(
				    &c, "arrays of tables are not read (FTL does not write them)");
			}
			const char *start = c.p;
			while (c.p < c.end && (bare_key_char(*c.p) || *c.p == '.')) {
				c.p++;
			}
			size_t n = (size_t)(c.p - start);
			if (!n || c.p >= c.end || *c.p != ']' || n >= sizeof(table)) {
				return fail(&c, "bad table header");
			}
			memcpy(table, start, n);
			table[n] = '\0';
			c.p++;
			if (end_of_line(&c)) {
				return NX_ECORRUPT;
			}
			continue;
		}
		unsigned line = c.line;
		const char *start = c.p;
		while (c.p < c.end && bare_key_char(*c.p)) {
			c.p++;
		}
		size_t klen = (size_t)(c.p - start);
		if (!klen) {
			return fail(&c, "expected a key");
		}
		if (c.p < c.end && *c.p == '.') {
			return fail(&c, "dotted keys are not read (FTL writes tables)");
		}
		char key[TOML_KEY_MAX];
		int kn = snprintf(key, sizeof(key), "%s%s%.*s", table, table[0] ? "." : "",
				  (int)klen, start);
		if (kn < 0 || (size_t)kn >= sizeof(key)) {
			return fail(&c, "key too long");
		}
		skip_ws(&c);
		if (c.p >= c.end || *c.p != '=') {
			return fail(&c, "expected '=' after the key");
		}
		c.p++;
		skip_ws(&c);
		struct nx_toml_val *v = nx_import_alloc(imp, sizeof(*v));
		if (!v) {
			return fail(&c, "out of memory");
		}
		v->key = nx_import_strdup(imp, key);
		v->line = line;
		if (c.p < c.end && *c.p == '[') {
			if (parse_array(imp, &c, v)) {
				return NX_ECORRUPT;
			}
		} else if (!(v->scalar = scalar(imp, &c))) {
			return NX_ECORRUPT;
		}
		if (end_of_line(&c)) {
			return NX_ECORRUPT;
		}
		*tail = v;
		tail = &v->next;
	}
	if (imp->oom) {
		return fail(&c, "out of memory");
	}
	*out = head;
	return 0;
}

const struct nx_toml_val *nx_toml_get(const struct nx_toml_val *vals, const char *key)
{
	const struct nx_toml_val *found = NULL;
	for (const struct nx_toml_val *v = vals; v; v = v->next) {
		if (!strcmp(v->key, key)) {
			found = v; /* the last one, as a repeated key would be read */
		}
	}
	return found;
}

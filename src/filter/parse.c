/* Line syntaxes: hosts, domains, adblock (DNS subset), wildcard; per-line auto-detection. */
#include "filter/parse.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "filter/side_impl.h"

static const char *const format_names[] = {
#define NX_FILTER_FORMAT_NAME(id, text) text,
    NX_FILTER_FORMATS(NX_FILTER_FORMAT_NAME)
#undef NX_FILTER_FORMAT_NAME
};
static const char *const skip_names[] = {"none",
#define NX_FILTER_SKIP_NAME(id, help) #id,
					 NX_FILTER_SKIPS(NX_FILTER_SKIP_NAME)
#undef NX_FILTER_SKIP_NAME
};
static const char *const skip_helps[] = {"not skipped",
#define NX_FILTER_SKIP_HELP(id, help) help,
					 NX_FILTER_SKIPS(NX_FILTER_SKIP_HELP)
#undef NX_FILTER_SKIP_HELP
};
static const char *const kind_names[] = {
#define NX_FILTER_KIND_NAME(id, text) text,
    NX_FILTER_KINDS(NX_FILTER_KIND_NAME)
#undef NX_FILTER_KIND_NAME
};

int nx_filter_format_parse(const char *text, enum nx_filter_format *out)
{
	for (int i = 0; i < NX_FILTER_FMT__COUNT; i++) {
		if (strcmp(text, format_names[i]) == 0) {
			*out = (enum nx_filter_format)i;
			return 0;
		}
	}
	return NX_ECONFIG;
}

const char *nx_filter_format_name(enum nx_filter_format fmt)
{
	return (unsigned)fmt < NX_FILTER_FMT__COUNT ? format_names[fmt] : "?";
}

const char *nx_filter_skip_name(enum nx_filter_skip s)
{
	return (unsigned)s < NX_FILTER_SKIP__COUNT ? skip_names[s] : "?";
}

const char *nx_filter_skip_help(enum nx_filter_skip s)
{
	return (unsigned)s < NX_FILTER_SKIP__COUNT ? skip_helps[s] : "?";
}

const char *nx_filter_kind_name(enum nx_filter_kind k)
{
	return (unsigned)k < NX_FILTER_K__COUNT ? kind_names[k] : "?";
}

static inline bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static void skip(const struct nx_filter_parse_cb *cb, void *arg, enum nx_filter_skip why)
{
	if (cb->skip) {
		cb->skip(arg, why);
	}
}

/* A side-structure rule when the line checks out, else skipped as `why`. */
static void side_or_skip(const struct nx_filter_parse_cb *cb, void *arg, const char *line,
			 size_t len, enum nx_filter_skip why)
{
	if (cb->side && nx_filter_side_check(line, len, NULL, 0) == NX_FILTER_SKIP_NONE) {
		cb->side(arg, line, len);
		return;
	}
	skip(cb, arg, why);
}

/* Does this adblock rule need the side structure: a /regex/, or modifiers other than a lone
 * $badfilter (which the bodies express)? */
static bool side_worthy(const char *s, size_t len)
{
	if (len >= 2 && s[0] == '@' && s[1] == '@') {
		s += 2;
		len -= 2;
	}
	if (len >= 1 && s[0] == '/') {
		return true;
	}
	const char *d = memchr(s, '$', len);
	if (!d) {
		return false;
	}
	size_t ml = len - (size_t)(d + 1 - s);
	return !(ml == 9 && memcmp(d + 1, "badfilter", 9) == 0);
}

/* Normalise and emit one name as `kind`, or report why not. */
static void emit(const struct nx_filter_parse_cb *cb, void *arg, enum nx_filter_kind kind,
		 const char *s, size_t len)
{
	char norm[NX_FILTER_NAME_MAX + 1];
	size_t nlen = 0;
	enum nx_filter_skip why = nx_filter_name_norm(s, len, norm, &nlen);
	if (why != NX_FILTER_SKIP_NONE) {
		skip(cb, arg, why);
		return;
	}
	if (cb->rule) {
		cb->rule(arg, kind, norm, nlen);
	}
}

/* An address in the first column of a hosts line ("0.0.0.0", "::1", "fe80::1%lo0"). */
static bool is_ip_token(const char *s, size_t len)
{
	char buf[64];
	const char *pct = memchr(s, '%', len);
	if (pct) {
		len = (size_t)(pct - s);
	}
	if (len == 0 || len >= sizeof(buf)) {
		return false;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	unsigned char addr[16];
	return inet_pton(AF_INET, buf, addr) == 1 || inet_pton(AF_INET6, buf, addr) == 1;
}

static bool has_cosmetic(const char *s, size_t len)
{
	static const char *const marks[] = {"##", "#@#", "#?#", "#$#", "#%#", "#@$#", "#@?#"};
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] != '#') {
			continue;
		}
		for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]); m++) {
			size_t ml = strlen(marks[m]);
			if (i + ml <= len && memcmp(s + i, marks[m], ml) == 0) {
				return true;
			}
		}
	}
	return false;
}

/* Does the (comment-stripped) line look like adblock syntax? */
static bool looks_adblock(const char *s, size_t len)
{
	if (len >= 2 && s[0] == '@' && s[1] == '@') {
		return true;
	}
	if (s[0] == '|' || s[0] == '/' || (s[0] == '.' && len > 1)) {
		return true;
	}
	if (len >= 3 && memcmp(s, "://", 3) == 0) {
		return true;
	}
	return memchr(s, '^', len) || memchr(s, '$', len);
}

static inline bool host_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_' || c >= 0x80;
}

enum anchor { A_NONE, A_SUB, A_START, A_DOT };

/*
 * Adblock / AdGuard DNS rule. Only rules that name a whole host (or a host and all names
 * under it) are used; everything else is skipped by reason. Accepted narrowings (the compiled
 * rule matches a subset of what the rule says, never more): `||x` without `^` -> `||x^`;
 * `|x` without a terminator -> `|x^`; `$important` -> plain rule (our exceptions, level 7,
 * already run first, so "important beats @@" is not honoured).
 */
static void parse_adblock(const char *s, size_t len, const struct nx_filter_parse_cb *cb, void *arg)
{
	const char *orig = s;
	size_t olen = len;
	if (cb->side && side_worthy(s, len)) {
		enum nx_filter_skip w = nx_filter_side_check(s, len, NULL, 0);
		if (w == NX_FILTER_SKIP_NONE) {
			cb->side(arg, s, len);
		} else {
			skip(cb, arg, w);
		}
		return;
	}
	bool allow = false;
	if (len >= 2 && s[0] == '@' && s[1] == '@') {
		allow = true;
		s += 2;
		len -= 2;
	}
	if (len == 0) {
		skip(cb, arg, NX_FILTER_SKIP_malformed);
		return;
	}
	/* Modifiers: after the last '$' (a regex rule may contain '$' itself: check regex first).
	 */
	if (s[0] == '/') {
		const char *dollar = memchr(s, '$', len);
		size_t body = len;
		while (dollar) {
			/* /re/$mods: the '$' right after the closing slash */
			if (dollar > s + 1 && dollar[-1] == '/') {
				body = (size_t)(dollar - s);
				break;
			}
			dollar = memchr(dollar + 1, '$', len - (size_t)(dollar + 1 - s));
		}
		if (body >= 2 && s[body - 1] == '/') {
			skip(cb, arg, NX_FILTER_SKIP_regex);
		} else {
			skip(cb, arg, NX_FILTER_SKIP_path);
		}
		return;
	}
	bool important = false, badfilter = false;
	const char *dollar = NULL;
	for (size_t i = len; i-- > 0;) {
		if (s[i] == '$') {
			dollar = s + i;
			break;
		}
	}
	if (dollar) {
		const char *m = dollar + 1, *end = s + len;
		if (m == end) {
			skip(cb, arg, NX_FILTER_SKIP_modifier);
			return;
		}
		while (m < end) {
			const char *comma = memchr(m, ',', (size_t)(end - m));
			size_t ml = comma ? (size_t)(comma - m) : (size_t)(end - m);
			if (ml == 9 && memcmp(m, "important", 9) == 0) {
				important = true;
			} else if (ml == 9 && memcmp(m, "badfilter", 9) == 0) {
				badfilter = true;
			} else {
				skip(cb, arg, NX_FILTER_SKIP_modifier);
				return;
			}
			m += ml + (comma ? 1 : 0);
		}
		len = (size_t)(dollar - s);
		if (important && badfilter) {
			/* would cancel "R$important" only; we do not keep that distinction */
			skip(cb, arg, NX_FILTER_SKIP_modifier);
			return;
		}
	}
	enum anchor a = A_NONE;
	if (len >= 3 && memcmp(s, "://", 3) == 0) {
		side_or_skip(cb, arg, orig, olen, NX_FILTER_SKIP_pattern);
		return;
	} else if (len >= 2 && s[0] == '|' && s[1] == '|') {
		a = A_SUB;
		s += 2;
		len -= 2;
	} else if (len >= 1 && s[0] == '|') {
		a = A_START;
		s += 1;
		len -= 1;
	} else if (len >= 1 && s[0] == '.') {
		a = A_DOT;
		s += 1;
		len -= 1;
	}
	size_t h = 0;
	while (h < len && host_byte((unsigned char)s[h])) {
		h++;
	}
	const char *tail = s + h;
	size_t tlen = len - h;
	if (h == 0) {
		side_or_skip(cb, arg, orig, olen,
			     memchr(s, '*', len) ? NX_FILTER_SKIP_pattern
						 : NX_FILTER_SKIP_malformed);
		return;
	}
	bool term_caret = false, term_end = false;
	if (tlen == 1 && tail[0] == '^') {
		term_caret = true;
	} else if (tlen == 2 && tail[0] == '^' && tail[1] == '|') {
		term_caret = term_end = true;
	} else if (tlen == 1 && tail[0] == '|') {
		term_end = true;
	} else if (tlen > 0) {
		if (tail[0] == '/' || tail[0] == ':' || (tail[0] == '^' && tlen > 1)) {
			side_or_skip(cb, arg, orig, olen,
				     memchr(tail, '*', tlen) && tail[0] != '/' && tail[0] != ':'
					 ? NX_FILTER_SKIP_pattern
					 : NX_FILTER_SKIP_path);
		} else {
			side_or_skip(cb, arg, orig, olen, NX_FILTER_SKIP_pattern);
		}
		return;
	}
	/* An IP "host" (e.g. 188.72.219.36^) matches answers or URLs, not question names. */
	char norm[NX_FILTER_NAME_MAX + 1];
	size_t nlen = 0;
	enum nx_filter_skip why = nx_filter_name_norm(s, h, norm, &nlen);
	if (why != NX_FILTER_SKIP_NONE) {
		skip(cb, arg, why);
		return;
	}
	enum nx_filter_kind kind;
	switch (a) {
	case A_SUB:
		kind = allow ? NX_FILTER_K_ALLOW_SUB : NX_FILTER_K_ABP_SUB;
		break;
	case A_START:
		kind = allow ? NX_FILTER_K_ALLOW_EXACT : NX_FILTER_K_ABP_EXACT;
		break;
	case A_DOT:
		/* ".x^" matches hosts ending in ".x": proper subdomains. Without a terminator it
		 * would match ".x" anywhere in a host; an exception for subdomains only has no
		 * body. */
		if (!(term_caret || term_end) || allow || badfilter) {
			side_or_skip(cb, arg, orig, olen, NX_FILTER_SKIP_pattern);
			return;
		}
		kind = NX_FILTER_K_WILD;
		break;
	case A_NONE:
	default:
		/* "x^" unanchored matches "badx" too: wider than any body, so skipped. A bare "x"
		 * is AdGuard's host rule: x only. */
		if (term_caret || term_end) {
			side_or_skip(cb, arg, orig, olen, NX_FILTER_SKIP_pattern);
			return;
		}
		if (badfilter) {
			skip(cb, arg, NX_FILTER_SKIP_modifier);
			return;
		}
		kind = allow ? NX_FILTER_K_ALLOW_EXACT : NX_FILTER_K_PLAIN;
		break;
	}
	if (badfilter) {
		switch (kind) {
		case NX_FILTER_K_ABP_SUB:
			kind = NX_FILTER_K_BAD_ABP_SUB;
			break;
		case NX_FILTER_K_ABP_EXACT:
			kind = NX_FILTER_K_BAD_ABP_EXACT;
			break;
		case NX_FILTER_K_ALLOW_SUB:
			kind = NX_FILTER_K_BAD_ALLOW_SUB;
			break;
		default:
			kind = NX_FILTER_K_BAD_ALLOW_EXACT;
			break;
		}
	}
	if (important && cb->important) {
		cb->important(arg);
	}
	if (cb->rule) {
		cb->rule(arg, kind, norm, nlen);
	}
}

/* Split off the first whitespace-separated token. */
static size_t token(const char *s, size_t len)
{
	size_t i = 0;
	while (i < len && !is_space(s[i])) {
		i++;
	}
	return i;
}

static void parse_hosts(const char *s, size_t len, size_t t0, const struct nx_filter_parse_cb *cb,
			void *arg)
{
	size_t pos = t0, names = 0;
	bool listed = cb->side && cb->hosts_listed && !nx_filter_hosts_null_addr(s, t0);
	for (;;) {
		while (pos < len && is_space(s[pos])) {
			pos++;
		}
		if (pos >= len) {
			break;
		}
		size_t t = token(s + pos, len - pos);
		if (listed) {
			/* one side rule "addr name" per name, so each name is checked alone */
			char norm[NX_FILTER_NAME_MAX + 1], one[NX_FILTER_NAME_MAX + 80];
			size_t nlen;
			enum nx_filter_skip why = nx_filter_name_norm(s + pos, t, norm, &nlen);
			if (why != NX_FILTER_SKIP_NONE || t0 > 64) {
				skip(cb, arg,
				     why != NX_FILTER_SKIP_NONE ? why : NX_FILTER_SKIP_malformed);
			} else {
				int n = snprintf(one, sizeof(one), "%.*s %s", (int)t0, s, norm);
				cb->side(arg, one, (size_t)n);
			}
		} else {
			emit(cb, arg, NX_FILTER_K_PLAIN, s + pos, t);
		}
		names++;
		pos += t;
	}
	if (names == 0) {
		skip(cb, arg, NX_FILTER_SKIP_malformed);
	}
}

/* One bare token: a plain name, or "*.x" where wildcard syntax is allowed. */
static void parse_single(const char *s, size_t len, enum nx_filter_format fmt,
			 const struct nx_filter_parse_cb *cb, void *arg)
{
	if (len >= 2 && s[0] == '*' && s[1] == '.') {
		if (fmt != NX_FILTER_FMT_AUTO && fmt != NX_FILTER_FMT_WILDCARD) {
			skip(cb, arg,
			     fmt == NX_FILTER_FMT_ADBLOCK ? NX_FILTER_SKIP_pattern
							  : NX_FILTER_SKIP_format_mismatch);
			return;
		}
		if (memchr(s + 2, '*', len - 2)) {
			skip(cb, arg, NX_FILTER_SKIP_pattern);
			return;
		}
		emit(cb, arg, NX_FILTER_K_WILD, s + 2, len - 2);
		return;
	}
	if (memchr(s, '*', len)) {
		skip(cb, arg, NX_FILTER_SKIP_pattern);
		return;
	}
	if (memchr(s, '/', len)) {
		skip(cb, arg, NX_FILTER_SKIP_path);
		return;
	}
	emit(cb, arg, NX_FILTER_K_PLAIN, s, len);
}

enum nx_filter_line nx_filter_parse_line(const char *line, size_t len, enum nx_filter_format fmt,
					 const struct nx_filter_parse_cb *cb, void *arg)
{
	const char *s = line;
	if (len >= 3 && (unsigned char)s[0] == 0xef && (unsigned char)s[1] == 0xbb &&
	    (unsigned char)s[2] == 0xbf) {
		s += 3;
		len -= 3;
	}
	while (len > 0 && is_space(*s)) {
		s++;
		len--;
	}
	while (len > 0 && is_space(s[len - 1])) {
		len--;
	}
	if (len == 0) {
		return NX_FILTER_LINE_BLANK;
	}
	if (s[0] == '#' || s[0] == '!') {
		return NX_FILTER_LINE_COMMENT;
	}
	if (s[0] == '[' && s[len - 1] == ']') {
		return NX_FILTER_LINE_COMMENT; /* [Adblock Plus 2.0] */
	}
	if (has_cosmetic(s, len)) {
		skip(cb, arg, NX_FILTER_SKIP_cosmetic);
		return NX_FILTER_LINE_RULE;
	}
	/* Inline comments. Adblock: only "<blank>#..." (a '#' can be part of a rule elsewhere);
	 * the other syntaxes: from any '#', which no name contains. */
	bool adb =
	    (fmt == NX_FILTER_FMT_AUTO || fmt == NX_FILTER_FMT_ADBLOCK) && looks_adblock(s, len);
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '#' && (!adb || (i > 0 && is_space(s[i - 1])))) {
			len = i;
			break;
		}
	}
	while (len > 0 && is_space(s[len - 1])) {
		len--;
	}
	if (len == 0) {
		return NX_FILTER_LINE_COMMENT;
	}
	if (adb) {
		parse_adblock(s, len, cb, arg);
		return NX_FILTER_LINE_RULE;
	}
	if (fmt != NX_FILTER_FMT_AUTO && fmt != NX_FILTER_FMT_ADBLOCK && looks_adblock(s, len)) {
		skip(cb, arg, NX_FILTER_SKIP_format_mismatch);
		return NX_FILTER_LINE_RULE;
	}
	size_t t0 = token(s, len);
	if (t0 < len) {
		/* Several tokens: a hosts line when the first is an address. */
		if (!is_ip_token(s, t0)) {
			skip(cb, arg, NX_FILTER_SKIP_malformed);
		} else if (fmt == NX_FILTER_FMT_DOMAINS || fmt == NX_FILTER_FMT_WILDCARD) {
			skip(cb, arg, NX_FILTER_SKIP_format_mismatch);
		} else {
			parse_hosts(s, len, t0, cb, arg);
		}
		return NX_FILTER_LINE_RULE;
	}
	parse_single(s, len, fmt, cb, arg);
	return NX_FILTER_LINE_RULE;
}

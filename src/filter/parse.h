/*
 * Blocklist line parsing: formats, rule kinds, skip reasons, name normalisation.
 *
 * One line in, zero or more (kind, name) rules out through a callback; every unusable part is
 * reported with a reason (never silently dropped, never widened). Pure functions: no I/O, no
 * global state; any thread. Names that contain non-ASCII bytes go through libidn2, which
 * allocates internally (compile time only, never on the query path).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest list name in presentation form without the trailing dot (RFC 1035: 255 wire bytes). */
#define NX_FILTER_NAME_MAX 253
/* Longest accepted input line in bytes; longer lines are skipped as line_too_long. A real
 * list line is a name plus a few modifiers; 4 KiB leaves room for long regex rules. */
#define NX_FILTER_LINE_MAX 4096

#define NX_FILTER_FORMATS(X)                                                                       \
	X(AUTO, "auto")                                                                            \
	X(HOSTS, "hosts")                                                                          \
	X(DOMAINS, "domains")                                                                      \
	X(ADBLOCK, "adblock")                                                                      \
	X(WILDCARD, "wildcard")

enum nx_filter_format {
#define NX_FILTER_FORMAT_ENUM(id, text) NX_FILTER_FMT_##id,
	NX_FILTER_FORMATS(NX_FILTER_FORMAT_ENUM)
#undef NX_FILTER_FORMAT_ENUM
	    NX_FILTER_FMT__COUNT
};

/* "auto", "hosts", ... -> format; returns 0 or NX_ECONFIG. */
int nx_filter_format_parse(const char *text, enum nx_filter_format *out);
const char *nx_filter_format_name(enum nx_filter_format fmt);

/*
 * What a rule says about a name. The compiler turns the set of kinds seen for one name into
 * bodies: .list <- PLAIN|ABP_SUB|ABP_EXACT, .wild <- ABP_SUB|WILD, .allow sub <- ALLOW_SUB,
 * .allow exact <- ALLOW_EXACT. A BAD_* kind ($badfilter) cancels the same rule of the same source.
 */
#define NX_FILTER_KINDS(X)                                                                         \
	X(PLAIN, "plain")	      /* hosts / domains / bare name: x only */                    \
	X(ABP_SUB, "abp_sub")	      /* ||x^ : x and its subdomains */                            \
	X(ABP_EXACT, "abp_exact")     /* |x^, |x| : x only */                                      \
	X(WILD, "wild")		      /* *.x, .x^ : proper subdomains of x only */                 \
	X(ALLOW_SUB, "allow_sub")     /* @@||x^ : exception for x and its subdomains */            \
	X(ALLOW_EXACT, "allow_exact") /* @@|x^, @@|x| : exception for x only */                    \
	X(BAD_ABP_SUB, "bad_abp_sub")                                                              \
	X(BAD_ABP_EXACT, "bad_abp_exact")                                                          \
	X(BAD_ALLOW_SUB, "bad_allow_sub")                                                          \
	X(BAD_ALLOW_EXACT, "bad_allow_exact")

enum nx_filter_kind {
#define NX_FILTER_KIND_ENUM(id, text) NX_FILTER_K_##id,
	NX_FILTER_KINDS(NX_FILTER_KIND_ENUM)
#undef NX_FILTER_KIND_ENUM
	    NX_FILTER_K__COUNT
};

/* Why a line (or one name of a hosts line) was not used. The order is the report order. */
#define NX_FILTER_SKIPS(X)                                                                         \
	X(line_too_long, "line longer than NX_FILTER_LINE_MAX bytes")                              \
	X(invalid_name, "label or length rules broken, or a byte not allowed in a name")           \
	X(idn, "Unicode name that libidn2 cannot convert, or an xn-- label that is not Punycode")  \
	X(localhost, "localhost-type entry (localhost, broadcasthost, ip6-*, ...)")                \
	X(ip_rule, "bare IP address (matches answers, not questions)")                             \
	X(modifier, "adblock $modifier a DNS list cannot honour exactly ($dnstype, $client, ...)") \
	X(path, "adblock rule with a URL path or port")                                            \
	X(regex, "adblock /regex/ rule")                                                           \
	X(pattern, "adblock pattern that is not a whole host (*, unanchored, ://, .x without ^)")  \
	X(cosmetic, "adblock cosmetic rule (##, #@#, #?#, #$#)")                                   \
	X(malformed, "line in no recognised syntax (e.g. hosts line without a name)")              \
	X(format_mismatch, "line valid only in another format than the one forced for the source") \
	X(side_limit, "side-structure rule beyond NX_FILTER_SIDE_RULES_MAX for one source")

enum nx_filter_skip {
	NX_FILTER_SKIP_NONE = 0,
#define NX_FILTER_SKIP_ENUM(id, help) NX_FILTER_SKIP_##id,
	NX_FILTER_SKIPS(NX_FILTER_SKIP_ENUM)
#undef NX_FILTER_SKIP_ENUM
	    NX_FILTER_SKIP__COUNT
};

const char *nx_filter_skip_name(enum nx_filter_skip s);
const char *nx_filter_skip_help(enum nx_filter_skip s);
const char *nx_filter_kind_name(enum nx_filter_kind k);

/* What a whole line was. */
enum nx_filter_line {
	NX_FILTER_LINE_BLANK,	/* empty or whitespace only */
	NX_FILTER_LINE_COMMENT, /* # or ! comment, [Adblock ...] header */
	NX_FILTER_LINE_RULE,	/* produced >= 0 rules and/or skips (see callbacks) */
};

struct nx_filter_parse_cb {
	/* One usable rule. name: normalised (lower case, ASCII, no trailing dot), NUL-terminated,
	 * valid for the call only. */
	void (*rule)(void *arg, enum nx_filter_kind kind, const char *name, size_t len);
	/* One skipped line or name of a line. */
	void (*skip)(void *arg, enum nx_filter_skip why);
	/* Informational: an adblock rule carried $important and was honoured as a plain rule. */
	void (*important)(void *arg);
	/* A rule for the side structure (filter/side.h): modifiers, $important, /regex/, URL
	 * patterns that can match a host, hosts lines with a listed address. The line is
	 * comment-stripped and already checked (nx_filter_side_check); valid for the call only.
	 * NULL: such lines are skipped by reason and $important is a plain rule, as before. */
	void (*side)(void *arg, const char *line, size_t len);
	/* With side: a hosts line whose address is not a null address (0.0.0.0, 127.0.0.1, ::,
	 * ::1) answers with it (side rule "addr name" per name) instead of blocking. */
	bool hosts_listed;
};

/*
 * Parse one line (without its '\n'; a trailing '\r' is tolerated). `fmt` AUTO detects the
 * syntax of this line; a forced format accepts its own syntax plus bare names (exact) and
 * reports other syntaxes as format_mismatch. Lines longer than NX_FILTER_LINE_MAX are the
 * caller's to count (the parser never sees them). Never fails.
 */
enum nx_filter_line nx_filter_parse_line(const char *line, size_t len, enum nx_filter_format fmt,
					 const struct nx_filter_parse_cb *cb, void *arg);

/*
 * Normalise one list name: drop one trailing dot, lower-case ASCII, Unicode -> Punycode
 * (libidn2, IDNA2008 + UTS#46 non-transitional, NFC input), check xn-- labels decode, then
 * labels 1..63 bytes of [a-z0-9_-], total <= NX_FILTER_NAME_MAX. Rejects bare IPv4 addresses
 * (ip_rule) and localhost-type names (localhost). Returns SKIP_NONE and the length in *out_len
 * (out NUL-terminated), or the reason.
 */
enum nx_filter_skip nx_filter_name_norm(const char *in, size_t len,
					char out[NX_FILTER_NAME_MAX + 1], size_t *out_len);

/* Is `text` (len bytes) a valid normalised name as produced above (lower case, ASCII)? */
bool nx_filter_name_valid(const char *text, size_t len);

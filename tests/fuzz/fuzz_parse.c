/*
 * libFuzzer target for the blocklist line parser (filter/parse.h). Input: one mode byte, then
 * the line. Mode bits 0-2 pick the format (mod NX_FILTER_FMT__COUNT: auto, hosts, domains,
 * adblock, wildcard); the line is what a list download hands the parser, at most
 * NX_FILTER_LINE_MAX bytes (longer lines are the caller's to skip, as io.c does).
 * Properties, every one of which the compiler and the matcher rely on:
 *  - the line is classified BLANK, COMMENT or RULE, and only a RULE line calls back;
 *  - every rule has a kind in range and a name that is NUL-terminated at len, at most
 *    NX_FILTER_NAME_MAX bytes, passes nx_filter_name_valid, and normalises to itself
 *    (the parser never hands out a name the matcher would see differently);
 *  - every skip has a reason in range (never SKIP_NONE) and a name and help text;
 *  - nx_filter_name_norm on the raw bytes: success gives a valid name that is a fixed point.
 * A broken property aborts. Built with -fsanitize=fuzzer when meson -Dfuzzing=true, and always
 * as fuzz_parse_replay so tests/fuzz/corpus/parse replays in `meson test`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_parse: %s:%d: check failed: %s\n", __FILE__,         \
				__LINE__, #x);                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct seen {
	unsigned rules;
	unsigned skips;
};

static void fixed_point(const char *name, size_t len)
{
	char again[NX_FILTER_NAME_MAX + 1];
	size_t alen = 0;
	CHECK(nx_filter_name_norm(name, len, again, &alen) == NX_FILTER_SKIP_NONE);
	CHECK(alen == len && memcmp(again, name, len) == 0);
}

static void on_rule(void *arg, enum nx_filter_kind kind, const char *name, size_t len)
{
	struct seen *s = arg;
	s->rules++;
	CHECK((unsigned)kind < NX_FILTER_K__COUNT);
	CHECK(nx_filter_kind_name(kind) != NULL);
	CHECK(len >= 1 && len <= NX_FILTER_NAME_MAX);
	CHECK(name[len] == '\0' && strlen(name) == len);
	CHECK(nx_filter_name_valid(name, len));
	fixed_point(name, len);
}

static void on_skip(void *arg, enum nx_filter_skip why)
{
	struct seen *s = arg;
	s->skips++;
	CHECK(why > NX_FILTER_SKIP_NONE && why < NX_FILTER_SKIP__COUNT);
	CHECK(nx_filter_skip_name(why) != NULL && nx_filter_skip_help(why) != NULL);
}

static void on_important(void *arg)
{
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char line[NX_FILTER_LINE_MAX + 1];
	if (size < 1) {
		return 0;
	}
	enum nx_filter_format fmt = (enum nx_filter_format)((data[0] & 7) % NX_FILTER_FMT__COUNT);
	size_t len = size - 1;
	if (len > NX_FILTER_LINE_MAX) {
		len = NX_FILTER_LINE_MAX;
	}
	/* a copy, so a read past the line is a read past the end of an exact-size buffer under
	 * ASan in the replay (which hands us an exact-size copy of the file) */
	memcpy(line, data + 1, len);
	line[len] = '\0';
	const char *p = (const char *)data + 1;

	static const struct nx_filter_parse_cb cb = {
	    .rule = on_rule, .skip = on_skip, .important = on_important};
	struct seen s = {0};
	enum nx_filter_line kind = nx_filter_parse_line(p, len, fmt, &cb, &s);
	CHECK(kind == NX_FILTER_LINE_BLANK || kind == NX_FILTER_LINE_COMMENT ||
	      kind == NX_FILTER_LINE_RULE);
	if (kind != NX_FILTER_LINE_RULE) {
		CHECK(s.rules == 0 && s.skips == 0);
	}
	/* the parser never reads a NUL terminator it was not given: the same bytes with a
	 * terminator behind them must parse the same way */
	struct seen t = {0};
	CHECK(nx_filter_parse_line(line, len, fmt, &cb, &t) == kind);
	CHECK(t.rules == s.rules && t.skips == s.skips);

	char norm[NX_FILTER_NAME_MAX + 1];
	size_t nlen = 0;
	enum nx_filter_skip why = nx_filter_name_norm(p, len, norm, &nlen);
	CHECK(why >= NX_FILTER_SKIP_NONE && why < NX_FILTER_SKIP__COUNT);
	if (why == NX_FILTER_SKIP_NONE) {
		CHECK(nlen <= NX_FILTER_NAME_MAX && norm[nlen] == '\0');
		CHECK(nx_filter_name_valid(norm, nlen));
		fixed_point(norm, nlen);
	}
	return 0;
}

/*
 * libFuzzer target for the AdGuard rule language (filter/side.c, filter/lists.c, the parser's
 * side path): arbitrary bytes are a list. Every line goes through nx_filter_parse_line with the
 * side callback and the lines it hands over through nx_filter_side_add_line (as a list source
 * and, from a second builder, as user rules: every line straight in); both are built and each
 * line's first token, plus fixed names, is decided under a few clients and types; rewrite
 * answers are written and must parse. Properties: a parser-accepted side line is accepted by
 * the builder, results stay in range, matched offsets stay inside the name, the deciding rule
 * has a text. A broken property aborts. Built as fuzz_side (libFuzzer, -Dfuzzing=true) and
 * always in fuzz_side_replay, which replays tests/fuzz/corpus/side in the normal test run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "dns/msg.h"
#include "dns/wire.h"
#include "filter/lists.h"
#include "filter/parse.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_side: %s:%d: check failed: %s\n", __FILE__,          \
				__LINE__, #x);                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define LINES_MAX 256 /* per input: keeps one run fast */

struct ctx {
	struct nx_filter_side_builder *b;
	unsigned accepted;
};

static void on_side(void *arg, const char *line, size_t len)
{
	struct ctx *c = arg;
	char err[256];
	int rc = nx_filter_side_add_line(c->b, line, len, 0, err, sizeof(err));
	/* what the compiler writes to .side must load (caps aside) */
	CHECK(rc == 0 || rc == NX_ELIMIT);
	c->accepted++;
}

static void decide_all(const struct nx_filter_side *side, const char *name, size_t len)
{
	char text[NX_DNS_NAME_MAX + 2];
	if (len == 0 || len > NX_FILTER_NAME_MAX) {
		return;
	}
	memcpy(text, name, len);
	text[len] = '\0';
	uint8_t wire[NX_DNS_NAME_MAX];
	int wl = nx_dns_name_from_text(text, wire);
	if (wl <= 0) {
		return;
	}
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, "10.1.2.3", &sa.sin_addr);
	static const char *const tags[] = {"pc", "kid"};
	static const uint16_t types[] = {1, 28, 16, 5};
	for (int v = 0; v < 4; v++) {
		struct nx_filter_qctx q = {.wire = wire,
					   .wlen = (size_t)wl,
					   .qtype = types[v],
					   .client = v & 1 ? (const struct sockaddr *)&sa : NULL,
					   .client_name = v & 2 ? "Frank's laptop" : NULL,
					   .tags = tags,
					   .ntags = (size_t)(v % 3),
					   .eligible = v == 3 ? 0 : ~0ull};
		struct nx_filter_result r;
		enum nx_filter_action a = nx_filter_lists_decide(NULL, side, &q, &r);
		CHECK(a == r.action);
		CHECK(a <= NX_FILTER_ACT_LOCAL);
		CHECK((size_t)r.matched_off + r.matched_len <= (size_t)wl);
		if (r.side_rule >= 0) {
			size_t tl = 0;
			CHECK(nx_filter_side_rule_text(side, r.side_rule, &tl) != NULL && tl > 0);
		}
		if (r.rewrite != NX_FILTER_RW_NONE) {
			CHECK(a == NX_FILTER_ACT_BLOCK);
			struct nx_dns_question qq = {.qtype = q.qtype, .qclass = 1};
			memcpy(qq.name, wire, (size_t)wl);
			qq.name_len = (uint8_t)wl;
			struct nx_dns_reply_ctx ctx = {.id = 1, .q = &qq, .max_size = 512};
			uint8_t buf[512];
			int n = nx_filter_rewrite_answer(side, &q, &r, &ctx, 60, buf, sizeof(buf));
			CHECK(n > 0 || n == NX_ETRUNC);
			if (n > 0) {
				struct nx_dns_msg m;
				CHECK(nx_dns_msg_parse(buf, (size_t)n, &m) == 0);
			}
		}
	}
}

/*
 * The prefilter (literal, minimum length, first bytes) must never hide a match: a side holding
 * only the regex `re` (a user deny rule) blocks exactly the names PCRE2 itself matches,
 * caselessly, over the lower-case name.
 */
static void differential(const char *re, size_t rlen, const char *const *names, size_t nnames)
{
	char line[NX_FILTER_LINE_MAX + 3];
	if (rlen < 2 || rlen > NX_FILTER_LINE_MAX) {
		return;
	}
	memcpy(line, re, rlen);
	struct nx_filter_side_builder *b;
	if (nx_filter_side_builder_new(&b) != 0) {
		return;
	}
	char err[256];
	if (nx_filter_side_add_line(b, line, rlen, NX_FILTER_ORIGIN_USER_DENY, err, sizeof(err)) !=
	    0) {
		nx_filter_side_builder_free(b);
		return;
	}
	struct nx_filter_side *side;
	if (nx_filter_side_build(b, &side) != 0) {
		return;
	}
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *code =
	    pcre2_compile((PCRE2_SPTR)(re + 1), rlen - 2,
			  PCRE2_CASELESS | PCRE2_NEVER_BACKSLASH_C | PCRE2_NO_AUTO_CAPTURE |
			      PCRE2_NEVER_UTF | PCRE2_NEVER_UCP,
			  &ec, &eo, NULL);
	pcre2_match_context *mc = pcre2_match_context_create(NULL);
	pcre2_match_data *md = code ? pcre2_match_data_create_from_pattern(code, NULL) : NULL;
	if (code && mc && md) {
		pcre2_set_match_limit(mc, NX_FILTER_RE_MATCH_LIMIT);
		pcre2_set_depth_limit(mc, NX_FILTER_RE_DEPTH_LIMIT);
		pcre2_set_heap_limit(mc, NX_FILTER_RE_HEAP_KIB);
		for (size_t i = 0; i < nnames; i++) {
			uint8_t wire[NX_DNS_NAME_MAX];
			char low[NX_DNS_NAME_MAX + 1];
			int wl = nx_dns_name_from_text(names[i], wire);
			size_t n = strlen(names[i]);
			if (wl <= 0 || n > NX_FILTER_NAME_MAX) {
				continue;
			}
			bool clean = true;
			for (size_t k = 0; k < n; k++) {
				char c = names[i][k];
				c = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
				clean &= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
					 c == '-' || c == '_' || c == '.';
				low[k] = c;
			}
			low[n] = '\0';
			if (!clean || n == 0 || low[n - 1] == '.' || low[0] == '.' ||
			    strstr(low, "..")) {
				continue; /* only list names reach regexes */
			}
			int rc = pcre2_match(code, (PCRE2_SPTR)low, n, 0, 0, md, mc);
			if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
				continue; /* a limit: both sides say no match, not comparable */
			}
			struct nx_filter_qctx q = {
			    .wire = wire, .wlen = (size_t)wl, .qtype = 1, .eligible = ~0ull};
			struct nx_filter_result r;
			enum nx_filter_action a = nx_filter_lists_decide(NULL, side, &q, &r);
			if ((rc >= 0) != (a == NX_FILTER_ACT_BLOCK)) {
				fprintf(stderr, "fuzz_side: /%.*s/ on %s: pcre2 %d, decide %d\n",
					(int)(rlen - 2), re + 1, low, rc, (int)a);
				abort();
			}
		}
	}
	pcre2_match_data_free(md);
	pcre2_match_context_free(mc);
	pcre2_code_free(code);
	nx_filter_side_free(side);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {0};
	struct nx_filter_side_builder *user = NULL;
	if (nx_filter_side_builder_new(&c.b) != 0 || nx_filter_side_builder_new(&user) != 0) {
		nx_filter_side_builder_free(c.b);
		return 0;
	}
	const struct nx_filter_parse_cb cb = {.side = on_side, .hosts_listed = true};
	const char *p = (const char *)data, *end = p + size;
	unsigned lines = 0;
	while (p < end && lines++ < LINES_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (len <= NX_FILTER_LINE_MAX) {
			nx_filter_parse_line(p, len, NX_FILTER_FMT_AUTO, &cb, &c);
			char err[256];
			int rc = nx_filter_side_add_line(user, p, len,
							 lines & 1 ? NX_FILTER_ORIGIN_USER_DENY
								   : NX_FILTER_ORIGIN_USER_ALLOW,
							 err, sizeof(err));
			CHECK(rc == 0 || rc == NX_EFORMAT || rc == NX_ELIMIT || rc == -ENOMEM);
			CHECK(rc == 0 || err[0] != '\0'); /* a refusal always says why */
		}
		p += len + 1;
	}
	struct nx_filter_side *side = NULL, *uside = NULL;
	if (nx_filter_side_build(c.b, &side) != 0 || nx_filter_side_build(user, &uside) != 0) {
		nx_filter_side_free(side);
		return 0;
	}
	static const char *const fixed[] = {"example.org", "ads.example.com", "a",
					    "xn--bcher-kva.example", "1.2.3.4"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		decide_all(side, fixed[i], strlen(fixed[i]));
		decide_all(uside, fixed[i], strlen(fixed[i]));
	}
	/* each line's host-looking part as a query name */
	p = (const char *)data;
	lines = 0;
	while (p < end && lines++ < LINES_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		size_t i = 0;
		while (i < len && (p[i] == '|' || p[i] == '@' || p[i] == '/' || p[i] == '*')) {
			i++;
		}
		size_t j = i;
		while (j < len && ((p[j] >= 'a' && p[j] <= 'z') || (p[j] >= '0' && p[j] <= '9') ||
				   p[j] == '.' || p[j] == '-' || p[j] == '_')) {
			j++;
		}
		decide_all(side, p + i, j - i);
		decide_all(uside, p + i, j - i);
		p += len + 1;
	}
	/* names for the differential: every line's host-looking part, and the line itself */
	const char *names[LINES_MAX + 8];
	char store[LINES_MAX][NX_FILTER_NAME_MAX + 1];
	size_t nn = 0;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		names[nn++] = fixed[i];
	}
	p = (const char *)data;
	lines = 0;
	while (p < end && lines < LINES_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		size_t i = 0;
		while (i < len &&
		       (p[i] == '|' || p[i] == '@' || p[i] == '/' || p[i] == '*' || p[i] == '^')) {
			i++;
		}
		size_t j = i;
		while (j < len && j - i < NX_FILTER_NAME_MAX && p[j] != '/' && p[j] != '$' &&
		       p[j] != '^' && p[j] != '\r') {
			j++;
		}
		memcpy(store[lines], p + i, j - i);
		store[lines][j - i] = '\0';
		names[nn++] = store[lines];
		lines++;
		p += len + 1;
	}
	p = (const char *)data;
	lines = 0;
	while (p < end && lines++ < LINES_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (len >= 2 && p[0] == '/' && p[len - 1] == '/' && !memchr(p, '$', len)) {
			differential(p, len, names, nn);
		}
		p += len + 1;
	}
	nx_filter_side_free(side);
	nx_filter_side_free(uside);
	return 0;
}

/*
 * Deterministic matcher corpus: list text -> compile -> snapshot -> expected decision for every
 * probe (action, reason, matched name, source), text and wire forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "filter/compile.h"
#include "filter/snapshot.h"
#include "helpers.h"

/* Source index order matters: reported source = lowest eligible at the deciding level. */
static const struct {
	const char *name;
	const char *text;
} sources[] = {
    /* 0 */ {"hosts", "0.0.0.0 ads.example\n127.0.0.1 www.tracker.example\n"},
    /* 1 */
    {"abp", "||abp.example^\n|exactabp.example^\n@@||good.abp.example^\n"
	    "@@|only.abp.example^\n"},
    /* 2 */
    {"wild", "*.wildonly.example\nx.example\ny.example\n*.y.example\nsub.w.example\n"
	     "*.w.example\n*.n.example\n*.deep.n.example\n"},
    /* 3 */ {"overlap", "ads.example\n||abp.example^\n*.ads.example\n"},
    /* 4 */ {"allow", "@@||ads.example^\n@@|tracker.example^\n"},
    /* 5 */ {"domains", "Plain.Example\nwww.plain2.example\n"},
};
#define NSRC (sizeof(sources) / sizeof(sources[0]))
#define ALL 0x3full
#define NO_ALLOW (ALL & ~(1ull << 4))
/* no eligible source holds exceptions: the matcher stops at the first level that blocks */
#define NO_EXC (ALL & ~(1ull << 4 | 1ull << 1))

static struct nx_filter_snap *g_snap;
static char *g_dir;

static int setup(void **state)
{
	g_dir = th_tmpdir();
	struct nx_filter_snap_source src[NSRC];
	for (size_t i = 0; i < NSRC; i++) {
		char in[4300];
		snprintf(in, sizeof(in), "%s/%s.txt", g_dir, sources[i].name);
		th_write(in, sources[i].text, strlen(sources[i].text));
		struct nx_filter_compile_opts o = {.name = sources[i].name};
		struct nx_filter_compile_report rep;
		if (nx_filter_compile_file(in, g_dir, &o, &rep) != 0) {
			return -1;
		}
		src[i] = (struct nx_filter_snap_source){sources[i].name, g_dir};
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/corpus.nxs", g_dir);
	if (nx_filter_snap_build(path, src, NSRC, NULL, NULL) != 0) {
		return -1;
	}
	return nx_filter_snap_open(path, &g_snap);
}

static int teardown(void **state)
{
	nx_filter_snap_free(g_snap);
	th_rmtree(g_dir);
	free(g_dir);
	return 0;
}

struct probe {
	const char *name;
	uint64_t mask;
	enum nx_filter_action action;
	enum nx_filter_reason reason;
	const char *matched; /* NULL: nothing */
	int source;
};

#define BLOCK NX_FILTER_ACT_BLOCK
#define ALLOW NX_FILTER_ACT_ALLOW
#define NONE NX_FILTER_ACT_NONE
#define DOM NX_FILTER_R_blocklist_domain
#define WILD NX_FILTER_R_blocklist_wildcard
#define EXC NX_FILTER_R_blocklist_exception
#define NOR NX_FILTER_R_none

static const struct probe probes[] = {
    /* hosts: exact only, never subdomains */
    {"www.tracker.example", ALL, BLOCK, DOM, "www.tracker.example", 0},
    {"a.www.tracker.example", ALL, NONE, NOR, NULL, -1},
    {"tracker.example", NO_ALLOW, NONE, NOR, NULL, -1},
    /* domains: exact, lower-cased */
    {"plain.example", ALL, BLOCK, DOM, "plain.example", 5},
    {"www.plain.example", ALL, NONE, NOR, NULL, -1},
    {"plain2.example", ALL, NONE, NOR, NULL, -1},
    /* ABP ||x^: apex = domain, subdomain = wildcard, both matched x */
    {"abp.example", ALL, BLOCK, DOM, "abp.example", 1},
    {"a.b.abp.example", ALL, BLOCK, WILD, "abp.example", 1},
    {"abp.example.", ALL, BLOCK, DOM, "abp.example", 1},
    {"xabp.example", ALL, NONE, NOR, NULL, -1},
    {"example", ALL, NONE, NOR, NULL, -1},
    /* |x^: x only */
    {"exactabp.example", ALL, BLOCK, DOM, "exactabp.example", 1},
    {"sub.exactabp.example", ALL, NONE, NOR, NULL, -1},
    /* @@||x^ and @@|x^ */
    {"good.abp.example", ALL, ALLOW, EXC, "good.abp.example", 1},
    {"x.good.abp.example", ALL, ALLOW, EXC, "good.abp.example", 1},
    {"only.abp.example", ALL, ALLOW, EXC, "only.abp.example", 1},
    {"x.only.abp.example", ALL, BLOCK, WILD, "abp.example", 1},
    /* *.x alone: subdomains only */
    {"wildonly.example", ALL, NONE, NOR, NULL, -1},
    {"a.wildonly.example", ALL, BLOCK, WILD, "wildonly.example", 2},
    {"b.a.wildonly.example", ALL, BLOCK, WILD, "wildonly.example", 2},
    /* x alone */
    {"x.example", ALL, BLOCK, DOM, "x.example", 2},
    {"www.x.example", ALL, NONE, NOR, NULL, -1},
    /* x with *.x */
    {"y.example", ALL, BLOCK, DOM, "y.example", 2},
    {"a.y.example", ALL, BLOCK, WILD, "y.example", 2},
    /* exact entry for a subdomain of a wildcard */
    {"w.example", ALL, NONE, NOR, NULL, -1},
    {"sub.w.example", ALL, BLOCK, DOM, "sub.w.example", 2},
    {"other.w.example", ALL, BLOCK, WILD, "w.example", 2},
    {"a.sub.w.example", ALL, BLOCK, WILD, "w.example", 2},
    /* nested wildcards: nearest parent wins */
    {"n.example", ALL, NONE, NOR, NULL, -1},
    {"a.n.example", ALL, BLOCK, WILD, "n.example", 2},
    {"deep.n.example", ALL, BLOCK, WILD, "n.example", 2},
    {"a.deep.n.example", ALL, BLOCK, WILD, "deep.n.example", 2},
    {"b.a.deep.n.example", ALL, BLOCK, WILD, "deep.n.example", 2},
    /* overlapping sources: lowest eligible index reported */
    {"ads.example", NO_ALLOW, BLOCK, DOM, "ads.example", 0},
    {"ads.example", 1ull << 3 | 1ull << 1, BLOCK, DOM, "ads.example", 3},
    {"abp.example", 1ull << 3, BLOCK, DOM, "abp.example", 3},
    {"q.abp.example", 1ull << 3 | 1ull << 0, BLOCK, WILD, "abp.example", 3},
    {"www.ads.example", NO_ALLOW, BLOCK, WILD, "ads.example", 3},
    {"www.ads.example", 1ull << 0, NONE, NOR, NULL, -1},
    /* exceptions beat every block level, from any eligible source */
    {"ads.example", ALL, ALLOW, EXC, "ads.example", 4},
    {"www.ads.example", ALL, ALLOW, EXC, "ads.example", 4},
    {"tracker.example", ALL, ALLOW, EXC, "tracker.example", 4},
    {"www.tracker.example", ALL, BLOCK, DOM, "www.tracker.example", 0},
    /* eligibility */
    {"abp.example", 1ull << 2, NONE, NOR, NULL, -1},
    {"abp.example", 0, NONE, NOR, NULL, -1},
    {"good.abp.example", 1ull << 3, BLOCK, WILD, "abp.example", 3},
    /* without exception sources: same ladder (exact, then the nearest parent, lowest source) */
    {"ads.example", NO_EXC, BLOCK, DOM, "ads.example", 0},
    {"www.ads.example", NO_EXC, BLOCK, WILD, "ads.example", 3},
    {"sub.w.example", NO_EXC, BLOCK, DOM, "sub.w.example", 2},
    {"a.sub.w.example", NO_EXC, BLOCK, WILD, "w.example", 2},
    {"a.deep.n.example", NO_EXC, BLOCK, WILD, "deep.n.example", 2},
    {"b.a.deep.n.example", NO_EXC, BLOCK, WILD, "deep.n.example", 2},
    {"y.example", NO_EXC, BLOCK, DOM, "y.example", 2},
    {"a.y.example", NO_EXC, BLOCK, WILD, "y.example", 2},
    {"a.www.tracker.example", NO_EXC, NONE, NOR, NULL, -1},
    {"x.only.abp.example", 1ull << 3, BLOCK, WILD, "abp.example", 3},
    {"", ALL, NONE, NOR, NULL, -1},
    {".", ALL, NONE, NOR, NULL, -1},
};

static void check(const struct probe *p, const struct nx_filter_result *r, const char *name,
		  const char *form)
{
	const char *matched = r->matched_len ? name + r->matched_off : NULL;
	bool ok = r->action == p->action && r->reason == p->reason && r->source == p->source;
	if (p->matched) {
		ok = ok && matched && strncmp(matched, p->matched, strlen(p->matched)) == 0 &&
		     r->matched_off + strlen(p->matched) ==
			 strlen(name) - (name[strlen(name) - 1] == '.');
	} else {
		ok = ok && r->matched_len == 0;
	}
	if (!ok) {
		print_error(
		    "%s %s mask %#llx: got %s/%s src %d matched [%s] want %s/%s src %d [%s]\n",
		    form, p->name, (unsigned long long)p->mask, nx_filter_action_name(r->action),
		    nx_filter_reason_name(r->reason), r->source, matched ? matched : "",
		    nx_filter_action_name(p->action), nx_filter_reason_name(p->reason), p->source,
		    p->matched ? p->matched : "");
		fail();
	}
}

static void test_text(void **state)
{
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		const struct probe *p = &probes[i];
		struct nx_filter_result r;
		enum nx_filter_action a =
		    nx_filter_snap_match(g_snap, p->name, strlen(p->name), p->mask, &r);
		assert_int_equal(a, r.action);
		check(p, &r, p->name, "text");
	}
}

/* "a.b" -> "\1a\1b\0", optionally upper-cased */
static size_t to_wire(const char *name, uint8_t *out, bool upper)
{
	size_t n = 0, len = strlen(name);
	if (len && name[len - 1] == '.') {
		len--;
	}
	size_t start = 0;
	while (start < len) {
		const char *dot = memchr(name + start, '.', len - start);
		size_t l = dot ? (size_t)(dot - name) - start : len - start;
		out[n++] = (uint8_t)l;
		for (size_t i = 0; i < l; i++) {
			char c = name[start + i];
			out[n++] = (uint8_t)(upper && c >= 'a' && c <= 'z' ? c - 32 : c);
		}
		start += l + 1;
	}
	out[n++] = 0;
	return n;
}

static void test_wire(void **state)
{
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		const struct probe *p = &probes[i];
		if (!p->name[0] || p->name[0] == '.' || p->name[strlen(p->name) - 1] == '.') {
			continue;
		}
		uint8_t wire[300];
		size_t wlen = to_wire(p->name, wire, i % 2 == 1);
		struct nx_filter_result r;
		nx_filter_snap_match_wire(g_snap, wire, wlen, p->mask, &r);
		assert_int_equal(r.action, p->action);
		assert_int_equal(r.reason, p->reason);
		assert_int_equal(r.source, p->source);
		if (p->matched) {
			uint8_t mw[300];
			size_t mlen = to_wire(p->matched, mw, false);
			assert_int_equal(r.matched_len, mlen);
			assert_int_equal(r.matched_off + mlen, wlen);
			/* the offset lands on a label boundary of the query */
			assert_int_equal(wire[r.matched_off], mw[0]);
		}
	}
	/* a label no list name can hold: only the parents above it are tried */
	static const uint8_t odd[] = "\x05"
				     "a.b.c"
				     "\x03"
				     "abp"
				     "\x07"
				     "example";
	struct nx_filter_result r;
	nx_filter_snap_match_wire(g_snap, odd, sizeof(odd), ALL, &r);
	assert_int_equal(r.action, NX_FILTER_ACT_BLOCK);
	assert_int_equal(r.reason, NX_FILTER_R_blocklist_wildcard);
	assert_int_equal(r.matched_off, 6);
	static const uint8_t odd2[] = "\x0b"
				      "abp.example";
	nx_filter_snap_match_wire(g_snap, odd2, sizeof(odd2), ALL, &r);
	assert_int_equal(r.action, NX_FILTER_ACT_NONE);
	/* malformed wire: label runs past the end */
	static const uint8_t trunc[] = {3, 'a', 'b'};
	nx_filter_snap_match_wire(g_snap, trunc, sizeof(trunc), ALL, &r);
	assert_int_equal(r.action, NX_FILTER_ACT_NONE);
}

static void test_fp_rate_stated(void **state)
{
	/* the bound the README states: per hashed name <= 16 / 2^(4+38) = 2^-34; 10 names
	 * <= 1e-9 */
	double p = nx_filter_snap_fp_per_name(g_snap);
	assert_true(p <= 1.0 / 17179869184.0);
	assert_true(10 * p <= 1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_wire),
	    cmocka_unit_test(test_fp_rate_stated),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* Compiler: bodies, meta, skip accounting, $badfilter, bounded external sort, refuse_below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "filter/compile.h"
#include "helpers.h"

/* NX_XSORT_FANIN in src/filter/impl.h (module-internal) */
#define NX_XSORT_FANIN_TEST 16

static int setup(void **state)
{
	*state = th_tmpdir();
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	th_rmtree(*state);
	free(*state);
	return 0;
}

static int compile_text(const char *dir, const char *name, const char *text,
			enum nx_filter_format fmt, size_t run, struct nx_filter_compile_report *rep)
{
	char in[4300];
	snprintf(in, sizeof(in), "%s/%s.in", dir, name);
	th_write(in, text, strlen(text));
	struct nx_filter_compile_opts o = {.name = name, .format = fmt, .run_bytes = run};
	return nx_filter_compile_file(in, dir, &o, rep);
}

static void expect_body(const char *dir, const char *file, const char *want)
{
	char *got = th_readf(dir, file);
	assert_non_null(got);
	if (strcmp(got, want) != 0) {
		print_error("%s:\n--- got\n%s--- want\n%s", file, got, want);
		fail();
	}
	free(got);
}

static const char mixed[] = "\xef\xbb\xbf# title\r\n"
			    "! adblock comment\r\n"
			    "\r\n"
			    "[Adblock Plus 2.0]\n"
			    "0.0.0.0 B.example a.example # two names\n"
			    "127.0.0.1 localhost\n"
			    "||abp.example^\n"
			    "|exact.example^\n"
			    "*.wild.example\n"
			    "@@||ok.example^\n"
			    "@@|only.example^\n"
			    "||ok.example^\n"
			    "||abp.example^\n"
			    "ABP.example\n"
			    "||x.example^$third-party\n"
			    "/re[gx]/\n"
			    "example.com##.ad\n"
			    "münchen.example\n"
			    "bad..name\n"
			    "||imp.example^$important\n"
			    "last.example"; /* no final newline */

static void test_mixed(void **state)
{
	const char *dir = *state;
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	struct nx_filter_compile_report rep;
	assert_int_equal(compile_text(dir, "mixed", mixed, NX_FILTER_FMT_AUTO, 0, &rep), 0);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
	expect_body(dir, "mixed.list",
		    "a.example\nabp.example\nb.example\nexact.example\nimp.example\nlast.example\n"
		    "ok.example\nxn--mnchen-3ya.example\n");
	expect_body(dir, "mixed.wild", "abp.example\nimp.example\nok.example\nwild.example\n");
	expect_body(dir, "mixed.allow", "ok.example\tsub\nonly.example\texact\n");
	assert_int_equal(rep.lines, 21);
	assert_int_equal(rep.blank, 1);
	assert_int_equal(rep.comments, 3);
	assert_int_equal(rep.n_list, 8);
	assert_int_equal(rep.n_wild, 4);
	assert_int_equal(rep.n_allow, 2);
	assert_int_equal(rep.n_allow_sub, 1);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_localhost], 1);
	assert_int_equal(rep.skip_lines[NX_FILTER_SKIP_localhost][0], 6);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_modifier], 1);
	assert_int_equal(rep.skip_lines[NX_FILTER_SKIP_modifier][0], 15);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_regex], 1);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_cosmetic], 1);
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_invalid_name], 1);
	assert_int_equal(rep.skipped_total, 5);
	assert_int_equal(rep.important, 1);
	assert_int_equal(strlen(rep.input_sha256), 64);

	/* meta: JSON with the same figures, bodies sha matching the files */
	char *meta = th_readf(dir, "mixed.meta");
	assert_non_null(meta);
	json_error_t jerr;
	json_t *j = json_loads(meta, 0, &jerr);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "counts"), "list")),
			 8);
	json_t *mod = json_object_get(json_object_get(j, "skipped"), "modifier");
	assert_int_equal(json_integer_value(json_object_get(mod, "count")), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(mod, "first_lines"), 0)),
			 15);
	json_decref(j);
	free(meta);
	uint8_t a[32], b[32];
	assert_int_equal(nx_filter_bodies_sha256(dir, "mixed", a), 0);
	assert_int_equal(nx_filter_meta_bodies_sha256(dir, "mixed", b), 0);
	assert_memory_equal(a, b, 32);
	char hex[65];
	nx_filter_hex(a, 32, hex);
	assert_string_equal(hex, rep.bodies_sha256);
}

static void test_badfilter(void **state)
{
	const char *dir = *state;
	struct nx_filter_compile_report rep;
	const char *text = "||a.example^\n"
			   "||a.example^$badfilter\n"
			   "|b.example^\n"
			   "||b.example^$badfilter\n" /* cancels nothing: different rule */
			   "||c.example^\n"
			   "c.example\n"
			   "||c.example^$badfilter\n" /* c stays exact via the plain line */
			   "@@||d.example^\n"
			   "@@||d.example^$badfilter\n";
	assert_int_equal(compile_text(dir, "bf", text, NX_FILTER_FMT_AUTO, 0, &rep), 0);
	expect_body(dir, "bf.list", "b.example\nc.example\n");
	expect_body(dir, "bf.wild", "");
	expect_body(dir, "bf.allow", "");
	assert_int_equal(rep.badfilter_rules, 4);
	assert_int_equal(rep.badfilter_cancelled, 3);
}

static void test_forced_format(void **state)
{
	const char *dir = *state;
	struct nx_filter_compile_report rep;
	const char *text = "*.w.example\nplain.example\n0.0.0.0 h.example\n||a.example^\n";
	assert_int_equal(compile_text(dir, "ff", text, NX_FILTER_FMT_WILDCARD, 0, &rep), 0);
	expect_body(dir, "ff.list", "plain.example\n");
	expect_body(dir, "ff.wild", "w.example\n");
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_format_mismatch], 2);
	assert_string_equal(rep.format, "wildcard");
}

static void test_line_too_long(void **state)
{
	const char *dir = *state;
	size_t n = 3 * NX_FILTER_LINE_MAX + 10;
	char *text = malloc(n + 100);
	strcpy(text, "a.example\n");
	size_t p = strlen(text);
	memset(text + p, 'x', 2 * NX_FILTER_LINE_MAX);
	p += 2 * NX_FILTER_LINE_MAX;
	strcpy(text + p, "\nb.example\n");
	struct nx_filter_compile_report rep;
	assert_int_equal(compile_text(dir, "long", text, NX_FILTER_FMT_AUTO, 0, &rep), 0);
	expect_body(dir, "long.list", "a.example\nb.example\n");
	assert_int_equal(rep.skipped[NX_FILTER_SKIP_line_too_long], 1);
	assert_int_equal(rep.skip_lines[NX_FILTER_SKIP_line_too_long][0], 2);
	assert_int_equal(rep.lines, 3);
	free(text);
}

/* Many names in a scrambled order with duplicates, written as a hosts + domains mix. */
static char *gen_names(unsigned n, unsigned seed)
{
	char *text = malloc((size_t)n * 40 + 1);
	size_t p = 0;
	uint32_t x = seed;
	for (unsigned i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		unsigned v = (x >> 8) % (n - n / 8); /* ~1/8 duplicates */
		if (i % 3 == 0) {
			p += (size_t)sprintf(text + p, "0.0.0.0 n%07u.Example\n", v);
		} else if (i % 3 == 1) {
			p += (size_t)sprintf(text + p, "n%07u.example\n", v);
		} else {
			p += (size_t)sprintf(text + p, "||n%07u.example^\n", v);
		}
	}
	text[p] = '\0';
	return text;
}

/* The progress hook: called every NX_FILTER_STEP_LINES input lines and every 65536 names
 * written (the daemon answers admin requests there during a long compile). */
static void count_step(void *arg)
{
	++*(unsigned *)arg;
}

static void test_step_hook(void **state)
{
	const char *dir = *state;
	unsigned steps = 0;
	struct nx_filter_compile_opts o = {.name = "steps", .on_step = count_step,
					   .step_arg = &steps};
	struct nx_filter_compile_report rep;
	char in[4300];
	snprintf(in, sizeof(in), "%s/steps.in", dir);

	/* many lines: one call per NX_FILTER_STEP_LINES of them at least */
	char *text = gen_names(200000, 11);
	th_write(in, text, strlen(text));
	free(text);
	assert_int_equal(nx_filter_compile_file(in, dir, &o, &rep), 0);
	assert_true(steps >= rep.lines / NX_FILTER_STEP_LINES);

	/* few lines of many names each (hosts): the names alone must call it, one per 65536 */
	enum { LINES = 2000, PER_LINE = 250 };
	size_t cap = (size_t)LINES * (PER_LINE * 14 + 16), len = 0;
	text = malloc(cap);
	assert_non_null(text);
	for (unsigned l = 0; l < LINES; l++) {
		len += (size_t)snprintf(text + len, cap - len, "0.0.0.0");
		for (unsigned k = 0; k < PER_LINE; k++) {
			len += (size_t)snprintf(text + len, cap - len, " h%u.s%u.t", k, l);
		}
		text[len++] = '\n';
	}
	th_write(in, text, len);
	free(text);
	steps = 0;
	o.format = NX_FILTER_FMT_HOSTS;
	assert_int_equal(nx_filter_compile_file(in, dir, &o, &rep), 0);
	assert_int_equal(rep.n_list, (uint64_t)LINES * PER_LINE);
	/* 500,000 names: 7 name steps; lines and the sort's fixed points add at most 3 */
	assert_true(steps >= rep.n_list / 65536);
	assert_true(steps >= 7);
}

static void test_external_sort(void **state)
{
	const char *dir = *state;
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	char *text = gen_names(200000, 7);
	struct nx_filter_compile_report mem, ext;
	assert_int_equal(compile_text(dir, "mem", text, NX_FILTER_FMT_AUTO, 0, &mem), 0);
	assert_int_equal(mem.sort_runs, 0);
	assert_int_equal(compile_text(dir, "ext", text, NX_FILTER_FMT_AUTO, 64 * 1024, &ext), 0);
	/* 200k records of ~20 bytes in 64 KiB runs: well over FANIN runs, so a merge pass too */
	assert_true(ext.sort_runs > NX_XSORT_FANIN_TEST);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
	char *a = th_readf(dir, "mem.list"), *b = th_readf(dir, "ext.list");
	assert_string_equal(a, b);
	free(a);
	free(b);
	a = th_readf(dir, "mem.wild");
	b = th_readf(dir, "ext.wild");
	assert_string_equal(a, b);
	free(a);
	free(b);
	assert_int_equal(mem.n_list, ext.n_list);
	assert_true(mem.n_list > 100000);
	/* sorted and unique */
	char *list = th_readf(dir, "ext.list");
	char *prev = NULL;
	for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
		if (prev) {
			assert_true(strcmp(prev, line) < 0);
		}
		prev = line;
	}
	free(list);
	/* Peak: one run buffer, or FANIN read buffers while merging, plus writers; the in-memory
	 * compile holds its run (records + offsets) instead. Neither grows with the source. */
	size_t merge_bound = (NX_XSORT_FANIN_TEST + 5) * 64 * 1024 + 64 * 1024;
	assert_true(ext.peak_build_bytes > 0);
	assert_true(ext.peak_build_bytes <= merge_bound);
	assert_true(mem.peak_build_bytes <= NX_FILTER_RUN_DEFAULT + 6 * 64 * 1024);

	/* twice the source, same bound */
	free(text);
	text = gen_names(400000, 9);
	struct nx_filter_compile_report big;
	assert_int_equal(compile_text(dir, "big", text, NX_FILTER_FMT_AUTO, 64 * 1024, &big), 0);
	assert_true(big.peak_build_bytes <= merge_bound);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
	free(text);
}

static void test_refuse_below(void **state)
{
	const char *dir = *state;
	struct nx_filter_compile_report rep;
	assert_int_equal(
	    compile_text(dir, "keep", "a.example\nb.example\n", NX_FILTER_FMT_AUTO, 0, &rep), 0);
	char in[4300];
	snprintf(in, sizeof(in), "%s/keep.in", dir);
	th_write(in, "<html>garbage</html>\n", 21);
	struct nx_filter_compile_opts o = {.name = "keep", .refuse_below = 1};
	assert_int_equal(nx_filter_compile_file(in, dir, &o, &rep), NX_ELIMIT);
	assert_true(rep.kept_previous);
	expect_body(dir, "keep.list", "a.example\nb.example\n");
	/* no temp file left behind */
	char *tmp = th_readf(dir, "keep.list.tmp-XXXXXX");
	assert_null(tmp);
}

/* The skip reasons as the list status reads them back from the meta. */
/* The input_stat fast path: a fresh input is not trusted by its stat (a rewrite within one
 * timestamp tick keeps mtime); a settled one is, until any of size, inode, mtime, ctime moves. */
static void test_input_stat(void **state)
{
	const char *dir = *state;
	char in[4300], meta[4300];
	struct nx_filter_compile_report rep;
	assert_int_equal(compile_text(dir, "st", "a.example\n", NX_FILTER_FMT_AUTO, 0, &rep), 0);
	snprintf(in, sizeof(in), "%s/st.in", dir);
	snprintf(meta, sizeof(meta), "%s/st.meta", dir);
	assert_false(rep.input_stat_ok); /* written just now */
	json_error_t je;
	json_t *m = json_load_file(meta, 0, &je);
	assert_non_null(m);
	assert_null(json_object_get(m, "input_stat"));
	assert_int_equal(nx_filter_meta_input_unchanged(m, in), 0);
	json_decref(m);
	struct stat before;
	assert_int_equal(stat(in, &before), 0);
	/* a second input with an old mtime, compiled after the sleep below (its ctime settles) */
	char in2[4300];
	snprintf(in2, sizeof(in2), "%s/st2.in", dir);
	th_write(in2, "c.example\n", 10);
	struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
	assert_int_equal(utimensat(AT_FDCWD, in2, old, 0), 0);
	/* not settled: nothing recorded */
	assert_int_equal(nx_filter_meta_note_input_stat(dir, "st", in, &before, rep.input_sha256),
			 0);
	/* settled: sleep past the window (ctime cannot be set back) */
	sleep((unsigned)(NX_FILTER_STAT_SETTLE_NS / 1000000000LL) + 1);
	char wrong[65];
	memset(wrong, 'f', 64);
	wrong[64] = 0;
	assert_int_equal(nx_filter_meta_note_input_stat(dir, "st", in, &before, wrong), 0);
	struct stat moved = before;
	moved.st_size++;
	assert_int_equal(nx_filter_meta_note_input_stat(dir, "st", in, &moved, rep.input_sha256),
			 0);
	assert_int_equal(nx_filter_meta_note_input_stat(dir, "st", in, &before, rep.input_sha256),
			 1);
	m = json_load_file(meta, 0, &je);
	assert_non_null(m);
	assert_int_equal(nx_filter_meta_input_unchanged(m, in), 1);
	/* the same size rewritten: mtime/ctime move (and a compile of a settled file records) */
	th_write(in, "b.example\n", 10);
	assert_int_equal(nx_filter_meta_input_unchanged(m, in), 0);
	json_decref(m);
	/* a settled input compiled: recorded by the compile itself */
	struct nx_filter_compile_opts o = {.name = "st2"};
	assert_int_equal(nx_filter_compile_file(in2, dir, &o, &rep), 0);
	assert_true(rep.input_stat_ok);
	snprintf(meta, sizeof(meta), "%s/st2.meta", dir);
	m = json_load_file(meta, 0, &je);
	assert_non_null(m);
	assert_int_equal(nx_filter_meta_input_unchanged(m, in2), 1);
	assert_int_equal(nx_filter_meta_input_unchanged(m, in), 0); /* another file */
	json_decref(m);
}

static void test_meta_skips(void **state)
{
	const char *dir = *state;
	struct nx_filter_compile_report rep;
	assert_int_equal(compile_text(dir, "mixed", mixed, NX_FILTER_FMT_AUTO, 0, &rep), 0);
	json_t *s = NULL;
	assert_int_equal(nx_filter_meta_skips(dir, "mixed", &s), 0);
	assert_non_null(s);
	/* exactly the reasons that occurred, each with the report's count and lines */
	assert_int_equal(json_object_size(s), 5);
	uint64_t total = 0;
	const char *k;
	json_t *e;
	json_object_foreach(s, k, e)
	{
		total += (uint64_t)json_integer_value(json_object_get(e, "count"));
		assert_non_null(json_string_value(json_object_get(e, "help")));
	}
	assert_int_equal(total, rep.skipped_total);
	json_t *loc = json_object_get(s, "localhost");
	assert_int_equal(json_integer_value(json_object_get(loc, "count")), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(loc, "first_lines"), 0)),
			 6);
	assert_string_equal(json_string_value(json_object_get(loc, "help")),
			    nx_filter_skip_help(NX_FILTER_SKIP_localhost));
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(s, "cosmetic"), "count")), 1);
	assert_null(json_object_get(s, "ip_rule"));
	json_decref(s);

	/* never compiled; a meta that is not JSON or lacks the reasons */
	s = (json_t *)0x1;
	assert_int_equal(nx_filter_meta_skips(dir, "nothere", &s), -ENOENT);
	assert_null(s);
	char path[4300];
	snprintf(path, sizeof(path), "%s/broken.meta", dir);
	th_write(path, "{not json", 9);
	assert_int_equal(nx_filter_meta_skips(dir, "broken", &s), NX_ECORRUPT);
	assert_null(s);
	th_write(path, "{\"skipped\": {\"regex\": {\"count\": \"many\"}}}", 41);
	assert_int_equal(nx_filter_meta_skips(dir, "broken", &s), NX_ECORRUPT);
	assert_null(s);
}

static void test_errors(void **state)
{
	const char *dir = *state;
	struct nx_filter_compile_report rep;
	struct nx_filter_compile_opts o = {.name = "../evil"};
	assert_int_equal(nx_filter_compile_file("/dev/null", dir, &o, &rep), NX_EFORMAT);
	o.name = "ok";
	assert_int_equal(nx_filter_compile_file("/nonexistent/file", dir, &o, &rep), -ENOENT);
	assert_int_equal(nx_filter_compile_file("/dev/null", "/nonexistent/dir", &o, &rep) < 0, 1);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), 0);
	assert_false(nx_filter_source_name_ok(""));
	assert_false(nx_filter_source_name_ok(".hidden"));
	assert_true(nx_filter_source_name_ok("hagezi_light-2023.v2"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mixed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_badfilter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_forced_format, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_line_too_long, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_external_sort, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_step_hook, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refuse_below, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_meta_skips, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_input_stat, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

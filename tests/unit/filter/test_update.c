/*
 * `nxdns update`'s build path (issue 16): the incremental snapshot build equals a full build
 * of the same bodies (the same bytes but the header's `created`), falls back to a full build
 * when the previous file cannot be used, and keeps its memory bound; the parallel compile of
 * nx_lists_sync gives the same bodies and snapshot as a serial one, and a source that fails in
 * a parallel run keeps its last good bodies and is reported; the snapshot build's merge split
 * over two threads writes the serial build's bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>

#include "conf/conf.h"
#include "daemon/lists.h"
#include "filter/compile.h"
#include "filter/impl.h"
#include "filter/snapshot.h"
#include "helpers.h"

#define NSRC 6
#define SEED 0x5eed1234abcdull

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Source i's list: names from a shared pool (so sources overlap), some wildcards and
 * exceptions; `variant` changes a part of it. */
static void write_source(const char *dir, unsigned i, unsigned count, unsigned variant)
{
	size_t cap = (size_t)count * 48 + 64;
	char *buf = malloc(cap);
	size_t len = 0;
	uint64_t save = rng;
	rng = 0x9e3779b97f4a7c15ull * (i + 1);
	for (unsigned k = 0; k < count; k++) {
		uint64_t r = rnd();
		unsigned pool = (unsigned)(r % 40000); /* shared between sources */
		unsigned kind = (unsigned)(r >> 40) % 10;
		if (variant && k % 7 == variant % 7) {
			pool += 100000 * variant; /* replaced names */
		}
		if (variant && k % 11 == 3) {
			kind = (kind + 1) % 10; /* other flags */
		}
		const char *pre = kind < 7 ? "" : kind < 9 ? "||" : "@@||";
		const char *post = kind < 7 ? "" : "^";
		len += (size_t)snprintf(buf + len, cap - len, "%sn%u.d%u.example%s\n", pre, pool,
					pool % 97, post);
	}
	rng = save;
	char name[64];
	snprintf(name, sizeof(name), "s%u.txt", i);
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	th_write(path, buf, len);
	free(buf);
}

static void compile_source(const char *dir, unsigned i)
{
	char in[4300], name[16];
	snprintf(name, sizeof(name), "s%u", i);
	snprintf(in, sizeof(in), "%s/s%u.txt", dir, i);
	struct nx_filter_compile_opts o = {.name = name, .side = true};
	struct nx_filter_compile_report rep;
	assert_int_equal(nx_filter_compile_file(in, dir, &o, &rep), 0);
}

struct fx {
	char *dir;
	char names[NSRC][16];
	struct nx_filter_snap_source src[NSRC];
	uint8_t shas[NSRC][32];
};

static void fx_init(struct fx *f, unsigned count)
{
	f->dir = th_tmpdir();
	for (unsigned i = 0; i < NSRC; i++) {
		snprintf(f->names[i], sizeof(f->names[i]), "s%u", i);
		f->src[i] = (struct nx_filter_snap_source){f->names[i], f->dir};
		write_source(f->dir, i, count + i * 1000, 0);
		compile_source(f->dir, i);
	}
}

static void fx_shas(struct fx *f)
{
	for (unsigned i = 0; i < NSRC; i++) {
		assert_int_equal(nx_filter_meta_bodies_sha256(f->dir, f->names[i], f->shas[i]), 0);
	}
}

/* The file's bytes with `created` and the header checksum zeroed. */
static char *canon_file(const char *path, size_t *len)
{
	char *p = th_read(path, len);
	assert_non_null(p);
	assert_true(*len >= sizeof(struct nx_snap_hdr));
	struct nx_snap_hdr *h = (struct nx_snap_hdr *)p;
	h->created = 0;
	h->hdr_xxh = 0;
	return p;
}

static void assert_same_file(const char *a, const char *b)
{
	size_t la = 0, lb = 0;
	char *pa = canon_file(a, &la), *pb = canon_file(b, &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(pa, pb, la);
	free(pa);
	free(pb);
}

static void build_full(struct fx *f, const char *path, struct nx_filter_snap_build_report *rep)
{
	struct nx_filter_snap_build_opts o = {.seed = SEED};
	assert_int_equal(nx_filter_snap_build(path, f->src, NSRC, &o, rep), 0);
	assert_false(rep->incremental);
}

static void build_incr(struct fx *f, const char *path, struct nx_filter_snap_build_report *rep)
{
	fx_shas(f);
	/* the seed of every prev here: a fallback full build uses it too */
	struct nx_filter_snap_build_opts o = {
	    .prev = path, .shas = (const uint8_t(*)[32])f->shas, .seed = SEED};
	assert_int_equal(nx_filter_snap_build(path, f->src, NSRC, &o, rep), 0);
}

/* One source changed (names replaced, flags changed), then two, then one emptied: each
 * incremental build is byte-identical to a full one, reads only the changed bodies. */
static void test_incremental_equals_full(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f, 20000);
	char inc[4300], full[4300];
	snprintf(inc, sizeof(inc), "%s/inc.nxs", f.dir);
	snprintf(full, sizeof(full), "%s/full.nxs", f.dir);
	static struct nx_filter_snap_build_report r1, r2;
	build_full(&f, inc, &r1);

	write_source(f.dir, 2, 21000, 1);
	compile_source(f.dir, 2);
	build_incr(&f, inc, &r2);
	assert_true(r2.incremental);
	assert_int_equal(r2.reread, 1);
	build_full(&f, full, &r1);
	assert_int_equal(r1.entries, r2.entries);
	assert_int_equal(r1.names, r2.names);
	assert_int_equal(r1.combos, r2.combos);
	for (unsigned i = 0; i < NSRC; i++) {
		assert_int_equal(r1.src[i].entries, r2.src[i].entries);
		assert_int_equal(r1.src[i].list, r2.src[i].list);
	}
	assert_same_file(inc, full);

	write_source(f.dir, 0, 20000, 2);
	compile_source(f.dir, 0);
	write_source(f.dir, 5, 25000, 3);
	compile_source(f.dir, 5);
	build_incr(&f, inc, &r2);
	assert_true(r2.incremental);
	assert_int_equal(r2.reread, 2);
	build_full(&f, full, &r1);
	assert_same_file(inc, full);

	/* an emptied source: its bits leave every record, records of it alone go */
	char in[4300];
	snprintf(in, sizeof(in), "%s/s4.txt", f.dir);
	th_write(in, "# nothing\n", 10);
	compile_source(f.dir, 4);
	build_incr(&f, inc, &r2);
	assert_true(r2.incremental);
	build_full(&f, full, &r1);
	assert_int_equal(r1.src[4].entries, 0);
	assert_same_file(inc, full);

	/* the result maps and answers as the full build */
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(inc, &s), 0);
	assert_int_equal(nx_filter_snap_entries(s), r1.entries);
	nx_filter_snap_free(s);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), 0);
	th_rmtree(f.dir);
	free(f.dir);
}

/* When prev cannot be used, a full build runs and gives the same result. */
static void test_incremental_fallbacks(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f, 5000);
	char inc[4300], full[4300];
	snprintf(inc, sizeof(inc), "%s/inc.nxs", f.dir);
	snprintf(full, sizeof(full), "%s/full.nxs", f.dir);
	static struct nx_filter_snap_build_report r1, r2;
	build_full(&f, inc, &r1);

	/* a flipped byte in prev's records: not used */
	size_t len = 0;
	char *p = th_read(inc, &len);
	assert_non_null(p);
	p[len - 20] ^= 0x40;
	th_write(inc, p, len);
	free(p);
	write_source(f.dir, 1, 6000, 1);
	compile_source(f.dir, 1);
	fx_shas(&f);
	struct nx_filter_snap_build_opts o = {
	    .prev = inc, .shas = (const uint8_t(*)[32])f.shas, .seed = SEED};
	assert_int_equal(nx_filter_snap_build(inc, f.src, NSRC, &o, &r2), 0);
	assert_false(r2.incremental);
	build_full(&f, full, &r1);
	assert_same_file(inc, full);

	/* most sources changed: a full build (reading them all is what it costs anyway) */
	for (unsigned i = 0; i < 4; i++) {
		write_source(f.dir, i, 5000, 4);
		compile_source(f.dir, i);
	}
	fx_shas(&f);
	assert_int_equal(nx_filter_snap_build(inc, f.src, NSRC, &o, &r2), 0);
	assert_false(r2.incremental);

	/* a source grown so much that the bucket count would grow: a full build */
	build_full(&f, inc, &r1); /* fresh prev */
	write_source(f.dir, 3, 120000, 0);
	compile_source(f.dir, 3);
	build_incr(&f, inc, &r2);
	assert_false(r2.incremental);
	build_full(&f, full, &r1);
	assert_same_file(inc, full);

	/* no prev at all */
	unlink(inc);
	build_incr(&f, inc, &r2);
	assert_false(r2.incremental);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), 0);
	th_rmtree(f.dir);
	free(f.dir);
}

static void write_unique(const char *dir, unsigned i, unsigned count)
{
	size_t cap = (size_t)count * 40 + 64, len = 0;
	char *buf = malloc(cap);
	len += (size_t)snprintf(buf, cap, "# unique\n");
	for (unsigned k = 0; k < count; k++) {
		len += (size_t)snprintf(buf + len, cap - len, "u%u.only%u.example\n", k, i);
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/s%u.txt", dir, i);
	th_write(path, buf, len);
	free(buf);
}

/* Names drop below a power of two: fewer buckets (prev's split in two merged), still
 * incremental and equal to the full build. */
static void test_incremental_fewer_buckets(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f, 5000);
	char inc[4300], full[4300];
	snprintf(inc, sizeof(inc), "%s/inc.nxs", f.dir);
	snprintf(full, sizeof(full), "%s/full.nxs", f.dir);
	static struct nx_filter_snap_build_report r1, r2;
	write_unique(f.dir, 5, 0);
	compile_source(f.dir, 5);
	build_full(&f, full, &r1);
	uint64_t n0 = r1.names;
	unsigned lg = 0;
	while ((1ull << lg) < n0) {
		lg++;
	}
	write_unique(f.dir, 5, (unsigned)((1ull << lg) - n0 + 1));
	compile_source(f.dir, 5);
	build_full(&f, inc, &r1);
	unsigned k_prev = r1.bucket_bits;
	write_unique(f.dir, 5, 0);
	compile_source(f.dir, 5);
	build_incr(&f, inc, &r2);
	assert_true(r2.incremental);
	assert_int_equal(r2.bucket_bits, k_prev - 1);
	build_full(&f, full, &r1);
	assert_same_file(inc, full);
	th_rmtree(f.dir);
	free(f.dir);
}

/* The incremental build's peak: prev's mapping + the new arrays + 16 B per re-read name, and
 * the ledger's own samples (on_step) never see more than it reports. */
static int64_t g_seen, g_base;
static void sample_step(void *arg)
{
	(void)arg;
	int64_t b = th_owner_bytes(NX_OWNER_filter_build) - g_base;
	g_seen = b > g_seen ? b : g_seen;
}

static void test_incremental_peak(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f, 30000);
	char inc[4300];
	snprintf(inc, sizeof(inc), "%s/inc.nxs", f.dir);
	static struct nx_filter_snap_build_report r1, r2;
	build_full(&f, inc, &r1);
	write_source(f.dir, 1, 31000, 1);
	compile_source(f.dir, 1);
	fx_shas(&f);
	g_seen = 0;
	g_base = th_owner_bytes(NX_OWNER_filter_build);
	struct nx_filter_snap_build_opts o = {
	    .prev = inc, .shas = (const uint8_t(*)[32])f.shas, .on_step = sample_step};
	assert_int_equal(nx_filter_snap_build(inc, f.src, NSRC, &o, &r2), 0);
	assert_true(r2.incremental);
	assert_true((uint64_t)g_seen <= r2.peak_build_bytes);
	/* designed bound: prev file + new records and offsets (~ the file again) + the re-read
	 * names (16 B each, array doubled: x2) + the read buffers of one source + the sets */
	uint64_t bound = 2 * r1.bytes + 2 * 16 * (uint64_t)r2.src[1].entries + 3 * 8192 +
			 64 * 1024 + r2.combos * 80;
	assert_true(r2.peak_build_bytes <= bound);
	assert_true(r2.peak_build_bytes >= r1.bytes); /* prev is charged while mapped */
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), 0);
	th_rmtree(f.dir);
	free(f.dir);
}

/* The split merge (opts.threads = 2: the sources' merge in two groups on two threads, the
 * groups merged by the caller) writes the serial build's bytes, full and incremental, reports
 * the same, and its peak is the serial one's + the hand-over slots. */
static void test_split_merge_equals_serial(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f, 20000);
	char one[4300], two[4300];
	snprintf(one, sizeof(one), "%s/one.nxs", f.dir);
	snprintf(two, sizeof(two), "%s/two.nxs", f.dir);
	static struct nx_filter_snap_build_report r1, r2;
	for (int round = 0; round < 2; round++) {
		g_seen = 0;
		g_base = th_owner_bytes(NX_OWNER_filter_build);
		struct nx_filter_snap_build_opts o1 = {.seed = SEED, .threads = 1};
		struct nx_filter_snap_build_opts o2 = {
		    .seed = SEED, .threads = 2, .on_step = sample_step};
		assert_int_equal(nx_filter_snap_build(one, f.src, NSRC, &o1, &r1), 0);
		assert_int_equal(nx_filter_snap_build(two, f.src, NSRC, &o2, &r2), 0);
		assert_same_file(one, two);
		assert_int_equal(r1.entries, r2.entries);
		assert_int_equal(r1.names, r2.names);
		assert_int_equal(r1.combos, r2.combos);
		assert_int_equal(r1.passes, r2.passes);
		assert_memory_equal(r1.src, r2.src, sizeof(r1.src[0]) * NSRC);
		assert_true(r1.names >
			    30000); /* the sources overlap: both groups hold shared names */
		assert_true(r1.names < r1.entries);
		assert_true((uint64_t)g_seen <= r2.peak_build_bytes);
		/* + the hand-over batches (1 + 4 of 1024 names + a 32 KiB arena) */
		assert_true(r2.peak_build_bytes <=
			    r1.peak_build_bytes + NX_FILTER_SNAP_SPLIT_BYTES);
		assert_true(r2.peak_build_bytes > r1.peak_build_bytes);
		/* round 2: one source changed, both builds incremental from the same prev */
		write_source(f.dir, 3, 22000, 2);
		compile_source(f.dir, 3);
	}
	/* incremental: prev = one.nxs copied, built on with 1 and with 2 threads */
	fx_shas(&f);
	char prev[4300];
	snprintf(prev, sizeof(prev), "%s/prev.nxs", f.dir);
	size_t len = 0;
	char *p = th_read(one, &len);
	th_write(prev, p, len);
	free(p);
	write_source(f.dir, 1, 21000, 1);
	compile_source(f.dir, 1);
	fx_shas(&f);
	struct nx_filter_snap_build_opts i1 = {
	    .prev = prev, .shas = (const uint8_t(*)[32])f.shas, .seed = SEED, .threads = 1};
	struct nx_filter_snap_build_opts i2 = i1;
	i2.threads = 2;
	assert_int_equal(nx_filter_snap_build(one, f.src, NSRC, &i1, &r1), 0);
	assert_int_equal(nx_filter_snap_build(two, f.src, NSRC, &i2, &r2), 0);
	assert_true(r1.incremental);
	assert_true(r2.incremental);
	assert_same_file(one, two);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), 0);
	th_rmtree(f.dir);
	free(f.dir);
}

/* ---- nx_lists_sync: parallel against serial ---- */

static struct nx_conf *lists_conf(const char *lists_dir, const char *state, unsigned n)
{
	char yaml[8192];
	size_t len =
	    (size_t)snprintf(yaml, sizeof(yaml), "state_dir: %s\nfilter:\n  sources:\n", state);
	for (unsigned i = 0; i < n; i++) {
		len += (size_t)snprintf(yaml + len, sizeof(yaml) - len,
					"    - {name: s%u, path: %s/s%u.txt}\n", i, lists_dir, i);
	}
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	if (nx_conf_load_string("t.yaml", yaml, len, &c, err, sizeof(err)) != 0) {
		fail_msg("config: %s", err);
	}
	return c;
}

static void sync_with(const char *lists_dir, const char *state, unsigned workers,
		      struct nx_lists *l, bool fresh)
{
	struct nx_conf *c = lists_conf(lists_dir, state, NSRC);
	if (fresh) {
		nx_lists_init(l, state);
	}
	l->compile_workers = workers;
	l->snap_seed = SEED;
	bool changed = false;
	assert_int_equal(nx_lists_sync(l, c, 0, &changed), 0);
	nx_conf_free(c);
}

static void cmp_state_file(const char *a, const char *b, const char *rel)
{
	char pa[4300], pb[4300];
	snprintf(pa, sizeof(pa), "%s/%s", a, rel);
	snprintf(pb, sizeof(pb), "%s/%s", b, rel);
	size_t la = 0, lb = 0;
	char *x = th_read(pa, &la), *y = th_read(pb, &lb);
	if (!x || !y || la != lb || memcmp(x, y, la) != 0) {
		fail_msg("%s differs between the serial and the parallel update", rel);
	}
	free(x);
	free(y);
}

static void test_parallel_equals_serial(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	for (unsigned i = 0; i < NSRC; i++) {
		write_source(dir, i, 15000 + i * 500, 0);
	}
	char s1[4300], s2[4300];
	snprintf(s1, sizeof(s1), "%s/serial", dir);
	snprintf(s2, sizeof(s2), "%s/parallel", dir);
	static struct nx_lists a, b;
	sync_with(dir, s1, 1, &a, true);
	sync_with(dir, s2, 2, &b, true);
	assert_int_equal(a.compile_threads, 1);
	assert_int_equal(b.compile_threads, 2);
	assert_true(b.compile_peak_bytes > 0);
	/* designed: threads x one compile's bound (the 8 MiB run + readers, writers) */
	assert_true(b.compile_peak_bytes <= 2 * (NX_FILTER_RUN_DEFAULT + 1024 * 1024));
	assert_int_equal(a.entries, b.entries);
	for (unsigned i = 0; i < NSRC; i++) {
		char rel[64];
		static const char *const ext[] = {".list", ".wild", ".allow"};
		for (unsigned e = 0; e < 3; e++) {
			snprintf(rel, sizeof(rel), "lists/s%u/s%u%s", i, i, ext[e]);
			cmp_state_file(s1, s2, rel);
		}
		assert_int_equal(a.st[i].n_list, b.st[i].n_list);
		assert_int_equal(a.st[i].n_wild, b.st[i].n_wild);
		assert_string_equal(b.st[i].last_error, "");
	}
	char p1[4400], p2[4400];
	snprintf(p1, sizeof(p1), "%s/snapshot.nxs", s1);
	snprintf(p2, sizeof(p2), "%s/snapshot.nxs", s2);
	assert_same_file(p1, p2);

	/* one source changed: the parallel update rebuilds incrementally, equal to the serial
	 * state's full rebuild */
	write_source(dir, 3, 16000, 2);
	sync_with(dir, s2, 2, &b, false);
	assert_true(b.build_incremental);
	assert_true(b.st[3].changed);
	assert_false(b.st[2].changed);
	nx_lists_deinit(&a);
	char *s1d = strdup(s1);
	th_rmtree(s1d);
	free(s1d);
	sync_with(dir, s1, 1, &a, true);
	assert_false(a.build_incremental);
	assert_same_file(p1, p2);

	/* a failing source in a parallel run: reported, its last good bodies kept */
	char bad[4300];
	snprintf(bad, sizeof(bad), "%s/s4.txt", dir);
	unlink(bad);
	assert_int_equal(mkdir(bad, 0700), 0); /* a directory: read fails */
	sync_with(dir, s2, 2, &b, false);
	assert_true(strstr(b.st[4].last_error, "") != NULL);
	assert_true(b.st[4].last_error[0] != 0);
	assert_true(b.st[4].have_bodies);
	assert_int_equal(b.st[4].n_list, a.st[4].n_list);
	cmp_state_file(s1, s2, "lists/s4/s4.list");
	for (unsigned i = 0; i < NSRC; i++) {
		if (i != 4) {
			assert_string_equal(b.st[i].last_error, "");
		}
	}
	assert_int_equal(b.entries, a.entries); /* the snapshot still holds s4's last bodies */
	rmdir(bad);
	nx_lists_deinit(&a);
	nx_lists_deinit(&b);
	th_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_incremental_equals_full),
	    cmocka_unit_test(test_incremental_fallbacks),
	    cmocka_unit_test(test_incremental_fewer_buckets),
	    cmocka_unit_test(test_incremental_peak),
	    cmocka_unit_test(test_parallel_equals_serial),
	    cmocka_unit_test(test_split_merge_equals_serial),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

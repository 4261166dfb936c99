/* Snapshot builder and loader: layout, boot reuse, corrupt files refused, reload peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>

#include "base/err.h"
#include "filter/compile.h"
#include "filter/impl.h" /* white-box: craft files whose checksums pass but whose layout lies */
#include "filter/snapshot.h"
#include "helpers.h"

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

static void bodies(const char *dir, const char *name, const char *list, const char *wild,
		   const char *allow)
{
	char f[200];
	snprintf(f, sizeof(f), "%s.list", name);
	th_writef(dir, f, list);
	snprintf(f, sizeof(f), "%s.wild", name);
	th_writef(dir, f, wild);
	snprintf(f, sizeof(f), "%s.allow", name);
	th_writef(dir, f, allow);
}

static const struct nx_filter_snap_build_opts fixed_seed = {.seed = 42};

static void test_build_open(void **state)
{
	const char *dir = *state;
	bodies(dir, "a", "abp.example\nexact.example\n", "abp.example\nwild.example\n",
	       "ok.example\tsub\nonly.example\texact\n");
	bodies(dir, "b", "abp.example\n", "", "");
	struct nx_filter_snap_source src[] = {{"a", dir}, {"b", dir}};
	char path[4300];
	snprintf(path, sizeof(path), "%s/snap.nxs", dir);
	struct nx_filter_snap_build_report rep;
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	assert_int_equal(nx_filter_snap_build(path, src, 2, &fixed_seed, &rep), 0);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
	/* a: abp (exact+wild, once), exact, wild, ok, only = 5; b: abp = 1 */
	assert_int_equal(rep.entries, 6);
	assert_int_equal(rep.src[0].entries, 5);
	assert_int_equal(rep.src[0].list, 2);
	assert_int_equal(rep.src[0].wild, 2);
	assert_int_equal(rep.src[0].allow, 2);
	assert_int_equal(rep.src[1].entries, 1);

	struct nx_filter_snap *s = NULL;
	int64_t mbase = th_owner_bytes(NX_OWNER_snapshot_map);
	assert_int_equal(nx_filter_snap_open(path, &s), 0);
	assert_true(th_owner_bytes(NX_OWNER_snapshot_map) >= mbase + (int64_t)rep.bytes);
	assert_int_equal(nx_filter_snap_entries(s), 6);
	assert_int_equal(nx_filter_snap_bytes(s), rep.bytes);
	assert_int_equal(nx_filter_snap_nsources(s), 2);
	assert_string_equal(nx_filter_snap_source_name(s, 1), "b");
	assert_null(nx_filter_snap_source_name(s, 2));
	uint8_t flags[NX_FILTER_SOURCES_MAX];
	assert_int_equal(nx_filter_snap_lookup(s, "abp.example", 11, flags), 2);
	assert_int_equal(flags[0], NX_FILTER_F_EXACT | NX_FILTER_F_WILD);
	assert_int_equal(flags[1], NX_FILTER_F_EXACT);
	assert_int_equal(nx_filter_snap_lookup(s, "ok.example", 10, flags), 1);
	assert_int_equal(flags[0], NX_FILTER_F_ALLOW_EXACT | NX_FILTER_F_ALLOW_SUB);
	assert_int_equal(nx_filter_snap_lookup(s, "only.example", 12, flags), 1);
	assert_int_equal(flags[0], NX_FILTER_F_ALLOW_EXACT);
	assert_int_equal(nx_filter_snap_lookup(s, "nope.example", 12, flags), 0);

	/* boot reuse: same names and bodies -> current; any change -> not */
	const char *names[] = {"a", "b"};
	uint8_t shas[2][32];
	assert_int_equal(nx_filter_bodies_sha256(dir, "a", shas[0]), 0);
	assert_int_equal(nx_filter_bodies_sha256(dir, "b", shas[1]), 0);
	assert_true(nx_filter_snap_is_current(s, names, (const uint8_t(*)[32])shas, 2));
	assert_false(nx_filter_snap_is_current(s, names, (const uint8_t(*)[32])shas, 1));
	const char *swapped[] = {"b", "a"};
	assert_false(nx_filter_snap_is_current(s, swapped, (const uint8_t(*)[32])shas, 2));
	shas[1][0] ^= 1;
	assert_false(nx_filter_snap_is_current(s, names, (const uint8_t(*)[32])shas, 2));
	nx_filter_snap_free(s);
	assert_int_equal(th_owner_bytes(NX_OWNER_snapshot_map), mbase);
}

static void test_empty_and_limits(void **state)
{
	const char *dir = *state;
	char path[4300];
	snprintf(path, sizeof(path), "%s/empty.nxs", dir);
	struct nx_filter_snap_build_report rep;
	assert_int_equal(nx_filter_snap_build(path, NULL, 0, NULL, &rep), 0);
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(path, &s), 0);
	struct nx_filter_result r;
	assert_int_equal(nx_filter_snap_match(s, "a.example", 9, ~0ull, &r), NX_FILTER_ACT_NONE);
	assert_int_equal(r.source, -1);
	nx_filter_snap_free(s);
	/* a source with no bodies at all is an empty source, not an error */
	struct nx_filter_snap_source none = {"missing", dir};
	assert_int_equal(nx_filter_snap_build(path, &none, 1, NULL, &rep), 0);
	assert_int_equal(rep.entries, 0);

	struct nx_filter_snap_source many[NX_FILTER_SOURCES_MAX + 1];
	for (int i = 0; i <= NX_FILTER_SOURCES_MAX; i++) {
		many[i] = (struct nx_filter_snap_source){"x", dir};
	}
	assert_int_equal(nx_filter_snap_build(path, many, NX_FILTER_SOURCES_MAX + 1, NULL, &rep),
			 NX_ELIMIT);
	assert_int_equal(rep.refused_sources, 1);
	struct nx_filter_snap_source bad = {"../x", dir};
	assert_int_equal(nx_filter_snap_build(path, &bad, 1, NULL, &rep), NX_EFORMAT);
	assert_int_equal(nx_filter_snap_open("/nonexistent.nxs", &s), -ENOENT);
}

static void test_bad_body_lines(void **state)
{
	const char *dir = *state;
	bodies(dir, "q", "good.example\nBad..Name\n\n", "w.example\r\n", "a.example\tweird\n");
	struct nx_filter_snap_source src = {"q", dir};
	char path[4300];
	snprintf(path, sizeof(path), "%s/q.nxs", dir);
	struct nx_filter_snap_build_report rep;
	assert_int_equal(nx_filter_snap_build(path, &src, 1, NULL, &rep), 0);
	assert_int_equal(rep.entries, 2);
	assert_int_equal(rep.src[0].bad_lines, 2);
}

struct mutate {
	const char *path;
	int steps;
};

static void mutate_step(void *arg)
{
	struct mutate *m = arg;
	if (++m->steps == 1) {
		th_write(m->path, "changed.example\n", 16);
	}
}

static void test_changed_between_passes(void **state)
{
	const char *dir = *state;
	bodies(dir, "c", "a.example\nb.example\n", "", "");
	char list[4300], path[4300];
	snprintf(list, sizeof(list), "%s/c.list", dir);
	snprintf(path, sizeof(path), "%s/c.nxs", dir);
	struct mutate m = {.path = list};
	struct nx_filter_snap_build_opts o = {.seed = 1, .on_step = mutate_step, .arg = &m};
	struct nx_filter_snap_source src = {"c", dir};
	assert_int_equal(nx_filter_snap_build(path, &src, 1, &o, NULL), -EAGAIN);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), 0);
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(path, &s), -ENOENT); /* nothing was written */
}

/* Every single-byte corruption, truncation and crafted lie is refused, never crashes. */
static void test_corrupt(void **state)
{
	const char *dir = *state;
	bodies(dir, "a", "abp.example\nexact.example\n", "abp.example\n", "ok.example\tsub\n");
	struct nx_filter_snap_source src = {"a", dir};
	char path[4300], bad[4300];
	snprintf(path, sizeof(path), "%s/good.nxs", dir);
	snprintf(bad, sizeof(bad), "%s/bad.nxs", dir);
	assert_int_equal(nx_filter_snap_build(path, &src, 1, &fixed_seed, NULL), 0);
	size_t len = 0;
	char *good = th_read(path, &len);
	assert_non_null(good);
	struct nx_filter_snap *s = NULL;
	int64_t mbase = th_owner_bytes(NX_OWNER_snapshot_map);
	for (size_t i = 0; i < len; i++) {
		good[i] ^= 0x5a;
		th_write(bad, good, len);
		good[i] ^= 0x5a;
		int rc = nx_filter_snap_open(bad, &s);
		/* a flipped version field names another format: refused as such (rebuild) */
		bool version = i >= offsetof(struct nx_snap_hdr, version) &&
			       i < offsetof(struct nx_snap_hdr, version) + 4;
		if (rc != (version ? NX_EFORMAT : NX_ECORRUPT)) {
			print_error("flip at %zu: rc %d\n", i, rc);
			fail();
		}
	}
	for (size_t cut = 0; cut < len; cut += (cut < 256 ? 1 : 61)) {
		th_write(bad, good, cut);
		assert_int_equal(nx_filter_snap_open(bad, &s), NX_ECORRUPT);
	}
	th_write(bad, good, len);
	FILE *f = fopen(bad, "ab");
	fputc(0, f);
	fclose(f);
	assert_int_equal(nx_filter_snap_open(bad, &s), NX_ECORRUPT);

	/* Lies with valid checksums: the structure checks must catch them. */
	for (int variant = 0; variant < 10; variant++) {
		char *copy = malloc(len);
		memcpy(copy, good, len);
		struct nx_snap_hdr *c = (struct nx_snap_hdr *)copy;
		struct nx_snap_combo *combo = (struct nx_snap_combo *)(copy + c->combo_off);
		uint8_t *rec = (uint8_t *)(copy + c->rec_off);
		uint32_t *bkt = (uint32_t *)(copy + c->bkt_off);
		switch (variant) {
		case 0:
			c->nentries += 1;
			break;
		case 1:
			c->nsources = 70;
			break;
		case 2:
			c->bucket_bits = 40;
			break;
		case 3:
			combo[0].mask[NX_SNAP_M_EXACT] |= 1u << 5; /* source 5 of 1 */
			break;
		case 4:
			bkt[0] = 1;
			break;
		case 5:
			memset(copy + c->src_off, 'x', 64); /* name without NUL */
			break;
		case 6:
			/* a source-set index past the table (3 sets in 2 bits: index 3) */
			assert_int_equal(c->ncombos, 3);
			nx_snap_put_bits(rec, c->low_bits, c->combo_bits, 3);
			break;
		case 7:
			memset(&combo[1], 0, sizeof(combo[1])); /* a set of no source */
			break;
		case 8:
			c->low_bits = 60; /* wider than one load */
			break;
		case 9: {
			/* records 0 and 1 swapped: out of order inside their bucket (k = 0) */
			assert_int_equal(c->bucket_bits, 0);
			unsigned rb = c->low_bits + c->combo_bits;
			uint64_t r0 = nx_snap_get_bits(rec, 0, rb),
				 r1 = nx_snap_get_bits(rec, rb, rb);
			nx_snap_put_bits(rec, 0, rb, r1);
			nx_snap_put_bits(rec, rb, rb, r0);
			break;
		}
		}
		c->body_xxh = XXH3_64bits(copy + c->hdr_size, len - c->hdr_size);
		c->hdr_xxh = 0;
		c->hdr_xxh = XXH3_64bits(c, sizeof(*c));
		th_write(bad, copy, len);
		int rc = nx_filter_snap_open(bad, &s);
		if (rc != NX_ECORRUPT) {
			print_error("variant %d: rc %d\n", variant, rc);
			fail();
		}
		free(copy);
	}
	assert_int_equal(th_owner_bytes(NX_OWNER_snapshot_map), mbase);
	/* the untouched file still opens */
	assert_int_equal(nx_filter_snap_open(path, &s), 0);
	nx_filter_snap_free(s);
	free(good);
}

/* ---- reload peak ---- */

struct peak {
	int64_t max_build, max_total;
};

static void sample(void *arg)
{
	struct peak *p = arg;
	int64_t b = th_owner_bytes(NX_OWNER_filter_build);
	int64_t t = b + th_owner_bytes(NX_OWNER_snapshot_map);
	if (b > p->max_build) {
		p->max_build = b;
	}
	if (t > p->max_total) {
		p->max_total = t;
	}
}

/* Sorted bodies for `n` names per source, offset so generations differ. */
static void gen_sources(const char *dir, unsigned nsrc, unsigned n, unsigned gen)
{
	for (unsigned s = 0; s < nsrc; s++) {
		char name[32], file[64];
		snprintf(name, sizeof(name), "s%u", s);
		for (int b = 0; b < 2; b++) {
			snprintf(file, sizeof(file), "%s/%s.%s", dir, name, b ? "wild" : "list");
			FILE *f = fopen(file, "w");
			for (unsigned i = 0; i < n; i++) {
				/* overlapping halves between sources, like real subscriptions */
				fprintf(f, "g%u-%08u.example\n", gen,
					i + s * (n / 2) + (b ? n / 3 : 0));
			}
			fclose(f);
		}
		snprintf(file, sizeof(file), "%s/%s.allow", dir, name);
		th_write(file, "", 0);
	}
}

static void test_reload_peak(void **state)
{
	const char *dir = *state;
	enum { NSRC = 6, N = 40000 };
	struct nx_filter_snap_source src[NSRC];
	char names[NSRC][16];
	for (int i = 0; i < NSRC; i++) {
		snprintf(names[i], sizeof(names[i]), "s%d", i);
		src[i] = (struct nx_filter_snap_source){names[i], dir};
	}
	char pa[4300], pb[4300];
	snprintf(pa, sizeof(pa), "%s/a.nxs", dir);
	snprintf(pb, sizeof(pb), "%s/b.nxs", dir);
	int64_t base_b = th_owner_bytes(NX_OWNER_filter_build);
	int64_t base_m = th_owner_bytes(NX_OWNER_snapshot_map);
	gen_sources(dir, NSRC, N, 1);
	struct nx_filter_snap_build_report ra, rb;
	assert_int_equal(nx_filter_snap_build(pa, src, NSRC, NULL, &ra), 0);
	struct nx_filter_snap *old = NULL, *cur = NULL;
	assert_int_equal(nx_filter_snap_open(pa, &old), 0);

	/* reload: new bodies, build while the old snapshot is mapped, then map the new one */
	gen_sources(dir, NSRC, N + 5000, 2);
	struct peak p = {0};
	struct nx_filter_snap_build_opts o = {.on_step = sample, .arg = &p};
	sample(&p);
	assert_int_equal(nx_filter_snap_build(pb, src, NSRC, &o, &rb), 0);
	assert_int_equal(nx_filter_snap_open(pb, &cur), 0);
	sample(&p);
	nx_filter_snap_free(old);
	sample(&p);

	/* bound: old snapshot + new snapshot + the builder's streams (every source's three bodies
	 * are read at once through 8 KiB buffers, 2 KiB of merge state beside) + the source-set
	 * hash index (at most 24 B per set while it grows) + 16 KiB (one chunk of sets, the
	 * heap, the largest bucket) + the split merge's hand-over slots (opts.threads) */
	int64_t stream = NSRC * (3 * 8 + 2) * 1024;
	int64_t slack = 16 * 1024 + 24 * (int64_t)rb.combos + NX_FILTER_SNAP_SPLIT_BYTES;
	int64_t bound = (int64_t)ra.bytes + (int64_t)rb.bytes + stream + slack;
	print_message(
	    "entries %llu (%llu names, %llu source sets) bytes %llu (%.2f B/entry); "
	    "peak build %lld (report %llu, bound %lld); peak build+map %lld, bound %lld\n",
	    (unsigned long long)rb.entries, (unsigned long long)rb.names,
	    (unsigned long long)rb.combos, (unsigned long long)rb.bytes,
	    (double)rb.bytes / (double)rb.entries, (long long)(p.max_build - base_b),
	    (unsigned long long)rb.peak_build_bytes, (long long)(rb.bytes + stream + slack),
	    (long long)(p.max_total - base_b - base_m), (long long)bound);
	assert_true(p.max_total - base_b - base_m <= bound);
	assert_true(p.max_build - base_b <= (int64_t)rb.bytes + stream + slack);
	assert_true(rb.peak_build_bytes <= rb.bytes + (uint64_t)stream + (uint64_t)slack);
	/* the sampled peak really saw the build (the arrays exist for a while) */
	assert_true(p.max_build - base_b >= (int64_t)rb.bytes * 9 / 10);
	assert_true(rb.peak_build_bytes >= (uint64_t)(p.max_build - base_b));
	assert_true((double)rb.bytes / (double)rb.entries <= 10.0);
	nx_filter_snap_free(cur);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base_b);
	assert_int_equal(th_owner_bytes(NX_OWNER_snapshot_map), base_m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_build_open, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_and_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_body_lines, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_changed_between_passes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reload_peak, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

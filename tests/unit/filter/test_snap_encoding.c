/*
 * The version-2 snapshot encoding (one record per distinct name + its source set):
 *
 * 1. A random set of names over 12 sources, overlapping as real subscriptions do, with
 *    random flags: every (source, name) comes back with exactly its flags, the matcher
 *    reports the lowest eligible source under random eligibility masks, and the builder's
 *    peak (sampled from the ledger after every step) stays within its stated bound.
 * 2. Absent names, 10M probes at the shipped width (38 stored bits): no false match (the
 *    bound: n / 2^(k+38) <= 2^-34 per hashed name, so ~5e-4 expected here).
 * 3. The same set at a narrowed width (16 stored bits): false matches are observable and
 *    their count agrees with probes * n / 2^(k+16), the formula README.md states.
 * 4. A file of another format version is refused with NX_EFORMAT (the caller rebuilds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "base/err.h"
#include "filter/impl.h" /* white-box: the header's version field */
#include "filter/snapshot.h"
#include "helpers.h"

enum { NSRC = 12, NAMES = 200000, ABSENT_PROBES = 10000000 };

/* Per (name, source) flags, from a fixed xorshift so every run builds the same set. */
static uint8_t g_flags[NAMES][NSRC];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int name_of(unsigned i, char *out, size_t cap)
{
	return snprintf(out, cap, "n%07u.r%u.present.example", i, i % 97);
}

/* Names sorted in byte order: name_of is fixed-width up to the second label, and the rest is
 * a function of i, so i order is byte order. */
static void gen(const char *dir)
{
	for (unsigned i = 0; i < NAMES; i++) {
		/* a name is in 1 source (70%), 2-3 (25%) or 4-12 (5%): like the real lists */
		uint64_t r = next_rand();
		unsigned k = r % 100 < 70   ? 1
			     : r % 100 < 95 ? 2 + (unsigned)(r >> 8) % 2
					    : 4 + (unsigned)(r >> 8) % 9;
		memset(g_flags[i], 0, NSRC);
		for (unsigned j = 0; j < k; j++) {
			unsigned s = (unsigned)(next_rand() % NSRC);
			uint64_t f = next_rand() % 16;
			/* mostly exact or exact+wild; some wild only, some exceptions */
			uint8_t fl = f < 9    ? NX_FILTER_F_EXACT
				     : f < 13 ? NX_FILTER_F_EXACT | NX_FILTER_F_WILD
				     : f < 14 ? NX_FILTER_F_WILD
				     : f < 15 ? NX_FILTER_F_ALLOW_EXACT
					      : NX_FILTER_F_ALLOW_EXACT | NX_FILTER_F_ALLOW_SUB;
			g_flags[i][s] |= fl;
		}
	}
	for (unsigned s = 0; s < NSRC; s++) {
		char path[4300];
		FILE *f[3];
		static const char *const ext[3] = {"list", "wild", "allow"};
		for (int b = 0; b < 3; b++) {
			snprintf(path, sizeof(path), "%s/s%u.%s", dir, s, ext[b]);
			f[b] = fopen(path, "w");
			assert_non_null(f[b]);
		}
		char name[64];
		for (unsigned i = 0; i < NAMES; i++) {
			uint8_t fl = g_flags[i][s];
			if (!fl) {
				continue;
			}
			name_of(i, name, sizeof(name));
			if (fl & NX_FILTER_F_EXACT) {
				fprintf(f[0], "%s\n", name);
			}
			if (fl & NX_FILTER_F_WILD) {
				fprintf(f[1], "%s\n", name);
			}
			if (fl & NX_FILTER_F_ALLOW_EXACT) {
				fprintf(f[2], "%s\t%s\n", name,
					fl & NX_FILTER_F_ALLOW_SUB ? "sub" : "exact");
			}
		}
		for (int b = 0; b < 3; b++) {
			fclose(f[b]);
		}
	}
}

struct peak {
	int64_t base, max;
};

static void sample(void *arg)
{
	struct peak *p = arg;
	int64_t b = th_owner_bytes(NX_OWNER_filter_build) - p->base;
	p->max = b > p->max ? b : p->max;
}

struct fixture {
	char *dir;
	char path[4300], narrow[4300];
	struct nx_filter_snap_build_report rep, rep_narrow;
	struct peak peak;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	fx->dir = th_tmpdir();
	if (!fx->dir) {
		return -1;
	}
	gen(fx->dir);
	struct nx_filter_snap_source src[NSRC];
	char names[NSRC][8];
	for (unsigned i = 0; i < NSRC; i++) {
		snprintf(names[i], sizeof(names[i]), "s%u", i);
		src[i] = (struct nx_filter_snap_source){names[i], fx->dir};
	}
	snprintf(fx->path, sizeof(fx->path), "%s/enc.nxs", fx->dir);
	snprintf(fx->narrow, sizeof(fx->narrow), "%s/narrow.nxs", fx->dir);
	fx->peak.base = th_owner_bytes(NX_OWNER_filter_build);
	struct nx_filter_snap_build_opts o = {
	    .seed = 0xc0ffee, .on_step = sample, .arg = &fx->peak};
	if (nx_filter_snap_build(fx->path, src, NSRC, &o, &fx->rep) != 0) {
		return -1;
	}
	struct nx_filter_snap_build_opts on = {.seed = 0xc0ffee, .low_bits = 16};
	if (nx_filter_snap_build(fx->narrow, src, NSRC, &on, &fx->rep_narrow) != 0) {
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	th_rmtree(fx->dir);
	free(fx->dir);
	free(fx);
	return 0;
}

static void test_every_entry_found(void **state)
{
	struct fixture *fx = *state;
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(fx->path, &s), 0);
	uint64_t want_entries = 0;
	for (unsigned i = 0; i < NAMES; i++) {
		for (unsigned j = 0; j < NSRC; j++) {
			want_entries += g_flags[i][j] != 0;
		}
	}
	print_message("%u names, %llu (source, name) entries, %llu records, %llu source sets, "
		      "%llu bytes (%.2f B/entry), k=%u\n",
		      NAMES, (unsigned long long)fx->rep.entries, (unsigned long long)fx->rep.names,
		      (unsigned long long)fx->rep.combos, (unsigned long long)fx->rep.bytes,
		      (double)fx->rep.bytes / (double)fx->rep.entries, fx->rep.bucket_bits);
	assert_int_equal(fx->rep.entries, want_entries);
	assert_int_equal(nx_filter_snap_entries(s), want_entries);
	assert_int_equal(fx->rep.names, NAMES);
	assert_int_equal(nx_filter_snap_names(s), NAMES);
	assert_int_equal(nx_filter_snap_combos(s), fx->rep.combos);
	assert_true(fx->rep.combos > 100); /* the test exercises a real source-set table */

	char name[64];
	uint8_t flags[NX_FILTER_SOURCES_MAX];
	unsigned checked_matches = 0;
	for (unsigned i = 0; i < NAMES; i++) {
		int len = name_of(i, name, sizeof(name));
		unsigned n = nx_filter_snap_lookup(s, name, (size_t)len, flags);
		unsigned want_n = 0;
		for (unsigned j = 0; j < NSRC; j++) {
			want_n += g_flags[i][j] != 0;
			if (flags[j] != g_flags[i][j]) {
				print_error("%s source %u: flags %#x, want %#x\n", name, j,
					    flags[j], g_flags[i][j]);
				fail();
			}
		}
		assert_int_equal(n, want_n);
		for (unsigned j = NSRC; j < NX_FILTER_SOURCES_MAX; j++) {
			assert_int_equal(flags[j], 0);
		}
		/* the ladder at the name: exception, else the lowest eligible exact source */
		uint64_t elig = next_rand() & ((1u << NSRC) - 1);
		int allow = -1, exact = -1;
		for (unsigned j = 0; j < NSRC; j++) {
			if (!(elig >> j & 1)) {
				continue;
			}
			if (allow < 0 && (g_flags[i][j] & NX_FILTER_F_ALLOW_EXACT)) {
				allow = (int)j;
			}
			if (exact < 0 && (g_flags[i][j] & NX_FILTER_F_EXACT)) {
				exact = (int)j;
			}
		}
		/* parents are r<N>.present.example and above: never listed, so the name decides */
		struct nx_filter_result r;
		enum nx_filter_action a = nx_filter_snap_match(s, name, (size_t)len, elig, &r);
		if (allow >= 0) {
			assert_int_equal(a, NX_FILTER_ACT_ALLOW);
			assert_int_equal(r.source, allow);
		} else if (exact >= 0) {
			assert_int_equal(a, NX_FILTER_ACT_BLOCK);
			assert_int_equal(r.reason, NX_FILTER_R_blocklist_domain);
			assert_int_equal(r.source, exact);
		} else {
			assert_int_equal(a, NX_FILTER_ACT_NONE);
		}
		/* a subdomain: sub-exceptions, else the lowest eligible wild source */
		char sub[80];
		int sl = snprintf(sub, sizeof(sub), "x.%s", name);
		int asub = -1, wild = -1;
		for (unsigned j = 0; j < NSRC; j++) {
			if (elig >> j & 1) {
				if (asub < 0 && (g_flags[i][j] & NX_FILTER_F_ALLOW_SUB)) {
					asub = (int)j;
				}
				if (wild < 0 && (g_flags[i][j] & NX_FILTER_F_WILD)) {
					wild = (int)j;
				}
			}
		}
		a = nx_filter_snap_match(s, sub, (size_t)sl, elig, &r);
		if (asub >= 0) {
			assert_int_equal(a, NX_FILTER_ACT_ALLOW);
			assert_int_equal(r.source, asub);
			assert_int_equal(r.matched_off, 2);
		} else if (wild >= 0) {
			assert_int_equal(a, NX_FILTER_ACT_BLOCK);
			assert_int_equal(r.reason, NX_FILTER_R_blocklist_wildcard);
			assert_int_equal(r.source, wild);
			assert_int_equal(r.matched_off, 2);
		} else {
			assert_int_equal(a, NX_FILTER_ACT_NONE);
		}
		checked_matches += 2;
	}
	assert_int_equal(checked_matches, 2 * NAMES);

	/* the builder's peak: the new file + 26 KiB per source (three 8 KiB read buffers and the
	 * merge state) + the source-set index (<= 24 B per set) + 16 KiB + the split merge's
	 * hand-over slots (opts.threads); sampled from the ledger at every step, and the report
	 * agrees with what the ledger saw */
	int64_t bound = (int64_t)fx->rep.bytes + NSRC * 26 * 1024 + 24 * (int64_t)fx->rep.combos +
			16 * 1024 + NX_FILTER_SNAP_SPLIT_BYTES;
	print_message("build peak %lld sampled, %llu reported, bound %lld\n",
		      (long long)fx->peak.max, (unsigned long long)fx->rep.peak_build_bytes,
		      (long long)bound);
	assert_true(fx->peak.max <= bound);
	assert_true((int64_t)fx->rep.peak_build_bytes <= bound);
	assert_true((int64_t)fx->rep.peak_build_bytes >= fx->peak.max);
	assert_true(fx->peak.max >= (int64_t)fx->rep.bytes * 9 / 10);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), fx->peak.base);
	nx_filter_snap_free(s);
}

/* Absent names probed one by one; returns the false matches. */
static uint64_t probe_absent(const struct nx_filter_snap *s, unsigned probes)
{
	uint64_t hits = 0;
	char name[64];
	uint8_t flags[NX_FILTER_SOURCES_MAX];
	for (unsigned i = 0; i < probes; i++) {
		int len = snprintf(name, sizeof(name), "a%u.absent.example", i);
		hits += nx_filter_snap_lookup(s, name, (size_t)len, flags) != 0;
	}
	return hits;
}

static void test_absent_full_width(void **state)
{
	struct fixture *fx = *state;
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(fx->path, &s), 0);
	double p = nx_filter_snap_fp_per_name(s);
	double formula = ldexp((double)fx->rep.names, -(int)(fx->rep.bucket_bits + 38));
	assert_true(fabs(p - formula) <= formula * 1e-12);
	/* the stated bound: <= 2^-34 per hashed name, <= 1e-9 per 10-name query */
	assert_true(p <= ldexp(1.0, -34));
	assert_true(10 * p <= 1e-9);
	uint64_t hits = probe_absent(s, ABSENT_PROBES);
	print_message("%u absent probes at 38 stored bits: %llu false matches (expected %.2g, "
		      "bound per name %.3g, per 10-name query %.3g)\n",
		      ABSENT_PROBES, (unsigned long long)hits, p * ABSENT_PROBES, p, 10 * p);
	assert_int_equal(hits, 0);
	nx_filter_snap_free(s);
}

static void test_absent_narrowed(void **state)
{
	struct fixture *fx = *state;
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(fx->narrow, &s), 0);
	assert_int_equal(fx->rep_narrow.low_bits, 16);
	/* at 14 + 16 bits a few names share a fingerprint; one record when their source sets are
	 * the same too (~n^2 / 2^31 = 19 pairs share the fingerprint) */
	assert_true(fx->rep_narrow.names <= fx->rep.names);
	assert_true(fx->rep_narrow.names >= fx->rep.names - 100);
	/* narrower records, smaller file */
	assert_true(fx->rep_narrow.bytes < fx->rep.bytes);
	double p = nx_filter_snap_fp_per_name(s);
	double formula =
	    ldexp((double)fx->rep_narrow.names, -(int)(fx->rep_narrow.bucket_bits + 16));
	assert_true(fabs(p - formula) <= formula * 1e-12);
	double expected = p * ABSENT_PROBES;
	uint64_t hits = probe_absent(s, ABSENT_PROBES);
	print_message("%u absent probes at 16 stored bits (k=%u): %llu false matches, formula "
		      "n / 2^(k+16) * probes = %.1f\n",
		      ABSENT_PROBES, fx->rep_narrow.bucket_bits, (unsigned long long)hits,
		      expected);
	/* Poisson: mean ~1000 here, sd ~32; 6 sd either side. Records sharing a 16-bit low part
	 * inside one bucket make the true rate a little lower than the formula (an upper bound);
	 * at ~12 records per bucket out of 65536 values that is < 0.02%. */
	assert_true(expected >= 500);
	double dev = (double)hits - expected;
	assert_true(dev * dev <= 36 * expected); /* |hits - expected| <= 6 sd */
	/* every present name is still found, with its flags (no false negatives at any width) */
	char name[64];
	uint8_t flags[NX_FILTER_SOURCES_MAX];
	for (unsigned i = 0; i < NAMES; i += 7) {
		int len = name_of(i, name, sizeof(name));
		nx_filter_snap_lookup(s, name, (size_t)len, flags);
		for (unsigned j = 0; j < NSRC; j++) {
			/* another present name sharing the narrowed fingerprint may add flags,
			 * never remove them */
			assert_int_equal(flags[j] & g_flags[i][j], g_flags[i][j]);
		}
	}
	nx_filter_snap_free(s);
}

static void test_other_version_refused(void **state)
{
	struct fixture *fx = *state;
	size_t len = 0;
	char *data = th_read(fx->path, &len);
	assert_non_null(data);
	char bad[4400];
	snprintf(bad, sizeof(bad), "%s/v1.nxs", fx->dir);
	struct nx_filter_snap *s = NULL;
	int64_t mbase = th_owner_bytes(NX_OWNER_snapshot_map);
	for (uint32_t v = 0; v < 4; v++) {
		if (v == NX_SNAP_VERSION) {
			continue;
		}
		/* a consistent header of another version (its own checksum valid): still refused */
		struct nx_snap_hdr *h = (struct nx_snap_hdr *)data;
		h->version = v;
		h->hdr_xxh = 0;
		h->hdr_xxh = XXH3_64bits(h, sizeof(*h));
		th_write(bad, data, len);
		assert_int_equal(nx_filter_snap_open(bad, &s), NX_EFORMAT);
		/* also a bare old header with nothing after it */
		th_write(bad, data, sizeof(*h));
		assert_int_equal(nx_filter_snap_open(bad, &s), NX_EFORMAT);
	}
	assert_int_equal(th_owner_bytes(NX_OWNER_snapshot_map), mbase);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_entry_found),
	    cmocka_unit_test(test_absent_full_width),
	    cmocka_unit_test(test_absent_narrowed),
	    cmocka_unit_test(test_other_version_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

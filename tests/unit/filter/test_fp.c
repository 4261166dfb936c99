/*
 * False matches: probe millions of names known to be absent.
 *
 * 1. No absent name may match (full fingerprint: expected count ~1e-8 here).
 * 2. The fingerprint bits behave as the README's math assumes: counting matches on only the
 *    top T bits of the stored low part gives a measurable rate, which must agree with
 *    probes * n / 2^(k+T); the full 38-bit rate is that times 2^-(38-T).
 * (test_snap_encoding.c checks the same at a narrowed stored width, through the matcher.)
 * Default: 300k entries, 4M probes. With NX_SHARED_DIR (developer machines, CI): the size of
 * the deployment in the seed, 2.9M entries, 12M probes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "filter/impl.h" /* white-box: fingerprint and file layout for the partial-bit count */
#include "filter/snapshot.h"
#include "helpers.h"

static void gen_bodies(const char *dir, unsigned nsrc, unsigned per_src)
{
	for (unsigned s = 0; s < nsrc; s++) {
		char file[4300];
		snprintf(file, sizeof(file), "%s/s%u.list", dir, s);
		FILE *f = fopen(file, "w");
		for (unsigned i = 0; i < per_src; i++) {
			fprintf(f, "e%u-%08u.present.example\n", s, i);
		}
		fclose(f);
		/* every 4th name also as a subtree rule: stored once, two flags */
		snprintf(file, sizeof(file), "%s/s%u.wild", dir, s);
		f = fopen(file, "w");
		for (unsigned i = 0; i < per_src; i += 4) {
			fprintf(f, "e%u-%08u.present.example\n", s, i);
		}
		fclose(f);
	}
}

static void run(unsigned nsrc, unsigned per_src, unsigned probes)
{
	char *dir = th_tmpdir();
	assert_non_null(dir);
	gen_bodies(dir, nsrc, per_src);
	struct nx_filter_snap_source src[16];
	char names[16][16]; /* "s" + up to 10 digits + NUL */
	for (unsigned i = 0; i < nsrc; i++) {
		snprintf(names[i], sizeof(names[i]), "s%u", i);
		src[i] = (struct nx_filter_snap_source){names[i], dir};
	}
	char path[4300];
	snprintf(path, sizeof(path), "%s/fp.nxs", dir);
	struct nx_filter_snap_build_report rep;
	struct nx_filter_snap_build_opts o = {.seed = 0x5eed5eedull};
	assert_int_equal(nx_filter_snap_build(path, src, nsrc, &o, &rep), 0);
	assert_int_equal(rep.entries, (uint64_t)nsrc * per_src);
	struct nx_filter_snap *s = NULL;
	assert_int_equal(nx_filter_snap_open(path, &s), 0);

	/* white-box view of the same file for the partial-bit count */
	size_t flen = 0;
	char *file = th_read(path, &flen);
	const struct nx_snap_hdr *h = (const struct nx_snap_hdr *)file;
	const uint32_t *bkt = (const uint32_t *)(file + h->bkt_off);
	const uint8_t *rec = (const uint8_t *)(file + h->rec_off);
	unsigned rbits = h->low_bits + h->combo_bits;
	enum { T = 18 };

	uint64_t full_hits = 0, partial_hits = 0, match_hits = 0;
	char name[64];
	uint8_t flags[NX_FILTER_SOURCES_MAX];
	for (unsigned i = 0; i < probes; i++) {
		int len = snprintf(name, sizeof(name), "a%u.absent.example", i);
		full_hits += nx_filter_snap_lookup(s, name, (size_t)len, flags) != 0;
		struct nx_snap_fp fp =
		    nx_snap_fingerprint(name, (size_t)len, h->seed, h->bucket_bits, h->low_bits);
		uint64_t want = fp.low >> (h->low_bits - T);
		uint64_t last = ~0ull;
		for (uint32_t e = bkt[fp.bucket]; e < bkt[fp.bucket + 1]; e++) {
			uint64_t low = nx_snap_get_bits(rec, (uint64_t)e * rbits, h->low_bits);
			/* count distinct stored fingerprints, not records */
			if (low != last && (low >> (h->low_bits - T)) == want) {
				partial_hits++;
			}
			last = low;
		}
		if (i % 8 == 0) {
			/* the whole ladder on a 4-label name (name + 3 parents hashed) */
			struct nx_filter_result r;
			len = snprintf(name, sizeof(name), "www.b%u.absent.example", i);
			match_hits += nx_filter_snap_match(s, name, (size_t)len, ~0ull, &r) !=
				      NX_FILTER_ACT_NONE;
		}
	}
	double n = (double)rep.names;
	double expected_partial = probes * n / ldexp(1.0, (int)rep.bucket_bits + T);
	double per_name_full = nx_filter_snap_fp_per_name(s);
	print_message(
	    "entries %.0f, k=%u, %u probes: full hits %llu, top-%d-bit hits %llu "
	    "(expected %.1f); per-name bound %.3g, per 10-name query %.3g; %.2f B/entry\n",
	    n, rep.bucket_bits, probes, (unsigned long long)full_hits, T,
	    (unsigned long long)partial_hits, expected_partial, per_name_full, 10 * per_name_full,
	    (double)rep.bytes / n);
	assert_int_equal(full_hits, 0);
	assert_int_equal(match_hits, 0);
	/* Poisson with mean >= 100: within a factor of 2 unless the bits are not uniform */
	assert_true(expected_partial >= 100);
	assert_true(partial_hits >= expected_partial / 2 && partial_hits <= expected_partial * 2);
	assert_true(10 * per_name_full <= 1e-9);
	assert_true((double)rep.bytes / (double)rep.entries <= 10.0);
	/* every present name still matches (no false negatives) */
	for (unsigned i = 0; i < per_src; i += per_src / 1000 + 1) {
		int len = snprintf(name, sizeof(name), "e%u-%08u.present.example", nsrc - 1, i);
		struct nx_filter_result r;
		assert_int_equal(nx_filter_snap_match(s, name, (size_t)len, ~0ull, &r),
				 NX_FILTER_ACT_BLOCK);
		assert_int_equal(r.source, (int)nsrc - 1);
	}
	free(file);
	nx_filter_snap_free(s);
	th_rmtree(dir);
	free(dir);
}

static void test_default(void **state)
{
	run(4, 75000, 4000000);
}

static void test_deployment_size(void **state)
{
	if (!th_shared()) {
		skip();
	}
	/* 2.9M entries ~ the seed deployment (2.85M); 12M absent probes */
	run(8, 362500, 12000000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default),
	    cmocka_unit_test(test_deployment_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

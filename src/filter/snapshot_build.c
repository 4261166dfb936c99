/*
 * Snapshot builder: streams each source's three sorted bodies (a 3-way merge gives one entry
 * per name with OR'd flags), in three passes: count + checksum, bucket histogram, placement.
 * Holds only the new snapshot's arrays and three read buffers.
 */
#include "filter/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "filter/compile.h"
#include "filter/impl.h"

enum { BL_LIST, BL_WILD, BL_ALLOW, BL__COUNT };
static const char *const exts[BL__COUNT] = {".list", ".wild", ".allow"};

struct head {
	struct nx_lr lr;
	bool open; /* file exists */
	bool have; /* name/flags valid */
	char name[NX_FILTER_NAME_MAX + 1];
	size_t len;
	unsigned flags;
	crypto_hash_sha256_state sha;
};

struct builder {
	struct nx_filter_snap_build_report *rep;
	int64_t cur, peak; /* bytes this build holds (filter_build) */
	/* pass 2/3 */
	uint64_t seed;
	unsigned kbits;
	uint32_t *bkt; /* owned: 2^k + 1 */
	uint64_t *ent; /* owned: n */
	uint64_t n, placed;
	unsigned src_index;
	int err;
	const struct nx_filter_snap_build_opts *opts;
	uint64_t walked; /* names over all passes, for on_step */
};

static void charge(struct builder *b, int64_t bytes)
{
	b->cur += bytes;
	if (b->cur > b->peak) {
		b->peak = b->cur;
	}
}

static void on_data(void *arg, const void *p, size_t n)
{
	crypto_hash_sha256_update(arg, p, n);
}

/* Read the next valid line of one body into h (have=false at the end). */
static int head_next(struct head *h, int body, struct nx_filter_snap_source_stats *st)
{
	h->have = false;
	if (!h->open) {
		return 0;
	}
	for (;;) {
		const char *line;
		size_t len;
		bool too_long;
		int rc = nx_lr_next(&h->lr, NX_FILTER_LINE_MAX, &line, &len, &too_long);
		if (rc <= 0) {
			return rc;
		}
		if (len > 0 && line[len - 1] == '\r') {
			len--;
		}
		if (too_long || len == 0) {
			st->bad_lines += too_long ? 1 : 0;
			continue;
		}
		unsigned flags;
		size_t nlen = len;
		if (body == BL_LIST) {
			flags = NX_FILTER_F_EXACT;
		} else if (body == BL_WILD) {
			flags = NX_FILTER_F_WILD;
		} else {
			const char *tab = memchr(line, '\t', len);
			flags = NX_FILTER_F_ALLOW_EXACT;
			if (tab) {
				nlen = (size_t)(tab - line);
				size_t fl = len - nlen - 1;
				if (fl == 3 && memcmp(tab + 1, "sub", 3) == 0) {
					flags = NX_FILTER_F_ALLOW_EXACT | NX_FILTER_F_ALLOW_SUB;
				} else if (!(fl == 5 && memcmp(tab + 1, "exact", 5) == 0)) {
					st->bad_lines++;
					continue;
				}
			}
		}
		if (!nx_filter_name_valid(line, nlen)) {
			st->bad_lines++;
			continue;
		}
		memcpy(h->name, line, nlen);
		h->name[nlen] = '\0';
		h->len = nlen;
		h->flags = flags;
		h->have = true;
		return 1;
	}
}

static int name_cmp(const struct head *a, const struct head *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->name, b->name, n);
	if (c != 0) {
		return c;
	}
	return a->len < b->len ? -1 : a->len > b->len;
}

typedef void (*entry_fn)(struct builder *b, const char *name, size_t len, unsigned flags);

/*
 * Add sha256(<dir>/<name>.side) to `all` when that file is not empty: a source's identity in
 * the snapshot is the meta's bodies_sha256 (compile.h), which covers the side rules too, so
 * nx_filter_snap_is_current holds for unchanged bodies and a change of side rules alone makes
 * a new generation (the daemon loads the side structure with the snapshot). 0 or -errno.
 */
static int side_sha(const struct nx_filter_snap_source *src, crypto_hash_sha256_state *all)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.side", src->dir, src->name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return errno == ENOENT ? 0 : -errno;
	}
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	uint8_t buf[8192];
	ssize_t n;
	uint64_t total = 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
		total += (uint64_t)n;
	}
	int rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc == 0 && total > 0) {
		uint8_t d[32];
		crypto_hash_sha256_final(&st, d);
		crypto_hash_sha256_update(all, d, 32);
	}
	return rc;
}

/* One pass over one source: calls fn once per distinct name; fills sha and stats. */
static int walk(struct builder *b, const struct nx_filter_snap_source *src, entry_fn fn,
		uint8_t sha[32], struct nx_filter_snap_source_stats *st)
{
	struct head hs[BL__COUNT];
	memset(hs, 0, sizeof(hs));
	memset(st, 0, sizeof(*st));
	int rc = 0;
	int fds[BL__COUNT] = {-1, -1, -1};
	for (int i = 0; i < BL__COUNT; i++) {
		crypto_hash_sha256_init(&hs[i].sha);
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s%s", src->dir, src->name, exts[i]);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			if (errno != ENOENT) {
				rc = -errno;
				goto out;
			}
			continue;
		}
		rc = nx_lr_init(&hs[i].lr, fds[i]);
		if (rc != 0) {
			goto out;
		}
		charge(b, NX_FILTER_RD_BUF);
		hs[i].open = true;
		hs[i].lr.on_data = on_data;
		hs[i].lr.on_data_arg = &hs[i].sha;
		rc = head_next(&hs[i], i, st);
		if (rc < 0) {
			goto out;
		}
	}
	for (;;) {
		struct head *min = NULL;
		for (int i = 0; i < BL__COUNT; i++) {
			if (hs[i].have && (!min || name_cmp(&hs[i], min) < 0)) {
				min = &hs[i];
			}
		}
		if (!min) {
			break;
		}
		char name[NX_FILTER_NAME_MAX + 1];
		size_t len = min->len;
		memcpy(name, min->name, len + 1);
		unsigned flags = 0;
		for (int i = 0; i < BL__COUNT; i++) {
			/* consume every line equal to name (duplicates in a body are merged too) */
			while (hs[i].have && hs[i].len == len &&
			       memcmp(hs[i].name, name, len) == 0) {
				flags |= hs[i].flags;
				if (i == BL_LIST) {
					st->list++;
				} else if (i == BL_WILD) {
					st->wild++;
				} else {
					st->allow++;
				}
				rc = head_next(&hs[i], i, st);
				if (rc < 0) {
					goto out;
				}
			}
		}
		st->entries++;
		fn(b, name, len, flags);
		if (++b->walked % NX_FILTER_STEP_NAMES == 0 && b->opts && b->opts->on_step) {
			b->opts->on_step(b->opts->arg);
		}
	}
	rc = 0;
	crypto_hash_sha256_state all;
	crypto_hash_sha256_init(&all);
	for (int i = 0; i < BL__COUNT; i++) {
		uint8_t d[32];
		crypto_hash_sha256_final(&hs[i].sha, d);
		crypto_hash_sha256_update(&all, d, 32);
	}
	rc = side_sha(src, &all);
	crypto_hash_sha256_final(&all, sha);
out:
	for (int i = 0; i < BL__COUNT; i++) {
		if (hs[i].open) {
			nx_lr_deinit(&hs[i].lr);
			charge(b, -(int64_t)NX_FILTER_RD_BUF);
		}
		if (fds[i] >= 0) {
			close(fds[i]);
		}
	}
	return rc;
}

static void count_fn(struct builder *b, const char *name, size_t len, unsigned flags)
{
	(void)b;
	(void)name;
	(void)len;
	(void)flags;
}

static void hist_fn(struct builder *b, const char *name, size_t len, unsigned flags)
{
	struct nx_snap_fp fp = nx_snap_fingerprint(name, len, b->seed, b->kbits);
	b->bkt[fp.bucket + 1]++;
}

static void place_fn(struct builder *b, const char *name, size_t len, unsigned flags)
{
	struct nx_snap_fp fp = nx_snap_fingerprint(name, len, b->seed, b->kbits);
	uint32_t idx = b->bkt[fp.bucket + 1];
	if (idx >= b->n || b->placed >= b->n) {
		b->err = -EAGAIN; /* bodies changed between passes */
		return;
	}
	b->bkt[fp.bucket + 1] = idx + 1;
	b->ent[idx] =
	    fp.rem << NX_SNAP_REM_SHIFT | (uint64_t)b->src_index << NX_SNAP_SRC_SHIFT | flags;
	b->placed++;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sort each bucket, merge entries with the same (fingerprint, source), fix the offsets. */
static uint64_t finish_buckets(uint32_t *bkt, uint64_t *ent, unsigned kbits)
{
	uint64_t w = 0;
	uint32_t nb = 1u << kbits;
	uint32_t start = 0;
	for (uint32_t bi = 0; bi < nb; bi++) {
		uint32_t end = bkt[bi + 1];
		uint64_t *e = ent + start;
		uint32_t m = end - start;
		if (m > 32) {
			qsort(e, m, sizeof(*e), u64_cmp);
		} else {
			for (uint32_t i = 1; i < m; i++) {
				uint64_t v = e[i];
				uint32_t j = i;
				while (j > 0 && e[j - 1] > v) {
					e[j] = e[j - 1];
					j--;
				}
				e[j] = v;
			}
		}
		bkt[bi] = (uint32_t)w;
		for (uint32_t i = 0; i < m; i++) {
			uint64_t v = e[i];
			if (w > bkt[bi] &&
			    (ent[w - 1] >> NX_SNAP_SRC_SHIFT) == (v >> NX_SNAP_SRC_SHIFT)) {
				ent[w - 1] |=
				    v & 0xf; /* same fingerprint, same source: one entry */
				continue;
			}
			ent[w++] = v;
		}
		start = end;
	}
	bkt[nb] = (uint32_t)w;
	return w;
}

static unsigned choose_bits(uint64_t n)
{
	unsigned lg = 0;
	while (lg < 63 && (1ull << lg) < n) {
		lg++;
	}
	unsigned k = lg > NX_SNAP_LOAD_BITS ? lg - NX_SNAP_LOAD_BITS : 0;
	return k > NX_SNAP_BUCKET_BITS_MAX ? NX_SNAP_BUCKET_BITS_MAX : k;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int write_file(const char *path, const struct nx_snap_src *srcs, unsigned nsrc,
		      const struct builder *b, uint64_t n, uint64_t *size_out)
{
	struct nx_snap_hdr h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, NX_SNAP_MAGIC, 8);
	h.version = NX_SNAP_VERSION;
	h.endian = NX_SNAP_ENDIAN;
	h.hdr_size = sizeof(h);
	h.src_size = sizeof(struct nx_snap_src);
	h.seed = b->seed;
	h.nsources = nsrc;
	h.bucket_bits = b->kbits;
	h.nentries = n;
	h.src_off = sizeof(h);
	h.bkt_off = h.src_off + (uint64_t)nsrc * sizeof(struct nx_snap_src);
	uint64_t bkt_bytes = ((uint64_t)(1u << b->kbits) + 1) * sizeof(uint32_t);
	h.ent_off = (h.bkt_off + bkt_bytes + 7) & ~7ull;
	h.file_size = h.ent_off + n * sizeof(uint64_t);
	h.created = (uint64_t)time(NULL);
	static const uint8_t zeros[8];
	size_t pad = (size_t)(h.ent_off - h.bkt_off - bkt_bytes);

	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, srcs, (size_t)nsrc * sizeof(*srcs));
	XXH3_64bits_update(&st, b->bkt, bkt_bytes);
	XXH3_64bits_update(&st, zeros, pad);
	XXH3_64bits_update(&st, b->ent, n * sizeof(uint64_t));
	h.body_xxh = XXH3_64bits_digest(&st);
	h.hdr_xxh = XXH3_64bits(&h, sizeof(h));

	char tmp[4300];
	int fd = nx_tmp_open(path, tmp, sizeof(tmp));
	if (fd < 0) {
		return fd;
	}
	int rc = nx_write_all(fd, &h, sizeof(h));
	if (rc == 0) {
		rc = nx_write_all(fd, srcs, (size_t)nsrc * sizeof(*srcs));
	}
	if (rc == 0) {
		rc = nx_write_all(fd, b->bkt, bkt_bytes);
	}
	if (rc == 0) {
		rc = nx_write_all(fd, zeros, pad);
	}
	if (rc == 0) {
		rc = nx_write_all(fd, b->ent, n * sizeof(uint64_t));
	}
	if (rc != 0) {
		close(fd);
		unlink(tmp);
		return rc;
	}
	*size_out = h.file_size;
	return nx_tmp_commit(fd, tmp, path);
}

int nx_filter_snap_build(const char *path, const struct nx_filter_snap_source *src, unsigned n,
			 const struct nx_filter_snap_build_opts *opts,
			 struct nx_filter_snap_build_report *rep_out)
{
	struct nx_filter_snap_build_report rep_local;
	struct nx_filter_snap_build_report *rep = rep_out ? rep_out : &rep_local;
	memset(rep, 0, sizeof(*rep));
	rep->sources = n;
	if (n > NX_FILTER_SOURCES_MAX) {
		rep->refused_sources = n - NX_FILTER_SOURCES_MAX;
		return NX_ELIMIT;
	}
	for (unsigned i = 0; i < n; i++) {
		if (!nx_filter_source_name_ok(src[i].name) || !src[i].dir) {
			return NX_EFORMAT;
		}
	}
	if (sodium_init() < 0) {
		return -ENOSYS;
	}
	uint64_t t0 = now_ms();
	struct builder b = {.rep = rep, .opts = opts};
	b.seed = opts && opts->seed ? opts->seed : 0;
	while (b.seed == 0) {
		randombytes_buf(&b.seed, sizeof(b.seed));
	}
	struct nx_snap_src srcs[NX_FILTER_SOURCES_MAX];
	memset(srcs, 0, sizeof(srcs));
	uint8_t sha[32];
	int rc = 0;

	/* pass 1: count and checksum */
	uint64_t total = 0;
	for (unsigned i = 0; i < n; i++) {
		rc = walk(&b, &src[i], count_fn, srcs[i].sha256, &rep->src[i]);
		if (rc != 0) {
			return rc;
		}
		snprintf(srcs[i].name, sizeof(srcs[i].name), "%s", src[i].name);
		total += rep->src[i].entries;
		if (opts && opts->on_step) {
			opts->on_step(opts->arg);
		}
	}
	if (total > NX_FILTER_ENTRIES_MAX) {
		return NX_ELIMIT;
	}
	b.n = total;
	b.kbits = choose_bits(total);
	size_t bkt_bytes = ((size_t)(1u << b.kbits) + 1) * sizeof(uint32_t);
	size_t ent_bytes = (size_t)total * sizeof(uint64_t);
	b.bkt = nx_mem_calloc(NX_OWNER_filter_build, 1, bkt_bytes);
	if (!b.bkt) {
		return -ENOMEM;
	}
	charge(&b, (int64_t)bkt_bytes);

	/* pass 2: bucket histogram */
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		struct nx_filter_snap_source_stats st;
		rc = walk(&b, &src[i], hist_fn, sha, &st);
		if (rc == 0 && memcmp(sha, srcs[i].sha256, 32) != 0) {
			rc = -EAGAIN;
		}
		if (opts && opts->on_step) {
			opts->on_step(opts->arg);
		}
	}
	if (rc == 0) {
		b.ent = nx_mem_alloc(NX_OWNER_filter_build, ent_bytes ? ent_bytes : 8);
		rc = b.ent ? 0 : -ENOMEM;
		if (rc == 0) {
			charge(&b, (int64_t)ent_bytes);
		}
	}
	if (rc == 0) {
		/* bkt[b+1] = start of bucket b, used as its write cursor */
		uint32_t s = 0;
		for (uint32_t bi = 0; bi < (1u << b.kbits); bi++) {
			uint32_t c = b.bkt[bi + 1];
			b.bkt[bi + 1] = s;
			s += c;
		}
	}
	/* pass 3: placement */
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		struct nx_filter_snap_source_stats st;
		b.src_index = i;
		rc = walk(&b, &src[i], place_fn, sha, &st);
		if (rc == 0 && (b.err || memcmp(sha, srcs[i].sha256, 32) != 0)) {
			rc = -EAGAIN;
		}
		if (opts && opts->on_step) {
			opts->on_step(opts->arg);
		}
	}
	if (rc == 0 && b.placed != total) {
		rc = -EAGAIN;
	}
	uint64_t stored = 0;
	if (rc == 0) {
		stored = finish_buckets(b.bkt, b.ent, b.kbits);
		for (unsigned i = 0; i < n; i++) {
			srcs[i].entries = rep->src[i].entries;
			srcs[i].list = rep->src[i].list;
			srcs[i].wild = rep->src[i].wild;
			srcs[i].allow = rep->src[i].allow;
		}
		rc = write_file(path, srcs, n, &b, stored, &rep->bytes);
	}
	if (opts && opts->on_step) {
		opts->on_step(opts->arg);
	}
	nx_mem_free(NX_OWNER_filter_build, b.ent, ent_bytes ? ent_bytes : 8);
	nx_mem_free(NX_OWNER_filter_build, b.bkt, bkt_bytes);
	rep->entries = stored;
	rep->bucket_bits = b.kbits;
	rep->peak_build_bytes = (uint64_t)b.peak;
	rep->build_ms = now_ms() - t0;
	return rc;
}

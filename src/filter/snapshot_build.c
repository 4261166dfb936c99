/*
 * Snapshot builder. Every pass merges all sources' sorted bodies at once (per source a 3-way
 * merge of .list/.wild/.allow, across sources a heap on the name), so each distinct name
 * arrives once with its whole source set: pass 1 counts names, checksums the bodies, interns
 * the distinct source sets and counts records per bucket at a finer width (collapsed to k
 * after it; pass 2 counts them when that histogram is too coarse); pass 3 packs each record
 * (fingerprint low bits + source-set index) at its bucket's cursor; then each bucket is sorted
 * in place. Source sets are numbered in a canonical order (most used first, then by value).
 * Holds only the new file's arrays, the source-set hash index and one small read buffer per
 * body. On two threads (opts.threads, pipe_run) each pass's merge is split in two groups of
 * sources, one merged by a second thread, one (a third of the bytes) by the caller, which
 * merges their names again in order: the same calls of the pass's function, so the same
 * bytes.
 *
 * Incremental (opts.prev): prev's records with the changed sources' bits cleared, merged
 * bucket by bucket with the changed sources' names (read, hashed with prev's seed, sorted):
 * the same file a full build of the same bodies writes (incr_build).
 */
#include "filter/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "filter/compile.h"
#include "filter/impl.h"

enum { BL_LIST, BL_WILD, BL_ALLOW, BL__COUNT };
static const char *const exts[BL__COUNT] = {".list", ".wild", ".allow"};

/* Read buffer per body: every source is open at once (64 sources x 3 bodies = 1.5 MiB at
 * most); a body line is a name (<= 253 bytes) and a flag word. */
#define SNAP_RD_BUF (8 * 1024)
/* Pass 1's bucket histogram: at most 2^22 counters (16 MiB). */
#define SNAP_HIST_BITS_MAX 22
/* Source sets are stored in chunks (no realloc of the table while it grows). */
#define COMBO_CHUNK 256

struct head {
	struct nx_lr lr;
	bool open; /* file exists */
	bool have; /* name/flags valid */
	/* the source's bodies had no invalid name in pass 1 and their sha256 must match it at
	 * the end of this pass (else -EAGAIN): the names need not be checked again */
	bool nocheck;
	char name[NX_FILTER_NAME_MAX + 1];
	size_t len;
	unsigned flags;
	crypto_hash_sha256_state sha;
};

/* One source's stream of distinct names (its three bodies merged). */
struct stream {
	struct head hs[BL__COUNT];
	int fds[BL__COUNT];
	bool have;
	uint64_t key; /* first 8 bytes of name, big-endian, zero-padded: the heap's first test */
	char name[NX_FILTER_NAME_MAX + 1];
	size_t len;
	unsigned flags;
	struct nx_filter_snap_source_stats st;
};

#define PLACE_BATCH 16
struct pend {
	uint32_t bucket, ci, idx;
	uint64_t low;
};

/* A name of a re-read source in an incremental build: its fingerprint split at prev's k, and
 * the index of its source set over the re-read sources (local bits). */
struct nvrec {
	uint64_t low;
	uint32_t bucket;
	uint32_t lc;
};

struct builder {
	int64_t cur, peak;    /* bytes this build holds (filter_build) */
	struct builder *acct; /* NULL, or the build whose bytes these are (a helper builder) */
	const struct nx_filter_snap_build_opts *opts;
	uint64_t walked; /* names over all passes, for on_step */
	uint64_t clean;	 /* after pass 1: bit i = source i had no invalid body line */
	uint64_t seed;
	unsigned kbits, low_bits, combo_bits;
	/* source sets: chunks of COMBO_CHUNK (owned), hash index of (index + 1) (owned) */
	struct nx_snap_combo **chunks;
	uint32_t nchunks_cap;
	uint32_t ncombos;
	uint32_t *hidx;
	uint32_t hcap; /* power of two */
	/* pass 3's batch, and the last source set it looked up */
	struct pend pend[PLACE_BATCH];
	unsigned npend;
	struct nx_snap_combo last_c;
	uint32_t last_ci;
	bool last_ok;
	/* pass 1's bucket histogram at kf >= k bits (owned; NULL: pass 2 counts) */
	uint32_t *fh;
	unsigned kf;
	/* pass 2/3 */
	uint32_t *bkt; /* owned: 2^k + 1 */
	uint8_t *rec;  /* owned: rec_bytes */
	size_t rec_bytes;
	uint64_t n, placed;
	int err;
	/* uses of each source set (pass 1 / the incremental count walk; owned, ucap entries) */
	uint32_t *uses;
	uint32_t ucap;
	/* incremental: the re-read sources' names (owned, nvcap entries), prev's k */
	struct nvrec *nv;
	size_t nnv, nvcap;
	unsigned k0;
	/* streams of the current pass (owned) */
	struct stream *ss;
	unsigned nss;
	unsigned *heap; /* stream indexes, min-heap on (name, index) */
	unsigned nheap;
	/* run each pass's merge on a second thread (pipe_run): decided once per build */
	bool pipe;
};

static void charge(struct builder *b, int64_t bytes)
{
	if (b->acct) {
		b = b->acct;
	}
	b->cur += bytes;
	if (b->cur > b->peak) {
		b->peak = b->cur;
	}
}

static void *b_alloc(struct builder *b, size_t n, bool zero)
{
	void *p = zero ? nx_mem_calloc(NX_OWNER_filter_build, 1, n)
		       : nx_mem_alloc(NX_OWNER_filter_build, n);
	if (p) {
		charge(b, (int64_t)n);
	}
	return p;
}

static void b_free(struct builder *b, void *p, size_t n)
{
	if (p) {
		nx_mem_free(NX_OWNER_filter_build, p, n);
		charge(b, -(int64_t)n);
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
		if (!h->nocheck && !nx_filter_name_valid(line, nlen)) {
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

static int cmp_names(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c != 0) {
		return c;
	}
	return al < bl ? -1 : al > bl;
}

/* Next distinct name of one source (its three bodies merged, duplicates OR'd). */
static int stream_next(struct stream *s)
{
	struct head *min = NULL;
	for (int i = 0; i < BL__COUNT; i++) {
		struct head *h = &s->hs[i];
		if (h->have && (!min || cmp_names(h->name, h->len, min->name, min->len) < 0)) {
			min = h;
		}
	}
	s->have = min != NULL;
	if (!min) {
		return 0;
	}
	s->len = min->len;
	memcpy(s->name, min->name, s->len + 1);
	uint8_t k8[8] = {0};
	memcpy(k8, s->name, s->len < 8 ? s->len : 8);
	s->key = (uint64_t)k8[0] << 56 | (uint64_t)k8[1] << 48 | (uint64_t)k8[2] << 40 |
		 (uint64_t)k8[3] << 32 | (uint64_t)k8[4] << 24 | (uint64_t)k8[5] << 16 |
		 (uint64_t)k8[6] << 8 | k8[7];
	s->flags = 0;
	for (int i = 0; i < BL__COUNT; i++) {
		struct head *h = &s->hs[i];
		/* consume every line equal to name (duplicates in a body are merged too) */
		while (h->have && h->len == s->len && memcmp(h->name, s->name, s->len) == 0) {
			s->flags |= h->flags;
			if (i == BL_LIST) {
				s->st.list++;
			} else if (i == BL_WILD) {
				s->st.wild++;
			} else {
				s->st.allow++;
			}
			int rc = head_next(h, i, &s->st);
			if (rc < 0) {
				return rc;
			}
		}
	}
	s->st.entries++;
	return 1;
}

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

static int stream_open(struct builder *b, struct stream *s, const struct nx_filter_snap_source *src)
{
	for (int i = 0; i < BL__COUNT; i++) {
		struct head *h = &s->hs[i];
		crypto_hash_sha256_init(&h->sha);
		char path[4200];
		snprintf(path, sizeof(path), "%s/%s%s", src->dir, src->name, exts[i]);
		s->fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (s->fds[i] < 0) {
			if (errno != ENOENT) {
				return -errno;
			}
			continue;
		}
		int rc = nx_lr_init_cap(&h->lr, s->fds[i], SNAP_RD_BUF);
		if (rc != 0) {
			return rc;
		}
		charge(b, SNAP_RD_BUF);
		h->open = true;
		h->lr.on_data = on_data;
		h->lr.on_data_arg = &h->sha;
		rc = head_next(h, i, &s->st);
		if (rc < 0) {
			return rc;
		}
	}
	int rc = stream_next(s);
	return rc < 0 ? rc : 0;
}

/* The source's identity: sha256 over its bodies' sha256s (+ the .side's), as compile.h. */
static int stream_sha(const struct stream *s_in, const struct nx_filter_snap_source *src,
		      uint8_t sha[32])
{
	struct stream *s = (struct stream *)s_in; /* finalising consumes the states */
	crypto_hash_sha256_state all;
	crypto_hash_sha256_init(&all);
	for (int i = 0; i < BL__COUNT; i++) {
		uint8_t d[32];
		crypto_hash_sha256_final(&s->hs[i].sha, d);
		crypto_hash_sha256_update(&all, d, 32);
	}
	int rc = side_sha(src, &all);
	crypto_hash_sha256_final(&all, sha);
	return rc;
}

static void streams_close(struct builder *b)
{
	for (unsigned j = 0; b->ss && j < b->nss; j++) {
		struct stream *s = &b->ss[j];
		for (int i = 0; i < BL__COUNT; i++) {
			if (s->hs[i].open) {
				nx_lr_deinit(&s->hs[i].lr);
				charge(b, -(int64_t)SNAP_RD_BUF);
			}
			if (s->fds[i] >= 0) {
				close(s->fds[i]);
			}
		}
	}
	b_free(b, b->ss, b->nss * sizeof(*b->ss));
	b_free(b, b->heap, b->nss * sizeof(*b->heap));
	b->ss = NULL;
	b->heap = NULL;
	b->nss = 0;
}

static bool heap_less(const struct builder *b, unsigned x, unsigned y)
{
	const struct stream *a = &b->ss[x], *c = &b->ss[y];
	if (a->key != c->key) {
		return a->key < c->key;
	}
	int r = cmp_names(a->name, a->len, c->name, c->len);
	return r < 0 || (r == 0 && x < y);
}

/* Sift down in the min-heap hp[0..nh) of stream indexes. */
static void heap_down(const struct builder *b, unsigned *hp, unsigned nh, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, m = i;
		if (l < nh && heap_less(b, hp[l], hp[m])) {
			m = l;
		}
		if (l + 1 < nh && heap_less(b, hp[l + 1], hp[m])) {
			m = l + 1;
		}
		if (m == i) {
			return;
		}
		unsigned t = hp[i];
		hp[i] = hp[m];
		hp[m] = t;
		i = m;
	}
}

static void heap_make(const struct builder *b, unsigned *hp, unsigned nh)
{
	for (unsigned i = nh / 2; i-- > 0;) {
		heap_down(b, hp, nh, i);
	}
}

/* Called once per distinct name with its source set; 0 or a negative code (stops the pass). */
typedef int (*name_fn)(struct builder *b, const char *name, size_t len,
		       const struct nx_snap_combo *c);

/* The next distinct name across the streams of the heap hp[0..*nh), with every one of them
 * holding it in c (bit = the stream's source index): 1, 0 at the end, or a negative code.
 * Touches only those streams and the heap. */
static int merge_next(const struct builder *b, unsigned *hp, unsigned *nh, char *name, size_t *lenp,
		      struct nx_snap_combo *c)
{
	if (*nh == 0) {
		return 0;
	}
	memset(c, 0, sizeof(*c));
	const struct stream *top = &b->ss[hp[0]];
	size_t len = top->len;
	memcpy(name, top->name, len + 1);
	while (*nh > 0) {
		unsigned i = hp[0];
		struct stream *s = &b->ss[i];
		if (s->len != len || memcmp(s->name, name, len) != 0) {
			break;
		}
		for (int f = 0; f < NX_SNAP_M__N; f++) {
			if (s->flags & (1u << f)) {
				c->mask[f] |= 1ull << i;
			}
		}
		int r = stream_next(s);
		if (r < 0) {
			return r;
		}
		if (!s->have) {
			hp[0] = hp[--*nh];
		}
		heap_down(b, hp, *nh, 0);
	}
	*lenp = len;
	return 1;
}

static int name_done(struct builder *b)
{
	if (++b->walked % NX_FILTER_STEP_NAMES == 0 && b->opts && b->opts->on_step) {
		b->opts->on_step(b->opts->arg);
	}
	return 0;
}

static int serial_run(struct builder *b, name_fn fn)
{
	for (;;) {
		struct nx_snap_combo c;
		char name[NX_FILTER_NAME_MAX + 1];
		size_t len = 0;
		int rc = merge_next(b, b->heap, &b->nheap, name, &len, &c);
		if (rc <= 0) {
			return rc;
		}
		rc = fn(b, name, len, &c);
		if (rc != 0) {
			return rc;
		}
		name_done(b);
	}
}

/*
 * The split pass: the sources are dealt into PIPE_GROUPS groups by body bytes, group 0 taking
 * half of another's share (its merge runs on the calling thread, which also does the rest);
 * a thread per other group merges that group's streams (reading, hashing and checking the
 * bodies, its heap) and hands the distinct names with their source sets over in batches
 * through PIPE_SLOTS slots; the calling thread merges group 0's streams one batch at a time
 * itself, merges the groups' sorted batches (a name in several groups: their sets OR'd) and
 * runs fn on each distinct name in the serial pass's order with the serial pass's set, so the
 * result is the serial build's, byte for byte. Until joined, a group's thread is the only one
 * touching its streams and its part of the heap; the calling thread the only one touching
 * everything else (fn, the ledger, on_step). Fixed memory: the batches (PIPE_BYTES).
 */
#define PIPE_GROUPS 2
#define PIPE_SLOTS 4
#define PIPE_ENTS 1024
#define PIPE_ARENA (32 * 1024)
struct pipe_ent {
	struct nx_snap_combo c;
	uint32_t off, len; /* the name: arena + off, len bytes and a NUL */
};
struct pipe_batch {
	unsigned n;
	int rc;	   /* with last: merge_next's final code (0 or negative) */
	bool last; /* the group's merge ended with this batch */
	struct pipe_ent e[PIPE_ENTS];
	char arena[PIPE_ARENA];
};
struct pipe;
struct pgroup {
	struct pipe *p;
	unsigned *heap, nheap; /* the group's streams (a slice of b->heap) */
	pthread_t th;
	pthread_cond_t filled, freed;
	struct pipe_batch *slot; /* PIPE_SLOTS */
	unsigned head, tail;	 /* batches filled / consumed; the slot is the count % PIPE_SLOTS */
	/* the calling thread's cursor */
	struct pipe_batch *cur;
	unsigned ci;
	bool done;
};
struct pipe {
	struct builder *b;
	pthread_mutex_t mu;
	bool stop; /* the calling thread quit: the groups' threads end */
	struct pgroup g[PIPE_GROUPS];
};
/* the caller's group (0) fills one batch at a time; each thread's group has PIPE_SLOTS */
#define PIPE_BATCHES (1 + (PIPE_GROUPS - 1) * PIPE_SLOTS)
#define PIPE_BYTES (PIPE_BATCHES * sizeof(struct pipe_batch))
_Static_assert(PIPE_BYTES <= NX_FILTER_SNAP_SPLIT_BYTES, "snapshot.h states the split's bytes");

/* Fill bt with g's next names (bt->last at the end of g's merge). */
static void pipe_fill(struct pipe *p, struct pgroup *g, struct pipe_batch *bt)
{
	bt->n = 0;
	bt->rc = 0;
	bt->last = false;
	size_t used = 0;
	while (bt->n < PIPE_ENTS && used + NX_FILTER_NAME_MAX + 1 <= PIPE_ARENA) {
		struct pipe_ent *e = &bt->e[bt->n];
		size_t len = 0;
		int r = merge_next(p->b, g->heap, &g->nheap, bt->arena + used, &len, &e->c);
		if (r <= 0) {
			bt->rc = r;
			bt->last = true;
			break;
		}
		e->off = (uint32_t)used;
		e->len = (uint32_t)len;
		used += len + 1;
		bt->n++;
	}
}

static void *pipe_merge(void *arg)
{
	struct pgroup *g = arg;
	struct pipe *p = g->p;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (g->head - g->tail == PIPE_SLOTS && !p->stop) {
			pthread_cond_wait(&g->freed, &p->mu);
		}
		bool stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop) {
			return NULL;
		}
		struct pipe_batch *bt = &g->slot[g->head % PIPE_SLOTS];
		pipe_fill(p, g, bt);
		pthread_mutex_lock(&p->mu);
		g->head++;
		pthread_cond_signal(&g->filled);
		pthread_mutex_unlock(&p->mu);
		if (bt->last) {
			return NULL;
		}
	}
}

/* Make g's cursor point at a name, or g done; 0 or the group's merge error. */
static int pipe_ready(struct pipe *p, struct pgroup *g)
{
	if (g == &p->g[0]) {
		/* the caller's own group: merged here, one batch at a time */
		while (!g->done && (!g->cur || g->ci == g->cur->n)) {
			if (g->cur && g->cur->last) {
				g->done = true;
				return g->cur->rc;
			}
			g->cur = &g->slot[0];
			g->ci = 0;
			pipe_fill(p, g, g->cur);
		}
		return 0;
	}
	while (!g->done && (!g->cur || g->ci == g->cur->n)) {
		if (g->cur) {
			bool last = g->cur->last;
			int mrc = g->cur->rc;
			pthread_mutex_lock(&p->mu);
			g->tail++;
			pthread_cond_signal(&g->freed);
			pthread_mutex_unlock(&p->mu);
			g->cur = NULL;
			if (last) {
				g->done = true;
				return mrc;
			}
		}
		pthread_mutex_lock(&p->mu);
		while (g->head == g->tail) {
			pthread_cond_wait(&g->filled, &p->mu);
		}
		pthread_mutex_unlock(&p->mu);
		g->cur = &g->slot[g->tail % PIPE_SLOTS];
		g->ci = 0;
	}
	return 0;
}

static int pipe_run(struct builder *b, name_fn fn)
{
	struct pipe p = {.b = b};
	struct pipe_batch *slots = b_alloc(b, PIPE_BYTES, false);
	if (!slots) {
		return -ENOMEM;
	}
	/* deal the streams into groups by body bytes (each to the lighter group so far) */
	uint64_t gbytes[PIPE_GROUPS] = {0};
	unsigned *all = b->heap, nall = b->nheap;
	unsigned cnt[PIPE_GROUPS] = {0};
	unsigned member[NX_FILTER_SOURCES_MAX], idx[NX_FILTER_SOURCES_MAX];
	for (unsigned j = 0; j < nall; j++) {
		uint64_t sz = 0;
		for (int e = 0; e < BL__COUNT; e++) {
			struct stat sb;
			if (b->ss[all[j]].fds[e] >= 0 && fstat(b->ss[all[j]].fds[e], &sb) == 0) {
				sz += (uint64_t)sb.st_size;
			}
		}
		/* group 0 is the caller's, which also merges the groups and runs fn (~1/4 of a
		 * pass): it takes half the bytes of a thread's group */
		unsigned lg = PIPE_GROUPS - 1; /* ties (one source alone) to a thread */
		for (unsigned k = 0; k + 1 < PIPE_GROUPS; k++) {
			lg = gbytes[k] * (k ? 1 : 2) < gbytes[lg] * (lg ? 1 : 2) ? k : lg;
		}
		gbytes[lg] += sz;
		member[j] = lg;
		cnt[lg]++;
	}
	/* the groups' heaps: slices of b->heap, each in source order */
	unsigned start[PIPE_GROUPS], at[PIPE_GROUPS];
	for (unsigned k = 0, s0 = 0; k < PIPE_GROUPS; k++) {
		start[k] = at[k] = s0;
		s0 += cnt[k];
	}
	memcpy(idx, all, nall * sizeof(*idx));
	for (unsigned j = 0; j < nall; j++) {
		all[at[member[j]]++] = idx[j];
	}
	pthread_mutex_init(&p.mu, NULL);
	unsigned started = 0;
	int rc = 0;
	for (unsigned k = 0; k < PIPE_GROUPS; k++) {
		struct pgroup *g = &p.g[k];
		g->p = &p;
		g->heap = all + start[k];
		g->nheap = cnt[k];
		g->slot = k ? slots + 1 + (size_t)(k - 1) * PIPE_SLOTS : slots;
		heap_make(b, g->heap, g->nheap);
		pthread_cond_init(&g->filled, NULL);
		pthread_cond_init(&g->freed, NULL);
	}
	for (; started + 1 < PIPE_GROUPS; started++) {
		if (pthread_create(&p.g[started + 1].th, NULL, pipe_merge, &p.g[started + 1]) !=
		    0) {
			rc = -ENOMEM;
			break;
		}
	}
	while (rc == 0) {
		for (unsigned k = 0; k < PIPE_GROUPS && rc == 0; k++) {
			rc = pipe_ready(&p, &p.g[k]);
		}
		if (rc != 0) {
			break;
		}
		const char *mn = NULL;
		size_t ml = 0;
		for (unsigned k = 0; k < PIPE_GROUPS; k++) {
			struct pgroup *g = &p.g[k];
			if (g->done) {
				continue;
			}
			const struct pipe_ent *e = &g->cur->e[g->ci];
			const char *nm = g->cur->arena + e->off;
			if (!mn || cmp_names(nm, e->len, mn, ml) < 0) {
				mn = nm;
				ml = e->len;
			}
		}
		if (!mn) {
			break;
		}
		struct nx_snap_combo c;
		memset(&c, 0, sizeof(c));
		for (unsigned k = 0; k < PIPE_GROUPS; k++) {
			struct pgroup *g = &p.g[k];
			if (g->done) {
				continue;
			}
			const struct pipe_ent *e = &g->cur->e[g->ci];
			if (e->len == ml && memcmp(g->cur->arena + e->off, mn, ml) == 0) {
				for (int f = 0; f < NX_SNAP_M__N; f++) {
					c.mask[f] |= e->c.mask[f];
				}
				g->ci++; /* the batch (and mn) stay until the next pipe_ready */
			}
		}
		rc = fn(b, mn, ml, &c);
		if (rc == 0) {
			name_done(b);
		}
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	for (unsigned k = 0; k < PIPE_GROUPS; k++) {
		pthread_cond_signal(&p.g[k].freed);
	}
	pthread_mutex_unlock(&p.mu);
	for (unsigned k = 0; k < started; k++) {
		pthread_join(p.g[k + 1].th, NULL);
	}
	for (unsigned k = 0; k < PIPE_GROUPS; k++) {
		pthread_cond_destroy(&p.g[k].filled);
		pthread_cond_destroy(&p.g[k].freed);
	}
	pthread_mutex_destroy(&p.mu);
	b_free(b, slots, PIPE_BYTES);
	return rc;
}

/* opts.threads = 0: pipelined when worth a thread (below this much body, the thread's start
 * and hand-overs cost about what it saves). */
#define SNAP_PIPE_MIN_BYTES (4u << 20)

static bool want_pipe(const struct nx_filter_snap_build_opts *opts, uint64_t body_bytes)
{
	unsigned t = opts ? opts->threads : 0;
	if (t != 0) {
		return t >= 2;
	}
	return sysconf(_SC_NPROCESSORS_ONLN) >= 2 && body_bytes >= SNAP_PIPE_MIN_BYTES;
}

/*
 * One pass over all sources. Fills sha[i] and st[i] per source. Returns 0, -errno, or what fn
 * returned.
 */
static int pass(struct builder *b, const struct nx_filter_snap_source *src, unsigned n, name_fn fn,
		uint8_t (*sha)[32], struct nx_filter_snap_source_stats *st)
{
	int rc = 0;
	b->ss = b_alloc(b, (n ? n : 1) * sizeof(*b->ss), true);
	b->heap = b_alloc(b, (n ? n : 1) * sizeof(*b->heap), false);
	if (!b->ss || !b->heap) {
		b_free(b, b->ss, (n ? n : 1) * sizeof(*b->ss));
		b_free(b, b->heap, (n ? n : 1) * sizeof(*b->heap));
		b->ss = NULL;
		b->heap = NULL;
		return -ENOMEM;
	}
	b->nss = n ? n : 1;
	for (unsigned i = 0; i < b->nss; i++) {
		for (int j = 0; j < BL__COUNT; j++) {
			b->ss[i].fds[j] = -1;
		}
	}
	b->nheap = 0;
	for (unsigned i = 0; i < n; i++) {
		for (int j = 0; j < BL__COUNT; j++) {
			b->ss[i].hs[j].nocheck = (b->clean >> i) & 1;
		}
		rc = stream_open(b, &b->ss[i], &src[i]);
		if (rc != 0) {
			goto out;
		}
		if (b->ss[i].have) {
			b->heap[b->nheap++] = i;
		}
	}
	/* split even with one source (an incremental build's single changed list): its merge and
	 * fn then run beside each other, one group empty */
	if (!b->pipe) {
		heap_make(b, b->heap, b->nheap);
	}
	rc = b->pipe ? pipe_run(b, fn) : serial_run(b, fn);
	if (rc != 0) {
		goto out;
	}
	for (unsigned i = 0; i < n && rc == 0; i++) {
		rc = stream_sha(&b->ss[i], &src[i], sha[i]);
		st[i] = b->ss[i].st;
	}
out:
	if (b->opts && b->opts->on_step) {
		b->opts->on_step(b->opts->arg);
	}
	streams_close(b);
	return rc;
}

/* ---- source sets ---- */

static struct nx_snap_combo *combo_at(const struct builder *b, uint32_t i)
{
	return &b->chunks[i / COMBO_CHUNK][i % COMBO_CHUNK];
}

static uint32_t combo_hash(const struct nx_snap_combo *c)
{
	return (uint32_t)XXH3_64bits(c, sizeof(*c));
}

/* Index of c; adds it when `add` (else NX_ENOTFOUND: bodies changed between passes). */
static int64_t combo_intern(struct builder *b, const struct nx_snap_combo *c, bool add)
{
	uint32_t h = combo_hash(c);
	for (uint32_t i = h & (b->hcap - 1);; i = (i + 1) & (b->hcap - 1)) {
		uint32_t v = b->hidx[i];
		if (v == 0) {
			break;
		}
		if (memcmp(combo_at(b, v - 1), c, sizeof(*c)) == 0) {
			return v - 1;
		}
	}
	if (!add) {
		return NX_ENOTFOUND;
	}
	if (b->ncombos >= NX_FILTER_ENTRIES_MAX) {
		return NX_ELIMIT;
	}
	/* keep the index at most half full */
	if ((uint64_t)(b->ncombos + 1) * 2 > b->hcap) {
		uint32_t ncap = b->hcap * 2;
		uint32_t *nh = b_alloc(b, (size_t)ncap * sizeof(*nh), true);
		if (!nh) {
			return -ENOMEM;
		}
		for (uint32_t j = 0; j < b->ncombos; j++) {
			uint32_t k = combo_hash(combo_at(b, j)) & (ncap - 1);
			while (nh[k]) {
				k = (k + 1) & (ncap - 1);
			}
			nh[k] = j + 1;
		}
		b_free(b, b->hidx, (size_t)b->hcap * sizeof(*b->hidx));
		b->hidx = nh;
		b->hcap = ncap;
	}
	uint32_t ci = b->ncombos;
	if (ci % COMBO_CHUNK == 0) {
		uint32_t k = ci / COMBO_CHUNK;
		if (k == b->nchunks_cap) {
			uint32_t ncap = b->nchunks_cap ? b->nchunks_cap * 2 : 16;
			struct nx_snap_combo **nc = b_alloc(b, ncap * sizeof(*nc), true);
			if (!nc) {
				return -ENOMEM;
			}
			if (b->chunks) {
				memcpy(nc, b->chunks, b->nchunks_cap * sizeof(*nc));
			}
			b_free(b, b->chunks, b->nchunks_cap * sizeof(*nc));
			b->chunks = nc;
			b->nchunks_cap = ncap;
		}
		b->chunks[k] = b_alloc(b, COMBO_CHUNK * sizeof(struct nx_snap_combo), false);
		if (!b->chunks[k]) {
			return -ENOMEM;
		}
	}
	*combo_at(b, ci) = *c;
	uint32_t i = h & (b->hcap - 1);
	while (b->hidx[i]) {
		i = (i + 1) & (b->hcap - 1);
	}
	b->hidx[i] = ci + 1;
	b->ncombos++;
	return ci;
}

static void combos_free(struct builder *b)
{
	for (uint32_t k = 0; b->chunks && k < b->nchunks_cap; k++) {
		b_free(b, b->chunks[k], COMBO_CHUNK * sizeof(struct nx_snap_combo));
	}
	b_free(b, b->chunks, b->nchunks_cap * sizeof(*b->chunks));
	b_free(b, b->hidx, (size_t)b->hcap * sizeof(*b->hidx));
	b_free(b, b->uses, (size_t)b->ucap * sizeof(*b->uses));
	b->chunks = NULL;
	b->hidx = NULL;
	b->uses = NULL;
	b->ucap = 0;
}

/* ---- the three passes ---- */

/* uses[i]++ (grown as the table grows). */
static int combo_use(struct builder *b, uint32_t i)
{
	if (i >= b->ucap) {
		uint32_t ncap = b->ucap ? b->ucap * 2 : 1024;
		while (ncap <= i) {
			ncap *= 2;
		}
		uint32_t *nu = b_alloc(b, (size_t)ncap * sizeof(*nu), true);
		if (!nu) {
			return -ENOMEM;
		}
		if (b->uses) {
			memcpy(nu, b->uses, (size_t)b->ucap * sizeof(*nu));
		}
		b_free(b, b->uses, (size_t)b->ucap * sizeof(*b->uses));
		b->uses = nu;
		b->ucap = ncap;
	}
	b->uses[i]++;
	return 0;
}

static int canon_cmp(const void *x, const void *y, void *arg)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	const struct builder *b = arg;
	if (b->uses[i] != b->uses[j]) {
		return b->uses[i] > b->uses[j] ? -1 : 1;
	}
	return memcmp(combo_at(b, i), combo_at(b, j), sizeof(struct nx_snap_combo));
}

/*
 * Put the source sets in their canonical order: most used first (the matcher reads the common
 * ones: they share cache lines), then by value. The order depends only on the records, so a
 * full build and an incremental one of the same bodies write the same table. perm[old] = new
 * (NULL: not wanted). The hash index is rebuilt: later lookups return the new indexes.
 */
static int combos_canon(struct builder *b, uint32_t *perm)
{
	uint32_t n = b->ncombos;
	if (n == 0) {
		return 0;
	}
	if (b->ucap < n) {
		return -EINVAL; /* every interned set was counted */
	}
	size_t ob = (size_t)n * sizeof(uint32_t);
	size_t cb = (size_t)n * sizeof(struct nx_snap_combo);
	uint32_t *order = b_alloc(b, ob, false);
	struct nx_snap_combo *copy = b_alloc(b, cb, false);
	if (!order || !copy) {
		b_free(b, order, ob);
		b_free(b, copy, cb);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		order[i] = i;
		copy[i] = *combo_at(b, i);
	}
	qsort_r(order, n, sizeof(*order), canon_cmp, b);
	for (uint32_t i = 0; i < n; i++) {
		*combo_at(b, i) = copy[order[i]];
		if (perm) {
			perm[order[i]] = i;
		}
	}
	memset(b->hidx, 0, (size_t)b->hcap * sizeof(*b->hidx));
	for (uint32_t j = 0; j < n; j++) {
		uint32_t k = combo_hash(combo_at(b, j)) & (b->hcap - 1);
		while (b->hidx[k]) {
			k = (k + 1) & (b->hcap - 1);
		}
		b->hidx[k] = j + 1;
	}
	b_free(b, order, ob);
	b_free(b, copy, cb);
	return 0;
}

static int count_fn(struct builder *b, const char *name, size_t len, const struct nx_snap_combo *c)
{
	b->n++;
	if (b->fh) {
		b->fh[nx_snap_fingerprint(name, len, b->seed, b->kf, b->low_bits).bucket]++;
	}
	int64_t r = combo_intern(b, c, true);
	return r < 0 ? (int)r : combo_use(b, (uint32_t)r);
}

static int hist_fn(struct builder *b, const char *name, size_t len, const struct nx_snap_combo *c)
{
	(void)c;
	struct nx_snap_fp fp = nx_snap_fingerprint(name, len, b->seed, b->kbits, b->low_bits);
	b->bkt[fp.bucket + 1]++;
	return 0;
}

/* Placement in batches: the bucket cursors and then the record lines of PLACE_BATCH names are
 * prefetched before they are touched (both are random accesses into arrays larger than the
 * caches: the cursor table 0.5 MB, the records 13 MB for the real lists). */
static int place_flush(struct builder *b)
{
	unsigned rbits = b->low_bits + b->combo_bits;
	for (unsigned i = 0; i < b->npend; i++) {
		struct pend *e = &b->pend[i];
		uint32_t idx = b->bkt[e->bucket + 1];
		if (idx >= b->n || b->placed >= b->n) {
			b->npend = 0;
			return -EAGAIN; /* bodies changed between passes */
		}
		b->bkt[e->bucket + 1] = idx + 1;
		b->placed++;
		e->idx = idx;
		__builtin_prefetch(b->rec + (((uint64_t)idx * rbits) >> 3), 1);
	}
	for (unsigned i = 0; i < b->npend; i++) {
		const struct pend *e = &b->pend[i];
		uint64_t pos = (uint64_t)e->idx * rbits;
		nx_snap_put_bits(b->rec, pos, b->low_bits, e->low);
		nx_snap_put_bits(b->rec, pos + b->low_bits, b->combo_bits, e->ci);
	}
	b->npend = 0;
	return 0;
}

static int place_fn(struct builder *b, const char *name, size_t len, const struct nx_snap_combo *c)
{
	struct nx_snap_fp fp = nx_snap_fingerprint(name, len, b->seed, b->kbits, b->low_bits);
	/* neighbours in name order often have the same set: skip the hash lookup then */
	if (!b->last_ok || memcmp(c, &b->last_c, sizeof(*c)) != 0) {
		int64_t ci = combo_intern(b, c, false);
		if (ci < 0) {
			return -EAGAIN; /* bodies changed between passes */
		}
		b->last_c = *c;
		b->last_ci = (uint32_t)ci;
		b->last_ok = true;
	}
	__builtin_prefetch(&b->bkt[fp.bucket + 1], 1);
	b->pend[b->npend++] = (struct pend){.bucket = fp.bucket, .ci = b->last_ci, .low = fp.low};
	return b->npend == PLACE_BATCH ? place_flush(b) : 0;
}

struct rec {
	uint64_t low;
	uint32_t combo;
};

static int rec_cmp(const void *x, const void *y)
{
	const struct rec *a = x, *c = y;
	if (a->low != c->low) {
		return a->low < c->low ? -1 : 1;
	}
	return a->combo < c->combo ? -1 : a->combo > c->combo;
}

/*
 * Sort each bucket by (low, source set), drop exact duplicates (two names with one
 * fingerprint and one source set), repack in place and fix the offsets. Returns the records
 * kept; *entries = sum of their source-set sizes. tmp holds the largest bucket.
 */
static uint64_t finish_buckets(struct builder *b, struct rec *tmp, uint64_t *entries)
{
	unsigned lb = b->low_bits, cb = b->combo_bits, rb = lb + cb;
	uint32_t nb = 1u << b->kbits;
	uint64_t w = 0, ent = 0;
	uint32_t start = 0;
	for (uint32_t bi = 0; bi < nb; bi++) {
		uint32_t end = b->bkt[bi + 1];
		uint32_t m = end - start;
		for (uint32_t i = 0; i < m; i++) {
			uint64_t pos = (uint64_t)(start + i) * rb;
			tmp[i].low = nx_snap_get_bits(b->rec, pos, lb);
			tmp[i].combo = (uint32_t)nx_snap_get_bits(b->rec, pos + lb, cb);
		}
		if (m > 32) {
			qsort(tmp, m, sizeof(*tmp), rec_cmp);
		} else {
			for (uint32_t i = 1; i < m; i++) {
				struct rec v = tmp[i];
				uint32_t j = i;
				while (j > 0 && rec_cmp(&tmp[j - 1], &v) > 0) {
					tmp[j] = tmp[j - 1];
					j--;
				}
				tmp[j] = v;
			}
		}
		b->bkt[bi] = (uint32_t)w;
		for (uint32_t i = 0; i < m; i++) {
			if (i > 0 && rec_cmp(&tmp[i - 1], &tmp[i]) == 0) {
				continue;
			}
			/* w <= start + i: writing never overtakes the records still to read */
			uint64_t pos = w * rb;
			nx_snap_put_bits(b->rec, pos, lb, tmp[i].low);
			nx_snap_put_bits(b->rec, pos + lb, cb, tmp[i].combo);
			const struct nx_snap_combo *c = combo_at(b, tmp[i].combo);
			ent += (uint64_t)__builtin_popcountll(c->mask[0] | c->mask[1] | c->mask[2] |
							      c->mask[3]);
			w++;
		}
		start = end;
	}
	b->bkt[nb] = (uint32_t)w;
	*entries = ent;
	return w;
}

static unsigned ceil_log2(uint64_t n)
{
	unsigned lg = 0;
	while (lg < 63 && (1ull << lg) < n) {
		lg++;
	}
	return lg;
}

static unsigned choose_bits(uint64_t n)
{
	unsigned lg = ceil_log2(n);
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
		      const struct builder *b, uint64_t nrec, uint64_t nent, uint64_t *size_out)
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
	h.nentries = nent;
	h.nrecords = (uint32_t)nrec;
	h.ncombos = b->ncombos;
	h.low_bits = (uint8_t)b->low_bits;
	h.combo_bits = (uint8_t)b->combo_bits;
	h.src_off = sizeof(h);
	h.bkt_off = h.src_off + (uint64_t)nsrc * sizeof(struct nx_snap_src);
	uint64_t bkt_bytes = ((uint64_t)(1u << b->kbits) + 1) * sizeof(uint32_t);
	h.combo_off = (h.bkt_off + bkt_bytes + 7) & ~7ull;
	h.rec_off = h.combo_off + (uint64_t)b->ncombos * sizeof(struct nx_snap_combo);
	uint64_t rec_bytes = (nrec * (b->low_bits + b->combo_bits) + 7) / 8 + NX_SNAP_REC_PAD;
	h.file_size = h.rec_off + rec_bytes;
	h.created = (uint64_t)time(NULL);
	static const uint8_t zeros[8];
	size_t pad = (size_t)(h.combo_off - h.bkt_off - bkt_bytes);
	/* bits of the last record's byte beyond it and the pad are zero (repacking may have left
	 * old bits there) */
	uint64_t used_bits = nrec * (b->low_bits + b->combo_bits);
	if (used_bits % 8) {
		b->rec[used_bits / 8] &= (uint8_t)((1u << (used_bits % 8)) - 1);
	}
	memset(b->rec + (used_bits + 7) / 8, 0, NX_SNAP_REC_PAD);

	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, srcs, (size_t)nsrc * sizeof(*srcs));
	XXH3_64bits_update(&st, b->bkt, bkt_bytes);
	XXH3_64bits_update(&st, zeros, pad);
	for (uint32_t i = 0; i < b->ncombos; i += COMBO_CHUNK) {
		uint32_t m = b->ncombos - i < COMBO_CHUNK ? b->ncombos - i : COMBO_CHUNK;
		XXH3_64bits_update(&st, b->chunks[i / COMBO_CHUNK],
				   m * sizeof(struct nx_snap_combo));
	}
	XXH3_64bits_update(&st, b->rec, rec_bytes);
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
	for (uint32_t i = 0; rc == 0 && i < b->ncombos; i += COMBO_CHUNK) {
		uint32_t m = b->ncombos - i < COMBO_CHUNK ? b->ncombos - i : COMBO_CHUNK;
		rc = nx_write_all(fd, b->chunks[i / COMBO_CHUNK], m * sizeof(struct nx_snap_combo));
	}
	if (rc == 0) {
		rc = nx_write_all(fd, b->rec, rec_bytes);
	}
	if (rc != 0) {
		close(fd);
		unlink(tmp);
		return rc;
	}
	*size_out = h.file_size;
	return nx_tmp_commit(fd, tmp, path);
}

/* ---- incremental build: prev's records, the changed sources' bits taken out and put in again
 * from their bodies ---- */

/* Names of the re-read sources held at once (16 B each: 16 MiB); more: a full build. */
#define SNAP_INCR_NAMES_MAX (1u << 20)
/* Not incremental when the changed sources held more than this share of prev's entries. */
#define SNAP_INCR_SHARE_DIV 2

static int collect_fn(struct builder *b, const char *name, size_t len,
		      const struct nx_snap_combo *c)
{
	XXH128_hash_t h = XXH3_128bits_withSeed(name, len, b->seed);
	int64_t lc = combo_intern(b, c, true);
	if (lc < 0) {
		return (int)lc;
	}
	if (b->nnv == b->nvcap) {
		size_t ncap = b->nvcap ? b->nvcap * 2 : 4096;
		if (ncap > SNAP_INCR_NAMES_MAX) {
			return NX_ELIMIT;
		}
		struct nvrec *nn = b_alloc(b, ncap * sizeof(*nn), false);
		if (!nn) {
			return -ENOMEM;
		}
		if (b->nv) {
			memcpy(nn, b->nv, b->nnv * sizeof(*nn));
		}
		b_free(b, b->nv, b->nvcap * sizeof(*b->nv));
		b->nv = nn;
		b->nvcap = ncap;
	}
	struct nvrec *r = &b->nv[b->nnv++];
	r->bucket = b->k0 ? (uint32_t)(h.high64 >> (64 - b->k0)) : 0;
	r->low = h.low64 >> (64 - b->low_bits);
	r->lc = (uint32_t)lc;
	return 0;
}

static int nvrec_cmp(const void *x, const void *y)
{
	const struct nvrec *a = x, *c = y;
	if (a->bucket != c->bucket) {
		return a->bucket < c->bucket ? -1 : 1;
	}
	if (a->low != c->low) {
		return a->low < c->low ? -1 : 1;
	}
	return a->lc < c->lc ? -1 : a->lc > c->lc;
}

/* prev, mapped and checked (header, checksums, bounds) */
struct prev {
	const uint8_t *map;
	size_t size;
	const struct nx_snap_hdr *h;
	const struct nx_snap_src *src;
	const uint32_t *bkt;
	const struct nx_snap_combo *combo;
	const uint8_t *rec;
};

static void prev_close(struct builder *b, struct prev *p)
{
	if (p->map) {
		munmap((void *)p->map, p->size);
		nx_ledger_charge(NX_OWNER_filter_build, -(int64_t)p->size, -1);
		charge(b, -(int64_t)p->size);
		p->map = NULL;
	}
}

/* 0, or 1: not usable (missing, another version, corrupt: a full build decides). */
static int prev_open(struct builder *b, const char *path, struct prev *p)
{
	memset(p, 0, sizeof(*p));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return 1;
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof(struct nx_snap_hdr)) {
		close(fd);
		return 1;
	}
	void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		return 1;
	}
	p->map = m;
	p->size = (size_t)sb.st_size;
	/* mapped pages this build reads: charged as the builder's while it holds them */
	nx_ledger_charge(NX_OWNER_filter_build, (int64_t)p->size, 1);
	charge(b, (int64_t)p->size);
	struct nx_snap_hdr h;
	memcpy(&h, m, sizeof(h));
	uint64_t hx = h.hdr_xxh;
	h.hdr_xxh = 0;
	if (memcmp(h.magic, NX_SNAP_MAGIC, 8) != 0 || h.version != NX_SNAP_VERSION ||
	    h.endian != NX_SNAP_ENDIAN || h.hdr_size != sizeof(h) ||
	    h.src_size != sizeof(struct nx_snap_src) || XXH3_64bits(&h, sizeof(h)) != hx ||
	    h.file_size != p->size || h.nsources > NX_FILTER_SOURCES_MAX ||
	    h.bucket_bits > NX_SNAP_BUCKET_BITS_MAX || h.low_bits == 0 ||
	    h.low_bits > NX_SNAP_FIELD_BITS_MAX || h.combo_bits > NX_SNAP_COMBO_BITS_MAX ||
	    h.combo_bits != ceil_log2(h.ncombos)) {
		return 1;
	}
	uint64_t bkt_bytes = ((uint64_t)(1u << h.bucket_bits) + 1) * sizeof(uint32_t);
	uint64_t rec_bytes =
	    ((uint64_t)h.nrecords * (h.low_bits + h.combo_bits) + 7) / 8 + NX_SNAP_REC_PAD;
	if (h.src_off != sizeof(h) ||
	    h.bkt_off != h.src_off + (uint64_t)h.nsources * sizeof(struct nx_snap_src) ||
	    h.combo_off != ((h.bkt_off + bkt_bytes + 7) & ~7ull) ||
	    h.rec_off != h.combo_off + (uint64_t)h.ncombos * sizeof(struct nx_snap_combo) ||
	    h.rec_off + rec_bytes != h.file_size ||
	    XXH3_64bits(p->map + sizeof(h), p->size - sizeof(h)) != h.body_xxh) {
		return 1;
	}
	p->h = (const struct nx_snap_hdr *)p->map;
	p->src = (const struct nx_snap_src *)(p->map + h.src_off);
	p->bkt = (const uint32_t *)(p->map + h.bkt_off);
	p->combo = (const struct nx_snap_combo *)(p->map + h.combo_off);
	p->rec = p->map + h.rec_off;
	uint32_t nb = 1u << h.bucket_bits;
	if (p->bkt[0] != 0 || p->bkt[nb] != h.nrecords) {
		return 1;
	}
	return 0;
}

struct incr {
	const struct prev *p;
	struct nx_snap_combo keep; /* masks of the sources taken from prev (the others cleared) */
	struct nx_snap_combo *gm;  /* re-read sets over global bits, by local index (owned) */
	uint32_t *remap; /* prev set index -> new index + 1, 0 = not yet / empty (owned) */
	uint8_t *empty;	 /* prev set index -> 1 when nothing of it is kept (owned) */
	uint32_t *cnt;	 /* records per prev bucket (owned) */
	uint32_t *perm;	 /* after the count walk: interned index -> canonical (owned) */
	uint64_t out;	 /* records emitted */
	uint64_t w;	 /* place walk: next record */
};

static bool combo_empty(const struct nx_snap_combo *c)
{
	return (c->mask[0] | c->mask[1] | c->mask[2] | c->mask[3]) == 0;
}

/* One record of the new file, in prev's bucket bk: counted (phase 0) or placed (phase 1). */
static int emit(struct builder *b, struct incr *x, int phase, uint32_t bk, uint64_t low,
		const struct nx_snap_combo *c, int64_t prev_ci)
{
	int64_t ci;
	if (prev_ci >= 0 && x->remap[prev_ci]) {
		ci = (int64_t)x->remap[prev_ci] - 1;
	} else {
		ci = combo_intern(b, c, phase == 0);
		if (ci < 0) {
			return ci == NX_ENOTFOUND ? -EAGAIN : (int)ci;
		}
		if (prev_ci >= 0) {
			x->remap[prev_ci] = (uint32_t)ci + 1;
		}
	}
	if (phase == 0) {
		x->cnt[bk]++;
		x->out++;
		return combo_use(b, (uint32_t)ci);
	}
	unsigned rbits = b->low_bits + b->combo_bits;
	uint64_t pos = x->w * rbits;
	if (x->w >= b->n) {
		return -EAGAIN;
	}
	nx_snap_put_bits(b->rec, pos, b->low_bits, low);
	nx_snap_put_bits(b->rec, pos + b->low_bits, b->combo_bits, (uint64_t)ci);
	x->w++;
	return 0;
}

/*
 * Walk prev's records and the re-read names together, bucket by bucket in (low) order. A
 * record keeps the bits of the sources not re-read; a re-read name with its fingerprint ORs its
 * set into the first such record (the matcher ORs the sets of equal fingerprints: the same
 * decisions as any split), or is a record of its own. Records left without a source are gone.
 */
static int incr_walk(struct builder *b, struct incr *x, int phase)
{
	const struct prev *p = x->p;
	unsigned lb = p->h->low_bits, rb = lb + p->h->combo_bits;
	uint32_t nb = 1u << p->h->bucket_bits;
	size_t j = 0;
	uint64_t steps = 0;
	for (uint32_t bk = 0; bk < nb; bk++) {
		uint32_t r = p->bkt[bk], re = p->bkt[bk + 1];
		if (r > re || re > p->h->nrecords) {
			return 1;
		}
		uint64_t olow = r < re ? nx_snap_get_bits(p->rec, (uint64_t)r * rb, lb) : 0;
		while (r < re || (j < b->nnv && b->nv[j].bucket == bk)) {
			bool have_nv = j < b->nnv && b->nv[j].bucket == bk;
			uint64_t low =
			    r < re && (!have_nv || olow <= b->nv[j].low) ? olow : b->nv[j].low;
			struct nx_snap_combo u;
			memset(&u, 0, sizeof(u));
			bool have_u = false;
			while (j < b->nnv && b->nv[j].bucket == bk && b->nv[j].low == low) {
				const struct nx_snap_combo *g = &x->gm[b->nv[j].lc];
				for (int f = 0; f < NX_SNAP_M__N; f++) {
					u.mask[f] |= g->mask[f];
				}
				have_u = true;
				j++;
			}
			bool merged = false;
			while (r < re && olow == low) {
				uint64_t oci = nx_snap_get_bits(p->rec, (uint64_t)r * rb + lb,
								p->h->combo_bits);
				if (oci >= p->h->ncombos) {
					return 1;
				}
				int rc = 0;
				if (have_u && !merged) {
					struct nx_snap_combo c = p->combo[oci];
					for (int f = 0; f < NX_SNAP_M__N; f++) {
						c.mask[f] =
						    (c.mask[f] & x->keep.mask[f]) | u.mask[f];
					}
					merged = true;
					rc = emit(b, x, phase, bk, low, &c, -1);
				} else if (!x->empty[oci]) {
					struct nx_snap_combo c = p->combo[oci];
					for (int f = 0; f < NX_SNAP_M__N; f++) {
						c.mask[f] &= x->keep.mask[f];
					}
					rc = emit(b, x, phase, bk, low, &c, (int64_t)oci);
				}
				if (rc != 0) {
					return rc;
				}
				r++;
				if (r < re) {
					uint64_t nl =
					    nx_snap_get_bits(p->rec, (uint64_t)r * rb, lb);
					if (nl < olow) {
						return 1; /* prev's order broken: not usable */
					}
					olow = nl;
				}
			}
			if (have_u && !merged) {
				int rc = emit(b, x, phase, bk, low, &u, -1);
				if (rc != 0) {
					return rc;
				}
			}
			if (++steps % NX_FILTER_STEP_NAMES == 0 && b->opts && b->opts->on_step) {
				b->opts->on_step(b->opts->arg);
			}
		}
	}
	return 0;
}

/*
 * The incremental build. 0: written; 1: not usable here (a full build follows); < 0: error.
 * Sources whose identity (opts->shas) equals prev's for the same index and name are taken
 * from prev's records; the others are read again. The result equals a full build of the same
 * bodies with prev's seed: the same records (each name's fingerprint and source set), source
 * sets in the same canonical order, so the same bytes but for the header's `created` (and
 * its checksum) — unless two names share a whole fingerprint (p ~ n^2 / 2^(k+low_bits+1),
 * 5.6e-5 for the real lists), where the split of their sets over records may differ and the
 * matcher, which ORs the sets of equal fingerprints, decides the same.
 */
static int incr_build(const char *path, const struct nx_filter_snap_source *src, unsigned n,
		      const struct nx_filter_snap_build_opts *opts, struct builder *b,
		      struct nx_filter_snap_build_report *rep)
{
	struct prev p;
	struct incr x;
	memset(&x, 0, sizeof(x));
	x.p = &p;
	struct builder lb = {.opts = opts, .low_bits = b->low_bits, .acct = b};
	struct nx_filter_snap_source sub[NX_FILTER_SOURCES_MAX];
	unsigned subi[NX_FILTER_SOURCES_MAX], m = 0;
	uint8_t sha_sub[NX_FILTER_SOURCES_MAX][32];
	struct nx_filter_snap_source_stats st_sub[NX_FILTER_SOURCES_MAX];
	struct nx_snap_src srcs[NX_FILTER_SOURCES_MAX];
	size_t gm_bytes = 0, remap_bytes = 0, empty_bytes = 0, cnt_bytes = 0, bkt_bytes = 0;
	size_t tmp_bytes = 0;
	struct rec *tmp = NULL;
	int rc = prev_open(b, opts->prev, &p);
	if (rc != 0) {
		goto out;
	}
	rc = 1;
	const struct nx_snap_hdr *h = p.h;
	if (h->nsources != n || h->low_bits != b->low_bits ||
	    (opts->seed && opts->seed != h->seed) || h->seed == 0) {
		goto out;
	}
	uint64_t changed_entries = 0, all_entries = 0;
	memset(srcs, 0, sizeof(srcs));
	for (unsigned i = 0; i < n; i++) {
		if (strncmp(p.src[i].name, src[i].name, sizeof(p.src[i].name)) != 0) {
			goto out;
		}
		all_entries += p.src[i].entries;
		if (memcmp(p.src[i].sha256, opts->shas[i], 32) == 0) {
			srcs[i] = p.src[i];
			rep->src[i].entries = p.src[i].entries;
			rep->src[i].list = p.src[i].list;
			rep->src[i].wild = p.src[i].wild;
			rep->src[i].allow = p.src[i].allow;
			for (int f = 0; f < NX_SNAP_M__N; f++) {
				x.keep.mask[f] |= 1ull << i;
			}
		} else {
			changed_entries += p.src[i].entries;
			subi[m] = i;
			sub[m++] = src[i];
		}
	}
	if (changed_entries > all_entries / SNAP_INCR_SHARE_DIV) {
		goto out;
	}
	b->seed = h->seed;
	lb.seed = h->seed;
	lb.k0 = h->bucket_bits;
	lb.hcap = 64;
	lb.hidx = b_alloc(&lb, lb.hcap * sizeof(*lb.hidx), true);
	if (!lb.hidx) {
		rc = -ENOMEM;
		goto out;
	}
	lb.pipe = want_pipe(opts, changed_entries * 24); /* ~24 body bytes a name */
	/* the re-read sources' names: fingerprints at prev's k, sets over local bits */
	rc = pass(&lb, sub, m, collect_fn, sha_sub, st_sub);
	if (rc == NX_ELIMIT) {
		rc = 1;
	}
	if (rc != 0) {
		goto out;
	}
	if (lb.nnv > 1) {
		qsort(lb.nv, lb.nnv, sizeof(*lb.nv), nvrec_cmp);
	}
	gm_bytes = (size_t)(lb.ncombos ? lb.ncombos : 1) * sizeof(*x.gm);
	remap_bytes = (size_t)(h->ncombos ? h->ncombos : 1) * sizeof(*x.remap);
	empty_bytes = h->ncombos ? h->ncombos : 1;
	cnt_bytes = ((size_t)1 << h->bucket_bits) * sizeof(*x.cnt);
	x.gm = b_alloc(b, gm_bytes, true);
	x.remap = b_alloc(b, remap_bytes, true);
	x.empty = b_alloc(b, empty_bytes, true);
	x.cnt = b_alloc(b, cnt_bytes, true);
	if (!x.gm || !x.remap || !x.empty || !x.cnt) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t l = 0; l < lb.ncombos; l++) {
		const struct nx_snap_combo *c = combo_at(&lb, l);
		for (unsigned k = 0; k < m; k++) {
			for (int f = 0; f < NX_SNAP_M__N; f++) {
				if (c->mask[f] >> k & 1) {
					x.gm[l].mask[f] |= 1ull << subi[k];
				}
			}
		}
	}
	for (uint32_t ci = 0; ci < h->ncombos; ci++) {
		struct nx_snap_combo c = p.combo[ci];
		for (int f = 0; f < NX_SNAP_M__N; f++) {
			c.mask[f] &= x.keep.mask[f];
		}
		x.empty[ci] = combo_empty(&c);
	}
	/* the count walk: records per prev bucket, the new sets and their uses */
	b->hcap = 64;
	b->hidx = b_alloc(b, b->hcap * sizeof(*b->hidx), true);
	if (!b->hidx) {
		rc = -ENOMEM;
		goto out;
	}
	b->nv = lb.nv;
	b->nnv = lb.nnv;
	rc = incr_walk(b, &x, 0);
	b->nv = NULL;
	b->nnv = 0;
	if (rc != 0) {
		goto out;
	}
	b->n = x.out;
	b->kbits = choose_bits(b->n);
	if (b->kbits > h->bucket_bits || b->n > NX_FILTER_ENTRIES_MAX) {
		rc = 1; /* more buckets than prev's fingerprints can split into */
		goto out;
	}
	/* canonical set order (as a full build): the remap cache is redone for the new indexes */
	x.perm = b_alloc(b, (size_t)(b->ncombos ? b->ncombos : 1) * sizeof(*x.perm), false);
	if (!x.perm) {
		rc = -ENOMEM;
		goto out;
	}
	rc = combos_canon(b, x.perm);
	if (rc != 0) {
		goto out;
	}
	for (uint32_t ci = 0; ci < h->ncombos; ci++) {
		if (x.remap[ci]) {
			x.remap[ci] = x.perm[x.remap[ci] - 1] + 1;
		}
	}
	b->combo_bits = ceil_log2(b->ncombos);
	unsigned d = h->bucket_bits - b->kbits;
	uint32_t nb = 1u << b->kbits;
	bkt_bytes = ((size_t)nb + 1) * sizeof(uint32_t);
	b->bkt = b_alloc(b, bkt_bytes, true);
	b->rec_bytes = (size_t)((b->n * (b->low_bits + b->combo_bits) + 7) / 8 + NX_SNAP_REC_PAD);
	b->rec = b_alloc(b, b->rec_bytes, true);
	if (!b->bkt || !b->rec) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t bk = 0; bk < (1u << h->bucket_bits); bk++) {
		b->bkt[(bk >> d) + 1] += x.cnt[bk];
	}
	uint32_t maxb = 0;
	for (uint32_t bi = 0; bi < nb; bi++) {
		maxb = b->bkt[bi + 1] > maxb ? b->bkt[bi + 1] : maxb;
		b->bkt[bi + 1] += b->bkt[bi]; /* bkt[b+1] = end of bucket b */
	}
	tmp_bytes = (size_t)(maxb ? maxb : 1) * sizeof(*tmp);
	tmp = b_alloc(b, tmp_bytes, false);
	if (!tmp) {
		rc = -ENOMEM;
		goto out;
	}
	/* the place walk: records in prev's bucket order, which is the new buckets' order */
	b->nv = lb.nv;
	b->nnv = lb.nnv;
	rc = incr_walk(b, &x, 1);
	b->nv = NULL;
	b->nnv = 0;
	if (rc == 0 && x.w != b->n) {
		rc = -EAGAIN;
	}
	if (rc != 0) {
		goto out;
	}
	uint64_t nent = 0;
	uint64_t stored = finish_buckets(b, tmp, &nent);
	for (unsigned k = 0; k < m; k++) {
		unsigned i = subi[k];
		snprintf(srcs[i].name, sizeof(srcs[i].name), "%s", src[i].name);
		memcpy(srcs[i].sha256, sha_sub[k], 32);
		rep->src[i] = st_sub[k];
		srcs[i].entries = st_sub[k].entries;
		srcs[i].list = st_sub[k].list;
		srcs[i].wild = st_sub[k].wild;
		srcs[i].allow = st_sub[k].allow;
	}
	if (opts->on_step) {
		opts->on_step(opts->arg);
	}
	rc = write_file(path, srcs, n, b, stored, nent, &rep->bytes);
	if (rc == 0) {
		rep->entries = nent;
		rep->names = stored;
		rep->reread = m;
		rep->incremental = true;
	}
out:
	b_free(b, tmp, tmp_bytes);
	b_free(b, b->rec, b->rec_bytes);
	b->rec = NULL;
	b_free(b, b->bkt, bkt_bytes);
	b->bkt = NULL;
	b_free(b, x.perm, (size_t)(b->ncombos ? b->ncombos : 1) * sizeof(*x.perm));
	b_free(b, x.gm, gm_bytes);
	b_free(b, x.remap, remap_bytes);
	b_free(b, x.empty, empty_bytes);
	b_free(b, x.cnt, cnt_bytes);
	b_free(&lb, lb.nv, lb.nvcap * sizeof(*lb.nv));
	combos_free(&lb);
	prev_close(b, &p);
	return rc;
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
	unsigned low_bits = opts && opts->low_bits ? opts->low_bits : NX_SNAP_LOW_BITS;
	if (low_bits > NX_SNAP_FIELD_BITS_MAX) {
		return -EINVAL;
	}
	if (sodium_init() < 0) {
		return -ENOSYS;
	}
	uint64_t t0 = now_ms();
	int64_t incr_peak = 0;
	if (opts && opts->prev && opts->shas) {
		struct builder ib = {.opts = opts, .low_bits = low_bits};
		int irc = incr_build(path, src, n, opts, &ib, rep);
		rep->combos = ib.ncombos;
		rep->bucket_bits = ib.kbits;
		rep->low_bits = ib.low_bits;
		combos_free(&ib);
		incr_peak = ib.peak;
		if (irc == 0) {
			rep->peak_build_bytes = (uint64_t)ib.peak;
			rep->build_ms = now_ms() - t0;
			return 0;
		}
		/* prev not usable (or the walk failed): a full build decides */
		memset(rep, 0, sizeof(*rep));
		rep->sources = n;
	}
	struct builder b = {.opts = opts, .low_bits = low_bits};
	b.seed = opts && opts->seed ? opts->seed : 0;
	while (b.seed == 0) {
		randombytes_buf(&b.seed, sizeof(b.seed));
	}
	struct nx_snap_src srcs[NX_FILTER_SOURCES_MAX];
	memset(srcs, 0, sizeof(srcs));
	uint8_t sha[NX_FILTER_SOURCES_MAX][32], sha2[NX_FILTER_SOURCES_MAX][32];
	struct nx_filter_snap_source_stats st2[NX_FILTER_SOURCES_MAX];
	size_t bkt_bytes = 0, tmp_bytes = 0;
	struct rec *tmp = NULL;
	uint64_t stored = 0, nent = 0;
	int rc = 0;

	b.hcap = 64;
	b.hidx = b_alloc(&b, b.hcap * sizeof(*b.hidx), true);
	if (!b.hidx) {
		return -ENOMEM;
	}
	/* Pass 1 also counts records per bucket at kf bits (from the bodies' bytes / 16 as a
	 * name count), enough for k unless the distinct names average fewer than 16 bytes of
	 * body per name (then pass 2 counts, as before); a finer histogram collapses into k bits.
	 * It holds at most body bytes / 32 (and 2^22 counters): 1 MiB for the real lists, whose
	 * file is 13 MB, and it is freed before the record array is taken, so the peak stays
	 * the record array's unless the sources repeat each other ~30 times over. */
	uint64_t body_bytes = 0;
	for (unsigned i = 0; i < n; i++) {
		for (int e = 0; e < BL__COUNT; e++) {
			char p[4200];
			struct stat sb;
			snprintf(p, sizeof(p), "%s/%s%s", src[i].dir, src[i].name, exts[e]);
			if (stat(p, &sb) == 0) {
				body_bytes += (uint64_t)sb.st_size;
			}
		}
	}
	b.pipe = want_pipe(opts, body_bytes);
	b.kf = choose_bits(body_bytes / 16 + 1);
	b.kf = b.kf > SNAP_HIST_BITS_MAX ? SNAP_HIST_BITS_MAX : b.kf;
	size_t fh_bytes = ((size_t)1 << b.kf) * sizeof(uint32_t);
	b.fh = b_alloc(&b, fh_bytes, true); /* NULL: pass 2 counts */
	/* pass 1: names, checksums, source sets (and the histogram) */
	rc = pass(&b, src, n, count_fn, sha, rep->src);
	if (rc != 0) {
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		b.clean |= (uint64_t)(rep->src[i].bad_lines == 0) << i;
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(srcs[i].name, sizeof(srcs[i].name), "%s", src[i].name);
		memcpy(srcs[i].sha256, sha[i], 32);
	}
	if (b.n > NX_FILTER_ENTRIES_MAX) {
		rc = NX_ELIMIT;
		goto out;
	}
	rc = combos_canon(&b, NULL);
	if (rc != 0) {
		goto out;
	}
	b.kbits = choose_bits(b.n);
	b.combo_bits = ceil_log2(b.ncombos);
	bkt_bytes = ((size_t)(1u << b.kbits) + 1) * sizeof(uint32_t);
	b.bkt = b_alloc(&b, bkt_bytes, true);
	if (!b.bkt) {
		rc = -ENOMEM;
		goto out;
	}

	if (b.fh && b.kbits <= b.kf) {
		unsigned d = b.kf - b.kbits;
		for (uint32_t i = 0; i < (1u << b.kf); i++) {
			b.bkt[(i >> d) + 1] += b.fh[i];
		}
		rep->passes = 2;
	} else {
		/* pass 2: records per bucket */
		b_free(&b, b.fh, fh_bytes);
		b.fh = NULL;
		rc = pass(&b, src, n, hist_fn, sha2, st2);
		if (rc == 0 && memcmp(sha, sha2, (size_t)n * 32) != 0) {
			rc = -EAGAIN;
		}
		if (rc != 0) {
			goto out;
		}
		rep->passes = 3;
	}
	b_free(&b, b.fh, fh_bytes);
	b.fh = NULL;
	b.rec_bytes = (size_t)((b.n * (b.low_bits + b.combo_bits) + 7) / 8 + NX_SNAP_REC_PAD);
	b.rec = b_alloc(&b, b.rec_bytes, true);
	uint32_t maxb = 0;
	/* bkt[b+1] = start of bucket b, used as its write cursor */
	uint32_t s = 0;
	for (uint32_t bi = 0; bi < (1u << b.kbits); bi++) {
		uint32_t c = b.bkt[bi + 1];
		maxb = c > maxb ? c : maxb;
		b.bkt[bi + 1] = s;
		s += c;
	}
	tmp_bytes = (size_t)(maxb ? maxb : 1) * sizeof(*tmp);
	tmp = b_alloc(&b, tmp_bytes, false);
	if (!b.rec || !tmp) {
		rc = -ENOMEM;
		goto out;
	}
	/* pass 3: placement */
	rc = pass(&b, src, n, place_fn, sha2, st2);
	if (rc == 0) {
		rc = place_flush(&b);
	}
	if (rc == 0 && (memcmp(sha, sha2, (size_t)n * 32) != 0 || b.placed != b.n)) {
		rc = -EAGAIN;
	}
	if (rc != 0) {
		goto out;
	}
	stored = finish_buckets(&b, tmp, &nent);
	for (unsigned i = 0; i < n; i++) {
		srcs[i].entries = rep->src[i].entries;
		srcs[i].list = rep->src[i].list;
		srcs[i].wild = rep->src[i].wild;
		srcs[i].allow = rep->src[i].allow;
	}
	if (opts && opts->on_step) {
		opts->on_step(opts->arg);
	}
	rc = write_file(path, srcs, n, &b, stored, nent, &rep->bytes);
out:
	b_free(&b, b.fh, fh_bytes);
	b_free(&b, tmp, tmp_bytes);
	b_free(&b, b.rec, b.rec_bytes);
	b_free(&b, b.bkt, bkt_bytes);
	rep->combos = b.ncombos;
	combos_free(&b);
	rep->entries = nent;
	rep->names = stored;
	rep->bucket_bits = b.kbits;
	rep->low_bits = b.low_bits;
	rep->peak_build_bytes = (uint64_t)(b.peak > incr_peak ? b.peak : incr_peak);
	rep->build_ms = now_ms() - t0;
	return rc;
}

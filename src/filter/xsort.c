/*
 * Bounded external sort of (name, kind) records for the compiler.
 *
 * Record encoding (memory and run files): [u8 name length][u8 kind][name bytes]. The run
 * buffer holds records from its front and their u32 offsets from its back; when they would
 * meet, the offsets are sorted, duplicates dropped and the run written to an unlinked temp
 * file. Names are at most NX_FILTER_NAME_MAX bytes, kinds < 32.
 */
#include "filter/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ledger.h"
#include "filter/parse.h"

struct run {
	int fd; /* owned; unlinked temp file */
};

struct nx_xsort {
	char *buf;   /* owned (filter_build), cap bytes: records up, offsets down */
	size_t cap;  /* run buffer size */
	size_t used; /* record bytes at the front */
	size_t nrec; /* offsets at the back */
	char tmpdir[4096];
	struct run *runs; /* owned (filter_build) */
	unsigned nruns, runs_cap;
	unsigned spilled; /* total runs written (incl. merge passes) */
	void (*probe)(void *arg);
	void *probe_arg;
};

void nx_xsort_set_probe(struct nx_xsort *x, void (*probe)(void *arg), void *arg)
{
	x->probe = probe;
	x->probe_arg = arg;
}

static void probe(struct nx_xsort *x)
{
	if (x->probe) {
		x->probe(x->probe_arg);
	}
}

static inline uint32_t *offs(struct nx_xsort *x)
{
	return (uint32_t *)(x->buf + x->cap) - x->nrec;
}

static int rec_cmp(const unsigned char *a, const unsigned char *b)
{
	size_t la = a[0], lb = b[0];
	int c = memcmp(a + 2, b + 2, la < lb ? la : lb);
	if (c != 0) {
		return c;
	}
	if (la != lb) {
		return la < lb ? -1 : 1;
	}
	return (int)a[1] - (int)b[1];
}

static int off_cmp(const void *pa, const void *pb, void *base)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	return rec_cmp((const unsigned char *)base + a, (const unsigned char *)base + b);
}

int nx_xsort_new(struct nx_xsort **out, size_t run_bytes, const char *tmpdir)
{
	if (run_bytes < NX_XSORT_RUN_MIN) {
		run_bytes = NX_XSORT_RUN_MIN;
	}
	run_bytes &= ~(size_t)7;
	struct nx_xsort *x = nx_mem_calloc(NX_OWNER_filter_build, 1, sizeof(*x));
	if (!x) {
		return -ENOMEM;
	}
	x->cap = run_bytes;
	x->buf = nx_mem_alloc(NX_OWNER_filter_build, run_bytes);
	if (!x->buf) {
		nx_mem_free(NX_OWNER_filter_build, x, sizeof(*x));
		return -ENOMEM;
	}
	snprintf(x->tmpdir, sizeof(x->tmpdir), "%s", tmpdir ? tmpdir : "/tmp");
	*out = x;
	return 0;
}

static int new_run_fd(struct nx_xsort *x)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/.nxsort-XXXXXX", x->tmpdir);
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	unlink(path);
	return fd;
}

static int push_run(struct nx_xsort *x, int fd)
{
	if (x->nruns == x->runs_cap) {
		unsigned ncap = x->runs_cap ? x->runs_cap * 2 : 8;
		struct run *r = nx_mem_realloc(NX_OWNER_filter_build, x->runs,
					       x->runs_cap * sizeof(*r), ncap * sizeof(*r));
		if (!r) {
			return -ENOMEM;
		}
		x->runs = r;
		x->runs_cap = ncap;
	}
	x->runs[x->nruns++].fd = fd;
	x->spilled++;
	return 0;
}

/* Sort the buffer's records in place (offsets) and drop duplicates; returns the count. */
static size_t sort_buffer(struct nx_xsort *x)
{
	uint32_t *o = offs(x);
	qsort_r(o, x->nrec, sizeof(*o), off_cmp, x->buf); /* GNU: _GNU_SOURCE project-wide */
	size_t n = 0;
	for (size_t i = 0; i < x->nrec; i++) {
		if (n > 0 && rec_cmp((unsigned char *)x->buf + o[n - 1],
				     (unsigned char *)x->buf + o[i]) == 0) {
			continue;
		}
		o[n++] = o[i];
	}
	return n;
}

static int spill(struct nx_xsort *x)
{
	if (x->nrec == 0) {
		return 0;
	}
	size_t n = sort_buffer(x);
	uint32_t *o = offs(x);
	int fd = new_run_fd(x);
	if (fd < 0) {
		return fd;
	}
	struct nx_wr wr;
	int rc = nx_wr_init(&wr, fd);
	if (rc == 0) {
		probe(x);
		for (size_t i = 0; i < n; i++) {
			const unsigned char *r = (unsigned char *)x->buf + o[i];
			nx_wr_put(&wr, r, 2 + (size_t)r[0]);
		}
		rc = nx_wr_flush(&wr);
		nx_wr_deinit(&wr);
	}
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0) {
		rc = -errno;
	}
	if (rc == 0) {
		rc = push_run(x, fd);
	}
	if (rc != 0) {
		close(fd);
		return rc;
	}
	x->used = 0;
	x->nrec = 0;
	return 0;
}

int nx_xsort_add(struct nx_xsort *x, const char *name, size_t len, unsigned kind)
{
	if (len == 0 || len > 255 || kind > 255) {
		return -EINVAL;
	}
	size_t need = 2 + len;
	if (x->used + need + (x->nrec + 1) * sizeof(uint32_t) > x->cap) {
		int rc = spill(x);
		if (rc != 0) {
			return rc;
		}
	}
	unsigned char *r = (unsigned char *)x->buf + x->used;
	r[0] = (unsigned char)len;
	r[1] = (unsigned char)kind;
	memcpy(r + 2, name, len);
	x->nrec++;
	offs(x)[0] = (uint32_t)x->used;
	x->used += need;
	return 0;
}

unsigned nx_xsort_runs(const struct nx_xsort *x)
{
	return x->spilled;
}

/* ---- merging ---- */

struct cursor {
	struct nx_lr lr; /* reused only for its buffer and fd */
	unsigned char rec[2 + 256];
	bool done;
};

static int cur_next(struct cursor *c)
{
	struct nx_lr *lr = &c->lr;
	for (;;) {
		size_t avail = lr->end - lr->pos;
		if (avail >= 2 && avail >= 2 + (size_t)(unsigned char)lr->buf[lr->pos]) {
			size_t n = 2 + (size_t)(unsigned char)lr->buf[lr->pos];
			memcpy(c->rec, lr->buf + lr->pos, n);
			lr->pos += n;
			return 1;
		}
		if (lr->eof) {
			if (avail != 0) {
				return -EIO; /* truncated run */
			}
			c->done = true;
			return 0;
		}
		memmove(lr->buf, lr->buf + lr->pos, avail);
		lr->end = avail;
		lr->pos = 0;
		ssize_t r;
		do {
			r = read(lr->fd, lr->buf + lr->end, NX_FILTER_RD_BUF - lr->end);
		} while (r < 0 && errno == EINTR);
		if (r < 0) {
			return -errno;
		}
		if (r == 0) {
			lr->eof = true;
		}
		lr->end += (size_t)r;
	}
}

/* Min-heap of cursor indexes by current record. */
static void heap_down(struct cursor *cs, unsigned *h, unsigned n, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, m = i;
		if (l < n && rec_cmp(cs[h[l]].rec, cs[h[m]].rec) < 0) {
			m = l;
		}
		if (l + 1 < n && rec_cmp(cs[h[l + 1]].rec, cs[h[m]].rec) < 0) {
			m = l + 1;
		}
		if (m == i) {
			return;
		}
		unsigned t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

typedef int (*rec_cb)(void *arg, const unsigned char *rec);

/* Merge runs[first..first+n) calling cb for each distinct record in order. */
static int merge_runs(struct nx_xsort *x, unsigned first, unsigned n, rec_cb cb, void *arg)
{
	struct cursor *cs = nx_mem_calloc(NX_OWNER_filter_build, n, sizeof(*cs));
	unsigned *h = nx_mem_calloc(NX_OWNER_filter_build, n, sizeof(*h));
	int rc = (cs && h) ? 0 : -ENOMEM;
	unsigned inited = 0, hn = 0;
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		rc = nx_lr_init(&cs[i].lr, x->runs[first + i].fd);
		if (rc != 0) {
			break;
		}
		inited++;
		rc = cur_next(&cs[i]);
		if (rc > 0) {
			h[hn++] = i;
			rc = 0;
		}
	}
	probe(x);
	for (unsigned i = hn / 2; rc == 0 && i-- > 0;) {
		heap_down(cs, h, hn, i);
	}
	unsigned char last[2 + 256];
	bool have_last = false;
	while (rc == 0 && hn > 0) {
		struct cursor *c = &cs[h[0]];
		if (!have_last || rec_cmp(last, c->rec) != 0) {
			memcpy(last, c->rec, 2 + (size_t)c->rec[0]);
			have_last = true;
			rc = cb(arg, last);
			if (rc != 0) {
				break;
			}
		}
		rc = cur_next(c);
		if (rc < 0) {
			break;
		}
		if (rc == 0) {
			h[0] = h[--hn];
		}
		rc = 0;
		heap_down(cs, h, hn, 0);
	}
	for (unsigned i = 0; i < inited; i++) {
		nx_lr_deinit(&cs[i].lr);
	}
	nx_mem_free(NX_OWNER_filter_build, cs, cs ? n * sizeof(*cs) : 0);
	nx_mem_free(NX_OWNER_filter_build, h, h ? n * sizeof(*h) : 0);
	return rc;
}

static int to_writer(void *arg, const unsigned char *rec)
{
	struct nx_wr *wr = arg;
	nx_wr_put(wr, rec, 2 + (size_t)rec[0]);
	return wr->err;
}

/* Merge groups of FANIN runs into single runs until at most FANIN remain. */
static int reduce_runs(struct nx_xsort *x)
{
	while (x->nruns > NX_XSORT_FANIN) {
		int fd = new_run_fd(x);
		if (fd < 0) {
			return fd;
		}
		struct nx_wr wr;
		int rc = nx_wr_init(&wr, fd);
		if (rc == 0) {
			rc = merge_runs(x, 0, NX_XSORT_FANIN, to_writer, &wr);
			if (rc == 0) {
				rc = nx_wr_flush(&wr);
			}
			nx_wr_deinit(&wr);
		}
		if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0) {
			rc = -errno;
		}
		if (rc != 0) {
			close(fd);
			return rc;
		}
		for (unsigned i = 0; i < NX_XSORT_FANIN; i++) {
			close(x->runs[i].fd);
		}
		memmove(x->runs, x->runs + NX_XSORT_FANIN,
			(x->nruns - NX_XSORT_FANIN) * sizeof(*x->runs));
		x->nruns -= NX_XSORT_FANIN;
		rc = push_run(x, fd);
		if (rc != 0) {
			close(fd);
			return rc;
		}
	}
	return 0;
}

/* Group consecutive records of one name into one callback with a kinds bitmask. */
struct grouper {
	nx_xsort_cb cb;
	void *arg;
	char name[256];
	size_t len;
	uint32_t kinds;
	bool have;
};

static int group_flush(struct grouper *g)
{
	if (!g->have) {
		return 0;
	}
	g->have = false;
	return g->cb(g->arg, g->name, g->len, g->kinds);
}

static int group_rec(void *arg, const unsigned char *rec)
{
	struct grouper *g = arg;
	size_t len = rec[0];
	if (g->have && (len != g->len || memcmp(g->name, rec + 2, len) != 0)) {
		int rc = group_flush(g);
		if (rc != 0) {
			return rc;
		}
	}
	if (!g->have) {
		memcpy(g->name, rec + 2, len);
		g->name[len] = '\0';
		g->len = len;
		g->kinds = 0;
		g->have = true;
	}
	g->kinds |= 1u << (rec[1] & 31);
	return 0;
}

int nx_xsort_finish(struct nx_xsort *x, nx_xsort_cb cb, void *arg)
{
	struct grouper g = {.cb = cb, .arg = arg};
	int rc = 0;
	if (x->nruns == 0) {
		/* everything fit in one buffer: no temp file */
		size_t n = sort_buffer(x);
		uint32_t *o = offs(x);
		for (size_t i = 0; rc == 0 && i < n; i++) {
			rc = group_rec(&g, (unsigned char *)x->buf + o[i]);
		}
	} else {
		rc = spill(x);
		/* the run buffer is not needed while merging: give it back first */
		nx_mem_free(NX_OWNER_filter_build, x->buf, x->cap);
		x->buf = NULL;
		if (rc == 0) {
			rc = reduce_runs(x);
		}
		if (rc == 0) {
			rc = merge_runs(x, 0, x->nruns, group_rec, &g);
		}
	}
	if (rc == 0) {
		rc = group_flush(&g);
	}
	return rc;
}

void nx_xsort_free(struct nx_xsort *x)
{
	if (!x) {
		return;
	}
	for (unsigned i = 0; i < x->nruns; i++) {
		close(x->runs[i].fd);
	}
	nx_mem_free(NX_OWNER_filter_build, x->runs, x->runs_cap * sizeof(*x->runs));
	nx_mem_free(NX_OWNER_filter_build, x->buf, x->cap);
	nx_mem_free(NX_OWNER_filter_build, x, sizeof(*x));
}

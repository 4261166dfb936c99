/* Buffered line reader / writer and atomic temp-file commit for the filter builders. */
#include "filter/impl.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/ledger.h"

int nx_lr_init_cap(struct nx_lr *lr, int fd, size_t cap)
{
	memset(lr, 0, sizeof(*lr));
	lr->fd = fd;
	lr->cap = cap;
	lr->buf = nx_mem_alloc(NX_OWNER_filter_build, cap);
	return lr->buf ? 0 : -ENOMEM;
}

int nx_lr_init(struct nx_lr *lr, int fd)
{
	return nx_lr_init_cap(lr, fd, NX_FILTER_RD_BUF);
}

void nx_lr_deinit(struct nx_lr *lr)
{
	nx_mem_free(NX_OWNER_filter_build, lr->buf, lr->cap);
	lr->buf = NULL;
}

static int fill(struct nx_lr *lr)
{
	if (lr->pos > 0) {
		memmove(lr->buf, lr->buf + lr->pos, lr->end - lr->pos);
		lr->end -= lr->pos;
		lr->pos = 0;
	}
	while (lr->end < lr->cap && !lr->eof) {
		ssize_t n = read(lr->fd, lr->buf + lr->end, lr->cap - lr->end);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			lr->err = -errno;
			return lr->err;
		}
		if (n == 0) {
			lr->eof = true;
			break;
		}
		if (lr->on_data) {
			lr->on_data(lr->on_data_arg, lr->buf + lr->end, (size_t)n);
		}
		lr->end += (size_t)n;
		lr->bytes += (uint64_t)n;
		return 0;
	}
	return 0;
}

int nx_lr_next(struct nx_lr *lr, size_t max_len, const char **line, size_t *len, bool *too_long)
{
	if (max_len > lr->cap - 1) {
		max_len = lr->cap - 1;
	}
	*too_long = false;
	size_t scanned = 0;
	bool skipping = false;
	for (;;) {
		if (lr->err) {
			return lr->err;
		}
		const char *start = lr->buf + lr->pos + scanned;
		size_t avail = lr->end - lr->pos - scanned;
		const char *nl = memchr(start, '\n', avail);
		if (nl) {
			size_t l = (size_t)(nl - (lr->buf + lr->pos));
			if (skipping || l > max_len) {
				*too_long = true;
				*len = 0;
				*line = lr->buf + lr->pos;
			} else {
				*line = lr->buf + lr->pos;
				*len = l;
			}
			lr->pos += l + 1;
			return 1;
		}
		scanned += avail;
		if (scanned > max_len) {
			/* drop what we have, keep looking for the end of this line */
			skipping = true;
			lr->pos = lr->end;
			scanned = 0;
		}
		if (lr->eof) {
			size_t l = lr->end - lr->pos;
			if (l == 0 && !skipping) {
				return 0;
			}
			*line = lr->buf + lr->pos;
			*len = skipping ? 0 : l;
			*too_long = skipping;
			lr->pos = lr->end;
			return 1;
		}
		int rc = fill(lr);
		if (rc < 0) {
			return rc;
		}
	}
}

int nx_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0) {
			if (errno == EINTR) {
				continue;
			}
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int nx_wr_init(struct nx_wr *wr, int fd)
{
	memset(wr, 0, sizeof(*wr));
	wr->fd = fd;
	wr->buf = nx_mem_alloc(NX_OWNER_filter_build, NX_FILTER_WR_BUF);
	return wr->buf ? 0 : -ENOMEM;
}

int nx_wr_flush(struct nx_wr *wr)
{
	if (!wr->err && wr->used > 0) {
		wr->err = nx_write_all(wr->fd, wr->buf, wr->used);
	}
	wr->used = 0;
	return wr->err;
}

void nx_wr_put(struct nx_wr *wr, const void *p, size_t n)
{
	if (wr->on_data) {
		wr->on_data(wr->on_data_arg, p, n);
	}
	wr->bytes += n;
	const char *c = p;
	while (n > 0 && !wr->err) {
		size_t room = NX_FILTER_WR_BUF - wr->used;
		size_t k = n < room ? n : room;
		memcpy(wr->buf + wr->used, c, k);
		wr->used += k;
		c += k;
		n -= k;
		if (wr->used == NX_FILTER_WR_BUF) {
			nx_wr_flush(wr);
		}
	}
}

void nx_wr_deinit(struct nx_wr *wr)
{
	nx_mem_free(NX_OWNER_filter_build, wr->buf, NX_FILTER_WR_BUF);
	wr->buf = NULL;
}

int nx_tmp_open(const char *path, char *tmp, size_t cap)
{
	int n = snprintf(tmp, cap, "%s.tmp-XXXXXX", path);
	if (n < 0 || (size_t)n >= cap) {
		return -ENAMETOOLONG;
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int nx_tmp_commit_nodir(int fd, const char *tmp, const char *path)
{
	int rc = 0;
	if (fsync(fd) != 0) {
		rc = -errno;
	}
	if (close(fd) != 0 && rc == 0) {
		rc = -errno;
	}
	if (rc == 0 && rename(tmp, path) != 0) {
		rc = -errno;
	}
	if (rc != 0) {
		unlink(tmp);
	}
	return rc;
}

void nx_fsync_dir(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
}

int nx_tmp_commit(int fd, const char *tmp, const char *path)
{
	int rc = nx_tmp_commit_nodir(fd, tmp, path);
	if (rc != 0) {
		return rc;
	}
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	nx_fsync_dir(dirname(dir));
	return 0;
}

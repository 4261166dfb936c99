/*
 * Small helpers for the filter unit tests: temp directories, files, shared data lookup.
 * Test code only (plain malloc is fine here; library allocations go through the ledger and
 * tests check that filter_build / snapshot_map return to zero).
 */
#pragma once

#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ledger.h"

static inline int64_t th_owner_bytes(enum nx_owner o)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[o].bytes;
}

/* mkdtemp under $TMPDIR or /tmp; returns a malloc'd path. */
static inline char *th_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *p = malloc(4096);
	snprintf(p, 4096, "%s/nxfilter-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

static inline void th_rmtree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		return;
	}
	struct dirent *e;
	char path[4300];
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

static inline void th_write(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(data, 1, len, f);
		fclose(f);
	}
}

static inline void th_writef(const char *dir, const char *name, const char *text)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	th_write(path, text, strlen(text));
}

/* Whole file as a NUL-terminated malloc'd string (NULL if missing). */
static inline char *th_read(const char *path, size_t *len_out)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		return NULL;
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	size_t got = fread(buf, 1, (size_t)n, f);
	fclose(f);
	buf[got] = '\0';
	if (len_out) {
		*len_out = got;
	}
	return buf;
}

static inline char *th_readf(const char *dir, const char *name)
{
	char path[4300];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return th_read(path, NULL);
}

/* The shared data folder, or NULL when this clone has none (tests then skip). */
static inline const char *th_shared(void)
{
	const char *s = getenv("NX_SHARED_DIR");
	struct stat st;
	if (!s || !*s || stat(s, &st) != 0 || !S_ISDIR(st.st_mode)) {
		return NULL;
	}
	return s;
}

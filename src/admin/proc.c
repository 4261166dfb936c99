/*
 * Process memory figures: /proc/self/status and glibc's mallinfo2().
 * Any thread; no allocation (the status file is read into a stack buffer).
 */
#include "admin/admin.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATUS_MAX 8192 /* /proc/self/status is ~1.5 KiB; the fields we want come early */

/* Value of "Key:\t   123 kB" (scaled to bytes when the unit is kB), or -1. */
static int64_t field(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, n) == 0 && p[n] == ':') {
			char *end;
			long long v = strtoll(p + n + 1, &end, 10);
			if (end == p + n + 1) {
				return -1;
			}
			while (*end == ' ' || *end == '\t') {
				end++;
			}
			return strncmp(end, "kB", 2) == 0 ? (int64_t)v * 1024 : (int64_t)v;
		}
	}
	return -1;
}

/*
 * Walk /proc/self/smaps: resident bytes of file mappings, split into the blocklist snapshot
 * (*.nxs, owned by the ledger's snapshot_map) and everything else file-backed (code and data of
 * the executable and its libraries, which no allocation owns). A few hundred lines: read on a
 * scrape, not on a hot path.
 */
static void read_smaps(struct nx_process_figures *out)
{
	out->code_bytes = out->snapshot_resident_bytes = -1;
	FILE *fp = fopen("/proc/self/smaps", "re");
	if (!fp) {
		return;
	}
	int64_t code = 0, snap = 0;
	int kind = 0; /* 0 anonymous/special, 1 file, 2 snapshot */
	char line[512];
	while (fgets(line, sizeof(line), fp)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ')) {
			/* a mapping header: "lo-hi perms offset dev inode [path]" */
			const char *path = strchr(line, '/');
			kind = 0;
			if (path) {
				size_t pl = strcspn(path, "\n");
				kind = (pl > 4 && memcmp(path + pl - 4, ".nxs", 4) == 0) ? 2 : 1;
			}
			continue;
		}
		long kb;
		if (kind && sscanf(line, "Rss: %ld kB", &kb) == 1) {
			if (kind == 2) {
				snap += (int64_t)kb * 1024;
			} else {
				code += (int64_t)kb * 1024;
			}
		}
	}
	fclose(fp);
	out->code_bytes = code;
	out->snapshot_resident_bytes = snap;
}

int nx_admin_read_process(struct nx_process_figures *out)
{
	out->vmrss_bytes = out->rssanon_bytes = out->rssfile_bytes = -1;
	out->vmhwm_bytes = out->threads = -1;

	struct mallinfo2 mi = mallinfo2();
	out->heap_in_use_bytes = (int64_t)(mi.uordblks + mi.hblkhd);
	out->heap_free_bytes = (int64_t)mi.fordblks;

	char buf[STATUS_MAX];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return -errno;
	}
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			break;
		}
		len += (size_t)r;
		if (len == sizeof(buf) - 1) {
			break;
		}
	}
	close(fd);
	buf[len] = '\0';
	out->vmrss_bytes = field(buf, "VmRSS");
	out->rssanon_bytes = field(buf, "RssAnon");
	out->rssfile_bytes = field(buf, "RssFile");
	out->vmhwm_bytes = field(buf, "VmHWM");
	out->threads = field(buf, "Threads");
	read_smaps(out);
	return 0;
}

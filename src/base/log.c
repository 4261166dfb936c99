#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/stats.h"

#define NX_JOURNAL_SOCKET "/run/systemd/journal/socket"
#define NX_LOG_LINE_MAX 1024 /* one record's text; longer messages are cut */

static atomic_int g_level = NX_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* syslog priorities (journal PRIORITY=) by level */
static const char *const level_prio[] = {"3", "4", "6", "7"};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_journal_fd = -1; /* set once under g_once, read-only after */
static struct sockaddr_un g_journal_addr;
static socklen_t g_journal_len;

void nx_log_set_level(enum nx_log_level level)
{
	atomic_store(&g_level, (int)level);
}

enum nx_log_level nx_log_get_level(void)
{
	return (enum nx_log_level)atomic_load_explicit(&g_level, memory_order_relaxed);
}

int nx_log_parse_level(const char *s, enum nx_log_level *out)
{
	for (unsigned i = 0; i < NX_ARRAY_LEN(level_names); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum nx_log_level)i;
			return 0;
		}
	}
	return NX_ECONFIG;
}

/* stderr is the journal when $JOURNAL_STREAM names its device and inode. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0) {
		return false;
	}
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static void journal_open(void)
{
	if (!stderr_is_journal()) {
		return;
	}
	const char *path = getenv("NXDNS_JOURNAL_SOCKET");
	if (!path || !*path) {
		path = NX_JOURNAL_SOCKET;
	}
	size_t len = strlen(path);
	if (len >= sizeof(g_journal_addr.sun_path)) {
		return;
	}
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return;
	}
	g_journal_addr.sun_family = AF_UNIX;
	memcpy(g_journal_addr.sun_path, path, len + 1);
	g_journal_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	g_journal_fd = fd;
}

bool nx_log_to_journal(void)
{
	pthread_once(&g_once, journal_open);
	return g_journal_fd >= 0;
}

/*
 * One journal record: "KEY=value\n" fields in one datagram (the native protocol). A value
 * with a newline would need the protocol's length-prefixed form; our messages are one line,
 * and a stray newline becomes a space instead. Records stay far below the datagram limit
 * (NX_LOG_LINE_MAX), so the protocol's memfd form for huge records is not needed.
 */
static int journal_send(enum nx_log_level level, const char *subsys, const char *client,
			char *text)
{
	for (char *p = text; *p; p++) {
		if (*p == '\n') {
			*p = ' ';
		}
	}
	struct iovec iov[16];
	int n = 0;
#define IOV(s) (iov[n].iov_base = (void *)(s), iov[n].iov_len = strlen(s), n++)
	IOV("MESSAGE=");
	IOV(text);
	IOV("\nPRIORITY=");
	IOV(level_prio[level]);
	IOV("\nSYSLOG_IDENTIFIER=nxdns\nNXDNS_SUBSYSTEM=");
	IOV(subsys);
	if (client) {
		IOV("\nNXDNS_CLIENT=");
		IOV(client);
	}
	IOV("\n");
#undef IOV
	struct msghdr mh = {
		.msg_name = &g_journal_addr,
		.msg_namelen = g_journal_len,
		.msg_iov = iov,
		.msg_iovlen = (size_t)n,
	};
	return sendmsg(g_journal_fd, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static void vlog(enum nx_log_level level, const char *subsys, const char *client,
		 const char *fmt, va_list ap)
{
	if (!nx_log_enabled(level)) {
		return;
	}
	char line[NX_LOG_LINE_MAX];
	if (nx_log_to_journal()) {
		/* the journal stamps the time and knows the level: the text is the message */
		int m = vsnprintf(line, sizeof(line), fmt, ap);
		if (m < 0) {
			line[0] = '\0';
		}
		if (journal_send(level, subsys, client, line) == 0) {
			return;
		}
		nx_stat_inc(NX_STAT_JOURNAL_FAILED);
		dprintf(STDERR_FILENO, "%s %s: %s\n", level_names[level], subsys, line);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], subsys);
	if (n < 0) {
		n = 0;
	}
	n = NX_MIN(n, (int)sizeof(line) - 2); /* a huge prefix is cut, never overrun */
	if ((size_t)n < sizeof(line) - 2) {
		int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		n = (m < 0) ? n : NX_MIN(n + m, (int)sizeof(line) - 2);
	}
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

void nx_log(enum nx_log_level level, const char *subsys, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, subsys, NULL, fmt, ap);
	va_end(ap);
}

void nx_log_client(enum nx_log_level level, const char *subsys, const char *client,
		   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, subsys, client, fmt, ap);
	va_end(ap);
}

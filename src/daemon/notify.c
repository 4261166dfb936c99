#include "daemon/notify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/stats.h"

/* One notification datagram: a STATUS line and a few fixed keys. systemd reads up to its
 * PIPE_BUF-sized buffer; we stay well under it. */
#define NX_NOTIFY_MSG_MAX 512

static struct {
	int fd; /* -1: not supervised */
	struct sockaddr_un addr;
	socklen_t addr_len;
	uint64_t watchdog_usec; /* 0: no watchdog */
	uint64_t last_ping_us;	/* CLOCK_MONOTONIC of the last WATCHDOG=1 */
	bool warned;		/* a failed send was logged */
} g = {.fd = -1};

int nx_notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (!path || !*path) {
		return 0;
	}
	size_t len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(g.addr.sun_path)) {
		nx_log(NX_LOG_WARN, "daemon",
		       "NOTIFY_SOCKET=%s is not an absolute path or @name: "
		       "service notifications off",
		       path);
		return NX_ECONFIG;
	}
	memset(&g.addr, 0, sizeof(g.addr));
	g.addr.sun_family = AF_UNIX;
	memcpy(g.addr.sun_path, path, len);
	if (path[0] == '@') {
		g.addr.sun_path[0] = '\0'; /* abstract namespace: no NUL terminator counted */
		g.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		g.addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	}
	g.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (g.fd < 0) {
		int rc = -errno;
		nx_log(NX_LOG_WARN, "daemon", "notify socket: %s", strerror(errno));
		return rc;
	}
	/* WATCHDOG_PID names the process the watchdog is meant for; another (a child that
	 * inherited the environment) must not ping in its name. */
	const char *wpid = getenv("WATCHDOG_PID");
	const char *wusec = getenv("WATCHDOG_USEC");
	if (wusec && (!wpid || strtol(wpid, NULL, 10) == (long)getpid())) {
		char *end;
		unsigned long long v = strtoull(wusec, &end, 10);
		if (*end == '\0' && v > 0) {
			g.watchdog_usec = v;
		}
	}
	g.last_ping_us = nx_now_mono_us();
	return 0;
}

void nx_notify_deinit(void)
{
	if (g.fd >= 0) {
		close(g.fd);
	}
	g.fd = -1;
	g.watchdog_usec = 0;
}

bool nx_notify_enabled(void)
{
	return g.fd >= 0;
}

int nx_notify_send(const char *msg)
{
	if (g.fd < 0) {
		return 0;
	}
	ssize_t n = sendto(g.fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&g.addr,
			   g.addr_len);
	if (n < 0) {
		int rc = -errno;
		nx_stat_inc(NX_STAT_NOTIFY_FAILED);
		if (!g.warned) {
			g.warned = true;
			nx_log(NX_LOG_WARN, "daemon", "service notification failed: %s",
			       strerror(errno));
		}
		return rc;
	}
	return 0;
}

int nx_notify_ready(const char *status)
{
	char msg[NX_NOTIFY_MSG_MAX];
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status ? status : "serving");
	return nx_notify_send(msg);
}

int nx_notify_reloading(void)
{
	char msg[NX_NOTIFY_MSG_MAX];
	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
		 (unsigned long long)nx_now_mono_us());
	return nx_notify_send(msg);
}

int nx_notify_stopping(void)
{
	return nx_notify_send("STOPPING=1\nSTATUS=stopping");
}

int nx_notify_status(const char *fmt, ...)
{
	if (g.fd < 0) {
		return 0;
	}
	char msg[NX_NOTIFY_MSG_MAX] = "STATUS=";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
	va_end(ap);
	/* one line: a newline in the text would start a key of its own */
	for (char *p = msg; *p; p++) {
		if (*p == '\n') {
			*p = ' ';
		}
	}
	return nx_notify_send(msg);
}

uint64_t nx_notify_watchdog_usec(void)
{
	return g.fd >= 0 ? g.watchdog_usec : 0;
}

int nx_notify_watchdog_tick(void)
{
	if (g.fd < 0 || g.watchdog_usec == 0) {
		return 0;
	}
	uint64_t now = nx_now_mono_us();
	if (now - g.last_ping_us < g.watchdog_usec / 2) {
		return 0;
	}
	g.last_ping_us = now;
	return nx_notify_send("WATCHDOG=1");
}

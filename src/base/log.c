#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

static atomic_int g_level = NX_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

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

void nx_log(enum nx_log_level level, const char *subsys, const char *fmt, ...)
{
	if (!nx_log_enabled(level)) {
		return;
	}
	char line[1024];
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
	va_list ap;
	va_start(ap, fmt);
	if ((size_t)n < sizeof(line) - 2) {
		int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		n = (m < 0) ? n : NX_MIN(n + m, (int)sizeof(line) - 2);
	}
	va_end(ap);
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

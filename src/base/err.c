#include "base/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/stats.h"

const char *nx_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
#define NX_ERR_CASE(name, val, text) \
	case name:                   \
		return text;
		NX_ERRORS(NX_ERR_CASE)
#undef NX_ERR_CASE
	default:
		break;
	}
	if (code < 0 && code > -1000) {
		return strerror(-code);
	}
	return "unknown error";
}

void nx_require_failed(const char *expr, const char *file, int line)
{
	fprintf(stderr, "nxdns: %s:%d: requirement failed: %s\n", file, line, expr);
	abort();
}

void nx_assert_failed(const char *expr, const char *file, int line)
{
	nx_stat_inc(NX_STAT_ASSERT_FAILURES);
	nx_log(NX_LOG_ERR, "base", "%s:%d: assertion failed: %s (dropping work)", file, line, expr);
#ifdef NX_ABORT_ON_ASSERT
	abort();
#endif
}

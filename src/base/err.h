/*
 * Error codes and always-on checks.
 *
 * Functions return 0 or a negative code: -errno where one fits, NX_E* (<= -1000) for ours.
 * nx_strerror() names either kind. Thread-safe (returns static strings).
 */
#pragma once

#include <stdbool.h>

#define NX_ERRORS(X)                                                          \
	X(NX_EMALFORMED, -1000, "malformed input")                          \
	X(NX_ETRUNC, -1001, "output buffer too small")                       \
	X(NX_ECONFIG, -1002, "configuration error")                          \
	X(NX_ENOSLOT, -1003, "no free slot")                                 \
	X(NX_ETIMEDOUT, -1004, "deadline expired")                           \
	X(NX_ECANCELED, -1005, "cancelled")                                  \
	X(NX_ENOTFOUND, -1006, "not found")                                  \
	X(NX_EFORMAT, -1007, "unsupported format")                           \
	X(NX_ECORRUPT, -1008, "corrupt file")                                \
	X(NX_ELIMIT, -1009, "limit exceeded")                                \
	X(NX_ETLS_HANDSHAKE, -1100, "TLS handshake failed")                  \
	X(NX_ETLS_VERIFY, -1101, "TLS peer certificate refused")             \
	X(NX_ETLS_RECORD, -1102, "bad TLS record")                           \
	X(NX_ETLS_ALERT, -1103, "fatal TLS alert from the peer")             \
	X(NX_ETLS_TRANSPORT, -1104, "TLS transport failed")                  \
	X(NX_ETLS_CLOSED, -1105, "TLS session closed by the peer")

enum nx_err {
#define NX_ERR_ENUM(name, val, text) name = (val),
	NX_ERRORS(NX_ERR_ENUM)
#undef NX_ERR_ENUM
};

/* Text for a 0, -errno or NX_E* code. Never NULL. */
const char *nx_strerror(int code);

/* Abort with file:line when x is false. Only where continuing would corrupt memory. */
#define nx_require(x)                                                                  \
	do {                                                                           \
		if (__builtin_expect(!(x), 0)) {                                       \
			nx_require_failed(#x, __FILE__, __LINE__);                     \
		}                                                                      \
	} while (0)

_Noreturn void nx_require_failed(const char *expr, const char *file, int line);

/*
 * "Cannot happen" on the request path: logs and counts (nxdns_assert_failures_total) and
 * evaluates to true so the caller drops the unit of work. Aborts in debug builds with
 * NX_ABORT_ON_ASSERT defined (tests, fuzzing).
 */
#define nx_fails_assert(x) \
	(__builtin_expect(!(x), 0) ? nx_assert_failed(#x, __FILE__, __LINE__), true : false)

void nx_assert_failed(const char *expr, const char *file, int line);

#define NX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define NX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NX_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NX_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

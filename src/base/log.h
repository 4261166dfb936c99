/*
 * Logging to stderr, one line per message: "<level> <subsystem>: message".
 * Thread-safe (one write(2) per line). The level is process-wide, set once at start.
 */
#pragma once

enum nx_log_level { NX_LOG_ERR, NX_LOG_WARN, NX_LOG_INFO, NX_LOG_DEBUG };

void nx_log_set_level(enum nx_log_level level);
enum nx_log_level nx_log_get_level(void);

/* Parse "error", "warn", "info", "debug". Returns 0 or NX_ECONFIG. */
int nx_log_parse_level(const char *s, enum nx_log_level *out);

void nx_log(enum nx_log_level level, const char *subsys, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define nx_log_enabled(level) ((level) <= nx_log_get_level())

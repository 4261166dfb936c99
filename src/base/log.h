/*
 * Logging, one record per message. Two sinks, chosen once (at the first message):
 *  - the systemd journal's native protocol when stderr is the journal (systemd sets
 *    $JOURNAL_STREAM to stderr's "device:inode"; the check is the one systemd documents):
 *    one datagram to /run/systemd/journal/socket with MESSAGE, PRIORITY (syslog levels),
 *    SYSLOG_IDENTIFIER=nxdns, NXDNS_SUBSYSTEM and, from nx_log_client, NXDNS_CLIENT, so
 *    `journalctl -u nxdns -p warning` and `journalctl NXDNS_SUBSYSTEM=filter` work. A
 *    datagram the journal refuses goes to stderr as a plain line (and is counted);
 *  - otherwise stderr, one line per message: "<time> <level> <subsystem>: message".
 * $NXDNS_JOURNAL_SOCKET replaces the journal's socket path (tests, unusual setups).
 * Thread-safe (one write(2) or sendmsg(2) per record). The level is process-wide.
 */
#pragma once

#include <stdbool.h>

enum nx_log_level { NX_LOG_ERR, NX_LOG_WARN, NX_LOG_INFO, NX_LOG_DEBUG };

void nx_log_set_level(enum nx_log_level level);
enum nx_log_level nx_log_get_level(void);

/* Parse "error", "warn", "info", "debug". Returns 0 or NX_ECONFIG. */
int nx_log_parse_level(const char *s, enum nx_log_level *out);

void nx_log(enum nx_log_level level, const char *subsys, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* As nx_log, about one client (its address as text): a field of its own in the journal
 * (`journalctl NXDNS_CLIENT=ADDR`). The message still names the client itself, so journalctl's
 * usual view, a plain stderr line and log scrapers (fail2ban) read it whole; stderr prints it
 * as nx_log does. client NULL: as nx_log. */
void nx_log_client(enum nx_log_level level, const char *subsys, const char *client,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* True when records go to the journal (decided at the first message, or by this call). */
bool nx_log_to_journal(void);

#define nx_log_enabled(level) ((level) <= nx_log_get_level())

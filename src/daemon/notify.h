/*
 * The service manager's notification protocol (sd_notify), spoken directly: one datagram of
 * "KEY=VALUE\n" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or "@name" for
 * the abstract namespace). systemd documents the protocol and recommends implementing it
 * rather than linking libsystemd, which would map liblzma and libgcrypt into every process.
 *
 * Control thread only (the state is process-wide and unlocked). Without $NOTIFY_SOCKET every
 * call is a no-op returning 0, so the same binary runs under systemd, another supervisor or a
 * terminal. A failed send is logged once and counted, never fatal: the manager's timeouts
 * report a daemon that cannot notify.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Read $NOTIFY_SOCKET and $WATCHDOG_USEC / $WATCHDOG_PID, open the socket. Call once at start,
 * before any privilege drop. Returns 0 (also when not supervised) or -errno / NX_ECONFIG for a
 * malformed $NOTIFY_SOCKET (logged; notifications then stay off). */
int nx_notify_init(void);

/* Close the socket; later calls are no-ops. */
void nx_notify_deinit(void);

/* True when $NOTIFY_SOCKET was set and usable. */
bool nx_notify_enabled(void);

/* Send msg (NUL-terminated "KEY=VALUE" lines) as one datagram. Returns 0 or -errno. */
int nx_notify_send(const char *msg);

/* READY=1 with a STATUS line: the DNS listeners answer. */
int nx_notify_ready(const char *status);

/* RELOADING=1 with MONOTONIC_USEC (CLOCK_MONOTONIC now, in µs, as systemd requires to order
 * the reload against its own clock); READY=1 must follow when the reload is over. */
int nx_notify_reloading(void);

/* STOPPING=1: shutdown began. */
int nx_notify_stopping(void);

/* STATUS=text (what `systemctl status` shows), e.g. the first boot's compile progress. */
int nx_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The watchdog interval the manager asked for, µs (0: no watchdog). */
uint64_t nx_notify_watchdog_usec(void);

/* WATCHDOG=1 when at least half the interval passed since the last one (cheap to call from a
 * timer and from the progress hook of long work on the control loop). Returns 0 or -errno. */
int nx_notify_watchdog_tick(void);

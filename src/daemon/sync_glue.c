/*
 * The replica's pull (src/sync/) in the daemon: its hooks are the config in effect and the
 * SIGHUP reload, and the admin's /api/sync/status and /api/sync/now reach it here. Control
 * thread only. Nothing runs without sync.primary beyond an idle timer handle.
 */
#include "daemon/impl.h"
#include "sync/sync.h"

static const struct nx_conf *sync_conf(void *ud)
{
	struct nx_daemon *d = ud;
	return d->cur->c; /* control thread: d->cur changes only here */
}

static int sync_reload(void *ud, char *err, size_t errlen)
{
	return nx_daemon_reload(ud, err, errlen);
}

int nx_daemon_sync_start(struct nx_daemon *d)
{
	struct nx_sync_hooks h = {.conf = sync_conf, .reload = sync_reload, .ud = d};
	return nx_sync_new(&d->loop, &h, &d->sync);
}

void nx_daemon_sync_stop(struct nx_daemon *d)
{
	nx_sync_free(d->sync); /* handles close in the loop run that follows */
	d->sync = NULL;
}

json_t *nx_daemon_sync_status(void *ud)
{
	struct nx_daemon *d = ud;
	return nx_sync_status(d->sync);
}

int nx_daemon_sync_now(void *ud)
{
	struct nx_daemon *d = ud;
	return nx_sync_now(d->sync);
}

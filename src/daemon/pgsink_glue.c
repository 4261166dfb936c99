/*
 * The daemon's PostgreSQL sink: created from logging.postgresql.* at start (one ring per
 * worker, one writer thread), privacy re-applied on reload, stopped after the workers. A
 * database that is down, or a libpq that cannot be loaded, never keeps DNS from starting: the
 * error is logged, DNS serves.
 */
#include <stdio.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "daemon/impl.h"
#include "pgsink/pgsink.h"

static int upstream_name(void *ud, int idx, char *buf, size_t cap)
{
	if (idx < 0 || idx >= nx_up_stats_count()) {
		return NX_ENOTFOUND;
	}
	struct nx_up_stats_row row;
	nx_up_stats_read(idx, &row);
	snprintf(buf, cap, "%s", row.name);
	return 0;
}

int nx_daemon_pgsink_start(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	if (!c->logging_pg_dsn) {
		return 0;
	}
	char host[256] = "";
	const char *hostname = c->logging_pg_hostname;
	if (!hostname || !hostname[0]) {
		if (gethostname(host, sizeof(host) - 1) < 0) {
			host[0] = 0;
		}
		hostname = host;
	}
	struct nx_pgsink_params p;
	nx_pgsink_params_default(&p);
	p.dsn = c->logging_pg_dsn;
	p.hostname = hostname;
	p.producers = c->workers;
	p.queue_size = NX_MAX(c->logging_pg_queue_size, c->workers);
	p.batch_size = c->logging_pg_batch_size;
	p.flush_ms = c->logging_pg_flush_ms;
	p.retention_days = c->logging_pg_retention_days;
	p.privacy = c->logging_privacy;
	p.upstream_name = upstream_name;
	char why[256];
	int rc = nx_pgsink_new(&p, &d->pgsink, why, sizeof(why));
	if (rc == 0 && (rc = nx_pgsink_start(d->pgsink)) < 0) {
		snprintf(why, sizeof(why), "cannot start its thread: %s", nx_strerror(rc));
		nx_pgsink_free(d->pgsink);
	}
	if (rc < 0) {
		d->pgsink = NULL;
		nx_log(NX_LOG_ERR, "pgsink", "no PostgreSQL sink: %s (DNS serves without it)", why);
		return 0;
	}
	nx_log(NX_LOG_INFO, "pgsink", "writing the query log to PostgreSQL as hostname '%s'",
	       hostname);
	return 0;
}

void nx_daemon_pgsink_reconfigure(struct nx_daemon *d)
{
	if (d->pgsink) {
		nx_pgsink_set_privacy(d->pgsink, d->cur->c->logging_privacy);
	}
}

void nx_daemon_pgsink_stop(struct nx_daemon *d)
{
	nx_pgsink_free(d->pgsink);
	d->pgsink = NULL;
}

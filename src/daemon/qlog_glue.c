/*
 * The daemon's query log: created from logging.* at start (one producer ring per worker, one
 * writer thread), retention and privacy re-applied on reload, stopped after the workers.
 */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "daemon/impl.h"

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

int nx_daemon_qlog_start(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	if (!c->logging_query_log) {
		return 0;
	}
	char path[600];
	snprintf(path, sizeof(path), "%s/querylog.db", c->state_dir);
	nx_mkdir_p(c->state_dir);
	struct nx_qlog_params p;
	nx_qlog_params_default(&p);
	p.path = path;
	p.producers = c->workers;
	p.buffer_max = NX_MAX(c->logging_query_log_buffer_max, c->workers);
	p.retention_days = c->logging_retention_days;
	p.privacy = c->logging_privacy;
	p.commit_ms = c->logging_commit_interval * 1000u;
	if (p.commit_ms) {
		p.batch_max = NX_QLOG_BATCH_HOLD;
	}
	p.upstream_name = upstream_name;
	int rc = nx_qlog_new(&p, &d->qlog);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "querylog", "cannot open %s: %s (DNS serves without a query log)",
		       path, nx_strerror(rc));
		d->qlog = NULL;
		return 0; /* the log is not worth refusing DNS for */
	}
	rc = nx_qlog_start(d->qlog);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "querylog", "cannot start the writer: %s", nx_strerror(rc));
		nx_qlog_free(d->qlog);
		d->qlog = NULL;
	}
	return 0;
}

void nx_daemon_qlog_reconfigure(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	nx_daemon_pgsink_reconfigure(d);
	if (!d->qlog) {
		if (c->logging_query_log) {
			nx_log(NX_LOG_WARN, "querylog",
			       "reload: turning the query log on takes effect after a restart");
		}
		return;
	}
	nx_qlog_set_privacy(d->qlog, c->logging_privacy);
	nx_qlog_set_retention(d->qlog, c->logging_retention_days);
}

void nx_daemon_qlog_stop(struct nx_daemon *d)
{
	if (d->qlog) {
		nx_qlog_stop(d->qlog);
		nx_qlog_free(d->qlog);
		d->qlog = NULL;
	}
}

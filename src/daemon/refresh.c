/*
 * Scheduled blocklist refresh on the control loop: every filter.refresh_interval (jittered by
 * up to 10% so a fleet of boxes does not hit a list host at once), download each enabled URL
 * source in turn with a conditional GET (one transfer at a time keeps the peak to one list),
 * then one list sync compiles what changed and rebuilds the snapshot only if some body did.
 * A failed download keeps the last good list; it is reported in the source's status and
 * counted. Boot never waits for this: the first run starts a few seconds after serving begins.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "daemon/impl.h"
#include "filter/fetch.h"

#define NX_REFRESH_FIRST_MS 3000     /* after boot: let the listeners settle first */
#define NX_REFRESH_FETCH_TIMEOUT_MS 120000
#define NX_REFRESH_MAX_BYTES (256ull * 1024 * 1024)

int nx_refresh_start(struct nx_daemon *d);
void nx_refresh_stop(struct nx_daemon *d);
int nx_refresh_now(struct nx_daemon *d, int source, unsigned flags);

static void fetch_next(struct nx_daemon *d);
static void on_refresh_timer(uv_timer_t *t);

static void on_fetched(void *ud, const struct nx_fetch_result *res)
{
	struct nx_daemon *d = ud;
	int i = d->refresh_idx;
	struct nx_source_status *st = &d->lists.st[i];
	switch (res->status) {
	case NX_FETCH_OK:
		nx_stat_inc(NX_STAT_F_OK);
		st->fetched_at = time(NULL);
		snprintf(st->etag, sizeof(st->etag), "%s", res->etag);
		snprintf(st->last_modified, sizeof(st->last_modified), "%s", res->last_modified);
		st->last_error[0] = 0;
		d->refresh_downloaded++;
		break;
	case NX_FETCH_NOT_MODIFIED:
		nx_stat_inc(NX_STAT_F_NOT_MODIFIED);
		st->last_error[0] = 0;
		break;
	default:
		nx_stat_inc(NX_STAT_F_ERROR);
		st->errors++;
		snprintf(st->last_error, sizeof(st->last_error),
			 "download failed (%s), keeping the last good list: %.200s",
			 nx_fetch_status_name(res->status), res->error);
		nx_log(NX_LOG_WARN, "filter", "source %s: %s", st->name, st->last_error);
		break;
	}
	d->refresh_idx++;
	fetch_next(d);
}

static void finish_round(struct nx_daemon *d)
{
	d->refresh_running = false;
	nx_daemon_sync_lists(d, d->refresh_flags);
	d->refresh_flags = 0;
	const struct nx_conf *c = d->cur->c;
	uint64_t base = (uint64_t)c->refresh_interval_s * 1000;
	uint64_t jitter = base / 10 ? nx_rand_uniform((uint32_t)NX_MIN(base / 10, UINT32_MAX)) : 0;
	uv_timer_start(&d->refresh_timer, on_refresh_timer, base - jitter, 0);
	nx_log(NX_LOG_INFO, "filter", "refresh done: %u downloaded; next in %llu s",
	       d->refresh_downloaded, (unsigned long long)((base - jitter) / 1000));
}

static void fetch_next(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	for (; d->refresh_idx < (int)c->n_sources; d->refresh_idx++) {
		int i = d->refresh_idx;
		const struct nx_conf_source *s = &c->sources[i];
		if (!s->url || !s->enabled || !c->filter_enabled ||
		    (d->refresh_only >= 0 && d->refresh_only != i)) {
			continue;
		}
		char dir[600], dest[700];
		nx_lists_source_dir(&d->lists, s->name, dir, sizeof(dir));
		nx_mkdir_p(dir);
		nx_lists_download_path(&d->lists, s->name, dest, sizeof(dest));
		struct nx_source_status *st = &d->lists.st[i];
		bool have = access(dest, F_OK) == 0;
		struct nx_fetch_req req = {
			.url = s->url,
			.dest = dest,
			.etag = have && st->etag[0] ? st->etag : NULL,
			.last_modified = have && st->last_modified[0] ? st->last_modified : NULL,
			.timeout_ms = NX_REFRESH_FETCH_TIMEOUT_MS,
			.max_bytes = NX_REFRESH_MAX_BYTES,
		};
		if (nx_fetcher_start(d->fetcher, &req, on_fetched, d) == 0) {
			return; /* continues in on_fetched */
		}
		nx_stat_inc(NX_STAT_F_ERROR);
		st->errors++;
		snprintf(st->last_error, sizeof(st->last_error),
			 "cannot start the download, keeping the last good list: %.200s",
			 nx_fetcher_error(d->fetcher));
		nx_log(NX_LOG_WARN, "filter", "source %s: %s", st->name, st->last_error);
	}
	finish_round(d);
}

static void on_refresh_timer(uv_timer_t *t)
{
	struct nx_daemon *d = t->data;
	nx_refresh_now(d, -1, 0);
}

/* The round itself, one loop turn after it was asked for. */
static void on_round_start(uv_timer_t *t)
{
	fetch_next(t->data);
}

int nx_refresh_now(struct nx_daemon *d, int source, unsigned flags)
{
	if (d->refresh_running) {
		return NX_ENOSLOT;
	}
	d->refresh_flags = flags;
	d->refresh_running = true;
	d->refresh_idx = 0;
	d->refresh_only = source;
	d->refresh_downloaded = 0;
	/* Not here: the caller may be an admin handler (the refresh button), and a round without
	 * downloads (local files) rebuilds at once. From a loop turn of its own the rebuild's
	 * progress hook can answer admin requests meanwhile (admin/http.c nx_admin_service). */
	uv_timer_start(&d->refresh_timer, on_round_start, 0, 0);
	return 0;
}

int nx_refresh_start(struct nx_daemon *d)
{
	int rc = nx_fetcher_new(&d->loop, &d->fetcher);
	if (rc < 0) {
		return rc;
	}
	uv_timer_init(&d->loop, &d->refresh_timer);
	d->refresh_timer.data = d;
	uv_timer_start(&d->refresh_timer, on_refresh_timer, NX_REFRESH_FIRST_MS, 0);
	uv_unref((uv_handle_t *)&d->refresh_timer);
	return 0;
}

static void on_closed(uv_handle_t *h)
{
}

void nx_refresh_stop(struct nx_daemon *d)
{
	if (d->fetcher) {
		nx_fetcher_free(d->fetcher);
		d->fetcher = NULL;
		uv_close((uv_handle_t *)&d->refresh_timer, on_closed);
	}
}

/*
 * Scheduled blocklist refresh on the control loop: every filter.refresh_interval (jittered by
 * up to 10% so a fleet of boxes does not hit a list host at once), download each enabled URL
 * source in turn with a conditional GET (one transfer at a time keeps the peak to one list),
 * then one list sync compiles what changed and rebuilds the snapshot only if some body did.
 * A failed download keeps the last good list; it is reported in the source's status and
 * counted. The first scheduled round starts a few seconds after serving begins.
 *
 * A start waits on the network only for URL sources with no list on disk (a first boot, a
 * source added while the daemon was stopped): nx_refresh_first_boot downloads those before the
 * first list load, since DNS never answers unfiltered, for at most filter.first_boot_timeout.
 * With bodies on disk there is no such wait: the mapped snapshot serves and the scheduled
 * round brings news.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin/admin.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "daemon/impl.h"
#include "daemon/notify.h"
#include "filter/fetch.h"

#define NX_REFRESH_FIRST_MS 3000     /* after boot: let the listeners settle first */
#define NX_REFRESH_FETCH_TIMEOUT_MS 120000
#define NX_REFRESH_MAX_BYTES (256ull * 1024 * 1024)
/* A round that ends with some enabled URL source still without a list (its first downloads all
 * failed) comes back this soon, not a whole refresh_interval later: DNS answers without it
 * meanwhile. */
#define NX_REFRESH_RETRY_MS (5 * 60 * 1000)

int nx_refresh_start(struct nx_daemon *d);
void nx_refresh_stop(struct nx_daemon *d);
int nx_refresh_now(struct nx_daemon *d, int source, unsigned flags);

static void fetch_next(struct nx_daemon *d);
static void on_refresh_timer(uv_timer_t *t);

/* A 200: the new body is on disk; the next sync compiles it with these validators. */
static void record_ok(struct nx_source_status *st, const struct nx_fetch_result *res)
{
	nx_stat_inc(NX_STAT_F_OK);
	st->fetched_at = time(NULL);
	snprintf(st->etag, sizeof(st->etag), "%s", res->etag);
	snprintf(st->last_modified, sizeof(st->last_modified), "%s", res->last_modified);
	st->last_error[0] = 0;
}

static void on_fetched(void *ud, const struct nx_fetch_result *res)
{
	struct nx_daemon *d = ud;
	int i = d->refresh_idx;
	struct nx_source_status *st = &d->lists.st[i];
	st->downloading = false;
	switch (res->status) {
	case NX_FETCH_OK:
		record_ok(st, res);
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

/* filter.refresh_interval less up to 10% (a fleet of boxes does not hit a list host at once). */
static uint64_t next_round_ms(const struct nx_conf *c)
{
	uint64_t base = (uint64_t)c->refresh_interval_s * 1000;
	uint64_t jitter = base / 10 ? nx_rand_uniform((uint32_t)NX_MIN(base / 10, UINT32_MAX)) : 0;
	return base - jitter;
}

static void finish_round(struct nx_daemon *d)
{
	d->refresh_running = false;
	nx_daemon_sync_lists(d, d->refresh_flags);
	d->refresh_flags = 0;
	const struct nx_conf *c = d->cur->c;
	uint64_t next = next_round_ms(c);
	for (size_t i = 0; i < c->n_sources && i < d->lists.n; i++) {
		if (c->sources[i].url && d->lists.st[i].enabled && !d->lists.st[i].have_bodies) {
			next = NX_MIN(next, (uint64_t)NX_REFRESH_RETRY_MS);
		}
	}
	uv_timer_start(&d->refresh_timer, on_refresh_timer, next, 0);
	nx_log(NX_LOG_INFO, "filter", "refresh done: %u downloaded; next in %llu s",
	       d->refresh_downloaded, (unsigned long long)(next / 1000));
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
			st->downloading = true;
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
	uv_timer_start(&d->refresh_timer, on_refresh_timer,
		       d->refresh_first_ms ? d->refresh_first_ms : NX_REFRESH_FIRST_MS, 0);
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

/* ---- the start's downloads ---- */

/*
 * The round lives on nx_refresh_first_boot's stack: that call runs the control loop until the
 * last download ends or the deadline fires, closes what it opened and only then returns, so no
 * callback outlives it (the fetcher is freed first: a cancelled transfer's callback never runs).
 */
struct boot_round;

struct boot_fetch {
	struct boot_round *round; /* borrowed: the round owns this slot */
	unsigned idx;             /* config index of the source */
	bool done;
};

struct boot_round {
	struct nx_daemon *d;        /* borrowed */
	struct nx_fetcher *fetcher; /* owned: only this round's transfers */
	uv_timer_t deadline;        /* filter.first_boot_timeout */
	uint64_t t0;                /* monotonic ms at the start */
	unsigned n, pending, ok;
	bool timed_out, timer_closed;
	struct boot_fetch f[NX_CONF_MAX_SOURCES];
};

static void boot_status(const struct boot_round *br)
{
	nx_notify_status("first boot: downloading lists, %u of %u done", br->n - br->pending,
			 br->n);
	nx_gauge_add(NX_GAUGE_LISTS_LOAD_DOWNLOADS,
		     (int64_t)br->pending - nx_gauge_read(NX_GAUGE_LISTS_LOAD_DOWNLOADS));
}

static void boot_fetched(void *ud, const struct nx_fetch_result *res)
{
	struct boot_fetch *bf = ud;
	struct boot_round *br = bf->round;
	struct nx_daemon *d = br->d;
	struct nx_source_status *st = &d->lists.st[bf->idx];
	bf->done = true;
	st->downloading = false;
	br->pending--;
	unsigned long long ms = (unsigned long long)(nx_now_mono_ms() - br->t0);
	if (res->status == NX_FETCH_OK) {
		record_ok(st, res);
		br->ok++;
		nx_log(NX_LOG_INFO, "filter",
		       "first boot: source %s downloaded (%llu bytes) at %llu ms; %u of %u "
		       "downloads still running", st->name, (unsigned long long)res->bytes, ms,
		       br->pending, br->n);
	} else {
		/* no validators were sent (nothing on disk): a 304 is as unusable as an error */
		bool timeout = res->status == NX_FETCH_TIMEOUT;
		nx_stat_inc(NX_STAT_F_ERROR);
		nx_stat_inc(timeout ? NX_STAT_BOOT_UNLOADED_TIMEOUT : NX_STAT_BOOT_UNLOADED_FAILED);
		st->errors++;
		snprintf(st->last_error, sizeof(st->last_error),
			 "first download failed (%s): %.200s; DNS answers without this list until a "
			 "refresh brings it", nx_fetch_status_name(res->status), res->error);
		nx_log(NX_LOG_ERR, "filter", "first boot: source %s: %s", st->name, st->last_error);
	}
	boot_status(br);
	if (br->pending == 0) {
		uv_stop(&d->loop);
	}
}

static void boot_deadline(uv_timer_t *t)
{
	struct boot_round *br = t->data;
	br->timed_out = true;
	uv_stop(&br->d->loop);
}

static void boot_timer_closed(uv_handle_t *h)
{
	struct boot_round *br = h->data;
	br->timer_closed = true;
}

/* An enabled URL source whose list the start has nothing of: no compiled bodies (meta) and no
 * download waiting to be compiled. */
static bool needs_first_download(const struct nx_lists *l, const struct nx_conf_source *s)
{
	char dir[600], path[700];
	nx_lists_source_dir(l, s->name, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s.meta", dir, s->name);
	if (access(path, F_OK) == 0) {
		return false;
	}
	nx_lists_download_path(l, s->name, path, sizeof(path));
	return access(path, F_OK) != 0;
}

unsigned nx_refresh_first_boot(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	struct nx_lists *l = &d->lists;
	unsigned n = (unsigned)NX_MIN(c->n_sources, NX_CONF_MAX_SOURCES);
	if (c->first_boot_timeout_s == 0 || !c->filter_enabled) {
		return 0;
	}
	struct boot_round br = {.d = d};
	/* The sync that follows must keep what this round learns (validators, errors): name the
	 * status slots as it would, so it does not reset them. */
	for (unsigned i = 0; i < n; i++) {
		struct nx_source_status *st = &l->st[i];
		if (i >= l->n || strcmp(st->name, c->sources[i].name) != 0) {
			memset(st, 0, sizeof(*st));
			snprintf(st->name, sizeof(st->name), "%s", c->sources[i].name);
		}
	}
	l->n = NX_MAX(l->n, n);
	char names[512] = "";
	size_t off = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		if (!s->url || !s->enabled || !needs_first_download(l, s)) {
			continue;
		}
		if (!br.fetcher && nx_fetcher_new(&d->loop, &br.fetcher) < 0) {
			nx_log(NX_LOG_ERR, "filter", "first boot: cannot start downloads (out of "
			       "memory); DNS answers without the lists not on disk yet");
			return 0;
		}
		char dir[600], dest[700];
		nx_lists_source_dir(l, s->name, dir, sizeof(dir));
		nx_mkdir_p(dir);
		nx_lists_download_path(l, s->name, dest, sizeof(dest));
		struct nx_fetch_req req = {
			.url = s->url,
			.dest = dest,
			/* the round's deadline decides; curl's own bound only backs it up */
			.timeout_ms = c->first_boot_timeout_s * 1000 + 1000,
			.max_bytes = NX_REFRESH_MAX_BYTES,
		};
		struct boot_fetch *bf = &br.f[br.n];
		bf->round = &br;
		bf->idx = i;
		struct nx_source_status *st = &l->st[i];
		int rc = nx_fetcher_start(br.fetcher, &req, boot_fetched, bf);
		if (rc < 0) {
			nx_stat_inc(NX_STAT_F_ERROR);
			nx_stat_inc(NX_STAT_BOOT_UNLOADED_FAILED);
			st->errors++;
			snprintf(st->last_error, sizeof(st->last_error),
				 "cannot start the first download: %s", nx_strerror(rc));
			nx_log(NX_LOG_ERR, "filter", "first boot: source %s: %s", s->name,
			       st->last_error);
			continue;
		}
		st->downloading = true;
		br.n++;
		br.pending++;
		if (off < sizeof(names)) {
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s",
						off ? ", " : "", s->name);
		}
	}
	if (br.n == 0) {
		nx_fetcher_free(br.fetcher); /* NULL, or one whose every start failed */
		return 0;
	}
	nx_log(NX_LOG_INFO, "filter",
	       "first boot: downloading %u source%s with no list on disk before DNS answers "
	       "(at most %u s): %s", br.n, br.n == 1 ? "" : "s", c->first_boot_timeout_s, names);
	br.t0 = nx_now_mono_ms();
	boot_status(&br);
	/* Refresh requests wait (refresh_running), admin changes answer 503 busy. */
	d->refresh_running = true;
	nx_admin_set_busy(d->admin, true);
	uv_timer_init(&d->loop, &br.deadline);
	br.deadline.data = &br;
	uv_timer_start(&br.deadline, boot_deadline, (uint64_t)c->first_boot_timeout_s * 1000, 0);
	while (br.pending > 0 && !br.timed_out) {
		uv_run(&d->loop, UV_RUN_DEFAULT); /* returns at uv_stop */
	}
	for (unsigned k = 0; k < br.n; k++) {
		struct boot_fetch *bf = &br.f[k];
		if (bf->done) {
			continue;
		}
		struct nx_source_status *st = &l->st[bf->idx];
		st->downloading = false;
		nx_stat_inc(NX_STAT_F_ERROR);
		nx_stat_inc(NX_STAT_BOOT_UNLOADED_TIMEOUT);
		st->errors++;
		snprintf(st->last_error, sizeof(st->last_error),
			 "first download still running after filter.first_boot_timeout (%u s): "
			 "stopped; DNS answers without this list until a refresh brings it",
			 c->first_boot_timeout_s);
		nx_log(NX_LOG_ERR, "filter", "first boot: source %s: %s", st->name, st->last_error);
	}
	nx_fetcher_free(br.fetcher); /* cancels what still runs: no callback after this */
	br.fetcher = NULL;
	uv_close((uv_handle_t *)&br.deadline, boot_timer_closed);
	while (!br.timer_closed) {
		uv_run(&d->loop, UV_RUN_NOWAIT);
	}
	nx_admin_set_busy(d->admin, false);
	d->refresh_running = false;
	nx_gauge_add(NX_GAUGE_LISTS_LOAD_DOWNLOADS, -nx_gauge_read(NX_GAUGE_LISTS_LOAD_DOWNLOADS));
	unsigned missing = br.n - br.ok;
	unsigned long long ms = (unsigned long long)(nx_now_mono_ms() - br.t0);
	if (missing == 0) {
		nx_log(NX_LOG_INFO, "filter", "first boot: %u of %u downloads done in %llu ms",
		       br.ok, br.n, ms);
	} else {
		nx_log(NX_LOG_ERR, "filter",
		       "first boot: %u of %u sources could not be downloaded in %llu ms; DNS "
		       "answers WITHOUT them (the other lists filter) until a refresh brings them, "
		       "tried again every %u s at most",
		       missing, br.n, ms, NX_REFRESH_RETRY_MS / 1000);
	}
	/* Every URL source fresh from this round: the scheduled round need not ask again at
	 * once. Otherwise it comes soon, as usual (it retries what failed). */
	bool all_fresh = missing == 0;
	for (unsigned i = 0; i < n && all_fresh; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		bool waited = false;
		for (unsigned k = 0; k < br.n; k++) {
			waited = waited || br.f[k].idx == i;
		}
		all_fresh = !s->url || !s->enabled || waited;
	}
	if (all_fresh) {
		d->refresh_first_ms = next_round_ms(c);
	}
	return br.n;
}

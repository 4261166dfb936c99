/*
 * The replica's pull: a uv_timer on the control loop every sync.interval (and
 * nx_sync_now), one conditional GET of the primary's export through a fetcher of its own
 * (libcurl multi on this loop: no thread), then nx_sync_apply + the daemon's reload. Any
 * failure keeps the running config and the file as they were, counted and shown in the
 * status; the ETag sent is the last *applied* one's, so a refused export is fetched and
 * refused again each round until the primary changes (the status keeps saying why).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "filter/fetch.h"
#include "sync/impl.h"

#define RESULT_MAX 24

struct nx_sync {
	uv_loop_t *loop;	     /* borrowed: the control loop */
	struct nx_sync_hooks hooks;  /* copied */
	struct nx_fetcher *fetcher;  /* owned; NULL until the first pull */
	uv_timer_t timer;	     /* the interval; closing frees the struct */
	bool running;		     /* a transfer is started and not yet called back */
	bool reloading;		     /* inside our own reload: reconfigure keeps the state */
	unsigned interval_s;	     /* the interval the timer runs at (0: stopped) */
	char primary[1024];	     /* the URL followed ("" when not a replica) */
	char etag[NX_SYNC_ETAG_MAX]; /* of the last applied export ("" before one) */
	char gen[NX_SYNC_GEN_LEN];   /* its generation */
	int64_t last_attempt_ms;     /* wall clock of the last pull's end (0: never) */
	int64_t last_sync_ms;     /* of the last pull that applied or found no change */
	char result[RESULT_MAX];     /* "never", or the last pull's nxdns_sync_pulls_total result */
	char error[NX_SYNC_ERR_MAX]; /* the last pull's error ("" when it succeeded) */
	uint64_t pulls, applied;
	char dest[PATH_MAX]; /* state_dir/sync/export.json: the download */
};

static void finish(struct nx_sync *s, enum nx_stat st, const char *result, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void finish(struct nx_sync *s, enum nx_stat st, const char *result, const char *fmt, ...)
{
	nx_stat_inc(st);
	s->pulls++;
	s->last_attempt_ms = nx_now_wall_ms();
	snprintf(s->result, sizeof(s->result), "%s", result);
	s->error[0] = '\0';
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->error, sizeof(s->error), fmt, ap);
		va_end(ap);
		nx_log(NX_LOG_WARN, "sync",
		       "pull from %s: %s: %s (the running configuration stays)", s->primary, result,
		       s->error);
	} else {
		s->last_sync_ms = s->last_attempt_ms;
	}
}

/* Put the file back as it was before an apply whose reload failed (the rewrite's .bak). */
static void restore_file(const struct nx_conf *c)
{
	char bak[PATH_MAX];
	if (snprintf(bak, sizeof(bak), "%s.bak", c->path) < (int)sizeof(bak) &&
	    rename(bak, c->path) != 0) {
		nx_log(NX_LOG_ERR, "sync", "cannot restore %s from %s: %s", c->path, bak,
		       strerror(errno));
	}
}

/* SHA-256 of a whole file (the config: small); false when it cannot be read. */
static bool file_hash(const char *path, uint8_t out[32])
{
	char *text;
	size_t len;
	if (nx_sync_read_file(path, NX_SYNC_EXPORT_MAX, &text, &len) != 0) {
		return false;
	}
	crypto_hash_sha256(out, (const unsigned char *)text, len);
	nx_mem_free(NX_OWNER_sync, text, len + 1);
	return true;
}

static void apply_download(struct nx_sync *s)
{
	const struct nx_conf *c = s->hooks.conf(s->hooks.ud);
	char *doc = NULL;
	size_t len = 0;
	int rc = c ? nx_sync_read_file(s->dest, NX_SYNC_EXPORT_MAX, &doc, &len) : NX_ECONFIG;
	if (rc) {
		finish(s, NX_STAT_SYNC_FETCH_FAILED, "fetch_failed", "cannot read %s: %s", s->dest,
		       nx_strerror(rc));
		return;
	}
	char gen[NX_SYNC_GEN_LEN], etag[NX_SYNC_ETAG_MAX];
	nx_sync_etag_of(doc, len, gen, etag);
	char err[NX_SYNC_ERR_MAX];
	uint8_t before[32], after[32];
	bool had = file_hash(c->path, before);
	rc = nx_sync_apply(c, doc, len, err, sizeof(err));
	nx_mem_free(NX_OWNER_sync, doc, len + 1);
	if (rc) {
		finish(s, NX_STAT_SYNC_INVALID, "invalid", "generation %s: %s", gen, err);
		return;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", c->path);
	if (had && file_hash(path, after) && !memcmp(before, after, sizeof(before))) {
		/* the file already says it (a full pull after another reload): no reload */
		snprintf(s->etag, sizeof(s->etag), "%s", etag);
		snprintf(s->gen, sizeof(s->gen), "%s", gen);
		finish(s, NX_STAT_SYNC_APPLIED, "applied", NULL);
		return;
	}
	s->reloading = true;
	rc = s->hooks.reload(s->hooks.ud, err, sizeof(err));
	s->reloading = false;
	if (rc) {
		/* c is still the running config (a failed reload keeps it) */
		restore_file(c);
		finish(s, NX_STAT_SYNC_RELOAD_FAILED, "reload_failed",
		       "generation %s was written but the reload refused it: %s", gen, err);
		return;
	}
	/* the primary's ETag is this same hash of the same bytes */
	snprintf(s->etag, sizeof(s->etag), "%s", etag);
	snprintf(s->gen, sizeof(s->gen), "%s", gen);
	s->applied++;
	finish(s, NX_STAT_SYNC_APPLIED, "applied", NULL);
	nx_log(NX_LOG_INFO, "sync", "applied generation %s from %s to %s", gen, s->primary, path);
	c = s->hooks.conf(s->hooks.ud);
	if (c) {
		nx_sync_prune(c);
	}
}

static void on_fetched(void *ud, const struct nx_fetch_result *res)
{
	struct nx_sync *s = ud;
	s->running = false;
	/* res lives in the fetcher: it is freed after the last use below. Between pulls the
	 * replica holds no fetcher (its state is filter_build's, a transient owner). */
	struct nx_fetcher *f = s->fetcher;
	s->fetcher = NULL;
	switch (res->status) {
	case NX_FETCH_OK:
		apply_download(s);
		break;
	case NX_FETCH_NOT_MODIFIED:
		finish(s, NX_STAT_SYNC_NOT_MODIFIED, "not_modified", NULL);
		break;
	case NX_FETCH_HTTP_ERROR:
		finish(s, NX_STAT_SYNC_FETCH_FAILED, "fetch_failed",
		       "the primary answered HTTP %ld%s", res->http_code,
		       res->http_code == 401 || res->http_code == 403
			   ? " (is sync.token one of its admin.tokens?)"
			   : "");
		break;
	default:
		finish(s, NX_STAT_SYNC_FETCH_FAILED, "fetch_failed", "%s: %s",
		       nx_fetch_status_name(res->status), res->error);
		break;
	}
	nx_fetcher_free(f);
}

static int start_pull(struct nx_sync *s)
{
	const struct nx_conf *c = s->hooks.conf(s->hooks.ud);
	if (!c || !c->sync_primary) {
		return NX_ENOTFOUND;
	}
	if (s->running) {
		return NX_ENOSLOT;
	}
	int rc = 0;
	if (!s->fetcher) {
		rc = nx_fetcher_new(s->loop, &s->fetcher);
	}
	char dir[PATH_MAX];
	if (!rc &&
	    (snprintf(dir, sizeof(dir), "%s/" NX_SYNC_DIR, c->state_dir) >= (int)sizeof(dir) ||
	     snprintf(s->dest, sizeof(s->dest), "%s/" NX_SYNC_DIR "/export.json", c->state_dir) >=
		 (int)sizeof(s->dest))) {
		rc = -ENAMETOOLONG;
	}
	if (!rc && mkdir(dir, 0700) != 0 && errno != EEXIST) {
		rc = -errno;
	}
	char url[1100];
	snprintf(url, sizeof(url), "%s" NX_SYNC_EXPORT_PATH, c->sync_primary);
	struct nx_fetch_req req = {
	    .url = url,
	    .dest = s->dest,
	    .etag = s->etag,
	    .timeout_ms = NX_SYNC_TIMEOUT_MS,
	    .max_bytes = NX_SYNC_EXPORT_MAX,
	    .bearer = c->sync_token,
	    .pin_sha256 = c->sync_pin,
	};
	if (!rc) {
		rc = nx_fetcher_start(s->fetcher, &req, on_fetched, s);
	}
	if (rc) {
		nx_fetcher_free(s->fetcher);
		s->fetcher = NULL;
		finish(s, NX_STAT_SYNC_FETCH_FAILED, "fetch_failed", "cannot start the pull: %s",
		       nx_strerror(rc));
		return rc;
	}
	s->running = true;
	return 0;
}

static void on_tick(uv_timer_t *t)
{
	struct nx_sync *s = t->data;
	(void)start_pull(s); /* a pull still running: this round is skipped */
}

static void on_closed(uv_handle_t *h)
{
	struct nx_sync *s = h->data;
	nx_mem_free(NX_OWNER_sync, s, sizeof(*s));
}

void nx_sync_reconfigure(struct nx_sync *s)
{
	if (!s) {
		return;
	}
	const struct nx_conf *c = s->hooks.conf(s->hooks.ud);
	const char *primary = c && c->sync_primary ? c->sync_primary : "";
	unsigned interval = primary[0] ? c->sync_interval_s : 0;
	bool moved = strcmp(primary, s->primary) != 0;
	if (!s->reloading) {
		/* a reload of ours changed nothing we track; any other (SIGHUP, an API edit, a
		 * restore) may have touched synced keys by hand: ask for the whole export next
		 * time, so a 304 cannot keep them drifted */
		s->etag[0] = '\0';
	}
	if (moved) {
		/* another primary: nothing it said before counts */
		snprintf(s->primary, sizeof(s->primary), "%s", primary);
		s->etag[0] = s->gen[0] = '\0';
		snprintf(s->result, sizeof(s->result), "never");
		s->error[0] = '\0';
	}
	if (!moved && interval == s->interval_s) {
		return;
	}
	s->interval_s = interval;
	uv_timer_stop(&s->timer);
	if (interval) {
		/* a new primary is asked at once; a new interval counts from now */
		uint64_t first = moved ? 0 : (uint64_t)interval * 1000;
		uv_timer_start(&s->timer, on_tick, first, (uint64_t)interval * 1000);
	}
}

int nx_sync_new(uv_loop_t *loop, const struct nx_sync_hooks *hooks, struct nx_sync **out)
{
	struct nx_sync *s = nx_mem_calloc(NX_OWNER_sync, 1, sizeof(*s));
	if (!s) {
		return -ENOMEM;
	}
	s->loop = loop;
	s->hooks = *hooks;
	snprintf(s->result, sizeof(s->result), "never");
	int rc = uv_timer_init(loop, &s->timer);
	if (rc) {
		nx_mem_free(NX_OWNER_sync, s, sizeof(*s));
		return rc;
	}
	s->timer.data = s;
	nx_sync_reconfigure(s);
	*out = s;
	return 0;
}

void nx_sync_free(struct nx_sync *s)
{
	if (!s) {
		return;
	}
	nx_fetcher_free(s->fetcher); /* cancels a running pull: on_fetched is not called */
	s->fetcher = NULL;
	uv_timer_stop(&s->timer);
	uv_close((uv_handle_t *)&s->timer, on_closed);
}

int nx_sync_now(struct nx_sync *s)
{
	return s ? start_pull(s) : NX_ENOTFOUND;
}

static json_t *ms_or_null(int64_t ms)
{
	return ms ? json_integer(ms) : json_null();
}

json_t *nx_sync_status(const struct nx_sync *s)
{
	bool on = s && s->primary[0];
	if (!on) {
		return json_pack("{s:b, s:s}", "replica", 0, "result", "off");
	}
	return json_pack("{s:b, s:s, s:I, s:b, s:o, s:o, s:s, s:s?, s:s?, s:s?, s:I, s:I}",
			 "replica", 1, "primary", s->primary, "interval", (json_int_t)s->interval_s,
			 "running", s->running, "last_attempt", ms_or_null(s->last_attempt_ms),
			 "last_sync", ms_or_null(s->last_sync_ms), "result", s->result,
			 "error", s->error[0] ? s->error : NULL, "generation",
			 s->gen[0] ? s->gen : NULL, "etag", s->etag[0] ? s->etag : NULL, "pulls",
			 (json_int_t)s->pulls, "applied", (json_int_t)s->applied);
}

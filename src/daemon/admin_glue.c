/*
 * The daemon's side of the admin HTTP server: starts it on the control loop and contributes
 * the daemon-owned metric families (per-upstream series, configuration figures).
 * Runs on the control thread only.
 */
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <jansson.h>

#include "admin/admin.h"
#include "admin/control.h"
#include "base/clock.h"
#include "dns/wire.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon/impl.h"
#include "daemon/privdrop.h"
#include "daemon/names.h"

int nx_daemon_admin_start(struct nx_daemon *d);
void nx_daemon_admin_stop(struct nx_daemon *d);

/* The control socket: one daemon per process (nx_daemon_run), started and stopped here with
 * the admin listener, on the control thread only. */
static struct nx_admin_control *g_control;

static void upstream_families(struct nx_metrics_buf *mb)
{
	int n = nx_up_stats_count();
	struct nx_up_stats_row row;
	nx_metrics_family(mb, "nxdns_upstream_exchanges_total", NX_METRIC_COUNTER,
			  "Upstream attempts by server and outcome (answer, timeout, cancelled, error)");
	for (int i = 0; i < n; i++) {
		nx_up_stats_read(i, &row);
		for (int o = 0; o < NX_UP_O__COUNT; o++) {
			nx_metrics_sample_u64(mb, "nxdns_upstream_exchanges_total", row.outcome[o],
					      "server", row.name, "outcome",
					      nx_up_outcome_name((enum nx_up_outcome)o), NULL);
		}
	}
	nx_metrics_family(mb, "nxdns_upstream_resends_total", NX_METRIC_COUNTER,
			  "UDP queries sent again to the same server after its retransmission timeout "
			  "passed without an answer");
	for (int i = 0; i < n; i++) {
		nx_up_stats_read(i, &row);
		nx_metrics_sample_u64(mb, "nxdns_upstream_resends_total", row.resends, "server",
				      row.name, NULL);
	}
	nx_metrics_family(mb, "nxdns_upstream_connections_total", NX_METRIC_COUNTER,
			  "TCP, DoT and DoH connections opened to the server (each carries many "
			  "queries: exchanges per connection is the reuse)");
	for (int i = 0; i < n; i++) {
		nx_up_stats_read(i, &row);
		nx_metrics_sample_u64(mb, "nxdns_upstream_connections_total", row.connections,
				      "server", row.name, NULL);
	}
	nx_metrics_family(mb, "nxdns_upstream_rto_seconds", NX_METRIC_GAUGE,
			  "Retransmission timeout a new query to the server gets (its round trips: "
			  "SRTT + 4 RTTVAR, 0.2 to 1 s)");
	for (int i = 0; i < n; i++) {
		nx_up_stats_read(i, &row);
		nx_metrics_sample_f64(mb, "nxdns_upstream_rto_seconds", row.rto_ms / 1000.0, "server",
				      row.name, NULL);
	}
	static const unsigned bounds_ms[] = NX_UP_LATENCY_BUCKETS_MS;
	double bounds[NX_UP_LATENCY_NBUCKETS];
	for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
		bounds[b] = bounds_ms[b] / 1000.0;
	}
	nx_metrics_family(mb, "nxdns_upstream_latency_seconds", NX_METRIC_HISTOGRAM,
			  "Time from sending to a winning upstream answer, by server");
	for (int i = 0; i < n; i++) {
		nx_up_stats_read(i, &row);
		/* the engine keeps cumulative buckets; the builder wants per-bucket counts */
		uint64_t counts[NX_UP_LATENCY_NBUCKETS + 1];
		uint64_t prev = 0;
		for (int b = 0; b < NX_UP_LATENCY_NBUCKETS; b++) {
			counts[b] = row.bucket[b] - prev;
			prev = row.bucket[b];
		}
		counts[NX_UP_LATENCY_NBUCKETS] = row.count - prev;
		nx_metrics_histogram(mb, "nxdns_upstream_latency_seconds", bounds, counts,
				     NX_UP_LATENCY_NBUCKETS, row.sum_seconds, "server", row.name,
				     NULL);
	}
}

static void cache_families(struct nx_metrics_buf *mb, const struct nx_cache *cache)
{
	struct nx_cache_stats st;
	nx_cache_stats(cache, &st);
#define NX_METRIC_T_counter NX_METRIC_COUNTER
#define NX_METRIC_T_gauge NX_METRIC_GAUGE
#define CACHE_FAMILY(field, type, family, help)                                                    \
	nx_metrics_family(mb, family, NX_METRIC_T_##type, help);                                   \
	nx_metrics_sample_u64(mb, family, st.field, NULL);
	NX_CACHE_STATS(CACHE_FAMILY)
#undef CACHE_FAMILY
#undef NX_METRIC_T_counter
#undef NX_METRIC_T_gauge
}

static void filter_families(struct nx_metrics_buf *mb, const struct nx_lists *l)
{
	nx_metrics_family(mb, "nxdns_filter_snapshot_entries", NX_METRIC_GAUGE,
			  "Blocklist snapshot entries ((source, name) pairs) in the mapped snapshot");
	nx_metrics_sample_u64(mb, "nxdns_filter_snapshot_entries", l->entries, NULL);
	nx_metrics_family(mb, "nxdns_filter_snapshot_bytes", NX_METRIC_GAUGE,
			  "Size of the mapped blocklist snapshot file");
	nx_metrics_sample_u64(mb, "nxdns_filter_snapshot_bytes", l->bytes, NULL);
	nx_metrics_family(mb, "nxdns_filter_snapshot_generation", NX_METRIC_GAUGE,
			  "Snapshot generation in effect (+1 per rebuild or remap)");
	nx_metrics_sample_u64(mb, "nxdns_filter_snapshot_generation", l->gen, NULL);
	nx_metrics_family(mb, "nxdns_filter_source_names", NX_METRIC_GAUGE,
			  "Names in a source's compiled bodies, by body");
	for (unsigned i = 0; i < l->n; i++) {
		const struct nx_source_status *st = &l->st[i];
		nx_metrics_sample_u64(mb, "nxdns_filter_source_names", st->n_list, "source",
				      st->name, "body", "list", NULL);
		nx_metrics_sample_u64(mb, "nxdns_filter_source_names", st->n_wild, "source",
				      st->name, "body", "wild", NULL);
		nx_metrics_sample_u64(mb, "nxdns_filter_source_names", st->n_allow, "source",
				      st->name, "body", "allow", NULL);
	}
	nx_metrics_family(mb, "nxdns_filter_source_errors_total", NX_METRIC_COUNTER,
			  "Failed downloads or compiles per source since start (last good list kept)");
	for (unsigned i = 0; i < l->n; i++) {
		nx_metrics_sample_u64(mb, "nxdns_filter_source_errors_total", l->st[i].errors,
				      "source", l->st[i].name, NULL);
	}
}

/* A sample whose labels come pre-formatted as one `key="value"` pair (or none), as in the
 * query log's stats table. */
static void sample_labelled(struct nx_metrics_buf *mb, const char *family, const char *labels,
			    uint64_t v)
{
	char key[64], val[64];
	const char *eq = strchr(labels, '=');
	if (!eq || eq[1] != '"' || (size_t)(eq - labels) >= sizeof(key)) {
		nx_metrics_sample_u64(mb, family, v, NULL);
		return;
	}
	snprintf(key, sizeof(key), "%.*s", (int)(eq - labels), labels);
	snprintf(val, sizeof(val), "%s", eq + 2);
	char *q = strchr(val, '"');
	if (q) {
		*q = 0;
	}
	nx_metrics_sample_u64(mb, family, v, key, val, NULL);
}

static void metrics_extra(struct nx_metrics_buf *mb, void *ud)
{
	struct nx_daemon *d = ud;
	const struct nx_conf *c = d->cur->c;
	upstream_families(mb);
	filter_families(mb, &d->lists);
	if (d->qlog) {
		struct nx_qlog_stats qs;
		nx_qlog_stats(d->qlog, &qs);
		const char *last = "";
#define QLOG_ROW(field, type, family, labels, help)                                                \
	if (strcmp(last, family) != 0) {                                                           \
		nx_metrics_family(mb, family, NX_METRIC_T_##type, help);                           \
		last = family;                                                                     \
	}                                                                                          \
	sample_labelled(mb, family, labels, qs.field);
#define NX_METRIC_T_counter NX_METRIC_COUNTER
#define NX_METRIC_T_gauge NX_METRIC_GAUGE
		NX_QLOG_STATS(QLOG_ROW)
#undef QLOG_ROW
#undef NX_METRIC_T_counter
#undef NX_METRIC_T_gauge
	}
	cache_families(mb, d->cache);
	nx_metrics_family(mb, "nxdns_workers", NX_METRIC_GAUGE,
			  "Worker threads (listener.workers); process threads = workers + 2 (control, query-log writer) or + 1 without the query log");
	nx_metrics_sample_u64(mb, "nxdns_workers", d->n_workers, NULL);
	nx_metrics_family(mb, "nxdns_query_permits", NX_METRIC_GAUGE,
			  "Configured query permits (query_budget.permits)");
	nx_metrics_sample_u64(mb, "nxdns_query_permits", c->permits, NULL);
	nx_metrics_family(mb, "nxdns_config_generation", NX_METRIC_GAUGE,
			  "Configuration generation in effect (1 at start, +1 per reload)");
	nx_metrics_sample_u64(mb, "nxdns_config_generation", d->cur->gen, NULL);
	nx_admin_control_metrics(g_control, mb);
}

static const struct nx_conf *current_conf(void *ud)
{
	struct nx_daemon *d = ud;
	return d->cur->c; /* control thread: d->cur changes only here */
}

static const struct nx_conf *boot_conf(void *ud)
{
	struct nx_daemon *d = ud;
	return d->boot ? d->boot->c : NULL;
}

static const char *client_ptr(void *ud, const char *addr)
{
	struct nx_daemon *d = ud;
	return nx_names_get(d->names, addr);
}

static bool client_ptr_named(void *ud, const char *name)
{
	struct nx_daemon *d = ud;
	return nx_names_known(d->names, name);
}

static int reload_hook(void *ud, char *err, size_t errlen)
{
	return nx_daemon_reload(ud, err, errlen);
}

static json_t *sources_status(void *ud)
{
	struct nx_daemon *d = ud;
	const struct nx_conf *c = d->cur->c;
	json_t *arr = json_array();
	for (size_t i = 0; i < c->n_sources; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		const struct nx_source_status *st = NULL;
		for (unsigned k = 0; k < d->lists.n; k++) {
			if (strcmp(d->lists.st[k].name, s->name) == 0) {
				st = &d->lists.st[k];
			}
		}
		json_t *groups = json_array();
		for (size_t g = 0; g < s->n_groups; g++) {
			json_array_append_new(groups, json_string(s->groups[g]));
		}
		json_t *o = json_pack("{s:s, s:b, s:s, s:o}", "name", s->name, "enabled", s->enabled,
				      "format", s->format, "groups", groups);
		json_object_set_new(o, s->url ? "url" : "path", json_string(s->url ? s->url : s->path));
		json_object_set_new(o, "list", json_integer(st ? (json_int_t)st->n_list : 0));
		json_object_set_new(o, "wild", json_integer(st ? (json_int_t)st->n_wild : 0));
		json_object_set_new(o, "allow", json_integer(st ? (json_int_t)st->n_allow : 0));
		json_object_set_new(o, "skipped", json_integer(st ? (json_int_t)st->skipped : 0));
		json_object_set_new(o, "fetched_at", json_integer(st ? st->fetched_at : 0));
		json_object_set_new(o, "downloading", json_boolean(st && st->downloading));
		json_object_set_new(o, "compiled_at", json_integer(st ? st->compiled_at : 0));
		json_object_set_new(o, "last_error", json_string(st ? st->last_error : ""));
		json_object_set_new(o, "errors", json_integer(st ? (json_int_t)st->errors : 0));
		json_object_set_new(o, "kept_previous",
				    json_integer(st ? (json_int_t)st->kept_previous : 0));
		json_array_append_new(arr, o);
	}
	return arr;
}

static int refresh_hook(void *ud, const char *source)
{
	struct nx_daemon *d = ud;
	const struct nx_conf *c = d->cur->c;
	int idx = -1;
	if (source) {
		for (size_t i = 0; i < c->n_sources; i++) {
			if (strcmp(c->sources[i].name, source) == 0) {
				idx = (int)i;
			}
		}
		if (idx < 0) {
			return NX_ENOTFOUND;
		}
	}
	return nx_refresh_now(d, idx, 0);
}

static int pause_hook(void *ud, int64_t until_ms)
{
	struct nx_daemon *d = ud;
	atomic_store(&d->pause_until_ms, until_ms);
	nx_log(NX_LOG_INFO, "filter", until_ms ? "filtering paused" : "filtering resumed");
	return 0;
}

static int64_t paused_until(void *ud)
{
	struct nx_daemon *d = ud;
	int64_t u = atomic_load(&d->pause_until_ms);
	return u > nx_now_wall_ms() ? u : 0;
}

/* The same decision `nxdns lookup` prints, on the daemon's current generation. */
static json_t *lookup_hook(void *ud, const char *name, uint16_t qtype, const char *client,
			   const char *client_id, const char **err)
{
	struct nx_daemon *d = ud;
	struct sockaddr_storage ss = {0};
	ss.ss_family = AF_INET;
	if (client && *client) {
		if (inet_pton(AF_INET, client, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
			ss.ss_family = AF_INET;
		} else if (inet_pton(AF_INET6, client, &((struct sockaddr_in6 *)&ss)->sin6_addr) ==
			   1) {
			ss.ss_family = AF_INET6;
		} else {
			*err = "invalid client address";
			return NULL;
		}
	}
	struct nx_policy p = {
		.c = d->cur->c,
		.rules = d->cur->rules,
		.user_side = d->cur->user_side,
		.badfilter = d->cur->badfilter,
		.snap = d->lists.cur ? d->lists.cur->snap : NULL,
		.side = d->lists.cur ? d->lists.cur->side : NULL,
		.paused = paused_until(d) != 0,
	};
	return nx_policy_lookup_json(&p, name, qtype, (struct sockaddr *)&ss, client_id, err);
}

static struct nx_tls_creds *tls_creds(void *ud)
{
	struct nx_daemon *d = ud;
	return d->cur->creds; /* control thread: the generation in effect */
}

static void live_tap(void *ud, const struct nx_qlog_rec *recs, size_t n)
{
	nx_admin_live_publish(ud, recs, n); /* thread-safe: called on the writer thread */
}

/*
 * The local control socket (state_dir/control.sock), also without the admin listener: `nxdns
 * memory` on the box needs no token. A daemon that cannot open it still serves DNS (it is
 * not configured, so it cannot be a configuration error): warned, and the CLI says so.
 * state_dir is read at start; a reload that moves it keeps the socket where it was.
 */
static void control_start(struct nx_daemon *d, const struct nx_admin_hooks *hooks)
{
	const char *dir = d->cur->c->state_dir;
	int rc = nx_mkdir_p(dir); /* made by the list code at boot, unless that failed */
	if (rc < 0) {
		nx_log(NX_LOG_WARN, "daemon", "no control socket: cannot create state_dir %s: %s", dir,
		       nx_strerror(rc));
		return;
	}
	rc = nx_admin_control_start(&d->loop, dir, hooks, d->admin, &g_control);
	if (rc < 0) {
		nx_log(NX_LOG_WARN, "daemon", "no control socket in %s (%s): `nxdns memory` needs "
		       "--admin and --token", dir, nx_strerror(rc));
		g_control = NULL;
	}
}

/* /healthz: 200 once the DNS listeners serve; until then (the first list load) 503 "loading". */
static bool ready_hook(void *ud)
{
	const struct nx_daemon *d = ud;
	return atomic_load_explicit(&d->serving, memory_order_relaxed);
}

/* The query log's held batch, committed before an API read (bounded: the control loop waits
 * at most NX_DAEMON_QLOG_COMMIT_WAIT_MS; a failing disk answers with what is committed). */
#define NX_DAEMON_QLOG_COMMIT_WAIT_MS 500
static void qlog_commit(void *ud)
{
	struct nx_daemon *d = ud;
	if (d->qlog && d->cur->c->logging_commit_interval) {
		nx_qlog_flush(d->qlog, 0, NX_DAEMON_QLOG_COMMIT_WAIT_MS);
	}
}

static struct nx_admin_hooks daemon_hooks(struct nx_daemon *d)
{
	return (struct nx_admin_hooks){
		.metrics_extra = metrics_extra,
		.ready = ready_hook,
		.conf = current_conf,
		.reload = reload_hook,
		.sources_status = sources_status,
		.refresh = refresh_hook,
		.pause = pause_hook,
		.paused_until = paused_until,
		.lookup = lookup_hook,
		.tls_creds = tls_creds,
		.boot_conf = boot_conf,
		.client_ptr = client_ptr,
		.client_ptr_named = client_ptr_named,
		.sync_status = nx_daemon_sync_status,
		.sync_now = nx_daemon_sync_now,
		.qlog_commit = qlog_commit,
		.ud = d,
	};
}

/* The control socket and the live stream's tap, once the daemon runs as its final user (the
 * socket file is its, and the control socket admits root and that uid). */
void nx_daemon_control_start(struct nx_daemon *d)
{
	struct nx_admin_hooks hooks = daemon_hooks(d);
	/* The live stream: the query-log writer hands each drained batch to the admin hub. */
	if (d->qlog && d->admin) {
		nx_qlog_set_tap(d->qlog, live_tap, d->admin);
	}
	control_start(d, &hooks);
}

/* The admin HTTP listener (it may bind a privileged port, so before the privilege drop). */
int nx_daemon_admin_start(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	struct nx_admin_hooks hooks = daemon_hooks(d);
	if (!c->admin_enabled) {
		return 0;
	}
	/* names for the API's rows; without it they are shown by address (said, not fatal) */
	if (nx_names_new(&d->loop, current_conf, d, &d->names) < 0) {
		nx_log(NX_LOG_WARN, "daemon", "client names from PTR lookups are off: out of memory");
		d->names = NULL;
	}
	int rc = nx_admin_start(&d->loop, &c->admin_listen, &hooks, &d->admin);
	if (rc < 0) {
		char hint[512];
		nx_privdrop_bind_hint(&c->admin_listen, rc, hint, sizeof(hint));
		nx_log(NX_LOG_ERR, "daemon", "cannot start the admin listener on %s: %s%s%s",
		       c->admin_listen.text, nx_strerror(rc), hint[0] ? ": " : "", hint);
		nx_names_close(d->names); /* its handles close with the loop's last run */
		d->names = NULL;
		return rc;
	}
	return 0;
}
void nx_daemon_admin_stop(struct nx_daemon *d)
{
	/* The tap must be gone before the hub it publishes into (set_tap waits for it). */
	if (d->qlog) {
		nx_qlog_set_tap(d->qlog, NULL, NULL);
	}
	/* before the admin server, whose families its /metrics borrows */
	nx_admin_control_stop(g_control);
	g_control = NULL;
	nx_admin_stop(d->admin);
	d->admin = NULL;
	nx_names_close(d->names); /* freed as its handles close */
	d->names = NULL;
}

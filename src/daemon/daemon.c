/*
 * Composition root: config -> workers -> control loop (signals, reload, admin) -> shutdown.
 */
#include "daemon/daemon.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "admin/admin.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"
#include "daemon/impl.h"
#include "daemon/notify.h"
#include "daemon/privdrop.h"
#include "sync/sync.h"
#include "filter/lists.h"
#include "net/sockopt.h"
#include "net/tls.h"
#include "cache/cache.h"
#include "upstream/bootstrap.h"
#include "upstream/upstream.h"

/* ---- config references ---- */

/*
 * The Debian system trust store as client credentials, shared by every DoT/DoH upstream without
 * pins in every config generation: it costs ~3.6 MiB (144 CAs), so it is made once, only when
 * such an upstream is configured, and kept until the daemon stops (control thread only).
 */
static struct nx_tls_creds *g_system_ca;

static struct nx_tls_creds *client_creds(const struct nx_conf_upstream *in)
{
	char err[256];
	struct nx_tls_creds *cr = NULL;
	if (in->n_pins > 0) {
		/* Pins alone decide (RFC 7469 style, as kdig +tls-pin): no CA store needed. */
		if (nx_tls_creds_client_new(false, (const uint8_t(*)[32])in->pins, in->n_pins, &cr,
					    err, sizeof(err)) < 0) {
			nx_log(NX_LOG_ERR, "upstream", "%s: %s", in->text, err);
			return NULL;
		}
		return cr;
	}
	if (!g_system_ca && nx_tls_creds_client_new(true, NULL, 0, &g_system_ca, err,
						     sizeof(err)) < 0) {
		nx_log(NX_LOG_ERR, "upstream", "system trust store: %s", err);
		g_system_ca = NULL;
		return NULL;
	}
	nx_tls_creds_ref(g_system_ca);
	return g_system_ca;
}

static const enum nx_up_transport transport_of[] = {
	[NX_CONF_UP_PLAIN] = NX_UP_T_PLAIN,
	[NX_CONF_UP_TCP] = NX_UP_T_TCP,
	[NX_CONF_UP_DOT] = NX_UP_T_DOT,
	[NX_CONF_UP_DOH] = NX_UP_T_DOH,
};

/*
 * The servers of a list into out (capacity n), each with its transport and, for DoT/DoH, its
 * client credentials (a reference the config generation holds); returns how many. A server
 * whose address is not known (bootstrap failed) or whose credentials cannot be made is left
 * out with an error in the log rather than asked some other way.
 */
static size_t fill_servers(const struct nx_conf_upstream *in, size_t n, struct nx_up_server *out)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const struct nx_conf_upstream *u = &in[i];
		struct nx_up_server *sv = &out[m];
		memset(sv, 0, sizeof(*sv));
		if (!u->resolved) {
			nx_log(NX_LOG_ERR, "upstream", "upstream %s has no address: not used", u->text);
			continue;
		}
		sv->ss = u->addr.ss;
		sv->len = u->addr.len;
		sv->stats = nx_up_stats_index(u->text);
		sv->transport = transport_of[u->kind];
		sv->auth_name = u->auth_name;
		sv->path = u->path;
		if (u->kind == NX_CONF_UP_DOH) {
			const char *host = u->host;
			char hbuf[128];
			if (!host) {
				/* addr.text is "addr:port" / "[v6]:port": the authority is its host part */
				snprintf(hbuf, sizeof(hbuf), "%s", u->addr.text);
				char *colon = strrchr(hbuf, ':');
				if (colon) {
					*colon = 0;
				}
				host = hbuf;
			}
			if (u->port == 443) {
				snprintf(sv->authority, sizeof(sv->authority), "%s", host);
			} else {
				snprintf(sv->authority, sizeof(sv->authority), "%s:%u", host, u->port);
			}
		}
		if (u->kind == NX_CONF_UP_DOT || u->kind == NX_CONF_UP_DOH) {
			sv->creds = client_creds(u);
			if (!sv->creds) {
				continue;
			}
		}
		m++;
	}
	return m;
}

static void servers_release(struct nx_up_server *sv, size_t n)
{
	for (size_t i = 0; sv && i < n; i++) {
		nx_tls_creds_unref(sv[i].creds);
	}
}

static void confref_free(struct nx_confref *r)
{
	if (!r) {
		return;
	}
	size_t nz = r->c ? r->c->n_zones : 0;
	if (r->zone_servers) {
		for (size_t i = 0; i < nz; i++) {
			servers_release(r->zone_servers[i], r->zone_n ? r->zone_n[i] : 0);
			nx_mem_free(NX_OWNER_config, r->zone_servers[i],
				    NX_MAX(1, r->c->zones[i].n_servers) * sizeof(struct nx_up_server));
		}
	}
	nx_mem_free(NX_OWNER_config, r->zone_servers, nz * sizeof(*r->zone_servers));
	nx_mem_free(NX_OWNER_config, r->zone_n, nz * sizeof(*r->zone_n));
	servers_release(r->servers, r->n_servers);
	nx_mem_free(NX_OWNER_config, r->servers,
		    r->servers ? NX_MAX(1, r->c->n_upstreams) * sizeof(*r->servers) : 0);
	nx_filter_rules_free(r->rules);
	nx_filter_side_free(r->user_side);
	nx_policy_badfilter_free(r->badfilter);
	nx_tls_creds_unref(r->creds);
	nx_conf_free(r->c);
	nx_mem_free(NX_OWNER_config, r, sizeof(*r));
}

/* Wrap a loaded config (taking ownership) with the tables the workers use; `prev` is the running
 * generation (NULL at start), whose certificate a reload keeps when the new one cannot load. */
static struct nx_confref *confref_new(struct nx_conf *c, uint64_t gen,
				      const struct nx_confref *prev)
{
	struct nx_confref *r = nx_mem_calloc(NX_OWNER_config, 1, sizeof(*r));
	if (!r) {
		nx_conf_free(c);
		return NULL;
	}
	r->c = c;
	r->gen = gen;
	atomic_init(&r->refs, 1);
	r->servers = nx_mem_calloc(NX_OWNER_config, NX_MAX(1, c->n_upstreams), sizeof(*r->servers));
	r->zone_servers = nx_mem_calloc(NX_OWNER_config, NX_MAX(1, c->n_zones),
					sizeof(*r->zone_servers));
	r->zone_n = nx_mem_calloc(NX_OWNER_config, NX_MAX(1, c->n_zones), sizeof(*r->zone_n));
	if (!r->servers || !r->zone_servers || !r->zone_n) {
		confref_free(r);
		return NULL;
	}
	r->n_servers = fill_servers(c->upstreams, c->n_upstreams, r->servers);
	if (nx_daemon_load_creds(c, prev ? prev->creds : NULL, &r->creds) < 0) {
		confref_free(r);
		return NULL;
	}
	if (nx_policy_rules_build(c, &r->rules) < 0 ||
	    nx_policy_user_side_build(c, &r->user_side) < 0 ||
	    nx_policy_badfilter_build(c, &r->badfilter) < 0) {
		confref_free(r);
		return NULL;
	}
	for (size_t i = 0; i < c->n_zones; i++) {
		r->zone_servers[i] = nx_mem_calloc(NX_OWNER_config, NX_MAX(1, c->zones[i].n_servers),
						   sizeof(struct nx_up_server));
		if (!r->zone_servers[i]) {
			confref_free(r);
			return NULL;
		}
		r->zone_n[i] = fill_servers(c->zones[i].servers, c->zones[i].n_servers,
					    r->zone_servers[i]);
	}
	return r;
}

void nx_confref_acquire(struct nx_confref *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void nx_confref_release(struct nx_confref *r)
{
	if (r && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
		confref_free(r);
	}
}

struct nx_confref *nx_daemon_current(struct nx_daemon *d)
{
	pthread_mutex_lock(&d->cref_lock);
	struct nx_confref *r = d->cur;
	nx_confref_acquire(r);
	pthread_mutex_unlock(&d->cref_lock);
	return r;
}

struct nx_snapref *nx_daemon_current_snap(struct nx_daemon *d)
{
	pthread_mutex_lock(&d->cref_lock);
	struct nx_snapref *r = d->lists.cur;
	nx_snapref_acquire(r);
	pthread_mutex_unlock(&d->cref_lock);
	return r;
}

/* Progress of a compile or build on the control loop: answer the admin requests that wait. */
static void sync_step(void *arg)
{
	struct nx_daemon *d = arg;
	nx_admin_service(d->admin);
	nx_notify_watchdog_tick(); /* a long compile holds the control loop: still alive */
}

/* Bring the lists up to date with the current config; publish a new snapshot generation when
 * it changed (workers drop the old one at their next wake-up). While it compiles and builds,
 * admin reads and /metrics are still answered (sync_step); admin changes answer 503. */
int nx_daemon_sync_lists(struct nx_daemon *d, unsigned flags)
{
	bool changed = false;
	pthread_mutex_lock(&d->cref_lock);
	/* the sync replaces lists.cur: hold the lock only around the swap, not the build */
	struct nx_snapref *before = d->lists.cur;
	nx_snapref_acquire(before);
	pthread_mutex_unlock(&d->cref_lock);
	struct nx_lists tmp = d->lists; /* build against a copy, swap under the lock */
	tmp.on_step = sync_step;
	tmp.step_arg = d;
	nx_admin_set_busy(d->admin, true);
	int rc = nx_lists_sync(&tmp, d->cur->c, flags, &changed);
	nx_admin_set_busy(d->admin, false);
	tmp.on_step = NULL;
	tmp.step_arg = NULL;
	pthread_mutex_lock(&d->cref_lock);
	d->lists = tmp;
	pthread_mutex_unlock(&d->cref_lock);
	nx_snapref_release(before);
	if (changed) {
		for (unsigned i = 0; i < d->n_workers; i++) {
			nx_worker_wake(&d->workers[i]);
		}
		malloc_trim(0);
	}
	return rc;
}

static void publish(struct nx_daemon *d, struct nx_confref *r)
{
	pthread_mutex_lock(&d->cref_lock);
	struct nx_confref *old = d->cur;
	d->cur = r;
	pthread_mutex_unlock(&d->cref_lock);
	nx_confref_release(old);
	for (unsigned i = 0; i < d->n_workers; i++) {
		nx_worker_wake(&d->workers[i]);
	}
}

static void apply_log_level(const struct nx_conf *c)
{
	enum nx_log_level lvl;
	if (nx_log_parse_level(c->log_level, &lvl) == 0) {
		nx_log_set_level(lvl);
	}
}

/*
 * Keys read only at start (schema apply "restart": the listeners, the worker count, the cache,
 * the admin listener, ...) keep their running value across a reload. Every such key the new
 * file changes is named in one warning, from the schema, so a new restart key needs no code
 * here.
 */
static void log_restart_keys(const struct nx_conf *old, const struct nx_conf *c)
{
	char keys[1024];
	size_t off = 0, n = 0;
	keys[0] = '\0';
	for (size_t i = 0; i < nx_conf_key_count(); i++) {
		struct nx_conf_key_info k;
		nx_conf_key_info(i, &k);
		if (k.apply != NX_CONF_APPLY_RESTART || nx_conf_key_equal(old, c, i)) {
			continue;
		}
		if (off < sizeof(keys)) {
			off += (size_t)snprintf(keys + off, sizeof(keys) - off, "%s%s", n ? ", " : "",
						k.path);
		}
		n++;
	}
	if (n > 0) {
		nx_log(NX_LOG_WARN, "daemon",
		       "reload: %s change%s take%s effect after a restart (the running value%s "
		       "stay%s)", keys, n == 1 ? "" : "s", n == 1 ? "s" : "", n == 1 ? "" : "s",
		       n == 1 ? "s" : "");
	}
}

/*
 * A reload may change the admin password (`nxdns passwd`, the API's password change) but never
 * remove it: a config rewrite that lost admin.password_hash (a hand edit gone wrong, an old
 * copy restored) would otherwise open setup mode, whose token is in the log, to anyone who can
 * reach the admin listener. Removing the password on purpose takes a restart, an act only
 * someone who controls the service can do; a forgotten password is replaced with
 * `nxdns passwd` and a reload, no removal needed.
 */
static int check_credentials_kept(const struct nx_conf *o, const struct nx_conf *c, char *err,
				  size_t errlen)
{
	if (o->admin_password_hash && !c->admin_password_hash) {
		snprintf(err, errlen,
			 "%s: admin.password_hash is gone while the running config has one; a "
			 "reload never removes the admin password (set a new one with `nxdns "
			 "passwd`, or restart to remove it on purpose)",
			 c->path);
		return NX_ECONFIG;
	}
	/* The second factor likewise: only an explicit "off" (DELETE /api/auth/totp) ends it. */
	if (o->admin_totp_secret && !c->admin_totp_secret && !c->admin_totp_off) {
		snprintf(err, errlen,
			 "%s: admin.totp_secret is gone while the running config has one; a "
			 "reload removes the second factor only when the file says `off` "
			 "(DELETE /api/auth/totp writes it)",
			 c->path);
		return NX_ECONFIG;
	}
	return 0;
}

/* Create the rate-limit table when c turns the limit on and there is none yet (start and
 * every reload, on the control thread). 0 or -ENOMEM (logged; queries then pass unlimited). */
static int guard_prepare(struct nx_daemon *d, const struct nx_conf *c)
{
	if (c->rl_qps == 0 || atomic_load_explicit(&d->rate_limit, memory_order_relaxed)) {
		return 0;
	}
	struct nx_guard_rl *t;
	uint64_t seed = ((uint64_t)nx_rand_u32() << 32) | nx_rand_u32();
	int rc = nx_guard_rl_new(seed, &t);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "guard", "cannot create the rate-limit table: %s; queries are "
		       "not rate limited", nx_strerror(rc));
		return rc;
	}
	/* release: a worker that sees the pointer sees the zeroed table */
	atomic_store_explicit(&d->rate_limit, t, memory_order_release);
	return 0;
}

/* SIGHUP and the API's settings changes: load, validate, publish; a bad file changes nothing. */
int nx_daemon_reload(struct nx_daemon *d, char *err, size_t errlen)
{
	struct nx_conf *c = NULL;
	int rc = nx_conf_load(d->config_path, &c, err, errlen);
	if (rc == 0) {
		rc = check_credentials_kept(d->cur->c, c, err, errlen);
	}
	if (rc < 0 && c) {
		nx_conf_free(c);
		c = NULL;
	}
	if (rc == 0) {
		rc = nx_up_bootstrap_resolve(c, c->timeout_ms, err, errlen);
		if (rc < 0) {
			nx_conf_free(c);
			c = NULL;
		}
	}
	if (rc < 0) {
		nx_stat_inc(NX_STAT_RELOADS_FAILED);
		nx_log(NX_LOG_ERR, "daemon", "reload failed, keeping the running config: %s", err);
		return rc;
	}
	log_restart_keys(d->boot->c, c); /* what runs is what the process started with */
	struct nx_confref *r = confref_new(c, ++d->gen, d->cur);
	if (!r) {
		nx_stat_inc(NX_STAT_RELOADS_FAILED);
		nx_log(NX_LOG_ERR, "daemon", "reload failed: out of memory");
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	apply_log_level(c);
	guard_prepare(d, c);
	nx_daemon_dnstap_reconfigure(d, c); /* before the workers take r */
	publish(d, r);
	nx_admin_tls_reload(d->admin);
	nx_daemon_qlog_reconfigure(d);
	nx_sync_reconfigure(d->sync);
	nx_daemon_sync_lists(d, 0);
	nx_stat_inc(NX_STAT_RELOADS_OK);
	malloc_trim(0);
	nx_log(NX_LOG_INFO, "daemon", "reload: configuration generation %llu in effect",
	       (unsigned long long)r->gen);
	return 0;
}

/* ---- memory hygiene ---- */

/*
 * glibc keeps freed heap after a transient peak (a reload, a burst) and hands each thread an
 * arena of its own. We cap the arenas (workers allocate little and rarely) and give retained
 * free memory back to the OS on a timer and after every reload, so the idle floor follows the
 * live set rather than the biggest peak.
 */
#define NX_ARENA_MAX 2
#define NX_TRIM_INTERVAL_MS 30000

static void on_trim(uv_timer_t *t)
{
	malloc_trim(0);
}

/* ---- control loop ---- */

static void on_signal(uv_signal_t *s, int signum)
{
	struct nx_daemon *d = s->data;
	if (signum == SIGHUP) {
		char err[NX_CONF_ERR_MAX];
		nx_notify_reloading();
		int rc = nx_daemon_reload(d, err, sizeof(err));
		/* the reload is over either way; a failed one keeps serving the running config */
		nx_notify_ready(rc == 0 ? "serving (reloaded)" : "serving (reload failed, see log)");
		return;
	}
	if (signum == SIGUSR1) {
		/* Forced refresh: download every URL source, recompile every source and rebuild
		 * the snapshot even if nothing changed (operators, and the memory benchmark). */
		nx_log(NX_LOG_INFO, "filter", "SIGUSR1: forced refresh of every source");
		nx_refresh_now(d, -1, NX_LISTS_FORCE);
		return;
	}
	nx_log(NX_LOG_INFO, "daemon", "signal %d: shutting down", signum);
	nx_notify_stopping();
	uv_stop(&d->loop);
}

static int start_cache(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	if (c->cache_size == 0) {
		return 0;
	}
	struct nx_cache_params p;
	nx_cache_params_default(&p);
	p.size = c->cache_size;
	p.min_ttl = c->cache_min_ttl;
	p.max_ttl = c->cache_max_ttl;
	p.neg_max_ttl = c->cache_neg_max_ttl;
	p.stale_window = c->cache_serve_stale ? NX_CACHE_STALE_WINDOW_DEFAULT : 0;
	p.prefetch_min_hits = c->cache_prefetch ? NX_CACHE_PREFETCH_HITS_DEFAULT : 0;
	p.hash_seed = ((uint64_t)nx_rand_u32() << 32) | nx_rand_u32();
	int rc = nx_cache_new(&p, &d->cache);
	if (rc < 0) {
		nx_log(NX_LOG_ERR, "daemon", "cannot create the DNS cache: %s", nx_strerror(rc));
	}
	return rc;
}

int nx_daemon_admin_start(struct nx_daemon *d);
void nx_daemon_admin_stop(struct nx_daemon *d);

/*
 * Descriptors: a worker holds a random-port UDP socket per 4 upstream exchanges in flight (up
 * to 512 per server), stream connections up to listener.dns_max_connections per listener, and
 * upstream TCP/DoT/DoH connections; 1024, the usual soft limit, is too few under load. Take the
 * hard limit (systemd's default is 512K), as Unbound does; failing that, keep what there is.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
			nx_log(NX_LOG_WARN, "daemon", "cannot raise the open files limit: %s",
			       strerror(errno));
		}
	}
}

static void on_close_noop(uv_handle_t *h)
{
}

static void on_watchdog(uv_timer_t *t)
{
	nx_notify_watchdog_tick();
}

/* The first boot's list load, per source: how far it is, in the log and the service status
 * (the admin's /healthz says "loading" meanwhile). */
static void on_boot_progress(void *arg, unsigned i, unsigned n, const char *name)
{
	static uint64_t t0;
	if (t0 == 0) {
		t0 = nx_now_mono_ms();
	}
	unsigned long long ms = (unsigned long long)(nx_now_mono_ms() - t0);
	/* /metrics: where the load is (the admin answers during it; DNS does not) */
	int64_t step = (int64_t)i + 1, steps = (int64_t)n + 1;
	nx_gauge_add(NX_GAUGE_LISTS_LOAD_STEP, step - nx_gauge_read(NX_GAUGE_LISTS_LOAD_STEP));
	nx_gauge_add(NX_GAUGE_LISTS_LOAD_STEPS, steps - nx_gauge_read(NX_GAUGE_LISTS_LOAD_STEPS));
	if (name) {
		nx_log(NX_LOG_INFO, "filter", "loading lists: source %u of %u (%s), %llu ms so far",
		       i + 1, n, name, ms);
		nx_notify_status("loading lists: source %u of %u (%s)", i + 1, n, name);
	} else {
		nx_log(NX_LOG_INFO, "filter", "loading lists: building the snapshot of %u sources, "
		       "%llu ms so far", n, ms);
		nx_notify_status("loading lists: building the snapshot of %u sources", n);
	}
}

/* Every listener address must be free before any worker opens its sockets, so a start that
 * cannot bind says which address, why, and how to fix it. */
static int probe_listeners(const struct nx_conf *lc)
{
	for (size_t i = 0; i < lc->n_listen_dns + lc->n_listen_dot + lc->n_listen_doh; i++) {
		const struct nx_addr *a = i < lc->n_listen_dns ? &lc->listen_dns[i]
				       : i < lc->n_listen_dns + lc->n_listen_dot
					   ? &lc->listen_dot[i - lc->n_listen_dns]
					   : &lc->listen_doh[i - lc->n_listen_dns - lc->n_listen_dot];
		int prc = nx_sock_probe_free(a);
		if (prc < 0) {
			char hint[512];
			nx_privdrop_bind_hint(a, prc, hint, sizeof(hint));
			nx_log(NX_LOG_ERR, "daemon", "cannot listen on %s: %s%s%s", a->text,
			       nx_strerror(prc), hint[0] ? ": " : "", hint);
			return prc;
		}
	}
	return 0;
}

int nx_daemon_run(const char *config_path)
{
	int exit_code = 1;
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	int rc = nx_conf_load(config_path, &c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	apply_log_level(c);
	if (nx_rand_init() < 0) {
		nx_log(NX_LOG_ERR, "daemon", "cannot initialise the random generator");
		nx_conf_free(c);
		return 1;
	}
	/* Host-named DoT/DoH upstreams: resolved once through upstream.bootstrap, before any
	 * listener starts; a name that cannot be resolved is a configuration error. */
	if (nx_up_bootstrap_resolve(c, c->timeout_ms, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		nx_conf_free(c);
		return 2;
	}
	struct nx_privdrop priv;
	if (nx_privdrop_plan(c, &priv, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		nx_conf_free(c);
		return 2;
	}
	nx_notify_init();
	signal(SIGPIPE, SIG_IGN);
	/* Until the control loop's handlers are installed (after the first list load, which may
	 * take minutes on a Pi while the admin already answers), a reload or refresh signal has
	 * nothing to act on yet and must not kill the daemon by the default action. */
	signal(SIGHUP, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	mallopt(M_ARENA_MAX, NX_ARENA_MAX);
	raise_fd_limit();

	struct nx_daemon *d = nx_mem_calloc(NX_OWNER_misc, 1, sizeof(*d));
	if (!d) {
		nx_conf_free(c);
		return 1;
	}
	d->config_path = config_path;
	pthread_mutex_init(&d->cref_lock, NULL);
	for (int i = 0; i < NX_COALESCE_SHARDS; i++) {
		pthread_mutex_init(&d->coalesce[i].lock, NULL);
	}
	uv_loop_init(&d->loop);
	nx_stats_thread_register();
	d->cur = confref_new(c, ++d->gen, NULL);
	if (!d->cur) {
		goto out_loop;
	}
	nx_confref_acquire(d->cur);
	d->boot = d->cur;
	if (d->cur->c->n_listen_dns > NX_MAX_LISTENERS || d->cur->c->n_listen_dot > NX_MAX_LISTENERS ||
	    d->cur->c->n_listen_doh > NX_MAX_LISTENERS) {
		nx_log(NX_LOG_ERR, "daemon", "at most %d listener.dns, .dot and .doh addresses each",
		       NX_MAX_LISTENERS);
		exit_code = 2;
		goto out_cref;
	}

	if (start_cache(d) < 0) {
		goto out_cref;
	}
	guard_prepare(d, d->cur->c);
	/*
	 * Start-up order. As root: bind every socket (DNS listeners, admin), give the service
	 * user its files, switch to it with no capability left; only then start threads (the
	 * query-log writer) and write files (lists, snapshot, control socket). Listeners never
	 * answer before the first snapshot (or an empty one) is in place: the workers start
	 * after the load, while the admin already answers (/healthz "loading"). Boot uses the
	 * bodies on disk; it waits on the network only for URL sources that have none (a first
	 * boot), bounded by filter.first_boot_timeout (refresh.c nx_refresh_first_boot).
	 */
	nx_lists_init(&d->lists, d->cur->c->state_dir);
	unsigned nw = d->cur->c->workers;
	d->workers = nx_mem_calloc(NX_OWNER_misc, nw, sizeof(*d->workers));
	if (!d->workers) {
		goto out_cref;
	}
	d->n_workers = nw;
	const struct nx_conf *lc = d->cur->c;
	if (probe_listeners(lc) < 0) {
		goto out_workers;
	}
	for (unsigned i = 0; i < nw; i++) {
		if (nx_worker_init(&d->workers[i], d, i) < 0) {
			goto out_workers;
		}
	}
	if (nx_daemon_admin_start(d) < 0) {
		goto out_workers;
	}
	if (nx_privdrop_fix_ownership(&priv, lc, config_path) < 0 || nx_privdrop_apply(&priv) < 0) {
		goto out_admin;
	}
	nx_daemon_qlog_start(d);
	nx_daemon_dnstap_start(d); /* a thread: after the drop, credentials are per thread */
	nx_daemon_pgsink_start(d); /* likewise */
	for (unsigned i = 0; i < nw; i++) {
		d->workers[i].qlog = d->qlog; /* not running yet: a plain store */
		nx_daemon_dnstap_worker(&d->workers[i]);
		d->workers[i].pgsink = d->pgsink;
	}
	nx_daemon_control_start(d);
	/* the watchdog from here: a first boot's downloads run the loop for up to a minute */
	uv_timer_init(&d->loop, &d->watchdog);
	if (nx_notify_watchdog_usec() > 0) {
		uint64_t every = NX_MAX(nx_notify_watchdog_usec() / 4000, 1);
		uv_timer_start(&d->watchdog, on_watchdog, every, every);
	}
	uv_unref((uv_handle_t *)&d->watchdog);
	d->lists.on_progress = on_boot_progress;
	nx_notify_status("loading lists");
	nx_gauge_add(NX_GAUGE_LISTS_LOADING, 1);
	uint64_t load_t0 = nx_now_mono_ms();
	nx_refresh_first_boot(d);
	if (nx_daemon_sync_lists(d, 0) < 0 && d->cur->c->n_sources > 0 && !d->lists.cur->snap) {
		nx_log(NX_LOG_WARN, "filter", "no blocklist snapshot: serving without list filtering");
	}
	nx_gauge_add(NX_GAUGE_LISTS_LOADING, -1);
	d->lists.on_progress = NULL;
	if (d->cur->c->n_sources > 0) {
		nx_log(NX_LOG_INFO, "filter", "lists loaded in %llu ms: %llu entries",
		       (unsigned long long)(nx_now_mono_ms() - load_t0),
		       (unsigned long long)d->lists.entries);
	}
	unsigned started = 0;
	for (; started < nw; started++) {
		if (nx_worker_start(&d->workers[started]) < 0) {
			nx_log(NX_LOG_ERR, "daemon", "cannot start worker thread %u", started);
			break;
		}
	}
	if (started == nw) {
		uv_signal_init(&d->loop, &d->sig_hup);
		uv_signal_init(&d->loop, &d->sig_term);
		uv_signal_init(&d->loop, &d->sig_int);
		uv_signal_init(&d->loop, &d->sig_usr1);
		d->sig_usr1.data = d;
		uv_signal_start(&d->sig_usr1, on_signal, SIGUSR1);
		d->sig_hup.data = d->sig_term.data = d->sig_int.data = d;
		uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
		uv_signal_start(&d->sig_term, on_signal, SIGTERM);
		uv_signal_start(&d->sig_int, on_signal, SIGINT);
		if (nx_refresh_start(d) < 0) {
			nx_log(NX_LOG_WARN, "filter", "scheduled list refresh unavailable");
		}
		if (nx_daemon_sync_start(d) < 0) {
			nx_log(NX_LOG_WARN, "sync", "cannot follow sync.primary (out of memory)");
		}
		uv_timer_init(&d->loop, &d->trim);
		uv_timer_start(&d->trim, on_trim, NX_TRIM_INTERVAL_MS, NX_TRIM_INTERVAL_MS);
		uv_unref((uv_handle_t *)&d->trim);

		char addrs[512] = "";
		size_t off = 0;
		for (size_t i = 0; i < d->cur->c->n_listen_dns && off < sizeof(addrs); i++) {
			off += (size_t)snprintf(addrs + off, sizeof(addrs) - off, "%s%s",
						i ? " " : "", d->cur->c->listen_dns[i].text);
		}
		nx_log(NX_LOG_INFO, "daemon", "serving DNS on %s (udp+tcp), %u workers, %zu upstreams",
		       addrs, nw, d->cur->n_servers);
		atomic_store(&d->serving, true);
		nx_notify_ready("serving");
		for (size_t i = 0; i < lc->n_listen_dot; i++) {
			nx_log(NX_LOG_INFO, "daemon", "serving DNS-over-TLS on %s",
			       lc->listen_dot[i].text);
		}
		for (size_t i = 0; i < lc->n_listen_doh; i++) {
			nx_log(NX_LOG_INFO, "daemon", "serving DNS-over-HTTPS on https://%s/dns-query",
			       lc->listen_doh[i].text);
		}
		uv_run(&d->loop, UV_RUN_DEFAULT);
		exit_code = 0;
		uv_close((uv_handle_t *)&d->sig_hup, on_close_noop);
		uv_close((uv_handle_t *)&d->sig_term, on_close_noop);
		uv_close((uv_handle_t *)&d->sig_int, on_close_noop);
		uv_close((uv_handle_t *)&d->sig_usr1, on_close_noop);
		uv_close((uv_handle_t *)&d->trim, on_close_noop);
		nx_refresh_stop(d);
		nx_daemon_sync_stop(d);
	}
	uv_close((uv_handle_t *)&d->watchdog, on_close_noop);
	if (started > 0) {
		uv_barrier_init(&d->stop_barrier, started);
	}
	for (unsigned i = 0; i < started; i++) {
		atomic_store(&d->workers[i].stopping, true);
		nx_worker_wake(&d->workers[i]);
	}
	for (unsigned i = 0; i < started; i++) {
		nx_worker_join(&d->workers[i]);
	}
	if (started > 0) {
		uv_barrier_destroy(&d->stop_barrier);
	}
out_admin:
	nx_daemon_admin_stop(d);
out_workers:
	/* after the workers: they push into the query log until they stop */
	nx_daemon_qlog_stop(d);
	nx_daemon_dnstap_stop(d);
	nx_daemon_pgsink_stop(d);
	for (unsigned i = 0; i < d->n_workers; i++) {
		nx_worker_deinit(&d->workers[i]);
	}
	nx_mem_free(NX_OWNER_misc, d->workers, d->n_workers * sizeof(*d->workers));
out_cref:
	nx_daemon_dnstap_stop(d); /* a no-op after out_workers; here when the workers' array failed */
	nx_daemon_pgsink_stop(d);
	nx_lists_deinit(&d->lists);
	/* the control thread is main: its PCRE2 block (admin /api/lookup) is returned here, not
	 * by a thread-exit destructor */
	nx_filter_lists_thread_done();
	nx_cache_free(d->cache);
	nx_guard_rl_free(atomic_load(&d->rate_limit));
	nx_confref_release(d->cur);
	nx_confref_release(d->boot);
out_loop:
	nx_tls_creds_unref(g_system_ca);
	g_system_ca = NULL;
	uv_run(&d->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&d->loop) < 0) {
		nx_log(NX_LOG_WARN, "daemon", "control loop has open handles at exit");
	}
	pthread_mutex_destroy(&d->cref_lock);
	for (int i = 0; i < NX_COALESCE_SHARDS; i++) {
		pthread_mutex_destroy(&d->coalesce[i].lock);
	}
	nx_mem_free(NX_OWNER_misc, d, sizeof(*d));
	nx_notify_deinit();
	if (exit_code == 0) {
		nx_log(NX_LOG_INFO, "daemon", "stopped");
	}
	return exit_code;
}

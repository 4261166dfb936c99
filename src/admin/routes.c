/*
 * The admin route table: one row per route: {method, path, EXACT|PREFIX, auth, handler}.
 * First match wins (an EXACT row before the PREFIX row it would shadow); a path that matches
 * with another method answers 405 with Allow.
 */
#include "admin/impl.h"
#include "admin/static.h"

const struct nx_admin_route nx_admin_routes[] = {
    {"GET", "/metrics", NX_ADMIN_EXACT, NX_ADMIN_AUTH_METRICS, nx_admin_handle_metrics},
    {"GET", "/healthz", NX_ADMIN_EXACT, NX_ADMIN_AUTH_METRICS, nx_admin_handle_healthz},
    {"GET", "/api/auth/status", NX_ADMIN_EXACT, NX_ADMIN_AUTH_NONE, nx_admin_handle_auth_status},
    {"POST", "/api/auth/login", NX_ADMIN_EXACT, NX_ADMIN_AUTH_NONE, nx_admin_handle_login},
    {"POST", "/api/auth/setup", NX_ADMIN_EXACT, NX_ADMIN_AUTH_NONE, nx_admin_handle_setup},
    {"POST", "/api/auth/logout", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_logout},
    {"GET", "/api/auth/tokens", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_tokens_list},
    {"POST", "/api/auth/tokens", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_tokens_create},
    {"DELETE", "/api/auth/tokens/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_tokens_delete},
    /* the TOTP second factor (auth.c) */
    {"POST", "/api/auth/totp", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_totp_enrol},
    {"POST", "/api/auth/totp/confirm", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_totp_confirm},
    {"DELETE", "/api/auth/totp", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_totp_remove},
    /* backup archives (api_backup.c); the restore's body is streamed to a file (http.c) */
    {"GET", "/api/backup", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_backup},
    {"POST", NX_ADMIN_UPLOAD_PATH, NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_restore},
    {"GET", "/api/settings", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_settings_get},
    {"PUT", "/api/settings", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_settings_put},
    {"GET", "/api/schema", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_schema},
    {"GET", "/api/memory", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_memory},
    /* statistics and the query log (api_stats.c), the live stream (live.c) */
    {"GET", "/api/stats/summary", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_stats_summary},
    {"GET", "/api/stats/history", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_stats_history},
    {"GET", "/api/stats/top", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_stats_top},
    {"GET", "/api/queries", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_queries},
    {"GET", "/api/queries/live", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_live},
    /* filtering (api_filter.c) */
    {"GET", "/api/filter/sources", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_sources_get},
    {"POST", "/api/filter/sources", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_sources_add},
    {"POST", "/api/filter/sources/refresh", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_sources_refresh_all},
    {"POST", "/api/filter/sources/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_sources_post},
    {"PUT", "/api/filter/sources/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_sources_edit},
    {"DELETE", "/api/filter/sources/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_sources_delete},
    {"GET", "/api/filter/rules", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_rules_get},
    {"POST", "/api/filter/rules", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_rules_add},
    {"DELETE", "/api/filter/rules", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_rules_delete},
    {"DELETE", "/api/filter/rules/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_rules_delete},
    {"GET", "/api/filter/pause", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_pause_get},
    {"POST", "/api/filter/pause", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_pause_set},
    {"GET", "/api/lookup", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_lookup},
    /* groups, clients, local records (api_config.c) */
    {"GET", "/api/groups", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_groups_get},
    {"POST", "/api/groups", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_groups_add},
    {"PUT", "/api/groups/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF, nx_admin_handle_groups_edit},
    {"DELETE", "/api/groups/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF, nx_admin_handle_groups_delete},
    {"GET", "/api/clients", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_clients_get},
    {"POST", "/api/clients", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_clients_add},
    {"PUT", "/api/clients/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF, nx_admin_handle_clients_edit},
    {"DELETE", "/api/clients/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_clients_delete},
    {"GET", "/api/local-records", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_locals_get},
    {"POST", "/api/local-records", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_locals_add},
    {"DELETE", "/api/local-records", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_locals_delete},
    {"DELETE", "/api/local-records/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF,
     nx_admin_handle_locals_delete},
    /* Apple configuration profiles for the encrypted DNS listeners (mobileconfig.c) */
    {"GET", "/api/apple/doh.mobileconfig", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_apple_doh},
    {"GET", "/api/apple/dot.mobileconfig", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_apple_dot},
    /* following a primary (api_sync.c): the export a replica pulls, its status and pull,
     * and the primary's list of the replicas it served */
    {"GET", "/api/sync/export", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_sync_export},
    {"GET", "/api/sync/status", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_sync_status},
    {"POST", "/api/sync/now", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_sync_now},
    {"GET", "/api/sync/replicas", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION,
     nx_admin_handle_sync_replicas},
    /* the web admin's embedded files (static.c); open: they hold no data, the API guards it.
     * No "/" prefix row: unknown paths, /api/ ones above all, stay 404 JSON. */
    {"GET", "/", NX_ADMIN_EXACT, NX_ADMIN_AUTH_NONE, nx_admin_handle_static},
    {"GET", "/assets/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_NONE, nx_admin_handle_static},
    /* edits in one request (api_filter.c) */
    {"PUT", "/api/filter/rules", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_rules_edit},
    {"PUT", "/api/local-records", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_locals_edit},
};
const size_t nx_admin_n_routes = sizeof(nx_admin_routes) / sizeof(nx_admin_routes[0]);

int nx_admin_handle_healthz(struct nx_admin_req *req)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	if (h->ready && !h->ready(h->ud)) {
		return nx_admin_reply(req, 503, "text/plain; charset=utf-8", "loading\n", 8);
	}
	return nx_admin_reply(req, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

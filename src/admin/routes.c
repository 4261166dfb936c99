/*
 * The admin route table: one row per route. Later issues add their /api/ handlers here, e.g.
 *     {"GET", "/api/stats/summary", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_api_summary},
 *     {"POST", "/api/filter/sources/", NX_ADMIN_PREFIX, NX_ADMIN_AUTH_CSRF, nx_admin_api_src},
 * First match wins; a path that matches with another method answers 405 with Allow.
 */
#include "admin/impl.h"

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
    {"GET", "/api/settings", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_settings_get},
    {"PUT", "/api/settings", NX_ADMIN_EXACT, NX_ADMIN_AUTH_CSRF, nx_admin_handle_settings_put},
    {"GET", "/api/memory", NX_ADMIN_EXACT, NX_ADMIN_AUTH_SESSION, nx_admin_handle_memory},
};
const size_t nx_admin_n_routes = sizeof(nx_admin_routes) / sizeof(nx_admin_routes[0]);

int nx_admin_handle_healthz(struct nx_admin_req *req)
{
	const struct nx_admin_hooks *h = &req->admin->hooks;
	if (h->ready && !h->ready(h->ud)) {
		return nx_admin_reply(req, 503, "text/plain; charset=utf-8", "starting\n", 9);
	}
	return nx_admin_reply(req, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

/*
 * Admin authentication against a real server on loopback (fixture.h): every protected route
 * refuses anonymous requests, login with cookie attributes, wrong passwords and the per-address
 * limit, CSRF on state changes, logout, session expiry on an injected clock, API tokens from
 * creation to revocation, the first-run setup token, password changes ending sessions, the
 * session table's eviction and metrics_auth.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"

static char config[4096];

static const char *base_config(const char *extra_admin)
{
	snprintf(config, sizeof(config),
		 "# a test config\n"
		 "admin:\n"
		 "%s%s"
		 "upstream:\n"
		 "  timeout_ms: 2000  # ms\n",
		 fx_admin_lines(), extra_admin ? extra_admin : "");
	return config;
}

static int setup(void **state)
{
	*state = fx_start(base_config(NULL));
	return 0;
}

static int teardown(void **state)
{
	fx_stop(*state);
	return 0;
}

/* ---- anonymous ---- */

static void protected_routes_refuse_anonymous(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	size_t checked = 0;
	for (size_t i = 0; i < nx_admin_n_routes; i++) {
		const struct nx_admin_route *rt = &nx_admin_routes[i];
		if (rt->auth != NX_ADMIN_AUTH_SESSION && rt->auth != NX_ADMIN_AUTH_CSRF) {
			continue;
		}
		char path[128];
		snprintf(path, sizeof(path), "%s%s", rt->path,
			 rt->match == NX_ADMIN_PREFIX ? "x" : "");
		fx_http(f, &r, rt->method, path, NULL, strcmp(rt->method, "GET") ? "{}" : NULL);
		if (r.status != 401) {
			fail_msg("%s %s answered %d without credentials", rt->method, path,
				 r.status);
		}
		fx_expect(&r, 401, "unauthorized");
		fx_resp_free(&r);
		/* a session cookie nobody issued, a token nobody made */
		fx_http(f, &r, rt->method, path,
			"Cookie: nxdns_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n",
			NULL);
		fx_expect(&r, 401, "unauthorized");
		fx_resp_free(&r);
		fx_http(f, &r, rt->method, path, "Authorization: Bearer nxdns_nope\r\n", NULL);
		fx_expect(&r, 401, "unauthorized");
		fx_resp_free(&r);
		fx_http(f, &r, rt->method, path, "Authorization: Basic YTpi\r\n", NULL);
		fx_expect(&r, 401, "unauthorized");
		fx_resp_free(&r);
		checked++;
	}
	assert_true(checked >= 7);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_AUTH_NONE], checked);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_AUTH_BAD_SESSION], checked);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_AUTH_BAD_TOKEN], 2 * checked);

	/* metrics_auth is false: /metrics and /healthz are open */
	fx_http(f, &r, "GET", "/metrics", NULL, NULL);
	fx_expect(&r, 200, NULL);
	assert_non_null(strstr(r.body, "\nnxdns_admin_auth_refused_total{reason=\"bad_token\"} "));
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/healthz", NULL, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/auth/status", NULL, NULL);
	fx_expect(&r, 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "authenticated")));
	assert_false(json_is_true(json_object_get(r.json, "setup_required")));
	assert_null(json_object_get(r.json, "csrf"));
	fx_resp_free(&r);
}

/* ---- login ---- */

static void login_sets_a_strict_cookie(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"" FX_PASSWORD "\"}");
	fx_expect(&r, 200, NULL);
	const char *csrf = fx_str(&r, "csrf");
	assert_non_null(csrf);
	assert_int_equal(strlen(csrf), 43);
	assert_int_equal(json_integer_value(json_object_get(r.json, "expires_in")), 3600);
	char v[256];
	assert_non_null(fx_header(&r, "Set-Cookie", v, sizeof(v)));
	assert_true(strncmp(v, "nxdns_session=", 14) == 0);
	assert_int_equal(strcspn(v + 14, ";"), 43);
	assert_non_null(strstr(v, "; HttpOnly"));
	assert_non_null(strstr(v, "; SameSite=Strict"));
	assert_non_null(strstr(v, "; Path=/"));
	assert_non_null(strstr(v, "; Max-Age=3600"));
	assert_null(strstr(v, "Secure")); /* plain HTTP */
	char cookie[160], want_csrf[64];
	snprintf(cookie, sizeof(cookie), "Cookie: other=1; %.*s\r\n", (int)strcspn(v, ";"), v);
	snprintf(want_csrf, sizeof(want_csrf), "%s", csrf);
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_LOGIN_OK], 1);

	fx_http(f, &r, "GET", "/api/memory", cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	/* a reloaded page gets its CSRF token back */
	fx_http(f, &r, "GET", "/api/auth/status", cookie, NULL);
	fx_expect(&r, 200, NULL);
	assert_true(json_is_true(json_object_get(r.json, "authenticated")));
	assert_string_equal(fx_str(&r, "csrf"), want_csrf);
	fx_resp_free(&r);
}

static void login_refusals(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"wrong password\"}");
	fx_expect(&r, 401, "invalid_password");
	assert_null(fx_header(&r, "Set-Cookie", (char[8]){0}, 8));
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_LOGIN_FAILED], 1);

	/* bad bodies: 400 with the field, not counted as failed logins */
	static const struct {
		const char *body, *field;
	} bad[] = {
	    {NULL, NULL},
	    {"{\"password\": 5}", "password"},
	    {"{\"pw\": \"x\"}", "pw"},
	    {"{}", "password"},
	    {"[\"x\"]", NULL},
	    {"{\"password\": \"x\"", NULL},
	    {"{\"password\": \"a\", \"password\": \"b\"}", NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fx_http(f, &r, "POST", "/api/auth/login", NULL, bad[i].body);
		fx_expect(&r, 400, "bad_request");
		assert_non_null(fx_str(&r, "message"));
		if (bad[i].field) {
			assert_string_equal(fx_str(&r, "field"), bad[i].field);
		} else {
			assert_null(json_object_get(r.json, "field"));
		}
		fx_resp_free(&r);
	}
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_LOGIN_FAILED], 1);
	/* setup is for the first run only */
	fx_http(f, &r, "POST", "/api/auth/setup", NULL,
		"{\"token\": \"x\", \"password\": \"another password\"}");
	fx_expect(&r, 409, "already_set");
	fx_resp_free(&r);
}

static void login_rate_limit(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	char v[32];
	for (int i = 0; i < NX_ADMIN_LOGIN_FAILS; i++) {
		f->now += 1000;
		fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"guess\"}");
		fx_expect(&r, 401, "invalid_password");
		fx_resp_free(&r);
	}
	/* over the limit: even the right password gets 429 until the window has passed */
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"" FX_PASSWORD "\"}");
	fx_expect(&r, 429, "rate_limited");
	assert_string_equal(fx_header(&r, "Retry-After", v, sizeof(v)), "56");
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/setup", NULL, "{\"token\": \"x\", \"password\": \"y\"}");
	fx_expect(&r, 429, "rate_limited");
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_LOGIN_FAILED], NX_ADMIN_LOGIN_FAILS);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_LOGIN_LIMITED], 2);

	f->now = 1001000 + NX_ADMIN_LOGIN_WINDOW_MS - 1; /* first failure + window - 1 ms */
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"" FX_PASSWORD "\"}");
	fx_expect(&r, 429, "rate_limited");
	assert_string_equal(fx_header(&r, "Retry-After", v, sizeof(v)), "1");
	fx_resp_free(&r);
	f->now += 1;
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"" FX_PASSWORD "\"}");
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);

	/* both figures are in /metrics */
	fx_http(f, &r, "GET", "/metrics", NULL, NULL);
	fx_expect(&r, 200, NULL);
	char want[96];
	snprintf(want, sizeof(want), "\nnxdns_admin_login_failures_total %d\n",
		 NX_ADMIN_LOGIN_FAILS);
	assert_non_null(strstr(r.body, want));
	assert_non_null(strstr(r.body, "\nnxdns_admin_login_rate_limited_total 3\n"));
	fx_resp_free(&r);

	/* a success cleared the address: five more failures are allowed again */
	for (int i = 0; i < NX_ADMIN_LOGIN_FAILS; i++) {
		fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"guess\"}");
		fx_expect(&r, 401, "invalid_password");
		fx_resp_free(&r);
	}
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"guess\"}");
	fx_expect(&r, 429, "rate_limited");
	fx_resp_free(&r);
}

/* ---- CSRF, logout, expiry ---- */

static void csrf_on_state_changes(void **state)
{
	struct fx *f = *state;
	struct fx_session s;
	fx_login(f, &s);
	struct fx_resp r;
	const char *body = "{\"key\": \"cache.size\", \"value\": 500}";
	fx_http(f, &r, "PUT", "/api/settings", s.cookie, body);
	fx_expect(&r, 403, "csrf_required");
	fx_resp_free(&r);
	char wrong[400];
	snprintf(wrong, sizeof(wrong),
		 "%sX-CSRF-Token: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n", s.cookie);
	fx_http(f, &r, "PUT", "/api/settings", wrong, body);
	fx_expect(&r, 403, "csrf_invalid");
	fx_resp_free(&r);
	snprintf(wrong, sizeof(wrong), "%sX-CSRF-Token: short\r\n", s.cookie);
	fx_http(f, &r, "POST", "/api/auth/logout", wrong, NULL);
	fx_expect(&r, 403, "csrf_invalid");
	fx_resp_free(&r);
	/* another session's token does not fit this one */
	struct fx_session other;
	fx_login(f, &other);
	snprintf(wrong, sizeof(wrong), "%s%s", s.cookie, other.csrf);
	fx_http(f, &r, "PUT", "/api/settings", wrong, body);
	fx_expect(&r, 403, "csrf_invalid");
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_AUTH_CSRF], 4);
	assert_int_equal(f->reloads, 0);

	/* GET needs none; the right one passes */
	fx_http(f, &r, "GET", "/api/settings", s.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_http(f, &r, "PUT", "/api/settings", s.both, body);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 1);
	assert_int_equal(f->conf->cache_size, 500);
}

static void logout_revokes(void **state)
{
	struct fx *f = *state;
	struct fx_session s, other;
	fx_login(f, &s);
	fx_login(f, &other);
	struct fx_resp r;
	char v[256];
	fx_http(f, &r, "POST", "/api/auth/logout", s.both, NULL);
	fx_expect(&r, 200, NULL);
	assert_true(json_is_true(json_object_get(r.json, "logged_out")));
	assert_non_null(fx_header(&r, "Set-Cookie", v, sizeof(v)));
	assert_true(strncmp(v, "nxdns_session=;", 15) == 0);
	assert_non_null(strstr(v, "Max-Age=0"));
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/memory", s.cookie, NULL);
	fx_expect(&r, 401, "unauthorized");
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/logout", s.both, NULL);
	fx_expect(&r, 401, "unauthorized");
	fx_resp_free(&r);
	/* the other session lives on */
	fx_http(f, &r, "GET", "/api/memory", other.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	/* a token has no session to end */
	fx_http(f, &r, "POST", "/api/auth/logout", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	assert_false(json_is_true(json_object_get(r.json, "logged_out")));
	fx_resp_free(&r);
}

static void sessions_expire(void **state)
{
	struct fx *f = *state;
	struct fx_session s;
	fx_login(f, &s);
	struct fx_resp r;
	f->now += 3600 * 1000 - 1; /* session_ttl: 1h in the fixture */
	fx_http(f, &r, "GET", "/api/memory", s.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	f->now += 1;
	fx_http(f, &r, "GET", "/api/memory", s.cookie, NULL);
	fx_expect(&r, 401, "session_expired");
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/memory", s.cookie, NULL);
	fx_expect(&r, 401, "unauthorized"); /* gone, not expired twice */
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_AUTH_EXPIRED], 1);
}

static void session_table_evicts_oldest(void **state)
{
	struct fx *f = *state;
	struct fx_session first, s;
	fx_login(f, &first);
	for (int i = 0; i < NX_ADMIN_MAX_SESSIONS - 1; i++) {
		f->now += 1;
		fx_login(f, &s);
	}
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SESSIONS_EVICTED], 0);
	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/memory", first.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	f->now += 1;
	fx_login(f, &s); /* one more: the oldest goes */
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_SESSIONS_EVICTED], 1);
	fx_http(f, &r, "GET", "/api/memory", first.cookie, NULL);
	fx_expect(&r, 401, "unauthorized");
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/memory", s.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
}

/* ---- API tokens ---- */

static void tokens_lifecycle(void **state)
{
	struct fx *f = *state;
	struct fx_session s;
	fx_login(f, &s);
	struct fx_resp r;

	fx_http(f, &r, "POST", "/api/auth/tokens", s.both, "{\"name\": \"grafana\"}");
	fx_expect(&r, 201, NULL);
	assert_string_equal(fx_str(&r, "name"), "grafana");
	char token[128], bearer[200];
	snprintf(token, sizeof(token), "%s", fx_str(&r, "token"));
	assert_true(strncmp(token, "nxdns_", 6) == 0);
	assert_int_equal(strlen(token), 6 + 43);
	assert_true(json_integer_value(json_object_get(r.json, "created")) > 1700000000);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 1);

	/* stored hashed: the file has its SHA-256 and not the token; comments kept */
	char *text = fx_read(f->path);
	uint8_t h[32];
	char hex[65];
	crypto_hash_sha256(h, (const unsigned char *)token, strlen(token));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	assert_non_null(strstr(text, hex));
	assert_null(strstr(text, token + 6));
	assert_non_null(strstr(text, "# a test config\n"));
	assert_non_null(strstr(text, "timeout_ms: 2000  # ms\n"));
	free(text);

	/* listed without secrets */
	fx_http(f, &r, "GET", "/api/auth/tokens", s.cookie, NULL);
	fx_expect(&r, 200, NULL);
	json_t *list = json_object_get(r.json, "tokens");
	assert_int_equal(json_array_size(list), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "name")),
			    "fixture");
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "name")),
			    "grafana");
	assert_null(strstr(r.body, hex));
	assert_null(strstr(r.body, token));
	assert_int_equal(json_object_size(json_array_get(list, 1)), 3); /* name, created, scope */
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "scope")),
			    "admin");
	fx_resp_free(&r);

	/* used: no CSRF needed with a token */
	snprintf(bearer, sizeof(bearer), "Authorization: Bearer %s\r\n", token);
	fx_http(f, &r, "GET", "/api/memory", bearer, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/tokens", bearer, "{\"name\": \"null\"}");
	fx_expect(&r, 201, NULL); /* a name YAML would read as null is stored quoted */
	fx_resp_free(&r);

	/* refusals */
	fx_http(f, &r, "POST", "/api/auth/tokens", bearer, "{\"name\": \"grafana\"}");
	fx_expect(&r, 409, "exists");
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/tokens", bearer, "{\"name\": \"Bad Name\"}");
	fx_expect(&r, 400, "bad_request");
	assert_string_equal(fx_str(&r, "field"), "name");
	fx_resp_free(&r);
	fx_http(f, &r, "DELETE", "/api/auth/tokens/nope", bearer, NULL);
	fx_expect(&r, 404, "not_found");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 2);

	/* revoked: the token stops working at once */
	fx_http(f, &r, "DELETE", "/api/auth/tokens/grafana", s.both, NULL);
	fx_expect(&r, 200, NULL);
	assert_string_equal(fx_str(&r, "deleted"), "grafana");
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/memory", bearer, NULL);
	fx_expect(&r, 401, "unauthorized");
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_admin_tokens, 2);
	assert_string_equal(f->conf->admin_tokens[1].name, "null");
	fx_http(f, &r, "DELETE", "/api/auth/tokens/null", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_admin_tokens, 1);
	assert_int_equal(f->reloads, 4);
}

/* A read token (a replica's sync.token) reads, and every other method on every route is 403. */
static void read_only_token_refuses_writes(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/auth/tokens", FX_BEARER,
		"{\"name\": \"replica\", \"scope\": \"write\"}");
	fx_expect(&r, 400, "bad_request");
	assert_string_equal(fx_str(&r, "field"), "scope");
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/tokens", FX_BEARER,
		"{\"name\": \"replica\", \"scope\": \"read\"}");
	fx_expect(&r, 201, NULL);
	assert_string_equal(fx_str(&r, "scope"), "read");
	char bearer[160];
	snprintf(bearer, sizeof(bearer), "Authorization: Bearer %s\r\n", fx_str(&r, "token"));
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_admin_tokens, 2);
	assert_true(f->conf->admin_tokens[1].read_only);
	assert_false(f->conf->admin_tokens[0].read_only);
	char *text = fx_read(f->path);
	assert_non_null(strstr(text, "scope: read"));
	free(text);

	fx_http(f, &r, "GET", "/api/memory", bearer, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	size_t checked = 0;
	for (size_t i = 0; i < nx_admin_n_routes; i++) {
		const struct nx_admin_route *rt = &nx_admin_routes[i];
		if ((rt->auth != NX_ADMIN_AUTH_SESSION && rt->auth != NX_ADMIN_AUTH_CSRF) ||
		    !strcmp(rt->method, "GET")) {
			continue;
		}
		char path[128];
		snprintf(path, sizeof(path), "%s%s", rt->path,
			 rt->match == NX_ADMIN_PREFIX ? "x" : "");
		fx_http(f, &r, rt->method, path, bearer, "{}");
		if (r.status != 403) {
			fail_msg("%s %s answered %d to a read token", rt->method, path, r.status);
		}
		fx_expect(&r, 403, "read_only_token");
		fx_resp_free(&r);
		checked++;
	}
	assert_true(checked > 20);
	assert_int_equal(f->conf->n_admin_tokens, 2); /* nothing changed */
	/* nor the credentials a backup carries */
	fx_http(f, &r, "GET", "/api/backup", bearer, NULL);
	fx_expect(&r, 403, "read_only_token");
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_AUTH_READ_ONLY], checked + 1);
}

static void tokens_cap(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	char body[64];
	for (int i = 1; i < NX_CONF_MAX_TOKENS; i++) {
		snprintf(body, sizeof(body), "{\"name\": \"t%d\"}", i);
		fx_http(f, &r, "POST", "/api/auth/tokens", FX_BEARER, body);
		fx_expect(&r, 201, NULL);
		fx_resp_free(&r);
	}
	fx_http(f, &r, "POST", "/api/auth/tokens", FX_BEARER, "{\"name\": \"one-more\"}");
	fx_expect(&r, 409, "too_many_tokens");
	fx_resp_free(&r);
	assert_int_equal(f->conf->n_admin_tokens, NX_CONF_MAX_TOKENS);
}

/* ---- the password changes under running sessions ---- */

static void password_change_ends_sessions(void **state)
{
	struct fx *f = *state;
	struct fx_session s;
	fx_login(f, &s);
	char hash[crypto_pwhash_STRBYTES], yaml[crypto_pwhash_STRBYTES + 2], err[NX_CONF_ERR_MAX];
	assert_int_equal(crypto_pwhash_str(hash, "a new password", 14, crypto_pwhash_OPSLIMIT_MIN,
					   crypto_pwhash_MEMLIMIT_MIN),
			 0);
	snprintf(yaml, sizeof(yaml), "\"%s\"", hash);
	assert_int_equal(nx_conf_rewrite(f->path, "admin.password_hash", yaml, err, sizeof(err)),
			 0);
	assert_int_equal(fx_hook_reload(f, err, sizeof(err)), 0); /* as SIGHUP */
	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/memory", s.cookie, NULL);
	fx_expect(&r, 401, "unauthorized");
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"a new password\"}");
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	/* tokens are not sessions: they keep working */
	fx_http(f, &r, "GET", "/api/memory", FX_BEARER, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
}

/* ---- a hash under other argon2 limits is rewritten at the next login ---- */

static void login_rehashes_old_limits(void **state)
{
	(void)state;
	char hash[crypto_pwhash_STRBYTES], cfg[1024];
	/* an argon2id string under limits that are not ours (as the 64 MiB ones were) */
	assert_int_equal(crypto_pwhash_str_alg(hash, FX_PASSWORD, strlen(FX_PASSWORD),
					       crypto_pwhash_OPSLIMIT_MIN,
					       crypto_pwhash_MEMLIMIT_MIN,
					       crypto_pwhash_ALG_ARGON2ID13),
			 0);
	assert_true(nx_admin_password_needs_rehash(hash));
	snprintf(cfg, sizeof(cfg), "# old hash\nadmin:\n  password_hash: \"%s\"\n", hash);
	struct fx *f = fx_start(cfg);
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"wrong password!\"}");
	fx_expect(&r, 401, "invalid_password");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 0); /* a failed login rewrites nothing */

	struct fx_session s1, s2;
	fx_login(f, &s1);
	assert_int_equal(f->reloads, 1);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_REHASHED], 1);
	char *text = fx_read(f->path);
	assert_non_null(strstr(text, "# old hash\nadmin:\n  password_hash: "
				     "\"$argon2id$v=19$m=7168,t=5,p=1$"));
	assert_null(strstr(text, hash));
	free(text);
	assert_false(nx_admin_password_needs_rehash(f->conf->admin_password_hash));
	assert_int_equal(crypto_pwhash_str_verify(f->conf->admin_password_hash, FX_PASSWORD,
						  strlen(FX_PASSWORD)),
			 0);
	/* the same password: the session opened by this login keeps working */
	fx_http(f, &r, "GET", "/api/memory", s1.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	/* the next login verifies the new hash and rewrites nothing */
	fx_login(f, &s2);
	assert_int_equal(f->reloads, 1);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_REHASHED], 1);
	fx_http(f, &r, "GET", "/api/memory", s1.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_stop(f);
}

static void rehash_decision(void **state)
{
	(void)state;
	char hash[crypto_pwhash_STRBYTES];
	assert_int_equal(nx_admin_password_hash("a long family password", 22, hash), 0);
	assert_false(nx_admin_password_needs_rehash(hash));
	assert_int_equal(strncmp(hash, "$argon2id$v=19$m=7168,t=5,p=1$", 30), 0);
	/* argon2i under our very limits still moves to argon2id */
	assert_int_equal(crypto_pwhash_str_alg(hash, "a long family password", 22,
					       NX_ADMIN_PWHASH_OPS, NX_ADMIN_PWHASH_MEM,
					       crypto_pwhash_ALG_ARGON2I13),
			 0);
	assert_true(nx_admin_password_needs_rehash(hash));
}

/* ---- first run ---- */

static void setup_token_flow(void **state)
{
	(void)state;
	struct fx *f = fx_start("# first run\nadmin:\n  session_ttl: 2h\n");
	struct fx_resp r;
	const char *tok = f->admin->auth.setup_token;
	assert_int_equal(strlen(tok), 43);
	char body[256];

	fx_http(f, &r, "GET", "/api/memory", NULL, NULL);
	fx_expect(&r, 401, "setup_required");
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/auth/status", NULL, NULL);
	assert_true(json_is_true(json_object_get(r.json, "setup_required")));
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"anything at all\"}");
	fx_expect(&r, 409, "setup_required");
	fx_resp_free(&r);

	fx_http(f, &r, "POST", "/api/auth/setup", NULL,
		"{\"token\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\", "
		"\"password\": \"our family password\"}");
	fx_expect(&r, 401, "invalid_token");
	fx_resp_free(&r);
	assert_int_equal(f->admin->ctr[NX_ADMIN_CTR_LOGIN_FAILED], 1);
	snprintf(body, sizeof(body), "{\"token\": \"%s\", \"password\": \"short\"}", tok);
	fx_http(f, &r, "POST", "/api/auth/setup", NULL, body);
	fx_expect(&r, 400, "bad_request");
	assert_string_equal(fx_str(&r, "field"), "password");
	fx_resp_free(&r);
	snprintf(body, sizeof(body), "{\"token\": \"%s\"}", tok);
	fx_http(f, &r, "POST", "/api/auth/setup", NULL, body);
	fx_expect(&r, 400, "bad_request");
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 0);

	snprintf(body, sizeof(body), "{\"token\": \"%s\", \"password\": \"our family password\"}",
		 tok);
	fx_http(f, &r, "POST", "/api/auth/setup", NULL, body);
	fx_expect(&r, 200, NULL);
	assert_non_null(fx_str(&r, "csrf"));
	assert_int_equal(json_integer_value(json_object_get(r.json, "expires_in")), 7200);
	char v[256], cookie[160];
	assert_non_null(fx_header(&r, "Set-Cookie", v, sizeof(v)));
	snprintf(cookie, sizeof(cookie), "Cookie: %.*s\r\n", (int)strcspn(v, ";"), v);
	fx_resp_free(&r);
	assert_int_equal(f->reloads, 1);
	assert_int_equal(f->admin->auth.setup_token[0], '\0');

	/* the file: an argon2id hash with our limits (7 MiB, 5 passes), comments kept */
	char *text = fx_read(f->path);
	assert_non_null(strstr(text, "# first run\nadmin:\n  session_ttl: 2h\n  password_hash: "
				     "\"$argon2id$v=19$m=7168,t=5,p=1$"));
	assert_null(strstr(text, "our family password"));
	free(text);
	assert_int_equal(
	    crypto_pwhash_str_verify(f->conf->admin_password_hash, "our family password", 19), 0);

	fx_http(f, &r, "GET", "/api/memory", cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/setup", NULL, body); /* the token is spent */
	fx_expect(&r, 409, "already_set");
	fx_resp_free(&r);
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"our family password\"}");
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_stop(f);
}

static void setup_without_reload_hook(void **state)
{
	(void)state;
	struct fx *f = fx_start_with("admin:\n  enabled: true\n", true);
	char body[256];
	snprintf(body, sizeof(body), "{\"token\": \"%s\", \"password\": \"our family password\"}",
		 f->admin->auth.setup_token);
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/auth/setup", NULL, body);
	fx_expect(&r, 503, "not_configured");
	fx_resp_free(&r);
	char *text = fx_read(f->path);
	assert_string_equal(text, "admin:\n  enabled: true\n");
	free(text);
	fx_stop(f);
}

/* No config hook at all (the daemon before it wires one): nothing protected opens. */
static void no_config_hook(void **state)
{
	(void)state;
	struct fx f = {0};
	struct nx_addr a;
	fx_listen_addr(&a);
	assert_int_equal(uv_loop_init(&f.loop), 0);
	assert_int_equal(uv_async_init(&f.loop, &f.wake, fx_on_wake), 0);
	assert_int_equal(nx_admin_start(&f.loop, &a, NULL, &f.admin), 0);
	assert_int_equal(f.admin->auth.setup_token[0], '\0');
	struct fx_resp r;
	fx_http(&f, &r, "GET", "/api/memory", NULL, NULL);
	fx_expect(&r, 401, "unauthorized");
	fx_resp_free(&r);
	fx_http(&f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"whatever it is\"}");
	fx_expect(&r, 503, "not_configured");
	fx_resp_free(&r);
	fx_http(&f, &r, "GET", "/healthz", NULL, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	nx_admin_stop(f.admin);
	uv_close((uv_handle_t *)&f.wake, NULL);
	uv_run(&f.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* ---- metrics_auth ---- */

static void metrics_need_credentials(void **state)
{
	(void)state;
	struct fx *f = fx_start(base_config("  metrics_auth: true\n"));
	struct fx_resp r;
	static const char *const paths[] = {"/metrics", "/healthz"};
	for (int i = 0; i < 2; i++) {
		fx_http(f, &r, "GET", paths[i], NULL, NULL);
		fx_expect(&r, 401, "unauthorized");
		fx_resp_free(&r);
		fx_http(f, &r, "GET", paths[i], FX_BEARER, NULL);
		fx_expect(&r, 200, NULL);
		fx_resp_free(&r);
	}
	struct fx_session s;
	fx_login(f, &s);
	fx_http(f, &r, "GET", "/metrics", s.cookie, NULL);
	fx_expect(&r, 200, NULL);
	fx_resp_free(&r);
	fx_stop(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(protected_routes_refuse_anonymous, setup, teardown),
	    cmocka_unit_test_setup_teardown(login_sets_a_strict_cookie, setup, teardown),
	    cmocka_unit_test_setup_teardown(login_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(login_rate_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(csrf_on_state_changes, setup, teardown),
	    cmocka_unit_test_setup_teardown(logout_revokes, setup, teardown),
	    cmocka_unit_test_setup_teardown(sessions_expire, setup, teardown),
	    cmocka_unit_test_setup_teardown(session_table_evicts_oldest, setup, teardown),
	    cmocka_unit_test_setup_teardown(tokens_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(tokens_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(read_only_token_refuses_writes, setup, teardown),
	    cmocka_unit_test_setup_teardown(password_change_ends_sessions, setup, teardown),
	    cmocka_unit_test(setup_token_flow),
	    cmocka_unit_test(login_rehashes_old_limits),
	    cmocka_unit_test(rehash_decision),
	    cmocka_unit_test(setup_without_reload_hook),
	    cmocka_unit_test(no_config_hook),
	    cmocka_unit_test(metrics_need_credentials),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

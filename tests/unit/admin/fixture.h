/*
 * A real admin server on loopback with a real config file, for the auth and API tests.
 *
 * The server runs on a libuv loop in the test thread; each request is made by a blocking-socket
 * client in a second thread that wakes the loop when done. The config is a YAML file in a fresh
 * temporary directory; the daemon hooks are played by the fixture: conf() returns the loaded
 * config, reload() loads the file again (as SIGHUP would), now_ms() is a clock the test moves;
 * the filter hooks (sources status, refresh, pause, lookup) are small fakes with state in fx.
 * Teardown checks that the admin_http, tls, config and sse_rings ledger rows are back where they
 * were.
 *
 * Include after cmocka.h. Static functions: each test file uses what it needs.
 */
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "admin/admin.h"
#include "admin/auth.h"
#include "admin/impl.h"
#include "base/err.h"
#include "base/ledger.h"

#define FX_FN static __attribute__((unused)) /* each test file uses some of these */

#define FX_CLIENT_TIMEOUT_S 10 /* a blocking read never hangs the suite longer than this */
#define FX_RESPONSE_MAX (1024 * 1024)

/* The password every fixture config accepts, hashed with libsodium's minimum limits so that a
 * login costs microseconds in tests (the server verifies any argon2 string it is given). */
#define FX_PASSWORD "correct horse battery"
/* An API token the fixture configs list as "fixture" (its SHA-256 goes into the file). */
#define FX_TOKEN "nxdns_fixture-token-0123456789abcdefghijklmnopqrstu"

struct fx {
	uv_loop_t loop;
	uv_async_t wake;
	struct nx_admin *admin;
	char dir[64];
	char path[128];	      /* the config file */
	struct nx_conf *conf; /* what hooks.conf answers */
	int reloads;	      /* reload hook calls */
	int reload_fail;      /* when set, reload answers this error */
	bool no_reload_hook;  /* start without hooks.reload */
	uint64_t now;	      /* the admin clock, ms */
	struct nx_ledger_row before[NX_OWNER__COUNT];
	struct nx_tls_creds *creds; /* what hooks.tls_creds answers (borrowed), NULL: none */
	/* the filter hooks' fake daemon state */
	int refreshes;	      /* refresh hook calls that started one */
	char refreshed[64];   /* the last source refreshed ("*" for all) */
	bool refresh_busy;    /* refresh answers NX_ENOSLOT */
	int64_t paused_until; /* what pause set */
};

/* ---- hooks ---- */

FX_FN const struct nx_conf *fx_hook_conf(void *ud)
{
	return ((struct fx *)ud)->conf;
}

FX_FN int fx_hook_reload(void *ud, char *err, size_t errlen)
{
	struct fx *f = ud;
	f->reloads++;
	if (f->reload_fail) {
		snprintf(err, errlen, "reload refused by the test");
		return f->reload_fail;
	}
	struct nx_conf *c = NULL;
	int rc = nx_conf_load(f->path, &c, err, errlen);
	if (rc) {
		return rc;
	}
	nx_conf_free(f->conf);
	f->conf = c;
	return 0;
}

FX_FN struct nx_tls_creds *fx_hook_tls_creds(void *ud)
{
	return ((struct fx *)ud)->creds;
}

FX_FN uint64_t fx_hook_now(void *ud)
{
	return ((struct fx *)ud)->now;
}

/* A status per configured source, marked so a test sees the hook answered. */
FX_FN json_t *fx_hook_sources_status(void *ud)
{
	struct fx *f = ud;
	json_t *a = json_array();
	for (size_t i = 0; f->conf && i < f->conf->n_sources; i++) {
		const struct nx_conf_source *s = &f->conf->sources[i];
		json_array_append_new(a,
				      json_pack("{s:s, s:b, s:i, s:n}", "name", s->name, "enabled",
						s->enabled, "list", 42, "last_error"));
	}
	return a;
}

FX_FN int fx_hook_refresh(void *ud, const char *source)
{
	struct fx *f = ud;
	if (f->refresh_busy) {
		return NX_ENOSLOT;
	}
	bool found = !source;
	for (size_t i = 0; source && f->conf && i < f->conf->n_sources; i++) {
		found |= !strcmp(f->conf->sources[i].name, source);
	}
	if (!found) {
		return NX_ENOTFOUND;
	}
	f->refreshes++;
	snprintf(f->refreshed, sizeof(f->refreshed), "%s", source ? source : "*");
	return 0;
}

FX_FN int fx_hook_pause(void *ud, int64_t until_ms)
{
	((struct fx *)ud)->paused_until = until_ms;
	return 0;
}

FX_FN int64_t fx_hook_paused_until(void *ud)
{
	return ((struct fx *)ud)->paused_until;
}

/* Names containing "bad" are refused; client "nope" is unknown. The answer echoes the qtype
 * and client id it was given, so a test sees what the route passed through. */
FX_FN json_t *fx_hook_lookup(void *ud, const char *name, uint16_t qtype, const char *client,
			     const char *client_id, const char **err)
{
	if (strstr(name, "bad")) {
		*err = "not a domain name";
		return NULL;
	}
	if (client && !strcmp(client, "nope")) {
		*err = "unknown client 'nope'";
		return NULL;
	}
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:i, s:s?}", "name", name, "action",
			 "block", "reason", "user_deny", "matched", name, "source", "filter.deny",
			 "client", client, "qtype", (int)qtype, "client_id", client_id);
}

FX_FN void fx_on_wake(uv_async_t *h)
{
}

/* ---- config text ---- */

/* admin: section lines for the fixture's password and token (static buffer). */
FX_FN const char *fx_admin_lines(void)
{
	static char buf[1024];
	static char hash[crypto_pwhash_STRBYTES];
	if (!hash[0]) {
		/* the server's own limits: a hash under others is rewritten at login */
		if (sodium_init() < 0 ||
		    nx_admin_password_hash(FX_PASSWORD, strlen(FX_PASSWORD), hash)) {
			fail_msg("cannot hash the fixture password");
		}
	}
	uint8_t th[32];
	char hex[65];
	crypto_hash_sha256(th, (const unsigned char *)FX_TOKEN, strlen(FX_TOKEN));
	sodium_bin2hex(hex, sizeof(hex), th, sizeof(th));
	snprintf(buf, sizeof(buf),
		 "  password_hash: \"%s\"\n"
		 "  session_ttl: 1h\n"
		 "  tokens:\n"
		 "    - {name: fixture, hash: \"%s\", created: 1700000000}\n",
		 hash, hex);
	return buf;
}

FX_FN void fx_write(const char *path, const char *text)
{
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* Whole file, malloc'd. */
FX_FN char *fx_read(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp) {
		return NULL;
	}
	char *buf = malloc(65536);
	size_t n = fread(buf, 1, 65535, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

/* ---- start / stop ---- */

FX_FN void fx_listen_addr(struct nx_addr *a)
{
	memset(a, 0, sizeof(*a));
	struct sockaddr_in *s = (struct sockaddr_in *)&a->ss;
	s->sin_family = AF_INET;
	s->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a->len = sizeof(*s);
	snprintf(a->text, sizeof(a->text), "127.0.0.1:0");
}

/* Write `config` into a new temp dir, load it and start the server (without a reload hook when
 * no_reload). */
FX_FN struct fx *fx_start_with(const char *config, bool no_reload)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->no_reload_hook = no_reload;
	nx_ledger_read(f->before);
	f->now = 1000000;
	snprintf(f->dir, sizeof(f->dir), "/tmp/nx-admin-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/nxdns.yaml", f->dir);
	fx_write(f->path, config);
	char err[NX_CONF_ERR_MAX];
	if (nx_conf_load(f->path, &f->conf, err, sizeof(err))) {
		fail_msg("fixture config: %s", err);
	}
	assert_int_equal(uv_loop_init(&f->loop), 0);
	assert_int_equal(uv_async_init(&f->loop, &f->wake, fx_on_wake), 0);
	struct nx_addr a;
	fx_listen_addr(&a);
	struct nx_admin_hooks hooks = {
	    .conf = fx_hook_conf,
	    .reload = f->no_reload_hook ? NULL : fx_hook_reload,
	    .now_ms = fx_hook_now,
	    .sources_status = fx_hook_sources_status,
	    .refresh = fx_hook_refresh,
	    .pause = fx_hook_pause,
	    .paused_until = fx_hook_paused_until,
	    .lookup = fx_hook_lookup,
	    .tls_creds = fx_hook_tls_creds,
	    .ud = f,
	};
	int rc = nx_admin_start(&f->loop, &a, &hooks, &f->admin);
	if (rc) {
		fail_msg("nx_admin_start: %s", nx_strerror(rc));
	}
	return f;
}

FX_FN struct fx *fx_start(const char *config)
{
	return fx_start_with(config, false);
}

FX_FN void fx_stop(struct fx *f)
{
	nx_admin_stop(f->admin); /* NULL when the test stopped it */
	uv_close((uv_handle_t *)&f->wake, NULL);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	nx_conf_free(f->conf);
	DIR *d = opendir(f->dir);
	struct dirent *e;
	char p[400];
	while (d && (e = readdir(d))) {
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", f->dir, e->d_name);
			unlink(p);
		}
	}
	if (d) {
		closedir(d);
	}
	rmdir(f->dir);
	struct nx_ledger_row now[NX_OWNER__COUNT];
	nx_ledger_read(now);
	static const enum nx_owner owners[] = {NX_OWNER_admin_http, NX_OWNER_tls, NX_OWNER_config,
					       NX_OWNER_sse_rings};
	for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
		assert_int_equal(now[owners[i]].bytes, f->before[owners[i]].bytes);
		assert_int_equal(now[owners[i]].count, f->before[owners[i]].count);
	}
	free(f);
}

/* ---- the client ---- */

struct fx_fetch {
	uint16_t port;
	char *request; /* malloc'd raw bytes */
	size_t request_len;
	char *response; /* malloc'd, NUL-terminated */
	size_t len;
	atomic_bool done;
	uv_async_t *wake;
};

FX_FN void fx_client(void *arg)
{
	struct fx_fetch *q = arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = FX_CLIENT_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(q->port)};
	s.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	q->response = malloc(FX_RESPONSE_MAX + 1);
	q->len = 0;
	if (fd >= 0 && connect(fd, (struct sockaddr *)&s, sizeof(s)) == 0) {
		const char *p = q->request;
		size_t n = q->request_len;
		while (n) {
			ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
			if (w <= 0) {
				break;
			}
			p += w;
			n -= (size_t)w;
		}
		for (;;) {
			ssize_t r = recv(fd, q->response + q->len, FX_RESPONSE_MAX - q->len, 0);
			if (r <= 0) {
				break;
			}
			q->len += (size_t)r;
		}
	}
	if (fd >= 0) {
		close(fd);
	}
	q->response[q->len] = '\0';
	atomic_store(&q->done, true);
	uv_async_send(q->wake);
}

struct fx_resp {
	int status;
	char headers[8192]; /* the raw header block */
	char *raw;	    /* malloc'd response */
	const char *body;   /* into raw */
	size_t body_len;
	json_t *json; /* the body parsed, or NULL */
};

/* Run fn(arg) in a thread while the loop turns, until *done. */
FX_FN void fx_run_with(struct fx *f, void (*fn)(void *), void *arg, atomic_bool *done)
{
	uv_thread_t tid;
	assert_int_equal(uv_thread_create(&tid, fn, arg), 0);
	while (!atomic_load(done)) {
		uv_run(&f->loop, UV_RUN_ONCE);
	}
	uv_thread_join(&tid);
}

/*
 * One request: `headers` are extra header lines ("K: V\r\n", may be NULL), `body` JSON text or
 * NULL. r->json is the parsed body when it is JSON. Free with fx_resp_free.
 */
FX_FN void fx_http(struct fx *f, struct fx_resp *r, const char *method, const char *path,
		   const char *headers, const char *body)
{
	struct fx_fetch q = {.port = nx_admin_port(f->admin), .wake = &f->wake};
	size_t blen = body ? strlen(body) : 0;
	size_t cap = strlen(path) + (headers ? strlen(headers) : 0) + blen + 256;
	q.request = malloc(cap);
	q.request_len = (size_t)snprintf(q.request, cap,
					 "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s%s"
					 "Content-Length: %zu\r\n\r\n%s",
					 method, path, headers ? headers : "",
					 body ? "Content-Type: application/json\r\n" : "", blen,
					 body ? body : "");
	fx_run_with(f, fx_client, &q, &q.done);
	free(q.request);
	memset(r, 0, sizeof(*r));
	r->raw = q.response;
	if (sscanf(q.response, "HTTP/1.%*d %d", &r->status) != 1) {
		fail_msg("no HTTP answer to %s %s (%zu bytes)", method, path, q.len);
	}
	const char *end = strstr(q.response, "\r\n\r\n");
	assert_non_null(end);
	size_t hl = (size_t)(end - q.response);
	assert_true(hl < sizeof(r->headers));
	memcpy(r->headers, q.response, hl);
	r->body = end + 4;
	r->body_len = q.len - hl - 4;
	r->json = json_loadb(r->body, r->body_len, 0, NULL);
}

FX_FN void fx_resp_free(struct fx_resp *r)
{
	json_decref(r->json);
	free(r->raw);
	memset(r, 0, sizeof(*r));
}

/* Value of a response header (case-insensitive name) copied into out, or NULL. */
FX_FN const char *fx_header(const struct fx_resp *r, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);
	for (const char *p = strstr(r->headers, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
		const char *h = p + 2;
		if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
			h += n + 1;
			while (*h == ' ') {
				h++;
			}
			const char *e = strstr(h, "\r\n");
			size_t l = e ? (size_t)(e - h) : strlen(h);
			snprintf(out, size, "%.*s", (int)l, h);
			return out;
		}
	}
	return NULL;
}

/* A string member of the JSON body, or NULL. */
FX_FN const char *fx_str(const struct fx_resp *r, const char *key)
{
	return json_string_value(json_object_get(r->json, key));
}

/* Expect `status` and, when error is not NULL, {"error": error}. */
FX_FN void fx_expect(const struct fx_resp *r, int status, const char *error)
{
	if (r->status != status) {
		fail_msg("want %d, got %d: %.*s", status, r->status, (int)r->body_len, r->body);
	}
	if (error) {
		assert_non_null(r->json);
		const char *e = fx_str(r, "error");
		if (!e || strcmp(e, error)) {
			fail_msg("want error %s, got %.*s", error, (int)r->body_len, r->body);
		}
	}
}

/* A logged-in session: the cookie header line and the CSRF header line. */
struct fx_session {
	char cookie[160]; /* "Cookie: nxdns_session=...\r\n" */
	char csrf[160];	  /* "X-CSRF-Token: ...\r\n" */
	char both[320];	  /* cookie + csrf */
};

FX_FN void fx_login(struct fx *f, struct fx_session *s)
{
	struct fx_resp r;
	fx_http(f, &r, "POST", "/api/auth/login", NULL, "{\"password\": \"" FX_PASSWORD "\"}");
	fx_expect(&r, 200, NULL);
	char v[256];
	assert_non_null(fx_header(&r, "Set-Cookie", v, sizeof(v)));
	size_t idn = strcspn(v, ";");
	snprintf(s->cookie, sizeof(s->cookie), "Cookie: %.*s\r\n", (int)idn, v);
	assert_non_null(fx_str(&r, "csrf"));
	snprintf(s->csrf, sizeof(s->csrf), "X-CSRF-Token: %s\r\n", fx_str(&r, "csrf"));
	snprintf(s->both, sizeof(s->both), "%s%s", s->cookie, s->csrf);
	fx_resp_free(&r);
}

#define FX_BEARER "Authorization: Bearer " FX_TOKEN "\r\n"

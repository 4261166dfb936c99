/*
 * libFuzzer target for the admin API's inputs from the LAN: JSON request bodies and query
 * strings, through the real server (admin/http.c, routes, handlers, body.c) on loopback.
 *
 * Input: one route byte (mod the table below: every API route a signed-in client can call,
 * but not those that change how it signs in: login, setup, logout, password, tokens), then
 * fields separated by '\n': the path suffix (for prefix routes: "/api/groups/<this>"), the
 * query string, and the body (the rest, which may hold '\n'). Bytes that cannot stand raw in
 * an HTTP request line are percent-encoded, so the handler sees them decoded; '&', '=' and
 * '%' stay raw so the fuzzer also shapes the query's structure and its escapes.
 *
 * The server runs on its own libuv loop in a second thread with a fixture config (sources,
 * groups, clients, local records, an API token) in a temporary directory and an empty query
 * log database; each input is one request with the token over a fresh connection. After a
 * state-changing request that succeeded, the config file is put back as it was and reloaded,
 * so every input starts from the same state.
 * Properties: a complete HTTP response within 10 s; its status is one the API documents
 * (2xx, 400, 404, 405, 409, 413, 415, 503) and never 500 nor an auth refusal (the token is
 * valid); every /api/ answer but the Apple profiles is a JSON object, and every 4xx one names
 * its error. A broken property aborts. Built with -fsanitize=fuzzer when meson
 * -Dfuzzing=true, and always as fuzz_admin_replay so tests/fuzz/corpus/admin replays in
 * `meson test`.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "admin/admin.h"
#include "base/err.h"
#include "querylog/querylog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_admin: %s:%d: check failed: %s\n", __FILE__,         \
				__LINE__, #x);                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define TOKEN "nxdns_fuzz-token-0123456789abcdefghijklmnopqrstuvwx"
#define REQ_MAX (96 * 1024)
#define RESP_MAX (1024 * 1024)
#define CLIENT_TIMEOUT_S 10

static const struct {
	const char *method;
	const char *path;
	bool prefix; /* the path suffix field is appended */
} routes[] = {
    {"GET", "/api/settings", false},
    {"PUT", "/api/settings", false},
    {"GET", "/api/schema", false},
    {"GET", "/api/stats/summary", false},
    {"GET", "/api/stats/history", false},
    {"GET", "/api/stats/top", false},
    {"GET", "/api/queries", false},
    {"GET", "/api/filter/sources", false},
    {"POST", "/api/filter/sources", false},
    {"POST", "/api/filter/sources/refresh", false},
    {"POST", "/api/filter/sources/", true},
    {"PUT", "/api/filter/sources/", true},
    {"DELETE", "/api/filter/sources/", true},
    {"GET", "/api/filter/rules", false},
    {"POST", "/api/filter/rules", false},
    {"DELETE", "/api/filter/rules", false},
    {"DELETE", "/api/filter/rules/", true},
    {"GET", "/api/filter/pause", false},
    {"POST", "/api/filter/pause", false},
    {"GET", "/api/lookup", false},
    {"GET", "/api/groups", false},
    {"POST", "/api/groups", false},
    {"PUT", "/api/groups/", true},
    {"DELETE", "/api/groups/", true},
    {"GET", "/api/clients", false},
    {"POST", "/api/clients", false},
    {"PUT", "/api/clients/", true},
    {"DELETE", "/api/clients/", true},
    {"GET", "/api/local-records", false},
    {"POST", "/api/local-records", false},
    {"DELETE", "/api/local-records", false},
    {"DELETE", "/api/local-records/", true},
    {"GET", "/api/apple/doh.mobileconfig", false},
    {"GET", "/api/apple/dot.mobileconfig", false},
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

/* ---- the server thread and its hooks (state touched only on that thread, but `restore`) */

static struct {
	uv_loop_t loop;
	struct nx_admin *admin;
	struct nx_conf *conf;
	char dir[64];
	char path[128];
	char *text; /* the config as written at start */
	uint16_t port;
	atomic_bool restore; /* the client put the file back: reload before the next request */
	int64_t paused_until;
} S;

static int load(void)
{
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	int rc = nx_conf_load(S.path, &c, err, sizeof(err));
	if (rc) {
		return rc;
	}
	nx_conf_free(S.conf);
	S.conf = c;
	return 0;
}

static const struct nx_conf *hook_conf(void *ud)
{
	if (atomic_exchange(&S.restore, false)) {
		CHECK(load() == 0);
	}
	return S.conf;
}

static int hook_reload(void *ud, char *err, size_t errlen)
{
	char e[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	int rc = nx_conf_load(S.path, &c, e, sizeof(e));
	if (rc) {
		snprintf(err, errlen, "%s", e);
		return rc;
	}
	nx_conf_free(S.conf);
	S.conf = c;
	return 0;
}

static uint64_t hook_now(void *ud)
{
	return 1700000000000ull;
}

static json_t *hook_sources_status(void *ud)
{
	return json_array();
}

static int hook_refresh(void *ud, const char *source)
{
	for (size_t i = 0; source && S.conf && i < S.conf->n_sources; i++) {
		if (!strcmp(S.conf->sources[i].name, source)) {
			return 0;
		}
	}
	return source ? NX_ENOTFOUND : 0;
}

static int hook_pause(void *ud, int64_t until_ms)
{
	S.paused_until = until_ms;
	return 0;
}

static int64_t hook_paused_until(void *ud)
{
	return S.paused_until;
}

static json_t *hook_lookup(void *ud, const char *name, uint16_t qtype, const char *client,
			   const char *client_id, const char **err)
{
	(void)qtype;
	(void)client_id;
	if (!*name || strlen(name) > 253) {
		*err = "not a domain name";
		return NULL;
	}
	return json_pack("{s:s, s:s}", "name", name, "action", "allow");
}

static void *server(void *arg)
{
	uv_run(&S.loop, UV_RUN_DEFAULT);
	return NULL;
}

/* The temporary directory goes at exit (the server thread is still running but idle: the
 * fuzzer or the replay has no request in flight then). */
static void cleanup(void)
{
	DIR *d = opendir(S.dir);
	struct dirent *e;
	char p[400];
	while (d && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", S.dir, e->d_name);
			unlink(p);
		}
	}
	if (d) {
		closedir(d);
	}
	rmdir(S.dir);
}

static void start(void)
{
	CHECK(sodium_init() >= 0);
	char hash[crypto_pwhash_STRBYTES];
	CHECK(crypto_pwhash_str(hash, "fuzz", 4, crypto_pwhash_OPSLIMIT_MIN,
				crypto_pwhash_MEMLIMIT_MIN) == 0);
	uint8_t th[32];
	char hex[65];
	crypto_hash_sha256(th, (const unsigned char *)TOKEN, strlen(TOKEN));
	sodium_bin2hex(hex, sizeof(hex), th, sizeof(th));

	snprintf(S.dir, sizeof(S.dir), "/tmp/nx-fuzz-admin-XXXXXX");
	CHECK(mkdtemp(S.dir) != NULL);
	atexit(cleanup);
	snprintf(S.path, sizeof(S.path), "%s/nxdns.yaml", S.dir);
	char db[128];
	snprintf(db, sizeof(db), "%s/querylog.db", S.dir);
	CHECK(nx_qlog_db_migrate(db, -1) == 0);

	S.text = malloc(8192);
	CHECK(S.text != NULL);
	snprintf(S.text, 8192,
		 "state_dir: \"%s\"\n"
		 "admin:\n"
		 "  password_hash: \"%s\"\n"
		 "  tokens:\n"
		 "    - {name: fuzz, hash: \"%s\", created: 1700000000}\n"
		 "filter:\n"
		 "  sources:\n"
		 "    - {name: ads, url: \"https://example.com/hosts.txt\"}\n"
		 "    - {name: mine, path: mine.txt, format: domains, groups: [default, kids]}\n"
		 "  allow: [\"good.example\"]\n"
		 "  deny: [\"ads.example\", \"*.tracker.example\"]\n"
		 "groups:\n"
		 "  kids: {sources: [ads]}\n"
		 "  guests: {filtering: false}\n"
		 "clients:\n"
		 "  - {name: tablet, ids: [\"192.168.1.50\"], groups: [kids]}\n"
		 "local_records:\n"
		 "  - {name: nas.lan, type: A, value: 192.168.1.10}\n"
		 "  - {name: files.lan, type: CNAME, value: nas.lan}\n",
		 S.dir, hash, hex);
	FILE *fp = fopen(S.path, "wb");
	CHECK(fp != NULL);
	fputs(S.text, fp);
	CHECK(fclose(fp) == 0);
	CHECK(load() == 0);

	CHECK(uv_loop_init(&S.loop) == 0);
	struct nx_addr a;
	memset(&a, 0, sizeof(a));
	struct sockaddr_in *sin = (struct sockaddr_in *)&a.ss;
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.len = sizeof(*sin);
	snprintf(a.text, sizeof(a.text), "127.0.0.1:0");
	struct nx_admin_hooks hooks = {
	    .conf = hook_conf,
	    .reload = hook_reload,
	    .now_ms = hook_now,
	    .sources_status = hook_sources_status,
	    .refresh = hook_refresh,
	    .pause = hook_pause,
	    .paused_until = hook_paused_until,
	    .lookup = hook_lookup,
	};
	CHECK(nx_admin_start(&S.loop, &a, &hooks, &S.admin) == 0);
	S.port = nx_admin_port(S.admin);
	CHECK(S.port != 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, server, NULL) == 0);
	CHECK(pthread_detach(t) == 0);
}

/* ---- the client (the fuzzing thread) ---- */

static const uint8_t *field(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *s = *p;
	const uint8_t *nl = memchr(s, '\n', (size_t)(end - s));
	const uint8_t *e = nl ? nl : end;
	*len = (size_t)(e - s);
	*p = nl ? nl + 1 : end;
	return s;
}

/* Append s percent-encoded where a request line cannot hold the byte raw; `keep` lists the
 * reserved bytes passed through. */
static size_t encode(char *out, size_t o, size_t cap, const uint8_t *s, size_t len,
		     const char *keep)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < len && o + 3 < cap; i++) {
		uint8_t c = s[i];
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || strchr("-._~", c) || (c && strchr(keep, c));
		if (plain) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	return o;
}

static char req[REQ_MAX];
static char resp[RESP_MAX + 1];

static size_t exchange(const char *r, size_t n)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	struct timeval tv = {.tv_sec = CLIENT_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(S.port)};
	s.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Close with a reset (linger 0) once the answer is in: the server closes first
	 * (Connection: close), and without it each exchange leaves a TIME_WAIT on its side for
	 * 60 s, which at the fuzzer's ~1,000 connections a second exhausts the loopback ports and
	 * connect() fails with EADDRNOTAVAIL, a property of the harness, not of the server. */
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	int rc = connect(fd, (struct sockaddr *)&s, sizeof(s));
	if (rc != 0 && errno == EINTR) {
		/* libFuzzer's timer signal interrupted it: the connection goes on in the
		 * background (connect(2)); wait for it and read its outcome */
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int err = ETIMEDOUT;
		socklen_t len = sizeof(err);
		if (poll(&p, 1, CLIENT_TIMEOUT_S * 1000) == 1) {
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
		}
		errno = err;
		rc = err ? -1 : 0;
	}
	if (rc != 0) {
		fprintf(stderr, "fuzz_admin: connect: %s\n", strerror(errno));
		CHECK(!"the admin server accepts a connection");
	}
	while (n) {
		ssize_t w = send(fd, r, n, MSG_NOSIGNAL);
		if (w <= 0) {
			break; /* the server may answer (413) and close before the body is in */
		}
		r += w;
		n -= (size_t)w;
	}
	size_t got = 0;
	for (;;) {
		ssize_t k = recv(fd, resp + got, RESP_MAX - got, 0);
		if (k < 0 && errno == EINTR) {
			continue;
		}
		/* a time-out is a hang of the server: the property "answers within 10 s" */
		CHECK(k >= 0 || errno == ECONNRESET);
		if (k <= 0) {
			break;
		}
		got += (size_t)k;
		CHECK(got < RESP_MAX);
	}
	close(fd);
	resp[got] = '\0';
	return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	if (!started) {
		start();
		started = true;
	}
	if (size < 1) {
		return 0;
	}
	const uint8_t *p = data + 1, *end = data + size;
	size_t route = data[0] % N_ROUTES;
	size_t slen, qlen, blen;
	const uint8_t *suffix = field(&p, end, &slen);
	const uint8_t *query = field(&p, end, &qlen);
	const uint8_t *body = p;
	blen = (size_t)(end - p);

	size_t o =
	    (size_t)snprintf(req, sizeof(req), "%s %s", routes[route].method, routes[route].path);
	if (routes[route].prefix) {
		o = encode(req, o, 4096, suffix, slen, "/");
	}
	if (qlen) {
		req[o++] = '?';
		o = encode(req, o, 8192, query, qlen, "&=%+");
	}
	o += (size_t)snprintf(req + o, sizeof(req) - o,
			      " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " TOKEN
			      "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			      "Connection: close\r\n\r\n",
			      blen);
	CHECK(o + blen <= sizeof(req));
	memcpy(req + o, body, blen);
	size_t got = exchange(req, o + blen);

	unsigned status = 0;
	CHECK(got > 12 && sscanf(resp, "HTTP/1.1 %3u ", &status) == 1);
	CHECK((status >= 200 && status < 300) || status == 400 || status == 404 || status == 405 ||
	      status == 409 || status == 413 || status == 415 || status == 503);
	const char *hdr_end = strstr(resp, "\r\n\r\n");
	CHECK(hdr_end != NULL);
	const char *rbody = hdr_end + 4;
	size_t rlen = got - (size_t)(rbody - resp);
	if (!strstr(routes[route].path, "mobileconfig") || status >= 300) {
		if (status != 204 && rlen) {
			json_error_t e;
			json_t *j = json_loadb(rbody, rlen, 0, &e);
			CHECK(j != NULL);
			CHECK(json_is_object(j) || json_is_array(j));
			if (status >= 400) {
				CHECK(json_is_string(json_object_get(j, "error")));
			}
			json_decref(j);
		}
	}
	if (strcmp(routes[route].method, "GET") && status < 300) {
		FILE *fp = fopen(S.path, "wb");
		CHECK(fp != NULL);
		fputs(S.text, fp);
		CHECK(fclose(fp) == 0);
		atomic_store(&S.restore, true);
	}
	return 0;
}

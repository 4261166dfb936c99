/*
 * Blocklist downloader against a local HTTP server (fetch_server.py, 127.0.0.1 only): 200 with
 * validators, 304 on If-None-Match / If-Modified-Since, 404, timeout, caps, redirects, gzip,
 * refused connection, local write errors; the blocking and the libuv variants; cancellation
 * and freeing from a callback; the ledger returns to zero and loops close cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "base/clock.h"
#include "base/err.h"
#include "filter/fetch.h"
#include "helpers.h"

extern char **environ;

#define LIST_BODY "ads.example\ntrack.example\n||banner.example^\n"
#define ETAG "\"v1\""
#define LAST_MODIFIED "Wed, 01 Jan 2025 00:00:00 GMT"
#define MARKER "previous good body\n"
#define SMALL_TIMEOUT_MS 300u
#define CAP (1024u * 1024)

static struct {
	pid_t pid;
	int stdin_fd; /* closing it stops the server */
	int port;
	char *dir;
} srv = {.pid = -1, .stdin_fd = -1};

static int start_server(void **state)
{
	const char *script = getenv("NX_FETCH_SERVER");
	if (!script || access(script, R_OK) != 0 || access("/usr/bin/python3", X_OK) != 0) {
		return 0; /* tests skip */
	}
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
		return -1;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	char *argv[] = {"/usr/bin/python3", (char *)script, NULL};
	int rc = posix_spawn(&srv.pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	if (rc != 0) {
		srv.pid = -1;
		close(in[1]);
		close(out[0]);
		return -1;
	}
	srv.stdin_fd = in[1];
	char line[32] = {0};
	size_t n = 0;
	struct pollfd p = {.fd = out[0], .events = POLLIN};
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n) && poll(&p, 1, 5000) == 1) {
		ssize_t r = read(out[0], line + n, sizeof(line) - 1 - n);
		if (r <= 0) {
			break;
		}
		n += (size_t)r;
	}
	close(out[0]);
	srv.port = atoi(line);
	srv.dir = th_tmpdir();
	return srv.port > 0 && srv.dir ? 0 : -1;
}

static int stop_server(void **state)
{
	if (srv.stdin_fd >= 0) {
		close(srv.stdin_fd);
	}
	if (srv.pid > 0) {
		kill(srv.pid, SIGTERM);
		waitpid(srv.pid, NULL, 0);
	}
	if (srv.dir) {
		th_rmtree(srv.dir);
		free(srv.dir);
	}
	return 0;
}

static void need_server(void)
{
	if (srv.port <= 0) {
		skip(); /* no python3 or NX_FETCH_SERVER (a build without the test tree) */
	}
}

static char *url(const char *path)
{
	static char buf[4][128];
	static unsigned i;
	char *b = buf[i++ % 4];
	snprintf(b, sizeof(buf[0]), "http://127.0.0.1:%d%s", srv.port, path);
	return b;
}

static char *dest(const char *name)
{
	static char buf[4][4300];
	static unsigned i;
	char *b = buf[i++ % 4];
	snprintf(b, sizeof(buf[0]), "%s/%s", srv.dir, name);
	return b;
}

/* Whole file into a static buffer; returns its length or -1. */
static long slurp(const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		return -1;
	}
	size_t n = fread(out, 1, cap, f);
	fclose(f);
	return (long)n;
}

static void assert_file(const char *path, const char *want, size_t len)
{
	static char got[1 << 16];
	long n = slurp(path, got, sizeof(got));
	assert_int_equal(n, (long)len);
	assert_memory_equal(got, want, len);
}

static void assert_no_part(const char *d)
{
	char part[4400];
	snprintf(part, sizeof(part), "%s.part", d);
	assert_int_equal(access(part, F_OK), -1);
}

static struct nx_fetch_req req_for(const char *path, const char *d)
{
	return (struct nx_fetch_req){
	    .url = url(path), .dest = d, .timeout_ms = 5000, .max_bytes = CAP};
}

/* A loopback port with nobody listening (bound, read, closed). */
static int unused_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
	close(s);
	return ntohs(a.sin_port);
}

static void test_status_names(void **state)
{
	assert_string_equal(nx_fetch_status_name(NX_FETCH_OK), "ok");
	assert_string_equal(nx_fetch_status_name(NX_FETCH_NOT_MODIFIED), "not_modified");
	assert_string_equal(nx_fetch_status_name(NX_FETCH_HTTP_ERROR), "http_error");
	assert_string_equal(nx_fetch_status_name(NX_FETCH_TIMEOUT), "timeout");
	assert_string_equal(nx_fetch_status_name(NX_FETCH_NETWORK), "network");
	assert_string_equal(nx_fetch_status_name(NX_FETCH_TOO_LARGE), "too_large");
	assert_string_equal(nx_fetch_status_name(NX_FETCH_IO), "io");
	assert_string_equal(nx_fetch_status_name(NX_FETCH__COUNT), "?");
}

/* ---- blocking variant ---- */

static void test_sync_200_then_304(void **state)
{
	need_server();
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	const char *d = dest("sync_list");
	struct nx_fetch_req rq = req_for("/list", d);
	struct nx_fetch_result r;
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	assert_int_equal(r.http_code, 200);
	assert_string_equal(r.etag, ETAG);
	assert_string_equal(r.last_modified, LAST_MODIFIED);
	assert_int_equal(r.bytes, strlen(LIST_BODY));
	assert_string_equal(r.error, "");
	assert_file(d, LIST_BODY, strlen(LIST_BODY));
	assert_no_part(d);

	/* Conditional GET with the ETag: 304, the file on disk is not touched. */
	th_write(d, MARKER, strlen(MARKER));
	rq.etag = r.etag;
	struct nx_fetch_result r2;
	assert_int_equal(nx_fetch_sync(&rq, &r2), 0);
	assert_int_equal(r2.status, NX_FETCH_NOT_MODIFIED);
	assert_int_equal(r2.http_code, 304);
	assert_string_equal(r2.etag, ETAG);
	assert_int_equal(r2.bytes, 0);
	assert_file(d, MARKER, strlen(MARKER));
	assert_no_part(d);

	/* Only Last-Modified: If-Modified-Since gives 304 too. */
	rq.etag = NULL;
	rq.last_modified = LAST_MODIFIED;
	assert_int_equal(nx_fetch_sync(&rq, &r2), 0);
	assert_int_equal(r2.status, NX_FETCH_NOT_MODIFIED);
	assert_file(d, MARKER, strlen(MARKER));

	/* A stale ETag: full body again. */
	rq.etag = "\"v0\"";
	rq.last_modified = NULL;
	assert_int_equal(nx_fetch_sync(&rq, &r2), 0);
	assert_int_equal(r2.status, NX_FETCH_OK);
	assert_file(d, LIST_BODY, strlen(LIST_BODY));
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
}

static void test_sync_404_keeps_dest(void **state)
{
	need_server();
	const char *d = dest("sync_404");
	th_write(d, MARKER, strlen(MARKER));
	struct nx_fetch_req rq = req_for("/missing", d);
	struct nx_fetch_result r;
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_HTTP_ERROR);
	assert_int_equal(r.http_code, 404);
	assert_true(strstr(r.error, "404") != NULL);
	assert_file(d, MARKER, strlen(MARKER));
	assert_no_part(d);
}

static void test_sync_timeout(void **state)
{
	need_server();
	const char *d = dest("sync_slow");
	th_write(d, MARKER, strlen(MARKER));
	struct nx_fetch_req rq = req_for("/slow", d);
	rq.timeout_ms = SMALL_TIMEOUT_MS;
	struct nx_fetch_result r;
	uint64_t t0 = nx_now_mono_ms();
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	uint64_t took = nx_now_mono_ms() - t0;
	assert_int_equal(r.status, NX_FETCH_TIMEOUT);
	assert_true(took >= SMALL_TIMEOUT_MS - 20 && took < 2000);
	assert_true(r.ms >= SMALL_TIMEOUT_MS - 20 && r.ms < 2000);
	assert_true(r.error[0] != '\0');
	/* part of the body had arrived (a .part existed): it is gone, dest is intact */
	assert_true(r.bytes > 0);
	assert_no_part(d);
	assert_file(d, MARKER, strlen(MARKER));
}

static void test_sync_too_large(void **state)
{
	need_server();
	static const char *const paths[] = {"/big", "/bigchunked"};
	for (size_t i = 0; i < 2; i++) {
		const char *d = dest("sync_big");
		th_write(d, MARKER, strlen(MARKER));
		struct nx_fetch_req rq = req_for(paths[i], d);
		struct nx_fetch_result r;
		assert_int_equal(nx_fetch_sync(&rq, &r), 0);
		assert_int_equal(r.status, NX_FETCH_TOO_LARGE);
		assert_true(r.bytes <= CAP);
		assert_no_part(d);
		assert_file(d, MARKER, strlen(MARKER));
	}
	/* Under the cap the same body is fine. */
	const char *d = dest("sync_big_ok");
	struct nx_fetch_req rq = req_for("/bigchunked", d);
	rq.max_bytes = 4 * CAP;
	struct nx_fetch_result r;
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	assert_int_equal(r.bytes, 2 * CAP);
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_size, 2 * CAP);
}

static void test_sync_redirects(void **state)
{
	need_server();
	const char *d = dest("sync_redirect");
	struct nx_fetch_req rq = req_for("/redirect", d);
	struct nx_fetch_result r;
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	assert_int_equal(r.http_code, 200);
	assert_string_equal(r.etag, ETAG); /* the final response's, not the 302's */
	assert_file(d, LIST_BODY, strlen(LIST_BODY));

	th_write(d, MARKER, strlen(MARKER));
	rq = req_for("/loop", d);
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_HTTP_ERROR);
	assert_file(d, MARKER, strlen(MARKER));
	assert_no_part(d);
}

static void test_sync_bodies(void **state)
{
	need_server();
	/* binary junk is stored byte for byte (compiling it is the compiler's business) */
	const char *d = dest("sync_garbage");
	struct nx_fetch_req rq = req_for("/garbage", d);
	struct nx_fetch_result r;
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	assert_int_equal(r.bytes, 4096);
	static char junk[4096];
	for (int i = 0; i < 4096; i++) {
		junk[i] = (char)((i * 7 + 3) % 256);
	}
	assert_file(d, junk, sizeof(junk));
	assert_string_equal(r.etag, "");
	assert_string_equal(r.last_modified, "");

	/* gzip is requested and decoded */
	d = dest("sync_gzip");
	rq = req_for("/gzip", d);
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	static char text[200 * 19 + 1];
	for (int i = 0; i < 200; i++) {
		memcpy(text + i * 19, "compressed.example\n", 19);
	}
	assert_file(d, text, 200 * 19);

	/* an empty 200 replaces dest with an empty file */
	d = dest("sync_empty");
	th_write(d, MARKER, strlen(MARKER));
	rq = req_for("/empty", d);
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	assert_file(d, "", 0);

	/* what the server saw */
	d = dest("sync_headers");
	rq = req_for("/headers", d);
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	char got[512] = {0};
	assert_true(slurp(d, got, sizeof(got) - 1) > 0);
	assert_true(strncmp(got, "ua=nxdns/", 9) == 0);
	assert_true(strstr(got, "ae=") && strstr(strstr(got, "ae="), "gzip"));
	assert_non_null(strstr(got, "authz=None\n")); /* a list download sends no token */

	/* a replica's pull (src/sync/): the bearer token is sent, and no redirect is followed
	 * with it (the token stays with the URL's host) */
	rq = req_for("/headers", d);
	rq.bearer = "nxdns_tok";
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_OK);
	memset(got, 0, sizeof(got));
	assert_true(slurp(d, got, sizeof(got) - 1) > 0);
	assert_non_null(strstr(got, "authz=Bearer nxdns_tok\n"));
	d = dest("sync_bearer_redirect");
	rq = req_for("/redirect", d);
	rq.bearer = "nxdns_tok";
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_HTTP_ERROR);
	assert_int_equal(r.http_code, 302);
	rq.bearer = "bad\r\nX-Injected: 1";
	assert_int_equal(nx_fetch_sync(&rq, &r), -EINVAL);
}

static void test_sync_network_and_io(void **state)
{
	need_server();
	const char *d = dest("sync_refused");
	char u[64];
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/list", unused_port());
	struct nx_fetch_req rq = {.url = u, .dest = d, .timeout_ms = 2000};
	struct nx_fetch_result r;
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_NETWORK);
	assert_int_equal(r.http_code, 0);
	assert_true(r.error[0] != '\0');
	assert_int_equal(access(d, F_OK), -1);

	/* the destination directory does not exist: a local error, not a network one */
	char missing[4400];
	snprintf(missing, sizeof(missing), "%s/no/such/dir/list", srv.dir);
	rq = req_for("/list", missing);
	assert_int_equal(nx_fetch_sync(&rq, &r), 0);
	assert_int_equal(r.status, NX_FETCH_IO);
	assert_int_equal(r.http_code, 200);
	assert_true(strstr(r.error, ".part") != NULL);
}

static void test_sync_invalid(void **state)
{
	struct nx_fetch_result r;
	struct nx_fetch_req rq = {.url = "ftp://127.0.0.1/list", .dest = "/tmp/x"};
	assert_int_equal(nx_fetch_sync(&rq, &r), -EINVAL);
	assert_true(r.error[0] != '\0');
	rq.url = "http://127.0.0.1:1/list";
	rq.etag = "\"a\"\r\nX-Injected: 1";
	assert_int_equal(nx_fetch_sync(&rq, &r), -EINVAL);
	rq.etag = NULL;
	rq.dest = NULL;
	assert_int_equal(nx_fetch_sync(&rq, &r), -EINVAL);
	assert_int_equal(nx_fetch_sync(NULL, &r), -EINVAL);
}

/* ---- libuv variant ---- */

struct slot {
	const char *path;
	const char *name;
	unsigned timeout_ms;
	const char *etag;
	bool refused;
	struct nx_fetch_result res;
	int calls;
};

static int async_done;

static void on_done(void *ud, const struct nx_fetch_result *res)
{
	struct slot *s = ud;
	s->res = *res;
	s->calls++;
	async_done++;
}

static void on_guard(uv_timer_t *t)
{
}

/* Run until `want` callbacks (or 8 s): a repeating guard timer keeps uv_run(ONCE) returning. */
static void run_until(uv_loop_t *loop, int want)
{
	uv_timer_t guard;
	uv_timer_init(loop, &guard);
	uv_timer_start(&guard, on_guard, 20, 20);
	uint64_t end = nx_now_mono_ms() + 8000;
	while (async_done < want && nx_now_mono_ms() < end) {
		uv_run(loop, UV_RUN_ONCE);
	}
	uv_close((uv_handle_t *)&guard, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
}

static void test_async_all(void **state)
{
	need_server();
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_fetcher *f;
	assert_int_equal(nx_fetcher_new(&loop, &f), 0);

	struct slot slots[] = {
	    {.path = "/list", .name = "a_list"},
	    {.path = "/list", .name = "a_304", .etag = ETAG},
	    {.path = "/missing", .name = "a_404"},
	    {.path = "/slow", .name = "a_slow", .timeout_ms = SMALL_TIMEOUT_MS},
	    {.path = "/big", .name = "a_big"},
	    {.path = "/bigchunked", .name = "a_bigchunked"},
	    {.path = "/redirect", .name = "a_redirect"},
	    {.path = "/garbage", .name = "a_garbage"},
	    {.path = "/list", .name = "a_refused", .refused = true},
	};
	const int n = (int)NX_ARRAY_LEN(slots);
	char refused_url[64];
	snprintf(refused_url, sizeof(refused_url), "http://127.0.0.1:%d/list", unused_port());
	async_done = 0;
	uint64_t t0 = nx_now_mono_ms();
	for (int i = 0; i < n; i++) {
		struct slot *s = &slots[i];
		const char *d = dest(s->name);
		if (strcmp(s->name, "a_list") != 0) {
			th_write(d, MARKER, strlen(MARKER));
		}
		struct nx_fetch_req rq = req_for(s->path, d);
		if (s->refused) {
			rq.url = refused_url;
		}
		if (s->timeout_ms) {
			rq.timeout_ms = s->timeout_ms;
		}
		rq.etag = s->etag;
		assert_int_equal(nx_fetcher_start(f, &rq, on_done, s), 0);
	}
	assert_int_equal(nx_fetcher_active(f), n);
	assert_true(th_owner_bytes(NX_OWNER_filter_build) > base);
	run_until(&loop, n);
	uint64_t took = nx_now_mono_ms() - t0;
	assert_int_equal(async_done, n);
	assert_int_equal(nx_fetcher_active(f), 0);
	/* concurrent: the whole batch takes about the slow one's timeout, not a sum */
	assert_true(took < 3000);

	static const enum nx_fetch_status want[] = {
	    NX_FETCH_OK,      NX_FETCH_NOT_MODIFIED, NX_FETCH_HTTP_ERROR,
	    NX_FETCH_TIMEOUT, NX_FETCH_TOO_LARGE,    NX_FETCH_TOO_LARGE,
	    NX_FETCH_OK,      NX_FETCH_OK,	     NX_FETCH_NETWORK,
	};
	for (int i = 0; i < n; i++) {
		if (slots[i].res.status != want[i]) {
			print_error("%s: %s (%s)\n", slots[i].name,
				    nx_fetch_status_name(slots[i].res.status), slots[i].res.error);
		}
		assert_int_equal(slots[i].calls, 1);
		assert_int_equal(slots[i].res.status, want[i]);
		assert_no_part(dest(slots[i].name));
	}
	assert_string_equal(slots[0].res.etag, ETAG);
	assert_file(dest("a_list"), LIST_BODY, strlen(LIST_BODY));
	assert_file(dest("a_redirect"), LIST_BODY, strlen(LIST_BODY));
	assert_true(slots[3].res.ms < 2000);
	static const char *const untouched[] = {"a_304", "a_404",	 "a_slow",
						"a_big", "a_bigchunked", "a_refused"};
	for (size_t i = 0; i < NX_ARRAY_LEN(untouched); i++) {
		assert_file(dest(untouched[i]), MARKER, strlen(MARKER));
	}
	assert_int_equal(slots[7].res.bytes, 4096);

	nx_fetcher_free(f);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
}

/* A callback that starts the conditional follow-up, and a second one that frees the fetcher. */
struct chain {
	struct nx_fetcher *f;
	struct nx_fetch_result first, second;
	int calls;
	int start_rc;
};

static void on_second(void *ud, const struct nx_fetch_result *res)
{
	struct chain *c = ud;
	c->second = *res;
	c->calls++;
	async_done++;
	nx_fetcher_free(c->f); /* from inside a callback */
}

static void on_first(void *ud, const struct nx_fetch_result *res)
{
	struct chain *c = ud;
	c->first = *res;
	c->calls++;
	struct nx_fetch_req rq = req_for("/list", dest("chain"));
	rq.etag = res->etag;
	c->start_rc = nx_fetcher_start(c->f, &rq, on_second, c);
}

static void test_async_chain_and_free_in_callback(void **state)
{
	need_server();
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct chain c = {0};
	assert_int_equal(nx_fetcher_new(&loop, &c.f), 0);
	struct nx_fetch_req rq = req_for("/list", dest("chain"));
	assert_int_equal(nx_fetcher_start(c.f, &rq, on_first, &c), 0);
	async_done = 0;
	run_until(&loop, 1);
	assert_int_equal(c.calls, 2);
	assert_int_equal(c.start_rc, 0);
	assert_int_equal(c.first.status, NX_FETCH_OK);
	assert_int_equal(c.second.status, NX_FETCH_NOT_MODIFIED);
	assert_file(dest("chain"), LIST_BODY, strlen(LIST_BODY));
	/* the fetcher is already freed: its handles close with the loop */
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
}

static void test_async_cancel(void **state)
{
	need_server();
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_fetcher *f;
	assert_int_equal(nx_fetcher_new(&loop, &f), 0);
	const char *d = dest("cancel");
	th_write(d, MARKER, strlen(MARKER));
	struct slot s = {0};
	struct nx_fetch_req rq = req_for("/slow", d);
	assert_int_equal(nx_fetcher_start(f, &rq, on_done, &s), 0);
	/* wait until the first body bytes are in the .part file */
	char part[4400];
	snprintf(part, sizeof(part), "%s.part", d);
	uv_timer_t guard;
	uv_timer_init(&loop, &guard);
	uv_timer_start(&guard, on_guard, 10, 10);
	uint64_t end = nx_now_mono_ms() + 3000;
	while (access(part, F_OK) != 0 && nx_now_mono_ms() < end) {
		uv_run(&loop, UV_RUN_ONCE);
	}
	uv_close((uv_handle_t *)&guard, NULL);
	assert_int_equal(access(part, F_OK), 0);

	nx_fetcher_free(f);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(s.calls, 0);
	assert_no_part(d);
	assert_file(d, MARKER, strlen(MARKER));
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
}

static void test_async_start_errors(void **state)
{
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_fetcher *f;
	assert_int_equal(nx_fetcher_new(&loop, &f), 0);
	struct slot s = {0};
	struct nx_fetch_req rq = {.url = "file:///etc/passwd", .dest = "/tmp/x"};
	assert_int_equal(nx_fetcher_start(f, &rq, on_done, &s), -EINVAL);
	rq.url = "http://127.0.0.1:1/";
	assert_int_equal(nx_fetcher_start(f, &rq, NULL, &s), -EINVAL);
	assert_int_equal(nx_fetcher_active(f), 0);
	nx_fetcher_free(f);
	nx_fetcher_free(NULL);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(s.calls, 0);
}

int main(void)
{
	/* Loopback only: an inherited proxy setting must not route the test elsewhere. */
	static const char *const proxies[] = {"http_proxy", "https_proxy", "HTTPS_PROXY",
					      "all_proxy", "ALL_PROXY"};
	for (size_t i = 0; i < NX_ARRAY_LEN(proxies); i++) {
		unsetenv(proxies[i]);
	}
	assert_int_equal(nx_fetch_global_init(), 0);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_names),
	    cmocka_unit_test(test_sync_200_then_304),
	    cmocka_unit_test(test_sync_404_keeps_dest),
	    cmocka_unit_test(test_sync_timeout),
	    cmocka_unit_test(test_sync_too_large),
	    cmocka_unit_test(test_sync_redirects),
	    cmocka_unit_test(test_sync_bodies),
	    cmocka_unit_test(test_sync_network_and_io),
	    cmocka_unit_test(test_sync_invalid),
	    cmocka_unit_test(test_async_all),
	    cmocka_unit_test(test_async_chain_and_free_in_callback),
	    cmocka_unit_test(test_async_cancel),
	    cmocka_unit_test(test_async_start_errors),
	};
	return cmocka_run_group_tests(tests, start_server, stop_server);
}

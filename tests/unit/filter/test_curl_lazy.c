/*
 * libcurl is loaded only while a transfer needs it (filter/curl.h): not at start, loaded by a
 * fetcher's first transfer, unmapped NX_FETCH_LINGER_MS after its last one (with libssh2 and
 * the rest of its dependencies: /proc/self/maps), loaded again by the next one; a blocking
 * fetch loads and unloads around itself; an abandoned transfer keeps it loaded; a missing
 * library is a clear error naming the package. No server: transfers go to a closed loopback
 * port (an IP literal: libcurl resolves it without its resolver thread).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "filter/curl.h"
#include "filter/fetch.h"
#include "helpers.h"

static char dest[256];
static char url[64];
static int calls;
static enum nx_fetch_status last;

/* A loopback port nothing listens on: bound, never listened, closed at the end. */
static int closed_port_fd = -1;

static int setup(void **state)
{
	snprintf(dest, sizeof(dest), "/tmp/nx-curl-lazy-%d.txt", (int)getpid());
	closed_port_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (closed_port_fd < 0 || bind(closed_port_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(closed_port_fd, (struct sockaddr *)&a, &len) != 0) {
		return -1;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/list.txt", ntohs(a.sin_port));
	return 0;
}

static int teardown(void **state)
{
	close(closed_port_fd);
	unlink(dest);
	return 0;
}

/* Is a file whose name contains `part` mapped into this process? */
static bool mapped(const char *part)
{
	FILE *fp = fopen("/proc/self/maps", "r");
	assert_non_null(fp);
	char line[1024];
	bool found = false;
	while (fgets(line, sizeof(line), fp)) {
		if (strstr(line, part)) {
			found = true;
		}
	}
	fclose(fp);
	return found;
}

static void on_done(void *ud, const struct nx_fetch_result *res)
{
	calls++;
	last = res->status;
}

static void on_guard(uv_timer_t *t)
{
}

/* Run the loop until pred() or 8 s (a repeating guard timer keeps UV_RUN_ONCE returning). */
static void run_until(uv_loop_t *loop, bool (*pred)(void))
{
	uv_timer_t guard;
	uv_timer_init(loop, &guard);
	uv_timer_start(&guard, on_guard, 20, 20);
	uint64_t end = nx_now_mono_ms() + 8000;
	while (!pred() && nx_now_mono_ms() < end) {
		uv_run(loop, UV_RUN_ONCE);
	}
	uv_close((uv_handle_t *)&guard, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
}

static bool one_call(void)
{
	return calls >= 1;
}

static bool unloaded(void)
{
	return !nx_curl_loaded();
}

static void test_missing_library_is_a_clear_error(void **state)
{
	nx_curl_set_soname("libnxdns-no-such-curl.so.4");
	struct nx_fetch_req rq = {.url = url, .dest = dest};
	struct nx_fetch_result res;
	assert_int_equal(nx_fetch_sync(&rq, &res), -ELIBACC);
	assert_int_equal(res.status, NX_FETCH_IO);
	assert_non_null(strstr(res.error, "libnxdns-no-such-curl.so.4"));
	assert_non_null(strstr(res.error, "libcurl3-gnutls"));

	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_fetcher *f;
	assert_int_equal(nx_fetcher_new(&loop, &f), 0);
	assert_int_equal(nx_fetcher_start(f, &rq, on_done, NULL), -ELIBACC);
	assert_non_null(strstr(nx_fetcher_error(f), "libcurl3-gnutls"));
	assert_int_equal(nx_fetcher_active(f), 0);
	nx_fetcher_free(f);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(calls, 0);
	assert_false(nx_curl_loaded());
	assert_int_equal(nx_curl_loads(), 0);
	nx_curl_set_soname(NULL);
}

static void test_fetcher_loads_then_unloads(void **state)
{
	int64_t base = th_owner_bytes(NX_OWNER_filter_build);
	/* nothing has loaded libcurl: the binary does not link it */
	assert_false(nx_curl_loaded());
	assert_false(mapped("libcurl"));
	unsigned loads = nx_curl_loads(), unloads = nx_curl_unloads();

	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_fetcher *f;
	assert_int_equal(nx_fetcher_new(&loop, &f), 0);
	assert_false(nx_curl_loaded()); /* a fetcher alone does not load it */
	struct nx_fetch_req rq = {.url = url, .dest = dest, .timeout_ms = 5000};
	for (int round = 1; round <= 2; round++) {
		calls = 0;
		assert_int_equal(nx_fetcher_start(f, &rq, on_done, NULL), 0);
		assert_true(nx_curl_loaded());
		assert_true(mapped("libcurl-gnutls"));
		assert_int_equal(nx_curl_loads(), loads + (unsigned)round);
		run_until(&loop, one_call);
		assert_int_equal(calls, 1);
		assert_int_equal(last, NX_FETCH_NETWORK); /* connection refused */
		/* lingering, then gone with its dependencies */
		run_until(&loop, unloaded);
		assert_false(nx_curl_loaded());
		assert_int_equal(nx_curl_unloads(), unloads + (unsigned)round);
		assert_false(mapped("libcurl"));
		assert_false(mapped("libssh2"));
		assert_false(mapped("libldap"));
		assert_false(mapped("librtmp"));
	}
	nx_fetcher_free(f);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(th_owner_bytes(NX_OWNER_filter_build), base);
}

static void test_sync_loads_and_unloads_around_itself(void **state)
{
	unsigned loads = nx_curl_loads(), unloads = nx_curl_unloads();
	struct nx_fetch_req rq = {.url = url, .dest = dest, .timeout_ms = 5000};
	struct nx_fetch_result res;
	assert_int_equal(nx_fetch_sync(&rq, &res), 0);
	assert_int_equal(res.status, NX_FETCH_NETWORK);
	assert_int_equal(nx_curl_loads(), loads + 1);
	assert_int_equal(nx_curl_unloads(), unloads + 1);
	assert_false(nx_curl_loaded());
	assert_false(mapped("libcurl"));
}

/* Last: an abandoned transfer pins the library for the rest of the process. */
static void test_cancelled_transfer_keeps_it_loaded(void **state)
{
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_fetcher *f;
	assert_int_equal(nx_fetcher_new(&loop, &f), 0);
	struct nx_fetch_req rq = {.url = url, .dest = dest, .timeout_ms = 5000};
	calls = 0;
	assert_int_equal(nx_fetcher_start(f, &rq, on_done, NULL), 0);
	nx_fetcher_free(f); /* before the loop ever ran: the transfer is abandoned */
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(calls, 0);
	assert_true(nx_curl_loaded());
	assert_true(mapped("libcurl-gnutls"));
}

int main(void)
{
	static const char *const proxies[] = {"http_proxy", "https_proxy", "HTTPS_PROXY",
					      "all_proxy",  "ALL_PROXY",   "no_proxy",
					      "NO_PROXY"};
	for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++) {
		unsetenv(proxies[i]);
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_missing_library_is_a_clear_error),
	    cmocka_unit_test(test_fetcher_loads_then_unloads),
	    cmocka_unit_test(test_sync_loads_and_unloads_around_itself),
	    cmocka_unit_test(test_cancelled_transfer_keeps_it_loaded),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * The control socket (admin/control.h): the server on a real libuv loop in the test thread,
 * the blocking client (nx_admin_control_get) in a second thread that wakes the loop when done.
 * Also the start refusals (a live socket, a file that is not a socket, a path too long, a stale
 * socket replaced) and the client's errors without a server. Every test ends with the ledger
 * owner back where it was and uv_loop_close() == 0.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <uv.h>

#include "admin/control.h"
#include "base/err.h"
#include "base/ledger.h"

#define TIMEOUT_MS 5000 /* a client exchange never hangs the suite longer than this */

struct answer {
	const char *route;
	int rc;
	unsigned status;
	char *body; /* malloc'd by the client */
	size_t len;
};

struct ctx {
	uv_loop_t loop;
	uv_async_t wake;
	struct nx_admin_control *ctl;
	char dir[64];
	char sock[96]; /* fits sun_path */
	bool ready;
	int64_t ledger_before;
	struct answer ans[6];
	size_t n_ans;
};

static int64_t admin_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_admin_http].bytes;
}

static bool hook_ready(void *ud)
{
	return ((struct ctx *)ud)->ready;
}

/* What the daemon's hook does: its own families, then the control server's. */
static void hook_extra(struct nx_metrics_buf *mb, void *ud)
{
	struct ctx *c = ud;
	nx_metrics_family(mb, "nxdns_test_family", NX_METRIC_GAUGE, "from the daemon's hook");
	nx_metrics_sample_u64(mb, "nxdns_test_family", 7, NULL);
	nx_admin_control_metrics(c->ctl, mb);
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "/tmp/nxctl-unit-XXXXXX");
	if (!mkdtemp(c->dir)) {
		free(c);
		return -1;
	}
	snprintf(c->sock, sizeof(c->sock), "%s/%s", c->dir, NX_ADMIN_CONTROL_SOCKET);
	uv_loop_init(&c->loop);
	c->ledger_before = admin_bytes();
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	for (size_t i = 0; i < c->n_ans; i++) {
		free(c->ans[i].body);
	}
	uv_run(&c->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&c->loop), 0);
	assert_int_equal(admin_bytes(), c->ledger_before);
	unlink(c->sock);
	rmdir(c->dir);
	free(c);
	return 0;
}

static struct nx_admin_hooks hooks_for(struct ctx *c)
{
	return (struct nx_admin_hooks){.ready = hook_ready, .metrics_extra = hook_extra, .ud = c};
}

/* ---- the client thread --------------------------------------------------------------------- */

static void *client_main(void *arg)
{
	struct ctx *c = arg;
	for (size_t i = 0; i < c->n_ans; i++) {
		struct answer *a = &c->ans[i];
		a->rc = nx_admin_control_get(c->sock, a->route, TIMEOUT_MS, &a->status, &a->body,
					     &a->len);
	}
	uv_async_send(&c->wake);
	return NULL;
}

static void on_wake(uv_async_t *h)
{
	struct ctx *c = h->data;
	nx_admin_control_stop(c->ctl);
	c->ctl = NULL;
	uv_close((uv_handle_t *)h, NULL);
}

/* Run the client's requests against the running server, then stop it. */
static void exchange(struct ctx *c)
{
	uv_async_init(&c->loop, &c->wake, on_wake);
	c->wake.data = c;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, client_main, c), 0);
	uv_run(&c->loop, UV_RUN_DEFAULT);
	pthread_join(t, NULL);
}

static void add(struct ctx *c, const char *route)
{
	c->ans[c->n_ans++] = (struct answer){.route = route};
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_routes(void **state)
{
	struct ctx *c = *state;
	struct nx_admin_hooks h = hooks_for(c);
	assert_int_equal(nx_admin_control_start(&c->loop, c->dir, &h, NULL, &c->ctl), 0);
	assert_string_equal(nx_admin_control_path(c->ctl), c->sock);
	struct stat st;
	assert_int_equal(lstat(c->sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
	assert_true(admin_bytes() > c->ledger_before);
	c->ready = false;
	add(c, "/healthz");
	add(c, "/api/memory");
	add(c, "/metrics");
	add(c, "/api/settings");
	add(c, "/api/memory?x=1");
	exchange(c);

	assert_int_equal(c->ans[0].rc, 0);
	assert_int_equal(c->ans[0].status, 503);
	assert_string_equal(c->ans[0].body, "loading\n");

	assert_int_equal(c->ans[1].rc, 0);
	assert_int_equal(c->ans[1].status, 200);
	json_t *j = json_loads(c->ans[1].body, 0, NULL);
	assert_non_null(j);
	assert_true(json_array_size(json_object_get(j, "owners")) == NX_OWNER__COUNT);
	assert_true(json_integer_value(json_object_get(j, "ledger_bytes")) > 0);
	json_decref(j);

	/* the built-in families, the daemon's hook (no admin server), our own counters: the
	 * three answers before this one counted, this one not yet */
	assert_int_equal(c->ans[2].status, 200);
	assert_non_null(strstr(c->ans[2].body, "nxdns_memory_owner_bytes{owner="));
	assert_non_null(strstr(c->ans[2].body, "\nnxdns_test_family 7\n"));
	assert_null(strstr(c->ans[2].body, "nxdns_admin_http_responses_total"));
	assert_non_null(strstr(c->ans[2].body, "\nnxdns_control_requests_total 2\n"));
	assert_non_null(strstr(c->ans[2].body, "\nnxdns_control_connections 1\n"));

	assert_int_equal(c->ans[3].status, 404);
	assert_non_null(strstr(c->ans[3].body, "\"error\":\"not_found\""));
	assert_int_equal(c->ans[4].status, 200); /* a query string is ignored */

	/* stop removed the file */
	assert_int_equal(lstat(c->sock, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_start_refusals(void **state)
{
	struct ctx *c = *state;
	struct nx_admin_hooks h = hooks_for(c);

	/* a file that is not a socket is never removed */
	FILE *fp = fopen(c->sock, "w");
	assert_non_null(fp);
	fputs("mine\n", fp);
	fclose(fp);
	struct nx_admin_control *ctl = NULL;
	assert_int_equal(nx_admin_control_start(&c->loop, c->dir, &h, NULL, &ctl), -EEXIST);
	assert_null(ctl);
	struct stat st;
	assert_int_equal(lstat(c->sock, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	unlink(c->sock);

	/* a stale socket (bound, nobody listening) is replaced */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", c->sock);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	unsigned status;
	char *body = NULL;
	size_t len;
	assert_int_equal(
	    nx_admin_control_get(c->sock, "/healthz", TIMEOUT_MS, &status, &body, &len),
	    -ECONNREFUSED);
	assert_int_equal(nx_admin_control_start(&c->loop, c->dir, &h, NULL, &c->ctl), 0);

	/* a live one is not: a second server on the same state_dir is refused */
	assert_int_equal(nx_admin_control_start(&c->loop, c->dir, &h, NULL, &ctl), -EADDRINUSE);
	assert_null(ctl);
	assert_int_equal(lstat(c->sock, &st), 0);
	nx_admin_control_stop(c->ctl);
	c->ctl = NULL;

	/* sun_path holds 107 bytes */
	char longdir[200];
	memset(longdir, 'd', sizeof(longdir) - 1);
	longdir[sizeof(longdir) - 1] = '\0';
	assert_int_equal(nx_admin_control_start(&c->loop, longdir, &h, NULL, &ctl), -ENAMETOOLONG);

	/* without a server the client says so */
	assert_int_equal(
	    nx_admin_control_get(c->sock, "/healthz", TIMEOUT_MS, &status, &body, &len), -ENOENT);
	assert_null(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

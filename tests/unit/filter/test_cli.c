/* CLI entries: nxdns compile, snapshot-build, lookup-snapshot (called as functions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>

#include "helpers.h"

int nx_cli_compile(int argc, char **argv);
int nx_cli_snapshot_build(int argc, char **argv);
int nx_cli_lookup_snapshot(int argc, char **argv);

/* Run fn with stdout captured into a malloc'd string. */
static int capture(int (*fn)(int, char **), int argc, char **argv, char **out)
{
	char path[] = "/tmp/nxcli-XXXXXX";
	int fd = mkstemp(path);
	fflush(stdout);
	int saved = dup(1);
	dup2(fd, 1);
	int rc = fn(argc, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	close(fd);
	*out = th_read(path, NULL);
	unlink(path);
	return rc;
}

static void test_cli(void **state)
{
	char *dir = th_tmpdir();
	char in[4300], snap[4300], src[4300];
	snprintf(in, sizeof(in), "%s/My List.txt", dir);
	const char *text = "||ads.example^\n@@||ok.ads.example^\n0.0.0.0 t.example\n/re/\n";
	th_write(in, text, strlen(text));
	char *out = NULL;

	char *a1[] = {"compile", "--json", in, dir, NULL};
	assert_int_equal(capture(nx_cli_compile, 4, a1, &out), 0);
	assert_non_null(strstr(out, "\"name\":\"My_List\""));
	assert_non_null(strstr(out, "\"regex\""));
	free(out);
	char *list = th_readf(dir, "My_List.list");
	assert_string_equal(list, "ads.example\nt.example\n");
	free(list);

	char *a2[] = {"compile", "--name", "second", "--format", "hosts", in, dir, NULL};
	assert_int_equal(capture(nx_cli_compile, 7, a2, &out), 0);
	assert_non_null(strstr(out, "format_mismatch"));
	free(out);

	char *bad[] = {"compile", "--format", "nope", in, dir, NULL};
	assert_int_equal(capture(nx_cli_compile, 5, bad, &out), 2);
	free(out);
	char *few[] = {"compile", in, NULL};
	assert_int_equal(capture(nx_cli_compile, 2, few, &out), 2);
	free(out);
	char *missing[] = {"compile", "/nonexistent/list", dir, NULL};
	assert_int_equal(capture(nx_cli_compile, 3, missing, &out), 1);
	free(out);

	snprintf(snap, sizeof(snap), "%s/s.nxs", dir);
	snprintf(src, sizeof(src), "%s/My_List", dir);
	char *b1[] = {"snapshot-build", "--json", snap, src, NULL};
	assert_int_equal(capture(nx_cli_snapshot_build, 4, b1, &out), 0);
	assert_non_null(strstr(out, "\"entries\":3"));
	free(out);

	char *l1[] = {"lookup-snapshot", snap,	   "www.Ads.Example.",
		      "ok.ads.example",	 "x.test", NULL};
	assert_int_equal(capture(nx_cli_lookup_snapshot, 5, l1, &out), 0);
	assert_non_null(strstr(out, "{\"name\":\"www.Ads.Example.\",\"action\":\"block\","
				    "\"reason\":\"blocklist_wildcard\",\"matched\":\"ads.example\","
				    "\"source\":\"My_List\"}\n"));
	assert_non_null(strstr(out, "\"name\":\"ok.ads.example\",\"action\":\"allow\","
				    "\"reason\":\"blocklist_exception\""));
	assert_non_null(strstr(out, "{\"name\":\"x.test\",\"action\":\"none\",\"reason\":\"none\","
				    "\"matched\":null,\"source\":null}"));
	free(out);
	char *l2[] = {"lookup-snapshot", "--sources", "0", snap, "ads.example", NULL};
	assert_int_equal(capture(nx_cli_lookup_snapshot, 5, l2, &out), 0);
	assert_non_null(strstr(out, "\"action\":\"none\""));
	free(out);
	char *l3[] = {"lookup-snapshot", "/nonexistent.nxs", "a", NULL};
	assert_int_equal(capture(nx_cli_lookup_snapshot, 3, l3, &out), 1);
	free(out);
	th_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cli),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

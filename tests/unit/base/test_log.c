/*
 * The journal sink of base/log.c: with stderr named by $JOURNAL_STREAM, records go as native
 * protocol datagrams (MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, NXDNS_SUBSYSTEM, NXDNS_CLIENT) to
 * the socket $NXDNS_JOURNAL_SOCKET names, here one this test binds; a refused datagram falls
 * back to a plain stderr line and is counted. The sink is chosen once per process, so this
 * file is its own executable (test_misc.c covers the plain lines).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
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

#include "base/log.h"
#include "base/stats.h"

static char g_dir[] = "/tmp/nx-test-log-XXXXXX";
static char g_sock[96];
static char g_err[128];
static int g_rx = -1;

static int setup(void **state)
{
	if (!mkdtemp(g_dir)) {
		return -1;
	}
	snprintf(g_sock, sizeof(g_sock), "%s/journal.sock", g_dir);
	snprintf(g_err, sizeof(g_err), "%s/stderr", g_dir);
	g_rx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_sock);
	if (g_rx < 0 || bind(g_rx, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		return -1;
	}
	/* stderr becomes a file whose device:inode $JOURNAL_STREAM names, as systemd does */
	int fd = open(g_err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || dup2(fd, STDERR_FILENO) < 0) {
		return -1;
	}
	close(fd);
	char js[64];
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	setenv("NXDNS_JOURNAL_SOCKET", g_sock, 1);
	return 0;
}

static int teardown(void **state)
{
	close(g_rx);
	unlink(g_sock);
	unlink(g_err);
	rmdir(g_dir);
	return 0;
}

/* One datagram, NUL-terminated; "" when none came. */
static void recv_record(char *buf, size_t cap)
{
	struct timeval tv = {.tv_sec = 2};
	setsockopt(g_rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = recv(g_rx, buf, cap - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
}

static void test_records_carry_fields(void **state)
{
	assert_true(nx_log_to_journal());
	char rec[2048];
	nx_log(NX_LOG_WARN, "filter", "source %s: %d lines skipped", "big", 3);
	recv_record(rec, sizeof(rec));
	assert_string_equal(rec, "MESSAGE=source big: 3 lines skipped\nPRIORITY=4\n"
				 "SYSLOG_IDENTIFIER=nxdns\nNXDNS_SUBSYSTEM=filter\n");
	nx_log_client(NX_LOG_ERR, "admin", "192.0.2.7", "login failed");
	recv_record(rec, sizeof(rec));
	assert_string_equal(rec, "MESSAGE=login failed\nPRIORITY=3\nSYSLOG_IDENTIFIER=nxdns\n"
				 "NXDNS_SUBSYSTEM=admin\nNXDNS_CLIENT=192.0.2.7\n");
	/* a newline cannot start a field of its own */
	nx_log(NX_LOG_INFO, "daemon", "two\nPRIORITY=0");
	recv_record(rec, sizeof(rec));
	assert_non_null(strstr(rec, "MESSAGE=two PRIORITY=0\nPRIORITY=6\n"));
	/* below the level: nothing sent */
	nx_log_set_level(NX_LOG_INFO);
	nx_log(NX_LOG_DEBUG, "daemon", "hidden");
	nx_log(NX_LOG_INFO, "daemon", "shown");
	recv_record(rec, sizeof(rec));
	assert_non_null(strstr(rec, "MESSAGE=shown\n"));
}

static void test_refused_record_falls_back_to_stderr(void **state)
{
	uint64_t before = nx_stat_read(NX_STAT_JOURNAL_FAILED);
	close(g_rx); /* the journal is gone: ECONNREFUSED */
	g_rx = -1;
	unlink(g_sock);
	nx_log_client(NX_LOG_WARN, "admin", "198.51.100.1", "client 198.51.100.1 still logged");
	assert_int_equal(nx_stat_read(NX_STAT_JOURNAL_FAILED), before + 1);
	char buf[512] = "";
	FILE *f = fopen(g_err, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the message names its client; the field is the journal's alone */
	assert_non_null(strstr(buf, "warn admin: client 198.51.100.1 still logged\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_records_carry_fields),
	    cmocka_unit_test(test_refused_record_falls_back_to_stderr),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * Small base pieces: nx_strerror (0, -errno, every NX_E*, unknown), nx_require and
 * nx_fails_assert, logging (level parse, filtering, line format, truncation), randomness and
 * clocks. Process-killing paths (abort, a possible overflow) run in a forked child.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/rand.h"
#include "base/stats.h"

/* ---- errors ---- */

static void test_strerror_known(void **state)
{
	(void)state;
	assert_string_equal(nx_strerror(0), "success");
	assert_string_equal(nx_strerror(-ENOENT), strerror(ENOENT));
	assert_string_equal(nx_strerror(-ENOMEM), strerror(ENOMEM));
#define CHECK(name, val, text)                                                                     \
	assert_int_equal(name, val);                                                               \
	assert_true((val) <= -1000);                                                               \
	assert_string_equal(nx_strerror(name), text);                                              \
	assert_string_not_equal(nx_strerror(name), "unknown error");
	NX_ERRORS(CHECK)
#undef CHECK
}

static void test_strerror_distinct(void **state)
{
	(void)state;
	static const int codes[] = {
#define CODE(name, val, text) name,
	    NX_ERRORS(CODE)
#undef CODE
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(codes); i++) {
		for (size_t j = 0; j < i; j++) {
			assert_int_not_equal(codes[i], codes[j]);
			assert_string_not_equal(nx_strerror(codes[i]), nx_strerror(codes[j]));
		}
	}
}

static void test_strerror_unknown(void **state)
{
	(void)state;
	const int unknown[] = {-999999, -5000, -1999, 1, 42, INT32_MIN};
	for (size_t i = 0; i < NX_ARRAY_LEN(unknown); i++) {
		const char *s = nx_strerror(unknown[i]);
		assert_non_null(s);
		assert_string_equal(s, "unknown error");
	}
	/* one past the last NX_E*: unknown, not a neighbour's text */
	int last = 0;
#define MIN(name, val, text) last = NX_MIN(last, val);
	NX_ERRORS(MIN)
#undef MIN
	assert_string_equal(nx_strerror(last - 1), "unknown error");
	/* an errno value libc has no name for still gets text */
	assert_non_null(nx_strerror(-998));
}

/* Run fn in a child with stderr on a pipe; returns the wait status, output in buf. */
static int in_child(void (*fn)(void *), void *arg, char *buf, size_t cap, size_t *len)
{
	int p[2];
	if (pipe(p) != 0) {
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], STDERR_FILENO);
		signal(SIGABRT, SIG_DFL);
		fn(arg);
		_exit(0);
	}
	close(p[1]);
	size_t n = 0;
	for (;;) {
		ssize_t r = read(p[0], buf + n, cap - 1 - n);
		if (r <= 0) {
			break;
		}
		n += (size_t)r;
		if (n == cap - 1) {
			break;
		}
	}
	buf[n] = '\0';
	*len = n;
	close(p[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	return st;
}

static void do_require_false(void *arg)
{
	(void)arg;
	int zero = 0;
	nx_require(zero == 1);
}

static void test_require_aborts(void **state)
{
	(void)state;
	char out[4096];
	size_t len;
	int st = in_child(do_require_false, NULL, out, sizeof(out), &len);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(out, "requirement failed"));
	assert_non_null(strstr(out, "zero == 1"));
	assert_non_null(strstr(out, "test_misc.c"));
	nx_require(1 == 1); /* true: nothing happens */
}

/* ---- stderr capture in-process (for nx_log) ---- */

static int g_saved_fd = -1;
static int g_cap_fd = -1;

static void capture_begin(void)
{
	int p[2];
	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	fflush(stderr);
	g_saved_fd = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	g_cap_fd = p[0];
}

static size_t capture_end(char *buf, size_t cap)
{
	fflush(stderr);
	dup2(g_saved_fd, STDERR_FILENO);
	close(g_saved_fd);
	size_t n = 0;
	ssize_t r;
	while (n < cap - 1 && (r = read(g_cap_fd, buf + n, cap - 1 - n)) > 0) {
		n += (size_t)r;
	}
	buf[n] = '\0';
	close(g_cap_fd);
	return n;
}

static void do_fails_assert(void *arg)
{
	(void)arg;
	int one = 1;
	if (nx_fails_assert(one == 2)) {
		_exit(3); /* dropped the work: the release behaviour */
	}
}

/*
 * Release builds: a failed check logs, counts and lets the caller drop the work.
 * Builds with NX_ABORT_ON_ASSERT (the sanitizer build of `make test`, fuzzing): it aborts, so a
 * "cannot happen" that happens stops the suite instead of hiding in a counter.
 */
static void test_fails_assert(void **state)
{
	(void)state;
	uint64_t a0 = nx_stat_read(NX_STAT_ASSERT_FAILURES);
	int one = 1;
	assert_false(nx_fails_assert(one == 1));
	assert_int_equal(nx_stat_read(NX_STAT_ASSERT_FAILURES), a0);
#ifdef NX_ABORT_ON_ASSERT
	char out[4096];
	size_t len;
	int st = in_child(do_fails_assert, NULL, out, sizeof(out), &len);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(out, "one == 2"));
#else
	(void)do_fails_assert;
	char out[2048];
	capture_begin();
	bool failed = nx_fails_assert(one == 2);
	capture_end(out, sizeof(out));
	assert_true(failed);
	assert_int_equal(nx_stat_read(NX_STAT_ASSERT_FAILURES), a0 + 1);
	assert_non_null(strstr(out, "one == 2"));
#endif
}

/* ---- logging ---- */

static void test_log_parse_level(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		enum nx_log_level l;
	} ok[] = {{"error", NX_LOG_ERR},
		  {"warn", NX_LOG_WARN},
		  {"info", NX_LOG_INFO},
		  {"debug", NX_LOG_DEBUG}};
	for (size_t i = 0; i < NX_ARRAY_LEN(ok); i++) {
		enum nx_log_level l = (enum nx_log_level)99;
		assert_int_equal(nx_log_parse_level(ok[i].s, &l), 0);
		assert_int_equal(l, ok[i].l);
	}
	const char *bad[] = {"", "err", "warning", "verbose", "info ", "trace", "debug2"};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad); i++) {
		enum nx_log_level l = NX_LOG_WARN;
		assert_int_equal(nx_log_parse_level(bad[i], &l), NX_ECONFIG);
		assert_int_equal(l, NX_LOG_WARN); /* untouched on error */
	}
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;
	for (; *s; s++) {
		n += *s == '\n';
	}
	return n;
}

static void test_log_levels_and_format(void **state)
{
	(void)state;
	enum nx_log_level saved = nx_log_get_level();
	nx_log_set_level(NX_LOG_WARN);
	assert_int_equal(nx_log_get_level(), NX_LOG_WARN);
	assert_true(nx_log_enabled(NX_LOG_ERR));
	assert_true(nx_log_enabled(NX_LOG_WARN));
	assert_false(nx_log_enabled(NX_LOG_INFO));
	char out[4096];
	capture_begin();
	nx_log(NX_LOG_DEBUG, "test", "debug %d", 1);
	nx_log(NX_LOG_INFO, "test", "info %d", 2);
	nx_log(NX_LOG_WARN, "test", "warn %d", 3);
	nx_log(NX_LOG_ERR, "up", "hello %s %d", "world", 42);
	size_t n = capture_end(out, sizeof(out));
	nx_log_set_level(saved);
	assert_true(n > 0);
	assert_int_equal(count_lines(out), 2);
	assert_null(strstr(out, "debug 1"));
	assert_null(strstr(out, "info 2"));
	assert_non_null(strstr(out, " warn test: warn 3\n"));
	assert_non_null(strstr(out, " error up: hello world 42\n"));
	/* "YYYY-MM-DDTHH:MM:SS.mmmZ " prefix */
	assert_true(n > 25);
	assert_true(out[4] == '-' && out[7] == '-' && out[10] == 'T' && out[13] == ':' &&
		    out[16] == ':' && out[19] == '.' && out[23] == 'Z' && out[24] == ' ');
	assert_int_equal(out[n - 1], '\n');
}

#define LOG_LINE_MAX 1024 /* log.c's line buffer: one write(2) of at most this */

static void test_log_long_message_truncated(void **state)
{
	(void)state;
	char msg[3000];
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	char out[8192];
	capture_begin();
	nx_log(NX_LOG_ERR, "test", "%s", msg);
	size_t n = capture_end(out, sizeof(out));
	assert_true(n > 100);
	assert_true(n <= LOG_LINE_MAX);
	assert_int_equal(count_lines(out), 1);
	assert_int_equal(out[n - 1], '\n');
}

static void do_log_long_subsys(void *arg)
{
	(void)arg;
	static char subsys[2000];
	memset(subsys, 's', sizeof(subsys) - 1);
	nx_log(NX_LOG_ERR, subsys, "%s", "after a long subsystem");
}

/* Even a prefix longer than the line buffer yields one bounded line (and no overflow). */
static void test_log_long_subsys_bounded(void **state)
{
	(void)state;
	char out[8192];
	size_t n = 0;
	int st = in_child(do_log_long_subsys, NULL, out, sizeof(out), &n);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(n > 0);
	assert_true(n <= LOG_LINE_MAX);
	assert_int_equal(out[n - 1], '\n');
}

/* ---- randomness ---- */

static void *draw8(void *out)
{
	uint32_t *v = out;
	for (int i = 0; i < 8; i++) {
		v[i] = nx_rand_u32();
	}
	return NULL;
}

static void test_rand(void **state)
{
	(void)state;
	assert_int_equal(nx_rand_init(), 0);
	assert_int_equal(nx_rand_init(), 0); /* twice is fine */
	enum { N = 20000, K = 10 };
	unsigned hist[K] = {0};
	for (int i = 0; i < N; i++) {
		uint32_t v = nx_rand_uniform(K);
		assert_true(v < K);
		hist[v]++;
	}
	for (int k = 0; k < K; k++) {
		/* expected 2000 each; 1600..2400 is > 9 sigma */
		assert_true(hist[k] > 1600 && hist[k] < 2400);
	}
	for (int i = 0; i < 100; i++) {
		assert_int_equal(nx_rand_uniform(1), 0);
		assert_true(nx_rand_uniform(65536 - 1024) < 65536 - 1024);
	}
	uint32_t first = nx_rand_u32(), or_bits = 0;
	bool differs = false;
	for (int i = 0; i < 64; i++) {
		uint32_t v = nx_rand_u32();
		differs |= v != first;
		or_bits |= v;
	}
	assert_true(differs);
	assert_true(or_bits & 0x80000000u); /* the top bit shows up in 64 draws */
	assert_true((or_bits & 0xffffu) == 0xffffu);
	/* Values are buffered per thread, 64 at a time: successive buffers must differ (a refill
	 * that reused its bytes would repeat the block), and another thread's stream differs. */
	uint32_t blk[3][64];
	for (int b = 0; b < 3; b++) {
		for (int i = 0; i < 64; i++) {
			blk[b][i] = nx_rand_u32();
		}
	}
	assert_true(memcmp(blk[0], blk[1], sizeof(blk[0])) != 0);
	assert_true(memcmp(blk[1], blk[2], sizeof(blk[0])) != 0);
	pthread_t th;
	uint32_t other[8], mine[8];
	assert_int_equal(pthread_create(&th, NULL, draw8, other), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	draw8(mine);
	assert_true(memcmp(other, mine, sizeof(mine)) != 0);
}

/* ---- clocks ---- */

static void test_clock(void **state)
{
	(void)state;
	uint64_t ms0 = nx_now_mono_ms(), us0 = nx_now_mono_us();
	int64_t w0 = nx_now_wall_ms();
	assert_true(us0 / 1000 + 5 >= ms0 && us0 / 1000 <= ms0 + 5);
	int64_t t = (int64_t)time(NULL) * 1000;
	assert_true(w0 > t - 2000 && w0 < t + 2000);
	struct timespec d = {.tv_nsec = 20 * 1000 * 1000};
	nanosleep(&d, NULL);
	uint64_t ms1 = nx_now_mono_ms(), us1 = nx_now_mono_us();
	assert_true(ms1 - ms0 >= 19);
	assert_true(ms1 - ms0 < 2000);
	assert_true(us1 - us0 >= 19000);
	uint64_t prev = nx_now_mono_us();
	for (int i = 0; i < 1000; i++) {
		uint64_t now = nx_now_mono_us();
		assert_true(now >= prev);
		prev = now;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_strerror_known),
	    cmocka_unit_test(test_strerror_distinct),
	    cmocka_unit_test(test_strerror_unknown),
	    cmocka_unit_test(test_require_aborts),
	    cmocka_unit_test(test_fails_assert),
	    cmocka_unit_test(test_log_parse_level),
	    cmocka_unit_test(test_log_levels_and_format),
	    cmocka_unit_test(test_log_long_message_truncated),
	    cmocka_unit_test(test_log_long_subsys_bounded),
	    cmocka_unit_test(test_rand),
	    cmocka_unit_test(test_clock),
	};
	return cmocka_run_group_tests_name("base_misc", tests, NULL, NULL);
}

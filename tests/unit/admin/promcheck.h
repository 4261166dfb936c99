/*
 * Run scripts/promparse.py (the strict exposition parser) on a text from a cmocka test.
 * NX_PROMPARSE names the script and NX_PYTHON the interpreter (meson sets both); the test is
 * skipped when either is missing.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exit status of the parser on `text` (0 = valid); skips the calling test when unavailable. */
static int promparse_status(const char *text, size_t len)
{
	const char *script = getenv("NX_PROMPARSE");
	const char *python = getenv("NX_PYTHON");
	if (!python || !*python) {
		python = "/usr/bin/python3";
	}
	if (!script || access(script, R_OK) != 0 || access(python, X_OK) != 0) {
		skip();
	}
	char path[] = "/tmp/nx-promparse-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s' >/dev/null", python, script, path);
	int st = system(cmd);
	unlink(path);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

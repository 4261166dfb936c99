/*
 * `nxdns passwd --config FILE` (src/cli/passwd.c, compiled into this test): the password comes
 * from stdin (a file here, not a terminal), is stored as an argon2id hash through the config
 * rewrite (comments kept, .bak made), and every error exits 2 with the file unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "admin/auth.h"
#include "base/err.h"
#include "base/ledger.h"
#include "conf/conf.h"

int nx_cli_passwd(int argc, char **argv);

static char dir[64], path[128], bak[140], input[140];
static int64_t config_bytes;

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/nx-passwd-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/nxdns.yaml", dir);
	snprintf(bak, sizeof(bak), "%s.bak", path);
	snprintf(input, sizeof(input), "%s/stdin", dir);
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	config_bytes = rows[NX_OWNER_config].bytes;
	return 0;
}

static int teardown(void **state)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[400];
	while (d && (e = readdir(d))) {
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	}
	if (d) {
		closedir(d);
	}
	rmdir(dir);
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	assert_int_equal(rows[NX_OWNER_config].bytes, config_bytes);
	return 0;
}

static void spit(const char *p, const char *text, size_t len)
{
	FILE *fp = fopen(p, "wb");
	assert_non_null(fp);
	fwrite(text, 1, len, fp);
	fclose(fp);
}

static char *slurp(const char *p)
{
	FILE *fp = fopen(p, "rb");
	if (!fp) {
		return NULL;
	}
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return strdup(buf);
}

/* Run `nxdns passwd` with stdin = `in` (len bytes) and the given arguments. */
static int run(const char *in, size_t len, int argc, char **argv)
{
	spit(input, in, len);
	int saved = dup(STDIN_FILENO);
	int fd = open(input, O_RDONLY);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDIN_FILENO);
	close(fd);
	int rc = nx_cli_passwd(argc, argv);
	dup2(saved, STDIN_FILENO);
	close(saved);
	return rc;
}

static const char config[] = "# my resolver\n"
			     "admin:\n"
			     "  listen: 127.0.0.1:8080 # loopback only\n"
			     "cache:\n"
			     "  size: 100\n";

static void sets_the_hash(void **state)
{
	spit(path, config, strlen(config));
	char *argv[] = {"passwd", "--config", path, NULL};
	assert_int_equal(run("a long family password\n", 23, 3, argv), 0);
	char *text = slurp(path);
	assert_non_null(strstr(text, "# my resolver\nadmin:\n  listen: 127.0.0.1:8080 # loopback "
				     "only\n  password_hash: \"$argon2id$v=19$m=7168,t=5,p=1$"));
	assert_null(strstr(text, "family"));
	free(text);
	text = slurp(bak);
	assert_string_equal(text, config);
	free(text);

	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX];
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	assert_non_null(c->admin_password_hash);
	/* the newline was not part of the password */
	assert_int_equal(
	    crypto_pwhash_str_verify(c->admin_password_hash, "a long family password", 22), 0);
	nx_conf_free(c);

	/* again, with -c and CRLF: the hash is replaced in place */
	char *argv2[] = {"passwd", "-c", path, NULL};
	assert_int_equal(run("another password\r\n", 18, 3, argv2), 0);
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	assert_int_equal(crypto_pwhash_str_verify(c->admin_password_hash, "another password", 16),
			 0);
	nx_conf_free(c);
	text = slurp(path);
	assert_int_equal(strstr(text, "password_hash") - text,
			 strstr(text, "$argon2id") - text - 16);
	assert_null(strstr(strstr(text, "password_hash") + 1, "password_hash")); /* only one */
	free(text);
}

static void errors_exit_2(void **state)
{
	spit(path, config, strlen(config));
	char *argv[] = {"passwd", "--config", path, NULL};
	assert_int_equal(run("short\n", 6, 3, argv), 2); /* fewer than 8 bytes */
	assert_int_equal(run("", 0, 3, argv), 2);	 /* nothing */
	static char big[NX_ADMIN_PASSWORD_MAX + 10];
	memset(big, 'x', sizeof(big));
	assert_int_equal(run(big, sizeof(big), 3, argv), 2); /* too long */
	assert_int_equal(run("with\0nul-byte", 13, 3, argv), 2);
	char *text = slurp(path);
	assert_string_equal(text, config);
	free(text);
	assert_int_equal(access(bak, F_OK), -1);

	/* usage */
	char *none[] = {"passwd", NULL};
	assert_int_equal(run("a good password", 15, 1, none), 2);
	char *extra[] = {"passwd", "--config", path, "more", NULL};
	assert_int_equal(run("a good password", 15, 4, extra), 2);
	char *unknown[] = {"passwd", "--konfig", path, NULL};
	assert_int_equal(run("a good password", 15, 3, unknown), 2);

	/* a config that does not load: refused, unchanged */
	static const char broken[] = "cache:\n  sise: 5\n";
	spit(path, broken, strlen(broken));
	assert_int_equal(run("a good password", 15, 3, argv), 2);
	text = slurp(path);
	assert_string_equal(text, broken);
	free(text);
	assert_int_equal(access(bak, F_OK), -1);

	/* a directory that does not exist */
	char *nodir[] = {"passwd", "--config", "/nonexistent-nx/nxdns.yaml", NULL};
	assert_int_equal(run("a good password", 15, 3, nodir), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(sets_the_hash, setup, teardown),
	    cmocka_unit_test_setup_teardown(errors_exit_2, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

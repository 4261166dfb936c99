/*
 * nxdns passwd --config FILE
 *
 * Set the admin password: read it from standard input when that is not a terminal (one line;
 * a trailing newline is dropped), else prompt twice with echo off; hash it (argon2id, see
 * admin/auth.h) and write admin.password_hash into FILE through the config rewrite (validated,
 * FILE.bak kept, atomic, comments kept). A running server picks it up on reload (SIGHUP), which
 * also ends every open session. Exit 0, or 2 on any error.
 */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "admin/auth.h"
#include "base/err.h"
#include "cli/cli.h"
#include "conf/conf.h"


#define INPUT_MAX (NX_ADMIN_PASSWORD_MAX + 3) /* the password, "\r\n", and one byte to see more */

static void usage(FILE *fp)
{
	fprintf(fp, "usage: nxdns passwd --config FILE\n"
		    "  Sets the admin password in FILE (argon2id hash). The password is read from\n"
		    "  standard input when it is not a terminal, e.g.\n"
		    "    printf '%%s' \"$PASSWORD\" | nxdns passwd --config /etc/nxdns/nxdns.yaml\n"
		    "  Reload the server afterwards (SIGHUP); that ends every admin session.\n");
}

/* All of stdin (up to cap - 1 bytes, else -E2BIG), one trailing "\n" or "\r\n" removed. */
static int read_piped(char *buf, size_t cap, size_t *len)
{
	size_t n = 0;
	for (;;) {
		if (n == cap - 1) {
			return -E2BIG;
		}
		ssize_t r = read(STDIN_FILENO, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r < 0) {
			return -errno;
		}
		if (r == 0) {
			break;
		}
		n += (size_t)r;
	}
	if (n && buf[n - 1] == '\n') {
		n--;
		if (n && buf[n - 1] == '\r') {
			n--;
		}
	}
	buf[n] = '\0';
	*len = n;
	return 0;
}

/* Prompt on stderr and read one line from the terminal with echo off. */
static int read_tty(const char *prompt, char *buf, size_t cap, size_t *len)
{
	struct termios old, quiet;
	if (tcgetattr(STDIN_FILENO, &old) < 0) {
		return -errno;
	}
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	quiet.c_lflag |= ECHONL;
	fputs(prompt, stderr);
	fflush(stderr);
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0) {
		return -errno;
	}
	int rc = 0;
	if (!fgets(buf, (int)cap, stdin)) {
		rc = -EIO;
	}
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
	if (rc) {
		return rc;
	}
	size_t n = strlen(buf);
	if (n && buf[n - 1] == '\n') {
		buf[--n] = '\0';
	} else if (n == cap - 1) {
		return -E2BIG;
	}
	*len = n;
	return 0;
}

int nx_cli_passwd(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *config = NULL;
	int ch;
	optind = 0; /* full getopt reset: the subcommand may not be the first parse */
	while ((ch = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			config = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!config || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (sodium_init() < 0) {
		fprintf(stderr, "nxdns passwd: libsodium failed to initialise\n");
		return 2;
	}
	char pw[INPUT_MAX], again[INPUT_MAX];
	size_t len = 0, len2 = 0;
	int rc;
	if (isatty(STDIN_FILENO)) {
		rc = read_tty("New admin password: ", pw, sizeof(pw), &len);
		if (!rc) {
			rc = read_tty("Again: ", again, sizeof(again), &len2);
		}
		if (!rc && (len != len2 || sodium_memcmp(pw, again, len) != 0)) {
			fprintf(stderr, "nxdns passwd: the passwords differ; nothing changed\n");
			rc = NX_EMALFORMED;
		}
	} else {
		rc = read_piped(pw, sizeof(pw), &len);
	}
	if (rc && rc != NX_EMALFORMED) {
		fprintf(stderr, "nxdns passwd: cannot read the password: %s\n",
			rc == -E2BIG ? "longer than 1024 bytes" : nx_strerror(rc));
	}
	char err[NX_CONF_ERR_MAX] = "";
	if (!rc) {
		rc = nx_admin_password_set(config, pw, len, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "nxdns passwd: %s%s%s%s\n", rc == NX_ECONFIG ? config : "",
				rc == NX_ECONFIG ? ": " : "", err,
				rc == NX_EMALFORMED || rc == NX_ECONFIG ? "; nothing changed" : "");
		}
	}
	sodium_memzero(pw, sizeof(pw));
	sodium_memzero(again, sizeof(again));
	if (rc) {
		return 2;
	}
	fprintf(stderr,
		"nxdns passwd: admin password set in %s (previous file: %s.bak); reload nxdns "
		"(SIGHUP) to apply it\n",
		config, config);
	return 0;
}

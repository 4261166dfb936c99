/*
 * nxdns cert --self-signed DIR [--name HOST ...] [--force]
 *
 * Write a self-signed certificate for the DoT/DoH listeners: DIR/key.pem (ECDSA P-256, 0600)
 * and DIR/cert.pem (valid ~10 years; SANs = the --name values, host names or IP addresses, and
 * 127.0.0.1, ::1), then print the SPKI pin clients can pin to (`pin-sha256: BASE64`, as kdig
 * +tls-pin and RFC 7469 take it). DIR is created when missing (one level). Existing files are
 * kept unless --force: a new key breaks every client that pinned the old one.
 * Exit 0; 1 when the files cannot be written or read back; 2 on usage errors or a bad name.
 */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "net/tls.h"

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: nxdns cert --self-signed DIR [--name HOST ...] [--force]\n"
		"  Writes DIR/cert.pem and DIR/key.pem (ECDSA P-256, valid 10 years) for the\n"
		"  DoT/DoH listeners and prints the key's pin (pin-sha256: BASE64).\n"
		"  --name HOST   a host name or IP address clients use (repeatable); 127.0.0.1\n"
		"                and ::1 are always included\n"
		"  --force       replace existing files (clients pinning the old key will refuse "
		"the new one)\n");
}

int nx_cli_cert(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"self-signed", required_argument, NULL, 's'},
	    {"name", required_argument, NULL, 'n'},
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *dir = NULL;
	const char *names[NX_TLS_SAN_MAX];
	size_t n_names = 0;
	bool force = false;
	int ch;
	optind = 0; /* full getopt reset: the subcommand may not be the first parse */
	while ((ch = getopt_long(argc, argv, "s:n:fh", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			dir = optarg;
			break;
		case 'n':
			if (n_names == NX_ARRAY_LEN(names)) {
				fprintf(stderr, "nxdns cert: at most %zu --name values\n",
					NX_ARRAY_LEN(names));
				return 2;
			}
			names[n_names++] = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!dir || !*dir || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "nxdns cert: cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	char cert[4096], key[4096];
	if ((size_t)snprintf(cert, sizeof(cert), "%s/cert.pem", dir) >= sizeof(cert) ||
	    (size_t)snprintf(key, sizeof(key), "%s/key.pem", dir) >= sizeof(key)) {
		fprintf(stderr, "nxdns cert: %s: path too long\n", dir);
		return 2;
	}
	if (!force && (access(cert, F_OK) == 0 || access(key, F_OK) == 0)) {
		fprintf(stderr,
			"nxdns cert: %s already exists; nothing written (--force replaces it, and "
			"clients that pinned the old key will refuse the new one)\n",
			access(key, F_OK) == 0 ? key : cert);
		return 1;
	}
	char err[512] = "";
	int rc = nx_tls_selfsigned_write(dir, names, n_names, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "nxdns cert: %s\n", err);
		return rc == -EINVAL || rc == NX_ELIMIT ? 2 : 1;
	}
	/* Read back through the loader the daemon uses: what we print is what it will serve. */
	struct nx_tls_creds *c = NULL;
	char pin[45];
	rc = nx_tls_creds_server_load(cert, key, &c, err, sizeof(err));
	if (!rc) {
		rc = nx_tls_creds_pin(c, pin);
		snprintf(err, sizeof(err), "%s", nx_strerror(rc));
	}
	nx_tls_creds_unref(c);
	if (rc) {
		fprintf(stderr, "nxdns cert: the written certificate does not load: %s\n", err);
		return 1;
	}
	fprintf(stderr, "nxdns cert: wrote %s and %s\n", cert, key);
	printf("pin-sha256: %s\n", pin);
	return 0;
}

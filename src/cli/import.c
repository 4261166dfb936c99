/*
 * nxdns import pihole TELEPORTER.zip [-o OUT.yaml [--force]]
 * nxdns import adguardhome AdGuardHome.yaml [-o OUT.yaml [--force]]
 *
 * Read another DNS filter's settings (src/import/) and write the nxdns configuration they
 * map to. Without -o it is a dry run: the configuration on standard output, the report on
 * standard error. With -o the configuration goes to OUT (written beside it and renamed into
 * place, so a reader never sees half of it; an existing OUT only with --force; never the
 * file being imported) and the report to standard output. The original is only read.
 * Exit 0, 1 when the original cannot be read or OUT cannot be written, 2 on usage errors or
 * when the imported configuration does not load.
 */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "conf/conf.h"
#include "import/import.h"

static void usage(FILE *fp)
{
	fprintf(fp,
		"usage: nxdns import pihole TELEPORTER.zip [-o OUT.yaml [--force]]\n"
		"       nxdns import adguardhome AdGuardHome.yaml [-o OUT.yaml [--force]]\n"
		"  Converts a Pi-hole v6 Teleporter archive or AdGuard Home's configuration into\n"
		"  an nxdns configuration and reports, line by line, what was imported and what\n"
		"  was not. Without -o: a dry run (configuration on stdout, report on stderr).\n");
}

static int write_out(const struct nx_import *imp, const char *out, const char *in, bool force)
{
	struct stat so, si;
	if (stat(out, &so) == 0) {
		if (stat(in, &si) == 0 && so.st_dev == si.st_dev && so.st_ino == si.st_ino) {
			fprintf(stderr,
				"nxdns import: %s is the file being imported: not overwritten\n",
				out);
			return 2;
		}
		if (!force) {
			fprintf(stderr, "nxdns import: %s exists (--force replaces it)\n", out);
			return 2;
		}
	}
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.import-XXXXXX", out) >= (int)sizeof(tmp)) {
		fprintf(stderr, "nxdns import: %s: path too long\n", out);
		return 2;
	}
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "nxdns import: %s: %s\n", tmp, strerror(errno));
		return 1;
	}
	FILE *fp = fdopen(fd, "w");
	if (!fp) {
		close(fd);
		unlink(tmp);
		return 1;
	}
	char err[NX_CONF_ERR_MAX + 4200];
	int rc = nx_import_write_config(imp, fp, err, sizeof(err));
	if (!rc && (fflush(fp) != 0 || fsync(fd) != 0)) {
		snprintf(err, sizeof(err), "%s: %s", tmp, strerror(errno));
		rc = -EIO;
	}
	(void)fchmod(fd, 0640); /* it may hold upstream names and client addresses */
	if (fclose(fp) != 0 && !rc) {
		snprintf(err, sizeof(err), "%s: %s", tmp, strerror(errno));
		rc = -EIO;
	}
	if (!rc && rename(tmp, out) != 0) {
		snprintf(err, sizeof(err), "rename to %s: %s", out, strerror(errno));
		rc = -errno;
	}
	if (rc) {
		unlink(tmp);
		fprintf(stderr, "nxdns import: %s\n", err);
		return rc == NX_ECONFIG ? 2 : 1;
	}
	return 0;
}

int nx_cli_import(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
					     {"force", no_argument, NULL, 'f'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	const char *out = NULL;
	bool force = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:fh", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
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
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	const char *kind = argv[optind], *in = argv[optind + 1];
	int (*reader)(const char *, struct nx_import **, char *, size_t) =
	    !strcmp(kind, "pihole")	   ? nx_import_pihole
	    : !strcmp(kind, "adguardhome") ? nx_import_adguardhome
					   : NULL;
	if (!reader) {
		fprintf(stderr, "nxdns import: unknown kind '%s' (pihole or adguardhome)\n", kind);
		usage(stderr);
		return 2;
	}
	struct nx_import *imp = NULL;
	char err[NX_CONF_ERR_MAX + 64];
	int rc = reader(in, &imp, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "nxdns import: %s\n", err);
		return 1;
	}
	int code;
	if (out) {
		code = write_out(imp, out, in, force);
		if (code == 0) {
			nx_import_write_report(imp, stdout);
			printf("wrote %s: check it with `nxdns check-config %s`\n", out, out);
		}
	} else {
		rc = nx_import_write_config(imp, stdout, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "nxdns import: %s\n", err);
		}
		code = rc == NX_ECONFIG ? 2 : rc ? 1 : 0;
		nx_import_write_report(imp, stderr);
	}
	if (code == 2) {
		/* the report says which items went in: it helps find what the loader refused */
		nx_import_write_report(imp, stderr);
	}
	nx_import_free(imp);
	return code;
}

/*
 * nxdns backup FILE --config CONFIG [--with-querylog] [--force]
 * nxdns restore FILE --config CONFIG [--with-querylog]
 *
 * The archive and its checks are import/backup.c's (the admin API uses the same code). Exit 0,
 * 1 when the archive is bad or a file cannot be read or written, 2 on usage errors.
 */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"
#include "conf/conf.h"
#include "import/backup.h"

static void usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: nxdns backup FILE --config CONFIG [--with-querylog] [--force]\n"
	    "       nxdns restore FILE --config CONFIG [--with-querylog]\n"
	    "  backup writes the configuration, the list state, the TLS identity and with\n"
	    "  --with-querylog the query log into FILE (tar.gz, mode 0600). restore checks the\n"
	    "  whole archive first and changes nothing if it is bad; --with-querylog also\n"
	    "  replaces the query log (the server must be stopped for that).\n");
}

/* ---- commands ----------------------------------------------------------------------------- */

static int parse(int argc, char **argv, const char **config, bool *qlog, bool *force)
{
	static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
					     {"with-querylog", no_argument, NULL, 'q'},
					     {"force", no_argument, NULL, 'f'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:qfh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			*config = optarg;
			break;
		case 'q':
			*qlog = true;
			break;
		case 'f':
			*force = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 1 || !*config) {
		usage(stderr);
		return 2;
	}
	return -1;
}

int nx_cli_backup(int argc, char **argv)
{
	const char *config = NULL;
	bool qlog = false, force = false;
	int rc = parse(argc, argv, &config, &qlog, &force);
	if (rc >= 0) {
		return rc;
	}
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	if (nx_conf_load(config, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "nxdns backup: %s\n", err);
		return 2;
	}
	const char *file = argv[optind];
	struct stat st;
	if (!force && stat(file, &st) == 0) {
		fprintf(stderr, "nxdns backup: %s exists (--force replaces it)\n", file);
		nx_conf_free(c);
		return 2;
	}
	size_t files = 0;
	char berr[4200];
	rc = nx_backup_write(file, config, c->state_dir, qlog, &files, berr, sizeof(berr));
	nx_conf_free(c);
	if (rc) {
		fprintf(stderr, "nxdns backup: %s\n", berr);
		return 1;
	}
	printf("wrote %s: the configuration, %zu list and TLS files%s\n", file, files,
	       qlog ? ", the query log" : "");
	return 0;
}

int nx_cli_restore(int argc, char **argv)
{
	const char *config = NULL;
	bool qlog = false, force = false;
	int rc = parse(argc, argv, &config, &qlog, &force);
	if (rc >= 0) {
		return rc;
	}
	const char *file = argv[optind];
	struct nx_backup_restored res;
	char rerr[4200];
	rc = nx_backup_restore(file, config, qlog ? NX_BACKUP_QUERYLOG : 0, NULL, NULL, &res, rerr,
			       sizeof(rerr));
	if (rc == -EIO) {
		fprintf(stderr, "nxdns restore: %s; the restore stopped part way\n", rerr);
		return 1;
	}
	if (rc) {
		fprintf(stderr, "nxdns restore: %s; nothing was changed\n", rerr);
		return 1;
	}
	printf("restored %s from %s: the configuration (the previous one is %s.bak)%s%s%s\n"
	       "start the server again (or restart it) to use them\n",
	       config, file, config, res.lists ? ", the list state" : "",
	       res.tls ? ", the TLS identity" : "", res.querylog ? ", the query log" : "");
	return 0;
}

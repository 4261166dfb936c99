#include "cli/cli.h"

#include "filter/lists.h"

#include <stdio.h>
#include <string.h>

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct cmd cmds[] = {
	{"serve", nx_cli_serve, "run the DNS server (--config FILE)"},
	{"check-config", nx_cli_check_config, "validate a configuration file and exit"},
	{"config-docs", nx_cli_config_docs, "print docs/configuration.md generated from the schema"},
	{"lookup", nx_cli_lookup, "print the running daemon's decision for names (--config FILE [--client IP] [--type T])"},
	{"update", nx_cli_update, "download, compile and rebuild the blocklists now (--offline, --json)"},
	{"compile", nx_cli_compile, "compile one blocklist file into its bodies (INPUT OUTDIR)"},
	{"snapshot-build", nx_cli_snapshot_build, "build a snapshot from compiled bodies (OUT DIR/NAME...)"},
	{"lookup-snapshot", nx_cli_lookup_snapshot, "match names against a snapshot file (SNAP NAME...)"},
	{"passwd", nx_cli_passwd, "set the admin password (--config FILE; stdin or prompt)"},
	{"memory", nx_cli_memory, "print a running daemon's memory ledger (its control socket, or --admin URL --token T)"},
	{"version", nx_cli_version, "print the version"},
	{"cert", nx_cli_cert, "write a self-signed TLS certificate and print its pin (--self-signed DIR)"},
	{"backup", nx_cli_backup, "write config, list state and optionally the query log to an archive (FILE --config CONFIG)"},
	{"restore", nx_cli_restore, "restore a backup archive, changing nothing if it is bad (FILE --config CONFIG)"},
	{"import", nx_cli_import, "convert Pi-hole or AdGuard Home settings (pihole ZIP | adguardhome YAML [-o OUT])"},
};

static void usage(FILE *fp)
{
	fprintf(fp, "usage: nxdns <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		fprintf(fp, "  %-14s %s\n", cmds[i].name, cmds[i].help);
	}
}

int nx_cli_main(int argc, char **argv)
{
	/* libcurl is not loaded here: only commands that download load it (src/filter/curl.h),
	 * so `serve` with path sources never maps it. */
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		return nx_cli_version(argc - 1, argv + 1);
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) == 0) {
			int rc = cmds[i].fn(argc - 1, argv + 1);
			/* the main thread ends by returning from main, which runs no thread-exit
			 * destructor: hand back its PCRE2 working block (lookups, admin API) */
			nx_filter_lists_thread_done();
			return rc;
		}
	}
	fprintf(stderr, "nxdns: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

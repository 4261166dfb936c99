#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"
#include "daemon/daemon.h"

int nx_cli_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *config = "/etc/nxdns/nxdns.yaml";
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config = optarg;
			break;
		case 'h':
			printf("usage: nxdns serve [--config FILE]\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "nxdns serve: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	return nx_daemon_run(config);
}

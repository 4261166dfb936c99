#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "conf/conf.h"

int nx_cli_check_config(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: nxdns check-config FILE\n");
		return 2;
	}
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	if (nx_conf_load(argv[1], &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	printf("%s: ok\n", argv[1]);
	nx_conf_free(c);
	return 0;
}

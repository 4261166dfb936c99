#include <stdio.h>

#include "cli/cli.h"
#include "conf/conf.h"

int nx_cli_config_docs(int argc, char **argv)
{
	nx_conf_write_docs(stdout);
	return 0;
}

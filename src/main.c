/* nxdns: subcommand dispatch only. */
#include "cli/cli.h"

int main(int argc, char **argv)
{
	return nx_cli_main(argc, argv);
}

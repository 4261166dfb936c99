#include <stdio.h>
#include <uv.h>

#include "cli/cli.h"

#ifndef NX_VERSION
#define NX_VERSION "0.1.0"
#endif

int nx_cli_version(int argc, char **argv)
{
	printf("nxdns %s (libuv %s)\n", NX_VERSION, uv_version_string());
	return 0;
}

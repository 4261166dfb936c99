/*
 * Subcommands. Each returns the process exit code: 0 ok, 1 runtime failure, 2 usage or
 * configuration error.
 */
#pragma once

int nx_cli_main(int argc, char **argv);
int nx_cli_serve(int argc, char **argv);
int nx_cli_check_config(int argc, char **argv);
int nx_cli_version(int argc, char **argv);
int nx_cli_config_docs(int argc, char **argv);
int nx_cli_memory(int argc, char **argv);
int nx_cli_passwd(int argc, char **argv);
int nx_cli_lookup(int argc, char **argv);
int nx_cli_update(int argc, char **argv);
int nx_cli_compile(int argc, char **argv);
int nx_cli_snapshot_build(int argc, char **argv);
int nx_cli_lookup_snapshot(int argc, char **argv);
int nx_cli_cert(int argc, char **argv);
int nx_cli_import(int argc, char **argv);
int nx_cli_backup(int argc, char **argv);
int nx_cli_restore(int argc, char **argv);

/*
 * The daemon: composition root. Loads the config, opens every listener on N worker loops (one
 * thread each), runs the control loop (signals, reload, admin HTTP) and shuts down cleanly.
 * Thread count is fixed at start: 1 control + listener.workers.
 */
#pragma once

/* Run until SIGTERM/SIGINT. Returns the exit code: 0 ok, 1 runtime failure, 2 config error. */
int nx_daemon_run(const char *config_path);

/*
 * nxdns update --config FILE [--offline] [--json]
 * What the daemon's scheduled refresh does, now (like `pihole -g`): download every URL source
 * (conditional GET; skipped with --offline), compile what changed, rebuild the snapshot when
 * some source's bodies changed, and print each source's status and the snapshot's totals.
 * A running daemon picks the new snapshot up on SIGHUP.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/rand.h"
#include "cli/cli.h"
#include "conf/conf.h"
#include "daemon/lists.h"
#include "filter/fetch.h"

int nx_cli_update(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"offline", no_argument, NULL, 'o'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *config = "/etc/nxdns/nxdns.yaml";
	int offline = 0, as_json = 0, o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:ojh", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config = optarg;
			break;
		case 'o':
			offline = 1;
			break;
		case 'j':
			as_json = 1;
			break;
		case 'h':
			printf("usage: nxdns update --config FILE [--offline] [--json]\n");
			return 0;
		default:
			return 2;
		}
	}
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	if (nx_conf_load(config, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	nx_rand_init();
	if (!offline) {
		nx_fetch_global_init(); /* libcurl once for every source; a failure shows per source */
	}
	static struct nx_lists lists;
	nx_lists_init(&lists, c->state_dir);
	bool changed = false;
	int rc = nx_lists_sync(&lists, c, offline ? 0 : NX_LISTS_FETCH, &changed);
	json_t *srcs = json_array();
	int failed = 0;
	for (unsigned i = 0; i < lists.n; i++) {
		const struct nx_source_status *st = &lists.st[i];
		failed += st->last_error[0] != 0;
		json_array_append_new(
			srcs, json_pack("{s:s, s:b, s:s, s:b, s:I, s:I, s:I, s:I, s:s}", "name",
					st->name, "enabled", st->enabled, "status",
					st->last_error[0] ? "error" : "ok", "changed", st->changed,
					"list", (json_int_t)st->n_list, "wild", (json_int_t)st->n_wild,
					"allow", (json_int_t)st->n_allow, "skipped",
					(json_int_t)st->skipped, "error", st->last_error));
	}
	json_t *doc = json_pack(
		"{s:o, s:{s:I, s:I, s:I, s:b, s:b, s:I}, s:{s:i, s:I}, s:s}", "sources", srcs,
		"snapshot", "entries", (json_int_t)lists.entries, "bytes", (json_int_t)lists.bytes,
		"build_ms", (json_int_t)lists.build_ms, "rebuilt", lists.rebuilt, "incremental",
		lists.rebuilt && lists.build_incremental, "peak_build_bytes",
		(json_int_t)(lists.rebuilt ? lists.peak_build_bytes : 0), "compile", "threads",
		(int)lists.compile_threads, "peak_bytes", (json_int_t)lists.compile_peak_bytes,
		"result", rc < 0 ? nx_strerror(rc) : "ok");
	if (as_json) {
		char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		printf("%s\n", s);
		free(s);
	} else {
		for (unsigned i = 0; i < lists.n; i++) {
			const struct nx_source_status *st = &lists.st[i];
			printf("%-24s %-8s %9llu exact %9llu wildcard %7llu exceptions%s%s\n",
			       st->name, !st->enabled ? "disabled" : st->last_error[0] ? "ERROR" : "ok",
			       (unsigned long long)st->n_list, (unsigned long long)st->n_wild,
			       (unsigned long long)st->n_allow, st->last_error[0] ? "  " : "",
			       st->last_error);
		}
		printf("snapshot: %llu entries, %llu bytes%s, built in %llu ms\n",
		       (unsigned long long)lists.entries, (unsigned long long)lists.bytes,
		       lists.rebuilt ? "" : " (unchanged)", (unsigned long long)lists.build_ms);
	}
	json_decref(doc);
	nx_lists_deinit(&lists);
	nx_conf_free(c);
	return rc < 0 ? 1 : (failed ? 1 : 0);
}

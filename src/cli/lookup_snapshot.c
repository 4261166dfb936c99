/*
 * Snapshot subcommands for people and scripts (the daemon-level `nxdns lookup --config` and
 * `nxdns update` build on the same library calls):
 *
 *   nxdns snapshot-build [--json] [--seed N] OUT.nxs DIR/NAME...
 *       builds a snapshot from compiled sources (bodies DIR/NAME.list .wild .allow), source i
 *       = i-th argument; prints entries, bytes, bytes/entry, build_ms, peak build memory.
 *   nxdns lookup-snapshot [--sources MASK] SNAPSHOT NAME...   (or "-": names on stdin)
 *       prints one JSON object per name: name, action, reason, matched, source.
 *
 * Exit: 0 ok, 1 runtime failure, 2 usage.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "filter/compile.h"
#include "filter/snapshot.h"

/* until cli/cli.h declares them (lead) */
int nx_cli_snapshot_build(int argc, char **argv);
int nx_cli_lookup_snapshot(int argc, char **argv);

int nx_cli_snapshot_build(int argc, char **argv)
{
	bool json = false;
	struct nx_filter_snap_build_opts o = {0};
	const char *out = NULL;
	struct nx_filter_snap_source src[NX_FILTER_SOURCES_MAX + 1];
	char dirs[NX_FILTER_SOURCES_MAX + 1][4096];
	unsigned n = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			o.seed = strtoull(argv[++i], NULL, 0);
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: nxdns snapshot-build [--json] [--seed N] OUT.nxs "
					"DIR/NAME...\n");
			return 2;
		} else if (!out) {
			out = argv[i];
		} else if (n > NX_FILTER_SOURCES_MAX) {
			fprintf(stderr, "nxdns snapshot-build: at most %d sources\n",
				NX_FILTER_SOURCES_MAX);
			return 2;
		} else {
			snprintf(dirs[n], sizeof(dirs[n]), "%s", argv[i]);
			char *slash = strrchr(dirs[n], '/');
			if (slash) {
				*slash = '\0';
				src[n] = (struct nx_filter_snap_source){slash + 1, dirs[n]};
			} else {
				src[n] = (struct nx_filter_snap_source){dirs[n], "."};
			}
			n++;
		}
	}
	if (!out) {
		fprintf(stderr,
			"usage: nxdns snapshot-build [--json] [--seed N] OUT.nxs DIR/NAME...\n");
		return 2;
	}
	struct nx_filter_snap_build_report rep;
	int rc = nx_filter_snap_build(out, src, n, &o, &rep);
	if (rc != 0) {
		fprintf(stderr, "nxdns snapshot-build: %s: %s\n", out, nx_strerror(rc));
		return 1;
	}
	double per = rep.entries ? (double)rep.bytes / (double)rep.entries : 0;
	if (json) {
		json_t *j = json_pack(
		    "{s:I, s:I, s:f, s:i, s:I, s:I, s:i}", "entries", (json_int_t)rep.entries,
		    "bytes", (json_int_t)rep.bytes, "bytes_per_entry", per, "bucket_bits",
		    (int)rep.bucket_bits, "build_ms", (json_int_t)rep.build_ms, "peak_build_bytes",
		    (json_int_t)rep.peak_build_bytes, "sources", (int)rep.sources);
		json_dumpf(j, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		printf("\n");
		json_decref(j);
	} else {
		printf("snapshot %s: %u sources, %llu entries, %llu bytes (%.2f B/entry), k=%u, "
		       "%llu ms, peak build memory %llu bytes\n",
		       out, rep.sources, (unsigned long long)rep.entries,
		       (unsigned long long)rep.bytes, per, rep.bucket_bits,
		       (unsigned long long)rep.build_ms, (unsigned long long)rep.peak_build_bytes);
	}
	return 0;
}

/* Lower-case, drop one trailing dot; Unicode names become punycode (people type them). */
static bool query_text(const char *in, char *out, size_t *len)
{
	size_t n = strlen(in);
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)in[i] >= 0x80) {
			return nx_filter_name_norm(in, n, out, len) == NX_FILTER_SKIP_NONE;
		}
	}
	if (n > 0 && in[n - 1] == '.') {
		n--;
	}
	if (n > NX_FILTER_NAME_MAX) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		out[i] = (char)(in[i] >= 'A' && in[i] <= 'Z' ? in[i] + 32 : in[i]);
	}
	out[n] = '\0';
	*len = n;
	return true;
}

static void lookup_one(const struct nx_filter_snap *s, const char *name, uint64_t mask)
{
	char text[NX_FILTER_NAME_MAX + 1];
	size_t len = 0;
	struct nx_filter_result r;
	nx_filter_result_clear(&r);
	if (query_text(name, text, &len)) {
		nx_filter_snap_match(s, text, len, mask, &r);
	}
	json_t *j = json_object();
	json_object_set_new(j, "name", json_string(name));
	json_object_set_new(j, "action", json_string(nx_filter_action_name(r.action)));
	json_object_set_new(j, "reason", json_string(nx_filter_reason_name(r.reason)));
	json_object_set_new(j, "matched",
			    r.matched_len ? json_stringn(text + r.matched_off, r.matched_len)
					  : json_null());
	const char *src = r.source >= 0 ? nx_filter_snap_source_name(s, (unsigned)r.source) : NULL;
	json_object_set_new(j, "source", src ? json_string(src) : json_null());
	json_dumpf(j, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	printf("\n");
	json_decref(j);
}

int nx_cli_lookup_snapshot(int argc, char **argv)
{
	uint64_t mask = ~0ull;
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		if (strcmp(argv[i], "--sources") == 0 && i + 1 < argc) {
			mask = strtoull(argv[++i], NULL, 0);
		} else {
			break;
		}
	}
	if (argc - i < 2) {
		fprintf(stderr,
			"usage: nxdns lookup-snapshot [--sources MASK] SNAPSHOT NAME...|-\n");
		return 2;
	}
	struct nx_filter_snap *s = NULL;
	int rc = nx_filter_snap_open(argv[i], &s);
	if (rc != 0) {
		fprintf(stderr, "nxdns lookup-snapshot: %s: %s%s\n", argv[i], nx_strerror(rc),
			rc == NX_EFORMAT ? " (another snapshot format version: rebuild it with "
					   "nxdns snapshot-build)"
					 : "");
		return 1;
	}
	for (int k = i + 1; k < argc; k++) {
		if (strcmp(argv[k], "-") == 0) {
			char line[1100];
			while (fgets(line, sizeof(line), stdin)) {
				line[strcspn(line, "\r\n")] = '\0';
				if (line[0]) {
					lookup_one(s, line, mask);
				}
			}
		} else {
			lookup_one(s, argv[k], mask);
		}
	}
	nx_filter_snap_free(s);
	return 0;
}

/*
 * `nxdns compile [--format F] [--name N] [--run-mib N] [--side] [--hosts-listed] [--subdomains]
 *  [--json] INPUT OUTDIR`
 *
 * Compiles one list file into OUTDIR/<name>.list .wild .allow .meta and prints the report
 * (text, or the meta JSON with --json). <name> defaults to INPUT's file name without its
 * extension. Exit: 0 ok, 1 runtime failure, 2 usage.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "filter/compile.h"


static void usage(FILE *f)
{
	fprintf(f, "usage: nxdns compile [--format auto|hosts|domains|adblock|wildcard] "
		   "[--name NAME] [--run-mib N] [--side] [--hosts-listed] [--subdomains] [--json] "
		   "INPUT OUTDIR\n"
		   "  --side          rules with modifiers, regexes, URL patterns -> NAME.side\n"
		   "  --hosts-listed  hosts lines with a non-null address answer with it (implies "
		   "--side)\n"
		   "  --subdomains    plain entries also cover every name under them\n");
}

/* Default source name: file name without directory and last extension, made safe. */
static void default_name(const char *input, char *out, size_t cap)
{
	const char *base = strrchr(input, '/');
	base = base ? base + 1 : input;
	snprintf(out, cap, "%s", base);
	char *dot = strrchr(out, '.');
	if (dot && dot != out) {
		*dot = '\0';
	}
	for (char *p = out; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.')) {
			*p = '_';
		}
	}
	if (out[0] == '.' || out[0] == '\0') {
		out[0] = '_';
	}
}

static void print_text(const struct nx_filter_compile_report *r)
{
	printf("source %s (format %s): %llu lines, %llu bytes, sha256 %s\n", r->name, r->format,
	       (unsigned long long)r->lines, (unsigned long long)r->input_bytes, r->input_sha256);
	printf("  bodies: list %llu, wild %llu, allow %llu (sub %llu, exact %llu)\n",
	       (unsigned long long)r->n_list, (unsigned long long)r->n_wild,
	       (unsigned long long)r->n_allow, (unsigned long long)r->n_allow_sub,
	       (unsigned long long)r->n_allow_exact);
	printf("  comments %llu, blank %llu, rules used %llu, $important as plain %llu, "
	       "$badfilter %llu (cancelled %llu)\n",
	       (unsigned long long)r->comments, (unsigned long long)r->blank,
	       (unsigned long long)r->rules_used, (unsigned long long)r->important,
	       (unsigned long long)r->badfilter_rules, (unsigned long long)r->badfilter_cancelled);
	printf("  skipped %llu\n", (unsigned long long)r->skipped_total);
	for (int s = 1; s < NX_FILTER_SKIP__COUNT; s++) {
		if (!r->skipped[s]) {
			continue;
		}
		printf("    %-16s %8llu  lines", nx_filter_skip_name((enum nx_filter_skip)s),
		       (unsigned long long)r->skipped[s]);
		for (int k = 0; k < NX_FILTER_SKIP_LINES && r->skip_lines[s][k]; k++) {
			printf("%s%llu", k ? "," : " ", (unsigned long long)r->skip_lines[s][k]);
		}
		printf("\n");
	}
	printf("  %llu ms, sort runs %u, peak build memory %llu bytes\n",
	       (unsigned long long)r->compile_ms, r->sort_runs,
	       (unsigned long long)r->peak_build_bytes);
}

int nx_cli_compile(int argc, char **argv)
{
	struct nx_filter_compile_opts o = {.format = NX_FILTER_FMT_AUTO};
	bool json = false;
	const char *pos[2];
	int npos = 0;
	char name[NX_FILTER_SOURCE_NAME_MAX + 1] = "";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--json") == 0) {
			json = true;
		} else if (strcmp(a, "--format") == 0 && i + 1 < argc) {
			if (nx_filter_format_parse(argv[++i], &o.format) != 0) {
				fprintf(stderr, "nxdns compile: unknown format '%s'\n", argv[i]);
				return 2;
			}
		} else if (strcmp(a, "--name") == 0 && i + 1 < argc) {
			snprintf(name, sizeof(name), "%s", argv[++i]);
		} else if (strcmp(a, "--run-mib") == 0 && i + 1 < argc) {
			long mib = strtol(argv[++i], NULL, 10);
			if (mib <= 0 || mib > 4096) {
				fprintf(stderr, "nxdns compile: --run-mib 1..4096\n");
				return 2;
			}
			o.run_bytes = (size_t)mib << 20;
		} else if (strcmp(a, "--side") == 0) {
			o.side = true;
		} else if (strcmp(a, "--hosts-listed") == 0) {
			o.side = o.hosts_listed = true;
		} else if (strcmp(a, "--subdomains") == 0) {
			o.subdomains = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (a[0] == '-' && a[1] != '\0') {
			usage(stderr);
			return 2;
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (npos != 2) {
		usage(stderr);
		return 2;
	}
	if (!name[0]) {
		default_name(pos[0], name, sizeof(name));
	}
	if (!nx_filter_source_name_ok(name)) {
		fprintf(stderr, "nxdns compile: bad source name '%s' ([A-Za-z0-9_.-], <= %d)\n",
			name, NX_FILTER_SOURCE_NAME_MAX);
		return 2;
	}
	o.name = name;
	o.origin = pos[0];
	struct nx_filter_compile_report rep;
	memset(&rep, 0, sizeof(rep));
	if (mkdir(pos[1], 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "nxdns compile: cannot create %s: %s\n", pos[1], strerror(errno));
		return 1;
	}
	if (access(pos[0], R_OK) < 0) {
		fprintf(stderr, "nxdns compile: %s: %s\n", pos[0], strerror(errno));
		return 1;
	}
	int rc = nx_filter_compile_file(pos[0], pos[1], &o, &rep);
	if (rc != 0) {
		/* the input was readable: a failure now is about the output or the content */
		fprintf(stderr, "nxdns compile: %s -> %s: %s\n", pos[0], pos[1], nx_strerror(rc));
		return 1;
	}
	if (json) {
		json_t *j = nx_filter_compile_report_json(&rep);
		if (!j || json_dumpf(j, stdout, JSON_COMPACT | JSON_SORT_KEYS) != 0) {
			json_decref(j);
			return 1;
		}
		json_decref(j);
		printf("\n");
	} else {
		print_text(&rep);
	}
	return 0;
}

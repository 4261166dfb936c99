/*
 * docs/configuration.md and the example configuration, generated from the schema table.
 */
#include <string.h>

#include "conf/conf.h"
#include "conf/impl.h"

/* "listener.dns" -> section length 9 ("listener."), "" for a top-level key. */
static size_t section_len(const char *path)
{
	const char *dot = strrchr(path, '.');
	return dot ? (size_t)(dot - path) + 1 : 0;
}

void nx_conf_write_example(FILE *fp)
{
	const char *prev = "";
	size_t prev_sec = 0;
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		const struct nx_conf_key *k = &nx_conf_keys[i];
		size_t sec = section_len(k->path);
		/* Components shared with the previous key's section are already open. */
		size_t common = 0, depth = 0;
		for (size_t j = 0; j < sec && j < prev_sec && k->path[j] == prev[j]; j++) {
			if (k->path[j] == '.') {
				common = j + 1;
				depth++;
			}
		}
		for (size_t j = common; j < sec;) {
			size_t clen = strcspn(k->path + j, ".");
			fprintf(fp, "%*s%.*s:\n", (int)(2 * depth), "", (int)clen, k->path + j);
			j += clen + 1;
			depth++;
		}
		fprintf(fp, "%*s%s: %s\n", (int)(2 * depth), "", k->path + sec,
			k->example ? k->example : k->def);
		prev = k->path;
		prev_sec = sec;
	}
}

/* The docs' words for an apply mode (conf.h: enum nx_conf_apply). */
static const char *apply_text(uint8_t apply)
{
	switch (apply) {
	case NX_CONF_APPLY_LIVE:
		return "live";
	case NX_CONF_APPLY_RELOAD:
		return "on reload";
	case NX_CONF_APPLY_RESTART:
		return "after a restart";
	}
	return "?";
}

static const char intro[] =
	"# nxdns configuration\n"
	"\n"
	"<!-- Generated from src/conf/schema.c by `nxdns config-docs`; do not edit by hand. "
	"A unit test fails when this file and the schema disagree. -->\n"
	"\n"
	"nxdns reads one YAML file, `nxdns.yaml`. Every key is optional: a key that is not "
	"in the file takes its default, and an empty file is a valid configuration. The "
	"dotted names below are nested mappings in the file: `listener.workers` is `workers:` "
	"under `listener:`.\n"
	"\n"
	"The file is checked completely before it is used. An unknown key, a duplicate key, a "
	"value of the wrong type, a bad address or an out-of-range number is an error reported "
	"as `file:line:col: message` at the offending value; nxdns then refuses to start, and "
	"a reload keeps the running configuration. `nxdns check-config` checks a file "
	"without starting the server.\n"
	"\n"
	"Addresses are IP addresses, not host names: `addr:port`, with IPv6 in brackets "
	"(`[::1]:53`). Where a port is optional the key says so. Only an encrypted upstream "
	"server (`tls://`, `https://`) may name its host; it is resolved at start through "
	"`upstream.bootstrap`. Client address ranges are `addr/prefix` (`192.168.1.0/24`, "
	"`fd00::/8`) or a single address.\n"
	"\n"
	"Durations are seconds, or a number with a unit: `s`, `m`, `h` or `d` (`90m`, "
	"`24h`). Lists of mappings (sources, clients, local records) may be written in block "
	"or flow style; within them too, unknown keys are errors.\n"
	"\n"
	"Each key says when a change takes effect (**Applies**): *live* — as soon as the new "
	"configuration is in effect, which is at once for a change through the admin API "
	"(it rewrites the file and reloads) and at the next reload (`SIGHUP`) for an edit of "
	"the file; *on reload* — read again at a reload, but only what starts afterwards sees "
	"it (new connections, new sessions, the list rebuild or the next refresh round); "
	"*after a restart* — read at start only: a reload keeps the running value and names "
	"the key in the log, and the settings API answers it in `restart_required`. A key "
	"that says *the settings API* can also be changed with `PUT /api/settings`; `GET /api/schema` "
	"serves this table to the web UI.\n"
	"\n"
	"## Example\n"
	"\n"
	"Every key, at its default except where a value shows the syntax "
	"(the DoT and DoH listeners, `tls`, the upstream servers, `forward_zones` and "
	"`bootstrap`, the access lists, the filter's sources, rules and block addresses, "
	"`groups`, `clients` and `local_records`):\n"
	"\n";

void nx_conf_write_docs(FILE *fp)
{
	fputs(intro, fp);
	fputs("```yaml\n", fp);
	nx_conf_write_example(fp);
	fputs("```\n\n## Keys\n", fp);
	for (size_t i = 0; i < nx_conf_n_keys; i++) {
		const struct nx_conf_key *k = &nx_conf_keys[i];
		char range[256] = "";
		if (k->type->range) {
			k->type->range(k, range, sizeof(range));
		}
		fprintf(fp, "\n### `%s`\n\n", k->path);
		fprintf(fp, "- Type: %s\n", k->type->name);
		fprintf(fp, "- Default: `%s`\n", k->def);
		if (range[0]) {
			fprintf(fp, "- %s: %s\n", k->choices ? "Values" : "Range", range);
		}
		fprintf(fp, "- Applies: %s\n", apply_text(k->apply));
		if (k->editable) {
			fputs("- Changed by: the file, or the settings API\n", fp);
		}
		fprintf(fp, "\n%s\n", k->doc);
	}
	if (nx_conf_n_moved_keys > 0) {
		fputs("\n## Keys that moved\n\nA file that still uses one of these is refused with "
		      "the message below at the old key's position.\n\n", fp);
		for (size_t i = 0; i < nx_conf_n_moved_keys; i++) {
			fprintf(fp, "- `%s`: %s.\n", nx_conf_moved_keys[i].path,
				nx_conf_moved_keys[i].hint);
		}
	}
}

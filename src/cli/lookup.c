/*
 * nxdns lookup --config FILE [--client IP] [--type TYPE] NAME... | -
 * The running daemon's decision for each name, one JSON object per line (policy/policy.h: the
 * same ladder and the same object as /api/lookup). It decides on the daemon's own state: the
 * snapshot the daemon built in the config's state_dir, and the live pause state read over the
 * control socket state_dir/control.sock. It never compiles, downloads or guesses: when that
 * state is not there (no daemon for this config, a state_dir it cannot read, a snapshot built
 * for other sources) it says so and exits 1, rather than answer "allow" for a name the daemon
 * blocks. Exit: 0 every name decided, 1 a name was invalid or the state is missing, 2 usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "admin/control.h"
#include "base/err.h"
#include "cli/cli.h"
#include "conf/conf.h"
#include "dns/msg.h"
#include "policy/policy.h"

#define USAGE "usage: nxdns lookup --config FILE [--client IP] [--type A|AAAA|...] NAME... | -\n"
/* The daemon answers the control socket from its control loop; a list rebuild in progress can
 * hold it for a moment (it yields to requests between steps). */
#define CONTROL_TIMEOUT_MS 5000

static int lookup_one(const struct nx_policy *p, uint16_t qtype, const struct sockaddr *client,
		      const char *name)
{
	const char *err = NULL;
	json_t *j = nx_policy_lookup_json(p, name, qtype, client, NULL, &err);
	if (!j) {
		j = json_pack("{s:s, s:s, s:s}", "name", name, "action", "error", "error", err);
	}
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	printf("%s\n", s ? s : "{\"action\":\"error\",\"error\":\"out of memory\"}");
	free(s);
	json_decref(j);
	return err ? 1 : 0;
}

/* The live pause state over the control socket. 0 with *paused, or 1 (said why). */
static int read_pause(const struct nx_conf *c, bool *paused)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", c->state_dir, NX_ADMIN_CONTROL_SOCKET);
	unsigned status = 0;
	char *body = NULL;
	size_t len = 0;
	int rc = nx_admin_control_get(path, "/api/filter/pause", CONTROL_TIMEOUT_MS, &status, &body,
				      &len);
	if (rc < 0) {
		/* A relative state_dir is the daemon's working directory's: say which one we
		 * tried, rather than decide on whatever ./var this shell happens to have. */
		char cwd[4096] = "";
		bool relative = c->state_dir[0] != '/' && getcwd(cwd, sizeof(cwd));
		fprintf(stderr,
			"nxdns lookup: cannot read the daemon's pause state from %s: %s%s%s%s%s\n",
			path, nx_strerror(rc),
			rc == -ENOENT || rc == -ECONNREFUSED
			    ? " (is nxdns running with this config? see --config)"
			: rc == -EACCES ? " (the control socket is for root and the service user)"
					: "",
			relative ? "; state_dir is relative, so it was looked for in " : "",
			relative ? cwd : "",
			relative ? ": run lookup from the daemon's working directory" : "");
		return 1;
	}
	json_error_t je;
	json_t *j = status == 200 ? json_loadb(body, len, 0, &je) : NULL;
	json_t *v = json_object_get(j, "paused");
	if (!json_is_boolean(v)) {
		fprintf(stderr, "nxdns lookup: %s: unexpected pause answer (HTTP %u)%s%s\n", path,
			status, body ? ": " : "", body ? body : "");
		json_decref(j);
		free(body);
		return 1;
	}
	*paused = json_is_true(v);
	json_decref(j);
	free(body);
	return 0;
}

/* The daemon's snapshot, checked against the config's sources (index = eligibility bit). */
static int open_snapshot(const struct nx_conf *c, struct nx_filter_snap **out)
{
	*out = NULL;
	char path[4096];
	snprintf(path, sizeof(path), "%s/snapshot.nxs", c->state_dir);
	int rc = nx_filter_snap_open(path, out);
	if (rc == -ENOENT && c->n_sources == 0) {
		return 0; /* no sources: the daemon decides without a snapshot too */
	}
	if (rc < 0) {
		fprintf(stderr, "nxdns lookup: cannot open the daemon's snapshot %s: %s%s\n", path,
			nx_strerror(rc),
			rc == -ENOENT ? " (has the daemon for this config built its lists?)"
			: rc == NX_EFORMAT
			    ? " (an earlier nxdns wrote it: restart the daemon, which "
			      "rebuilds it from the compiled lists)"
			    : "");
		return 1;
	}
	unsigned n = nx_filter_snap_nsources(*out);
	bool same = n == c->n_sources;
	for (unsigned i = 0; same && i < n; i++) {
		same = strcmp(nx_filter_snap_source_name(*out, i), c->sources[i].name) == 0;
	}
	if (!same) {
		fprintf(stderr,
			"nxdns lookup: %s was built for other sources than %zu in the config "
			"(reload the daemon after editing filter.sources)\n",
			path, c->n_sources);
		nx_filter_snap_free(*out);
		*out = NULL;
		return 1;
	}
	return 0;
}

/* The side rules of the same compiled bodies, in the snapshot's source order, as the daemon
 * loads them (daemon/lists.c). A disabled source is an empty slot there: no .side read. */
static int open_side(const struct nx_conf *c, struct nx_filter_side **out)
{
	*out = NULL;
	static char dirs[NX_CONF_MAX_SOURCES][4096];
	struct nx_filter_snap_source srcs[NX_CONF_MAX_SOURCES];
	unsigned n = (unsigned)NX_MIN(c->n_sources, NX_CONF_MAX_SOURCES);
	for (unsigned i = 0; i < n; i++) {
		const struct nx_conf_source *s = &c->sources[i];
		if (s->enabled && c->filter_enabled) {
			snprintf(dirs[i], sizeof(dirs[i]), "%s/lists/%s", c->state_dir, s->name);
		} else {
			snprintf(dirs[i], sizeof(dirs[i]), "%s", c->state_dir);
		}
		srcs[i].name = s->name;
		srcs[i].dir = dirs[i];
	}
	int rc = nx_filter_side_open(srcs, n, out);
	if (rc < 0) {
		fprintf(stderr, "nxdns lookup: cannot load the side rules in %s/lists: %s\n",
			c->state_dir, nx_strerror(rc));
		return 1;
	}
	return 0;
}

static int parse_type(const char *s, uint16_t *out)
{
	static const struct {
		const char *name;
		uint16_t type;
	} types[] = {
	    {"A", NX_DNS_T_A},	       {"AAAA", NX_DNS_T_AAAA}, {"CNAME", NX_DNS_T_CNAME},
	    {"TXT", NX_DNS_T_TXT},     {"PTR", NX_DNS_T_PTR},	{"MX", NX_DNS_T_MX},
	    {"HTTPS", NX_DNS_T_HTTPS},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(types); i++) {
		if (!strcasecmp(s, types[i].name)) {
			*out = types[i].type;
			return 0;
		}
	}
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*s && !*end && v > 0 && v <= 65535) {
		*out = (uint16_t)v;
		return 0;
	}
	return -EINVAL;
}

int nx_cli_lookup(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"client", required_argument, NULL, 'C'},
	    {"type", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *config = "/etc/nxdns/nxdns.yaml";
	const char *client = "0.0.0.0";
	uint16_t qtype = NX_DNS_T_A;
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:C:t:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config = optarg;
			break;
		case 'C':
			client = optarg;
			break;
		case 't':
			if (parse_type(optarg, &qtype) < 0) {
				fprintf(stderr, "nxdns lookup: --type: not a record type: %s\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			printf(USAGE);
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, USAGE);
		return 2;
	}
	struct sockaddr_storage ss = {0};
	if (inet_pton(AF_INET, client, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		ss.ss_family = AF_INET;
	} else if (inet_pton(AF_INET6, client, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
	} else {
		fprintf(stderr, "nxdns lookup: --client: not an IP address: %s\n", client);
		return 2;
	}
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	if (nx_conf_load(config, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	int rc = 1;
	struct nx_filter_rules *rules = NULL;
	struct nx_filter_snap *snap = NULL;
	struct nx_filter_side *side = NULL, *user_side = NULL;
	struct nx_policy_badfilter *badfilter = NULL;
	bool paused = false;
	if (read_pause(c, &paused) != 0 || open_snapshot(c, &snap) != 0 ||
	    open_side(c, &side) != 0 || nx_policy_rules_build(c, &rules) < 0 ||
	    nx_policy_user_side_build(c, &user_side) < 0 ||
	    nx_policy_badfilter_build(c, &badfilter) < 0) {
		goto out;
	}
	struct nx_policy p = {
	    .c = c,
	    .rules = rules,
	    .snap = snap,
	    .side = side,
	    .user_side = user_side,
	    .badfilter = badfilter,
	    .paused = paused};
	const struct sockaddr *sa = (const struct sockaddr *)&ss;
	rc = 0;
	if (strcmp(argv[optind], "-") == 0) {
		char line[1100];
		while (fgets(line, sizeof(line), stdin)) {
			line[strcspn(line, "\r\n")] = 0;
			if (line[0]) {
				rc |= lookup_one(&p, qtype, sa, line);
			}
		}
	} else {
		for (int i = optind; i < argc; i++) {
			rc |= lookup_one(&p, qtype, sa, argv[i]);
		}
	}
out:
	nx_filter_rules_free(rules);
	nx_filter_side_free(user_side);
	nx_policy_badfilter_free(badfilter);
	nx_filter_side_free(side);
	nx_filter_snap_free(snap);
	nx_conf_free(c);
	return rc;
}

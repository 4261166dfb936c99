/*
 * nxdns lookup --config FILE [--client IP] NAME... | -
 * The daemon's decision for each name, one JSON object per line, on the snapshot in the
 * config's state_dir (compiled and built first when missing; never downloads).
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rand.h"
#include "cli/cli.h"
#include "conf/conf.h"
#include "daemon/decide.h"
#include "daemon/lists.h"
#include "dns/wire.h"

static const char *action_text(enum nx_filter_action a)
{
	switch (a) {
	case NX_FILTER_ACT_BLOCK:
		return "block";
	case NX_FILTER_ACT_LOCAL:
		return "local";
	default:
		return "allow";
	}
}

static int lookup_one(const struct nx_decide_ctx *d, const struct nx_client_policy *p,
		      const char *name)
{
	uint8_t wire[NX_DNS_NAME_MAX];
	json_t *j;
	int wl = nx_dns_name_from_text(name, wire);
	if (wl < 0) {
		j = json_pack("{s:s, s:s, s:s}", "name", name, "action", "error", "error",
			      "invalid name");
	} else {
		struct nx_filter_result r;
		enum nx_filter_action a = nx_decide(d, p, wire, (size_t)wl, &r);
		char matched[NX_DNS_TEXT_MAX] = "";
		if (r.matched_len > 0) {
			nx_dns_name_to_text(wire + r.matched_off, r.matched_len, matched,
					    sizeof(matched));
		}
		j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "name", name, "action", action_text(a),
			      "reason", nx_filter_reason_name((enum nx_filter_reason)r.reason),
			      "matched", matched, "source", nx_decide_source_name(d, &r));
	}
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	printf("%s\n", s);
	free(s);
	json_decref(j);
	return wl < 0 ? 1 : 0;
}

int nx_cli_lookup(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"client", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *config = "/etc/nxdns/nxdns.yaml";
	const char *client = "0.0.0.0";
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:C:h", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config = optarg;
			break;
		case 'C':
			client = optarg;
			break;
		case 'h':
			printf("usage: nxdns lookup --config FILE [--client IP] NAME... | -\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: nxdns lookup --config FILE [--client IP] NAME... | -\n");
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
	nx_rand_init();
	int rc = 1;
	struct nx_lists lists;
	nx_lists_init(&lists, c->state_dir);
	bool changed;
	struct nx_filter_rules *rules = NULL;
	if (nx_lists_sync(&lists, c, 0, &changed) < 0 || nx_decide_rules_build(c, &rules) < 0) {
		goto out;
	}
	struct nx_decide_ctx d = {.c = c, .rules = rules, .snap = lists.cur->snap};
	struct nx_client_policy p;
	nx_decide_policy(&d, (struct sockaddr *)&ss, NULL, &p);
	rc = 0;
	if (strcmp(argv[optind], "-") == 0) {
		char line[1100];
		while (fgets(line, sizeof(line), stdin)) {
			line[strcspn(line, "\r\n")] = 0;
			if (line[0]) {
				rc |= lookup_one(&d, &p, line);
			}
		}
	} else {
		for (int i = optind; i < argc; i++) {
			rc |= lookup_one(&d, &p, argv[i]);
		}
	}
out:
	nx_filter_rules_free(rules);
	nx_lists_deinit(&lists);
	nx_conf_free(c);
	return rc;
}

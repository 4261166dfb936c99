/*
 * nxdns memory [--config FILE] [--admin URL] [--token T] [--json]
 * Fetch GET /api/memory from a running daemon and print the owner table beside /proc's figures
 * and the unexplained remainder. By default over the daemon's control socket
 * (<state_dir>/control.sock, state_dir from --config): root and the service user need no
 * token. With --admin or --token, over the admin HTTP API as before.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/control.h"
#include "base/err.h"
#include "cli/cli.h"
#include "conf/conf.h"
#include "filter/curl.h"

#define CONTROL_TIMEOUT_MS 10000 /* the whole exchange; the daemon answers in milliseconds */

struct body {
	char *p;
	size_t n;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct body *b = ud;
	size_t add = size * nmemb;
	if (b->n + add > (1u << 20)) {
		return 0; /* the report is a few KiB; refuse anything absurd */
	}
	char *q = realloc(b->p, b->n + add + 1);
	if (!q) {
		return 0;
	}
	b->p = q;
	memcpy(b->p + b->n, ptr, add);
	b->n += add;
	b->p[b->n] = 0;
	return add;
}

static int print_report(char *text, const char *from, int as_json);

static double mib(json_int_t v)
{
	return (double)v / (1024.0 * 1024.0);
}

/* The report over the control socket of the daemon that runs `config`. 0, 1 (said why). */
static int fetch_control(const char *config, char **out)
{
	char err[NX_CONF_ERR_MAX];
	struct nx_conf *c = NULL;
	if (nx_conf_load(config, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "nxdns memory: %s\n", err);
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", c->state_dir, NX_ADMIN_CONTROL_SOCKET);
	nx_conf_free(c);
	unsigned status = 0;
	char *body = NULL;
	size_t len = 0;
	int rc =
	    nx_admin_control_get(path, "/api/memory", CONTROL_TIMEOUT_MS, &status, &body, &len);
	if (rc < 0) {
		fprintf(stderr, "nxdns memory: %s: %s%s\n", path, nx_strerror(rc),
			rc == -ENOENT || rc == -ECONNREFUSED
			    ? " (is nxdns running with this config? see --config)"
			: rc == -EACCES ? " (the control socket is for root and the service user; "
					  "or use --admin URL --token T)"
					: "");
		return 1;
	}
	if (status != 200) {
		fprintf(stderr, "nxdns memory: %s: HTTP %u: %s", path, status, body);
		free(body);
		return 1;
	}
	*out = body;
	return 0;
}

int nx_cli_memory(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"admin", required_argument, NULL, 'a'},
		{"token", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *config = "/etc/nxdns/nxdns.yaml";
	const char *admin = "http://127.0.0.1:8080";
	const char *token = getenv("NXDNS_TOKEN");
	bool http = false; /* --admin or --token: the admin API instead of the control socket */
	int as_json = 0, o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "c:a:t:jh", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config = optarg;
			break;
		case 'a':
			admin = optarg;
			http = true;
			break;
		case 't':
			token = optarg;
			http = true;
			break;
		case 'j':
			as_json = 1;
			break;
		case 'h':
			printf("usage: nxdns memory [--config FILE] [--json]\n"
			       "       nxdns memory --admin URL [--token TOKEN] [--json]\n"
			       "  Reads the daemon's control socket (<state_dir>/control.sock of FILE,\n"
			       "  default /etc/nxdns/nxdns.yaml) as root or the service user; with\n"
			       "  --admin or --token (or NXDNS_TOKEN with --admin), the admin API.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "nxdns memory: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char *report = NULL;
	const char *from = config;
	if (!http) {
		int rc = fetch_control(config, &report);
		if (rc) {
			return rc;
		}
		return print_report(report, from, as_json);
	}
	char url[512];
	snprintf(url, sizeof(url), "%s%s/api/memory", strstr(admin, "://") ? "" : "http://", admin);
	char why[512];
	const struct nx_curl *cu = nx_curl_acquire(why, sizeof(why));
	if (!cu) {
		fprintf(stderr, "nxdns memory: %s\n", why);
		return 1;
	}
	CURL *h = cu->easy_init();
	if (!h) {
		nx_curl_release();
		return 1;
	}
	struct body b = {0};
	struct curl_slist *hdrs = NULL;
	char auth[512];
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		hdrs = cu->slist_append(hdrs, auth);
	}
	cu->easy_setopt(h, CURLOPT_URL, url);
	cu->easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	cu->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	cu->easy_setopt(h, CURLOPT_WRITEDATA, &b);
	cu->easy_setopt(h, CURLOPT_TIMEOUT, 10L);
	CURLcode rc = cu->easy_perform(h);
	long status = 0;
	cu->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	const char *cerr = rc != CURLE_OK ? cu->easy_strerror(rc) : NULL;
	char msg[256];
	snprintf(msg, sizeof(msg), "%s", cerr ? cerr : "");
	cu->slist_free_all(hdrs);
	cu->easy_cleanup(h);
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		nx_curl_taint(); /* its resolver thread may outlive the transfer (filter/curl.h) */
	}
	nx_curl_release();
	if (rc != CURLE_OK || status != 200) {
		fprintf(stderr, "nxdns memory: %s: %s\n", url,
			rc != CURLE_OK ? msg : (b.p ? b.p : "HTTP error"));
		free(b.p);
		return 1;
	}
	return print_report(b.p, url, as_json);
}

/* Print the report (`text` is freed here) as JSON or as the table. */
static int print_report(char *text, const char *from, int as_json)
{
	if (as_json) {
		printf("%s%s", text, strchr(text, '\n') ? "" : "\n");
		free(text);
		return 0;
	}
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);
	free(text);
	if (!j) {
		fprintf(stderr, "nxdns memory: bad JSON from %s: %s\n", from, err.text);
		return 1;
	}
	printf("%-18s %12s %8s\n", "owner", "bytes", "count");
	size_t i;
	json_t *row;
	json_array_foreach(json_object_get(j, "owners"), i, row)
	{
		printf("%-18s %12lld %8lld\n", json_string_value(json_object_get(row, "owner")),
		       (long long)json_integer_value(json_object_get(row, "bytes")),
		       (long long)json_integer_value(json_object_get(row, "count")));
	}
	json_t *p = json_object_get(j, "process");
	json_t *hp = json_object_get(j, "heap");
	json_int_t ledger = json_integer_value(json_object_get(j, "ledger_bytes"));
	printf("\n%-18s %9.2f MiB\n", "ledger total", mib(ledger));
	printf("%-18s %9.2f MiB\n", "VmRSS", mib(json_integer_value(json_object_get(p, "vmrss"))));
	printf("%-18s %9.2f MiB\n", "  RssAnon", mib(json_integer_value(json_object_get(p, "rssanon"))));
	printf("%-18s %9.2f MiB\n", "  RssFile", mib(json_integer_value(json_object_get(p, "rssfile"))));
	printf("%-18s %9.2f MiB\n", "VmHWM", mib(json_integer_value(json_object_get(p, "vmhwm"))));
	printf("%-18s %9.2f MiB\n", "code (exe+libs)", mib(json_integer_value(json_object_get(p, "code"))));
	printf("%-18s %9.2f MiB\n", "snapshot resident",
	       mib(json_integer_value(json_object_get(p, "snapshot_resident"))));
	printf("%-18s %9lld\n", "threads", (long long)json_integer_value(json_object_get(p, "threads")));
	printf("%-18s %9.2f MiB\n", "heap in use", mib(json_integer_value(json_object_get(hp, "in_use"))));
	printf("%-18s %9.2f MiB\n", "heap free kept",
	       mib(json_integer_value(json_object_get(hp, "free_retained"))));
	printf("%-18s %9.2f MiB (%.0f%% of RSS: RSS - heap owners - snapshot resident - code)\n",
	       "unexplained",
	       mib(json_integer_value(json_object_get(j, "unexplained_bytes"))),
	       100.0 * json_real_value(json_object_get(j, "unexplained_share")));
	json_decref(j);
	return 0;
}

/*
 * nxdns memory [--admin URL] [--token T] [--json]
 * Fetch GET /api/memory from a running daemon and print the owner table beside /proc's figures
 * and the unexplained remainder.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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

static double mib(json_int_t v)
{
	return (double)v / (1024.0 * 1024.0);
}

int nx_cli_memory(int argc, char **argv)
{
	static const struct option opts[] = {
		{"admin", required_argument, NULL, 'a'},
		{"token", required_argument, NULL, 't'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *admin = "http://127.0.0.1:8080";
	const char *token = getenv("NXDNS_TOKEN");
	int as_json = 0, o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "a:t:jh", opts, NULL)) != -1) {
		switch (o) {
		case 'a':
			admin = optarg;
			break;
		case 't':
			token = optarg;
			break;
		case 'j':
			as_json = 1;
			break;
		case 'h':
			printf("usage: nxdns memory [--admin URL] [--token TOKEN] [--json]\n");
			return 0;
		default:
			return 2;
		}
	}
	char url[512];
	snprintf(url, sizeof(url), "%s%s/api/memory", strstr(admin, "://") ? "" : "http://", admin);
	CURL *h = curl_easy_init();
	if (!h) {
		return 1;
	}
	struct body b = {0};
	struct curl_slist *hdrs = NULL;
	char auth[512];
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		hdrs = curl_slist_append(hdrs, auth);
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
	CURLcode rc = curl_easy_perform(h);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK || status != 200) {
		fprintf(stderr, "nxdns memory: %s: %s\n", url,
			rc != CURLE_OK ? curl_easy_strerror(rc) : (b.p ? b.p : "HTTP error"));
		free(b.p);
		return 1;
	}
	if (as_json) {
		printf("%s\n", b.p);
		free(b.p);
		return 0;
	}
	json_error_t err;
	json_t *j = json_loads(b.p, 0, &err);
	free(b.p);
	if (!j) {
		fprintf(stderr, "nxdns memory: bad JSON from %s: %s\n", url, err.text);
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

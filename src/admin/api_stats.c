/*
 * Statistics and the query list from the query log: GET /api/stats/summary, /api/stats/history,
 * /api/stats/top, /api/queries.
 *
 * One reader connection (nx_qlog_reader) on <state_dir>/querylog.db, opened on first use, kept
 * open (reopened when state_dir changes or after an error) and closed at stop. The calls block
 * the control thread on SQLite: statistics read only the per-minute aggregates and the query
 * list is keyset-paginated on an index, so each is a few milliseconds even on a 1M-row log;
 * DNS is answered by other threads meanwhile. Times are wall-clock milliseconds.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/impl.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "querylog/querylog.h"

#define DEFAULT_SPAN_MS (24 * 3600 * 1000LL) /* statistics default to the last 24 hours */
#define DEFAULT_STEP_S 3600		     /* history buckets of an hour */

void nx_admin_qlog_close(struct nx_admin *a)
{
	nx_qlog_reader_close(a->qlog);
	a->qlog = NULL;
	a->qlog_path[0] = '\0';
}

/* The reader, or NULL after answering 503. */
static struct nx_qlog_reader *reader(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	const struct nx_conf *c = nx_admin_need_conf(req);
	if (!c) {
		return NULL;
	}
	char path[sizeof(a->qlog_path)];
	int n = snprintf(path, sizeof(path), "%s/querylog.db", c->state_dir ? c->state_dir : ".");
	if (n < 0 || (size_t)n >= sizeof(path)) {
		nx_admin_reply_error(req, 503, "query_log_unavailable", NULL,
				     "the state_dir path is too long");
		return NULL;
	}
	if (a->hooks.qlog_commit) {
		a->hooks.qlog_commit(a->hooks.ud);
	}
	if (a->qlog && strcmp(path, a->qlog_path) == 0) {
		return a->qlog;
	}
	nx_admin_qlog_close(a);
	int rc = nx_qlog_reader_open(path, &a->qlog);
	if (rc) {
		a->qlog = NULL;
		nx_admin_reply_error(req, 503, "query_log_unavailable", NULL,
				     "the query log %s cannot be read: %s", path, nx_strerror(rc));
		return NULL;
	}
	snprintf(a->qlog_path, sizeof(a->qlog_path), "%s", path);
	return a->qlog;
}

/* Answer a reader result: 200 with out, 400 with the field, else 500 (and reopen next time). */
static int answer(struct nx_admin_req *req, int rc, json_t *out, const char *bad_field)
{
	if (rc == 0) {
		return nx_admin_reply_json(req, 200, out);
	}
	if (rc == -EINVAL) {
		return nx_admin_reply_error(req, 400, "bad_request", bad_field, "invalid %s",
					    bad_field ? bad_field : "request");
	}
	nx_log(NX_LOG_WARN, "admin", "query log read failed: %s", nx_strerror(rc));
	nx_admin_qlog_close(req->admin);
	return nx_admin_reply_error(req, rc == -ENOMEM ? 503 : 500, "query_log_failed", NULL,
				    "the query log could not be read: %s", nx_strerror(rc));
}

/*
 * Integer query argument `key` in [min, max] into *out (def when absent). false after
 * answering 400 with the field.
 */
static bool arg_i64(struct nx_admin_req *req, const char *key, int64_t def, int64_t min,
		    int64_t max, int64_t *out)
{
	const char *v = nx_admin_req_arg(req, key);
	if (!v) {
		*out = def;
		return true;
	}
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (!*v || *end || errno || x < min || x > max) {
		nx_admin_reply_error(req, 400, "bad_request", key,
				     "%s must be an integer from %lld to %lld", key, (long long)min,
				     (long long)max);
		return false;
	}
	*out = x;
	return true;
}

/* from/to in ms: defaults [to - 24h, now). false after answering 400. */
static bool range(struct nx_admin_req *req, int64_t *from, int64_t *to)
{
	if (!arg_i64(req, "to", nx_now_wall_ms(), 1, INT64_MAX / 2, to) ||
	    !arg_i64(req, "from", *to - DEFAULT_SPAN_MS, 0, INT64_MAX / 2, from)) {
		return false;
	}
	if (*from >= *to) {
		nx_admin_reply_error(req, 400, "bad_request", "from", "from must be before to");
		return false;
	}
	return true;
}

int nx_admin_handle_stats_summary(struct nx_admin_req *req)
{
	int64_t from, to;
	if (!range(req, &from, &to)) {
		return 0;
	}
	struct nx_qlog_reader *r = reader(req);
	if (!r) {
		return 0;
	}
	json_t *out = NULL;
	int rc = nx_qlog_summary(r, from, to, &out);
	return answer(req, rc, out, rc == -EINVAL ? "from" : NULL);
}

int nx_admin_handle_stats_history(struct nx_admin_req *req)
{
	int64_t from, to, step;
	if (!range(req, &from, &to) ||
	    !arg_i64(req, "step", DEFAULT_STEP_S, 60, 30 * 86400, &step)) {
		return 0;
	}
	if (step % 60) {
		return nx_admin_reply_error(req, 400, "bad_request", "step",
					    "step must be a multiple of 60 seconds");
	}
	struct nx_qlog_reader *r = reader(req);
	if (!r) {
		return 0;
	}
	json_t *out = NULL;
	const char *bad = NULL;
	int rc = nx_qlog_history(r, from, to, (unsigned)step, &out, &bad);
	return answer(req, rc, out, bad);
}

int nx_admin_handle_stats_top(struct nx_admin_req *req)
{
	enum nx_qlog_top_kind kind = NX_QLOG_TOP_DOMAINS;
	const char *k = nx_admin_req_arg(req, "kind");
	if (k && nx_qlog_top_kind_parse(k, &kind)) {
		return nx_admin_reply_error(req, 400, "bad_request", "kind",
					    "kind must be domains, blocked or clients");
	}
	int64_t from, to, limit;
	if (!range(req, &from, &to) ||
	    !arg_i64(req, "limit", NX_QLOG_TOP_LIMIT_DEFAULT, 1, NX_QLOG_TOP_LIMIT_MAX, &limit)) {
		return 0;
	}
	struct nx_qlog_reader *r = reader(req);
	if (!r) {
		return 0;
	}
	json_t *out = NULL;
	const char *bad = NULL;
	int rc = nx_qlog_top(r, kind, from, to, (unsigned)limit, &out, &bad);
	if (rc == 0 && kind == NX_QLOG_TOP_CLIENTS) {
		size_t i;
		json_t *it;
		json_array_foreach(json_object_get(out, "items"), i, it)
		{
			const char *n = nx_admin_client_name(
			    req->admin, json_string_value(json_object_get(it, "key")), NULL);
			if (json_object_set_new(it, "client_name", n ? json_string(n) : json_null())) {
				rc = -ENOMEM;
			}
		}
	}
	return answer(req, rc, out, bad);
}

/* "proto=udp,doh": a comma list of NX_QLOG_PROTOS names into a mask (absent or "" = any).
 * false after answering 400. */
static bool arg_protos(struct nx_admin_req *req, unsigned *out)
{
	const char *s = nx_admin_req_arg(req, "proto");
	*out = 0;
	if (!s || !*s) {
		return true;
	}
	for (;;) {
		size_t len = strcspn(s, ",");
		enum nx_qlog_proto p;
		if (nx_qlog_proto_parse(s, len, &p)) { /* an empty item ("udp,") too */
			nx_admin_reply_error(req, 400, "bad_request", "proto",
					     "proto must be a comma list of udp, tcp, dot, doh");
			return false;
		}
		*out |= 1u << p;
		if (!s[len]) {
			return true;
		}
		s += len + 1;
	}
}

int nx_admin_handle_queries(struct nx_admin_req *req)
{
	struct nx_qlog_filter f = {
	    .client = nx_admin_req_arg(req, "client"),
	    .client_id = nx_admin_req_arg(req, "client_id"),
	    .name = nx_admin_req_arg(req, "name"),
	    .status = NX_QLOG_STATUS_ALL,
	    .cursor = nx_admin_req_arg(req, "cursor"),
	};
	const char *st = nx_admin_req_arg(req, "status");
	if (st && nx_qlog_status_parse(st, &f.status)) {
		return nx_admin_reply_error(req, 400, "bad_request", "status",
					    "status must be all, blocked, allowed, cached, "
					    "forwarded or local");
	}
	int64_t from, to, limit;
	if (!arg_protos(req, &f.protos) || !arg_i64(req, "from", 0, 0, INT64_MAX / 2, &from) ||
	    !arg_i64(req, "to", 0, 0, INT64_MAX / 2, &to) ||
	    !arg_i64(req, "limit", NX_QLOG_QUERY_LIMIT_DEFAULT, 1, NX_QLOG_QUERY_LIMIT_MAX,
		     &limit)) {
		return 0;
	}
	if (f.client && !*f.client) {
		f.client = NULL;
	}
	if (f.cursor && !*f.cursor) {
		f.cursor = NULL;
	}
	f.from_ms = from;
	f.to_ms = to;
	f.limit = (unsigned)limit;
	/* client= is an address, "hidden" (privacy 2), or a client's name: the rows that
	 * nx_admin_client_name attributes to it, whatever their address or client id */
	struct nx_admin_client_match by_name = {.admin = req->admin, .name = f.client};
	if (f.client && !nx_admin_client_is_addr(f.client) && strcmp(f.client, "hidden") != 0) {
		int idx = nx_admin_client_index(req->admin, f.client);
		if (idx < 0 && !nx_admin_client_ptr_named(req->admin, f.client)) {
			/* no client has that name: no row can be theirs (no scan to find out) */
			return nx_admin_reply_json(req, 200,
						   json_pack("{s:[], s:n}", "items", "next_cursor"));
		}
		f.client = NULL;
		f.client_match = nx_admin_client_named;
		f.client_match_ud = &by_name;
		f.client_match_ids =
		    idx >= 0 && nx_admin_conf(req->admin)->clients[idx].n_client_ids > 0;
	}
	struct nx_qlog_reader *r = reader(req);
	if (!r) {
		return 0;
	}
	json_t *out = NULL;
	const char *bad = NULL;
	int rc = nx_qlog_query(r, &f, &out, &bad);
	size_t i;
	json_t *it;
	json_array_foreach(rc ? NULL : json_object_get(out, "items"), i, it)
	{
		if (nx_admin_client_name_set(req->admin, it)) {
			rc = -ENOMEM;
		}
	}
	return answer(req, rc, out, bad);
}

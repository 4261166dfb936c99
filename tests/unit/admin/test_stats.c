/*
 * Statistics and the query list through the API, against a real query-log database written
 * in the test with nx_qlog (push, flush, then query over HTTP): summary, history, top, keyset
 * pagination with filters, the reader kept open across writes, bad input answered 400 with
 * the field, a missing database 503.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "filter/result.h"
#include "fixture.h"
#include "querylog/querylog.h"

#define T0 1700000040000LL /* on a minute boundary */
#define MIN_MS 60000LL
#define HOUR_MS 3600000LL

static int64_t fixed_now(void *ud)
{
	return T0;
}

static int setup(void **state)
{
	static char config[2048];
	snprintf(config, sizeof(config), "admin:\n%s", fx_admin_lines());
	struct fx *f = fx_start(config);
	/* the query log lives in state_dir: the fixture's directory */
	char yaml[128], err[NX_CONF_ERR_MAX];
	snprintf(yaml, sizeof(yaml), "\"%s\"", f->dir);
	if (nx_conf_rewrite(f->path, "state_dir", yaml, err, sizeof(err)) ||
	    fx_hook_reload(f, err, sizeof(err))) {
		fail_msg("state_dir: %s", err);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_stop(*state);
	return 0;
}

static struct nx_qlog_rec rec(int64_t ts, unsigned host, const char *name)
{
	struct nx_qlog_rec r;
	memset(&r, 0, sizeof(r));
	r.ts_ms = ts;
	r.duration_us = 800;
	r.family = AF_INET;
	uint8_t a[4] = {192, 168, 1, (uint8_t)host};
	memcpy(r.client, a, 4);
	r.proto = NX_QLOG_PROTO_UDP;
	r.qtype = 1;
	r.action = NX_QLOG_ACT_NONE;
	r.reason = NX_FILTER_R_none;
	r.upstream = 0;
	snprintf(r.name, sizeof(r.name), "%s", name);
	snprintf(r.answer, sizeof(r.answer), "A 192.0.2.1");
	return r;
}

static struct nx_qlog *open_log(struct fx *f)
{
	char path[200];
	snprintf(path, sizeof(path), "%s/querylog.db", f->dir);
	struct nx_qlog_params p;
	nx_qlog_params_default(&p);
	p.path = path;
	p.flush_ms = 5;
	p.now_ms = fixed_now;
	struct nx_qlog *q = NULL;
	assert_int_equal(nx_qlog_new(&p, &q), 0);
	assert_int_equal(nx_qlog_start(q), 0);
	return q;
}

/*
 * Ten records: minute 0 six forwarded a.example from .2; minute 1 three blocked ads.example
 * from .3; minute 2 one cached b.example from .2.
 */
static void write_records(struct nx_qlog *q)
{
	for (int i = 0; i < 6; i++) {
		struct nx_qlog_rec r = rec(T0 + i * 1000, 2, "a.example");
		nx_qlog_push(q, 0, &r);
	}
	for (int i = 0; i < 3; i++) {
		struct nx_qlog_rec r = rec(T0 + MIN_MS + i * 1000, 3, "ads.example");
		r.action = NX_QLOG_ACT_BLOCK;
		r.reason = NX_FILTER_R_blocklist_domain;
		r.upstream = -1;
		snprintf(r.matched, sizeof(r.matched), "ads.example");
		snprintf(r.source, sizeof(r.source), "ads");
		nx_qlog_push(q, 0, &r);
	}
	struct nx_qlog_rec r = rec(T0 + 2 * MIN_MS, 2, "b.example");
	r.cached = 1;
	r.upstream = -1;
	nx_qlog_push(q, 0, &r);
	assert_int_equal(nx_qlog_flush(q, 0, 5000), 0);
}

static json_t *get(struct fx *f, struct fx_resp *r, const char *path)
{
	fx_http(f, r, "GET", path, FX_BEARER, NULL);
	fx_expect(r, 200, NULL);
	return r->json;
}

static json_int_t num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_integer(v)) {
		fail_msg("%s is not an integer", k);
	}
	return json_integer_value(v);
}

static void bad(struct fx *f, const char *path, const char *field)
{
	struct fx_resp r;
	fx_http(f, &r, "GET", path, FX_BEARER, NULL);
	fx_expect(&r, 400, "bad_request");
	const char *got = fx_str(&r, "field");
	if (!got || strcmp(got, field)) {
		fail_msg("%s: want field %s: %.*s", path, field, (int)r.body_len, r.body);
	}
	fx_resp_free(&r);
}

#define Q(fmt, ...) (snprintf(url, sizeof(url), fmt, __VA_ARGS__), url)

static void statistics(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	char url[256];
	fx_http(f, &r, "GET", "/api/stats/summary", FX_BEARER, NULL);
	fx_expect(&r, 503, "query_log_unavailable");
	fx_resp_free(&r);

	struct nx_qlog *q = open_log(f);
	write_records(q);

	json_t *s = get(f, &r, Q("/api/stats/summary?from=%lld&to=%lld", T0, T0 + HOUR_MS));
	assert_int_equal(num(s, "queries"), 10);
	assert_int_equal(num(s, "blocked"), 3);
	assert_int_equal(num(s, "cached"), 1);
	assert_int_equal(num(s, "forwarded"), 6);
	assert_int_equal(num(s, "clients"), 2);
	fx_resp_free(&r);
	struct nx_qlog_reader *reader = f->admin->qlog;
	assert_non_null(reader);
	/* the default range is the last 24 hours of the wall clock: 2023 is not in it */
	s = get(f, &r, "/api/stats/summary");
	assert_int_equal(num(s, "queries"), 0);
	fx_resp_free(&r);

	json_t *h =
	    get(f, &r, Q("/api/stats/history?from=%lld&to=%lld&step=60", T0, T0 + 3 * MIN_MS));
	json_t *pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 3);
	assert_int_equal(num(json_array_get(pts, 0), "t"), T0);
	assert_int_equal(num(json_array_get(pts, 0), "queries"), 6);
	assert_int_equal(num(json_array_get(pts, 1), "blocked"), 3);
	assert_int_equal(num(json_array_get(pts, 2), "cached"), 1);
	fx_resp_free(&r);
	/* default step: an hour */
	h = get(f, &r, Q("/api/stats/history?from=%lld&to=%lld", T0 - 40 * MIN_MS, T0 + HOUR_MS));
	assert_int_equal(num(h, "step"), 3600);
	fx_resp_free(&r);

	json_t *t =
	    get(f, &r, Q("/api/stats/top?kind=domains&from=%lld&to=%lld", T0, T0 + HOUR_MS));
	json_t *first = json_array_get(json_object_get(t, "items"), 0);
	assert_string_equal(json_string_value(json_object_get(first, "key")), "a.example");
	assert_int_equal(num(first, "count"), 6);
	fx_resp_free(&r);
	t = get(f, &r, Q("/api/stats/top?kind=blocked&from=%lld&to=%lld", T0, T0 + HOUR_MS));
	assert_int_equal(json_array_size(json_object_get(t, "items")), 1);
	first = json_array_get(json_object_get(t, "items"), 0);
	assert_string_equal(json_string_value(json_object_get(first, "key")), "ads.example");
	fx_resp_free(&r);
	t = get(f, &r,
		Q("/api/stats/top?kind=clients&limit=1&from=%lld&to=%lld", T0, T0 + HOUR_MS));
	assert_int_equal(json_array_size(json_object_get(t, "items")), 1);
	first = json_array_get(json_object_get(t, "items"), 0);
	assert_string_equal(json_string_value(json_object_get(first, "key")), "192.168.1.2");
	assert_int_equal(num(first, "count"), 7);
	fx_resp_free(&r);

	/* the reader stays open and sees later commits */
	struct nx_qlog_rec one = rec(T0 + 3 * MIN_MS, 4, "c.example");
	nx_qlog_push(q, 0, &one);
	assert_int_equal(nx_qlog_flush(q, 0, 5000), 0);
	s = get(f, &r, Q("/api/stats/summary?from=%lld&to=%lld", T0, T0 + HOUR_MS));
	assert_int_equal(num(s, "queries"), 11);
	assert_int_equal(num(s, "clients"), 3);
	fx_resp_free(&r);
	assert_ptr_equal(f->admin->qlog, reader);
	nx_qlog_free(q);

	bad(f, "/api/stats/summary?from=abc", "from");
	bad(f, "/api/stats/summary?from=5&to=5", "from");
	bad(f, "/api/stats/summary?to=-1", "to");
	bad(f, Q("/api/stats/history?from=%lld&to=%lld&step=61", T0, T0 + HOUR_MS), "step");
	bad(f, Q("/api/stats/history?from=%lld&to=%lld&step=0", T0, T0 + HOUR_MS), "step");
	/* more than a week of minutes */
	struct fx_resp rr;
	fx_http(f, &rr, "GET", Q("/api/stats/history?from=1&to=%lld&step=60", T0), FX_BEARER, NULL);
	fx_expect(&rr, 400, "bad_request");
	assert_non_null(fx_str(&rr, "field"));
	fx_resp_free(&rr);
	bad(f, "/api/stats/top?kind=names", "kind");
	bad(f, "/api/stats/top?limit=0", "limit");
	bad(f, "/api/stats/top?limit=101", "limit");

	/* state_dir moves: the reader follows (and finds nothing there) */
	char yaml[160], err[NX_CONF_ERR_MAX];
	snprintf(yaml, sizeof(yaml), "\"%s/elsewhere\"", f->dir);
	assert_int_equal(nx_conf_rewrite(f->path, "state_dir", yaml, err, sizeof(err)), 0);
	assert_int_equal(fx_hook_reload(f, err, sizeof(err)), 0);
	fx_http(f, &rr, "GET", "/api/stats/summary", FX_BEARER, NULL);
	fx_expect(&rr, 503, "query_log_unavailable");
	fx_resp_free(&rr);
	assert_null(f->admin->qlog);
}

static void query_list(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	char url[256];
	struct nx_qlog *q = open_log(f);
	write_records(q);
	nx_qlog_free(q);

	/* every row once, newest first, in pages of four */
	char cursor[128] = "";
	int64_t ids[16];
	size_t n = 0;
	for (int page = 0; page < 5; page++) {
		json_t *res = get(f, &r,
				  cursor[0] ? Q("/api/queries?limit=4&cursor=%s", cursor)
					    : "/api/queries?limit=4");
		json_t *items = json_object_get(res, "items");
		size_t i;
		json_t *it;
		json_array_foreach(items, i, it)
		{
			assert_true(n < 16);
			ids[n++] = num(it, "id");
		}
		if (page == 0) {
			assert_string_equal(
			    json_string_value(json_object_get(json_array_get(items, 0), "name")),
			    "b.example");
		}
		json_t *next = json_object_get(res, "next_cursor");
		if (json_is_null(next)) {
			fx_resp_free(&r);
			break;
		}
		assert_int_equal(json_array_size(items), 4);
		snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
		fx_resp_free(&r);
	}
	assert_int_equal(n, 10);
	for (size_t i = 1; i < n; i++) {
		for (size_t j = 0; j < i; j++) {
			assert_true(ids[i] != ids[j]);
		}
	}

	json_t *res = get(f, &r, "/api/queries?status=blocked");
	json_t *items = json_object_get(res, "items");
	assert_int_equal(json_array_size(items), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "action")),
			    "block");
	fx_resp_free(&r);
	res = get(f, &r, "/api/queries?name=ads");
	assert_int_equal(json_array_size(json_object_get(res, "items")), 3);
	fx_resp_free(&r);
	res = get(f, &r, "/api/queries?client=192.168.1.2");
	assert_int_equal(json_array_size(json_object_get(res, "items")), 7);
	fx_resp_free(&r);
	res = get(f, &r, "/api/queries?status=cached&client=192.168.1.2");
	assert_int_equal(json_array_size(json_object_get(res, "items")), 1);
	fx_resp_free(&r);
	res = get(f, &r, Q("/api/queries?from=%lld&to=%lld", T0 + MIN_MS, T0 + 2 * MIN_MS));
	assert_int_equal(json_array_size(json_object_get(res, "items")), 3);
	fx_resp_free(&r);

	bad(f, "/api/queries?status=nope", "status");
	bad(f, "/api/queries?cursor=zzz", "cursor");
	bad(f, "/api/queries?limit=1001", "limit");
	bad(f, "/api/queries?limit=x", "limit");
	bad(f, "/api/queries?from=-5", "from");
	bad(f, "/api/queries?to=1e3", "to");
}

/* "protocols" of o against udp, tcp, dot, doh: each an integer, no other key. */
static void expect_protocols(json_t *o, json_int_t udp, json_int_t tcp, json_int_t dot,
			     json_int_t doh)
{
	json_t *p = json_object_get(o, "protocols");
	if (!json_is_object(p) || json_object_size(p) != 4) {
		fail_msg("protocols is not an object of 4 counts");
	}
	assert_int_equal(num(p, "udp"), udp);
	assert_int_equal(num(p, "tcp"), tcp);
	assert_int_equal(num(p, "dot"), dot);
	assert_int_equal(num(p, "doh"), doh);
}

static void protocols(void **state)
{
	struct fx *f = *state;
	struct fx_resp r;
	char url[256];
	struct nx_qlog *q = open_log(f);
	/* minute 0: 4 udp, 3 tcp; minute 1: 2 dot, 1 doh */
	static const struct {
		int64_t at;
		uint8_t proto;
		int n;
	} in[] = {
	    {T0, NX_QLOG_PROTO_UDP, 4},
	    {T0 + 10000, NX_QLOG_PROTO_TCP, 3},
	    {T0 + MIN_MS, NX_QLOG_PROTO_DOT, 2},
	    {T0 + MIN_MS + 10000, NX_QLOG_PROTO_DOH, 1},
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		for (int k = 0; k < in[i].n; k++) {
			struct nx_qlog_rec x = rec(in[i].at + k * 1000, 2, "p.example");
			x.proto = in[i].proto;
			nx_qlog_push(q, 0, &x);
		}
	}
	assert_int_equal(nx_qlog_flush(q, 0, 5000), 0);

	json_t *s = get(f, &r, Q("/api/stats/summary?from=%lld&to=%lld", T0, T0 + HOUR_MS));
	assert_int_equal(num(s, "queries"), 10);
	expect_protocols(s, 4, 3, 2, 1);
	fx_resp_free(&r);
	/* over the same span as queries: minute 1 alone */
	s = get(f, &r, Q("/api/stats/summary?from=%lld&to=%lld", T0 + MIN_MS, T0 + HOUR_MS));
	assert_int_equal(num(s, "queries"), 3);
	expect_protocols(s, 0, 0, 2, 1);
	fx_resp_free(&r);
	/* the default 24 hours of the wall clock hold none of 2023: zeros, not absent */
	s = get(f, &r, "/api/stats/summary");
	expect_protocols(s, 0, 0, 0, 0);
	fx_resp_free(&r);

	json_t *h =
	    get(f, &r, Q("/api/stats/history?from=%lld&to=%lld&step=60", T0, T0 + 2 * MIN_MS));
	json_t *pts = json_object_get(h, "points");
	assert_int_equal(json_array_size(pts), 2);
	expect_protocols(json_array_get(pts, 0), 4, 3, 0, 0);
	expect_protocols(json_array_get(pts, 1), 0, 0, 2, 1);
	fx_resp_free(&r);

	/* the query list by protocol: one, a comma list, then refusals */
	json_t *l = get(f, &r, "/api/queries?proto=dot&limit=100");
	json_t *items = json_object_get(l, "items");
	assert_int_equal(json_array_size(items), 2);
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it)
	{
		assert_string_equal(json_string_value(json_object_get(it, "proto")), "dot");
	}
	fx_resp_free(&r);
	l = get(f, &r, "/api/queries?proto=tcp,doh&limit=100");
	assert_int_equal(json_array_size(json_object_get(l, "items")), 4);
	fx_resp_free(&r);
	l = get(f, &r, "/api/queries?proto=&limit=100");
	assert_int_equal(json_array_size(json_object_get(l, "items")), 10);
	fx_resp_free(&r);
	bad(f, "/api/queries?proto=quic", "proto");
	bad(f, "/api/queries?proto=udp,", "proto");
	bad(f, "/api/queries?proto=udpx", "proto");
	nx_qlog_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(statistics, setup, teardown),
	    cmocka_unit_test_setup_teardown(query_list, setup, teardown),
	    cmocka_unit_test_setup_teardown(protocols, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

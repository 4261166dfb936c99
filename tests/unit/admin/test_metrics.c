/* The metrics builder and the built-in exposition (admin/admin.h, admin/impl.h). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "admin/admin.h"
#include "admin/impl.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"

#include "promcheck.h"

static struct nx_ledger_row g_before;

static struct nx_ledger_row admin_row(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_admin_http];
}

static int setup(void **state)
{
	g_before = admin_row();
	return 0;
}

/* Every builder byte is charged to admin_http and released by nx_metrics_buf_free(). */
static int teardown(void **state)
{
	nx_mem_fail_after(-1);
	struct nx_ledger_row now = admin_row();
	assert_int_equal(now.bytes, g_before.bytes);
	assert_int_equal(now.count, g_before.count);
	return 0;
}

static const char *text(struct nx_metrics_buf *mb)
{
	return nx_metrics_buf_text(mb, NULL);
}

static void label_and_help_escaping(void **state)
{
	struct nx_metrics_buf *mb = nx_metrics_buf_new(0);
	assert_non_null(mb);
	nx_metrics_family(mb, "t_gauge", NX_METRIC_GAUGE, "a \\ b\nc \"q\"");
	nx_metrics_sample_i64(mb, "t_gauge", -3, "v", "back\\slash \"quote\" new\nline", "w", "",
			      NULL);
	nx_metrics_sample_u64(mb, "t_gauge", 1, NULL);
	assert_int_equal(nx_metrics_buf_error(mb), 0);
	assert_string_equal(text(mb),
			    "# HELP t_gauge a \\\\ b\\nc \"q\"\n"
			    "# TYPE t_gauge gauge\n"
			    "t_gauge{v=\"back\\\\slash \\\"quote\\\" new\\nline\",w=\"\"} -3\n"
			    "t_gauge 1\n");
	size_t len;
	const char *t = nx_metrics_buf_text(mb, &len);
	assert_int_equal(len, strlen(t));
	assert_int_equal(promparse_status(t, len), 0);
	nx_metrics_buf_free(mb);
}

static void values(void **state)
{
	struct nx_metrics_buf *mb = nx_metrics_buf_new(0);
	nx_metrics_family(mb, "v", NX_METRIC_GAUGE, "values");
	nx_metrics_sample_f64(mb, "v", 0.5, "k", "a", NULL);
	nx_metrics_sample_f64(mb, "v", 0.1, "k", "b", NULL);
	nx_metrics_sample_f64(mb, "v", INFINITY, "k", "c", NULL);
	nx_metrics_sample_f64(mb, "v", -INFINITY, "k", "d", NULL);
	nx_metrics_sample_f64(mb, "v", NAN, "k", "e", NULL);
	nx_metrics_sample_u64(mb, "v", UINT64_MAX, "k", "f", NULL);
	nx_metrics_sample_i64(mb, "v", INT64_MIN, "k", "g", NULL);
	nx_metrics_sample_f64(mb, "v", 1e300, "k", "h", NULL);
	assert_int_equal(nx_metrics_buf_error(mb), 0);
	assert_string_equal(text(mb), "# HELP v values\n# TYPE v gauge\n"
				      "v{k=\"a\"} 0.5\n"
				      "v{k=\"b\"} 0.1\n"
				      "v{k=\"c\"} +Inf\n"
				      "v{k=\"d\"} -Inf\n"
				      "v{k=\"e\"} NaN\n"
				      "v{k=\"f\"} 18446744073709551615\n"
				      "v{k=\"g\"} -9223372036854775808\n"
				      "v{k=\"h\"} 1e+300\n");
	assert_int_equal(promparse_status(text(mb), strlen(text(mb))), 0);
	nx_metrics_buf_free(mb);
}

static void histogram(void **state)
{
	struct nx_metrics_buf *mb = nx_metrics_buf_new(0);
	const double bounds[] = {0.001, 0.01, 0.5};
	const uint64_t counts[] = {2, 0, 3, 1};
	nx_metrics_family(mb, "lat_seconds", NX_METRIC_HISTOGRAM, "latency");
	nx_metrics_histogram(mb, "lat_seconds", bounds, counts, 3, 1.25, "server", "a", NULL);
	nx_metrics_histogram(mb, "lat_seconds", bounds, counts, 3, 0.0, NULL);
	assert_int_equal(nx_metrics_buf_error(mb), 0);
	assert_string_equal(text(mb), "# HELP lat_seconds latency\n# TYPE lat_seconds histogram\n"
				      "lat_seconds_bucket{server=\"a\",le=\"0.001\"} 2\n"
				      "lat_seconds_bucket{server=\"a\",le=\"0.01\"} 2\n"
				      "lat_seconds_bucket{server=\"a\",le=\"0.5\"} 5\n"
				      "lat_seconds_bucket{server=\"a\",le=\"+Inf\"} 6\n"
				      "lat_seconds_sum{server=\"a\"} 1.25\n"
				      "lat_seconds_count{server=\"a\"} 6\n"
				      "lat_seconds_bucket{le=\"0.001\"} 2\n"
				      "lat_seconds_bucket{le=\"0.01\"} 2\n"
				      "lat_seconds_bucket{le=\"0.5\"} 5\n"
				      "lat_seconds_bucket{le=\"+Inf\"} 6\n"
				      "lat_seconds_sum 0\n"
				      "lat_seconds_count 6\n");
	assert_int_equal(promparse_status(text(mb), strlen(text(mb))), 0);
	nx_metrics_buf_free(mb);

	/* bounds must ascend */
	const double bad[] = {0.5, 0.1};
	mb = nx_metrics_buf_new(0);
	nx_metrics_family(mb, "h", NX_METRIC_HISTOGRAM, "h");
	nx_metrics_histogram(mb, "h", bad, counts, 2, 0.0, NULL);
	assert_int_equal(nx_metrics_buf_error(mb), NX_EMALFORMED);
	nx_metrics_buf_free(mb);
}

/* Each misuse sets the sticky error and nothing more is written after it. */
static void misuse_is_sticky(void **state)
{
	static const struct {
		const char *what;
	} cases[] = {
	    {"counter without _total"}, {"bad family name"},
	    {"sample before family"},	{"sample of another family"},
	    {"bad label name"},		{"reserved label name"},
	    {"duplicate label"},	{"NULL label value"},
	    {"le on a gauge"},		{"empty help"},
	    {"bucket without le"},	{"histogram of wrong family"},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(cases); i++) {
		struct nx_metrics_buf *mb = nx_metrics_buf_new(0);
		if (i != 2) {
			nx_metrics_family(mb, "ok_total", NX_METRIC_COUNTER, "fine");
		}
		size_t before = strlen(text(mb));
		switch (i) {
		case 0:
			nx_metrics_family(mb, "requests", NX_METRIC_COUNTER, "h");
			break;
		case 1:
			nx_metrics_family(mb, "9lives", NX_METRIC_GAUGE, "h");
			break;
		case 2:
			nx_metrics_sample_u64(mb, "ok_total", 1, NULL);
			break;
		case 3:
			nx_metrics_sample_u64(mb, "other_total", 1, NULL);
			break;
		case 4:
			nx_metrics_sample_u64(mb, "ok_total", 1, "a-b", "x", NULL);
			break;
		case 5:
			nx_metrics_sample_u64(mb, "ok_total", 1, "__name__", "x", NULL);
			break;
		case 6:
			nx_metrics_sample_u64(mb, "ok_total", 1, "a", "x", "a", "y", NULL);
			break;
		case 7:
			nx_metrics_sample_u64(mb, "ok_total", 1, "a", (const char *)NULL, NULL);
			break;
		case 8:
			nx_metrics_family(mb, "g", NX_METRIC_GAUGE, "g");
			before = strlen(text(mb));
			nx_metrics_sample_u64(mb, "g", 1, "le", "1", NULL);
			break;
		case 9:
			nx_metrics_family(mb, "g", NX_METRIC_GAUGE, "");
			break;
		case 10:
			nx_metrics_family(mb, "h", NX_METRIC_HISTOGRAM, "h");
			before = strlen(text(mb));
			nx_metrics_sample_u64(mb, "h_bucket", 1, NULL);
			break;
		case 11:
			nx_metrics_histogram(mb, "ok_total", (const double[]){1},
					     (const uint64_t[]){1, 1}, 1, 0.0, NULL);
			break;
		}
		assert_int_equal(nx_metrics_buf_error(mb), NX_EMALFORMED);
		assert_int_equal(strlen(text(mb)), before);
		/* sticky: valid calls write nothing now */
		nx_metrics_family(mb, "later", NX_METRIC_GAUGE, "later");
		nx_metrics_sample_u64(mb, "later", 1, NULL);
		assert_int_equal(strlen(text(mb)), before);
		assert_int_equal(nx_metrics_buf_error(mb), NX_EMALFORMED);
		nx_metrics_buf_free(mb);
	}
}

static void cap_and_allocation_failures(void **state)
{
	struct nx_metrics_buf *mb = nx_metrics_buf_new(100);
	nx_metrics_family(mb, "a_long_gauge_name", NX_METRIC_GAUGE, "some help text");
	for (int i = 0; i < 10; i++) {
		nx_metrics_sample_i64(mb, "a_long_gauge_name", i, NULL);
	}
	assert_int_equal(nx_metrics_buf_error(mb), NX_ELIMIT);
	assert_true(strlen(text(mb)) <= 100);
	nx_metrics_buf_free(mb);

	nx_mem_fail_after(0);
	assert_null(nx_metrics_buf_new(0));
	nx_mem_fail_after(1); /* the struct succeeds, its buffer fails: nothing may leak */
	assert_null(nx_metrics_buf_new(0));
	nx_mem_fail_after(-1);

	mb = nx_metrics_buf_new(0);
	nx_mem_fail_after(0); /* growth fails */
	nx_metrics_family(mb, "g", NX_METRIC_GAUGE, "g");
	char big[NX_METRICS_INITIAL_BYTES];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	nx_metrics_sample_u64(mb, "g", 1, "k", big, NULL);
	nx_mem_fail_after(-1);
	assert_int_equal(nx_metrics_buf_error(mb), -ENOMEM);
	nx_metrics_buf_free(mb);
}

static void builtin_exposition(void **state)
{
	uint64_t tcp = nx_stat_read(NX_STAT_Q_TCP);
	nx_stat_add(NX_STAT_Q_TCP, 7);
	nx_gauge_add(NX_GAUGE_IN_FLIGHT, 5);
	nx_gauge_add(NX_GAUGE_IN_FLIGHT, -5);

	struct nx_metrics_buf *mb = nx_metrics_buf_new(0);
	nx_admin_render_metrics(NULL, mb);
	assert_int_equal(nx_metrics_buf_error(mb), 0);
	size_t len;
	const char *t = nx_metrics_buf_text(mb, &len);

	char want[128];
	snprintf(want, sizeof(want), "\nnxdns_queries_total{proto=\"tcp\"} %llu\n",
		 (unsigned long long)(tcp + 7));
	assert_non_null(strstr(t, want));
	/* one HELP per family although the family has four rows */
	const char *help = "# HELP nxdns_queries_total ";
	const char *first = strstr(t, help);
	assert_non_null(first);
	assert_null(strstr(first + 1, help));
	assert_non_null(strstr(t, "\nnxdns_dns_in_flight 0\n"));
	assert_non_null(strstr(t, "\nnxdns_dns_in_flight_peak 5\n"));
	assert_non_null(strstr(t, "\n# TYPE nxdns_dns_in_flight_peak gauge\n"));
	assert_non_null(strstr(t, "\nnxdns_memory_owner_bytes{owner=\"admin_http\"} "));
	assert_non_null(strstr(t, "\nnxdns_memory_owner_allocations{owner=\"config\"} "));
	assert_non_null(strstr(t, "\nnxdns_process_vmrss_bytes "));
	assert_non_null(strstr(t, "\nnxdns_process_threads 1\n"));
	assert_non_null(strstr(t, "\nnxdns_heap_in_use_bytes "));
	assert_non_null(strstr(t, "\nnxdns_heap_free_bytes "));
	assert_int_equal(promparse_status(t, len), 0);
	nx_metrics_buf_free(mb);
}

static void process_figures(void **state)
{
	struct nx_process_figures p;
	assert_int_equal(nx_admin_read_process(&p), 0);
	assert_true(p.vmrss_bytes > 0 && p.vmrss_bytes % 1024 == 0);
	assert_true(p.vmhwm_bytes >= p.vmrss_bytes);
	assert_true(p.rssanon_bytes > 0 && p.rssfile_bytes > 0);
	assert_true(p.rssanon_bytes + p.rssfile_bytes <= p.vmrss_bytes);
	assert_int_equal(p.threads, 1);
	/* mallinfo2 reads 0 under ASan (its own allocator), never negative */
	assert_true(p.heap_in_use_bytes >= 0 && p.heap_free_bytes >= 0);
}

/* The parser used by these tests rejects what it must (so a passing check means something). */
static void parser_rejects(void **state)
{
	static const char *bad[] = {
	    "# TYPE a gauge\na 1\n",			    /* no HELP */
	    "# HELP a x\n# TYPE a gauge\na 1\na 2\n",	    /* duplicate series */
	    "# HELP a x\n# TYPE a counter\na 1\n",	    /* counter without _total */
	    "# HELP a x\n# TYPE a gauge\na{k=\"\\t\"} 1\n", /* bad escape */
	    "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", /* +Inf */
	    "# HELP a x\n# TYPE a gauge\na one\n", /* value */
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(bad); i++) {
		assert_int_not_equal(promparse_status(bad[i], strlen(bad[i])), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(label_and_help_escaping, setup, teardown),
	    cmocka_unit_test_setup_teardown(values, setup, teardown),
	    cmocka_unit_test_setup_teardown(histogram, setup, teardown),
	    cmocka_unit_test_setup_teardown(misuse_is_sticky, setup, teardown),
	    cmocka_unit_test_setup_teardown(cap_and_allocation_failures, setup, teardown),
	    cmocka_unit_test_setup_teardown(builtin_exposition, setup, teardown),
	    cmocka_unit_test_setup_teardown(process_figures, setup, teardown),
	    cmocka_unit_test(parser_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

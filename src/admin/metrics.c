/*
 * Prometheus text exposition 0.0.4: the builder and the /metrics page.
 *
 * The builder is a growable buffer charged to NX_OWNER_admin_http with a sticky error; it checks
 * names, label keys and that every sample belongs to the current family, so a programming
 * mistake turns into a counted 500 instead of an exposition Prometheus would reject whole.
 */
#include "admin/admin.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/impl.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"

#define MAX_LABELS 16 /* labels on one sample, "le" included; more is a cardinality smell */
#define VALUE_MAX 40  /* "%.17g" of a double, or a 64-bit integer, plus sign and NUL */

struct nx_metrics_buf {
	char *data; /* owned (admin_http, cap bytes), NUL-terminated */
	size_t len;
	size_t cap;
	size_t max; /* text cap in bytes */
	int err;    /* 0 or the first error; sticky */
	bool have_family;
	enum nx_metric_type type;	      /* of the current family */
	char family[NX_METRICS_NAME_MAX + 1]; /* current family name */
};

static const char *const type_names[] = {
    [NX_METRIC_COUNTER] = "counter",
    [NX_METRIC_GAUGE] = "gauge",
    [NX_METRIC_HISTOGRAM] = "histogram",
};

struct nx_metrics_buf *nx_metrics_buf_create(size_t initial, size_t max)
{
	if (max == 0) {
		max = NX_METRICS_MAX_BYTES;
	}
	initial = NX_MIN(NX_MAX(initial, (size_t)256), max + 1);
	struct nx_metrics_buf *mb = nx_mem_calloc(NX_OWNER_admin_http, 1, sizeof(*mb));
	if (!mb) {
		return NULL;
	}
	mb->data = nx_mem_alloc(NX_OWNER_admin_http, initial);
	if (!mb->data) {
		nx_mem_free(NX_OWNER_admin_http, mb, sizeof(*mb));
		return NULL;
	}
	mb->data[0] = '\0';
	mb->cap = initial;
	mb->max = max;
	return mb;
}

struct nx_metrics_buf *nx_metrics_buf_new(size_t max_bytes)
{
	return nx_metrics_buf_create(NX_METRICS_INITIAL_BYTES, max_bytes);
}

void nx_metrics_buf_free(struct nx_metrics_buf *mb)
{
	if (!mb) {
		return;
	}
	nx_mem_free(NX_OWNER_admin_http, mb->data, mb->cap);
	nx_mem_free(NX_OWNER_admin_http, mb, sizeof(*mb));
}

const char *nx_metrics_buf_text(const struct nx_metrics_buf *mb, size_t *len)
{
	if (len) {
		*len = mb->len;
	}
	return mb->data;
}

int nx_metrics_buf_error(const struct nx_metrics_buf *mb)
{
	return mb->err;
}

static void fail(struct nx_metrics_buf *mb, int err, const char *what, const char *name)
{
	if (mb->err) {
		return;
	}
	mb->err = err;
	nx_log(NX_LOG_ERR, "admin", "metrics: %s: %s", what, name ? name : "(null)");
}

static void put(struct nx_metrics_buf *mb, const char *s, size_t n)
{
	if (mb->err) {
		return;
	}
	if (n > mb->max - mb->len) {
		fail(mb, NX_ELIMIT, "exposition exceeds its cap", mb->family);
		return;
	}
	if (mb->len + n + 1 > mb->cap) {
		size_t cap = NX_MAX(mb->cap * 2, mb->len + n + 1);
		cap = NX_MIN(cap, mb->max + 1);
		char *d = nx_mem_realloc(NX_OWNER_admin_http, mb->data, mb->cap, cap);
		if (!d) {
			fail(mb, -ENOMEM, "out of memory", mb->family);
			return;
		}
		mb->data = d;
		mb->cap = cap;
	}
	memcpy(mb->data + mb->len, s, n);
	mb->len += n;
	mb->data[mb->len] = '\0';
}

static void puts_(struct nx_metrics_buf *mb, const char *s)
{
	put(mb, s, strlen(s));
}

/* Escape for HELP (backslash, newline) or, with quote, for a label value (also '"'). */
static void put_escaped(struct nx_metrics_buf *mb, const char *s, bool quote)
{
	const char *run = s;
	for (; *s; s++) {
		const char *esc = NULL;
		if (*s == '\\') {
			esc = "\\\\";
		} else if (*s == '\n') {
			esc = "\\n";
		} else if (quote && *s == '"') {
			esc = "\\\"";
		}
		if (esc) {
			put(mb, run, (size_t)(s - run));
			put(mb, esc, 2);
			run = s + 1;
		}
	}
	put(mb, run, (size_t)(s - run));
}

static bool name_char(char c, bool first, bool colon)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
		return true;
	}
	if (colon && c == ':') {
		return true;
	}
	return !first && c >= '0' && c <= '9';
}

static bool valid_name(const char *s, bool colon)
{
	if (!s || !*s || strlen(s) > NX_METRICS_NAME_MAX) {
		return false;
	}
	for (size_t i = 0; s[i]; i++) {
		if (!name_char(s[i], i == 0, colon)) {
			return false;
		}
	}
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s);
	size_t m = strlen(suffix);
	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

void nx_metrics_family(struct nx_metrics_buf *mb, const char *name, enum nx_metric_type type,
		       const char *help)
{
	if (mb->err) {
		return;
	}
	if (!valid_name(name, true)) {
		fail(mb, NX_EMALFORMED, "invalid family name", name);
		return;
	}
	if ((unsigned)type >= NX_ARRAY_LEN(type_names)) {
		fail(mb, NX_EMALFORMED, "invalid family type", name);
		return;
	}
	if (type == NX_METRIC_COUNTER && !ends_with(name, "_total")) {
		fail(mb, NX_EMALFORMED, "counter name must end in _total", name);
		return;
	}
	if (!help || !*help) {
		fail(mb, NX_EMALFORMED, "family without help", name);
		return;
	}
	puts_(mb, "# HELP ");
	puts_(mb, name);
	put(mb, " ", 1);
	put_escaped(mb, help, false);
	puts_(mb, "\n# TYPE ");
	puts_(mb, name);
	put(mb, " ", 1);
	puts_(mb, type_names[type]);
	put(mb, "\n", 1);
	if (!mb->err) {
		mb->have_family = true;
		mb->type = type;
		snprintf(mb->family, sizeof(mb->family), "%s", name);
	}
}

/* Does sample `name` belong to the current family? Sets *bucket for histogram _bucket. */
static bool in_family(const struct nx_metrics_buf *mb, const char *name, bool *bucket)
{
	*bucket = false;
	if (!mb->have_family) {
		return false;
	}
	if (mb->type != NX_METRIC_HISTOGRAM) {
		return strcmp(name, mb->family) == 0;
	}
	size_t n = strlen(mb->family);
	if (strncmp(name, mb->family, n) != 0) {
		return false;
	}
	const char *sfx = name + n;
	*bucket = strcmp(sfx, "_bucket") == 0;
	return *bucket || strcmp(sfx, "_sum") == 0 || strcmp(sfx, "_count") == 0;
}

/*
 * name{k="v",...[,le="x"]} value. `raw` (trusted, pre-formatted) replaces the pairs in ap when
 * non-NULL; `le` is appended when non-NULL.
 */
static void emit(struct nx_metrics_buf *mb, const char *name, const char *raw, va_list ap,
		 const char *le, const char *value)
{
	if (mb->err) {
		return;
	}
	bool bucket;
	if (!in_family(mb, name, &bucket)) {
		fail(mb, NX_EMALFORMED, "sample outside the current family", name);
		return;
	}
	const char *keys[MAX_LABELS];
	const char *vals[MAX_LABELS];
	size_t n = 0;
	bool has_le = le != NULL;
	if (!raw) {
		for (;;) {
			const char *k = va_arg(ap, const char *);
			if (!k) {
				break;
			}
			const char *v = va_arg(ap, const char *);
			if (n == MAX_LABELS - 1 || !valid_name(k, false) || !strncmp(k, "__", 2) ||
			    !v) {
				fail(mb, NX_EMALFORMED,
				     "invalid label (name, NULL value or too many)", name);
				return;
			}
			for (size_t i = 0; i < n; i++) {
				if (!strcmp(keys[i], k)) {
					fail(mb, NX_EMALFORMED, "duplicate label", name);
					return;
				}
			}
			has_le |= !strcmp(k, "le");
			if (le && !strcmp(k, "le")) {
				fail(mb, NX_EMALFORMED, "label le passed to a histogram", name);
				return;
			}
			keys[n] = k;
			vals[n] = v;
			n++;
		}
	}
	if (bucket != has_le && !raw) {
		fail(mb, NX_EMALFORMED, "le label must be on _bucket samples only", name);
		return;
	}
	puts_(mb, name);
	bool braces = n > 0 || le || (raw && *raw);
	if (braces) {
		put(mb, "{", 1);
	}
	if (raw) {
		puts_(mb, raw);
	}
	for (size_t i = 0; i < n; i++) {
		if (i) {
			put(mb, ",", 1);
		}
		puts_(mb, keys[i]);
		put(mb, "=\"", 2);
		put_escaped(mb, vals[i], true);
		put(mb, "\"", 1);
	}
	if (le) {
		if (n || (raw && *raw)) {
			put(mb, ",", 1);
		}
		put(mb, "le=\"", 4);
		puts_(mb, le);
		put(mb, "\"", 1);
	}
	if (braces) {
		put(mb, "}", 1);
	}
	put(mb, " ", 1);
	puts_(mb, value);
	put(mb, "\n", 1);
}

static void fmt_f64(char *out, size_t size, double v)
{
	if (isnan(v)) {
		snprintf(out, size, "NaN");
	} else if (isinf(v)) {
		snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
	} else {
		/* shortest of the two that reads back exactly */
		snprintf(out, size, "%.15g", v);
		if (strtod(out, NULL) != v) {
			snprintf(out, size, "%.17g", v);
		}
	}
}

/* emit() with its labels as arguments (raw callers pass only the NULL terminator). */
static void emit_l(struct nx_metrics_buf *mb, const char *name, const char *raw, const char *le,
		   const char *value, ...)
{
	va_list ap;
	va_start(ap, value);
	emit(mb, name, raw, ap, le, value);
	va_end(ap);
}

void nx_metrics_sample_raw(struct nx_metrics_buf *mb, const char *name, const char *labels,
			   const char *value)
{
	emit_l(mb, name, labels ? labels : "", NULL, value, NULL);
}

void nx_metrics_sample_u64(struct nx_metrics_buf *mb, const char *name, uint64_t value, ...)
{
	char v[VALUE_MAX];
	snprintf(v, sizeof(v), "%" PRIu64, value);
	va_list ap;
	va_start(ap, value);
	emit(mb, name, NULL, ap, NULL, v);
	va_end(ap);
}

void nx_metrics_sample_i64(struct nx_metrics_buf *mb, const char *name, int64_t value, ...)
{
	char v[VALUE_MAX];
	snprintf(v, sizeof(v), "%" PRId64, value);
	va_list ap;
	va_start(ap, value);
	emit(mb, name, NULL, ap, NULL, v);
	va_end(ap);
}

void nx_metrics_sample_f64(struct nx_metrics_buf *mb, const char *name, double value, ...)
{
	char v[VALUE_MAX];
	fmt_f64(v, sizeof(v), value);
	va_list ap;
	va_start(ap, value);
	emit(mb, name, NULL, ap, NULL, v);
	va_end(ap);
}

void nx_metrics_histogram(struct nx_metrics_buf *mb, const char *family, const double *bounds,
			  const uint64_t *counts, size_t n, double sum, ...)
{
	if (mb->err) {
		return;
	}
	if (!mb->have_family || mb->type != NX_METRIC_HISTOGRAM || strcmp(family, mb->family)) {
		fail(mb, NX_EMALFORMED, "histogram outside its family", family);
		return;
	}
	char name[NX_METRICS_NAME_MAX + sizeof("_bucket")];
	char le[VALUE_MAX];
	char v[VALUE_MAX];
	uint64_t cum = 0;
	va_list ap;
	va_start(ap, sum);
	snprintf(name, sizeof(name), "%s_bucket", family);
	for (size_t i = 0; i <= n; i++) {
		if (i < n && (isnan(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1])))) {
			fail(mb, NX_EMALFORMED, "histogram bounds not ascending", family);
			break;
		}
		cum += counts[i];
		if (i < n) {
			fmt_f64(le, sizeof(le), bounds[i]);
		} else {
			snprintf(le, sizeof(le), "+Inf");
		}
		snprintf(v, sizeof(v), "%" PRIu64, cum);
		va_list cp;
		va_copy(cp, ap);
		emit(mb, name, NULL, cp, le, v);
		va_end(cp);
	}
	snprintf(name, sizeof(name), "%s_sum", family);
	fmt_f64(v, sizeof(v), sum);
	va_list cp;
	va_copy(cp, ap);
	emit(mb, name, NULL, cp, NULL, v);
	va_end(cp);
	snprintf(name, sizeof(name), "%s_count", family);
	snprintf(v, sizeof(v), "%" PRIu64, cum);
	va_copy(cp, ap);
	emit(mb, name, NULL, cp, NULL, v);
	va_end(cp);
	va_end(ap);
}

/* ---- the /metrics page -------------------------------------------------------------------- */

static void render_counters(struct nx_metrics_buf *mb)
{
	const char *family = NULL;
	char v[VALUE_MAX];
	for (int i = 0; i < NX_STAT__COUNT; i++) {
		const struct nx_stat_desc *d = nx_stat_desc((enum nx_stat)i);
		if (!family || strcmp(family, d->family)) {
			family = d->family;
			nx_metrics_family(mb, family, NX_METRIC_COUNTER, d->help);
		}
		snprintf(v, sizeof(v), "%" PRIu64, nx_stat_read((enum nx_stat)i));
		nx_metrics_sample_raw(mb, family, d->labels, v);
	}
}

static void render_gauges(struct nx_metrics_buf *mb)
{
	char name[NX_METRICS_NAME_MAX + 1];
	char help[256];
	for (int i = 0; i < NX_GAUGE__COUNT; i++) {
		const char *fam = nx_gauge_family((enum nx_gauge)i);
		nx_metrics_family(mb, fam, NX_METRIC_GAUGE, nx_gauge_help((enum nx_gauge)i));
		nx_metrics_sample_i64(mb, fam, nx_gauge_read((enum nx_gauge)i), NULL);
		snprintf(name, sizeof(name), "%s_peak", fam);
		snprintf(help, sizeof(help), "Highest %s since start", fam);
		nx_metrics_family(mb, name, NX_METRIC_GAUGE, help);
		nx_metrics_sample_i64(mb, name, nx_gauge_peak((enum nx_gauge)i), NULL);
	}
}

static void render_ledger(struct nx_metrics_buf *mb)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	nx_metrics_family(mb, "nxdns_memory_owner_bytes", NX_METRIC_GAUGE,
			  "Bytes charged to each memory-ledger owner");
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		nx_metrics_sample_i64(mb, "nxdns_memory_owner_bytes", rows[i].bytes, "owner",
				      rows[i].name, NULL);
	}
	nx_metrics_family(mb, "nxdns_memory_owner_allocations", NX_METRIC_GAUGE,
			  "Live allocations (or mapped objects) of each memory-ledger owner");
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		nx_metrics_sample_i64(mb, "nxdns_memory_owner_allocations", rows[i].count, "owner",
				      rows[i].name, NULL);
	}
}

static void gauge1(struct nx_metrics_buf *mb, const char *name, const char *help, int64_t v)
{
	if (v < 0) {
		return; /* not readable here: leave the family out rather than lie */
	}
	nx_metrics_family(mb, name, NX_METRIC_GAUGE, help);
	nx_metrics_sample_i64(mb, name, v, NULL);
}

static void render_process(struct nx_metrics_buf *mb)
{
	struct nx_process_figures p;
	nx_admin_read_process(&p);
	gauge1(mb, "nxdns_process_vmrss_bytes", "Resident set size (/proc/self/status VmRSS)",
	       p.vmrss_bytes);
	gauge1(mb, "nxdns_process_rssanon_bytes", "Resident anonymous memory (RssAnon)",
	       p.rssanon_bytes);
	gauge1(mb, "nxdns_process_rssfile_bytes", "Resident file-backed memory (RssFile)",
	       p.rssfile_bytes);
	gauge1(mb, "nxdns_process_vmhwm_bytes", "Peak resident set size (VmHWM)", p.vmhwm_bytes);
	gauge1(mb, "nxdns_process_threads", "Threads in the process", p.threads);
	gauge1(mb, "nxdns_heap_in_use_bytes",
	       "malloc heap bytes allocated, mmapped chunks included (mallinfo2)",
	       p.heap_in_use_bytes);
	gauge1(mb, "nxdns_heap_free_bytes",
	       "malloc heap bytes free but retained by the allocator (mallinfo2 fordblks)",
	       p.heap_free_bytes);
	gauge1(mb, "nxdns_process_code_bytes",
	       "Resident pages of the executable and shared libraries (smaps; no ledger owner)",
	       p.code_bytes);
	gauge1(mb, "nxdns_process_snapshot_resident_bytes",
	       "Resident pages of the mapped blocklist snapshot (smaps)",
	       p.snapshot_resident_bytes);
}

static void render_server(struct nx_admin *a, struct nx_metrics_buf *mb)
{
	static const struct {
		const char *family, *labels, *help;
	} rows[] = {
#define NX_ADMIN_CTR_ROW(id, fam, labels, help) {fam, labels, help},
	    NX_ADMIN_COUNTERS(NX_ADMIN_CTR_ROW)
#undef NX_ADMIN_CTR_ROW
	};
	const char *family = NULL;
	char v[VALUE_MAX];
	for (size_t i = 0; i < NX_ARRAY_LEN(rows); i++) {
		if (!family || strcmp(family, rows[i].family)) {
			family = rows[i].family;
			nx_metrics_family(mb, family, NX_METRIC_COUNTER, rows[i].help);
		}
		snprintf(v, sizeof(v), "%" PRIu64, a->ctr[i]);
		nx_metrics_sample_raw(mb, family, rows[i].labels, v);
	}
	gauge1(mb, "nxdns_admin_http_connections", "Open admin HTTP connections", a->connections);
	gauge1(mb, "nxdns_lists_rebuilding",
	       "1 while block lists compile or the snapshot builds (admin changes answer 503)",
	       a->busy ? 1 : 0);
	gauge1(mb, "nxdns_admin_http_connections_peak", "Highest nxdns_admin_http_connections",
	       a->connections_peak);
	nx_admin_live_metrics(a, mb);
}

void nx_admin_render_metrics(struct nx_admin *a, struct nx_metrics_buf *mb)
{
	render_counters(mb);
	render_gauges(mb);
	render_ledger(mb);
	render_process(mb);
	if (a) {
		render_server(a, mb);
		if (a->hooks.metrics_extra) {
			a->hooks.metrics_extra(mb, a->hooks.ud);
		}
	}
}

static void free_mb(void *cls)
{
	nx_metrics_buf_free(cls);
}

#define METRICS_HEADROOM 1024 /* bytes over the previous scrape's size: series come and go */

int nx_admin_handle_metrics(struct nx_admin_req *req)
{
	struct nx_admin *a = req->admin;
	size_t initial = a->last_metrics_bytes ? a->last_metrics_bytes + METRICS_HEADROOM
					       : NX_METRICS_INITIAL_BYTES;
	struct nx_metrics_buf *mb = nx_metrics_buf_create(initial, NX_METRICS_MAX_BYTES);
	if (!mb) {
		return -ENOMEM;
	}
	nx_admin_render_metrics(a, mb);
	if (mb->err) {
		int err = mb->err;
		nx_metrics_buf_free(mb);
		a->ctr[NX_ADMIN_CTR_METRICS_FAILED]++;
		return nx_admin_reply_error(req, 500, "metrics_failed", NULL,
					    "the exposition could not be built: %s",
					    nx_strerror(err));
	}
	a->last_metrics_bytes = mb->len;
	return nx_admin_reply_buffer(req, 200, NX_METRICS_CONTENT_TYPE, mb->data, mb->len, free_mb,
				     mb);
}

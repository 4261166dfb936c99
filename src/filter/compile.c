/* Compile one source: stream lines -> parse -> external sort -> bodies + meta. */
#include "filter/compile.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/ledger.h"
#include "filter/impl.h"
#include "filter/side.h"

enum body { B_LIST, B_WILD, B_ALLOW, B__COUNT };
static const char *const body_ext[B__COUNT] = {".list", ".wild", ".allow"};

#define KBIT(k) (1u << NX_FILTER_K_##k)

void nx_filter_hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

int nx_filter_unhex(const char *in, uint8_t *out, size_t n)
{
	if (strlen(in) != 2 * n) {
		return NX_EMALFORMED;
	}
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(in[2 * i]), lo = hexval(in[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			return NX_EMALFORMED;
		}
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

bool nx_filter_source_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > NX_FILTER_SOURCE_NAME_MAX || name[0] == '.') {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.')) {
			return false;
		}
	}
	return true;
}

struct ctx {
	struct nx_filter_compile_report *rep;
	const struct nx_filter_compile_opts *opts;
	uint64_t names; /* written, for on_step */
	int64_t base_bytes; /* filter_build bytes this thread held at start */
	struct nx_xsort *xs;
	uint64_t lineno;
	int err; /* first sort error */
	struct nx_wr wr[B__COUNT];
	crypto_hash_sha256_state body_sha[B__COUNT];
	struct nx_wr side_wr; /* <name>.side, open during the parse when opts->side */
	crypto_hash_sha256_state side_sha;
	bool side_open;
};

static void sample(void *arg)
{
	struct ctx *c = arg;
	int64_t d = nx_ledger_thread_bytes(NX_OWNER_filter_build) - c->base_bytes;
	if (d > 0 && (uint64_t)d > c->rep->peak_build_bytes) {
		c->rep->peak_build_bytes = (uint64_t)d;
	}
	if (c->opts->on_step) {
		c->opts->on_step(c->opts->step_arg);
	}
}

static void on_rule(void *arg, enum nx_filter_kind kind, const char *name, size_t len)
{
	struct ctx *c = arg;
	if (c->err) {
		return;
	}
	c->rep->rules_used++;
	if (kind == NX_FILTER_K_PLAIN && c->opts->subdomains) {
		kind = NX_FILTER_K_ABP_SUB;
	}
	if (kind >= NX_FILTER_K_BAD_ABP_SUB) {
		c->rep->badfilter_rules++;
		c->rep->rules_used--;
	}
	c->err = nx_xsort_add(c->xs, name, len, (unsigned)kind);
}

static void note_skip(struct nx_filter_compile_report *rep, enum nx_filter_skip why,
		      uint64_t lineno)
{
	rep->skipped_total++;
	uint64_t k = rep->skipped[why]++;
	if (k < NX_FILTER_SKIP_LINES) {
		rep->skip_lines[why][k] = lineno;
	}
}

static void on_side(void *arg, const char *line, size_t len)
{
	struct ctx *c = arg;
	if (c->rep->n_side >= NX_FILTER_SIDE_RULES_MAX) {
		note_skip(c->rep, NX_FILTER_SKIP_side_limit, c->lineno);
		return;
	}
	nx_wr_put(&c->side_wr, line, len);
	nx_wr_put(&c->side_wr, "\n", 1);
	c->rep->n_side++;
}

static void on_skip(void *arg, enum nx_filter_skip why)
{
	struct ctx *c = arg;
	note_skip(c->rep, why, c->lineno);
}

static void on_important(void *arg)
{
	struct ctx *c = arg;
	c->rep->important++;
}

static void on_input(void *arg, const void *p, size_t n)
{
	crypto_hash_sha256_update(arg, p, n);
}

static void on_body(void *arg, const void *p, size_t n)
{
	crypto_hash_sha256_update(arg, p, n);
}

/* One distinct name with the kinds its rules said: resolve $badfilter, write bodies. */
static int on_name(void *arg, const char *name, size_t len, uint32_t kinds)
{
	struct ctx *c = arg;
	if (++c->names % NX_FILTER_STEP_NAMES == 0 && c->opts->on_step) {
		c->opts->on_step(c->opts->step_arg);
	}
	static const struct {
		unsigned bad, good;
	} cancel[] = {
	    {NX_FILTER_K_BAD_ABP_SUB, NX_FILTER_K_ABP_SUB},
	    {NX_FILTER_K_BAD_ABP_EXACT, NX_FILTER_K_ABP_EXACT},
	    {NX_FILTER_K_BAD_ALLOW_SUB, NX_FILTER_K_ALLOW_SUB},
	    {NX_FILTER_K_BAD_ALLOW_EXACT, NX_FILTER_K_ALLOW_EXACT},
	};
	for (size_t i = 0; i < sizeof(cancel) / sizeof(cancel[0]); i++) {
		if ((kinds & (1u << cancel[i].bad)) && (kinds & (1u << cancel[i].good))) {
			kinds &= ~(1u << cancel[i].good);
			c->rep->badfilter_cancelled++;
		}
	}
	if (kinds & (KBIT(PLAIN) | KBIT(ABP_SUB) | KBIT(ABP_EXACT))) {
		nx_wr_put(&c->wr[B_LIST], name, len);
		nx_wr_put(&c->wr[B_LIST], "\n", 1);
		c->rep->n_list++;
	}
	if (kinds & (KBIT(ABP_SUB) | KBIT(WILD))) {
		nx_wr_put(&c->wr[B_WILD], name, len);
		nx_wr_put(&c->wr[B_WILD], "\n", 1);
		c->rep->n_wild++;
	}
	if (kinds & KBIT(ALLOW_SUB)) {
		nx_wr_put(&c->wr[B_ALLOW], name, len);
		nx_wr_put(&c->wr[B_ALLOW], "\tsub\n", 5);
		c->rep->n_allow++;
		c->rep->n_allow_sub++;
	} else if (kinds & KBIT(ALLOW_EXACT)) {
		nx_wr_put(&c->wr[B_ALLOW], name, len);
		nx_wr_put(&c->wr[B_ALLOW], "\texact\n", 7);
		c->rep->n_allow++;
		c->rep->n_allow_exact++;
	}
	for (int b = 0; b < B__COUNT; b++) {
		if (c->wr[b].err) {
			return c->wr[b].err;
		}
	}
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int meta_commit(const char *path, json_t *j, bool dir_sync);

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* Old enough that a rewrite within one timestamp tick cannot pass as the same file. */
static bool stat_settled(const struct stat *sb)
{
	struct timespec now;
	return clock_gettime(CLOCK_REALTIME, &now) == 0 &&
	       NX_MAX(ts_ns(&sb->st_mtim), ts_ns(&sb->st_ctim)) + NX_FILTER_STAT_SETTLE_NS <=
		       ts_ns(&now);
}

/* The meta's "input_stat" object. */
static json_t *stat_json(uint64_t size, uint64_t ino, int64_t mtime_ns, int64_t ctime_ns)
{
	return json_pack("{s:I, s:I, s:I, s:I}", "size", (json_int_t)size, "ino", (json_int_t)ino,
			 "mtime_ns", (json_int_t)mtime_ns, "ctime_ns", (json_int_t)ctime_ns);
}

static int write_meta(const char *outdir, const struct nx_filter_compile_opts *o,
		      const struct nx_filter_compile_report *rep)
{
	json_t *j = nx_filter_compile_report_json(rep);
	if (!j) {
		return -ENOMEM;
	}
	/* the options that shape the bodies: a change of one must recompile the same input */
	json_object_set_new(j, "options",
			    json_pack("{s:b, s:b, s:b}", "side", o->side, "hosts_listed",
				      o->hosts_listed, "subdomains", o->subdomains));
	if (o->origin) {
		json_object_set_new(j, "origin", json_string(o->origin));
	}
	if (o->etag || o->last_modified || o->fetched_at) {
		json_t *f = json_object();
		if (o->etag) {
			json_object_set_new(f, "etag", json_string(o->etag));
		}
		if (o->last_modified) {
			json_object_set_new(f, "last_modified", json_string(o->last_modified));
		}
		if (o->fetched_at) {
			json_object_set_new(f, "fetched_at", json_integer(o->fetched_at));
		}
		json_object_set_new(j, "fetch", f);
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.meta", outdir, rep->name);
	/* the bodies' renames were made durable by one fsync of outdir before this: a crash
	 * leaves the old meta or the new one, never a new meta over old bodies; the old meta only
	 * causes a recompile (its input_sha256 differs) */
	return meta_commit(path, j, false);
}

/* Write j (reference taken) to path: temp, fsync, rename (and fsync the directory when
 * dir_sync). */
static int meta_commit(const char *path, json_t *j, bool dir_sync)
{
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(j);
	if (!text) {
		return -ENOMEM;
	}
	char tmp[4300];
	int fd = nx_tmp_open(path, tmp, sizeof(tmp));
	int rc = fd < 0 ? fd : 0;
	if (rc == 0) {
		rc = nx_write_all(fd, text, strlen(text));
		if (rc == 0) {
			rc = nx_write_all(fd, "\n", 1);
		}
		if (rc == 0) {
			rc = dir_sync ? nx_tmp_commit(fd, tmp, path)
				      : nx_tmp_commit_nodir(fd, tmp, path);
		} else {
			close(fd);
			unlink(tmp);
		}
	}
	free(text);
	return rc;
}

int nx_filter_compile_fd(int fd, const char *outdir, const struct nx_filter_compile_opts *o,
			 struct nx_filter_compile_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	if (!o || !nx_filter_source_name_ok(o->name) ||
	    (unsigned)o->format >= NX_FILTER_FMT__COUNT) {
		return NX_EFORMAT;
	}
	if (sodium_init() < 0) {
		return -ENOSYS;
	}
	uint64_t t0 = now_ms();
	snprintf(rep->name, sizeof(rep->name), "%s", o->name);
	snprintf(rep->format, sizeof(rep->format), "%s", nx_filter_format_name(o->format));

	struct ctx c = {.rep = rep, .opts = o};
	/* this thread's share only: `nxdns update` compiles several sources at once */
	c.base_bytes = nx_ledger_thread_bytes(NX_OWNER_filter_build);
	{
		struct stat sb;
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
			rep->input_size = (uint64_t)sb.st_size;
			rep->input_ino = (uint64_t)sb.st_ino;
			rep->input_mtime_ns = ts_ns(&sb.st_mtim);
			rep->input_ctime_ns = ts_ns(&sb.st_ctim);
			rep->input_stat_ok = stat_settled(&sb);
		}
	}
	crypto_hash_sha256_state in_sha;
	crypto_hash_sha256_init(&in_sha);
	struct nx_lr lr;
	int rc = nx_lr_init(&lr, fd);
	if (rc != 0) {
		return rc;
	}
	lr.on_data = on_input;
	lr.on_data_arg = &in_sha;
	rc = nx_xsort_new(&c.xs, o->run_bytes ? o->run_bytes : NX_FILTER_RUN_DEFAULT, outdir);
	if (rc != 0) {
		nx_lr_deinit(&lr);
		return rc;
	}
	nx_xsort_set_probe(c.xs, sample, &c);
	const struct nx_filter_parse_cb cbs = {.rule = on_rule,
					       .skip = on_skip,
					       .important = on_important,
					       .side = o->side ? on_side : NULL,
					       .hosts_listed = o->hosts_listed};
	char side_path[4200], side_tmp[4300];
	int side_fd = -1;
	if (o->side) {
		snprintf(side_path, sizeof(side_path), "%s/%s.side", outdir, o->name);
		side_fd = nx_tmp_open(side_path, side_tmp, sizeof(side_tmp));
		rc = side_fd < 0 ? side_fd : nx_wr_init(&c.side_wr, side_fd);
		if (rc != 0) {
			if (side_fd >= 0) {
				close(side_fd);
				unlink(side_tmp);
			}
			nx_xsort_free(c.xs);
			nx_lr_deinit(&lr);
			return rc;
		}
		c.side_open = true;
		crypto_hash_sha256_init(&c.side_sha);
		c.side_wr.on_data = on_body;
		c.side_wr.on_data_arg = &c.side_sha;
	}
	for (;;) {
		const char *line;
		size_t len;
		bool too_long;
		rc = nx_lr_next(&lr, NX_FILTER_LINE_MAX, &line, &len, &too_long);
		if (rc <= 0) {
			break;
		}
		c.lineno++;
		rep->lines++;
		if (c.lineno % NX_FILTER_STEP_LINES == 0) {
			sample(&c);
		}
		if (too_long) {
			note_skip(rep, NX_FILTER_SKIP_line_too_long, c.lineno);
			continue;
		}
		switch (nx_filter_parse_line(line, len, o->format, &cbs, &c)) {
		case NX_FILTER_LINE_BLANK:
			rep->blank++;
			break;
		case NX_FILTER_LINE_COMMENT:
			rep->comments++;
			break;
		default:
			break;
		}
		if (c.err) {
			rc = c.err;
			break;
		}
	}
	rep->input_bytes = lr.bytes;
	nx_lr_deinit(&lr);
	uint8_t digest[32];
	crypto_hash_sha256_final(&in_sha, digest);
	nx_filter_hex(digest, 32, rep->input_sha256);

	/* Bodies: temp files, renamed only when everything succeeded. */
	char paths[B__COUNT][4200], tmps[B__COUNT][4300];
	int fds[B__COUNT] = {-1, -1, -1};
	int nwr = 0;
	for (int b = 0; rc == 0 && b < B__COUNT; b++) {
		snprintf(paths[b], sizeof(paths[b]), "%s/%s%s", outdir, o->name, body_ext[b]);
		fds[b] = nx_tmp_open(paths[b], tmps[b], sizeof(tmps[b]));
		if (fds[b] < 0) {
			rc = fds[b];
			break;
		}
		rc = nx_wr_init(&c.wr[b], fds[b]);
		if (rc != 0) {
			break;
		}
		nwr++;
		crypto_hash_sha256_init(&c.body_sha[b]);
		c.wr[b].on_data = on_body;
		c.wr[b].on_data_arg = &c.body_sha[b];
	}
	sample(&c);
	if (rc == 0) {
		rc = nx_xsort_finish(c.xs, on_name, &c);
		sample(&c);
		rep->sort_runs = nx_xsort_runs(c.xs);
	}
	nx_xsort_free(c.xs);
	for (int b = 0; b < nwr; b++) {
		int frc = nx_wr_flush(&c.wr[b]);
		if (rc == 0) {
			rc = frc;
		}
		nx_wr_deinit(&c.wr[b]);
	}
	if (rc == 0) {
		crypto_hash_sha256_state all;
		crypto_hash_sha256_init(&all);
		for (int b = 0; b < B__COUNT; b++) {
			crypto_hash_sha256_final(&c.body_sha[b], digest);
			crypto_hash_sha256_update(&all, digest, 32);
		}
		if (c.side_open) {
			int frc = nx_wr_flush(&c.side_wr);
			if (frc != 0) {
				rc = frc;
			}
			crypto_hash_sha256_final(&c.side_sha, digest);
			if (rep->n_side) {
				crypto_hash_sha256_update(&all, digest, 32);
			}
		}
		crypto_hash_sha256_final(&all, digest);
		nx_filter_hex(digest, 32, rep->bodies_sha256);
		if (o->refuse_below && rep->n_list + rep->n_wild + rep->n_allow < o->refuse_below) {
			rep->kept_previous = true;
			rc = NX_ELIMIT;
		}
	}
	for (int b = 0; b < B__COUNT; b++) {
		if (fds[b] < 0) {
			continue;
		}
		if (rc == 0) {
			rc = nx_tmp_commit_nodir(fds[b], tmps[b], paths[b]);
		} else {
			close(fds[b]);
			unlink(tmps[b]);
		}
	}
	if (c.side_open) {
		nx_wr_deinit(&c.side_wr);
		if (rc == 0 && rep->n_side) {
			rc = nx_tmp_commit_nodir(side_fd, side_tmp, side_path);
		} else {
			close(side_fd);
			unlink(side_tmp);
			if (rc == 0) {
				unlink(side_path); /* no side rules now: drop an old body */
			}
		}
	}
	if (rc == 0) {
		nx_fsync_dir(outdir); /* one for the bodies' renames, before the meta names them */
	}
	rep->compile_ms = now_ms() - t0;
	if (rc == 0) {
		rc = write_meta(outdir, o, rep);
	}
	return rc;
}

int nx_filter_compile_file(const char *path, const char *outdir,
			   const struct nx_filter_compile_opts *opts,
			   struct nx_filter_compile_report *rep)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		memset(rep, 0, sizeof(*rep));
		return -errno;
	}
	int rc = nx_filter_compile_fd(fd, outdir, opts, rep);
	close(fd);
	return rc;
}

json_t *nx_filter_compile_report_json(const struct nx_filter_compile_report *r)
{
	json_t *j = json_object();
	json_t *counts = json_object();
	json_t *skipped = json_object();
	json_t *bad = json_object();
	if (!j || !counts || !skipped || !bad) {
		json_decref(j);
		json_decref(counts);
		json_decref(skipped);
		json_decref(bad);
		return NULL;
	}
	json_object_set_new(j, "version", json_integer(1));
	json_object_set_new(j, "name", json_string(r->name));
	json_object_set_new(j, "format", json_string(r->format));
	json_object_set_new(j, "input_sha256", json_string(r->input_sha256));
	json_object_set_new(j, "bodies_sha256", json_string(r->bodies_sha256));
	json_object_set_new(j, "input_bytes", json_integer((json_int_t)r->input_bytes));
	json_object_set_new(j, "lines", json_integer((json_int_t)r->lines));
	json_object_set_new(j, "blank", json_integer((json_int_t)r->blank));
	json_object_set_new(j, "comments", json_integer((json_int_t)r->comments));
	json_object_set_new(j, "rules_used", json_integer((json_int_t)r->rules_used));
	json_object_set_new(counts, "list", json_integer((json_int_t)r->n_list));
	json_object_set_new(counts, "wild", json_integer((json_int_t)r->n_wild));
	json_object_set_new(counts, "allow", json_integer((json_int_t)r->n_allow));
	json_object_set_new(counts, "allow_sub", json_integer((json_int_t)r->n_allow_sub));
	json_object_set_new(counts, "allow_exact", json_integer((json_int_t)r->n_allow_exact));
	json_object_set_new(counts, "side", json_integer((json_int_t)r->n_side));
	json_object_set_new(j, "counts", counts);
	for (int s = 1; s < NX_FILTER_SKIP__COUNT; s++) {
		if (!r->skipped[s]) {
			continue;
		}
		json_t *e = json_object();
		json_t *lines = json_array();
		for (int k = 0; k < NX_FILTER_SKIP_LINES && r->skip_lines[s][k]; k++) {
			json_array_append_new(lines, json_integer((json_int_t)r->skip_lines[s][k]));
		}
		json_object_set_new(e, "count", json_integer((json_int_t)r->skipped[s]));
		json_object_set_new(e, "first_lines", lines);
		json_object_set_new(skipped, nx_filter_skip_name((enum nx_filter_skip)s), e);
	}
	json_object_set_new(j, "skipped", skipped);
	json_object_set_new(j, "skipped_total", json_integer((json_int_t)r->skipped_total));
	json_object_set_new(j, "important_as_plain", json_integer((json_int_t)r->important));
	json_object_set_new(bad, "rules", json_integer((json_int_t)r->badfilter_rules));
	json_object_set_new(bad, "cancelled", json_integer((json_int_t)r->badfilter_cancelled));
	json_object_set_new(j, "badfilter", bad);
	json_object_set_new(j, "sort_runs", json_integer(r->sort_runs));
	if (r->input_stat_ok) {
		json_object_set_new(j, "input_stat",
				    stat_json(r->input_size, r->input_ino, r->input_mtime_ns,
					      r->input_ctime_ns));
	}
	json_object_set_new(j, "compile_ms", json_integer((json_int_t)r->compile_ms));
	json_object_set_new(j, "peak_build_bytes", json_integer((json_int_t)r->peak_build_bytes));
	if (r->kept_previous) {
		json_object_set_new(j, "kept_previous", json_true());
	}
	return j;
}

int nx_filter_meta_note_input_stat(const char *dir, const char *name, const char *input,
				   const struct stat *before, const char input_sha256[65])
{
	struct stat sb;
	if (stat(input, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size != before->st_size ||
	    sb.st_ino != before->st_ino || ts_ns(&sb.st_mtim) != ts_ns(&before->st_mtim) ||
	    ts_ns(&sb.st_ctim) != ts_ns(&before->st_ctim) || !stat_settled(&sb)) {
		return 0; /* changed while hashed, or not settled yet: next time */
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.meta", dir, name);
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (!j) {
		return -ENOENT;
	}
	const char *sha = json_string_value(json_object_get(j, "input_sha256"));
	if (!sha || strcmp(sha, input_sha256) != 0) {
		json_decref(j);
		return 0;
	}
	json_object_set_new(j, "input_stat",
			    stat_json((uint64_t)sb.st_size, (uint64_t)sb.st_ino, ts_ns(&sb.st_mtim),
				      ts_ns(&sb.st_ctim)));
	int rc = meta_commit(path, j, true);
	return rc < 0 ? rc : 1;
}

int nx_filter_meta_input_unchanged(const json_t *meta, const char *path)
{
	const json_t *is = json_object_get(meta, "input_stat");
	struct stat sb;
	if (!json_is_object(is) || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		return 0;
	}
	return json_integer_value(json_object_get(is, "size")) == (json_int_t)sb.st_size &&
	       json_integer_value(json_object_get(is, "ino")) == (json_int_t)sb.st_ino &&
	       json_integer_value(json_object_get(is, "mtime_ns")) == ts_ns(&sb.st_mtim) &&
	       json_integer_value(json_object_get(is, "ctime_ns")) == ts_ns(&sb.st_ctim);
}

static int sha_file(const char *path, uint8_t out[32])
{
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) {
		return -errno;
	}
	int rc = 0;
	if (fd >= 0) {
		char buf[16384];
		for (;;) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR) {
				continue;
			}
			if (n < 0) {
				rc = -errno;
				break;
			}
			if (n == 0) {
				break;
			}
			crypto_hash_sha256_update(&st, (const unsigned char *)buf, (size_t)n);
		}
		close(fd);
	}
	crypto_hash_sha256_final(&st, out);
	return rc;
}

int nx_filter_bodies_sha256(const char *dir, const char *name, uint8_t out[32])
{
	crypto_hash_sha256_state all;
	crypto_hash_sha256_init(&all);
	for (int b = 0; b < B__COUNT; b++) {
		char path[4200];
		uint8_t d[32];
		snprintf(path, sizeof(path), "%s/%s%s", dir, name, body_ext[b]);
		int rc = sha_file(path, d);
		if (rc != 0) {
			return rc;
		}
		crypto_hash_sha256_update(&all, d, 32);
	}
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s.side", dir, name);
	if (stat(path, &st) == 0 && st.st_size > 0) {
		uint8_t d[32];
		int rc = sha_file(path, d);
		if (rc != 0) {
			return rc;
		}
		crypto_hash_sha256_update(&all, d, 32);
	}
	crypto_hash_sha256_final(&all, out);
	return 0;
}

int nx_filter_meta_bodies_sha256(const char *dir, const char *name, uint8_t out[32])
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.meta", dir, name);
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (!j) {
		return access(path, F_OK) == 0 ? NX_ECORRUPT : -ENOENT;
	}
	const char *hex = json_string_value(json_object_get(j, "bodies_sha256"));
	int rc = hex ? nx_filter_unhex(hex, out, 32) : NX_ECORRUPT;
	json_decref(j);
	return rc == 0 ? 0 : NX_ECORRUPT;
}

int nx_filter_meta_skips(const char *dir, const char *name, json_t **out)
{
	*out = NULL;
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.meta", dir, name);
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (!j) {
		return access(path, F_OK) == 0 ? NX_ECORRUPT : -ENOENT;
	}
	json_t *skipped = json_object_get(j, "skipped");
	json_t *res = json_object();
	int rc = skipped && json_is_object(skipped) && res ? 0 : NX_ECORRUPT;
	/* Walk our own reason list, not the file's keys: a reason this build does not know (a
	 * meta written by a newer one) is left out rather than shown without its words. */
	for (int s = 1; !rc && s < NX_FILTER_SKIP__COUNT; s++) {
		const char *reason = nx_filter_skip_name((enum nx_filter_skip)s);
		json_t *e = json_object_get(skipped, reason);
		if (!e) {
			continue;
		}
		json_t *count = json_object_get(e, "count");
		json_t *lines = json_object_get(e, "first_lines");
		if (!json_is_integer(count) || !json_is_array(lines)) {
			rc = NX_ECORRUPT;
			break;
		}
		json_t *o = json_pack("{s:O, s:O, s:s}", "count", count, "first_lines", lines,
				      "help", nx_filter_skip_help((enum nx_filter_skip)s));
		if (!o || json_object_set_new(res, reason, o)) {
			rc = -ENOMEM;
		}
	}
	json_decref(j);
	if (rc) {
		json_decref(res);
		return rc;
	}
	*out = res;
	return 0;
}

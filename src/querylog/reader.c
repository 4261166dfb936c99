/*
 * Reader connections for the admin API: the log with keyset pagination, and statistics from
 * the per-minute aggregates. Results are jansson objects.
 */
#include "querylog/querylog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "dns/msg.h"
#include "filter/result.h"
#include "querylog/impl.h"

struct nx_qlog_reader {
	sqlite3 *db;	    /* owned */
	unsigned cache_kib; /* cache_size read back */
	bool no_roll;	    /* top-N always sums agg_top (tests compare the two ways) */
};

void nx_qlog_reader_no_roll(struct nx_qlog_reader *r, bool off)
{
	r->no_roll = off;
}

/* ---- names ---- */

static const char *const proto_names[] = {
#define NX_QLOG_PROTO_NAME(id, text) text,
	NX_QLOG_PROTOS(NX_QLOG_PROTO_NAME)
#undef NX_QLOG_PROTO_NAME
};
static const char *const action_names[] = {"none", "allow", "block", "local"};
static const char *const reason_names[] = {
#define NX_QLOG_REASON_NAME(id, text) text,
	NX_FILTER_REASONS(NX_QLOG_REASON_NAME)
#undef NX_QLOG_REASON_NAME
};
static const char *const status_names[] = {
#define NX_QLOG_STATUS_NAME(id, text) text,
	NX_QLOG_STATUSES(NX_QLOG_STATUS_NAME)
#undef NX_QLOG_STATUS_NAME
};
static const char *const top_names[] = {
#define NX_QLOG_TOP_NAME(id, text) text,
	NX_QLOG_TOP_KINDS(NX_QLOG_TOP_NAME)
#undef NX_QLOG_TOP_NAME
};

#define NAME_OR(table, i, dflt) ((size_t)(i) < NX_ARRAY_LEN(table) ? (table)[i] : (dflt))

int nx_qlog_status_parse(const char *s, enum nx_qlog_status *out)
{
	for (size_t i = 0; s && i < NX_ARRAY_LEN(status_names); i++) {
		if (strcmp(s, status_names[i]) == 0) {
			*out = (enum nx_qlog_status)i;
			return 0;
		}
	}
	return -EINVAL;
}

int nx_qlog_proto_parse(const char *s, size_t len, enum nx_qlog_proto *out)
{
	for (size_t i = 0; s && i < NX_ARRAY_LEN(proto_names); i++) {
		if (strlen(proto_names[i]) == len && !memcmp(s, proto_names[i], len)) {
			*out = (enum nx_qlog_proto)i;
			return 0;
		}
	}
	return -EINVAL;
}

int nx_qlog_top_kind_parse(const char *s, enum nx_qlog_top_kind *out)
{
	for (size_t i = 0; s && i < NX_ARRAY_LEN(top_names); i++) {
		if (strcmp(s, top_names[i]) == 0) {
			*out = (enum nx_qlog_top_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- one row / record as JSON ---- */

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* upstream NULL = none; matched, source, answer NULL = "". */
static json_t *item_json(const struct nx_qlog_item *it)
{
	char tbuf[16];
	return json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:b, s:I, "
			 "s:s}",
			 "ts", (json_int_t)it->ts, "client", it->client, "proto",
			 NAME_OR(proto_names, it->proto, "unknown"), "qtype",
			 nx_dns_type_name((uint16_t)it->qtype, tbuf), "rcode",
			 nx_dns_rcode_name(it->rcode), "action",
			 NAME_OR(action_names, it->action, "unknown"), "reason",
			 NAME_OR(reason_names, it->reason, "unknown"), "name", it->name, "matched",
			 or_empty(it->matched), "source", or_empty(it->source), "answer",
			 or_empty(it->answer), "upstream",
			 it->upstream, "cached", it->cached, "duration_us",
			 (json_int_t)it->duration_us, "client_id", or_empty(it->client_id));
}

json_t *nx_qlog_rec_to_json(const struct nx_qlog_rec *r, const char *upstream)
{
	char client[64];
	struct nx_qlog_rec c;
	memcpy(&c, r, sizeof(c));
	nx_qlog_apply_privacy(&c, 0); /* only terminates the strings */
	nx_qlog_client_text(&c, client, sizeof(client));
	struct nx_qlog_item it = {
		.ts = c.ts_ms,
		.duration_us = c.duration_us,
		.client = client,
		.proto = c.proto,
		.qtype = c.qtype,
		.rcode = c.rcode,
		.action = c.action,
		.reason = c.reason,
		.cached = c.cached != 0,
		.upstream = c.upstream >= 0 ? upstream : NULL,
		.name = c.name,
		.matched = c.matched,
		.source = c.source,
		.answer = c.answer,
		.client_id = c.client_id,
	};
	return item_json(&it);
}

/* ---- connection ---- */

static int rc_to_err(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
		return 0;
	case SQLITE_FORMAT:
		return NX_EFORMAT;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return NX_ECORRUPT;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_NOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

int nx_qlog_reader_open(const char *path, struct nx_qlog_reader **out)
{
	if (!path || !out) {
		return -EINVAL;
	}
	struct nx_qlog_reader *r = nx_mem_calloc(NX_OWNER_misc, 1, sizeof(*r));
	if (!r) {
		return -ENOMEM;
	}
	int rc = nx_qlog_db_open(path, ROLE_READER, NX_QLOG_READER_CACHE_KIB, &r->db, &r->cache_kib);
	if (rc != SQLITE_OK) {
		nx_mem_free(NX_OWNER_misc, r, sizeof(*r));
		return rc_to_err(rc);
	}
	*out = r;
	return 0;
}

void nx_qlog_reader_close(struct nx_qlog_reader *r)
{
	if (!r) {
		return;
	}
	nx_qlog_db_close(r->db);
	nx_mem_free(NX_OWNER_misc, r, sizeof(*r));
}

unsigned nx_qlog_reader_cache_kib(const struct nx_qlog_reader *r)
{
	return r ? r->cache_kib : 0;
}

static void bind_i64(sqlite3_stmt *s, const char *name, int64_t v)
{
	int i = sqlite3_bind_parameter_index(s, name);
	if (i) {
		sqlite3_bind_int64(s, i, v);
	}
}

static const char *col_text(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	return t ? t : "";
}

static int fail_field(const char **bad_field, const char *field)
{
	if (bad_field) {
		*bad_field = field;
	}
	return -EINVAL;
}

/* Minutes whose start lies in [from_ms, to_ms); 0 = unbounded. */
static void minute_range(int64_t from_ms, int64_t to_ms, int64_t *fm, int64_t *tm)
{
	*fm = from_ms > 0 ? (from_ms + 59999) / 60000 : INT64_MIN;
	*tm = to_ms > 0 ? (to_ms + 59999) / 60000 : INT64_MAX;
}

/* ---- the log ---- */

static int parse_cursor(const char *c, int64_t *ts, int64_t *id)
{
	char *end;
	errno = 0;
	long long a = strtoll(c, &end, 10);
	if (errno || end == c || *end != '.') {
		return -EINVAL;
	}
	const char *p = end + 1;
	long long b = strtoll(p, &end, 10);
	if (errno || end == p || *end || b < 0) {
		return -EINVAL;
	}
	*ts = a;
	*id = b;
	return 0;
}

/* Does a decoded record pass the filter (the cursor and block skips aside)? */
static bool item_matches(const struct nx_qlog_item *it, const struct nx_qlog_filter *f)
{
	if (f->client && strcmp(it->client, f->client) != 0) {
		return false;
	}
	if (f->client_id && f->client_id[0] && strcmp(or_empty(it->client_id), f->client_id) != 0) {
		return false;
	}
	if (f->name && f->name[0] && !strstr(it->name, f->name)) {
		return false;
	}
	if (f->client_match &&
	    !f->client_match(it->client, or_empty(it->client_id), f->client_match_ud)) {
		return false;
	}
	if ((f->from_ms && it->ts < f->from_ms) || (f->to_ms && it->ts >= f->to_ms)) {
		return false;
	}
	if (f->protos && (it->proto < 0 || it->proto >= NX_QLOG_PROTO__COUNT ||
			  !(f->protos & (1u << it->proto)))) {
		return false;
	}
	bool blocked = it->action == NX_QLOG_ACT_BLOCK, local = it->action == NX_QLOG_ACT_LOCAL;
	switch (f->status) {
	case NX_QLOG_STATUS_ALL:
		return true;
	case NX_QLOG_STATUS_BLOCKED:
		return blocked;
	case NX_QLOG_STATUS_ALLOWED:
		return !blocked;
	case NX_QLOG_STATUS_CACHED:
		return it->cached;
	case NX_QLOG_STATUS_FORWARDED:
		return !blocked && !local && !it->cached && it->upstream;
	case NX_QLOG_STATUS_LOCAL:
		return local;
	}
	return false;
}

/* Text a JSON encoder writes unchanged (printable ASCII but quote and backslash): its absence
 * from a block's raw text proves no string of the block contains it. */
static bool json_verbatim(const char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x80 || *s == '"' || *s == '\\') {
			return false;
		}
	}
	return true;
}

/* Does f->client_match accept a client of a block's list (a JSON array of address texts,
 * written by block.c without escapes)? A list it cannot read counts as a match. */
static bool any_client_matches(const char *list, const struct nx_qlog_filter *f)
{
	char one[NX_QLOG_CLIENT_TEXT_MAX];
	for (const char *p = list ? strchr(list, '"') : NULL; p; p = strchr(p, '"')) {
		const char *e = strchr(p + 1, '"');
		if (!e || (size_t)(e - p - 1) >= sizeof(one) || memchr(p + 1, '\\', (size_t)(e - p - 1))) {
			return true;
		}
		memcpy(one, p + 1, (size_t)(e - p - 1));
		one[e - p - 1] = '\0';
		if (f->client_match(one, "", f->client_match_ud)) {
			return true;
		}
		p = e + 1;
	}
	return list == NULL;
}

/* Could a block hold a matching record? Decided from its columns and raw text alone. */
static bool block_may_match(sqlite3_stmt *s, const struct nx_qlog_filter *f, bool name_raw,
			    const char *quoted_client)
{
	if (f->status == NX_QLOG_STATUS_BLOCKED && sqlite3_column_int64(s, 4) == 0) {
		return false;
	}
	if (quoted_client && sqlite3_column_type(s, 5) != SQLITE_NULL) {
		const char *c = (const char *)sqlite3_column_text(s, 5);
		if (c && !strstr(c, quoted_client)) {
			return false;
		}
	}
	if (f->client_match && !f->client_match_ids && sqlite3_column_type(s, 5) != SQLITE_NULL &&
	    !any_client_matches((const char *)sqlite3_column_text(s, 5), f)) {
		return false;
	}
	if (name_raw) {
		const char *t = sqlite3_column_blob(s, 6);
		int len = sqlite3_column_bytes(s, 6);
		if (!t || !memmem(t, (size_t)len, f->name, strlen(f->name))) {
			return false;
		}
	}
	/* a client id is [a-z0-9-]: written verbatim, so a block without the text has no match */
	if (f->client_id && f->client_id[0] && json_verbatim(f->client_id)) {
		const char *t = sqlite3_column_blob(s, 6);
		int len = sqlite3_column_bytes(s, 6);
		if (!t || !memmem(t, (size_t)len, f->client_id, strlen(f->client_id))) {
			return false;
		}
	}
	return true;
}

/* A block that does not decode is skipped (and left out of the queries view); said at most once
 * a minute, not on every page that passes it. */
static void bad_block(int64_t block)
{
	static _Atomic uint64_t last_ms;
	uint64_t now = nx_now_mono_ms(), prev = atomic_load(&last_ms);
	if ((!prev || now - prev >= 60000) && atomic_compare_exchange_strong(&last_ms, &prev, now)) {
		nx_log(NX_LOG_WARN, "querylog",
		       "log block %lld is not a well-formed block: skipped (said once a minute)",
		       (long long)block);
	}
}

/* Decode scratch of the reader, grown on demand (freed at the end of the query). */
struct scratch {
	struct nx_qlog_item *items;
	size_t items_cap;
	char *text;
	size_t text_cap;
};

static int scratch_fit(struct scratch *sc, size_t n_items, size_t text_len)
{
	if (n_items > sc->items_cap) {
		void *p = realloc(sc->items, n_items * sizeof(*sc->items));
		if (!p) {
			return -ENOMEM;
		}
		sc->items = p;
		sc->items_cap = n_items;
	}
	size_t bytes = nx_qlog_blk_scratch_bytes(text_len);
	if (bytes > sc->text_cap) {
		void *p = realloc(sc->text, bytes);
		if (!p) {
			return -ENOMEM;
		}
		sc->text = p;
		sc->text_cap = bytes;
	}
	return 0;
}

/* The page being collected: the best (newest) limit + 1 matches so far, a min-heap on (ts, id). */
struct hit {
	int64_t ts, id;
	json_t *o;
};

static bool hit_less(const struct hit *a, const struct hit *b)
{
	return a->ts < b->ts || (a->ts == b->ts && a->id < b->id);
}

static void heap_down(struct hit *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && hit_less(&h[l], &h[m])) {
			m = l;
		}
		if (l + 1 < n && hit_less(&h[l + 1], &h[m])) {
			m = l + 1;
		}
		if (m == i) {
			return;
		}
		struct hit t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void heap_up(struct hit *h, size_t i)
{
	while (i && hit_less(&h[i], &h[(i - 1) / 2])) {
		struct hit t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static int hit_cmp_desc(const void *a, const void *b)
{
	const struct hit *x = a, *y = b;
	return hit_less(x, y) ? 1 : hit_less(y, x) ? -1 : 0;
}

/* Offer one matching item to the page (heap of cap entries). 0 or -ENOMEM. */
static int offer(struct hit *h, size_t *n, size_t cap, const struct nx_qlog_item *it, int64_t id)
{
	struct hit c = {.ts = it->ts, .id = id};
	if (*n == cap && !hit_less(&h[0], &c)) {
		return 0;
	}
	c.o = item_json(it);
	if (!c.o || json_object_set_new(c.o, "id", json_integer(id))) {
		json_decref(c.o);
		return -ENOMEM;
	}
	if (*n == cap) {
		json_decref(h[0].o);
		h[0] = c;
		heap_down(h, *n, 0);
	} else {
		h[*n] = c;
		heap_up(h, (*n)++);
	}
	return 0;
}

/* Minutes of agg_names a name filter reads at a time: an hour of a household's names is
 * ~1 MB, so a common name's first page reads about that, not the whole day's ~20 MB. */
#define NAME_CHUNK_MINUTES 60

static int64_t one_int(sqlite3 *db, const char *sql, bool *ok);

/*
 * Minutes a name filter can skip: agg_names rows (db.c migration 6) that are complete (not
 * folded, no longer open in the writer) and whose names lack the text, within [lo, hi] (minutes),
 * newest first, into *out (malloc'd, caller frees). A file without the table skips nothing.
 * 0 or -ENOMEM / -EIO.
 */
static int name_skips(struct nx_qlog_reader *r, const char *name, int64_t lo, int64_t hi,
		      int64_t **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(r->db,
			       "SELECT minute, names FROM agg_names WHERE minute >= ?1 AND"
			       " minute <= ?2 AND folded = 0 AND open = 0 ORDER BY minute DESC",
			       -1, &s, NULL) != SQLITE_OK) {
		return 0; /* schema before 6: read every block */
	}
	sqlite3_bind_int64(s, 1, lo);
	sqlite3_bind_int64(s, 2, hi);
	size_t cap = 0, len = strlen(name);
	int rc, err = 0;
	while (!err && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *t = sqlite3_column_blob(s, 1);
		int tl = sqlite3_column_bytes(s, 1);
		if (t && memmem(t, (size_t)tl, name, len)) {
			continue;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 256;
			int64_t *p = realloc(*out, cap * sizeof(**out));
			if (!p) {
				err = -ENOMEM;
				break;
			}
			*out = p;
		}
		(*out)[(*n)++] = sqlite3_column_int64(s, 0);
	}
	if (!err && rc != SQLITE_DONE) {
		err = rc_to_err(rc);
	}
	sqlite3_finalize(s);
	if (err) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return err;
}

/*
 * Blocks are read newest first by their newest record (the ts_max index). Records reach the log
 * when answered, not when asked, so blocks overlap in time: a page keeps the newest limit + 1
 * matches in a heap and stops at the first block whose newest record is older than the page's
 * oldest, which no later block can beat.
 */
int nx_qlog_query(struct nx_qlog_reader *r, const struct nx_qlog_filter *f, json_t **out,
		  const char **bad_field)
{
	unsigned limit = f->limit ? f->limit : NX_QLOG_QUERY_LIMIT_DEFAULT;
	if (limit > NX_QLOG_QUERY_LIMIT_MAX) {
		return fail_field(bad_field, "limit");
	}
	if ((unsigned)f->status >= NX_ARRAY_LEN(status_names)) {
		return fail_field(bad_field, "status");
	}
	if (f->from_ms < 0) {
		return fail_field(bad_field, "from");
	}
	if (f->to_ms < 0 || (f->to_ms && f->to_ms <= f->from_ms)) {
		return fail_field(bad_field, "to");
	}
	int64_t cts = INT64_MAX, cid = INT64_MAX;
	if (f->cursor && parse_cursor(f->cursor, &cts, &cid)) {
		return fail_field(bad_field, "cursor");
	}

	/* A block's records lie within one minute (block.c), so a block holding a record at or
	 * before the cursor (before `to`) has its newest record less than a minute after it: an
	 * upper bound on the ts_max index, so a deep cursor or an old window seeks instead of
	 * walking every newer block. */
	int64_t hi = INT64_MAX;
	if (f->cursor) {
		hi = cts < INT64_MAX - 60000 ? cts + 60000 : INT64_MAX;
	}
	if (f->to_ms && f->to_ms < INT64_MAX - 60000) {
		hi = NX_MIN(hi, f->to_ms + 60000);
	}
	char sql[384];
	snprintf(sql, sizeof(sql),
		 "SELECT id, ts_min, ts_max, n, blocked, clients, records FROM log_blocks"
		 " WHERE ts_max < :hi AND ts_max >= :lo AND ts_min <= :cts%s%s"
		 " ORDER BY ts_max DESC, id DESC",
		 f->from_ms ? " AND ts_max >= :from" : "", f->to_ms ? " AND ts_min < :to" : "");
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(r->db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK) {
		return rc_to_err(rc);
	}
	bind_i64(s, ":cts", cts);
	bind_i64(s, ":from", f->from_ms);
	bind_i64(s, ":to", f->to_ms);

	/* A name filter walks the ts_max index in segments between the minutes whose names rule
	 * the text out (name_skips): their blocks are never read, not even their rows. */
	int64_t *skip = NULL;
	size_t n_skip = 0, next_skip = 0;
	bool by_names = false;
	/* minutes: the oldest with names in range, and how far down the names were read */
	int64_t names_lo = 0, cov_lo = 0;
	if (f->name && f->name[0]) {
		bool ok_lo, ok_hi;
		int64_t nmin = one_int(r->db, "SELECT MIN(minute) FROM agg_names", &ok_lo);
		int64_t nmax = one_int(r->db, "SELECT MAX(minute) FROM agg_names", &ok_hi);
		if (ok_lo && ok_hi) {
			by_names = true;
			names_lo = f->from_ms ? NX_MAX(nmin, f->from_ms / 60000) : nmin;
			cov_lo = NX_MIN(nmax, hi == INT64_MAX ? INT64_MAX - 1 : hi / 60000) + 1;
		}
	}

	bool name_raw = f->name && f->name[0] && json_verbatim(f->name);
	char quoted_client[NX_QLOG_CLIENT_TEXT_MAX + 3];
	bool client_skip =
	    f->client && strlen(f->client) < NX_QLOG_CLIENT_TEXT_MAX && json_verbatim(f->client);
	if (client_skip) {
		snprintf(quoted_client, sizeof(quoted_client), "\"%s\"", f->client);
	}

	size_t cap = (size_t)limit + 1; /* one more tells whether a next page exists */
	struct hit *heap = calloc(cap, sizeof(*heap));
	struct scratch sc = {0};
	size_t nh = 0;
	int err = heap ? 0 : -ENOMEM;
	int64_t seg_hi = hi;
	bool page_done = false;
	rc = SQLITE_DONE;
	while (!err && !page_done && seg_hi > INT64_MIN) {
		/* the names of the next NAME_CHUNK_MINUTES, newest first: a page that fills early
		 * reads only the names of the minutes it needed */
		if (by_names && next_skip == n_skip && cov_lo > names_lo) {
			int64_t lo = NX_MAX(names_lo, cov_lo - NAME_CHUNK_MINUTES);
			free(skip);
			skip = NULL;
			n_skip = next_skip = 0;
			err = name_skips(r, f->name, lo, cov_lo - 1, &skip, &n_skip);
			if (err) {
				break;
			}
			cov_lo = lo;
		}
		/* the next segment: [seg_lo, seg_hi) of ts_max, below the next skipped minute, or
		 * down to the minutes whose names are not read yet */
		int64_t seg_lo = by_names && cov_lo > names_lo ? cov_lo * 60000 : INT64_MIN;
		bool below_skip = false;
		while (next_skip < n_skip && !below_skip) {
			int64_t m = skip[next_skip];
			int64_t top = m < INT64_MAX / 60000 ? (m + 1) * 60000 : INT64_MAX;
			if (top < seg_hi) {
				seg_lo = top;
				below_skip = true;
			} else {
				seg_hi = NX_MIN(seg_hi, m * 60000);
				next_skip++;
			}
		}
		if (seg_lo >= seg_hi) {
			seg_hi = seg_lo;
			continue;
		}
		sqlite3_reset(s);
		bind_i64(s, ":hi", seg_hi);
		bind_i64(s, ":lo", seg_lo);
		seg_hi = seg_lo;
		while (!err && (rc = sqlite3_step(s)) == SQLITE_ROW) {
			if (nh == cap && sqlite3_column_int64(s, 2) < heap[0].ts) {
				/* this block and every later one are older than the page */
				rc = SQLITE_DONE;
				page_done = true;
				break;
			}
			if (!block_may_match(s, f, name_raw, client_skip ? quoted_client : NULL)) {
				continue;
			}
			int64_t block = sqlite3_column_int64(s, 0);
			const char *text = sqlite3_column_blob(s, 6);
			size_t len = (size_t)sqlite3_column_bytes(s, 6);
			size_t got = 0;
			/* records the text can hold (each is over 32 bytes), not the n column: a
			 * block written by hand may miscount */
			size_t nrec = NX_MIN(len / 32 + 1, (size_t)NX_QLOG_BLOCK_RECS_MAX);
			err = scratch_fit(&sc, nrec, len);
			if (err) {
				break;
			}
			if (!text || nx_qlog_blk_decode(text, len, sc.text, sc.items, nrec, &got)) {
				bad_block(block);
				continue;
			}
			for (size_t i = 0; i < got && !err; i++) {
				const struct nx_qlog_item *it = &sc.items[i];
				int64_t id = block << NX_QLOG_ID_SHIFT | (int64_t)i;
				if ((it->ts > cts || (it->ts == cts && id >= cid)) ||
				    !item_matches(it, f)) {
					continue;
				}
				err = offer(heap, &nh, cap, it, id);
			}
		}
		if (!err && rc != SQLITE_DONE) {
			err = rc_to_err(rc);
		}
	}
	sqlite3_finalize(s);
	free(skip);
	free(sc.items);
	free(sc.text);

	json_t *items = err ? NULL : json_array();
	if (!err && !items) {
		err = -ENOMEM;
	}
	if (nh) {
		qsort(heap, nh, sizeof(*heap), hit_cmp_desc);
	}
	bool more = nh == cap;
	size_t shown = more ? nh - 1 : nh;
	for (size_t i = 0; i < nh; i++) {
		if (!err && i < shown && json_array_append(items, heap[i].o)) {
			err = -ENOMEM;
		}
		json_decref(heap[i].o);
	}
	if (err) {
		json_decref(items);
		free(heap);
		return err;
	}
	json_t *next = json_null();
	if (more) {
		char cur[48];
		snprintf(cur, sizeof(cur), "%" PRId64 ".%" PRId64, heap[shown - 1].ts,
			 heap[shown - 1].id);
		next = json_string(cur);
	}
	free(heap);
	*out = json_pack("{s:o, s:o}", "items", items, "next_cursor", next);
	return *out ? 0 : -ENOMEM;
}

/* ---- statistics from the aggregates ---- */

/* SQL sums of agg_minute's protocol columns (db.c migration 5), in NX_QLOG_PROTOS order. */
#define PROTO_SUM(id, text) ", COALESCE(SUM(" text "), 0)"
#define PROTOS_SQL NX_QLOG_PROTOS(PROTO_SUM)
static_assert(NX_ARRAY_LEN(proto_names) == NX_QLOG_PROTO__COUNT, "a name per protocol");

/* {"udp": n, "tcp": n, ...} from counts in NX_QLOG_PROTOS order, or NULL (no memory). */
static json_t *protocols_json(const int64_t *n)
{
	json_t *o = json_object();
	for (unsigned i = 0; o && i < NX_QLOG_PROTO__COUNT; i++) {
		if (json_object_set_new(o, proto_names[i], json_integer((json_int_t)n[i]))) {
			json_decref(o);
			o = NULL;
		}
	}
	return o;
}

int nx_qlog_summary(struct nx_qlog_reader *r, int64_t from_ms, int64_t to_ms, json_t **out)
{
	if (from_ms < 0 || to_ms < 0 || (to_ms && to_ms <= from_ms)) {
		return -EINVAL;
	}
	int64_t fm, tm;
	minute_range(from_ms, to_ms, &fm, &tm);
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(
		r->db,
		"SELECT COALESCE(SUM(queries), 0), COALESCE(SUM(blocked), 0),"
		" COALESCE(SUM(cached), 0), COALESCE(SUM(forwarded), 0), COALESCE(SUM(local), 0),"
		" (SELECT COUNT(DISTINCT key) FROM agg_top WHERE kind = 2 AND minute >= :fm"
		"  AND minute < :tm)" PROTOS_SQL
		" FROM agg_minute WHERE minute >= :fm AND minute < :tm",
		-1, &s, NULL);
	if (rc != SQLITE_OK) {
		return rc_to_err(rc);
	}
	bind_i64(s, ":fm", fm);
	bind_i64(s, ":tm", tm);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		sqlite3_finalize(s);
		return rc_to_err(rc);
	}
	int64_t v[6 + NX_QLOG_PROTO__COUNT];
	for (int i = 0; i < (int)NX_ARRAY_LEN(v); i++) {
		v[i] = sqlite3_column_int64(s, i);
	}
	sqlite3_finalize(s);
	double pct = v[0] ? (double)(v[1] * 10000 / v[0]) / 100.0 : 0.0;
	json_t *protos = protocols_json(v + 6);
	if (!protos) {
		return -ENOMEM;
	}
	*out = json_pack("{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:o}", "from",
			 (json_int_t)from_ms, "to", (json_int_t)to_ms, "queries", (json_int_t)v[0],
			 "blocked", (json_int_t)v[1], "blocked_percent", pct, "cached",
			 (json_int_t)v[2], "forwarded", (json_int_t)v[3], "local", (json_int_t)v[4],
			 "clients", (json_int_t)v[5], "protocols", protos);
	return *out ? 0 : -ENOMEM;
}

int nx_qlog_history(struct nx_qlog_reader *r, int64_t from_ms, int64_t to_ms, unsigned step_s,
		    json_t **out, const char **bad_field)
{
	if (step_s < 60 || step_s % 60) {
		return fail_field(bad_field, "step");
	}
	if (from_ms <= 0) {
		return fail_field(bad_field, "from");
	}
	if (to_ms <= from_ms) {
		return fail_field(bad_field, "to");
	}
	int64_t step_ms = (int64_t)step_s * 1000;
	int64_t b0 = from_ms / step_ms * step_ms;
	int64_t npts = (to_ms - b0 + step_ms - 1) / step_ms;
	if (npts > NX_QLOG_HISTORY_POINTS_MAX) {
		return fail_field(bad_field, "step");
	}
	/* counters per bucket: queries, blocked, cached, forwarded, local, then the protocols */
	enum { NCOUNT = 5 + NX_QLOG_PROTO__COUNT };
	int64_t(*acc)[NCOUNT] = calloc((size_t)npts, sizeof(*acc));
	if (!acc) {
		return -ENOMEM;
	}
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(
		r->db,
		"SELECT (minute * 60000 - :b0) / :step AS b, SUM(queries), SUM(blocked),"
		" SUM(cached), SUM(forwarded), SUM(local)" PROTOS_SQL
		" FROM agg_minute WHERE minute >= :fm AND minute < :tm GROUP BY b",
		-1, &s, NULL);
	if (rc != SQLITE_OK) {
		free(acc);
		return rc_to_err(rc);
	}
	bind_i64(s, ":b0", b0);
	bind_i64(s, ":step", step_ms);
	bind_i64(s, ":fm", b0 / 60000);
	bind_i64(s, ":tm", (to_ms + 59999) / 60000);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t b = sqlite3_column_int64(s, 0);
		if (b < 0 || b >= npts) {
			continue;
		}
		for (int i = 0; i < NCOUNT; i++) {
			acc[b][i] = sqlite3_column_int64(s, i + 1);
		}
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		free(acc);
		return rc_to_err(rc);
	}
	json_t *pts = json_array();
	int err = pts ? 0 : -ENOMEM;
	for (int64_t b = 0; !err && b < npts; b++) {
		json_t *protos = protocols_json(acc[b] + 5);
		json_t *p = protos
				? json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "t",
					    (json_int_t)(b0 + b * step_ms), "queries",
					    (json_int_t)acc[b][0], "blocked", (json_int_t)acc[b][1],
					    "cached", (json_int_t)acc[b][2], "forwarded",
					    (json_int_t)acc[b][3], "local", (json_int_t)acc[b][4],
					    "protocols", protos)
				: NULL;
		if (!p || json_array_append_new(pts, p)) {
			json_decref(p);
			err = -ENOMEM;
		}
	}
	free(acc);
	if (err) {
		json_decref(pts);
		return err;
	}
	*out = json_pack("{s:I, s:I, s:I, s:o}", "from", (json_int_t)from_ms, "to",
			 (json_int_t)to_ms, "step", (json_int_t)step_s, "points", pts);
	return *out ? 0 : -ENOMEM;
}

/* ---- top-N from agg_roll ---- */

struct top_ent {
	int64_t c;
	char *key; /* owned (malloc) */
};

/* Ranks below: fewer counts, or as many and a later key ("ORDER BY c DESC, key"). */
static bool top_worse(const struct top_ent *a, const struct top_ent *b)
{
	return a->c < b->c || (a->c == b->c && strcmp(a->key, b->key) > 0);
}

static void top_down(struct top_ent *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && top_worse(&h[l], &h[m])) {
			m = l;
		}
		if (l + 1 < n && top_worse(&h[l + 1], &h[m])) {
			m = l + 1;
		}
		if (m == i) {
			return;
		}
		struct top_ent t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Offer (c, key) to a min-heap of the best cap so far (worst on top). 0 or -ENOMEM. */
static int top_offer(struct top_ent *h, size_t *n, size_t cap, int64_t c, const char *key)
{
	struct top_ent e = {.c = c, .key = (char *)key};
	if (*n == cap && !top_worse(&h[0], &e)) {
		return 0;
	}
	e.key = strdup(key);
	if (!e.key) {
		return -ENOMEM;
	}
	if (*n == cap) {
		free(h[0].key);
		h[0] = e;
		top_down(h, *n, 0);
		return 0;
	}
	size_t i = (*n)++;
	h[i] = e;
	while (i && top_worse(&h[i], &h[(i - 1) / 2])) {
		struct top_ent t = h[i];
		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static int top_cmp_desc(const void *a, const void *b)
{
	const struct top_ent *x = a, *y = b;
	return top_worse(y, x) ? -1 : top_worse(x, y) ? 1 : 0;
}

/* The window's difference from the roll, per key (sorted by key): + the window's minutes
 * before the roll's first, - the roll's minutes outside the window. */
struct top_delta {
	char **keys; /* owned, each malloc'd */
	int64_t *d;
	bool *seen;
	size_t n, cap;
};

static void delta_free(struct top_delta *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->keys[i]);
	}
	free(t->keys);
	free(t->d);
	free(t->seen);
}

static int delta_push(struct top_delta *t, const char *key, int64_t d)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		char **k = realloc(t->keys, cap * sizeof(*k));
		if (k) {
			t->keys = k;
		}
		int64_t *v = k ? realloc(t->d, cap * sizeof(*v)) : NULL;
		if (v) {
			t->d = v;
		}
		bool *s = v ? realloc(t->seen, cap * sizeof(*s)) : NULL;
		if (!s) {
			return -ENOMEM;
		}
		t->seen = s;
		t->cap = cap;
	}
	t->keys[t->n] = strdup(key);
	if (!t->keys[t->n]) {
		return -ENOMEM;
	}
	t->d[t->n] = d;
	t->seen[t->n] = false;
	t->n++;
	return 0;
}

/* Index of key in t (sorted with SQLite's BINARY order, which strcmp follows for text
 * without NUL), or -1. */
static ssize_t delta_find(const struct top_delta *t, const char *key)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t->keys[mid], key);
		if (!c) {
			return (ssize_t)mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return -1;
}

static int64_t one_int(sqlite3 *db, const char *sql, bool *ok)
{
	sqlite3_stmt *s = NULL;
	int64_t v = 0;
	*ok = false;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
	    sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
		v = sqlite3_column_int64(s, 0);
		*ok = true;
	}
	sqlite3_finalize(s);
	return v;
}

/*
 * The top `limit` keys of kind over the minutes [fm, tm) from agg_roll (db.c migration 6),
 * exact: total(key) = roll(key) + delta(key), the delta summed from agg_top over the few edge
 * minutes where the window and the roll differ. Roll rows are read by count, highest first,
 * until the worst kept total beats any later row's count plus the largest positive delta (no
 * row after it can rank); keys only in the delta are offered when every roll row was read.
 * 1: the roll cannot answer this window (not built, an older schema, or more than
 * NX_QLOG_ROLL_EDGE_MINUTES edge minutes): the caller sums agg_top. 0 with *items; -errno.
 */
static int top_from_roll(struct nx_qlog_reader *r, int kind, int64_t fm, int64_t tm,
			 unsigned limit, json_t **items)
{
	bool ok;
	int64_t lo = one_int(r->db, "SELECT lo FROM agg_roll_lo WHERE id = 0", &ok);
	if (!ok || fm == INT64_MIN || tm <= lo) {
		return 1;
	}
	int64_t a0 = NX_MIN(fm, lo), a1 = NX_MAX(fm, lo), edge = a1 - a0;
	if (tm != INT64_MAX) {
		int64_t newest = one_int(r->db, "SELECT MAX(minute) FROM agg_minute", &ok);
		edge += ok && newest >= tm ? newest - tm + 1 : 0;
	}
	if (edge > NX_QLOG_ROLL_EDGE_MINUTES) {
		return 1;
	}
	struct top_delta dl = {0};
	int64_t max_pos = 0;
	sqlite3_stmt *s = NULL;
	/* two ranges of the primary key, not an OR (which SQLite answers with a scan of the
	 * kind): [a0, a1) is the window's before the roll (+) or the roll's before the window
	 * (-); minutes >= tm are the roll's after the window (-) */
	int rc = sqlite3_prepare_v2(
		r->db,
		"SELECT key, SUM(v) FROM (SELECT key, n * ?3 AS v FROM agg_top WHERE kind = ?1 AND"
		" minute >= ?5 AND minute < ?6 UNION ALL SELECT key, -n FROM agg_top"
		" WHERE kind = ?1 AND minute >= ?4) GROUP BY key ORDER BY key",
		-1, &s, NULL);
	if (rc != SQLITE_OK) {
		return 1;
	}
	sqlite3_bind_int(s, 1, kind);
	sqlite3_bind_int(s, 3, fm < lo ? 1 : -1);
	sqlite3_bind_int64(s, 4, tm);
	sqlite3_bind_int64(s, 5, a0);
	sqlite3_bind_int64(s, 6, a1);
	int err = 0;
	while (!err && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t d = sqlite3_column_int64(s, 1);
		max_pos = NX_MAX(max_pos, d);
		err = delta_push(&dl, col_text(s, 0), d);
	}
	if (!err && rc != SQLITE_DONE) {
		err = rc_to_err(rc);
	}
	sqlite3_finalize(s);
	s = NULL;

	struct top_ent *h = calloc(limit, sizeof(*h));
	size_t nh = 0;
	bool all_read = true;
	err = err ? err : h ? 0 : -ENOMEM;
	static const char roll_sql[] = "SELECT key, n FROM agg_roll WHERE kind = ?1 ORDER BY n DESC";
	if (!err && sqlite3_prepare_v2(r->db, roll_sql, -1, &s, NULL) != SQLITE_OK) {
		err = -EIO;
	}
	if (!err) {
		sqlite3_bind_int(s, 1, kind);
	}
	while (!err && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t n = sqlite3_column_int64(s, 1);
		if (nh == limit && h[0].c > n + max_pos) {
			all_read = false;
			break;
		}
		const char *key = col_text(s, 0);
		ssize_t i = delta_find(&dl, key);
		if (i >= 0) {
			dl.seen[i] = true;
			n += dl.d[i];
		}
		if (n > 0) {
			err = top_offer(h, &nh, limit, n, key);
		}
	}
	if (!err && all_read && rc != SQLITE_DONE) {
		err = rc_to_err(rc);
	}
	sqlite3_finalize(s);
	for (size_t i = 0; !err && all_read && i < dl.n; i++) {
		if (!dl.seen[i] && dl.d[i] > 0) {
			err = top_offer(h, &nh, limit, dl.d[i], dl.keys[i]);
		}
	}
	delta_free(&dl);
	json_t *a = err ? NULL : json_array();
	err = err ? err : a ? 0 : -ENOMEM;
	if (nh) {
		qsort(h, nh, sizeof(*h), top_cmp_desc);
	}
	for (size_t i = 0; i < nh; i++) {
		json_t *o = err ? NULL : json_pack("{s:s, s:I}", "key", h[i].key, "count",
						   (json_int_t)h[i].c);
		if (!err && (!o || json_array_append_new(a, o))) {
			json_decref(o);
			err = -ENOMEM;
		}
		free(h[i].key);
	}
	free(h);
	if (err) {
		json_decref(a);
		return err;
	}
	*items = a;
	return 0;
}

int nx_qlog_top(struct nx_qlog_reader *r, enum nx_qlog_top_kind kind, int64_t from_ms,
		int64_t to_ms, unsigned limit, json_t **out, const char **bad_field)
{
	static const int agg_kind[] = {
		[NX_QLOG_TOP_DOMAINS] = AGG_NAME,
		[NX_QLOG_TOP_BLOCKED] = AGG_BLOCKED,
		[NX_QLOG_TOP_CLIENTS] = AGG_CLIENT,
	};
	if ((unsigned)kind >= NX_ARRAY_LEN(agg_kind)) {
		return fail_field(bad_field, "kind");
	}
	limit = limit ? limit : NX_QLOG_TOP_LIMIT_DEFAULT;
	if (limit > NX_QLOG_TOP_LIMIT_MAX) {
		return fail_field(bad_field, "limit");
	}
	if (from_ms < 0) {
		return fail_field(bad_field, "from");
	}
	if (to_ms < 0 || (to_ms && to_ms <= from_ms)) {
		return fail_field(bad_field, "to");
	}
	int64_t fm, tm;
	minute_range(from_ms, to_ms, &fm, &tm);
	json_t *fast = NULL;
	int frc = r->no_roll ? 1 : top_from_roll(r, agg_kind[kind], fm, tm, limit, &fast);
	if (frc <= 0) {
		*out = frc ? NULL : json_pack("{s:s, s:o}", "kind", top_names[kind], "items", fast);
		return frc ? frc : *out ? 0 : -ENOMEM;
	}
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(r->db,
				    "SELECT key, SUM(n) AS c FROM agg_top WHERE kind = :k AND"
				    " minute >= :fm AND minute < :tm GROUP BY key"
				    " ORDER BY c DESC, key LIMIT :lim",
				    -1, &s, NULL);
	if (rc != SQLITE_OK) {
		return rc_to_err(rc);
	}
	bind_i64(s, ":k", agg_kind[kind]);
	bind_i64(s, ":fm", fm);
	bind_i64(s, ":tm", tm);
	bind_i64(s, ":lim", limit);
	json_t *items = json_array();
	int err = items ? 0 : -ENOMEM;
	while (!err && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		json_t *o = json_pack("{s:s, s:I}", "key", col_text(s, 0), "count",
				      (json_int_t)sqlite3_column_int64(s, 1));
		if (!o || json_array_append_new(items, o)) {
			json_decref(o);
			err = -ENOMEM;
		}
	}
	if (!err && rc != SQLITE_DONE) {
		err = rc_to_err(rc);
	}
	sqlite3_finalize(s);
	if (err) {
		json_decref(items);
		return err;
	}
	*out = json_pack("{s:s, s:o}", "kind", top_names[kind], "items", items);
	return *out ? 0 : -ENOMEM;
}

/*
 * Per-minute aggregates: counters per minute (queries by outcome and by protocol) and counts per
 * (kind, minute, key), kept in memory for the current minute and upserted inside each transaction
 * for the keys its records touched only, so statistics never scan the log and a busy minute costs
 * one row per key, not one upsert per record.
 *
 * The table holds the keys of the newest minute (and of a few earlier minutes whose records
 * arrive late from a slower ring). A minute admits NX_QLOG_AGG_KEYS_MAX keys per kind; later
 * new keys of that minute are counted under "(other)". Every count in the table belongs to the
 * open transaction: nx_qlog_agg_write() upserts and zeroes them, nx_qlog_agg_end() zeroes what
 * a failed transaction left (its batch is retried and counted again). When a newer minute
 * starts, the counts so far are upserted and the whole table is cleared: a minute's keys are
 * bounded in memory, and in the database up to the few late records of an earlier minute.
 */
#include "querylog/querylog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "querylog/impl.h"

#define SLOT_MASK (NX_QLOG_AGG_SLOTS - 1)
static_assert((NX_QLOG_AGG_SLOTS & SLOT_MASK) == 0, "slots: a power of two");
static_assert(NX_QLOG_AGG_POOL_BYTES < (1u << 28), "pool offsets fit ref");

int nx_qlog_agg_init(struct nx_qlog_agg *a)
{
	memset(a, 0, sizeof(*a));
	a->keys = nx_mem_calloc(NX_OWNER_querylog_queue, NX_QLOG_AGG_SLOTS, sizeof(*a->keys));
	a->pool = nx_mem_alloc(NX_OWNER_querylog_queue, NX_QLOG_AGG_POOL_BYTES);
	a->names = nx_mem_alloc(NX_OWNER_querylog_queue, NX_QLOG_AGG_NAMES_BYTES);
	if (!a->keys || !a->pool || !a->names) {
		nx_qlog_agg_deinit(a);
		return -ENOMEM;
	}
	a->pool_used = 1;
	return 0;
}

void nx_qlog_agg_deinit(struct nx_qlog_agg *a)
{
	nx_mem_free(NX_OWNER_querylog_queue, a->keys,
		    a->keys ? NX_QLOG_AGG_SLOTS * sizeof(*a->keys) : 0);
	nx_mem_free(NX_OWNER_querylog_queue, a->pool, a->pool ? NX_QLOG_AGG_POOL_BYTES : 0);
	nx_mem_free(NX_OWNER_querylog_queue, a->names, a->names ? NX_QLOG_AGG_NAMES_BYTES : 0);
	a->keys = NULL;
	a->pool = NULL;
	a->names = NULL;
}

void nx_qlog_agg_clear(struct nx_qlog_agg *a)
{
	memset(a->keys, 0, NX_QLOG_AGG_SLOTS * sizeof(*a->keys));
	memset(a->min, 0, sizeof(a->min));
	a->n_min = 0;
	a->pool_used = 1;
	a->live = 0;
	a->dirty = 0;
	a->n_names = a->names_mark = a->names_next = 0;
}

static int64_t minute_of(int64_t ts_ms)
{
	int64_t m = ts_ms / 60000;
	return (ts_ms % 60000 < 0) ? m - 1 : m;
}

/* FNV-1a over the key bytes (a name is hashed once for its two kinds). */
static uint32_t bytes_hash(const void *k, unsigned len)
{
	const uint8_t *b = k;
	uint32_t h = 2166136261u;
	for (unsigned i = 0; i < len; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

/* The slot hash: the bytes' hash with the minute index and kind, mixed for the mask. */
static uint32_t key_hash(uint32_t bh, unsigned tag)
{
	uint32_t h = bh ^ (tag * 0x9e3779b9u);
	h ^= h >> 16;
	h *= 0x7feb352du;
	h ^= h >> 15;
	h *= 0x846ca68bu;
	h ^= h >> 16;
	return h;
}

/*
 * Count one key of minute index mi (bh: bytes_hash of key). share: pool offset of the same bytes
 * already stored (a blocked name shares its name key), 0 = none. Returns the key's pool offset, or
 * 0 when it was folded into "(other)".
 */
static uint32_t count_key(struct nx_qlog_agg *a, unsigned mi, unsigned kind, const void *key,
			  unsigned len, uint32_t bh, uint32_t share)
{
	struct nx_qlog_agg_minute *m = &a->min[mi];
	unsigned tag = mi << 2 | kind;
	uint32_t h = key_hash(bh, tag);
	struct nx_qlog_agg_key *e;
	for (uint32_t j = h & SLOT_MASK;; j = (j + 1) & SLOT_MASK) {
		e = &a->keys[j];
		if (!e->ref) {
			break;
		}
		uint32_t off = e->ref >> 4;
		if (e->hash == h && (e->ref & 15) == tag && a->pool[off] == len &&
		    memcmp(a->pool + off + 1, key, len) == 0) {
			if (!e->n++) {
				a->dirty++;
			}
			return off;
		}
	}
	/* a new key: admitted while the minute and the table have room */
	uint32_t off = share;
	if (m->keys[kind] >= NX_QLOG_AGG_KEYS_MAX || a->live >= NX_QLOG_AGG_LIVE_MAX) {
		goto fold;
	}
	if (!off) {
		if (a->pool_used + 1 + len > NX_QLOG_AGG_POOL_BYTES) {
			goto fold;
		}
		off = a->pool_used;
		a->pool[off] = (uint8_t)len;
		memcpy(a->pool + off + 1, key, len);
		a->pool_used += 1 + len;
	}
	*e = (struct nx_qlog_agg_key){.hash = h, .n = 1, .ref = off << 4 | tag};
	if (kind == AGG_NAME) {
		a->names[a->n_names++] = off << 2 | mi; /* n_names < live <= LIVE_MAX */
	}
	a->live++;
	a->dirty++;
	m->keys[kind]++;
	return off;
fold:
	m->names_folded |= kind == AGG_NAME;
	m->other[kind]++;
	a->folded++;
	return 0;
}

static int upsert_minute(sqlite3_stmt *s, const struct nx_qlog_agg_minute *m)
{
	sqlite3_bind_int64(s, 1, m->minute);
	sqlite3_bind_int64(s, 2, m->queries);
	sqlite3_bind_int64(s, 3, m->blocked);
	sqlite3_bind_int64(s, 4, m->cached);
	sqlite3_bind_int64(s, 5, m->forwarded);
	sqlite3_bind_int64(s, 6, m->local);
	for (unsigned i = 0; i < NX_QLOG_PROTO__COUNT; i++) {
		sqlite3_bind_int64(s, 7 + (int)i, m->proto[i]);
	}
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int upsert_key(sqlite3_stmt *s, unsigned kind, int64_t minute, const char *key, int len,
		      uint32_t n)
{
	sqlite3_bind_int(s, 1, (int)kind);
	sqlite3_bind_int64(s, 2, minute);
	sqlite3_bind_text(s, 3, key, len, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, n);
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* agg_top += n for (kind, minute, key), and agg_roll too when the roll covers the minute. */
static int count_top(struct nx_qlog *q, int64_t roll_lo, unsigned kind, int64_t minute,
		     const char *key, int len, uint32_t n)
{
	int rc = upsert_key(q->st.top_upsert, kind, minute, key, len, n);
	if (rc != SQLITE_OK || minute < roll_lo) {
		return rc;
	}
	sqlite3_stmt *s = q->st.roll_upsert;
	sqlite3_bind_int(s, 1, (int)kind);
	sqlite3_bind_text(s, 2, key, len, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, n);
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int64_t now_minute(const struct nx_qlog *q)
{
	return minute_of(q->now_ms ? q->now_ms(q->now_ud) : nx_now_wall_ms());
}

static int step_reset(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

int nx_qlog_roll_advance(struct nx_qlog *q, int64_t min_lo, int64_t *lo)
{
	sqlite3_stmt *s = q->st.roll_lo_get;
	int rc = sqlite3_step(s);
	*lo = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : INT64_MAX;
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		return rc;
	}
	if (*lo != INT64_MAX && *lo >= min_lo) {
		return SQLITE_OK;
	}
	if (*lo == INT64_MAX || min_lo - *lo > NX_QLOG_ROLL_REBUILD_MINUTES) {
		rc = step_reset(q->st.roll_clear);
		if (rc == SQLITE_OK) {
			sqlite3_bind_int64(q->st.roll_build, 1, min_lo);
			rc = step_reset(q->st.roll_build);
		}
	} else {
		sqlite3_bind_int64(q->st.roll_sub, 1, *lo);
		sqlite3_bind_int64(q->st.roll_sub, 2, min_lo);
		rc = step_reset(q->st.roll_sub);
		if (rc == SQLITE_OK) {
			rc = step_reset(q->st.roll_zero);
		}
	}
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(q->st.roll_lo_set, 1, min_lo);
		rc = step_reset(q->st.roll_lo_set);
	}
	if (rc == SQLITE_OK) {
		*lo = min_lo;
	}
	return rc;
}

int nx_qlog_agg_write(struct nx_qlog *q)
{
	struct nx_qlog_agg *a = &q->agg;
	int64_t lo;
	/* the roll covers the last NX_QLOG_ROLL_MINUTES minutes (and what comes after) */
	int rc = nx_qlog_roll_advance(q, now_minute(q) - NX_QLOG_ROLL_MINUTES + 1, &lo);
	uint32_t dirty = a->dirty;
	for (unsigned i = 0; i < a->n_min && rc == SQLITE_OK; i++) {
		struct nx_qlog_agg_minute *m = &a->min[i];
		if (m->queries) {
			rc = upsert_minute(q->st.minute_upsert, m);
		}
		for (unsigned k = 0; k < AGG__KINDS && rc == SQLITE_OK; k++) {
			if (m->other[k]) {
				rc = count_top(q, lo, k, m->minute, NX_QLOG_AGG_OTHER, -1,
					       m->other[k]);
			}
		}
	}
	for (uint32_t j = 0; j < NX_QLOG_AGG_SLOTS && dirty && rc == SQLITE_OK; j++) {
		struct nx_qlog_agg_key *e = &a->keys[j];
		if (!e->n) {
			continue;
		}
		unsigned kind = e->ref & 3, mi = (e->ref >> 2) & 3;
		const uint8_t *k = a->pool + (e->ref >> 4);
		char client[64];
		if (kind == AGG_CLIENT) {
			/* key bytes: family, then 4 or 16 address bytes */
			int len = nx_qlog_addr_text(k[1], k + 2, client, sizeof(client));
			rc = count_top(q, lo, kind, a->min[mi].minute, client, len, e->n);
		} else {
			rc = count_top(q, lo, kind, a->min[mi].minute, (const char *)k + 1, k[0],
				       e->n);
		}
		dirty--;
	}
	return rc;
}

void nx_qlog_agg_zero(struct nx_qlog_agg *a)
{
	for (uint32_t j = 0; j < NX_QLOG_AGG_SLOTS && a->dirty; j++) {
		if (a->keys[j].n) {
			a->keys[j].n = 0;
			a->dirty--;
		}
	}
	for (unsigned i = 0; i < a->n_min; i++) {
		struct nx_qlog_agg_minute *m = &a->min[i];
		m->queries = m->blocked = m->cached = m->forwarded = m->local = 0;
		memset(m->proto, 0, sizeof(m->proto));
		memset(m->other, 0, sizeof(m->other));
	}
	a->dirty = 0;
	a->folded = 0;
	a->pending = false;
}

bool nx_qlog_agg_would_clear(const struct nx_qlog_agg *a, int64_t ts_ms)
{
	int64_t minute = minute_of(ts_ms);
	if (!a->n_min) {
		return false;
	}
	for (unsigned i = 0; i < a->n_min; i++) {
		if (a->min[i].minute == minute) {
			return false;
		}
	}
	return minute > a->newest || a->n_min == NX_QLOG_AGG_MINUTES;
}

static int names_put(struct nx_qlog *q, int64_t minute, bool folded, bool open, sqlite3_str *names)
{
	sqlite3_stmt *s = q->st.names_put;
	sqlite3_bind_int64(s, 1, minute);
	sqlite3_bind_int(s, 2, folded);
	sqlite3_bind_int(s, 3, open);
	int len = names ? sqlite3_str_length(names) : 0;
	if (names && sqlite3_str_errcode(names) != SQLITE_OK) {
		return SQLITE_NOMEM;
	}
	sqlite3_bind_text(s, 4, len ? sqlite3_str_value(names) : "", len, SQLITE_STATIC);
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int nx_qlog_agg_names_write(struct nx_qlog *q, bool close)
{
	struct nx_qlog_agg *a = &q->agg;
	int rc = SQLITE_OK;
	if (a->names_next == a->n_names && !close) {
		return SQLITE_OK; /* nothing new; the rows say open since the minutes began */
	}
	for (unsigned i = 0; i < a->n_min && rc == SQLITE_OK; i++) {
		sqlite3_str *names = sqlite3_str_new(q->db);
		for (uint32_t j = a->names_next; j < a->n_names; j++) {
			uint32_t off = a->names[j] >> 2;
			if ((a->names[j] & 3) == i) {
				sqlite3_str_append(names, (const char *)a->pool + off + 1,
						   a->pool[off]);
				sqlite3_str_appendchar(names, 1, '\n');
			}
		}
		rc = names_put(q, a->min[i].minute, a->min[i].names_folded, !close, names);
		sqlite3_free(sqlite3_str_finish(names));
	}
	if (rc == SQLITE_OK) {
		a->names_next = a->n_names;
	}
	return rc;
}

/* Index of the minute's counters; a newer minute (or no free entry) writes and clears first. */
static int minute_index(struct nx_qlog *q, int64_t minute, unsigned *mi)
{
	struct nx_qlog_agg *a = &q->agg;
	if (a->n_min && minute <= a->newest) {
		for (unsigned i = 0; i < a->n_min; i++) {
			if (a->min[i].minute == minute) {
				*mi = i;
				return SQLITE_OK;
			}
		}
	}
	if (a->n_min && (minute > a->newest || a->n_min == NX_QLOG_AGG_MINUTES)) {
		int rc = nx_qlog_agg_write(q);
		if (rc == SQLITE_OK) {
			rc = nx_qlog_agg_names_write(q, true);
		}
		if (rc != SQLITE_OK) {
			return rc;
		}
		nx_qlog_agg_clear(a); /* folded stays: counted in agg_other at the commit */
	}
	/* the minute's names row says "open" until its keys leave the table: a crash before
	 * that leaves it untrusted, not missing the names of blocks already committed */
	int rc = names_put(q, minute, false, true, NULL);
	if (rc != SQLITE_OK) {
		return rc;
	}
	if (!a->n_min || minute > a->newest) {
		a->newest = minute;
	}
	*mi = a->n_min++;
	a->min[*mi] = (struct nx_qlog_agg_minute){.minute = minute};
	return SQLITE_OK;
}

int nx_qlog_agg_add(struct nx_qlog *q, const struct nx_qlog_view *v, unsigned privacy)
{
	struct nx_qlog_agg *a = &q->agg;
	const struct nx_qlog_pk *r = v->pk;
	unsigned mi;
	int rc = minute_index(q, minute_of(r->ts_ms), &mi);
	if (rc != SQLITE_OK) {
		return rc;
	}
	struct nx_qlog_agg_minute *m = &a->min[mi];
	a->pending = true;
	bool blocked = r->action == NX_QLOG_ACT_BLOCK;
	bool local = r->action == NX_QLOG_ACT_LOCAL;
	m->queries++;
	m->blocked += blocked;
	m->local += local;
	m->cached += r->cached != 0;
	/* forwarded: an upstream produced the answer (REFUSED, FORMERR or a deadline SERVFAIL that
	 * nxdns made itself is none of blocked, local, cached or forwarded) */
	m->forwarded += !blocked && !local && !r->cached && r->upstream >= 0;
	/* a protocol outside NX_QLOG_PROTOS (the API shows it "unknown") counts in queries only */
	if (r->proto < NX_QLOG_PROTO__COUNT) {
		m->proto[r->proto]++;
	}

	m->names_folded |= privacy >= 1;
	if (privacy < 1) {
		unsigned len = v->pk->name_len;
		uint32_t bh = bytes_hash(v->name, len);
		uint32_t off = count_key(a, mi, AGG_NAME, v->name, len, bh, 0);
		if (blocked) {
			count_key(a, mi, AGG_BLOCKED, v->name, len, bh, off);
		}
	}
	if (privacy < 2) {
		uint8_t k[17];
		unsigned len = 1;
		k[0] = r->family;
		if (r->family == AF_INET) {
			memcpy(k + 1, r->client, 4);
			len += 4;
		} else if (r->family == AF_INET6) {
			memcpy(k + 1, r->client, 16);
			len += 16;
		}
		count_key(a, mi, AGG_CLIENT, k, len, bytes_hash(k, len), 0);
	}
	return SQLITE_OK;
}

/* ---- deferred counting: the aggregates of stored blocks (NX_QLOG_AGG_DEFER_MS) ---- */

int nx_qlog_agg_mark_set(struct nx_qlog *q, int64_t id)
{
	sqlite3_stmt *s = q->st.mark_set;
	sqlite3_bind_int64(s, 1, id);
	int rc = step_reset(s);
	if (rc == SQLITE_OK) {
		q->agg.mark_next = id;
	}
	return rc;
}

/* Count one decoded record as the writer counts a packed one (privacy 0). */
static int count_item(struct nx_qlog *q, const struct nx_qlog_item *it)
{
	struct nx_qlog_pk pk = {
	    .ts_ms = it->ts,
	    .upstream = it->upstream ? 0 : -1,
	    .proto = (uint8_t)it->proto,
	    .action = (uint8_t)it->action,
	    .cached = it->cached,
	};
	size_t len = strlen(it->name);
	pk.name_len = (uint8_t)NX_MIN(len, (size_t)NX_QLOG_NAME_MAX - 1);
	if (inet_pton(AF_INET, it->client, pk.client) == 1) {
		pk.family = AF_INET;
	} else if (inet_pton(AF_INET6, it->client, pk.client) == 1) {
		pk.family = AF_INET6;
	}
	struct nx_qlog_view v = {.pk = &pk, .name = it->name};
	return nx_qlog_agg_add(q, &v, 0);
}

int nx_qlog_agg_catch_up(struct nx_qlog *q)
{
	struct nx_qlog_agg *a = &q->agg;
	int rc = nx_qlog_agg_names_write(q, true); /* the table's minutes (no counts held) */
	if (rc != SQLITE_OK) {
		return rc;
	}
	nx_qlog_agg_clear(a);
	int64_t last = a->mark;
	char *scratch = NULL;
	struct nx_qlog_item *items = NULL;
	size_t scratch_cap = 0, items_cap = 0;
	sqlite3_stmt *s = q->st.uncounted;
	sqlite3_bind_int64(s, 1, a->mark);
	while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(s, 0);
		const char *text = sqlite3_column_blob(s, 1);
		size_t len = (size_t)sqlite3_column_bytes(s, 1);
		size_t nrec = NX_MIN(len / 32 + 1, (size_t)NX_QLOG_BLOCK_RECS_MAX), got = 0;
		size_t need = nx_qlog_blk_scratch_bytes(len);
		rc = SQLITE_OK;
		if (need > scratch_cap || nrec > items_cap) {
			nx_mem_free(NX_OWNER_querylog_queue, scratch, scratch_cap);
			nx_mem_free(NX_OWNER_querylog_queue, items, items_cap * sizeof(*items));
			scratch_cap = NX_MAX(need, scratch_cap);
			items_cap = NX_MAX(nrec, items_cap);
			scratch = nx_mem_alloc(NX_OWNER_querylog_queue, scratch_cap);
			items = nx_mem_alloc(NX_OWNER_querylog_queue, items_cap * sizeof(*items));
			if (!scratch || !items) {
				rc = SQLITE_NOMEM;
				break;
			}
		}
		last = id;
		if (!text || nx_qlog_blk_decode(text, len, scratch, items, nrec, &got)) {
			nx_log(NX_LOG_WARN, "querylog",
			       "block %lld does not decode: not counted in the statistics",
			       (long long)id);
			continue;
		}
		for (size_t i = 0; i < got && rc == SQLITE_OK; i++) {
			rc = count_item(q, &items[i]);
		}
	}
	rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	sqlite3_reset(s);
	nx_mem_free(NX_OWNER_querylog_queue, scratch, scratch ? scratch_cap : 0);
	nx_mem_free(NX_OWNER_querylog_queue, items, items ? items_cap * sizeof(*items) : 0);
	if (rc == SQLITE_OK) {
		rc = nx_qlog_agg_write(q);
	}
	if (rc == SQLITE_OK) {
		rc = nx_qlog_agg_names_write(q, false);
	}
	if (rc == SQLITE_OK && last != a->mark) {
		rc = nx_qlog_agg_mark_set(q, last);
	}
	return rc;
}

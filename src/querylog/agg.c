/*
 * Per-minute aggregates of one batch: counters per minute and counts per (kind, minute, key),
 * combined in memory (a bounded open-addressing table whose keys point into the batch) and
 * upserted inside the batch's transaction, so statistics never scan the log.
 */
#include "querylog/querylog.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "base/ledger.h"
#include "querylog/impl.h"

int nx_qlog_agg_init(struct nx_qlog_agg *a, unsigned batch_max, size_t *bytes)
{
	/* up to 3 keys per record; keep the load factor <= 3/4 for a full batch of distinct keys */
	unsigned cap = 64;
	while (cap < batch_max * 4u) {
		cap <<= 1;
	}
	memset(a, 0, sizeof(*a));
	*bytes = (size_t)cap * sizeof(*a->keys);
	a->keys = nx_mem_calloc(NX_OWNER_querylog_queue, cap, sizeof(*a->keys));
	if (!a->keys) {
		*bytes = 0;
		return -ENOMEM;
	}
	a->cap = cap;
	return 0;
}

void nx_qlog_agg_deinit(struct nx_qlog_agg *a, size_t bytes)
{
	nx_mem_free(NX_OWNER_querylog_queue, a->keys, bytes);
	a->keys = NULL;
}

static int64_t minute_of(int64_t ts_ms)
{
	int64_t m = ts_ms / 60000;
	return (ts_ms % 60000 < 0) ? m - 1 : m;
}

static uint32_t fnv1a(uint32_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

static uint32_t key_hash(const struct nx_qlog_rec *r, uint8_t kind, int64_t minute)
{
	uint32_t h = fnv1a(2166136261u, &kind, 1);
	h = fnv1a(h, &minute, sizeof(minute));
	if (kind == AGG_CLIENT) {
		h = fnv1a(h, &r->family, 1);
		return fnv1a(h, r->client, sizeof(r->client));
	}
	return fnv1a(h, r->name, strlen(r->name));
}

static bool key_eq(const struct nx_qlog_rec *a, const struct nx_qlog_rec *b, uint8_t kind)
{
	if (kind == AGG_CLIENT) {
		return a->family == b->family && memcmp(a->client, b->client, sizeof(a->client)) == 0;
	}
	return strcmp(a->name, b->name) == 0;
}

static int flush_minutes(struct nx_qlog *q)
{
	struct nx_qlog_agg *a = &q->agg;
	sqlite3_stmt *s = q->st.minute_upsert;
	int rc = SQLITE_OK;
	for (unsigned i = 0; i < a->n_min && rc == SQLITE_OK; i++) {
		const struct nx_qlog_agg_minute *m = &a->min[i];
		sqlite3_bind_int64(s, 1, m->minute);
		sqlite3_bind_int64(s, 2, m->queries);
		sqlite3_bind_int64(s, 3, m->blocked);
		sqlite3_bind_int64(s, 4, m->cached);
		sqlite3_bind_int64(s, 5, m->forwarded);
		sqlite3_bind_int64(s, 6, m->local);
		rc = sqlite3_step(s);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		sqlite3_reset(s);
	}
	a->n_min = 0;
	return rc;
}

static int flush_keys(struct nx_qlog *q, const struct nx_qlog_rec *recs)
{
	struct nx_qlog_agg *a = &q->agg;
	sqlite3_stmt *s = q->st.top_upsert;
	int rc = SQLITE_OK;
	for (unsigned i = 0; i < a->cap && a->used; i++) {
		struct nx_qlog_agg_key *k = &a->keys[i];
		if (!k->n) {
			continue;
		}
		if (rc == SQLITE_OK) {
			char client[64];
			const char *key = recs[k->rec].name;
			if (k->kind == AGG_CLIENT) {
				nx_qlog_client_text(&recs[k->rec], client, sizeof(client));
				key = client;
			}
			sqlite3_bind_int(s, 1, k->kind);
			sqlite3_bind_int64(s, 2, k->minute);
			sqlite3_bind_text(s, 3, key, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int64(s, 4, k->n);
			rc = sqlite3_step(s);
			rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
			sqlite3_reset(s);
		}
		k->n = 0;
		a->used--;
	}
	a->used = 0;
	return rc;
}

static int add_key(struct nx_qlog *q, const struct nx_qlog_rec *recs, uint16_t i, uint8_t kind,
		   int64_t minute)
{
	struct nx_qlog_agg *a = &q->agg;
	if ((a->used + 1) * 4 > a->cap * 3) {
		int rc = flush_keys(q, recs);
		if (rc != SQLITE_OK) {
			return rc;
		}
	}
	uint32_t h = key_hash(&recs[i], kind, minute);
	for (unsigned j = h & (a->cap - 1);; j = (j + 1) & (a->cap - 1)) {
		struct nx_qlog_agg_key *k = &a->keys[j];
		if (!k->n) {
			*k = (struct nx_qlog_agg_key){
				.minute = minute, .hash = h, .n = 1, .rec = i, .kind = kind};
			a->used++;
			return SQLITE_OK;
		}
		if (k->hash == h && k->kind == kind && k->minute == minute &&
		    key_eq(&recs[k->rec], &recs[i], kind)) {
			k->n++;
			return SQLITE_OK;
		}
	}
}

int nx_qlog_agg_write(struct nx_qlog *q, const struct nx_qlog_rec *recs, size_t n,
		      unsigned privacy)
{
	struct nx_qlog_agg *a = &q->agg;
	int rc = SQLITE_OK;
	a->n_min = 0;
	for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
		const struct nx_qlog_rec *r = &recs[i];
		int64_t minute = minute_of(r->ts_ms);
		struct nx_qlog_agg_minute *m = NULL;
		for (unsigned j = 0; j < a->n_min; j++) {
			if (a->min[j].minute == minute) {
				m = &a->min[j];
				break;
			}
		}
		if (!m) {
			if (a->n_min == NX_QLOG_AGG_MINUTES) {
				rc = flush_minutes(q);
				if (rc != SQLITE_OK) {
					break;
				}
			}
			m = &a->min[a->n_min++];
			*m = (struct nx_qlog_agg_minute){.minute = minute};
		}
		bool blocked = r->action == NX_QLOG_ACT_BLOCK;
		bool local = r->action == NX_QLOG_ACT_LOCAL;
		m->queries++;
		m->blocked += blocked;
		m->local += local;
		m->cached += r->cached != 0;
		m->forwarded += !blocked && !local && !r->cached;

		if (privacy < 1) {
			rc = add_key(q, recs, (uint16_t)i, AGG_NAME, minute);
			if (rc == SQLITE_OK && blocked) {
				rc = add_key(q, recs, (uint16_t)i, AGG_BLOCKED, minute);
			}
		}
		if (rc == SQLITE_OK && privacy < 2) {
			rc = add_key(q, recs, (uint16_t)i, AGG_CLIENT, minute);
		}
	}
	/* both flushes always run: they also reset the tables for the next batch */
	int rc2 = flush_minutes(q);
	int rc3 = flush_keys(q, recs);
	if (rc == SQLITE_OK) {
		rc = rc2 != SQLITE_OK ? rc2 : rc3;
	}
	return rc;
}

/*
 * The sink's life cycle, the rings and the push, and the writer thread with its connection.
 */
#include "pgsink/pgsink.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/stats.h"
#include "pgsink/impl.h"
#include "querylog/querylog.h"

#define DRAIN_CHUNK 64 /* records copied out per ring-lock hold (47 KiB) */
#define ERR_MAX 512
#define RETRY_MAX 3 /* sends of one batch over fresh connections before it is dropped */

struct ring {
	pthread_mutex_t lock;
	struct nx_qlog_rec *recs; /* owned (NX_OWNER_pgsink_queue), cap records */
	unsigned cap;
	unsigned head; /* oldest */
	unsigned count;
};

struct nx_pgsink {
	struct nx_pq pq;
	struct ring *rings; /* owned array of n_rings */
	unsigned n_rings;   /* initialised */
	unsigned n_alloc;
	unsigned ring_cap;
	unsigned batch_size;
	unsigned flush_ms;
	unsigned retention_days;
	atomic_uint privacy;
	char *dsn;	/* owned */
	char *hostname; /* owned */
	int (*upstream_name)(void *ud, int idx, char *buf, size_t cap);
	void *ud;
	struct nx_qlog_rec *scratch; /* owned: DRAIN_CHUNK records */
	char *copy;		     /* owned: the batch as COPY text, copy_cap bytes */
	size_t copy_cap;
	size_t copy_len;     /* bytes of the pending batch (writer thread) */
	unsigned copy_recs;  /* its records */
	unsigned copy_tries; /* sends that failed with the connection */
	PGconn *conn;	     /* writer thread only; NULL when disconnected */
	pthread_t thread;
	bool running;
	atomic_bool stop;
	pthread_mutex_t wake_lock;
	pthread_cond_t wake_cond;
	atomic_bool napping; /* the writer waits on wake_cond */
	char upstream_cache[64];
	int upstream_cache_idx;
};

static char *dup_text(const char *s)
{
	return nx_mem_strdup(NX_OWNER_pgsink_queue, s ? s : "");
}

static void free_text(char *s)
{
	if (s) {
		nx_mem_free(NX_OWNER_pgsink_queue, s, strlen(s) + 1);
	}
}

void nx_pgsink_params_default(struct nx_pgsink_params *p)
{
	memset(p, 0, sizeof(*p));
	p->producers = 1;
	p->queue_size = 4096;
	p->batch_size = 1000;
	p->flush_ms = 1000;
	p->retention_days = 7;
}

static void release(struct nx_pgsink *s)
{
	for (unsigned i = 0; i < s->n_rings; i++) {
		nx_mem_free(NX_OWNER_pgsink_queue, s->rings[i].recs,
			    s->ring_cap * sizeof(struct nx_qlog_rec));
		pthread_mutex_destroy(&s->rings[i].lock);
	}
	nx_mem_free(NX_OWNER_pgsink_queue, s->rings, s->n_alloc * sizeof(*s->rings));
	nx_mem_free(NX_OWNER_pgsink_queue, s->scratch,
		    s->scratch ? DRAIN_CHUNK * sizeof(struct nx_qlog_rec) : 0);
	nx_mem_free(NX_OWNER_pgsink_queue, s->copy, s->copy ? s->copy_cap : 0);
	free_text(s->dsn);
	free_text(s->hostname);
	nx_mem_free(NX_OWNER_pgsink_queue, s, sizeof(*s));
}

int nx_pgsink_new(const struct nx_pgsink_params *p, struct nx_pgsink **out, char *why,
		  size_t why_cap)
{
	*out = NULL;
	snprintf(why, why_cap, "bad parameters");
	if (!p->dsn || !p->dsn[0] || p->producers == 0 || p->batch_size == 0 ||
	    p->queue_size < p->producers || p->privacy > 3) {
		return -EINVAL;
	}
	struct nx_pgsink *s = nx_mem_calloc(NX_OWNER_pgsink_queue, 1, sizeof(*s));
	if (!s) {
		snprintf(why, why_cap, "out of memory");
		return -ENOMEM;
	}
	int rc = nx_pq_load(&s->pq, p->soname ? p->soname : NX_PGSINK_SONAME, why, why_cap);
	if (rc < 0) {
		release(s);
		return rc;
	}
	snprintf(why, why_cap, "out of memory");
	rc = -ENOMEM;
	s->batch_size = p->batch_size;
	s->flush_ms = p->flush_ms ? p->flush_ms : 1;
	s->retention_days = p->retention_days;
	atomic_store(&s->privacy, p->privacy);
	s->upstream_name = p->upstream_name;
	s->ud = p->ud;
	s->upstream_cache_idx = -2;
	s->ring_cap = (p->queue_size + p->producers - 1) / p->producers;
	s->copy_cap = (size_t)p->batch_size * NX_PGSINK_ROW_AVG + NX_PGSINK_ROW_MAX;
	s->dsn = dup_text(p->dsn);
	s->hostname = dup_text(p->hostname);
	s->rings = nx_mem_calloc(NX_OWNER_pgsink_queue, p->producers, sizeof(*s->rings));
	s->n_alloc = s->rings ? p->producers : 0;
	s->scratch = nx_mem_alloc(NX_OWNER_pgsink_queue, DRAIN_CHUNK * sizeof(struct nx_qlog_rec));
	s->copy = nx_mem_alloc(NX_OWNER_pgsink_queue, s->copy_cap);
	if (!s->dsn || !s->hostname || !s->rings || !s->scratch || !s->copy) {
		goto fail;
	}
	for (; s->n_rings < p->producers; s->n_rings++) {
		struct ring *r = &s->rings[s->n_rings];
		r->recs = nx_mem_alloc(NX_OWNER_pgsink_queue, s->ring_cap * sizeof(*r->recs));
		if (!r->recs) {
			goto fail;
		}
		r->cap = s->ring_cap;
		pthread_mutex_init(&r->lock, NULL);
	}
	pthread_mutex_init(&s->wake_lock, NULL);
	pthread_cond_init(&s->wake_cond, NULL);
	*out = s;
	why[0] = 0;
	return 0;
fail:
	release(s);
	return rc;
}

void nx_pgsink_set_privacy(struct nx_pgsink *s, unsigned privacy)
{
	atomic_store(&s->privacy, privacy > 3 ? 3 : privacy);
}

/* ---- the push (producers) ---- */

void nx_pgsink_push(struct nx_pgsink *s, unsigned idx, const struct nx_qlog_rec *rec)
{
	if (nx_fails_assert(idx < s->n_rings)) {
		return;
	}
	struct ring *r = &s->rings[idx];
	pthread_mutex_lock(&r->lock);
	bool dropped = r->count == r->cap;
	unsigned at = (r->head + r->count) % r->cap;
	if (dropped) {
		r->head = (r->head + 1) % r->cap; /* the oldest is overwritten */
	} else {
		r->count++;
	}
	memcpy(&r->recs[at], rec, sizeof(*rec));
	bool half = r->count > 0 && r->count >= r->cap / 2; /* a ring of 1 is "half" at 1 */
	pthread_mutex_unlock(&r->lock);
	if (dropped) {
		nx_stat_inc(NX_STAT_PGSINK_DROP_FULL);
	}
	/* a ring half full wakes a napping writer early; the exchange makes it one signal per
	 * nap, however many pushes see the ring past half before the writer runs */
	if (half && atomic_load(&s->napping) && atomic_exchange(&s->napping, false)) {
		pthread_mutex_lock(&s->wake_lock);
		pthread_cond_signal(&s->wake_cond);
		pthread_mutex_unlock(&s->wake_lock);
	}
}

/* ---- the writer thread ---- */

static unsigned queued(struct nx_pgsink *s, bool *half)
{
	unsigned n = 0;
	*half = false;
	for (unsigned i = 0; i < s->n_rings; i++) {
		pthread_mutex_lock(&s->rings[i].lock);
		n += s->rings[i].count;
		*half |= s->rings[i].count > 0 && s->rings[i].count >= s->rings[i].cap / 2;
		pthread_mutex_unlock(&s->rings[i].lock);
	}
	return n;
}

/* Up to max oldest records of ring i into the scratch. */
static unsigned take(struct nx_pgsink *s, unsigned i, unsigned max)
{
	struct ring *r = &s->rings[i];
	pthread_mutex_lock(&r->lock);
	unsigned n = r->count < max ? r->count : max;
	for (unsigned k = 0; k < n; k++) {
		memcpy(&s->scratch[k], &r->recs[(r->head + k) % r->cap], sizeof(*s->scratch));
	}
	r->head = (r->head + n) % r->cap;
	r->count -= n;
	pthread_mutex_unlock(&r->lock);
	return n;
}

static const char *upstream_text(struct nx_pgsink *s, int idx)
{
	if (idx < 0 || !s->upstream_name) {
		return "";
	}
	if (idx != s->upstream_cache_idx) {
		if (s->upstream_name(s->ud, idx, s->upstream_cache, sizeof(s->upstream_cache)) <
		    0) {
			s->upstream_cache[0] = 0;
		}
		s->upstream_cache_idx = idx;
	}
	return s->upstream_cache;
}

/* Fill the batch from the rings, round robin, until batch_size records or the buffer is
 * nearly full. A chunk is taken only when all of it fits, so nothing drained is lost. */
static void fill_batch(struct nx_pgsink *s)
{
	unsigned priv = atomic_load(&s->privacy);
	s->upstream_cache_idx = -2; /* a reload may have renumbered the upstreams */
	bool more = true;
	while (more) {
		more = false;
		for (unsigned i = 0; i < s->n_rings; i++) {
			unsigned room = s->batch_size - s->copy_recs;
			size_t bytes = (s->copy_cap - s->copy_len) / NX_PGSINK_ROW_MAX;
			unsigned max = room < DRAIN_CHUNK ? room : DRAIN_CHUNK;
			max = bytes < max ? (unsigned)bytes : max;
			if (max == 0) {
				return;
			}
			unsigned n = take(s, i, max);
			more |= n == max;
			for (unsigned k = 0; k < n; k++) {
				const struct nx_qlog_rec *r = &s->scratch[k];
				struct nx_pgsink_row_ctx ctx = {
				    .hostname = s->hostname,
				    .upstream = upstream_text(s, r->upstream),
				    .privacy = priv,
				};
				int len = nx_pgsink_row(r, &ctx, s->copy + s->copy_len,
							s->copy_cap - s->copy_len);
				if (nx_fails_assert(len >= 0)) {
					continue; /* room for NX_PGSINK_ROW_MAX was checked */
				}
				if (len > 0) {
					s->copy_len += (size_t)len;
					s->copy_recs++;
				}
			}
		}
	}
}

static void disconnect(struct nx_pgsink *s)
{
	if (s->conn) {
		s->pq.PQfinish(s->conn);
		s->conn = NULL;
	}
}

/* Send the pending batch with one COPY. 0 sent (or nothing to send), -1 the connection failed
 * (the batch is kept), -2 the server refused it (dropped, counted). */
static int send_batch(struct nx_pgsink *s, char *err, size_t cap)
{
	if (s->copy_recs == 0) {
		return 0;
	}
	const struct nx_pq *pq = &s->pq;
	PGresult *r = pq->PQexec(s->conn, "COPY log_entries (" NX_PGSINK_COLUMNS ") FROM STDIN");
	bool started = r && pq->PQresultStatus(r) == PGRES_COPY_IN;
	if (!started) {
		snprintf(err, cap, "%s",
			 r ? pq->PQresultErrorMessage(r) : pq->PQerrorMessage(s->conn));
	}
	pq->PQclear(r);
	ExecStatusType st = PGRES_FATAL_ERROR;
	if (started) {
		if (pq->PQputCopyData(s->conn, s->copy, (int)s->copy_len) == 1 &&
		    pq->PQputCopyEnd(s->conn, NULL) == 1) {
			st = PGRES_COMMAND_OK;
		} else {
			snprintf(err, cap, "%s", pq->PQerrorMessage(s->conn));
			st = PGRES_FATAL_ERROR;
		}
		/* the results of the COPY, until NULL (the connection is then idle again) */
		while ((r = pq->PQgetResult(s->conn))) {
			ExecStatusType rs = pq->PQresultStatus(r);
			if (rs != PGRES_COMMAND_OK) {
				snprintf(err, cap, "%s", pq->PQresultErrorMessage(r));
				st = rs == PGRES_COPY_IN ? PGRES_FATAL_ERROR : rs;
				pq->PQclear(r);
				if (rs == PGRES_COPY_IN || rs == PGRES_COPY_OUT) {
					break; /* a protocol state we did not ask for: reconnect */
				}
				continue;
			}
			pq->PQclear(r);
		}
	}
	if (st == PGRES_COMMAND_OK) {
		nx_stat_add(NX_STAT_PGSINK_SENT, s->copy_recs);
		s->copy_len = 0;
		s->copy_recs = 0;
		s->copy_tries = 0;
		return 0;
	}
	nx_stat_inc(NX_STAT_PGSINK_ERRORS);
	if (pq->PQstatus(s->conn) == CONNECTION_OK && started) {
		/* the server read the batch and refused it: sending it again will not help */
		nx_stat_add(NX_STAT_PGSINK_DROP_REJECTED, s->copy_recs);
		s->copy_len = 0;
		s->copy_recs = 0;
		s->copy_tries = 0;
		return -2;
	}
	if (++s->copy_tries >= RETRY_MAX) {
		nx_stat_add(NX_STAT_PGSINK_DROP_WRITE, s->copy_recs);
		s->copy_len = 0;
		s->copy_recs = 0;
		s->copy_tries = 0;
	}
	return -1;
}

static int64_t wall_ms(void)
{
	return nx_now_wall_ms();
}

/* Connect, migrate, partition. 0, or -1 with err (the connection is closed). */
static int connect_db(struct nx_pgsink *s, char *err, size_t cap)
{
	static const char *const keys[] = {
	    "connect_timeout",	   "tcp_user_timeout", "keepalives_idle",
	    "keepalives_interval", "keepalives_count", "application_name",
	    "client_encoding",	   "dbname",	       NULL};
	char ct[16], tt[16];
	snprintf(ct, sizeof(ct), "%d", NX_PGSINK_CONNECT_TIMEOUT_S);
	snprintf(tt, sizeof(tt), "%d", NX_PGSINK_TCP_TIMEOUT_MS);
	/* ours first: the DSN (expanded in place of dbname) overrides any of them */
	const char *vals[] = {ct, tt, "10", "5", "2", "nxdns", "UTF8", s->dsn, NULL};
	s->conn = s->pq.PQconnectdbParams(keys, vals, 1);
	if (!s->conn || s->pq.PQstatus(s->conn) != CONNECTION_OK) {
		snprintf(err, cap, "%s",
			 s->conn ? s->pq.PQerrorMessage(s->conn) : "out of memory in libpq");
		disconnect(s);
		return -1;
	}
	/* the sink's rows are a log: a crash of the database may lose its last few hundred
	 * milliseconds of them rather than every COPY waiting for a WAL flush */
	if (nx_pg_exec(&s->pq, s->conn, "SET synchronous_commit TO off", err, cap) < 0 ||
	    nx_pg_migrate(&s->pq, s->conn, err, cap) < 0) {
		disconnect(s);
		return -1;
	}
	return 0;
}

/* libpq's messages end in a newline and may span lines ("...\n\tIs the server running"):
 * one log line. */
static void trim_err(char *e)
{
	char *w = e;
	for (const char *r = e; *r; r++) {
		bool space = *r == '\n' || *r == '\t' || *r == '\r' || *r == ' ';
		if (!space || (w > e && w[-1] != ' ')) {
			*w++ = space ? ' ' : *r;
		}
	}
	while (w > e && w[-1] == ' ') {
		w--;
	}
	*w = 0;
}

/* Partitions and retention; a failure is logged and counted, rows still go (to the default
 * partition when their day is missing). */
static void maintain(struct nx_pgsink *s)
{
	char err[ERR_MAX];
	int n = nx_pg_partitions(&s->pq, s->conn, wall_ms(), s->retention_days, err, sizeof(err));
	if (n < 0) {
		trim_err(err);
		nx_stat_inc(NX_STAT_PGSINK_ERRORS);
		nx_log(NX_LOG_WARN, "pgsink", "day partitions: %s", err);
	} else if (n > 0) {
		nx_log(NX_LOG_INFO, "pgsink", "retention: dropped %d day partition%s", n,
		       n == 1 ? "" : "s");
	}
}

/* Wait up to ms, or until stop; with `early`, also until a ring is half full (a push signals).
 * Without it (a backoff) pushes do not wake the writer: full rings must not turn the backoff
 * into a busy reconnect loop. */
static void nap(struct nx_pgsink *s, unsigned ms, bool early)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->wake_lock);
	if (!early) {
		int rc = 0;
		while (rc != ETIMEDOUT && !atomic_load(&s->stop)) {
			rc = pthread_cond_timedwait(&s->wake_cond, &s->wake_lock, &ts);
		}
		pthread_mutex_unlock(&s->wake_lock);
		return;
	}
	atomic_store(&s->napping, true);
	/* seq_cst: a push that filled a ring past half before the store above is seen here;
	 * one after it sees napping and signals */
	bool half;
	queued(s, &half);
	if (!half && !atomic_load(&s->stop)) {
		pthread_cond_timedwait(&s->wake_cond, &s->wake_lock, &ts);
	}
	atomic_store(&s->napping, false);
	pthread_mutex_unlock(&s->wake_lock);
}

static void *writer_main(void *arg)
{
	struct nx_pgsink *s = arg;
	unsigned backoff = NX_PGSINK_BACKOFF_MIN_MS;
	bool warned = false;
	uint64_t maint_at = 0;
	int64_t maint_day = -1;
	char err[ERR_MAX];
	while (!atomic_load(&s->stop)) {
		if (!s->conn) {
			if (connect_db(s, err, sizeof(err)) < 0) {
				trim_err(err);
				nx_stat_inc(NX_STAT_PGSINK_RECONNECTS);
				nx_stat_inc(NX_STAT_PGSINK_ERRORS);
				if (!warned) {
					nx_log(NX_LOG_WARN, "pgsink",
					       "cannot use the database: %s; retrying with backoff "
					       "(records queue, oldest dropped)",
					       err);
					warned = true;
				}
				nap(s, backoff, false);
				backoff = backoff * 2 > NX_PGSINK_BACKOFF_MAX_MS
					      ? NX_PGSINK_BACKOFF_MAX_MS
					      : backoff * 2;
				continue;
			}
			nx_log(NX_LOG_INFO, "pgsink", "connected; schema version %d",
			       NX_PGSINK_SCHEMA_VERSION);
			warned = false;
			backoff = NX_PGSINK_BACKOFF_MIN_MS;
			maint_at = 0;
		}
		int64_t day = wall_ms() / (86400 * (int64_t)1000);
		if (nx_now_mono_ms() >= maint_at || day != maint_day) {
			maintain(s);
			maint_at = nx_now_mono_ms() + NX_PGSINK_MAINT_MS;
			maint_day = day;
		}
		fill_batch(s);
		int rc = send_batch(s, err, sizeof(err));
		if (rc == -1) {
			trim_err(err);
			nx_stat_inc(NX_STAT_PGSINK_RECONNECTS);
			nx_log(NX_LOG_WARN, "pgsink", "lost the database: %s; reconnecting", err);
			disconnect(s);
			nap(s, NX_PGSINK_BACKOFF_MIN_MS, false);
			continue;
		}
		if (rc == -2) {
			trim_err(err);
			nx_log(NX_LOG_WARN, "pgsink", "the database refused a batch: %s", err);
		}
		bool half;
		if (queued(s, &half) < s->batch_size && !half) {
			nap(s, s->flush_ms, true);
		}
	}
	/* stopping: what is queued goes now, once, when connected; the rest is counted */
	if (s->conn) {
		char e[ERR_MAX];
		while (send_batch(s, e, sizeof(e)) == 0) {
			fill_batch(s);
			if (s->copy_recs == 0) {
				break;
			}
		}
	}
	bool half;
	unsigned left = s->copy_recs + queued(s, &half);
	if (left > 0) {
		nx_stat_add(NX_STAT_PGSINK_DROP_SHUTDOWN, left);
	}
	disconnect(s);
	return NULL;
}

int nx_pgsink_start(struct nx_pgsink *s)
{
	atomic_store(&s->stop, false);
	int rc = pthread_create(&s->thread, NULL, writer_main, s);
	if (rc) {
		return -rc;
	}
	pthread_setname_np(s->thread, "nx-pgsink");
	s->running = true;
	return 0;
}

void nx_pgsink_stop(struct nx_pgsink *s)
{
	if (!s || !s->running) {
		return;
	}
	atomic_store(&s->stop, true);
	pthread_mutex_lock(&s->wake_lock);
	pthread_cond_signal(&s->wake_cond);
	pthread_mutex_unlock(&s->wake_lock);
	pthread_join(s->thread, NULL);
	s->running = false;
}

void nx_pgsink_free(struct nx_pgsink *s)
{
	if (!s) {
		return;
	}
	nx_pgsink_stop(s);
	pthread_cond_destroy(&s->wake_cond);
	pthread_mutex_destroy(&s->wake_lock);
	release(s);
}

/*
 * The query pipeline: one query, end to end, on a worker thread.
 *
 *   read + parse -> admission (ACL) -> protocol checks -> [filter, cache: later stages]
 *   -> forward (coalesced per key, one permit per upstream operation) -> relay to each waiter.
 *
 * One entry for every transport: nx_pipeline_query takes the query with a reply handle
 * (net/reply.h) and never asks which transport it came over; the handle's plain fields (peer,
 * protocol, whether the size is the datagram's) and its ops are all it uses. Immediate answers
 * are written into the caller's buffer (the UDP batch goes out in one sendmmsg, a stream frames
 * it); forwarded answers are relayed from the upstream engine's receive buffer into the
 * worker's scratch buffer and sent through the held handle (UDP on its own worker: queued for
 * one sendmmsg per socket at the end of the loop turn) or handed to the worker that owns the
 * handle when it cannot be sent from here. Nothing here allocates per query: pending
 * operations and waiters come from per-worker free lists that grow to the peak and are reused.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "base/clock.h"
#include "base/stats.h"
#include "daemon/impl.h"
#include "dns/wire.h"
#include "pgsink/pgsink.h"

struct waiter {
	struct waiter *next;
	struct nx_worker *w;        /* the worker whose socket/connection the client is on */
	struct nx_reply to;         /* held (nx_reply_hold) until answered */
	bool edns;
	bool do_bit;
	uint16_t id;
	uint16_t qflags;
	uint16_t max_size;
	bool check_answer;              /* the answer's CNAME/HTTPS targets go through the ladder */
	bool chain;                     /* q is a local CNAME name; the operation resolves its target:
					 * answer with the local chain + the target's records */
	struct nx_filter_result fr;     /* the query's decision (e.g. an exception), for the log */
	uint64_t t0_us;                 /* arrival, monotonic */
	int64_t ts_ms;                  /* arrival, wall clock */
	struct nx_dns_question q;   /* the client's question, in the client's case */
	char client_id[NX_QLOG_CLIENT_ID_MAX]; /* the handle's client id, copied: it is borrowed
						* for the query callback only (for the log) */
};

struct pending {
	struct nx_worker *w;        /* owner: runs the upstream operation */
	struct pending *hnext;      /* bucket chain */
	struct pending *next_free;
	uint64_t hash;
	uint8_t name[NX_DNS_NAME_MAX]; /* lower-cased key name */
	uint8_t name_len;
	uint16_t qtype, qclass;
	bool do_bit, cd;
	int zone;                   /* forward zone index or -1 */
	struct nx_confref *cref;    /* held: servers are borrowed from it */
	struct waiter *waiters;     /* under the shard lock while listed */
	unsigned n_waiters;
};

static struct nx_coalesce_shard *shard_of(struct nx_daemon *d, uint64_t h)
{
	return &d->coalesce[(h >> 32) % NX_COALESCE_SHARDS];
}

static struct pending **bucket_of(struct nx_coalesce_shard *sh, uint64_t h)
{
	return &sh->buckets[h % NX_COALESCE_BUCKETS];
}

/* A query being handled: where it came from (the handle) and what handle() found out. */
struct origin {
	const struct nx_reply *r;   /* borrowed for the call; copied into a waiter to answer later */
	bool check_answer;          /* the answer's targets are checked (the client is filtered and
				     * no allow rule or exception let the name through) */
	const struct nx_dns_question *client_q; /* borrowed: the client's question when the query
						 * forwarded is a local CNAME's target, or NULL */
	/* filled by handle() for the query log */
	bool have_q;                /* the question parsed: its name is at pkt + 12 */
	bool cached;
	uint16_t qtype;
	uint8_t qname_len;
	struct nx_filter_result fr;
	uint8_t matched[NX_DNS_NAME_MAX]; /* a CNAME target that was blocked (matched_len > 0) */
	uint8_t matched_len;
	uint64_t t0_us;
	int64_t ts_ms;
	const struct sockaddr *peer; /* the handle's */
};

static struct waiter *waiter_get(struct nx_worker *w, unsigned cap)
{
	struct waiter *x = w->free_waiters;
	if (x) {
		w->free_waiters = x->next;
		return x;
	}
	if (w->n_waiters_alloc >= cap) {
		return NULL;
	}
	x = nx_mem_alloc(NX_OWNER_query_pool, sizeof(*x));
	if (x) {
		w->n_waiters_alloc++;
	}
	return x;
}

static void waiter_put(struct nx_worker *w, struct waiter *x)
{
	x->next = w->free_waiters;
	w->free_waiters = x;
}

static struct pending *pending_get(struct nx_worker *w, unsigned cap)
{
	struct pending *p = w->free_pending;
	if (p) {
		w->free_pending = p->next_free;
		return p;
	}
	if (w->n_pending_alloc >= cap) {
		return NULL;
	}
	p = nx_mem_alloc(NX_OWNER_query_pool, sizeof(*p));
	if (p) {
		w->n_pending_alloc++;
	}
	return p;
}

static bool permit_acquire(struct nx_worker *w, unsigned permits)
{
	int n = atomic_fetch_add_explicit(&w->d->permits_used, 1, memory_order_acquire);
	if (n >= (int)permits) {
		atomic_fetch_sub_explicit(&w->d->permits_used, 1, memory_order_relaxed);
		return false;
	}
	nx_gauge_add(NX_GAUGE_PERMITS_USED, 1);
	return true;
}

static void permit_release(struct nx_worker *w)
{
	atomic_fetch_sub_explicit(&w->d->permits_used, 1, memory_order_release);
	nx_gauge_add(NX_GAUGE_PERMITS_USED, -1);
}

/* The generation this worker decides against now. */
static void policy_of(struct nx_worker *w, struct nx_policy *p)
{
	p->c = w->cref->c;
	p->rules = w->cref->rules;
	p->user_side = w->cref->user_side;
	p->badfilter = w->cref->badfilter;
	p->snap = w->snap ? w->snap->snap : NULL;
	p->side = w->snap ? w->snap->side : NULL;
	int64_t until = atomic_load_explicit(&w->d->pause_until_ms, memory_order_relaxed);
	p->paused = until != 0 && until > nx_now_wall_ms();
}

static void count_block(const struct nx_filter_result *r, bool cname)
{
	if (cname) {
		nx_stat_inc(NX_STAT_B_CNAME);
	} else if (r->reason == NX_FILTER_R_user_deny) {
		nx_stat_inc(NX_STAT_B_USER_DENY);
	} else if (r->reason == NX_FILTER_R_blocklist_wildcard) {
		nx_stat_inc(NX_STAT_B_WILDCARD);
	} else {
		nx_stat_inc(NX_STAT_B_DOMAIN);
	}
	nx_stat_inc(NX_STAT_R_BLOCKED);
}

/* An answer whose CNAME chain reaches a blocked name is answered as blocked (CNAME cloaking);
 * one whose target a $dnsrewrite / hosts answer decides, with that rewrite. Returns the
 * answer's length, or 0 when the answer may go out as it is. */
static int cname_block(const struct nx_policy *pol, const struct nx_policy_query *q,
		       const uint8_t *buf, const struct nx_dns_msg *m,
		       const struct nx_dns_reply_ctx *ctx, uint8_t *out, size_t cap,
		       struct nx_filter_result *r, uint8_t matched[NX_DNS_NAME_MAX], uint8_t *mlen)
{
	size_t ml = 0;
	if (!nx_policy_check_answer(pol, q, buf, m, r, matched, &ml)) {
		return 0;
	}
	*mlen = (uint8_t)ml;
	int n;
	if (r->rewrite != NX_FILTER_RW_NONE) {
		/* a $dnsrewrite / hosts answer of the target: its records answer the question */
		struct nx_policy_query tq = *q;
		tq.wire = matched;
		tq.wlen = ml;
		n = nx_policy_rewrite_answer(pol, &tq, out, cap, ctx, r);
		nx_stat_inc(NX_STAT_R_REWRITTEN);
	} else {
		count_block(r, true);
		n = nx_policy_block_answer(pol, out, cap, ctx, r);
	}
	return n > 0 ? n : 0;
}

/* ---- query log ---- */

/* Bounded copy (snprintf "%s" costs a format parse per logged query). */
static void copy_text(char *out, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memcpy(out, src, n);
	out[n] = 0;
}

/* Lower-case presentation text of a wire name, cut to cap. Converts straight into out (one pass
 * over the name, one over the text); only a name whose text does not fit out goes through a
 * full-size scratch buffer first, to keep the cut the same. */
static void lower_text(const uint8_t *wire, size_t len, char *out, size_t cap)
{
	out[0] = 0;
	if (len == 0) {
		return;
	}
	int rc = nx_dns_name_to_text(wire, len, out, cap);
	if (rc == NX_ETRUNC) {
		char tmp[NX_DNS_TEXT_MAX];
		if (nx_dns_name_to_text(wire, len, tmp, sizeof(tmp)) < 0) {
			return;
		}
		copy_text(out, cap, tmp);
	} else if (rc < 0) {
		out[0] = 0;
		return;
	}
	for (char *c = out; *c; c++) {
		if (*c >= 'A' && *c <= 'Z') {
			*c = (char)(*c + 32);
		}
	}
}

/* "192.0.2.1" without inet_ntop (its sprintf costs a format parse per logged query). */
static void ipv4_text(const uint8_t a[4], char *out)
{
	size_t o = 0;
	for (int i = 0; i < 4; i++) {
		unsigned v = a[i];
		if (v >= 100) {
			out[o++] = (char)('0' + v / 100);
		}
		if (v >= 10) {
			out[o++] = (char)('0' + v / 10 % 10);
		}
		out[o++] = (char)('0' + v % 10);
		out[o++] = i < 3 ? '.' : 0;
	}
}

/* "A 192.0.2.1", "AAAA 2001:db8::1", "CNAME x.example", "TXT", or "" from a reply we built. */
static void answer_summary(const uint8_t *buf, size_t len, char *out, size_t cap)
{
	out[0] = 0;
	if (len < NX_DNS_HDR_LEN || ((buf[6] << 8) | buf[7]) == 0) {
		return;
	}
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, len);
	rd.pos = NX_DNS_HDR_LEN;
	if ((buf[4] << 8 | buf[5]) > 0) {
		nx_dns_rd_skip_name(&rd);
		nx_dns_rd_skip(&rd, 4);
	}
	nx_dns_rd_skip_name(&rd);
	uint16_t type = nx_dns_rd_u16(&rd);
	nx_dns_rd_skip(&rd, 6);
	uint16_t rdlen = nx_dns_rd_u16(&rd);
	if (rd.err || nx_dns_rd_left(&rd) < rdlen) {
		return;
	}
	char tbuf[16];
	const char *tn = nx_dns_type_name(type, tbuf);
	char val[NX_DNS_TEXT_MAX];
	val[0] = 0;
	if (type == NX_DNS_T_A && rdlen == 4) {
		ipv4_text(buf + rd.pos, val);
	} else if (type == NX_DNS_T_AAAA && rdlen == 16) {
		inet_ntop(AF_INET6, buf + rd.pos, val, sizeof(val));
	} else if (type == NX_DNS_T_CNAME || type == NX_DNS_T_PTR) {
		uint8_t name[NX_DNS_NAME_MAX];
		size_t nl = nx_dns_rd_name(&rd, name);
		if (nl > 0) {
			lower_text(name, nl, val, sizeof(val));
		}
	}
	/* "TYPE value", cut to cap (a summary, not the record of truth) */
	size_t o = 0;
	for (const char *src = tn; *src && o + 1 < cap; src++) {
		out[o++] = *src;
	}
	if (val[0] && o + 1 < cap) {
		out[o++] = ' ';
	}
	for (const char *src = val; *src && o + 1 < cap; src++) {
		out[o++] = *src;
	}
	out[o] = 0;
}

static void log_answer(struct nx_worker *w, const struct nx_reply *to, enum nx_proto proto,
		       const struct sockaddr *client, const char *client_id, const uint8_t *qname,
		       size_t qlen, uint16_t qtype, const struct nx_filter_result *fr,
		       const uint8_t *matched, size_t mlen, bool cached, int upstream,
		       uint64_t t0_us, int64_t ts_ms, const uint8_t *reply, size_t rlen)
{
	struct nx_qlog_rec rec;
	rec.ts_ms = ts_ms;
	uint64_t now = nx_now_mono_us();
	rec.duration_us = (uint32_t)NX_MIN(now - t0_us, UINT32_MAX);
	memset(rec.client, 0, sizeof(rec.client));
	rec.family = (uint8_t)client->sa_family;
	if (client->sa_family == AF_INET) {
		memcpy(rec.client, &((const struct sockaddr_in *)client)->sin_addr, 4);
	} else if (client->sa_family == AF_INET6) {
		memcpy(rec.client, &((const struct sockaddr_in6 *)client)->sin6_addr, 16);
	}
	rec.proto = (uint8_t)proto; /* the same order: static_assert below */
	rec.qtype = qtype;
	rec.rcode = rlen >= 4 ? (uint8_t)(reply[3] & 0x0f) : 0;
	rec.action = fr->action;
	rec.reason = fr->reason;
	rec.cached = cached;
	rec.upstream = (int16_t)upstream;
	lower_text(qname, qlen, rec.name, sizeof(rec.name));
	if (mlen > 0) {
		lower_text(matched, mlen, rec.matched, sizeof(rec.matched));
	} else if (fr->matched_len > 0 && (size_t)fr->matched_off + fr->matched_len <= qlen) {
		/* A suffix of the query name: when the name's text has no escapes (text length =
		 * wire length - 2), the suffix's text starts at the same offset in it. */
		size_t tl = strlen(rec.name);
		if (qlen > 1 && fr->matched_off + fr->matched_len == qlen && tl == qlen - 2 &&
		    fr->matched_off < tl) {
			copy_text(rec.matched, sizeof(rec.matched), rec.name + fr->matched_off);
		} else {
			lower_text(qname + fr->matched_off, fr->matched_len, rec.matched,
				   sizeof(rec.matched));
		}
	} else {
		rec.matched[0] = 0;
	}
	struct nx_policy pol = {.c = w->cref->c,
				.rules = w->cref->rules,
				.user_side = w->cref->user_side,
				.badfilter = w->cref->badfilter};
	copy_text(rec.source, sizeof(rec.source), nx_policy_source_name(&pol, fr));
	answer_summary(reply, rlen, rec.answer, sizeof(rec.answer));
	static_assert(NX_QLOG_CLIENT_ID_MAX == NX_CLIENT_ID_MAX + 1, "a client id fits the log");
	copy_text(rec.client_id, sizeof(rec.client_id), client_id ? client_id : "");
	if (w->dnstap) {
		nx_daemon_dnstap_answer(w, to, proto, client, &rec, t0_us, reply, rlen);
	}
	if (w->qlog) {
		nx_qlog_push(w->qlog, w->idx, &rec);
	}
	if (w->pgsink) {
		nx_pgsink_push(w->pgsink, w->idx, &rec);
	}
}

/* Hand an answer to the worker that owns the waiter's handle (bounded by the waiters it holds). */
static void handoff(struct waiter *x, const uint8_t *buf, size_t len)
{
	struct nx_worker *t = x->w;
	struct nx_handoff *h = nx_mem_alloc(NX_OWNER_tcp_writes, sizeof(*h) + len);
	if (!h) {
		/* No room for the answer: still tell the owner to drop the handle's hold. */
		nx_stat_inc(NX_STAT_D_SEND);
		len = 0;
		h = nx_mem_alloc(NX_OWNER_tcp_writes, sizeof(*h));
		if (!h) {
			/* Out of memory twice: the hold stays and that connection lingers until the
			 * process ends. Counted; nothing else can be done without memory. */
			nx_stat_inc(NX_STAT_ASSERT_FAILURES);
			return;
		}
	}
	h->to = x->to;
	h->len = len;
	memcpy(h->data, buf, len);
	pthread_mutex_lock(&t->inbox_lock);
	h->next = t->inbox;
	t->inbox = h;
	pthread_mutex_unlock(&t->inbox_lock);
	nx_worker_wake(t);
}

void nx_pipeline_drain_inbox(struct nx_worker *w)
{
	pthread_mutex_lock(&w->inbox_lock);
	struct nx_handoff *h = w->inbox;
	w->inbox = NULL;
	pthread_mutex_unlock(&w->inbox_lock);
	while (h) {
		struct nx_handoff *next = h->next;
		if (h->len > 0) {
			nx_reply_send(&h->to, h->data, h->len, true);
		}
		nx_reply_release(&h->to);
		nx_mem_free(NX_OWNER_tcp_writes, h, sizeof(*h) + h->len);
		h = next;
	}
}

/* Answer a waiter through its handle, from whichever worker finished the operation. */
static void send_reply(struct nx_worker *w, struct waiter *x, const uint8_t *buf, size_t len)
{
	bool own = x->w == w;
	if (!own && !x->to.any_thread) {
		handoff(x, buf, len);
		return;
	}
	if (len > 0) {
		nx_reply_send(&x->to, buf, len, own);
	}
	nx_reply_release(&x->to);
}

static void on_upstream_done(void *ud, enum nx_up_result res, const uint8_t *msg, size_t len,
			     const struct nx_dns_msg *m, int server)
{
	struct pending *p = ud;
	struct nx_worker *w = p->w;
	/* Unlink from the shared table and take the waiters: nobody can join after this. */
	struct nx_coalesce_shard *sh = shard_of(w->d, p->hash);
	pthread_mutex_lock(&sh->lock);
	struct pending **pp = bucket_of(sh, p->hash);
	while (*pp && *pp != p) {
		pp = &(*pp)->hnext;
	}
	if (*pp) {
		*pp = p->hnext;
	}
	struct waiter *list = p->waiters;
	p->waiters = NULL;
	pthread_mutex_unlock(&sh->lock);
	/* The upstream work is over: give the permit back BEFORE any client hears of it. A client
	 * that has its answer may ask again at once, and its next query can land on another
	 * worker; released after the replies, that query could find the permit still taken and be
	 * dropped (a real race, seen under load with one permit). */
	permit_release(w);
	uint64_t now = uv_now(&w->loop);
	struct nx_cache_key key = {
		.name = p->name,
		.name_len = p->name_len,
		.qtype = p->qtype,
		.qclass = p->qclass,
		.do_bit = p->do_bit,
		.cd = p->cd,
	};
	/* Rebinding protection before the cache, so a hit is stripped too; forward zones are
	 * where LAN names live and are exempt. w->cbuf is free here: only the stale lookup below
	 * uses it, and only when there is no answer. */
	struct nx_dns_msg gm;
	if (res == NX_UP_ANSWER && p->zone < 0) {
		int gl = nx_guard_rebind_apply(p->cref->c, p->name, p->name_len, msg, m, w->cbuf,
					       sizeof(w->cbuf), &gm);
		if (gl > 0) {
			msg = w->cbuf; /* gm.len is its length */
			m = &gm;
		} else if (nx_fails_assert(gl == 0)) {
			res = NX_UP_FAILED;
		}
	}
	if (res == NX_UP_ANSWER) {
		nx_cache_put(w->cache, &key, msg, m, now);
	}
	/* RFC 8767: when upstream failed, an expired entry inside the stale window beats SERVFAIL. */
	struct nx_dns_msg stale_m;
	struct nx_cache_hit stale_hit;
	bool stale = res != NX_UP_ANSWER && list &&
		     nx_cache_lookup(w->cache, &key, now, NX_CACHE_LOOKUP_STALE, w->cbuf,
				     sizeof(w->cbuf), &stale_m, &stale_hit) == 0;
	struct nx_policy pol; /* one per completion, shared by its waiters' answer checks */
	policy_of(w, &pol);
	int up_stats = -1;
	if (res == NX_UP_ANSWER && server >= 0) {
		const struct nx_up_server *sv = p->zone >= 0 ? p->cref->zone_servers[p->zone]
							     : p->cref->servers;
		up_stats = sv[server].stats;
	}
	struct waiter *x = list;
	while (x) {
		struct waiter *next = x->next;
		struct nx_dns_reply_ctx ctx = {
			.id = x->id,
			.qflags = x->qflags,
			.q = &x->q,
			.edns = x->edns,
			.do_bit = x->do_bit,
			.max_size = x->max_size,
		};
		int rlen;
		struct nx_filter_result lfr = x->fr;
		uint8_t cmatched[NX_DNS_NAME_MAX];
		uint8_t cmlen = 0;
		/* The client is resolved again against the generation in effect now (the one it
		 * asked under may be gone), and only when its answer is to be checked. */
		struct nx_policy_query pq = {.filtering = false};
		if (x->check_answer) {
			nx_policy_query_init(&pol, &pq, x->q.name, x->q.name_len, x->q.qtype,
					     (const struct sockaddr *)&x->to.peer, x->client_id);
		}
		if (x->chain && (res == NX_UP_ANSWER || stale)) {
			rlen = nx_policy_local_splice(&pol, w->tx, sizeof(w->tx), &ctx,
						      stale ? w->cbuf : msg, stale ? &stale_m : m);
			nx_stat_inc(NX_STAT_R_LOCAL);
		} else if (stale) {
			bool trunc = false;
			rlen = nx_dns_relay(w->tx, sizeof(w->tx), w->cbuf, &stale_m, &ctx, 0,
					    stale_hit.stale ? NX_DNS_EDE_STALE : -1, NULL, &trunc);
			if (rlen >= NX_DNS_HDR_LEN) {
				w->tx[3] |= 0x80;
			}
			nx_stat_inc(NX_STAT_R_CACHED);
		} else if (res == NX_UP_ANSWER &&
			   (rlen = cname_block(&pol, &pq, msg, m, &ctx, w->tx, sizeof(w->tx), &lfr,
					       cmatched, &cmlen)) > 0) {
			/* blocked: rlen holds the block answer */
		} else if (res == NX_UP_ANSWER) {
			bool trunc = false;
			rlen = nx_dns_relay(w->tx, sizeof(w->tx), msg, m, &ctx, 0, -1, NULL, &trunc);
			if (rlen >= NX_DNS_HDR_LEN) {
				w->tx[3] |= 0x80; /* RA: we recurse for the client via upstreams */
			}
			nx_stat_inc(NX_STAT_R_FORWARDED);
			if (trunc) {
				nx_stat_inc(NX_STAT_R_TRUNCATED);
			}
		} else if (res == NX_UP_TIMEOUT) {
			rlen = nx_dns_build_error(w->tx, sizeof(w->tx), &ctx, NX_DNS_SERVFAIL,
						  NX_DNS_EDE_NO_REACHABLE_AUTHORITY,
						  "no upstream answered before the deadline");
			nx_stat_inc(NX_STAT_R_SERVFAIL);
		} else {
			rlen = nx_dns_build_error(w->tx, sizeof(w->tx), &ctx, NX_DNS_SERVFAIL,
						  NX_DNS_EDE_NETWORK_ERROR, "every upstream failed");
			nx_stat_inc(NX_STAT_R_SERVFAIL);
		}
		if (rlen <= 0) {
			nx_stat_inc(NX_STAT_D_SEND);
		} else if (w->qlog || w->dnstap || w->pgsink) {
			log_answer(w, &x->to, (enum nx_proto)x->to.proto,
				   (const struct sockaddr *)&x->to.peer, x->client_id, x->q.name,
				   x->q.name_len, x->q.qtype, &lfr, cmatched, cmlen, stale, up_stats,
				   x->t0_us, x->ts_ms, w->tx, (size_t)rlen);
		}
		send_reply(w, x, w->tx, rlen > 0 ? (size_t)rlen : 0);
		nx_gauge_add(NX_GAUGE_IN_FLIGHT, -1);
		/* A waiter struct joins the free list of the worker that finishes it: pools are per
		 * worker, entries may migrate, each is freed once at shutdown. */
		waiter_put(w, x);
		x = next;
	}
	nx_confref_release(p->cref);
	p->cref = NULL;
	p->next_free = w->free_pending;
	w->free_pending = p;
}

static int find_zone(const struct nx_conf *c, const struct nx_dns_question *q)
{
	for (size_t i = 0; i < c->n_zones; i++) {
		if (nx_dns_name_in_zone(q->name, q->name_len, c->zones[i].name,
					c->zones[i].name_len)) {
			return (int)i;
		}
	}
	return -1;
}

static void fill_waiter(struct waiter *x, const struct nx_dns_msg *m, const struct origin *o,
			size_t max_size)
{
	x->id = m->id;
	x->qflags = m->flags;
	x->edns = m->edns.present;
	x->do_bit = m->edns.do_bit;
	x->max_size = (uint16_t)NX_MIN(max_size, NX_DNS_MSG_MAX);
	x->q = o->client_q ? *o->client_q : m->q;
	x->chain = o->client_q != NULL;
	x->w = NULL; /* set by the caller */
	x->check_answer = o->check_answer;
	x->fr = o->fr;
	x->t0_us = o->t0_us;
	x->ts_ms = o->ts_ms;
	x->to = *o->r;
	copy_text(x->client_id, sizeof(x->client_id), o->r->client_id ? o->r->client_id : "");
	x->to.client_id = ""; /* borrowed for the query callback only: x->client_id keeps it */
	nx_reply_hold(&x->to);
	nx_gauge_add(NX_GAUGE_IN_FLIGHT, 1);
}

/* Undo fill_waiter for a waiter that was never listed. */
static void unfill_waiter(struct nx_worker *w, struct waiter *x)
{
	nx_gauge_add(NX_GAUGE_IN_FLIGHT, -1);
	nx_reply_release(&x->to);
	waiter_put(w, x);
}

/*
 * Forward a query, or join an identical in-flight operation as one more waiter. Returns 0, or
 * NX_REPLY_BUSY_PERMIT / NX_REPLY_BUSY_WAITERS when there is no room now (the transport drops
 * or waits: net/reply.h). With `with_waiter` false (prefetch) the operation only fills the
 * cache: an identical operation already running is enough, and no permit means no prefetch
 * (nothing is counted as dropped).
 */
static int start_operation(struct nx_worker *w, const struct nx_dns_msg *m,
			    const struct origin *o, size_t max_size, bool with_waiter)
{
	struct nx_confref *r = w->cref;
	const struct nx_conf *c = r->c;
	uint8_t key[NX_DNS_NAME_MAX + 8];
	memcpy(key, m->q.name, m->q.name_len);
	nx_dns_name_lower(key, m->q.name_len);
	bool do_bit = m->edns.present && m->edns.do_bit;
	bool cd = (m->flags & NX_DNS_F_CD) != 0;
	int zone = find_zone(c, &m->q);
	size_t kl = m->q.name_len;
	key[kl++] = (uint8_t)(m->q.qtype >> 8);
	key[kl++] = (uint8_t)m->q.qtype;
	key[kl++] = (uint8_t)(m->q.qclass >> 8);
	key[kl++] = (uint8_t)m->q.qclass;
	key[kl++] = (uint8_t)(do_bit | (cd << 1));
	key[kl++] = (uint8_t)(zone + 1);
	uint64_t h = XXH3_64bits(key, kl);
	unsigned waiter_cap = c->permits * c->coalesce_max_waiters;

	/* Allocate from this worker's pools before taking the shard lock. */
	struct waiter *x = NULL;
	if (with_waiter) {
		x = waiter_get(w, waiter_cap);
		if (!x) {
			return NX_REPLY_BUSY_PERMIT;
		}
		fill_waiter(x, m, o, max_size);
		x->w = w;
	}

	struct nx_coalesce_shard *sh = shard_of(w->d, h);
	pthread_mutex_lock(&sh->lock);
	for (struct pending *p = *bucket_of(sh, h); p; p = p->hnext) {
		if (p->hash == h && p->qtype == m->q.qtype && p->qclass == m->q.qclass &&
		    p->do_bit == do_bit && p->cd == cd && p->zone == zone &&
		    p->name_len == m->q.name_len && memcmp(p->name, key, p->name_len) == 0) {
			if (!x) {
				pthread_mutex_unlock(&sh->lock);
				return 0; /* prefetch: already being fetched */
			}
			if (p->n_waiters >= c->coalesce_max_waiters) {
				pthread_mutex_unlock(&sh->lock);
				unfill_waiter(w, x);
				return NX_REPLY_BUSY_WAITERS;
			}
			x->next = p->waiters;
			p->waiters = x;
			p->n_waiters++;
			pthread_mutex_unlock(&sh->lock);
			nx_stat_inc(NX_STAT_COALESCED);
			return 0;
		}
	}

	struct pending *p = NULL;
	if (permit_acquire(w, c->permits)) {
		p = pending_get(w, c->permits);
		if (!p) {
			permit_release(w);
		}
	}
	if (!p) {
		pthread_mutex_unlock(&sh->lock);
		if (x) {
			unfill_waiter(w, x);
			return NX_REPLY_BUSY_PERMIT;
		}
		return 0;
	}
	p->w = w;
	p->hash = h;
	memcpy(p->name, key, m->q.name_len);
	p->name_len = m->q.name_len;
	p->qtype = m->q.qtype;
	p->qclass = m->q.qclass;
	p->do_bit = do_bit;
	p->cd = cd;
	p->zone = zone;
	p->waiters = x;
	p->n_waiters = x ? 1 : 0;
	if (x) {
		x->next = NULL;
	}
	nx_confref_acquire(r);
	p->cref = r;
	p->hnext = *bucket_of(sh, h);
	*bucket_of(sh, h) = p;
	pthread_mutex_unlock(&sh->lock);

	/* Outside the lock: the engine may complete synchronously (every server failed at once),
	 * and on_upstream_done takes the shard lock itself. */
	struct nx_up_req req = {
		.q = &m->q,
		.do_bit = do_bit,
		.cd = cd,
		.servers = zone >= 0 ? r->zone_servers[zone] : r->servers,
		.n_servers = zone >= 0 ? r->zone_n[zone] : r->n_servers,
		.race = c->race,
		.stagger_ms = c->stagger_ms,
		.timeout_ms = c->timeout_ms,
	};
	if (nx_upstream_start(w->up, &req, on_upstream_done, p) < 0) {
		/* The callback was not called: finish it as failed (answers whoever joined). */
		on_upstream_done(p, NX_UP_FAILED, NULL, 0, NULL, -1);
	}
	return 0;
}

/* Refresh a popular entry before it expires: an upstream operation with no waiters (the answer
 * only goes into the cache). Skipped when an identical operation runs or no permit is free. */
static void prefetch(struct nx_worker *w, const struct nx_dns_msg *m)
{
	struct origin none = {.r = NULL};
	(void)start_operation(w, m, &none, 0, false);
}

static int error_reply(uint8_t *out, size_t cap, const struct nx_dns_msg *m, bool have_q,
			  size_t max_size, int rcode, enum nx_stat stat)
{
	struct nx_dns_reply_ctx ctx = {
		.id = m->id,
		.qflags = m->flags,
		.q = have_q ? &m->q : NULL,
		.edns = have_q && m->edns.present,
		.do_bit = have_q && m->edns.do_bit,
		.max_size = NX_MIN(max_size, cap),
	};
	int n = nx_dns_build_error(out, cap, &ctx, rcode, -1, NULL);
	nx_stat_inc(stat);
	return n > 0 ? n : 0;
}

/*
 * A local CNAME whose target is not local: the target is resolved as any forwarded name (cache,
 * coalescing, upstream, serve-stale) and the client gets the local chain with the target's
 * records after it, as a stub resolver needs (it does not chase CNAMEs itself). The target is
 * the operator's own choice: it is not filtered. Returns what handle() returns.
 */
static int local_chain(struct nx_worker *w, const struct nx_policy *pol, const struct nx_dns_msg *m,
		       struct origin *o, const uint8_t *target, size_t tl, size_t limit,
		       uint8_t *out, size_t cap)
{
	struct nx_dns_msg t = *m;
	memcpy(t.q.name, target, tl);
	t.q.name_len = (uint8_t)tl;
	if (w->cache) {
		struct nx_cache_key k;
		nx_cache_key_from_query(&t, &k);
		struct nx_dns_msg cm;
		struct nx_cache_hit hit;
		if (nx_cache_lookup(w->cache, &k, uv_now(&w->loop), 0, w->cbuf, sizeof(w->cbuf), &cm,
				    &hit) == 0) {
			struct nx_dns_reply_ctx ctx = {
				.id = m->id,
				.qflags = m->flags,
				.q = &m->q,
				.edns = m->edns.present,
				.do_bit = m->edns.do_bit,
				.max_size = NX_MIN(limit, cap),
			};
			o->cached = true;
			nx_stat_inc(NX_STAT_R_LOCAL);
			int n = nx_policy_local_splice(pol, out, cap, &ctx, w->cbuf, &cm);
			if (hit.prefetch) {
				prefetch(w, &t);
			}
			return n > 0 ? n : 0;
		}
	}
	o->client_q = &m->q;
	return start_operation(w, &t, o, limit, true);
}

/* Access control. A client id (DoH path, DoT SNI) only picks a policy; it admits a query from
 * an address access.allow refuses only with access.admit_client_ids, and never past deny. */
static bool admitted(const struct nx_conf *c, const struct origin *o)
{
	if (nx_conf_acl_allows(c, o->peer)) {
		return true;
	}
	return c->admit_client_ids && o->r->client_id[0] &&
	       nx_conf_client_by_id(c, o->r->client_id) >= 0 && !nx_conf_acl_denied(c, o->peer);
}

/* Per-client rate limit (guard/): after the ACL, so refused outsiders take no table slots. */
static bool rate_ok(struct nx_worker *w, const struct nx_conf *c, const struct origin *o)
{
	if (c->rl_qps == 0) {
		return true;
	}
	struct nx_guard_rl *t = atomic_load_explicit(&w->d->rate_limit, memory_order_acquire);
	return nx_guard_rl_admit(t, c, o->peer, nx_now_mono_us());
}

/* One query, whatever its transport: an immediate answer's length, 0, or NX_REPLY_*. */
static int handle(struct nx_worker *w, const uint8_t *pkt, size_t len, bool truncated,
		  struct origin *o, uint8_t *out, size_t cap)
{
	struct nx_dns_msg m;
	if (nx_dns_hdr_parse(pkt, len, &m) < 0) {
		nx_stat_inc(NX_STAT_D_SHORT);
		return NX_REPLY_BAD_FRAME;
	}
	if (m.flags & NX_DNS_F_QR) {
		nx_stat_inc(NX_STAT_D_RESPONSE);
		return NX_REPLY_BAD_FRAME;
	}
	const struct nx_conf *c = w->cref->c;
	bool parsed = !truncated && nx_dns_msg_parse(pkt, len, &m) == 0;
	bool have_q = parsed && m.has_question && m.qdcount == 1;
	o->have_q = have_q;
	if (have_q) {
		o->qtype = m.q.qtype;
		o->qname_len = m.q.name_len;
	}
	size_t limit = !o->r->datagram ? NX_DNS_MSG_MAX
				       : (parsed ? nx_dns_udp_limit(&m) : NX_DNS_UDP_MIN);
	if (!admitted(c, o)) {
		nx_stat_inc(NX_STAT_ACL_REFUSED);
		return error_reply(out, cap, &m, have_q, limit, NX_DNS_REFUSED, NX_STAT_R_REFUSED);
	}
	if (!rate_ok(w, c, o)) {
		nx_stat_inc((enum nx_stat)(NX_STAT_RL_UDP + o->r->proto));
		if (o->r->proto == NX_PROTO_UDP) {
			return 0; /* dropped: an answer would feed a reflection */
		}
		return error_reply(out, cap, &m, have_q, limit, NX_DNS_REFUSED, NX_STAT_R_REFUSED);
	}
	if (NX_DNS_OPCODE(m.flags) != 0) {
		return error_reply(out, cap, &m, have_q, limit, NX_DNS_NOTIMP, NX_STAT_R_NOTIMP);
	}
	if (!have_q) {
		return error_reply(out, cap, &m, false, limit, NX_DNS_FORMERR, NX_STAT_R_FORMERR);
	}
	if (m.edns.present && m.edns.version != 0) {
		return error_reply(out, cap, &m, true, limit, NX_DNS_BADVERS, NX_STAT_R_BADVERS);
	}
	if (m.q.qtype == NX_DNS_T_AXFR || m.q.qtype == 251 /* IXFR */) {
		return error_reply(out, cap, &m, true, limit, NX_DNS_REFUSED, NX_STAT_R_REFUSED);
	}
	if (m.q.qtype == NX_DNS_T_ANY && o->r->datagram) {
		struct nx_dns_reply_ctx ctx = {
			.id = m.id,
			.qflags = m.flags,
			.q = &m.q,
			.edns = m.edns.present,
			.do_bit = m.edns.do_bit,
			.max_size = NX_MIN(limit, cap),
		};
		int n = nx_dns_build_any_hinfo(out, cap, &ctx, 3600);
		nx_stat_inc(NX_STAT_R_ANY);
		return n > 0 ? n : 0;
	}
	struct nx_policy pol;
	policy_of(w, &pol);
	struct nx_policy_query pq;
	nx_policy_query_init(&pol, &pq, m.q.name, m.q.name_len, m.q.qtype, o->peer,
			     o->r->client_id);
	struct nx_filter_result fr;
	enum nx_filter_action act = nx_policy_decide(&pol, &pq, &fr);
	o->fr = fr;
	if (act == NX_FILTER_ACT_BLOCK || act == NX_FILTER_ACT_LOCAL) {
		struct nx_dns_reply_ctx ctx = {
			.id = m.id,
			.qflags = m.flags,
			.q = &m.q,
			.edns = m.edns.present,
			.do_bit = m.edns.do_bit,
			.max_size = NX_MIN(limit, cap),
		};
		int n;
		if (act == NX_FILTER_ACT_BLOCK && fr.rewrite != NX_FILTER_RW_NONE) {
			/* $dnsrewrite / hosts answer: the list's records, not the block response;
			 * not cached, as block answers are not (the next generation decides anew) */
			n = nx_policy_rewrite_answer(&pol, &pq, out, cap, &ctx, &fr);
			nx_stat_inc(NX_STAT_R_REWRITTEN);
		} else if (act == NX_FILTER_ACT_BLOCK) {
			n = nx_policy_block_answer(&pol, out, cap, &ctx, &fr);
			count_block(&fr, false);
		} else {
			uint8_t target[NX_DNS_NAME_MAX];
			size_t tl = 0;
			n = nx_policy_local_answer(&pol, out, cap, &ctx, target, &tl);
			if (tl > 0) {
				return local_chain(w, &pol, &m, o, target, tl, limit, out, cap);
			}
			nx_stat_inc(NX_STAT_R_LOCAL);
		}
		return n > 0 ? n : 0;
	}
	/* Allowed by a rule or an exception: the answer's targets are not checked either. */
	if (act == NX_FILTER_ACT_ALLOW) {
		pq.filtering = false;
	}
	o->check_answer = pq.filtering;
	if (w->cache) {
		struct nx_cache_key k;
		nx_cache_key_from_query(&m, &k);
		struct nx_dns_msg cm;
		struct nx_cache_hit hit;
		if (nx_cache_lookup(w->cache, &k, uv_now(&w->loop), 0, w->cbuf, sizeof(w->cbuf), &cm,
				    &hit) == 0) {
			struct nx_dns_reply_ctx ctx = {
				.id = m.id,
				.qflags = m.flags,
				.q = &m.q,
				.edns = m.edns.present,
				.do_bit = m.edns.do_bit,
				.max_size = NX_MIN(limit, cap),
			};
			o->cached = true;
			int bn = cname_block(&pol, &pq, w->cbuf, &cm, &ctx, out, cap, &o->fr, o->matched,
					     &o->matched_len);
			if (bn > 0) {
				return bn;
			}
			bool trunc = false;
			int n = nx_dns_relay(out, cap, w->cbuf, &cm, &ctx, 0, -1, NULL, &trunc);
			if (n < NX_DNS_HDR_LEN) {
				nx_stat_inc(NX_STAT_D_SEND);
				return 0;
			}
			out[3] |= 0x80; /* RA */
			nx_stat_inc(NX_STAT_R_CACHED);
			if (trunc) {
				nx_stat_inc(NX_STAT_R_TRUNCATED);
			}
			if (hit.prefetch) {
				prefetch(w, &m);
			}
			return n;
		}
	}
	return start_operation(w, &m, o, limit, true);
}

_Static_assert((int)NX_PROTO_UDP == (int)NX_QLOG_PROTO_UDP &&
		       (int)NX_PROTO_TCP == (int)NX_QLOG_PROTO_TCP &&
		       (int)NX_PROTO_DOT == (int)NX_QLOG_PROTO_DOT &&
		       (int)NX_PROTO_DOH == (int)NX_QLOG_PROTO_DOH,
	       "the query log stores enum nx_proto values");
_Static_assert(NX_STAT_RL_TCP == NX_STAT_RL_UDP + NX_PROTO_TCP &&
		       NX_STAT_RL_DOT == NX_STAT_RL_UDP + NX_PROTO_DOT &&
		       NX_STAT_RL_DOH == NX_STAT_RL_UDP + NX_PROTO_DOH,
	       "nxdns_rate_limited_total rows are in protocol order");
_Static_assert(NX_STAT_Q_TCP == NX_STAT_Q_UDP + NX_PROTO_TCP &&
		       NX_STAT_Q_DOT == NX_STAT_Q_UDP + NX_PROTO_DOT &&
		       NX_STAT_Q_DOH == NX_STAT_Q_UDP + NX_PROTO_DOH,
	       "nxdns_queries_total rows are in protocol order");

int nx_pipeline_query(void *ud, const struct nx_reply *r, const uint8_t *msg, size_t len,
		      bool truncated, uint8_t *out, size_t cap)
{
	struct nx_worker *w = ud;
	nx_stat_inc((enum nx_stat)(NX_STAT_Q_UDP + r->proto));
	struct origin o = {
		.r = r,
		.peer = (const struct sockaddr *)&r->peer,
	};
	nx_filter_result_clear(&o.fr);
	if (w->qlog || w->dnstap || w->pgsink) {
		/* arrival: the batch's clock (every datagram of it was queued before recvmmsg) */
		if (!w->clk_fresh) {
			w->clk_mono_us = nx_now_mono_us();
			w->clk_wall_ms = nx_now_wall_ms();
			w->clk_fresh = true;
		}
		o.t0_us = w->clk_mono_us;
		o.ts_ms = w->clk_wall_ms;
	}
	int n = handle(w, msg, len, truncated, &o, out, cap);
	if (n > 0 && (w->qlog || w->dnstap || w->pgsink)) {
		log_answer(w, r, (enum nx_proto)r->proto, o.peer, r->client_id, msg + NX_DNS_HDR_LEN,
			   o.have_q ? o.qname_len : 0, o.qtype, &o.fr, o.matched, o.matched_len,
			   o.cached, -1, o.t0_us, o.ts_ms, out, (size_t)n);
	}
	return n;
}

void nx_pipeline_shutdown(struct nx_worker *w)
{
	while (w->free_waiters) {
		struct waiter *x = w->free_waiters;
		w->free_waiters = x->next;
		nx_mem_free(NX_OWNER_query_pool, x, sizeof(*x));
	}
	while (w->free_pending) {
		struct pending *p = w->free_pending;
		w->free_pending = p->next_free;
		nx_mem_free(NX_OWNER_query_pool, p, sizeof(*p));
	}
	w->n_waiters_alloc = 0;
	w->n_pending_alloc = 0;
}

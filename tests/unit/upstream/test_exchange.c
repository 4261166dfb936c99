/*
 * Upstream engine on a real libuv loop against in-process fake servers on 127.0.0.1 (fakeup.c):
 * race and stagger, the one whole-operation deadline, failover on SERVFAIL/REFUSED, reply
 * validation (id, source, question), TC -> TCP retry, random ids and ports, max_ops, shutdown,
 * per-server outcome stats, and the ledger back to its start after every test.
 *
 * Every test ends with nx_upstream_shutdown + uv_run + nx_upstream_free and uv_loop_close()==0.
 * Times are loop times (uv_now) with generous bounds: the machine is shared.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/rand.h"
#include "base/stats.h"
#include "dns/msg.h"
#include "dns/wire.h"
#include "fakeup.h"
#include "upstream/impl.h"
#include "upstream/race.h"
#include "upstream/upstream.h"

#define N_FAKES 3
#define N_DONE 64
#define LONG_MS 5000 /* a deadline no test waits for */
#define SOCK_USES 4  /* exchange.c NX_UP_SOCK_USES: exchanges per source port */

struct tctx;

/* What one operation's callback saw. */
struct done {
	struct tctx *c;
	int calls;
	enum nx_up_result res;
	int server;
	uint64_t t0; /* uv_now at start */
	uint64_t at; /* uv_now at the (last) callback */
	bool parsed; /* parsed != NULL */
	uint16_t ancount;
	uint16_t flags;
	struct nx_dns_question pq; /* parsed question */
	size_t len;
	/* optional: start another operation from inside the callback */
	struct done *chain;
	int chain_rc;
};

struct tctx {
	uv_loop_t loop;
	uv_timer_t guard;
	bool guard_fired;
	struct nx_upstream *u;
	bool shut;
	struct fake fk[N_FAKES];
	int n_fk;
	struct nx_up_server srv[4];
	int stats[4];
	struct nx_dns_question q;
	int n_done;
	struct done d[N_DONE];
	struct nx_ledger_row led0[NX_OWNER__COUNT];
};

static unsigned g_test_seq; /* unique stats names per test (stats are process-wide) */

/* ---- helpers ---- */

static void on_done(void *ud, enum nx_up_result res, const uint8_t *msg, size_t len,
		    const struct nx_dns_msg *parsed, int server);

static struct nx_up_req mkreq(struct tctx *c, size_t n_srv, unsigned race, unsigned stagger,
			      unsigned timeout)
{
	struct nx_up_req r = {
	    .q = &c->q,
	    .servers = c->srv,
	    .n_servers = n_srv,
	    .race = race,
	    .stagger_ms = stagger,
	    .timeout_ms = timeout,
	};
	return r;
}

static int start_op(struct tctx *c, struct done *d, size_t n_srv, unsigned race, unsigned stagger,
		    unsigned timeout)
{
	struct nx_up_req r = mkreq(c, n_srv, race, stagger, timeout);
	uv_update_time(&c->loop);
	d->c = c;
	d->t0 = uv_now(&c->loop);
	return nx_upstream_start(c->u, &r, on_done, d);
}

static void on_done(void *ud, enum nx_up_result res, const uint8_t *msg, size_t len,
		    const struct nx_dns_msg *parsed, int server)
{
	struct done *d = ud;
	struct tctx *c = d->c;
	uv_update_time(&c->loop);
	d->calls++;
	d->res = res;
	d->server = server;
	d->at = uv_now(&c->loop);
	d->parsed = parsed != NULL;
	d->len = len;
	if (parsed) {
		d->ancount = parsed->ancount;
		d->flags = parsed->flags;
		d->pq = parsed->q;
	}
	(void)msg;
	c->n_done++;
	if (d->chain) {
		d->chain_rc = start_op(c, d->chain, 1, 1, 0, LONG_MS);
	}
}

static void on_guard(uv_timer_t *t)
{
	struct tctx *c = t->data;
	c->guard_fired = true;
}

/* Run the loop until `want` callbacks happened or max_ms passed. */
static void run_until(struct tctx *c, int want, unsigned max_ms)
{
	c->guard_fired = false;
	uv_timer_start(&c->guard, on_guard, max_ms, 0);
	while (c->n_done < want && !c->guard_fired) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
	uv_timer_stop(&c->guard);
}

static void run_for(struct tctx *c, unsigned ms)
{
	c->guard_fired = false;
	uv_timer_start(&c->guard, on_guard, ms, 0);
	while (!c->guard_fired) {
		uv_run(&c->loop, UV_RUN_ONCE);
	}
}

static struct fake *add_fake(struct tctx *c, enum fake_mode mode, bool with_tcp)
{
	assert_true(c->n_fk < N_FAKES);
	int i = c->n_fk;
	struct fake *f = &c->fk[i];
	assert_int_equal(fake_start(f, &c->loop, with_tcp), 0);
	c->n_fk++;
	f->mode = mode;
	char name[64];
	snprintf(name, sizeof(name), "test%u#%d", g_test_seq, i);
	c->stats[i] = nx_up_stats_index(name);
	assert_true(c->stats[i] >= 0);
	fake_server(f, &c->srv[i], c->stats[i]);
	return f;
}

/* Server slot i: a loopback port nothing listens on, with its own stats row. */
static void add_dead(struct tctx *c, int i)
{
	char name[64];
	snprintf(name, sizeof(name), "test%u#dead%d", g_test_seq, i);
	c->stats[i] = nx_up_stats_index(name);
	assert_true(c->stats[i] >= 0);
	fake_dead_server(&c->srv[i], c->stats[i]);
}

static struct nx_up_stats_row stats_of(const struct tctx *c, int i)
{
	struct nx_up_stats_row row;
	nx_up_stats_read(c->stats[i], &row);
	return row;
}

static uint64_t elapsed(const struct done *d)
{
	return d->at - d->t0;
}

static void shutdown_engine(struct tctx *c)
{
	if (!c->shut) {
		nx_upstream_shutdown(c->u);
		c->shut = true;
	}
}

/* ---- fixture ---- */

static int setup(void **state)
{
	struct tctx *c = test_calloc(1, sizeof(*c));
	if (!c || uv_loop_init(&c->loop) != 0) {
		return -1;
	}
	g_test_seq++;
	nx_ledger_read(c->led0);
	uv_timer_init(&c->loop, &c->guard);
	c->guard.data = c;
	if (nx_upstream_new(&c->loop, 64, &c->u) != 0) {
		return -1;
	}
	c->q.name_len = (uint8_t)nx_dns_name_from_text("www.example.com.", c->q.name);
	c->q.qtype = NX_DNS_T_A;
	c->q.qclass = NX_DNS_C_IN;
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct tctx *c = *state;
	shutdown_engine(c);
	for (int i = 0; i < c->n_fk; i++) {
		fake_close(&c->fk[i]);
	}
	uv_close((uv_handle_t *)&c->guard, NULL);
	/* Bounded: a handle the engine forgot would otherwise hang the test. */
	for (int i = 0; i < 3000 && uv_loop_alive(&c->loop); i++) {
		uv_run(&c->loop, UV_RUN_NOWAIT);
		if (uv_loop_alive(&c->loop)) {
			usleep(1000);
		}
	}
	bool alive = uv_loop_alive(&c->loop);
	if (alive) {
		print_error("loop still has active handles after nx_upstream_shutdown\n");
		return -1; /* leak the loop rather than free memory libuv still points to */
	}
	nx_upstream_free(c->u);
	int rc = uv_loop_close(&c->loop);
	struct nx_ledger_row now[NX_OWNER__COUNT];
	nx_ledger_read(now);
	const enum nx_owner owners[] = {NX_OWNER_exchange_pool, NX_OWNER_upstream_tcp,
					NX_OWNER_upstream_udp, NX_OWNER_worker_buffers};
	int bad = rc != 0;
	for (size_t i = 0; i < NX_ARRAY_LEN(owners); i++) {
		enum nx_owner o = owners[i];
		if (now[o].bytes != c->led0[o].bytes || now[o].count != c->led0[o].count) {
			print_error("ledger %s: %lld bytes / %lld allocs, was %lld / %lld\n",
				    now[o].name, (long long)now[o].bytes, (long long)now[o].count,
				    (long long)c->led0[o].bytes, (long long)c->led0[o].count);
			bad = 1;
		}
	}
	if (rc != 0) {
		print_error("uv_loop_close() = %d (%s)\n", rc, uv_strerror(rc));
	}
	test_free(c);
	return bad ? -1 : 0;
}

/* ---- single answer ---- */

static void test_single_answer(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	run_for(c, 50); /* nothing else may arrive */
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 0);
	assert_true(d->parsed);
	assert_true(d->len > NX_DNS_HDR_LEN);
	assert_int_equal(d->ancount, 1);
	assert_true(d->flags & NX_DNS_F_QR);
	assert_int_equal(NX_DNS_RCODE(d->flags), NX_DNS_NOERROR);
	assert_int_equal(d->pq.qtype, NX_DNS_T_A);
	assert_int_equal(d->pq.qclass, NX_DNS_C_IN);
	assert_true(nx_dns_name_eq(d->pq.name, d->pq.name_len, c->q.name, c->q.name_len));
	assert_int_equal(f->n_udp, 1);
	struct nx_up_stats_row r = stats_of(c, 0);
	assert_int_equal(r.outcome[NX_UP_O_ANSWER], 1);
	assert_int_equal(r.outcome[NX_UP_O_ERROR] + r.outcome[NX_UP_O_TIMEOUT] +
			     r.outcome[NX_UP_O_CANCELLED],
			 0);
	assert_int_equal(r.count, 1);
	/* one observation, seen by the top bucket (5 s) and counted in the sum */
	assert_int_equal(r.bucket[NX_UP_LATENCY_NBUCKETS - 1], 1);
	assert_true(r.sum_seconds >= 0 && r.sum_seconds < 2.0);
}

/* The question comparison is case-insensitive (upstreams may echo another case). */
static void test_answer_other_case(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_UPPER_CASE, false);
	struct done *d = &c->d[0];
	uint64_t wq = nx_stat_read(NX_STAT_UP_WRONG_QUESTION);
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_QUESTION), wq);
}

/* ---- race and stagger ---- */

static void test_race_fast_second_wins(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_ANSWER, false);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	f0->delay_ms = 300;
	struct done *d = &c->d[0];
	uint64_t late0 = nx_stat_read(NX_STAT_UP_LATE), wid0 = nx_stat_read(NX_STAT_UP_WRONG_ID);
	assert_int_equal(start_op(c, d, 2, 2, 20, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 1);
	assert_true(elapsed(d) >= 15); /* server 1 was asked after the stagger */
	assert_true(elapsed(d) < 250); /* ... and did not wait for server 0 */
	assert_int_equal(f0->n_udp, 1);
	assert_int_equal(f1->n_udp, 1);
	struct nx_up_stats_row r0 = stats_of(c, 0), r1 = stats_of(c, 1);
	assert_int_equal(r0.outcome[NX_UP_O_CANCELLED], 1);
	assert_int_equal(r0.outcome[NX_UP_O_ANSWER], 0);
	assert_int_equal(r0.count, 0);
	assert_int_equal(r1.outcome[NX_UP_O_ANSWER], 1);
	assert_int_equal(r1.count, 1);
	/* server 0's late answer (300 ms) must not produce a second callback; it reaches the
	 * pooled socket and is counted as late, not as a spoofing guess */
	run_for(c, 350);
	assert_int_equal(d->calls, 1);
	assert_int_equal(nx_stat_read(NX_STAT_UP_LATE) - late0, 1);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_ID) - wid0, 0);
}

/* race 1: only server 0 is asked while it has not failed; the deadline ends it. */
static void test_race1_asks_one_server(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_NEVER, false);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 1, 20, 250), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_TIMEOUT);
	assert_int_equal(d->server, -1);
	assert_int_equal(f0->n_udp, 1);
	assert_int_equal(f1->n_udp, 0);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_TIMEOUT], 1);
	struct nx_up_stats_row r1 = stats_of(c, 1);
	for (int o = 0; o < NX_UP_O__COUNT; o++) {
		assert_int_equal(r1.outcome[o], 0);
	}
}

/* race 0 is clamped to 1 (never "no attempt at all"). */
static void test_race0_clamped(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_ANSWER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 0, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
}

/* SERVFAIL, then REFUSED: each moves on at once (long before the 1 s stagger). */
static void test_failover_servfail_refused(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_RCODE, false);
	struct fake *f1 = add_fake(c, FAKE_RCODE, false);
	struct fake *f2 = add_fake(c, FAKE_ANSWER, false);
	f0->rcode = NX_DNS_SERVFAIL;
	f1->rcode = NX_DNS_REFUSED;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 3, 1, 1000, 3000), 0);
	run_until(c, 1, 4000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 2);
	assert_true(elapsed(d) < 500);
	assert_int_equal(f0->n_udp, 1);
	assert_int_equal(f1->n_udp, 1);
	assert_int_equal(f2->n_udp, 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ERROR], 1);
	assert_int_equal(stats_of(c, 1).outcome[NX_UP_O_ERROR], 1);
	assert_int_equal(stats_of(c, 2).outcome[NX_UP_O_ANSWER], 1);
}

/* NXDOMAIN is an answer, not a failure. */
static void test_nxdomain_is_answer(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_RCODE, false);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	f0->rcode = NX_DNS_NXDOMAIN;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 1, 1000, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 0);
	assert_int_equal(NX_DNS_RCODE(d->flags), NX_DNS_NXDOMAIN);
	assert_int_equal(f1->n_udp, 0);
}

static void test_all_fail(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_RCODE, false);
	struct fake *f1 = add_fake(c, FAKE_RCODE, false);
	f0->rcode = NX_DNS_SERVFAIL;
	f1->rcode = NX_DNS_REFUSED;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 2, 20, 2000), 0);
	run_until(c, 1, 3000);
	run_for(c, 30);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_FAILED);
	assert_int_equal(d->server, -1);
	assert_false(d->parsed);
	assert_true(elapsed(d) < 1000); /* long before the deadline */
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ERROR], 1);
	assert_int_equal(stats_of(c, 1).outcome[NX_UP_O_ERROR], 1);
}

/* ---- the one deadline ---- */

static void test_deadline(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_NEVER, false);
	struct fake *f1 = add_fake(c, FAKE_NEVER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 2, 20, 200), 0);
	run_until(c, 1, 2000);
	run_for(c, 50);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_TIMEOUT);
	assert_int_equal(d->server, -1);
	assert_false(d->parsed);
	assert_true(elapsed(d) >= 200);
	assert_true(elapsed(d) <= 600);
	assert_int_equal(f0->n_udp, 1);
	assert_int_equal(f1->n_udp, 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_TIMEOUT], 1);
	assert_int_equal(stats_of(c, 1).outcome[NX_UP_O_TIMEOUT], 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_CANCELLED], 0);
}

/* A port nothing listens on: the ICMP error normally fails it at once (connected sockets); the
 * deadline bounds it either way and the callback comes once. */
static void test_dead_port_bounded(void **state)
{
	struct tctx *c = *state;
	add_dead(c, 0);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 200), 0);
	run_until(c, 1, 2000);
	run_for(c, 30);
	assert_int_equal(d->calls, 1);
	assert_true(d->res == NX_UP_TIMEOUT || d->res == NX_UP_FAILED);
	assert_int_equal(d->server, -1);
	assert_true(elapsed(d) <= 600);
}

/* ---- retransmission ---- */

/*
 * The first datagram is lost (the fake drops it): the query goes again, same id and port, after
 * the server's retransmission timeout (400 ms before any answer), and the answer to the copy
 * completes the operation well inside the deadline.
 */
static void test_lost_datagram_resent(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER_RESENT, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 3000), 0);
	run_until(c, 1, 5000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 0);
	assert_int_equal(f->n_udp, 2);
	assert_int_equal(f->ids[1], f->ids[0]);
	assert_int_equal(f->sports[1], f->sports[0]);
	assert_true(elapsed(d) >= NX_UP_RTO_INITIAL_MS);
	assert_true(elapsed(d) < 3000);
	struct nx_up_stats_row r = stats_of(c, 0);
	assert_int_equal(r.resends, 1);
	assert_int_equal(r.outcome[NX_UP_O_ANSWER], 1);
	assert_int_equal(r.outcome[NX_UP_O_TIMEOUT], 0);
	/* Karn: no sample from a re-sent query; the doubled timeout holds until a clean one */
	assert_int_equal(r.rto_ms, 2 * NX_UP_RTO_INITIAL_MS);
	f->mode = FAKE_ANSWER;
	struct done *d2 = &c->d[1];
	assert_int_equal(start_op(c, d2, 1, 1, 20, 3000), 0);
	run_until(c, 2, 5000);
	assert_int_equal(d2->res, NX_UP_ANSWER);
	assert_int_equal(f->n_udp, 3);
	r = stats_of(c, 0);
	assert_int_equal(r.resends, 1);
	/* the clean answer ended the backoff (3 x its round trip, so a loopback one is far below) */
	assert_true(r.rto_ms < 2 * NX_UP_RTO_INITIAL_MS);
}

/* A silent server: two re-sends (timeout 400 ms, then 800), then the deadline, nothing more. */
static void test_resends_bounded(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_NEVER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 3000), 0);
	run_until(c, 1, 6000);
	run_for(c, 50);
	assert_int_equal(d->res, NX_UP_TIMEOUT);
	assert_int_equal(f->n_udp, 1 + NX_RACE_RESENDS);
	for (unsigned i = 1; i < f->n_udp; i++) {
		assert_int_equal(f->ids[i], f->ids[0]);
		assert_int_equal(f->sports[i], f->sports[0]);
	}
	assert_int_equal(stats_of(c, 0).resends, NX_RACE_RESENDS);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_TIMEOUT], 1);
	/* backed off twice: 400 -> 800 -> 1600 for the next query */
	assert_int_equal(stats_of(c, 0).rto_ms, 4 * NX_UP_RTO_INITIAL_MS);
}

/*
 * A silent server with several queries waiting gets one re-send per its timeout, not one per
 * query: 4 queries at once, re-sends at 400 ms and 1200 ms (timeout doubled each time), none
 * at 2800 (after the 2 s deadline). Without the pacing it would get 8 (2 per query).
 */
static void test_resends_paced_for_silent_server(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_NEVER, false);
	enum { N = 4 };
	for (int i = 0; i < N; i++) {
		assert_int_equal(start_op(c, &c->d[i], 1, 1, 20, 2000), 0);
	}
	run_until(c, N, 5000);
	run_for(c, 50);
	for (int i = 0; i < N; i++) {
		assert_int_equal(c->d[i].res, NX_UP_TIMEOUT);
	}
	assert_int_equal(f->n_udp, N + 2);
	assert_int_equal(stats_of(c, 0).resends, 2);
	assert_int_equal(stats_of(c, 0).rto_ms, 4 * NX_UP_RTO_INITIAL_MS);
}

/*
 * A lost datagram while the server answers the queries sent after it: it was lost, not the
 * server silent, so it is re-sent at its timeout without pacing and without backing the
 * server's timeout off (the answers to the others set it: the floor on loopback).
 */
static void test_resend_after_loss_not_paced(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_DROP_FIRST, false);
	assert_int_equal(start_op(c, &c->d[0], 1, 1, 20, 3000), 0);
	run_for(c, 5);
	assert_int_equal(start_op(c, &c->d[1], 1, 1, 20, 3000), 0);
	run_until(c, 2, 5000);
	assert_int_equal(c->d[1].res, NX_UP_ANSWER);
	assert_int_equal(c->d[0].res, NX_UP_ANSWER);
	assert_true(elapsed(&c->d[0]) >= NX_UP_RTO_INITIAL_MS);
	assert_int_equal(f->n_udp, 3);
	struct nx_up_stats_row r = stats_of(c, 0);
	assert_int_equal(r.resends, 1);
	assert_true(r.rto_ms < 2 * NX_UP_RTO_INITIAL_MS); /* not doubled by the re-send */
}

/* ---- reply validation ---- */

static void test_wrong_id_ignored(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_WRONG_ID_FIRST, false);
	uint64_t before = nx_stat_read(NX_STAT_UP_WRONG_ID);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 0);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_ID) - before, 1);
}

/* A spoof alone is never accepted. */
static void test_wrong_id_only_times_out(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_WRONG_ID_ONLY, false);
	uint64_t before = nx_stat_read(NX_STAT_UP_WRONG_ID);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 150), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_TIMEOUT);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_ID) - before, 1);
}

static void test_wrong_source_ignored(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_WRONG_SOURCE_FIRST, false);
	uint64_t before = nx_stat_read(NX_STAT_UP_WRONG_SOURCE);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	/* The sockets are connect()ed to the server: the kernel drops the other socket's datagram
	 * before nxdns sees it (the userland source check stays as a second line). */
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_SOURCE) - before, 0);
	assert_true(elapsed(d) >= 5); /* the genuine reply came 10 ms after the spoof */
}

static void test_wrong_question_ignored(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_WRONG_QUESTION_FIRST, false);
	uint64_t before = nx_stat_read(NX_STAT_UP_WRONG_QUESTION);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_true(nx_dns_name_eq(d->pq.name, d->pq.name_len, c->q.name, c->q.name_len));
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_QUESTION) - before, 1);
}

/* ---- TC -> TCP ---- */

static void test_tc_then_tcp(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_TC, true);
	f->tcp_mode = FAKE_TCP_ANSWER;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 0);
	assert_int_equal(d->ancount, 1);
	assert_false(d->flags & NX_DNS_F_TC);
	assert_int_equal(f->n_udp, 1);
	assert_int_equal(f->n_tcp, 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ANSWER], 1);
}

/* The TCP answer arrives in pieces (1 byte of the length prefix, then the rest). */
static void test_tc_then_tcp_split(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_TC, true);
	f->tcp_mode = FAKE_TCP_SPLIT;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->ancount, 1);
	assert_int_equal(f->n_tcp, 1);
}

/* The deadline covers the TCP retry; the TCP buffer is charged while it lives. */
static void test_tc_tcp_silent_deadline(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_TC, true);
	f->tcp_mode = FAKE_TCP_NEVER;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 300), 0);
	run_for(c, 100);
	struct nx_ledger_row mid[NX_OWNER__COUNT];
	nx_ledger_read(mid);
	assert_int_equal(mid[NX_OWNER_upstream_tcp].count,
			 c->led0[NX_OWNER_upstream_tcp].count + 1);
	assert_true(mid[NX_OWNER_upstream_tcp].bytes > c->led0[NX_OWNER_upstream_tcp].bytes);
	assert_int_equal(f->n_tcp, 1);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_TIMEOUT);
	assert_true(elapsed(d) >= 300);
	assert_true(elapsed(d) <= 700);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_TIMEOUT], 1);
}

/* TC but nobody listens on TCP: the attempt fails and the next server is asked at once. */
static void test_tc_tcp_refused_fails_over(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_TC, false);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 1, 1000, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 1);
	assert_true(elapsed(d) < 500);
	assert_int_equal(f1->n_udp, 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ERROR], 1);
}

/*
 * A TCP reply with the wrong id: over TCP nothing else can arrive on that connection (reading
 * stopped), so the attempt has failed and the next server should be asked at once, as for a
 * TCP reply with the wrong question.
 */
static void test_tc_tcp_wrong_id_fails_over(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_TC, true);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	f0->tcp_mode = FAKE_TCP_WRONG_ID;
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 1, 1000, 800), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(f0->n_tcp, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 1);
	assert_true(elapsed(d) < 500);
	assert_int_equal(f1->n_udp, 1);
}

/* ---- randomness ---- */

static int distinct_u16(const uint16_t *v, unsigned n)
{
	int d = 0;
	for (unsigned i = 0; i < n; i++) {
		bool seen = false;
		for (unsigned j = 0; j < i && !seen; j++) {
			seen = v[j] == v[i];
		}
		d += !seen;
	}
	return d;
}

/* How often the most used value in v[0..n) occurs. */
static unsigned max_repeat_u16(const uint16_t *v, unsigned n)
{
	unsigned best = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned k = 0;
		for (unsigned j = 0; j < n; j++) {
			k += v[j] == v[i];
		}
		best = k > best ? k : best;
	}
	return best;
}

/*
 * Concurrent exchanges: random ids, random source ports >= 1024, none carrying more than
 * NX_UP_SOCK_USES (4) exchanges (open sockets cannot share a port, so this holds exactly).
 */
static void test_random_ids_and_ports(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	enum { N = 50 };
	for (int i = 0; i < N; i++) {
		assert_int_equal(start_op(c, &c->d[i], 1, 1, 20, 2000), 0);
	}
	run_until(c, N, 4000);
	assert_int_equal(c->n_done, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(c->d[i].calls, 1);
		assert_int_equal(c->d[i].res, NX_UP_ANSWER);
	}
	assert_int_equal(f->n_udp, N);
	/* 50 draws from 2^16 ids: a handful of repeats at most */
	int ids = distinct_u16(f->ids, N), ports = distinct_u16(f->sports, N);
	assert_true(ids >= N - 5);
	/* Started in one loop turn: a socket per 4 of them */
	assert_true(ports >= (N + SOCK_USES - 1) / SOCK_USES);
	assert_true(max_repeat_u16(f->sports, N) <= SOCK_USES);
	for (int i = 0; i < N; i++) {
		assert_true(f->sports[i] >= 1024);
		/* ids are unique on a socket: no (port, id) pair repeats */
		for (int j = 0; j < i; j++) {
			assert_false(f->sports[j] == f->sports[i] && f->ids[j] == f->ids[i]);
		}
	}
}

/*
 * Sequential exchanges: a socket retires after 4 exchanges, so the port changes at least every
 * fourth exchange. (A closed port may be drawn again later, a 1-in-64512 chance per socket, so
 * the distinct count allows a few such repeats.)
 */
static void test_ports_rotate(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	enum { N = 120 };
	static struct done d[N];
	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++) {
		assert_int_equal(start_op(c, &d[i], 1, 1, 20, 2000), 0);
		run_until(c, i + 1, 2000);
		assert_int_equal(d[i].res, NX_UP_ANSWER);
	}
	assert_int_equal(f->n_udp, N);
	assert_true(distinct_u16(f->sports, N) >= N / SOCK_USES - 3);
	unsigned run = 1;
	for (int i = 1; i < N; i++) {
		run = f->sports[i] == f->sports[i - 1] ? run + 1 : 1;
		assert_true(run <= SOCK_USES);
	}
}

/*
 * A server whose port is closed answers with ICMP port unreachable; the connected socket sees
 * it (ECONNREFUSED) and the attempt fails at once: the next server is asked without waiting
 * for the stagger, and the dead one is counted as an error, not a timeout.
 */
static void test_refused_port_fails_over_at_once(void **state)
{
	struct tctx *c = *state;
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	c->srv[1] = c->srv[0];
	c->stats[1] = c->stats[0];
	add_dead(c, 0);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 1, 1000, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 1);
	assert_true(elapsed(d) < 500); /* not after the 1000 ms stagger */
	assert_int_equal(f1->n_udp, 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ERROR], 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_TIMEOUT], 0);
}

/*
 * A dead server among healthy ones in the same loop turn: its operation fails alone (at once,
 * by ICMP), the healthy ones are sent and answered.
 */
static void test_dead_server_fails_alone(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	struct nx_up_server bad;
	fake_dead_server(&bad, c->stats[0]);
	struct nx_up_req rb = mkreq(c, 1, 1, 20, 2000);
	rb.servers = &bad;
	struct nx_up_req rg = mkreq(c, 1, 1, 20, 2000);
	uv_update_time(&c->loop);
	c->d[0].c = c->d[1].c = c->d[2].c = c;
	c->d[1].t0 = uv_now(&c->loop);
	assert_int_equal(nx_upstream_start(c->u, &rg, on_done, &c->d[0]), 0);
	assert_int_equal(nx_upstream_start(c->u, &rb, on_done, &c->d[1]), 0);
	assert_int_equal(nx_upstream_start(c->u, &rg, on_done, &c->d[2]), 0);
	run_until(c, 3, 3000);
	assert_int_equal(c->d[0].res, NX_UP_ANSWER);
	assert_int_equal(c->d[1].res, NX_UP_FAILED);
	assert_true(elapsed(&c->d[1]) < 1000); /* by ICMP, not at the 2 s deadline */
	assert_int_equal(c->d[2].res, NX_UP_ANSWER);
	assert_int_equal(f->n_udp, 2);
}

/* A query still queued when its operation ends (deadline 0) is never sent. */
static void test_queued_send_dropped_when_op_ends(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 0), 0);
	/* (not run_until: the deadline fires in the timer phase, before the loop would block) */
	run_for(c, 100);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_TIMEOUT);
	assert_int_equal(f->n_udp, 0);
}

/* ---- max_ops, slot reuse, shutdown ---- */

static void test_max_ops(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_NEVER, false);
	nx_upstream_set_max_ops(c->u, 2);
	assert_int_equal(start_op(c, &c->d[0], 1, 1, 20, LONG_MS), 0);
	assert_int_equal(start_op(c, &c->d[1], 1, 1, 20, LONG_MS), 0);
	assert_int_equal(start_op(c, &c->d[2], 1, 1, 20, LONG_MS), NX_ENOSLOT);
	run_for(c, 50);
	assert_int_equal(c->d[0].calls + c->d[1].calls + c->d[2].calls, 0);
	nx_upstream_set_max_ops(c->u, 3);
	assert_int_equal(start_op(c, &c->d[3], 1, 1, 20, LONG_MS), 0);
	shutdown_engine(c);
	run_for(c, 20);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(c->d[i].calls, i == 2 ? 0 : 1);
		if (i != 2) {
			assert_int_equal(c->d[i].res, NX_UP_FAILED);
			assert_int_equal(c->d[i].server, -1);
		}
	}
}

static void test_no_servers(void **state)
{
	struct tctx *c = *state;
	assert_int_equal(start_op(c, &c->d[0], 0, 1, 20, 100), NX_ENOSLOT);
	run_for(c, 20);
	assert_int_equal(c->d[0].calls, 0);
}

/* Operations are reused: many sequential exchanges keep the pool at one operation. */
static void test_ops_reused(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_ANSWER, false);
	struct nx_ledger_row after1[NX_OWNER__COUNT], after20[NX_OWNER__COUNT];
	assert_int_equal(start_op(c, &c->d[0], 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	run_for(c, 5);
	nx_ledger_read(after1);
	for (int i = 1; i < 20; i++) {
		assert_int_equal(start_op(c, &c->d[i], 1, 1, 20, 1000), 0);
		run_until(c, i + 1, 2000);
		run_for(c, 2);
		assert_int_equal(c->d[i].res, NX_UP_ANSWER);
	}
	nx_ledger_read(after20);
	assert_int_equal(after20[NX_OWNER_exchange_pool].count,
			 after1[NX_OWNER_exchange_pool].count);
	assert_int_equal(after20[NX_OWNER_exchange_pool].bytes,
			 after1[NX_OWNER_exchange_pool].bytes);
}

/*
 * The contract: NX_ENOSLOT only "when max_ops are running". From inside a done callback the
 * finished operation no longer runs, so with max_ops 1 a new one must start.
 */
static void test_start_from_callback(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_ANSWER, false);
	nx_upstream_set_max_ops(c->u, 1);
	c->d[0].chain = &c->d[1];
	c->d[0].chain_rc = 12345;
	assert_int_equal(start_op(c, &c->d[0], 1, 1, 20, 1000), 0);
	run_until(c, 2, 2000);
	assert_int_equal(c->d[0].calls, 1);
	assert_int_equal(c->d[0].res, NX_UP_ANSWER);
	assert_int_equal(c->d[0].chain_rc, 0);
	assert_int_equal(c->d[1].calls, 1);
	assert_int_equal(c->d[1].res, NX_UP_ANSWER);
}

static void test_shutdown_fails_running(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_NEVER, false);
	assert_int_equal(start_op(c, &c->d[0], 1, 1, 20, LONG_MS), 0);
	assert_int_equal(start_op(c, &c->d[1], 1, 1, 20, LONG_MS), 0);
	run_for(c, 30);
	assert_int_equal(f->n_udp, 2);
	assert_int_equal(c->n_done, 0);
	shutdown_engine(c);
	run_for(c, 10);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(c->d[i].calls, 1);
		assert_int_equal(c->d[i].res, NX_UP_FAILED);
		assert_int_equal(c->d[i].server, -1);
	}
	/* after shutdown nothing starts */
	assert_int_equal(start_op(c, &c->d[2], 1, 1, 20, 100), NX_ENOSLOT);
	/* teardown: loop closes (0) and the ledger is back to its start */
}

/*
 * A done callback run by nx_upstream_shutdown starts another operation (a daemon falling back
 * to another group, say). An idle pooled operation whose timers shutdown already closed must
 * not be handed out: the start has to be refused.
 */
static void test_start_during_shutdown_refused(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_ANSWER, false); /* server 0: answers */
	add_fake(c, FAKE_NEVER, false);	 /* server 1: silent */
	/* op P (pool slot 0) asks server 0 and finishes; op Q (slot 1) asks server 1 and runs */
	assert_int_equal(start_op(c, &c->d[0], 1, 1, 20, LONG_MS), 0);
	struct nx_up_req r = mkreq(c, 1, 1, 20, LONG_MS);
	r.servers = &c->srv[1];
	c->d[1].c = c;
	assert_int_equal(nx_upstream_start(c->u, &r, on_done, &c->d[1]), 0);
	run_until(c, 1, 2000);
	run_for(c, 20); /* P's handles close: P is idle in the pool */
	assert_int_equal(c->d[0].res, NX_UP_ANSWER);
	c->d[1].chain = &c->d[2]; /* Q's FAILED callback starts a new op on server 0 */
	c->d[1].chain_rc = 12345;
	shutdown_engine(c);
	run_for(c, 100);
	assert_int_equal(c->d[1].calls, 1);
	assert_int_equal(c->d[1].res, NX_UP_FAILED);
	assert_int_equal(c->d[1].chain_rc, NX_ENOSLOT);
	assert_int_equal(c->d[2].calls, 0);
}

/* ---- EDNS fallback ---- */


static int start_op_do(struct tctx *c, struct done *d, size_t n_srv, unsigned race,
		       unsigned stagger, unsigned timeout)
{
	struct nx_up_req r = mkreq(c, n_srv, race, stagger, timeout);
	r.do_bit = true;
	uv_update_time(&c->loop);
	d->c = c;
	d->t0 = uv_now(&c->loop);
	return nx_upstream_start(c->u, &r, on_done, d);
}

/*
 * Unbound's fwd_no_edns: the server FORMERRs a query with EDNS (DO set) and answers the plain
 * one. The same attempt asks again without OPT at once (no timeout, no failover), and the
 * server is remembered: the next query goes plain from the start.
 */
static void check_edns_fallback(struct tctx *c, enum fake_mode mode)
{
	struct fake *f = add_fake(c, mode, false);
	uint64_t fb0 = nx_stat_read(NX_STAT_UP_EDNS_FALLBACK);
	struct done *d = &c->d[0];
	assert_int_equal(start_op_do(c, d, 1, 1, 20, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 0);
	assert_int_equal(d->ancount, 1);
	assert_int_equal(NX_DNS_RCODE(d->flags), NX_DNS_NOERROR);
	assert_true(elapsed(d) < NX_UP_RTO_INITIAL_MS); /* at once, not after a timeout */
	assert_int_equal(f->n_udp, 2);
	assert_true(f->edns[0]);
	assert_true(f->do_bit[0]);
	assert_false(f->edns[1]);
	assert_int_equal(nx_stat_read(NX_STAT_UP_EDNS_FALLBACK) - fb0, 1);
	/* remembered: plain at once, no second fallback */
	struct done *d2 = &c->d[1];
	assert_int_equal(start_op_do(c, d2, 1, 1, 20, 2000), 0);
	run_until(c, 2, 3000);
	assert_int_equal(d2->res, NX_UP_ANSWER);
	assert_int_equal(f->n_udp, 3);
	assert_false(f->edns[2]);
	assert_int_equal(nx_stat_read(NX_STAT_UP_EDNS_FALLBACK) - fb0, 1);
	struct nx_up_stats_row r = stats_of(c, 0);
	assert_int_equal(r.outcome[NX_UP_O_ANSWER], 2);
	assert_int_equal(r.outcome[NX_UP_O_ERROR], 0);
}

static void test_edns_fallback_formerr(void **state)
{
	check_edns_fallback(*state, FAKE_FORMERR_EDNS);
}

/* A legacy server's FORMERR carries no question section: still an EDNS refusal. */
static void test_edns_fallback_bare_formerr(void **state)
{
	check_edns_fallback(*state, FAKE_FORMERR_EDNS_BARE);
}

/*
 * Unbound's fwd_edns_probe: a server that FORMERRs both forms fails its attempt after the
 * plain try (the race moves on at once), and is not remembered as EDNS-lame: the next query
 * to it carries EDNS again.
 */
static void test_formerr_both_forms_fails_over(void **state)
{
	struct tctx *c = *state;
	struct fake *f0 = add_fake(c, FAKE_RCODE, false);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	f0->rcode = NX_DNS_FORMERR;
	struct done *d = &c->d[0];
	assert_int_equal(start_op_do(c, d, 2, 1, 1000, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 1);
	assert_true(elapsed(d) < 500); /* not after the 1000 ms stagger */
	assert_int_equal(f0->n_udp, 2);
	assert_true(f0->edns[0]);
	assert_false(f0->edns[1]);
	assert_int_equal(f1->n_udp, 1);
	assert_true(f1->edns[0]);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ERROR], 1);
	struct done *d2 = &c->d[1];
	assert_int_equal(start_op_do(c, d2, 1, 1, 20, 1000), 0);
	run_until(c, 2, 2000);
	assert_int_equal(d2->res, NX_UP_FAILED);
	assert_int_equal(f0->n_udp, 4);
	assert_true(f0->edns[2]);
}

/* ---- malformed answers from the server ---- */

/*
 * A reply with the right id (so from the server: the socket is connected) that does not parse
 * fails the attempt at once, so the next server is asked long before the stagger or the
 * deadline; counted by reason.
 */
static void check_malformed_fails_over(struct tctx *c, enum fake_mode mode, enum nx_stat reason)
{
	struct fake *f0 = add_fake(c, mode, false);
	struct fake *f1 = add_fake(c, FAKE_ANSWER, false);
	uint64_t n0 = nx_stat_read(reason);
	uint64_t wq0 = nx_stat_read(NX_STAT_UP_WRONG_QUESTION);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 2, 1, 1000, 3000), 0);
	run_until(c, 1, 4000);
	assert_int_equal(d->calls, 1);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(d->server, 1);
	assert_true(elapsed(d) < 500);
	assert_int_equal(f0->n_udp, 1);
	assert_int_equal(f1->n_udp, 1);
	assert_int_equal(nx_stat_read(reason) - n0, 1);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_QUESTION), wq0);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_ERROR], 1);
	assert_int_equal(stats_of(c, 0).outcome[NX_UP_O_TIMEOUT], 0);
}

static void test_malformed_fails_over(void **state)
{
	check_malformed_fails_over(*state, FAKE_MALFORMED, NX_STAT_UP_MALFORMED);
}

static void test_malformed_question_fails_over(void **state)
{
	check_malformed_fails_over(*state, FAKE_MALFORMED_QUESTION,
				   NX_STAT_UP_MALFORMED_QUESTION);
}

/* ---- 0x20 ---- */

static void set_long_name(struct tctx *c)
{
	/* Unbound's fwd_capsid_fallback name: 35 letters, 2^35 case patterns */
	c->q.name_len = (uint8_t)nx_dns_name_from_text(
	    "wwwabcdefghijklmnopqrstuvwxyzwww.example.com.", c->q.name);
}

/* Queries carry a fresh random case; a server echoing it exactly is accepted every time. */
static void test_caps_randomised_and_matched(void **state)
{
	struct tctx *c = *state;
	set_long_name(c);
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	uint64_t wc0 = nx_stat_read(NX_STAT_UP_WRONG_CASE);
	enum { N = 8 };
	for (int i = 0; i < N; i++) {
		assert_int_equal(start_op(c, &c->d[i], 1, 1, 20, 2000), 0);
		run_until(c, i + 1, 3000);
		assert_int_equal(c->d[i].res, NX_UP_ANSWER);
	}
	assert_int_equal(f->n_udp, N);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_CASE), wc0);
	unsigned upper = 0, distinct = 0;
	for (int i = 0; i < N; i++) {
		/* the same name, only letter case differs */
		assert_true(nx_dns_name_eq(f->qname[i], c->q.name_len, c->q.name, c->q.name_len));
		bool seen = false;
		for (int j = 0; j < i && !seen; j++) {
			seen = memcmp(f->qname[j], f->qname[i], c->q.name_len) == 0;
		}
		distinct += !seen;
		for (unsigned k = 0; k < c->q.name_len; k++) {
			upper += f->qname[i][k] >= 'A' && f->qname[i][k] <= 'Z';
		}
	}
	/* 8 draws of 35 random bits: equal patterns or no upper-case letter at all are 2^-30
	 * events; a fixed case would fail both */
	assert_int_equal(distinct, N);
	assert_true(upper > 0);
}

/*
 * Unbound's fwd_capsid_fallback: a server that answers with its own case. The mismatch is
 * counted, the query asked once more unrandomised (a new exchange), and the server gets plain
 * names from then on, so the query is answered and the next one goes plain at once.
 */
static void test_caps_fallback_for_case_changing_server(void **state)
{
	struct tctx *c = *state;
	set_long_name(c);
	struct fake *f = add_fake(c, FAKE_UPPER_CASE, false);
	uint64_t wc0 = nx_stat_read(NX_STAT_UP_WRONG_CASE);
	uint64_t cf0 = nx_stat_read(NX_STAT_UP_CAPS_FALLBACK);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 2000), 0);
	run_until(c, 1, 3000);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_true(elapsed(d) < NX_UP_RTO_INITIAL_MS); /* retries at once, no timeout */
	assert_int_equal(f->n_udp, 2);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_CASE) - wc0, 1);
	assert_int_equal(nx_stat_read(NX_STAT_UP_CAPS_FALLBACK) - cf0, 1);
	/* the retry carried the client's own case, under a new id */
	assert_memory_equal(f->qname[1], c->q.name, c->q.name_len);
	assert_int_not_equal(f->ids[1], f->ids[0]);
	struct done *d2 = &c->d[1];
	assert_int_equal(start_op(c, d2, 1, 1, 20, 2000), 0);
	run_until(c, 2, 3000);
	assert_int_equal(d2->res, NX_UP_ANSWER);
	assert_int_equal(f->n_udp, 3);
	assert_memory_equal(f->qname[2], c->q.name, c->q.name_len);
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_CASE) - wc0, 1);
}

/*
 * Queries randomised before the server was found not to preserve case: the first mismatch
 * pauses it and asks again; the others' mismatched answers are then as good as answers to
 * unrandomised queries and are accepted, not asked again (a slow server answering them one by
 * one would otherwise get each query twice).
 */
static void test_caps_mismatch_after_pause_accepted(void **state)
{
	struct tctx *c = *state;
	set_long_name(c);
	struct fake *f = add_fake(c, FAKE_UPPER_CASE, false);
	uint64_t wc0 = nx_stat_read(NX_STAT_UP_WRONG_CASE);
	uint64_t cf0 = nx_stat_read(NX_STAT_UP_CAPS_FALLBACK);
	enum { N = 3 };
	for (int i = 0; i < N; i++) {
		assert_int_equal(start_op(c, &c->d[i], 1, 1, 20, 2000), 0);
	}
	run_until(c, N, 3000);
	for (int i = 0; i < N; i++) {
		assert_int_equal(c->d[i].res, NX_UP_ANSWER);
	}
	assert_int_equal(f->n_udp, N + 1); /* one retry, the first mismatch's */
	assert_int_equal(nx_stat_read(NX_STAT_UP_WRONG_CASE) - wc0, N);
	assert_int_equal(nx_stat_read(NX_STAT_UP_CAPS_FALLBACK) - cf0, 1);
	assert_memory_equal(f->qname[N], c->q.name, c->q.name_len);
}

/* ---- source-port entropy ---- */

/*
 * The figure of src/upstream/README.md: N exchanges against one server on a real loop, 64 at a
 * time; the plug-in (Shannon) entropy of the source ports they were seen from, plus the 16 bits
 * of the random id, must reach 28 bits. The plug-in estimate over N samples is at most log2 N
 * (14.6 for 24k) and biased low, so this measures how spread the exchanges are over ports, not
 * a bound one could reach by opening one port per exchange (log2 64512 = 15.98).
 */
static void test_port_entropy(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER, false);
	uint32_t *hist = test_calloc(65536, sizeof(*hist));
	uint32_t *idh = test_calloc(65536, sizeof(*idh));
	assert_non_null(hist);
	assert_non_null(idh);
	f->port_hist = hist;
	enum { N = 24000, BATCH = 64 };
	assert_true(BATCH <= N_DONE);
	for (int done = 0; done < N; done += BATCH) {
		memset(c->d, 0, sizeof(c->d));
		c->n_done = 0;
		for (int i = 0; i < BATCH; i++) {
			assert_int_equal(start_op(c, &c->d[i], 1, 1, 20, 3000), 0);
		}
		run_until(c, BATCH, 5000);
		assert_int_equal(c->n_done, BATCH);
		for (int i = 0; i < BATCH; i++) {
			assert_int_equal(c->d[i].res, NX_UP_ANSWER);
		}
		for (unsigned i = 0; i < f->n_udp && i < FAKE_REC; i++) {
			idh[f->ids[i]]++;
		}
		f->n_udp = 0; /* the recorder keeps the first FAKE_REC: restart it per batch */
	}
	double h = 0;
	unsigned total = 0, ports = 0, max_use = 0, ids = 0;
	for (unsigned p = 0; p < 65536; p++) {
		total += hist[p];
	}
	for (unsigned p = 0; p < 65536; p++) {
		if (hist[p]) {
			double q = (double)hist[p] / total;
			h -= q * log2(q);
			ports++;
			max_use = hist[p] > max_use ? hist[p] : max_use;
		}
		ids += idh[p] != 0;
	}
	assert_true(total >= N); /* a re-send under load adds a datagram, never removes one */
	print_message("port entropy over %u exchanges: %u ports, at most %u exchanges on one, "
		      "H(port) = %.2f bits, id + port = %.2f bits\n",
		      total, ports, max_use, h, 16.0 + h);
	assert_true(16.0 + h >= 28.0);
	/* ids: 24000 draws from 65536 give ~20,000 distinct values; a narrower generator fewer */
	assert_true(ids >= 19000);
	f->port_hist = NULL;
	test_free(hist);
	test_free(idh);
}

/*
 * The socket bound per server (NX_UP_SOCKS_MAX = 512, 4 exchanges each): 2052 exchanges at
 * once fill it; the four past it fail at once, counted, and the rest run normally.
 */
static void test_socket_bound_refuses_counted(void **state)
{
	struct tctx *c = *state;
	add_fake(c, FAKE_NEVER, false);
	enum { N = 2052, FIT = 512 * SOCK_USES };
	struct done *d = test_calloc(N, sizeof(*d));
	assert_non_null(d);
	nx_upstream_set_max_ops(c->u, N);
	uint64_t lim0 = nx_stat_read(NX_STAT_UP_SOCK_LIMIT);
	for (int i = 0; i < N; i++) {
		assert_int_equal(start_op(c, &d[i], 1, 1, 20, 300), 0);
	}
	int failed = 0;
	for (int i = 0; i < N; i++) {
		failed += d[i].calls == 1 && d[i].res == NX_UP_FAILED;
	}
	assert_int_equal(failed, N - FIT);
	assert_int_equal(nx_stat_read(NX_STAT_UP_SOCK_LIMIT) - lim0, N - FIT);
	run_until(c, N, 3000);
	int timeouts = 0;
	for (int i = 0; i < N; i++) {
		assert_int_equal(d[i].calls, 1);
		timeouts += d[i].res == NX_UP_TIMEOUT;
	}
	assert_int_equal(timeouts, FIT);
	shutdown_engine(c); /* before d goes: nothing may call back into it */
	run_for(c, 20);
	test_free(d);
}

/* ---- the observer (nx_upstream_set_tap: dnstap's FORWARDER_* frames) ---- */

struct tapped {
	bool response, tcp;
	uint16_t id;
	size_t len;
	const struct nx_up_server *server;
	uint64_t sent_us;
};

static struct tapped g_tap[8];
static int g_n_tap;

static void on_tap(void *ud, const struct nx_up_tap_msg *m)
{
	assert_ptr_equal(ud, &g_n_tap);
	assert_true(m->len >= NX_DNS_HDR_LEN);
	if (g_n_tap < (int)NX_ARRAY_LEN(g_tap)) {
		g_tap[g_n_tap] = (struct tapped){m->response, m->tcp, (uint16_t)(m->msg[0] << 8 |
										 m->msg[1]),
						 m->len, m->server, m->sent_us};
	}
	g_n_tap++;
}

/* A lost first datagram: two queries seen (the re-send too, same id), one answer; a spoof
 * with a wrong id is not shown; unset, nothing is. */
static void test_tap_udp_resend_and_spoof(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_ANSWER_RESENT, false);
	g_n_tap = 0;
	nx_upstream_set_tap(c->u, on_tap, &g_n_tap);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 3000), 0);
	run_until(c, 1, 5000);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(f->n_udp, 2);
	assert_int_equal(g_n_tap, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(g_tap[i].response, i == 2);
		assert_false(g_tap[i].tcp);
		assert_int_equal(g_tap[i].id, f->ids[0]);
		assert_ptr_equal(g_tap[i].server, &c->srv[0]);
		assert_true(g_tap[i].sent_us > 0 && g_tap[i].sent_us == g_tap[0].sent_us);
	}
	assert_int_equal(g_tap[2].len, d->len);

	f->mode = FAKE_WRONG_ID_FIRST;
	g_n_tap = 0;
	assert_int_equal(start_op(c, &c->d[1], 1, 1, 20, 1000), 0);
	run_until(c, 2, 2000);
	assert_int_equal(c->d[1].res, NX_UP_ANSWER);
	assert_int_equal(g_n_tap, 2); /* the query and the real answer, not the spoof */
	assert_true(!g_tap[0].response && g_tap[1].response && g_tap[0].id == g_tap[1].id);

	nx_upstream_set_tap(c->u, NULL, NULL);
	g_n_tap = 0;
	assert_int_equal(start_op(c, &c->d[2], 1, 1, 20, 1000), 0);
	run_until(c, 3, 2000);
	assert_int_equal(c->d[2].res, NX_UP_ANSWER);
	assert_int_equal(g_n_tap, 0);
}

/* Truncated over UDP, then TCP: four messages, the last two marked tcp. */
static void test_tap_tc_then_tcp(void **state)
{
	struct tctx *c = *state;
	struct fake *f = add_fake(c, FAKE_TC, true);
	f->tcp_mode = FAKE_TCP_ANSWER;
	g_n_tap = 0;
	nx_upstream_set_tap(c->u, on_tap, &g_n_tap);
	struct done *d = &c->d[0];
	assert_int_equal(start_op(c, d, 1, 1, 20, 1000), 0);
	run_until(c, 1, 2000);
	assert_int_equal(d->res, NX_UP_ANSWER);
	assert_int_equal(g_n_tap, 4);
	const bool resp[] = {false, true, false, true}, tcp[] = {false, false, true, true};
	for (int i = 0; i < 4; i++) {
		assert_int_equal(g_tap[i].response, resp[i]);
		assert_int_equal(g_tap[i].tcp, tcp[i]);
		assert_int_equal(g_tap[i].id, g_tap[0].id);
	}
	assert_int_equal(g_tap[3].len, d->len);
}

int main(void)
{
	if (nx_rand_init() != 0) {
		return 1;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_single_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_other_case, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_race_fast_second_wins, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_race1_asks_one_server, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_race0_clamped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failover_servfail_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nxdomain_is_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_all_fail, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_port_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_id_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_id_only_times_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_source_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wrong_question_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tc_then_tcp, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tc_then_tcp_split, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tc_tcp_silent_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tc_tcp_refused_fails_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tc_tcp_wrong_id_fails_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_ids_and_ports, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ports_rotate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refused_port_fails_over_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_server_fails_alone, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_queued_send_dropped_when_op_ends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_datagram_resent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resends_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resends_paced_for_silent_server, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_after_loss_not_paced, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_max_ops, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_servers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ops_reused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_from_callback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shutdown_fails_running, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_during_shutdown_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_edns_fallback_formerr, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_edns_fallback_bare_formerr, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_formerr_both_forms_fails_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_fails_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed_question_fails_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_caps_randomised_and_matched, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_caps_mismatch_after_pause_accepted, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_caps_fallback_for_case_changing_server, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_port_entropy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_socket_bound_refuses_counted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tap_udp_resend_and_spoof, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tap_tc_then_tcp, setup, teardown),
	};
	return cmocka_run_group_tests_name("upstream_exchange", tests, NULL, NULL);
}

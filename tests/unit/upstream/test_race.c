/*
 * The race logic (upstream/race.c) driven deterministically: a fake transport records what the
 * race asks for, and the test moves the clock by hand. No sockets, no loop, no sleeping: the
 * stagger, the one deadline, failover, send errors, TCP after truncation, retransmission,
 * clamping and abort are checked to the millisecond.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "upstream/race.h"

enum ev_kind { EV_UDP, EV_TCP, EV_STOP, EV_DONE, EV_RESEND };

struct ev {
	enum ev_kind kind;
	int att, srv;
	int arg; /* EV_STOP: outcome; EV_DONE: result */
};

struct fx {
	struct nx_race r;
	struct ev ev[64];
	int n_ev;
	uint64_t armed;	     /* last arm() request */
	int fail_udp_srv[8]; /* send to these servers fails */
	int fail_tcp;	     /* send_tcp fails */
	uint32_t rto[8];     /* per server retransmission timeout, 0 = none (the default) */
	uint64_t hold[8];    /* per server: re-sends declined before this time */
	int done_calls;
};

static struct fx *fx_of(struct nx_race *r)
{
	return (struct fx *)((char *)r - offsetof(struct fx, r));
}

static void push(struct nx_race *r, enum ev_kind k, int att, int srv, int arg)
{
	struct fx *f = fx_of(r);
	assert_true(f->n_ev < 64);
	f->ev[f->n_ev++] = (struct ev){k, att, srv, arg};
}

static int io_udp(struct nx_race *r, int att, int srv)
{
	push(r, EV_UDP, att, srv, 0);
	return fx_of(r)->fail_udp_srv[srv] ? -1 : 0;
}

static uint64_t io_resend(struct nx_race *r, int att, int srv, uint64_t now)
{
	struct fx *f = fx_of(r);
	if (now < f->hold[srv]) {
		return f->hold[srv];
	}
	push(r, EV_RESEND, att, srv, 0);
	return 0;
}

static uint32_t io_rto(struct nx_race *r, int srv)
{
	return fx_of(r)->rto[srv];
}

static int io_tcp(struct nx_race *r, int att, int srv)
{
	push(r, EV_TCP, att, srv, 0);
	return fx_of(r)->fail_tcp ? -1 : 0;
}

static void io_stop(struct nx_race *r, int att, int srv, enum nx_up_outcome o)
{
	push(r, EV_STOP, att, srv, (int)o);
}

static void io_arm(struct nx_race *r, uint64_t at)
{
	fx_of(r)->armed = at;
}

static void io_done(struct nx_race *r, enum nx_up_result res, int att, int srv)
{
	fx_of(r)->done_calls++;
	push(r, EV_DONE, att, srv, (int)res);
}

static const struct nx_race_io IO = {
    .send = io_udp,
    .resend = io_resend,
    .rto = io_rto,
    .send_tcp = io_tcp,
    .stop = io_stop,
    .arm = io_arm,
    .done = io_done,
};

static int setup(void **state)
{
	struct fx *f = test_calloc(1, sizeof(*f));
	*state = f;
	return f ? 0 : -1;
}

static int teardown(void **state)
{
	test_free(*state);
	return 0;
}

/* Assert the events since *seen are exactly `want` (n of them). */
static void expect(struct fx *f, int *seen, const struct ev *want, int n)
{
	assert_int_equal(f->n_ev - *seen, n);
	for (int i = 0; i < n; i++) {
		const struct ev *e = &f->ev[*seen + i];
		assert_int_equal(e->kind, want[i].kind);
		assert_int_equal(e->srv, want[i].srv);
		assert_int_equal(e->arg, want[i].arg);
		if (want[i].att >= 0) {
			assert_int_equal(e->att, want[i].att);
		}
	}
	*seen += n;
}

/* The attempt index the race used for server srv (its latest UDP send). */
static int att_of(const struct fx *f, int srv)
{
	for (int i = f->n_ev - 1; i >= 0; i--) {
		if (f->ev[i].kind == EV_UDP && f->ev[i].srv == srv) {
			return f->ev[i].att;
		}
	}
	fail_msg("server %d was never asked", srv);
	return -1;
}

static void test_single_answer(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 1000, 1, 2, 100, 500);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 1500); /* one server: no stagger, only the deadline */
	nx_race_answer(&f->r, att_of(f, 0));
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_ANSWER}, {EV_DONE, -1, 0, NX_UP_ANSWER}}, 2);
	assert_int_equal(f->armed, UINT64_MAX);
	assert_false(f->r.running);
}

static void test_stagger_then_fast_second_wins(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 3, 2, 100, 1000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 100);
	nx_race_tick(&f->r, 99); /* early: nothing */
	assert_int_equal(f->n_ev, seen);
	assert_int_equal(f->armed, 100);
	nx_race_tick(&f->r, 100);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 1, 0}}, 1);
	assert_int_equal(f->armed, 1000); /* race full: only the deadline */
	assert_int_equal(nx_race_active(&f->r), 2);
	nx_race_answer(&f->r, att_of(f, 1));
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_CANCELLED},
			     {EV_STOP, -1, 1, NX_UP_O_ANSWER},
			     {EV_DONE, -1, 1, NX_UP_ANSWER}},
	       3);
	/* server 2 was never asked, and a late event changes nothing */
	nx_race_answer(&f->r, att_of(f, 0));
	nx_race_tick(&f->r, 5000);
	assert_int_equal(f->done_calls, 1);
	assert_int_equal(f->n_ev, seen);
}

static void test_failure_moves_on_at_once_and_restarts_stagger(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 3, 2, 100, 1000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	nx_race_failed(&f->r, att_of(f, 0), 40);
	expect(f, &seen, (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_ERROR}, {EV_UDP, -1, 1, 0}}, 2);
	assert_int_equal(f->armed, 140); /* the next stagger counts from the failover */
	nx_race_tick(&f->r, 140);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 2, 0}}, 1);
	assert_int_equal(f->armed, 1000);
}

static void test_deadline_is_one_for_the_whole_operation(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 2, 2, 100, 300);
	nx_race_tick(&f->r, 100);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}, {EV_UDP, -1, 1, 0}}, 2);
	/* truncation moves server 1 to TCP; the deadline does not move */
	nx_race_truncated(&f->r, att_of(f, 1), 250);
	expect(f, &seen, (struct ev[]){{EV_TCP, -1, 1, 0}}, 1);
	assert_int_equal(f->armed, 300);
	nx_race_tick(&f->r, 299);
	assert_int_equal(f->done_calls, 0);
	nx_race_tick(&f->r, 300);
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_TIMEOUT},
			     {EV_STOP, -1, 1, NX_UP_O_TIMEOUT},
			     {EV_DONE, -1, -1, NX_UP_TIMEOUT}},
	       3);
}

static void test_every_server_fails(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 2, 1, 100, 1000);
	nx_race_failed(&f->r, att_of(f, 0), 10);
	nx_race_failed(&f->r, att_of(f, 1), 20);
	expect(f, &seen,
	       (struct ev[]){{EV_UDP, -1, 0, 0},
			     {EV_STOP, -1, 0, NX_UP_O_ERROR},
			     {EV_UDP, -1, 1, 0},
			     {EV_STOP, -1, 1, NX_UP_O_ERROR},
			     {EV_DONE, -1, -1, NX_UP_FAILED}},
	       5);
	assert_int_equal(f->armed, UINT64_MAX);
}

static void test_send_errors_skip_servers_and_can_fail_at_start(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->fail_udp_srv[0] = 1;
	nx_race_start(&f->r, &IO, 0, 2, 1, 100, 1000);
	expect(
	    f, &seen,
	    (struct ev[]){{EV_UDP, -1, 0, 0}, {EV_STOP, -1, 0, NX_UP_O_ERROR}, {EV_UDP, -1, 1, 0}},
	    3);
	assert_true(f->r.running);
	/* every send fails: the race ends inside start */
	struct fx *g = test_calloc(1, sizeof(*g));
	g->fail_udp_srv[0] = g->fail_udp_srv[1] = 1;
	nx_race_start(&g->r, &IO, 0, 2, 2, 100, 1000);
	assert_int_equal(g->done_calls, 1);
	assert_int_equal(g->ev[g->n_ev - 1].kind, EV_DONE);
	assert_int_equal(g->ev[g->n_ev - 1].arg, NX_UP_FAILED);
	test_free(g);
}

static void test_truncation_then_tcp_answer_or_failover(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 2, 1, 100, 1000);
	int a0 = att_of(f, 0);
	nx_race_truncated(&f->r, a0, 5);
	expect(f, &seen, (struct ev[]){{EV_UDP, a0, 0, 0}, {EV_TCP, a0, 0, 0}}, 2);
	nx_race_truncated(&f->r, a0, 6); /* already on TCP: ignored */
	assert_int_equal(f->n_ev, seen);
	nx_race_answer(&f->r, a0);
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, a0, 0, NX_UP_O_ANSWER}, {EV_DONE, a0, 0, NX_UP_ANSWER}}, 2);

	/* a TCP retry that cannot start fails the attempt: the next server is asked */
	struct fx *g = test_calloc(1, sizeof(*g));
	g->fail_tcp = 1;
	int gs = 0;
	nx_race_start(&g->r, &IO, 0, 2, 1, 100, 1000);
	nx_race_truncated(&g->r, att_of(g, 0), 5);
	expect(g, &gs,
	       (struct ev[]){{EV_UDP, -1, 0, 0},
			     {EV_TCP, -1, 0, 0},
			     {EV_STOP, -1, 0, NX_UP_O_ERROR},
			     {EV_UDP, -1, 1, 0}},
	       4);
	test_free(g);
}

static void test_race_is_clamped(void **state)
{
	struct fx *f = *state;
	nx_race_start(&f->r, &IO, 0, 20, 0, 0, 1000); /* race 0 means 1 */
	nx_race_tick(&f->r, 0);
	nx_race_tick(&f->r, 1);
	assert_int_equal(nx_race_active(&f->r), 1);
	struct fx *g = test_calloc(1, sizeof(*g));
	nx_race_start(&g->r, &IO, 0, 20, 100, 0, 1000); /* stagger 0: all at once, up to 8 */
	for (uint64_t t = 0; t < 20; t++) {
		nx_race_tick(&g->r, t);
	}
	assert_int_equal(nx_race_active(&g->r), NX_UP_MAX_ATTEMPTS);
	test_free(g);
}

static void test_abort_cancels_everything(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 2, 2, 10, 1000);
	nx_race_tick(&f->r, 10);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}, {EV_UDP, -1, 1, 0}}, 2);
	nx_race_abort(&f->r);
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_CANCELLED},
			     {EV_STOP, -1, 1, NX_UP_O_CANCELLED},
			     {EV_DONE, -1, -1, NX_UP_FAILED}},
	       3);
	nx_race_abort(&f->r);
	assert_int_equal(f->done_calls, 1);
}

/* ---- retransmission ---- */

/* One silent server: the query goes again after the timeout, then after twice it, then no more. */
static void test_resend_doubles_then_stops(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 200;
	nx_race_start(&f->r, &IO, 1000, 1, 2, 100, 2000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	int a = att_of(f, 0);
	assert_int_equal(f->armed, 1200);
	nx_race_tick(&f->r, 1199);
	assert_int_equal(f->n_ev, seen);
	nx_race_tick(&f->r, 1200);
	expect(f, &seen, (struct ev[]){{EV_RESEND, a, 0, 0}}, 1);
	assert_int_equal(f->armed, 1600); /* 1200 + 2 x 200 */
	nx_race_tick(&f->r, 1600);
	expect(f, &seen, (struct ev[]){{EV_RESEND, a, 0, 0}}, 1);
	assert_int_equal(f->armed, 3000); /* NX_RACE_RESENDS spent: only the deadline */
	assert_int_equal(NX_RACE_RESENDS, 2);
	/* the answer to either copy wins, as the attempt's own */
	nx_race_answer(&f->r, a);
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, a, 0, NX_UP_O_ANSWER}, {EV_DONE, a, 0, NX_UP_ANSWER}}, 2);
}

/* A re-send never goes past the deadline, and a late tick sends once, not once per period. */
static void test_resend_within_deadline(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 400;
	nx_race_start(&f->r, &IO, 0, 1, 1, 100, 500);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 400);
	nx_race_tick(&f->r, 450); /* the loop ran late */
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 500); /* next re-send at 1250: after the deadline */
	nx_race_tick(&f->r, 500);
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_TIMEOUT}, {EV_DONE, -1, -1, NX_UP_TIMEOUT}},
	       2);
}

/* Each attempt keeps its own server's clock; TCP (after TC) and rto 0 never re-send. */
static void test_resend_per_attempt(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 300;
	f->rto[1] = 250;
	f->rto[2] = 0;
	nx_race_start(&f->r, &IO, 0, 3, 3, 100, 2000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	nx_race_tick(&f->r, 100);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 1, 0}}, 1);
	nx_race_tick(&f->r, 200);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 2, 0}}, 1);
	assert_int_equal(f->armed, 300); /* server 0's timeout */
	nx_race_tick(&f->r, 300);
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 350); /* server 1: 100 + 250 */
	nx_race_truncated(&f->r, att_of(f, 1), 340);
	expect(f, &seen, (struct ev[]){{EV_TCP, -1, 1, 0}}, 1);
	assert_int_equal(f->armed, 900); /* server 0 again at 300 + 600; 1 is on TCP, 2 has none */
	nx_race_tick(&f->r, 900);
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 2000);
	nx_race_answer(&f->r, att_of(f, 2));
	assert_int_equal(f->done_calls, 1);
}

/* A re-send and a staggered launch due in the same tick both happen. */
static void test_resend_and_stagger_same_tick(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 100;
	f->rto[1] = 300;
	nx_race_start(&f->r, &IO, 0, 2, 2, 100, 2000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 100);
	nx_race_tick(&f->r, 100);
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 0, 0}, {EV_UDP, -1, 1, 0}}, 2);
	assert_int_equal(f->armed, 300); /* server 0 again at 100 + 200 */
	nx_race_tick(&f->r, 300);
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 400); /* server 1 at 100 + 300 */
}

/* A failover launch gets a fresh timeout of its own server. */
static void test_resend_after_failover(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 200;
	f->rto[1] = 500;
	nx_race_start(&f->r, &IO, 0, 2, 1, 100, 3000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	nx_race_failed(&f->r, att_of(f, 0), 150);
	expect(f, &seen, (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_ERROR}, {EV_UDP, -1, 1, 0}}, 2);
	assert_int_equal(f->armed, 650);
	nx_race_tick(&f->r, 650);
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 1, 0}}, 1);
	assert_int_equal(f->armed, 1650);
}

/*
 * A re-send the engine declines (its server is paced) waits until the time it names, without
 * using the budget or doubling the timeout; it never goes past the deadline.
 */
static void test_resend_declined_waits(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 200;
	f->hold[0] = 700;
	nx_race_start(&f->r, &IO, 0, 1, 1, 100, 2000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 200);
	nx_race_tick(&f->r, 200);
	assert_int_equal(f->n_ev, seen); /* declined */
	assert_int_equal(f->armed, 700);
	nx_race_tick(&f->r, 700);
	expect(f, &seen, (struct ev[]){{EV_RESEND, -1, 0, 0}}, 1);
	assert_int_equal(f->armed, 1100); /* 700 + 2 x 200: the first doubling */
	f->hold[0] = 5000;                /* past the deadline */
	nx_race_tick(&f->r, 1100);
	assert_int_equal(f->n_ev, seen);
	assert_int_equal(f->armed, 2000);
	nx_race_tick(&f->r, 2000);
	expect(f, &seen,
	       (struct ev[]){{EV_STOP, -1, 0, NX_UP_O_TIMEOUT}, {EV_DONE, -1, -1, NX_UP_TIMEOUT}},
	       2);
}

/*
 * A retry re-asks the same server in the same attempt slot (no stop, no new server, the stagger
 * of the other servers unchanged), with the re-send clock and budget started afresh.
 */
static void test_retry_same_server_fresh_resend_clock(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	f->rto[0] = 200;
	nx_race_start(&f->r, &IO, 0, 2, 2, 500, 3000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	int a = att_of(f, 0);
	nx_race_tick(&f->r, 200);
	expect(f, &seen, (struct ev[]){{EV_RESEND, a, 0, 0}}, 1);
	assert_int_equal(f->armed, 500); /* the stagger for server 1 comes before 200 + 400 */
	nx_race_retry(&f->r, a, 300);
	expect(f, &seen, (struct ev[]){{EV_UDP, a, 0, 0}}, 1);
	assert_int_equal(nx_race_active(&f->r), 1);
	assert_int_equal(f->armed, 500); /* the stagger still first: 300 + 200 = 500 */
	nx_race_tick(&f->r, 500);
	/* the retried query's own first re-send (timeout 200 again, not 400) and server 1 */
	expect(f, &seen, (struct ev[]){{EV_RESEND, a, 0, 0}, {EV_UDP, -1, 1, 0}}, 2);
	nx_race_answer(&f->r, a);
	assert_int_equal(f->done_calls, 1);
}

/* Retries are bounded: the one past NX_RACE_RETRIES fails the attempt and moves on. */
static void test_retry_bounded(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 2, 1, 1000, 3000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	int a = att_of(f, 0);
	for (int i = 0; i < NX_RACE_RETRIES; i++) {
		nx_race_retry(&f->r, a, 10 + (uint64_t)i);
		expect(f, &seen, (struct ev[]){{EV_UDP, a, 0, 0}}, 1);
	}
	nx_race_retry(&f->r, a, 20);
	expect(f, &seen, (struct ev[]){{EV_STOP, a, 0, NX_UP_O_ERROR}, {EV_UDP, -1, 1, 0}}, 2);
	/* a fresh attempt on server 1 has its own budget */
	int b = att_of(f, 1);
	nx_race_retry(&f->r, b, 30);
	expect(f, &seen, (struct ev[]){{EV_UDP, b, 1, 0}}, 1);
	assert_int_equal(f->done_calls, 0);
}

/* A retry whose send fails is a failed attempt; a retry of a TCP or idle attempt is ignored. */
static void test_retry_send_fails_or_not_udp(void **state)
{
	struct fx *f = *state;
	int seen = 0;
	nx_race_start(&f->r, &IO, 0, 2, 1, 1000, 3000);
	expect(f, &seen, (struct ev[]){{EV_UDP, -1, 0, 0}}, 1);
	int a = att_of(f, 0);
	f->fail_udp_srv[0] = 1;
	nx_race_retry(&f->r, a, 10);
	expect(f, &seen,
	       (struct ev[]){{EV_UDP, a, 0, 0}, {EV_STOP, a, 0, NX_UP_O_ERROR}, {EV_UDP, -1, 1, 0}},
	       3);
	int b = att_of(f, 1);
	nx_race_truncated(&f->r, b, 20);
	expect(f, &seen, (struct ev[]){{EV_TCP, b, 1, 0}}, 1);
	nx_race_retry(&f->r, b, 30); /* over TCP: nothing */
	nx_race_retry(&f->r, a, 30); /* ended: nothing */
	assert_int_equal(f->n_ev, seen);
	nx_race_answer(&f->r, b);
	assert_int_equal(f->done_calls, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_single_answer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_doubles_then_stops, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_within_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_per_attempt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_after_failover, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_and_stagger_same_tick, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stagger_then_fast_second_wins, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failure_moves_on_at_once_and_restarts_stagger,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deadline_is_one_for_the_whole_operation, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_every_server_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_send_errors_skip_servers_and_can_fail_at_start,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncation_then_tcp_answer_or_failover, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_race_is_clamped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_abort_cancels_everything, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resend_declined_waits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retry_same_server_fresh_resend_clock, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_retry_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retry_send_fails_or_not_udp, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

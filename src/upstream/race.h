/*
 * The race, deadline and retry logic of one upstream operation, with no sockets, loop or clock
 * of its own: the engine (exchange.c) drives it with libuv time and real sockets, unit tests
 * drive it with a fake transport and a hand-moved clock (tests/unit/upstream/test_race.c).
 *
 * Rules: the first server is asked at once, the next every `stagger_ms` while fewer than `race`
 * attempts run; the first usable answer wins and every other attempt is stopped (cancelled); a
 * failed attempt (send error, unusable rcode, broken TCP) moves on to the next untried server at
 * once; a truncated UDP answer re-asks the same server over TCP in the same attempt; ONE
 * deadline, `timeout_ms` after the start, covers everything. When no attempt runs and no
 * server is left untried, the operation has failed.
 *
 * Retransmission: a UDP attempt that has heard nothing for its server's retransmission timeout
 * (io->rto, from that server's measured round trips) sends its query again, the same bytes to
 * the same server, and its timeout doubles; at most NX_RACE_RESENDS times per attempt, never
 * after the one deadline. The engine may decline a re-send and name a later time (io->resend:
 * a server that has answered nothing since gets one re-send per its own timeout, not one per
 * waiting query); the attempt then waits until that time, its budget and timeout unchanged.
 * A lost datagram then costs one timeout, not the whole deadline, and a client's own retry
 * (which joins the same operation) is not needed to recover it.
 *
 * Events come in through nx_race_* calls; effects go out through nx_race_io. Times are
 * milliseconds on the caller's monotonic clock. Threading: one race belongs to one thread; the
 * io callbacks run inside the nx_race_* call that caused them. The done callback is called
 * exactly once per started race, and may release the race (no field is touched after it).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "upstream/upstream.h"

#define NX_RACE_RESENDS 2 /* re-sends per UDP attempt */
/*
 * Retries per attempt: the same server asked again over UDP with another form of the query
 * (without EDNS after FORMERR/NOTIMP/BADVERS, without 0x20 case randomisation after a case
 * mismatch). One of each; more would let a broken server hold an attempt slot past any useful
 * point.
 */
#define NX_RACE_RETRIES 2

enum nx_race_att { NX_RACE_ATT_IDLE, NX_RACE_ATT_UDP, NX_RACE_ATT_TCP };

struct nx_race;

struct nx_race_io {
	/* Ask server `srv` as attempt `att`, over the server's own transport (the engine picks
	 * it: UDP, or a pooled TCP/DoT/DoH connection). 0, or < 0: the attempt failed at once. */
	int (*send)(struct nx_race *r, int att, int srv);
	/* Send attempt `att`'s query to its server again (UDP: same id, same socket) at `now`:
	 * 0 when it went (or was dropped for lack of room), else the time (> now) before which
	 * the server takes no re-send; the race asks again then. */
	uint64_t (*resend)(struct nx_race *r, int att, int srv, uint64_t now);
	/* Retransmission timeout for server `srv` in ms; 0: never re-send to it (a stream
	 * transport, which delivers or fails by itself). */
	uint32_t (*rto)(struct nx_race *r, int srv);
	/* Re-ask the attempt's server over TCP (after TC). 0, or < 0: the attempt failed. */
	int (*send_tcp)(struct nx_race *r, int att, int srv);
	/* Release an attempt's transport state; `o` is its outcome for the per-server stats. */
	void (*stop)(struct nx_race *r, int att, int srv, enum nx_up_outcome o);
	/* Wake the race (nx_race_tick) at `at_ms`; replaces the previous request. UINT64_MAX:
	 * no wake-up is needed. */
	void (*arm)(struct nx_race *r, uint64_t at_ms);
	/* The operation ended: the answer of attempt `att` (NX_UP_ANSWER), or -1. */
	void (*done)(struct nx_race *r, enum nx_up_result res, int att, int srv);
};

struct nx_race {
	const struct nx_race_io *io;
	bool running;
	uint8_t n_servers;
	uint8_t next_server; /* next server not yet tried */
	uint8_t race;	     /* attempts at once, 1..NX_UP_MAX_ATTEMPTS */
	uint32_t stagger_ms;
	uint64_t deadline_at;
	uint64_t stagger_at; /* next staggered launch, UINT64_MAX when none is due */
	uint8_t att_state[NX_UP_MAX_ATTEMPTS]; /* enum nx_race_att */
	uint8_t att_server[NX_UP_MAX_ATTEMPTS];
	uint8_t att_resends[NX_UP_MAX_ATTEMPTS];  /* re-sends so far */
	uint8_t att_retries[NX_UP_MAX_ATTEMPTS];  /* nx_race_retry calls so far */
	uint32_t att_rto[NX_UP_MAX_ATTEMPTS];	  /* current timeout, 0: no re-send */
	uint64_t att_resend_at[NX_UP_MAX_ATTEMPTS]; /* when the next re-send is due */
};

/* Start: asks the first server (and fails at once when every server fails to send). */
void nx_race_start(struct nx_race *r, const struct nx_race_io *io, uint64_t now, unsigned n_servers,
		   unsigned race, unsigned stagger_ms, unsigned timeout_ms);
/* The armed time has come (a spurious early call is harmless). */
void nx_race_tick(struct nx_race *r, uint64_t now);
/* A validated, usable answer for attempt `att`: it wins. */
void nx_race_answer(struct nx_race *r, int att);
/* Attempt `att` failed (error, unusable rcode or reply over TCP): the next server is asked. */
void nx_race_failed(struct nx_race *r, int att, uint64_t now);
/*
 * The server of UDP attempt `att` answered in a way that a new form of the query may fix
 * (FORMERR to EDNS, a 0x20 case mismatch): ask it again in the same attempt, through
 * io->send (the engine picks the new form, id and socket), with a fresh retransmission
 * timeout and re-send budget. Past NX_RACE_RETRIES, or when that send fails, the attempt
 * has failed (as nx_race_failed). The deadline is unchanged.
 */
void nx_race_retry(struct nx_race *r, int att, uint64_t now);
/* A truncated UDP answer for attempt `att`: the same server is asked over TCP. */
void nx_race_truncated(struct nx_race *r, int att, uint64_t now);
/* End a running race as NX_UP_FAILED (engine shutdown). */
void nx_race_abort(struct nx_race *r);

int nx_race_active(const struct nx_race *r);

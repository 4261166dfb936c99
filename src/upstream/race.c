#include "upstream/race.h"

#include "base/err.h"

#define NEVER UINT64_MAX

int nx_race_active(const struct nx_race *r)
{
	int n = 0;
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		n += r->att_state[i] != NX_RACE_ATT_IDLE;
	}
	return n;
}

/* When attempt i is due to re-send, NEVER if it is not (TCP, no timeout, spent). */
static uint64_t resend_due(const struct nx_race *r, int i)
{
	if (r->att_state[i] != NX_RACE_ATT_UDP || !r->att_rto[i] ||
	    r->att_resends[i] >= NX_RACE_RESENDS) {
		return NEVER;
	}
	return r->att_resend_at[i];
}

static void rearm(struct nx_race *r)
{
	uint64_t at = NX_MIN(r->deadline_at, r->stagger_at);
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		at = NX_MIN(at, resend_due(r, i));
	}
	r->io->arm(r, at);
}

/* The attempt's timeout doubles (RFC 6298 5.5), from `now`. */
static void backoff(struct nx_race *r, int i, uint64_t now)
{
	r->att_rto[i] = r->att_rto[i] > UINT32_MAX / 2 ? UINT32_MAX : 2 * r->att_rto[i];
	r->att_resend_at[i] = now + r->att_rto[i];
}

/*
 * Re-send every UDP attempt whose timeout has passed; its next timeout is twice as long. One
 * the engine declines (its server takes no re-send yet) waits until the time it names.
 */
static void resend_silent(struct nx_race *r, uint64_t now)
{
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		if (resend_due(r, i) > now) {
			continue;
		}
		uint64_t later = r->io->resend(r, i, r->att_server[i], now);
		if (later > now) {
			r->att_resend_at[i] = later;
			continue;
		}
		r->att_resends[i]++;
		backoff(r, i, now);
	}
}

static void finish(struct nx_race *r, enum nx_up_result res, int winner)
{
	r->running = false;
	r->stagger_at = NEVER;
	enum nx_up_outcome lost = res == NX_UP_TIMEOUT ? NX_UP_O_TIMEOUT : NX_UP_O_CANCELLED;
	int wsrv = -1;
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		if (r->att_state[i] == NX_RACE_ATT_IDLE) {
			continue;
		}
		r->att_state[i] = NX_RACE_ATT_IDLE;
		if (i == winner) {
			wsrv = r->att_server[i];
		}
		r->io->stop(r, i, r->att_server[i], i == winner ? NX_UP_O_ANSWER : lost);
	}
	r->io->arm(r, NEVER);
	r->io->done(r, res, winner, wsrv); /* last: it may release r */
}

/* Ask the next untried server in a free attempt slot. False when none could be asked. */
static bool launch_one(struct nx_race *r, uint64_t now)
{
	while (r->next_server < r->n_servers) {
		int a = -1;
		for (int i = 0; i < NX_UP_MAX_ATTEMPTS && a < 0; i++) {
			if (r->att_state[i] == NX_RACE_ATT_IDLE) {
				a = i;
			}
		}
		if (a < 0) {
			return false;
		}
		uint8_t srv = r->next_server++;
		r->att_state[a] = NX_RACE_ATT_UDP;
		r->att_server[a] = srv;
		r->att_resends[a] = 0;
		r->att_retries[a] = 0;
		r->att_rto[a] = r->io->rto(r, srv);
		r->att_resend_at[a] = now + r->att_rto[a];
		if (r->io->send(r, a, srv) == 0) {
			return true;
		}
		r->att_state[a] = NX_RACE_ATT_IDLE;
		r->io->stop(r, a, srv, NX_UP_O_ERROR);
	}
	return false;
}

/* Launch one more attempt while the race allows, schedule the one after it, or fail. */
static void launch_next(struct nx_race *r, uint64_t now)
{
	if (nx_race_active(r) < r->race) {
		launch_one(r, now);
	}
	int active = nx_race_active(r);
	if (active == 0 && r->next_server >= r->n_servers) {
		finish(r, NX_UP_FAILED, -1);
		return;
	}
	r->stagger_at =
	    r->next_server < r->n_servers && active < r->race ? now + r->stagger_ms : NEVER;
	rearm(r);
}

void nx_race_start(struct nx_race *r, const struct nx_race_io *io, uint64_t now, unsigned n_servers,
		   unsigned race, unsigned stagger_ms, unsigned timeout_ms)
{
	r->io = io;
	r->running = true;
	r->n_servers = (uint8_t)NX_MIN(n_servers, 255);
	r->next_server = 0;
	r->race = (uint8_t)NX_MAX(1, NX_MIN(race, NX_UP_MAX_ATTEMPTS));
	r->stagger_ms = stagger_ms;
	r->deadline_at = now + timeout_ms;
	r->stagger_at = NEVER;
	for (int i = 0; i < NX_UP_MAX_ATTEMPTS; i++) {
		r->att_state[i] = NX_RACE_ATT_IDLE;
	}
	launch_next(r, now);
}

void nx_race_tick(struct nx_race *r, uint64_t now)
{
	if (!r->running) {
		return;
	}
	if (now >= r->deadline_at) {
		finish(r, NX_UP_TIMEOUT, -1);
		return;
	}
	resend_silent(r, now); /* never ends the race */
	if (now >= r->stagger_at) {
		r->stagger_at = NEVER;
		launch_next(r, now); /* may end it: r is not touched after */
	} else {
		rearm(r);
	}
}

void nx_race_answer(struct nx_race *r, int att)
{
	if (r->running && r->att_state[att] != NX_RACE_ATT_IDLE) {
		finish(r, NX_UP_ANSWER, att);
	}
}

void nx_race_failed(struct nx_race *r, int att, uint64_t now)
{
	if (!r->running || r->att_state[att] == NX_RACE_ATT_IDLE) {
		return;
	}
	r->att_state[att] = NX_RACE_ATT_IDLE;
	r->io->stop(r, att, r->att_server[att], NX_UP_O_ERROR);
	launch_next(r, now);
}

void nx_race_retry(struct nx_race *r, int att, uint64_t now)
{
	if (!r->running || r->att_state[att] != NX_RACE_ATT_UDP) {
		return;
	}
	if (r->att_retries[att] >= NX_RACE_RETRIES) {
		nx_race_failed(r, att, now);
		return;
	}
	r->att_retries[att]++;
	uint8_t srv = r->att_server[att];
	r->att_resends[att] = 0;
	r->att_rto[att] = r->io->rto(r, srv);
	r->att_resend_at[att] = now + r->att_rto[att];
	if (r->io->send(r, att, srv) < 0) {
		nx_race_failed(r, att, now);
		return;
	}
	rearm(r); /* the re-send timer starts again from now */
}

void nx_race_truncated(struct nx_race *r, int att, uint64_t now)
{
	if (!r->running || r->att_state[att] != NX_RACE_ATT_UDP) {
		return;
	}
	r->att_state[att] = NX_RACE_ATT_TCP;
	if (r->io->send_tcp(r, att, r->att_server[att]) < 0) {
		nx_race_failed(r, att, now);
		return;
	}
	rearm(r); /* a TCP attempt has no re-send to wait for */
}

void nx_race_abort(struct nx_race *r)
{
	if (r->running) {
		finish(r, NX_UP_FAILED, -1);
	}
}

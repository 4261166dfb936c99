/*
 * The daemon's dnstap export: created from dnstap.* at start (one ring per worker, one writer
 * thread), moved, turned on or off by a reload, stopped after the workers. A collector that is
 * down, or a writer that cannot be set up, never keeps DNS from starting: the error is logged
 * and counted, DNS serves.
 *
 * Publication: the workers read `d->dnstap_live` (NULL = off) when they take a configuration
 * generation, and set their upstream engine's observer from it and dnstap.forwarder. The
 * object itself lives until the daemon stops (off only stops its writer), so a worker that
 * pushes with the previous pointer for a moment pushes into memory that is still there.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "daemon/impl.h"
#include "dnstap/dnstap.h"
#include "filter/result.h"
#include "net/reply.h"

_Static_assert(NX_PROTO_UDP + 1 == NX_DNSTAP_UDP && NX_PROTO_TCP + 1 == NX_DNSTAP_TCP &&
		   NX_PROTO_DOT + 1 == NX_DNSTAP_DOT && NX_PROTO_DOH + 1 == NX_DNSTAP_DOH,
	       "dnstap's SocketProtocol is enum nx_proto + 1");

static bool wanted(const struct nx_conf *c)
{
	return c->dnstap_socket || c->dnstap_tcp.len > 0;
}

static const char *dest_text(const struct nx_conf *c)
{
	return c->dnstap_socket ? c->dnstap_socket : c->dnstap_tcp.text;
}

/* c's destination and identity (the host name when unset) into p; host is its buffer. */
static void params_of(const struct nx_conf *c, struct nx_dnstap_params *p, char *host, size_t hcap)
{
	nx_dnstap_params_default(p);
	const char *identity = c->dnstap_identity;
	if (!identity || !identity[0]) {
		host[0] = 0;
		if (gethostname(host, hcap - 1) < 0) {
			host[0] = 0;
		}
		host[hcap - 1] = 0;
		identity = host[0] ? host : NULL;
	}
	p->socket_path = c->dnstap_socket;
	if (!p->socket_path) {
		p->tcp = (const struct sockaddr *)&c->dnstap_tcp.ss;
		p->tcp_len = c->dnstap_tcp.len;
	}
	p->identity = identity;
	p->version = "nxdns " NX_VERSION;
}

/* Create and start the export for c (none yet); d->dnstap stays NULL on failure (logged). */
static void create(struct nx_daemon *d, const struct nx_conf *c)
{
	char host[256];
	struct nx_dnstap_params p;
	params_of(c, &p, host, sizeof(host));
	p.producers = d->n_workers ? d->n_workers : c->workers;
	/* a restart key: the size the process started with, also when a reload turns it on */
	p.queue_bytes = d->boot->c->dnstap_queue_bytes;
	int rc = nx_dnstap_new(&p, &d->dnstap);
	if (rc == 0 && (rc = nx_dnstap_start(d->dnstap)) < 0) {
		nx_dnstap_free(d->dnstap);
	}
	if (rc < 0) {
		d->dnstap = NULL;
		nx_log(NX_LOG_ERR, "dnstap",
		       "cannot set up the export to %s: %s (DNS serves without dnstap)",
		       dest_text(c), nx_strerror(rc));
		return;
	}
	d->dnstap_on = true;
	nx_log(NX_LOG_INFO, "dnstap", "exporting answers%s to %s",
	       c->dnstap_forwarder ? " and upstream exchanges" : "", dest_text(c));
}

int nx_daemon_dnstap_start(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	if (wanted(c)) {
		create(d, c);
	}
	atomic_store_explicit(&d->dnstap_live, d->dnstap_on ? d->dnstap : NULL,
			      memory_order_release);
	return 0;
}

void nx_daemon_dnstap_reconfigure(struct nx_daemon *d, const struct nx_conf *c)
{
	if (!wanted(c)) {
		if (d->dnstap_on) {
			/* the workers stop pushing at their next wake; the writer sends what is
			 * queued (bounded by its I/O timeout) and ends the stream */
			atomic_store_explicit(&d->dnstap_live, NULL, memory_order_release);
			nx_dnstap_stop(d->dnstap);
			d->dnstap_on = false;
			nx_log(NX_LOG_INFO, "dnstap", "reload: export off");
		}
		return;
	}
	if (!d->dnstap) {
		create(d, c);
	} else {
		char host[256];
		struct nx_dnstap_params p;
		params_of(c, &p, host, sizeof(host));
		int rc = nx_dnstap_retarget(d->dnstap, &p);
		if (rc == 0 && !d->dnstap_on) {
			rc = nx_dnstap_start(d->dnstap);
			d->dnstap_on = rc == 0;
		}
		if (rc < 0) {
			nx_log(NX_LOG_ERR, "dnstap", "reload: cannot export to %s: %s",
			       dest_text(c), nx_strerror(rc));
		} else {
			nx_log(NX_LOG_INFO, "dnstap", "reload: exporting answers%s to %s",
			       c->dnstap_forwarder ? " and upstream exchanges" : "", dest_text(c));
		}
	}
	atomic_store_explicit(&d->dnstap_live, d->dnstap_on ? d->dnstap : NULL,
			      memory_order_release);
}

void nx_daemon_dnstap_stop(struct nx_daemon *d)
{
	atomic_store(&d->dnstap_live, NULL);
	nx_dnstap_free(d->dnstap);
	d->dnstap = NULL;
	d->dnstap_on = false;
}

static int64_t wall_us(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

/* A monotonic instant on the wall clock: its age taken from now. */
static int64_t wall_of(int64_t now_us, uint64_t mono_us)
{
	int64_t age_us = (int64_t)(nx_now_mono_us() - mono_us);
	return now_us - (age_us > 0 ? age_us : 0);
}

void nx_daemon_dnstap_answer(struct nx_worker *w, const struct nx_reply *to, unsigned proto,
			     const struct sockaddr *client, const struct nx_qlog_rec *rec,
			     uint64_t t0_us, const uint8_t *reply, size_t rlen)
{
	int64_t now_us = wall_us();
	struct sockaddr_storage local;
	struct nx_dnstap_event ev = {
	    .kind = NX_DNSTAP_CLIENT,
	    .proto = (enum nx_dnstap_proto)(proto + 1),
	    .client = client,
	    .server = nx_reply_local(to, &local) ? (const struct sockaddr *)&local : NULL,
	    .query_us = wall_of(now_us, t0_us),
	    .response_us = now_us,
	    .action = nx_filter_action_name((enum nx_filter_action)rec->action),
	    .reason = nx_filter_reason_name((enum nx_filter_reason)rec->reason),
	    .rule = rec->matched,
	    .source = rec->source,
	    .cached = rec->cached,
	    .msg = reply,
	    .msg_len = rlen,
	};
	nx_dnstap_push(w->dnstap, w->idx, &ev);
}

/* The upstream engine's observer: runs on this worker's loop, so it pushes into this
 * worker's ring like the client answers. */
static void on_upstream_msg(void *ud, const struct nx_up_tap_msg *m)
{
	static const enum nx_dnstap_proto protos[] = {
	    [NX_UP_T_PLAIN] = NX_DNSTAP_UDP,
	    [NX_UP_T_TCP] = NX_DNSTAP_TCP,
	    [NX_UP_T_DOT] = NX_DNSTAP_DOT,
	    [NX_UP_T_DOH] = NX_DNSTAP_DOH,
	};
	struct nx_worker *w = ud;
	if (!w->dnstap || nx_fails_assert((unsigned)m->server->transport < NX_ARRAY_LEN(protos))) {
		return;
	}
	int64_t now_us = wall_us();
	struct nx_dnstap_event ev = {
	    .kind = m->response ? NX_DNSTAP_FWD_RESPONSE : NX_DNSTAP_FWD_QUERY,
	    .proto = m->tcp ? NX_DNSTAP_TCP : protos[m->server->transport],
	    .server = (const struct sockaddr *)&m->server->ss,
	    .query_us = m->response ? wall_of(now_us, m->sent_us) : now_us,
	    .response_us = now_us,
	    .msg = m->msg,
	    .msg_len = m->len,
	};
	nx_dnstap_push(w->dnstap, w->idx, &ev);
}

void nx_daemon_dnstap_worker(struct nx_worker *w)
{
	w->dnstap = atomic_load_explicit(&w->d->dnstap_live, memory_order_acquire);
	bool fwd = w->dnstap && w->cref->c->dnstap_forwarder;
	nx_upstream_set_tap(w->up, fwd ? on_upstream_msg : NULL, w);
}

/*
 * The daemon's dnstap export: created from dnstap.* at start (one ring per worker, one writer
 * thread), stopped after the workers. A collector that is down, or a writer that cannot be set
 * up, never keeps DNS from starting: the error is logged and counted, DNS serves.
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

int nx_daemon_dnstap_start(struct nx_daemon *d)
{
	const struct nx_conf *c = d->cur->c;
	if (!c->dnstap_socket && c->dnstap_tcp.len == 0) {
		return 0;
	}
	char host[256] = "";
	const char *identity = c->dnstap_identity;
	if (!identity || !identity[0]) {
		if (gethostname(host, sizeof(host) - 1) < 0) {
			host[0] = 0;
		}
		identity = host[0] ? host : NULL;
	}
	struct nx_dnstap_params p;
	nx_dnstap_params_default(&p);
	p.socket_path = c->dnstap_socket;
	if (!p.socket_path) {
		p.tcp = (const struct sockaddr *)&c->dnstap_tcp.ss;
		p.tcp_len = c->dnstap_tcp.len;
	}
	p.producers = c->workers;
	p.queue_bytes = c->dnstap_queue_bytes;
	p.identity = identity;
	p.version = "nxdns " NX_VERSION;
	int rc = nx_dnstap_new(&p, &d->dnstap);
	if (rc == 0 && (rc = nx_dnstap_start(d->dnstap)) < 0) {
		nx_dnstap_free(d->dnstap);
	}
	if (rc < 0) {
		d->dnstap = NULL;
		nx_log(NX_LOG_ERR, "dnstap",
		       "cannot set up the export to %s: %s (DNS serves "
		       "without dnstap)",
		       c->dnstap_socket ? c->dnstap_socket : c->dnstap_tcp.text, nx_strerror(rc));
		return 0;
	}
	nx_log(NX_LOG_INFO, "dnstap", "exporting answers to %s",
	       c->dnstap_socket ? c->dnstap_socket : c->dnstap_tcp.text);
	return 0;
}

void nx_daemon_dnstap_stop(struct nx_daemon *d)
{
	nx_dnstap_free(d->dnstap);
	d->dnstap = NULL;
}

void nx_daemon_dnstap_answer(struct nx_worker *w, unsigned proto, const struct sockaddr *client,
			     const struct nx_qlog_rec *rec, uint64_t t0_us, const uint8_t *reply,
			     size_t rlen)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
	/* The arrival on the wall clock: the monotonic age of the query taken from now. */
	int64_t age_us = (int64_t)(nx_now_mono_us() - t0_us);
	struct nx_dnstap_event ev = {
	    .proto = (enum nx_dnstap_proto)(proto + 1),
	    .client = client,
	    .query_us = now_us - (age_us > 0 ? age_us : 0),
	    .response_us = now_us,
	    .action = nx_filter_action_name((enum nx_filter_action)rec->action),
	    .reason = nx_filter_reason_name((enum nx_filter_reason)rec->reason),
	    .rule = rec->matched,
	    .source = rec->source,
	    .cached = rec->cached,
	    .reply = reply,
	    .reply_len = rlen,
	};
	nx_dnstap_push(w->dnstap, w->idx, &ev);
}

/*
 * TLS sessions over memory (see net/tls.h). GnuTLS pulls ciphertext from the bytes handed to
 * nx_tls_feed and pushes ciphertext through io->send; decrypted records leave zero-copy
 * (gnutls_record_recv_packet) through io->recv.
 */
#include "net/tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <assert.h>
#include <errno.h>
#include <string.h>

#include <gnutls/x509.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "net/tls_impl.h"

struct nx_tls {
	gnutls_session_t s;	    /* owned */
	struct nx_tls_creds *creds; /* refcounted */
	struct nx_tls_io io;	    /* copied */
	void *ud;		    /* borrowed: the stream layer's connection, outlives us */
	const uint8_t *in;	    /* borrowed during nx_tls_feed: bytes GnuTLS has not pulled */
	size_t in_len;
	size_t corked;		    /* plaintext waiting in GnuTLS's cork buffer */
	size_t charged;		    /* the GnuTLS estimate charged to NX_OWNER_tls */
	int err;		    /* first fatal error; sticky */
	int depth;		    /* nesting of our calls that may run io callbacks */
	const char *verify_detail;  /* static; why the peer's certificate was refused */
	enum nx_tls_alpn alpn;	    /* agreed (once ready) */
	enum nx_tls_alpn alpn_want; /* offered */
	bool server;
	bool ready;
	bool is_corked;
	bool send_failed;  /* io->send failed: no more pushes */
	bool free_pending; /* nx_tls_free from inside a callback */
	bool peer_is_ip;   /* client: check peer_ip against IP SANs, no SNI */
	uint8_t peer_ip[16];
	unsigned peer_ip_len;
	char name[NX_TLS_SNI_MAX + 1]; /* server: SNI received ("" none); client: auth name */
};

/* Part of every session's ledger charge (nx_tls_charged); mostly the name buffer. */
static_assert(sizeof(struct nx_tls) <= 512, "struct nx_tls is in the per-session budget");

static const char *const alpn_names[] = {
    [NX_TLS_ALPN_NONE] = NULL,
    [NX_TLS_ALPN_DOT] = "dot",
    [NX_TLS_ALPN_H2] = "h2",
};

/* Error counters by side: [server][reason]. Rows follow base/stats.h's nxdns_tls_errors_total. */
enum { R_HANDSHAKE, R_VERIFY, R_RECORD, R_ALERT, R_TRANSPORT, R_NOMEM, R__COUNT };
static const enum nx_stat err_stats[2][R__COUNT] = {
    {NX_STAT_TLS_CLI_E_HANDSHAKE, NX_STAT_TLS_CLI_E_VERIFY, NX_STAT_TLS_CLI_E_RECORD,
     NX_STAT_TLS_CLI_E_ALERT, NX_STAT_TLS_CLI_E_TRANSPORT, NX_STAT_TLS_CLI_E_NOMEM},
    {NX_STAT_TLS_SRV_E_HANDSHAKE, NX_STAT_TLS_SRV_E_VERIFY, NX_STAT_TLS_SRV_E_RECORD,
     NX_STAT_TLS_SRV_E_ALERT, NX_STAT_TLS_SRV_E_TRANSPORT, NX_STAT_TLS_SRV_E_NOMEM},
};

const char *nx_tls_error_reason(int rc)
{
	switch (rc) {
	case NX_ETLS_HANDSHAKE:
		return "handshake";
	case NX_ETLS_VERIFY:
		return "verify";
	case NX_ETLS_RECORD:
		return "bad_record";
	case NX_ETLS_ALERT:
		return "alert";
	case NX_ETLS_TRANSPORT:
		return "transport";
	case NX_ETLS_CLOSED:
		return "closed";
	case -ENOMEM:
		return "no_memory";
	case -ENOTCONN:
		return "not_ready";
	default:
		return "error";
	}
}

static int reason_index(int rc)
{
	switch (rc) {
	case NX_ETLS_VERIFY:
		return R_VERIFY;
	case NX_ETLS_RECORD:
		return R_RECORD;
	case NX_ETLS_ALERT:
		return R_ALERT;
	case NX_ETLS_TRANSPORT:
		return R_TRANSPORT;
	case -ENOMEM:
		return R_NOMEM;
	default:
		return R_HANDSHAKE;
	}
}

/* ---- transport callbacks ---- */

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
	struct nx_tls *t = p;
	if (t->in_len == 0) {
		gnutls_transport_set_errno(t->s, EAGAIN);
		return -1;
	}
	size_t n = NX_MIN(len, t->in_len);
	memcpy(buf, t->in, n);
	t->in += n;
	t->in_len -= n;
	return (ssize_t)n;
}

static ssize_t push(gnutls_transport_ptr_t p, const giovec_t *iov, int iovcnt)
{
	struct nx_tls *t = p;
	size_t total = 0;
	for (int i = 0; i < iovcnt; i++) {
		total += iov[i].iov_len;
	}
	/* Being freed: the caller wants no more callbacks; the bytes go nowhere. */
	if (t->free_pending) {
		return (ssize_t)total;
	}
	for (int i = 0; i < iovcnt && !t->send_failed; i++) {
		if (iov[i].iov_len && t->io.send(t->ud, iov[i].iov_base, iov[i].iov_len) < 0) {
			t->send_failed = true;
		}
	}
	if (t->send_failed) {
		gnutls_transport_set_errno(t->s, EIO);
		return -1;
	}
	return (ssize_t)total;
}

/* ---- errors ---- */

static bool record_error(int g)
{
	switch (g) {
	/* Not GNUTLS_E_UNSUPPORTED_VERSION_PACKET: mostly a TLS 1.0/1.1 client, a handshake
	 * failure to the operator (the priority string refuses it). */
	case GNUTLS_E_UNEXPECTED_PACKET_LENGTH:
	case GNUTLS_E_UNEXPECTED_PACKET:
	case GNUTLS_E_DECRYPTION_FAILED:
	case GNUTLS_E_RECORD_OVERFLOW:
	case GNUTLS_E_TOO_MANY_EMPTY_PACKETS:
	case GNUTLS_E_PREMATURE_TERMINATION:
		return true;
	default:
		return false;
	}
}

/* Record the first fatal error (GnuTLS code g), count it, tell the peer with an alert. */
static int fatal(struct nx_tls *t, int g)
{
	if (t->err) {
		return t->err;
	}
	int rc;
	if (t->send_failed || g == GNUTLS_E_PUSH_ERROR) {
		rc = NX_ETLS_TRANSPORT;
	} else if (t->verify_detail || g == GNUTLS_E_CERTIFICATE_ERROR ||
		   g == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
		rc = NX_ETLS_VERIFY;
		if (!t->verify_detail) {
			t->verify_detail = "invalid certificate";
		}
	} else if (g == GNUTLS_E_FATAL_ALERT_RECEIVED) {
		rc = NX_ETLS_ALERT;
	} else if (g == GNUTLS_E_MEMORY_ERROR) {
		rc = -ENOMEM;
	} else if (record_error(g)) {
		rc = NX_ETLS_RECORD;
	} else {
		rc = t->ready ? NX_ETLS_RECORD : NX_ETLS_HANDSHAKE;
	}
	t->err = rc;
	nx_stat_inc(err_stats[t->server][reason_index(rc)]);
	if (rc != NX_ETLS_TRANSPORT && rc != NX_ETLS_ALERT && !t->free_pending) {
		gnutls_alert_send_appropriate(t->s, g); /* best effort; the session is over */
	}
	return rc;
}

/* ---- handshake ---- */

static void on_ready(struct nx_tls *t)
{
	t->ready = true;
	gnutls_datum_t p;
	if (t->alpn_want != NX_TLS_ALPN_NONE && gnutls_alpn_get_selected_protocol(t->s, &p) == 0) {
		const char *want = alpn_names[t->alpn_want];
		if (p.size == strlen(want) && memcmp(p.data, want, p.size) == 0) {
			t->alpn = t->alpn_want;
		}
	}
	if (t->server) {
		size_t len = sizeof(t->name);
		unsigned type = 0;
		/* A name longer than a DNS name is not kept: the server treats it as absent. */
		if (gnutls_server_name_get(t->s, t->name, &len, &type, 0) == 0 &&
		    type == GNUTLS_NAME_DNS && len < sizeof(t->name)) {
			t->name[len] = '\0';
			if (len && t->name[len - 1] == '.') {
				t->name[len - 1] = '\0';
			}
			for (char *c = t->name; *c; c++) {
				*c = (char)tolower((unsigned char)*c);
			}
		} else {
			t->name[0] = '\0';
		}
	}
	nx_stat_inc(t->server ? NX_STAT_TLS_SRV_READY : NX_STAT_TLS_CLI_READY);
	if (gnutls_session_is_resumed(t->s)) {
		nx_stat_inc(t->server ? NX_STAT_TLS_SRV_RESUMED : NX_STAT_TLS_CLI_RESUMED);
	}
	if (t->io.ready) {
		t->io.ready(t->ud);
	}
}

/* Advance the handshake with what has been fed: 0 (done or wants more) or a fatal code. */
static int handshake(struct nx_tls *t)
{
	for (;;) {
		int g = gnutls_handshake(t->s);
		if (g == GNUTLS_E_SUCCESS) {
			on_ready(t);
			return 0;
		}
		if (g == GNUTLS_E_AGAIN) {
			return 0;
		}
		/* A warning alert (unrecognized_name) consumed input: carry on. Anything else,
		 * fatal or not (nothing else can repeat without input), ends the session. */
		if (g == GNUTLS_E_INTERRUPTED || g == GNUTLS_E_WARNING_ALERT_RECEIVED) {
			continue;
		}
		return fatal(t, g);
	}
}

/* ---- sessions ---- */

static void destroy(struct nx_tls *t)
{
	if (t->s) {
		gnutls_deinit(t->s);
	}
	nx_ledger_charge(NX_OWNER_tls, -(int64_t)t->charged, 0);
	nx_tls_creds_unref(t->creds);
	nx_mem_free(NX_OWNER_tls, t, sizeof(*t));
}

/* Leave a call that may have run callbacks: a free requested by one happens now. */
static int leave(struct nx_tls *t, int rc)
{
	if (--t->depth == 0 && t->free_pending) {
		destroy(t);
	}
	return rc;
}

static int session_new(struct nx_tls_creds *c, bool server, enum nx_tls_alpn alpn,
		       const struct nx_tls_io *io, void *ud, struct nx_tls **out)
{
	*out = NULL;
	if (!c || c->server != server || !io || !io->send || !io->recv ||
	    (unsigned)alpn > NX_TLS_ALPN_H2) {
		return -EINVAL;
	}
	struct nx_tls *t = nx_mem_calloc(NX_OWNER_tls, 1, sizeof(*t));
	if (!t) {
		return -ENOMEM;
	}
	t->io = *io;
	t->ud = ud;
	t->server = server;
	t->alpn_want = alpn;
	nx_tls_creds_ref(c);
	t->creds = c;
	t->charged = server ? NX_TLS_SERVER_SESSION_BYTES : NX_TLS_CLIENT_SESSION_BYTES;
	nx_ledger_charge(NX_OWNER_tls, (int64_t)t->charged, 0);
	int g = gnutls_init(&t->s, (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NONBLOCK |
				       GNUTLS_NO_SIGNAL);
	if (g < 0) {
		t->s = NULL;
		goto fail;
	}
	gnutls_session_set_ptr(t->s, t);
	gnutls_transport_set_ptr(t->s, t);
	gnutls_transport_set_pull_function(t->s, pull);
	gnutls_transport_set_vec_push_function(t->s, push);
	/* GnuTLS's timer cannot see our transport's time: the stream layer runs it. */
	gnutls_handshake_set_timeout(t->s, GNUTLS_INDEFINITE_TIMEOUT);
	g = gnutls_priority_set(t->s, c->prio);
	if (g >= 0) {
		g = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, c->x509);
	}
	if (g >= 0 && server) {
		g = gnutls_session_ticket_enable_server(t->s, &c->ticket_key);
	}
	if (g >= 0 && alpn != NX_TLS_ALPN_NONE) {
		/* Not GNUTLS_ALPN_MANDATORY: DoT clients (Android) send no ALPN at all. */
		gnutls_datum_t p = {(unsigned char *)alpn_names[alpn],
				    (unsigned)strlen(alpn_names[alpn])};
		g = gnutls_alpn_set_protocols(t->s, &p, 1, 0);
	}
	if (g < 0) {
		goto fail;
	}
	*out = t;
	return 0;
fail:
	destroy(t);
	return g == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
}

int nx_tls_server_new(struct nx_tls_creds *c, enum nx_tls_alpn alpn, const struct nx_tls_io *io,
		      void *ud, struct nx_tls **out)
{
	return session_new(c, true, alpn, io, ud, out);
}

int nx_tls_client_new(struct nx_tls_creds *c, const char *auth_name, const char *peer_ip,
		      enum nx_tls_alpn alpn, const uint8_t *resume, size_t resume_len,
		      const struct nx_tls_io *io, void *ud, struct nx_tls **out)
{
	*out = NULL;
	/* An IP literal as auth_name is checked as an IP: it cannot go into SNI. */
	const char *ip = peer_ip;
	uint8_t a[16];
	if (auth_name &&
	    (inet_pton(AF_INET, auth_name, a) == 1 || inet_pton(AF_INET6, auth_name, a) == 1)) {
		ip = auth_name;
		auth_name = NULL;
	}
	if (auth_name && (!*auth_name || strlen(auth_name) > NX_TLS_SNI_MAX)) {
		return -EINVAL;
	}
	unsigned ip_len = 0;
	if (!auth_name) {
		if (ip && inet_pton(AF_INET, ip, a) == 1) {
			ip_len = 4;
		} else if (ip && inet_pton(AF_INET6, ip, a) == 1) {
			ip_len = 16;
		} else {
			return -EINVAL;
		}
	}
	struct nx_tls *t;
	int rc = session_new(c, false, alpn, io, ud, &t);
	if (rc) {
		return rc;
	}
	int g = 0;
	if (auth_name) {
		size_t n = strlen(auth_name);
		memcpy(t->name, auth_name, n + 1);
		g = gnutls_server_name_set(t->s, GNUTLS_NAME_DNS, t->name, n);
	} else {
		t->peer_is_ip = true;
		memcpy(t->peer_ip, a, ip_len);
		t->peer_ip_len = ip_len;
	}
	if (g < 0) {
		destroy(t);
		return g == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
	}
	if (resume && resume_len) {
		/* A stale or foreign blob only costs a full handshake. */
		(void)gnutls_session_set_data(t->s, resume, resume_len);
	}
	t->depth++;
	rc = handshake(t); /* sends the ClientHello */
	if (rc) {
		/* Failed: no session, and its callbacks are never called again. */
		t->free_pending = true;
	}
	leave(t, rc);
	if (rc) {
		return rc;
	}
	*out = t;
	return 0;
}

/* Decrypt every complete record fed so far. */
static int drain(struct nx_tls *t)
{
	while (!t->free_pending) {
		gnutls_packet_t pkt = NULL;
		size_t before = t->in_len;
		ssize_t n = gnutls_record_recv_packet(t->s, &pkt);
		if (n > 0) {
			gnutls_datum_t d;
			gnutls_packet_get(pkt, &d, NULL);
			t->io.recv(t->ud, d.data, d.size);
			gnutls_packet_deinit(pkt);
			continue;
		}
		if (pkt) {
			gnutls_packet_deinit(pkt);
		}
		if (n == 0) {
			t->err = NX_ETLS_CLOSED; /* close_notify: an orderly end, not counted */
			return t->err;
		}
		if (n == GNUTLS_E_AGAIN) {
			/* Post-handshake messages (tickets, key updates) also end in AGAIN; stop
			 * only once everything fed is pulled (or nothing more is taken). */
			if (t->in_len == 0 || t->in_len == before) {
				return 0;
			}
			continue;
		}
		if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_WARNING_ALERT_RECEIVED) {
			continue;
		}
		if (n == GNUTLS_E_REHANDSHAKE) {
			/* Renegotiation (TLS 1.2) is refused politely and the session goes on:
			 * nothing a DNS client needs, and a CPU cost it could make us pay. */
			gnutls_alert_send(t->s, GNUTLS_AL_WARNING, GNUTLS_A_NO_RENEGOTIATION);
			continue;
		}
		return fatal(t, (int)n);
	}
	return 0;
}

int nx_tls_feed(struct nx_tls *t, const uint8_t *data, size_t len)
{
	if (t->err) {
		return t->err;
	}
	if (t->free_pending || t->in) {
		return NX_ECANCELED; /* freed, or fed again from inside its own callback */
	}
	t->in = data;
	t->in_len = len;
	t->depth++;
	int rc = 0;
	if (!t->ready) {
		rc = handshake(t);
	}
	if (!rc && t->ready) {
		rc = drain(t);
	}
	t->in = NULL;
	t->in_len = 0;
	return leave(t, rc);
}

static int send_all(struct nx_tls *t, const uint8_t *data, size_t len)
{
	while (len) {
		ssize_t n = gnutls_record_send(t->s, data, len);
		if (n == GNUTLS_E_INTERRUPTED) {
			continue;
		}
		/* Our push never says EAGAIN (the stream layer copies), so AGAIN is a bug. */
		if (nx_fails_assert(n != GNUTLS_E_AGAIN)) {
			return fatal(t, GNUTLS_E_PUSH_ERROR);
		}
		if (n < 0) {
			return fatal(t, (int)n);
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int flush(struct nx_tls *t)
{
	for (;;) {
		ssize_t n = gnutls_record_uncork(t->s, GNUTLS_RECORD_WAIT);
		if (n == GNUTLS_E_INTERRUPTED) {
			continue;
		}
		t->corked = 0;
		return n < 0 ? fatal(t, (int)n) : 0;
	}
}

int nx_tls_write(struct nx_tls *t, const uint8_t *data, size_t len)
{
	if (t->err) {
		return t->err;
	}
	if (t->free_pending) {
		return NX_ECANCELED;
	}
	if (!t->ready) {
		return -ENOTCONN;
	}
	t->depth++;
	int rc = 0;
	if (t->is_corked && t->corked && t->corked + len > NX_TLS_CORK_MAX) {
		rc = flush(t);
		if (!rc) {
			gnutls_record_cork(t->s);
		}
	}
	if (!rc) {
		rc = send_all(t, data, len);
	}
	if (!rc && t->is_corked) {
		t->corked += len;
	}
	return leave(t, rc);
}

int nx_tls_cork(struct nx_tls *t)
{
	if (t->err) {
		return t->err;
	}
	if (!t->is_corked) {
		gnutls_record_cork(t->s);
		t->is_corked = true;
	}
	return 0;
}

int nx_tls_uncork(struct nx_tls *t)
{
	if (!t->is_corked) {
		return t->err;
	}
	t->is_corked = false;
	if (t->err) {
		return t->err;
	}
	if (t->free_pending) {
		return NX_ECANCELED;
	}
	t->depth++;
	return leave(t, flush(t));
}

bool nx_tls_is_ready(const struct nx_tls *t)
{
	return t->ready && !t->err;
}

enum nx_tls_alpn nx_tls_alpn_negotiated(const struct nx_tls *t)
{
	return t->alpn;
}

const char *nx_tls_sni(const struct nx_tls *t)
{
	return t->server && t->name[0] ? t->name : NULL;
}

bool nx_tls_resumed(const struct nx_tls *t)
{
	return t->ready && gnutls_session_is_resumed(t->s);
}

const char *nx_tls_verify_detail(const struct nx_tls *t)
{
	return t->err == NX_ETLS_VERIFY ? t->verify_detail : NULL;
}

int nx_tls_session_save(const struct nx_tls *t, uint8_t *buf, size_t cap)
{
	if (t->server || !t->ready) {
		return -EINVAL;
	}
	/* TLS 1.3 tickets come after the handshake; without one the blob cannot resume. */
	if (gnutls_protocol_get_version(t->s) == GNUTLS_TLS1_3 &&
	    !(gnutls_session_get_flags(t->s) & GNUTLS_SFLAGS_SESSION_TICKET)) {
		return -EAGAIN;
	}
	gnutls_datum_t d = {NULL, 0};
	int g = gnutls_session_get_data2(t->s, &d);
	if (g < 0) {
		return g == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EAGAIN;
	}
	int rc = (int)d.size;
	if (d.size > cap) {
		rc = NX_ETRUNC;
	} else {
		memcpy(buf, d.data, d.size);
	}
	gnutls_free(d.data);
	return rc;
}

void nx_tls_bye(struct nx_tls *t)
{
	if (!t->ready || (t->err && t->err != NX_ETLS_CLOSED) || t->free_pending) {
		return;
	}
	t->depth++;
	int rc = 0;
	if (t->is_corked) {
		t->is_corked = false;
		rc = flush(t); /* answers already written leave before close_notify */
	}
	if (!rc) {
		int g;
		do {
			g = gnutls_bye(t->s, GNUTLS_SHUT_WR);
		} while (g == GNUTLS_E_INTERRUPTED);
	}
	leave(t, 0);
}

void nx_tls_free(struct nx_tls *t)
{
	if (!t) {
		return;
	}
	if (t->depth > 0) {
		t->free_pending = true; /* inside a callback: the outer call frees on return */
		return;
	}
	destroy(t);
}

size_t nx_tls_charged(const struct nx_tls *t)
{
	return sizeof(*t) + t->charged;
}

/* ---- certificate check (client) ---- */

static const char *describe(unsigned status)
{
	if (status & GNUTLS_CERT_UNEXPECTED_OWNER) {
		return "name mismatch";
	}
	if (status & GNUTLS_CERT_EXPIRED) {
		return "expired";
	}
	if (status & GNUTLS_CERT_NOT_ACTIVATED) {
		return "not yet valid";
	}
	if (status & GNUTLS_CERT_SIGNER_NOT_FOUND) {
		return "untrusted";
	}
	if (status & GNUTLS_CERT_REVOKED) {
		return "revoked";
	}
	if (status & GNUTLS_CERT_PURPOSE_MISMATCH) {
		return "not for TLS servers";
	}
	if (status & GNUTLS_CERT_INSECURE_ALGORITHM) {
		return "insecure algorithm";
	}
	return "invalid";
}

int nx_tls_verify_peer(gnutls_session_t s)
{
	struct nx_tls *t = gnutls_session_get_ptr(s);
	const struct nx_tls_creds *c = t->creds;
	unsigned n = 0;
	const gnutls_datum_t *chain = gnutls_certificate_get_peers(s, &n);
	if (!chain || n == 0) {
		t->verify_detail = "no certificate";
		return -1;
	}
	if (c->n_pins) {
		uint8_t h[32];
		if (nx_tls_spki_sha256(&chain[0], h) == 0) {
			for (size_t i = 0; i < c->n_pins; i++) {
				if (memcmp(h, c->pins[i], sizeof(h)) == 0) {
					return 0;
				}
			}
		}
		if (!c->has_ca) {
			t->verify_detail = "pin mismatch";
			return -1;
		}
	}
	gnutls_typed_vdata_st data[2] = {
	    {.type = GNUTLS_DT_KEY_PURPOSE_OID, .data = (unsigned char *)GNUTLS_KP_TLS_WWW_SERVER},
	};
	if (t->peer_is_ip) {
		data[1] = (gnutls_typed_vdata_st){
		    .type = GNUTLS_DT_IP_ADDRESS, .data = t->peer_ip, .size = t->peer_ip_len};
	} else {
		data[1] = (gnutls_typed_vdata_st){.type = GNUTLS_DT_DNS_HOSTNAME,
						  .data = (unsigned char *)t->name};
	}
	unsigned status = 0;
	if (gnutls_certificate_verify_peers(s, data, 2, &status) < 0) {
		t->verify_detail = "unverifiable";
		return -1;
	}
	if (status) {
		t->verify_detail = describe(status);
		return -1;
	}
	return 0;
}

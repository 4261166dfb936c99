/*
 * The TLS transform: GnuTLS over memory, for DNS-over-TLS and DNS-over-HTTPS listeners and
 * upstream clients.
 *
 * The transform does no socket I/O. The stream layer owns the socket: it feeds ciphertext read
 * from the wire into nx_tls_feed(); ciphertext for the wire leaves through io->send, decrypted
 * application bytes through io->recv (one call per TLS record, zero-copy out of GnuTLS's
 * buffer), and io->ready says once that the handshake finished. The handshake timer is the
 * stream layer's too (GnuTLS's own cannot see a memory transport's time).
 *
 * Threading: credentials are immutable once built and shared by every worker (atomic
 * refcount; GnuTLS allows one certificate credential in concurrent sessions). A session belongs
 * to one thread: every nx_tls_* call on it and every io callback happen on that thread.
 *
 * Ownership and memory: a session holds a reference on its credentials. GnuTLS's own heap is
 * not visible to us (gnutls_global_set_mem_functions is a no-op in 3.7), so each session and
 * credential charges NX_OWNER_tls a MEASURED estimate (the constants below; the unit test
 * measures with mallinfo2 and fails when an idle object costs more than its estimate).
 *
 * Callbacks: io callbacks run only inside nx_tls_* calls that say so (client_new, feed, write,
 * uncork, bye). A callback may call nx_tls_write/cork/uncork/bye, and nx_tls_free: the free
 * is then deferred until the outer call returns, and no further callback is made.
 *
 * Errors: 0 or < 0. Fatal session errors are NX_ETLS_* (base/err.h); the session is counted
 * once under nxdns_tls_errors_total{side,reason} (reason = nx_tls_error_reason()) and every
 * later call fails with the same code. The caller closes the connection and frees.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Measured costs charged to NX_OWNER_tls: GnuTLS 3.7.9, x86-64 glibc, mallinfo2 deltas around
 * the object's free, our own struct included (tests/unit/net/test_tls.c re-measures and fails
 * when an object costs more than it charges, or less than half). Margins cover other
 * architectures and GnuTLS point releases. A session in the middle of a record holds up to one
 * more record buffer (~16 KiB) for as long as the record is incomplete: not idle, not charged.
 */
/* Idle server session after a TLS 1.3 handshake and one exchange (measured 10.7 KiB). */
#define NX_TLS_SERVER_SESSION_BYTES (14u * 1024)
/* Idle client session, same state, the server's ticket received (measured 10.4 KiB). */
#define NX_TLS_CLIENT_SESSION_BYTES (14u * 1024)
/* Server credentials: ECDSA P-256 certificate + key, ticket key, priority cache (measured
 * 18.7 KiB; the leaf PEM copy is charged on top, exactly). */
#define NX_TLS_SERVER_CREDS_BYTES (24u * 1024)
/* Client credentials before any trust anchor: priority cache, empty trust list (measured
 * 14.7 KiB). */
#define NX_TLS_CLIENT_CREDS_BYTES (18u * 1024)
/* Each trust anchor a client credential holds (Debian's store: 144 CAs measured 3.6 MiB,
 * 25.7 KiB each: GnuTLS keeps every certificate as a parsed ASN.1 tree). Share one
 * system-CA credential between upstreams; pin-only credentials hold no anchors. */
#define NX_TLS_CA_BYTES (28u * 1024)

/* Most SubjectAltNames a self-signed certificate takes (given names + the two loopbacks). */
#define NX_TLS_SAN_MAX 64
/* Longest SNI kept (a DNS name in text, RFC 1035). */
#define NX_TLS_SNI_MAX 253
/* Corked plaintext flushed once it reaches one full record (RFC 8446 maximum record size):
 * batching beyond one record saves nothing and would grow GnuTLS's presend buffer. */
#define NX_TLS_CORK_MAX 16384u
/* Largest session blob nx_tls_session_save produces in practice (TLS 1.3 ticket + state). */
#define NX_TLS_SESSION_MAX 4096u

/* Credentials: server certificate + key, or a client's trust (CAs and/or SPKI pins). */
struct nx_tls_creds;

/*
 * Server credentials from PEM files (cert_path may hold a chain, leaf first; key_path a PKCS#8
 * or traditional private key). 0, or -errno / NX_ECONFIG with a message naming the file and
 * what is wrong (unreadable, not PEM, key does not match the certificate, expired) in err.
 */
int nx_tls_creds_server_load(const char *cert_path, const char *key_path, struct nx_tls_creds **out,
			     char *err, size_t errlen);
/*
 * Client credentials: verify against the system trust store (Debian ca-certificates) when
 * system_ca, and/or accept a certificate whose SPKI SHA-256 is one of pins[n_pins] (then the
 * CA and name checks are not required: RFC 7469-style pinning, as kdig +tls-pin). A pin that
 * does not match falls back to the CA check when there is one. At least one of the two.
 * 0, -EINVAL (nothing to trust), NX_ECONFIG (no system CAs), -ENOMEM; message in err.
 */
int nx_tls_creds_client_new(bool system_ca, const uint8_t (*pins)[32], size_t n_pins,
			    struct nx_tls_creds **out, char *err, size_t errlen);
/*
 * As nx_tls_creds_client_new, with the certificates of the PEM file ca_path (may be NULL) as
 * more trust anchors: a private CA, or a self-signed server's own certificate.
 */
int nx_tls_creds_client_new_ca(bool system_ca, const char *ca_path, const uint8_t (*pins)[32],
			       size_t n_pins, struct nx_tls_creds **out, char *err, size_t errlen);
void nx_tls_creds_ref(struct nx_tls_creds *c);
void nx_tls_creds_unref(struct nx_tls_creds *c); /* NULL is a no-op */
/* Base64 SHA-256 of the server certificate's SubjectPublicKeyInfo (44 chars + NUL). 0, or
 * -EINVAL for client credentials. */
int nx_tls_creds_pin(const struct nx_tls_creds *c, char out[45]);
/* The server certificate's PEM (for embedding in an Apple .mobileconfig): *pem_out is a
 * NUL-terminated copy the caller free()s, *len its length. 0, -EINVAL (client creds), -ENOMEM. */
int nx_tls_creds_cert_pem(const struct nx_tls_creds *c, char **pem_out, size_t *len);
/* Bytes the credentials charge to NX_OWNER_tls (for the measurement test and /metrics). */
size_t nx_tls_creds_charged(const struct nx_tls_creds *c);

/*
 * Self-signed: ECDSA P-256 key, X.509v3 certificate valid ~10 years (from a day ago: clients
 * with a slow clock), SANs = dns_names (an entry that is an IP address literal becomes an IP
 * SAN) plus 127.0.0.1 and ::1, CN = the first name or "nxdns", EKU serverAuth, CA:FALSE.
 * Written as DIR/key.pem (0600) then DIR/cert.pem (0644), each to a temp file, fsync, rename,
 * then DIR is fsync'd. DIR must exist. 0, -EINVAL (a bad name; message), -errno (message
 * naming the path), NX_ELIMIT (more than NX_TLS_SAN_MAX names).
 */
int nx_tls_selfsigned_write(const char *dir, const char *const *dns_names, size_t n_dns, char *err,
			    size_t errlen);
/*
 * Ensure STATE_DIR/tls/{cert,key}.pem exist: generated once (STATE_DIR/tls made 0700), reused
 * while both files exist. *cert_path and *key_path are malloc'd (caller free()s; set only on
 * success), *created says whether they were generated now. server_name (or NULL) is the DNS
 * SAN used when generating. Errors as nx_tls_selfsigned_write.
 */
int nx_tls_selfsigned_ensure(const char *state_dir, const char *server_name, char **cert_path,
			     char **key_path, bool *created, char *err, size_t errlen);

/* One session: a TLS transform over memory. */
enum nx_tls_alpn {
	NX_TLS_ALPN_NONE, /* no ALPN offered or none agreed */
	NX_TLS_ALPN_DOT,  /* "dot" (RFC 7858 over TLS; offered, never required) */
	NX_TLS_ALPN_H2,	  /* "h2" (RFC 8484 over HTTP/2) */
};

struct nx_tls_io {
	/* Ciphertext for the wire. Return 0, or < 0: the transport failed (session fatal,
	 * NX_ETLS_TRANSPORT). The bytes are only valid during the call (the callee copies what
	 * it cannot send now). */
	int (*send)(void *ud, const uint8_t *data, size_t len);
	/* Decrypted application bytes (one TLS record), valid during the call. */
	void (*recv)(void *ud, const uint8_t *data, size_t len);
	/* Handshake finished (called once, before the first recv). May be NULL. */
	void (*ready)(void *ud);
};

struct nx_tls;

/*
 * Server session. `alpn` is the protocol this listener speaks (DoT: "dot" offered but NOT
 * required, Android sends no ALPN; DoH: "h2", the HTTP/2 layer checks the preface). TLS 1.2
 * and 1.3 only; session tickets on (key per credentials). io is copied; ud is borrowed.
 * Sends nothing until fed. 0, -EINVAL (client credentials), -ENOMEM.
 */
int nx_tls_server_new(struct nx_tls_creds *c, enum nx_tls_alpn alpn, const struct nx_tls_io *io,
		      void *ud, struct nx_tls **out);
/*
 * Client session: SNI and the certificate name check use auth_name; with auth_name NULL the
 * peer's IP address (text, peer_ip) must be one of the certificate's IP SANs (no SNI: RFC 6066
 * forbids IP literals there). Pins, when the credentials have them, are checked first. The
 * ALPN `alpn` is offered. resume[resume_len] (or NULL) is a blob from nx_tls_session_save; an
 * unusable blob only means a full handshake. Sends the ClientHello at once through io->send;
 * when that fails (returned code, NX_ETLS_TRANSPORT) no session is made. 0, -EINVAL (server
 * credentials, no name, bad peer_ip), -ENOMEM, NX_ETLS_TRANSPORT.
 */
int nx_tls_client_new(struct nx_tls_creds *c, const char *auth_name, const char *peer_ip,
		      enum nx_tls_alpn alpn, const uint8_t *resume, size_t resume_len,
		      const struct nx_tls_io *io, void *ud, struct nx_tls **out);
/*
 * Feed ciphertext read from the wire: drives the handshake (replies through io->send),
 * decrypts (io->recv per record, io->ready once). Partial records are kept by GnuTLS until
 * the rest arrives. 0, or < 0: NX_ETLS_* fatal (NX_ETLS_CLOSED: the peer sent close_notify,
 * not counted as an error), -ENOMEM.
 */
int nx_tls_feed(struct nx_tls *t, const uint8_t *data, size_t len);
/*
 * Encrypt and send application bytes through io->send; only after ready (-ENOTCONN before).
 * While corked, the bytes are batched (several messages leave in few records) and flushed at
 * nx_tls_uncork or whenever a full record's worth is waiting. 0 or < 0.
 */
int nx_tls_write(struct nx_tls *t, const uint8_t *data, size_t len);
int nx_tls_cork(struct nx_tls *t);   /* 0; idempotent */
int nx_tls_uncork(struct nx_tls *t); /* flushes; 0 or < 0; no-op when not corked */
bool nx_tls_is_ready(const struct nx_tls *t);
/* The protocol agreed by ALPN, NX_TLS_ALPN_NONE before ready or when none was. */
enum nx_tls_alpn nx_tls_alpn_negotiated(const struct nx_tls *t);
/* Server side: the SNI the client sent (lower-cased, no trailing dot), or NULL. Valid while
 * the session lives; set once ready. */
const char *nx_tls_sni(const struct nx_tls *t);
/* Client side: serialise the session for resumption into buf[cap]: the length, NX_ETRUNC
 * (cap too small), -EAGAIN (TLS 1.3: the server's ticket has not arrived yet; feed more),
 * -EINVAL (server side or not ready). */
int nx_tls_session_save(const struct nx_tls *t, uint8_t *buf, size_t cap);
bool nx_tls_resumed(const struct nx_tls *t);
/* Why the peer's certificate was refused ("name mismatch", "untrusted", "pin mismatch", ...),
 * after nx_tls_feed returned NX_ETLS_VERIFY; NULL otherwise. Static string. */
const char *nx_tls_verify_detail(const struct nx_tls *t);
/* Send close_notify (through io->send) when ready and not failed; the caller closes after. */
void nx_tls_bye(struct nx_tls *t);
void nx_tls_free(struct nx_tls *t); /* NULL is a no-op; never calls io */
/* Bytes the session charges to NX_OWNER_tls (its struct + the measured GnuTLS estimate). */
size_t nx_tls_charged(const struct nx_tls *t);
/* Short label for a code nx_tls_* returned: "handshake", "verify", "bad_record", "alert",
 * "transport", "closed", "no_memory", "not_ready", or "error". Never NULL. */
const char *nx_tls_error_reason(int rc);

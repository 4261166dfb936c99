/*
 * net/ internals shared by tls.c (sessions) and tls_cert.c (credentials, self-signed
 * certificates). Not included from outside net/.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gnutls/gnutls.h>

/* Immutable once built (the refcount aside): read by sessions on every worker. */
struct nx_tls_creds {
	atomic_int refs;
	bool server;
	bool has_ca;			       /* client: some trust anchor to verify against */
	gnutls_certificate_credentials_t x509; /* owned */
	gnutls_priority_t prio;		       /* owned; TLS 1.2 + 1.3 only, shared by sessions */
	gnutls_datum_t ticket_key;	       /* owned (gnutls_free); server only */
	uint8_t (*pins)[32];		       /* owned (ledger, NX_OWNER_tls), n_pins entries */
	size_t n_pins;
	uint8_t spki_sha256[32]; /* server: pin of the leaf certificate */
	char *cert_pem;		 /* owned (ledger), server leaf, NUL-terminated */
	size_t cert_pem_len;
	size_t charged; /* estimate charged with nx_ledger_charge */
};

/* SHA-256 of the SubjectPublicKeyInfo of the DER certificate der. 0 or < 0 (GnuTLS code). */
int nx_tls_spki_sha256(const gnutls_datum_t *der, uint8_t out[32]);

/* Client credentials' certificate check (gnutls_certificate_set_verify_function): pins first,
 * then the CA chain, key purpose and name or IP of the session. 0 accepts. */
int nx_tls_verify_peer(gnutls_session_t s);

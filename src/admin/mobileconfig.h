/*
 * Apple configuration profiles (.mobileconfig) for the encrypted DNS listeners: one
 * com.apple.dnsSettings.managed payload (DoH: DNSProtocol HTTPS + ServerURL; DoT: TLS +
 * ServerName) and, for the self-signed certificate, a com.apple.security.root payload that
 * makes the device trust it.
 *
 * The generator is a pure function over borrowed strings: no allocation, no I/O, any thread.
 * Every string that reaches the XML is escaped (&, <, >, ", '; control bytes refused), so a
 * server name or address from the config cannot change the document's structure.
 *
 * UUIDs and identifiers are derived from (protocol, host, port, client id), not random: a
 * device that installs the profile again replaces the earlier one instead of adding another.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* A profile with the self-signed ECDSA P-256 certificate is ~3.5 KiB; a bigger certificate
 * (RSA 4096, ~2 KiB of PEM) still fits. Beyond this the generator answers NX_ETRUNC. */
#define NX_MOBILECONFIG_MAX (16 * 1024)
/* ServerAddresses written at most (one per listener address, wildcards replaced). */
#define NX_MOBILECONFIG_ADDRS_MAX 16

enum nx_mobileconfig_proto {
	NX_MOBILECONFIG_DOH, /* DNSProtocol HTTPS, ServerURL https://host:port/dns-query[/id] */
	NX_MOBILECONFIG_DOT, /* DNSProtocol TLS, ServerName [id.]host (Apple always uses 853) */
};

struct nx_mobileconfig {
	enum nx_mobileconfig_proto proto;
	const char *host;      /* borrowed: tls.server_name, or an address literal (IPv6 without
				* brackets: they are added in the URL) */
	uint16_t port;	       /* the DoH URL's port (DoT: only described, see README) */
	const char *client_id; /* borrowed: NULL or "" for none, else a well-formed client id */
	const char *const *addresses; /* borrowed: ServerAddresses (IP literals), may be empty */
	size_t n_addresses;	      /* <= NX_MOBILECONFIG_ADDRS_MAX */
	const char *cert_pem; /* borrowed: the certificate to trust (first PEM block is used), or
			       * NULL: no root payload (a certificate the device already trusts) */
};

/*
 * Write the profile (a plist XML document) into out[cap], NUL-terminated. Returns its length,
 * or -EINVAL (no host; a DoT client id with an address literal as host: the id travels in the
 * SNI, which needs a name; a string with a control byte; a certificate that is not PEM
 * base64; too many addresses), NX_ETRUNC (cap too small).
 */
int nx_mobileconfig_write(const struct nx_mobileconfig *p, char *out, size_t cap);

/* Is `text` an IPv4 or IPv6 address literal? (Host names and literals are written
 * differently.) */
int nx_mobileconfig_is_ip(const char *text);

/*
 * TLS credentials (server certificate + key, client trust) and self-signed certificates.
 * See net/tls.h. Everything here runs at startup, reload or from the CLI: never per query.
 */
#include "net/tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <sodium.h>

#include "base/err.h"
#include "base/ledger.h"
#include "net/tls_impl.h"

/* TLS 1.2 and 1.3 only (RFC 8996 retired the older ones; RFC 8310 asks for 1.2+). The
 * server picks the cipher it prefers: clients on a Pi's network include old phones. */
/* X25519 first: what OpenSSL, browsers and Android send a key share for, so a default ClientHello
 * gets no HelloRetryRequest (one round trip and a P-256 exchange more per connection). */
#define PRIO_SERVER                                                                             \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"   \
	"+GROUP-SECP384R1:+GROUP-SECP521R1:%SERVER_PRECEDENCE"
#define PRIO_CLIENT "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
/* Largest PEM file read: a long chain fits many times; anything bigger is not a cert file. */
#define PEM_FILE_MAX (1u << 20)
/* Self-signed validity: ~10 years, starting a day back for clients whose clock is behind. */
#define SELFSIGNED_DAYS 3650
#define SELFSIGNED_BACKDATE_S (24 * 3600)

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* The whole file into a malloc'd buffer (plus a NUL), for GnuTLS's PEM importers. */
static int read_file(const char *path, gnutls_datum_t *out, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return fail(err, errlen, -e, "%s: cannot read: %s", path, strerror(e));
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)PEM_FILE_MAX) {
		int e = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
		close(fd);
		return fail(err, errlen, -e, "%s: %s", path,
			    e == EFBIG ? "larger than 1 MiB, not a PEM file"
				       : "not a regular file");
	}
	size_t cap = (size_t)st.st_size, n = 0;
	uint8_t *buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return fail(err, errlen, -ENOMEM, "%s: out of memory", path);
	}
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return fail(err, errlen, -e, "%s: cannot read: %s", path, strerror(e));
		}
		if (r == 0) {
			break;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	out->data = buf;
	out->size = (unsigned)n;
	return 0;
}

static void free_secret(gnutls_datum_t *d)
{
	if (d->data) {
		gnutls_memset(d->data, 0, d->size);
		free(d->data);
	}
	d->data = NULL;
	d->size = 0;
}

int nx_tls_spki_sha256(const gnutls_datum_t *der, uint8_t out[32])
{
	gnutls_x509_crt_t crt = NULL;
	gnutls_pubkey_t pub = NULL;
	gnutls_datum_t spki = {NULL, 0};
	int r = gnutls_x509_crt_init(&crt);
	if (r >= 0) {
		r = gnutls_x509_crt_import(crt, der, GNUTLS_X509_FMT_DER);
	}
	if (r >= 0) {
		r = gnutls_pubkey_init(&pub);
	}
	if (r >= 0) {
		r = gnutls_pubkey_import_x509(pub, crt, 0);
	}
	if (r >= 0) {
		r = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &spki);
	}
	if (r >= 0) {
		r = gnutls_hash_fast(GNUTLS_DIG_SHA256, spki.data, spki.size, out);
	}
	gnutls_free(spki.data);
	gnutls_pubkey_deinit(pub);
	gnutls_x509_crt_deinit(crt);
	return r < 0 ? r : 0;
}

static struct nx_tls_creds *creds_alloc(bool server)
{
	struct nx_tls_creds *c = nx_mem_calloc(NX_OWNER_tls, 1, sizeof(*c));
	if (c) {
		atomic_init(&c->refs, 1);
		c->server = server;
	}
	return c;
}

static void creds_destroy(struct nx_tls_creds *c)
{
	if (c->x509) {
		gnutls_certificate_free_credentials(c->x509);
	}
	if (c->prio) {
		gnutls_priority_deinit(c->prio);
	}
	if (c->ticket_key.data) {
		gnutls_memset(c->ticket_key.data, 0, c->ticket_key.size);
		gnutls_free(c->ticket_key.data);
	}
	nx_mem_free(NX_OWNER_tls, c->pins, c->n_pins * sizeof(*c->pins));
	nx_mem_free(NX_OWNER_tls, c->cert_pem, c->cert_pem ? c->cert_pem_len + 1 : 0);
	nx_ledger_charge(NX_OWNER_tls, -(int64_t)c->charged, 0);
	nx_mem_free(NX_OWNER_tls, c, sizeof(*c));
}

void nx_tls_creds_ref(struct nx_tls_creds *c)
{
	atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void nx_tls_creds_unref(struct nx_tls_creds *c)
{
	/* acq_rel: the last owner must see every other owner's writes before destroying. */
	if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
		creds_destroy(c);
	}
}

size_t nx_tls_creds_charged(const struct nx_tls_creds *c)
{
	return sizeof(*c) + c->charged + c->n_pins * sizeof(*c->pins) +
	       (c->cert_pem ? c->cert_pem_len + 1 : 0);
}

static int set_priority(struct nx_tls_creds *c, char *err, size_t errlen)
{
	const char *pos = NULL;
	int r = gnutls_priority_init2(&c->prio, c->server ? PRIO_SERVER : PRIO_CLIENT, &pos, 0);
	if (r < 0) {
		return fail(err, errlen, NX_ECONFIG, "TLS priority string rejected at '%s': %s",
			    pos ? pos : "", gnutls_strerror(r));
	}
	return 0;
}

/* Server: certificate chain, key, their match, expiry, pin, leaf PEM, ticket key. */
static int server_fill(struct nx_tls_creds *c, const char *cert_path, const char *key_path,
		       char *err, size_t errlen)
{
	gnutls_datum_t cd = {NULL, 0}, kd = {NULL, 0}, pem = {NULL, 0};
	gnutls_x509_crt_t *crts = NULL;
	unsigned n_crts = 0;
	gnutls_x509_privkey_t key = NULL;
	int rc = read_file(cert_path, &cd, err, errlen);
	if (rc) {
		goto out;
	}
	rc = read_file(key_path, &kd, err, errlen);
	if (rc) {
		goto out;
	}
	int r = gnutls_x509_crt_list_import2(&crts, &n_crts, &cd, GNUTLS_X509_FMT_PEM, 0);
	if (r < 0 || n_crts == 0) {
		rc = fail(err, errlen, NX_ECONFIG, "%s: not a PEM certificate (%s)", cert_path,
			  r < 0 ? gnutls_strerror(r) : "no certificate in it");
		goto out;
	}
	time_t now = time(NULL), until = gnutls_x509_crt_get_expiration_time(crts[0]);
	if (until != (time_t)-1 && until < now) {
		char day[32];
		struct tm tm;
		strftime(day, sizeof(day), "%Y-%m-%d", gmtime_r(&until, &tm));
		rc = fail(err, errlen, NX_ECONFIG, "%s: the certificate expired on %s", cert_path,
			  day);
		goto out;
	}
	r = gnutls_x509_privkey_init(&key);
	if (r >= 0) {
		r = gnutls_x509_privkey_import2(key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	}
	if (r < 0) {
		rc = fail(err, errlen, NX_ECONFIG,
			  "%s: not a PEM private key, or an encrypted one (%s)", key_path,
			  gnutls_strerror(r));
		goto out;
	}
	r = gnutls_certificate_allocate_credentials(&c->x509);
	if (r >= 0) {
		r = gnutls_certificate_set_x509_key(c->x509, crts, n_crts, key);
	}
	if (r == GNUTLS_E_CERTIFICATE_KEY_MISMATCH) {
		rc = fail(err, errlen, NX_ECONFIG,
			  "%s: the key does not match the certificate in %s", key_path, cert_path);
		goto out;
	}
	if (r < 0) {
		rc = fail(err, errlen, r == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : NX_ECONFIG,
			  "%s: cannot use the certificate with %s: %s", cert_path, key_path,
			  gnutls_strerror(r));
		goto out;
	}
	gnutls_datum_t der = {NULL, 0};
	r = gnutls_x509_crt_export2(crts[0], GNUTLS_X509_FMT_DER, &der);
	if (r >= 0) {
		r = nx_tls_spki_sha256(&der, c->spki_sha256);
		gnutls_free(der.data);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_export2(crts[0], GNUTLS_X509_FMT_PEM, &pem);
	}
	if (r >= 0) {
		c->cert_pem = nx_mem_alloc(NX_OWNER_tls, pem.size + 1);
		r = c->cert_pem ? 0 : GNUTLS_E_MEMORY_ERROR;
	}
	if (r >= 0) {
		memcpy(c->cert_pem, pem.data, pem.size);
		c->cert_pem[pem.size] = '\0';
		c->cert_pem_len = pem.size;
		/* One ticket key per credentials: a reload (new credentials) also retires every
		 * ticket issued under the old certificate. GnuTLS rotates keys derived from it. */
		r = gnutls_session_ticket_key_generate(&c->ticket_key);
	}
	if (r < 0) {
		rc = fail(err, errlen, -ENOMEM, "%s: %s", cert_path, gnutls_strerror(r));
		goto out;
	}
	rc = set_priority(c, err, errlen);
out:
	gnutls_free(pem.data);
	for (unsigned i = 0; i < n_crts; i++) {
		gnutls_x509_crt_deinit(crts[i]);
	}
	gnutls_free(crts);
	gnutls_x509_privkey_deinit(key);
	free(cd.data);
	free_secret(&kd);
	return rc;
}

int nx_tls_creds_server_load(const char *cert_path, const char *key_path, struct nx_tls_creds **out,
			     char *err, size_t errlen)
{
	*out = NULL;
	struct nx_tls_creds *c = creds_alloc(true);
	if (!c) {
		return fail(err, errlen, -ENOMEM, "out of memory");
	}
	int rc = server_fill(c, cert_path, key_path, err, errlen);
	if (rc) {
		creds_destroy(c);
		return rc;
	}
	c->charged = NX_TLS_SERVER_CREDS_BYTES;
	nx_ledger_charge(NX_OWNER_tls, (int64_t)c->charged, 0);
	*out = c;
	return 0;
}

int nx_tls_creds_client_new_ca(bool system_ca, const char *ca_path, const uint8_t (*pins)[32],
			       size_t n_pins, struct nx_tls_creds **out, char *err, size_t errlen)
{
	*out = NULL;
	if ((!system_ca && !ca_path && !n_pins) || (n_pins && !pins)) {
		return fail(err, errlen, -EINVAL,
			    "nothing to trust: no system CAs, no CA file and no pin");
	}
	struct nx_tls_creds *c = creds_alloc(false);
	if (!c) {
		return fail(err, errlen, -ENOMEM, "out of memory");
	}
	int rc = 0, n_ca = 0;
	int r = gnutls_certificate_allocate_credentials(&c->x509);
	if (r < 0) {
		rc = fail(err, errlen, -ENOMEM, "%s", gnutls_strerror(r));
		goto fail;
	}
	if (system_ca) {
		r = gnutls_certificate_set_x509_system_trust(c->x509);
		if (r <= 0) {
			rc = fail(err, errlen, NX_ECONFIG,
				  "no system CA certificates (is ca-certificates installed?)%s%s",
				  r < 0 ? ": " : "", r < 0 ? gnutls_strerror(r) : "");
			goto fail;
		}
		n_ca += r;
	}
	if (ca_path) {
		gnutls_datum_t d = {NULL, 0};
		rc = read_file(ca_path, &d, err, errlen);
		if (rc) {
			goto fail;
		}
		r = gnutls_certificate_set_x509_trust_mem(c->x509, &d, GNUTLS_X509_FMT_PEM);
		free(d.data);
		if (r <= 0) {
			rc = fail(err, errlen, NX_ECONFIG, "%s: not a PEM certificate (%s)",
				  ca_path, r < 0 ? gnutls_strerror(r) : "no certificate in it");
			goto fail;
		}
		n_ca += r;
	}
	c->has_ca = n_ca > 0;
	if (n_pins) {
		c->pins = nx_mem_alloc(NX_OWNER_tls, n_pins * sizeof(*c->pins));
		if (!c->pins) {
			rc = fail(err, errlen, -ENOMEM, "out of memory");
			goto fail;
		}
		memcpy(c->pins, pins, n_pins * sizeof(*c->pins));
		c->n_pins = n_pins;
	}
	gnutls_certificate_set_verify_function(c->x509, nx_tls_verify_peer);
	rc = set_priority(c, err, errlen);
	if (rc) {
		goto fail;
	}
	c->charged = NX_TLS_CLIENT_CREDS_BYTES + (size_t)n_ca * NX_TLS_CA_BYTES;
	nx_ledger_charge(NX_OWNER_tls, (int64_t)c->charged, 0);
	*out = c;
	return 0;
fail:
	creds_destroy(c);
	return rc;
}

int nx_tls_creds_client_new(bool system_ca, const uint8_t (*pins)[32], size_t n_pins,
			    struct nx_tls_creds **out, char *err, size_t errlen)
{
	return nx_tls_creds_client_new_ca(system_ca, NULL, pins, n_pins, out, err, errlen);
}

int nx_tls_creds_pin(const struct nx_tls_creds *c, char out[45])
{
	if (!c->server) {
		return -EINVAL;
	}
	sodium_bin2base64(out, 45, c->spki_sha256, sizeof(c->spki_sha256),
			  sodium_base64_VARIANT_ORIGINAL);
	return 0;
}

int nx_tls_creds_cert_pem(const struct nx_tls_creds *c, char **pem_out, size_t *len)
{
	if (!c->server || !c->cert_pem) {
		return -EINVAL;
	}
	char *p = malloc(c->cert_pem_len + 1);
	if (!p) {
		return -ENOMEM;
	}
	memcpy(p, c->cert_pem, c->cert_pem_len + 1);
	*pem_out = p;
	*len = c->cert_pem_len;
	return 0;
}

/* ---- self-signed certificates ---- */

/* A SAN dNSName (RFC 5280 4.2.1.6: LDH labels; "*" only as the whole leftmost label).
 * Lower-cases into out and drops one trailing dot. */
static bool dns_name_ok(const char *in, char out[NX_TLS_SNI_MAX + 2])
{
	size_t n = strlen(in);
	if (n && in[n - 1] == '.') {
		n--;
	}
	if (n == 0 || n > NX_TLS_SNI_MAX) {
		return false;
	}
	size_t label = 0;
	for (size_t i = 0; i <= n; i++) {
		char ch = i < n ? (char)tolower((unsigned char)in[i]) : '.';
		if (ch == '.') {
			if (label == 0 || label > 63 || out[i - 1] == '-' ||
			    out[i - label] == '-') {
				return false;
			}
			label = 0;
		} else if (ch == '*') {
			if (i != 0 || n < 3 || in[1] != '.') {
				return false;
			}
			label++;
		} else if (isalnum((unsigned char)ch) || ch == '-') {
			label++;
		} else {
			return false;
		}
		out[i] = ch;
	}
	out[n] = '\0';
	return true;
}

/* data → DIR/NAME atomically: temp file in DIR, mode, fsync, rename. */
static int write_atomic(const char *dir, const char *name, const gnutls_datum_t *data, mode_t mode,
			char *err, size_t errlen)
{
	char path[4096], tmp[4096];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >= sizeof(tmp)) {
		return fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
	}
	int fd = mkostemp(tmp, O_CLOEXEC); /* created 0600: the key is never readable by others */
	if (fd < 0) {
		int e = errno;
		return fail(err, errlen, -e, "cannot create a file in %s: %s", dir, strerror(e));
	}
	int e = 0;
	if (fchmod(fd, mode) < 0) {
		e = errno;
	}
	for (size_t off = 0; !e && off < data->size;) {
		ssize_t w = write(fd, data->data + off, data->size - off);
		if (w < 0 && errno == EINTR) {
			continue;
		}
		if (w < 0) {
			e = errno;
			break;
		}
		off += (size_t)w;
	}
	if (!e && fsync(fd) < 0) {
		e = errno;
	}
	if (close(fd) < 0 && !e) {
		e = errno;
	}
	if (!e && rename(tmp, path) < 0) {
		e = errno;
	}
	if (e) {
		unlink(tmp);
		return fail(err, errlen, -e, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

static int fsync_dir(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
		}
		return fail(err, errlen, -e, "cannot sync %s: %s", dir, strerror(e));
	}
	close(fd);
	return 0;
}

struct san_list {
	char dns[NX_TLS_SAN_MAX][NX_TLS_SNI_MAX + 2];
	size_t n_dns;
	uint8_t ip[NX_TLS_SAN_MAX][16];
	unsigned ip_len[NX_TLS_SAN_MAX];
	size_t n_ip;
};

static void add_ip(struct san_list *s, const uint8_t *a, unsigned len)
{
	for (size_t i = 0; i < s->n_ip; i++) {
		if (s->ip_len[i] == len && memcmp(s->ip[i], a, len) == 0) {
			return;
		}
	}
	memcpy(s->ip[s->n_ip], a, len);
	s->ip_len[s->n_ip++] = len;
}

static int sans_parse(const char *const *names, size_t n, struct san_list *s, char *err,
		      size_t errlen)
{
	if (n > NX_TLS_SAN_MAX - 2) {
		return fail(err, errlen, NX_ELIMIT, "at most %d names", NX_TLS_SAN_MAX - 2);
	}
	static const uint8_t lo4[4] = {127, 0, 0, 1}, lo6[16] = {[15] = 1};
	for (size_t i = 0; i < n; i++) {
		uint8_t a[16];
		if (inet_pton(AF_INET, names[i], a) == 1) {
			add_ip(s, a, 4);
		} else if (inet_pton(AF_INET6, names[i], a) == 1) {
			add_ip(s, a, 16);
		} else if (dns_name_ok(names[i], s->dns[s->n_dns])) {
			s->n_dns++;
		} else {
			return fail(err, errlen, -EINVAL,
				    "'%s' is neither a host name nor an IP address", names[i]);
		}
	}
	add_ip(s, lo4, 4);
	add_ip(s, lo6, 16);
	return 0;
}

/* Key and certificate built in memory, exported as PEM. */
static int selfsigned_make(const struct san_list *s, gnutls_datum_t *cert_pem,
			   gnutls_datum_t *key_pem)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	int r = gnutls_x509_privkey_init(&key);
	if (r >= 0) {
		r = gnutls_x509_privkey_generate(
		    key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_init(&crt);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_version(crt, 3);
	}
	uint8_t serial[16];
	if (r >= 0) {
		r = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
		serial[0] &= 0x7f; /* a positive INTEGER (RFC 5280 4.1.2.2) */
		serial[0] |= 0x01; /* and exactly 16 bytes: no leading zero octet dropped */
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
	}
	time_t now = time(NULL);
	if (r >= 0) {
		r = gnutls_x509_crt_set_activation_time(crt, now - SELFSIGNED_BACKDATE_S);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_expiration_time(crt, now + (time_t)SELFSIGNED_DAYS * 86400);
	}
	const char *cn = s->n_dns ? s->dns[0] : "nxdns";
	if (r >= 0) {
		r = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
						  (unsigned)strlen(cn));
	}
	for (size_t i = 0; r >= 0 && i < s->n_dns; i++) {
		r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, s->dns[i],
							 (unsigned)strlen(s->dns[i]),
							 GNUTLS_FSAN_APPEND);
	}
	for (size_t i = 0; r >= 0 && i < s->n_ip; i++) {
		r = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, s->ip[i],
							 s->ip_len[i], GNUTLS_FSAN_APPEND);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_key(crt, key);
	}
	/* An end-entity certificate (CA:FALSE: Firefox refuses a CA certificate as a server's)
	 * that clients may still install as their own trust anchor for it. EKU serverAuth:
	 * Apple requires it. */
	if (r >= 0) {
		r = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
	}
	uint8_t kid[32];
	size_t kid_len = sizeof(kid);
	if (r >= 0) {
		r = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, kid, &kid_len);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_set_subject_key_id(crt, kid, kid_len);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
	}
	if (r >= 0) {
		r = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, cert_pem);
	}
	if (r >= 0) {
		r = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL,
						      GNUTLS_PKCS_PLAIN, key_pem);
	}
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
	return r < 0 ? r : 0;
}

int nx_tls_selfsigned_write(const char *dir, const char *const *dns_names, size_t n_dns, char *err,
			    size_t errlen)
{
	struct san_list *s = calloc(1, sizeof(*s)); /* ~17 KiB: off the stack */
	if (!s) {
		return fail(err, errlen, -ENOMEM, "out of memory");
	}
	gnutls_datum_t cert = {NULL, 0}, key = {NULL, 0};
	int rc = sans_parse(dns_names, n_dns, s, err, errlen);
	if (!rc) {
		int r = selfsigned_make(s, &cert, &key);
		if (r < 0) {
			rc = fail(err, errlen, r == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : NX_ECONFIG,
				  "cannot make a certificate: %s", gnutls_strerror(r));
		}
	}
	/* The key first: a crash between the two leaves no certificate, which ensure() takes
	 * as "not generated yet", never a certificate without its key. */
	if (!rc) {
		rc = write_atomic(dir, "key.pem", &key, 0600, err, errlen);
	}
	if (!rc) {
		rc = write_atomic(dir, "cert.pem", &cert, 0644, err, errlen);
	}
	if (!rc) {
		rc = fsync_dir(dir, err, errlen);
	}
	if (key.data) {
		gnutls_memset(key.data, 0, key.size);
	}
	gnutls_free(key.data);
	gnutls_free(cert.data);
	free(s);
	return rc;
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p) {
		snprintf(p, n, "%s/%s", dir, name);
	}
	return p;
}

int nx_tls_selfsigned_ensure(const char *state_dir, const char *server_name, char **cert_path,
			     char **key_path, bool *created, char *err, size_t errlen)
{
	char *dir = path_join(state_dir, "tls");
	char *cp = dir ? path_join(dir, "cert.pem") : NULL;
	char *kp = dir ? path_join(dir, "key.pem") : NULL;
	int rc = 0;
	if (!cp || !kp) {
		rc = fail(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	/* 0700: only the daemon's user lists what is in it. */
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int e = errno;
		rc = fail(err, errlen, -e, "cannot create %s: %s", dir, strerror(e));
		goto out;
	}
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = fail(err, errlen, -ENOTDIR, "%s: not a directory", dir);
		goto out;
	}
	*created = !(access(cp, F_OK) == 0 && access(kp, F_OK) == 0);
	if (*created) {
		const char *names[1] = {server_name};
		rc = nx_tls_selfsigned_write(dir, names, server_name ? 1 : 0, err, errlen);
	}
out:
	free(dir);
	if (rc) {
		free(cp);
		free(kp);
		return rc;
	}
	*cert_path = cp;
	*key_path = kp;
	return 0;
}

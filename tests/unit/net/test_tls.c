/*
 * The TLS transform (net/tls.h): a server and a client session wired to each other in memory
 * (each one's io->send queues bytes that the pump feeds to the other, as the stream layer
 * would): handshake, data both ways, ALPN, SNI, certificate checks (name, IP, pins, trust),
 * garbage and truncated input, resumption, cork/uncork, close_notify, transport failure, a
 * free from inside a callback; credentials loading errors; self-signed write/ensure; the pin
 * against certtool; and the mallinfo2 measurement behind the ledger's estimates. Every test
 * ends with NX_OWNER_tls back where it started.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <malloc.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <sodium.h>

#include "base/err.h"
#include "base/ledger.h"
#include "base/stats.h"
#include "net/tls.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
/* ThreadSanitizer's allocator is not glibc's either: mallinfo2 reads zeros under it too */
#if defined(__SANITIZE_THREAD__) && !defined(UNDER_ASAN)
#define UNDER_ASAN 1
#endif

#define WIRE_MAX (256 * 1024)

struct peer {
	struct nx_tls *t;
	uint8_t *out; /* ciphertext it sent, not yet fed to the other side */
	size_t out_len;
	uint8_t *rx; /* application bytes it received */
	size_t rx_len;
	int recvs; /* io->recv calls */
	int sends; /* io->send calls */
	int readies;
	bool fail_send;
	bool free_in_recv; /* nx_tls_free from inside io->recv */
	int feed_rc;	   /* first non-zero nx_tls_feed result */
};

static int on_send(void *ud, const uint8_t *data, size_t len)
{
	struct peer *p = ud;
	p->sends++;
	if (p->fail_send) {
		return -EPIPE;
	}
	assert_true(p->out_len + len <= WIRE_MAX);
	memcpy(p->out + p->out_len, data, len);
	p->out_len += len;
	return 0;
}

static void on_recv(void *ud, const uint8_t *data, size_t len)
{
	struct peer *p = ud;
	p->recvs++;
	assert_true(p->rx_len + len <= WIRE_MAX);
	memcpy(p->rx + p->rx_len, data, len);
	p->rx_len += len;
	if (p->free_in_recv) {
		nx_tls_free(p->t);
		p->t = NULL;
	}
}

static void on_ready(void *ud)
{
	((struct peer *)ud)->readies++;
}

static const struct nx_tls_io io = {.send = on_send, .recv = on_recv, .ready = on_ready};

struct fx {
	char dir[64]; /* temp dir with cert.pem, key.pem (names dns.test, 192.0.2.1) */
	char cert[96], key[96];
	struct nx_tls_creds *srv;
	struct nx_tls_creds *cli; /* trusts cert.pem as a CA */
	struct peer s, c;
	int64_t led0;
};

static int64_t tls_ledger(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_tls].bytes;
}

static void peer_init(struct peer *p)
{
	memset(p, 0, sizeof(*p));
	p->out = malloc(WIRE_MAX);
	p->rx = malloc(WIRE_MAX);
	assert_non_null(p->out);
	assert_non_null(p->rx);
}

static void peer_reset(struct peer *p)
{
	nx_tls_free(p->t);
	free(p->out);
	free(p->rx);
	peer_init(p);
}

static void peer_deinit(struct peer *p)
{
	nx_tls_free(p->t);
	free(p->out);
	free(p->rx);
	memset(p, 0, sizeof(*p));
}

/* Move bytes from `from`'s output into `to` until nothing is in flight. */
static void feed_from(struct peer *from, struct peer *to)
{
	uint8_t *buf = malloc(WIRE_MAX);
	size_t n = from->out_len;
	memcpy(buf, from->out, n);
	from->out_len = 0;
	if (to->t && n && !to->feed_rc) {
		to->feed_rc = nx_tls_feed(to->t, buf, n);
	}
	free(buf);
}

static void pump(struct fx *f)
{
	for (int i = 0; i < 64 && (f->c.out_len || f->s.out_len); i++) {
		feed_from(&f->c, &f->s);
		feed_from(&f->s, &f->c);
	}
	assert_int_equal(f->c.out_len + f->s.out_len, 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	f->led0 = tls_ledger();
	strcpy(f->dir, "/tmp/nx-tls-test-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->cert, sizeof(f->cert), "%s/cert.pem", f->dir);
	snprintf(f->key, sizeof(f->key), "%s/key.pem", f->dir);
	const char *names[] = {"dns.test", "192.0.2.1"};
	char err[256] = "";
	assert_int_equal(nx_tls_selfsigned_write(f->dir, names, 2, err, sizeof(err)), 0);
	assert_int_equal(nx_tls_creds_server_load(f->cert, f->key, &f->srv, err, sizeof(err)), 0);
	assert_int_equal(
	    nx_tls_creds_client_new_ca(false, f->cert, NULL, 0, &f->cli, err, sizeof(err)), 0);
	peer_init(&f->s);
	peer_init(&f->c);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	peer_deinit(&f->s);
	peer_deinit(&f->c);
	nx_tls_creds_unref(f->srv);
	nx_tls_creds_unref(f->cli);
	nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	assert_int_equal(tls_ledger(), f->led0);
	free(f);
	return 0;
}

/* A server and a client session; the handshake pumped to its end. */
static void connect_pair(struct fx *f, struct nx_tls_creds *cli, const char *name, const char *ip,
			 enum nx_tls_alpn salpn, enum nx_tls_alpn calpn, const uint8_t *resume,
			 size_t resume_len)
{
	assert_int_equal(nx_tls_server_new(f->srv, salpn, &io, &f->s, &f->s.t), 0);
	assert_int_equal(
	    nx_tls_client_new(cli, name, ip, calpn, resume, resume_len, &io, &f->c, &f->c.t), 0);
	assert_true(f->c.out_len > 0); /* the ClientHello left at once */
	pump(f);
}

static void test_handshake_and_data(void **state)
{
	struct fx *f = *state;
	uint64_t ready0 = nx_stat_read(NX_STAT_TLS_SRV_READY);
	assert_int_equal(nx_tls_server_new(f->srv, NX_TLS_ALPN_NONE, &io, &f->s, &f->s.t), 0);
	assert_int_equal(nx_tls_write(f->s.t, (const uint8_t *)"x", 1), -ENOTCONN);
	assert_false(nx_tls_is_ready(f->s.t));
	assert_int_equal(nx_tls_client_new(f->cli, "dns.test", NULL, NX_TLS_ALPN_NONE, NULL, 0, &io,
					   &f->c, &f->c.t),
			 0);
	pump(f);
	assert_int_equal(f->s.feed_rc, 0);
	assert_int_equal(f->c.feed_rc, 0);
	assert_true(nx_tls_is_ready(f->s.t));
	assert_true(nx_tls_is_ready(f->c.t));
	assert_int_equal(f->s.readies, 1);
	assert_int_equal(f->c.readies, 1);
	assert_int_equal(nx_stat_read(NX_STAT_TLS_SRV_READY), ready0 + 1);
	assert_int_equal(nx_tls_alpn_negotiated(f->s.t), NX_TLS_ALPN_NONE);
	assert_false(nx_tls_resumed(f->c.t));

	assert_int_equal(nx_tls_write(f->c.t, (const uint8_t *)"\x00\x05hello", 7), 0);
	pump(f);
	assert_int_equal(f->s.rx_len, 7);
	assert_memory_equal(f->s.rx, "\x00\x05hello", 7);
	/* A big answer both ways: split into records, reassembled in order. */
	uint8_t big[40000];
	for (size_t i = 0; i < sizeof(big); i++) {
		big[i] = (uint8_t)(i * 7);
	}
	assert_int_equal(nx_tls_write(f->s.t, big, sizeof(big)), 0);
	pump(f);
	assert_int_equal(f->c.rx_len, sizeof(big));
	assert_memory_equal(f->c.rx, big, sizeof(big));
	assert_true(f->c.recvs >= 3); /* one per record: 16 KiB max each */
	assert_int_equal(f->s.readies, 1);
}

static void test_alpn(void **state)
{
	struct fx *f = *state;
	static const struct {
		enum nx_tls_alpn s, c, want;
	} cases[] = {
	    {NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT},
	    {NX_TLS_ALPN_H2, NX_TLS_ALPN_H2, NX_TLS_ALPN_H2},
	    /* Android: no ALPN to a DoT listener, still served */
	    {NX_TLS_ALPN_DOT, NX_TLS_ALPN_NONE, NX_TLS_ALPN_NONE},
	    {NX_TLS_ALPN_NONE, NX_TLS_ALPN_H2, NX_TLS_ALPN_NONE},
	    /* an h2 client at a DoT listener: no protocol agreed, the DoT layer decides */
	    {NX_TLS_ALPN_DOT, NX_TLS_ALPN_H2, NX_TLS_ALPN_NONE},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(cases); i++) {
		connect_pair(f, f->cli, "dns.test", NULL, cases[i].s, cases[i].c, NULL, 0);
		assert_true(nx_tls_is_ready(f->s.t));
		assert_true(nx_tls_is_ready(f->c.t));
		assert_int_equal(nx_tls_alpn_negotiated(f->s.t), cases[i].want);
		assert_int_equal(nx_tls_alpn_negotiated(f->c.t), cases[i].want);
		peer_reset(&f->s);
		peer_reset(&f->c);
	}
}

static void test_sni(void **state)
{
	struct fx *f = *state;
	connect_pair(f, f->cli, "DNS.Test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	assert_true(nx_tls_is_ready(f->s.t));
	assert_string_equal(nx_tls_sni(f->s.t), "dns.test");
	assert_null(nx_tls_sni(f->c.t));
	peer_reset(&f->s);
	peer_reset(&f->c);
	/* By IP: no SNI (RFC 6066), the IP SAN is checked instead. */
	connect_pair(f, f->cli, NULL, "127.0.0.1", NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	assert_true(nx_tls_is_ready(f->c.t));
	assert_null(nx_tls_sni(f->s.t));
}

static void expect_verify_failure(struct fx *f, struct nx_tls_creds *cli, const char *name,
				  const char *ip, const char *detail)
{
	uint64_t v0 = nx_stat_read(NX_STAT_TLS_CLI_E_VERIFY);
	uint64_t a0 = nx_stat_read(NX_STAT_TLS_SRV_E_ALERT);
	connect_pair(f, cli, name, ip, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	assert_int_equal(f->c.feed_rc, NX_ETLS_VERIFY);
	assert_string_equal(nx_tls_error_reason(f->c.feed_rc), "verify");
	assert_string_equal(nx_tls_verify_detail(f->c.t), detail);
	assert_false(nx_tls_is_ready(f->c.t));
	assert_int_equal(f->c.readies, 0);
	/* The client told the server why. */
	assert_int_equal(f->s.feed_rc, NX_ETLS_ALERT);
	assert_false(nx_tls_is_ready(f->s.t));
	assert_int_equal(nx_stat_read(NX_STAT_TLS_CLI_E_VERIFY), v0 + 1);
	assert_int_equal(nx_stat_read(NX_STAT_TLS_SRV_E_ALERT), a0 + 1);
	/* Sticky: every later call gives the same code and sends nothing. */
	int sends = f->c.sends;
	assert_int_equal(nx_tls_feed(f->c.t, (const uint8_t *)"x", 1), NX_ETLS_VERIFY);
	assert_int_equal(nx_tls_write(f->c.t, (const uint8_t *)"x", 1), NX_ETLS_VERIFY);
	nx_tls_bye(f->c.t);
	assert_int_equal(f->c.sends, sends);
	peer_reset(&f->s);
	peer_reset(&f->c);
}

static void test_verify_name_and_ip(void **state)
{
	struct fx *f = *state;
	expect_verify_failure(f, f->cli, "other.test", NULL, "name mismatch");
	expect_verify_failure(f, f->cli, NULL, "10.0.0.1", "name mismatch");
	/* The right IP SANs: the given one and both loopbacks. */
	const char *ips[] = {"192.0.2.1", "127.0.0.1", "::1"};
	for (size_t i = 0; i < NX_ARRAY_LEN(ips); i++) {
		connect_pair(f, f->cli, NULL, ips[i], NX_TLS_ALPN_NONE, NX_TLS_ALPN_NONE, NULL, 0);
		assert_true(nx_tls_is_ready(f->c.t));
		peer_reset(&f->s);
		peer_reset(&f->c);
	}
	/* The system store does not know our self-signed certificate. */
	struct nx_tls_creds *sys;
	char err[256];
	assert_int_equal(nx_tls_creds_client_new(true, NULL, 0, &sys, err, sizeof(err)), 0);
	expect_verify_failure(f, sys, "dns.test", NULL, "untrusted");
	nx_tls_creds_unref(sys);
}

static void srv_pin(struct fx *f, uint8_t pin[32])
{
	char b64[45];
	assert_int_equal(nx_tls_creds_pin(f->srv, b64), 0);
	assert_int_equal(strlen(b64), 44);
	size_t n = 0;
	assert_int_equal(
	    sodium_base642bin(pin, 32, b64, 44, NULL, &n, NULL, sodium_base64_VARIANT_ORIGINAL), 0);
	assert_int_equal(n, 32);
}

static void test_pins(void **state)
{
	struct fx *f = *state;
	uint8_t pins[2][32];
	memset(pins[0], 0xab, 32);
	srv_pin(f, pins[1]);
	char err[256];
	struct nx_tls_creds *pinned;
	assert_int_equal(nx_tls_creds_client_new(false, (const uint8_t(*)[32])pins, 2, &pinned, err,
						 sizeof(err)),
			 0);
	/* A matching pin stands in for CA and name checks (kdig +tls-pin). */
	connect_pair(f, pinned, "any.name.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	assert_true(nx_tls_is_ready(f->c.t));
	peer_reset(&f->s);
	peer_reset(&f->c);
	nx_tls_creds_unref(pinned);

	assert_int_equal(nx_tls_creds_client_new(false, (const uint8_t(*)[32])pins, 1, &pinned, err,
						 sizeof(err)),
			 0);
	expect_verify_failure(f, pinned, "dns.test", NULL, "pin mismatch");
	nx_tls_creds_unref(pinned);
	/* A wrong pin with a CA to fall back on: the CA and name decide. */
	assert_int_equal(nx_tls_creds_client_new_ca(false, f->cert, (const uint8_t(*)[32])pins, 1,
						    &pinned, err, sizeof(err)),
			 0);
	connect_pair(f, pinned, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	assert_true(nx_tls_is_ready(f->c.t));
	peer_reset(&f->s);
	peer_reset(&f->c);
	expect_verify_failure(f, pinned, "other.test", NULL, "name mismatch");
	nx_tls_creds_unref(pinned);
	/* Nothing to trust is a usage error, with a message. */
	assert_int_equal(nx_tls_creds_client_new(false, NULL, 0, &pinned, err, sizeof(err)),
			 -EINVAL);
	assert_null(pinned);
	assert_non_null(strstr(err, "nothing to trust"));
}

static void test_garbage_to_server(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *b;
		size_t len;
	} junk[] = {
	    {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27},		      /* HTTP to the DoT port */
	    {"\x00\x1d\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00", 14}, /* plain DNS/TCP */
	    /* a whole handshake record holding a 1-byte ClientHello */
	    {"\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff", 10},
	    /* a record longer than TLS allows (2^14 + 2048) */
	    {"\x16\x03\x01\xff\xff", 5},
	};
	for (size_t i = 0; i < NX_ARRAY_LEN(junk); i++) {
		assert_int_equal(nx_tls_server_new(f->srv, NX_TLS_ALPN_DOT, &io, &f->s, &f->s.t),
				 0);
		int rc = nx_tls_feed(f->s.t, (const uint8_t *)junk[i].b, junk[i].len);
		assert_true(rc < 0);
		const char *why = nx_tls_error_reason(rc);
		assert_true(strcmp(why, "bad_record") == 0 || strcmp(why, "handshake") == 0);
		assert_false(nx_tls_is_ready(f->s.t));
		assert_int_equal(f->s.readies, 0);
		assert_int_equal(f->s.recvs, 0);
		assert_int_equal(nx_tls_feed(f->s.t, (const uint8_t *)"more", 4), rc);
		peer_reset(&f->s);
	}
	/* Random bytes, many lengths: an error or a wait for more, never a crash or ready. */
	uint8_t rnd[2048];
	for (int round = 0; round < 200; round++) {
		randombytes_buf(rnd, sizeof(rnd));
		if (round % 2) {
			rnd[0] = 0x16; /* a handshake record header to get further in */
			rnd[1] = 0x03;
			rnd[2] = 0x01;
		}
		assert_int_equal(nx_tls_server_new(f->srv, NX_TLS_ALPN_DOT, &io, &f->s, &f->s.t),
				 0);
		int rc = nx_tls_feed(f->s.t, rnd, 1 + (size_t)round * 10);
		assert_true(rc <= 0);
		assert_false(nx_tls_is_ready(f->s.t));
		peer_reset(&f->s);
	}
}

/* A plain GnuTLS client with its own priority string, over memory, against our server. */
struct raw {
	gnutls_session_t s;
	gnutls_certificate_credentials_t x509;
	uint8_t *in; /* from the server, not yet pulled */
	size_t in_len, in_off;
	struct peer *out; /* its ClientHello etc. go into out->out */
};

static ssize_t raw_push(gnutls_transport_ptr_t p, const void *data, size_t len)
{
	struct raw *r = p;
	memcpy(r->out->out + r->out->out_len, data, len);
	r->out->out_len += len;
	return (ssize_t)len;
}

static ssize_t raw_pull(gnutls_transport_ptr_t p, void *data, size_t len)
{
	struct raw *r = p;
	if (r->in_off == r->in_len) {
		gnutls_transport_set_errno(r->s, EAGAIN);
		return -1;
	}
	size_t n = NX_MIN(len, r->in_len - r->in_off);
	memcpy(data, r->in + r->in_off, n);
	r->in_off += n;
	return (ssize_t)n;
}

/* Handshake a raw client with priority `prio` against a new server session: its result. */
static int raw_handshake(struct fx *f, struct raw *r, const char *prio)
{
	memset(r, 0, sizeof(*r));
	r->in = malloc(WIRE_MAX);
	r->out = &f->c;
	assert_int_equal(gnutls_init(&r->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK), 0);
	assert_int_equal(gnutls_priority_set_direct(r->s, prio, NULL), 0);
	assert_int_equal(gnutls_certificate_allocate_credentials(&r->x509), 0);
	assert_int_equal(gnutls_credentials_set(r->s, GNUTLS_CRD_CERTIFICATE, r->x509), 0);
	gnutls_transport_set_ptr(r->s, r);
	gnutls_transport_set_push_function(r->s, raw_push);
	gnutls_transport_set_pull_function(r->s, raw_pull);
	assert_int_equal(nx_tls_server_new(f->srv, NX_TLS_ALPN_DOT, &io, &f->s, &f->s.t), 0);
	int g = GNUTLS_E_AGAIN;
	for (int i = 0; i < 16 && g == GNUTLS_E_AGAIN; i++) {
		g = gnutls_handshake(r->s);
		feed_from(&f->c, &f->s);
		memcpy(r->in + r->in_len, f->s.out, f->s.out_len);
		r->in_len += f->s.out_len;
		f->s.out_len = 0;
	}
	return g;
}

static void raw_free(struct raw *r)
{
	gnutls_deinit(r->s);
	gnutls_certificate_free_credentials(r->x509);
	free(r->in);
}

static void test_versions(void **state)
{
	struct fx *f = *state;
	struct raw r;
	/* TLS 1.2 clients are served (old phones, old stub resolvers). */
	assert_int_equal(raw_handshake(f, &r, "NORMAL:-VERS-ALL:+VERS-TLS1.2"), 0);
	assert_int_equal(gnutls_protocol_get_version(r.s), GNUTLS_TLS1_2);
	feed_from(&f->c, &f->s); /* the client's Finished, sent by its last handshake call */
	assert_true(nx_tls_is_ready(f->s.t));
	assert_int_equal(gnutls_record_send(r.s, "ping", 4), 4);
	feed_from(&f->c, &f->s);
	assert_int_equal(f->s.feed_rc, 0);
	assert_int_equal(f->s.rx_len, 4);
	assert_memory_equal(f->s.rx, "ping", 4);
	raw_free(&r);
	peer_reset(&f->s);
	peer_reset(&f->c);
	/* TLS 1.1 and 1.0 are not (RFC 8996): the server fails the handshake and counts it. */
	uint64_t h0 = nx_stat_read(NX_STAT_TLS_SRV_E_HANDSHAKE);
	int g = raw_handshake(f, &r, "NORMAL:-VERS-ALL:+VERS-TLS1.1:+VERS-TLS1.0");
	assert_true(g < 0);
	assert_int_equal(f->s.feed_rc, NX_ETLS_HANDSHAKE);
	assert_false(nx_tls_is_ready(f->s.t));
	assert_int_equal(nx_stat_read(NX_STAT_TLS_SRV_E_HANDSHAKE), h0 + 1);
	raw_free(&r);
}

/*
 * Interop with another TLS stack: Python's ssl (OpenSSL 3) as the client over a real loopback
 * socket, our server session driven with blocking reads. TLS 1.3 and 1.2, ALPN "dot", SNI,
 * OpenSSL's own name check against cert.pem as the trust anchor.
 */
static const char interop_py[] =
    "import socket, ssl, sys\n"
    "port, cafile, ver = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
    "ctx = ssl.create_default_context(cafile=cafile)\n"
    "ctx.maximum_version = ssl.TLSVersion.TLSv1_2 if ver == '1.2' else ssl.TLSVersion.TLSv1_3\n"
    "ctx.set_alpn_protocols(['dot'])\n"
    "with socket.create_connection(('127.0.0.1', port), timeout=5) as raw:\n"
    "    with ctx.wrap_socket(raw, server_hostname='dns.test') as s:\n"
    "        assert s.selected_alpn_protocol() == 'dot', s.selected_alpn_protocol()\n"
    "        assert s.version() == ('TLSv1.2' if ver == '1.2' else 'TLSv1.3'), s.version()\n"
    "        s.sendall(b'ping')\n"
    "        got = b''\n"
    "        while len(got) < 4:\n"
    "            b = s.recv(4 - len(got))\n"
    "            assert b, 'eof'\n"
    "            got += b\n"
    "        assert got == b'pong', got\n"
    "        s.unwrap()\n";

struct sockpeer {
	int fd;
	struct peer p;
};

static int sock_send(void *ud, const uint8_t *data, size_t len)
{
	struct sockpeer *sp = ud;
	sp->p.sends++;
	while (len) {
		ssize_t n = send(sp->fd, data, len, MSG_NOSIGNAL);
		if (n <= 0) {
			return -EPIPE;
		}
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static void sock_recv(void *ud, const uint8_t *data, size_t len)
{
	struct sockpeer *sp = ud;
	memcpy(sp->p.rx + sp->p.rx_len, data, len);
	sp->p.rx_len += len;
	if (sp->p.rx_len == 4 && memcmp(sp->p.rx, "ping", 4) == 0) {
		assert_int_equal(nx_tls_write(sp->p.t, (const uint8_t *)"pong", 4), 0);
	}
}

static void sock_ready(void *ud)
{
	((struct sockpeer *)ud)->p.readies++;
}

static const struct nx_tls_io sock_io = {.send = sock_send, .recv = sock_recv, .ready = sock_ready};

static void interop_one(struct fx *f, const char *ver)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	socklen_t al = sizeof(a);
	getsockname(l, (struct sockaddr *)&a, &al);
	char port[16];
	snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/usr/bin/python3", "python3", "-c", interop_py, port, f->cert, ver,
		      (char *)NULL);
		_exit(127);
	}
	struct pollfd pfd = {.fd = l, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 10000), 1); /* bounded: the child connects or fails */
	struct sockpeer sp = {.fd = accept(l, NULL, NULL)};
	assert_true(sp.fd >= 0);
	close(l);
	struct timeval tv = {.tv_sec = 5};
	setsockopt(sp.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	peer_init(&sp.p);
	assert_int_equal(nx_tls_server_new(f->srv, NX_TLS_ALPN_DOT, &sock_io, &sp, &sp.p.t), 0);
	uint8_t buf[16384];
	int rc = 0;
	for (;;) {
		ssize_t n = recv(sp.fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			break; /* the client closed (or 5 s of silence) */
		}
		rc = nx_tls_feed(sp.p.t, buf, (size_t)n);
		if (rc) {
			break;
		}
	}
	assert_int_equal(rc, NX_ETLS_CLOSED); /* the client's unwrap() */
	assert_int_equal(sp.p.readies, 1);
	assert_int_equal(nx_tls_alpn_negotiated(sp.p.t), NX_TLS_ALPN_DOT);
	assert_string_equal(nx_tls_sni(sp.p.t), "dns.test");
	nx_tls_bye(sp.p.t);
	close(sp.fd);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	nx_tls_free(sp.p.t);
	free(sp.p.out);
	free(sp.p.rx);
}

static void test_interop_openssl(void **state)
{
	struct fx *f = *state;
	if (access("/usr/bin/python3", X_OK) != 0) {
		skip();
	}
	interop_one(f, "1.3");
	interop_one(f, "1.2");
}

static void test_truncated_handshake(void **state)
{
	struct fx *f = *state;
	assert_int_equal(nx_tls_server_new(f->srv, NX_TLS_ALPN_DOT, &io, &f->s, &f->s.t), 0);
	assert_int_equal(nx_tls_client_new(f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NULL, 0, &io,
					   &f->c, &f->c.t),
			 0);
	size_t hello = f->c.out_len;
	assert_true(hello > 10);
	/* The client stops after half its ClientHello: the server waits, no error. */
	assert_int_equal(nx_tls_feed(f->s.t, f->c.out, hello / 2), 0);
	assert_int_equal(nx_tls_feed(f->s.t, f->c.out + hello / 2, 1), 0);
	assert_false(nx_tls_is_ready(f->s.t));
	assert_int_equal(f->s.out_len, 0);
	assert_int_equal(f->s.readies, 0);
	/* The rest arrives later: the handshake completes. */
	assert_int_equal(nx_tls_feed(f->s.t, f->c.out + hello / 2 + 1, hello - hello / 2 - 1), 0);
	f->c.out_len = 0;
	pump(f);
	assert_true(nx_tls_is_ready(f->s.t));
	assert_true(nx_tls_is_ready(f->c.t));
}

static void test_resumption(void **state)
{
	struct fx *f = *state;
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	assert_true(nx_tls_is_ready(f->c.t));
	uint8_t blob[NX_TLS_SESSION_MAX];
	int n = nx_tls_session_save(f->c.t, blob, sizeof(blob));
	assert_true(n > 0); /* the TLS 1.3 ticket came right after the server's Finished */
	assert_int_equal(nx_tls_session_save(f->c.t, blob, 8), NX_ETRUNC);
	assert_int_equal(nx_tls_session_save(f->s.t, blob, sizeof(blob)), -EINVAL);
	peer_reset(&f->s);
	peer_reset(&f->c);
	uint64_t r0 = nx_stat_read(NX_STAT_TLS_SRV_RESUMED);
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, blob,
		     (size_t)n);
	assert_true(nx_tls_is_ready(f->c.t));
	assert_true(nx_tls_resumed(f->c.t));
	assert_true(nx_tls_resumed(f->s.t));
	assert_int_equal(nx_stat_read(NX_STAT_TLS_SRV_RESUMED), r0 + 1);
	assert_int_equal(nx_tls_alpn_negotiated(f->s.t), NX_TLS_ALPN_DOT);
	assert_int_equal(nx_tls_write(f->c.t, (const uint8_t *)"ok", 2), 0);
	pump(f);
	assert_int_equal(f->s.rx_len, 2);
	peer_reset(&f->s);
	peer_reset(&f->c);
	/* A garbled blob is not fatal: a full handshake. */
	blob[n / 2] ^= 0xff;
	memset(blob, 0, 16);
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, blob,
		     (size_t)n);
	assert_true(nx_tls_is_ready(f->c.t));
	assert_false(nx_tls_resumed(f->c.t));
}

static void test_cork(void **state)
{
	struct fx *f = *state;
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	uint8_t msg[50];
	memset(msg, 'a', sizeof(msg));
	/* Uncorked: a record (and a send) per write. */
	int s0 = f->s.sends;
	for (int i = 0; i < 10; i++) {
		assert_int_equal(nx_tls_write(f->s.t, msg, sizeof(msg)), 0);
	}
	assert_int_equal(f->s.sends - s0, 10);
	pump(f);
	assert_int_equal(f->c.recvs, 10);
	/* Corked: nothing leaves until uncork, then one record. */
	s0 = f->s.sends;
	assert_int_equal(nx_tls_cork(f->s.t), 0);
	assert_int_equal(nx_tls_cork(f->s.t), 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(nx_tls_write(f->s.t, msg, sizeof(msg)), 0);
	}
	assert_int_equal(f->s.sends, s0);
	assert_int_equal(nx_tls_uncork(f->s.t), 0);
	assert_int_equal(f->s.sends - s0, 1);
	assert_int_equal(nx_tls_uncork(f->s.t), 0); /* not corked: nothing */
	assert_int_equal(f->s.sends - s0, 1);
	int r0 = f->c.recvs;
	pump(f);
	assert_int_equal(f->c.recvs - r0, 1);
	assert_int_equal(f->c.rx_len, 20 * sizeof(msg));
	/* A corked burst beyond one record flushes by itself, in full records. */
	s0 = f->s.sends;
	assert_int_equal(nx_tls_cork(f->s.t), 0);
	uint8_t chunk[1000];
	memset(chunk, 'b', sizeof(chunk));
	for (int i = 0; i < 40; i++) {
		assert_int_equal(nx_tls_write(f->s.t, chunk, sizeof(chunk)), 0);
	}
	int during = f->s.sends - s0;
	assert_true(during >= 2 && during <= 3); /* 40 000 bytes: flushed at each ~16 KiB */
	assert_int_equal(nx_tls_uncork(f->s.t), 0);
	pump(f);
	assert_int_equal(f->c.rx_len, 20 * sizeof(msg) + 40 * sizeof(chunk));
}

static void test_close_and_transport(void **state)
{
	struct fx *f = *state;
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	/* Answers written corked still leave before close_notify. */
	assert_int_equal(nx_tls_cork(f->s.t), 0);
	assert_int_equal(nx_tls_write(f->s.t, (const uint8_t *)"last", 4), 0);
	uint64_t e0 = nx_stat_read(NX_STAT_TLS_CLI_E_RECORD);
	nx_tls_bye(f->s.t);
	pump(f);
	assert_int_equal(f->c.rx_len, 4);
	assert_int_equal(f->c.feed_rc, NX_ETLS_CLOSED);
	assert_string_equal(nx_tls_error_reason(f->c.feed_rc), "closed");
	assert_int_equal(nx_stat_read(NX_STAT_TLS_CLI_E_RECORD), e0); /* not an error */
	peer_reset(&f->s);
	peer_reset(&f->c);

	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	uint64_t t0 = nx_stat_read(NX_STAT_TLS_SRV_E_TRANSPORT);
	f->s.fail_send = true;
	assert_int_equal(nx_tls_write(f->s.t, (const uint8_t *)"x", 1), NX_ETLS_TRANSPORT);
	assert_string_equal(nx_tls_error_reason(NX_ETLS_TRANSPORT), "transport");
	assert_int_equal(nx_stat_read(NX_STAT_TLS_SRV_E_TRANSPORT), t0 + 1);
	assert_false(nx_tls_is_ready(f->s.t));
	peer_reset(&f->s);
	peer_reset(&f->c);

	/* A client whose ClientHello cannot be sent is never made. */
	f->c.fail_send = true;
	struct nx_tls *t = (struct nx_tls *)&t;
	assert_int_equal(
	    nx_tls_client_new(f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NULL, 0, &io, &f->c, &t),
	    NX_ETLS_TRANSPORT);
	assert_null(t);
	assert_int_equal(f->c.sends, 1);
}

static void test_free_in_callback(void **state)
{
	struct fx *f = *state;
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	/* Two records in one feed; the first callback frees: the second is never delivered. */
	assert_int_equal(nx_tls_write(f->c.t, (const uint8_t *)"one", 3), 0);
	assert_int_equal(nx_tls_write(f->c.t, (const uint8_t *)"two", 3), 0);
	f->s.free_in_recv = true;
	pump(f);
	assert_int_equal(f->s.recvs, 1);
	assert_null(f->s.t);
}

static void test_creds_errors(void **state)
{
	struct fx *f = *state;
	char err[512], path[256];
	struct nx_tls_creds *c = NULL;
	snprintf(path, sizeof(path), "%s/missing.pem", f->dir);
	assert_int_equal(nx_tls_creds_server_load(path, f->key, &c, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	assert_null(c);
	/* Not PEM: the key file given as the certificate, and garbage. */
	assert_int_equal(nx_tls_creds_server_load(f->key, f->key, &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_non_null(strstr(err, "not a PEM certificate"));
	assert_int_equal(nx_tls_creds_server_load(f->cert, f->cert, &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_non_null(strstr(err, "not a PEM private key"));
	/* A key from another pair. */
	char other[128];
	snprintf(other, sizeof(other), "%s/other", f->dir);
	assert_int_equal(mkdir(other, 0700), 0);
	assert_int_equal(nx_tls_selfsigned_write(other, NULL, 0, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/key.pem", other);
	assert_int_equal(nx_tls_creds_server_load(f->cert, path, &c, err, sizeof(err)), NX_ECONFIG);
	assert_non_null(strstr(err, "does not match"));
	assert_non_null(strstr(err, path));

	/* An expired certificate (made here: the product never makes one). */
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	assert_int_equal(gnutls_x509_privkey_init(&key), 0);
	assert_int_equal(
	    gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
					 GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
	    0);
	assert_int_equal(gnutls_x509_crt_init(&crt), 0);
	gnutls_x509_crt_set_version(crt, 3);
	gnutls_x509_crt_set_serial(crt, "\x01", 1);
	gnutls_x509_crt_set_activation_time(crt, time(NULL) - 10 * 86400);
	gnutls_x509_crt_set_expiration_time(crt, time(NULL) - 86400);
	gnutls_x509_crt_set_key(crt, key);
	assert_int_equal(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), 0);
	gnutls_datum_t cp, kp;
	assert_int_equal(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &cp), 0);
	assert_int_equal(gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &kp), 0);
	char ec[256], ek[256];
	snprintf(ec, sizeof(ec), "%s/expired.pem", other);
	snprintf(ek, sizeof(ek), "%s/expired.key", other);
	FILE *fp = fopen(ec, "w");
	fwrite(cp.data, 1, cp.size, fp);
	fclose(fp);
	fp = fopen(ek, "w");
	fwrite(kp.data, 1, kp.size, fp);
	fclose(fp);
	gnutls_free(cp.data);
	gnutls_free(kp.data);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
	assert_int_equal(nx_tls_creds_server_load(ec, ek, &c, err, sizeof(err)), NX_ECONFIG);
	assert_non_null(strstr(err, "expired on"));
	assert_non_null(strstr(err, ec));

	/* Client side: a CA file that is not PEM; server-only calls on client creds. */
	assert_int_equal(nx_tls_creds_client_new_ca(false, f->key, NULL, 0, &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_non_null(strstr(err, f->key));
	char pin[45];
	assert_int_equal(nx_tls_creds_pin(f->cli, pin), -EINVAL);
	struct nx_tls *t = NULL;
	assert_int_equal(nx_tls_server_new(f->cli, NX_TLS_ALPN_DOT, &io, &f->s, &t), -EINVAL);
	assert_int_equal(
	    nx_tls_client_new(f->srv, "x.test", NULL, NX_TLS_ALPN_DOT, NULL, 0, &io, &f->c, &t),
	    -EINVAL);
	assert_int_equal(
	    nx_tls_client_new(f->cli, NULL, "not-an-ip", NX_TLS_ALPN_DOT, NULL, 0, &io, &f->c, &t),
	    -EINVAL);
	assert_null(t);
	assert_int_equal(f->c.sends, 0);
}

static void read_whole(const char *path, char *buf, size_t cap, size_t *len)
{
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	*len = fread(buf, 1, cap - 1, fp);
	buf[*len] = '\0';
	fclose(fp);
}

static void test_selfsigned(void **state)
{
	struct fx *f = *state;
	char err[512], state_dir[128];
	snprintf(state_dir, sizeof(state_dir), "%s/state", f->dir);
	assert_int_equal(mkdir(state_dir, 0755), 0);
	char *cp = NULL, *kp = NULL;
	bool created = false;
	assert_int_equal(nx_tls_selfsigned_ensure(state_dir, "nx.home.arpa", &cp, &kp, &created,
						  err, sizeof(err)),
			 0);
	assert_true(created);
	struct stat st;
	assert_int_equal(stat(kp, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(cp, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	char tlsdir[256];
	snprintf(tlsdir, sizeof(tlsdir), "%s/tls", state_dir);
	assert_int_equal(stat(tlsdir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	static char first[8192], again[8192];
	size_t n1, n2;
	read_whole(cp, first, sizeof(first), &n1);
	free(cp);
	free(kp);
	/* Second call: reused, byte for byte. */
	assert_int_equal(nx_tls_selfsigned_ensure(state_dir, "nx.home.arpa", &cp, &kp, &created,
						  err, sizeof(err)),
			 0);
	assert_false(created);
	read_whole(cp, again, sizeof(again), &n2);
	assert_int_equal(n1, n2);
	assert_memory_equal(first, again, n1);

	/* The certificate serves its name and both loopbacks, and its PEM is the file's. */
	struct nx_tls_creds *srv, *cli;
	assert_int_equal(nx_tls_creds_server_load(cp, kp, &srv, err, sizeof(err)), 0);
	assert_int_equal(nx_tls_creds_client_new_ca(false, cp, NULL, 0, &cli, err, sizeof(err)), 0);
	char *pem = NULL;
	size_t pem_len = 0;
	assert_int_equal(nx_tls_creds_cert_pem(srv, &pem, &pem_len), 0);
	assert_int_equal(pem_len, n1);
	assert_memory_equal(pem, first, n1);
	assert_int_equal(pem[pem_len], '\0');
	free(pem);
	nx_tls_creds_unref(f->srv);
	f->srv = srv;
	const char *names[][2] = {{"nx.home.arpa", NULL}, {NULL, "127.0.0.1"}, {NULL, "::1"}};
	for (size_t i = 0; i < NX_ARRAY_LEN(names); i++) {
		connect_pair(f, cli, names[i][0], names[i][1], NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT,
			     NULL, 0);
		assert_true(nx_tls_is_ready(f->c.t));
		peer_reset(&f->s);
		peer_reset(&f->c);
	}
	expect_verify_failure(f, cli, "dns.test", NULL, "name mismatch");
	nx_tls_creds_unref(cli);
	free(cp);
	free(kp);

	/* Bad names and an unwritable directory: clear errors, nothing written. */
	const char *bad[] = {"bad_name!.test"};
	assert_int_equal(nx_tls_selfsigned_write(f->dir, bad, 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bad_name!.test"));
	snprintf(tlsdir, sizeof(tlsdir), "%s/nope/deeper", f->dir);
	assert_true(nx_tls_selfsigned_write(tlsdir, NULL, 0, err, sizeof(err)) == -ENOENT);
	assert_non_null(strstr(err, tlsdir));
	if (geteuid() != 0) { /* root writes anywhere */
		snprintf(tlsdir, sizeof(tlsdir), "%s/ro", f->dir);
		assert_int_equal(mkdir(tlsdir, 0500), 0);
		assert_int_equal(nx_tls_selfsigned_write(tlsdir, NULL, 0, err, sizeof(err)),
				 -EACCES);
		assert_non_null(strstr(err, tlsdir));
		chmod(tlsdir, 0700);
	}
}

/* The pin equals certtool's "pin-sha256:" for the key (an independent computation). */
static void test_pin_matches_certtool(void **state)
{
	struct fx *f = *state;
	if (access("/usr/bin/certtool", X_OK) != 0) {
		skip(); /* gnutls-bin (scripts/bootstrap installs it) */
	}
	char cmd[256], line[256], want[64] = "";
	snprintf(cmd, sizeof(cmd), "/usr/bin/certtool --key-info --infile '%s' 2>/dev/null",
		 f->key);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *at = strstr(line, "pin-sha256:");
		if (at) {
			snprintf(want, sizeof(want), "%.44s", at + strlen("pin-sha256:"));
		}
	}
	assert_int_equal(pclose(p), 0);
	char pin[45];
	assert_int_equal(nx_tls_creds_pin(f->srv, pin), 0);
	assert_string_equal(pin, want);
}

static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/*
 * What an idle session and credentials cost the heap, against what they charge the ledger.
 * Freeing measures what an object holds (the heap before/after its free), so a shared warm-up
 * (GnuTLS's lazily built global tables) is not counted against the first session.
 */
static void test_memory_measured(void **state)
{
	struct fx *f = *state;
#ifdef UNDER_ASAN
	skip(); /* ASan's allocator: mallinfo2 reads zeros */
#endif
	connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL, 0);
	peer_reset(&f->s);
	peer_reset(&f->c);

	size_t srv_sum = 0, cli_sum = 0, srv_max = 0, cli_max = 0;
	enum { ROUNDS = 4 };
	for (int i = 0; i < ROUNDS; i++) {
		connect_pair(f, f->cli, "dns.test", NULL, NX_TLS_ALPN_DOT, NX_TLS_ALPN_DOT, NULL,
			     0);
		assert_int_equal(nx_tls_write(f->c.t, (const uint8_t *)"\x00\x02hi", 4), 0);
		pump(f);
		assert_int_equal(nx_tls_write(f->s.t, (const uint8_t *)"\x00\x02ok", 4), 0);
		pump(f);
		assert_true(nx_tls_is_ready(f->s.t));
		size_t charged_s = nx_tls_charged(f->s.t), charged_c = nx_tls_charged(f->c.t);
		size_t h0 = heap_in_use();
		nx_tls_free(f->s.t);
		f->s.t = NULL;
		size_t h1 = heap_in_use();
		nx_tls_free(f->c.t);
		f->c.t = NULL;
		size_t h2 = heap_in_use();
		size_t srv = h0 - h1, cli = h1 - h2;
		print_message(
		    "idle session heap: server %zu B (charged %zu), client %zu B (charged "
		    "%zu)\n",
		    srv, charged_s, cli, charged_c);
		assert_true(srv <= charged_s);
		assert_true(cli <= charged_c);
		srv_sum += srv;
		cli_sum += cli;
		srv_max = NX_MAX(srv_max, srv);
		cli_max = NX_MAX(cli_max, cli);
		peer_reset(&f->s);
		peer_reset(&f->c);
	}
	/* The estimate stays honest: not more than twice what is measured. */
	assert_true(NX_TLS_SERVER_SESSION_BYTES <= 2 * srv_max);
	assert_true(NX_TLS_CLIENT_SESSION_BYTES <= 2 * cli_max);
	print_message("mean: server %zu B, client %zu B\n", srv_sum / ROUNDS, cli_sum / ROUNDS);

	/* Credentials: server (cert + key + ticket key) and client with the system store. */
	char err[256];
	struct nx_tls_creds *c;
	size_t h0 = heap_in_use();
	assert_int_equal(nx_tls_creds_server_load(f->cert, f->key, &c, err, sizeof(err)), 0);
	size_t h1 = heap_in_use();
	size_t charged = nx_tls_creds_charged(c);
	nx_tls_creds_unref(c);
	print_message("server creds heap: %zu B (charged %zu)\n", h1 - h0, charged);
	assert_true(h1 - h0 <= charged);
	assert_true(charged <= 2 * (h1 - h0));

	uint8_t pin[1][32] = {{1}};
	h0 = heap_in_use();
	assert_int_equal(
	    nx_tls_creds_client_new(false, (const uint8_t(*)[32])pin, 1, &c, err, sizeof(err)), 0);
	h1 = heap_in_use();
	charged = nx_tls_creds_charged(c);
	nx_tls_creds_unref(c);
	print_message("client creds, one pin, heap: %zu B (charged %zu)\n", h1 - h0, charged);
	assert_true(h1 - h0 <= charged);
	assert_true(charged <= 2 * (h1 - h0));

	assert_int_equal(nx_tls_creds_client_new(true, NULL, 0, &c, err, sizeof(err)), 0);
	nx_tls_creds_unref(c); /* warm-up: the system store's first read caches file data */
	h0 = heap_in_use();
	assert_int_equal(nx_tls_creds_client_new(true, NULL, 0, &c, err, sizeof(err)), 0);
	h1 = heap_in_use();
	charged = nx_tls_creds_charged(c);
	nx_tls_creds_unref(c);
	print_message("client creds + system CAs heap: %zu B (charged %zu)\n", h1 - h0, charged);
	assert_true(h1 - h0 <= charged);
	assert_true(charged <= 2 * (h1 - h0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_handshake_and_data, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_alpn, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sni, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_verify_name_and_ip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pins, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage_to_server, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_versions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_interop_openssl, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncated_handshake, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_resumption, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cork, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_close_and_transport, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_free_in_callback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_creds_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_selfsigned, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pin_matches_certtool, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memory_measured, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

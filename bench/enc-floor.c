/*
 * The library floor of one idle encrypted connection, measured outside nxdns: what GnuTLS
 * keeps for an idle server session and what nghttp2 keeps for an idle server session, as
 * glibc heap bytes (mallinfo2 uordblks) released by freeing the object.
 *
 *   cc -O1 -o enc-floor bench/enc-floor.c $(pkg-config --cflags --libs gnutls libnghttp2)
 *   ./enc-floor CERT.pem KEY.pem
 *
 * TLS: a server and a client session wired back to back in memory (no socket), the default
 * priorities (TLS 1.3 with this GnuTLS) from one shared priority cache, the handshake, one 33-byte record each way (a DoT
 * query and its answer), then the server session alone is freed: the drop in heap in use is
 * its idle cost. Credentials are shared by every connection and are reported apart.
 * HTTP/2: nghttp2_session_server_new with no options, the client preface and an empty
 * SETTINGS fed in, everything it wants to send drained (its SETTINGS, the ACK), the client's
 * ACK fed in; then nghttp2_session_del. A bench tool: exits non-zero on any library error.
 */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <malloc.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIPE_CAP (64 * 1024) /* far above one handshake flight */
#define ROUNDS 16            /* repeated; the median is printed */

struct pipe {
	unsigned char buf[PIPE_CAP];
	size_t len;
};

static ssize_t push(gnutls_transport_ptr_t p, const void *data, size_t len)
{
	struct pipe *q = p;
	if (len > PIPE_CAP - q->len) {
		errno = ENOBUFS;
		return -1;
	}
	memcpy(q->buf + q->len, data, len);
	q->len += len;
	return (ssize_t)len;
}

/* the reader side is the other pipe: pull from it */
struct end {
	gnutls_session_t s;
	struct pipe *in;
};

static ssize_t pull(gnutls_transport_ptr_t p, void *data, size_t len)
{
	struct end *e = p;
	if (e->in->len == 0) {
		gnutls_transport_set_errno(e->s, EAGAIN);
		return -1;
	}
	size_t n = len < e->in->len ? len : e->in->len;
	memcpy(data, e->in->buf, n);
	memmove(e->in->buf, e->in->buf + n, e->in->len - n);
	e->in->len -= n;
	return (ssize_t)n;
}

static struct pipe to_srv, to_cli;
static gnutls_priority_t prio;
static struct end srv_end = {.in = &to_srv}, cli_end = {.in = &to_cli};

static ssize_t push_srv(gnutls_transport_ptr_t p, const void *d, size_t l)
{
	return push(&to_cli, d, l);
}
static ssize_t push_cli(gnutls_transport_ptr_t p, const void *d, size_t l)
{
	return push(&to_srv, d, l);
}

static size_t in_use(void)
{
	return mallinfo2().uordblks;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "enc-floor: %s: %s\n", what, rc ? gnutls_strerror(rc) : "failed");
	exit(1);
}

static long tls_round(gnutls_certificate_credentials_t sc, gnutls_certificate_credentials_t cc)
{
	gnutls_session_t s, c;
	int rc;
	to_srv.len = to_cli.len = 0;
	if ((rc = gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NONBLOCK)) < 0)
		die("gnutls_init server", rc);
	if ((rc = gnutls_init(&c, GNUTLS_CLIENT | GNUTLS_NONBLOCK)) < 0)
		die("gnutls_init client", rc);
	/* one priority cache shared by every session, as a server keeps it */
	gnutls_priority_set(s, prio);
	gnutls_priority_set(c, prio);
	gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, sc);
	gnutls_credentials_set(c, GNUTLS_CRD_CERTIFICATE, cc);
	srv_end.s = s;
	cli_end.s = c;
	gnutls_transport_set_ptr(s, &srv_end);
	gnutls_transport_set_ptr(c, &cli_end);
	gnutls_transport_set_push_function(s, push_srv);
	gnutls_transport_set_push_function(c, push_cli);
	gnutls_transport_set_pull_function(s, pull);
	gnutls_transport_set_pull_function(c, pull);
	int ds = 0, dc = 0;
	for (int i = 0; i < 64 && !(ds && dc); i++) {
		if (!dc) {
			rc = gnutls_handshake(c);
			if (rc == 0)
				dc = 1;
			else if (gnutls_error_is_fatal(rc))
				die("client handshake", rc);
		}
		if (!ds) {
			rc = gnutls_handshake(s);
			if (rc == 0)
				ds = 1;
			else if (gnutls_error_is_fatal(rc))
				die("server handshake", rc);
		}
	}
	if (!(ds && dc))
		die("handshake did not finish", 0);
	unsigned char msg[33] = {0, 31}, got[256];
	if (gnutls_record_send(c, msg, sizeof msg) != sizeof msg)
		die("client send", 0);
	/* the server may first read the client's post-handshake data; loop until the record */
	ssize_t n = -1;
	for (int i = 0; i < 8 && n <= 0; i++)
		n = gnutls_record_recv(s, got, sizeof got);
	if (n != sizeof msg)
		die("server recv", (int)(n < 0 ? n : 0));
	if (gnutls_record_send(s, msg, sizeof msg) != sizeof msg)
		die("server send", 0);
	n = -1;
	for (int i = 0; i < 8 && n <= 0; i++)
		n = gnutls_record_recv(c, got, sizeof got);
	if (n != sizeof msg)
		die("client recv", (int)(n < 0 ? n : 0));
	size_t before = in_use();
	gnutls_deinit(s);
	size_t after = in_use();
	gnutls_deinit(c);
	return (long)before - (long)after;
}

/* ---- nghttp2 ---- */
static int on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	return 0;
}

static long h2_round(void)
{
	nghttp2_session_callbacks *cb;
	nghttp2_session *h;
	if (nghttp2_session_callbacks_new(&cb) != 0)
		die("nghttp2_session_callbacks_new", 0);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
	size_t before_new = in_use();
	if (nghttp2_session_server_new(&h, cb, NULL) != 0)
		die("nghttp2_session_server_new", 0);
	static const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
	if (nghttp2_submit_settings(h, NGHTTP2_FLAG_NONE, iv, 1) != 0)
		die("nghttp2_submit_settings", 0);
	unsigned char in[24 + 9 + 9];
	memcpy(in, NGHTTP2_CLIENT_MAGIC, 24);
	static const unsigned char settings[9] = {0, 0, 0, NGHTTP2_SETTINGS, 0, 0, 0, 0, 0};
	static const unsigned char ack[9] = {0, 0, 0, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, 0, 0, 0};
	memcpy(in + 24, settings, 9);
	memcpy(in + 33, ack, 9);
	if (nghttp2_session_mem_recv(h, in, sizeof in) != (ssize_t)sizeof in)
		die("nghttp2_session_mem_recv", 0);
	const uint8_t *out;
	while (nghttp2_session_mem_send(h, &out) > 0) {
	}
	size_t before = in_use();
	nghttp2_session_del(h);
	size_t after = in_use();
	nghttp2_session_callbacks_del(cb);
	(void)before_new;
	return (long)before - (long)after;
}

static int cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s CERT.pem KEY.pem\n", argv[0]);
		return 2;
	}
	gnutls_global_init();
	gnutls_certificate_credentials_t sc, cc;
	size_t c0 = in_use();
	if (gnutls_certificate_allocate_credentials(&sc) < 0)
		die("credentials", 0);
	int rc = gnutls_certificate_set_x509_key_file(sc, argv[1], argv[2], GNUTLS_X509_FMT_PEM);
	if (rc < 0)
		die("certificate", rc);
	size_t creds = in_use() - c0;
	if (gnutls_certificate_allocate_credentials(&cc) < 0)
		die("client credentials", 0);
	if ((rc = gnutls_priority_init(&prio, NULL, NULL)) < 0)
		die("gnutls_priority_init", rc);
	long t[ROUNDS], h[ROUNDS];
	tls_round(sc, cc); /* first round pays one-time lazy initialisation */
	h2_round();
	for (int i = 0; i < ROUNDS; i++) {
		t[i] = tls_round(sc, cc);
		h[i] = h2_round();
	}
	qsort(t, ROUNDS, sizeof t[0], cmp);
	qsort(h, ROUNDS, sizeof h[0], cmp);
	printf("gnutls %s nghttp2 %s\n", gnutls_check_version(NULL), nghttp2_version(0)->version_str);
	printf("tls_server_session_idle_bytes %ld\n", t[ROUNDS / 2]);
	printf("tls_server_credentials_bytes %zu\n", creds);
	printf("h2_server_session_idle_bytes %ld\n", h[ROUNDS / 2]);
	gnutls_priority_deinit(prio);
	gnutls_certificate_free_credentials(cc);
	gnutls_certificate_free_credentials(sc);
	gnutls_global_deinit();
	return 0;
}

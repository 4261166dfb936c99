/*
 * HTTPS on the admin listener: a self-signed certificate made here with GnuTLS, admin.tls: true
 * with tls.cert and tls.key in the config, libcurl as the client (verifying against that
 * certificate).
 * The login cookie is Secure; plain HTTP is not answered; unreadable files fail the start.
 * Without tls.cert: the generated certificate in state_dir/tls/, verified against that file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <sys/stat.h>
#include <time.h>

#include "fixture.h"

static char cert_path[160], key_path[160], config[4096], tmpdir[64];

/* A self-signed ECDSA P-256 certificate for 127.0.0.1, written as PEM files in tmpdir. */
static void make_cert(void)
{
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	assert_int_equal(gnutls_x509_privkey_init(&key), 0);
	assert_int_equal(
	    gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
					 GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
	    0);
	assert_int_equal(gnutls_x509_crt_init(&crt), 0);
	time_t now = time(NULL);
	unsigned char serial[] = {1};
	static const unsigned char ip[] = {127, 0, 0, 1};
	assert_int_equal(gnutls_x509_crt_set_version(crt, 3), 0);
	assert_int_equal(gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)), 0);
	assert_int_equal(gnutls_x509_crt_set_activation_time(crt, now - 3600), 0);
	assert_int_equal(gnutls_x509_crt_set_expiration_time(crt, now + 86400), 0);
	assert_int_equal(gnutls_x509_crt_set_dn(crt, "CN=nxdns test", NULL), 0);
	assert_int_equal(gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, ip,
							      sizeof(ip), GNUTLS_FSAN_SET),
			 0);
	assert_int_equal(gnutls_x509_crt_set_basic_constraints(crt, 1, -1), 0);
	assert_int_equal(gnutls_x509_crt_set_key(crt, key), 0);
	assert_int_equal(gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0), 0);
	gnutls_datum_t d;
	assert_int_equal(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d), 0);
	fx_write(cert_path, (const char *)d.data);
	gnutls_free(d.data);
	assert_int_equal(gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &d), 0);
	fx_write(key_path, (const char *)d.data);
	gnutls_free(d.data);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
}

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/nx-tls-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", tmpdir);
	snprintf(key_path, sizeof(key_path), "%s/key.pem", tmpdir);
	make_cert();
	snprintf(config, sizeof(config), "admin:\n%s  tls: true\ntls:\n  cert: %s\n  key: %s\n",
		 fx_admin_lines(), cert_path, key_path);
	*state = fx_start(config);
	return 0;
}

static int teardown(void **state)
{
	fx_stop(*state);
	unlink(cert_path);
	unlink(key_path);
	rmdir(tmpdir);
	return 0;
}

/* ---- a libcurl client in a thread ---- */

struct cfetch {
	char url[128];
	const char *post; /* body, or NULL for GET */
	bool verify;	  /* check the server against cert_path */
	long status;	  /* 0 when the transfer failed */
	CURLcode res;
	char headers[4096];
	size_t hlen;
	char body[4096];
	size_t blen;
	atomic_bool done;
	uv_async_t *wake;
};

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct cfetch *q = ud;
	size_t len = size * n;
	if (q->hlen + len < sizeof(q->headers)) {
		memcpy(q->headers + q->hlen, p, len);
		q->hlen += len;
		q->headers[q->hlen] = '\0';
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct cfetch *q = ud;
	size_t len = size * n;
	if (q->blen + len < sizeof(q->body)) {
		memcpy(q->body + q->blen, p, len);
		q->blen += len;
		q->body[q->blen] = '\0';
	}
	return len;
}

static void cclient(void *arg)
{
	struct cfetch *q = arg;
	CURL *h = curl_easy_init();
	curl_easy_setopt(h, CURLOPT_URL, q->url);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)FX_CLIENT_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
	curl_easy_setopt(h, CURLOPT_CAINFO, cert_path);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, q->verify ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, q->verify ? 2L : 0L);
	struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
	if (q->post) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->post);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	}
	q->res = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &q->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	atomic_store(&q->done, true);
	uv_async_send(q->wake);
}

static void cfetch(struct fx *f, struct cfetch *q, const char *scheme, const char *path)
{
	snprintf(q->url, sizeof(q->url), "%s://127.0.0.1:%u%s", scheme, nx_admin_port(f->admin),
		 path);
	q->wake = &f->wake;
	fx_run_with(f, cclient, q, &q->done);
}

static void https_login_is_secure(void **state)
{
	struct fx *f = *state;
	assert_true(f->admin->tls);
	struct cfetch q = {.verify = true};
	cfetch(f, &q, "https", "/healthz");
	assert_int_equal(q.res, CURLE_OK);
	assert_int_equal(q.status, 200);

	struct cfetch l = {.verify = true, .post = "{\"password\": \"" FX_PASSWORD "\"}"};
	cfetch(f, &l, "https", "/api/auth/login");
	assert_int_equal(l.res, CURLE_OK);
	assert_int_equal(l.status, 200);
	const char *sc = strcasestr(l.headers, "\r\nSet-Cookie: ");
	assert_non_null(sc);
	char line[256];
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(sc + 2, "\r"), sc + 2);
	assert_non_null(strstr(line, "; HttpOnly"));
	assert_non_null(strstr(line, "; SameSite=Strict"));
	assert_non_null(strstr(line, "; Secure"));

	struct cfetch s = {.verify = true};
	cfetch(f, &s, "https", "/api/auth/status");
	assert_int_equal(s.status, 200);
	assert_non_null(strstr(s.body, "\"tls\":true"));

	/* plain HTTP on the HTTPS port gets no HTTP answer */
	struct cfetch p = {0};
	cfetch(f, &p, "http", "/healthz");
	assert_true(p.res != CURLE_OK || p.status != 200);
	/* the TLS connections were charged more */
	assert_true(f->admin->conn_charge > NX_ADMIN_CONN_CHARGE);
}

static void unreadable_files_fail_the_start(void **state)
{
	struct fx *f = *state; /* a running TLS server: its files exist */
	(void)f;
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX], text[1024];
	snprintf(text, sizeof(text), "admin:\n  tls: true\ntls:\n  cert: %s/missing.pem\n  key: %s\n",
		 tmpdir, key_path);
	assert_int_equal(nx_conf_load_string("t.yaml", text, strlen(text), &c, err, sizeof(err)),
			 0);
	uv_loop_t loop;
	assert_int_equal(uv_loop_init(&loop), 0);
	struct nx_addr a;
	fx_listen_addr(&a);
	struct fx tmp = {.conf = c}; /* fx_hook_conf reads ->conf */
	struct nx_admin_hooks hooks = {.conf = fx_hook_conf, .ud = &tmp};
	struct nx_admin *admin = NULL;
	assert_int_equal(nx_admin_start(&loop, &a, &hooks, &admin), -ENOENT);
	assert_null(admin);
	/* an empty key file */
	snprintf(text, sizeof(text), "%s/empty.pem", tmpdir);
	fx_write(text, "");
	nx_conf_free(c);
	char y[4096];
	snprintf(y, sizeof(y), "admin:\n  tls: true\ntls:\n  cert: %s\n  key: %s\n", cert_path, text);
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)), 0);
	tmp.conf = c;
	assert_int_equal(nx_admin_start(&loop, &a, &hooks, &admin), NX_ECONFIG);
	/* a key that is not a key: MHD refuses to start */
	snprintf(y, sizeof(y), "admin:\n  tls: true\ntls:\n  cert: %s\n  key: %s\n", cert_path,
		 cert_path);
	nx_conf_free(c);
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)), 0);
	tmp.conf = c;
	assert_int_equal(nx_admin_start(&loop, &a, &hooks, &admin), NX_ECONFIG);
	/* admin.tls without tls.cert and a state_dir that cannot be made: refused rather than
	 * plain HTTP (a file stands where the directory would be) */
	nx_conf_free(c);
	snprintf(y, sizeof(y), "admin:\n  tls: true\nstate_dir: %s/x\n", cert_path);
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)), 0);
	tmp.conf = c;
	assert_int_equal(nx_admin_start(&loop, &a, &hooks, &admin), -ENOTDIR);
	assert_null(admin);
	/* tls.cert without admin.tls: the admin stays plain HTTP (the certificate is DoT/DoH's) */
	nx_conf_free(c);
	snprintf(y, sizeof(y), "tls:\n  cert: %s\n  key: %s\n", cert_path, key_path);
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)), 0);
	tmp.conf = c;
	assert_int_equal(nx_admin_start(&loop, &a, &hooks, &admin), 0);
	assert_false(admin->tls);
	nx_admin_stop(admin);
	uv_run(&loop, UV_RUN_DEFAULT);
	nx_conf_free(c);
	unlink(text);
	assert_int_equal(uv_loop_alive(&loop), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/*
 * admin.tls without tls.cert: the self-signed certificate DoT and DoH use, generated in
 * state_dir/tls/ on the first start and reused by the next (the same file, not a new one).
 * The client trusts only that file, so an answer proves the server presents it.
 */
static char state_dir[96], gen_cert[160], gen_key[160];

static void generated_cert_cleanup(void)
{
	char d[128];
	unlink(gen_cert);
	unlink(gen_key);
	snprintf(d, sizeof(d), "%s/tls", state_dir);
	rmdir(d);
	rmdir(state_dir);
}

static void generated_certificate(void **state)
{
	(void)state;
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
	snprintf(gen_cert, sizeof(gen_cert), "%s/tls/cert.pem", state_dir);
	snprintf(gen_key, sizeof(gen_key), "%s/tls/key.pem", state_dir);
	char y[4096];
	snprintf(y, sizeof(y), "admin:\n%s  tls: true\nstate_dir: %s\n", fx_admin_lines(),
		 state_dir);
	struct stat st;
	assert_int_not_equal(stat(gen_cert, &st), 0);
	struct fx *f = fx_start(y);
	assert_true(f->admin->tls);
	assert_int_equal(stat(gen_cert, &st), 0);
	assert_int_equal(stat(gen_key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	char *first = fx_read(gen_cert);
	assert_non_null(strstr(first, "-----BEGIN CERTIFICATE-----"));

	char saved[160];
	snprintf(saved, sizeof(saved), "%s", cert_path);
	snprintf(cert_path, sizeof(cert_path), "%s", gen_cert); /* cclient's only CA */
	struct cfetch q = {.verify = true};
	cfetch(f, &q, "https", "/healthz");
	assert_int_equal(q.res, CURLE_OK);
	assert_int_equal(q.status, 200);
	fx_stop(f);

	/* the next start serves the same certificate */
	f = fx_start(y);
	char *second = fx_read(gen_cert);
	assert_string_equal(first, second);
	struct cfetch r = {.verify = true};
	cfetch(f, &r, "https", "/healthz");
	assert_int_equal(r.res, CURLE_OK);
	assert_int_equal(r.status, 200);
	fx_stop(f);

	/* a client trusting another certificate refuses the server */
	snprintf(cert_path, sizeof(cert_path), "%s", saved);
	f = fx_start(y);
	struct cfetch o = {.verify = true};
	cfetch(f, &o, "https", "/healthz");
	assert_int_not_equal(o.res, CURLE_OK);
	fx_stop(f);
	free(first);
	free(second);
	generated_cert_cleanup();
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(https_login_is_secure, setup, teardown),
	    cmocka_unit_test_setup_teardown(unreadable_files_fail_the_start, setup, teardown),
	    cmocka_unit_test_setup_teardown(generated_certificate, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}

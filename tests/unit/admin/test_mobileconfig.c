/*
 * Apple profiles: the generator (nx_mobileconfig_write) read back by python's plistlib
 * (NX_PYTHON), so "well-formed" is what a real plist reader says, and the two routes through
 * a real server: authentication, 404 without the listener, the wildcard bind replaced by the
 * address the request came to, the self-signed certificate embedded (and not a configured
 * one), the client id, the headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"

#include "admin/mobileconfig.h"
#include "net/tls.h"

/* The plist as JSON (data as base64), through plistlib; NULL when python refuses it. */
static json_t *plist_json(const char *doc, size_t len)
{
	const char *py = getenv("NX_PYTHON");
	if (!py) {
		py = "python3";
	}
	char path[] = "/tmp/nx-mc-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, doc, len), (ssize_t)len);
	close(fd);
	char cmd[512];
	snprintf(
	    cmd, sizeof(cmd),
	    "%s -c 'import plistlib,sys,json,base64; d=plistlib.load(open(sys.argv[1],\"rb\"));"
	    "print(json.dumps(d, default=lambda b: base64.b64encode(b).decode()))' %s "
	    "2>/dev/null",
	    py, path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	static char out[65536];
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	int st = pclose(p);
	unlink(path);
	return st == 0 ? json_loads(out, 0, NULL) : NULL;
}

static const char *str_at(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	if (!s) {
		fail_msg("no string %s", key);
	}
	return s;
}

/* A certificate made by the shipped generator, as PEM (malloc'd). */
static char *make_pem(const char *dir)
{
	const char *names[] = {"dns.example"};
	char err[256];
	assert_int_equal(nx_tls_selfsigned_write(dir, names, 1, err, sizeof(err)), 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/cert.pem", dir);
	return fx_read(p);
}

static void rm_cert(const char *dir)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/cert.pem", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/key.pem", dir);
	unlink(p);
}

static void doh_profile_round_trip(void **state)
{
	(void)state;
	char dir[] = "/tmp/nx-mcd-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char *pem = make_pem(dir);
	const char *addrs[] = {"192.0.2.1", "2001:db8::1"};
	struct nx_mobileconfig mc = {
	    .proto = NX_MOBILECONFIG_DOH,
	    .host = "dns.example",
	    .port = 8443,
	    .client_id = "phone",
	    .addresses = addrs,
	    .n_addresses = 2,
	    .cert_pem = pem,
	};
	static char buf[NX_MOBILECONFIG_MAX];
	int n = nx_mobileconfig_write(&mc, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(strlen(buf), (size_t)n);
	json_t *d = plist_json(buf, (size_t)n);
	assert_non_null(d);
	assert_string_equal(str_at(d, "PayloadType"), "Configuration");
	assert_int_equal(json_integer_value(json_object_get(d, "PayloadVersion")), 1);
	assert_string_equal(str_at(d, "PayloadIdentifier"), "org.nxdns.doh.dns.example.phone");
	assert_int_equal(strlen(str_at(d, "PayloadUUID")), 36);
	json_t *content = json_object_get(d, "PayloadContent");
	assert_int_equal(json_array_size(content), 2);
	json_t *dns = json_array_get(content, 0);
	assert_string_equal(str_at(dns, "PayloadType"), "com.apple.dnsSettings.managed");
	json_t *ds = json_object_get(dns, "DNSSettings");
	assert_string_equal(str_at(ds, "DNSProtocol"), "HTTPS");
	assert_string_equal(str_at(ds, "ServerURL"), "https://dns.example:8443/dns-query/phone");
	json_t *sa = json_object_get(ds, "ServerAddresses");
	assert_int_equal(json_array_size(sa), 2);
	assert_string_equal(json_string_value(json_array_get(sa, 1)), "2001:db8::1");
	assert_null(json_object_get(ds, "ServerName"));
	json_t *root = json_array_get(content, 1);
	assert_string_equal(str_at(root, "PayloadType"), "com.apple.security.root");
	/* the data is the certificate's DER: the PEM body without its line breaks */
	const char *b64 = str_at(root, "PayloadContent");
	char *body = strstr(pem, "-----\n") + 6;
	char flat[4096];
	size_t k = 0;
	for (const char *s = body; *s && *s != '-'; s++) {
		if (*s != '\n') {
			flat[k++] = *s;
		}
	}
	flat[k] = 0;
	assert_string_equal(b64, flat);
	/* three distinct UUIDs */
	const char *u1 = str_at(d, "PayloadUUID"), *u2 = str_at(dns, "PayloadUUID"),
		   *u3 = str_at(root, "PayloadUUID");
	assert_string_not_equal(u1, u2);
	assert_string_not_equal(u2, u3);
	assert_int_equal(u1[14], '8'); /* version 8 */

	/* stable: the same input gives the same document; another client id other UUIDs */
	static char again[NX_MOBILECONFIG_MAX];
	assert_int_equal(nx_mobileconfig_write(&mc, again, sizeof(again)), n);
	assert_string_equal(buf, again);
	mc.client_id = "tablet";
	assert_true(nx_mobileconfig_write(&mc, again, sizeof(again)) > 0);
	json_t *d2 = plist_json(again, strlen(again));
	assert_string_not_equal(str_at(d2, "PayloadUUID"), u1);
	json_decref(d2);
	json_decref(d);

	/* an IPv6 host goes in brackets; no client id, no certificate: one payload */
	mc.host = "2001:db8::1";
	mc.client_id = NULL;
	mc.cert_pem = NULL;
	n = nx_mobileconfig_write(&mc, buf, sizeof(buf));
	d = plist_json(buf, (size_t)n);
	assert_non_null(d);
	content = json_object_get(d, "PayloadContent");
	assert_int_equal(json_array_size(content), 1);
	ds = json_object_get(json_array_get(content, 0), "DNSSettings");
	assert_string_equal(str_at(ds, "ServerURL"), "https://[2001:db8::1]:8443/dns-query");
	json_decref(d);
	free(pem);
	rm_cert(dir);
	rmdir(dir);
}

static void dot_profile(void **state)
{
	(void)state;
	const char *addrs[] = {"192.0.2.1"};
	struct nx_mobileconfig mc = {
	    .proto = NX_MOBILECONFIG_DOT,
	    .host = "dns.example",
	    .port = 853,
	    .client_id = "phone",
	    .addresses = addrs,
	    .n_addresses = 1,
	};
	static char buf[NX_MOBILECONFIG_MAX];
	int n = nx_mobileconfig_write(&mc, buf, sizeof(buf));
	json_t *d = plist_json(buf, (size_t)n);
	assert_non_null(d);
	json_t *ds =
	    json_object_get(json_array_get(json_object_get(d, "PayloadContent"), 0), "DNSSettings");
	assert_string_equal(str_at(ds, "DNSProtocol"), "TLS");
	assert_string_equal(str_at(ds, "ServerName"), "phone.dns.example");
	assert_null(json_object_get(ds, "ServerURL"));
	assert_null(strstr(str_at(d, "PayloadDescription"), "forward 853"));
	json_decref(d);
	/* another port is described: Apple's DoT has no port field */
	mc.port = 8853;
	n = nx_mobileconfig_write(&mc, buf, sizeof(buf));
	d = plist_json(buf, (size_t)n);
	assert_non_null(strstr(str_at(d, "PayloadDescription"), "forward 853"));
	json_decref(d);
	/* a client id needs a name to ride in the SNI */
	mc.host = "192.0.2.1";
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
	mc.client_id = "";
	assert_true(nx_mobileconfig_write(&mc, buf, sizeof(buf)) > 0);
}

static void escaping_and_refusals(void **state)
{
	(void)state;
	const char *addrs[] = {"a<b>&c\"d'e"};
	struct nx_mobileconfig mc = {
	    .proto = NX_MOBILECONFIG_DOH,
	    .host = "x</string><key>Evil</key><string>",
	    .port = 443,
	    .addresses = addrs,
	    .n_addresses = 1,
	};
	static char buf[NX_MOBILECONFIG_MAX];
	int n = nx_mobileconfig_write(&mc, buf, sizeof(buf));
	assert_true(n > 0);
	assert_null(strstr(buf, "<key>Evil</key>"));
	json_t *d = plist_json(buf, (size_t)n);
	assert_non_null(d);
	json_t *ds =
	    json_object_get(json_array_get(json_object_get(d, "PayloadContent"), 0), "DNSSettings");
	assert_null(json_object_get(ds, "Evil"));
	assert_string_equal(str_at(ds, "ServerURL"),
			    "https://x</string><key>Evil</key><string>:443/dns-query");
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(ds, "ServerAddresses"), 0)),
	    "a<b>&c\"d'e");
	json_decref(d);
	/* a control byte cannot be written in a plist string */
	mc.host = "a\x01z";
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
	mc.host = "";
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
	mc.host = NULL;
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
	/* too small: nothing half-written is returned */
	mc.host = "dns.example";
	assert_int_equal(nx_mobileconfig_write(&mc, buf, 200), NX_ETRUNC);
	/* a certificate that is not PEM base64 */
	mc.cert_pem = "-----BEGIN CERTIFICATE-----\nnot*base64\n-----END CERTIFICATE-----\n";
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
	mc.cert_pem = "no pem at all";
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
	mc.cert_pem = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n";
	assert_true(nx_mobileconfig_write(&mc, buf, sizeof(buf)) > 0);
	mc.n_addresses = NX_MOBILECONFIG_ADDRS_MAX + 1;
	assert_int_equal(nx_mobileconfig_write(&mc, buf, sizeof(buf)), -EINVAL);
}

/* ---- the routes ---- */

#define BEARER "Authorization: Bearer " FX_TOKEN "\r\n"

static void routes(void **state)
{
	(void)state;
	char cfg[4096];
	snprintf(cfg, sizeof(cfg),
		 "listener:\n  doh: [\"0.0.0.0:8443\", \"192.0.2.7:8443\"]\nadmin:\n%s",
		 fx_admin_lines());
	struct fx *f = fx_start(cfg);
	char dir[] = "/tmp/nx-mcr-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char *pem = make_pem(dir);
	char cp[256], kp[256], err[256];
	snprintf(cp, sizeof(cp), "%s/cert.pem", dir);
	snprintf(kp, sizeof(kp), "%s/key.pem", dir);
	assert_int_equal(nx_tls_creds_server_load(cp, kp, &f->creds, err, sizeof(err)), 0);

	struct fx_resp r;
	fx_http(f, &r, "GET", "/api/apple/doh.mobileconfig", NULL, NULL);
	assert_int_equal(r.status, 401);
	fx_resp_free(&r);

	fx_http(f, &r, "GET", "/api/apple/doh.mobileconfig", BEARER, NULL);
	assert_int_equal(r.status, 200);
	char h[256];
	assert_string_equal(fx_header(&r, "Content-Type", h, sizeof(h)),
			    "application/x-apple-aspen-config");
	assert_string_equal(fx_header(&r, "Content-Disposition", h, sizeof(h)),
			    "attachment; filename=\"nxdns-doh.mobileconfig\"");
	json_t *d = plist_json(r.body, r.body_len);
	assert_non_null(d);
	json_t *content = json_object_get(d, "PayloadContent");
	assert_int_equal(json_array_size(content), 2); /* no tls.cert: the root payload */
	json_t *ds = json_object_get(json_array_get(content, 0), "DNSSettings");
	/* the wildcard became the address the request came to; no server name: the first
	 * address is the URL's host */
	json_t *sa = json_object_get(ds, "ServerAddresses");
	assert_int_equal(json_array_size(sa), 2);
	assert_string_equal(json_string_value(json_array_get(sa, 0)), "127.0.0.1");
	assert_string_equal(json_string_value(json_array_get(sa, 1)), "192.0.2.7");
	assert_string_equal(str_at(ds, "ServerURL"), "https://127.0.0.1:8443/dns-query");
	json_decref(d);
	fx_resp_free(&r);

	/* a client id; a bad one */
	fx_http(f, &r, "GET", "/api/apple/doh.mobileconfig?client_id=phone", BEARER, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(fx_header(&r, "Content-Disposition", h, sizeof(h)),
			    "attachment; filename=\"nxdns-doh-phone.mobileconfig\"");
	d = plist_json(r.body, r.body_len);
	ds =
	    json_object_get(json_array_get(json_object_get(d, "PayloadContent"), 0), "DNSSettings");
	assert_string_equal(str_at(ds, "ServerURL"), "https://127.0.0.1:8443/dns-query/phone");
	json_decref(d);
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/apple/doh.mobileconfig?client_id=Bad%20Id", BEARER, NULL);
	assert_int_equal(r.status, 400);
	assert_string_equal(json_string_value(json_object_get(r.json, "field")), "client_id");
	fx_resp_free(&r);

	/* no DoT listener: 404 saying so */
	fx_http(f, &r, "GET", "/api/apple/dot.mobileconfig", BEARER, NULL);
	assert_int_equal(r.status, 404);
	assert_string_equal(json_string_value(json_object_get(r.json, "error")), "not_configured");
	assert_non_null(
	    strstr(json_string_value(json_object_get(r.json, "message")), "listener.dot"));
	fx_resp_free(&r);
	nx_tls_creds_unref(f->creds);
	f->creds = NULL;
	fx_stop(f);

	/* tls.cert set: the device is expected to trust it already, nothing embedded; a server
	 * name is the host */
	snprintf(cfg, sizeof(cfg),
		 "listener:\n  dot: [\"192.0.2.7:853\"]\ntls:\n  cert: %s\n  key: %s\n"
		 "  server_name: dns.example\nadmin:\n%s",
		 cp, kp, fx_admin_lines());
	f = fx_start(cfg);
	assert_int_equal(nx_tls_creds_server_load(cp, kp, &f->creds, err, sizeof(err)), 0);
	fx_http(f, &r, "GET", "/api/apple/dot.mobileconfig?client_id=phone", BEARER, NULL);
	assert_int_equal(r.status, 200);
	d = plist_json(r.body, r.body_len);
	content = json_object_get(d, "PayloadContent");
	assert_int_equal(json_array_size(content), 1);
	ds = json_object_get(json_array_get(content, 0), "DNSSettings");
	assert_string_equal(str_at(ds, "DNSProtocol"), "TLS");
	assert_string_equal(str_at(ds, "ServerName"), "phone.dns.example");
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(ds, "ServerAddresses"), 0)),
	    "192.0.2.7");
	json_decref(d);
	fx_resp_free(&r);
	fx_http(f, &r, "GET", "/api/apple/doh.mobileconfig", BEARER, NULL);
	assert_int_equal(r.status, 404);
	fx_resp_free(&r);
	nx_tls_creds_unref(f->creds);
	f->creds = NULL;
	fx_stop(f);
	free(pem);
	rm_cert(dir);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(doh_profile_round_trip),
	    cmocka_unit_test(dot_profile),
	    cmocka_unit_test(escaping_and_refusals),
	    cmocka_unit_test(routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Apple .mobileconfig profiles for DoH and DoT: the generator (mobileconfig.h) and the two
 * GET routes (/api/apple/doh.mobileconfig, /api/apple/dot.mobileconfig).
 *
 * The XML is written with a sticky-error writer into a fixed buffer: after the first overflow
 * nothing more is written and the result is NX_ETRUNC, so a profile is complete or absent.
 */
#include "admin/mobileconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>
#include <sodium.h>

#include "admin/impl.h"
#include "base/err.h"
#include "base/ledger.h"
#include "base/log.h"
#include "net/tls.h"

/* ---- the writer ---------------------------------------------------------------------------- */

struct xw {
	char *p;
	size_t cap, len;
	int err; /* sticky: NX_ETRUNC or -EINVAL */
};

static void raw(struct xw *w, const char *s, size_t n)
{
	if (w->err) {
		return;
	}
	if (w->len + n >= w->cap) {
		w->err = NX_ETRUNC;
		return;
	}
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static void put(struct xw *w, const char *s)
{
	raw(w, s, strlen(s));
}

/* XML character data / attribute text: the five predefined entities; a control byte has no
 * place in a plist string (XML 1.0 forbids most of them), so it fails the document. */
static void esc(struct xw *w, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '&':
			put(w, "&amp;");
			break;
		case '<':
			put(w, "&lt;");
			break;
		case '>':
			put(w, "&gt;");
			break;
		case '"':
			put(w, "&quot;");
			break;
		case '\'':
			put(w, "&apos;");
			break;
		default:
			if (c < 0x20 || c == 0x7f) {
				if (!w->err) {
					w->err = -EINVAL;
				}
				return;
			}
			raw(w, s, 1);
		}
	}
}

static void key_string(struct xw *w, const char *indent, const char *key, const char *value)
{
	put(w, indent);
	put(w, "<key>");
	put(w, key); /* keys are our constants */
	put(w, "</key>\n");
	put(w, indent);
	put(w, "<string>");
	esc(w, value);
	put(w, "</string>\n");
}

static void key_int(struct xw *w, const char *indent, const char *key, int v)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s<key>%s</key>\n%s<integer>%d</integer>\n", indent, key,
		 indent, v);
	put(w, buf);
}

/* ---- identifiers ----------------------------------------------------------------------------- */

/*
 * A UUID from SHA-256 over what identifies the profile and the payload's role, with the
 * version 8 (custom) and RFC 9562 variant bits: the same config gives the same UUIDs, so a
 * second install replaces the first.
 */
static void derive_uuid(const struct nx_mobileconfig *p, const char *role, char out[37])
{
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	char port[8];
	snprintf(port, sizeof(port), "%u", p->port);
	const char *parts[] = {"nxdns-mobileconfig-1",
			       p->proto == NX_MOBILECONFIG_DOH ? "doh" : "dot",
			       p->host,
			       port,
			       p->client_id ? p->client_id : "",
			       role};
	for (size_t i = 0; i < NX_ARRAY_LEN(parts); i++) {
		/* with the NUL: ("ab", "c") and ("a", "bc") differ */
		crypto_hash_sha256_update(&st, (const unsigned char *)parts[i],
					  strlen(parts[i]) + 1);
	}
	uint8_t h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&st, h);
	h[6] = (uint8_t)((h[6] & 0x0f) | 0x80);
	h[8] = (uint8_t)((h[8] & 0x3f) | 0x80);
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10) {
			out[o++] = '-';
		}
		out[o++] = hex[h[i] >> 4];
		out[o++] = hex[h[i] & 15];
	}
	out[o] = 0;
}

int nx_mobileconfig_is_ip(const char *text)
{
	uint8_t buf[16];
	return inet_pton(AF_INET, text, buf) == 1 || inet_pton(AF_INET6, text, buf) == 1;
}

/*
 * The first certificate of a PEM text: its body is the DER's base64, which is what a plist
 * <data> holds. Sets [*b64, *end) to that body (line breaks included) after checking it is
 * base64 a device will decode: the alphabet, padding only at the end, a multiple of 4. 0 or
 * -EINVAL.
 */
static int pem_body(const char *pem, const char **b64, const char **end)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----";
	const char *b = strstr(pem, begin);
	const char *e = b ? strstr(b, "-----END CERTIFICATE-----") : NULL;
	if (!b || !e) {
		return -EINVAL;
	}
	b += sizeof(begin) - 1;
	size_t n = 0, pad = 0;
	for (const char *s = b; s < e; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\r' || c == '\n') {
			continue;
		}
		if (c == '=') {
			pad++;
		} else if (pad || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
				    (c >= '0' && c <= '9') || c == '+' || c == '/')) {
			return -EINVAL;
		}
		n++;
	}
	if (n == 0 || n % 4 != 0 || pad > 2) {
		return -EINVAL;
	}
	*b64 = b;
	*end = e;
	return 0;
}

/* The base64 without line breaks (the plist reader ignores them, but one line is tidier). */
static void put_b64(struct xw *w, const char *b, const char *e)
{
	for (const char *s = b; s < e; s++) {
		if (*s != '\r' && *s != '\n') {
			raw(w, s, 1);
		}
	}
}

/* ---- the profile ----------------------------------------------------------------------------- */

int nx_mobileconfig_write(const struct nx_mobileconfig *p, char *out, size_t cap)
{
	if (!p->host || !*p->host || p->n_addresses > NX_MOBILECONFIG_ADDRS_MAX || cap == 0) {
		return -EINVAL;
	}
	bool doh = p->proto == NX_MOBILECONFIG_DOH;
	bool ip = nx_mobileconfig_is_ip(p->host);
	const char *id = p->client_id && *p->client_id ? p->client_id : NULL;
	if (!doh && id && ip) {
		return -EINVAL;
	}
	const char *cert_b = NULL, *cert_e = NULL;
	if (p->cert_pem && pem_body(p->cert_pem, &cert_b, &cert_e) < 0) {
		return -EINVAL;
	}
	char server[320];
	if (doh) {
		bool v6 = ip && strchr(p->host, ':');
		snprintf(server, sizeof(server), "https://%s%s%s:%u/dns-query%s%s", v6 ? "[" : "",
			 p->host, v6 ? "]" : "", p->port, id ? "/" : "", id ? id : "");
	} else {
		snprintf(server, sizeof(server), "%s%s%s", id ? id : "", id ? "." : "", p->host);
	}
	const char *proto = doh ? "DoH" : "DoT";
	char name[400], ident[400], desc[512];
	snprintf(name, sizeof(name), "nxdns %s (%s%s%s)", proto, p->host, id ? ", " : "",
		 id ? id : "");
	/* Reverse-DNS style, as Apple asks; the host's dots are fine inside it. */
	snprintf(ident, sizeof(ident), "org.nxdns.%s.%s%s%s", doh ? "doh" : "dot", p->host,
		 id ? "." : "", id ? id : "");
	if (doh) {
		snprintf(desc, sizeof(desc),
			 "Sends this device's DNS queries to nxdns over HTTPS (%s).", server);
	} else {
		snprintf(desc, sizeof(desc),
			 "Sends this device's DNS queries to nxdns over TLS (%s, port 853%s).",
			 server,
			 p->port != 853 ? ": the server listens elsewhere, forward 853 to it" : "");
	}
	char u_profile[37], u_dns[37], u_root[37];
	derive_uuid(p, "profile", u_profile);
	derive_uuid(p, "dns", u_dns);
	derive_uuid(p, "root", u_root);

	struct xw w = {.p = out, .cap = cap};
	put(&w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
		"\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
		"<plist version=\"1.0\">\n<dict>\n\t<key>PayloadContent</key>\n\t<array>\n"
		"\t\t<dict>\n\t\t\t<key>DNSSettings</key>\n\t\t\t<dict>\n");
	const char *i4 = "\t\t\t\t";
	key_string(&w, i4, "DNSProtocol", doh ? "HTTPS" : "TLS");
	if (p->n_addresses) {
		put(&w, "\t\t\t\t<key>ServerAddresses</key>\n\t\t\t\t<array>\n");
		for (size_t i = 0; i < p->n_addresses; i++) {
			put(&w, "\t\t\t\t\t<string>");
			esc(&w, p->addresses[i]);
			put(&w, "</string>\n");
		}
		put(&w, "\t\t\t\t</array>\n");
	}
	key_string(&w, i4, doh ? "ServerURL" : "ServerName", server);
	put(&w, "\t\t\t</dict>\n");
	const char *i3 = "\t\t\t";
	char sub[440];
	key_string(&w, i3, "PayloadDescription", desc);
	key_string(&w, i3, "PayloadDisplayName", name);
	snprintf(sub, sizeof(sub), "%s.dns", ident);
	key_string(&w, i3, "PayloadIdentifier", sub);
	key_string(&w, i3, "PayloadType", "com.apple.dnsSettings.managed");
	key_string(&w, i3, "PayloadUUID", u_dns);
	key_int(&w, i3, "PayloadVersion", 1);
	put(&w, "\t\t</dict>\n");
	if (p->cert_pem) {
		put(&w, "\t\t<dict>\n");
		key_string(&w, i3, "PayloadCertificateFileName", "nxdns.cer");
		put(&w, "\t\t\t<key>PayloadContent</key>\n\t\t\t<data>");
		put_b64(&w, cert_b, cert_e); /* checked base64: nothing to escape */
		put(&w, "</data>\n");
		key_string(
		    &w, i3, "PayloadDescription",
		    "The self-signed certificate nxdns generated for its DoT, DoH and "
		    "admin listeners. iOS: enable full trust in Settings > General > About > "
		    "Certificate Trust Settings.");
		key_string(&w, i3, "PayloadDisplayName", "nxdns self-signed certificate");
		snprintf(sub, sizeof(sub), "%s.root", ident);
		key_string(&w, i3, "PayloadIdentifier", sub);
		key_string(&w, i3, "PayloadType", "com.apple.security.root");
		key_string(&w, i3, "PayloadUUID", u_root);
		key_int(&w, i3, "PayloadVersion", 1);
		put(&w, "\t\t</dict>\n");
	}
	put(&w, "\t</array>\n");
	key_string(&w, "\t", "PayloadDescription", desc);
	key_string(&w, "\t", "PayloadDisplayName", name);
	key_string(&w, "\t", "PayloadIdentifier", ident);
	put(&w, "\t<key>PayloadRemovalDisallowed</key>\n\t<false/>\n");
	key_string(&w, "\t", "PayloadType", "Configuration");
	key_string(&w, "\t", "PayloadUUID", u_profile);
	key_int(&w, "\t", "PayloadVersion", 1);
	put(&w, "</dict>\n</plist>\n");
	if (w.err) {
		return w.err;
	}
	out[w.len] = 0;
	return (int)w.len;
}

/* ---- the routes ------------------------------------------------------------------------------ */

/* The local address of the admin connection (the box's address on the requester's network),
 * IPv4-mapped IPv6 unwrapped. 0 or -1. */
static int local_address(struct nx_admin_req *req, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (!ci || getsockname(ci->connect_fd, (struct sockaddr *)&ss, &len) < 0) {
		return -1;
	}
	if (ss.ss_family == AF_INET) {
		return inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out,
				 (socklen_t)cap)
			   ? 0
			   : -1;
	}
	const struct in6_addr *a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	if (ss.ss_family != AF_INET6) {
		return -1;
	}
	if (IN6_IS_ADDR_V4MAPPED(a6)) {
		return inet_ntop(AF_INET, a6->s6_addr + 12, out, (socklen_t)cap) ? 0 : -1;
	}
	return inet_ntop(AF_INET6, a6, out, (socklen_t)cap) ? 0 : -1;
}

/* IP text of a listener address; a wildcard bind (0.0.0.0, ::) is "" (the caller replaces it). */
static void listener_ip(const struct nx_addr *a, char *out, size_t cap, uint16_t *port)
{
	out[0] = 0;
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;
		*port = ntohs(s->sin_port);
		if (s->sin_addr.s_addr != htonl(INADDR_ANY)) {
			inet_ntop(AF_INET, &s->sin_addr, out, (socklen_t)cap);
		}
	} else if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;
		*port = ntohs(s->sin6_port);
		if (!IN6_IS_ADDR_UNSPECIFIED(&s->sin6_addr)) {
			inet_ntop(AF_INET6, &s->sin6_addr, out, (socklen_t)cap);
		}
	}
}

struct profile_buf {
	char data[NX_MOBILECONFIG_MAX];
};

static void profile_free(void *cls)
{
	nx_mem_free(NX_OWNER_admin_http, cls, sizeof(struct profile_buf));
}

static int serve(struct nx_admin_req *req, enum nx_mobileconfig_proto proto)
{
	const struct nx_conf *c = nx_admin_conf(req->admin);
	if (!c) {
		return nx_admin_reply_error(req, 503, "no_config", NULL, "no configuration loaded");
	}
	bool doh = proto == NX_MOBILECONFIG_DOH;
	const struct nx_addr *ls = doh ? c->listen_doh : c->listen_dot;
	size_t n_ls = doh ? c->n_listen_doh : c->n_listen_dot;
	if (n_ls == 0) {
		return nx_admin_reply_error(req, 404, "not_configured", NULL,
					    "no %s listener is configured (listener.%s): add one "
					    "to get this profile",
					    doh ? "DoH" : "DoT", doh ? "doh" : "dot");
	}
	const char *id = nx_admin_req_arg(req, "client_id");
	if (id && *id && !nx_conf_client_id_ok(id)) {
		return nx_admin_reply_error(req, 400, "bad_request", "client_id",
					    "a client id is 1 to %d of a-z, 0-9 and -",
					    NX_CONF_CLIENT_ID_MAX);
	}
	if (id && *id && !doh && !c->tls_server_name) {
		return nx_admin_reply_error(req, 400, "bad_request", "client_id",
					    "a DoT client id travels in the TLS server name "
					    "(<id>.<tls.server_name>): set tls.server_name first");
	}
	/* ServerAddresses: every listener address of this kind once; a wildcard bind becomes the
	 * address this request reached the box at. */
	char text[NX_MOBILECONFIG_ADDRS_MAX][INET6_ADDRSTRLEN];
	const char *addrs[NX_MOBILECONFIG_ADDRS_MAX];
	size_t n = 0;
	uint16_t port = 0;
	for (size_t i = 0; i < n_ls && n < NX_MOBILECONFIG_ADDRS_MAX; i++) {
		uint16_t pt = 0;
		listener_ip(&ls[i], text[n], sizeof(text[n]), &pt);
		if (i == 0) {
			port = pt;
		}
		if (!text[n][0] && local_address(req, text[n], sizeof(text[n])) < 0) {
			continue;
		}
		bool dup = false;
		for (size_t k = 0; k < n; k++) {
			dup = dup || strcmp(text[k], text[n]) == 0;
		}
		if (!dup) {
			addrs[n] = text[n];
			n++;
		}
	}
	if (!c->tls_server_name && n == 0) {
		return nx_admin_reply_error(req, 503, "no_address", NULL,
					    "set tls.server_name: no address of this box is known");
	}
	char *pem = NULL;
	size_t pem_len = 0;
	if (!c->tls_cert && req->admin->hooks.tls_creds) {
		struct nx_tls_creds *cr = req->admin->hooks.tls_creds(req->admin->hooks.ud);
		if (cr && nx_tls_creds_cert_pem(cr, &pem, &pem_len) < 0) {
			return -ENOMEM;
		}
	}
	struct nx_mobileconfig mc = {
	    .proto = proto,
	    .host = c->tls_server_name ? c->tls_server_name : addrs[0],
	    .port = port,
	    .client_id = id,
	    .addresses = addrs,
	    .n_addresses = n,
	    .cert_pem = pem,
	};
	struct profile_buf *b = nx_mem_alloc(NX_OWNER_admin_http, sizeof(*b));
	if (!b) {
		free(pem);
		return nx_admin_reply_static(req, 503, "{\"error\":\"no_memory\"}");
	}
	int len = nx_mobileconfig_write(&mc, b->data, sizeof(b->data));
	free(pem);
	if (len < 0) {
		profile_free(b);
		nx_log(NX_LOG_ERR, "admin", "cannot write the %s profile: %s", doh ? "DoH" : "DoT",
		       nx_strerror(len));
		return nx_admin_reply_error(req, 500, "profile_failed", NULL,
					    "the profile could not be written: %s",
					    nx_strerror(len));
	}
	snprintf(req->disposition, sizeof(req->disposition),
		 "attachment; filename=\"nxdns-%s%s%s.mobileconfig\"", doh ? "doh" : "dot",
		 id && *id ? "-" : "", id && *id ? id : "");
	return nx_admin_reply_buffer(req, 200, "application/x-apple-aspen-config", b->data,
				     (size_t)len, profile_free, b);
}

int nx_admin_handle_apple_doh(struct nx_admin_req *req)
{
	return serve(req, NX_MOBILECONFIG_DOH);
}

int nx_admin_handle_apple_dot(struct nx_admin_req *req)
{
	return serve(req, NX_MOBILECONFIG_DOT);
}

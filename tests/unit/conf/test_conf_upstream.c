/*
 * upstream.servers and forward-zone servers: plain addr:port, tcp://, tls://, https:// and the
 * mapping form {url, name, pin_sha256, address}; upstream.bootstrap; every refusal with its
 * file:line:col.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

#include "helpers.h"

/* sha256("a") and sha256("b") in base64, as `kdig +tls-pin` takes them */
#define PIN_A "ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs="
#define PIN_B "PiPoFgA5WUoziU9lZOGxNIu9egCI1CxKy3PurtWcAJ0="

static int port_of(const struct nx_addr *a)
{
	if (a->ss.ss_family == AF_INET) {
		return ntohs(((const struct sockaddr_in *)(const void *)&a->ss)->sin_port);
	}
	return ntohs(((const struct sockaddr_in6 *)(const void *)&a->ss)->sin6_port);
}

static void addr_is(const struct nx_addr *a, int family, const char *ip, int port)
{
	char text[INET6_ADDRSTRLEN];
	const void *p =
	    family == AF_INET
		? (const void *)&((const struct sockaddr_in *)(const void *)&a->ss)->sin_addr
		: (const void *)&((const struct sockaddr_in6 *)(const void *)&a->ss)->sin6_addr;
	assert_int_equal(a->ss.ss_family, family);
	assert_non_null(inet_ntop(family, p, text, sizeof(text)));
	assert_string_equal(text, ip);
	assert_int_equal(port_of(a), port);
}

/* One server in upstream.servers: load and return the config (caller frees). */
static struct nx_conf *one(const char *server)
{
	char y[512];
	snprintf(y, sizeof(y), "upstream:\n  servers: [\"9.9.9.9\", %s]\n", server);
	return load_ok(y);
}

/* Expect `server` (flow text) as upstream.servers[0] refused with `why` at 2:13. */
static void bad(const char *server, const char *why)
{
	char y[512], want[NX_CONF_ERR_MAX];
	snprintf(y, sizeof(y), "upstream:\n  servers: [%s]\n", server);
	snprintf(want, sizeof(want), "t.yaml:2:13: upstream.servers[0]: %s", why);
	load_bad(y, want);
}

static void plain_is_unchanged(void **state)
{
	(void)state;
	struct nx_conf *c =
	    load_ok("upstream:\n  servers: [\"192.0.2.1\", \"[2001:db8::1]:5300\"]\n");
	assert_int_equal(c->n_upstreams, 2);
	const struct nx_conf_upstream *u = &c->upstreams[0];
	assert_int_equal(u->kind, NX_CONF_UP_PLAIN);
	assert_true(u->resolved);
	assert_int_equal(u->port, 53);
	addr_is(&u->addr, AF_INET, "192.0.2.1", 53);
	assert_null(u->host);
	assert_null(u->auth_name);
	assert_null(u->path);
	assert_int_equal(u->n_pins, 0);
	assert_string_equal(u->text, "192.0.2.1");
	assert_int_equal(u->line, 2);
	assert_int_equal(u->col, 13);
	addr_is(&c->upstreams[1].addr, AF_INET6, "2001:db8::1", 5300);
	assert_int_equal(c->upstreams[1].port, 5300);
	nx_conf_free(c);
	/* the default: two plain servers, positions 0 (not from the file) */
	c = load_ok("");
	assert_int_equal(c->n_upstreams, 2);
	assert_int_equal(c->upstreams[0].kind, NX_CONF_UP_PLAIN);
	assert_int_equal(c->upstreams[0].line, 0);
	assert_int_equal(c->n_bootstrap, 0);
	nx_conf_free(c);
}

static void tcp_urls(void **state)
{
	(void)state;
	struct nx_conf *c = one("\"tcp://192.0.2.7\"");
	const struct nx_conf_upstream *u = &c->upstreams[1];
	assert_int_equal(u->kind, NX_CONF_UP_TCP);
	addr_is(&u->addr, AF_INET, "192.0.2.7", 53);
	assert_true(u->resolved);
	assert_null(u->auth_name);
	assert_string_equal(u->text, "tcp://192.0.2.7");
	nx_conf_free(c);
	c = one("\"TCP://[2001:db8::7]:5353\"");
	assert_int_equal(c->upstreams[1].kind, NX_CONF_UP_TCP);
	addr_is(&c->upstreams[1].addr, AF_INET6, "2001:db8::7", 5353);
	nx_conf_free(c);
}

static void tls_urls(void **state)
{
	(void)state;
	/* an address: port 853, no name (the certificate is checked against the address) */
	struct nx_conf *c = one("\"tls://9.9.9.9\"");
	const struct nx_conf_upstream *u = &c->upstreams[1];
	assert_int_equal(u->kind, NX_CONF_UP_DOT);
	assert_true(u->resolved);
	addr_is(&u->addr, AF_INET, "9.9.9.9", 853);
	assert_null(u->host);
	assert_null(u->auth_name);
	assert_null(u->path);
	nx_conf_free(c);
	/* an address with a name and a port */
	c = one("\"tls://[2620:fe::fe]:8853#DNS.Quad9.net.\"");
	u = &c->upstreams[1];
	addr_is(&u->addr, AF_INET6, "2620:fe::fe", 8853);
	assert_string_equal(u->auth_name, "dns.quad9.net");
	assert_null(u->host);
	nx_conf_free(c);
	/* a host name: unresolved, the host is the name checked */
	c = one("\"tls://Dns.Quad9.NET\"");
	u = &c->upstreams[1];
	assert_false(u->resolved);
	assert_int_equal(u->port, 853);
	assert_string_equal(u->host, "dns.quad9.net");
	assert_string_equal(u->auth_name, "dns.quad9.net");
	assert_string_equal(u->text, "tls://Dns.Quad9.NET");
	nx_conf_free(c);
	/* a host name and another certificate name */
	c = one("\"tls://resolver.example:853#other.example\"");
	assert_string_equal(c->upstreams[1].host, "resolver.example");
	assert_string_equal(c->upstreams[1].auth_name, "other.example");
	nx_conf_free(c);
}

static void https_urls(void **state)
{
	(void)state;
	struct nx_conf *c = one("\"https://1.1.1.1/dns-query#cloudflare-dns.com\"");
	const struct nx_conf_upstream *u = &c->upstreams[1];
	assert_int_equal(u->kind, NX_CONF_UP_DOH);
	addr_is(&u->addr, AF_INET, "1.1.1.1", 443);
	assert_string_equal(u->path, "/dns-query");
	assert_string_equal(u->auth_name, "cloudflare-dns.com");
	nx_conf_free(c);
	c = one("\"https://dns.google:8443/resolve/v1\"");
	u = &c->upstreams[1];
	assert_false(u->resolved);
	assert_int_equal(u->port, 8443);
	assert_string_equal(u->host, "dns.google");
	assert_string_equal(u->path, "/resolve/v1");
	nx_conf_free(c);
}

static void mapping_form(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("upstream:\n"
				    "  servers:\n"
				    "    - url: \"tls://1.1.1.1\"\n"
				    "      name: one.one.one.one\n"
				    "      pin_sha256: [\"" PIN_A "\", \"" PIN_B "\"]\n"
				    "    - {url: \"https://dns.example/dns-query\", address: "
				    "\"2001:db8::53\"}\n"
				    "    - {url: \"tls://dns.quad9.net:853\", address: 9.9.9.9}\n"
				    "    - {url: \"8.8.8.8\"}\n");
	assert_int_equal(c->n_upstreams, 4);
	const struct nx_conf_upstream *u = &c->upstreams[0];
	assert_int_equal(u->kind, NX_CONF_UP_DOT);
	assert_string_equal(u->auth_name, "one.one.one.one");
	assert_int_equal(u->n_pins, 2);
	assert_int_equal(u->pins[0][0], 0xca);
	assert_int_equal(u->pins[0][1], 0x97);
	assert_int_equal(u->pins[0][31], 0xbb);
	assert_string_equal(u->text, "tls://1.1.1.1");
	assert_int_equal(u->line, 3);
	assert_int_equal(u->col, 12);
	/* address: resolved without bootstrap, the url's port, the host kept as the name */
	u = &c->upstreams[1];
	assert_true(u->resolved);
	addr_is(&u->addr, AF_INET6, "2001:db8::53", 443);
	assert_string_equal(u->host, "dns.example");
	assert_string_equal(u->auth_name, "dns.example");
	addr_is(&c->upstreams[2].addr, AF_INET, "9.9.9.9", 853);
	assert_int_equal(c->upstreams[3].kind, NX_CONF_UP_PLAIN);
	nx_conf_free(c);
}

static void forward_zone_servers(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("upstream:\n"
				    "  forward_zones:\n"
				    "    corp.example: [\"tls://10.0.0.53#ns.corp.example\", "
				    "{url: \"https://10.0.0.54/q\"}, \"10.0.0.55\"]\n");
	assert_int_equal(c->n_zones, 1);
	assert_int_equal(c->zones[0].n_servers, 3);
	assert_int_equal(c->zones[0].servers[0].kind, NX_CONF_UP_DOT);
	assert_string_equal(c->zones[0].servers[0].auth_name, "ns.corp.example");
	assert_int_equal(c->zones[0].servers[1].kind, NX_CONF_UP_DOH);
	assert_int_equal(c->zones[0].servers[2].kind, NX_CONF_UP_PLAIN);
	nx_conf_free(c);
	load_bad("upstream:\n  forward_zones:\n    lan: [\"tls://\"]\n",
		 "t.yaml:3:11: upstream.forward_zones.lan[0]: bad upstream 'tls://': the host is "
		 "missing");
}

static void url_errors(void **state)
{
	(void)state;
	bad("\"tls://\"", "bad upstream 'tls://': the host is missing");
	bad("\"tls://:853\"", "bad upstream 'tls://:853': the host is missing");
	bad("\"https://x\"",
	    "bad upstream 'https://x': the path is missing (for example https://x/dns-query)");
	bad("\"https://x/\"",
	    "bad upstream 'https://x/': the path is empty (for example /dns-query)");
	bad("\"https://x/dns-query?dns=1\"",
	    "bad upstream 'https://x/dns-query?dns=1': the path must not have a query ('?...')");
	bad("\"https://x/a b\"",
	    "bad upstream 'https://x/a b': the path '/a b' has characters a URL path cannot have");
	bad("\"quic://x\"",
	    "bad upstream 'quic://x': unknown scheme 'quic' (expected tcp://, tls:// or https://; "
	    "a plain addr:port is UDP with TCP after truncation)");
	bad("\"http://x/dns-query\"", "bad upstream 'http://x/dns-query': DNS over plain HTTP is "
				      "not supported: use https://");
	bad("\"tls://x/dns-query\"",
	    "bad upstream 'tls://x/dns-query': tls:// takes no path or query");
	bad("\"tcp://1.2.3.4#name\"",
	    "bad upstream 'tcp://1.2.3.4#name': a #name applies to tls:// and https:// only");
	bad("\"tcp://dns.example\"",
	    "bad upstream 'tcp://dns.example': tcp:// takes an IP address ('dns.example' is a "
	    "name: a host name needs tls:// or https://)");
	bad("\"tls://1.1.1.1#\"", "bad upstream 'tls://1.1.1.1#': the name after '#' is empty");
	bad("\"tls://1.1.1.1#a..b\"",
	    "bad upstream 'tls://1.1.1.1#a..b': the name after '#' 'a..b' is not a host name: "
	    "empty label, label longer than 63 bytes or name longer than 255");
	bad("\"tls://9.9.9.9:\"", "bad upstream 'tls://9.9.9.9:': missing port after ':'");
	bad("\"tls://9.9.9.9:85x\"",
	    "bad upstream 'tls://9.9.9.9:85x': port '85x' is not a number");
	bad("\"tls://9.9.9.9:0\"", "bad upstream 'tls://9.9.9.9:0': port must be 1..65535");
	bad("\"tls://2620:fe::fe\"",
	    "bad upstream 'tls://2620:fe::fe': an IPv6 address needs brackets: [addr]:port");
	bad("\"tls://[2620:fe::fe\"",
	    "bad upstream 'tls://[2620:fe::fe': missing ']' after the IPv6 address");
	bad("\"tls://[2620:fe::fe]853\"",
	    "bad upstream 'tls://[2620:fe::fe]853': expected ':port' after ']'");
	bad("\"tls://[dns.example]\"", "bad upstream 'tls://[dns.example]': not an IPv6 address");
	bad("\"tls://1.2.3\"",
	    "bad upstream 'tls://1.2.3': host '1.2.3' is neither an IP address nor a host name");
	bad("\"tls://dns_bad!.example\"",
	    "bad upstream 'tls://dns_bad!.example': host 'dns_bad!.example' is not a host name: "
	    "names may contain only letters, digits, '-', '_' and dots");
	bad("\"tls://user@dns.example\"",
	    "bad upstream 'tls://user@dns.example': user information (user@) is not supported");
	/* plain addresses keep their messages; a name is still not a plain server */
	bad("\"dns.example\"",
	    "bad address 'dns.example': not an IP address (host names are not accepted here)");
	bad("\"\"", "bad address '': empty address");
	bad("\"https://a.example/"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
	    "bad upstream 'https://a.example/"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxx': "
	    "longer than 127 bytes");
	/* duplicates: the same server however it is written */
	load_bad("upstream:\n  servers: [\"tls://9.9.9.9\", \"tls://9.9.9.9:853#dns.quad9.net\"]\n",
		 "t.yaml:2:30: upstream.servers[1]: duplicate server "
		 "'tls://9.9.9.9:853#dns.quad9.net' (same as [0])");
	load_bad("upstream:\n  servers: [\"tls://Dns.Example\", {url: \"tls://dns.example.\"}]\n",
		 "t.yaml:2:34: upstream.servers[1]: duplicate server 'tls://dns.example.' (same as "
		 "[0])");
	/* different transports to one address are different servers */
	struct nx_conf *c = load_ok("upstream:\n  servers: [\"9.9.9.9\", \"tcp://9.9.9.9\", "
				    "\"tls://9.9.9.9\", \"https://9.9.9.9/dns-query\"]\n");
	assert_int_equal(c->n_upstreams, 4);
	nx_conf_free(c);
}

static void mapping_errors(void **state)
{
	(void)state;
	bad("{name: x.example}", "missing 'url'");
	load_bad("upstream:\n  servers: [{url: \"tls://1.1.1.1\", nam: x}]\n",
		 "t.yaml:2:36: unknown key 'upstream.servers[0].nam' (did you mean 'name'?)");
	load_bad("upstream:\n  servers: [{url: \"9.9.9.9\", name: x.example}]\n",
		 "t.yaml:2:30: upstream.servers[0].name: applies to tls:// and https:// upstreams "
		 "only");
	load_bad("upstream:\n  servers: [{url: \"tcp://9.9.9.9\", pin_sha256: [\"" PIN_A "\"]}]\n",
		 "t.yaml:2:36: upstream.servers[0].pin_sha256: applies to tls:// and https:// "
		 "upstreams only");
	load_bad("upstream:\n  servers: [{url: \"tls://1.1.1.1#a.example\", name: b.example}]\n",
		 "t.yaml:2:52: upstream.servers[0].name: the url already names the server after "
		 "'#': give the name once");
	load_bad("upstream:\n  servers: [{url: \"tls://1.1.1.1\", name: \"-x\"}]\n",
		 "t.yaml:2:42: upstream.servers[0].name: name '-x' is not a host name: a label "
		 "starts or ends with '-'");
	load_bad("upstream:\n  servers: [{url: \"tls://1.1.1.1\", address: 1.0.0.1}]\n",
		 "t.yaml:2:45: upstream.servers[0].address: only for a url whose host is a name "
		 "(this url already gives an address)");
	load_bad("upstream:\n  servers: [{url: \"tls://dns.example\", address: \"1.0.0.1:853\"}]\n",
		 "t.yaml:2:49: upstream.servers[0].address: '1.0.0.1:853' is not an IP address (no "
		 "port here: the url's port applies)");
	load_bad("upstream:\n  servers: [{url: \"tls://dns.example\", address: dns.example}]\n",
		 "t.yaml:2:49: upstream.servers[0].address: 'dns.example' is not an IP address (no "
		 "port here: the url's port applies)");
	load_bad("upstream:\n  servers: [{url: [1]}]\n",
		 "t.yaml:2:19: upstream.servers[0].url: expected an upstream (addr:port or a URL), "
		 "got a list");
}

static void pin_errors(void **state)
{
	(void)state;
	const char *pre = "upstream:\n  servers: [{url: \"tls://1.1.1.1\", pin_sha256: [";
	const struct {
		const char *pins, *want;
	} cases[] = {
	    {"\"abc\"", "t.yaml:2:49: upstream.servers[0].pin_sha256[0]: bad pin: expected 44 "
			"base64 characters (a SHA-256 of the public key, as `kdig +tls-pin` takes "
			"it), got 3"},
	    {"\"" PIN_A "\", \"" PIN_A "\"",
	     "t.yaml:2:97: upstream.servers[0].pin_sha256[1]: duplicate pin (same as [0])"},
	    {"\"ypeBEsobvcr6wjGzmiPcTaeG7_gUfE5yuYB3ha-uSLs=\"",
	     "t.yaml:2:49: upstream.servers[0].pin_sha256[0]: bad pin: '_' is not a base64 "
	     "character (pins use the standard alphabet, with '+' and '/')"},
	    {"\"ypeBEsobvcr6wjGzmiPcTaeG7!gUfE5yuYB3ha/uSLs=\"",
	     "t.yaml:2:49: upstream.servers[0].pin_sha256[0]: bad pin: '!' is not a base64 "
	     "character"},
	    {"\"ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLss\"",
	     "t.yaml:2:49: upstream.servers[0].pin_sha256[0]: bad pin: does not decode to 32 "
	     "bytes (expected 43 characters and one '=')"},
	    {"\"ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLt=\"",
	     "t.yaml:2:49: upstream.servers[0].pin_sha256[0]: bad pin: not canonical base64 (the "
	     "last character has stray bits)"},
	    {"", "t.yaml:2:48: upstream.servers[0].pin_sha256: needs 1..8 entries, got 0"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char y[512];
		snprintf(y, sizeof(y), "%s%s]}]\n", pre, cases[i].pins);
		load_bad(y, cases[i].want);
	}
}

static void bootstrap(void **state)
{
	(void)state;
	struct nx_conf *c =
	    load_ok("upstream:\n  bootstrap: [\"192.0.2.53\", \"[2001:db8::53]:5353\"]\n"
		    "  servers: [\"tls://dns.example\"]\n");
	assert_int_equal(c->n_bootstrap, 2);
	addr_is(&c->bootstrap[0], AF_INET, "192.0.2.53", 53);
	addr_is(&c->bootstrap[1], AF_INET6, "2001:db8::53", 5353);
	nx_conf_free(c);
	/* no bootstrap: a plain server of upstream.servers will do */
	c = load_ok("upstream:\n  servers: [\"tls://dns.example\", \"192.0.2.1\"]\n");
	assert_int_equal(c->n_bootstrap, 0);
	nx_conf_free(c);
	/* a host name with nothing to resolve it: refused at its position, network-free */
	load_bad("upstream:\n  servers: [\"tls://9.9.9.9\", \"tls://dns.example\"]\n",
		 "t.yaml:2:30: upstream host 'dns.example' cannot be resolved: give its address "
		 "(the mapping form's `address`), list plain servers in upstream.bootstrap, or add "
		 "a plain server to upstream.servers");
	load_bad("upstream:\n  servers: [\"tls://9.9.9.9\"]\n  forward_zones:\n"
		 "    lan:\n      - \"https://router.lan/dns-query\"\n",
		 "t.yaml:5:9: upstream host 'router.lan' cannot be resolved: give its address "
		 "(the mapping form's `address`), list plain servers in upstream.bootstrap, or add "
		 "a plain server to upstream.servers");
	/* a plain server in a zone does not count: bootstrap is upstream.servers' */
	load_bad("upstream:\n  servers: [\"tls://dns.example\"]\n  forward_zones:\n"
		 "    lan: [\"192.168.1.1\"]\n",
		 "t.yaml:2:13: upstream host 'dns.example' cannot be resolved: give its address "
		 "(the mapping form's `address`), list plain servers in upstream.bootstrap, or add "
		 "a plain server to upstream.servers");
	c = load_ok("upstream:\n  servers: [{url: \"tls://dns.example\", address: 192.0.2.9}]\n");
	assert_true(c->upstreams[0].resolved);
	nx_conf_free(c);
	load_bad("upstream:\n  bootstrap: [\"tls://9.9.9.9\"]\n",
		 "t.yaml:2:15: upstream.bootstrap[0]: bad address 'tls://9.9.9.9': expected "
		 "addr:port, not a URL");
	load_bad("upstream:\n  bootstrap: [\"192.0.2.1\", \"192.0.2.1:53\"]\n",
		 "t.yaml:2:28: upstream.bootstrap[1]: duplicate address '192.0.2.1:53' (same as "
		 "[0])");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(plain_is_unchanged), T(tcp_urls),	      T(tls_urls),
	    T(https_urls),	   T(mapping_form),   T(forward_zone_servers),
	    T(url_errors),	   T(mapping_errors), T(pin_errors),
	    T(bootstrap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Loader: defaults, valid values, every error kind with its exact file:line:col. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"

static const struct sockaddr_in *v4(const struct nx_addr *a)
{
	assert_int_equal(a->ss.ss_family, AF_INET);
	assert_int_equal(a->len, sizeof(struct sockaddr_in));
	return (const struct sockaddr_in *)(const void *)&a->ss;
}

static const struct sockaddr_in6 *v6(const struct nx_addr *a)
{
	assert_int_equal(a->ss.ss_family, AF_INET6);
	assert_int_equal(a->len, sizeof(struct sockaddr_in6));
	return (const struct sockaddr_in6 *)(const void *)&a->ss;
}

static void assert_v4(const struct nx_addr *a, const char *ip, int port, const char *text)
{
	const struct sockaddr_in *s = v4(a);
	char buf[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &s->sin_addr, buf, sizeof(buf));
	assert_string_equal(buf, ip);
	assert_int_equal(ntohs(s->sin_port), port);
	assert_string_equal(a->text, text);
}

static void assert_v6(const struct nx_addr *a, const char *ip, int port, const char *text)
{
	const struct sockaddr_in6 *s = v6(a);
	char buf[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof(buf));
	assert_string_equal(buf, ip);
	assert_int_equal(ntohs(s->sin6_port), port);
	assert_string_equal(a->text, text);
}

static unsigned expected_auto_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1) {
		return 1;
	}
	return n > NX_CONF_MAX_WORKERS ? NX_CONF_MAX_WORKERS : (unsigned)n;
}

static void check_defaults(const struct nx_conf *c)
{
	assert_int_equal(c->n_listen_dns, 2);
	assert_v4(&c->listen_dns[0], "0.0.0.0", 53, "0.0.0.0:53");
	assert_v6(&c->listen_dns[1], "::", 53, "[::]:53");
	assert_int_equal(c->workers, expected_auto_workers());
	assert_int_equal(c->dns_max_connections, 16);
	assert_int_equal(c->tcp_idle_timeout_ms, 10000);
	assert_int_equal(c->tcp_read_timeout_ms, 3000);

	assert_int_equal(c->n_upstreams, 2);
	assert_v4(&c->upstreams[0].addr, "9.9.9.9", 53, "9.9.9.9:53");
	assert_v4(&c->upstreams[1].addr, "1.1.1.1", 53, "1.1.1.1:53");
	assert_int_equal(c->race, 2);
	assert_int_equal(c->timeout_ms, 2000);
	assert_int_equal(c->stagger_ms, 100);
	assert_int_equal(c->n_zones, 0);
	assert_null(c->zones);

	assert_int_equal(c->permits, 32);
	assert_int_equal(c->coalesce_max_waiters, 32);

	assert_int_equal(c->n_allow, 0);
	assert_int_equal(c->n_deny, 0);

	assert_true(c->admin_enabled);
	assert_v4(&c->admin_listen, "127.0.0.1", 8080, "127.0.0.1:8080");

	assert_string_equal(c->state_dir, "/var/lib/nxdns");
	assert_string_equal(c->log_level, "info");
}

static void test_defaults_empty(void **state)
{
	(void)state;
	const char *texts[] = {
		"",
		"# nothing but a comment\n",
		"---\n",
		"{}\n",
		"listener:\nupstream:\n  # all commented out\naccess: {}\n",
		"upstream:\n  forward_zones:\n",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct nx_conf *c = load_ok(texts[i]);
		check_defaults(c);
		assert_string_equal(c->path, "t.yaml");
		nx_conf_free(c);
	}
}

static void test_all_keys_set(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("listener:\n"
				    "  dns: [\"127.0.0.1:5353\", \"[::1]:5353\", 192.168.1.2]\n"
				    "  workers: 3\n"
				    "  dns_max_connections: 100\n"
				    "  tcp_idle_timeout_ms: 20000\n"
				    "  tcp_read_timeout_ms: 1500\n"
				    "upstream:\n"
				    "  servers:\n"
				    "    - 192.0.2.1\n"
				    "    - \"[2001:db8::53]:5300\"\n"
				    "    - 2001:db8::1\n"
				    "  race: 3\n"
				    "  timeout_ms: 50\n"
				    "  stagger_ms: 0\n"
				    "query_budget:\n"
				    "  permits: 65535\n"
				    "  coalesce_max_waiters: 1\n"
				    "access:\n"
				    "  allow: [192.168.0.0/16, \"fd00::/8\"]\n"
				    "  deny: [192.168.1.66]\n"
				    "admin:\n"
				    "  enabled: false\n"
				    "  listen: \"[::1]:9090\"\n"
				    "state_dir: /tmp/nx state\n"
				    "log:\n"
				    "  level: debug\n");
	assert_int_equal(c->n_listen_dns, 3);
	assert_v4(&c->listen_dns[0], "127.0.0.1", 5353, "127.0.0.1:5353");
	assert_v6(&c->listen_dns[1], "::1", 5353, "[::1]:5353");
	assert_v4(&c->listen_dns[2], "192.168.1.2", 53, "192.168.1.2");
	assert_int_equal(c->workers, 3);
	assert_int_equal(c->dns_max_connections, 100);
	assert_int_equal(c->tcp_idle_timeout_ms, 20000);
	assert_int_equal(c->tcp_read_timeout_ms, 1500);
	assert_int_equal(c->n_upstreams, 3);
	assert_v4(&c->upstreams[0].addr, "192.0.2.1", 53, "192.0.2.1");
	assert_v6(&c->upstreams[1].addr, "2001:db8::53", 5300, "[2001:db8::53]:5300");
	assert_v6(&c->upstreams[2].addr, "2001:db8::1", 53, "2001:db8::1");
	assert_int_equal(c->race, 3);
	assert_int_equal(c->timeout_ms, 50);
	assert_int_equal(c->stagger_ms, 0);
	assert_int_equal(c->permits, 65535);
	assert_int_equal(c->coalesce_max_waiters, 1);
	assert_int_equal(c->n_allow, 2);
	assert_int_equal(c->allow[0].family, AF_INET);
	assert_int_equal(c->allow[0].prefix, 16);
	assert_int_equal(c->allow[1].family, AF_INET6);
	assert_int_equal(c->allow[1].prefix, 8);
	assert_int_equal(c->allow[1].addr[0], 0xfd);
	assert_int_equal(c->n_deny, 1);
	assert_int_equal(c->deny[0].prefix, 32);
	assert_false(c->admin_enabled);
	assert_v6(&c->admin_listen, "::1", 9090, "[::1]:9090");
	assert_string_equal(c->state_dir, "/tmp/nx state");
	assert_string_equal(c->log_level, "debug");
	nx_conf_free(c);
}

static void test_values_edges(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("listener: {workers: 64}\nadmin: {enabled: TRUE}\n"
				    "log: {level: error}\nupstream: {race: 16}\n");
	assert_int_equal(c->workers, 64);
	assert_true(c->admin_enabled);
	assert_string_equal(c->log_level, "error");
	assert_int_equal(c->race, 16);
	nx_conf_free(c);

	c = load_ok("listener:\n  workers: 1\nadmin:\n  enabled: False\nlog:\n  level: warn\n");
	assert_int_equal(c->workers, 1);
	assert_false(c->admin_enabled);
	assert_string_equal(c->log_level, "warn");
	nx_conf_free(c);

	/* 0 = auto; quoted strings are strings */
	c = load_ok("listener:\n  workers: 0\nstate_dir: '/srv/nxdns'\n");
	assert_int_equal(c->workers, expected_auto_workers());
	assert_string_equal(c->state_dir, "/srv/nxdns");
	nx_conf_free(c);
}

static void test_forward_zones(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("upstream:\n"
				    "  forward_zones:\n"
				    "    lan: [\"192.168.1.1\"]\n"
				    "    Corp.Example.: [\"10.0.0.53:5353\", \"[fd00::53]:53\"]\n"
				    "    168.192.in-addr.arpa:\n"
				    "      - 192.168.1.1\n"
				    "    home.lan: [192.168.1.2]\n");
	assert_int_equal(c->n_zones, 4);
	/* most specific (most labels) first; ties in wire-byte order */
	assert_string_equal(c->zones[0].text, "168.192.in-addr.arpa");
	assert_string_equal(c->zones[1].text, "Corp.Example.");
	assert_string_equal(c->zones[2].text, "home.lan");
	assert_string_equal(c->zones[3].text, "lan");

	static const uint8_t corp[] = "\x04" "corp" "\x07" "example";
	assert_int_equal(c->zones[1].name_len, sizeof(corp));
	assert_memory_equal(c->zones[1].name, corp, sizeof(corp)); /* lower-cased, root label */
	assert_int_equal(c->zones[1].n_servers, 2);
	assert_v4(&c->zones[1].servers[0].addr, "10.0.0.53", 5353, "10.0.0.53:5353");
	assert_v6(&c->zones[1].servers[1].addr, "fd00::53", 53, "[fd00::53]:53");

	static const uint8_t lan[] = "\x03" "lan";
	assert_int_equal(c->zones[3].name_len, sizeof(lan));
	assert_memory_equal(c->zones[3].name, lan, sizeof(lan));
	assert_int_equal(c->zones[3].n_servers, 1);
	assert_v4(&c->zones[3].servers[0].addr, "192.168.1.1", 53, "192.168.1.1");
	assert_int_equal(c->zones[0].n_servers, 1);
	nx_conf_free(c);

	/* A Unicode zone name is matched in its Punycode form, as queries carry it. */
	c = load_ok("upstream:\n  forward_zones:\n    \"B\xc3\xbc" "cher.example\": [192.168.1.1]\n");
	static const uint8_t idn[] = "\x0d" "xn--bcher-kva" "\x07" "example";
	assert_int_equal(c->n_zones, 1);
	assert_int_equal(c->zones[0].name_len, sizeof(idn));
	assert_memory_equal(c->zones[0].name, idn, sizeof(idn));
	nx_conf_free(c);
}

static void test_forward_zone_errors(void **state)
{
	(void)state;
	load_bad("upstream:\n  forward_zones:\n    lan: [192.168.1.1]\n    LAN.: [192.168.1.2]\n",
		 "t.yaml:4:5: upstream.forward_zones: duplicate zone 'LAN.' (same as 'lan')");
	load_bad("upstream:\n  forward_zones:\n    a..b: [192.168.1.1]\n",
		 "t.yaml:3:5: upstream.forward_zones: bad zone name 'a..b'");
	/* U+2044 FRACTION SLASH is DISALLOWED in IDNA 2008 */
	load_bad("upstream:\n  forward_zones:\n    \"a\xe2\x81\x84" "b.lan\": [192.168.1.1]\n",
		 "t.yaml:3:5: upstream.forward_zones: zone name 'a\xe2\x81\x84" "b.lan' is not a valid "
		 "internationalized name");
	load_bad("upstream:\n  forward_zones:\n    lan: []\n",
		 "t.yaml:3:10: upstream.forward_zones.lan: needs 1..16 entries, got 0");
	load_bad("upstream:\n  forward_zones:\n    lan:\n",
		 "t.yaml:3:5: upstream.forward_zones.lan: expected a list, got null");
	load_bad("upstream:\n  forward_zones:\n    lan: [192.168.1.1, router.lan]\n",
		 "t.yaml:3:24: upstream.forward_zones.lan[1]: bad address 'router.lan': not an "
		 "IP address (host names are not accepted here)");
	load_bad("upstream:\n  forward_zones: [lan]\n",
		 "t.yaml:2:18: upstream.forward_zones: expected a mapping of zone: [servers], got "
		 "a list");
}

static void test_unknown_keys(void **state)
{
	(void)state;
	load_bad("listner:\n  workers: 2\n",
		 "t.yaml:1:1: unknown key 'listner' (did you mean 'listener'?)");
	load_bad("listener:\n  dns: [\"127.0.0.1:53\"]\n  wrkers: 2\n",
		 "t.yaml:3:3: unknown key 'listener.wrkers' (did you mean 'listener.workers'?)");
	load_bad("workers: 2\n", "t.yaml:1:1: unknown key 'workers' (did you mean "
				 "'listener.workers'?)");
	load_bad("admin:\n  servers: []\n",
		 "t.yaml:2:3: unknown key 'admin.servers' (did you mean 'upstream.servers'?)");
	load_bad("filter:\n  lists: []\n", "t.yaml:2:3: unknown key 'filter.lists'");
	load_bad("state_dir: /x\ncache:\n  sizes: 1\n",
		 "t.yaml:3:3: unknown key 'cache.sizes' (did you mean 'cache.size'?)");
	load_bad("group:\n  kids: {}\n", "t.yaml:1:1: unknown key 'group' (did you mean 'groups'?)");
	load_bad("dashboard: {}\n", "t.yaml:1:1: unknown key 'dashboard'");
	load_bad("listener.workers: 2\n", "t.yaml:1:1: unknown key 'listener.workers' (write "
					  "dotted keys as nested mappings)");
	load_bad("listener:\n  workers:\n    count: 2\n",
		 "t.yaml:3:5: listener.workers: expected an unsigned integer, got a mapping");
}

static void test_duplicate_keys(void **state)
{
	(void)state;
	load_bad("listener:\n  workers: 2\nadmin:\n  enabled: true\nlistener:\n  workers: 3\n",
		 "t.yaml:5:1: duplicate key 'listener' (first at line 1)");
	load_bad("upstream:\n  race: 1\n  timeout_ms: 100\n  race: 2\n",
		 "t.yaml:4:3: duplicate key 'upstream.race' (first at line 2)");
	load_bad("upstream: {race: 1, 'race': 2}\n",
		 "t.yaml:1:21: duplicate key 'upstream.race' (first at line 1)");
}

static void test_yaml_syntax(void **state)
{
	(void)state;
	struct nx_conf *c = (struct nx_conf *)0x1;
	char err[NX_CONF_ERR_MAX] = "";
	const char *y = "listener:\n  workers: [1, 2\nadmin:\n";
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_null(c);
	/* libfyaml's wording may change; the position may not (the open flow list ends at EOF) */
	assert_true(!strncmp(err, "t.yaml:4:1: ", 12));
	assert_true(strlen(err) > 12);

	y = "a: 1\n  b: 2\n";
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_true(!strncmp(err, "t.yaml:1:4: ", 12));

	y = "listener:\n\tworkers: 2\n"; /* tab indentation */
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_true(!strncmp(err, "t.yaml:2:1: ", 12));

	load_bad("listener:\n  workers: 2\n---\nadmin:\n  enabled: true\n",
		 "t.yaml:4:1: only one YAML document is allowed");
	load_bad("- a\n- b\n", "t.yaml:1:1: expected a mapping of keys at the top level, got a "
			       "list");
	load_bad("just text\n", "t.yaml:1:1: expected a mapping of keys at the top level, got a "
				"scalar");
	load_bad("? [a, b]\n: 1\n", "t.yaml:1:3: keys must be plain names, got a list");
	load_bad("upstream:\n  race: &r 2\n  timeout_ms: *r\n",
		 "t.yaml:3:15: upstream.timeout_ms: expected an unsigned integer, got an alias");
}

static void test_type_errors(void **state)
{
	(void)state;
	load_bad("listener:\n  workers: abc\n",
		 "t.yaml:2:12: listener.workers: expected an unsigned integer, got 'abc'");
	load_bad("listener:\n  workers: -1\n",
		 "t.yaml:2:12: listener.workers: expected an unsigned integer, got '-1'");
	load_bad("upstream:\n  race: [1]\n",
		 "t.yaml:2:9: upstream.race: expected an unsigned integer, got a list");
	load_bad("upstream:\n  race:\n",
		 "t.yaml:2:3: upstream.race: expected an unsigned integer, got null");
	load_bad("upstream:\n  race: \"2\"\n",
		 "t.yaml:2:9: upstream.race: expected an unsigned integer, got a quoted string");
	load_bad("upstream:\n  servers:\n    a: 1\n",
		 "t.yaml:3:5: upstream.servers: expected a list, got a mapping");
	load_bad("upstream:\n  servers: 9.9.9.9\n",
		 "t.yaml:2:12: upstream.servers: expected a list, got a scalar");
	load_bad("listener: 5\n", "t.yaml:1:11: listener: expected a mapping, got a scalar");
	load_bad("listener:\n  - dns\n", "t.yaml:2:3: listener: expected a mapping, got a list");
	load_bad("admin:\n  enabled: yes\n",
		 "t.yaml:2:12: admin.enabled: expected true or false, got 'yes'");
	load_bad("admin:\n  enabled: 'true'\n",
		 "t.yaml:2:12: admin.enabled: expected true or false, got a quoted string");
	load_bad("log:\n  level: verbose\n",
		 "t.yaml:2:10: log.level: 'verbose' is not one of error, warn, info, debug");
	load_bad("log:\n  level: [info]\n",
		 "t.yaml:2:10: log.level: expected one of the listed words, got a list");
	load_bad("state_dir: \"\"\n", "t.yaml:1:12: state_dir: must not be empty");
	load_bad("state_dir:\n", "t.yaml:1:1: state_dir: expected a string, got null");
	load_bad("access:\n  allow: 10.0.0.0/8\n",
		 "t.yaml:2:10: access.allow: expected a list, got a scalar");
	load_bad("access:\n  allow:\n    - [10.0.0.0/8]\n",
		 "t.yaml:3:7: access.allow[0]: expected an address/prefix, got a list");
}

static void test_range_errors(void **state)
{
	(void)state;
	load_bad("listener:\n  workers: 65\n",
		 "t.yaml:2:12: listener.workers: 65 is out of range 0..64");
	load_bad("upstream:\n  timeout_ms: 49\n",
		 "t.yaml:2:15: upstream.timeout_ms: 49 is out of range 50..60000");
	load_bad("upstream:\n  race: 0\n", "t.yaml:2:9: upstream.race: 0 is out of range 1..16");
	load_bad("upstream:\n  race: 17\n",
		 "t.yaml:2:9: upstream.race: 17 is out of range 1..16");
	load_bad("query_budget:\n  permits: 99999999999999999999999999\n",
		 "t.yaml:2:12: query_budget.permits: 99999999999999999999999999 is out of range "
		 "1..65535");
	load_bad("listener:\n  dns_max_connections: 65536\n",
		 "t.yaml:2:24: listener.dns_max_connections: 65536 is out of range 1..65535");
	load_bad("upstream:\n  servers: []\n",
		 "t.yaml:2:12: upstream.servers: needs 1..16 entries, got 0");
	load_bad("upstream:\n  servers: [1.0.0.1, 1.0.0.2, 1.0.0.3, 1.0.0.4, 1.0.0.5, 1.0.0.6, "
		 "1.0.0.7, 1.0.0.8, 1.0.0.9, 1.0.0.10, 1.0.0.11, 1.0.0.12, 1.0.0.13, 1.0.0.14, "
		 "1.0.0.15, 1.0.0.16, 1.0.0.17]\n",
		 "t.yaml:2:12: upstream.servers: needs 1..16 entries, got 17");
}

static void test_address_errors(void **state)
{
	(void)state;
	load_bad("upstream:\n  servers: [\"9.9.9.9:53\", \"dns.google\"]\n",
		 "t.yaml:2:27: upstream.servers[1]: bad address 'dns.google': not an IP address "
		 "(host names are not accepted here)");
	load_bad("listener:\n  dns:\n    - 127.0.0.1:53\n    - \"[::1]:99999\"\n",
		 "t.yaml:4:7: listener.dns[1]: bad address '[::1]:99999': port must be 1..65535");
	load_bad("listener:\n  dns:\n    - \"[::1:53\"\n",
		 "t.yaml:3:7: listener.dns[0]: bad address '[::1:53': missing ']' after IPv6 "
		 "address");
	load_bad("admin:\n  listen: 127.0.0.1\n",
		 "t.yaml:2:11: admin.listen: bad address '127.0.0.1': missing port (addr:port)");
	load_bad("admin:\n  listen: \"::1:8080\"\n",
		 "t.yaml:2:11: admin.listen: bad address '::1:8080': IPv6 address needs brackets "
		 "and a port: [addr]:port");
	load_bad("admin:\n  listen: \"127.0.0.1:http\"\n",
		 "t.yaml:2:11: admin.listen: bad address '127.0.0.1:http': port is not a number");
	load_bad("admin:\n  listen: 127.0.0.1:0\n",
		 "t.yaml:2:11: admin.listen: bad address '127.0.0.1:0': port must be 1..65535");
	load_bad("admin:\n  listen: \"[127.0.0.1]:80\"\n",
		 "t.yaml:2:11: admin.listen: bad address '[127.0.0.1]:80': not an IPv6 address");
	load_bad("listener:\n  dns: [\"127.0.0.1:53\", 127.0.0.1]\n",
		 "t.yaml:2:25: listener.dns[1]: duplicate address '127.0.0.1' (same as [0])");
	load_bad("access:\n  deny: [\"10.0.0.0/33\"]\n",
		 "t.yaml:2:10: access.deny[0]: bad prefix '10.0.0.0/33': IPv4 prefix length must "
		 "be 0..32");
	load_bad("access:\n  allow:\n    - 10.0.0.0/8\n    - lan\n",
		 "t.yaml:4:7: access.allow[1]: bad prefix 'lan': not an IP address or "
		 "address/prefix");
}

static void test_first_error_wins(void **state)
{
	(void)state;
	load_bad("listener:\n  workers: 99\nbogus: 1\n",
		 "t.yaml:2:12: listener.workers: 99 is out of range 0..64");
}

static void test_error_buffer(void **state)
{
	(void)state;
	/* truncated but NUL-terminated; NULL buffer is allowed */
	struct nx_conf *c = NULL;
	char err[12];
	memset(err, 'x', sizeof(err));
	const char *y = "listener:\n  workers: 99\n";
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err)),
			 NX_ECONFIG);
	assert_string_equal(err, "t.yaml:2:12");
	assert_int_equal(nx_conf_load_string("t.yaml", y, strlen(y), &c, NULL, 0), NX_ECONFIG);
	assert_null(c);
}

static void test_load_file(void **state)
{
	(void)state;
	const char *dir = getenv("TMPDIR");
	char path[512];
	snprintf(path, sizeof(path), "%s/nx-conf-test-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *y = "# test file\nupstream:\n  servers: [\"[2001:db8::1]:53\"]\n  race: 1\n";
	assert_int_equal(write(fd, y, strlen(y)), (ssize_t)strlen(y));
	close(fd);

	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), 0);
	assert_non_null(c);
	assert_string_equal(c->path, path);
	assert_int_equal(c->n_upstreams, 1);
	assert_v6(&c->upstreams[0].addr, "2001:db8::1", 53, "[2001:db8::1]:53");
	assert_int_equal(c->race, 1);
	nx_conf_free(c);

	/* errors name the file */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	y = "upstream:\n  race: 0\n";
	assert_int_equal(write(fd, y, strlen(y)), (ssize_t)strlen(y));
	close(fd);
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), NX_ECONFIG);
	assert_null(c);
	char want[600];
	snprintf(want, sizeof(want), "%s:2:9: upstream.race: 0 is out of range 1..16", path);
	assert_string_equal(err, want);

	unlink(path);
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), -ENOENT);
	assert_null(c);
	snprintf(want, sizeof(want), "%s: %s", path, strerror(ENOENT));
	assert_string_equal(err, want);
}

static void test_large_file(void **state)
{
	(void)state;
	/* comments make a valid file; past NX_CONF_FILE_MAX is refused, not read whole */
	const char *dir = getenv("TMPDIR");
	char path[512];
	snprintf(path, sizeof(path), "%s/nx-conf-big-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	static char line[1024];
	memset(line, ' ', sizeof(line));
	line[0] = '#';
	line[sizeof(line) - 1] = '\n';
	for (int i = 0; i < 5 * 1024; i++) {
		assert_int_equal(write(fd, line, sizeof(line)), (ssize_t)sizeof(line));
	}
	close(fd);
	struct nx_conf *c = NULL;
	char err[NX_CONF_ERR_MAX] = "";
	assert_int_equal(nx_conf_load(path, &c, err, sizeof(err)), NX_ECONFIG);
	assert_null(c);
	assert_non_null(strstr(err, "larger than"));
	unlink(path);
}

/* Every allocation failure point unwinds without leaking (teardown checks the ledger). */
static void test_alloc_failures(void **state)
{
	(void)state;
	const char *y = "upstream:\n  forward_zones:\n    lan: [192.168.1.1, 192.168.1.2]\n"
			"    b.lan: [192.168.1.3]\naccess:\n  deny: [10.0.0.1]\n";
	int failed = 0;
	for (long n = 0; n < 1000; n++) {
		struct nx_conf *c = NULL;
		char err[NX_CONF_ERR_MAX] = "";
		nx_mem_fail_after(n);
		int rc = nx_conf_load_string("t.yaml", y, strlen(y), &c, err, sizeof(err));
		nx_mem_fail_after(-1);
		if (rc == 0) {
			assert_int_equal(c->n_zones, 2);
			nx_conf_free(c);
			break;
		}
		assert_int_equal(rc, NX_ECONFIG);
		assert_null(c);
		assert_non_null(strstr(err, "out of memory"));
		failed++;
	}
	assert_true(failed > 5);
}

static void test_free_null(void **state)
{
	(void)state;
	nx_conf_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_defaults_empty),	    T(test_all_keys_set),    T(test_values_edges),
		T(test_forward_zones),	    T(test_forward_zone_errors), T(test_unknown_keys),
		T(test_duplicate_keys),	    T(test_yaml_syntax),     T(test_type_errors),
		T(test_range_errors),	    T(test_address_errors),  T(test_first_error_wins),
		T(test_error_buffer),	    T(test_load_file),	     T(test_large_file),
		T(test_alloc_failures),	    T(test_free_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Addresses, CIDR prefixes and access-control decisions. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "helpers.h"

static struct sockaddr_storage sa(const char *ip)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
	} else {
		assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
		s6->sin6_family = AF_INET6;
	}
	return ss;
}

static bool allows(const struct nx_conf *c, const char *ip)
{
	struct sockaddr_storage ss = sa(ip);
	return nx_conf_acl_allows(c, (const struct sockaddr *)&ss);
}

static void test_addr_parse(void **state)
{
	(void)state;
	struct nx_addr a;
	assert_int_equal(nx_addr_parse("192.0.2.1:853", -1, &a), 0);
	assert_int_equal(a.ss.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&a.ss)->sin_port), 853);
	assert_string_equal(a.text, "192.0.2.1:853");

	assert_int_equal(nx_addr_parse("[2001:db8::1]:53", -1, &a), 0);
	assert_int_equal(a.ss.ss_family, AF_INET6);
	assert_int_equal(a.len, sizeof(struct sockaddr_in6));
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&a.ss)->sin6_port), 53);

	assert_int_equal(nx_addr_parse("[::]:5353", -1, &a), 0);
	assert_true(IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&a.ss)->sin6_addr));

	/* bare address only with a default port */
	assert_int_equal(nx_addr_parse("192.0.2.1", 53, &a), 0);
	assert_int_equal(ntohs(((struct sockaddr_in *)&a.ss)->sin_port), 53);
	assert_int_equal(nx_addr_parse("192.0.2.1", -1, &a), NX_ECONFIG);
	assert_int_equal(nx_addr_parse("2001:db8::1", 53, &a), 0);
	assert_int_equal(a.ss.ss_family, AF_INET6);
	assert_int_equal(nx_addr_parse("2001:db8::1", -1, &a), NX_ECONFIG);
	assert_int_equal(nx_addr_parse("[2001:db8::1]", 53, &a), 0);
	assert_int_equal(nx_addr_parse("[2001:db8::1]", -1, &a), NX_ECONFIG);

	/* numeric scope id */
	assert_int_equal(nx_addr_parse("[fe80::1%1]:53", -1, &a), 0);
	assert_int_equal(((struct sockaddr_in6 *)&a.ss)->sin6_scope_id, 1);
	assert_int_equal(nx_addr_parse("[fe80::1%no-such-if0]:53", -1, &a), NX_ECONFIG);

	static const char *const bad[] = {
		"",	      "localhost:53",  "1.2.3:53",	  "1.2.3.4:",	  "1.2.3.4:0",
		"1.2.3.4:65536", "1.2.3.4:5x",    "1.2.3.4:+53",  "[::1]53",	  "[::1",
		"[1.2.3.4]:53", "::1:53x",	  "256.1.1.1:53", " 1.2.3.4:53", "127.1:53",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (nx_addr_parse(bad[i], -1, &a) != NX_ECONFIG) {
			fail_msg("accepted '%s'", bad[i]);
		}
	}
	assert_int_equal(nx_addr_parse("1.2.3.4:65535", -1, &a), 0);
	char longtext[100];
	memset(longtext, '1', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	assert_int_equal(nx_addr_parse(longtext, 53, &a), NX_ECONFIG);
}

static void test_cidr_parse(void **state)
{
	(void)state;
	struct nx_cidr c;
	assert_int_equal(nx_cidr_parse("10.0.0.0/8", &c), 0);
	assert_int_equal(c.family, AF_INET);
	assert_int_equal(c.prefix, 8);
	static const uint8_t ten[16] = {10};
	assert_memory_equal(c.addr, ten, 16);

	assert_int_equal(nx_cidr_parse("172.16.0.0/12", &c), 0);
	static const uint8_t b172[16] = {172, 16};
	assert_memory_equal(c.addr, b172, 16);

	assert_int_equal(nx_cidr_parse("192.0.2.7", &c), 0);
	assert_int_equal(c.prefix, 32);
	assert_int_equal(nx_cidr_parse("0.0.0.0/0", &c), 0);
	assert_int_equal(c.prefix, 0);

	assert_int_equal(nx_cidr_parse("2001:db8:8000::/33", &c), 0);
	assert_int_equal(c.family, AF_INET6);
	assert_int_equal(c.prefix, 33);
	static const uint8_t db8[16] = {0x20, 0x01, 0x0d, 0xb8, 0x80};
	assert_memory_equal(c.addr, db8, 16);
	assert_int_equal(nx_cidr_parse("::1", &c), 0);
	assert_int_equal(c.prefix, 128);

	/* IPv4-mapped prefixes become IPv4 prefixes */
	assert_int_equal(nx_cidr_parse("::ffff:192.168.0.0/112", &c), 0);
	assert_int_equal(c.family, AF_INET);
	assert_int_equal(c.prefix, 16);
	static const uint8_t b192[16] = {192, 168};
	assert_memory_equal(c.addr, b192, 16);

	static const char *const bad[] = {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x",
					  "10.0.0.0/-1", "10.0.0/8", "lan", "", "10.0.0.0/0008"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (nx_cidr_parse(bad[i], &c) != NX_ECONFIG) {
			fail_msg("accepted '%s'", bad[i]);
		}
	}
}

/* Host bits past the prefix are refused with the network they would have meant, not masked. */
static void test_cidr_host_bits(void **state)
{
	(void)state;
	struct nx_cidr c;
	assert_int_equal(nx_cidr_parse("10.0.0.1/8", &c), NX_ECONFIG);
	assert_int_equal(nx_cidr_parse("172.31.255.255/12", &c), NX_ECONFIG);
	assert_int_equal(nx_cidr_parse("2001:db8:ffff::1/33", &c), NX_ECONFIG);
	/* The loader says where and what the network would have been. */
	load_bad("access:\n  allow: [10.0.0.1/8]\n",
		 "t.yaml:2:11: access.allow[0]: bad prefix '10.0.0.1/8': host bits are set past "
		 "the prefix length (the network is 10.0.0.0/8; a single host has no /prefix)");
	load_bad("access:\n  deny:\n    - 192.168.0.0/16\n    - \"2001:db8:ffff::1/33\"\n",
		 "t.yaml:4:7: access.deny[1]: bad prefix '2001:db8:ffff::1/33': host bits are set "
		 "past the prefix length (the network is 2001:db8:8000::/33; a single host has no "
		 "/prefix)");
	load_bad("clients:\n  - name: kid\n    ids: [192.168.1.7/24]\n",
		 "t.yaml:3:11: clients[0].ids[0]: bad address '192.168.1.7/24': host bits are set "
		 "past the prefix length (the network is 192.168.1.0/24; a single host has no "
		 "/prefix)");

	/* The last bit inside the prefix is the address's, the first one past it is not. */
	assert_int_equal(nx_cidr_parse("192.168.1.128/25", &c), 0);
	assert_int_equal(nx_cidr_parse("192.168.1.64/25", &c), NX_ECONFIG);
	assert_int_equal(nx_cidr_parse("fd00::1/128", &c), 0);
	assert_int_equal(nx_cidr_parse("fd00::1/127", &c), NX_ECONFIG);
	assert_int_equal(nx_cidr_parse("::ffff:192.168.0.1/112", &c), NX_ECONFIG);
	assert_int_equal(nx_cidr_parse("1.2.3.4/0", &c), NX_ECONFIG);
	/* A bare address is a host route, never "host bits set". */
	assert_int_equal(nx_cidr_parse("10.0.0.1", &c), 0);
	assert_int_equal(c.prefix, 32);
}

static void test_cidr_contains(void **state)
{
	(void)state;
	struct nx_cidr c;
	assert_int_equal(nx_cidr_parse("192.168.1.0/25", &c), 0);
	struct sockaddr_storage s = sa("192.168.1.127");
	assert_true(nx_cidr_contains(&c, (struct sockaddr *)&s));
	s = sa("192.168.1.128");
	assert_false(nx_cidr_contains(&c, (struct sockaddr *)&s));
	s = sa("::ffff:192.168.1.5"); /* v4-mapped client matched as IPv4 */
	assert_true(nx_cidr_contains(&c, (struct sockaddr *)&s));
	s = sa("2001:db8::1");
	assert_false(nx_cidr_contains(&c, (struct sockaddr *)&s));

	assert_int_equal(nx_cidr_parse("2001:db8::/32", &c), 0);
	s = sa("2001:db8:1::1");
	assert_true(nx_cidr_contains(&c, (struct sockaddr *)&s));
	s = sa("2001:db9::1");
	assert_false(nx_cidr_contains(&c, (struct sockaddr *)&s));

	assert_int_equal(nx_cidr_parse("0.0.0.0/0", &c), 0);
	s = sa("8.8.8.8");
	assert_true(nx_cidr_contains(&c, (struct sockaddr *)&s));
	s = sa("2001:db8::1");
	assert_false(nx_cidr_contains(&c, (struct sockaddr *)&s));
	assert_false(nx_cidr_contains(&c, NULL));
	struct sockaddr un = {.sa_family = AF_UNIX};
	assert_false(nx_cidr_contains(&c, &un));
}

static void test_acl_builtin(void **state)
{
	(void)state;
	struct nx_conf *c = load_ok("");
	static const char *const yes[] = {
		"127.0.0.1",	  "127.255.0.9",   "10.0.0.1",	     "10.255.255.255",
		"172.16.0.1",	  "172.31.255.254", "192.168.1.10",  "169.254.3.4",
		"::1",		  "fc00::1",	    "fd12:3456::1",  "fe80::1",
		"febf::1",	  "::ffff:192.168.1.10", "::ffff:127.0.0.1", "::ffff:10.9.8.7",
	};
	static const char *const no[] = {
		"8.8.8.8",	   "172.32.0.1",     "172.15.255.255", "192.169.0.1",
		"11.0.0.1",	   "2001:db8::1",    "fec0::1",	       "::2",
		"::ffff:8.8.8.8", "::ffff:172.32.0.1", "::",	       "0.0.0.0",
		"::a00:1", /* 10.0.0.1 as v4-compatible, not v4-mapped: IPv6, not private */
	};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!allows(c, yes[i])) {
			fail_msg("refused %s", yes[i]);
		}
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (allows(c, no[i])) {
			fail_msg("allowed %s", no[i]);
		}
	}
	struct sockaddr un = {.sa_family = AF_UNIX};
	assert_false(nx_conf_acl_allows(c, &un));
	assert_false(nx_conf_acl_allows(c, NULL));
	nx_conf_free(c);
}

static void test_acl_lists(void **state)
{
	(void)state;
	/* deny before allow; an allow list replaces the built-in ranges */
	struct nx_conf *c = load_ok("access:\n"
				    "  allow: [192.168.1.0/24, \"2001:db8::/32\", 203.0.113.7]\n"
				    "  deny: [192.168.1.66, \"2001:db8:bad::/48\"]\n");
	assert_true(allows(c, "192.168.1.10"));
	assert_true(allows(c, "::ffff:192.168.1.10"));
	assert_false(allows(c, "192.168.1.66"));
	assert_false(allows(c, "::ffff:192.168.1.66"));
	assert_true(allows(c, "203.0.113.7"));
	assert_false(allows(c, "203.0.113.8"));
	assert_true(allows(c, "2001:db8:1::1"));
	assert_false(allows(c, "2001:db8:bad::1"));
	assert_false(allows(c, "127.0.0.1")); /* built-ins no longer apply */
	assert_false(allows(c, "10.0.0.1"));
	nx_conf_free(c);

	/* deny alone narrows the built-in ranges */
	c = load_ok("access:\n  deny: [10.0.0.0/8, \"::ffff:192.168.5.0/120\"]\n");
	assert_false(allows(c, "10.1.1.1"));
	assert_false(allows(c, "192.168.5.9"));
	assert_false(allows(c, "::ffff:192.168.5.9"));
	assert_true(allows(c, "192.168.6.9"));
	assert_true(allows(c, "127.0.0.1"));
	assert_true(allows(c, "::1"));
	nx_conf_free(c);

	/* allow everything except one host */
	c = load_ok("access:\n  allow: [0.0.0.0/0, \"::/0\"]\n  deny: [198.51.100.1]\n");
	assert_true(allows(c, "8.8.8.8"));
	assert_true(allows(c, "2001:db8::1"));
	assert_true(allows(c, "::ffff:8.8.8.8"));
	assert_false(allows(c, "198.51.100.1"));
	assert_false(allows(c, "::ffff:198.51.100.1"));
	nx_conf_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_addr_parse),	   T(test_cidr_parse),	T(test_cidr_host_bits),
	    T(test_cidr_contains), T(test_acl_builtin), T(test_acl_lists),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Addresses, CIDR prefixes and the access check. Numeric only: nothing here resolves a name or
 * touches the network (an interface name after '%' in an IPv6 scope is looked up locally).
 */
#include "conf/conf.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "conf/impl.h"

/* Port: 1..65535, decimal digits only. */
static int parse_port(const char *s, const char **why)
{
	if (!*s) {
		*why = "missing port after ':'";
		return -1;
	}
	long v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9') {
			*why = "port is not a number";
			return -1;
		}
		v = v * 10 + (*p - '0');
		if (v > 65535) {
			break;
		}
	}
	if (v < 1 || v > 65535) {
		*why = "port must be 1..65535";
		return -1;
	}
	return (int)v;
}

/* Parse a bare IPv6 address with an optional %scope into sin6 (port left 0). */
static int parse_v6(const char *host, struct sockaddr_in6 *sin6, const char **why)
{
	char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
	if (strlen(host) >= sizeof(buf)) {
		*why = "not an IPv6 address";
		return -1;
	}
	strcpy(buf, host);
	char *pct = strchr(buf, '%');
	if (pct) {
		*pct++ = '\0';
	}
	memset(sin6, 0, sizeof(*sin6));
	sin6->sin6_family = AF_INET6;
	if (inet_pton(AF_INET6, buf, &sin6->sin6_addr) != 1) {
		*why = "not an IPv6 address";
		return -1;
	}
	if (pct) {
		unsigned long idx = 0;
		char *end = NULL;
		if (*pct >= '0' && *pct <= '9') {
			idx = strtoul(pct, &end, 10);
		}
		if (!end || *end) {
			idx = if_nametoindex(pct);
		}
		if (!*pct || idx == 0 || idx > UINT32_MAX) {
			*why = "unknown IPv6 scope (interface)";
			return -1;
		}
		sin6->sin6_scope_id = (uint32_t)idx;
	}
	return 0;
}

int nx_addr_parse_why(const char *s, int default_port, struct nx_addr *out, const char **why)
{
	const char *dummy;
	if (!why) {
		why = &dummy;
	}
	memset(out, 0, sizeof(*out));
	size_t n = strlen(s);
	if (n == 0) {
		*why = "empty address";
		return NX_ECONFIG;
	}
	if (n >= sizeof(out->text)) {
		*why = "address too long";
		return NX_ECONFIG;
	}
	if (strstr(s, "://")) {
		*why = "expected addr:port, not a URL";
		return NX_ECONFIG;
	}
	char host[sizeof(out->text)];
	const char *port_text = NULL;
	bool v6 = false;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close) {
			*why = "missing ']' after IPv6 address";
			return NX_ECONFIG;
		}
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		v6 = true;
		if (close[1] == ':') {
			port_text = close + 2;
		} else if (close[1] != '\0') {
			*why = "expected ':port' after ']'";
			return NX_ECONFIG;
		}
	} else {
		const char *colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':')) {
			/* Several colons and no brackets: a bare IPv6 address. */
			if (default_port < 0) {
				*why = "IPv6 address needs brackets and a port: [addr]:port";
				return NX_ECONFIG;
			}
			strcpy(host, s);
			v6 = true;
		} else if (colon) {
			memcpy(host, s, (size_t)(colon - s));
			host[colon - s] = '\0';
			port_text = colon + 1;
		} else {
			strcpy(host, s);
		}
	}

	int port = default_port;
	if (port_text) {
		port = parse_port(port_text, why);
		if (port < 0) {
			return NX_ECONFIG;
		}
	} else if (default_port < 0) {
		*why = "missing port (addr:port)";
		return NX_ECONFIG;
	}

	if (v6) {
		struct sockaddr_in6 sin6;
		if (parse_v6(host, &sin6, why) < 0) {
			return NX_ECONFIG;
		}
		sin6.sin6_port = htons((uint16_t)port);
		memcpy(&out->ss, &sin6, sizeof(sin6));
		out->len = sizeof(sin6);
	} else {
		struct sockaddr_in sin;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
			*why = "not an IP address (host names are not accepted here)";
			return NX_ECONFIG;
		}
		sin.sin_port = htons((uint16_t)port);
		memcpy(&out->ss, &sin, sizeof(sin));
		out->len = sizeof(sin);
	}
	memcpy(out->text, s, n + 1);
	return 0;
}

int nx_addr_parse(const char *s, int default_port, struct nx_addr *out)
{
	return nx_addr_parse_why(s, default_port, out, NULL);
}

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void clear_host_bits(uint8_t *addr, unsigned bytes, unsigned prefix)
{
	for (unsigned i = 0; i < bytes; i++) {
		unsigned bit = i * 8;
		if (bit >= prefix) {
			addr[i] = 0;
		} else if (prefix - bit < 8) {
			addr[i] &= (uint8_t)(0xff << (8 - (prefix - bit)));
		}
	}
}

/*
 * An address with bits set past its prefix ("10.0.0.1/8") is refused rather than masked: it is
 * almost always a typo for a host route or for another network, and silently widening it to
 * 10.0.0.0/8 changes who is let in. The message names the network it would have been, so the
 * text lives in a buffer: config loads run on one thread at a time (the control thread, or a
 * CLI), but thread-local costs nothing and keeps the why pointer valid until that thread's
 * next call.
 */
static _Thread_local char host_bits_why[INET6_ADDRSTRLEN + 96];

static bool host_bits_set(const uint8_t *addr, const uint8_t *masked, unsigned bytes)
{
	return memcmp(addr, masked, bytes) != 0;
}

static const char *host_bits_message(int family, const uint8_t *masked, unsigned prefix)
{
	char net[INET6_ADDRSTRLEN];
	if (!inet_ntop(family, masked, net, sizeof(net))) {
		return "host bits are set past the prefix length";
	}
	snprintf(host_bits_why, sizeof(host_bits_why),
		 "host bits are set past the prefix length (the network is %s/%u; a single "
		 "host has no /prefix)",
		 net, prefix);
	return host_bits_why;
}

int nx_cidr_parse_why(const char *s, struct nx_cidr *out, const char **why)
{
	const char *dummy;
	if (!why) {
		why = &dummy;
	}
	memset(out, 0, sizeof(*out));
	char buf[INET6_ADDRSTRLEN + 8];
	if (strlen(s) >= sizeof(buf)) {
		*why = "not an address/prefix";
		return NX_ECONFIG;
	}
	strcpy(buf, s);
	char *slash = strchr(buf, '/');
	long prefix = -1;
	if (slash) {
		*slash++ = '\0';
		if (!*slash || strlen(slash) > 3 || strspn(slash, "0123456789") != strlen(slash)) {
			*why = "prefix length is not a number";
			return NX_ECONFIG;
		}
		prefix = strtol(slash, NULL, 10);
	}
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = AF_INET;
		if (prefix > 32) {
			*why = "IPv4 prefix length must be 0..32";
			return NX_ECONFIG;
		}
		out->prefix = (uint8_t)(prefix < 0 ? 32 : prefix);
		uint8_t given[4];
		memcpy(given, out->addr, 4);
		clear_host_bits(out->addr, 4, out->prefix);
		if (host_bits_set(given, out->addr, 4)) {
			*why = host_bits_message(AF_INET, out->addr, out->prefix);
			return NX_ECONFIG;
		}
		return 0;
	}
	if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = AF_INET6;
		if (prefix > 128) {
			*why = "IPv6 prefix length must be 0..128";
			return NX_ECONFIG;
		}
		out->prefix = (uint8_t)(prefix < 0 ? 128 : prefix);
		uint8_t given[16];
		memcpy(given, out->addr, 16);
		clear_host_bits(out->addr, 16, out->prefix);
		if (host_bits_set(given, out->addr, 16)) {
			*why = host_bits_message(AF_INET6, out->addr, out->prefix);
			return NX_ECONFIG;
		}
		/* ::ffff:a.b.c.d/96+ is an IPv4 prefix: clients are matched as IPv4. */
		if (out->prefix >= 96 && !memcmp(out->addr, v4mapped_prefix, 12)) {
			out->family = AF_INET;
			memmove(out->addr, out->addr + 12, 4);
			memset(out->addr + 4, 0, 12);
			out->prefix = (uint8_t)(out->prefix - 96);
		}
		return 0;
	}
	*why = "not an IP address or address/prefix";
	return NX_ECONFIG;
}

int nx_cidr_parse(const char *s, struct nx_cidr *out)
{
	return nx_cidr_parse_why(s, out, NULL);
}

bool nx_conf_client_bytes(const struct sockaddr *sa, int *family, const uint8_t **bytes)
{
	if (!sa) {
		return false;
	}
	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		*bytes = (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a =
			((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
		if (!memcmp(a, v4mapped_prefix, 12)) {
			*family = AF_INET;
			*bytes = a + 12;
		} else {
			*family = AF_INET6;
			*bytes = a;
		}
		return true;
	}
	return false;
}

bool nx_conf_prefix_match(const struct nx_cidr *c, int family, const uint8_t *a)
{
	if (c->family != family) {
		return false;
	}
	unsigned full = c->prefix / 8, rest = c->prefix % 8;
	if (memcmp(c->addr, a, full)) {
		return false;
	}
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));
		return (a[full] & mask) == c->addr[full];
	}
	return true;
}

bool nx_cidr_contains(const struct nx_cidr *c, const struct sockaddr *sa)
{
	int family;
	const uint8_t *a;
	return nx_conf_client_bytes(sa, &family, &a) && nx_conf_prefix_match(c, family, a);
}

/* Loopback and private ranges: the allow list when access.allow is empty. */
static const struct nx_cidr builtin_allow[] = {
	{AF_INET, {127}, 8},
	{AF_INET, {10}, 8},
	{AF_INET, {172, 16}, 12},
	{AF_INET, {192, 168}, 16},
	{AF_INET, {169, 254}, 16},
	{AF_INET6, {[15] = 1}, 128},
	{AF_INET6, {0xfc}, 7},
	{AF_INET6, {0xfe, 0x80}, 10},
};

static bool in_list(const struct nx_cidr *l, size_t n, int family, const uint8_t *a)
{
	for (size_t i = 0; i < n; i++) {
		if (nx_conf_prefix_match(&l[i], family, a)) {
			return true;
		}
	}
	return false;
}

bool nx_conf_acl_denied(const struct nx_conf *c, const struct sockaddr *sa)
{
	int family;
	const uint8_t *a;
	return !nx_conf_client_bytes(sa, &family, &a) || in_list(c->deny, c->n_deny, family, a);
}

bool nx_conf_acl_allows(const struct nx_conf *c, const struct sockaddr *sa)
{
	int family;
	const uint8_t *a;
	if (!nx_conf_client_bytes(sa, &family, &a)) {
		return false;
	}
	if (in_list(c->deny, c->n_deny, family, a)) {
		return false;
	}
	if (c->n_allow == 0) {
		return in_list(builtin_allow, NX_ARRAY_LEN(builtin_allow), family, a);
	}
	return in_list(c->allow, c->n_allow, family, a);
}

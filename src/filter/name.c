/* List-name normalisation: case, trailing dot, IDN, label rules, localhost-type and IP names. */
#include "filter/parse.h"

#include <arpa/inet.h>
#include <idn2.h>
#include <stdlib.h>
#include <string.h>

/* Names every hosts file carries for the machine itself; blocking them would break the LAN. */
static const char *const localhost_names[] = {
    "localhost", "localhost.localdomain", "localdomain", "local", "broadcasthost", "0.0.0.0",
    "loopback",
};

static bool is_localhost(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(localhost_names) / sizeof(localhost_names[0]); i++) {
		if (strlen(localhost_names[i]) == len && memcmp(localhost_names[i], s, len) == 0) {
			return true;
		}
	}
	/* ip6-localhost, ip6-loopback, ip6-allnodes, ... (single label) */
	return len > 4 && memcmp(s, "ip6-", 4) == 0 && !memchr(s, '.', len);
}

static bool is_ipv4(const char *s, size_t len)
{
	unsigned labels = 0, digits = 0, value = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (digits == 0 || value > 255) {
				return false;
			}
			labels++;
			digits = 0;
			value = 0;
		} else if (s[i] >= '0' && s[i] <= '9' && digits < 3) {
			value = value * 10 + (unsigned)(s[i] - '0');
			digits++;
		} else {
			return false;
		}
	}
	return labels == 4;
}

static inline bool name_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool nx_filter_name_valid(const char *s, size_t len)
{
	if (len == 0 || len > NX_FILTER_NAME_MAX) {
		return false;
	}
	size_t label = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '.') {
			if (label == 0) {
				return false;
			}
			label = 0;
		} else if (!name_byte((unsigned char)s[i]) || ++label > 63) {
			return false;
		}
	}
	return label > 0;
}

/* Do all xn-- labels decode as Punycode and pass IDNA checks? (libidn2 allocates.) */
static bool punycode_ok(const char *s)
{
	char *u = NULL;
	int rc = idn2_to_unicode_8z8z(s, &u, 0);
	idn2_free(u);
	return rc == IDN2_OK;
}

static bool has_xn_label(const char *s, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i++) {
		if ((i == 0 || s[i - 1] == '.') && memcmp(s + i, "xn--", 4) == 0) {
			return true;
		}
	}
	return false;
}

enum nx_filter_skip nx_filter_name_norm(const char *in, size_t len,
					char out[NX_FILTER_NAME_MAX + 1], size_t *out_len)
{
	if (len > 0 && in[len - 1] == '.') {
		len--;
	}
	if (len == 0) {
		return NX_FILTER_SKIP_invalid_name;
	}
	bool ascii = true;
	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)in[i] >= 0x80) {
			ascii = false;
			break;
		}
	}
	if (ascii) {
		/* Longer than any name: invalid before we look at it any further. */
		if (len > NX_FILTER_NAME_MAX) {
			return NX_FILTER_SKIP_invalid_name;
		}
		for (size_t i = 0; i < len; i++) {
			char c = in[i];
			out[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
		}
		out[len] = '\0';
	} else {
		/* Unicode: IDNA2008 with UTS#46 non-transitional mapping (what current browsers
		 * resolve: "ß" stays ß and becomes xn--), NFC applied to the input first. */
		char tmp[NX_FILTER_LINE_MAX + 1];
		if (len > NX_FILTER_LINE_MAX) {
			return NX_FILTER_SKIP_invalid_name;
		}
		/* libidn2 reads a C string: a NUL inside the token would silently cut the name
		 * (widening nothing the line said into something else is the rule). */
		if (memchr(in, '\0', len)) {
			return NX_FILTER_SKIP_invalid_name;
		}
		memcpy(tmp, in, len);
		tmp[len] = '\0';
		char *ace = NULL;
		int rc = idn2_to_ascii_8z(tmp, &ace, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
		if (rc != IDN2_OK || !ace) {
			idn2_free(ace);
			return NX_FILTER_SKIP_idn;
		}
		size_t alen = strlen(ace);
		if (alen > 0 && ace[alen - 1] == '.') {
			alen--;
		}
		if (alen > NX_FILTER_NAME_MAX) {
			idn2_free(ace);
			return NX_FILTER_SKIP_invalid_name;
		}
		for (size_t i = 0; i < alen; i++) {
			char c = ace[i];
			out[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
		}
		out[alen] = '\0';
		idn2_free(ace);
		len = alen;
	}
	if (is_localhost(out, len)) {
		return NX_FILTER_SKIP_localhost;
	}
	if (is_ipv4(out, len) || memchr(out, ':', len)) {
		unsigned char addr[16];
		if (is_ipv4(out, len) || inet_pton(AF_INET6, out, addr) == 1) {
			return NX_FILTER_SKIP_ip_rule;
		}
	}
	if (!nx_filter_name_valid(out, len)) {
		return NX_FILTER_SKIP_invalid_name;
	}
	if (has_xn_label(out, len) && !punycode_ok(out)) {
		return NX_FILTER_SKIP_idn;
	}
	*out_len = len;
	return NX_FILTER_SKIP_NONE;
}

/*
 * Uncompressed wire names: length, comparison, case, presentation form. See dns/wire.h.
 */
#include "dns/wire.h"

#include <string.h>

#include "base/err.h"

static inline uint8_t lower(uint8_t c)
{
	return (uint8_t)(c - 'A') < 26 ? (uint8_t)(c | 0x20) : c;
}

size_t nx_dns_name_len(const uint8_t *name, size_t max)
{
	size_t pos = 0;
	if (max > NX_DNS_NAME_MAX) {
		max = NX_DNS_NAME_MAX;
	}
	while (pos < max) {
		uint8_t c = name[pos];
		if (c == 0) {
			return pos + 1;
		}
		if (c > NX_DNS_LABEL_MAX) {
			return 0;
		}
		pos += (size_t)c + 1;
	}
	return 0;
}

bool nx_dns_name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	/*
	 * Byte-wise folding is exact for valid names: length bytes are <= 63 and never in
	 * 'A'..'Z', so a length byte only matches an equal byte and the label structure aligns.
	 */
	if (alen != blen) {
		return false;
	}
	for (size_t i = 0; i < alen; i++) {
		if (a[i] != b[i] && lower(a[i]) != lower(b[i])) {
			return false;
		}
	}
	return true;
}

void nx_dns_name_lower(uint8_t *name, size_t len)
{
	/* length bytes (<= 63) are not letters, so lowering every byte is safe */
	for (size_t i = 0; i < len; i++) {
		name[i] = lower(name[i]);
	}
}

static inline bool plain(uint8_t c)
{
	return (uint8_t)((c | 0x20) - 'a') < 26 || (uint8_t)(c - '0') < 10 || c == '-' || c == '_';
}

int nx_dns_name_to_text(const uint8_t *name, size_t len, char *out, size_t cap)
{
	size_t n = nx_dns_name_len(name, len);
	if (n == 0 || n != len) {
		return NX_EMALFORMED;
	}
	size_t o = 0;
	if (len == 1) {
		if (cap < 2) {
			return NX_ETRUNC;
		}
		out[0] = '.';
		out[1] = 0;
		return 1;
	}
	for (size_t pos = 0; name[pos] != 0;) {
		uint8_t l = name[pos++];
		if (o > 0) {
			if (cap - o < 2) {
				return NX_ETRUNC;
			}
			out[o++] = '.';
		}
		for (size_t i = 0; i < l; i++, pos++) {
			uint8_t c = name[pos];
			size_t need = plain(c) ? 1 : c == '.' ? 2 : 4;
			if (cap - o <= need) { /* keep a byte for the NUL */
				return NX_ETRUNC;
			}
			if (need == 1) {
				out[o++] = (char)c;
			} else if (need == 2) {
				out[o++] = '\\';
				out[o++] = '.';
			} else {
				out[o++] = '\\';
				out[o++] = (char)('0' + c / 100);
				out[o++] = (char)('0' + c / 10 % 10);
				out[o++] = (char)('0' + c % 10);
			}
		}
	}
	if (cap - o < 1) {
		return NX_ETRUNC;
	}
	out[o] = 0;
	return (int)o;
}

int nx_dns_name_from_text(const char *text, uint8_t out[NX_DNS_NAME_MAX])
{
	if (text[0] == '.' && text[1] == 0) {
		out[0] = 0;
		return 1;
	}
	if (text[0] == 0) {
		return NX_EMALFORMED;
	}
	size_t o = 1;	 /* next output byte */
	size_t lpos = 0; /* length byte of the current label */
	size_t llen = 0;
	const char *p = text;
	for (;;) {
		unsigned char c = (unsigned char)*p++;
		if (c == 0 || c == '.') {
			if (llen == 0) {
				return NX_EMALFORMED; /* empty label ("a..b", ".a", "") */
			}
			out[lpos] = (uint8_t)llen;
			if (c == 0 || *p == 0) {
				break; /* end, with or without the trailing dot */
			}
			lpos = o++;
			llen = 0;
			continue;
		}
		if (c == '\\') {
			c = (unsigned char)*p++;
			if (c == 0) {
				return NX_EMALFORMED;
			}
			if (c >= '0' && c <= '9') {
				if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9') {
					return NX_EMALFORMED;
				}
				unsigned v = (c - '0') * 100u + (unsigned)(p[0] - '0') * 10u +
					     (unsigned)(p[1] - '0');
				if (v > 255) {
					return NX_EMALFORMED;
				}
				c = (unsigned char)v;
				p += 2;
			}
		}
		/* room for this byte and the root label within 255 */
		if (llen == NX_DNS_LABEL_MAX || o + 1 > NX_DNS_NAME_MAX - 1) {
			return NX_EMALFORMED;
		}
		out[o++] = c;
		llen++;
	}
	out[o++] = 0;
	return (int)o;
}

unsigned nx_dns_name_labels(const uint8_t *name, size_t len)
{
	unsigned n = 0;
	size_t pos = 0;
	while (pos < len && name[pos] != 0) {
		pos += (size_t)name[pos] + 1;
		n++;
	}
	return n;
}

bool nx_dns_name_in_zone(const uint8_t *name, size_t nlen, const uint8_t *zone, size_t zlen)
{
	if (zlen == 0 || nlen < zlen) {
		return false;
	}
	/* the only label boundary that can match is the one that leaves exactly zlen bytes */
	size_t pos = 0;
	while (pos < nlen && nlen - pos > zlen) {
		uint8_t c = name[pos];
		if (c == 0 || c > NX_DNS_LABEL_MAX) {
			return false;
		}
		pos += (size_t)c + 1;
	}
	if (pos >= nlen || nlen - pos != zlen) {
		return false;
	}
	return nx_dns_name_eq(name + pos, zlen, zone, zlen);
}

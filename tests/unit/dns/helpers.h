/*
 * Shared helpers for the dns unit tests: hex decoding, wire names from text, and a tiny
 * message composer over the module's own writer. Header-only (static functions).
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "dns/msg.h"
#include "dns/wire.h"

/* Decode hex (whitespace ignored) into out; returns bytes or -1. */
static inline int hex_decode(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;
	int hi = -1;
	for (const char *p = hex; *p; p++) {
		int v;
		if (*p >= '0' && *p <= '9') {
			v = *p - '0';
		} else if (*p >= 'a' && *p <= 'f') {
			v = *p - 'a' + 10;
		} else if (*p >= 'A' && *p <= 'F') {
			v = *p - 'A' + 10;
		} else if (*p == ' ' || *p == '\n' || *p == '\t') {
			continue;
		} else {
			return -1;
		}
		if (hi < 0) {
			hi = v;
			continue;
		}
		if (n >= cap) {
			return -1;
		}
		out[n++] = (uint8_t)(hi << 4 | v);
		hi = -1;
	}
	return hi < 0 ? (int)n : -1;
}

/* Wire name from text into a static-size buffer; aborts the test on failure via return 0. */
static inline size_t wname(const char *text, uint8_t out[NX_DNS_NAME_MAX])
{
	int n = nx_dns_name_from_text(text, out);
	return n > 0 ? (size_t)n : 0;
}

static inline void fill_question(struct nx_dns_question *q, const char *name, uint16_t type)
{
	q->name_len = (uint8_t)wname(name, q->name);
	q->qtype = type;
	q->qclass = NX_DNS_C_IN;
}

/* Message composer: header then RRs appended with counts patched. */
struct composer {
	struct nx_dns_wr wr;
	uint16_t counts[4]; /* qd an ns ar */
};

static inline void comp_init(struct composer *c, uint8_t *buf, size_t cap, uint16_t id,
			     uint16_t flags)
{
	nx_dns_wr_init(&c->wr, buf, cap);
	memset(c->counts, 0, sizeof(c->counts));
	nx_dns_wr_u16(&c->wr, id);
	nx_dns_wr_u16(&c->wr, flags);
	for (int i = 0; i < 4; i++) {
		nx_dns_wr_u16(&c->wr, 0);
	}
}

static inline void comp_count(struct composer *c, int sec)
{
	c->counts[sec]++;
	nx_dns_wr_put_u16_at(&c->wr, 4 + 2 * (size_t)sec, c->counts[sec]);
}

static inline void comp_question(struct composer *c, const char *name, uint16_t type)
{
	uint8_t n[NX_DNS_NAME_MAX];
	size_t l = wname(name, n);
	nx_dns_wr_name(&c->wr, n, l);
	nx_dns_wr_u16(&c->wr, type);
	nx_dns_wr_u16(&c->wr, NX_DNS_C_IN);
	comp_count(c, 0);
}

/* RR with owner text, or owner_ptr (compression pointer value) when name is NULL. */
static inline void comp_rr(struct composer *c, int sec, const char *name, uint16_t owner_ptr,
			   uint16_t type, uint16_t cls, uint32_t ttl, const void *rdata,
			   uint16_t rdlen)
{
	if (name) {
		uint8_t n[NX_DNS_NAME_MAX];
		size_t l = wname(name, n);
		nx_dns_wr_name(&c->wr, n, l);
	} else {
		nx_dns_wr_u16(&c->wr, owner_ptr);
	}
	nx_dns_wr_u16(&c->wr, type);
	nx_dns_wr_u16(&c->wr, cls);
	nx_dns_wr_u32(&c->wr, ttl);
	nx_dns_wr_u16(&c->wr, rdlen);
	nx_dns_wr_bytes(&c->wr, rdata, rdlen);
	comp_count(c, sec);
}

/* OPT RR in the additional section; options as raw bytes. */
static inline void comp_opt(struct composer *c, uint16_t size, uint8_t ext, bool do_bit,
			    const void *opts, uint16_t optlen)
{
	nx_dns_wr_u8(&c->wr, 0);
	nx_dns_wr_u16(&c->wr, NX_DNS_T_OPT);
	nx_dns_wr_u16(&c->wr, size);
	nx_dns_wr_u32(&c->wr, ((uint32_t)ext << 24) | (do_bit ? 0x8000u : 0));
	nx_dns_wr_u16(&c->wr, optlen);
	nx_dns_wr_bytes(&c->wr, opts, optlen);
	comp_count(c, 3);
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Shared data dir (NX_SHARED_DIR) or NULL when absent. */
#include <stdlib.h>
#include <sys/stat.h>
static inline const char *shared_dir(void)
{
	const char *d = getenv("NX_SHARED_DIR");
	struct stat st;
	if (!d || !*d || stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
		return NULL;
	}
	return d;
}

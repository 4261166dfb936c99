/*
 * dns module internals shared by wire.c, name.c, msg.c and build.c. Never included from
 * outside src/dns/. Same threading and ownership rules as the public headers: pure functions
 * over caller buffers.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dns/wire.h"

static inline uint16_t nx_dns_get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t nx_dns_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void nx_dns_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void nx_dns_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * nx_dns_rd_name with two extra rules the message parser applies (NULL/0 = off):
 *  - `floor`: pointers below it are rejected (NX_DNS_HDR_LEN: no name lives in the header);
 *  - `fixed`: a bitmap (one bit per message offset) of RR fixed fields (type, class, TTL,
 *    rdlength) and question type/class; bytes reached through a pointer must not be marked.
 * Together with the "target ends before the pointing sequence" rule this makes relays safe:
 * patching TTLs, the id/flags/counts or the question's letter case, and cutting the message at
 * the OPT, cannot change what any kept name decodes to. `out` may be NULL (validate only).
 */
size_t nx_dns_name_walk(struct nx_dns_rd *rd, uint8_t *out, const uint8_t *fixed, size_t floor);

/* Mark n bytes from off in a bitmap. */
static inline void nx_dns_mark(uint8_t *map, size_t off, size_t n)
{
	for (size_t i = off; i < off + n; i++) {
		map[i >> 3] |= (uint8_t)(1u << (i & 7));
	}
}

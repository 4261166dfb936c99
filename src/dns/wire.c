/*
 * Sticky-error reader/writer and name decompression. See dns/wire.h.
 */
#include "dns/wire.h"

#include <string.h>

#include "base/err.h"
#include "dns/impl.h"

/* ---- reader ---- */

static inline bool rd_need(struct nx_dns_rd *rd, size_t n)
{
	if (rd->err || rd->len - rd->pos < n) {
		rd->err = NX_EMALFORMED;
		return false;
	}
	return true;
}

uint8_t nx_dns_rd_u8(struct nx_dns_rd *rd)
{
	if (!rd_need(rd, 1)) {
		return 0;
	}
	return rd->base[rd->pos++];
}

uint16_t nx_dns_rd_u16(struct nx_dns_rd *rd)
{
	if (!rd_need(rd, 2)) {
		return 0;
	}
	const uint8_t *p = rd->base + rd->pos;
	rd->pos += 2;
	return (uint16_t)((p[0] << 8) | p[1]);
}

uint32_t nx_dns_rd_u32(struct nx_dns_rd *rd)
{
	if (!rd_need(rd, 4)) {
		return 0;
	}
	const uint8_t *p = rd->base + rd->pos;
	rd->pos += 4;
	return nx_dns_get32(p);
}

const uint8_t *nx_dns_rd_bytes(struct nx_dns_rd *rd, size_t n)
{
	if (!rd_need(rd, n)) {
		return NULL;
	}
	const uint8_t *p = rd->base + rd->pos;
	rd->pos += n;
	return p;
}

void nx_dns_rd_skip(struct nx_dns_rd *rd, size_t n)
{
	if (rd_need(rd, n)) {
		rd->pos += n;
	}
}

static inline bool bit(const uint8_t *map, size_t i)
{
	return (map[i >> 3] >> (i & 7)) & 1;
}

/*
 * Walk a possibly compressed name at rd->pos. A pointer must target an offset >= floor and
 * strictly before the start of the label sequence that holds it, and the target sequence must
 * end before that start too (`limit`): the start decreases at each hop, which bounds the walk
 * (no loop can exist) without a hop counter, and every name decodes from bytes that precede it.
 * With `fixed`, bytes reached through a pointer must not be marked in it (see impl.h).
 * Copies the uncompressed name into `out` when non-NULL. Returns the wire length or 0 + err.
 */
size_t nx_dns_name_walk(struct nx_dns_rd *rd, uint8_t *out, const uint8_t *fixed, size_t floor)
{
	if (rd->err) {
		return 0;
	}
	const uint8_t *msg = rd->base;
	size_t limit = rd->len; /* bytes of the current sequence lie below this */
	size_t pos = rd->pos;	/* where we read the next label length */
	size_t seq = pos;	/* start of the current label sequence */
	size_t resume = 0;	/* rd->pos after the name: set at the first pointer */
	size_t wlen = 0;	/* wire bytes produced, excluding the root label */

	for (;;) {
		if (pos >= limit) {
			goto bad;
		}
		uint8_t c = msg[pos];
		if (c == 0) {
			if (resume && fixed && bit(fixed, pos)) {
				goto bad;
			}
			pos++;
			break;
		}
		switch (c & 0xc0) {
		case 0x00:
			/* label: length byte + c bytes; the name incl. root must stay <= 255 */
			if (limit - pos - 1 < c || wlen + 1 + c + 1 > NX_DNS_NAME_MAX) {
				goto bad;
			}
			if (resume && fixed) {
				for (size_t i = pos; i <= pos + c; i++) {
					if (bit(fixed, i)) {
						goto bad;
					}
				}
			}
			if (out) {
				memcpy(out + wlen, msg + pos, (size_t)c + 1);
			}
			wlen += (size_t)c + 1;
			pos += (size_t)c + 1;
			break;
		case 0xc0: {
			if (limit - pos < 2 ||
			    (resume && fixed && (bit(fixed, pos) || bit(fixed, pos + 1)))) {
				goto bad;
			}
			size_t target = ((size_t)(c & 0x3f) << 8) | msg[pos + 1];
			if (target >= seq || target < floor) {
				goto bad;
			}
			if (!resume) {
				resume = pos + 2;
			}
			limit = seq;
			seq = target;
			pos = target;
			break;
		}
		default:
			/* 0x40 (extended, RFC 6891 obsoleted it) and 0x80 are reserved */
			goto bad;
		}
	}
	if (out) {
		out[wlen] = 0;
	}
	rd->pos = resume ? resume : pos;
	return wlen + 1;
bad:
	rd->err = NX_EMALFORMED;
	return 0;
}

size_t nx_dns_rd_name(struct nx_dns_rd *rd, uint8_t out[NX_DNS_NAME_MAX])
{
	return nx_dns_name_walk(rd, out, NULL, 0);
}

void nx_dns_rd_skip_name(struct nx_dns_rd *rd)
{
	(void)nx_dns_name_walk(rd, NULL, NULL, 0);
}

/* ---- writer ---- */

static inline bool wr_need(struct nx_dns_wr *wr, size_t n)
{
	if (wr->err || wr->cap - wr->pos < n) {
		wr->err = NX_ETRUNC;
		return false;
	}
	return true;
}

void nx_dns_wr_u8(struct nx_dns_wr *wr, uint8_t v)
{
	if (wr_need(wr, 1)) {
		wr->base[wr->pos++] = v;
	}
}

void nx_dns_wr_u16(struct nx_dns_wr *wr, uint16_t v)
{
	if (wr_need(wr, 2)) {
		nx_dns_put16(wr->base + wr->pos, v);
		wr->pos += 2;
	}
}

void nx_dns_wr_u32(struct nx_dns_wr *wr, uint32_t v)
{
	if (wr_need(wr, 4)) {
		nx_dns_put32(wr->base + wr->pos, v);
		wr->pos += 4;
	}
}

void nx_dns_wr_bytes(struct nx_dns_wr *wr, const void *p, size_t n)
{
	if (wr_need(wr, n)) {
		if (n) {
			memcpy(wr->base + wr->pos, p, n);
		}
		wr->pos += n;
	}
}

void nx_dns_wr_name(struct nx_dns_wr *wr, const uint8_t *name, size_t len)
{
	nx_dns_wr_bytes(wr, name, len);
}

void nx_dns_wr_put_u16_at(struct nx_dns_wr *wr, size_t off, uint16_t v)
{
	/* only bytes already written may be patched */
	if (off > wr->pos || wr->pos - off < 2) {
		wr->err = NX_ETRUNC;
		return;
	}
	nx_dns_put16(wr->base + off, v);
}

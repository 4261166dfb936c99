/*
 * Sticky-error reader and writer for DNS wire data. No I/O, no allocation.
 *
 * Reader: after the first overrun every read returns 0 and `err` stays set, so a parser reads a
 * whole record and checks once. Writer: after the first overflow nothing more is written and
 * `err` stays set. Both are plain values on the caller's stack; they borrow the buffer.
 * Threading: none needed (no shared state). Names are uncompressed wire form unless stated.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NX_DNS_NAME_MAX 255  /* RFC 1035 2.3.4: wire name incl. root label */
#define NX_DNS_LABEL_MAX 63  /* RFC 1035 2.3.4 */
#define NX_DNS_TEXT_MAX 1024 /* presentation form incl. \DDD escapes and NUL (255*4+1) */

struct nx_dns_rd {
	const uint8_t *base; /* borrowed: the whole message (compression pointers index it) */
	size_t len;          /* message length */
	size_t pos;          /* next byte to read */
	int err;             /* 0, or the first error (NX_EMALFORMED); sticky */
};

struct nx_dns_wr {
	uint8_t *base; /* borrowed: output buffer */
	size_t cap;    /* capacity in bytes */
	size_t pos;    /* bytes written */
	int err;       /* 0, or NX_ETRUNC after the first overflow; sticky */
};

static inline void nx_dns_rd_init(struct nx_dns_rd *rd, const uint8_t *buf, size_t len)
{
	rd->base = buf;
	rd->len = len;
	rd->pos = 0;
	rd->err = 0;
}
static inline size_t nx_dns_rd_left(const struct nx_dns_rd *rd)
{
	return rd->err ? 0 : rd->len - rd->pos;
}
uint8_t nx_dns_rd_u8(struct nx_dns_rd *rd);
uint16_t nx_dns_rd_u16(struct nx_dns_rd *rd);
uint32_t nx_dns_rd_u32(struct nx_dns_rd *rd);
/* Returns a pointer to n bytes inside the message (or NULL + err). */
const uint8_t *nx_dns_rd_bytes(struct nx_dns_rd *rd, size_t n);
void nx_dns_rd_skip(struct nx_dns_rd *rd, size_t n);
/*
 * Read a possibly compressed name at rd->pos into `out` as an uncompressed wire name (case
 * preserved); advances rd past the name as it appears in the message (pointer = 2 bytes).
 * Rejects: pointer loops and forward/self pointers (a pointer must point strictly before the
 * start of the label sequence that contains it, and the sequence it points to must end before
 * that start too, as any compressor's earlier name does), labels > 63, names > 255, label types
 * 0x40/0x80, reading past the message. Returns the wire length (>= 1) or 0 with rd->err set.
 */
size_t nx_dns_rd_name(struct nx_dns_rd *rd, uint8_t out[NX_DNS_NAME_MAX]);
/* Skip a name without copying (same validation). */
void nx_dns_rd_skip_name(struct nx_dns_rd *rd);

static inline void nx_dns_wr_init(struct nx_dns_wr *wr, uint8_t *buf, size_t cap)
{
	wr->base = buf;
	wr->cap = cap;
	wr->pos = 0;
	wr->err = 0;
}
void nx_dns_wr_u8(struct nx_dns_wr *wr, uint8_t v);
void nx_dns_wr_u16(struct nx_dns_wr *wr, uint16_t v);
void nx_dns_wr_u32(struct nx_dns_wr *wr, uint32_t v);
void nx_dns_wr_bytes(struct nx_dns_wr *wr, const void *p, size_t n);
/* Uncompressed wire name. */
void nx_dns_wr_name(struct nx_dns_wr *wr, const uint8_t *name, size_t len);
/* Overwrite a u16 at an earlier offset (counts, lengths); off+2 > pos sets NX_ETRUNC. */
void nx_dns_wr_put_u16_at(struct nx_dns_wr *wr, size_t off, uint16_t v);

/* ---- names (uncompressed wire form) ---- */

/* Wire length of a valid uncompressed name (walks labels); 0 if malformed within max. */
size_t nx_dns_name_len(const uint8_t *name, size_t max);
/* Case-insensitive (ASCII) equality of two wire names. */
bool nx_dns_name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
/* Lower-case ASCII letters in place. */
void nx_dns_name_lower(uint8_t *name, size_t len);
/*
 * Presentation form without the trailing dot ("." for the root), bytes outside
 * [a-zA-Z0-9-_] escaped as \DDD, '.' inside a label as "\.". NUL-terminated (cap counts the
 * NUL). Returns the text length, NX_ETRUNC, or NX_EMALFORMED (len is not one valid name).
 */
int nx_dns_name_to_text(const uint8_t *name, size_t len, char *out, size_t cap);
/*
 * Parse presentation form ("example.com", "example.com.", "." ) into wire form. Accepts \DDD and
 * \X escapes. Returns the wire length or NX_EMALFORMED (empty label, label > 63, name > 255).
 */
int nx_dns_name_from_text(const char *text, uint8_t out[NX_DNS_NAME_MAX]);
/* Number of labels (root = 0). */
unsigned nx_dns_name_labels(const uint8_t *name, size_t len);
/* Is `name` equal to or below `zone` (case-insensitive)? */
bool nx_dns_name_in_zone(const uint8_t *name, size_t nlen, const uint8_t *zone, size_t zlen);

/*
 * Log blocks: the stored form of the per-query log. The writer encodes the records of one
 * transaction and one minute as one JSON object (one row of log_blocks: a table of the block's
 * strings and the records as arrays of numbers, schema 7) and the reader decodes it, or a
 * block of schemas 3-6 (a JSON array of arrays), back into items. The same text is what the
 * `queries` view unpacks with json_each, so the encoding must stay strict JSON (RFC 8259) in
 * valid UTF-8.
 */
#include "querylog/querylog.h"

#include <string.h>

#include "base/err.h"
#include "querylog/impl.h"

/* ---- encoding ---- */

/*
 * Block text, schema 7 ("v2"):  {"t":T,"s":[null,S1,S2,...],"r":[R1,R2,...]}
 * T is the minute of the block's first record in ms (a block never spans a minute); s is the
 * block's distinct strings (clients, upstreams, names, matched names, sources, answers, client
 * ids), each stored once, s[0] = null; each record is 15 numbers in the columns' order of the
 * `queries` view: [ts - T, duration_us, client, proto, qtype, rcode, action, reason, cached,
 * upstream, name, matched, source, answer, client_id], the text columns as indexes into s
 * (0 = NULL). Household records shrink from ~110 B of JSON to ~40 B plus their share of the
 * table: a name repeated within a block costs its index, not its text. Still strict JSON,
 * so the view unpacks it with json_each and ->> (db.c migration 7).
 *
 * In the one NX_QLOG_BLOCK_BYTES buffer: [header][strings area][records area][string offsets]
 * [hash]; nx_qlog_blk_finish() moves the records down behind the strings.
 */
#define HDR_BYTES 48
#define STR_AREA (48 * 1024)
#define OFF_BYTES ((NX_QLOG_BLOCK_STRS + 2) * sizeof(uint32_t))
#define HASH_SLOTS (2 * NX_QLOG_BLOCK_STRS)
#define HASH_BYTES (HASH_SLOTS * sizeof(uint32_t))
#define REC_AREA (NX_QLOG_BLOCK_BYTES - HDR_BYTES - STR_AREA - OFF_BYTES - HASH_BYTES)
#define REC_MAX 400 /* 15 numbers of at most 20 digits, commas, brackets */
/* Strings one record adds at most, and their encoded bytes (each byte escaped to 6). */
#define REC_STRS 7
#define REC_STR_BYTES (NX_QLOG_JSON_REC_MAX)
static_assert(REC_AREA >= 64 * 1024, "records area of a block");
static_assert(STR_AREA > 4 * REC_STR_BYTES, "strings area holds several records' strings");
static_assert(NX_QLOG_BLOCK_STRS < HASH_SLOTS, "string hash load");

static uint32_t *str_off(const struct nx_qlog_blk *b)
{
	return (uint32_t *)(void *)(b->buf + HDR_BYTES + STR_AREA + REC_AREA);
}

static uint32_t *str_hash(const struct nx_qlog_blk *b)
{
	return (uint32_t *)(void *)(b->buf + HDR_BYTES + STR_AREA + REC_AREA + OFF_BYTES);
}

void nx_qlog_blk_reset(struct nx_qlog_blk *b)
{
	b->used = 0;
	b->sused = 5; /* "null" at offset 1 of the strings area, after the '[' */
	memcpy(b->buf + HDR_BYTES, "[null", 5);
	b->n_str = 1;
	str_off(b)[0] = 1;
	str_off(b)[1] = 5;
	memset(str_hash(b), 0, HASH_BYTES);
	b->n = 0;
	b->blocked = 0;
	b->base = 0;
	b->ts_min = INT64_MAX;
	b->ts_max = INT64_MIN;
	b->n_clients = 0;
	b->many_clients = false;
}

static int64_t minute_of(int64_t ts_ms)
{
	return ts_ms / 60000 - (ts_ms % 60000 < 0); /* floor, without overflow */
}

bool nx_qlog_blk_needs_flush(const struct nx_qlog_blk *b, int64_t ts_ms)
{
	if (!b->n) {
		return false;
	}
	return b->used + REC_MAX + 2 > REC_AREA || b->sused + REC_STR_BYTES + 8 > STR_AREA ||
	       b->n_str + REC_STRS > NX_QLOG_BLOCK_STRS || b->n >= NX_QLOG_BLOCK_RECS_MAX ||
	       minute_of(ts_ms) != minute_of(b->ts_min);
}
static char *put_u64(char *p, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n) {
		*p++ = tmp[--n];
	}
	return p;
}

static char *put_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return put_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return put_u64(p, (uint64_t)v);
}

/* Length of the valid UTF-8 sequence at s (at most left bytes), 0 if invalid. */
static unsigned utf8_len(const unsigned char *s, size_t left)
{
	unsigned c = s[0], n;
	uint32_t cp;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2, cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4, cp = c & 0x07;
	} else {
		return 0;
	}
	if (left < n) {
		return 0;
	}
	for (unsigned i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			return 0;
		}
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong, surrogates, beyond U+10FFFF */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff)) {
		return 0;
	}
	return n;
}

/* A JSON string of len bytes. Control characters become \u00XX, bytes that are not valid UTF-8
 * U+FFFD (at most 6 output bytes per input byte: NX_QLOG_JSON_REC_MAX counts that). */
static char *put_str(char *p, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	*p++ = '"';
	for (size_t i = 0; i < len;) {
		unsigned c = u[i];
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			*p++ = (char)c;
			i++;
		} else if (c == '"' || c == '\\') {
			*p++ = '\\';
			*p++ = (char)c;
			i++;
		} else if (c < 0x20) {
			memcpy(p, "\\u00", 4);
			p[4] = hex[c >> 4];
			p[5] = hex[c & 15];
			p += 6;
			i++;
		} else {
			unsigned n = utf8_len(u + i, len - i);
			if (n) {
				memcpy(p, u + i, n);
				p += n;
				i += n;
			} else {
				memcpy(p, "\\ufffd", 6);
				p += 6;
				i++;
			}
		}
	}
	*p++ = '"';
	return p;
}

/* Index of the string (len bytes; NULL = none) in the block's table, adding it when new. */
static unsigned intern(struct nx_qlog_blk *b, const char *str, size_t len, bool opt)
{
	if (!str || (opt && !len)) {
		return 0;
	}
	char *area = b->buf + HDR_BYTES;
	char *p = area + b->sused;
	*p = ',';
	char *end = put_str(p + 1, str, len);
	size_t elen = (size_t)(end - p);
	uint32_t h = 2166136261u;
	for (size_t i = 1; i < elen; i++) {
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	}
	uint32_t *off = str_off(b), *slots = str_hash(b);
	for (uint32_t i = h & (HASH_SLOTS - 1);; i = (i + 1) & (HASH_SLOTS - 1)) {
		uint32_t idx = slots[i];
		if (!idx) {
			idx = b->n_str++;
			slots[i] = idx;
			b->sused += elen;
			off[idx + 1] = (uint32_t)b->sused;
			return idx;
		}
		if (off[idx + 1] - off[idx] == elen && memcmp(area + off[idx], p, elen) == 0) {
			return idx;
		}
	}
}

static void note_client(struct nx_qlog_blk *b, const struct nx_qlog_pk *pk)
{
	if (b->many_clients) {
		return;
	}
	uint8_t key[NX_QLOG_CLIENT_KEY];
	key[0] = pk->family;
	memcpy(key + 1, pk->client, sizeof(pk->client));
	for (unsigned i = 0; i < b->n_clients; i++) {
		if (memcmp(b->client_key[i], key, sizeof(key)) == 0) {
			return;
		}
	}
	if (b->n_clients == NX_QLOG_BLOCK_CLIENTS) {
		b->many_clients = true;
		return;
	}
	memcpy(b->client_key[b->n_clients++], key, sizeof(key));
}

void nx_qlog_blk_add(struct nx_qlog_blk *b, const struct nx_qlog_view *v, const char *client,
		     size_t client_len, const char *upstream)
{
	const struct nx_qlog_pk *r = v->pk;
	if (!b->n) {
		b->base = minute_of(r->ts_ms) * 60000;
	}
	const unsigned strs[] = {
		intern(b, client, client_len, false),
		intern(b, upstream, upstream ? strlen(upstream) : 0, false),
		intern(b, v->name, r->name_len, false),
		intern(b, v->matched, v->matched_len, true),
		intern(b, v->source, r->source_len, true),
		intern(b, v->answer, r->answer_len, true),
		intern(b, v->client_id, r->client_id_len, true),
	};
	char *p = b->buf + HDR_BYTES + STR_AREA + b->used;
	if (b->n) {
		*p++ = ',';
	}
	*p++ = '[';
	p = put_i64(p, r->ts_ms - b->base);
	*p++ = ',';
	p = put_u64(p, r->duration_us);
	*p++ = ',';
	p = put_u64(p, strs[0]);
	const unsigned small[] = {r->proto, r->qtype, r->rcode, r->action, r->reason, r->cached != 0};
	for (size_t i = 0; i < NX_ARRAY_LEN(small); i++) {
		*p++ = ',';
		p = put_u64(p, small[i]);
	}
	for (size_t i = 1; i < NX_ARRAY_LEN(strs); i++) {
		*p++ = ',';
		p = put_u64(p, strs[i]);
	}
	*p++ = ']';
	b->used = (size_t)(p - (b->buf + HDR_BYTES + STR_AREA));
	b->n++;
	b->blocked += r->action == NX_QLOG_ACT_BLOCK;
	b->ts_min = NX_MIN(b->ts_min, r->ts_ms);
	b->ts_max = NX_MAX(b->ts_max, r->ts_ms);
	note_client(b, r);
}

const char *nx_qlog_blk_finish(struct nx_qlog_blk *b, size_t *len)
{
	char hdr[HDR_BYTES], *h = hdr;
	memcpy(h, "{\"t\":", 5);
	h = put_i64(h + 5, b->base);
	memcpy(h, ",\"s\":", 5);
	h += 5;
	size_t hlen = (size_t)(h - hdr);
	char *out = b->buf + HDR_BYTES - hlen;
	memcpy(out, hdr, hlen);
	char *p = b->buf + HDR_BYTES + b->sused;
	memcpy(p, "],\"r\":[", 7);
	p += 7;
	memmove(p, b->buf + HDR_BYTES + STR_AREA, b->used);
	p += b->used;
	*p++ = ']';
	*p++ = '}';
	*len = (size_t)(p - out);
	return out;
}

size_t nx_qlog_blk_clients(const struct nx_qlog_blk *b, char *out, size_t cap)
{
	if (b->many_clients || cap < 3) {
		return 0;
	}
	char *p = out;
	*p++ = '[';
	for (unsigned i = 0; i < b->n_clients; i++) {
		char text[NX_QLOG_CLIENT_TEXT_MAX];
		int len = nx_qlog_addr_text(b->client_key[i][0], b->client_key[i] + 1, text,
					    sizeof(text));
		if ((size_t)(p - out) + (size_t)len * 6 + 4 > cap) {
			return 0;
		}
		if (i) {
			*p++ = ',';
		}
		p = put_str(p, text, (size_t)len);
	}
	*p++ = ']';
	return (size_t)(p - out);
}

/* ---- decoding ---- */

struct dec {
	const char *p, *end;
	char *out; /* scratch for decoded strings */
};

static void skip_ws(struct dec *d)
{
	while (d->p < d->end && (*d->p == ' ' || *d->p == '\n' || *d->p == '\t' || *d->p == '\r')) {
		d->p++;
	}
}

static bool eat(struct dec *d, char c)
{
	skip_ws(d);
	if (d->p < d->end && *d->p == c) {
		d->p++;
		return true;
	}
	return false;
}

static int hex4(const char *s, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		unsigned x = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
			     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
			     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
						    : 16u;
		if (x == 16) {
			return -1;
		}
		*v = *v << 4 | x;
	}
	return 0;
}

static char *put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | cp >> 6);
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | cp >> 12);
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | cp >> 18);
		*o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

/* A string (into the scratch, NUL-terminated: never longer than its encoding with quotes), or
 * null (*s = NULL). Raw bytes that are not valid UTF-8 (SQLite's json_array() copies text as it
 * is) become '?': what the reader passes on must be valid UTF-8, and '?' keeps the length. */
static int dec_str(struct dec *d, const char **s)
{
	skip_ws(d);
	if (d->end - d->p >= 4 && memcmp(d->p, "null", 4) == 0) {
		d->p += 4;
		*s = NULL;
		return 0;
	}
	if (d->p >= d->end || *d->p != '"') {
		return -1;
	}
	d->p++;
	char *o = d->out;
	*s = o;
	while (d->p < d->end && *d->p != '"') {
		unsigned char c = (unsigned char)*d->p;
		if (c < 0x20) {
			return -1;
		}
		if (c >= 0x80) {
			unsigned n = utf8_len((const unsigned char *)d->p, (size_t)(d->end - d->p));
			if (!n) {
				*o++ = '?';
				d->p++;
				continue;
			}
			memcpy(o, d->p, n);
			o += n;
			d->p += n;
			continue;
		}
		if (c != '\\') {
			*o++ = (char)c;
			d->p++;
			continue;
		}
		if (d->end - d->p < 2) {
			return -1;
		}
		char e = d->p[1];
		d->p += 2;
		static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
		const char *k = e ? strchr(from, e) : NULL;
		if (k) {
			*o++ = to[k - from];
			continue;
		}
		uint32_t cp, lo;
		if (e != 'u' || d->end - d->p < 4 || hex4(d->p, &cp)) {
			return -1;
		}
		d->p += 4;
		if (cp >= 0xd800 && cp <= 0xdbff && d->end - d->p >= 6 && d->p[0] == '\\' &&
		    d->p[1] == 'u' && !hex4(d->p + 2, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
			d->p += 6;
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		} else if (cp >= 0xd800 && cp <= 0xdfff) {
			cp = 0xfffd; /* a lone surrogate */
		}
		o = put_utf8(o, cp);
	}
	if (d->p >= d->end) {
		return -1;
	}
	d->p++;
	*o++ = '\0';
	d->out = o;
	return 0;
}

/* A number: integers as they are; a fraction or exponent (SQLite may write REAL) truncated. */
static int dec_num(struct dec *d, int64_t *v)
{
	skip_ws(d);
	const char *s = d->p;
	bool neg = s < d->end && *s == '-';
	s += neg;
	if (s >= d->end || *s < '0' || *s > '9') {
		return -1;
	}
	/* magnitude up to INT64_MAX, or INT64_MAX + 1 when negative (put_i64 of INT64_MIN) */
	uint64_t x = 0, lim = (uint64_t)INT64_MAX + neg;
	while (s < d->end && *s >= '0' && *s <= '9') {
		uint64_t digit = (uint64_t)(*s++ - '0');
		if (x > (lim - digit) / 10) {
			return -1;
		}
		x = x * 10 + digit;
	}
	if (s < d->end && *s == '.') {
		for (s++; s < d->end && *s >= '0' && *s <= '9'; s++) {
		}
	}
	if (s < d->end && (*s == 'e' || *s == 'E')) {
		return -1; /* never written by nxdns or json_array() for these columns */
	}
	*v = neg ? (int64_t)(0 - x) : (int64_t)x;
	d->p = s;
	return 0;
}

static int dec_rec(struct dec *d, struct nx_qlog_item *it)
{
	int64_t v[6];
	if (!eat(d, '[') || dec_num(d, &it->ts) || !eat(d, ',') ||
	    dec_num(d, &it->duration_us) || !eat(d, ',') || dec_str(d, &it->client)) {
		return -1;
	}
	for (int i = 0; i < 6; i++) {
		if (!eat(d, ',') || dec_num(d, &v[i])) {
			return -1;
		}
	}
	it->proto = (int)v[0];
	it->qtype = (int)v[1];
	it->rcode = (int)v[2];
	it->action = (int)v[3];
	it->reason = (int)v[4];
	it->cached = v[5] != 0;
	const char **strs[] = {&it->upstream, &it->name, &it->matched, &it->source, &it->answer};
	for (size_t i = 0; i < NX_ARRAY_LEN(strs); i++) {
		if (!eat(d, ',') || dec_str(d, strs[i])) {
			return -1;
		}
	}
	it->client_id = NULL;
	if (eat(d, ',') && dec_str(d, &it->client_id)) { /* absent before schema 4 */
		return -1;
	}
	if (!it->client || !it->name) {
		return -1;
	}
	return eat(d, ']') ? 0 : -1;
}

static bool eat_key(struct dec *d, char k)
{
	skip_ws(d);
	if (d->end - d->p < 3 || d->p[0] != '"' || d->p[1] != k || d->p[2] != '"') {
		return false;
	}
	d->p += 3;
	return eat(d, ':');
}

size_t nx_qlog_blk_scratch_bytes(size_t len)
{
	return (len / 3 + 2) * sizeof(const char *) + len + 1;
}

/* A schema-7 block: {"t":T,"s":[...],"r":[[15 numbers],...]} (encoding above). */
static int decode_v2(struct dec *d, char *scratch, size_t len, struct nx_qlog_item *items,
		     size_t max, size_t *n)
{
	const char **strs = (const char **)(void *)scratch;
	size_t strs_max = len / 3 + 2, n_str = 0;
	d->out = scratch + strs_max * sizeof(*strs);
	int64_t base;
	if (!eat(d, '{') || !eat_key(d, 't') || dec_num(d, &base) || !eat(d, ',') ||
	    base < INT64_MIN / 2 || base > INT64_MAX / 2 || !eat_key(d, 's') || !eat(d, '[')) {
		return -1;
	}
	do {
		if (n_str == strs_max || dec_str(d, &strs[n_str])) {
			return -1;
		}
		n_str++;
	} while (eat(d, ','));
	if (strs[0] || !eat(d, ']') || !eat(d, ',') || !eat_key(d, 'r') || !eat(d, '[')) {
		return -1; /* s[0] is null: index 0 = NULL */
	}
	if (!eat(d, ']')) {
		do {
			if (*n == max || !eat(d, '[')) {
				return -1;
			}
			int64_t v[15];
			for (int i = 0; i < 15; i++) {
				if ((i && !eat(d, ',')) || dec_num(d, &v[i])) {
					return -1;
				}
			}
			if (!eat(d, ']')) {
				return -1;
			}
			static const int str_cols[] = {2, 9, 10, 11, 12, 13, 14};
			for (size_t i = 0; i < NX_ARRAY_LEN(str_cols); i++) {
				if (v[str_cols[i]] < 0 || (uint64_t)v[str_cols[i]] >= n_str) {
					return -1;
				}
			}
			if (v[0] < 0 || v[0] >= 60000 || !v[2] || !v[10]) {
				return -1; /* within the minute; client and name NOT NULL */
			}
			struct nx_qlog_item *it = &items[*n];
			it->ts = base + v[0];
			it->duration_us = v[1];
			it->client = strs[v[2]];
			it->proto = (int)v[3];
			it->qtype = (int)v[4];
			it->rcode = (int)v[5];
			it->action = (int)v[6];
			it->reason = (int)v[7];
			it->cached = v[8] != 0;
			it->upstream = strs[v[9]];
			it->name = strs[v[10]];
			it->matched = strs[v[11]];
			it->source = strs[v[12]];
			it->answer = strs[v[13]];
			it->client_id = strs[v[14]];
			(*n)++;
		} while (eat(d, ','));
		if (!eat(d, ']')) {
			return -1;
		}
	}
	if (!eat(d, '}')) {
		return -1;
	}
	skip_ws(d);
	return d->p == d->end ? 0 : -1;
}

int nx_qlog_blk_decode(const char *text, size_t len, char *scratch, struct nx_qlog_item *items,
		       size_t max, size_t *n)
{
	struct dec d = {.p = text, .end = text + len, .out = scratch};
	*n = 0;
	skip_ws(&d);
	if (d.p < d.end && *d.p == '{') {
		return decode_v2(&d, scratch, len, items, max, n);
	}
	/* the array of arrays of schemas 3-6 (and the view's INSTEAD OF INSERT trigger) */
	if (!eat(&d, '[')) {
		return -1;
	}
	if (eat(&d, ']')) {
		return 0;
	}
	do {
		if (*n == max || dec_rec(&d, &items[*n])) {
			return -1;
		}
		(*n)++;
	} while (eat(&d, ','));
	if (!eat(&d, ']')) {
		return -1;
	}
	skip_ws(&d);
	return d.p == d.end ? 0 : -1;
}

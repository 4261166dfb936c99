/*
 * The block encoding (block.c) alone: every field of a record round-trips through the
 * schema-7 object (long names, client ids, answers, escapes, NULLs, strings shared between
 * records and fields), the block ends before its string table or areas overflow, schema 3-6
 * arrays still decode, and a truncated or corrupted block is an error, never a crash or a
 * read outside the text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "querylog/impl.h"

struct rec {
	struct nx_qlog_pk pk;
	char name[NX_QLOG_NAME_MAX], matched[NX_QLOG_NAME_MAX], source[NX_QLOG_SOURCE_MAX];
	char answer[NX_QLOG_ANSWER_MAX], client_id[NX_QLOG_CLIENT_ID_MAX];
	const char *client, *upstream;
};

static struct nx_qlog_view view_of(const struct rec *r)
{
	struct nx_qlog_view v = {
	    .pk = &r->pk,
	    .name = r->name,
	    .matched = r->matched,
	    .source = r->source,
	    .answer = r->answer,
	    .client_id = r->client_id,
	    .matched_len = r->pk.matched_len,
	};
	return v;
}

static void set_text(struct rec *r)
{
	r->pk.name_len = (uint8_t)strlen(r->name);
	r->pk.matched_len = (uint8_t)strlen(r->matched);
	r->pk.source_len = (uint8_t)strlen(r->source);
	r->pk.answer_len = (uint8_t)strlen(r->answer);
	r->pk.client_id_len = (uint8_t)strlen(r->client_id);
}

static void mk(struct rec *r, int64_t ts, unsigned i)
{
	memset(r, 0, sizeof(*r));
	r->pk.ts_ms = ts;
	r->pk.duration_us = 1000 + i * 7;
	r->pk.proto = (uint8_t)(i % NX_QLOG_PROTO__COUNT);
	r->pk.qtype = (uint16_t)(i % 3 ? 1 : 65535);
	r->pk.rcode = (uint8_t)(i % 4);
	r->pk.action = (uint8_t)(i % 3);
	r->pk.reason = (uint8_t)(i % 5);
	r->pk.cached = (uint8_t)(i & 1);
	snprintf(r->name, sizeof(r->name), "site%u.example", i % 17);
	if (i % 3 == 2) {
		snprintf(r->matched, sizeof(r->matched), "%s", r->name);
		snprintf(r->source, sizeof(r->source), "list-%u", i % 2);
	}
	if (i % 4 == 0) {
		snprintf(r->answer, sizeof(r->answer), "192.0.2.%u", i % 9);
	}
	if (i % 5 == 1) {
		snprintf(r->client_id, sizeof(r->client_id), "phone-%u", i % 3);
	}
	r->client = i % 2 ? "192.168.1.10" : "2001:db8::1";
	r->upstream = i % 3 == 1 ? "upstream-a" : i % 3 == 2 ? NULL : "up\"b\\";
	set_text(r);
}

static void add(struct nx_qlog_blk *b, const struct rec *r)
{
	struct nx_qlog_view v = view_of(r);
	nx_qlog_blk_add(b, &v, r->client, strlen(r->client), r->upstream);
}

static void opt_eq(const char *got, const char *want)
{
	if (!want[0]) {
		assert_null(got);
	} else {
		assert_non_null(got);
		assert_string_equal(got, want);
	}
}

static void check(const struct nx_qlog_item *it, const struct rec *r)
{
	assert_int_equal(it->ts, r->pk.ts_ms);
	assert_int_equal(it->duration_us, r->pk.duration_us);
	assert_string_equal(it->client, r->client);
	assert_int_equal(it->proto, r->pk.proto);
	assert_int_equal(it->qtype, r->pk.qtype);
	assert_int_equal(it->rcode, r->pk.rcode);
	assert_int_equal(it->action, r->pk.action);
	assert_int_equal(it->reason, r->pk.reason);
	assert_int_equal(it->cached, r->pk.cached != 0);
	if (r->upstream) {
		assert_non_null(it->upstream);
		assert_string_equal(it->upstream, r->upstream);
	} else {
		assert_null(it->upstream);
	}
	assert_string_equal(it->name, r->name);
	opt_eq(it->matched, r->matched);
	opt_eq(it->source, r->source);
	opt_eq(it->answer, r->answer);
	opt_eq(it->client_id, r->client_id);
}

struct dec_out {
	char *scratch;
	struct nx_qlog_item *items;
	size_t n;
};

static int decode(const char *text, size_t len, struct dec_out *o, size_t max)
{
	o->scratch = malloc(nx_qlog_blk_scratch_bytes(len));
	o->items = calloc(max ? max : 1, sizeof(*o->items));
	assert_non_null(o->scratch);
	assert_non_null(o->items);
	return nx_qlog_blk_decode(text, len, o->scratch, o->items, max, &o->n);
}

static void dec_free(struct dec_out *o)
{
	free(o->scratch);
	free(o->items);
}

static char *new_buf(struct nx_qlog_blk *b)
{
	memset(b, 0, sizeof(*b));
	b->buf = malloc(NX_QLOG_BLOCK_BYTES);
	assert_non_null(b->buf);
	nx_qlog_blk_reset(b);
	return b->buf;
}

#define T0 1700000040000LL /* a minute boundary */

static void test_round_trip(void **state)
{
	(void)state;
	struct nx_qlog_blk b;
	new_buf(&b);
	enum { N = 200 };
	static struct rec recs[N + 1];
	for (unsigned i = 0; i < N; i++) {
		mk(&recs[i], T0 + 59999 - (int64_t)(i * 211) % 60000, i); /* out of order */
		add(&b, &recs[i]);
	}
	/* the longest fields and bytes that need escaping or are not UTF-8 */
	struct rec *big = &recs[N];
	mk(big, T0 + 5, 3);
	memset(big->name, 'n', NX_QLOG_NAME_MAX - 1);
	big->name[NX_QLOG_NAME_MAX - 1] = '\0';
	memset(big->client_id, 'c', NX_QLOG_CLIENT_ID_MAX - 1);
	memset(big->source, 's', NX_QLOG_SOURCE_MAX - 1);
	memset(big->answer, 'a', NX_QLOG_ANSWER_MAX - 1);
	snprintf(big->matched, sizeof(big->matched), "q\"uo\\te\x01\xc3\xa9");
	set_text(big);
	add(&b, big);
	assert_int_equal(b.n, N + 1);
	assert_false(nx_qlog_blk_needs_flush(&b, T0 + 1));
	assert_true(nx_qlog_blk_needs_flush(&b, T0 + 60000)); /* another minute */
	size_t len;
	const char *text = nx_qlog_blk_finish(&b, &len);
	assert_memory_equal(text, "{\"t\":1700000040000,\"s\":[null,", 29);
	/* a name shared by records and by matched is stored once */
	char *dup = strndup(text, len);
	char *first = strstr(dup, "\"site2.example\"");
	assert_non_null(first);
	assert_null(strstr(first + 1, "\"site2.example\""));
	free(dup);
	/* denser than the array of arrays: household-like records well under 110 B each */
	assert_true(len < (size_t)N * 60);

	struct dec_out o;
	assert_int_equal(decode(text, len, &o, N + 1), 0);
	assert_int_equal(o.n, N + 1);
	for (unsigned i = 0; i < N; i++) {
		check(&o.items[i], &recs[i]);
	}
	/* the control byte comes back, the valid 2-byte UTF-8 as it was */
	assert_int_equal(o.items[N].ts, T0 + 5);
	assert_int_equal(strlen(o.items[N].name), NX_QLOG_NAME_MAX - 1);
	assert_string_equal(o.items[N].matched, big->matched);
	check(&o.items[N], big);
	dec_free(&o);
	/* too few items for the block: an error */
	assert_int_equal(decode(text, len, &o, N), -1);
	dec_free(&o);
	free(b.buf);
}

/* Many distinct long strings: the block ends (needs_flush) before its strings area or table
 * overflows, and every block stored decodes back. */
static void test_block_limits(void **state)
{
	(void)state;
	struct nx_qlog_blk b;
	new_buf(&b);
	unsigned blocks = 0, in_block = 0, total = 0;
	struct rec r;
	for (unsigned i = 0; i < 3000; i++) {
		mk(&r, T0 + i % 60000, i);
		memset(r.name, 'x', NX_QLOG_NAME_MAX - 1);
		r.name[NX_QLOG_NAME_MAX - 1] = '\0';
		snprintf(r.name, 16, "%u-", i);
		r.name[strlen(r.name)] = 'x';
		snprintf(r.client_id, sizeof(r.client_id), "id-%u", i);
		set_text(&r);
		if (nx_qlog_blk_needs_flush(&b, r.pk.ts_ms)) {
			size_t len;
			const char *text = nx_qlog_blk_finish(&b, &len);
			assert_true(len <= NX_QLOG_BLOCK_BYTES);
			struct dec_out o;
			assert_int_equal(decode(text, len, &o, NX_QLOG_BLOCK_RECS_MAX), 0);
			assert_int_equal(o.n, in_block);
			assert_int_equal(strlen(o.items[0].name), NX_QLOG_NAME_MAX - 1);
			dec_free(&o);
			total += in_block;
			blocks++;
			in_block = 0;
			nx_qlog_blk_reset(&b);
		}
		add(&b, &r);
		in_block++;
	}
	assert_true(blocks >= 10); /* ~2 x 256 B of new strings a record in a 48 KiB area */
	assert_int_equal(total + in_block, 3000);
	free(b.buf);
}

/* Blocks of schemas 3-6 (one JSON array per record; 14 values before schema 4) decode. */
static void test_old_arrays(void **state)
{
	(void)state;
	const char *old = "[[1700000040001,12,\"10.0.0.1\",0,1,0,1,0,1,\"up\",\"a.example\","
			  "null,null,\"192.0.2.1\"],"
			  "[1700000040002,13,\"10.0.0.2\",1,28,3,2,4,0,null,\"b.example\","
			  "\"example\",\"list\",null,\"kid\"]]";
	struct dec_out o;
	assert_int_equal(decode(old, strlen(old), &o, 4), 0);
	assert_int_equal(o.n, 2);
	assert_int_equal(o.items[0].ts, 1700000040001LL);
	assert_string_equal(o.items[0].answer, "192.0.2.1");
	assert_null(o.items[0].client_id);
	assert_string_equal(o.items[1].client_id, "kid");
	assert_string_equal(o.items[1].matched, "example");
	assert_null(o.items[1].upstream);
	dec_free(&o);
}

/* Every truncation and many byte changes of a good block: an error or a block of well-formed
 * items (a digit may change into another), never a crash; indexes out of the table, a NULL
 * name or client, a missing s[0] null are errors. */
static void test_corrupt(void **state)
{
	(void)state;
	struct nx_qlog_blk b;
	new_buf(&b);
	struct rec r;
	for (unsigned i = 0; i < 20; i++) {
		mk(&r, T0 + i, i);
		add(&b, &r);
	}
	size_t len;
	const char *good = nx_qlog_blk_finish(&b, &len);
	char *t = malloc(len);
	assert_non_null(t);
	for (size_t cut = 0; cut < len; cut++) {
		struct dec_out o;
		memcpy(t, good, cut);
		assert_int_equal(decode(t, cut, &o, 64), -1);
		dec_free(&o);
	}
	unsigned seed = 16, errors = 0;
	for (unsigned k = 0; k < 4000; k++) {
		memcpy(t, good, len);
		seed = seed * 1103515245u + 12345u;
		size_t at = (seed >> 8) % len;
		t[at] = (char)(seed >> 20);
		struct dec_out o;
		if (decode(t, len, &o, 64) == 0) {
			for (size_t i = 0; i < o.n; i++) {
				assert_non_null(o.items[i].name);
				assert_non_null(o.items[i].client);
			}
		} else {
			errors++;
		}
		dec_free(&o);
	}
	assert_true(errors > 1000);
	const char *bad[] = {
	    "{\"t\":0,\"s\":[null,\"a\"],\"r\":[[0,0,1,0,1,0,0,0,0,0,2,0,0,0,0]]}", /* name 2 */
	    "{\"t\":0,\"s\":[null,\"a\"],\"r\":[[0,0,1,0,1,0,0,0,0,0,0,0,0,0,0]]}", /* NULL name */
	    "{\"t\":0,\"s\":[null,\"a\"],\"r\":[[0,0,0,0,1,0,0,0,0,0,1,0,0,0,0]]}", /* NULL client
										     */
	    "{\"t\":0,\"s\":[\"a\"],\"r\":[[0,0,0,0,1,0,0,0,0,0,0,0,0,0,0]]}",	  /* no s[0] null */
	    "{\"t\":0,\"s\":[null,\"a\"],\"r\":[[0,0,1,0,1,0,0,0,0,0,1,0,0,0]]}", /* 14 values */
	    "{\"t\":0,\"s\":[null,\"a\"],\"r\":[[-1,0,1,0,1,0,0,0,0,0,1,0,0,0,0]]}", /* ts < t */
	    "{\"t\":0,\"s\":[null,\"a\"],\"r\":[[0,0,1,0,1,0,0,0,0,0,1,0,0,0,-1]]}", /* index -1 */
	    "{\"s\":[null,\"a\"],\"t\":0,\"r\":[]}",				     /* key order */
	    "{\"t\":0,\"s\":[null],\"r\":[]} x",				     /* trailing */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dec_out o;
		assert_int_equal(decode(bad[i], strlen(bad[i]), &o, 4), -1);
		dec_free(&o);
	}
	const char *ok =
	    "{\"t\":60000,\"s\":[null,\"c\",\"n\"],\"r\":[[5,1,1,0,1,0,0,0,0,0,2,0,0,0,0]]}";
	struct dec_out o;
	assert_int_equal(decode(ok, strlen(ok), &o, 4), 0);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.items[0].ts, 60005);
	assert_string_equal(o.items[0].name, "n");
	assert_null(o.items[0].client_id);
	dec_free(&o);
	free(t);
	free(b.buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_block_limits),
	    cmocka_unit_test(test_old_arrays),
	    cmocka_unit_test(test_corrupt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

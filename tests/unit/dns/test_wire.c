/* Sticky reader/writer and name decompression (dns/wire.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "helpers.h"

static void rd_sticky(void **state)
{
	const uint8_t buf[] = {0x12, 0x34, 0x56, 0x78, 0x9a};
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, sizeof(buf));
	assert_int_equal(nx_dns_rd_u16(&rd), 0x1234);
	assert_int_equal(nx_dns_rd_left(&rd), 3);
	assert_int_equal(nx_dns_rd_u32(&rd), 0); /* overrun: only 3 left */
	assert_int_equal(rd.err, NX_EMALFORMED);
	assert_int_equal(nx_dns_rd_left(&rd), 0);
	/* sticky: even a read that would fit returns 0 now */
	assert_int_equal(nx_dns_rd_u8(&rd), 0);
	assert_null(nx_dns_rd_bytes(&rd, 1));
	assert_int_equal(rd.pos, 2);
	assert_int_equal(rd.err, NX_EMALFORMED);
}

static void rd_exact(void **state)
{
	const uint8_t buf[] = {1, 2, 3, 4, 5, 6, 7};
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, buf, sizeof(buf));
	assert_int_equal(nx_dns_rd_u8(&rd), 1);
	const uint8_t *p = nx_dns_rd_bytes(&rd, 2);
	assert_ptr_equal(p, buf + 1);
	nx_dns_rd_skip(&rd, 0);
	assert_int_equal(nx_dns_rd_u32(&rd), 0x04050607);
	assert_int_equal(rd.err, 0);
	assert_int_equal(nx_dns_rd_left(&rd), 0);
	nx_dns_rd_skip(&rd, 1);
	assert_int_equal(rd.err, NX_EMALFORMED);
	/* a huge skip must not wrap the position */
	nx_dns_rd_init(&rd, buf, sizeof(buf));
	nx_dns_rd_skip(&rd, SIZE_MAX);
	assert_int_equal(rd.err, NX_EMALFORMED);
	assert_int_equal(rd.pos, 0);
}

static void wr_sticky(void **state)
{
	uint8_t buf[6];
	memset(buf, 0xee, sizeof(buf));
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, buf, 5);
	nx_dns_wr_u16(&wr, 0xabcd);
	nx_dns_wr_u8(&wr, 0x01);
	nx_dns_wr_u32(&wr, 0x11223344); /* does not fit: nothing written */
	assert_int_equal(wr.err, NX_ETRUNC);
	assert_int_equal(wr.pos, 3);
	nx_dns_wr_u8(&wr, 0x02); /* would fit, but the error is sticky */
	assert_int_equal(wr.pos, 3);
	assert_int_equal(buf[3], 0xee);
	assert_int_equal(buf[5], 0xee);
	assert_int_equal(buf[0], 0xab);
	assert_int_equal(buf[1], 0xcd);
	assert_int_equal(buf[2], 0x01);
}

static void wr_patch(void **state)
{
	uint8_t buf[8];
	struct nx_dns_wr wr;
	nx_dns_wr_init(&wr, buf, sizeof(buf));
	nx_dns_wr_u32(&wr, 0);
	nx_dns_wr_bytes(&wr, "xy", 2);
	nx_dns_wr_put_u16_at(&wr, 2, 0x0102);
	assert_int_equal(wr.err, 0);
	assert_int_equal(buf[2], 1);
	assert_int_equal(buf[3], 2);
	assert_memory_equal(buf + 4, "xy", 2);
	nx_dns_wr_put_u16_at(&wr, 5, 0xffff); /* past what was written */
	assert_int_equal(wr.err, NX_ETRUNC);
	assert_int_equal(buf[5], 'y');
}

static void name_plain_and_ptr(void **state)
{
	/* "foo." at 0, "a" + ptr(0) at 5, "b" + ptr(5) at 9 */
	uint8_t msg[32];
	int n = hex_decode("03666f6f000161c0000162c005", msg, sizeof(msg));
	uint8_t out[NX_DNS_NAME_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, (size_t)n);
	rd.pos = 9;
	size_t l = nx_dns_rd_name(&rd, out);
	assert_int_equal(l, 9);
	assert_memory_equal(out, "\001b\001a\003foo\000", 9);
	assert_int_equal(rd.pos, 13); /* past the pointer, not the target */
	assert_int_equal(rd.err, 0);

	nx_dns_rd_init(&rd, msg, (size_t)n);
	nx_dns_rd_skip_name(&rd);
	assert_int_equal(rd.pos, 5);
	nx_dns_rd_skip_name(&rd);
	assert_int_equal(rd.pos, 9);
	nx_dns_rd_skip_name(&rd);
	assert_int_equal(rd.pos, 13);
	assert_int_equal(rd.err, 0);
}

static void name_case_preserved(void **state)
{
	const uint8_t msg[] = {3, 'W', 'w', 'W', 7, 'E', 'x', 'A', 'm', 'p', 'l', 'e', 0};
	uint8_t out[NX_DNS_NAME_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, sizeof(msg));
	assert_int_equal(nx_dns_rd_name(&rd, out), sizeof(msg));
	assert_memory_equal(out, msg, sizeof(msg));
}

static void expect_bad(const uint8_t *msg, size_t len, size_t pos)
{
	uint8_t out[NX_DNS_NAME_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, len);
	rd.pos = pos;
	assert_int_equal(nx_dns_rd_name(&rd, out), 0);
	assert_int_equal(rd.err, NX_EMALFORMED);
	nx_dns_rd_init(&rd, msg, len);
	rd.pos = pos;
	nx_dns_rd_skip_name(&rd);
	assert_int_equal(rd.err, NX_EMALFORMED);
}

static void name_bad_pointers(void **state)
{
	/* self pointer */
	const uint8_t self[] = {0xc0, 0x00};
	expect_bad(self, sizeof(self), 0);
	/* pointer into its own label sequence (would loop) */
	const uint8_t own[] = {3, 'f', 'o', 'o', 0xc0, 0x00};
	expect_bad(own, sizeof(own), 0);
	/* forward pointer */
	const uint8_t fwd[] = {0xc0, 0x02, 0x00};
	expect_bad(fwd, sizeof(fwd), 0);
	/* two pointers pointing at each other: 0 -> 2 is forward; from 2: 2 -> 0 then 0 -> 2 */
	const uint8_t loop[] = {0xc0, 0x02, 0xc0, 0x00};
	expect_bad(loop, sizeof(loop), 2);
	/* a chain that comes back up: 4 -> 2 -> 4 */
	const uint8_t loop2[] = {0x00, 0x00, 0xc0, 0x04, 0xc0, 0x02};
	expect_bad(loop2, sizeof(loop2), 4);
	/* pointer past the end, truncated pointer */
	const uint8_t past[] = {0x00, 0xc0, 0x40};
	expect_bad(past, sizeof(past), 1);
	const uint8_t half[] = {0x00, 0xc0};
	expect_bad(half, sizeof(half), 1);
}

static void name_bad_labels(void **state)
{
	const uint8_t t40[] = {0x41, 'f', 'o', 'o'};
	expect_bad(t40, sizeof(t40), 0);
	const uint8_t t80[] = {0xbf, 'f', 'o', 'o'};
	expect_bad(t80, sizeof(t80), 0);
	const uint8_t overrun[] = {5, 'a', 'b'};
	expect_bad(overrun, sizeof(overrun), 0);
	const uint8_t noroot[] = {1, 'a'};
	expect_bad(noroot, sizeof(noroot), 0);
	const uint8_t empty[] = {0};
	expect_bad(empty, 0, 0);

	/* label of 64 bytes: the length byte 0x40 is a reserved type */
	uint8_t l64[66] = {64};
	expect_bad(l64, sizeof(l64), 0);
	/* label of 63 is fine */
	uint8_t l63[65] = {63};
	memset(l63 + 1, 'a', 63);
	l63[64] = 0;
	uint8_t out[NX_DNS_NAME_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, l63, sizeof(l63));
	assert_int_equal(nx_dns_rd_name(&rd, out), 65);
}

static void name_length_limit(void **state)
{
	/* 4 x 63-byte labels = 256 + root > 255: bad; 3 x 63 + 61 + root = 255: ok */
	uint8_t msg[300];
	size_t o = 0;
	for (int i = 0; i < 4; i++) {
		msg[o++] = 63;
		memset(msg + o, 'a' + i, 63);
		o += 63;
	}
	msg[o++] = 0;
	expect_bad(msg, o, 0);

	o = 0;
	for (int i = 0; i < 3; i++) {
		msg[o++] = 63;
		memset(msg + o, 'a' + i, 63);
		o += 63;
	}
	msg[o++] = 61;
	memset(msg + o, 'z', 61);
	o += 61;
	msg[o++] = 0;
	assert_int_equal(o, 255);
	uint8_t out[NX_DNS_NAME_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, o);
	assert_int_equal(nx_dns_rd_name(&rd, out), 255);
	assert_memory_equal(out, msg, 255);
	/* one byte more through compression: prefix "b" + pointer to that 255-byte name */
	msg[o] = 1;
	msg[o + 1] = 'b';
	msg[o + 2] = 0xc0;
	msg[o + 3] = 0;
	expect_bad(msg, o + 4, o);
}

static void name_long_chain(void **state)
{
	/* 100 one-byte labels each pointing to the previous one: valid, 201 bytes */
	uint8_t msg[600];
	size_t o = 0;
	msg[o++] = 0;
	size_t prev = 0;
	for (int i = 0; i < 100; i++) {
		size_t here = o;
		msg[o++] = 1;
		msg[o++] = 'a';
		msg[o++] = (uint8_t)(0xc0 | prev >> 8);
		msg[o++] = (uint8_t)prev;
		prev = here;
	}
	uint8_t out[NX_DNS_NAME_MAX];
	struct nx_dns_rd rd;
	nx_dns_rd_init(&rd, msg, o);
	rd.pos = prev;
	assert_int_equal(nx_dns_rd_name(&rd, out), 201);
	assert_int_equal(rd.pos, o);
	/* 130 labels = 261 bytes: over the limit */
	o = 1;
	prev = 0;
	for (int i = 0; i < 130; i++) {
		size_t here = o;
		msg[o++] = 1;
		msg[o++] = 'a';
		msg[o++] = (uint8_t)(0xc0 | prev >> 8);
		msg[o++] = (uint8_t)prev;
		prev = here;
	}
	expect_bad(msg, o, prev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rd_sticky),	  cmocka_unit_test(rd_exact),
	    cmocka_unit_test(wr_sticky),	  cmocka_unit_test(wr_patch),
	    cmocka_unit_test(name_plain_and_ptr), cmocka_unit_test(name_case_preserved),
	    cmocka_unit_test(name_bad_pointers),  cmocka_unit_test(name_bad_labels),
	    cmocka_unit_test(name_length_limit),  cmocka_unit_test(name_long_chain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

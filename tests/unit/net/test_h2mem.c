/*
 * nghttp2's allocator (net/h2mem.h): every block charged to its owner and returned; blocks of
 * map_min bytes or more in a mapping of their own, resident only where written; after a send
 * past the first page, nx_h2_mem_idle gives those pages back (mincore) and the block still
 * works; realloc into and out of a mapping keeps the contents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/ledger.h"
#include "net/h2mem.h"

#define FRAMEBUF 16394 /* nghttp2's outbound frame buffer */

static int64_t owner_bytes(void)
{
	struct nx_ledger_row rows[NX_OWNER__COUNT];
	nx_ledger_read(rows);
	return rows[NX_OWNER_doh_sessions].bytes;
}

/* Resident pages of [p, p + len) (whole pages containing it). */
static size_t resident_pages(const void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t hi = ((uintptr_t)p + len + pg - 1) & ~(uintptr_t)(pg - 1);
	unsigned char vec[64];
	assert_true((hi - lo) / pg <= sizeof(vec));
	assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
	size_t n = 0;
	for (size_t i = 0; i < (hi - lo) / pg; i++) {
		n += vec[i] & 1;
	}
	return n;
}

static void test_small_blocks_on_the_heap(void **state)
{
	int64_t base = owner_bytes();
	struct nx_h2_mem m;
	nx_h2_mem_init(&m, NX_OWNER_doh_sessions, NX_H2_MEM_MAP_MIN);
	uint8_t *p = m.mem.malloc(100, m.mem.mem_user_data);
	assert_non_null(p);
	assert_null(m.mapped);
	memset(p, 1, 100);
	p = m.mem.realloc(p, 200, m.mem.mem_user_data);
	assert_int_equal(p[99], 1);
	assert_true(owner_bytes() > base);
	m.mem.free(p, m.mem.mem_user_data);
	assert_int_equal(m.bytes, 0);
	assert_int_equal(owner_bytes(), base);
}

static void test_frame_buffer_mapped_and_released_when_idle(void **state)
{
	int64_t base = owner_bytes();
	struct nx_h2_mem m;
	nx_h2_mem_init(&m, NX_OWNER_doh_sessions, NX_H2_MEM_MAP_MIN);
	/* nghttp2 makes its frame buffer with realloc(NULL, n) */
	uint8_t *fb = m.mem.realloc(NULL, FRAMEBUF, m.mem.mem_user_data);
	assert_non_null(fb);
	assert_ptr_equal(m.mapped, fb);
	assert_int_equal(owner_bytes() - base, (int64_t)m.bytes);
	size_t all = resident_pages(fb, FRAMEBUF);
	assert_true(all <= 1); /* at most the header's page: nothing written yet */

	/* a small frame: first page only, no release needed */
	memset(fb, 0xab, 200);
	nx_h2_mem_sent(&m, fb, 200);
	assert_false(m.dirty);
	nx_h2_mem_idle(&m);
	assert_int_equal(resident_pages(fb, FRAMEBUF), 1);

	/* a large answer's DATA frame dirties every page; idle gives all but the first back */
	memset(fb, 0xcd, FRAMEBUF);
	assert_true(resident_pages(fb, FRAMEBUF) >= 4);
	nx_h2_mem_sent(&m, fb, FRAMEBUF);
	assert_true(m.dirty);
	nx_h2_mem_idle(&m);
	assert_false(m.dirty);
	assert_int_equal(resident_pages(fb, FRAMEBUF), 1);
	assert_int_equal(fb[0], 0xcd); /* the first page is kept */
	memset(fb, 0xef, FRAMEBUF);    /* and the rest is usable again */
	assert_int_equal(fb[FRAMEBUF - 1], 0xef);

	/* realloc out of and back into a mapping keeps the contents */
	uint8_t *small = m.mem.realloc(fb, 64, m.mem.mem_user_data);
	assert_non_null(small);
	assert_null(m.mapped);
	assert_int_equal(small[63], 0xef);
	uint8_t *big = m.mem.realloc(small, 3 * FRAMEBUF, m.mem.mem_user_data);
	assert_non_null(big);
	assert_ptr_equal(m.mapped, big);
	assert_int_equal(big[0], 0xef);
	assert_int_equal(owner_bytes() - base, (int64_t)m.bytes);
	m.mem.free(big, m.mem.mem_user_data);
	assert_null(m.mapped);
	assert_int_equal(m.bytes, 0);
	assert_int_equal(owner_bytes(), base);
}

static void test_no_mapping_when_off(void **state)
{
	struct nx_h2_mem m;
	nx_h2_mem_init(&m, NX_OWNER_doh_sessions, 0);
	void *p = m.mem.malloc(FRAMEBUF, m.mem.mem_user_data);
	assert_non_null(p);
	assert_null(m.mapped);
	nx_h2_mem_idle(&m); /* no-op */
	m.mem.free(p, m.mem.mem_user_data);
	assert_int_equal(m.bytes, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_small_blocks_on_the_heap),
	    cmocka_unit_test(test_frame_buffer_mapped_and_released_when_idle),
	    cmocka_unit_test(test_no_mapping_when_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

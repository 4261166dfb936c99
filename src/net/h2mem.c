#include "net/h2mem.h"

#include <stdalign.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MEM_HDR alignof(max_align_t) /* the block's size, kept in front of it */
#define MEM_MAPPED ((size_t)1 << (sizeof(size_t) * 8 - 1)) /* in the size word: an mmap block */

static size_t map_len(size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (size + MEM_HDR + pg - 1) & ~(pg - 1);
}

/* A large block of its own mapping: the pages nghttp2 never writes are never resident. */
static void *map_alloc(struct nx_h2_mem *m, size_t size)
{
	uint8_t *p =
	    mmap(NULL, map_len(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		return NULL;
	}
	size_t word = size | MEM_MAPPED;
	memcpy(p, &word, sizeof(word));
	nx_ledger_charge(m->owner, (int64_t)(size + MEM_HDR), 1);
	m->bytes += size + MEM_HDR;
	m->mapped = (uint8_t *)p + MEM_HDR;
	m->mapped_len = size;
	return p + MEM_HDR;
}

static void *h2_malloc(size_t size, void *ud)
{
	struct nx_h2_mem *m = ud;
	if (size > SIZE_MAX / 4) {
		return NULL;
	}
	if (m->map_min && size >= m->map_min) {
		return map_alloc(m, size);
	}
	uint8_t *p = nx_mem_alloc(m->owner, size + MEM_HDR);
	if (!p) {
		return NULL;
	}
	memcpy(p, &size, sizeof(size));
	m->bytes += size + MEM_HDR;
	return p + MEM_HDR;
}

static void h2_free(void *ptr, void *ud)
{
	struct nx_h2_mem *m = ud;
	if (!ptr) {
		return;
	}
	uint8_t *p = (uint8_t *)ptr - MEM_HDR;
	size_t size;
	memcpy(&size, p, sizeof(size));
	if (size & MEM_MAPPED) {
		size &= ~MEM_MAPPED;
		if (m->mapped == ptr) {
			m->mapped = NULL;
			m->mapped_len = 0;
		}
		m->bytes -= size + MEM_HDR;
		nx_ledger_charge(m->owner, -(int64_t)(size + MEM_HDR), -1);
		munmap(p, map_len(size));
		return;
	}
	m->bytes -= size + MEM_HDR;
	nx_mem_free(m->owner, p, size + MEM_HDR);
}

static void *h2_calloc(size_t n, size_t size, void *ud)
{
	if (size && n > (SIZE_MAX - MEM_HDR) / size) {
		return NULL;
	}
	void *p = h2_malloc(n * size, ud);
	if (p) {
		memset(p, 0, n * size);
	}
	return p;
}

static void *h2_realloc(void *ptr, size_t size, void *ud)
{
	struct nx_h2_mem *m = ud;
	if (!ptr) {
		return h2_malloc(size, ud);
	}
	if (size > SIZE_MAX / 4) {
		return NULL;
	}
	uint8_t *p = (uint8_t *)ptr - MEM_HDR;
	size_t old;
	memcpy(&old, p, sizeof(old));
	if ((old & MEM_MAPPED) || (m->map_min && size >= m->map_min)) {
		/* into or out of a mapping: a new block, the contents, the old one freed */
		void *n = h2_malloc(size, ud);
		if (!n) {
			return NULL;
		}
		size_t keep = old & ~MEM_MAPPED;
		memcpy(n, ptr, keep < size ? keep : size);
		h2_free(ptr, ud);
		return n;
	}
	uint8_t *q = nx_mem_realloc(m->owner, p, old + MEM_HDR, size + MEM_HDR);
	if (!q) {
		return NULL;
	}
	memcpy(q, &size, sizeof(size));
	m->bytes = m->bytes - old + size;
	return q + MEM_HDR;
}

void nx_h2_mem_init(struct nx_h2_mem *m, enum nx_owner owner, size_t map_min)
{
	m->owner = owner;
	m->bytes = 0;
	m->map_min = map_min;
	m->mapped = NULL;
	m->mapped_len = 0;
	m->dirty = false;
	m->mem = (nghttp2_mem){
	    .mem_user_data = m,
	    .malloc = h2_malloc,
	    .free = h2_free,
	    .calloc = h2_calloc,
	    .realloc = h2_realloc,
	};
}

void nx_h2_mem_sent(struct nx_h2_mem *m, const uint8_t *data, size_t len)
{
	if (!m->mapped) {
		return;
	}
	const uint8_t *lo = m->mapped, *hi = lo + m->mapped_len;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	const uint8_t *first_end = lo - MEM_HDR + pg;
	if (data >= lo && data < hi && data + len > first_end) {
		m->dirty = true;
	}
}

void nx_h2_mem_idle(struct nx_h2_mem *m)
{
	if (!m->mapped || !m->dirty) {
		return;
	}
	m->dirty = false;
	/* whole pages after the first: the first also holds our header and the chain's start */
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)m->mapped - MEM_HDR + pg);
	uintptr_t hi = (uintptr_t)m->mapped - MEM_HDR + map_len(m->mapped_len); /* ours whole */
	if (hi > lo) {
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
	}
}

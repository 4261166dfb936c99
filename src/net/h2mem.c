#include "net/h2mem.h"

#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#define MEM_HDR alignof(max_align_t) /* the block's size, kept in front of it */

static void *h2_malloc(size_t size, void *ud)
{
	struct nx_h2_mem *m = ud;
	if (size > SIZE_MAX - MEM_HDR) {
		return NULL;
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
	if (size > SIZE_MAX - MEM_HDR) {
		return NULL;
	}
	uint8_t *p = (uint8_t *)ptr - MEM_HDR;
	size_t old;
	memcpy(&old, p, sizeof(old));
	uint8_t *q = nx_mem_realloc(m->owner, p, old + MEM_HDR, size + MEM_HDR);
	if (!q) {
		return NULL;
	}
	memcpy(q, &size, sizeof(size));
	m->bytes = m->bytes - old + size;
	return q + MEM_HDR;
}

void nx_h2_mem_init(struct nx_h2_mem *m, enum nx_owner owner)
{
	m->owner = owner;
	m->bytes = 0;
	m->mem = (nghttp2_mem){
	    .mem_user_data = m,
	    .malloc = h2_malloc,
	    .free = h2_free,
	    .calloc = h2_calloc,
	    .realloc = h2_realloc,
	};
}

#include "base/ledger.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t g_bytes[NX_OWNER__COUNT];
static _Atomic int64_t g_count[NX_OWNER__COUNT];
static atomic_long g_fail_after = -1;
/* What this thread charged, per owner: a compile running beside others measures its own peak
 * (nx_ledger_thread_bytes), not theirs. */
static _Thread_local int64_t t_bytes[NX_OWNER__COUNT];

static const char *const owner_names[] = {
#define NX_OWNER_NAME(name, help) #name,
	NX_LEDGER_OWNERS(NX_OWNER_NAME)
#undef NX_OWNER_NAME
};
static const char *const owner_helps[] = {
#define NX_OWNER_HELP(name, help) help,
	NX_LEDGER_OWNERS(NX_OWNER_HELP)
#undef NX_OWNER_HELP
};

static int injected_failure(void)
{
	long n = atomic_load_explicit(&g_fail_after, memory_order_relaxed);
	if (n < 0) {
		return 0;
	}
	if (n == 0) {
		return 1;
	}
	atomic_fetch_sub(&g_fail_after, 1);
	return 0;
}

void nx_mem_fail_after(long n)
{
	atomic_store(&g_fail_after, n);
}

void nx_ledger_charge(enum nx_owner owner, int64_t bytes, int64_t count)
{
	atomic_fetch_add_explicit(&g_bytes[owner], bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&g_count[owner], count, memory_order_relaxed);
	t_bytes[owner] += bytes;
}

int64_t nx_ledger_thread_bytes(enum nx_owner owner)
{
	return t_bytes[owner];
}

void *nx_mem_alloc(enum nx_owner owner, size_t size)
{
	if (injected_failure()) {
		return NULL;
	}
	void *p = malloc(size ? size : 1);
	if (p) {
		nx_ledger_charge(owner, (int64_t)size, 1);
	}
	return p;
}

void *nx_mem_calloc(enum nx_owner owner, size_t n, size_t size)
{
	if (injected_failure()) {
		return NULL;
	}
	if (size && n > SIZE_MAX / size) {
		return NULL;
	}
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p) {
		nx_ledger_charge(owner, (int64_t)(n * size), 1);
	}
	return p;
}

void *nx_mem_realloc(enum nx_owner owner, void *p, size_t old_size, size_t new_size)
{
	if (injected_failure()) {
		return NULL;
	}
	void *q = realloc(p, new_size ? new_size : 1);
	if (q) {
		nx_ledger_charge(owner, (int64_t)new_size - (int64_t)old_size, p ? 0 : 1);
	}
	return q;
}

void nx_mem_free(enum nx_owner owner, void *p, size_t size)
{
	if (!p) {
		return;
	}
	free(p);
	nx_ledger_charge(owner, -(int64_t)size, -1);
}

char *nx_mem_strdup(enum nx_owner owner, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = nx_mem_alloc(owner, n);
	if (d) {
		memcpy(d, s, n);
	}
	return d;
}

void nx_ledger_read(struct nx_ledger_row rows[NX_OWNER__COUNT])
{
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		rows[i].name = owner_names[i];
		rows[i].help = owner_helps[i];
		rows[i].bytes = atomic_load_explicit(&g_bytes[i], memory_order_relaxed);
		rows[i].count = atomic_load_explicit(&g_count[i], memory_order_relaxed);
	}
}

int64_t nx_ledger_total(void)
{
	int64_t t = 0;
	for (int i = 0; i < NX_OWNER__COUNT; i++) {
		t += atomic_load_explicit(&g_bytes[i], memory_order_relaxed);
	}
	return t;
}

#include "base/rand.h"

#include <sodium.h>
#include <string.h>

#include "base/err.h"

/*
 * libsodium's default generator on Linux is a getrandom() system call per request: two or
 * three per forwarded query (socket draw, transaction id) showed up in perf (crng_make_state).
 * Each thread takes the kernel CSPRNG's output 256 bytes at a time instead and hands it out
 * in order; every value still comes from getrandom(), none is derived or reused.
 */
#define POOL 256

static _Thread_local struct {
	uint8_t b[POOL];
	unsigned pos;
} tl = {.pos = POOL};

int nx_rand_init(void)
{
	return sodium_init() < 0 ? NX_ECONFIG : 0;
}

uint32_t nx_rand_u32(void)
{
	if (tl.pos + 4 > POOL) {
		randombytes_buf(tl.b, POOL);
		tl.pos = 0;
	}
	uint32_t v;
	memcpy(&v, tl.b + tl.pos, 4);
	memset(tl.b + tl.pos, 0, 4); /* handed out once: do not leave it behind */
	tl.pos += 4;
	return v;
}

uint32_t nx_rand_uniform(uint32_t upper)
{
	if (upper < 2) {
		return 0;
	}
	/* Rejection sampling (as randombytes_uniform): values below 2^32 mod upper would bias. */
	uint32_t min = (1u + ~upper) % upper;
	uint32_t r;
	do {
		r = nx_rand_u32();
	} while (r < min);
	return r % upper;
}

#include "base/rand.h"

#include <sodium.h>

#include "base/err.h"

int nx_rand_init(void)
{
	return sodium_init() < 0 ? NX_ECONFIG : 0;
}

uint32_t nx_rand_u32(void)
{
	return randombytes_random();
}

uint32_t nx_rand_uniform(uint32_t upper)
{
	return randombytes_uniform(upper);
}

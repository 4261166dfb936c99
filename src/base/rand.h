/*
 * Randomness for anti-spoofing (transaction ids, source ports) and jitter: libsodium's CSPRNG.
 * Thread-safe after nx_rand_init() (call once at start, before threads): each thread draws from
 * its own 256-byte buffer of getrandom() output (one system call per 64 values).
 */
#pragma once

#include <stdint.h>

int nx_rand_init(void);
uint32_t nx_rand_u32(void);
/* Uniform in [0, upper). upper > 0. */
uint32_t nx_rand_uniform(uint32_t upper);

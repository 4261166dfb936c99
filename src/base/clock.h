/*
 * Clocks: monotonic milliseconds for deadlines, wall-clock seconds for records.
 * Race/deadline logic takes a `struct nx_clock` so unit tests can drive time by hand.
 */
#pragma once

#include <stdint.h>

uint64_t nx_now_mono_ms(void);
uint64_t nx_now_mono_us(void);
int64_t nx_now_wall_ms(void);

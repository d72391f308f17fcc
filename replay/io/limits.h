/* limits.h: the ranges every importer holds a trace's numbers to, so that no arithmetic on them can wrap. */
#ifndef REPLAY_IO_LIMITS_H
#define REPLAY_IO_LIMITS_H

#include <stdint.h>

/*
 * An importer refuses (with the file, the place and the field) a value outside these ranges
 * before it does any arithmetic with it. They are far beyond any real trace, and small enough
 * that sums the replay makes of them stay inside 64 bits:
 *
 *   IO_MAX_BYTES    a size: 2^48 bytes (256 TiB); 32,768 of them still sum below 2^63.
 *   IO_MAX_TIME_NS  a time or a duration in nanoseconds, either sign: 2^62 (146 years), so a
 *                   time plus a duration cannot wrap; nor can the difference of two times, but
 *                   for the two extremes, 2^63 apart (sim_ns_between holds that one).
 *
 * Sums over a trace's events are not bounded by these: 2^32 events of 2^48 bytes pass 64 bits
 * (sim_bytes_sum stops such a sum at INT64_MAX).
 *   IO_MAX_DEVICE   a device index: 0 to 1023 (the store keeps it in 16 bits).
 */
#define IO_MAX_BYTES (UINT64_C(1) << 48)
#define IO_MAX_TIME_NS (INT64_C(1) << 62)
#define IO_MAX_DEVICE 1023

#endif

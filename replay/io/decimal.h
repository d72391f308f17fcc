/* decimal.h: integers written in decimal, two digits at a time (the store's text form, JSON output). */
#ifndef REPLAY_IO_DECIMAL_H
#define REPLAY_IO_DECIMAL_H
#include <stdint.h>

static const char decimal_pairs_[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                     "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                     "8081828384858687888990919293949596979899";

/* u (at least 1) in decimal at o, written in place from its last digit: the byte after it. */
static inline char *decimal_digits_(char *o, uint64_t u) {
  static const uint64_t pow10[20] = {UINT64_C(1),
                                     UINT64_C(10),
                                     UINT64_C(100),
                                     UINT64_C(1000),
                                     UINT64_C(10000),
                                     UINT64_C(100000),
                                     UINT64_C(1000000),
                                     UINT64_C(10000000),
                                     UINT64_C(100000000),
                                     UINT64_C(1000000000),
                                     UINT64_C(10000000000),
                                     UINT64_C(100000000000),
                                     UINT64_C(1000000000000),
                                     UINT64_C(10000000000000),
                                     UINT64_C(100000000000000),
                                     UINT64_C(1000000000000000),
                                     UINT64_C(10000000000000000),
                                     UINT64_C(100000000000000000),
                                     UINT64_C(1000000000000000000),
                                     UINT64_C(10000000000000000000)};
  /* the digits: log10 from the bit length (1233 / 4096 ~ log10(2)), then one comparison */
  int n = ((64 - __builtin_clzll(u)) * 1233) >> 12;
  n += u >= pow10[n];
  char *q = o + n;
  while (u >= 100) {
    q -= 2;
    q[0] = decimal_pairs_[2 * (u % 100)];
    q[1] = decimal_pairs_[2 * (u % 100) + 1];
    u /= 100;
  }
  if (u >= 10) {
    q[-2] = decimal_pairs_[2 * u];
    q[-1] = decimal_pairs_[2 * u + 1];
  } else {
    q[-1] = (char)('0' + u);
  }
  return o + n;
}

/* u in decimal at o: the byte after it. At most 20 bytes. */
static inline char *decimal_u64(char *o, uint64_t u) {
  if (u < 10) { /* 0 or one digit (four fields in ten of the store's text form): no count of digits */
    *o = (char)('0' + u);
    return o + 1;
  }
  return decimal_digits_(o, u);
}

/* v in decimal at o: the byte after it. At most 20 bytes. */
static inline char *decimal_i64(char *o, int64_t v) {
  if ((uint64_t)v < 10) { /* as above, before the sign is looked at */
    *o = (char)('0' + v);
    return o + 1;
  }
  if (v < 0) *o++ = '-';
  return decimal_digits_(o, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

#endif

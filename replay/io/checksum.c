/* checksum.c: CRC-32 of a block of bytes through zlib. */
#include <limits.h>

#include <zlib.h>

#include "checksum.h"

uint32_t io_crc32(const void *p, size_t n) {
  const unsigned char *b = p;
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) { /* zlib takes at most UINT_MAX bytes at a time */
    uInt k = n > UINT_MAX ? UINT_MAX : (uInt)n;
    crc = crc32(crc, b, k);
    b += k;
    n -= k;
  }
  return (uint32_t)crc;
}

/* checksum.c: CRC-32 of a block of bytes: ISA-L's carry-less-multiply version where the build found it, else zlib's. */
#include "checksum.h"

#ifdef MEMPLAY_HAVE_ISAL
#include <isa-l/crc.h>

/* ISA-L's crc32_gzip_refl is the same function as zlib's crc32 (the reflected polynomial
 * 0xEDB88320, the register inverted before and after), chosen at run time for the processor's
 * instructions (PCLMULQDQ, AVX-512 where present): several times zlib's speed on a chunk. */
uint32_t io_crc32(const void *p, size_t n) { return crc32_gzip_refl(0, (const unsigned char *)p, (uint64_t)n); }

const char *io_crc32_impl(void) { return "isa-l"; }

#else
#include <limits.h>

#include <zlib.h>

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

const char *io_crc32_impl(void) { return "zlib"; }
#endif

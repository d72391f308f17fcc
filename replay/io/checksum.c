/* checksum.c: CRC-32 and Adler-32 of blocks of bytes: ISA-L's vectorised versions where the build found it, else zlib's. */
#include "checksum.h"

#ifdef MEMPLAY_HAVE_ISAL
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>

/* ISA-L's crc32_gzip_refl is the same function as zlib's crc32 (the reflected polynomial
 * 0xEDB88320, the register inverted before and after), chosen at run time for the processor's
 * instructions (PCLMULQDQ, AVX-512 where present): several times zlib's speed on a chunk. */
uint32_t io_crc32_update(uint32_t crc, const void *p, size_t n) {
  return crc32_gzip_refl(crc, (const unsigned char *)p, (uint64_t)n);
}

/* isal_adler32 continues a zlib Adler-32 as zlib's adler32 does (test_checksum compares them). */
uint32_t io_adler32_update(uint32_t adler, const void *p, size_t n) {
  return isal_adler32(adler, (const unsigned char *)p, (uint64_t)n);
}

const char *io_crc32_impl(void) { return "isa-l"; }

#else
#include <limits.h>

#include <zlib.h>

uint32_t io_crc32_update(uint32_t crc, const void *p, size_t n) {
  const unsigned char *b = p;
  uLong c = crc;
  while (n > 0) { /* zlib takes at most UINT_MAX bytes at a time */
    uInt k = n > UINT_MAX ? UINT_MAX : (uInt)n;
    c = crc32(c, b, k);
    b += k;
    n -= k;
  }
  return (uint32_t)c;
}

uint32_t io_adler32_update(uint32_t adler, const void *p, size_t n) {
  const unsigned char *b = p;
  uLong a = adler;
  while (n > 0) {
    uInt k = n > UINT_MAX ? UINT_MAX : (uInt)n;
    a = adler32(a, b, k);
    b += k;
    n -= k;
  }
  return (uint32_t)a;
}

const char *io_crc32_impl(void) { return "zlib"; }
#endif

uint32_t io_crc32(const void *p, size_t n) { return io_crc32_update(0, p, n); }

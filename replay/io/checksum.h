/* checksum.h: CRC-32 and Adler-32 of blocks of bytes (zlib's functions), for data that carries its own checksum and for a file's digest. */
#ifndef REPLAY_CHECKSUM_H
#define REPLAY_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 (zlib's crc32, the polynomial of gzip and PNG) of n bytes at p. The same value
 * whichever library computes it: ISA-L's where the build found it (libisal-dev), else zlib's. */
uint32_t io_crc32(const void *p, size_t n);
/* The CRC-32 of what crc covered followed by n bytes at p (crc 0: nothing yet): zlib's
 * crc32(crc, p, n). */
uint32_t io_crc32_update(uint32_t crc, const void *p, size_t n);
/* The Adler-32 of what adler covered followed by n bytes at p (adler 1: nothing yet): zlib's
 * adler32(adler, p, n), by the same library as io_crc32. */
uint32_t io_adler32_update(uint32_t adler, const void *p, size_t n);
/* Which library computes io_crc32: "isa-l" or "zlib". */
const char *io_crc32_impl(void);

#endif

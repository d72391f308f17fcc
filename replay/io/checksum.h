/* checksum.h: CRC-32 of a block of bytes (zlib's), for data that carries its own checksum. */
#ifndef REPLAY_CHECKSUM_H
#define REPLAY_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 (zlib's crc32, the polynomial of gzip and PNG) of n bytes at p. The same value
 * whichever library computes it: ISA-L's where the build found it (libisal-dev), else zlib's. */
uint32_t io_crc32(const void *p, size_t n);
/* Which library computes io_crc32: "isa-l" or "zlib". */
const char *io_crc32_impl(void);

#endif

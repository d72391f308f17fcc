/* checksum.h: CRC-32 of a block of bytes (zlib's), for data that carries its own checksum. */
#ifndef REPLAY_CHECKSUM_H
#define REPLAY_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 (zlib's crc32, the polynomial of gzip and PNG) of n bytes at p. */
uint32_t io_crc32(const void *p, size_t n);

#endif

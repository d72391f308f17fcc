/* test_checksum.c: io_crc32 and the continued CRC-32 and Adler-32, whichever library computes them, give zlib's values on every length and alignment. */
#include <zlib.h>

#include "io/checksum.h"
#include "test.h"

int test_failures;

static uint32_t zlib_crc(const unsigned char *p, size_t n) {
  return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

/* Known values of the gzip/PNG CRC-32: nothing, "123456789" (the catalogue's check value). */
static void known_values(void) {
  CHECK_EQ(io_crc32("", 0), 0);
  CHECK_EQ(io_crc32("123456789", 9), 0xCBF43926u);
  CHECK_EQ(io_crc32("a", 1), 0xE8B7BE43u);
}

/* Every length from 0 to 300 at every offset from 0 to 15 (the odd tails and unaligned heads a
 * vectorised version handles apart), then lengths around the chunks' sizes. */
static void agrees_with_zlib(void) {
  enum { BIG = 300000 };
  static unsigned char buf[BIG + 64];
  uint64_t r = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < sizeof buf; i++) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    buf[i] = (unsigned char)(i % 97 == 0 ? 0 : i % 89 == 0 ? 0xFF : r >> 56);
  }
  int bad = 0;
  for (size_t off = 0; off < 16; off++)
    for (size_t n = 0; n <= 300; n++)
      if (io_crc32(buf + off, n) != zlib_crc(buf + off, n) && bad++ < 5)
        fprintf(stderr, "crc of %zu bytes at offset %zu differs from zlib's\n", n, off);
  size_t sizes[] = {511, 512, 513, 1023, 4095, 4096, 4097, 65535, 65536, 65537, 245759, BIG};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    for (size_t off = 0; off < 64; off += 7)
      if (io_crc32(buf + off, sizes[k]) != zlib_crc(buf + off, sizes[k]) && bad++ < 5)
        fprintf(stderr, "crc of %zu bytes at offset %zu differs from zlib's\n", sizes[k], off);
  CHECK_EQ(bad, 0);
  /* all zeros and all ones: no shortcut for runs of one byte */
  static unsigned char zeros[5000], ones[5000];
  memset(ones, 0xFF, sizeof ones);
  CHECK_EQ(io_crc32(zeros, sizeof zeros), zlib_crc(zeros, sizeof zeros));
  CHECK_EQ(io_crc32(ones, sizeof ones), zlib_crc(ones, sizeof ones));
  CHECK_EQ(io_crc32(zeros + 1, 17), zlib_crc(zeros + 1, 17));
}

/* A file's digest continues both sums block by block (io/input.c): cut anywhere, at any offset,
 * each continued sum equals zlib's over the same bytes. */
static void continued_sums_agree_with_zlib(void) {
  static unsigned char buf[70000];
  uint64_t r = 0x2545F4914F6CDD1Dull;
  for (size_t i = 0; i < sizeof buf; i++) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    buf[i] = (unsigned char)(r >> 56);
  }
  CHECK_EQ(io_adler32_update(1, "", 0), 1);
  CHECK_EQ(io_adler32_update(1, "Wikipedia", 9), 0x11E60398u); /* the usual worked example */
  int bad = 0;
  size_t lens[] = {0, 1, 15, 16, 17, 255, 5552, 5553, 65536, sizeof buf - 16};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
    for (size_t off = 0; off < 16; off += 5)
      for (size_t cut = 0; cut <= lens[k]; cut += lens[k] / 3 + 1) {
        const unsigned char *p = buf + off;
        size_t n = lens[k];
        uint32_t c = io_crc32_update(io_crc32_update(0, p, cut), p + cut, n - cut);
        uint32_t a = io_adler32_update(io_adler32_update(1, p, cut), p + cut, n - cut);
        if (c != zlib_crc(p, n) && bad++ < 5) fprintf(stderr, "continued crc of %zu bytes cut at %zu differs\n", n, cut);
        if (a != (uint32_t)adler32(1, p, (uInt)n) && bad++ < 5)
          fprintf(stderr, "continued adler of %zu bytes cut at %zu differs\n", n, cut);
      }
  CHECK_EQ(bad, 0);
}

int main(void) {
  printf("io_crc32 by %s\n", io_crc32_impl());
  RUN(known_values);
  RUN(agrees_with_zlib);
  RUN(continued_sums_agree_with_zlib);
  TEST_MAIN_END();
}

/* png_stats.c: what a screenshot shows, in numbers: `png_stats FILE.png` prints its size, the share of
 * pixels that are not the background (the top-left pixel's colour) and how many distinct colours it has. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static int paeth(int a, int b, int c) {
  int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Reverses the PNG row filters in place: rows of 1 + stride bytes become rows of stride bytes. */
static int unfilter(unsigned char *raw, unsigned char *out, uint32_t w, uint32_t h, int bpp) {
  size_t stride = (size_t)w * bpp;
  for (uint32_t y = 0; y < h; y++) {
    int f = raw[y * (stride + 1)];
    const unsigned char *in = raw + y * (stride + 1) + 1;
    unsigned char *row = out + y * stride, *prev = y ? row - stride : NULL;
    for (size_t x = 0; x < stride; x++) {
      int a = x >= (size_t)bpp ? row[x - bpp] : 0, b = prev ? prev[x] : 0, c = prev && x >= (size_t)bpp ? prev[x - bpp] : 0;
      int v = in[x];
      if (f == 1) v += a;
      else if (f == 2) v += b;
      else if (f == 3) v += (a + b) / 2;
      else if (f == 4) v += paeth(a, b, c);
      else if (f != 0) return -1;
      row[x] = (unsigned char)v;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: png_stats FILE.png\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc((size_t)n);
  if (!d || fread(d, 1, (size_t)n, f) != (size_t)n || n < 33 || memcmp(d, "\x89PNG\r\n\x1a\n", 8)) {
    fprintf(stderr, "%s: not a PNG file\n", argv[1]);
    return 1;
  }
  fclose(f);
  uint32_t w = be32(d + 16), h = be32(d + 20);
  int depth = d[24], ctype = d[25], bpp = ctype == 6 ? 4 : ctype == 2 ? 3 : 0;
  if (depth != 8 || !bpp || d[28]) {
    fprintf(stderr, "%s: only 8-bit RGB or RGBA, not interlaced\n", argv[1]);
    return 1;
  }
  size_t zlen = 0;
  unsigned char *z = malloc((size_t)n);
  for (long p = 8; p + 12 <= n;) {
    uint32_t len = be32(d + p);
    if (!memcmp(d + p + 4, "IDAT", 4)) memcpy(z + zlen, d + p + 8, len), zlen += len;
    p += 12 + (long)len;
  }
  size_t stride = (size_t)w * (size_t)bpp;
  uLongf rawlen = (uLongf)((stride + 1) * h);
  unsigned char *raw = malloc(rawlen), *px = malloc(stride * h);
  if (uncompress(raw, &rawlen, z, zlen) != Z_OK || unfilter(raw, px, w, h, bpp)) {
    fprintf(stderr, "%s: cannot decode\n", argv[1]);
    return 1;
  }
  uint64_t other = 0;
  /* distinct colours, counted in a small hash set (up to 4096 kept) */
  uint32_t seen[8192] = {0};
  unsigned colours = 0;
  for (size_t i = 0; i < (size_t)w * h; i++) {
    const unsigned char *p = px + i * (size_t)bpp;
    uint32_t rgb = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    if (memcmp(p, px, 3)) other++;
    uint32_t k = (rgb * 2654435761u) >> 19;
    while (seen[k] && seen[k] != rgb + 1) k = (k + 1) & 8191;
    if (!seen[k] && colours < 4096) seen[k] = rgb + 1, colours++;
  }
  printf("%u %u %.4f %u\n", w, h, (double)other / ((double)w * h), colours);
  free(d);
  free(z);
  free(raw);
  free(px);
  return 0;
}

/* fuzz_plan.c: libFuzzer harness for the reader of a chunk's plan (store_plans.c): any bytes give numbers within the records they claim, or are refused with a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/checksum.h"
#include "store/store_int.h"

/*
 * The input is the record count the plan claims (four bytes, little-endian), the count of the
 * chunk's events (two bytes, modulo STORE_CHUNK_EVENTS + 1) and the plan's bytes, whose checksum is
 * made to hold (a failed checksum is the first refusal, and would hide the rest). The numbers are
 * read a slice at a time, as the store's reader reads them: each must be a record below the count,
 * or none; a refusal must say why.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 6) return 0;
  uint32_t records = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
  size_t n = ((size_t)data[4] | (size_t)data[5] << 8) % (STORE_CHUNK_EVENTS + 1);
  store_bytes b = {malloc(size - 6 + 1), size - 6, size - 6 + 1}; /* exactly the bytes: a read past them is found */
  if (size > 6) memcpy(b.p, data + 6, size - 6);
  uint32_t *slots = malloc((n ? n : 1) * sizeof *slots);
  plan_cursor c;
  char why[256] = "";
  int rc = plan_cursor_open(&c, &b, io_crc32(b.p, b.n), records, n, why, sizeof why);
  for (size_t done = 0, k; !rc && done < n; done += k) {
    k = n - done < 1024 ? n - done : 1024; /* STORE_READER_SLICE */
    rc = plan_cursor_slots(&c, k, slots, why, sizeof why);
    for (size_t i = 0; !rc && i < k; i++)
      if (slots[i] != REPLAY_PLAN_NONE && slots[i] >= records) abort(); /* a number past the records */
  }
  if (!rc) rc = plan_cursor_done(&c, why, sizeof why);
  if (rc && !why[0]) abort(); /* refused without a reason */
  free(slots);
  free(b.p);
  return 0;
}

/* fuzz_chunk.c: libFuzzer harness for the store's chunk decoder: any bytes decode to exactly the events claimed, or are refused with a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/chunk.h"

/*
 * The input is two bytes (little-endian) giving the count of events the chunk claims, modulo
 * STORE_CHUNK_EVENTS + 1, then the packed bytes. A chunk that decodes must pack again to bytes
 * that decode to the same events (the codec is exact both ways); one that does not must say why.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t n = ((size_t)data[0] | (size_t)data[1] << 8) % (STORE_CHUNK_EVENTS + 1);
  sim_event *ev = malloc((n ? n : 1) * sizeof *ev), *again = malloc((n ? n : 1) * sizeof *again);
  char why[256] = "";
  if (store_chunk_decode(data + 2, size - 2, n, 0, ev, why, sizeof why) == 0) {
    store_chunk_enc enc = {0};
    store_bytes blob = {0};
    store_chunk_encode(&enc, ev, n, &blob);
    if (store_chunk_decode(blob.p, blob.n, n, 0, again, why, sizeof why) != 0 ||
        (n && memcmp(ev, again, n * sizeof *ev) != 0))
      abort();
    store_text text = {0};
    store_chunk_text(ev, n, &text);
    store_text_release(&text);
    store_bytes_release(&blob);
    store_chunk_enc_release(&enc);
  } else if (!why[0]) {
    abort(); /* refused without a reason */
  }
  free(ev);
  free(again);
  return 0;
}

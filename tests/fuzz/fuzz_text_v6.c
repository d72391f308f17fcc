/* fuzz_text_v6.c: libFuzzer harness for the reader of schema 6's text form (store_text_upgrade.c): any bytes are read as a chunk's events or refused, and what is read is written in the new form. */
#include <stdint.h>
#include <stdlib.h>

#include "store/store_int.h"

/*
 * The input is a chunk's text as schema 6's event_rows held it. Read back, it must give at most a
 * chunk's events, each field within what schema 6 wrote (a device that fits 16 bits, ids and
 * unknowns never below -1), or -1; the events read are then written in schema 7's form, whose
 * bases must let every time and address be written without overflow (the sanitizers watch).
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sim_event *ev = malloc(STORE_CHUNK_EVENTS * sizeof *ev);
  long n = store_text_v6_read(data, size, ev);
  if (n > STORE_CHUNK_EVENTS) abort();
  for (long i = 0; i < n; i++)
    if (ev[i].stack < 0 || ev[i].name < 0 || ev[i].step < -1 || ev[i].dev_ts < -1 || ev[i].api_dur < -1) abort();
  if (n >= 0) {
    store_text t = {0};
    store_chunk_text(ev, (size_t)n, &t);
    if (t.rows.n < 2 || t.rows.p[0] != '[' || t.rows.p[t.rows.n - 1] != ']') abort();
    store_text_release(&t);
  }
  free(ev);
  return 0;
}

/* fuzz_restore.c: libFuzzer harness for a model started from a recorded state (the restore op), as a store's segments and blocks give it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_model.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"

/*
 * A recorded window's start (memplay validate, a replay of a snapshot that began mid-run) comes
 * from the `segments` and `blocks` rows of a store, which may have been made elsewhere. The input
 * is SPEC '\n', a byte that counts the segments (up to 8), the segments, each a header of 6
 * bytes and up to 15 blocks of 5 bytes, then the bytes that drive the model afterwards:
 *
 *   segment  flags (bit 0 the large pool, bit 1 expandable, bits 2-3 its stream, bits 4-7 its
 *            blocks), its address (two bytes of 2 MiB steps about the simulated device's first
 *            address, one of 512-byte steps: misaligned ones too), its size (one byte of 2 MiB
 *            steps, one of 512-byte steps) and, for an expandable one, where its reservation
 *            starts (one byte of 2 MiB steps below it)
 *   block    its offset from the previous block's start and its size (a byte each, in 512-byte
 *            steps times 1, 64 or 4,096 as the state byte says; a size of 0: sized by the model
 *            from its request), its requested bytes (two bytes) and its state byte (bit 0:
 *            waiting to be freed, else allocated)
 *
 * Each segment is restored as the engine's start_segment does it (and held on the device when
 * restored); a restore must succeed or refuse with a message. As the restore op asks of its caller
 * (the window's rebuild refuses it), a segment that overlaps one before it is not restored. The blocks restored are then live
 * handles of drive_live (freed, as the rest of the input says, among new allocations), and the
 * model must pass its invariant check.
 */
#define MAX_ITEMS 16

static uint64_t scale(uint8_t state) { return state & 0x10 ? 4096 * 512 : state & 0x08 ? 64 * 512 : 512; }

/* One segment's items from the input; 0 when the input ends first. */
static size_t read_segment(const uint8_t **pp, const uint8_t *end, sim_walk_item *it) {
  const uint8_t *p = *pp;
  if (end - p < 6) return 0;
  size_t nblocks = p[0] >> 4;
  uint64_t base = UINT64_C(0x7f0000000000) - (UINT64_C(1) << 36); /* the simulated device starts at 0x7f0000000000 */
  it[0] = (sim_walk_item){.is_segment = 1, .pool = p[0] & 1, .expandable = (p[0] >> 1) & 1, .stream = (p[0] >> 2) & 3};
  it[0].addr = base + ((uint64_t)(p[1] << 8 | p[2]) << 21) + (uint64_t)(p[3] & 7) * 512;
  it[0].size = ((uint64_t)p[4] << 21) + (uint64_t)(p[3] >> 3) * 512;
  it[0].requested = it[0].expandable && p[5] ? it[0].addr - ((uint64_t)p[5] << 21) : 0;
  p += 6;
  uint64_t at = it[0].addr;
  size_t n = 1;
  for (; n <= nblocks && end - p >= 5; n++, p += 5) {
    sim_walk_item *b = &it[n];
    *b = (sim_walk_item){.stream = it[0].stream};
    at += p[0] * scale(p[4]);
    b->addr = at;
    b->size = p[1] * scale(p[4]);
    b->requested = (uint64_t)(p[2] << 8 | p[3]) * 97;
    b->state = p[4] & 1 ? SIM_BLOCK_PENDING_FREE : SIM_BLOCK_ALLOCATED;
  }
  *pp = p;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size;
  char *spec_text = take_line(&p, end);
  char err[1024] = "";
  sim_spec spec;
  memset(&spec, 0, sizeof spec);
  if (sim_spec_parse(&spec, spec_text, err, sizeof err) != SIM_OK) goto out;
  sim_device dev;
  sim_simdev_init(&dev, UINT64_C(1) << 30, UINT64_C(1) << 30);
  sim_allocator a;
  sim_recorded none = {0};
  if (sim_allocator_init(&a, &spec, &dev, &none, no_env, err, sizeof err) == SIM_OK) {
    uintptr_t live[16];
    uint64_t seen[8][2];
    int nlive = 0, nseen = 0;
    int nseg = p < end ? *p++ % 9 : 0;
    for (int s = 0; s < nseg && a.ops->restore; s++) {
      sim_walk_item it[MAX_ITEMS];
      uintptr_t h[MAX_ITEMS];
      size_t n = read_segment(&p, end, it);
      if (!n) break;
      int overlaps = 0;
      for (int k = 0; k < nseen; k++) overlaps |= it[0].addr < seen[k][1] && seen[k][0] < it[0].addr + it[0].size;
      seen[nseen][0] = it[0].addr;
      seen[nseen++][1] = it[0].addr + it[0].size;
      if (overlaps) continue;
      err[0] = 0;
      if (a.ops->restore(a.ctx, it, n, h, err, sizeof err) != SIM_OK) {
        if (!err[0]) abort(); /* refused without a message */
        continue;
      }
      uint64_t lo = it[0].expandable && it[0].requested ? it[0].requested : it[0].addr;
      sim_simdev_hold(&dev, lo, it[0].addr + it[0].size - lo, it[0].size);
      for (size_t k = 1; k < n && nlive < 16; k++) live[nlive++] = h[k];
    }
    drive_live(&a, p, end, live, nlive);
    sim_allocator_release(&a);
  } else if (!err[0]) {
    abort();
  }
  sim_simdev_release(&dev);
out:
  sim_spec_release(&spec);
  free(spec_text);
  return 0;
}

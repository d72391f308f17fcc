/* fuzz_model.h: what the harnesses that drive an allocator model share: a SPEC line taken from
 * the input, and a few allocations, frees and synchronizations driven by the input's bytes. */
#ifndef FUZZ_MODEL_H
#define FUZZ_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/allocator.h"

static const char *no_env(const char *name) {
  (void)name;
  return NULL;
}

static char *take_line(const uint8_t **p, const uint8_t *end) {
  const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
  size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
  char *out = malloc(n + 1);
  memcpy(out, *p, n);
  out[n] = 0;
  *p += n + (nl != NULL);
  return out;
}

/* Frees h at once: through the model's free op when it has one and `one_call`, else its two steps. */
static void free_now(sim_allocator *a, uintptr_t h, int one_call) {
  void (*op)(void *, uintptr_t) = sim_allocator_free_op(a->ops);
  if (one_call && op) {
    op(a->ctx, h);
    return;
  }
  if (a->ops->free_requested) a->ops->free_requested(a->ctx, h);
  a->ops->free_completed(a->ctx, h);
}

/* Up to 64 steps of 3 bytes: an allocation on one of four streams, a free of a live handle (the
 * first nlive of live[16] are live to begin with), an empty_cache or a synchronization; then the
 * model's invariant check, which must pass. */
static void drive_live(sim_allocator *a, const uint8_t *p, const uint8_t *end, uintptr_t live[16], int nlive) {
  for (int step = 0; p + 3 <= end && step < 64; step++, p += 3) {
    if ((p[0] & 3) != 0 && nlive > 0) {
      int i = p[1] % nlive;
      free_now(a, live[i], p[0] & 4);
      live[i] = live[--nlive];
      continue;
    }
    uint64_t size = ((uint64_t)p[1] << (p[2] % 24)) + p[2];
    sim_placement pl;
    if (a->ops->alloc(a->ctx, size, p[0] >> 6, &pl) == SIM_OK) {
      if (nlive == 16) {
        free_now(a, live[0], p[0] & 8);
        live[0] = live[--nlive];
      }
      live[nlive++] = pl.handle;
    }
    if (p[0] == 0xEE && a->ops->empty_cache) a->ops->empty_cache(a->ctx);
    if ((p[0] & 0x30) == 0x30 && a->ops->synchronize) a->ops->synchronize(a->ctx, p[2] & 4 ? -1 : p[0] >> 6);
  }
  char err[512];
  if (a->ops->check && a->ops->check(a->ctx, err, sizeof err)) {
    fprintf(stderr, "%s: the model's check failed: %s\n", a->ops->name, err);
    abort();
  }
}

static inline void drive(sim_allocator *a, const uint8_t *p, const uint8_t *end) {
  uintptr_t live[16];
  drive_live(a, p, end, live, 0);
}

#endif

/* fuzz_spec.c: libFuzzer harness for allocator SPECs and recorded settings: parsing, then a model built from them doing a little work. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/settings.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"

/*
 * The input is SPEC '\n' SETTINGS-JSON '\n' OPS: the SPEC as given to --allocator
 * ("torch:expandable_segments:True,max_split_size_mb:64"), the allocator settings a trace
 * recorded (a JSON object, as the store keeps them), and bytes that drive a few allocations,
 * frees and synchronizations on four streams of a 1 GiB simulated device (a free through the
 * model's free op or its two steps, as a bit of each says). Parsing must accept or refuse with a
 * message; a model created must answer every request with a placement or an out-of-memory, and
 * pass its own invariant check at the end; then, when it can, be reset, its device given another
 * capacity and card (from the first bytes) and told, and do the same work again.
 */
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

static void drive(sim_allocator *a, const uint8_t *p, const uint8_t *end) {
  uintptr_t live[16];
  int nlive = 0;
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
    fprintf(stderr, "fuzz_spec: %s: the model's check failed: %s\n", a->ops->name, err);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size;
  char *spec_text = take_line(&p, end), *json = take_line(&p, end);
  char err[1024] = "";
  sim_spec spec;
  memset(&spec, 0, sizeof spec);
  if (sim_spec_parse(&spec, spec_text, err, sizeof err) != SIM_OK) {
    if (!err[0]) abort();
  } else {
    settings st;
    settings_init(&st, json);
    sim_device dev;
    sim_simdev_init(&dev, UINT64_C(1) << 30, UINT64_C(1) << 30);
    sim_allocator a;
    err[0] = 0;
    if (sim_allocator_init(&a, &spec, &dev, &st.recorded, no_env, err, sizeof err) == SIM_OK) {
      drive(&a, p, end);
      if (p + 2 <= end && sim_allocator_can_reset(a.ops) && sim_allocator_can_follow_device(a.ops) &&
          a.ops->reset(a.ctx) == SIM_OK) {
        sim_simdev_reset(&dev);
        sim_simdev_resize(&dev, (uint64_t)(p[0] + 1) << 24, p[1] & 1 ? UINT64_C(1) << 30 : 0);
        if (a.ops->device_changed(a.ctx) == SIM_OK) drive(&a, p, end);
      }
      sim_allocator_release(&a);
    } else if (!err[0]) {
      abort();
    }
    sim_simdev_release(&dev);
    settings_release(&st);
  }
  sim_spec_release(&spec);
  free(spec_text);
  free(json);
  return 0;
}

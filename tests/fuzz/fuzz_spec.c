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
 * recorded (a JSON object, as the store keeps them), and bytes that drive a few allocations and
 * frees on a 1 GiB simulated device. Parsing must accept or refuse with a message; a model
 * created must answer every request with a placement or an out-of-memory, and pass its own
 * invariant check at the end.
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

static void drive(sim_allocator *a, const uint8_t *p, const uint8_t *end) {
  uintptr_t live[16];
  int nlive = 0;
  for (int step = 0; p + 3 <= end && step < 64; step++, p += 3) {
    if ((p[0] & 3) != 0 && nlive > 0) {
      int i = p[1] % nlive;
      if (a->ops->free_requested) a->ops->free_requested(a->ctx, live[i]);
      a->ops->free_completed(a->ctx, live[i]);
      live[i] = live[--nlive];
      continue;
    }
    uint64_t size = ((uint64_t)p[1] << (p[2] % 24)) + p[2];
    sim_placement pl;
    if (a->ops->alloc(a->ctx, size, p[0] >> 6, &pl) == SIM_OK) {
      if (nlive == 16) {
        if (a->ops->free_requested) a->ops->free_requested(a->ctx, live[0]);
        a->ops->free_completed(a->ctx, live[0]);
        live[0] = live[--nlive];
      }
      live[nlive++] = pl.handle;
    }
    if (p[0] == 0xEE && a->ops->empty_cache) a->ops->empty_cache(a->ctx);
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

/* fuzz_spec.c: libFuzzer harness for allocator SPECs and recorded settings: parsing, then a model built from them doing a little work. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_model.h"
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

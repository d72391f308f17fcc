/* fuzz_timemodel.c: libFuzzer harness for the time model: events with any times, durations, streams and sizes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/devices.h"
#include "sim/timemodel.h"

/*
 * The time model reads the events of whatever a replay hands it: an import (its fields held to
 * replay/io/limits.h), a store edited elsewhere, a script's events, a chain of transforms. Its
 * promise is the same for any of them: no sum or difference of its times overflows, and a time
 * out of its range stops it with a reason (docs/timemodel.md, "The range it follows"). The input
 * is a configuration byte, then events of 19 bytes:
 *
 *   config   bit 0: the trace recorded on an A100 (kernels scaled to the H100 predicted on),
 *            bit 1: recorded copy times, bit 2: device waits kept, bit 3: dependencies inferred,
 *            bit 4: allocator calls synchronize, bit 5: kernels scaled by 2.5, bit 6: a scenario
 *            sets every kernel's duration (from the event's size), bit 7: a launch queue of 4
 *   event    kind, flags, the device (2 bits) and stream (6 bits: 63 is -1), direction and
 *            memory kind (a nibble each), then ts, dur, dev_ts, api_dur and size as three bytes
 *            each: a 16-bit mantissa shifted left by the first byte's low 6 bits, negative when
 *            its bit 7 is set, -1 when the byte is 0xff (so that every magnitude, the edges of
 *            the range and past them, is a few bytes away); the flags' bit 7 makes the event a
 *            recorded allocator call, with driver calls counted from the size's first byte
 *
 * The result must finish, and its breakdown must tile its total unless the model stopped.
 */
#define EVENT_BYTES 19

static int64_t value(const uint8_t *p) {
  if (p[0] == 0xff) return -1;
  uint64_t v = (uint64_t)(p[1] << 8 | p[2]) << (p[0] & 63);
  return p[0] & 0x80 ? (int64_t)(0 - v) : (int64_t)v;
}

/* A scenario's duration for an operation: any size (up to 2^63 - 1), none for size 0. */
static int64_t set_duration(void *arg, const sim_event *ev) {
  (void)arg;
  return ev->size ? (int64_t)(ev->size & (uint64_t)INT64_MAX) : -1;
}

static void read_event(const uint8_t *p, int64_t seq, sim_event *ev) {
  sim_event_init(ev);
  ev->seq = seq;
  ev->kind = (uint8_t)(p[0] % SIM_EV__COUNT);
  ev->flags = p[1] & 0x7f;
  ev->device = (int16_t)(p[2] >> 6);
  ev->stream = (p[2] & 63) == 63 ? -1 : (p[2] & 63);
  ev->dir = (uint8_t)(p[3] & 15);
  ev->mem = (uint8_t)(p[3] >> 4);
  ev->ts = value(p + 4);
  ev->dur = value(p + 7);
  ev->dev_ts = value(p + 10);
  ev->api_dur = value(p + 13);
  ev->size = (uint64_t)value(p + 16);
  ev->name = p[0] >> 4;
  ev->step = -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t cfgb = data[0];
  sim_device_profile dev = *sim_device_builtin("H100"), rec = *sim_device_builtin("A100-80GB");
  if (cfgb & 0x80) dev.launch_queue = 4;
  sim_tm_config cfg = {.device = &dev, .copy_timing = cfgb & 2 ? SIM_TM_TIMING_RECORDED : SIM_TM_TIMING_MODEL,
                       .keep_device_waits = !!(cfgb & 4), .infer_dependencies = !!(cfgb & 8),
                       .malloc_syncs = !!(cfgb & 16), .kernel_scale = cfgb & 32 ? 2.5 : 1, .batch_size = 8,
                       .recorded_device = cfgb & 1 ? &rec : NULL, .duration = cfgb & 64 ? set_duration : NULL};
  sim_tm *tm = sim_tm_new(&cfg);
  const uint8_t *p = data + 1;
  for (int64_t seq = 0; (size_t)(data + size - p) >= EVENT_BYTES; seq++, p += EVENT_BYTES) {
    sim_event ev;
    read_event(p, seq, &ev);
    if (p[1] & 0x80) {
      uint8_t c = p[16];
      sim_tm_alloc a = {c & 3, (c >> 2) & 3, (c >> 4) & 3, c >> 6, ev.size, ev.size, ev.size, ev.size};
      sim_tm_event(tm, &ev, &a, SIM_TM_ROLE_ALLOCATOR_CALL);
    } else {
      sim_tm_event(tm, &ev, NULL, SIM_TM_ROLE_NONE);
    }
  }
  sim_tm_result r;
  sim_tm_finish(tm, &r);
  if (!r.stopped) {
    int64_t sum = 0;
    for (int c = 0; c < SIM_TM__NCLASS; c++) sum += r.breakdown[c];
    if (sum != r.total_ns) abort(); /* the critical path tiles the predicted time */
  }
  sim_tm_result_release(&r);
  sim_tm_free(tm);
  return 0;
}

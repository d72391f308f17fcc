/* alloc_ideal.c: the `ideal` model: exactly the live requested bytes, the bound no allocator beats. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "hashmap.h"
#include "internal/debug.h"

/*
 * No rounding, no caching, no fragmentation: every request takes exactly its size and gives it
 * back when freed. Allocated, requested, active and reserved are all the live requested bytes.
 * A request fails only when the live bytes would exceed the device's capacity.
 * The handle is the request's size; addresses are consecutive and never reused.
 */
typedef struct ideal {
  sim_device *dev;
  sim_alloc_stats st;
  uint64_t next_addr;
} ideal;

static int ideal_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t n) {
  (void)cfg, (void)err, (void)n;
  ideal *m = sim_xcalloc(1, sizeof *m);
  m->dev = dev;
  m->next_addr = 0x100000000;
  *ctx = m;
  return SIM_OK;
}

static void ideal_destroy(void *ctx) { free(ctx); }

/* Holds no device memory: the statistics and the addresses start again. */
static int ideal_reset(void *ctx) {
  ideal *m = ctx;
  memset(&m->st, 0, sizeof m->st);
  m->next_addr = 0x100000000;
  return SIM_OK;
}

static int ideal_alloc(void *ctx, uint64_t size, int64_t stream, sim_placement *out) {
  ideal *m = ctx;
  (void)stream;
  uint64_t live = (uint64_t)m->st.allocated.current;
  if (size > m->dev->capacity || live > m->dev->capacity - size) {
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  out->addr = m->next_addr;
  out->size = size;
  out->handle = (uintptr_t)size;
  m->next_addr += size ? size : 1;
  int64_t s = (int64_t)size;
  sim_gauge_add(&m->st.allocated, s);
  sim_gauge_add(&m->st.requested, s);
  sim_gauge_add(&m->st.active, s);
  sim_gauge_add(&m->st.reserved, s);
  m->st.num_allocs++;
  return SIM_OK;
}

static void ideal_free_completed(void *ctx, uintptr_t handle) {
  ideal *m = ctx;
  int64_t s = (int64_t)handle;
  sim_assert_internal(s >= 0 && m->st.allocated.current >= s); /* the size of a live request */
  m->st.allocated.current -= s;
  m->st.requested.current -= s;
  m->st.active.current -= s;
  m->st.reserved.current -= s;
  m->st.num_frees++;
}

static const sim_alloc_stats *ideal_stats(void *ctx) { return &((ideal *)ctx)->st; }

static uint64_t ideal_largest_free(void *ctx) {
  (void)ctx;
  return 0;
}

static void ideal_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  ideal *m = ctx;
  (void)stream;
  snprintf(buf, n, "%" PRIu64 " bytes requested with %" PRId64 " bytes live, capacity %" PRIu64 " bytes", size,
           m->st.allocated.current, m->dev->capacity);
}

const sim_allocator_ops sim_ideal_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "ideal",
  .summary = "live requested bytes only: the lower bound no allocator can beat",
  .options = (const sim_option_spec[]){{NULL, NULL}},
  .create = ideal_create,
  .destroy = ideal_destroy,
  .alloc = ideal_alloc,
  .free_completed = ideal_free_completed,
  .stats = ideal_stats,
  .largest_free = ideal_largest_free,
  .describe_oom = ideal_describe_oom,
  .reset = ideal_reset,
  .device_changed = sim_device_read_as_needed,
};

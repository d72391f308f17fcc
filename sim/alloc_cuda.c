/* alloc_cuda.c: the `cuda` model: one raw cudaMalloc per request and one cudaFree per free, no caching. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "device_sim.h"
#include "internal/debug.h"
#include "slab.h"

/*
 * What a program that calls cudaMalloc/cudaFree directly gets (TF_GPU_ALLOCATOR=cuda_malloc,
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1, plain CUDA code):
 *  - every request is one cudaMalloc of exactly its size, every free one cudaFree;
 *  - nothing is cached: a freed block goes straight back to the driver;
 *  - reserved memory is what the driver holds for the process (its 2 MiB pages: see the
 *    simulated device), so small requests cost less than a page each and large ones are
 *    rounded up to 2 MiB;
 *  - allocated and requested are the live requested bytes.
 */
typedef struct cuda_block {
  uint64_t addr, size;
} cuda_block;

typedef struct cuda_model {
  sim_device *dev;
  sim_alloc_stats st;
  sim_slab blocks;
} cuda_model;

static void sync_reserved(cuda_model *m) {
  m->st.reserved.current = (int64_t)m->dev->used;
  if (m->st.reserved.current > m->st.reserved.peak) m->st.reserved.peak = m->st.reserved.current;
}

static int cuda_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t n) {
  (void)cfg, (void)err, (void)n;
  cuda_model *m = sim_xcalloc(1, sizeof *m);
  m->dev = dev;
  sim_slab_init(&m->blocks, sizeof(cuda_block));
  *ctx = m;
  return SIM_OK;
}

static void cuda_destroy(void *ctx) {
  cuda_model *m = ctx;
  sim_slab_release(&m->blocks);
  free(m);
}

/* cudaFree of every allocation still held. */
static void free_all(cuda_model *m) {
  char *freed = sim_xcalloc(m->blocks.len + 1, 1);
  for (uint32_t h = m->blocks.free_head; h; h = *(uint32_t *)sim_slab_at(&m->blocks, h)) freed[h] = 1;
  for (uint32_t h = 1; h <= m->blocks.len; h++) {
    if (freed[h]) continue;
    const cuda_block *b = sim_slab_at(&m->blocks, h);
    sim_device_free(m->dev, b->addr, b->size);
  }
  free(freed);
}

/* Every live request goes back to the driver (unless it is clearing: allocator.h, `reset`); the
 * slab starts again. */
static int cuda_reset(void *ctx) {
  cuda_model *m = ctx;
  if (!m->dev->clearing) free_all(m);
  sim_slab_clear(&m->blocks);
  memset(&m->st, 0, sizeof m->st);
  return SIM_OK;
}

static int cuda_alloc(void *ctx, uint64_t size, int64_t stream, sim_placement *out) {
  cuda_model *m = ctx;
  uint64_t addr;
  if (sim_device_malloc(m->dev, size, stream, &addr) != SIM_OK) {
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  uint32_t h = sim_slab_new(&m->blocks);
  cuda_block *b = sim_slab_at(&m->blocks, h);
  b->addr = addr;
  b->size = size;
  out->addr = addr;
  out->size = size;
  out->handle = h;
  int64_t s = (int64_t)size;
  sim_gauge_add(&m->st.allocated, s);
  sim_gauge_add(&m->st.requested, s);
  sim_gauge_add(&m->st.active, s);
  sync_reserved(m);
  m->st.num_allocs++;
  return SIM_OK;
}

static void cuda_free_completed(void *ctx, uintptr_t handle) {
  cuda_model *m = ctx;
  sim_assert_internal(handle && handle <= m->blocks.len); /* a block this model handed out */
  cuda_block *b = sim_slab_at(&m->blocks, (uint32_t)handle);
  sim_assert_internal(m->st.allocated.current >= (int64_t)b->size);
  sim_device_free(m->dev, b->addr, b->size);
  int64_t s = (int64_t)b->size;
  m->st.allocated.current -= s;
  m->st.requested.current -= s;
  m->st.active.current -= s;
  sync_reserved(m);
  m->st.num_frees++;
  sim_slab_free(&m->blocks, (uint32_t)handle);
}

static const sim_alloc_stats *cuda_stats(void *ctx) { return &((cuda_model *)ctx)->st; }

static uint64_t cuda_largest_free(void *ctx) {
  /* Held but unused: the driver's pages minus live bytes is spread over partial pages; the
   * largest contiguous piece is at most one page. */
  cuda_model *m = ctx;
  uint64_t slack = m->dev->used - (uint64_t)m->st.allocated.current;
  return slack < SIM_PAGE_SIZE ? slack : SIM_PAGE_SIZE;
}

/* Every live request is a segment of its own, holding one block: in the slab's order. */
static int cuda_walk(void *ctx, sim_walk_fn fn, void *arg) {
  cuda_model *m = ctx;
  char *freed = sim_xcalloc(m->blocks.len + 1, 1);
  for (uint32_t h = m->blocks.free_head; h; h = *(uint32_t *)sim_slab_at(&m->blocks, h)) freed[h] = 1;
  int rc = 0;
  for (uint32_t h = 1; h <= m->blocks.len && !rc; h++) {
    if (freed[h]) continue;
    const cuda_block *b = sim_slab_at(&m->blocks, h);
    sim_walk_item seg = {.is_segment = 1, .addr = b->addr, .size = b->size};
    sim_walk_item blk = {.addr = b->addr, .size = b->size, .requested = b->size, .state = SIM_BLOCK_ALLOCATED,
                         .handle = h};
    rc = fn(arg, &seg);
    if (!rc) rc = fn(arg, &blk);
  }
  free(freed);
  return rc;
}

static void cuda_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  cuda_model *m = ctx;
  (void)stream;
  snprintf(buf, n,
           "cudaMalloc of %" PRIu64 " bytes failed: out of memory (%" PRIu64 " bytes in use by the process of %" PRIu64
           " bytes available)",
           size, m->dev->used, m->dev->capacity);
}

const sim_allocator_ops sim_cuda_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "cuda",
  .summary = "one raw cudaMalloc per request and cudaFree per free, no caching",
  .options = (const sim_option_spec[]){{NULL, NULL}},
  .create = cuda_create,
  .destroy = cuda_destroy,
  .alloc = cuda_alloc,
  .free_completed = cuda_free_completed,
  .stats = cuda_stats,
  .largest_free = cuda_largest_free,
  .describe_oom = cuda_describe_oom,
  .walk = cuda_walk,
  .reset = cuda_reset,
  .device_changed = sim_device_read_as_needed,
};

/* driver_pool.c: the CUDA driver's own stream-ordered pool as an allocator, for `--backend cuda --allocator async`. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_int.h"
#include "sim/slab.h"

/*
 * The model of cudaMallocAsync's pool is sim/alloc_async.c. On a real GPU the backend uses the
 * pool itself instead (a model with the SIM_ALLOC_DRIVER_POOL trait): cudaMallocAsync and
 * cudaFreeAsync on the device's default pool, on the recorded stream, with the model's options
 * set as the pool's attributes; its statistics are the pool's own (reserved and used bytes,
 * read after every call that may change them).
 */

typedef struct pool_block {
  uint64_t slab_link; /* the slab keeps its free list here once the block is freed */
  void *ptr;          /* NULL once freed */
  uint64_t size;
  cudaStream_t stream;
} pool_block;

typedef struct backend_pool {
  brun *r;
  sim_device *dev;
  int gpu;
  cudaMemPool_t mp;
  sim_alloc_stats st;
  sim_slab blocks;
  uint64_t used;           /* cudaMemPoolAttrUsedMemCurrent, last read */
} pool;

int backend_pool_refresh(pool *p) {
  brun *r = p->r;
  uint64_t reserved = 0, used = 0;
  if (backend_rt_check(r, cudaMemPoolGetAttribute(p->mp, cudaMemPoolAttrReservedMemCurrent, &reserved),
               "cudaMemPoolGetAttribute(ReservedMemCurrent) on GPU %d", p->gpu) ||
      backend_rt_check(r, cudaMemPoolGetAttribute(p->mp, cudaMemPoolAttrUsedMemCurrent, &used),
               "cudaMemPoolGetAttribute(UsedMemCurrent) on GPU %d", p->gpu))
    return -1;
  p->used = used;
  if ((int64_t)reserved != p->st.reserved.current) {
    p->st.reserved.current = (int64_t)reserved;
    if (p->st.reserved.current > p->st.reserved.peak) p->st.reserved.peak = p->st.reserved.current;
    if (cudart_device_sample(p->dev)) return backend_run_fail(r, "%s", cudart_device_error(p->dev));
  }
  return 0;
}

/* The same options as the `async` model (sim/alloc_async.c), set on the real pool. */
static const sim_option_spec pool_options[] = {
  {"release_threshold", "size or max: bytes the pool keeps at a synchronization (cudaMemPoolAttrReleaseThreshold, "
                        "default 0)"},
  {"reuse_follow_event_dependencies", "true/false: cudaMemPoolReuseFollowEventDependencies (default true)"},
  {"reuse_allow_opportunistic", "true/false: cudaMemPoolReuseAllowOpportunistic (default true)"},
  {"reuse_allow_internal_dependencies", "true/false: cudaMemPoolReuseAllowInternalDependencies (default true)"},
  {NULL, NULL},
};

static int pool_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t errlen) {
  brun *r = cudart_device_owner(dev);
  uint64_t threshold = 0;
  int flags[3] = {1, 1, 1};
  static const enum cudaMemPoolAttr reuse_attr[3] = {cudaMemPoolReuseFollowEventDependencies,
                                                     cudaMemPoolReuseAllowOpportunistic,
                                                     cudaMemPoolReuseAllowInternalDependencies};
  for (size_t i = 0; i < cfg->nopts; i++) {
    const sim_option *o = &cfg->opts[i];
    int rc = 0;
    if (!strcmp(o->key, "release_threshold")) {
      if (!strcmp(o->value, "max") || !strcmp(o->value, "UINT64_MAX")) threshold = UINT64_MAX;
      else rc = sim_opt_size(o, &threshold, err, errlen);
    } else {
      for (int k = 0; k < 3; k++)
        if (!strcmp(o->key, pool_options[k + 1].name)) rc = sim_opt_bool(o, &flags[k], err, errlen);
    }
    if (rc) return SIM_EINVAL;
  }
  pool *p = sim_xcalloc(1, sizeof *p);
  p->r = r;
  p->dev = dev;
  p->gpu = cudart_device_ordinal(dev);
  sim_slab_init(&p->blocks, sizeof(pool_block));
  cudaError_t e = cudaDeviceGetDefaultMemPool(&p->mp, p->gpu);
  if (e == cudaSuccess) e = cudaMemPoolSetAttribute(p->mp, cudaMemPoolAttrReleaseThreshold, &threshold);
  for (int k = 0; k < 3 && e == cudaSuccess; k++) e = cudaMemPoolSetAttribute(p->mp, reuse_attr[k], &flags[k]);
  if (e == cudaSuccess) e = cudaMemPoolTrimTo(p->mp, 0);
  if (e != cudaSuccess) {
    cudart_fail(err, errlen, e, "cannot set up the stream-ordered pool of GPU %d", p->gpu);
    sim_slab_release(&p->blocks);
    free(p);
    return SIM_EDEVICE;
  }
  r->gpus[p->gpu].pool = p;
  *ctx = p;
  return backend_pool_refresh(p) ? SIM_EDEVICE : SIM_OK;
}

static void pool_destroy(void *ctx) {
  pool *p = ctx;
  brun *r = p->r;
  if (cudaSetDevice(p->gpu) == cudaSuccess) {
    for (uint32_t i = 1; i <= p->blocks.len; i++) {
      pool_block *b = sim_slab_at(&p->blocks, i);
      if (b->ptr) backend_rt_check(r, cudaFreeAsync(b->ptr, b->stream), "cudaFreeAsync at the end on GPU %d", p->gpu);
    }
    backend_rt_check(r, cudaDeviceSynchronize(), "cudaDeviceSynchronize on GPU %d", p->gpu);
    backend_rt_check(r, cudaMemPoolTrimTo(p->mp, 0), "cudaMemPoolTrimTo on GPU %d", p->gpu);
  }
  r->gpus[p->gpu].pool = NULL;
  sim_slab_release(&p->blocks);
  free(p);
}

static int pool_alloc(void *ctx, uint64_t size, int64_t stream, sim_placement *out) {
  pool *p = ctx;
  brun *r = p->r;
  char b[32];
  cudaStream_t st;
  if (backend_use_gpu(r, p->gpu) || backend_stream_of(r, p->gpu, stream, &st)) return SIM_EDEVICE;
  void *ptr = NULL;
  cudaError_t e = cudaMallocAsync(&ptr, size, st);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    p->st.num_ooms++;
    return SIM_EOOM;
  }
  if (backend_rt_check(r, e, "cudaMallocAsync of %s on GPU %d, stream %" PRId64, report_bytes(b, sizeof b, size), p->gpu, stream))
    return SIM_EDEVICE;
  if (backend_pool_refresh(p)) return SIM_EDEVICE;
  if (p->dev->used > p->dev->capacity) {
    if (backend_rt_check(r, cudaFreeAsync(ptr, st), "cudaFreeAsync (over the capacity) on GPU %d", p->gpu) || backend_pool_refresh(p))
      return SIM_EDEVICE;
    p->st.num_ooms++;
    return SIM_EOOM;
  }
  uint32_t h = sim_slab_new(&p->blocks);
  pool_block *blk = sim_slab_at(&p->blocks, h);
  blk->ptr = ptr;
  blk->size = size;
  blk->stream = st;
  out->addr = (uint64_t)(uintptr_t)ptr;
  out->size = size;
  out->handle = h;
  sim_gauge_add(&p->st.allocated, (int64_t)size);
  sim_gauge_add(&p->st.requested, (int64_t)size);
  sim_gauge_add(&p->st.active, (int64_t)size);
  p->st.num_allocs++;
  return SIM_OK;
}

static void pool_free_completed(void *ctx, uintptr_t handle) {
  pool *p = ctx;
  brun *r = p->r;
  pool_block *b = sim_slab_at(&p->blocks, (uint32_t)handle);
  if (!backend_use_gpu(r, p->gpu)) backend_rt_check(r, cudaFreeAsync(b->ptr, b->stream), "cudaFreeAsync on GPU %d", p->gpu);
  int64_t s = (int64_t)b->size;
  p->st.allocated.current -= s;
  p->st.requested.current -= s;
  p->st.active.current -= s;
  p->st.num_frees++;
  b->ptr = NULL;
  sim_slab_free(&p->blocks, (uint32_t)handle);
  backend_pool_refresh(p);
}

static void pool_empty_cache(void *ctx) {
  pool *p = ctx;
  brun *r = p->r;
  if (backend_use_gpu(r, p->gpu)) return;
  if (backend_rt_check(r, cudaDeviceSynchronize(), "cudaDeviceSynchronize (empty_cache) on GPU %d", p->gpu)) return;
  if (backend_rt_check(r, cudaMemPoolTrimTo(p->mp, 0), "cudaMemPoolTrimTo(0) on GPU %d", p->gpu)) return;
  backend_pool_refresh(p);
}

static const sim_alloc_stats *pool_stats(void *ctx) { return &((pool *)ctx)->st; }

static uint64_t pool_largest_free(void *ctx) {
  pool *p = ctx;
  return (uint64_t)p->st.reserved.current > p->used ? (uint64_t)p->st.reserved.current - p->used : 0;
}

static void pool_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  pool *p = ctx;
  snprintf(buf, n,
           "cudaMallocAsync of %" PRIu64 " bytes on stream %" PRId64 " failed: out of memory (the pool holds %" PRId64
           " bytes, %" PRIu64 " of them in use; the process uses %" PRIu64 " bytes of GPU %d)",
           size, stream, p->st.reserved.current, p->used, p->dev->used, p->gpu);
}

int backend_uses_driver_pool(const session_run *run) {
  return (run->spec->ops->traits & SIM_ALLOC_DRIVER_POOL) != 0;
}

const sim_allocator_ops backend_pool_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "async",
  .summary = "the real stream-ordered pool: cudaMallocAsync/cudaFreeAsync on the device's default pool",
  .options = pool_options,
  .create = pool_create,
  .destroy = pool_destroy,
  .alloc = pool_alloc,
  .free_completed = pool_free_completed,
  .empty_cache = pool_empty_cache,
  .stats = pool_stats,
  .largest_free = pool_largest_free,
  .describe_oom = pool_describe_oom,
};


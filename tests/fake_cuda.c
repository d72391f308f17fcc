/* fake_cuda.c: a pretend GPU behind the CUDA runtime and driver calls memplay makes, to test the real-GPU code without one. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/hashmap.h"
#include "fake_cuda.h"

/*
 * Linked instead of the CUDA runtime into test builds of the real-GPU parts. It keeps what a
 * driver keeps and checks what a driver checks, so that the backend's bookkeeping is tested:
 *  - memory: a cudaMalloc takes its size rounded up to 2 MiB; cudaMemGetInfo reports the rest;
 *    out of memory when it does not fit; the stream-ordered pool grows by whole requests
 *    (rounded to 2 MiB), keeps freed memory, and gives back what exceeds its release threshold
 *    at every synchronization and on cudaMemPoolTrimTo;
 *  - virtual memory: reservations, handles and mappings, mapped only inside a reservation,
 *    unmapped whole;
 *  - copies and memsets must name device memory that is allocated or mapped, and fit in it;
 *  - time: each stream is busy until a moment in the host's clock; a kernel adds its duration
 *    (the spin kernel's argument), a copy size / 10 GB/s; synchronizing sleeps until then; a
 *    stream holds at most 1024 launched kernels that have not ended: the next launch waits;
 *  - failures on demand: fake_cuda_fail("cudaMemcpyAsync", 3) makes the third call fail.
 */

#define PAGE (UINT64_C(2) << 20)
#define VA_STEP (UINT64_C(1) << 40)
#define COPY_BPS 10e9
#define LAUNCH_QUEUE 1024

typedef struct fstream {
  int gpu;
  int64_t busy_until;          /* ns, host clock */
  int64_t ends[LAUNCH_QUEUE];  /* when the kernels in flight end, oldest first (a ring) */
  int head, count;
} fstream;

typedef struct fgpu {
  uint64_t total, used;
  uint64_t next_va;
  sim_map mallocs;  /* addr -> size */
  sim_map reserves; /* addr -> size */
  sim_map maps;     /* addr -> size */
  fstream null_stream;
  /* the default pool */
  uint64_t pool_reserved, pool_used, pool_threshold;
  int pool_flags[3];
} fgpu;

static struct {
  int init;
  int ngpus, no_driver;
  int current;
  fgpu gpus[4];
  sim_map handles; /* handle -> size */
  uint64_t next_handle;
  cudaError_t last;
  char fail_name[64];
  int fail_at, calls;
  fake_cuda_counts counts;
} F;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

void fake_cuda_setup(int ngpus, uint64_t memory) {
  fake_cuda_reset();
  F.ngpus = ngpus;
  for (int i = 0; i < ngpus; i++) {
    fgpu *g = &F.gpus[i];
    g->total = memory;
    g->next_va = VA_STEP * (uint64_t)(i + 1);
    sim_map_init(&g->mallocs);
    sim_map_init(&g->reserves);
    sim_map_init(&g->maps);
    g->null_stream.gpu = i;
    g->pool_flags[0] = g->pool_flags[1] = g->pool_flags[2] = 1;
  }
  sim_map_init(&F.handles);
  F.next_handle = 1;
  F.init = 1;
}

void fake_cuda_reset(void) {
  if (F.init) {
    for (int i = 0; i < F.ngpus; i++) {
      sim_map_release(&F.gpus[i].mallocs);
      sim_map_release(&F.gpus[i].reserves);
      sim_map_release(&F.gpus[i].maps);
    }
    sim_map_release(&F.handles);
  }
  memset(&F, 0, sizeof F);
}

void fake_cuda_no_driver(int on) { F.no_driver = on; }

void fake_cuda_fail(const char *name, int nth) {
  snprintf(F.fail_name, sizeof F.fail_name, "%s", name ? name : "");
  F.fail_at = nth;
  F.calls = 0;
}

const fake_cuda_counts *fake_cuda_counts_get(void) { return &F.counts; }

uint64_t fake_cuda_used(int gpu) { return F.gpus[gpu].used; }

size_t fake_cuda_live(int gpu) {
  const fgpu *g = &F.gpus[gpu];
  return g->mallocs.len + g->reserves.len + g->maps.len + (g->pool_used ? 1 : 0);
}

/* 1 when this call is the one asked to fail. */
static int failing(const char *name) {
  if (!F.fail_at || strcmp(name, F.fail_name)) return 0;
  return ++F.calls == F.fail_at;
}

static cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess) F.last = e;
  return e;
}

/* Without fake_cuda_setup (memplay itself on the pretend GPU), the environment says what to
 * pretend: FAKE_CUDA_GPUS (default 1), FAKE_CUDA_MEMORY (bytes, default 16 GiB),
 * FAKE_CUDA_NO_DRIVER=1, FAKE_CUDA_FAIL=name:n. */
static void init_from_env(void) {
  if (F.init) return;
  const char *g = getenv("FAKE_CUDA_GPUS"), *m = getenv("FAKE_CUDA_MEMORY"), *f = getenv("FAKE_CUDA_FAIL");
  fake_cuda_setup(g ? atoi(g) : 1, m ? strtoull(m, NULL, 10) : UINT64_C(16) << 30);
  F.no_driver = getenv("FAKE_CUDA_NO_DRIVER") != NULL;
  const char *colon = f ? strchr(f, ':') : NULL;
  if (colon) {
    snprintf(F.fail_name, sizeof F.fail_name, "%.*s", (int)(colon - f), f);
    F.fail_at = atoi(colon + 1);
  }
}

#define ENTER(name)                                                           \
  do {                                                                        \
    init_from_env();                                                          \
    if (F.no_driver) return ret(cudaErrorInsufficientDriver);                 \
    if (failing(name)) return ret(cudaErrorIllegalAddress);                   \
  } while (0)

static fgpu *cur(void) { return &F.gpus[F.current]; }

/* Does [p, p+n) lie inside device memory the program holds on the current GPU? */
static int device_range(const void *p, size_t n) {
  uint64_t a = (uint64_t)(uintptr_t)p;
  const fgpu *g = cur();
  const sim_map *maps[] = {&g->mallocs, &g->maps};
  for (int k = 0; k < 2; k++) {
    size_t it = 0;
    uint64_t base, size;
    while (sim_map_next(maps[k], &it, &base, &size))
      if (a >= base && a + n <= base + size) return 1;
  }
  return 0;
}

static fstream *stream(cudaStream_t s) { return s ? (fstream *)(void *)s : &cur()->null_stream; }

static void busy(fstream *s, int64_t ns) {
  int64_t t = now_ns();
  if (s->busy_until < t) s->busy_until = t;
  s->busy_until += ns;
}

static void wait_until(int64_t t) {
  int64_t d = t - now_ns();
  if (d <= 0) return;
  struct timespec ts = {(time_t)(d / 1000000000), (long)(d % 1000000000)};
  nanosleep(&ts, NULL);
}

/* The pool gives back what exceeds its threshold when the program synchronizes. */
static void pool_release(fgpu *g) {
  uint64_t keep = g->pool_used > g->pool_threshold ? g->pool_used : g->pool_threshold;
  if (g->pool_reserved > keep) {
    uint64_t give = g->pool_reserved - round_up(keep, PAGE);
    if (g->pool_reserved - give < g->pool_used) give = g->pool_reserved - round_up(g->pool_used, PAGE);
    g->pool_reserved -= give;
    g->used -= give;
  }
}

/* ---- the runtime ------------------------------------------------------------------------------ */

cudaError_t cudaRuntimeGetVersion(int *v) {
  init_from_env();
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v) {
  init_from_env();
  *v = F.no_driver ? 0 : CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n) {
  ENTER("cudaGetDeviceCount");
  *n = F.ngpus;
  return F.ngpus ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = F.last;
  F.last = cudaSuccess;
  return e;
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
  case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  default: return "unknown error";
  }
}

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  default: return "cudaErrorUnknown";
  }
}

cudaError_t cudaSetDevice(int d) {
  ENTER("cudaSetDevice");
  if (d < 0 || d >= F.ngpus) return ret(cudaErrorInvalidDevice);
  F.current = d;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  ENTER("cudaGetDeviceProperties");
  if (d < 0 || d >= F.ngpus) return ret(cudaErrorInvalidDevice);
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "Fake GPU %d", d);
  p->totalGlobalMem = F.gpus[d].total;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 4;
  p->asyncEngineCount = 2;
  p->memoryPoolsSupported = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d) {
  ENTER("cudaDeviceGetPCIBusId");
  snprintf(id, (size_t)len, "0000:%02x:00.0", d + 1);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
  ENTER("cudaDeviceGetAttribute");
  (void)d;
  *v = a == cudaDevAttrClockRate ? 1980000 : 0;
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *f, size_t *t) {
  ENTER("cudaMemGetInfo");
  F.counts.mem_get_info++;
  *t = cur()->total;
  *f = cur()->total - cur()->used;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size) {
  ENTER("cudaMalloc");
  fgpu *g = cur();
  if (size == 0) {
    *p = NULL;
    return cudaSuccess;
  }
  uint64_t take = round_up(size, PAGE);
  if (g->used + take > g->total) return ret(cudaErrorMemoryAllocation);
  g->used += take;
  uint64_t a = g->next_va;
  g->next_va += take;
  *sim_map_put(&g->mallocs, a, NULL) = size;
  *p = (void *)(uintptr_t)a;
  F.counts.mallocs++;
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  ENTER("cudaFree");
  if (!p) return cudaSuccess;
  fgpu *g = cur();
  uint64_t size;
  if (!sim_map_del(&g->mallocs, (uint64_t)(uintptr_t)p, &size)) return ret(cudaErrorInvalidValue);
  g->used -= round_up(size, PAGE);
  F.counts.frees++;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags) {
  ENTER("cudaHostAlloc");
  (void)flags;
  *p = malloc(size ? size : 1);
  F.counts.host_allocs++;
  return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void **p, size_t size) {
  ENTER("cudaMallocHost");
  *p = malloc(size ? size : 1);
  F.counts.host_allocs++;
  return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p) {
  ENTER("cudaFreeHost");
  free(p);
  return cudaSuccess;
}

static cudaError_t copy(const char *name, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s,
                        int sync) {
  ENTER(name);
  int dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  int dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dev_dst && !device_range(dst, n)) || (dev_src && !device_range(src, n))) return ret(cudaErrorInvalidValue);
  if (kind == cudaMemcpyHostToHost) memcpy(dst, src, n);
  fstream *st = stream(s);
  busy(st, (int64_t)((double)n / COPY_BPS * 1e9));
  if (st->busy_until > F.counts.latest_end) F.counts.latest_end = st->busy_until;
  if (sync) wait_until(st->busy_until);
  if (F.counts.copies < FAKE_CUDA_COPY_LOG) F.counts.copy_sizes[F.counts.copies] = n;
  F.counts.copies++;
  F.counts.copy_bytes += n;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, n, kind, NULL, 1);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
  return copy("cudaMemcpyAsync", dst, src, n, kind, s, 0);
}

cudaError_t cudaMemset(void *p, int v, size_t n) {
  ENTER("cudaMemset");
  (void)v;
  if (!device_range(p, n)) return ret(cudaErrorInvalidValue);
  F.counts.memsets++;
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
  ENTER("cudaMemsetAsync");
  (void)v, (void)s;
  if (!device_range(p, n)) return ret(cudaErrorInvalidValue);
  F.counts.memsets++;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  ENTER("cudaStreamCreateWithFlags");
  (void)flags;
  fstream *st = calloc(1, sizeof *st);
  st->gpu = F.current;
  *s = (cudaStream_t)(void *)st;
  F.counts.streams++;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  ENTER("cudaStreamDestroy");
  free((void *)s);
  F.counts.streams--;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  ENTER("cudaStreamSynchronize");
  wait_until(stream(s)->busy_until);
  pool_release(cur());
  F.counts.syncs++;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  ENTER("cudaDeviceSynchronize");
  /* Every stream of the GPU: the test keeps them few, so the latest end is tracked globally. */
  wait_until(F.counts.latest_end);
  wait_until(cur()->null_stream.busy_until);
  pool_release(cur());
  F.counts.syncs++;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int d) {
  ENTER("cudaDeviceGetDefaultMemPool");
  *pool = (cudaMemPool_t)(void *)&F.gpus[d];
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr a, void *v) {
  ENTER("cudaMemPoolSetAttribute");
  fgpu *g = (fgpu *)(void *)pool;
  if (a == cudaMemPoolAttrReleaseThreshold) g->pool_threshold = *(uint64_t *)v;
  else if (a == cudaMemPoolReuseFollowEventDependencies) g->pool_flags[0] = *(int *)v;
  else if (a == cudaMemPoolReuseAllowOpportunistic) g->pool_flags[1] = *(int *)v;
  else if (a == cudaMemPoolReuseAllowInternalDependencies) g->pool_flags[2] = *(int *)v;
  else return ret(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr a, void *v) {
  ENTER("cudaMemPoolGetAttribute");
  fgpu *g = (fgpu *)(void *)pool;
  if (a == cudaMemPoolAttrReservedMemCurrent) *(uint64_t *)v = g->pool_reserved;
  else if (a == cudaMemPoolAttrUsedMemCurrent) *(uint64_t *)v = g->pool_used;
  else if (a == cudaMemPoolAttrReleaseThreshold) *(uint64_t *)v = g->pool_threshold;
  else return ret(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  ENTER("cudaMemPoolTrimTo");
  fgpu *g = (fgpu *)(void *)pool;
  uint64_t floor = round_up(g->pool_used > keep ? g->pool_used : keep, PAGE);
  if (g->pool_reserved > floor) {
    g->used -= g->pool_reserved - floor;
    g->pool_reserved = floor;
  }
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s) {
  ENTER("cudaMallocAsync");
  (void)s;
  fgpu *g = cur();
  uint64_t take = round_up(size ? size : 1, 512);
  if (g->pool_used + take > g->pool_reserved) {
    uint64_t grow = round_up(g->pool_used + take - g->pool_reserved, PAGE);
    if (g->used + grow > g->total) return ret(cudaErrorMemoryAllocation);
    g->pool_reserved += grow;
    g->used += grow;
  }
  g->pool_used += take;
  uint64_t a = g->next_va;
  g->next_va += take;
  *sim_map_put(&g->mallocs, a, NULL) = size ? size : 1;
  *p = (void *)(uintptr_t)a;
  F.counts.mallocs++;
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  ENTER("cudaFreeAsync");
  (void)s;
  fgpu *g = cur();
  uint64_t size;
  if (!sim_map_del(&g->mallocs, (uint64_t)(uintptr_t)p, &size)) return ret(cudaErrorInvalidValue);
  g->pool_used -= round_up(size, 512);
  F.counts.frees++;
  return cudaSuccess;
}

/* ---- the driver, through cudaGetDriverEntryPointByVersion ------------------------------------ */

#define DENTER(name)                                             \
  do {                                                           \
    if (failing(name)) return CUDA_ERROR_ILLEGAL_ADDRESS;        \
  } while (0)

static CUresult d_error_name(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS" : r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY"
                                                                                                  : "CUDA_ERROR_INVALID_VALUE";
  return CUDA_SUCCESS;
}

static CUresult d_error_string(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
       : r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory"
                                       : "invalid argument";
  return CUDA_SUCCESS;
}

static CUresult d_attribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
  return CUDA_SUCCESS;
}

static CUresult d_granularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags f) {
  (void)p, (void)f;
  *g = PAGE;
  return CUDA_SUCCESS;
}

static CUresult d_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
  DENTER("cuMemAddressReserve");
  (void)align, (void)addr, (void)flags;
  if (size % PAGE) return CUDA_ERROR_INVALID_VALUE;
  fgpu *g = cur();
  *p = g->next_va;
  g->next_va += size;
  *sim_map_put(&g->reserves, *p, NULL) = size;
  return CUDA_SUCCESS;
}

static CUresult d_unreserve(CUdeviceptr p, size_t size) {
  DENTER("cuMemAddressFree");
  uint64_t have;
  if (!sim_map_del(&cur()->reserves, p, &have) || have != size) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult d_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p,
                         unsigned long long flags) {
  DENTER("cuMemCreate");
  (void)flags;
  if (size % PAGE || p->location.id != F.current) return CUDA_ERROR_INVALID_VALUE;
  fgpu *g = cur();
  if (g->used + size > g->total) return CUDA_ERROR_OUT_OF_MEMORY;
  g->used += size;
  *h = F.next_handle++;
  *sim_map_put(&F.handles, *h, NULL) = size;
  return CUDA_SUCCESS;
}

static CUresult d_release(CUmemGenericAllocationHandle h) {
  DENTER("cuMemRelease");
  uint64_t size;
  if (!sim_map_del(&F.handles, h, &size)) return CUDA_ERROR_INVALID_VALUE;
  cur()->used -= size;
  return CUDA_SUCCESS;
}

static CUresult d_map(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags) {
  DENTER("cuMemMap");
  (void)off, (void)flags;
  uint64_t *hs = sim_map_get(&F.handles, h);
  if (!hs || *hs != size) return CUDA_ERROR_INVALID_VALUE;
  int inside = 0;
  size_t it = 0;
  uint64_t base, len;
  while (sim_map_next(&cur()->reserves, &it, &base, &len))
    if (p >= base && p + size <= base + len) inside = 1;
  if (!inside || sim_map_get(&cur()->maps, p)) return CUDA_ERROR_INVALID_VALUE;
  *sim_map_put(&cur()->maps, p, NULL) = size;
  return CUDA_SUCCESS;
}

static CUresult d_unmap(CUdeviceptr p, size_t size) {
  DENTER("cuMemUnmap");
  uint64_t len;
  if (!sim_map_del(&cur()->maps, p, &len) || len != size) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult d_access(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n) {
  DENTER("cuMemSetAccess");
  (void)d;
  uint64_t *len = sim_map_get(&cur()->maps, p);
  return len && *len == size && n == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int module_tag;

static CUresult d_load(CUmodule *m, const void *image) {
  DENTER("cuModuleLoadData");
  if (!strstr(image, ".entry memplay_spin")) return CUDA_ERROR_INVALID_VALUE;
  *m = (CUmodule)(void *)&module_tag;
  F.counts.modules++;
  return CUDA_SUCCESS;
}

static CUresult d_unload(CUmodule m) {
  (void)m;
  F.counts.modules--;
  return CUDA_SUCCESS;
}

static CUresult d_function(CUfunction *f, CUmodule m, const char *name) {
  if (m != (CUmodule)(void *)&module_tag || strcmp(name, "memplay_spin")) return CUDA_ERROR_NOT_FOUND;
  *f = (CUfunction)(void *)&module_tag;
  return CUDA_SUCCESS;
}

static CUresult d_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, CUstream s, void **params, void **extra) {
  DENTER("cuLaunchKernel");
  (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
  if (f != (CUfunction)(void *)&module_tag || gx == 0 || !params) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ns = *(unsigned long long *)params[0];
  fstream *st = stream((cudaStream_t)s);
  int64_t t = now_ns();
  while (st->count && st->ends[st->head] <= t) { /* kernels that have ended leave the queue */
    st->head = (st->head + 1) % LAUNCH_QUEUE;
    st->count--;
  }
  if (st->count == LAUNCH_QUEUE) { /* full: the launch waits for the oldest to end */
    wait_until(st->ends[st->head]);
    st->head = (st->head + 1) % LAUNCH_QUEUE;
    st->count--;
  }
  busy(st, (int64_t)ns);
  st->ends[(st->head + st->count++) % LAUNCH_QUEUE] = st->busy_until;
  if (st->busy_until > F.counts.latest_end) F.counts.latest_end = st->busy_until;
  F.counts.kernels++;
  F.counts.kernel_ns += ns;
  return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned version, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *q) {
  (void)version, (void)flags;
  static const struct {
    const char *name;
    void *fn;
  } table[] = {
    {"cuGetErrorName", (void *)d_error_name},
    {"cuGetErrorString", (void *)d_error_string},
    {"cuDeviceGetAttribute", (void *)d_attribute},
    {"cuMemGetAllocationGranularity", (void *)d_granularity},
    {"cuMemAddressReserve", (void *)d_reserve},
    {"cuMemAddressFree", (void *)d_unreserve},
    {"cuMemCreate", (void *)d_create},
    {"cuMemRelease", (void *)d_release},
    {"cuMemMap", (void *)d_map},
    {"cuMemUnmap", (void *)d_unmap},
    {"cuMemSetAccess", (void *)d_access},
    {"cuModuleLoadData", (void *)d_load},
    {"cuModuleUnload", (void *)d_unload},
    {"cuModuleGetFunction", (void *)d_function},
    {"cuLaunchKernel", (void *)d_launch},
  };
  init_from_env();
  if (F.no_driver) return ret(cudaErrorInsufficientDriver);
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (!strcmp(table[i].name, sym)) {
      *fn = table[i].fn;
      if (q) *q = cudaDriverEntryPointSuccess;
      return cudaSuccess;
    }
  *fn = NULL;
  if (q) *q = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

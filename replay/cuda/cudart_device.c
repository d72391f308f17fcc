/* cudart_device.c: the device primitive over a real GPU: cudaMalloc/cudaFree and cuMemCreate/cuMemMap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "cudart_int.h"

/*
 * The real counterpart of sim/device_sim.c. Models call it through the sim_device_* wrappers
 * exactly as they call the simulated device, so a model's reserved memory is real memory:
 *  - malloc/free: cudaMalloc/cudaFree of exactly the size asked;
 *  - reserve/unreserve: cuMemAddressReserve/cuMemAddressFree, the size rounded up to the
 *    driver's allocation granularity (address space only);
 *  - map: one cuMemCreate of the range's size, cuMemMap into the reservation and
 *    cuMemSetAccess for read/write from the GPU; unmap: cuMemUnmap + cuMemRelease of every
 *    mapping in the range (a range must start and end on mapping boundaries, as the driver's).
 * `used` is what cudaMemGetInfo says the process took since init, read after every call that
 * can change it, so it includes the driver's own rounding and packing.
 */
typedef struct cudart_dev {
  sim_device *dev;
  const cudart_driver *drv;
  int ordinal;
  uint64_t base_free;   /* free memory at init */
  uint64_t granularity; /* cuMemGetAllocationGranularity, minimum */
  sim_map mallocs;      /* address -> size of each live cudaMalloc */
  sim_map reserved;     /* address -> size of each live reservation (rounded) */
  sim_map maps;         /* mapping start -> size */
  sim_map handles;      /* mapping start -> CUmemGenericAllocationHandle */
  uint64_t samples;
  void *owner;
  int failed;
  char err[SIM_ERRLEN];
} cudart_dev;

static int fail_rt(cudart_dev *c, cudaError_t e, const char *what, uint64_t size) {
  char b[32], msg[SIM_ERRLEN];
  cudart_fail(msg, sizeof msg, e, "%s of %s on GPU %d", what, report_bytes(b, sizeof b, size), c->ordinal);
  if (!c->failed) snprintf(c->err, sizeof c->err, "%s", msg);
  c->failed = 1;
  return SIM_EDEVICE;
}

static int fail_drv(cudart_dev *c, CUresult r, const char *what, uint64_t size) {
  char b[32], msg[SIM_ERRLEN];
  cudart_drv_fail(c->drv, msg, sizeof msg, r, "%s of %s on GPU %d", what, report_bytes(b, sizeof b, size), c->ordinal);
  if (!c->failed) snprintf(c->err, sizeof c->err, "%s", msg);
  c->failed = 1;
  return SIM_EDEVICE;
}

static int select_gpu(cudart_dev *c) {
  cudaError_t e = cudaSetDevice(c->ordinal);
  return e == cudaSuccess ? SIM_OK : fail_rt(c, e, "cudaSetDevice", 0);
}

/* Reads the memory in use into dev->used. */
static int sample(cudart_dev *c) {
  size_t f = 0, t = 0;
  cudaError_t e = cudaMemGetInfo(&f, &t);
  if (e != cudaSuccess) return fail_rt(c, e, "cudaMemGetInfo", 0);
  c->samples++;
  sim_device *d = c->dev;
  d->used = f < c->base_free ? c->base_free - f : 0;
  if (d->used > d->used_peak) d->used_peak = d->used;
  return SIM_OK;
}

static int over_capacity(const cudart_dev *c) { return c->dev->used > c->dev->capacity; }

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

static int cd_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  cudart_dev *c = ctx;
  (void)stream;
  if (size == 0) { /* cudaMalloc(0) succeeds with a null pointer and takes nothing */
    *addr = 0;
    return SIM_OK;
  }
  if (select_gpu(c)) return SIM_EDEVICE;
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, size);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return SIM_EOOM;
  }
  if (e != cudaSuccess) return fail_rt(c, e, "cudaMalloc", size);
  if (sample(c)) return SIM_EDEVICE;
  if (over_capacity(c)) {
    e = cudaFree(p);
    if (e != cudaSuccess) return fail_rt(c, e, "cudaFree (over the capacity)", size);
    return sample(c) ? SIM_EDEVICE : SIM_EOOM;
  }
  *sim_map_put(&c->mallocs, (uint64_t)(uintptr_t)p, NULL) = size;
  *addr = (uint64_t)(uintptr_t)p;
  return SIM_OK;
}

static int cd_free(void *ctx, uint64_t addr, uint64_t size) {
  cudart_dev *c = ctx;
  uint64_t known;
  if (addr == 0 && size == 0) return SIM_OK; /* cudaFree(NULL) */
  if (!sim_map_del(&c->mallocs, addr, &known)) {
    char msg[96];
    snprintf(msg, sizeof msg, "cudaFree of address 0x%llx, which this replay did not allocate", (unsigned long long)addr);
    if (!c->failed) snprintf(c->err, sizeof c->err, "%s", msg);
    c->failed = 1;
    return SIM_EINVAL;
  }
  if (select_gpu(c)) return SIM_EDEVICE;
  cudaError_t e = cudaFree((void *)(uintptr_t)addr);
  if (e != cudaSuccess) return fail_rt(c, e, "cudaFree", size ? size : known);
  return sample(c);
}

static int cd_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  cudart_dev *c = ctx;
  if (select_gpu(c)) return SIM_EDEVICE;
  uint64_t rounded = round_up(size ? size : 1, c->granularity);
  CUdeviceptr p = 0;
  CUresult r = c->drv->MemAddressReserve(&p, rounded, 0, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return SIM_EOOM;
  if (r != CUDA_SUCCESS) return fail_drv(c, r, "cuMemAddressReserve", rounded);
  *sim_map_put(&c->reserved, (uint64_t)p, NULL) = rounded;
  *addr = (uint64_t)p;
  return SIM_OK;
}

static int cd_unreserve(void *ctx, uint64_t addr, uint64_t size) {
  cudart_dev *c = ctx;
  uint64_t rounded;
  (void)size;
  if (!sim_map_del(&c->reserved, addr, &rounded)) {
    if (!c->failed)
      snprintf(c->err, sizeof c->err, "cuMemAddressFree of address 0x%llx, which this replay did not reserve",
               (unsigned long long)addr);
    c->failed = 1;
    return SIM_EINVAL;
  }
  if (select_gpu(c)) return SIM_EDEVICE;
  CUresult r = c->drv->MemAddressFree((CUdeviceptr)addr, rounded);
  return r == CUDA_SUCCESS ? SIM_OK : fail_drv(c, r, "cuMemAddressFree", rounded);
}

static int unmap_one(cudart_dev *c, uint64_t at, uint64_t size) {
  uint64_t h = 0;
  sim_map_del(&c->handles, at, &h);
  sim_map_del(&c->maps, at, NULL);
  CUresult r = c->drv->MemUnmap((CUdeviceptr)at, size);
  if (r != CUDA_SUCCESS) return fail_drv(c, r, "cuMemUnmap", size);
  r = c->drv->MemRelease((CUmemGenericAllocationHandle)h);
  if (r != CUDA_SUCCESS) return fail_drv(c, r, "cuMemRelease", size);
  return SIM_OK;
}

static int cd_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  cudart_dev *c = ctx;
  (void)stream;
  if (size == 0 || size % c->granularity || addr % c->granularity) {
    char b[32], g[32];
    if (!c->failed)
      snprintf(c->err, sizeof c->err,
               "cannot map %s at 0x%llx on GPU %d: the driver maps whole multiples of its granularity (%s)",
               report_bytes(b, sizeof b, size), (unsigned long long)addr, c->ordinal,
               report_bytes(g, sizeof g, c->granularity));
    c->failed = 1;
    return SIM_EINVAL;
  }
  if (select_gpu(c)) return SIM_EDEVICE;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = c->ordinal;
  CUmemGenericAllocationHandle h;
  CUresult r = c->drv->MemCreate(&h, size, &prop, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return SIM_EOOM;
  if (r != CUDA_SUCCESS) return fail_drv(c, r, "cuMemCreate", size);
  r = c->drv->MemMap((CUdeviceptr)addr, size, 0, h, 0);
  if (r != CUDA_SUCCESS) {
    c->drv->MemRelease(h);
    return fail_drv(c, r, "cuMemMap", size);
  }
  *sim_map_put(&c->maps, addr, NULL) = size;
  *sim_map_put(&c->handles, addr, NULL) = (uint64_t)h;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  r = c->drv->MemSetAccess((CUdeviceptr)addr, size, &access, 1);
  if (r != CUDA_SUCCESS) {
    unmap_one(c, addr, size);
    return fail_drv(c, r, "cuMemSetAccess", size);
  }
  if (sample(c)) return SIM_EDEVICE;
  if (over_capacity(c)) {
    if (unmap_one(c, addr, size)) return SIM_EDEVICE;
    return sample(c) ? SIM_EDEVICE : SIM_EOOM;
  }
  return SIM_OK;
}

static int cd_unmap(void *ctx, uint64_t addr, uint64_t size) {
  cudart_dev *c = ctx;
  if (select_gpu(c)) return SIM_EDEVICE;
  for (uint64_t at = addr; at < addr + size;) {
    uint64_t *len = sim_map_get(&c->maps, at);
    if (!len) {
      if (!c->failed)
        snprintf(c->err, sizeof c->err, "cannot unmap 0x%llx on GPU %d: no mapping starts there",
                 (unsigned long long)at, c->ordinal);
      c->failed = 1;
      return SIM_EINVAL;
    }
    uint64_t n = *len;
    if (unmap_one(c, at, n)) return SIM_EDEVICE;
    at += n;
  }
  return sample(c);
}

static const sim_device_ops cudart_ops = {
  .size = sizeof(sim_device_ops),
  .malloc = cd_malloc,
  .free = cd_free,
  .reserve = cd_reserve,
  .unreserve = cd_unreserve,
  .map = cd_map,
  .unmap = cd_unmap,
};

int cudart_device_init(sim_device *d, const cudart_driver *drv, int ordinal, uint64_t capacity, uint64_t base_free,
                       char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  cudaError_t e = cudaSetDevice(ordinal);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot select GPU %d (cudaSetDevice)", ordinal);
  struct cudaDeviceProp p;
  e = cudaGetDeviceProperties(&p, ordinal);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot read the properties of GPU %d", ordinal);
  size_t f = 0, t = 0;
  e = cudaMemGetInfo(&f, &t);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot read the free memory of GPU %d (cudaMemGetInfo)", ordinal);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  size_t gran = 0;
  CUresult r = drv->MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || gran == 0) gran = (size_t)2 << 20; /* no VMM on this GPU: map calls will fail loudly */
  cudart_dev *c = sim_xcalloc(1, sizeof *c);
  c->dev = d;
  c->drv = drv;
  c->ordinal = ordinal;
  c->base_free = base_free ? base_free : f;
  c->granularity = gran;
  c->samples = 1;
  sim_map_init(&c->mallocs);
  sim_map_init(&c->reserved);
  sim_map_init(&c->maps);
  sim_map_init(&c->handles);
  d->ops = &cudart_ops;
  d->ctx = c;
  d->total_memory = t;
  d->free_memory = f;
  d->capacity = capacity;
  d->cc_major = p.major;
  d->cc_minor = p.minor;
  d->used = d->used_peak = f < c->base_free ? c->base_free - f : 0;
  return 0;
}

void cudart_device_release(sim_device *d) {
  cudart_dev *c = d->ctx;
  if (!c) return;
  /* Give back whatever the model still holds: mappings, then reservations, then mallocs. */
  if (cudaSetDevice(c->ordinal) == cudaSuccess) {
    size_t it = 0;
    uint64_t k, v;
    while (sim_map_next(&c->maps, &it, &k, &v)) {
      uint64_t *hp = sim_map_get(&c->handles, k), h = hp ? *hp : 0;
      c->drv->MemUnmap((CUdeviceptr)k, v);
      c->drv->MemRelease((CUmemGenericAllocationHandle)h);
    }
    it = 0;
    while (sim_map_next(&c->reserved, &it, &k, &v)) c->drv->MemAddressFree((CUdeviceptr)k, v);
    it = 0;
    while (sim_map_next(&c->mallocs, &it, &k, &v)) cudaFree((void *)(uintptr_t)k);
  }
  (void)cudaGetLastError();
  sim_map_release(&c->mallocs);
  sim_map_release(&c->reserved);
  sim_map_release(&c->maps);
  sim_map_release(&c->handles);
  free(c);
  d->ctx = NULL;
}

const char *cudart_device_error(const sim_device *d) {
  const cudart_dev *c = d->ctx;
  return c && c->failed ? c->err : NULL;
}

int cudart_device_sample(sim_device *d) {
  cudart_dev *c = d->ctx;
  if (select_gpu(c)) return -1;
  return sample(c) ? -1 : 0;
}

int cudart_device_ordinal(const sim_device *d) { return ((const cudart_dev *)d->ctx)->ordinal; }
uint64_t cudart_device_samples(const sim_device *d) { return ((const cudart_dev *)d->ctx)->samples; }
void cudart_device_set_owner(sim_device *d, void *owner) { ((cudart_dev *)d->ctx)->owner = owner; }
void *cudart_device_owner(const sim_device *d) { return ((const cudart_dev *)d->ctx)->owner; }

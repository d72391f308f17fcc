/* cudart.c: the real GPU through the CUDA runtime: probing, driver entry points, error text, the spin kernel. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudart_int.h"

const char *cudart_version_text(int v, char *buf, size_t n) {
  snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
  return buf;
}

int cudart_fail(char *err, size_t errlen, cudaError_t e, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(err, errlen, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  (void)cudaGetLastError();
  return -1;
}

int cudart_drv_fail(const cudart_driver *d, char *err, size_t errlen, CUresult r, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *name = NULL, *text = NULL;
  if (d && d->GetErrorName) d->GetErrorName(r, &name);
  if (d && d->GetErrorString) d->GetErrorString(r, &text);
  if (name && text) snprintf(err, errlen, "%s: %s (%s)", what, text, name);
  else snprintf(err, errlen, "%s: CUDA driver error %d", what, (int)r);
  return -1;
}

/* ---- probing ------------------------------------------------------------------------------ */

int cudart_probe(cudart_info *info, char *err, size_t errlen) {
  memset(info, 0, sizeof *info);
  char a[16], b[16];
  cudaRuntimeGetVersion(&info->runtime_version);
  /* cudaDriverGetVersion answers 0 when libcuda.so.1 cannot be loaded at all. */
  if (cudaDriverGetVersion(&info->driver_version) != cudaSuccess || info->driver_version == 0) {
    (void)cudaGetLastError();
    snprintf(err, errlen,
             "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded): this command needs a GPU and its "
             "driver");
    return -1;
  }
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaErrorInsufficientDriver || (e == cudaSuccess && info->driver_version < info->runtime_version)) {
    (void)cudaGetLastError();
    snprintf(err, errlen,
             "the NVIDIA driver supports CUDA %s, older than the CUDA %s runtime this memplay was built with: "
             "update the driver",
             cudart_version_text(info->driver_version, a, sizeof a),
             cudart_version_text(info->runtime_version, b, sizeof b));
    return -1;
  }
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
    (void)cudaGetLastError();
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(err, errlen, "no CUDA-capable GPU is visible (the driver, CUDA %s, reports none%s%s%s)",
             cudart_version_text(info->driver_version, a, sizeof a), vis ? " with CUDA_VISIBLE_DEVICES='" : "",
             vis ? vis : "", vis ? "'" : "");
    return -1;
  }
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot count the GPUs (cudaGetDeviceCount)");
  if (n > CUDART_MAX_GPUS) n = CUDART_MAX_GPUS;
  cudart_driver drv;
  int have_drv = cudart_driver_load(&drv, a, sizeof a) == 0;
  for (int i = 0; i < n; i++) {
    cudart_gpu *g = &info->gpus[i];
    struct cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, i);
    if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot read the properties of GPU %d (cudaGetDeviceProperties)", i);
    g->index = i;
    snprintf(g->name, sizeof g->name, "%s", p.name);
    g->total_memory = p.totalGlobalMem;
    g->cc_major = p.major;
    g->cc_minor = p.minor;
    g->sms = p.multiProcessorCount;
    g->copy_engines = p.asyncEngineCount;
    g->concurrent_managed = p.concurrentManagedAccess;
    g->memory_pools = p.memoryPoolsSupported;
    if (cudaDeviceGetPCIBusId(g->pci_bus_id, (int)sizeof g->pci_bus_id, i) != cudaSuccess) {
      (void)cudaGetLastError();
      g->pci_bus_id[0] = 0;
    }
    if (cudaDeviceGetAttribute(&g->clock_khz, cudaDevAttrClockRate, i) != cudaSuccess) {
      (void)cudaGetLastError();
      g->clock_khz = 0;
    }
    int vmm = 0;
    if (have_drv && drv.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, i) != CUDA_SUCCESS)
      vmm = 0;
    g->vmm = vmm;
  }
  info->ngpus = n;
  return 0;
}

int cudart_mem_info(int index, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen) {
  cudaError_t e = cudaSetDevice(index);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot select GPU %d (cudaSetDevice)", index);
  size_t f = 0, t = 0;
  e = cudaMemGetInfo(&f, &t);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot read the free memory of GPU %d (cudaMemGetInfo)", index);
  *free_bytes = f;
  *total_bytes = t;
  return 0;
}

/* ---- driver entry points -------------------------------------------------------------------- */

static int entry(const char *sym, void **fn, char *err, size_t errlen) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(sym, fn, CUDA_VERSION, cudaEnableDefault, &q);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot find the driver function %s", sym);
  if (q != cudaDriverEntryPointSuccess || !*fn) {
    snprintf(err, errlen, "the NVIDIA driver has no %s for CUDA %d.%d: update the driver", sym, CUDA_VERSION / 1000,
             (CUDA_VERSION % 1000) / 10);
    return -1;
  }
  return 0;
}

int cudart_driver_load(cudart_driver *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
#define ENTRY(field, sym) \
  if (entry(sym, (void **)&d->field, err, errlen)) return -1;
  ENTRY(GetErrorName, "cuGetErrorName")
  ENTRY(GetErrorString, "cuGetErrorString")
  ENTRY(DeviceGetAttribute, "cuDeviceGetAttribute")
  ENTRY(MemGetAllocationGranularity, "cuMemGetAllocationGranularity")
  ENTRY(MemAddressReserve, "cuMemAddressReserve")
  ENTRY(MemAddressFree, "cuMemAddressFree")
  ENTRY(MemCreate, "cuMemCreate")
  ENTRY(MemRelease, "cuMemRelease")
  ENTRY(MemMap, "cuMemMap")
  ENTRY(MemUnmap, "cuMemUnmap")
  ENTRY(MemSetAccess, "cuMemSetAccess")
  ENTRY(ModuleLoadData, "cuModuleLoadData")
  ENTRY(ModuleUnload, "cuModuleUnload")
  ENTRY(ModuleGetFunction, "cuModuleGetFunction")
  ENTRY(LaunchKernel, "cuLaunchKernel")
#undef ENTRY
  return 0;
}

/* ---- the spin kernel ------------------------------------------------------------------------ */

int cudart_spin_load(const cudart_driver *d, cudart_spin *s, int sms, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  /* The runtime makes the primary context current on first use; cudaFree(0) forces that. */
  cudaError_t e = cudaFree(0);
  if (e != cudaSuccess) return cudart_fail(err, errlen, e, "cannot initialise the GPU (cudaFree(0))");
  CUresult r = d->ModuleLoadData(&s->module, cudart_spin_ptx);
  if (r != CUDA_SUCCESS) return cudart_drv_fail(d, err, errlen, r, "cannot load the spin kernel (cuModuleLoadData)");
  r = d->ModuleGetFunction(&s->fn, s->module, "memplay_spin");
  if (r != CUDA_SUCCESS) {
    d->ModuleUnload(s->module);
    s->module = NULL;
    return cudart_drv_fail(d, err, errlen, r, "cannot find the spin kernel (cuModuleGetFunction)");
  }
  s->grid = sms > 0 ? (unsigned)sms : 1;
  return 0;
}

int cudart_spin_launch(const cudart_driver *d, const cudart_spin *s, cudaStream_t stream, uint64_t ns, char *err,
                       size_t errlen) {
  unsigned long long v = ns;
  void *params[] = {&v};
  CUresult r = d->LaunchKernel(s->fn, s->grid, 1, 1, 1, 1, 1, 0, (CUstream)stream, params, NULL);
  if (r != CUDA_SUCCESS) return cudart_drv_fail(d, err, errlen, r, "cuLaunchKernel of the spin kernel (%llu ns)", v);
  return 0;
}

void cudart_spin_unload(const cudart_driver *d, cudart_spin *s) {
  if (s->module) d->ModuleUnload(s->module);
  memset(s, 0, sizeof *s);
}

/* cudart_int.h: private to the real-GPU parts: driver entry points, error text, the spin kernel, the device primitive. */
#ifndef REPLAY_CUDART_INT_H
#define REPLAY_CUDART_INT_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/allocator.h"
#include "cudart.h"
#include "engine/report.h"

/*
 * The driver functions memplay needs, fetched through cudaGetDriverEntryPointByVersion so that
 * the binary never links libcuda: it loads (through the static runtime) only when a GPU
 * command runs.
 */
typedef struct cudart_driver {
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
  CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemAddressFree)(CUdeviceptr, size_t);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*MemUnmap)(CUdeviceptr, size_t);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **, void **);
} cudart_driver;

/* Fills d; returns 0, or -1 with a message naming the entry point that is missing. */
int cudart_driver_load(cudart_driver *d, char *err, size_t errlen);

/*
 * Error text. Each writes "<what>: <description> (<name>)" into err, clears the runtime's
 * last error, and returns -1, so a caller writes `return cudart_fail(...)`. `what` names the
 * call and its subject ("cudaMalloc of 2.00 MiB on GPU 0").
 */
int cudart_fail(char *err, size_t errlen, cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int cudart_drv_fail(const cudart_driver *d, char *err, size_t errlen, CUresult r, const char *fmt, ...)
  __attribute__((format(printf, 5, 6)));

/* ---- the stand-in kernel: holds the device for a given time (spin.ptx) --------------------- */
extern const char cudart_spin_ptx[];

typedef struct cudart_spin {
  CUmodule module;
  CUfunction fn;
  unsigned grid; /* one block per multiprocessor */
} cudart_spin;

/* Loads the kernel into the current device's primary context (the driver compiles the PTX). */
int cudart_spin_load(const cudart_driver *d, cudart_spin *s, int sms, char *err, size_t errlen);
/* Launches it on stream for ns nanoseconds (0: returns at once: the launch cost alone). */
int cudart_spin_launch(const cudart_driver *d, const cudart_spin *s, cudaStream_t stream, uint64_t ns, char *err,
                       size_t errlen);
void cudart_spin_unload(const cudart_driver *d, cudart_spin *s);

/* ---- the device primitive over the real driver (cudart_device.c) --------------------------- */

/*
 * Makes d the real GPU `ordinal`: malloc/free are cudaMalloc/cudaFree, reserve/unreserve
 * cuMemAddressReserve/cuMemAddressFree, map/unmap cuMemCreate+cuMemMap+cuMemSetAccess and
 * cuMemUnmap+cuMemRelease. After every call that can change it, the device's memory in use is
 * read back (cudaMemGetInfo) into d->used: the bytes the process took since init, as the
 * driver counts them (base_free: the free memory to count from; 0: the free memory now). `capacity` (UINT64_MAX: none) caps that: a call that takes more is
 * undone and answered SIM_EOOM, so a smaller card can be emulated on a larger one. A failure
 * other than out-of-memory is answered SIM_EDEVICE and kept: cudart_device_error says which
 * call failed and why; everything still allocated is given back at release.
 */
int cudart_device_init(sim_device *d, const cudart_driver *drv, int ordinal, uint64_t capacity, uint64_t base_free,
                       char *err, size_t errlen);
void cudart_device_release(sim_device *d);
/* The first failure of a device call (NULL when none), and whether it happened. */
const char *cudart_device_error(const sim_device *d);
/* Reads the memory in use now into d->used (for points where the program did not call the
 * driver: after synchronizations, at planned peaks). Returns 0 or -1 (cudart_device_error). */
int cudart_device_sample(sim_device *d);
/* The GPU ordinal of a cudart device. */
int cudart_device_ordinal(const sim_device *d);
/* Calls to cudaMemGetInfo so far. */
uint64_t cudart_device_samples(const sim_device *d);
/* An owner pointer the backend keeps beside the device (the stream table). */
void cudart_device_set_owner(sim_device *d, void *owner);
void *cudart_device_owner(const sim_device *d);

#endif

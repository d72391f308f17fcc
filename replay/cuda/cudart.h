/* cudart.h: what the rest of memplay may ask of the real GPU: is there one, and what is it (built only with CUDA). */
#ifndef REPLAY_CUDART_H
#define REPLAY_CUDART_H

#include <stddef.h>
#include <stdint.h>

/*
 * The real-GPU parts (this header, cudart*.c, backend_cuda.c, calibrate_cuda.c) are compiled
 * only when CMake finds the CUDA toolkit; they then define MEMPLAY_HAVE_CUDA for the command.
 * They link the CUDA runtime statically and reach the driver through the runtime's entry-point
 * query, so a memplay built with them still starts, and runs everything else, on a machine with
 * no NVIDIA driver: only the commands that need the GPU say that there is none.
 */

#define CUDART_MAX_GPUS 64

typedef struct cudart_gpu {
  int index;               /* CUDA device ordinal (after CUDA_VISIBLE_DEVICES) */
  char name[256];          /* "NVIDIA H100 80GB HBM3" */
  char pci_bus_id[32];     /* "0000:17:00.0" */
  uint64_t total_memory;   /* totalGlobalMem, bytes */
  int cc_major, cc_minor;  /* compute capability */
  int sms;                 /* multiprocessors */
  int copy_engines;        /* asyncEngineCount: copies that can run beside kernels */
  int concurrent_managed;  /* concurrentManagedAccess */
  int memory_pools;        /* memoryPoolsSupported: cudaMallocAsync works */
  int vmm;                 /* virtual memory management (cuMemCreate/cuMemMap) supported */
  int clock_khz;           /* SM clock, kHz (0 when the runtime no longer reports it) */
} cudart_gpu;

typedef struct cudart_info {
  int driver_version;  /* CUDA version the driver supports, e.g. 13000; 0: no driver */
  int runtime_version; /* the runtime memplay was built with, e.g. 13000 */
  int ngpus;
  cudart_gpu gpus[CUDART_MAX_GPUS];
} cudart_info;

/*
 * Looks for the driver and the GPUs. Returns 0 with at least one GPU, or -1 with a message
 * that says plainly what is missing: no NVIDIA driver, a driver too old for this runtime, or
 * no visible GPU. Creates no context.
 */
int cudart_probe(cudart_info *info, char *err, size_t errlen);

/* Free and total memory of GPU `index` (cudaMemGetInfo; creates its primary context). */
int cudart_mem_info(int index, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen);

/* "13.0" from 13000. */
const char *cudart_version_text(int v, char *buf, size_t n);

#endif

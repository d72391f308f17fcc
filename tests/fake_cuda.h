/* fake_cuda.h: controlling the pretend GPU of fake_cuda.c from a test. */
#ifndef TESTS_FAKE_CUDA_H
#define TESTS_FAKE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#define FAKE_CUDA_COPY_LOG 64

typedef struct fake_cuda_counts {
  int64_t mallocs, frees, host_allocs, copies, memsets, kernels, syncs, streams, modules;
  uint64_t copy_bytes, kernel_ns, mem_get_info;
  int64_t latest_end; /* ns, host clock: when the last kernel or copy ends */
  uint64_t copy_sizes[FAKE_CUDA_COPY_LOG]; /* the sizes of the first copies, in the order made */
} fake_cuda_counts;

/* ngpus GPUs of `memory` bytes each, nothing allocated. */
void fake_cuda_setup(int ngpus, uint64_t memory);
void fake_cuda_reset(void);
/* As if libcuda.so.1 could not be loaded. */
void fake_cuda_no_driver(int on);
/* The nth call (from 1) of the runtime or driver function `name` fails (illegal address). */
void fake_cuda_fail(const char *name, int nth);
const fake_cuda_counts *fake_cuda_counts_get(void);
/* Device memory in use on a GPU, and the allocations, reservations and mappings still live. */
uint64_t fake_cuda_used(int gpu);
size_t fake_cuda_live(int gpu);

#endif

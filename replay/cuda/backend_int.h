/* backend_int.h: what the files of the cuda backend share (not for other modules). */
#ifndef REPLAY_CUDA_BACKEND_INT_H
#define REPLAY_CUDA_BACKEND_INT_H

#include "backend_cuda.h"
#include "cudart_int.h"
#include "sim/hashmap.h"

struct backend_pool;

typedef struct bgpu {
  int open;
  cudart_spin spin;
  void *scratch;
  uint64_t scratch_size;
  uint64_t base_free, total;
  sim_map streams; /* recorded stream -> index in list */
  cudaStream_t *list;
  size_t nlist, caplist;
  sim_device *dev;         /* the engine's device on this GPU, once it has one */
  struct backend_pool *pool; /* the driver's stream-ordered pool, when that is the allocator */
} bgpu;

typedef struct brun {
  const backend_run_config *cfg;
  const backend_plan *plan;
  backend_measured *m;
  cudart_driver drv;
  cudart_info info;
  bgpu gpus[REPLAY_MAX_DEVICES];
  void *pinned, *pageable;
  sim_map host;            /* recorded host address -> pointer */
  sim_map host_pinned;     /* recorded host address -> 1 when pinned */
  /* the source wrapper */
  replay_source inner;
  backend_stepper stepper;
  size_t step;             /* index of the step under way + 1 (0: none yet) */
  int64_t t0, step_t0, first_ts;
  int64_t prev_end_ts;     /* --pace=gaps: the recorded end of the previous event's call */
  int64_t seq;             /* the event being performed */
  int failed;
  char err[1024];
} brun;

/* Records the run's first failure, prefixed with the event it served. Returns -1. */
int backend_run_fail(brun *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0 when e is cudaSuccess; else backend_run_fail with the call (fmt) and CUDA's words for e. */
int backend_rt_check(brun *r, cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* cudaSetDevice(d), checked. */
int backend_use_gpu(brun *r, int d);
/* The CUDA stream of recorded stream s on GPU d (NULL, the legacy default stream, for s <= 0),
 * made non-blocking on first use. 0 or -1. */
int backend_stream_of(brun *r, int d, int64_t s, cudaStream_t *out);

/* driver_pool.c: reads the pool's reserved and used bytes after a call that may change them. */
int backend_pool_refresh(struct backend_pool *p);

#endif

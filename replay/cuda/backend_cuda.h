/* backend_cuda.h: replaying a trace on a real GPU: the plan made on the CPU first, then the run on the device. */
#ifndef REPLAY_BACKEND_CUDA_H
#define REPLAY_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/source.h"
#include "session/session.h"
#include "sim/allocator.h"

/*
 * `memplay replay TRACE --backend cuda` runs in two stages.
 *
 * 1. The plan (backend_plan.c, plain C, no CUDA): the trace is replayed in simulation through
 *    the same allocator and options, on simulated devices that report each GPU's real total and
 *    free memory. That gives the prediction the measurements are compared with, and what the
 *    run will need: the device memory the model will take at its peak, the copy buffers, the
 *    step boundaries, the recorded times. A trace whose needs exceed what a GPU has free is
 *    refused here, before anything is allocated on it, unless sizes are scaled down.
 * 2. The run (backend_cuda.c, CUDA): the same events again, through the engine with the real
 *    device primitive (cudart_device.c), plus every copy, memset, kernel and synchronization
 *    performed on the GPU, timed, with the device's memory in use read as it changes.
 */

/* Copies and memsets larger than this go through the copy buffers in pieces of this size. */
#define BACKEND_CHUNK (UINT64_C(256) << 20)
/* Free memory left untouched on every GPU (for the driver's own needs while the replay runs). */
#define BACKEND_MARGIN (UINT64_C(256) << 20)
/* `--scale fit` tries at most this many factors. */
#define BACKEND_FIT_TRIES 16

/* A size multiplied by a scale factor: rounded to the nearest byte, never 0 when size is not. */
uint64_t backend_scale_size(uint64_t size, double factor);
/* The free memory a plan may use on a GPU with free_memory free. */
uint64_t backend_budget(uint64_t free_memory);

/* An event source that multiplies every size (allocations, copies, memsets, host allocations,
 * frees) by `factor`. It owns `inner` and closes it. */
typedef struct backend_scaled {
  replay_source inner;
  double factor;
} backend_scaled;
replay_source backend_scaled_source(backend_scaled *s, replay_source inner, double factor);

/* Step boundaries, decided the same way for the recorded trace and for the run: markers that
 * begin a step when the trace has them, else a change of the events' step field; the first
 * event always opens the first step. */
typedef struct backend_stepper {
  int started, by_marker;
  int32_t cur;
} backend_stepper;
/* 1 when ev opens a step. */
int backend_step_opens(backend_stepper *s, const sim_event *ev);

typedef struct backend_step {
  int64_t seq;  /* its first event */
  int64_t ts;   /* recorded host time of that event, ns */
  int32_t step; /* the trace's step number, -1 when it has none */
} backend_step;

/* The device memory in use the prediction gives after an event (changes only). */
typedef struct backend_usage {
  int64_t seq;
  uint64_t used;
} backend_usage;

typedef struct backend_plan_config {
  session *ses;
  session_run *run;             /* prepared by the session: the model that predicts (and, for models, places
                                   on the GPU), its options and recorded settings, the capacity (--capacity,
                                   UINT64_MAX: none); each pass executes it */
  double scale;                 /* > 0: this factor; 0: the largest factor up to 1 that fits */
  /* Opens the trace's events (called once per simulated pass). */
  int (*open)(void *arg, replay_source *src, char *err, size_t errlen);
  void *open_arg;
  /* Free and total memory of GPU `device`; -1 with a message when there is no such GPU. */
  int (*gpu_memory)(void *arg, int device, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen);
  void *gpu_arg;
  const sim_device_watch *watch; /* told of every device call of every simulated pass (NULL: none) */
} backend_plan_config;

typedef struct backend_gpu_plan {
  int used;                     /* the trace has events on this device */
  uint64_t free_memory, total_memory, budget;
  uint64_t predicted_peak;      /* device memory the model takes at most (as the driver counts it) */
  int64_t predicted_peak_seq;
  uint64_t scratch;             /* device copy buffer */
  uint64_t need;                /* min(predicted_peak, capacity) + scratch */
} backend_gpu_plan;

typedef struct backend_plan {
  double scale;                 /* the factor the run will use */
  int fitted;                   /* the factor was chosen by --scale fit */
  int fits;                     /* every GPU has room for it */
  char why[768];                /* when it does not: what, where, and what to do */
  int ngpus;                    /* highest device index used + 1 */
  backend_gpu_plan gpus[REPLAY_MAX_DEVICES];
  uint64_t pinned_staging, pageable_staging; /* host copy buffers */
  uint64_t kernels, copies, memsets, syncs, host_allocs, skipped; /* events the run performs */
  int takes_device_memory;      /* the model took memory from the device (ideal does not) */
  int64_t first_ts, last_ts;    /* recorded */
  backend_step *steps;
  size_t nsteps;
  replay_result predicted;      /* the engine's result in simulation, at `scale` */
  uint64_t predicted_device_peak; /* total over GPUs */
  int64_t predicted_device_peak_seq;
  uint64_t predicted_at_requested_peak; /* at predicted.peak_requested_seq: the trace's own peak */
  backend_usage *usage;
  size_t nusage;
} backend_plan;

/* Makes the plan (one simulated pass, more for --scale fit). Returns 0 (look at p->fits), or -1
 * with a message when the trace cannot be read or the model cannot be created. */
int backend_plan_make(const backend_plan_config *cfg, backend_plan *p, char *err, size_t errlen);
void backend_plan_release(backend_plan *p);
/* Predicted device memory in use (total over GPUs) right after event seq. */
uint64_t backend_plan_used_at(const backend_plan *p, int64_t seq);

/* ---- the run on the GPU (backend_cuda.c: only in builds with CUDA) ------------------------- */

/* --pace: none; CLOCK, each event issued no earlier than its recorded time after the first; GAPS,
 * no earlier than the previous call's return plus the recorded time between that call's end and
 * this event (the host's own work between calls kept, as the time model keeps it). */
enum { BACKEND_PACE_NONE, BACKEND_PACE_CLOCK, BACKEND_PACE_GAPS };

typedef struct backend_run_config {
  session *ses;
  session_run *run;             /* the plan's run: a model places blocks in segments it takes on the GPU; a
                                   model with SIM_ALLOC_DRIVER_POOL is replaced by the driver's own pool,
                                   given the model's options */
  int pace;                     /* BACKEND_PACE_*: how events wait for their recorded host times */
  int (*open)(void *arg, replay_source *src, char *err, size_t errlen);
  void *open_arg;
  const sim_device_watch *watch; /* told of every call the model makes to the GPU (NULL: none) */
} backend_run_config;

typedef struct backend_measured {
  double wall_s;                /* first event to the end of the final synchronization */
  double *step_s;               /* per step of the plan, seconds */
  size_t nsteps;
  uint64_t peak_used;           /* most device memory in use at any sample, total over GPUs */
  int64_t peak_used_seq;
  uint64_t at_requested_peak;   /* in use right after the plan's peak_requested_seq */
  uint64_t at_predicted_peak;   /* in use right after the plan's predicted_device_peak_seq */
  uint64_t samples;             /* cudaMemGetInfo readings */
  uint64_t kernels, copies, memsets, syncs, host_allocs, chunks;
  int paced;                    /* --pace: BACKEND_PACE_CLOCK or _GAPS (0: not paced) */
  double pace_wait_s;           /* time spent waiting for recorded host times (--pace) */
  replay_result engine;         /* the model's own view of the run (allocated, reserved, OOMs) */
  char gpu_names[256];          /* "NVIDIA H100 80GB HBM3 (GPU 0)" */
} backend_measured;

/*
 * Runs the planned trace on the GPUs. The plan must fit (backend_plan_make said so). Returns 0,
 * or -1 with a message naming the CUDA call that failed and the event it served.
 */
int backend_cuda_run(const backend_run_config *cfg, const backend_plan *plan, backend_measured *m, char *err,
                     size_t errlen);
void backend_measured_release(backend_measured *m);

/* The real stream-ordered pool as an allocator (its options, for --allocator async:...). */
extern const sim_allocator_ops backend_pool_ops;
/* Whether the run on the GPU uses the driver's own pool rather than the model. */
int backend_uses_driver_pool(const session_run *run);

#endif

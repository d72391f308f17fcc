/* timemodel.h: the time model: a discrete-event simulation of the host thread, the device's streams and copy engines. */
#ifndef SIM_TIMEMODEL_H
#define SIM_TIMEMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "devices.h"
#include "event.h"

/*
 * Feed it every event of a trace in recorded order (the replay engine does, as an observer),
 * with what the allocator model did while handling the event; it predicts when each thing
 * happens on a device described by a profile, the time of each step, and what the end time
 * depends on. docs/timemodel.md states the model and every assumption; in short:
 *  - the host runs the program's own code between API calls as recorded; a call whose
 *    predicted duration differs from its recorded one moves everything the host does after
 *    it returns;
 *  - kernels and memsets run in order on their stream, for their recorded duration (or one a
 *    scenario sets); streams overlap freely;
 *  - copies take bytes / bandwidth for their direction and host memory kind plus a fixed
 *    latency (or their recorded duration, when asked); host<->device copies need a copy
 *    engine and the host link of their direction; pageable copies are staged through a
 *    bounded pinned buffer by the host, in chunks, and block it;
 *  - cudaMalloc/cudaFree cost time by size and wait for the device; cuMemMap/unmap cost time;
 *    allocations the allocator served from its cache cost nothing; cudaMallocHost costs time
 *    by size;
 *  - a synchronization waits for the streams it names;
 *  - device waits that the trace records but cannot explain (another process, a peer GPU, an
 *    event it did not record) are kept: the operation starts that long after it could.
 */

/* Where predicted time goes (on the critical path). */
enum {
  SIM_TM_HOST,    /* the program's own code between calls, and the calls' own overhead */
  SIM_TM_COMPUTE, /* kernels and memsets */
  SIM_TM_COPY,    /* copies: transfers and the host's staging of pageable memory */
  SIM_TM_ALLOC,   /* cudaMalloc/cudaFree/cuMemMap/cuMemUnmap/cudaMallocHost/cudaFreeHost */
  SIM_TM_SYNC,    /* synchronization and latency: wake-ups, launch latency, device waits */
  SIM_TM__NCLASS
};
const char *sim_tm_class_name(int cls);

/* What an item on the critical path is. */
enum {
  SIM_TM_W_KERNEL,
  SIM_TM_W_MEMSET,
  SIM_TM_W_COPY,        /* a transfer (dir, mem) */
  SIM_TM_W_STAGING,     /* the host copying pageable memory through the staging buffer (dir, mem) */
  SIM_TM_W_MALLOC,      /* cudaMalloc */
  SIM_TM_W_FREE,        /* cudaFree */
  SIM_TM_W_MAP,         /* cuMemCreate + cuMemMap */
  SIM_TM_W_UNMAP,       /* cuMemUnmap + cuMemRelease */
  SIM_TM_W_PIN,         /* cudaMallocHost */
  SIM_TM_W_UNPIN,       /* cudaFreeHost */
  SIM_TM_W_SYNC,        /* a synchronization call's wake-up (name: the call) */
  SIM_TM_W_LAUNCH,      /* from a launch to the start of its work */
  SIM_TM_W_DEVICE_WAIT, /* a device operation waiting for something the trace does not show */
  SIM_TM_W_HOST,        /* the program's code between API calls */
  SIM_TM_W_CALL,        /* a call's own host time (kind: the event kind; name: for api events) */
  SIM_TM__NWHAT
};
const char *sim_tm_what_name(int what);

/* A duration a scenario sets for a device operation (ns), or < 0 to keep the model's. */
typedef int64_t (*sim_tm_duration_fn)(void *arg, const sim_event *ev);

/* Copies: RECORDED their recorded durations; MODEL the trace's own copies fitted where the
 * caller gives a fit (copy_fit), else the profile's bandwidths; PROFILE always the profile's. */
enum { SIM_TM_TIMING_RECORDED = 0, SIM_TM_TIMING_MODEL = 1, SIM_TM_TIMING_PROFILE = 2 };

/*
 * What bounds a kernel's time, for scaling it from the device a trace was recorded on to
 * another (docs/timemodel.md, "Another device"): KEEP (short kernels, communication: kept as
 * recorded), tensor-core math in 16 bits or TF32, math on the CUDA cores (fp32), memory.
 */
enum { SIM_TM_KB_KEEP = 0, SIM_TM_KB_COMPUTE16, SIM_TM_KB_TF32, SIM_TM_KB_FP32, SIM_TM_KB_MEMORY, SIM_TM__NKB };
const char *sim_tm_bound_name(int bound);
/* Kernels shorter than this are bound by their launch and a few waves, not by a rate: kept. */
#define SIM_TM_SHORT_KERNEL_NS 5000
/* A kernel's bound (SIM_TM_KB_*) from its name and recorded duration. */
typedef int (*sim_tm_kernel_bound_fn)(void *arg, const sim_event *ev);
/* Which bound scales the kernels: each its own (the prediction), or each the faster or the
 * slower of its two candidates, its compute rate (its class's, or the CUDA cores' for a
 * memory-bound one) and the memory bandwidth: the range printed beside the prediction. */
enum { SIM_TM_SCALE_CLASSIFIED = 0, SIM_TM_SCALE_FASTEST = 1, SIM_TM_SCALE_SLOWEST = 2 };
struct sim_copy_fit;

typedef struct sim_tm_config {
  const sim_device_profile *device; /* required; copied */
  /* Copies: RECORDED takes a copy's recorded duration when it has one (replaying the trace on
   * the device it was recorded on), MODEL always uses the profile's bandwidths. */
  int copy_timing;
  /* Device waits the trace cannot explain are kept (1, default) or dropped (0: the model
   * alone decides when each operation starts). */
  int keep_device_waits;
  int infer_dependencies;  /* infer cross-stream dependencies from recorded device times (1) */
  int malloc_syncs;        /* cudaMalloc/cudaFree wait for the device (1); 0 for pool allocators */
  double kernel_scale;     /* multiplies recorded kernel durations (0: 1) */
  sim_tm_duration_fn duration; /* may be NULL */
  void *duration_arg;
  int64_t batch_size;      /* samples per step (0: unknown) */
  size_t top_items;        /* largest critical-path items to report (0: 10) */
  /* The device the trace was recorded on (NULL: unknown; copied). When it is not `device`,
   * recorded kernel and memset durations are scaled from it by what bounds each kernel. */
  const sim_device_profile *recorded_device;
  sim_tm_kernel_bound_fn kernel_bound; /* NULL: every kernel memory-bound */
  void *kernel_bound_arg;
  int scale_policy;        /* SIM_TM_SCALE_* */
  int kernels_as_recorded; /* 1: never scale kernels to another device (a GPU replay spins for the recorded times) */
  /* Copy times fitted from the trace's own copies (copyfit.h), used instead of the profile's
   * bandwidths where a class has a fit; NULL none. Borrowed: must outlive the model. */
  const struct sim_copy_fit *copy_fit;
  /* How many events the model will be given, when known (0: unknown). A replay long enough to
   * write the whole ring of recent operations gets the ring in huge pages (sim_xmalloc_huge); a
   * short one touches only the small pages it writes. Predictions do not depend on it. */
  int64_t events_hint;
} sim_tm_config;

/* What the allocator did while the replay handled the event (replay_outcome's counts). */
typedef struct sim_tm_alloc {
  uint64_t mallocs, frees, maps, unmaps;
  uint64_t malloc_bytes, free_bytes, map_bytes, unmap_bytes;
} sim_tm_alloc;

/* How the time model should read an event beyond its kind. */
enum {
  SIM_TM_ROLE_NONE = 0,
  /* A recorded driver call of the allocator that recorded the trace (cudaMalloc, cudaFree,
   * cuMemMap, ...): its time is replaced by the costs of the replayed allocator's own calls. */
  SIM_TM_ROLE_ALLOCATOR_CALL = 1,
};

typedef struct sim_tm_step {
  int32_t step;            /* the marker's step number, or its position */
  int64_t begin_seq, end_seq;
  int64_t start_ns, end_ns; /* predicted, on the trace's clock */
  int64_t recorded_ns;     /* recorded length, -1 unknown */
  int64_t breakdown[SIM_TM__NCLASS];
  int complete;            /* both ends seen */
} sim_tm_step;

typedef struct sim_tm_item {
  int cls, what, kind;     /* class, SIM_TM_W_*, event kind */
  uint8_t dir, mem;        /* copies */
  int64_t name;            /* the event's name id (kernel, api), 0 none */
  int64_t total_ns, count;
  int64_t max_ns, max_seq; /* the largest single occurrence */
} sim_tm_item;

/* Predicted copy times against recorded ones, by direction, host memory kind and size. */
enum { SIM_TM_CB_H2D_PINNED, SIM_TM_CB_H2D_PAGEABLE, SIM_TM_CB_D2H_PINNED, SIM_TM_CB_D2H_PAGEABLE, SIM_TM_CB_D2D,
       SIM_TM_CB_OTHER, SIM_TM__NCB };
#define SIM_TM_LARGE_COPY (UINT64_C(1) << 20) /* copies of at least 1 MiB are "large" */
typedef struct sim_tm_copy_stats {
  uint64_t n, bytes;
  int64_t recorded_ns, predicted_ns;
  double abs_rel_err_sum; /* sum of |predicted - recorded| / recorded */
} sim_tm_copy_stats;
const char *sim_tm_copy_bucket_name(int b);
/* The bucket (SIM_TM_CB_*) of a copy in direction dir (sim_copy_dir) from host memory mem. */
int sim_tm_copy_bucket(int dir, int mem);

typedef struct sim_tm_result {
  int64_t start_ns, end_ns, total_ns;     /* first host activity to the last host or device activity */
  int64_t breakdown[SIM_TM__NCLASS];      /* the critical path by class: sums to total_ns */
  /* Host time spent blocked, by cause (not a partition of anything). */
  int64_t blocked_sync_ns, blocked_copy_ns, blocked_alloc_ns, blocked_launch_ns;
  int64_t compute_busy_ns, copy_busy_ns;  /* device time in kernels/memsets, in copies */
  sim_tm_step *steps;
  size_t nsteps;
  size_t complete_steps;
  double step_time_s;          /* mean predicted time of complete steps, -1 none */
  double recorded_step_time_s; /* mean recorded time of the same steps, -1 unknown */
  double samples_per_s;        /* batch size / step_time_s, -1 unknown */
  sim_tm_item *items;          /* largest critical-path items, largest first */
  size_t nitems;
  sim_tm_copy_stats copies[SIM_TM__NCB][2]; /* [bucket][0: below 1 MiB, 1: large] */
  uint64_t kernels, memsets, copies_n, syncs, ops_without_duration;
  uint64_t device_mallocs, device_frees, device_maps, device_unmaps, host_pins;
  uint64_t inferred_dependencies, device_waits; /* device operations that waited on the inferred / unexplained */
  int64_t device_wait_ns;
  uint64_t launch_blocks;      /* launches that waited for room in the queue */
  /* Kernels scaled to another device: the ratio (recorded / target rate) of each bound, and
   * the kernels, recorded and predicted device time by bound. */
  int device_scaled;
  double bound_ratio[SIM_TM__NKB];
  uint64_t bound_kernels[SIM_TM__NKB];
  int64_t bound_recorded_ns[SIM_TM__NKB], bound_predicted_ns[SIM_TM__NKB];
  int copies_fitted;           /* copy times came from the trace's own copies */
  const struct sim_copy_fit *copy_fit; /* that fit (the config's, borrowed), when copies_fitted */
  /* The same prediction with every scaled kernel at the faster [0] and the slower [1] of its
   * compute and memory bounds (filled by whoever ran the two, when has_range). */
  int has_range;
  int64_t range_total_ns[2];
  double range_step_time_s[2];
  /* The model stopped at event stopped_seq (-1: at the end), a time of the trace or of its
   * prediction out of the range it follows (docs/timemodel.md), stopped_why says which: what
   * came after is not predicted, and the rest of the result is no answer. */
  int stopped;
  int64_t stopped_seq;
  char stopped_why[160];
} sim_tm_result;

typedef struct sim_tm sim_tm;

sim_tm *sim_tm_new(const sim_tm_config *cfg);
void sim_tm_free(sim_tm *tm);
/* One event, with what the allocator did for it (NULL: nothing) and its role. */
void sim_tm_event(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int role);
/* Ends the simulation and fills *res (release it with sim_tm_result_release). */
void sim_tm_finish(sim_tm *tm, sim_tm_result *res);
void sim_tm_result_release(sim_tm_result *res);

#endif

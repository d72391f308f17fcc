/* allocator.h: the interface every allocator model implements, and the device primitive models allocate from. */
#ifndef SIM_ALLOCATOR_H
#define SIM_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

/* Status codes shared by the device primitive and the models. */
enum {
  SIM_OK = 0,
  SIM_EOOM = 1,    /* does not fit */
  SIM_EINVAL = 2,  /* bad request, option or state */
  SIM_EDEVICE = 3, /* the device refused for another reason (a real GPU's error) */
};

#define SIM_ERRLEN 512

/* ------------------------------------------------------------------------------------------
 * The device primitive: the only way a model obtains or returns device memory.
 *
 * Every call is one driver operation. The simulated device (device_sim.c) enforces a capacity
 * and hands out addresses; `memplay validate` answers with the addresses a real trace recorded;
 * the real-GPU backend answers with real cudaMalloc/cuMemMap. Models never count device
 * operations themselves: the sim_device_* wrappers below do.
 * ------------------------------------------------------------------------------------------ */
typedef struct sim_device_ops {
  unsigned size; /* sizeof(sim_device_ops), for forward compatibility */
  /* cudaMalloc(size) on behalf of a pool of `stream`: SIM_OK and *addr, or SIM_EOOM. */
  int (*malloc)(void *ctx, uint64_t size, int64_t stream, uint64_t *addr);
  /* cudaFree of a whole earlier malloc. */
  int (*free)(void *ctx, uint64_t addr, uint64_t size);
  /* cuMemAddressReserve: address space only, no memory. */
  int (*reserve)(void *ctx, uint64_t size, uint64_t *addr);
  /* cuMemAddressFree of a whole reservation. */
  int (*unreserve)(void *ctx, uint64_t addr, uint64_t size);
  /* cuMemCreate + cuMemMap of [addr, addr+size) inside a reservation: takes memory. */
  int (*map)(void *ctx, uint64_t addr, uint64_t size, int64_t stream);
  /* cuMemUnmap + cuMemRelease of [addr, addr+size): gives memory back. */
  int (*unmap)(void *ctx, uint64_t addr, uint64_t size);
} sim_device_ops;

/* One call a model made to its device, as a watcher sees it (`replay --device-calls`). */
typedef struct sim_device_call {
  const char *op;                   /* "malloc", "free", "reserve", "unreserve", "map", "unmap" */
  uint64_t size, addr;              /* addr: the one given, or the one handed out (0 when refused) */
  int64_t stream;                   /* malloc and map; 0 for the others */
  int rc;                           /* SIM_OK, SIM_EOOM, ... */
  uint64_t used_before, used_after; /* the device's memory in use around the call */
} sim_device_call;

/* Told of every call through the sim_device_* wrappers, refused ones included. */
typedef struct sim_device_watch {
  void (*call)(void *arg, int device, uint64_t n, const sim_device_call *c); /* n: the device's nth call, from 1 */
  void *arg;
} sim_device_watch;

typedef struct sim_device {
  const sim_device_ops *ops;
  void *ctx;
  /* What the models may ask about the card (cudaGetDeviceProperties, cudaMemGetInfo at start). */
  uint64_t total_memory; /* totalGlobalMem */
  uint64_t free_memory;  /* free memory when the process started allocating */
  uint64_t capacity;     /* bytes this process may take before the device refuses */
  int cc_major, cc_minor;
  /* Counted by the wrappers: successful driver calls, and the bytes they moved. */
  uint64_t mallocs, frees, maps, unmaps;
  uint64_t malloc_bytes, free_bytes, map_bytes, unmap_bytes;
  /* Kept by the implementation: physical memory in use, as the driver takes it. */
  uint64_t used, used_peak;
  /* 1: its owner resets it next (a simulated device, sim_simdev_clearing), forgetting what it lent:
   * what a model hands back from now on goes nowhere, and a model's reset need not hand it back. */
  int clearing;
  const sim_device_watch *watch; /* NULL: nobody watches; set by whoever made the device, after it */
  int index;                     /* the trace's device number, for the watcher */
  uint64_t calls;                /* calls seen by the watcher */
} sim_device;

int sim_device_malloc(sim_device *d, uint64_t size, int64_t stream, uint64_t *addr);
int sim_device_free(sim_device *d, uint64_t addr, uint64_t size);
int sim_device_reserve(sim_device *d, uint64_t size, uint64_t *addr);
int sim_device_unreserve(sim_device *d, uint64_t addr, uint64_t size);
int sim_device_map(sim_device *d, uint64_t addr, uint64_t size, int64_t stream);
int sim_device_unmap(sim_device *d, uint64_t addr, uint64_t size);

/* ------------------------------------------------------------------------------------------
 * Options: a SPEC is `name` or `name:options`, options separated by commas, each `key:value`
 * (PYTORCH_CUDA_ALLOC_CONF syntax) or `key=value`. Brackets group: `[256:1,512:2]` is one value.
 * ------------------------------------------------------------------------------------------ */
typedef struct sim_option {
  const char *key;
  const char *value;
} sim_option;

typedef struct sim_option_spec {
  const char *name; /* accepted key */
  const char *help; /* one line: value syntax and meaning */
} sim_option_spec;

/* Allocator settings recorded in the trace, as options: each setting's name and its value as text
 * (replay/io/settings.h makes them from the JSON object a PyTorch snapshot holds, and says how
 * values are written). Valid while the model is created. */
typedef struct sim_recorded {
  const sim_option *opts; /* in the order recorded */
  size_t nopts;
  const char *error;      /* the recording could not be read: why (a model that would use it fails
                             with this message), else NULL */
} sim_recorded;

typedef struct sim_alloc_config {
  const sim_option *opts; /* options from the SPEC, in the order given */
  size_t nopts;
  /* The settings recorded in the trace, or NULL. A model uses them when the SPEC gives no
   * options of its own. */
  const sim_recorded *recorded;
  /* Environment lookup for the variables a real allocator reads (NULL: none). */
  const char *(*getenv)(const char *name);
} sim_alloc_config;

/* Value parsers for models; each returns 0, or -1 with a message in err. */
int sim_opt_bool(const sim_option *o, int *out, char *err, size_t errlen);
int sim_opt_int(const sim_option *o, int64_t *out, char *err, size_t errlen);
int sim_opt_double(const sim_option *o, double *out, char *err, size_t errlen);
int sim_opt_size(const sim_option *o, uint64_t *out, char *err, size_t errlen);
/* Parses a size with an optional unit: 4096, 4KiB, 1.5GiB, 24GB, 512M. Returns 0 or -1. */
int sim_parse_size(const char *s, uint64_t *out);
/* The largest size a device, a capacity or an allocator option may have: 1 PiB, thousands of
 * times any GPU's memory. sim_opt_size and the command line refuse larger sizes, naming the option
 * (a size near 2^63 would otherwise turn negative in the int64 counters that reports print). */
#define SIM_SIZE_MAX (UINT64_C(1) << 50)

/* ------------------------------------------------------------------------------------------
 * Statistics every model keeps, in the allocator's own terms.
 * ------------------------------------------------------------------------------------------ */
typedef struct sim_gauge {
  int64_t current, peak;
} sim_gauge;

#define SIM_ALLOC_GAUGES(X)                                                          \
  X(allocated) /* bytes handed out as the allocator counts them (rounded, unsplit) */ \
  X(requested) /* bytes the program asked for */                                      \
  X(active)    /* allocated + freed but not yet reusable */                           \
  X(reserved)  /* bytes the allocator holds from the device */

#define SIM_ALLOC_COUNTERS(X)                                      \
  X(num_allocs)        /* allocations placed */                    \
  X(num_frees)         /* allocations released (free completed) */ \
  X(num_ooms)          /* requests that could not be placed */     \
  X(num_alloc_retries) /* placements that needed a cache flush */

typedef struct sim_alloc_stats {
#define SIM_X(n) sim_gauge n;
  SIM_ALLOC_GAUGES(SIM_X)
#undef SIM_X
#define SIM_X(n) uint64_t n;
  SIM_ALLOC_COUNTERS(SIM_X)
#undef SIM_X
} sim_alloc_stats;

static inline void sim_gauge_add(sim_gauge *g, int64_t delta) {
  g->current += delta;
  if (g->current > g->peak) g->peak = g->current;
}

/* ------------------------------------------------------------------------------------------
 * The allocator model interface.
 * ------------------------------------------------------------------------------------------ */
/* The version of sim_allocator_ops a table was written for. Fields are only ever added at the end
 * of the table, each with the version that added it, so that a table written for an older version
 * keeps working: a caller reads a field only from a table whose `version` is at least the one
 * that added it (sim_allocator_can_reset shows how). 3 added `reset`, 4 `free` and `device_changed`,
 * 5 `save` and `load`. */
#define SIM_ALLOCATOR_VERSION 5

/* Facts about a real allocator that the code around a model acts on (sim_allocator_ops.traits),
 * so that no caller compares an allocator's name. */
enum {
  /* Allocation is stream-ordered (cudaMallocAsync): growing the pool synchronizes nothing, so the
   * time model charges no device synchronization for the driver calls it makes. */
  SIM_ALLOC_STREAM_ORDERED = 1u << 0,
  /* The CUDA driver implements this allocator itself (cudaMallocAsync's pool): on a real GPU the
   * backend runs the driver's, configured with the model's options, instead of the model. */
  SIM_ALLOC_DRIVER_POOL = 1u << 1,
};

/* Where a placed request landed. `handle` is the model's own reference, passed back on free. */
typedef struct sim_placement {
  uint64_t addr;    /* block address in the model's (device's) address space */
  uint64_t size;    /* bytes the allocator set aside for it */
  uintptr_t handle;
} sim_placement;

/* What `walk` reports: each segment, then its blocks in address order. */
typedef struct sim_walk_item {
  int is_segment;     /* 1: a segment (or mapped range); 0: a block inside the last segment */
  uint64_t addr, size;
  uint64_t requested; /* blocks: requested bytes (0 when free) */
  int64_t stream;
  int state;          /* blocks: SIM_BLOCK_* */
  int pool;           /* segments: 0 small, 1 large (model-defined, 0 when the model has one) */
  int expandable;     /* segments: 1 for an expandable segment's mapped range */
  uintptr_t handle;   /* blocks in use: the handle `alloc` gave the request (0 when free or unknown) */
} sim_walk_item;

enum { SIM_BLOCK_FREE = 0, SIM_BLOCK_ALLOCATED = 1, SIM_BLOCK_PENDING_FREE = 2 };

typedef int (*sim_walk_fn)(void *arg, const sim_walk_item *item);

typedef struct sim_allocator_ops {
  unsigned version;                 /* SIM_ALLOCATOR_VERSION */
  const char *name;                 /* as typed in a SPEC: "torch" */
  const char *summary;              /* one line for `memplay help replay` */
  const sim_option_spec *options;   /* accepted options, ended by {NULL, NULL} */
  unsigned traits;                  /* SIM_ALLOC_* facts about the real allocator */

  /* Makes an instance that takes memory from `dev`. Unknown or bad options: SIM_EINVAL with a
   * message in err (the caller has already rejected keys not in `options`). */
  int (*create)(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t errlen);
  void (*destroy)(void *ctx);

  /* Places a request of `size` bytes for `stream`: SIM_OK with *out, or SIM_EOOM after the
   * allocator's own recovery steps (cache flushes, retries) have all failed. */
  int (*alloc)(void *ctx, uint64_t size, int64_t stream, sim_placement *out);
  /* The program freed it; the block may still be in use by other streams. May be NULL. */
  void (*free_requested)(void *ctx, uintptr_t handle);
  /* The block may be reused now. */
  void (*free_completed)(void *ctx, uintptr_t handle);
  /* The host waited for `stream` (< 0: the whole device). May be NULL. */
  void (*synchronize)(void *ctx, int64_t stream);
  /* The program asked to release cached memory (torch.cuda.empty_cache). May be NULL. */
  void (*empty_cache)(void *ctx);

  /* Statistics, updated in place as the model works. */
  const sim_alloc_stats *(*stats)(void *ctx);
  /* Largest free block the model holds, in bytes. */
  uint64_t (*largest_free)(void *ctx);
  /* Why `size` bytes on `stream` did not fit, in the real allocator's own words. */
  void (*describe_oom)(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n);
  /* Visits segments and blocks in a stable order, each block with the handle of the request it
   * holds: what `memplay replay --at` and the segment maps show. The segments and the blocks not
   * free are a state `restore` takes (an expandable segment's lowest mapped range gives where its
   * reservation starts), which a new instance then goes on from as this one does until either
   * calls its device (tests/fuzz/fuzz_resume.c). May be NULL (a model that keeps no segments). */
  int (*walk)(void *ctx, sim_walk_fn fn, void *arg);
  /* Full invariant check (debug level): 0, or -1 with a message. May be NULL. */
  int (*check)(void *ctx, char *err, size_t errlen);

  /* Installs a segment that was there before the trace began (`memplay validate` rebuilding the
   * start of a recorded window). items[0] is the segment (addr, size, stream, pool, expandable;
   * for an expandable segment, `requested` may give the address its reservation starts at, 0: at
   * addr); items[1..n-1] are its live blocks in address order, SIM_BLOCK_ALLOCATED or
   * SIM_BLOCK_PENDING_FREE, with their requested bytes; the space between them is free. A block
   * of size 0 is sized by the model's own rules from its requested bytes and what follows it, and
   * the size chosen is written back. The segment does not overlap one restored before it (the
   * caller sees to that: the window's rebuild refuses overlapping segments); a model may refuse
   * one that does, and need not. The memory counts as already held: no device call is made.
   * handles[i] receives the handle of block i (for free_requested/free_completed). SIM_OK, or
   * SIM_EINVAL with a message. May be NULL (the model cannot start from a recorded state). */
  int (*restore)(void *ctx, sim_walk_item *items, size_t n, uintptr_t *handles, char *err, size_t errlen);

  /* Version 3. Returns the instance to the state `create` left it in, for another replay: the
   * same device, options and recorded settings (read once, at create), nothing allocated, every
   * statistic zero; it keeps the storage it grew (block records, tables) for the next replay.
   * Every piece of device memory the instance holds is handed back through the device primitive
   * first (each segment freed, each mapped range unmapped, each reservation released, as
   * `destroy` or `empty_cache` would), so a real device gets its memory back; segments `restore`
   * installed go back the same way. A device that is clearing (dev->clearing: its owner resets it
   * next and forgets what it lent) is handed nothing back: handing back thousands of segments one
   * by one was a tenth of a short cached replay (docs/performance.md, round twenty-nine). The
   * device's own state is its owner's: to replay again on a simulated device exactly as on a new
   * one, the caller then calls sim_simdev_reset (device_sim.h), which zeroes its counters and
   * hands out the same addresses again. After both, a replay makes the same decisions, at the
   * same addresses, as on a new instance (and, with device_changed below, as on a new instance on
   * another device of the same kind).
   * Handles from before the reset must not be passed again. SIM_OK, or a SIM_E* code (the
   * instance is then unusable: destroy it). NULL, or a table of version < 3: the caller
   * destroys the instance and creates another. */
  int (*reset)(void *ctx);

  /* Version 4. free_requested, then free_completed, of one handle, in one call: the program freed a
   * block no other stream holds (a trace's plain free, or a request its completion follows at
   * once). The model ends in exactly the state the two calls leave, for less work (no waiting list
   * to pass through, one look-up of the handle). NULL: the caller makes the two calls. */
  void (*free)(void *ctx, uintptr_t handle);
  /* Version 4. After a reset, before the next replay: the device's capacity and the memory its card
   * reports have changed (sim_simdev_resize; nothing else about it has). The model works out again
   * whatever `create` worked out from them, so that the next replay is that of a new instance on
   * the device as it is now. SIM_OK, or a SIM_E* code (the caller makes a new instance, which
   * reports the problem). A model that reads those figures only as it places requests returns
   * SIM_OK at once. NULL: the model cannot follow such a change (the caller makes a new instance):
   * a comparison whose policies differ only in capacity keeps one model when it can. */
  int (*device_changed)(void *ctx);
  /* Version 5. A restored start state kept for the next replay: a loop of replays of a recorded
   * window restores the same segments before each. save, right after the restores, remembers the
   * instance's whole state: 0, or nonzero when it cannot (it then keeps nothing); load, after a
   * reset that handed nothing back (a clearing device's), puts that state back, handles
   * included, as the same restores would have left it on the device as it is now (its capacity
   * may have changed since: device_changed told the model). The device's own part, the memory
   * the restores count as held, is the caller's to hold again (sim_simdev_hold). What save kept
   * is freed with the instance. NULL: the caller restores the segments again. */
  int (*save)(void *ctx);
  void (*load)(void *ctx);
} sim_allocator_ops;

/* Whether ops has a reset op (a table written for version 3 or later, with the op filled in). */
static inline int sim_allocator_can_reset(const sim_allocator_ops *ops) { return ops->version >= 3 && ops->reset; }

/* Whether ops has the save and load ops (version 5 or later, both filled in). */
static inline int sim_allocator_can_keep_start(const sim_allocator_ops *ops) {
  return ops->version >= 5 && ops->save && ops->load;
}

/* device_changed for a model that reads its device's capacity and memory only as it places
 * requests (options.c): SIM_OK. */
int sim_device_read_as_needed(void *ctx);

/* Whether ops has a device_changed op (version 4 or later, filled in). */
static inline int sim_allocator_can_follow_device(const sim_allocator_ops *ops) {
  return ops->version >= 4 && ops->device_changed;
}

/* What frees a handle at once under ops, request and completion together: its `free` op (a table
 * of version 4 or later that has one), else free_completed when the model has no request step,
 * else NULL (the caller makes the two calls). */
static inline void (*sim_allocator_free_op(const sim_allocator_ops *ops))(void *, uintptr_t) {
  if (ops->version >= 4 && ops->free) return ops->free;
  return ops->free_requested ? NULL : ops->free_completed;
}

/* The registry of models (allocators.c), and the models themselves: code that must name the
 * allocator a trace was recorded by uses its ops table's name. */
extern const sim_allocator_ops *const sim_allocators[];
extern const sim_allocator_ops sim_ideal_ops, sim_cuda_ops, sim_torch_ops, sim_bfc_ops, sim_async_ops;
const sim_allocator_ops *sim_allocator_find(const char *name);
/* Whether name is one of the comma-separated names in list (a NULL list names them all). */
int sim_allocator_listed(const char *list, const char *name);

/* An instance: a model, its state and the device it draws from. */
typedef struct sim_allocator {
  const sim_allocator_ops *ops;
  void *ctx;
  sim_device *dev;
} sim_allocator;

/*
 * Parses a SPEC ("torch:expandable_segments:True") into a model and its options, checking
 * every key against the model's list. Returns SIM_OK, or SIM_EINVAL with a message that lists
 * what is accepted. The options point into *storage, which the caller frees.
 */
typedef struct sim_spec {
  const sim_allocator_ops *ops;
  sim_option *opts;
  size_t nopts;
  char *storage;
} sim_spec;

int sim_spec_parse(sim_spec *spec, const char *text, char *err, size_t errlen);
/* Splits an option string (modified in place) for model ops into *opts (grown, *cap its size). */
int sim_options_split(const sim_allocator_ops *ops, char *text, sim_option **opts, size_t *nopts, size_t *cap,
                      char *err, size_t errlen);
void sim_spec_release(sim_spec *spec);

/* Creates an instance from a parsed spec; recorded: the settings the trace recorded, or NULL. */
int sim_allocator_init(sim_allocator *a, const sim_spec *spec, sim_device *dev, const sim_recorded *recorded,
                       const char *(*getenv_fn)(const char *), char *err, size_t errlen);
void sim_allocator_release(sim_allocator *a);

#endif

/* engine_int.h: what the engine's own files share: the engine's record, its devices' and their kept start states. */
#ifndef REPLAY_ENGINE_INT_H
#define REPLAY_ENGINE_INT_H

#include "sim/hashmap.h"
#include "engine.h"
#include "live.h"

/* What a kept model was made from, by value: a later run whose configuration gives the same
 * resets it rather than making another (replay_engine_run). opts: the SPEC's options and the
 * recorded settings, as text. */
typedef struct model_key {
  const sim_allocator_ops *ops;
  int cc_major, cc_minor;
  char *opts;
} model_key;

/* What a device primitive had done, and the model's reserved bytes, as observers were last told
 * (devstate.seen): what an allocator action did is the difference after it. */
typedef struct dev_snap {
  uint64_t mallocs, frees, maps, unmaps;
  uint64_t malloc_bytes, free_bytes, map_bytes, unmap_bytes;
  int64_t reserved;
} dev_snap;

/* A start state restored once and kept with the model (allocator.h, `save`): what it was restored
 * from (the device's start states), and the blocks it gave the engine (restored_blocks, in the
 * order of the items that are no segment, whose trace addresses are theirs). */
typedef struct start_kept {
  int ok;
  size_t *lens;              /* each start state's items */
  sim_walk_item *items;      /* theirs, one after another */
  uint64_t *trace_addr;
  size_t nlens, n;
  struct restored_block *blocks;
  size_t nblocks;
} start_kept;

typedef struct devstate {
  int used;
  int kept;      /* dev and a hold a model from an earlier run, made from key */
  model_key key;
  start_kept start; /* kept with the model */
  sim_device dev;
  sim_allocator a;
  void (*free_now)(void *ctx, uintptr_t handle); /* sim_allocator_free_op: request and completion at once, or NULL */
  const sim_alloc_stats *st;
  int64_t allocated, reserved, requested, active; /* last seen, to turn changes into deltas (while
                                                   * it is the only device, the totals hold them:
                                                   * device_own) */
  replay_device_result *res;
  /* The device as of the end of its last action (or of its making): its driver calls counted
   * together in seen_calls, so that an action that made none (most) is told by one comparison. */
  dev_snap seen;
  uint64_t seen_calls;
} devstate;

typedef struct site_rec {
  int64_t stack;
  int64_t bytes, count;       /* live now */
  int64_t peak_bytes, peak_count; /* as captured at the peak */
  int dirty;
} site_rec;

/* A block a device started with, waiting for the trace's preexisting allocation at its address. */
typedef struct restored_block {
  uintptr_t handle;
  uint64_t addr, size;
  int device, state;
  int taken; /* by its allocation, in this run */
} restored_block;

struct replay_engine {
  const replay_config *cfg;
  restored_block *restored; /* blocks of the start states */
  size_t nrestored, cap_restored;
  /* trace address -> index + 1 in restored: this run's once it has started a device from a
   * state (restored_own), else the last run's; those of a kept state alone (restored_for) serve
   * the next run that loads it (a state kept again was restored first, which took the map) */
  sim_map restored_at;
  int restored_own;
  const struct start_kept *restored_for;
  sim_walk_item *seg_items; /* one segment's items and handles, for its restore */
  uintptr_t *seg_handles;
  size_t seg_cap;
  replay_result *res;
  devstate devs[REPLAY_MAX_DEVICES];
  uint8_t used[REPLAY_MAX_DEVICES]; /* the devices in use, in index order */
  int nused;
  uint64_t used_mask; /* bit d: device d is in use */
  uint64_t touched;   /* bit d: devs[d] may hold more than zeros (it was begun, or it keeps a model) */
  live_table live; /* trace address -> what is live */
  live_dense dense; /* the same, numbered by a plan (live.h) */
  /* 1: the run follows its source's plan (the dense table), -1: it does not (the hash table), 0:
   * not decided yet (before the first view) */
  int planned;
  /* The plan's allocation arguments of the view being replayed (source.h: replay_alloc_arg), or
   * NULL, and the stream and device of those it holds. */
  const replay_alloc_arg *args;
  int64_t args_stream;
  int args_device;
  sim_map host;  /* host allocations: address -> size | mem << 56 */
  int64_t host_live[SIM_MEM__COUNT];
  /* What observers see of the event just handled (engine_begin points its category_bytes at
   * cat_bytes). Its allocated, reserved and requested are the totals over devices, kept there
   * for every replay; its other fields are zero between events: a handler sets only what its
   * event changed, and outcome_rest puts back what was set (out_rare: more than the placement
   * and reserved_delta). */
  replay_outcome out;
  int out_rare;
  int64_t active; /* the fourth total */
  replay_observer obs0; /* the first observer, and how many there are */
  size_t nobs;
  int64_t cat_bytes[SIM_CAT__COUNT], cat_count[SIM_CAT__COUNT], catsrc_bytes[SIM_CATSRC__COUNT];
  /* call sites: small stack ids index an array, others go through the map */
  uint32_t *site_small; /* stack id -> site index + 1 */
  size_t site_small_cap;
  sim_map site_idx;
  site_rec *sites;
  size_t nsites, sites_cap;
  uint32_t *dirty;
  size_t ndirty, dirty_cap;
  /* The state at the peak of allocated bytes is taken when it is about to change, not at every
   * new peak (a trace that grows sets thousands): pend_cats, the categories and call sites;
   * pend_lf, the largest free block. lazy_lf: the largest free block may wait past an
   * allocation (it is then lost when the allocation changes the models but sets no new peak,
   * lf_lost, and taken by a second pass over the source: only on a source that can rewind). */
  int pend_cats, pend_lf, lazy_lf, lf_lost;
  int lean; /* replay_config.lean, in a run that can be lean (no moment to stop at, no per-event check) */
  int start_due; /* the devices' start states are not yet in the peaks (they are, as of the first event) */
  /* timeline */
  replay_point cur;
  uint64_t cur_n, bucket;
  size_t max_points;
  /* stopping at a moment (cfg->stop) */
  sim_event last;  /* the last event handled */
  int have_last, have_first;
  int64_t first_ts;
  char *err;
  size_t errlen;
};
typedef struct replay_engine engine;

/* ---- start states (engine_start.c) ----------------------------------------------------------- */

/* The device's start states restored (the configuration's for it), and kept with its model when
 * it can keep them (allocator.h, `save`). 0, or -1 with e->err. */
int engine_start_keep(engine *e, devstate *ds, int device);
/* The kept state put back, when the run starts ds as it was started: 1, else 0 (nothing done). */
int engine_start_load(engine *e, devstate *ds, int device);
/* The kept state let go. */
void engine_start_forget(devstate *ds);

#endif

/* validate.h: replays a recorded snapshot through the model of its allocator and compares every decision. */
#ifndef REPLAY_VALIDATE_H
#define REPLAY_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "store/store.h"

/*
 * `memplay validate` (docs/allocators.md, "memplay validate"):
 *  1. rebuilds the allocator's state at the first recorded request: the segments that existed
 *     then (the final segments, less those the trace allocated, plus those it freed), the blocks
 *     live in them (the importer's preexisting allocations, sized by the model's own rules and by
 *     where later allocations landed), and free space between them;
 *  2. replays every request through the model, with a device primitive that answers each
 *     cudaMalloc or page map with the base address the trace recorded and refuses it exactly
 *     where the trace shows the allocator releasing memory to retry, or an OOM;
 *  3. compares every decision: each allocation's block address, each segment allocated, mapped,
 *     freed or unmapped, each OOM, and finally every segment and block of the snapshot.
 */

#define VALIDATE_NEAR 12 /* blocks shown around a divergence */

typedef struct validate_block {
  uint64_t addr, size;
  int state; /* SIM_BLOCK_* */
} validate_block;

/* Where the replay first parted from the recording, with what surrounded it. */
typedef struct validate_divergence {
  int64_t event;       /* request (event seq) at or before which it happened; -1: the final state */
  char kind[32];       /* address, oom, segment_alloc, segment_free, segment_map, segment_unmap, final_state, ... */
  char expected[240];  /* what the recording shows */
  char simulated[240]; /* what the model did */
  uint64_t size;       /* the request's bytes (allocations and OOMs) */
  int64_t stream;
  /* The free blocks of the request's stream and pool nearest to its size (best-fit candidates). */
  validate_block free_near[VALIDATE_NEAR];
  size_t nfree_near;
  /* The blocks of the segment that holds the expected address, when the model has one. */
  uint64_t segment_addr;
  validate_block segment[VALIDATE_NEAR];
  size_t nsegment;
} validate_divergence;

typedef struct validate_result {
  uint64_t events;          /* request events read (the rebuilt ones included) */
  uint64_t preexisting;     /* blocks live before the first recorded request */
  uint64_t allocs;          /* recorded allocations replayed */
  uint64_t address_matches; /* ... placed at the recorded address */
  uint64_t frees;           /* frees replayed */
  uint64_t segment_events;  /* recorded segment_alloc, segment_free, segment_map, segment_unmap */
  uint64_t segment_matches; /* ... that the model made at the same point, address and size */
  uint64_t extra_segment_events; /* segment operations the model made that the recording does not have */
  uint64_t ooms, oom_matches; /* recorded OOMs, and those the model also ran into */
  uint64_t extra_ooms;        /* allocations the recording placed and the model could not */
  uint64_t empty_cache_calls; /* release bursts replayed as torch.cuda.empty_cache() */
  uint64_t unknown_frees;     /* frees of addresses the replay does not hold */
  /* The final state: the snapshot's segments and blocks, and how many the model has the same. */
  uint64_t final_segments, final_segments_matched, final_blocks, final_blocks_matched;
  uint64_t model_segments, model_blocks;
  int final_state_match;
  int diverged;                  /* any disagreement at all */
  validate_divergence first;     /* valid when diverged */
  /* Peaks: replayed (the model's own counters) and recorded (from the recording's segments and
   * requests). Allocated bytes include unsplit remainders the window cannot always see. */
  int64_t replayed_peak_allocated, replayed_peak_reserved, replayed_peak_requested, replayed_peak_active;
  int64_t recorded_peak_reserved, recorded_peak_requested;
  int peak_allocated_is_lower_bound;
  uint64_t uncertain_blocks; /* live-at-start blocks whose unsplit remainder is unknown */
  uint64_t passes;           /* replays made (more than one when remainders had to be inferred) */
  uint64_t device_mallocs, device_frees, device_maps, device_unmaps;
  int64_t final_allocated, final_reserved;
  double elapsed_s;
} validate_result;

/*
 * Validates trace t (it must hold a recorded allocator's segments or segment events, and have
 * been recorded by an allocator memplay models with a restore operation). Returns 0 with the
 * comparison in *r (agreement or not), or -1 with a message when the trace cannot be validated.
 */
int validate_run(store *s, const store_trace *t, validate_result *r, char *err, size_t errlen);

/*
 * The allocator's state at the start of trace t as validate rebuilds it (the state its last pass
 * started from: the segments that existed then and the blocks live in them), for a replay under
 * the recorded allocator to start from (replay_config.start). 0 with *out filled (the caller
 * releases it with replay_start_release; it is empty for a trace recorded from an empty
 * allocator) and *agrees (may be NULL) whether validate then agreed with the recording; -1 with a
 * message when the trace cannot be validated.
 */
int validate_window_start(store *s, const store_trace *t, replay_start *out, int *agrees, char *err, size_t errlen);

/* What a rebuilt start depends on besides its trace: a digest of the sources that decide it (the
 * models, the simulated device, the engine, this file, the store's reading), made at build time.
 * A start kept in the store under another key was rebuilt by other rules (store_starts.h). */
const char *validate_start_key(void);

/* The state a state-only trace records (an out-of-memory dump: its final segments and blocks are
 * the whole state at one moment), as a replay's start: each live block's trace address is its
 * own. 0 with *out filled (release it with replay_start_release), or -1 with a message. */
int validate_recorded_state(store *s, const store_trace *t, replay_start *out, char *err, size_t errlen);

/* The comparison as a replay_result, for storing it as a run (kind "validate"). */
void validate_fill_replay_result(const validate_result *v, replay_result *out);

#endif

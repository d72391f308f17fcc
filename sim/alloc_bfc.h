/* alloc_bfc.h: what the `bfc` model adds to the allocator interface: TensorFlow's own statistics. */
#ifndef SIM_ALLOC_BFC_H
#define SIM_ALLOC_BFC_H

#include <stdint.h>

#include "allocator.h"

/*
 * TensorFlow's AllocatorStats for a BFC allocator (what tf.config.experimental.get_memory_info
 * reports as "current" and "peak"), plus the allocator settings the model resolved from its
 * options, the environment and the device. All sizes are bytes.
 */
typedef struct sim_bfc_info {
  int64_t num_allocs;         /* allocations placed since the last clear */
  int64_t bytes_in_use;       /* sum of the chunk sizes handed out (not the requested bytes) */
  int64_t peak_bytes_in_use;  /* since the last clear */
  int64_t largest_alloc_size; /* largest chunk handed out since the last clear */
  int64_t bytes_limit;        /* the memory limit */
  uint64_t memory_limit;
  uint64_t region_bytes;      /* total_region_allocated_bytes_: what the regions hold */
  uint64_t curr_region_allocation_bytes; /* the size the next region will try for */
  uint64_t max_internal_fragmentation_bytes; /* the split rule's bound */
  size_t regions;
  int allow_growth, garbage_collection, backpedal_started;
} sim_bfc_info;

/* Fills *out for a `bfc` instance; returns -1 (and leaves *out alone) for any other model. */
int sim_bfc_get_info(const sim_allocator *a, sim_bfc_info *out);
/* tf.config.experimental.reset_memory_stats (BFCAllocator::ClearStats): num_allocs and
 * largest_alloc_size to 0, the peak to what is in use now. Returns -1 for other models. */
int sim_bfc_clear_stats(sim_allocator *a);

#endif

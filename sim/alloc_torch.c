/* alloc_torch.c: the `torch` model: PyTorch's CUDA caching allocator, decision for decision. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/torch.h"

/*
 * The rules are those of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) and of the
 * PYTORCH_CUDA_ALLOC_CONF parser (c10/core/AllocatorConfig.cpp); docs/allocators.md lists them
 * with what this model assumes. The functions below carry PyTorch's names and come in the order
 * malloc meets them: rounding, get_free_block, alloc_found_block; then free and free_block;
 * then how segments come and go (alloc_block, release_available_cached_blocks,
 * release_cached_blocks, garbage collection); then expandable segments; then statistics. Its
 * settings are read in alloc_torch_config.c, the state a trace starts with is restored in
 * alloc_torch_restore.c and its invariants are checked in alloc_torch_check.c; the data they
 * share is declared in internal/torch.h.
 *
 * What a replay cannot see is decided as follows:
 *  - free_requested and free_completed arrive as events: a block waits between the two as a
 *    block with outstanding record_stream events does (it is active, not allocated, not reusable);
 *  - the device-wide synchronize and release_cached_blocks complete every waiting block, as
 *    synchronize_and_free_events does;
 *  - no CUDA graph capture is under way (no private pools) and no free-memory callback frees
 *    anything;
 *  - per_process_memory_fraction stands for torch.cuda.set_per_process_memory_fraction.
 */

/* ---- constants ------------------------------------------------------------------------------ */

/* Two more are declared in internal/torch.h, as PyTorch declares them in its headers, because the
 * configuration reads them too: kRoundUpPowerOfTwoIntervals = 16 (roundup_power2_divisions: one
 * entry per power of 2 from 1 MiB to 32 GiB) and kLargeBuffer = 20 MiB (the large segment for
 * requests of 1-10 MiB; the large pool's expandable page). */
enum { kMinBlockSize = 512 };                    /* every size is rounded to a multiple of 512 bytes */
static const uint64_t kSmallSize = 1 * MiB;      /* largest request of the small pool */
static const uint64_t kSmallBuffer = 2 * MiB;    /* small-pool segment; small expandable page */
static const uint64_t kMinLargeAlloc = 10 * MiB; /* requests below this share a kLargeBuffer segment */
static const uint64_t kRoundLarge = 2 * MiB;     /* larger segments are rounded up to this */
static const uint64_t kOneExaByte = UINT64_C(1) << 60; /* allocate() refuses requests this large */

/* What malloc carries from one step to the next (AllocParams). */
typedef struct alloc_params {
  uint64_t size;       /* rounded */
  int64_t stream;
  tpool *pool;
  tblock *block;
  int in_pool;         /* block is still in the pool's set (found by get_free_block) */
} alloc_params;

/* ---- rounding ---------------------------------------------------------------------------------- */

static uint64_t roundup_power2_divisions(const torch *m, uint64_t size) {
  int index = log2_floor(size) - 20; /* intervals start at 1 MiB */
  if (index < 0) index = 0;
  if (index > kRoundUpPowerOfTwoIntervals - 1) index = kRoundUpPowerOfTwoIntervals - 1;
  return m->cfg.roundup_power2_divisions[index];
}

/* 1200 with 4 divisions lies between 1024 and 2048, divided at 1280, 1536, 1792: 1280. */
static uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (is_pow2(size)) return size;
  uint64_t power2_floor = UINT64_C(1) << log2_floor(size);
  uint64_t power2_division = power2_floor >> log2_floor(divisions);
  if (power2_division == 0) return power2_floor << 1;
  uint64_t round_size_floor = size & ~(power2_division - 1);
  return round_size_floor == size ? size : round_size_floor + power2_division;
}

static inline __attribute__((always_inline)) uint64_t round_size(const torch *m, uint64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  uint64_t divisions = m->cfg.roundup ? roundup_power2_divisions(m, size) : 0;
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static uint64_t get_allocation_size(uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

static tpool *get_pool(torch *m, uint64_t size) { return size <= kSmallSize ? &m->small_blocks : &m->large_blocks; }

/* ---- malloc ------------------------------------------------------------------------------------ */

static int gc_enabled(const torch *m) { return m->cfg.set_fraction && m->cfg.garbage_collection_threshold > 0; }

static uint64_t expandable_size(const tblock *b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); }

/* get_free_block without its side effects: the block it would take, or NULL. */
static inline __attribute__((always_inline)) tblock *find_free_block(torch *m, const alloc_params *p) {
  tpool *pool = p->pool;
  tblock *it = tfree_lower_bound(&pool->blocks, p->stream, p->size);
  if (!it) return NULL; /* none on this stream: no reuse across streams */
  if (it->es) {
    if (m->cfg.expandable_segments) {
      /* Best fit counts what an expandable block can grow into (the unmapped range after it). */
      tblock *next = tfree_next_in_stream(&pool->blocks, it);
      while (it->es && next && expandable_size(next) < expandable_size(it)) {
        it = next;
        next = tfree_next_in_stream(&pool->blocks, next);
      }
    } else {
      /* Expandable segments were turned off after some were made: only plain blocks qualify. */
      do {
        it = tfree_next_in_stream(&pool->blocks, it);
      } while (it && it->es);
      if (!it) return NULL;
    }
  }
  /* Do not return an oversized block for a large request. */
  if (p->size < m->cfg.max_split_size && it->size >= m->cfg.max_split_size) return NULL;
  /* Allow oversized block size to be rounded up but within a limit. */
  if (p->size >= m->cfg.max_split_size && it->size >= p->size + m->cfg.max_non_split_rounding) return NULL;
  return it;
}

/* The block stays in the pool's set until alloc_found_block knows whether its remainder can
 * keep its place there (the set's order is all that matters, not when it is updated). */
static int get_free_block(torch *m, alloc_params *p) {
  if (gc_enabled(m)) ++p->pool->get_free_blocks_call_count; /* block ages count only with GC on */
  tblock *b = find_free_block(m, p);
  if (!b) return 0;
  p->block = b;
  p->in_pool = 1;
  return 1;
}

static int should_split(const torch *m, const tpool *pool, uint64_t block_size, uint64_t size) {
  uint64_t remaining = block_size - size;
  if (pool->is_small || m->cfg.expandable_segments) return remaining >= kMinBlockSize;
  return size < m->cfg.max_split_size && remaining > kSmallSize;
}

static tblock *alloc_found_block(torch *m, alloc_params *p, uint64_t orig_size, int split_remainder) {
  tpool *pool = p->pool;
  tblock *block = p->block;
  sim_assert_internal(!block->allocated && !block->waiting && block->mapped);
  sim_assert_internal(block->pool == pool && block->stream == p->stream && block->size >= p->size);
  sim_assert_internal(!split_remainder || block->size - p->size >= kMinBlockSize);
  const int already_split = is_split(block);
  if (split_remainder) {
    /* The allocation takes the front; the remainder keeps the old block and goes back. */
    tblock *remaining = block;
    block = block_new(m, p->stream, p->size, pool, remaining->ptr);
    block->es = remaining->es;
    block->prev = remaining->prev;
    if (block->prev) block->prev->next = block;
    block->next = remaining;
    remaining->prev = block;
    if (p->in_pool) { /* back into the pool with its smaller key, in place when it can */
      tfree_rekey(&pool->blocks, remaining, remaining->size - p->size, remaining->ptr + p->size);
      remaining->gc_count_base = pool->get_free_blocks_call_count;
    } else {
      remaining->ptr += p->size;
      remaining->size -= p->size;
      insert_into_blocks(m, pool, remaining);
    }
    if (already_split && !block->es) {
      POOL_DEC(m, pool, inactive_split_bytes, block->size);
    } else if (!block->es) {
      POOL_INC(m, pool, inactive_split_bytes, remaining->size);
      POOL_INC(m, pool, inactive_split, 1);
    }
  } else {
    if (p->in_pool) tfree_remove(&pool->blocks, block);
    if (already_split && !block->es) {
      POOL_DEC(m, pool, inactive_split_bytes, block->size);
      POOL_DEC(m, pool, inactive_split, 1);
    }
  }
  p->in_pool = 0;
  block->allocated = 1;
  block->requested = orig_size;
  block->gen++;
  POOL_INC(m, pool, allocation, 1);
  POOL_INC(m, pool, allocated_bytes, block->size);
  POOL_INC(m, pool, active, 1);
  POOL_INC(m, pool, active_bytes, block->size);
  POOL_INC(m, pool, requested_bytes, block->requested);
  if (block->size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_allocations, 1);
  return block;
}

static int alloc_block(torch *m, alloc_params *p, int is_retry);
static int release_available_cached_blocks(torch *m, const alloc_params *p);
static void release_cached_blocks(torch *m);
static void garbage_collect_cached_blocks(torch *m);

/* malloc's steps when no cached block fits (out of the common path, which keeps fewer registers). */
static __attribute__((noinline, cold)) int get_new_block(torch *m, alloc_params *p) {
  if (gc_enabled(m)) garbage_collect_cached_blocks(m);
  return alloc_block(m, p, 0) || (release_available_cached_blocks(m, p) && alloc_block(m, p, 0)) ||
         (release_cached_blocks(m), alloc_block(m, p, 1));
}

static int torch_alloc(void *ctx, uint64_t orig_size, int64_t stream, sim_placement *out) {
  torch *m = ctx;
  if (orig_size == 0) { /* allocate(0) hands out nullptr without reaching the allocator */
    *out = (sim_placement){0, 0, 0};
    return SIM_OK;
  }
  if (orig_size >= kOneExaByte) { /* "Tried to allocate more than 1EB memory" */
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  /* process_events(): blocks become reusable through free_completed, in trace order. */
  alloc_params p;
  p.size = round_size(m, orig_size);
  p.stream = stream;
  p.pool = get_pool(m, p.size);
  p.block = NULL;
  p.in_pool = 0;

  /* First, try to get a block from the existing pool (no free-memory callbacks are registered). */
  int block_found = get_free_block(m, &p);
  /* Can't reuse an existing block; try to get a new one. */
  if (!block_found) block_found = get_new_block(m, &p);
  if (!block_found) {
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  tblock *b = alloc_found_block(m, &p, orig_size, should_split(m, p.pool, p.block->size, p.size));
  out->addr = b->ptr;
  out->size = b->size;
  out->handle = handle_of(b);
  m->st.num_allocs++;
  return SIM_OK;
}

/* ---- free -------------------------------------------------------------------------------------- */

/* combine previously split blocks; returns the size of the subsumed block, or 0 */
static uint64_t try_merge_blocks(torch *m, tblock *dst, tblock *src, tpool *pool) {
  if (!src || !is_free(src) || dst->mapped != src->mapped) return 0;
  sim_assert_internal((dst->prev == src || dst->next == src) && src->pool == pool && dst->es == src->es);
  if (dst->prev == src) { /* [src dst] */
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else { /* [dst src] */
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  uint64_t subsumed = src->size;
  dst->size += subsumed;
  if (src->mapped) tfree_remove(&pool->blocks, src);
  else RB_REMOVE(tunmapped, &pool->unmapped, src);
  block_delete(m, src);
  return subsumed;
}

static int mergeable(const tblock *dst, const tblock *src) {
  return src && is_free(src) && dst->mapped == src->mapped;
}

/* moves a block into the pool of cached free blocks (the free_completed moment), merged with its
 * free neighbours as try_merge_blocks does (prev, then next) */
static void free_block(torch *m, tblock *block) {
  sim_assert_internal(!block->allocated && !block->waiting && block->mapped);
  uint64_t original_block_size = block->size, requested_size = block->requested;
  tpool *pool = block->pool;
  tblock *prev = mergeable(block, block->prev) ? block->prev : NULL;
  tblock *next = mergeable(block, block->next) ? block->next : NULL;
  tblock key = {.stream = block->stream, .size = block->size, .ptr = prev ? prev->ptr : block->ptr};
  int64_t net_change_inactive_split_blocks = 0, net_change_inactive_split_size = 0;
  if (prev) {
    key.size += prev->size;
    net_change_inactive_split_blocks -= 1;
    net_change_inactive_split_size -= (int64_t)prev->size;
  }
  if (next) {
    key.size += next->size;
    net_change_inactive_split_blocks -= 1;
    net_change_inactive_split_size -= (int64_t)next->size;
  }
  /* The merged block takes a merged neighbour's place in the pool (in place when it sorts there). */
  tblock *spot = next ? next : prev;
  if (prev && next) tfree_remove(&pool->blocks, prev);
  if (prev) {
    block->prev = prev->prev;
    if (block->prev) block->prev->next = block;
    block_delete(m, prev);
  }
  if (next) {
    block->next = next->next;
    if (block->next) block->next->prev = block;
  }
  block->ptr = key.ptr;
  block->size = key.size;
  if (spot) {
    block->gc_count_base = pool->get_free_blocks_call_count;
    tfree_replace(&pool->blocks, spot, block);
  } else {
    insert_into_blocks(m, pool, block);
  }
  if (next) block_delete(m, next);
  if (is_split(block)) {
    net_change_inactive_split_blocks += 1;
    net_change_inactive_split_size += (int64_t)block->size;
  }
  if (!block->es) { /* expandable segments keep no inactive_split */
    if (net_change_inactive_split_blocks > 0) POOL_INC(m, pool, inactive_split, (uint64_t)net_change_inactive_split_blocks);
    else if (net_change_inactive_split_blocks < 0)
      POOL_DEC(m, pool, inactive_split, (uint64_t)-net_change_inactive_split_blocks);
    if (net_change_inactive_split_size > 0) POOL_INC(m, pool, inactive_split_bytes, (uint64_t)net_change_inactive_split_size);
    else if (net_change_inactive_split_size < 0)
      POOL_DEC(m, pool, inactive_split_bytes, (uint64_t)-net_change_inactive_split_size);
  }
  POOL_DEC(m, pool, active, 1);
  POOL_DEC(m, pool, active_bytes, original_block_size);
  POOL_DEC(m, pool, requested_bytes, requested_size);
  m->st.num_frees++;
}

static void waiting_add(torch *m, tblock *b) {
  sim_assert_internal(!b->allocated && !b->waiting);
  tblock *older = m->waiting_newest;
  if (older) { /* append the previous newest to the list */
    WNEXT(older) = NULL;
    WPREV(older) = m->waiting_tail;
    if (m->waiting_tail) WNEXT(m->waiting_tail) = older;
    else m->waiting_head = older;
    m->waiting_tail = older;
  }
  m->waiting_newest = b;
  b->waiting = 1;
}

static void waiting_remove(torch *m, tblock *b) {
  sim_assert_internal(b->waiting);
  b->waiting = 0;
  if (b == m->waiting_newest) {
    m->waiting_newest = NULL;
    return;
  }
  if (WPREV(b)) WNEXT(WPREV(b)) = WNEXT(b);
  else m->waiting_head = WNEXT(b);
  if (WNEXT(b)) WPREV(WNEXT(b)) = WPREV(b);
  else m->waiting_tail = WPREV(b);
  WNEXT(b) = WPREV(b) = NULL;
}

/* Every waiting block becomes free, oldest first. */
static void free_all_waiting(torch *m) {
  for (tblock *b; (b = m->waiting_head ? m->waiting_head : m->waiting_newest);) {
    waiting_remove(m, b);
    free_block(m, b);
  }
}

/* free(): the program let go of the block. It stops counting as allocated now... */
static void mark_freed(torch *m, tblock *block) {
  sim_assert_internal(block->allocated && !block->waiting);
  block->allocated = 0;
  POOL_DEC(m, block->pool, allocation, 1);
  POOL_DEC(m, block->pool, allocated_bytes, block->size);
  if (block->size >= m->cfg.max_split_size) decrease_stat(&m->stats.oversize_allocations, 1);
}

/* ...and it becomes reusable at free_completed (at once for blocks without record_stream uses). */
static void free_request(torch *m, tblock *block) {
  mark_freed(m, block);
  waiting_add(m, block);
}

static void torch_free_requested(void *ctx, uintptr_t handle) {
  torch *m = ctx;
  tblock *b = block_of(m, handle);
  if (!b || !b->allocated) return; /* nullptr, or a handle the model already let go of */
  free_request(m, b);
}

static void torch_free_completed(void *ctx, uintptr_t handle) {
  torch *m = ctx;
  tblock *b = m->waiting_newest;
  if (b && handle_of(b) == handle) { /* the block just freed, the usual case: no look-up */
    waiting_remove(m, b);
    free_block(m, b);
    return;
  }
  b = block_of(m, handle);
  if (!b) return; /* nullptr, or completed early by a synchronization */
  if (b->allocated) free_request(m, b);
  if (!b->waiting) return;
  waiting_remove(m, b);
  free_block(m, b);
}

/* A free no stream holds back: the block is let go of and reusable at once, as free_requested and
 * free_completed leave it, without passing through the waiting list. */
static void torch_free(void *ctx, uintptr_t handle) {
  torch *m = ctx;
  tblock *b = block_of(m, handle);
  if (!b) return; /* nullptr, or a handle the model already let go of */
  if (b->allocated) mark_freed(m, b);
  else if (b->waiting) waiting_remove(m, b);
  else return;
  free_block(m, b);
}

/* ---- segments ---------------------------------------------------------------------------------- */

static tblock *try_allocate_expandable_block(torch *m, int64_t stream, tpool *pool, uint64_t size);
static void unmap_block(torch *m, tblock *block);
static void release_expandable_segment(torch *m, tblock *block);

static int alloc_block(torch *m, alloc_params *p, int is_retry) {
  uint64_t size = get_allocation_size(p->size);
  if (is_retry) m->st.num_alloc_retries++;
  if (m->cfg.set_fraction && m->total_allocated_memory + size > m->allowed_memory_maximum) return 0;
  if (m->cfg.expandable_segments) {
    p->block = try_allocate_expandable_block(m, p->stream, p->pool, p->size);
    return p->block != NULL;
  }
  uint64_t ptr;
  if (sim_device_malloc(m->dev, size, p->stream, &ptr) != SIM_OK) return 0; /* cudaMalloc failed */
  m->total_allocated_memory += size;
  p->block = block_new(m, p->stream, size, p->pool, ptr);
  POOL_INC(m, p->pool, segment, 1);
  POOL_INC(m, p->pool, reserved_bytes, size);
  if (size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_segments, 1);
  m->stats.num_device_alloc++;
  return 1;
}

/* cudaFree of an unsplit free block */
static void release_block(torch *m, tblock *block) {
  tpool *pool = block->pool;
  sim_assert_internal(!is_split(block) && !block->es && !block->allocated && !block->waiting); /* a whole segment */
  sim_assert_internal(m->total_allocated_memory >= block->size);
  m->stats.num_device_free++;
  sim_device_free(m->dev, block->ptr, block->size);
  m->total_allocated_memory -= block->size;
  POOL_DEC(m, pool, segment, 1);
  POOL_DEC(m, pool, reserved_bytes, block->size);
  if (block->size >= m->cfg.max_split_size) decrease_stat(&m->stats.oversize_segments, 1);
  tfree_remove(&pool->blocks, block);
  block_delete(m, block);
}

/* Whether release_block may cudaFree it: a whole segment, not part of an expandable one. PyTorch
 * passes over expandable blocks here; a split oversize block cannot arise in a state the real
 * allocator reaches (oversize blocks are never split), but a restored one may hold it. */
static int releasable(const tblock *b) { return !b->es && !is_split(b); }

/* Free one or more oversize blocks to the device, but only enough to satisfy the target size
 * (only when max_split_size_mb is set). */
static int release_available_cached_blocks(torch *m, const alloc_params *p) {
  if (m->cfg.max_split_size == UINT64_MAX) return 0;
  tpool *pool = p->pool;
  uint64_t key_size = p->size < m->cfg.max_split_size ? m->cfg.max_split_size : p->size;
  tblock *it = tfree_lower_bound(&pool->blocks, p->stream, key_size);
  if (!it || !releasable(it)) {
    /* No single block is large enough: free oversize blocks, starting with the largest (the one
     * before the lower bound); blocks of expandable segments are passed over, not released. */
    uint64_t total_released = 0;
    it = it ? tfree_prev_in_stream(&pool->blocks, it) : tfree_last_in_stream(&pool->blocks, p->stream);
    while (it && total_released < key_size && it->size >= m->cfg.max_split_size) {
      tblock *cur = it;
      it = tfree_prev_in_stream(&pool->blocks, it);
      if (releasable(cur)) {
        total_released += cur->size;
        release_block(m, cur);
      }
    }
    if (total_released < key_size) return 0;
  } else {
    release_block(m, it);
  }
  return 1;
}

/* Frees every unsplit free block of a pool; free pages of expandable segments are unmapped. */
static void release_blocks(torch *m, tpool *pool) {
  tblock **to_unmap = NULL;
  size_t n = 0, cap = 0;
  for (tblock *it = tfree_first(&pool->blocks), *next; it; it = next) {
    next = tfree_next(&pool->blocks, it);
    if (it->es) {
      sim_grow((void **)&to_unmap, &cap, n + 1, sizeof *to_unmap);
      to_unmap[n++] = it;
    } else if (!it->prev && !it->next) {
      release_block(m, it);
    }
  }
  for (size_t i = 0; i < n; i++) {
    tblock *b = to_unmap[i];
    unmap_block(m, b);
    if (!b->prev && !b->next) release_expandable_segment(m, b);
  }
  free(to_unmap);
}

/* The host waited for every event: each waiting block becomes free (free_completed). */
static void synchronize_and_free_events(torch *m) {
  m->stats.num_sync_all_streams++;
  free_all_waiting(m);
}

/* What empty_cache() calls, and malloc's last resort. */
static void release_cached_blocks(torch *m) {
  synchronize_and_free_events(m);
  release_blocks(m, &m->large_blocks);
  release_blocks(m, &m->small_blocks);
  sim_assert_valid(_torch_check, m);
}

static size_t gc_count(const tblock *b) {
  return (size_t)(int)(b->pool->get_free_blocks_call_count - b->gc_count_base);
}

/* Frees unsplit large blocks that have sat unused longer than average, until reserved memory is
 * back under garbage_collection_threshold of the allowed memory. */
static void garbage_collect_cached_blocks(torch *m) {
  uint64_t gc_threshold = (uint64_t)(m->cfg.garbage_collection_threshold * (double)m->allowed_memory_maximum);
  if (m->total_allocated_memory <= gc_threshold) return;
  uint64_t target_size = m->total_allocated_memory - gc_threshold, gc_reclaimed = 0;
  size_t total_age = 0;
  int freeable_block_count = 0;
  for (tblock *b = tfree_first(&m->large_blocks.blocks); b; b = tfree_next(&m->large_blocks.blocks, b)) {
    if (!is_split(b) && !b->es) {
      total_age += gc_count(b);
      ++freeable_block_count;
    }
  }
  if (freeable_block_count == 0) return;
  int block_freed = 1;
  while (gc_reclaimed < target_size && block_freed && freeable_block_count > 0) {
    double age_threshold = (double)total_age / freeable_block_count;
    block_freed = 0;
    for (tblock *b = tfree_first(&m->large_blocks.blocks), *next; b; b = next) {
      next = tfree_next(&m->large_blocks.blocks, b);
      if (!is_split(b) && !b->es && (double)gc_count(b) >= age_threshold) {
        block_freed = 1;
        gc_reclaimed += b->size;
        total_age -= gc_count(b);
        freeable_block_count--;
        release_block(m, b);
      }
    }
  }
}

/* ---- expandable segments ------------------------------------------------------------------------- */

static int allocatable(const tblock *b) { return b && is_free(b); }

static int has_available_address_space(const tblock *b, uint64_t size) {
  uint64_t bytes = 0;
  while (bytes < size && allocatable(b)) {
    bytes += b->size;
    b = b->next;
  }
  return bytes >= size;
}

/* An expandable segment's page: kSmallBuffer in the small pool, kLargeBuffer in the large one. */
static uint64_t expandable_page(const tpool *pool) { return pool->is_small ? kSmallBuffer : kLargeBuffer; }

static uint64_t reservation_size(const torch *m, uint64_t page) {
  uint64_t total = m->dev->total_memory;
  uint64_t space = total + total / 8; /* 1 1/8 of the card */
  return (space + page - 1) / page * page;
}

/* The lowest address, in this stream's segments, with `size` bytes of free and unmapped space;
 * else a new segment. */
static tblock *find_expandable_block(torch *m, int64_t stream, tpool *pool, uint64_t size) {
  tblock key = {.stream = stream, .ptr = 0};
  for (tblock *it = RB_NFIND(tunmapped, &pool->unmapped, &key); it && it->stream == stream;
       it = RB_NEXT(tunmapped, &pool->unmapped, it)) {
    tblock *c = it;
    if (allocatable(c->prev)) c = c->prev; /* a free block just before it counts too */
    if (has_available_address_space(c, size)) return c;
  }
  uint64_t page = expandable_page(pool), space = reservation_size(m, page), base;
  if (sim_device_reserve(m->dev, space, &base) != SIM_OK) return NULL;
  tseg *es = sim_xcalloc(1, sizeof *es);
  *es = (tseg){base, space, page, stream, pool, m->segments};
  m->segments = es;
  tblock *candidate = block_new(m, stream, space, pool, base);
  candidate->mapped = 0;
  candidate->es = es;
  insert_unmapped(m, pool, candidate);
  return candidate;
}

/* Maps [to_map, +size) rounded out to whole pages; one segment_map for the range. */
static int map_block(torch *m, tblock *to_map, uint64_t size) {
  sim_assert_internal(to_map->es && !to_map->mapped && size <= to_map->size);
  tseg *es = to_map->es;
  uint64_t begin = (to_map->ptr - es->base) / es->page;
  uint64_t end = (to_map->ptr + size - es->base + es->page - 1) / es->page;
  if (begin == end) return 0;
  uint64_t ptr = es->base + begin * es->page, mapped = (end - begin) * es->page;
  if (sim_device_map(m->dev, ptr, mapped, to_map->stream) != SIM_OK) return 0;
  tpool *pool = to_map->pool;
  RB_REMOVE(tunmapped, &pool->unmapped, to_map);
  to_map->mapped = 1;
  if (mapped < to_map->size) { /* to_map -> remaining (unmapped) -> to_map->next */
    tblock *remaining = block_new(m, to_map->stream, to_map->size - mapped, pool, to_map->ptr + mapped);
    remaining->mapped = 0;
    remaining->es = es;
    remaining->prev = to_map;
    remaining->next = to_map->next;
    if (to_map->next) to_map->next->prev = remaining;
    to_map->next = remaining;
    insert_unmapped(m, pool, remaining);
    to_map->size = mapped;
  }
  try_merge_blocks(m, to_map, to_map->prev, pool);
  try_merge_blocks(m, to_map, to_map->next, pool);
  insert_into_blocks(m, pool, to_map);
  m->total_allocated_memory += mapped;
  POOL_INC(m, pool, reserved_bytes, mapped);
  m->stats.num_device_alloc++;
  return 1;
}

static tblock *try_allocate_expandable_block(torch *m, int64_t stream, tpool *pool, uint64_t size) {
  tblock *candidate = find_expandable_block(m, stream, pool, size);
  if (!candidate) return NULL;
  /* candidate: unmapped -> ..., or free -> unmapped -> ... */
  if (!candidate->mapped && !map_block(m, candidate, candidate->size < size ? candidate->size : size)) return NULL;
  while (candidate->size < size) {
    uint64_t remaining = size - candidate->size;
    tblock *new_candidate = candidate->next;
    /* The reservation ends before `size`: a request beyond 1 1/8 of the card, whose mapping the
     * driver refuses on a real GPU. */
    if (!new_candidate) return NULL;
    if (!map_block(m, new_candidate, remaining < new_candidate->size ? remaining : new_candidate->size)) return NULL;
    candidate = new_candidate; /* it absorbed the free block before it */
  }
  sim_assert_internal(candidate->mapped && candidate->size >= size);
  tfree_remove(&pool->blocks, candidate);
  return candidate;
}

/* Unmaps the whole pages inside a free block; one segment_unmap for them. */
static void unmap_block(torch *m, tblock *block) {
  sim_assert_internal(block->es && block->mapped && !block->allocated && !block->waiting);
  tseg *es = block->es;
  uint64_t begin = (block->ptr - es->base + es->page - 1) / es->page;
  uint64_t end = (block->ptr + block->size - es->base) / es->page;
  if (begin >= end) return;
  uint64_t ptr = es->base + begin * es->page, size = (end - begin) * es->page;
  tpool *pool = block->pool;
  sim_device_unmap(m->dev, ptr, size);
  tfree_remove(&pool->blocks, block);
  uint64_t before_size = ptr - block->ptr;
  if (before_size > 0) { /* prev? -> before_free -> block */
    tblock *before_free = block_new(m, block->stream, before_size, pool, block->ptr);
    before_free->es = es;
    before_free->prev = block->prev;
    if (block->prev) block->prev->next = before_free;
    before_free->next = block;
    block->prev = before_free;
    insert_into_blocks(m, pool, before_free);
  }
  uint64_t after_size = block->size - (before_size + size);
  if (after_size > 0) { /* block -> after_free -> next? */
    tblock *after_free = block_new(m, block->stream, after_size, pool, ptr + size);
    after_free->es = es;
    after_free->next = block->next;
    if (block->next) block->next->prev = after_free;
    after_free->prev = block;
    block->next = after_free;
    insert_into_blocks(m, pool, after_free);
  }
  block->ptr = ptr;
  block->size = size;
  block->mapped = 0;
  try_merge_blocks(m, block, block->prev, pool);
  try_merge_blocks(m, block, block->next, pool);
  insert_unmapped(m, pool, block);
  m->total_allocated_memory -= size;
  POOL_DEC(m, pool, reserved_bytes, size);
  m->stats.num_device_free++;
}

static void release_expandable_segment(torch *m, tblock *block) {
  sim_assert_internal(!block->mapped && !block->prev && !block->next); /* all of it unmapped */
  tseg *es = block->es;
  RB_REMOVE(tunmapped, &block->pool->unmapped, block);
  sim_device_unreserve(m->dev, es->base, es->size);
  for (tseg **pp = &m->segments; *pp; pp = &(*pp)->next)
    if (*pp == es) {
      *pp = es->next;
      break;
    }
  free(es);
  block_delete(m, block);
}

/* ---- the model's life ------------------------------------------------------------------------- */

/* setMemoryFraction: the cap is a fraction of the card's memory (the device's capacity is read as
 * segments are made). */
static int torch_device_changed(void *ctx) {
  torch *m = ctx;
  if (m->cfg.set_fraction) m->allowed_memory_maximum = (uint64_t)(m->cfg.fraction * (double)m->dev->total_memory);
  return SIM_OK;
}

static int torch_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t n) {
  tconfig c;
  if (_torch_config_init(&c, cfg, err, n)) return SIM_EINVAL;
  torch *m = sim_xcalloc(1, sizeof *m);
  m->dev = dev;
  m->cfg = c;
  m->small_blocks.is_small = 1;
  m->small_blocks.stats = &m->stats.type[SMALL_POOL];
  m->large_blocks.stats = &m->stats.type[LARGE_POOL];
  tfree_init(&m->small_blocks.blocks);
  tfree_init(&m->large_blocks.blocks);
  torch_device_changed(m);
  *ctx = m;
  return SIM_OK;
}

static void torch_destroy(void *ctx) {
  torch *m = ctx;
  sim_assert_valid(_torch_check, m);
  _torch_saved_release(m);
  tfree_release(&m->small_blocks.blocks);
  tfree_release(&m->large_blocks.blocks);
  for (size_t i = 0; i < m->nchunks; i++) free(m->chunks[i]);
  free(m->chunks);
  while (m->segments) {
    tseg *es = m->segments;
    m->segments = es->next;
    free(es);
  }
  free(m);
}

/* Hands every segment back to the device: a cudaFree per segment, an unmap per mapped range of an
 * expandable segment, then its reservation (nothing to a device that is clearing: allocator.h,
 * `reset`). */
static void release_all_segments(torch *m) {
  for (uint32_t i = 1; !m->dev->clearing && i < m->next_index; i++) {
    tblock *b = block_at(m, i);
    if (!b->live || !b->mapped || (b->prev && b->prev->mapped)) continue; /* not the start of a range */
    uint64_t size = 0;
    for (tblock *x = b; x && x->mapped; x = x->next) size += x->size;
    if (b->es) sim_device_unmap(m->dev, b->ptr, size);
    else sim_device_free(m->dev, b->ptr, size);
  }
  while (m->segments) {
    tseg *es = m->segments;
    m->segments = es->next;
    if (!m->dev->clearing) sim_device_unreserve(m->dev, es->base, es->size);
    free(es);
  }
}

/* The state torch_create left: the configuration stays (read once), the block arena and the
 * pools' stream tables are kept for the next replay, block records are handed out from the first
 * again. */
static int torch_reset(void *ctx) {
  torch *m = ctx;
  sim_assert_valid(_torch_check, m);
  release_all_segments(m);
  m->free_list = NULL;
  m->next_index = 0;
  m->waiting_newest = m->waiting_head = m->waiting_tail = NULL;
  m->total_allocated_memory = 0;
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    tfree_clear(&pools[k]->blocks);
    RB_INIT(&pools[k]->unmapped);
    pools[k]->get_free_blocks_call_count = 0;
  }
  memset(&m->stats, 0, sizeof m->stats);
  memset(&m->st, 0, sizeof m->st);
  m->tree_conflicts = 0;
  return SIM_OK;
}

static void torch_empty_cache(void *ctx) {
  torch *m = ctx;
  release_cached_blocks(m);
}

/* A device-wide synchronize completes every recorded event: waiting blocks become free, as the
 * next process_events() would find them. A stream's synchronize completes nothing the model can
 * attribute (it does not know which streams a block was recorded on). */
static void torch_synchronize(void *ctx, int64_t stream) {
  torch *m = ctx;
  if (stream >= 0) return;
  free_all_waiting(m);
}

/* ---- what the model's other files use -------------------------------------------------------- */

uint64_t _torch_round_size(const torch *m, uint64_t size) { return round_size(m, size); }

int _torch_should_split(const torch *m, const tpool *pool, uint64_t block_size, uint64_t size) {
  return should_split(m, pool, block_size, size);
}

uint64_t _torch_expandable_page(const tpool *pool) { return expandable_page(pool); }

uint64_t _torch_reservation_size(const torch *m, uint64_t page) { return reservation_size(m, page); }

void _torch_waiting_add(torch *m, tblock *b) { waiting_add(m, b); }

uint64_t _torch_try_merge_blocks(torch *m, tblock *dst, tblock *src, tpool *pool) {
  return try_merge_blocks(m, dst, src, pool);
}

/* ---- what validate asks ----------------------------------------------------------------------- */

uint64_t sim_torch_round_size(void *ctx, uint64_t size) { return round_size(ctx, size); }

int sim_torch_would_reuse(void *ctx, uint64_t size, int64_t stream) {
  torch *m = ctx;
  if (!size) return 1;
  alloc_params p = {.size = round_size(m, size), .stream = stream};
  p.pool = get_pool(m, p.size);
  return find_free_block(m, &p) != NULL;
}

/* ---- statistics and snapshot ------------------------------------------------------------------ */

static const sim_alloc_stats *torch_stats(void *ctx) { return &((torch *)ctx)->st; }

/* cacheInfo(): the largest free block of any stream, in either pool. */
static uint64_t torch_largest_free(void *ctx) {
  torch *m = ctx;
  uint64_t best = 0;
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    /* the last block of each stream is that stream's largest */
    for (size_t i = 0; i < pools[k]->blocks.n; i++) {
      tblock *b = tfree_last_in_stream(&pools[k]->blocks, pools[k]->blocks.s[i]->stream);
      if (b && b->size > best) best = b->size;
    }
  }
  return best;
}

/* A reported segment starts at a block with no mapped block before it (expandable segments are
 * reported as one segment per contiguous mapped range, as snapshot() does). */
static int is_head(const tblock *b) { return b->live && b->mapped && !(b->prev && b->prev->mapped); }

static int cmp_head(const void *a, const void *b) {
  const tblock *x = *(tblock *const *)a, *y = *(tblock *const *)b;
  return cmp_u64(x->ptr, y->ptr);
}

static tblock **collect_heads(const torch *m, size_t *count) {
  tblock **heads = NULL;
  size_t n = 0, cap = 0;
  for (uint32_t i = 1; i < m->next_index; i++) {
    tblock *b = block_at(m, i);
    if (!is_head(b)) continue;
    sim_grow((void **)&heads, &cap, n + 1, sizeof *heads);
    heads[n++] = b;
  }
  if (n) qsort(heads, n, sizeof *heads, cmp_head);
  *count = n;
  return heads;
}

/* snapshot(): each segment (an expandable segment's mapped ranges each count as one), then its
 * blocks, in address order. The lowest mapped range of a reservation gives where the reservation
 * starts (in `requested`, as restore takes it), so that a state walked restores as it was. */
static int torch_walk(void *ctx, sim_walk_fn fn, void *arg) {
  torch *m = ctx;
  size_t n;
  tblock **heads = collect_heads(m, &n);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    tblock *h = heads[i];
    sim_walk_item seg = {.is_segment = 1, .addr = h->ptr, .stream = h->stream, .pool = !h->pool->is_small,
                         .expandable = h->es != NULL};
    /* heads go by address and a reservation's addresses are its own: its ranges come together */
    if (h->es && (i == 0 || heads[i - 1]->es != h->es)) seg.requested = h->es->base;
    for (tblock *b = h; b && b->mapped; b = b->next) seg.size += b->size;
    rc = fn(arg, &seg);
    for (tblock *b = h; b && b->mapped && !rc; b = b->next) {
      sim_walk_item it = {.addr = b->ptr, .size = b->size, .stream = b->stream, .pool = seg.pool,
                          .expandable = seg.expandable};
      it.state = b->allocated ? SIM_BLOCK_ALLOCATED : b->waiting ? SIM_BLOCK_PENDING_FREE : SIM_BLOCK_FREE;
      it.requested = it.state == SIM_BLOCK_FREE ? 0 : b->requested;
      it.handle = it.state == SIM_BLOCK_FREE ? 0 : handle_of(b);
      rc = fn(arg, &it);
    }
  }
  free(heads);
  return rc;
}

/* format_size(): PyTorch's sizes in OOM messages. */
static void format_size(char *buf, size_t n, uint64_t size) {
  if (size <= 1024) snprintf(buf, n, "%" PRIu64 " bytes", size);
  else if (size <= 1048576) snprintf(buf, n, "%.2f KiB", (double)size / 1024.0);
  else if (size <= 1073741824) snprintf(buf, n, "%.2f MiB", (double)size / 1048576.0);
  else snprintf(buf, n, "%.2f GiB", (double)size / 1073741824.0);
}

static void torch_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  torch *m = ctx;
  (void)stream;
  sim_device *d = m->dev;
  uint64_t limit = d->capacity < d->total_memory ? d->capacity : d->total_memory;
  uint64_t device_free = limit > d->used ? limit - d->used : 0;
  int64_t allocated = m->st.allocated.current, reserved = m->st.reserved.current;
  char want[32], total[32], free_s[32], used[32], alloc_s[32], unalloc[32], allowed[64] = "";
  if (size >= kOneExaByte) {
    snprintf(buf, n, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    return;
  }
  format_size(want, sizeof want, get_allocation_size(round_size(m, size)));
  format_size(total, sizeof total, d->total_memory);
  format_size(free_s, sizeof free_s, device_free);
  format_size(used, sizeof used, d->used);
  format_size(alloc_s, sizeof alloc_s, (uint64_t)allocated);
  format_size(unalloc, sizeof unalloc, (uint64_t)(reserved - allocated));
  if (m->cfg.set_fraction) {
    char a[32];
    format_size(a, sizeof a, m->allowed_memory_maximum);
    snprintf(allowed, sizeof allowed, "%s allowed; ", a);
  }
  int len = snprintf(buf, n,
                     "CUDA out of memory. Tried to allocate %s. GPU has a total capacity of %s of which %s is free. "
                     "Including non-PyTorch memory, this process has %s memory in use. %sOf the allocated memory %s is "
                     "allocated by PyTorch, and %s is reserved by PyTorch but unallocated.",
                     want, total, free_s, used, allowed, alloc_s, unalloc);
  static const char advice[] = " If reserved but unallocated memory is large try setting "
                               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
  if (len > 0 && (size_t)len + sizeof advice <= n) memcpy(buf + len, advice, sizeof advice);
}

const sim_allocator_ops sim_torch_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "torch",
  .summary = "PyTorch's CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF options; default: the recorded settings)",
  .options = _torch_options,
  .create = torch_create,
  .destroy = torch_destroy,
  .alloc = torch_alloc,
  .free_requested = torch_free_requested,
  .free_completed = torch_free_completed,
  .synchronize = torch_synchronize,
  .empty_cache = torch_empty_cache,
  .stats = torch_stats,
  .largest_free = torch_largest_free,
  .describe_oom = torch_describe_oom,
  .walk = torch_walk,
  .check = _torch_check,
  .restore = _torch_restore,
  .reset = torch_reset,
  .free = torch_free,
  .device_changed = torch_device_changed,
  .save = _torch_save,
  .load = _torch_load,
};

/* torch.h: what the torch model's files share: its configuration, blocks, pools, statistics and model record. */
#ifndef SIM_INTERNAL_TORCH_H
#define SIM_INTERNAL_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/alloc_torch.h"
#include "sim/fitset.h"
#include "sim/hashmap.h"
#include "debug.h"
#include "rbtree.h"

/*
 * Private to sim/alloc_torch*.c (sim/'s private headers are in sim/internal/; other folders use
 * sim/alloc_torch.h). The model is split as mimalloc splits its allocator:
 *   alloc_torch.c          the decisions, in the order PyTorch's CUDACachingAllocator makes them
 *   alloc_torch_config.c   PYTORCH_CUDA_ALLOC_CONF options and the settings a snapshot recorded
 *   alloc_torch_restore.c  the state a trace that starts mid-run begins with (the restore op)
 *   alloc_torch_check.c    the invariants (the check op)
 */

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* The two constants the configuration reads too (PyTorch declares them in its headers, the
 * rest in CUDACachingAllocator.cpp, as alloc_torch.c does). */
enum { kRoundUpPowerOfTwoIntervals = 16 }; /* roundup_power2_divisions: one entry per power of 2 from 1 MiB to 32 GiB */
static const uint64_t kLargeBuffer = 20 * MiB; /* large segment for 1-10 MiB; large expandable page */

_Static_assert(sizeof(uintptr_t) >= 8, "handles pack a generation and an index into 64 bits");

static inline int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static inline int log2_floor(uint64_t v) { return 63 - __builtin_clzll(v); }

/* ---- configuration (PYTORCH_CUDA_ALLOC_CONF) ------------------------------------------------- */

typedef struct tconfig {
  uint64_t max_split_size;         /* UINT64_MAX: no limit */
  uint64_t max_non_split_rounding; /* how much larger an oversize block may be than the request */
  double garbage_collection_threshold; /* 0: off */
  int expandable_segments;
  uint64_t roundup_power2_divisions[kRoundUpPowerOfTwoIntervals];
  int roundup;                     /* any roundup_power2_divisions entry is above 1 */
  int set_fraction;                /* per_process_memory_fraction was given */
  double fraction;
} tconfig;

/* ---- blocks, pools and segments ------------------------------------------------------------- */

typedef struct tblock tblock;
typedef struct tpool tpool;
typedef struct tseg tseg;

struct tblock {
  /* First cache line: what a search of the pool reads. The pool's order is (stream, size, ptr);
   * that of unmapped ranges (stream, ptr). */
  int64_t stream;
  uint64_t size;
  uint64_t ptr;
  RB_ENTRY(tblock) link;        /* in pool->blocks (free, mapped) or pool->unmapped */
  uint16_t cls;                 /* its size class while in pool->blocks (fitset.h) */
  uint8_t allocated;
  uint8_t mapped;               /* backed by memory (always, outside expandable segments) */
  uint8_t waiting;              /* freed by the program, not yet reusable (event_count > 0) */
  uint8_t live;                 /* in use by the model (the arena keeps the rest) */
  /* Second cache line. */
  tblock *prev, *next;          /* neighbours in the segment */
  tpool *pool;
  tseg *es;                     /* its expandable segment, or NULL */
  uint64_t requested;           /* requested_size */
  int64_t gc_count_base;        /* get_free_blocks_call_count when it entered the pool */
  uint32_t index;
  uint32_t gen;                 /* handle = gen << 32 | index */
  uint8_t pad_[8];
};
/* A block waiting for free_completed is in no pool: its links chain the waiting list. */
#define WNEXT(b) RB_LEFT(b, link)
#define WPREV(b) RB_RIGHT(b, link)

_Static_assert(sizeof(tblock) == 128 && offsetof(tblock, prev) == 64, "a search reads one cache line per block");

RB_HEAD(tunmapped, tblock);

static inline int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

/* BlockComparatorSize, (stream, size, ptr) with streams compared as the raw cudaStream_t
 * pointers they are, orders the free blocks: fitset.h keeps that order and answers its
 * lower_bound quickly. */
SIM_FITSET_DEFINE(tfree, tblock, link, cls, stream, size, ptr)

/* BlockComparatorAddress */
static inline int by_address(const tblock *a, const tblock *b) {
  if (a->stream != b->stream) return cmp_u64((uint64_t)a->stream, (uint64_t)b->stream);
  return cmp_u64(a->ptr, b->ptr);
}

SIM_RB_GENERATE(tunmapped, tblock, link, by_address)

struct tpool {
  struct tfree blocks;       /* free mapped blocks */
  struct tunmapped unmapped; /* unmapped ranges of expandable segments */
  int is_small;
  int64_t get_free_blocks_call_count;
  struct tstat_set *stats;   /* the pool's own statistics (SMALL_POOL or LARGE_POOL) */
};

/* ExpandableSegment: address space for 1 1/8 of the card, mapped page by page. */
struct tseg {
  uint64_t base, size, page;
  int64_t stream;
  tpool *pool;
  tseg *next;
};

/* ---- statistics, declared once ---------------------------------------------------------------- */

/* PyTorch's DeviceStats are kept in full (each array's AGGREGATE, SMALL_POOL and LARGE_POOL Stat,
 * with its peak) where something reads them: in the builds with internal checks (SIM_DEBUG >= 1:
 * Debug and the sanitizer build), whose check op holds each one to the blocks. Elsewhere only the
 * four byte counts the replay engine reads (sim_alloc_stats: allocated, reserved, active,
 * requested) and the rare single Stats and counters below are kept; the rest are compiled out, as
 * mimalloc compiles out its statistics, since no decision reads them and updating them was a
 * seventh of the model's work per event. -DSIM_TORCH_STATS=1 keeps them in any build. */
#ifndef SIM_TORCH_STATS
#define SIM_TORCH_STATS (SIM_DEBUG >= 1)
#endif

enum { AGGREGATE, SMALL_POOL, LARGE_POOL, STAT_TYPES };

typedef sim_gauge tstat; /* current and peak (PyTorch's cumulative allocated/freed are not kept) */

/* DeviceStats: one Stat per type for each of these... */
#define TORCH_STAT_ARRAYS(X)                                                        \
  X(allocation)           /* blocks allocated */                                    \
  X(segment)              /* cudaMalloc'd segments */                               \
  X(active)               /* blocks allocated or waiting for free_completed */      \
  X(inactive_split)       /* free blocks inside split segments */                   \
  X(allocated_bytes)      /* sizes of allocated blocks */                           \
  X(reserved_bytes)       /* segments and mapped pages */                           \
  X(active_bytes)         /* sizes of active blocks */                              \
  X(inactive_split_bytes) /* sizes of free blocks inside split segments */          \
  X(requested_bytes)      /* requested sizes of active blocks */
/* ...these two single Stats... */
#define TORCH_STATS(X)       \
  X(oversize_allocations)    \
  X(oversize_segments)
/* ...and these counters (num_alloc_retries and num_ooms are the engine's, in sim_alloc_stats). */
#define TORCH_COUNTERS(X)                                                    \
  X(num_sync_all_streams) /* synchronize_and_free_events calls */           \
  X(num_device_alloc)     /* cudaMalloc and page maps */                     \
  X(num_device_free)      /* cudaFree and page unmaps */

/* One set per type, so that a call touches the few cache lines of its pool's set. */
struct tstat_set {
#define SIM_X(n) tstat n;
  TORCH_STAT_ARRAYS(SIM_X)
#undef SIM_X
};

typedef struct tstats {
  struct tstat_set type[STAT_TYPES];
#define SIM_X(n) tstat n;
  TORCH_STATS(SIM_X)
#undef SIM_X
#define SIM_X(n) uint64_t n;
  TORCH_COUNTERS(SIM_X)
#undef SIM_X
} tstats;

static inline void increase_stat(tstat *s, uint64_t amount) {
  s->current += (int64_t)amount;
  if (s->current > s->peak) s->peak = s->current;
}

static inline void decrease_stat(tstat *s, uint64_t amount) {
  sim_assert_internal(s->current >= (int64_t)amount); /* a count never goes below zero */
  s->current -= (int64_t)amount;
}

/* Each array's AGGREGATE entry, except that the four byte counts the replay engine reads live in
 * the engine's sim_alloc_stats (so nothing is copied after each call). */
#define AGG_allocation(m) (&(m)->stats.type[AGGREGATE].allocation)
#define AGG_segment(m) (&(m)->stats.type[AGGREGATE].segment)
#define AGG_active(m) (&(m)->stats.type[AGGREGATE].active)
#define AGG_inactive_split(m) (&(m)->stats.type[AGGREGATE].inactive_split)
#define AGG_allocated_bytes(m) (&(m)->st.allocated)
#define AGG_reserved_bytes(m) (&(m)->st.reserved)
#define AGG_active_bytes(m) (&(m)->st.active)
#define AGG_inactive_split_bytes(m) (&(m)->stats.type[AGGREGATE].inactive_split_bytes)
#define AGG_requested_bytes(m) (&(m)->st.requested)

/* The AGGREGATE entry and the pool's own entry, as get_stat_types_for_pool selects them. */
#define POOL_INC(m, pool, name, amount)                                           \
  do {                                                                            \
    if (SIM_TORCH_STATS || ENGINE_##name) increase_stat(AGG_##name(m), (amount)); \
    if (SIM_TORCH_STATS) increase_stat(&(pool)->stats->name, (amount));           \
  } while (0)
#define POOL_DEC(m, pool, name, amount)                                           \
  do {                                                                            \
    if (SIM_TORCH_STATS || ENGINE_##name) decrease_stat(AGG_##name(m), (amount)); \
    if (SIM_TORCH_STATS) decrease_stat(&(pool)->stats->name, (amount));           \
  } while (0)
/* Which arrays' AGGREGATE the engine reads (kept in every build). */
#define ENGINE_allocation 0
#define ENGINE_segment 0
#define ENGINE_active 0
#define ENGINE_inactive_split 0
#define ENGINE_allocated_bytes 1
#define ENGINE_reserved_bytes 1
#define ENGINE_active_bytes 1
#define ENGINE_inactive_split_bytes 0
#define ENGINE_requested_bytes 1

/* ---- the model -------------------------------------------------------------------------------- */

#define CHUNK_BITS 10
#define CHUNK_SIZE (1u << CHUNK_BITS)

typedef struct torch {
  /* what every call reads, first */
  sim_alloc_stats st;       /* what the replay engine reads; the four byte counts' AGGREGATE stats */
  tconfig cfg;
  sim_device *dev;
  tblock **chunks;          /* the block arena: stable addresses, indices for handles */
  tblock *free_list;
  uint32_t next_index;
  /* Blocks waiting for free_completed, oldest first: a list, and the newest apart (it is almost
   * always the next one completed, so it never enters the list). */
  tblock *waiting_newest, *waiting_head, *waiting_tail;
  uint64_t total_allocated_memory; /* segments and mapped pages */
  uint64_t allowed_memory_maximum;
  tpool small_blocks, large_blocks;
  tstats stats;
  tseg *segments;           /* live expandable segments */
  size_t nchunks, chunks_cap;
  uint64_t tree_conflicts;  /* inserts that found an equal key (a broken state; check reports it) */
  struct tsaved *saved;     /* a start state kept by the save op, or NULL */
} torch;

/* ---- the block arena and the pools' sets ---------------------------------------------------------- */

static inline tblock *block_at(const torch *m, uint32_t index) {
  if (!index || index >= m->next_index) return NULL;
  return &m->chunks[index >> CHUNK_BITS][index & (CHUNK_SIZE - 1)];
}

static inline tblock *block_new(torch *m, int64_t stream, uint64_t size, tpool *pool, uint64_t ptr) {
  tblock *b = m->free_list;
  if (b) {
    m->free_list = b->next;
  } else {
    if (!m->next_index) m->next_index = 1; /* index 0 means none */
    uint32_t i = m->next_index++;
    if ((i >> CHUNK_BITS) >= m->nchunks) {
      sim_grow((void **)&m->chunks, &m->chunks_cap, m->nchunks + 1, sizeof *m->chunks);
      tblock *chunk = aligned_alloc(64, CHUNK_SIZE * sizeof(tblock)); /* a block per cache line pair */
      if (!chunk) {
        fputs("memplay: out of memory\n", stderr);
        abort();
      }
      memset(chunk, 0, CHUNK_SIZE * sizeof(tblock));
      m->chunks[m->nchunks++] = chunk;
    }
    b = &m->chunks[i >> CHUNK_BITS][i & (CHUNK_SIZE - 1)];
    b->index = i;
    b->gen = 0; /* a record used before a reset starts again as a new one */
  }
  b->stream = stream;
  b->size = size;
  b->ptr = ptr;
  RB_LEFT(b, link) = RB_RIGHT(b, link) = RB_PARENT(b, link) = NULL;
  b->allocated = b->waiting = 0;
  b->mapped = 1;
  b->live = 1;
  b->prev = b->next = NULL;
  b->pool = pool;
  b->es = NULL;
  b->requested = 0;
  b->gc_count_base = 0;
  return b;
}

static inline void block_delete(torch *m, tblock *b) {
  b->live = 0;
  b->gen++;
  b->next = m->free_list;
  m->free_list = b;
}

static inline uintptr_t handle_of(const tblock *b) { return (uintptr_t)b->gen << 32 | b->index; }

static inline tblock *block_of(const torch *m, uintptr_t h) {
  tblock *b = block_at(m, (uint32_t)(h & 0xffffffffu));
  return b && b->live && b->gen == (uint32_t)(h >> 32) ? b : NULL;
}

static inline int is_split(const tblock *b) { return b->prev || b->next; }
/* Neither allocated nor waiting for free_completed: the pool may hand it out, merge it, unmap it. */
static inline int is_free(const tblock *b) { return !b->allocated && !b->waiting; }

static inline void insert_into_blocks(torch *m, tpool *pool, tblock *b) {
  b->gc_count_base = pool->get_free_blocks_call_count;
  if (tfree_insert(&pool->blocks, b)) m->tree_conflicts++;
}

static inline void insert_unmapped(torch *m, tpool *pool, tblock *b) {
  if (RB_INSERT(tunmapped, &pool->unmapped, b)) m->tree_conflicts++;
}

/* ---- across the model's files (names with a leading underscore: not sim/'s interface) -------------- */

/* alloc_torch_config.c: PyTorch's defaults, then the SPEC's options when it has any, else the
 * settings the trace recorded. 0, or -1 with a message. */
int _torch_config_init(tconfig *c, const sim_alloc_config *cfg, char *err, size_t n);
extern const sim_option_spec _torch_options[];

/* alloc_torch.c */
uint64_t _torch_round_size(const torch *m, uint64_t size);
int _torch_should_split(const torch *m, const tpool *pool, uint64_t block_size, uint64_t size);
uint64_t _torch_expandable_page(const tpool *pool);
uint64_t _torch_reservation_size(const torch *m, uint64_t page);
void _torch_waiting_add(torch *m, tblock *b);
/* try_merge_blocks: src, a neighbour of dst, joins it when free; the size it added, or 0. */
uint64_t _torch_try_merge_blocks(torch *m, tblock *dst, tblock *src, tpool *pool);

/* alloc_torch_restore.c: the restore op, and the save and load ops that keep a restored state. */
int _torch_restore(void *ctx, sim_walk_item *items, size_t n, uintptr_t *handles, char *err, size_t errlen);
int _torch_save(void *ctx);
void _torch_load(void *ctx);
void _torch_saved_release(torch *m);

/* alloc_torch_check.c: the check op. */
int _torch_check(void *ctx, char *err, size_t errlen);

#endif

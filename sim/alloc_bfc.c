/* alloc_bfc.c: the `bfc` model: TensorFlow's GPU allocator (best-fit with coalescing), decision for decision. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_bfc.h"
#include "allocator.h"
#include "hashmap.h"
#include "internal/arena.h"
#include "internal/debug.h"
#include "internal/rbtree.h"

/*
 * TensorFlow's BFCAllocator as its GPU devices run it (classic TF 2.x: tsl/framework/
 * bfc_allocator.cc, core/common_runtime/gpu/gpu_bfc_allocator.cc, gpu_device.cc). In order:
 *  - every request is rounded up to 256 bytes; a request of 0 bytes gets nothing;
 *  - free chunks sit in 21 bins by size (bin b holds [256 << b, 256 << (b+1)), bin 20 holds
 *    everything from 256 MiB up), each ordered by (size, address); the first chunk that fits,
 *    searching from the request's own bin upwards, wins: best fit by size, then by address;
 *  - the chosen chunk is split when it is at least twice the request, or when what it would
 *    waste reaches the internal-fragmentation bound (128 MiB, or fragmentation_fraction of
 *    the limit); otherwise the whole chunk is handed out;
 *  - when nothing fits the allocator extends itself by a new region taken from the device:
 *    the whole memory limit at once, or with allow_growth 2 MiB, then 4, 8, ... (a request
 *    larger than the next size doubles it until it fits); if the device refuses, the size is
 *    cut by 0.9 until it is accepted or smaller than the request, once per allocator;
 *  - if that fails too, regions whose chunks are all free go back to the device (garbage
 *    collection, on by default on GPUs) when that makes the request fit under the limit, and
 *    the allocator extends once more; then it reports out of memory;
 *  - a freed chunk merges with its free neighbours; chunks never merge across regions, since
 *    the GPU sub-allocator takes each region with its own cuMemAlloc;
 *  - statistics count chunk sizes: bytes_in_use, its peak, largest_alloc_size, num_allocs.
 * The rules, their sources and what the model assumes are in docs/allocators.md ("bfc").
 */

/* ---- constants ---------------------------------------------------------------------------- */

#define BFC_MIN_ALLOCATION_BITS 8
#define BFC_MIN_ALLOCATION_SIZE (UINT64_C(1) << BFC_MIN_ALLOCATION_BITS) /* 256 */
#define BFC_NUM_BINS 21                                  /* 256 << 20 = 256 MiB starts the last bin */
#define BFC_DEFAULT_MAX_INTERNAL_FRAGMENTATION (UINT64_C(128) << 20)
#define BFC_GROWTH_FIRST_REGION (UINT64_C(2) << 20)       /* allow_growth's first region */
#define BFC_BACKPEDAL_FACTOR 0.9f                         /* a float in TensorFlow, and so here */
#define MiB (UINT64_C(1) << 20)

/* gpu_device.cc MinSystemMemory: what TensorFlow leaves to the system by compute capability
 * (optimized builds; non-optimized builds leave twice as much). */
#define BFC_SMALL_DEVICE (UINT64_C(2) << 30)              /* below this much free memory ... */
#define BFC_RESERVE_SMALL_DEVICE (UINT64_C(225) * MiB)    /* ... keep 225 MiB */
#define BFC_RESERVE_CC6 (UINT64_C(500) * MiB)             /* compute capability <= 6.x */
#define BFC_RESERVE_CC7 (UINT64_C(1050) * MiB)            /* <= 7.x */
#define BFC_RESERVE_CC8 (UINT64_C(1536) * MiB)            /* <= 8.x */
#define BFC_RESERVE_CC9 (UINT64_C(1800) * MiB)            /* newer */

#define BFC_CHUNKS_PER_PAGE 1024

/* ---- chunks, bins, regions ----------------------------------------------------------------- */

typedef struct bfc_chunk bfc_chunk;
struct bfc_chunk {
  RB_ENTRY(bfc_chunk) link; /* in its bin while free */
  uint64_t ptr, size;
  uint64_t requested;       /* the caller's bytes while in use */
  bfc_chunk *prev, *next;   /* physical neighbours in the region (next also links the spare list) */
  int64_t allocation_id;    /* -1: free */
  int bin;                  /* -1: not in a bin */
};

static int bfc_chunk_cmp(const bfc_chunk *a, const bfc_chunk *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  return a->ptr < b->ptr ? -1 : a->ptr > b->ptr;
}

RB_HEAD(bfc_bin, bfc_chunk);
SIM_RB_GENERATE(bfc_bin, bfc_chunk, link, bfc_chunk_cmp)

typedef struct bfc_region {
  uint64_t ptr, size;
  bfc_chunk *first; /* the chunk at ptr: never merged away while the region lives */
} bfc_region;

/* The settings as given: the options, then the environment. */
typedef struct bfc_settings {
  int allow_growth, gc, have_limit; /* gc: -1 not given */
  uint64_t limit;
  double fraction, frag_fraction;
  int64_t system_mb;
  int64_t env_system_mb; /* TF_DEVICE_MIN_SYS_MEMORY_IN_MB, when have_env_system_mb */
  int have_env_system_mb;
} bfc_settings;

typedef struct bfc {
  sim_device *dev;
  bfc_settings settings; /* as given, the environment's resolved (allow_growth, gc) */
  /* what the settings make of the card's memory (worked out again when it changes) */
  uint64_t memory_limit;
  uint64_t max_internal_fragmentation_bytes;
  /* growth */
  uint64_t curr_region_allocation_bytes;
  uint64_t total_region_allocated_bytes;
  int started_backpedal;
  int64_t next_allocation_id;
  /* bins: one ordered set per bin, and which are non-empty */
  struct bfc_bin bins[BFC_NUM_BINS];
  uint32_t nonempty;
  /* regions in address order */
  bfc_region *regions;
  size_t nregions, regions_cap;
  sim_arena chunks; /* chunk pointers are stable handles; a reset keeps the storage */
  uint64_t first_region_allocation_bytes; /* curr_region_allocation_bytes at create */
  /* TensorFlow's AllocatorStats */
  int64_t num_allocs, bytes_in_use, peak_bytes_in_use, largest_alloc_size;
  sim_alloc_stats st;
} bfc;

static uint64_t bfc_rounded_bytes(uint64_t bytes) {
  return BFC_MIN_ALLOCATION_SIZE * ((bytes + BFC_MIN_ALLOCATION_SIZE - 1) / BFC_MIN_ALLOCATION_SIZE);
}

static int bfc_bin_for_size(uint64_t bytes) {
  uint64_t v = (bytes < BFC_MIN_ALLOCATION_SIZE ? BFC_MIN_ALLOCATION_SIZE : bytes) >> BFC_MIN_ALLOCATION_BITS;
  int b = 63 ^ __builtin_clzll(v); /* floor(log2(v)) */
  return b < BFC_NUM_BINS - 1 ? b : BFC_NUM_BINS - 1;
}

static uint64_t bfc_double(uint64_t v) { return v > UINT64_MAX / 2 ? UINT64_MAX : v * 2; }

static bfc_chunk *bfc_chunk_new(bfc *m) {
  bfc_chunk *c = sim_arena_new(&m->chunks);
  memset(c, 0, sizeof *c);
  c->allocation_id = -1;
  c->bin = -1;
  return c;
}

static void bfc_chunk_delete(bfc *m, bfc_chunk *c) {
  c->allocation_id = -1;
  c->bin = -1;
  sim_arena_delete(&m->chunks, c);
}

static void bfc_bin_insert(bfc *m, bfc_chunk *c) {
  int b = bfc_bin_for_size(c->size);
  c->bin = b;
  bfc_bin_RB_INSERT(&m->bins[b], c);
  m->nonempty |= UINT32_C(1) << b;
}

static void bfc_bin_remove(bfc *m, bfc_chunk *c) {
  int b = c->bin;
  sim_assert_internal(b >= 0 && c->allocation_id == -1); /* a free chunk in a bin */
  bfc_bin_RB_REMOVE(&m->bins[b], c);
  c->bin = -1;
  if (RB_EMPTY(&m->bins[b])) m->nonempty &= ~(UINT32_C(1) << b);
}

static void bfc_region_add(bfc *m, uint64_t ptr, uint64_t size, bfc_chunk *first) {
  sim_grow((void **)&m->regions, &m->regions_cap, m->nregions + 1, sizeof *m->regions);
  size_t i = m->nregions;
  while (i > 0 && m->regions[i - 1].ptr > ptr) {
    m->regions[i] = m->regions[i - 1];
    i--;
  }
  m->regions[i] = (bfc_region){ptr, size, first};
  m->nregions++;
}

static void bfc_sync_gauges(bfc *m) {
  int64_t r = (int64_t)m->total_region_allocated_bytes;
  m->st.reserved.current = r;
  if (r > m->st.reserved.peak) m->st.reserved.peak = r;
}

static int bfc_check(void *ctx, char *err, size_t errlen); /* the full check, for the debug builds */

/* ---- AllocateRawInternal, step by step ------------------------------------------------------ */

/* SplitChunk: the chunk keeps its first `rounded` bytes; the rest becomes a free chunk right
 * after it. The remainder is not coalesced with its next neighbour, which is never free. */
static void bfc_split(bfc *m, bfc_chunk *c, uint64_t rounded) {
  sim_assert_internal(c->allocation_id == -1 && c->bin == -1 && c->size > rounded); /* free, out of its bin, larger */
  bfc_chunk *n = bfc_chunk_new(m);
  n->ptr = c->ptr + rounded;
  n->size = c->size - rounded;
  c->size = rounded;
  n->prev = c;
  n->next = c->next;
  if (c->next) c->next->prev = n;
  c->next = n;
  bfc_bin_insert(m, n);
}

/* FindChunkPtr: the first chunk, from the request's bin upwards, in (size, address) order, that
 * holds `rounded` bytes; split by the rule, marked in use, counted. */
static bfc_chunk *bfc_find_chunk(bfc *m, int bin, uint64_t rounded, uint64_t num_bytes) {
  for (uint32_t mask = m->nonempty & (~UINT32_C(0) << bin); mask; mask &= mask - 1) {
    int b = __builtin_ctz(mask);
    bfc_chunk *c;
    if (b == bin) {
      bfc_chunk key;
      key.size = rounded;
      key.ptr = 0;
      c = bfc_bin_RB_NFIND(&m->bins[b], &key);
    } else {
      c = RB_MIN(bfc_bin, &m->bins[b]); /* every chunk of a higher bin fits */
    }
    if (!c) continue;
    sim_assert_internal(c->size >= rounded && c->bin == b);
    bfc_bin_remove(m, c);
    /* The split rule. A chunk that fits exactly is never split (an empty remainder is no
     * chunk), which only matters for a bound of 0 bytes. */
    uint64_t excess = c->size - rounded;
    if (excess && (excess >= rounded || excess >= m->max_internal_fragmentation_bytes)) bfc_split(m, c, rounded);
    c->requested = num_bytes;
    c->allocation_id = m->next_allocation_id++;
    /* stats, as TensorFlow keeps them: chunk sizes */
    m->num_allocs++;
    m->bytes_in_use += (int64_t)c->size;
    if (m->bytes_in_use > m->peak_bytes_in_use) m->peak_bytes_in_use = m->bytes_in_use;
    if ((int64_t)c->size > m->largest_alloc_size) m->largest_alloc_size = (int64_t)c->size;
    return c;
  }
  return NULL;
}

/* Extend: one more region from the device, sized by the growth policy. */
static int bfc_extend(bfc *m, uint64_t rounded, int64_t stream) {
  uint64_t available = m->memory_limit - m->total_region_allocated_bytes;
  available = available / BFC_MIN_ALLOCATION_SIZE * BFC_MIN_ALLOCATION_SIZE;
  if (rounded > available) return 0;

  int increased = 0;
  while (rounded > m->curr_region_allocation_bytes) {
    m->curr_region_allocation_bytes = bfc_double(m->curr_region_allocation_bytes);
    increased = 1;
  }
  uint64_t bytes = m->curr_region_allocation_bytes < available ? m->curr_region_allocation_bytes : available;
  uint64_t addr = 0;
  int got = sim_device_malloc(m->dev, bytes, stream, &addr) == SIM_OK;
  if (!got && !m->started_backpedal) {
    m->started_backpedal = 1; /* only once per allocator */
    for (;;) {
      float shrunk = (float)bytes * BFC_BACKPEDAL_FACTOR;
      uint64_t next = bfc_rounded_bytes((uint64_t)shrunk);
      if (next < rounded) break;
      /* At 2304 bytes or less the rounding undoes the cut: classic TensorFlow would retry
       * the same refused size forever; the replay reports the OOM instead. */
      if (next == bytes) break;
      bytes = next;
      if (sim_device_malloc(m->dev, bytes, stream, &addr) == SIM_OK) {
        got = 1;
        break;
      }
    }
  }
  if (!got) return 0;
  if (!increased) m->curr_region_allocation_bytes = bfc_double(m->curr_region_allocation_bytes);
  m->total_region_allocated_bytes += bytes;

  /* A region of its own (the GPU sub-allocator does not coalesce regions), one free chunk. */
  bfc_chunk *c = bfc_chunk_new(m);
  c->ptr = addr;
  c->size = bytes;
  bfc_region_add(m, addr, bytes, c);
  bfc_bin_insert(m, c);
  bfc_sync_gauges(m);
  return 1;
}

/* DeallocateFreeRegions: give back regions whose chunks are all free, if that can help. */
static int bfc_deallocate_free_regions(bfc *m, uint64_t rounded) {
  if (!m->settings.gc) return 0;
  uint64_t total_free = 0;
  for (size_t i = 0; i < m->nregions; i++) {
    const bfc_chunk *c = m->regions[i].first;
    while (c && c->allocation_id == -1) c = c->next;
    if (!c) total_free += m->regions[i].size;
  }
  if (total_free == 0) return 0;
  uint64_t available = m->memory_limit - m->total_region_allocated_bytes + total_free;
  if (rounded > available) return 0;

  size_t kept = 0;
  for (size_t i = 0; i < m->nregions; i++) {
    bfc_region *r = &m->regions[i];
    const bfc_chunk *c = r->first;
    while (c && c->allocation_id == -1) c = c->next;
    if (c) {
      m->regions[kept++] = *r;
      continue;
    }
    for (bfc_chunk *d = r->first, *nx; d; d = nx) {
      nx = d->next;
      sim_assert_internal(d->allocation_id == -1);
      if (d->bin >= 0) bfc_bin_remove(m, d);
      bfc_chunk_delete(m, d);
    }
    sim_device_free(m->dev, r->ptr, r->size);
    m->total_region_allocated_bytes -= r->size;
  }
  m->nregions = kept;
  bfc_sync_gauges(m);
  m->st.num_alloc_retries++;
  sim_assert_valid(bfc_check, m);
  return 1;
}

static int bfc_alloc(void *ctx, uint64_t num_bytes, int64_t stream, sim_placement *out) {
  bfc *m = ctx;
  if (num_bytes == 0) { /* nullptr, and no statistic changes */
    *out = (sim_placement){0, 0, 0};
    return SIM_OK;
  }
  if (num_bytes > UINT64_MAX - (BFC_MIN_ALLOCATION_SIZE - 1)) { /* rounding would wrap: refuse */
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  uint64_t rounded = bfc_rounded_bytes(num_bytes);
  int bin = bfc_bin_for_size(rounded);

  bfc_chunk *c = bfc_find_chunk(m, bin, rounded, num_bytes);
  if (!c && bfc_extend(m, rounded, stream)) c = bfc_find_chunk(m, bin, rounded, num_bytes);
  if (!c && bfc_deallocate_free_regions(m, rounded) && bfc_extend(m, rounded, stream))
    c = bfc_find_chunk(m, bin, rounded, num_bytes);
  if (!c) {
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  out->addr = c->ptr;
  out->size = c->size;
  out->handle = (uintptr_t)c;
  sim_gauge_add(&m->st.allocated, (int64_t)c->size);
  sim_gauge_add(&m->st.active, (int64_t)c->size);
  sim_gauge_add(&m->st.requested, (int64_t)num_bytes);
  m->st.num_allocs++;
  return SIM_OK;
}

/* ---- DeallocateRaw: mark free, merge with free neighbours, back into a bin ------------------ */

/* Merge: c absorbs its next neighbour n. */
static void bfc_merge(bfc *m, bfc_chunk *c, bfc_chunk *n) {
  sim_assert_internal(c->next == n && n->prev == c && n->bin == -1);
  c->next = n->next;
  if (n->next) n->next->prev = c;
  c->size += n->size;
  bfc_chunk_delete(m, n);
}

/* TryToCoalesce: the next neighbour first, then the previous one. */
static bfc_chunk *bfc_coalesce(bfc *m, bfc_chunk *c) {
  if (c->next && c->next->allocation_id == -1) {
    bfc_bin_remove(m, c->next);
    bfc_merge(m, c, c->next);
  }
  if (c->prev && c->prev->allocation_id == -1) {
    bfc_chunk *p = c->prev;
    bfc_bin_remove(m, p);
    bfc_merge(m, p, c);
    c = p;
  }
  return c;
}

static void bfc_free_completed(void *ctx, uintptr_t handle) {
  bfc *m = ctx;
  bfc_chunk *c = (bfc_chunk *)handle;
  if (!c) return; /* a 0-byte request */
  sim_assert_internal(c->allocation_id != -1 && m->bytes_in_use >= (int64_t)c->size); /* it was allocated */
  c->allocation_id = -1;
  m->bytes_in_use -= (int64_t)c->size;
  m->st.allocated.current -= (int64_t)c->size;
  m->st.active.current -= (int64_t)c->size;
  m->st.requested.current -= (int64_t)c->requested;
  m->st.num_frees++;
  c->requested = 0;
  bfc_bin_insert(m, bfc_coalesce(m, c));
}

#define BFC_FAIL(...)                    \
  do {                                   \
    snprintf(err, errlen, __VA_ARGS__);  \
    return -1;                           \
  } while (0)

/* ---- a state that was there before the trace (an out-of-memory dump's) ---------------------------- */

/* A region of items[0] with the chunks in use items[1..n-1] (address order, sizes multiples of 256,
 * 0: the request rounded); the space between them is free chunks, as BFC would have merged it.
 * The region counts as extended: total_region_allocated_bytes_ grows and the next region size
 * doubles, as after Extend. No device call is made. */
static int bfc_restore_region(void *ctx, sim_walk_item *items, size_t n, uintptr_t *handles, char *err, size_t errlen) {
  bfc *m = ctx;
  const sim_walk_item *r = &items[0];
  if (!n || !r->is_segment || !r->size || r->size % BFC_MIN_ALLOCATION_SIZE || r->addr > UINT64_MAX - r->size)
    BFC_FAIL("a region must come first, its size a positive multiple of 256 bytes");
  for (size_t i = 0; i < m->nregions; i++)
    if (m->regions[i].ptr < r->addr + r->size && r->addr < m->regions[i].ptr + m->regions[i].size)
      BFC_FAIL("the region at 0x%" PRIx64 " overlaps the one at 0x%" PRIx64, r->addr, m->regions[i].ptr);
  if (r->size > m->memory_limit - m->total_region_allocated_bytes && m->total_region_allocated_bytes <= m->memory_limit)
    BFC_FAIL("the region at 0x%" PRIx64 " of %" PRIu64 " bytes goes beyond the memory limit %" PRIu64, r->addr,
             r->size, m->memory_limit);
  uint64_t at = r->addr, end = r->addr + r->size;
  for (size_t i = 1; i < n; i++) {
    sim_walk_item *b = &items[i];
    if (!b->size) b->size = bfc_rounded_bytes(b->requested ? b->requested : 1);
    if (b->is_segment || b->addr < at || b->addr >= end || b->size % BFC_MIN_ALLOCATION_SIZE || b->size > end - b->addr ||
        b->addr % BFC_MIN_ALLOCATION_SIZE != r->addr % BFC_MIN_ALLOCATION_SIZE)
      BFC_FAIL("chunk %zu at 0x%" PRIx64 " of %" PRIu64 " bytes does not fit in order in the region at 0x%" PRIx64, i,
               b->addr, b->size, r->addr);
    at = b->addr + b->size;
  }
  bfc_chunk *prev = NULL, *first = NULL;
  at = r->addr;
  for (size_t i = 1; i <= n; i++) {
    uint64_t next = i < n ? items[i].addr : end;
    bfc_chunk *cs[2] = {NULL, NULL};
    if (next > at) { /* the free space before it */
      cs[0] = bfc_chunk_new(m);
      cs[0]->ptr = at;
      cs[0]->size = next - at;
    }
    if (i < n) {
      const sim_walk_item *b = &items[i];
      bfc_chunk *c = cs[1] = bfc_chunk_new(m);
      c->ptr = b->addr;
      c->size = b->size;
      c->requested = b->requested && bfc_rounded_bytes(b->requested) <= b->size ? b->requested : b->size;
      c->allocation_id = m->next_allocation_id++;
      handles[i] = (uintptr_t)c;
      m->num_allocs++;
      m->bytes_in_use += (int64_t)c->size;
      if ((int64_t)c->size > m->largest_alloc_size) m->largest_alloc_size = (int64_t)c->size;
      sim_gauge_add(&m->st.allocated, (int64_t)c->size);
      sim_gauge_add(&m->st.active, (int64_t)c->size);
      sim_gauge_add(&m->st.requested, (int64_t)c->requested);
      at = b->addr + b->size;
    }
    for (int k = 0; k < 2; k++) {
      if (!cs[k]) continue;
      cs[k]->prev = prev;
      if (prev) prev->next = cs[k];
      else first = cs[k];
      prev = cs[k];
    }
    if (cs[0]) bfc_bin_insert(m, cs[0]);
  }
  handles[0] = 0;
  if (m->bytes_in_use > m->peak_bytes_in_use) m->peak_bytes_in_use = m->bytes_in_use;
  bfc_region_add(m, r->addr, r->size, first);
  m->total_region_allocated_bytes += r->size;
  while (r->size > m->curr_region_allocation_bytes) m->curr_region_allocation_bytes = bfc_double(m->curr_region_allocation_bytes);
  m->curr_region_allocation_bytes = bfc_double(m->curr_region_allocation_bytes);
  bfc_sync_gauges(m);
  sim_assert_valid(bfc_check, m);
  return 0;
}

static int bfc_restore(void *ctx, sim_walk_item *items, size_t n, uintptr_t *handles, char *err, size_t errlen) {
  return bfc_restore_region(ctx, items, n, handles, err, errlen) ? SIM_EINVAL : SIM_OK;
}

/* ---- settings: options, environment, the device --------------------------------------------- */

static uint64_t bfc_min_system_memory(uint64_t available, int cc_major) {
  if (available < BFC_SMALL_DEVICE) return BFC_RESERVE_SMALL_DEVICE;
  if (cc_major <= 6) return BFC_RESERVE_CC6;
  if (cc_major <= 7) return BFC_RESERVE_CC7;
  if (cc_major <= 8) return BFC_RESERVE_CC8;
  return BFC_RESERVE_CC9;
}

/* strings::safe_strto64: optional spaces around an optional sign and decimal digits. */
static int bfc_parse_int64(const char *s, int64_t *out) {
  while (*s == ' ' || *s == '\t') s++;
  int neg = *s == '-';
  if (*s == '-' || *s == '+') s++;
  if (*s < '0' || *s > '9') return -1;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (UINT64_C(1) << 63) / 10) return -1;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  while (*s == ' ' || *s == '\t') s++;
  if (*s || v > (neg ? UINT64_C(1) << 63 : (uint64_t)INT64_MAX)) return -1;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* SingleVirtualDeviceMemoryLimit's "reserve this much for the system" step: applied only when
 * the reserve is no larger than the free memory. */
static void bfc_reserve_system(uint64_t available, int64_t reserved_mb, uint64_t *limit) {
  if (reserved_mb < 0 || (uint64_t)reserved_mb > available / MiB) return;
  *limit = available - (uint64_t)reserved_mb * MiB;
}

static const char *bfc_env(const sim_alloc_config *cfg, const char *name) {
  return cfg && cfg->getenv ? cfg->getenv(name) : NULL;
}

/* memory_limit with its unit. A bare number is refused: TensorFlow's LogicalDeviceConfiguration
 * reads memory_limit=10240 as MiB while every other memplay size reads it as bytes, and either
 * guess is wrong for half the users by a factor of 1,048,576. */
static int bfc_limit_option(const sim_option *o, uint64_t *out, char *err, size_t errlen) {
  const char *v = o->value;
  while (*v == ' ') v++;
  size_t digits = strspn(v, "0123456789.");
  if (digits && !v[digits + strspn(v + digits, " ")]) {
    snprintf(err, errlen,
             "option 'memory_limit' for allocator 'bfc' wants a unit: '%s' is MiB to TensorFlow "
             "(LogicalDeviceConfiguration) and bytes elsewhere; write %sMiB or %sB",
             o->value, v, v);
    return -1;
  }
  return sim_opt_size(o, out, err, errlen);
}

/* The SPEC's options, each checked as TensorFlow checks the GPUOptions field it stands for. */
/* Without options of its own, the model takes what a trace recorded of its allocator (an
 * out-of-memory dump's memory_limit, docs/formats.md); other recorded keys are not its options. */
static int bfc_read_options(const sim_alloc_config *cfg, bfc_settings *s, char *err, size_t errlen) {
  const sim_option *opts = cfg ? cfg->opts : NULL;
  size_t nopts = cfg ? cfg->nopts : 0;
  int recorded = 0;
  if (cfg && !nopts && cfg->recorded && !cfg->recorded->error) {
    opts = cfg->recorded->opts;
    nopts = cfg->recorded->nopts;
    recorded = 1;
  }
  for (size_t i = 0; i < nopts; i++) {
    const sim_option *o = &opts[i];
    if (recorded && strcmp(o->key, "memory_limit") && strcmp(o->key, "allow_growth")) continue;
    int rc = 0;
    if (!strcmp(o->key, "allow_growth")) {
      rc = sim_opt_bool(o, &s->allow_growth, err, errlen);
    } else if (!strcmp(o->key, "garbage_collection")) {
      rc = sim_opt_bool(o, &s->gc, err, errlen);
    } else if (!strcmp(o->key, "memory_limit")) {
      /* a recorded limit is the dump's own byte count, never a figure a user typed */
      rc = recorded ? sim_opt_size(o, &s->limit, err, errlen) : bfc_limit_option(o, &s->limit, err, errlen);
      if (!rc && s->limit > (uint64_t)INT64_MAX) {
        snprintf(err, errlen, "option 'memory_limit' for allocator 'bfc' is too large: '%s'", o->value);
        rc = -1;
      }
      s->have_limit = 1;
    } else if (!strcmp(o->key, "per_process_gpu_memory_fraction")) {
      rc = sim_opt_double(o, &s->fraction, err, errlen);
      if (!rc && s->fraction < 0) {
        snprintf(err, errlen, "option '%s' for allocator 'bfc' wants a fraction of at least 0, not '%s'", o->key,
                 o->value);
        rc = -1;
      }
    } else if (!strcmp(o->key, "fragmentation_fraction")) {
      rc = sim_opt_double(o, &s->frag_fraction, err, errlen);
      if (!rc && s->frag_fraction < 0) {
        snprintf(err, errlen, "option '%s' for allocator 'bfc' wants a fraction of at least 0, not '%s'", o->key,
                 o->value);
        rc = -1;
      }
    } else if (!strcmp(o->key, "gpu_system_memory_size_in_mb")) {
      rc = sim_opt_int(o, &s->system_mb, err, errlen);
      if (!rc && s->system_mb < 0) {
        snprintf(err, errlen, "option '%s' for allocator 'bfc' wants a number of MiB of at least 0, not '%s'",
                 o->key, o->value);
        rc = -1;
      }
    } else {
      snprintf(err, errlen, "unknown option '%s' for allocator 'bfc'", o->key);
      rc = -1;
    }
    if (rc) return -1;
  }
  return 0;
}

/* TF_FORCE_GPU_ALLOW_GROWTH: exactly "true" or "false" overrides; anything else is ignored.
 * Garbage collection: the option when given, else TF_ENABLE_GPU_GARBAGE_COLLECTION, whose only
 * "off" is exactly "false" (an unparsable value keeps the default, on). */
static void bfc_read_environment(const sim_alloc_config *cfg, bfc_settings *s) {
  const char *force = bfc_env(cfg, "TF_FORCE_GPU_ALLOW_GROWTH");
  if (force && !strcmp(force, "true")) s->allow_growth = 1;
  else if (force && !strcmp(force, "false")) s->allow_growth = 0;
  if (s->gc < 0) {
    const char *v = bfc_env(cfg, "TF_ENABLE_GPU_GARBAGE_COLLECTION");
    s->gc = !(v && !strcmp(v, "false"));
  }
  const char *sys = bfc_env(cfg, "TF_DEVICE_MIN_SYS_MEMORY_IN_MB");
  s->have_env_system_mb = sys && *sys && !bfc_parse_int64(sys, &s->env_system_mb);
}

/* The memory limit: a logical device's own limit, else SingleVirtualDeviceMemoryLimit from the
 * card's memory. */
static int bfc_memory_limit(const sim_device *dev, const bfc_settings *s, uint64_t *out, char *err, size_t errlen) {
  if (s->have_limit) {
    *out = s->limit;
    return 0;
  }
  uint64_t available = dev->free_memory, total = dev->total_memory, limit;
  if (s->fraction > 1.0 && dev->cc_major < 6) {
    snprintf(err, errlen,
             "unified memory on GPUs with compute capability lower than 6.0 (pre-Pascal class GPUs) does not "
             "support oversubscription (per_process_gpu_memory_fraction %g)",
             s->fraction);
    return -1;
  }
  if (s->fraction == 0) {
    limit = available;
    uint64_t reserve = bfc_min_system_memory(available, dev->cc_major);
    if (reserve < limit) limit -= reserve;
  } else {
    double v = (double)total * s->fraction;
    limit = v >= 9223372036854775807.0 ? (uint64_t)INT64_MAX : (uint64_t)v;
  }
  if (s->system_mb > 0) bfc_reserve_system(available, s->system_mb, &limit);
  if (s->have_env_system_mb) bfc_reserve_system(available, s->env_system_mb, &limit);
  if (limit > (uint64_t)INT64_MAX) limit = (uint64_t)INT64_MAX;
  *out = limit;
  return 0;
}

/* What the limit sets: the bound on a chunk's unused bytes, and the first region's size. */
static void bfc_set_limit(bfc *m, uint64_t limit) {
  const bfc_settings *s = &m->settings;
  m->memory_limit = limit;
  if (s->frag_fraction > 0) {
    double bound = s->frag_fraction * (double)limit;
    m->max_internal_fragmentation_bytes = bound >= 9223372036854775807.0 ? (uint64_t)INT64_MAX : (uint64_t)bound;
  } else {
    m->max_internal_fragmentation_bytes = BFC_DEFAULT_MAX_INTERNAL_FRAGMENTATION;
  }
  m->curr_region_allocation_bytes =
    bfc_rounded_bytes(s->allow_growth ? (limit < BFC_GROWTH_FIRST_REGION ? limit : BFC_GROWTH_FIRST_REGION) : limit);
  m->first_region_allocation_bytes = m->curr_region_allocation_bytes;
}

static int bfc_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t errlen) {
  bfc_settings s = {.gc = -1};
  if (bfc_read_options(cfg, &s, err, errlen)) return SIM_EINVAL;
  bfc_read_environment(cfg, &s);
  uint64_t limit;
  if (bfc_memory_limit(dev, &s, &limit, err, errlen)) return SIM_EINVAL;
  bfc *m = sim_xcalloc(1, sizeof *m);
  sim_arena_init(&m->chunks, sizeof(bfc_chunk), offsetof(bfc_chunk, next), BFC_CHUNKS_PER_PAGE);
  m->dev = dev;
  m->settings = s;
  bfc_set_limit(m, limit);
  m->next_allocation_id = 1;
  for (int b = 0; b < BFC_NUM_BINS; b++) RB_INIT(&m->bins[b]);
  *ctx = m;
  return SIM_OK;
}

/* Every region goes back to the device (unless it is clearing: allocator.h, `reset`); the chunk
 * pages stay for the next replay. */
static int bfc_reset(void *ctx) {
  bfc *m = ctx;
  sim_assert_valid(bfc_check, m);
  for (size_t i = 0; !m->dev->clearing && i < m->nregions; i++)
    sim_device_free(m->dev, m->regions[i].ptr, m->regions[i].size);
  m->nregions = 0;
  for (int b = 0; b < BFC_NUM_BINS; b++) RB_INIT(&m->bins[b]);
  m->nonempty = 0;
  sim_arena_clear(&m->chunks);
  m->curr_region_allocation_bytes = m->first_region_allocation_bytes;
  m->total_region_allocated_bytes = 0;
  m->started_backpedal = 0;
  m->next_allocation_id = 1;
  m->num_allocs = m->bytes_in_use = m->peak_bytes_in_use = m->largest_alloc_size = 0;
  memset(&m->st, 0, sizeof m->st);
  return SIM_OK;
}

/* The card's memory changed (after a reset): the limit is worked out from it again. */
static int bfc_device_changed(void *ctx) {
  bfc *m = ctx;
  uint64_t limit;
  char err[SIM_ERRLEN];
  if (bfc_memory_limit(m->dev, &m->settings, &limit, err, sizeof err)) return SIM_EINVAL;
  bfc_set_limit(m, limit);
  return SIM_OK;
}

static void bfc_destroy(void *ctx) {
  bfc *m = ctx;
  sim_assert_valid(bfc_check, m);
  for (size_t i = 0; i < m->nregions; i++) sim_device_free(m->dev, m->regions[i].ptr, m->regions[i].size);
  sim_arena_release(&m->chunks);
  free(m->regions);
  free(m);
}

/* ---- what the replay asks about ------------------------------------------------------------- */

static const sim_alloc_stats *bfc_stats(void *ctx) { return &((bfc *)ctx)->st; }

/* LargestFreeChunk: the largest chunk of the highest non-empty bin. */
static uint64_t bfc_largest_free(void *ctx) {
  bfc *m = ctx;
  if (!m->nonempty) return 0;
  int b = 31 ^ __builtin_clz(m->nonempty);
  return RB_MAX(bfc_bin, &m->bins[b])->size;
}

/* strings::HumanReadableNumBytes. */
static const char *bfc_human_bytes(char *buf, size_t n, uint64_t v) {
  if (v < 1024) {
    snprintf(buf, n, "%" PRIu64 "B", v);
    return buf;
  }
  static const char units[] = "KMGTPE";
  const char *unit = units;
  while (v >= UINT64_C(1024) * 1024) {
    v /= 1024;
    unit++;
  }
  snprintf(buf, n, *unit == 'K' ? "%.1f%ciB" : "%.2f%ciB", (double)v / 1024.0, *unit);
  return buf;
}

/* The warning BFCAllocator logs when it runs out of memory, and the numbers of its dump. */
static void bfc_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  bfc *m = ctx;
  (void)stream;
  char h[32];
  if (size > UINT64_MAX - (BFC_MIN_ALLOCATION_SIZE - 1)) {
    snprintf(buf, n, "Allocator (GPU_bfc) cannot allocate %" PRIu64 " bytes: rounding to 256 bytes overflows", size);
    return;
  }
  snprintf(buf, n,
           "Allocator (GPU_bfc) ran out of memory trying to allocate %s (rounded to %" PRIu64 "). InUse: %" PRId64
           ", total_region_allocated_bytes_: %" PRIu64 ", memory_limit_: %" PRIu64 ", available bytes: %" PRIu64
           ", curr_region_allocation_bytes_: %" PRIu64 ", largest free chunk: %" PRIu64,
           bfc_human_bytes(h, sizeof h, size), bfc_rounded_bytes(size), m->bytes_in_use,
           m->total_region_allocated_bytes, m->memory_limit, m->memory_limit - m->total_region_allocated_bytes,
           m->curr_region_allocation_bytes, bfc_largest_free(m));
}

/* Regions as segments, their chunks as blocks, in address order. */
static int bfc_walk(void *ctx, sim_walk_fn fn, void *arg) {
  bfc *m = ctx;
  for (size_t i = 0; i < m->nregions; i++) {
    const bfc_region *r = &m->regions[i];
    sim_walk_item seg = {.is_segment = 1, .addr = r->ptr, .size = r->size};
    int rc = fn(arg, &seg);
    if (rc) return rc;
    for (const bfc_chunk *c = r->first; c; c = c->next) {
      int used = c->allocation_id != -1;
      sim_walk_item blk = {.addr = c->ptr,
                           .size = c->size,
                           .requested = used ? c->requested : 0,
                           .state = used ? SIM_BLOCK_ALLOCATED : SIM_BLOCK_FREE,
                           .handle = used ? (uintptr_t)c : 0};
      if ((rc = fn(arg, &blk))) return rc;
    }
  }
  return 0;
}


static int bfc_check(void *ctx, char *err, size_t errlen) {
  bfc *m = ctx;
  uint64_t total = 0, in_use = 0, requested = 0, free_chunks = 0;
  for (size_t i = 0; i < m->nregions; i++) {
    const bfc_region *r = &m->regions[i];
    if (i && m->regions[i - 1].ptr + m->regions[i - 1].size > r->ptr)
      BFC_FAIL("regions at 0x%" PRIx64 " and 0x%" PRIx64 " overlap or are out of order", m->regions[i - 1].ptr, r->ptr);
    total += r->size;
    uint64_t at = r->ptr;
    const bfc_chunk *prev = NULL;
    if (!r->first || r->first->prev) BFC_FAIL("region at 0x%" PRIx64 " does not start with its first chunk", r->ptr);
    for (const bfc_chunk *c = r->first; c; prev = c, c = c->next) {
      if (c->ptr != at) BFC_FAIL("chunk at 0x%" PRIx64 " should start at 0x%" PRIx64, c->ptr, at);
      if (c->prev != prev) BFC_FAIL("chunk at 0x%" PRIx64 " has a wrong previous neighbour", c->ptr);
      if (!c->size || c->size % BFC_MIN_ALLOCATION_SIZE)
        BFC_FAIL("chunk at 0x%" PRIx64 " has size %" PRIu64 ", not a positive multiple of 256", c->ptr, c->size);
      at += c->size;
      if (c->allocation_id == -1) {
        free_chunks++;
        if (prev && prev->allocation_id == -1) BFC_FAIL("free chunks at 0x%" PRIx64 " and before it were not merged", c->ptr);
        if (c->bin != bfc_bin_for_size(c->size))
          BFC_FAIL("free chunk at 0x%" PRIx64 " of %" PRIu64 " bytes is in bin %d", c->ptr, c->size, c->bin);
        if (bfc_bin_RB_FIND(&m->bins[c->bin], (bfc_chunk *)c) != c)
          BFC_FAIL("free chunk at 0x%" PRIx64 " is missing from bin %d", c->ptr, c->bin);
      } else {
        if (c->bin != -1) BFC_FAIL("chunk in use at 0x%" PRIx64 " is in bin %d", c->ptr, c->bin);
        if (bfc_rounded_bytes(c->requested) > c->size)
          BFC_FAIL("chunk at 0x%" PRIx64 " of %" PRIu64 " bytes holds a request of %" PRIu64, c->ptr, c->size,
                   c->requested);
        in_use += c->size;
        requested += c->requested;
      }
    }
    if (at != r->ptr + r->size) BFC_FAIL("chunks of region at 0x%" PRIx64 " do not cover it", r->ptr);
  }
  uint64_t binned = 0;
  for (int b = 0; b < BFC_NUM_BINS; b++) {
    bfc_chunk *c;
    uint64_t k = 0;
    if (!bfc_bin_RB_VALID(&m->bins[b])) BFC_FAIL("bin %d is not an ordered tree", b);
    RB_FOREACH(c, bfc_bin, &m->bins[b]) k++;
    if (!!k != !!(m->nonempty & (UINT32_C(1) << b))) BFC_FAIL("bin %d is marked wrongly as %s", b, k ? "empty" : "in use");
    binned += k;
  }
  if (binned != free_chunks) BFC_FAIL("%" PRIu64 " chunks in bins, %" PRIu64 " free chunks in regions", binned, free_chunks);
  if (total != m->total_region_allocated_bytes)
    BFC_FAIL("regions hold %" PRIu64 " bytes, total_region_allocated_bytes_ says %" PRIu64, total,
             m->total_region_allocated_bytes);
  if (total > m->memory_limit) BFC_FAIL("regions hold %" PRIu64 " bytes over the limit %" PRIu64, total, m->memory_limit);
  if ((int64_t)in_use != m->bytes_in_use || (int64_t)in_use != m->st.allocated.current)
    BFC_FAIL("chunks in use hold %" PRIu64 " bytes, bytes_in_use says %" PRId64, in_use, m->bytes_in_use);
  if ((int64_t)requested != m->st.requested.current)
    BFC_FAIL("requests in use sum to %" PRIu64 " bytes, the gauge says %" PRId64, requested, m->st.requested.current);
  if ((int64_t)total != m->st.reserved.current) BFC_FAIL("the reserved gauge disagrees with the regions");
  return 0;
}

/* ---- TensorFlow's own statistics ------------------------------------------------------------- */

int sim_bfc_get_info(const sim_allocator *a, sim_bfc_info *out) {
  if (!a || a->ops != &sim_bfc_ops || !a->ctx) return -1;
  const bfc *m = a->ctx;
  *out = (sim_bfc_info){
    .num_allocs = m->num_allocs,
    .bytes_in_use = m->bytes_in_use,
    .peak_bytes_in_use = m->peak_bytes_in_use,
    .largest_alloc_size = m->largest_alloc_size,
    .bytes_limit = (int64_t)m->memory_limit,
    .memory_limit = m->memory_limit,
    .region_bytes = m->total_region_allocated_bytes,
    .curr_region_allocation_bytes = m->curr_region_allocation_bytes,
    .max_internal_fragmentation_bytes = m->max_internal_fragmentation_bytes,
    .regions = m->nregions,
    .allow_growth = m->settings.allow_growth,
    .garbage_collection = m->settings.gc,
    .backpedal_started = m->started_backpedal,
  };
  return 0;
}

int sim_bfc_clear_stats(sim_allocator *a) {
  if (!a || a->ops != &sim_bfc_ops || !a->ctx) return -1;
  bfc *m = a->ctx;
  m->num_allocs = 0;
  m->peak_bytes_in_use = m->bytes_in_use;
  m->largest_alloc_size = 0;
  return 0;
}

const sim_allocator_ops sim_bfc_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "bfc",
  .summary = "TensorFlow's GPU BFC allocator: 256-byte chunks in 21 bins, best fit, regions up to the limit",
  .options = (const sim_option_spec[]){
    {"allow_growth", "true|false: regions of 2 MiB, doubling, instead of the whole limit at once (default false)"},
    {"memory_limit", "size with a unit (10240MiB, 10GiB): the allocator's limit (a logical device's memory_limit, "
                     "which TensorFlow takes in MiB); default: TensorFlow's"},
    {"per_process_gpu_memory_fraction", "number: limit = this fraction of the card's memory"},
    {"gpu_system_memory_size_in_mb", "integer: limit = free memory minus this many MiB"},
    {"garbage_collection", "true|false: free wholly free regions before giving up (default true)"},
    {"fragmentation_fraction", "number: split when the waste reaches this fraction of the limit (default: 128 MiB)"},
    {NULL, NULL},
  },
  .create = bfc_create,
  .destroy = bfc_destroy,
  .alloc = bfc_alloc,
  .free_completed = bfc_free_completed,
  .stats = bfc_stats,
  .largest_free = bfc_largest_free,
  .describe_oom = bfc_describe_oom,
  .walk = bfc_walk,
  .check = bfc_check,
  .restore = bfc_restore,
  .reset = bfc_reset,
  .device_changed = bfc_device_changed,
};

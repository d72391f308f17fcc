/* alloc_async.c: the `async` model: cudaMallocAsync's default stream-ordered memory pool. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "fitset.h"
#include "hashmap.h"
#include "internal/arena.h"
#include "internal/debug.h"

/*
 * The CUDA driver's default memory pool as cudaMallocAsync/cudaFreeAsync use it (CUDA
 * Programming Guide, "Stream-Ordered Memory Allocator"; runtime API, cudaMemPoolSetAttribute).
 * What the documentation fixes:
 *  - a free is ordered in its stream: the memory can serve the next allocation on that stream
 *    at once;
 *  - other streams may reuse it once a synchronization (stream, event or device) has shown the
 *    free complete, whatever the reuse policies say; with cudaMemPoolReuseAllowOpportunistic
 *    (default on) also whenever the free is known to have executed; with
 *    cudaMemPoolReuseAllowInternalDependencies (default on), when the pool cannot get more
 *    physical memory, by making the allocating stream wait for the freeing one;
 *  - at each synchronization, a pool holding more than cudaMemPoolAttrReleaseThreshold bytes
 *    (default 0) gives unused physical memory back to the device.
 * What the driver does not document, and this model assumes (docs/allocators.md, "async",
 * gives the sources):
 *  - sizes are rounded up to 512 bytes;
 *  - the pool grows by the smallest multiple of 32 MiB that holds the request, one piece
 *    (segment) per growth; an allocation never spans two pieces; a piece goes back to the
 *    device only as a whole, once nothing in it is allocated or awaiting reuse;
 *  - placement is best fit by size, then address, among the blocks the stream may use;
 *    free neighbours merge, but two frees pending on different streams: a free joins the free
 *    memory beside it, which stays its stream's own until a synchronization;
 *  - a free is issued on the stream that allocated the block;
 *  - the replay learns of device progress only at synchronizations: with the opportunistic
 *    policy on, a synchronization shows every earlier free complete (the device has caught
 *    up); with it off, only the frees of the synchronized stream (or all, for the device);
 *  - pieces are released newest first, until the pool holds no more than the threshold.
 */

/* ---- constants ------------------------------------------------------------------------------ */

#define ASYNC_GRANULE UINT64_C(512)            /* allocation granularity */
#define ASYNC_GROWTH (UINT64_C(32) << 20)      /* the pool grows in multiples of 32 MiB */
#define ASYNC_CHUNKS_PER_PAGE 1024

/* ---- blocks, pieces, streams ------------------------------------------------------------------ */

enum { AB_USED = 0, AB_PENDING = 1, AB_READY = 2 };

typedef struct async_block async_block;
typedef struct async_seg async_seg;

struct async_block {
  RB_ENTRY(async_block) link; /* in the ready set or the pending set while free */
  uint64_t addr, size, requested;
  async_block *prev, *next;  /* neighbours in the piece (next also links the spare list) */
  async_seg *seg;
  int64_t stream;            /* allocating stream; for a pending block, the stream it was freed in;
                                0 for ready memory, which every stream may use */
  int state;
  uint16_t cls;              /* its size class while in a set (fitset.h) */
};

/* Free blocks by (stream, size, address): the ready set holds them all under stream 0, the
 * pending set under the stream each was freed in; lower_bound is the best fit. */
SIM_FITSET_DEFINE(async_set, async_block, link, cls, stream, size, addr)

struct async_seg {
  uint64_t addr, size;
  uint64_t seq;          /* growth order: the newest piece is released first */
  async_block *first;    /* its first block (the spare records' link once given back) */
};

typedef struct async_stream {
  int64_t stream;
  uint64_t bytes; /* its frees in the pending set: not yet reusable by other streams */
} async_stream;

typedef struct async_pool {
  sim_device *dev;
  /* cudaMemPool attributes */
  uint64_t release_threshold;
  int follow_event_dependencies, allow_opportunistic, allow_internal_dependencies;
  /* free memory every stream may use; frees each stream may use, not yet the others */
  struct async_set ready, pending;
  sim_map stream_idx; /* stream -> index into streams */
  async_stream *streams;
  size_t nstreams, streams_cap;
  size_t last_idx;    /* the stream looked up last, when nstreams > 0 */
  uint64_t pending_bytes;
  /* pieces, in the order they were taken (newest last) */
  async_seg **segs;
  size_t nsegs, segs_cap;
  async_seg **empty;  /* scratch for async_release: the pieces that hold nothing */
  size_t empty_cap;
  uint64_t seg_seq, reserved;
  /* storage with stable addresses, which a reset keeps */
  sim_arena blocks, seg_records;
  uint64_t last_growth; /* the growth the last failed request asked for (for describe_oom) */
  sim_alloc_stats st;
} async_pool;

static async_block *async_block_new(async_pool *p) {
  async_block *b = sim_arena_new(&p->blocks);
  memset(b, 0, sizeof *b);
  return b;
}

static void async_block_delete(async_pool *p, async_block *b) { sim_arena_delete(&p->blocks, b); }

/* Programs use a few streams: the last one, then a scan of a few, answer most look-ups without
 * the map. */
#define ASYNC_FEW_STREAMS 8

static async_stream *async_stream_lookup(async_pool *p, int64_t stream, int create);

static inline async_stream *async_stream_get(async_pool *p, int64_t stream, int create) {
  if (p->nstreams && p->streams[p->last_idx].stream == stream) return &p->streams[p->last_idx];
  return async_stream_lookup(p, stream, create);
}

/* The stream's record when it is not the one looked up last. */
static async_stream *async_stream_lookup(async_pool *p, int64_t stream, int create) {
  if (p->nstreams <= ASYNC_FEW_STREAMS) {
    for (size_t i = 0; i < p->nstreams; i++)
      if (p->streams[i].stream == stream) {
        p->last_idx = i;
        return &p->streams[i];
      }
    if (!create) return NULL;
  }
  int existed = 0;
  uint64_t *slot;
  if (!create) {
    slot = sim_map_get(&p->stream_idx, (uint64_t)stream);
    if (!slot) return NULL;
  } else {
    slot = sim_map_put(&p->stream_idx, (uint64_t)stream, &existed);
    if (!existed) {
      sim_grow((void **)&p->streams, &p->streams_cap, p->nstreams + 1, sizeof *p->streams);
      async_stream *s = &p->streams[p->nstreams];
      s->stream = stream;
      s->bytes = 0;
      *slot = p->nstreams++;
    }
  }
  p->last_idx = (size_t)*slot;
  return &p->streams[p->last_idx];
}

static void async_insert(async_pool *p, async_block *b) {
  if (b->state == AB_READY) {
    sim_assert_internal(b->stream == 0);
    async_set_insert(&p->ready, b);
  } else {
    async_stream *s = async_stream_get(p, b->stream, 1);
    async_set_insert(&p->pending, b);
    s->bytes += b->size;
    p->pending_bytes += b->size;
  }
}

static void async_remove(async_pool *p, async_block *b) {
  sim_assert_internal(b->state != AB_USED);
  if (b->state == AB_READY) {
    async_set_remove(&p->ready, b);
  } else {
    async_stream *s = async_stream_get(p, b->stream, 0);
    sim_assert_internal(s && s->bytes >= b->size && p->pending_bytes >= b->size);
    async_set_remove(&p->pending, b);
    s->bytes -= b->size;
    p->pending_bytes -= b->size;
  }
}

static void async_sync_gauges(async_pool *p) {
  int64_t r = (int64_t)p->reserved;
  p->st.reserved.current = r;
  if (r > p->st.reserved.peak) p->st.reserved.peak = r;
  int64_t active = p->st.allocated.current + (int64_t)p->pending_bytes;
  p->st.active.current = active;
  if (active > p->st.active.peak) p->st.active.peak = active;
}

/* Two free neighbours merge unless they are frees pending on two different streams: memory
 * every stream may use joins a stream's pending free, which that stream may use at once. */
static int async_mergeable(const async_block *a, const async_block *b) {
  if (a->state == AB_USED || b->state == AB_USED) return 0;
  if (a->state == AB_READY || b->state == AB_READY) return 1;
  return a->stream == b->stream;
}

/* What `into` becomes after taking in `other`: pending on a stream when either was. */
static void async_merge_kind(async_block *into, const async_block *other) {
  if (other->state == AB_PENDING) {
    into->state = AB_PENDING;
    into->stream = other->stream;
  }
}

/* Merges b's mergeable free neighbours into it; b is in no tree. */
static async_block *async_coalesce(async_pool *p, async_block *b) {
  sim_assert_internal(b->state != AB_USED);
  async_block *n = b->next;
  if (n && async_mergeable(b, n)) {
    async_remove(p, n);
    async_merge_kind(b, n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    async_block_delete(p, n);
  }
  async_block *v = b->prev;
  if (v && async_mergeable(v, b)) {
    async_remove(p, v);
    async_merge_kind(v, b);
    v->size += b->size;
    v->next = b->next;
    if (b->next) b->next->prev = v;
    async_block_delete(p, b);
    b = v;
  }
  return b;
}

static int async_check(void *ctx, char *err, size_t errlen); /* the full check, for the debug builds */

/* ---- cudaMallocAsync ------------------------------------------------------------------------ */

/* The smallest block of the set's stream that holds `rounded`, the lowest among equal sizes. */
static async_block *async_best_fit(struct async_set *set, int64_t stream, uint64_t rounded) {
  return async_set_lower_bound(set, stream, rounded);
}

static async_block *async_better(async_block *a, async_block *b) {
  if (!a) return b;
  if (!b) return a;
  return async_set_cmp(a, b) <= 0 ? a : b;
}

/* Grows the pool by the smallest multiple of 32 MiB that holds `rounded`. */
static async_block *async_grow(async_pool *p, uint64_t rounded, int64_t stream) {
  uint64_t size = (rounded + ASYNC_GROWTH - 1) / ASYNC_GROWTH * ASYNC_GROWTH;
  if (size < rounded) return NULL; /* overflow */
  p->last_growth = size;
  uint64_t addr;
  if (sim_device_malloc(p->dev, size, stream, &addr) != SIM_OK) return NULL;
  async_seg *seg = sim_arena_new(&p->seg_records);
  seg->addr = addr;
  seg->size = size;
  seg->seq = ++p->seg_seq;
  async_block *b = async_block_new(p);
  b->addr = addr;
  b->size = size;
  b->seg = seg;
  b->state = AB_READY;
  seg->first = b;
  sim_grow((void **)&p->segs, &p->segs_cap, p->nsegs + 1, sizeof *p->segs);
  p->segs[p->nsegs++] = seg;
  p->reserved += size;
  async_insert(p, b);
  return b;
}

/* Cuts `rounded` bytes off the front of free block b for `stream`; the rest stays free as it was. */
static void async_take(async_pool *p, async_block *b, uint64_t rounded, uint64_t requested, int64_t stream) {
  sim_assert_internal(b->state != AB_USED && b->size >= rounded);
  /* ready memory, or this stream's own frees, or (waiting on another stream) internal dependencies */
  sim_assert_internal(b->state == AB_READY || b->stream == stream || p->allow_internal_dependencies);
  async_remove(p, b);
  if (b->size > rounded) {
    async_block *n = async_block_new(p);
    n->addr = b->addr + rounded;
    n->size = b->size - rounded;
    n->seg = b->seg;
    n->state = b->state;
    n->stream = b->stream;
    n->prev = b;
    n->next = b->next;
    if (b->next) b->next->prev = n;
    b->next = n;
    b->size = rounded;
    async_insert(p, n);
  }
  b->state = AB_USED;
  b->stream = stream;
  b->requested = requested;
}

static int async_alloc(void *ctx, uint64_t size, int64_t stream, sim_placement *out) {
  async_pool *p = ctx;
  if (size == 0) {
    *out = (sim_placement){0, 0, 0};
    return SIM_OK;
  }
  if (size > UINT64_MAX - (ASYNC_GRANULE - 1)) {
    p->last_growth = 0;
    p->st.num_ooms++;
    return SIM_EOOM;
  }
  uint64_t rounded = (size + ASYNC_GRANULE - 1) / ASYNC_GRANULE * ASYNC_GRANULE;

  /* 1. memory every stream may use, and this stream's own frees */
  async_block *b = async_best_fit(&p->ready, 0, rounded);
  if (p->pending.count) b = async_better(b, async_best_fit(&p->pending, stream, rounded));
  /* 2. more physical memory from the device */
  if (!b) b = async_grow(p, rounded, stream);
  /* 3. memory freed in other streams, by waiting for them (internal dependencies) */
  if (!b && p->allow_internal_dependencies) {
    for (size_t i = 0; i < p->nstreams; i++)
      if (p->streams[i].stream != stream) b = async_better(b, async_best_fit(&p->pending, p->streams[i].stream, rounded));
    if (b) p->st.num_alloc_retries++;
  }
  if (!b) {
    p->st.num_ooms++;
    return SIM_EOOM;
  }
  async_take(p, b, rounded, size, stream);
  out->addr = b->addr;
  out->size = b->size;
  out->handle = (uintptr_t)b;
  sim_gauge_add(&p->st.allocated, (int64_t)b->size);
  sim_gauge_add(&p->st.requested, (int64_t)size);
  p->st.num_allocs++;
  async_sync_gauges(p);
  return SIM_OK;
}

/* ---- cudaFreeAsync -------------------------------------------------------------------------- */

static void async_free_completed(void *ctx, uintptr_t handle) {
  async_pool *p = ctx;
  async_block *b = (async_block *)handle;
  if (!b) return; /* a 0-byte request */
  sim_assert_internal(b->state == AB_USED && p->st.allocated.current >= (int64_t)b->size);
  p->st.allocated.current -= (int64_t)b->size;
  p->st.requested.current -= (int64_t)b->requested;
  p->st.num_frees++;
  b->requested = 0;
  b->state = AB_PENDING; /* in the order of its own stream */
  async_insert(p, async_coalesce(p, b));
  async_sync_gauges(p);
}

/* ---- synchronization: frees made available, memory above the threshold released ------------- */

static void async_make_ready(async_pool *p, async_stream *s) {
  async_block *b;
  while (s->bytes && (b = async_set_lower_bound(&p->pending, s->stream, 0))) {
    async_remove(p, b);
    b->state = AB_READY;
    b->stream = 0;
    async_insert(p, async_coalesce(p, b));
  }
}

/* Gives back pieces that hold nothing, newest first, while the pool holds more than `keep`.
 * Releasing one piece changes no other piece's emptiness, so the candidates are found in one
 * pass, and the pieces kept are compacted in another. */
static void async_release(async_pool *p, uint64_t keep) {
  if (p->reserved <= keep) return;
  sim_grow((void **)&p->empty, &p->empty_cap, p->nsegs, sizeof *p->empty);
  async_seg **empty = p->empty;
  size_t n = 0;
  for (size_t i = 0; i < p->nsegs; i++) {
    async_seg *s = p->segs[i];
    if (s->first->state == AB_READY && s->first->size == s->size) empty[n++] = s;
  }
  if (!n) return;
  for (size_t k = n; k-- > 0 && p->reserved > keep;) { /* newest first */
    async_seg *s = empty[k];
    sim_assert_internal(p->reserved >= s->size);
    async_remove(p, s->first);
    async_block_delete(p, s->first);
    sim_device_free(p->dev, s->addr, s->size);
    p->reserved -= s->size;
    s->first = NULL; /* released: left out below */
  }
  size_t kept = 0;
  for (size_t i = 0; i < p->nsegs; i++) {
    if (p->segs[i]->first) p->segs[kept++] = p->segs[i];
    else sim_arena_delete(&p->seg_records, p->segs[i]);
  }
  p->nsegs = kept;
}

static void async_synchronize(void *ctx, int64_t stream) {
  async_pool *p = ctx;
  if (stream < 0 || p->allow_opportunistic) {
    for (size_t i = 0; i < p->nstreams; i++) async_make_ready(p, &p->streams[i]);
  } else {
    async_stream *s = async_stream_get(p, stream, 0);
    if (s) async_make_ready(p, s);
  }
  async_release(p, p->release_threshold);
  async_sync_gauges(p);
}

/* torch.cuda.empty_cache under PyTorch's cudaMallocAsync backend: cudaDeviceSynchronize, then
 * cudaMemPoolTrimTo(pool, 0). */
static void async_empty_cache(void *ctx) {
  async_pool *p = ctx;
  for (size_t i = 0; i < p->nstreams; i++) async_make_ready(p, &p->streams[i]);
  async_release(p, 0);
  async_sync_gauges(p);
  sim_assert_valid(async_check, p);
}

/* ---- creation ------------------------------------------------------------------------------- */

static int async_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t errlen) {
  uint64_t threshold = 0;
  int follow = 1, opportunistic = 1, internal = 1;
  for (size_t i = 0; cfg && i < cfg->nopts; i++) {
    const sim_option *o = &cfg->opts[i];
    int rc;
    if (!strcmp(o->key, "release_threshold")) {
      if (!strcmp(o->value, "max") || !strcmp(o->value, "UINT64_MAX")) {
        threshold = UINT64_MAX;
        rc = 0;
      } else {
        rc = sim_opt_size(o, &threshold, err, errlen);
      }
    } else if (!strcmp(o->key, "reuse_follow_event_dependencies")) {
      rc = sim_opt_bool(o, &follow, err, errlen);
    } else if (!strcmp(o->key, "reuse_allow_opportunistic")) {
      rc = sim_opt_bool(o, &opportunistic, err, errlen);
    } else if (!strcmp(o->key, "reuse_allow_internal_dependencies")) {
      rc = sim_opt_bool(o, &internal, err, errlen);
    } else {
      snprintf(err, errlen, "unknown option '%s' for allocator 'async'", o->key);
      rc = -1;
    }
    if (rc) return SIM_EINVAL;
  }
  async_pool *p = sim_xcalloc(1, sizeof *p);
  sim_arena_init(&p->blocks, sizeof(async_block), offsetof(async_block, next), ASYNC_CHUNKS_PER_PAGE);
  sim_arena_init(&p->seg_records, sizeof(async_seg), offsetof(async_seg, first), 64);
  p->dev = dev;
  p->release_threshold = threshold;
  p->follow_event_dependencies = follow;
  p->allow_opportunistic = opportunistic;
  p->allow_internal_dependencies = internal;
  async_set_init(&p->ready);
  async_set_init(&p->pending);
  sim_map_init(&p->stream_idx);
  *ctx = p;
  return SIM_OK;
}

static void async_destroy(void *ctx) {
  async_pool *p = ctx;
  sim_assert_valid(async_check, p);
  for (size_t i = 0; i < p->nsegs; i++) sim_device_free(p->dev, p->segs[i]->addr, p->segs[i]->size);
  free(p->segs);
  free(p->empty);
  sim_arena_release(&p->blocks);
  sim_arena_release(&p->seg_records);
  async_set_release(&p->ready);
  async_set_release(&p->pending);
  free(p->streams);
  sim_map_release(&p->stream_idx);
  free(p);
}

/* Every piece goes back to the device (unless it is clearing: allocator.h, `reset`); the block
 * pages, the stream table and the piece list stay for the next replay. Streams are forgotten, so
 * they are met again in the same order. */
static int async_reset(void *ctx) {
  async_pool *p = ctx;
  sim_assert_valid(async_check, p);
  for (size_t i = 0; !p->dev->clearing && i < p->nsegs; i++)
    sim_device_free(p->dev, p->segs[i]->addr, p->segs[i]->size);
  p->nsegs = 0;
  p->seg_seq = p->reserved = 0;
  async_set_clear(&p->ready);
  async_set_clear(&p->pending);
  sim_map_clear(&p->stream_idx);
  p->nstreams = 0;
  p->pending_bytes = 0;
  sim_arena_clear(&p->blocks);
  sim_arena_clear(&p->seg_records);
  p->last_growth = 0;
  memset(&p->st, 0, sizeof p->st);
  return SIM_OK;
}

/* ---- what the replay asks about ------------------------------------------------------------- */

static const sim_alloc_stats *async_stats(void *ctx) { return &((async_pool *)ctx)->st; }

static uint64_t async_largest_free(void *ctx) {
  async_pool *p = ctx;
  uint64_t best = 0;
  async_block *b = async_set_last_in_stream(&p->ready, 0);
  if (b) best = b->size;
  for (size_t i = 0; i < p->nstreams && p->pending.count; i++) {
    b = async_set_last_in_stream(&p->pending, p->streams[i].stream);
    if (b && b->size > best) best = b->size;
  }
  return best;
}

static void async_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  async_pool *p = ctx;
  if (size > UINT64_MAX - (ASYNC_GRANULE - 1)) {
    snprintf(buf, n, "cudaMallocAsync of %" PRIu64 " bytes: out of memory (the size cannot be rounded)", size);
    return;
  }
  snprintf(buf, n,
           "cudaMallocAsync of %" PRIu64 " bytes on stream %" PRId64 ": out of memory; the pool holds %" PRIu64
           " bytes (%" PRId64 " used, largest free block %" PRIu64 ") and growing it by %" PRIu64
           " bytes failed with %" PRIu64 " of %" PRIu64 " bytes taken on the device",
           size, stream, p->reserved, p->st.allocated.current, async_largest_free(p), p->last_growth, p->dev->used,
           p->dev->capacity);
}

static int async_lower_first(const void *a, const void *b) {
  uint64_t x = (*(async_seg *const *)a)->addr, y = (*(async_seg *const *)b)->addr;
  return (x > y) - (x < y);
}

/* The pieces in address order, in a new array (the pool keeps them in the order they were taken). */
static async_seg **async_by_address(const async_pool *p) {
  async_seg **v = sim_xmalloc((p->nsegs ? p->nsegs : 1) * sizeof *v);
  if (p->nsegs) memcpy(v, p->segs, p->nsegs * sizeof *v);
  qsort(v, p->nsegs, sizeof *v, async_lower_first);
  return v;
}

static int async_walk_piece(const async_seg *s, sim_walk_fn fn, void *arg) {
  sim_walk_item seg = {.is_segment = 1, .addr = s->addr, .size = s->size};
  int rc = fn(arg, &seg);
  if (rc) return rc;
  for (const async_block *b = s->first; b; b = b->next) {
    sim_walk_item blk = {.addr = b->addr,
                         .size = b->size,
                         .requested = b->state == AB_USED ? b->requested : 0,
                         .stream = b->stream,
                         .state = b->state == AB_USED      ? SIM_BLOCK_ALLOCATED
                                  : b->state == AB_PENDING ? SIM_BLOCK_PENDING_FREE
                                                           : SIM_BLOCK_FREE,
                         .handle = b->state == AB_READY ? 0 : (uintptr_t)b};
    if ((rc = fn(arg, &blk))) return rc;
  }
  return 0;
}

static int async_walk(void *ctx, sim_walk_fn fn, void *arg) {
  async_pool *p = ctx;
  async_seg **segs = async_by_address(p);
  int rc = 0;
  for (size_t i = 0; i < p->nsegs && !rc; i++) rc = async_walk_piece(segs[i], fn, arg);
  free(segs);
  return rc;
}

#define ASYNC_FAIL(...)                  \
  do {                                   \
    snprintf(err, errlen, __VA_ARGS__);  \
    return -1;                           \
  } while (0)

/* The pieces, in address order, do not overlap; they were taken in the order the pool keeps. */
static int async_check_pieces(const async_pool *p, char *err, size_t errlen) {
  for (size_t i = 1; i < p->nsegs; i++)
    if (p->segs[i - 1]->seq >= p->segs[i]->seq)
      ASYNC_FAIL("pieces at 0x%" PRIx64 " and 0x%" PRIx64 " are out of the order they were taken", p->segs[i - 1]->addr,
                 p->segs[i]->addr);
  async_seg **v = async_by_address(p);
  int rc = 0;
  for (size_t i = 1; i < p->nsegs && !rc; i++)
    if (v[i - 1]->addr + v[i - 1]->size > v[i]->addr) {
      snprintf(err, errlen, "pieces at 0x%" PRIx64 " and 0x%" PRIx64 " overlap", v[i - 1]->addr, v[i]->addr);
      rc = -1;
    }
  free(v);
  return rc;
}

/* Whether free block b is in the set. */
static int async_in_set(struct async_set *set, const async_block *b) {
  for (async_block *x = async_set_lower_bound(set, b->stream, b->size); x && x->size == b->size;
       x = async_set_next_in_stream(set, x))
    if (x == b) return 1;
  return 0;
}

static int async_check(void *ctx, char *err, size_t errlen) {
  async_pool *p = ctx;
  uint64_t reserved = 0, used = 0, requested = 0, pending = 0, nfree = 0;
  if (async_check_pieces(p, err, errlen)) return -1;
  for (size_t i = 0; i < p->nsegs; i++) {
    const async_seg *s = p->segs[i];
    if (s->size % ASYNC_GROWTH) ASYNC_FAIL("piece at 0x%" PRIx64 " is not a multiple of 32 MiB", s->addr);
    reserved += s->size;
    uint64_t at = s->addr;
    const async_block *prev = NULL;
    for (const async_block *b = s->first; b; prev = b, b = b->next) {
      if (b->addr != at || b->prev != prev || b->seg != s)
        ASYNC_FAIL("block at 0x%" PRIx64 " is not linked in place in its piece", b->addr);
      if (!b->size || b->size % ASYNC_GRANULE)
        ASYNC_FAIL("block at 0x%" PRIx64 " has size %" PRIu64 ", not a multiple of 512", b->addr, b->size);
      at += b->size;
      if (prev && async_mergeable(prev, b)) ASYNC_FAIL("free blocks at 0x%" PRIx64 " and before it were not merged", b->addr);
      if (b->state == AB_USED) {
        used += b->size;
        requested += b->requested;
      } else {
        nfree++;
        if (b->state == AB_PENDING) pending += b->size;
        if (b->state == AB_READY && b->stream)
          ASYNC_FAIL("ready block at 0x%" PRIx64 " keeps stream %" PRId64 ", not 0", b->addr, b->stream);
        if (!async_in_set(b->state == AB_READY ? &p->ready : &p->pending, b))
          ASYNC_FAIL("free block at 0x%" PRIx64 " is missing from its set", b->addr);
      }
    }
    if (at != s->addr + s->size) ASYNC_FAIL("blocks of the piece at 0x%" PRIx64 " do not cover it", s->addr);
  }
  uint64_t per_stream = 0;
  if (!async_set_check(&p->ready) || !async_set_check(&p->pending)) ASYNC_FAIL("the free blocks are not ordered sets");
  for (size_t i = 0; i < p->nstreams; i++) {
    uint64_t bytes = 0;
    for (async_block *b = async_set_lower_bound(&p->pending, p->streams[i].stream, 0); b;
         b = async_set_next_in_stream(&p->pending, b))
      bytes += b->size;
    if (bytes != p->streams[i].bytes) ASYNC_FAIL("stream %" PRId64 " counts its pending bytes wrongly", p->streams[i].stream);
    per_stream += bytes;
  }
  if (p->ready.count + p->pending.count != nfree)
    ASYNC_FAIL("%zu blocks in the sets, %" PRIu64 " free blocks in pieces", p->ready.count + p->pending.count, nfree);
  if (pending != p->pending_bytes || per_stream != pending) ASYNC_FAIL("pending bytes disagree");
  if (reserved != p->reserved || (int64_t)reserved != p->st.reserved.current) ASYNC_FAIL("reserved bytes disagree");
  if ((int64_t)used != p->st.allocated.current) ASYNC_FAIL("allocated bytes disagree");
  if ((int64_t)requested != p->st.requested.current) ASYNC_FAIL("requested bytes disagree");
  return 0;
}

const sim_allocator_ops sim_async_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "async",
  .traits = SIM_ALLOC_STREAM_ORDERED | SIM_ALLOC_DRIVER_POOL,
  .summary = "cudaMallocAsync's default pool: stream-ordered reuse, 32 MiB growth, release at synchronization",
  .options = (const sim_option_spec[]){
    {"release_threshold", "size or max: bytes the pool keeps at a synchronization (default 0)"},
    {"reuse_follow_event_dependencies", "true|false: cudaMemPoolReuseFollowEventDependencies (default true)"},
    {"reuse_allow_opportunistic", "true|false: cudaMemPoolReuseAllowOpportunistic (default true)"},
    {"reuse_allow_internal_dependencies", "true|false: cudaMemPoolReuseAllowInternalDependencies (default true)"},
    {NULL, NULL},
  },
  .create = async_create,
  .destroy = async_destroy,
  .alloc = async_alloc,
  .free_completed = async_free_completed,
  .synchronize = async_synchronize,
  .empty_cache = async_empty_cache,
  .stats = async_stats,
  .largest_free = async_largest_free,
  .describe_oom = async_describe_oom,
  .walk = async_walk,
  .check = async_check,
  .reset = async_reset,
  .device_changed = sim_device_read_as_needed,
};

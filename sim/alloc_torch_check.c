/* alloc_torch_check.c: the torch model's invariants, checked in full (the check op). */
#include <inttypes.h>
#include <stdio.h>

#include "internal/torch.h"

/*
 * What must hold between any two calls: the pools' sets are ordered sets of free mapped blocks
 * of their pool (and of unmapped ranges), every block tiles its segment with its neighbours,
 * free neighbours have merged, and the statistics add up to what the blocks hold. `memplay
 * replay --check` runs it after every event; the debug builds run it at the rare calls
 * (internal/debug.h). O(blocks).
 */

#define CHECK_FAIL(...)                 \
  do {                                  \
    snprintf(err, errlen, __VA_ARGS__); \
    return -1;                          \
  } while (0)

/* What the blocks hold, by pool (SMALL_POOL, LARGE_POOL), to compare with the statistics. */
typedef struct check_sums {
  int64_t allocated[STAT_TYPES], active[STAT_TYPES], requested[STAT_TYPES], reserved[STAT_TYPES], nalloc[STAT_TYPES];
  size_t nfree, nunmapped;
} check_sums;

/* Each pool's two sets: ordered, and holding only what belongs in them. */
static int check_pools(torch *m, char *err, size_t errlen) {
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    const char *name = k ? "large" : "small";
    if (!tfree_check(&pools[k]->blocks)) CHECK_FAIL("the %s pool's free blocks are not an ordered set", name);
    if (!tunmapped_RB_VALID(&pools[k]->unmapped)) CHECK_FAIL("the %s pool's unmapped ranges are not an ordered tree", name);
    for (tblock *b = tfree_first(&pools[k]->blocks); b; b = tfree_next(&pools[k]->blocks, b))
      if (!b->live || b->allocated || b->waiting || !b->mapped || b->pool != pools[k])
        CHECK_FAIL("block %#" PRIx64 " is in the %s pool but not a free mapped block of it", b->ptr, name);
    tblock *b;
    RB_FOREACH(b, tunmapped, &pools[k]->unmapped)
      if (!b->live || b->mapped || !b->es) CHECK_FAIL("block %#" PRIx64 " is in the unmapped set but mapped", b->ptr);
  }
  return 0;
}

/* One live block: linked in place, merged with free neighbours, in a consistent state; counted. */
static int check_block(const tblock *b, check_sums *s, char *err, size_t errlen) {
  int t = b->pool->is_small ? SMALL_POOL : LARGE_POOL;
  if (b->next && (b->next->prev != b || b->next->ptr != b->ptr + b->size))
    CHECK_FAIL("block %#" PRIx64 " and the block after it do not tile the segment", b->ptr);
  if (b->prev && b->prev->next != b) CHECK_FAIL("block %#" PRIx64 " is not linked back from the block before it", b->ptr);
  if ((b->prev && b->prev->pool != b->pool) || (b->prev && b->prev->es != b->es))
    CHECK_FAIL("block %#" PRIx64 " shares a segment with a block of another pool", b->ptr);
  if (is_free(b) && b->next && is_free(b->next) && b->next->mapped == b->mapped)
    CHECK_FAIL("free blocks %#" PRIx64 " and %#" PRIx64 " are adjacent and not merged", b->ptr, b->next->ptr);
  if (b->allocated && b->waiting) CHECK_FAIL("block %#" PRIx64 " is both allocated and waiting", b->ptr);
  if (!b->mapped && (b->allocated || b->waiting)) CHECK_FAIL("block %#" PRIx64 " is in use but unmapped", b->ptr);
  if (is_free(b) && b->mapped) s->nfree++;
  if (!b->mapped) s->nunmapped++;
  if (b->mapped) s->reserved[t] += (int64_t)b->size;
  if (b->allocated) {
    s->allocated[t] += (int64_t)b->size;
    s->nalloc[t]++;
  }
  if (b->allocated || b->waiting) {
    s->active[t] += (int64_t)b->size;
    s->requested[t] += (int64_t)b->requested;
  }
  return 0;
}

/* The sets hold every free block, and the statistics are what the blocks add up to. */
static int check_totals(torch *m, const check_sums *s, char *err, size_t errlen) {
  size_t nfree_in_trees = 0, nunmapped_trees = 0;
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    nfree_in_trees += pools[k]->blocks.count;
    tblock *b;
    RB_FOREACH(b, tunmapped, &pools[k]->unmapped) nunmapped_trees++;
  }
  if (s->nfree != nfree_in_trees) CHECK_FAIL("%zu free blocks but %zu in the pools", s->nfree, nfree_in_trees);
  if (s->nunmapped != nunmapped_trees) CHECK_FAIL("%zu unmapped ranges but %zu in the sets", s->nunmapped, nunmapped_trees);
  if (m->st.allocated.current != s->allocated[SMALL_POOL] + s->allocated[LARGE_POOL] ||
      m->st.active.current != s->active[SMALL_POOL] + s->active[LARGE_POOL] ||
      m->st.requested.current != s->requested[SMALL_POOL] + s->requested[LARGE_POOL] ||
      m->st.reserved.current != s->reserved[SMALL_POOL] + s->reserved[LARGE_POOL])
    CHECK_FAIL("the byte counts the replay reads are not what the blocks hold");
#if SIM_TORCH_STATS
  for (int t = SMALL_POOL; t <= LARGE_POOL; t++) {
    const char *name = t == SMALL_POOL ? "small" : "large";
    const struct tstat_set *st = &m->stats.type[t];
    if (s->allocated[t] != st->allocated_bytes.current) CHECK_FAIL("%s pool: allocated_bytes is off", name);
    if (s->nalloc[t] != st->allocation.current) CHECK_FAIL("%s pool: allocation count is off", name);
    if (s->active[t] != st->active_bytes.current) CHECK_FAIL("%s pool: active_bytes is off", name);
    if (s->requested[t] != st->requested_bytes.current) CHECK_FAIL("%s pool: requested_bytes is off", name);
    if (s->reserved[t] != st->reserved_bytes.current) CHECK_FAIL("%s pool: reserved_bytes is off", name);
  }
#define SIM_X(n)                                                                                        \
  if (AGG_##n(m)->current != m->stats.type[SMALL_POOL].n.current + m->stats.type[LARGE_POOL].n.current) \
    CHECK_FAIL("%s: the aggregate is not the sum of the pools", #n);
  TORCH_STAT_ARRAYS(SIM_X)
#undef SIM_X
#endif
  if ((uint64_t)m->st.reserved.current != m->total_allocated_memory)
    CHECK_FAIL("reserved_bytes disagrees with the memory taken from the device");
  return 0;
}

int _torch_check(void *ctx, char *err, size_t errlen) {
  torch *m = ctx;
  if (m->tree_conflicts) CHECK_FAIL("%" PRIu64 " blocks could not enter a pool (equal keys)", m->tree_conflicts);
  if (check_pools(m, err, errlen)) return -1;
  check_sums s = {{0}, {0}, {0}, {0}, {0}, 0, 0};
  for (uint32_t i = 1; i < m->next_index; i++) {
    const tblock *b = block_at(m, i);
    if (b->live && check_block(b, &s, err, errlen)) return -1;
  }
  return check_totals(m, &s, err, errlen);
}

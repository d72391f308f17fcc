/* alloc_torch_restore.c: the torch model's state at the start of a trace that begins mid-run (the restore op). */
#include <inttypes.h>
#include <stdio.h>

#include "internal/torch.h"

/*
 * `memplay validate` replays a snapshot whose recording began while the program ran: the
 * segments and blocks alive at its start are installed first, one segment at a time, as if the
 * model had made them (allocator.h describes the restore op). Nothing reaches the device: the
 * memory counts as already held. Blocks the snapshot lists with their request only are sized as
 * malloc would have cut them (round_size, then should_split against what follows).
 */

static void restore_block_stats(torch *m, tblock *b) {
  tpool *pool = b->pool;
  if (b->allocated) {
    POOL_INC(m, pool, allocation, 1);
    POOL_INC(m, pool, allocated_bytes, b->size);
    if (b->size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_allocations, 1);
  }
  if (b->allocated || b->waiting) {
    POOL_INC(m, pool, active, 1);
    POOL_INC(m, pool, active_bytes, b->size);
    POOL_INC(m, pool, requested_bytes, b->requested);
  }
}

/* Checks the blocks of [addr, end) and sizes those given as 0, before anything changes: the
 * order, the overlaps, and that each fits. Returns 0, or -1 with a message. */
static int plan_range(const torch *m, const tpool *pool, uint64_t addr, uint64_t end, sim_walk_item *items, size_t n,
                      char *err, size_t errlen) {
  uint64_t cursor = addr;
  for (size_t i = 0; i < n; i++) {
    sim_walk_item *it = &items[i];
    if (it->addr < cursor || it->addr >= end) {
      snprintf(err, errlen,
               "block at %#" PRIx64 " overlaps the block before it or lies outside its segment [%#" PRIx64 ", %#" PRIx64 ")",
               it->addr, addr, end);
      return -1;
    }
    if (it->state != SIM_BLOCK_ALLOCATED && it->state != SIM_BLOCK_PENDING_FREE) {
      snprintf(err, errlen, "block at %#" PRIx64 " is neither allocated nor waiting to be freed", it->addr);
      return -1;
    }
    uint64_t next = i + 1 < n ? items[i + 1].addr : end;
    if (next <= it->addr) next = it->addr; /* reported as an overlap at the next block */
    if (!it->size) {
      /* Only the request is known: rounded as malloc rounds it, plus whatever follows it up to
       * the next block when that remainder could not have been split off. */
      uint64_t r = _torch_round_size(m, it->requested ? it->requested : 1);
      if (next - it->addr < r) {
        snprintf(err, errlen,
                 "block at %#" PRIx64 " of %" PRIu64 " requested bytes (%" PRIu64 " rounded) does not fit before %#" PRIx64,
                 it->addr, it->requested, r, next);
        return -1;
      }
      it->size = _torch_should_split(m, pool, next - it->addr, r) ? r : next - it->addr;
    }
    if (it->size > end - it->addr) {
      snprintf(err, errlen, "block at %#" PRIx64 " of %" PRIu64 " bytes runs past its segment's end %#" PRIx64, it->addr,
               it->size, end);
      return -1;
    }
    cursor = it->addr + it->size;
  }
  return 0;
}

/* Links the (planned) blocks of [addr, end) of a segment, with free blocks between them. */
static void restore_range(torch *m, tpool *pool, tseg *es, uint64_t addr, uint64_t end, int64_t stream,
                          const sim_walk_item *items, size_t n, uintptr_t *handles, tblock **first, tblock **last) {
  tblock *prev = NULL, *head = NULL;
  uint64_t cursor = addr;
  for (size_t i = 0; i <= n; i++) {
    uint64_t start = i < n ? items[i].addr : end;
    if (start > cursor) { /* free space between live blocks is one free block */
      tblock *f = block_new(m, stream, start - cursor, pool, cursor);
      f->es = es;
      f->prev = prev;
      if (prev) prev->next = f;
      else head = f;
      prev = f;
    }
    if (i == n) break;
    const sim_walk_item *it = &items[i];
    tblock *b = block_new(m, stream, it->size, pool, it->addr);
    b->es = es;
    b->requested = it->requested;
    b->allocated = it->state == SIM_BLOCK_ALLOCATED;
    b->gen++;
    if (!b->allocated) _torch_waiting_add(m, b);
    b->prev = prev;
    if (prev) prev->next = b;
    else head = b;
    prev = b;
    cursor = it->addr + it->size;
    handles[i] = handle_of(b);
    restore_block_stats(m, b);
  }
  *first = head;
  *last = prev;
}

/* The expandable segment (reservation) that holds the range seg describes: one restored before,
 * or a new one. Reservations never overlap: a new one that would reach into one restored before
 * it, of its pool and stream (ranges restored out of address order), ends where that one begins;
 * a range that would share addresses with one is refused. */
static tseg *restore_expandable(torch *m, tpool *pool, const sim_walk_item *seg, char *err, size_t errlen) {
  uint64_t page = _torch_expandable_page(pool), end = seg->addr + seg->size;
  for (tseg *es = m->segments; es; es = es->next)
    if (es->pool == pool && es->stream == seg->stream && seg->addr >= es->base && seg->addr < es->base + es->size) {
      if ((seg->addr - es->base) % page || seg->size % page || end > es->base + es->size) {
        snprintf(err, errlen,
                 "expandable segment at %#" PRIx64 " of %" PRIu64 " bytes lies in the reservation [%#" PRIx64
                 ", %#" PRIx64 ") of one restored before it, off its %" PRIu64 "-byte pages or past its end",
                 seg->addr, seg->size, es->base, es->base + es->size, page);
        return NULL;
      }
      return es;
    }
  if (seg->size % page) {
    snprintf(err, errlen, "expandable segment at %#" PRIx64 " of %" PRIu64 " bytes is not whole %" PRIu64 "-byte pages",
             seg->addr, seg->size, page);
    return NULL;
  }
  /* A new reservation, starting where the caller says, else at this range. */
  uint64_t base = seg->requested && seg->requested <= seg->addr && (seg->addr - seg->requested) % page == 0
                      ? seg->requested
                      : seg->addr;
  uint64_t space = _torch_reservation_size(m, page);
  if (end - base > space) space = (end - base + page - 1) / page * page;
  for (tseg *es = m->segments; es; es = es->next) {
    if (es->pool != pool || es->stream != seg->stream || es->base >= base + space || base >= es->base + es->size)
      continue;
    if (es->base < end || es->base <= base) {
      snprintf(err, errlen,
               "expandable segment at %#" PRIx64 " (its reservation from %#" PRIx64 ") overlaps the reservation [%#" PRIx64
               ", %#" PRIx64 ") of one restored before it",
               seg->addr, base, es->base, es->base + es->size);
      return NULL;
    }
    space = (es->base - base) / page * page; /* still holds the range: it ends at or below es->base */
  }
  tseg *es = sim_xcalloc(1, sizeof *es);
  *es = (tseg){base, space, page, seg->stream, pool, m->segments};
  m->segments = es;
  tblock *all = block_new(m, seg->stream, space, pool, base);
  all->mapped = 0;
  all->es = es;
  insert_unmapped(m, pool, all);
  return es;
}

/* A segment from cudaMalloc: its blocks, free space between them as free blocks of the pool. */
static void restore_segment(torch *m, tpool *pool, const sim_walk_item *seg, const sim_walk_item *items, size_t n,
                            uintptr_t *handles) {
  tblock *first, *last;
  restore_range(m, pool, NULL, seg->addr, seg->addr + seg->size, seg->stream, items, n, handles, &first, &last);
  for (tblock *b = first; b; b = b->next)
    if (is_free(b)) {
      insert_into_blocks(m, pool, b);
      if (is_split(b)) {
        POOL_INC(m, pool, inactive_split, 1);
        POOL_INC(m, pool, inactive_split_bytes, b->size);
      }
    }
  m->total_allocated_memory += seg->size;
  POOL_INC(m, pool, segment, 1);
  POOL_INC(m, pool, reserved_bytes, seg->size);
  if (seg->size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_segments, 1);
}

/* A mapped range of an expandable segment: the unmapped range that holds [addr, end) gives it up,
 * keeping what lies before and after it. */
static int restore_mapped_range(torch *m, tpool *pool, const sim_walk_item *seg, const sim_walk_item *items, size_t n,
                                uintptr_t *handles, char *err, size_t errlen) {
  uint64_t end = seg->addr + seg->size;
  tseg *es = restore_expandable(m, pool, seg, err, errlen);
  if (!es) return -1;
  tblock key = {.stream = seg->stream, .ptr = seg->addr};
  tblock *u = RB_NFIND(tunmapped, &pool->unmapped, &key);
  if (!u || u->ptr != seg->addr) u = u ? RB_PREV(tunmapped, &pool->unmapped, u) : RB_MAX(tunmapped, &pool->unmapped);
  if (!u || u->es != es || u->ptr > seg->addr || u->ptr + u->size < end) {
    snprintf(err, errlen, "expandable segment at %#" PRIx64 " overlaps one restored before it", seg->addr);
    return -1;
  }
  tblock *first, *last;
  restore_range(m, pool, es, seg->addr, end, seg->stream, items, n, handles, &first, &last);
  RB_REMOVE(tunmapped, &pool->unmapped, u);
  tblock *before = u->prev, *after = u->next;
  if (u->ptr + u->size > end) { /* the unmapped rest after the range */
    tblock *tail = block_new(m, seg->stream, u->ptr + u->size - end, pool, end);
    tail->mapped = 0;
    tail->es = es;
    tail->next = u->next;
    if (u->next) u->next->prev = tail;
    after = tail;
    insert_unmapped(m, pool, tail);
  }
  if (u->ptr < seg->addr) { /* u keeps the unmapped part before the range */
    u->size = seg->addr - u->ptr;
    before = u;
    insert_unmapped(m, pool, u);
  } else {
    block_delete(m, u);
  }
  first->prev = before;
  if (before) before->next = first;
  last->next = after;
  if (after) after->prev = last;
  /* A range that meets a mapped range restored before continues it (PyTorch's snapshot gives one
   * segment a contiguous mapped run, but a store's rows may split one): free blocks that meet at
   * the seam are one block, as free_block and map_block always leave them. */
  if (is_free(first)) _torch_try_merge_blocks(m, first, before, pool);
  if (is_free(last)) _torch_try_merge_blocks(m, last, after, pool);
  for (tblock *b = first;; b = b->next) {
    if (is_free(b)) insert_into_blocks(m, pool, b);
    if (b == last) break;
  }
  m->total_allocated_memory += seg->size;
  POOL_INC(m, pool, reserved_bytes, seg->size);
  return 0;
}

int _torch_restore(void *ctx, sim_walk_item *items, size_t n, uintptr_t *handles, char *err, size_t errlen) {
  torch *m = ctx;
  if (!n || !items[0].is_segment || !items[0].size) {
    snprintf(err, errlen, "restore needs a segment first");
    return SIM_EINVAL;
  }
  if (items[0].addr > UINT64_MAX - items[0].size) {
    snprintf(err, errlen, "segment at %#" PRIx64 " of %" PRIu64 " bytes runs past the end of the address space",
             items[0].addr, items[0].size);
    return SIM_EINVAL;
  }
  const sim_walk_item *seg = &items[0];
  tpool *pool = seg->pool ? &m->large_blocks : &m->small_blocks;
  for (size_t i = 0; i < n; i++) handles[i] = 0;
  if (plan_range(m, pool, seg->addr, seg->addr + seg->size, items + 1, n - 1, err, errlen)) return SIM_EINVAL;
  if (!seg->expandable) restore_segment(m, pool, seg, items + 1, n - 1, handles + 1);
  else if (restore_mapped_range(m, pool, seg, items + 1, n - 1, handles + 1, err, errlen)) return SIM_EINVAL;
  sim_assert_valid(_torch_check, m);
  return SIM_OK;
}

/* ---- a restored state kept for the next replay (the save and load ops) ----------------------------
 * A replay loop of a recorded window restores the same segments before every replay (for
 * kk_ctx128_fullstep, a twentieth of its time: docs/performance.md, round thirty). save copies
 * what the restores changed: the model's fields, its block records (their links are addresses in
 * the arena, which a reset keeps) and each pool's streams of free blocks; load puts them back over
 * the reset model. Expandable segments' reservations live outside the arena: a model that holds
 * any keeps nothing. */

struct tsaved {
  torch fields;       /* the model's fields as they were */
  tblock *blocks;     /* records 1 .. fields.next_index - 1 */
  size_t cap;
  struct pool_saved {
    struct tfree_stream **at;      /* its streams, in the set's order */
    struct tfree_stream *contents; /* and what each held */
    size_t n, cap;
  } pools[2];
};

int _torch_save(void *ctx) {
  torch *m = ctx;
  if (m->segments) return -1;
  struct tsaved *s = m->saved ? m->saved : (m->saved = sim_xcalloc(1, sizeof *m->saved));
  s->fields = *m;
  size_t n = m->next_index ? m->next_index - 1u : 0;
  sim_grow((void **)&s->blocks, &s->cap, n, sizeof *s->blocks);
  for (uint32_t i = 1; i < m->next_index; i++) s->blocks[i - 1] = *block_at(m, i);
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    const struct tfree *f = &pools[k]->blocks;
    struct pool_saved *ps = &s->pools[k];
    size_t cap = ps->cap;
    sim_grow((void **)&ps->at, &ps->cap, f->n, sizeof *ps->at);
    sim_grow((void **)&ps->contents, &cap, f->n, sizeof *ps->contents);
    for (size_t i = 0; i < f->n; i++) ps->at[i] = f->s[i], ps->contents[i] = *f->s[i];
    ps->n = f->n;
  }
  return 0;
}

/* Pool k's set of free blocks as save found it: its streams (any made since freed), their contents. */
static void load_pool(struct tfree *f, const struct pool_saved *ps) {
  for (size_t i = 0; i < f->n; i++) {
    size_t j = 0;
    while (j < ps->n && ps->at[j] != f->s[i]) j++;
    if (j == ps->n) free(f->s[i]);
  }
  sim_grow((void **)&f->s, &f->cap, ps->n, sizeof *f->s);
  for (size_t i = 0; i < ps->n; i++) {
    f->s[i] = ps->at[i];
    tfree_stream_load(f->s[i], &ps->contents[i]); /* the classes it held blocks in, not all 1,024 */
  }
  f->n = ps->n;
  f->last = NULL;
  f->last_stream = 0;
}

void _torch_load(void *ctx) {
  torch *m = ctx;
  const struct tsaved *s = m->saved;
  const torch *was = &s->fields;
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  const tpool *pools_was[2] = {&was->small_blocks, &was->large_blocks};
  for (int k = 0; k < 2; k++) {
    load_pool(&pools[k]->blocks, &s->pools[k]);
    pools[k]->blocks.count = pools_was[k]->blocks.count;
    pools[k]->unmapped = pools_was[k]->unmapped;
    pools[k]->get_free_blocks_call_count = pools_was[k]->get_free_blocks_call_count;
  }
  m->next_index = was->next_index; /* the arena still holds the chunks of the records saved */
  for (uint32_t i = 1; i < m->next_index; i++) *block_at(m, i) = s->blocks[i - 1];
  m->st = was->st;
  m->free_list = was->free_list;
  m->waiting_newest = was->waiting_newest;
  m->waiting_head = was->waiting_head;
  m->waiting_tail = was->waiting_tail;
  m->total_allocated_memory = was->total_allocated_memory;
  m->stats = was->stats;
  m->tree_conflicts = was->tree_conflicts;
  sim_assert_valid(_torch_check, m);
}

void _torch_saved_release(torch *m) {
  struct tsaved *s = m->saved;
  if (!s) return;
  free(s->blocks);
  for (int k = 0; k < 2; k++) free(s->pools[k].at), free(s->pools[k].contents);
  free(s);
  m->saved = NULL;
}

/* moment.c: the allocator's state at one moment, collected from the models' walks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "moment.h"

typedef struct take_ctx {
  replay_moment *m;
  size_t seg_cap, blk_cap, pool_cap;
} take_ctx;

static replay_moment_pool *pool_of(take_ctx *t, int device, int pool) {
  replay_moment *m = t->m;
  for (size_t i = 0; i < m->npools; i++)
    if (m->pools[i].device == device && m->pools[i].pool == pool) return &m->pools[i];
  sim_grow((void **)&m->pools, &t->pool_cap, m->npools + 1, sizeof *m->pools);
  replay_moment_pool *p = &m->pools[m->npools++];
  memset(p, 0, sizeof *p);
  p->device = device;
  p->pool = pool;
  return p;
}

static void add_segment(take_ctx *t, int device, const sim_walk_item *it) {
  replay_moment *m = t->m;
  sim_grow((void **)&m->segments, &t->seg_cap, m->nsegments + 1, sizeof *m->segments);
  m->segments[m->nsegments++] = (replay_moment_segment){.device = device, .addr = it->addr, .size = it->size,
                                                        .stream = it->stream, .pool = it->pool,
                                                        .expandable = it->expandable, .first = m->nblocks};
  replay_moment_pool *p = pool_of(t, device, it->pool);
  p->segments++;
  p->reserved += it->size;
}

static void add_block(take_ctx *t, const sim_walk_item *it, const replay_block_owner *ow) {
  replay_moment *m = t->m;
  if (!m->nsegments) return; /* a model that reports a block before any segment: nothing to hold it */
  replay_moment_segment *s = &m->segments[m->nsegments - 1];
  sim_grow((void **)&m->blocks, &t->blk_cap, m->nblocks + 1, sizeof *m->blocks);
  replay_moment_block *b = &m->blocks[m->nblocks++];
  *b = (replay_moment_block){.addr = it->addr, .size = it->size, .requested = it->requested, .state = it->state};
  if (ow->known) {
    b->known = 1;
    b->trace_addr = ow->trace_addr;
    b->stack = ow->stack;
    b->category = ow->category >= 0 && ow->category < SIM_CAT__COUNT ? ow->category : SIM_CAT_UNKNOWN;
  }
  s->nblocks++;
  replay_moment_pool *p = pool_of(t, s->device, s->pool);
  if (it->state == SIM_BLOCK_FREE) {
    s->free += it->size;
    if (it->size > s->largest_free) s->largest_free = it->size;
    p->free += it->size;
    p->free_blocks++;
    if (it->size > p->largest_free) p->largest_free = it->size;
  } else if (it->state == SIM_BLOCK_PENDING_FREE) {
    s->pending += it->size;
    p->pending += it->size;
  } else {
    s->allocated += it->size;
    p->allocated += it->size;
    p->requested += it->requested;
  }
}

static int take_item(void *arg, int device, const sim_walk_item *it, const replay_block_owner *ow) {
  take_ctx *t = arg;
  if (it->is_segment) add_segment(t, device, it);
  else add_block(t, it, ow);
  return 0;
}

/* The totals over all segments, and the fragmentation they give. */
static void summarize(replay_moment *m) {
  for (size_t i = 0; i < m->nblocks; i++) {
    const replay_moment_block *b = &m->blocks[i];
    if (b->state == SIM_BLOCK_FREE) {
      m->free_bytes += b->size;
      m->free_blocks++;
      if (b->size > m->largest_free) m->largest_free = b->size;
    } else if (b->state == SIM_BLOCK_PENDING_FREE) {
      m->pending_bytes += b->size;
    } else {
      m->block_bytes += b->size;
      m->requested_bytes += b->requested;
      m->category_bytes[b->category] += (int64_t)b->requested;
    }
  }
  m->internal_fragmentation = m->block_bytes ? 1.0 - (double)m->requested_bytes / (double)m->block_bytes : 0;
  if (m->internal_fragmentation < 0) m->internal_fragmentation = 0;
  m->external_fragmentation = m->free_bytes ? 1.0 - (double)m->largest_free / (double)m->free_bytes : 0;
}

void replay_moment_take(replay_moment *m, const replay_state *st, const char *what) {
  memset(m, 0, sizeof *m);
  snprintf(m->what, sizeof m->what, "%s", what ? what : "event");
  m->seq = st->event ? st->event->seq : -1;
  m->ts = st->event ? st->event->ts : 0;
  snprintf(m->allocator, sizeof m->allocator, "%s", st->allocator ? st->allocator : "");
  m->oom = st->oom;
  m->oom_size = st->oom_size;
  m->oom_stream = st->oom_stream;
  snprintf(m->oom_message, sizeof m->oom_message, "%s", st->oom_message);
  m->allocated = st->allocated;
  m->reserved = st->reserved;
  m->requested = st->requested;
  m->active = st->active;
  if (st->walkable) {
    take_ctx t = {.m = m};
    replay_state_walk(st, take_item, &t);
    m->walked = 1;
    summarize(m);
  } else {
    m->largest_free = st->largest_free;
  }
}

void replay_moment_release(replay_moment *m) {
  free(m->segments);
  free(m->blocks);
  free(m->pools);
  memset(m, 0, sizeof *m);
}

const replay_moment_block *replay_moment_largest_free(const replay_moment *m, const replay_moment_segment **seg) {
  const replay_moment_block *best = NULL;
  for (size_t s = 0; s < m->nsegments; s++)
    for (size_t i = m->segments[s].first; i < m->segments[s].first + m->segments[s].nblocks; i++)
      if (m->blocks[i].state == SIM_BLOCK_FREE && (!best || m->blocks[i].size > best->size)) {
        best = &m->blocks[i];
        if (seg) *seg = &m->segments[s];
      }
  return best;
}

/* live.h: the engine's records of the live allocations, a dense table a plan numbers. */
#ifndef REPLAY_LIVE_H
#define REPLAY_LIVE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "engine.h"

enum { EMPTY = 0, LIVE = 1, REQUESTED = 2, DROPPED = 3 };

typedef struct live_entry {
  uint64_t addr;
  uint64_t size;
  uintptr_t handle;
  uint32_t site; /* index into the site table */
  int8_t device; /* < REPLAY_MAX_DEVICES */
  uint8_t category, cat_source, state; /* state EMPTY: a free record */
} live_entry;

_Static_assert(sizeof(live_entry) == 32 && REPLAY_MAX_DEVICES <= 127, "two records per cache line");

/* ---- the dense table ----------------------------------------------------------------------
 * Each allocation's record is at the number a plan gives it (source.h: replay_plan), the source's
 * or the engine's own (planner.h), made as the events come: no hashing, no probing here, and
 * records taken back most recently freed first, so that a new allocation's record is one the
 * processor's cache still holds. EMPTY is a record no address holds. */

typedef struct live_dense {
  live_entry *recs;
  size_t cap; /* records allocated */
  size_t hi;  /* records [0, hi) may be in use (the highest number seen, plus one) */
  size_t len; /* records held */
} live_dense;

/* The dense table empty, with room for `want` records (a plan's count, or 0: it grows as numbers
 * come). */
static inline void dense_begin(live_dense *t, size_t want) {
  if (t->hi) memset(t->recs, 0, t->hi * sizeof *t->recs);
  t->hi = t->len = 0;
  if (want > t->cap) {
    free(t->recs);
    t->recs = sim_xcalloc(want, sizeof *t->recs);
    t->cap = want;
  }
}

static inline void dense_release(live_dense *t) {
  free(t->recs);
  memset(t, 0, sizeof *t);
}

/* Room for record `slot` (all records past the old end EMPTY). */
__attribute__((noinline, unused)) static void dense_grow(live_dense *t, uint32_t slot) {
  size_t cap = t->cap ? t->cap : 1024;
  while (cap <= slot) cap *= 2;
  t->recs = sim_xrealloc(t->recs, cap * sizeof *t->recs);
  memset(t->recs + t->cap, 0, (cap - t->cap) * sizeof *t->recs);
  t->cap = cap;
}

/* The record of slot, for an allocation of addr: *existed as live_put says it. */
static inline live_entry *dense_put(live_dense *t, uint32_t slot, uint64_t addr, int *existed) {
  if (slot >= t->cap) dense_grow(t, slot);
  if (slot >= t->hi) t->hi = (size_t)slot + 1;
  live_entry *le = &t->recs[slot];
  *existed = le->state != EMPTY;
  if (!*existed) {
    le->addr = addr;
    le->state = LIVE;
    t->len++;
  }
  return le;
}

/* The record of slot for a free (REPLAY_PLAN_NONE: no allocation holds its address), or NULL. */
static inline live_entry *dense_get(live_dense *t, uint32_t slot) {
  if (slot >= t->hi || t->recs[slot].state == EMPTY) return NULL; /* REPLAY_PLAN_NONE is past hi */
  return &t->recs[slot];
}

static inline void dense_del(live_dense *t, live_entry *le) {
  le->state = EMPTY;
  t->len--;
}

#endif

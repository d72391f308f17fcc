/* live.h: the engine's records of the live allocations: a hash table by trace address, or a dense table a plan numbers. */
#ifndef REPLAY_LIVE_H
#define REPLAY_LIVE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "engine.h"

/*
 * Trace address -> what the engine knows of the allocation, the record in the slot itself (one
 * look-up, one cache line): open addressing, linear probing, backward-shift deletion (no
 * tombstones), at most a quarter full: probes stay short, and their ends predictable (half full
 * cost 3 to 6 ns more per event of the generated trace, a quarter 128 bytes per live record). */

enum { EMPTY = 0, LIVE = 1, REQUESTED = 2, DROPPED = 3 };

/* The table starts at 1,024 slots (32 KiB) and doubles as the live set grows. A source that
 * says how many events it holds bounds the live set: a short trace gets a table of four slots per
 * event instead (at least 64). Larger starts cost more than they save: a table sized by a long
 * trace's length spreads the few allocations live at a time over memory the caches do not hold
 * (2^16 slots made the generated trace's replay three times slower; docs/performance.md). */
#define LIVE_START_BITS 10
#define LIVE_SMALL_BITS 6

typedef struct live_entry {
  uint64_t addr;
  uint64_t size;
  uintptr_t handle;
  uint32_t site; /* index into the site table */
  int8_t device; /* < REPLAY_MAX_DEVICES */
  uint8_t category, cat_source, state; /* state EMPTY: a free slot */
} live_entry;

_Static_assert(sizeof(live_entry) == 32 && REPLAY_MAX_DEVICES <= 127, "two records per cache line");

typedef struct live_table {
  live_entry *slots;
  size_t mask;  /* slots - 1 (a power of two) */
  unsigned shift; /* 64 - log2(slots): a key's home is the top bits of its Fibonacci hash */
  size_t len;
} live_table;

static inline size_t live_home(const live_table *t, uint64_t addr) {
  return (size_t)((addr * UINT64_C(0x9E3779B97F4A7C15)) >> t->shift);
}

/* (Functions that are not inline are marked unused: engine_start.c takes the types alone.) */
__attribute__((unused)) static void live_init(live_table *t, unsigned bits) {
  t->slots = sim_xcalloc((size_t)1 << bits, sizeof *t->slots);
  t->mask = ((size_t)1 << bits) - 1;
  t->shift = 64 - bits;
  t->len = 0;
}

__attribute__((unused)) static void live_release(live_table *t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

__attribute__((unused)) static void live_grow(live_table *t) {
  live_table old = *t;
  live_init(t, 64 - old.shift + 1);
  for (size_t i = 0; i <= old.mask; i++) {
    if (old.slots[i].state == EMPTY) continue;
    size_t j = live_home(t, old.slots[i].addr);
    while (t->slots[j].state != EMPTY) j = (j + 1) & t->mask;
    t->slots[j] = old.slots[i];
  }
  t->len = old.len;
  free(old.slots);
}

/* The record of addr, or NULL. */
static inline live_entry *live_get(live_table *t, uint64_t addr) {
  for (size_t j = live_home(t, addr);; j = (j + 1) & t->mask) {
    live_entry *le = &t->slots[j];
    if (le->state == EMPTY) return NULL;
    if (le->addr == addr) return le;
  }
}

/* The record of addr, or a new one (state LIVE until the caller says otherwise): *existed says
 * which. The pointer holds until the next live_put or live_del. */
static inline live_entry *live_put(live_table *t, uint64_t addr, int *existed) {
  if ((t->len + 1) * 4 > t->mask + 1) live_grow(t);
  for (size_t j = live_home(t, addr);; j = (j + 1) & t->mask) {
    live_entry *le = &t->slots[j];
    if (le->state == EMPTY) {
      le->addr = addr;
      le->state = LIVE;
      t->len++;
      *existed = 0;
      return le;
    }
    if (le->addr == addr) {
      *existed = 1;
      return le;
    }
  }
}

/* Empties a record's slot, pulling later members of its probe run back into the hole. */
static inline void live_del(live_table *t, live_entry *le) {
  size_t hole = (size_t)(le - t->slots);
  for (size_t k = (hole + 1) & t->mask; t->slots[k].state != EMPTY; k = (k + 1) & t->mask) {
    size_t home = live_home(t, t->slots[k].addr);
    /* k moves into the hole unless its home lies cyclically in (hole, k] */
    if (((k - home) & t->mask) >= ((k - hole) & t->mask)) {
      t->slots[hole] = t->slots[k];
      hole = k;
    }
  }
  t->slots[hole].state = EMPTY;
  t->len--;
}

/* ---- the dense table ----------------------------------------------------------------------
 * A planned replay (source.h: replay_plan) finds each allocation's record at the index its plan
 * gives: no hashing, no probing, and records taken back most recently freed first, so that a new
 * allocation's record is one the processor's cache still holds. The same records, the same states:
 * EMPTY is a record no address holds. */

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

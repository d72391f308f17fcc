/* planner.h: numbering events as they come, the step of replay_planner (source.h) for the loops that inline it. */
#ifndef REPLAY_PLANNER_H
#define REPLAY_PLANNER_H

#include <stdint.h>
#include <string.h>

#include "sim/event.h"
#include "sim/hashmap.h"
#include "source.h"

/* Private to the engine's files (engine.c, plan.c).
 *
 * The addresses held are an open-addressing index (linear probing, backward-shift deletion, at
 * most a quarter full) of 8-byte slots: the top half of the address's Fibonacci hash beside its
 * record's number plus one (0: an empty slot). A slot's home is the top bits of that hash, so that
 * moving slots and growing the index never read an address; a probe compares the hash, and on a
 * match the record's address (planner.addr, whose records the most recently freed are, in the
 * cache). 714 allocations live at a time, as in `memplay bench`'s generated trace, take 32 KiB. */

#define PLANNER_START_BITS 8
#define PLANNER_MAX_BITS 32 /* a home is the top bits of the hash's top half */

static inline uint64_t planner_hash(uint64_t addr) { return addr * UINT64_C(0x9E3779B97F4A7C15); }
static inline size_t planner_home(const replay_planner *p, uint32_t top) { return (size_t)(top >> (32 - p->bits)); }

/* The index twice as large (or its first slots). 0, or -1 when it would pass PLANNER_MAX_BITS. */
__attribute__((noinline)) static int planner_grow(replay_planner *p) {
  unsigned bits = p->held ? p->bits + 1 : PLANNER_START_BITS;
  if (bits > PLANNER_MAX_BITS) return -1;
  uint64_t *old = p->held;
  size_t oldn = p->held ? p->mask + 1 : 0;
  p->held = sim_xcalloc((size_t)1 << bits, sizeof *p->held);
  p->bits = bits;
  p->mask = ((size_t)1 << bits) - 1;
  for (size_t i = 0; i < oldn; i++) {
    if (!old[i]) continue;
    size_t j = planner_home(p, (uint32_t)(old[i] >> 32));
    while (p->held[j]) j = (j + 1) & p->mask;
    p->held[j] = old[i];
  }
  free(old);
  return 0;
}

/* The slot of the index that holds addr, or of the empty slot where it would go; *top, its hash's
 * top half. */
static inline size_t planner_find(const replay_planner *p, uint64_t addr, uint32_t *top) {
  uint32_t t = (uint32_t)(planner_hash(addr) >> 32);
  *top = t;
  for (size_t j = planner_home(p, t);; j = (j + 1) & p->mask) {
    uint64_t s = p->held[j];
    if (!s || ((uint32_t)(s >> 32) == t && p->addr[(uint32_t)s - 1] == addr)) return j;
  }
}

/* Empties slot `hole`, pulling later members of its probe run back into it. */
static inline void planner_unhold(replay_planner *p, size_t hole) {
  for (size_t k = (hole + 1) & p->mask; p->held[k]; k = (k + 1) & p->mask) {
    size_t home = planner_home(p, (uint32_t)(p->held[k] >> 32));
    if (((k - home) & p->mask) >= ((k - hole) & p->mask)) { /* k's home is not in (hole, k] */
      p->held[hole] = p->held[k];
      hole = k;
    }
  }
  p->held[hole] = 0;
  p->len--;
}

/* A new record for addr (the one given back last, else the next), at index slot j (empty). */
static inline uint32_t planner_take(replay_planner *p, size_t j, uint32_t top, uint64_t addr) {
  uint32_t r;
  if (p->nspare) {
    r = p->spare[--p->nspare];
  } else {
    if (p->next >= REPLAY_PLAN_NONE - 1) {
      p->full = 1;
      return 0;
    }
    r = p->next++;
    if (r >= p->cap_addr) sim_grow((void **)&p->addr, &p->cap_addr, (size_t)r + 1, sizeof *p->addr);
  }
  p->addr[r] = addr;
  p->held[j] = (uint64_t)top << 32 | (uint64_t)(r + 1);
  p->len++;
  return r;
}

/* Event ev's number (source.h). */
__attribute__((always_inline)) static inline uint32_t planner_step(replay_planner *p, const sim_event *ev) {
  uint32_t top;
  if (ev->kind == SIM_EV_ALLOC) {
    if ((p->len + 1) * 4 > (p->held ? p->mask + 1 : 0) && planner_grow(p)) {
      p->full = 1;
      return 0;
    }
    size_t j = planner_find(p, ev->addr, &top);
    return p->held[j] ? (uint32_t)p->held[j] - 1 : planner_take(p, j, top, ev->addr);
  }
  if (!sim_kind_is_free(ev->kind) || !p->len) return REPLAY_PLAN_NONE;
  size_t j = planner_find(p, ev->addr, &top);
  if (!p->held[j]) return REPLAY_PLAN_NONE;
  uint32_t r = (uint32_t)p->held[j] - 1;
  if (ev->kind == SIM_EV_FREE_REQUESTED) return r; /* still held until the free completes */
  if (p->nspare == p->cap_spare) sim_grow((void **)&p->spare, &p->cap_spare, p->nspare + 1, sizeof *p->spare);
  p->spare[p->nspare++] = r;
  planner_unhold(p, j);
  return r;
}

/* The numbering empty, keeping its memory. */
static inline void planner_reset(replay_planner *p) {
  if (p->len) memset(p->held, 0, (p->mask + 1) * sizeof *p->held);
  p->len = p->nspare = 0;
  p->next = 0;
  p->full = 0;
}

/* Room for record r's address. */
static inline void planner_room(replay_planner *p, uint32_t r) {
  if (r >= p->cap_addr) sim_grow((void **)&p->addr, &p->cap_addr, (size_t)r + 1, sizeof *p->addr);
  if (r >= p->next) p->next = r + 1;
}

/* For a numbering that goes on from another's (the engine's, from its source's plan): record r
 * is held by addr, which no other record holds. */
static inline void planner_hold(replay_planner *p, uint64_t addr, uint32_t r) {
  uint32_t top;
  if ((p->len + 1) * 4 > (p->held ? p->mask + 1 : 0) && planner_grow(p)) {
    p->full = 1;
    return;
  }
  planner_room(p, r);
  size_t j = planner_find(p, addr, &top);
  p->addr[r] = addr;
  p->held[j] = (uint64_t)top << 32 | (uint64_t)(r + 1);
  p->len++;
}

/* The same: record r is free. */
static inline void planner_spare(replay_planner *p, uint32_t r) {
  planner_room(p, r);
  if (p->nspare == p->cap_spare) sim_grow((void **)&p->spare, &p->cap_spare, p->nspare + 1, sizeof *p->spare);
  p->spare[p->nspare++] = r;
}

#endif

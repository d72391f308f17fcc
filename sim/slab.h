/* slab.h: fixed-size records addressed by index, with a free list: handles that survive growth. */
#ifndef SIM_SLAB_H
#define SIM_SLAB_H

#include <stdint.h>
#include <stdlib.h>

#include "hashmap.h"

/*
 * A slab hands out record indices starting at 1 (0 means "none"); a freed index is reused
 * first. Pointers from sim_slab_at are invalidated by the next sim_slab_new; indices are not.
 */
typedef struct sim_slab {
  unsigned char *items;
  size_t elem;       /* record size, at least sizeof(uint32_t) */
  size_t cap, len;   /* records allocated, records ever used (index len is the highest) */
  uint32_t free_head;
  size_t live;
} sim_slab;

static inline void sim_slab_init(sim_slab *s, size_t elem) {
  s->items = NULL;
  s->elem = elem < sizeof(uint32_t) ? sizeof(uint32_t) : elem;
  s->cap = s->len = s->live = 0;
  s->free_head = 0;
}

static inline void sim_slab_release(sim_slab *s) {
  free(s->items);
  sim_slab_init(s, s->elem);
}

/* Forgets every record, keeping the storage: the next index handed out is 1 again. */
static inline void sim_slab_clear(sim_slab *s) {
  s->len = s->live = 0;
  s->free_head = 0;
}

static inline void *sim_slab_at(const sim_slab *s, uint32_t idx) {
  return s->items + (size_t)(idx - 1) * s->elem;
}

static inline uint32_t sim_slab_new(sim_slab *s) {
  uint32_t idx;
  if (s->free_head) {
    idx = s->free_head;
    s->free_head = *(uint32_t *)sim_slab_at(s, idx);
  } else {
    sim_grow((void **)&s->items, &s->cap, s->len + 1, s->elem);
    idx = (uint32_t)++s->len;
  }
  s->live++;
  return idx;
}

static inline void sim_slab_free(sim_slab *s, uint32_t idx) {
  *(uint32_t *)sim_slab_at(s, idx) = s->free_head;
  s->free_head = idx;
  s->live--;
}

#endif

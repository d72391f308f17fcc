/* hashmap.c: open-addressing u64 map with backward-shift deletion. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

#define EMPTY UINT64_MAX

static inline size_t slot_of(uint64_t key, size_t cap) {
  /* Fibonacci hashing, the home taken from the product's top bits: those depend on every bit of
   * the key, so addresses that are multiples of large powers of two spread over every slot (lower
   * bits of the product are zero for such keys: taking them left 2 MiB-aligned addresses 1/16 of
   * the slots). cap is a power of two, at least 64. */
  return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - (unsigned)__builtin_ctzll(cap)));
}

void sim_map_init(sim_map *m) { memset(m, 0, sizeof *m); }

void sim_map_release(sim_map *m) {
  free(m->slots);
  sim_map_init(m);
}

void sim_map_clear(sim_map *m) {
  if (m->slots && m->len) /* a map emptied by deletes has every slot empty */
    for (size_t i = 0; i < m->cap; i++) m->slots[i].key = EMPTY;
  m->len = 0;
  m->has_max = 0;
}

static void rehash(sim_map *m, size_t ncap) {
  sim_map_entry *old = m->slots;
  size_t ocap = m->cap;
  m->slots = sim_xmalloc(ncap * sizeof *m->slots);
  for (size_t i = 0; i < ncap; i++) m->slots[i].key = EMPTY;
  m->cap = ncap;
  for (size_t i = 0; i < ocap; i++) {
    if (old[i].key == EMPTY) continue;
    size_t j = slot_of(old[i].key, ncap);
    while (m->slots[j].key != EMPTY) j = (j + 1) & (ncap - 1);
    m->slots[j] = old[i];
  }
  free(old);
}

uint64_t *sim_map_get(const sim_map *m, uint64_t key) {
  if (key == EMPTY) return m->has_max ? (uint64_t *)&m->max_val : NULL;
  if (!m->cap) return NULL;
  size_t j = slot_of(key, m->cap);
  for (;;) {
    sim_map_entry *e = &m->slots[j];
    if (e->key == key) return &e->val;
    if (e->key == EMPTY) return NULL;
    j = (j + 1) & (m->cap - 1);
  }
}

uint64_t *sim_map_put(sim_map *m, uint64_t key, int *existed) {
  if (key == EMPTY) {
    if (existed) *existed = m->has_max;
    if (!m->has_max) {
      m->has_max = 1;
      m->max_val = 0;
      m->len++;
    }
    return &m->max_val;
  }
  if ((m->len + 1) * 4 > m->cap * 3) rehash(m, m->cap ? m->cap * 2 : 64);
  size_t j = slot_of(key, m->cap);
  for (;;) {
    sim_map_entry *e = &m->slots[j];
    if (e->key == key) {
      if (existed) *existed = 1;
      return &e->val;
    }
    if (e->key == EMPTY) {
      e->key = key;
      e->val = 0;
      m->len++;
      if (existed) *existed = 0;
      return &e->val;
    }
    j = (j + 1) & (m->cap - 1);
  }
}

/* Empties slot j, pulling later members of its probe run back into the hole. */
static void remove_at(sim_map *m, size_t j) {
  size_t mask = m->cap - 1, hole = j;
  for (size_t k = (j + 1) & mask; m->slots[k].key != EMPTY; k = (k + 1) & mask) {
    size_t home = slot_of(m->slots[k].key, m->cap);
    /* Move k into the hole unless its home lies cyclically in (hole, k]. */
    int between = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
    if (!between) {
      m->slots[hole] = m->slots[k];
      hole = k;
    }
  }
  m->slots[hole].key = EMPTY;
  m->len--;
}

int sim_map_del(sim_map *m, uint64_t key, uint64_t *val) {
  if (key == EMPTY) {
    if (!m->has_max) return 0;
    if (val) *val = m->max_val;
    m->has_max = 0;
    m->len--;
    return 1;
  }
  if (!m->cap) return 0;
  size_t mask = m->cap - 1, j = slot_of(key, m->cap);
  for (;;) {
    if (m->slots[j].key == key) break;
    if (m->slots[j].key == EMPTY) return 0;
    j = (j + 1) & mask;
  }
  if (val) *val = m->slots[j].val;
  remove_at(m, j);
  return 1;
}

void sim_map_del_slot(sim_map *m, uint64_t *val) {
  if (val == &m->max_val) {
    m->has_max = 0;
    m->len--;
    return;
  }
  sim_map_entry *e = (sim_map_entry *)((char *)val - offsetof(sim_map_entry, val));
  remove_at(m, (size_t)(e - m->slots));
}

void sim_map_copy(sim_map *dst, const sim_map *src) {
  sim_map_release(dst);
  *dst = *src;
  if (src->cap) {
    dst->slots = sim_xmalloc(src->cap * sizeof *dst->slots);
    memcpy(dst->slots, src->slots, src->cap * sizeof *dst->slots);
  }
}

int sim_map_next(const sim_map *m, size_t *iter, uint64_t *key, uint64_t *val) {
  while (*iter < m->cap) {
    const sim_map_entry *e = &m->slots[(*iter)++];
    if (e->key != EMPTY) {
      *key = e->key;
      *val = e->val;
      return 1;
    }
  }
  if (*iter == m->cap && m->has_max) {
    (*iter)++;
    *key = EMPTY;
    *val = m->max_val;
    return 1;
  }
  return 0;
}

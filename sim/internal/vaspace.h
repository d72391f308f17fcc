/* vaspace.h: free ranges of address space by address, the lowest that holds a size found without a scan of them all. */
#ifndef SIM_INTERNAL_VASPACE_H
#define SIM_INTERNAL_VASPACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h" /* sim_xmalloc, sim_grow */

/*
 * The free ranges of the simulated driver's address space (device_sim.c): disjoint, never two
 * touching (a range given back joins the ranges beside it), taken first fit by address. They lie
 * in address order, from the highest down, in blocks of up to VA_BLOCK ranges, and the set keeps
 * each block's lowest address and a bound on its largest range beside it, in one array. A first
 * fit reads the bounds from the lowest block up until one may hold the size, then that block's
 * ranges (a block found to hold none gets its exact largest as its bound); giving a range back
 * finds its block by a binary search of the lowest addresses and moves at most a block's ranges;
 * a new slab's rest, below all the others, is appended. A replay of many long-lived allocations of
 * mixed sizes leaves thousands of holes, where a scan of every range on each request made the
 * replay quadratic; a few hundred ranges fit a few blocks and cost about what one array did. A
 * bound on the largest range of all (made exact by a search that finds none) answers at once the
 * request no range holds, which most large ones are (each then carves a slab whose rest is smaller).
 */
#define VA_BLOCK 64

typedef struct va_range {
  uint64_t addr, size;
} va_range;

typedef struct va_block va_block;
struct va_block {
  size_t n;
  va_block *next;       /* the spare blocks' list */
  va_range r[VA_BLOCK]; /* from the highest address down */
};

/* A block as the set files it. */
typedef struct va_slot {
  va_block *b;
  uint64_t low;     /* its lowest address: b->r[b->n - 1].addr */
  uint64_t largest; /* no range of it is larger (a bound, made exact when a search finds none) */
} va_slot;

typedef struct va_space {
  va_slot *s;       /* the blocks, from the highest addresses down */
  size_t nb, cap;
  va_block *spares; /* blocks kept for reuse */
  size_t n;         /* ranges */
  uint64_t largest; /* no range is larger (a bound, made exact when a search finds none) */
} va_space;

/*
 *   va_space_init(v), va_space_release(v)
 *   va_space_clear(v)              forgets every range; keeps the blocks for reuse
 *   va_space_take(v, size, &addr)  takes size bytes from the front of the lowest range that holds
 *                                  them: 0 and addr, or -1 when no range does (nothing changes)
 *   va_space_give(v, addr, size)   [addr, addr + size), free of every range, back, joined with the
 *                                  ranges it touches
 *   va_space_valid(v)              1 when the ranges are in order, disjoint and untouching, no
 *                                  block is empty, and the blocks' lowest addresses and bounds are
 *                                  right (tests, internal checks; O(n))
 */

static inline void va_space_init(va_space *v) { memset(v, 0, sizeof *v); }

static inline void va_space_clear(va_space *v) {
  for (size_t i = 0; i < v->nb; i++) {
    v->s[i].b->next = v->spares;
    v->spares = v->s[i].b;
  }
  v->nb = v->n = 0;
  v->largest = 0;
}

static inline void va_space_release(va_space *v) {
  va_space_clear(v);
  for (va_block *b = v->spares, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(v->s);
  memset(v, 0, sizeof *v);
}

/* ---- blocks (the set's own) ---------------------------------------------------------------- */

static inline void va_set_low_(va_slot *t) { t->low = t->b->r[t->b->n - 1].addr; }

/* An empty block at position i. */
static inline va_block *va_new_block_(va_space *v, size_t i) {
  sim_grow((void **)&v->s, &v->cap, v->nb + 1, sizeof *v->s);
  va_block *b = v->spares;
  if (b) v->spares = b->next;
  else b = sim_xmalloc(sizeof *b);
  b->n = 0;
  memmove(&v->s[i + 1], &v->s[i], (v->nb - i) * sizeof *v->s);
  v->s[i] = (va_slot){b, 0, 0};
  v->nb++;
  return b;
}

static inline void va_drop_block_(va_space *v, size_t i) {
  v->s[i].b->next = v->spares;
  v->spares = v->s[i].b;
  v->nb--;
  memmove(&v->s[i], &v->s[i + 1], (v->nb - i) * sizeof *v->s);
}

/* Block i + 1's ranges (the lower) appended to block i's (they fit). */
static inline void va_join_(va_space *v, size_t i) {
  va_slot *t = &v->s[i], *u = &v->s[i + 1];
  memcpy(&t->b->r[t->b->n], u->b->r, u->b->n * sizeof *u->b->r);
  t->b->n += u->b->n;
  t->low = u->low;
  if (u->largest > t->largest) t->largest = u->largest;
  va_drop_block_(v, i + 1);
}

/* ---- ranges ------------------------------------------------------------------------------- */

/* Range j of block i goes (the block's bound stays one). Two neighbouring blocks that hold no more
 * than half a block between them become one, so that blocks stay a quarter full on average. */
static inline void va_remove_(va_space *v, size_t i, size_t j) {
  va_block *b = v->s[i].b;
  memmove(&b->r[j], &b->r[j + 1], (b->n - j - 1) * sizeof *b->r);
  b->n--;
  v->n--;
  if (!b->n) {
    va_drop_block_(v, i);
    return;
  }
  if (j == b->n) va_set_low_(&v->s[i]);
  if (i + 1 < v->nb && b->n + v->s[i + 1].b->n <= VA_BLOCK / 2) va_join_(v, i);
  else if (i > 0 && v->s[i - 1].b->n + b->n <= VA_BLOCK / 2) va_join_(v, i - 1);
}

/* r at position j of block i (a full block is split in two first). */
static inline void va_insert_(va_space *v, size_t i, size_t j, va_range r) {
  if (!v->nb) va_new_block_(v, 0);
  va_block *b = v->s[i].b;
  if (b->n == VA_BLOCK) {
    enum { HALF = VA_BLOCK / 2 };
    va_block *c = va_new_block_(v, i + 1);
    memcpy(c->r, &b->r[HALF], (VA_BLOCK - HALF) * sizeof *b->r);
    c->n = VA_BLOCK - HALF;
    b->n = HALF;
    va_set_low_(&v->s[i]);
    va_set_low_(&v->s[i + 1]);
    v->s[i + 1].largest = v->s[i].largest; /* a bound for either half */
    if (j > HALF) {
      i++;
      j -= HALF;
      b = c;
    }
  }
  memmove(&b->r[j + 1], &b->r[j], (b->n - j) * sizeof *b->r);
  b->r[j] = r;
  b->n++;
  v->n++;
  if (j == b->n - 1) v->s[i].low = r.addr;
  if (r.size > v->s[i].largest) v->s[i].largest = r.size;
  if (r.size > v->largest) v->largest = r.size;
}

static inline int va_space_take(va_space *v, uint64_t size, uint64_t *addr) {
  if (v->largest < size) return -1; /* no range holds it: a new slab, as most large requests take */
  uint64_t largest = 0;               /* the blocks' bounds passed over */
  for (size_t i = v->nb; i-- > 0;) { /* from the lowest block up */
    if (v->s[i].largest < size) {
      if (v->s[i].largest > largest) largest = v->s[i].largest;
      continue;
    }
    va_block *b = v->s[i].b;
    uint64_t passed = 0; /* the largest of the ranges passed over, all smaller than size */
    for (size_t j = b->n; j-- > 0;) {
      va_range *r = &b->r[j];
      if (r->size < size) {
        if (r->size > passed) passed = r->size;
        continue;
      }
      *addr = r->addr;
      r->addr += size; /* still below the range above it: the order holds */
      r->size -= size;
      if (!r->size) va_remove_(v, i, j);
      else if (j == b->n - 1) v->s[i].low = r->addr;
      return 0;
    }
    v->s[i].largest = passed; /* none held it: the bound made exact */
    if (passed > largest) largest = passed;
  }
  v->largest = largest; /* no block held it: every bound passed over, the largest of them */
  return -1;
}

/* [addr, addr + size) below every range, as a new slab's rest is: joined with the lowest range, or
 * after it in the last block. 0 when that block is full (va_space_give splits it). */
static inline int va_give_lowest_(va_space *v, uint64_t addr, uint64_t size) {
  va_slot *t = &v->s[v->nb - 1];
  va_block *b = t->b;
  va_range *lowest = &b->r[b->n - 1];
  if (addr + size == lowest->addr) {
    lowest->addr = addr;
    lowest->size += size;
    size = lowest->size;
  } else if (b->n < VA_BLOCK) {
    b->r[b->n++] = (va_range){addr, size};
    v->n++;
  } else {
    return 0;
  }
  t->low = addr;
  if (size > t->largest) t->largest = size;
  if (size > v->largest) v->largest = size;
  return 1;
}

static inline void va_space_give(va_space *v, uint64_t addr, uint64_t size) {
  if (v->nb && v->s[v->nb - 1].low > addr && va_give_lowest_(v, addr, size)) return;
  /* bi: the first block holding a range below addr; the range below addr is its first such */
  size_t bi = 0, hi = v->nb;
  while (bi < hi) {
    size_t mid = (bi + hi) / 2;
    if (v->s[mid].low > addr) bi = mid + 1;
    else hi = mid;
  }
  va_range *below = NULL, *above = NULL;
  size_t bj = 0, ai = 0, aj = 0;
  if (bi < v->nb) {
    va_block *b = v->s[bi].b;
    size_t lo = 0, up = b->n - 1; /* r[n - 1] is below addr */
    while (lo < up) {
      size_t mid = (lo + up) / 2;
      if (b->r[mid].addr > addr) lo = mid + 1;
      else up = mid;
    }
    below = &b->r[bj = lo];
    if (lo > 0) above = &b->r[ai = bi, aj = lo - 1];
    else if (bi > 0) above = &v->s[ai = bi - 1].b->r[aj = v->s[bi - 1].b->n - 1];
  } else if (v->nb) {
    above = &v->s[ai = v->nb - 1].b->r[aj = v->s[v->nb - 1].b->n - 1];
  }
  int join_below = below && below->addr + below->size == addr;
  int join_above = above && addr + size == above->addr;
  if (join_below) {
    below->size += size + (join_above ? above->size : 0);
    if (below->size > v->s[bi].largest) v->s[bi].largest = below->size;
    if (below->size > v->largest) v->largest = below->size;
    if (join_above) va_remove_(v, ai, aj); /* the two ranges and the gap are one */
  } else if (join_above) {
    above->addr = addr; /* nothing lies between it and the range below: the order holds */
    above->size += size;
    if (aj == v->s[ai].b->n - 1) v->s[ai].low = addr;
    if (above->size > v->s[ai].largest) v->s[ai].largest = above->size;
    if (above->size > v->largest) v->largest = above->size;
  } else if (below) {
    va_insert_(v, bi, bj, (va_range){addr, size});
  } else { /* below every range, as a new slab's rest is: at the end */
    va_insert_(v, v->nb ? v->nb - 1 : 0, v->nb ? v->s[v->nb - 1].b->n : 0, (va_range){addr, size});
  }
}

static inline int va_space_valid(const va_space *v) {
  size_t n = 0;
  uint64_t above = 0; /* the address of the range before */
  for (size_t i = 0; i < v->nb; i++) {
    const va_block *b = v->s[i].b;
    if (!b->n || b->n > VA_BLOCK || v->s[i].low != b->r[b->n - 1].addr) return 0;
    uint64_t m = 0;
    for (size_t j = 0; j < b->n; j++) {
      const va_range *r = &b->r[j];
      if (!r->size || (n && r->addr + r->size >= above)) return 0; /* empty, out of order, overlapping or touching */
      above = r->addr;
      if (r->size > m) m = r->size;
      n++;
    }
    if (m > v->s[i].largest || m > v->largest) return 0;
  }
  return n == v->n;
}

#endif

/* arena.h: records of one size whose addresses never change, handed out from pages that a clear keeps. */
#ifndef SIM_INTERNAL_ARENA_H
#define SIM_INTERNAL_ARENA_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h" /* sim_xmalloc, sim_grow */

/*
 * What the models keep their blocks, chunks and pieces in: a pointer to a record is its handle
 * for as long as it lives (pages never move, unlike sim/slab.h's indexed records), a record given
 * back is the next one handed out, and sim_arena_clear forgets every record but keeps the pages,
 * so that a model reset for the next replay allocates nothing. A record given back is chained
 * through one pointer member of its own (its offset given to sim_arena_init); the rest of it is
 * left as it was. Records come back unzeroed.
 */
typedef struct sim_arena {
  unsigned char **pages;
  size_t npages, pages_cap;
  size_t pages_used, page_used; /* pages handed out from (the last one partly: page_used records) */
  size_t elem, per_page, link;  /* record size, records a page, offset of the spare list's pointer */
  void *spare;                  /* records given back */
} sim_arena;

static inline void sim_arena_init(sim_arena *a, size_t elem, size_t link, size_t per_page) {
  memset(a, 0, sizeof *a);
  a->elem = elem;
  a->link = link;
  a->per_page = per_page;
}

static inline void *sim_arena_new(sim_arena *a) {
  void *r = a->spare;
  if (r) {
    memcpy(&a->spare, (unsigned char *)r + a->link, sizeof a->spare);
    return r;
  }
  if (a->pages_used == 0 || a->page_used == a->per_page) {
    if (a->pages_used == a->npages) {
      sim_grow((void **)&a->pages, &a->pages_cap, a->npages + 1, sizeof *a->pages);
      a->pages[a->npages++] = sim_xmalloc(a->per_page * a->elem);
    }
    a->pages_used++;
    a->page_used = 0;
  }
  return a->pages[a->pages_used - 1] + a->page_used++ * a->elem;
}

static inline void sim_arena_delete(sim_arena *a, void *r) {
  memcpy((unsigned char *)r + a->link, &a->spare, sizeof a->spare);
  a->spare = r;
}

/* Every record forgotten; the pages stay. */
static inline void sim_arena_clear(sim_arena *a) {
  a->pages_used = a->page_used = 0;
  a->spare = NULL;
}

static inline void sim_arena_release(sim_arena *a) {
  for (size_t i = 0; i < a->npages; i++) free(a->pages[i]);
  free(a->pages);
  sim_arena_init(a, a->elem, a->link, a->per_page);
}

#endif

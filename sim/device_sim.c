/* device_sim.c: the simulated device primitive: capacity, addresses, and the driver's 2 MiB pages. */
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "internal/arena.h"
#include "internal/debug.h"
#include "internal/rbtree.h"
#include "internal/vaspace.h"
#include "hashmap.h"

/*
 * What this assumes of the CUDA driver (docs/allocators.md, "The simulated device"):
 *  - physical memory is taken in 2 MiB pages;
 *  - a cudaMalloc of 2 MiB or more gets pages of its own, its size rounded up to 2 MiB;
 *  - smaller cudaMallocs share pages, 512-byte aligned: each takes the front of the smallest
 *    hole that holds it in the pages already holding small allocations (the lowest address
 *    among equal holes), else a new page; a page goes back to the device when its last
 *    allocation is freed;
 *  - mapping (cuMemMap) takes exactly the bytes mapped; reserving address space takes none;
 *  - the addresses of cudaMallocs of 2 MiB or more go one of two ways (sim_simdev_set_va_order):
 *    as the Linux driver hands them out (SIM_VA_DOWN, the default): each takes the lowest free
 *    range of address space that holds it, else a new slab, its size rounded up to 32 MiB, is
 *    carved below all the others and it takes the slab's start, the rest of the slab staying
 *    free; a cudaFree gives its range back; or upwards, never reused (SIM_VA_UP). The models that
 *    break ties between free blocks by address (torch, async) decide by these values;
 *  - other addresses (pages of small allocations, reservations) are handed out upwards, above
 *    those of the memory a replay starts with (sim_simdev_hold).
 */

/* A piece of a page of small allocations: one allocation, or a hole between them. A page's
 * pieces are a list in address order; the holes of every page are a tree by (size, address),
 * so that the best fit is a lower bound. */
typedef struct piece piece;
struct piece {
  RB_ENTRY(piece) link; /* in simdev.holes while a hole */
  uint64_t addr, size;
  piece *prev, *next;   /* neighbours in the page (next also links the spare records) */
  int hole;
};

static int piece_cmp(const piece *a, const piece *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  return (a->addr > b->addr) - (a->addr < b->addr);
}

RB_HEAD(holes, piece);
SIM_RB_GENERATE(holes, piece, link, piece_cmp)

#define SLAB (UINT64_C(32) << 20) /* the driver's address space is carved in multiples of this */

#define PIECES_PER_CHUNK 256

typedef struct simdev {
  sim_device *dev;
  uint64_t next_va;     /* next free virtual address, page aligned */
  int va_order;         /* SIM_VA_DOWN or SIM_VA_UP */
  /* SIM_VA_DOWN: the free ranges of the slabs, taken first fit by address (internal/vaspace.h);
   * the lowest slab's start (the next is carved below it) */
  va_space ranges;
  uint64_t slab_va;
  struct holes holes;   /* the holes of the pages of small allocations */
  sim_map live;         /* address of a small allocation -> its piece */
  sim_arena pieces;     /* their storage, kept across resets */
} simdev;

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

static int take(simdev *s, uint64_t bytes) {
  sim_device *d = s->dev;
  if (bytes > d->capacity || d->used > d->capacity - bytes) return SIM_EOOM;
  d->used += bytes;
  if (d->used > d->used_peak) d->used_peak = d->used;
  return SIM_OK;
}

static uint64_t new_va(simdev *s, uint64_t size) {
  uint64_t a = s->next_va;
  s->next_va += round_up(size ? size : 1, SIM_PAGE_SIZE);
  return a;
}

static piece *piece_new(simdev *s, uint64_t addr, uint64_t size) {
  piece *p = sim_arena_new(&s->pieces);
  memset(p, 0, sizeof *p);
  p->addr = addr;
  p->size = size;
  return p;
}

static void piece_delete(simdev *s, piece *p) { sim_arena_delete(&s->pieces, p); }

/* need (a multiple of the granule, under a page) from the best hole, or a new page. */
static int small_malloc(simdev *s, uint64_t need, uint64_t *addr) {
  piece key = {.size = need, .addr = 0};
  piece *h = holes_RB_NFIND(&s->holes, &key);
  if (h) {
    holes_RB_REMOVE(&s->holes, h);
  } else {
    if (take(s, SIM_PAGE_SIZE)) return SIM_EOOM;
    h = piece_new(s, new_va(s, SIM_PAGE_SIZE), SIM_PAGE_SIZE);
  }
  if (h->size > need) { /* the rest stays a hole, after the allocation */
    piece *rest = piece_new(s, h->addr + need, h->size - need);
    rest->hole = 1;
    rest->prev = h;
    rest->next = h->next;
    if (h->next) h->next->prev = rest;
    h->next = rest;
    h->size = need;
    holes_RB_INSERT(&s->holes, rest);
  }
  h->hole = 0;
  *sim_map_put(&s->live, h->addr, NULL) = (uint64_t)(uintptr_t)h;
  *addr = h->addr;
  return SIM_OK;
}

/* Takes a hole beside p into p (p in no tree). */
static void absorb(simdev *s, piece *p, piece *h) {
  holes_RB_REMOVE(&s->holes, h);
  if (h == p->next) {
    p->next = h->next;
    if (h->next) h->next->prev = p;
  } else {
    p->prev = h->prev;
    if (h->prev) h->prev->next = p;
    p->addr = h->addr;
  }
  p->size += h->size;
  piece_delete(s, h);
}

static int small_free(simdev *s, uint64_t addr) {
  uint64_t v;
  if (!sim_map_del(&s->live, addr, &v)) return SIM_EINVAL;
  piece *p = (piece *)(uintptr_t)v;
  p->hole = 1;
  if (p->next && p->next->hole) absorb(s, p, p->next);
  if (p->prev && p->prev->hole) absorb(s, p, p->prev);
  if (p->size == SIM_PAGE_SIZE) { /* the page's last allocation: the page goes back */
    sim_assert_internal(!p->prev && !p->next);
    piece_delete(s, p);
    s->dev->used -= SIM_PAGE_SIZE;
  } else {
    holes_RB_INSERT(&s->holes, p);
  }
  return SIM_OK;
}

/* ---- the address space of large allocations, as the Linux driver hands it out (SIM_VA_DOWN) ---- */

/* The lowest free range that holds size (first fit by address), else a new slab below the others. */
static uint64_t range_take(simdev *s, uint64_t size) {
  uint64_t a;
  if (!va_space_take(&s->ranges, size, &a)) return a;
  uint64_t slab = round_up(size, SLAB);
  s->slab_va -= slab;
  if (slab > size) va_space_give(&s->ranges, s->slab_va + size, slab - size);
  return s->slab_va;
}

static int sd_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  simdev *s = ctx;
  (void)stream;
  if (size >= SIM_PAGE_SIZE) {
    uint64_t pages = round_up(size, SIM_PAGE_SIZE);
    if (pages < size) return SIM_EOOM; /* overflow */
    if (take(s, pages)) return SIM_EOOM;
    *addr = s->va_order == SIM_VA_DOWN ? range_take(s, pages) : new_va(s, pages);
    return SIM_OK;
  }
  return small_malloc(s, round_up(size ? size : 1, SIM_DRIVER_GRANULE), addr);
}

static int sd_free(void *ctx, uint64_t addr, uint64_t size) {
  simdev *s = ctx;
  if (size >= SIM_PAGE_SIZE) {
    s->dev->used -= round_up(size, SIM_PAGE_SIZE);
    if (s->va_order == SIM_VA_DOWN && !s->dev->clearing) va_space_give(&s->ranges, addr, round_up(size, SIM_PAGE_SIZE));
    return SIM_OK;
  }
  return small_free(s, addr);
}

static int sd_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  *addr = new_va(ctx, size);
  return SIM_OK;
}

static int sd_unreserve(void *ctx, uint64_t addr, uint64_t size) {
  (void)ctx, (void)addr, (void)size;
  return SIM_OK;
}

static int sd_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  (void)addr, (void)stream;
  return take(ctx, size);
}

static int sd_unmap(void *ctx, uint64_t addr, uint64_t size) {
  simdev *s = ctx;
  (void)addr;
  s->dev->used -= size;
  return SIM_OK;
}

static const sim_device_ops simdev_ops = {
  .size = sizeof(sim_device_ops),
  .malloc = sd_malloc,
  .free = sd_free,
  .reserve = sd_reserve,
  .unreserve = sd_unreserve,
  .map = sd_map,
  .unmap = sd_unmap,
};

#define SIMDEV_FIRST_VA UINT64_C(0x7f0000000000) /* upwards from here; SIM_VA_DOWN's slabs below it */

/* What a simulated device holds: its capacity, and without one (UINT64_MAX) the most one may give,
 * so that what a model holds stays far inside its 64-bit counters. */
static uint64_t held_capacity(uint64_t capacity) { return capacity < SIM_SIZE_MAX ? capacity : SIM_SIZE_MAX; }

void sim_simdev_init(sim_device *d, uint64_t capacity, uint64_t total_memory) {
  memset(d, 0, sizeof *d);
  simdev *s = sim_xcalloc(1, sizeof *s);
  s->dev = d;
  s->next_va = s->slab_va = SIMDEV_FIRST_VA;
  RB_INIT(&s->holes);
  sim_map_init(&s->live);
  sim_arena_init(&s->pieces, sizeof(piece), offsetof(piece, next), PIECES_PER_CHUNK);
  va_space_init(&s->ranges);
  d->ops = &simdev_ops;
  d->ctx = s;
  d->capacity = held_capacity(capacity);
  d->total_memory = sim_simdev_total_memory(capacity, total_memory);
  d->free_memory = d->total_memory;
  d->cc_major = 9;
}

uint64_t sim_simdev_total_memory(uint64_t capacity, uint64_t total_memory) {
  return total_memory ? total_memory : (capacity == UINT64_MAX ? UINT64_C(80) << 30 : capacity);
}

void sim_simdev_resize(sim_device *d, uint64_t capacity, uint64_t total_memory) {
  sim_assert_internal(!d->used && !d->mallocs && !d->maps); /* just reset */
  d->capacity = held_capacity(capacity);
  d->total_memory = sim_simdev_total_memory(capacity, total_memory);
  d->free_memory = d->total_memory;
}

void sim_simdev_hold(sim_device *d, uint64_t addr, uint64_t span, uint64_t used) {
  simdev *s = d->ctx;
  if (used >= SIM_PAGE_SIZE && round_up(used, SIM_PAGE_SIZE) >= used) used = round_up(used, SIM_PAGE_SIZE);
  d->used += used;
  if (d->used > d->used_peak) d->used_peak = d->used;
  uint64_t room = 2 * round_up(d->total_memory, SIM_PAGE_SIZE);
  uint64_t end = round_up(addr + span, SIM_PAGE_SIZE) + room;
  if (end > s->next_va) s->next_va = end;
  /* SIM_VA_DOWN: new slabs go below the memory held, as the driver's went, where there is room */
  uint64_t lo = addr / SLAB * SLAB;
  if (lo < s->slab_va && lo >= room) s->slab_va = lo;
}

void sim_simdev_set_va_order(sim_device *d, int order) {
  simdev *s = d->ctx;
  sim_assert_internal(!d->mallocs && !d->used); /* a device just made or reset */
  s->va_order = order;
}

int sim_simdev_va_order(const sim_device *d) { return ((const simdev *)d->ctx)->va_order; }

void sim_simdev_clearing(sim_device *d) { d->clearing = 1; }

void sim_va_votes_add(sim_va_votes *v, uint64_t addr, int is_new) {
  if (v->seen && is_new) {
    if (addr > v->hi) v->up++;
    else if (addr < v->lo) v->down++;
  }
  if (!v->seen || addr < v->lo) v->lo = addr;
  if (!v->seen || addr > v->hi) v->hi = addr;
  v->seen = 1;
}

int sim_va_votes_order(const sim_va_votes *v) {
  if (v->up + v->down < 3) return -1;
  if (v->down >= 2 * v->up) return SIM_VA_DOWN;
  if (v->up >= 2 * v->down) return SIM_VA_UP;
  return -1;
}

void sim_simdev_reset(sim_device *d) {
  simdev *s = d->ctx;
  s->next_va = s->slab_va = SIMDEV_FIRST_VA;
  sim_assert_expensive(va_space_valid(&s->ranges));
  va_space_clear(&s->ranges);
  d->clearing = 0;
  RB_INIT(&s->holes);
  sim_map_clear(&s->live);
  sim_arena_clear(&s->pieces);
  d->mallocs = d->frees = d->maps = d->unmaps = 0;
  d->malloc_bytes = d->free_bytes = d->map_bytes = d->unmap_bytes = 0;
  d->used = d->used_peak = 0;
}

void sim_simdev_release(sim_device *d) {
  simdev *s = d->ctx;
  if (s) {
    sim_assert_expensive(va_space_valid(&s->ranges));
    sim_map_release(&s->live);
    sim_arena_release(&s->pieces);
    va_space_release(&s->ranges);
    free(s);
  }
  d->ctx = NULL;
}

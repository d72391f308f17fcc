/* device_sim.c: the simulated device primitive: capacity, addresses, and the driver's 2 MiB pages. */
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "internal/debug.h"
#include "hashmap.h"

/*
 * What this assumes of the CUDA driver (docs/allocators.md):
 *  - physical memory is taken in 2 MiB pages;
 *  - a cudaMalloc of 2 MiB or more gets pages of its own, its size rounded up to 2 MiB;
 *  - smaller cudaMallocs are packed, 512-byte aligned, into the page most recently opened for
 *    them; a page returns to the device when its last allocation is freed, except the open
 *    one, which the driver keeps for the next small request;
 *  - mapping (cuMemMap) takes exactly the bytes mapped; reserving address space takes none;
 *  - addresses are handed out upwards and never reused (nothing depends on their values), above
 *    those of the memory a replay starts with (sim_simdev_hold).
 */
typedef struct simdev {
  sim_device *dev;
  uint64_t next_va;   /* next free virtual address, page aligned */
  uint64_t open_page; /* page small allocations are packed into, 0 = none */
  uint64_t open_off;  /* bytes of it handed out */
  sim_map live;       /* small-allocation page -> live allocations in it */
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

static int sd_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  simdev *s = ctx;
  (void)stream;
  if (size >= SIM_PAGE_SIZE) {
    uint64_t pages = round_up(size, SIM_PAGE_SIZE);
    if (pages < size) return SIM_EOOM; /* overflow */
    if (take(s, pages)) return SIM_EOOM;
    *addr = new_va(s, pages);
    return SIM_OK;
  }
  uint64_t need = round_up(size ? size : 1, SIM_DRIVER_GRANULE);
  if (!s->open_page || s->open_off + need > SIM_PAGE_SIZE) {
    if (take(s, SIM_PAGE_SIZE)) return SIM_EOOM;
    /* The previous open page goes back once empty; if it is empty now, it goes now. */
    if (s->open_page) {
      uint64_t *n = sim_map_get(&s->live, s->open_page);
      if (!n || !*n) {
        sim_map_del(&s->live, s->open_page, NULL);
        s->dev->used -= SIM_PAGE_SIZE;
      }
    }
    s->open_page = new_va(s, SIM_PAGE_SIZE);
    s->open_off = 0;
  }
  *addr = s->open_page + s->open_off;
  s->open_off += need;
  (*sim_map_put(&s->live, s->open_page, NULL))++;
  return SIM_OK;
}

static int sd_free(void *ctx, uint64_t addr, uint64_t size) {
  simdev *s = ctx;
  if (size >= SIM_PAGE_SIZE) {
    s->dev->used -= round_up(size, SIM_PAGE_SIZE);
    return SIM_OK;
  }
  uint64_t page = addr & ~(SIM_PAGE_SIZE - 1);
  uint64_t *n = sim_map_get(&s->live, page);
  if (!n || !*n) return SIM_EINVAL;
  if (--*n == 0) {
    if (page == s->open_page) {
      s->open_off = 0; /* kept open, and reused from its start */
    } else {
      sim_map_del(&s->live, page, NULL);
      s->dev->used -= SIM_PAGE_SIZE;
    }
  }
  return SIM_OK;
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

#define SIMDEV_FIRST_VA UINT64_C(0x7f0000000000)

void sim_simdev_init(sim_device *d, uint64_t capacity, uint64_t total_memory) {
  memset(d, 0, sizeof *d);
  simdev *s = sim_xcalloc(1, sizeof *s);
  s->dev = d;
  s->next_va = SIMDEV_FIRST_VA;
  sim_map_init(&s->live);
  d->ops = &simdev_ops;
  d->ctx = s;
  d->capacity = capacity;
  d->total_memory = sim_simdev_total_memory(capacity, total_memory);
  d->free_memory = d->total_memory;
  d->cc_major = 9;
}

uint64_t sim_simdev_total_memory(uint64_t capacity, uint64_t total_memory) {
  return total_memory ? total_memory : (capacity == UINT64_MAX ? UINT64_C(80) << 30 : capacity);
}

void sim_simdev_resize(sim_device *d, uint64_t capacity, uint64_t total_memory) {
  sim_assert_internal(!d->used && !d->mallocs && !d->maps); /* just reset */
  d->capacity = capacity;
  d->total_memory = sim_simdev_total_memory(capacity, total_memory);
  d->free_memory = d->total_memory;
}

void sim_simdev_hold(sim_device *d, uint64_t addr, uint64_t span, uint64_t used) {
  simdev *s = d->ctx;
  d->used += used;
  if (d->used > d->used_peak) d->used_peak = d->used;
  uint64_t end = round_up(addr + span, SIM_PAGE_SIZE) + 2 * round_up(d->total_memory, SIM_PAGE_SIZE);
  if (end > s->next_va) s->next_va = end;
}

void sim_simdev_reset(sim_device *d) {
  simdev *s = d->ctx;
  s->next_va = SIMDEV_FIRST_VA;
  s->open_page = s->open_off = 0;
  sim_map_clear(&s->live);
  d->mallocs = d->frees = d->maps = d->unmaps = 0;
  d->malloc_bytes = d->free_bytes = d->map_bytes = d->unmap_bytes = 0;
  d->used = d->used_peak = 0;
}

void sim_simdev_release(sim_device *d) {
  simdev *s = d->ctx;
  if (s) {
    sim_map_release(&s->live);
    free(s);
  }
  d->ctx = NULL;
}

/* shared_device.c: several processes of a trace on one GPU, each with its own simulated device. */
#include <stdlib.h>
#include <string.h>

#include "shared_device.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"

void shared_pool_init(shared_pool *pool, uint64_t capacity, uint64_t total) {
  pool->capacity = capacity;
  pool->total = total ? total : capacity;
  pool->used = 0;
  pool->address_order = SIM_VA_DOWN;
}

typedef struct shproc {
  shared_pool *pool;
  sim_device inner;
  sim_device *outer;
} shproc;

static void sh_before(shproc *p) {
  uint64_t room = p->pool->capacity > p->pool->used ? p->pool->capacity - p->pool->used : 0;
  p->inner.capacity = p->inner.used + room;
}

static void sh_after(shproc *p, uint64_t before) {
  p->pool->used = p->pool->used - before + p->inner.used;
  p->outer->used = p->inner.used;
  if (p->outer->used > p->outer->used_peak) p->outer->used_peak = p->outer->used;
}

#define SH_CALL(call)              \
  shproc *p = ctx;                 \
  uint64_t before = p->inner.used; \
  sh_before(p);                    \
  int rc = p->inner.ops->call;     \
  sh_after(p, before);             \
  return rc

static int sh_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  SH_CALL(malloc(p->inner.ctx, size, stream, addr));
}
static int sh_free(void *ctx, uint64_t addr, uint64_t size) { SH_CALL(free(p->inner.ctx, addr, size)); }
static int sh_reserve(void *ctx, uint64_t size, uint64_t *addr) { SH_CALL(reserve(p->inner.ctx, size, addr)); }
static int sh_unreserve(void *ctx, uint64_t addr, uint64_t size) { SH_CALL(unreserve(p->inner.ctx, addr, size)); }
static int sh_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  SH_CALL(map(p->inner.ctx, addr, size, stream));
}
static int sh_unmap(void *ctx, uint64_t addr, uint64_t size) { SH_CALL(unmap(p->inner.ctx, addr, size)); }

static const sim_device_ops shared_ops = {
  .size = sizeof(sim_device_ops),
  .malloc = sh_malloc,
  .free = sh_free,
  .reserve = sh_reserve,
  .unreserve = sh_unreserve,
  .map = sh_map,
  .unmap = sh_unmap,
};

int shared_device_make(void *arg, int device, sim_device *dev, char *err, size_t errlen) {
  shared_pool *pool = arg;
  (void)device, (void)err, (void)errlen;
  shproc *p = sim_xcalloc(1, sizeof *p);
  p->pool = pool;
  p->outer = dev;
  uint64_t room = pool->capacity > pool->used ? pool->capacity - pool->used : 0;
  sim_simdev_init(&p->inner, room, pool->total);
  sim_simdev_set_va_order(&p->inner, pool->address_order);
  memset(dev, 0, sizeof *dev);
  dev->ops = &shared_ops;
  dev->ctx = p;
  dev->total_memory = pool->total;
  dev->free_memory = room; /* what cudaMemGetInfo says when this process starts */
  dev->capacity = room;
  dev->cc_major = p->inner.cc_major;
  dev->cc_minor = p->inner.cc_minor;
  return 0;
}

void shared_device_release(void *arg, int device, sim_device *dev) {
  shared_pool *pool = arg;
  (void)device;
  shproc *p = dev->ctx;
  if (!p) return;
  pool->used -= p->inner.used < pool->used ? p->inner.used : pool->used;
  sim_simdev_release(&p->inner);
  free(p);
  dev->ctx = NULL;
}

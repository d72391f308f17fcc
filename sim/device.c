/* device.c: the counting wrappers every model calls to reach the device primitive, and the
 * watcher they tell of each call when one is set (out of the way when none is). */
#include "allocator.h"

static void watched(sim_device *d, const char *op, uint64_t size, uint64_t addr, int64_t stream, int rc,
                    uint64_t before) {
  sim_device_call c = {op, size, addr, stream, rc, before, d->used};
  d->watch->call(d->watch->arg, d->index, ++d->calls, &c);
}

static inline int counted_malloc(sim_device *d, uint64_t size, int64_t stream, uint64_t *addr) {
  int rc = d->ops->malloc(d->ctx, size, stream, addr);
  if (rc == SIM_OK) {
    d->mallocs++;
    d->malloc_bytes += size;
  }
  return rc;
}

static inline int counted_free(sim_device *d, uint64_t addr, uint64_t size) {
  int rc = d->ops->free(d->ctx, addr, size);
  if (rc == SIM_OK) {
    d->frees++;
    d->free_bytes += size;
  }
  return rc;
}

static inline int counted_map(sim_device *d, uint64_t addr, uint64_t size, int64_t stream) {
  int rc = d->ops->map(d->ctx, addr, size, stream);
  if (rc == SIM_OK) {
    d->maps++;
    d->map_bytes += size;
  }
  return rc;
}

static inline int counted_unmap(sim_device *d, uint64_t addr, uint64_t size) {
  int rc = d->ops->unmap(d->ctx, addr, size);
  if (rc == SIM_OK) {
    d->unmaps++;
    d->unmap_bytes += size;
  }
  return rc;
}

int sim_device_malloc(sim_device *d, uint64_t size, int64_t stream, uint64_t *addr) {
  if (__builtin_expect(!d->watch, 1)) return counted_malloc(d, size, stream, addr);
  uint64_t before = d->used;
  int rc = counted_malloc(d, size, stream, addr);
  watched(d, "malloc", size, rc == SIM_OK ? *addr : 0, stream, rc, before);
  return rc;
}

int sim_device_free(sim_device *d, uint64_t addr, uint64_t size) {
  if (__builtin_expect(!d->watch, 1)) return counted_free(d, addr, size);
  uint64_t before = d->used;
  int rc = counted_free(d, addr, size);
  watched(d, "free", size, addr, 0, rc, before);
  return rc;
}

int sim_device_reserve(sim_device *d, uint64_t size, uint64_t *addr) {
  uint64_t before = d->used;
  int rc = d->ops->reserve ? d->ops->reserve(d->ctx, size, addr) : SIM_EINVAL;
  if (d->watch) watched(d, "reserve", size, rc == SIM_OK ? *addr : 0, 0, rc, before);
  return rc;
}

int sim_device_unreserve(sim_device *d, uint64_t addr, uint64_t size) {
  uint64_t before = d->used;
  int rc = d->ops->unreserve ? d->ops->unreserve(d->ctx, addr, size) : SIM_EINVAL;
  if (d->watch) watched(d, "unreserve", size, addr, 0, rc, before);
  return rc;
}

int sim_device_map(sim_device *d, uint64_t addr, uint64_t size, int64_t stream) {
  if (!d->ops->map) return SIM_EINVAL;
  if (__builtin_expect(!d->watch, 1)) return counted_map(d, addr, size, stream);
  uint64_t before = d->used;
  int rc = counted_map(d, addr, size, stream);
  watched(d, "map", size, addr, stream, rc, before);
  return rc;
}

int sim_device_unmap(sim_device *d, uint64_t addr, uint64_t size) {
  if (!d->ops->unmap) return SIM_EINVAL;
  if (__builtin_expect(!d->watch, 1)) return counted_unmap(d, addr, size);
  uint64_t before = d->used;
  int rc = counted_unmap(d, addr, size);
  watched(d, "unmap", size, addr, 0, rc, before);
  return rc;
}

/* device.c: the counting wrappers every model calls to reach the device primitive. */
#include "allocator.h"

int sim_device_malloc(sim_device *d, uint64_t size, int64_t stream, uint64_t *addr) {
  int rc = d->ops->malloc(d->ctx, size, stream, addr);
  if (rc == SIM_OK) {
    d->mallocs++;
    d->malloc_bytes += size;
  }
  return rc;
}

int sim_device_free(sim_device *d, uint64_t addr, uint64_t size) {
  int rc = d->ops->free(d->ctx, addr, size);
  if (rc == SIM_OK) {
    d->frees++;
    d->free_bytes += size;
  }
  return rc;
}

int sim_device_reserve(sim_device *d, uint64_t size, uint64_t *addr) {
  return d->ops->reserve ? d->ops->reserve(d->ctx, size, addr) : SIM_EINVAL;
}

int sim_device_unreserve(sim_device *d, uint64_t addr, uint64_t size) {
  return d->ops->unreserve ? d->ops->unreserve(d->ctx, addr, size) : SIM_EINVAL;
}

int sim_device_map(sim_device *d, uint64_t addr, uint64_t size, int64_t stream) {
  if (!d->ops->map) return SIM_EINVAL;
  int rc = d->ops->map(d->ctx, addr, size, stream);
  if (rc == SIM_OK) {
    d->maps++;
    d->map_bytes += size;
  }
  return rc;
}

int sim_device_unmap(sim_device *d, uint64_t addr, uint64_t size) {
  if (!d->ops->unmap) return SIM_EINVAL;
  int rc = d->ops->unmap(d->ctx, addr, size);
  if (rc == SIM_OK) {
    d->unmaps++;
    d->unmap_bytes += size;
  }
  return rc;
}

/* device_sim.h: a simulated GPU: physical memory taken in 2 MiB pages, up to a capacity. */
#ifndef SIM_DEVICE_SIM_H
#define SIM_DEVICE_SIM_H

#include "allocator.h"

#define SIM_PAGE_SIZE (UINT64_C(2) << 20) /* the driver's physical page */
#define SIM_DRIVER_GRANULE UINT64_C(512)  /* sub-page allocations are packed at this granularity */

/*
 * Initialises d as a simulated device that lets the process take up to `capacity` bytes of
 * physical memory (UINT64_MAX: unlimited); `total_memory` is what the card reports.
 * See docs/allocators.md ("The simulated device") for what it assumes of the driver.
 */
void sim_simdev_init(sim_device *d, uint64_t capacity, uint64_t total_memory);
void sim_simdev_release(sim_device *d);
/* Returns d to the state sim_simdev_init left it in (the same capacity and total memory): nothing
 * used, every counter and peak zero, addresses handed out from the start again, memory held by
 * sim_simdev_hold forgotten. Keeps its tables for reuse. For the replay after an allocator's
 * reset (allocator.h): reset the model first, which hands its memory back, then the device. */
void sim_simdev_reset(sim_device *d);
/* The total memory sim_simdev_init gives a device of `capacity` and `total_memory`: total_memory,
 * or when 0 the capacity (80 GiB when unlimited). */
uint64_t sim_simdev_total_memory(uint64_t capacity, uint64_t total_memory);
/* Gives d, just reset (sim_simdev_reset), another capacity and total memory: it is then the device
 * sim_simdev_init(d, capacity, total_memory) makes, the same in all else. Its model is then told
 * (allocator.h, device_changed). */
void sim_simdev_resize(sim_device *d, uint64_t capacity, uint64_t total_memory);
/* Memory the process held before the replay began (a restored segment): `used` bytes count as
 * taken (beyond the capacity too: they were there), 2 MiB or more rounded up to whole pages, as
 * the driver took them for a cudaMalloc of that size, and no address in [addr, addr+span), nor
 * within twice the card's memory above it (room for a reservation made from there), is handed
 * out again. */
void sim_simdev_hold(sim_device *d, uint64_t addr, uint64_t span, uint64_t used);

/* Which way the addresses of cudaMallocs of 2 MiB or more go (docs/allocators.md, "The simulated
 * device"): SIM_VA_DOWN (the default), as the Linux driver hands them out, in slabs carved
 * downwards whose free ranges are reused lowest first; SIM_VA_UP, upwards and never reused. Set on
 * a device just made or reset (before its memory is held); a reset keeps it. */
enum { SIM_VA_DOWN, SIM_VA_UP };
void sim_simdev_set_va_order(sim_device *d, int order);
int sim_simdev_va_order(const sim_device *d);
/* What the model hands back from now on is all it holds, and a reset (or release) of d follows
 * (d->clearing): its frees skip the address space's bookkeeping, which the reset forgets, and a
 * model's reset hands back nothing (allocator.h, `reset`). */
void sim_simdev_clearing(sim_device *d);

/* Which way a recording's driver handed out addresses, from the segments its allocator recorded,
 * in order (sim_va_votes_add each segment_alloc as new, each segment_free as not): a new segment
 * outside every segment seen before votes up or down. SIM_VA_UP or SIM_VA_DOWN when at least three
 * voted and one way had twice the other's votes; else -1 (the recording does not tell). */
typedef struct sim_va_votes {
  uint64_t lo, hi;  /* the lowest and highest segment addresses seen */
  uint64_t up, down;
  int seen;
} sim_va_votes;
void sim_va_votes_add(sim_va_votes *v, uint64_t addr, int is_new);
int sim_va_votes_order(const sim_va_votes *v);

#endif

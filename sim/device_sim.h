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

#endif

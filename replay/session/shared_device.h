/* shared_device.h: several processes of a trace on one GPU: each its own simulated device, one capacity for all. */
#ifndef REPLAY_SESSION_SHARED_DEVICE_H
#define REPLAY_SESSION_SHARED_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/allocator.h"

/*
 * With a shared device, each device index of a replay is a process on one GPU: each has its own
 * simulated device (address space, driver pages), and all draw on one physical capacity. A
 * process sees, when it starts (its first event), the memory the others have not taken.
 */
typedef struct shared_pool {
  uint64_t capacity, total, used;
  int address_order; /* each process's simulated device's (sim_simdev_set_va_order; SIM_VA_DOWN after init) */
} shared_pool;

/* A GPU of capacity bytes whose card has total bytes (0: capacity). */
void shared_pool_init(shared_pool *pool, uint64_t capacity, uint64_t total);
/* The engine's device factory and its release (replay_config.make_device, with the pool as arg). */
int shared_device_make(void *pool, int device, sim_device *dev, char *err, size_t errlen);
void shared_device_release(void *pool, int device, sim_device *dev);

#endif

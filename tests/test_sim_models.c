/* test_sim_models.c: the `ideal` and `cuda` models and the simulated device's page rules. */
#include "sim/allocator.h"
#include "sim/device_sim.h"
#include "test.h"

int test_failures;

#define MiB (UINT64_C(1) << 20)

static void make(sim_allocator *a, sim_spec *spec, sim_device *dev, const char *name, uint64_t capacity) {
  char err[256];
  sim_simdev_init(dev, capacity, 0);
  if (sim_spec_parse(spec, name, err, sizeof err) != SIM_OK) fprintf(stderr, "%s\n", err);
  if (sim_allocator_init(a, spec, dev, NULL, NULL, err, sizeof err) != SIM_OK) fprintf(stderr, "%s\n", err);
}

static void done(sim_allocator *a, sim_spec *spec, sim_device *dev) {
  sim_allocator_release(a);
  sim_spec_release(spec);
  sim_simdev_release(dev);
}

static void ideal_counts_live_bytes(void) {
  sim_allocator a;
  sim_spec spec;
  sim_device dev;
  make(&a, &spec, &dev, "ideal", 10000);
  const sim_alloc_stats *st = a.ops->stats(a.ctx);
  sim_placement p1, p2, p3;
  CHECK_EQ(a.ops->alloc(a.ctx, 3000, 0, &p1), SIM_OK);
  CHECK_EQ(a.ops->alloc(a.ctx, 7000, 0, &p2), SIM_OK);
  CHECK_EQ(st->allocated.current, 10000);
  CHECK_EQ(st->reserved.current, 10000);
  CHECK_EQ(a.ops->alloc(a.ctx, 1, 0, &p3), SIM_EOOM); /* exactly full */
  CHECK_EQ(st->num_ooms, 1);
  a.ops->free_completed(a.ctx, p1.handle);
  CHECK_EQ(st->allocated.current, 7000);
  CHECK_EQ(st->allocated.peak, 10000);
  CHECK_EQ(a.ops->alloc(a.ctx, 3000, 0, &p3), SIM_OK);
  CHECK(p3.addr != p1.addr); /* addresses are never reused */
  CHECK_EQ(dev.mallocs, 0);
  char msg[256];
  a.ops->describe_oom(a.ctx, 99, 0, msg, sizeof msg);
  CHECK(strstr(msg, "99 bytes requested") != NULL);
  done(&a, &spec, &dev);
}

static void cuda_packs_small_requests_into_pages(void) {
  sim_allocator a;
  sim_spec spec;
  sim_device dev;
  make(&a, &spec, &dev, "cuda", UINT64_MAX);
  const sim_alloc_stats *st = a.ops->stats(a.ctx);
  sim_placement p1, p2, p3, p4, p5;
  /* As seen in a real nsys export: 1024 B, then 131072 B right after it in the same page. */
  CHECK_EQ(a.ops->alloc(a.ctx, 1024, 0, &p1), SIM_OK);
  CHECK_EQ(a.ops->alloc(a.ctx, 131072, 0, &p2), SIM_OK);
  CHECK_EQ(p2.addr, p1.addr + 1024);
  CHECK_EQ(st->reserved.current, 2 * MiB);
  CHECK_EQ(st->allocated.current, 132096);
  /* 3 MiB takes two pages of its own. */
  CHECK_EQ(a.ops->alloc(a.ctx, 3 * MiB, 0, &p3), SIM_OK);
  CHECK_EQ(st->reserved.current, 6 * MiB);
  CHECK_EQ(dev.mallocs, 3);
  a.ops->free_completed(a.ctx, p3.handle);
  CHECK_EQ(st->reserved.current, 2 * MiB);
  /* A hole freed in a page is used again: the smallest hole that holds the request. */
  a.ops->free_completed(a.ctx, p1.handle);
  CHECK_EQ(a.ops->alloc(a.ctx, 2048, 0, &p4), SIM_OK); /* larger than the 1024-byte hole */
  CHECK_EQ(p4.addr, p2.addr + 131072);
  CHECK_EQ(a.ops->alloc(a.ctx, 600, 0, &p5), SIM_OK); /* 1024 bytes rounded: the hole at the start */
  CHECK_EQ(p5.addr, p1.addr);
  CHECK_EQ(st->reserved.current, 2 * MiB);
  /* The page goes back with its last allocation, whatever order they are freed in. */
  a.ops->free_completed(a.ctx, p2.handle);
  a.ops->free_completed(a.ctx, p5.handle);
  CHECK_EQ(st->reserved.current, 2 * MiB);
  a.ops->free_completed(a.ctx, p4.handle);
  CHECK_EQ(st->reserved.current, 0);
  CHECK_EQ(st->allocated.current, 0);
  CHECK_EQ(dev.frees, 5);
  /* Across pages: 1.5 MiB leaves a hole of 0.5 MiB in its page, 1 MiB does not fit there and
   * opens another, leaving 1 MiB; 400 KiB then goes to the smaller hole, 700 KiB to the other. */
  sim_placement q1, q2, q3, q4;
  CHECK_EQ(a.ops->alloc(a.ctx, 1536 * 1024, 0, &q1), SIM_OK);
  CHECK_EQ(a.ops->alloc(a.ctx, 1024 * 1024, 0, &q2), SIM_OK);
  CHECK_EQ(st->reserved.current, 4 * MiB);
  CHECK_EQ(a.ops->alloc(a.ctx, 400 * 1024, 0, &q3), SIM_OK);
  CHECK_EQ(q3.addr, q1.addr + 1536 * 1024);
  CHECK_EQ(a.ops->alloc(a.ctx, 700 * 1024, 0, &q4), SIM_OK);
  CHECK_EQ(q4.addr, q2.addr + 1024 * 1024);
  CHECK_EQ(st->reserved.current, 4 * MiB);
  a.ops->free_completed(a.ctx, q1.handle);
  a.ops->free_completed(a.ctx, q3.handle);
  CHECK_EQ(st->reserved.current, 2 * MiB);
  CHECK_EQ(st->reserved.peak, 6 * MiB);
  done(&a, &spec, &dev);
}

static void cuda_runs_out_of_pages(void) {
  sim_allocator a;
  sim_spec spec;
  sim_device dev;
  make(&a, &spec, &dev, "cuda", 6 * MiB);
  sim_placement p1, p2;
  CHECK_EQ(a.ops->alloc(a.ctx, 5 * MiB, 0, &p1), SIM_OK); /* takes 6 MiB */
  CHECK_EQ(a.ops->alloc(a.ctx, 512, 0, &p2), SIM_EOOM);   /* no page left for it */
  CHECK_EQ(a.ops->stats(a.ctx)->num_ooms, 1);
  a.ops->free_completed(a.ctx, p1.handle);
  CHECK_EQ(a.ops->alloc(a.ctx, 512, 0, &p2), SIM_OK);
  CHECK_EQ(dev.used, 2 * MiB);
  done(&a, &spec, &dev);
}

static void device_counts_calls(void) {
  sim_device dev;
  sim_simdev_init(&dev, 8 * MiB, 80 * 1024 * MiB);
  uint64_t base, va;
  CHECK_EQ(sim_device_malloc(&dev, 4 * MiB, 0, &base), SIM_OK);
  CHECK_EQ(sim_device_reserve(&dev, 64 * MiB, &va), SIM_OK);
  CHECK_EQ(dev.used, 4 * MiB); /* reserving address space takes no memory */
  CHECK_EQ(sim_device_map(&dev, va, 4 * MiB, 0), SIM_OK);
  CHECK_EQ(sim_device_map(&dev, va + 4 * MiB, 2 * MiB, 0), SIM_EOOM);
  CHECK_EQ(sim_device_unmap(&dev, va, 2 * MiB), SIM_OK);
  CHECK_EQ(dev.used, 6 * MiB);
  CHECK_EQ(sim_device_free(&dev, base, 4 * MiB), SIM_OK);
  CHECK_EQ(dev.mallocs, 1);
  CHECK_EQ(dev.frees, 1);
  CHECK_EQ(dev.maps, 1);
  CHECK_EQ(dev.unmaps, 1);
  CHECK_EQ(dev.used_peak, 8 * MiB);
  CHECK_EQ(dev.total_memory, 80 * 1024 * MiB);
  sim_simdev_release(&dev);
}

int main(void) {
  RUN(ideal_counts_live_bytes);
  RUN(cuda_packs_small_requests_into_pages);
  RUN(cuda_runs_out_of_pages);
  RUN(device_counts_calls);
  TEST_MAIN_END();
}

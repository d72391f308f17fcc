/* test_sim_models.c: the `ideal` and `cuda` models and the simulated device's page rules. */
#include <string.h>

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

/* The simulated device's small requests against the rule written as a scan: every hole of every
 * page of small allocations looked at, the smallest that holds the request taken (the lowest
 * address among equal ones), else a new page; a page gone with its last allocation. Random
 * requests of 1 byte to 3 MiB and frees in random order, on a device that runs out. */
#define REF_PAGES 64
#define REF_PER_PAGE 4096
typedef struct ref_page {
  uint64_t va;
  size_t n;
  uint64_t off[REF_PER_PAGE], len[REF_PER_PAGE]; /* live allocations, by offset */
} ref_page;

static ref_page *ref_find(ref_page *pg, size_t np, uint64_t va) {
  for (size_t i = 0; i < np; i++)
    if (pg[i].va == va) return &pg[i];
  return NULL;
}

static void simdev_small_requests_take_the_best_hole(void) {
  static ref_page pg[REF_PAGES];
  size_t np = 0;
  struct { uint64_t addr, size; } live[512];
  size_t nlive = 0;
  sim_device dev;
  sim_simdev_init(&dev, 24 * MiB, 0);
  uint64_t rng = 12345, used = 0;
  int mismatches = 0, ooms = 0;
  for (int step = 0; step < 40000 && mismatches < 5; step++) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    uint64_t r = rng >> 33;
    if (nlive && (r % 3 == 0 || nlive == 512)) { /* a free */
      size_t i = (r >> 2) % nlive;
      uint64_t addr = live[i].addr, size = live[i].size;
      live[i] = live[--nlive];
      CHECK_EQ(sim_device_free(&dev, addr, size), SIM_OK);
      if (size >= 2 * MiB) {
        used -= (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
      } else {
        ref_page *g = ref_find(pg, np, addr & ~(2 * MiB - 1));
        size_t k = 0;
        while (k < g->n && g->off[k] != addr - g->va) k++;
        memmove(&g->off[k], &g->off[k + 1], (g->n - k - 1) * sizeof *g->off);
        memmove(&g->len[k], &g->len[k + 1], (g->n - k - 1) * sizeof *g->len);
        if (--g->n == 0) {
          *g = pg[--np];
          used -= 2 * MiB;
        }
      }
    } else { /* a request: mostly small, some of a page or more */
      uint64_t size = r % 8 == 0 ? 2 * MiB + (r >> 3) % MiB : r % 8 == 1 ? (r >> 3) % (2 * MiB) : 1 + (r >> 3) % 65536;
      uint64_t need = (size + 511) / 512 * 512, addr;
      ref_page *best = NULL;
      uint64_t best_off = 0, best_gap = UINT64_MAX, best_addr = 0;
      if (size < 2 * MiB)
        for (size_t i = 0; i < np; i++)
          for (size_t k = 0, at = 0; k <= pg[i].n; k++) {
            uint64_t end = k < pg[i].n ? pg[i].off[k] : 2 * MiB, gap = end - at;
            if (gap >= need && (gap < best_gap || (gap == best_gap && pg[i].va + at < best_addr))) {
              best = &pg[i], best_off = at, best_gap = gap, best_addr = pg[i].va + at;
            }
            if (k < pg[i].n) at = pg[i].off[k] + pg[i].len[k];
          }
      uint64_t cost = size >= 2 * MiB ? (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) : best ? 0 : 2 * MiB;
      int rc = sim_device_malloc(&dev, size, 0, &addr);
      if (used + cost > 24 * MiB) {
        CHECK_EQ(rc, SIM_EOOM);
        ooms++;
        continue;
      }
      CHECK_EQ(rc, SIM_OK);
      if (rc != SIM_OK) break;
      used += cost;
      if (size < 2 * MiB) {
        if (!best) { /* a new page: page aligned, and not one held */
          CHECK_EQ(addr % (2 * MiB), 0);
          CHECK(ref_find(pg, np, addr) == NULL);
          best = &pg[np++];
          best->va = addr, best->n = 0, best_off = 0;
        } else if (addr != best->va + best_off) {
          mismatches++;
          CHECK_EQ(addr, best->va + best_off);
        }
        size_t k = 0;
        while (k < best->n && best->off[k] < best_off) k++;
        memmove(&best->off[k + 1], &best->off[k], (best->n - k) * sizeof *best->off);
        memmove(&best->len[k + 1], &best->len[k], (best->n - k) * sizeof *best->len);
        best->off[k] = best_off, best->len[k] = need, best->n++;
      }
      live[nlive].addr = addr, live[nlive].size = size, nlive++;
    }
    CHECK_EQ(dev.used, used);
    if (dev.used != used) break;
  }
  CHECK(ooms > 100); /* the device was full often */
  sim_simdev_release(&dev);
}

int main(void) {
  RUN(ideal_counts_live_bytes);
  RUN(cuda_packs_small_requests_into_pages);
  RUN(cuda_runs_out_of_pages);
  RUN(device_counts_calls);
  RUN(simdev_small_requests_take_the_best_hole);
  TEST_MAIN_END();
}

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

/* Memory held from before the replay (a restored segment) counts as the cudaMalloc that took it
 * did: 2 MiB or more in whole pages (a BFC region of 799 MiB took 400 pages), less as given. The
 * device then refuses what a device that had made the same cudaMalloc refuses. */
static void simdev_held_memory_counts_whole_pages(void) {
  sim_device held, made;
  sim_simdev_init(&held, 1023 * MiB, 1024 * MiB);
  sim_simdev_init(&made, 1023 * MiB, 1024 * MiB);
  uint64_t addr, a2;
  CHECK_EQ(sim_device_malloc(&made, 799 * MiB, 0, &addr), SIM_OK);
  sim_simdev_hold(&held, addr, 799 * MiB, 799 * MiB);
  CHECK_EQ(made.used, 800 * MiB);
  CHECK_EQ(held.used, made.used);
  CHECK_EQ(sim_device_malloc(&made, 224 * MiB, 0, &a2), SIM_EOOM); /* 1,024 MiB of 1,023 */
  CHECK_EQ(sim_device_malloc(&held, 224 * MiB, 0, &a2), SIM_EOOM);
  CHECK_EQ(sim_device_malloc(&made, 222 * MiB, 0, &a2), SIM_OK);
  CHECK_EQ(sim_device_malloc(&held, 222 * MiB, 0, &a2), SIM_OK);
  sim_simdev_reset(&held);
  sim_simdev_hold(&held, addr, MiB / 2, MiB / 2);
  CHECK_EQ(held.used, MiB / 2);
  sim_simdev_release(&held);
  sim_simdev_release(&made);
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

/* SIM_VA_DOWN on the first calls PyTorch's caching allocator made on an H100
 * (docs/measurements/h100-2026-11-26/capacity/torch.txt): each slab below the last, a request
 * that fits the rest of a slab taking the lowest such rest, a freed range reused lowest first. */
static void simdev_down_carves_slabs_below(void) {
  sim_device dev;
  sim_simdev_init(&dev, UINT64_MAX, 0);
  sim_simdev_set_va_order(&dev, SIM_VA_DOWN);
  uint64_t a[8];
  CHECK_EQ(sim_device_malloc(&dev, 250 * MiB, 0, &a[0]), SIM_OK); /* a slab of 256 MiB */
  CHECK_EQ(a[0] % (32 * MiB), 0);
  CHECK_EQ(sim_device_malloc(&dev, 48 * MiB, 0, &a[1]), SIM_OK); /* 64 MiB below it */
  CHECK_EQ(a[1], a[0] - 64 * MiB);
  CHECK_EQ(sim_device_malloc(&dev, 2 * MiB, 0, &a[2]), SIM_OK); /* the lower rest (16 MiB), not the 6 MiB above */
  CHECK_EQ(a[2], a[1] + 48 * MiB);
  CHECK_EQ(sim_device_malloc(&dev, 16 * MiB, 0, &a[3]), SIM_OK); /* no rest holds it: a slab of 32 MiB */
  CHECK_EQ(a[3], a[1] - 32 * MiB);
  CHECK_EQ(sim_device_malloc(&dev, 15 * MiB, 0, &a[4]), SIM_OK); /* the lowest rest that holds 16 MiB */
  CHECK_EQ(a[4], a[3] + 16 * MiB);
  CHECK_EQ(sim_device_malloc(&dev, 3 * MiB, 0, &a[5]), SIM_OK); /* sizes in pages: 4 MiB of the 48's rest */
  CHECK_EQ(a[5], a[2] + 2 * MiB);
  CHECK_EQ(sim_device_free(&dev, a[1], 48 * MiB), SIM_OK);
  CHECK_EQ(sim_device_malloc(&dev, 40 * MiB, 0, &a[6]), SIM_OK); /* the freed range is the lowest that holds it */
  CHECK_EQ(a[6], a[1]);
  CHECK_EQ(sim_device_free(&dev, a[2], 2 * MiB), SIM_OK);
  CHECK_EQ(sim_device_free(&dev, a[5], 3 * MiB), SIM_OK);
  /* 40 live at a[1]; free: 8 MiB after it, then 2 + 4 + 8 = 14 MiB joined: 22 MiB in one range */
  CHECK_EQ(sim_device_malloc(&dev, 22 * MiB, 0, &a[7]), SIM_OK);
  CHECK_EQ(a[7], a[1] + 40 * MiB);
  CHECK_EQ(sim_simdev_va_order(&dev), SIM_VA_DOWN);
  sim_simdev_reset(&dev); /* keeps the order; addresses start again */
  CHECK_EQ(sim_simdev_va_order(&dev), SIM_VA_DOWN);
  uint64_t again;
  CHECK_EQ(sim_device_malloc(&dev, 250 * MiB, 0, &again), SIM_OK);
  CHECK_EQ(again, a[0]);
  sim_simdev_release(&dev);
}

/* SIM_VA_DOWN against a plain reference of the same rule (a list of free ranges in address order,
 * scanned from the lowest) over random requests and frees of 2 to 150 MiB, a step freeing one
 * with odds of free_pct in 100, up to max_live allocations live at once; returns the most free
 * ranges there were. */
#define REF_RANGES 8192
#define REF_LIVE 4096
static size_t simdev_down_against_reference(size_t max_live, unsigned free_pct, int steps, uint64_t seed) {
  static struct { uint64_t addr, size; } fr[REF_RANGES], live[REF_LIVE];
  size_t nf = 0, nlive = 0, most = 0;
  sim_device dev;
  sim_simdev_init(&dev, UINT64_MAX, 0);
  sim_simdev_set_va_order(&dev, SIM_VA_DOWN);
  uint64_t rng = seed, slab = 0, top = 0;
  int have_top = 0, mismatches = 0;
  CHECK(max_live <= REF_LIVE);
  for (int step = 0; step < steps && mismatches < 5 && nf < REF_RANGES - 2; step++) {
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    uint64_t r = rng >> 33;
    if (nf > most) most = nf;
    if (nlive && (r % 100 < free_pct || nlive == max_live)) {
      size_t i = (r >> 1) % nlive;
      uint64_t addr = live[i].addr, size = live[i].size;
      live[i] = live[--nlive];
      CHECK_EQ(sim_device_free(&dev, addr, size), SIM_OK);
      size = (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
      addr -= top; /* the reference's own */
      size_t k = 0;
      while (k < nf && fr[k].addr - slab < addr - slab) k++; /* address order (slab: the lowest) */
      memmove(&fr[k + 1], &fr[k], (nf - k) * sizeof fr[0]);
      fr[k].addr = addr, fr[k].size = size, nf++;
      if (k + 1 < nf && fr[k].addr + fr[k].size == fr[k + 1].addr) {
        fr[k].size += fr[k + 1].size;
        memmove(&fr[k + 1], &fr[k + 2], (nf - k - 2) * sizeof fr[0]), nf--;
      }
      if (k > 0 && fr[k - 1].addr + fr[k - 1].size == fr[k].addr) {
        fr[k - 1].size += fr[k].size;
        memmove(&fr[k], &fr[k + 1], (nf - k - 1) * sizeof fr[0]), nf--;
      }
      continue;
    }
    uint64_t size = 2 * MiB + (r >> 1) % (148 * MiB), need = (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB), want = 0;
    size_t k = 0;
    while (k < nf && fr[k].size < need) k++;
    if (k < nf) {
      want = fr[k].addr;
      fr[k].addr += need, fr[k].size -= need;
      if (!fr[k].size) memmove(&fr[k], &fr[k + 1], (nf - k - 1) * sizeof fr[0]), nf--;
    } else {
      uint64_t n = (need + 32 * MiB - 1) / (32 * MiB) * (32 * MiB);
      slab -= n;
      want = slab;
      if (n > need) { /* the rest: below every range, so first */
        memmove(&fr[1], &fr[0], nf * sizeof fr[0]);
        fr[0].addr = slab + need, fr[0].size = n - need, nf++;
        if (nf > 1 && fr[0].addr + fr[0].size == fr[1].addr) /* joins a free start of the slab above */
          fr[0].size += fr[1].size, memmove(&fr[1], &fr[2], (nf - 2) * sizeof fr[0]), nf--;
      }
    }
    uint64_t addr;
    CHECK_EQ(sim_device_malloc(&dev, size, 0, &addr), SIM_OK);
    if (!have_top) top = addr - want, have_top = 1; /* the reference's addresses are from the first slab's top */
    if (addr - top != want) {
      mismatches++;
      CHECK_EQ(addr - top, want);
    }
    live[nlive].addr = addr, live[nlive].size = size, nlive++;
  }
  sim_simdev_reset(&dev); /* the build with internal checks holds the free ranges' tree to its rules here */
  sim_simdev_release(&dev);
  return most;
}

static void simdev_down_matches_reference(void) {
  CHECK(simdev_down_against_reference(256, 50, 30000, 777) > 10); /* the free ranges were many */
  /* thousands of long-lived allocations: thousands of holes, the lowest that fits found each time */
  size_t most = simdev_down_against_reference(REF_LIVE, 45, 60000, 4242);
  CHECK(most > 1000);
}

/* Which way a recording's segments went: new segments outside all seen vote; three votes and twice
 * the other way's decide. */
static void va_votes_decide(void) {
  sim_va_votes v = {0};
  uint64_t G = UINT64_C(1) << 30;
  sim_va_votes_add(&v, 10 * G, 1); /* the first: no vote */
  sim_va_votes_add(&v, 9 * G, 1);
  sim_va_votes_add(&v, 8 * G, 1);
  CHECK_EQ(sim_va_votes_order(&v), -1); /* two votes */
  sim_va_votes_add(&v, 12 * G, 0); /* a free widens what was seen, and does not vote */
  sim_va_votes_add(&v, 11 * G, 1); /* inside: no vote */
  CHECK_EQ(v.up + v.down, 2);
  sim_va_votes_add(&v, 7 * G, 1);
  CHECK_EQ(sim_va_votes_order(&v), SIM_VA_DOWN);
  sim_va_votes_add(&v, 13 * G, 1);
  sim_va_votes_add(&v, 14 * G, 1); /* 3 down, 2 up: not twice */
  CHECK_EQ(sim_va_votes_order(&v), -1);
  sim_va_votes_add(&v, 15 * G, 1);
  sim_va_votes_add(&v, 16 * G, 1);
  sim_va_votes_add(&v, 17 * G, 1); /* 3 down, 5 up */
  CHECK_EQ(sim_va_votes_order(&v), -1);
  sim_va_votes_add(&v, 18 * G, 1); /* 6 up: twice */
  CHECK_EQ(sim_va_votes_order(&v), SIM_VA_UP);
}

int main(void) {
  RUN(ideal_counts_live_bytes);
  RUN(cuda_packs_small_requests_into_pages);
  RUN(cuda_runs_out_of_pages);
  RUN(device_counts_calls);
  RUN(simdev_held_memory_counts_whole_pages);
  RUN(simdev_small_requests_take_the_best_hole);
  RUN(simdev_down_carves_slabs_below);
  RUN(simdev_down_matches_reference);
  RUN(va_votes_decide);
  TEST_MAIN_END();
}

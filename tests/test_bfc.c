/* test_bfc.c: the `bfc` model against TensorFlow's own BFC allocator tests and each of its rules. */
#include "sim/alloc_bfc.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"
#include "test.h"

int test_failures;

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* ---- an environment the model reads through sim_alloc_config.getenv ------------------------- */

static struct {
  const char *name, *value;
} env[4];

static const char *test_getenv(const char *name) {
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
    if (env[i].name && !strcmp(env[i].name, name)) return env[i].value;
  return NULL;
}

static void env_set(const char *name, const char *value) {
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
    if (!env[i].name || !strcmp(env[i].name, name)) {
      env[i].name = name;
      env[i].value = value;
      return;
    }
}

static void env_clear(void) { memset(env, 0, sizeof env); }

/* ---- a model on a simulated device ---------------------------------------------------------- */

typedef struct fx {
  sim_device dev;
  sim_spec spec;
  sim_allocator a;
  const sim_alloc_stats *st;
  char err[SIM_ERRLEN];
  int rc;
} fx;

/* free_memory 0 keeps the device's own; cc_major 0 keeps its 9. */
static int fx_init_dev(fx *f, const char *spec, uint64_t capacity, uint64_t total, uint64_t free_memory, int cc_major) {
  memset(f, 0, sizeof *f);
  sim_simdev_init(&f->dev, capacity, total);
  if (free_memory) f->dev.free_memory = free_memory;
  if (cc_major) f->dev.cc_major = cc_major;
  f->rc = sim_spec_parse(&f->spec, spec, f->err, sizeof f->err);
  if (f->rc == SIM_OK) f->rc = sim_allocator_init(&f->a, &f->spec, &f->dev, NULL, test_getenv, f->err, sizeof f->err);
  if (f->rc == SIM_OK) f->st = f->a.ops->stats(f->a.ctx);
  return f->rc;
}

static void fx_init(fx *f, const char *spec, uint64_t capacity) {
  if (fx_init_dev(f, spec, capacity, 0, 0, 0) != SIM_OK) fprintf(stderr, "cannot create '%s': %s\n", spec, f->err);
}

static void fx_release(fx *f) {
  if (f->rc == SIM_OK) sim_allocator_release(&f->a);
  sim_spec_release(&f->spec);
  sim_simdev_release(&f->dev);
}

static int fx_alloc(fx *f, uint64_t size, sim_placement *p) {
  sim_placement tmp;
  return f->a.ops->alloc(f->a.ctx, size, 0, p ? p : &tmp);
}

static void fx_free(fx *f, const sim_placement *p) { f->a.ops->free_completed(f->a.ctx, p->handle); }

static sim_bfc_info fx_info(fx *f) {
  sim_bfc_info i;
  memset(&i, 0, sizeof i);
  CHECK_EQ(sim_bfc_get_info(&f->a, &i), 0);
  return i;
}

static void fx_check(fx *f) {
  char msg[SIM_ERRLEN];
  int rc = f->a.ops->check(f->a.ctx, msg, sizeof msg);
  if (rc) fprintf(stderr, "invariants: %s\n", msg);
  CHECK_EQ(rc, 0);
}

/* CheckStats in TensorFlow's tests: num_allocs, bytes_in_use, peak, largest_alloc_size. */
static void check_stats(fx *f, int64_t num_allocs, int64_t in_use, int64_t peak, int64_t largest) {
  sim_bfc_info i = fx_info(f);
  CHECK_EQ(i.num_allocs, num_allocs);
  CHECK_EQ(i.bytes_in_use, in_use);
  CHECK_EQ(i.peak_bytes_in_use, peak);
  CHECK_EQ(i.largest_alloc_size, largest);
}

/* Sorted by address, no two placements overlap (the "no dups" checks of TensorFlow's tests). */
static int cmp_addr(const void *a, const void *b) {
  const sim_placement *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void check_no_overlap(sim_placement *p, const uint64_t *requested, size_t n) {
  (void)requested;
  qsort(p, n, sizeof *p, cmp_addr);
  for (size_t i = 1; i < n; i++) {
    CHECK(p[i].addr != p[i - 1].addr);
    CHECK(p[i].addr - p[i - 1].addr >= p[i - 1].size);
  }
}

/* Walk helpers: segments and blocks. */
typedef struct walk_acc {
  size_t segments, blocks, free_blocks, used_blocks;
  uint64_t seg_size[64], seg_addr[64];
  size_t seg_blocks[64], seg_free[64];
  /* per bin, as TensorFlow's BinDebugInfo counts them */
  uint64_t bytes_in_bin[21], bytes_in_use[21], requested_in_use[21];
  size_t chunks_in_bin[21], chunks_in_use[21];
} walk_acc;

static int tf_bin(uint64_t size) { /* BinNumForSize, written out for the test */
  uint64_t v = (size < 256 ? 256 : size) >> 8;
  int b = 0;
  while (v >>= 1) b++;
  return b < 20 ? b : 20;
}

static int walk_fn(void *arg, const sim_walk_item *it) {
  walk_acc *w = arg;
  if (it->is_segment) {
    if (w->segments < 64) {
      w->seg_size[w->segments] = it->size;
      w->seg_addr[w->segments] = it->addr;
    }
    w->segments++;
    return 0;
  }
  w->blocks++;
  size_t s = w->segments - 1;
  if (s < 64) w->seg_blocks[s]++;
  int b = tf_bin(it->size);
  w->bytes_in_bin[b] += it->size;
  w->chunks_in_bin[b]++;
  if (it->state == SIM_BLOCK_FREE) {
    w->free_blocks++;
    if (s < 64) w->seg_free[s]++;
  } else {
    w->used_blocks++;
    w->bytes_in_use[b] += it->size;
    w->requested_in_use[b] += it->requested;
    w->chunks_in_use[b]++;
  }
  return 0;
}

static walk_acc fx_walk(fx *f) {
  walk_acc w;
  memset(&w, 0, sizeof w);
  CHECK_EQ(f->a.ops->walk(f->a.ctx, walk_fn, &w), 0);
  return w;
}

static uint64_t rng_state;
static uint32_t rng32(void) { /* splitmix64, high half */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

/* ==== TensorFlow's tests (gpu_bfc_allocator_test.cc, bfc_allocator_test.cc) ==================== */

/* GPUBFCAllocatorTest.NoDups: sizes 1..1023 all live. */
static void tf_no_dups(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  check_stats(&f, 0, 0, 0, 0);
  sim_placement p[1023];
  uint64_t req[1023];
  for (int s = 1; s < 1024; s++) {
    CHECK_EQ(fx_alloc(&f, (uint64_t)s, &p[s - 1]), SIM_OK);
    req[s - 1] = (uint64_t)s;
  }
  check_stats(&f, 1023, 654336, 654336, 1024);
  fx_check(&f);
  for (int i = 0; i < 1023; i++) fx_free(&f, &p[i]);
  check_stats(&f, 1023, 0, 654336, 1024);
  sim_placement q[1023];
  memcpy(q, p, sizeof q);
  check_no_overlap(q, req, 1023);
  fx_check(&f);
  fx_release(&f);
}

/* GPUBFCAllocatorTest.AllocationsAndDeallocations: random sizes of 100 B .. 1 MiB, half freed, an
 * OOM of (1 << 30) + 1 bytes that does not prevent later allocations, no overlaps. (TensorFlow
 * draws the sizes from Philox; any sizes in that range exercise the same rules.) */
static void tf_allocations_and_deallocations(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  rng_state = 123;
  sim_placement live[600];
  size_t n = 0;
  sim_placement first[255];
  for (int s = 0; s < 255; s++) {
    uint64_t size = rng32() % 1048576;
    if (size < 100) size = 100;
    CHECK_EQ(fx_alloc(&f, size, &first[s]), SIM_OK);
  }
  for (int i = 0; i < 255; i++) {
    if (i % 2 == 1) fx_free(&f, &first[i]);
    else live[n++] = first[i];
  }
  CHECK_EQ(fx_alloc(&f, (UINT64_C(1) << 30) + 1, NULL), SIM_EOOM);
  for (int s = 0; s < 255; s++) {
    uint64_t size = rng32() % 1048576;
    if (size < 100) size = 100;
    CHECK_EQ(fx_alloc(&f, size, &live[n]), SIM_OK);
    n++;
  }
  fx_check(&f);
  sim_placement sorted[600];
  memcpy(sorted, live, n * sizeof *live);
  check_no_overlap(sorted, NULL, n);
  for (size_t i = 0; i < n; i++) fx_free(&f, &live[i]);
  CHECK_EQ(fx_info(&f).bytes_in_use, 0);
  CHECK_EQ(f.st->num_ooms, 1);
  fx_check(&f);
  fx_release(&f);
}

/* GPUBFCAllocatorTest.ExerciseCoalescing */
static void tf_exercise_coalescing(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  check_stats(&f, 0, 0, 0, 0);
  sim_placement first, again, t1, t2, t3, t4;
  CHECK_EQ(fx_alloc(&f, 1024 * 4, &first), SIM_OK);
  fx_free(&f, &first);
  check_stats(&f, 1, 0, 4096, 4096);
  for (int i = 0; i < 1024; ++i) {
    CHECK_EQ(fx_alloc(&f, 1024 * 4, &t1), SIM_OK);
    CHECK_EQ(fx_alloc(&f, 1048576 * 8, &t2), SIM_OK);
    CHECK_EQ(fx_alloc(&f, 2048 * 8, &t3), SIM_OK);
    CHECK_EQ(fx_alloc(&f, 10485760 * 4, &t4), SIM_OK);
    fx_free(&f, &t1);
    fx_free(&f, &t2);
    fx_free(&f, &t3);
    fx_free(&f, &t4);
  }
  check_stats(&f, 4097, 0, 1024 * 4 + 1048576 * 8 + 2048 * 8 + 10485760 * 4, 10485760 * 4);
  CHECK_EQ(fx_alloc(&f, 1024 * 4, &again), SIM_OK);
  CHECK_EQ(again.addr, first.addr);
  fx_free(&f, &again);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.segments, 1);
  CHECK_EQ(w.blocks, 1); /* everything merged back into one chunk */
  fx_release(&f);
}

/* GPUBFCAllocatorTest.AllocateZeroBufSize: nothing, and no statistic changes. */
static void tf_allocate_zero_buf_size(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  sim_placement p = {1, 1, 1};
  CHECK_EQ(fx_alloc(&f, 0, &p), SIM_OK);
  CHECK_EQ(p.addr, 0);
  CHECK_EQ(p.handle, 0);
  check_stats(&f, 0, 0, 0, 0);
  CHECK_EQ(f.st->num_allocs, 0);
  CHECK_EQ(f.st->num_ooms, 0);
  CHECK_EQ(f.dev.mallocs, 0);
  fx_free(&f, &p);
  check_stats(&f, 0, 0, 0, 0);
  fx_release(&f);
}

/* GPUBFCAllocatorTest.AllocatedVsRequested: 4 bytes requested, 256 allocated. */
static void tf_allocated_vs_requested(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  sim_placement p;
  CHECK_EQ(fx_alloc(&f, 4, &p), SIM_OK);
  CHECK_EQ(p.size, 256);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.requested_in_use[0], 4);
  CHECK_EQ(w.bytes_in_use[0], 256);
  CHECK_EQ(f.st->requested.current, 4);
  CHECK_EQ(f.st->allocated.current, 256);
  fx_free(&f, &p);
  fx_release(&f);
}

/* GPUBFCAllocatorTest.TestCustomMemoryLimit, both versions: a 1 MiB limit refuses 4 MiB after
 * 256 bytes; a 2 MiB limit refuses 8 MiB. */
static void tf_custom_memory_limit(void) {
  fx f;
  sim_placement p;
  fx_init(&f, "bfc:memory_limit=1MiB", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 4 << 6, &p), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 4 << 20, NULL), SIM_EOOM);
  fx_free(&f, &p);
  fx_release(&f);
  fx_init(&f, "bfc:memory_limit=2MiB", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 4 << 6, &p), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 4 << 21, NULL), SIM_EOOM);
  CHECK_EQ(f.st->reserved.current, 2 * MiB);
  fx_free(&f, &p);
  fx_release(&f);
}

/* GPUBFCAllocatorTest.AllocationsAndDeallocationsWithGrowth: a 2 GiB limit with allow_growth,
 * sizes up to 128 MiB then 64 MiB, half freed between; no overlaps, regions doubling. */
static void tf_allocations_and_deallocations_with_growth(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=2GiB,allow_growth=true", UINT64_MAX);
  rng_state = 17;
  sim_placement first[9], live[20];
  size_t n = 0;
  for (int s = 0; s < 9; s++) {
    uint64_t size = rng32() % (UINT32_C(1) << 27);
    if (size < 100) size = 100;
    CHECK_EQ(fx_alloc(&f, size, &first[s]), SIM_OK);
  }
  for (int i = 0; i < 9; i++) {
    if (i % 2 == 1) fx_free(&f, &first[i]);
    else live[n++] = first[i];
  }
  for (int s = 0; s < 9; s++) {
    uint64_t size = rng32() % (UINT32_C(1) << 26);
    if (size < 100) size = 100;
    CHECK_EQ(fx_alloc(&f, size, &live[n]), SIM_OK);
    n++;
  }
  fx_check(&f);
  sim_bfc_info info = fx_info(&f);
  CHECK(info.regions > 1);
  CHECK(info.region_bytes <= 2 * GiB);
  sim_placement sorted[20];
  memcpy(sorted, live, n * sizeof *live);
  check_no_overlap(sorted, NULL, n);
  for (size_t i = 0; i < n; i++) fx_free(&f, &live[i]);
  CHECK_EQ(fx_info(&f).bytes_in_use, 0);
  fx_release(&f);
}

/* GPUBFCAllocatorPrivateMethodsTest.BinDebugInfo: two chunks each of 256 << i for i < 5. */
static void tf_bin_debug_info(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  sim_placement p[10];
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 2; j++) CHECK_EQ(fx_alloc(&f, (uint64_t)256 << i, &p[2 * i + j]), SIM_OK);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.blocks, 1 + 5 * 2);
  for (int b = 0; b < 21; b++) {
    if (b < 5) {
      uint64_t allocated = p[2 * b].size + p[2 * b + 1].size;
      CHECK_EQ(w.bytes_in_use[b], allocated);
      CHECK_EQ(w.bytes_in_bin[b], allocated);
      CHECK_EQ(w.requested_in_use[b], 2 * (256 << b));
      CHECK_EQ(w.chunks_in_use[b], 2);
      CHECK_EQ(w.chunks_in_bin[b], 2);
    } else {
      CHECK_EQ(w.bytes_in_use[b], 0);
      CHECK_EQ(w.chunks_in_use[b], 0);
      CHECK_EQ(w.chunks_in_bin[b], b == 20 ? 1 : 0);
      if (b == 20) CHECK(w.bytes_in_bin[b] > 0);
    }
  }
  for (int i = 1; i < 10; i += 2) fx_free(&f, &p[i]);
  w = fx_walk(&f);
  for (int b = 0; b < 21; b++) {
    if (b < 5) {
      CHECK_EQ(w.bytes_in_use[b], p[2 * b].size);
      CHECK(w.bytes_in_bin[b] >= p[2 * b].size);
      CHECK_EQ(w.requested_in_use[b], 256 << b);
      CHECK_EQ(w.chunks_in_use[b], 1);
      CHECK(w.chunks_in_bin[b] >= 1);
    } else {
      CHECK_EQ(w.bytes_in_use[b], 0);
      CHECK_EQ(w.chunks_in_use[b], 0);
    }
  }
  fx_check(&f);
  fx_release(&f);
}

/* GPUBFCAllocatorPrivateMethodsTest.ForceAllowGrowth: TF_FORCE_GPU_ALLOW_GROWTH over the option,
 * as curr_region_allocation_bytes_ shows it, with a 2 GiB limit. */
static void tf_force_allow_growth(void) {
  static const struct {
    const char *env, *spec;
    uint64_t expect;
  } cases[] = {
    {NULL, "bfc:memory_limit=2GiB,allow_growth=true", 2 * MiB},          /* unset: the option */
    {"unparseable", "bfc:memory_limit=2GiB,allow_growth=true", 2 * MiB}, /* unparsable: the option */
    {"true", "bfc:memory_limit=2GiB,allow_growth=false", 2 * MiB},       /* forced on */
    {"false", "bfc:memory_limit=2GiB,allow_growth=true", 2 * GiB},       /* forced off: the whole limit */
    {"TRUE", "bfc:memory_limit=2GiB", 2 * GiB},                          /* exact spelling only */
    {"", "bfc:memory_limit=2GiB,allow_growth=true", 2 * MiB},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    env_clear();
    if (cases[i].env) env_set("TF_FORCE_GPU_ALLOW_GROWTH", cases[i].env);
    fx f;
    fx_init(&f, cases[i].spec, UINT64_MAX);
    CHECK_EQ(fx_info(&f).curr_region_allocation_bytes, cases[i].expect);
    /* and the first region is that size */
    CHECK_EQ(fx_alloc(&f, 1, NULL), SIM_OK);
    CHECK_EQ(f.st->reserved.current, cases[i].expect);
    fx_release(&f);
  }
  env_clear();
}

/* GPUBFCAllocatorTest_SubAllocatorSpecific.PhysicalAllocatorOomsFragmentation: 512 MiB with
 * allow_growth, 128 chunks of 4 MiB, all but the last freed: 508 MiB does not fit, and garbage
 * collection cannot help, since the last region is not free. */
static void tf_physical_allocator_ooms_fragmentation(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=512MiB,allow_growth=true", UINT64_MAX);
  sim_placement p[128];
  for (int i = 0; i < 128; i++) CHECK_EQ(fx_alloc(&f, 4 * MiB, &p[i]), SIM_OK);
  CHECK_EQ(f.st->reserved.current, 512 * MiB);
  for (int i = 0; i < 127; i++) fx_free(&f, &p[i]);
  CHECK_EQ(fx_alloc(&f, 512 * MiB - 4 * MiB, NULL), SIM_EOOM);
  CHECK_EQ(fx_info(&f).regions, 8); /* 4, 4, 8, 16, 32, 64, 128, 256 MiB: none given back */
  fx_check(&f);
  fx_release(&f);
}

/* GPUBFCAllocatorPrivateMethodsTest_SubAllocatorSpecific.TestRegionDeallocation, reached the way
 * a program reaches it: 2 GiB with allow_growth, 128 chunks of 4 MiB in 8 regions, all but the last
 * freed; a request that fits nowhere, on a device that refuses the next region, makes garbage
 * collection give back every region but the last, which keeps one free chunk. */
static void tf_region_deallocation(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=2GiB,allow_growth=true", 700 * MiB);
  sim_placement p[128];
  for (int i = 0; i < 128; i++) CHECK_EQ(fx_alloc(&f, 4 * MiB, &p[i]), SIM_OK);
  CHECK(fx_info(&f).regions > 1);
  for (int i = 0; i < 127; i++) fx_free(&f, &p[i]);
  CHECK_EQ(fx_alloc(&f, 300 * MiB, NULL), SIM_EOOM);
  sim_bfc_info info = fx_info(&f);
  CHECK_EQ(info.regions, 1);
  CHECK_EQ(info.region_bytes, 256 * MiB);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.free_blocks, 1);
  CHECK_EQ(f.st->num_alloc_retries, 1);
  CHECK_EQ(f.dev.frees, 7);
  CHECK_EQ(f.dev.used, 256 * MiB);
  fx_check(&f);
  fx_release(&f);
}

/* BFCAllocatorTest.ExtendTerminatesWhenSubAllocatorAlwaysFails (XLA): a device that refuses
 * everything and a 2048-byte pool: the request fails, and the replay does not hang. */
static void tf_extend_terminates_when_device_always_fails(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=2048B", 0);
  CHECK_EQ(fx_alloc(&f, 100, NULL), SIM_EOOM);
  CHECK(fx_info(&f).backpedal_started);
  fx_release(&f);
  /* 4096 bytes: the cuts go 3840, 3584, ... 2304, where rounding stops them */
  fx_init(&f, "bfc:memory_limit=4096B", 0);
  CHECK_EQ(fx_alloc(&f, 100, NULL), SIM_EOOM);
  CHECK_EQ(f.dev.mallocs, 0);
  fx_release(&f);
}

/* ==== the rules ================================================================================ */

/* RoundedBytes: multiples of 256, at least 256. */
static void rule_rounding(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  static const uint64_t in[] = {1, 255, 256, 257, 511, 512, 1000, 4097};
  static const uint64_t want[] = {256, 256, 256, 512, 512, 512, 1024, 4352};
  sim_placement p;
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
    CHECK_EQ(fx_alloc(&f, in[i], &p), SIM_OK);
    CHECK_EQ(p.size, want[i]);
  }
  fx_release(&f);
}

/* Best fit by size, then address, searched bin by bin; and the split rule's "not twice" arm:
 * a 300 KiB request takes a whole 512 KiB chunk (the waste is under 300 KiB and 128 MiB). */
static void rule_best_fit_and_bins(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  sim_placement big, b, c, s1, s2, s3, x, y, z;
  CHECK_EQ(fx_alloc(&f, 1 * MiB, &big), SIM_OK); /* bin 12 when free */
  CHECK_EQ(fx_alloc(&f, 256, &s1), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 512 * KiB, &b), SIM_OK); /* bin 11 */
  CHECK_EQ(fx_alloc(&f, 256, &s2), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 512 * KiB, &c), SIM_OK); /* bin 11, higher address */
  CHECK_EQ(fx_alloc(&f, 256, &s3), SIM_OK);
  fx_free(&f, &c);
  fx_free(&f, &big);
  fx_free(&f, &b);
  int64_t before = fx_info(&f).bytes_in_use;
  CHECK_EQ(fx_alloc(&f, 300 * KiB, &x), SIM_OK); /* bin 10 is empty; bin 11's lowest address */
  CHECK_EQ(x.addr, b.addr);
  CHECK_EQ(x.size, 512 * KiB);                    /* not split */
  CHECK_EQ(fx_info(&f).bytes_in_use - before, (int64_t)(512 * KiB));
  CHECK_EQ(fx_alloc(&f, 300 * KiB, &y), SIM_OK);
  CHECK_EQ(y.addr, c.addr);
  CHECK_EQ(fx_alloc(&f, 300 * KiB, &z), SIM_OK); /* then the 1 MiB chunk of bin 12, split */
  CHECK_EQ(z.addr, big.addr);
  CHECK_EQ(z.size, 300 * KiB);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.chunks_in_bin[11] - w.chunks_in_use[11], 1); /* the 724 KiB remainder, beside x and y */
  fx_check(&f);
  fx_release(&f);
}

/* The split rule's second arm: waste of at least max_internal_fragmentation_bytes (128 MiB by
 * default, fragmentation_fraction x limit when set) splits even a chunk under twice the request. */
static void rule_split_fragmentation_bound(void) {
  fx f;
  sim_placement big, sep, p;
  /* default bound: 300 MiB chunk, 160 MiB request: waste 140 MiB >= 128 MiB: split */
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  CHECK_EQ(fx_info(&f).max_internal_fragmentation_bytes, 128 * MiB);
  CHECK_EQ(fx_alloc(&f, 300 * MiB, &big), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 256, &sep), SIM_OK);
  fx_free(&f, &big);
  CHECK_EQ(fx_alloc(&f, 160 * MiB, &p), SIM_OK);
  CHECK_EQ(p.addr, big.addr);
  CHECK_EQ(p.size, 160 * MiB);
  fx_free(&f, &p);
  /* 200 MiB: waste 100 MiB, under both: the whole 300 MiB chunk */
  CHECK_EQ(fx_alloc(&f, 200 * MiB, &p), SIM_OK);
  CHECK_EQ(p.size, 300 * MiB);
  CHECK_EQ(fx_info(&f).largest_alloc_size, 300 * MiB);
  fx_release(&f);
  /* fragmentation_fraction: the bound is fraction x limit, truncated */
  fx_init(&f, "bfc:memory_limit=1GiB,fragmentation_fraction=0.0001", UINT64_MAX);
  CHECK_EQ(fx_info(&f).max_internal_fragmentation_bytes, 107374);
  CHECK_EQ(fx_alloc(&f, 512 * KiB, &big), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 256, &sep), SIM_OK);
  fx_free(&f, &big);
  CHECK_EQ(fx_alloc(&f, 300 * KiB, &p), SIM_OK); /* waste 212 KiB >= 104.9 KiB: split */
  CHECK_EQ(p.size, 300 * KiB);
  fx_check(&f);
  fx_release(&f);
}

/* Coalescing: a freed chunk merges with both free neighbours. */
static void rule_coalescing(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=16MiB", UINT64_MAX);
  sim_placement a, b, c, d;
  CHECK_EQ(fx_alloc(&f, 1 * MiB, &a), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, &b), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, &c), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, &d), SIM_OK); /* keeps c's right side in use */
  fx_free(&f, &a);
  fx_free(&f, &c);
  CHECK_EQ(fx_walk(&f).free_blocks, 3); /* a, c, and the tail */
  fx_free(&f, &b);                      /* merges with c (next) then a (previous) */
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.free_blocks, 2);
  CHECK_EQ(f.a.ops->largest_free(f.a.ctx), 12 * MiB);
  sim_placement e;
  CHECK_EQ(fx_alloc(&f, 3 * MiB, &e), SIM_OK);
  CHECK_EQ(e.addr, a.addr);
  fx_check(&f);
  fx_release(&f);
}

/* Regions never merge, even when the device placed them side by side. */
static void rule_no_cross_region_coalescing(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB,allow_growth=true", UINT64_MAX);
  sim_placement a, b;
  CHECK_EQ(fx_alloc(&f, 2 * MiB, &a), SIM_OK); /* region 1: 2 MiB */
  CHECK_EQ(fx_alloc(&f, 2 * MiB, &b), SIM_OK); /* region 2: 4 MiB */
  fx_free(&f, &a);
  fx_free(&f, &b);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.segments, 2);
  CHECK_EQ(w.seg_addr[0] + w.seg_size[0], w.seg_addr[1]); /* adjacent */
  CHECK_EQ(w.free_blocks, 2);
  CHECK_EQ(f.a.ops->largest_free(f.a.ctx), 4 * MiB);
  CHECK_EQ(fx_alloc(&f, 5 * MiB, NULL), SIM_OK); /* 6 MiB of free chunks, but not in one: a new region */
  CHECK_EQ(f.dev.mallocs, 3);
  fx_check(&f);
  fx_release(&f);
}

/* Growth without allow_growth: the whole limit in one region, at the first allocation. */
static void rule_growth_whole_limit(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=3GiB", UINT64_MAX);
  CHECK_EQ(f.dev.mallocs, 0); /* nothing before the first allocation */
  CHECK_EQ(f.st->reserved.current, 0);
  CHECK_EQ(fx_alloc(&f, 1, NULL), SIM_OK);
  CHECK_EQ(f.dev.mallocs, 1);
  CHECK_EQ(f.st->reserved.current, 3 * GiB);
  CHECK_EQ(fx_alloc(&f, 2 * GiB, NULL), SIM_OK);
  CHECK_EQ(f.dev.mallocs, 1);
  CHECK_EQ(fx_alloc(&f, 1 * GiB, NULL), SIM_EOOM); /* 1 GiB - 256 B left */
  fx_release(&f);
}

/* Growth with allow_growth: 2 MiB, doubling after each region; a large request doubles the size
 * until it fits and the size is not doubled again after it. */
static void rule_growth_allow_growth(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB,allow_growth=true", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, NULL), SIM_OK); /* region of 2 MiB */
  CHECK_EQ(fx_info(&f).curr_region_allocation_bytes, 4 * MiB);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, NULL), SIM_OK); /* fits in the first region */
  CHECK_EQ(fx_alloc(&f, 1 * MiB, NULL), SIM_OK); /* region of 4 MiB */
  CHECK_EQ(fx_info(&f).curr_region_allocation_bytes, 8 * MiB);
  CHECK_EQ(fx_alloc(&f, 10 * MiB, NULL), SIM_OK); /* 8 -> 16 MiB region, no doubling after */
  CHECK_EQ(fx_info(&f).curr_region_allocation_bytes, 16 * MiB);
  CHECK_EQ(fx_alloc(&f, 10 * MiB, NULL), SIM_OK); /* 6 MiB left: another 16 MiB region */
  CHECK_EQ(fx_info(&f).curr_region_allocation_bytes, 32 * MiB);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.segments, 4);
  /* the walk goes by address: the driver put the 4 and the first 16 MiB region in what the first
   * region's slab left above it, the second 16 MiB in a slab below (docs/allocators.md) */
  CHECK_EQ(w.seg_size[0], 16 * MiB);
  CHECK_EQ(w.seg_size[1], 2 * MiB);
  CHECK_EQ(w.seg_size[2], 4 * MiB);
  CHECK_EQ(w.seg_size[3], 16 * MiB);
  CHECK_EQ(f.st->reserved.current, 38 * MiB);
  /* the last region is cut to what the limit leaves */
  fx_release(&f);
  fx_init(&f, "bfc:memory_limit=5MiB,allow_growth=true", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 2 * MiB, NULL), SIM_OK); /* 2 MiB */
  CHECK_EQ(fx_alloc(&f, 1, NULL), SIM_OK);       /* min(4 MiB, 3 MiB left) */
  CHECK_EQ(f.st->reserved.current, 5 * MiB);
  CHECK_EQ(fx_alloc(&f, 3 * MiB, NULL), SIM_EOOM);
  fx_release(&f);
}

/* The backpedal: a refused region is cut by 0.9 (in single precision, rounded up to 256 bytes)
 * until the device accepts it; only once per allocator. */
static void rule_backpedal_once(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", 600 * MiB);
  sim_placement a, b;
  CHECK_EQ(fx_alloc(&f, 1 * MiB, &a), SIM_OK);
  /* 1 GiB -> 966367744 -> 869731072 -> 782758144 -> 704482304 -> 634034176 -> 570630912, the first
   * the device (600 MiB, taken in 2 MiB pages) accepts */
  CHECK_EQ(f.st->reserved.current, 570630912);
  CHECK_EQ(f.dev.mallocs, 1);
  sim_bfc_info info = fx_info(&f);
  CHECK(info.backpedal_started);
  CHECK_EQ(info.curr_region_allocation_bytes, 2 * GiB);
  CHECK_EQ(fx_alloc(&f, 570630912 - 1 * MiB, &b), SIM_OK); /* fills the region */
  /* The next region would be refused (54 MiB left on the device); a second backpedal would find
   * a size that fits, but there is none: out of memory. */
  CHECK_EQ(fx_alloc(&f, 1 * MiB, NULL), SIM_EOOM);
  CHECK_EQ(f.dev.mallocs, 1);
  fx_release(&f);
}

/* Garbage collection: wholly free regions go back before giving up, when that makes the request
 * fit the limit; it does not reset the next region's size. */
static void gc_setup(fx *f, const char *spec, sim_placement *p) {
  fx_init(f, spec, UINT64_MAX);
  /* regions of 2, 4, 8, 16, 32 MiB: 62 of 64 MiB */
  static const uint64_t sizes[] = {2, 4, 8, 16, 32};
  for (int i = 0; i < 5; i++) CHECK_EQ(fx_alloc(f, sizes[i] * MiB, &p[i]), SIM_OK);
  CHECK_EQ(f->st->reserved.current, 62 * MiB);
  for (int i = 0; i < 3; i++) fx_free(f, &p[i]); /* 14 MiB in three free regions */
}

static void rule_garbage_collection(void) {
  fx f;
  sim_placement p[5], q;
  /* helps: 16 MiB fits once 14 MiB of regions are given back */
  gc_setup(&f, "bfc:memory_limit=64MiB,allow_growth=true", p);
  CHECK_EQ(fx_info(&f).curr_region_allocation_bytes, 64 * MiB);
  CHECK_EQ(fx_alloc(&f, 16 * MiB, &q), SIM_OK);
  sim_bfc_info info = fx_info(&f);
  CHECK_EQ(info.regions, 3);
  CHECK_EQ(info.region_bytes, 64 * MiB);
  CHECK_EQ(info.curr_region_allocation_bytes, 128 * MiB); /* 64 MiB kept, then doubled */
  CHECK_EQ(f.st->num_alloc_retries, 1);
  CHECK_EQ(f.dev.frees, 3);
  fx_check(&f);
  fx_release(&f);
  /* would not help: 17 MiB > 2 + 14 MiB: nothing given back */
  gc_setup(&f, "bfc:memory_limit=64MiB,allow_growth=true", p);
  CHECK_EQ(fx_alloc(&f, 17 * MiB, NULL), SIM_EOOM);
  CHECK_EQ(fx_info(&f).regions, 5);
  CHECK_EQ(f.dev.frees, 0);
  fx_release(&f);
  /* off by option */
  gc_setup(&f, "bfc:memory_limit=64MiB,allow_growth=true,garbage_collection=false", p);
  CHECK_EQ(fx_alloc(&f, 16 * MiB, NULL), SIM_EOOM);
  CHECK_EQ(fx_info(&f).regions, 5);
  fx_release(&f);
  /* off by TF_ENABLE_GPU_GARBAGE_COLLECTION=false; only exactly "false" turns it off */
  env_set("TF_ENABLE_GPU_GARBAGE_COLLECTION", "false");
  gc_setup(&f, "bfc:memory_limit=64MiB,allow_growth=true", p);
  CHECK_EQ(fx_info(&f).garbage_collection, 0);
  CHECK_EQ(fx_alloc(&f, 16 * MiB, NULL), SIM_EOOM);
  fx_release(&f);
  gc_setup(&f, "bfc:memory_limit=64MiB,allow_growth=true,garbage_collection=true", p); /* the option wins */
  CHECK_EQ(fx_alloc(&f, 16 * MiB, NULL), SIM_OK);
  fx_release(&f);
  env_set("TF_ENABLE_GPU_GARBAGE_COLLECTION", "no");
  fx_init(&f, "bfc:memory_limit=64MiB", UINT64_MAX);
  CHECK_EQ(fx_info(&f).garbage_collection, 1);
  fx_release(&f);
  env_clear();
}

/* TensorFlow's default limit: free memory less MinSystemMemory by compute capability. */
static void rule_memory_limit_defaults(void) {
  static const struct {
    uint64_t free_memory;
    int cc;
    uint64_t limit;
  } cases[] = {
    {40 * GiB, 9, 40 * GiB - 1800 * MiB}, {40 * GiB, 8, 40 * GiB - 1536 * MiB},
    {40 * GiB, 7, 40 * GiB - 1050 * MiB}, {40 * GiB, 6, 40 * GiB - 500 * MiB},
    {40 * GiB, 5, 40 * GiB - 500 * MiB},  {3 * GiB / 2, 9, 3 * GiB / 2 - 225 * MiB},
    {2 * GiB, 7, 2 * GiB - 1050 * MiB},   {200 * MiB, 9, 200 * MiB}, /* reserve >= free: none */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx f;
    CHECK_EQ(fx_init_dev(&f, "bfc", UINT64_MAX, 80 * GiB, cases[i].free_memory, cases[i].cc), SIM_OK);
    sim_bfc_info info = fx_info(&f);
    CHECK_EQ(info.memory_limit, cases[i].limit);
    CHECK_EQ(info.bytes_limit, (int64_t)cases[i].limit);
    CHECK_EQ(info.allow_growth, 0);
    CHECK_EQ(info.garbage_collection, 1);
    CHECK_EQ(info.curr_region_allocation_bytes, (cases[i].limit + 255) / 256 * 256);
    fx_release(&f);
  }
}

/* per_process_gpu_memory_fraction (of the total), gpu_system_memory_size_in_mb and
 * TF_DEVICE_MIN_SYS_MEMORY_IN_MB (of the free memory), and memory_limit over all of them. */
static void rule_memory_limit_options(void) {
  static const struct {
    const char *spec, *sys_env;
    uint64_t limit;
  } cases[] = {
    {"bfc:per_process_gpu_memory_fraction=0.5", NULL, 40 * GiB},
    {"bfc:per_process_gpu_memory_fraction=0.25", NULL, 20 * GiB},
    {"bfc:gpu_system_memory_size_in_mb=1000", NULL, 70 * GiB - 1000 * MiB},
    {"bfc:per_process_gpu_memory_fraction=0.5,gpu_system_memory_size_in_mb=1000", NULL, 70 * GiB - 1000 * MiB},
    {"bfc", " 2048 ", 70 * GiB - 2048 * MiB},
    {"bfc", "abc", 70 * GiB - 1800 * MiB},      /* invalid: ignored */
    {"bfc", "-5", 70 * GiB - 1800 * MiB},       /* negative: ignored */
    {"bfc", "99999999", 70 * GiB - 1800 * MiB}, /* more than free: ignored */
    {"bfc:gpu_system_memory_size_in_mb=1000", "0", 70 * GiB},
    {"bfc:memory_limit=16GiB,per_process_gpu_memory_fraction=0.5", "2048", 16 * GiB},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    env_clear();
    if (cases[i].sys_env) env_set("TF_DEVICE_MIN_SYS_MEMORY_IN_MB", cases[i].sys_env);
    fx f;
    CHECK_EQ(fx_init_dev(&f, cases[i].spec, UINT64_MAX, 80 * GiB, 70 * GiB, 9), SIM_OK);
    if (f.rc == SIM_OK) CHECK_EQ(fx_info(&f).memory_limit, cases[i].limit);
    fx_release(&f);
  }
  env_clear();
  /* unified memory (a fraction over 1) needs Pascal or newer */
  fx f;
  CHECK_EQ(fx_init_dev(&f, "bfc:per_process_gpu_memory_fraction=1.5", UINT64_MAX, 16 * GiB, 0, 5), SIM_EINVAL);
  CHECK(strstr(f.err, "pre-Pascal") != NULL);
  fx_release(&f);
  CHECK_EQ(fx_init_dev(&f, "bfc:per_process_gpu_memory_fraction=1.5", UINT64_MAX, 16 * GiB, 0, 6), SIM_OK);
  CHECK_EQ(fx_info(&f).memory_limit, 24 * GiB);
  fx_release(&f);
}

/* Bad option values: clear errors from create. Unknown keys: from the SPEC parser, with the list. */
static void rule_bad_options(void) {
  static const struct {
    const char *spec, *needle;
  } cases[] = {
    {"bfc:memory_limit=lots", "option 'memory_limit' wants a size"},
    {"bfc:allow_growth=maybe", "option 'allow_growth' wants true or false"},
    {"bfc:per_process_gpu_memory_fraction=-0.5", "wants a fraction of at least 0"},
    {"bfc:fragmentation_fraction=x", "option 'fragmentation_fraction' wants a number"},
    {"bfc:gpu_system_memory_size_in_mb=-1", "wants a number of MiB"},
    {"bfc:allow_grow=true", "unknown option 'allow_grow' for allocator 'bfc' (accepted: allow_growth, memory_limit"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fx f;
    CHECK_EQ(fx_init_dev(&f, cases[i].spec, UINT64_MAX, 0, 0, 0), SIM_EINVAL);
    if (!strstr(f.err, cases[i].needle)) fprintf(stderr, "'%s': %s\n", cases[i].spec, f.err);
    CHECK(strstr(f.err, cases[i].needle) != NULL);
    fx_release(&f);
  }
}

/* A request whose rounding would wrap is refused, not placed as a small one. */
static void rule_overflow(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, UINT64_MAX, NULL), SIM_EOOM);
  CHECK_EQ(fx_alloc(&f, UINT64_MAX - 254, NULL), SIM_EOOM);
  CHECK_EQ(f.st->num_ooms, 2);
  CHECK_EQ(f.dev.mallocs, 0);
  check_stats(&f, 0, 0, 0, 0);
  char msg[SIM_ERRLEN];
  f.a.ops->describe_oom(f.a.ctx, UINT64_MAX, 0, msg, sizeof msg);
  CHECK(strstr(msg, "overflows") != NULL);
  fx_release(&f);
}

/* The OOM message in TensorFlow's words, largest_free, and reset_memory_stats. */
static void rule_oom_message_and_stats(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  sim_placement a, b;
  CHECK_EQ(fx_alloc(&f, 100 * MiB, &a), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 200 * MiB, &b), SIM_OK);
  CHECK_EQ(f.a.ops->largest_free(f.a.ctx), 724 * MiB);
  CHECK_EQ(fx_alloc(&f, 4 * GiB, NULL), SIM_EOOM);
  char msg[SIM_ERRLEN];
  f.a.ops->describe_oom(f.a.ctx, 4 * GiB, 0, msg, sizeof msg);
  CHECK(strstr(msg, "ran out of memory trying to allocate 4.00GiB (rounded to 4294967296)") != NULL);
  CHECK(strstr(msg, "InUse: 314572800") != NULL);
  f.a.ops->describe_oom(f.a.ctx, 1536, 0, msg, sizeof msg);
  CHECK(strstr(msg, "allocate 1.5KiB (rounded to 1536)") != NULL);
  fx_free(&f, &b);
  CHECK_EQ(sim_bfc_clear_stats(&f.a), 0);
  check_stats(&f, 0, 100 * MiB, 100 * MiB, 0);
  CHECK_EQ(f.st->allocated.peak, 300 * MiB); /* the replay's own gauge keeps the peak */
  fx_release(&f);
  /* not a bfc instance */
  fx_init(&f, "ideal", UINT64_MAX);
  sim_bfc_info info;
  CHECK_EQ(sim_bfc_get_info(&f.a, &info), -1);
  CHECK_EQ(sim_bfc_clear_stats(&f.a), -1);
  fx_release(&f);
}

/* The device decides: regions come from sim_device_malloc and go back on release. */
static void rule_regions_from_device(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB,allow_growth=true", 10 * MiB);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, NULL), SIM_OK); /* a region of 2 MiB */
  CHECK_EQ(fx_alloc(&f, 2 * MiB, NULL), SIM_OK); /* 4 MiB */
  CHECK_EQ(f.dev.used, 6 * MiB);
  /* The next region (8 MiB) is refused by a device with 4 MiB left: 7549952, 6795008, 6115584,
   * 5504256, 4953856, 4458496 are refused too (the device takes 2 MiB pages), 4012800 fits. */
  CHECK_EQ(fx_alloc(&f, 3 * MiB, NULL), SIM_OK);
  CHECK_EQ(f.st->reserved.current, 6 * MiB + 4012800);
  CHECK_EQ(f.dev.used, 10 * MiB);
  fx_check(&f);
  sim_allocator_release(&f.a);
  f.rc = SIM_EINVAL;
  CHECK_EQ(f.dev.used, 0); /* every region went back */
  fx_release(&f);
}

/* A region restored from a recorded state (a dump's, a store's): chunks must lie in order inside
 * it; one that starts past its end is refused with a message, and the model stays as it was. */
static void rule_restore_bounds(void) {
  fx f;
  fx_init(&f, "bfc:memory_limit=1GiB", UINT64_MAX);
  const uint64_t base = UINT64_C(0x7e0000000000);
  sim_walk_item items[3] = {{.is_segment = 1, .addr = base, .size = 8 * MiB},
                            {.addr = base, .size = 1 * MiB, .requested = 1000, .state = SIM_BLOCK_ALLOCATED},
                            {.addr = base + 8 * MiB + 256, .size = 256, .requested = 100, .state = SIM_BLOCK_ALLOCATED}};
  uintptr_t h[3];
  char err[SIM_ERRLEN] = "";
  CHECK_EQ(f.a.ops->restore(f.a.ctx, items, 3, h, err, sizeof err), SIM_EINVAL); /* past the end */
  CHECK(strstr(err, "does not fit in order in the region") != NULL);
  items[2].addr = base + 8 * MiB; /* at the end itself */
  CHECK_EQ(f.a.ops->restore(f.a.ctx, items, 3, h, err, sizeof err), SIM_EINVAL);
  items[2].addr = base + 8 * MiB - 256; /* the last 256 bytes */
  CHECK_EQ(f.a.ops->restore(f.a.ctx, items, 3, h, err, sizeof err), SIM_OK);
  fx_check(&f);
  check_stats(&f, 2, 1 * MiB + 256, 1 * MiB + 256, 1 * MiB);
  fx_release(&f);
}

int main(void) {
  RUN(rule_restore_bounds);
  RUN(tf_no_dups);
  RUN(tf_allocations_and_deallocations);
  RUN(tf_exercise_coalescing);
  RUN(tf_allocate_zero_buf_size);
  RUN(tf_allocated_vs_requested);
  RUN(tf_custom_memory_limit);
  RUN(tf_allocations_and_deallocations_with_growth);
  RUN(tf_bin_debug_info);
  RUN(tf_force_allow_growth);
  RUN(tf_physical_allocator_ooms_fragmentation);
  RUN(tf_region_deallocation);
  RUN(tf_extend_terminates_when_device_always_fails);
  RUN(rule_rounding);
  RUN(rule_best_fit_and_bins);
  RUN(rule_split_fragmentation_bound);
  RUN(rule_coalescing);
  RUN(rule_no_cross_region_coalescing);
  RUN(rule_growth_whole_limit);
  RUN(rule_growth_allow_growth);
  RUN(rule_backpedal_once);
  RUN(rule_garbage_collection);
  RUN(rule_memory_limit_defaults);
  RUN(rule_memory_limit_options);
  RUN(rule_bad_options);
  RUN(rule_overflow);
  RUN(rule_oom_message_and_stats);
  RUN(rule_regions_from_device);
  TEST_MAIN_END();
}

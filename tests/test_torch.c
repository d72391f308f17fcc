/* test_torch.c: the torch model, rule by rule, against what PyTorch's CUDACachingAllocator.cpp does. */
#include <inttypes.h>

#include "io/settings.h"
#include "sim/alloc_torch.h"
#include "test.h"

int test_failures;

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

/* ---- a device that logs every driver call and hands out predictable addresses ---------------- */

typedef struct logdev {
  sim_device d;
  uint64_t next;      /* next address handed out */
  /* bytes taken (mallocs and maps) are in d.used */
  int fail_mallocs;   /* refuse this many mallocs/maps first */
  char log[8192];     /* "malloc SIZE", "free SIZE@OFFSET", "map SIZE@OFFSET", ... (sizes in KiB) */
} logdev;

#define BASE UINT64_C(0x100000000)

static void say(logdev *l, const char *what, uint64_t size, uint64_t addr) {
  size_t n = strlen(l->log);
  snprintf(l->log + n, sizeof l->log - n, "%s%s %" PRIu64 "K@%" PRIu64 "K", n ? ", " : "", what, size / KiB,
           (addr - BASE) / KiB);
}

static int ld_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  logdev *l = ctx;
  (void)stream;
  if (l->fail_mallocs > 0 || l->d.used + size > l->d.capacity) {
    if (l->fail_mallocs > 0) l->fail_mallocs--;
    say(l, "refused", size, BASE);
    return SIM_EOOM;
  }
  *addr = l->next;
  l->next += (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
  l->d.used += size;
  say(l, "malloc", size, *addr);
  return SIM_OK;
}

static int ld_free(void *ctx, uint64_t addr, uint64_t size) {
  logdev *l = ctx;
  l->d.used -= size;
  say(l, "free", size, addr);
  return SIM_OK;
}

static int ld_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  logdev *l = ctx;
  *addr = l->next;
  l->next += size;
  say(l, "reserve", size, *addr);
  return SIM_OK;
}

static int ld_unreserve(void *ctx, uint64_t addr, uint64_t size) {
  say(ctx, "unreserve", size, addr);
  return SIM_OK;
}

static int ld_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  logdev *l = ctx;
  (void)stream;
  if (l->fail_mallocs > 0 || l->d.used + size > l->d.capacity) {
    if (l->fail_mallocs > 0) l->fail_mallocs--;
    say(l, "refused map", size, addr);
    return SIM_EOOM;
  }
  l->d.used += size;
  say(l, "map", size, addr);
  return SIM_OK;
}

static int ld_unmap(void *ctx, uint64_t addr, uint64_t size) {
  logdev *l = ctx;
  l->d.used -= size;
  say(l, "unmap", size, addr);
  return SIM_OK;
}

static const sim_device_ops logdev_ops = {
  .size = sizeof(sim_device_ops),
  .malloc = ld_malloc, .free = ld_free, .reserve = ld_reserve, .unreserve = ld_unreserve,
  .map = ld_map, .unmap = ld_unmap,
};

/* ---- a model on that device --------------------------------------------------------------- */

typedef struct tm {
  logdev dev;
  sim_spec spec;
  sim_allocator a;
  const sim_alloc_stats *st;
} tm;

/* spec: "torch" or "torch:OPTIONS"; recorded: settings JSON or NULL. */
static int open_model(tm *t, const char *spec, uint64_t capacity, uint64_t total, const char *recorded, char *err,
                      size_t errlen) {
  memset(t, 0, sizeof *t);
  t->dev.d.ops = &logdev_ops;
  t->dev.d.ctx = &t->dev;
  t->dev.d.capacity = capacity;
  t->dev.d.total_memory = total;
  t->dev.next = BASE;
  if (sim_spec_parse(&t->spec, spec, err, errlen) != SIM_OK) return -1;
  settings rec; /* as the engine hands them to the model */
  settings_init(&rec, recorded);
  int rc = sim_allocator_init(&t->a, &t->spec, &t->dev.d, &rec.recorded, NULL, err, errlen);
  settings_release(&rec);
  if (rc != SIM_OK) {
    sim_spec_release(&t->spec);
    return -1;
  }
  t->st = t->a.ops->stats(t->a.ctx);
  return 0;
}

static void make(tm *t, const char *spec) {
  char err[SIM_ERRLEN];
  if (open_model(t, spec, UINT64_MAX, 80 * GiB, NULL, err, sizeof err)) {
    fprintf(stderr, "cannot make '%s': %s\n", spec, err);
    exit(1);
  }
}

static void done(tm *t) {
  char err[SIM_ERRLEN];
  if (t->a.ops->check(t->a.ctx, err, sizeof err)) {
    fprintf(stderr, "invariants broken: %s\n", err);
    test_failures++;
  }
  sim_allocator_release(&t->a);
  sim_spec_release(&t->spec);
}

/* Allocates and returns the block's offset from BASE (or -1 when it did not fit). */
static int64_t A(tm *t, uint64_t size, int64_t stream, sim_placement *p) {
  sim_placement tmp;
  if (!p) p = &tmp;
  if (t->a.ops->alloc(t->a.ctx, size, stream, p) != SIM_OK) return -1;
  return (int64_t)(p->addr - BASE);
}

static void F(tm *t, const sim_placement *p) {
  t->a.ops->free_requested(t->a.ctx, p->handle);
  t->a.ops->free_completed(t->a.ctx, p->handle);
}

static void clear_log(tm *t) { t->dev.log[0] = 0; }

/* The model's state as text: "[SIZE small|large[ exp]: SIZEa|w|f ...]" per segment (a: allocated,
 * w: waiting for free_completed, f: free), sizes in KiB. */
static int describe_item(void *arg, const sim_walk_item *it) {
  char *buf = arg;
  size_t n = strlen(buf);
  char size[32];
  if (it->size % KiB) snprintf(size, sizeof size, "%.1fK", (double)it->size / KiB);
  else snprintf(size, sizeof size, "%" PRIu64 "K", it->size / KiB);
  if (it->is_segment)
    snprintf(buf + n, 2048 - n, "%s[%s %s%s:", n ? "] " : "", size, it->pool ? "large" : "small",
             it->expandable ? " exp" : "");
  else
    snprintf(buf + n, 2048 - n, " %s%s", size,
             it->state == SIM_BLOCK_ALLOCATED ? "a" : it->state == SIM_BLOCK_PENDING_FREE ? "w" : "f");
  return 0;
}

static const char *state(tm *t) {
  static char buf[2048];
  buf[0] = 0;
  t->a.ops->walk(t->a.ctx, describe_item, buf);
  if (buf[0]) strcat(buf, "]");
  return buf;
}

static uint64_t R(tm *t, uint64_t size) { return sim_torch_round_size(t->a.ctx, size); }

/* ---- rounding ------------------------------------------------------------------------------- */

static void rounding_default(void) {
  tm t;
  make(&t, "torch");
  CHECK_EQ(R(&t, 1), 512);
  CHECK_EQ(R(&t, 512), 512);
  CHECK_EQ(R(&t, 513), 1024);
  CHECK_EQ(R(&t, 1200), 1536);
  CHECK_EQ(R(&t, MiB + 1), MiB + 512);
  CHECK_EQ(R(&t, 5 * MiB + 1), 5 * MiB + 512);
  done(&t);
}

static void rounding_power2_divisions_single(void) {
  tm t;
  make(&t, "torch:roundup_power2_divisions:4");
  /* PyTorch's own example, in KiB: 1200 lies between 1024 and 2048, whose 4 divisions are 1024,
   * 1280, 1536 and 1792: 1280. */
  CHECK_EQ(R(&t, 1200 * KiB), 1280 * KiB);
  CHECK_EQ(R(&t, 4 * MiB), 4 * MiB);             /* a power of 2 stays */
  CHECK_EQ(R(&t, 5 * MiB + 1), 6 * MiB);         /* 4..8 MiB in steps of 1 MiB */
  CHECK_EQ(R(&t, 1200), 1536);                   /* at most 512 x 4: plain 512-byte rounding */
  CHECK_EQ(R(&t, 3000), 3072);                   /* 2048..4096 in steps of 512 */
  CHECK_EQ(R(&t, 1536 * KiB), 1536 * KiB);       /* already on a division */
  done(&t);
  make(&t, "torch:roundup_power2_divisions:1"); /* one division: no change */
  CHECK_EQ(R(&t, 5 * MiB + 1), 5 * MiB + 512);
  done(&t);
}

static void rounding_power2_divisions_list(void) {
  tm t;
  make(&t, "torch:roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  CHECK_EQ(R(&t, 100 * MiB + 1), 100 * MiB + 512);  /* before 256 MiB: the first entry's 1 */
  CHECK_EQ(R(&t, 300 * MiB + 1), 300 * MiB + 512);  /* [256, 512) MiB: 1 division */
  CHECK_EQ(R(&t, 600 * MiB), 768 * MiB);            /* [512 MiB, 1 GiB): 2 divisions */
  CHECK_EQ(R(&t, 1638 * MiB), 1792 * MiB);          /* [1, 2) GiB: 4 divisions */
  CHECK_EQ(R(&t, 3174 * MiB), 3328 * MiB);          /* 2 GiB and up: 8 divisions ('>') */
  done(&t);
  make(&t, "torch:roundup_power2_divisions:[2:4,>:8]");
  CHECK_EQ(R(&t, 1200 * KiB), 1280 * KiB);  /* before the first key: its value */
  CHECK_EQ(R(&t, 2500 * KiB), 2560 * KiB);  /* [2, 4) MiB: 4 divisions */
  CHECK_EQ(R(&t, 5 * MiB + 1), 5632 * KiB); /* 4 MiB and up: 8 divisions, steps of 512 KiB */
  done(&t);
  make(&t, "torch:roundup_power2_divisions:[1:4]");
  CHECK_EQ(R(&t, 1200 * KiB), 1280 * KiB);
  CHECK_EQ(R(&t, 3 * MiB + 1), 3 * MiB + 512); /* entries after the only key stay 0 */
  done(&t);
  make(&t, "torch:roundup_power2_divisions:[64:0,>:2]");
  CHECK_EQ(R(&t, 5 * MiB + 1), 5 * MiB + 512); /* 0 turns rounding off below 128 MiB */
  CHECK_EQ(R(&t, 600 * MiB), 768 * MiB);
  done(&t);
}

/* ---- pools, segments, best fit ------------------------------------------------------------------ */

static void pools_and_segment_sizes(void) {
  tm t;
  make(&t, "torch");
  CHECK_EQ(A(&t, MiB, 0, NULL), 0);                 /* <= 1 MiB: small pool, 2 MiB segment */
  CHECK_EQ(A(&t, MiB + 1, 0, NULL), 2 * 1024 * 1024); /* > 1 MiB: large pool, 20 MiB segment */
  CHECK_EQ(A(&t, 9 * MiB, 0, NULL), 2 * MiB + MiB + 512); /* shares the 20 MiB segment */
  CHECK_EQ(A(&t, 12 * MiB + 1, 0, NULL), 22 * MiB);  /* >= 10 MiB: rounded up to 2 MiB: 14 MiB */
  CHECK_STR(t.dev.log, "malloc 2048K@0K, malloc 20480K@2048K, malloc 14336K@22528K");
  CHECK_STR(state(&t), "[2048K small: 1024Ka 1024Kf] [20480K large: 1024.5Ka 9216Ka 10239.5Kf] [14336K large: 12288.5Ka "
                       "2047.5Kf]");
  CHECK_EQ(t.st->reserved.current, 36 * MiB);
  done(&t);
}

static void streams_have_their_own_pools(void) {
  tm t;
  sim_placement p;
  make(&t, "torch");
  CHECK_EQ(A(&t, 2 * MiB, 1, &p), 0);
  F(&t, &p);
  CHECK_EQ(A(&t, 2 * MiB, 2, NULL), 20 * MiB); /* a free block of stream 1 is never used for stream 2 */
  CHECK_EQ(A(&t, 2 * MiB, 1, NULL), 0);        /* stream 1 gets its own back */
  CHECK_EQ(t.dev.d.mallocs, 2);
  done(&t);
}

static void best_fit_smallest_then_lowest_address(void) {
  tm t;
  sim_placement a1, s1, a2, s2, a3, s3;
  make(&t, "torch");
  /* one 20 MiB segment: 2 2 3 2 2 2 | 7 free (MiB) */
  A(&t, 2 * MiB, 0, &a1);
  A(&t, 2 * MiB, 0, &s1);
  A(&t, 3 * MiB, 0, &a2);
  A(&t, 2 * MiB, 0, &s2);
  A(&t, 2 * MiB, 0, &a3);
  A(&t, 2 * MiB, 0, &s3);
  F(&t, &a1);
  F(&t, &a2);
  F(&t, &a3);
  CHECK_STR(state(&t), "[20480K large: 2048Kf 2048Ka 3072Kf 2048Ka 2048Kf 2048Ka 7168Kf]");
  CHECK_EQ(A(&t, 2 * MiB, 0, NULL), 0);            /* two 2 MiB blocks fit best: the lower address */
  CHECK_EQ(A(&t, 2 * MiB, 0, NULL), 9 * 1024 * 1024); /* then the other */
  sim_placement b;
  CHECK_EQ(A(&t, 2 * MiB + 512 * KiB, 0, &b), 4 * MiB); /* the 3 MiB block, not the 7 MiB one */
  CHECK_EQ(b.size, 3 * MiB);                        /* 0.5 MiB left over stays inside */
  CHECK_EQ(t.dev.d.mallocs, 1);
  done(&t);
}

static void split_rules_in_both_pools(void) {
  tm t;
  sim_placement p;
  make(&t, "torch");
  /* large pool: a remainder of 1 MiB or less stays in the block */
  A(&t, 19 * MiB, 0, &p);
  CHECK_EQ(p.size, 20 * MiB);
  CHECK_EQ(t.st->allocated.current, 20 * MiB);
  CHECK_EQ(t.st->requested.current, 19 * MiB);
  A(&t, 18 * MiB + 512, 0, &p); /* 2 MiB - 1 KiB left: split */
  CHECK_EQ(p.size, 18 * MiB + 512);
  CHECK_STR(state(&t), "[20480K large: 20480Ka] [20480K large: 18432.5Ka 2047.5Kf]");
  done(&t);
  /* small pool: any remainder of 512 bytes or more is split off */
  make(&t, "torch");
  A(&t, MiB, 0, &p);
  A(&t, MiB - 512, 0, &p);
  CHECK_STR(state(&t), "[2048K small: 1024Ka 1023.5Ka 0.5Kf]");
  A(&t, 1, 0, &p);
  CHECK_EQ(p.size, 512);
  CHECK_STR(state(&t), "[2048K small: 1024Ka 1023.5Ka 0.5Ka]"); /* the last 512 bytes exactly */
  done(&t);
  /* with expandable segments every split keeps 512 bytes or more, in the large pool too */
  make(&t, "torch:expandable_segments:True");
  A(&t, 19 * MiB, 0, &p);
  CHECK_EQ(p.size, 19 * MiB);
  done(&t);
}

static void frees_merge_with_free_neighbours(void) {
  tm t;
  sim_placement a, b, c, d;
  make(&t, "torch");
  A(&t, 4 * MiB, 0, &a);
  A(&t, 4 * MiB, 0, &b);
  A(&t, 4 * MiB, 0, &c);
  A(&t, 4 * MiB, 0, &d);
  F(&t, &a);
  F(&t, &c);
  CHECK_STR(state(&t), "[20480K large: 4096Kf 4096Ka 4096Kf 4096Ka 4096Kf]");
  F(&t, &b); /* joins both neighbours */
  CHECK_STR(state(&t), "[20480K large: 12288Kf 4096Ka 4096Kf]");
  F(&t, &d);
  CHECK_STR(state(&t), "[20480K large: 20480Kf]");
  CHECK_EQ(t.st->allocated.current, 0);
  CHECK_EQ(t.st->active.current, 0);
  done(&t);
}

/* ---- max_split_size_mb ----------------------------------------------------------------------------- */

static void oversize_blocks(void) {
  tm t;
  sim_placement big, p;
  make(&t, "torch:max_split_size_mb:40");
  A(&t, 50 * MiB, 0, &big);
  F(&t, &big);
  CHECK_EQ(A(&t, 30 * MiB, 0, &p), 50 * MiB); /* below max_split: an oversize block is not used */
  F(&t, &p);
  CHECK_EQ(A(&t, 45 * MiB, 0, &p), 0);        /* at or above it: used if under 45 + 20 MiB */
  CHECK_EQ(p.size, 50 * MiB);                 /* and never split */
  F(&t, &p);
  CHECK_EQ(A(&t, 41 * MiB, 0, &p), 0);
  CHECK_EQ(p.size, 50 * MiB);
  F(&t, &p);
  done(&t);
  make(&t, "torch:max_split_size_mb:40");
  A(&t, 70 * MiB, 0, &big);
  F(&t, &big);
  CHECK_EQ(A(&t, 45 * MiB, 0, &p), 70 * MiB); /* 70 >= 45 + 20: too big to round up to */
  done(&t);
  make(&t, "torch:max_split_size_mb:40,max_non_split_rounding_mb:30");
  A(&t, 70 * MiB, 0, &big);
  F(&t, &big);
  CHECK_EQ(A(&t, 45 * MiB, 0, &p), 0);        /* 70 < 45 + 30 */
  done(&t);
  /* a block below max_split is split as usual; one above is not */
  make(&t, "torch:max_split_size_mb:20");
  A(&t, 5 * MiB, 0, &p);
  CHECK_STR(state(&t), "[20480K large: 5120Ka 15360Kf]");
  A(&t, 25 * MiB + 1, 0, &p);
  CHECK_EQ(p.size, 26 * MiB); /* its own 26 MiB segment, not split: the 1 MiB - 512 after it stays inside */
  done(&t);
}

static void release_available_cached_blocks_frees_just_enough(void) {
  tm t;
  sim_placement x, p;
  char err[SIM_ERRLEN];
  /* one oversize block at least as large as the request (or max_split) is freed first */
  open_model(&t, "torch:max_split_size_mb:40", 100 * MiB, 80 * GiB, NULL, err, sizeof err);
  A(&t, 50 * MiB, 0, &x);
  F(&t, &x);
  CHECK_EQ(A(&t, 30 * MiB, 0, &p), 50 * MiB);
  clear_log(&t);
  CHECK(A(&t, 30 * MiB, 0, &p) >= 0);
  CHECK_STR(t.dev.log, "refused 30720K@0K, free 51200K@0K, malloc 30720K@81920K");
  CHECK_EQ(t.st->num_alloc_retries, 0); /* not release_cached_blocks */
  CHECK_EQ(t.st->reserved.current, 60 * MiB);
  done(&t);
  /* none large enough alone: the largest oversize blocks go, until enough is freed */
  open_model(&t, "torch:max_split_size_mb:40", 120 * MiB, 80 * GiB, NULL, err, sizeof err);
  sim_placement a, b;
  A(&t, 40 * MiB, 0, &a);
  A(&t, 44 * MiB, 0, &b);
  F(&t, &a);
  F(&t, &b);
  clear_log(&t);
  CHECK(A(&t, 80 * MiB, 0, &p) >= 0);
  CHECK_STR(t.dev.log, "refused 81920K@0K, free 45056K@40960K, free 40960K@0K, malloc 81920K@86016K");
  done(&t);
  /* without max_split_size_mb it does nothing: release_cached_blocks frees all unsplit blocks */
  open_model(&t, "torch", 100 * MiB, 80 * GiB, NULL, err, sizeof err);
  A(&t, 50 * MiB, 0, &x);
  A(&t, 30 * MiB, 0, &p);
  F(&t, &x);
  F(&t, &p);
  clear_log(&t);
  CHECK(A(&t, 60 * MiB, 0, &p) >= 0);
  CHECK_STR(t.dev.log, "refused 61440K@0K, free 30720K@51200K, free 51200K@0K, malloc 61440K@81920K");
  CHECK_EQ(t.st->num_alloc_retries, 1);
  done(&t);
}

/* ---- OOM: release cached blocks and retry, then fail in PyTorch's words ---------------------------- */

static void oom_releases_cached_blocks_and_retries(void) {
  tm t;
  sim_placement a, b, p;
  char err[SIM_ERRLEN];
  open_model(&t, "torch", 60 * MiB, 60 * MiB, NULL, err, sizeof err);
  A(&t, 5 * MiB, 0, &a);  /* a 20 MiB segment, split: not releasable */
  A(&t, 30 * MiB, 0, &b); /* a 30 MiB segment */
  F(&t, &b);
  clear_log(&t);
  CHECK_EQ(A(&t, 35 * MiB, 0, &p), 50 * MiB);
  CHECK_STR(t.dev.log, "refused 36864K@0K, free 30720K@20480K, malloc 36864K@51200K");
  CHECK_EQ(t.st->num_alloc_retries, 1);
  CHECK_EQ(t.st->reserved.current, 56 * MiB);
  CHECK_EQ(A(&t, 10 * MiB, 0, &p), 5 * MiB); /* fits the split segment's free 15 MiB */
  clear_log(&t);
  CHECK_EQ(A(&t, 20 * MiB, 0, &p), -1);      /* nothing left to release */
  CHECK_STR(t.dev.log, "refused 20480K@0K, refused 20480K@0K");
  CHECK_EQ(t.st->num_ooms, 1);
  CHECK_EQ(t.st->num_alloc_retries, 2);
  char msg[512];
  t.a.ops->describe_oom(t.a.ctx, 20 * MiB, 0, msg, sizeof msg);
  CHECK(strstr(msg, "CUDA out of memory. Tried to allocate 20.00 MiB.") != NULL);
  CHECK(strstr(msg, "total capacity of 60.00 MiB of which 4.00 MiB is free") != NULL);
  CHECK(strstr(msg, "51.00 MiB is allocated by PyTorch, and 5.00 MiB is reserved by PyTorch but unallocated") != NULL);
  t.a.ops->describe_oom(t.a.ctx, 100, 0, msg, sizeof msg); /* the segment it would have needed */
  CHECK(strstr(msg, "Tried to allocate 2.00 MiB") != NULL);
  done(&t);
}

static void empty_cache_releases_unsplit_blocks(void) {
  tm t;
  sim_placement s0, l0, l1, l2, keep;
  make(&t, "torch");
  A(&t, 512 * KiB, 0, &s0); /* small, stream 0 */
  A(&t, 30 * MiB, 5, &l0);  /* large, stream 5 */
  A(&t, 12 * MiB, 0, &l1);  /* large, stream 0 */
  A(&t, 2 * MiB, 0, &l2);   /* large, stream 0, a 20 MiB segment */
  A(&t, 2 * MiB, 0, &keep); /* in the same segment: it stays split */
  F(&t, &s0);
  F(&t, &l0);
  F(&t, &l1);
  F(&t, &l2);
  clear_log(&t);
  t.a.ops->empty_cache(t.a.ctx);
  /* large pool first, in (stream, size, address) order, then the small pool */
  CHECK_STR(t.dev.log, "free 12288K@32768K, free 30720K@2048K, free 2048K@0K");
  CHECK_STR(state(&t), "[20480K large: 2048Kf 2048Ka 16384Kf]");
  CHECK_EQ(t.st->reserved.current, 20 * MiB);
  done(&t);
}

/* ---- garbage collection with a memory fraction ---------------------------------------------------- */

static void gc_frees_old_blocks_above_the_threshold(void) {
  tm t;
  sim_placement a, b, c, d, e, f;
  char err[SIM_ERRLEN];
  open_model(&t, "torch:garbage_collection_threshold:0.5,per_process_memory_fraction:1.0", UINT64_MAX, 100 * MiB,
             NULL, err, sizeof err);
  A(&t, 12 * MiB, 0, &a); /* get_free_block calls on the large pool: 1 */
  A(&t, 12 * MiB, 0, &b); /* 2 */
  A(&t, 12 * MiB, 0, &c); /* 3 */
  A(&t, 12 * MiB, 0, &d); /* 4: 48 MiB reserved */
  F(&t, &a);              /* enters the pool at 4 */
  F(&t, &b);              /* at 4 */
  A(&t, 14 * MiB, 0, &e); /* 5: no fit; 48 MiB <= 50 MiB: no collection; 62 MiB reserved */
  F(&t, &c);              /* at 5 */
  clear_log(&t);
  A(&t, 14 * MiB, 0, &f); /* 6: no fit; 62 > 50: reclaim 12 MiB from blocks aged >= (2+2+1)/3 */
  CHECK_STR(t.dev.log, "free 12288K@0K, free 12288K@12288K, malloc 14336K@63488K");
  CHECK_EQ(t.st->reserved.current, 52 * MiB);
  done(&t);
  /* without a memory fraction the threshold does nothing */
  make(&t, "torch:garbage_collection_threshold:0.5");
  A(&t, 12 * MiB, 0, &a);
  A(&t, 12 * MiB, 0, &b);
  A(&t, 12 * MiB, 0, &c);
  A(&t, 12 * MiB, 0, &d);
  F(&t, &a);
  F(&t, &b);
  A(&t, 14 * MiB, 0, &e);
  F(&t, &c);
  A(&t, 14 * MiB, 0, &f);
  CHECK_EQ(t.dev.d.frees, 0);
  CHECK_EQ(t.st->reserved.current, 76 * MiB);
  done(&t);
}

static void memory_fraction_caps_the_allocator(void) {
  tm t;
  sim_placement p;
  char err[SIM_ERRLEN];
  open_model(&t, "torch:per_process_memory_fraction:0.5", UINT64_MAX, 100 * MiB, NULL, err, sizeof err);
  for (int i = 0; i < 4; i++) CHECK(A(&t, 12 * MiB, 0, &p) >= 0);
  CHECK_EQ(A(&t, 12 * MiB, 0, &p), -1); /* 48 + 12 > 50 MiB allowed, and nothing to release */
  CHECK_EQ(t.dev.d.mallocs, 4);
  char msg[512];
  t.a.ops->describe_oom(t.a.ctx, 12 * MiB, 0, msg, sizeof msg);
  CHECK(strstr(msg, "50.00 MiB allowed; ") != NULL);
  done(&t);
}

/* ---- expandable segments ------------------------------------------------------------------------------- */

static void expandable_segments_map_and_unmap_pages(void) {
  tm t;
  sim_placement a, b, c, d;
  make(&t, "torch:expandable_segments:True");
  /* address space for 1 1/8 of the card (90 GiB of 80), then one 20 MiB page for 16 MiB */
  A(&t, 16 * MiB, 0, &a);
  CHECK_STR(t.dev.log, "reserve 94371840K@0K, map 20480K@0K");
  CHECK_STR(state(&t), "[20480K large exp: 16384Ka 4096Kf]");
  clear_log(&t);
  uint64_t want = 133379072; /* 127.2 MiB: 123.2 MiB beyond the free 4 MiB, rounded out to 140 MiB */
  CHECK_EQ(A(&t, want, 0, &b), 16 * MiB);
  CHECK_STR(t.dev.log, "map 143360K@20480K");
  CHECK_EQ(t.st->reserved.current, 160 * MiB);
  CHECK_STR(state(&t), "[163840K large exp: 16384Ka 130253Ka 17203Kf]");
  clear_log(&t);
  CHECK_EQ(A(&t, 40 * MiB, 0, &c), 16 * MiB + (int64_t)want); /* grows the segment by two more pages */
  CHECK_STR(t.dev.log, "map 40960K@163840K");
  F(&t, &b);
  F(&t, &a);
  CHECK_STR(state(&t), "[204800K large exp: 146637Kf 40960Ka 17203Kf]");
  clear_log(&t);
  t.a.ops->empty_cache(t.a.ctx); /* only whole free pages are unmapped: seven of them */
  CHECK_STR(t.dev.log, "unmap 143360K@0K");
  CHECK_STR(state(&t), "[61440K large exp: 3277Kf 40960Ka 17203Kf]"); /* one segment per mapped range */
  CHECK_EQ(t.st->reserved.current, 60 * MiB);
  F(&t, &c);
  clear_log(&t);
  t.a.ops->empty_cache(t.a.ctx); /* nothing mapped is left in use: unmapped, and the segment goes */
  CHECK_STR(t.dev.log, "unmap 61440K@143360K, unreserve 94371840K@0K");
  CHECK_EQ(t.st->reserved.current, 0);
  CHECK_STR(state(&t), "");
  /* the small pool maps 2 MiB pages; each stream has its own segment */
  clear_log(&t);
  A(&t, 600 * KiB, 0, &d);
  A(&t, 600 * KiB, 3, &d);
  CHECK_STR(t.dev.log, "reserve 94371840K@94371840K, map 2048K@94371840K, reserve 94371840K@188743680K, "
                       "map 2048K@188743680K");
  done(&t);
}

static void expandable_best_fit_counts_room_to_grow(void) {
  tm t;
  sim_placement a, b, c, d;
  make(&t, "torch:expandable_segments:True");
  A(&t, 6 * MiB, 0, &a);
  A(&t, 2 * MiB, 0, &b);
  A(&t, 8 * MiB, 0, &c);
  F(&t, &a);
  CHECK_STR(state(&t), "[20480K large exp: 6144Kf 2048Ka 8192Ka 4096Kf]");
  /* The smallest block for 4 MiB is the 4 MiB at the end, but it could grow into the unmapped
   * space after it, so best fit counts it as larger than the 6 MiB hole, which is taken. */
  CHECK_EQ(A(&t, 4 * MiB, 0, &d), 0);
  CHECK_STR(state(&t), "[20480K large exp: 4096Ka 2048Kf 2048Ka 8192Ka 4096Kf]");
  done(&t);
}

/* ---- delayed reuse between free_requested and free_completed ---------------------------------------- */

static void waiting_blocks_are_not_reused(void) {
  tm t;
  sim_placement a, b, c;
  make(&t, "torch");
  A(&t, 2 * MiB, 0, &a);
  t.a.ops->free_requested(t.a.ctx, a.handle); /* record_stream: still in use on another stream */
  CHECK_EQ(t.st->allocated.current, 0);
  CHECK_EQ(t.st->active.current, 2 * MiB);
  CHECK_EQ(A(&t, 2 * MiB, 0, &b), 2 * MiB); /* not at 0 */
  CHECK_STR(state(&t), "[20480K large: 2048Kw 2048Ka 16384Kf]");
  t.a.ops->free_completed(t.a.ctx, a.handle);
  CHECK_EQ(t.st->active.current, 2 * MiB);
  CHECK_EQ(A(&t, 2 * MiB, 0, &c), 0); /* now it is */
  done(&t);
  /* empty_cache synchronizes: waiting blocks become free (and unsplit segments go) */
  make(&t, "torch");
  A(&t, 12 * MiB, 0, &a);
  t.a.ops->free_requested(t.a.ctx, a.handle);
  t.a.ops->empty_cache(t.a.ctx);
  CHECK_EQ(t.dev.d.frees, 1);
  CHECK_EQ(t.st->active.current, 0);
  t.a.ops->free_completed(t.a.ctx, a.handle); /* the late free_completed is ignored */
  CHECK_EQ(A(&t, 12 * MiB, 0, &b), 12 * MiB);
  t.a.ops->free_completed(t.a.ctx, a.handle); /* still ignored: the handle is stale, b lives */
  CHECK_EQ(t.st->allocated.current, 12 * MiB);
  done(&t);
  /* a device-wide synchronize completes them too; a stream's does not */
  make(&t, "torch");
  A(&t, 2 * MiB, 0, &a);
  t.a.ops->free_requested(t.a.ctx, a.handle);
  t.a.ops->synchronize(t.a.ctx, 0);
  CHECK_STR(state(&t), "[20480K large: 2048Kw 18432Kf]");
  t.a.ops->synchronize(t.a.ctx, -1);
  CHECK_STR(state(&t), "[20480K large: 20480Kf]");
  done(&t);
}

/* ---- statistics ----------------------------------------------------------------------------------------- */

static void stats_current_and_peak(void) {
  tm t;
  sim_placement a, b, c;
  make(&t, "torch");
  A(&t, 1000, 0, &a);        /* 1024 bytes, small */
  A(&t, 3 * MiB + 1, 0, &b); /* 3 MiB + 512, large */
  A(&t, 19 * MiB, 0, &c);    /* a new 20 MiB segment, unsplit */
  CHECK_EQ(t.st->allocated.current, 1024 + 3 * MiB + 512 + 20 * MiB);
  CHECK_EQ(t.st->requested.current, 1000 + 3 * MiB + 1 + 19 * MiB);
  CHECK_EQ(t.st->reserved.current, 2 * MiB + 20 * MiB + 20 * MiB);
  F(&t, &c);
  CHECK_EQ(t.st->allocated.current, 1024 + 3 * MiB + 512);
  CHECK_EQ(t.st->allocated.peak, 1024 + 3 * MiB + 512 + 20 * MiB);
  CHECK_EQ(t.st->requested.peak, 1000 + 3 * MiB + 1 + 19 * MiB);
  CHECK_EQ(t.st->active.peak, t.st->allocated.peak);
  t.a.ops->empty_cache(t.a.ctx);
  CHECK_EQ(t.st->reserved.current, 22 * MiB);
  CHECK_EQ(t.st->reserved.peak, 42 * MiB);
  CHECK_EQ(t.st->num_allocs, 3);
  CHECK_EQ(t.st->num_frees, 1);
  CHECK_EQ(t.a.ops->largest_free(t.a.ctx), 20 * MiB - 3 * MiB - 512);
  /* a zero-byte request never reaches the allocator (PyTorch hands out nullptr) */
  sim_placement z;
  CHECK_EQ(t.a.ops->alloc(t.a.ctx, 0, 0, &z), SIM_OK);
  CHECK_EQ(z.addr, 0);
  F(&t, &z);
  CHECK_EQ(t.st->num_allocs, 3);
  done(&t);
}

/* ---- options and recorded settings ---------------------------------------------------------------- */

static void bad_options_are_refused(void) {
  static const struct {
    const char *spec, *message;
  } bad[] = {
    {"torch:max_split_size_mb:10", "must be at least 20"},
    {"torch:max_split_size_mb:lots", "whole number of MiB"},
    {"torch:max_non_split_rounding_mb:5", "must be at least 20"},
    {"torch:garbage_collection_threshold:1.5", "(0, 1)"},
    {"torch:garbage_collection_threshold:0", "(0, 1)"},
    {"torch:roundup_power2_divisions:3", "power of 2"},
    {"torch:roundup_power2_divisions:[256:3]", "power of 2 or 0"},
    {"torch:roundup_power2_divisions:[100:2]", "power of 2 (MiB)"},
    {"torch:roundup_power2_divisions:[256:1", "does not end"},
    {"torch:expandable_segments:maybe", "true or false"},
    {"torch:per_process_memory_fraction:1.5", "[0, 1]"},
    {"torch:backend:cudaMallocAsync", "'async' model"},
    {"torch:pinned_num_register_threads:3", "power of 2"},
    {"torch:max_split_sise_mb:64", "unknown option 'max_split_sise_mb'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tm t;
    char err[SIM_ERRLEN] = "";
    int rc = open_model(&t, bad[i].spec, UINT64_MAX, 80 * GiB, NULL, err, sizeof err);
    CHECK(rc != 0);
    if (!strstr(err, bad[i].message)) {
      fprintf(stderr, "  %s: '%s' lacks '%s'\n", bad[i].spec, err, bad[i].message);
      test_failures++;
    }
    if (rc == 0) done(&t);
  }
  /* accepted and ignored: the host-memory and locking keys */
  tm t;
  make(&t, "torch:pinned_use_cuda_host_register:True,pinned_num_register_threads:8,release_lock_on_cudamalloc:True,"
           "backend:native");
  done(&t);
}

static void recorded_settings_are_used_without_options(void) {
  tm t;
  char err[SIM_ERRLEN];
  sim_placement p;
  const char *recorded = "{\"PYTORCH_CUDA_ALLOC_CONF\": \"\", \"max_split_size\": 41943040, "
                         "\"garbage_collection_threshold\": 0.0, \"expandable_segments\": false, "
                         "\"roundup_power2_divisions\": {\"1\": 4, \"2\": 0, \"4\": 0}}";
  CHECK_EQ(open_model(&t, "torch", UINT64_MAX, 80 * GiB, recorded, err, sizeof err), 0);
  CHECK_EQ(R(&t, 1200 * KiB), 1280 * KiB);
  A(&t, 50 * MiB, 0, &p);
  F(&t, &p);
  CHECK_EQ(A(&t, 30 * MiB, 0, &p), 50 * MiB); /* max_split_size 40 MiB from the recording */
  done(&t);
  /* options given: PyTorch's defaults plus those, the recording ignored */
  CHECK_EQ(open_model(&t, "torch:expandable_segments:False", UINT64_MAX, 80 * GiB, recorded, err, sizeof err), 0);
  CHECK_EQ(R(&t, 1200 * KiB), 1200 * KiB);
  done(&t);
  /* only the configuration string recorded */
  CHECK_EQ(open_model(&t, "torch", UINT64_MAX, 80 * GiB, "{\"PYTORCH_CUDA_ALLOC_CONF\": \"expandable_segments:True\"}",
                      err, sizeof err),
           0);
  A(&t, 16 * MiB, 0, &p);
  CHECK_EQ(t.dev.d.maps, 1);
  done(&t);
  CHECK(open_model(&t, "torch", UINT64_MAX, 80 * GiB, "not json", err, sizeof err) != 0);
  CHECK(strstr(err, "recorded allocator settings") != NULL);
  CHECK(open_model(&t, "torch", UINT64_MAX, 80 * GiB, "{\"PYTORCH_CUDA_ALLOC_CONF\": \"max_split_size_mb:1\"}", err,
                   sizeof err) != 0);
}

/* What the model is handed: a snapshot's settings flattened into options (io/settings.h). */
static void recorded_settings_are_flattened(void) {
  settings s;
  CHECK_EQ(settings_init(&s, "{\"PYTORCH_CUDA_ALLOC_CONF\": \"expandable_segments:True\", \"max_split_size\": -1, "
                             "\"garbage_collection_threshold\": 0.0, \"expandable_segments\": false, \"x\": null, "
                             "\"roundup_power2_divisions\": {\"1\": 4, \"2\": 0}, \"list\": [1, [true], {\"a\": 2}]}"),
           0);
  static const char *const want[][2] = {
    {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"},
    {"max_split_size", "-1"},
    {"garbage_collection_threshold", "0.0"},
    {"expandable_segments", "False"},
    {"x", ""},
    {"roundup_power2_divisions", "[1:4,2:0]"},
    {"list", "[1,[True],[a:2]]"},
  };
  CHECK_EQ(s.recorded.nopts, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < s.recorded.nopts && i < sizeof want / sizeof want[0]; i++) {
    CHECK_STR(s.recorded.opts[i].key, want[i][0]);
    CHECK_STR(s.recorded.opts[i].value, want[i][1]);
  }
  CHECK(s.recorded.error == NULL);
  settings_release(&s);
  CHECK_EQ(settings_init(&s, NULL), 0);
  CHECK_EQ(s.recorded.nopts, 0);
  settings_release(&s);
  CHECK_EQ(settings_init(&s, "[1, 2]"), -1);
  CHECK(s.recorded.error && strstr(s.recorded.error, "not a JSON object"));
  settings_release(&s);
  /* an empty key first, an empty object: empty texts (found by fuzz_spec: the sanitizer build
   * stopped on an empty text written before the buffer existed) */
  CHECK_EQ(settings_init(&s, "{\"\": {}, \"e\": \"\"}"), 0);
  CHECK_EQ(s.recorded.nopts, 2);
  if (s.recorded.nopts == 2) {
    CHECK_STR(s.recorded.opts[0].key, "");
    CHECK_STR(s.recorded.opts[0].value, "[]");
    CHECK_STR(s.recorded.opts[1].value, "");
  }
  settings_release(&s);

  /* the torch model reads them by PyTorch's own names */
  tm t;
  char err[SIM_ERRLEN];
  CHECK_EQ(open_model(&t, "torch", UINT64_MAX, 80 * GiB, "{\"roundup_power2_divisions\": [4, 0, 0]}", err, sizeof err), 0);
  CHECK_EQ(R(&t, 1200 * KiB), 1280 * KiB); /* the array form: divisions by interval */
  done(&t);
  CHECK_EQ(open_model(&t, "torch", UINT64_MAX, 80 * GiB,
                      "{\"PYTORCH_CUDA_ALLOC_CONF\": null, \"max_split_size\": 1.5, \"expandable_segments\": 1}", err,
                      sizeof err),
           0); /* values of another type are ignored, as is a conf that is not there */
  CHECK_EQ(R(&t, 1200 * KiB), 1200 * KiB);
  done(&t);
  CHECK(open_model(&t, "torch", UINT64_MAX, 80 * GiB, "{\"roundup_power2_divisions\": {\"1\": 4, \"3\": 2}}", err,
                   sizeof err) != 0);
  CHECK(strstr(err, "roundup_power2_divisions has an entry '3'") != NULL);
  CHECK(open_model(&t, "torch", UINT64_MAX, 80 * GiB, "{\"roundup_power2_divisions\": {\"4\": [2]}}", err,
                   sizeof err) != 0);
  CHECK(strstr(err, "entry '4'") != NULL);
  /* a recording that is not an object stops only a model that reads it */
  CHECK_EQ(open_model(&t, "torch:expandable_segments:False", UINT64_MAX, 80 * GiB, "not json", err, sizeof err), 0);
  done(&t);
}

/* ---- restoring a recorded state ---------------------------------------------------------------------- */

static void restore_sizes_blocks_by_the_split_rule(void) {
  tm t;
  make(&t, "torch");
  uintptr_t h[3];
  /* a 20 MiB segment: a 5 MiB block followed 0.5 MiB later by another: the gap could not have
   * been split off, so the first block is 5.5 MiB */
  sim_walk_item seg[3] = {
    {.is_segment = 1, .addr = BASE, .size = 20 * MiB, .pool = 1},
    {.addr = BASE, .requested = 5 * MiB, .state = SIM_BLOCK_ALLOCATED},
    {.addr = BASE + 5 * MiB + 512 * KiB, .size = 2 * MiB, .requested = 2 * MiB - 7, .state = SIM_BLOCK_ALLOCATED},
  };
  char err[SIM_ERRLEN];
  CHECK_EQ(t.a.ops->restore(t.a.ctx, seg, 3, h, err, sizeof err), SIM_OK);
  CHECK_EQ(seg[1].size, 5 * MiB + 512 * KiB);
  CHECK_STR(state(&t), "[20480K large: 5632Ka 2048Ka 12800Kf]");
  CHECK_EQ(t.st->allocated.current, 7 * MiB + 512 * KiB);
  CHECK_EQ(t.st->requested.current, 7 * MiB - 7);
  CHECK_EQ(t.st->reserved.current, 20 * MiB);
  /* a 3 MiB gap could have been: the block is its rounded request */
  sim_walk_item seg2[3] = {
    {.is_segment = 1, .addr = BASE + 64 * MiB, .size = 20 * MiB, .pool = 1, .stream = 2},
    {.addr = BASE + 64 * MiB, .requested = 5 * MiB - 100, .state = SIM_BLOCK_ALLOCATED},
    {.addr = BASE + 72 * MiB, .size = 512, .requested = 512, .state = SIM_BLOCK_PENDING_FREE},
  };
  CHECK_EQ(t.a.ops->restore(t.a.ctx, seg2, 3, h, err, sizeof err), SIM_OK);
  CHECK_EQ(seg2[1].size, 5 * MiB);
  t.a.ops->free_requested(t.a.ctx, h[1]);
  t.a.ops->free_completed(t.a.ctx, h[1]);
  t.a.ops->free_completed(t.a.ctx, h[2]); /* the waiting block completes */
  CHECK_STR(state(&t), "[20480K large: 5632Ka 2048Ka 12800Kf] [20480K large: 20480Kf]");
  sim_placement p;
  CHECK_EQ(A(&t, 20 * MiB, 2, &p), 64 * MiB); /* restored memory serves later requests */
  /* overlapping blocks are refused */
  sim_walk_item bad[3] = {
    {.is_segment = 1, .addr = BASE + 128 * MiB, .size = 2 * MiB, .pool = 0},
    {.addr = BASE + 128 * MiB, .size = 4096, .requested = 4096, .state = SIM_BLOCK_ALLOCATED},
    {.addr = BASE + 128 * MiB + 1024, .size = 512, .requested = 512, .state = SIM_BLOCK_ALLOCATED},
  };
  CHECK_EQ(t.a.ops->restore(t.a.ctx, bad, 3, h, err, sizeof err), SIM_EINVAL);
  CHECK(strstr(err, "overlaps") != NULL);
  done(&t);
}

static void restore_expandable_ranges(void) {
  tm t;
  make(&t, "torch:expandable_segments:True");
  uintptr_t h[2];
  char err[SIM_ERRLEN];
  sim_walk_item r1[2] = {
    {.is_segment = 1, .addr = BASE, .size = 40 * MiB, .pool = 1, .expandable = 1},
    {.addr = BASE, .size = 30 * MiB, .requested = 30 * MiB, .state = SIM_BLOCK_ALLOCATED},
  };
  sim_walk_item r2[2] = {
    {.is_segment = 1, .addr = BASE + 60 * MiB, .size = 20 * MiB, .pool = 1, .expandable = 1},
    {.addr = BASE + 60 * MiB, .size = 20 * MiB, .requested = 20 * MiB, .state = SIM_BLOCK_ALLOCATED},
  };
  CHECK_EQ(t.a.ops->restore(t.a.ctx, r1, 2, h, err, sizeof err), SIM_OK);
  CHECK_EQ(t.a.ops->restore(t.a.ctx, r2, 2, h, err, sizeof err), SIM_OK);
  CHECK_STR(state(&t), "[40960K large exp: 30720Ka 10240Kf] [20480K large exp: 20480Ka]");
  /* 15 MiB: 10 MiB free + the unmapped hole after it: one more page, at the hole */
  sim_placement p;
  CHECK_EQ(A(&t, 15 * MiB, 0, &p), 30 * MiB);
  CHECK_STR(t.dev.log, "map 20480K@40960K");
  CHECK_STR(state(&t), "[81920K large exp: 30720Ka 15360Ka 15360Kf 20480Ka]");
  done(&t);
}

/* Two mapped ranges of one expandable segment that meet (a store's rows may split what PyTorch's
 * snapshot gives as one contiguous run): the free blocks at the seam are one block, as PyTorch
 * always leaves free neighbours, whether the lower range comes first (as the engine and validate
 * restore them) or the upper one with its reservation's start given; a request that fits only
 * the two together takes them. fuzz_restore found them left apart, which the model's check
 * refuses. The upper range first without its reservation's start is a reservation of its own,
 * and the lower range's new one ends where it begins (reservations never overlap); a range
 * that would share addresses with a reservation restored before is refused. */
static void restore_expandable_ranges_that_meet(void) {
  for (int order = 0; order < 3; order++) {
    tm t;
    make(&t, "torch:expandable_segments:True");
    uintptr_t h[2];
    char err[SIM_ERRLEN];
    sim_walk_item lower[2] = {
      {.is_segment = 1, .addr = BASE, .size = 40 * MiB, .pool = 1, .expandable = 1},
      {.addr = BASE, .size = 30 * MiB, .requested = 30 * MiB, .state = SIM_BLOCK_ALLOCATED},
    };
    sim_walk_item upper[2] = {
      {.is_segment = 1, .addr = BASE + 40 * MiB, .size = 20 * MiB, .pool = 1, .expandable = 1},
      {.addr = BASE + 50 * MiB, .size = 10 * MiB, .requested = 10 * MiB, .state = SIM_BLOCK_ALLOCATED},
    };
    if (order == 1) upper[0].requested = BASE; /* where its reservation starts */
    CHECK_EQ(t.a.ops->restore(t.a.ctx, order ? upper : lower, 2, h, err, sizeof err), SIM_OK);
    CHECK_EQ(t.a.ops->restore(t.a.ctx, order ? lower : upper, 2, h, err, sizeof err), SIM_OK);
    CHECK_EQ(t.st->reserved.current, 60 * MiB);
    sim_placement p;
    if (order < 2) {
      CHECK_STR(state(&t), "[61440K large exp: 30720Ka 20480Kf 10240Ka]");
      CHECK_EQ(A(&t, 20 * MiB, 0, &p), 30 * MiB); /* the joined block, no new page */
      CHECK_STR(t.dev.log, "");
    } else {
      CHECK_STR(state(&t), "[40960K large exp: 30720Ka 10240Kf] [20480K large exp: 10240Kf 10240Ka]");
      CHECK_EQ(A(&t, 20 * MiB, 0, &p), 60 * MiB); /* the lower reservation is full: a page of the upper */
      CHECK_STR(t.dev.log, "map 20480K@61440K");
      sim_walk_item across[1] = {{.is_segment = 1, .addr = BASE - 20 * MiB, .size = 100 * MiB, .pool = 1, .expandable = 1}};
      CHECK_EQ(t.a.ops->restore(t.a.ctx, across, 1, h, err, sizeof err), SIM_EINVAL);
      CHECK(strstr(err, "overlaps the reservation") != NULL);
    }
    done(&t);
  }
}

/* B19: with expandable segments and max_split_size_mb, a failed map asks
 * release_available_cached_blocks for an oversize block; PyTorch passes over blocks of expandable
 * segments there (they are unmapped by release_cached_blocks instead). Releasing one as a whole
 * segment corrupted the model, which then looped in release_blocks. */
static void b19_expandable_max_split_roundup_release(void) {
  tm t;
  char err[SIM_ERRLEN];
  if (open_model(&t, "torch:expandable_segments:True,max_split_size_mb:40,roundup_power2_divisions:4", 250 * MiB,
                 80 * GiB, NULL, err, sizeof err)) {
    fprintf(stderr, "cannot make the model: %s\n", err);
    exit(1);
  }
  sim_placement a, b, c;
  CHECK_EQ(A(&t, 160 * MiB, 0, &a), 0); /* a division of 4 between 128 and 256 MiB: 8 pages */
  CHECK_EQ(A(&t, 20 * MiB, 0, &b), 160 * MiB);
  F(&t, &a);
  clear_log(&t);
  /* 60 MiB >= max_split: the free 160 MiB block is too large to take (60 + 20 < 160), the map of
   * 60 MiB after b is refused (250 MiB), so the retry passes over that block in
   * release_available_cached_blocks, unmaps it in release_cached_blocks and maps 60 MiB there */
  CHECK_EQ(A(&t, 60 * MiB, 0, &c), 0);
  CHECK_STR(t.dev.log, "refused map 81920K@184320K, unmap 163840K@0K, map 81920K@0K");
  CHECK_EQ(t.st->reserved.current, 100 * MiB); /* 64 MiB (rounded) in four pages, and b's page */
  CHECK_STR(state(&t), "[81920K large exp: 65536Ka 16384Kf] [20480K large exp: 20480Ka]");
  F(&t, &b);
  F(&t, &c);
  t.a.ops->empty_cache(t.a.ctx);
  CHECK_EQ(t.st->reserved.current, 0);
  done(&t);
}

/* A single request larger than the address space an expandable segment reserves (1 1/8 of the
 * card) runs past the reservation's last block: out of memory, as the driver's refusal to map it
 * makes it on a real GPU. */
/* ---- the free op: a request and its completion in one call ----------------------------------------- */

/* Two models fed the same allocations; one frees through `free`, the other through free_requested
 * then free_completed. Some requests wait (a stream holds the block) and complete later, by either
 * op; some handles are stale. After every step both hold the same blocks, statistics and device
 * calls, and their next allocations land at the same places. */
static void free_op_equals_request_then_completion(void) {
  static const char *specs[] = {"torch", "torch:expandable_segments:True", "torch:max_split_size_mb:40"};
  for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
    tm one, two;
    char err[SIM_ERRLEN];
    if (open_model(&one, specs[k], 512 * MiB, 80 * GiB, NULL, err, sizeof err) ||
        open_model(&two, specs[k], 512 * MiB, 80 * GiB, NULL, err, sizeof err)) {
      fprintf(stderr, "cannot make '%s': %s\n", specs[k], err);
      test_failures++;
      return;
    }
    void (*free_op)(void *, uintptr_t) = sim_allocator_free_op(one.a.ops);
    CHECK(free_op == one.a.ops->free && free_op != NULL);
    enum { LIVE_MAX = 24 };
    uintptr_t h1[LIVE_MAX], h2[LIVE_MAX], stale1 = 0, stale2 = 0;
    int waiting[LIVE_MAX], n = 0, ooms = 0;
    uint64_t x = 0x9e3779b97f4a7c15u + k;
    const int failures_before = test_failures; /* stops at its own first failure, not an earlier test's */
    for (int step = 0; step < 4000 && test_failures == failures_before; step++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      unsigned r = (unsigned)(x >> 40);
      if (n < LIVE_MAX && (r % 8 < 4 || n == 0)) { /* allocate: small, medium, large */
        uint64_t size = r % 3 == 0 ? 1 + (x >> 8) % MiB : r % 3 == 1 ? 1 + (x >> 8) % (12 * MiB) : 1 + (x >> 8) % (90 * MiB);
        int64_t stream = (x >> 20) % 5 == 0 ? 7 : 0;
        sim_placement p1, p2;
        int rc1 = one.a.ops->alloc(one.a.ctx, size, stream, &p1), rc2 = two.a.ops->alloc(two.a.ctx, size, stream, &p2);
        CHECK_EQ(rc1, rc2);
        if (rc1 == SIM_OK && rc2 == SIM_OK) {
          CHECK_EQ(p1.addr, p2.addr);
          CHECK_EQ(p1.size, p2.size);
          h1[n] = p1.handle, h2[n] = p2.handle, waiting[n] = 0, n++;
        } else {
          ooms++;
        }
      } else if (r % 8 < 7) { /* free one: at once, or its request only (a stream holds it) */
        int i = (int)((x >> 24) % (unsigned)n);
        if (!waiting[i] && r % 16 == 5) {
          one.a.ops->free_requested(one.a.ctx, h1[i]);
          two.a.ops->free_requested(two.a.ctx, h2[i]);
          waiting[i] = 1;
          continue;
        }
        free_op(one.a.ctx, h1[i]); /* a waiting one completes through it too */
        if (!waiting[i]) two.a.ops->free_requested(two.a.ctx, h2[i]);
        two.a.ops->free_completed(two.a.ctx, h2[i]);
        stale1 = h1[i], stale2 = h2[i];
        h1[i] = h1[n - 1], h2[i] = h2[n - 1], waiting[i] = waiting[n - 1], n--;
      } else { /* a stale handle: nothing happens */
        free_op(one.a.ctx, stale1);
        two.a.ops->free_requested(two.a.ctx, stale2);
        two.a.ops->free_completed(two.a.ctx, stale2);
      }
      char s1[2048];
      snprintf(s1, sizeof s1, "%s", state(&one));
      CHECK_STR(s1, state(&two));
      CHECK_STR(one.dev.log, two.dev.log);
      clear_log(&one), clear_log(&two);
      CHECK_EQ(one.st->allocated.current, two.st->allocated.current);
      CHECK_EQ(one.st->reserved.current, two.st->reserved.current);
      CHECK_EQ(one.st->active.current, two.st->active.current);
      CHECK_EQ(one.st->requested.current, two.st->requested.current);
      CHECK_EQ(one.st->allocated.peak, two.st->allocated.peak);
      CHECK_EQ(one.st->reserved.peak, two.st->reserved.peak);
      if (step % 500 == 0) {
        CHECK_EQ(one.a.ops->check(one.a.ctx, err, sizeof err), 0);
        CHECK_EQ(one.a.ops->largest_free(one.a.ctx), two.a.ops->largest_free(two.a.ctx));
      }
    }
    CHECK(ooms > 0); /* the capacity was reached: the paths that release cached blocks ran too */
    CHECK(one.st->num_frees > 1000);
    CHECK_EQ(one.st->num_frees, two.st->num_frees);
    done(&one);
    done(&two);
  }
}

static void null_next_request_larger_than_the_device(void) {
  tm t;
  make(&t, "torch:expandable_segments:True");
  CHECK_EQ(A(&t, 100 * GiB, 0, NULL), -1);
  CHECK_EQ(t.st->num_ooms, 1);
  sim_placement a;
  CHECK(A(&t, 16 * MiB, 0, &a) >= 0); /* the model is still whole */
  F(&t, &a);
  done(&t);
}

int main(void) {
  RUN(rounding_default);
  RUN(rounding_power2_divisions_single);
  RUN(rounding_power2_divisions_list);
  RUN(pools_and_segment_sizes);
  RUN(streams_have_their_own_pools);
  RUN(best_fit_smallest_then_lowest_address);
  RUN(split_rules_in_both_pools);
  RUN(frees_merge_with_free_neighbours);
  RUN(oversize_blocks);
  RUN(release_available_cached_blocks_frees_just_enough);
  RUN(oom_releases_cached_blocks_and_retries);
  RUN(empty_cache_releases_unsplit_blocks);
  RUN(gc_frees_old_blocks_above_the_threshold);
  RUN(memory_fraction_caps_the_allocator);
  RUN(expandable_segments_map_and_unmap_pages);
  RUN(expandable_best_fit_counts_room_to_grow);
  RUN(waiting_blocks_are_not_reused);
  RUN(stats_current_and_peak);
  RUN(bad_options_are_refused);
  RUN(recorded_settings_are_used_without_options);
  RUN(recorded_settings_are_flattened);
  RUN(restore_sizes_blocks_by_the_split_rule);
  RUN(restore_expandable_ranges);
  RUN(restore_expandable_ranges_that_meet);
  RUN(b19_expandable_max_split_roundup_release);
  RUN(null_next_request_larger_than_the_device);
  RUN(free_op_equals_request_then_completion);
  TEST_MAIN_END();
}

/* test_async.c: the `async` model: stream-ordered reuse, cross-stream rules, release at synchronization. */
#include "sim/allocator.h"
#include "sim/device_sim.h"
#include "test.h"

int test_failures;

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

typedef struct fx {
  sim_device dev;
  sim_spec spec;
  sim_allocator a;
  const sim_alloc_stats *st;
  char err[SIM_ERRLEN];
  int rc;
} fx;

static int fx_init(fx *f, const char *spec, uint64_t capacity) {
  memset(f, 0, sizeof *f);
  sim_simdev_init(&f->dev, capacity, 0);
  f->rc = sim_spec_parse(&f->spec, spec, f->err, sizeof f->err);
  if (f->rc == SIM_OK) f->rc = sim_allocator_init(&f->a, &f->spec, &f->dev, NULL, NULL, f->err, sizeof f->err);
  if (f->rc == SIM_OK) f->st = f->a.ops->stats(f->a.ctx);
  else if (!strchr(spec, '=')) fprintf(stderr, "cannot create '%s': %s\n", spec, f->err);
  return f->rc;
}

static void fx_release(fx *f) {
  if (f->rc == SIM_OK) sim_allocator_release(&f->a);
  sim_spec_release(&f->spec);
  sim_simdev_release(&f->dev);
}

static int fx_alloc(fx *f, uint64_t size, int64_t stream, sim_placement *p) {
  sim_placement tmp;
  return f->a.ops->alloc(f->a.ctx, size, stream, p ? p : &tmp);
}

static void fx_free(fx *f, const sim_placement *p) { f->a.ops->free_completed(f->a.ctx, p->handle); }
static void fx_sync(fx *f, int64_t stream) { f->a.ops->synchronize(f->a.ctx, stream); }

static void fx_check(fx *f) {
  char msg[SIM_ERRLEN];
  int rc = f->a.ops->check(f->a.ctx, msg, sizeof msg);
  if (rc) fprintf(stderr, "invariants: %s\n", msg);
  CHECK_EQ(rc, 0);
}

typedef struct walk_acc {
  size_t segments, blocks, pending, ready, used;
} walk_acc;

static int walk_fn(void *arg, const sim_walk_item *it) {
  walk_acc *w = arg;
  if (it->is_segment) {
    w->segments++;
    return 0;
  }
  w->blocks++;
  if (it->state == SIM_BLOCK_PENDING_FREE) w->pending++;
  else if (it->state == SIM_BLOCK_FREE) w->ready++;
  else w->used++;
  return 0;
}

static walk_acc fx_walk(fx *f) {
  walk_acc w;
  memset(&w, 0, sizeof w);
  CHECK_EQ(f->a.ops->walk(f->a.ctx, walk_fn, &w), 0);
  return w;
}

/* 512-byte granularity; the pool grows by the smallest multiple of 32 MiB that holds the request. */
static void pool_granularity_and_growth(void) {
  fx f;
  fx_init(&f, "async", UINT64_MAX);
  sim_placement a, b, c;
  CHECK_EQ(fx_alloc(&f, 12, 0, &a), SIM_OK);
  CHECK_EQ(a.size, 512);
  CHECK_EQ(f.st->reserved.current, 32 * MiB);
  CHECK_EQ(f.st->allocated.current, 512);
  CHECK_EQ(f.st->requested.current, 12);
  CHECK_EQ(fx_alloc(&f, 513, 0, &b), SIM_OK); /* from the same piece, right after a */
  CHECK_EQ(b.size, 1024);
  CHECK_EQ(b.addr, a.addr + 512);
  CHECK_EQ(fx_alloc(&f, 40 * MiB, 0, &c), SIM_OK); /* does not fit the rest: a 64 MiB piece */
  CHECK_EQ(f.st->reserved.current, 96 * MiB);
  CHECK_EQ(f.dev.mallocs, 2);
  CHECK_EQ(fx_walk(&f).segments, 2);
  fx_check(&f);
  fx_release(&f);
}

/* A free is ordered in its own stream: the next allocation there reuses it at once. */
static void reuse_within_stream(void) {
  fx f;
  fx_init(&f, "async", UINT64_MAX);
  sim_placement a, b;
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 7, &a), SIM_OK);
  fx_free(&f, &a);
  CHECK_EQ(fx_walk(&f).pending, 1);
  CHECK_EQ(f.st->active.current, 32 * MiB); /* freed, not yet reusable everywhere */
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 7, &b), SIM_OK);
  CHECK_EQ(b.addr, a.addr);
  CHECK_EQ(f.dev.mallocs, 1);
  CHECK_EQ(f.st->reserved.current, 32 * MiB);
  fx_check(&f);
  fx_release(&f);
}

/* Another stream cannot use the free until a synchronization shows it complete. */
static void cross_stream_needs_sync(void) {
  fx f;
  fx_init(&f, "async:release_threshold=max", UINT64_MAX);
  sim_placement a, b, c;
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 1, &a), SIM_OK);
  fx_free(&f, &a);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 2, &b), SIM_OK); /* not a's memory: the pool grows */
  CHECK(b.addr != a.addr);
  CHECK_EQ(f.st->reserved.current, 64 * MiB);
  fx_free(&f, &b);
  fx_sync(&f, 1); /* stream 1's free is complete */
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 3, &c), SIM_OK);
  CHECK(c.addr == a.addr || c.addr == b.addr);
  CHECK_EQ(f.st->reserved.current, 64 * MiB);
  fx_check(&f);
  fx_release(&f);
}

/* With the opportunistic policy off, only the synchronized stream's frees become available; with
 * it on (the default), a synchronization shows every earlier free complete. */
static void opportunistic_policy(void) {
  fx f;
  sim_placement a, b;
  fx_init(&f, "async:release_threshold=max,reuse_allow_opportunistic=false", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 1, &a), SIM_OK);
  fx_free(&f, &a);
  fx_sync(&f, 2); /* another stream: a's free stays pending */
  CHECK_EQ(fx_walk(&f).pending, 1);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 2, &b), SIM_OK);
  CHECK(b.addr != a.addr);
  fx_sync(&f, 1);
  CHECK_EQ(fx_walk(&f).pending, 0);
  fx_release(&f);

  fx_init(&f, "async:release_threshold=max", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 1, &a), SIM_OK);
  fx_free(&f, &a);
  fx_sync(&f, 2);
  CHECK_EQ(fx_walk(&f).pending, 0);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 2, &b), SIM_OK);
  CHECK_EQ(b.addr, a.addr);
  CHECK_EQ(f.st->reserved.current, 32 * MiB);
  fx_release(&f);

  /* a device-wide synchronization makes everything available, whatever the policy */
  fx_init(&f, "async:release_threshold=max,reuse_allow_opportunistic=false", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 1, &a), SIM_OK);
  fx_free(&f, &a);
  fx_sync(&f, -1);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 2, &b), SIM_OK);
  CHECK_EQ(b.addr, a.addr);
  fx_release(&f);
}

/* When the device refuses more memory, internal dependencies let a stream wait for another
 * stream's free and reuse it; with the policy off, the allocation fails. */
static void internal_dependencies(void) {
  fx f;
  sim_placement a, b;
  fx_init(&f, "async", 32 * MiB);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 1, &a), SIM_OK);
  fx_free(&f, &a);
  CHECK_EQ(fx_alloc(&f, 16 * MiB, 2, &b), SIM_OK);
  CHECK_EQ(b.addr, a.addr);
  CHECK_EQ(f.st->num_alloc_retries, 1);
  CHECK_EQ(fx_walk(&f).pending, 1); /* the other half is still stream 1's */
  fx_check(&f);
  fx_release(&f);

  fx_init(&f, "async:reuse_allow_internal_dependencies=false", 32 * MiB);
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 1, &a), SIM_OK);
  fx_free(&f, &a);
  CHECK_EQ(fx_alloc(&f, 16 * MiB, 2, &b), SIM_EOOM);
  CHECK_EQ(f.st->num_ooms, 1);
  char msg[SIM_ERRLEN];
  f.a.ops->describe_oom(f.a.ctx, 16 * MiB, 2, msg, sizeof msg);
  CHECK(strstr(msg, "cudaMallocAsync of 16777216 bytes on stream 2: out of memory") != NULL);
  CHECK(strstr(msg, "growing it by 33554432 bytes failed") != NULL);
  fx_sync(&f, 1); /* then it is available: threshold 0 gives the piece back, and the pool regrows */
  CHECK_EQ(f.st->reserved.current, 0);
  CHECK_EQ(fx_alloc(&f, 16 * MiB, 2, &b), SIM_OK);
  fx_release(&f);
}

/* Release threshold 0 (the default): at a synchronization, unused pieces go back to the device. */
static void release_at_sync_threshold_zero(void) {
  fx f;
  fx_init(&f, "async", UINT64_MAX);
  sim_placement a, b, c;
  CHECK_EQ(fx_alloc(&f, 10 * MiB, 0, &a), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 40 * MiB, 0, &b), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 512, 0, &c), SIM_OK); /* in the first piece */
  CHECK_EQ(f.st->reserved.current, 96 * MiB);
  fx_free(&f, &a);
  fx_free(&f, &b);
  CHECK_EQ(f.st->reserved.current, 96 * MiB); /* nothing before a synchronization */
  fx_sync(&f, 0);
  CHECK_EQ(f.st->reserved.current, 32 * MiB); /* the piece holding c stays */
  CHECK_EQ(f.dev.used, 32 * MiB);
  CHECK_EQ(f.dev.frees, 1);
  fx_free(&f, &c);
  fx_sync(&f, 0);
  CHECK_EQ(f.st->reserved.current, 0);
  CHECK_EQ(f.st->reserved.peak, 96 * MiB);
  CHECK_EQ(f.dev.used, 0);
  fx_check(&f);
  fx_release(&f);
}

/* A higher threshold: pieces go back, newest first, only while the pool holds more than it. */
static void release_at_sync_threshold(void) {
  fx f;
  fx_init(&f, "async:release_threshold=64MiB", UINT64_MAX);
  sim_placement p[3];
  for (int i = 0; i < 3; i++) CHECK_EQ(fx_alloc(&f, 32 * MiB, 0, &p[i]), SIM_OK);
  CHECK_EQ(f.st->reserved.current, 96 * MiB);
  for (int i = 0; i < 3; i++) fx_free(&f, &p[i]);
  fx_sync(&f, 0);
  CHECK_EQ(f.st->reserved.current, 64 * MiB);
  sim_placement q;
  CHECK_EQ(fx_alloc(&f, 32 * MiB, 5, &q), SIM_OK); /* the two oldest pieces survived: the lower */
  CHECK_EQ(q.addr, p[1].addr);                       /* of them (each new piece below the last) */
  CHECK(p[1].addr < p[0].addr);
  fx_release(&f);

  fx_init(&f, "async:release_threshold=max", UINT64_MAX);
  for (int i = 0; i < 3; i++) CHECK_EQ(fx_alloc(&f, 32 * MiB, 0, &p[i]), SIM_OK);
  for (int i = 0; i < 3; i++) fx_free(&f, &p[i]);
  fx_sync(&f, -1);
  CHECK_EQ(f.st->reserved.current, 96 * MiB);
  f.a.ops->empty_cache(f.a.ctx); /* torch.cuda.empty_cache: synchronize, trim to 0 */
  CHECK_EQ(f.st->reserved.current, 0);
  CHECK_EQ(f.dev.used, 0);
  fx_release(&f);
}

static int piece_addr(void *arg, const sim_walk_item *it) {
  uint64_t *v = arg;
  if (it->is_segment && v[0] < 7) v[++v[0]] = it->addr;
  return 0;
}

/* A piece taken where an older one was given back lies between older pieces: the walk still gives
 * the pieces in address order, and a release still gives back the newest first. Addresses going
 * down (the driver reuses the freed range) and up (never reused). */
static void pieces_walked_by_address_released_newest_first(void) {
  for (int order = 0; order < 2; order++) {
    fx f;
    fx_init(&f, "async:release_threshold=64MiB", UINT64_MAX);
    sim_simdev_set_va_order(&f.dev, order ? SIM_VA_UP : SIM_VA_DOWN);
    sim_placement a, b, c, d;
    CHECK_EQ(fx_alloc(&f, 32 * MiB, 0, &a), SIM_OK); /* a piece each */
    CHECK_EQ(fx_alloc(&f, 32 * MiB, 0, &b), SIM_OK);
    CHECK_EQ(fx_alloc(&f, 32 * MiB, 0, &c), SIM_OK);
    fx_free(&f, &b);
    fx_sync(&f, 0); /* b's piece goes back: 64 MiB kept */
    CHECK_EQ(f.st->reserved.current, 64 * MiB);
    CHECK_EQ(fx_alloc(&f, 32 * MiB, 0, &d), SIM_OK); /* the newest piece */
    if (!order) CHECK_EQ(d.addr, b.addr);            /* where b's was, between c's and a's */
    uint64_t v[8] = {0};
    CHECK_EQ(f.a.ops->walk(f.a.ctx, piece_addr, v), 0);
    CHECK_EQ(v[0], 3);
    CHECK(v[1] < v[2] && v[2] < v[3]);
    fx_free(&f, &a);
    fx_free(&f, &c);
    fx_free(&f, &d);
    fx_sync(&f, 0); /* all three empty: the newest (d's) goes back, then 64 MiB are kept */
    CHECK_EQ(f.st->reserved.current, 64 * MiB);
    memset(v, 0, sizeof v);
    CHECK_EQ(f.a.ops->walk(f.a.ctx, piece_addr, v), 0);
    CHECK_EQ(v[0], 2);
    uint64_t lo = a.addr < c.addr ? a.addr : c.addr, hi = a.addr < c.addr ? c.addr : a.addr;
    CHECK_EQ(v[1], lo);
    CHECK_EQ(v[2], hi);
    fx_check(&f);
    fx_release(&f);
  }
}

/* Best fit by size, then address, among the blocks the stream may use; merging only of blocks
 * the same streams may use. */
static void best_fit_and_merging(void) {
  fx f;
  fx_init(&f, "async:release_threshold=max", UINT64_MAX);
  sim_placement a, s1, b, s2, c, s3, x;
  CHECK_EQ(fx_alloc(&f, 4 * MiB, 0, &a), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 512, 0, &s1), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 2 * MiB, 0, &b), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 512, 0, &s2), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 2 * MiB, 0, &c), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 512, 0, &s3), SIM_OK);
  fx_free(&f, &a);
  fx_free(&f, &c);
  fx_free(&f, &b);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, 0, &x), SIM_OK); /* the smallest that fits, lowest address */
  CHECK_EQ(x.addr, b.addr);
  fx_check(&f);
  fx_release(&f);

  /* pending frees of two streams side by side do not merge; after a sync they do */
  fx_init(&f, "async:release_threshold=max,reuse_allow_opportunistic=false", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, 1, &a), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 1 * MiB, 2, &b), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 30 * MiB, 3, &c), SIM_OK); /* fills the piece */
  fx_free(&f, &a);
  fx_free(&f, &b);
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.pending, 2);
  fx_sync(&f, 1);
  fx_sync(&f, 2);
  w = fx_walk(&f);
  CHECK_EQ(w.pending, 0);
  CHECK_EQ(w.ready, 1);
  CHECK_EQ(f.a.ops->largest_free(f.a.ctx), 2 * MiB);
  fx_check(&f);
  fx_release(&f);
}

/* A free joins the free memory beside it at once, as the driver's pool measured on one stream
 * (docs/accuracy.md); the memory it joined is then its stream's own until a synchronization. */
static void free_joins_cached_memory(void) {
  fx f;
  sim_placement a, b, c, x, y;
  fx_init(&f, "async:release_threshold=max", UINT64_MAX);
  CHECK_EQ(fx_alloc(&f, 10 * MiB, 0, &a), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 10 * MiB, 0, &b), SIM_OK);
  CHECK_EQ(fx_alloc(&f, 12 * MiB, 0, &c), SIM_OK); /* fills the first piece */
  fx_free(&f, &a);
  fx_sync(&f, 0); /* a: free for every stream */
  fx_free(&f, &b); /* pending on stream 0, beside a */
  walk_acc w = fx_walk(&f);
  CHECK_EQ(w.pending, 1);
  CHECK_EQ(w.ready, 0);
  CHECK_EQ(f.a.ops->largest_free(f.a.ctx), 20 * MiB);
  CHECK_EQ(fx_alloc(&f, 20 * MiB, 0, &x), SIM_OK); /* stream 0 takes both at once: no growth */
  CHECK_EQ(x.addr, a.addr);
  CHECK_EQ(f.dev.mallocs, 1);
  fx_check(&f);
  fx_free(&f, &x);
  /* stream 1 may not use the joined memory before a synchronization, a's part included */
  CHECK_EQ(fx_alloc(&f, 5 * MiB, 1, &y), SIM_OK);
  CHECK_EQ(f.dev.mallocs, 2);
  CHECK(y.addr != a.addr);
  fx_sync(&f, -1);
  w = fx_walk(&f);
  CHECK_EQ(w.pending, 0);
  CHECK_EQ(w.ready, 2); /* the first piece's 20 MiB, the second's 27 MiB */
  fx_check(&f);
  fx_release(&f);
}

static void zero_and_overflow(void) {
  fx f;
  fx_init(&f, "async", UINT64_MAX);
  sim_placement p = {1, 1, 1};
  CHECK_EQ(fx_alloc(&f, 0, 0, &p), SIM_OK);
  CHECK_EQ(p.handle, 0);
  CHECK_EQ(f.st->num_allocs, 0);
  fx_free(&f, &p);
  CHECK_EQ(fx_alloc(&f, UINT64_MAX, 0, NULL), SIM_EOOM);
  CHECK_EQ(f.dev.mallocs, 0);
  CHECK_EQ(f.st->reserved.current, 0);
  fx_release(&f);
}

static void bad_options(void) {
  fx f;
  CHECK_EQ(fx_init(&f, "async:release_threshold=lots", UINT64_MAX), SIM_EINVAL);
  CHECK(strstr(f.err, "option 'release_threshold' wants a size") != NULL);
  fx_release(&f);
  CHECK_EQ(fx_init(&f, "async:reuse_allow_opportunistic=sometimes", UINT64_MAX), SIM_EINVAL);
  CHECK(strstr(f.err, "wants true or false") != NULL);
  fx_release(&f);
  CHECK_EQ(fx_init(&f, "async:threshold=1", UINT64_MAX), SIM_EINVAL);
  CHECK(strstr(f.err, "unknown option 'threshold' for allocator 'async' (accepted: release_threshold") != NULL);
  fx_release(&f);
}

/* A longer mixed workload on three streams keeps every invariant. */
typedef struct fit_probe {
  uint64_t rounded, best_size, best_addr;
  int64_t stream;
} fit_probe;

/* The best fit by the walk: the smallest free block the stream may use (ready memory, or its own
 * pending frees) that holds the request, the lowest address among equal sizes. */
static int best_by_walk(void *arg, const sim_walk_item *it) {
  fit_probe *q = arg;
  if (it->is_segment || it->size < q->rounded) return 0;
  if (it->state != SIM_BLOCK_FREE && !(it->state == SIM_BLOCK_PENDING_FREE && it->stream == q->stream)) return 0;
  if (!q->best_size || it->size < q->best_size || (it->size == q->best_size && it->addr < q->best_addr))
    q->best_size = it->size, q->best_addr = it->addr;
  return 0;
}

/* On a random workload over four streams, with synchronizations that make frees ready, every
 * allocation goes where a search of every free block the walk shows says it must: the model's
 * sets give the best fit a full search gives, or the pool grows when there is none. */
static void placement_is_the_walks_best_fit(void) {
  for (int policy = 0; policy < 2; policy++) {
    fx f;
    fx_init(&f, policy ? "async:reuse_allow_opportunistic=false" : "async", 64 * GiB);
    sim_placement live[512];
    size_t n = 0, fits = 0, growths = 0;
    uint64_t x = 7 + (uint64_t)policy;
    for (int i = 0; i < 30000; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      unsigned r = (unsigned)(x >> 33);
      if (n < 512 && (r % 5 < 3 || n == 0)) {
        uint64_t size = r % 7 ? (r >> 5) % (2 * MiB) + 1 : (r >> 5) % (48 * MiB) + 1;
        fit_probe q = {.rounded = (size + 511) / 512 * 512, .stream = (int64_t)(r >> 3 & 3)};
        CHECK_EQ(f.a.ops->walk(f.a.ctx, best_by_walk, &q), 0);
        int64_t reserved = f.st->reserved.current;
        CHECK_EQ(fx_alloc(&f, size, q.stream, &live[n]), SIM_OK);
        if (q.best_size) {
          CHECK_EQ(live[n].addr, q.best_addr);
          CHECK_EQ(f.st->reserved.current, reserved);
          fits++;
        } else {
          CHECK(f.st->reserved.current > reserved);
          growths++;
        }
        n++;
      } else {
        size_t k = r % n;
        fx_free(&f, &live[k]);
        live[k] = live[--n];
      }
      if (i % 61 == 0) fx_sync(&f, (int64_t)(r % 5) - 1);
    }
    fx_check(&f);
    CHECK(fits > 1000 && growths > 10);
    fx_release(&f);
  }
}

static void random_workload(void) {
  fx f;
  fx_init(&f, "async:release_threshold=100MiB", 2 * GiB);
  sim_placement live[256];
  int64_t streams[256];
  size_t n = 0;
  uint64_t x = 42;
  for (int i = 0; i < 20000; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    unsigned r = (unsigned)(x >> 33);
    if (n < 256 && (r % 3 || n == 0)) {
      int64_t s = (int64_t)(r % 3);
      uint64_t size = (r >> 4) % (8 * MiB) + 1;
      if (fx_alloc(&f, size, s, &live[n]) == SIM_OK) streams[n++] = s;
    } else {
      size_t k = r % n;
      fx_free(&f, &live[k]);
      live[k] = live[--n];
      streams[k] = streams[n];
    }
    if (i % 500 == 0) fx_sync(&f, (int64_t)(r % 4) - 1);
    if (i % 97 == 0) fx_check(&f);
  }
  fx_check(&f);
  for (size_t i = 0; i < n; i++) fx_free(&f, &live[i]);
  fx_sync(&f, -1);
  CHECK(f.st->reserved.current <= (int64_t)(100 * MiB));
  CHECK_EQ(f.st->allocated.current, 0);
  fx_release(&f);
  (void)streams;
}

int main(void) {
  RUN(pool_granularity_and_growth);
  RUN(reuse_within_stream);
  RUN(cross_stream_needs_sync);
  RUN(opportunistic_policy);
  RUN(internal_dependencies);
  RUN(release_at_sync_threshold_zero);
  RUN(release_at_sync_threshold);
  RUN(pieces_walked_by_address_released_newest_first);
  RUN(best_fit_and_merging);
  RUN(free_joins_cached_memory);
  RUN(zero_and_overflow);
  RUN(bad_options);
  RUN(random_workload);
  RUN(placement_is_the_walks_best_fit);
  TEST_MAIN_END();
}

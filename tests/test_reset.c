/* test_reset.c: every allocator model's reset op: a replay after a reset is the replay of a new instance. */
#include <unistd.h>

#include "gen/gen.h"
#include "import/importer.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"
#include "store/store.h"
#include "test.h"

int test_failures;

/*
 * Each model, with options that reach its other paths (expandable segments, oversize blocks and
 * garbage collection, growth, a release threshold), replays a trace on a new instance, on a
 * device with no limit and (generated traces) with one below the trace's peak (out of memory,
 * cache flushes, retries); what it did is written down as a transcript of numbers: each placement, each
 * refusal and its message, the largest free block every few events, then the statistics, the
 * device's counters and the walk of segments and blocks. The same instance is then reset (with
 * its device) after replaying another trace, and must write the same transcript again, twice;
 * and so must an instance made for the other capacity on another card, reset, its device resized
 * to this one and the model told (device_changed).
 */

static const char *const specs[] = {
  "ideal",
  "cuda",
  "torch",
  "torch:expandable_segments:True",
  "torch:max_split_size_mb:40,garbage_collection_threshold:0.5,per_process_memory_fraction:0.9",
  "torch:roundup_power2_divisions:4",
  "bfc",
  "bfc:allow_growth=true",
  "async",
  "async:release_threshold=max,reuse_allow_opportunistic=false",
};

#define TOTAL_MEMORY (UINT64_C(80) << 30)

typedef struct events {
  sim_event *ev;
  size_t n, cap;
} events;

typedef struct transcript {
  uint64_t *v;
  size_t n, cap;
} transcript;

static void put(transcript *t, uint64_t x) {
  sim_grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v);
  t->v[t->n++] = x;
}

static void put_text(transcript *t, const char *s) {
  uint64_t h = UINT64_C(1469598103934665603);
  for (; *s; s++) h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  put(t, h);
}

static int walk_item(void *arg, const sim_walk_item *it) {
  transcript *t = arg;
  put(t, (uint64_t)it->is_segment);
  put(t, it->addr);
  put(t, it->size);
  put(t, it->requested);
  put(t, (uint64_t)it->stream);
  put(t, (uint64_t)it->state << 8 | (uint64_t)it->pool << 4 | (uint64_t)it->expandable);
  return 0;
}

/* Replays evs through a's model as the engine does (a refused request is dropped, its frees
 * ignored), writing what happened into t. */
static void replay(sim_allocator *a, const events *evs, transcript *t) {
  const sim_allocator_ops *ops = a->ops;
  sim_map live;
  sim_map_init(&live);
  for (size_t i = 0; i < evs->n; i++) {
    const sim_event *ev = &evs->ev[i];
    uint64_t *h, handle;
    switch (ev->kind) {
    case SIM_EV_ALLOC: {
      int existed;
      if (sim_map_get(&live, ev->addr)) break;
      sim_placement pl = {0, 0, 0};
      int rc = ops->alloc(a->ctx, ev->size, ev->stream, &pl);
      put(t, (uint64_t)rc);
      if (rc == SIM_OK) {
        put(t, pl.addr);
        put(t, pl.size);
        *sim_map_put(&live, ev->addr, &existed) = pl.handle;
      } else {
        char msg[1024];
        ops->describe_oom(a->ctx, ev->size, ev->stream, msg, sizeof msg);
        put_text(t, msg);
      }
      break;
    }
    case SIM_EV_FREE_REQUESTED:
      if ((h = sim_map_get(&live, ev->addr)) && ops->free_requested) ops->free_requested(a->ctx, *h);
      break;
    case SIM_EV_FREE:
    case SIM_EV_FREE_COMPLETED:
      if (!sim_map_del(&live, ev->addr, &handle)) break;
      if (ev->kind == SIM_EV_FREE && ops->free_requested) ops->free_requested(a->ctx, handle);
      ops->free_completed(a->ctx, handle);
      break;
    case SIM_EV_SYNC:
      if (ops->synchronize) ops->synchronize(a->ctx, ev->stream);
      break;
    case SIM_EV_EMPTY_CACHE:
      if (ops->empty_cache) ops->empty_cache(a->ctx);
      break;
    default: break;
    }
    if (i % 97 == 0) put(t, ops->largest_free(a->ctx));
  }
  sim_map_release(&live);
  const sim_alloc_stats *st = ops->stats(a->ctx);
#define SIM_X(n) put(t, (uint64_t)st->n.current), put(t, (uint64_t)st->n.peak);
  SIM_ALLOC_GAUGES(SIM_X)
#undef SIM_X
#define SIM_X(n) put(t, st->n);
  SIM_ALLOC_COUNTERS(SIM_X)
#undef SIM_X
  const sim_device *d = a->dev;
  uint64_t dev[] = {d->mallocs, d->frees, d->maps, d->unmaps, d->malloc_bytes, d->free_bytes,
                    d->map_bytes, d->unmap_bytes, d->used, d->used_peak};
  for (size_t k = 0; k < sizeof dev / sizeof *dev; k++) put(t, dev[k]);
  put(t, ops->largest_free(a->ctx));
  if (ops->walk) ops->walk(a->ctx, walk_item, t);
  if (ops->check) {
    char err[SIM_ERRLEN];
    CHECK_EQ(ops->check(a->ctx, err, sizeof err), 0);
  }
}

static int same(const transcript *a, const transcript *b, const char *spec, const char *what) {
  size_t i = 0;
  while (i < a->n && i < b->n && a->v[i] == b->v[i]) i++;
  if (i == a->n && i == b->n) return 1;
  fprintf(stderr, "  %s, %s: transcripts differ at entry %zu of %zu/%zu\n", spec, what, i, a->n, b->n);
  return 0;
}

/* A new instance's transcript of evs on a device of `capacity`. */
static void fresh(const sim_spec *spec, const events *evs, uint64_t capacity, transcript *t) {
  char err[SIM_ERRLEN];
  sim_device dev;
  sim_allocator a;
  sim_simdev_init(&dev, capacity, TOTAL_MEMORY);
  if (sim_allocator_init(&a, spec, &dev, NULL, NULL, err, sizeof err) != SIM_OK) {
    fprintf(stderr, "%s\n", err);
    test_failures++;
    sim_simdev_release(&dev);
    return;
  }
  replay(&a, evs, t);
  sim_allocator_release(&a);
  sim_simdev_release(&dev);
}

/* Resets a and its device; `restored` bytes were installed by restore, not taken from the device.
 * clearing: the device is told first that it is reset next, as the engine tells a kept model's. */
static void reset_as(sim_allocator *a, uint64_t restored, int clearing) {
  CHECK(sim_allocator_can_reset(a->ops));
  if (clearing) sim_simdev_clearing(a->dev);
  uint64_t frees = a->dev->frees, unmaps = a->dev->unmaps;
  CHECK_EQ(a->ops->reset(a->ctx), SIM_OK);
  if (clearing) { /* nothing was handed back: the device forgets it all */
    CHECK_EQ(a->dev->frees, frees);
    CHECK_EQ(a->dev->unmaps, unmaps);
  } else { /* every segment went back to the device (one unmap may cover pages mapped apart) */
    CHECK_EQ(a->dev->free_bytes, a->dev->malloc_bytes + restored);
    CHECK_EQ(a->dev->unmap_bytes, a->dev->map_bytes);
  }
  sim_simdev_reset(a->dev);
  CHECK_EQ(a->dev->clearing, 0);
  const sim_alloc_stats *st = a->ops->stats(a->ctx);
  CHECK_EQ(st->reserved.peak, 0);
  CHECK_EQ(st->num_allocs, 0);
}

static void reset(sim_allocator *a, uint64_t restored) { reset_as(a, restored, 0); }

/* For each model: evs on a new instance; then on one instance, `other` (to leave a state behind),
 * reset, evs, reset, evs, reset with the device clearing, evs. Each capacity: none, and (rounds 2) three quarters of the peak the
 * model reached, where requests fail and caches are flushed (in the checked builds each flush
 * runs the model's full check, so the real traces, which fail thousands of requests so, run
 * without a capacity only). */
static void check_trace(const events *evs, const events *other, const char *what, int rounds) {
  for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
    char err[SIM_ERRLEN];
    sim_spec spec;
    if (sim_spec_parse(&spec, specs[k], err, sizeof err) != SIM_OK) {
      fprintf(stderr, "%s\n", err);
      test_failures++;
      continue;
    }
    uint64_t capacity = UINT64_MAX;
    for (int round = 0; round < rounds; round++) {
      transcript want = {0}, got = {0}, before = {0};
      fresh(&spec, evs, capacity, &want);
      sim_device dev;
      sim_allocator a;
      sim_simdev_init(&dev, capacity, TOTAL_MEMORY);
      CHECK_EQ(sim_allocator_init(&a, &spec, &dev, NULL, NULL, err, sizeof err), SIM_OK);
      replay(&a, other, &before);
      for (int again = 0; again < 3; again++) { /* the last with the device clearing */
        reset_as(&a, 0, again == 2);
        got.n = 0;
        replay(&a, evs, &got);
        CHECK(same(&want, &got, specs[k], what));
      }
      uint64_t peak = (uint64_t)a.ops->stats(a.ctx)->reserved.peak;
      sim_allocator_release(&a);
      sim_simdev_release(&dev);
      /* a model made for another capacity on a card of half the memory, reset, its device given
       * this capacity and card and the model told: the same again (and the reverse: one made for
       * this capacity replays the next round's) */
      uint64_t other_capacity = round ? UINT64_MAX : peak / 4 * 3;
      sim_simdev_init(&dev, other_capacity, TOTAL_MEMORY / 2);
      CHECK_EQ(sim_allocator_init(&a, &spec, &dev, NULL, NULL, err, sizeof err), SIM_OK);
      before.n = 0;
      replay(&a, evs, &before);
      reset(&a, 0);
      CHECK(sim_allocator_can_follow_device(a.ops));
      sim_simdev_resize(&dev, capacity, TOTAL_MEMORY);
      CHECK_EQ(a.ops->device_changed(a.ctx), SIM_OK);
      got.n = 0;
      replay(&a, evs, &got);
      CHECK(same(&want, &got, specs[k], round ? "made unlimited, resized to a capacity" : "made with a capacity, resized to none"));
      sim_allocator_release(&a);
      sim_simdev_release(&dev);
      capacity = peak / 4 * 3;
      free(want.v);
      free(got.v);
      free(before.v);
    }
    sim_spec_release(&spec);
  }
}

static void generated(events *evs, uint64_t n, uint64_t seed) {
  gen_config gc = {n, seed, 0};
  gen *g = gen_new(&gc);
  replay_source src = gen_source(g);
  sim_event ev;
  while (evs->n < n && replay_source_next(&src, &ev) > 0) {
    sim_grow((void **)&evs->ev, &evs->cap, evs->n + 1, sizeof *evs->ev);
    evs->ev[evs->n++] = ev;
  }
  gen_free(g);
}

static void generated_traces(void) {
  events a = {0}, b = {0};
  generated(&a, 15000, 1);
  generated(&b, 5000, 7);
  check_trace(&a, &b, "generated", 2);
  free(a.ev);
  free(b.ev);
}

/* Imports a real trace into s and reads its events; 0, or -1 (a failure is counted). */
static int real_trace(store *s, const char *dir, const char *file, events *evs) {
  char path[1024];
  snprintf(path, sizeof path, "%s/pytorch/%s", dir, file);
  import_ctx ctx = {.s = s, .path = path, .name = file};
  if (import_file(&ctx, NULL)) {
    fprintf(stderr, "%s\n", ctx.err);
    test_failures++;
    return -1;
  }
  store_trace t;
  CHECK_EQ(store_trace_find(s, file, &t), 0);
  store_reader *r;
  CHECK_EQ(store_reader_open(s, t.id, &r), 0);
  sim_event ev;
  int rc;
  while ((rc = store_reader_next(r, &ev)) > 0) {
    sim_grow((void **)&evs->ev, &evs->cap, evs->n + 1, sizeof *evs->ev);
    evs->ev[evs->n++] = ev;
  }
  CHECK_EQ(rc, 0);
  store_reader_close(r);
  store_trace_clear(&t);
  CHECK(evs->n > 1000);
  return 0;
}

static void real_traces(void) {
  const char *dir = getenv("MEMPLAY_TRACES");
  char file[1024];
  snprintf(file, sizeof file, "%s/pytorch/kk_ctx128_fullstep.pickle", dir ? dir : "");
  if (!dir || !*dir || access(file, R_OK)) {
    fprintf(stderr, "  no real traces (MEMPLAY_TRACES): only generated ones\n");
    return;
  }
  const char *tmp = getenv("TMPDIR");
  char db[1024], err[STORE_ERRLEN];
  snprintf(db, sizeof db, "%s/memplay-reset-%ld.db", tmp && *tmp ? tmp : "/tmp", (long)getpid());
  store *s;
  if (store_open(&s, db, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    test_failures++;
    return;
  }
  events kk = {0}, bolong = {0};
  if (!real_trace(s, dir, "kk_ctx128_fullstep.pickle", &kk) &&
      !real_trace(s, dir, "bolong_expandable_fwd_ctx128_fp32.pickle", &bolong)) {
    check_trace(&kk, &bolong, "kk_ctx128_fullstep", 1);
    check_trace(&bolong, &kk, "bolong_expandable_fwd_ctx128_fp32", 1);
  }
  free(kk.ev);
  free(bolong.ev);
  store_close(s);
  const char *suffix[] = {"", "-wal", "-shm"};
  for (int i = 0; i < 3; i++) {
    char p[1100];
    snprintf(p, sizeof p, "%s%s", db, suffix[i]);
    unlink(p);
  }
}

/* State that `restore` installed (a recorded window's start: validate) is handed back and
 * forgotten by a reset like any other. */
static void restored_state(void) {
  static const char *const restorable[] = {"torch", "bfc"};
  events evs = {0};
  generated(&evs, 8000, 3);
  for (size_t k = 0; k < sizeof restorable / sizeof *restorable; k++) {
    char err[SIM_ERRLEN];
    sim_spec spec;
    CHECK_EQ(sim_spec_parse(&spec, restorable[k], err, sizeof err), SIM_OK);
    transcript want = {0}, got = {0};
    fresh(&spec, &evs, UINT64_MAX, &want);
    sim_device dev;
    sim_allocator a;
    sim_simdev_init(&dev, UINT64_MAX, TOTAL_MEMORY);
    CHECK_EQ(sim_allocator_init(&a, &spec, &dev, NULL, NULL, err, sizeof err), SIM_OK);
    uint64_t base = UINT64_C(0x10000000), mib = UINT64_C(1) << 20;
    sim_walk_item items[2] = {
      {.is_segment = 1, .addr = base, .size = 20 * mib, .pool = 1},
      {.addr = base, .requested = 5 * mib, .state = SIM_BLOCK_ALLOCATED},
    };
    uintptr_t handles[2];
    CHECK_EQ(a.ops->restore(a.ctx, items, 2, handles, err, sizeof err), SIM_OK);
    sim_simdev_hold(&dev, base, 20 * mib, 20 * mib);
    reset(&a, 20 * mib);
    replay(&a, &evs, &got);
    CHECK(same(&want, &got, restorable[k], "after a restore"));
    sim_allocator_release(&a);
    sim_simdev_release(&dev);
    sim_spec_release(&spec);
    free(want.v);
    free(got.v);
  }
  free(evs.ev);
}

/* The simulated device after a reset hands out what a new one does. */
static void device_reset(void) {
  sim_device a, b;
  sim_simdev_init(&a, 64 << 20, 0);
  sim_simdev_init(&b, 64 << 20, 0);
  uint64_t x, y, p, q;
  CHECK_EQ(sim_device_malloc(&a, 4096, 0, &x), SIM_OK);
  CHECK_EQ(sim_device_malloc(&a, 4 << 20, 0, &y), SIM_OK);
  CHECK_EQ(sim_device_reserve(&a, 8 << 20, &y), SIM_OK);
  CHECK_EQ(sim_device_map(&a, y, 2 << 20, 0), SIM_OK);
  sim_simdev_reset(&a);
  CHECK_EQ(a.used, 0);
  CHECK_EQ(a.used_peak, 0);
  CHECK_EQ(a.mallocs + a.maps + a.malloc_bytes + a.map_bytes, 0);
  CHECK_EQ(a.capacity, 64 << 20);
  CHECK_EQ(sim_device_malloc(&a, 4096, 0, &x), SIM_OK);
  CHECK_EQ(sim_device_malloc(&b, 4096, 0, &p), SIM_OK);
  CHECK_EQ(x, p);
  CHECK_EQ(sim_device_malloc(&a, 4096, 0, &y), SIM_OK);
  CHECK_EQ(sim_device_malloc(&b, 4096, 0, &q), SIM_OK);
  CHECK_EQ(y, q); /* packed into the same page */
  sim_simdev_release(&a);
  sim_simdev_release(&b);
}

int main(void) {
  RUN(device_reset);
  RUN(generated_traces);
  RUN(real_traces);
  RUN(restored_state);
  TEST_MAIN_END();
}

/* fuzz_resume.c: libFuzzer harness for a model's state walked and restored into a new instance: the new one must go on making the old one's decisions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_model.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"

/*
 * `memplay validate` and the replay of a recorded window start a model from a state: the segments
 * and live blocks a snapshot recorded, given to the model's restore op. The state a model walks
 * (the walk op: what `replay --at` shows) is such a state, so a model's own state, walked and
 * restored into a new instance, must carry everything its decisions depend on while its
 * segments stay as they are: which free block an allocation takes, how it splits, how frees
 * merge.
 *
 * The input is SPEC '\n', then a byte that says how many of the steps that follow run before the
 * walk, then steps of 3 bytes on a 1 GiB simulated device: an allocation on one of four streams
 * (a byte to 4 MiB, or to 512 MiB as a bit says), a free of a live allocation at once, its
 * request alone (the block then waits in the models that keep such blocks), the completion of
 * one requested, a synchronization of a stream or the device, a release of the cache. At the
 * walk, a new instance restores each segment with its allocated and waiting blocks (held on its
 * own device, as the engine's start does); its figures must equal the first one's. Then both
 * take the remaining steps, and each answer must be the same: the same placement or both out of
 * memory, a call to the device by both or by neither, and the same allocated, requested and
 * reserved bytes after each step, until both call their devices (a new segment, a release: the
 * two devices' address spaces are not the same, and where the driver puts a new segment is the
 * device's choice, not the model's) or run out of memory (which releases cached segments).
 * Models without a walk or a restore are left out.
 */

#define MAX_LIVE 32
#define MAX_ITEMS 4096

typedef struct instance {
  sim_device dev;
  sim_allocator a;
  uintptr_t live[MAX_LIVE], requested[MAX_LIVE];
  int nlive, nrequested;
} instance;

/* What the walk gives, in order. */
typedef struct walk_buf {
  sim_walk_item it[MAX_ITEMS];
  size_t n;
  const char *model;
} walk_buf;

static int collect(void *arg, const sim_walk_item *item) {
  walk_buf *w = arg;
  if (w->n == MAX_ITEMS) return 1;
  if (item->is_segment || item->state != SIM_BLOCK_FREE) w->it[w->n++] = *item;
  return 0;
}

static uint64_t device_calls(const sim_device *d) { return d->mallocs + d->frees + d->maps + d->unmaps; }

static void same(const char *what, long long x, long long y, const char *model) {
  if (x == y) return;
  fprintf(stderr, "fuzz_resume: under %s, %s: %lld in the instance walked, %lld in the one restored from it\n", model,
          what, x, y);
  abort();
}

static void same_figures(const instance *x, const instance *y, const char *model) {
  const sim_alloc_stats *s = x->a.ops->stats(x->a.ctx), *t = y->a.ops->stats(y->a.ctx);
  same("allocated bytes", s->allocated.current, t->allocated.current, model);
  same("requested bytes", s->requested.current, t->requested.current, model);
  same("reserved bytes", s->reserved.current, t->reserved.current, model);
  same("largest free block", (long long)x->a.ops->largest_free(x->a.ctx), (long long)y->a.ops->largest_free(y->a.ctx),
       model);
}

/* One step on an instance: 0, 1 when an allocation did not fit; placement in *pl. */
static int step(instance *in, const uint8_t *p, uintptr_t h_of_live, uintptr_t h_of_req, sim_placement *pl) {
  sim_allocator *a = &in->a;
  memset(pl, 0, sizeof *pl);
  switch (p[0] & 7) {
  case 0: case 1: case 2: {
    uint64_t size = ((uint64_t)p[1] << (p[2] % (p[0] & 0x20 ? 22 : 14))) + p[2]; /* mostly up to 4 MiB */
    if (a->ops->alloc(a->ctx, size, p[0] >> 6, pl) != SIM_OK) return 1;
    if (in->nlive < MAX_LIVE) in->live[in->nlive++] = pl->handle;
    else free_now(a, pl->handle, 1);
    return 0;
  }
  case 3: /* a free at once */
    free_now(a, h_of_live, p[0] & 8);
    return 0;
  case 4: /* a request alone */
    if (a->ops->free_requested) a->ops->free_requested(a->ctx, h_of_live);
    else a->ops->free_completed(a->ctx, h_of_live);
    return 0;
  case 5: /* a completion of a request */
    if (a->ops->free_requested) a->ops->free_completed(a->ctx, h_of_req);
    return 0;
  default: /* a synchronization, or now and then a release of the cache */
    if ((p[1] & 0x18) == 0x18 && a->ops->empty_cache) a->ops->empty_cache(a->ctx);
    else if (a->ops->synchronize) a->ops->synchronize(a->ctx, p[1] & 4 ? -1 : p[1] & 3);
    return 0;
  }
}

/* Which live or requested handle a step names (its index in the lists), and whether it can run. */
static int pick(const instance *in, const uint8_t *p, int *li, int *ri) {
  int op = p[0] & 7;
  *li = in->nlive ? p[1] % in->nlive : -1;
  *ri = in->nrequested ? p[1] % in->nrequested : -1;
  if ((op == 3 || op == 4) && *li < 0) return 0;
  if (op == 5 && *ri < 0) return 0;
  if (op == 4 && in->nrequested == MAX_LIVE) return 0;
  return 1;
}

/* The lists after a step that freed or requested. */
static void after(instance *in, const uint8_t *p, int li, int ri) {
  int op = p[0] & 7;
  if (op == 4 && in->a.ops->free_requested) in->requested[in->nrequested++] = in->live[li];
  if (op == 3 || op == 4) in->live[li] = in->live[--in->nlive];
  if (op == 5) in->requested[ri] = in->requested[--in->nrequested];
}

static void check(const instance *in, const char *model) {
  char err[512];
  if (in->a.ops->check && in->a.ops->check(in->a.ctx, err, sizeof err)) {
    fprintf(stderr, "fuzz_resume: under %s, the model's check failed: %s\n", model, err);
    abort();
  }
}

/* The index of the walked block the old instance's handle h names, or -1 (a request a
 * synchronization completed since: its handle is stale, and a completion of it does nothing). */
static long walked_index(const walk_buf *w, uintptr_t h) {
  for (size_t i = 0; i < w->n; i++)
    if (!w->it[i].is_segment && w->it[i].handle == h) return (long)i;
  return -1;
}

/* The handle the new instance gave the block the old one's live handle h holds. */
static uintptr_t mapped(const walk_buf *w, const uintptr_t *nh, uintptr_t h) {
  if (!h) return 0; /* a request of 0 bytes holds no block */
  long i = walked_index(w, h);
  if (i >= 0) return nh[i];
  fprintf(stderr, "fuzz_resume: under %s, the walk did not give live handle %#lx\n", w->model, (unsigned long)h);
  abort();
}

/* Restores x's walked state into y (a refusal is a finding), and gives y the handles of x's live
 * and requested blocks at the same places in its lists. */
static void restore_into(instance *y, instance *x, walk_buf *w, const char *model) {
  static uintptr_t nh[MAX_ITEMS];
  char err[512] = "";
  for (size_t s = 0; s < w->n;) {
    size_t e = s + 1;
    while (e < w->n && !w->it[e].is_segment) e++;
    sim_walk_item *seg = &w->it[s];
    uint64_t addr = seg->addr, size = seg->size;
    if (y->a.ops->restore(y->a.ctx, seg, e - s, nh + s, err, sizeof err) != SIM_OK) {
      fprintf(stderr, "fuzz_resume: under %s, the restore refused a walked segment: %s\n", model, err);
      abort();
    }
    sim_simdev_hold(&y->dev, addr, size, size);
    s = e;
  }
  for (int i = 0; i < x->nlive; i++) y->live[i] = mapped(w, nh, x->live[i]);
  y->nlive = x->nlive;
  y->nrequested = 0;
  for (int i = 0; i < x->nrequested; i++) { /* stale handles are left out of both */
    long k = walked_index(w, x->requested[i]);
    if (k < 0) continue;
    x->requested[y->nrequested] = x->requested[i];
    y->requested[y->nrequested++] = nh[k];
  }
  x->nrequested = y->nrequested;
}

static int open_instance(instance *in, const sim_spec *spec) {
  char err[512];
  sim_recorded none = {0};
  memset(in, 0, sizeof *in);
  sim_simdev_init(&in->dev, UINT64_C(1) << 30, UINT64_C(1) << 30);
  if (sim_allocator_init(&in->a, spec, &in->dev, &none, no_env, err, sizeof err) == SIM_OK) return 0;
  sim_simdev_release(&in->dev);
  return -1;
}

static void close_instance(instance *in) {
  sim_allocator_release(&in->a);
  sim_simdev_release(&in->dev);
}

static walk_buf w;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size;
  char *spec_text = take_line(&p, end);
  char err[512];
  sim_spec spec;
  memset(&spec, 0, sizeof spec);
  static instance x, y;
  if (p >= end || sim_spec_parse(&spec, spec_text, err, sizeof err) != SIM_OK) goto out;
  if (open_instance(&x, &spec)) goto out;
  const char *model = x.a.ops->name;
  int before = *p++;
  int li, ri;
  sim_placement pl, ql;
  for (int k = 0; k < before && p + 3 <= end; k++, p += 3) {
    if (!pick(&x, p, &li, &ri)) continue;
    step(&x, p, li >= 0 ? x.live[li] : 0, ri >= 0 ? x.requested[ri] : 0, &pl);
    after(&x, p, li, ri);
  }
  w.n = 0;
  w.model = model;
  if (!x.a.ops->walk || !x.a.ops->restore || x.a.ops->walk(x.a.ctx, collect, &w) ||
      open_instance(&y, &spec)) {
    close_instance(&x);
    goto out;
  }
  restore_into(&y, &x, &w, model);
  check(&y, model);
  same_figures(&x, &y, model);
  same("device memory in use", (long long)x.dev.used, (long long)y.dev.used, model);
  uint64_t calls_x = device_calls(&x.dev), calls_y = device_calls(&y.dev);
  for (; p + 3 <= end; p += 3) {
    if (!pick(&x, p, &li, &ri)) continue;
    int oom = step(&x, p, li >= 0 ? x.live[li] : 0, ri >= 0 ? x.requested[ri] : 0, &pl);
    int oom_y = step(&y, p, li >= 0 ? y.live[li] : 0, ri >= 0 ? y.requested[ri] : 0, &ql);
    int called = device_calls(&x.dev) != calls_x;
    same("whether a step called the device", called, device_calls(&y.dev) != calls_y, model);
    same("whether an allocation fit", !oom, !oom_y, model);
    if (called || oom) break;
    same("an allocation's address", (long long)pl.addr, (long long)ql.addr, model);
    same("an allocation's size", (long long)pl.size, (long long)ql.size, model);
    after(&x, p, li, ri);
    after(&y, p, li, ri);
    same_figures(&x, &y, model);
  }
  check(&y, model);
  close_instance(&y);
  close_instance(&x);
out:
  sim_spec_release(&spec);
  free(spec_text);
  return 0;
}

/* bench_reset.c: what a model costs a replay before its first event: a new instance against a reset one (prints a table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen/gen.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"

/*
 * usage: bench_reset [EVENTS] [REPLAYS] [SPEC,...]   (default 100, 2000, every model)
 *
 * A session that replays one short trace thousands of times (a Lua loop, a comparison) pays,
 * per replay, for the allocator model as well as for the events: either a new instance on a new
 * simulated device (create, replay, destroy) or the same instance returned to its first state
 * (replay, reset, sim_simdev_reset). For each model this replays the first EVENTS events of the
 * generated training trace (seed 1) REPLAYS times each way, calling the model directly, and
 * prints the CPU time per replay of each way and their difference: what a reset saves each
 * replay. Best of three rounds by CPU time (getrusage of the process: another process on the
 * machine disturbs it less than wall time).
 */

#define TOTAL_MEMORY UINT64_C(85520809984) /* what `memplay bench` gives the models */

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct trace {
  sim_event *ev;
  size_t n;
  uintptr_t *handles; /* by event index of the allocation */
} trace;

/* The model calls of the trace: allocations, frees (by the index of their allocation, found
 * once here), synchronizations, cache flushes. */
static void replay(const sim_allocator *a, const trace *t, const size_t *alloc_of) {
  const sim_allocator_ops *ops = a->ops;
  for (size_t i = 0; i < t->n; i++) {
    const sim_event *ev = &t->ev[i];
    switch (ev->kind) {
    case SIM_EV_ALLOC: {
      if (alloc_of[i] == SIZE_MAX) break;
      sim_placement pl = {0, 0, 0};
      t->handles[i] = ops->alloc(a->ctx, ev->size, ev->stream, &pl) == SIM_OK ? pl.handle : 0;
      break;
    }
    case SIM_EV_FREE_REQUESTED:
      if (alloc_of[i] != SIZE_MAX && ops->free_requested) ops->free_requested(a->ctx, t->handles[alloc_of[i]]);
      break;
    case SIM_EV_FREE:
    case SIM_EV_FREE_COMPLETED:
      if (alloc_of[i] == SIZE_MAX) break;
      if (ev->kind == SIM_EV_FREE && ops->free_requested) ops->free_requested(a->ctx, t->handles[alloc_of[i]]);
      ops->free_completed(a->ctx, t->handles[alloc_of[i]]);
      break;
    case SIM_EV_SYNC:
      if (ops->synchronize) ops->synchronize(a->ctx, ev->stream);
      break;
    case SIM_EV_EMPTY_CACHE:
      if (ops->empty_cache) ops->empty_cache(a->ctx);
      break;
    default: break;
    }
  }
}

/* For each free, the index of the allocation it frees; for each allocation, its own index
 * (SIZE_MAX: none live at that address; an allocation at a live address). */
static size_t *match_frees(const trace *t) {
  size_t *alloc_of = sim_xmalloc((t->n ? t->n : 1) * sizeof *alloc_of);
  sim_map live;
  sim_map_init(&live);
  for (size_t i = 0; i < t->n; i++) {
    const sim_event *ev = &t->ev[i];
    uint64_t *v, idx;
    int existed;
    alloc_of[i] = SIZE_MAX;
    switch (ev->kind) {
    case SIM_EV_ALLOC: /* an address already live is dropped, as the engine drops it */
      v = sim_map_put(&live, ev->addr, &existed);
      if (!existed) *v = alloc_of[i] = i;
      break;
    case SIM_EV_FREE_REQUESTED:
      if ((v = sim_map_get(&live, ev->addr))) alloc_of[i] = (size_t)*v;
      break;
    case SIM_EV_FREE:
    case SIM_EV_FREE_COMPLETED:
      if (sim_map_del(&live, ev->addr, &idx)) alloc_of[i] = (size_t)idx;
      break;
    default: break;
    }
  }
  sim_map_release(&live);
  return alloc_of;
}

/* CPU seconds for `replays` replays on new instances (reset 0) or on one instance reset between
 * them (reset 1); -1 when the model cannot be made. */
static double run(const sim_spec *spec, const trace *t, const size_t *alloc_of, int replays, int reset, char *err,
                  size_t errlen) {
  sim_device dev;
  sim_allocator a;
  sim_simdev_init(&dev, UINT64_MAX, TOTAL_MEMORY);
  if (sim_allocator_init(&a, spec, &dev, NULL, NULL, err, errlen) != SIM_OK) {
    sim_simdev_release(&dev);
    return -1;
  }
  double t0 = cpu_s();
  for (int k = 0; k < replays; k++) {
    replay(&a, t, alloc_of);
    if (reset) {
      if (a.ops->reset(a.ctx) != SIM_OK) {
        snprintf(err, errlen, "allocator '%s' failed to reset", a.ops->name);
        break;
      }
      sim_simdev_reset(&dev);
    } else {
      sim_allocator_release(&a);
      sim_simdev_release(&dev);
      sim_simdev_init(&dev, UINT64_MAX, TOTAL_MEMORY);
      if (sim_allocator_init(&a, spec, &dev, NULL, NULL, err, errlen) != SIM_OK) break;
    }
  }
  double s = cpu_s() - t0;
  sim_allocator_release(&a);
  sim_simdev_release(&dev);
  return s;
}

int main(int argc, char **argv) {
  long long events = argc > 1 ? atoll(argv[1]) : 100;
  int replays = argc > 2 ? atoi(argv[2]) : 2000;
  const char *list = argc > 3 ? argv[3] : NULL;
  if (events <= 0 || replays <= 0 || argc > 4) {
    fprintf(stderr, "usage: bench_reset [EVENTS] [REPLAYS] [MODEL,...]\n");
    return 2;
  }
  gen_config gc = {(uint64_t)events, 1, 0};
  gen *g = gen_new(&gc);
  trace t = {sim_xmalloc((size_t)events * sizeof *t.ev), 0, NULL};
  replay_source gs = gen_source(g);
  while (t.n < (size_t)events && replay_source_next(&gs, &t.ev[t.n]) > 0) t.n++;
  gen_free(g);
  t.handles = sim_xcalloc(t.n ? t.n : 1, sizeof *t.handles);
  size_t *alloc_of = match_frees(&t);

  printf("%zu events per replay, %d replays, best of 3 rounds by CPU time\n\n", t.n, replays);
  printf("%-8s %20s %20s %16s\n", "model", "new instance us", "reset instance us", "saved us");
  char err[SIM_ERRLEN] = "";
  int rc = 0;
  for (size_t i = 0; sim_allocators[i] && !rc; i++) {
    const char *name = sim_allocators[i]->name;
    if (!sim_allocator_listed(list, name)) continue;
    if (!sim_allocator_can_reset(sim_allocators[i])) {
      printf("%-8s %20s %20s %16s\n", name, "-", "no reset op", "-");
      continue;
    }
    sim_spec spec;
    if ((rc = sim_spec_parse(&spec, name, err, sizeof err))) break;
    double best[2] = {0, 0};
    for (int round = 0; round < 3 && !rc; round++)
      for (int reset = 0; reset < 2 && !rc; reset++) {
        double s = run(&spec, &t, alloc_of, replays, reset, err, sizeof err);
        if (s < 0 || *err) rc = 1;
        else if (!round || s < best[reset]) best[reset] = s;
      }
    sim_spec_release(&spec);
    if (rc) break;
    double fresh = best[0] * 1e6 / replays, again = best[1] * 1e6 / replays;
    printf("%-8s %20.2f %20.2f %16.2f\n", name, fresh, again, fresh - again);
  }
  if (rc) fprintf(stderr, "bench_reset: %s\n", err);
  free(alloc_of);
  free(t.handles);
  free(t.ev);
  return rc ? 1 : 0;
}

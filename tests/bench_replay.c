/* bench_replay.c: CPU time of in-memory replay per allocator model, and of each model alone (prints a table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine/engine.h"
#include "gen/gen.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"

/*
 * usage: bench_replay [EVENTS] [RUNS] [SPEC,...]   (default 10000000, 5, every model)
 *
 * Generates the trace `memplay bench` replays (the training-loop model, seed 1), then for each
 * model: the engine replaying the in-memory events (replay_run on an array source, as `memplay
 * bench` does: capacity unlimited, an 80 GiB card), and the model alone (the same allocations,
 * frees, synchronizations and cache flushes called directly, handles kept in an array, no
 * engine). Each is the best of RUNS by CPU time, which another process on the machine disturbs
 * less than wall time; the load average is printed with the table. The difference of the two
 * columns is the engine's own work per event (the live-address table, peaks, timeline, call
 * sites) plus what running both costs them (caches and branch predictors they share).
 */

#define TOTAL_MEMORY UINT64_C(85520809984) /* what `memplay bench` gives the models */

/* One model call of the trace, addressed by the index of its allocation. */
enum { C_ALLOC, C_FREE_REQUESTED, C_FREE_COMPLETED, C_FREE, C_SYNC, C_EMPTY_CACHE };
typedef struct call {
  uint8_t op;
  uint32_t idx;
  uint64_t size;
  int64_t stream;
} call;

typedef struct calls {
  call *c;
  size_t n, cap;
  uint32_t nidx;
} calls;

static void push(calls *cs, int op, uint32_t idx, uint64_t size, int64_t stream) {
  sim_grow((void **)&cs->c, &cs->cap, cs->n + 1, sizeof *cs->c);
  cs->c[cs->n++] = (call){(uint8_t)op, idx, size, stream};
}

/* The model calls a replay of evs makes when nothing runs out of memory. */
static void record_calls(const sim_event *evs, size_t n, calls *cs) {
  sim_map live; /* trace address -> index of its allocation */
  sim_map_init(&live);
  uint32_t *spare = sim_xmalloc((n ? n : 1) * sizeof *spare);
  size_t nspare = 0;
  for (size_t i = 0; i < n; i++) {
    const sim_event *ev = &evs[i];
    uint64_t *v;
    switch (ev->kind) {
    case SIM_EV_ALLOC: {
      int existed;
      v = sim_map_put(&live, ev->addr, &existed);
      if (existed) break;
      *v = nspare ? spare[--nspare] : cs->nidx++;
      push(cs, C_ALLOC, (uint32_t)*v, ev->size, ev->stream);
      break;
    }
    case SIM_EV_FREE_REQUESTED:
      if ((v = sim_map_get(&live, ev->addr))) push(cs, C_FREE_REQUESTED, (uint32_t)*v, 0, 0);
      break;
    case SIM_EV_FREE:
    case SIM_EV_FREE_COMPLETED: {
      uint64_t idx;
      if (!sim_map_del(&live, ev->addr, &idx)) break;
      push(cs, ev->kind == SIM_EV_FREE ? C_FREE : C_FREE_COMPLETED, (uint32_t)idx, 0, 0);
      spare[nspare++] = (uint32_t)idx;
      break;
    }
    case SIM_EV_SYNC: push(cs, C_SYNC, 0, 0, ev->stream); break;
    case SIM_EV_EMPTY_CACHE: push(cs, C_EMPTY_CACHE, 0, 0, 0); break;
    default: break;
    }
  }
  free(spare);
  sim_map_release(&live);
}

static int model_run(const sim_spec *spec, const calls *cs, uintptr_t *handles, double *seconds, char *err,
                     size_t errlen) {
  sim_device dev;
  sim_simdev_init(&dev, UINT64_MAX, TOTAL_MEMORY);
  sim_allocator a;
  if (sim_allocator_init(&a, spec, &dev, NULL, NULL, err, errlen) != SIM_OK) {
    sim_simdev_release(&dev);
    return -1;
  }
  const sim_allocator_ops *ops = a.ops;
  void *ctx = a.ctx;
  int rc = 0;
  double t0 = bench_cpu_s();
  for (size_t i = 0; i < cs->n && !rc; i++) {
    const call *c = &cs->c[i];
    switch (c->op) {
    case C_ALLOC: {
      sim_placement pl = {0, 0, 0};
      if (ops->alloc(ctx, c->size, c->stream, &pl) != SIM_OK) {
        snprintf(err, errlen, "allocator '%s' refused an allocation of %llu bytes", ops->name,
                 (unsigned long long)c->size);
        rc = -1;
      }
      handles[c->idx] = pl.handle;
      break;
    }
    case C_FREE_REQUESTED:
      if (ops->free_requested) ops->free_requested(ctx, handles[c->idx]);
      break;
    case C_FREE:
      if (ops->free_requested) ops->free_requested(ctx, handles[c->idx]);
      ops->free_completed(ctx, handles[c->idx]);
      break;
    case C_FREE_COMPLETED: ops->free_completed(ctx, handles[c->idx]); break;
    case C_SYNC:
      if (ops->synchronize) ops->synchronize(ctx, c->stream);
      break;
    case C_EMPTY_CACHE:
      if (ops->empty_cache) ops->empty_cache(ctx);
      break;
    }
  }
  *seconds = bench_cpu_s() - t0;
  sim_allocator_release(&a);
  sim_simdev_release(&dev);
  return rc;
}

int main(int argc, char **argv) {
  long long events = argc > 1 ? atoll(argv[1]) : 10000000;
  int runs = argc > 2 ? atoi(argv[2]) : 5;
  const char *list = argc > 3 ? argv[3] : NULL;
  if (events <= 0 || runs <= 0 || argc > 4) {
    fprintf(stderr, "usage: bench_replay [EVENTS] [RUNS] [MODEL,...]\n");
    return 2;
  }
  gen_config gc = {(uint64_t)events, 1, 0};
  gen *g = gen_new(&gc);
  sim_event *evs = sim_xmalloc((size_t)events * sizeof *evs);
  replay_source gs = gen_source(g);
  size_t n = 0;
  while (n < (size_t)events && replay_source_next(&gs, &evs[n]) > 0) n++;
  gen_free(g);
  calls cs = {0};
  record_calls(evs, n, &cs);
  uintptr_t *handles = sim_xcalloc(cs.nidx ? cs.nidx : 1, sizeof *handles);

  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
  printf("%zu events (%zu model calls), best of %d runs by CPU time; load average %.2f %.2f %.2f\n\n", n, cs.n, runs,
         load[0], load[1], load[2]);
  printf("%-8s %12s %14s %10s %14s %14s\n", "model", "replay CPU s", "M events/s", "ns/event", "alone ns/event",
         "rest ns/event");
  char err[SIM_ERRLEN];
  int rc = 0;
  for (size_t i = 0; sim_allocators[i] && !rc; i++) {
    const char *name = sim_allocators[i]->name;
    if (!sim_allocator_listed(list, name)) continue;
    sim_spec spec;
    if ((rc = sim_spec_parse(&spec, name, err, sizeof err))) break;
    double best = 0, best_alone = 0, s;
    for (int k = 0; k < runs && !rc; k++) {
      if ((rc = bench_replay_array(&spec, evs, n, TOTAL_MEMORY, &s, NULL, err, sizeof err))) break;
      if (!k || s < best) best = s;
      if ((rc = model_run(&spec, &cs, handles, &s, err, sizeof err))) break;
      if (!k || s < best_alone) best_alone = s;
    }
    sim_spec_release(&spec);
    if (rc) break;
    double per = best * 1e9 / (double)n, alone = best_alone * 1e9 / (double)n;
    printf("%-8s %12.3f %14.2f %10.1f %14.1f %14.1f\n", name, best, (double)n / best / 1e6, per, alone, per - alone);
  }
  if (rc) fprintf(stderr, "bench_replay: %s\n", err);
  free(handles);
  free(cs.c);
  free(evs);
  return rc ? 1 : 0;
}

/* bench_engine.c: the replay engine's own costs on a real trace, and the time model's, beside their goals (prints a table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/report.h"
#include "engine/time_observer.h"
#include "gen/gen.h"
#include "import/importer.h"
#include "io/jsonw.h"
#include "sim/devices.h"
#include "sim/hashmap.h"
#include "store/store.h"
#include "store/store_source.h"

/*
 * usage: bench_engine [TRACE_FILE] [RUNS] [EVENTS] [MODEL,...]
 *   TRACE_FILE  a trace to replay (default: $MEMPLAY_TRACES/pytorch/kk_ctx128_fullstep.pickle,
 *               MEMPLAY_TRACES defaulting to ../shared/traces), imported into a temporary store
 *               and read into memory once
 *   RUNS        measurements per figure, the best kept (default 5)
 *   EVENTS      events of the generated trace the time model replays (default 1000000; 0: none)
 *   MODEL,...   the models of the first table (default: every model; torch is needed for the second)
 *
 * Every figure is CPU time of this thread (CLOCK_THREAD_CPUTIME_ID), the best of RUNS, which
 * other work on the machine disturbs less than wall time. Three tables:
 *  1. the engine on the trace, from an empty allocator, per model: ns per event;
 *  2. one torch replay of the trace as a loop of cached replays makes it: a fresh engine per
 *     replay (replay_run) and one engine kept and reset between replays (replay_engine_run),
 *     the trace planned, and lean (replay_config.lean: peaks and totals only, as a comparison's
 *     cells that are not stored), in microseconds, against DynaPipe's allocator simulator on the
 *     same trace (~40 ms per replay, issue 17's measurement, docs/performance.md); then the same
 *     lean replay under `ideal`, the engine's own floor, and what that leaves the torch model;
 *  3. the time model on the generated trace `memplay bench` replays (an H100, as there): the
 *     engine with `ideal` alone, with the time model attached, and the difference, the time
 *     model's own cost in a replay; then the model alone, fed the events and what `ideal` did
 *     for each (recorded beforehand), without the engine; and the timed result as JSON.
 */

#define DYNAPIPE_US 40000.0 /* DynaPipe's simulator, one replay of kk_ctx128_fullstep */
#define TOTAL_MEMORY UINT64_C(85520809984)

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct events {
  sim_event *ev;
  size_t n, cap;
} events;

/* Imports path into a temporary store and reads its (first) trace into memory. 0, or -1. */
static int load_trace(const char *path, events *out) {
  const char *tmp = getenv("TMPDIR");
  char dir[4096], dbpath[4200];
  snprintf(dir, sizeof dir, "%s/memplay-bench-engine-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "bench_engine: cannot make a temporary directory in '%s'\n", tmp && *tmp ? tmp : "/tmp");
    return -1;
  }
  snprintf(dbpath, sizeof dbpath, "%s/bench.db", dir);
  store *s;
  char err[STORE_ERRLEN];
  int rc = -1;
  if (store_open(&s, dbpath, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "bench_engine: %s\n", err);
    rmdir(dir);
    return -1;
  }
  import_ctx ic = {.s = s, .path = path, .name = "bench"};
  store_trace t;
  memset(&t, 0, sizeof t);
  replay_source src;
  if (import_file(&ic, NULL) < 0) {
    fprintf(stderr, "bench_engine: %s\n", ic.err);
  } else if (store_trace_find(s, "bench", &t) || store_source_open(&src, s, t.id)) {
    fprintf(stderr, "bench_engine: %s\n", store_error(s));
  } else {
    sim_event ev;
    int got;
    while ((got = replay_source_next(&src, &ev)) > 0) {
      sim_grow((void **)&out->ev, &out->cap, out->n + 1, sizeof *out->ev);
      out->ev[out->n++] = ev;
    }
    if (got == 0) rc = 0;
    else fprintf(stderr, "bench_engine: %s\n", src.error(src.ctx));
    replay_source_close(&src);
  }
  store_trace_clear(&t);
  store_close(s);
  store_remove_files(dbpath);
  rmdir(dir);
  return rc;
}

/* ---- 1 and 2: the engine on the trace -------------------------------------------------------- */

/* Seconds of CPU per replay: the best of runs, each of reps replays (lean: replay_config.lean). */
static double engine_time(const sim_spec *spec, const events *t, const replay_plan *plan, int runs, int reps, int reuse,
                          int lean, char *err, size_t errlen) {
  replay_config cfg = {.spec = spec, .capacity = UINT64_MAX, .total_memory = TOTAL_MEMORY, .lean = lean};
  double best = -1;
  replay_engine *e = reuse ? replay_engine_new() : NULL;
  for (int r = 0; r < runs; r++) {
    double t0 = cpu_s();
    for (int k = 0; k < reps; k++) {
      replay_array_source as;
      replay_source src = replay_array_source_planned(&as, t->ev, t->n, plan);
      replay_result res;
      int rc = e ? replay_engine_run(e, &cfg, &src, &res, err, errlen) : replay_run(&cfg, &src, &res, err, errlen);
      replay_result_release(&res);
      if (rc) {
        replay_engine_free(e);
        return -1;
      }
    }
    double s = (cpu_s() - t0) / reps;
    if (best < 0 || s < best) best = s;
  }
  replay_engine_free(e);
  return best;
}

static int bench_trace(const char *path, const events *t, int runs, const char *list) {
  char err[SIM_ERRLEN];
  int reps = t->n ? (int)(2000000 / t->n) + 1 : 1;
  printf("1. the engine on %s: %zu events in memory, from an empty allocator (%d replays a run)\n\n", path, t->n, reps);
  printf("%-8s %12s %12s %14s %16s\n", "model", "ns/event", "us/replay", "M events/s", "planned ns/event");
  double torch_fresh = -1, torch_reused = -1, torch_planned = -1, torch_lean = -1, floor_lean = -1;
  replay_plan plan;
  if (replay_plan_build(&plan, t->ev, t->n)) {
    fprintf(stderr, "bench_engine: the trace cannot be planned\n");
    return -1;
  }
  for (size_t i = 0; sim_allocators[i]; i++) {
    if (!sim_allocator_listed(list, sim_allocators[i]->name)) continue;
    sim_spec spec;
    if (sim_spec_parse(&spec, sim_allocators[i]->name, err, sizeof err)) return -1;
    double s = engine_time(&spec, t, NULL, runs, reps, 1, 0, err, sizeof err);
    double p = s < 0 ? -1 : engine_time(&spec, t, &plan, runs, reps, 1, 0, err, sizeof err);
    if (p >= 0 && !strcmp(sim_allocators[i]->name, "torch")) {
      torch_reused = s;
      torch_planned = p;
      torch_fresh = engine_time(&spec, t, NULL, runs, reps, 0, 0, err, sizeof err);
      torch_lean = engine_time(&spec, t, &plan, runs, reps, 1, 1, err, sizeof err);
      sim_spec ideal; /* the engine's own floor: the same lean replay under a model that does nothing */
      if (!sim_spec_parse(&ideal, "ideal", err, sizeof err)) {
        floor_lean = engine_time(&ideal, t, &plan, runs, reps, 1, 1, err, sizeof err);
        sim_spec_release(&ideal);
      }
    }
    sim_spec_release(&spec);
    if (s < 0 || p < 0) {
      fprintf(stderr, "bench_engine: %s\n", err);
      replay_plan_release(&plan);
      return -1;
    }
    printf("%-8s %12.1f %12.1f %14.2f %16.1f\n", sim_allocators[i]->name, s * 1e9 / (double)t->n, s * 1e6,
           (double)t->n / s / 1e6, p * 1e9 / (double)t->n);
  }
  replay_plan_release(&plan);
  if (torch_fresh < 0) return 0;
  printf("\n2. one torch replay of the trace, against DynaPipe's simulator (%.0f ms a replay; goal >= 150x, "
         "<= %.0f us)\n\n", DYNAPIPE_US / 1e3, DYNAPIPE_US / 150);
  printf("%-44s %12s %12s %8s\n", "path", "us/replay", "x DynaPipe", "goal");
  printf("%-44s %12.1f %11.0fx %8s\n", "a new engine per replay (replay_run)", torch_fresh * 1e6,
         DYNAPIPE_US / (torch_fresh * 1e6), torch_fresh * 1e6 <= DYNAPIPE_US / 150 ? "met" : "not met");
  printf("%-44s %12.1f %11.0fx %8s\n", "one engine reset per replay (replay_engine_run)", torch_reused * 1e6,
         DYNAPIPE_US / (torch_reused * 1e6), torch_reused * 1e6 <= DYNAPIPE_US / 150 ? "met" : "not met");
  printf("%-44s %12.1f %11.0fx %8s\n", "the same, the trace planned (replay_plan)", torch_planned * 1e6,
         DYNAPIPE_US / (torch_planned * 1e6), torch_planned * 1e6 <= DYNAPIPE_US / 150 ? "met" : "not met");
  printf("%-44s %12.1f %11.0fx %8s\n", "the same, lean (peaks and totals only)", torch_lean * 1e6,
         DYNAPIPE_US / (torch_lean * 1e6), torch_lean * 1e6 <= DYNAPIPE_US / 150 ? "met" : "not met");
  if (floor_lean > 0) {
    double left = DYNAPIPE_US / 150 - floor_lean * 1e6;
    printf("%-44s %12.1f %11.0fx\n", "the engine alone: the same lean replay, ideal", floor_lean * 1e6,
           DYNAPIPE_US / (floor_lean * 1e6));
    printf("(the torch model's own share: %.1f ns an event; the goal leaves it %.1f)\n",
           (torch_lean - floor_lean) * 1e9 / (double)t->n, left > 0 ? left * 1e3 / (double)t->n : 0.0);
  }
  return 0;
}

/* ---- 3: the time model ------------------------------------------------------------------------- */

/* The result of a timed replay as JSON, as a stored run or a script's result has it: seconds of CPU. */
static double result_json_time(const replay_result *res, const sim_tm_config *tc, const sim_tm_result *tr) {
  run_meta m = {.trace_name = "bench", .kind = "replay", .allocator = "ideal", .capacity = UINT64_MAX,
                .device = "H100", .step_time_s = tr->step_time_s, .samples_per_s = tr->samples_per_s, .time = tr,
                .time_config = tc};
  double t0 = cpu_s();
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  report_json(g, NULL, &m, res, 1);
  yajl_gen_map_close(g);
  yajl_gen_free(g);
  return cpu_s() - t0;
}

/* Seconds of CPU for one replay of the generated trace with ideal, timed or not: the best of runs;
 * *json, the best time of writing a timed one's result as JSON. */
static double timed_time(const events *t, int runs, int timed, double *json, char *err, size_t errlen) {
  sim_spec spec;
  if (sim_spec_parse(&spec, "ideal", err, errlen)) return -1;
  double best = -1;
  for (int r = 0; r < runs; r++) {
    sim_tm_config tc = {.device = sim_device_builtin("H100"), .keep_device_waits = 1, .infer_dependencies = 1,
                        .malloc_syncs = 1, .kernel_scale = 1, .batch_size = 1};
    time_observer to;
    replay_observer hook;
    replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX, .total_memory = TOTAL_MEMORY};
    if (timed) {
      time_observer_init(&to, &tc, NULL);
      hook = time_observer_hook(&to);
      cfg.observers = &hook;
      cfg.nobservers = 1;
    }
    replay_array_source as;
    replay_source src = replay_array_source_init(&as, t->ev, t->n);
    replay_result res;
    double t0 = cpu_s();
    int rc = replay_run(&cfg, &src, &res, err, errlen);
    sim_tm_result tr;
    if (timed) time_observer_finish(&to, &tr);
    double s = cpu_s() - t0;
    if (timed) {
      double j = result_json_time(&res, &tc, &tr);
      if (*json < 0 || j < *json) *json = j;
      sim_tm_result_release(&tr);
      time_observer_release(&to);
    }
    replay_result_release(&res);
    if (rc) {
      sim_spec_release(&spec);
      return -1;
    }
    if (best < 0 || s < best) best = s;
  }
  sim_spec_release(&spec);
  return best;
}

/* What the allocator did for each event, as the time observer passes it on. */
static void record_alloc(void *ctx, const sim_event *ev, const replay_outcome *o) {
  sim_tm_alloc **a = ctx;
  (void)ev;
  *(*a)++ = (sim_tm_alloc){o->device_mallocs, o->device_frees, o->device_maps, o->device_unmaps,
                           o->device_malloc_bytes, o->device_free_bytes, o->device_map_bytes, o->device_unmap_bytes};
}

/* Seconds of CPU for the time model alone over the events and what `ideal` did for each (recorded
 * by a first replay): the best of runs. */
static double model_alone_time(const events *t, int runs, char *err, size_t errlen) {
  sim_spec spec;
  if (sim_spec_parse(&spec, "ideal", err, errlen)) return -1;
  sim_tm_alloc *allocs = sim_xmalloc((t->n ? t->n : 1) * sizeof *allocs), *at = allocs;
  replay_observer rec = {&at, record_alloc, NULL};
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX, .total_memory = TOTAL_MEMORY, .observers = &rec,
                       .nobservers = 1};
  replay_array_source as;
  replay_source src = replay_array_source_init(&as, t->ev, t->n);
  replay_result res;
  int rc = replay_run(&cfg, &src, &res, err, errlen);
  replay_result_release(&res);
  sim_spec_release(&spec);
  double best = -1;
  for (int r = 0; r < runs && !rc; r++) {
    sim_tm_config tc = {.device = sim_device_builtin("H100"), .keep_device_waits = 1, .infer_dependencies = 1,
                        .malloc_syncs = 1, .kernel_scale = 1, .batch_size = 1};
    double t0 = cpu_s();
    sim_tm *tm = sim_tm_new(&tc);
    for (size_t i = 0; i < t->n; i++) sim_tm_event(tm, &t->ev[i], &allocs[i], SIM_TM_ROLE_NONE);
    sim_tm_result tr;
    sim_tm_finish(tm, &tr);
    sim_tm_free(tm);
    double s = cpu_s() - t0;
    sim_tm_result_release(&tr);
    if (best < 0 || s < best) best = s;
  }
  free(allocs);
  return rc ? -1 : best;
}

static int bench_time_model(size_t nevents, int runs) {
  char err[SIM_ERRLEN];
  gen_config gc = {nevents, 1, 0};
  gen *g = gen_new(&gc);
  events t = {sim_xmalloc(nevents * sizeof(sim_event)), 0, nevents};
  replay_source gs = gen_source(g);
  while (t.n < nevents && replay_source_next(&gs, &t.ev[t.n]) > 0) t.n++;
  gen_free(g);
  double json = -1;
  double alone = timed_time(&t, runs, 0, &json, err, sizeof err);
  double timed = alone < 0 ? -1 : timed_time(&t, runs, 1, &json, err, sizeof err);
  double model = timed < 0 ? -1 : model_alone_time(&t, runs, err, sizeof err);
  free(t.ev);
  if (model < 0) {
    fprintf(stderr, "bench_engine: %s\n", err);
    return -1;
  }
  double n = (double)t.n, own = timed - alone;
  printf("\n3. the time model on %zu generated events in memory (an H100; goal >= 50 M events/s, <= 20 ns an event)\n\n",
         t.n);
  printf("%-44s %12s %14s %8s\n", "replay", "ns/event", "M events/s", "goal");
  printf("%-44s %12.1f %14.2f %8s\n", "ideal", alone * 1e9 / n, n / alone / 1e6, "");
  printf("%-44s %12.1f %14.2f %8s\n", "ideal + time model", timed * 1e9 / n, n / timed / 1e6, "");
  printf("%-44s %12.1f %14.2f %8s\n", "the time model's own (the difference)", own * 1e9 / n, n / own / 1e6,
         own * 1e9 / n <= 20 ? "met" : "not met");
  printf("%-44s %12.1f %14.2f %8s\n", "the time model alone (sim_tm_event, no engine)", model * 1e9 / n, n / model / 1e6,
         model * 1e9 / n <= 20 ? "met" : "not met");
  printf("%-44s %12.1f %14s %8s   (%.2f ms)\n", "its result as JSON (report_json, after)", json * 1e9 / n, "", "",
         json * 1e3);
  return 0;
}

int main(int argc, char **argv) {
  const char *tdir = getenv("MEMPLAY_TRACES");
  char def[4096];
  snprintf(def, sizeof def, "%s/pytorch/kk_ctx128_fullstep.pickle", tdir && *tdir ? tdir : "../shared/traces");
  const char *path = argc > 1 ? argv[1] : def;
  int runs = argc > 2 ? atoi(argv[2]) : 5;
  long long nevents = argc > 3 ? atoll(argv[3]) : 1000000;
  const char *list = argc > 4 ? argv[4] : NULL;
  if (argc > 5 || runs <= 0 || nevents < 0) {
    fprintf(stderr, "usage: bench_engine [TRACE_FILE] [RUNS] [EVENTS] [MODEL,...]\n");
    return 2;
  }
  events t = {0};
  if (load_trace(path, &t)) return 1;
  double load[3] = {-1, -1, -1};
  if (getloadavg(load, 3) < 0) load[0] = -1;
  printf("bench_engine: CPU time of this thread, best of %d runs; load average %.2f\n\n", runs, load[0]);
  int rc = bench_trace(path, &t, runs, list);
  free(t.ev);
  if (!rc && nevents) rc = bench_time_model((size_t)nevents, runs);
  return rc ? 1 : 0;
}

/* bench_session.c: the replay session's own costs: a cached replay's fixed cost, scripts against the engine, replays per second (prints a table). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compare/compare.h"
#include "engine/engine.h"
#include "lua/lua_api.h"
#include "store/store_source.h"

/*
 * usage: bench_session DB [RUNS]     (tools/bench-session.sh makes DB; RUNS default 5)
 *
 * DB holds sil_small_from_empty and kk_ctx128_fullstep (the shared PyTorch snapshots) and `big`
 * (`memplay gen --events 1000000 --seed 1`). Every figure but one is CPU time of this process
 * (CLOCK_PROCESS_CPUTIME_ID, which Lua's os.clock reads too), the best of RUNS rounds:
 *
 * - the fixed cost of a replay: a Lua loop of 2,000 replays of the cached 88-event trace under
 *   torch, per replay (what a script pays per replay besides the events);
 * - the scripted path against the engine, memory only: t:cache() of `big` replayed from Lua
 *   (`device = false`), against replay_run over the same events in an array, as `memplay bench`
 *   replays them (capacity unlimited, the trace's card);
 * - kk_ctx128_fullstep under torch through a Lua loop (full results, and lean = true), through a
 *   comparison (one trace, 100 policies that differ only in a capacity the trace never reaches, one
 *   job, nothing stored: lean cells), the same comparison on every core (wall-clock time per cell:
 *   what a user waits for, against DynaPipe on one core), and the engine alone (full); against the
 *   Python simulator DynaPipe ships (about 40 ms a replay of this trace, measured for issue 17;
 *   docs/performance.md).
 */

#define DYNAPIPE_S 0.040

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *db;
static int runs = 5;

/* Runs code in a new host over the store; returns the global BEST (seconds), or -1. */
static double lua_best(store *s, const char *code) {
  lua_ctx cx;
  lua_ctx_init(&cx);
  cx.st = s;
  cx.script = "bench";
  cx.scenario = "bench";
  cx.out = stderr;
  cx.no_runs = 1;
  char err[1024];
  lua_host_limits lim = {UINT64_C(4) << 30, UINT64_C(1) << 40, 0};
  lua_host *h = lua_api_host(&cx, &lim, err, sizeof err);
  double best = -1;
  if (!h) {
    fprintf(stderr, "bench_session: %s\n", err);
  } else if (lua_host_run_string(h, "=bench", code, strlen(code)) != LUA_HOST_OK) {
    fprintf(stderr, "bench_session: %s\n", lua_host_error(h));
  } else {
    lua_State *L = lua_host_state(h);
    lua_getglobal(L, "BEST");
    best = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  lua_api_abort(&cx);
  lua_host_free(h);
  lua_ctx_release(&cx);
  return best;
}

/* Per replay, best of runs rounds of n replays of trace under alloc from a Lua loop. */
static double lua_loop(store *s, const char *trace, const char *alloc, int n, const char *extra) {
  char code[1024];
  snprintf(code, sizeof code,
           "local t = memplay.store():trace('%s'):cache()\n"
           "t:replay{allocator = '%s'%s}\n"
           "BEST = math.huge\n"
           "for k = 1, %d do\n"
           "  local c0 = os.clock()\n"
           "  for i = 1, %d do local r = t:replay{allocator = '%s'%s} end\n"
           "  BEST = math.min(BEST, (os.clock() - c0) / %d)\n"
           "end\n",
           trace, alloc, extra, runs, n, alloc, extra, n);
  return lua_best(s, code);
}

/* A stored trace's events in memory. */
static sim_event *load(store *s, const char *name, size_t *n, store_trace *t) {
  if (store_trace_find(s, name, t)) {
    fprintf(stderr, "bench_session: no trace '%s' in %s\n", name, db);
    exit(1);
  }
  replay_source src;
  if (store_source_open(&src, s, t->id)) {
    fprintf(stderr, "bench_session: %s\n", store_error(s));
    exit(1);
  }
  sim_event *evs = malloc(((size_t)t->event_count + 1) * sizeof *evs);
  *n = 0;
  while (*n < (size_t)t->event_count && replay_source_next(&src, &evs[*n]) > 0) (*n)++;
  replay_source_close(&src);
  return evs;
}

/* Best of runs engine replays of the events under alloc (memory only), per replay: planned, as a
 * cached trace replayed again is (source.h). */
static double engine_best(const sim_event *evs, size_t n, const store_trace *t, const char *alloc) {
  sim_spec spec;
  char err[512];
  replay_plan plan;
  if (replay_plan_build(&plan, evs, n)) return -1;
  if (sim_spec_parse(&spec, alloc, err, sizeof err)) return replay_plan_release(&plan), -1;
  double best = INFINITY;
  int reps = n < 10000 ? 2000 : n < 100000 ? 200 : 1;
  for (int k = 0; k < runs; k++) {
    double c0 = cpu_s();
    for (int i = 0; i < reps; i++) {
      replay_array_source as;
      replay_source src = replay_array_source_planned(&as, evs, n, &plan);
      replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX,
                           .total_memory = t->device_memory > 0 ? (uint64_t)t->device_memory : 0};
      replay_result res;
      if (replay_run(&cfg, &src, &res, err, sizeof err)) return replay_plan_release(&plan), -1;
      replay_result_release(&res);
    }
    double c = (cpu_s() - c0) / reps;
    if (c < best) best = c;
  }
  replay_plan_release(&plan);
  sim_spec_release(&spec);
  return best;
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Per cell, best of runs comparisons of one trace under 100 torch policies on `jobs` threads: CPU
 * time (jobs 1), or wall-clock time (more jobs: what a user waits for, the cells replayed side by
 * side). */
static double compare_best(const char *trace, int jobs) {
  enum { NPOL = 100 };
  char *texts[NPOL];
  for (int i = 0; i < NPOL; i++) {
    texts[i] = malloc(32);
    snprintf(texts[i], 32, "torch@%dGiB", 1000 + i);
  }
  const char *pattern = trace;
  cmp_request req = {.patterns = &pattern, .npatterns = 1, .policies = (const char *const *)texts, .npolicies = NPOL,
                     .capacity = UINT64_MAX, .jobs = jobs};
  double (*clock_s)(void) = jobs > 1 ? wall_s : cpu_s;
  double best = INFINITY;
  for (int k = 0; k < runs; k++) {
    cmp_result r;
    char err[1024];
    double c0 = clock_s();
    int rc = cmp_run(db, &req, &r, err, sizeof err);
    double c = (clock_s() - c0) / NPOL;
    if (rc || r.ncells != NPOL || r.cells[0].error) {
      fprintf(stderr, "bench_session: compare: %s\n", rc ? err : r.ncells ? r.cells[0].error : "no cells");
      best = -1;
    }
    if (!rc) cmp_result_release(&r);
    if (best < 0) break;
    if (c < best) best = c;
  }
  for (int i = 0; i < NPOL; i++) free(texts[i]);
  return best;
}

static void line(const char *what, const char *measured, const char *goal) {
  printf("| %-66s | %26s | %-22s |\n", what, measured, goal);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_session DB [RUNS]   (tools/bench-session.sh)\n");
    return 2;
  }
  db = argv[1];
  if (argc > 2) runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : runs;
  store *s;
  char err[1024], m[128];
  if (store_open(&s, db, 0, err, sizeof err)) return fprintf(stderr, "bench_session: %s\n", err), 1;
  store_trace small_t, kk_t, big_t;
  size_t nsmall, nkk, nbig;
  sim_event *small = load(s, "sil_small_from_empty", &nsmall, &small_t);
  sim_event *kk = load(s, "kk_ctx128_fullstep", &nkk, &kk_t);
  sim_event *big = load(s, "big", &nbig, &big_t);

  double fixed = lua_loop(s, "sil_small_from_empty", "torch", 2000, "");
  double fixed_engine = engine_best(small, nsmall, &small_t, "torch");
  double lua_ideal = lua_loop(s, "big", "ideal", 1, ", device = false");
  double eng_ideal = engine_best(big, nbig, &big_t, "ideal");
  double lua_torch = lua_loop(s, "big", "torch", 1, ", device = false");
  double eng_torch = engine_best(big, nbig, &big_t, "torch");
  double kk_lua = lua_loop(s, "kk_ctx128_fullstep", "torch", 100, "");
  double kk_lua_lean = lua_loop(s, "kk_ctx128_fullstep", "torch", 100, ", lean = true");
  double kk_engine = engine_best(kk, nkk, &kk_t, "torch");
  store_close(s);
  double kk_cmp = compare_best("kk_ctx128_fullstep", 1);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double kk_cmp_all = cores > 1 ? compare_best("kk_ctx128_fullstep", (int)cores) : -1;

  printf("| %-66s | %26s | %-22s |\n|%.*s|%.*s|%.*s|\n", "figure (CPU time, best of the rounds)", "measured", "goal",
         68, "--------------------------------------------------------------------------------", 28,
         "----------------------------------------", 24, "----------------------------------------");
  snprintf(m, sizeof m, "%.1f us", fixed * 1e6);
  line("fixed cost of a cached replay (sil_small_from_empty, torch, Lua)", m, "<= 50 us");
  snprintf(m, sizeof m, "%.1f us", fixed_engine * 1e6);
  line("  of which the engine's replay of its 88 events", m, "");
  snprintf(m, sizeof m, "%.2fx (%.1f / %.1f ms)", eng_ideal / lua_ideal, lua_ideal * 1e3, eng_ideal * 1e3);
  line("scripted / engine, ideal, 1M generated events, memory only", m, ">= 0.8x");
  snprintf(m, sizeof m, "%.2fx (%.1f / %.1f ms)", eng_torch / lua_torch, lua_torch * 1e3, eng_torch * 1e3);
  line("scripted / engine, torch, 1M generated events, memory only", m, ">= 0.8x");
  snprintf(m, sizeof m, "%.0f us, %.0fx", kk_lua * 1e6, DYNAPIPE_S / kk_lua);
  line("kk_ctx128_fullstep, torch, Lua loop: per replay, x DynaPipe", m, ">= 150x (<= 267 us)");
  snprintf(m, sizeof m, "%.0f us, %.0fx", kk_lua_lean * 1e6, DYNAPIPE_S / kk_lua_lean);
  line("the same, lean = true: per replay, x DynaPipe", m, ">= 150x (<= 267 us)");
  snprintf(m, sizeof m, "%.0f us, %.0fx", kk_cmp * 1e6, DYNAPIPE_S / kk_cmp);
  line("kk_ctx128_fullstep, torch, compare (100 policies): per cell, x Dyn.", m, ">= 150x (<= 267 us)");
  if (kk_cmp_all > 0) {
    char what[96], goal[32];
    snprintf(what, sizeof what, "the same on all %ld cores (--jobs %ld): wall time per cell", cores, cores);
    snprintf(m, sizeof m, "%.0f us, %.0fx", kk_cmp_all * 1e6, DYNAPIPE_S / kk_cmp_all);
    snprintf(goal, sizeof goal, "(%ld cores against 1)", cores);
    line(what, m, goal);
  }
  snprintf(m, sizeof m, "%.0f us, %.0fx", kk_engine * 1e6, DYNAPIPE_S / kk_engine);
  line("kk_ctx128_fullstep, torch, the engine alone: per replay, x DynaPipe", m, "");
  free(small);
  free(kk);
  free(big);
  store_trace_clear(&small_t);
  store_trace_clear(&kk_t);
  store_trace_clear(&big_t);
  int ok = fixed > 0 && lua_ideal > 0 && lua_torch > 0 && kk_lua > 0 && kk_cmp > 0 && eng_ideal > 0 && eng_torch > 0;
  return ok ? 0 : 1;
}

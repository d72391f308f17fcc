/* bench.h: what the in-memory benchmarks share: CPU time, and one replay of events through the engine. */
#ifndef TESTS_BENCH_H
#define TESTS_BENCH_H

#include <stdint.h>
#include <time.h>

#include "engine/engine.h"

/* The process's CPU time in seconds, which other work on the machine disturbs less than wall time. */
static inline double bench_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* evs[0..n) replayed through the engine under spec as `memplay bench` replays them (an array
 * source, the capacity unlimited, a card of total_memory bytes): its CPU time in *seconds and the
 * allocations that did not fit in *ooms (may be NULL). 0, or the engine's error in err. */
static inline int bench_replay_array(const sim_spec *spec, const sim_event *evs, size_t n, uint64_t total_memory,
                                     double *seconds, uint64_t *ooms, char *err, size_t errlen) {
  replay_config cfg = {.spec = spec, .capacity = UINT64_MAX, .total_memory = total_memory};
  replay_array_source as;
  replay_source src = replay_array_source_init(&as, evs, n);
  replay_result res;
  double t0 = bench_cpu_s();
  int rc = replay_run(&cfg, &src, &res, err, errlen);
  *seconds = bench_cpu_s() - t0;
  if (ooms) *ooms = rc ? 0 : res.ooms;
  replay_result_release(&res);
  return rc;
}

#endif

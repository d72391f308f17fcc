/* bench_holes.c: replay speed per model as the live set grows, many long-lived allocations of mixed sizes (a table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine/engine.h"
#include "sim/hashmap.h"

/*
 * usage: bench_holes [EVENTS] [RUNS] [LIVE,...] [MODEL,...]
 *        (default 1000000, 3, 1000,4000,16000,64000, every model)
 *
 * A trace of EVENTS allocations and frees (seed fixed), one per LIVE figure: allocations of 2 to
 * 64 MiB and a little more, each freed at a random later moment, a step freeing one of the live
 * allocations with odds of 45 in 100 until LIVE are live, then every other step (the table says
 * how many were live at most). Such a trace leaves about as many holes between its allocations
 * as it has allocations live: the case where a structure scanned in full on each request (the
 * simulated driver's free address ranges, a model's free blocks) makes a replay quadratic. Each
 * model replays it in memory through the engine, as `memplay bench` does (an array source, the
 * capacity unlimited on a card of 8 TiB, so that nothing runs out of memory); the figure is the
 * best of RUNS by CPU time, in M events a second. A model whose work per event grows with the
 * live set shows it down its column.
 */

#define TOTAL_MEMORY (UINT64_C(8) << 40)

/* Park and Miller's generator: the same numbers everywhere. */
static uint32_t next_rand(uint64_t *x) {
  *x = *x * 16807 % 2147483647;
  return (uint32_t)*x;
}

/* The trace for one live-set size: n events into evs (allocated by the caller). Returns the most
 * allocations live at once. */
static size_t make_trace(sim_event *evs, size_t n, size_t max_live) {
  static const uint64_t mib[] = {2, 3, 4, 6, 8, 12, 16, 24, 40, 64};
  uint64_t *live = sim_xmalloc((max_live ? max_live : 1) * sizeof *live);
  size_t nlive = 0, most = 0;
  uint64_t rng = 12345, next_addr = 1;
  for (size_t i = 0; i < n; i++) {
    sim_event *ev = &evs[i];
    sim_event_init(ev);
    ev->seq = (int64_t)i;
    ev->ts = (int64_t)i * 1000;
    uint32_t r = next_rand(&rng);
    if (nlive && (nlive == max_live || r % 100 < 45)) {
      size_t k = next_rand(&rng) % nlive;
      ev->kind = SIM_EV_FREE;
      ev->addr = live[k];
      live[k] = live[--nlive];
    } else {
      ev->kind = SIM_EV_ALLOC;
      ev->mem = SIM_MEM_DEVICE;
      ev->device = 0;
      ev->addr = next_addr++;
      ev->size = mib[next_rand(&rng) % 10] * (UINT64_C(1) << 20) + next_rand(&rng) % (UINT64_C(1) << 20);
      live[nlive++] = ev->addr;
      if (nlive > most) most = nlive;
    }
  }
  free(live);
  return most;
}

int main(int argc, char **argv) {
  long long events = argc > 1 ? atoll(argv[1]) : 1000000;
  int runs = argc > 2 ? atoi(argv[2]) : 3;
  char lives[256] = "1000,4000,16000,64000";
  const char *models = argc > 4 ? argv[4] : NULL;
  if (argc > 3) snprintf(lives, sizeof lives, "%s", argv[3]);
  if (events <= 0 || runs <= 0 || argc > 5) {
    fprintf(stderr, "usage: bench_holes [EVENTS] [RUNS] [LIVE,...] [MODEL,...]\n");
    return 2;
  }
  size_t n = (size_t)events;
  sim_event *evs = sim_xmalloc(n * sizeof *evs);
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
  printf("%zu events a trace, M events/s, best of %d runs by CPU time; load average %.2f %.2f %.2f\n\n", n, runs,
         load[0], load[1], load[2]);
  printf("%-8s %8s", "live", "reached");
  for (size_t i = 0; sim_allocators[i]; i++)
    if (sim_allocator_listed(models, sim_allocators[i]->name)) printf(" %10s", sim_allocators[i]->name);
  printf("\n");
  char err[SIM_ERRLEN] = "";
  int rc = 0;
  for (char *save = NULL, *tok = strtok_r(lives, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
    long long max_live = atoll(tok);
    if (max_live <= 0) {
      fprintf(stderr, "bench_holes: '%s' is not a number of live allocations\n", tok);
      free(evs);
      return 2;
    }
    printf("%-8lld %8zu", max_live, make_trace(evs, n, (size_t)max_live));
    for (size_t i = 0; sim_allocators[i] && !rc; i++) {
      const char *name = sim_allocators[i]->name;
      if (!sim_allocator_listed(models, name)) continue;
      sim_spec spec;
      if ((rc = sim_spec_parse(&spec, name, err, sizeof err))) break;
      double best = 0, s;
      for (int k = 0; k < runs && !rc; k++) {
        uint64_t ooms = 0;
        rc = bench_replay_array(&spec, evs, n, TOTAL_MEMORY, &s, &ooms, err, sizeof err);
        if (!rc && ooms) rc = -1, snprintf(err, sizeof err, "a replay ran out of memory %llu times", (unsigned long long)ooms);
        if (!k || s < best) best = s;
      }
      sim_spec_release(&spec);
      if (!rc) printf(" %10.2f", (double)n / best / 1e6);
      fflush(stdout);
    }
    printf("\n");
  }
  if (rc) fprintf(stderr, "bench_holes: %s\n", err);
  free(evs);
  return rc ? 1 : 0;
}

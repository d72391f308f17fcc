/* compare_int.h: what the comparison's own files share: a cell's run through a what-if scenario. */
#ifndef REPLAY_COMPARE_INT_H
#define REPLAY_COMPARE_INT_H

#include "engine/source.h"
#include "lua/lua_api.h"
#include "session/session.h"
#include "compare.h"

/* The events of one trace in memory (compare_cache.c), with their plan. Traces longer than
 * CMP_CACHE_EVENTS are read from the store for every cell (96 bytes an event: about 100 MiB). */
#define CMP_CACHE_EVENTS (INT64_C(1) << 20)

typedef struct trace_cache {
  int64_t trace_id; /* 0: empty */
  sim_event *events;
  size_t n, cap;
  replay_plan_kept kept; /* their plan: the store's, or made when they are replayed again */
  int shared;            /* read by several workers (cmp_shared_get): never written again */
} trace_cache;

/* The events of trace t in tc (read now unless they are there): 0, or -1 with a message. */
int cmp_cache_load(trace_cache *tc, store *s, const store_trace *t, char *err, size_t errlen);
/* The cached events as a source, with their plan. */
replay_source cmp_cache_source(trace_cache *tc, replay_array_source *a);
void cmp_cache_release(trace_cache *tc);

/* Traces' events shared by a comparison's workers, each read once, by the first worker that asks
 * (session_once's values); freed with session_once_free. */
session_once *cmp_shared_new(void);
/* The events of trace t, read through s by this worker or already read by another (which it waits
 * for); NULL with a message when they cannot be read. Valid until the session_once is freed. */
trace_cache *cmp_shared_get(session_once *sh, store *s, const store_trace *t, char *err, size_t errlen);

/* A scenario run for one cell: a sandboxed Lua host with the library, the script run against the
 * cell's trace with the cell's policy as its allocator (and capacity and device). */
typedef struct cmp_scenario {
  lua_ctx cx;
  lua_host *h;
  FILE *sink; /* what the script prints */
  lua_param *params;
  char capacity[32];
} cmp_scenario;

/*
 * Runs req's scenario on trace t (in store s) under policy p; nothing is stored. The script
 * replays through ses (the worker's session over s, which outlives the cell: what it prepared for
 * one cell serves the next) and reads t's events from evs when the worker holds them (nevs of
 * them, with their plan when the worker has it, else NULL; evs NULL: from the store). On success (0), *run is the scenario's last variant, its answer,
 * with its step time and samples per second (< 0: unknown), valid until cmp_scenario_release. -1
 * with a message otherwise.
 */
int cmp_scenario_run(cmp_scenario *sc, const cmp_request *req, store *s, session *ses, const store_trace *t,
                     const sim_event *evs, size_t nevs, const replay_plan *plan, const cmp_policy *p,
                     const session_run **run,
                     double *step_time_s, double *samples_per_s, char *err, size_t errlen);
void cmp_scenario_release(cmp_scenario *sc);

#endif

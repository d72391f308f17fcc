/* compare_int.h: what the comparison's own files share: a cell's run through a what-if scenario. */
#ifndef REPLAY_COMPARE_INT_H
#define REPLAY_COMPARE_INT_H

#include "lua/lua_api.h"
#include "session/session.h"
#include "compare.h"

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

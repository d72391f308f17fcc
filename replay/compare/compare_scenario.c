/* compare_scenario.c: a cell of a comparison with a scenario: the what-if script run under the cell's policy, its last variant kept. */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "compare_int.h"

/* The parameters the script sees: the user's --set, then the policy's allocator and capacity. */
static void set_params(cmp_scenario *sc, const cmp_request *req, const cmp_policy *p, uint64_t capacity) {
  sc->params = sim_xcalloc(req->nparams + 2, sizeof *sc->params);
  size_t n = 0;
  for (size_t i = 0; i < req->nparams; i++) {
    const char *eq = strchr(req->params[i], '=');
    char *key = strndup(req->params[i], (size_t)(eq - req->params[i]));
    sc->params[n++] = (lua_param){key, eq + 1, 0};
  }
  sc->params[n++] = (lua_param){strdup("allocator"), p->allocator, 0};
  if (capacity != UINT64_MAX) {
    snprintf(sc->capacity, sizeof sc->capacity, "%llu", (unsigned long long)capacity);
    sc->params[n++] = (lua_param){strdup("capacity"), sc->capacity, 0};
  }
  sc->cx.params = sc->params;
  sc->cx.nparams = n;
}

int cmp_scenario_run(cmp_scenario *sc, const cmp_request *req, store *s, session *ses, const store_trace *t,
                     const sim_event *evs, size_t nevs, const replay_plan *plan, const cmp_policy *p,
                     const session_run **run,
                     double *step_time_s, double *samples_per_s, char *err, size_t errlen) {
  memset(sc, 0, sizeof *sc);
  lua_ctx_init(&sc->cx);
  sc->sink = fopen("/dev/null", "w");
  if (!sc->sink) return snprintf(err, errlen, "cannot open /dev/null"), -1;
  sc->cx.st = s;
  sc->cx.script = req->scenario_path;
  sc->cx.scenario = req->scenario;
  sc->cx.trace_id = t->id;
  sc->cx.ses = ses;
  sc->cx.trace_events = evs;
  sc->cx.ntrace_events = evs ? nevs : 0;
  sc->cx.trace_plan = evs ? plan : NULL;
  sc->cx.device = p->device ? p->device : req->device;
  sc->cx.out = sc->sink;
  sc->cx.whatif = 1;
  sc->cx.no_runs = 1;
  set_params(sc, req, p, p->capacity != UINT64_MAX ? p->capacity : req->capacity);
  lua_host_limits lim = {0};
  lua_host_limits_for_trace(&lim, t->event_count > 0 ? (uint64_t)t->event_count : 0);
  sc->h = lua_api_host(&sc->cx, &lim, err, errlen);
  if (!sc->h) return -1;
  if (lua_host_run_file(sc->h, req->scenario_path, NULL, 0) != LUA_HOST_OK) {
    lua_api_abort(&sc->cx);
    snprintf(err, errlen, "%s", lua_host_error(sc->h));
    return -1;
  }
  if (lua_api_finish(&sc->cx, sc->h, err, errlen)) return -1;
  size_t n = lua_api_nvariants(&sc->cx);
  *run = n ? lua_api_variant(&sc->cx, n - 1, NULL, step_time_s, samples_per_s) : NULL;
  if (!*run) return snprintf(err, errlen, "%s recorded no variant", req->scenario), -1;
  return 0;
}

void cmp_scenario_release(cmp_scenario *sc) {
  lua_host_free(sc->h); /* before the context: the script's traces refer to it */
  lua_ctx_release(&sc->cx);
  if (sc->params)
    for (size_t i = 0; i < sc->cx.nparams; i++) free((char *)sc->params[i].key);
  free(sc->params);
  if (sc->sink) fclose(sc->sink);
  memset(sc, 0, sizeof *sc);
}

/* lua_api_replay.c: trace:replay{...} through the replay session, and its result as a Lua table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_runs.h"
#include "lua_api_help.h"
#include "lua_api_result.h"
#include "lua_lib_funcs.h"

/* ---- the result userdata -------------------------------------------------------------------- */

static void lresult_clear(lresult *lr) {
  session_run_release(&lr->run);
  free(lr->trace_name);
  free(lr->transforms);
  lr->trace_name = lr->transforms = NULL;
  lstore_unref(lr->ls);
  lr->ls = NULL;
}

int lapi_result_gc(lua_State *L) {
  lresult_clear(luaL_checkudata(L, 1, LAPI_RESULT));
  return 0;
}

/* ---- result tables (lua_api_result.c builds them) ------------------------------------------ */

/* Keys a result may lack (a missing one reads as nil; any other unknown key is an error). */
static const char *const optional_keys[] = {"step_time_s", "samples_per_s", "time", "device", "trace_id",
                                            "capacity_bytes", "run_id", "name", "lean", NULL};

int lapi_result_index(lua_State *L) {
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (k && lapi_result_build(L, 1, k)) return 1;
  for (size_t i = 0; k && optional_keys[i]; i++)
    if (!strcmp(k, optional_keys[i])) return 0;
  const lresult *lr = k && !strcmp(k, "timeline") ? lapi_result_of(L, 1) : NULL;
  if (lr && lr->run.result.lean)
    return luaL_error(L, "a lean replay's result has no timeline (replay without lean = true to keep one)");
  return luaL_error(L, "a replay result has no field '%s' (see docs/lua-api.md, \"Results\")", k ? k : "?");
}

static int result_next(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  if (lua_next(L, 1)) return 2;
  lua_pushnil(L);
  return 1;
}

/* pairs(result): every key of `replay --json`, the ones built on first read included. */
int lapi_result_pairs(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lapi_result_complete(L, 1);
  lua_pushcfunction(L, result_next);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* ---- trace:replay{...} ---------------------------------------------------------------------- */

static const char *const replay_keys[] = {"allocator", "capacity",     "stop_at_oom", "timeline_points", "top_sites",
                                          "max_ooms",  "check",        "total_memory", "environment",    "shared_device",
                                          "device",    "timing",       "batch",        "live_start",     "lean",
                                          "address_order", NULL};

/* Checks that the options table at idx names only known options. */
static void check_keys(lua_State *L, int idx) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int ok = lua_type(L, -1) == LUA_TSTRING;
    for (size_t i = 0; ok && replay_keys[i]; i++)
      if (!strcmp(lua_tostring(L, -1), replay_keys[i])) goto known;
    luaL_error(L, "replay: unknown option '%s' (known: allocator, capacity, device, timing, batch, total_memory, "
                  "shared_device, stop_at_oom, timeline_points, top_sites, max_ooms, check, environment, live_start, "
                  "lean, address_order)",
               ok ? lua_tostring(L, -1) : "?");
  known:;
  }
}

/* The sizes and switches of the options table at idx into *req. */
static void read_sizes_and_switches(lua_State *L, int idx, session_request *req) {
  lua_getfield(L, idx, "allocator");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "replay: 'allocator' must be a SPEC such as 'torch:expandable_segments:True'");
    req->allocator = lua_tostring(L, -1); /* the string stays alive in the options table */
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "capacity");
  if (!lua_isnil(L, -1) && !(lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)))
    req->capacity = lapi_check_size(L, -1, "replay: 'capacity'");
  lua_pop(L, 1);
  lua_getfield(L, idx, "total_memory");
  if (!lua_isnil(L, -1)) req->total_memory = lapi_check_size(L, -1, "replay: 'total_memory'");
  lua_pop(L, 1);
  lua_getfield(L, idx, "address_order");
  if (!lua_isnil(L, -1)) {
    req->address_order = session_address_order_of(lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL);
    if (req->address_order < 0) luaL_error(L, "replay: 'address_order' must be 'auto', 'up' or 'down'");
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "stop_at_oom");
  req->stop_at_oom = lua_toboolean(L, -1);
  lua_getfield(L, idx, "live_start");
  req->live_start = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, idx, "check");
  req->check = lua_toboolean(L, -1);
  lua_getfield(L, idx, "environment");
  req->use_environment = lua_toboolean(L, -1);
  lua_getfield(L, idx, "shared_device");
  req->shared_device = lua_toboolean(L, -1);
  lua_getfield(L, idx, "lean");
  req->lean = lua_toboolean(L, -1);
  lua_pop(L, 5);
  if (req->shared_device && req->capacity == UINT64_MAX)
    luaL_error(L, "replay: shared_device needs a capacity (the GPU's memory)");
  lua_Integer points = 0, top = 0, max_ooms = 0;
  int no_sites = 0; /* top_sites = 0: none (not given: the engine's 10) */
  lua_getfield(L, idx, "timeline_points");
  if (!lua_isnil(L, -1)) points = luaL_checkinteger(L, -1);
  lua_getfield(L, idx, "top_sites");
  if (!lua_isnil(L, -1)) no_sites = (top = luaL_checkinteger(L, -1)) == 0;
  lua_getfield(L, idx, "max_ooms");
  if (!lua_isnil(L, -1)) max_ooms = luaL_checkinteger(L, -1);
  lua_pop(L, 3);
  if (points < 0 || points > 1000000 || top < 0 || top > 100000 || max_ooms < 0 || max_ooms > 1000000)
    luaL_error(L, "replay: timeline_points, top_sites and max_ooms must be small whole numbers");
  req->timeline_points = (size_t)points;
  req->top_sites = no_sites ? SESSION_NO_SITES : (size_t)top;
  req->max_ooms = (size_t)max_ooms;
}

/* The device, timing and batch options of the table at idx into *req: the device named here, else
 * the script's --device, else (unless device = false) the one the trace's recorded device matches. */
static void read_device_and_time(lua_State *L, int idx, const ltrace *t, session_request *req) {
  lua_getfield(L, idx, "device");
  req->no_device = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
  if (lua_type(L, -1) == LUA_TSTRING) req->device = lua_tostring(L, -1);
  else if (!lua_isnil(L, -1) && !req->no_device) luaL_error(L, "replay: 'device' must be a device profile's name or false");
  lua_pop(L, 1);
  if (!req->device && !req->no_device) req->device = lapi_ctx(L)->device;
  lua_getfield(L, idx, "timing");
  if (!lua_isnil(L, -1)) req->timing = luaL_checkstring(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, idx, "batch");
  lua_Integer batch = lua_isnil(L, -1) ? t->meta.batch_size : luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  if (batch < 0) luaL_error(L, "replay: batch must be >= 0");
  req->batch = batch;
}

/* t:replay{...}: the trace replayed through the session; its result as a table. */
int lapi_trace_replay(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  check_keys(L, 2);
  session_request req;
  session_request_init(&req);
  req.trace = &t->meta;
  read_sizes_and_switches(L, 2, &req);
  read_device_and_time(L, 2, t, &req);

  /* everything that can be freed by the collector first, then the C resources */
  lua_ctx *cx = lapi_ctx(L);
  session *ses = lapi_session(L);
  lresult *lr = lua_newuserdatauv(L, sizeof *lr, 0); /* 3 */
  memset(lr, 0, sizeof *lr);
  luaL_setmetatable(L, LAPI_RESULT);
  char err[1024];
  int rc = session_prepare(ses, &req, &lr->run, err, sizeof err);
  if (rc) return rc == SESSION_EUSAGE ? luaL_error(L, "replay: %s", err) : luaL_error(L, "%s", err);
  lr->trace_name = strdup(t->meta.name ? t->meta.name : "");
  lr->trace_id = t->ls == cx->p->main ? t->meta.id : 0;
  lstore_ref(t->ls);
  lr->ls = t->ls;
  if (t->derived) lr->transforms = xf_node_describe(t->node);
  replay_names names = lstore_names(t->ls);
  /* the stored trace's own events, unchanged: a recorded window may start from its rebuilt state */
  int own = !t->derived && t->ls == cx->p->main;
  session_pass pass = {.names = &names, .stored_events = own};
  replay_array_source arr;
  replay_source arr_src;
  lscratch *sc = NULL;
  /* a cached trace, or one-to-one transforms of one, is planned once it is replayed again (transform.h) */
  const replay_plan *plan = xf_plan_note(t->base);
  if (t->arr) { /* a cached trace: the engine reads its array in place */
    arr_src = replay_array_source_planned(&arr, t->arr, t->narr, plan);
    pass.source = &arr_src;
    if (own) pass.stored = t->arr, pass.nstored = t->narr;
  } else {
    sc = lapi_scratch(L); /* 4 */
    lapi_scratch_open(L, sc, t);
    pass.source = &sc->src;
  }
  rc = session_execute(ses, &lr->run, &pass, err, sizeof err);
  lr->run.trace = NULL; /* the trace may be collected before its result */
  lr->run.recorded = NULL;
  lr->run.recorded_options = NULL;
  if (sc) lapi_scratch_free(sc); /* closes the source */
  if (rc) return luaL_error(L, "replay of '%s' under %s: %s", t->meta.name, lr->run.allocator, err);
  if (cx->on_replay) cx->on_replay(cx->progress_arg, lr->run.result.events);
  lapi_result_push_table(L, lr, 3);
  return 1;
}

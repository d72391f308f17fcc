/* lua_api_replay.c: trace:replay{...} and its result: the keys of `replay --json` as a Lua table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/device_sim.h"
#include "store/store_runs.h"
#include "io/jsonw.h"
#include "lua_api_int.h"
#include "engine/time_observer.h"

#define RESULTS_KEY "memplay.results" /* registry: weak table, result table -> result userdata */

/* ---- the result userdata ------------------------------------------------------------------- */

void lresult_clear(lresult *lr) {
  if (lr->has) replay_result_release(&lr->r);
  lr->has = 0;
  if (lr->has_time) sim_tm_result_release(&lr->time);
  lr->has_time = 0;
  free(lr->trace_name);
  free(lr->allocator);
  free(lr->device);
  free(lr->transforms);
  lr->trace_name = lr->allocator = lr->device = lr->transforms = NULL;
  lstore_unref(lr->ls);
  lr->ls = NULL;
}

static int result_gc(lua_State *L) {
  lresult_clear(luaL_checkudata(L, 1, LAPI_RESULT));
  return 0;
}

lresult *lapi_result_of(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TUSERDATA) return luaL_testudata(L, idx, LAPI_RESULT);
  if (lua_type(L, idx) != LUA_TTABLE) return NULL;
  lua_getfield(L, LUA_REGISTRYINDEX, RESULTS_KEY);
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  lresult *lr = luaL_testudata(L, -1, LAPI_RESULT);
  lua_pop(L, 2);
  return lr;
}

void lapi_push_result_ud(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TUSERDATA) {
    lua_pushvalue(L, idx);
    return;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, RESULTS_KEY);
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  lua_remove(L, -2);
}

/* ---- JSON values as Lua values ------------------------------------------------------------- */

static void push_json(lua_State *L, yajl_val v) {
  luaL_checkstack(L, 4, "result too deep");
  if (!v || YAJL_IS_NULL(v)) {
    lua_pushnil(L);
  } else if (YAJL_IS_STRING(v)) {
    lua_pushstring(L, YAJL_GET_STRING(v));
  } else if (YAJL_IS_INTEGER(v)) {
    lua_pushinteger(L, (lua_Integer)YAJL_GET_INTEGER(v));
  } else if (YAJL_IS_NUMBER(v)) {
    lua_pushnumber(L, YAJL_GET_DOUBLE(v));
  } else if (YAJL_IS_TRUE(v)) {
    lua_pushboolean(L, 1);
  } else if (YAJL_IS_FALSE(v)) {
    lua_pushboolean(L, 0);
  } else if (YAJL_IS_ARRAY(v)) {
    lua_createtable(L, (int)v->u.array.len, 0);
    for (size_t i = 0; i < v->u.array.len; i++) {
      push_json(L, v->u.array.values[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
  } else if (YAJL_IS_OBJECT(v)) {
    lua_createtable(L, 0, (int)v->u.object.len);
    for (size_t i = 0; i < v->u.object.len; i++) {
      push_json(L, v->u.object.values[i]);
      lua_setfield(L, -2, v->u.object.keys[i]);
    }
  } else {
    lua_pushnil(L);
  }
}

static int push_json_protected(lua_State *L) {
  yajl_val v = lua_touserdata(L, 1);
  push_json(L, v);
  return 1;
}

/* Pushes the JSON value v as a Lua value and frees v, whatever happens. */
static void push_json_tree(lua_State *L, yajl_val v) {
  lua_pushcfunction(L, push_json_protected);
  lua_pushlightuserdata(L, v);
  int st = lua_pcall(L, 1, 1, 0);
  yajl_tree_free(v);
  if (st != LUA_OK) lua_error(L);
}

/* ---- result tables ------------------------------------------------------------------------- */

run_meta lapi_meta(const lresult *lr, const char *scenario, const char *variant, double step_time_s,
                   double samples_per_s) {
  run_meta m = {.trace_id = lr->trace_id,
                .trace_name = lr->trace_name,
                .kind = "whatif",
                .allocator = lr->allocator,
                .capacity = lr->capacity,
                .device = lr->device,
                .backend = "sim",
                .scenario = scenario,
                .variant = variant,
                .step_time_s = step_time_s,
                .samples_per_s = samples_per_s};
  if (lr->has_time) {
    m.time = &lr->time;
    m.time_config = &lr->tcfg;
    m.device_source = lr->dev.source;
    m.device_reason = lr->device_reason;
  }
  return m;
}

static run_meta meta_of(const lresult *lr) {
  return lapi_meta(lr, NULL, NULL, lr->step_time_s, lr->has_time ? lr->time.samples_per_s : -1);
}

void lapi_device(lua_State *L, const char *name, devices_entry *e) {
  lua_ctx *cx = lapi_ctx(L);
  char err[512];
  int rc = 1;
  if (cx->st) {
    rc = devices_store_get(cx->st, name, e, err, sizeof err);
    if (rc < 0) luaL_error(L, "%s", err);
  } else {
    const sim_device_profile *p = sim_device_builtin(name);
    if (p) {
      memset(e, 0, sizeof *e);
      e->p = *p;
      snprintf(e->source, sizeof e->source, "builtin");
      rc = 0;
    }
  }
  if (rc) luaL_error(L, "no device profile '%s' (see 'memplay devices')", name);
}

/* Keys a result may lack (a missing one reads as nil; any other unknown key is an error). */
static const char *const optional_keys[] = {"step_time_s", "samples_per_s", "time", "device", "trace_id",
                                            "capacity_bytes", "run_id", "name", NULL};

static int result_index(lua_State *L) {
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (k && !strcmp(k, "timeline")) {
    lresult *lr = lapi_result_of(L, 1);
    if (!lr || !lr->has) return 0;
    const replay_result *r = &lr->r;
    lua_createtable(L, (int)r->ntimeline, 0);
    for (size_t i = 0; i < r->ntimeline; i++) {
      const replay_point *p = &r->timeline[i];
      lua_createtable(L, 0, 5);
      lua_pushinteger(L, p->seq);
      lua_setfield(L, -2, "event");
      lua_pushinteger(L, p->ts);
      lua_setfield(L, -2, "ts");
      lua_pushinteger(L, p->allocated);
      lua_setfield(L, -2, "allocated_bytes");
      lua_pushinteger(L, p->reserved);
      lua_setfield(L, -2, "reserved_bytes");
      lua_pushinteger(L, p->requested);
      lua_setfield(L, -2, "requested_bytes");
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_pushliteral(L, "timeline");
    lua_pushvalue(L, -2);
    lua_rawset(L, 1); /* cached in the table */
    return 1;
  }
  for (size_t i = 0; k && optional_keys[i]; i++)
    if (!strcmp(k, optional_keys[i])) return 0;
  return luaL_error(L, "a replay result has no field '%s' (see docs/lua-api.md, \"Results\")", k ? k : "?");
}

/* Pushes the table for the result userdata at ud_idx and records table -> userdata. */
void lapi_push_result_table(lua_State *L, lresult *lr, int ud_idx) {
  ud_idx = lua_absindex(L, ud_idx);
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  run_meta m = meta_of(lr);
  replay_names names = store_names(lr->ls ? lr->ls->s : NULL);
  report_json(g, &names, &m, &lr->r, 0);
  yajl_gen_map_close(g);
  size_t len;
  const char *text = jsonw_text(g, &len);
  char *copy = sim_xmalloc(len + 1);
  memcpy(copy, text, len);
  copy[len] = 0;
  yajl_gen_free(g);
  char errbuf[256];
  yajl_val v = yajl_tree_parse(copy, errbuf, sizeof errbuf);
  free(copy);
  if (!v) {
    luaL_error(L, "internal error: cannot read a replay result: %s", errbuf);
    return;
  }
  push_json_tree(L, v);
  lua_pushboolean(L, lr->r.ooms == 0);
  lua_setfield(L, -2, "fits");
  lua_pushboolean(L, lr->transforms && *lr->transforms);
  lua_setfield(L, -2, "derived");
  lua_newtable(L);
  int i = 0;
  for (const char *s = lr->transforms ? lr->transforms : ""; *s;) {
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    if (n) {
      lua_pushlstring(L, s, n);
      lua_rawseti(L, -2, ++i);
    }
    s += n + (nl ? 1 : 0);
  }
  lua_setfield(L, -2, "transforms");
  luaL_setmetatable(L, "memplay.result_table");
  lua_getfield(L, LUA_REGISTRYINDEX, RESULTS_KEY);
  lua_pushvalue(L, -2);
  lua_pushvalue(L, ud_idx);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* ---- processes sharing one device --------------------------------------------------------- */

/*
 * With shared_device, each device index of the replay is a process on one GPU: each has its
 * own simulated device (address space, driver pages), and all draw on one physical capacity.
 * A process sees, when it starts (its first event), the memory the others have not taken.
 */
typedef struct shpool {
  uint64_t capacity, total, used;
} shpool;

typedef struct shproc {
  shpool *pool;
  sim_device inner;
  sim_device *outer;
} shproc;

static void sh_before(shproc *p) {
  uint64_t room = p->pool->capacity > p->pool->used ? p->pool->capacity - p->pool->used : 0;
  p->inner.capacity = p->inner.used + room;
}

static void sh_after(shproc *p, uint64_t before) {
  p->pool->used = p->pool->used - before + p->inner.used;
  p->outer->used = p->inner.used;
  if (p->outer->used > p->outer->used_peak) p->outer->used_peak = p->outer->used;
}

#define SH_CALL(call)              \
  shproc *p = ctx;                 \
  uint64_t before = p->inner.used; \
  sh_before(p);                    \
  int rc = p->inner.ops->call;     \
  sh_after(p, before);             \
  return rc

static int sh_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  SH_CALL(malloc(p->inner.ctx, size, stream, addr));
}
static int sh_free(void *ctx, uint64_t addr, uint64_t size) { SH_CALL(free(p->inner.ctx, addr, size)); }
static int sh_reserve(void *ctx, uint64_t size, uint64_t *addr) { SH_CALL(reserve(p->inner.ctx, size, addr)); }
static int sh_unreserve(void *ctx, uint64_t addr, uint64_t size) { SH_CALL(unreserve(p->inner.ctx, addr, size)); }
static int sh_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  SH_CALL(map(p->inner.ctx, addr, size, stream));
}
static int sh_unmap(void *ctx, uint64_t addr, uint64_t size) { SH_CALL(unmap(p->inner.ctx, addr, size)); }

static const sim_device_ops shared_ops = {
  .size = sizeof(sim_device_ops),
  .malloc = sh_malloc,
  .free = sh_free,
  .reserve = sh_reserve,
  .unreserve = sh_unreserve,
  .map = sh_map,
  .unmap = sh_unmap,
};

static int shared_make(void *arg, int device, sim_device *dev, char *err, size_t errlen) {
  shpool *pool = arg;
  (void)device, (void)err, (void)errlen;
  shproc *p = sim_xcalloc(1, sizeof *p);
  p->pool = pool;
  p->outer = dev;
  uint64_t room = pool->capacity > pool->used ? pool->capacity - pool->used : 0;
  sim_simdev_init(&p->inner, room, pool->total);
  memset(dev, 0, sizeof *dev);
  dev->ops = &shared_ops;
  dev->ctx = p;
  dev->total_memory = pool->total;
  dev->free_memory = room; /* what cudaMemGetInfo says when this process starts */
  dev->capacity = room;
  dev->cc_major = p->inner.cc_major;
  dev->cc_minor = p->inner.cc_minor;
  return 0;
}

static void shared_release(void *arg, int device, sim_device *dev) {
  shpool *pool = arg;
  (void)device;
  shproc *p = dev->ctx;
  if (!p) return;
  pool->used -= p->inner.used < pool->used ? p->inner.used : pool->used;
  sim_simdev_release(&p->inner);
  free(p);
  dev->ctx = NULL;
}

/* ---- trace:replay{...} --------------------------------------------------------------------- */

static const char *env_lookup(const char *name) { return getenv(name); }

/* The allocator settings a model reads from the environment are the recording's, never
 * this machine's: a replay must not depend on where it runs. */
static const char *no_env(const char *name) {
  (void)name;
  return NULL;
}

static const char *const replay_keys[] = {"allocator", "capacity",     "stop_at_oom", "timeline_points", "top_sites",
                                          "max_ooms",  "check",        "total_memory", "environment",    "shared_device",
                                          "device",    "timing",       "batch",        NULL};

int lapi_replay(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    lua_pop(L, 1);
    int ok = lua_type(L, -1) == LUA_TSTRING;
    for (size_t i = 0; ok && replay_keys[i]; i++)
      if (!strcmp(lua_tostring(L, -1), replay_keys[i])) goto known;
    return luaL_error(L, "replay: unknown option '%s' (known: allocator, capacity, device, timing, batch, total_memory, "
                         "shared_device, stop_at_oom, timeline_points, top_sites, max_ooms, check, environment)",
                      ok ? lua_tostring(L, -1) : "?");
  known:;
  }
  /* the allocator: as given, else the one that recorded the trace, else ideal */
  const char *alloc = NULL;
  lua_getfield(L, 2, "allocator");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "replay: 'allocator' must be a SPEC such as 'torch:expandable_segments:True'");
    alloc = lua_tostring(L, -1);
  } else {
    alloc = t->meta.allocator && sim_allocator_find(t->meta.allocator) ? t->meta.allocator : "ideal";
  }
  lua_pop(L, 1); /* the string stays alive in the options table (or is static) */
  uint64_t capacity = UINT64_MAX, total = 0;
  lua_getfield(L, 2, "capacity");
  if (!lua_isnil(L, -1) && !(lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)))
    capacity = lapi_check_size(L, -1, "replay: 'capacity'");
  lua_pop(L, 1);
  lua_getfield(L, 2, "total_memory");
  if (!lua_isnil(L, -1)) total = lapi_check_size(L, -1, "replay: 'total_memory'");
  lua_pop(L, 1);
  int stop = 0, check = 0, use_env = 0, shared = 0;
  lua_Integer points = 0, top = 0, max_ooms = 0;
  lua_getfield(L, 2, "stop_at_oom");
  stop = lua_toboolean(L, -1);
  lua_getfield(L, 2, "check");
  check = lua_toboolean(L, -1);
  lua_getfield(L, 2, "environment");
  use_env = lua_toboolean(L, -1);
  lua_getfield(L, 2, "shared_device");
  shared = lua_toboolean(L, -1);
  lua_pop(L, 4);
  if (shared && capacity == UINT64_MAX) return luaL_error(L, "replay: shared_device needs a capacity (the GPU's memory)");
  lua_getfield(L, 2, "timeline_points");
  if (!lua_isnil(L, -1)) points = luaL_checkinteger(L, -1);
  lua_getfield(L, 2, "top_sites");
  if (!lua_isnil(L, -1)) top = luaL_checkinteger(L, -1);
  lua_getfield(L, 2, "max_ooms");
  if (!lua_isnil(L, -1)) max_ooms = luaL_checkinteger(L, -1);
  lua_pop(L, 3);
  if (points < 0 || points > 1000000 || top < 0 || top > 100000 || max_ooms < 0 || max_ooms > 1000000)
    return luaL_error(L, "replay: timeline_points, top_sites and max_ooms must be small whole numbers");

  /* the device: named here, else --device, else the trace's recorded device when a profile
   * matches it (for the time prediction only); device = false: no time prediction */
  lua_ctx *cx = lapi_ctx(L);
  devices_entry dev;
  const char *reason = NULL, *dname = NULL;
  lua_getfield(L, 2, "device");
  int no_device = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
  if (lua_type(L, -1) == LUA_TSTRING) dname = lua_tostring(L, -1);
  else if (!lua_isnil(L, -1) && !no_device) return luaL_error(L, "replay: 'device' must be a device profile's name or false");
  lua_pop(L, 1);
  if (!dname && !no_device) dname = cx->device;
  if (dname) {
    lapi_device(L, dname, &dev);
    reason = "option";
    if (capacity == UINT64_MAX) capacity = dev.p.total_memory;
    if (!total) total = dev.p.total_memory;
  } else if (!no_device && cx->st) {
    char derr[512];
    int rc = devices_store_match(cx->st, t->meta.device_name,
                                 t->meta.device_memory > 0 ? (uint64_t)t->meta.device_memory : 0, &dev, derr, sizeof derr);
    if (rc < 0) return luaL_error(L, "%s", derr);
    if (rc == 0) reason = "recorded";
  }
  sim_tm_config tcfg = {.copy_timing = SIM_TM_TIMING_MODEL, .keep_device_waits = 1, .infer_dependencies = 1,
                        .malloc_syncs = -1, .kernel_scale = 1.0};
  lua_getfield(L, 2, "timing");
  if (!lua_isnil(L, -1)) {
    char terr[512];
    /* checked always; used when a time prediction is made */
    if (time_options_parse(&tcfg, luaL_checkstring(L, -1), terr, sizeof terr)) return luaL_error(L, "replay: timing: %s", terr);
  }
  lua_pop(L, 1);
  lua_getfield(L, 2, "batch");
  lua_Integer batch = lua_isnil(L, -1) ? t->meta.batch_size : luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  if (batch < 0) return luaL_error(L, "replay: batch must be >= 0");

  /* everything that can be freed by the collector first, then the C resources */
  lresult *lr = lua_newuserdatauv(L, sizeof *lr, 0); /* 3 */
  memset(lr, 0, sizeof *lr);
  luaL_setmetatable(L, LAPI_RESULT);
  lscratch *sc = lapi_scratch(L); /* 4 */
  char err[1024];
  sim_spec spec;
  if (sim_spec_parse(&spec, alloc, err, sizeof err) != SIM_OK) return luaL_error(L, "replay: %s", err);
  /* the spec's storage is freed at once if anything below raises: keep it in the scratch */
  sc->p[0] = spec.opts;
  sc->p[1] = spec.storage;
  lr->trace_name = strdup(t->meta.name ? t->meta.name : "");
  lr->allocator = strdup(alloc);
  lr->trace_id = t->ls == cx->p->main ? t->meta.id : 0;
  if (reason) lr->device = strdup(dev.p.name);
  lr->capacity = capacity;
  lr->step_time_s = -1;
  lstore_ref(t->ls);
  lr->ls = t->ls;
  if (t->derived) lr->transforms = xf_node_describe(t->node);
  const char *recorded = t->meta.allocator && !strcmp(t->meta.allocator, spec.ops->name) ? t->meta.allocator_settings : NULL;
  if (!total && t->meta.device_memory > 0) total = (uint64_t)t->meta.device_memory;
  replay_config cfg = {
    .spec = &spec,
    .capacity = capacity,
    .total_memory = total,
    .cc_major = reason ? dev.p.cc_major : 0,
    .cc_minor = reason ? dev.p.cc_minor : 0,
    .recorded = recorded,
    .getenv_fn = use_env ? env_lookup : no_env,
    .stop_at_oom = stop,
    .timeline_points = (size_t)points,
    .top_sites = (size_t)top,
    .max_ooms = (size_t)max_ooms,
    .check_level = check ? 2 : 0,
  };
  shpool pool = {capacity, total ? total : capacity, 0};
  if (shared) {
    cfg.make_device = shared_make;
    cfg.release_device = shared_release;
    cfg.device_arg = &pool;
    cfg.capacity = UINT64_MAX;
    if (!total) cfg.total_memory = capacity;
  }
  lapi_scratch_open(L, sc, t);
  time_observer tobs;
  replay_observer hook;
  if (reason) {
    lr->dev = dev;
    lr->device_reason = reason;
    lr->tcfg = tcfg;
    lr->tcfg.device = &lr->dev.p;
    lr->tcfg.batch_size = batch;
    /* stream-ordered pools (cudaMallocAsync) grow without synchronizing */
    if (lr->tcfg.malloc_syncs < 0) lr->tcfg.malloc_syncs = strcmp(spec.ops->name, "async") != 0;
    replay_names names = store_names(t->ls->s);
    time_observer_init(&tobs, &lr->tcfg, &names);
    hook = time_observer_hook(&tobs);
    cfg.observers = &hook;
    cfg.nobservers = 1;
  }
  lr->has = 1;
  int rc = replay_run(&cfg, &sc->src, &lr->r, err, sizeof err);
  if (reason) {
    time_observer_finish(&tobs, &lr->time);
    time_observer_release(&tobs);
    lr->has_time = 1;
    lr->step_time_s = lr->time.step_time_s;
  }
  lapi_scratch_free(sc); /* closes the source and the spec */
  if (rc) return luaL_error(L, "replay of '%s' under %s: %s", t->meta.name, alloc, err);
  lapi_push_result_table(L, lr, 3);
  return 1;
}

void lapi_replay_register(lua_State *L) {
  luaL_newmetatable(L, LAPI_RESULT);
  lua_pushcfunction(L, result_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newmetatable(L, "memplay.result_table");
  lua_pushcfunction(L, result_index);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_newtable(L);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, RESULTS_KEY);
}

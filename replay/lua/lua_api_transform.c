/* lua_api_transform.c: traces derived from a trace (scale, drop, insert, pin, repeat, map, merge), cache, save. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "lua_api_events.h"
#include "lua_api_help.h"
#include "lua_lib_funcs.h"
#include "sim/device_sim.h"

/* ---- options -------------------------------------------------------------------------------- */

/* The options table of a transform (argument 2): its filter in a fresh scratch, the other keys
 * it accepts in extra. */
static lscratch *transform_options(lua_State *L, ltrace *t, const char *what, const char *const *extra) {
  luaL_checktype(L, 2, LUA_TTABLE);
  lscratch *sc = lapi_scratch(L);
  lapi_filter(L, 2, t, &sc->f, what, extra);
  return sc;
}

/* Makes nt (pushed inert before n was built) the trace derived from t through node n. */
static int set_derived(lua_State *L, ltrace *nt, ltrace *t, xf_node *n, const char *err) {
  if (!n) return luaL_error(L, "%s", err);
  lapi_set_trace(nt, n, t->base, t->ls, &t->meta, 1, t->lt);
  if (t->bsum && t->base) {
    nt->bsum = t->bsum;
    nt->bsum->refs++;
  }
  return 1;
}

static double num_field(lua_State *L, int idx, const char *fn, const char *k, double def, int required) {
  lua_getfield(L, idx, k);
  double v = def;
  if (lua_isnil(L, -1)) {
    if (required) luaL_error(L, "%s: option '%s' is required", fn, k);
  } else if (lua_type(L, -1) != LUA_TNUMBER) {
    luaL_error(L, "%s: option '%s' must be a number, not a %s", fn, k, luaL_typename(L, -1));
  } else {
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static int bool_field(lua_State *L, int idx, const char *fn, const char *k, int def) {
  lua_getfield(L, idx, k);
  int v = def;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TBOOLEAN) luaL_error(L, "%s: option '%s' must be true or false", fn, k);
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static void check_keys(lua_State *L, int idx, const char *fn, const char *const *keys) {
  lapi_check_options(L, idx, fn, keys, NULL);
}

/* ---- one-to-one transforms, drops and insertions -------------------------------------------- */

int lapi_trace_scale(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  static const char *const extra[] = {"factor", "align", NULL};
  lscratch *sc = transform_options(L, t, "scale", extra);
  double factor = num_field(L, 2, "scale", "factor", 1, 1);
  double align = num_field(L, 2, "scale", "align", 1, 0);
  if (!(align >= 1) || align != floor(align)) return luaL_error(L, "scale: align must be a whole number of bytes >= 1");
  char err[XF_ERRLEN];
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_scale(t->node, &sc->f, factor, (uint64_t)align, err, sizeof err);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, err);
}

int lapi_trace_elem_size(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  static const char *const extra[] = {"from", "to", NULL};
  lscratch *sc = transform_options(L, t, "elem_size", extra);
  double from = num_field(L, 2, "elem_size", "from", 0, 1), to = num_field(L, 2, "elem_size", "to", 0, 1);
  if (!(from >= 1) || !(to >= 1) || from != floor(from) || to != floor(to) || from > 64 || to > 64)
    return luaL_error(L, "elem_size: 'from' and 'to' must be element sizes in bytes (1, 2, 4, 8, ...)");
  char err[XF_ERRLEN];
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_scale(t->node, &sc->f, to / from, (uint64_t)to, err, sizeof err);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, err);
}

int lapi_trace_resize(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lscratch *sc = lapi_scratch(L);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    int ok1, ok2;
    lua_Integer seq = lua_tointegerx(L, -2, &ok1);
    lua_Integer size = lua_tointegerx(L, -1, &ok2);
    if (!ok2 && lua_type(L, -1) == LUA_TNUMBER) {
      double d = lua_tonumber(L, -1);
      ok2 = d >= 0 && d < 9e18;
      size = (lua_Integer)ceil(d);
    }
    if (!ok1 || !ok2 || seq < 0 || size < 0) return luaL_error(L, "resize: expects a table {[seq] = new size in bytes, ...}");
    *sim_map_put(&sc->m1, (uint64_t)seq, NULL) = (uint64_t)size;
    lua_pop(L, 1);
  }
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_resize(t->node, &sc->m1);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, "");
}

int lapi_trace_drop(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lscratch *sc = transform_options(L, t, "drop", NULL);
  if (!xf_filter_is_set(&sc->f)) return luaL_error(L, "drop: the filter selects every event (give kind, category, step, ...)");
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_drop(t->node, &sc->f);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, "");
}

/* t:drop_steps(n) or t:drop_steps{from, to}: drops whole steps (by the events' step numbers). */
int lapi_trace_drop_steps(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  double lo = INT32_MIN, hi = INT32_MAX;
  lapi_range(L, 2, "drop_steps", &lo, &hi);
  ltrace *nt = lapi_new_trace(L);
  xf_filter f;
  xf_filter_init(&f);
  f.step_min = (int32_t)fmin(fmax(lo, INT32_MIN), INT32_MAX);
  f.step_max = (int32_t)fmax(fmin(hi, INT32_MAX), INT32_MIN);
  xf_node *n = xf_drop(t->node, &f);
  xf_filter_release(&f);
  return set_derived(L, nt, t, n, "");
}

int lapi_trace_insert(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  static const char *const keys[] = {"events", "at", "before", "after", NULL};
  luaL_checktype(L, 2, LUA_TTABLE);
  check_keys(L, 2, "insert", keys);
  lscratch *sc = lapi_scratch(L);
  lua_getfield(L, 2, "events");
  if (!lua_istable(L, -1)) return luaL_error(L, "insert: option 'events' must be a list of event tables");
  int nev = (int)luaL_len(L, -1);
  sim_event *evs = sc->p[0] = sim_xmalloc((size_t)(nev ? nev : 1) * sizeof *evs);
  for (int i = 1; i <= nev; i++) {
    lua_rawgeti(L, -1, i);
    sim_event_init(&evs[i - 1]);
    evs[i - 1].ts = -1;
    lapi_read_event(L, -1, &evs[i - 1]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  xf_where where = XF_AT_START;
  int64_t seq = 0;
  lua_getfield(L, 2, "before");
  lua_getfield(L, 2, "after");
  lua_getfield(L, 2, "at");
  if (!lua_isnil(L, -3)) {
    where = XF_BEFORE_EACH;
    lapi_filter(L, -3, t, &sc->f, "insert 'before'", NULL);
  } else if (!lua_isnil(L, -2)) {
    where = XF_AFTER_EACH;
    lapi_filter(L, -2, t, &sc->f, "insert 'after'", NULL);
  } else if (lua_type(L, -1) == LUA_TNUMBER) {
    where = XF_BEFORE_SEQ;
    seq = luaL_checkinteger(L, -1);
  } else if (lua_type(L, -1) == LUA_TSTRING) {
    const char *at = lua_tostring(L, -1);
    if (!strcmp(at, "start")) where = XF_AT_START;
    else if (!strcmp(at, "end")) where = XF_AT_END;
    else return luaL_error(L, "insert: 'at' must be 'start', 'end' or an event seq, not '%s'", at);
  } else if (!lua_isnil(L, -1)) {
    return luaL_error(L, "insert: 'at' must be 'start', 'end' or an event seq");
  }
  lua_pop(L, 3);
  char err[XF_ERRLEN];
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_insert(t->node, evs, (size_t)nev, where, seq, &sc->f, err, sizeof err);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, err);
}

/* Reads a table {[seq] = {event, ...}, ...} at idx into groups (after: the flag) and events. */
static void read_groups(lua_State *L, int idx, int after, lscratch *sc, size_t *ngroups, size_t *gcap, size_t *nevs,
                        size_t *ecap) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_error(L, "insert_at: '%s' must be a table {[seq] = {event, ...}, ...}", after ? "after" : "before");
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int ok;
    lua_Integer seq = lua_tointegerx(L, -2, &ok);
    if (!ok || seq < 0) luaL_error(L, "insert_at: keys must be event sequence numbers (integers >= 0)");
    if (!lua_istable(L, -1)) luaL_error(L, "insert_at: the events for seq %I must be a list of event tables", seq);
    int n = (int)luaL_len(L, -1);
    xf_insert_group *g = sc->p[0];
    sim_grow((void **)&g, gcap, *ngroups + 1, sizeof *g);
    sc->p[0] = g;
    g[*ngroups] = (xf_insert_group){seq, after, *nevs, (size_t)n};
    (*ngroups)++;
    for (int i = 1; i <= n; i++) {
      sim_event *evs = sc->p[1];
      sim_grow((void **)&evs, ecap, *nevs + 1, sizeof *evs);
      sc->p[1] = evs;
      lua_rawgeti(L, -1, i);
      sim_event_init(&evs[*nevs]);
      evs[*nevs].ts = -1;
      lapi_read_event(L, -1, &evs[*nevs]);
      (*nevs)++;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* t:insert_at{before = {[seq] = {events}}, after = {[seq] = {events}}}: events around given events. */
int lapi_trace_insert_at(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const keys[] = {"before", "after", NULL};
  check_keys(L, 2, "insert_at", keys);
  lscratch *sc = lapi_scratch(L);
  size_t ngroups = 0, gcap = 0, nevs = 0, ecap = 0;
  lua_getfield(L, 2, "before");
  if (!lua_isnil(L, -1)) read_groups(L, -1, 0, sc, &ngroups, &gcap, &nevs, &ecap);
  lua_pop(L, 1);
  lua_getfield(L, 2, "after");
  if (!lua_isnil(L, -1)) read_groups(L, -1, 1, sc, &ngroups, &gcap, &nevs, &ecap);
  lua_pop(L, 1);
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_insert_at(t->node, sc->p[0], ngroups, sc->p[1], nevs);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, "");
}

int lapi_trace_pin(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  static const char *const extra[] = {"to", "async", "duration_factor", NULL};
  if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_newtable(L);
  }
  lscratch *sc = transform_options(L, t, "pin", extra);
  if (!sc->f.dirs) sc->f.dirs = 1u << SIM_COPY_H2D;
  if (!sc->f.mems) sc->f.mems = 1u << SIM_MEM_PAGEABLE;
  int mem = SIM_MEM_PINNED;
  lua_getfield(L, 2, "to");
  if (!lua_isnil(L, -1)) {
    mem = lua_type(L, -1) == LUA_TSTRING ? sim_mem_kind_from_name(lua_tostring(L, -1)) : -1;
    if (mem < 0) return luaL_error(L, "pin: 'to' must be a memory kind (pinned, pageable, ...)");
  }
  lua_pop(L, 1);
  int async = bool_field(L, 2, "pin", "async", mem == SIM_MEM_PINNED);
  double df = num_field(L, 2, "pin", "duration_factor", 1, 0);
  char err[XF_ERRLEN];
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_set_copy(t->node, &sc->f, mem, async, df, err, sizeof err);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, err);
}

int lapi_trace_scale_time(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  static const char *const extra[] = {"factor", "fixed_ns", NULL};
  lscratch *sc = transform_options(L, t, "scale_time", extra);
  double factor = num_field(L, 2, "scale_time", "factor", 1, 1);
  double fixed = num_field(L, 2, "scale_time", "fixed_ns", 0, 0);
  if (!(fixed >= 0) || fixed > 9e18) return luaL_error(L, "scale_time: fixed_ns must be a duration in ns >= 0");
  char err[XF_ERRLEN];
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_scale_time(t->node, &sc->f, factor, (int64_t)fixed, err, sizeof err);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, err);
}

static int repeat_common(lua_State *L, ltrace *t, int64_t from, int64_t to, int opts) {
  double times = num_field(L, opts, "repeat", "times", 1, 1);
  if (times != floor(times) || times < 0 || times > 100000) return luaL_error(L, "repeat: times must be a whole number 0..100000");
  lscratch *sc = lapi_scratch(L);
  lua_getfield(L, opts, "once");
  if (!lua_isnil(L, -1)) lapi_filter(L, -1, t, &sc->f, "repeat 'once'", NULL);
  lua_pop(L, 1);
  int transient = bool_field(L, opts, "repeat", "once_transient", 0);
  char err[XF_ERRLEN];
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_repeat(t->node, from, to, (int)times, &sc->f, transient, err, sizeof err);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, err);
}

/* t:repeat_block{from = seq, to = seq (exclusive), times = n, once = filter, once_transient = bool} */
int lapi_trace_repeat_block(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const keys[] = {"from", "to", "times", "once", "once_transient", NULL};
  check_keys(L, 2, "repeat_block", keys);
  double fromd = num_field(L, 2, "repeat_block", "from", 0, 1), tod = num_field(L, 2, "repeat_block", "to", 0, 1);
  if (!(fromd >= 0 && fromd < 9.2e18 && tod >= 0 && tod < 9.2e18)) return luaL_error(L, "repeat_block: from and to must be event seqs");
  int64_t from = (int64_t)fromd, to = (int64_t)tod;
  return repeat_common(L, t, from, to, 2);
}

/* t:repeat_steps{steps = {a, b} (default: the last step), times = n, once = ..., once_transient = ...} */
int lapi_trace_repeat_steps(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const keys[] = {"steps", "times", "once", "once_transient", NULL};
  check_keys(L, 2, "repeat_steps", keys);
  lua_settop(L, 2);
  lapi_push_steps(L, t);
  lua_replace(L, 3); /* 3: the steps (over the scratch they were read with) */
  int nsteps = (int)luaL_len(L, 3);
  if (!nsteps) return luaL_error(L, "repeat_steps: the trace has no steps (no step numbers or step markers)");
  lua_rawgeti(L, 3, nsteps);
  lua_getfield(L, -1, "step");
  double lo = (double)lua_tointeger(L, -1), hi = lo;
  lua_pop(L, 2);
  lua_getfield(L, 2, "steps");
  if (!lua_isnil(L, -1)) lapi_range(L, -1, "steps", &lo, &hi);
  lua_pop(L, 1);
  int64_t from = -1, to = -1;
  for (int i = 1; i <= nsteps; i++) {
    lua_rawgeti(L, 3, i);
    lua_getfield(L, -1, "step");
    double s = (double)lua_tointeger(L, -1);
    lua_getfield(L, -2, "first_seq");
    int64_t fs = lua_tointeger(L, -1);
    lua_getfield(L, -3, "last_seq");
    int64_t ls = lua_tointeger(L, -1);
    lua_pop(L, 4);
    if (s < lo || s > hi) continue;
    if (from < 0 || fs < from) from = fs;
    if (ls + 1 > to) to = ls + 1;
  }
  if (from < 0) return luaL_error(L, "repeat_steps: no step in %f..%f", lo, hi);
  return repeat_common(L, t, from, to, 2);
}

/* ---- t:map(fn [, filter]) ------------------------------------------------------------------- */

typedef struct lmap {
  lua_State *main;
  int ref;   /* the function */
  int names; /* the names of the input trace's events by id (lapi_trace_names): each looked up once */
  lstore *ls;
  lua_ctx *cx;
} lmap;

/* Runs protected: calls the function on the event and reads back what it returned.
 * Upvalue-free; arguments: lmap, in, out, cap (light userdata, integers). */
static int map_invoke(lua_State *L) {
  lmap *m = lua_touserdata(L, 1);
  const sim_event *in = lua_touserdata(L, 2);
  sim_event *out = lua_touserdata(L, 3);
  lua_Integer cap = lua_tointeger(L, 4);
  lua_settop(L, 4);
  lua_rawgeti(L, LUA_REGISTRYINDEX, m->names);   /* 5: name cache */
  lapi_push_event(L, in, m->ls->s, 5);           /* 6: the event */
  lua_rawgeti(L, LUA_REGISTRYINDEX, m->ref);
  lua_pushvalue(L, 6);
  lua_call(L, 1, 1);                             /* 7: what it returned */
  int rt = lua_type(L, 7);
  lua_Integer n = 1;
  if (rt == LUA_TNIL || (rt == LUA_TBOOLEAN && lua_toboolean(L, 7))) {
    out[0] = *in;
    lapi_read_event(L, 6, &out[0]);
  } else if (rt == LUA_TBOOLEAN) {
    n = 0;
  } else if (rt != LUA_TTABLE) {
    return luaL_error(L, "a per-event function returns nothing, true, false, an event or a list of events, not a %s",
                      luaL_typename(L, 7));
  } else {
    lua_rawgeti(L, 7, 1);
    int list = lua_istable(L, -1);
    lua_pop(L, 1);
    lua_pushnil(L);
    int empty = !lua_next(L, 7); /* {}: an empty list of events, so the event is dropped */
    if (!empty) lua_pop(L, 2);
    if (empty) {
      n = 0;
    } else if (!list) {
      out[0] = *in;
      lapi_read_event(L, 7, &out[0]);
    } else {
      n = (lua_Integer)lua_rawlen(L, 7);
      if (n > cap) return luaL_error(L, "a per-event function returned %I events (at most %I)", n, cap);
      for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 7, i);
        sim_event *e = &out[i - 1];
        if (lua_rawequal(L, -1, 6)) {
          *e = *in;
        } else { /* a new event: only its place is inherited */
          sim_event_init(e);
          e->seq = -1;
          e->ts = in->ts;
          e->step = in->step;
          e->device = in->device;
          e->stream = in->stream;
        }
        lapi_read_event(L, -1, e);
        lua_pop(L, 1);
      }
    }
  }
  lua_pushinteger(L, n);
  return 1;
}

static int map_call(void *arg, const sim_event *in, sim_event *out, size_t cap, size_t *nout, char *err, size_t errlen) {
  lmap *m = arg;
  lua_State *L = m->cx->p->L;
  *nout = 0;
  if (!L || lua_host_stopped(L)) {
    snprintf(err, errlen, "%s", L ? "script stopped" : "a per-event function can only run while its script runs");
    return -1;
  }
  if (!lua_checkstack(L, 12)) {
    snprintf(err, errlen, "Lua stack overflow in a per-event function");
    return -1;
  }
  int top = lua_gettop(L);
  lua_pushcfunction(L, map_invoke);
  lua_pushlightuserdata(L, m);
  lua_pushlightuserdata(L, (void *)in);
  lua_pushlightuserdata(L, out);
  lua_pushinteger(L, (lua_Integer)cap);
  if (lua_host_pcall(L, 4, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    snprintf(err, errlen, "%s", msg ? msg : "error in a per-event function");
    lua_settop(L, top);
    return -1;
  }
  *nout = (size_t)lua_tointeger(L, -1);
  lua_settop(L, top);
  return 0;
}

static void map_release(void *arg) {
  lmap *m = arg;
  if (m->main && m->ref != LUA_NOREF) luaL_unref(m->main, LUA_REGISTRYINDEX, m->ref);
  if (m->main && m->names != LUA_NOREF) luaL_unref(m->main, LUA_REGISTRYINDEX, m->names);
  lstore_unref(m->ls);
  free(m);
}

int lapi_trace_map(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 3);
  lscratch *sc = lapi_scratch(L);
  lapi_filter(L, 3, t, &sc->f, "map", NULL);
  lua_ctx *cx = lapi_ctx(L);
  lua_State *main = lua_host_state(lua_host_from(L));
  ltrace *nt = lapi_new_trace(L);
  lua_pushvalue(L, 2);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lapi_trace_names(L, 1); /* the events it is given are t's: their names are t's too */
  int names = luaL_ref(L, LUA_REGISTRYINDEX);
  lmap *m = sim_xcalloc(1, sizeof *m);
  m->cx = cx;
  m->main = main;
  m->ref = ref;
  m->names = names;
  lstore_ref(t->ls);
  m->ls = t->ls;
  xf_node *n = xf_map(t->node, &sc->f, map_call, m, map_release);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, "");
}

/* t:merge(other [, {offset_s = seconds, device = n}]): both traces on one time line. */
int lapi_trace_merge(lua_State *L) {
  ltrace *a = lapi_check_trace(L, 1);
  ltrace *b = lapi_check_trace(L, 2);
  static const char *const keys[] = {"offset_s", "device", NULL};
  double offset = 0, device = -1;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    check_keys(L, 3, "merge", keys);
    offset = num_field(L, 3, "merge", "offset_s", 0, 0);
    device = num_field(L, 3, "merge", "device", -1, 0);
  }
  if (a->ls->s != b->ls->s) return luaL_error(L, "merge: both traces must come from the same store");
  if (device < -1 || device >= REPLAY_MAX_DEVICES || device != floor(device))
    return luaL_error(L, "merge: device must be -1..%d", REPLAY_MAX_DEVICES - 1);
  if (!(fabs(offset) < 1e9)) return luaL_error(L, "merge: offset_s is out of range");
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_merge(a->node, b->node, (int64_t)llround(offset * 1e9), (int)device);
  lapi_set_trace(nt, n, NULL, a->ls, &a->meta, 1, NULL);
  return 1;
}

/* ---- t:cache() and t:save(name) ------------------------------------------------------------- */

/* Events held in memory (t:cache()), shared by the nodes that read them. */
typedef struct lmem {
  int refs;
  sim_event *evs;
  size_t n;
  replay_plan_kept plan; /* the events' plan: the store's, or made at their second replay (source.h) */
  lua_host *h;     /* the array's bytes are reserved in its memory budget */
  size_t reserved;
} lmem;

static void mbase_release(void *arg) {
  lmem *m = arg;
  if (--m->refs > 0) return;
  lua_host_unreserve(m->h, m->reserved);
  replay_plan_kept_release(&m->plan);
  free(m->evs);
  free(m);
}

/* Appends k events to m (the array held by sc->p[1] while it is built), within the script's budget. */
static void cache_append(lua_State *L, lscratch *sc, lmem *m, size_t *cap, const sim_event *evs, size_t k) {
  if (m->n + k > *cap) {
    size_t before = *cap;
    sim_grow((void **)&m->evs, cap, m->n + k, sizeof *m->evs);
    sc->p[1] = m->evs;
    lua_host_reserve(L, (*cap - before) * sizeof *m->evs); /* raises past the budget */
    m->reserved += (*cap - before) * sizeof *m->evs;
  }
  memcpy(m->evs + m->n, evs, k * sizeof *evs);
  m->n += k;
}

/* Room for the n events the source says it holds, taken at once: a large array in huge pages
 * (sim_xmalloc_huge), written through without a page fault per 4 KiB, nor the copies of growing. */
static void cache_reserve(lua_State *L, lscratch *sc, lmem *m, size_t *cap, size_t n) {
  if (n < 2 || n > SIZE_MAX / sizeof *m->evs) return;
  size_t bytes = n * sizeof *m->evs;
  lua_host_reserve(L, bytes); /* raises past the budget */
  m->reserved += bytes;
  m->evs = sc->p[1] = sim_xmalloc_huge(bytes);
  *cap = n;
}

int lapi_trace_cache(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lscratch *sc = lapi_scratch(L);
  replay_array_source held;
  if (t->arr) { /* a cached trace: its array lent as it lies, with its plan when it has one */
    sc->src = replay_array_source_planned(&held, t->arr, t->narr, xf_base_plan(t->base));
    sc->src_open = 1;
  } else {
    lapi_scratch_open(L, sc, t);
  }
  lmem *m = sc->p[0] = sim_xcalloc(1, sizeof *m);
  m->refs = 1;
  m->h = lua_host_from(L);
  size_t cap = 0;
  cache_reserve(L, sc, m, &cap, sc->src.length_hint);
  sim_event ev;
  replay_plan_gather g = {0}; /* the store's plan, lent with the events (its numbers in sc->p[2] until kept) */
  if (sc->src.view) { /* a source that lends its events: copied a block at a time */
    const sim_event *evs;
    ptrdiff_t k;
    while ((k = sc->src.view(sc->src.ctx, &evs)) > 0) {
      cache_append(L, sc, m, &cap, evs, (size_t)k);
      replay_plan_gather_add(&g, sc->src.view_slots ? sc->src.view_slots(sc->src.ctx) : NULL, (size_t)k);
      sc->p[2] = g.slot;
      sc->src.advance(sc->src.ctx, (size_t)k);
    }
    if (k < 0) {
      const char *msg = sc->src.error ? sc->src.error(sc->src.ctx) : NULL;
      char err[XF_ERRLEN];
      snprintf(err, sizeof err, "%s", msg && *msg ? msg : "cannot read events");
      lapi_scratch_free(sc);
      return luaL_error(L, "cache: %s", err);
    }
  } else {
    while (lapi_scratch_next(L, sc, &ev, "cache") > 0) cache_append(L, sc, m, &cap, &ev, 1);
  }
  ltrace *nt = lapi_new_trace(L);
  replay_plan_gather_end(&g, m->evs, m->n, &m->plan.plan); /* or none: made at the second replay */
  sc->p[0] = sc->p[1] = sc->p[2] = NULL;
  lapi_scratch_free(sc);
  xf_node *n = xf_base_array(m->evs, m->n, m, mbase_release, &m->plan);
  /* A base of its own with the same meaning as t: lifetimes carry over only when t was not
   * transformed (the sequence numbers are the same). */
  lapi_set_trace(nt, n, n, t->ls, &t->meta, t->derived, t->derived ? NULL : t->lt);
  nt->arr = m->evs; /* the node holds m: the array lives as long as the trace */
  nt->narr = m->n;
  return 1;
}

/* Translating ids when the trace's store is not the store written to. */
typedef struct frames_acc {
  store_frame *f;
  char **keep;
  size_t n, cap, kcap;
} frames_acc;

static int collect_frame(void *arg, const store_frame *f) {
  frames_acc *a = arg;
  sim_grow((void **)&a->f, &a->cap, a->n + 1, sizeof *a->f);
  sim_grow((void **)&a->keep, &a->kcap, 2 * a->n + 2, sizeof *a->keep);
  a->keep[2 * a->n] = strdup(f->name ? f->name : "");
  a->keep[2 * a->n + 1] = strdup(f->file ? f->file : "");
  a->f[a->n] = (store_frame){a->keep[2 * a->n], a->keep[2 * a->n + 1], f->line};
  a->n++;
  return 0;
}

static int64_t map_name(store *from, store *to, sim_map *cache, int64_t id) {
  if (!id || from == to) return id;
  uint64_t *p = sim_map_get(cache, (uint64_t)id);
  if (p) return (int64_t)*p;
  const char *s = store_string(from, id);
  int64_t nid = s ? store_intern_string(to, s, strlen(s)) : 0;
  *sim_map_put(cache, (uint64_t)id, NULL) = (uint64_t)nid;
  return nid;
}

static int64_t map_stack(store *from, store *to, sim_map *cache, int64_t id) {
  if (!id || from == to) return id;
  uint64_t *p = sim_map_get(cache, (uint64_t)id);
  if (p) return (int64_t)*p;
  frames_acc a = {0};
  store_stack_frames(from, id, collect_frame, &a);
  int64_t nid = a.n ? store_intern_stack(to, a.f, a.n) : 0;
  for (size_t i = 0; i < 2 * a.n; i++) free(a.keep[i]);
  free(a.keep);
  free(a.f);
  *sim_map_put(cache, (uint64_t)id, NULL) = (uint64_t)nid;
  return nid;
}

/* The attrs of a trace t:save() writes into dst: where it came from, as JSON text in a generator. */
static yajl_gen saved_attrs(const ltrace *t, store *dst, const char *script, int address_order) {
  char *desc = xf_node_describe(t->node);
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  jsonw_kstr(g, "derived_from", t->meta.name);
  if (t->ls->s == dst && t->meta.id > 0) jsonw_kint(g, "derived_from_id", t->meta.id);
  jsonw_str(g, "transforms");
  yajl_gen_array_open(g);
  for (const char *s = desc; *s;) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    if (len) jsonw_strn(g, s, len);
    s += len + (nl ? 1 : 0);
  }
  yajl_gen_array_close(g);
  jsonw_kstr(g, "script", script);
  /* the platform's way with addresses goes with the events: the saved trace has no recorded
   * segments to tell it (docs/allocators.md, "The simulated device") */
  if (address_order >= 0) jsonw_kstr(g, "address_order", address_order == SIM_VA_UP ? "up" : "down");
  yajl_gen_map_close(g);
  free(desc);
  return g;
}

/* t:save(name): writes the trace into the command's store (in the run's transaction). */
int lapi_trace_save(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lua_ctx *cx = lapi_ctx(L);
  if (!*name) return luaL_argerror(L, 2, "a trace needs a name");
  if (!cx->st) return luaL_error(L, "save: no store to write to");
  store *dst = cx->st;
  store_trace exists;
  int found = store_trace_find(dst, name, &exists);
  if (found == 0) {
    store_trace_clear(&exists);
    return luaL_error(L, "save: a trace named '%s' exists already", name);
  }
  if (found < 0) return luaL_error(L, "%s", store_error(dst));
  const char *why;
  char oerr[256];
  int order = session_trace_address_order(t->ls->s, &t->meta, &why, oerr, sizeof oerr);
  if (order == -2) return luaL_error(L, "save: %s", oerr);
  lapi_begin(L, cx);
  lscratch *sc = lapi_scratch(L);
  yajl_gen g = saved_attrs(t, dst, cx->script, order);
  store_trace meta = t->meta;
  meta.name = (char *)name;
  meta.source_format = (char *)"derived";
  meta.source_file = NULL;
  meta.imported_at = NULL;
  meta.attrs = (char *)jsonw_text(g, NULL);
  int rc = store_writer_begin(dst, &meta, &sc->w);
  yajl_gen_free(g);
  if (rc) return luaL_error(L, "save: %s", store_error(dst));
  lapi_scratch_open(L, sc, t);
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "save") > 0) {
    ev.name = map_name(t->ls->s, dst, &sc->m1, ev.name);
    ev.stack = map_stack(t->ls->s, dst, &sc->m2, ev.stack);
    if (store_writer_event(sc->w, &ev)) return luaL_error(L, "save: cannot write trace '%s': %s", name, store_error(dst));
  }
  int64_t id = store_writer_trace_id(sc->w);
  store_writer *w = sc->w;
  sc->w = NULL;
  if (store_writer_end(w)) return luaL_error(L, "save: cannot write trace '%s': %s", name, store_error(dst));
  lapi_scratch_free(sc);
  /* the saved trace, as a Trace of its own */
  lapi_push_store(L, cx->p->main);
  lua_getfield(L, -1, "trace");
  lua_insert(L, -2);
  lua_pushinteger(L, id);
  lua_call(L, 2, 1);
  return 1;
}

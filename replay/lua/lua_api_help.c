/* lua_api_help.c: helpers of the memplay library: the run's context, stores, traces, scratch, arguments, results. */
#include <stdlib.h>
#include <string.h>

#include "lua_api_help.h"
#include "lua_lib_funcs.h"

/* ---- the run's context ---------------------------------------------------------------------- */

lua_ctx *lapi_ctx(lua_State *L) {
  lua_ctx *cx = lua_host_context(L);
  if (!cx) luaL_error(L, "memplay: no host context (the library runs inside memplay only)");
  cx->p->L = L;
  return cx;
}

session *lapi_session(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  if (!cx->p->ses) {
    cx->p->own_ses = !cx->ses;
    cx->p->ses = cx->ses ? cx->ses : session_new(cx->st);
  }
  return cx->p->ses;
}

int lapi_begin(lua_State *L, lua_ctx *cx) {
  if (cx->p->tx) return 0;
  if (!cx->st) return luaL_error(L, "no store to write to");
  if (store_begin(cx->st)) return luaL_error(L, "%s", store_error(cx->st));
  cx->p->tx = 1;
  return 0;
}

/* ---- shared stores -------------------------------------------------------------------------- */

lstore *lstore_new(store *s, int owned, int writable) {
  lstore *ls = sim_xcalloc(1, sizeof *ls);
  ls->refs = 1;
  ls->s = s;
  ls->owned = owned;
  ls->writable = writable;
  return ls;
}

void lstore_ref(lstore *ls) {
  if (ls) ls->refs++;
}

void lstore_unref(lstore *ls) {
  if (!ls || --ls->refs > 0) return;
  if (ls->own_labels) session_labels_free(ls->labels);
  if (ls->owned && ls->s) store_close(ls->s);
  free(ls);
}

session_labels *lstore_labels(lstore *ls) {
  if (!ls) return NULL;
  if (!ls->labels) {
    ls->labels = session_labels_new(ls->s);
    ls->own_labels = 1;
  }
  return ls->labels;
}

replay_names lstore_names(lstore *ls) { return session_labels_names(lstore_labels(ls)); }

void lapi_push_store(lua_State *L, lstore *ls) {
  ustore *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->ls = NULL; /* inert until the metatable is set */
  luaL_setmetatable(L, LAPI_STORE);
  lstore_ref(ls);
  u->ls = ls;
}

/* ---- traces --------------------------------------------------------------------------------- */

static char *dupn(const char *s) { return s ? strdup(s) : NULL; }

static void meta_copy(store_trace *d, const store_trace *s) {
  *d = *s;
  d->name = dupn(s->name);
  d->source_format = dupn(s->source_format);
  d->source_file = dupn(s->source_file);
  d->device_name = dupn(s->device_name);
  d->framework = dupn(s->framework);
  d->allocator = dupn(s->allocator);
  d->allocator_settings = dupn(s->allocator_settings);
  d->imported_at = dupn(s->imported_at);
  d->attrs = dupn(s->attrs);
  d->stored_at = dupn(s->stored_at);
  d->source_digest = dupn(s->source_digest);
}

void lapi_push_meta(lua_State *L, const store_trace *t) {
  lua_newtable(L);
  lapi_set_int(L, "id", t->id);
  lapi_set_str(L, "name", t->name);
  lapi_set_str(L, "source_format", t->source_format);
  lapi_set_str(L, "source_file", t->source_file);
  lapi_set_str(L, "device_name", t->device_name);
  if (t->device_memory > 0) lapi_set_int(L, "device_memory", t->device_memory);
  if (t->device_index >= 0) lapi_set_int(L, "device_index", t->device_index);
  lapi_set_str(L, "framework", t->framework);
  lapi_set_str(L, "allocator", t->allocator);
  lapi_set_str(L, "allocator_settings", t->allocator_settings);
  if (t->batch_size > 0) lapi_set_int(L, "batch_size", t->batch_size);
  lapi_set_str(L, "imported_at", t->imported_at);
  lapi_set_int(L, "event_count", t->event_count);
  lapi_set_str(L, "attrs", t->attrs);
}

ltrace *lapi_check_trace(lua_State *L, int idx) {
  ltrace *t = luaL_checkudata(L, idx, LAPI_TRACE);
  if (!t->node) luaL_error(L, "the trace has been released");
  return t;
}

ltrace *lapi_new_trace(lua_State *L) {
  ltrace *t = lua_newuserdatauv(L, sizeof *t, 1); /* its user value: its events' names, once read (lapi_trace_names) */
  memset(t, 0, sizeof *t); /* inert until set */
  luaL_setmetatable(L, LAPI_TRACE);
  return t;
}

void lapi_trace_names(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_getiuservalue(L, idx, 1) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, idx, 1);
}

void lapi_set_trace(ltrace *t, xf_node *node, xf_node *base, lstore *ls, const store_trace *meta, int derived,
                    xf_lifetime *lt) {
  t->node = node;
  t->base = base;
  lstore_ref(ls);
  t->ls = ls;
  meta_copy(&t->meta, meta);
  t->derived = derived;
  xf_lifetime_ref(lt);
  t->lt = lt;
}

int lapi_open(lua_State *L, ltrace *t, replay_source *src, char *err, size_t errlen) {
  lapi_ctx(L); /* per-event Lua functions run on the calling thread */
  return xf_open(t->node, src, err, errlen);
}

/* ---- scratch -------------------------------------------------------------------------------- */

void lapi_scratch_free(lscratch *sc) {
  if (sc->src_open) {
    replay_source_close(&sc->src);
    sc->src_open = 0;
  }
  sim_map_release(&sc->m1);
  sim_map_release(&sc->m2);
  sim_map_release(&sc->m3);
  sim_map_release(&sc->m4);
  for (size_t i = 0; i < sizeof sc->p / sizeof sc->p[0]; i++) {
    free(sc->p[i]);
    sc->p[i] = NULL;
  }
  xf_filter_release(&sc->f);
  xf_filter_release(&sc->f2);
  if (sc->w) {
    store_writer_abort(sc->w);
    sc->w = NULL;
  }
  if (sc->res) {
    replay_result_release(sc->res);
    free(sc->res);
    sc->res = NULL;
  }
}

int lapi_scratch_gc(lua_State *L) {
  lapi_scratch_free(luaL_checkudata(L, 1, LAPI_SCRATCH));
  return 0;
}

lscratch *lapi_scratch(lua_State *L) {
  lscratch *sc = lua_newuserdatauv(L, sizeof *sc, 0);
  memset(sc, 0, sizeof *sc);
  sim_map_init(&sc->m1);
  sim_map_init(&sc->m2);
  sim_map_init(&sc->m3);
  sim_map_init(&sc->m4);
  xf_filter_init(&sc->f);
  xf_filter_init(&sc->f2);
  luaL_setmetatable(L, LAPI_SCRATCH);
  return sc;
}

void lapi_scratch_open(lua_State *L, lscratch *sc, ltrace *t) {
  char err[XF_ERRLEN];
  if (lapi_open(L, t, &sc->src, err, sizeof err)) luaL_error(L, "cannot read trace '%s': %s", t->meta.name, err);
  sc->src_open = 1;
}

int lapi_scratch_next(lua_State *L, lscratch *sc, sim_event *ev, const char *what) {
  int rc = replay_source_next(&sc->src, ev);
  if (rc >= 0) return rc;
  char err[XF_ERRLEN];
  const char *m = sc->src.error ? sc->src.error(sc->src.ctx) : NULL;
  snprintf(err, sizeof err, "%s", m && *m ? m : "cannot read events");
  lapi_scratch_free(sc);
  return luaL_error(L, "%s: %s", what, err);
}

/* ---- arguments and option tables ------------------------------------------------------------ */

uint64_t lapi_check_size(lua_State *L, int idx, const char *what) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    if (lua_isinteger(L, idx)) {
      lua_Integer v = lua_tointeger(L, idx);
      if (v < 0) luaL_error(L, "%s must be a size >= 0, not %I", what, v);
      return (uint64_t)v;
    }
    lua_Number v = lua_tonumber(L, idx);
    if (!(v >= 0) || v > 1.8e19) luaL_error(L, "%s must be a size >= 0, not %f", what, v);
    if (v > (lua_Number)SIM_SIZE_MAX) luaL_error(L, "%s is %f bytes, more than a device could have (at most 1 PiB)", what, v);
    return (uint64_t)v;
  }
  if (lua_type(L, idx) == LUA_TSTRING) {
    uint64_t v;
    if (sim_parse_size(lua_tostring(L, idx), &v))
      luaL_error(L, "%s must be a size such as 4096, '512MiB' or '24GB', not '%s'", what, lua_tostring(L, idx));
    if (v > SIM_SIZE_MAX)
      luaL_error(L, "%s is '%s', more than a device could have (at most 1 PiB)", what, lua_tostring(L, idx));
    return v;
  }
  luaL_error(L, "%s must be a size (a number of bytes or a string such as '24GB'), not a %s", what,
             luaL_typename(L, idx));
  return 0;
}

static int is_known(const char *k, const char *const *keys) {
  for (size_t i = 0; keys && keys[i]; i++)
    if (!strcmp(k, keys[i])) return 1;
  return 0;
}

void lapi_check_options(lua_State *L, int idx, const char *fn, const char *const *keys, const char *const *extra) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int ok = lua_type(L, -1) == LUA_TSTRING && (is_known(lua_tostring(L, -1), keys) || is_known(lua_tostring(L, -1), extra));
    if (ok) continue;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *const *lists[2] = {extra, keys};
    for (int l = 0; l < 2; l++)
      for (size_t i = 0; lists[l] && lists[l][i]; i++) {
        if (luaL_bufflen(&b)) luaL_addstring(&b, ", ");
        luaL_addstring(&b, lists[l][i]);
      }
    luaL_pushresult(&b);
    if (lua_type(L, -2) == LUA_TSTRING)
      luaL_error(L, "%s: unknown option '%s' (known: %s)", fn, lua_tostring(L, -2), lua_tostring(L, -1));
    luaL_error(L, "%s: options are named (known: %s)", fn, lua_tostring(L, -1));
  }
}

void lapi_range(lua_State *L, int idx, const char *key, double *lo, double *hi) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) {
    *lo = *hi = lua_tonumber(L, idx);
    return;
  }
  if (lua_type(L, idx) != LUA_TTABLE) luaL_error(L, "'%s' must be a number or a range {from, to}", key);
  static const char *const names[2][2] = {{"min", "from"}, {"max", "to"}};
  double *out[2] = {lo, hi};
  for (int i = 0; i < 2; i++) {
    lua_rawgeti(L, idx, i + 1);
    for (int k = 0; k < 2 && lua_isnil(L, -1); k++) {
      lua_pop(L, 1);
      lua_getfield(L, idx, names[i][k]);
    }
    if (!lua_isnil(L, -1)) {
      if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "'%s': the range's %s must be a number", key, i ? "end" : "start");
      *out[i] = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
  }
}

void lapi_push_lines(lua_State *L, const char *text) {
  lua_newtable(L);
  int i = 0;
  for (const char *s = text; *s;) {
    const char *nl = strchr(s, '\n');
    size_t len = nl ? (size_t)(nl - s) : strlen(s);
    if (len) {
      lua_pushlstring(L, s, len);
      lua_rawseti(L, -2, ++i);
    }
    s += len + (nl ? 1 : 0);
  }
}

/* ---- results -------------------------------------------------------------------------------- */

const char lapi_results_key = 0;

lresult *lapi_result_of(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TUSERDATA) return luaL_testudata(L, idx, LAPI_RESULT);
  if (lua_type(L, idx) != LUA_TTABLE) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lapi_results_key);
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
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lapi_results_key);
  lua_pushvalue(L, idx);
  lua_rawget(L, -2);
  lua_remove(L, -2);
}

run_meta lapi_meta(const lresult *lr, const char *scenario, const char *variant, double step_time_s,
                   double samples_per_s) {
  run_meta m = session_meta(&lr->run);
  m.trace_id = lr->trace_id;
  m.trace_name = lr->trace_name;
  m.kind = "whatif";
  m.scenario = scenario;
  m.variant = variant;
  m.step_time_s = step_time_s;
  m.samples_per_s = samples_per_s;
  return m;
}

/* lua_api_store.c: the Store userdata: the script's store, stores it opens, and the traces they hold. */
#include <stdlib.h>
#include <unistd.h>

#include "lua_api_help.h"
#include "lua_lib_funcs.h"
#include "store/store_source.h"

/* ---- memplay.store(), memplay.open(path), memplay.trace() ----------------------------------- */

int lapi_mp_store(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  if (!cx->st) return luaL_error(L, "no store: name one with --db or MEMPLAY_DB");
  lapi_push_store(L, cx->p->main);
  return 1;
}

int lapi_mp_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lapi_ctx(L);
  store *s;
  char err[STORE_ERRLEN];
  if (access(path, F_OK) != 0) return luaL_error(L, "cannot open store '%s': no such file", path);
  if (store_open(&s, path, STORE_READONLY, err, sizeof err)) return luaL_error(L, "%s", err);
  lstore *ls = lstore_new(s, 1, 0);
  lapi_push_store(L, ls);
  lstore_unref(ls);
  return 1;
}

/* The trace named on the command line, over its events the caller holds in memory (its own base,
 * read in place as t:cache()'s is). */
static int push_held_trace(lua_State *L, lua_ctx *cx) {
  ltrace *nt = lapi_new_trace(L);
  store_trace t;
  char ref[32];
  snprintf(ref, sizeof ref, "%lld", (long long)cx->trace_id);
  int rc = store_trace_find(cx->p->main->s, ref, &t);
  if (rc) return luaL_error(L, "%s", rc < 0 ? store_error(cx->p->main->s) : "the trace is no longer in the store");
  cx->p->held_plan.lent = cx->trace_plan;
  xf_node *n = xf_base_array(cx->trace_events, cx->ntrace_events, NULL, NULL, &cx->p->held_plan);
  lapi_set_trace(nt, n, n, cx->p->main, &t, 0, NULL);
  store_trace_clear(&t);
  nt->arr = cx->trace_events;
  nt->narr = cx->ntrace_events;
  return 1;
}

/* memplay.trace(): the trace named on the command line (whatif), as a Trace. */
int lapi_mp_trace(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  if (!cx->trace_id) {
    lua_pushnil(L);
    return 1;
  }
  if (cx->trace_events && cx->p->main) return push_held_trace(L, cx);
  lapi_push_store(L, cx->p->main);
  lua_getfield(L, -1, "trace");
  lua_insert(L, -2);
  lua_pushinteger(L, cx->trace_id);
  lua_call(L, 2, 1);
  return 1;
}

/* ---- the Store userdata --------------------------------------------------------------------- */

static ustore *check_store(lua_State *L, int idx) {
  ustore *u = luaL_checkudata(L, idx, LAPI_STORE);
  if (!u->ls || !u->ls->s) luaL_error(L, "the store is closed");
  return u;
}

int lapi_store_gc(lua_State *L) {
  ustore *u = luaL_checkudata(L, 1, LAPI_STORE);
  lstore_unref(u->ls);
  u->ls = NULL;
  return 0;
}

int lapi_store_tostring(lua_State *L) {
  ustore *u = luaL_checkudata(L, 1, LAPI_STORE);
  lua_pushfstring(L, "memplay.store(%s)", u->ls && u->ls->s ? store_path(u->ls->s) : "closed");
  return 1;
}

int lapi_store_path(lua_State *L) {
  lua_pushstring(L, store_path(check_store(L, 1)->ls->s));
  return 1;
}

static int each_trace(void *arg, const store_trace *t) {
  lua_State *L = arg;
  lapi_push_meta(L, t);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

int lapi_store_traces(lua_State *L) {
  ustore *u = check_store(L, 1);
  lua_newtable(L);
  if (store_trace_each(u->ls->s, each_trace, L)) return luaL_error(L, "%s", store_error(u->ls->s));
  return 1;
}

/* ---- s:trace(name or id): a stored trace as the base of a Trace ----------------------------- */

typedef struct sbase {
  lstore *ls;
  int64_t trace_id;
} sbase;

static int sbase_open(void *arg, replay_source *out, char *err, size_t errlen) {
  sbase *b = arg;
  if (!b->ls->s) {
    snprintf(err, errlen, "the store of this trace is closed");
    return -1;
  }
  if (store_source_open(out, b->ls->s, b->trace_id)) {
    snprintf(err, errlen, "%s", store_error(b->ls->s));
    return -1;
  }
  return 0;
}

static void sbase_release(void *arg) {
  sbase *b = arg;
  lstore_unref(b->ls);
  free(b);
}

int lapi_store_trace(lua_State *L) {
  ustore *u = check_store(L, 1);
  char ref[32];
  const char *name;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    snprintf(ref, sizeof ref, "%lld", (long long)luaL_checkinteger(L, 2));
    name = ref;
  } else {
    name = luaL_checkstring(L, 2);
  }
  ltrace *nt = lapi_new_trace(L);
  store_trace t;
  int rc = store_trace_find(u->ls->s, name, &t);
  if (rc) return luaL_error(L, "%s", store_error(u->ls->s));
  sbase *b = sim_xcalloc(1, sizeof *b);
  lstore_ref(u->ls);
  b->ls = u->ls;
  b->trace_id = t.id;
  xf_node *n = xf_base(sbase_open, b, sbase_release);
  lapi_set_trace(nt, n, n, u->ls, &t, 0, NULL);
  store_trace_clear(&t);
  return 1;
}

/* lua_api_trace.c: Store and Trace userdata: listing, events and filters, summaries, transforms, saving. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "lua_api_int.h"
#include "store/store_source.h"

/* ---- shared stores ------------------------------------------------------------------------ */

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
  if (ls->owned && ls->s) store_close(ls->s);
  free(ls);
}

/* ---- base traces: stored, or held in memory ------------------------------------------------ */

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

static void mbase_release(void *arg) {
  lmem *m = arg;
  if (--m->refs > 0) return;
  free(m->evs);
  free(m);
}

/* ---- metadata ------------------------------------------------------------------------------ */

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
}

static void set_str(lua_State *L, const char *k, const char *v) {
  if (!v) return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

static void push_meta(lua_State *L, const store_trace *t) {
  lua_newtable(L);
  set_int(L, "id", t->id);
  set_str(L, "name", t->name);
  set_str(L, "source_format", t->source_format);
  set_str(L, "source_file", t->source_file);
  set_str(L, "device_name", t->device_name);
  if (t->device_memory > 0) set_int(L, "device_memory", t->device_memory);
  if (t->device_index >= 0) set_int(L, "device_index", t->device_index);
  set_str(L, "framework", t->framework);
  set_str(L, "allocator", t->allocator);
  set_str(L, "allocator_settings", t->allocator_settings);
  if (t->batch_size > 0) set_int(L, "batch_size", t->batch_size);
  set_str(L, "imported_at", t->imported_at);
  set_int(L, "event_count", t->event_count);
  set_str(L, "attrs", t->attrs);
}

/* ---- the Store userdata -------------------------------------------------------------------- */

typedef struct ustore {
  lstore *ls;
} ustore;

static ustore *check_store(lua_State *L, int idx) {
  ustore *u = luaL_checkudata(L, idx, LAPI_STORE);
  if (!u->ls || !u->ls->s) luaL_error(L, "the store is closed");
  return u;
}

void lapi_push_store(lua_State *L, lstore *ls) {
  ustore *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->ls = NULL; /* inert until the metatable is set */
  luaL_setmetatable(L, LAPI_STORE);
  lstore_ref(ls);
  u->ls = ls;
}

static int store_gc(lua_State *L) {
  ustore *u = luaL_checkudata(L, 1, LAPI_STORE);
  lstore_unref(u->ls);
  u->ls = NULL;
  return 0;
}

static int store_tostring(lua_State *L) {
  ustore *u = luaL_checkudata(L, 1, LAPI_STORE);
  lua_pushfstring(L, "memplay.store(%s)", u->ls && u->ls->s ? store_path(u->ls->s) : "closed");
  return 1;
}

static int store_path_l(lua_State *L) {
  lua_pushstring(L, store_path(check_store(L, 1)->ls->s));
  return 1;
}

static int each_trace(void *arg, const store_trace *t) {
  lua_State *L = arg;
  push_meta(L, t);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

static int store_traces(lua_State *L) {
  ustore *u = check_store(L, 1);
  lua_newtable(L);
  if (store_trace_each(u->ls->s, each_trace, L)) return luaL_error(L, "%s", store_error(u->ls->s));
  return 1;
}

static int store_trace_l(lua_State *L) {
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

void lapi_store_register(lua_State *L) {
  static const luaL_Reg meth[] = {
    {"traces", store_traces},
    {"trace", store_trace_l},
    {"path", store_path_l},
    {NULL, NULL},
  };
  static const luaL_Reg metameth[] = {
    {"__index", NULL},
    {"__gc", store_gc},
    {"__close", store_gc},
    {"__tostring", store_tostring},
    {NULL, NULL},
  };
  luaL_newmetatable(L, LAPI_STORE);
  luaL_setfuncs(L, metameth, 0);
  luaL_newlib(L, meth);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

/* ---- the Trace userdata -------------------------------------------------------------------- */

static void summary_unref(lsummary *s) {
  if (!s || --s->refs > 0) return;
  free(s->streams);
  free(s->names);
  free(s->sites);
  free(s);
}

ltrace *lapi_check_trace(lua_State *L, int idx) {
  ltrace *t = luaL_checkudata(L, idx, LAPI_TRACE);
  if (!t->node) luaL_error(L, "the trace has been released");
  return t;
}

ltrace *lapi_new_trace(lua_State *L) {
  ltrace *t = lua_newuserdatauv(L, sizeof *t, 0);
  memset(t, 0, sizeof *t); /* inert until set */
  luaL_setmetatable(L, LAPI_TRACE);
  return t;
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

static int trace_gc(lua_State *L) {
  ltrace *t = luaL_checkudata(L, 1, LAPI_TRACE);
  if (!t->node) return 0;
  xf_node_unref(t->node);
  t->node = NULL;
  lstore_unref(t->ls);
  t->ls = NULL;
  store_trace_clear(&t->meta);
  xf_lifetime_unref(t->lt);
  t->lt = NULL;
  summary_unref(t->sum);
  t->sum = NULL;
  summary_unref(t->bsum);
  t->bsum = NULL;
  return 0;
}

static int trace_tostring(lua_State *L) {
  ltrace *t = luaL_checkudata(L, 1, LAPI_TRACE);
  if (!t->node) lua_pushliteral(L, "memplay.trace(released)");
  else lua_pushfstring(L, "memplay.trace(%s%s)", t->meta.name ? t->meta.name : "?", t->derived ? ", derived" : "");
  return 1;
}

int lapi_open(lua_State *L, ltrace *t, replay_source *src, char *err, size_t errlen) {
  lapi_ctx(L); /* per-event Lua functions run on the calling thread */
  return xf_open(t->node, src, err, errlen);
}

/* ---- summaries and lifetimes ---------------------------------------------------------------- */

static void add_id(int64_t **arr, size_t *n, size_t *cap, sim_map *seen, int64_t id) {
  int existed;
  sim_map_put(seen, (uint64_t)id, &existed);
  if (existed) return;
  sim_grow((void **)arr, cap, *n + 1, sizeof **arr);
  (*arr)[(*n)++] = id;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Reads the events of node n (of trace t) into a new summary (one reference). */
static lsummary *summarize(lua_State *L, ltrace *t, const xf_node *n) {
  lscratch *sc = lapi_scratch(L);
  char err[XF_ERRLEN];
  lapi_ctx(L);
  if (xf_open(n, &sc->src, err, sizeof err)) luaL_error(L, "cannot read trace '%s': %s", t->meta.name, err);
  sc->src_open = 1;
  size_t sitecap = 0;
  lsummary *s = sc->p[0] = sim_xcalloc(1, sizeof *s);
  s->refs = 1;
  s->size_min = UINT64_MAX;
  s->step_min = INT32_MAX;
  s->step_max = INT32_MIN;
  s->first_ts = INT64_MAX;
  s->live_peak_seq = -1;
  size_t scap = 0, ncap = 0;
  int64_t live_bytes = 0;
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "summary") > 0) {
    s->events++;
    if (ev.kind < SIM_EV__COUNT) s->by_kind[ev.kind]++;
    if (ev.ts < s->first_ts) s->first_ts = ev.ts;
    if (ev.ts > s->last_ts) s->last_ts = ev.ts;
    if (ev.step >= 0) {
      if (ev.step < s->step_min) s->step_min = ev.step;
      if (ev.step > s->step_max) s->step_max = ev.step;
    }
    if (ev.device >= -1 && ev.device < REPLAY_MAX_DEVICES) s->devices[ev.device + 1] = 1;
    if (ev.name) add_id(&s->names, &s->nnames, &ncap, &sc->m3, ev.name), sc->p[1] = s->names;
    if (ev.stack) add_id(&s->sites, &s->nsites, &sitecap, &sc->m4, ev.stack), sc->p[3] = s->sites;
    switch (ev.kind) {
    case SIM_EV_ALLOC: {
      s->allocs++;
      s->alloc_bytes += ev.size;
      if (ev.size < s->size_min) s->size_min = ev.size;
      if (ev.size > s->size_max) s->size_max = ev.size;
      int c = ev.category < SIM_CAT__COUNT ? ev.category : 0;
      s->cat_allocs[c]++;
      s->cat_bytes[c] += ev.size;
      add_id(&s->streams, &s->nstreams, &scap, &sc->m2, ev.stream);
      sc->p[2] = s->streams;
      int existed;
      uint64_t *slot = sim_map_put(&sc->m1, ev.addr, &existed);
      if (existed) live_bytes -= (int64_t)*slot;
      *slot = ev.size;
      live_bytes += (int64_t)ev.size;
      if (live_bytes > s->live_peak) {
        s->live_peak = live_bytes;
        s->live_peak_seq = ev.seq;
      }
      break;
    }
    case SIM_EV_FREE:
    case SIM_EV_FREE_REQUESTED: {
      uint64_t v;
      s->frees++;
      if (sim_map_del(&sc->m1, ev.addr, &v)) live_bytes -= (int64_t)v;
      break;
    }
    case SIM_EV_KERNEL: s->kernel_ns += ev.dur > 0 ? (uint64_t)ev.dur : 0; break;
    case SIM_EV_MEMCPY:
      if (ev.dir < SIM_COPY__COUNT && ev.mem < SIM_MEM__COUNT) {
        s->copies[ev.dir][ev.mem]++;
        s->copy_bytes[ev.dir][ev.mem] += ev.size;
      }
      s->copy_ns += ev.dur > 0 ? (uint64_t)ev.dur : 0;
      break;
    case SIM_EV_MARKER:
      if (ev.flags & SIM_EVF_STEP_BEGIN) s->step_markers++;
      break;
    default: break;
    }
  }
  sc->p[0] = sc->p[1] = sc->p[2] = sc->p[3] = NULL; /* now the caller's */
  lapi_scratch_free(sc);
  lua_pop(L, 1);
  if (!s->allocs) s->size_min = 0;
  if (!s->events) s->first_ts = 0;
  if (s->names) qsort(s->names, s->nnames, sizeof *s->names, cmp_i64);
  if (s->streams) qsort(s->streams, s->nstreams, sizeof *s->streams, cmp_i64);
  if (s->sites) qsort(s->sites, s->nsites, sizeof *s->sites, cmp_i64);
  return s;
}

lsummary *lapi_summary(lua_State *L, ltrace *t) {
  if (!t->sum) t->sum = summarize(L, t, t->node);
  return t->sum;
}

lsummary *lapi_base_summary(lua_State *L, ltrace *t) {
  if (t->bsum) return t->bsum;
  if (!t->base || t->base == t->node) {
    t->bsum = lapi_summary(L, t);
    t->bsum->refs++; /* shared with t->sum */
  } else {
    t->bsum = summarize(L, t, t->base);
  }
  return t->bsum;
}



xf_lifetime *lapi_lifetime(lua_State *L, ltrace *t) {
  if (t->lt) return t->lt;
  if (!t->base) {
    luaL_error(L, "lifetimes (and the category fallback) need a trace with one base; this one merges two");
    return NULL;
  }
  char err[XF_ERRLEN];
  replay_source src;
  lapi_ctx(L);
  if (xf_open(t->base, &src, err, sizeof err)) {
    luaL_error(L, "cannot read trace '%s': %s", t->meta.name, err);
    return NULL;
  }
  xf_lifetime *lt = xf_lifetime_compute(&src, err, sizeof err);
  replay_source_close(&src);
  if (!lt) {
    luaL_error(L, "cannot read trace '%s': %s", t->meta.name, err);
    return NULL;
  }
  t->lt = lt;
  return lt;
}

/* ---- filters ------------------------------------------------------------------------------- */

static const char *const filter_keys[] = {"kind",       "category",     "lifetime",   "mem",
                                          "dir",        "stream",       "device",     "step",
                                          "size",       "min_size",     "max_size",   "seq",
                                          "site",       "site_match",   "exclude_site", "exclude_site_match",
                                          "name",       "class",        "flags",      "not_flags",
                                          NULL};

static int kind_from(const char *s) { return sim_event_kind_from_name(s); }
static const char *kind_of(int k) { return k == 0 ? NULL : sim_event_kind_name(k); }
static int cat_from(const char *s) { return sim_category_from_name(s); }
static const char *cat_of(int k) { return sim_category_name(k); }
static int mem_from(const char *s) { return sim_mem_kind_from_name(s); }
static const char *mem_of(int k) { return sim_mem_kind_name(k); }
static int dir_from(const char *s) { return sim_copy_dir_from_name(s); }
static const char *dir_of(int k) { return sim_copy_dir_name(k); }
static int class_from(const char *s) { return xf_kernel_class_from_name(s); }
static const char *class_of(int k) { return xf_kernel_class_name(k); }

/* A mask from a name or a list of names, each looked up with from_name. */
static uint32_t name_mask(lua_State *L, int idx, const char *key, int (*from_name)(const char *),
                          const char *(*name_of)(int), int count) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE && lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "filter '%s' must be a name or a list of names, not a %s", key, luaL_typename(L, idx));
  uint32_t m = 0;
  int n = lua_type(L, idx) == LUA_TTABLE ? (int)luaL_len(L, idx) : 1;
  for (int i = 1; i <= n; i++) {
    if (lua_type(L, idx) == LUA_TTABLE) lua_rawgeti(L, idx, i);
    else lua_pushvalue(L, idx);
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int v = s ? from_name(s) : -1;
    if (v < 0 || v >= count) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int k = 0; k < count; k++) {
        const char *nm = name_of(k);
        if (!nm || !strcmp(nm, "none") || !strcmp(nm, "?")) continue;
        if (luaL_bufflen(&b)) luaL_addstring(&b, ", ");
        luaL_addstring(&b, nm);
      }
      luaL_pushresult(&b);
      luaL_error(L, "filter '%s': unknown value '%s' (known: %s)", key, s ? s : "?", lua_tostring(L, -1));
    }
    m |= 1u << v;
    lua_pop(L, 1);
  }
  return m;
}

/* A range {a, b} (inclusive), {min = a, max = b}, or one number. */
static void range_of(lua_State *L, int idx, const char *key, double *lo, double *hi) {
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

static int is_known(const char *k, const char *const *keys) {
  for (size_t i = 0; keys && keys[i]; i++)
    if (!strcmp(k, keys[i])) return 1;
  return 0;
}

/* Raises an error naming the first key of the table at idx that is not in keys or keys2. */
static void check_keys2(lua_State *L, int idx, const char *fn, const char *const *keys, const char *const *keys2) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    int ok = lua_type(L, -1) == LUA_TSTRING && (is_known(lua_tostring(L, -1), keys) || is_known(lua_tostring(L, -1), keys2));
    if (ok) continue;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *const *lists[2] = {keys2, keys};
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

static void check_keys(lua_State *L, int idx, const char *fn, const char *const *keys) {
  check_keys2(L, idx, fn, keys, NULL);
}

/* Call sites whose frames mention any of the patterns (plain text). */
typedef struct site_probe {
  const char *const *pats;
  size_t npats;
  int hit;
} site_probe;

static int probe_frame(void *arg, const store_frame *f) {
  site_probe *p = arg;
  for (size_t i = 0; i < p->npats; i++)
    if ((f->name && strstr(f->name, p->pats[i])) || (f->file && strstr(f->file, p->pats[i]))) {
      p->hit = 1;
      return 1;
    }
  return 0;
}

/* The patterns at idx (a text or a list of texts) match the call sites they name. */
static void sites_matching(lua_State *L, ltrace *t, int idx, const char *key, xf_filter *f, int exclude) {
  idx = lua_absindex(L, idx);
  int tbl = lua_type(L, idx) == LUA_TTABLE;
  if (!tbl && lua_type(L, idx) != LUA_TSTRING) luaL_error(L, "filter '%s' must be text or a list of texts", key);
  size_t npats = tbl ? (size_t)luaL_len(L, idx) : 1;
  const char **pats = lua_newuserdatauv(L, (npats ? npats : 1) * sizeof *pats, 0);
  for (size_t i = 0; i < npats; i++) {
    if (tbl) lua_rawgeti(L, idx, (lua_Integer)i + 1);
    else lua_pushvalue(L, idx);
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "filter '%s' must be text or a list of texts", key);
    pats[i] = lua_tostring(L, -1);
    lua_pop(L, 1); /* the string stays reachable from the table (or value) at idx */
  }
  lsummary *sum = lapi_base_summary(L, t);
  lscratch *sc = lapi_scratch(L);
  size_t n = 0, cap = 0;
  for (size_t k = 0; k < sum->nsites; k++) {
    site_probe p = {pats, npats, 0};
    store_stack_frames(t->ls->s, sum->sites[k], probe_frame, &p);
    if (p.hit) {
      int64_t *ids = sc->p[0];
      sim_grow((void **)&ids, &cap, n + 1, sizeof *ids);
      sc->p[0] = ids;
      ids[n++] = sum->sites[k];
    }
  }
  if (exclude) xf_filter_set_excluded_sites(f, sc->p[0], n);
  else xf_filter_set_sites(f, sc->p[0], n);
  lapi_scratch_free(sc);
  lua_pop(L, 2);
}

/* A list of call site ids (or one) at idx, into a userdata array left on the stack. */
static int64_t *site_list(lua_State *L, int idx, const char *key, size_t *n) {
  idx = lua_absindex(L, idx);
  int tbl = lua_type(L, idx) == LUA_TTABLE;
  int cnt = tbl ? (int)luaL_len(L, idx) : 1;
  int64_t *ids = lua_newuserdatauv(L, (size_t)(cnt ? cnt : 1) * sizeof *ids, 0);
  for (int i = 1; i <= cnt; i++) {
    if (tbl) lua_rawgeti(L, idx, i);
    else lua_pushvalue(L, idx);
    int isnum;
    ids[i - 1] = (int64_t)lua_tointegerx(L, -1, &isnum);
    if (!isnum) luaL_error(L, "filter '%s' must be a call site id or a list of them (see trace:sites())", key);
    lua_pop(L, 1);
  }
  *n = (size_t)cnt;
  return ids;
}

void lapi_filter(lua_State *L, int idx, ltrace *t, xf_filter *f, const char *fn, const char *const *extra) {
  xf_filter_release(f);
  if (lua_isnoneornil(L, idx)) return;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) {
    luaL_error(L, "%s: expects a table of options, not a %s", fn, luaL_typename(L, idx));
    return;
  }
  /* a misspelt key must not silently match everything */
  check_keys2(L, idx, fn, filter_keys, extra);
#define FIELD(key) (lua_getfield(L, idx, key), lua_isnil(L, -1) ? (lua_pop(L, 1), 0) : 1)
  if (FIELD("kind")) {
    f->kinds = name_mask(L, -1, "kind", kind_from, kind_of, SIM_EV__COUNT);
    lua_pop(L, 1);
  }
  if (FIELD("mem")) {
    f->mems = name_mask(L, -1, "mem", mem_from, mem_of, SIM_MEM__COUNT);
    lua_pop(L, 1);
  }
  if (FIELD("dir")) {
    f->dirs = name_mask(L, -1, "dir", dir_from, dir_of, SIM_COPY__COUNT);
    lua_pop(L, 1);
  }
  if (FIELD("category")) {
    f->categories = name_mask(L, -1, "category", cat_from, cat_of, SIM_CAT__COUNT);
    lua_pop(L, 1);
  }
  if (FIELD("lifetime")) {
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (s && !strcmp(s, "persistent")) f->lifetime = XF_LIFE_PERSISTENT;
    else if (s && !strcmp(s, "transient")) f->lifetime = XF_LIFE_TRANSIENT;
    else luaL_error(L, "filter 'lifetime' must be 'persistent' or 'transient'");
    lua_pop(L, 1);
  }
  /* lifetimes stand in for categories on allocations without one */
  if (f->lifetime || (f->categories && !(f->categories & 1u))) xf_filter_set_lifetime(f, lapi_lifetime(L, t));
  if (FIELD("stream")) {
    f->has_stream = 1;
    f->stream = luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  if (FIELD("device")) {
    f->device = (int)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  if (FIELD("step")) {
    double lo = INT32_MIN, hi = INT32_MAX;
    range_of(L, -1, "step", &lo, &hi);
    f->step_min = (int32_t)fmin(fmax(lo, INT32_MIN), INT32_MAX);
    f->step_max = (int32_t)fmax(fmin(hi, INT32_MAX), INT32_MIN);
    lua_pop(L, 1);
  }
  if (FIELD("seq")) {
    double lo = -9.2e18, hi = 9.2e18;
    range_of(L, -1, "seq", &lo, &hi);
    f->seq_min = lo <= -9.2e18 ? INT64_MIN : (int64_t)lo;
    f->seq_max = hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
    lua_pop(L, 1);
  }
  if (FIELD("size")) {
    double lo = 0, hi = 1.8e19;
    range_of(L, -1, "size", &lo, &hi);
    f->size_min = lo <= 0 ? 0 : (uint64_t)lo;
    f->size_max = hi >= 1.8e19 ? UINT64_MAX : (uint64_t)hi;
    lua_pop(L, 1);
  }
  if (FIELD("min_size")) {
    f->size_min = lapi_check_size(L, -1, "filter 'min_size'");
    lua_pop(L, 1);
  }
  if (FIELD("max_size")) {
    f->size_max = lapi_check_size(L, -1, "filter 'max_size'");
    lua_pop(L, 1);
  }
  static const char *const flag_keys[2] = {"flags", "not_flags"};
  for (int which = 0; which < 2; which++) {
    if (!FIELD(flag_keys[which])) continue;
    int tbl = lua_type(L, -1) == LUA_TTABLE;
    int n = tbl ? (int)luaL_len(L, -1) : 1;
    for (int i = 1; i <= n; i++) {
      if (tbl) lua_rawgeti(L, -1, i);
      else lua_pushvalue(L, -1);
      const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
      unsigned bit = s ? sim_event_flag_from_name(s) : 0;
      if (!bit) luaL_error(L, "filter '%s': unknown flag '%s'", flag_keys[which], s ? s : "?");
      if (which) f->flags_none |= bit;
      else f->flags_all |= bit;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  if (FIELD("site")) {
    size_t n;
    int64_t *ids = site_list(L, -1, "site", &n);
    xf_filter_set_sites(f, ids, n);
    lua_pop(L, 2);
  }
  if (FIELD("site_match")) {
    sites_matching(L, t, -1, "site_match", f, 0);
    lua_pop(L, 1);
  }
  if (FIELD("exclude_site")) {
    size_t n;
    int64_t *ids = site_list(L, -1, "exclude_site", &n);
    xf_filter_set_excluded_sites(f, ids, n);
    lua_pop(L, 2);
  }
  if (FIELD("exclude_site_match")) {
    if (f->xsites) luaL_error(L, "filter: give exclude_site or exclude_site_match, not both");
    sites_matching(L, t, -1, "exclude_site_match", f, 1);
    lua_pop(L, 1);
  }
  int has_name = FIELD("name");
  int has_class = FIELD("class");
  if (has_name || has_class) {
    /* stack: [name] [class] */
    uint32_t classes = 0;
    if (has_class) classes = name_mask(L, -1, "class", class_from, class_of, XF_KERNEL__COUNT);
    int name_idx = has_name ? lua_absindex(L, has_class ? -2 : -1) : 0;
    int pats = 0;
    if (has_name) {
      if (lua_type(L, name_idx) == LUA_TSTRING) pats = 1;
      else if (lua_type(L, name_idx) == LUA_TTABLE) pats = (int)luaL_len(L, name_idx);
      else luaL_error(L, "filter 'name' must be text or a list of texts (matched as substrings)");
    }
    lsummary *s = lapi_base_summary(L, t);
    int64_t *ids = lua_newuserdatauv(L, (s->nnames ? s->nnames : 1) * sizeof *ids, 0);
    size_t nids = 0;
    luaL_Buffer b;
    for (size_t i = 0; i < s->nnames; i++) {
      const char *nm = store_string(t->ls->s, s->names[i]);
      if (!nm) continue;
      if (has_class && !((classes >> xf_kernel_class_of(nm)) & 1)) continue;
      int ok = !has_name;
      if (has_name) {
        luaL_buffinit(L, &b); /* a copy: store_string's buffer is reused */
        luaL_addstring(&b, nm);
        luaL_pushresult(&b);
        const char *copy = lua_tostring(L, -1);
        for (int k = 1; k <= pats && !ok; k++) {
          if (lua_type(L, name_idx) == LUA_TTABLE) lua_rawgeti(L, name_idx, k);
          else lua_pushvalue(L, name_idx);
          const char *pat = lua_tostring(L, -1);
          if (pat && strstr(copy, pat)) ok = 1;
          lua_pop(L, 1);
        }
        lua_pop(L, 1);
      }
      if (ok) ids[nids++] = s->names[i];
    }
    xf_filter_set_names(f, ids, nids);
    lua_pop(L, 1 + has_name + has_class);
  }
#undef FIELD
}

/* ---- events as Lua tables ------------------------------------------------------------------ */

void lapi_push_event(lua_State *L, const sim_event *ev, store *s, int cache_idx) {
  cache_idx = lua_absindex(L, cache_idx);
  lua_createtable(L, 0, 18);
  set_int(L, "seq", ev->seq);
  lua_pushstring(L, sim_event_kind_name(ev->kind));
  lua_setfield(L, -2, "kind");
  set_int(L, "ts", ev->ts);
  set_int(L, "dur", ev->dur);
  if (ev->dev_ts >= 0) set_int(L, "dev_ts", ev->dev_ts);
  if (ev->api_dur >= 0) set_int(L, "api_dur", ev->api_dur);
  set_int(L, "addr", (int64_t)ev->addr);
  set_int(L, "size", (int64_t)ev->size);
  if (ev->stream != SIM_NO_STREAM) set_int(L, "stream", ev->stream);
  set_int(L, "site", ev->stack);
  if (ev->name) {
    set_int(L, "name_id", ev->name);
    lua_rawgeti(L, cache_idx, ev->name);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      const char *nm = s ? store_string(s, ev->name) : NULL;
      lua_pushstring(L, nm ? nm : "");
      lua_pushvalue(L, -1);
      lua_rawseti(L, cache_idx, ev->name);
    }
    lua_setfield(L, -2, "name");
  }
  set_int(L, "step", ev->step);
  set_int(L, "device", ev->device);
  set_str(L, "mem", sim_mem_kind_name(ev->mem));
  set_str(L, "dir", sim_copy_dir_name(ev->dir));
  set_str(L, "category", sim_category_name(ev->category));
  set_str(L, "cat_source", sim_cat_source_name(ev->cat_source));
  set_int(L, "flags", ev->flags);
}

static int64_t opt_int_field(lua_State *L, int idx, const char *k, int64_t def) {
  lua_getfield(L, idx, k);
  int64_t v = def;
  if (!lua_isnil(L, -1)) {
    int ok;
    lua_Integer x = lua_tointegerx(L, -1, &ok);
    if (!ok) {
      if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "event field '%s' must be an integer, not a %s", k, luaL_typename(L, -1));
      lua_Number d = lua_tonumber(L, -1);
      if (d != floor(d) || fabs(d) > 9.2e18) luaL_error(L, "event field '%s' must be an integer", k);
      x = (lua_Integer)d;
    }
    v = (int64_t)x;
  }
  lua_pop(L, 1);
  return v;
}

static int enum_field(lua_State *L, int idx, const char *k, int (*from)(const char *), int def) {
  lua_getfield(L, idx, k);
  int v = def;
  if (!lua_isnil(L, -1)) {
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    v = s ? from(s) : -1;
    if (v < 0) luaL_error(L, "event field '%s': unknown value '%s'", k, s ? s : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

/* Reads an event table into ev (fields absent from the table keep ev's values). */
static void read_event(lua_State *L, int idx, sim_event *ev) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) luaL_error(L, "an event must be a table, not a %s", luaL_typename(L, idx));
  ev->kind = (uint8_t)enum_field(L, idx, "kind", kind_from, ev->kind);
  if (ev->kind == SIM_EV_NONE) luaL_error(L, "an event needs a kind ('alloc', 'free', 'kernel', ...)");
  ev->ts = opt_int_field(L, idx, "ts", ev->ts);
  ev->dur = opt_int_field(L, idx, "dur", ev->dur);
  ev->dev_ts = opt_int_field(L, idx, "dev_ts", ev->dev_ts);
  ev->api_dur = opt_int_field(L, idx, "api_dur", ev->api_dur);
  ev->addr = (uint64_t)opt_int_field(L, idx, "addr", (int64_t)ev->addr);
  lua_getfield(L, idx, "size");
  if (!lua_isnil(L, -1)) ev->size = lapi_check_size(L, -1, "event field 'size'");
  lua_pop(L, 1);
  ev->stream = opt_int_field(L, idx, "stream", ev->stream);
  ev->stack = opt_int_field(L, idx, "site", ev->stack);
  ev->name = opt_int_field(L, idx, "name_id", ev->name);
  ev->step = (int32_t)opt_int_field(L, idx, "step", ev->step);
  ev->device = (int16_t)opt_int_field(L, idx, "device", ev->device);
  ev->mem = (uint8_t)enum_field(L, idx, "mem", mem_from, ev->mem);
  ev->dir = (uint8_t)enum_field(L, idx, "dir", dir_from, ev->dir);
  int cat = enum_field(L, idx, "category", cat_from, -1);
  int cs = enum_field(L, idx, "cat_source", sim_cat_source_from_name, -1);
  if (cat >= 0 && cat != ev->category && cs < 0) cs = SIM_CATSRC_USER;
  if (cat >= 0) ev->category = (uint8_t)cat;
  if (cs >= 0) ev->cat_source = (uint8_t)cs;
  int64_t fl = opt_int_field(L, idx, "flags", ev->flags);
  if (fl < 0 || fl > 255) luaL_error(L, "event field 'flags' must be a set of memplay.flags bits");
  ev->flags = (uint8_t)fl;
}

/* ---- t:events(filter) ---------------------------------------------------------------------- */

static int events_iter(lua_State *L) {
  lscratch *sc = lua_touserdata(L, lua_upvalueindex(1));
  ltrace *t = lua_touserdata(L, lua_upvalueindex(3));
  if (!sc->src_open) return 0;
  lapi_ctx(L);
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "events") > 0) {
    if (!xf_filter_match(&sc->f, &ev)) continue;
    lapi_push_event(L, &ev, t->ls ? t->ls->s : NULL, lua_upvalueindex(2));
    return 1;
  }
  lapi_scratch_free(sc);
  return 0;
}

/* for ev in t:events{filter} do ... end: the scratch is the loop's to-be-closed value. */
static int trace_events(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L); /* 3 */
  lapi_filter(L, 2, t, &sc->f, "events", NULL);
  lapi_scratch_open(L, sc, t);
  lua_pushvalue(L, 3);
  lua_newtable(L); /* name cache */
  lua_pushvalue(L, 1); /* keeps the trace alive while iterating */
  lua_pushcclosure(L, events_iter, 3);
  lua_pushnil(L);
  lua_pushnil(L);
  lua_pushvalue(L, 3);
  return 4;
}

static int trace_count(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L);
  lapi_filter(L, 2, t, &sc->f, "count", NULL);
  lapi_scratch_open(L, sc, t);
  sim_event ev;
  lua_Integer n = 0;
  uint64_t bytes = 0;
  while (lapi_scratch_next(L, sc, &ev, "count") > 0)
    if (xf_filter_match(&sc->f, &ev)) {
      n++;
      bytes += ev.size;
    }
  lapi_scratch_free(sc);
  lua_pushinteger(L, n);
  lua_pushinteger(L, (lua_Integer)bytes);
  return 2;
}

/* ---- inspection ---------------------------------------------------------------------------- */

/* Pushes the lines of text as a list. */
static void push_lines(lua_State *L, const char *text) {
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

static int trace_info(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  push_meta(L, &t->meta);
  lua_pushboolean(L, t->derived);
  lua_setfield(L, -2, "derived");
  char *d = xf_node_describe(t->node);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, d);
  free(d);
  luaL_pushresult(&b);
  push_lines(L, lua_tostring(L, -1));
  lua_remove(L, -2);
  lua_setfield(L, -2, "transforms");
  return 1;
}

static int trace_name(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_pushstring(L, t->meta.name);
  return 1;
}

static int trace_describe(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  char *d = xf_node_describe(t->node);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, d);
  free(d);
  luaL_pushresult(&b);
  return 1;
}

static int trace_summary(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lsummary *s = lapi_summary(L, t);
  lua_newtable(L);
  set_int(L, "events", (int64_t)s->events);
  lua_newtable(L);
  for (int k = 1; k < SIM_EV__COUNT; k++)
    if (s->by_kind[k]) set_int(L, sim_event_kind_name(k), (int64_t)s->by_kind[k]);
  lua_setfield(L, -2, "by_kind");
  set_int(L, "allocs", (int64_t)s->allocs);
  set_int(L, "alloc_bytes", (int64_t)s->alloc_bytes);
  set_int(L, "frees", (int64_t)s->frees);
  set_int(L, "min_size", (int64_t)s->size_min);
  set_int(L, "max_size", (int64_t)s->size_max);
  set_num(L, "mean_size", s->allocs ? (double)s->alloc_bytes / (double)s->allocs : 0);
  set_int(L, "live_peak_bytes", s->live_peak);
  set_int(L, "live_peak_event", s->live_peak_seq);
  lua_newtable(L);
  for (int c = 0; c < SIM_CAT__COUNT; c++) {
    if (!s->cat_allocs[c]) continue;
    lua_newtable(L);
    set_int(L, "allocs", (int64_t)s->cat_allocs[c]);
    set_int(L, "bytes", (int64_t)s->cat_bytes[c]);
    lua_setfield(L, -2, sim_category_name(c));
  }
  lua_setfield(L, -2, "by_category");
  set_int(L, "categorized_allocs", (int64_t)(s->allocs - s->cat_allocs[SIM_CAT_UNKNOWN]));
  set_int(L, "first_ts", s->first_ts);
  set_int(L, "last_ts", s->last_ts);
  set_num(L, "duration_s", (double)(s->last_ts - s->first_ts) / 1e9);
  if (s->step_max >= s->step_min) {
    set_int(L, "first_step", s->step_min);
    set_int(L, "last_step", s->step_max);
    set_int(L, "steps", s->step_max - s->step_min + 1);
  } else {
    set_int(L, "steps", (int64_t)s->step_markers);
  }
  lua_newtable(L);
  for (size_t i = 0; i < s->nstreams; i++) {
    lua_pushinteger(L, s->streams[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "streams");
  lua_newtable(L);
  int nd = 0;
  for (int d = 0; d <= REPLAY_MAX_DEVICES; d++)
    if (s->devices[d]) {
      lua_pushinteger(L, d - 1);
      lua_rawseti(L, -2, ++nd);
    }
  lua_setfield(L, -2, "devices");
  set_num(L, "kernel_time_s", (double)s->kernel_ns / 1e9);
  set_num(L, "copy_time_s", (double)s->copy_ns / 1e9);
  lua_newtable(L);
  for (int d = 0; d < SIM_COPY__COUNT; d++)
    for (int m = 0; m < SIM_MEM__COUNT; m++) {
      if (!s->copies[d][m]) continue;
      char key[48];
      snprintf(key, sizeof key, "%s_%s", sim_copy_dir_name(d), sim_mem_kind_name(m));
      lua_newtable(L);
      set_int(L, "count", (int64_t)s->copies[d][m]);
      set_int(L, "bytes", (int64_t)s->copy_bytes[d][m]);
      lua_setfield(L, -2, key);
    }
  lua_setfield(L, -2, "copies");
  return 1;
}

static int trace_lifetimes(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  xf_lifetime *lt = lapi_lifetime(L, t);
  lua_newtable(L);
  set_int(L, "persistent_allocs", (int64_t)lt->persistent_allocs);
  set_int(L, "persistent_bytes", (int64_t)lt->persistent_bytes);
  set_int(L, "transient_allocs", (int64_t)lt->transient_allocs);
  set_int(L, "transient_bytes", (int64_t)lt->transient_bytes);
  set_int(L, "categorized_allocs", (int64_t)lt->categorized_allocs);
  return 1;
}

/* t:allocations([filter]): the allocations in order, as columns (cheap for long traces). */
static int trace_allocations(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L); /* 3 */
  lapi_filter(L, 2, t, &sc->f, "allocations", NULL);
  xf_lifetime *lt = t->base ? lapi_lifetime(L, t) : NULL;
  lapi_scratch_open(L, sc, t);
  lua_newtable(L);
  int top = lua_gettop(L);
  static const char *const cols[] = {"seq", "size", "site", "category", "persistent", "free_seq", "stream", "ts", "step"};
  enum { NCOL = 9 };
  for (int i = 0; i < NCOL; i++) lua_newtable(L);
  sim_event ev;
  lua_Integer n = 0;
  while (lapi_scratch_next(L, sc, &ev, "allocations") > 0) {
    if (ev.kind == SIM_EV_ALLOC && xf_filter_match(&sc->f, &ev)) {
      n++;
      lua_pushinteger(L, ev.seq);
      lua_rawseti(L, top + 1, n);
      lua_pushinteger(L, (lua_Integer)ev.size);
      lua_rawseti(L, top + 2, n);
      lua_pushinteger(L, ev.stack);
      lua_rawseti(L, top + 3, n);
      lua_pushstring(L, sim_category_name(ev.category));
      lua_rawseti(L, top + 4, n);
      lua_pushboolean(L, lt && ev.seq >= 0 ? xf_lifetime_persistent(lt, ev.seq) : 0);
      lua_rawseti(L, top + 5, n);
      lua_pushinteger(L, -1);
      lua_rawseti(L, top + 6, n);
      lua_pushinteger(L, ev.stream == SIM_NO_STREAM ? 0 : ev.stream);
      lua_rawseti(L, top + 7, n);
      lua_pushinteger(L, ev.ts);
      lua_rawseti(L, top + 8, n);
      lua_pushinteger(L, ev.step);
      lua_rawseti(L, top + 9, n);
      *sim_map_put(&sc->m1, ev.addr, NULL) = (uint64_t)n;
    } else if (sim_event_is_free(&ev) && ev.kind != SIM_EV_FREE_COMPLETED) {
      uint64_t row;
      if (sim_map_del(&sc->m1, ev.addr, &row)) {
        lua_pushinteger(L, ev.seq);
        lua_rawseti(L, top + 6, (lua_Integer)row);
      }
    } else if (ev.kind == SIM_EV_ALLOC) {
      sim_map_del(&sc->m1, ev.addr, NULL);
    }
  }
  lapi_scratch_free(sc);
  for (int i = NCOL - 1; i >= 0; i--) lua_setfield(L, top, cols[i]);
  lua_pushinteger(L, n);
  lua_setfield(L, top, "n");
  return 1;
}

typedef struct site_acc {
  int64_t stack;
  uint64_t count, bytes, max;
  int64_t first_seq;
} site_acc;

static int cmp_site_bytes(const void *a, const void *b) {
  const site_acc *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* t:sites([filter]): allocation call sites with their counts and bytes, largest first. */
static int trace_sites(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L);
  lapi_filter(L, 2, t, &sc->f, "sites", NULL);
  lapi_scratch_open(L, sc, t);
  size_t n = 0, cap = 0;
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "sites") > 0) {
    if (ev.kind != SIM_EV_ALLOC || !xf_filter_match(&sc->f, &ev)) continue;
    int existed;
    uint64_t *slot = sim_map_put(&sc->m1, (uint64_t)ev.stack, &existed);
    site_acc *acc = sc->p[0];
    if (!existed) {
      sim_grow((void **)&acc, &cap, n + 1, sizeof *acc);
      sc->p[0] = acc;
      acc[n] = (site_acc){ev.stack, 0, 0, 0, ev.seq};
      *slot = n++;
    }
    site_acc *a = &acc[*slot];
    a->count++;
    a->bytes += ev.size;
    if (ev.size > a->max) a->max = ev.size;
  }
  site_acc *acc = sc->p[0];
  if (n) qsort(acc, n, sizeof *acc, cmp_site_bytes);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 6);
    set_int(L, "site", acc[i].stack);
    char *label = store_stack_label(t->ls->s, acc[i].stack);
    lua_pushstring(L, label); /* may raise: free first */
    free(label);
    lua_setfield(L, -2, "label");
    set_int(L, "count", (int64_t)acc[i].count);
    set_int(L, "bytes", (int64_t)acc[i].bytes);
    set_int(L, "max_size", (int64_t)acc[i].max);
    set_int(L, "first_seq", acc[i].first_seq);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lapi_scratch_free(sc);
  return 1;
}

static int push_frame(void *arg, const store_frame *f) {
  lua_State *L = arg;
  lua_createtable(L, 0, 3);
  set_str(L, "name", f->name);
  set_str(L, "file", f->file);
  set_int(L, "line", f->line);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

static int trace_frames(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_Integer site = luaL_checkinteger(L, 2);
  lua_newtable(L);
  if (site > 0 && store_stack_frames(t->ls->s, site, push_frame, L)) return luaL_error(L, "%s", store_error(t->ls->s));
  return 1;
}

static int trace_site_label(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  char *label = store_stack_label(t->ls->s, luaL_checkinteger(L, 2));
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, label);
  free(label);
  luaL_pushresult(&b);
  return 1;
}

static void push_step(lua_State *L, int top, int n, int32_t step, int64_t fs, int64_t ls, int64_t t0, int64_t t1) {
  lua_createtable(L, 0, 5);
  set_int(L, "step", step);
  set_int(L, "first_seq", fs);
  set_int(L, "last_seq", ls);
  set_int(L, "first_ts", t0);
  set_int(L, "last_ts", t1);
  lua_rawseti(L, top, n);
}

/* t:steps(): each step's first and last event (from the events' step numbers, else markers). */
static int trace_steps(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lscratch *sc = lapi_scratch(L);
  lapi_scratch_open(L, sc, t);
  lua_newtable(L);
  int top = lua_gettop(L);
  sim_event ev;
  int n = 0, by_markers = 0;
  int32_t cur = INT32_MIN, marker_step = -1;
  int64_t first_seq = 0, last_seq = 0, ts0 = 0, ts1 = 0;
  while (lapi_scratch_next(L, sc, &ev, "steps") > 0) {
    int32_t step = ev.step;
    if (ev.kind == SIM_EV_MARKER && (ev.flags & SIM_EVF_STEP_BEGIN) && step < 0) {
      by_markers = 1;
      marker_step++;
    }
    if (by_markers) step = marker_step;
    if (step < 0) continue;
    if (step != cur) {
      if (cur != INT32_MIN) push_step(L, top, ++n, cur, first_seq, last_seq, ts0, ts1);
      cur = step;
      first_seq = ev.seq;
      ts0 = ev.ts;
    }
    last_seq = ev.seq;
    ts1 = ev.ts;
  }
  lapi_scratch_free(sc);
  if (cur != INT32_MIN) push_step(L, top, ++n, cur, first_seq, last_seq, ts0, ts1);
  return 1;
}

typedef struct kacc {
  int64_t name;
  uint64_t count, ns;
} kacc;

/* t:kernels(): kernel names with their class, count and total time. */
static int trace_kernels(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lscratch *sc = lapi_scratch(L);
  lapi_scratch_open(L, sc, t);
  size_t n = 0, cap = 0;
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "kernels") > 0) {
    if (ev.kind != SIM_EV_KERNEL) continue;
    int existed;
    uint64_t *slot = sim_map_put(&sc->m1, (uint64_t)ev.name, &existed);
    kacc *acc = sc->p[0];
    if (!existed) {
      sim_grow((void **)&acc, &cap, n + 1, sizeof *acc);
      sc->p[0] = acc;
      acc[n] = (kacc){ev.name, 0, 0};
      *slot = n++;
    }
    acc[*slot].count++;
    acc[*slot].ns += ev.dur > 0 ? (uint64_t)ev.dur : 0;
  }
  kacc *acc = sc->p[0];
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 5);
    const char *nm = acc[i].name ? store_string(t->ls->s, acc[i].name) : NULL;
    set_str(L, "class", xf_kernel_class_name(xf_kernel_class_of(nm)));
    set_str(L, "name", nm ? nm : "");
    set_int(L, "name_id", acc[i].name);
    set_int(L, "count", (int64_t)acc[i].count);
    set_num(L, "time_s", (double)acc[i].ns / 1e9);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lapi_scratch_free(sc);
  return 1;
}

/* ---- transforms ---------------------------------------------------------------------------- */

/* Makes nt (pushed inert before n was built) the trace derived from t through node n. */
/* The options table of a transform (argument 2): its filter in a fresh scratch, the other keys
 * it accepts in extra. */
static lscratch *transform_options(lua_State *L, ltrace *t, const char *what, const char *const *extra) {
  luaL_checktype(L, 2, LUA_TTABLE);
  lscratch *sc = lapi_scratch(L);
  lapi_filter(L, 2, t, &sc->f, what, extra);
  return sc;
}

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

static int trace_scale(lua_State *L) {
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

static int trace_elem_size(lua_State *L) {
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

static int trace_resize(lua_State *L) {
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

static int trace_drop(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lscratch *sc = transform_options(L, t, "drop", NULL);
  if (!xf_filter_is_set(&sc->f)) return luaL_error(L, "drop: the filter selects every event (give kind, category, step, ...)");
  ltrace *nt = lapi_new_trace(L);
  xf_node *n = xf_drop(t->node, &sc->f);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, "");
}

/* t:drop_steps(n) or t:drop_steps{from, to}: drops whole steps (by the events' step numbers). */
static int trace_drop_steps(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  double lo = INT32_MIN, hi = INT32_MAX;
  range_of(L, 2, "drop_steps", &lo, &hi);
  ltrace *nt = lapi_new_trace(L);
  xf_filter f;
  xf_filter_init(&f);
  f.step_min = (int32_t)fmin(fmax(lo, INT32_MIN), INT32_MAX);
  f.step_max = (int32_t)fmax(fmin(hi, INT32_MAX), INT32_MIN);
  xf_node *n = xf_drop(t->node, &f);
  xf_filter_release(&f);
  return set_derived(L, nt, t, n, "");
}

static int trace_insert(lua_State *L) {
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
    read_event(L, -1, &evs[i - 1]);
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
      read_event(L, -1, &evs[*nevs]);
      (*nevs)++;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* t:insert_at{before = {[seq] = {events}}, after = {[seq] = {events}}}: events around given events. */
static int trace_insert_at(lua_State *L) {
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

static int trace_pin(lua_State *L) {
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

static int trace_scale_time(lua_State *L) {
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
static int trace_repeat_block(lua_State *L) {
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
static int trace_repeat_steps(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  static const char *const keys[] = {"steps", "times", "once", "once_transient", NULL};
  check_keys(L, 2, "repeat_steps", keys);
  lua_settop(L, 2);
  lua_pushcfunction(L, trace_steps);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1); /* 3: the steps */
  int nsteps = (int)luaL_len(L, 3);
  if (!nsteps) return luaL_error(L, "repeat_steps: the trace has no steps (no step numbers or step markers)");
  lua_rawgeti(L, 3, nsteps);
  lua_getfield(L, -1, "step");
  double lo = (double)lua_tointeger(L, -1), hi = lo;
  lua_pop(L, 2);
  lua_getfield(L, 2, "steps");
  if (!lua_isnil(L, -1)) range_of(L, -1, "steps", &lo, &hi);
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

/* ---- t:map(fn [, filter]) ------------------------------------------------------------------ */

typedef struct lmap {
  lua_State *main;
  int ref;
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
  lua_newtable(L);                               /* 5: name cache */
  lapi_push_event(L, in, m->ls->s, 5);           /* 6: the event */
  lua_rawgeti(L, LUA_REGISTRYINDEX, m->ref);
  lua_pushvalue(L, 6);
  lua_call(L, 1, 1);                             /* 7: what it returned */
  int rt = lua_type(L, 7);
  lua_Integer n = 1;
  if (rt == LUA_TNIL || (rt == LUA_TBOOLEAN && lua_toboolean(L, 7))) {
    out[0] = *in;
    read_event(L, 6, &out[0]);
  } else if (rt == LUA_TBOOLEAN) {
    n = 0;
  } else if (rt != LUA_TTABLE) {
    return luaL_error(L, "a per-event function returns nothing, true, false, an event or a list of events, not a %s",
                      luaL_typename(L, 7));
  } else {
    lua_rawgeti(L, 7, 1);
    int list = lua_istable(L, -1);
    lua_pop(L, 1);
    if (!list) {
      out[0] = *in;
      read_event(L, 7, &out[0]);
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
        read_event(L, -1, e);
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
  lstore_unref(m->ls);
  free(m);
}

static int trace_map(lua_State *L) {
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
  lmap *m = sim_xcalloc(1, sizeof *m);
  m->cx = cx;
  m->main = main;
  m->ref = ref;
  lstore_ref(t->ls);
  m->ls = t->ls;
  xf_node *n = xf_map(t->node, &sc->f, map_call, m, map_release);
  lapi_scratch_free(sc);
  return set_derived(L, nt, t, n, "");
}

/* t:merge(other [, {offset_s = seconds, device = n}]): both traces on one time line. */
static int trace_merge(lua_State *L) {
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

/* ---- t:cache() and t:save(name) ------------------------------------------------------------ */

static int trace_cache(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lscratch *sc = lapi_scratch(L);
  lapi_scratch_open(L, sc, t);
  lmem *m = sc->p[0] = sim_xcalloc(1, sizeof *m);
  m->refs = 1;
  size_t cap = 0;
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "cache") > 0) {
    if (m->n == cap) {
      sim_grow((void **)&m->evs, &cap, m->n + 1, sizeof *m->evs);
      sc->p[1] = m->evs;
    }
    m->evs[m->n++] = ev;
  }
  ltrace *nt = lapi_new_trace(L);
  sc->p[0] = sc->p[1] = NULL;
  lapi_scratch_free(sc);
  xf_node *n = xf_base_array(m->evs, m->n, m, mbase_release);
  /* A base of its own with the same meaning as t: lifetimes carry over only when t was not
   * transformed (the sequence numbers are the same). */
  lapi_set_trace(nt, n, n, t->ls, &t->meta, t->derived, t->derived ? NULL : t->lt);
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

/* t:save(name): writes the trace into the command's store (in the run's transaction). */
static int trace_save(lua_State *L) {
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
  lapi_begin(L, cx);
  lscratch *sc = lapi_scratch(L);
  /* attrs: where it came from */
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
  jsonw_kstr(g, "script", cx->script);
  yajl_gen_map_close(g);
  free(desc);
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

void lapi_trace_register(lua_State *L) {
  static const luaL_Reg meth[] = {
    {"info", trace_info},
    {"name", trace_name},
    {"describe", trace_describe},
    {"events", trace_events},
    {"count", trace_count},
    {"summary", trace_summary},
    {"lifetimes", trace_lifetimes},
    {"allocations", trace_allocations},
    {"sites", trace_sites},
    {"frames", trace_frames},
    {"site_label", trace_site_label},
    {"steps", trace_steps},
    {"kernels", trace_kernels},
    {"scale", trace_scale},
    {"elem_size", trace_elem_size},
    {"resize", trace_resize},
    {"drop", trace_drop},
    {"drop_steps", trace_drop_steps},
    {"insert", trace_insert},
    {"insert_at", trace_insert_at},
    {"pin", trace_pin},
    {"scale_time", trace_scale_time},
    {"repeat_block", trace_repeat_block},
    {"repeat_steps", trace_repeat_steps},
    {"map", trace_map},
    {"merge", trace_merge},
    {"cache", trace_cache},
    {"save", trace_save},
    {"replay", lapi_replay},
    {NULL, NULL},
  };
  static const luaL_Reg metameth[] = {
    {"__index", NULL},
    {"__gc", trace_gc},
    {"__close", trace_gc},
    {"__tostring", trace_tostring},
    {NULL, NULL},
  };
  luaL_newmetatable(L, LAPI_TRACE);
  luaL_setfuncs(L, metameth, 0);
  luaL_newlib(L, meth);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

/* lua_api_events.c: helpers over a trace's events: summaries, lifetimes, steps, filters, events as Lua tables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/limits.h"
#include "lua_api_events.h"

/* ---- summaries ------------------------------------------------------------------------------ */

void lapi_summary_unref(lsummary *s) {
  if (!s || --s->refs > 0) return;
  free(s->streams);
  free(s->names);
  free(s->sites);
  free(s);
}

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

/* A summary being read: the scratch holds its arrays (p[0] the summary, p[1] names, p[2]
 * streams, p[3] call sites) until it is complete, and its maps: m1 the live allocations by
 * address, m2, m3, m4 the streams, names and call sites seen. */
typedef struct summary_read {
  lsummary *s;
  lscratch *sc;
  size_t scap, ncap, sitecap;
  int64_t live_bytes;
} summary_read;

static void summary_alloc(summary_read *r, const sim_event *ev) {
  lsummary *s = r->s;
  lscratch *sc = r->sc;
  s->allocs++;
  sim_bytes_sum(&s->alloc_bytes, ev->size);
  if (ev->size < s->size_min) s->size_min = ev->size;
  if (ev->size > s->size_max) s->size_max = ev->size;
  int c = ev->category < SIM_CAT__COUNT ? ev->category : 0;
  s->cat_allocs[c]++;
  sim_bytes_sum(&s->cat_bytes[c], ev->size);
  add_id(&s->streams, &s->nstreams, &r->scap, &sc->m2, ev->stream);
  sc->p[2] = s->streams;
  int existed;
  uint64_t *slot = sim_map_put(&sc->m1, ev->addr, &existed);
  if (existed) sim_bytes_drop(&r->live_bytes, *slot);
  *slot = ev->size;
  sim_bytes_sum(&r->live_bytes, ev->size);
  if (r->live_bytes > s->live_peak) {
    s->live_peak = r->live_bytes;
    s->live_peak_seq = ev->seq;
  }
}

/* Counts one event into the summary. */
static void summary_add(summary_read *r, const sim_event *ev) {
  lsummary *s = r->s;
  lscratch *sc = r->sc;
  s->events++;
  if (ev->kind < SIM_EV__COUNT) s->by_kind[ev->kind]++;
  if (ev->ts < s->first_ts) s->first_ts = ev->ts;
  if (ev->ts > s->last_ts) s->last_ts = ev->ts;
  if (ev->step >= 0) {
    if (ev->step < s->step_min) s->step_min = ev->step;
    if (ev->step > s->step_max) s->step_max = ev->step;
  }
  if (ev->device >= -1 && ev->device < REPLAY_MAX_DEVICES) s->devices[ev->device + 1] = 1;
  if (ev->name) add_id(&s->names, &s->nnames, &r->ncap, &sc->m3, ev->name), sc->p[1] = s->names;
  if (ev->stack) add_id(&s->sites, &s->nsites, &r->sitecap, &sc->m4, ev->stack), sc->p[3] = s->sites;
  switch (ev->kind) {
  case SIM_EV_ALLOC: summary_alloc(r, ev); break;
  case SIM_EV_FREE:
  case SIM_EV_FREE_REQUESTED: {
    uint64_t v;
    s->frees++;
    if (sim_map_del(&sc->m1, ev->addr, &v)) sim_bytes_drop(&r->live_bytes, v);
    break;
  }
  case SIM_EV_KERNEL: s->kernel_ns += ev->dur > 0 ? (uint64_t)ev->dur : 0; break;
  case SIM_EV_MEMCPY:
    if (ev->dir < SIM_COPY__COUNT && ev->mem < SIM_MEM__COUNT) {
      s->copies[ev->dir][ev->mem]++;
      sim_bytes_sum(&s->copy_bytes[ev->dir][ev->mem], ev->size);
    }
    s->copy_ns += ev->dur > 0 ? (uint64_t)ev->dur : 0;
    break;
  case SIM_EV_MARKER:
    if (ev->flags & SIM_EVF_STEP_BEGIN) s->step_markers++;
    break;
  default: break;
  }
}

/* Reads the events of node n (of trace t) into a new summary (one reference). */
static lsummary *summarize(lua_State *L, ltrace *t, const xf_node *n) {
  lscratch *sc = lapi_scratch(L);
  char err[XF_ERRLEN];
  lapi_ctx(L);
  if (xf_open(n, &sc->src, err, sizeof err)) luaL_error(L, "cannot read trace '%s': %s", t->meta.name, err);
  sc->src_open = 1;
  lsummary *s = sc->p[0] = sim_xcalloc(1, sizeof *s);
  s->refs = 1;
  s->size_min = UINT64_MAX;
  s->step_min = INT32_MAX;
  s->step_max = INT32_MIN;
  s->first_ts = INT64_MAX;
  s->live_peak_seq = -1;
  summary_read r = {.s = s, .sc = sc};
  sim_event ev;
  while (lapi_scratch_next(L, sc, &ev, "summary") > 0) summary_add(&r, &ev);
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

/* ---- lifetimes ------------------------------------------------------------------------------ */

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

/* ---- steps ---------------------------------------------------------------------------------- */

static void push_step(lua_State *L, int top, int n, int32_t step, int64_t fs, int64_t ls, int64_t t0, int64_t t1) {
  lua_createtable(L, 0, 5);
  lapi_set_int(L, "step", step);
  lapi_set_int(L, "first_seq", fs);
  lapi_set_int(L, "last_seq", ls);
  lapi_set_int(L, "first_ts", t0);
  lapi_set_int(L, "last_ts", t1);
  lua_rawseti(L, top, n);
}

void lapi_push_steps(lua_State *L, ltrace *t) {
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
}

/* ---- filters -------------------------------------------------------------------------------- */

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
    if (session_labels_frames(lstore_labels(t->ls), sum->sites[k], probe_frame, &p))
      luaL_error(L, "%s", store_error(t->ls->s));
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

/* Pushes field key of the filter table at idx and returns 1, or pushes nothing and returns 0
 * when it is nil. */
static int field(lua_State *L, int idx, const char *key) {
  lua_getfield(L, idx, key);
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

/* kind, mem, dir, category and lifetime: sets of names. */
static void filter_classes(lua_State *L, int idx, ltrace *t, xf_filter *f) {
  if (field(L, idx, "kind")) {
    f->kinds = name_mask(L, -1, "kind", kind_from, kind_of, SIM_EV__COUNT);
    lua_pop(L, 1);
  }
  if (field(L, idx, "mem")) {
    f->mems = name_mask(L, -1, "mem", mem_from, mem_of, SIM_MEM__COUNT);
    lua_pop(L, 1);
  }
  if (field(L, idx, "dir")) {
    f->dirs = name_mask(L, -1, "dir", dir_from, dir_of, SIM_COPY__COUNT);
    lua_pop(L, 1);
  }
  if (field(L, idx, "category")) {
    f->categories = name_mask(L, -1, "category", cat_from, cat_of, SIM_CAT__COUNT);
    lua_pop(L, 1);
  }
  if (field(L, idx, "lifetime")) {
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (s && !strcmp(s, "persistent")) f->lifetime = XF_LIFE_PERSISTENT;
    else if (s && !strcmp(s, "transient")) f->lifetime = XF_LIFE_TRANSIENT;
    else luaL_error(L, "filter 'lifetime' must be 'persistent' or 'transient'");
    lua_pop(L, 1);
  }
  /* lifetimes stand in for categories on allocations without one */
  if (f->lifetime || (f->categories && !(f->categories & 1u))) xf_filter_set_lifetime(f, lapi_lifetime(L, t));
}

/* stream, device, step, seq, size, min_size and max_size: values and ranges. */
static void filter_ranges(lua_State *L, int idx, xf_filter *f) {
  if (field(L, idx, "stream")) {
    f->has_stream = 1;
    f->stream = luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  if (field(L, idx, "device")) {
    f->device = (int)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  if (field(L, idx, "step")) {
    double lo = INT32_MIN, hi = INT32_MAX;
    lapi_range(L, -1, "step", &lo, &hi);
    f->step_min = (int32_t)fmin(fmax(lo, INT32_MIN), INT32_MAX);
    f->step_max = (int32_t)fmax(fmin(hi, INT32_MAX), INT32_MIN);
    lua_pop(L, 1);
  }
  if (field(L, idx, "seq")) {
    double lo = -9.2e18, hi = 9.2e18;
    lapi_range(L, -1, "seq", &lo, &hi);
    f->seq_min = lo <= -9.2e18 ? INT64_MIN : (int64_t)lo;
    f->seq_max = hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
    lua_pop(L, 1);
  }
  if (field(L, idx, "size")) {
    double lo = 0, hi = 1.8e19;
    lapi_range(L, -1, "size", &lo, &hi);
    f->size_min = lo <= 0 ? 0 : (uint64_t)lo;
    f->size_max = hi >= 1.8e19 ? UINT64_MAX : (uint64_t)hi;
    lua_pop(L, 1);
  }
  if (field(L, idx, "min_size")) {
    f->size_min = lapi_check_size(L, -1, "filter 'min_size'");
    lua_pop(L, 1);
  }
  if (field(L, idx, "max_size")) {
    f->size_max = lapi_check_size(L, -1, "filter 'max_size'");
    lua_pop(L, 1);
  }
}

/* flags and not_flags: event flags by name. */
static void filter_flags(lua_State *L, int idx, xf_filter *f) {
  static const char *const flag_keys[2] = {"flags", "not_flags"};
  for (int which = 0; which < 2; which++) {
    if (!field(L, idx, flag_keys[which])) continue;
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
}

/* site, site_match, exclude_site and exclude_site_match: call sites by id or by their frames. */
static void filter_sites(lua_State *L, int idx, ltrace *t, xf_filter *f) {
  if (field(L, idx, "site")) {
    size_t n;
    int64_t *ids = site_list(L, -1, "site", &n);
    xf_filter_set_sites(f, ids, n);
    lua_pop(L, 2);
  }
  if (field(L, idx, "site_match")) {
    sites_matching(L, t, -1, "site_match", f, 0);
    lua_pop(L, 1);
  }
  if (field(L, idx, "exclude_site")) {
    size_t n;
    int64_t *ids = site_list(L, -1, "exclude_site", &n);
    xf_filter_set_excluded_sites(f, ids, n);
    lua_pop(L, 2);
  }
  if (field(L, idx, "exclude_site_match")) {
    if (f->xsites) luaL_error(L, "filter: give exclude_site or exclude_site_match, not both");
    sites_matching(L, t, -1, "exclude_site_match", f, 1);
    lua_pop(L, 1);
  }
}

/* name and class: the names of the trace's base that contain a pattern and are of a kernel class. */
static void filter_names(lua_State *L, int idx, ltrace *t, xf_filter *f) {
  int has_name = field(L, idx, "name");
  int has_class = field(L, idx, "class");
  if (!has_name && !has_class) return;
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
  replay_names names = lstore_names(t->ls); /* each name read from the store once */
  int64_t *ids = lua_newuserdatauv(L, (s->nnames ? s->nnames : 1) * sizeof *ids, 0);
  size_t nids = 0;
  luaL_Buffer b;
  for (size_t i = 0; i < s->nnames; i++) {
    const char *nm = replay_name(&names, s->names[i]);
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

void lapi_filter(lua_State *L, int idx, ltrace *t, xf_filter *f, const char *fn, const char *const *extra) {
  xf_filter_release(f);
  if (lua_isnoneornil(L, idx)) return;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) {
    luaL_error(L, "%s: expects a table of options, not a %s", fn, luaL_typename(L, idx));
    return;
  }
  /* a misspelt key must not silently match everything */
  lapi_check_options(L, idx, fn, filter_keys, extra);
  filter_classes(L, idx, t, f);
  filter_ranges(L, idx, f);
  filter_flags(L, idx, f);
  filter_sites(L, idx, t, f);
  filter_names(L, idx, t, f);
}

/* ---- events as Lua tables ------------------------------------------------------------------- */

void lapi_push_event(lua_State *L, const sim_event *ev, store *s, int cache_idx) {
  cache_idx = lua_absindex(L, cache_idx);
  lua_createtable(L, 0, 18);
  lapi_set_int(L, "seq", ev->seq);
  lua_pushstring(L, sim_event_kind_name(ev->kind));
  lua_setfield(L, -2, "kind");
  lapi_set_int(L, "ts", ev->ts);
  lapi_set_int(L, "dur", ev->dur);
  if (ev->dev_ts >= 0) lapi_set_int(L, "dev_ts", ev->dev_ts);
  if (ev->api_dur >= 0) lapi_set_int(L, "api_dur", ev->api_dur);
  lapi_set_int(L, "addr", (int64_t)ev->addr);
  lapi_set_int(L, "size", (int64_t)ev->size);
  if (ev->stream != SIM_NO_STREAM) lapi_set_int(L, "stream", ev->stream);
  lapi_set_int(L, "site", ev->stack);
  if (ev->name) {
    lapi_set_int(L, "name_id", ev->name);
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
  lapi_set_int(L, "step", ev->step);
  lapi_set_int(L, "device", ev->device);
  lapi_set_str(L, "mem", sim_mem_kind_name(ev->mem));
  lapi_set_str(L, "dir", sim_copy_dir_name(ev->dir));
  lapi_set_str(L, "category", sim_category_name(ev->category));
  lapi_set_str(L, "cat_source", sim_cat_source_name(ev->cat_source));
  lapi_set_int(L, "flags", ev->flags);
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

/* opt_int_field held to [lo, hi], as an importer holds the same field (replay/io/limits.h). */
static int64_t ranged_field(lua_State *L, int idx, const char *k, int64_t def, int64_t lo, int64_t hi, const char *range) {
  int64_t v = opt_int_field(L, idx, k, def);
  if (v != def && (v < lo || v > hi)) luaL_error(L, "event field '%s' is out of range (%I; %s)", k, (lua_Integer)v, range);
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

void lapi_read_event(lua_State *L, int idx, sim_event *ev) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) luaL_error(L, "an event must be a table, not a %s", luaL_typename(L, idx));
  ev->kind = (uint8_t)enum_field(L, idx, "kind", kind_from, ev->kind);
  if (ev->kind == SIM_EV_NONE) luaL_error(L, "an event needs a kind ('alloc', 'free', 'kernel', ...)");
  /* the ranges an importer holds these to: any arithmetic on them then stays in 64 bits */
  static const char times[] = "memplay takes at most 2^62 either way";
  ev->ts = ranged_field(L, idx, "ts", ev->ts, -IO_MAX_TIME_NS, IO_MAX_TIME_NS, times);
  ev->dur = ranged_field(L, idx, "dur", ev->dur, -1, IO_MAX_TIME_NS, "-1, unknown, or a duration up to 2^62 ns");
  ev->dev_ts = ranged_field(L, idx, "dev_ts", ev->dev_ts, -IO_MAX_TIME_NS, IO_MAX_TIME_NS, times);
  ev->api_dur = ranged_field(L, idx, "api_dur", ev->api_dur, -IO_MAX_TIME_NS, IO_MAX_TIME_NS, times);
  ev->addr = (uint64_t)opt_int_field(L, idx, "addr", (int64_t)ev->addr);
  lua_getfield(L, idx, "size");
  if (!lua_isnil(L, -1)) {
    ev->size = lapi_check_size(L, -1, "event field 'size'");
    if (ev->size > IO_MAX_BYTES) luaL_error(L, "event field 'size' is out of range (%I; memplay takes at most 2^48 bytes)", (lua_Integer)ev->size);
  }
  lua_pop(L, 1);
  ev->stream = ranged_field(L, idx, "stream", ev->stream, -IO_MAX_TIME_NS, IO_MAX_TIME_NS, times);
  ev->stack = opt_int_field(L, idx, "site", ev->stack);
  ev->name = opt_int_field(L, idx, "name_id", ev->name);
  ev->step = (int32_t)ranged_field(L, idx, "step", ev->step, -1, INT32_MAX, "-1, none, or a step up to 2^31 - 1");
  ev->device = (int16_t)ranged_field(L, idx, "device", ev->device, -1, IO_MAX_DEVICE, "-1, the host, or a device up to 1023");
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

/* lua_api_trace.c: the Trace userdata: reading a trace: rows, events, summary, allocations, sites, steps, kernels. */
#include <stdlib.h>
#include <string.h>

#include "lua_api_events.h"
#include "lua_api_help.h"
#include "lua_lib_funcs.h"

/* ---- the Trace userdata --------------------------------------------------------------------- */

int lapi_trace_gc(lua_State *L) {
  ltrace *t = luaL_checkudata(L, 1, LAPI_TRACE);
  if (!t->node) return 0;
  xf_node_unref(t->node);
  t->node = NULL;
  t->arr = NULL; /* its node held the array */
  t->narr = 0;
  lstore_unref(t->ls);
  t->ls = NULL;
  store_trace_clear(&t->meta);
  xf_lifetime_unref(t->lt);
  t->lt = NULL;
  lapi_summary_unref(t->sum);
  t->sum = NULL;
  lapi_summary_unref(t->bsum);
  t->bsum = NULL;
  return 0;
}

int lapi_trace_tostring(lua_State *L) {
  ltrace *t = luaL_checkudata(L, 1, LAPI_TRACE);
  if (!t->node) lua_pushliteral(L, "memplay.trace(released)");
  else lua_pushfstring(L, "memplay.trace(%s%s)", t->meta.name ? t->meta.name : "?", t->derived ? ", derived" : "");
  return 1;
}

/* ---- t:events(filter) ----------------------------------------------------------------------- */

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

/* Whether a trace held in memory lists its events in seq order (checked once: a cached derived
 * trace may not). */
static int seq_ordered(ltrace *t) {
  if (!t->seq_order) {
    t->seq_order = 1;
    for (size_t i = 1; i < t->narr && t->seq_order > 0; i++)
      if (t->arr[i].seq < t->arr[i - 1].seq) t->seq_order = -1;
  }
  return t->seq_order > 0;
}

/* In a trace held in seq order, the index of its first event whose seq is at least seq (above
 * it, with after). */
static size_t seq_index(const ltrace *t, int64_t seq, int after) {
  size_t lo = 0, hi = t->narr;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->arr[mid].seq < seq || (after && t->arr[mid].seq == seq)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* A seq range of a trace held in memory in seq order is read from its first event to its last,
 * not over the whole trace (a scenario reading each checkpointed segment's kernels read the trace
 * once per segment: checkpointing.lua), by t:events and t:count. 1 when sc's source is that
 * range; 0 otherwise. */
static int open_seq_range(ltrace *t, lscratch *sc) {
  if (!t->arr || (sc->f.seq_min == INT64_MIN && sc->f.seq_max == INT64_MAX) || !seq_ordered(t)) return 0;
  size_t lo = seq_index(t, sc->f.seq_min, 0), hi = seq_index(t, sc->f.seq_max, 1);
  replay_array_source *a = sc->p[5] = sim_xmalloc(sizeof *a);
  sc->src = replay_array_source_init(a, t->arr + lo, hi > lo ? hi - lo : 0);
  sc->src_open = 1;
  return 1;
}

/* for ev in t:events{filter} do ... end: the scratch is the loop's to-be-closed value. */
int lapi_trace_events(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L); /* 3 */
  lapi_filter(L, 2, t, &sc->f, "events", NULL);
  if (!open_seq_range(t, sc)) lapi_scratch_open(L, sc, t);
  lua_pushvalue(L, 3);
  lapi_trace_names(L, 1);
  lua_pushvalue(L, 1); /* keeps the trace alive while iterating */
  lua_pushcclosure(L, events_iter, 3);
  lua_pushnil(L);
  lua_pushnil(L);
  lua_pushvalue(L, 3);
  return 4;
}

int lapi_trace_count(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L);
  lapi_filter(L, 2, t, &sc->f, "count", NULL);
  if (!open_seq_range(t, sc)) lapi_scratch_open(L, sc, t);
  sim_event ev;
  lua_Integer n = 0;
  int64_t bytes = 0;
  while (lapi_scratch_next(L, sc, &ev, "count") > 0)
    if (xf_filter_match(&sc->f, &ev)) {
      n++;
      sim_bytes_sum(&bytes, ev.size);
    }
  lapi_scratch_free(sc);
  lua_pushinteger(L, n);
  lua_pushinteger(L, (lua_Integer)bytes);
  return 2;
}

/* ---- inspection ----------------------------------------------------------------------------- */

int lapi_trace_info(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lapi_push_meta(L, &t->meta);
  lua_pushboolean(L, t->derived);
  lua_setfield(L, -2, "derived");
  char *d = xf_node_describe(t->node);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, d);
  free(d);
  luaL_pushresult(&b);
  lapi_push_lines(L, lua_tostring(L, -1));
  lua_remove(L, -2);
  lua_setfield(L, -2, "transforms");
  return 1;
}

int lapi_trace_name(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_pushstring(L, t->meta.name);
  return 1;
}

int lapi_trace_describe(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  char *d = xf_node_describe(t->node);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, d);
  free(d);
  luaL_pushresult(&b);
  return 1;
}

int lapi_trace_summary(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lsummary *s = lapi_summary(L, t);
  lua_newtable(L);
  lapi_set_int(L, "events", (int64_t)s->events);
  lua_newtable(L);
  for (int k = 1; k < SIM_EV__COUNT; k++)
    if (s->by_kind[k]) lapi_set_int(L, sim_event_kind_name(k), (int64_t)s->by_kind[k]);
  lua_setfield(L, -2, "by_kind");
  lapi_set_int(L, "allocs", (int64_t)s->allocs);
  lapi_set_int(L, "alloc_bytes", (int64_t)s->alloc_bytes);
  lapi_set_int(L, "frees", (int64_t)s->frees);
  lapi_set_int(L, "min_size", (int64_t)s->size_min);
  lapi_set_int(L, "max_size", (int64_t)s->size_max);
  lapi_set_num(L, "mean_size", s->allocs ? (double)s->alloc_bytes / (double)s->allocs : 0);
  lapi_set_int(L, "live_peak_bytes", s->live_peak);
  lapi_set_int(L, "live_peak_event", s->live_peak_seq);
  lua_newtable(L);
  for (int c = 0; c < SIM_CAT__COUNT; c++) {
    if (!s->cat_allocs[c]) continue;
    lua_newtable(L);
    lapi_set_int(L, "allocs", (int64_t)s->cat_allocs[c]);
    lapi_set_int(L, "bytes", (int64_t)s->cat_bytes[c]);
    lua_setfield(L, -2, sim_category_name(c));
  }
  lua_setfield(L, -2, "by_category");
  lapi_set_int(L, "categorized_allocs", (int64_t)(s->allocs - s->cat_allocs[SIM_CAT_UNKNOWN]));
  lapi_set_int(L, "first_ts", s->first_ts);
  lapi_set_int(L, "last_ts", s->last_ts);
  lapi_set_num(L, "duration_s", (double)sim_ns_between(s->first_ts, s->last_ts) / 1e9);
  if (s->step_max >= s->step_min) {
    lapi_set_int(L, "first_step", s->step_min);
    lapi_set_int(L, "last_step", s->step_max);
    lapi_set_int(L, "steps", (int64_t)s->step_max - s->step_min + 1);
  } else {
    lapi_set_int(L, "steps", (int64_t)s->step_markers);
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
  lapi_set_num(L, "kernel_time_s", (double)s->kernel_ns / 1e9);
  lapi_set_num(L, "copy_time_s", (double)s->copy_ns / 1e9);
  lua_newtable(L);
  for (int d = 0; d < SIM_COPY__COUNT; d++)
    for (int m = 0; m < SIM_MEM__COUNT; m++) {
      if (!s->copies[d][m]) continue;
      char key[48];
      snprintf(key, sizeof key, "%s_%s", sim_copy_dir_name(d), sim_mem_kind_name(m));
      lua_newtable(L);
      lapi_set_int(L, "count", (int64_t)s->copies[d][m]);
      lapi_set_int(L, "bytes", (int64_t)s->copy_bytes[d][m]);
      lua_setfield(L, -2, key);
    }
  lua_setfield(L, -2, "copies");
  return 1;
}

int lapi_trace_lifetimes(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  xf_lifetime *lt = lapi_lifetime(L, t);
  lua_newtable(L);
  lapi_set_int(L, "persistent_allocs", (int64_t)lt->persistent_allocs);
  lapi_set_int(L, "persistent_bytes", (int64_t)lt->persistent_bytes);
  lapi_set_int(L, "transient_allocs", (int64_t)lt->transient_allocs);
  lapi_set_int(L, "transient_bytes", (int64_t)lt->transient_bytes);
  lapi_set_int(L, "categorized_allocs", (int64_t)lt->categorized_allocs);
  return 1;
}

/* t:allocations([filter]): the allocations in order, as columns (cheap for long traces). */
int lapi_trace_allocations(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_settop(L, 2);
  lscratch *sc = lapi_scratch(L); /* 3 */
  lapi_filter(L, 2, t, &sc->f, "allocations", NULL);
  xf_lifetime *lt = t->base ? lapi_lifetime(L, t) : NULL;
  lapi_scratch_open(L, sc, t);
  lua_newtable(L);
  int top = lua_gettop(L);
  static const char *const cols[] = {"seq", "size", "site", "category", "persistent", "free_seq", "stream", "ts", "step", "addr"};
  enum { NCOL = 10 };
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
      lua_pushinteger(L, (lua_Integer)ev.addr);
      lua_rawseti(L, top + 10, n);
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
  uint64_t count, max;
  int64_t bytes; /* sim_bytes_sum */
  int64_t first_seq;
} site_acc;

static int cmp_site_bytes(const void *a, const void *b) {
  const site_acc *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* t:sites([filter]): allocation call sites with their counts and bytes, largest first. */
int lapi_trace_sites(lua_State *L) {
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
    sim_bytes_sum(&a->bytes, ev.size);
    if (ev.size > a->max) a->max = ev.size;
  }
  site_acc *acc = sc->p[0];
  if (n) qsort(acc, n, sizeof *acc, cmp_site_bytes);
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 6);
    lapi_set_int(L, "site", acc[i].stack);
    char *label = store_stack_label(t->ls->s, acc[i].stack);
    lua_pushstring(L, label); /* may raise: free first */
    free(label);
    lua_setfield(L, -2, "label");
    lapi_set_int(L, "count", (int64_t)acc[i].count);
    lapi_set_int(L, "bytes", (int64_t)acc[i].bytes);
    lapi_set_int(L, "max_size", (int64_t)acc[i].max);
    lapi_set_int(L, "first_seq", acc[i].first_seq);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lapi_scratch_free(sc);
  return 1;
}

static int push_frame(void *arg, const store_frame *f) {
  lua_State *L = arg;
  lua_createtable(L, 0, 3);
  lapi_set_str(L, "name", f->name);
  lapi_set_str(L, "file", f->file);
  lapi_set_int(L, "line", f->line);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

int lapi_trace_frames(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  lua_Integer site = luaL_checkinteger(L, 2);
  lua_newtable(L);
  if (site > 0 && store_stack_frames(t->ls->s, site, push_frame, L)) return luaL_error(L, "%s", store_error(t->ls->s));
  return 1;
}

int lapi_trace_site_label(lua_State *L) {
  ltrace *t = lapi_check_trace(L, 1);
  char *label = store_stack_label(t->ls->s, luaL_checkinteger(L, 2));
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, label);
  free(label);
  luaL_pushresult(&b);
  return 1;
}


/* t:steps(): each step's first and last event (from the events' step numbers, else markers). */
int lapi_trace_steps(lua_State *L) {
  lapi_push_steps(L, lapi_check_trace(L, 1));
  return 1;
}

typedef struct kacc {
  int64_t name;
  uint64_t count, ns;
} kacc;

/* t:kernels(): kernel names with their class, count and total time. */
int lapi_trace_kernels(lua_State *L) {
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
    lapi_set_str(L, "class", xf_kernel_class_name(xf_kernel_class_of(nm)));
    lapi_set_str(L, "name", nm ? nm : "");
    lapi_set_int(L, "name_id", acc[i].name);
    lapi_set_int(L, "count", (int64_t)acc[i].count);
    lapi_set_num(L, "time_s", (double)acc[i].ns / 1e9);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lapi_scratch_free(sc);
  return 1;
}


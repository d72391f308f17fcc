/* lua_api_result.c: a replay's result as a Lua table, built from the C result: light keys at once, heavy ones when read. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "lua_api_result.h"

/* ---- values as the JSON of `replay --json` gives them --------------------------------------- */

/* A number as JSON writes it (9 significant digits) and reads it back; nil when not finite. */
static void push_num(lua_State *L, double v) {
  if (!isfinite(v)) {
    lua_pushnil(L);
    return;
  }
  char b[40];
  snprintf(b, sizeof b, "%.9g", v);
  lua_pushnumber(L, strtod(b, NULL));
}

/* An unsigned count: an integer, or a float past what a Lua integer holds (as JSON reads it). */
static void push_uint(lua_State *L, uint64_t v) {
  if (v > (uint64_t)INT64_MAX) lua_pushnumber(L, (lua_Number)v);
  else lua_pushinteger(L, (lua_Integer)v);
}

/* A string made valid UTF-8 (an invalid byte becomes U+FFFD, as in JSON); nil for NULL. */
static void push_text(lua_State *L, const char *s, size_t n) {
  if (!s) {
    lua_pushnil(L);
    return;
  }
  size_t m = jsonw_utf8_fix(s, n, NULL);
  if (m == n) {
    lua_pushlstring(L, s, n);
    return;
  }
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, m);
  jsonw_utf8_fix(s, n, out);
  luaL_pushresultsize(&b, m);
}

static void set_str(lua_State *L, const char *k, const char *v) {
  if (!v) return; /* null in JSON: no key */
  push_text(L, v, strlen(v));
  lua_setfield(L, -2, k);
}
static void set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}
static void set_uint(lua_State *L, const char *k, uint64_t v) {
  push_uint(L, v);
  lua_setfield(L, -2, k);
}
static void set_num(lua_State *L, const char *k, double v) {
  push_num(L, v);
  lua_setfield(L, -2, k);
}
static void set_bool(lua_State *L, const char *k, int v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, k);
}

/* ---- JSON values as Lua values (the `time` key, which the report writes as JSON) ------------ */

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
  } else if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) {
    lua_pushboolean(L, YAJL_IS_TRUE(v));
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
  push_json(L, lua_touserdata(L, 1));
  return 1;
}

/* Pushes the JSON value v as a Lua value and frees tree, whatever happens. */
static void push_json_tree(lua_State *L, yajl_val tree, yajl_val v) {
  lua_pushcfunction(L, push_json_protected);
  lua_pushlightuserdata(L, v);
  int st = lua_pcall(L, 1, 1, 0);
  yajl_tree_free(tree);
  if (st != LUA_OK) lua_error(L);
}

/* ---- the light keys ------------------------------------------------------------------------- */

static run_meta meta_of(const lresult *lr) {
  const session_run *run = &lr->run;
  return lapi_meta(lr, NULL, NULL, run->has_time ? run->time.step_time_s : -1,
                   run->has_time ? run->time.samples_per_s : -1);
}

/* The run's settings (report.c's summary: what ran, where, with what capacity). */
static void set_settings(lua_State *L, const run_meta *m) {
  set_str(L, "trace", m->trace_name);
  if (m->trace_id > 0) set_int(L, "trace_id", m->trace_id);
  set_str(L, "allocator", m->allocator);
  set_str(L, "backend", m->backend ? m->backend : "sim");
  set_str(L, "device", m->device);
  if (m->capacity != UINT64_MAX) set_uint(L, "capacity_bytes", m->capacity);
  set_str(L, "capacity_source", m->capacity_source);
  if (m->capacity_source && !strcmp(m->capacity_source, "device")) {
    set_uint(L, "card_bytes", m->card_bytes);
    set_uint(L, "context_bytes", m->context_bytes);
  }
  if (m->nenv) {
    lua_createtable(L, 0, (int)m->nenv);
    for (size_t i = 0; i < m->nenv; i++) {
      const char *eq = strchr(m->env[i], '=');
      push_text(L, m->env[i], (size_t)(eq - m->env[i]));
      push_text(L, eq + 1, strlen(eq + 1));
      lua_rawset(L, -3);
    }
    lua_setfield(L, -2, "environment");
  }
  set_str(L, "note", m->note);
  set_str(L, "address_order", m->address_order);
  set_str(L, "address_order_source", m->address_source);
  if (m->window_start) {
    lua_createtable(L, 0, 4);
    set_str(L, "state", m->window_start);
    set_uint(L, "segments", m->window_segments);
    set_uint(L, "blocks", m->window_blocks);
    set_str(L, "assumption", m->window_note);
    lua_setfield(L, -2, "window_start");
  }
  if (m->step_time_s >= 0) set_num(L, "step_time_s", m->step_time_s);
  if (m->samples_per_s >= 0) set_num(L, "samples_per_s", m->samples_per_s);
}

/* The counts, peaks and totals, the host peaks and the events skipped. */
static void set_figures(lua_State *L, const replay_result *r) {
  set_uint(L, "events", r->events);
  set_uint(L, "allocs", r->allocs);
  set_uint(L, "frees", r->frees);
  set_int(L, "peak_allocated_bytes", r->peak_allocated);
  set_int(L, "peak_reserved_bytes", r->peak_reserved);
  set_int(L, "peak_requested_bytes", r->peak_requested);
  set_int(L, "peak_active_bytes", r->peak_active);
  set_int(L, "peak_allocated_event", r->peak_allocated_seq);
  set_int(L, "peak_reserved_event", r->peak_reserved_seq);
  set_int(L, "final_allocated_bytes", r->final_allocated);
  set_int(L, "final_reserved_bytes", r->final_reserved);
  set_num(L, "fragmentation", r->fragmentation);
  set_num(L, "fragmentation_gmlake", r->fragmentation_gmlake);
  set_uint(L, "device_mallocs", r->device_mallocs);
  set_uint(L, "device_frees", r->device_frees);
  set_uint(L, "device_maps", r->device_maps);
  set_uint(L, "device_unmaps", r->device_unmaps);
  set_uint(L, "ooms", r->ooms);
  set_bool(L, "stopped_at_oom", r->stopped_at_oom);
  set_int(L, "host_pinned_peak_bytes", r->host_pinned_peak);
  set_int(L, "host_pageable_peak_bytes", r->host_pageable_peak);
  lua_createtable(L, 0, 3);
  set_uint(L, "unknown_frees", r->unknown_frees);
  set_uint(L, "dropped_frees", r->dropped_frees);
  set_uint(L, "duplicate_allocs", r->duplicate_allocs);
  lua_setfield(L, -2, "skipped");
  set_uint(L, "timeline_points", r->ntimeline);
  if (r->lean) set_bool(L, "lean", 1);
  set_num(L, "elapsed_s", r->elapsed_s);
}

void lapi_result_push_table(lua_State *L, lresult *lr, int ud_idx) {
  ud_idx = lua_absindex(L, ud_idx);
  luaL_checkstack(L, 8, "result");
  lua_createtable(L, 0, 48);
  run_meta m = meta_of(lr);
  set_settings(L, &m);
  set_figures(L, &lr->run.result);
  set_bool(L, "fits", lr->run.result.ooms == 0);
  set_bool(L, "derived", lr->transforms && *lr->transforms);
  lapi_push_lines(L, lr->transforms ? lr->transforms : "");
  lua_setfield(L, -2, "transforms");
  luaL_setmetatable(L, LAPI_RESULT_TABLE);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lapi_results_key);
  lua_pushvalue(L, -2);
  lua_pushvalue(L, ud_idx);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

/* ---- the heavy keys, on first read ---------------------------------------------------------- */

/* at_peak: live memory at the peak of allocated bytes, by category, by method, by call site. */
static void push_at_peak(lua_State *L, lresult *lr) {
  const replay_result *r = &lr->run.result;
  lua_createtable(L, 0, 8);
  set_int(L, "event", r->peak_allocated_seq);
  set_int(L, "ts", r->peak_ts);
  set_int(L, "allocated_bytes", r->peak_allocated);
  set_int(L, "reserved_bytes", r->at_peak_reserved);
  if (r->lean) return; /* nothing else was kept */
  set_uint(L, "largest_free_block_bytes", r->at_peak_largest_free);
  lua_newtable(L);
  for (int c = 0; c < SIM_CAT__COUNT; c++)
    if (r->category_bytes[c] || r->category_count[c]) set_int(L, sim_category_name(c), r->category_bytes[c]);
  lua_setfield(L, -2, "by_category");
  lua_newtable(L);
  for (int c = 0; c < SIM_CATSRC__COUNT; c++)
    if (r->catsrc_bytes[c]) set_int(L, sim_cat_source_name(c), r->catsrc_bytes[c]);
  lua_setfield(L, -2, "by_method");
  replay_names names = lstore_names(lr->ls);
  lua_createtable(L, (int)r->nsites, 0);
  for (size_t i = 0; i < r->nsites; i++) {
    lua_createtable(L, 0, 4);
    set_int(L, "stack_id", r->sites[i].stack);
    char *label = replay_stack_label(&names, r->sites[i].stack);
    if (label) push_text(L, label, strlen(label));
    else lua_pushnil(L);
    free(label);
    lua_setfield(L, -2, "site");
    set_int(L, "bytes", r->sites[i].bytes);
    set_int(L, "count", r->sites[i].count);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "top_sites");
}

static void push_oom_list(lua_State *L, const replay_result *r) {
  lua_createtable(L, (int)r->noom_list, 0);
  for (size_t i = 0; i < r->noom_list; i++) {
    const replay_oom *o = &r->oom_list[i];
    lua_createtable(L, 0, 8);
    set_int(L, "event", o->seq);
    set_int(L, "device", o->device);
    set_int(L, "stream", o->stream);
    set_uint(L, "size_bytes", o->size);
    set_int(L, "allocated_bytes", o->allocated);
    set_int(L, "reserved_bytes", o->reserved);
    set_uint(L, "largest_free_block_bytes", o->largest_free);
    set_str(L, "message", o->message);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static void push_devices(lua_State *L, const replay_result *r) {
  lua_createtable(L, r->ndevices, 0);
  for (int i = 0; i < r->ndevices; i++) {
    const replay_device_result *d = &r->devices[i];
    lua_createtable(L, 0, 7);
    set_int(L, "device", d->device);
    set_int(L, "peak_allocated_bytes", d->peak_allocated);
    set_int(L, "peak_reserved_bytes", d->peak_reserved);
    set_int(L, "peak_requested_bytes", d->peak_requested);
    set_uint(L, "device_mallocs", d->device_mallocs);
    set_uint(L, "device_frees", d->device_frees);
    set_uint(L, "ooms", d->ooms);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static void push_timeline(lua_State *L, const replay_result *r) {
  lua_createtable(L, (int)r->ntimeline, 0);
  for (size_t i = 0; i < r->ntimeline; i++) {
    const replay_point *p = &r->timeline[i];
    lua_createtable(L, 0, 5);
    set_int(L, "event", p->seq);
    set_int(L, "ts", p->ts);
    set_int(L, "allocated_bytes", p->allocated);
    set_int(L, "reserved_bytes", p->reserved);
    set_int(L, "requested_bytes", p->requested);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* time: the time model's prediction, as the report writes it (its JSON, read back). The report
 * is written without the parts this key does not need (sites, OOMs, devices, timeline). */
static void push_time(lua_State *L, lresult *lr) {
  if (!lr->run.has_time) {
    lua_pushnil(L);
    return;
  }
  replay_result bare = lr->run.result;
  bare.nsites = bare.noom_list = bare.ntimeline = 0;
  bare.ndevices = 0;
  run_meta m = meta_of(lr);
  replay_names names = lstore_names(lr->ls);
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  report_json(g, &names, &m, &bare, 0);
  yajl_gen_map_close(g);
  size_t len;
  const char *text = jsonw_text(g, &len);
  char *copy = sim_xmalloc(len + 1);
  memcpy(copy, text, len);
  copy[len] = 0;
  yajl_gen_free(g);
  char errbuf[256];
  yajl_val tree = yajl_tree_parse(copy, errbuf, sizeof errbuf);
  free(copy);
  if (!tree) {
    luaL_error(L, "internal error: cannot read a replay's time prediction: %s", errbuf);
    return;
  }
  const char *path[] = {"time", NULL};
  push_json_tree(L, tree, yajl_tree_get(tree, path, yajl_t_object));
}

/* The keys built on first read; timeline last (lapi_result_complete leaves it out). */
static const char *const heavy_keys[] = {"at_peak", "oom_list", "devices", "time", "timeline", NULL};

int lapi_result_build(lua_State *L, int idx, const char *k) {
  idx = lua_absindex(L, idx);
  size_t i = 0;
  while (heavy_keys[i] && strcmp(heavy_keys[i], k)) i++;
  if (!heavy_keys[i]) return 0;
  lresult *lr = lapi_result_of(L, idx);
  if (!lr || !lr->run.executed) {
    lua_pushnil(L);
    return 1;
  }
  if (lr->run.result.lean && !heavy_keys[i + 1]) return 0; /* a lean replay kept no timeline */
  luaL_checkstack(L, 8, "result");
  switch (i) {
  case 0: push_at_peak(L, lr); break;
  case 1: push_oom_list(L, &lr->run.result); break;
  case 2: push_devices(L, &lr->run.result); break;
  case 3: push_time(L, lr); break;
  default: push_timeline(L, &lr->run.result); break;
  }
  lua_pushstring(L, k);
  lua_pushvalue(L, -2);
  lua_rawset(L, idx); /* kept in the table */
  return 1;
}

void lapi_result_complete(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return;
  luaL_getmetatable(L, LAPI_RESULT_TABLE);
  int is_result = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  if (!is_result) return;
  for (size_t i = 0; heavy_keys[i + 1]; i++) {
    lua_pushstring(L, heavy_keys[i]);
    int have = lua_rawget(L, idx) != LUA_TNIL;
    lua_pop(L, 1);
    if (!have && lapi_result_build(L, idx, heavy_keys[i])) lua_pop(L, 1);
  }
}

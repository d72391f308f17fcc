/* lua_lib.c: the `memplay` library as Lua sees it: every luaL_Reg table, the metatables, luaopen_memplay. */
#include <string.h>

#include "lua_api_help.h"
#include "lua_lib_funcs.h"

/* The library's own Lua (replay/lua/lua_prelude.lua, embedded at build time by
 * cmake/embed_text.cmake): helpers that read better in Lua than in C, and the kit the bundled
 * scenarios share (docs/lua-api.md). */
extern const char lua_prelude[];

/* ---- memplay.* ------------------------------------------------------------------------------ */

static const luaL_Reg memplaylib[] = {
  /* the run (lua_api.c) */
  {"param", lapi_mp_param},
  {"size_param", lapi_mp_size_param},
  {"params", lapi_mp_params},
  {"scenario", lapi_mp_scenario},
  /* stores and traces (lua_api_store.c) */
  {"store", lapi_mp_store},
  {"open", lapi_mp_open},
  {"trace", lapi_mp_trace},
  /* devices, assumptions, variants, utilities (lua_api.c) */
  {"device", lapi_mp_device},
  {"device_memory", lapi_mp_device_memory},
  {"device_profile", lapi_mp_device_profile},
  {"devices", lapi_mp_devices},
  {"assume", lapi_mp_assume},
  {"assumptions", lapi_mp_assumptions},
  {"variants", lapi_mp_variants},
  {"bytes", lapi_mp_bytes},
  {"duration", lapi_mp_duration},
  {"parse_size", lapi_mp_parse_size},
  {"kernel_class", lapi_mp_kernel_class},
  {"fresh_addr", lapi_mp_fresh_addr},
  {"lower_bound", lapi_mp_lower_bound},
  {"order", lapi_mp_order},
  {"kernel_classes", lapi_mp_kernel_classes},
  {"allocators", lapi_mp_allocators},
  /* what the script writes (lua_api_out.c) */
  {"write_out", lapi_mp_write_out},
  {"write_text", lapi_mp_write_text},
  {"plot", lapi_mp_plot},
  {"write_csv", lapi_mp_write_csv},
  {"write_json", lapi_mp_write_json},
  {"json", lapi_mp_json},
  {"variant", lapi_mp_variant},
  {NULL, NULL},
};

/* ---- Store (lua_api_store.c) ---------------------------------------------------------------- */

static const luaL_Reg store_meth[] = {
  {"traces", lapi_store_traces},
  {"trace", lapi_store_trace},
  {"path", lapi_store_path},
  {NULL, NULL},
};

static const luaL_Reg store_metameth[] = {
  {"__index", NULL}, /* the method table */
  {"__gc", lapi_store_gc},
  {"__close", lapi_store_gc},
  {"__tostring", lapi_store_tostring},
  {NULL, NULL},
};

/* ---- Trace ---------------------------------------------------------------------------------- */

static const luaL_Reg trace_meth[] = {
  /* reading (lua_api_trace.c) */
  {"info", lapi_trace_info},
  {"name", lapi_trace_name},
  {"describe", lapi_trace_describe},
  {"events", lapi_trace_events},
  {"count", lapi_trace_count},
  {"summary", lapi_trace_summary},
  {"lifetimes", lapi_trace_lifetimes},
  {"allocations", lapi_trace_allocations},
  {"sites", lapi_trace_sites},
  {"frames", lapi_trace_frames},
  {"site_label", lapi_trace_site_label},
  {"steps", lapi_trace_steps},
  {"kernels", lapi_trace_kernels},
  /* transforms (lua_api_transform.c) */
  {"scale", lapi_trace_scale},
  {"elem_size", lapi_trace_elem_size},
  {"resize", lapi_trace_resize},
  {"drop", lapi_trace_drop},
  {"drop_steps", lapi_trace_drop_steps},
  {"insert", lapi_trace_insert},
  {"insert_at", lapi_trace_insert_at},
  {"pin", lapi_trace_pin},
  {"scale_time", lapi_trace_scale_time},
  {"repeat_block", lapi_trace_repeat_block},
  {"repeat_steps", lapi_trace_repeat_steps},
  {"map", lapi_trace_map},
  {"merge", lapi_trace_merge},
  {"cache", lapi_trace_cache},
  {"save", lapi_trace_save},
  /* replaying (lua_api_replay.c) */
  {"replay", lapi_trace_replay},
  {NULL, NULL},
};

static const luaL_Reg trace_metameth[] = {
  {"__index", NULL}, /* the method table */
  {"__gc", lapi_trace_gc},
  {"__close", lapi_trace_gc},
  {"__tostring", lapi_trace_tostring},
  {NULL, NULL},
};

/* ---- results (lua_api_replay.c) ------------------------------------------------------------- */

/* The userdata that holds a replay's result: no methods, freed with the last table that names it. */
static const luaL_Reg result_metameth[] = {
  {"__gc", lapi_result_gc},
  {NULL, NULL},
};

/* The result table a script reads: the members of `replay --json`, and errors on unknown ones. */
static const luaL_Reg result_table_metameth[] = {
  {"__index", lapi_result_index},
  {"__pairs", lapi_result_pairs},
  {NULL, NULL},
};

/* ---- scratch (lua_api_help.c) --------------------------------------------------------------- */

static const luaL_Reg scratch_metameth[] = {
  {"__gc", lapi_scratch_gc},
  {"__close", lapi_scratch_gc},
  {NULL, NULL},
};

/* ---- opening the library -------------------------------------------------------------------- */

/* The metatable `name` with metamethods metameth, and methods meth (NULL: none) as its __index. */
static void createmeta(lua_State *L, const char *name, const luaL_Reg *meth, const luaL_Reg *metameth) {
  luaL_newmetatable(L, name);
  luaL_setfuncs(L, metameth, 0);
  if (meth) {
    int n = 0;
    while (meth[n].name) n++;
    lua_createtable(L, 0, n);
    luaL_setfuncs(L, meth, 0);
    lua_setfield(L, -2, "__index"); /* metatable.__index = the method table */
  }
  lua_pop(L, 1);
}

/* memplay.flags, kinds, categories and version. */
static void push_constants(lua_State *L) {
  lua_newtable(L);
  for (int b = 0; b < SIM_EVF__COUNT; b++) {
    lua_pushinteger(L, 1 << b);
    lua_setfield(L, -2, sim_event_flag_name(b));
  }
  lua_setfield(L, -2, "flags");
  lua_newtable(L);
  for (int k = 1; k < SIM_EV__COUNT; k++) {
    lua_pushstring(L, sim_event_kind_name(k));
    lua_rawseti(L, -2, k);
  }
  lua_setfield(L, -2, "kinds");
  lua_newtable(L);
  for (int k = 0; k < SIM_CAT__COUNT; k++) {
    lua_pushstring(L, sim_category_name(k));
    lua_rawseti(L, -2, k + 1);
  }
  lua_setfield(L, -2, "categories");
  lua_pushstring(L, MEMPLAY_VERSION);
  lua_setfield(L, -2, "version");
}

int luaopen_memplay(lua_State *L) {
  luaL_newlib(L, memplaylib);
  push_constants(L);
  createmeta(L, LAPI_STORE, store_meth, store_metameth);
  createmeta(L, LAPI_TRACE, trace_meth, trace_metameth);
  createmeta(L, LAPI_RESULT, NULL, result_metameth);
  createmeta(L, LAPI_RESULT_TABLE, NULL, result_table_metameth);
  createmeta(L, LAPI_SCRATCH, NULL, scratch_metameth);
  /* result table -> result userdata, weak in its keys: a result lives as long as its table */
  lua_newtable(L);
  lua_newtable(L);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lapi_results_key);
  return 1;
}

/* ---- the host ------------------------------------------------------------------------------- */

lua_host *lua_api_host(lua_ctx *cx, const lua_host_limits *lim, char *err, size_t errlen) {
  lua_host *h = lua_host_new(lim, err, errlen);
  if (!h) return NULL;
  if (cx->st && !cx->p->main) {
    cx->p->main = lstore_new(cx->st, 0, 1);
    if (cx->ses && session_store(cx->ses) == cx->st) cx->p->main->labels = session_labels_of(cx->ses); /* borrowed */
  }
  lua_host_set_context(h, cx);
  lua_host_open(h, "memplay", luaopen_memplay);
  lua_State *L = lua_host_state(h);
  lua_pushcfunction(L, lapi_print);
  lua_setglobal(L, "print");
  if (lua_host_run_string(h, "=memplay", lua_prelude, strlen(lua_prelude)) != LUA_HOST_OK) {
    snprintf(err, errlen, "cannot start the memplay library: %s", lua_host_error(h));
    lua_host_free(h);
    return NULL;
  }
  return h;
}

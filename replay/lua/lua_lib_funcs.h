/* lua_lib_funcs.h: the C functions lua_lib.c registers, by the file that defines them (not for other modules). */
#ifndef REPLAY_LUA_LIB_FUNCS_H
#define REPLAY_LUA_LIB_FUNCS_H

#include <lua.h>

/*
 * Each is a lua_CFunction reached from Lua only, through the luaL_Reg tables of lua_lib.c:
 * lapi_mp_X is memplay.X, lapi_store_X the Store method (or metamethod) X, lapi_trace_X the
 * Trace's, lapi_result_X the result's. No file of the library calls another's from C.
 */

/* lua_api.c: the run's context: parameters, devices, assumptions, variants, utilities. */
int lapi_mp_param(lua_State *L);
int lapi_mp_size_param(lua_State *L);
int lapi_mp_params(lua_State *L);
int lapi_mp_scenario(lua_State *L);
int lapi_mp_device(lua_State *L);
int lapi_mp_device_memory(lua_State *L);
int lapi_mp_device_profile(lua_State *L);
int lapi_mp_devices(lua_State *L);
int lapi_mp_assume(lua_State *L);
int lapi_mp_assumptions(lua_State *L);
int lapi_mp_variant(lua_State *L);
int lapi_mp_variants(lua_State *L);
int lapi_mp_bytes(lua_State *L);
int lapi_mp_duration(lua_State *L);
int lapi_mp_parse_size(lua_State *L);
int lapi_mp_fresh_addr(lua_State *L);
int lapi_mp_lower_bound(lua_State *L);
int lapi_mp_order(lua_State *L);
int lapi_mp_kernel_class(lua_State *L);
int lapi_mp_kernel_classes(lua_State *L);
int lapi_mp_allocators(lua_State *L);

/* lua_api_store.c: stores and the traces they hold. */
int lapi_mp_store(lua_State *L);
int lapi_mp_open(lua_State *L);
int lapi_mp_trace(lua_State *L);
int lapi_store_traces(lua_State *L);
int lapi_store_trace(lua_State *L);
int lapi_store_path(lua_State *L);
int lapi_store_gc(lua_State *L);
int lapi_store_tostring(lua_State *L);

/* lua_api_trace.c: reading a trace. */
int lapi_trace_info(lua_State *L);
int lapi_trace_name(lua_State *L);
int lapi_trace_describe(lua_State *L);
int lapi_trace_events(lua_State *L);
int lapi_trace_count(lua_State *L);
int lapi_trace_summary(lua_State *L);
int lapi_trace_lifetimes(lua_State *L);
int lapi_trace_allocations(lua_State *L);
int lapi_trace_sites(lua_State *L);
int lapi_trace_frames(lua_State *L);
int lapi_trace_site_label(lua_State *L);
int lapi_trace_steps(lua_State *L);
int lapi_trace_kernels(lua_State *L);
int lapi_trace_gc(lua_State *L);
int lapi_trace_tostring(lua_State *L);

/* lua_api_transform.c: traces derived from a trace, and saving one. */
int lapi_trace_scale(lua_State *L);
int lapi_trace_elem_size(lua_State *L);
int lapi_trace_resize(lua_State *L);
int lapi_trace_drop(lua_State *L);
int lapi_trace_drop_steps(lua_State *L);
int lapi_trace_insert(lua_State *L);
int lapi_trace_insert_at(lua_State *L);
int lapi_trace_pin(lua_State *L);
int lapi_trace_scale_time(lua_State *L);
int lapi_trace_repeat_block(lua_State *L);
int lapi_trace_repeat_steps(lua_State *L);
int lapi_trace_map(lua_State *L);
int lapi_trace_merge(lua_State *L);
int lapi_trace_cache(lua_State *L);
int lapi_trace_save(lua_State *L);

/* lua_api_replay.c: trace:replay{...} and its result. */
int lapi_trace_replay(lua_State *L);
int lapi_result_gc(lua_State *L);
int lapi_result_index(lua_State *L);
int lapi_result_pairs(lua_State *L);

/* lua_api_out.c: what a script writes: result files, JSON, its output. */
int lapi_mp_write_text(lua_State *L);
int lapi_mp_plot(lua_State *L);
int lapi_mp_write_csv(lua_State *L);
int lapi_mp_write_json(lua_State *L);
int lapi_mp_json(lua_State *L);
int lapi_mp_write_out(lua_State *L);
int lapi_print(lua_State *L); /* the global print */

/* lua_api_help.c: the scratch userdata's __gc and __close. */
int lapi_scratch_gc(lua_State *L);

#endif

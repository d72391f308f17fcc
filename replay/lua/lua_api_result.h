/* lua_api_result.h: a replay's result as the Lua table scripts read (lua_api_result.c; not for other modules). */
#ifndef REPLAY_LUA_API_RESULT_H
#define REPLAY_LUA_API_RESULT_H

#include "lua_api_help.h"

/*
 * A result table holds the keys of `memplay replay --json` (docs/lua-api.md, "Results"), built
 * from the C result without JSON text in between. The light keys (the run's settings, counts,
 * peaks and totals) are set when the table is made; the heavy ones are built when first read
 * (the table's __index) and kept in the table: `at_peak` (with its labelled top call sites),
 * `oom_list`, `devices`, `time`, and `timeline` (which, as before, a table only has once read).
 * Their values are those the JSON gives: numbers written with 9 significant digits read back as
 * the same floats, strings made valid UTF-8, nulls left out.
 */

/* Pushes the table of the result userdata at ud_idx (which it records as the table's owner). */
void lapi_result_push_table(lua_State *L, lresult *lr, int ud_idx);
/* Builds key k of the result table at idx if it is one built on first read: pushes it (nil when
 * the result has none, as `time` without a device) and returns 1; returns 0 for any other key. */
int lapi_result_build(lua_State *L, int idx, const char *k);
/* Builds every key of the result table at idx that is built on first read (not `timeline`), so
 * that pairs, memplay.json and write_csv see what `replay --json` has; nothing for another value. */
void lapi_result_complete(lua_State *L, int idx);

#endif

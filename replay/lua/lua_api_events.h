/* lua_api_events.h: helpers over a trace's events (lua_api_events.c): summaries, lifetimes, steps, filters. */
#ifndef REPLAY_LUA_API_EVENTS_H
#define REPLAY_LUA_API_EVENTS_H

#include "lua_api_help.h"

/* What a trace knows about itself, computed once on first use. */
struct lsummary {
  int refs;
  uint64_t events, by_kind[SIM_EV__COUNT];
  uint64_t allocs, frees, size_min, size_max;
  int64_t alloc_bytes; /* sums of bytes: sim_bytes_sum */
  uint64_t cat_allocs[SIM_CAT__COUNT];
  int64_t cat_bytes[SIM_CAT__COUNT];
  int64_t live_peak, live_peak_seq; /* requested bytes live at once (no allocator) */
  int64_t first_ts, last_ts;
  int32_t step_min, step_max;
  uint64_t step_markers;
  int64_t *streams;
  size_t nstreams;
  int devices[REPLAY_MAX_DEVICES + 1];
  uint64_t kernel_ns, copy_ns;
  int64_t copy_bytes[SIM_COPY__COUNT][SIM_MEM__COUNT];
  uint64_t copies[SIM_COPY__COUNT][SIM_MEM__COUNT];
  int64_t *names; /* distinct name ids, sorted */
  size_t nnames;
  int64_t *sites; /* distinct call stack ids, sorted */
  size_t nsites;
};

/* The trace's summary, computed on first use (errors are raised). */
lsummary *lapi_summary(lua_State *L, ltrace *t);
/* The summary of the trace's base (its own after a merge): the names and call sites that
 * filters resolve against. Transforms do not add names or call sites of their own. */
lsummary *lapi_base_summary(lua_State *L, ltrace *t);
/* Drops one reference to s (NULL: nothing). */
void lapi_summary_unref(lsummary *s);
/* The lifetimes of the trace's base, computed on first use. */
xf_lifetime *lapi_lifetime(lua_State *L, ltrace *t);

/* Pushes t:steps(): each step's first and last event (from the events' step numbers, else markers). */
void lapi_push_steps(lua_State *L, ltrace *t);

/* Reads a filter from the table at idx (unknown keys are errors, listing the known ones and
 * extra_keys, the other options of function fn). */
void lapi_filter(lua_State *L, int idx, ltrace *t, xf_filter *f, const char *fn, const char *const *extra_keys);

/* Pushes an event as a table (names looked up in s through the cache table at cache_idx). */
void lapi_push_event(lua_State *L, const sim_event *ev, store *s, int cache_idx);
/* Reads an event table into ev (fields absent from the table keep ev's values). */
void lapi_read_event(lua_State *L, int idx, sim_event *ev);

#endif

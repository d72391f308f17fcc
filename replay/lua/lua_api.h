/* lua_api.h: the `memplay` Lua library: what a script sees, and what the commands that run scripts do with it. */
#ifndef REPLAY_LUA_API_H
#define REPLAY_LUA_API_H

#include <stdint.h>
#include <stdio.h>

#include <lua.h>

#include "lua_host.h"
#include "session/session.h"
#include "store/store.h"

/* One --set KEY=VALUE. */
typedef struct lua_param {
  const char *key, *value;
  int used; /* the script read it */
} lua_param;

/*
 * What a run of a script needs from the command line, and what it leaves for the command to
 * do once the script has succeeded: variants to store as runs, result files to write. Nothing
 * reaches the store or the file system before lua_api_finish, so a failing script leaves both
 * as they were.
 */
typedef struct lua_ctx {
  /* set by the command */
  store *st;               /* the store of --db (opened for writing) */
  const char *script;      /* the script's path */
  const char *scenario;    /* its name: the file name without .lua */
  int64_t trace_id;        /* whatif: the trace on the command line (0: none) */
  lua_param *params;
  size_t nparams;
  const char *device;      /* --device NAME, or NULL */
  const char *out_dir;     /* --out DIR: where result files go (NULL: none may be written) */
  FILE *out;               /* where the script's print and tables go */
  int whatif;              /* 1: `memplay whatif` (the first variant must be the unchanged trace) */
  int no_runs;             /* 1: do not store the variants as runs (traces the script saves are kept) */
  void (*on_replay)(void *arg, uint64_t events); /* after each replay the script makes (progress), or NULL */
  void *progress_arg;
  /* Optional, for a caller that runs many scripts over the same store (a comparison's scenario
   * cells): the session replays go through (borrowed; NULL: the run makes its own), so that what
   * it prepared (names, device profiles, a window's start state, copy fits) serves every run;
   * and trace_id's events when the caller holds them in memory (borrowed, valid until
   * lua_ctx_release): memplay.trace() then reads them in place instead of the store. */
  session *ses;
  const sim_event *trace_events;
  size_t ntrace_events;
  const replay_plan *trace_plan; /* their plan (source.h), when the caller has one (borrowed, or NULL) */
  /* kept by the library */
  struct lua_ctx_private *p;
} lua_ctx;

void lua_ctx_init(lua_ctx *cx);
void lua_ctx_release(lua_ctx *cx);

/* The only symbol the library exports: opens `memplay` (lua_lib.c; lua_host_open registers it). */
int luaopen_memplay(lua_State *L);

/* A sandboxed host with the library open and cx as its context; NULL with a message. */
lua_host *lua_api_host(lua_ctx *cx, const lua_host_limits *lim, char *err, size_t errlen);

/*
 * After the script returned: checks that every --set key was read, writes the result files
 * into out_dir and stores the variants as runs (kind "whatif") and any traces the script
 * saved, all in one transaction. Returns 0, or -1 with a message (and the store unchanged).
 */
int lua_api_finish(lua_ctx *cx, lua_host *h, char *err, size_t errlen);
/* After a failed script: rolls back whatever the script began. */
void lua_api_abort(lua_ctx *cx);

/* Variants recorded by the script (after lua_api_finish, with their run ids). */
size_t lua_api_nvariants(const lua_ctx *cx);
/* Whether the scenario's answer fits: 1 a variant (other than the first, the unchanged trace,
 * when there are several) replayed without an OOM; 0 every such variant ran out of memory (of
 * its capacity, or of an allocator's own limit); -1 no variant. */
int lua_api_fits(const lua_ctx *cx);
/* Variant i (after lua_api_finish; valid until lua_ctx_release): its run (what ran, and its
 * result), its name, and its step time and samples per second (< 0: unknown). NULL when there
 * is no variant i. A comparison with a scenario takes a scenario's last variant as its answer. */
const session_run *lua_api_variant(const lua_ctx *cx, size_t i, const char **name, double *step_time_s,
                                   double *samples_per_s);
/* Prints {"scenario": ..., "variants": [...], "assumptions": [...]} to f. */
void lua_api_print_json(lua_ctx *cx, FILE *f);

#endif

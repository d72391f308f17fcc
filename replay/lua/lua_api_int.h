/* lua_api_int.h: what the files of the Lua library share (not for other modules). */
#ifndef REPLAY_LUA_API_INT_H
#define REPLAY_LUA_API_INT_H

#include <lauxlib.h>
#include <lua.h>

#include "session/session.h"
#include "store/devices_store.h"
#include "engine/engine.h"
#include "lua_api.h"
#include "engine/report.h"
#include "engine/transform.h"

/* Userdata type names (luaL_checkudata). */
#define LAPI_STORE "memplay.store"
#define LAPI_TRACE "memplay.trace"
#define LAPI_RESULT "memplay.result"
#define LAPI_EVENTS "memplay.events"

/* A store shared by the Store userdata and every trace read from it. */
typedef struct lstore {
  int refs;
  store *s;
  int owned;  /* opened by the script (memplay.open): closed with the last reference */
  int writable;
} lstore;

lstore *lstore_new(store *s, int owned, int writable);
void lstore_ref(lstore *ls);
void lstore_unref(lstore *ls);

/* Events held in memory (t:cache()), shared by the nodes that read them. */
typedef struct lmem {
  int refs;
  sim_event *evs;
  size_t n;
} lmem;

/* What a trace knows about itself, computed once on first use. */
typedef struct lsummary {
  int refs;
  uint64_t events, by_kind[SIM_EV__COUNT];
  uint64_t allocs, alloc_bytes, frees, size_min, size_max;
  uint64_t cat_allocs[SIM_CAT__COUNT], cat_bytes[SIM_CAT__COUNT];
  int64_t live_peak, live_peak_seq; /* requested bytes live at once (no allocator) */
  int64_t first_ts, last_ts;
  int32_t step_min, step_max;
  uint64_t step_markers;
  int64_t *streams;
  size_t nstreams;
  int devices[REPLAY_MAX_DEVICES + 1];
  uint64_t kernel_ns, copy_ns;
  uint64_t copy_bytes[SIM_COPY__COUNT][SIM_MEM__COUNT], copies[SIM_COPY__COUNT][SIM_MEM__COUNT];
  int64_t *names; /* distinct name ids, sorted */
  size_t nnames;
  int64_t *sites; /* distinct call stack ids, sorted */
  size_t nsites;
} lsummary;

/* The Trace userdata. */
typedef struct ltrace {
  xf_node *node;    /* what to open */
  xf_node *base;    /* the single leaf under it (NULL after a merge) */
  lstore *ls;       /* the store its names and call stacks live in */
  store_trace meta; /* the base trace's row (a derived trace keeps its base's metadata) */
  int derived;
  xf_lifetime *lt;  /* the base's lifetimes, once computed */
  lsummary *sum;    /* this trace's summary, once computed */
  lsummary *bsum;   /* its base's, for filters (names and call sites), shared with what derives from it */
} ltrace;

/* The replay result behind a result table: the session's run, and what the result names. */
typedef struct lresult {
  session_run run;  /* prepared and executed; its trace pointers are cleared afterwards */
  lstore *ls;       /* for call site labels */
  char *trace_name, *transforms;
  int64_t trace_id; /* 0 for a trace of another store than the script's */
} lresult;

typedef struct lvariant {
  char *name;
  int ref; /* registry reference to the result userdata */
  lresult *res;
  double step_time_s, samples_per_s;
  int64_t run_id;
  int derived;
} lvariant;

typedef struct lfile {
  char *name, *data;
  size_t len;
} lfile;

struct lua_ctx_private {
  lstore *main;
  lvariant *variants;
  size_t nvariants, vcap;
  lfile *files;
  size_t nfiles, fcap;
  char **notes;
  size_t nnotes, ncap;
  int tx;       /* a transaction is open on the main store */
  lua_State *L; /* the thread that called into the library last (for per-event functions) */
  session *ses; /* replays, device profiles and stored runs (over the script's store), made on first use */
  int finished;
};

lua_ctx *lapi_ctx(lua_State *L);
/* The script's session (over the store of --db, or none). */
session *lapi_session(lua_State *L);
/* Opens a transaction on the main store if none is open yet (a script's first write). */
int lapi_begin(lua_State *L, lua_ctx *cx);

/* lua_api_trace.c */
void lapi_trace_register(lua_State *L);
ltrace *lapi_check_trace(lua_State *L, int idx);
/* Pushes a new, inert Trace userdata (so nothing leaks if building its node raises), and
 * makes it a trace: takes over node (one reference), references ls and lt. */
ltrace *lapi_new_trace(lua_State *L);
void lapi_set_trace(ltrace *t, xf_node *node, xf_node *base, lstore *ls, const store_trace *meta, int derived,
                    xf_lifetime *lt);
/* Opens the trace's events as a source (sets the context's current thread first). */
int lapi_open(lua_State *L, ltrace *t, replay_source *src, char *err, size_t errlen);
/* The trace's summary and lifetimes, computed on first use (errors are raised). */
lsummary *lapi_summary(lua_State *L, ltrace *t);
/* The summary of the trace's base (its own after a merge): the names and call sites that
 * filters resolve against. Transforms do not add names or call sites of their own. */
lsummary *lapi_base_summary(lua_State *L, ltrace *t);
xf_lifetime *lapi_lifetime(lua_State *L, ltrace *t);
/* The store functions. */
void lapi_store_register(lua_State *L);
void lapi_push_store(lua_State *L, lstore *ls);
/* Reads a filter from the table at idx (unknown keys are errors, listing the known ones). */
void lapi_filter(lua_State *L, int idx, ltrace *t, xf_filter *f, const char *fn, const char *const *extra_keys);
/* Pushes an event as a table (names looked up in s through the cache table at cache_idx). */
void lapi_push_event(lua_State *L, const sim_event *ev, store *s, int cache_idx);

/* lua_api_replay.c */
void lapi_replay_register(lua_State *L);
int lapi_replay(lua_State *L);
lresult *lapi_result_of(lua_State *L, int idx);
/* Pushes the result's members (the keys of `replay --json`) as a table tied to the result
 * userdata at ud_idx; lapi_push_result_ud pushes the userdata behind a result table. */
void lapi_push_result_table(lua_State *L, lresult *lr, int ud_idx);
void lapi_push_result_ud(lua_State *L, int idx);
void lresult_clear(lresult *lr);
/* What a run of this result is, for report_json and report_save_run. */
run_meta lapi_meta(const lresult *lr, const char *scenario, const char *variant, double step_time_s,
                   double samples_per_s);
/* A device profile by name, from the store (or the built-ins): 0, or -1 after pushing nothing
 * and raising a Lua error when absent. */
void lapi_device(lua_State *L, const char *name, devices_entry *e);

/* lua_api_out.c */
void lapi_out_register(lua_State *L);

/*
 * Scratch: the C resources one library function holds while it may raise a Lua error (a bad
 * argument, the memory budget). It lives in a userdata on the Lua stack, so a raised error
 * cannot leak what it holds: its __gc frees everything; lapi_scratch_free frees it at once.
 */
typedef struct lscratch {
  replay_source src;
  int src_open;
  sim_map m1, m2, m3, m4;
  void *p[6]; /* freed with free() */
  xf_filter f, f2;
  store_writer *w;
  replay_result *res;
} lscratch;

lscratch *lapi_scratch(lua_State *L);
void lapi_scratch_free(lscratch *sc);
/* Opens the trace's events into sc->src (raising on failure). */
void lapi_scratch_open(lua_State *L, lscratch *sc, ltrace *t);
/* Reads the next event; raises a Lua error (after freeing sc) when the source fails. */
int lapi_scratch_next(lua_State *L, lscratch *sc, sim_event *ev, const char *what);

/* A size argument in bytes (a number, or a string such as "16GiB"). */
uint64_t lapi_check_size(lua_State *L, int idx, const char *what);

#endif

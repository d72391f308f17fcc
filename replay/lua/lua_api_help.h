/* lua_api_help.h: what the files of the memplay library share (lua_api_help.c; not for other modules). */
#ifndef REPLAY_LUA_API_HELP_H
#define REPLAY_LUA_API_HELP_H

#include <lauxlib.h>
#include <lua.h>

#include "session/labels.h"
#include "session/session.h"
#include "store/devices_store.h"
#include "engine/engine.h"
#include "lua_api.h"
#include "engine/report.h"
#include "engine/transform.h"

/* Userdata type names (luaL_checkudata): lua_lib.c makes their metatables when it opens the library. */
#define LAPI_STORE "memplay.store"
#define LAPI_TRACE "memplay.trace"
#define LAPI_RESULT "memplay.result"
#define LAPI_RESULT_TABLE "memplay.result_table"
#define LAPI_SCRATCH "memplay.scratch"

/* A store shared by the Store userdata and every trace read from it. */
typedef struct lstore {
  int refs;
  store *s;
  int owned;  /* opened by the script (memplay.open): closed with the last reference */
  int writable;
  session_labels *labels; /* its names, call-stack labels and frames, each read once (made on first
                             use, or the caller's session's: lua_ctx.ses) */
  int own_labels;
} lstore;

lstore *lstore_new(store *s, int owned, int writable);
void lstore_ref(lstore *ls);
void lstore_unref(lstore *ls);
/* The names of ls's store (call-stack labels, strings), read through its cache; none for NULL. */
replay_names lstore_names(lstore *ls);
/* Its cache (made on first use; NULL for NULL). */
session_labels *lstore_labels(lstore *ls);

/* What a trace knows about itself (lua_api_events.h), computed once on first use. */
typedef struct lsummary lsummary;

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
  const sim_event *arr; /* t:cache()'s trace: its events in memory (owned by its node), which a replay
                           reads in place; NULL for any other trace */
  size_t narr;
  int seq_order;        /* arr lists its events in seq order: 1 yes, -1 no, 0 not checked yet */
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
  struct outfile *out; /* while staged: written, not yet committed (io/outfile.h) */
} lfile;

struct lua_ctx_private {
  lstore *main;
  replay_plan_kept held_plan; /* the plan of the events the caller holds (trace_events): lent, or made */
  lvariant *variants;
  size_t nvariants, vcap;
  lfile *files;
  size_t nfiles, fcap;
  char **notes;
  size_t nnotes, ncap;
  int tx;       /* a transaction is open on the main store */
  lua_State *L; /* the thread that called into the library last (for per-event functions) */
  session *ses; /* replays, device profiles and stored runs (over the script's store): the caller's
                   (lua_ctx.ses), else made on first use */
  int own_ses;  /* ses was made here (and is freed with the context) */
  int finished;
};

/* ---- the run's context ---------------------------------------------------------------------- */

/* The host's context (raising when there is none); notes L as the thread that called last. */
lua_ctx *lapi_ctx(lua_State *L);
/* The script's session (over the store of --db, or none). */
session *lapi_session(lua_State *L);
/* Opens a transaction on the main store if none is open yet (a script's first write). */
int lapi_begin(lua_State *L, lua_ctx *cx);

/* ---- stores and traces ---------------------------------------------------------------------- */

/* The Store userdata: a reference to a shared store (NULL once collected). */
typedef struct ustore {
  lstore *ls;
} ustore;

/* Pushes a Store userdata over ls (one more reference). */
void lapi_push_store(lua_State *L, lstore *ls);
ltrace *lapi_check_trace(lua_State *L, int idx);
/* Pushes a new, inert Trace userdata (so nothing leaks if building its node raises), and
 * lapi_set_trace makes it a trace: takes over node (one reference), references ls and lt. */
ltrace *lapi_new_trace(lua_State *L);
/* Pushes the table of the names of the trace at idx's events by id, made on first use and kept
 * with the trace (its user value), so that each name is read from the store once. */
void lapi_trace_names(lua_State *L, int idx);
void lapi_set_trace(ltrace *t, xf_node *node, xf_node *base, lstore *ls, const store_trace *meta, int derived,
                    xf_lifetime *lt);
/* Opens the trace's events as a source (sets the context's current thread first). */
int lapi_open(lua_State *L, ltrace *t, replay_source *src, char *err, size_t errlen);
/* Pushes a trace's row (memplay.store():traces(), t:info()) as a table. */
void lapi_push_meta(lua_State *L, const store_trace *t);

/* ---- scratch -------------------------------------------------------------------------------- */

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

/* ---- arguments and option tables ------------------------------------------------------------ */

/* A size argument in bytes (a number, or a string such as "16GiB"). */
uint64_t lapi_check_size(lua_State *L, int idx, const char *what);
/* Raises an error naming the first key of the options table at idx that is in neither keys nor
 * extra (both NULL-terminated; extra may be NULL), listing the known ones. */
void lapi_check_options(lua_State *L, int idx, const char *fn, const char *const *keys, const char *const *extra);
/* A range {a, b} (inclusive), {min = a, max = b}, or one number; absent ends keep *lo, *hi. */
void lapi_range(lua_State *L, int idx, const char *key, double *lo, double *hi);

/* Sets field k of the table on top (set_str: nothing when v is NULL). */
static inline void lapi_set_str(lua_State *L, const char *k, const char *v) {
  if (!v) return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static inline void lapi_set_int(lua_State *L, const char *k, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

static inline void lapi_set_num(lua_State *L, const char *k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}

/* Pushes the non-empty lines of text as a list. */
void lapi_push_lines(lua_State *L, const char *text);

/* ---- results -------------------------------------------------------------------------------- */

/* Registry key (its address) of the weak table: result table -> result userdata. */
extern const char lapi_results_key;

/* The result behind the value at idx (a result table or its userdata), or NULL. */
lresult *lapi_result_of(lua_State *L, int idx);
/* Pushes the userdata behind the result table (or userdata) at idx. */
void lapi_push_result_ud(lua_State *L, int idx);
/* What a run of this result is, for report_json and report_save_run. */
run_meta lapi_meta(const lresult *lr, const char *scenario, const char *variant, double step_time_s,
                   double samples_per_s);

#endif

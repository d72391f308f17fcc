/* store_runs.h: finished replays kept in the store as runs, and the store as a source of names. */
#ifndef REPLAY_STORE_RUNS_H
#define REPLAY_STORE_RUNS_H

#include "engine/names.h"
#include "engine/report.h"
#include "store.h"

/* The store's strings and call-stack labels as a names table (s may be NULL: no names). */
replay_names store_names(store *s);

/* Stores a run with its result JSON, timeline, OOMs and composition, inside the caller's
 * transaction; *run_id (may be NULL) receives its id. 0, or -1 with the store's error set. */
int store_run_save(store *s, const run_meta *m, const replay_result *r, int64_t *run_id);
/* The same with the names that label its call sites and critical path (NULL: read from s). */
int store_run_save_named(store *s, const replay_names *names, const run_meta *m, const replay_result *r,
                         int64_t *run_id);

/* Replaces the stored result JSON of a run (merge 0), or merges the JSON object json into it
 * (merge 1: SQLite's json_patch), inside the caller's transaction. 0, or -1 with the store's error. */
int store_run_set_result(store *s, int64_t run_id, const char *json, int merge);

/* A stored run's row, as store_run_load reads it. */
typedef struct store_run_row {
  int64_t id, trace_id;
  char *trace_name, *kind, *allocator, *backend, *scenario, *variant; /* NULL where not stored */
  uint64_t capacity; /* UINT64_MAX: unlimited */
  int lean;          /* a lean replay's run: it kept no timeline (replay_config.lean) */
} store_run_row;

/* Reads run id: its row, and its stored timeline and OOMs into r (with the peak the timeline
 * shows; release with replay_result_release). 0, 1 when there is no such run, or -1 with the
 * store's error. */
int store_run_load(store *s, int64_t id, store_run_row *row, replay_result *r);
void store_run_row_clear(store_run_row *row);

#endif

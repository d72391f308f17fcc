/* store_run_load.c: a stored run read back: its row, its timeline and its OOMs. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"
#include "store_runs.h"

static char *text_col(sqlite3_stmt *q, int i) {
  const unsigned char *t = sqlite3_column_text(q, i);
  return t ? strdup((const char *)t) : NULL;
}

static int load_row(store *s, int64_t id, store_run_row *row) {
  sqlite3_stmt *q = store_stmt(s, "SELECT trace_id, trace_name, kind, allocator, capacity, backend, scenario, variant, "
                                  "CASE WHEN json_valid(result) THEN coalesce(result ->> '$.lean', 0) ELSE 0 END FROM runs WHERE id = ?1");
  if (!q) return -1;
  sqlite3_reset(q);
  sqlite3_bind_int64(q, 1, id);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_DONE) return 1;
  if (rc != SQLITE_ROW) {
    store_fail(s, q, "cannot read run");
    return -1;
  }
  row->id = id;
  row->trace_id = sqlite3_column_int64(q, 0);
  row->trace_name = text_col(q, 1);
  row->kind = text_col(q, 2);
  row->allocator = text_col(q, 3);
  row->capacity = sqlite3_column_type(q, 4) == SQLITE_NULL ? UINT64_MAX : (uint64_t)sqlite3_column_int64(q, 4);
  row->backend = text_col(q, 5);
  row->scenario = text_col(q, 6);
  row->variant = text_col(q, 7);
  row->lean = sqlite3_column_int(q, 8) != 0;
  sqlite3_reset(q);
  return 0;
}

/* What the rows are read into: the result, and the room its arrays have. */
typedef struct loader {
  replay_result *r;
  size_t timeline_cap, oom_cap;
} loader;

/* Calls take(q, l) for each row a run's query (its ?1 the run id) gives. 0, or -1 after store_fail
 * with what was being read. */
static int each_row(store *s, const char *sql, int64_t id, void (*take)(sqlite3_stmt *q, loader *l), loader *l,
                    const char *what) {
  sqlite3_stmt *q = store_stmt(s, sql);
  if (!q) return -1;
  sqlite3_reset(q);
  sqlite3_bind_int64(q, 1, id);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) take(q, l);
  if (rc != SQLITE_DONE) return store_fail(s, q, what), -1;
  sqlite3_reset(q);
  return 0;
}

static void take_point(sqlite3_stmt *q, loader *l) {
  replay_result *r = l->r;
  sim_grow((void **)&r->timeline, &l->timeline_cap, r->ntimeline + 1, sizeof *r->timeline);
  r->timeline[r->ntimeline++] = (replay_point){sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1),
                                               sqlite3_column_int64(q, 2), sqlite3_column_int64(q, 3),
                                               sqlite3_column_int64(q, 4)};
}

static void take_oom(sqlite3_stmt *q, loader *l) {
  replay_result *r = l->r;
  sim_grow((void **)&r->oom_list, &l->oom_cap, r->noom_list + 1, sizeof *r->oom_list);
  replay_oom *o = &r->oom_list[r->noom_list++];
  memset(o, 0, sizeof *o);
  o->seq = sqlite3_column_int64(q, 0);
  o->device = sqlite3_column_int(q, 1);
  o->stream = sqlite3_column_int64(q, 2);
  o->size = (uint64_t)sqlite3_column_int64(q, 3);
  o->allocated = sqlite3_column_int64(q, 4);
  o->reserved = sqlite3_column_int64(q, 5);
  o->largest_free = (uint64_t)sqlite3_column_int64(q, 6);
  const unsigned char *m = sqlite3_column_text(q, 7);
  snprintf(o->message, sizeof o->message, "%s", m ? (const char *)m : "");
}

static int load_timeline(store *s, int64_t id, loader *l) {
  return each_row(s, "SELECT seq, ts, allocated, reserved, requested FROM run_timeline WHERE run_id = ?1 ORDER BY idx",
                  id, take_point, l, "cannot read run timeline");
}

static int load_ooms(store *s, int64_t id, loader *l) {
  return each_row(s,
                  "SELECT seq, device, stream, size, allocated, reserved, largest_free, message "
                  "FROM run_ooms WHERE run_id = ?1 ORDER BY idx",
                  id, take_oom, l, "cannot read run OOMs");
}

int store_run_load(store *s, int64_t id, store_run_row *row, replay_result *r) {
  memset(row, 0, sizeof *row);
  memset(r, 0, sizeof *r);
  int rc = load_row(s, id, row);
  if (rc) return rc;
  loader l = {.r = r};
  if (load_timeline(s, id, &l) || load_ooms(s, id, &l)) {
    store_run_row_clear(row);
    replay_result_release(r);
    return -1;
  }
  /* the figures a picture labels, from the timeline's maxima */
  r->peak_allocated_seq = -1;
  for (size_t i = 0; i < r->ntimeline; i++) {
    const replay_point *p = &r->timeline[i];
    if (p->allocated > r->peak_allocated || r->peak_allocated_seq < 0)
      r->peak_allocated = p->allocated, r->peak_allocated_seq = p->seq, r->peak_ts = p->ts;
    if (p->reserved > r->peak_reserved) r->peak_reserved = p->reserved;
  }
  r->ooms = r->noom_list;
  if (r->ntimeline) r->events = (uint64_t)r->timeline[r->ntimeline - 1].seq + 1;
  return 0;
}

void store_run_row_clear(store_run_row *row) {
  free(row->trace_name);
  free(row->kind);
  free(row->allocator);
  free(row->backend);
  free(row->scenario);
  free(row->variant);
  memset(row, 0, sizeof *row);
}

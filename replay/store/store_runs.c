/* store_runs.c: a finished replay stored as a run: its result JSON, timeline, OOMs and composition. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "io/jsonw.h"
#include "store_int.h"
#include "store_runs.h"

static const char *names_string(void *ctx, int64_t id) { return store_string(ctx, id); }
static char *names_stack_label(void *ctx, int64_t stack) { return store_stack_label(ctx, stack); }

replay_names store_names(store *s) {
  return (replay_names){.ctx = s, .string = s ? names_string : NULL, .stack_label = s ? names_stack_label : NULL};
}

/* The run's row in runs, with its result JSON; *id is its id. */
static int save_run_row(store *s, const run_meta *m, const replay_result *r, const char *now, yajl_gen g, int64_t *id) {
  sqlite3_stmt *q = store_stmt(s,
                               "INSERT INTO runs(trace_id, trace_name, created_at, kind, allocator, capacity, device, "
                               "backend, scenario, variant, events, peak_allocated, peak_reserved, peak_requested, "
                               "device_mallocs, device_frees, ooms, fragmentation, step_time_s, samples_per_s, result) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
                               "?18, ?19, ?20, ?21)");
  if (!q) return -1;
  if (m->trace_id > 0) sqlite3_bind_int64(q, 1, m->trace_id);
  sqlite3_bind_text(q, 2, m->trace_name, -1, SQLITE_STATIC);
  sqlite3_bind_text(q, 3, now, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 4, m->kind ? m->kind : "replay", -1, SQLITE_STATIC);
  sqlite3_bind_text(q, 5, m->allocator, -1, SQLITE_STATIC);
  if (m->capacity != UINT64_MAX) sqlite3_bind_int64(q, 6, (int64_t)m->capacity);
  sqlite3_bind_text(q, 7, m->device, -1, SQLITE_STATIC);
  sqlite3_bind_text(q, 8, m->backend ? m->backend : "sim", -1, SQLITE_STATIC);
  sqlite3_bind_text(q, 9, m->scenario, -1, SQLITE_STATIC);
  sqlite3_bind_text(q, 10, m->variant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(q, 11, (int64_t)r->events);
  sqlite3_bind_int64(q, 12, r->peak_allocated);
  sqlite3_bind_int64(q, 13, r->peak_reserved);
  sqlite3_bind_int64(q, 14, r->peak_requested);
  sqlite3_bind_int64(q, 15, (int64_t)r->device_mallocs);
  sqlite3_bind_int64(q, 16, (int64_t)r->device_frees);
  sqlite3_bind_int64(q, 17, (int64_t)r->ooms);
  sqlite3_bind_double(q, 18, r->fragmentation);
  if (m->step_time_s >= 0) sqlite3_bind_double(q, 19, m->step_time_s);
  if (m->samples_per_s >= 0) sqlite3_bind_double(q, 20, m->samples_per_s);
  size_t len;
  const char *json = jsonw_text(g, &len);
  sqlite3_bind_text(q, 21, json, (int)len, SQLITE_STATIC);
  if (sqlite3_step(q) != SQLITE_DONE) {
    store_fail(s, q, "cannot store run");
    return -1;
  }
  *id = sqlite3_last_insert_rowid(store_db(s));
  return 0;
}

/* A run's timeline, TL_ROWS points a statement (the rest one by one): each statement's own work
 * (starting, the transaction's checks) is shared by 64 rows. A constant, so that threads saving
 * runs share it and the store's statement cache keys it by its address. */
#define TL_ROWS 64
#define TL_V "(?,?,?,?,?,?,?)"
#define TL_V8 TL_V "," TL_V "," TL_V "," TL_V "," TL_V "," TL_V "," TL_V "," TL_V
#define TL_V64 TL_V8 "," TL_V8 "," TL_V8 "," TL_V8 "," TL_V8 "," TL_V8 "," TL_V8 "," TL_V8
#define TL_INSERT "INSERT INTO run_timeline(run_id, idx, seq, ts, allocated, reserved, requested) VALUES "
static const char timeline_insert_many[] = TL_INSERT TL_V64;
static const char timeline_insert_one[] = TL_INSERT TL_V;

static void timeline_bind(sqlite3_stmt *q, int at, int64_t id, size_t i, const replay_point *p) {
  sqlite3_bind_int64(q, at + 1, id);
  sqlite3_bind_int64(q, at + 2, (int64_t)i);
  sqlite3_bind_int64(q, at + 3, p->seq);
  sqlite3_bind_int64(q, at + 4, p->ts);
  sqlite3_bind_int64(q, at + 5, p->allocated);
  sqlite3_bind_int64(q, at + 6, p->reserved);
  sqlite3_bind_int64(q, at + 7, p->requested);
}

static int save_timeline(store *s, int64_t id, const replay_result *r) {
  size_t i = 0;
  if (r->ntimeline >= TL_ROWS) {
    sqlite3_stmt *m = store_stmt(s, timeline_insert_many);
    if (!m) return -1;
    for (; i + TL_ROWS <= r->ntimeline; i += TL_ROWS) {
      sqlite3_reset(m);
      for (int k = 0; k < TL_ROWS; k++) timeline_bind(m, 7 * k, id, i + (size_t)k, &r->timeline[i + (size_t)k]);
      if (sqlite3_step(m) != SQLITE_DONE) return store_fail(s, m, "cannot store run timeline");
    }
    sqlite3_reset(m);
  }
  sqlite3_stmt *q = store_stmt(s, timeline_insert_one);
  if (!q) return -1;
  for (; i < r->ntimeline; i++) {
    sqlite3_reset(q);
    timeline_bind(q, 0, id, i, &r->timeline[i]);
    if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store run timeline");
  }
  return 0;
}

static int save_ooms(store *s, int64_t id, const replay_result *r) {
  sqlite3_stmt *q =
      store_stmt(s, "INSERT INTO run_ooms(run_id, idx, seq, device, stream, size, allocated, reserved, largest_free, "
                    "message) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  if (!q) return -1;
  for (size_t i = 0; i < r->noom_list; i++) {
    const replay_oom *o = &r->oom_list[i];
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, (int64_t)i);
    sqlite3_bind_int64(q, 3, o->seq);
    sqlite3_bind_int(q, 4, o->device);
    sqlite3_bind_int64(q, 5, o->stream);
    sqlite3_bind_int64(q, 6, (int64_t)o->size);
    sqlite3_bind_int64(q, 7, o->allocated);
    sqlite3_bind_int64(q, 8, o->reserved);
    sqlite3_bind_int64(q, 9, (int64_t)o->largest_free);
    sqlite3_bind_text(q, 10, o->message, -1, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) {
      store_fail(s, q, "cannot store run OOMs");
      return -1;
    }
  }
  return 0;
}

/* Live memory at the peak by category, then by call site. */
static int save_composition(store *s, int64_t id, const replay_result *r) {
  sqlite3_stmt *q =
      store_stmt(s, "INSERT INTO run_composition(run_id, by, key, stack_id, bytes, count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!q) return -1;
  for (int c = 0; c < SIM_CAT__COUNT; c++) {
    if (!r->category_bytes[c] && !r->category_count[c]) continue;
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_text(q, 2, "category", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, sim_category_name(c), -1, SQLITE_STATIC);
    sqlite3_bind_null(q, 4);
    sqlite3_bind_int64(q, 5, r->category_bytes[c]);
    sqlite3_bind_int64(q, 6, r->category_count[c]);
    if (sqlite3_step(q) != SQLITE_DONE) {
      store_fail(s, q, "cannot store run composition");
      return -1;
    }
  }
  for (size_t i = 0; i < r->nsites; i++) {
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)r->sites[i].stack);
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_text(q, 2, "callsite", -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, key, -1, SQLITE_TRANSIENT);
    if (r->sites[i].stack > 0) sqlite3_bind_int64(q, 4, r->sites[i].stack);
    else sqlite3_bind_null(q, 4);
    sqlite3_bind_int64(q, 5, r->sites[i].bytes);
    sqlite3_bind_int64(q, 6, r->sites[i].count);
    if (sqlite3_step(q) != SQLITE_DONE) {
      store_fail(s, q, "cannot store run composition");
      return -1;
    }
  }
  return 0;
}

int store_run_save(store *s, const run_meta *m, const replay_result *r, int64_t *run_id) {
  return store_run_save_named(s, NULL, m, r, run_id);
}

int store_run_save_named(store *s, const replay_names *names, const run_meta *m, const replay_result *r,
                         int64_t *run_id) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  replay_names own = store_names(s);
  report_json(g, names ? names : &own, m, r, 0);
  yajl_gen_map_close(g);
  char now[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int rc = -1;
  int64_t id = 0;
  if (!save_run_row(s, m, r, now, g, &id) && !save_timeline(s, id, r) && !save_ooms(s, id, r) &&
      !save_composition(s, id, r)) {
    if (run_id) *run_id = id;
    rc = 0;
  }
  yajl_gen_free(g);
  return rc;
}

int store_run_set_result(store *s, int64_t run_id, const char *json, int merge) {
  sqlite3_stmt *q = store_stmt(s, merge ? "UPDATE runs SET result = json_patch(result, :json) WHERE id = :id"
                                        : "UPDATE runs SET result = :json WHERE id = :id");
  if (!q) return -1;
  sqlite3_bind_text(q, 1, json, -1, SQLITE_STATIC);
  sqlite3_bind_int64(q, 2, run_id);
  int rc = sqlite3_step(q) == SQLITE_DONE ? 0 : store_fail(s, q, "cannot store the run's result");
  sqlite3_reset(q);
  return rc;
}

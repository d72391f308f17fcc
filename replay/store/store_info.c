/* store_info.c: one trace described for the command line (its contents counted) and its source file changed. */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "store_int.h"

/* The trace's events: the rows of its id range (events are keyed trace_id << 32 | seq). */
#define TRACE_EVENTS "e.id BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295"

static const char kinds_sql[] = "SELECT k.name, count(*), 0 FROM events e JOIN event_kinds k ON k.id = e.kind "
                                "WHERE " TRACE_EVENTS " GROUP BY e.kind ORDER BY e.kind";
static const char devices_sql[] = "SELECT e.device FROM events e WHERE " TRACE_EVENTS
                                  " GROUP BY e.device ORDER BY e.device";
/* alloc, memcpy, memset and kernel: the events that name a stream */
static const char streams_sql[] = "SELECT coalesce(e.stream, 0) FROM events e WHERE " TRACE_EVENTS
                                  " AND e.kind IN (1,5,6,7) GROUP BY e.stream ORDER BY e.stream";
static const char recorded_sql[] = "SELECT action, count(*), sum(size) FROM recorded WHERE trace_id = ?1 "
                                   "GROUP BY action ORDER BY action";
/* alloc and host_alloc */
static const char categories_sql[] = "SELECT c.name, count(*), sum(e.size) FROM events e JOIN categories c ON "
                                     "c.id = e.category WHERE " TRACE_EVENTS
                                     " AND e.kind IN (1, 10) GROUP BY e.category ORDER BY e.category";
static const char cat_sources_sql[] = "SELECT c.name, count(*), sum(e.size) FROM events e JOIN cat_sources c ON "
                                      "c.id = e.cat_source WHERE " TRACE_EVENTS
                                      " AND e.kind IN (1, 10) GROUP BY e.cat_source ORDER BY e.cat_source";
static const char notes_sql[] = "SELECT name, severity, value FROM trace_stats WHERE trace_id = ?1 ORDER BY name";

static char *column_strdup(sqlite3_stmt *q, int i) {
  const unsigned char *t = sqlite3_column_text(q, i);
  return strdup(t ? (const char *)t : "");
}

/* Runs sql (a statement with ?1 = trace_id) and hands each row to fn. */
static int each_row(store *s, const char *sql, int64_t trace_id, void (*fn)(sqlite3_stmt *q, void *arg), void *arg) {
  sqlite3_stmt *q = store_stmt(s, sql);
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) fn(q, arg);
  if (rc != SQLITE_DONE) return store_fail(s, q, "cannot read trace");
  sqlite3_reset(q);
  return 0;
}

typedef struct tally_list {
  store_tally **v;
  size_t *n, cap;
} tally_list;

static void add_tally(sqlite3_stmt *q, void *arg) {
  tally_list *l = arg;
  sim_grow((void **)l->v, &l->cap, *l->n + 1, sizeof **l->v);
  (*l->v)[(*l->n)++] = (store_tally){column_strdup(q, 0), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2)};
}

static int read_tallies(store *s, const char *sql, int64_t trace_id, store_tally **v, size_t *n) {
  tally_list l = {v, n, 0};
  return each_row(s, sql, trace_id, add_tally, &l);
}

typedef struct number_list {
  int64_t **v;
  size_t *n, cap;
} number_list;

static void add_number(sqlite3_stmt *q, void *arg) {
  number_list *l = arg;
  sim_grow((void **)l->v, &l->cap, *l->n + 1, sizeof **l->v);
  (*l->v)[(*l->n)++] = sqlite3_column_int64(q, 0);
}

static int read_numbers(store *s, const char *sql, int64_t trace_id, int64_t **v, size_t *n) {
  number_list l = {v, n, 0};
  return each_row(s, sql, trace_id, add_number, &l);
}

typedef struct note_list {
  store_note **v;
  size_t *n, cap;
} note_list;

static void add_note(sqlite3_stmt *q, void *arg) {
  note_list *l = arg;
  sim_grow((void **)l->v, &l->cap, *l->n + 1, sizeof **l->v);
  (*l->v)[(*l->n)++] = (store_note){column_strdup(q, 0), column_strdup(q, 1), sqlite3_column_int64(q, 2)};
}

int store_summary_read(store *s, int64_t trace_id, store_summary *sum) {
  memset(sum, 0, sizeof *sum);
  note_list notes = {&sum->notes, &sum->nnotes, 0};
  if (read_tallies(s, kinds_sql, trace_id, &sum->kinds, &sum->nkinds) ||
      read_numbers(s, devices_sql, trace_id, &sum->devices, &sum->ndevices) ||
      read_numbers(s, streams_sql, trace_id, &sum->streams, &sum->nstreams) ||
      read_tallies(s, recorded_sql, trace_id, &sum->recorded, &sum->nrecorded) ||
      read_tallies(s, categories_sql, trace_id, &sum->categories, &sum->ncategories) ||
      read_tallies(s, cat_sources_sql, trace_id, &sum->cat_sources, &sum->ncat_sources) ||
      each_row(s, notes_sql, trace_id, add_note, &notes)) {
    store_summary_clear(sum);
    return -1;
  }
  return 0;
}

static void free_tallies(store_tally *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].name);
  free(v);
}

void store_summary_clear(store_summary *sum) {
  free_tallies(sum->kinds, sum->nkinds);
  free(sum->devices);
  free(sum->streams);
  free_tallies(sum->recorded, sum->nrecorded);
  free_tallies(sum->categories, sum->ncategories);
  free_tallies(sum->cat_sources, sum->ncat_sources);
  for (size_t i = 0; i < sum->nnotes; i++) {
    free(sum->notes[i].name);
    free(sum->notes[i].severity);
  }
  free(sum->notes);
  memset(sum, 0, sizeof *sum);
}

int store_trace_set_source_file(store *s, int64_t trace_id, const char *path) {
  sqlite3_stmt *q = store_stmt(s, "UPDATE traces SET source_file = :file WHERE id = :id");
  if (!q) return -1;
  if (path) sqlite3_bind_text(q, 1, path, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(q, 2, trace_id);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot update the trace");
  sqlite3_reset(q);
  return 0;
}

int store_trace_copies(store *s, int64_t trace_id, void (*fn)(void *arg, const sim_event *ev), void *arg) {
  sqlite3_stmt *q = store_stmt(s, "SELECT info, size, dur FROM events e WHERE " TRACE_EVENTS
                                  " AND (info & 255) = 5 AND dur > 0 AND size > 0");
  if (!q) return -1;
  sqlite3_reset(q);
  sqlite3_bind_int64(q, 1, trace_id);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t info = sqlite3_column_int64(q, 0);
    sim_event ev = {.kind = SIM_EV_MEMCPY,
                    .mem = (uint8_t)(info >> 8 & 15),
                    .dir = (uint8_t)(info >> 12 & 15),
                    .size = (uint64_t)sqlite3_column_int64(q, 1),
                    .dur = sqlite3_column_int64(q, 2)};
    fn(arg, &ev);
  }
  if (rc != SQLITE_DONE) return store_fail(s, q, "cannot read the trace's copies");
  sqlite3_reset(q);
  return 0;
}

/* store_info.c: one trace described for the command line (its contents counted) and its source file changed. */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "store_int.h"

static const char recorded_sql[] = "SELECT action, count(*), sum(size) FROM recorded WHERE trace_id = ?1 "
                                   "GROUP BY action ORDER BY action";
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

typedef struct note_list {
  store_note **v;
  size_t *n, cap;
} note_list;

static void add_note(sqlite3_stmt *q, void *arg) {
  note_list *l = arg;
  sim_grow((void **)l->v, &l->cap, *l->n + 1, sizeof **l->v);
  (*l->v)[(*l->n)++] = (store_note){column_strdup(q, 0), column_strdup(q, 1), sqlite3_column_int64(q, 2)};
}

/* What the events add up to, counted in one pass over the trace's chunks. */
typedef struct event_counts {
  int64_t kinds[SIM_EV__COUNT];
  int64_t cats[SIM_CAT__COUNT], cat_bytes[SIM_CAT__COUNT];
  int64_t srcs[SIM_CATSRC__COUNT], src_bytes[SIM_CATSRC__COUNT];
  sim_map devices, streams; /* value + 2^63 -> 1 (the keys sort as the values do) */
} event_counts;

static void count_event(event_counts *c, const sim_event *ev) {
  if (ev->kind < SIM_EV__COUNT) c->kinds[ev->kind]++;
  *sim_map_put(&c->devices, (uint64_t)(int64_t)ev->device ^ (UINT64_C(1) << 63), NULL) = 1;
  if (ev->kind == SIM_EV_ALLOC || (ev->kind >= SIM_EV_MEMCPY && ev->kind <= SIM_EV_KERNEL))
    *sim_map_put(&c->streams, (uint64_t)ev->stream ^ (UINT64_C(1) << 63), NULL) = 1;
  if (ev->kind == SIM_EV_ALLOC || ev->kind == SIM_EV_HOST_ALLOC) {
    if (ev->category < SIM_CAT__COUNT) {
      c->cats[ev->category]++;
      sim_bytes_sum(&c->cat_bytes[ev->category], ev->size);
    }
    if (ev->cat_source < SIM_CATSRC__COUNT) {
      c->srcs[ev->cat_source]++;
      sim_bytes_sum(&c->src_bytes[ev->cat_source], ev->size);
    }
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The set's values, ascending. */
static void sorted_values(sim_map *m, int64_t **v, size_t *n) {
  uint64_t *keys = sim_xmalloc((m->len ? m->len : 1) * sizeof *keys), k, val;
  size_t it = 0, nk = 0;
  while (sim_map_next(m, &it, &k, &val)) keys[nk++] = k;
  qsort(keys, nk, sizeof *keys, cmp_u64);
  *v = sim_xmalloc((nk ? nk : 1) * sizeof **v);
  for (size_t i = 0; i < nk; i++) (*v)[i] = (int64_t)(keys[i] ^ (UINT64_C(1) << 63));
  *n = nk;
  free(keys);
}

/* The counts that are not zero, under their names, in the order of their codes (from `from`). */
static void tallies(const int64_t *count, const int64_t *bytes, int from, int n, const char *(*name)(int),
                    store_tally **v, size_t *nv) {
  size_t cap = 0;
  for (int i = from; i < n; i++)
    if (count[i]) {
      sim_grow((void **)v, &cap, *nv + 1, sizeof **v);
      (*v)[(*nv)++] = (store_tally){strdup(name(i)), count[i], bytes ? bytes[i] : 0};
    }
}

static int read_event_counts(store *s, int64_t trace_id, store_summary *sum) {
  event_counts *c = sim_xcalloc(1, sizeof *c);
  sim_map_init(&c->devices);
  sim_map_init(&c->streams);
  store_reader *r;
  ptrdiff_t k = -1;
  if (!store_reader_open(s, trace_id, &r)) {
    const sim_event *v;
    while ((k = store_reader_view(r, &v)) > 0) {
      for (ptrdiff_t i = 0; i < k; i++) count_event(c, &v[i]);
      store_reader_advance(r, (size_t)k);
    }
    store_reader_close(r);
  }
  if (!k) {
    tallies(c->kinds, NULL, 1, SIM_EV__COUNT, sim_event_kind_name, &sum->kinds, &sum->nkinds);
    sorted_values(&c->devices, &sum->devices, &sum->ndevices);
    sorted_values(&c->streams, &sum->streams, &sum->nstreams);
    tallies(c->cats, c->cat_bytes, 0, SIM_CAT__COUNT, sim_category_name, &sum->categories, &sum->ncategories);
    tallies(c->srcs, c->src_bytes, 0, SIM_CATSRC__COUNT, sim_cat_source_name, &sum->cat_sources, &sum->ncat_sources);
  }
  sim_map_release(&c->devices);
  sim_map_release(&c->streams);
  free(c);
  return k ? -1 : 0;
}

int store_summary_read(store *s, int64_t trace_id, store_summary *sum) {
  memset(sum, 0, sizeof *sum);
  note_list notes = {&sum->notes, &sum->nnotes, 0};
  if (read_event_counts(s, trace_id, sum) ||
      read_tallies(s, recorded_sql, trace_id, &sum->recorded, &sum->nrecorded) ||
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

static const char segments_sql[] = "SELECT action = 'segment_alloc', addr FROM recorded WHERE trace_id = ?1 AND "
                                   "action IN ('segment_alloc', 'segment_free') ORDER BY seq";

typedef struct segment_visit {
  void (*fn)(void *arg, uint64_t addr, int is_new);
  void *arg;
} segment_visit;

static void visit_segment(sqlite3_stmt *q, void *arg) {
  const segment_visit *v = arg;
  v->fn(v->arg, (uint64_t)sqlite3_column_int64(q, 1), sqlite3_column_int(q, 0));
}

int store_trace_segments(store *s, int64_t trace_id, void (*fn)(void *arg, uint64_t addr, int is_new), void *arg) {
  segment_visit v = {fn, arg};
  int tok = store_lock(s);
  int rc = each_row(s, segments_sql, trace_id, visit_segment, &v);
  store_unlock(s, tok);
  return rc;
}

/* kineto_util.h: what the Kineto, timeline and category tests share: files, a store, imports, queries. */
#ifndef TESTS_KINETO_UTIL_H
#define TESTS_KINETO_UTIL_H

#include <stdarg.h>
#include <unistd.h>

#include "import/categorize.h"
#include "import/importer.h"
#include "sim/allocator.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"
#include "test.h"

static char ku_dir[256];

static inline void ku_setup(void) {
  const char *t = getenv("TMPDIR");
  snprintf(ku_dir, sizeof ku_dir, "%s/memplay-test-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(ku_dir)) {
    perror("mkdtemp");
    exit(1);
  }
}

static inline void ku_teardown(void) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", ku_dir);
  if (system(cmd)) fprintf(stderr, "cannot remove %s\n", ku_dir);
}

/* Writes text to a file in the test folder; returns its path (static buffer per call site). */
static inline const char *ku_write(const char *name, const char *text) {
  static char paths[16][512];
  static int next;
  char *p = paths[next++ % 16];
  snprintf(p, 512, "%s/%s", ku_dir, name);
  FILE *f = fopen(p, "w");
  if (!f || fputs(text, f) < 0 || fclose(f)) {
    perror(p);
    exit(1);
  }
  return p;
}

static inline store *ku_store(const char *name) {
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/%s", ku_dir, name);
  store *s;
  if (store_open(&s, path, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    exit(1);
  }
  /* the tests read the events view as a user's sqlite3 does (its JSON functions need a trusted schema) */
  sqlite3_db_config(store_db(s), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 1, NULL);
  return s;
}

static char ku_err[IMPORT_ERRLEN];

/* Imports path (format NULL: detected); returns the new trace's id, or -1 with ku_err set. */
static inline int64_t ku_import(store *s, const char *path, const char *format, const char *const *params) {
  import_ctx ctx = {.s = s, .path = path, .params = params};
  int rc = import_file(&ctx, format);
  snprintf(ku_err, sizeof ku_err, "%s", ctx.err);
  if (rc) return -1;
  sqlite3_stmt *q;
  sqlite3_prepare_v2(store_db(s), "SELECT max(id) FROM traces", -1, &q, NULL);
  sqlite3_step(q);
  int64_t id = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return id;
}

/* The first column of the first row of a query (printf-style SQL), or `none`. */
static inline int64_t ku_int(store *s, int64_t none, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int64_t ku_int(store *s, int64_t none, const char *fmt, ...) {
  char sql[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK) {
    fprintf(stderr, "bad test SQL: %s: %s\n", sql, sqlite3_errmsg(store_db(s)));
    test_failures++;
    return none;
  }
  int64_t v = none;
  if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) v = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return v;
}

/* Events of one kind (by name) in a trace. */
static inline int64_t ku_kind(store *s, int64_t trace, const char *kind) {
  return ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = '%s'", (long long)trace, kind);
}

/* How a replay's allocated bytes compare with the recorded allocator's totals. */
typedef struct ku_totals {
  int64_t compared;  /* totals compared (after every memory event) */
  int64_t differ;    /* where the replay's allocated differs */
  int64_t below;     /* where it is below the recorded */
  double max_over;   /* the largest excess, relative to the recorded */
} ku_totals;

/*
 * Replays a trace's device allocations through allocator `model` (one instance per device)
 * and its host allocations as a running sum, and compares the allocated bytes after every
 * event with the recorded allocator's "totals" (with print, the first differences are shown).
 */
static inline ku_totals ku_totals_check(store *s, int64_t trace, const char *model, int print) {
  ku_totals out = {0};
  char err[512];
  sim_spec spec;
  if (sim_spec_parse(&spec, model, err, sizeof err) != SIM_OK) {
    fprintf(stderr, "%s\n", err);
    test_failures++;
    return out;
  }
  enum { MAXDEV = 16 };
  sim_device dev[MAXDEV];
  sim_allocator a[MAXDEV];
  int used[MAXDEV] = {0};
  int64_t host = 0;
  sim_map live, host_live;
  sim_map_init(&live);
  sim_map_init(&host_live);
  sqlite3_stmt *rec;
  sqlite3_prepare_v2(store_db(s),
                     "SELECT before_seq, device, allocated FROM recorded WHERE trace_id = ?1 AND action = 'totals' "
                     "AND allocated IS NOT NULL ORDER BY seq",
                     -1, &rec, NULL);
  sqlite3_bind_int64(rec, 1, trace);
  int have = sqlite3_step(rec) == SQLITE_ROW;
  store_reader *r;
  store_reader_open(s, trace, &r);
  sim_event ev;
  while (store_reader_next(r, &ev) == 1) {
    int d = ev.device;
    if (ev.kind == SIM_EV_ALLOC || sim_event_is_free(&ev)) {
      if (d < 0 || d >= MAXDEV) {
        test_failures++;
        continue;
      }
      if (!used[d]) {
        sim_simdev_init(&dev[d], UINT64_MAX, 0);
        if (sim_allocator_init(&a[d], &spec, &dev[d], NULL, NULL, err, sizeof err) != SIM_OK) {
          fprintf(stderr, "%s\n", err);
          test_failures++;
          break;
        }
        used[d] = 1;
      }
      if (ev.kind == SIM_EV_ALLOC) {
        sim_placement pl;
        if (a[d].ops->alloc(a[d].ctx, ev.size, ev.stream, &pl) != SIM_OK) test_failures++;
        *sim_map_put(&live, ev.addr, NULL) = pl.handle;
      } else {
        uint64_t h;
        if (sim_map_del(&live, ev.addr, &h)) {
          if (a[d].ops->free_requested) a[d].ops->free_requested(a[d].ctx, h);
          a[d].ops->free_completed(a[d].ctx, h);
        }
      }
    } else if (ev.kind == SIM_EV_HOST_ALLOC) {
      host += (int64_t)ev.size;
      *sim_map_put(&host_live, ev.addr, NULL) = ev.size;
    } else if (ev.kind == SIM_EV_HOST_FREE) {
      uint64_t sz;
      if (sim_map_del(&host_live, ev.addr, &sz)) host -= (int64_t)sz;
    }
    while (have && sqlite3_column_int64(rec, 0) == ev.seq + 1) {
      int rd = sqlite3_column_int(rec, 1);
      int64_t want = sqlite3_column_int64(rec, 2);
      int64_t got = rd < 0 ? host : (rd < MAXDEV && used[rd] ? a[rd].ops->stats(a[rd].ctx)->allocated.current : 0);
      if (got != want) {
        if (print && out.differ < 5)
          fprintf(stderr, "  after event %lld (device %d): %s allocated %lld, recorded %lld\n", (long long)ev.seq, rd,
                  model, (long long)got, (long long)want);
        out.differ++;
        if (got < want) out.below++;
        else if (want > 0 && (double)(got - want) / (double)want > out.max_over)
          out.max_over = (double)(got - want) / (double)want;
      }
      out.compared++;
      have = sqlite3_step(rec) == SQLITE_ROW;
    }
  }
  store_reader_close(r);
  sqlite3_finalize(rec);
  for (int d = 0; d < MAXDEV; d++)
    if (used[d]) {
      sim_allocator_release(&a[d]);
      sim_simdev_release(&dev[d]);
    }
  sim_map_release(&live);
  sim_map_release(&host_live);
  sim_spec_release(&spec);
  return out;
}

/* Events (read in order) that differ between two traces. */
static inline int64_t ku_event_differences(store *s, int64_t a, int64_t b) {
  store_reader *ra, *rb;
  if (store_reader_open(s, a, &ra)) return -1;
  if (store_reader_open(s, b, &rb)) {
    store_reader_close(ra);
    return -1;
  }
  sim_event x, y;
  int64_t differ = 0;
  int ga, gb;
  while ((ga = store_reader_next(ra, &x)) == 1 && (gb = store_reader_next(rb, &y)) == 1)
    if (memcmp(&x, &y, sizeof x)) differ++;
  if (ga == 1) differ++; /* one is longer (event_count tells by how much) */
  store_reader_close(ra);
  store_reader_close(rb);
  return differ;
}

/* Events and recorded actions that differ between two traces (0: the same trace). */
static inline int64_t ku_differences(store *s, int64_t a, int64_t b) {
  return ku_event_differences(s, a, b) +
         ku_int(s, -1,
                "SELECT (SELECT count(*) FROM (SELECT seq, before_seq, ts, action, device, addr, size, allocated, reserved FROM "
                "recorded WHERE trace_id = %lld EXCEPT SELECT seq, before_seq, ts, action, device, addr, size, allocated, "
                "reserved FROM recorded WHERE trace_id = %lld)) + "
                "abs((SELECT event_count FROM traces WHERE id = %lld) - (SELECT event_count FROM traces WHERE id = %lld))",
                (long long)a, (long long)b, (long long)a, (long long)b);
}

/* Imports path again with import settings params; the new trace's differences from trace a. */
static inline int64_t ku_import_same(store *s, const char *path, int64_t a, const char *const *params) {
  int64_t b = ku_import(s, path, "kineto", params);
  if (b < 0) {
    fprintf(stderr, "%s\n", ku_err);
    return -1;
  }
  return ku_differences(s, a, b);
}

/*
 * Copies a trace's events into a new trace with every category cleared, runs the category pass
 * of the import driver on the copy, and returns how many allocations came out with a different
 * category or method (-1 on error): an importer that categorizes while it writes must agree
 * with the pass.
 */
static inline int64_t ku_recategorize_differences(store *s, int64_t trace) {
  char err[512];
  char *name = store_unique_name(s, "recategorized");
  char format[] = "jsonl";
  store_trace meta = {.name = name, .source_format = format, .device_index = -1};
  store_writer *w = NULL;
  store_reader *r = NULL;
  sim_event ev;
  int rc = store_begin(s) || store_writer_begin(s, &meta, &w) || store_reader_open(s, trace, &r);
  int got = 0;
  while (!rc && (got = store_reader_next(r, &ev)) == 1) {
    ev.category = ev.cat_source = 0;
    rc = store_writer_event(w, &ev);
  }
  if (got < 0) rc = -1;
  store_reader_close(r);
  int64_t copy = w ? store_writer_trace_id(w) : -1;
  if (!rc) rc = store_writer_end(w);
  else store_writer_abort(w);
  free(name);
  err[0] = 0;
  if (rc || categorize_trace(s, copy, err, sizeof err) || store_commit(s)) {
    fprintf(stderr, "%s %s\n", store_error(s), err);
    store_rollback(s);
    return -1;
  }
  /* allocations whose category came out otherwise */
  store_reader *ra, *rb;
  if (store_reader_open(s, trace, &ra) || store_reader_open(s, copy, &rb)) return -1;
  sim_event x, y;
  int64_t differ = 0;
  while (store_reader_next(ra, &x) == 1 && store_reader_next(rb, &y) == 1)
    if ((x.kind == SIM_EV_ALLOC || x.kind == SIM_EV_HOST_ALLOC) &&
        (x.category != y.category || x.cat_source != y.cat_source))
      differ++;
  store_reader_close(ra);
  store_reader_close(rb);
  return differ;
}

/* Live bytes of one category at every step marker and at the end, for "the same before and after". */
static inline int ku_category_at_steps(store *s, int64_t trace, int category, int64_t *out, int max) {
  sim_map live;
  sim_map_init(&live);
  store_reader *r;
  store_reader_open(s, trace, &r);
  sim_event ev;
  int n = 0;
  int64_t cur = 0;
  while (store_reader_next(r, &ev) == 1) {
    if (ev.kind == SIM_EV_MARKER && (ev.flags & SIM_EVF_STEP_BEGIN) && n < max) out[n++] = cur;
    int host = ev.kind == SIM_EV_HOST_ALLOC || ev.kind == SIM_EV_HOST_FREE;
    uint64_t key = ev.addr ^ (host ? UINT64_C(1) << 63 : 0);
    if (ev.kind == SIM_EV_ALLOC || ev.kind == SIM_EV_HOST_ALLOC) {
      *sim_map_put(&live, key, NULL) = ev.size << 4 | ev.category;
      if (ev.category == category) cur += (int64_t)ev.size;
    } else if (sim_event_is_free(&ev) || ev.kind == SIM_EV_HOST_FREE) {
      uint64_t v;
      if (ev.kind != SIM_EV_FREE_COMPLETED && sim_map_del(&live, key, &v) && (int)(v & 15) == category)
        cur -= (int64_t)(v >> 4);
    }
  }
  if (n < max) out[n++] = cur;
  store_reader_close(r);
  sim_map_release(&live);
  return n;
}

#endif

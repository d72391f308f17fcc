/* store_check.c: checking a store: SQLite's integrity check, and every chunk of events decoded against its checksum, count, seqs, text, the copy fit's sums and the plan. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/copyfit.h"
#include "store_int.h"
#include "store_starts.h"

static void report(store_fault_fn fault, void *arg, store_check_totals *tot, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static void report(store_fault_fn fault, void *arg, store_check_totals *tot, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tot->faults++;
  fault(arg, msg);
}

/* Each row of sql (one text column) is a fault, said after what. 0, or -1 when sql cannot run. */
static int faults_of(store *s, const char *sql, const char *what, store_fault_fn fault, void *arg,
                     store_check_totals *tot) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return store_fail(s, NULL, "cannot check the store");
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(q, 0);
    if (t && strcmp(t, "ok")) report(fault, arg, tot, "%s: %s", what, t);
  }
  if (rc != SQLITE_DONE) {
    store_fail(s, q, "cannot check the store");
    sqlite3_finalize(q);
    return -1;
  }
  sqlite3_finalize(q);
  return 0;
}

int store_check_integrity(store *s, store_fault_fn fault, void *arg, store_check_totals *tot) {
  static const struct {
    const char *sql, *what;
  } checks[] = {
    {"PRAGMA integrity_check", "SQLite's integrity check"},
    {"SELECT 'trace ' || trace_id || ' chunk ' || chunk || ': packed events of no trace' FROM event_chunks "
     "WHERE trace_id NOT IN (SELECT id FROM traces) ORDER BY trace_id, chunk",
     "event_chunks"},
    {"SELECT 'trace ' || trace_id || ' chunk ' || chunk || ': events as text of no trace' FROM event_rows "
     "WHERE trace_id NOT IN (SELECT id FROM traces) ORDER BY trace_id, chunk",
     "event_rows"},
    {"SELECT 'trace ' || trace_id || ' chunk ' || chunk || ': a plan of no trace' FROM event_plans "
     "WHERE trace_id NOT IN (SELECT id FROM traces) ORDER BY trace_id, chunk",
     "event_plans"},
    {"SELECT 'trace ' || trace_id || ': a window start of no trace' FROM window_starts "
     "WHERE trace_id NOT IN (SELECT id FROM traces) ORDER BY trace_id",
     "window_starts"},
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
    if (faults_of(s, checks[i].sql, checks[i].what, fault, arg, tot)) return -1;
  return 0;
}

/* The chunk's text form must be the packed events written as text. */
static int check_text(store *s, const store_trace *t, const chunk_meta *m, chunk_io *io, store_fault_fn fault,
                      void *arg, store_check_totals *tot) {
  sqlite3_stmt *q = store_stmt(s, "SELECT first_seq, ts0, addr0, rows FROM event_rows WHERE trace_id = ?1 AND chunk = ?2");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, t->id);
  sqlite3_bind_int64(q, 2, m->chunk);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_DONE) {
    report(fault, arg, tot, "trace '%s' chunk %lld: its events as text (event_rows) are missing", t->name,
           (long long)m->chunk);
  } else if (rc != SQLITE_ROW) {
    return store_fail(s, q, "cannot check the store");
  } else {
    store_chunk_text(io->ev, m->n, &io->text);
    const void *text = sqlite3_column_text(q, 3);
    size_t len = (size_t)sqlite3_column_bytes(q, 3);
    if (sqlite3_column_int64(q, 0) != m->seq0 || sqlite3_column_int64(q, 1) != io->text.ts0 ||
        sqlite3_column_int64(q, 2) != io->text.addr0 || len != io->text.rows.n ||
        (len && memcmp(text, io->text.rows.p, len)))
      report(fault, arg, tot,
             "trace '%s' chunk %lld: its events as text (event_rows, what SQL reads) differ from the packed ones",
             t->name, (long long)m->chunk);
  }
  sqlite3_reset(q);
  return 0;
}

int store_check_trace(store *s, const store_trace *t, store_fault_fn fault, void *arg, store_check_totals *tot) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT chunk, first_seq, n, codec, crc32, data FROM event_chunks WHERE trace_id = ?1 "
                         "ORDER BY chunk",
                         -1, &q, NULL) != SQLITE_OK)
    return store_fail(s, NULL, "cannot check the store");
  sqlite3_bind_int64(q, 1, t->id);
  chunk_io io = {0};
  int64_t expect = t->first_seq, events = 0;
  int rc, err = 0, whole = 1; /* whole: every chunk decoded, so fit holds the sums of all its copies */
  sim_copy_fit fit;
  sim_copy_fit_init(&fit);
  tot->traces++;
  while (!err && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    chunk_meta m;
    tot->chunks++;
    if (chunk_decode_row(s, q, t->id, t->first_seq, &io, &m)) {
      report(fault, arg, tot, "%s", store_error(s));
      int64_t n = sqlite3_column_int64(q, 2);
      if (n > 0 && n <= STORE_CHUNK_EVENTS) events += n; /* counted as it claims, not faulted twice */
      expect = -1; /* the next chunk's start cannot be checked */
      whole = 0;
      continue;
    }
    for (size_t i = 0; i < m.n; i++) sim_copy_fit_add(&fit, &io.ev[i]);
    if (expect >= 0 && m.seq0 != expect)
      report(fault, arg, tot, "trace '%s' chunk %lld: starts at seq %lld where seq %lld was due", t->name,
             (long long)m.chunk, (long long)(m.seq0 - t->first_seq), (long long)(expect - t->first_seq));
    expect = m.seq0 + (int64_t)m.n;
    events += (int64_t)m.n;
    tot->events += (int64_t)m.n;
    err = check_text(s, t, &m, &io, fault, arg, tot);
  }
  if (!err && rc != SQLITE_DONE) err = store_fail(s, q, "cannot check the store");
  sqlite3_finalize(q);
  chunk_io_release(&io);
  if (err) return -1;
  if (events != t->event_count)
    report(fault, arg, tot, "trace '%s': its chunks hold %lld events, its event_count says %lld", t->name,
           (long long)events, (long long)t->event_count);
  if (whole && (copy_sums_check(s, t, &fit, fault, arg, tot) || plans_check(s, t, fault, arg, tot))) return -1;
  char why[256];
  int bad = store_window_start_fault(s, t->id, why, sizeof why);
  if (bad < 0) return -1;
  if (bad)
    report(fault, arg, tot, "trace '%s': its kept window start (window_starts) %s; the next replay rebuilds it",
           t->name, why);
  sqlite3_stmt *o = store_stmt(s, "SELECT chunk FROM event_rows r WHERE trace_id = ?1 AND NOT EXISTS "
                                  "(SELECT 1 FROM event_chunks c WHERE c.trace_id = r.trace_id AND c.chunk = r.chunk)");
  if (!o) return -1;
  sqlite3_bind_int64(o, 1, t->id);
  while ((rc = sqlite3_step(o)) == SQLITE_ROW)
    report(fault, arg, tot, "trace '%s' chunk %lld: events as text (event_rows) without their packed form", t->name,
           (long long)sqlite3_column_int64(o, 0));
  if (rc != SQLITE_DONE) return store_fail(s, o, "cannot check the store");
  sqlite3_reset(o);
  return 0;
}

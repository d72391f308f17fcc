/* store_copysums.c: the copy fit's sums of each trace's timed copies, kept when its events are written (copy_sums). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/copyfit.h"
#include "store_int.h"

/*
 * The copy fit (sim/copyfit.h) sums, per class of copy, over the whole stored trace in seq order:
 * its sums are doubles added one copy at a time, and a sum of partial sums could differ in the
 * last bits (and the fit's residual, a difference of large sums, by more). So what is kept is the
 * fit's own state after adding every copy in order, as the writer thread adds them while it
 * stores the chunks (store.c), and a replay reads that state back bit for bit instead of passing
 * over every chunk's copies.
 */

static int bucket_of(const char *name) {
  for (int b = 0; name && b < SIM_TM__NCB; b++)
    if (!strcmp(sim_tm_copy_bucket_name(b), name)) return b;
  return -1;
}

int copy_sums_put(store *s, int64_t trace_id, const sim_copy_fit *f) {
  sqlite3_stmt *q = store_stmt(s, "DELETE FROM copy_sums WHERE trace_id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store the trace's copy sums");
  sqlite3_reset(q);
  for (int b = 0; b < SIM_TM__NCB; b++)
    for (int large = 0; large < 2; large++) {
      const sim_copy_fit_class *c = &f->c[b][large];
      if (!c->n) continue;
      q = store_stmt(s, "INSERT INTO copy_sums(trace_id, kind, large, n, sx, sy, sxx, sxy, syy) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
      if (!q) return -1;
      sqlite3_bind_int64(q, 1, trace_id);
      sqlite3_bind_text(q, 2, sim_tm_copy_bucket_name(b), -1, SQLITE_STATIC);
      sqlite3_bind_int(q, 3, large);
      sqlite3_bind_int64(q, 4, (int64_t)c->n);
      sqlite3_bind_double(q, 5, c->sx);
      sqlite3_bind_double(q, 6, c->sy);
      sqlite3_bind_double(q, 7, c->sxx);
      sqlite3_bind_double(q, 8, c->sxy);
      sqlite3_bind_double(q, 9, c->syy);
      if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store the trace's copy sums");
      sqlite3_reset(q);
    }
  q = store_stmt(s, "UPDATE traces SET timed_copies = ?2 WHERE id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, (int64_t)f->copies);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store the trace's copy sums");
  sqlite3_reset(q);
  return 0;
}

/* The kept sums into f (initialised here): COPY_SUMS_READ; COPY_SUMS_NONE when none are kept
 * (timed_copies NULL); COPY_SUMS_BAD when the rows do not add up to timed_copies or name a class
 * this memplay does not know; -1 on an SQL error. */
enum { COPY_SUMS_NONE = 0, COPY_SUMS_READ = 1, COPY_SUMS_BAD = 2 };
static int copy_sums_get(store *s, int64_t trace_id, sim_copy_fit *f) {
  sim_copy_fit_init(f);
  sqlite3_stmt *q = store_stmt(s, "SELECT timed_copies FROM traces WHERE id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  int rc = sqlite3_step(q);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return store_fail(s, q, "cannot read the trace's copy sums");
  int kept = rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL;
  int64_t copies = kept ? sqlite3_column_int64(q, 0) : 0;
  sqlite3_reset(q);
  if (!kept) return COPY_SUMS_NONE;
  q = store_stmt(s, "SELECT kind, large, n, sx, sy, sxx, sxy, syy FROM copy_sums WHERE trace_id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  int bad = copies < 0;
  uint64_t total = 0;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int b = bucket_of((const char *)sqlite3_column_text(q, 0));
    int64_t large = sqlite3_column_int64(q, 1), n = sqlite3_column_int64(q, 2);
    if (b < 0 || large < 0 || large > 1 || n <= 0 || f->c[b][large].n) {
      bad = 1;
      continue;
    }
    sim_copy_fit_class *c = &f->c[b][large];
    c->n = (uint64_t)n;
    c->sx = sqlite3_column_double(q, 3);
    c->sy = sqlite3_column_double(q, 4);
    c->sxx = sqlite3_column_double(q, 5);
    c->sxy = sqlite3_column_double(q, 6);
    c->syy = sqlite3_column_double(q, 7);
    /* sums of n copies, each of at most 2^48 bytes and 2^62 ns (an import's limits): else the row
     * is not what memplay wrote, and the trace's copies are fitted again */
    double dn = (double)n;
    if (!(c->sx >= 0 && c->sx <= dn * 0x1p48 && c->sy >= 0 && c->sy <= dn * 0x1p62 && c->sxx >= 0 &&
          c->sxx <= dn * 0x1p96 && c->syy >= 0 && c->syy <= dn * 0x1p124 && fabs(c->sxy) <= dn * 0x1p110))
      bad = 1;
    total += (uint64_t)n;
  }
  if (rc != SQLITE_DONE) return store_fail(s, q, "cannot read the trace's copy sums");
  sqlite3_reset(q);
  f->copies = total;
  if (bad || total != (uint64_t)copies) {
    sim_copy_fit_init(f);
    return COPY_SUMS_BAD;
  }
  return COPY_SUMS_READ;
}

static void fit_add(void *arg, const sim_event *ev) { sim_copy_fit_add(arg, ev); }

int store_trace_copy_fit(store *s, int64_t trace_id, sim_copy_fit *f) {
  int tok = store_lock(s);
  int rc = copy_sums_get(s, trace_id, f);
  if (rc == COPY_SUMS_NONE || rc == COPY_SUMS_BAD) {
    sim_copy_fit_init(f);
    rc = store_trace_copies(s, trace_id, fit_add, f) ? -1 : 0;
  }
  store_unlock(s, tok);
  return rc;
}

int copy_sums_of_trace(store *s, int64_t trace_id) {
  sim_copy_fit f;
  sim_copy_fit_init(&f);
  if (store_trace_copies(s, trace_id, fit_add, &f)) return -1;
  return copy_sums_put(s, trace_id, &f);
}

int copy_sums_migrate(store *s) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db, "SELECT id FROM traces ORDER BY id", -1, &q, NULL) != SQLITE_OK)
    return store_fail(s, NULL, "cannot read traces");
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW)
    copy_sums_of_trace(s, sqlite3_column_int64(q, 0)); /* a damaged trace keeps no sums: its replay
                                                          reads its copies, and says what is damaged */
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : store_fail(s, NULL, "cannot read traces");
}

/* "class (kind, size)" of a fit class, for a message. */
static void class_words(int b, int large, char *out, size_t n) {
  snprintf(out, n, "%s %s", sim_tm_copy_bucket_name(b), large ? "at least 1 MiB" : "below 1 MiB");
}

static int class_same(const sim_copy_fit_class *a, const sim_copy_fit_class *b) {
  return a->n == b->n && !memcmp(&a->sx, &b->sx, sizeof a->sx) && !memcmp(&a->sy, &b->sy, sizeof a->sy) &&
         !memcmp(&a->sxx, &b->sxx, sizeof a->sxx) && !memcmp(&a->sxy, &b->sxy, sizeof a->sxy) &&
         !memcmp(&a->syy, &b->syy, sizeof a->syy);
}

int copy_sums_check(store *s, const store_trace *t, const sim_copy_fit *events, store_fault_fn fault, void *arg,
                    store_check_totals *tot) {
  sim_copy_fit kept;
  int rc = copy_sums_get(s, t->id, &kept);
  if (rc < 0) return -1;
  char msg[512], cls[64];
  if (rc == COPY_SUMS_BAD) {
    snprintf(msg, sizeof msg,
             "trace '%s': its copy sums (copy_sums) do not add up to its timed_copies or name an unknown class",
             t->name);
  } else if (rc == COPY_SUMS_READ && kept.copies != events->copies) {
    snprintf(msg, sizeof msg, "trace '%s': its copy sums count %llu timed copies, its events hold %llu", t->name,
             (unsigned long long)kept.copies, (unsigned long long)events->copies);
  } else {
    for (int b = 0; rc == COPY_SUMS_READ && b < SIM_TM__NCB; b++)
      for (int large = 0; large < 2; large++)
        if (!class_same(&kept.c[b][large], &events->c[b][large])) {
          class_words(b, large, cls, sizeof cls);
          snprintf(msg, sizeof msg, "trace '%s': its copy sums (copy_sums, class %s) differ from its copies'",
                   t->name, cls);
          rc = COPY_SUMS_BAD;
          break;
        }
    if (rc != COPY_SUMS_BAD) return 0;
  }
  tot->faults++;
  fault(arg, msg);
  return 0;
}

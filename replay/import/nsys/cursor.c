/* cursor.c: Nsight Systems: rows out of the export's tables through SQLite, each checked. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/limits.h"
#include "nsys_int.h"

/* ---- columns ------------------------------------------------------------------------------------- */

/* An integer column: 1 with *v, 0 when NULL, -1 for any other type. (One sqlite3_column_value
 * per column: the sqlite3_column_* calls each take the connection's mutex.) */
int nsys_get_int(sqlite3_stmt *q, int i, int64_t *v) {
  sqlite3_value *x = sqlite3_column_value(q, i);
  int ty = sqlite3_value_type(x);
  if (ty == SQLITE_INTEGER) {
    *v = sqlite3_value_int64(x);
    return 1;
  }
  return ty == SQLITE_NULL ? 0 : -1;
}

int nsys_bad_value(nsys *x, int t, int64_t rowid, sqlite3_stmt *q, int i, const char *col) {
  const char *txt = (const char *)sqlite3_column_text(q, i);
  return nsys_fail(x, "table %s, row %" PRId64 ": column %s is '%.40s', not an integer", nsys_tb_names[t], rowid,
                   col, txt ? txt : "");
}

/* The ranges of io/limits.h, checked before any arithmetic on a row: times, their order, the
 * device, the bytes. 0, or -1 with the table, the row and the column. */
static int check_ranges(nsys *x, int t, const nitem *it) {
  const char *col = NULL;
  int64_t v = 0;
  if (it->start > IO_MAX_TIME_NS || it->start < -IO_MAX_TIME_NS) col = "start", v = it->start;
  else if (it->end > IO_MAX_TIME_NS || it->end < -IO_MAX_TIME_NS) col = "end", v = it->end;
  else if (t != TB_RUNTIME && (it->device < -1 || it->device > IO_MAX_DEVICE)) col = "deviceId", v = it->device;
  else if (t != TB_RUNTIME && t != TB_KERNEL && t != TB_SYNC && it->v[t == TB_MEMORY ? 1 : 0] > (int64_t)IO_MAX_BYTES)
    col = "bytes", v = it->v[t == TB_MEMORY ? 1 : 0];
  if (col)
    return nsys_fail(x, "table %s, row %" PRId64 ": column %s is out of range (%" PRId64 ")", nsys_tb_names[t],
                     it->rowid, col, v);
  if (it->end < it->start)
    return nsys_fail(x, "table %s, row %" PRId64 ": column end (%" PRId64 ") is before start (%" PRId64 ")",
                     nsys_tb_names[t], it->rowid, it->end, it->start);
  return 0;
}

/* The columns an item table contributes to v[]: memory: address, bytes, memKind, op, pool;
 * kernel: name; memcpy: bytes, copyKind, srcKind, dstKind, virtualAddress, copyCount;
 * memset: bytes, memKind; sync: eventId. */
static const char *const item_vcols[TB_ITEMS][6] = {
  {"address", "bytes", "memKind", "memoryOperationType", "localMemoryPoolAddress", NULL},
  {"demangledName", NULL, NULL, NULL, NULL, NULL},
  {"bytes", "copyKind", "srcKind", "dstKind", "virtualAddress", "copyCount"},
  {"bytes", "memKind", NULL, NULL, NULL, NULL},
  {"eventId", NULL, NULL, NULL, NULL, NULL},
};

/* Adds column col of table t to the SELECT list when the table has it; returns its index or -1. */
static int add_col(nsys *x, int t, char *sql, size_t n, int *ncols, const char *col) {
  if (!col) return -1;
  const char *expr = nsys_has_col(x, t, col) ? col : NULL;
  if (t == TB_KERNEL && !strcmp(col, "demangledName")) {
    int d = nsys_has_col(x, t, "demangledName"), s = nsys_has_col(x, t, "shortName");
    expr = d && s ? "coalesce(demangledName, shortName)" : d ? "demangledName" : s ? "shortName" : NULL;
  }
  if (!expr) return -1;
  size_t l = strlen(sql);
  snprintf(sql + l, n - l, "%s%s", *ncols ? ", " : "", expr);
  return (*ncols)++;
}

/* ---- cursors ------------------------------------------------------------------------------------- */

/* The optimistic pass meets a row of process key: the first one fixes the process, another one
 * means the export holds several and the careful pass must run. */
static int fast_key_ok(nsys *x, int64_t key) {
  if (!x->fast_key_set) {
    x->fast_key = key;
    x->fast_key_set = 1;
  }
  if (key == x->fast_key && key >= 0) return 1;
  x->restart = 1;
  snprintf(x->why, sizeof x->why, "%s", key < 0 ? "rows that name no process" : "rows of several processes");
  return 0;
}

/* Opens a cursor over table t's rows of process p: CUR_CORR (correlated rows by correlationId),
 * CUR_ZERO (uncorrelated rows by start) or CUR_ALL (every row by start). */
static int cursor_open(nsys *x, ncursor *c, int t, const nproc *p, int several, int mode) {
  memset(c, 0, sizeof *c);
  c->table = t;
  char sql[1024] = "SELECT ";
  const tstat *s = &p->t[t];
  static const char *const fixed[] = {"start", "end", "correlationId", "rowid", "deviceId", "streamId", "contextId"};
  int ncols = 0;
  /* rowid is always there; the others when the table has them */
  for (int i = 0; i < 7; i++) {
    if (i == 3) {
      size_t l0 = strlen(sql);
      snprintf(sql + l0, sizeof sql - l0, "%srowid", ncols ? ", " : "");
      c->col[i] = ncols++;
    } else if (i == 6 && !x->nctxs) {
      c->col[i] = -1; /* the context only tells which stream is its NULL stream */
    } else {
      c->col[i] = add_col(x, t, sql, sizeof sql, &ncols, fixed[i]);
    }
  }
  for (int i = 0; i < 6; i++) c->col[7 + i] = add_col(x, t, sql, sizeof sql, &ncols, item_vcols[t][i]);
  c->col[13] = -1;
  size_t l = strlen(sql);
  c->mode = mode;
  c->last = c->last_start = INT64_MIN;
  if (x->fast) {
    /* read in the file's order, checking that it is the order wanted, and the process */
    c->col[13] = nsys_has_col(x, t, "globalPid") ? ncols++ : -1;
    l += (size_t)snprintf(sql + l, sizeof sql - l, "%s FROM %s", c->col[13] >= 0 ? ", globalPid >> 24" : "",
                          nsys_tb_names[t]);
    if (mode == CUR_CORR) snprintf(sql + l, sizeof sql - l, " WHERE correlationId > 0");
    else if (mode == CUR_ZERO) snprintf(sql + l, sizeof sql - l, " WHERE correlationId IS NULL OR correlationId <= 0");
    if (sqlite3_prepare_v2(x->db, sql, -1, &c->q, NULL)) return nsys_dbfail(x, nsys_tb_names[t], -1, sql);
    return 0;
  }
  l += (size_t)snprintf(sql + l, sizeof sql - l, " FROM %s", nsys_tb_names[t]);
  const char *sep = " WHERE ";
  if (several) {
    l += (size_t)snprintf(sql + l, sizeof sql - l, "%sglobalPid >= ?1 AND globalPid < ?2", sep);
    sep = " AND ";
  }
  int sorted;
  if (mode == CUR_CORR) {
    if (s->zero) l += (size_t)snprintf(sql + l, sizeof sql - l, "%scorrelationId > 0", sep);
    sorted = !s->corr_unsorted;
    if (!sorted) snprintf(sql + l, sizeof sql - l, " ORDER BY correlationId, rowid");
  } else if (mode == CUR_ZERO) {
    if (s->zero < s->rows)
      l += (size_t)snprintf(sql + l, sizeof sql - l, "%s(correlationId IS NULL OR correlationId <= 0)", sep);
    sorted = !s->zero_unsorted;
    if (!sorted) snprintf(sql + l, sizeof sql - l, " ORDER BY start, rowid");
  } else {
    sorted = !s->all_unsorted;
    if (!sorted) snprintf(sql + l, sizeof sql - l, " ORDER BY start, rowid");
  }
  if (sqlite3_prepare_v2(x->db, sql, -1, &c->q, NULL)) return nsys_dbfail(x, nsys_tb_names[t], -1, sql);
  if (several) {
    sqlite3_bind_int64(c->q, 1, p->key << 24);
    sqlite3_bind_int64(c->q, 2, (p->key + 1) << 24);
  }
  return 0;
}

void nsys_cursor_close(ncursor *c) {
  sqlite3_finalize(c->q);
  c->q = NULL;
  c->has = 0;
}

int nsys_cursor_next(nsys *x, ncursor *c) {
  c->has = 0;
  if (!c->q) return 0;
  int rc = sqlite3_step(c->q);
  if (rc == SQLITE_DONE) {
    nsys_cursor_close(c);
    return 0;
  }
  int t = c->table;
  if (rc != SQLITE_ROW) return nsys_read_fail(x, t, c->rows, c->cur.rowid);
  c->rows++;
  sqlite3_stmt *q = c->q;
  nitem *it = &c->cur;
  static const char *const fixed[] = {"start", "end", "correlationId", "rowid", "deviceId", "streamId", "contextId"};
  int64_t *dst[7] = {&it->start, &it->end, &it->corr, &it->rowid, &it->device, &it->stream, &it->context};
  it->table = (uint8_t)t;
  it->rowid = sqlite3_column_int64(q, c->col[3]);
  it->corr = 0;
  it->device = it->stream = it->context = -1;
  it->next = 0;
  for (int i = 0; i < 13; i++) {
    int64_t v = -1;
    int g = c->col[i] >= 0 ? nsys_get_int(q, c->col[i], &v) : 0;
    if (g < 0) return nsys_bad_value(x, t, it->rowid, q, c->col[i], i < 7 ? fixed[i] : item_vcols[t][i - 7]);
    if (i < 7) {
      if (g) *dst[i] = v;
      else if (i == 0)
        return nsys_fail(x, "table %s, row %" PRId64 ": column start is NULL", nsys_tb_names[t], it->rowid);
      else if (i == 1) it->end = it->start;
    } else {
      /* the columns an event cannot do without: memory: address, bytes, kind, operation; copies: bytes, kind */
      static const unsigned required[TB_ITEMS] = {15, 0, 3, 1, 0};
      if (!g && c->col[i] >= 0 && (required[t] >> (i - 7) & 1))
        return nsys_fail(x, "table %s, row %" PRId64 ": column %s is NULL", nsys_tb_names[t], it->rowid,
                         item_vcols[t][i - 7]);
      it->v[i - 7] = g ? v : -1;
    }
  }
  if (it->corr < 0) it->corr = 0;
  if (t != TB_KERNEL && t != TB_SYNC && it->v[t == TB_MEMORY ? 1 : 0] < 0)
    return nsys_fail(x, "table %s, row %" PRId64 ": bytes is negative (%" PRId64 ")", nsys_tb_names[t], it->rowid,
                     it->v[t == TB_MEMORY ? 1 : 0]);
  if (check_ranges(x, t, it)) return -1;
  if (x->fast) {
    int64_t key = -1;
    if (c->col[13] >= 0 && nsys_get_int(q, c->col[13], &key) < 0)
      return nsys_bad_value(x, t, it->rowid, q, c->col[13], "globalPid");
    if (c->col[13] >= 0 && !fast_key_ok(x, key)) return -1;
    int by_corr = c->mode == CUR_CORR || (c->mode == CUR_MIXED && it->corr > 0);
    int64_t order = by_corr ? it->corr : it->start;
    if (order < c->last || (c->mode == CUR_MIXED && it->start < c->last_start)) {
      x->restart = 1;
      snprintf(x->why, sizeof x->why, "%s is not in %s order", nsys_tb_names[t], by_corr ? "correlationId" : "start");
      return -1;
    }
    if (by_corr) c->last = order;
    c->last_start = it->start;
  }
  c->has = 1;
  return 1;
}

/* ---- the merge's cursors ------------------------------------------------------------------------- */

/* Opens the cursor over the calls: start order (checked, in the optimistic pass). */
int nsys_rt_open(merge *m) {
  nsys *x = m->x;
  ncursor *c = &m->rt;
  memset(c, 0, sizeof *c);
  c->table = TB_RUNTIME;
  char sql[512];
  int has_class = nsys_has_col(x, TB_RUNTIME, "eventClass");
  size_t l = (size_t)snprintf(sql, sizeof sql, "SELECT start, end, %s, nameId, rowid",
                              nsys_has_col(x, TB_RUNTIME, "correlationId") ? "correlationId" : "NULL");
  if (x->fast) {
    /* the class is checked here rather than by SQLite, to count the other rows */
    snprintf(sql + l, sizeof sql - l, ", %s, %s FROM %s", has_class ? "eventClass" : "NULL",
             nsys_has_col(x, TB_RUNTIME, "globalTid") ? "globalTid >> 24" : "NULL", nsys_tb_names[TB_RUNTIME]);
  } else {
    l += (size_t)snprintf(sql + l, sizeof sql - l, " FROM %s", nsys_tb_names[TB_RUNTIME]);
    const char *sep = " WHERE ";
    if (has_class) {
      l += (size_t)snprintf(sql + l, sizeof sql - l, "%seventClass IN (%" PRId64 ", %" PRId64 ")", sep, x->rt_class,
                            x->drv_class);
      sep = " AND ";
    }
    if (m->several) l += (size_t)snprintf(sql + l, sizeof sql - l, "%sglobalTid >= ?1 AND globalTid < ?2", sep);
    if (m->p->t[TB_RUNTIME].all_unsorted) snprintf(sql + l, sizeof sql - l, " ORDER BY start, rowid");
  }
  if (sqlite3_prepare_v2(x->db, sql, -1, &c->q, NULL)) return nsys_dbfail(x, nsys_tb_names[TB_RUNTIME], -1, sql);
  if (m->several) {
    sqlite3_bind_int64(c->q, 1, m->p->key << 24);
    sqlite3_bind_int64(c->q, 2, (m->p->key + 1) << 24);
  }
  m->prev_start = INT64_MIN;
  return 0;
}

/* The next call into m->rt.cur: 1, 0 at the end, -1 on error (or a restart). */
int nsys_rt_next(merge *m) {
  nsys *x = m->x;
  ncursor *c = &m->rt;
  c->has = 0;
  for (;;) {
    if (!c->q) return 0;
    int rc = sqlite3_step(c->q);
    if (rc == SQLITE_DONE) {
      nsys_cursor_close(c);
      return 0;
    }
    if (rc != SQLITE_ROW) return nsys_read_fail(x, TB_RUNTIME, c->rows, c->cur.rowid);
    c->rows++;
    sqlite3_stmt *q = c->q;
    nitem *call = &c->cur;
    memset(call, 0, sizeof *call);
    call->table = TB_RUNTIME;
    call->rowid = sqlite3_column_int64(q, 4);
    static const char *const cn[] = {"start", "end", "correlationId", "nameId", "", "eventClass", "globalTid"};
    int64_t cls = x->rt_class, key = -1;
    int64_t *dst[] = {&call->start, &call->end, &call->corr, &call->v[0], NULL, &cls, &key};
    for (int i = 0; i < (x->fast ? 7 : 4); i++) {
      if (i == 4) continue;
      int g = nsys_get_int(q, i, dst[i]);
      if (g < 0) return nsys_bad_value(x, TB_RUNTIME, call->rowid, q, i, cn[i]);
      if (!g && i < 4 && i != 2)
        return nsys_fail(x, "table %s, row %" PRId64 ": column %s is NULL", nsys_tb_names[TB_RUNTIME], call->rowid,
                         cn[i]);
    }
    if (x->fast) {
      if (cls != x->rt_class && cls != x->drv_class) {
        m->other_class++;
        continue;
      }
      if (!fast_key_ok(x, key)) return -1;
      if (call->start < m->prev_start) {
        x->restart = 1;
        snprintf(x->why, sizeof x->why, "%s is not in start order", nsys_tb_names[TB_RUNTIME]);
        return -1;
      }
    } else if (call->start < m->prev_start) {
      /* the prescan found them sorted: the file changed under us */
      return nsys_fail(x, "table %s, row %" PRId64 ": rows are not in the order the first reading found",
                       nsys_tb_names[TB_RUNTIME], call->rowid);
    }
    if (call->corr < 0) call->corr = 0;
    if (check_ranges(x, TB_RUNTIME, call)) return -1;
    m->prev_start = call->start;
    c->has = 1;
    return 1;
  }
}

int nsys_open_items(merge *m) {
  nsys *x = m->x;
  nproc *p = m->p;
  for (int t = 0; t < TB_ITEMS; t++) {
    if (!x->tb[t].usable || (!x->fast && p->t[t].rows == 0)) continue;
    int corr = nsys_has_col(x, t, "correlationId");
    int want_corr = !m->all_mode && corr && (x->fast || p->t[t].rows > p->t[t].zero);
    int want_zero = t != TB_SYNC && (m->all_mode || !corr || (!x->fast && p->t[t].zero));
    if (want_corr && (cursor_open(x, &m->items[t], t, p, m->several, x->fast ? CUR_MIXED : CUR_CORR) ||
                      nsys_cursor_next(x, &m->items[t]) < 0))
      return -1;
    if (want_zero && (cursor_open(x, &m->zeros[t], t, p, m->several, m->all_mode || !corr ? CUR_ALL : CUR_ZERO) ||
                      nsys_cursor_next(x, &m->zeros[t]) < 0))
      return -1;
  }
  return 0;
}

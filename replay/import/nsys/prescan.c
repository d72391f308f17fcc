/* prescan.c: Nsight Systems: processes and their live allocations; the careful pass's prescan. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsys_int.h"

/* ---- processes ---------------------------------------------------------------------------------- */

void nsys_proc_init(nproc *p, int64_t key) {
  memset(p, 0, sizeof *p);
  p->key = key;
  p->min_start = INT64_MAX;
  p->sim_valid = 1;
  sim_map_init(&p->live);
  for (int t = 0; t < TB__COUNT; t++) {
    p->t[t].last_zero_start = p->t[t].last_all_start = p->t[t].last_mem_start = INT64_MIN;
    p->t[t].last_corr = p->t[t].last_mem_corr = INT64_MIN;
  }
}

static nproc *proc_get(nsys *x, int64_t key) {
  int existed;
  uint64_t *slot = sim_map_put(&x->proc_idx, (uint64_t)key, &existed);
  if (existed) return &x->procs[*slot];
  x->procs = sim_xrealloc(x->procs, (x->nprocs + 1) * sizeof *x->procs);
  nsys_proc_init(&x->procs[x->nprocs], key);
  *slot = x->nprocs;
  return &x->procs[x->nprocs++];
}

void nsys_proc_release(nproc *p) {
  sim_map_release(&p->live);
  free(p->lv);
  free(p->lvfree);
  free(p->pre);
}

/* The process key column of a table: globalPid, or globalTid for calls. */
static const char *pid_col(int t) { return t == TB_RUNTIME ? "globalTid" : "globalPid"; }

/* ---- the live set of a process's allocations (address -> size, kind, device) --------------------- */

nlive *nsys_live_find(nproc *p, uint64_t addr) {
  uint64_t *v = sim_map_get(&p->live, addr);
  return v ? &p->lv[*v] : NULL;
}

void nsys_live_add(nproc *p, uint64_t addr, uint64_t bytes, int device, int mk) {
  uint32_t i;
  if (p->nlvfree) i = p->lvfree[--p->nlvfree];
  else {
    sim_grow((void **)&p->lv, &p->lvcap, p->nlv + 1, sizeof *p->lv);
    i = (uint32_t)p->nlv++;
  }
  p->lv[i] = (nlive){bytes, (int16_t)device, (uint8_t)mk};
  *sim_map_put(&p->live, addr, NULL) = i;
}

void nsys_live_del(nproc *p, uint64_t addr) {
  uint64_t i;
  if (!sim_map_del(&p->live, addr, &i)) return;
  sim_grow((void **)&p->lvfree, &p->lvfreecap, p->nlvfree + 1, sizeof *p->lvfree);
  p->lvfree[p->nlvfree++] = (uint32_t)i;
}

void nsys_live_clear(nproc *p) {
  sim_map_clear(&p->live);
  p->nlv = p->nlvfree = p->nfreed = 0;
}

/* The prescan's replay of one memory event: a free at an address not seen before is an
 * allocation made before the capture began (a free of an address freed already is a double
 * free: the entry stays, marked freed, so that the two are told apart; past
 * PRESIM_FREED_MAX such entries the oldest are forgotten). */
#define MK_FREED 255
#define PRESIM_FREED_MAX 1000000
static void presim_step(nproc *p, uint64_t addr, uint64_t bytes, int device, int mk, int op) {
  nlive *l = nsys_live_find(p, addr);
  if (op == OP_ALLOC) {
    if (l && l->mk == MK_FREED) p->nfreed--;
    if (l) nsys_live_del(p, addr);
    nsys_live_add(p, addr, bytes, device, mk);
  } else if (op == OP_FREE) {
    if (l && l->mk != MK_FREED) {
      l->mk = MK_FREED;
      if (++p->nfreed > PRESIM_FREED_MAX) {
        uint64_t k, v;
        size_t n = 0;
        uint64_t *gone = sim_xmalloc(p->nfreed * sizeof *gone);
        for (size_t it = 0; sim_map_next(&p->live, &it, &k, &v);)
          if (p->lv[v].mk == MK_FREED) gone[n++] = k;
        for (size_t i = 0; i < n; i++) nsys_live_del(p, gone[i]);
        free(gone);
        p->nfreed = 0;
      }
    } else if (!l) {
      sim_grow((void **)&p->pre, &p->precap, p->npre + 1, sizeof *p->pre);
      p->pre[p->npre++] = (npre){addr, bytes, (int16_t)device, (uint8_t)mk};
      nsys_live_add(p, addr, bytes, device, MK_FREED);
      p->nfreed++;
    }
  }
}

/* ---- the prescan -------------------------------------------------------------------------------- */

static void sorted_step(int64_t *last, int64_t v, int *unsorted) {
  if (v < *last) *unsorted = 1;
  *last = v;
}

/* The prescan's columns: start, rowid, then the process key, correlationId, eventClass, deviceId,
 * address, bytes, memKind, op. */
enum { P_START, P_ROWID, P_PID, P_CORR, P_CLASS, P_DEV, P_ADDR, P_BYTES, P_MK, P_OP, P__N };
static const char *const prescan_cols[P__N] = {"start",    "rowid",   NULL,    "correlationId", "eventClass",
                                               "deviceId", "address", "bytes", "memKind",       "memoryOperationType"};

/* The SELECT of table t's prescan: the columns of prescan_cols the table has, at col[] (-1: not read). */
static void prescan_select(nsys *x, int t, int col[P__N], char *sql, size_t size) {
  int mem = t == TB_MEMORY, rt = t == TB_RUNTIME;
  size_t l = (size_t)snprintf(sql, size, "SELECT start, rowid");
  int n = 2;
  col[P_START] = 0;
  col[P_ROWID] = 1;
  for (int i = P_PID; i < P__N; i++) {
    const char *c = i == P_PID ? pid_col(t) : prescan_cols[i];
    int want = (i == P_CLASS ? rt : i >= P_DEV ? mem : 1) && nsys_has_col(x, t, c);
    col[i] = want ? n++ : -1;
    if (want) l += (size_t)snprintf(sql + l, size - l, i == P_PID ? ", %s >> 24" : ", %s", c);
  }
  snprintf(sql + l, size - l, " FROM %s", nsys_tb_names[t]);
}

/* One row of table t in its process: counts, the orders, and for memory events the replay. */
static void prescan_count(nsys *x, nproc *p, int t, const int64_t v[P__N]) {
  int mem = t == TB_MEMORY, rt = t == TB_RUNTIME;
  int64_t start = v[P_START], corr = v[P_CORR];
  tstat *s = &p->t[t];
  s->rows++;
  if (start < p->min_start) p->min_start = start;
  sorted_step(&s->last_all_start, start, &s->all_unsorted);
  if (corr <= 0) {
    s->zero++;
    sorted_step(&s->last_zero_start, start, &s->zero_unsorted);
    corr = 0;
  } else if (!rt) {
    sorted_step(&s->last_corr, corr, &s->corr_unsorted);
  }
  if (!mem) return;
  /* memory events replay in (start, correlation) order */
  if (start < s->last_mem_start || (start == s->last_mem_start && corr < s->last_mem_corr)) s->mem_unsorted = 1;
  s->last_mem_start = start;
  s->last_mem_corr = corr;
  if (p->sim_valid && !s->mem_unsorted) {
    int64_t mk = v[P_MK], op = v[P_OP];
    int m = mk >= 0 && mk < ENUM_MAX ? x->mk_map[mk] : BAD, o = op >= 0 && op < ENUM_MAX ? x->op_map[op] : BAD;
    if (m != BAD && o != BAD) presim_step(p, (uint64_t)v[P_ADDR], (uint64_t)v[P_BYTES], (int)v[P_DEV], m, o);
  }
}

/* Reads every row of table t once: processes, counts, orders, and (for memory events) the
 * replay that finds allocations older than the capture. Columns the table lacks are not read. */
static int prescan_table(nsys *x, int t) {
  int mem = t == TB_MEMORY, rt = t == TB_RUNTIME;
  int col[P__N];
  char sql[512];
  prescan_select(x, t, col, sql, sizeof sql);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, nsys_tb_names[t], -1, sql);
  int rc;
  nproc *p = NULL;
  int64_t pkey = INT64_MIN, nread = 0;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    nread++;
    int64_t v[P__N] = {0, 0, -1, 0, 0, -1, 0, 0, 0, 0};
    for (int i = 0; i < P__N; i++) {
      if (i == P_ROWID || col[i] < 0) continue;
      int g = nsys_get_int(q, col[i], &v[i]);
      if (g > 0 || (g == 0 && (i == P_PID || i == P_CORR || i == P_CLASS || i == P_DEV))) continue;
      int64_t rowid = sqlite3_column_int64(q, 1);
      const char *cn = i == P_PID ? pid_col(t) : prescan_cols[i];
      int r = g == 0 ? nsys_fail(x, "table %s, row %" PRId64 ": column %s is NULL", nsys_tb_names[t], rowid, cn)
                     : nsys_bad_value(x, t, rowid, q, col[i], cn);
      sqlite3_finalize(q);
      return r;
    }
    if (rt && col[P_CLASS] >= 0 && v[P_CLASS] != x->rt_class && v[P_CLASS] != x->drv_class) {
      x->other_class_rows++;
      continue;
    }
    if (mem && v[P_BYTES] < 0) {
      int64_t rowid = sqlite3_column_int64(q, 1);
      sqlite3_finalize(q);
      return nsys_fail(x, "table %s, row %" PRId64 ": bytes is negative (%" PRId64 ")", nsys_tb_names[t], rowid,
                       v[P_BYTES]);
    }
    if (!p || v[P_PID] != pkey) {
      p = proc_get(x, v[P_PID]);
      pkey = v[P_PID];
    }
    prescan_count(x, p, t, v);
  }
  if (rc != SQLITE_DONE) {
    nsys_read_fail(x, t, nread, -1);
    sqlite3_finalize(q);
    return -1;
  }
  sqlite3_finalize(q);
  return 0;
}

/* When a process's memory events were not in time order, its replay is redone sorted. */
int nsys_presim_sorted(nsys *x, nproc *p, int several) {
  nsys_live_clear(p);
  p->npre = 0;
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT address, bytes, memKind, memoryOperationType, deviceId FROM %s %s ORDER BY start, "
           "CASE WHEN correlationId > 0 THEN correlationId ELSE 0 END, rowid",
           nsys_tb_names[TB_MEMORY], several ? "WHERE globalPid >= ?1 AND globalPid < ?2" : "");
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, nsys_tb_names[TB_MEMORY], -1, sql);
  if (several) {
    sqlite3_bind_int64(q, 1, p->key << 24);
    sqlite3_bind_int64(q, 2, (p->key + 1) << 24);
  }
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t mk = sqlite3_column_int64(q, 2), op = sqlite3_column_int64(q, 3);
    int m = mk >= 0 && mk < ENUM_MAX ? x->mk_map[mk] : BAD, o = op >= 0 && op < ENUM_MAX ? x->op_map[op] : BAD;
    if (m != BAD && o != BAD)
      presim_step(p, (uint64_t)sqlite3_column_int64(q, 0), (uint64_t)sqlite3_column_int64(q, 1),
                  sqlite3_column_int(q, 4), m, o);
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, nsys_tb_names[TB_MEMORY], -1, sql);
}

/* ---- the processes that become traces ------------------------------------------------------------- */

static int cmp_proc(const void *a, const void *b) {
  const nproc *x = a, *y = b;
  return x->key < y->key ? -1 : x->key > y->key;
}

/* Rows that name no process go with the only process there is, else nowhere. Returns the number
 * of processes the rows name. */
static size_t adopt_unassigned(nsys *x) {
  size_t nreal = 0;
  nproc *nopid = NULL, *only = NULL;
  for (size_t i = 0; i < x->nprocs; i++) {
    if (x->procs[i].key < 0) nopid = &x->procs[i];
    else nreal++, only = &x->procs[i];
  }
  if (nopid) {
    for (int t = 0; t < TB__COUNT; t++) x->unassigned_rows += t == TB_SYNC ? 0 : nopid->t[t].rows;
    if (nreal == 1) {
      /* their order among the process's rows is unknown: let SQLite sort */
      for (int t = 0; t < TB__COUNT; t++) {
        tstat *a = &only->t[t], *b = &nopid->t[t];
        if (!b->rows) continue;
        a->rows += b->rows;
        a->zero += b->zero;
        a->corr_unsorted = a->zero_unsorted = a->all_unsorted = a->mem_unsorted = 1;
      }
      if (nopid->min_start < only->min_start) only->min_start = nopid->min_start;
      only->sim_valid = 0;
    }
  }
  return nreal;
}

/* Which processes become traces: those that ran something or allocated; else those that called CUDA. */
static void choose_processes(nsys *x) {
  size_t keep = 0;
  int any_work = 0;
  for (size_t i = 0; i < x->nprocs; i++)
    for (int t = 0; t < TB_ITEMS; t++)
      if (t != TB_SYNC && x->procs[i].key >= 0 && x->procs[i].t[t].rows) any_work = 1;
  for (size_t i = 0; i < x->nprocs; i++) {
    nproc *p = &x->procs[i];
    int work = 0;
    for (int t = 0; t < TB_ITEMS; t++)
      if (t != TB_SYNC && p->t[t].rows) work = 1;
    if (p->key < 0) {
      nsys_proc_release(p);
      continue;
    }
    if (any_work && !work) {
      import_warn(x->ic, "'%s': process %" PRId64 " made %" PRId64 " CUDA calls but ran nothing on a GPU: not imported",
                  x->path, p->key & 0xFFFFFF, p->t[TB_RUNTIME].rows);
      nsys_proc_release(p);
      continue;
    }
    x->procs[keep++] = *p;
  }
  x->nprocs = keep;
}

int nsys_prescan(nsys *x) {
  for (int t = 0; t < TB__COUNT; t++)
    if (x->tb[t].usable && prescan_table(x, t)) return -1;
  size_t nreal = adopt_unassigned(x);
  choose_processes(x);
  if (!x->nprocs)
    return nsys_fail(x, "the export holds no CUDA activity: no kernels, copies, memsets, memory usage events or CUDA "
                        "calls (record with `nsys profile --trace=cuda`)");
  if (x->unassigned_rows)
    import_warn(x->ic, "'%s': %" PRId64 " rows name no process (globalPid is NULL): %s", x->path, x->unassigned_rows,
                nreal == 1 ? "they are imported with the only process" : "not imported");
  qsort(x->procs, x->nprocs, sizeof *x->procs, cmp_proc);
  return 0;
}

/* nsys.c: the Nsight Systems importer: file checks, the optimistic and careful passes, detection, registry row. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nsys_int.h"

/* ---- failures and small helpers ----------------------------------------------------------------- */

int nsys_fail(nsys *x, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  import_error(x->ic, "cannot import '%s': %s", x->path, msg);
  return -1;
}

int nsys_dbfail(nsys *x, const char *table, int64_t rowid, const char *sql) {
  char where[160];
  if (rowid >= 0) snprintf(where, sizeof where, "table %s, row %" PRId64, table, rowid);
  else snprintf(where, sizeof where, "table %s", table);
  import_error(x->ic, "cannot read '%s': %s: %s%s%.300s%s", x->path, where, sqlite3_errmsg(x->db), sql ? " (in: " : "",
               sql ? sql : "", sql ? ")" : "");
  return -1;
}

/* (A corrupt file, or a full disk for SQLite's sorting.) */
int nsys_read_fail(nsys *x, int t, int64_t rows, int64_t last_rowid) {
  const char *tn = t >= 0 ? nsys_tb_names[t] : "?";
  if (!rows) import_error(x->ic, "cannot read '%s': table %s, first row: %s", x->path, tn, sqlite3_errmsg(x->db));
  else if (last_rowid >= 0)
    import_error(x->ic, "cannot read '%s': table %s, after row %" PRId64 ": %s", x->path, tn, last_rowid,
                 sqlite3_errmsg(x->db));
  else
    import_error(x->ic, "cannot read '%s': table %s, after %" PRId64 " rows: %s", x->path, tn, rows, sqlite3_errmsg(x->db));
  return -1;
}

char *nsys_strdup(const char *s) {
  size_t n = strlen(s);
  char *d = sim_xmalloc(n + 1);
  memcpy(d, s, n + 1);
  return d;
}

void nsys_append_list(char **list, const char *item) {
  size_t a = *list ? strlen(*list) : 0, b = strlen(item);
  *list = sim_xrealloc(*list, a + b + 3);
  if (a) memcpy(*list + a, ", ", 2), a += 2;
  memcpy(*list + a, item, b + 1);
}

/* ---- the importer ---------------------------------------------------------------------------------- */

static void nsys_release(nsys *x) {
  sqlite3_finalize(x->str_q);
  for (size_t i = 0; i < x->nprocs; i++) nsys_proc_release(&x->procs[i]);
  free(x->procs);
  sim_map_release(&x->proc_idx);
  sim_map_release(&x->kname);
  sim_map_release(&x->cname);
  sim_map_release(&x->cpname);
  for (int t = 0; t < TB__COUNT; t++) free(x->tb[t].unknown);
  for (size_t i = 0; i < x->ngpus; i++) free(x->gpus[i].name);
  free(x->gpus);
  free(x->ctxs);
  free(x->product_version);
  free(x->schema_version);
  sqlite3_close(x->db);
}

/* Opens path as an Nsight Systems export, or says what the file is instead. 0 or -1. */
static int open_checked(nsys *x) {
  import_ctx *ic = x->ic;
  char err[512];
  FILE *f = fopen(ic->file, "rb");
  unsigned char magic[16] = {0};
  size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
  if (f) fclose(f);
  if (!f) {
    import_error(ic, "cannot open '%s': %s", ic->path, strerror(errno));
    return -1;
  }
  if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b)
    return nsys_fail(x, "a gzip-compressed file: decompress the SQLite export first (gunzip)");
  if (got < 16 || memcmp(magic, "SQLite format 3", 16))
    return nsys_fail(x, "not an SQLite database, so not an Nsight Systems SQLite export (export one with `nsys "
                        "export --type sqlite`)");
  if (nsys_open_export(ic->file, ic->file == ic->path, &x->db, err, sizeof err)) return nsys_fail(x, "cannot open it as SQLite: %s", err);
  int nsys_like = nsys_looks_like(x->db);
  if (nsys_like < 0) return nsys_dbfail(x, "sqlite_master", -1, NULL);
  if (!nsys_like) {
    int app = 0;
    sqlite3_stmt *q;
    if (!sqlite3_prepare_v2(x->db, "PRAGMA application_id", -1, &q, NULL) && sqlite3_step(q) == SQLITE_ROW)
      app = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return nsys_fail(x, app == STORE_APPLICATION_ID
                          ? "a memplay store, not an Nsight Systems export (copy traces between stores with `memplay "
                            "export`)"
                          : "an SQLite database but not an Nsight Systems export: it has no StringIds table with the "
                            "CUPTI_ACTIVITY_KIND_* or META_DATA_EXPORT tables of `nsys export --type sqlite`");
  }
  return 0;
}

static int nsys_import(import_ctx *ic) {
  nsys x;
  memset(&x, 0, sizeof x);
  x.ic = ic;
  x.path = ic->path;
  sim_map_init(&x.proc_idx);
  sim_map_init(&x.kname);
  sim_map_init(&x.cname);
  sim_map_init(&x.cpname);
  int rc = -1;
  /* the file, then schema discovery: tables, columns, enums, version */
  if (open_checked(&x) || nsys_read_schema(&x)) goto out;
  /* the optimistic pass: one process whose rows are already in order (a restart when not) */
  const char *prescan = import_param(ic, "prescan");
  if (!prescan || !strcmp(prescan, "0")) {
    nproc fp;
    nsys_proc_init(&fp, -1);
    x.fast = 1;
    rc = nsys_import_process(&x, &fp, 0);
    nsys_proc_release(&fp);
    x.fast = 0;
    if (rc != 1) goto out;
  }
  x.restart = 0;
  x.other_class_rows = 0;
  rc = -1;
  /* the careful pass: the prescan, then each process it found */
  if (nsys_prescan(&x)) goto out;
  int several = x.nprocs > 1;
  rc = 0;
  for (size_t i = 0; i < x.nprocs && !rc; i++) rc = nsys_import_process(&x, &x.procs[i], several);
out:
  nsys_release(&x);
  return rc;
}

/* ---- detection and the registry row ------------------------------------------------------------- */

static int nsys_detect(const unsigned char *head, size_t n, const char *path) {
  if (n < 16 || memcmp(head, "SQLite format 3", 16)) return 0;
  /* Any SQLite database is claimed weakly, so that the importer can say what it is instead. */
  /* A pipe or FIFO is not opened a second time (it would wait forever): its SQLite header
   * decides, and the importer then reads a private copy. */
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 50;
  sqlite3 *db;
  char err[256];
  if (nsys_open_export(path, 1, &db, err, sizeof err)) return 10;
  int yes = nsys_looks_like(db);
  sqlite3_close(db);
  return yes > 0 ? 95 : 10;
}

const importer import_nsys = {
  .name = "nsys",
  .summary = "Nsight Systems SQLite export (nsys export --type sqlite): allocations, kernels, copies, calls",
  .detect = nsys_detect,
  .wants_path = 1,
  .import = nsys_import,
};

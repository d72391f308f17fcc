/* import_nsys.c: Nsight Systems SQLite exports (nsys export --type sqlite): allocations, kernels, copies, calls. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "importer.h"
#include "io/jsonw.h"

/*
 * What is read (docs/formats.md, "Nsight Systems SQLite exports"):
 *  - CUDA_GPU_MEMORY_USAGE_EVENTS: the driver's allocations and frees (--cuda-memory-usage=true);
 *  - CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET: device work, names from StringIds;
 *  - CUPTI_ACTIVITY_KIND_RUNTIME: runtime and driver calls (eventClass 0 and 1), which give each
 *    device activity and each memory event its host issue time and API cost (by correlationId),
 *    and which become sync and api events when nothing else claims them;
 *  - CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: the stream a synchronization waited for;
 *  - TARGET_INFO_GPU, TARGET_INFO_CUDA_CONTEXT_INFO, PROCESSES, META_DATA_EXPORT (or
 *    EXPORT_META_DATA), the ENUM_* tables (hard-coded when absent).
 *
 * The export is opened read-only and immutable, on a connection of its own. One trace per
 * process (addresses are per process). Rows stream from SQLite and are merged in time order
 * without holding the file in memory: the merge walks the calls in start order; activities,
 * memory events and synchronization rows are read in correlationId order and pulled up to the
 * current call's id, so each call meets the rows it caused; an output heap keyed by time
 * reorders what a call produces (a memory event is timed by the driver, inside its call)
 * against later calls. What waits in memory is bounded by the calls in flight.
 *
 * The merge needs each table in its order. nsys writes rows sorted by start, so an optimistic
 * pass reads the tables as they are, checking on every row that they are in order, that they
 * belong to one process, and that no free comes before its allocation. When a check fails,
 * what it wrote is deleted and the careful pass runs: a prescan reads each table once to find
 * the processes, the order of each table, and the allocations older than the capture (frees
 * seen first); then each process is merged with ORDER BY where needed (SQLite sorts, spilling
 * to temporary files).
 */

/* ---- the schema as memplay knows it --------------------------------------------------------- */

enum { TB_MEMORY, TB_KERNEL, TB_MEMCPY, TB_MEMSET, TB_SYNC, TB_RUNTIME, TB__COUNT };
#define TB_ITEMS TB_RUNTIME /* tables before it are read by correlation */

static const char *const tb_names[TB__COUNT] = {
  "CUDA_GPU_MEMORY_USAGE_EVENTS", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
  "CUPTI_ACTIVITY_KIND_MEMSET",   "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME",
};

/* Every column memplay knows in the tables it reads (read, or deliberately left alone). */
static const char *const cols_memory[] = {
  "start", "globalPid", "deviceId", "contextId", "address", "pc", "bytes", "memKind", "memoryOperationType", "name",
  "correlationId", "streamId", "localMemoryPoolAddress", "localMemoryPoolReleaseThreshold", "localMemoryPoolSize",
  "localMemoryPoolUtilizedSize", "importedMemoryPoolAddress", "importedMemoryPoolProcessId", NULL};
static const char *const cols_kernel[] = {
  "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid",
  "demangledName", "shortName", "mangledName", "launchType", "cacheConfig", "registersPerThread", "gridX", "gridY",
  "gridZ", "blockX", "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory", "localMemoryPerThread",
  "localMemoryTotal", "gridId", "sharedMemoryExecuted", "graphNodeId", "sharedMemoryLimitConfig", NULL};
static const char *const cols_memcpy[] = {
  "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid", "bytes",
  "copyKind", "deprecatedSrcId", "srcKind", "dstKind", "srcDeviceId", "srcContextId", "dstDeviceId", "dstContextId",
  "migrationCause", "graphNodeId", "virtualAddress", "copyCount", NULL};
static const char *const cols_memset[] = {
  "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid", "value",
  "bytes", "graphNodeId", "memKind", NULL};
static const char *const cols_sync[] = {
  "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid", "syncType",
  "eventId", NULL};
static const char *const cols_runtime[] = {
  "start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue", "callchainId", NULL};
static const char *const *const tb_cols[TB__COUNT] = {cols_memory, cols_kernel, cols_memcpy,
                                                      cols_memset, cols_sync,   cols_runtime};
/* Columns without which a table cannot be read (space-separated). */
static const char *const tb_required[TB__COUNT] = {
  "start address bytes memKind memoryOperationType deviceId", "start end deviceId streamId", "start end deviceId bytes copyKind",
  "start end deviceId bytes", "start correlationId", "start end nameId",
};

/* CUDA tables memplay knows and leaves alone: they hold nothing a replay uses. */
static const char *const tb_ignored[] = {
  "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_OPENACC_DATA", "CUPTI_ACTIVITY_KIND_OPENACC_LAUNCH",
  "CUPTI_ACTIVITY_KIND_OPENACC_OTHER", "CUPTI_ACTIVITY_KIND_OPENMP", "CUDA_CALLCHAINS", "CUDA_GRAPH_EVENTS",
  "CUDA_GRAPH_NODE_EVENTS", "CUDA_UM_CPU_PAGE_FAULT_EVENTS", "CUDA_UM_GPU_PAGE_FAULT_EVENTS",
  "CUDA_GPU_MEMORY_POOL_EVENTS", NULL};

/* Export schema versions seen in real files (docs/formats.md): 2.9 up to 3.24. */
#define SCHEMA_KNOWN_MAJOR 3
#define SCHEMA_KNOWN_MINOR 24

/* nsys's remapped memory kinds (ENUM_CUDA_MEM_KIND, the values used when the table is absent). */
enum { MK_PAGEABLE, MK_PINNED, MK_DEVICE, MK_ARRAY, MK_MANAGED, MK_DEVICE_STATIC, MK_MANAGED_STATIC, MK_UNKNOWN, MK__COUNT };
static const char *const mk_names[MK__COUNT] = {"PAGEABLE", "PINNED",         "DEVICE",        "ARRAY",
                                                "MANAGED",  "DEVICE_STATIC", "MANAGED_STATIC", "UNKNOWN"};
static const char *const mk_labels[MK__COUNT] = {"Pageable", "Pinned",        "Device",         "Array",
                                                 "Managed",  "Device Static", "Managed Static", "Unknown"};
/* ENUM_CUDA_MEMCPY_OPER. */
enum { CK_UNKNOWN, CK_HTOD, CK_DTOH, CK_HTOA, CK_ATOH, CK_ATOA, CK_ATOD, CK_DTOA, CK_DTOD, CK_HTOH, CK_PTOP,
       CK_UVM_HTOD, CK_UVM_DTOH, CK_UVM_DTOD, CK__COUNT };
static const char *const ck_names[CK__COUNT] = {"UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH",     "ATOA",     "ATOD",
                                                "DTOA",    "DTOD", "HTOH", "PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD"};
static const char *const ck_labels[CK__COUNT] = {"", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
                                                 "DtoA", "DtoD", "HtoH", "PtoP", "HtoD", "DtoH", "DtoD"};
/* ENUM_CUDA_DEV_MEM_EVENT_OPER. */
enum { OP_ALLOC, OP_FREE, OP__COUNT };
static const char *const op_names[OP__COUNT] = {"ALLOCATION", "DEALLOCATION"};

#define ENUM_MAX 256 /* enum ids memplay maps; larger ones are unknown values */
#define BAD 255      /* an enum value memplay does not know */
#define CUPTI_INVALID 0xFFFFFFFFll
/* A device activity may appear to start slightly before its launch call (GPU timestamps are
 * converted to the CPU clock): a row without its call is given up for lost only this long
 * after the calls have passed its start. */
#define ORPHAN_SLACK_NS 1000000
/* The optimistic pass gives up when this many rows wait for a call: the calls' correlationIds
 * are far from their start order (nsys takes both as a call enters, so only a thread stopped in
 * between separates them), and the careful pass sorts the calls first. */
#define FAST_PENDING_MAX 65536
/* Calls remembered to drop duplicates (rows repeated with the same correlationId). */
#define DEDUP_WINDOW 65536

/* What a call is, from its name. */
enum { CALL_OTHER, CALL_SYNC_DEVICE, CALL_SYNC_STREAM, CALL_SYNC_EVENT };

/* ---- the export ------------------------------------------------------------------------------ */

typedef struct ntable {
  int present, usable;
  uint64_t have;    /* bit i: column tb_cols[t][i] exists */
  char *unknown;    /* unknown columns, comma-separated, or NULL */
} ntable;

typedef struct ngpu {
  int64_t id, total_memory;
  char *name;
} ngpu;

typedef struct nctx {
  int64_t pid, context, null_stream;
} nctx;

/* Counts per table and process, from the prescan. */
typedef struct tstat {
  int64_t rows, zero;     /* rows; rows without a correlation (NULL or 0) */
  int64_t last_corr, last_zero_start, last_all_start, last_mem_start, last_mem_corr;
  int corr_unsorted, zero_unsorted, all_unsorted, mem_unsorted;
} tstat;

typedef struct nlive {
  uint64_t bytes;
  int16_t device;
  uint8_t mk;
} nlive;

typedef struct npre { /* an allocation live when the capture began */
  uint64_t addr, bytes;
  int16_t device;
  uint8_t mk;
} npre;

typedef struct nproc {
  int64_t key; /* globalPid >> 24: the host id and the pid */
  tstat t[TB__COUNT];
  int64_t min_start;
  /* the prescan's replay of memory events, to find frees of allocations made before the capture */
  sim_map live;
  nlive *lv;
  size_t nlv, lvcap;
  uint32_t *lvfree;
  size_t nlvfree, lvfreecap;
  npre *pre;
  size_t npre, precap;
  size_t nfreed; /* entries of live marked freed */
  int sim_valid;
} nproc;

typedef struct nsys {
  import_ctx *ic;
  sqlite3 *db;
  const char *path;
  ntable tb[TB__COUNT];
  int64_t rt_class, drv_class;
  uint8_t mk_map[ENUM_MAX], ck_map[ENUM_MAX], op_map[ENUM_MAX];
  char *product_version, *schema_version;
  ngpu *gpus;
  size_t ngpus;
  nctx *ctxs;
  size_t nctxs;
  nproc *procs;
  size_t nprocs;
  sim_map proc_idx;
  int64_t other_class_rows;
  int64_t unassigned_rows; /* rows that name no process */
  int have_memory_table;
  /* the optimistic pass: one process, rows already in order, nothing freed that was not allocated;
   * a row that breaks this sets restart, and the careful pass (with the prescan) runs instead */
  int fast, restart;
  char why[160]; /* why the careful pass ran, for the trace's notes */
  int64_t fast_key;
  int fast_key_set;
  /* caches: nsys string id -> store string id (and call class) */
  sim_map kname, cname, cpname;
  sqlite3_stmt *str_q;
} nsys;

static int nfail(nsys *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int nfail(nsys *x, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  import_error(x->ic, "cannot import '%s': %s", x->path, msg);
  return -1;
}

/* An SQLite failure while reading table (at row rowid when >= 0). */
static int dbfail(nsys *x, const char *table, int64_t rowid, const char *sql) {
  char where[160];
  if (rowid >= 0) snprintf(where, sizeof where, "table %s, row %" PRId64, table, rowid);
  else snprintf(where, sizeof where, "table %s", table);
  import_error(x->ic, "cannot read '%s': %s: %s%s%.300s%s", x->path, where, sqlite3_errmsg(x->db), sql ? " (in: " : "",
               sql ? sql : "", sql ? ")" : "");
  return -1;
}

/* SQLite failed while stepping through table t (a corrupt file, a full disk for sorting): after
 * the row with rowid last_rowid, or after `rows` rows when the rowid is not known (-1). */
static int read_fail(nsys *x, int t, int64_t rows, int64_t last_rowid) {
  const char *tn = t >= 0 ? tb_names[t] : "?";
  if (!rows) import_error(x->ic, "cannot read '%s': table %s, first row: %s", x->path, tn, sqlite3_errmsg(x->db));
  else if (last_rowid >= 0)
    import_error(x->ic, "cannot read '%s': table %s, after row %" PRId64 ": %s", x->path, tn, last_rowid,
                 sqlite3_errmsg(x->db));
  else
    import_error(x->ic, "cannot read '%s': table %s, after %" PRId64 " rows: %s", x->path, tn, rows, sqlite3_errmsg(x->db));
  return -1;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s);
  char *d = sim_xmalloc(n + 1);
  memcpy(d, s, n + 1);
  return d;
}

/* Opens path as an immutable, read-only database (the URI escapes the path). */
static int open_export(const char *path, sqlite3 **db, char *err, size_t errlen) {
  size_t n = strlen(path);
  char *uri = sim_xmalloc(3 * n + 32);
  char *o = uri + sprintf(uri, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/-_.~", *p))
      *o++ = (char)*p;
    else o += sprintf(o, "%%%02X", *p);
  }
  strcpy(o, "?mode=ro&immutable=1");
  *db = NULL;
  int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
  free(uri);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "%s", *db ? sqlite3_errmsg(*db) : "out of memory");
    sqlite3_close(*db);
    *db = NULL;
    return -1;
  }
  /* Sorts spill to temporary files rather than growing in memory; a modest page cache. */
  sqlite3_exec(*db, "PRAGMA temp_store = FILE; PRAGMA cache_size = -8192; PRAGMA query_only = 1", NULL, NULL, NULL);
  return 0;
}

static int has_table(sqlite3 *db, const char *name) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1", -1, &q, NULL))
    return -1;
  sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Whether db looks like an nsys export: StringIds plus its metadata or CUPTI tables. */
static int looks_like_nsys(sqlite3 *db) {
  sqlite3_stmt *q;
  const char *sql = "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'StringIds'), "
                    "(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND (name IN ('META_DATA_EXPORT', "
                    "'EXPORT_META_DATA', 'TARGET_INFO_GPU') OR name LIKE 'CUPTI\\_ACTIVITY\\_KIND\\_%' ESCAPE '\\' "
                    "OR name = 'CUDA_GPU_MEMORY_USAGE_EVENTS'))";
  if (sqlite3_prepare_v2(db, sql, -1, &q, NULL)) return -1;
  int rc = sqlite3_step(q), yes = 0;
  if (rc == SQLITE_ROW) yes = sqlite3_column_int(q, 0) > 0 && sqlite3_column_int(q, 1) > 0;
  sqlite3_finalize(q);
  return rc == SQLITE_ROW ? yes : -1;
}

/* ---- schema discovery ------------------------------------------------------------------------- */

static int col_index(int t, const char *name) {
  for (int i = 0; tb_cols[t][i]; i++)
    if (!strcmp(tb_cols[t][i], name)) return i;
  return -1;
}

static int has_col(const nsys *x, int t, const char *name) {
  int i = col_index(t, name);
  return i >= 0 && (x->tb[t].have >> i & 1);
}

static void append_list(char **list, const char *item) {
  size_t a = *list ? strlen(*list) : 0, b = strlen(item);
  *list = sim_xrealloc(*list, a + b + 3);
  if (a) memcpy(*list + a, ", ", 2), a += 2;
  memcpy(*list + a, item, b + 1);
}

static int discover_table(nsys *x, int t) {
  ntable *tb = &x->tb[t];
  int e = has_table(x->db, tb_names[t]);
  if (e < 0) return dbfail(x, "sqlite_master", -1, NULL);
  if (!e) return 0;
  tb->present = 1;
  char sql[160];
  snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", tb_names[t]);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, tb_names[t], -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *c = (const char *)sqlite3_column_text(q, 1);
    int i = c ? col_index(t, c) : -1;
    if (i >= 0) tb->have |= UINT64_C(1) << i;
    else if (c) append_list(&tb->unknown, c);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return dbfail(x, tb_names[t], -1, sql);
  /* required columns */
  char req[160];
  snprintf(req, sizeof req, "%s", tb_required[t]);
  tb->usable = 1;
  char *save = NULL;
  for (char *tok = strtok_r(req, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    if (has_col(x, t, tok)) continue;
    import_warn(x->ic, "'%s': table %s has no column '%s': its rows are not imported", x->path, tb_names[t], tok);
    tb->usable = 0;
    break;
  }
  if (tb->unknown)
    import_warn(x->ic, "'%s': table %s has columns memplay does not know, left unread: %s", x->path, tb_names[t],
                tb->unknown);
  return 0;
}

/* Maps an ENUM table's ids to memplay's values by the names' suffixes; absent: the ids of docs §4.2. */
static int read_enum(nsys *x, const char *table, const char *marker, const char *const *names, int n, uint8_t *map) {
  memset(map, BAD, ENUM_MAX);
  int e = has_table(x->db, table);
  if (e < 0) return dbfail(x, "sqlite_master", -1, NULL);
  if (!e) {
    for (int i = 0; i < n; i++) map[i] = (uint8_t)i;
    return 0;
  }
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT id, name FROM %s", table);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, table, -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(q, 0);
    const char *nm = (const char *)sqlite3_column_text(q, 1);
    const char *suffix = nm ? strstr(nm, marker) : NULL;
    suffix = suffix ? suffix + strlen(marker) : nm;
    int v = -1;
    for (int i = 0; suffix && i < n; i++)
      if (!strcmp(suffix, names[i])) v = i;
    if (v >= 0 && id >= 0 && id < ENUM_MAX) map[id] = (uint8_t)v;
    else
      import_warn(x->ic, "'%s': %s value %" PRId64 " ('%s') is unknown to memplay: rows with it are counted, not imported",
                  x->path, table, id, nm ? nm : "");
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : dbfail(x, table, -1, sql);
}

static int read_event_classes(nsys *x) {
  x->rt_class = 0;
  x->drv_class = 1;
  int e = has_table(x->db, "ENUM_NSYS_EVENT_CLASS");
  if (e <= 0) return e < 0 ? dbfail(x, "sqlite_master", -1, NULL) : 0;
  const char *sql = "SELECT id, name FROM ENUM_NSYS_EVENT_CLASS WHERE name IN ('TRACE_PROCESS_EVENT_CUDA_RUNTIME', "
                    "'TRACE_PROCESS_EVENT_CUDA_DRIVER')";
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, "ENUM_NSYS_EVENT_CLASS", -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *nm = (const char *)sqlite3_column_text(q, 1);
    if (nm && strstr(nm, "RUNTIME")) x->rt_class = sqlite3_column_int64(q, 0);
    else x->drv_class = sqlite3_column_int64(q, 0);
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : dbfail(x, "ENUM_NSYS_EVENT_CLASS", -1, sql);
}

static int read_metadata(nsys *x) {
  const char *table = NULL;
  int e = has_table(x->db, "META_DATA_EXPORT");
  if (e < 0) return dbfail(x, "sqlite_master", -1, NULL);
  if (e) table = "META_DATA_EXPORT";
  else {
    e = has_table(x->db, "EXPORT_META_DATA");
    if (e < 0) return dbfail(x, "sqlite_master", -1, NULL);
    if (e) table = "EXPORT_META_DATA";
  }
  if (!table) return 0;
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT name, value FROM %s WHERE name IN ('EXPORT_PRODUCT_VERSION', 'EXPORT_SCHEMA_VERSION')", table);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, table, -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(q, 0), *v = (const char *)sqlite3_column_text(q, 1);
    if (!k || !v) continue;
    char **slot = !strcmp(k, "EXPORT_PRODUCT_VERSION") ? &x->product_version : &x->schema_version;
    free(*slot);
    *slot = xstrdup(v);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return dbfail(x, table, -1, sql);
  if (x->schema_version) {
    int major = 0, minor = 0;
    if (sscanf(x->schema_version, "%d.%d", &major, &minor) != 2 || major > SCHEMA_KNOWN_MAJOR ||
        (major == SCHEMA_KNOWN_MAJOR && minor > SCHEMA_KNOWN_MINOR))
      import_warn(x->ic,
                  "'%s': export schema %s (nsys %s) is newer than the versions memplay knows (up to %d.%d): importing "
                  "the tables and columns it recognises",
                  x->path, x->schema_version, x->product_version ? x->product_version : "?", SCHEMA_KNOWN_MAJOR,
                  SCHEMA_KNOWN_MINOR);
  }
  return 0;
}

static int read_gpus(nsys *x) {
  int e = has_table(x->db, "TARGET_INFO_GPU");
  if (e <= 0) return e < 0 ? dbfail(x, "sqlite_master", -1, NULL) : 0;
  const char *sql = "SELECT id, name, totalMemory FROM TARGET_INFO_GPU ORDER BY id";
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) {
    import_warn(x->ic, "'%s': table TARGET_INFO_GPU cannot be read (%s): the device is unknown", x->path,
                sqlite3_errmsg(x->db));
    return 0;
  }
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    sim_grow((void **)&x->gpus, &cap, x->ngpus + 1, sizeof *x->gpus);
    const char *nm = (const char *)sqlite3_column_text(q, 1);
    x->gpus[x->ngpus++] = (ngpu){sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 2), nm ? xstrdup(nm) : NULL};
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : dbfail(x, "TARGET_INFO_GPU", -1, sql);
}

static int read_contexts(nsys *x) {
  int e = has_table(x->db, "TARGET_INFO_CUDA_CONTEXT_INFO");
  if (e <= 0) return e < 0 ? dbfail(x, "sqlite_master", -1, NULL) : 0;
  const char *sql = "SELECT processId, contextId, nullStreamId FROM TARGET_INFO_CUDA_CONTEXT_INFO";
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return 0; /* an older layout: streams stay as recorded */
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    sim_grow((void **)&x->ctxs, &cap, x->nctxs + 1, sizeof *x->ctxs);
    x->ctxs[x->nctxs++] = (nctx){sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2)};
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : dbfail(x, "TARGET_INFO_CUDA_CONTEXT_INFO", -1, sql);
}

/* Warns about CUDA tables memplay neither reads nor knows to leave alone, when they hold rows. */
static int unknown_tables(nsys *x) {
  const char *sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE 'CUPTI\\_ACTIVITY\\_KIND\\_%' "
                    "ESCAPE '\\' OR name LIKE 'CUDA\\_%' ESCAPE '\\') ORDER BY name";
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, "sqlite_master", -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *nm = (const char *)sqlite3_column_text(q, 0);
    int known = 0;
    for (int t = 0; t < TB__COUNT && !known; t++) known = !strcmp(nm, tb_names[t]);
    for (int i = 0; tb_ignored[i] && !known; i++) known = !strcmp(nm, tb_ignored[i]);
    if (known) continue;
    char csql[200];
    snprintf(csql, sizeof csql, "SELECT count(*) FROM \"%s\"", nm);
    sqlite3_stmt *c;
    int64_t rows = 0;
    if (!sqlite3_prepare_v2(x->db, csql, -1, &c, NULL) && sqlite3_step(c) == SQLITE_ROW) rows = sqlite3_column_int64(c, 0);
    sqlite3_finalize(c);
    if (rows > 0)
      import_warn(x->ic, "'%s': table %s (%" PRId64 " rows) is not imported: memplay does not know it", x->path, nm, rows);
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : dbfail(x, "sqlite_master", -1, sql);
}

/* ---- names -------------------------------------------------------------------------------------- */

/* The text of nsys string id (a pointer valid until the next call), or NULL. */
static const char *nsys_string(nsys *x, int64_t id, int *err) {
  *err = 0;
  if (!x->str_q && sqlite3_prepare_v3(x->db, "SELECT value FROM StringIds WHERE id = ?1", -1, SQLITE_PREPARE_PERSISTENT,
                                      &x->str_q, NULL)) {
    *err = dbfail(x, "StringIds", -1, NULL);
    return NULL;
  }
  sqlite3_reset(x->str_q);
  sqlite3_bind_int64(x->str_q, 1, id);
  int rc = sqlite3_step(x->str_q);
  if (rc == SQLITE_ROW) return (const char *)sqlite3_column_text(x->str_q, 0);
  if (rc != SQLITE_DONE) *err = dbfail(x, "StringIds", id, NULL);
  return NULL;
}

static int64_t intern(nsys *x, const char *s, size_t n) {
  int64_t id = store_intern_string(x->ic->s, s, n);
  if (id < 0) import_error(x->ic, "cannot import '%s': %s", x->path, store_error(x->ic->s));
  return id;
}

/* A kernel's name: its store string id (0 when StringIds lacks it), or -1 on error. */
static int64_t kernel_name(nsys *x, int64_t sid) {
  uint64_t *v = sim_map_get(&x->kname, (uint64_t)sid);
  if (v) return (int64_t)*v;
  int err;
  const char *s = nsys_string(x, sid, &err);
  if (err) return -1;
  int64_t id = s ? intern(x, s, strlen(s)) : 0;
  if (id < 0) return -1;
  *sim_map_put(&x->kname, (uint64_t)sid, NULL) = (uint64_t)id;
  return id;
}

/* Runtime names carry the API version (cudaMalloc_v3020): memplay keeps the function's name. */
static size_t api_name_len(const char *s) {
  size_t n = strlen(s);
  if (strncmp(s, "cuda", 4)) return n;
  size_t i = n;
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
  if (i < n && i >= 2 && s[i - 1] == 'v' && s[i - 2] == '_') return i - 2;
  return n;
}

static int name_is(const char *s, size_t n, const char *want) { return strlen(want) == n && !memcmp(s, want, n); }

static int call_class(const char *s, size_t n) {
  /* per-thread default stream variants behave as the plain call */
  if (n > 5 && (!memcmp(s + n - 5, "_ptsz", 5) || !memcmp(s + n - 5, "_ptds", 5))) n -= 5;
  if (name_is(s, n, "cudaDeviceSynchronize") || name_is(s, n, "cudaThreadSynchronize") ||
      name_is(s, n, "cuCtxSynchronize"))
    return CALL_SYNC_DEVICE;
  if (name_is(s, n, "cudaStreamSynchronize") || name_is(s, n, "cuStreamSynchronize")) return CALL_SYNC_STREAM;
  if (name_is(s, n, "cudaEventSynchronize") || name_is(s, n, "cuEventSynchronize")) return CALL_SYNC_EVENT;
  return CALL_OTHER;
}

/* A call's name id in the store, its class and whether it is asynchronous, packed: id << 8 | async << 4 | class. */
static int64_t call_info(nsys *x, int64_t sid) {
  uint64_t *v = sim_map_get(&x->cname, (uint64_t)sid);
  if (v) return (int64_t)*v;
  int err;
  const char *s = nsys_string(x, sid, &err);
  if (err) return -1;
  int64_t packed = 0;
  if (s) {
    size_t n = api_name_len(s);
    int64_t id = intern(x, s, n);
    if (id < 0) return -1;
    int async = memmem(s, n, "Async", 5) != NULL;
    packed = id << 8 | (int64_t)async << 4 | call_class(s, n);
  }
  *sim_map_put(&x->cname, (uint64_t)sid, NULL) = (uint64_t)packed;
  return packed;
}

/* "Memcpy HtoD (Pinned -> Device)", as the PyTorch profiler names copies; "Memset (Device)". */
static int64_t copy_name(nsys *x, int memset, int ck, int sk, int dk) {
  uint64_t key = (uint64_t)memset << 24 | (uint64_t)(ck & 255) << 16 | (uint64_t)(sk & 255) << 8 | (uint64_t)(dk & 255);
  uint64_t *v = sim_map_get(&x->cpname, key);
  if (v) return (int64_t)*v;
  char buf[96];
  if (memset) snprintf(buf, sizeof buf, "Memset (%s)", dk < MK__COUNT ? mk_labels[dk] : "Unknown");
  else {
    int n = snprintf(buf, sizeof buf, "%sMemcpy %s", ck >= CK_UVM_HTOD && ck <= CK_UVM_DTOD ? "Unified " : "",
                     ck > 0 && ck < CK__COUNT ? ck_labels[ck] : "Unknown");
    if (sk < MK__COUNT && dk < MK__COUNT)
      snprintf(buf + n, sizeof buf - (size_t)n, " (%s -> %s)", mk_labels[sk], mk_labels[dk]);
  }
  int64_t id = intern(x, buf, strlen(buf));
  if (id < 0) return -1;
  *sim_map_put(&x->cpname, key, NULL) = (uint64_t)id;
  return id;
}

/* ---- processes and the prescan ------------------------------------------------------------------ */

static void proc_init(nproc *p, int64_t key) {
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
  proc_init(&x->procs[x->nprocs], key);
  *slot = x->nprocs;
  return &x->procs[x->nprocs++];
}

static void proc_release(nproc *p) {
  sim_map_release(&p->live);
  free(p->lv);
  free(p->lvfree);
  free(p->pre);
}

/* The process key column of a table: globalPid, or globalTid for calls. */
static const char *pid_col(int t) { return t == TB_RUNTIME ? "globalTid" : "globalPid"; }

/* Memory kinds: what memplay makes of them. */
enum { MC_DEVICE, MC_MANAGED, MC_PINNED, MC_PAGEABLE, MC_STATIC, MC_BAD };
static int mem_class(int mk) {
  switch (mk) {
  case MK_DEVICE:
  case MK_ARRAY:
  case MK_UNKNOWN: return MC_DEVICE;
  case MK_MANAGED: return MC_MANAGED;
  case MK_PINNED: return MC_PINNED;
  case MK_PAGEABLE: return MC_PAGEABLE;
  case MK_DEVICE_STATIC:
  case MK_MANAGED_STATIC: return MC_STATIC;
  default: return MC_BAD;
  }
}

/* The live set of a process's allocations (address -> size, kind, device). */
static nlive *live_find(nproc *p, uint64_t addr) {
  uint64_t *v = sim_map_get(&p->live, addr);
  return v ? &p->lv[*v] : NULL;
}

static void live_add(nproc *p, uint64_t addr, uint64_t bytes, int device, int mk) {
  uint32_t i;
  if (p->nlvfree) i = p->lvfree[--p->nlvfree];
  else {
    sim_grow((void **)&p->lv, &p->lvcap, p->nlv + 1, sizeof *p->lv);
    i = (uint32_t)p->nlv++;
  }
  p->lv[i] = (nlive){bytes, (int16_t)device, (uint8_t)mk};
  *sim_map_put(&p->live, addr, NULL) = i;
}

static void live_del(nproc *p, uint64_t addr) {
  uint64_t i;
  if (!sim_map_del(&p->live, addr, &i)) return;
  sim_grow((void **)&p->lvfree, &p->lvfreecap, p->nlvfree + 1, sizeof *p->lvfree);
  p->lvfree[p->nlvfree++] = (uint32_t)i;
}

static void live_clear(nproc *p) {
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
  nlive *l = live_find(p, addr);
  if (op == OP_ALLOC) {
    if (l && l->mk == MK_FREED) p->nfreed--;
    if (l) live_del(p, addr);
    live_add(p, addr, bytes, device, mk);
  } else if (op == OP_FREE) {
    if (l && l->mk != MK_FREED) {
      l->mk = MK_FREED;
      if (++p->nfreed > PRESIM_FREED_MAX) {
        uint64_t k, v;
        size_t n = 0;
        uint64_t *gone = sim_xmalloc(p->nfreed * sizeof *gone);
        for (size_t it = 0; sim_map_next(&p->live, &it, &k, &v);)
          if (p->lv[v].mk == MK_FREED) gone[n++] = k;
        for (size_t i = 0; i < n; i++) live_del(p, gone[i]);
        free(gone);
        p->nfreed = 0;
      }
    } else if (!l) {
      sim_grow((void **)&p->pre, &p->precap, p->npre + 1, sizeof *p->pre);
      p->pre[p->npre++] = (npre){addr, bytes, (int16_t)device, (uint8_t)mk};
      live_add(p, addr, bytes, device, MK_FREED);
      p->nfreed++;
    }
  }
}

/* An integer column: 1 with *v, 0 when NULL, -1 for any other type. (One sqlite3_column_value
 * per column: the sqlite3_column_* calls each take the connection's mutex.) */
static int get_int(sqlite3_stmt *q, int i, int64_t *v) {
  sqlite3_value *x = sqlite3_column_value(q, i);
  int ty = sqlite3_value_type(x);
  if (ty == SQLITE_INTEGER) {
    *v = sqlite3_value_int64(x);
    return 1;
  }
  return ty == SQLITE_NULL ? 0 : -1;
}

static int bad_value(nsys *x, int t, int64_t rowid, sqlite3_stmt *q, int i, const char *col) {
  const char *txt = (const char *)sqlite3_column_text(q, i);
  return nfail(x, "table %s, row %" PRId64 ": column %s is '%.40s', not an integer", tb_names[t], rowid, col,
               txt ? txt : "");
}

static void sorted_step(int64_t *last, int64_t v, int *unsorted) {
  if (v < *last) *unsorted = 1;
  *last = v;
}

/* Reads every row of table t once: processes, counts, orders, and (for memory events) the
 * replay that finds allocations older than the capture. Columns the table lacks are not read. */
static int prescan_table(nsys *x, int t) {
  int mem = t == TB_MEMORY, rt = t == TB_RUNTIME;
  /* result columns: start, rowid, then pid, correlationId, eventClass, deviceId, address, bytes, memKind, op */
  static const char *const names[] = {"start", "rowid", NULL, "correlationId", "eventClass", "deviceId",
                                      "address", "bytes", "memKind", "memoryOperationType"};
  enum { P_START, P_ROWID, P_PID, P_CORR, P_CLASS, P_DEV, P_ADDR, P_BYTES, P_MK, P_OP, P__N };
  int col[P__N];
  char sql[512];
  size_t l = (size_t)snprintf(sql, sizeof sql, "SELECT start, rowid");
  int n = 2;
  col[P_START] = 0;
  col[P_ROWID] = 1;
  for (int i = P_PID; i < P__N; i++) {
    const char *c = i == P_PID ? pid_col(t) : names[i];
    int want = (i == P_CLASS ? rt : i >= P_DEV ? mem : 1) && has_col(x, t, c);
    col[i] = want ? n++ : -1;
    if (want) l += (size_t)snprintf(sql + l, sizeof sql - l, i == P_PID ? ", %s >> 24" : ", %s", c);
  }
  snprintf(sql + l, sizeof sql - l, " FROM %s", tb_names[t]);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, tb_names[t], -1, sql);
  int rc;
  nproc *p = NULL;
  int64_t pkey = INT64_MIN, nread = 0;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    nread++;
    int64_t v[P__N] = {0, 0, -1, 0, 0, -1, 0, 0, 0, 0};
    for (int i = 0; i < P__N; i++) {
      if (i == P_ROWID || col[i] < 0) continue;
      int g = get_int(q, col[i], &v[i]);
      if (g > 0 || (g == 0 && (i == P_PID || i == P_CORR || i == P_CLASS || i == P_DEV))) continue;
      int64_t rowid = sqlite3_column_int64(q, 1);
      const char *cn = i == P_PID ? pid_col(t) : names[i];
      int r = g == 0 ? nfail(x, "table %s, row %" PRId64 ": column %s is NULL", tb_names[t], rowid, cn)
                     : bad_value(x, t, rowid, q, col[i], cn);
      sqlite3_finalize(q);
      return r;
    }
    int64_t key = v[P_PID], start = v[P_START], corr = v[P_CORR];
    if (rt && col[P_CLASS] >= 0 && v[P_CLASS] != x->rt_class && v[P_CLASS] != x->drv_class) {
      x->other_class_rows++;
      continue;
    }
    if (!p || key != pkey) {
      p = proc_get(x, key);
      pkey = key;
    }
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
    if (mem) {
      /* memory events replay in (start, correlation) order */
      if (start < s->last_mem_start || (start == s->last_mem_start && corr < s->last_mem_corr)) s->mem_unsorted = 1;
      s->last_mem_start = start;
      s->last_mem_corr = corr;
      if (v[P_BYTES] < 0) {
        int64_t rowid = sqlite3_column_int64(q, 1);
        sqlite3_finalize(q);
        return nfail(x, "table %s, row %" PRId64 ": bytes is negative (%" PRId64 ")", tb_names[t], rowid, v[P_BYTES]);
      }
      if (p->sim_valid && !s->mem_unsorted) {
        int64_t mk = v[P_MK], op = v[P_OP];
        int m = mk >= 0 && mk < ENUM_MAX ? x->mk_map[mk] : BAD, o = op >= 0 && op < ENUM_MAX ? x->op_map[op] : BAD;
        if (m != BAD && o != BAD) presim_step(p, (uint64_t)v[P_ADDR], (uint64_t)v[P_BYTES], (int)v[P_DEV], m, o);
      }
    }
  }
  if (rc != SQLITE_DONE) {
    read_fail(x, t, nread, -1);
    sqlite3_finalize(q);
    return -1;
  }
  sqlite3_finalize(q);
  return 0;
}

/* When a process's memory events were not in time order, its replay is redone sorted. */
static int presim_sorted(nsys *x, nproc *p, int several) {
  live_clear(p);
  p->npre = 0;
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT address, bytes, memKind, memoryOperationType, deviceId FROM %s %s ORDER BY start, "
           "CASE WHEN correlationId > 0 THEN correlationId ELSE 0 END, rowid",
           tb_names[TB_MEMORY], several ? "WHERE globalPid >= ?1 AND globalPid < ?2" : "");
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return dbfail(x, tb_names[TB_MEMORY], -1, sql);
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
  return rc == SQLITE_DONE ? 0 : dbfail(x, tb_names[TB_MEMORY], -1, sql);
}

/* ---- cursors -------------------------------------------------------------------------------------- */

/* One row of an item table, as the merge uses it. */
typedef struct nitem {
  int64_t start, end, corr, rowid;
  int64_t device, stream, context;
  int64_t v[6]; /* per table: see item_select */
  uint32_t next; /* pending list link (pool index + 1) */
  uint32_t gen;
  uint8_t table, matched;
} nitem;

typedef struct ncursor {
  sqlite3_stmt *q;
  int table, has;
  int col[14]; /* where start, end, correlationId, rowid, deviceId, streamId, contextId, v[0..5] and
                  the process key are in the result, or -1 when not read */
  int mode;     /* CUR_* */
  int64_t rows; /* rows read */
  int64_t last, last_start; /* the optimistic pass: the order keys of the previous row */
  nitem cur;
} ncursor;

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
  const char *expr = has_col(x, t, col) ? col : NULL;
  if (t == TB_KERNEL && !strcmp(col, "demangledName")) {
    int d = has_col(x, t, "demangledName"), s = has_col(x, t, "shortName");
    expr = d && s ? "coalesce(demangledName, shortName)" : d ? "demangledName" : s ? "shortName" : NULL;
  }
  if (!expr) return -1;
  size_t l = strlen(sql);
  snprintf(sql + l, n - l, "%s%s", *ncols ? ", " : "", expr);
  return (*ncols)++;
}

/* CUR_MIXED, the optimistic pass's: every row in file order, correlated rows in correlationId
 * order and all of them in start order (as nsys writes them), so that the uncorrelated rows can
 * be taken as they come, with no cursor of their own. */
enum { CUR_CORR, CUR_ZERO, CUR_ALL, CUR_MIXED };

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
    c->col[13] = has_col(x, t, "globalPid") ? ncols++ : -1;
    l += (size_t)snprintf(sql + l, sizeof sql - l, "%s FROM %s", c->col[13] >= 0 ? ", globalPid >> 24" : "", tb_names[t]);
    if (mode == CUR_CORR) snprintf(sql + l, sizeof sql - l, " WHERE correlationId > 0");
    else if (mode == CUR_ZERO) snprintf(sql + l, sizeof sql - l, " WHERE correlationId IS NULL OR correlationId <= 0");
    if (sqlite3_prepare_v2(x->db, sql, -1, &c->q, NULL)) return dbfail(x, tb_names[t], -1, sql);
    return 0;
  }
  l += (size_t)snprintf(sql + l, sizeof sql - l, " FROM %s", tb_names[t]);
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
  if (sqlite3_prepare_v2(x->db, sql, -1, &c->q, NULL)) return dbfail(x, tb_names[t], -1, sql);
  if (several) {
    sqlite3_bind_int64(c->q, 1, p->key << 24);
    sqlite3_bind_int64(c->q, 2, (p->key + 1) << 24);
  }
  return 0;
}

static void cursor_close(ncursor *c) {
  sqlite3_finalize(c->q);
  c->q = NULL;
  c->has = 0;
}

/* Steps a cursor: 1 with a row in c->cur, 0 at the end, -1 on error. */
static int cursor_next(nsys *x, ncursor *c) {
  c->has = 0;
  if (!c->q) return 0;
  int rc = sqlite3_step(c->q);
  if (rc == SQLITE_DONE) {
    cursor_close(c);
    return 0;
  }
  int t = c->table;
  if (rc != SQLITE_ROW) return read_fail(x, t, c->rows, c->cur.rowid);
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
    int g = c->col[i] >= 0 ? get_int(q, c->col[i], &v) : 0;
    if (g < 0) return bad_value(x, t, it->rowid, q, c->col[i], i < 7 ? fixed[i] : item_vcols[t][i - 7]);
    if (i < 7) {
      if (g) *dst[i] = v;
      else if (i == 0) return nfail(x, "table %s, row %" PRId64 ": column start is NULL", tb_names[t], it->rowid);
      else if (i == 1) it->end = it->start;
    } else {
      /* the columns an event cannot do without: memory: address, bytes, kind, operation; copies: bytes, kind */
      static const unsigned required[TB_ITEMS] = {15, 0, 3, 1, 0};
      if (!g && c->col[i] >= 0 && (required[t] >> (i - 7) & 1))
        return nfail(x, "table %s, row %" PRId64 ": column %s is NULL", tb_names[t], it->rowid, item_vcols[t][i - 7]);
      it->v[i - 7] = g ? v : -1;
    }
  }
  if (it->corr < 0) it->corr = 0;
  if (t != TB_KERNEL && t != TB_SYNC && it->v[t == TB_MEMORY ? 1 : 0] < 0)
    return nfail(x, "table %s, row %" PRId64 ": bytes is negative (%" PRId64 ")", tb_names[t], it->rowid,
                 it->v[t == TB_MEMORY ? 1 : 0]);
  if (x->fast) {
    int64_t key = -1;
    if (c->col[13] >= 0 && get_int(q, c->col[13], &key) < 0)
      return bad_value(x, t, it->rowid, q, c->col[13], "globalPid");
    if (c->col[13] >= 0 && !fast_key_ok(x, key)) return -1;
    int by_corr = c->mode == CUR_CORR || (c->mode == CUR_MIXED && it->corr > 0);
    int64_t order = by_corr ? it->corr : it->start;
    if (order < c->last || (c->mode == CUR_MIXED && it->start < c->last_start)) {
      x->restart = 1;
      snprintf(x->why, sizeof x->why, "%s is not in %s order", tb_names[t], by_corr ? "correlationId" : "start");
      return -1;
    }
    if (by_corr) c->last = order;
    c->last_start = it->start;
  }
  c->has = 1;
  return 1;
}

/* ---- the merge ----------------------------------------------------------------------------------- */

/* An event waiting in the output heap: ordered by time, then correlation, own start, table, row. */
typedef struct nout {
  int64_t ts, corr, own, rowid;
  int table, synthetic; /* synthetic: a free memplay infers, not a row */
  sim_event ev;
} nout;

typedef struct npend { /* a pending row's place in the by-start heap */
  int64_t own;
  uint32_t idx, gen;
} npend;

typedef struct zq {
  nitem *rows;
  size_t head, n, cap;
} zq;

typedef struct merge {
  nsys *x;
  nproc *p;
  store_writer *w;
  int several;
  ncursor rt, items[TB_ITEMS], zeros[TB_ITEMS];
  int all_mode; /* no calls: every row timed by itself */
  /* rows pulled by correlation, waiting for their call */
  nitem *pool;
  size_t npool, poolcap;
  uint32_t *poolfree;
  size_t npoolfree, poolfreecap;
  sim_map pending; /* correlationId -> pool index + 1 of the first row */
  npend *ph;       /* min-heap by own start of pending rows (lazy deletion) */
  size_t nph, phcap;
  size_t unmatched;
  /* output */
  nout *oh;
  size_t noh, ohcap;
  int64_t last_ts;
  /* uncorrelated rows read on the way by the optimistic pass, per table, in start order */
  zq zq[TB_ITEMS];
  /* the rows of the current call that came straight from the cursors */
  nitem *direct;
  size_t ndirect, directcap;
  /* a call's rows, gathered */
  nout *batch;
  size_t nbatch, batchcap;
  /* duplicate calls: the last calls, looked up only once a correlationId has gone backwards */
  int dedup;
  int64_t *ring; /* DEDUP_WINDOW pairs (correlationId, name) */
  size_t ringpos;
  int64_t max_corr;
  sim_map seen;
  int64_t prev_start, other_class;
  /* results */
  int64_t counts[16];
  int64_t static_count, static_bytes, pool_allocs, plain_allocs;
  uint64_t devmask_used;
} merge;

enum { N_STATIC, N_PREEXISTING, N_UNMATCHED_FREE, N_REALLOC, N_SIZE_MISMATCH, N_ORPHAN, N_DUP_CALL, N_BAD_ENUM,
       N_SYNC_NO_STREAM, N_NEG_DUR, N_MEMORY_EVENTS, N_UNCORRELATED, N_BATCHED_COPIES, N__COUNT };

static int out_less(const nout *a, const nout *b) {
  if (a->ts != b->ts) return a->ts < b->ts;
  if (a->corr != b->corr) return a->corr < b->corr;
  if (a->own != b->own) return a->own < b->own;
  if (a->table != b->table) return a->table < b->table;
  return a->rowid < b->rowid;
}

static void out_push(merge *m, const nout *o) {
  sim_grow((void **)&m->oh, &m->ohcap, m->noh + 1, sizeof *m->oh);
  size_t i = m->noh++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!out_less(o, &m->oh[up])) break;
    m->oh[i] = m->oh[up];
    i = up;
  }
  m->oh[i] = *o;
}

static void out_pop(merge *m, nout *o) {
  *o = m->oh[0];
  nout last = m->oh[--m->noh];
  size_t i = 0, n = m->noh;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, s = i;
    const nout *best = &last;
    if (l < n && out_less(&m->oh[l], best)) s = l, best = &m->oh[l];
    if (r < n && out_less(&m->oh[r], best)) s = r;
    if (s == i) break;
    m->oh[i] = m->oh[s];
    i = s;
  }
  if (n) m->oh[i] = last;
}

/* Writes out every waiting event earlier than w. */
static int out_flush(merge *m, int64_t w) {
  while (m->noh && m->oh[0].ts < w) {
    nout o;
    out_pop(m, &o);
    if (o.ev.ts < m->last_ts) o.ev.ts = m->last_ts; /* never happens for rows with their call; kept monotonic */
    m->last_ts = o.ev.ts;
    if (store_writer_event(m->w, &o.ev)) {
      import_error(m->x->ic, "cannot import '%s': %s", m->x->path, store_error(m->x->ic->s));
      return -1;
    }
  }
  return 0;
}

static void ph_push(merge *m, npend e) {
  sim_grow((void **)&m->ph, &m->phcap, m->nph + 1, sizeof *m->ph);
  size_t i = m->nph++;
  while (i > 0 && e.own < m->ph[(i - 1) / 2].own) {
    m->ph[i] = m->ph[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  m->ph[i] = e;
}

static void ph_pop(merge *m) {
  npend last = m->ph[--m->nph];
  size_t i = 0, n = m->nph;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, s = i;
    int64_t best = last.own;
    if (l < n && m->ph[l].own < best) s = l, best = m->ph[l].own;
    if (r < n && m->ph[r].own < best) s = r;
    if (s == i) break;
    m->ph[i] = m->ph[s];
    i = s;
  }
  if (n) m->ph[i] = last;
}

static int ph_stale(const merge *m, const npend *e) {
  const nitem *it = &m->pool[e->idx];
  return it->gen != e->gen || it->matched;
}

/* Earliest own start of a row still waiting for its call (INT64_MAX: none). */
static int64_t pending_min(merge *m) {
  while (m->nph && ph_stale(m, &m->ph[0])) ph_pop(m);
  return m->nph ? m->ph[0].own : INT64_MAX;
}

static void pend_add(merge *m, const nitem *src) {
  uint32_t i;
  if (m->npoolfree) i = m->poolfree[--m->npoolfree];
  else {
    sim_grow((void **)&m->pool, &m->poolcap, m->npool + 1, sizeof *m->pool);
    i = (uint32_t)m->npool++;
    m->pool[i].gen = 0;
  }
  uint32_t gen = m->pool[i].gen + 1;
  m->pool[i] = *src;
  m->pool[i].gen = gen;
  m->pool[i].matched = 0;
  m->pool[i].next = 0;
  /* append to the correlation's list, keeping cursor order */
  int existed;
  uint64_t *head = sim_map_put(&m->pending, (uint64_t)src->corr, &existed);
  if (!existed) *head = i + 1;
  else {
    uint32_t j = (uint32_t)*head - 1;
    while (m->pool[j].next) j = m->pool[j].next - 1;
    m->pool[j].next = i + 1;
  }
  m->unmatched++;
  ph_push(m, (npend){src->start, i, gen});
}

static void pend_free(merge *m, uint32_t i) {
  m->pool[i].matched = 1;
  m->pool[i].gen++;
  sim_grow((void **)&m->poolfree, &m->poolfreecap, m->npoolfree + 1, sizeof *m->poolfree);
  m->poolfree[m->npoolfree++] = i;
  m->unmatched--;
}

/* The stream as memplay records it: the context's NULL stream is the default stream, 0. */
static int64_t map_stream(const merge *m, int64_t stream, int64_t context) {
  if (stream < 0 || stream == CUPTI_INVALID) return 0;
  int64_t pid = (m->x->fast ? m->x->fast_key : m->p->key) & 0xFFFFFF;
  for (size_t i = 0; i < m->x->nctxs; i++)
    if (m->x->ctxs[i].context == context && m->x->ctxs[i].pid == pid && m->x->ctxs[i].null_stream == stream) return 0;
  return stream;
}

static int16_t dev16(int64_t d) { return (int16_t)(d < 0 || d > 32767 ? -1 : d); }

static void note_device(merge *m, int64_t d) {
  if (d >= 0 && d < 64) m->devmask_used |= UINT64_C(1) << d;
}

static void batch_add(merge *m, const nout *o) {
  sim_grow((void **)&m->batch, &m->batchcap, m->nbatch + 1, sizeof *m->batch);
  m->batch[m->nbatch++] = *o;
}

/* A memory event: the allocation or free it records, matched by address within the process
 * (unified addressing makes an address unique across the process's devices). */
static int memory_event(merge *m, const nitem *it, int64_t ts, int64_t name, int64_t corr) {
  nsys *x = m->x;
  int mk = it->v[2] >= 0 && it->v[2] < ENUM_MAX ? x->mk_map[it->v[2]] : BAD;
  int op = it->v[3] >= 0 && it->v[3] < ENUM_MAX ? x->op_map[it->v[3]] : BAD;
  m->counts[N_MEMORY_EVENTS]++;
  if (mk == BAD || op == BAD) {
    m->counts[N_BAD_ENUM]++;
    return 0;
  }
  uint64_t addr = (uint64_t)it->v[0], bytes = (uint64_t)(it->v[1] < 0 ? 0 : it->v[1]);
  int mc = mem_class(mk);
  nout o = {.ts = ts, .corr = corr, .own = it->start, .rowid = it->rowid, .table = TB_MEMORY};
  sim_event_init(&o.ev);
  o.ev.ts = ts;
  o.ev.addr = addr;
  o.ev.name = name;
  o.ev.flags = SIM_EVF_DEVICE_API;
  nlive *l = live_find(m->p, addr);
  if (op == OP_ALLOC) {
    if (l) {
      /* the driver handed out a live address again: its free was not recorded */
      m->counts[N_REALLOC]++;
      if (mem_class(l->mk) != MC_STATIC) {
        nout f = o;
        int host = mem_class(l->mk) == MC_PINNED || mem_class(l->mk) == MC_PAGEABLE;
        f.ev.kind = host ? SIM_EV_HOST_FREE : SIM_EV_FREE;
        f.ev.size = l->bytes;
        f.ev.device = host ? -1 : l->device;
        f.ev.mem = host ? (mem_class(l->mk) == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE)
                        : (mem_class(l->mk) == MC_MANAGED ? SIM_MEM_MANAGED : SIM_MEM_DEVICE);
        f.ev.name = 0;
        f.synthetic = 1;
        f.rowid--; /* just before the allocation */
        batch_add(m, &f);
      }
      live_del(m->p, addr);
    }
    live_add(m->p, addr, bytes, (int)it->device, mk);
    if (mc == MC_STATIC) {
      m->static_count++;
      m->static_bytes += (int64_t)bytes;
      return 0;
    }
    o.ev.size = bytes;
    if (mc == MC_PINNED || mc == MC_PAGEABLE) {
      o.ev.kind = SIM_EV_HOST_ALLOC;
      o.ev.device = -1;
      o.ev.mem = mc == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
    } else {
      o.ev.kind = SIM_EV_ALLOC;
      o.ev.device = dev16(it->device);
      o.ev.stream = map_stream(m, it->stream, it->context);
      o.ev.mem = mc == MC_MANAGED ? SIM_MEM_MANAGED : mk == MK_UNKNOWN ? SIM_MEM_UNKNOWN : SIM_MEM_DEVICE;
      note_device(m, it->device);
      if (it->v[4] > 0) m->pool_allocs++;
      else m->plain_allocs++;
    }
  } else {
    if (!l) {
      if (x->fast) { /* perhaps allocated before the capture: the careful pass finds out */
        x->restart = 1;
        snprintf(x->why, sizeof x->why, "a free of an address with nothing live (allocated before the capture?)");
        return -1;
      }
      m->counts[N_UNMATCHED_FREE]++;
      return 0;
    }
    int lc = mem_class(l->mk);
    if (l->bytes != bytes && lc != MC_STATIC) m->counts[N_SIZE_MISMATCH]++;
    o.ev.size = l->bytes;
    int16_t ldev = l->device;
    int l_unknown = l->mk == MK_UNKNOWN;
    live_del(m->p, addr);
    if (lc == MC_STATIC) return 0;
    if (lc == MC_PINNED || lc == MC_PAGEABLE) {
      o.ev.kind = SIM_EV_HOST_FREE;
      o.ev.device = -1;
      o.ev.mem = lc == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
    } else {
      o.ev.kind = SIM_EV_FREE;
      o.ev.device = ldev;
      o.ev.stream = map_stream(m, it->stream, it->context);
      o.ev.mem = lc == MC_MANAGED ? SIM_MEM_MANAGED : l_unknown ? SIM_MEM_UNKNOWN : SIM_MEM_DEVICE;
    }
  }
  batch_add(m, &o);
  return 0;
}

static int copy_dir(int ck, int sk, int dk) {
  switch (ck) {
  case CK_HTOD:
  case CK_HTOA:
  case CK_UVM_HTOD: return SIM_COPY_H2D;
  case CK_DTOH:
  case CK_ATOH:
  case CK_UVM_DTOH: return SIM_COPY_D2H;
  case CK_DTOD:
  case CK_DTOA:
  case CK_ATOD:
  case CK_ATOA:
  case CK_UVM_DTOD: return SIM_COPY_D2D;
  case CK_HTOH: return SIM_COPY_H2H;
  case CK_PTOP: return SIM_COPY_P2P;
  default: break;
  }
  int sh = sk == MK_PAGEABLE || sk == MK_PINNED, dh = dk == MK_PAGEABLE || dk == MK_PINNED;
  if (sk >= MK__COUNT || dk >= MK__COUNT || sk == MK_UNKNOWN || dk == MK_UNKNOWN) return SIM_COPY_NONE;
  return sh && dh ? SIM_COPY_H2H : sh ? SIM_COPY_H2D : dh ? SIM_COPY_D2H : SIM_COPY_D2D;
}

static int sim_mem_of(int mk) {
  switch (mk) {
  case MK_PAGEABLE: return SIM_MEM_PAGEABLE;
  case MK_PINNED: return SIM_MEM_PINNED;
  case MK_DEVICE:
  case MK_ARRAY:
  case MK_DEVICE_STATIC: return SIM_MEM_DEVICE;
  case MK_MANAGED:
  case MK_MANAGED_STATIC: return SIM_MEM_MANAGED;
  default: return SIM_MEM_UNKNOWN;
  }
}

/* Turns a device activity into its event at host time ts. */
static int activity_event(merge *m, const nitem *it, int64_t ts, int64_t corr, int async) {
  nsys *x = m->x;
  nout o = {.ts = ts, .corr = corr, .own = it->start, .rowid = it->rowid, .table = it->table};
  sim_event *ev = &o.ev;
  sim_event_init(ev);
  ev->ts = ts;
  ev->dev_ts = it->start;
  ev->dur = it->end - it->start;
  if (ev->dur < 0) {
    m->counts[N_NEG_DUR]++;
    ev->dur = 0;
  }
  ev->device = dev16(it->device);
  ev->stream = map_stream(m, it->stream, it->context);
  note_device(m, it->device);
  if (it->table == TB_KERNEL) {
    ev->kind = SIM_EV_KERNEL;
    ev->name = it->v[0] >= 0 ? kernel_name(x, it->v[0]) : 0;
    if (ev->name < 0) return -1;
  } else if (it->table == TB_MEMCPY) {
    int ck = it->v[1] >= 0 && it->v[1] < ENUM_MAX ? x->ck_map[it->v[1]] : BAD;
    int sk = it->v[2] >= 0 && it->v[2] < ENUM_MAX ? x->mk_map[it->v[2]] : BAD;
    int dk = it->v[3] >= 0 && it->v[3] < ENUM_MAX ? x->mk_map[it->v[3]] : BAD;
    if (ck == BAD) {
      m->counts[N_BAD_ENUM]++;
      ck = CK_UNKNOWN;
    }
    ev->kind = SIM_EV_MEMCPY;
    ev->size = (uint64_t)(it->v[0] < 0 ? 0 : it->v[0]);
    ev->dir = (uint8_t)copy_dir(ck, sk, dk);
    int host = ev->dir == SIM_COPY_H2D || ev->dir == SIM_COPY_H2H ? sk : ev->dir == SIM_COPY_D2H ? dk : -1;
    ev->mem = ck >= CK_UVM_HTOD && ck <= CK_UVM_DTOD ? SIM_MEM_MANAGED
              : host >= 0                           ? (uint8_t)sim_mem_of(host)
              : ev->dir == SIM_COPY_NONE            ? SIM_MEM_UNKNOWN
                                                    : SIM_MEM_DEVICE;
    if (it->v[4] > 0) ev->addr = (uint64_t)it->v[4];
    if (it->v[5] > 1) m->counts[N_BATCHED_COPIES]++;
    ev->name = copy_name(x, 0, ck, sk, dk);
    if (ev->name < 0) return -1;
    if (async) ev->flags |= SIM_EVF_ASYNC;
  } else {
    int mk = it->v[1] >= 0 && it->v[1] < ENUM_MAX ? x->mk_map[it->v[1]] : MK_DEVICE;
    if (mk == BAD) mk = MK_UNKNOWN;
    ev->kind = SIM_EV_MEMSET;
    ev->size = (uint64_t)(it->v[0] < 0 ? 0 : it->v[0]);
    ev->mem = (uint8_t)sim_mem_of(mk);
    ev->name = copy_name(x, 1, 0, 0, mk);
    if (ev->name < 0) return -1;
    if (async) ev->flags |= SIM_EVF_ASYNC;
  }
  batch_add(m, &o);
  return 0;
}

/* A row without its call: timed by itself (ts), found at correlation corr. */
static int lone_row(merge *m, const nitem *it, int64_t ts) {
  m->nbatch = 0;
  if (it->table == TB_SYNC) return 0; /* says only which stream a call waited for */
  int rc = it->table == TB_MEMORY ? memory_event(m, it, ts, 0, it->corr > 0 ? it->corr : 0)
                                  : activity_event(m, it, ts, it->corr > 0 ? it->corr : 0, 0);
  for (size_t i = 0; i < m->nbatch && !rc; i++) out_push(m, &m->batch[i]);
  m->nbatch = 0;
  return rc;
}

/* A row without a correlation, timed by itself. */
static int uncorrelated(merge *m, const nitem *it) {
  size_t before = m->noh;
  if (lone_row(m, it, it->start < m->last_ts ? m->last_ts : it->start)) return -1;
  if (m->noh > before && !m->all_mode) m->counts[N_UNCORRELATED]++;
  return 0;
}

/* Pulls every correlated row up to correlationId upto: those of upto itself (the common case:
 * ids grow with time) straight into m->direct, earlier ones into the pending map. */
static int pull(merge *m, int64_t upto) {
  m->ndirect = 0;
  for (int t = 0; t < TB_ITEMS; t++) {
    ncursor *c = &m->items[t];
    while (c->has && c->cur.corr <= upto) {
      if (c->cur.corr == 0) {
        /* an uncorrelated row met on the way (CUR_MIXED): it waits for its time, in order */
        zq *z = &m->zq[t];
        if (z->head && z->head * 2 >= z->n) { /* keep the waiting rows at the front */
          memmove(z->rows, z->rows + z->head, (z->n - z->head) * sizeof *z->rows);
          z->n -= z->head;
          z->head = 0;
        }
        sim_grow((void **)&z->rows, &z->cap, z->n + 1, sizeof *z->rows);
        z->rows[z->n++] = c->cur;
      } else if (c->cur.corr == upto) {
        sim_grow((void **)&m->direct, &m->directcap, m->ndirect + 1, sizeof *m->direct);
        m->direct[m->ndirect++] = c->cur;
      } else {
        pend_add(m, &c->cur);
        if (m->x->fast && m->unmatched > FAST_PENDING_MAX) {
          m->x->restart = 1;
          snprintf(m->x->why, sizeof m->x->why, "%s is far from correlationId order", tb_names[TB_RUNTIME]);
          return -1;
        }
      }
      if (cursor_next(m->x, c) < 0) return -1;
    }
  }
  return 0;
}

/* A call recorded twice: the same correlationId and the same function. (Two different calls
 * can share an id: a cuCtxSynchronize and the cudaDeviceReset after it, in a real export.) */
static int is_dup(merge *m, int64_t corr, int64_t name) {
  if (!m->ring) {
    m->ring = sim_xmalloc(2 * DEDUP_WINDOW * sizeof *m->ring);
    for (size_t i = 0; i < 2 * DEDUP_WINDOW; i++) m->ring[i] = INT64_MIN;
  }
  if (!m->dedup && corr <= m->max_corr) {
    /* ids usually only grow: from the first that does not, remember the recent ones in a map */
    m->dedup = 1;
    for (size_t i = 0; i < DEDUP_WINDOW; i++)
      if (m->ring[2 * i] != INT64_MIN) *sim_map_put(&m->seen, (uint64_t)m->ring[2 * i], NULL) = (uint64_t)m->ring[2 * i + 1];
  }
  if (corr > m->max_corr) m->max_corr = corr;
  int64_t *slot = &m->ring[2 * m->ringpos];
  if (m->dedup) {
    uint64_t *v = sim_map_get(&m->seen, (uint64_t)corr);
    if (v && *v == (uint64_t)name) return 1;
    if (v) {
      *v = (uint64_t)name;
      return 0;
    }
    if (slot[0] != INT64_MIN) sim_map_del(&m->seen, (uint64_t)slot[0], NULL);
    *sim_map_put(&m->seen, (uint64_t)corr, NULL) = (uint64_t)name;
  }
  slot[0] = corr;
  slot[1] = name;
  m->ringpos = (m->ringpos + 1) % DEDUP_WINDOW;
  return 0;
}

static int cmp_out(const void *a, const void *b) {
  const nout *x = a, *y = b;
  return out_less(x, y) ? -1 : out_less(y, x) ? 1 : 0;
}

/* One call: the rows it caused become its events; with none, the call is an event itself. */
static int do_call(merge *m, const nitem *call) {
  nsys *x = m->x;
  int64_t start = call->start, corr = call->corr, dur = call->end - call->start;
  if (dur < 0) {
    m->counts[N_NEG_DUR]++;
    dur = 0;
  }
  int64_t info = call_info(x, call->v[0]);
  if (info < 0) return -1;
  int64_t name = info >> 8;
  if (corr > 0 && is_dup(m, corr, name)) {
    m->counts[N_DUP_CALL]++;
    for (size_t i = 0; i < m->ndirect; i++) pend_add(m, &m->direct[i]); /* never their call: they wait as orphans */
    m->ndirect = 0;
    return 0;
  }
  int cls = (int)(info & 15), async = (int)(info >> 4 & 1);
  const nitem *sync = NULL;
  m->nbatch = 0;
  uint64_t *head = corr > 0 && m->unmatched ? sim_map_get(&m->pending, (uint64_t)corr) : NULL;
  uint32_t first = head ? (uint32_t)*head : 0;
  if (head) sim_map_del(&m->pending, (uint64_t)corr, NULL);
  int rc = 0;
  for (uint32_t i = first;; i = m->pool[i - 1].next) {
    /* the rows that waited, then those pulled for this call */
    nitem *it = i ? &m->pool[i - 1] : NULL;
    for (size_t d = 0; !it && d < m->ndirect && !rc; d++) {
      nitem *dt = &m->direct[d];
      if (dt->table == TB_SYNC) sync = dt;
      else if (dt->table == TB_MEMORY) rc = memory_event(m, dt, dt->start < start ? start : dt->start, name, corr);
      else rc = activity_event(m, dt, start, corr, async);
    }
    if (!it) break;
    if (rc) continue;
    if (it->table == TB_SYNC) sync = it;
    else if (it->table == TB_MEMORY) rc = memory_event(m, it, it->start < start ? start : it->start, name, corr);
    else rc = activity_event(m, it, start, corr, async);
  }
  if (!rc && m->nbatch) {
    /* the call's cost goes with the first thing it did */
    if (m->nbatch > 1) qsort(m->batch, m->nbatch, sizeof *m->batch, cmp_out);
    size_t first_real = 0;
    while (first_real + 1 < m->nbatch && m->batch[first_real].synthetic) first_real++;
    m->batch[first_real].ev.api_dur = dur;
    for (size_t i = 0; i < m->nbatch; i++) out_push(m, &m->batch[i]);
  } else if (!rc) {
    nout o = {.ts = start, .corr = corr, .own = start, .rowid = call->rowid, .table = TB_RUNTIME};
    sim_event_init(&o.ev);
    o.ev.ts = start;
    o.ev.dur = dur;
    o.ev.name = name;
    o.ev.device = -1;
    if (cls == CALL_OTHER) o.ev.kind = SIM_EV_API;
    else {
      o.ev.kind = SIM_EV_SYNC;
      o.ev.stream = -1;
      if (sync) {
        o.ev.device = dev16(sync->device);
        if (cls == CALL_SYNC_EVENT) o.ev.flags |= SIM_EVF_SYNC_EVENT;
        if (cls != CALL_SYNC_DEVICE && sync->stream >= 0 && sync->stream != CUPTI_INVALID)
          o.ev.stream = map_stream(m, sync->stream, sync->context);
        else if (cls == CALL_SYNC_STREAM) m->counts[N_SYNC_NO_STREAM]++;
      } else if (cls != CALL_SYNC_DEVICE) {
        if (cls == CALL_SYNC_EVENT) o.ev.flags |= SIM_EVF_SYNC_EVENT;
        if (cls == CALL_SYNC_STREAM) m->counts[N_SYNC_NO_STREAM]++;
      }
    }
    out_push(m, &o);
  }
  for (uint32_t i = first; i;) {
    uint32_t nx = m->pool[i - 1].next;
    pend_free(m, i - 1);
    i = nx;
  }
  m->nbatch = 0;
  return rc;
}

/* Rows whose call did not come (lost, or not traced) once the calls have passed their start. */
static int evict_orphans(merge *m, int64_t before) {
  for (;;) {
    int64_t own = pending_min(m);
    if (own == INT64_MAX || (before != INT64_MAX && own + ORPHAN_SLACK_NS >= before)) return 0;
    npend e = m->ph[0];
    ph_pop(m);
    nitem *it = &m->pool[e.idx];
    /* unlink it from its correlation's list */
    uint64_t *head = sim_map_get(&m->pending, (uint64_t)it->corr);
    if (head) {
      uint32_t j = (uint32_t)*head, prev = 0;
      while (j && j - 1 != e.idx) prev = j, j = m->pool[j - 1].next;
      if (j) {
        if (prev) m->pool[prev - 1].next = it->next;
        else if (it->next) *head = it->next;
        else sim_map_del(&m->pending, (uint64_t)it->corr, NULL);
      }
    }
    nitem copy = *it;
    pend_free(m, e.idx);
    if (copy.table != TB_SYNC) m->counts[N_ORPHAN]++;
    if (lone_row(m, &copy, copy.start < m->last_ts ? m->last_ts : copy.start)) return -1;
  }
}

/* Moves uncorrelated rows earlier than w into the output, then writes what is earlier than w. */
static int advance(merge *m, int64_t w) {
  for (int t = 0; t < TB_ITEMS; t++) {
    zq *z = &m->zq[t];
    while (z->head < z->n && z->rows[z->head].start < w)
      if (uncorrelated(m, &z->rows[z->head++])) return -1;
    ncursor *c = &m->zeros[t];
    while (c->has && c->cur.start < w) {
      if (uncorrelated(m, &c->cur)) return -1;
      if (cursor_next(m->x, c) < 0) return -1;
    }
  }
  return out_flush(m, w);
}

static int emit_preexisting(merge *m) {
  nproc *p = m->p;
  int64_t ts = m->rt.has && m->rt.cur.start < p->min_start ? m->rt.cur.start : p->min_start;
  m->last_ts = INT64_MIN;
  for (size_t i = 0; i < p->npre; i++) {
    const npre *a = &p->pre[i];
    int mc = mem_class(a->mk);
    live_add(p, a->addr, a->bytes, a->device, a->mk);
    if (mc == MC_STATIC || mc == MC_BAD) continue;
    sim_event ev;
    sim_event_init(&ev);
    ev.ts = ts;
    ev.addr = a->addr;
    ev.size = a->bytes;
    ev.flags = SIM_EVF_DEVICE_API | SIM_EVF_PREEXISTING;
    if (mc == MC_PINNED || mc == MC_PAGEABLE) {
      ev.kind = SIM_EV_HOST_ALLOC;
      ev.device = -1;
      ev.mem = mc == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
    } else {
      ev.kind = SIM_EV_ALLOC;
      ev.device = a->device;
      ev.mem = mc == MC_MANAGED ? SIM_MEM_MANAGED : SIM_MEM_DEVICE;
      note_device(m, a->device);
    }
    m->counts[N_PREEXISTING]++;
    if (store_writer_event(m->w, &ev)) {
      import_error(m->x->ic, "cannot import '%s': %s", m->x->path, store_error(m->x->ic->s));
      return -1;
    }
    m->last_ts = ts;
  }
  return 0;
}

/* Opens the cursor over the calls: start order (checked, in the optimistic pass). */
static int rt_open(merge *m) {
  nsys *x = m->x;
  ncursor *c = &m->rt;
  memset(c, 0, sizeof *c);
  c->table = TB_RUNTIME;
  char sql[512];
  int has_class = has_col(x, TB_RUNTIME, "eventClass");
  size_t l = (size_t)snprintf(sql, sizeof sql, "SELECT start, end, %s, nameId, rowid",
                              has_col(x, TB_RUNTIME, "correlationId") ? "correlationId" : "NULL");
  if (x->fast) {
    /* the class is checked here rather than by SQLite, to count the other rows */
    snprintf(sql + l, sizeof sql - l, ", %s, %s FROM %s", has_class ? "eventClass" : "NULL",
             has_col(x, TB_RUNTIME, "globalTid") ? "globalTid >> 24" : "NULL", tb_names[TB_RUNTIME]);
  } else {
    l += (size_t)snprintf(sql + l, sizeof sql - l, " FROM %s", tb_names[TB_RUNTIME]);
    const char *sep = " WHERE ";
    if (has_class) {
      l += (size_t)snprintf(sql + l, sizeof sql - l, "%seventClass IN (%" PRId64 ", %" PRId64 ")", sep, x->rt_class,
                            x->drv_class);
      sep = " AND ";
    }
    if (m->several) l += (size_t)snprintf(sql + l, sizeof sql - l, "%sglobalTid >= ?1 AND globalTid < ?2", sep);
    if (m->p->t[TB_RUNTIME].all_unsorted) snprintf(sql + l, sizeof sql - l, " ORDER BY start, rowid");
  }
  if (sqlite3_prepare_v2(x->db, sql, -1, &c->q, NULL)) return dbfail(x, tb_names[TB_RUNTIME], -1, sql);
  if (m->several) {
    sqlite3_bind_int64(c->q, 1, m->p->key << 24);
    sqlite3_bind_int64(c->q, 2, (m->p->key + 1) << 24);
  }
  m->prev_start = INT64_MIN;
  return 0;
}

/* The next call into m->rt.cur: 1, 0 at the end, -1 on error (or a restart). */
static int rt_next(merge *m) {
  nsys *x = m->x;
  ncursor *c = &m->rt;
  c->has = 0;
  for (;;) {
    if (!c->q) return 0;
    int rc = sqlite3_step(c->q);
    if (rc == SQLITE_DONE) {
      cursor_close(c);
      return 0;
    }
    if (rc != SQLITE_ROW) return read_fail(x, TB_RUNTIME, c->rows, c->cur.rowid);
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
      int g = get_int(q, i, dst[i]);
      if (g < 0) return bad_value(x, TB_RUNTIME, call->rowid, q, i, cn[i]);
      if (!g && i < 4 && i != 2)
        return nfail(x, "table %s, row %" PRId64 ": column %s is NULL", tb_names[TB_RUNTIME], call->rowid, cn[i]);
    }
    if (x->fast) {
      if (cls != x->rt_class && cls != x->drv_class) {
        m->other_class++;
        continue;
      }
      if (!fast_key_ok(x, key)) return -1;
      if (call->start < m->prev_start) {
        x->restart = 1;
        snprintf(x->why, sizeof x->why, "%s is not in start order", tb_names[TB_RUNTIME]);
        return -1;
      }
    } else if (call->start < m->prev_start) {
      /* the prescan found them sorted: the file changed under us */
      return nfail(x, "table %s, row %" PRId64 ": rows are not in the order the first reading found",
                   tb_names[TB_RUNTIME], call->rowid);
    }
    if (call->corr < 0) call->corr = 0;
    m->prev_start = call->start;
    c->has = 1;
    return 1;
  }
}

static int open_items(merge *m) {
  nsys *x = m->x;
  nproc *p = m->p;
  for (int t = 0; t < TB_ITEMS; t++) {
    if (!x->tb[t].usable || (!x->fast && p->t[t].rows == 0)) continue;
    int corr = has_col(x, t, "correlationId");
    int want_corr = !m->all_mode && corr && (x->fast || p->t[t].rows > p->t[t].zero);
    int want_zero = t != TB_SYNC && (m->all_mode || !corr || (!x->fast && p->t[t].zero));
    if (want_corr && (cursor_open(x, &m->items[t], t, p, m->several, x->fast ? CUR_MIXED : CUR_CORR) ||
                      cursor_next(x, &m->items[t]) < 0))
      return -1;
    if (want_zero && (cursor_open(x, &m->zeros[t], t, p, m->several, m->all_mode || !corr ? CUR_ALL : CUR_ZERO) ||
                      cursor_next(x, &m->zeros[t]) < 0))
      return -1;
  }
  return 0;
}

static int merge_run(merge *m) {
  nsys *x = m->x;
  nproc *p = m->p;
  live_clear(p);
  /* the calls, in start order; without any, every row is timed by itself */
  int have_calls = 0;
  if (x->tb[TB_RUNTIME].usable && (x->fast || p->t[TB_RUNTIME].rows)) {
    if (rt_open(m)) return -1;
    have_calls = rt_next(m);
    if (have_calls < 0) return -1;
  }
  m->all_mode = !have_calls;
  if (open_items(m)) return -1;
  if (emit_preexisting(m)) return -1;
  /* calls drive the merge */
  while (m->rt.has) {
    nitem call = m->rt.cur;
    if (call.corr > 0 && pull(m, call.corr)) return -1;
    if (do_call(m, &call)) return -1;
    if (rt_next(m) < 0) return -1;
    /* what can be written: nothing later comes before the next call's start, nor before a row
     * still waiting for its call */
    int64_t next = m->rt.has ? m->rt.cur.start : INT64_MAX;
    if (next == INT64_MAX) break;
    if (evict_orphans(m, next)) return -1;
    int64_t w = pending_min(m);
    if (next < w) w = next;
    for (int t = 0; t < TB_ITEMS; t++) /* rows not read yet of a table read in start order come no earlier */
      if (m->items[t].has && m->items[t].mode == CUR_MIXED && t != TB_SYNC && m->items[t].cur.start < w)
        w = m->items[t].cur.start;
    if (advance(m, w)) return -1;
  }
  x->other_class_rows += m->other_class;
  if (!m->all_mode) {
    /* the calls are over: whatever waits, and whatever is left, has no call */
    if (evict_orphans(m, INT64_MAX)) return -1;
    int64_t base = m->last_ts;
    for (int t = 0; t < TB_ITEMS; t++) {
      ncursor *c = &m->items[t];
      while (c->has) {
        nitem it = c->cur;
        if (cursor_next(x, c) < 0) return -1;
        int64_t ts = it.start < base ? base : it.start;
        if (advance(m, ts)) return -1;
        if (it.corr == 0) { /* after what waits in the queue, which is earlier */
          if (advance(m, it.start) || uncorrelated(m, &it)) return -1;
          continue;
        }
        if (it.table != TB_SYNC) m->counts[N_ORPHAN]++;
        if (lone_row(m, &it, ts < m->last_ts ? m->last_ts : ts)) return -1;
        base = ts;
      }
    }
  }
  if (advance(m, INT64_MAX)) return -1;
  /* the last events (time INT64_MAX cannot occur) */
  return out_flush(m, INT64_MAX);
}

static void merge_release(merge *m) {
  cursor_close(&m->rt);
  for (int t = 0; t < TB_ITEMS; t++) {
    cursor_close(&m->items[t]);
    cursor_close(&m->zeros[t]);
  }
  free(m->pool);
  free(m->poolfree);
  sim_map_release(&m->pending);
  free(m->ph);
  free(m->oh);
  free(m->batch);
  free(m->direct);
  for (int t = 0; t < TB_ITEMS; t++) free(m->zq[t].rows);
  free(m->ring);
  sim_map_release(&m->seen);
}

/* ---- one trace per process ------------------------------------------------------------------------ */

static const ngpu *gpu_of(const nsys *x, int64_t id) {
  for (size_t i = 0; i < x->ngpus; i++)
    if (x->gpus[i].id == id) return &x->gpus[i];
  return NULL;
}

static char *process_name(nsys *x, int64_t key) {
  int e = has_table(x->db, "PROCESSES");
  if (e <= 0) return NULL;
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, "SELECT name FROM PROCESSES WHERE globalPid >> 24 = ?1 AND name IS NOT NULL LIMIT 1", -1,
                         &q, NULL))
    return NULL;
  sqlite3_bind_int64(q, 1, key);
  char *n = NULL;
  if (sqlite3_step(q) == SQLITE_ROW) n = xstrdup((const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  return n;
}

static int64_t pool_event_rows(nsys *x, const nproc *p, int several) {
  if (has_table(x->db, "CUDA_GPU_MEMORY_POOL_EVENTS") <= 0) return 0;
  sqlite3_stmt *q;
  const char *sql = several ? "SELECT count(*) FROM CUDA_GPU_MEMORY_POOL_EVENTS WHERE globalPid >> 24 = ?1"
                            : "SELECT count(*) FROM CUDA_GPU_MEMORY_POOL_EVENTS";
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return 0;
  sqlite3_bind_int64(q, 1, p->key);
  int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
  sqlite3_finalize(q);
  return n;
}

/* Devices a process used: one (its name and memory), several alike, or several different. */
static void describe_devices(nsys *x, uint64_t mask, store_trace *meta, yajl_gen g) {
  jsonw_str(g, "devices");
  yajl_gen_array_open(g);
  int n = 0;
  const ngpu *first = NULL;
  int alike = 1;
  int64_t smallest = 0;
  for (int d = 0; d < 64; d++) {
    if (!(mask >> d & 1)) continue;
    n++;
    const ngpu *gp = gpu_of(x, d);
    yajl_gen_map_open(g);
    jsonw_kint(g, "id", d);
    if (gp) {
      jsonw_kstr(g, "name", gp->name);
      if (gp->total_memory > 0) jsonw_kint(g, "total_memory", gp->total_memory);
    }
    yajl_gen_map_close(g);
    if (!gp) {
      alike = 0;
      continue;
    }
    if (!first) first = gp;
    else if (!gp->name || !first->name || strcmp(gp->name, first->name) || gp->total_memory != first->total_memory)
      alike = 0;
    if (gp->total_memory > 0 && (!smallest || gp->total_memory < smallest)) smallest = gp->total_memory;
  }
  yajl_gen_array_close(g);
  meta->device_index = -1;
  if (n == 1) {
    for (int d = 0; d < 64; d++)
      if (mask >> d & 1) meta->device_index = d;
  }
  if (first && first->name) meta->device_name = xstrdup(first->name);
  if (first && !alike && n > 1) {
    /* different cards: name them all; the smallest bounds what fits on every one */
    free(meta->device_name);
    meta->device_name = NULL;
    for (int d = 0; d < 64; d++) {
      const ngpu *gp = (mask >> d & 1) ? gpu_of(x, d) : NULL;
      if (gp && gp->name && (!meta->device_name || !strstr(meta->device_name, gp->name)))
        append_list(&meta->device_name, gp->name);
    }
  }
  meta->device_memory = smallest;
}

typedef struct note_def {
  const char *name, *severity, *detail;
} note_def;

static const note_def notes[N__COUNT] = {
  [N_STATIC] = {"nsys_device_static_allocations", "info",
                "__device__ variables placed by the module loader (memKind Device/Managed Static): not allocations, "
                "left out of the events; their bytes are in the trace's attrs"},
  [N_PREEXISTING] = {"nsys_preexisting_allocations", "info",
                     "freed without being allocated during the capture: rebuilt as allocations live at its start"},
  [N_UNMATCHED_FREE] = {"nsys_unmatched_frees", "warning", "frees of an address with nothing live there: dropped"},
  [N_REALLOC] = {"nsys_allocations_at_live_address", "warning",
                 "an allocation at an address still live: the earlier allocation is taken as freed just before"},
  [N_SIZE_MISMATCH] = {"nsys_free_size_mismatch", "warning", "frees whose bytes differ from their allocation's"},
  [N_ORPHAN] = {"nsys_rows_without_call", "info",
                "activities or memory events whose API call is not in the export: timed by their own start"},
  [N_DUP_CALL] = {"nsys_duplicate_calls", "info", "calls recorded twice with one correlationId: kept once"},
  [N_BAD_ENUM] = {"nsys_unknown_enum_values", "warning", "rows with an enum value memplay does not know"},
  [N_SYNC_NO_STREAM] = {"nsys_stream_syncs_without_stream", "info",
                        "stream synchronizations whose stream is not recorded: taken as device-wide"},
  [N_NEG_DUR] = {"nsys_negative_durations", "warning", "rows ending before they start: taken as zero length"},
  [N_MEMORY_EVENTS] = {NULL, NULL, NULL},
  [N_UNCORRELATED] = {"nsys_uncorrelated_rows", "info",
                      "rows with no correlationId (module statics, migrations): timed by their own start"},
  [N_BATCHED_COPIES] = {"nsys_batched_copies", "info", "memcpy rows standing for several copies (copyCount > 1)"},
};

static int write_note(nsys *x, store_writer *w, const char *name, const char *sev, int64_t v, const char *detail) {
  if (store_writer_stat(w, name, sev, v, detail)) {
    import_error(x->ic, "cannot import '%s': %s", x->path, store_error(x->ic->s));
    return -1;
  }
  return 0;
}

static int import_process(nsys *x, nproc *p, int several) {
  import_ctx *ic = x->ic;
  int64_t pid = p->key & 0xFFFFFF;
  char suffix[48];
  snprintf(suffix, sizeof suffix, "-pid%" PRId64, pid);
  char *name = import_trace_name(ic, several ? suffix : NULL);
  if (!name) return nfail(x, "%s", store_error(ic->s));
  if (!x->fast && x->tb[TB_MEMORY].usable && (!p->sim_valid || p->t[TB_MEMORY].mem_unsorted)) {
    if (presim_sorted(x, p, several)) {
      free(name);
      return -1;
    }
  }
  store_trace meta;
  memset(&meta, 0, sizeof meta);
  meta.name = name;
  meta.source_format = (char *)"nsys";
  meta.source_file = (char *)x->path;
  meta.device_index = -1;
  yajl_gen g = NULL;
  store_writer *w = NULL;
  merge m;
  memset(&m, 0, sizeof m);
  m.x = x;
  m.p = p;
  m.several = several;
  sim_map_init(&m.pending);
  sim_map_init(&m.seen);
  /* the devices and attrs are set once the merge has seen which devices the events name */
  int rc = import_begin_trace(ic, &meta, &w);
  if (rc) {
    nfail(x, "%s", store_error(ic->s));
    goto out;
  }
  m.w = w;
  rc = merge_run(&m);
  if (!rc && x->fast && !x->fast_key_set) {
    x->restart = 1; /* nothing at all: the careful pass says so */
    snprintf(x->why, sizeof x->why, "no rows");
    rc = -1;
  }
  if (rc && x->restart) {
    /* an assumption of the optimistic pass failed: drop what it wrote, and say so to the caller */
    int64_t id = store_writer_trace_id(w);
    store_writer_abort(w);
    w = NULL;
    rc = store_trace_delete(ic->s, id) ? nfail(x, "%s", store_error(ic->s)) : 1;
    if (rc < 0) x->restart = 0;
    goto out;
  }
  if (rc) goto out;
  if (x->fast) p->key = x->fast_key;
  int64_t memory_rows = m.counts[N_MEMORY_EVENTS];
  if (memory_rows && store_writer_set(w, "allocator", "cuda")) {
    rc = nfail(x, "%s", store_error(ic->s));
    goto out;
  }
  /* notes */
  for (int i = 0; i < N__COUNT && !rc; i++) {
    int64_t v = i == N_STATIC ? m.static_count : m.counts[i];
    if (notes[i].name && v) rc = write_note(x, w, notes[i].name, notes[i].severity, v, notes[i].detail);
  }
  if (!rc && x->other_class_rows)
    rc = write_note(x, w, "nsys_other_event_class_calls", "info", x->other_class_rows,
                    "rows of CUPTI_ACTIVITY_KIND_RUNTIME that are neither CUDA runtime nor driver calls (eventClass), "
                    "such as the backtrace copies of calls: not imported");
  if (!rc && !x->fast) {
    char detail[256];
    snprintf(detail, sizeof detail, "read with a prescan, and sorted by SQLite where needed: %s",
             x->why[0] ? x->why : "asked for with --set prescan=1");
    rc = write_note(x, w, "nsys_careful_pass", "info", 1, detail);
  }
  int64_t pool_rows = rc ? 0 : pool_event_rows(x, p, several);
  if (!rc && pool_rows)
    rc = write_note(x, w, "nsys_memory_pool_events", "info", pool_rows,
                    "CUDA_GPU_MEMORY_POOL_EVENTS rows (pool creation, trimming, destruction): not imported");
  if (!rc && !memory_rows) {
    const char *msg = x->have_memory_table
                        ? "the export has no GPU memory usage events for this process, so the trace has its kernels, "
                          "copies and calls but no allocations or frees; record them with `nsys profile "
                          "--cuda-memory-usage=true`"
                        : "the report was recorded without GPU memory tracking (no CUDA_GPU_MEMORY_USAGE_EVENTS table), "
                          "so the trace has its kernels, copies and calls but no allocations or frees; record them with "
                          "`nsys profile --cuda-memory-usage=true`";
    rc = write_note(x, w, "nsys_no_memory_events", "data_loss", 1, msg);
    if (!rc) import_warn(ic, "'%s'%s%s: %s", x->path, several ? " process " : "", several ? suffix + 4 : "", msg);
  }
  if (!rc && m.counts[N_UNMATCHED_FREE])
    import_warn(ic, "'%s': %" PRId64 " frees of addresses with nothing live were dropped (see `memplay info`)", x->path,
                m.counts[N_UNMATCHED_FREE]);
  if (!rc && m.pool_allocs && !m.plain_allocs) rc = store_writer_set(w, "allocator", "async") ? nfail(x, "%s", store_error(ic->s)) : 0;
  if (!rc) {
    /* what the trace ran on, and what else the export says about the process */
    g = jsonw_mem();
    yajl_gen_map_open(g);
    jsonw_kstr(g, "nsys_version", x->product_version);
    jsonw_kstr(g, "export_schema", x->schema_version);
    jsonw_kint(g, "pid", p->key & 0xFFFFFF);
    char *pname = process_name(x, p->key);
    jsonw_kstr(g, "process", pname);
    free(pname);
    store_trace dm;
    memset(&dm, 0, sizeof dm);
    describe_devices(x, m.devmask_used, &dm, g);
    jsonw_kbool(g, "memory_usage_events", memory_rows > 0);
    if (m.static_count) {
      jsonw_kint(g, "device_static_count", m.static_count);
      jsonw_kint(g, "device_static_bytes", m.static_bytes);
    }
    yajl_gen_map_close(g);
    if (store_writer_set(w, "attrs", jsonw_text(g, NULL)) ||
        (dm.device_name && store_writer_set(w, "device_name", dm.device_name)) ||
        (dm.device_memory > 0 && store_writer_set_int(w, "device_memory", dm.device_memory)) ||
        store_writer_set_int(w, "device_index", dm.device_index))
      rc = nfail(x, "%s", store_error(ic->s));
    free(dm.device_name);
  }
  if (!rc) {
    rc = import_finish_trace(ic, w, name);
    w = NULL;
  }
out:
  if (w) store_writer_abort(w);
  merge_release(&m);
  if (g) yajl_gen_free(g);
  free(name);
  return rc;
}

/* ---- the importer ---------------------------------------------------------------------------------- */

static int cmp_proc(const void *a, const void *b) {
  const nproc *x = a, *y = b;
  return x->key < y->key ? -1 : x->key > y->key;
}

static void nsys_release(nsys *x) {
  sqlite3_finalize(x->str_q);
  for (size_t i = 0; i < x->nprocs; i++) proc_release(&x->procs[i]);
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
  char err[512];
  FILE *f = fopen(ic->path, "rb");
  unsigned char magic[16] = {0};
  size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
  if (f) fclose(f);
  if (!f) {
    import_error(ic, "cannot open '%s': %s", ic->path, strerror(errno));
    goto out;
  }
  if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    nfail(&x, "a gzip-compressed file: decompress the SQLite export first (gunzip)");
    goto out;
  }
  if (got < 16 || memcmp(magic, "SQLite format 3", 16)) {
    nfail(&x, "not an SQLite database, so not an Nsight Systems SQLite export (export one with `nsys export --type "
              "sqlite`)");
    goto out;
  }
  if (open_export(ic->path, &x.db, err, sizeof err)) {
    nfail(&x, "cannot open it as SQLite: %s", err);
    goto out;
  }
  int nsys_like = looks_like_nsys(x.db);
  if (nsys_like < 0) {
    dbfail(&x, "sqlite_master", -1, NULL);
    goto out;
  }
  if (!nsys_like) {
    int app = 0;
    sqlite3_stmt *q;
    if (!sqlite3_prepare_v2(x.db, "PRAGMA application_id", -1, &q, NULL) && sqlite3_step(q) == SQLITE_ROW)
      app = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    nfail(&x, app == STORE_APPLICATION_ID
                ? "a memplay store, not an Nsight Systems export (copy traces between stores with `memplay export`)"
                : "an SQLite database but not an Nsight Systems export: it has no StringIds table with the CUPTI_"
                  "ACTIVITY_KIND_* or META_DATA_EXPORT tables of `nsys export --type sqlite`");
    goto out;
  }
  /* schema discovery: tables, columns, enums, version */
  if (read_metadata(&x) || read_event_classes(&x) ||
      read_enum(&x, "ENUM_CUDA_MEM_KIND", "MEMORY_KIND_", mk_names, MK__COUNT, x.mk_map) ||
      read_enum(&x, "ENUM_CUDA_MEMCPY_OPER", "MEMCPY_KIND_", ck_names, CK__COUNT, x.ck_map) ||
      read_enum(&x, "ENUM_CUDA_DEV_MEM_EVENT_OPER", "_OPR_", op_names, OP__COUNT, x.op_map))
    goto out;
  for (int t = 0; t < TB__COUNT; t++)
    if (discover_table(&x, t)) goto out;
  x.have_memory_table = x.tb[TB_MEMORY].present;
  if (unknown_tables(&x) || read_gpus(&x) || read_contexts(&x)) goto out;
  /* the optimistic pass: one process whose rows are already in order (a restart when not) */
  const char *prescan = import_param(ic, "prescan");
  if (!prescan || !strcmp(prescan, "0")) {
    nproc fp;
    proc_init(&fp, -1);
    x.fast = 1;
    rc = import_process(&x, &fp, 0);
    proc_release(&fp);
    x.fast = 0;
    if (rc != 1) goto out;
  }
  x.restart = 0;
  x.other_class_rows = 0;
  rc = -1;
  /* the careful pass: the prescan */
  for (int t = 0; t < TB__COUNT; t++)
    if (x.tb[t].usable && prescan_table(&x, t)) goto out;
  /* rows that name no process go with the only process there is, else nowhere */
  size_t nreal = 0;
  nproc *nopid = NULL, *only = NULL;
  for (size_t i = 0; i < x.nprocs; i++) {
    if (x.procs[i].key < 0) nopid = &x.procs[i];
    else nreal++, only = &x.procs[i];
  }
  if (nopid) {
    for (int t = 0; t < TB__COUNT; t++) x.unassigned_rows += t == TB_SYNC ? 0 : nopid->t[t].rows;
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
  /* which processes become traces: those that ran something or allocated; else those that called CUDA */
  size_t keep = 0;
  int any_work = 0;
  for (size_t i = 0; i < x.nprocs; i++)
    for (int t = 0; t < TB_ITEMS; t++)
      if (t != TB_SYNC && x.procs[i].key >= 0 && x.procs[i].t[t].rows) any_work = 1;
  for (size_t i = 0; i < x.nprocs; i++) {
    nproc *p = &x.procs[i];
    int work = 0;
    for (int t = 0; t < TB_ITEMS; t++)
      if (t != TB_SYNC && p->t[t].rows) work = 1;
    if (p->key < 0) {
      proc_release(p);
      continue;
    }
    if (any_work && !work) {
      import_warn(ic, "'%s': process %" PRId64 " made %" PRId64 " CUDA calls but ran nothing on a GPU: not imported",
                  x.path, p->key & 0xFFFFFF, p->t[TB_RUNTIME].rows);
      proc_release(p);
      continue;
    }
    x.procs[keep++] = *p;
  }
  x.nprocs = keep;
  if (!x.nprocs) {
    nfail(&x, "the export holds no CUDA activity: no kernels, copies, memsets, memory usage events or CUDA calls "
              "(record with `nsys profile --trace=cuda`)");
    goto out;
  }
  if (x.unassigned_rows)
    import_warn(ic, "'%s': %" PRId64 " rows name no process (globalPid is NULL): %s", x.path, x.unassigned_rows,
                nreal == 1 ? "they are imported with the only process" : "not imported");
  qsort(x.procs, x.nprocs, sizeof *x.procs, cmp_proc);
  int several = x.nprocs > 1;
  rc = 0;
  for (size_t i = 0; i < x.nprocs && !rc; i++) rc = import_process(&x, &x.procs[i], several);
out:
  nsys_release(&x);
  return rc;
}

static int nsys_detect(const unsigned char *head, size_t n, const char *path) {
  if (n < 16 || memcmp(head, "SQLite format 3", 16)) return 0;
  /* Any SQLite database is claimed weakly, so that the importer can say what it is instead. */
  sqlite3 *db;
  char err[256];
  if (open_export(path, &db, err, sizeof err)) return 10;
  int yes = looks_like_nsys(db);
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

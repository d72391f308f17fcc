/* schema.c: Nsight Systems: the tables, columns and enums memplay knows, and what an export has. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsys_int.h"

/* ---- the schema as memplay knows it --------------------------------------------------------- */

const char *const nsys_tb_names[TB__COUNT] = {
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

/* The names of the enums' values (ENUM_* tables), as suffixes of the names there. */
static const char *const mk_names[MK__COUNT] = {"PAGEABLE", "PINNED",         "DEVICE",        "ARRAY",
                                                "MANAGED",  "DEVICE_STATIC", "MANAGED_STATIC", "UNKNOWN"};
static const char *const ck_names[CK__COUNT] = {"UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH",     "ATOA",     "ATOD",
                                                "DTOA",    "DTOD", "HTOH", "PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD"};
static const char *const op_names[OP__COUNT] = {"ALLOCATION", "DEALLOCATION"};

/* ---- the export ----------------------------------------------------------------------------------- */

static int export_progress(void *arg) {
  (void)arg;
  return store_sqlite_memory_used() > NSYS_MAX_SQLITE_MEMORY;
}

/* Opens path as a read-only database (the URI escapes the path); immutable (no locks, no WAL
 * looked for) when it is the user's own file, which then has no WAL (source_copy.h). */
int nsys_open_export(const char *path, int immutable, sqlite3 **db, char *err, size_t errlen) {
  size_t n = strlen(path);
  char *uri = sim_xmalloc(3 * n + 32);
  char *o = uri + sprintf(uri, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/-_.~", *p))
      *o++ = (char)*p;
    else o += sprintf(o, "%%%02X", *p);
  }
  strcpy(o, immutable ? "?mode=ro&immutable=1" : "?mode=ro");
  *db = NULL;
  store_sqlite_init();
  int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
  free(uri);
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "%s", *db ? sqlite3_errmsg(*db) : "out of memory");
    sqlite3_close(*db);
    *db = NULL;
    return -1;
  }
  /* No query on an export can run away: past 2 GiB of SQLite's memory it is interrupted (a
   * crafted export; the views that could recurse are refused by nsys_read_schema). */
  sqlite3_progress_handler(*db, 100000, export_progress, NULL);
  /* Sorts spill to temporary files rather than growing in memory; a modest page cache. */
  sqlite3_exec(*db, "PRAGMA temp_store = FILE; PRAGMA cache_size = -8192; PRAGMA query_only = 1", NULL, NULL, NULL);
  return 0;
}

int nsys_has_table(sqlite3 *db, const char *name) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &q, NULL))
    return -1;
  sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Whether db looks like an nsys export: StringIds plus its metadata or CUPTI tables. */
int nsys_looks_like(sqlite3 *db) {
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

int nsys_has_col(const nsys *x, int t, const char *name) {
  int i = col_index(t, name);
  return i >= 0 && (x->tb[t].have >> i & 1);
}

static int discover_table(nsys *x, int t) {
  ntable *tb = &x->tb[t];
  int e = nsys_has_table(x->db, nsys_tb_names[t]);
  if (e < 0) return nsys_dbfail(x, "sqlite_master", -1, NULL);
  if (!e) return 0;
  tb->present = 1;
  char sql[160];
  snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", nsys_tb_names[t]);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, nsys_tb_names[t], -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *c = (const char *)sqlite3_column_text(q, 1);
    int i = c ? col_index(t, c) : -1;
    if (i >= 0) tb->have |= UINT64_C(1) << i;
    else if (c) nsys_append_list(&tb->unknown, c);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return nsys_dbfail(x, nsys_tb_names[t], -1, sql);
  /* required columns */
  char req[160];
  snprintf(req, sizeof req, "%s", tb_required[t]);
  tb->usable = 1;
  char *save = NULL;
  for (char *tok = strtok_r(req, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    if (nsys_has_col(x, t, tok)) continue;
    import_warn(x->ic, "'%s': table %s has no column '%s': its rows are not imported", x->path, nsys_tb_names[t], tok);
    tb->usable = 0;
    break;
  }
  if (tb->unknown)
    import_warn(x->ic, "'%s': table %s has columns memplay does not know, left unread: %s", x->path, nsys_tb_names[t],
                tb->unknown);
  return 0;
}

/* Maps an ENUM table's ids to memplay's values by the names' suffixes; absent: the ids of docs §4.2. */
static int read_enum(nsys *x, const char *table, const char *marker, const char *const *names, int n, uint8_t *map) {
  memset(map, BAD, ENUM_MAX);
  int e = nsys_has_table(x->db, table);
  if (e < 0) return nsys_dbfail(x, "sqlite_master", -1, NULL);
  if (!e) {
    for (int i = 0; i < n; i++) map[i] = (uint8_t)i;
    return 0;
  }
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT id, name FROM %s", table);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, table, -1, sql);
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
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, table, -1, sql);
}

static int read_event_classes(nsys *x) {
  x->rt_class = 0;
  x->drv_class = 1;
  int e = nsys_has_table(x->db, "ENUM_NSYS_EVENT_CLASS");
  if (e <= 0) return e < 0 ? nsys_dbfail(x, "sqlite_master", -1, NULL) : 0;
  const char *sql = "SELECT id, name FROM ENUM_NSYS_EVENT_CLASS WHERE name IN ('TRACE_PROCESS_EVENT_CUDA_RUNTIME', "
                    "'TRACE_PROCESS_EVENT_CUDA_DRIVER')";
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, "ENUM_NSYS_EVENT_CLASS", -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *nm = (const char *)sqlite3_column_text(q, 1);
    if (nm && strstr(nm, "RUNTIME")) x->rt_class = sqlite3_column_int64(q, 0);
    else x->drv_class = sqlite3_column_int64(q, 0);
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, "ENUM_NSYS_EVENT_CLASS", -1, sql);
}

static int read_metadata(nsys *x) {
  const char *table = NULL;
  int e = nsys_has_table(x->db, "META_DATA_EXPORT");
  if (e < 0) return nsys_dbfail(x, "sqlite_master", -1, NULL);
  if (e) table = "META_DATA_EXPORT";
  else {
    e = nsys_has_table(x->db, "EXPORT_META_DATA");
    if (e < 0) return nsys_dbfail(x, "sqlite_master", -1, NULL);
    if (e) table = "EXPORT_META_DATA";
  }
  if (!table) return 0;
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT name, value FROM %s WHERE name IN ('EXPORT_PRODUCT_VERSION', 'EXPORT_SCHEMA_VERSION')", table);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, table, -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(q, 0), *v = (const char *)sqlite3_column_text(q, 1);
    if (!k || !v) continue;
    char **slot = !strcmp(k, "EXPORT_PRODUCT_VERSION") ? &x->product_version : &x->schema_version;
    free(*slot);
    *slot = nsys_strdup(v);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return nsys_dbfail(x, table, -1, sql);
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
  int e = nsys_has_table(x->db, "TARGET_INFO_GPU");
  if (e <= 0) return e < 0 ? nsys_dbfail(x, "sqlite_master", -1, NULL) : 0;
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
    x->gpus[x->ngpus++] = (ngpu){sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 2), nm ? nsys_strdup(nm) : NULL};
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, "TARGET_INFO_GPU", -1, sql);
}

static int read_contexts(nsys *x) {
  int e = nsys_has_table(x->db, "TARGET_INFO_CUDA_CONTEXT_INFO");
  if (e <= 0) return e < 0 ? nsys_dbfail(x, "sqlite_master", -1, NULL) : 0;
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
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, "TARGET_INFO_CUDA_CONTEXT_INFO", -1, sql);
}

/* Warns about CUDA tables memplay neither reads nor knows to leave alone, when they hold rows. */
static int unknown_tables(nsys *x) {
  const char *sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE 'CUPTI\\_ACTIVITY\\_KIND\\_%' "
                    "ESCAPE '\\' OR name LIKE 'CUDA\\_%' ESCAPE '\\') ORDER BY name";
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, "sqlite_master", -1, sql);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *nm = (const char *)sqlite3_column_text(q, 0);
    int known = 0;
    for (int t = 0; t < TB__COUNT && !known; t++) known = !strcmp(nm, nsys_tb_names[t]);
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
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, "sqlite_master", -1, sql);
}

/* Every object memplay reads must be a table: a view of the same name could compute anything
 * (a recursive view never ends). 0, or -1 with a message naming the first one that is not. */
static int only_tables(nsys *x) {
  sqlite3_stmt *q;
  const char *sql = "SELECT type, name FROM sqlite_master WHERE type <> 'table' AND type <> 'index' AND (upper(name) IN "
                    "('STRINGIDS', 'PROCESSES', 'META_DATA_EXPORT', 'EXPORT_META_DATA', 'TARGET_INFO_GPU', "
                    "'TARGET_INFO_CUDA_CONTEXT_INFO') OR upper(name) LIKE 'ENUM\\_%' ESCAPE '\\' OR upper(name) LIKE "
                    "'CUPTI\\_%' ESCAPE '\\' OR upper(name) LIKE 'CUDA\\_%' ESCAPE '\\') LIMIT 1";
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return nsys_dbfail(x, "sqlite_master", -1, NULL);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    nsys_fail(x, "'%.100s' is a %s, not a table: an Nsight Systems export holds its data in tables, and memplay "
                 "reads nothing else", sqlite3_column_text(q, 1), sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return -1;
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : nsys_dbfail(x, "sqlite_master", -1, NULL);
}

int nsys_read_schema(nsys *x) {
  if (only_tables(x) || read_metadata(x) || read_event_classes(x) ||
      read_enum(x, "ENUM_CUDA_MEM_KIND", "MEMORY_KIND_", mk_names, MK__COUNT, x->mk_map) ||
      read_enum(x, "ENUM_CUDA_MEMCPY_OPER", "MEMCPY_KIND_", ck_names, CK__COUNT, x->ck_map) ||
      read_enum(x, "ENUM_CUDA_DEV_MEM_EVENT_OPER", "_OPR_", op_names, OP__COUNT, x->op_map))
    return -1;
  for (int t = 0; t < TB__COUNT; t++)
    if (discover_table(x, t)) return -1;
  x->have_memory_table = x->tb[TB_MEMORY].present;
  if (unknown_tables(x) || read_gpus(x) || read_contexts(x)) return -1;
  return 0;
}

/* nsys_int.h: what the Nsight Systems importer's files share: enums, the export, processes, cursors, merge. */
#ifndef REPLAY_IMPORT_NSYS_INT_H
#define REPLAY_IMPORT_NSYS_INT_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>

#include "import/importer.h"
#include "sim/allocator.h"
#include "sim/hashmap.h"

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
 *
 * The files: schema.c (the tables and columns memplay knows, and what an export has of them),
 * names.c (nsys string ids to names), prescan.c (processes, their live allocations, the careful
 * pass's prescan), cursor.c (rows out of SQLite, checked), merge.c (calls and the rows they
 * caused, in time order), events.c (rows into events), trace.c (one trace per process),
 * notes.c (what an import counted or dropped, as the trace's notes), nsys.c (the importer's
 * entry: the passes in order, detection, the registry row).
 */

/* ---- the schema as memplay knows it (schema.c) ------------------------------------------------- */

enum { TB_MEMORY, TB_KERNEL, TB_MEMCPY, TB_MEMSET, TB_SYNC, TB_RUNTIME, TB__COUNT };
#define TB_ITEMS TB_RUNTIME /* tables before it are read by correlation */
extern const char *const nsys_tb_names[TB__COUNT];

/* nsys's remapped memory kinds (ENUM_CUDA_MEM_KIND, the values used when the table is absent). */
enum { MK_PAGEABLE, MK_PINNED, MK_DEVICE, MK_ARRAY, MK_MANAGED, MK_DEVICE_STATIC, MK_MANAGED_STATIC, MK_UNKNOWN, MK__COUNT };
/* ENUM_CUDA_MEMCPY_OPER. */
enum { CK_UNKNOWN, CK_HTOD, CK_DTOH, CK_HTOA, CK_ATOH, CK_ATOA, CK_ATOD, CK_DTOA, CK_DTOD, CK_HTOH, CK_PTOP,
       CK_UVM_HTOD, CK_UVM_DTOH, CK_UVM_DTOD, CK__COUNT };
/* ENUM_CUDA_DEV_MEM_EVENT_OPER. */
enum { OP_ALLOC, OP_FREE, OP__COUNT };

#define ENUM_MAX 256 /* enum ids memplay maps; larger ones are unknown values */
#define BAD 255      /* an enum value memplay does not know */
#define CUPTI_INVALID 0xFFFFFFFFll

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

/* nsys.c: failures, as "cannot import 'path': ..." in the import context; each returns -1. */
int nsys_fail(nsys *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An SQLite failure while reading table (at row rowid when >= 0), with the SQL when given. */
int nsys_dbfail(nsys *x, const char *table, int64_t rowid, const char *sql);
/* SQLite failed while stepping through table t: after the row with rowid last_rowid, or after
 * `rows` rows when the rowid is not known (-1). */
int nsys_read_fail(nsys *x, int t, int64_t rows, int64_t last_rowid);
char *nsys_strdup(const char *s);
/* Appends item to a comma-separated list (*list may be NULL). */
void nsys_append_list(char **list, const char *item);

/* schema.c: opening an export and finding out what it holds. */
/* What SQLite may hold in memory while an export is read before a query is interrupted. */
#define NSYS_MAX_SQLITE_MEMORY ((sqlite3_int64)2 << 30)
int nsys_open_export(const char *path, int immutable, sqlite3 **db, char *err, size_t errlen);
int nsys_looks_like(sqlite3 *db);
int nsys_has_table(sqlite3 *db, const char *name);
int nsys_has_col(const nsys *x, int t, const char *name);
/* The export's version, enums, tables and their columns, devices and contexts. 0 or -1. */
int nsys_read_schema(nsys *x);

/* names.c: store string ids for nsys string ids (-1 on error). A call's is packed with what it
 * is: id << 8 | async << 4 | CALL_*. */
int64_t nsys_kernel_name(nsys *x, int64_t sid);
int64_t nsys_call_info(nsys *x, int64_t sid);
int64_t nsys_copy_name(nsys *x, int memset, int ck, int sk, int dk);

/* ---- processes (prescan.c) ---------------------------------------------------------------------- */

void nsys_proc_init(nproc *p, int64_t key);
void nsys_proc_release(nproc *p);
/* The live set of a process's allocations (address -> size, kind, device). */
nlive *nsys_live_find(nproc *p, uint64_t addr);
void nsys_live_add(nproc *p, uint64_t addr, uint64_t bytes, int device, int mk);
void nsys_live_del(nproc *p, uint64_t addr);
void nsys_live_clear(nproc *p);
/* The careful pass's first reading: every table once; then the processes that become traces,
 * in x->procs. 0 or -1. */
int nsys_prescan(nsys *x);
/* When a process's memory events were not in time order, its replay is redone sorted. */
int nsys_presim_sorted(nsys *x, nproc *p, int several);

/* ---- cursors (cursor.c) -------------------------------------------------------------------------- */

/* One row of an item table, as the merge uses it. */
typedef struct nitem {
  int64_t start, end, corr, rowid;
  int64_t device, stream, context;
  int64_t v[6]; /* per table: see item_vcols (cursor.c) */
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

/* CUR_MIXED, the optimistic pass's: every row in file order, correlated rows in correlationId
 * order and all of them in start order (as nsys writes them), so that the uncorrelated rows can
 * be taken as they come, with no cursor of their own. */
enum { CUR_CORR, CUR_ZERO, CUR_ALL, CUR_MIXED };

typedef struct merge merge;

/* An integer column: 1 with *v, 0 when NULL, -1 for any other type. */
int nsys_get_int(sqlite3_stmt *q, int i, int64_t *v);
/* A column that is not an integer: the failure, quoting it. -1. */
int nsys_bad_value(nsys *x, int t, int64_t rowid, sqlite3_stmt *q, int i, const char *col);
/* Steps a cursor: 1 with a row in c->cur, 0 at the end, -1 on error (or a restart). */
int nsys_cursor_next(nsys *x, ncursor *c);
void nsys_cursor_close(ncursor *c);
/* The merge's cursors: the calls in start order, and the rows of each item table. */
int nsys_rt_open(merge *m);
int nsys_rt_next(merge *m);
int nsys_open_items(merge *m);

/* ---- the merge (merge.c, events.c) ----------------------------------------------------------------- */

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

struct merge {
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
};

enum { N_STATIC, N_PREEXISTING, N_UNMATCHED_FREE, N_REALLOC, N_SIZE_MISMATCH, N_ORPHAN, N_DUP_CALL, N_BAD_ENUM,
       N_SYNC_NO_STREAM, N_NEG_DUR, N_MEMORY_EVENTS, N_UNCORRELATED, N_BATCHED_COPIES, N__COUNT };

/* One process's events, in time order, into m->w. 0, or -1 (with x->restart when the optimistic
 * pass must give way). */
int nsys_merge_run(merge *m);
void nsys_merge_release(merge *m);
/* A row into its events in m->batch, at host time ts (events.c). 0 or -1. */
int nsys_memory_event(merge *m, const nitem *it, int64_t ts, int64_t name, int64_t corr);
int nsys_activity_event(merge *m, const nitem *it, int64_t ts, int64_t corr, int async);
/* The allocations live when the capture began, written first. 0 or -1. */
int nsys_emit_preexisting(merge *m);
/* The stream as memplay records it: the context's NULL stream is the default stream, 0. */
int64_t nsys_map_stream(const merge *m, int64_t stream, int64_t context);
int16_t nsys_dev16(int64_t d);

/* ---- the trace (trace.c, notes.c) ---------------------------------------------------------------- */

/* One process into one trace. 0, -1, or 1 when the optimistic pass gave way (its trace deleted). */
int nsys_import_process(nsys *x, nproc *p, int several);
/* The trace's notes from what the merge counted. 0 or -1. */
int nsys_write_notes(nsys *x, const nproc *p, const merge *m, store_writer *w, int several, const char *suffix);

#endif

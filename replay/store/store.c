/* store.c: opening, hardening and migrating the store; statements, transactions, interning, traces. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "io/frames.h"
#include "io/limits.h"
#include "sim/copyfit.h"
#include "store_int.h"
#include "store_schema_ref.h" /* made at build time by schema_ref_gen.c */

void store_seterr(store *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, sizeof s->err, fmt, ap);
  va_end(ap);
}

const char *store_error(const store *s) { return s->err; }
void store_seterr_text(store *s, const char *msg) { store_seterr(s, "%s", msg); }
sqlite3 *store_db(store *s) { return s->db; }
const char *store_path(const store *s) { return s->path; }

/* Error messages carry SQLite's own wording and the SQL that failed only when asked (--verbose):
 * a user is told what went wrong in words, and what to do. */
static int store_verbose_errors;
void store_set_verbose(int on) { store_verbose_errors = on; }

const char *store_reason(int code) {
  if (code == SQLITE_READONLY_ROLLBACK) /* a hot journal that a read-only connection cannot roll back */
    return "a command that wrote to the store was interrupted, and what it left must be undone before the store "
           "can be read: run any command that writes to it (memplay check-store) once";
  switch (code & 0xff) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED: return "the store is in use by another memplay or program: try again when it has finished";
  case SQLITE_FULL: return "the disk is full: free some space and try again";
  case SQLITE_READONLY: return "the store cannot be written (a read-only file or folder): check its permissions";
  case SQLITE_PERM:
  case SQLITE_AUTH: return "permission denied: check the store's permissions";
  case SQLITE_CANTOPEN: return "the file cannot be opened: check that its folder exists and can be written";
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB: return "the store file is damaged or not a memplay store";
  case SQLITE_IOERR: return "reading or writing the store's file failed (disk or file system error)";
  case SQLITE_NOMEM: return "out of memory";
  case SQLITE_CONSTRAINT: return "the store refused the change (it would break a rule of its schema)";
  case SQLITE_TOOBIG: return "a value is too large for the store";
  default:
    return "the store is not as this memplay wrote it (changed by hand, or damaged): run again with --verbose "
           "for the details";
  }
}

int store_fail(store *s, sqlite3_stmt *stmt, const char *what) {
  const char *sql = stmt ? sqlite3_sql(stmt) : NULL;
  if (store_verbose_errors)
    store_seterr(s, "%s: %s%s%s%s", what, sqlite3_errmsg(s->db), sql ? " (in: " : "", sql ? sql : "", sql ? ")" : "");
  else store_seterr(s, "%s: %s", what, store_reason(sqlite3_extended_errcode(s->db)));
  return -1;
}

int store_exec(store *s, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    if (!store_verbose_errors) store_seterr(s, "%s", store_reason(sqlite3_extended_errcode(s->db)));
    else store_seterr(s, "%s (in: %.200s)", msg ? msg : sqlite3_errmsg(s->db), sql);
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

sqlite3_stmt *store_stmt(store *s, const char *sql) {
  int existed;
  uint64_t *slot = sim_map_put(&s->stmts, (uint64_t)(uintptr_t)sql, &existed);
  if (existed) {
    sqlite3_stmt *st = (sqlite3_stmt *)(uintptr_t)*slot;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
  }
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
    if (store_verbose_errors) store_seterr(s, "cannot prepare statement: %s (in: %s)", sqlite3_errmsg(s->db), sql);
    else store_seterr(s, "cannot use the store: %s", store_reason(sqlite3_extended_errcode(s->db)));
    sim_map_del(&s->stmts, (uint64_t)(uintptr_t)sql, NULL);
    return NULL;
  }
  *slot = (uint64_t)(uintptr_t)st;
  return st;
}

/* ---- interning ------------------------------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, b, 8);
    h = (h ^ (v * 0xc4ceb9fe1a85ec53ull)) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    b += 8;
    n -= 8;
  }
  uint64_t v = 0;
  memcpy(&v, b, n);
  h = (h ^ (v * 0xc4ceb9fe1a85ec53ull)) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 32;
  return h;
}

static void intern_init(intern_table *t) { memset(t, 0, sizeof *t); }

static void intern_release(intern_table *t) {
  sim_map_release(&t->map);
  free(t->ents);
  free(t->arena);
  intern_init(t);
}

/* Returns the id for key, or 0 when absent; *probe receives the map key to insert under. */
static int64_t intern_find(const intern_table *t, const void *key, size_t len, uint64_t *probe) {
  uint64_t h = hash_bytes(key, len);
  for (uint64_t k = h;; k++) {
    uint64_t *slot = sim_map_get(&t->map, k);
    if (!slot) {
      *probe = k;
      return 0;
    }
    const intern_entry *e = &t->ents[*slot];
    if (e->len == len && memcmp(t->arena + e->off, key, len) == 0) return e->id;
  }
}

static void intern_add(intern_table *t, uint64_t probe, const void *key, size_t len, int64_t id) {
  sim_grow((void **)&t->ents, &t->cap, t->n + 1, sizeof *t->ents);
  sim_grow((void **)&t->arena, &t->acap, t->alen + len + 1, 1);
  memcpy(t->arena + t->alen, key, len);
  t->ents[t->n] = (intern_entry){hash_bytes(key, len), id, t->alen, len};
  t->alen += len;
  *sim_map_put(&t->map, probe, NULL) = t->n++;
}

static void intern_reset_all(store *s) {
  intern_release(&s->strings);
  intern_release(&s->frames);
  intern_release(&s->callsites);
}

static int64_t intern_string_u(store *s, const char *str, size_t len) {
  uint64_t probe;
  int64_t id = intern_find(&s->strings, str, len, &probe);
  if (id) return id;
  sqlite3_stmt *q = store_stmt(s, "SELECT id FROM strings WHERE value = ?1");
  if (!q) return -1;
  sqlite3_bind_text(q, 1, str, (int)len, SQLITE_STATIC);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    id = sqlite3_column_int64(q, 0);
  } else if (rc == SQLITE_DONE) {
    sqlite3_stmt *ins = store_stmt(s, "INSERT INTO strings(value) VALUES (?1)");
    if (!ins) return -1;
    sqlite3_bind_text(ins, 1, str, (int)len, SQLITE_STATIC);
    if (sqlite3_step(ins) != SQLITE_DONE) return store_fail(s, ins, "cannot store string");
    id = sqlite3_last_insert_rowid(s->db);
  } else {
    return store_fail(s, q, "cannot look up string");
  }
  sqlite3_reset(q);
  intern_add(&s->strings, probe, str, len, id);
  return id;
}

/* Interns a row of integers in `table` (frames or callsites) through the given SQL: the first nkey
 * of vals[0..nall) identify it (select_sql's parameters), a new row stores all of them
 * (insert_sql's). */
static int64_t intern_ints(store *s, intern_table *t, const int64_t *vals, int nkey, int nall, const char *select_sql,
                           const char *insert_sql, const char *what) {
  uint64_t probe;
  int64_t id = intern_find(t, vals, (size_t)nkey * sizeof *vals, &probe);
  if (id) return id;
  sqlite3_stmt *q = store_stmt(s, select_sql);
  if (!q) return -1;
  for (int i = 0; i < nkey; i++) sqlite3_bind_int64(q, i + 1, vals[i]);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    id = sqlite3_column_int64(q, 0);
  } else if (rc == SQLITE_DONE) {
    sqlite3_stmt *ins = store_stmt(s, insert_sql);
    if (!ins) return -1;
    for (int i = 0; i < nall; i++) sqlite3_bind_int64(ins, i + 1, vals[i]);
    if (sqlite3_step(ins) != SQLITE_DONE) return store_fail(s, ins, what);
    id = sqlite3_last_insert_rowid(s->db);
  } else {
    return store_fail(s, q, what);
  }
  sqlite3_reset(q);
  intern_add(t, probe, vals, (size_t)nkey * sizeof *vals, id);
  return id;
}

static int64_t intern_stack_u(store *s, const store_frame *frames, size_t n) {
  int64_t parent = 0;
  for (size_t i = n; i-- > 0;) {
    const char *name = frames[i].name ? frames[i].name : "";
    const char *file = frames[i].file ? frames[i].file : "";
    int64_t nid = intern_string_u(s, name, strlen(name));
    int64_t fid = intern_string_u(s, file, strlen(file));
    if (nid < 0 || fid < 0) return -1;
    int64_t fr[3] = {nid, fid, frames[i].line};
    int64_t frame = intern_ints(s, &s->frames, fr, 3, 3, "SELECT id FROM frames WHERE name_id=?1 AND file_id=?2 AND line=?3",
                                "INSERT INTO frames(name_id, file_id, line) VALUES (?1, ?2, ?3)", "cannot store frame");
    if (frame < 0) return -1;
    int64_t cs[3] = {parent, frame, (int64_t)(n - 1 - i)};
    parent = intern_ints(s, &s->callsites, cs, 2, 3, "SELECT id FROM callsites WHERE parent_id=?1 AND frame_id=?2",
                         "INSERT INTO callsites(parent_id, frame_id, depth) VALUES (?1, ?2, ?3)",
                         "cannot store call site");
    if (parent < 0) return -1;
  }
  return parent;
}

static const char *string_u(store *s, int64_t id) {
  if (id <= 0) return NULL;
  sqlite3_stmt *q = store_stmt(s, "SELECT value FROM strings WHERE id = ?1");
  if (!q) return NULL;
  sqlite3_bind_int64(q, 1, id);
  if (sqlite3_step(q) != SQLITE_ROW) {
    sqlite3_reset(q);
    return NULL;
  }
  const char *v = (const char *)sqlite3_column_text(q, 0);
  size_t len = (size_t)sqlite3_column_bytes(q, 0);
  sim_grow((void **)&s->strbuf, &s->strbuf_cap, len + 1, 1);
  memcpy(s->strbuf, v ? v : "", len);
  s->strbuf[len] = 0;
  sqlite3_reset(q);
  return s->strbuf;
}

static int stack_frames_u(store *s, int64_t id, int (*fn)(void *arg, const store_frame *f), void *arg) {
  sqlite3_stmt *q = store_stmt(s,
                               "SELECT c.parent_id, n.value, f.value, fr.line FROM callsites c "
                               "JOIN frames fr ON fr.id = c.frame_id JOIN strings n ON n.id = fr.name_id "
                               "JOIN strings f ON f.id = fr.file_id WHERE c.id = ?1");
  if (!q) return -1;
  for (int64_t cur = id; cur > 0;) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, cur);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return store_fail(s, q, "cannot read call stack");
    cur = sqlite3_column_int64(q, 0);
    store_frame f = {(const char *)sqlite3_column_text(q, 1), (const char *)sqlite3_column_text(q, 2),
                     sqlite3_column_int64(q, 3)};
    if (fn(arg, &f)) break;
  }
  sqlite3_reset(q);
  return 0;
}

typedef struct label_pick {
  frames_pick pick;
  char *label[5]; /* the candidates frames_pick may choose: the first, visible, Python, user, autograd frame */
  int at[5];
} label_pick;

static char *frame_label(const store_frame *f) {
  char buf[512];
  if (f->file && *f->file && f->line) snprintf(buf, sizeof buf, "%s (%s:%lld)", f->name, f->file, (long long)f->line);
  else if (f->file && *f->file && strcmp(f->file, "??")) snprintf(buf, sizeof buf, "%s (%s)", f->name, f->file);
  else snprintf(buf, sizeof buf, "%s", f->name ? f->name : "?");
  return strdup(buf);
}

/* Keeps the label of each frame that is the first of its kind (io/frames.h says which wins). */
static int pick_frame(void *arg, const store_frame *f) {
  label_pick *p = arg;
  int done = frames_pick_offer(&p->pick, f->name, f->file);
  const int idx[5] = {p->pick.first, p->pick.visible, p->pick.python, p->pick.user, p->pick.autograd};
  for (int k = 0; k < 5; k++)
    if (idx[k] == p->pick.n - 1 && !p->label[k]) {
      p->label[k] = frame_label(f);
      p->at[k] = idx[k];
    }
  return done;
}

char *store_stack_label(store *s, int64_t id) {
  if (id <= 0) return strdup("(no call stack)");
  label_pick p = {.at = {-1, -1, -1, -1, -1}};
  frames_pick_init(&p.pick);
  store_stack_frames(s, id, pick_frame, &p);
  int want = frames_pick_result(&p.pick);
  char *best = NULL;
  for (int k = 0; k < 5; k++) {
    if (!best && p.label[k] && p.at[k] == want) best = p.label[k];
    else free(p.label[k]);
  }
  return best ? best : strdup("(unknown call stack)");
}

/* ---- opening ---------------------------------------------------------------------------- */

static int pragma_int(store *s, const char *sql, int *out) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) return store_fail(s, NULL, "cannot read store header");
  int rc = sqlite3_step(st);
  *out = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return store_fail(s, NULL, "cannot read store header");
  return 0;
}

static int migrate(store *s, int from) {
  if (store_exec(s, "BEGIN IMMEDIATE")) return -1;
  for (int v = from + 1; v <= store_schema_version; v++) {
    if (store_exec(s, store_migration(v)) || (v == 4 && chunk_migrate_rows(s)) || (v == 5 && copy_sums_migrate(s)) ||
        (v == 6 && plans_migrate(s)) || (v == 7 && text_migrate(s)) ||
        (store_migration_after(v) && store_exec(s, store_migration_after(v)))) {
      char msg[STORE_ERRLEN];
      snprintf(msg, sizeof msg, "%s", s->err);
      sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
      store_seterr(s, "cannot upgrade store '%s' to schema version %d: %s", s->path, v, msg);
      return -1;
    }
  }
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d", STORE_APPLICATION_ID,
           store_schema_version);
  if (store_exec(s, sql) || store_exec(s, "COMMIT")) {
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return 0;
}

/* "file:PATH?immutable=1", the path percent-encoded where a URI needs it. Caller frees. */
static char *immutable_uri(const char *path) {
  size_t n = strlen(path);
  char *u = sim_xmalloc(3 * n + 32), *o = u;
  o += sprintf(o, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (*p == '%' || *p == '?' || *p == '#' || *p <= ' ' || *p >= 0x7f) o += sprintf(o, "%%%02X", *p);
    else *o++ = (char)*p;
  }
  strcpy(o, "?immutable=1");
  return u;
}

/* A store memplay did not make, or one altered since, may hold triggers or views that would run
 * when memplay reads or writes it: its schema must be exactly memplay's own. 0, or -1 with a
 * message naming the first object that is not. */
static int schema_trusted(store *s, int ver, char *err, size_t errlen) {
  if (ver == STORE_SCHEMA_REF_VERSION) { /* the common case, without building the reference */
    if (store_schema_lists_as(s->db, STORE_SCHEMA_REF)) return 0;
  }
  char what[256];
  int sc = store_schema_check(s->db, ver, what, sizeof what);
  if (!sc) return 0;
  if (sc > 0)
    snprintf(err, errlen,
             "cannot open store '%s': its schema is not the one memplay made (it was changed by hand, or damaged): "
             "%s; nothing was read or written (import the traces into a new store with --db, or use a copy "
             "made before the change)",
             s->path, what);
  else snprintf(err, errlen, "cannot open store '%s': %s", s->path, what);
  return -1;
}

/* The bound on what one connection's statements may make SQLite hold, in bytes. */
#define STORE_MAX_SQLITE_MEMORY (INT64_C(2) << 30)

static int store_progress(void *arg) {
  (void)arg;
  return store_sqlite_memory_used() > STORE_MAX_SQLITE_MEMORY;
}

/* SQLite's page cache of the connection: STORE_CACHE_KIB, or STORE_WRITER_CACHE_KIB while a
 * writer thread runs (writer_start), or STORE_READER_CACHE_KIB while a trace's events are read
 * (store_readers_add). 0, or -1. */
#define STORE_CACHE_KIB 65536
#define STORE_WRITER_CACHE_KIB 4096 /* what is dirty at the commit is written then, alone: 16 MiB cost 60-67 ns an event */
#define STORE_READER_CACHE_KIB 128
/* How often an import's log, while its chunks are written, and its log and database file, while
 * it commits, are made durable (store_flush.c): a virtual machine's disk may keep what it is given
 * in the host's cache until the fsync, so the fsyncs the commit must make wait for all of it at
 * once; made durable as they go, those find little left. */
#define STORE_IMPORT_SYNC_MS 20
#define STORE_COMMIT_SYNC_MS 5
static int store_cache_kib(store *s, int kib) {
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA cache_size = -%d", kib);
  return store_exec(s, sql);
}

/* The cache when no writer thread runs. */
static int store_idle_cache_kib(const store *s) { return s->readers ? STORE_READER_CACHE_KIB : STORE_CACHE_KIB; }

/*
 * A reader reads each page of a trace's chunks once, in order: kept in a large cache, every page
 * it reads is fresh memory that the kernel faults in and zeroes (4,000 page faults and a tenth
 * of the CPU of a 1 M-event replay), though no page is read again. While a reader is open the
 * cache is small, so that the pages its reads go through are reused: 128 KiB, eight pages of a
 * store made by this memplay. 512 KiB took a hundred more page faults to fill and saved only the
 * re-read of a chunk's index page (a 1 M-event replay: 585 faults and 931 reads of the file,
 * against 485 and 992). Called with the connection's lock held (store_lock); a read-only store
 * keeps SQLite's own small cache.
 */
void store_readers_add(store *s, int delta) {
  int before = s->readers;
  s->readers += delta;
  if (s->readonly || s->writer || !before == !s->readers) return;
  store_cache_kib(s, store_idle_cache_kib(s)); /* a failure costs speed only */
}

/* A change of journal mode: SQLite does not wait on the busy handler for the lock it needs, so
 * while another connection holds it (a new store's first import, a reader of a store that is
 * switching) it is tried again for as long as the busy timeout (harden, below). 0, or -1. */
#define STORE_BUSY_MS 10000
static int set_journal_mode(store *s, const char *sql) {
  for (int waited = 0; waited < STORE_BUSY_MS; waited += 5) {
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) return 0;
    if ((rc & 0xff) != SQLITE_BUSY) break;
    nanosleep(&(struct timespec){0, 5000000}, NULL);
  }
  return store_exec(s, sql); /* once more, for the message */
}

/*
 * A store lives in WAL mode: an import writes its pages into the log, and readers in other
 * processes go on reading the store as it was until the import commits. The price is that every
 * page is written twice, into the log and then, at the commit, copied into the database file,
 * with an fsync of each and the log's truncation after (nearly a third of a large import's wall
 * time, docs/performance.md). A store this connection has just created has no reader to keep
 * going and nothing to lose, so until its first import commits (store_commit) it keeps SQLite's
 * rollback journal instead: the import's pages are written once, into the file, and the journal
 * holds only the few pages the new store had (the schema), so that an import that fails or is
 * killed still leaves the store as it was. Other commands on the store wait for that import
 * (SQLite's locks; the busy timeout below). The switch to WAL happens at that commit, or when
 * the connection closes if no import came.
 */
static int store_use_log(store *s) {
  if (!s->journal) return 0;
  s->journal = 0;
  return set_journal_mode(s, "PRAGMA journal_mode = WAL") || store_exec(s, "PRAGMA synchronous = NORMAL");
}

/* A store opened for writing: its pragmas (larger pages for a new file: bulk loads and scans of
 * the event chunks are faster; the rollback journal until its first import, above), then the
 * migrations up to this memplay's schema. 0, or -1. */
static int open_for_writing(store *s, int fresh, int ver, char *err, size_t errlen) {
  s->journal = fresh;
  /* FULL: a rollback journal is made durable before the file changes (WAL mode needs less) */
  if ((fresh && store_exec(s, "PRAGMA page_size = 16384")) ||
      set_journal_mode(s, fresh ? "PRAGMA journal_mode = DELETE" : "PRAGMA journal_mode = WAL") ||
      store_exec(s, fresh ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL") ||
      store_exec(s, "PRAGMA foreign_keys = ON") || store_cache_kib(s, STORE_CACHE_KIB)) {
    snprintf(err, errlen, "cannot open store '%s': %s", s->path, s->err);
    return -1;
  }
  /* The log and its index stay beside the store when the last connection closes, emptied
   * (store_close): otherwise every process creates both files and deletes them again, a third
   * of the system time of a short replay. Closing still copies the log into the store, so the
   * file store.db alone is complete once memplay has exited. */
  int persist = 1;
  sqlite3_file_control(s->db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  if (ver < store_schema_version && migrate(s, ver)) {
    snprintf(err, errlen, "%s", s->err);
    return -1;
  }
  return 0;
}

/* Hardens a connection: defensive mode, an untrusted schema, no double-quoted string literals, a
 * busy timeout; and no statement runs away: past STORE_MAX_SQLITE_MEMORY of SQLite's memory it is
 * interrupted (a store altered to do so is refused by its schema; this bounds what is left). */
static void harden(sqlite3 *db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
  sqlite3_busy_timeout(db, STORE_BUSY_MS);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_progress_handler(db, 100000, store_progress, NULL);
}

/* What opening a store reads before it uses it, in one read transaction: the header (a memplay
 * store, a schema version this memplay knows: *ver) and that its schema is memplay's own
 * (*ntables objects; none in a new file). 0, or -1 with err set. */
static int check_header(store *s, int *ver, int *ntables, char *err, size_t errlen) {
  int app = 0;
  if (pragma_int(s, "PRAGMA application_id", &app) || pragma_int(s, "PRAGMA user_version", ver) ||
      pragma_int(s, "SELECT count(*) FROM sqlite_schema", ntables)) {
    snprintf(err, errlen, "cannot open store '%s': %s", s->path,
             strstr(s->err, "file is not a database") ? "not a memplay store (not an SQLite database)" : s->err);
    return -1;
  }
  if (app != STORE_APPLICATION_ID && !(app == 0 && *ver == 0 && *ntables == 0)) {
    snprintf(err, errlen, "cannot open store '%s': not a memplay store (application_id %d)", s->path, app);
    return -1;
  }
  if (*ver > store_schema_version) {
    snprintf(err, errlen,
             "cannot open store '%s': it was written by a newer memplay (schema version %d; this one knows up to %d)",
             s->path, *ver, store_schema_version);
    return -1;
  }
  return *ntables > 0 ? schema_trusted(s, *ver, err, errlen) : 0;
}

/* Whether a rollback journal with anything in it lies beside the store: what a memplay killed
 * during a new store's first import leaves (open_for_writing). */
static int journal_left(const char *path) {
  char *p = store_side_path(path, "-journal");
  struct stat st;
  int left = !stat(p, &st) && st.st_size > 0;
  free(p);
  return left;
}

/* Whether a read-only open would read the store as such an import left it, the journal unseen: an
 * immutable open never looks at it, and SQLite does not count a journal beside an empty file (the
 * import killed before the new store's schema reached it). Such an open is refused until a
 * command that writes undoes the journal. */
static int journal_unseen(const char *path, int flags) {
  if (!(flags & STORE_READONLY) || !journal_left(path)) return 0;
  struct stat st;
  return (flags & STORE_IMMUTABLE) || (!stat(path, &st) && st.st_size == 0);
}

int store_open(store **out, const char *path, int flags, char *err, size_t errlen) {
  *out = NULL;
  if (journal_unseen(path, flags)) {
    snprintf(err, errlen, "cannot open store '%s': %s", path, store_reason(SQLITE_READONLY_ROLLBACK));
    return -1;
  }
  store *s = sim_xcalloc(1, sizeof *s);
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&s->conn_lock, &ma);
  pthread_mutexattr_destroy(&ma);
  s->path = strdup(path);
  s->readonly = (flags & STORE_READONLY) != 0;
  sim_map_init(&s->stmts);
  int oflags = s->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | ((flags & STORE_CREATE) ? SQLITE_OPEN_CREATE : 0);
  char *uri = s->readonly && (flags & STORE_IMMUTABLE) ? immutable_uri(path) : NULL;
  if (uri) oflags |= SQLITE_OPEN_URI;
  store_sqlite_init();
  int orc = sqlite3_open_v2(uri ? uri : path, &s->db, oflags | SQLITE_OPEN_NOMUTEX, NULL);
  free(uri);
  if (orc != SQLITE_OK) {
    snprintf(err, errlen, "cannot open store '%s': %s", path,
             !s->db ? "out of memory"
             : store_verbose_errors ? sqlite3_errmsg(s->db)
                                    : store_reason(sqlite3_extended_errcode(s->db)));
    store_close(s);
    return -1;
  }
  harden(s->db);

  int ver = 0, ntables = 0;
  if (store_read_begin(s)) {
    snprintf(err, errlen, "cannot open store '%s': %s", path, s->err);
    store_close(s);
    return -1;
  }
  int bad = check_header(s, &ver, &ntables, err, errlen);
  store_read_end(s);
  if (bad) {
    store_close(s);
    return -1;
  }
  if (!s->readonly) {
    if (open_for_writing(s, ntables == 0 && ver == 0, ver, err, errlen)) {
      store_close(s);
      return -1;
    }
  } else if (ver == 0 && ntables == 0) { /* an empty file */
    snprintf(err, errlen, "cannot open store '%s' read-only: it is empty (import a trace into it first)", path);
    store_close(s);
    return -1;
  } else if (ver < store_schema_version) {
    snprintf(err, errlen,
             "cannot open store '%s' read-only: it needs upgrading from schema version %d to %d (open it once with "
             "a command that writes to it, such as memplay check-store or memplay replay, which upgrades it)",
             path, ver, store_schema_version);
    store_close(s);
    return -1;
  }
  *out = s;
  return 0;
}

void store_close(store *s) {
  if (!s) return;
  size_t it = 0;
  uint64_t k, v;
  while (sim_map_next(&s->stmts, &it, &k, &v)) sqlite3_finalize((sqlite3_stmt *)(uintptr_t)v);
  sim_map_release(&s->stmts);
  intern_reset_all(s);
  /* The last connection's close copies the log into the store; with the log kept
   * (SQLITE_FCNTL_PERSIST_WAL), a size limit of 0 then truncates it to nothing, so no old
   * frames lie beside the store. */
  if (s->db && !s->readonly) {
    store_use_log(s); /* a new store that no import wrote to */
    sqlite3_exec(s->db, "PRAGMA journal_size_limit = 0", NULL, NULL, NULL);
  }
  if (s->db) sqlite3_close(s->db);
  free(s->strbuf);
  free(s->path);
  pthread_mutex_destroy(&s->conn_lock);
  free(s);
}

char *store_side_path(const char *path, const char *suffix) {
  size_t n = strlen(path) + strlen(suffix) + 1;
  char *p = sim_xmalloc(n);
  snprintf(p, n, "%s%s", path, suffix);
  return p;
}

void store_remove_files(const char *path) {
  static const char *const side[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof side / sizeof *side; i++) {
    char *p = store_side_path(path, side[i]);
    unlink(p);
    free(p);
  }
}

static int writer_stop(store_writer *w);

/* ---- transactions ----------------------------------------------------------------------- */

/* Ends the read transaction a span began, if it is still open. */
static void read_tx_end(store *s) {
  if (s->read_tx && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
  s->read_tx = 0;
}

int store_read_begin(store *s) {
  s->read_depth++;
  if (!sqlite3_get_autocommit(s->db)) return 0; /* the outer span's, or a write's */
  if (store_exec(s, "BEGIN")) return -1; /* the span's reads then take their locks one by one */
  s->read_tx = 1;
  return 0;
}

void store_read_end(store *s) {
  if (s->read_depth > 0 && --s->read_depth == 0) read_tx_end(s);
}

int store_begin(store *s) {
  read_tx_end(s);
  if (store_exec(s, "BEGIN IMMEDIATE")) return -1;
  s->in_tx = 1;
  return 0;
}

int store_commit(store *s) {
  /* an import's commit writes its pages to the log and copies the log into the database file:
   * their writes are started as they go (store_flush.c) */
  store_flusher f;
  int flushing = s->bulk && !store_flusher_start(&f, s, STORE_COMMIT_SYNC_MS);
  int rc = store_exec(s, "COMMIT");
  if (flushing) store_flusher_stop(&f);
  if (rc) {
    store_rollback(s);
    return -1;
  }
  int imported = s->bulk;
  s->in_tx = s->bulk = 0;
  /* a new store's first import is in: WAL from now on (failing that, from its next open) */
  if (imported) store_use_log(s);
  return 0;
}

void store_rollback(store *s) {
  if (s->writer) writer_stop(s->writer); /* an importer that failed without aborting its writer */
  if (sqlite3_get_autocommit(s->db) == 0) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  s->in_tx = s->bulk = 0;
  /* Ids handed out inside the transaction no longer exist. */
  intern_reset_all(s);
}

/* ---- traces ----------------------------------------------------------------------------- */

static char *col_strdup(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? strdup((const char *)t) : NULL;
}

#define TRACE_COLUMNS                                                                                           \
  "id, name, source_format, source_file, device_name, device_memory, device_index, framework, allocator, "     \
  "allocator_settings, batch_size, imported_at, event_count, first_ts, last_ts, attrs, first_seq, stored_at, "   \
  "source_digest"

/* The numbers of a trace's row that readers add to others, held to what an import writes (a store
 * made elsewhere may hold anything; STORE_MAX_EVENTS bounds a trace's seqs): 0, or -1 with the
 * store's error naming the column. */
static int trace_row_ok(store *s, const store_trace *t) {
  const char *col = NULL;
  long long v = 0;
  if (t->first_seq < 0 || t->first_seq > STORE_MAX_EVENTS) col = "first_seq", v = t->first_seq;
  else if (t->event_count < 0 || t->event_count > STORE_MAX_EVENTS - t->first_seq) col = "event_count", v = t->event_count;
  else if (t->first_ts < -IO_MAX_TIME_NS || t->first_ts > IO_MAX_TIME_NS) col = "first_ts", v = t->first_ts;
  else if (t->last_ts < -IO_MAX_TIME_NS || t->last_ts > IO_MAX_TIME_NS) col = "last_ts", v = t->last_ts;
  else if (t->device_memory < 0 || t->device_memory > (int64_t)IO_MAX_BYTES) col = "device_memory", v = t->device_memory;
  else if (t->batch_size < 0 || t->batch_size > STORE_MAX_EVENTS) col = "batch_size", v = t->batch_size;
  if (!col) return 0;
  store_seterr(s, "trace '%s' in store '%s' is damaged: its row in traces holds %s = %lld, out of range", t->name,
               s->path, col, v);
  return -1;
}

/* Reads the current row of st into t: 0, or -1 (t left empty) when trace_row_ok refuses it. */
static int trace_from_row(store *s, sqlite3_stmt *st, store_trace *t) {
  memset(t, 0, sizeof *t);
  t->id = sqlite3_column_int64(st, 0);
  t->name = col_strdup(st, 1);
  t->source_format = col_strdup(st, 2);
  t->source_file = col_strdup(st, 3);
  t->device_name = col_strdup(st, 4);
  t->device_memory = sqlite3_column_int64(st, 5);
  t->device_index = sqlite3_column_type(st, 6) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 6);
  t->framework = col_strdup(st, 7);
  t->allocator = col_strdup(st, 8);
  t->allocator_settings = col_strdup(st, 9);
  t->batch_size = sqlite3_column_int64(st, 10);
  t->imported_at = col_strdup(st, 11);
  t->event_count = sqlite3_column_int64(st, 12);
  t->first_ts = sqlite3_column_int64(st, 13);
  t->last_ts = sqlite3_column_int64(st, 14);
  t->attrs = col_strdup(st, 15);
  t->first_seq = sqlite3_column_int64(st, 16);
  t->stored_at = col_strdup(st, 17);
  t->source_digest = col_strdup(st, 18);
  if (!trace_row_ok(s, t)) return 0;
  store_trace_clear(t);
  return -1;
}

void store_trace_clear(store_trace *t) {
  free(t->name);
  free(t->source_format);
  free(t->source_file);
  free(t->device_name);
  free(t->framework);
  free(t->allocator);
  free(t->allocator_settings);
  free(t->imported_at);
  free(t->attrs);
  free(t->stored_at);
  free(t->source_digest);
  memset(t, 0, sizeof *t);
}

static int trace_find_u(store *s, const char *ref, store_trace *t) {
  memset(t, 0, sizeof *t);
  sqlite3_stmt *q = store_stmt(s, "SELECT " TRACE_COLUMNS " FROM traces WHERE name = ?1");
  if (!q) return -1;
  sqlite3_bind_text(q, 1, ref, -1, SQLITE_STATIC);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_DONE) {
    char *end;
    long long id = strtoll(ref, &end, 10);
    if (*ref && !*end) {
      q = store_stmt(s, "SELECT " TRACE_COLUMNS " FROM traces WHERE id = ?1");
      if (!q) return -1;
      sqlite3_bind_int64(q, 1, id);
      rc = sqlite3_step(q);
    }
  }
  if (rc == SQLITE_ROW) {
    int bad = trace_from_row(s, q, t);
    sqlite3_reset(q);
    return bad;
  }
  if (rc == SQLITE_DONE) {
    store_seterr(s, "no trace '%s' in store '%s'", ref, s->path);
    return 1;
  }
  return store_fail(s, q, "cannot read traces");
}

int store_trace_each(store *s, int (*fn)(void *arg, const store_trace *t), void *arg) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db, "SELECT " TRACE_COLUMNS " FROM traces ORDER BY id", -1, &q, NULL) != SQLITE_OK)
    return store_fail(s, NULL, "cannot read traces");
  int rc, stop = 0;
  while (!stop && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    store_trace t;
    if (trace_from_row(s, q, &t)) {
      sqlite3_finalize(q);
      return -1;
    }
    stop = fn(arg, &t);
    store_trace_clear(&t);
  }
  if (!stop && rc != SQLITE_DONE) {
    store_fail(s, q, "cannot read traces");
    sqlite3_finalize(q);
    return -1;
  }
  sqlite3_finalize(q);
  return 0;
}

int store_trace_delete(store *s, int64_t id) {
  static const char *const sql[] = {
    "DELETE FROM event_chunks WHERE trace_id = ?1",        "DELETE FROM event_rows WHERE trace_id = ?1",
    "DELETE FROM copy_sums WHERE trace_id = ?1",           "DELETE FROM event_plans WHERE trace_id = ?1",
    "DELETE FROM event_args WHERE trace_id = ?1",      "DELETE FROM window_starts WHERE trace_id = ?1",
    "DELETE FROM recorded WHERE trace_id = ?1",   "DELETE FROM segments WHERE trace_id = ?1",
    "DELETE FROM blocks WHERE trace_id = ?1",     "DELETE FROM trace_stats WHERE trace_id = ?1",
    "UPDATE runs SET trace_id = NULL WHERE trace_id = ?1", "DELETE FROM traces WHERE id = ?1",
  };
  for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
    sqlite3_stmt *q = store_stmt(s, sql[i]);
    if (!q) return -1;
    sqlite3_bind_int64(q, 1, id);
    if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot delete trace");
  }
  return 0;
}

static char *unique_name_u(store *s, const char *base) {
  size_t n = strlen(base) + 24;
  char *name = sim_xmalloc(n);
  snprintf(name, n, "%s", base);
  for (int i = 2;; i++) {
    sqlite3_stmt *q = store_stmt(s, "SELECT 1 FROM traces WHERE name = ?1");
    if (!q) {
      free(name);
      return NULL;
    }
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sqlite3_reset(q);
    if (rc == SQLITE_DONE) return name;
    if (rc != SQLITE_ROW) {
      free(name);
      return NULL;
    }
    snprintf(name, n, "%s-%d", base, i);
  }
}

/* ---- writing ---------------------------------------------------------------------------- */

/*
 * Events are inserted by a writer thread, so that parsing (in the importer's thread) and
 * SQLite (in the writer's) overlap. The importer fills batches; the writer inserts each batch
 * while holding the connection lock, which the importer's thread takes only for the rare
 * statements it runs itself (interning misses, recorded actions, final state). Everything
 * stays in the caller's one transaction.
 */
/* Batches in flight, the one being filled included: each holds a chunk (16,384 events), and the
 * text thread makes one while the writer stores another, in bursts of a few milliseconds; with
 * four, the importer and the reading thread behind it waited for them, and a core stood idle a
 * fifth of an import's time (docs/performance.md, "Round thirteen"). */
#define NBATCHES 8
#define BATCH_RECORDED 1024 /* recorded allocator actions, which ride along */

/* A batch is (part of) one chunk: the events of consecutive stored seqs from seq0, all in the
 * chunk of seq0. */
typedef struct ev_batch {
  sim_event ev[STORE_CHUNK_EVENTS];
  size_t n;
  int64_t seq0;
  store_recorded rec[BATCH_RECORDED];
  int64_t rec_seq[BATCH_RECORDED];
  size_t nrec;
  store_text text;  /* the events' text form, made by the text thread */
  int text_ready;   /* the text form is made (a batch of no events needs none) */
} ev_batch;

struct store_writer {
  store *s;
  int64_t trace_id;
  int64_t first, next; /* seq of the first event, and of the next one appended */
  int64_t nrec;
  int64_t first_ts, last_ts;
  /* the writer thread, and the text thread beside it */
  pthread_t thread, text_thread;
  int running;
  pthread_mutex_t qlock;
  pthread_cond_t qcond;
  ev_batch *batches[NBATCHES];
  ev_batch *full[NBATCHES], *free_list[NBATCHES];
  size_t nfull, nfree, full_head;
  ev_batch *cur;
  int stop, failed;
  char err[STORE_ERRLEN];
  store_flusher sync; /* while the thread runs, the log written out and made durable as it grows (store_flush.c) */
  int syncing;
  chunk_io io; /* the writer thread's (and, while it is stopped, the importer's) */
  /* the observer, and the category changes it made to events already handed over */
  store_event_fn observe;
  void *observe_arg;
  uint64_t *late; /* seq << 8 | category | cat_source << 4 */
  size_t nlate, latecap;
  /* events put before the others (store_writer_prepend), last seq first: pre[k] has seq STORE_ROOM - 1 - k */
  sim_event *pre;
  size_t npre, precap;
  /* the copy fit's sums (store_copysums.c), added in seq order by the writer thread as it stores
   * each chunk: fit_next is the seq of the next event to add (INT64_MIN: none stored yet);
   * fit_redo: the chunks came out of order, the sums are made again from the stored chunks */
  sim_copy_fit fit;
  int64_t fit_next;
  int fit_redo;
  plan_writer plan; /* the trace's plan (store_plans.c), numbered the same way */
};

int store_lock(store *s) {
  if (!s->async) return 0;
  pthread_mutex_lock(&s->conn_lock);
  return 1;
}

void store_unlock(store *s, int token) {
  if (token) pthread_mutex_unlock(&s->conn_lock);
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

static void bind_pos_or_null(sqlite3_stmt *st, int i, int64_t v) {
  if (v > 0) sqlite3_bind_int64(st, i, v);
  else sqlite3_bind_null(st, i);
}

static int writer_start(store_writer *w);

static int writer_begin_u(store *s, const store_trace *m, store_writer **out) {
  *out = NULL;
  sqlite3_stmt *q = store_stmt(s,
                               "INSERT INTO traces(name, source_format, source_file, device_name, device_memory, "
                               "device_index, framework, allocator, allocator_settings, batch_size, imported_at, "
                               "attrs, stored_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  if (!q) return -1;
  char now[32];
  {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  }
  sqlite3_bind_text(q, 1, m->name, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 2, m->source_format ? m->source_format : "jsonl", -1, SQLITE_TRANSIENT);
  bind_text_or_null(q, 3, m->source_file);
  bind_text_or_null(q, 4, m->device_name);
  bind_pos_or_null(q, 5, m->device_memory);
  if (m->device_index >= 0) sqlite3_bind_int(q, 6, m->device_index);
  bind_text_or_null(q, 7, m->framework);
  bind_text_or_null(q, 8, m->allocator);
  bind_text_or_null(q, 9, m->allocator_settings);
  bind_pos_or_null(q, 10, m->batch_size);
  sqlite3_bind_text(q, 11, m->imported_at ? m->imported_at : now, -1, SQLITE_TRANSIENT);
  bind_text_or_null(q, 12, m->attrs);
  sqlite3_bind_text(q, 13, now, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q) != SQLITE_DONE) {
    if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_UNIQUE) {
      store_seterr(s, "a trace named '%s' already exists in store '%s' (choose another with --name)", m->name,
                   s->path);
      return -1;
    }
    return store_fail(s, q, "cannot add trace");
  }
  store_writer *w = sim_xcalloc(1, sizeof *w);
  w->s = s;
  w->trace_id = sqlite3_last_insert_rowid(s->db);
  w->first_ts = INT64_MAX;
  w->last_ts = INT64_MIN;
  w->fit_next = INT64_MIN;
  *out = w; /* its thread starts with its first event */
  return 0;
}

int64_t store_writer_trace_id(const store_writer *w) { return w->trace_id; }
int64_t store_writer_events(const store_writer *w) { return w->next - w->first; }

static int insert_batch_recorded(store_writer *w, const ev_batch *b);

/* A batch's events added to the copy fit's sums, those not added before: a chunk an earlier stop
 * stored part-filled comes again whole (writer_resume_chunk), its first events as they were. A
 * batch that does not continue the sums (a gap, or events before them) has them made again at the
 * end, from the stored chunks. */
static void writer_fit_batch(store_writer *w, const ev_batch *b) {
  if (w->fit_redo) return;
  if (w->fit_next == INT64_MIN) w->fit_next = b->seq0;
  if (b->seq0 > w->fit_next || b->seq0 + (int64_t)b->n < w->fit_next) {
    w->fit_redo = 1;
    return;
  }
  for (size_t i = (size_t)(w->fit_next - b->seq0); i < b->n; i++)
    if (b->ev[i].kind == SIM_EV_MEMCPY) sim_copy_fit_add(&w->fit, &b->ev[i]); /* the only kind it counts */
  w->fit_next = b->seq0 + (int64_t)b->n;
}

/*
 * The trace's row written again after each chunk, with the count of events stored so far, and its
 * index entries with it (name and source_digest, the columns of the indexes of traces, set to
 * themselves: a column indexed later joins them). SQLite writes a page that
 * its cache has not used for a while into the log before the commit; a page so written and
 * changed again in the same transaction is overwritten in the log in place, and the commit then
 * reads back every page the log holds after it to compute its checksums anew. The trace's row is
 * written at the import's start and again at its end (its counts, its digest), so its pages went
 * out early and the commit read back nearly the whole log (70 MB for 1 M generated events).
 * Written after each chunk, they stay among the pages the cache has used last and go to the log
 * once, at the commit.
 */
static int writer_keep_trace_row(store_writer *w, int64_t stored) {
  sqlite3_stmt *q = store_stmt(w->s, "UPDATE traces SET event_count = ?2, name = name, source_digest = source_digest "
                                     "WHERE id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_int64(q, 2, stored);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot update trace");
  sqlite3_reset(q);
  return 0;
}

/* A batch's chunk, in the writer thread: packed outside the connection lock, stored inside it
 * (replacing the chunk when an earlier stop stored it part-filled). */
static int insert_batch_events(store_writer *w, const ev_batch *b) {
  if (!b->n) return 0;
  writer_fit_batch(w, b);
  int planned = plan_writer_batch(&w->plan, b->ev, b->seq0, b->n);
  chunk_pack(&w->io, b->ev, b->n);
  pthread_mutex_lock(&w->s->conn_lock);
  int rc = chunk_store(w->s, &w->io, &b->text, w->trace_id, b->seq0, b->n);
  if (!rc && planned) rc = plan_writer_store(w->s, &w->plan, w->trace_id);
  if (!rc) rc = writer_keep_trace_row(w, b->seq0 + (int64_t)b->n - w->first);
  pthread_mutex_unlock(&w->s->conn_lock);
  return rc;
}

static int needs_text(const ev_batch *b) { return b->n && !b->text_ready; }

/* The text thread: makes the text form of each batch handed over, in order, while the writer
 * thread packs and stores the one before (the two forms cost about the same). */
static void *text_main(void *arg) {
  store_writer *w = arg;
  pthread_mutex_lock(&w->qlock);
  for (;;) {
    ev_batch *b = NULL;
    for (size_t i = 0; i < w->nfull && !b; i++)
      if (needs_text(w->full[(w->full_head + i) % NBATCHES])) b = w->full[(w->full_head + i) % NBATCHES];
    if (!b) {
      if (w->stop) break;
      pthread_cond_wait(&w->qcond, &w->qlock);
      continue;
    }
    pthread_mutex_unlock(&w->qlock);
    store_chunk_text(b->ev, b->n, &b->text);
    pthread_mutex_lock(&w->qlock);
    b->text_ready = 1;
    pthread_cond_broadcast(&w->qcond);
  }
  pthread_mutex_unlock(&w->qlock);
  return NULL;
}

static void *writer_main(void *arg) {
  store_writer *w = arg;
  pthread_mutex_lock(&w->qlock);
  for (;;) {
    while ((!w->nfull && !w->stop) || (w->nfull && needs_text(w->full[w->full_head])))
      pthread_cond_wait(&w->qcond, &w->qlock);
    if (!w->nfull) break;
    ev_batch *b = w->full[w->full_head];
    w->full_head = (w->full_head + 1) % NBATCHES;
    w->nfull--;
    int skip = w->failed;
    pthread_mutex_unlock(&w->qlock);
    if (!skip && (insert_batch_events(w, b) || insert_batch_recorded(w, b))) {
      pthread_mutex_lock(&w->qlock);
      w->failed = 1;
      snprintf(w->err, sizeof w->err, "%s", w->s->err);
      pthread_mutex_unlock(&w->qlock);
    }
    pthread_mutex_lock(&w->qlock);
    b->n = b->nrec = 0;
    b->text_ready = 0;
    w->free_list[w->nfree++] = b;
    pthread_cond_broadcast(&w->qcond);
  }
  pthread_mutex_unlock(&w->qlock);
  return NULL;
}

/* The chunk a stop stored part-filled comes back into the current batch, so that the events
 * that follow join it (the writer thread then stores it again, whole). 0, or -1. */
static int writer_resume_chunk(store_writer *w) {
  ev_batch *b = w->cur;
  b->seq0 = w->next;
  if (w->next == w->first || !(w->next & (STORE_CHUNK_EVENTS - 1))) return 0;
  chunk_meta m;
  int got = chunk_get(w->s, &w->io, w->trace_id, w->next >> STORE_CHUNK_SHIFT, 0, &m);
  if (got < 0) return -1;
  if (!got || m.seq0 + (int64_t)m.n != w->next || m.chunk != w->next >> STORE_CHUNK_SHIFT) return 0;
  memcpy(b->ev, w->io.ev, m.n * sizeof *b->ev);
  b->n = m.n;
  b->seq0 = m.seq0;
  return 0;
}

static void writer_free_batches(store_writer *w) {
  for (int i = 0; i < NBATCHES; i++) {
    store_text_release(&w->batches[i]->text);
    free(w->batches[i]);
  }
  w->cur = NULL;
}

/* Starts w's thread, after stopping the one running for another writer (one runs at a time). */
static int writer_start(store_writer *w) {
  if (w->s->writer && w->s->writer != w && writer_stop(w->s->writer)) return -1;
  w->stop = 0;
  w->nfull = w->nfree = w->full_head = 0;
  for (int i = 0; i < NBATCHES; i++) {
    w->batches[i] = sim_xmalloc(sizeof(ev_batch));
    w->batches[i]->n = w->batches[i]->nrec = 0;
    w->batches[i]->text = (store_text){0};
    w->batches[i]->text_ready = 0;
    w->free_list[w->nfree++] = w->batches[i];
  }
  w->cur = w->free_list[--w->nfree];
  if (writer_resume_chunk(w)) {
    writer_free_batches(w);
    return -1;
  }
  /* A small page cache while the thread runs: SQLite then writes the chunks' pages out as the
   * cache fills, in the writer thread beside the importer, instead of most of them at the commit,
   * after the importer is done (the writer's CPU is about the same; the commit's halves). */
  if (store_cache_kib(w->s, STORE_WRITER_CACHE_KIB)) {
    writer_free_batches(w);
    return -1;
  }
  pthread_mutex_init(&w->qlock, NULL);
  pthread_cond_init(&w->qcond, NULL);
  int started = pthread_create(&w->thread, NULL, writer_main, w) == 0;
  if (started && pthread_create(&w->text_thread, NULL, text_main, w)) {
    pthread_mutex_lock(&w->qlock);
    w->stop = 1;
    pthread_cond_broadcast(&w->qcond);
    pthread_mutex_unlock(&w->qlock);
    pthread_join(w->thread, NULL);
    started = 0;
  }
  if (!started) {
    store_cache_kib(w->s, store_idle_cache_kib(w->s));
    writer_free_batches(w);
    pthread_mutex_destroy(&w->qlock);
    pthread_cond_destroy(&w->qcond);
    store_seterr(w->s, "cannot start the writer thread");
    return -1;
  }
  w->running = 1;
  w->s->async++;
  w->s->writer = w;
  w->s->bulk = 1;
  w->syncing = !store_flusher_start(&w->sync, w->s, STORE_IMPORT_SYNC_MS);
  return 0;
}

/* Hands the current batch to the writer (and the text thread) and takes an empty one (its chunk
 * starts at seq0). */
static int writer_submit(store_writer *w, int take_new, int64_t seq0) {
  pthread_mutex_lock(&w->qlock);
  if (w->cur && (w->cur->n || w->cur->nrec)) {
    w->full[(w->full_head + w->nfull) % NBATCHES] = w->cur;
    w->nfull++;
    w->cur = NULL;
    pthread_cond_broadcast(&w->qcond);
  }
  if (take_new && !w->cur) {
    while (!w->nfree) pthread_cond_wait(&w->qcond, &w->qlock);
    w->cur = w->free_list[--w->nfree];
  }
  if (w->cur && !w->cur->n) w->cur->seq0 = seq0;
  int failed = w->failed;
  pthread_mutex_unlock(&w->qlock);
  if (failed) store_seterr(w->s, "%s", w->err);
  return failed ? -1 : 0;
}

/* Hands the current batch's recorded actions to the writer in a batch of their own (its events
 * stay: they fill their chunk first). */
static int writer_submit_recorded(store_writer *w) {
  pthread_mutex_lock(&w->qlock);
  while (!w->nfree) pthread_cond_wait(&w->qcond, &w->qlock);
  ev_batch *b = w->free_list[--w->nfree];
  b->n = 0;
  b->nrec = w->cur->nrec;
  memcpy(b->rec, w->cur->rec, b->nrec * sizeof *b->rec);
  memcpy(b->rec_seq, w->cur->rec_seq, b->nrec * sizeof *b->rec_seq);
  w->cur->nrec = 0;
  w->full[(w->full_head + w->nfull) % NBATCHES] = b;
  w->nfull++;
  pthread_cond_broadcast(&w->qcond);
  int failed = w->failed;
  pthread_mutex_unlock(&w->qlock);
  if (failed) store_seterr(w->s, "%s", w->err);
  return failed ? -1 : 0;
}

/* Stops the writer thread after it has stored everything submitted, the part-filled chunk
 * included (it starts again when another event comes). */
static int writer_stop(store_writer *w) {
  if (!w->running) {
    if (w->failed) store_seterr(w->s, "%s", w->err);
    return w->failed ? -1 : 0;
  }
  writer_submit(w, 0, w->next);
  pthread_mutex_lock(&w->qlock);
  w->stop = 1;
  pthread_cond_broadcast(&w->qcond);
  pthread_mutex_unlock(&w->qlock);
  pthread_join(w->thread, NULL);
  pthread_join(w->text_thread, NULL);
  if (w->syncing) store_flusher_stop(&w->sync);
  w->syncing = 0;
  w->running = 0;
  w->s->async--;
  w->s->writer = NULL;
  if (store_cache_kib(w->s, store_idle_cache_kib(w->s)) && !w->failed) {
    w->failed = 1;
    snprintf(w->err, sizeof w->err, "%s", w->s->err);
  }
  pthread_mutex_destroy(&w->qlock);
  pthread_cond_destroy(&w->qcond);
  writer_free_batches(w);
  if (w->failed) {
    store_seterr(w->s, "%s", w->err);
    return -1;
  }
  return 0;
}

int store_writer_event(store_writer *w, sim_event *ev) {
  if (w->next >= STORE_MAX_EVENTS) {
    store_seterr(w->s, "a trace holds at most %lld events%s", (long long)(STORE_MAX_EVENTS - w->first),
                 w->first ? " after the room left before them" : "");
    return -1;
  }
  if (!w->running && writer_start(w)) return -1;
  ev->seq = w->next++;
  if (ev->ts < w->first_ts) w->first_ts = ev->ts;
  if (ev->ts > w->last_ts) w->last_ts = ev->ts;
  ev_batch *b = w->cur;
  b->ev[b->n++] = *ev;
  if (w->observe && w->observe(w->observe_arg, &b->ev[b->n - 1])) return -1;
  /* a chunk ends where the next seq starts another */
  if (!(w->next & (STORE_CHUNK_EVENTS - 1))) return writer_submit(w, 1, w->next);
  return 0;
}

int store_writer_leave_room(store_writer *w) {
  if (w->next != w->first) {
    store_seterr(w->s, "room before a trace's events must be left before its first event");
    return -1;
  }
  w->first = w->next = STORE_ROOM;
  return 0;
}

/* Prepended events wait in memory (the rebuilt live blocks: as many as the blocks live at the
 * window's start) and are stored as chunks when the trace ends. */
int store_writer_prepend(store_writer *w, sim_event *ev) {
  if (w->first <= 0) {
    store_seterr(w->s, "no room left before the trace's first event (at most %lld events can be put there)",
                 (long long)STORE_ROOM);
    return -1;
  }
  ev->seq = --w->first;
  if (ev->ts < w->first_ts) w->first_ts = ev->ts;
  if (ev->ts > w->last_ts) w->last_ts = ev->ts;
  sim_grow((void **)&w->pre, &w->precap, w->npre + 1, sizeof *w->pre);
  w->pre[w->npre++] = *ev;
  return 0;
}

void store_writer_observe(store_writer *w, store_event_fn fn, void *arg) {
  w->observe = fn;
  w->observe_arg = arg;
}

void store_writer_set_category(store_writer *w, int64_t seq, int category, int cat_source) {
  sim_event *ev = NULL;
  if (w->cur && seq >= w->cur->seq0 && seq - w->cur->seq0 < (int64_t)w->cur->n) ev = &w->cur->ev[seq - w->cur->seq0];
  else if (w->npre && seq >= w->first && seq < STORE_ROOM)
    ev = &w->pre[STORE_ROOM - 1 - seq];
  if (ev) {
    ev->category = (uint8_t)(category & 15);
    ev->cat_source = (uint8_t)(cat_source & 15);
    return;
  }
  sim_grow((void **)&w->late, &w->latecap, w->nlate + 1, sizeof *w->late);
  w->late[w->nlate++] = (uint64_t)seq << 8 | (uint64_t)(category & 15) | (uint64_t)(cat_source & 15) << 4;
}

/* The prepended events, in seq order, as the chunks they fall in. */
static int writer_store_prepended(store_writer *w) {
  if (!w->npre) return 0;
  sim_event *ev = sim_xmalloc(w->npre * sizeof *ev);
  for (size_t k = 0; k < w->npre; k++) ev[k] = w->pre[w->npre - 1 - k];
  int rc = 0;
  for (size_t i = 0; i < w->npre && !rc;) {
    int64_t seq0 = ev[i].seq;
    size_t n = (size_t)(STORE_CHUNK_EVENTS - (seq0 & (STORE_CHUNK_EVENTS - 1)));
    if (n > w->npre - i) n = w->npre - i;
    rc = chunk_put(w->s, &w->io, w->trace_id, seq0, ev + i, n);
    i += n;
  }
  free(ev);
  return rc;
}

/* The category changes to events the writer thread had already taken, chunk by chunk. */
static int writer_late_categories(store_writer *w) {
  if (!w->nlate) return 0;
  return store_set_categories(w->s, w->trace_id, w->late, w->nlate);
}

static int insert_recorded(store_writer *w, int64_t seq, const store_recorded *r) {
  sqlite3_stmt *q = store_stmt(w->s,
                               "INSERT INTO recorded(trace_id, seq, before_seq, ts, action, device, stream, addr, size, "
                               "allocated, reserved, device_free, stack_id) VALUES "
                               "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_int64(q, 2, seq);
  sqlite3_bind_int64(q, 3, r->before_seq);
  sqlite3_bind_int64(q, 4, r->ts);
  sqlite3_bind_text(q, 5, r->action, -1, SQLITE_STATIC);
  sqlite3_bind_int(q, 6, r->device);
  sqlite3_bind_int64(q, 7, r->stream);
  sqlite3_bind_int64(q, 8, (int64_t)r->addr);
  sqlite3_bind_int64(q, 9, (int64_t)r->size);
  if (r->allocated >= 0) sqlite3_bind_int64(q, 10, r->allocated);
  if (r->reserved >= 0) sqlite3_bind_int64(q, 11, r->reserved);
  if (r->device_free >= 0) sqlite3_bind_int64(q, 12, r->device_free);
  if (r->stack > 0) sqlite3_bind_int64(q, 13, r->stack);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot store recorded allocator action");
  return 0;
}

static int writer_recorded_u(store_writer *w, const store_recorded *r) {
  if (insert_recorded(w, w->nrec, r)) return -1;
  w->nrec++;
  return 0;
}

/* The recorded actions of a batch, in the writer thread. */
static int insert_batch_recorded(store_writer *w, const ev_batch *b) {
  if (!b->nrec) return 0;
  pthread_mutex_lock(&w->s->conn_lock);
  int rc = 0;
  for (size_t i = 0; i < b->nrec && !rc; i++) rc = insert_recorded(w, b->rec_seq[i], &b->rec[i]);
  pthread_mutex_unlock(&w->s->conn_lock);
  return rc;
}

/* The action's name as a string that outlives the caller's (NULL for one the store does not know). */
static const char *recorded_action(const char *a) {
  static const char *const names[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap",
                                      "oom",           "snapshot",     "totals",      NULL};
  for (size_t i = 0; a && names[i]; i++)
    if (!strcmp(names[i], a)) return names[i];
  return NULL;
}

static int writer_segment_u(store_writer *w, const store_segment *g) {
  sqlite3_stmt *q = store_stmt(w->s,
                               "INSERT INTO segments(trace_id, device, address, total_size, stream, pool, expandable, "
                               "allocated_size, requested_size, active_size, stack_id) VALUES "
                               "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_int(q, 2, g->device);
  sqlite3_bind_int64(q, 3, (int64_t)g->address);
  sqlite3_bind_int64(q, 4, (int64_t)g->total_size);
  sqlite3_bind_int64(q, 5, g->stream);
  bind_text_or_null(q, 6, g->pool);
  sqlite3_bind_int(q, 7, g->expandable);
  if (g->allocated_size >= 0) sqlite3_bind_int64(q, 8, g->allocated_size);
  if (g->requested_size >= 0) sqlite3_bind_int64(q, 9, g->requested_size);
  if (g->active_size >= 0) sqlite3_bind_int64(q, 10, g->active_size);
  if (g->stack > 0) sqlite3_bind_int64(q, 11, g->stack);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot store segment");
  return 0;
}

static int writer_block_u(store_writer *w, const store_block *b) {
  sqlite3_stmt *q = store_stmt(w->s,
                               "INSERT INTO blocks(trace_id, segment_address, address, size, requested_size, state, "
                               "stack_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_int64(q, 2, (int64_t)b->segment_address);
  sqlite3_bind_int64(q, 3, (int64_t)b->address);
  sqlite3_bind_int64(q, 4, (int64_t)b->size);
  sqlite3_bind_int64(q, 5, (int64_t)b->requested_size);
  sqlite3_bind_text(q, 6, b->state, -1, SQLITE_TRANSIENT);
  if (b->stack > 0) sqlite3_bind_int64(q, 7, b->stack);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot store block");
  return 0;
}

static int writer_arg_u(store_writer *w, int64_t seq, const char *key, const char *json_value) {
  sqlite3_stmt *q = store_stmt(w->s, "INSERT OR REPLACE INTO event_args(trace_id, seq, key, value) VALUES (?1, ?2, ?3, ?4)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_int64(q, 2, seq);
  sqlite3_bind_text(q, 3, key, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 4, json_value, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot store event field");
  return 0;
}

static int writer_stat_u(store_writer *w, const char *name, const char *severity, int64_t value, const char *detail) {
  sqlite3_stmt *q = store_stmt(w->s,
                               "INSERT INTO trace_stats(trace_id, name, severity, value, detail) VALUES (?1, ?2, ?3, ?4, ?5) "
                               "ON CONFLICT(trace_id, name) DO UPDATE SET value = value + excluded.value, "
                               "detail = coalesce(excluded.detail, detail)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_text(q, 2, name, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 3, severity, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(q, 4, value);
  bind_text_or_null(q, 5, detail);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot store import note");
  return 0;
}

static int valid_trace_column(const char *c) {
  static const char *const cols[] = {"name", "source_format", "source_file", "device_name", "device_memory", "device_index",
                                     "framework",     "allocator",   "allocator_settings", "batch_size", "attrs", NULL};
  for (size_t i = 0; cols[i]; i++)
    if (!strcmp(cols[i], c)) return 1;
  return 0;
}

/* Sets one trace column: text when text is non-NULL or is_text, else the integer v. */
static int writer_set_u(store_writer *w, const char *column, int is_text, const char *text, int64_t v) {
  if (!valid_trace_column(column)) {
    store_seterr(w->s, "no trace field '%s'", column);
    return -1;
  }
  char sql[128];
  snprintf(sql, sizeof sql, "UPDATE traces SET %s = ?1 WHERE id = ?2", column);
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(w->s->db, sql, -1, &q, NULL) != SQLITE_OK) return store_fail(w->s, NULL, "cannot update trace");
  if (is_text) bind_text_or_null(q, 1, text);
  else sqlite3_bind_int64(q, 1, v);
  sqlite3_bind_int64(q, 2, w->trace_id);
  int rc = sqlite3_step(q);
  sqlite3_finalize(q);
  if (rc == SQLITE_CONSTRAINT_UNIQUE && text) {
    store_seterr(w->s, "a trace named '%s' already exists in store '%s' (choose another with --name)", text, w->s->path);
    return -1;
  }
  return rc == SQLITE_DONE ? 0 : store_fail(w->s, NULL, "cannot update trace");
}

/* The late category changes and the trace's counts, once its thread has stopped. */
static void writer_free(store_writer *w) {
  chunk_io_release(&w->io);
  plan_writer_release(&w->plan);
  free(w->late);
  free(w->pre);
  free(w);
}

/* The copy fit's sums kept: those the writer thread added, unless events came before them that
 * count (prepended copies) or the chunks came out of order; then a pass over the stored chunks. */
static int writer_copy_sums(store_writer *w) {
  sim_copy_fit pre;
  sim_copy_fit_init(&pre);
  for (size_t i = 0; i < w->npre; i++) sim_copy_fit_add(&pre, &w->pre[i]);
  if (pre.copies || w->fit_redo) return copy_sums_of_trace(w->s, w->trace_id);
  return copy_sums_put(w->s, w->trace_id, &w->fit);
}

/* The plan the writer thread kept, unless events came before them or out of order: then numbered
 * again from the stored chunks. */
static int writer_plan(store_writer *w) { return w->npre || w->plan.redo ? plans_of_trace(w->s, w->trace_id) : 0; }

static int writer_finish_u(store_writer *w) {
  if (writer_store_prepended(w) || writer_late_categories(w) || writer_copy_sums(w) || writer_plan(w)) return -1;
  sqlite3_stmt *q = store_stmt(w->s, "UPDATE traces SET event_count = ?1, first_ts = ?2, last_ts = ?3, "
                                     "first_seq = ?5 WHERE id = ?4");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->next - w->first);
  if (w->next > w->first) {
    sqlite3_bind_int64(q, 2, w->first_ts);
    sqlite3_bind_int64(q, 3, w->last_ts);
  }
  sqlite3_bind_int64(q, 4, w->trace_id);
  sqlite3_bind_int64(q, 5, w->first);
  return sqlite3_step(q) == SQLITE_DONE ? 0 : store_fail(w->s, q, "cannot finish trace");
}

int store_writer_end(store_writer *w) {
  int rc = writer_stop(w);
  if (!rc) {
    int t = store_lock(w->s); /* another writer's thread may run */
    rc = writer_finish_u(w);
    store_unlock(w->s, t);
  }
  writer_free(w);
  return rc;
}

/* Moves the device events and recorded actions written so far to another device. */
static int writer_set_device_u(store_writer *w, int device) {
  if (chunk_set_device(w->s, w->trace_id, device)) return -1;
  for (size_t i = 0; i < w->npre; i++)
    if (w->pre[i].device >= 0) w->pre[i].device = (int16_t)device;
  sqlite3_stmt *q = store_stmt(w->s, "UPDATE recorded SET device = ?2 WHERE trace_id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, w->trace_id);
  sqlite3_bind_int(q, 2, device);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(w->s, q, "cannot move recorded actions to another device");
  sqlite3_reset(q);
  return 0;
}

void store_writer_abort(store_writer *w) {
  if (!w) return;
  char keep[STORE_ERRLEN];
  snprintf(keep, sizeof keep, "%s", w->s->err);
  writer_stop(w);
  snprintf(w->s->err, sizeof w->s->err, "%s", keep);
  writer_free(w);
}

/* The importer's side of the connection, locked against the writer thread. */
int64_t store_intern_string(store *s, const char *str, size_t len) {
  uint64_t probe;
  int64_t id = intern_find(&s->strings, str, len, &probe);
  if (id) return id;
  int t = store_lock(s);
  id = intern_string_u(s, str, len);
  store_unlock(s, t);
  return id;
}

int64_t store_intern_stack(store *s, const store_frame *frames, size_t n) {
  int t = store_lock(s);
  int64_t id = intern_stack_u(s, frames, n);
  store_unlock(s, t);
  return id;
}

#define LOCKED(call)            \
  do {                          \
    int t_ = store_lock(w->s);  \
    int rc_ = (call);           \
    store_unlock(w->s, t_);     \
    return rc_;                 \
  } while (0)

/* While the writer thread runs, recorded actions go with the events, so that the importer's
 * thread does not wait for the connection. */
int store_writer_recorded(store_writer *w, const store_recorded *r) {
  const char *action = recorded_action(r->action);
  if (!w->running || !action) LOCKED(writer_recorded_u(w, r));
  ev_batch *b = w->cur;
  b->rec[b->nrec] = *r;
  b->rec[b->nrec].action = action;
  b->rec_seq[b->nrec++] = w->nrec++;
  return b->nrec == BATCH_RECORDED ? writer_submit_recorded(w) : 0;
}
int store_writer_segment(store_writer *w, const store_segment *g) { LOCKED(writer_segment_u(w, g)); }
int store_writer_block(store_writer *w, const store_block *b) { LOCKED(writer_block_u(w, b)); }
int store_writer_arg(store_writer *w, int64_t seq, const char *key, const char *json_value) {
  LOCKED(writer_arg_u(w, seq, key, json_value));
}
int store_writer_stat(store_writer *w, const char *name, const char *severity, int64_t value, const char *detail) {
  LOCKED(writer_stat_u(w, name, severity, value, detail));
}
int store_writer_set(store_writer *w, const char *column, const char *text) { LOCKED(writer_set_u(w, column, 1, text, 0)); }
int store_writer_set_int(store_writer *w, const char *column, int64_t v) { LOCKED(writer_set_u(w, column, 0, NULL, v)); }
int store_writer_flush(store_writer *w) { return w ? writer_stop(w) : 0; }

int store_writer_set_device(store_writer *w, int device) {
  if (writer_stop(w)) return -1;
  LOCKED(writer_set_device_u(w, device));
}

int store_trace_find(store *s, const char *ref, store_trace *t) {
  int tok = store_lock(s);
  int rc = trace_find_u(s, ref, t);
  store_unlock(s, tok);
  return rc;
}

int store_trace_find_digest(store *s, const char *digest, store_trace *t) {
  memset(t, 0, sizeof *t);
  int tok = store_lock(s);
  int rc = -1;
  sqlite3_stmt *q = store_stmt(s, "SELECT " TRACE_COLUMNS " FROM traces WHERE source_digest = ?1 ORDER BY id LIMIT 1");
  if (q) {
    sqlite3_bind_text(q, 1, digest, -1, SQLITE_STATIC);
    int st = sqlite3_step(q);
    if (st == SQLITE_ROW) {
      rc = trace_from_row(s, q, t);
    } else if (st == SQLITE_DONE) {
      rc = 1;
    } else {
      rc = store_fail(s, q, "cannot read traces");
    }
    if (rc >= 0) sqlite3_reset(q);
  }
  store_unlock(s, tok);
  return rc;
}

int store_traces_set_digest(store *s, int64_t after_id, const char *digest) {
  int tok = store_lock(s);
  int rc = -1;
  sqlite3_stmt *q = store_stmt(s, "UPDATE traces SET source_digest = ?1 WHERE id > ?2");
  if (q) {
    sqlite3_bind_text(q, 1, digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, after_id);
    rc = sqlite3_step(q) == SQLITE_DONE ? 0 : store_fail(s, q, "cannot mark the imported traces");
    if (!rc) sqlite3_reset(q);
  }
  store_unlock(s, tok);
  return rc;
}

char *store_unique_name(store *s, const char *base) {
  int tok = store_lock(s);
  char *n = unique_name_u(s, base);
  store_unlock(s, tok);
  return n;
}

const char *store_string(store *s, int64_t id) {
  int tok = store_lock(s);
  const char *v = string_u(s, id);
  store_unlock(s, tok);
  return v;
}

int store_stack_frames(store *s, int64_t id, int (*fn)(void *arg, const store_frame *f), void *arg) {
  int tok = store_lock(s);
  int rc = stack_frames_u(s, id, fn, arg);
  store_unlock(s, tok);
  return rc;
}

int store_writer_begin(store *s, const store_trace *m, store_writer **out) {
  int tok = store_lock(s);
  int rc = writer_begin_u(s, m, out);
  store_unlock(s, tok);
  return rc;
}

/* test_store_flush.c: how a large import reaches the disk: its pages go to the write-ahead log once
 * (to the file itself when it is a new store's first), and its commit starts the writes of the log and of the database file through SQLite's own
 * descriptor, which it leaves open. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_int.h"
#include "test.h"

int test_failures;

static char dir[256];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* The events a trace holds, as its row says, or -1. */
static int64_t events_of(store *s, const char *name) {
  store_trace t;
  if (store_trace_find(s, name, &t)) return -1;
  int64_t n = t.event_count;
  store_trace_clear(&t);
  return n;
}

static store *open_new(const char *name) {
  char p[512], err[STORE_ERRLEN];
  path_of(p, sizeof p, name);
  store *s = NULL;
  if (store_open(&s, p, STORE_CREATE, err, sizeof err)) fprintf(stderr, "%s\n", err);
  return s;
}

/* Bytes this process has read through read(2) and its kind so far (Linux's /proc/self/io), or -1. */
static int64_t bytes_read(void) {
  FILE *f = fopen("/proc/self/io", "r");
  if (!f) return -1;
  char line[128];
  long long v = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "rchar: %lld", &v) == 1) break;
  fclose(f);
  return v;
}

/* Events enough to pass the writer's page cache several times over (about 35 MB of pages). */
static int write_big_trace(store *s, const char *name, int n) {
  store_trace m = {.name = (char *)name, .source_format = (char *)"jsonl", .device_index = 0};
  store_writer *w;
  if (store_writer_begin(s, &m, &w)) return -1;
  store_frame fr[1] = {{"step", "train.py", 12}};
  int64_t stack = store_intern_stack(s, fr, 1);
  for (int i = 0; i < n; i++) {
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = i % 2 ? SIM_EV_FREE : SIM_EV_ALLOC;
    ev.addr = UINT64_C(0x7f0000000000) + (uint64_t)(i / 2) * 4096;
    ev.size = 512 + (uint64_t)i * 7919 % 100000;
    ev.ts = INT64_C(1700000000000000000) + (int64_t)i * 1377;
    ev.dev_ts = ev.ts + 500;
    ev.stack = stack;
    ev.step = i / 5000;
    if (store_writer_event(w, &ev)) {
      store_writer_abort(w);
      return -1;
    }
  }
  return store_writer_end(w);
}

/*
 * SQLite overwrites in place a page it has written into the log earlier in the same transaction,
 * and its commit then reads back every page after it to compute the log's checksums again. The
 * trace's row is written at the import's start and again at its end; the writer keeps it among
 * the pages its cache has used last, so that the commit reads the log once (to copy it into the
 * database file), not twice.
 */
static void a_large_import_goes_to_the_log_once(void) {
  store *s = open_new("once.db");
  if (!s) return;
  /* a store that holds a trace already: imports into it go through the log */
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(write_big_trace(s, "first", 100), 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(write_big_trace(s, "big", 500000), 0);
  /* what an importer does at the end: the digest of its file, an index entry of the row */
  CHECK_EQ(store_traces_set_digest(s, 0, "0123456789abcdef"), 0);
  int64_t before = bytes_read();
  CHECK_EQ(store_commit(s), 0);
  int64_t after = bytes_read();
  char wal[600];
  snprintf(wal, sizeof wal, "%s/once.db-wal", dir);
  struct stat st;
  CHECK_EQ(stat(wal, &st), 0);
  if (before < 0 || after < 0) {
    fprintf(stderr, "  (no /proc/self/io here: the reads at the commit are not counted)\n");
  } else {
    /* the writer's cache is 16 MiB: the log holds more than it, so the cache spilled */
    CHECK(st.st_size > 24 << 20);
    fprintf(stderr, "  log %lld bytes, read at the commit %lld\n", (long long)st.st_size, (long long)(after - before));
    CHECK(after - before < st.st_size + st.st_size / 2);
  }
  CHECK_EQ(events_of(s, "big"), 500000);
  store_close(s);
}

/* The connection's journal mode ("wal", "delete"), in buf. */
static const char *journal_mode(store *s, char *buf, size_t n) {
  sqlite3_stmt *st;
  snprintf(buf, n, "?");
  if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode", -1, &st, NULL) != SQLITE_OK) return buf;
  if (sqlite3_step(st) == SQLITE_ROW) snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  return buf;
}

/* The size of the file name + suffix in dir, or -1 when there is none. */
static long long file_size(const char *name, const char *suffix) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s%s", dir, name, suffix);
  struct stat st;
  return stat(p, &st) ? -1 : (long long)st.st_size;
}

/*
 * A store just created has no reader to keep going: its first import writes its pages once,
 * into the file, under a rollback journal that holds only the new store's few pages; the commit
 * reads nothing back, and the store is in WAL mode from then on. An import that fails leaves
 * the new store as it was, and closing it switches it to WAL mode as well.
 */
static void a_new_stores_first_import_goes_to_the_file_once(void) {
  store *s = open_new("new.db");
  if (!s) return;
  char mode[16];
  CHECK_STR(journal_mode(s, mode, sizeof mode), "delete");
  long long empty = file_size("new.db", "");
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(write_big_trace(s, "big", 500000), 0);
  /* the writer's cache (16 MiB) spilled into the file itself (about 34 MB of pages in all); the
   * journal holds the old pages */
  CHECK(file_size("new.db", "") > 16 << 20);
  CHECK(file_size("new.db", "-journal") >= 0 && file_size("new.db", "-journal") <= empty + 65536);
  CHECK_EQ(file_size("new.db", "-wal"), -1);
  /* the files as a memplay killed here would leave them, for below */
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cp '%s/new.db' '%s/hot.db' && cp '%s/new.db-journal' '%s/hot.db-journal'", dir, dir, dir, dir);
  CHECK_EQ(system(cmd), 0);
  int64_t before = bytes_read();
  CHECK_EQ(store_commit(s), 0);
  int64_t after = bytes_read();
  if (before >= 0 && after >= 0) CHECK(after - before < 1 << 20);
  CHECK_STR(journal_mode(s, mode, sizeof mode), "wal");
  CHECK_EQ(file_size("new.db", "-journal"), -1);
  CHECK_EQ(events_of(s, "big"), 500000);
  /* the next import goes through the log */
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(write_big_trace(s, "small", 100), 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK(file_size("new.db", "-wal") > 0);
  store_close(s);

  s = open_new("failed.db");
  if (!s) return;
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(write_big_trace(s, "big", 300000), 0);
  store_rollback(s);
  CHECK_EQ(file_size("failed.db", ""), empty);
  CHECK_EQ(file_size("failed.db", "-journal"), -1);
  CHECK_EQ(events_of(s, "big"), -1);
  CHECK_STR(journal_mode(s, mode, sizeof mode), "delete");
  store_close(s);
  s = open_new("failed.db");
  if (!s) return;
  CHECK_STR(journal_mode(s, mode, sizeof mode), "wal");
  store_close(s);

  /* killed before its commit: a read-only open says what to do; an open for writing undoes it */
  char p[600], err[STORE_ERRLEN];
  path_of(p, sizeof p, "hot.db");
  CHECK(store_open(&s, p, STORE_READONLY, err, sizeof err) != 0);
  CHECK(strstr(err, "was interrupted, and what it left must be undone") != NULL);
  err[0] = 0; /* an immutable open (compare's shards) would read the half-written file: refused */
  CHECK(store_open(&s, p, STORE_READONLY | STORE_IMMUTABLE, err, sizeof err) != 0);
  CHECK(strstr(err, "was interrupted, and what it left must be undone") != NULL);
  s = open_new("hot.db");
  if (!s) return;
  CHECK_EQ(events_of(s, "big"), -1);
  CHECK_EQ(file_size("hot.db", "-journal"), -1);
  CHECK_STR(journal_mode(s, mode, sizeof mode), "wal");
  store_close(s);
}

/* The thread the commit runs beside finds the database file's own descriptor, and leaves it, and
 * the log's, as they were. */
static void flusher_leaves_descriptors_open(const char *name, int sync_ms) {
  store *s = open_new(name);
  if (!s) return;
  store_flusher f;
  if (store_flusher_start(&f, s, sync_ms)) {
    fprintf(stderr, "  (no sync_file_range here: nothing to start)\n");
    store_close(s);
    return;
  }
  int fd = f.db_fd;
  if (sync_ms) { /* long enough for the thread to make both files durable a few times */
    struct timespec pause = {0, 20 * 1000000};
    nanosleep(&pause, NULL);
  }
  store_flusher_stop(&f);
  char p[512];
  path_of(p, sizeof p, name);
  struct stat want, got;
  CHECK_EQ(stat(p, &want), 0);
  CHECK(fd >= 0);
  if (fd >= 0) {
    CHECK(fcntl(fd, F_GETFD) != -1); /* still open */
    CHECK_EQ(fstat(fd, &got), 0);
    CHECK(got.st_ino == want.st_ino && got.st_dev == want.st_dev);
  }
  /* the connection works as before, its locks kept: a write and a read */
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(write_big_trace(s, "small", 100), 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK_EQ(events_of(s, "small"), 100);
  store_close(s);
}

static void the_flusher_uses_sqlites_descriptor_and_leaves_it_open(void) { flusher_leaves_descriptors_open("flush.db", 0); }

/* The same when it also makes the files durable every few milliseconds (fdatasync). */
static void the_syncing_flusher_leaves_them_open_too(void) { flusher_leaves_descriptors_open("sync.db", 2); }

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/memplay-flush-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  RUN(a_large_import_goes_to_the_log_once);
  RUN(a_new_stores_first_import_goes_to_the_file_once);
  RUN(the_flusher_uses_sqlites_descriptor_and_leaves_it_open);
  RUN(the_syncing_flusher_leaves_them_open_too);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) return 1;
  TEST_MAIN_END();
}

/* fuzz_import.c: libFuzzer harness for one importer, chosen at build time (FUZZ_FORMAT): bytes in, a trace or a clean error out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/importer.h"

/*
 * Built once per format (tests/fuzz/CMakeLists.txt: fuzz_snapshot, fuzz_jsonl, fuzz_kineto,
 * fuzz_timeline, fuzz_nsys, fuzz_bfc_log). Each input is written to a file and imported with --format FUZZ_FORMAT into one
 * in-memory store that lives for the whole run. An import either fails with a message and
 * leaves the store as it was (the trace count and the event count are checked), or succeeds and
 * adds a trace, which is then deleted again (store_trace_delete, as `memplay rm` does).
 */
#ifndef FUZZ_FORMAT
#error "FUZZ_FORMAT names the importer"
#endif

/* the events stored, counted from their chunks (the events view is for plain SQL) */
#define EVENTS_STORED "SELECT coalesce(sum(n), 0) FROM event_chunks"

static store *s;
static char path[4096];

static void remove_input(void) { unlink(path); }

static int64_t count(const char *sql) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK) abort();
  if (sqlite3_step(q) != SQLITE_ROW) abort();
  int64_t n = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!s) {
    char err[STORE_ERRLEN];
    if (store_open(&s, ":memory:", STORE_CREATE, err, sizeof err)) abort();
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/memplay-fuzz-%s-%d", dir && *dir ? dir : P_tmpdir, FUZZ_FORMAT, (int)getpid());
    atexit(remove_input);
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size) fwrite(data, 1, size, f);
  fclose(f);
  int64_t traces = count("SELECT count(*) FROM traces"), events = count(EVENTS_STORED);
  import_ctx ctx = {.s = s, .path = path};
  if (import_file(&ctx, FUZZ_FORMAT)) {
    /* a failure says why and leaves the store alone */
    if (!ctx.err[0] || count("SELECT count(*) FROM traces") != traces || count(EVENTS_STORED) != events)
      abort();
  } else {
    if (count("SELECT count(*) FROM traces") <= traces) abort();
    if (store_begin(s)) abort();
    for (int64_t id; (id = count("SELECT coalesce(max(id), 0) FROM traces")) > 0;)
      if (store_trace_delete(s, id)) abort();
    if (store_commit(s)) abort();
  }
  return 0;
}

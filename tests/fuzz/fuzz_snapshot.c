/* fuzz_snapshot.c: libFuzzer harness for the whole snapshot import: bytes in, a trace or a clean error out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "import/importer.h"

/*
 * Each input is written to a file and imported with --format pytorch_snapshot into one
 * in-memory store that lives for the whole run. An import either fails with a message (and
 * leaves the store as it was: the harness checks that the trace count did not change) or
 * succeeds, and then its traces are deleted again.
 */

static store *s;
static char path[4096];

static void remove_input(void) { unlink(path); }

static int count_traces(void) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(s), "SELECT count(*) FROM traces", -1, &q, NULL) != SQLITE_OK) abort();
  if (sqlite3_step(q) != SQLITE_ROW) abort();
  int n = sqlite3_column_int(q, 0);
  sqlite3_finalize(q);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!s) {
    char err[STORE_ERRLEN];
    if (store_open(&s, ":memory:", STORE_CREATE, err, sizeof err)) abort();
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/memplay-fuzz-%d.pickle", dir && *dir ? dir : P_tmpdir, (int)getpid());
    atexit(remove_input);
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  fwrite(data, 1, size, f);
  fclose(f);
  int before = count_traces();
  import_ctx ctx = {.s = s, .path = path};
  if (import_file(&ctx, "pytorch_snapshot")) {
    if (!ctx.err[0] || count_traces() != before) abort(); /* a failure says why and leaves the store alone */
  } else {
    if (count_traces() <= before) abort();
    if (store_exec(s, "BEGIN") || store_exec(s, "DELETE FROM events; DELETE FROM recorded; DELETE FROM segments; "
                                                "DELETE FROM blocks; DELETE FROM trace_stats; DELETE FROM event_args; "
                                                "DELETE FROM traces") ||
        store_exec(s, "COMMIT"))
      abort();
  }
  return 0;
}

/* fuzz_lua.c: libFuzzer harness for the Lua host and the memplay library's arguments: a script in, a result or a clean error out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/importer.h"
#include "lua/lua_api.h"
#include "lua/lua_host.h"

/*
 * Each input is run as a script (`memplay run`, with small budgets: 2 million instructions and
 * 64 MiB; no wall-clock timeout, whose watchdog ends the process when a C function overruns it,
 * which ended whole campaigns: libFuzzer's -timeout, 20 s in tools/fuzz-campaign.sh, reports an
 * input that runs that long instead) against an in-memory store that holds the bundled sample trace under the name
 * "sample". The seeds (tests/fuzz/corpus/lua) call every function of the library, so that
 * mutations reach them with odd arguments: wrong types, huge and negative numbers, NaN, empty
 * and binary strings, tables of the wrong shape, callbacks that fail. A script either succeeds
 * or fails with a message; nothing it did reaches the store (the run is abandoned), which the
 * harness checks.
 */
#ifndef FUZZ_SAMPLE
#error "FUZZ_SAMPLE is the path of traces/sample.jsonl"
#endif

static store *s;
static FILE *devnull;

static int64_t count(const char *sql) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK) abort();
  if (sqlite3_step(q) != SQLITE_ROW) abort();
  int64_t n = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  return n;
}

static void setup(void) {
  char err[STORE_ERRLEN];
  if (store_open(&s, ":memory:", STORE_CREATE, err, sizeof err)) abort();
  import_ctx ic = {.s = s, .path = FUZZ_SAMPLE, .name = "sample"};
  if (import_file(&ic, "jsonl")) {
    fprintf(stderr, "fuzz_lua: %s\n", ic.err);
    abort();
  }
  devnull = fopen("/dev/null", "w");
  if (!devnull) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!s) setup();
  int64_t traces = count("SELECT count(*) FROM traces"), runs = count("SELECT count(*) FROM runs");
  lua_ctx cx;
  lua_ctx_init(&cx);
  cx.st = s;
  cx.script = "fuzz.lua";
  cx.scenario = "fuzz";
  cx.out = devnull;
  cx.no_runs = 1;
  lua_host_limits lim = {.max_memory = 64 << 20, .max_instructions = 2000000, .timeout_s = 0};
  char err[1024];
  lua_host *h = lua_api_host(&cx, &lim, err, sizeof err);
  if (!h) abort();
  lua_host_status st = lua_host_run_string(h, "=fuzz.lua", (const char *)data, size);
  if (st != LUA_HOST_OK && !lua_host_error(h)[0]) abort(); /* a failure says why */
  lua_api_abort(&cx);
  lua_host_free(h);
  lua_ctx_release(&cx);
  if (count("SELECT count(*) FROM traces") != traces || count("SELECT count(*) FROM runs") != runs) abort();
  return 0;
}

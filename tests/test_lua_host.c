/* test_lua_host.c: the sandbox: allow-list, text chunks only, budgets, errors with file and line. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lua/lua_host.h"
#include "test.h"

int test_failures;

static char tmpdir[] = "/tmp/memplay-test-luahost-XXXXXX";

static lua_host *host(uint64_t mem, uint64_t instr, double timeout) {
  lua_host_limits lim = {mem, instr, timeout};
  char err[256];
  lua_host *h = lua_host_new(&lim, err, sizeof err);
  if (!h) fprintf(stderr, "lua_host_new: %s\n", err);
  return h;
}

static lua_host_status run(lua_host *h, const char *code) {
  return lua_host_run_string(h, "=chunk", code, strlen(code));
}

/* Runs code in a fresh default host and returns its status (message in msg). */
static lua_host_status run1(const char *code, char *msg, size_t n) {
  lua_host *h = host(0, 0, 0);
  lua_host_status st = run(h, code);
  snprintf(msg, n, "%s", lua_host_error(h));
  lua_host_free(h);
  return st;
}

static const char *write_file(const char *name, const char *data, size_t len) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  fclose(f);
  return path;
}

static void test_allowed(void) {
  char msg[LUA_HOST_ERRLEN];
  const char *code =
    "assert(type(print) == 'function' and type(pairs) == 'function' and type(pcall) == 'function')\n"
    "assert(table.concat({1, 2}, ',') == '1,2')\n"
    "assert(string.format('%d', 3) == '3' and ('x'):rep(3) == 'xxx')\n"
    "assert(math.floor(2.5) == 2 and math.maxinteger > 0)\n"
    "assert(utf8.len('\\u{e9}') == 1)\n"
    "assert(os.clock() >= 0 and os.time() > 0)\n"
    "assert(load('return 1 + 1')() == 2)\n"
    "assert(select('#', 1, 2) == 2 and tostring(nil) == 'nil' and tonumber('7') == 7)\n"
    "assert(collectgarbage('count') > 0)\n"
    "x = 1; assert(x == 1)\n"
    "assert(rawget(_G, 'never_set') == nil)\n";
  CHECK_EQ(run1(code, msg, sizeof msg), LUA_HOST_OK);
  if (*msg) fprintf(stderr, "%s\n", msg);
}

static void test_forbidden(void) {
  /* each of these must be absent: reading it raises "undefined global" or yields nil */
  static const char *const globals[] = {"io", "package", "require", "dofile", "loadfile", "debug", "coroutine",
                                        NULL};
  char code[256], msg[LUA_HOST_ERRLEN];
  for (size_t i = 0; globals[i]; i++) {
    snprintf(code, sizeof code, "local x = %s", globals[i]);
    CHECK_EQ(run1(code, msg, sizeof msg), LUA_HOST_ERUN);
    CHECK(strstr(msg, "undefined global") != NULL);
    CHECK(strstr(msg, "chunk:1:") != NULL);
  }
  static const char *const absent[] = {"os.execute", "os.getenv", "os.remove", "os.rename", "os.exit",
                                       "os.tmpname", "os.date", "string.dump", NULL};
  for (size_t i = 0; absent[i]; i++) {
    snprintf(code, sizeof code, "assert(%s == nil, '%s is reachable')", absent[i], absent[i]);
    CHECK_EQ(run1(code, msg, sizeof msg), LUA_HOST_OK);
    if (*msg) fprintf(stderr, "%s\n", msg);
  }
  CHECK_EQ(run1("collectgarbage('stop')", msg, sizeof msg), LUA_HOST_ERUN);
  CHECK(strstr(msg, "invalid option") != NULL);
}

static void test_bytecode(void) {
  char msg[LUA_HOST_ERRLEN];
  /* load() refuses binary chunks, whatever mode is asked for */
  CHECK_EQ(run1("local f, e = load('\\27Lua') assert(f == nil and e:find('binary'))", msg, sizeof msg), LUA_HOST_OK);
  CHECK_EQ(run1("load('return 1', 'x', 'b')", msg, sizeof msg), LUA_HOST_ERUN);
  CHECK(strstr(msg, "binary chunks are not accepted") != NULL);
  /* a precompiled file is refused before it is loaded */
  static const char bin[] = "\x1bLua\x54\x00\x19\x93\r\n\x1a\n";
  const char *path = write_file("binary.lua", bin, sizeof bin - 1);
  lua_host *h = host(0, 0, 0);
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_EFILE);
  CHECK(strstr(lua_host_error(h), "binary") != NULL);
  CHECK(strstr(lua_host_error(h), "binary.lua") != NULL);
  lua_host_free(h);
}

static void test_errors_have_positions(void) {
  lua_host *h = host(0, 0, 0);
  const char *src = "local a = 1\nlocal b = nil\nlocal c = b.field\n";
  const char *path = write_file("runtime.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ERUN);
  CHECK(strstr(lua_host_error(h), "runtime.lua:3:") != NULL);
  CHECK(strstr(lua_host_error(h), "stack traceback") != NULL);
  lua_host_free(h);

  h = host(0, 0, 0);
  src = "local a = 1\nlocal b = = 2\n";
  path = write_file("syntax.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ESYNTAX);
  CHECK(strstr(lua_host_error(h), "syntax.lua:2:") != NULL);
  lua_host_free(h);

  /* errors without a position get the position of the code that raised them */
  h = host(0, 0, 0);
  src = "\n\nerror('no position', 0)\n";
  path = write_file("nopos.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ERUN);
  CHECK(strstr(lua_host_error(h), "nopos.lua:3: no position") != NULL);
  lua_host_free(h);

  h = host(0, 0, 0);
  src = "\nerror({code = 1})\n";
  path = write_file("table.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ERUN);
  CHECK(strstr(lua_host_error(h), "table.lua:2: error object is a table value") != NULL);
  lua_host_free(h);

  /* a shebang line is skipped and line numbers stay the file's */
  h = host(0, 0, 0);
  src = "#!/usr/bin/env memplay run\nlocal x = nil\nx()\n";
  path = write_file("shebang.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ERUN);
  CHECK(strstr(lua_host_error(h), "shebang.lua:3:") != NULL);
  lua_host_free(h);

  h = host(0, 0, 0);
  CHECK_EQ(lua_host_run_file(h, "/nonexistent/x.lua", NULL, 0), LUA_HOST_EFILE);
  CHECK(strstr(lua_host_error(h), "cannot open '/nonexistent/x.lua'") != NULL);
  lua_host_free(h);
}

/* An error raised inside the embedder's own chunk on a script's behalf names the script's line. */
static void test_internal_chunk(void) {
  lua_host *h = host(0, 0, 0);
  const char *lib = "function check(x)\n  if not x then error('check failed') end\nend\n";
  CHECK_EQ(lua_host_run_string(h, "=lib", lib, strlen(lib)), LUA_HOST_OK);
  const char *src = "local a = 1\ncheck(false)\n";
  const char *path = write_file("user.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ERUN);
  CHECK(strstr(lua_host_error(h), "user.lua:2: check failed") != NULL);
  lua_host_free(h);
}

static void test_undefined_global(void) {
  char msg[LUA_HOST_ERRLEN];
  CHECK_EQ(run1("local x = 1\nlocal y = undefined_name + x", msg, sizeof msg), LUA_HOST_ERUN);
  CHECK(strstr(msg, "chunk:2: undefined global 'undefined_name'") != NULL);
}

static void test_instruction_budget(void) {
  lua_host *h = host(0, 1000000, 0);
  const char *src = "local n = 0\nwhile true do\n  n = n + 1\nend\n";
  const char *path = write_file("loop.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_EINSTRUCTIONS);
  CHECK(strstr(lua_host_error(h), "loop.lua:") != NULL);
  CHECK(strstr(lua_host_error(h), "instruction budget") != NULL);
  CHECK(lua_host_instructions(h) >= 1000000);
  lua_host_free(h);

  /* a pcall cannot swallow the stop */
  h = host(0, 1000000, 0);
  src = "for i = 1, 100 do\n  pcall(function() while true do end end)\nend\nprint('escaped')\n";
  path = write_file("swallow.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_EINSTRUCTIONS);
  CHECK(strstr(lua_host_error(h), "swallow.lua:") != NULL);
  lua_host_free(h);

  /* within the budget: fine */
  h = host(0, 1000000, 0);
  CHECK_EQ(run(h, "local s = 0 for i = 1, 1000 do s = s + i end assert(s == 500500)"), LUA_HOST_OK);
  lua_host_free(h);

  /* table.move is charged for the elements it moves: many short moves fit where one long one
   * does not (each move of one element once cost 16,384) */
  h = host(0, 1000000, 0);
  CHECK_EQ(run(h, "local a, b = {1}, {} for i = 1, 2000 do table.move(a, 1, 1, i, b) end assert(#b == 2000)"),
           LUA_HOST_OK);
  lua_host_free(h);
  h = host(0, 1000000, 0);
  CHECK_EQ(run(h, "local a = {} a[200000] = 1 table.move(a, 1, 200000, 1, {})"), LUA_HOST_EINSTRUCTIONS);
  lua_host_free(h);
}

static void test_time_budget(void) {
  lua_host *h = host(0, UINT64_MAX / 2, 0.2);
  const char *src = "local n = 0\nwhile true do n = n + 1 end\n";
  const char *path = write_file("slow.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_ETIMEOUT);
  CHECK(strstr(lua_host_error(h), "slow.lua:2:") != NULL);
  CHECK(strstr(lua_host_error(h), "time budget") != NULL);
  lua_host_free(h);
}

static void test_memory_budget(void) {
  lua_host *h = host(8u << 20, 0, 0);
  const char *src = "local t = {}\nfor i = 1, 1e9 do\n  t[i] = ('x'):rep(64) .. i\nend\n";
  const char *path = write_file("grow.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_EMEMORY);
  CHECK(strstr(lua_host_error(h), "grow.lua:3:") != NULL);
  CHECK(strstr(lua_host_error(h), "memory budget of 8.0 MiB exceeded") != NULL);
  CHECK(lua_host_memory_peak(h) <= (8u << 20));
  lua_host_free(h);

  /* one large request */
  h = host(8u << 20, 0, 0);
  src = "\nlocal s = ('x'):rep(100000000)\n";
  path = write_file("big.lua", src, strlen(src));
  CHECK_EQ(lua_host_run_file(h, path, NULL, 0), LUA_HOST_EMEMORY);
  CHECK(strstr(lua_host_error(h), "big.lua:2:") != NULL);
  lua_host_free(h);

  /* a caught memory error leaves the script within its budget and running */
  h = host(8u << 20, 0, 0);
  CHECK_EQ(run(h, "local ok = pcall(string.rep, 'x', 100000000) assert(not ok) local t = {1, 2} assert(#t == 2)"),
           LUA_HOST_OK);
  lua_host_free(h);
}

/* A script about a trace gets budgets in proportion to the trace, never below the defaults, and
 * keeps the ones it was given. */
static void test_budgets_for_a_trace(void) {
  lua_host_limits lim = {0};
  lua_host_limits_for_trace(&lim, 1000);
  CHECK(lim.max_memory == LUA_HOST_DEFAULT_MEMORY && lim.max_instructions == LUA_HOST_DEFAULT_INSTRUCTIONS);
  lim = (lua_host_limits){0};
  lua_host_limits_for_trace(&lim, 4000000);
  CHECK(lim.max_memory == 4000000 * LUA_HOST_MEMORY_PER_EVENT);
  CHECK(lim.max_instructions == 4000000 * LUA_HOST_INSTRUCTIONS_PER_EVENT);
  CHECK(lim.max_memory > LUA_HOST_DEFAULT_MEMORY && lim.max_instructions > LUA_HOST_DEFAULT_INSTRUCTIONS);
  lim = (lua_host_limits){.max_memory = 1u << 20, .max_instructions = 5, .timeout_s = 2};
  lua_host_limits_for_trace(&lim, 4000000);
  CHECK(lim.max_memory == 1u << 20 && lim.max_instructions == 5 && lim.timeout_s == 2);
  lim = (lua_host_limits){0};
  lua_host_limits_for_trace(&lim, UINT64_MAX / 2);
  CHECK(lim.max_memory == UINT64_MAX && lim.max_instructions == UINT64_MAX);
}

static void test_arguments_and_context(void) {
  lua_host *h = host(0, 0, 0);
  const char *src = "local a, b = ...\nassert(a == 'one' and b == 'two')\nassert(arg[0]:find('args.lua') and arg[2] == 'two')\n";
  const char *path = write_file("args.lua", src, strlen(src));
  const char *argv[] = {"one", "two"};
  CHECK_EQ(lua_host_run_file(h, path, argv, 2), LUA_HOST_OK);
  if (*lua_host_error(h)) fprintf(stderr, "%s\n", lua_host_error(h));
  int ctx = 7;
  lua_host_set_context(h, &ctx);
  CHECK(lua_host_context(lua_host_state(h)) == &ctx);
  CHECK(lua_host_from(lua_host_state(h)) == h);
  lua_host_free(h);
}

static int c_calls_back(lua_State *L) {
  /* calls the function given with 2, protected; returns status and result */
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 2);
  int st = lua_host_pcall(L, 1, 1);
  lua_pushinteger(L, st);
  lua_insert(L, -2);
  return 2;
}

static void test_pcall_from_c(void) {
  lua_host *h = host(0, 0, 0);
  lua_State *L = lua_host_state(h);
  lua_pushcfunction(L, c_calls_back);
  lua_setglobal(L, "callback");
  CHECK_EQ(run(h, "local st, v = callback(function(x) return x * 21 end) assert(st == 0 and v == 42)\n"
                  "local st2, e = callback(function(x) error('bad ' .. x) end)\n"
                  "assert(st2 ~= 0 and e:find('bad 2') and e:find('chunk:2:'))"),
           LUA_HOST_OK);
  if (*lua_host_error(h)) fprintf(stderr, "%s\n", lua_host_error(h));
  lua_host_free(h);
}

static void test_repeatable_random(void) {
  lua_host *a = host(0, 0, 0), *b = host(0, 0, 0);
  CHECK_EQ(run(a, "R = math.random(1, 1000000)"), LUA_HOST_OK);
  CHECK_EQ(run(b, "R = math.random(1, 1000000)"), LUA_HOST_OK);
  lua_getglobal(lua_host_state(a), "R");
  lua_getglobal(lua_host_state(b), "R");
  CHECK_EQ(lua_tointeger(lua_host_state(a), -1), lua_tointeger(lua_host_state(b), -1));
  lua_host_free(a);
  lua_host_free(b);
}

int main(void) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  RUN(test_allowed);
  RUN(test_forbidden);
  RUN(test_bytecode);
  RUN(test_errors_have_positions);
  RUN(test_undefined_global);
  RUN(test_internal_chunk);
  RUN(test_instruction_budget);
  RUN(test_time_budget);
  RUN(test_memory_budget);
  RUN(test_budgets_for_a_trace);
  RUN(test_arguments_and_context);
  RUN(test_pcall_from_c);
  RUN(test_repeatable_random);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
  TEST_MAIN_END();
}

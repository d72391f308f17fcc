/* lua_host.c: the sandboxed Lua state: allow-list, counting allocator, count hook, errors converted at the boundary. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lua_host.h"

#define HOOK_EVERY 10000 /* instructions between two looks at the budgets */

struct lua_host {
  lua_State *L;
  uint64_t max_memory, max_instructions;
  double timeout_s;
  size_t used, peak;
  size_t cmem;          /* C memory the library holds for the script (lua_host_reserve) */
  int unlimited;        /* > 0: the host itself is allocating (error messages), no budget */
  int refused;          /* an allocation was refused for the budget */
  uint64_t instructions;
  int64_t deadline_ns;  /* 0: none */
  lua_host_status stopped; /* LUA_HOST_EINSTRUCTIONS or LUA_HOST_ETIMEOUT once stopped */
  char internal[4][32];    /* the embedder's own chunks ("memplay"): errors inside them are the script's */
  int ninternal;
  char stop_msg[256];
  char err[LUA_HOST_ERRLEN];
  /* The watchdog (with a timeout): ends the process if the script is still running well after
   * its deadline, stuck in C code the count hook cannot reach. */
  pthread_t dog;
  pthread_mutex_t dog_mu;
  pthread_cond_t dog_cv;
  int dog_started, dog_stop;
};

static const char *format_bytes(char *buf, size_t n, uint64_t v);

/* Registry keys: their addresses are the keys. */
static const char host_key = 'H';
static const char ctx_key = 'C';

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- the counting allocator ------------------------------------------------------------- */

static void *host_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  lua_host *h = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    h->used -= old;
    return NULL;
  }
  if (nsize > old && !h->unlimited && (uint64_t)(h->used - old) + h->cmem + nsize > h->max_memory) {
    h->refused = 1;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (!p) return NULL;
  h->used = h->used - old + nsize;
  if (h->used > h->peak) h->peak = h->used;
  return p;
}

/* ---- the count hook --------------------------------------------------------------------- */

/* The innermost line of a script file ('@' chunks) on the stack, else of any Lua code. */
const char *lua_host_where(lua_State *L, char *buf, size_t n) {
  lua_Debug ar;
  int found = 0;
  for (int level = 0; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0) continue;
    if (ar.source[0] == '@') {
      snprintf(buf, n, "%s:%d", ar.short_src, ar.currentline);
      return buf;
    }
    if (!found) {
      snprintf(buf, n, "%s:%d", ar.short_src, ar.currentline);
      found = 1;
    }
  }
  if (!found) snprintf(buf, n, "?");
  return buf;
}

static lua_host *host_of(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &host_key);
  lua_host *h = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return h;
}

static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_host *h = host_of(L);
  if (!h) return;
  if (!h->stopped) {
    h->instructions += HOOK_EVERY;
    if (h->instructions > h->max_instructions) {
      h->stopped = LUA_HOST_EINSTRUCTIONS;
      snprintf(h->stop_msg, sizeof h->stop_msg, "script stopped: instruction budget of %llu instructions spent",
               (unsigned long long)h->max_instructions);
    } else if (h->deadline_ns && now_ns() > h->deadline_ns) {
      h->stopped = LUA_HOST_ETIMEOUT;
      snprintf(h->stop_msg, sizeof h->stop_msg, "script stopped: time budget of %g s spent", h->timeout_s);
    }
    if (!h->stopped) return;
    /* From now on, raise at every instruction: a pcall in the script cannot continue. */
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
  }
  char where[300];
  h->unlimited++;
  lua_host_where(L, where, sizeof where);
  lua_pushfstring(L, "%s: %s", where, h->stop_msg);
  h->unlimited--;
  lua_error(L);
}

void lua_host_charge(lua_State *L, uint64_t n) {
  lua_host *h = host_of(L);
  if (!h || h->unlimited) return;
  h->instructions += n;
  if (h->stopped || h->instructions > h->max_instructions || (h->deadline_ns && now_ns() > h->deadline_ns))
    count_hook(L, NULL); /* stops the script, with the budget's message */
}

void lua_host_reserve(lua_State *L, size_t n) {
  lua_host *h = host_of(L);
  if (!h) return;
  if ((uint64_t)h->used + h->cmem + n > h->max_memory) {
    char b[64];
    h->refused = 1;
    luaL_error(L, "script stopped: memory budget of %s exceeded (memory memplay holds for the script counts too)",
               format_bytes(b, sizeof b, h->max_memory));
  }
  h->cmem += n;
  if (h->used + h->cmem > h->peak) h->peak = h->used + h->cmem;
}

void lua_host_unreserve(lua_host *h, size_t n) {
  if (h) h->cmem -= n < h->cmem ? n : h->cmem;
}

/* ---- the watchdog ----------------------------------------------------------------------- */

/* How long past its deadline a script may stay inside one C function before the process ends. */
static int64_t grace_ns(const lua_host *h) {
  double g = h->timeout_s / 10;
  return (int64_t)((g < 1 ? 1 : g > 30 ? 30 : g) * 1e9);
}

static void *watchdog(void *arg) {
  lua_host *h = arg;
  struct timespec until;
  int64_t at = h->deadline_ns + grace_ns(h);
  pthread_mutex_lock(&h->dog_mu);
  while (!h->dog_stop) {
    int64_t left = at - now_ns();
    if (left <= 0) break;
    clock_gettime(CLOCK_REALTIME, &until);
    int64_t ns = until.tv_nsec + left % 1000000000;
    until.tv_sec += (time_t)(left / 1000000000 + ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&h->dog_cv, &h->dog_mu, &until);
  }
  int stop = h->dog_stop;
  pthread_mutex_unlock(&h->dog_mu);
  if (!stop) {
    /* Nothing a script does reaches the store or the file system before it has finished, so
     * ending the process here loses nothing. */
    char msg[256];
    int n = snprintf(msg, sizeof msg,
                     "error: script stopped: time budget of %g s spent (inside a function the budget cannot "
                     "interrupt; nothing was stored or written)\n",
                     h->timeout_s);
    if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */
    }
    _exit(1);
  }
  return NULL;
}

static void watchdog_start(lua_host *h) {
  if (h->dog_started || !h->deadline_ns) return;
  pthread_mutex_init(&h->dog_mu, NULL);
  pthread_cond_init(&h->dog_cv, NULL);
  h->dog_started = pthread_create(&h->dog, NULL, watchdog, h) == 0;
  if (!h->dog_started) {
    pthread_cond_destroy(&h->dog_cv);
    pthread_mutex_destroy(&h->dog_mu);
  }
}

static void watchdog_stop(lua_host *h) {
  if (!h->dog_started) return;
  pthread_mutex_lock(&h->dog_mu);
  h->dog_stop = 1;
  pthread_cond_signal(&h->dog_cv);
  pthread_mutex_unlock(&h->dog_mu);
  pthread_join(h->dog, NULL);
  pthread_cond_destroy(&h->dog_cv);
  pthread_mutex_destroy(&h->dog_mu);
  h->dog_started = 0;
}

/* ---- the sandbox ------------------------------------------------------------------------ */

static int undefined_global(lua_State *L) {
  const char *name = lua_tostring(L, 2);
  if (name) return luaL_error(L, "undefined global '%s'", name);
  return luaL_error(L, "undefined global (a %s key)", luaL_typename(L, 2));
}

/* load() compiles text only: a binary chunk is refused whatever mode the script asks for. */
static int safe_load(lua_State *L) {
  size_t len;
  const char *s = lua_tolstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, s ? s : "=(load)");
  const char *mode = luaL_optstring(L, 3, "t");
  if (strchr(mode, 'b')) return luaL_error(L, "load: binary chunks are not accepted (mode '%s')", mode);
  if (!s) return luaL_argerror(L, 1, "a string of Lua text expected (functions are not accepted)");
  int env = !lua_isnone(L, 4);
  int st = luaL_loadbufferx(L, s, len, name, "t");
  if (st != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (env) {
    lua_pushvalue(L, 4);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

/* collectgarbage with the options that only observe or run the collector. */
static int safe_collectgarbage(lua_State *L) {
  static const char *const opts[] = {"collect", "count", "step", "isrunning", NULL};
  int o = luaL_checkoption(L, 1, "collect", opts);
  switch (o) {
  case 0: lua_gc(L, LUA_GCCOLLECT); lua_pushinteger(L, 0); return 1;
  case 1: {
    int k = lua_gc(L, LUA_GCCOUNT), b = lua_gc(L, LUA_GCCOUNTB);
    lua_pushnumber(L, (lua_Number)k + ((lua_Number)b / 1024));
    return 1;
  }
  case 2: lua_pushboolean(L, lua_gc(L, LUA_GCSTEP, (int)luaL_optinteger(L, 2, 0))); return 1;
  default: lua_pushboolean(L, lua_gc(L, LUA_GCISRUNNING)); return 1;
  }
}

/* setmetatable refuses finalizers: Lua runs __gc with the count hook off (and at close, after
 * the script), so no budget could stop one. */
static int safe_setmetatable(lua_State *L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    int has_gc = lua_rawget(L, 2) != LUA_TNIL;
    lua_pop(L, 1);
    if (has_gc)
      return luaL_error(L, "setmetatable: finalizers (__gc) are not available to scripts (no budget could stop one)");
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* table.move(a1, f, e, t [, a2]) as Lua's, one element at a time, each charged to the budgets. */
static int bounded_table_move(lua_State *L) {
  lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3), t = luaL_checkinteger(L, 4);
  int tt = !lua_isnoneornil(L, 5) ? 5 : 1;
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, tt, LUA_TTABLE);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    luaL_argcheck(L, t <= LUA_MAXINTEGER - (e - f) , 4, "destination wrap around");
    lua_Integer n = e - f;
    /* forwards unless the destination overlaps the source from above */
    int forwards = t > e || t <= f || (tt != 1 && !lua_compare(L, 1, tt, LUA_OPEQ));
    for (lua_Integer i = 0; i <= n; i++) {
      if ((i & 1023) == 0) /* a get and a set: about 16 instructions' work, for each of the next 1,024 at most */
        lua_host_charge(L, 16 * (uint64_t)(n - i < 1023 ? n - i + 1 : 1024));
      lua_Integer k = forwards ? i : n - i;
      lua_geti(L, 1, f + k);
      lua_seti(L, tt, t + k);
    }
  }
  lua_pushvalue(L, tt);
  return 1;
}

/* The pattern functions (string.find, match, gmatch, gsub) run in C, where the count hook cannot
 * stop them: each call is charged the length of its subject times the pattern's items, and a
 * pattern whose backtracking could take more steps than the instruction budget has left
 * (subject length to the power of its repetition items: a*, a-, a+, a?) is refused up front. */
static int pattern_guard(lua_State *L) {
  size_t ls = 0, lp = 0;
  const char *p = lua_tolstring(L, 2, &lp);
  lua_tolstring(L, 1, &ls);
  if (p && !(lua_toboolean(L, 4) && lua_type(L, lua_upvalueindex(2)) == LUA_TBOOLEAN)) {
    int reps = 0;
    for (size_t i = 0; i < lp; i++) {
      if (p[i] == '%') {
        i++;
      } else if (p[i] == '[') { /* a set: its '-' are ranges, not repetitions */
        i++;
        if (i < lp && p[i] == '^') i++;
        if (i < lp && p[i] == ']') i++;
        while (i < lp && p[i] != ']') i += p[i] == '%' ? 2 : 1;
      } else if (i > 0 && (p[i] == '*' || p[i] == '-' || p[i] == '+' || p[i] == '?')) {
        reps++;
      }
    }
    lua_host *h = host_of(L);
    double worst = 1;
    for (int r = 0; r < reps; r++) worst *= (double)ls + 1;
    double left = h ? (double)h->max_instructions - (double)h->instructions : 1e18;
    if (reps > 1 && worst > left)
      return luaL_error(L, "pattern '%s' has %d repetition items: on a subject of %d bytes its backtracking could "
                           "take more steps than the instruction budget has left",
                        lp > 60 ? "(long)" : p, reps, (int)(ls > INT32_MAX ? INT32_MAX : ls));
    lua_host_charge(L, (uint64_t)ls * (uint64_t)(reps + 1) / 16 + 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

static void guard_string_function(lua_State *L, const char *name, int plain_arg) {
  lua_getglobal(L, LUA_STRLIBNAME);
  lua_getfield(L, -1, name);
  if (plain_arg) lua_pushboolean(L, 1);
  else lua_pushnil(L);
  lua_pushcclosure(L, pattern_guard, 2);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

static void remove_fields(lua_State *L, const char *table, const char *const *names) {
  if (table) lua_getglobal(L, table);
  else lua_pushglobaltable(L);
  for (size_t i = 0; names[i]; i++) {
    lua_pushnil(L);
    lua_setfield(L, -2, names[i]);
  }
  lua_pop(L, 1);
}

static void open_sandbox(lua_State *L) {
  static const luaL_Reg libs[] = {
    {LUA_GNAME, luaopen_base},         {LUA_TABLIBNAME, luaopen_table}, {LUA_STRLIBNAME, luaopen_string},
    {LUA_MATHLIBNAME, luaopen_math},   {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL},
  };
  for (const luaL_Reg *lib = libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  static const char *const base_removed[] = {"dofile", "loadfile", "require", NULL};
  remove_fields(L, NULL, base_removed);
  static const char *const string_removed[] = {"dump", NULL};
  remove_fields(L, LUA_STRLIBNAME, string_removed);
  lua_pushcfunction(L, safe_load);
  lua_setglobal(L, "load");
  lua_pushcfunction(L, safe_collectgarbage);
  lua_setglobal(L, "collectgarbage");
  lua_getglobal(L, "setmetatable");
  lua_pushcclosure(L, safe_setmetatable, 1);
  lua_setglobal(L, "setmetatable");
  lua_getglobal(L, LUA_TABLIBNAME);
  lua_pushcfunction(L, bounded_table_move);
  lua_setfield(L, -2, "move");
  lua_pop(L, 1);
  guard_string_function(L, "find", 1); /* find's 4th argument, plain, turns patterns off */
  guard_string_function(L, "match", 0);
  guard_string_function(L, "gmatch", 0);
  guard_string_function(L, "gsub", 0);

  /* os: clock and time only, taken from the real library without opening it as a global. */
  luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
  lua_newtable(L);
  lua_getfield(L, -2, "clock");
  lua_setfield(L, -2, "clock");
  lua_getfield(L, -2, "time");
  lua_setfield(L, -2, "time");
  lua_setglobal(L, "os");
  lua_pop(L, 1);
  /* luaL_requiref left the full os library in package.loaded; drop that table too. */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushnil(L);
  lua_setfield(L, -2, LUA_OSLIBNAME);
  lua_pop(L, 1);

  /* Repeatable runs: a fixed seed for math.random. */
  lua_getglobal(L, "math");
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, 0x6d706c79);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
}

/* Reading a global that was never set raises an error (set after the libraries are open). */
static void guard_globals(lua_State *L) {
  lua_pushglobaltable(L);
  lua_newtable(L);
  lua_pushcfunction(L, undefined_global);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}

/* per * events, at least floor (and at most UINT64_MAX). */
static uint64_t per_event(uint64_t per, uint64_t events, uint64_t floor) {
  uint64_t v = events > UINT64_MAX / per ? UINT64_MAX : per * events;
  return v > floor ? v : floor;
}

void lua_host_limits_for_trace(lua_host_limits *lim, uint64_t events) {
  if (!lim->max_memory) lim->max_memory = per_event(LUA_HOST_MEMORY_PER_EVENT, events, LUA_HOST_DEFAULT_MEMORY);
  if (!lim->max_instructions)
    lim->max_instructions = per_event(LUA_HOST_INSTRUCTIONS_PER_EVENT, events, LUA_HOST_DEFAULT_INSTRUCTIONS);
}

lua_host *lua_host_new(const lua_host_limits *lim, char *err, size_t errlen) {
  lua_host *h = calloc(1, sizeof *h);
  if (!h) {
    snprintf(err, errlen, "cannot start Lua: out of memory");
    return NULL;
  }
  h->max_memory = lim && lim->max_memory ? lim->max_memory : LUA_HOST_DEFAULT_MEMORY;
  h->max_instructions = lim && lim->max_instructions ? lim->max_instructions : LUA_HOST_DEFAULT_INSTRUCTIONS;
  h->timeout_s = lim ? lim->timeout_s : 0;
  h->unlimited = 1; /* the libraries themselves are not charged to the script */
  h->L = lua_newstate(host_alloc, h);
  if (!h->L) {
    snprintf(err, errlen, "cannot start Lua: out of memory");
    free(h);
    return NULL;
  }
  lua_pushlightuserdata(h->L, h);
  lua_rawsetp(h->L, LUA_REGISTRYINDEX, &host_key);
  open_sandbox(h->L);
  guard_globals(h->L);
  h->unlimited = 0;
  return h;
}

void lua_host_free(lua_host *h) {
  if (!h) return;
  if (h->L) lua_close(h->L); /* the memory budget holds while the state closes; the watchdog too */
  watchdog_stop(h);
  free(h);
}

lua_State *lua_host_state(lua_host *h) { return h->L; }
const char *lua_host_error(const lua_host *h) { return h->err; }
size_t lua_host_memory(const lua_host *h) { return h->used; }
size_t lua_host_memory_peak(const lua_host *h) { return h->peak; }
uint64_t lua_host_instructions(const lua_host *h) { return h->instructions; }

void lua_host_open(lua_host *h, const char *name, lua_CFunction open) {
  h->unlimited++;
  luaL_requiref(h->L, name, open, 1);
  lua_pop(h->L, 1);
  h->unlimited--;
}

void lua_host_set_context(lua_host *h, void *ctx) {
  lua_pushlightuserdata(h->L, ctx);
  lua_rawsetp(h->L, LUA_REGISTRYINDEX, &ctx_key);
}

void *lua_host_context(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &ctx_key);
  void *p = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return p;
}

lua_host *lua_host_from(lua_State *L) { return host_of(L); }

int lua_host_stopped(lua_State *L) {
  lua_host *h = host_of(L);
  return h && h->stopped;
}

/* ---- running ---------------------------------------------------------------------------- */

static const char *format_bytes(char *buf, size_t n, uint64_t v) {
  if (v >= (UINT64_C(1) << 30)) snprintf(buf, n, "%.1f GiB", (double)v / (double)(UINT64_C(1) << 30));
  else if (v >= (UINT64_C(1) << 20)) snprintf(buf, n, "%.1f MiB", (double)v / (double)(UINT64_C(1) << 20));
  else snprintf(buf, n, "%llu bytes", (unsigned long long)v);
  return buf;
}

/* True when the first line of msg holds Lua's position prefix ("src:12: "). */
static int has_position(const char *msg) {
  for (const char *c = msg; *c && *c != '\n'; c++) {
    if (*c != ':' || c[1] < '0' || c[1] > '9') continue;
    const char *d = c + 1;
    while (*d >= '0' && *d <= '9') d++;
    if (d[0] == ':' && d[1] == ' ') return 1;
  }
  return 0;
}

/* When msg starts with the position of one of the embedder's chunks ("memplay:12: "), what
 * follows it; else NULL. */
static const char *internal_position(const lua_host *h, const char *msg) {
  for (int i = 0; i < h->ninternal; i++) {
    size_t n = strlen(h->internal[i]);
    if (strncmp(msg, h->internal[i], n) || msg[n] != ':') continue;
    const char *d = msg + n + 1;
    if (*d < '0' || *d > '9') continue;
    while (*d >= '0' && *d <= '9') d++;
    if (d[0] == ':' && d[1] == ' ') return d + 2;
  }
  return NULL;
}

static int call_tostring(lua_State *L) {
  luaL_tolstring(L, 1, NULL);
  return 1;
}

/* The error object at the top of co through its __tostring, called in protected mode on the
 * main thread under the script's budgets (it is the script's code: it may raise, loop or
 * allocate). 1 with the text in out, 0 when it failed or gave no string. */
static int protected_tostring(lua_host *h, lua_State *co, char *out, size_t n) {
  lua_State *L = h->L;
  lua_pushcfunction(L, call_tostring);
  lua_pushvalue(co, -1);
  lua_xmove(co, L, 1);
  int unlimited = h->unlimited;
  h->unlimited = 0;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, h->stopped ? 1 : HOOK_EVERY);
  int rc = lua_pcall(L, 1, 1, 0);
  h->unlimited = unlimited;
  int ok = rc == LUA_OK && lua_type(L, -1) == LUA_TSTRING;
  if (ok) snprintf(out, n, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return ok;
}

/*
 * Turns the failure of thread co (its stack is left as it was at the error, so it can still
 * be walked) into h->err: the message with its position, then the traceback.
 */
static lua_host_status failure(lua_host *h, lua_State *co, int st) {
  lua_State *L = h->L;
  h->unlimited++;
  char where[200];
  lua_host_where(co, where, sizeof where);
  lua_host_status kind = LUA_HOST_ERUN;
  const char *msg = NULL;
  char buf[1024];
  if (h->stopped) {
    kind = h->stopped;
    /* The message raised by the hook may have been caught and replaced by the script. */
    snprintf(buf, sizeof buf, "%s", lua_isstring(co, -1) && strstr(lua_tostring(co, -1), h->stop_msg)
                                        ? lua_tostring(co, -1)
                                        : h->stop_msg);
    msg = buf;
    if (!has_position(msg)) {
      snprintf(buf, sizeof buf, "%s: %s", where, h->stop_msg);
    }
  } else if (st == LUA_ERRMEM || (h->refused && lua_type(co, -1) == LUA_TSTRING &&
                                   (!strcmp(lua_tostring(co, -1), "not enough memory") ||
                                    strstr(lua_tostring(co, -1), "memory budget of")))) {
    char b[64];
    kind = LUA_HOST_EMEMORY;
    if (st != LUA_ERRMEM && has_position(lua_tostring(co, -1)) && strstr(lua_tostring(co, -1), "memory budget of"))
      snprintf(buf, sizeof buf, "%s", lua_tostring(co, -1));
    else
      snprintf(buf, sizeof buf, "%s: script stopped: memory budget of %s exceeded", where,
               format_bytes(b, sizeof b, h->max_memory));
    msg = buf;
  } else if (lua_type(co, -1) == LUA_TSTRING) {
    msg = lua_tostring(co, -1);
    const char *rest = internal_position(h, msg);
    if (rest) {
      /* raised inside the embedder's own Lua on the script's behalf: the script's line */
      snprintf(buf, sizeof buf, "%s: %s", where, rest);
      msg = buf;
    } else if (!has_position(msg)) {
      snprintf(buf, sizeof buf, "%s: %s", where, msg);
      msg = buf;
    }
  } else if (luaL_getmetafield(co, -1, "__tostring") != LUA_TNIL) {
    lua_pop(co, 1);
    char text[900];
    if (protected_tostring(h, co, text, sizeof text))
      snprintf(buf, sizeof buf, "%s: %.800s", where, text);
    else
      snprintf(buf, sizeof buf, "%s: error object is a %s value whose __tostring failed", where, luaL_typename(co, -1));
    msg = buf;
  } else {
    snprintf(buf, sizeof buf, "%s: error object is a %s value", where, luaL_typename(co, -1));
    msg = buf;
  }
  luaL_traceback(L, co, msg, 0);
  snprintf(h->err, sizeof h->err, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  h->unlimited--;
  return kind;
}

/* Runs the function at the top of L's stack (below its nargs arguments) in a fresh thread. */
static lua_host_status run_function(lua_host *h, int nargs) {
  lua_State *L = h->L;
  h->err[0] = 0;
  h->refused = 0;
  if (h->timeout_s > 0 && !h->deadline_ns) h->deadline_ns = now_ns() + (int64_t)(h->timeout_s * 1e9);
  watchdog_start(h);
  lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
  h->unlimited++;
  lua_State *co = lua_newthread(L); /* inherits the hook */
  h->unlimited--;
  lua_insert(L, -(nargs + 2));       /* thread below the function and its arguments */
  lua_xmove(L, co, nargs + 1);
  int nres = 0;
  int st = lua_resume(co, L, nargs, &nres);
  lua_host_status kind = LUA_HOST_OK;
  if (st == LUA_YIELD) {
    lua_pushliteral(co, "a script cannot yield at its top level");
    kind = failure(h, co, LUA_ERRRUN);
  } else if (st != LUA_OK || h->stopped) {
    kind = failure(h, co, st);
  }
  lua_pop(L, 1); /* the thread */
  return kind;
}

lua_host_status lua_host_run_string(lua_host *h, const char *name, const char *code, size_t len) {
  lua_State *L = h->L;
  if (name[0] == '=' && h->ninternal < 4) snprintf(h->internal[h->ninternal++], sizeof h->internal[0], "%s", name + 1);
  if (h->stopped) {
    snprintf(h->err, sizeof h->err, "%s", h->stop_msg);
    return h->stopped;
  }
  int st = luaL_loadbufferx(L, code, len, name, "t");
  if (st != LUA_OK) {
    snprintf(h->err, sizeof h->err, "%s", st == LUA_ERRMEM ? "script too large for the memory budget" : lua_tostring(L, -1));
    lua_pop(L, 1);
    return st == LUA_ERRMEM ? LUA_HOST_EMEMORY : LUA_HOST_ESYNTAX;
  }
  return run_function(h, 0);
}

lua_host_status lua_host_run_file(lua_host *h, const char *path, const char *const *argv, int argc) {
  lua_State *L = h->L;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(h->err, sizeof h->err, "cannot open '%s': %s", path, strerror(errno));
    return LUA_HOST_EFILE;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  size_t got;
  int too_large = 0;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len > LUA_HOST_MAX_SCRIPT) {
      too_large = 1;
      break;
    }
    if (len == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      } else {
        buf = nb;
      }
    }
  }
  int rerr = ferror(f);
  fclose(f);
  if (too_large) {
    free(buf);
    snprintf(h->err, sizeof h->err, "cannot run '%s': it is larger than %d MiB (memplay's limit for a script)", path,
             LUA_HOST_MAX_SCRIPT >> 20);
    return LUA_HOST_EFILE;
  }
  if (!buf || rerr) {
    free(buf);
    snprintf(h->err, sizeof h->err, "cannot read '%s'", path);
    return LUA_HOST_EFILE;
  }
  if (len > 0 && buf[0] == LUA_SIGNATURE[0]) {
    free(buf);
    snprintf(h->err, sizeof h->err, "cannot run '%s': precompiled (binary) chunks are not accepted", path);
    return LUA_HOST_EFILE;
  }
  /* A first line starting with '#' (#!/usr/bin/env ...) is skipped; its newline stays, so
   * line numbers are the file's. */
  size_t skip = 0;
  if (len > 0 && buf[0] == '#') {
    while (skip < len && buf[skip] != '\n') skip++;
  }
  size_t nlen = strlen(path) + 2;
  char *chunkname = malloc(nlen);
  snprintf(chunkname, nlen, "@%s", path);
  h->unlimited++; /* the script's text is not the script's allocation */
  int st = luaL_loadbufferx(L, buf + skip, len - skip, chunkname, "t");
  h->unlimited--;
  free(buf);
  free(chunkname);
  if (st != LUA_OK) {
    snprintf(h->err, sizeof h->err, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return LUA_HOST_ESYNTAX;
  }
  /* arg = {[0] = path, ...}, and the same values as the chunk's varargs */
  h->unlimited++;
  lua_createtable(L, argc, 1);
  lua_pushstring(L, path);
  lua_rawseti(L, -2, 0);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]);
  h->unlimited--;
  return run_function(h, argc);
}

/* ---- calls from C back into Lua ---------------------------------------------------------- */

static int call_handler(lua_State *L) {
  lua_host *h = host_of(L);
  if (h) h->unlimited++;
  if (lua_type(L, 1) == LUA_TSTRING && !has_position(lua_tostring(L, 1))) {
    char where[300];
    lua_host_where(L, where, sizeof where);
    lua_pushfstring(L, "%s: %s", where, lua_tostring(L, 1));
  } else if (lua_type(L, 1) != LUA_TSTRING) {
    char where[300];
    lua_host_where(L, where, sizeof where);
    lua_pushfstring(L, "%s: error object is a %s value", where, luaL_typename(L, 1));
  } else {
    lua_pushvalue(L, 1);
  }
  if (h) h->unlimited--;
  return 1;
}

int lua_host_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, call_handler);
  lua_insert(L, base);
  int st = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (st == LUA_ERRMEM) {
    lua_host *h = host_of(L);
    char where[300], b[64];
    if (h) h->unlimited++;
    lua_pop(L, 1);
    lua_host_where(L, where, sizeof where);
    lua_pushfstring(L, "%s: script stopped: memory budget of %s exceeded", where,
                    format_bytes(b, sizeof b, h ? h->max_memory : 0));
    if (h) h->unlimited--;
  }
  return st;
}

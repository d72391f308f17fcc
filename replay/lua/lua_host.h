/* lua_host.h: a sandboxed Lua 5.4 state: allow-listed libraries, text chunks only, budgets, errors with file:line. */
#ifndef REPLAY_LUA_HOST_H
#define REPLAY_LUA_HOST_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

/*
 * What a script may use (docs/lua-api.md, "The sandbox"):
 * - the base library without dofile, loadfile and collectgarbage's tuning options; `load`
 *   compiles text only; reading an undefined global raises an error;
 * - table, string (without string.dump), math (seeded with a fixed value, so runs repeat),
 *   utf8; `os` with clock and time only;
 * - the libraries the embedder adds (memplay's own API).
 * No io, os.execute, package/require, debug or coroutine. Chunks are loaded from text only:
 * a precompiled (binary) chunk is refused.
 *
 * Budgets: the Lua heap may not grow past max_memory (allocations over it fail); the VM may
 * execute at most max_instructions instructions and run at most timeout_s seconds. Once an
 * instruction or time budget is spent the script is stopped: the error is raised again at
 * every instruction after, so a pcall cannot swallow it.
 *
 * Every error that leaves the host names the script file and line ("scripts/x.lua:12: ...")
 * followed by a stack traceback.
 */

#define LUA_HOST_DEFAULT_MEMORY (UINT64_C(512) << 20)
#define LUA_HOST_DEFAULT_INSTRUCTIONS UINT64_C(2000000000)
#define LUA_HOST_ERRLEN 4096
/* The largest script file memplay reads (a script is text; anything larger is refused). */
#define LUA_HOST_MAX_SCRIPT (16 << 20)

typedef struct lua_host_limits {
  uint64_t max_memory;       /* bytes of Lua heap; 0: LUA_HOST_DEFAULT_MEMORY */
  uint64_t max_instructions; /* VM instructions; 0: LUA_HOST_DEFAULT_INSTRUCTIONS */
  double timeout_s;          /* wall-clock seconds; 0: no limit */
} lua_host_limits;

/* A script about one trace (a what-if scenario) holds data and does work in proportion to the
 * trace, so the budgets it gets by default grow with the trace's events, from the defaults above:
 * a budget sized for a small trace would stop the bundled scenarios on a large one. They take up
 * to about 640 bytes and 250 instructions an event (docs/lua-api.md, "Budgets"). */
#define LUA_HOST_MEMORY_PER_EVENT UINT64_C(1024)
#define LUA_HOST_INSTRUCTIONS_PER_EVENT UINT64_C(1000)

/* The budgets lim leaves at 0 set for a script about a trace of `events` events. */
void lua_host_limits_for_trace(lua_host_limits *lim, uint64_t events);

/* Why a run failed. */
typedef enum lua_host_status {
  LUA_HOST_OK = 0,
  LUA_HOST_ESYNTAX,       /* the script does not compile */
  LUA_HOST_ERUN,          /* a runtime error (including wrong arguments to the API) */
  LUA_HOST_EMEMORY,       /* the memory budget was exceeded */
  LUA_HOST_EINSTRUCTIONS, /* the instruction budget was spent */
  LUA_HOST_ETIMEOUT,      /* the time budget was spent */
  LUA_HOST_EFILE,         /* the script could not be read, or is a binary chunk */
} lua_host_status;

typedef struct lua_host lua_host;

/* Makes a sandboxed state. Returns NULL with a message in err when Lua cannot start. */
lua_host *lua_host_new(const lua_host_limits *lim, char *err, size_t errlen);
void lua_host_free(lua_host *h);
lua_State *lua_host_state(lua_host *h);

/* Opens an embedder library as a global (like luaL_requiref with glb = 1). */
void lua_host_open(lua_host *h, const char *name, lua_CFunction open);

/* The host context: a pointer the embedder's library reads back in its C functions. It is
 * kept in the registry under a private key. */
void lua_host_set_context(lua_host *h, void *ctx);
void *lua_host_context(lua_State *L);
lua_host *lua_host_from(lua_State *L);

/*
 * Runs the script file at path with arguments (the chunk's `...`, and the global table `arg`
 * with arg[0] = path). Returns LUA_HOST_OK, or a status with the message in lua_host_error.
 */
lua_host_status lua_host_run_file(lua_host *h, const char *path, const char *const *argv, int argc);
/* Runs a chunk of text named `name` (errors read "name:line: ..."). */
lua_host_status lua_host_run_string(lua_host *h, const char *name, const char *code, size_t len);
const char *lua_host_error(const lua_host *h);

/*
 * For the embedder's C functions that call back into Lua (a per-event function): calls the
 * function below the nargs arguments like lua_pcall, with a handler that prefixes the error
 * with the position. Returns a Lua status; on failure the message is at the top. A budget
 * that runs out inside the call ends the whole script, whatever the caller does.
 */
int lua_host_pcall(lua_State *L, int nargs, int nresults);
/* 1 when the script has been stopped (budget spent) and C code should stop calling Lua. */
int lua_host_stopped(lua_State *L);
/* Charges n instructions of work a C function does for the script (outside the VM, where the
 * count hook cannot see it), and checks the deadline: raises the budget's error when either is
 * spent. For C functions whose work grows with their arguments. */
void lua_host_charge(lua_State *L, uint64_t n);
/* C memory the library holds on the script's behalf (the events of t:cache()) counts toward
 * the memory budget with the Lua heap: reserve raises the memory error when it would exceed it;
 * unreserve gives it back when freed (h from lua_host_from, kept by the holder). */
void lua_host_reserve(lua_State *L, size_t n);
void lua_host_unreserve(lua_host *h, size_t n);

/* Heap bytes in use and the most used; instructions executed (to the hook's granularity). */
size_t lua_host_memory(const lua_host *h);
size_t lua_host_memory_peak(const lua_host *h);
uint64_t lua_host_instructions(const lua_host *h);

/* Where the running script is: "path:line" of the innermost Lua function, into buf. */
const char *lua_host_where(lua_State *L, char *buf, size_t n);

#endif

/* lua_api_out.c: what a script writes: result files (CSV, JSON, text; kept until the run succeeds), its output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "plot/plot.h"
#include "lua_api_help.h"
#include "lua_api_result.h"
#include "lua_lib_funcs.h"

#define MAX_FILES_BYTES (UINT64_C(1) << 30)

static int valid_name(const char *n) {
  if (!*n || *n == '.' || strlen(n) > 200) return 0;
  for (const char *c = n; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
          *c == '_' || *c == '-'))
      return 0;
  return 1;
}

/* Keeps data (taken over) as the file `name`, written into --out DIR when the run succeeds. */
static void add_file(lua_State *L, const char *name, char *data, size_t len) {
  lua_ctx *cx = lapi_ctx(L);
  struct lua_ctx_private *p = cx->p;
  uint64_t total = len;
  for (size_t i = 0; i < p->nfiles; i++) {
    total += p->files[i].len;
    if (!strcmp(p->files[i].name, name)) {
      free(data);
      luaL_error(L, "result file '%s' is written twice", name);
    }
  }
  if (total > MAX_FILES_BYTES) {
    free(data);
    luaL_error(L, "result files exceed %d MiB in all", (int)(MAX_FILES_BYTES >> 20));
  }
  sim_grow((void **)&p->files, &p->fcap, p->nfiles + 1, sizeof *p->files);
  p->files[p->nfiles++] = (lfile){strdup(name), data, len, NULL};
}

static const char *check_name(lua_State *L, int idx) {
  const char *name = luaL_checkstring(L, idx);
  if (!valid_name(name))
    luaL_argerror(L, idx, "a file name of letters, digits, '.', '_' and '-' (no folders), written into --out DIR");
  return name;
}

/* ---- text ----------------------------------------------------------------------------------- */

int lapi_mp_write_text(lua_State *L) {
  const char *name = check_name(L, 1);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  char *data = sim_xmalloc(len + 1);
  memcpy(data, s, len);
  add_file(L, name, data, len);
  return 0;
}

/* ---- pictures ------------------------------------------------------------------------------- */

#define PLOT_RESULTS 8

/*
 * memplay.plot{file = "NAME.svg" | "NAME.html", results = {r1, r2, ...}, labels = {...}, title = "..."}:
 * memory over time of each result (a trace:replay() result; its timeline), overlaid, written
 * into --out DIR with the other result files.
 */
int lapi_mp_plot(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "file");
  if (!lua_isstring(L, -1)) return luaL_error(L, "plot: file = \"NAME.svg\" or \"NAME.html\" is required");
  const char *name = lua_tostring(L, 2);
  if (!valid_name(name)) return luaL_error(L, "plot: file '%s' must be a name of letters, digits, '.', '_' and '-'", name);
  const char *dot = strrchr(name, '.');
  int html = dot && !strcmp(dot, ".html");
  if (!dot || (!html && strcmp(dot, ".svg"))) return luaL_error(L, "plot: '%s' must end in .svg or .html", name);
  lua_getfield(L, 1, "results");
  if (!lua_istable(L, -1)) return luaL_error(L, "plot: results = {result, ...} is required");
  int nres = (int)luaL_len(L, -1);
  if (nres < 1 || nres > PLOT_RESULTS) return luaL_error(L, "plot: between 1 and %d results", PLOT_RESULTS);
  lua_getfield(L, 1, "labels"); /* 4 */
  int labels = lua_istable(L, 4);
  lua_getfield(L, 1, "title"); /* 5 */
  const char *title = lua_isnil(L, 5) ? "memplay" : luaL_checkstring(L, 5);
  plot_series series[PLOT_RESULTS];
  const plot_series *ptrs[PLOT_RESULTS];
  for (int i = 0; i < nres; i++) {
    lua_rawgeti(L, 3, i + 1);
    lresult *lr = lapi_result_of(L, -1);
    if (!lr) {
      for (int k = 0; k < i; k++) plot_series_release(&series[k]);
      return luaL_error(L, "plot: results[%d] is not a result of trace:replay()", i + 1);
    }
    const char *label = lr->run.allocator;
    if (labels) {
      lua_rawgeti(L, 4, i + 1);
      if (lua_isstring(L, -1)) label = lua_tostring(L, -1);
    }
    plot_series_from_result(&series[i], label, lr->run.capacity, &lr->run.result);
    ptrs[i] = &series[i];
    lua_settop(L, 5);
  }
  plot_figure fig = {.title = title, .series = ptrs, .nseries = (size_t)nres};
  plot_page page = {.title = title, .figures = &fig, .nfigures = 1};
  char *data = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&data, &len);
  if (!f) return luaL_error(L, "plot: out of memory");
  if (html) plot_write_html(&page, f);
  else plot_write_svg(&page, f);
  fclose(f);
  for (int i = 0; i < nres; i++) plot_series_release(&series[i]);
  add_file(L, name, data, len);
  return 0;
}

/* ---- CSV ------------------------------------------------------------------------------------ */

/*
 * The CSV text grows in a C buffer owned by a userdata on the stack (its __gc frees it when a
 * script's error unwinds), not in a luaL_Buffer: a luaL_Buffer must have the stack as it left it
 * whenever it grows, and the writer pushes rows, keys and cells between additions (a table of more
 * than a hundred rows overflowed the buffer's first block and then read the wrong slots).
 */
typedef struct csv_buf {
  char *p;
  size_t n, cap;
} csv_buf;

static int csv_buf_gc(lua_State *L) {
  csv_buf *b = lua_touserdata(L, 1);
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
  return 0;
}

/* A new empty buffer on the top of the stack. */
static csv_buf *csv_buf_push(lua_State *L) {
  csv_buf *b = lua_newuserdatauv(L, sizeof *b, 0);
  *b = (csv_buf){0};
  if (luaL_newmetatable(L, "memplay.csv_buf")) {
    lua_pushcfunction(L, csv_buf_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

static void csv_add(csv_buf *b, const char *s, size_t len) {
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + len + 1) cap *= 2;
    b->p = sim_xrealloc(b->p, cap);
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, len);
  b->n += len;
}

static void csv_addc(csv_buf *b, char c) { csv_add(b, &c, 1); }

static void csv_cell(csv_buf *b, lua_State *L, int idx) {
  switch (lua_type(L, idx)) {
  case LUA_TNIL: return;
  case LUA_TBOOLEAN: csv_add(b, lua_toboolean(L, idx) ? "true" : "false", lua_toboolean(L, idx) ? 4 : 5); return;
  case LUA_TNUMBER: {
    char num[64];
    if (lua_isinteger(L, idx)) snprintf(num, sizeof num, "%lld", (long long)lua_tointeger(L, idx));
    else {
      double d = lua_tonumber(L, idx);
      if (isfinite(d)) snprintf(num, sizeof num, "%.9g", d);
      else num[0] = 0;
    }
    csv_add(b, num, strlen(num));
    return;
  }
  default: {
    size_t len;
    const char *s = luaL_tolstring(L, idx, &len); /* kept on the stack while it is copied */
    int quote = strpbrk(s, ",\"\n\r") != NULL;
    if (!quote) csv_add(b, s, len);
    else {
      csv_addc(b, '"');
      for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') csv_addc(b, '"');
        csv_addc(b, s[i]);
      }
      csv_addc(b, '"');
    }
    lua_pop(L, 1);
  }
  }
}

/* The columns given (argument 3: keys, or {key = ..., title = ...}) into the tables of keys (4)
 * and titles (5); returns their number. */
static int csv_given_columns(lua_State *L) {
  int ncol = 0;
  luaL_checktype(L, 3, LUA_TTABLE);
  int n = (int)luaL_len(L, 3);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, 3, i);
    if (lua_type(L, -1) == LUA_TSTRING) {
      lua_pushvalue(L, -1);
      lua_rawseti(L, 4, ++ncol);
      lua_rawseti(L, 5, ncol);
    } else if (lua_type(L, -1) == LUA_TTABLE) {
      lua_getfield(L, -1, "key");
      if (lua_isnil(L, -1)) return luaL_error(L, "write_csv: column %d has no key", i);
      lua_rawseti(L, 4, ++ncol);
      lua_getfield(L, -1, "title");
      if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_rawgeti(L, 4, ncol);
      }
      lua_rawseti(L, 5, ncol);
      lua_pop(L, 1);
    } else {
      return luaL_error(L, "write_csv: column %d must be a key or {key = ..., title = ...}", i);
    }
  }
  return ncol;
}

/* No columns given: every string key of every row (argument 2), sorted, as keys (4) and
 * titles (5); returns their number. */
static int csv_row_columns(lua_State *L) {
  int ncol = 0;
  lua_newtable(L); /* 6: seen */
  int nrows = (int)luaL_len(L, 2);
  for (int r = 1; r <= nrows; r++) {
    lua_rawgeti(L, 2, r);
    if (!lua_istable(L, -1)) return luaL_error(L, "write_csv: row %d is not a table", r);
    lapi_result_complete(L, -1); /* a replay result: its keys built on first read too */
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING) continue;
      lua_pushvalue(L, -1);
      lua_rawget(L, 6);
      int seen = !lua_isnil(L, -1);
      lua_pop(L, 1);
      if (seen) continue;
      lua_pushvalue(L, -1);
      lua_pushboolean(L, 1);
      lua_rawset(L, 6);
      lua_pushvalue(L, -1);
      lua_rawseti(L, 4, ++ncol);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_getglobal(L, "table");
  lua_getfield(L, -1, "sort");
  lua_pushvalue(L, 4);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  for (int i = 1; i <= ncol; i++) {
    lua_rawgeti(L, 4, i);
    lua_rawseti(L, 5, i);
  }
  return ncol;
}

/* The CSV text into b: the titles (5), then the rows (2), their cells in the order of the keys (4). */
static void csv_text(lua_State *L, csv_buf *b, int ncol) {
  for (int j = 1; j <= ncol; j++) {
    if (j > 1) csv_addc(b, ',');
    lua_rawgeti(L, 5, j);
    csv_cell(b, L, lua_gettop(L));
    lua_pop(L, 1);
  }
  csv_addc(b, '\n');
  int nrows = (int)luaL_len(L, 2);
  for (int r = 1; r <= nrows; r++) {
    lua_rawgeti(L, 2, r);
    if (!lua_istable(L, -1)) luaL_error(L, "write_csv: row %d is not a table", r);
    int row = lua_gettop(L);
    for (int j = 1; j <= ncol; j++) {
      if (j > 1) csv_addc(b, ',');
      lua_rawgeti(L, 4, j);
      lua_gettable(L, row);
      csv_cell(b, L, lua_gettop(L));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    csv_addc(b, '\n');
  }
}

/* memplay.write_csv(name, rows [, columns]): columns as for print_table (keys or {key=, title=}). */
int lapi_mp_write_csv(lua_State *L) {
  const char *name = check_name(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 3);
  /* the column list: keys and titles */
  lua_newtable(L); /* 4: keys */
  lua_newtable(L); /* 5: titles */
  int ncol = lua_isnil(L, 3) ? csv_row_columns(L) : csv_given_columns(L);
  lua_settop(L, 5);
  csv_buf *b = csv_buf_push(L); /* 6 */
  csv_text(L, b, ncol);
  char *data = b->p ? b->p : sim_xmalloc(1);
  size_t len = b->n;
  *b = (csv_buf){0}; /* the file takes the text */
  add_file(L, name, data, len);
  return 0;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

/* True when the table at idx is a sequence 1..n with nothing else (an empty table is an object). */
static int is_array(lua_State *L, int idx, size_t *n) {
  size_t len = lua_rawlen(L, idx), count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1)) {
      lua_pop(L, 1);
      return 0;
    }
    lua_Integer k = lua_tointeger(L, -1);
    if (k < 1 || (size_t)k > len) {
      lua_pop(L, 1);
      return 0;
    }
    count++;
  }
  *n = len;
  return len > 0 && count == len;
}

static void json_value(lua_State *L, yajl_gen g, int idx, int depth) {
  idx = lua_absindex(L, idx);
  if (depth > 64) luaL_error(L, "write_json: the value is nested too deeply (or refers to itself)");
  luaL_checkstack(L, 6, "write_json");
  switch (lua_type(L, idx)) {
  case LUA_TNIL: jsonw_null(g); return;
  case LUA_TBOOLEAN: jsonw_bool(g, lua_toboolean(L, idx)); return;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) jsonw_int(g, lua_tointeger(L, idx));
    else jsonw_double(g, lua_tonumber(L, idx));
    return;
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    jsonw_strn(g, s, len);
    return;
  }
  case LUA_TTABLE: {
    size_t n;
    lapi_result_complete(L, idx); /* a replay result: its keys built on first read too */
    if (is_array(L, idx, &n)) {
      yajl_gen_array_open(g);
      for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i);
        json_value(L, g, -1, depth + 1);
        lua_pop(L, 1);
      }
      yajl_gen_array_close(g);
      return;
    }
    /* objects: keys sorted, so the output is the same from run to run */
    lua_newtable(L);
    int keys = lua_gettop(L);
    int nk = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING && !lua_isinteger(L, -1))
        luaL_error(L, "write_json: object keys must be strings or integers, not a %s", luaL_typename(L, -1));
      lua_pushvalue(L, -1);
      if (lua_isinteger(L, -1)) {
        lua_Integer k = lua_tointeger(L, -1);
        lua_pop(L, 1);
        lua_pushfstring(L, "%I", k);
      }
      lua_rawseti(L, keys, ++nk);
    }
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, keys);
    lua_call(L, 1, 0);
    lua_pop(L, 1);
    yajl_gen_map_open(g);
    for (int i = 1; i <= nk; i++) {
      lua_rawgeti(L, keys, i);
      size_t len;
      const char *k = lua_tolstring(L, -1, &len);
      jsonw_strn(g, k, len);
      lua_pushvalue(L, -1);
      lua_rawget(L, idx);
      if (lua_isnil(L, -1)) { /* an integer key written as text */
        lua_pop(L, 1);
        lua_Integer ik = (lua_Integer)strtoll(k, NULL, 10);
        lua_rawgeti(L, idx, ik);
      }
      json_value(L, g, -1, depth + 1);
      lua_pop(L, 2);
    }
    yajl_gen_map_close(g);
    lua_pop(L, 1);
    return;
  }
  default: luaL_error(L, "write_json: cannot write a %s value", luaL_typename(L, idx));
  }
}

static int json_protected(lua_State *L) {
  yajl_gen g = lua_touserdata(L, 1);
  json_value(L, g, 2, 0);
  return 0;
}

/* Encodes the value at idx as JSON text into a malloc'd buffer (the generator is freed even
 * when encoding raises). */
static char *encode_json(lua_State *L, int idx, int pretty, size_t *len) {
  idx = lua_absindex(L, idx);
  yajl_gen g = jsonw_mem();
  if (pretty) {
    yajl_gen_config(g, yajl_gen_beautify, 1);
    yajl_gen_config(g, yajl_gen_indent_string, "  ");
  }
  lua_pushcfunction(L, json_protected);
  lua_pushlightuserdata(L, g);
  lua_pushvalue(L, idx);
  int st = lua_pcall(L, 2, 0, 0);
  if (st != LUA_OK) {
    yajl_gen_free(g);
    lua_error(L);
  }
  const char *text = jsonw_text(g, len);
  char *data = sim_xmalloc(*len + 2);
  memcpy(data, text, *len);
  data[(*len)++] = '\n';
  data[*len] = 0;
  yajl_gen_free(g);
  return data;
}

int lapi_mp_write_json(lua_State *L) {
  const char *name = check_name(L, 1);
  luaL_checkany(L, 2);
  size_t len;
  char *data = encode_json(L, 2, 1, &len);
  add_file(L, name, data, len);
  return 0;
}

static int push_owned_protected(lua_State *L) {
  lua_pushlstring(L, lua_touserdata(L, 1), (size_t)lua_tointeger(L, 2));
  return 1;
}

/* Pushes len bytes of data as a string and frees data, even when the push raises. */
static void push_owned(lua_State *L, char *data, size_t len) {
  lua_pushcfunction(L, push_owned_protected);
  lua_pushlightuserdata(L, data);
  lua_pushinteger(L, (lua_Integer)len);
  int st = lua_pcall(L, 2, 1, 0);
  free(data);
  if (st != LUA_OK) lua_error(L);
}

/* memplay.json(value): the value as JSON text (one line). */
int lapi_mp_json(lua_State *L) {
  luaL_checkany(L, 1);
  size_t len;
  char *data = encode_json(L, 1, 0, &len);
  push_owned(L, data, len - 1);
  return 1;
}

/* ---- the run's output ----------------------------------------------------------------------- */

/* Writes its arguments to the run's output (stdout, or stderr under --json). */
int lapi_mp_write_out(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = luaL_tolstring(L, i, &len);
    fwrite(s, 1, len, cx->out);
    lua_pop(L, 1);
  }
  return 0;
}

/* print, to the run's output. */
int lapi_print(lua_State *L) {
  lua_ctx *cx = lua_host_context(L);
  FILE *f = cx ? cx->out : stdout;
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = luaL_tolstring(L, i, &len);
    if (i > 1) fputc('\t', f);
    fwrite(s, 1, len, f);
    lua_pop(L, 1);
  }
  fputc('\n', f);
  return 0;
}

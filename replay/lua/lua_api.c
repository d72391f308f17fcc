/* lua_api.c: the run of a script: its context, parameters, devices, assumptions, variants, and finishing it. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/allocator.h"
#include "io/jsonw.h"
#include "io/outfile.h"
#include "lua_api_help.h"
#include "lua_lib_funcs.h"

/* ---- the context ---------------------------------------------------------------------------- */

void lua_ctx_init(lua_ctx *cx) {
  memset(cx, 0, sizeof *cx);
  cx->out = stdout;
  cx->p = sim_xcalloc(1, sizeof *cx->p);
}

void lua_ctx_release(lua_ctx *cx) {
  if (!cx->p) return;
  struct lua_ctx_private *p = cx->p;
  for (size_t i = 0; i < p->nvariants; i++) free(p->variants[i].name);
  free(p->variants);
  for (size_t i = 0; i < p->nfiles; i++) {
    outfile_abort(p->files[i].out);
    free(p->files[i].name);
    free(p->files[i].data);
  }
  free(p->files);
  for (size_t i = 0; i < p->nnotes; i++) free(p->notes[i]);
  free(p->notes);
  replay_plan_kept_release(&p->held_plan);
  if (p->own_ses) session_free(p->ses);
  if (p->main) {
    p->main->s = NULL; /* the command closes its store */
    lstore_unref(p->main);
  }
  free(p);
  cx->p = NULL;
}

/* ---- parameters ----------------------------------------------------------------------------- */

static lua_param *find_param(lua_ctx *cx, const char *name) {
  lua_param *found = NULL;
  for (size_t i = 0; i < cx->nparams; i++)
    if (!strcmp(cx->params[i].key, name)) found = &cx->params[i]; /* the last --set wins */
  if (found)
    for (size_t i = 0; i < cx->nparams; i++)
      if (!strcmp(cx->params[i].key, name)) cx->params[i].used = 1;
  return found;
}

static int parse_bool(const char *s, int *out) {
  static const char *const yes[] = {"true", "yes", "on", "1", NULL}, *const no[] = {"false", "no", "off", "0", NULL};
  for (size_t i = 0; yes[i]; i++)
    if (!strcasecmp(s, yes[i])) return *out = 1, 0;
  for (size_t i = 0; no[i]; i++)
    if (!strcasecmp(s, no[i])) return *out = 0, 0;
  return -1;
}

/* memplay.param(name, default): the --set value of name, of the type of default. */
int lapi_mp_param(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  const char *name = luaL_checkstring(L, 1);
  if (lua_isnoneornil(L, 2)) return luaL_argerror(L, 2, "a default value is needed (it gives the type)");
  lua_param *p = find_param(cx, name);
  if (!p) {
    lua_settop(L, 2);
    return 1;
  }
  const char *v = p->value;
  switch (lua_type(L, 2)) {
  case LUA_TNUMBER: {
    int want_int = lua_isinteger(L, 2);
    char *end;
    errno = 0;
    if (want_int) {
      long long x = strtoll(v, &end, 0);
      if (*v && !*end && !errno) {
        lua_pushinteger(L, (lua_Integer)x);
        return 1;
      }
      double d = strtod(v, &end);
      if (*v && !*end && d == floor(d) && fabs(d) < 9e15) {
        lua_pushinteger(L, (lua_Integer)d);
        return 1;
      }
      return luaL_error(L, "--set %s=%s: an integer is expected", name, v);
    }
    double d = strtod(v, &end);
    if (!*v || *end || !isfinite(d)) return luaL_error(L, "--set %s=%s: a number is expected", name, v);
    lua_pushnumber(L, d);
    return 1;
  }
  case LUA_TBOOLEAN: {
    int b;
    if (parse_bool(v, &b)) return luaL_error(L, "--set %s=%s: true or false is expected", name, v);
    lua_pushboolean(L, b);
    return 1;
  }
  case LUA_TSTRING: lua_pushstring(L, v); return 1;
  default: return luaL_argerror(L, 2, "the default must be a number, a boolean or a string");
  }
}

/* memplay.size_param(name, default): a size in bytes ("24GB", "512MiB", 4096). */
int lapi_mp_size_param(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  const char *name = luaL_checkstring(L, 1);
  lua_param *p = find_param(cx, name);
  if (!p) {
    if (lua_isnoneornil(L, 2)) {
      lua_pushnil(L);
      return 1;
    }
    lua_pushinteger(L, (lua_Integer)lapi_check_size(L, 2, "the default"));
    return 1;
  }
  uint64_t v;
  if (sim_parse_size(p->value, &v))
    return luaL_error(L, "--set %s=%s: a size such as 4096, 512MiB or 24GB is expected", name, p->value);
  if (v > SIM_SIZE_MAX)
    return luaL_error(L, "--set %s=%s: more than a device could have (at most 1 PiB)", name, p->value);
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

int lapi_mp_params(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  lua_newtable(L);
  for (size_t i = 0; i < cx->nparams; i++) {
    lua_pushstring(L, cx->params[i].value);
    lua_setfield(L, -2, cx->params[i].key);
  }
  return 1;
}

/* ---- what the run is about: its scenario and devices ---------------------------------------- */

int lapi_mp_scenario(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  lua_pushstring(L, cx->scenario ? cx->scenario : "");
  return 1;
}

int lapi_mp_device(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  if (cx->device) lua_pushstring(L, cx->device);
  else lua_pushnil(L);
  return 1;
}

/* A device profile by name, from the store (or the built-ins); raises a Lua error when absent. */
static void find_device(lua_State *L, const char *name, devices_entry *e) {
  char err[512];
  int rc = session_find_device(lapi_session(L), name, e, err, sizeof err);
  if (rc < 0) luaL_error(L, "%s", err);
  if (rc) luaL_error(L, "no device profile '%s' (see 'memplay devices')", name);
}

/* memplay.device_memory(name): the memory a process can use on a device profile's card, in bytes
 * (its total_memory less its context_bytes, as `replay --device` takes it). */
int lapi_mp_device_memory(lua_State *L) {
  devices_entry e;
  find_device(L, luaL_checkstring(L, 1), &e);
  lua_pushinteger(L, (lua_Integer)sim_device_usable(&e.p));
  return 1;
}

static int each_device(void *arg, const devices_entry *e) {
  lua_State *L = arg;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, e->p.name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, e->p.description);
  lua_setfield(L, -2, "description");
  lua_pushinteger(L, (lua_Integer)e->p.total_memory);
  lua_setfield(L, -2, "total_memory");
  lua_pushstring(L, e->source);
  lua_setfield(L, -2, "source");
  lua_pushnumber(L, e->p.bf16_flops);
  lua_setfield(L, -2, "bf16_flops");
  lua_pushnumber(L, e->p.fp32_flops);
  lua_setfield(L, -2, "fp32_flops");
  lua_pushnumber(L, e->p.mem_bw);
  lua_setfield(L, -2, "mem_bw");
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  return 0;
}

/* memplay.devices(): the device profiles (built-in, user, calibrated). */
int lapi_mp_devices(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  lua_newtable(L);
  if (cx->st) {
    char err[512];
    if (devices_store_each(cx->st, each_device, L, err, sizeof err)) return luaL_error(L, "%s", err);
  } else {
    for (size_t i = 0; i < sim_builtin_ndevices; i++) {
      devices_entry e;
      memset(&e, 0, sizeof e);
      e.p = sim_builtin_devices[i];
      snprintf(e.source, sizeof e.source, "builtin");
      each_device(L, &e);
    }
  }
  return 1;
}

/* memplay.device_profile(name): every figure of a device profile, in base units. */
int lapi_mp_device_profile(lua_State *L) {
  devices_entry e;
  find_device(L, luaL_checkstring(L, 1), &e);
  lua_newtable(L);
  for (size_t i = 0; i < sim_device_nfields; i++) {
    const sim_device_field *f = &sim_device_fields[i];
    if (f->kind == SIM_DF_TEXT) lua_pushstring(L, sim_device_get_text(&e.p, f));
    else lua_pushnumber(L, sim_device_get_number(&e.p, f));
    lua_setfield(L, -2, f->key);
  }
  lua_pushstring(L, e.p.name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, e.source);
  lua_setfield(L, -2, "source");
  return 1;
}

/* memplay.assume(text): an assumption the scenario makes, printed and kept in the JSON. */
int lapi_mp_assume(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  const char *s = luaL_checkstring(L, 1);
  struct lua_ctx_private *p = cx->p;
  for (size_t i = 0; i < p->nnotes; i++)
    if (!strcmp(p->notes[i], s)) return 0;
  sim_grow((void **)&p->notes, &p->ncap, p->nnotes + 1, sizeof *p->notes);
  p->notes[p->nnotes++] = strdup(s);
  return 0;
}

int lapi_mp_assumptions(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  lua_createtable(L, (int)cx->p->nnotes, 0);
  for (size_t i = 0; i < cx->p->nnotes; i++) {
    lua_pushstring(L, cx->p->notes[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* memplay.variant(name, result [, {batch = B, samples_per_s = X, step_time_s = T}]) */
int lapi_mp_variant(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  const char *name = luaL_checkstring(L, 1);
  lresult *lr = lapi_result_of(L, 2);
  if (!lr) return luaL_argerror(L, 2, "a result of trace:replay() expected");
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  struct lua_ctx_private *p = cx->p;
  if (!*name) return luaL_argerror(L, 1, "a variant needs a name");
  for (size_t i = 0; i < p->nvariants; i++)
    if (!strcmp(p->variants[i].name, name)) return luaL_error(L, "variant '%s' is recorded twice", name);
  int derived = lr->transforms && *lr->transforms;
  if (cx->whatif && p->nvariants == 0 && derived)
    return luaL_error(L, "variant '%s': the first variant must replay the unchanged trace", name);
  double step = lr->run.has_time ? lr->run.time.step_time_s : -1, sps = -1;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "step_time_s");
    if (!lua_isnil(L, -1)) step = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 3, "samples_per_s");
    if (!lua_isnil(L, -1)) sps = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 3, "batch");
    if (!lua_isnil(L, -1)) {
      double b = luaL_checknumber(L, -1);
      if (!(b > 0)) return luaL_error(L, "variant '%s': batch must be > 0", name);
      if (sps < 0 && step > 0) sps = b / step;
    }
    lua_pop(L, 1);
  }
  sim_grow((void **)&p->variants, &p->vcap, p->nvariants + 1, sizeof *p->variants);
  lvariant *v = &p->variants[p->nvariants++];
  memset(v, 0, sizeof *v);
  v->name = strdup(name);
  lapi_push_result_ud(L, 2); /* keeps the result alive until the run is stored */
  v->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  v->res = lr;
  v->step_time_s = step;
  v->samples_per_s = sps;
  v->derived = derived;
  return 0;
}

int lapi_mp_variants(lua_State *L) {
  lua_ctx *cx = lapi_ctx(L);
  lua_createtable(L, (int)cx->p->nvariants, 0);
  for (size_t i = 0; i < cx->p->nvariants; i++) {
    lua_pushstring(L, cx->p->variants[i].name);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* ---- small utilities ------------------------------------------------------------------------ */

int lapi_mp_bytes(lua_State *L) {
  char b[48];
  lua_Number v = luaL_checknumber(L, 1);
  lua_pushstring(L, report_bytes(b, sizeof b, (int64_t)llround(v)));
  return 1;
}

int lapi_mp_duration(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  char b[48];
  double a = fabs(s);
  if (a >= 1) snprintf(b, sizeof b, "%.3f s", s);
  else if (a >= 1e-3) snprintf(b, sizeof b, "%.3f ms", s * 1e3);
  else snprintf(b, sizeof b, "%.3f us", s * 1e6);
  lua_pushstring(L, b);
  return 1;
}

int lapi_mp_parse_size(lua_State *L) {
  uint64_t v;
  const char *s = luaL_checkstring(L, 1);
  if (sim_parse_size(s, &v)) {
    luaL_pushfail(L);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

/* memplay.fresh_addr(i): an address no recorded allocation has (for inserted events). */
int lapi_mp_fresh_addr(lua_State *L) {
  lua_Integer i = luaL_checkinteger(L, 1);
  if (i < 1 || i >= (lua_Integer)1 << 40) return luaL_argerror(L, 1, "1 .. 2^40-1");
  /* bits 59 and 60: above any real device address, apart from the transforms' own tags */
  lua_pushinteger(L, (lua_Integer)((UINT64_C(3) << 59) | (uint64_t)i));
  return 1;
}

/* memplay.lower_bound(list, value): in a list of numbers in ascending order (an allocations
 * column such as seq), the first index whose number is at least value; #list + 1 when none is.
 * A scenario that takes each step's allocations then reads only those, not every allocation
 * once per step. */
int lapi_mp_lower_bound(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Number v = luaL_checknumber(L, 2);
  lua_Integer lo = 1, hi = (lua_Integer)lua_rawlen(L, 1) + 1;
  while (lo < hi) {
    lua_Integer mid = lo + (hi - lo) / 2;
    lua_rawgeti(L, 1, mid);
    int isnum;
    lua_Number x = lua_tonumberx(L, -1, &isnum);
    lua_pop(L, 1);
    if (!isnum) return luaL_error(L, "lower_bound: element %I of the list is not a number", mid);
    if (x < v) lo = mid + 1;
    else hi = mid;
  }
  lua_pushinteger(L, lo);
  return 1;
}

/* One key of memplay.order: an integer, or (when the list holds any other number) a float. */
typedef struct order_key {
  union {
    lua_Integer i;
    lua_Number f;
  } k;
  lua_Integer index;
} order_key;

static int cmp_order_int(const void *a, const void *b) {
  const order_key *x = a, *y = b;
  if (x->k.i != y->k.i) return x->k.i < y->k.i ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static int cmp_order_float(const void *a, const void *b) {
  const order_key *x = a, *y = b;
  if (x->k.f != y->k.f) return x->k.f < y->k.f ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* memplay.order(keys): the indices of a list of numbers in the ascending order of its numbers,
 * equal ones in list order: for _, k in ipairs(memplay.order(seq)) do ... size[k] ... end walks
 * parallel columns in seq order. A scenario's lists of {seq, delta} pairs sorted with a Lua
 * comparator took nearly half its Lua instructions (table.sort calls the comparator n log n
 * times); the keys are sorted in C, in memory charged to the script (a userdata). Integers mixed
 * with floats are compared as floats. */
int lapi_mp_order(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  if ((lua_Unsigned)n > (SIZE_MAX / sizeof(order_key))) return luaL_error(L, "order: the list is too long");
  lua_host_charge(L, 16 * (uint64_t)n); /* about what a Lua loop over the list would take */
  order_key *keys = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *keys, 0);
  int all_int = 1;
  for (lua_Integer i = 1; i <= n; i++) {
    int type = lua_rawgeti(L, 1, i);
    if (type != LUA_TNUMBER) return luaL_error(L, "order: element %I of the list is not a number", i);
    keys[i - 1].index = i;
    if (lua_isinteger(L, -1)) {
      keys[i - 1].k.i = lua_tointeger(L, -1);
    } else {
      keys[i - 1].k.f = lua_tonumber(L, -1);
      if (keys[i - 1].k.f != keys[i - 1].k.f) return luaL_error(L, "order: element %I of the list is NaN", i);
      all_int = 0;
    }
    lua_pop(L, 1);
  }
  if (!all_int) /* the integers as floats, so that every key compares with every other */
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, 1, i);
      keys[i - 1].k.f = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
  qsort(keys, (size_t)n, sizeof *keys, all_int ? cmp_order_int : cmp_order_float);
  lua_createtable(L, n < INT_MAX ? (int)n : INT_MAX, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_pushinteger(L, keys[i - 1].index);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

int lapi_mp_kernel_class(lua_State *L) {
  lua_pushstring(L, xf_kernel_class_name(xf_kernel_class_of(luaL_checkstring(L, 1))));
  return 1;
}

int lapi_mp_kernel_classes(lua_State *L) {
  lua_createtable(L, XF_KERNEL__COUNT, 0);
  for (int i = 0; i < XF_KERNEL__COUNT; i++) {
    lua_pushstring(L, xf_kernel_class_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

int lapi_mp_allocators(lua_State *L) {
  lua_newtable(L);
  for (size_t i = 0; sim_allocators[i]; i++) {
    const sim_allocator_ops *a = sim_allocators[i];
    lua_newtable(L);
    lua_pushstring(L, a->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, a->summary);
    lua_setfield(L, -2, "summary");
    lua_newtable(L);
    for (size_t k = 0; a->options && a->options[k].name; k++) {
      lua_pushstring(L, a->options[k].help);
      lua_setfield(L, -2, a->options[k].name);
    }
    lua_setfield(L, -2, "options");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

/* ---- finishing a run ------------------------------------------------------------------------ */

/* Stages every result file through the output writer (a temporary name beside a regular file;
 * a FIFO or device written directly), commits them all when commit > 0, discards them when < 0. */
static int write_files(lua_ctx *cx, int commit, char *err, size_t errlen) {
  struct lua_ctx_private *p = cx->p;
  int rc = 0;
  for (size_t i = 0; i < p->nfiles; i++) {
    lfile *f = &p->files[i];
    if (commit < 0) {
      outfile_abort(f->out);
      f->out = NULL;
      continue;
    }
    if (rc) continue;
    if (commit > 0) {
      if (f->out && outfile_commit(f->out, err, errlen)) rc = -1;
      f->out = NULL;
      continue;
    }
    size_t n = strlen(cx->out_dir) + strlen(f->name) + 2;
    char *dst = sim_xmalloc(n);
    snprintf(dst, n, "%s/%s", cx->out_dir, f->name);
    f->out = outfile_open(dst, err, errlen);
    if (!f->out) {
      rc = -1;
    } else if (f->len && fwrite(f->data, 1, f->len, outfile_stream(f->out)) != f->len) {
      snprintf(err, errlen, "cannot write '%s': %s", dst, strerror(errno));
      rc = -1;
    }
    free(dst);
  }
  return rc;
}

/* Every --set must have been read (a misspelt key would silently do nothing), and a whatif
 * must have recorded its variants. */
static int finish_check(lua_ctx *cx, char *err, size_t errlen) {
  for (size_t i = 0; i < cx->nparams; i++) {
    if (cx->params[i].used) continue;
    snprintf(err, errlen, "--set %s=%s: '%s' is not a parameter of %s (its header comment lists them)",
             cx->params[i].key, cx->params[i].value, cx->params[i].key, cx->script);
    return -1;
  }
  if (cx->whatif && cx->p->nvariants == 0) {
    snprintf(err, errlen, "%s recorded no variants (a scenario calls memplay.variant for each)", cx->script);
    return -1;
  }
  return 0;
}

/* Makes --out DIR a folder if it is none yet, and writes the result files there under
 * temporary names (none is left behind on failure). */
static int finish_stage_files(lua_ctx *cx, char *err, size_t errlen) {
  if (!cx->out_dir) {
    snprintf(err, errlen, "%s writes result files: name a folder for them with --out DIR", cx->script);
    return -1;
  }
  struct stat stt;
  if (stat(cx->out_dir, &stt) != 0) {
    if (mkdir(cx->out_dir, 0777) != 0) {
      snprintf(err, errlen, "cannot create '%s': %s", cx->out_dir, strerror(errno));
      return -1;
    }
  } else if (!S_ISDIR(stt.st_mode)) {
    snprintf(err, errlen, "cannot write results into '%s': not a folder", cx->out_dir);
    return -1;
  }
  if (write_files(cx, 0, err, errlen)) {
    write_files(cx, -1, err, 0);
    return -1;
  }
  return 0;
}

/* Stores the variants as runs (unless --no-save) and commits the script's transaction. */
static int finish_store(lua_ctx *cx, char *err, size_t errlen) {
  struct lua_ctx_private *p = cx->p;
  if (p->nvariants && cx->st && !cx->no_runs) {
    if (!p->tx && store_begin(cx->st)) {
      snprintf(err, errlen, "%s", store_error(cx->st));
      return -1;
    }
    p->tx = 1;
    for (size_t i = 0; i < p->nvariants; i++) {
      lvariant *v = &p->variants[i];
      lresult *lr = v->res;
      run_meta m = lapi_meta(lr, cx->scenario, v->name, v->step_time_s, v->samples_per_s);
      if (session_save_in(p->ses, &m, &lr->run.result, NULL, SESSION_RESULT_REPORT, &v->run_id, err, errlen))
        return -1;
    }
  }
  if (p->tx) {
    if (store_commit(cx->st)) {
      snprintf(err, errlen, "%s", store_error(cx->st));
      return -1;
    }
    p->tx = 0;
  }
  return 0;
}

int lua_api_finish(lua_ctx *cx, lua_host *h, char *err, size_t errlen) {
  struct lua_ctx_private *p = cx->p;
  (void)h;
  if (finish_check(cx, err, errlen) || (p->nfiles && finish_stage_files(cx, err, errlen))) {
    lua_api_abort(cx);
    return -1;
  }
  if (finish_store(cx, err, errlen)) {
    write_files(cx, -1, err, 0);
    lua_api_abort(cx); /* rolls back the script's writes (nothing when no transaction was opened) */
    return -1;
  }
  if (p->nfiles && write_files(cx, 1, err, errlen)) {
    write_files(cx, -1, err, 0);
    return -1;
  }
  p->finished = 1;
  return 0;
}

void lua_api_abort(lua_ctx *cx) {
  if (cx->p && cx->p->tx && cx->st) store_rollback(cx->st);
  if (cx->p) cx->p->tx = 0;
}

size_t lua_api_nvariants(const lua_ctx *cx) { return cx->p ? cx->p->nvariants : 0; }

const session_run *lua_api_variant(const lua_ctx *cx, size_t i, const char **name, double *step_time_s,
                                   double *samples_per_s) {
  const struct lua_ctx_private *p = cx->p;
  if (!p || i >= p->nvariants || !p->variants[i].res) return NULL;
  const lvariant *v = &p->variants[i];
  if (name) *name = v->name;
  if (step_time_s) *step_time_s = v->step_time_s;
  if (samples_per_s) *samples_per_s = v->samples_per_s;
  return &v->res->run;
}

int lua_api_fits(const lua_ctx *cx) {
  const struct lua_ctx_private *p = cx->p;
  int any = 0, fit = 0;
  for (size_t i = p && p->nvariants > 1 ? 1 : 0; p && i < p->nvariants; i++) {
    const lresult *lr = p->variants[i].res;
    if (!lr) continue;
    any = 1;
    fit |= lr->run.result.ooms == 0;
  }
  return any ? fit : -1;
}

void lua_api_print_json(lua_ctx *cx, FILE *f) {
  struct lua_ctx_private *p = cx->p;
  yajl_gen g = jsonw_file(f, 0);
  yajl_gen_map_open(g);
  jsonw_kstr(g, "scenario", cx->scenario);
  jsonw_kstr(g, "script", cx->script);
  jsonw_str(g, "parameters");
  yajl_gen_map_open(g);
  for (size_t i = 0; i < cx->nparams; i++) jsonw_kstr(g, cx->params[i].key, cx->params[i].value);
  yajl_gen_map_close(g);
  jsonw_str(g, "variants");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < p->nvariants; i++) {
    lvariant *v = &p->variants[i];
    lresult *lr = v->res;
    run_meta m = lapi_meta(lr, cx->scenario, v->name, v->step_time_s, v->samples_per_s);
    yajl_gen_map_open(g);
    jsonw_kstr(g, "name", v->name);
    session_json(p->ses, g, &m, &lr->run.result, 0);
    jsonw_str(g, "transforms");
    yajl_gen_array_open(g);
    if (lr->transforms) {
      const char *s = lr->transforms;
      while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (len) jsonw_strn(g, s, len);
        s += len + (nl ? 1 : 0);
      }
    }
    yajl_gen_array_close(g);
    if (v->run_id > 0) jsonw_kint(g, "run_id", v->run_id);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  jsonw_str(g, "assumptions");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < p->nnotes; i++) jsonw_str(g, p->notes[i]);
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
  yajl_gen_free(g);
  fputc('\n', f);
}

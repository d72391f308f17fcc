/* test_replay_paths.c: a replay through the command line, through Lua and through the GPU backend's plan gives the same result. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "cuda/backend_cuda.h"
#include "engine/report.h"
#include "io/jsonw.h"
#include "session/session.h"
#include "store/store_source.h"
#include "test.h"

/*
 * Every front end asks the replay session (replay/session), so the same request must give the
 * same result JSON whichever front end made it: `memplay replay --json`, a script's
 * trace:replay{...} (memplay.json of its result), and the plan the real-GPU backend makes before
 * it touches a GPU (its simulated pass, on devices that report the memory the command line's
 * simulated device has). The plan predicts no time, so its comparison leaves out the time
 * prediction (time, device, step_time_s, samples_per_s); and the bfc model, which sizes its
 * region from the GPU's free memory and compute capability (the plan's devices have the GPU's),
 * is compared between the command line and Lua only. elapsed_s differs between any two runs. A
 * GPU cannot hold a recorded window's cached segments, so the plan starts a window from its live
 * blocks: it is compared with `replay --live-start` (and the reason each gives is left out).
 */

static const char *memplay_bin, *src_dir;
static char dir[PATH_MAX], db[PATH_MAX + 16];

static const char *const allocators[] = {"cuda", "torch", "torch:expandable_segments:True", "async", "bfc", "ideal"};

/* Runs a shell command and returns its standard output (NULL when it failed). */
static char *run_capture(const char *cmd) {
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  size_t n = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
    n += got;
    if (cap - n < 2) buf = realloc(buf, cap *= 2);
  }
  buf[n] = 0;
  if (pclose(p) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

static int ignored(const char *key, int plan) {
  static const char *const always[] = {"elapsed_s", "run_id", NULL};
  static const char *const timed[] = {"time", "device", "step_time_s", "samples_per_s", "window_start", NULL};
  for (size_t i = 0; always[i]; i++)
    if (!strcmp(key, always[i])) return 1;
  for (size_t i = 0; plan && timed[i]; i++)
    if (!strcmp(key, timed[i])) return 1;
  return 0;
}

/* Keys only a Lua result has (docs/lua-api.md, "Results"). */
static int lua_only(const char *key) { return !strcmp(key, "fits") || !strcmp(key, "derived") || !strcmp(key, "transforms"); }

static int is_empty(yajl_val v) {
  return (YAJL_IS_ARRAY(v) && v->u.array.len == 0) || (YAJL_IS_OBJECT(v) && v->u.object.len == 0);
}

static yajl_val member(yajl_val o, const char *key) {
  for (size_t i = 0; i < o->u.object.len; i++)
    if (!strcmp(o->u.object.keys[i], key)) return o->u.object.values[i];
  return NULL;
}

/* 0 when a and b hold the same values (objects in any order, an empty array the same as an empty
 * object, a null member the same as none, numbers to 1e-9); else -1 after printing where they differ. */
static int same(yajl_val a, yajl_val b, const char *path, int top, int plan) {
  char sub[512];
  if (is_empty(a) && is_empty(b)) return 0;
  if (YAJL_IS_NUMBER(a) && YAJL_IS_NUMBER(b)) {
    double x = YAJL_GET_DOUBLE(a), y = YAJL_GET_DOUBLE(b);
    if (x == y || fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y))) return 0;
    fprintf(stderr, "  %s: %.17g != %.17g\n", path, x, y);
    return -1;
  }
  if (YAJL_IS_STRING(a) && YAJL_IS_STRING(b)) {
    const char *x = a->u.string, *y = b->u.string;
    if (!strcmp(x, y)) return 0;
    fprintf(stderr, "  %s: \"%s\" != \"%s\"\n", path, x, y);
    return -1;
  }
  if (a->type != b->type) {
    fprintf(stderr, "  %s: of different types\n", path);
    return -1;
  }
  int rc = 0;
  if (YAJL_IS_ARRAY(a)) {
    if (a->u.array.len != b->u.array.len) {
      fprintf(stderr, "  %s: %zu != %zu elements\n", path, a->u.array.len, b->u.array.len);
      return -1;
    }
    for (size_t i = 0; i < a->u.array.len && !rc; i++) {
      snprintf(sub, sizeof sub, "%s[%zu]", path, i);
      rc = same(a->u.array.values[i], b->u.array.values[i], sub, 0, plan);
    }
  } else if (YAJL_IS_OBJECT(a)) {
    for (int pass = 0; pass < 2 && !rc; pass++) {
      yajl_val x = pass ? b : a, y = pass ? a : b;
      for (size_t i = 0; i < x->u.object.len && !rc; i++) {
        const char *k = x->u.object.keys[i];
        if (top && (ignored(k, plan) || lua_only(k))) continue;
        yajl_val w = member(y, k);
        snprintf(sub, sizeof sub, "%s.%s", path, k);
        if (!w && YAJL_IS_NULL(x->u.object.values[i])) continue; /* a Lua table holds no nil */
        if (!w) {
          fprintf(stderr, "  %s: only in one result\n", sub);
          rc = -1;
        } else if (!pass) {
          rc = same(x->u.object.values[i], w, sub, 0, plan);
        }
      }
    }
  }
  return rc;
}

static yajl_val parse(const char *text, const char *what) {
  char err[256];
  yajl_val v = text ? yajl_tree_parse(text, err, sizeof err) : NULL;
  if (!v) fprintf(stderr, "%s: no JSON result (%s)\n", what, text ? err : "the command failed");
  return v;
}

/* ---- the GPU backend's plan, on pretend GPUs with the command line's simulated memory ---- */

typedef struct plan_ctx {
  store *s;
  const store_trace *t;
} plan_ctx;

static int open_events(void *arg, replay_source *src, char *err, size_t errlen) {
  plan_ctx *c = arg;
  if (store_source_open(src, c->s, c->t->id)) return snprintf(err, errlen, "%s", store_error(c->s)), -1;
  return 0;
}

/* Free and total memory as `memplay replay` simulates a device: the trace's recorded memory, else 80 GiB. */
static int gpu_memory(void *arg, int device, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen) {
  plan_ctx *c = arg;
  (void)device, (void)err, (void)errlen;
  *total_bytes = *free_bytes = c->t->device_memory > 0 ? (uint64_t)c->t->device_memory : UINT64_C(80) << 30;
  return 0;
}

static char *plan_json(store *s, const store_trace *t, const char *alloc) {
  char err[1024];
  session *ses = session_new(s);
  session_request req;
  session_request_init(&req);
  req.trace = t;
  req.allocator = alloc;
  req.no_device = 1;
  req.use_environment = 1;
  session_run run;
  backend_plan plan;
  memset(&plan, 0, sizeof plan);
  char *out = NULL;
  plan_ctx pc = {s, t};
  backend_plan_config cfg = {.ses = ses, .run = &run, .scale = 1.0, .open = open_events, .open_arg = &pc,
                             .gpu_memory = gpu_memory, .gpu_arg = &pc};
  if (session_prepare(ses, &req, &run, err, sizeof err) || backend_plan_make(&cfg, &plan, err, sizeof err)) {
    fprintf(stderr, "plan of %s under %s: %s\n", t->name, alloc, err);
  } else {
    yajl_gen g = jsonw_mem();
    yajl_gen_map_open(g);
    run_meta m = session_meta(&run);
    session_json(ses, g, &m, &plan.predicted, 0);
    yajl_gen_map_close(g);
    size_t len;
    const char *text = jsonw_text(g, &len);
    out = strndup(text, len);
    yajl_gen_free(g);
  }
  backend_plan_release(&plan);
  session_run_release(&run);
  session_free(ses);
  return out;
}

/* ---- the comparisons -------------------------------------------------------------------- */

static void compare_trace(store *s, const char *name) {
  store_trace t;
  CHECK_EQ(store_trace_find(s, name, &t), 0);
  for (size_t i = 0; i < sizeof allocators / sizeof *allocators; i++) {
    const char *a = allocators[i];
    char cmd[3 * PATH_MAX], what[256];
    snprintf(what, sizeof what, "%s under %s", name, a);
    snprintf(cmd, sizeof cmd, "'%s' --db '%s' replay '%s' --allocator '%s' --json --no-save", memplay_bin, db, name, a);
    char *cli_text = run_capture(cmd);
    snprintf(cmd, sizeof cmd, "'%s' --db '%s' run '%s/tests/data/replay_paths.lua' '%s' '%s'", memplay_bin, db,
             src_dir, name, a);
    char *lua_text = run_capture(cmd);
    yajl_val cli = parse(cli_text, what), lua = parse(lua_text, what);
    CHECK(cli && lua);
    if (cli && lua && same(cli, lua, "", 1, 0)) {
      fprintf(stderr, "%s: the command line and Lua disagree\n", what);
      test_failures++;
    }
    if (cli && strcmp(a, "bfc")) {
      snprintf(cmd, sizeof cmd, "'%s' --db '%s' replay '%s' --allocator '%s' --json --no-save --live-start", memplay_bin,
               db, name, a);
      char *live_text = run_capture(cmd);
      yajl_val live = parse(live_text, what);
      char *plan_text = plan_json(s, &t, a);
      yajl_val plan = parse(plan_text, what);
      CHECK(plan != NULL && live != NULL);
      if (plan && live && same(live, plan, "", 1, 1)) {
        fprintf(stderr, "%s: the command line and the GPU plan disagree\n", what);
        test_failures++;
      }
      yajl_tree_free(plan);
      yajl_tree_free(live);
      free(plan_text);
      free(live_text);
    }
    yajl_tree_free(cli);
    yajl_tree_free(lua);
    free(cli_text);
    free(lua_text);
  }
  store_trace_clear(&t);
}

static int import(const char *path, const char *name) {
  char cmd[3 * PATH_MAX];
  snprintf(cmd, sizeof cmd, "'%s' --db '%s' import '%s' --name '%s' >/dev/null", memplay_bin, db, path, name);
  return system(cmd);
}

int test_failures = 0;

int main(void) {
  memplay_bin = getenv("MEMPLAY");
  src_dir = getenv("MEMPLAY_SRC");
  const char *traces = getenv("MEMPLAY_TRACES");
  if (!memplay_bin || !src_dir) {
    fprintf(stderr, "MEMPLAY and MEMPLAY_SRC must be set (ctest sets them)\n");
    return 1;
  }
  unsetenv("PYTORCH_CUDA_ALLOC_CONF"); /* the environment is the same for every path, and empty */
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/memplay-paths-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  snprintf(db, sizeof db, "%s/paths.db", dir);
  /* the bundled sample, and the real traces when they are at hand: snapshots, a profiler trace,
   * an Nsight Systems export */
  static const char *const real[][2] = {
    {"pytorch/kk_ctx128_fullstep.pickle", "kk128"},      {"pytorch/wed_medium_128_training.pickle", "wed128"},
    {"pytorch/bolong_expandable_fwd_ctx128_fp32.pickle", "bolong"}, {"pytorch/niu_ctx150_fwdbwd_fp32.pickle", "niu150"},
    {"pytorch/maph_single_stream.pickle", "maph"},        {"kineto/hta_a100_pinned_pageable_memcpy.json.gz", "hta"},
    {"nsys/ntua_a100_gemm_fo_memusage.sqlite", "ntua"},
  };
  char path[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/traces/sample.jsonl", src_dir);
  CHECK_EQ(import(path, "sample"), 0);
  size_t nreal = 0;
  for (size_t i = 0; traces && i < sizeof real / sizeof *real; i++) {
    snprintf(path, sizeof path, "%s/%s", traces, real[i][0]);
    if (access(path, R_OK) == 0 && import(path, real[i][1]) == 0) nreal++;
  }
  store *s = NULL;
  char err[512];
  CHECK_EQ(store_open(&s, db, 0, err, sizeof err), 0);
  if (s) {
    compare_trace(s, "sample");
    for (size_t i = 0; i < sizeof real / sizeof *real; i++) {
      store_trace t;
      if (store_trace_find(s, real[i][1], &t) == 0) {
        store_trace_clear(&t);
        compare_trace(s, real[i][1]);
      }
    }
    store_close(s);
  }
  fprintf(stderr, "compared the sample and %zu real traces under %zu allocators\n", nreal,
          sizeof allocators / sizeof *allocators);
  snprintf(path, sizeof path, "rm -rf '%s'", dir);
  if (system(path)) return 1;
  TEST_MAIN_END();
}

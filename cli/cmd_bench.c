/* cmd_bench.c: `memplay bench`: import and replay speed on a generated trace, printed as a table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "export/exporter.h"
#include "gen/gen.h"
#include "import/importer.h"
#include "io/jsonw.h"
#include "store/store_source.h"
#include "engine/time_observer.h"
#include "sim/hashmap.h"
#include "cli.h"

/* Issue 17's goals for the stages that have one, in events per second: replay from the store of
 * a trace that records its device, so that the time model runs (a process reading its chunks, as
 * `memplay replay` does), and import. */
#define BENCH_GOAL_STORE_IDEAL 20e6
#define BENCH_GOAL_STORE_TORCH 12e6
#define BENCH_GOAL_IMPORT 2e6
/* and of the torch model in memory */
#define BENCH_GOAL_MEMORY_TORCH 50e6

/* The most events --events takes: they are held in memory (about 90 GB at this count). */
#define BENCH_MAX_EVENTS UINT64_C(1000000000)

static const char *const bench_usage[] = {
  "memplay bench [--events N] [--seed S] [--allocators LIST] [--json]",
  "  --events N        events in the generated trace (default 10000000, at most 1000000000)",
  "  --allocators LIST comma-separated allocator names (default: every model)",
  "  --keep DIR        keep the benchmark store and files in DIR",
  NULL,
};
const cli_usage cmd_bench_usage = {
  .summary = "measure import and replay speed on a generated trace (prints a table)",
  .lines = bench_usage,
};

static const struct option bench_options[] = {
  {"events", required_argument, NULL, 'e'},
  {"seed", required_argument, NULL, 's'},
  {"allocators", required_argument, NULL, 'a'},
  {"keep", required_argument, NULL, 'k'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

typedef struct row {
  char stage[64];
  uint64_t events;
  double seconds;
  double mb; /* megabytes processed, 0 when not applicable */
  double vs_read; /* time relative to the store read alone (decoding its chunks), 0 when not applicable */
  int cpu;        /* seconds are the thread's CPU time, the best of runs; else wall time, one run */
  double goal;    /* events/s issue 17 asks of the stage, 0 none */
} row;

typedef struct bench {
  gen_config gc;
  const char *allocs, *keep;             /* --allocators (NULL: every model), --keep */
  const sim_allocator_ops *timed;        /* the model also replayed with the time model */
  int timed_torch;                       /* torch is listed: it is replayed from the store with it too */
  char dir[4096], dbpath[4200], jpath[4200];
  size_t events;                         /* generated */
  char model[200];                       /* what the generator made */
  store *s;                              /* the benchmark's own store */
  int64_t trace_id;
  char err[1024];                        /* why a stage failed */
  row *rows;
  size_t n, cap;
} bench;

/* A replay of one allocator model: replay_once or replay_timed. */
typedef int (*replay_fn)(const sim_allocator_ops *ops, replay_source *src, replay_result *res, char *err, size_t n);

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The calling thread's CPU time: a replay runs on it alone, and CPU time is what a shared machine
 * leaves comparable between runs (wall time counts whoever else ran). */
static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Replays are repeated and the best run kept: this many on traces of up to 2 M events, one on
 * longer ones (which take seconds each). */
static int bench_runs(const bench *b, int runs) { return b->events <= 2000000 ? runs : 1; }

static row *add(bench *b, const char *stage, uint64_t events, double seconds) {
  sim_grow((void **)&b->rows, &b->cap, b->n + 1, sizeof *b->rows);
  row *r = &b->rows[b->n++];
  memset(r, 0, sizeof *r);
  snprintf(r->stage, sizeof r->stage, "%s", stage);
  r->events = events;
  r->seconds = seconds;
  return r;
}

/* A stage failed on the store: its error becomes the bench's. Returns -1. */
static int store_failed(bench *b) {
  snprintf(b->err, sizeof b->err, "%s", store_error(b->s));
  return -1;
}

static int replay_once(const sim_allocator_ops *ops, replay_source *src, replay_result *res, char *err, size_t n) {
  sim_spec spec;
  if (sim_spec_parse(&spec, ops->name, err, n)) return -1;
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX, .total_memory = UINT64_C(85520809984)};
  int rc = replay_run(&cfg, src, res, err, n);
  sim_spec_release(&spec);
  return rc;
}

/* The same replay with the time model attached as an observer (the H100 profile: the generated
 * trace records an H100). */
static int replay_timed(const sim_allocator_ops *ops, replay_source *src, replay_result *res, char *err, size_t n) {
  sim_spec spec;
  if (sim_spec_parse(&spec, ops->name, err, n)) return -1;
  sim_tm_config tc = {.device = sim_device_builtin("H100"), .keep_device_waits = 1, .infer_dependencies = 1,
                      .malloc_syncs = 1, .kernel_scale = 1, .batch_size = 1,
                      .events_hint = (int64_t)src->length_hint};
  time_observer to;
  time_observer_init(&to, &tc, NULL);
  replay_observer hook = time_observer_hook(&to);
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX, .total_memory = UINT64_C(85520809984),
                       .observers = &hook, .nobservers = 1};
  int rc = replay_run(&cfg, src, res, err, n);
  sim_tm_result tr;
  time_observer_finish(&to, &tr);
  sim_tm_result_release(&tr);
  time_observer_release(&to);
  sim_spec_release(&spec);
  return rc;
}

static const sim_allocator_ops *first_wanted(const char *list) {
  for (size_t i = 0; sim_allocators[i]; i++)
    if (sim_allocator_listed(list, sim_allocators[i]->name)) return sim_allocators[i];
  return NULL;
}

/* Parses the options into b. Returns 0, or -1 with the exit code in *code. */
static int bench_parse(int argc, char **argv, cli *c, bench *b, int *code) {
  memset(b, 0, sizeof *b);
  b->gc = (gen_config){10000000, 1, 0};
  *code = CLI_OK;
  int opt;
  while ((opt = cli_getopt(argc, argv, "he:s:a:k:", bench_options)) != -1) {
    int r = cli_common_option(c, "bench", opt, code);
    if (r < 0) return -1;
    if (r) continue;
    char *end;
    switch (opt) {
    case 'e':
      errno = 0;
      b->gc.events = strtoull(optarg, &end, 10);
      if (*end || !b->gc.events || optarg[0] == '-' || errno == ERANGE || b->gc.events > BENCH_MAX_EVENTS) {
        *code = cli_usage_error("bench", "--events wants a positive number up to %llu, not '%s'",
                                (unsigned long long)BENCH_MAX_EVENTS, optarg);
        return -1;
      }
      break;
    case 's':
      b->gc.seed = strtoull(optarg, &end, 10);
      if (*end) {
        *code = cli_usage_error("bench", "--seed wants a number");
        return -1;
      }
      break;
    case 'a': b->allocs = optarg; break;
    case 'k': b->keep = optarg; break;
    }
  }
  if (optind != argc) {
    *code = cli_usage_error("bench", "bench takes no arguments");
    return -1;
  }
  for (const char *p = b->allocs; p && *p;) {
    size_t n = strcspn(p, ",");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n, p);
    if (!sim_allocator_find(name)) {
      *code = cli_usage_error("bench", "unknown allocator '%s'", name);
      return -1;
    }
    p += n + (p[n] == ',');
  }
  b->timed = first_wanted(b->allocs);
  b->timed_torch = sim_allocator_listed(b->allocs, sim_torch_ops.name);
  return 0;
}

/* The folder for the store and the JSON Lines file: --keep DIR, else a new temporary one. 0, or
 * -1 after the message. */
static int bench_dir_make(bench *b) {
  if (b->keep) {
    snprintf(b->dir, sizeof b->dir, "%s", b->keep);
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(b->dir, sizeof b->dir, "%s/memplay-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(b->dir)) {
      cli_error("cannot make a temporary directory in '%s'", tmp && *tmp ? tmp : "/tmp");
      return -1;
    }
  }
  snprintf(b->dbpath, sizeof b->dbpath, "%s/bench.db", b->dir);
  snprintf(b->jpath, sizeof b->jpath, "%s/bench.jsonl", b->dir);
  unlink(b->dbpath);
  return 0;
}

static void bench_dir_remove(const bench *b) {
  store_remove_files(b->dbpath);
  unlink(b->jpath);
  rmdir(b->dir);
}

/* Stage 1: the trace in memory. Returns its events (b->events of them). */
static sim_event *bench_generate(bench *b) {
  double t0 = now_s();
  gen *g = gen_new(&b->gc);
  sim_event *evs = malloc(b->gc.events * sizeof *evs); /* BENCH_MAX_EVENTS keeps the product in range */
  if (!evs) {
    snprintf(b->err, sizeof b->err, "cannot hold %llu events in memory", (unsigned long long)b->gc.events);
    gen_free(g);
    return NULL;
  }
  replay_source gs = gen_source(g);
  size_t n = 0;
  while (n < b->gc.events && replay_source_next(&gs, &evs[n]) > 0) n++;
  b->events = n;
  add(b, "generate in memory", n, now_s() - t0);
  snprintf(b->model, sizeof b->model, "%s", gen_describe(g));
  gen_free(g);
  return evs;
}

/* One model over the events in memory: the best CPU time of five runs (bench_runs). */
static int replay_best(bench *b, const sim_allocator_ops *ops, replay_fn fn, const sim_event *evs,
                       const replay_plan *plan, const char *stage) {
  replay_result res;
  memset(&res, 0, sizeof res);
  double best = 0;
  for (int k = 0; k < bench_runs(b, 5); k++) {
    replay_array_source as;
    replay_source src = replay_array_source_planned(&as, evs, b->events, plan);
    double t0 = cpu_s();
    int rc = fn(ops, &src, &res, b->err, sizeof b->err);
    double t = cpu_s() - t0;
    if (!rc && (!k || t < best)) best = t;
    replay_result_release(&res);
    if (rc) return -1;
  }
  row *r = add(b, stage, b->events, best);
  r->cpu = 1;
  if (ops == &sim_torch_ops && fn == replay_once) r->goal = BENCH_GOAL_MEMORY_TORCH;
  return 0;
}

/* Stage 2: replay of the in-memory stream, per allocator, then the first with the time model;
 * then the same planned (as a cached trace replayed again is), after the plan's own time. */
static int bench_replay_memory(bench *b, const sim_event *evs) {
  char stage[64];
  replay_plan plan = {0};
  for (int planned = 0; planned < 2; planned++) {
    if (planned) {
      double t0 = cpu_s();
      if (replay_plan_build(&plan, evs, b->events)) break; /* too many records to number: no planned rows */
      add(b, "plan the events in memory", b->events, cpu_s() - t0)->cpu = 1;
    }
    const char *how = planned ? ", planned" : "";
    for (size_t i = 0; sim_allocators[i]; i++) {
      if (!sim_allocator_listed(b->allocs, sim_allocators[i]->name)) continue;
      snprintf(stage, sizeof stage, "replay in memory%s: %s", how, sim_allocators[i]->name);
      if (replay_best(b, sim_allocators[i], replay_once, evs, planned ? &plan : NULL, stage)) goto failed;
    }
    if (b->timed) {
      snprintf(stage, sizeof stage, "replay in memory%s: %s + time model", how, b->timed->name);
      if (replay_best(b, b->timed, replay_timed, evs, planned ? &plan : NULL, stage)) goto failed;
    }
  }
  replay_plan_release(&plan);
  return 0;
failed:
  replay_plan_release(&plan);
  return -1;
}

/* Stage 3: the same trace generated into a new store through the store writer. */
static int bench_import_generated(bench *b) {
  char serr[STORE_ERRLEN];
  if (store_open(&b->s, b->dbpath, STORE_CREATE, serr, sizeof serr)) {
    snprintf(b->err, sizeof b->err, "%s", serr);
    return -1;
  }
  double t0 = now_s();
  if (store_begin(b->s) || gen_write(b->s, &b->gc, "bench", &b->trace_id, b->err, sizeof b->err) ||
      store_commit(b->s)) {
    if (!b->err[0]) snprintf(b->err, sizeof b->err, "%s", store_error(b->s));
    return -1;
  }
  add(b, "import: generate into the store", b->events, now_s() - t0)->goal = BENCH_GOAL_IMPORT;
  return 0;
}

/* Stage 4b: the same file imported into a new store, which its first import writes once, not
 * through the log (docs/trace-store.md): timed from the store's open to its close. */
static int bench_jsonl_new_store(bench *b, double mb) {
  char path[4300], serr[STORE_ERRLEN];
  snprintf(path, sizeof path, "%s/new.db", b->dir);
  unlink(path);
  double t0 = now_s();
  store *s;
  if (store_open(&s, path, STORE_CREATE, serr, sizeof serr)) {
    snprintf(b->err, sizeof b->err, "%s", serr);
    return -1;
  }
  import_ctx ic = {.s = s, .path = b->jpath, .name = "bench-jsonl"};
  int rc = import_file(&ic, "jsonl");
  if (rc) snprintf(b->err, sizeof b->err, "%s", ic.err);
  store_close(s);
  if (!rc) {
    row *r = add(b, "import: jsonl into a new store", b->events, now_s() - t0);
    r->goal = BENCH_GOAL_IMPORT;
    r->mb = mb;
  }
  store_remove_files(path);
  return rc;
}

/* Stage 4: the stored trace written out as JSON Lines and imported back (into the store that
 * holds it), then into a new store. */
static int bench_jsonl(bench *b) {
  store_trace t;
  if (store_trace_find(b->s, "bench", &t)) return store_failed(b);
  FILE *f = fopen(b->jpath, "w");
  if (!f) {
    snprintf(b->err, sizeof b->err, "cannot write '%.900s'", b->jpath);
    store_trace_clear(&t);
    return -1;
  }
  double t0 = now_s();
  int xrc = exporter_find("jsonl")->write(b->s, &t, f, b->err, sizeof b->err);
  if (!xrc) xrc = fflush(f);
  double export_s = now_s() - t0;
  /* On the disk before the imports are timed, as a file to import is: the kernel's write-back of
   * the file just written would otherwise compete with the imports for the disk and the CPU. */
  if (!xrc) fdatasync(fileno(f));
  fclose(f);
  store_trace_clear(&t);
  if (xrc) return -1;
  add(b, "export: jsonl", b->events, export_s);
  import_ctx ic = {.s = b->s, .path = b->jpath, .name = "bench-jsonl"};
  t0 = now_s();
  if (import_file(&ic, "jsonl")) {
    snprintf(b->err, sizeof b->err, "%s", ic.err);
    return -1;
  }
  row *r = add(b, "import: jsonl", b->events, now_s() - t0);
  r->goal = BENCH_GOAL_IMPORT;
  FILE *jf = fopen(b->jpath, "r");
  if (jf) {
    fseek(jf, 0, SEEK_END);
    r->mb = (double)ftell(jf) / 1e6;
    fclose(jf);
  }
  int rc = bench_jsonl_new_store(b, r->mb);
  unlink(b->jpath);
  return rc;
}

/* One model over the events read from the store (the chunks decoded and lent to the engine, on
 * this thread), the best CPU time of three runs, timed against reading them alone. The goals are
 * the time model's rows: the issue asks them of a trace that records its device. */
static int replay_from_store(bench *b, const sim_allocator_ops *ops, replay_fn fn, const char *stage, uint64_t rows,
                             double read_s) {
  double best = 0;
  for (int k = 0; k < bench_runs(b, 3); k++) {
    replay_result res;
    memset(&res, 0, sizeof res);
    replay_source src;
    double t0 = cpu_s();
    if (store_source_open(&src, b->s, b->trace_id)) return store_failed(b);
    int rc = fn(ops, &src, &res, b->err, sizeof b->err);
    replay_source_close(&src);
    replay_result_release(&res);
    if (rc) return -1;
    double t = cpu_s() - t0;
    if (!k || t < best) best = t;
  }
  row *r = add(b, stage, rows, best);
  r->cpu = 1;
  r->vs_read = r->seconds / read_s;
  if (fn == replay_timed) r->goal = ops == &sim_ideal_ops ? BENCH_GOAL_STORE_IDEAL : ops == &sim_torch_ops ? BENCH_GOAL_STORE_TORCH : 0;
  return 0;
}

/* Stage 5: the store read alone (its chunks decoded), then replay from the store. */
static int bench_replay_store(bench *b) {
  double read_s = 0;
  uint64_t rows = 0;
  for (int k = 0; k < bench_runs(b, 3); k++) {
    sim_event ev;
    store_reader *rd;
    double t0 = cpu_s();
    if (store_reader_open(b->s, b->trace_id, &rd)) return store_failed(b);
    int got;
    for (rows = 0; (got = store_reader_next(rd, &ev)) > 0;) rows++;
    store_reader_close(rd);
    if (got < 0) return store_failed(b);
    double t = cpu_s() - t0;
    if (!k || t < read_s) read_s = t;
  }
  add(b, "store read of the events", rows, read_s)->cpu = 1;
  char stage[64];
  for (size_t i = 0; sim_allocators[i]; i++) {
    if (!sim_allocator_listed(b->allocs, sim_allocators[i]->name)) continue;
    snprintf(stage, sizeof stage, "replay from store: %s", sim_allocators[i]->name);
    if (replay_from_store(b, sim_allocators[i], replay_once, stage, rows, read_s)) return -1;
  }
  if (b->timed) {
    snprintf(stage, sizeof stage, "replay from store: %s + time model", b->timed->name);
    if (replay_from_store(b, b->timed, replay_timed, stage, rows, read_s)) return -1;
  }
  if (b->timed_torch && b->timed != &sim_torch_ops &&
      replay_from_store(b, &sim_torch_ops, replay_timed, "replay from store: torch + time model", rows, read_s))
    return -1;
  return 0;
}

static void print_json(const bench *b, const struct rusage *ru) {
  yajl_gen j = jsonw_file(stdout, 0);
  yajl_gen_map_open(j);
  jsonw_kuint(j, "events", b->events);
  jsonw_kuint(j, "seed", b->gc.seed);
  jsonw_kstr(j, "trace", b->model);
  jsonw_kint(j, "max_rss_bytes", (int64_t)ru->ru_maxrss * 1024);
  jsonw_str(j, "stages");
  yajl_gen_array_open(j);
  for (size_t i = 0; i < b->n; i++) {
    const row *x = &b->rows[i];
    yajl_gen_map_open(j);
    jsonw_kstr(j, "stage", x->stage);
    jsonw_kuint(j, "events", x->events);
    jsonw_kdouble(j, "seconds", x->seconds);
    jsonw_kstr(j, "clock", x->cpu ? "cpu" : "wall");
    jsonw_kdouble(j, "events_per_s", x->seconds > 0 ? (double)x->events / x->seconds : 0);
    if (x->mb) jsonw_kdouble(j, "mb_per_s", x->mb / x->seconds);
    if (x->vs_read) jsonw_kdouble(j, "vs_store_read", x->vs_read);
    if (x->goal) {
      jsonw_kdouble(j, "goal_events_per_s", x->goal);
      jsonw_kbool(j, "goal_met", (double)x->events / x->seconds >= x->goal);
    }
    yajl_gen_map_close(j);
  }
  yajl_gen_array_close(j);
  yajl_gen_map_close(j);
  yajl_gen_free(j);
  putchar('\n');
}

static void print_table(const bench *b, const struct rusage *ru) {
  char a[32];
  printf("memplay bench: %s events of a %s\n\n", cli_count(a, sizeof a, b->events), b->model);
  printf("%-46s %14s %10s %5s %8s %8s %16s\n", "stage", "events/s", "seconds", "", "MB/s", "vs read", "goal");
  for (size_t i = 0; i < b->n; i++) {
    const row *x = &b->rows[i];
    char rate[32], mb[16] = "", vs[16] = "", goal[32] = "";
    double eps = x->seconds > 0 ? (double)x->events / x->seconds : 0;
    cli_count(rate, sizeof rate, (uint64_t)eps);
    if (x->mb) snprintf(mb, sizeof mb, "%.0f", x->mb / x->seconds);
    if (x->vs_read) snprintf(vs, sizeof vs, "%.2fx", x->vs_read);
    if (x->goal) snprintf(goal, sizeof goal, ">= %.0f M: %s", x->goal / 1e6, eps >= x->goal ? "met" : "NOT met");
    printf("%-46s %14s %10.3f %5s %8s %8s %16s\n", x->stage, rate, x->seconds, x->cpu ? "cpu" : "wall", mb, vs, goal);
  }
  printf("\nseconds: cpu, the replaying thread's CPU time, best of %d runs (the machine may be shared);\n"
         "wall, the elapsed time of one run (imports use threads and the disk)\n",
         bench_runs(b, 5));
  printf("max resident memory %.0f MiB (the in-memory stage holds the whole trace)\n", (double)ru->ru_maxrss / 1024);
}

int cmd_bench(int argc, char **argv, cli *c) {
  bench b;
  int code;
  if (bench_parse(argc, argv, c, &b, &code)) return code;
  if (bench_dir_make(&b)) return CLI_FAIL;
  sim_event *evs = bench_generate(&b);
  int rc = evs ? bench_replay_memory(&b, evs) : -1;
  free(evs);
  if (rc || bench_import_generated(&b) || bench_jsonl(&b) || bench_replay_store(&b)) {
    cli_error("bench failed: %s", b.err);
    free(b.rows);
    if (b.s) store_close(b.s);
    if (!b.keep) bench_dir_remove(&b); /* a failed bench leaves no temporary folder behind */
    return CLI_FAIL;
  }
  store_close(b.s);
  b.s = NULL;
  if (!b.keep) bench_dir_remove(&b);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  if (c->json) print_json(&b, &ru);
  else print_table(&b, &ru);
  free(b.rows);
  return CLI_OK;
}

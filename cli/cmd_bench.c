/* cmd_bench.c: `memplay bench`: import and replay speed on a generated trace, printed as a table. */
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

static const char *const bench_usage[] = {
  "memplay bench [--events N] [--seed S] [--allocators LIST] [--json]",
  "  --events N        events in the generated trace (default 10000000)",
  "  --allocators LIST comma-separated allocator names (default: every model)",
  "  --keep DIR        keep the benchmark store and files in DIR",
  NULL,
};
const cli_usage cmd_bench_usage = {
  .summary = "measure import and replay speed on a generated trace (prints a table)",
  .lines = bench_usage,
};

typedef struct row {
  char stage[64];
  uint64_t events;
  double seconds;
  double mb; /* megabytes processed, 0 when not applicable */
  double vs_read; /* time relative to the SQLite read, 0 when not applicable */
} row;

typedef struct bench {
  row *rows;
  size_t n, cap;
} bench;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static row *add(bench *b, const char *stage, uint64_t events, double seconds) {
  sim_grow((void **)&b->rows, &b->cap, b->n + 1, sizeof *b->rows);
  row *r = &b->rows[b->n++];
  memset(r, 0, sizeof *r);
  snprintf(r->stage, sizeof r->stage, "%s", stage);
  r->events = events;
  r->seconds = seconds;
  return r;
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
                      .malloc_syncs = 1, .kernel_scale = 1, .batch_size = 1};
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

int cmd_bench(int argc, char **argv, cli *c) {
  static const struct option opts[] = {
    {"events", required_argument, NULL, 'e'},
    {"seed", required_argument, NULL, 's'},
    {"allocators", required_argument, NULL, 'a'},
    {"keep", required_argument, NULL, 'k'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
  };
  gen_config gc = {10000000, 1, 0};
  const char *allocs = NULL, *keep = NULL;
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "he:s:a:k:", opts)) != -1) {
    int r = cli_common_option(c, "bench", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    char *end;
    switch (opt) {
    case 'e':
      gc.events = strtoull(optarg, &end, 10);
      if (*end || !gc.events || optarg[0] == '-') return cli_usage_error("bench", "--events wants a positive number");
      break;
    case 's':
      gc.seed = strtoull(optarg, &end, 10);
      if (*end) return cli_usage_error("bench", "--seed wants a number");
      break;
    case 'a': allocs = optarg; break;
    case 'k': keep = optarg; break;
    }
  }
  if (optind != argc) return cli_usage_error("bench", "bench takes no arguments");
  for (const char *p = allocs; p && *p;) {
    size_t n = strcspn(p, ",");
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n, p);
    if (!sim_allocator_find(name)) return cli_usage_error("bench", "unknown allocator '%s'", name);
    p += n + (p[n] == ',');
  }

  char dir[4096], dbpath[4200], jpath[4200], err[1024] = "";
  if (keep) {
    snprintf(dir, sizeof dir, "%s", keep);
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/memplay-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
      cli_error("cannot make a temporary directory in '%s'", tmp && *tmp ? tmp : "/tmp");
      return CLI_FAIL;
    }
  }
  snprintf(dbpath, sizeof dbpath, "%s/bench.db", dir);
  snprintf(jpath, sizeof jpath, "%s/bench.jsonl", dir);
  unlink(dbpath);
  bench b = {0};
  sim_event *evs = NULL;
  store *s = NULL;
  replay_result res;
  memset(&res, 0, sizeof res);

  /* 1. the trace in memory */
  double t0 = now_s();
  gen *g = gen_new(&gc);
  evs = sim_xmalloc(gc.events * sizeof *evs);
  replay_source gs = gen_source(g);
  size_t n = 0;
  while (n < gc.events && replay_source_next(&gs, &evs[n]) > 0) n++;
  add(&b, "generate in memory", n, now_s() - t0);
  char model[200];
  snprintf(model, sizeof model, "%s", gen_describe(g));
  gen_free(g);

  /* 2. replay of the in-memory stream, per allocator (best of three on small traces) */
  for (size_t i = 0; sim_allocators[i]; i++) {
    if (!sim_allocator_listed(allocs, sim_allocators[i]->name)) continue;
    double best = 0;
    for (int k = 0; k < (n <= 2000000 ? 3 : 1); k++) {
      replay_array_source as;
      replay_source src = replay_array_source_init(&as, evs, n);
      if (replay_once(sim_allocators[i], &src, &res, err, sizeof err)) goto fail;
      if (!k || res.elapsed_s < best) best = res.elapsed_s;
      replay_result_release(&res);
    }
    char stage[64];
    snprintf(stage, sizeof stage, "replay in memory: %s", sim_allocators[i]->name);
    add(&b, stage, n, best);
  }
  const sim_allocator_ops *timed = first_wanted(allocs);
  if (timed) {
    double best = 0;
    for (int k = 0; k < (n <= 2000000 ? 3 : 1); k++) {
      replay_array_source as;
      replay_source src = replay_array_source_init(&as, evs, n);
      if (replay_timed(timed, &src, &res, err, sizeof err)) goto fail;
      if (!k || res.elapsed_s < best) best = res.elapsed_s;
      replay_result_release(&res);
    }
    char stage[64];
    snprintf(stage, sizeof stage, "replay in memory: %s + time model", timed->name);
    add(&b, stage, n, best);
  }
  free(evs);
  evs = NULL;

  /* 3. import through the store writer, then JSON Lines out and back in */
  char serr[STORE_ERRLEN];
  if (store_open(&s, dbpath, STORE_CREATE, serr, sizeof serr)) {
    snprintf(err, sizeof err, "%s", serr);
    goto fail;
  }
  int64_t id;
  t0 = now_s();
  if (store_begin(s) || gen_write(s, &gc, "bench", &id, err, sizeof err) || store_commit(s)) {
    if (!err[0]) snprintf(err, sizeof err, "%s", store_error(s));
    goto fail;
  }
  add(&b, "import: generate into the store", n, now_s() - t0);
  store_trace t;
  if (store_trace_find(s, "bench", &t)) goto store_fail;
  FILE *f = fopen(jpath, "w");
  if (!f) {
    snprintf(err, sizeof err, "cannot write '%.900s'", jpath);
    store_trace_clear(&t);
    goto fail;
  }
  t0 = now_s();
  int xrc = exporter_find("jsonl")->write(s, &t, f, err, sizeof err);
  fclose(f);
  store_trace_clear(&t);
  if (xrc) goto fail;
  add(&b, "export: jsonl", n, now_s() - t0);
  import_ctx ic = {.s = s, .path = jpath, .name = "bench-jsonl"};
  t0 = now_s();
  if (import_file(&ic, "jsonl")) {
    snprintf(err, sizeof err, "%s", ic.err);
    goto fail;
  }
  row *r = add(&b, "import: jsonl", n, now_s() - t0);
  FILE *jf = fopen(jpath, "r");
  if (jf) {
    fseek(jf, 0, SEEK_END);
    r->mb = (double)ftell(jf) / 1e6;
    fclose(jf);
  }
  unlink(jpath);

  /* 4. SQLite alone reading the rows, then replay from the store */
  sim_event ev;
  store_reader *rd;
  t0 = now_s();
  if (store_reader_open(s, id, &rd)) goto store_fail;
  uint64_t rows = 0;
  int got;
  while ((got = store_reader_next(rd, &ev)) > 0) rows++;
  store_reader_close(rd);
  if (got < 0) goto store_fail;
  double read_s = now_s() - t0;
  add(&b, "SQLite read of the events", rows, read_s);
  for (size_t i = 0; sim_allocators[i]; i++) {
    if (!sim_allocator_listed(allocs, sim_allocators[i]->name)) continue;
    replay_source src;
    t0 = now_s();
    if (store_source_open(&src, s, id)) goto store_fail;
    int rc = replay_once(sim_allocators[i], &src, &res, err, sizeof err);
    replay_source_close(&src);
    if (rc) goto fail;
    replay_result_release(&res);
    char stage[64];
    snprintf(stage, sizeof stage, "replay from store: %s", sim_allocators[i]->name);
    row *rr = add(&b, stage, rows, now_s() - t0);
    rr->vs_read = rr->seconds / read_s;
  }
  if (timed) {
    replay_source src;
    t0 = now_s();
    if (store_source_open(&src, s, id)) goto store_fail;
    int rc = replay_timed(timed, &src, &res, err, sizeof err);
    replay_source_close(&src);
    if (rc) goto fail;
    replay_result_release(&res);
    char stage[64];
    snprintf(stage, sizeof stage, "replay from store: %s + time model", timed->name);
    row *rr = add(&b, stage, rows, now_s() - t0);
    rr->vs_read = rr->seconds / read_s;
  }
  store_close(s);
  s = NULL;
  if (!keep) {
    unlink(dbpath);
    char side[4300];
    snprintf(side, sizeof side, "%s-wal", dbpath);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", dbpath);
    unlink(side);
    rmdir(dir);
  }

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  if (c->json) {
    yajl_gen j = jsonw_file(stdout, 0);
    yajl_gen_map_open(j);
    jsonw_kuint(j, "events", n);
    jsonw_kuint(j, "seed", gc.seed);
    jsonw_kstr(j, "trace", model);
    jsonw_kint(j, "max_rss_bytes", (int64_t)ru.ru_maxrss * 1024);
    jsonw_str(j, "stages");
    yajl_gen_array_open(j);
    for (size_t i = 0; i < b.n; i++) {
      yajl_gen_map_open(j);
      jsonw_kstr(j, "stage", b.rows[i].stage);
      jsonw_kuint(j, "events", b.rows[i].events);
      jsonw_kdouble(j, "seconds", b.rows[i].seconds);
      jsonw_kdouble(j, "events_per_s", b.rows[i].seconds > 0 ? (double)b.rows[i].events / b.rows[i].seconds : 0);
      if (b.rows[i].mb) jsonw_kdouble(j, "mb_per_s", b.rows[i].mb / b.rows[i].seconds);
      if (b.rows[i].vs_read) jsonw_kdouble(j, "vs_sqlite_read", b.rows[i].vs_read);
      yajl_gen_map_close(j);
    }
    yajl_gen_array_close(j);
    yajl_gen_map_close(j);
    yajl_gen_free(j);
    putchar('\n');
  } else {
    char a[32];
    printf("memplay bench: %s events of a %s\n\n", cli_count(a, sizeof a, n), model);
    printf("%-36s %14s %10s %10s %12s\n", "stage", "events/s", "seconds", "MB/s", "vs SQLite");
    for (size_t i = 0; i < b.n; i++) {
      const row *x = &b.rows[i];
      char rate[32], mb[16] = "", vs[16] = "";
      cli_count(rate, sizeof rate, x->seconds > 0 ? (uint64_t)((double)x->events / x->seconds) : 0);
      if (x->mb) snprintf(mb, sizeof mb, "%.0f", x->mb / x->seconds);
      if (x->vs_read) snprintf(vs, sizeof vs, "%.2fx", x->vs_read);
      printf("%-36s %14s %10.3f %10s %12s\n", x->stage, rate, x->seconds, mb, vs);
    }
    printf("\nmax resident memory %.0f MiB (the in-memory stage holds the whole trace)\n", (double)ru.ru_maxrss / 1024);
  }
  free(b.rows);
  return CLI_OK;

store_fail:
  snprintf(err, sizeof err, "%s", store_error(s));
fail:
  cli_error("bench failed: %s", err);
  free(evs);
  free(b.rows);
  replay_result_release(&res);
  if (s) store_close(s);
  return CLI_FAIL;
}

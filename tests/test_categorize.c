/* test_categorize.c: the category rules fed by the writer decide as the pass over the stored trace does. */
#include <unistd.h>

#include "import/categorize.h"
#include "import/importer.h"
#include "test.h"

int test_failures;

static char dir[256];

/* A small deterministic generator (xorshift64*). */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ull;
}
static unsigned below(unsigned n) { return (unsigned)(next_rand() % n); }

/* Call stacks whose frames say every class the rules know, and one that says nothing. */
static const char *const stacks[] = {
  "[{\"name\":\"forward\",\"file\":\"model.py\",\"line\":3},{\"name\":\"main\",\"file\":\"train.py\"}]",
  "[{\"name\":\"aten::mm\"},{\"name\":\"LinearBackward0\"},{\"name\":\"backward\"}]",
  "[{\"name\":\"_single_tensor_adam\",\"file\":\"torch/optim/adam.py\"},{\"name\":\"Optimizer.step#Adam.step\"}]",
  "[{\"name\":\"torch::autograd::AccumulateGrad::apply\"}]",
  "[{\"name\":\"__init__\",\"file\":\"torch/nn/modules/linear.py\"},{\"name\":\"main\",\"file\":\"train.py\"}]",
  "[{\"name\":\"aten::to\"},{\"name\":\"main\",\"file\":\"train.py\"}]",
  "[{\"name\":\"pin_memory\",\"file\":\"torch/utils/data/_utils/pin_memory.py\"}]",
  "[{\"name\":\"zero_grad\"}]",
  "[{\"name\":\"aten::empty\"}]",
  "[{\"name\":\"aten::to\"},{\"name\":\"forward\",\"file\":\"model.py\"}]",
};
#define NSTACKS (sizeof stacks / sizeof stacks[0])
static const char *const phases[] = {"forward", "backward", "optimizer", "zero_grad"};

/*
 * Writes a trace of n events that crosses the writer's batches many times: steps (some with
 * markers, some without), phases from markers (with and without a length) and from the code,
 * allocations of every stack with lifetimes from a few events to the whole trace, frees in one
 * line or two, host memory, copies in after conversions, and allocations whose category the file
 * gives.
 */
static void write_trace(const char *path, int n, int with_steps) {
  FILE *f = fopen(path, "w");
  fprintf(f, "{\"memplay\":1,\"name\":\"rules\"}\n");
  for (size_t i = 0; i < NSTACKS; i++) fprintf(f, "{\"kind\":\"stack\",\"id\":%zu,\"frames\":%s}\n", i + 1, stacks[i]);
  enum { LIVE = 4096 };
  int64_t addr[LIVE] = {0}, until[LIVE] = {0};
  int host[LIVE] = {0};
  int64_t next_addr = 1, ts = 0;
  for (int i = 0; i < n; i++) {
    ts += 1 + below(1000);
    /* lives that end now */
    for (int k = 0; k < LIVE; k++)
      if (addr[k] && until[k] <= i) {
        if (host[k]) fprintf(f, "{\"kind\":\"host_free\",\"ts\":%lld,\"addr\":%lld}\n", (long long)ts, (long long)addr[k]);
        else if (below(3) == 0)
          fprintf(f, "{\"kind\":\"free_requested\",\"ts\":%lld,\"addr\":%lld,\"stack\":%u}\n"
                     "{\"kind\":\"free_completed\",\"ts\":%lld,\"addr\":%lld}\n",
                  (long long)ts, (long long)addr[k], 1 + below(NSTACKS), (long long)ts, (long long)addr[k]);
        else fprintf(f, "{\"kind\":\"free\",\"ts\":%lld,\"addr\":%lld,\"stack\":%u}\n", (long long)ts, (long long)addr[k], 1 + below(NSTACKS));
        addr[k] = 0;
      }
    unsigned r = below(1000);
    if (with_steps && r < 2) {
      fprintf(f, "{\"kind\":\"marker\",\"ts\":%lld,\"flags\":[\"step_begin\"],\"name\":\"ProfilerStep#%d\"}\n", (long long)ts, i);
      continue;
    }
    if (r < 6) {
      if (below(2)) fprintf(f, "{\"kind\":\"marker\",\"ts\":%lld,\"flags\":[\"phase\"],\"name\":\"%s\",\"dur\":%u}\n",
                            (long long)ts, phases[below(4)], 1000 + below(200000));
      else fprintf(f, "{\"kind\":\"marker\",\"ts\":%lld,\"flags\":[\"phase\"],\"name\":\"%s\"}\n", (long long)ts, phases[below(4)]);
      continue;
    }
    if (r < 20) {
      fprintf(f, "{\"kind\":\"kernel\",\"ts\":%lld,\"dur\":%u,\"name\":\"gemm\"}\n", (long long)ts, 1000 + below(9000));
      continue;
    }
    int k = (int)below(LIVE);
    if (addr[k] && below(50)) continue;
    unsigned st = below(NSTACKS + 1); /* 0: no stack */
    int is_host = below(40) == 0;
    unsigned life = below(10);
    int64_t end = life < 6 ? i + 1 + below(40) : life < 8 ? i + below(3000) : life < 9 ? i + below(40000) : INT64_MAX;
    int64_t a = next_addr++; /* a live one in slot k is never freed: live at the end */
    if (is_host) fprintf(f, "{\"kind\":\"host_alloc\",\"ts\":%lld,\"addr\":%lld,\"size\":%u", (long long)ts, (long long)a, 512 + below(1 << 20));
    else fprintf(f, "{\"kind\":\"alloc\",\"ts\":%lld,\"addr\":%lld,\"size\":%u", (long long)ts, (long long)a, 512 + below(1 << 24));
    if (st) fprintf(f, ",\"stack\":%u", st);
    if (below(25) == 0) fprintf(f, ",\"category\":\"workspace\"");
    fprintf(f, "}\n");
    if ((st == 6 || st == 10) && below(2))
      fprintf(f, "{\"kind\":\"memcpy\",\"ts\":%lld,\"dir\":\"h2d\",\"size\":4096,\"stack\":%u}\n", (long long)ts + 1, st);
    addr[k] = a;
    until[k] = end;
    host[k] = is_host;
  }
  fclose(f);
}

static int64_t one(store *s, const char *sql, int64_t id) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK) return -1;
  sqlite3_bind_int64(q, 1, id);
  int64_t v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
  sqlite3_finalize(q);
  return v;
}

/* The category byte of every allocation, and the notes, of trace id. */
typedef struct cats {
  uint8_t *by_seq;
  int64_t n;
  char notes[2048];
} cats;

static void read_cats(store *s, int64_t id, cats *c) {
  c->n = one(s, "SELECT event_count FROM traces WHERE id = ?1", id);
  c->by_seq = calloc((size_t)c->n + 1, 1);
  sqlite3_stmt *q;
  sqlite3_prepare_v2(store_db(s),
                     "SELECT e.seq - t.first_seq, (e.info >> 16) & 255 FROM events e JOIN traces t ON t.id = e.trace_id "
                     "WHERE e.trace_id = ?1 AND e.kind IN (1, 10)",
                     -1, &q, NULL);
  sqlite3_bind_int64(q, 1, id);
  while (sqlite3_step(q) == SQLITE_ROW) c->by_seq[sqlite3_column_int64(q, 0)] = (uint8_t)sqlite3_column_int(q, 1);
  sqlite3_finalize(q);
  sqlite3_prepare_v2(store_db(s),
                     "SELECT group_concat(name || '=' || value || ':' || coalesce(detail, ''), ';') FROM "
                     "(SELECT * FROM trace_stats WHERE trace_id = ?1 AND name LIKE 'categories%' ORDER BY name)",
                     -1, &q, NULL);
  sqlite3_bind_int64(q, 1, id);
  c->notes[0] = 0;
  if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
    snprintf(c->notes, sizeof c->notes, "%s", (const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
}

/* Clears the category of every event whose category the rules decided (from the stack or the lifetime). */
static int forget_rules(store *s, int64_t id) {
  store_trace t;
  char ref[32];
  snprintf(ref, sizeof ref, "%lld", (long long)id);
  if (store_trace_find(s, ref, &t)) return -1;
  store_reader *r;
  if (store_reader_open(s, id, &r)) return -1;
  uint64_t *changes = NULL;
  size_t n = 0, cap = 0;
  sim_event ev;
  while (store_reader_next(r, &ev) == 1)
    if (ev.cat_source == SIM_CATSRC_STACK || ev.cat_source == SIM_CATSRC_LIFETIME) {
      sim_grow((void **)&changes, &cap, n + 1, sizeof *changes);
      changes[n++] = (uint64_t)(ev.seq + t.first_seq) << 8;
    }
  store_reader_close(r);
  int rc = n ? store_set_categories(s, id, changes, n) : 0;
  free(changes);
  store_trace_clear(&t);
  return rc;
}

/* Imports the file (the rules see the events as they are written), then forgets what the rules
 * decided and runs the pass over the stored trace: both must agree on every allocation. */
static void online_equals_pass(const char *file, const char *format, int must_decide) {
  char db[512], err[STORE_ERRLEN];
  snprintf(db, sizeof db, "%s/cats.db", dir);
  unlink(db);
  store *s = NULL;
  if (store_open(&s, db, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    CHECK(0);
    return;
  }
  sqlite3_db_config(store_db(s), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 1, NULL); /* the events view, as a user's sqlite3 reads it */
  import_ctx ctx = {.s = s, .path = file};
  int rc = import_file(&ctx, format);
  if (rc) fprintf(stderr, "%s\n", ctx.err);
  CHECK_EQ(rc, 0);
  int64_t ntraces = one(s, "SELECT count(*) FROM traces WHERE ?1", 1);
  CHECK(ntraces >= 1);
  for (int64_t id = 1; id <= ntraces; id++) {
    cats online, pass;
    read_cats(s, id, &online);
    int64_t allocs = one(s, "SELECT count(*) FROM events WHERE trace_id = ?1 AND kind IN (1, 10)", id);
    CHECK(online.notes[0] != 0 || allocs == 0);
    CHECK_EQ(store_begin(s), 0);
    CHECK_EQ(forget_rules(s, id), 0);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(store_db(s), "DELETE FROM trace_stats WHERE trace_id = ?1 AND name LIKE 'categories%'", -1, &q, NULL);
    sqlite3_bind_int64(q, 1, id);
    CHECK_EQ(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    CHECK_EQ(categorize_trace(s, id, err, sizeof err), 0);
    CHECK_EQ(store_commit(s), 0);
    read_cats(s, id, &pass);
    CHECK_EQ(online.n, pass.n);
    int64_t differ = 0, first = -1, decided = 0;
    for (int64_t i = 0; i < online.n && i < pass.n; i++) {
      if (online.by_seq[i] != pass.by_seq[i] && differ++ == 0) first = i;
      decided += (online.by_seq[i] >> 4) == 2 || (online.by_seq[i] >> 4) == 3;
    }
    if (differ)
      fprintf(stderr, "%s trace %lld: %lld allocations differ, first at event %lld (%d vs %d)\n", file, (long long)id,
              (long long)differ, (long long)first, online.by_seq[first], pass.by_seq[first]);
    CHECK_EQ(differ, 0);
    CHECK(decided > 0 || !must_decide);
    CHECK_STR(online.notes, pass.notes);
    free(online.by_seq);
    free(pass.by_seq);
  }
  store_close(s);
}

static void generated_with_steps(void) {
  char p[512];
  snprintf(p, sizeof p, "%s/steps.jsonl", dir);
  write_trace(p, 60000, 1);
  online_equals_pass(p, "jsonl", 1);
}

static void generated_without_steps(void) {
  char p[512];
  snprintf(p, sizeof p, "%s/nosteps.jsonl", dir);
  write_trace(p, 30000, 0);
  online_equals_pass(p, "jsonl", 1);
}

/* The real Nsight Systems exports, when the traces are at hand. */
static void real_nsys_exports(void) {
  const char *traces = getenv("MEMPLAY_TRACES");
  if (!traces || !*traces) return;
  static const char *const files[] = {"ntua_a100_gemm_fo_memusage.sqlite", "pipit_a100_cloverleaf_no_memusage.sqlite"};
  for (size_t i = 0; i < 2; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/nsys/%s", traces, files[i]);
    if (access(p, R_OK) == 0) online_equals_pass(p, "nsys", 0);
  }
}

/* PyTorch snapshots: the rules see each block live before a window when the importer learns of
 * it (at its first free, or at the end from the final state), the pass sees them all first. */
static void snapshots(void) {
  const char *src = getenv("MEMPLAY_SRC"), *traces = getenv("MEMPLAY_TRACES");
  static const char *const small[] = {"tiny_p4.pickle", "cpp_layout.pickle", "expandable.pickle", "legacy.pickle",
                                      "odd_names.pickle", "other_device.pickle", "interleaved.pickle"};
  char p[1024];
  for (size_t i = 0; src && *src && i < sizeof small / sizeof small[0]; i++) {
    snprintf(p, sizeof p, "%s/tests/data/snapshots/%s", src, small[i]);
    online_equals_pass(p, "pytorch_snapshot", 0);
  }
  static const char *const real[] = {"bcrafton_warm_window.pickle", "kk_ctx512_fullstep.pickle",
                                     "maph_single_stream.pickle", "wed_medium_128_training.pickle"};
  for (size_t i = 0; traces && *traces && i < sizeof real / sizeof real[0]; i++) {
    snprintf(p, sizeof p, "%s/pytorch/%s", traces, real[i]);
    if (access(p, R_OK) == 0) online_equals_pass(p, "pytorch_snapshot", 1);
  }
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/memplay-cat-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  RUN(generated_with_steps);
  RUN(generated_without_steps);
  RUN(real_nsys_exports);
  RUN(snapshots);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) return 1;
  TEST_MAIN_END();
}

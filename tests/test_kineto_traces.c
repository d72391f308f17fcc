/* test_kineto_traces.c: every real Kineto and memory timeline file imports, with figures derived from the files. */
#include <dirent.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "store/store_source.h"
#include "kineto_util.h"

int test_failures;

/*
 * The expected figures were read from the files themselves with Python's json and gzip
 * modules, independently of memplay: counts of events by category and name, the largest
 * "Total Allocated" and "Total Reserved" per device, the copies by name and bytes, the runtime
 * calls that have (or lack) a device activity with their correlation id, and for the timeline
 * the running sum of the bytes column.
 */

static char traces[512];
static store *s;

static int64_t import_real(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", traces, rel);
  int64_t t = ku_import(s, path, NULL, NULL);
  if (t < 0) {
    fprintf(stderr, "%s\n", ku_err);
    test_failures++;
  }
  return t;
}

static int64_t recorded_max(int64_t t, const char *col, int device) {
  return ku_int(s, -1, "SELECT max(%s) FROM recorded WHERE trace_id = %lld AND action = 'totals' AND device = %d", col,
                (long long)t, device);
}

static replay_result replay(int64_t t, const char *model) {
  replay_result res;
  char err[512];
  sim_spec spec;
  sim_spec_parse(&spec, model, err, sizeof err);
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX};
  replay_source src;
  store_source_open(&src, s, t);
  if (replay_run(&cfg, &src, &res, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    test_failures++;
  }
  replay_source_close(&src);
  sim_spec_release(&spec);
  return res;
}

static void v100_training_memory(void) {
  int64_t t = import_real("kineto/hta_v100_training_memory.json.gz");
  if (t < 0) return;
  /* 28,010 [memory] events: 26,770 on CUDA device 1 (13,385 allocations) and 1,240 on the CPU. */
  CHECK_EQ(ku_kind(s, t, "alloc"), 13385 + 1); /* and one block for the memory allocated before the window */
  CHECK_EQ(ku_kind(s, t, "free"), 13385);
  CHECK_EQ(ku_kind(s, t, "host_alloc"), 620);
  CHECK_EQ(ku_kind(s, t, "host_free"), 620);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM recorded WHERE trace_id = %lld AND action = 'totals'", (long long)t), 28010);
  CHECK_EQ(ku_kind(s, t, "kernel"), 19370);
  CHECK_EQ(ku_kind(s, t, "memcpy"), 2040);
  CHECK_EQ(ku_int(s, 0, "SELECT sum(size) FROM events_named WHERE trace_id = %lld AND kind = 'memcpy' AND dir = 'd2d'",
                  (long long)t),
           5892787600);
  CHECK_EQ(ku_kind(s, t, "memset"), 880);
  /* 42,373 runtime calls: 22,290 launched an activity, one is cudaDeviceSynchronize. */
  CHECK_EQ(ku_kind(s, t, "sync"), 1);
  /* the rest: 6,060 cudaStreamWaitEvent, and 14,022 queries (cudaOccupancy..., cudaEventQuery,
   * cudaStreamIsCapturing, INVALID) that are counted and not stored */
  CHECK_EQ(ku_kind(s, t, "api"), 6060);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'runtime_queries'", (long long)t),
           14022);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = 'marker' AND flags & 1",
                  (long long)t),
           5);
  CHECK_EQ(ku_int(s, 0, "SELECT count(DISTINCT step) FROM events WHERE trace_id = %lld AND step IS NOT NULL", (long long)t),
           5);
  CHECK_EQ(ku_int(s, 0, "SELECT device_index FROM traces WHERE id = %lld", (long long)t), 1);
  CHECK_EQ(ku_int(s, 0, "SELECT device_memory FROM traces WHERE id = %lld", (long long)t), 34089730048);
  CHECK_EQ(recorded_max(t, "allocated", 1), 6629508096);
  CHECK_EQ(recorded_max(t, "reserved", 1), 12782141440);
  CHECK_EQ(recorded_max(t, "allocated", -1), 8);
  /* The baseline: the first device event allocates 25,165,824 bytes and reads 4,121,780,224. */
  CHECK_EQ(ku_int(s, 0, "SELECT json_extract(attrs, '$.baseline_bytes.1') FROM traces WHERE id = %lld", (long long)t),
           4121780224 - 25165824);

  /* Replaying with the baseline reproduces the recorded Total Allocated after every event,
   * exactly where the model places each request as it is: Kineto's Bytes are the caching
   * allocator's blocks, so under ideal. */
  ku_totals tot = ku_totals_check(s, t, "ideal", 1);
  CHECK_EQ(tot.compared, 28010);
  CHECK_EQ(tot.differ, 0);
  /* Under torch, the model's blocks are these sizes or larger: from its first cache miss it
   * decides splits from its own cache (Kineto records no segments, so the window's cached free
   * memory is unknown), and a block it does not split is up to 1 MiB larger than the real one.
   * So: never below, and close (measured: 0.32% at most). */
  if (sim_allocator_find("torch")) {
    tot = ku_totals_check(s, t, "torch", 0);
    fprintf(stderr, "  totals under torch: %lld compared, %lld differ, %lld below, at most %.2f%% over\n",
            (long long)tot.compared, (long long)tot.differ, (long long)tot.below, 100 * tot.max_over);
    CHECK_EQ(tot.compared, 28010);
    CHECK_EQ(tot.below, 0);
    CHECK(tot.max_over < 0.01);
  } else {
    fprintf(stderr, "  (no torch model in this build: the totals checked under ideal only)\n");
  }
  /* So the replay's peak is the recorded peak, not the window's. */
  replay_result r = replay(t, "ideal");
  CHECK_EQ(r.peak_allocated, 6629508096);
  CHECK_EQ(r.host_pageable_peak, 8);

  /* Categories: every allocation has one; parameters do not change across training steps. */
  CHECK_EQ(ku_int(s, -1, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind IN ('alloc', 'host_alloc') "
                         "AND category = 'unknown'",
                  (long long)t),
           0);
  int64_t at[16];
  int k = ku_category_at_steps(s, t, SIM_CAT_PARAMETER, at, 16);
  CHECK_EQ(k, 6); /* five step starts and the end */
  for (int i = 1; i < k; i++) CHECK_EQ(at[i], at[0]);
  CHECK_EQ(at[0], 4121780224 - 25165824);
  /* Optimizer state and gradients are live between steps only if the step made them. */
  k = ku_category_at_steps(s, t, SIM_CAT_ACTIVATION, at, 16);
  for (int i = 0; i < k; i++) CHECK_EQ(at[i], 0);
  /* The 2,020 tensors AccumulateGrad frees are the gradients the backward pass computed. */
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = 'alloc' AND category = "
                        "'gradient'",
                  (long long)t),
           2020);
  CHECK(r.category_bytes[SIM_CAT_ACTIVATION] > 0);
  /* The importer categorized while writing; the import driver's pass over the stored trace
   * comes to the same categories. */
  CHECK_EQ(ku_recategorize_differences(s, t), 0);
  CHECK_EQ(r.catsrc_bytes[SIM_CATSRC_NONE], 0);
  replay_result_release(&r);
}

static void a100_pinned_pageable(void) {
  int64_t t = import_real("kineto/hta_a100_pinned_pageable_memcpy.json.gz");
  if (t < 0) return;
  CHECK_EQ(ku_kind(s, t, "alloc"), 0); /* recorded without profile_memory */
  CHECK_EQ(ku_kind(s, t, "kernel"), 6080);
  CHECK_EQ(ku_kind(s, t, "memset"), 277);
  CHECK_EQ(ku_kind(s, t, "memcpy"), 1390);
#define COPIES(dir, mem, n, bytes)                                                                                    \
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = 'memcpy' AND dir = '%s' " \
                        "AND mem = '%s'",                                                                             \
                  (long long)t, dir, mem),                                                                            \
           n);                                                                                                        \
  CHECK_EQ(ku_int(s, 0, "SELECT sum(size) FROM events_named WHERE trace_id = %lld AND kind = 'memcpy' AND dir = '%s' " \
                        "AND mem = '%s'",                                                                             \
                  (long long)t, dir, mem),                                                                            \
           bytes)
  COPIES("h2d", "pinned", 35, 253534084);
  COPIES("h2d", "pageable", 45, 6720);
  COPIES("d2h", "pageable", 30, 8600);
  COPIES("d2d", "device", 1280, 16637320108);
  /* 33,924 runtime calls: 6,600 launched activities; 75 cudaStreamSynchronize and one cudaDeviceSynchronize. */
  CHECK_EQ(ku_kind(s, t, "sync"), 76);
  /* the rest: 425 cudaStreamWaitEvent, 45 cudaFuncSetAttribute, and 26,778 queries */
  CHECK_EQ(ku_kind(s, t, "api"), 470);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'runtime_queries'", (long long)t),
           26778);
  /* 872 activities were launched before the window: no launch time. */
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events WHERE trace_id = %lld AND kind IN (5, 6, 7) AND api_dur IS NULL",
                  (long long)t),
           872);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = 'marker' AND flags & 1",
                  (long long)t),
           5);
  CHECK_EQ(ku_int(s, 0, "SELECT count(DISTINCT stream) FROM events WHERE trace_id = %lld AND kind IN (5, 6, 7)",
                  (long long)t),
           6);
  CHECK_EQ(ku_int(s, 0, "SELECT device_index FROM traces WHERE id = %lld", (long long)t), 0);
  /* CUDA graph launches (several kernels, one correlation id) and activities launched before the
   * window join the same way through the window and through the correlation sort. */
  char path[1024];
  snprintf(path, sizeof path, "%s/kineto/hta_a100_pinned_pageable_memcpy.json.gz", traces);
  static const char *const plain[] = {"join_window=0", NULL}, *const one[] = {"join_window=1", NULL};
  CHECK_EQ(ku_import_same(s, path, t, plain), 0);
  CHECK_EQ(ku_import_same(s, path, t, one), 0);
  /* Activities sit at their launch, in host order. */
  store_reader *r;
  CHECK_EQ(store_reader_open(s, t, &r), 0);
  sim_event ev;
  int64_t prev = INT64_MIN, back = 0;
  while (store_reader_next(r, &ev) == 1) {
    if (ev.ts < prev) back++;
    prev = ev.ts;
  }
  store_reader_close(r);
  CHECK_EQ(back, 0);
}

static void memory_timeline(void) {
  int64_t t = import_real("kineto/hta_memory_timeline.raw.gz");
  if (t < 0) return;
  /* 16,845 rows: 645 PREEXISTING, 3,345 CREATE, 3,345 DESTROY, 4,755 INCREMENT_VERSION pairs. */
  CHECK_EQ(ku_kind(s, t, "alloc"), 645 + 3345);
  CHECK_EQ(ku_kind(s, t, "free"), 3345);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND flags & 64", (long long)t), 645);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'version_changes'", (long long)t),
           4755);
  CHECK_EQ(ku_int(s, 0, "SELECT coalesce(sum(value), 0) FROM trace_stats WHERE trace_id = %lld AND severity = 'warning'",
                  (long long)t),
           0);
  /* The categories PyTorch gave at creation (index in _CATEGORY_TO_COLORS: count, bytes). */
#define SOURCE_CAT(cat, n, bytes)                                                                                    \
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = 'alloc' AND category = " \
                        "'%s' AND cat_source = 'source'",                                                            \
                  (long long)t, cat),                                                                                \
           n);                                                                                                       \
  CHECK_EQ(ku_int(s, 0, "SELECT sum(size) FROM events_named WHERE trace_id = %lld AND kind = 'alloc' AND category = " \
                        "'%s' AND cat_source = 'source'",                                                            \
                  (long long)t, cat),                                                                                \
           bytes)
  SOURCE_CAT("parameter", 267, 102440608);
  SOURCE_CAT("optimizer_state", 161, 102228128);
  SOURCE_CAT("input", 2, 19395584);
  SOURCE_CAT("activation", 1095, 14701107200);
  SOURCE_CAT("gradient", 805, 539340800);
  SOURCE_CAT("temporary", 15 + 805, 645120 + 20613340160); /* TEMPORARY and AUTOGRAD_DETAIL */
  /* The 840 allocations PyTorch left without a category are decided by their lifetime. */
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events_named WHERE trace_id = %lld AND kind = 'alloc' AND cat_source = "
                        "'lifetime'",
                  (long long)t),
           840);
  /* The running sum of the bytes column peaks at 3,082,832,104 and ends at 332,060,904. */
  replay_result r = replay(t, "ideal");
  CHECK_EQ(r.peak_allocated, 3082832104);
  CHECK_EQ(r.final_allocated, 332060904);
  replay_result_release(&r);
}

/* A snapshot's allocations get categories from their frames (once the snapshot importer exists). */
static void snapshot_categories(void) {
  if (!importer_find("pytorch_snapshot")) {
    fprintf(stderr, "  (no pytorch_snapshot importer in this build: snapshot categories not checked)\n");
    return;
  }
  int64_t t = import_real("pytorch/kk_ctx128_fullstep.pickle");
  if (t < 0) return;
  /* AdamW keeps two state tensors per parameter, each the size of the parameter's gradient. */
  int64_t grad = ku_int(s, 0, "SELECT sum(size) FROM events_named WHERE trace_id >= %lld AND kind = 'alloc' AND category "
                              "= 'gradient'",
                        (long long)t);
  int64_t state = ku_int(s, 0, "SELECT sum(size) FROM events_named WHERE trace_id >= %lld AND kind = 'alloc' AND category "
                               "= 'optimizer_state'",
                         (long long)t);
  CHECK(grad > 0);
  CHECK(state > (int64_t)(1.9 * (double)grad) && state < (int64_t)(2.1 * (double)grad));
  int64_t unknown = ku_int(s, -1, "SELECT count(*) FROM events_named WHERE trace_id >= %lld AND kind = 'alloc' AND "
                                  "category = 'unknown'",
                           (long long)t),
          all = ku_int(s, -1, "SELECT count(*) FROM events_named WHERE trace_id >= %lld AND kind = 'alloc'", (long long)t);
  CHECK(all > 0 && unknown >= 0 && unknown * 100 <= all);
}

/* A window: blocks live before it began have no allocation stack; the code that frees them
 * says whose they were. In wed_medium's training step the optimizer frees Adam's old moments:
 * at the peak (the optimizer step) they are optimizer state, twice the parameters. */
static void snapshot_window_categories(void) {
  if (!importer_find("pytorch_snapshot")) return;
  int64_t t = import_real("pytorch/wed_medium_128_training.pickle");
  if (t < 0) return;
  replay_result r = replay(t, "ideal");
  double param = (double)r.category_bytes[SIM_CAT_PARAMETER], state = (double)r.category_bytes[SIM_CAT_OPTIMIZER_STATE];
  CHECK(param > 0);
  CHECK(state > 1.9 * param && state < 2.1 * param);
  CHECK((double)r.category_bytes[SIM_CAT_ACTIVATION] < 0.1 * param);
  replay_result_release(&r);
}

/* The snapshot importer decides categories while it writes; on every real snapshot the import
 * driver's pass over the stored trace (categories cleared) decides the same, and the notes the
 * importer left count what is stored. */
static void snapshot_categories_as_the_pass(void) {
  if (!importer_find("pytorch_snapshot")) return;
  char pdir[600];
  snprintf(pdir, sizeof pdir, "%s/pytorch", traces);
  DIR *d = opendir(pdir);
  CHECK(d != NULL);
  int files = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 8 || strcmp(e->d_name + n - 7, ".pickle")) continue;
    char rel[700];
    snprintf(rel, sizeof rel, "pytorch/%s", e->d_name);
    int64_t t = import_real(rel);
    if (t < 0) continue;
    files++;
    CHECK(ku_int(s, 0, "SELECT count(*) FROM events WHERE trace_id = %lld AND kind = 1 AND cat_source != 0",
                 (long long)t) > 0);
    CHECK_EQ(ku_recategorize_differences(s, t), 0);
    static const char *const notes[SIM_CATSRC__COUNT] = {"categories_undecided", "categories_from_source",
                                                         "categories_from_stack", "categories_from_lifetime",
                                                         "categories_set_by_user"};
    for (int k = 0; k < SIM_CATSRC__COUNT; k++)
      CHECK_EQ(ku_int(s, 0, "SELECT coalesce(max(value), 0) FROM trace_stats WHERE trace_id = %lld AND name = '%s'",
                      (long long)t, notes[k]),
               ku_int(s, -1, "SELECT count(*) FROM events WHERE trace_id = %lld AND kind IN (1, 10) AND cat_source = %d",
                      (long long)t, k));
  }
  if (d) closedir(d);
  CHECK(files >= 9);
}

int main(void) {
  const char *dir = getenv("MEMPLAY_TRACES");
  struct stat st;
  if (!dir || !*dir || stat(dir, &st) || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "no real traces (MEMPLAY_TRACES): skipped\n");
    return TEST_SKIP;
  }
  snprintf(traces, sizeof traces, "%s", dir);
  ku_setup();
  s = ku_store("real.db");
  RUN(v100_training_memory);
  RUN(a100_pinned_pageable);
  RUN(memory_timeline);
  RUN(snapshot_categories);
  RUN(snapshot_window_categories);
  RUN(snapshot_categories_as_the_pass);
  /* Every file in kineto/ imports. */
  char kdir[600];
  snprintf(kdir, sizeof kdir, "%s/kineto", traces);
  DIR *d = opendir(kdir);
  CHECK(d != NULL);
  int files = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || strstr(e->d_name, "README")) continue;
    char rel[700];
    snprintf(rel, sizeof rel, "kineto/%s", e->d_name);
    CHECK(import_real(rel) > 0);
    files++;
  }
  if (d) closedir(d);
  CHECK(files >= 3);
  store_close(s);
  ku_teardown();
  TEST_MAIN_END();
}

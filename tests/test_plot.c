/* test_plot.c: pictures and timelines: the series keeps the peak, the state at a moment, the Perfetto export
 * against the Trace Event Format's rules, CSV, and output files that never replace what is not a regular file. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "engine/engine.h"
#include "gen/gen.h"
#include "io/frames.h"
#include "io/outfile.h"
#include "plot/plot.h"
#include "test.h"

int test_failures;

/* Replays a generated trace through spec (capacity), with the observers given and an optional stop. */
static int replay_gen(uint64_t events, const char *spec_text, uint64_t capacity, replay_observer *obs, size_t nobs,
                      const replay_stop *stop, replay_result *r) {
  sim_spec spec;
  char err[512];
  if (sim_spec_parse(&spec, spec_text, err, sizeof err)) return -1;
  gen_config gc = {.events = events, .seed = 7};
  gen *g = gen_new(&gc);
  replay_source src = gen_source(g);
  replay_config cfg = {.spec = &spec, .capacity = capacity, .observers = obs, .nobservers = nobs, .stop = stop};
  int rc = replay_run(&cfg, &src, r, err, sizeof err);
  if (rc) fprintf(stderr, "replay: %s\n", err);
  replay_source_close(&src);
  gen_free(g);
  sim_spec_release(&spec);
  return rc;
}

/* Few buckets for many events: every merge keeps the highest point, so the series' peak and its
 * highest bucket are the engine's peak, and no bucket goes above it. */
static void series_keeps_peak(void) {
  plot_series s;
  plot_series_init(&s, "torch", UINT64_MAX, 16);
  replay_observer obs = plot_series_observer(&s);
  replay_result r;
  CHECK_EQ(replay_gen(200000, "torch", UINT64_MAX, &obs, 1, NULL, &r), 0);
  CHECK(s.n <= 16 && s.n >= 8);
  CHECK_EQ(s.peak.allocated, r.peak_allocated);
  CHECK_EQ(s.peak.seq, r.peak_allocated_seq);
  int64_t hi = 0, rhi = 0;
  for (size_t i = 0; i < s.n; i++) {
    if (s.buckets[i].hi.allocated > hi) hi = s.buckets[i].hi.allocated;
    if (s.buckets[i].rhi > rhi) rhi = s.buckets[i].rhi;
    CHECK(s.buckets[i].lo.allocated <= s.buckets[i].hi.allocated);
    if (i) CHECK(s.buckets[i].lo.seq > s.buckets[i - 1].hi.seq || s.buckets[i].hi.seq > s.buckets[i - 1].lo.seq);
  }
  CHECK_EQ(hi, r.peak_allocated);
  CHECK_EQ(rhi, r.peak_reserved);
  CHECK_EQ(s.events, r.events);
  /* the categories at the peak are the engine's composition at the peak */
  for (int k = 0; k < SIM_CAT__COUNT; k++) CHECK_EQ(s.peak.cat[k], r.category_bytes[k]);
  replay_result_release(&r);
  plot_series_release(&s);
}

typedef struct taken {
  replay_moment m;
  int n;
} taken;

static void take(void *arg, const replay_state *st) {
  taken *t = arg;
  replay_moment_take(&t->m, st, "event");
  t->n++;
}

/* The state at the first OOM: the request, and free space that adds up. */
static void moment_at_oom(void) {
  taken t = {0};
  replay_stop stop = {.seq = -1, .after_ns = -1, .at_oom = 1, .capture = take, .arg = &t};
  replay_result r;
  CHECK_EQ(replay_gen(100000, "torch", UINT64_C(3) << 30, NULL, 0, &stop, &r), 0);
  CHECK_EQ(t.n, 1);
  CHECK(r.stopped);
  CHECK_EQ(r.ooms, 1);
  CHECK(t.m.oom);
  CHECK_EQ(t.m.oom_size, r.oom_list[0].size);
  CHECK_EQ(t.m.seq, r.oom_list[0].seq);
  CHECK(t.m.walked);
  CHECK(t.m.nsegments > 0);
  uint64_t seg_bytes = 0, blk_bytes = 0, free_bytes = 0;
  for (size_t i = 0; i < t.m.nsegments; i++) {
    const replay_moment_segment *s = &t.m.segments[i];
    seg_bytes += s->size;
    uint64_t in = 0;
    for (size_t k = s->first; k < s->first + s->nblocks; k++) {
      in += t.m.blocks[k].size;
      if (t.m.blocks[k].state == SIM_BLOCK_FREE) free_bytes += t.m.blocks[k].size;
      else CHECK(t.m.blocks[k].known); /* every block in use is a request the engine knows */
    }
    CHECK_EQ(in, s->size); /* a segment's blocks cover it */
    blk_bytes += in;
  }
  CHECK_EQ(seg_bytes, (uint64_t)t.m.reserved);
  CHECK_EQ(blk_bytes, seg_bytes); /* and together all of them */
  CHECK_EQ(free_bytes, t.m.free_bytes);
  CHECK(t.m.largest_free < t.m.oom_size); /* it did not fit */
  CHECK_EQ(t.m.block_bytes, t.m.allocated); /* torch counts the blocks it hands out */
  replay_moment_release(&t.m);
  replay_result_release(&r);
}

/* Stopping at an event index, and the models without a walk. */
static void moment_at_event(void) {
  static const char *const specs[] = {"torch", "bfc", "async", "cuda", "ideal"};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    taken t = {0};
    replay_stop stop = {.seq = 5000, .after_ns = -1, .capture = take, .arg = &t};
    replay_result r;
    CHECK_EQ(replay_gen(20000, specs[i], UINT64_MAX, NULL, 0, &stop, &r), 0);
    CHECK_EQ(t.n, 1);
    CHECK_EQ(t.m.seq, 5000);
    CHECK_EQ(r.events, 5001);
    CHECK_EQ(t.m.allocated, r.final_allocated);
    CHECK_EQ(t.m.walked, strcmp(specs[i], "ideal") != 0);
    /* the segments are what the model holds (cuda's reserved is the driver's pages instead) */
    if (t.m.walked && strcmp(specs[i], "cuda"))
      CHECK_EQ(t.m.block_bytes + t.m.free_bytes + t.m.pending_bytes, (uint64_t)t.m.reserved);
    replay_moment_release(&t.m);
    replay_result_release(&r);
  }
}

/* ---- the Trace Event Format's rules ---- */

static const char *str_of(yajl_val o, const char *key) {
  const char *path[] = {key, NULL};
  yajl_val v = yajl_tree_get(o, path, yajl_t_string);
  return v ? YAJL_GET_STRING(v) : NULL;
}

static yajl_val num_of(yajl_val o, const char *key) {
  const char *path[] = {key, NULL};
  return yajl_tree_get(o, path, yajl_t_number);
}

typedef struct track_last {
  char key[96];
  double ts;
} track_last;

/* Each track's events in time order: slices per (pid, tid), counters per (pid, name). */
static int in_order(track_last *tr, size_t *n, const char *key, double ts) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp(tr[i].key, key)) {
      int ok = ts >= tr[i].ts;
      tr[i].ts = ts;
      return ok;
    }
  if (*n < 64) snprintf(tr[*n].key, sizeof tr[*n].key, "%s", key), tr[(*n)++].ts = ts;
  return 1;
}

/* Checks one event against the rules of its phase; counts what it is. */
static void check_event(yajl_val e, track_last *tr, size_t *ntr, int counts[4]) {
  const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
  CHECK(ph && name && num_of(e, "pid"));
  if (!ph || !name) return;
  yajl_val ts = num_of(e, "ts"), tid = num_of(e, "tid");
  const char *args_path[] = {"args", NULL};
  yajl_val args = yajl_tree_get(e, args_path, yajl_t_object);
  char key[96];
  if (!strcmp(ph, "M")) {
    CHECK(!strcmp(name, "process_name") || !strcmp(name, "thread_name"));
    const char *p[] = {"args", "name", NULL};
    CHECK(yajl_tree_get(e, p, yajl_t_string) != NULL);
    counts[0]++;
  } else if (!strcmp(ph, "X")) {
    yajl_val dur = num_of(e, "dur");
    CHECK(ts && dur && tid && YAJL_GET_DOUBLE(dur) >= 0);
    if (!ts || !tid) return;
    snprintf(key, sizeof key, "X %lld", (long long)YAJL_GET_INTEGER(tid));
    CHECK(in_order(tr, ntr, key, YAJL_GET_DOUBLE(ts)));
    counts[1]++;
  } else if (!strcmp(ph, "C")) {
    CHECK(ts && args && args->u.object.len > 0);
    for (size_t i = 0; args && i < args->u.object.len; i++) CHECK(YAJL_IS_NUMBER(args->u.object.values[i]));
    if (!ts) return;
    snprintf(key, sizeof key, "C %s", name);
    CHECK(in_order(tr, ntr, key, YAJL_GET_DOUBLE(ts)));
    counts[2]++;
  } else if (!strcmp(ph, "i")) {
    const char *sc = str_of(e, "s");
    CHECK(ts && sc && (!strcmp(sc, "g") || !strcmp(sc, "p") || !strcmp(sc, "t")));
    counts[3]++;
  } else {
    CHECK(!"an unexpected phase");
  }
}

static void perfetto_valid(void) {
  plot_series s;
  plot_series_init(&s, "torch", UINT64_C(3) << 30, 2000);
  plot_perfetto *pf = plot_perfetto_new(NULL, "test \"quoted\" name");
  replay_observer obs[2] = {plot_series_observer(&s), plot_perfetto_observer(pf)};
  replay_result r;
  CHECK_EQ(replay_gen(60000, "torch", UINT64_C(3) << 30, obs, 2, NULL, &r), 0);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK_EQ(plot_perfetto_write(pf, &s, f), 0);
  fclose(f);
  char err[256];
  yajl_val doc = yajl_tree_parse(text, err, sizeof err);
  CHECK(doc != NULL);
  if (!doc) fprintf(stderr, "perfetto JSON: %s\n", err);
  const char *p[] = {"traceEvents", NULL};
  yajl_val evs = doc ? yajl_tree_get(doc, p, yajl_t_array) : NULL;
  CHECK(evs != NULL);
  int counts[4] = {0};
  track_last tr[64];
  size_t ntr = 0;
  for (size_t i = 0; evs && i < evs->u.array.len; i++) check_event(evs->u.array.values[i], tr, &ntr, counts);
  CHECK(counts[0] >= 2); /* the process and a thread named */
  CHECK(counts[1] > 100); /* kernels and copies */
  CHECK(counts[2] > 100); /* counters */
  CHECK(counts[3] >= (int)r.ooms); /* OOMs (and syncs) */
  CHECK(r.ooms > 0);
  yajl_tree_free(doc);
  free(text);
  plot_perfetto_free(pf);
  replay_result_release(&r);
  plot_series_release(&s);
}

static void csv_rows(void) {
  plot_series s;
  plot_series_init(&s, "bfc", UINT64_MAX, 100);
  replay_observer obs = plot_series_observer(&s);
  replay_result r;
  CHECK_EQ(replay_gen(30000, "bfc", UINT64_MAX, &obs, 1, NULL, &r), 0);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK_EQ(plot_write_csv(&s, f), 0);
  fclose(f);
  CHECK(!strncmp(text, "event,time_s,allocated,reserved,unknown,parameter,", 50));
  /* the peak's row is there */
  char want[64];
  snprintf(want, sizeof want, "\n%lld,", (long long)r.peak_allocated_seq);
  char *row = strstr(text, want);
  CHECK(row != NULL);
  if (row) {
    long long seq, a;
    double t;
    CHECK_EQ(sscanf(row + 1, "%lld,%lf,%lld", &seq, &t, &a), 3);
    CHECK_EQ(a, r.peak_allocated);
  }
  free(text);
  replay_result_release(&r);
  plot_series_release(&s);
}

/* The pictures' files go through the one output writer (io/outfile.h): a directory is refused, a
 * regular file is replaced only on commit, a symbolic link stays a link to the new content, and
 * nothing is left behind on abort. (FIFOs and devices: tests/hostile/b14_export_output_types.sh.) */
static void outfile_safety(void) {
  char dir[] = "/tmp/memplay-plot-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  char path[256], link_path[256], err[512], buf[8] = "";
  CHECK(outfile_open(dir, err, sizeof err) == NULL);
  snprintf(path, sizeof path, "%s/a.svg", dir);
  outfile *o = outfile_open(path, err, sizeof err);
  CHECK(o != NULL);
  if (o) fputs("one", outfile_stream(o));
  CHECK_EQ(outfile_commit(o, err, sizeof err), 0);
  o = outfile_open(path, err, sizeof err);
  CHECK(o != NULL);
  if (o) fputs("two", outfile_stream(o));
  outfile_abort(o);
  FILE *f = fopen(path, "r");
  CHECK(f && fgets(buf, sizeof buf, f));
  if (f) fclose(f);
  CHECK_STR(buf, "one");
  snprintf(link_path, sizeof link_path, "%s/link.svg", dir);
  CHECK_EQ(symlink(path, link_path), 0);
  o = outfile_open(link_path, err, sizeof err);
  CHECK(o != NULL);
  if (o) fputs("six", outfile_stream(o));
  CHECK_EQ(outfile_commit(o, err, sizeof err), 0);
  struct stat st;
  CHECK(lstat(link_path, &st) == 0 && S_ISLNK(st.st_mode));
  f = fopen(path, "r");
  CHECK(f && fgets(buf, sizeof buf, f));
  if (f) fclose(f);
  CHECK_STR(buf, "six");
  /* only what the test made is there: no temporary files */
  char cmd[400];
  snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) = 2", dir);
  CHECK_EQ(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK_EQ(system(cmd), 0);
}

static void frames_filter(void) {
  CHECK(frames_hidden("torch::unwind::unwind()", ""));
  CHECK(frames_hidden("torch::CapturedTraceback::gather(bool, bool, bool)", ""));
  CHECK(frames_hidden("_PyEval_EvalFrameDefault", "Python/ceval.c"));
  CHECK(frames_hidden("PyObject_Call", ""));
  CHECK(!frames_hidden("forward", "model.py"));
  CHECK(!frames_hidden("at::native::empty_cuda", "aten/src/ATen/native/cuda/EmptyTensor.cpp"));
}

int main(void) {
  RUN(series_keeps_peak);
  RUN(moment_at_oom);
  RUN(moment_at_event);
  RUN(perfetto_valid);
  RUN(csv_rows);
  RUN(outfile_safety);
  RUN(frames_filter);
  TEST_MAIN_END();
}

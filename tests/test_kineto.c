/* test_kineto.c: the Kineto and memory timeline importers and the category pass on small hand-made files. */
#include "export/exporter.h"
#include "kineto_util.h"

int test_failures;

/*
 * A small profiler trace written the way Kineto writes one: operators thread by thread, then
 * memory events, then each device activity just before its runtime call. Times are relative to
 * baseTimeNanoseconds and fractional, as in current Kineto.
 */
static const char *const kineto_trace =
  "{\n"
  "  \"schemaVersion\": 1,\n"
  "  \"deviceProperties\": [{\"id\": 0, \"name\": \"Test GPU\", \"totalGlobalMem\": 1048576}],\n"
  "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1},\n"
  "  \"baseTimeNanoseconds\": 1000000000000,\n"
  "  \"traceEvents\": [\n"
  "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"autograd::engine::evaluate_function: MulBackward0\", \"pid\": 1, "
  "\"tid\": 2, \"ts\": 30.000, \"dur\": 10.000, \"args\": {\"Sequence number\": 3}},\n"
  "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"MulBackward0\", \"pid\": 1, \"tid\": 2, \"ts\": 31.000, \"dur\": 8.000},\n"
  "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#7\", \"pid\": 1, \"tid\": 1, \"ts\": 10.000, "
  "\"dur\": 50.000},\n"
  "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mul\", \"pid\": 1, \"tid\": 1, \"ts\": 12.000, \"dur\": 5.500, "
  "\"args\": {\"Input Dims\": [[4, 4], [4, 4]], \"Input type\": [\"float\", \"float\"]}},\n"
  "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"Optimizer.step#SGD.step\", \"pid\": 1, \"tid\": 1, "
  "\"ts\": 45.000, \"dur\": 10.000},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": "
  "13.000, \"args\": {\"Addr\": 4096, \"Bytes\": 512, \"Total Allocated\": 10752, \"Total Reserved\": 2097152, "
  "\"Device Type\": 1, \"Device Id\": 0}},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": "
  "14.250, \"args\": {\"Addr\": 999936, \"Bytes\": -1024, \"Total Allocated\": 9728, \"Total Reserved\": 2097152, "
  "\"Device Type\": 1, \"Device Id\": 0}},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": "
  "15.000, \"args\": {\"Addr\": 77, \"Bytes\": 8, \"Total Allocated\": 8, \"Total Reserved\": 0, \"Device Type\": 0, "
  "\"Device Id\": -1}},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": "
  "46.000, \"args\": {\"Addr\": 12288, \"Bytes\": 4096, \"Total Allocated\": 13312, \"Total Reserved\": 2097152, "
  "\"Device Type\": 1, \"Device Id\": 0}},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 2, \"ts\": "
  "32.000, \"args\": {\"Addr\": 8192, \"Bytes\": 2048, \"Total Allocated\": 11776, \"Total Reserved\": 2097152, "
  "\"Device Type\": 1, \"Device Id\": 0}},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 2, \"ts\": "
  "38.000, \"args\": {\"Addr\": 4096, \"Bytes\": -512, \"Total Allocated\": 11264, \"Total Reserved\": 2097152, "
  "\"Device Type\": 1, \"Device Id\": 0}},\n"
  "  {\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 2, \"ts\": "
  "38.500, \"args\": {\"Addr\": 8192, \"Bytes\": -2048, \"Total Allocated\": 9216, \"Total Reserved\": 2097152, "
  "\"Device Type\": 1, \"Device Id\": 0}},\n"
  "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"mul_kernel\", \"pid\": 0, \"tid\": 7, \"ts\": 20.000, \"dur\": 3.000, "
  "\"args\": {\"External id\": 9, \"device\": 0, \"stream\": 7, \"correlation\": 100, \"registers per thread\": 32, "
  "\"shared memory\": 0, \"grid\": [1, 2, 3], \"block\": [4, 5, 6]}},\n"
  "  {\"ph\": \"f\", \"id\": 100, \"pid\": 0, \"tid\": 7, \"ts\": 20.000, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"},\n"
  "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, \"ts\": 13.500, "
  "\"dur\": 2.000, \"args\": {\"cbid\": 211, \"correlation\": 100}},\n"
  "  {\"ph\": \"s\", \"id\": 100, \"pid\": 1, \"tid\": 1, \"ts\": 13.500, \"cat\": \"ac2g\", \"name\": \"ac2g\"},\n"
  "  {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pinned -> Device)\", \"pid\": 0, \"tid\": 7, \"ts\": "
  "25.000, \"dur\": 1.000, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 101, \"bytes\": 4096}},\n"
  "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMemcpyAsync\", \"pid\": 1, \"tid\": 1, \"ts\": 16.000, "
  "\"dur\": 1.000, \"args\": {\"correlation\": 101}},\n"
  "  {\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"Stream Sync\", \"pid\": 0, \"tid\": 7, \"ts\": 17.500, \"dur\": "
  "2.500, \"args\": {\"cuda_sync_kind\": \"Stream Sync\", \"stream\": 7, \"correlation\": 102, \"device\": 0}},\n"
  "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"pid\": 1, \"tid\": 1, \"ts\": "
  "17.000, \"dur\": 3.000, \"args\": {\"correlation\": 102}},\n"
  "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"early_kernel\", \"pid\": 0, \"tid\": 7, \"ts\": 9.000, \"dur\": "
  "1.000, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 50}},\n"
  "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaMalloc\", \"pid\": 1, \"tid\": 1, \"ts\": 46.500, \"dur\": "
  "100.000, \"args\": {\"correlation\": 103}},\n"
  "  {\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"main\"}},\n"
  "  {\"ph\": \"X\", \"cat\": \"Trace\", \"ts\": 1.000, \"dur\": 100.000, \"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", "
  "\"name\": \"PyTorch Profiler (0)\", \"args\": {\"Op count\": 0}},\n"
  "  {\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", \"pid\": \"\", \"tid\": \"\", \"ts\": 200.000}\n"
  "  ],\n"
  "  \"traceName\": \"test.json\"\n"
  "}\n";

#define BASE INT64_C(1000000000000)
#define US(x) (BASE + (int64_t)((x) * 1000))

static sim_event event_at(store *s, int64_t trace, int64_t seq) {
  sim_event ev;
  sim_event_init(&ev);
  store_reader *r;
  store_reader_range(s, trace, seq, seq + 1, &r);
  if (store_reader_next(r, &ev) != 1) test_failures++;
  store_reader_close(r);
  return ev;
}

static const char *name_of(store *s, const sim_event *ev) {
  const char *n = store_string(s, ev->name);
  return n ? n : "";
}

static void kineto_order_join_and_baseline(void) {
  store *s = ku_store("k1.db");
  int64_t t = ku_import(s, ku_write("trace.json", kineto_trace), NULL, NULL);
  CHECK(t > 0);
  if (t <= 0) {
    fprintf(stderr, "%s\n", ku_err);
    store_close(s);
    return;
  }
  /* Two blocks predate the window: the one freed at 14.25 us, and the rest of the baseline. */
  sim_event ev = event_at(s, t, 0);
  CHECK_EQ(ev.kind, SIM_EV_ALLOC);
  CHECK_EQ(ev.flags, SIM_EVF_PREEXISTING);
  CHECK_EQ(ev.addr, 999936);
  CHECK_EQ(ev.size, 1024);
  CHECK_EQ(ev.ts, US(9)); /* the first event of the trace: the early kernel */
  ev = event_at(s, t, 1);
  CHECK_EQ(ev.flags, SIM_EVF_PREEXISTING);
  CHECK_EQ(ev.size, 10240 - 1024);
  /* The kernel launched before the window sits at its device start, without a launch. */
  ev = event_at(s, t, 2);
  CHECK_EQ(ev.kind, SIM_EV_KERNEL);
  CHECK_STR(name_of(s, &ev), "early_kernel");
  CHECK_EQ(ev.ts, US(9));
  CHECK_EQ(ev.api_dur, -1);
  CHECK_EQ(ev.step, -1);
  ev = event_at(s, t, 3);
  CHECK_EQ(ev.kind, SIM_EV_MARKER);
  CHECK_EQ(ev.flags, SIM_EVF_STEP_BEGIN);
  CHECK_EQ(ev.step, 7);
  CHECK_EQ(ev.dur, 50000);
  CHECK_STR(name_of(s, &ev), "ProfilerStep#7");
  ev = event_at(s, t, 4);
  CHECK_EQ(ev.kind, SIM_EV_ALLOC);
  CHECK_EQ(ev.addr, 4096);
  CHECK_EQ(ev.size, 512);
  CHECK_EQ(ev.step, 7);
  CHECK_EQ(ev.ts, US(13));
  char *label = store_stack_label(s, ev.stack);
  CHECK_STR(label, "aten::mul");
  free(label);
  /* The kernel sits at its launch: host time, launch duration, device start and duration. */
  ev = event_at(s, t, 5);
  CHECK_EQ(ev.kind, SIM_EV_KERNEL);
  CHECK_STR(name_of(s, &ev), "mul_kernel");
  CHECK_EQ(ev.ts, US(13.5));
  CHECK_EQ(ev.api_dur, 2000);
  CHECK_EQ(ev.dev_ts, US(20));
  CHECK_EQ(ev.dur, 3000);
  CHECK_EQ(ev.stream, 7);
  CHECK_EQ(ev.device, 0);
  /* the launch geometry is not kept (counted as an import note) */
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM event_args WHERE trace_id = %lld", (long long)t), 0);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'kernel_launch_details'",
                  (long long)t),
           2);
  ev = event_at(s, t, 6);
  CHECK_EQ(ev.kind, SIM_EV_FREE);
  CHECK_EQ(ev.addr, 999936);
  ev = event_at(s, t, 7);
  CHECK_EQ(ev.kind, SIM_EV_HOST_ALLOC);
  CHECK_EQ(ev.mem, SIM_MEM_PAGEABLE);
  CHECK_EQ(ev.device, -1);
  ev = event_at(s, t, 8);
  CHECK_EQ(ev.kind, SIM_EV_MEMCPY);
  CHECK_EQ(ev.dir, SIM_COPY_H2D);
  CHECK_EQ(ev.mem, SIM_MEM_PINNED);
  CHECK_EQ(ev.size, 4096);
  CHECK_EQ(ev.flags, SIM_EVF_ASYNC);
  ev = event_at(s, t, 9);
  CHECK_EQ(ev.kind, SIM_EV_SYNC);
  CHECK_EQ(ev.stream, 7); /* from the synchronization activity */
  CHECK_EQ(ev.device, 0);
  CHECK_EQ(ev.api_dur, 3000);
  CHECK_STR(name_of(s, &ev), "cudaStreamSynchronize");
  ev = event_at(s, t, 10);
  CHECK_EQ(ev.kind, SIM_EV_MARKER);
  CHECK_EQ(ev.flags, SIM_EVF_PHASE);
  CHECK_STR(name_of(s, &ev), "backward");
  ev = event_at(s, t, 11);
  CHECK_EQ(ev.kind, SIM_EV_ALLOC);
  CHECK_EQ(ev.addr, 8192);
  label = store_stack_label(s, ev.stack);
  CHECK_STR(label, "MulBackward0");
  free(label);
  CHECK_EQ(event_at(s, t, 12).addr, 4096);
  CHECK_EQ(event_at(s, t, 13).addr, 8192);
  ev = event_at(s, t, 14);
  CHECK_STR(name_of(s, &ev), "optimizer");
  CHECK_EQ(ev.dur, 10000);
  CHECK_EQ(event_at(s, t, 15).addr, 12288);
  ev = event_at(s, t, 16);
  CHECK_EQ(ev.kind, SIM_EV_API);
  CHECK_STR(name_of(s, &ev), "cudaMalloc");
  CHECK_EQ(ev.dur, 100000);
  CHECK_EQ(ev.step, 7);
  CHECK_EQ(ku_int(s, 0, "SELECT event_count FROM traces WHERE id = %lld", (long long)t), 17);
  /* The trace row. */
  CHECK_EQ(ku_int(s, 0, "SELECT device_index FROM traces WHERE id = %lld", (long long)t), 0);
  CHECK_EQ(ku_int(s, 0, "SELECT device_memory FROM traces WHERE id = %lld", (long long)t), 1048576);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM traces WHERE id = %lld AND device_name = 'Test GPU' AND allocator = 'torch' "
                        "AND source_format = 'kineto' AND json_extract(attrs, '$.baseline_bytes.0') = 10240 "
                        "AND json_extract(attrs, '$.distributedInfo.world_size') = 1",
                  (long long)t),
           1);
  /* Totals: one per memory event, after it. */
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM recorded WHERE trace_id = %lld AND action = 'totals'", (long long)t), 7);
  CHECK_EQ(ku_int(s, 0, "SELECT allocated FROM recorded WHERE trace_id = %lld AND before_seq = 5", (long long)t), 10752);
  ku_totals tot = ku_totals_check(s, t, "ideal", 1);
  CHECK_EQ(tot.compared, 7);
  CHECK_EQ(tot.differ, 0);
  /* Categories. */
#define CAT(seq, cat, src)                                                                                         \
  do {                                                                                                           \
    sim_event e_ = event_at(s, t, seq);                                                                          \
    CHECK_STR(sim_category_name(e_.category), cat);                                                              \
    CHECK_STR(sim_cat_source_name(e_.cat_source), src);                                                          \
  } while (0)
  CAT(0, "temporary", "lifetime");   /* pre-existing, freed before any backward pass */
  CAT(1, "parameter", "lifetime");   /* pre-existing, live to the end */
  CAT(4, "activation", "lifetime");  /* made in the step, freed in its backward pass */
  CAT(7, "activation", "lifetime");  /* host: lives into the backward pass, never freed */
  CAT(11, "temporary", "stack");     /* made and freed inside backward */
  CAT(15, "optimizer_state", "stack"); /* made by the optimizer, outlives it */
  CHECK_EQ(ku_recategorize_differences(s, t), 0); /* the importer and the pass agree */
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'categories_from_stack'",
                  (long long)t),
           2);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'flow_events'", (long long)t), 2);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'runtime_calls_merged'",
                  (long long)t),
           3);
  store_close(s);
}

/* However the file is read (scanner or yajl alone), joined (window or sort) and sorted (in memory or
 * spilled to disk), the stored trace is the same. */
static void kineto_reading_strategies_agree(void) {
  store *s = ku_store("k2.db");
  const char *path = ku_write("trace2.json", kineto_trace);
  int64_t a = ku_import(s, path, NULL, NULL);
  CHECK(a > 0);
  static const char *const variants[][4] = {
    {"sort_memory=4KiB", NULL},
    {"join_window=0", NULL},
    {"join_window=1", NULL},
    {"json_scanner=0", NULL},
    {"json_scanner=0", "join_window=0", "sort_memory=4KiB", NULL},
  };
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    int64_t d = ku_import_same(s, path, a, variants[i]);
    if (d != 0) fprintf(stderr, "  with %s: %lld differences\n", variants[i][0], (long long)d);
    CHECK_EQ(d, 0);
  }
  store_close(s);
}

/* Mutated traces: the scanner in front of yajl and yajl alone accept the same files, store the
 * same traces, and reject the rest with the same message. */
static void kineto_scanner_fuzz(void) {
  store *s = ku_store("k4.db");
  static const char alphabet[] = "{}[]\",:\\ \n0123456789.-eE";
  uint64_t rng = 12345;
  size_t n0 = strlen(kineto_trace);
  char *buf = sim_xmalloc(n0 + 16);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 400; i++) {
    memcpy(buf, kineto_trace, n0 + 1);
    size_t n = n0;
    for (int e = 0; e < 2; e++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (size_t)(rng >> 33) % n;
      char c = alphabet[(rng >> 20) % (sizeof alphabet - 1)];
      if ((rng >> 8) % 3 == 0) memmove(buf + at, buf + at + 1, n - at), n--; /* delete */
      else buf[at] = c;                                                     /* replace */
    }
    const char *path = ku_write("fuzz.json", buf);
    static const char *const yajl_only[] = {"json_scanner=0", NULL};
    int64_t a = ku_import(s, path, "kineto", NULL);
    char err_a[IMPORT_ERRLEN];
    snprintf(err_a, sizeof err_a, "%s", ku_err);
    int64_t b = ku_import(s, path, "kineto", yajl_only);
    CHECK_EQ(a < 0, b < 0);
    if (a > 0 && b > 0) {
      CHECK_EQ(ku_differences(s, a, b), 0);
      accepted++;
    } else if (a < 0 && b < 0) {
      if (strcmp(err_a, ku_err)) {
        fprintf(stderr, "  messages differ:\n    %s\n    %s\n", err_a, ku_err);
        test_failures++;
      }
      rejected++;
    }
  }
  fprintf(stderr, "  400 mutated traces: %d imported, %d rejected, the same way both ways\n", accepted, rejected);
  free(buf);
  store_close(s);
}

/* Elements the scanner leaves to yajl (escapes), and one larger than the reader's first buffer. */
static void kineto_unusual_elements(void) {
  store *s = ku_store("k5.db");
  size_t big = 5u << 20;
  char *name = sim_xmalloc(big + 1);
  memset(name, 'k', big);
  name[big] = 0;
  const char *head = "{\"schemaVersion\": 1, \"traceEvents\": [\n"
                     "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void k<\\\"caf\\u00e9\\\">()\", \"pid\": 0, "
                     "\"tid\": 7, \"ts\": 10, \"dur\": 2, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 5}},\n"
                     "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, "
                     "\"ts\": 9, \"dur\": 1, \"args\": {\"correlation\": 5}},\n"
                     "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"";
  const char *tail = "\", \"pid\": 0, \"tid\": 7, \"ts\": 30, \"dur\": 2, \"args\": {\"device\": 0, \"stream\": 7, "
                     "\"correlation\": 6}},\n"
                     "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, "
                     "\"ts\": 20, \"dur\": 1, \"args\": {\"correlation\": 6}}\n]}\n";
  size_t n = strlen(head) + big + strlen(tail);
  char *text = sim_xmalloc(n + 1);
  snprintf(text, n + 1, "%s%s%s", head, name, tail);
  int64_t t = ku_import(s, ku_write("unusual.json", text), NULL, NULL);
  CHECK(t > 0);
  if (t > 0) {
    sim_event ev = event_at(s, t, 0);
    CHECK_STR(name_of(s, &ev), "void k<\"caf\xc3\xa9\">()"); /* decoded by yajl */
    ev = event_at(s, t, 1);
    CHECK_EQ(strlen(name_of(s, &ev)), big);
    CHECK_EQ(ev.ts, 20000);
  }
  free(text);
  free(name);
  store_close(s);
}

static void kineto_errors_name_the_place(void) {
  store *s = ku_store("k3.db");
  int64_t before = ku_int(s, 0, "SELECT count(*) FROM traces");
  /* traceEvents[2] is a memory event without Bytes, on line 5 */
  const char *bad = ku_write("bad.json",
                             "{\"schemaVersion\": 1,\n\"traceEvents\": [\n"
                             "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add\", \"tid\": 1, \"ts\": 1, \"dur\": 2},\n"
                             "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"tid\": 1, \"ts\": 2, "
                             "\"args\": {\"Addr\": 1, \"Bytes\": 512, \"Device Type\": 1, \"Device Id\": 0}},\n"
                             "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"tid\": 1, \"ts\": 3, "
                             "\"args\": {\"Addr\": 1, \"Device Type\": 1, \"Device Id\": 0}}\n]}\n");
  CHECK_EQ(ku_import(s, bad, NULL, NULL), -1);
  CHECK(strstr(ku_err, "bad.json") != NULL);
  CHECK(strstr(ku_err, "line 5") != NULL);
  CHECK(strstr(ku_err, "traceEvents[2]") != NULL);
  CHECK(strstr(ku_err, "'Bytes'") != NULL);
  /* A field of the wrong type */
  bad = ku_write("bad2.json", "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": \"soon\", "
                              "\"dur\": 1, \"args\": {\"correlation\": 1}}]}");
  CHECK_EQ(ku_import(s, bad, NULL, NULL), -1);
  CHECK(strstr(ku_err, "traceEvents[0]") && strstr(ku_err, "'ts'"));
  /* Invalid JSON, and JSON that ends early */
  bad = ku_write("bad3.json", "{\"traceEvents\": [{\"ph\": \"X\",, }]}");
  CHECK_EQ(ku_import(s, bad, NULL, NULL), -1);
  CHECK(strstr(ku_err, "invalid JSON") && strstr(ku_err, "line 1"));
  bad = ku_write("bad4.json", "{\"schemaVersion\": 1, \"traceEvents\": [{\"ph\": \"X\"");
  CHECK_EQ(ku_import(s, bad, NULL, NULL), -1);
  CHECK(strstr(ku_err, "truncated") != NULL);
  /* Not a profiler trace */
  bad = ku_write("bad5.json", "{\"schemaVersion\": 1, \"deviceProperties\": []}");
  CHECK_EQ(ku_import(s, bad, NULL, NULL), -1);
  CHECK(strstr(ku_err, "no traceEvents") != NULL);
  bad = ku_write("bad6.json", "[1, 2, 3]");
  CHECK_EQ(ku_import(s, bad, "kineto", NULL), -1);
  CHECK(strstr(ku_err, "JSON array") != NULL);
  CHECK_EQ(ku_import(s, bad, NULL, NULL), -1);
  CHECK(strstr(ku_err, "not a trace format") != NULL);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM traces"), before);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM events"), 0);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM strings"), 0);
  store_close(s);
}

/* The raw memory timeline: identities, versions, categories from the source. */
static void timeline_rows(void) {
  store *s = ku_store("t1.db");
  const char *path = ku_write("mem.raw.json",
                              "[[-1, 1, 1000, 0], [-1, 1, 512, 7], [100, 2, 2048, 4], [110, 3, -2048, 4], [110, 3, 2048, 7],"
                              " [120, 2, 4096, 6], [130, 4, -2048, 7], [140, 4, -4096, 6], [150, 2, 64, 7],"
                              " [150, 3, -64, 7], [150, 3, 64, 5], [160, 2, 2048, 4], [170, 4, -2048, 4]]");
  int64_t t = ku_import(s, path, NULL, NULL);
  CHECK(t > 0);
  if (t <= 0) {
    fprintf(stderr, "%s\n", ku_err);
    store_close(s);
    return;
  }
  CHECK_EQ(ku_kind(s, t, "alloc"), 6);
  CHECK_EQ(ku_kind(s, t, "free"), 3);
  sim_event ev = event_at(s, t, 0);
  CHECK_EQ(ev.flags, SIM_EVF_PREEXISTING);
  CHECK_EQ(ev.ts, 100); /* pre-existing memory is placed at the first time the timeline gives */
  CAT(0, "parameter", "source");
  CAT(1, "parameter", "lifetime"); /* no category in the file; pre-existing and never freed */
  CAT(2, "activation", "source");  /* stays an activation after a version without a category */
  CAT(3, "temporary", "source");   /* AUTOGRAD_DETAIL */
  CAT(6, "gradient", "source");    /* made without a category, the next version is a gradient */
  ev = event_at(s, t, 4);
  CHECK_EQ(ev.kind, SIM_EV_FREE);
  CHECK_EQ(ev.addr, event_at(s, t, 2).addr); /* the DESTROY of (2048, unknown) ends the allocation that became unknown */
  CHECK_EQ(event_at(s, t, 8).addr, event_at(s, t, 7).addr); /* the last CREATE and DESTROY pair up */
  CHECK(event_at(s, t, 7).addr != event_at(s, t, 2).addr);   /* identities are never reused */
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM event_args WHERE trace_id = %lld AND seq = 2 AND key = 'pytorch_categories' "
                        "AND value = '[\"activation\",\"unknown\"]'",
                  (long long)t),
           1);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM event_args WHERE trace_id = %lld AND seq = 3 AND key = 'pytorch_category'",
                  (long long)t),
           1);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'version_changes'", (long long)t), 2);
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'categories_known_late'",
                  (long long)t),
           1);
  /* Errors: not rows of four integers, unknown codes, broken pairs. */
  int64_t traces = ku_int(s, 0, "SELECT count(*) FROM traces");
  static const char *const bad[][2] = {
    {"[[1, 2, 3]]", "row 0 has 3 values"},
    {"[[1, 9, 3, 0]]", "unknown action 9"},
    {"[[1, 2, 3, 8]]", "unknown category 8"},
    {"[[1, 2, 64, 0], [2, 3, -64, 0], [3, 2, 64, 0]]", "without its pair"},
    {"[[1, 2, 64, 0],\n [2, \"x\", 3, 0]]", "line 2"},
    {"[[0, 10, 20, 30, 40, 50], [[1, 2], [3, 4]]]", "plotted memory timeline"},
    {"[[1, 2, 64, 0], [2, 2, 64, 0]", "truncated"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ(ku_import(s, ku_write("bad.raw.json", bad[i][0]), "memory_timeline", NULL), -1);
    if (!strstr(ku_err, bad[i][1])) {
      fprintf(stderr, "  case %zu: '%s' does not say '%s'\n", i, ku_err, bad[i][1]);
      test_failures++;
    }
  }
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM traces"), traces);
  store_close(s);
}

/*
 * Categories from call stacks shaped like a PyTorch snapshot's frames (Python frames outermost,
 * the allocator's C++ frames innermost), without step or phase markers: the pass the import
 * driver runs decides them from the frames and from the phases the frames imply.
 */
static const char *const frames_trace =
  "{\"memplay\":1,\"framework\":\"pytorch\"}\n"
  "{\"kind\":\"stack\",\"id\":1,\"frames\":[{\"name\":\"c10::cuda::CUDACachingAllocator::malloc\",\"file\":\"??\",\"line\":0},"
  "{\"name\":\"reset_parameters\",\"file\":\"/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py\",\"line\":115},"
  "{\"name\":\"__init__\",\"file\":\"/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py\",\"line\":106},"
  "{\"name\":\"<module>\",\"file\":\"train.py\",\"line\":3}]}\n"
  "{\"kind\":\"stack\",\"id\":2,\"frames\":[{\"name\":\"__next__\",\"file\":\"/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py\",\"line\":631},"
  "{\"name\":\"<module>\",\"file\":\"train.py\",\"line\":9}]}\n"
  "{\"kind\":\"stack\",\"id\":3,\"frames\":[{\"name\":\"at::detail::empty_cuda\",\"file\":\"??\",\"line\":0},"
  "{\"name\":\"forward\",\"file\":\"model.py\",\"line\":22},{\"name\":\"_call_impl\",\"file\":\"/venv/lib/python3.11/site-packages/torch/nn/modules/module.py\",\"line\":1527},"
  "{\"name\":\"<module>\",\"file\":\"train.py\",\"line\":10}]}\n"
  "{\"kind\":\"stack\",\"id\":4,\"frames\":[{\"name\":\"at::native::mul_out\",\"file\":\"??\",\"line\":0},"
  "{\"name\":\"torch::autograd::generated::MulBackward0::apply(std::vector<at::Tensor>&&)\",\"file\":\"??\",\"line\":0},"
  "{\"name\":\"torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)\",\"file\":\"??\",\"line\":0},"
  "{\"name\":\"torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)\",\"file\":\"??\",\"line\":0}]}\n"
  "{\"kind\":\"stack\",\"id\":5,\"frames\":[{\"name\":\"_init_group\",\"file\":\"/venv/lib/python3.11/site-packages/torch/optim/adam.py\",\"line\":98},"
  "{\"name\":\"step\",\"file\":\"/venv/lib/python3.11/site-packages/torch/optim/adam.py\",\"line\":155},{\"name\":\"<module>\",\"file\":\"train.py\",\"line\":13}]}\n"
  "{\"kind\":\"stack\",\"id\":6,\"frames\":[{\"name\":\"_multi_tensor_adam\",\"file\":\"/venv/lib/python3.11/site-packages/torch/optim/adam.py\",\"line\":520},"
  "{\"name\":\"step\",\"file\":\"/venv/lib/python3.11/site-packages/torch/optim/adam.py\",\"line\":166},{\"name\":\"<module>\",\"file\":\"train.py\",\"line\":13}]}\n"
  "{\"kind\":\"alloc\",\"addr\":99,\"size\":4096,\"flags\":[\"preexisting\"]}\n"   /* seq 0: live before, never freed */
  "{\"kind\":\"alloc\",\"addr\":1,\"size\":1024,\"stack\":1}\n"                   /* 1: a parameter */
  "{\"kind\":\"alloc\",\"addr\":2,\"size\":512,\"stack\":2}\n"                    /* 2: the batch */
  "{\"kind\":\"alloc\",\"addr\":3,\"size\":2048,\"stack\":3}\n"                   /* 3: an activation */
  "{\"kind\":\"alloc\",\"addr\":4,\"size\":256,\"stack\":3}\n"                    /* 4: a forward temporary */
  "{\"kind\":\"free\",\"addr\":4}\n"
  "{\"kind\":\"alloc\",\"addr\":5,\"size\":1024,\"stack\":4}\n"                   /* 6: a gradient */
  "{\"kind\":\"alloc\",\"addr\":6,\"size\":128,\"stack\":4}\n"                    /* 7: a backward temporary */
  "{\"kind\":\"free\",\"addr\":6}\n"
  "{\"kind\":\"free\",\"addr\":3}\n"
  "{\"kind\":\"free\",\"addr\":2}\n"
  "{\"kind\":\"alloc\",\"addr\":7,\"size\":1024,\"stack\":5}\n"                   /* 11: Adam's state */
  "{\"kind\":\"alloc\",\"addr\":8,\"size\":1024,\"stack\":6}\n"                   /* 12: an update temporary */
  "{\"kind\":\"free\",\"addr\":8}\n"
  "{\"kind\":\"alloc\",\"addr\":9,\"size\":2048,\"stack\":3}\n"                   /* 14: the next forward */
  "{\"kind\":\"free\",\"addr\":5}\n"                                                 /* the gradient goes */
  "{\"kind\":\"free\",\"addr\":9}\n";

static void categories_from_frames(void) {
  store *s = ku_store("f.db");
  int64_t t = ku_import(s, ku_write("frames.jsonl", frames_trace), "jsonl", NULL);
  CHECK(t > 0);
  if (t <= 0) {
    fprintf(stderr, "%s\n", ku_err);
    store_close(s);
    return;
  }
  CAT(0, "parameter", "lifetime");
  CAT(1, "parameter", "stack");
  CAT(2, "input", "stack");
  CAT(3, "activation", "stack");
  CAT(4, "temporary", "stack");
  CAT(6, "gradient", "stack");
  CAT(7, "temporary", "stack");
  CAT(11, "optimizer_state", "stack");
  CAT(12, "temporary", "stack");
  CAT(14, "temporary", "stack"); /* freed in its forward pass, never reaching a backward */
  CHECK_EQ(ku_int(s, 0, "SELECT value FROM trace_stats WHERE trace_id = %lld AND name = 'categories_from_stack'",
                  (long long)t),
           9);
  store_close(s);
}

/* A Kineto trace exported as JSON Lines comes back the same (and is read as JSON Lines, though its
 * header's attrs hold Kineto's schemaVersion). */
static void kineto_round_trip(void) {
  store *s = ku_store("rt.db");
  int64_t t = ku_import(s, ku_write("rt.json", kineto_trace), NULL, NULL);
  CHECK(t > 0);
  store_trace tr;
  char ref[32], path[600], err[512];
  snprintf(ref, sizeof ref, "%lld", (long long)t);
  snprintf(path, sizeof path, "%s/rt.jsonl", ku_dir);
  FILE *f = fopen(path, "w");
  CHECK(f && store_trace_find(s, ref, &tr) == 0);
  CHECK(f && exporter_find("jsonl")->write(s, &tr, f, err, sizeof err) == 0);
  if (f) fclose(f);
  store_trace_clear(&tr);
  int64_t back = ku_import(s, path, NULL, NULL);
  CHECK(back > t);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM traces WHERE id = %lld AND source_format = 'kineto'", (long long)back), 1);
  CHECK_EQ(ku_differences(s, t, back), 0);
  store_close(s);
}

/* Which importer a file's content picks. */
static void detection(void) {
  store *s = ku_store("d.db");
  CHECK(ku_import(s, ku_write("a.txt", kineto_trace), NULL, NULL) > 0);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM traces WHERE source_format = 'kineto'"), 1);
  CHECK(ku_import(s, ku_write("b.txt", "[[-1, 1, 512, 0], [5, 4, -512, 0]]"), NULL, NULL) > 0);
  CHECK_EQ(ku_int(s, 0, "SELECT count(*) FROM traces WHERE source_format = 'memory_timeline'"), 1);
  /* --format forces: a timeline read as Kineto is an error, and the other way round */
  CHECK_EQ(ku_import(s, ku_write("c.txt", "[[-1, 1, 512, 0]]"), "kineto", NULL), -1);
  CHECK_EQ(ku_import(s, ku_write("d.txt", kineto_trace), "memory_timeline", NULL), -1);
  CHECK(strstr(ku_err, "JSON object") != NULL);
  store_close(s);
}

int main(void) {
  ku_setup();
  RUN(kineto_order_join_and_baseline);
  RUN(kineto_reading_strategies_agree);
  RUN(kineto_scanner_fuzz);
  RUN(kineto_unusual_elements);
  RUN(kineto_errors_name_the_place);
  RUN(timeline_rows);
  RUN(categories_from_frames);
  RUN(kineto_round_trip);
  RUN(detection);
  ku_teardown();
  TEST_MAIN_END();
}

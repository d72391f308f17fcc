/* test_recorder.c: the recorder's conversion of CUPTI records to a trace, on synthetic records, through the importer. */
#include <unistd.h>

#include "import/importer.h"
#include "cuda/recorder/convert.h"
#include "test.h"

int test_failures;

#define MiB (UINT64_C(1) << 20)
#define CTX 1
#define NULL_STREAM 7

static rec_record rec(int kind, uint32_t corr, uint64_t start, uint64_t end) {
  rec_record r;
  memset(&r, 0, sizeof r);
  r.kind = (uint8_t)kind;
  r.correlation = corr;
  r.start = start;
  r.end = end;
  r.device = 0;
  r.context = CTX;
  r.stream = REC_INVALID_ID;
  return r;
}

static rec_record memory(int op, int mem, uint32_t corr, uint64_t t, uint64_t addr, uint64_t bytes) {
  rec_record r = rec(REC_MEMORY, corr, t, t);
  r.op = (uint8_t)op;
  r.mem = (uint8_t)mem;
  r.addr = addr;
  r.bytes = bytes;
  return r;
}

/*
 * A small program, as CUPTI would report it, delivered out of order: kernels and copies arrive
 * in their own buffers, after the API records. Host issue order (API start times):
 *   1000 cudaMalloc 2 MiB          -> alloc
 *   1800 cudaMemcpyAsync h2d pinned -> memcpy (stream 13, async)
 *   2000 cudaLaunchKernel          -> kernel on the NULL stream (id 7): stream 0
 *   2200 cudaMallocHost 1 MiB      -> host_alloc pinned
 *   2400 cuMemMap x2, 2600 cuMemUnmap of both -> alloc, alloc, free, free
 *   3000 cudaDeviceSynchronize     -> sync (device-wide)
 *   3500 cudaStreamWaitEvent       -> nothing (counted)
 *   4000 cudaFree of a never-seen address -> nothing (counted)
 *   5000 cudaFree 2 MiB            -> free
 *   6000 cudaFreeHost              -> host_free
 *   plus a __device__ global (static) -> nothing (counted)
 */
static void fill(rec_state *st) {
  const uint64_t A = UINT64_C(0x7f0000000000), H = UINT64_C(0x100000000), V = UINT64_C(0x7e0000000000);
  rec_default_stream(st, CTX, NULL_STREAM);
  rec_context(st, CTX, 0);
  rec_device_info(st, 0, "NVIDIA Test GPU", 80 * (UINT64_C(1) << 30), 9, 0);
  rec_record k = rec(REC_KERNEL, 3, 2500, 4500);
  k.stream = NULL_STREAM;
  k.name = rec_intern(st, "void gemm<\"fp32\">(float\\*)");
  rec_add(st, &k);
  rec_record c = rec(REC_MEMCPY, 2, 1900, 2000);
  c.copy_kind = REC_COPY_HTOD;
  c.src_kind = REC_MEM_PINNED;
  c.dst_kind = REC_MEM_DEVICE;
  c.bytes = MiB;
  c.stream = 13;
  c.flags = REC_F_ASYNC;
  rec_add(st, &c);
  rec_add_call_addr(st, 2, A + 4096);
  rec_add(st, &(rec_record){0});
  st->n--; /* a record of kind 0 is never written: drop it again (exercises growth only) */
  rec_record s = rec(REC_SYNC, 8, 3000, 3400);
  s.op = REC_SYNC_CONTEXT;
  s.device = REC_INVALID_ID; /* synchronizations name the context only */
  rec_add(st, &s);
  rec_record w = rec(REC_SYNC, 9, 3500, 3501);
  w.op = REC_SYNC_STREAM_WAIT_EVENT;
  rec_add(st, &w);
  rec_record m1 = rec(REC_MAP, 20, 2400, 2400);
  m1.addr = V;
  m1.bytes = 2 * MiB;
  rec_add(st, &m1);
  m1.correlation = 21;
  m1.start = m1.end = 2410;
  m1.addr = V + 2 * MiB;
  rec_add(st, &m1);
  rec_record u = rec(REC_UNMAP, 22, 2600, 2600);
  u.addr = V;
  u.bytes = 4 * MiB;
  rec_add(st, &u);
  rec_add(st, &(rec_record){.kind = REC_MEMORY, .op = REC_OP_ALLOCATION, .mem = REC_MEM_DEVICE_STATIC, .addr = 64,
                            .bytes = 1024, .start = 10, .device = 0, .context = CTX, .stream = REC_INVALID_ID});
  rec_record a = memory(REC_OP_ALLOCATION, REC_MEM_DEVICE, 1, 1200, A, 2 * MiB);
  rec_add(st, &a);
  rec_record f = memory(REC_OP_RELEASE, REC_MEM_DEVICE, 5, 5100, A, 2 * MiB);
  rec_add(st, &f);
  rec_record bad = memory(REC_OP_RELEASE, REC_MEM_DEVICE, 4, 4100, A + 64 * MiB, MiB);
  rec_add(st, &bad);
  rec_add(st, &(rec_record){.kind = REC_MEMORY, .op = REC_OP_ALLOCATION, .mem = REC_MEM_PINNED, .correlation = 6,
                            .addr = H, .bytes = MiB, .start = 2300, .device = 0, .context = CTX,
                            .stream = REC_INVALID_ID});
  rec_add(st, &(rec_record){.kind = REC_MEMORY, .op = REC_OP_RELEASE, .mem = REC_MEM_PINNED, .correlation = 7,
                            .addr = H, .bytes = MiB, .start = 6100, .device = 0, .context = CTX,
                            .stream = REC_INVALID_ID});
  /* API records come last, as their buffer completes last; irrelevant calls are not kept. */
  rec_add_api(st, 1, 1000, 1500, rec_api_name(st, "cudaMalloc_v3020"));
  rec_add_api(st, 2, 1800, 1850, rec_api_name(st, "cudaMemcpyAsync_v3020"));
  rec_add_api(st, 3, 2000, 2010, rec_api_name(st, "cudaLaunchKernel_v7000"));
  rec_add_api(st, 6, 2200, 2350, rec_api_name(st, "cudaMallocHost_v3020"));
  rec_add_api(st, 8, 3000, 3400, rec_api_name(st, "cudaDeviceSynchronize_v3020"));
  rec_add_api(st, 9, 3500, 3501, rec_api_name(st, "cudaStreamWaitEvent_v3020"));
  rec_add_api(st, 4, 4000, 4010, rec_api_name(st, "cudaFree_v3020"));
  rec_add_api(st, 5, 5000, 5200, rec_api_name(st, "cudaFree_v3020"));
  rec_add_api(st, 7, 6000, 6050, rec_api_name(st, "cudaFreeHost_v3020"));
  rec_add_api(st, 30, 100, 101, rec_api_name(st, "cudaGetDevice_v3020"));
  rec_add_api(st, 31, 100, 101, rec_api_name(st, "cudaGetLastError_v3020"));
}

typedef struct expect {
  int kind;
  int64_t ts, dur, dev_ts, api_dur;
  int device;
  int64_t stream;
  uint64_t addr, size;
  int mem, dir, flags;
} expect;

static void test_conversion(void) {
  char dir[] = "/tmp/memplay-test-recorder-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char jsonl[256], db[256];
  snprintf(jsonl, sizeof jsonl, "%s/4242.jsonl", dir);
  snprintf(db, sizeof db, "%s/t.db", dir);

  rec_state st;
  rec_init(&st);
  fill(&st);
  st.dropped = 3;
  CHECK_EQ(st.napi, 8); /* cudaStreamWaitEvent, cudaGetDevice, cudaGetLastError: counted, not kept */
  CHECK_EQ(st.api_seen, 11);
  FILE *f = fopen(jsonl, "w");
  CHECK(f != NULL);
  rec_meta meta = {NULL, "python train.py --batch 8", 4242, 130001};
  rec_counts c;
  char err[256];
  CHECK_EQ(rec_write_jsonl(&st, f, &meta, &c, err, sizeof err), 0);
  fclose(f);
  rec_release(&st);
  CHECK_EQ(c.allocs, 3);
  CHECK_EQ(c.frees, 3);
  CHECK_EQ(c.host_allocs, 1);
  CHECK_EQ(c.host_frees, 1);
  CHECK_EQ(c.copies, 1);
  CHECK_EQ(c.kernels, 1);
  CHECK_EQ(c.syncs, 1);
  CHECK_EQ(c.unmatched_releases, 1);
  CHECK_EQ(c.static_allocs, 1);
  CHECK_EQ(c.stream_waits, 1);
  CHECK_EQ(c.events, 11);

  /* The file is memplay JSON Lines: the importer takes it, checking every free. */
  store *s;
  CHECK_EQ(store_open(&s, db, STORE_CREATE, err, sizeof err), 0);
  import_ctx ic = {.s = s, .path = jsonl, .name = "recorded"};
  int rc = import_file(&ic, NULL);
  if (rc) fprintf(stderr, "import: %s\n", ic.err);
  CHECK_EQ(rc, 0);
  CHECK_STR(ic.format, "jsonl");
  store_trace t;
  CHECK_EQ(store_trace_find(s, "recorded", &t), 0);
  CHECK_STR(t.source_format, "recorded");
  CHECK_STR(t.allocator, "cuda");
  CHECK_STR(t.device_name, "NVIDIA Test GPU");
  CHECK_EQ(t.device_memory, 80 * (INT64_C(1) << 30));
  CHECK_EQ(t.device_index, 0);
  CHECK(t.attrs && strstr(t.attrs, "python train.py --batch 8"));
  CHECK(t.attrs && strstr(t.attrs, "\"origin_ns\":1000"));
  CHECK_EQ(t.event_count, 11);

  const uint64_t A = UINT64_C(0x7f0000000000), H = UINT64_C(0x100000000), V = UINT64_C(0x7e0000000000);
  const expect want[] = {
    {SIM_EV_ALLOC, 0, 0, -1, 500, 0, 0, A, 2 * MiB, SIM_MEM_DEVICE, 0, SIM_EVF_DEVICE_API},
    {SIM_EV_MEMCPY, 800, 100, 900, 50, 0, 13, A + 4096, MiB, SIM_MEM_PINNED, SIM_COPY_H2D, SIM_EVF_ASYNC},
    {SIM_EV_KERNEL, 1000, 2000, 1500, 10, 0, 0, 0, 0, 0, 0, 0},
    {SIM_EV_HOST_ALLOC, 1200, 0, -1, 150, -1, 0, H, MiB, SIM_MEM_PINNED, 0, 0},
    {SIM_EV_ALLOC, 1400, 0, -1, -1, 0, 0, V, 2 * MiB, SIM_MEM_DEVICE, 0, SIM_EVF_DEVICE_API},
    {SIM_EV_ALLOC, 1410, 0, -1, -1, 0, 0, V + 2 * MiB, 2 * MiB, SIM_MEM_DEVICE, 0, SIM_EVF_DEVICE_API},
    {SIM_EV_FREE, 1600, 0, -1, -1, 0, 0, V, 2 * MiB, 0, 0, SIM_EVF_DEVICE_API},
    {SIM_EV_FREE, 1600, 0, -1, -1, 0, 0, V + 2 * MiB, 2 * MiB, 0, 0, SIM_EVF_DEVICE_API},
    {SIM_EV_SYNC, 2000, 400, -1, 400, 0, -1, 0, 0, 0, 0, 0},
    {SIM_EV_FREE, 4000, 0, -1, 200, 0, 0, A, 2 * MiB, 0, 0, SIM_EVF_DEVICE_API},
    {SIM_EV_HOST_FREE, 5000, 0, -1, 50, -1, 0, H, MiB, SIM_MEM_PINNED, 0, 0},
  };
  store_reader *r;
  CHECK_EQ(store_reader_open(s, t.id, &r), 0);
  sim_event e;
  size_t i = 0;
  while (store_reader_next(r, &e) == 1) {
    if (i >= sizeof want / sizeof *want) {
      i++;
      continue;
    }
    const expect *x = &want[i];
    if (e.kind != x->kind) fprintf(stderr, "event %zu: kind %d, want %d\n", i, e.kind, x->kind);
    CHECK_EQ(e.kind, x->kind);
    CHECK_EQ(e.ts, x->ts);
    CHECK_EQ(e.dur, x->dur);
    CHECK_EQ(e.dev_ts, x->dev_ts);
    CHECK_EQ(e.api_dur, x->api_dur);
    CHECK_EQ(e.device, x->device);
    CHECK_EQ(e.stream, x->stream);
    CHECK_EQ(e.addr, x->addr);
    CHECK_EQ(e.size, x->size);
    if (x->mem) CHECK_EQ(e.mem, x->mem);
    CHECK_EQ(e.dir, x->dir);
    CHECK_EQ(e.flags, x->flags);
    if (e.kind == SIM_EV_KERNEL) CHECK_STR(store_string(s, e.name), "void gemm<\"fp32\">(float\\*)");
    i++;
  }
  store_reader_close(r);
  CHECK_EQ(i, sizeof want / sizeof *want);

  /* What was left out is kept as data. */
  sqlite3_stmt *q = store_stmt(s, "SELECT name, severity, value FROM trace_stats WHERE trace_id = :t ORDER BY name");
  sqlite3_bind_int64(q, 1, t.id);
  int seen = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    const char *n = (const char *)sqlite3_column_text(q, 0);
    int64_t v = sqlite3_column_int64(q, 2);
    static const struct {
      const char *name;
      int64_t value;
    } want_stats[] = {{"cupti_dropped_records", 3}, {"releases_without_allocation", 1}, {"static_allocations", 1},
                      {"stream_wait_events", 1}, {"api_calls", 11}};
    for (size_t k = 0; k < sizeof want_stats / sizeof *want_stats; k++)
      if (!strcmp(n, want_stats[k].name)) {
        CHECK_EQ(v, want_stats[k].value);
        seen++;
      }
  }
  CHECK_EQ(seen, 5);
  store_trace_clear(&t);
  store_close(s);
  unlink(jsonl);
  unlink(db);
  char side[300];
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
  rmdir(dir);
}

static void check_counts(const rec_counts *c, uint64_t allocs, uint64_t frees, uint64_t unreleased,
                         uint64_t unmatched, uint64_t uncorrelated) {
  CHECK_EQ(c->allocs, allocs);
  CHECK_EQ(c->frees, frees);
  CHECK_EQ(c->unreleased_allocs, unreleased);
  CHECK_EQ(c->unmatched_releases, unmatched);
  CHECK_EQ(c->uncorrelated, uncorrelated);
}

/* The trace the records convert to, as text (free it), and what was counted. */
static char *converted(rec_state *st, rec_counts *c) {
  char *buf = NULL, err[128];
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f != NULL);
  CHECK_EQ(rec_write_jsonl(st, f, NULL, c, err, sizeof err), 0);
  fclose(f);
  return buf;
}

static void test_lost_release_and_async(void) {
  /* An address allocated twice with no release between: a free is written first, so the trace
   * stays consistent. All device allocations stream-ordered: the trace names the async pool. */
  rec_state st;
  rec_init(&st);
  rec_record a = memory(REC_OP_ALLOCATION, REC_MEM_DEVICE, 0, 100, 0x5000, 4096);
  a.stream = 21;
  rec_add(&st, &a);
  a.start = a.end = 200;
  a.bytes = 8192;
  rec_add(&st, &a);
  rec_counts c;
  char *buf = converted(&st, &c);
  check_counts(&c, 2, 1, 1, 0, 2);
  CHECK(strstr(buf, "\"allocator\":\"async\"") != NULL);
  const char *free_line = strstr(buf, "\"kind\":\"free\"");
  const char *second = strstr(buf, "\"size\":8192");
  CHECK(free_line && second && free_line < second);
  CHECK(strstr(buf, "\"stream\":21") != NULL);
  free(buf);
  rec_release(&st);
}

/* A mapped range that CUPTI reports twice, through the cuMemMap and cuMemUnmap callbacks and as
 * activity records of an allocation and a release (as PyTorch's expandable segments were recorded on
 * an H100), in either order: one alloc and one free, nothing counted as lost. */
static void test_mapped_ranges_reported_twice(void) {
  const uint64_t V = UINT64_C(0x300000000), W = UINT64_C(0x1940000000);
  rec_state st;
  rec_init(&st);
  rec_context(&st, CTX, 0);
  rec_record m = rec(REC_MAP, 40, 100, 100); /* the callback first */
  m.addr = V;
  m.bytes = 20 * MiB;
  rec_add(&st, &m);
  rec_record a = memory(REC_OP_ALLOCATION, REC_MEM_DEVICE, 0, 150, V, 20 * MiB);
  rec_add(&st, &a);
  rec_record u = rec(REC_UNMAP, 41, 300, 300);
  u.addr = V;
  u.bytes = 20 * MiB;
  rec_add(&st, &u);
  rec_record f = memory(REC_OP_RELEASE, REC_MEM_DEVICE, 0, 350, V, 20 * MiB);
  rec_add(&st, &f);
  a = memory(REC_OP_ALLOCATION, REC_MEM_DEVICE, 0, 500, W, 2 * MiB); /* the activity record first */
  rec_add(&st, &a);
  m = rec(REC_MAP, 42, 510, 510);
  m.addr = W;
  m.bytes = 2 * MiB;
  rec_add(&st, &m);
  f = memory(REC_OP_RELEASE, REC_MEM_DEVICE, 0, 700, W, 2 * MiB);
  rec_add(&st, &f);
  u = rec(REC_UNMAP, 43, 710, 710);
  u.addr = W;
  u.bytes = 2 * MiB;
  rec_add(&st, &u);
  rec_add_api(&st, 40, 100, 110, rec_api_name(&st, "cuMemMap"));
  rec_add_api(&st, 41, 300, 310, rec_api_name(&st, "cuMemUnmap"));
  rec_add_api(&st, 42, 510, 520, rec_api_name(&st, "cuMemMap"));
  rec_add_api(&st, 43, 710, 720, rec_api_name(&st, "cuMemUnmap"));
  rec_counts c;
  char *buf = converted(&st, &c);
  /* uncorrelated: W's allocation, written from its activity record; the duplicates are not counted */
  check_counts(&c, 2, 2, 0, 0, 1);
  /* In order: V mapped, V unmapped, W allocated, W freed; each once. */
  const char *v1 = strstr(buf, "\"kind\":\"alloc\""), *v2 = v1 ? strstr(v1 + 1, "\"kind\":\"free\"") : NULL;
  const char *w1 = v2 ? strstr(v2 + 1, "\"kind\":\"alloc\"") : NULL, *w2 = w1 ? strstr(w1 + 1, "\"kind\":\"free\"") : NULL;
  CHECK(v1 && v2 && w1 && w2);
  CHECK(v1 && strstr(v1, "\"addr\":\"0x300000000\"") < v2);
  CHECK(w1 && strstr(w1, "\"addr\":\"0x1940000000\"") < w2);
  CHECK(w2 && !strstr(w2 + 1, "\"kind\":\"alloc\"") && !strstr(w2 + 1, "\"kind\":\"free\""));
  free(buf);
  rec_release(&st);
}

static void test_strings_and_filters(void) {
  rec_state st;
  rec_init(&st);
  uint32_t a = rec_intern(&st, "kernel_a"), b = rec_intern(&st, "kernel_b");
  CHECK(a != b);
  CHECK_EQ(rec_intern(&st, "kernel_a"), a);
  CHECK_STR(rec_string(&st, b), "kernel_b");
  CHECK(rec_string(&st, 0) == NULL);
  for (int i = 0; i < 1000; i++) {
    char name[32];
    snprintf(name, sizeof name, "k%d", i);
    CHECK_EQ(rec_intern(&st, name), rec_intern(&st, name));
  }
  CHECK_EQ(st.nstr, 1002);
  rec_release(&st);
  CHECK(rec_api_relevant("cudaLaunchKernel_v7000"));
  CHECK(rec_api_relevant("cuLaunchKernelEx"));
  CHECK(rec_api_relevant("cuMemAlloc_v2"));
  CHECK(rec_api_relevant("cuMemAllocAsync"));
  CHECK(rec_api_relevant("cudaMemcpy2DAsync_v3020"));
  CHECK(rec_api_relevant("cuMemsetD32Async"));
  CHECK(rec_api_relevant("cudaStreamSynchronize_v3020"));
  CHECK(rec_api_relevant("cuMemMap"));
  CHECK(rec_api_relevant("cudaGraphLaunch_v10000"));
  CHECK(!rec_api_relevant("cudaGetDevice_v3020"));
  CHECK(!rec_api_relevant("cuCtxGetCurrent"));
  CHECK(!rec_api_relevant("cudaEventRecord_v3020"));
  CHECK(!rec_api_relevant(NULL));
}

int main(void) {
  RUN(test_conversion);
  RUN(test_lost_release_and_async);
  RUN(test_mapped_ranges_reported_twice);
  RUN(test_strings_and_filters);
  TEST_MAIN_END();
}

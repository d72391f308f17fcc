/* test_timemodel.c: every rule of the time model, on small event streams whose times are worked out by hand. */
#include "sim/timemodel.h"
#include "test.h"

int test_failures;

/* A device with round figures, so that every expected time below can be computed by hand:
 * 1 byte per ns over the host link (pinned), half that pageable, 1 us launch latency, 2 us of
 * launch overhead inside calls that wait, 0.5 us to wake up from a sync, 1 us per copy. */
static sim_device_profile prof(void) {
  sim_device_profile p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "test");
  p.total_memory = UINT64_C(1) << 30;
  p.mem_bw = 100e9;
  p.h2d_pinned_bw = p.d2h_pinned_bw = 1e9;
  p.h2d_pageable_bw = p.d2h_pageable_bw = 0.5e9; /* so the host stages at 1 byte per ns */
  p.d2d_bw = 10e9;
  p.p2p_bw = 1e9;
  p.host_copy_bw = 1e9;
  p.copy_engines = 2;
  p.copy_latency = 1000;
  p.staging_buffer = 1000;
  p.launch_overhead = 2000;
  p.launch_latency = 1000;
  p.launch_queue = 1000;
  p.sync_latency = 500;
  p.malloc_base = 10000;
  p.malloc_per_gib = 100000;
  p.free_base = 20000;
  p.map_base = 3000;
  p.unmap_base = 4000;
  p.pin_base = 5000;
  p.pin_per_gib = 1000000000;
  p.unpin_base = 7000;
  return p;
}

typedef struct run {
  sim_device_profile p;
  sim_tm_config cfg;
  sim_tm *tm;
  sim_tm_result r;
  int64_t seq;
} run;

static void start(run *x) {
  memset(x, 0, sizeof *x);
  x->p = prof();
  x->cfg = (sim_tm_config){.device = &x->p, .copy_timing = SIM_TM_TIMING_MODEL, .keep_device_waits = 1,
                           .infer_dependencies = 1, .malloc_syncs = 1, .kernel_scale = 1, .batch_size = 8};
}

static void begin(run *x) { x->tm = sim_tm_new(&x->cfg); }

static sim_event E(run *x, int kind, int64_t ts) {
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = (uint8_t)kind;
  ev.ts = ts;
  ev.seq = x->seq++;
  ev.device = 0;
  return ev;
}

static void feed(run *x, sim_event ev) { sim_tm_event(x->tm, &ev, NULL, SIM_TM_ROLE_NONE); }
static void feed_a(run *x, sim_event ev, sim_tm_alloc a, int role) { sim_tm_event(x->tm, &ev, &a, role); }

static void kernel(run *x, int64_t ts, int64_t stream, int64_t dur, int64_t api) {
  sim_event ev = E(x, SIM_EV_KERNEL, ts);
  ev.stream = stream;
  ev.dur = dur;
  ev.api_dur = api;
  ev.name = 7;
  feed(x, ev);
}

static void sync_on(run *x, int64_t ts, int64_t stream, int64_t api) {
  sim_event ev = E(x, SIM_EV_SYNC, ts);
  ev.stream = stream;
  ev.api_dur = api;
  ev.name = 9;
  feed(x, ev);
}

static void marker(run *x, int64_t ts, unsigned flags, int64_t dur) {
  sim_event ev = E(x, SIM_EV_MARKER, ts);
  ev.flags = (uint8_t)flags;
  ev.dur = dur;
  feed(x, ev);
}

static void copy(run *x, int64_t ts, int64_t stream, int dir, int mem, uint64_t size, int async) {
  sim_event ev = E(x, SIM_EV_MEMCPY, ts);
  ev.stream = stream;
  ev.dir = (uint8_t)dir;
  ev.mem = (uint8_t)mem;
  ev.size = size;
  ev.flags = async ? SIM_EVF_ASYNC : 0;
  feed(x, ev);
}

static void finish(run *x) {
  sim_tm_finish(x->tm, &x->r);
  sim_tm_free(x->tm);
  x->tm = NULL;
}

static void done(run *x) { sim_tm_result_release(&x->r); }

static int64_t step_ns(const run *x, size_t i) {
  return i < x->r.nsteps ? x->r.steps[i].end_ns - x->r.steps[i].start_ns : -1;
}

/* The breakdown tiles the predicted time: in total and in every step. */
static void check_sums(const run *x) {
  int64_t sum = 0;
  for (int c = 0; c < SIM_TM__NCLASS; c++) sum += x->r.breakdown[c];
  CHECK_EQ(sum, x->r.total_ns);
  for (size_t i = 0; i < x->r.nsteps; i++) {
    int64_t s = 0;
    for (int c = 0; c < SIM_TM__NCLASS; c++) s += x->r.steps[i].breakdown[c];
    CHECK_EQ(s, step_ns(x, i));
  }
}

/* Kernels on one stream run one after the other; a sync waits for the last; the step ends
 * after it; the critical path is the kernels, the calls, the gaps and the wake-up. */
static void test_stream_serialises(void) {
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 0, 1, 10000, 500);    /* available at 1000: runs 1000..11000 */
  kernel(&x, 1000, 1, 10000, 500); /* waits for the stream: 11000..21000 */
  sync_on(&x, 2000, 1, 100);       /* returns at 21000 + 500 = 21500 (recorded 100: 19400 later) */
  marker(&x, 2200, SIM_EVF_STEP_END, 0); /* 2200 + 19400 */
  finish(&x);
  CHECK_EQ(x.r.nsteps, 1);
  CHECK_EQ(step_ns(&x, 0), 21600);
  CHECK_EQ(x.r.total_ns, 21600);
  CHECK_EQ(x.r.breakdown[SIM_TM_COMPUTE], 19000); /* the sync began at 2000: 9000 of the first, all of the second */
  CHECK_EQ(x.r.breakdown[SIM_TM_SYNC], 500);
  CHECK_EQ(x.r.breakdown[SIM_TM_HOST], 2100);
  CHECK(x.r.nitems > 0);
  if (x.r.nitems) {
    CHECK_EQ(x.r.items[0].what, SIM_TM_W_KERNEL);
    CHECK_EQ(x.r.items[0].name, 7);
    CHECK_EQ(x.r.items[0].total_ns, 19000);
    CHECK_EQ(x.r.items[0].count, 2);
    CHECK_EQ(x.r.items[0].max_ns, 10000);
  }
  CHECK_EQ(x.r.kernels, 2);
  CHECK_EQ(x.r.syncs, 1);
  CHECK_EQ(x.r.blocked_sync_ns, 19500);
  CHECK_NEAR(x.r.step_time_s, 21600e-9, 1e-12);
  CHECK_NEAR(x.r.samples_per_s, 8 / 21600e-9, 1e-3);
  check_sums(&x);
  done(&x);
}

/* Kernels on two streams overlap: a device sync waits for the later one only. */
static void test_streams_overlap(void) {
  run x;
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 10000, 0); /* 1000..11000 */
  kernel(&x, 0, 2, 10000, 0); /* 1000..11000 too */
  sync_on(&x, 100, -1, -1);   /* device: returns at 11500 */
  finish(&x);
  CHECK_EQ(x.r.end_ns, 11500);
  CHECK_EQ(x.r.total_ns, 11500);
  check_sums(&x);
  done(&x);
}

/* One copy engine serialises a host-to-device and a device-to-host copy; two let them overlap;
 * copies in one direction always share the host link. */
static void test_copy_engines(void) {
  for (int engines = 1; engines <= 2; engines++) {
    run x;
    start(&x);
    x.p.copy_engines = engines;
    begin(&x);
    copy(&x, 0, 1, SIM_COPY_H2D, SIM_MEM_PINNED, 10000, 1); /* 1000 + 10000: runs 1000..12000 */
    copy(&x, 0, 2, SIM_COPY_D2H, SIM_MEM_PINNED, 10000, 1); /* 1000..12000, or 12000..23000 on one engine */
    sync_on(&x, 10, -1, -1);
    finish(&x);
    CHECK_EQ(x.r.end_ns, engines == 1 ? 23500 : 12500);
    CHECK_EQ(x.r.copy_busy_ns, 22000);
    check_sums(&x);
    done(&x);
  }
  run x;
  start(&x);
  begin(&x);
  copy(&x, 0, 1, SIM_COPY_H2D, SIM_MEM_PINNED, 10000, 1);
  copy(&x, 0, 2, SIM_COPY_H2D, SIM_MEM_PINNED, 10000, 1); /* same link: 12000..23000 */
  sync_on(&x, 10, -1, -1);
  finish(&x);
  CHECK_EQ(x.r.end_ns, 23500);
  done(&x);
}

/* A pageable host-to-device copy bigger than the staging buffer blocks the host while it
 * stages chunk after chunk, each waiting for the buffer to drain. */
static void test_pageable_h2d_blocks(void) {
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  /* 3 chunks of 1000 bytes, each filled by the host in 1000 ns and moved in 2000 ns (the
   * call records no duration of its own): fill 0..1000, DMA 1000..3000, fill 3000..4000, DMA
   * 4000..6000, fill 6000..7000 (the host returns), DMA 7000..9000. */
  copy(&x, 0, 1, SIM_COPY_H2D, SIM_MEM_PAGEABLE, 3000, 1);
  marker(&x, 1, SIM_EVF_STEP_END, 0);
  sync_on(&x, 2, 1, -1); /* the last chunk lands at 11000 */
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 7001);
  CHECK_EQ(x.r.end_ns, 9500);
  CHECK_EQ(x.r.blocked_copy_ns, 7000);
  CHECK_EQ(x.r.copy_busy_ns, 8000);
  check_sums(&x);
  done(&x);

  /* A small pageable copy is staged and the call returns without waiting for the stream. */
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 100000, 0); /* the stream is busy until 101000 */
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  copy(&x, 0, 1, SIM_COPY_H2D, SIM_MEM_PAGEABLE, 500, 1); /* fill 500: back at 500 */
  marker(&x, 1, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 501);
  CHECK_EQ(x.r.end_ns, 101000 + 1500); /* the DMA follows the kernel: 1000 + 500 bytes */
  check_sums(&x);
  done(&x);

  /* cudaMemcpy (not Async) from pageable memory waits for the stream before it stages. */
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 100000, 0);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  copy(&x, 0, 1, SIM_COPY_H2D, SIM_MEM_PAGEABLE, 500, 0); /* waits for 101000, fills 500 */
  marker(&x, 1, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 101501);
  CHECK_EQ(x.r.end_ns, 101500 + 1500); /* the transfer follows the fill */
  check_sums(&x);
  done(&x);
}

/* A device-to-pageable copy waits for the stream, moves chunk by chunk, and returns when the
 * host has copied the last chunk out. */
static void test_pageable_d2h_blocks(void) {
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 0, 1, 5000, 0); /* 1000..6000 */
  /* waits for the kernel; DMA 6000..8000, drain 8000..9000, DMA 9000..11000, drain 11000..12000,
   * wake 12500 */
  copy(&x, 0, 1, SIM_COPY_D2H, SIM_MEM_PAGEABLE, 2000, 1);
  marker(&x, 1, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 12501);
  CHECK_EQ(x.r.breakdown[SIM_TM_COMPUTE], 5000);
  CHECK_EQ(x.r.breakdown[SIM_TM_SYNC], 1000 + 500); /* launch latency, wake-up */
  CHECK_EQ(x.r.breakdown[SIM_TM_COPY], 6000);
  check_sums(&x);
  done(&x);
}

/* A pinned asynchronous copy overlaps a kernel on another stream and costs the host only its
 * call; a synchronous one blocks until done. */
static void test_pinned_async_overlap(void) {
  run x;
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 100000, 0);                             /* 1000..101000 */
  copy(&x, 0, 2, SIM_COPY_H2D, SIM_MEM_PINNED, 10000, 1);  /* 1000..12000; the host goes on */
  sync_on(&x, 10, 2, -1);                                  /* the copy's stream only: 12500 */
  marker(&x, 20, SIM_EVF_STEP_BEGIN | SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(x.r.steps[0].start_ns, 12510);
  CHECK_EQ(x.r.end_ns, 101000);
  check_sums(&x);
  done(&x);

  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  copy(&x, 0, 2, SIM_COPY_H2D, SIM_MEM_PINNED, 10000, 0); /* cudaMemcpy: waits for 12000, wakes 12500 */
  marker(&x, 1, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 12501);
  check_sums(&x);
  done(&x);

  /* The same call recorded as taking 50 us (its wait, on the recorded device): the model keeps
   * only the launch overhead of it and waits as it predicts. */
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  sim_event ev = E(&x, SIM_EV_MEMCPY, 0);
  ev.stream = 2, ev.dir = SIM_COPY_H2D, ev.mem = SIM_MEM_PINNED, ev.size = 10000, ev.api_dur = 50000;
  feed(&x, ev); /* call 0..2000, the copy 1000..12000, wake 12500 */
  marker(&x, 50001, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 12501);
  check_sums(&x);
  done(&x);
}

/* cudaMalloc waits for the device, then costs its base plus its size; a cached allocation is
 * free; cudaFree likewise; pool allocators that do not synchronize skip the wait. */
static void test_allocator_costs(void) {
  sim_tm_alloc one_gib = {.mallocs = 1, .malloc_bytes = UINT64_C(1) << 30};
  for (int syncs = 0; syncs <= 1; syncs++) {
    run x;
    start(&x);
    x.cfg.malloc_syncs = syncs;
    begin(&x);
    marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
    kernel(&x, 0, 1, 50000, 0); /* 1000..51000 */
    sim_event ev = E(&x, SIM_EV_ALLOC, 10);
    ev.size = UINT64_C(1) << 30;
    feed_a(&x, ev, one_gib, SIM_TM_ROLE_NONE); /* 10000 + 100000 */
    marker(&x, 20, SIM_EVF_STEP_END, 0);
    finish(&x);
    CHECK_EQ(step_ns(&x, 0), syncs ? 51000 + 110000 + 10 : 10 + 110000 + 10);
    CHECK_EQ(x.r.device_mallocs, 1);
    CHECK_EQ(x.r.breakdown[SIM_TM_ALLOC], 110000);
    check_sums(&x);
    done(&x);
  }
  /* served from the cache: nothing */
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 0, 1, 50000, 0);
  sim_event ev = E(&x, SIM_EV_ALLOC, 10);
  ev.size = 4096;
  feed_a(&x, ev, (sim_tm_alloc){0}, SIM_TM_ROLE_NONE);
  marker(&x, 20, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 20);
  CHECK_EQ(x.r.breakdown[SIM_TM_ALLOC], 0);
  done(&x);
  /* cudaFree: waits, then its base */
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 0, 1, 50000, 0);
  ev = E(&x, SIM_EV_FREE, 10);
  feed_a(&x, ev, (sim_tm_alloc){.frees = 1, .free_bytes = 4096}, SIM_TM_ROLE_NONE);
  marker(&x, 20, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 51000 + 20000 + 10);
  check_sums(&x);
  done(&x);
  /* mapping does not wait; unmapping waits for the event's stream */
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 0, 1, 50000, 0);
  ev = E(&x, SIM_EV_ALLOC, 10);
  ev.stream = 1;
  feed_a(&x, ev, (sim_tm_alloc){.maps = 2, .map_bytes = 4 << 20}, SIM_TM_ROLE_NONE); /* 6000 */
  ev = E(&x, SIM_EV_EMPTY_CACHE, 10);
  ev.stream = 1;
  feed_a(&x, ev, (sim_tm_alloc){.unmaps = 1, .unmap_bytes = 2 << 20}, SIM_TM_ROLE_NONE); /* waits for 51000 */
  marker(&x, 20, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 51000 + 4000 + 10);
  CHECK_EQ(x.r.device_maps, 2);
  check_sums(&x);
  done(&x);
  /* a recorded allocator call: its recorded time is replaced by the replayed allocator's */
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  ev = E(&x, SIM_EV_API, 0);
  ev.api_dur = 5000;
  feed_a(&x, ev, (sim_tm_alloc){0}, SIM_TM_ROLE_ALLOCATOR_CALL);
  marker(&x, 6000, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 1000);
  done(&x);
}

/* cudaMallocHost costs its base plus its size; cudaFreeHost waits for the device. */
static void test_host_pinning(void) {
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  sim_event ev = E(&x, SIM_EV_HOST_ALLOC, 0);
  ev.mem = SIM_MEM_PINNED;
  ev.addr = 42;
  ev.size = UINT64_C(1) << 29; /* half a GiB: 5000 + 0.5 s */
  feed(&x, ev);
  marker(&x, 10, SIM_EVF_STEP_END | SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 20, 1, 30000, 0); /* available at 500005020 + 1000 */
  ev = E(&x, SIM_EV_HOST_FREE, 30);
  ev.addr = 42;
  feed(&x, ev); /* waits for the kernel, then 7000 */
  marker(&x, 40, SIM_EVF_STEP_END, 0);
  ev = E(&x, SIM_EV_HOST_ALLOC, 50); /* pageable host memory: as recorded */
  ev.api_dur = 300;
  ev.addr = 43;
  feed(&x, ev);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 500005010);
  CHECK_EQ(step_ns(&x, 1), 10 + 1000 + 30000 + 7000 + 10);
  CHECK_EQ(x.r.host_pins, 1);
  CHECK_EQ(x.r.end_ns, 500005010 + 10 + 38000 + 10 + 10 + 300);
  check_sums(&x);
  done(&x);
}

/* A sync waits for the streams it names; a device sync for all of them, except those the
 * recording shows were still busy when it returned; an event sync for the event's stream. */
static void test_explicit_syncs(void) {
  run x;
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 100000, 0); /* 1000..101000 */
  kernel(&x, 0, 2, 1000, 0);   /* 1000..2000 */
  sync_on(&x, 10, 2, -1);      /* 2500 */
  marker(&x, 20, SIM_EVF_STEP_BEGIN, 0);
  sim_event ev = E(&x, SIM_EV_SYNC, 30);
  ev.flags = SIM_EVF_SYNC_EVENT;
  ev.stream = 2;
  feed(&x, ev); /* nothing left on stream 2: just the wake-up */
  sync_on(&x, 40, -1, -1); /* waits for stream 1: 101500 */
  marker(&x, 50, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(x.r.steps[0].start_ns, 2510);
  CHECK_EQ(x.r.steps[0].end_ns, 101510);
  check_sums(&x);
  done(&x);

  /* With recorded device times, streams busy past the recorded return are not waited for. */
  start(&x);
  begin(&x);
  sim_event k = E(&x, SIM_EV_KERNEL, 0);
  k.stream = 1, k.dur = 100000, k.dev_ts = 1000, k.api_dur = 0;
  feed(&x, k);
  k = E(&x, SIM_EV_KERNEL, 0);
  k.stream = 2, k.dur = 1000, k.dev_ts = 1000, k.api_dur = 0;
  feed(&x, k);
  marker(&x, 10, SIM_EVF_STEP_BEGIN, 0);
  sync_on(&x, 10, -1, 4990); /* recorded return 5000: stream 1 (busy until 101000) was not awaited */
  marker(&x, 5010, SIM_EVF_STEP_END, 0);
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 2500); /* stream 2 ends at 2000, the wake-up follows */
  done(&x);
}

/* Host time between calls is kept as recorded, after a call that took longer than recorded. */
static void test_host_gaps(void) {
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  kernel(&x, 0, 1, 10000, 0); /* 1000..11000 */
  sync_on(&x, 10, 1, 50);     /* recorded 10..60; predicted 10..11500 */
  marker(&x, 1060, SIM_EVF_STEP_END, 0); /* 1000 ns of host code after the sync: 12500 */
  finish(&x);
  CHECK_EQ(step_ns(&x, 0), 12500);
  CHECK_EQ(x.r.breakdown[SIM_TM_HOST], 10 + 1000); /* the gap before the sync and after it */
  check_sums(&x);
  done(&x);
}

/* Steps from markers that carry their recorded length (a profiler's step spans), and steps
 * that end where the next begins. */
static void test_steps(void) {
  run x;
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 10000);
  kernel(&x, 100, 1, 20000, 0);          /* 1100..21100 */
  sync_on(&x, 200, 1, 9000);             /* recorded 200..9200; predicted 200..21600: 12400 later */
  marker(&x, 10000, SIM_EVF_STEP_BEGIN, 5000); /* the first step ended at 10000 + 12400 */
  kernel(&x, 11000, 1, 10, 0);
  finish(&x);
  CHECK_EQ(x.r.nsteps, 2);
  CHECK_EQ(x.r.complete_steps, 2);
  CHECK_EQ(step_ns(&x, 0), 22400);
  CHECK_EQ(x.r.steps[0].recorded_ns, 10000);
  CHECK_EQ(step_ns(&x, 1), 5000);
  CHECK_EQ(x.r.steps[1].recorded_ns, 5000);
  CHECK_NEAR(x.r.step_time_s, (22400 + 5000) / 2 * 1e-9, 1e-12);
  CHECK_NEAR(x.r.recorded_step_time_s, 7500e-9, 1e-12);
  check_sums(&x);
  done(&x);

  /* begin markers without an end: each step ends where the next begins; the last never ends */
  start(&x);
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  marker(&x, 300, SIM_EVF_STEP_BEGIN, 0);
  marker(&x, 700, SIM_EVF_STEP_BEGIN, 0);
  marker(&x, 900, 0, 0);
  finish(&x);
  CHECK_EQ(x.r.nsteps, 3);
  CHECK_EQ(x.r.complete_steps, 2);
  CHECK_EQ(step_ns(&x, 0), 300);
  CHECK_EQ(step_ns(&x, 1), 400);
  CHECK(!x.r.steps[2].complete);
  CHECK_NEAR(x.r.step_time_s, 350e-9, 1e-15);
  done(&x);
}

/* The launch queue: a launch blocks while launch_queue operations are waiting to start. */
static void test_launch_queue(void) {
  run x;
  start(&x);
  x.p.launch_queue = 4;
  begin(&x);
  marker(&x, 0, SIM_EVF_STEP_BEGIN, 0);
  for (int i = 0; i < 6; i++) kernel(&x, i, 1, 10000, 0); /* starts 1000, 11000, 21000, ... */
  marker(&x, 6, SIM_EVF_STEP_END, 0);
  finish(&x);
  /* the 5th launch (at 4) waits for the 1st to start (1000); the 6th for the 2nd (11000) */
  CHECK_EQ(step_ns(&x, 0), 11001);
  CHECK_EQ(x.r.launch_blocks, 2);
  CHECK_EQ(x.r.blocked_launch_ns, 996 + 9999);
  check_sums(&x);
  done(&x);
}

/* Recorded device times: a start that neither the stream nor the launch explains follows the
 * operation on another stream that ended just before it; what is left is kept as a device wait. */
static void test_dependencies_and_device_waits(void) {
  for (int mode = 0; mode < 3; mode++) {
    run x;
    start(&x);
    x.cfg.kernel_scale = 2;
    x.cfg.infer_dependencies = mode == 0;
    x.cfg.keep_device_waits = mode != 2;
    begin(&x);
    sim_event a = E(&x, SIM_EV_KERNEL, 0);
    a.stream = 1, a.dur = 5000, a.dev_ts = 1000, a.api_dur = 0; /* recorded 1000..6000; now 1000..11000 */
    feed(&x, a);
    sim_event b = E(&x, SIM_EV_KERNEL, 10);
    b.stream = 2, b.dur = 1000, b.dev_ts = 6000, b.api_dur = 0; /* recorded right after a */
    feed(&x, b);
    sync_on(&x, 20, 2, -1);
    finish(&x);
    /* inferred: b follows a (11000..13000); not inferred: b keeps its recorded wait of 4990
     * after it could start (6000..8000); dropped: 1010..3010. The program ends with a (11000)
     * or with the sync after b. */
    CHECK_EQ(x.r.inferred_dependencies, mode == 0 ? 1 : 0);
    CHECK_EQ(x.r.device_waits, mode == 1 ? 1 : 0);
    CHECK_EQ(x.r.device_wait_ns, mode == 1 ? 4990 : 0);
    CHECK_EQ(x.r.end_ns, mode == 0 ? 13500 : 11000);
    check_sums(&x);
    done(&x);
  }
  /* the stream-2 sync alone shows the difference */
  for (int mode = 0; mode < 3; mode++) {
    run x;
    start(&x);
    x.cfg.kernel_scale = 2;
    x.cfg.infer_dependencies = mode == 0;
    x.cfg.keep_device_waits = mode != 2;
    begin(&x);
    sim_event a = E(&x, SIM_EV_KERNEL, 0);
    a.stream = 1, a.dur = 5000, a.dev_ts = 1000, a.api_dur = 0;
    feed(&x, a);
    sim_event b = E(&x, SIM_EV_KERNEL, 10);
    b.stream = 2, b.dur = 1000, b.dev_ts = 6000, b.api_dur = 0;
    feed(&x, b);
    marker(&x, 20, SIM_EVF_STEP_BEGIN, 0);
    sync_on(&x, 20, 2, -1);
    marker(&x, 30, SIM_EVF_STEP_END, 0);
    finish(&x);
    int64_t wake = mode == 0 ? 13500 : mode == 1 ? 8500 : 3510;
    CHECK_EQ(x.r.steps[0].end_ns, wake + 10);
    check_sums(&x);
    done(&x);
  }
}

/* Copies take recorded durations when asked; the prediction is compared with the recording. */
static void test_copy_timing_and_stats(void) {
  for (int recorded = 0; recorded <= 1; recorded++) {
    run x;
    start(&x);
    x.cfg.copy_timing = recorded ? SIM_TM_TIMING_RECORDED : SIM_TM_TIMING_MODEL;
    begin(&x);
    sim_event ev = E(&x, SIM_EV_MEMCPY, 0);
    ev.stream = 1, ev.dir = SIM_COPY_H2D, ev.mem = SIM_MEM_PINNED, ev.size = 2 << 20, ev.flags = SIM_EVF_ASYNC;
    ev.dur = 4000000; /* recorded: 4 ms; modeled: 1000 + 2097152 */
    feed(&x, ev);
    sync_on(&x, 10, 1, -1);
    finish(&x);
    CHECK_EQ(x.r.end_ns, 1000 + (recorded ? 4000000 : 1000 + 2097152) + 500);
    const sim_tm_copy_stats *cs = &x.r.copies[SIM_TM_CB_H2D_PINNED][1];
    CHECK_EQ(cs->n, 1);
    CHECK_EQ(cs->recorded_ns, 4000000);
    CHECK_EQ(cs->predicted_ns, 1000 + 2097152);
    CHECK_NEAR(cs->abs_rel_err_sum, (4000000.0 - 2098152.0) / 4000000.0, 1e-9);
    done(&x);
  }
  /* device-to-device copies run on their stream at the device's copy rate */
  run x;
  start(&x);
  begin(&x);
  copy(&x, 0, 1, SIM_COPY_D2D, SIM_MEM_DEVICE, 100000, 0); /* 1000 + 10000: 1000..12000, not waited for */
  marker(&x, 1, SIM_EVF_STEP_BEGIN | SIM_EVF_STEP_END, 0);
  sync_on(&x, 2, 1, -1);
  finish(&x);
  CHECK_EQ(x.r.steps[0].start_ns, 1);
  CHECK_EQ(x.r.end_ns, 12500);
  done(&x);
}

/* A duration set by a scenario replaces a kernel's recorded one. */
static int64_t half(void *arg, const sim_event *ev) {
  (void)arg;
  return ev->kind == SIM_EV_KERNEL ? ev->dur / 2 : -1;
}

static void test_duration_override(void) {
  run x;
  start(&x);
  x.cfg.duration = half;
  begin(&x);
  kernel(&x, 0, 1, 10000, 0); /* 1000..6000 */
  sync_on(&x, 10, 1, -1);
  finish(&x);
  CHECK_EQ(x.r.end_ns, 6500);
  CHECK_EQ(x.r.compute_busy_ns, 5000);
  done(&x);
}

/* The program's end waits for work the device still has. */
static void test_device_tail(void) {
  run x;
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 10000, 0);
  finish(&x);
  CHECK_EQ(x.r.end_ns, 11000);
  CHECK_EQ(x.r.breakdown[SIM_TM_COMPUTE], 10000);
  CHECK_EQ(x.r.breakdown[SIM_TM_SYNC], 1000 - 0); /* launch latency */
  check_sums(&x);
  done(&x);
}

/* Every critical-path item, with its total, occurrences and largest occurrence: kernels by name
 * (found by walking back from a sync), the host's gaps, calls by kind (one of a kind the model
 * does not know too) and API calls by name; they tile the predicted time. */
static void check_item(const run *x, size_t i, int what, int kind, int64_t name, int64_t total, int64_t count,
                       int64_t max, int64_t max_seq) {
  CHECK(i < x->r.nitems);
  if (i >= x->r.nitems) return;
  const sim_tm_item *it = &x->r.items[i];
  CHECK_EQ(it->cls, what == SIM_TM_W_KERNEL ? SIM_TM_COMPUTE : what == SIM_TM_W_SYNC ? SIM_TM_SYNC : SIM_TM_HOST);
  CHECK_EQ(it->what, what);
  CHECK_EQ(it->kind, kind);
  CHECK_EQ(it->name, name);
  CHECK_EQ(it->total_ns, total);
  CHECK_EQ(it->count, count);
  CHECK_EQ(it->max_ns, max);
  CHECK_EQ(it->max_seq, max_seq);
}

static void test_critical_path_items(void) {
  run x;
  start(&x);
  x.cfg.top_items = 100;
  begin(&x);
  kernel(&x, 0, 1, 10000, 500); /* seq 0, name 7: runs 1000..11000 */
  sim_event k = E(&x, SIM_EV_KERNEL, 1000); /* seq 1, name 8: 11000..15000 */
  k.stream = 1, k.dur = 4000, k.api_dur = 500, k.name = 8;
  feed(&x, k);
  sim_event odd = E(&x, 40, 2000); /* seq 2: a kind the model does not know: its call's own time */
  odd.api_dur = 300;
  feed(&x, odd);
  sim_event api = E(&x, SIM_EV_API, 2400); /* seq 3 */
  api.api_dur = 100, api.name = 11;
  feed(&x, api);
  sync_on(&x, 3000, 1, 100); /* seq 4: waits 3000..15000 for both kernels, wakes up at 15500 */
  finish(&x);
  CHECK_EQ(x.r.total_ns, 15500);
  CHECK_EQ(x.r.breakdown[SIM_TM_COMPUTE], 12000);
  CHECK_EQ(x.r.breakdown[SIM_TM_HOST], 3000);
  CHECK_EQ(x.r.breakdown[SIM_TM_SYNC], 500);
  CHECK_EQ(x.r.nitems, 7);
  check_item(&x, 0, SIM_TM_W_KERNEL, SIM_EV_KERNEL, 7, 8000, 1, 8000, 0);
  check_item(&x, 1, SIM_TM_W_KERNEL, SIM_EV_KERNEL, 8, 4000, 1, 4000, 1);
  check_item(&x, 2, SIM_TM_W_HOST, 0, 0, 1600, 4, 500, 1); /* gaps before seq 1..4 */
  check_item(&x, 3, SIM_TM_W_CALL, SIM_EV_KERNEL, 0, 1000, 2, 500, 0);
  check_item(&x, 4, SIM_TM_W_SYNC, SIM_EV_SYNC, 9, 500, 1, 500, 4);
  check_item(&x, 5, SIM_TM_W_CALL, 40, 0, 300, 1, 300, 2);
  check_item(&x, 6, SIM_TM_W_CALL, SIM_EV_API, 11, 100, 1, 100, 3);
  int64_t sum = 0;
  for (size_t i = 0; i < x.r.nitems; i++) sum += x.r.items[i].total_ns;
  CHECK_EQ(sum, x.r.total_ns);
  check_sums(&x);
  done(&x);
}

/* A walk back reaches the edge of the ring of recent operations (65,536 of them, TM_OP_RING):
 * two devices, one stream each, take 80,000 back-to-back kernels in turn (each device's queue
 * holds them all), then the host waits for both. The walk along device 1's chain finds every
 * operation still in the ring, kernels 14,464 to 79,999; kernel 14,465's predecessor (14,463)
 * has left it, so the wait before that kernel's start is a device wait. */
/* hint: the events the model is told it will get (a long replay's ring is in huge pages: the same
 * predictions) */
static void op_ring_edge(int64_t hint) {
  run x;
  start(&x);
  x.p.launch_queue = 65536;
  x.cfg.events_hint = hint;
  begin(&x);
  for (int64_t k = 0; k < 80000; k++) { /* kernel k: device k % 2, its k / 2-th there */
    sim_event ev = E(&x, SIM_EV_KERNEL, k);
    ev.device = (int16_t)(k % 2), ev.stream = 0, ev.dur = 1000, ev.api_dur = 0, ev.name = 7;
    feed(&x, ev);
  }
  sim_event s = E(&x, SIM_EV_SYNC, 80000); /* every device; no recorded duration */
  s.device = -1, s.stream = -1, s.name = 9;
  feed(&x, s);
  finish(&x);
  /* device 1's last kernel ends at 1 + 1000 (launch latency) + 40000 * 1000; the wake-up follows */
  CHECK_EQ(x.r.total_ns, 40001001 + 500);
  CHECK_EQ(x.r.breakdown[SIM_TM_HOST], 80000); /* the gaps between launches, 1 ns each */
  /* kernels 14,465 to 79,999 of device 1: 32,768 of them, from 1 + 1000 + 7232 * 1000 on */
  CHECK_EQ(x.r.breakdown[SIM_TM_COMPUTE], 32768 * 1000);
  CHECK_EQ(x.r.breakdown[SIM_TM_SYNC], 7233001 - 80000 + 500); /* the device wait, the wake-up */
  CHECK(x.r.nitems >= 3);
  if (x.r.nitems >= 3) {
    CHECK_EQ(x.r.items[0].what, SIM_TM_W_KERNEL);
    CHECK_EQ(x.r.items[0].count, 32768);
    CHECK_EQ(x.r.items[1].what, SIM_TM_W_DEVICE_WAIT);
    CHECK_EQ(x.r.items[1].total_ns, 7233001 - 80000);
    CHECK_EQ(x.r.items[1].max_seq, 14465); /* the kernel whose predecessor left the ring */
  }
  check_sums(&x);
  done(&x);
}
static void test_op_ring_edge(void) {
  op_ring_edge(0);
  op_ring_edge(80001);
}

/* The range the model follows (docs/timemodel.md, "The range it follows"): times counted from
 * 1970 are in it, and the model stops, saying at which event and why, at a time or duration
 * out of it, or when what it predicts leaves it; every sum and difference then stays in 64 bits
 * (the sanitizer build checks that these runs overflow nothing). */
#define T61 (INT64_C(1) << 61)
#define D56 (INT64_C(1) << 56)
#define LONG_OP INT64_C(4400000000000000) /* a kernel's duration below the bound on one operation */

static void check_stopped(run *x, int64_t seq, const char *why) {
  finish(x);
  CHECK(x->r.stopped);
  CHECK_EQ(x->r.stopped_seq, seq);
  CHECK(strstr(x->r.stopped_why, why) != NULL);
  if (!strstr(x->r.stopped_why, why)) fprintf(stderr, "  stopped: %s\n", x->r.stopped_why);
  done(x);
}

static void test_range_epoch_times(void) {
  run x;
  start(&x);
  begin(&x);
  const int64_t t0 = INT64_C(1795000000000000000); /* 2026, counted from 1970 */
  kernel(&x, t0, 1, 10000, 0);
  sync_on(&x, t0 + 10, 1, -1);
  finish(&x);
  CHECK(!x.r.stopped);
  CHECK_EQ(x.r.start_ns, t0);
  CHECK_EQ(x.r.end_ns, t0 + 11500); /* launch latency, the kernel, the wake-up */
  check_sums(&x);
  done(&x);
}

static void test_range_recorded_fields(void) {
  run x;
  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 10000, 0);
  kernel(&x, T61, 1, 10000, 0); /* the host's time: out */
  kernel(&x, 20, 1, 10000, 0);  /* passed over */
  check_stopped(&x, 1, "its ts of 2305843009213693952 ns lies outside +-2^61 ns");

  start(&x);
  begin(&x);
  kernel(&x, -T61 - 1, 1, 10000, 0); /* the first event */
  check_stopped(&x, 0, "its ts of -2305843009213693953 ns");

  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 10000, 0);
  kernel(&x, 10, 1, 10000, D56); /* a kernel's call: the common path checks it */
  check_stopped(&x, 1, "its api_dur of 72057594037927936 ns lies outside +-2^56 ns");

  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 10000, 0);
  sim_event ev = E(&x, SIM_EV_KERNEL, 10);
  ev.stream = 1;
  ev.dur = 10000;
  ev.dev_ts = T61;
  feed(&x, ev);
  check_stopped(&x, 1, "its dev_ts of");

  start(&x);
  begin(&x);
  kernel(&x, 0, 1, 10000, 0);
  ev = E(&x, SIM_EV_SYNC, 10);
  ev.stream = 1;
  ev.dur = D56;
  feed(&x, ev);
  check_stopped(&x, 1, "its dur of 72057594037927936 ns");

  start(&x); /* the largest in range: taken, each operation held to its bound */
  begin(&x);
  kernel(&x, T61 - 100000, 1, D56 - 1, D56 - 1);
  sync_on(&x, T61 - 1, 1, D56 - 1);
  finish(&x);
  CHECK(!x.r.stopped);
  check_sums(&x);
  done(&x);
}

static void test_range_predictions(void) {
  run x;
  /* One stream's kernels end past 2^61 + 2^60 ns while the host's time stands still. */
  start(&x);
  begin(&x);
  int64_t i = 0;
  for (; i < 400; i++) kernel(&x, T61 - 1000, 1, LONG_OP, 0);
  check_stopped(&x, 262, "a device operation ends past 2^61 + 2^60 ns");

  /* The host waits for each: its predicted time runs ahead of the recorded one until the
   * difference passes 2^60 ns. */
  start(&x);
  begin(&x);
  for (i = 0; i < 600; i++) {
    kernel(&x, 0, 1, LONG_OP, 0);
    sync_on(&x, 0, 1, -1);
  }
  finish(&x);
  CHECK(x.r.stopped);
  CHECK(strstr(x.r.stopped_why, "the predicted host time runs more than 2^60 ns") != NULL);
  CHECK(x.r.stopped_seq > 500 && x.r.stopped_seq < 600);
  done(&x);

  /* Kernels on as many streams run side by side: their busy time sums past 2^63 ns. */
  start(&x);
  begin(&x);
  for (i = 0; i < 2200; i++) kernel(&x, 0, 100 + i, LONG_OP, 0);
  check_stopped(&x, 2096, "the time it sums (busy or blocked) passes 2^63 ns");
}

/* A kernel on stream -1 of device 0 first: its key + 1 is the "none" the stream cache starts
 * with (it was taken for a hit on a stream not looked up yet: a null device). */
static void test_stream_minus_one_first(void) {
  run x;
  start(&x);
  begin(&x);
  kernel(&x, 0, -1, 10000, 0);
  kernel(&x, 10, 1, 10000, 0);
  kernel(&x, 20, -1, 10000, 0);
  finish(&x);
  CHECK(!x.r.stopped);
  CHECK_EQ(x.r.end_ns, 21000); /* the two kernels on stream -1 one after the other */
  check_sums(&x);
  done(&x);
}

/* Two streams whose look-up keys are the same (stream 0 of device 1, stream 2^56 of device 0:
 * a key xors the device into the handle's top byte) stay two streams: a sync of device 0 waits
 * for its own stream's kernel only. They were one stream, of device 1, and the sync waited for
 * nothing. */
static void test_streams_sharing_a_key(void) {
  run x;
  start(&x);
  begin(&x);
  sim_event a = E(&x, SIM_EV_KERNEL, 0);
  a.device = 1, a.stream = 0, a.dur = 100000, a.name = 7;
  feed(&x, a); /* 1000..101000 on device 1 */
  sim_event b = E(&x, SIM_EV_KERNEL, 5);
  b.device = 0, b.stream = INT64_C(1) << 56, b.dur = 10000, b.name = 7;
  feed(&x, b); /* 1005..11005 on device 0 */
  sim_event sy = E(&x, SIM_EV_SYNC, 10);
  sy.device = 0, sy.stream = -1, sy.name = 9;
  feed(&x, sy); /* waits until 11005, wakes 500 later */
  finish(&x);
  CHECK_EQ(x.r.blocked_sync_ns, 11505 - 10);
  CHECK_EQ(x.r.end_ns, 101000);
  check_sums(&x);
  done(&x);
}

/* A step numbered 2^31 - 1 (the largest a trace holds): the next unnumbered step took its
 * number plus one, past int32 (undefined behaviour, found by fuzz_lua); it keeps it. */
static void test_last_step_number(void) {
  run x;
  start(&x);
  begin(&x);
  sim_event m = E(&x, SIM_EV_MARKER, 0);
  m.flags = SIM_EVF_STEP_BEGIN, m.step = INT32_MAX;
  feed(&x, m);
  kernel(&x, 10, 1, 1000, 0);
  marker(&x, 5000, SIM_EVF_STEP_BEGIN, -1); /* unnumbered */
  marker(&x, 9000, SIM_EVF_STEP_END, -1);
  finish(&x);
  CHECK_EQ(x.r.nsteps, 2);
  CHECK_EQ(x.r.steps[0].step, INT32_MAX);
  CHECK_EQ(x.r.steps[1].step, INT32_MAX);
  done(&x);
}

int main(void) {
  RUN(test_stream_serialises);
  RUN(test_streams_overlap);
  RUN(test_copy_engines);
  RUN(test_pageable_h2d_blocks);
  RUN(test_pageable_d2h_blocks);
  RUN(test_pinned_async_overlap);
  RUN(test_allocator_costs);
  RUN(test_host_pinning);
  RUN(test_explicit_syncs);
  RUN(test_host_gaps);
  RUN(test_steps);
  RUN(test_launch_queue);
  RUN(test_dependencies_and_device_waits);
  RUN(test_copy_timing_and_stats);
  RUN(test_duration_override);
  RUN(test_device_tail);
  RUN(test_critical_path_items);
  RUN(test_op_ring_edge);
  RUN(test_range_epoch_times);
  RUN(test_range_recorded_fields);
  RUN(test_range_predictions);
  RUN(test_stream_minus_one_first);
  RUN(test_streams_sharing_a_key);
  RUN(test_last_step_number);
  TEST_MAIN_END();
}

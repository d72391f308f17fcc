/* test_device_scaling.c: copy times fitted from recorded copies, and kernels scaled to another device by what bounds them. */
#include "engine/time_observer.h"
#include "sim/copyfit.h"
#include "sim/timemodel.h"
#include "test.h"

int test_failures;

static sim_event copy_ev(int dir, int mem, uint64_t size, int64_t dur) {
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = SIM_EV_MEMCPY;
  ev.dir = (uint8_t)dir;
  ev.mem = (uint8_t)mem;
  ev.size = size;
  ev.dur = dur;
  return ev;
}

static sim_device_profile prof(const char *name, double bf16, double tf32, double fp32, double mem_bw) {
  sim_device_profile p;
  sim_device_defaults(&p);
  snprintf(p.name, sizeof p.name, "%s", name);
  p.total_memory = UINT64_C(1) << 34;
  p.bf16_flops = bf16, p.tf32_flops = tf32, p.fp32_flops = fp32, p.mem_bw = mem_bw;
  p.h2d_pinned_bw = p.d2h_pinned_bw = 20e9;
  p.h2d_pageable_bw = p.d2h_pageable_bw = 10e9;
  p.d2d_bw = 500e9;
  return p;
}

/* Exact latency + bytes / bandwidth is found again; the class's total is kept by every rule. */
static void test_fit_rules(void) {
  sim_device_profile p = prof("rec", 300e12, 150e12, 20e12, 2000e12);
  sim_copy_fit f;
  sim_copy_fit_init(&f);
  /* pinned H2D >= 1 MiB: 5 us + bytes at 12 GB/s (12 bytes per ns) */
  for (uint64_t mb = 1; mb <= 8; mb++) {
    uint64_t bytes = mb << 20;
    sim_event ev = copy_ev(SIM_COPY_H2D, SIM_MEM_PINNED, bytes, 5000 + (int64_t)(bytes / 12));
    sim_copy_fit_add(&f, &ev);
  }
  /* pageable D2H < 1 MiB, all one size: the profile's bandwidth, the latency what remains */
  for (int i = 0; i < 4; i++) {
    sim_event ev = copy_ev(SIM_COPY_D2H, SIM_MEM_PAGEABLE, 1000, 2000 + i * 100);
    sim_copy_fit_add(&f, &ev);
  }
  /* D2D < 1 MiB, shrinking with size (noise): a negative slope takes the profile's bandwidth,
   * which leaves a negative latency (75 ns mean less 250000 B at 500 B/ns): through the origin */
  sim_event d1 = copy_ev(SIM_COPY_D2D, SIM_MEM_DEVICE, 100000, 100), d2 = copy_ev(SIM_COPY_D2D, SIM_MEM_DEVICE, 400000, 50);
  sim_copy_fit_add(&f, &d1);
  sim_copy_fit_add(&f, &d2);
  /* a kernel and a copy without a duration are ignored */
  sim_event k = copy_ev(SIM_COPY_H2D, SIM_MEM_PINNED, 4096, 0);
  sim_copy_fit_add(&f, &k);
  k.kind = SIM_EV_KERNEL, k.dur = 100;
  sim_copy_fit_add(&f, &k);
  CHECK_EQ(f.copies, 14);
  sim_copy_fit_solve(&f, &p);

  const sim_copy_fit_class *c = &f.c[SIM_TM_CB_H2D_PINNED][1];
  CHECK_EQ(c->rule, SIM_COPY_FIT_LSQ);
  CHECK(c->latency_ns > 4990 && c->latency_ns < 5010);
  CHECK(c->bw > 11.99e9 && c->bw < 12.01e9);
  CHECK(c->rms_resid_ns < 1);
  CHECK_EQ(sim_copy_fit_time(&f, SIM_COPY_H2D, SIM_MEM_PINNED, 3u << 20), 5000 + (3 << 20) / 12);

  c = &f.c[SIM_TM_CB_D2H_PAGEABLE][0];
  CHECK_EQ(c->rule, SIM_COPY_FIT_LATENCY);
  CHECK(c->bw == 10e9);
  CHECK(c->latency_ns > 2150 - 100 - 0.5 && c->latency_ns < 2150 - 100 + 0.5); /* mean 2150 less 1000 B at 10 B/ns */

  c = &f.c[SIM_TM_CB_D2D][0];
  CHECK_EQ(c->rule, SIM_COPY_FIT_ORIGIN);
  CHECK(c->latency_ns == 0);
  CHECK_EQ(sim_copy_fit_time(&f, SIM_COPY_D2D, SIM_MEM_DEVICE, 100000), 30); /* 150 ns over 500000 B */
  CHECK_EQ(sim_copy_fit_time(&f, SIM_COPY_D2D, SIM_MEM_DEVICE, 400000), 120);

  /* a class with no copies of its own: from the other host memory kind, in the profile's ratio */
  c = &f.c[SIM_TM_CB_H2D_PAGEABLE][1];
  CHECK_EQ(c->rule, SIM_COPY_FIT_DERIVED);
  CHECK(c->bw > 5.99e9 && c->bw < 6.01e9);
  CHECK(f.c[SIM_TM_CB_D2H_PINNED][0].valid);
  CHECK_EQ(f.c[SIM_TM_CB_D2H_PINNED][0].rule, SIM_COPY_FIT_DERIVED);
  /* and none where neither kind has copies */
  CHECK_EQ(sim_copy_fit_time(&f, SIM_COPY_H2D, SIM_MEM_PINNED, 1000), -1);
}

/* The time model takes fitted copy times on the recorded device, and reports them against the recording. */
static void test_fit_in_model(void) {
  sim_device_profile p = prof("rec", 300e12, 150e12, 20e12, 2000e12);
  sim_copy_fit f;
  sim_copy_fit_init(&f);
  sim_event a = copy_ev(SIM_COPY_H2D, SIM_MEM_PINNED, 2 << 20, 200000), b = copy_ev(SIM_COPY_H2D, SIM_MEM_PINNED, 4 << 20, 380000);
  sim_copy_fit_add(&f, &a);
  sim_copy_fit_add(&f, &b);
  sim_copy_fit_solve(&f, &p);
  for (int timing = SIM_TM_TIMING_MODEL; timing <= SIM_TM_TIMING_PROFILE; timing++) {
    sim_tm_config cfg = {.device = &p, .copy_timing = timing, .keep_device_waits = 1, .kernel_scale = 1, .copy_fit = &f,
                         .recorded_device = &p};
    sim_tm *tm = sim_tm_new(&cfg);
    a.seq = 0, b.seq = 1, a.ts = 0, b.ts = 10, a.stream = b.stream = 1, a.flags = b.flags = SIM_EVF_ASYNC;
    sim_tm_event(tm, &a, NULL, SIM_TM_ROLE_NONE);
    sim_tm_event(tm, &b, NULL, SIM_TM_ROLE_NONE);
    sim_tm_result r;
    sim_tm_finish(tm, &r);
    const sim_tm_copy_stats *cs = &r.copies[SIM_TM_CB_H2D_PINNED][1];
    CHECK_EQ(cs->recorded_ns, 580000);
    if (timing == SIM_TM_TIMING_MODEL) {
      CHECK(r.copies_fitted);
      CHECK(cs->predicted_ns >= 579999 && cs->predicted_ns <= 580001); /* two points: exact */
    } else {
      CHECK(!r.copies_fitted); /* the profile's 20 GB/s */
      int64_t want = 2 * p.copy_latency + (6 << 20) / 20;
      CHECK(cs->predicted_ns >= want - 2 && cs->predicted_ns <= want + 2);
    }
    sim_tm_result_release(&r);
    sim_tm_free(tm);
  }
}

/* Kernel names: what bounds each. */
static void test_kernel_bounds(void) {
  CHECK_EQ(time_observer_kernel_bound("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn"), SIM_TM_KB_COMPUTE16);
  CHECK_EQ(time_observer_kernel_bound("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(...)"),
           SIM_TM_KB_TF32);
  CHECK_EQ(time_observer_kernel_bound("ampere_sgemm_128x64_nn"), SIM_TM_KB_FP32);
  CHECK_EQ(time_observer_kernel_bound("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4> >"), SIM_TM_KB_COMPUTE16);
  CHECK_EQ(time_observer_kernel_bound("void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4>"), SIM_TM_KB_MEMORY);
  CHECK_EQ(time_observer_kernel_bound("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"),
           SIM_TM_KB_MEMORY);
  CHECK_EQ(time_observer_kernel_bound("void at::native::reduce_kernel<512, 1>"), SIM_TM_KB_MEMORY);
  CHECK_EQ(time_observer_kernel_bound("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"),
           SIM_TM_KB_KEEP);
  CHECK_EQ(time_observer_kernel_bound("triton__0d1d2d3d"), SIM_TM_KB_MEMORY);
  CHECK_EQ(time_observer_kernel_bound(""), SIM_TM_KB_MEMORY);
}

static int bound_by_name(void *arg, const sim_event *ev) {
  (void)arg;
  return (int)ev->name; /* the tests' kernels carry their bound as their name id */
}

/* Recorded kernels on another device: each by its bound's ratio; short ones and kept ones as recorded. */
static void test_scaling(void) {
  sim_device_profile rec = prof("rec", 300e12, 150e12, 20e12, 2000e9), dev = prof("dev", 100e12, 50e12, 40e12, 250e9);
  int64_t expect[3] = {0, 0, 0};
  /* kernels: (bound, recorded duration) on one stream, back to back */
  const struct { int bound; int64_t dur; } ks[] = {
    {SIM_TM_KB_COMPUTE16, 100000}, {SIM_TM_KB_TF32, 100000}, {SIM_TM_KB_FP32, 100000},
    {SIM_TM_KB_MEMORY, 100000},    {SIM_TM_KB_KEEP, 100000}, {SIM_TM_KB_MEMORY, 4000}, /* short: kept */
  };
  /* the range: each kernel at the faster (its compute ratio here, all below 8) or the slower
   * (the memory bandwidth's) of its bounds */
  const double classified[] = {3, 3, 0.5, 8, 1, 1}, compute[] = {3, 3, 0.5, 0.5, 1, 1}, memory[] = {8, 8, 8, 8, 1, 1};
  for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
    expect[0] += (int64_t)(ks[i].dur * classified[i]);
    expect[1] += (int64_t)(ks[i].dur * compute[i]);
    expect[2] += (int64_t)(ks[i].dur * memory[i]);
  }
  for (int policy = 0; policy < 3; policy++) {
    sim_tm_config cfg = {.device = &dev, .copy_timing = SIM_TM_TIMING_MODEL, .keep_device_waits = 1, .kernel_scale = 1,
                         .recorded_device = &rec, .kernel_bound = bound_by_name, .scale_policy = policy};
    sim_tm *tm = sim_tm_new(&cfg);
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
      sim_event ev;
      sim_event_init(&ev);
      ev.kind = SIM_EV_KERNEL;
      ev.seq = (int64_t)i;
      ev.ts = (int64_t)i;
      ev.stream = 1;
      ev.device = 0;
      ev.dur = ks[i].dur;
      ev.name = ks[i].bound;
      sim_tm_event(tm, &ev, NULL, SIM_TM_ROLE_NONE);
    }
    sim_tm_result r;
    sim_tm_finish(tm, &r);
    CHECK(r.device_scaled);
    CHECK(r.bound_ratio[SIM_TM_KB_COMPUTE16] == 3 && r.bound_ratio[SIM_TM_KB_MEMORY] == 8);
    CHECK_EQ(r.compute_busy_ns, expect[policy]);
    sim_tm_result_release(&r);
    sim_tm_free(tm);
  }
  /* the recorded device itself: nothing scaled */
  sim_tm_config same = {.device = &rec, .keep_device_waits = 1, .kernel_scale = 1, .recorded_device = &rec,
                        .kernel_bound = bound_by_name};
  sim_tm *tm = sim_tm_new(&same);
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = SIM_EV_KERNEL, ev.stream = 1, ev.device = 0, ev.dur = 100000, ev.name = SIM_TM_KB_MEMORY;
  sim_tm_event(tm, &ev, NULL, SIM_TM_ROLE_NONE);
  sim_tm_result r;
  sim_tm_finish(tm, &r);
  CHECK(!r.device_scaled);
  CHECK_EQ(r.compute_busy_ns, 100000);
  sim_tm_result_release(&r);
  sim_tm_free(tm);
}

int main(void) {
  RUN(test_fit_rules);
  RUN(test_fit_in_model);
  RUN(test_kernel_bounds);
  RUN(test_scaling);
  TEST_MAIN_END();
}

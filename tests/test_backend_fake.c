/* test_backend_fake.c: the real-GPU code (probe, device primitive, replay run, calibration) on a pretend GPU. */
#include "cuda/backend_cuda.h"
#include "cuda/calibrate.h"
#include "cuda/cudart.h"
#include "fake_cuda.h"
#include "test.h"

int test_failures;

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

typedef struct trace {
  sim_event *v;
  size_t n;
  replay_array_source arr;
} trace;

static int open_events(void *arg, replay_source *src, char *err, size_t errlen) {
  trace *t = arg;
  (void)err, (void)errlen;
  *src = replay_array_source_init(&t->arr, t->v, t->n);
  return 0;
}

static int gpu_memory(void *arg, int device, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen) {
  (void)arg;
  return cudart_mem_info(device, free_bytes, total_bytes, err, errlen);
}

static sim_event ev(int kind, int64_t ts) {
  sim_event e;
  sim_event_init(&e);
  e.kind = (uint8_t)kind;
  e.ts = ts;
  e.device = 0;
  return e;
}

/* Two marked steps; per step: 3 allocations of whole pages, copies of every kind (a 300 MiB
 * device-to-device one in two pieces), a memset, two 2 ms kernels on stream 5 and one on the
 * default stream, a pinned host buffer, synchronizations, and the frees. */
static size_t build(sim_event *v) {
  size_t n = 0;
  for (int s = 0; s < 2; s++) {
    int64_t t = s * 10000000;
    sim_event m = ev(SIM_EV_MARKER, t);
    m.flags = SIM_EVF_STEP_BEGIN;
    m.device = -1;
    v[n++] = m;
    for (int a = 0; a < 3; a++) {
      sim_event e = ev(SIM_EV_ALLOC, t + 10 + a);
      e.addr = (uint64_t)(100 + a);
      e.size = (uint64_t)(a + 1) * 64 * MiB;
      e.stream = 5;
      v[n++] = e;
    }
    sim_event h = ev(SIM_EV_HOST_ALLOC, t + 20);
    h.addr = 7;
    h.size = 8 * MiB;
    h.mem = SIM_MEM_PINNED;
    h.device = -1;
    v[n++] = h;
    sim_event c = ev(SIM_EV_MEMCPY, t + 30);
    c.dir = SIM_COPY_H2D, c.mem = SIM_MEM_PINNED, c.size = 8 * MiB, c.flags = SIM_EVF_ASYNC, c.stream = 5;
    v[n++] = c;
    c.dir = SIM_COPY_D2H, c.mem = SIM_MEM_PAGEABLE, c.size = 4 * MiB, c.flags = 0, c.stream = 0, c.ts = t + 31;
    v[n++] = c;
    c.dir = SIM_COPY_D2D, c.mem = SIM_MEM_DEVICE, c.size = 300 * MiB, c.flags = SIM_EVF_ASYNC, c.stream = 5, c.ts = t + 32;
    v[n++] = c;
    sim_event z = ev(SIM_EV_MEMSET, t + 40);
    z.size = 16 * MiB;
    z.stream = 5;
    z.flags = SIM_EVF_ASYNC;
    v[n++] = z;
    for (int k = 0; k < 3; k++) {
      sim_event kk = ev(SIM_EV_KERNEL, t + 50 + k);
      kk.dur = 2000000;
      kk.stream = k < 2 ? 5 : 0;
      v[n++] = kk;
    }
    sim_event y = ev(SIM_EV_SYNC, t + 60);
    y.stream = 5;
    v[n++] = y;
    sim_event hf = ev(SIM_EV_HOST_FREE, t + 70);
    hf.addr = 7;
    hf.device = -1;
    v[n++] = hf;
    for (int a = 0; a < 3; a++) {
      sim_event f = ev(SIM_EV_FREE, t + 80 + a);
      f.addr = (uint64_t)(100 + a);
      v[n++] = f;
    }
    sim_event d = ev(SIM_EV_SYNC, t + 90);
    d.stream = -1;
    v[n++] = d;
  }
  for (size_t i = 0; i < n; i++) v[i].seq = (int64_t)i;
  return n;
}

/* Plans and runs trace t under alloc (a model, or async: the driver's own pool) as `memplay replay
 * --backend cuda` does, through a store-less session. */
static int plan_and_run(trace *t, const char *alloc, uint64_t capacity, backend_plan *p, backend_measured *m,
                        char *err, size_t errlen) {
  static char name[] = "synthetic";
  store_trace meta = {.name = name};
  session *ses = session_new(NULL);
  session_request req;
  session_request_init(&req);
  req.trace = &meta;
  req.allocator = alloc;
  req.no_device = 1;
  req.capacity = capacity;
  session_run run;
  int rc = session_prepare(ses, &req, &run, err, errlen) ? -2 : 0;
  backend_plan_config pc = {.ses = ses, .run = &run, .scale = 1.0, .open = open_events, .open_arg = t,
                            .gpu_memory = gpu_memory};
  if (!rc) rc = backend_plan_make(&pc, p, err, errlen);
  if (rc == 0 && p->fits) {
    backend_run_config rc2 = {.ses = ses, .run = &run, .open = open_events, .open_arg = t};
    rc = backend_cuda_run(&rc2, p, m, err, errlen);
  } else if (rc == 0) {
    rc = -3;
  }
  session_run_release(&run);
  session_free(ses);
  return rc;
}

static void test_probe(void) {
  cudart_info info;
  char err[512];
  fake_cuda_setup(2, 16 * GiB);
  fake_cuda_no_driver(1);
  CHECK_EQ(cudart_probe(&info, err, sizeof err), -1);
  CHECK(strstr(err, "no NVIDIA driver") != NULL);
  fake_cuda_setup(0, 16 * GiB);
  CHECK_EQ(cudart_probe(&info, err, sizeof err), -1);
  CHECK(strstr(err, "no CUDA-capable GPU") != NULL);
  fake_cuda_setup(2, 16 * GiB);
  CHECK_EQ(cudart_probe(&info, err, sizeof err), 0);
  CHECK_EQ(info.ngpus, 2);
  CHECK_STR(info.gpus[1].name, "Fake GPU 1");
  CHECK_EQ(info.gpus[0].total_memory, 16 * GiB);
  CHECK_EQ(info.gpus[0].vmm, 1);
  CHECK_STR(info.gpus[1].pci_bus_id, "0000:02:00.0");
}

static void test_run_cuda(void) {
  static sim_event v[64];
  trace t = {v, build(v), {0}};
  fake_cuda_setup(1, 16 * GiB);
  backend_plan p;
  backend_measured m;
  char err[1024];
  int rc = plan_and_run(&t, "cuda", UINT64_MAX, &p, &m, err, sizeof err);
  if (rc) fprintf(stderr, "run: %s\n", err);
  CHECK_EQ(rc, 0);
  /* The plan: 384 MiB at the peak, a 512 MiB copy buffer (two 256 MiB halves), host buffers. */
  CHECK_EQ(p.predicted_device_peak, 384 * MiB);
  CHECK_EQ(p.gpus[0].scratch, 512 * MiB);
  CHECK_EQ(p.pinned_staging, 8 * MiB);
  CHECK_EQ(p.pageable_staging, 4 * MiB);
  CHECK_EQ(p.nsteps, 2);
  /* The run: the same memory as the driver counts it, at the peaks the plan named. */
  CHECK_EQ(m.peak_used, 384 * MiB);
  CHECK_EQ(m.at_requested_peak, 384 * MiB);
  CHECK_EQ(m.at_predicted_peak, 384 * MiB);
  CHECK_EQ(m.peak_used_seq, p.predicted_device_peak_seq);
  CHECK_EQ(m.engine.device_mallocs, 6);
  CHECK_EQ(m.engine.peak_reserved, 384 * MiB);
  CHECK_EQ(m.kernels, 6);
  CHECK_EQ(m.copies, 6);
  CHECK_EQ(m.chunks, 2); /* each 300 MiB device-to-device copy in two pieces */
  CHECK_EQ(m.memsets, 2);
  CHECK_EQ(m.syncs, 4);
  CHECK_EQ(m.host_allocs, 2);
  CHECK_EQ(m.nsteps, 2);
  /* Time: each step waits for two 2 ms kernels on stream 5, so it takes at least 4 ms. */
  CHECK(m.step_s[0] >= 0.004 && m.step_s[1] >= 0.004);
  CHECK(m.wall_s >= m.step_s[0] + m.step_s[1] - 1e-6);
  CHECK(m.samples > 12); /* after every cudaMalloc and cudaFree, and at the peaks */
  CHECK(strstr(m.gpu_names, "Fake GPU 0 (GPU 0)") != NULL);
  const fake_cuda_counts *c = fake_cuda_counts_get();
  CHECK_EQ(c->kernels, 6);
  CHECK_EQ(c->kernel_ns, 12000000);
  CHECK_EQ(c->copy_bytes, 2 * (8 + 4 + 300) * MiB);
  /* Everything given back: memory, streams, the kernel's module. */
  CHECK_EQ(fake_cuda_used(0), 0);
  CHECK_EQ(fake_cuda_live(0), 0);
  CHECK_EQ(c->streams, 0);
  CHECK_EQ(c->modules, 0);
  backend_measured_release(&m);
  backend_plan_release(&p);
}

static void test_run_pool_and_bfc(void) {
  static sim_event v[64];
  trace t = {v, build(v), {0}};
  backend_plan p;
  backend_measured m;
  char err[1024];
  fake_cuda_setup(1, 16 * GiB);
  int rc = plan_and_run(&t, "async:release_threshold=0", UINT64_MAX, &p, &m, err, sizeof err);
  if (rc) fprintf(stderr, "async: %s\n", err);
  CHECK_EQ(rc, 0);
  CHECK_EQ(m.peak_used, 384 * MiB); /* the pretend pool grows by whole requests */
  CHECK_EQ(m.engine.allocs, 6);
  CHECK_EQ(m.engine.device_mallocs, 0); /* the pool, not the device primitive, allocates */
  CHECK_EQ(fake_cuda_used(0), 0);     /* trimmed at the end */
  CHECK_EQ(fake_cuda_live(0), 0);
  backend_measured_release(&m);
  backend_plan_release(&p);

  /* bfc takes one region as large as its memory limit: the free memory less TensorFlow's
   * reserve, as the plan showed it, not less memplay's copy buffers. */
  fake_cuda_setup(1, 16 * GiB);
  rc = plan_and_run(&t, "bfc", UINT64_MAX, &p, &m, err, sizeof err);
  if (rc) fprintf(stderr, "bfc: %s\n", err);
  CHECK_EQ(rc, 0);
  CHECK_EQ(m.engine.device_mallocs, 1);
  CHECK_EQ(m.peak_used, p.predicted_device_peak);
  CHECK(m.peak_used > 14 * GiB);
  CHECK_EQ(fake_cuda_used(0), 0);
  backend_measured_release(&m);
  backend_plan_release(&p);
}

static void test_capacity_and_refusal(void) {
  static sim_event v[64];
  trace t = {v, build(v), {0}};
  backend_plan p;
  backend_measured m;
  char err[1024];
  /* A 256 MiB card emulated: the 192 MiB allocation fits, the others do not, as predicted. */
  fake_cuda_setup(1, 16 * GiB);
  int rc = plan_and_run(&t, "cuda", 256 * MiB, &p, &m, err, sizeof err);
  CHECK_EQ(rc, 0);
  CHECK_EQ(p.predicted.ooms, m.engine.ooms);
  CHECK(m.engine.ooms > 0);
  CHECK(m.peak_used <= 256 * MiB);
  CHECK_EQ(fake_cuda_used(0), 0);
  backend_measured_release(&m);
  backend_plan_release(&p);
  /* A GPU with 700 MiB: 384 MiB + 512 MiB of copy buffer does not fit; nothing is allocated. */
  fake_cuda_setup(1, 700 * MiB);
  rc = plan_and_run(&t, "cuda", UINT64_MAX, &p, &m, err, sizeof err);
  CHECK_EQ(rc, -3);
  CHECK(!p.fits);
  CHECK(strstr(p.why, "--scale") != NULL);
  CHECK_EQ(fake_cuda_counts_get()->mallocs, 0);
  backend_plan_release(&p);
}

static void test_failures_name_the_call_and_event(void) {
  static sim_event v[64];
  trace t = {v, build(v), {0}};
  backend_plan p;
  backend_measured m;
  char err[1024];
  /* The second asynchronous copy of the run (event 6, the d2d one: the h2d copy is the first) */
  fake_cuda_setup(1, 16 * GiB);
  fake_cuda_fail("cudaMemcpyAsync", 2);
  CHECK_EQ(plan_and_run(&t, "cuda", UINT64_MAX, &p, &m, err, sizeof err), -1);
  CHECK(strstr(err, "event 7: cudaMemcpyAsync (d2d, 256.00 MiB, stream 5, GPU 0): an illegal memory access") != NULL);
  if (!strstr(err, "event 7: cudaMemcpyAsync")) fprintf(stderr, "got: %s\n", err);
  CHECK_EQ(fake_cuda_used(0), 0); /* what was allocated is given back */
  CHECK_EQ(fake_cuda_live(0), 0);
  backend_measured_release(&m);
  backend_plan_release(&p);
  /* A failed cudaFree inside the model (which cannot report it) still stops the run. The first
   * cudaFree is the runtime's cudaFree(0) that makes the GPU ready; the second is event 14's. */
  fake_cuda_setup(1, 16 * GiB);
  fake_cuda_fail("cudaFree", 2);
  CHECK_EQ(plan_and_run(&t, "cuda", UINT64_MAX, &p, &m, err, sizeof err), -1);
  CHECK(strstr(err, "cudaFree of 64.00 MiB on GPU 0: an illegal memory access") != NULL);
  CHECK(strstr(err, "event 14: ") == err);
  if (strstr(err, "event 14: ") != err) fprintf(stderr, "got: %s\n", err);
  backend_measured_release(&m);
  backend_plan_release(&p);
  /* A kernel launch. */
  fake_cuda_setup(1, 16 * GiB);
  fake_cuda_fail("cuLaunchKernel", 4);
  CHECK_EQ(plan_and_run(&t, "cuda", UINT64_MAX, &p, &m, err, sizeof err), -1);
  CHECK(strstr(err, "cuLaunchKernel of the spin kernel (2000000 ns)") != NULL);
  CHECK(strstr(err, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL);
  backend_measured_release(&m);
  backend_plan_release(&p);
}

static void test_calibrate(void) {
  fake_cuda_setup(1, 16 * GiB);
  calib_profile *p = calloc(1, sizeof *p);
  char err[512];
  int rc = calib_measure(0, 1, p, err, sizeof err);
  if (rc) fprintf(stderr, "calibrate: %s\n", err);
  CHECK_EQ(rc, 0);
  CHECK_STR(p->name, "Fake-GPU-0");
  CHECK_EQ(p->total_memory, 16 * GiB);
  for (int k = 0; k < CALIB_COPIES; k++) {
    CHECK_EQ(p->copy[k].n, 4);
    CHECK(p->copy[k].bytes_per_s > 0);
  }
  /* The pretend GPU copies at 10 GB/s, and every measured copy waits for its end (a bound, not
   * a timing: the fitted rate itself depends on how busy this machine is). */
  for (int k = 0; k < CALIB_COPIES; k++) CHECK(p->copy[k].pts[3].seconds >= 16.0 * MiB / 10e9);
  /* A kind's sizes are measured in rounds, one trial of each size a round (after one untimed
   * copy of each), never one size's trials back to back, so that a slow moment of the machine
   * cannot move one size's median alone: the first kind's copies go 4 KiB, 64 KiB, 1 MiB,
   * 16 MiB, then again, as many times as trials were made. */
  const fake_cuda_counts *fc = fake_cuda_counts_get();
  int rounds = p->copy[0].pts[0].trials + 1;
  CHECK_EQ(rounds, 4); /* the quick calibration's 3 trials, and the warm-up */
  for (int i = 0; i < 4 * rounds; i++) CHECK_EQ(fc->copy_sizes[i], (UINT64_C(4) << 10) << (4 * (i % 4)));
  for (int k = 0; k < CALIB_COPIES; k++)
    for (size_t i = 0; i < p->copy[k].n; i++) CHECK_EQ(p->copy[k].pts[i].trials, 3);
  for (size_t i = 0; i < p->nmalloc; i++) CHECK_EQ(p->malloc_pts[i].trials, 3);
  for (size_t i = 0; i < p->nhost; i++) CHECK_EQ(p->host_pts[i].trials, 2);
  CHECK_EQ(p->nmalloc, 3);
  CHECK_EQ(p->nhost, 2);
  CHECK(p->launch_s > 0 && p->kernel_s > 0 && p->single_s > 0);
  /* The pretend stream queues 1024 kernels: the probe stops once launches wait, so it never
   * reports more than 1024 (plus the window it looks back over). It may stop earlier when this
   * machine stalls the test long enough to look like waiting, so no lower bound is checked:
   * that part is timing, and the suite asserts no timings. */
  CHECK(p->launch_queue >= 1 && p->launch_queue <= 1024 + 64);
  CHECK(p->launch_queue < p->launch_queue_tried);
  CHECK_EQ(p->nmap, 2);
  CHECK(p->host_copy_s > 0);
  CHECK(p->copy_engines == 1 || p->copy_engines == 2);
  CHECK_EQ(p->copy_engines_reported, 2);
  CHECK_EQ(fake_cuda_used(0), 0);
  CHECK_EQ(fake_cuda_counts_get()->streams, 0);
  /* No driver: a message, not a crash. */
  fake_cuda_no_driver(1);
  CHECK_EQ(calib_measure(0, 1, p, err, sizeof err), -1);
  CHECK(strstr(err, "no NVIDIA driver") != NULL);
  free(p);
}

int main(void) {
  RUN(test_probe);
  RUN(test_run_cuda);
  RUN(test_run_pool_and_bfc);
  RUN(test_capacity_and_refusal);
  RUN(test_failures_name_the_call_and_event);
  RUN(test_calibrate);
  fake_cuda_reset();
  TEST_MAIN_END();
}

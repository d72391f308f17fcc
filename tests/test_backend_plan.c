/* test_backend_plan.c: planning a replay on a GPU, without one: prediction, needs, refusal, scaling, steps. */
#include "cuda/backend_cuda.h"
#include "sim/device_sim.h"
#include "test.h"

int test_failures;

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

typedef struct fake {
  const sim_event *events;
  size_t n;
  replay_array_source arr;
  uint64_t free_memory, total_memory;
  int ngpus, opened, asked[4];
} fake;

static int open_events(void *arg, replay_source *src, char *err, size_t errlen) {
  fake *f = arg;
  (void)err, (void)errlen;
  *src = replay_array_source_init(&f->arr, f->events, f->n);
  f->opened++;
  return 0;
}

static int gpu_memory(void *arg, int device, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen) {
  fake *f = arg;
  if (device >= f->ngpus) {
    snprintf(err, errlen, "the trace uses device %d, but only %d GPU is visible", device, f->ngpus);
    return -1;
  }
  f->asked[device]++;
  *free_bytes = f->free_memory;
  *total_bytes = f->total_memory;
  return 0;
}

static sim_event ev(int kind, uint64_t addr, uint64_t size) {
  sim_event e;
  sim_event_init(&e);
  e.kind = (uint8_t)kind;
  e.addr = addr;
  e.size = size;
  e.device = 0;
  return e;
}

/* Three steps (marked), an allocation, copies of every kind, a memset, a kernel, a sync. */
static size_t build(sim_event *v) {
  size_t n = 0;
  sim_event m = ev(SIM_EV_MARKER, 0, 0);
  m.flags = SIM_EVF_STEP_BEGIN;
  m.device = -1;
  for (int step = 0; step < 3; step++) {
    m.ts = step * 1000000;
    v[n++] = m;
    v[n] = ev(SIM_EV_ALLOC, 0x1000 + (uint64_t)step, GiB);
    v[n++].ts = m.ts + 10;
    sim_event c = ev(SIM_EV_MEMCPY, 0, 64 * MiB);
    c.dir = SIM_COPY_H2D;
    c.mem = SIM_MEM_PINNED;
    c.ts = m.ts + 20;
    v[n++] = c;
    c.dir = SIM_COPY_D2H;
    c.mem = SIM_MEM_PAGEABLE;
    c.size = 8 * MiB;
    c.ts = m.ts + 30;
    v[n++] = c;
    c.dir = SIM_COPY_D2D;
    c.size = 512 * MiB; /* over BACKEND_CHUNK: two pieces, each needing two halves */
    c.ts = m.ts + 40;
    v[n++] = c;
    sim_event s = ev(SIM_EV_MEMSET, 0, 100 * MiB);
    s.ts = m.ts + 50;
    v[n++] = s;
    sim_event k = ev(SIM_EV_KERNEL, 0, 0);
    k.dur = 5000;
    k.ts = m.ts + 60;
    v[n++] = k;
    sim_event y = ev(SIM_EV_SYNC, 0, 0);
    y.stream = -1;
    y.ts = m.ts + 70;
    v[n++] = y;
    v[n] = ev(SIM_EV_FREE, 0x1000 + (uint64_t)step, GiB);
    v[n++].ts = m.ts + 80;
  }
  for (size_t i = 0; i < n; i++) v[i].seq = (int64_t)i;
  return n;
}

/* A replay of a trace with no metadata, through allocator alloc, prepared by a store-less session. */
typedef struct planner {
  session *ses;
  session_run run;
  store_trace meta;
} planner;

static int planner_init(planner *pl, const char *alloc) {
  char err[512];
  memset(pl, 0, sizeof *pl);
  static char name[] = "synthetic";
  pl->meta.name = name;
  pl->ses = session_new(NULL);
  session_request req;
  session_request_init(&req);
  req.trace = &pl->meta;
  req.allocator = alloc;
  req.no_device = 1;
  int rc = session_prepare(pl->ses, &req, &pl->run, err, sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  return rc;
}

static void planner_release(planner *pl) {
  session_run_release(&pl->run);
  session_free(pl->ses);
}

static backend_plan_config config(fake *f, planner *pl) {
  return (backend_plan_config){
    .ses = pl->ses, .run = &pl->run, .scale = 1.0, .open = open_events, .open_arg = f,
    .gpu_memory = gpu_memory, .gpu_arg = f};
}

static void test_fits(void) {
  sim_event v[64];
  fake f = {v, build(v), {0}, 8 * GiB, 16 * GiB, 1, 0, {0}};
  planner pl;
  char err[512];
  CHECK_EQ(planner_init(&pl, "cuda"), 0);
  backend_plan_config cfg = config(&f, &pl);
  backend_plan p;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), 0);
  CHECK(p.fits);
  CHECK_EQ(p.ngpus, 1);
  CHECK(p.gpus[0].used);
  CHECK(p.takes_device_memory);
  CHECK_EQ(p.gpus[0].predicted_peak, GiB);      /* 1 GiB is a whole number of 2 MiB pages */
  CHECK_EQ(p.gpus[0].scratch, 2 * BACKEND_CHUNK); /* the device-to-device copy, in pieces */
  CHECK_EQ(p.pinned_staging, 64 * MiB);
  CHECK_EQ(p.pageable_staging, 8 * MiB);
  CHECK_EQ(p.gpus[0].need, GiB + 2 * BACKEND_CHUNK);
  CHECK_EQ(p.gpus[0].budget, 8 * GiB - BACKEND_MARGIN);
  CHECK_EQ(p.kernels, 3);
  CHECK_EQ(p.copies, 9);
  CHECK_EQ(p.memsets, 3);
  CHECK_EQ(p.syncs, 3);
  CHECK_EQ(p.nsteps, 3);
  CHECK_EQ(p.steps[1].seq, 9);
  CHECK_EQ(p.steps[2].ts, 2000000);
  CHECK_EQ(p.first_ts, 0);
  CHECK_EQ(p.last_ts, 2000080);
  CHECK_EQ(p.predicted_device_peak, GiB);
  CHECK_EQ(p.predicted_device_peak_seq, 1);
  CHECK_EQ(p.predicted.peak_requested_seq, 1);
  CHECK_EQ(p.predicted_at_requested_peak, GiB);
  /* used after each event: 1 GiB from the allocation to its free, 0 after */
  CHECK_EQ(backend_plan_used_at(&p, 0), 0);
  CHECK_EQ(backend_plan_used_at(&p, 1), GiB);
  CHECK_EQ(backend_plan_used_at(&p, 7), GiB);
  CHECK_EQ(backend_plan_used_at(&p, 8), 0);
  CHECK_EQ(backend_plan_used_at(&p, 10), GiB);
  CHECK_EQ(backend_plan_used_at(&p, -1), 0);
  CHECK_EQ(f.opened, 1);
  CHECK_EQ(f.asked[0], 1); /* free memory is asked once per GPU */
  backend_plan_release(&p);
  planner_release(&pl);
}

static void test_refuses_and_scales(void) {
  sim_event v[64];
  fake f = {v, build(v), {0}, GiB, 16 * GiB, 1, 0, {0}}; /* 1 GiB free: 1.5 GiB needed */
  planner pl;
  char err[512];
  CHECK_EQ(planner_init(&pl, "cuda"), 0);
  backend_plan_config cfg = config(&f, &pl);
  backend_plan p;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), 0);
  CHECK(!p.fits);
  CHECK(strstr(p.why, "GPU 0") != NULL);
  CHECK(strstr(p.why, "--scale fit") != NULL);
  CHECK(strstr(p.why, "1.50 GiB") != NULL);
  CHECK_EQ(f.opened, 1); /* refused after one simulated pass */
  backend_plan_release(&p);

  /* --scale 0.5: every size halves, and so do the needs. */
  cfg.scale = 0.5;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), 0);
  CHECK_EQ(p.gpus[0].predicted_peak, 512 * MiB);
  CHECK_EQ(p.gpus[0].scratch, 2 * BACKEND_CHUNK); /* 256 MiB pieces still */
  CHECK_EQ(p.pinned_staging, 32 * MiB);
  CHECK_EQ(p.gpus[0].need, GiB);
  CHECK_EQ(p.gpus[0].budget, 768 * MiB); /* 1 GiB free less the 256 MiB margin */
  CHECK(!p.fits);
  backend_plan_release(&p);

  /* --scale fit: the largest factor that fits, found by simulating again. */
  cfg.scale = 0;
  f.opened = 0;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), 0);
  CHECK(p.fits);
  CHECK(p.fitted);
  CHECK(p.scale < 0.5 && p.scale > 0.2);
  CHECK(p.gpus[0].need <= p.gpus[0].budget);
  CHECK(f.opened >= 2);
  backend_plan_release(&p);
  planner_release(&pl);
}

static void test_capacity_caps_the_need(void) {
  sim_event v[64];
  fake f = {v, build(v), {0}, GiB, 16 * GiB, 1, 0, {0}};
  planner pl;
  char err[512];
  CHECK_EQ(planner_init(&pl, "cuda"), 0);
  backend_plan_config cfg = config(&f, &pl);
  pl.run.capacity = 256 * MiB; /* the run emulates a 256 MiB card: every allocation OOMs */
  backend_plan p;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), 0);
  CHECK_EQ(p.predicted.ooms, 3);
  CHECK_EQ(p.gpus[0].predicted_peak, 0);
  CHECK_EQ(p.gpus[0].need, 2 * BACKEND_CHUNK); /* only the copy buffer: the OOMs are the prediction */
  CHECK(p.fits);
  backend_plan_release(&p);
  planner_release(&pl);
}

static void test_ideal_takes_nothing(void) {
  sim_event v[64];
  fake f = {v, build(v), {0}, 8 * GiB, 16 * GiB, 1, 0, {0}};
  planner pl;
  char err[512];
  CHECK_EQ(planner_init(&pl, "ideal"), 0);
  backend_plan_config cfg = config(&f, &pl);
  backend_plan p;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), 0);
  CHECK(!p.takes_device_memory);
  CHECK_EQ(p.predicted.allocs, 3);
  backend_plan_release(&p);
  planner_release(&pl);
}

static void test_missing_gpu(void) {
  sim_event v[4];
  v[0] = ev(SIM_EV_ALLOC, 1, MiB);
  v[1] = ev(SIM_EV_ALLOC, 2, MiB);
  v[1].device = 1;
  v[1].seq = 1;
  fake f = {v, 2, {0}, 8 * GiB, 16 * GiB, 1, 0, {0}};
  planner pl;
  char err[512];
  CHECK_EQ(planner_init(&pl, "cuda"), 0);
  backend_plan_config cfg = config(&f, &pl);
  backend_plan p;
  CHECK_EQ(backend_plan_make(&cfg, &p, err, sizeof err), -1);
  CHECK(strstr(err, "device 1") != NULL);
  backend_plan_release(&p);
  planner_release(&pl);
}

static void test_scale_and_steps(void) {
  CHECK_EQ(backend_scale_size(0, 0.5), 0);
  CHECK_EQ(backend_scale_size(1, 0.001), 1);
  CHECK_EQ(backend_scale_size(1000, 0.5), 500);
  CHECK_EQ(backend_scale_size(3, 0.5), 2); /* nearest, halves up */
  CHECK_EQ(backend_scale_size(12345, 1.0), 12345);
  CHECK_EQ(backend_budget(GiB), GiB - 256 * MiB);
  CHECK_EQ(backend_budget(100 * MiB), 0);

  /* The scaled source scales every size and nothing else. */
  sim_event v[2] = {ev(SIM_EV_ALLOC, 7, 1000), ev(SIM_EV_MEMCPY, 0, 400)};
  v[1].dur = 99;
  replay_array_source arr;
  backend_scaled sc;
  replay_source src = backend_scaled_source(&sc, replay_array_source_init(&arr, v, 2), 0.25);
  sim_event e;
  CHECK_EQ(replay_source_next(&src, &e), 1);
  CHECK_EQ(e.size, 250);
  CHECK_EQ(e.addr, 7);
  CHECK_EQ(replay_source_next(&src, &e), 1);
  CHECK_EQ(e.size, 100);
  CHECK_EQ(e.dur, 99);
  CHECK_EQ(replay_source_next(&src, &e), 0);
  replay_source_close(&src);

  /* Steps by the events' step field when there are no markers. */
  backend_stepper st = {0};
  sim_event s = ev(SIM_EV_KERNEL, 0, 0);
  s.step = -1;
  CHECK_EQ(backend_step_opens(&st, &s), 1); /* the first event opens the first step */
  s.step = 0;
  CHECK_EQ(backend_step_opens(&st, &s), 1);
  CHECK_EQ(backend_step_opens(&st, &s), 0);
  s.step = 1;
  CHECK_EQ(backend_step_opens(&st, &s), 1);
  s.step = -1;
  CHECK_EQ(backend_step_opens(&st, &s), 0); /* events without a step stay in the current one */
  /* Once a marker opens steps, step fields no longer do. */
  sim_event m = ev(SIM_EV_MARKER, 0, 0);
  m.flags = SIM_EVF_STEP_BEGIN;
  CHECK_EQ(backend_step_opens(&st, &m), 1);
  s.step = 5;
  CHECK_EQ(backend_step_opens(&st, &s), 0);
}

int main(void) {
  RUN(test_fits);
  RUN(test_refuses_and_scales);
  RUN(test_capacity_caps_the_need);
  RUN(test_ideal_takes_nothing);
  RUN(test_missing_gpu);
  RUN(test_scale_and_steps);
  TEST_MAIN_END();
}

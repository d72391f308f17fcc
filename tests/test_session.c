/* test_session.c: the replay session decides every default in one place: allocator, settings, device, capacity, time. */
#include <stdlib.h>
#include <unistd.h>

#include "session/labels.h"
#include "session/session.h"
#include "sim/devices.h"
#include "test.h"

#define GiB (UINT64_C(1) << 30)

int test_failures = 0;

static char name[] = "job", torch_name[] = "torch", other[] = "tensorflow", settings[] = "{\"max_split_size\": -1}";

/* A trace recorded by PyTorch's caching allocator with its settings, on a 40 GiB card, batch 8. */
static store_trace recorded_by(char *allocator) {
  return (store_trace){.id = 1, .name = name, .allocator = allocator, .allocator_settings = settings,
                       .device_memory = (int64_t)(40 * GiB), .batch_size = 8};
}

static int prepare(session *ses, const session_request *req, session_run *run) {
  char err[512];
  int rc = session_prepare(ses, req, run, err, sizeof err);
  if (rc) fprintf(stderr, "  (%s)\n", err);
  return rc;
}

static void test_allocator_and_settings(void) {
  session *ses = session_new(NULL);
  store_trace t = recorded_by(torch_name);
  session_request req;
  session_request_init(&req);
  req.trace = &t;
  session_run run;
  /* no allocator asked for: the one that recorded the trace, with its recorded settings */
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_STR(run.allocator, "torch");
  CHECK(run.recorded == settings);
  const sim_spec *first = run.spec;
  session_run_release(&run);
  /* the same SPEC again: parsed once per session */
  req.allocator = "torch";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK(run.spec == first);
  session_run_release(&run);
  /* another model: the settings are not its own */
  req.allocator = "cuda";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK(run.recorded == NULL);
  session_run_release(&run);
  /* a recording allocator memplay has no model of: ideal, or the front end's fallback */
  t = recorded_by(other);
  req.allocator = NULL;
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_STR(run.allocator, "ideal");
  session_run_release(&run);
  req.fallback_allocator = "cuda";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_STR(run.allocator, "cuda");
  session_run_release(&run);
  /* a bad SPEC is the user's to change */
  char err[512];
  req.allocator = "torch:no_such_option=1";
  CHECK_EQ(session_prepare(ses, &req, &run, err, sizeof err), SESSION_EUSAGE);
  CHECK(strstr(err, "no_such_option") != NULL);
  session_run_release(&run);
  CHECK_EQ(session_check_allocator("bfc:allow_growth=true", err, sizeof err), SESSION_OK);
  CHECK_EQ(session_check_allocator("nosuch", err, sizeof err), SESSION_EUSAGE);
  session_free(ses);
}

static void test_device_and_capacity(void) {
  session *ses = session_new(NULL);
  store_trace t = recorded_by(torch_name);
  session_request req;
  session_request_init(&req);
  req.trace = &t;
  session_run run;
  /* no device: no time prediction (without a store nothing matches the recorded device); the
   * card's memory is the recorded one, the capacity unlimited */
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK(!run.has_device);
  CHECK_EQ(run.capacity, UINT64_MAX);
  CHECK_EQ(run.total_memory, 40 * GiB);
  session_run_release(&run);
  /* a named device gives the capacity and the card's memory, and predicts time */
  const sim_device_profile *h100 = sim_device_builtin("H100");
  CHECK(h100 != NULL);
  req.device = "H100";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK(run.has_device);
  CHECK_STR(run.device_reason, "option");
  CHECK_EQ(run.capacity, h100->total_memory - h100->context_bytes); /* the CUDA context takes its share */
  CHECK_STR(run.capacity_source, "device");
  CHECK_EQ(run.total_memory, h100->total_memory);
  session_run_release(&run);
  /* ... unless the request gives them */
  req.capacity = 16 * GiB;
  req.total_memory = 24 * GiB;
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_EQ(run.capacity, 16 * GiB);
  CHECK_EQ(run.total_memory, 24 * GiB);
  session_run_release(&run);
  /* an unknown device cannot be done */
  char err[512];
  req.device = "NoSuchGPU";
  CHECK_EQ(session_prepare(ses, &req, &run, err, sizeof err), SESSION_EFAIL);
  CHECK_STR(err, "no device profile 'NoSuchGPU' (see 'memplay devices')");
  session_run_release(&run);
  /* processes sharing one GPU need its size */
  session_request_init(&req);
  req.trace = &t;
  req.shared_device = 1;
  CHECK_EQ(session_prepare(ses, &req, &run, err, sizeof err), SESSION_EUSAGE);
  session_run_release(&run);
  session_free(ses);
}

static void test_time_options(void) {
  session *ses = session_new(NULL);
  store_trace t = recorded_by(torch_name);
  session_request req;
  session_request_init(&req);
  req.trace = &t;
  req.device = "H100";
  session_run run;
  /* the batch: the trace's, the timing option's, or the request's, in rising order */
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_EQ(run.tcfg.batch_size, 8);
  CHECK_EQ(run.tcfg.malloc_syncs, 1); /* cudaMalloc synchronizes the device */
  session_run_release(&run);
  req.timing = "batch=4,copies=recorded";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_EQ(run.tcfg.batch_size, 4);
  CHECK_EQ(run.tcfg.copy_timing, SIM_TM_TIMING_RECORDED);
  session_run_release(&run);
  req.batch = 2;
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_EQ(run.tcfg.batch_size, 2);
  session_run_release(&run);
  /* a stream-ordered pool grows without synchronizing, unless the options say otherwise */
  req.allocator = "async";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_EQ(run.tcfg.malloc_syncs, 0);
  session_run_release(&run);
  req.timing = "malloc_syncs=true";
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  CHECK_EQ(run.tcfg.malloc_syncs, 1);
  session_run_release(&run);
  char err[512];
  req.timing = "copies=sometimes";
  CHECK_EQ(session_prepare(ses, &req, &run, err, sizeof err), SESSION_EUSAGE);
  CHECK(!strncmp(err, "timing: ", 8));
  session_run_release(&run);
  CHECK_EQ(session_check_timing("copies=sometimes", err, sizeof err), SESSION_EUSAGE);
  session_free(ses);
}

/* Four allocations of 1 GiB, two of them freed: the run is the engine's, repeatable. */
static void test_execute(void) {
  sim_event ev[6];
  memset(ev, 0, sizeof ev);
  for (int i = 0; i < 6; i++) {
    ev[i].seq = i;
    ev[i].ts = i * 1000;
    ev[i].kind = i < 4 ? SIM_EV_ALLOC : SIM_EV_FREE;
    ev[i].addr = (uint64_t)(i < 4 ? i + 1 : i - 3);
    ev[i].size = i < 4 ? GiB : 0;
    ev[i].stream = 0;
    ev[i].step = -1;
  }
  session *ses = session_new(NULL);
  store_trace t = recorded_by(other);
  session_request req;
  session_request_init(&req);
  req.trace = &t;
  req.allocator = "cuda";
  req.capacity = 3 * GiB;
  session_run run;
  char err[512];
  CHECK_EQ(prepare(ses, &req, &run), SESSION_OK);
  for (int pass = 0; pass < 2; pass++) { /* executed again: the same result */
    replay_array_source a;
    replay_source src = replay_array_source_init(&a, ev, 6);
    session_pass p = {.source = &src};
    CHECK_EQ(session_execute(ses, &run, &p, err, sizeof err), SESSION_OK);
    CHECK(run.executed);
    CHECK_EQ(run.result.allocs, 3);
    CHECK_EQ(run.result.ooms, 1);
    CHECK_EQ(run.result.peak_allocated, (int64_t)(3 * GiB));
  }
  run_meta m = session_meta(&run);
  CHECK_STR(m.allocator, "cuda");
  CHECK_STR(m.trace_name, "job");
  CHECK_EQ(m.capacity, 3 * GiB);
  CHECK(m.time == NULL);
  replay_result taken;
  session_take_result(&run, &taken);
  CHECK(!run.executed);
  CHECK_EQ(taken.ooms, 1);
  replay_result_release(&taken);
  /* without a store there is nothing to read a stored trace from, nor to keep a run in */
  CHECK_EQ(session_execute(ses, &run, NULL, err, sizeof err), SESSION_EFAIL);
  CHECK_EQ(session_save(ses, &m, &run.result, NULL, SESSION_RESULT_REPORT, NULL, err, sizeof err), SESSION_EFAIL);
  session_run_release(&run);
  session_free(ses);
}

static int count_frame(void *arg, const store_frame *f) {
  (*(size_t *)arg)++;
  return !f->name || !f->file;
}

/* Labels, frames and strings are read from the store once, then answered from memory: a row deleted
 * behind the cache's back (nothing in memplay deletes one) still reads as it was, until the
 * cache is cleared. An id the store does not know is not kept. */
static void test_labels(void) {
  char dir[] = "/tmp/memplay-test-labels-XXXXXX", path[64], err[512];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/s.db", dir);
  store *s;
  CHECK_EQ(store_open(&s, path, STORE_CREATE, err, sizeof err), 0);
  store_frame frames[] = {{"alloc", "torch/lib.py", 10}, {"forward", "model.py", 22}};
  CHECK_EQ(store_begin(s), 0);
  int64_t stack = store_intern_stack(s, frames, 2), kname = store_intern_string(s, "volta_sgemm", 11);
  CHECK_EQ(store_commit(s), 0);
  CHECK(stack > 0 && kname > 0);
  session_labels *sl = session_labels_new(s);
  replay_names n = session_labels_names(sl);
  char *want = store_stack_label(s, stack), *got = replay_stack_label(&n, stack);
  CHECK_STR(got, want);
  CHECK_STR(replay_name(&n, kname), "volta_sgemm");
  char *unknown = replay_stack_label(&n, stack + 1000);
  CHECK_STR(unknown, "(unknown call stack)");
  free(got);
  free(unknown);
  size_t nframes = 0;
  CHECK_EQ(session_labels_frames(sl, stack, count_frame, &nframes), 0);
  CHECK_EQ(nframes, 2);
  CHECK_EQ(sqlite3_exec(store_db(s), "DELETE FROM callsites; DELETE FROM strings WHERE value = 'volta_sgemm'", NULL, NULL,
                        NULL),
           SQLITE_OK);
  got = replay_stack_label(&n, stack); /* from memory */
  CHECK_STR(got, want);
  CHECK_STR(replay_name(&n, kname), "volta_sgemm");
  nframes = 0;
  CHECK_EQ(session_labels_frames(sl, stack, count_frame, &nframes), 0); /* from memory */
  CHECK_EQ(nframes, 2);
  free(got);
  session_labels_clear(sl);
  nframes = 0;
  CHECK_EQ(session_labels_frames(sl, stack, count_frame, &nframes), 0);
  CHECK_EQ(nframes, 0);
  got = replay_stack_label(&n, stack); /* read again: gone */
  CHECK_STR(got, "(unknown call stack)");
  CHECK(replay_name(&n, kname) == NULL);
  free(got);
  free(want);
  session_labels_free(sl);
  replay_names none = session_labels_names(NULL);
  CHECK(replay_stack_label(&none, stack) == NULL);
  store_close(s);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK_EQ(system(cmd), 0);
}

int main(void) {
  RUN(test_allocator_and_settings);
  RUN(test_device_and_capacity);
  RUN(test_time_options);
  RUN(test_execute);
  RUN(test_labels);
  TEST_MAIN_END();
}

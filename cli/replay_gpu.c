/* replay_gpu.c: `memplay replay TRACE --backend cuda`: the trace performed on the GPU, beside its prediction. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "session/session.h"
#include "cli.h"

int cli_gpu_option(cli_gpu_opts *g, int opt, const char *arg) {
  if (!g->scale_given) g->scale = 1.0;
  switch (opt) {
  case 'B':
    if (!strcmp(arg, "cuda")) g->on_gpu = 1;
    else if (!strcmp(arg, "sim")) g->on_gpu = 0;
    else return cli_usage_error("replay", "unknown backend '%s' (accepted: sim, cuda)", arg);
    return 0;
  case 'X': {
    g->set = 1;
    g->scale_given = 1;
    if (!strcmp(arg, "fit")) {
      g->scale = 0;
      return 0;
    }
    char *end;
    double f = strtod(arg, &end);
    if (*end || !(f > 0 && f <= 1))
      return cli_usage_error("replay", "--scale wants a factor above 0 and at most 1, or 'fit', not '%s'", arg);
    g->scale = f;
    return 0;
  }
  case 'P':
    g->set = 1;
    if (!arg || !strcmp(arg, "clock")) g->pace = CLI_PACE_CLOCK;
    else if (!strcmp(arg, "gaps")) g->pace = CLI_PACE_GAPS;
    else return cli_usage_error("replay", "--pace takes 'clock' or 'gaps', not '%s'", arg);
    return 0;
  }
  return 0;
}

/* A bad --allocator is a usage error whatever the machine has. */
static int check_spec(const char *alloc) {
  char err[1024];
  if (alloc && session_check_allocator(alloc, err, sizeof err)) return cli_usage_error("replay", "%s", err);
  return 0;
}

#ifndef MEMPLAY_HAVE_CUDA

int cli_replay_gpu(cli *c, const char *trace, const char *alloc, uint64_t capacity, int stop_at_oom, int save,
                   int timeline, const cli_gpu_opts *g) {
  (void)c, (void)trace, (void)capacity, (void)stop_at_oom, (void)save, (void)timeline, (void)g;
  if (check_spec(alloc)) return CLI_USAGE;
  cli_error("this memplay was built without CUDA support, so it cannot replay on a GPU: build it where the CUDA "
            "toolkit is installed (see docs/gpu.md)");
  return CLI_FAIL;
}

#else

#include "cuda/backend_cuda.h"
#include "cuda/cudart.h"
#include "io/jsonw.h"
#include "store/store_source.h"

typedef struct gpu_ctx {
  store *s;
  int64_t trace_id;
  const cudart_info *info;
} gpu_ctx;

static int open_events(void *arg, replay_source *src, char *err, size_t errlen) {
  gpu_ctx *g = arg;
  if (store_source_open(src, g->s, g->trace_id)) {
    snprintf(err, errlen, "%s", store_error(g->s));
    return -1;
  }
  return 0;
}

static int gpu_memory(void *arg, int device, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen) {
  gpu_ctx *g = arg;
  if (device >= g->info->ngpus) {
    snprintf(err, errlen, "the trace uses device %d, but only %d GPU%s visible (CUDA_VISIBLE_DEVICES chooses which)",
             device, g->info->ngpus, g->info->ngpus == 1 ? " is" : "s are");
    return -1;
  }
  return cudart_mem_info(device, free_bytes, total_bytes, err, errlen);
}

static double median_of(const double *v, size_t n) {
  if (!n) return 0;
  double *c = malloc(n * sizeof *c);
  memcpy(c, v, n * sizeof *c);
  for (size_t i = 1; i < n; i++) /* insertion sort: steps are few */
    for (size_t j = i; j > 0 && c[j - 1] > c[j]; j--) {
      double t = c[j];
      c[j] = c[j - 1];
      c[j - 1] = t;
    }
  double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
  free(c);
  return m;
}

/* Recorded step times from the plan, seconds. */
static double *recorded_steps(const backend_plan *p) {
  double *v = calloc(p->nsteps ? p->nsteps : 1, sizeof *v);
  for (size_t i = 0; i < p->nsteps; i++) {
    int64_t end = i + 1 < p->nsteps ? p->steps[i + 1].ts : p->last_ts;
    v[i] = (double)(end - p->steps[i].ts) / 1e9;
  }
  return v;
}

/* Steps that count: all but the first when there are three or more (the first holds start-up). */
static size_t first_counted(size_t n) { return n >= 3 ? 1 : 0; }

static double error_pct(double measured, double reference) {
  return reference != 0 ? (measured - reference) / reference * 100 : NAN;
}

static void row_bytes(const char *label, uint64_t pred, uint64_t meas) {
  char a[48], b[48];
  printf("  %-38s %14s %14s", label, report_bytes(a, sizeof a, (int64_t)pred), report_bytes(b, sizeof b, (int64_t)meas));
  double e = error_pct((double)meas, (double)pred);
  if (isnan(e)) printf("  %8s\n", "-");
  else printf("  %+7.1f%%\n", e);
}

static void row_time(const char *label, double rec, double meas) {
  char a[48], b[48];
  printf("  %-38s %14s %14s", label, cli_duration(a, sizeof a, rec), cli_duration(b, sizeof b, meas));
  double e = error_pct(meas, rec);
  if (isnan(e)) printf("  %8s\n", "-");
  else printf("  %+7.1f%%\n", e);
}

static void print_human(const store_trace *t, const char *alloc, const char *predictor, const backend_plan *p,
                        const backend_measured *m, int64_t run_id, store *s) {
  char a[48], b[48];
  const replay_result *r = &m->engine;
  printf("replay of '%s' under %s on %s: %s events in %s\n", t->name, alloc, m->gpu_names, cli_count(a, sizeof a, r->events),
         cli_duration(b, sizeof b, m->wall_s));
  if (p->scale != 1.0)
    printf("  every size scaled by %.4g%s; kernels keep their recorded durations\n", p->scale,
           p->fitted ? " (--scale fit: the largest factor that fits)" : "");
  printf("  %-38s %14s %14s  %8s\n", "device memory in use", "predicted", "measured", "error");
  row_bytes("  at most", p->predicted_device_peak, m->peak_used);
  char label[64];
  snprintf(label, sizeof label, "  at the trace's peak (event %lld)", (long long)p->predicted.peak_requested_seq);
  if (p->predicted.peak_requested_seq >= 0) row_bytes(label, p->predicted_at_requested_peak, m->at_requested_peak);
  if (p->predicted_device_peak_seq != p->predicted.peak_requested_seq && p->predicted_device_peak_seq >= 0) {
    snprintf(label, sizeof label, "  at the predicted peak (event %lld)", (long long)p->predicted_device_peak_seq);
    row_bytes(label, p->predicted_device_peak, m->at_predicted_peak);
  }
  printf("  %-38s %14s %14s\n", "the allocator's reserved peak", report_bytes(a, sizeof a, p->predicted.peak_reserved),
         report_bytes(b, sizeof b, r->peak_reserved));
  printf("  %-38s %14llu %14llu\n", "OOMs", (unsigned long long)p->predicted.ooms, (unsigned long long)r->ooms);
  printf("  (predicted: %s in simulation, on devices with this GPU's total and free memory)\n", predictor);
  printf("  %-38s %14s %14s  %8s\n", "time", "recorded", "measured", "error");
  row_time("  wall, first event to last", (double)sim_ns_between(p->first_ts, p->last_ts) / 1e9, m->wall_s);
  if (p->nsteps > 1) {
    double *rec = recorded_steps(p);
    size_t k = first_counted(p->nsteps);
    snprintf(label, sizeof label, "  step, median of %zu", p->nsteps - k);
    row_time(label, median_of(rec + k, p->nsteps - k), median_of(m->step_s + k, p->nsteps - k));
    free(rec);
  }
  if (m->pace_wait_s > 0)
    printf("  (--pace=%s: %s spent waiting for %s)\n", m->paced == BACKEND_PACE_GAPS ? "gaps" : "clock",
           cli_duration(a, sizeof a, m->pace_wait_s),
           m->paced == BACKEND_PACE_GAPS ? "the recorded host time between calls" : "recorded host times");
  printf("  performed: %llu kernels, %llu copies", (unsigned long long)m->kernels, (unsigned long long)m->copies);
  if (m->chunks) printf(" (%llu extra pieces of large ones)", (unsigned long long)m->chunks);
  printf(", %llu memsets, %llu synchronizations, %llu host allocations; device memory read %llu times\n",
         (unsigned long long)m->memsets, (unsigned long long)m->syncs, (unsigned long long)m->host_allocs,
         (unsigned long long)m->samples);
  if (r->ooms)
    for (size_t i = 0; i < r->noom_list && i < 5; i++)
      printf("    OOM at event %lld: %s\n", (long long)r->oom_list[i].seq, r->oom_list[i].message);
  if (run_id > 0) printf("stored as run %lld in %s\n", (long long)run_id, store_path(s));
}

static void json_extra(yajl_gen g, const char *predictor, const backend_plan *p, const backend_measured *m) {
  jsonw_kstr(g, "gpus", m->gpu_names);
  jsonw_kdouble(g, "scale", p->scale);
  jsonw_kbool(g, "scale_fitted", p->fitted);
  jsonw_str(g, "predicted");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "by", predictor);
  jsonw_kuint(g, "device_peak_bytes", p->predicted_device_peak);
  jsonw_kint(g, "device_peak_event", p->predicted_device_peak_seq);
  jsonw_kuint(g, "at_trace_peak_bytes", p->predicted_at_requested_peak);
  jsonw_kint(g, "trace_peak_event", p->predicted.peak_requested_seq);
  jsonw_kint(g, "peak_allocated_bytes", p->predicted.peak_allocated);
  jsonw_kint(g, "peak_reserved_bytes", p->predicted.peak_reserved);
  jsonw_kuint(g, "ooms", p->predicted.ooms);
  yajl_gen_map_close(g);
  jsonw_str(g, "measured");
  yajl_gen_map_open(g);
  jsonw_kuint(g, "device_peak_bytes", m->peak_used);
  jsonw_kint(g, "device_peak_event", m->peak_used_seq);
  jsonw_kuint(g, "at_trace_peak_bytes", m->at_requested_peak);
  jsonw_kuint(g, "at_predicted_peak_bytes", m->at_predicted_peak);
  jsonw_kdouble(g, "wall_s", m->wall_s);
  jsonw_str(g, "step_s");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < m->nsteps; i++) jsonw_double(g, m->step_s[i]);
  yajl_gen_array_close(g);
  jsonw_kuint(g, "memory_samples", m->samples);
  jsonw_kuint(g, "kernels", m->kernels);
  jsonw_kuint(g, "copies", m->copies);
  jsonw_kuint(g, "copy_pieces", m->copies + m->chunks);
  jsonw_kuint(g, "memsets", m->memsets);
  jsonw_kuint(g, "syncs", m->syncs);
  jsonw_kuint(g, "host_allocs", m->host_allocs);
  jsonw_kbool(g, "paced", m->paced != BACKEND_PACE_NONE);
  if (m->paced) jsonw_kstr(g, "pace", m->paced == BACKEND_PACE_GAPS ? "gaps" : "clock");
  jsonw_kdouble(g, "pace_wait_s", m->pace_wait_s);
  yajl_gen_map_close(g);
  jsonw_str(g, "recorded");
  yajl_gen_map_open(g);
  jsonw_kdouble(g, "wall_s", (double)sim_ns_between(p->first_ts, p->last_ts) / 1e9);
  double *rec = recorded_steps(p);
  jsonw_str(g, "step_s");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < p->nsteps; i++) jsonw_double(g, rec[i]);
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
  jsonw_str(g, "error_pct");
  yajl_gen_map_open(g);
  jsonw_kdouble(g, "device_peak", error_pct((double)m->peak_used, (double)p->predicted_device_peak));
  jsonw_kdouble(g, "at_trace_peak", error_pct((double)m->at_requested_peak, (double)p->predicted_at_requested_peak));
  jsonw_kdouble(g, "wall_vs_recorded", error_pct(m->wall_s, (double)sim_ns_between(p->first_ts, p->last_ts) / 1e9));
  size_t k = first_counted(p->nsteps);
  if (p->nsteps > 1)
    jsonw_kdouble(g, "step_vs_recorded",
                  error_pct(median_of(m->step_s + k, p->nsteps - k), median_of(rec + k, p->nsteps - k)));
  free(rec);
  yajl_gen_map_close(g);
}

/* Stores the run with the measurements added to its result JSON. */
static int save_run(session *ses, const run_meta *meta, const char *predictor, const backend_plan *p,
                    const backend_measured *m, int64_t *run_id, char *err, size_t errlen) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  json_extra(g, predictor, p, m);
  yajl_gen_map_close(g);
  size_t len;
  const char *text = jsonw_text(g, &len);
  char *extra = strndup(text, len);
  yajl_gen_free(g);
  int rc = session_save(ses, meta, &m->engine, extra, SESSION_RESULT_PATCH, run_id, err, errlen);
  free(extra);
  return rc;
}

/* What the run on the GPU is, for its JSON and its stored row. */
static run_meta gpu_meta(const session_run *run, const backend_plan *plan, const backend_measured *m) {
  run_meta meta = session_meta(run);
  size_t k = first_counted(plan->nsteps);
  meta.kind = "backend";
  meta.backend = "cuda";
  meta.device = m->gpu_names;
  meta.step_time_s = plan->nsteps > 1 ? median_of(m->step_s + k, plan->nsteps - k) : m->wall_s;
  meta.samples_per_s = -1;
  if (run->trace->batch_size > 0 && meta.step_time_s > 0)
    meta.samples_per_s = (double)run->trace->batch_size / meta.step_time_s;
  return meta;
}

/* The trace's replay planned, refused or performed on the GPU, stored and printed. */
static int replay_on_gpu(cli *c, session *ses, session_run *run, const cudart_info *info, int save, int timeline,
                         const cli_gpu_opts *opts) {
  char err[1536], predictor[160];
  const store_trace *t = run->trace;
  backend_plan plan;
  backend_measured m;
  memset(&plan, 0, sizeof plan);
  memset(&m, 0, sizeof m);
  int code = CLI_FAIL;
  /* The prediction is the model of the same name with the same options: for the real
   * stream-ordered pool, the `async` model, whose options the pool takes too. */
  snprintf(predictor, sizeof predictor, "the '%s' model", run->allocator);
  gpu_ctx gc = {session_store(ses), t->id, info};
  cli_device_calls plan_calls, gpu_calls;
  cli_device_calls_init(&plan_calls, opts->device_calls, "plan");
  cli_device_calls_init(&gpu_calls, opts->device_calls, "gpu");
  const int log = opts->device_calls != NULL;
  backend_plan_config pc = {.ses = ses, .run = run, .scale = opts->scale_given ? opts->scale : 1.0,
                            .open = open_events, .open_arg = &gc, .gpu_memory = gpu_memory, .gpu_arg = &gc,
                            .watch = log ? &plan_calls.watch : NULL};
  if (backend_plan_make(&pc, &plan, err, sizeof err)) {
    cli_error("cannot plan the replay of '%s' on the GPU: %s", t->name, err);
    goto out;
  }
  if (!backend_uses_driver_pool(run) && !plan.takes_device_memory && plan.predicted.allocs) {
    cli_error("the '%s' model takes no memory from the device, so it has nothing to replay on a GPU: use cuda, "
              "async, or a caching model (see 'memplay help allocators')",
              run->spec->ops->name);
    goto out;
  }
  if (!plan.fits) {
    cli_error("not replaying '%s' on the GPU: %s", t->name, plan.why);
    goto out;
  }
  static const int pace[] = {[CLI_PACE_NONE] = BACKEND_PACE_NONE, [CLI_PACE_CLOCK] = BACKEND_PACE_CLOCK,
                             [CLI_PACE_GAPS] = BACKEND_PACE_GAPS};
  backend_run_config rc = {.ses = ses, .run = run, .pace = pace[opts->pace], .open = open_events, .open_arg = &gc,
                           .watch = log ? &gpu_calls.watch : NULL};
  if (backend_cuda_run(&rc, &plan, &m, err, sizeof err)) {
    cli_error("cannot replay '%s' on the GPU under %s: %s", t->name, run->allocator, err);
    goto out;
  }
  run_meta meta = gpu_meta(run, &plan, &m);
  int64_t run_id = 0;
  if (save && save_run(ses, &meta, predictor, &plan, &m, &run_id, err, sizeof err)) {
    cli_error("%s", err);
    goto out;
  }
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    yajl_gen_map_open(g);
    session_json(ses, g, &meta, &m.engine, timeline);
    json_extra(g, predictor, &plan, &m);
    if (run_id) jsonw_kint(g, "run_id", run_id);
    yajl_gen_map_close(g);
    yajl_gen_free(g);
    putchar('\n');
  } else {
    print_human(t, run->allocator, predictor, &plan, &m, run_id, session_store(ses));
  }
  code = CLI_OK;
out:
  backend_measured_release(&m);
  backend_plan_release(&plan);
  return code;
}

int cli_replay_gpu(cli *c, const char *trace, const char *alloc, uint64_t capacity, int stop_at_oom, int save,
                   int timeline, const cli_gpu_opts *opts) {
  char err[1536];
  if (check_spec(alloc)) return CLI_USAGE;
  cudart_info *info = calloc(1, sizeof *info);
  if (cudart_probe(info, err, sizeof err)) {
    cli_error("cannot replay on a GPU: %s", err);
    free(info);
    return CLI_FAIL;
  }
  store *s = cli_open_store(c, 0);
  if (!s) {
    free(info);
    return CLI_FAIL;
  }
  int code = CLI_FAIL;
  store_trace t;
  memset(&t, 0, sizeof t);
  session *ses = session_new(s);
  session_run run;
  memset(&run, 0, sizeof run);
  if (store_trace_find(s, trace, &t)) {
    cli_error("%s", store_error(s));
    goto out;
  }
  /* Default: the allocator that recorded the trace, when it is one memplay has; else cudaMalloc.
   * The GPU measures time itself: no device profile. */
  session_request req;
  session_request_init(&req);
  req.trace = &t;
  req.allocator = alloc;
  req.fallback_allocator = "cuda";
  req.no_device = 1;
  req.capacity = capacity;
  req.stop_at_oom = stop_at_oom;
  req.use_environment = 1;
  int rc = session_prepare(ses, &req, &run, err, sizeof err);
  if (rc) {
    code = rc == SESSION_EUSAGE ? cli_usage_error("replay", "%s", err) : (cli_error("%s", err), CLI_FAIL);
    goto out;
  }
  code = replay_on_gpu(c, ses, &run, info, save, timeline, opts);
out:
  session_run_release(&run);
  session_free(ses);
  store_trace_clear(&t);
  store_close(s);
  free(info);
  return code;
}

#endif

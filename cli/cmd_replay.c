/* cmd_replay.c: `memplay replay TRACE`: one trace through one allocator model, stored as a run. */
#include <stdlib.h>
#include <string.h>

#include "store/devices_store.h"
#include "store/store_runs.h"
#include "engine/engine.h"
#include "io/jsonw.h"
#include "engine/report.h"
#include "store/store_source.h"
#include "engine/time_observer.h"
#include "cli.h"

static const char *const replay_usage[] = {
  "memplay replay TRACE [--allocator SPEC] [--capacity SIZE] [--device NAME] [--timing OPTIONS] [--stop-at-oom]",
  "                     [--timeline] [--no-save] [--check] [--backend sim|cuda] [--scale F|fit] [--pace]",
  "                     [--db FILE] [--json]",
  "  --allocator SPEC  model and options, e.g. torch:expandable_segments:True or bfc:allow_growth=true",
  "                    (default: the allocator that recorded the trace, else ideal)",
  "  --capacity SIZE   device memory the process may use (default: the --device profile's, else unlimited)",
  "  --device NAME     predict time on this device profile (see 'memplay devices'; default: the profile that",
  "                    matches the trace's recorded device, if any)",
  "  --timing OPTIONS  time model options, e.g. copies=recorded,device_waits=drop (see docs/timemodel.md):",
  "                    copies=model|recorded device_waits=keep|drop dependencies=infer|off",
  "                    kernel_scale=FACTOR malloc_syncs=true|false batch=SAMPLES_PER_STEP",
  "  --stop-at-oom     stop at the first allocation that does not fit",
  "  --timeline        include the downsampled timeline in --json output",
  "  --no-save         do not store the run",
  "  --check           check the model's invariants after every event (slow)",
  "  --backend NAME    sim (default), or cuda: perform the trace on the GPU and measure it (docs/gpu.md)",
  "  --scale F|fit     cuda backend: multiply every size by F (0 < F <= 1), or by the largest factor that fits",
  "  --pace            cuda backend: issue each event no earlier than its recorded host time",
  NULL,
};
const cli_usage cmd_replay_usage = {
  .summary = "replay a trace through an allocator model: peaks, fragmentation, OOMs, and time on a device",
  .lines = replay_usage,
};

static const char *env_lookup(const char *name) { return getenv(name); }

static double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0; }

static void print_time(store *s, const store_trace *t, const run_meta *m) {
  const sim_tm_result *r = m->time;
  const sim_tm_config *c = m->time_config;
  char a[48], b[48], d[48];
  if (!strcmp(m->device_reason, "recorded"))
    printf("time on %s (%s profile, chosen for the trace's recorded device '%s')\n", m->device, m->device_source,
           t->device_name);
  else printf("time on %s (%s profile)\n", m->device, m->device_source);
  printf("  predicted           %s in total", cli_duration(a, sizeof a, (double)r->total_ns / 1e9));
  if (r->complete_steps) {
    printf(", %zu step%s of %s on average", r->complete_steps, r->complete_steps == 1 ? "" : "s",
           cli_duration(b, sizeof b, r->step_time_s));
    if (r->recorded_step_time_s >= 0)
      printf(" (recorded %s, %+.2f%%)", cli_duration(d, sizeof d, r->recorded_step_time_s),
             100.0 * (r->step_time_s - r->recorded_step_time_s) / r->recorded_step_time_s);
  }
  printf("\n");
  if (r->samples_per_s >= 0)
    printf("  throughput          %.1f samples/s (batch size %lld)\n", r->samples_per_s, (long long)c->batch_size);
  else if (r->complete_steps)
    printf("  throughput          unknown (the trace does not record its batch size: --timing batch=N)\n");
  printf("  critical path       ");
  for (int k = 0; k < SIM_TM__NCLASS; k++)
    printf("%s%s %.1f%%", k ? ", " : "", sim_tm_class_name(k), pct(r->breakdown[k], r->total_ns));
  printf("\n");
  printf("  host blocked        syncs %s, copies %s, allocation %s, ", cli_duration(a, sizeof a, (double)r->blocked_sync_ns / 1e9),
         cli_duration(b, sizeof b, (double)r->blocked_copy_ns / 1e9),
         cli_duration(d, sizeof d, (double)r->blocked_alloc_ns / 1e9));
  printf("launch queue %s\n", cli_duration(a, sizeof a, (double)r->blocked_launch_ns / 1e9));
  if (r->nitems) printf("  largest items on the critical path\n");
  for (size_t i = 0; i < r->nitems; i++) {
    char label[400];
    replay_names names = store_names(s);
    report_time_item_label(&names, &r->items[i], label, sizeof label);
    printf("    %12s %5.1f%% %8lld x  %.120s\n", cli_duration(a, sizeof a, (double)r->items[i].total_ns / 1e9),
           pct(r->items[i].total_ns, r->total_ns), (long long)r->items[i].count, label);
  }
  printf("  assumed             copies %s; device waits the trace cannot explain %s; cross-stream dependencies %s;\n"
         "                      kernels as recorded%s; cudaMalloc/cudaFree %s (docs/timemodel.md)\n",
         c->copy_timing == SIM_TM_TIMING_RECORDED ? "as recorded" : "from the profile's bandwidths",
         c->keep_device_waits ? "kept" : "dropped", c->infer_dependencies ? "inferred from recorded times" : "ignored",
         c->kernel_scale > 0 && c->kernel_scale != 1 ? " (scaled)" : "",
         c->malloc_syncs ? "synchronize the device" : "do not synchronize");
  if (r->ops_without_duration)
    printf("  note                %llu kernels have no recorded duration (taken as 0)\n",
           (unsigned long long)r->ops_without_duration);
}

static void print_human(store *s, const store_trace *t, const run_meta *m, const replay_result *r, int64_t run_id) {
  char a[48], b[48], e[48];
  printf("replay of '%s' under %s: %s events in %s", t->name, m->allocator, cli_count(e, sizeof e, r->events),
         cli_duration(a, sizeof a, r->elapsed_s));
  if (r->elapsed_s > 0) printf(" (%.1f M events/s)", (double)r->events / r->elapsed_s / 1e6);
  printf("\n");
  printf("  peak allocated      %-12s at event %lld\n", report_bytes(a, sizeof a, r->peak_allocated),
         (long long)r->peak_allocated_seq);
  printf("  peak reserved       %-12s at event %lld\n", report_bytes(a, sizeof a, r->peak_reserved),
         (long long)r->peak_reserved_seq);
  printf("  peak requested      %s\n", report_bytes(a, sizeof a, r->peak_requested));
  printf("  fragmentation       %.1f%% at the peak (reserved %s, largest free block %s)\n", 100 * r->fragmentation,
         report_bytes(a, sizeof a, r->at_peak_reserved), report_bytes(b, sizeof b, (int64_t)r->at_peak_largest_free));
  printf("  device calls        %llu malloc, %llu free", (unsigned long long)r->device_mallocs,
         (unsigned long long)r->device_frees);
  if (r->device_maps || r->device_unmaps)
    printf(", %llu map, %llu unmap", (unsigned long long)r->device_maps, (unsigned long long)r->device_unmaps);
  printf("\n");
  if (m->capacity == UINT64_MAX) printf("  OOMs                %llu (capacity unlimited)\n", (unsigned long long)r->ooms);
  else
    printf("  OOMs                %llu against a capacity of %s%s\n", (unsigned long long)r->ooms,
           report_bytes(a, sizeof a, (int64_t)m->capacity), r->stopped_at_oom ? " (stopped at the first)" : "");
  for (size_t i = 0; i < r->noom_list && i < 5; i++)
    printf("    event %lld: %s\n", (long long)r->oom_list[i].seq, r->oom_list[i].message);
  if (r->noom_list > 5) printf("    ... %llu more\n", (unsigned long long)(r->ooms - 5));
  if (r->host_pinned_peak || r->host_pageable_peak)
    printf("  host memory         pinned peak %s, pageable peak %s\n", report_bytes(a, sizeof a, r->host_pinned_peak),
           report_bytes(b, sizeof b, r->host_pageable_peak));
  if (r->unknown_frees || r->dropped_frees || r->duplicate_allocs)
    printf("  skipped             %llu frees of unknown addresses, %llu frees of dropped allocations, %llu repeated "
           "allocations\n",
           (unsigned long long)r->unknown_frees, (unsigned long long)r->dropped_frees,
           (unsigned long long)r->duplicate_allocs);
  printf("live at the peak, by category (requested bytes)\n");
  for (int k = 0; k < SIM_CAT__COUNT; k++)
    if (r->category_bytes[k])
      printf("  %-18s %12s  %5.1f%%\n", sim_category_name(k), report_bytes(a, sizeof a, r->category_bytes[k]),
             r->peak_requested ? 100.0 * (double)r->category_bytes[k] / (double)r->peak_allocated : 0);
  if (r->nsites) printf("largest call sites at the peak\n");
  for (size_t i = 0; i < r->nsites; i++) {
    char *label = store_stack_label(s, r->sites[i].stack);
    printf("  %12s  %6lld x  %s\n", report_bytes(a, sizeof a, r->sites[i].bytes), (long long)r->sites[i].count, label);
    free(label);
  }
  if (m->time) print_time(s, t, m);
  else if (t->device_name && *t->device_name)
    printf("time: no prediction (the trace's device '%s' matches no profile; name one with --device)\n", t->device_name);
  else printf("time: no prediction (name a device profile with --device)\n");
  if (run_id > 0) printf("stored as run %lld in %s\n", (long long)run_id, store_path(s));
}

int cmd_replay(int argc, char **argv, cli *c) {
  const char *device = NULL, *timing = NULL; /* --device, --timing: the time model */
  static const struct option opts[] = {
    {"allocator", required_argument, NULL, 'a'},
    {"device", required_argument, NULL, 'd'},
    {"timing", required_argument, NULL, 't'},
    {"capacity", required_argument, NULL, 'c'},
    {"stop-at-oom", no_argument, NULL, 'S'},
    {"timeline", no_argument, NULL, 'T'},
    {"no-save", no_argument, NULL, 'N'},
    {"check", no_argument, NULL, 'K'},
    {"backend", required_argument, NULL, 'B'},
    {"scale", required_argument, NULL, 'X'},
    {"pace", no_argument, NULL, 'P'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
  };
  const char *alloc = NULL;
  uint64_t capacity = UINT64_MAX;
  int stop = 0, timeline = 0, save = 1, check = 0, opt, code = CLI_OK;
  cli_gpu_opts gpu = {0};
  while ((opt = cli_getopt(argc, argv, "ha:c:", opts)) != -1) {
    int r = cli_common_option(c, "replay", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    switch (opt) {
    case 'a': alloc = optarg; break;
    case 'd': device = optarg; break;
    case 't': timing = optarg; break;
    case 'c':
      if (cli_parse_size("replay", "--capacity", optarg, &capacity)) return CLI_USAGE;
      break;
    case 'S': stop = 1; break;
    case 'T': timeline = 1; break;
    case 'N': save = 0; break;
    case 'K': check = 1; break;
    case 'B':
    case 'X':
    case 'P':
      if (cli_gpu_option(&gpu, opt, optarg)) return CLI_USAGE;
      break;
    }
  }
  if (optind + 1 != argc) return cli_usage_error("replay", optind >= argc ? "no TRACE given" : "replay takes one TRACE");
  if (gpu.on_gpu) return cli_replay_gpu(c, argv[optind], alloc, capacity, stop, save, timeline, &gpu);
  if (gpu.set) return cli_usage_error("replay", "--scale and --pace apply to '--backend cuda' only");
  char err[1024];
  sim_spec spec;
  if (alloc && sim_spec_parse(&spec, alloc, err, sizeof err) != SIM_OK) return cli_usage_error("replay", "%s", err);
  sim_tm_config tcfg = {.copy_timing = SIM_TM_TIMING_MODEL, .keep_device_waits = 1, .infer_dependencies = 1,
                        .malloc_syncs = -1, .kernel_scale = 1.0};
  if (time_options_parse(&tcfg, timing, err, sizeof err)) {
    if (alloc) sim_spec_release(&spec);
    return cli_usage_error("replay", "--timing: %s", err);
  }
  store_trace t;
  store *s = cli_open_trace(c, argv[optind], &t);
  if (!s) {
    if (alloc) sim_spec_release(&spec);
    return CLI_FAIL;
  }
  if (!alloc) {
    alloc = t.allocator && sim_allocator_find(t.allocator) ? t.allocator : "ideal";
    sim_spec_parse(&spec, alloc, err, sizeof err);
  }
  /* The device: named, or the one the trace was recorded on when a profile matches it. */
  devices_entry dev;
  const char *reason = NULL;
  int found = device ? devices_store_get(s, device, &dev, err, sizeof err)
                     : devices_store_match(s, t.device_name, t.device_memory > 0 ? (uint64_t)t.device_memory : 0, &dev,
                                           err, sizeof err);
  if (found < 0 || (device && found == 1)) {
    if (found == 1) cli_error("no device profile '%s' (see 'memplay devices')", device);
    else cli_error("%s", err);
    sim_spec_release(&spec);
    store_trace_clear(&t);
    store_close(s);
    return CLI_FAIL;
  }
  if (found == 0) reason = device ? "option" : "recorded";
  else if (timing) {
    sim_spec_release(&spec);
    store_trace_clear(&t);
    store_close(s);
    return cli_usage_error("replay", "--timing needs a device profile (--device NAME)");
  }
  if (device && capacity == UINT64_MAX) capacity = dev.p.total_memory;
  /* The recorded settings belong to the allocator that recorded the trace. */
  const char *recorded = t.allocator && !strcmp(t.allocator, spec.ops->name) ? t.allocator_settings : NULL;
  replay_config cfg = {
    .spec = &spec,
    .capacity = capacity,
    .total_memory = device ? dev.p.total_memory : t.device_memory > 0 ? (uint64_t)t.device_memory : 0,
    .cc_major = reason ? dev.p.cc_major : 0,
    .cc_minor = reason ? dev.p.cc_minor : 0,
    .recorded = recorded,
    .getenv_fn = env_lookup,
    .stop_at_oom = stop,
    .check_level = check ? 2 : 0,
  };
  time_observer tobs;
  replay_observer hook;
  sim_tm_result tres;
  memset(&tres, 0, sizeof tres);
  if (reason) {
    tcfg.device = &dev.p;
    if (tcfg.batch_size <= 0) tcfg.batch_size = t.batch_size; /* --timing batch=N wins */
    /* stream-ordered pools (cudaMallocAsync) grow without synchronizing */
    if (tcfg.malloc_syncs < 0) tcfg.malloc_syncs = strcmp(spec.ops->name, "async") != 0;
    replay_names names = store_names(s);
    time_observer_init(&tobs, &tcfg, &names);
    hook = time_observer_hook(&tobs);
    cfg.observers = &hook;
    cfg.nobservers = 1;
  }
  replay_source src;
  replay_result res;
  memset(&res, 0, sizeof res);
  int64_t run_id = 0;
  run_meta m = {.trace_id = t.id, .trace_name = t.name, .kind = "replay", .allocator = alloc, .capacity = capacity,
                .backend = "sim", .step_time_s = -1, .samples_per_s = -1};
  if (store_source_open(&src, s, t.id)) {
    cli_error("%s", store_error(s));
    if (reason) time_observer_release(&tobs);
    code = CLI_FAIL;
    goto out;
  }
  int rc = replay_run(&cfg, &src, &res, err, sizeof err);
  replay_source_close(&src);
  if (reason) {
    time_observer_finish(&tobs, &tres);
    time_observer_release(&tobs);
    m.device = dev.p.name;
    m.device_source = dev.source;
    m.device_reason = reason;
    m.time = &tres;
    m.time_config = &tcfg;
    m.step_time_s = tres.step_time_s;
    m.samples_per_s = tres.samples_per_s;
  }
  if (rc) {
    cli_error("cannot replay '%s' under %s: %s", t.name, alloc, err);
    code = CLI_FAIL;
    goto out;
  }
  if (save) {
    if (store_begin(s) || store_run_save(s, &m, &res, &run_id) || store_commit(s)) {
      cli_error("%s", store_error(s));
      store_rollback(s);
      code = CLI_FAIL;
      goto out;
    }
  }
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    yajl_gen_map_open(g);
    replay_names names = store_names(s);
    report_json(g, &names, &m, &res, timeline);
    if (run_id) jsonw_kint(g, "run_id", run_id);
    yajl_gen_map_close(g);
    yajl_gen_free(g);
    putchar('\n');
  } else {
    print_human(s, &t, &m, &res, run_id);
  }
out:
  sim_tm_result_release(&tres);
  replay_result_release(&res);
  sim_spec_release(&spec);
  store_trace_clear(&t);
  store_close(s);
  return code;
}

/* cmd_replay.c: `memplay replay TRACE`: one trace through one allocator model, stored as a run. */
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "io/outfile.h"
#include "plot/plot.h"
#include "session/session.h"
#include "cli.h"
#include "progress.h"

static const char *const replay_usage[] = {
  "memplay replay TRACE [--allocator SPEC] [--capacity SIZE] [--device NAME|--no-time] [--timing OPTIONS] [--stop-at-oom]",
  "                     [--timeline] [--no-save] [--check] [--backend sim|cuda] [--scale F|fit] [--pace[=clock|gaps]]",
  "                     [--live-start] [--at peak|oom|EVENT_INDEX|TIME] [--device-calls FILE] [--no-fail] [--quiet]",
  "                     [--address-order auto|up|down]",
  "                     [--db FILE] [--json]",
  "  --allocator SPEC  model and options, e.g. torch:expandable_segments:True or bfc:allow_growth=true",
  "                    (default: the allocator that recorded the trace, else ideal)",
  "  --capacity SIZE   device memory the process may use (default: the --device profile's, else unlimited)",
  "  --device NAME     predict time on this device profile (see 'memplay devices'; default: the profile that",
  "                    matches the trace's recorded device, if any)",
  "  --no-time         no time prediction, not even on the trace's recorded device: the memory alone",
  "  --timing OPTIONS  time model options, e.g. copies=recorded,device_waits=drop (see docs/timemodel.md):",
  "                    copies=model|recorded|profile device_waits=keep|drop dependencies=infer|off",
  "                    kernels=scaled|recorded kernel_scale=FACTOR malloc_syncs=true|false",
  "                    batch=SAMPLES_PER_STEP",
  "  --stop-at-oom     stop at the first allocation that does not fit",
  "  --live-start      a recorded window starts from the blocks live then, allocated in address order on an",
  "                    empty allocator (default under the recorded allocator: the state validate rebuilds)",
  "  --timeline        include the downsampled timeline in --json output",
  "  --no-save         do not store the run",
  "  --check           check the model's invariants after every event (slow)",
  "  --no-fail         exit 0 even when an allocation does not fit (an OOM; default: exit 3 then)",
  "  --quiet           no progress line on a terminal",
  "  --backend NAME    sim (default), or cuda: perform the trace on the GPU and measure it (docs/gpu.md)",
  "  --scale F|fit     cuda backend: multiply every size by F (0 < F <= 1), or by the largest factor that fits",
  "  --pace[=clock|gaps]  cuda backend: issue each event no earlier than its recorded host time after the",
  "                    first (clock, the default), or than the previous call's return plus the recorded host",
  "                    time between the two (gaps: the host's own work between calls kept, as the time model",
  "                    keeps it)",
  "  --at MOMENT       print the allocator's state at a moment instead (stores nothing): peak, oom (the first",
  "                    allocation that did not fit), an event index, or a time since the first event (1.5s, 250ms):",
  "                    every segment with its blocks, the pools, the largest free block, fragmentation",
  "  --device-calls FILE  write every call the model makes to its device (malloc, free, reserve, map, unmap;",
  "                    refused ones too) to FILE, one line each with the memory in use before and after; with",
  "                    --backend cuda, the plan's calls and the GPU's (docs/gpu.md)",
  "  --address-order auto|up|down  which way the simulated driver hands out the addresses of cudaMallocs of",
  "                    2 MiB or more, by which the torch and async models break ties between free blocks:",
  "                    down, in slabs of 32 MiB multiples whose free ranges are reused lowest first, as the",
  "                    Linux driver does; up, never reused; auto (the default): the way the trace's recorded",
  "                    segments went, else down (docs/allocators.md, \"The simulated device\")",
  NULL,
};
const cli_usage cmd_replay_usage = {
  .summary = "replay a trace through an allocator model: peaks, fragmentation, OOMs, and time on a device",
  .lines = replay_usage,
};


static const struct option replay_options[] = {
  {"allocator", required_argument, NULL, 'a'},
  {"device", required_argument, NULL, 'd'},
  {"no-time", no_argument, NULL, 'n'},
  {"timing", required_argument, NULL, 't'},
  {"capacity", required_argument, NULL, 'c'},
  {"stop-at-oom", no_argument, NULL, 'S'},
  {"live-start", no_argument, NULL, 'L'},
  {"timeline", no_argument, NULL, 'T'},
  {"no-save", no_argument, NULL, 'N'},
  {"check", no_argument, NULL, 'K'},
  {"backend", required_argument, NULL, 'B'},
  {"scale", required_argument, NULL, 'X'},
  {"pace", optional_argument, NULL, 'P'},
  {"at", required_argument, NULL, 'A'},
  {"no-fail", no_argument, NULL, 'F'},
  {"quiet", no_argument, NULL, 'q'},
  {"device-calls", required_argument, NULL, 'Y'},
  {"address-order", required_argument, NULL, 'O'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

static double pct(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * (double)part / (double)whole : 0; }

static void print_time(const replay_names *names, const store_trace *t, const run_meta *m) {
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
    report_time_item_label(names, &r->items[i], label, sizeof label);
    printf("    %12s %5.1f%% %8lld x  %.120s\n", cli_duration(a, sizeof a, (double)r->items[i].total_ns / 1e9),
           pct(r->items[i].total_ns, r->total_ns), (long long)r->items[i].count, label);
  }
  printf("  assumed             copies %s; device waits the trace cannot explain %s; cross-stream dependencies %s;\n"
         "                      kernels %s%s; cudaMalloc/cudaFree %s (docs/timemodel.md)\n",
         c->copy_timing == SIM_TM_TIMING_RECORDED ? "as recorded"
         : r->copies_fitted                      ? "fitted from the trace's own copies"
                                                 : "from the profile's bandwidths",
         c->keep_device_waits ? "kept" : "dropped", c->infer_dependencies ? "inferred from recorded times" : "ignored",
         r->device_scaled ? "scaled to this device" : "as recorded", c->kernel_scale > 0 && c->kernel_scale != 1 ? " (scaled)" : "",
         c->malloc_syncs ? "synchronize the device" : "do not synchronize");
  report_time_scaling_text(stdout, c, r);
  if (r->ops_without_duration)
    printf("  note                %llu kernels have no recorded duration (taken as 0)\n",
           (unsigned long long)r->ops_without_duration);
}

static void print_human(const session *ses, const store_trace *t, const run_meta *m, const replay_result *r,
                        int64_t run_id) {
  char a[48], b[48], e[48];
  printf("replay of '%s' under %s: %s events in %s", t->name, m->allocator, cli_count(e, sizeof e, r->events),
         cli_duration(a, sizeof a, r->elapsed_s));
  if (r->elapsed_s > 0) printf(" (%.1f M events/s)", (double)r->events / r->elapsed_s / 1e6);
  printf("\n");
  if (m->window_start) printf("  window start        %s\n", m->window_note);
  char cap[256];
  printf("  capacity            %s\n", report_capacity(cap, sizeof cap, m));
  for (size_t i = 0; i < m->nenv; i++) printf("  environment         %s (read as the framework reads it)\n", m->env[i]);
  if (m->note) printf("  note                %s\n", m->note);
  if (m->address_order)
    printf("  addresses           %s (%s)\n", m->address_order,
           !strcmp(m->address_source, "option") ? "--address-order"
           : !strcmp(m->address_source, "recorded") ? "the way the trace's recorded segments went"
           : !strcmp(m->address_source, "derived")  ? "the way its source trace's recorded segments went"
                                                    : "as the Linux driver hands them out");
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
  if (m->capacity == UINT64_MAX)
    printf("  OOMs                %llu (capacity unlimited%s)\n", (unsigned long long)r->ooms,
           r->ooms ? ": a simulated device holds at most 1 PiB" : "");
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
    char *label = replay_stack_label(session_names(ses), r->sites[i].stack);
    printf("  %12s  %6lld x  %s\n", report_bytes(a, sizeof a, r->sites[i].bytes), (long long)r->sites[i].count, label);
    free(label);
  }
  if (m->time) print_time(session_names(ses), t, m);
  else if (t->device_name && *t->device_name)
    printf("time: no prediction (the trace's device '%s' matches no profile; name one with --device)\n", t->device_name);
  else printf("time: no prediction (name a device profile with --device)\n");
  if (run_id > 0) printf("stored as run %lld in %s\n", (long long)run_id, store_path(session_store(ses)));
}

/* The options `replay` takes (those of --backend cuda are parsed by replay_gpu.c). */
typedef struct replay_opts {
  session_request req;
  int timeline, save, no_fail, quiet;
  const char *at_text; /* --at */
  session_at at;
  cli_gpu_opts gpu;
  const char *calls_path; /* --device-calls */
} replay_opts;

/* Parses the command line into *o; returns -1 to go on, else the exit code (usage, -h). */
static int parse_options(int argc, char **argv, cli *c, replay_opts *o) {
  session_request_init(&o->req);
  o->req.use_environment = 1;
  o->save = 1;
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "ha:c:", replay_options)) != -1) {
    int r = cli_common_option(c, "replay", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    switch (opt) {
    case 'a': o->req.allocator = optarg; break;
    case 'd': o->req.device = optarg; break;
    case 'n': o->req.no_device = 1; break;
    case 't': o->req.timing = optarg; break;
    case 'c':
      if (cli_parse_size("replay", "--capacity", optarg, &o->req.capacity)) return CLI_USAGE;
      break;
    case 'S': o->req.stop_at_oom = 1; break;
    case 'L': o->req.live_start = 1; break;
    case 'T': o->timeline = 1; break;
    case 'N': o->save = 0; break;
    case 'K': o->req.check = 1; break;
    case 'A': {
      char err[256];
      if (session_at_parse(optarg, &o->at, err, sizeof err)) return cli_usage_error("replay", "--at: %s", err);
      o->at_text = optarg;
      break;
    }
    case 'F': o->no_fail = 1; break;
    case 'q': o->quiet = 1; break;
    case 'Y': o->calls_path = optarg; break;
    case 'O':
      if ((o->req.address_order = session_address_order_of(optarg)) < 0)
        return cli_usage_error("replay", "--address-order wants auto, up or down, not '%s'", optarg);
      break;
    case 'B':
    case 'X':
    case 'P':
      if (cli_gpu_option(&o->gpu, opt, optarg)) return CLI_USAGE;
      break;
    }
  }
  if (optind + 1 != argc) return cli_usage_error("replay", optind >= argc ? "no TRACE given" : "replay takes one TRACE");
  if (o->req.no_device && (o->req.device || o->req.timing))
    return cli_usage_error("replay", "--no-time predicts no time: it takes no %s", o->req.device ? "--device" : "--timing");
  return -1;
}

/* Prints the result (or its JSON) of a run stored as run_id (0: not stored). */
static void print_result(cli *c, session *ses, const store_trace *t, const session_run *run, const run_meta *m,
                         int timeline, int64_t run_id) {
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    yajl_gen_map_open(g);
    session_json(ses, g, m, &run->result, timeline);
    if (run_id) jsonw_kint(g, "run_id", run_id);
    yajl_gen_map_close(g);
    yajl_gen_free(g);
    putchar('\n');
  } else {
    print_human(ses, t, m, &run->result, run_id);
  }
}

/* The state at the moment --at names: in words, or as JSON. */
static void print_moment(cli *c, session *ses, const store_trace *t, const session_run *run, const replay_moment *m) {
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    yajl_gen_map_open(g);
    jsonw_kstr(g, "trace", t->name);
    jsonw_kint(g, "trace_id", t->id);
    jsonw_kstr(g, "allocator_spec", run->allocator);
    if (run->capacity == UINT64_MAX) jsonw_kraw(g, "capacity", "null");
    else jsonw_kuint(g, "capacity", run->capacity);
    plot_moment_json(g, m);
    yajl_gen_map_close(g);
    yajl_gen_free(g);
    putchar('\n');
    return;
  }
  char cap[48] = "unlimited";
  if (run->capacity != UINT64_MAX) report_bytes(cap, sizeof cap, (int64_t)run->capacity);
  printf("state of '%s' under %s (capacity %s) at ", t->name, run->allocator, cap);
  if (!strcmp(m->what, "peak")) printf("the peak of allocated memory, event %lld\n", (long long)m->seq);
  else if (!strcmp(m->what, "oom")) printf("the first OOM, event %lld\n", (long long)m->seq);
  else printf("event %lld\n", (long long)m->seq);
  plot_moment_text(stdout, m, session_names(ses));
}

/* `replay --at`: the replay up to the moment, and the state there. */
static int replay_at(cli *c, session *ses, const store_trace *t, session_run *run, const replay_opts *o) {
  char err[1024];
  replay_moment m;
  int rc = session_execute_at(ses, run, NULL, &o->at, &m, err, sizeof err);
  if (rc) {
    cli_error("cannot show '%s' at %s: %s", t->name, o->at_text, err);
    replay_moment_release(&m);
    return rc == SESSION_EUSAGE ? CLI_USAGE : CLI_FAIL;
  }
  print_moment(c, ses, t, run, &m);
  replay_moment_release(&m);
  return CLI_OK;
}

/* The progress line of a replay: events seen of the trace's. */
typedef struct replay_progress {
  cli_progress line;
  uint64_t seen, total;
} replay_progress;

static void progress_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  (void)ev, (void)o;
  replay_progress *p = ctx;
  if ((++p->seen & 0xffff) == 0) cli_progress_update(&p->line, p->seen, p->total, p->seen);
}

/* The replay in simulation of trace t in the open store s. */
static int replay_sim(cli *c, store *s, store_trace *t, replay_opts *o) {
  session *ses = session_new(s);
  session_run run;
  char err[1024];
  int code = CLI_FAIL;
  o->req.trace = t;
  /* What the replay reads (device profiles, the copy fit, the events, the labels its output
   * names) in one read transaction, one snapshot of the store, as a comparison's workers do;
   * storing the run ends it, and the output's reads begin another (store_read_begin). A failure
   * to begin one leaves the reads to take their locks statement by statement. */
  store_read_begin(s);
  int rc = session_prepare(ses, &o->req, &run, err, sizeof err);
  if (rc) {
    cli_error("%s", err);
    goto out;
  }
  if (o->req.timing && !run.has_device) {
    code = cli_usage_error("replay", "--timing needs a device profile (--device NAME)");
    goto out;
  }
  if (o->at_text) {
    code = replay_at(c, ses, t, &run, o);
    goto out;
  }
  replay_progress prog = {.total = t->event_count > 0 ? (uint64_t)t->event_count : 0};
  cli_progress_init(&prog.line, "replay", "events", o->quiet);
  replay_observer obs = {.ctx = &prog, .event = progress_event};
  cli_device_calls calls;
  cli_device_calls_init(&calls, o->gpu.device_calls, "sim");
  session_pass pass = {.observers = prog.line.on ? &obs : NULL, .nobservers = prog.line.on,
                       .watch = o->gpu.device_calls ? &calls.watch : NULL};
  rc = session_execute(ses, &run, &pass, err, sizeof err);
  cli_progress_done(&prog.line);
  if (rc) {
    if (run.executed) cli_error("cannot replay '%s' under %s: %s", t->name, run.allocator, err);
    else cli_error("%s", err);
    goto out;
  }
  run_meta m = session_meta(&run);
  int64_t run_id = 0;
  if (o->save && session_save(ses, &m, &run.result, NULL, SESSION_RESULT_REPORT, &run_id, err, sizeof err)) {
    cli_error("the replay of '%s' finished but cannot be stored in '%s': %s (--no-save replays without storing)",
              t->name, store_path(s), err);
    goto out;
  }
  store_read_begin(s);
  print_result(c, ses, t, &run, &m, o->timeline, run_id);
  store_read_end(s);
  /* An OOM (against the capacity, or an allocator's own limit) means the job does not fit: the
   * answer is "no". */
  code = run.result.ooms && !o->no_fail ? CLI_NO : CLI_OK;
out:
  store_read_end(s);
  session_run_release(&run);
  session_free(ses);
  return code;
}

/* The replay, on the GPU or in simulation, with the --device-calls file open around it. */
static int replay_trace(cli *c, const char *trace, replay_opts *o) {
  char err[1024];
  outfile *calls = NULL;
  if (o->calls_path) {
    if (!(calls = outfile_open(o->calls_path, err, sizeof err))) {
      cli_error("--device-calls: %s", err);
      return CLI_FAIL;
    }
    o->gpu.device_calls = outfile_stream(calls);
    cli_device_calls_header(o->gpu.device_calls);
  }
  int code;
  if (o->gpu.on_gpu) {
    code = cli_replay_gpu(c, trace, o->req.allocator, o->req.capacity, o->req.stop_at_oom, o->save, o->timeline,
                          &o->gpu);
  } else {
    store_trace t;
    store *s = cli_open_trace(c, trace, &t);
    if (!s) {
      outfile_abort(calls);
      return CLI_FAIL;
    }
    code = replay_sim(c, s, &t, o);
    store_trace_clear(&t);
    store_close(s);
  }
  /* kept whatever the replay's outcome: the calls up to a failure are what explains it */
  if (calls && outfile_commit(calls, err, sizeof err)) {
    cli_error("--device-calls: %s", err);
    return CLI_FAIL;
  }
  return code;
}

int cmd_replay(int argc, char **argv, cli *c) {
  replay_opts o;
  memset(&o, 0, sizeof o);
  int code = parse_options(argc, argv, c, &o);
  if (code >= 0) return code;
  const char *trace = argv[optind];
  if (o.gpu.on_gpu && o.at_text) return cli_usage_error("replay", "--at applies to the simulated replay only");
  if (o.calls_path && o.at_text) return cli_usage_error("replay", "--device-calls follows a whole replay: it takes no --at");
  if (!o.gpu.on_gpu) { /* the GPU's replay checks its own options */
    if (o.gpu.set) return cli_usage_error("replay", "--scale and --pace apply to '--backend cuda' only");
    if (o.at_text && (o.timeline || o.req.stop_at_oom))
      return cli_usage_error("replay", "--at shows one moment: it takes neither --timeline nor --stop-at-oom");
    char err[1024];
    if (o.req.allocator && session_check_allocator(o.req.allocator, err, sizeof err))
      return cli_usage_error("replay", "%s", err);
    if (o.req.timing && session_check_timing(o.req.timing, err, sizeof err))
      return cli_usage_error("replay", "--timing: %s", err);
  }
  return replay_trace(c, trace, &o);
}

/* cmd_export.c: `memplay export TRACE|run:ID --format jsonl|perfetto|csv`: a trace, or a replay's timeline, written out as a file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/exporter.h"
#include "io/outfile.h"
#include "plot/plot.h"
#include "session/session.h"
#include "store/store_runs.h"
#include "store/store_source.h"
#include "cli.h"

static const char *const export_usage[] = {
  "memplay export TRACE|run:ID [--format jsonl|perfetto|csv] [-o FILE] [--allocator SPEC] [--capacity SIZE]",
  "                            [--db FILE]",
  "  --format FORMAT   jsonl: the trace's events (default); perfetto: the Trace Event Format JSON that",
  "                    ui.perfetto.dev and chrome://tracing open (memory counters, a track per stream with its",
  "                    kernels and copies, syncs and OOMs); csv: memory over time (allocated, reserved, live",
  "                    bytes by category)",
  "  -o, --output FILE write to FILE instead of standard output",
  "  --allocator SPEC  perfetto, csv: the model a TRACE is replayed through (default: its recording's, else ideal)",
  "  --capacity SIZE   perfetto, csv: the device memory of that replay (default: unlimited)",
  "  run:ID            perfetto, csv: a stored run's own timeline and OOMs (with its trace's kernels and copies)",
  NULL,
};
const cli_usage cmd_export_usage = {
  .summary = "write a trace out as a file, or a replay's timeline for Perfetto or as CSV",
  .lines = export_usage,
};

static const struct option export_options[] = {
  {"format", required_argument, NULL, 'f'},
  {"output", required_argument, NULL, 'o'},
  {"allocator", required_argument, NULL, 'a'},
  {"capacity", required_argument, NULL, 'c'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

/* Buckets of the exported timeline: each keeps its lowest and highest allocated memory. */
#define EXPORT_BUCKETS 10000

typedef struct export_opts {
  const char *format, *output, *allocator, *ref;
  uint64_t capacity;
  int timeline; /* perfetto or csv: a replay's timeline, not the trace's events */
  int64_t run_id; /* > 0: run:ID */
} export_opts;

static int parse_options(int argc, char **argv, cli *c, export_opts *o) {
  memset(o, 0, sizeof *o);
  o->format = "jsonl";
  o->capacity = UINT64_MAX;
  int opt, code = CLI_OK;
  char err[256];
  while ((opt = cli_getopt(argc, argv, "hf:o:a:c:", export_options)) != -1) {
    int r = cli_common_option(c, "export", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    if (opt == 'f') o->format = optarg;
    else if (opt == 'o') o->output = optarg;
    else if (opt == 'a') {
      if (session_check_allocator(optarg, err, sizeof err)) return cli_usage_error("export", "%s", err);
      o->allocator = optarg;
    } else if (opt == 'c' && cli_parse_size("export", "--capacity", optarg, &o->capacity)) {
      return CLI_USAGE;
    }
  }
  if (optind + 1 != argc) return cli_usage_error("export", optind >= argc ? "no TRACE given" : "export takes one TRACE");
  o->ref = argv[optind];
  o->timeline = !strcmp(o->format, "perfetto") || !strcmp(o->format, "csv");
  if (!o->timeline && !exporter_find(o->format))
    return cli_usage_error("export", "unknown format '%s' (accepted: jsonl, perfetto, csv)", o->format);
  if (!strncmp(o->ref, "run:", 4)) {
    char *end;
    long long id = strtoll(o->ref + 4, &end, 10);
    if (!o->ref[4] || *end || id <= 0) return cli_usage_error("export", "'%s' is not a run (run:ID, ID > 0)", o->ref);
    if (!o->timeline) return cli_usage_error("export", "a run exports as perfetto or csv, not '%s'", o->format);
    if (o->allocator || o->capacity != UINT64_MAX)
      return cli_usage_error("export", "a run is exported as it ran: it takes no --allocator or --capacity");
    o->run_id = id;
  } else if (!o->timeline && (o->allocator || o->capacity != UINT64_MAX)) {
    return cli_usage_error("export", "--allocator and --capacity apply to perfetto and csv only");
  }
  return -1;
}

/* The timeline written out: CSV from the series, or the Trace Event Format with pf's slices. */
static int write_timeline(const plot_series *s, plot_perfetto *pf, FILE *f) {
  if (pf) return plot_perfetto_write(pf, s, f);
  return plot_write_csv(s, f);
}

/* perfetto or csv of a trace: replayed through the model asked for. */
static int export_replay(const export_opts *o, store *s, const store_trace *t, FILE *f, char *err, size_t errlen) {
  session *ses = session_new(s);
  session_request req;
  session_request_init(&req);
  req.trace = t;
  req.allocator = o->allocator;
  req.capacity = o->capacity;
  req.no_device = 1;
  session_run run;
  plot_series series;
  plot_perfetto *pf = NULL;
  int code = CLI_FAIL, rc = session_prepare(ses, &req, &run, err, errlen);
  if (rc) {
    session_free(ses);
    return rc == SESSION_EUSAGE ? CLI_USAGE : CLI_FAIL;
  }
  plot_series_init(&series, run.allocator, run.capacity, EXPORT_BUCKETS);
  replay_observer obs[2] = {plot_series_observer(&series)};
  size_t nobs = 1;
  if (!strcmp(o->format, "perfetto")) {
    char process[512];
    snprintf(process, sizeof process, "memplay: %s under %s", t->name, run.allocator);
    pf = plot_perfetto_new(session_names(ses), process);
    obs[nobs++] = plot_perfetto_observer(pf);
  }
  session_pass pass = {.observers = obs, .nobservers = nobs};
  if (!session_execute(ses, &run, &pass, err, errlen)) {
    if (write_timeline(&series, pf, f)) snprintf(err, errlen, "cannot write: %s", strerror(errno));
    else code = CLI_OK;
  }
  plot_perfetto_free(pf);
  plot_series_release(&series);
  session_run_release(&run);
  session_free(ses);
  return code;
}

/* The trace's kernels, copies and syncs into pf, with the stored run's OOMs at their events. */
static int run_events(store *s, int64_t trace_id, const replay_result *r, plot_perfetto *pf, char *err, size_t errlen) {
  replay_source src;
  if (store_source_open(&src, s, trace_id)) {
    snprintf(err, errlen, "%s", store_error(s));
    return -1;
  }
  replay_observer obs = plot_perfetto_observer(pf);
  sim_event ev;
  size_t k = 0;
  int rc;
  while ((rc = replay_source_next(&src, &ev)) > 0) {
    obs.event(obs.ctx, &ev, NULL);
    for (; k < r->noom_list && r->oom_list[k].seq == ev.seq; k++) plot_perfetto_oom(pf, ev.seq, ev.ts, r->oom_list[k].size);
  }
  if (rc < 0) snprintf(err, errlen, "%s", src.error ? src.error(src.ctx) : "cannot read events");
  replay_source_close(&src);
  return rc < 0 ? -1 : 0;
}

/* perfetto or csv of a stored run: its own timeline and OOMs. */
static int export_run(const export_opts *o, store *s, FILE *f, char *err, size_t errlen) {
  store_run_row row;
  replay_result r;
  int rc = store_run_load(s, o->run_id, &row, &r);
  if (rc) {
    if (rc > 0) snprintf(err, errlen, "there is no run %lld in '%s'", (long long)o->run_id, store_path(s));
    else snprintf(err, errlen, "%s", store_error(s));
    return CLI_FAIL;
  }
  if (row.lean) {
    snprintf(err, errlen, "run %lld was a lean replay: it kept no timeline to export (replay without lean = true)",
             (long long)row.id);
    replay_result_release(&r);
    store_run_row_clear(&row);
    return CLI_FAIL;
  }
  char label[512];
  snprintf(label, sizeof label, "run %lld: %s under %s", (long long)row.id, row.trace_name ? row.trace_name : "?",
           row.allocator ? row.allocator : "?");
  plot_series series;
  plot_series_from_result(&series, label, row.capacity, &r);
  plot_perfetto *pf = NULL;
  int code = CLI_OK;
  replay_names names = store_names(s); /* the slices' names, read when the file is written */
  if (!strcmp(o->format, "perfetto")) {
    pf = plot_perfetto_new(&names, label);
    if (run_events(s, row.trace_id, &r, pf, err, errlen)) code = CLI_FAIL;
  }
  if (code == CLI_OK && write_timeline(&series, pf, f)) {
    snprintf(err, errlen, "cannot write: %s", strerror(errno));
    code = CLI_FAIL;
  }
  plot_perfetto_free(pf);
  plot_series_release(&series);
  replay_result_release(&r);
  store_run_row_clear(&row);
  return code;
}

/* The export into f: CLI_OK, a CLI_* code with the message in err, or minus a code already reported. */
static int export_to(cli *c, const export_opts *o, FILE *f, char *err, size_t errlen) {
  if (o->run_id) {
    store *s = cli_open_store(c, 0);
    if (!s) return -CLI_FAIL;
    int code = export_run(o, s, f, err, errlen);
    store_close(s);
    return code;
  }
  store_trace t;
  store *s = cli_open_trace(c, o->ref, &t);
  if (!s) return -CLI_FAIL;
  int code = CLI_OK;
  if (o->timeline) {
    code = export_replay(o, s, &t, f, err, errlen);
  } else if (exporter_find(o->format)->write(s, &t, f, err, errlen)) {
    code = CLI_FAIL;
  }
  store_trace_clear(&t);
  store_close(s);
  return code;
}

int cmd_export(int argc, char **argv, cli *c) {
  export_opts o;
  int code = parse_options(argc, argv, c, &o);
  if (code >= 0) return code;
  char err[1024] = "";
  /* The output writer renames over a regular file (so a failure leaves it whole) and writes
   * standard output, a FIFO, device or terminal directly (io/outfile.h). */
  outfile *out = outfile_open(o.output, err, sizeof err);
  if (!out) {
    cli_error("%s", err);
    return CLI_FAIL;
  }
  code = export_to(c, &o, outfile_stream(out), err, sizeof err);
  if (code < 0) { /* the store or trace could not be opened: already said */
    outfile_abort(out);
    return -code;
  }
  if (code != CLI_OK) {
    cli_error("cannot export '%s': %s", o.ref, err);
    outfile_abort(out);
    return code;
  }
  if (outfile_commit(out, err, sizeof err)) {
    cli_error("%s", err);
    return CLI_FAIL;
  }
  return CLI_OK;
}

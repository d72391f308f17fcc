/* cmd_plot.c: `memplay plot TRACE -o FILE.svg|FILE.html`: memory over time under one or more allocators, and the segment map at a moment. */
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "io/outfile.h"
#include "plot/plot.h"
#include "session/session.h"
#include "cli.h"

static const char *const plot_usage[] = {
  "memplay plot TRACE -o FILE.svg|FILE.html [--allocator SPEC]... [--capacity SIZE] [--device NAME]",
  "                   [--at peak|oom|EVENT_INDEX|TIME] [--format svg|html] [--title TEXT] [--db FILE]",
  "  -o, --output FILE  the picture: SVG, or one self-contained HTML page (hover details, zoom on time)",
  "  --allocator SPEC   a model and its options; repeat it to overlay several runs of the trace",
  "                     (default: the allocator that recorded the trace, else ideal)",
  "  --capacity SIZE    device memory the process may use (drawn as a line; default: unlimited)",
  "  --device NAME      the device profile whose memory is the capacity",
  "  --at MOMENT        add each run's segment map at that moment: peak, oom, an event index, or a time",
  "                     since the first event (1.5s, 250ms)",
  "  --format FORMAT    svg or html (default: from the file's extension)",
  "  --title TEXT       the picture's title (default: the trace's name)",
  NULL,
};
const cli_usage cmd_plot_usage = {
  .summary = "draw memory over time (and the segment map at the peak or an OOM) as SVG or HTML",
  .lines = plot_usage,
};

static const struct option plot_options[] = {
  {"output", required_argument, NULL, 'o'},
  {"allocator", required_argument, NULL, 'a'},
  {"capacity", required_argument, NULL, 'c'},
  {"device", required_argument, NULL, 'd'},
  {"at", required_argument, NULL, 't'},
  {"format", required_argument, NULL, 'f'},
  {"title", required_argument, NULL, 'T'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

#define PLOT_MAX_RUNS 8

typedef struct plot_opts {
  const char *output, *format, *title, *device, *at_text;
  const char *allocators[PLOT_MAX_RUNS];
  size_t nallocators;
  uint64_t capacity;
  session_at at;
  int html;
} plot_opts;

/* 1: HTML, 0: SVG, -1: neither (the format named, else the file's extension). */
static int html_format(const char *format, const char *output) {
  if (format) return !strcmp(format, "html") ? 1 : !strcmp(format, "svg") ? 0 : -1;
  const char *dot = strrchr(output, '.');
  if (!dot) return -1;
  return !strcmp(dot, ".html") || !strcmp(dot, ".htm") ? 1 : !strcmp(dot, ".svg") ? 0 : -1;
}

static int parse_options(int argc, char **argv, cli *c, plot_opts *o) {
  memset(o, 0, sizeof *o);
  o->capacity = UINT64_MAX;
  int opt, code = CLI_OK;
  char err[256];
  while ((opt = cli_getopt(argc, argv, "ho:a:c:", plot_options)) != -1) {
    int r = cli_common_option(c, "plot", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    switch (opt) {
    case 'o': o->output = optarg; break;
    case 'a':
      if (o->nallocators == PLOT_MAX_RUNS) return cli_usage_error("plot", "at most %d --allocator options", PLOT_MAX_RUNS);
      if (session_check_allocator(optarg, err, sizeof err)) return cli_usage_error("plot", "%s", err);
      o->allocators[o->nallocators++] = optarg;
      break;
    case 'c':
      if (cli_parse_size("plot", "--capacity", optarg, &o->capacity)) return CLI_USAGE;
      break;
    case 'd': o->device = optarg; break;
    case 't':
      if (session_at_parse(optarg, &o->at, err, sizeof err)) return cli_usage_error("plot", "--at: %s", err);
      o->at_text = optarg;
      break;
    case 'f': o->format = optarg; break;
    case 'T': o->title = optarg; break;
    }
  }
  if (optind + 1 != argc) return cli_usage_error("plot", optind >= argc ? "no TRACE given" : "plot takes one TRACE");
  if (!o->output) return cli_usage_error("plot", "no output file given (-o FILE.svg or -o FILE.html)");
  o->html = html_format(o->format, o->output);
  if (o->html < 0)
    return cli_usage_error("plot", o->format ? "unknown format '%s' (accepted: svg, html)"
                                             : "cannot tell the format of '%s' (name it .svg or .html, or give --format)",
                           o->format ? o->format : o->output);
  if (!o->nallocators) o->allocators[o->nallocators++] = NULL;
  return -1;
}

/* One run: its series, and its state at the moment asked for. */
typedef struct plot_run {
  session_run run;
  plot_series series;
  replay_moment moment;
  int prepared, has_series, has_moment;
} plot_run;

static int run_one(session *ses, const store_trace *t, const plot_opts *o, const char *alloc, plot_run *pr, char *err,
                   size_t errlen) {
  session_request req;
  session_request_init(&req);
  req.trace = t;
  req.allocator = alloc;
  req.capacity = o->capacity;
  req.device = o->device;
  req.no_device = !o->device; /* the time model is not drawn */
  int rc = session_prepare(ses, &req, &pr->run, err, errlen);
  if (rc) return rc == SESSION_EUSAGE ? CLI_USAGE : CLI_FAIL;
  pr->prepared = 1;
  plot_series_init(&pr->series, pr->run.allocator, pr->run.capacity, 0);
  pr->has_series = 1;
  replay_observer obs = plot_series_observer(&pr->series);
  session_pass pass = {.observers = &obs, .nobservers = 1};
  if (session_execute(ses, &pr->run, &pass, err, errlen)) return CLI_FAIL;
  if (!o->at_text) return CLI_OK;
  session_at at = o->at;
  if (at.kind == SESSION_AT_PEAK) { /* the first pass found it */
    at.kind = SESSION_AT_EVENT;
    at.value = pr->run.result.peak_allocated_seq;
    if (at.value < 0) {
      snprintf(err, errlen, "'%s' allocates no device memory: it has no peak", t->name);
      return CLI_USAGE; /* a moment that never comes, as replay --at peak */
    }
  }
  replay_result whole;
  session_take_result(&pr->run, &whole);
  rc = session_execute_at(ses, &pr->run, NULL, &at, &pr->moment, err, errlen);
  if (pr->run.executed) replay_result_release(&pr->run.result);
  pr->run.result = whole;
  pr->run.executed = 1;
  /* the moment never came (exit 2, as replay --at), or the replay failed */
  if (rc) return rc == SESSION_EUSAGE ? CLI_USAGE : CLI_FAIL;
  pr->has_moment = 1;
  if (o->at.kind == SESSION_AT_PEAK) snprintf(pr->moment.what, sizeof pr->moment.what, "peak");
  return CLI_OK;
}

static int write_page(const plot_opts *o, const store_trace *t, store *s, plot_run *runs, size_t n, outfile *out) {
  const plot_series *series[PLOT_MAX_RUNS];
  plot_map maps[PLOT_MAX_RUNS];
  size_t nmaps = 0;
  for (size_t i = 0; i < n; i++) {
    series[i] = &runs[i].series;
    if (runs[i].has_moment) maps[nmaps++] = (plot_map){runs[i].run.allocator, &runs[i].moment};
  }
  char title[512];
  snprintf(title, sizeof title, "%s", o->title ? o->title : t->name);
  plot_figure fig = {.title = title, .series = series, .nseries = n, .maps = maps, .nmaps = nmaps};
  plot_page page = {.title = title, .figures = &fig, .nfigures = 1, .frames = plot_store_frames, .frames_arg = s};
  char err[1024];
  if (o->html) plot_write_html(&page, outfile_stream(out));
  else plot_write_svg(&page, outfile_stream(out));
  if (outfile_commit(out, err, sizeof err)) {
    cli_error("%s", err);
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* --json: what was drawn, for scripts. */
static void print_json(const plot_opts *o, const store_trace *t, const plot_run *runs, size_t n) {
  yajl_gen g = jsonw_file(stdout, 0);
  yajl_gen_map_open(g);
  jsonw_kstr(g, "output", o->output);
  jsonw_kstr(g, "format", o->html ? "html" : "svg");
  jsonw_kstr(g, "trace", t->name);
  jsonw_str(g, "runs");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < n; i++) {
    yajl_gen_map_open(g);
    jsonw_kstr(g, "allocator", runs[i].run.allocator);
    jsonw_kint(g, "peak_allocated_bytes", runs[i].series.peak.allocated);
    jsonw_kint(g, "peak_reserved_bytes", runs[i].series.peak_reserved);
    jsonw_kuint(g, "ooms", runs[i].series.ooms_total);
    if (runs[i].has_moment) {
      jsonw_kstr(g, "at", runs[i].moment.what);
      jsonw_kint(g, "at_event", runs[i].moment.seq);
      jsonw_kuint(g, "segments", runs[i].moment.nsegments);
    }
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
  yajl_gen_free(g);
  putchar('\n');
}

int cmd_plot(int argc, char **argv, cli *c) {
  plot_opts o;
  int code = parse_options(argc, argv, c, &o);
  if (code >= 0) return code;
  char err[1024];
  store_trace t;
  store *s = cli_open_trace(c, argv[optind], &t);
  if (!s) return CLI_FAIL;
  /* the output is opened (or refused: a directory, a socket) before anything is replayed; it is
   * written, and renamed into place, only when every run has been drawn */
  outfile *out = outfile_open(o.output, err, sizeof err);
  if (!out) {
    cli_error("%s", err);
    store_trace_clear(&t);
    store_close(s);
    return CLI_FAIL;
  }
  session *ses = session_new(s);
  plot_run *runs = calloc(o.nallocators, sizeof *runs);
  code = CLI_OK;
  for (size_t i = 0; i < o.nallocators && code == CLI_OK; i++) {
    code = run_one(ses, &t, &o, o.allocators[i], &runs[i], err, sizeof err);
    if (code != CLI_OK) cli_error("cannot plot '%s': %s", t.name, err);
  }
  if (code == CLI_OK) code = write_page(&o, &t, s, runs, o.nallocators, out);
  else outfile_abort(out);
  if (code == CLI_OK && c->json) print_json(&o, &t, runs, o.nallocators);
  else if (code == CLI_OK)
    printf("wrote %s: %zu run%s of '%s'%s%s\n", o.output, o.nallocators, o.nallocators == 1 ? "" : "s", t.name,
           o.at_text ? ", segment maps at " : "", o.at_text ? o.at_text : "");
  for (size_t i = 0; i < o.nallocators; i++) {
    if (runs[i].has_series) plot_series_release(&runs[i].series);
    if (runs[i].has_moment) replay_moment_release(&runs[i].moment);
    if (runs[i].prepared) session_run_release(&runs[i].run);
  }
  free(runs);
  session_free(ses);
  store_trace_clear(&t);
  store_close(s);
  return code;
}

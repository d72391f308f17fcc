/* cmd_compare.c: `memplay compare TRACE... --policy SPEC...`: traces x policies through the replay session, for CI. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare_html/compare_html.h"
#include "io/outfile.h"
#include "compare_cli.h"
#include "progress.h"
#include "cli.h"

static const char *const compare_usage[] = {
  "memplay compare TRACE... --policy SPEC [--policy SPEC]... [--reference N] [--device NAME|--no-time] [--capacity SIZE]",
  "                [--timing OPTIONS] [--baseline FILE] [--fail-if 'METRIC OP VALUE']... [--no-fail]",
  "                [--format table|markdown|csv] [--json] [--jobs N] [--shard K/N] [--results FILE.json]",
  "                [--scenario SCRIPT [--set KEY=VALUE]...] [--html FILE.html] [--no-save] [--quiet] [--db FILE]",
  "  TRACE             a trace name or a glob pattern over the store's names ('job*')",
  "  --policy SPEC     an allocator SPEC as 'replay --allocator' takes it, optionally with its own device",
  "                    profile and capacity: torch:expandable_segments:True@H100-80GB, bfc@24GiB",
  "  --reference N     the policy the relative columns compare with (1-based; default 1)",
  "  --device NAME     device profile for every cell (time model and capacity; default: the trace's recorded",
  "                    device, if a profile matches, for time only)",
  "  --no-time         no time prediction, not even on the traces' recorded devices: memory alone",
  "  --capacity SIZE   device memory each cell may use (default: the device profile's, else unlimited)",
  "  --timing OPTIONS  time model options, as for replay",
  "  --scenario SCRIPT a what-if scenario (as whatif takes it) run in every cell with the policy as its",
  "                    allocator (and capacity and device); the cell is the scenario's last variant",
  "  --set KEY=VALUE   a parameter of the scenario",
  "  --baseline FILE   a previous compare's --json: relative thresholds compare each cell with its cell there",
  "  --fail-if EXPR    a threshold; exit 3 when a cell crosses it: 'peak_reserved > +2%' (relative: to the",
  "                    baseline, else to the reference policy), 'ooms > 0', 'fragmentation > 0.25' (absolute).",
  "                    Metrics: peak_allocated peak_reserved fragmentation device_mallocs ooms step_time",
  "                    samples_per_s; operators > >= < <=",
  "  --no-fail         exit 0 whatever the thresholds and capacities say (1 and 2 still apply)",
  "  --format NAME     table (default), markdown (a pull-request comment) or csv",
  "  --json            print the result as JSON (its fields: docs/sweeps.md)",
  "  --jobs N          cells replayed at once, each thread with its own store connection (default: the cores)",
  "  --shard K/N       run only the K-th of N shares of the cells, reading the store read-only (docs/sweeps.md)",
  "  --results FILE    also write the JSON result to FILE (a shard's results, for 'memplay merge')",
  "  --html FILE       also write a report page: the table with regressions highlighted and, per trace,",
  "                    every policy's memory over time overlaid and its segment map at its peak",
  "  --no-save         do not store the cells as runs (a shard never stores them)",
  "  --quiet           no progress line on a terminal",
  NULL,
};
const cli_usage cmd_compare_usage = {
  .summary = "compare allocator policies across traces: a table of peaks, fragmentation, OOMs and time, for CI",
  .lines = compare_usage,
};

static const struct option compare_options[] = {
  {"policy", required_argument, NULL, 'p'},
  {"reference", required_argument, NULL, 'R'},
  {"device", required_argument, NULL, 'd'},
  {"no-time", no_argument, NULL, 'T'},
  {"capacity", required_argument, NULL, 'c'},
  {"timing", required_argument, NULL, 't'},
  {"jobs", required_argument, NULL, 'j'},
  {"shard", required_argument, NULL, 'S'},
  {"no-save", no_argument, NULL, 'N'},
  {"quiet", no_argument, NULL, 'q'},
  {"scenario", required_argument, NULL, 'X'},
  {"set", required_argument, NULL, 's'},
  {"html", required_argument, NULL, 'H'},
  CLI_CMP_OUT_OPTIONS,
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

typedef struct compare_opts {
  cmp_request req;
  const char **policies;
  size_t npolicies;
  const char **params;
  char *script, *scenario;
  cli_cmp_out out;
  const char *html; /* --html FILE */
  int quiet;
} compare_opts;

/* A whole number in [lo, hi], else -1. */
static long parse_count(const char *s, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < lo || v > hi) return -1;
  return v;
}

static int parse_shard(const char *s, cmp_request *req) {
  const char *slash = strchr(s, '/');
  char k[32];
  if (!slash || (size_t)(slash - s) >= sizeof k) return -1;
  snprintf(k, sizeof k, "%.*s", (int)(slash - s), s);
  long kk = parse_count(k, 1, CMP_MAX_SHARDS), nn = parse_count(slash + 1, 1, CMP_MAX_SHARDS);
  if (kk < 0 || nn < 0 || kk > nn) return -1;
  req->shard_k = (unsigned)kk;
  req->shard_n = (unsigned)nn;
  return 0;
}

/* The cores this process may run on. */
static int default_jobs(void) {
  cpu_set_t set;
  if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* One option of compare's own: 0 ok, else the exit code. */
static int compare_option(compare_opts *o, int opt, const char *arg) {
  long v;
  switch (opt) {
  case 'p':
    o->policies = realloc(o->policies, (o->npolicies + 1) * sizeof *o->policies);
    if (!o->policies) return cli_error("out of memory"), CLI_FAIL;
    o->policies[o->npolicies++] = arg;
    return 0;
  case 'R':
    if ((v = parse_count(arg, 1, 1000000)) < 0) return cli_usage_error("compare", "--reference wants a policy's number (1, 2, ...), not '%s'", arg);
    o->req.reference = (size_t)v - 1;
    return 0;
  case 'd': o->req.device = arg; return 0;
  case 'T': o->req.no_time = 1; return 0;
  case 'c': return cli_parse_size("compare", "--capacity", arg, &o->req.capacity) ? CLI_USAGE : 0;
  case 't': o->req.timing = arg; return 0;
  case 'j':
    if ((v = parse_count(arg, 1, 4096)) < 0) return cli_usage_error("compare", "--jobs wants a number of threads >= 1, not '%s'", arg);
    o->req.jobs = (int)v;
    return 0;
  case 'S':
    if (parse_shard(arg, &o->req)) return cli_usage_error("compare", "--shard wants K/N with 1 <= K <= N, not '%s'", arg);
    return 0;
  case 'N': o->req.save = 0; return 0;
  case 'q': o->quiet = 1; return 0;
  case 'H': o->html = arg; return 0;
  case 'X':
    free(o->script);
    free(o->scenario);
    o->script = cli_find_script(arg);
    o->scenario = cli_scenario_name(o->script);
    return 0;
  case 's':
    o->params = realloc(o->params, (o->req.nparams + 1) * sizeof *o->params);
    if (!o->params) return cli_error("out of memory"), CLI_FAIL;
    o->params[o->req.nparams++] = arg;
    return 0;
  default: return 0;
  }
}

/* Parses the command line; -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, cli *c, compare_opts *o) {
  int opt, code = CLI_OK;
  o->req.capacity = UINT64_MAX;
  o->req.save = 1;
  o->req.jobs = default_jobs();
  o->out.format = CMP_FORMAT_TABLE;
  while ((opt = cli_getopt(argc, argv, "hp:j:", compare_options)) != -1) {
    int r = cli_common_option(c, "compare", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    r = cli_cmp_out_option("compare", &o->out, opt, optarg);
    if (r < 0) return CLI_USAGE;
    if (r) continue;
    if ((code = compare_option(o, opt, optarg))) return code;
  }
  if (o->req.shard_n) o->req.save = 0;
  o->req.patterns = (const char *const *)argv + optind;
  o->req.npatterns = (size_t)(argc - optind);
  o->req.policies = o->policies;
  o->req.npolicies = o->npolicies;
  o->req.params = o->params;
  o->req.scenario_path = o->script;
  o->req.scenario = o->scenario;
  char err[1024];
  if (cmp_request_check(&o->req, err, sizeof err)) return cli_usage_error("compare", "%s", err);
  if (o->script && access(o->script, R_OK) != 0)
    return cli_error("cannot open script '%s': %s", o->script, strerror(errno)), CLI_FAIL;
  return -1;
}

/* --html: the report page into out (opened before the replays; io/outfile.h), committed here. 0, or
 * CLI_FAIL after the message. */
static int write_html(outfile *out, const char *path, const char *store_path, const cmp_html *h,
                      const cmp_result *r) {
  char err[1024];
  store *s = NULL; /* the call sites of the maps' blocks, for the hover details */
  if (store_open(&s, store_path, STORE_READONLY, err, sizeof err)) s = NULL;
  int bad = cmp_html_write(h, r, s ? plot_store_frames : NULL, s, outfile_stream(out));
  store_close(s);
  if (bad) {
    outfile_abort(out);
    return cli_error("cannot write '%s'", path), CLI_FAIL;
  }
  if (outfile_commit(out, err, sizeof err)) return cli_error("%s", err), CLI_FAIL;
  return 0;
}

static void show_progress(void *arg, size_t done, size_t total, uint64_t events) {
  cli_progress_update(arg, done, total, events);
}

int cmd_compare(int argc, char **argv, cli *c) {
  compare_opts o;
  memset(&o, 0, sizeof o);
  cmp_result r, baseline;
  memset(&r, 0, sizeof r);
  memset(&baseline, 0, sizeof baseline);
  cmp_html *html = NULL;
  outfile *html_out = NULL;
  int code = parse_options(argc, argv, c, &o);
  if (code >= 0) goto out;
  code = CLI_FAIL;
  if (cli_cmp_read_baseline(&o.out, &baseline)) goto out;
  /* Not cli_open_store: a shard must not open the store for writing, even for a moment. */
  const char *path = c->db_path;
  if (!path) path = getenv("MEMPLAY_DB");
  if (!path || !*path) path = "memplay.db";
  if (access(path, F_OK) != 0) {
    cli_error("no store at '%s' (import a trace first, or name one with --db or MEMPLAY_DB)", path);
    goto out;
  }
  if (o.html) { /* the output is opened (or refused: a directory) before anything is replayed */
    char perr[1024];
    if (!(html_out = outfile_open(o.html, perr, sizeof perr))) {
      cli_error("%s", perr);
      goto out;
    }
    cmp_html_attach(html = cmp_html_new(), &o.req);
  }
  cli_progress prog;
  cli_progress_init(&prog, "compare", "cells", o.quiet);
  o.req.progress = show_progress;
  o.req.progress_arg = &prog;
  char err[1024];
  int rc = cmp_run(path, &o.req, &r, err, sizeof err);
  cli_progress_done(&prog);
  if (rc) {
    code = rc == CMP_EUSAGE ? cli_usage_error("compare", "%s", err) : (cli_error("%s", err), CLI_FAIL);
    goto out;
  }
  code = cli_cmp_finish("compare", c->json, &o.out, &r, o.out.baseline ? &baseline : NULL);
  if (html && write_html(html_out, o.html, path, html, &r)) code = CLI_FAIL;
  html_out = NULL; /* written and committed, or aborted */
out:
  outfile_abort(html_out);
  cmp_html_free(html);
  cmp_result_release(&r);
  cmp_result_release(&baseline);
  cli_cmp_out_release(&o.out);
  free(o.policies);
  free(o.params);
  free(o.script);
  free(o.scenario);
  return code;
}

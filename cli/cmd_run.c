/* cmd_run.c: `memplay run SCRIPT.lua [ARGS]` and `memplay whatif TRACE SCRIPT.lua`: a Lua script in the
 * sandbox, on its own or as a scenario against a trace whose variants are stored as runs. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/devices_store.h"
#include "io/outfile.h"
#include "lua/lua_api.h"
#include "plot/plot.h"
#include "cli.h"
#include "progress.h"

/* Set by the build (CMakeLists.txt); a build of these sources without them looks only in
 * $MEMPLAY_SCRIPTS. */
#ifndef MEMPLAY_SCRIPTS_INSTALLED
#define MEMPLAY_SCRIPTS_INSTALLED NULL
#endif
#ifndef MEMPLAY_SCRIPTS_SOURCE
#define MEMPLAY_SCRIPTS_SOURCE NULL
#endif

static const char *const whatif_usage[] = {
  "memplay whatif TRACE SCRIPT.lua [--set KEY=VALUE]... [--device NAME] [--out DIR] [--json] [--db FILE]",
  "  SCRIPT            a path, or the name of a bundled scenario (batch_size, max_batch, ...)",
  "  --set KEY=VALUE   a parameter of the scenario (its header comment lists them)",
  "  --device NAME     the device to predict for (see 'memplay devices')",
  "  --out DIR         the folder for the result files the script writes (CSV, JSON)",
  "  --json            print {\"scenario\": ..., \"variants\": [...]}; the script's own output goes to stderr",
  "  --no-save         do not store the variants as runs",
  "  --plot FILE       draw the variants' memory over time, overlaid: FILE.svg, or FILE.html (one page)",
  "  --no-fail         exit 0 even when no variant fits (every one predicts an OOM; default: exit 3 then)",
  "  --quiet           no progress line on a terminal",
  "  --max-instructions N  Lua instruction budget (default 2000000000, or 1000 an event of TRACE if more)",
  "  --max-memory SIZE     Lua memory budget (default 512MiB, or 1KiB an event of TRACE if more)",
  "  --timeout SECONDS     wall-clock budget (default: none)",
  NULL,
};
const cli_usage cmd_whatif_usage = {
  .summary = "run a what-if scenario (a Lua script) against a trace; its variants are stored as runs",
  .lines = whatif_usage,
};

static const char *const run_usage[] = {
  "memplay run [--set KEY=VALUE]... [--device NAME] [--out DIR] [--json] [--db FILE] SCRIPT.lua [ARGS]...",
  "  ARGS              given to the script as ... and arg[1..n]",
  "  --set, --device, --out, --json, --no-save, --plot, --quiet, --max-instructions, --max-memory, --timeout: as for whatif",
  NULL,
};
const cli_usage cmd_run_usage = {
  .summary = "run a Lua script with the memplay library (sandboxed)",
  .lines = run_usage,
};

/* The options both commands take. */
static const struct option lua_options[] = {
  {"set", required_argument, NULL, 's'},
  {"device", required_argument, NULL, 'd'},
  {"out", required_argument, NULL, 'o'},
  {"no-save", no_argument, NULL, 'N'},
  {"no-fail", no_argument, NULL, 'F'},
  {"quiet", no_argument, NULL, 'q'},
  {"max-instructions", required_argument, NULL, 'I'},
  {"max-memory", required_argument, NULL, 'M'},
  {"timeout", required_argument, NULL, 'T'},
  {"plot", required_argument, NULL, 'P'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

/* The options both commands take, parsed. */
typedef struct lua_opts {
  lua_param *params;
  size_t nparams, cap;
  const char *device, *out_dir;
  const char *plot; /* --plot FILE */
  lua_host_limits lim;
  int save, no_fail, quiet;
} lua_opts;

static int add_param(const char *cmd, lua_opts *o, char *arg) {
  char *eq = strchr(arg, '=');
  if (!eq || eq == arg) return cli_usage_error(cmd, "--set wants KEY=VALUE, not '%s'", arg);
  *eq = 0;
  if (o->nparams == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 8;
    o->params = realloc(o->params, o->cap * sizeof *o->params);
    if (!o->params) {
      cli_error("out of memory");
      exit(CLI_FAIL);
    }
  }
  o->params[o->nparams++] = (lua_param){arg, eq + 1, 0};
  return 0;
}

/* Handles one of the options the Lua commands share: 1 handled, 0 not ours, -1 usage error. */
static int lua_option(const char *cmd, void *opts, int opt, const char *arg) {
  lua_opts *o = opts;
  switch (opt) {
  case 's': return add_param(cmd, o, (char *)arg) ? -1 : 1;
  case 'd': o->device = arg; return 1;
  case 'o': o->out_dir = arg; return 1;
  case 'N': o->save = 0; return 1;
  case 'P': {
    const char *dot = strrchr(arg, '.');
    if (!dot || (strcmp(dot, ".svg") && strcmp(dot, ".html"))) {
      cli_usage_error(cmd, "--plot wants FILE.svg or FILE.html, not '%s'", arg);
      return -1;
    }
    o->plot = arg;
    return 1;
  }
  case 'F': o->no_fail = 1; return 1;
  case 'q': o->quiet = 1; return 1;
  case 'I': {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *end || errno || v == 0) {
      cli_usage_error(cmd, "--max-instructions wants a positive whole number, not '%s'", arg);
      return -1;
    }
    o->lim.max_instructions = v;
    return 1;
  }
  case 'M':
    if (cli_parse_size(cmd, "--max-memory", arg, &o->lim.max_memory)) return -1;
    if (o->lim.max_memory < (UINT64_C(1) << 20)) {
      cli_usage_error(cmd, "--max-memory must be at least 1MiB");
      return -1;
    }
    return 1;
  case 'T': {
    char *end;
    double v = strtod(arg, &end);
    if (!*arg || *end || !(v > 0) || v > 1e7) {
      cli_usage_error(cmd, "--timeout wants a number of seconds > 0, not '%s'", arg);
      return -1;
    }
    o->lim.timeout_s = v;
    return 1;
  }
  default: return 0;
  }
}

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/*
 * Finds a script: the path as given; else, for a bare name (no '/'), with ".lua" added when
 * missing, in $MEMPLAY_SCRIPTS, then the installed scripts folder, then the source tree's.
 */
char *cli_find_script(const char *name) {
  if (file_exists(name) || strchr(name, '/')) return strdup(name);
  size_t n = strlen(name);
  int has_ext = n > 4 && !strcmp(name + n - 4, ".lua");
  const char *dirs[3] = {getenv("MEMPLAY_SCRIPTS"), MEMPLAY_SCRIPTS_INSTALLED, MEMPLAY_SCRIPTS_SOURCE};
  for (int i = 0; i < 3; i++) {
    if (!dirs[i] || !*dirs[i]) continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s%s", dirs[i], name, has_ext ? "" : ".lua");
    if (file_exists(path)) return strdup(path);
  }
  return strdup(name);
}

const char *cli_scripts_dir(void) {
  const char *dirs[3] = {getenv("MEMPLAY_SCRIPTS"), MEMPLAY_SCRIPTS_INSTALLED, MEMPLAY_SCRIPTS_SOURCE};
  for (int i = 0; i < 3; i++) {
    struct stat st;
    if (dirs[i] && *dirs[i] && stat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) return dirs[i];
  }
  return NULL;
}

/* The scenario's name: the file name without folders and without .lua. */
char *cli_scenario_name(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  char *s = strdup(base);
  size_t n = strlen(s);
  if (n > 4 && !strcmp(s + n - 4, ".lua")) s[n - 4] = 0;
  return s;
}


static const char *status_hint(lua_host_status st) {
  switch (st) {
  case LUA_HOST_EINSTRUCTIONS: return "raise the budget with --max-instructions N";
  case LUA_HOST_EMEMORY: return "raise the budget with --max-memory SIZE";
  case LUA_HOST_ETIMEOUT: return "raise the budget with --timeout SECONDS";
  default: return NULL;
  }
}

/* --device names a profile that is not in the store (or, without a store, not built in): the
 * command line's mistake, not the script's. 1 after the message. */
static int device_unknown(store *s, const char *device) {
  devices_entry dev;
  char derr[512];
  int found = s ? devices_store_get(s, device, &dev, derr, sizeof derr) : sim_device_builtin(device) ? 0 : 1;
  if (!found) return 0;
  if (found < 0) cli_error("%s", derr);
  else cli_error("no device profile '%s' (see 'memplay devices')", device);
  return 1;
}

/* What the script left in the store: its variants, stored as runs. */
static void print_stored(const lua_ctx *cx, store *s) {
  size_t n = lua_api_nvariants(cx);
  if (n)
    fprintf(stdout, "stored %zu variant%s of %s as runs in %s\n", n, n == 1 ? "" : "s", cx->scenario, store_path(s));
}

/* --plot: the variants' memory over time, overlaid, into a temporary file beside the path (renamed
 * into place once the runs are stored). 0, or -1 after the message. */
static int plot_variants(const lua_ctx *cx, const char *path, const char *trace_ref, outfile **out) {
  const char *dot = strrchr(path, '.');
  int html = dot && !strcmp(dot, ".html");
  size_t n = lua_api_nvariants(cx);
  char err[1024];
  if (!n) return 0;
  if (!(*out = outfile_open(path, err, sizeof err))) {
    cli_error("%s", err);
    return -1;
  }
  plot_series *series = calloc(n, sizeof *series);
  const plot_series **ptrs = calloc(n, sizeof *ptrs);
  for (size_t i = 0; i < n; i++) {
    const char *name = NULL;
    const session_run *r = lua_api_variant(cx, i, &name, NULL, NULL);
    plot_series_from_result(&series[i], name, r->capacity, &r->result);
    ptrs[i] = &series[i];
  }
  char title[512];
  snprintf(title, sizeof title, "%s: %s", trace_ref ? trace_ref : "script", cx->scenario);
  plot_figure fig = {.title = title, .series = ptrs, .nseries = n};
  plot_page page = {.title = title, .figures = &fig, .nfigures = 1};
  if (html) plot_write_html(&page, outfile_stream(*out));
  else plot_write_svg(&page, outfile_stream(*out));
  for (size_t i = 0; i < n; i++) plot_series_release(&series[i]);
  free(series);
  free(ptrs);
  return 0;
}

/* The progress line of a script: replays done, events per second. */
typedef struct script_progress {
  cli_progress line;
  uint64_t replays, events;
} script_progress;

static void on_replay(void *arg, uint64_t events) {
  script_progress *p = arg;
  p->replays++;
  p->events += events;
  cli_progress_update(&p->line, p->replays, 0, p->events);
}

/* What the script prints, to `to`, erasing the progress line first (it is redrawn at the next replay). */
typedef struct script_out {
  FILE *to;
  script_progress *prog;
} script_out;

static ssize_t script_out_write(void *cookie, const char *buf, size_t n) {
  script_out *o = cookie;
  cli_progress_done(&o->prog->line);
  size_t k = fwrite(buf, 1, n, o->to);
  fflush(o->to);
  return k ? (ssize_t)k : -1;
}

/*
 * Runs a script for `whatif` (trace_ref set) or `run`: the sandboxed host, the script, then the
 * runs and result files in one go. Returns an exit code.
 */
/* The script's context: the store (when there is one, or the trace needs one), the device, the
 * parameters and the trace a whatif runs on, whose size sets the budgets the user left to lim's
 * defaults. 0, or -1 after the message. */
static int script_context(cli *c, const lua_opts *o, const char *trace_ref, lua_ctx *cx, store **s,
                          lua_host_limits *lim) {
  const char *db = c->db_path ? c->db_path : getenv("MEMPLAY_DB");
  if (!db || !*db) db = "memplay.db";
  if (trace_ref || access(db, F_OK) == 0) {
    *s = cli_open_store(c, 0);
    if (!*s) return -1;
  }
  if (o->device && device_unknown(*s, o->device)) return -1;
  cx->st = *s;
  cx->params = o->params;
  cx->nparams = o->nparams;
  cx->device = o->device;
  cx->out_dir = o->out_dir;
  cx->out = c->json ? stderr : stdout;
  cx->whatif = trace_ref != NULL;
  if (trace_ref) {
    store_trace t;
    if (store_trace_find(*s, trace_ref, &t)) {
      cli_error("%s", store_error(*s));
      return -1;
    }
    cx->trace_id = t.id;
    lua_host_limits_for_trace(lim, t.event_count > 0 ? (uint64_t)t.event_count : 0);
    store_trace_clear(&t);
  }
  return 0;
}

/* After the script ran: --plot drawn, the variants stored, the plot renamed into place, the
 * answer printed. The exit code. */
static int script_finish(cli *c, const lua_opts *o, const char *trace_ref, lua_ctx *cx, lua_host *h, store *s) {
  char err[LUA_HOST_ERRLEN];
  outfile *plot_out = NULL;
  cx->no_runs = !o->save;
  if (o->plot && plot_variants(cx, o->plot, trace_ref, &plot_out)) {
    lua_api_abort(cx);
    return CLI_FAIL;
  }
  if (lua_api_finish(cx, h, err, sizeof err)) {
    cli_error("%s", err);
    outfile_abort(plot_out);
    return CLI_FAIL;
  }
  if (plot_out && outfile_commit(plot_out, err, sizeof err)) {
    cli_error("%s", err);
    return CLI_FAIL;
  }
  if (c->json) lua_api_print_json(cx, stdout);
  else if (o->save && s) print_stored(cx, s);
  /* whatif: the answer is "no" when no variant fits (every one predicts an OOM). */
  return trace_ref && !o->no_fail && lua_api_fits(cx) == 0 ? CLI_NO : CLI_OK;
}

static int lua_run(cli *c, const char *cmd, void *opts, const char *trace_ref, const char *script_arg, int argc,
                char **argv) {
  lua_opts *o = opts;
  (void)cmd;
  char *script = cli_find_script(script_arg);
  char *scenario = cli_scenario_name(script);
  int code = CLI_FAIL;
  store *s = NULL;
  lua_host *h = NULL;
  FILE *out_wrap = NULL;
  lua_ctx cx;
  lua_ctx_init(&cx);
  cx.script = script;
  cx.scenario = scenario;
  if (!file_exists(script)) {
    cli_error("cannot open script '%s': %s", script_arg, strerror(errno ? errno : ENOENT));
    goto out;
  }
  lua_host_limits lim = o->lim;
  if (script_context(c, o, trace_ref, &cx, &s, &lim)) goto out;
  script_progress prog = {0};
  cli_progress_init(&prog.line, trace_ref ? "whatif" : "run", "replays", o->quiet);
  cx.on_replay = on_replay;
  cx.progress_arg = &prog;
  script_out sout = {cx.out, &prog};
  if (prog.line.on) {
    FILE *f = fopencookie(&sout, "w", (cookie_io_functions_t){.write = script_out_write});
    if (f) {
      setvbuf(f, NULL, _IOLBF, 0);
      cx.out = out_wrap = f;
    }
  }
  char err[LUA_HOST_ERRLEN];
  h = lua_api_host(&cx, &lim, err, sizeof err);
  if (!h) {
    cli_error("%s", err);
    goto out;
  }
  lua_host_status st = lua_host_run_file(h, script, (const char *const *)argv, argc);
  cli_progress_done(&prog.line);
  fflush(cx.out);
  if (st != LUA_HOST_OK) {
    lua_api_abort(&cx);
    cli_error("%s", lua_host_error(h));
    const char *hint = status_hint(st);
    if (hint) fprintf(stderr, "hint: %s\n", hint);
    goto out;
  }
  code = script_finish(c, o, trace_ref, &cx, h, s);
out:
  lua_host_free(h); /* before the store: the script's traces refer to it */
  if (out_wrap) fclose(out_wrap);
  lua_ctx_release(&cx);
  if (s) store_close(s);
  free(script);
  free(scenario);
  return code;
}

static void *lua_opts_new(void) {
  lua_opts *o = calloc(1, sizeof *o);
  if (!o) {
    cli_error("out of memory");
    exit(CLI_FAIL);
  }
  o->save = 1;
  return o;
}

static void lua_opts_free(void *opts) {
  lua_opts *o = opts;
  if (!o) return;
  free(o->params);
  free(o);
}

/*
 * Parses the options of run and whatif into o (shortopts "+h" stops at the first operand, the
 * script, whose own arguments follow). Returns 0, or -1 with the exit code in *code.
 */
static int lua_getopt(int argc, char **argv, cli *c, const char *cmd, const char *shortopts, void *o, int *code) {
  int opt;
  *code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, shortopts, lua_options)) != -1) {
    int r = cli_common_option(c, cmd, opt, code);
    if (r < 0) return -1;
    if (r) continue;
    if (lua_option(cmd, o, opt, optarg) < 0) {
      *code = CLI_USAGE;
      return -1;
    }
  }
  return 0;
}

int cmd_run(int argc, char **argv, cli *c) {
  void *o = lua_opts_new();
  int code;
  if (lua_getopt(argc, argv, c, "run", "+h", o, &code)) goto done;
  if (optind >= argc) {
    code = cli_usage_error("run", "no SCRIPT given");
    goto done;
  }
  code = lua_run(c, "run", o, NULL, argv[optind], argc - optind - 1, argv + optind + 1);
done:
  lua_opts_free(o);
  return code;
}

int cmd_whatif(int argc, char **argv, cli *c) {
  void *o = lua_opts_new();
  int code;
  if (lua_getopt(argc, argv, c, "whatif", "h", o, &code)) goto done;
  if (argc - optind != 2) {
    code = cli_usage_error("whatif", argc - optind < 2 ? "whatif needs a TRACE and a SCRIPT" : "whatif takes one TRACE and one SCRIPT");
    goto done;
  }
  code = lua_run(c, "whatif", o, argv[optind], argv[optind + 1], 0, NULL);
done:
  lua_opts_free(o);
  return code;
}

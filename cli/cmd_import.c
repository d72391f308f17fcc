/* cmd_import.c: `memplay import FILE...`: files into the store, one transaction each. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/importer.h"
#include "io/jsonw.h"
#include "session/session.h"
#include "sim/hashmap.h"
#include "cli.h"
#include "progress.h"

static const char *const import_usage[] = {
  "memplay import FILE... [--name NAME] [--replace] [--format FORMAT] [--set KEY=VALUE]... [--db FILE] [--json]",
  "  --name NAME       name of the new trace (one FILE only; default: the name the file gives, else its file name)",
  "  --replace         replace a trace of the same name (default: the import fails, naming that trace)",
  "  --format FORMAT   skip detection and read the file as FORMAT (see 'memplay help formats')",
  "  --set KEY=VALUE   a setting for the importer (see docs/formats.md)",
  "  --quiet           no progress line on a terminal",
  NULL,
};
const cli_usage cmd_import_usage = {
  .summary = "import trace files into the store (a file already there is named, not stored again)",
  .lines = import_usage,
};

static const struct option import_options[] = {
  {"name", required_argument, NULL, 'n'},
  {"format", required_argument, NULL, 'f'},
  {"set", required_argument, NULL, 's'},
  {"replace", no_argument, NULL, 'R'},
  {"quiet", no_argument, NULL, 'q'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

typedef struct import_args {
  char **files;                     /* FILE..., nfiles of them */
  int nfiles, replace, quiet;       /* --replace, --quiet */
  const char *name, *format;        /* --name, --format */
  const char **params;              /* --set KEY=VALUE..., NULL-terminated */
} import_args;

typedef struct imported {
  int64_t id, events;
  char *name;
} imported;

typedef struct import_report {
  imported *t;
  size_t n, cap;
} import_report;

static void on_trace(void *arg, int64_t id, const char *name, int64_t events) {
  import_report *r = arg;
  sim_grow((void **)&r->t, &r->cap, r->n + 1, sizeof *r->t);
  r->t[r->n++] = (imported){id, events, strdup(name)};
}

static void on_warning(void *arg, const char *msg) {
  (void)arg;
  cli_warning("%s", msg);
}

/* Parses the options into a (whose params has room for argc of them). 0, or -1 with the exit
 * code in *code. */
static int import_parse(int argc, char **argv, cli *c, import_args *a, int *code) {
  size_t nparams = 0;
  int opt;
  *code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "hn:f:s:", import_options)) != -1) {
    int r = cli_common_option(c, "import", opt, code);
    if (r < 0) return -1;
    if (r) continue;
    if (opt == 'n') a->name = optarg;
    else if (opt == 'R') a->replace = 1;
    else if (opt == 'q') a->quiet = 1;
    else if (opt == 'f') a->format = optarg;
    else if (opt == 's') {
      if (!strchr(optarg, '=')) {
        *code = cli_usage_error("import", "--set wants KEY=VALUE, not '%s'", optarg);
        return -1;
      }
      a->params[nparams++] = optarg;
    }
  }
  if (optind >= argc)
    *code = cli_usage_error("import", "no FILE given");
  else if (a->name && optind + 1 != argc)
    *code = cli_usage_error("import", "--name names one trace: give one FILE with it");
  else if (a->name && !*a->name)
    *code = cli_usage_error("import", "--name must not be empty");
  else if (a->format && !importer_find(a->format))
    *code = cli_usage_error("import", "unknown format '%s'", a->format);
  else {
    a->files = argv + optind;
    a->nfiles = argc - optind;
  }
  return *code == CLI_OK ? 0 : -1;
}

/* One file's outcome, as --json prints it: one object per file. */
static void print_json(yajl_gen g, const char *file, const import_ctx *ctx, const import_report *rep, int rc) {
  yajl_gen_map_open(g);
  jsonw_kstr(g, "file", file);
  if (rc) jsonw_kstr(g, "status", rc < 0 ? "failed" : "already_imported");
  if (rc < 0) jsonw_kstr(g, "error", ctx->err);
  if (rc > 0) jsonw_kstr(g, "existing_trace", ctx->existing);
  if (rc == 0) jsonw_kstr(g, "format", ctx->format);
  jsonw_str(g, "traces");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < rep->n; i++) {
    yajl_gen_map_open(g);
    jsonw_kstr(g, "name", rep->t[i].name);
    jsonw_kint(g, "id", rep->t[i].id);
    jsonw_kint(g, "events", rep->t[i].events);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
}

/* One file's summary line(s). */
static void print_human(store *s, const char *file, const import_ctx *ctx, const import_report *rep, int rc) {
  if (rc > 0) {
    printf("'%s' is in %s already, as trace '%s' (the same content): not imported again\n", file, store_path(s),
           ctx->existing);
    return;
  }
  for (size_t i = 0; i < rep->n; i++) {
    char n[32];
    printf("imported '%s' (%s events, %s) into %s\n", rep->t[i].name,
           cli_count(n, sizeof n, (uint64_t)rep->t[i].events), ctx->format, store_path(s));
  }
}

/* A store that cannot outlive this process keeps nothing an import adds. */
static int store_is_temporary(const char *path) {
  return !*path || !strcmp(path, ":memory:") || !strncmp(path, "file::memory:", 13) || strstr(path, "mode=memory");
}

/* The progress line of an import: KiB read of the file's (compressed, for gzip). */
static void on_progress(void *arg, uint64_t done, uint64_t total) {
  cli_progress_update(arg, done >> 10, total == UINT64_MAX ? 0 : total >> 10, 0);
}

/* What the first replay of an imported window would rebuild, its start state, kept now
 * (session_keep_window_start), so that no replay rebuilds it, a store read only afterwards
 * included. The imports are committed already: a failure here loses nothing of them (the
 * replays rebuild the state) and is a warning. */
static void keep_window_starts(store *s, const import_report *rep) {
  for (size_t i = 0; i < rep->n; i++) {
    char ref[32], err[512];
    store_trace t;
    snprintf(ref, sizeof ref, "%" PRId64, rep->t[i].id);
    if (store_trace_find(s, ref, &t)) continue;
    if (session_keep_window_start(s, &t, err, sizeof err) < 0)
      cli_warning("the start of the window '%s' is not kept (its replays rebuild it): %s", t.name, err);
    store_trace_clear(&t);
  }
}

/* Imports one file in its own transaction; prints its outcome. 0 imported (or there already), -1 failed. */
static int import_one(cli *c, store *s, const import_args *a, const char *file, yajl_gen g) {
  import_report rep = {0};
  unsigned policy = IMPORT_SAME_FILE | IMPORT_NAMES | (a->replace ? IMPORT_REPLACE : 0);
  cli_progress prog;
  cli_progress_init(&prog, "import", "KiB", a->quiet);
  import_ctx ctx = {.s = s, .path = file, .name = a->name, .params = a->params, .on_trace = on_trace,
                    .on_warning = on_warning, .arg = &rep, .policy = policy,
                    .on_progress = prog.on ? on_progress : NULL, .progress_arg = &prog};
  int rc = import_file(&ctx, a->format);
  cli_progress_done(&prog);
  if (rc >= 0) keep_window_starts(s, &rep);
  if (rc < 0) cli_error("%s", ctx.err);
  if (c->json) print_json(g, file, &ctx, &rep, rc);
  else if (rc >= 0) print_human(s, file, &ctx, &rep, rc);
  for (size_t i = 0; i < rep.n; i++) free(rep.t[i].name);
  free(rep.t);
  return rc < 0 ? -1 : 0;
}

int cmd_import(int argc, char **argv, cli *c) {
  import_args a = {.params = calloc((size_t)argc + 1, sizeof *a.params)};
  int code;
  if (import_parse(argc, argv, c, &a, &code)) {
    free(a.params);
    return code;
  }
  store *s = cli_open_store(c, 1);
  if (!s) {
    free(a.params);
    return CLI_FAIL;
  }
  if (store_is_temporary(store_path(s)))
    cli_warning("the store '%s' lives in memory: nothing imported will be kept when memplay exits (name a file "
                "with --db FILE)",
                store_path(s));
  /* --json: one file's object; with several files, {"files": [...], "failed": N} */
  yajl_gen g = NULL;
  if (c->json) g = jsonw_file(stdout, 0);
  if (g && a.nfiles > 1) {
    yajl_gen_map_open(g);
    jsonw_str(g, "files");
    yajl_gen_array_open(g);
  }
  int failed = 0;
  for (int i = 0; i < a.nfiles; i++) failed += import_one(c, s, &a, a.files[i], g) < 0;
  if (g && a.nfiles > 1) {
    yajl_gen_array_close(g);
    jsonw_kint(g, "failed", failed);
    yajl_gen_map_close(g);
  }
  if (g) {
    yajl_gen_free(g);
    putchar('\n');
  }
  if (failed && a.nfiles > 1)
    cli_error("%d of %d files failed to import (the others are kept)", failed, a.nfiles);
  free(a.params);
  store_close(s);
  return failed ? CLI_FAIL : CLI_OK;
}

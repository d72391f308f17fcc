/* cmd_import.c: `memplay import FILE`: one file into the store, in one transaction. */
#include <stdlib.h>
#include <string.h>

#include "import/importer.h"
#include "io/jsonw.h"
#include "sim/hashmap.h"
#include "cli.h"

static const char *const import_usage[] = {
  "memplay import FILE [--name NAME] [--format FORMAT] [--set KEY=VALUE]... [--db FILE] [--json]",
  "  --name NAME       name of the new trace (default: from the file name)",
  "  --format FORMAT   skip detection and read the file as FORMAT (see 'memplay help formats')",
  "  --set KEY=VALUE   a setting for the importer (see docs/formats.md)",
  NULL,
};
const cli_usage cmd_import_usage = {
  .summary = "import a trace file into the store",
  .lines = import_usage,
};

static const struct option import_options[] = {
  {"name", required_argument, NULL, 'n'},
  {"format", required_argument, NULL, 'f'},
  {"set", required_argument, NULL, 's'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

typedef struct import_args {
  const char *file, *name, *format; /* FILE, --name, --format */
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
    else if (opt == 'f') a->format = optarg;
    else if (opt == 's') {
      if (!strchr(optarg, '=')) {
        *code = cli_usage_error("import", "--set wants KEY=VALUE, not '%s'", optarg);
        return -1;
      }
      a->params[nparams++] = optarg;
    }
  }
  if (optind + 1 != argc)
    *code = cli_usage_error("import", optind >= argc ? "no FILE given" : "import takes one FILE");
  else if (a->name && !*a->name)
    *code = cli_usage_error("import", "--name must not be empty");
  else if (a->format && !importer_find(a->format))
    *code = cli_usage_error("import", "unknown format '%s'", a->format);
  else
    a->file = argv[optind];
  return *code == CLI_OK ? 0 : -1;
}

static void print_json(const char *file, const char *format, const import_report *rep) {
  yajl_gen g = jsonw_file(stdout, 0);
  yajl_gen_map_open(g);
  jsonw_kstr(g, "file", file);
  jsonw_kstr(g, "format", format);
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
  yajl_gen_free(g);
  putchar('\n');
}

static void print_human(store *s, const char *format, const import_report *rep) {
  for (size_t i = 0; i < rep->n; i++) {
    char n[32];
    printf("imported '%s' (%s events, %s) into %s\n", rep->t[i].name,
           cli_count(n, sizeof n, (uint64_t)rep->t[i].events), format, store_path(s));
  }
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
  import_report rep = {0};
  import_ctx ctx = {.s = s, .path = a.file, .name = a.name, .params = a.params, .on_trace = on_trace,
                    .on_warning = on_warning, .arg = &rep};
  if (import_file(&ctx, a.format)) {
    cli_error("%s", ctx.err);
    code = CLI_FAIL;
  } else if (c->json) {
    print_json(a.file, ctx.format, &rep);
  } else {
    print_human(s, ctx.format, &rep);
  }
  for (size_t i = 0; i < rep.n; i++) free(rep.t[i].name);
  free(rep.t);
  free(a.params);
  store_close(s);
  return code;
}

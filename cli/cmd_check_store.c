/* cmd_check_store.c: `memplay check-store [STORE] [TRACE...]`: SQLite's integrity check and every chunk of events decoded. */
#include <string.h>
#include <unistd.h>

#include "io/jsonw.h"
#include "cli.h"

static const char *const check_store_usage[] = {
  "memplay check-store [STORE] [TRACE...] [--db FILE] [--json]",
  "  STORE   the store file (else --db, $MEMPLAY_DB or ./memplay.db); a first argument that is",
  "          an existing file is taken as the store",
  "  TRACE   check only these traces (default: every trace, and chunks that belong to none)",
  "Runs PRAGMA integrity_check, then decodes every chunk of events: its checksum, codec and count,",
  "the seqs running on from chunk to chunk, the text form SQL reads against the packed one, and",
  "each trace's event_count. Exit 0 when all is well, 3 when a fault is found, 1 when the store",
  "cannot be read. A store of an older schema is upgraded first.",
  NULL,
};
const cli_usage cmd_check_store_usage = {
  .summary = "check a store: SQLite's integrity check and every chunk of events",
  .lines = check_store_usage,
};

static const struct option check_store_options[] = {CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};

typedef struct check_ctx {
  cli *c;
  store *s;
  yajl_gen g; /* --json: the faults, as they come */
  store_check_totals tot;
  int failed; /* the store could not be read */
} check_ctx;

static void on_fault(void *arg, const char *msg) {
  check_ctx *x = arg;
  if (x->g) jsonw_str(x->g, msg);
  else printf("fault: %s\n", msg);
}

/* Checks one trace and says how it went (text output). 0, or -1 when the store cannot be read. */
static int check_one(check_ctx *x, store *s, const store_trace *t) {
  store_check_totals before = x->tot;
  if (store_check_trace(s, t, on_fault, x, &x->tot)) return -1;
  if (!x->g) {
    char ev[32];
    printf("trace '%s': %lld chunks, %s events: %s\n", t->name, (long long)(x->tot.chunks - before.chunks),
           cli_count(ev, sizeof ev, (uint64_t)(x->tot.events - before.events)),
           x->tot.faults > before.faults ? "FAULTS" : "ok");
  }
  return 0;
}

static int check_each(void *arg, const store_trace *t) {
  check_ctx *x = arg;
  if (check_one(x, x->s, t)) x->failed = 1;
  return x->failed;
}

/* The traces named, or every one. 0, or -1. */
static int check_traces(check_ctx *x, store *s, char **refs, int nrefs) {
  if (!nrefs) return store_trace_each(s, check_each, x) || x->failed ? -1 : 0;
  for (int i = 0; i < nrefs; i++) {
    store_trace t;
    int rc = store_trace_find(s, refs[i], &t);
    if (rc) {
      cli_error("%s", store_error(s));
      return -1;
    }
    rc = check_one(x, s, &t);
    store_trace_clear(&t);
    if (rc) return -1;
  }
  return 0;
}

static void print_totals(check_ctx *x, const char *path) {
  char ev[32];
  cli_count(ev, sizeof ev, (uint64_t)x->tot.events);
  if (x->g) {
    yajl_gen_array_close(x->g);
    jsonw_kstr(x->g, "store", path);
    jsonw_kint(x->g, "traces", x->tot.traces);
    jsonw_kint(x->g, "chunks", x->tot.chunks);
    jsonw_kint(x->g, "events", x->tot.events);
    jsonw_kint(x->g, "fault_count", x->tot.faults);
    yajl_gen_map_close(x->g);
    putchar('\n');
    return;
  }
  char faults[48] = "no faults";
  if (x->tot.faults)
    snprintf(faults, sizeof faults, "%lld fault%s found", (long long)x->tot.faults, x->tot.faults == 1 ? "" : "s");
  printf("checked store '%s': %lld traces, %lld chunks, %s events: %s\n", path, (long long)x->tot.traces,
         (long long)x->tot.chunks, ev, faults);
}

int cmd_check_store(int argc, char **argv, cli *c) {
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", check_store_options)) != -1)
    if (cli_common_option(c, "check-store", opt, &code) < 0) return code;
  int first = optind;
  if (first < argc && !c->db_path && access(argv[first], F_OK) == 0) c->db_path = argv[first++];
  store *s = cli_open_store(c, 0);
  if (!s) return CLI_FAIL;
  check_ctx x = {.c = c, .s = s};
  if (c->json) {
    x.g = jsonw_file(stdout, 0);
    yajl_gen_map_open(x.g);
    jsonw_str(x.g, "faults");
    yajl_gen_array_open(x.g);
  }
  int rc = store_check_integrity(s, on_fault, &x, &x.tot);
  if (!rc) rc = check_traces(&x, s, argv + first, argc - first);
  if (rc) {
    if (store_error(s)[0]) cli_error("%s", store_error(s));
    code = CLI_FAIL;
  } else {
    print_totals(&x, store_path(s));
    code = x.tot.faults ? CLI_NO : CLI_OK;
  }
  if (x.g) yajl_gen_free(x.g);
  store_close(s);
  return cli_finish_output(code);
}

/* cmd_list.c: `memplay list`: the traces in the store. */
#include <string.h>

#include "io/jsonw.h"
#include "cli.h"

static const char *const list_usage[] = {
  "memplay list [--db FILE] [--json]",
  NULL,
};
const cli_usage cmd_list_usage = {
  .summary = "list the traces in the store",
  .lines = list_usage,
};

static const struct option list_options[] = {CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};

typedef struct list_ctx {
  cli *c;
  yajl_gen g;
  int n;
} list_ctx;

static int one(void *arg, const store_trace *t) {
  list_ctx *l = arg;
  if (l->c->json) {
    yajl_gen g = l->g;
    yajl_gen_map_open(g);
    jsonw_kint(g, "id", t->id);
    jsonw_kstr(g, "name", t->name);
    jsonw_kint(g, "events", t->event_count);
    jsonw_kstr(g, "device", t->device_name);
    jsonw_kstr(g, "source_format", t->source_format);
    jsonw_kstr(g, "source_file", t->source_file);
    jsonw_kstr(g, "imported_at", t->imported_at);
    jsonw_kstr(g, "stored_at", t->stored_at);
    yajl_gen_map_close(g);
  } else {
    char ev[32];
    if (!l->n) printf("%4s  %-32s %12s  %-18s %-16s %s\n", "id", "name", "events", "format", "device", "imported");
    printf("%4lld  %-32s %12s  %-18s %-16s %s\n", (long long)t->id, t->name, cli_count(ev, sizeof ev, (uint64_t)t->event_count),
           t->source_format, t->device_name ? t->device_name : "-", t->stored_at ? t->stored_at : t->imported_at);
  }
  l->n++;
  return 0;
}

int cmd_list(int argc, char **argv, cli *c) {
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", list_options)) != -1)
    if (cli_common_option(c, "list", opt, &code) < 0) return code;
  if (optind != argc) return cli_usage_error("list", "list takes no arguments");
  store *s = cli_open_store(c, 0);
  if (!s) return CLI_FAIL;
  list_ctx l = {c, NULL, 0};
  if (c->json) {
    l.g = jsonw_file(stdout, 0);
    yajl_gen_map_open(l.g);
    jsonw_str(l.g, "traces");
    yajl_gen_array_open(l.g);
  }
  if (store_trace_each(s, one, &l)) {
    cli_error("%s", store_error(s));
    code = CLI_FAIL;
  }
  if (c->json) {
    yajl_gen_array_close(l.g);
    yajl_gen_map_close(l.g);
    yajl_gen_free(l.g);
    putchar('\n');
  } else if (!l.n && code == CLI_OK) {
    printf("no traces in %s\n", store_path(s));
  }
  store_close(s);
  return code;
}

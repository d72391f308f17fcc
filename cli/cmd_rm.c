/* cmd_rm.c: `memplay rm TRACE...`: delete traces and everything that belongs to them. */
#include "cli.h"

static const char *const rm_usage[] = {
  "memplay rm TRACE... [--db FILE]",
  NULL,
};
const cli_usage cmd_rm_usage = {
  .summary = "delete traces from the store",
  .lines = rm_usage,
};

static const struct option rm_options[] = {CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};

int cmd_rm(int argc, char **argv, cli *c) {
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", rm_options)) != -1)
    if (cli_common_option(c, "rm", opt, &code) < 0) return code;
  if (optind >= argc) return cli_usage_error("rm", "no TRACE given");
  store *s = cli_open_store(c, 0);
  if (!s) return CLI_FAIL;
  if (store_begin(s)) {
    cli_error("%s", store_error(s));
    store_close(s);
    return CLI_FAIL;
  }
  for (int i = optind; i < argc && code == CLI_OK; i++) {
    store_trace t;
    int rc = store_trace_find(s, argv[i], &t);
    if (rc || store_trace_delete(s, t.id)) {
      cli_error("%s", store_error(s));
      code = CLI_FAIL;
    } else if (!c->json) {
      printf("deleted '%s'\n", t.name);
    }
    store_trace_clear(&t);
  }
  if (code == CLI_OK && store_commit(s)) {
    cli_error("%s", store_error(s));
    code = CLI_FAIL;
  }
  if (code != CLI_OK) store_rollback(s);
  store_close(s);
  return code;
}

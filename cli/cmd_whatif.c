/* cmd_whatif.c: `memplay whatif TRACE SCRIPT.lua`: a scenario against a trace, its variants stored as runs. */
#include <stdlib.h>

#include "cli.h"

int cmd_whatif(int argc, char **argv, cli *c) {
  static const struct option opts[] = {
    {"set", required_argument, NULL, 's'},
    {"device", required_argument, NULL, 'd'},
    {"out", required_argument, NULL, 'o'},
    {"no-save", no_argument, NULL, 'N'},
    {"max-instructions", required_argument, NULL, 'I'},
    {"max-memory", required_argument, NULL, 'M'},
    {"timeout", required_argument, NULL, 'T'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
  };
  void *o = cli_lua_opts_new();
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", opts)) != -1) {
    int r = cli_common_option(c, "whatif", opt, &code);
    if (r < 0) goto done;
    if (r) continue;
    r = cli_lua_option("whatif", o, opt, optarg);
    if (r < 0) {
      code = CLI_USAGE;
      goto done;
    }
  }
  if (argc - optind != 2) {
    code = cli_usage_error("whatif", argc - optind < 2 ? "whatif needs a TRACE and a SCRIPT" : "whatif takes one TRACE and one SCRIPT");
    goto done;
  }
  code = cli_lua_run(c, "whatif", o, argv[optind], argv[optind + 1], 0, NULL);
done:
  cli_lua_opts_free(o);
  return code;
}

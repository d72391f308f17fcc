/* main.c: the memplay command: the table of subcommands and the dispatch to them. */
#include <stdio.h>
#include <string.h>

#include "store/store.h"

#include "cli.h"

/* In the order `memplay help` lists them. Each command's usage and options are in its file. */
const cli_command cli_commands[] = {
  {"import", cmd_import, &cmd_import_usage, CLI_STORE | CLI_STORE_CREATE},
  {"list", cmd_list, &cmd_list_usage, CLI_STORE},
  {"info", cmd_info, &cmd_info_usage, CLI_STORE},
  {"replay", cmd_replay, &cmd_replay_usage, CLI_STORE | CLI_ALLOCATORS},
  {"export", cmd_export, &cmd_export_usage, CLI_STORE},
  {"plot", cmd_plot, &cmd_plot_usage, CLI_STORE | CLI_ALLOCATORS},
  {"gen", cmd_gen, &cmd_gen_usage, CLI_STORE | CLI_STORE_CREATE},
  {"rm", cmd_rm, &cmd_rm_usage, CLI_STORE},
  {"bench", cmd_bench, &cmd_bench_usage, 0}, /* a store of its own, in a temporary folder */
  {"whatif", cmd_whatif, &cmd_whatif_usage, CLI_STORE},
  {"run", cmd_run, &cmd_run_usage, CLI_STORE},
  {"devices", cmd_devices, &cmd_devices_usage, CLI_STORE | CLI_STORE_CREATE},
  {"compare", cmd_compare, &cmd_compare_usage, CLI_STORE | CLI_ALLOCATORS},
  {"merge", cmd_merge, &cmd_merge_usage, 0},
  {"validate", cmd_validate, &cmd_validate_usage, CLI_STORE},
  {"check-store", cmd_check_store, &cmd_check_store_usage, CLI_STORE},
  {"calibrate", cmd_calibrate, &cmd_calibrate_usage, CLI_STORE | CLI_STORE_CREATE},
  {"record", cmd_record, &cmd_record_usage, CLI_STORE | CLI_STORE_CREATE},
  {"completion", cmd_completion, &cmd_completion_usage, 0},
  {"help", cmd_help, &cmd_help_usage, 0},
  {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv) {
  cli c = {0};
  int i = 1;
  cli_guard_output();
  /* Options before the command: --db FILE, --json. */
  while (i < argc && argv[i][0] == '-') {
    if (!strcmp(argv[i], "--db") && i + 1 < argc) {
      c.db_path = argv[i + 1];
      i += 2;
    } else if (!strncmp(argv[i], "--db=", 5)) {
      c.db_path = argv[i] + 5;
      i++;
    } else if (!strcmp(argv[i], "--json")) {
      c.json = 1;
      i++;
    } else if (!strcmp(argv[i], "--verbose")) {
      store_set_verbose(1);
      i++;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      cli_help_overview(stdout);
      return cli_finish_output(CLI_OK);
    } else if (!strcmp(argv[i], "--version")) {
      printf("memplay %s (store schema version %d)\n", MEMPLAY_VERSION, store_schema_version);
      return cli_finish_output(CLI_OK);
    } else {
      fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
      cli_help_overview(stderr);
      return CLI_USAGE;
    }
  }
  if (i >= argc) {
    cli_help_overview(stderr);
    return CLI_USAGE;
  }
  const cli_command *cmd = cli_find_command(argv[i]);
  if (!cmd) {
    fprintf(stderr, "error: unknown command '%s' (see 'memplay help')\n", argv[i]);
    return CLI_USAGE;
  }
  c.command = cmd;
  optind = 1;
  int rc = cmd->fn(argc - i, argv + i, &c);
  return cli_finish_output(rc);
}

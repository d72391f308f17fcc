/* cmd_help.c: `memplay help [COMMAND]`: the list of commands, one command's usage, the allocator models. */
#include <string.h>

#include "import/importer.h"
#include "cli.h"

static const char *const help_usage[] = {
  "memplay help [COMMAND | allocators | formats]",
  NULL,
};
const cli_usage cmd_help_usage = {
  .summary = "show help for memplay or one of its commands",
  .lines = help_usage,
};

void cli_help_overview(FILE *f) {
  fputs("memplay: GPU memory trace replay: import traces, replay them through allocator models, ask what if.\n\n"
        "usage: memplay [--db FILE] COMMAND [ARGS]\n\ncommands:\n",
        f);
  for (const cli_command *c = cli_commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->usage->summary);
  fputs("\nThe store is ./memplay.db unless --db FILE or MEMPLAY_DB names another.\n"
        "'memplay help COMMAND' or 'memplay COMMAND -h' shows a command's options;\n"
        "'memplay help allocators' lists the allocator models and their options.\n"
        "\nExit status, the same for every command (scripts and CI act on it):\n"
        "  0  success: all good\n"
        "  1  a failure to run: a bad trace or file, a cell that failed, an internal error\n"
        "  2  a usage error: an unknown option, policy, metric or threshold, a malformed argument\n"
        "  3  the answer is \"no\": a compare --fail-if threshold was crossed, or replay, whatif or compare\n"
        "     predicts an OOM (the job does not fit); --no-fail prints the report and exits 0 instead\n",
        f);
}

/* The importers, for --format. */
static void print_formats(void) {
  for (size_t i = 0; importers[i]; i++) printf("  %-18s %s\n", importers[i]->name, importers[i]->summary);
}

int cmd_help(int argc, char **argv, cli *c) {
  (void)c;
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    cli_print_usage(stdout, cli_find_command("help"));
    return cli_finish_output(CLI_OK);
  }
  if (argc < 2) {
    cli_help_overview(stdout);
    return cli_finish_output(CLI_OK);
  }
  if (!strcmp(argv[1], "allocators")) {
    cli_print_allocators(stdout);
    return cli_finish_output(CLI_OK);
  }
  if (!strcmp(argv[1], "formats")) {
    print_formats();
    return cli_finish_output(CLI_OK);
  }
  const cli_command *cmd = cli_find_command(argv[1]);
  if (!cmd) return cli_usage_error("help", "unknown command '%s'", argv[1]);
  cli_print_usage(stdout, cmd);
  fprintf(stdout, "\n%s.\n", cmd->usage->summary);
  if (cmd->flags & CLI_ALLOCATORS) {
    fputc('\n', stdout);
    cli_print_allocators(stdout);
  }
  return cli_finish_output(CLI_OK);
}

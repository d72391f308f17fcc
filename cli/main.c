/* main.c: the memplay command: a table of subcommands and the dispatch to them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/importer.h"
#include "cli.h"

const cli_command cli_commands[] = {
  {"import", cmd_import, "import a trace file into the store",
   "memplay import FILE [--name NAME] [--format FORMAT] [--set KEY=VALUE]... [--db FILE] [--json]\n"
   "  --name NAME       name of the new trace (default: from the file name)\n"
   "  --format FORMAT   skip detection and read the file as FORMAT (see 'memplay help formats')\n"
   "  --set KEY=VALUE   a setting for the importer (see docs/formats.md)"},
  {"list", cmd_list, "list the traces in the store", "memplay list [--db FILE] [--json]"},
  {"info", cmd_info, "describe a trace: metadata, events by kind, devices, streams, memory by category",
   "memplay info TRACE [--db FILE] [--json]"},
  {"replay", cmd_replay, "replay a trace through an allocator model: peaks, fragmentation, OOMs, and time on a device",
   "memplay replay TRACE [--allocator SPEC] [--capacity SIZE] [--device NAME] [--timing OPTIONS] [--stop-at-oom]\n"
   "                     [--timeline] [--no-save] [--check] [--backend sim|cuda] [--scale F|fit] [--pace]\n"
   "                     [--db FILE] [--json]\n"
   "  --allocator SPEC  model and options, e.g. torch:expandable_segments:True or bfc:allow_growth=true\n"
   "                    (default: the allocator that recorded the trace, else ideal)\n"
   "  --capacity SIZE   device memory the process may use (default: the --device profile's, else unlimited)\n"
   "  --device NAME     predict time on this device profile (see 'memplay devices'; default: the profile that\n"
   "                    matches the trace's recorded device, if any)\n"
   "  --timing OPTIONS  time model options, e.g. copies=recorded,device_waits=drop (see docs/timemodel.md):\n"
   "                    copies=model|recorded device_waits=keep|drop dependencies=infer|off\n"
   "                    kernel_scale=FACTOR malloc_syncs=true|false batch=SAMPLES_PER_STEP\n"
   "  --stop-at-oom     stop at the first allocation that does not fit\n"
   "  --timeline        include the downsampled timeline in --json output\n"
   "  --no-save         do not store the run\n"
   "  --check           check the model's invariants after every event (slow)\n"
   "  --backend NAME    sim (default), or cuda: perform the trace on the GPU and measure it (docs/gpu.md)\n"
   "  --scale F|fit     cuda backend: multiply every size by F (0 < F <= 1), or by the largest factor that fits\n"
   "  --pace            cuda backend: issue each event no earlier than its recorded host time"},
  {"export", cmd_export, "write a trace out as a file",
   "memplay export TRACE --format jsonl [-o FILE] [--db FILE]\n"
   "  --format FORMAT   jsonl\n"
   "  -o, --output FILE write to FILE instead of standard output"},
  {"gen", cmd_gen, "generate a synthetic training trace into the store",
   "memplay gen --events N [--seed S] [--batch B] [--name NAME] [--db FILE] [--json]\n"
   "  --events N        number of events (any length)\n"
   "  --seed S          the seed that chooses the model and its variation (default 1)\n"
   "  --batch B         samples per step (default: chosen by the seed)\n"
   "  --name NAME       trace name (default gen-S-N)"},
  {"rm", cmd_rm, "delete traces from the store", "memplay rm TRACE... [--db FILE]"},
  {"bench", cmd_bench, "measure import and replay speed on a generated trace (prints a table)",
   "memplay bench [--events N] [--seed S] [--allocators LIST] [--json]\n"
   "  --events N        events in the generated trace (default 10000000)\n"
   "  --allocators LIST comma-separated allocator names (default: every model)\n"
   "  --keep DIR        keep the benchmark store and files in DIR"},
  {"whatif", cmd_whatif, "run a what-if scenario (a Lua script) against a trace; its variants are stored as runs",
   "memplay whatif TRACE SCRIPT.lua [--set KEY=VALUE]... [--device NAME] [--out DIR] [--json] [--db FILE]\n"
   "  SCRIPT            a path, or the name of a bundled scenario (batch_size, max_batch, ...)\n"
   "  --set KEY=VALUE   a parameter of the scenario (its header comment lists them)\n"
   "  --device NAME     the device to predict for (see 'memplay devices')\n"
   "  --out DIR         the folder for the result files the script writes (CSV, JSON)\n"
   "  --json            print {\"scenario\": ..., \"variants\": [...]}; the script's own output goes to stderr\n"
   "  --no-save         do not store the variants as runs\n"
   "  --max-instructions N  Lua instruction budget (default 2000000000)\n"
   "  --max-memory SIZE     Lua memory budget (default 512MiB)\n"
   "  --timeout SECONDS     wall-clock budget (default: none)"},
  {"run", cmd_run, "run a Lua script with the memplay library (sandboxed)",
   "memplay run [--set KEY=VALUE]... [--device NAME] [--out DIR] [--json] [--db FILE] SCRIPT.lua [ARGS]...\n"
   "  ARGS              given to the script as ... and arg[1..n]\n"
   "  --set, --device, --out, --json, --no-save, --max-instructions, --max-memory, --timeout: as for whatif"},
  {"devices", cmd_devices, "list, show, edit and create device profiles (memory, bandwidths, compute, costs)",
   "memplay devices [NAME] [--set KEY=VALUE]... [--from BASE] [--delete] [--reset] [--fields] [--db FILE] [--json]\n"
   "  (no NAME)         list the device profiles\n"
   "  NAME              show a profile: every figure with its unit\n"
   "  --set KEY=VALUE   change a figure of NAME, e.g. h2d_pinned_bw=12GB/s (an edited built-in becomes 'user')\n"
   "  --from BASE       create the profile NAME as a copy of BASE (then --set changes it)\n"
   "  --delete          delete the user or calibrated profile NAME\n"
   "  --reset           give the built-in profile NAME its own figures back\n"
   "  --fields          list the figures a profile has, their units and meaning"},
  {"validate", cmd_validate, "replay a recorded PyTorch snapshot through its allocator's model and compare every decision",
   "memplay validate TRACE [--no-save] [--db FILE] [--json]\n"
   "  --no-save         do not store the result as a run\n"
   "  exit status 0 when every decision and the final state agree, 1 otherwise"},
  {"calibrate", cmd_calibrate, "measure the GPU (copies, allocations, launches) and store it as a device profile",
   "memplay calibrate [--gpu N] [--name NAME] [--quick] [--no-save] [--db FILE] [--json]\n"
   "  --gpu N           the GPU to measure (default 0, as CUDA numbers them)\n"
   "  --name NAME       the profile's name (default: the device's name)\n"
   "  --quick           fewer sizes and trials (seconds instead of a minute)\n"
   "  --no-save         print the profile without storing it"},
  {"record", cmd_record, "run a CUDA program under the recorder and import what it did as a new trace",
   "memplay record [--name NAME] [--output FILE] [--recorder LIB] [--db FILE] [--json] -- COMMAND [ARGS...]\n"
   "  --name NAME       name of the new trace (default: the command's name)\n"
   "  --output FILE     also keep the recorded JSON Lines at FILE\n"
   "  --recorder LIB    the recorder library (default: $MEMPLAY_RECORDER, else libmemplay_recorder.so\n"
   "                    beside memplay or in its library folder)\n"
   "  exit status: the program's own (128+N when signal N ended it); 1 or 2 when memplay fails first"},
  {"help", cmd_help, "show help for memplay or one of its commands",
   "memplay help [COMMAND | allocators | formats]"},
  {NULL, NULL, NULL, NULL},
};

static void overview(FILE *f) {
  fputs("memplay: GPU memory trace replay: import traces, replay them through allocator models, ask what if.\n\n"
        "usage: memplay [--db FILE] COMMAND [ARGS]\n\ncommands:\n",
        f);
  for (const cli_command *c = cli_commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
  fputs("\nThe store is ./memplay.db unless --db FILE or MEMPLAY_DB names another.\n"
        "'memplay help COMMAND' or 'memplay COMMAND -h' shows a command's options;\n"
        "'memplay help allocators' lists the allocator models and their options.\n"
        "Exit status: 0 success, 1 failure, 2 usage error.\n",
        f);
}

int cmd_help(int argc, char **argv, cli *c) {
  (void)c;
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    cli_print_usage(stdout, cli_find_command("help"));
    return cli_finish_output(CLI_OK);
  }
  if (argc < 2) {
    overview(stdout);
    return cli_finish_output(CLI_OK);
  }
  if (!strcmp(argv[1], "allocators")) {
    cli_print_allocators(stdout);
    return cli_finish_output(CLI_OK);
  }
  if (!strcmp(argv[1], "formats")) { /* the importers, for --format */
    for (size_t i = 0; importers[i]; i++) printf("  %-18s %s\n", importers[i]->name, importers[i]->summary);
    return cli_finish_output(CLI_OK);
  }
  const cli_command *cmd = cli_find_command(argv[1]);
  if (!cmd) return cli_usage_error("help", "unknown command '%s'", argv[1]);
  cli_print_usage(stdout, cmd);
  fprintf(stdout, "\n%s.\n", cmd->summary);
  if (!strcmp(cmd->name, "replay")) {
    fputc('\n', stdout);
    cli_print_allocators(stdout);
  }
  return cli_finish_output(CLI_OK);
}

int main(int argc, char **argv) {
  cli c = {0};
  int i = 1;
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
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      overview(stdout);
      return cli_finish_output(CLI_OK);
    } else if (!strcmp(argv[i], "--version")) {
      puts("memplay " MEMPLAY_VERSION);
      return cli_finish_output(CLI_OK);
    } else {
      fprintf(stderr, "error: unknown option '%s'\n", argv[i]);
      overview(stderr);
      return CLI_USAGE;
    }
  }
  if (i >= argc) {
    overview(stderr);
    return CLI_USAGE;
  }
  const cli_command *cmd = cli_find_command(argv[i]);
  if (!cmd) {
    fprintf(stderr, "error: unknown command '%s' (see 'memplay help')\n", argv[i]);
    return CLI_USAGE;
  }
  optind = 1;
  int rc = cmd->fn(argc - i, argv + i, &c);
  return cli_finish_output(rc);
}

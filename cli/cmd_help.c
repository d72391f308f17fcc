/* cmd_help.c: `memplay help [COMMAND]`: the list of commands, one command's usage, the allocator models, the scenarios. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "import/importer.h"
#include "cli.h"

static const char *const help_usage[] = {
  "memplay help [COMMAND | allocators | formats | scenarios | SCENARIO]",
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
        "Every command takes --json (one JSON object on stdout, for scripts), --db FILE and --verbose\n"
        "(store errors in SQLite's own words, with the SQL that failed).\n"
        "'memplay help COMMAND' or 'memplay COMMAND -h' shows a command's options;\n"
        "'memplay help allocators' lists the allocator models and their options;\n"
        "'memplay help scenarios' lists the what-if scenarios, 'memplay help SCENARIO' one's parameters.\n"
        "'memplay --version' prints the version and the store schema version.\n"
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

/* ---- scenarios: what their scripts' header comments say -------------------------------------- */

/* A script's header: its leading comment lines without "-- " (NULL-terminated; caller frees each
 * and the array). NULL when it cannot be read. */
static char **script_header(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = 0, cap = 16;
  char **lines = malloc(cap * sizeof *lines), buf[512];
  while (fgets(buf, sizeof buf, f) && !strncmp(buf, "--", 2)) {
    buf[strcspn(buf, "\n")] = 0;
    const char *t = buf + 2;
    if (*t == ' ') t++;
    if (n + 2 > cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
    lines[n++] = strdup(t);
  }
  fclose(f);
  lines[n] = NULL;
  return lines;
}

static void header_free(char **lines) {
  for (size_t i = 0; lines && lines[i]; i++) free(lines[i]);
  free(lines);
}

/* A scenario documents its --set parameters in its header. */
static int header_is_scenario(char **lines) {
  for (size_t i = 0; lines && lines[i]; i++)
    if (strstr(lines[i], "Parameters (--set)")) return 1;
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* `memplay help scenarios`: one line each, from the first line of each script's header. */
static int help_scenarios(void) {
  const char *dir = cli_scripts_dir();
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) {
    cli_error("no scripts folder found (set MEMPLAY_SCRIPTS to the scripts/ folder of memplay's source)");
    return CLI_FAIL;
  }
  char **names = NULL;
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".lua")) continue;
    names = realloc(names, (n + 1) * sizeof *names);
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name);
  printf("what-if scenarios (memplay whatif TRACE NAME [--set KEY=VALUE]...; 'memplay help NAME' for one):\n");
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    char **h = script_header(path);
    names[i][strlen(names[i]) - 4] = 0;
    if (header_is_scenario(h)) { /* the first sentence, which may go on over a few lines */
      const char *summary = h[0] ? strchr(h[0], ':') : NULL;
      printf("  %-20s %s", names[i], summary ? summary + 2 : "");
      for (size_t k = 1; h[k] && *h[k] && summary && summary[strlen(summary) - 1] != '.'; k++) {
        printf(" %s", h[k]);
        summary = h[k];
      }
      printf("\n");
    }
    header_free(h);
    free(names[i]);
  }
  free(names);
  printf("(from %s; any other script runs with 'memplay run FILE.lua' or 'memplay whatif TRACE FILE.lua')\n", dir);
  return CLI_OK;
}

/* `memplay help SCENARIO`: its header (what it models, its parameters with their defaults), and how
 * values are written. 1 when there is no such scenario. */
static int help_scenario(const char *name) {
  if (strchr(name, '/')) return 1;
  char *path = cli_find_script(name);
  char **h = script_header(path);
  int found = h && header_is_scenario(h);
  if (found) {
    printf("memplay whatif TRACE %s [--set KEY=VALUE]... [--device NAME] [--json] [--out DIR]\n\n", name);
    for (size_t i = 0; h[i]; i++) printf("%s\n", h[i]);
    printf("\nValues: N a whole number, X a number, SIZE bytes with a unit (4096, 512MiB, 24GB), SPEC an\n"
           "allocator SPEC ('memplay help allocators'), a name ending in _us microseconds, _s seconds, _mb MiB.\n"
           "Every scenario also takes allocator=SPEC, capacity=SIZE and batch=N (default: the recorded allocator,\n"
           "the --device profile's usable memory, else the recorded device's, the trace's batch size).\n"
           "(%s; docs/scenarios.md)\n",
           path);
  }
  header_free(h);
  free(path);
  return found ? 0 : 1;
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
  if (!strcmp(argv[1], "scenarios")) return cli_finish_output(help_scenarios());
  const cli_command *cmd = cli_find_command(argv[1]);
  if (!cmd && !help_scenario(argv[1])) return cli_finish_output(CLI_OK);
  if (!cmd)
    return cli_usage_error("help", "unknown command or scenario '%s' (see 'memplay help' and 'memplay help scenarios')",
                           argv[1]);
  cli_print_usage(stdout, cmd);
  fprintf(stdout, "\n%s.\n", cmd->usage->summary);
  if (cmd->flags & CLI_ALLOCATORS) {
    fputc('\n', stdout);
    cli_print_allocators(stdout);
  }
  return cli_finish_output(CLI_OK);
}

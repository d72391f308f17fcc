/* cli.h: what the subcommands share: the command table, options, errors, exit codes, formatting. */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/report.h"
#include "store/store.h"

/* Exit codes (fixed: scripts and CI depend on them). One command passes on another's: record
 * exits with its program's status once the program has run (128+N after signal N). */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_NO = 3 /* the answer is "no": a threshold crossed, an OOM predicted */ };

struct cli_command;

typedef struct cli {
  const char *db_path;               /* --db, else $MEMPLAY_DB, else ./memplay.db */
  int json;                          /* --json: print one JSON object */
  const struct cli_command *command; /* the command running (main sets it) */
} cli;

/*
 * What a command says about itself, kept in its own file beside its function and its option
 * table: the line `memplay help` lists, and the lines -h prints after "usage: ": the synopsis
 * (usage errors repeat its first line), then one line per option.
 */
typedef struct cli_usage {
  const char *summary;
  const char *const *lines; /* NULL-terminated */
} cli_usage;

/* What a command does beyond its arguments, in its row of the command table. */
enum {
  CLI_STORE = 1 << 0,        /* opens the store: cli_open_store refuses a command without it */
  CLI_STORE_CREATE = 1 << 1, /* creates the store when it is missing (cli_open_store(c, 1)) */
  CLI_ALLOCATORS = 1 << 2,   /* takes an allocator SPEC: `memplay help NAME` lists the models after its usage */
};

/*
 * Adding a subcommand: one file, one table row.
 *  1. Write cli/cmd_<name>.c (and add it to cli/CMakeLists.txt) with, at its top, its usage
 *     (`static const char *const <name>_usage[]`: synopsis, then one line per option, NULL),
 *     `const cli_usage cmd_<name>_usage = {summary, <name>_usage}`, its getopt_long table
 *     (ending with CLI_COMMON_OPTIONS), and `int cmd_<name>(int argc, char **argv, cli *c)`,
 *     which parses with cli_getopt and cli_common_option and returns a CLI_* exit code.
 *  2. Declare the function and the usage below.
 *  3. Add `{"<name>", cmd_<name>, &cmd_<name>_usage, FLAGS}` to cli_commands in main.c, with
 *     the flags of what it does (CLI_STORE and CLI_STORE_CREATE when it opens or creates the store).
 * Then document it in README.md. Every command answers -h with its usage on stdout
 * (tests/cli/test_help.sh checks every command `memplay help` lists).
 */
typedef struct cli_command {
  const char *name;
  int (*fn)(int argc, char **argv, cli *c);
  const cli_usage *usage; /* defined in the command's file */
  unsigned flags;         /* CLI_STORE, ... */
} cli_command;

extern const cli_command cli_commands[];
const cli_command *cli_find_command(const char *name);

int cmd_import(int argc, char **argv, cli *c);
int cmd_list(int argc, char **argv, cli *c);
int cmd_info(int argc, char **argv, cli *c);
int cmd_replay(int argc, char **argv, cli *c);
int cmd_export(int argc, char **argv, cli *c);
int cmd_gen(int argc, char **argv, cli *c);
int cmd_rm(int argc, char **argv, cli *c);
int cmd_bench(int argc, char **argv, cli *c);
int cmd_devices(int argc, char **argv, cli *c);
int cmd_validate(int argc, char **argv, cli *c);
int cmd_check_store(int argc, char **argv, cli *c);
int cmd_help(int argc, char **argv, cli *c);
/* whatif and run (cmd_run.c): a Lua script in the sandbox, against a trace or on its own. */
int cmd_whatif(int argc, char **argv, cli *c);
int cmd_run(int argc, char **argv, cli *c);
int cmd_calibrate(int argc, char **argv, cli *c);
int cmd_record(int argc, char **argv, cli *c);
int cmd_plot(int argc, char **argv, cli *c);
int cmd_completion(int argc, char **argv, cli *c);
/* compare (cmd_compare.c) and merge (cmd_merge.c): policies across traces, and the shards of one comparison. */
int cmd_compare(int argc, char **argv, cli *c);
int cmd_merge(int argc, char **argv, cli *c);

extern const cli_usage cmd_import_usage, cmd_list_usage, cmd_info_usage, cmd_replay_usage, cmd_export_usage,
  cmd_gen_usage, cmd_rm_usage, cmd_bench_usage, cmd_whatif_usage, cmd_run_usage, cmd_devices_usage,
  cmd_validate_usage, cmd_check_store_usage, cmd_calibrate_usage, cmd_record_usage, cmd_help_usage, cmd_completion_usage, cmd_plot_usage,
  cmd_compare_usage, cmd_merge_usage;

/* The scripts (cmd_run.c): a script named without a folder (".lua" may be left out) found in
 * $MEMPLAY_SCRIPTS, the installed scripts, then the source tree's (else the name as given;
 * caller frees); the first of those folders that exists, or NULL; a scenario's name (the file
 * name without .lua; caller frees). */
char *cli_find_script(const char *name);
const char *cli_scripts_dir(void);
char *cli_scenario_name(const char *path);

/* memplay's own help (cmd_help.c): what `memplay help` and `memplay -h` print. */
void cli_help_overview(FILE *f);

/* `memplay replay --backend cuda` (replay_gpu.c): the options, and the replay on the GPU. */
typedef struct cli_gpu_opts {
  int on_gpu;   /* --backend cuda */
  int set;      /* --scale or --pace given */
  double scale; /* --scale F; 0: --scale fit; 1 by default */
  int scale_given;
  enum { CLI_PACE_NONE, CLI_PACE_CLOCK, CLI_PACE_GAPS } pace; /* --pace[=clock|gaps] */
  FILE *device_calls; /* --device-calls: the open file, or NULL */
} cli_gpu_opts;

/* `replay --device-calls FILE`: a watcher (sim/allocator.h) writing one line per device call,
 * "WHO DEVICE N OP SIZE ADDR STREAM RESULT USED_BEFORE USED_AFTER", WHO naming the replay
 * ("sim", or "plan" and "gpu" for --backend cuda). */
typedef struct cli_device_calls {
  FILE *f;
  const char *who;
  sim_device_watch watch;
} cli_device_calls;
void cli_device_calls_init(cli_device_calls *l, FILE *f, const char *who);
void cli_device_calls_header(FILE *f);
/* Handles --backend, --scale, --pace; returns 0, or CLI_USAGE after the message. */
int cli_gpu_option(cli_gpu_opts *g, int opt, const char *arg);
int cli_replay_gpu(cli *c, const char *trace, const char *alloc, uint64_t capacity, int stop_at_oom, int save,
                   int timeline, const cli_gpu_opts *g);

/* Options every command takes, for getopt_long tables: --db, --json, --verbose (store errors with
 * SQLite's own words and the SQL that failed), -h. */
#define CLI_COMMON_OPTIONS                    \
  {"db", required_argument, NULL, 'D'},       \
  {"json", no_argument, NULL, 'J'},           \
  {"verbose", no_argument, NULL, 'V'},        \
  {"help", no_argument, NULL, 'h'}

/*
 * Handles the common options inside a getopt loop: returns 1 when it handled opt, 0 when
 * the option is the command's own, and -1 after printing usage (-h: exit 0; unknown: exit 2;
 * *exit_code says which).
 */
int cli_common_option(cli *c, const char *cmd, int opt, int *exit_code);
/* Runs getopt_long with the command's options plus the common ones. */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "error: <message>" and the command's synopsis to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_print_usage(FILE *f, const cli_command *cmd);
/* The allocator models and their options, from the registry. */
void cli_print_allocators(FILE *f);

/* Opens the store (creating it when create); prints the error and returns NULL on failure.
 * The running command's row must allow it: CLI_STORE, and CLI_STORE_CREATE to create. */
store *cli_open_store(cli *c, int create);
/* Opens the store (which must exist) and finds trace ref (a name or an id) in it; NULL after
 * printing why. */
store *cli_open_trace(cli *c, const char *ref, store_trace *t);

/* Time: "1.234 ms". */
const char *cli_duration(char *buf, size_t n, double seconds);
/* Thousands separators: "12,345". */
const char *cli_count(char *buf, size_t n, uint64_t v);
/* Parses SIZE arguments (4096, 4KiB, 1.5GiB, 24GB); prints a usage error on failure. */
int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* Checks stdout for write errors before exit: returns code, or CLI_FAIL after a message. */
int cli_finish_output(int code);
/* Routes stdout and stderr through a filter that shows control characters escaped, so that
 * names from untrusted files cannot drive the terminal (textguard.c). Called first in main. */
void cli_guard_output(void);

#endif

/* util.c: options, errors, the store, and number formatting shared by every subcommand. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/allocator.h"
#include "cli.h"

const cli_command *cli_find_command(const char *name) {
  for (const cli_command *c = cli_commands; c->name; c++)
    if (!strcmp(c->name, name)) return c;
  return NULL;
}

static void report(const char *prefix, const char *fmt, va_list ap) {
  fflush(stdout);
  fputs(prefix, stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report("error: ", fmt, ap);
  va_end(ap);
}

void cli_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report("warning: ", fmt, ap);
  va_end(ap);
}

void cli_print_usage(FILE *f, const cli_command *cmd) {
  const char *const *line = cmd->usage->lines;
  fprintf(f, "usage: %s\n", *line);
  while (*++line) fprintf(f, "%s\n", *line);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report("error: ", fmt, ap);
  va_end(ap);
  const cli_command *c = cmd ? cli_find_command(cmd) : NULL;
  if (c) fprintf(stderr, "usage: %s\n(see 'memplay %s -h')\n", c->usage->lines[0], c->name);
  return CLI_USAGE;
}

static char **cur_argv;

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts) {
  opterr = 0;
  cur_argv = argv;
  return getopt_long(argc, argv, shortopts, longopts, NULL);
}

int cli_common_option(cli *c, const char *cmd, int opt, int *exit_code) {
  switch (opt) {
  case 'D': c->db_path = optarg; return 1;
  case 'J': c->json = 1; return 1;
  case 'V': store_set_verbose(1); return 1;
  case 'h': {
    const cli_command *cc = cli_find_command(cmd);
    if (cc) cli_print_usage(stdout, cc);
    *exit_code = cli_finish_output(CLI_OK);
    return -1;
  }
  case '?':
    if (optopt && optopt != '?') *exit_code = cli_usage_error(cmd, "option '-%c' is unknown or needs a value", optopt);
    else *exit_code = cli_usage_error(cmd, "option '%s' is unknown or needs a value",
                                      cur_argv && optind > 0 ? cur_argv[optind - 1] : "?");
    return -1;
  default: return 0;
  }
}

/* The command table says what a command may do with the store; a call it does not allow is a
 * mistake in the table or in the command. */
static int store_allowed(const cli *c, int create) {
  unsigned need = CLI_STORE | (create ? CLI_STORE_CREATE : 0);
  if (c->command && (c->command->flags & need) == need) return 1;
  cli_error("internal error: command '%s' %s the store, which its row in the command table does not allow (%s)",
            c->command ? c->command->name : "?", create ? "creates" : "opens",
            create ? "CLI_STORE | CLI_STORE_CREATE" : "CLI_STORE");
  return 0;
}

store *cli_open_store(cli *c, int create) {
  if (!store_allowed(c, create)) return NULL;
  const char *path = c->db_path;
  if (!path) path = getenv("MEMPLAY_DB");
  if (!path || !*path) path = "memplay.db";
  if (!create && access(path, F_OK) != 0) {
    cli_error("no store at '%s' (import a trace first, or name one with --db or MEMPLAY_DB)", path);
    return NULL;
  }
  store *s;
  char err[STORE_ERRLEN];
  if (store_open(&s, path, create ? STORE_CREATE : 0, err, sizeof err)) {
    cli_error("%s", err);
    return NULL;
  }
  return s;
}

store *cli_open_trace(cli *c, const char *ref, store_trace *t) {
  store *s = cli_open_store(c, 0);
  if (!s) return NULL;
  if (store_trace_find(s, ref, t)) {
    cli_error("%s", store_error(s));
    store_close(s);
    return NULL;
  }
  return s;
}

const char *cli_duration(char *buf, size_t n, double s) {
  if (s >= 1) snprintf(buf, n, "%.3f s", s);
  else if (s >= 1e-3) snprintf(buf, n, "%.3f ms", s * 1e3);
  else snprintf(buf, n, "%.3f us", s * 1e6);
  return buf;
}

const char *cli_count(char *buf, size_t n, uint64_t v) {
  char raw[32];
  int len = snprintf(raw, sizeof raw, "%llu", (unsigned long long)v);
  size_t o = 0;
  for (int i = 0; i < len && o + 2 < n; i++) {
    if (i && (len - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = raw[i];
  }
  buf[o] = 0;
  return buf;
}

int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t *out) {
  if (sim_parse_size(s, out)) {
    cli_usage_error(cmd, "%s wants a size such as 4096, 4KiB, 1.5GiB or 24GB, not '%s'", opt, s);
    return -1;
  }
  if (*out > SIM_SIZE_MAX) {
    cli_usage_error(cmd, "%s is '%s', more than a device could have (at most 1 PiB)", opt, s);
    return -1;
  }
  return 0;
}

int cli_finish_output(int code) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "error: cannot write output: %s\n", strerror(errno));
    return CLI_FAIL;
  }
  return code;
}

void cli_print_allocators(FILE *f) {
  fputs("allocator models (SPEC is NAME or NAME:OPTION:VALUE,OPTION=VALUE,...):\n", f);
  for (size_t i = 0; sim_allocators[i]; i++) {
    const sim_allocator_ops *a = sim_allocators[i];
    fprintf(f, "  %-8s %s\n", a->name, a->summary);
    for (size_t k = 0; a->options && a->options[k].name; k++) {
      const sim_option_spec *o = &a->options[k];
      if (strlen(o->name) < 34) fprintf(f, "             %-34s %s\n", o->name, o->help);
      else fprintf(f, "             %s\n             %-34s %s\n", o->name, "", o->help);
    }
  }
}

/* cmd_export.c: `memplay export TRACE --format jsonl`: a stored trace written out as a file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export/exporter.h"
#include "cli.h"

static const char *const export_usage[] = {
  "memplay export TRACE --format jsonl [-o FILE] [--db FILE]",
  "  --format FORMAT   jsonl",
  "  -o, --output FILE write to FILE instead of standard output",
  NULL,
};
const cli_usage cmd_export_usage = {
  .summary = "write a trace out as a file",
  .lines = export_usage,
};

static const struct option export_options[] = {
  {"format", required_argument, NULL, 'f'},
  {"output", required_argument, NULL, 'o'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

int cmd_export(int argc, char **argv, cli *c) {
  const char *format = "jsonl", *output = NULL;
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "hf:o:", export_options)) != -1) {
    int r = cli_common_option(c, "export", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    if (opt == 'f') format = optarg;
    else if (opt == 'o') output = optarg;
  }
  if (optind + 1 != argc) return cli_usage_error("export", optind >= argc ? "no TRACE given" : "export takes one TRACE");
  const exporter *x = exporter_find(format);
  if (!x) return cli_usage_error("export", "unknown format '%s' (accepted: jsonl)", format);
  store_trace t;
  store *s = cli_open_trace(c, argv[optind], &t);
  if (!s) return CLI_FAIL;
  /* Write to a temporary file beside the output and rename it, so a failure leaves no half file. */
  char *tmp = NULL;
  FILE *f = stdout;
  if (output && strcmp(output, "-")) {
    size_t n = strlen(output) + 16;
    tmp = malloc(n);
    snprintf(tmp, n, "%s.tmpXXXXXX", output);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
      mode_t mask = umask(0);
      umask(mask);
      fchmod(fd, 0666 & ~mask);
    }
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
      cli_error("cannot write '%s': %s", output, strerror(errno));
      free(tmp);
      store_trace_clear(&t);
      store_close(s);
      return CLI_FAIL;
    }
  }
  char err[1024];
  if (x->write(s, &t, f, err, sizeof err)) {
    cli_error("cannot export '%s': %s", t.name, err);
    code = CLI_FAIL;
  }
  if (tmp) {
    if (fclose(f) != 0 && code == CLI_OK) {
      cli_error("cannot write '%s': %s", output, strerror(errno));
      code = CLI_FAIL;
    }
    if (code == CLI_OK && rename(tmp, output) != 0) {
      cli_error("cannot write '%s': %s", output, strerror(errno));
      code = CLI_FAIL;
    }
    if (code != CLI_OK) unlink(tmp);
    free(tmp);
  }
  store_trace_clear(&t);
  store_close(s);
  return code;
}

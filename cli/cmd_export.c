/* cmd_export.c: `memplay export TRACE --format jsonl`: a stored trace written out as a file. */
#include <string.h>

#include "export/exporter.h"
#include "io/outfile.h"
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
  /* The output writer renames over a regular file (so a failure leaves it whole) and writes a
   * FIFO, device or terminal directly. */
  char err[1024];
  outfile *o = outfile_open(output, err, sizeof err);
  if (!o) {
    cli_error("%s", err);
    store_trace_clear(&t);
    store_close(s);
    return CLI_FAIL;
  }
  if (x->write(s, &t, outfile_stream(o), err, sizeof err)) {
    cli_error("cannot export '%s': %s", t.name, err);
    code = CLI_FAIL;
    outfile_abort(o);
  } else if (outfile_commit(o, err, sizeof err)) {
    cli_error("%s", err);
    code = CLI_FAIL;
  }
  store_trace_clear(&t);
  store_close(s);
  return code;
}

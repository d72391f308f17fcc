/* cmd_merge.c: `memplay merge SHARD.json...`: the shards of a comparison combined into the report one run would print. */
#include <stdlib.h>
#include <string.h>

#include "compare_cli.h"
#include "cli.h"

static const char *const merge_usage[] = {
  "memplay merge SHARD.json... [--baseline FILE] [--fail-if 'METRIC OP VALUE']... [--no-fail]",
  "              [--format table|markdown|csv] [--json] [--results FILE.json]",
  "  SHARD.json        the --results files of 'memplay compare --shard K/N', every K from 1 to N once",
  "  --baseline, --fail-if, --no-fail, --format, --json, --results: as for compare",
  "  (no --html: a shard's results hold the numbers, not the replays a report draws)",
  NULL,
};
const cli_usage cmd_merge_usage = {
  .summary = "combine the shards of a comparison (compare --shard) into one report, with its regression check",
  .lines = merge_usage,
};

static const struct option merge_options[] = {
  {"html", required_argument, NULL, 'H'},
  CLI_CMP_OUT_OPTIONS,
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

/* Reads the shards and merges them into *out: 0, or CLI_FAIL after the message. */
static int read_shards(const char *const *paths, size_t n, cmp_result *out) {
  cmp_result *shards = calloc(n, sizeof *shards);
  char err[1024];
  int code = 0;
  if (!shards) return cli_error("out of memory"), CLI_FAIL;
  for (size_t i = 0; i < n && !code; i++)
    if (cmp_result_read(&shards[i], paths[i], err, sizeof err)) code = CLI_FAIL;
  if (!code && cmp_merge(shards, n, paths, out, err, sizeof err)) code = CLI_FAIL;
  if (code) cli_error("%s", err);
  for (size_t i = 0; i < n; i++) cmp_result_release(&shards[i]);
  free(shards);
  return code;
}

int cmd_merge(int argc, char **argv, cli *c) {
  cli_cmp_out o = {.format = CMP_FORMAT_TABLE};
  cmp_result r, baseline;
  memset(&r, 0, sizeof r);
  memset(&baseline, 0, sizeof baseline);
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", merge_options)) != -1) {
    int h = cli_common_option(c, "merge", opt, &code);
    if (h < 0) goto out;
    if (h) continue;
    if (opt == 'H') {
      code = cli_usage_error("merge", "--html needs the replays, and a shard's results hold only their numbers: "
                                      "draw the report with 'memplay compare ... --html FILE' (without --shard)");
      goto out;
    }
    if (cli_cmp_out_option("merge", &o, opt, optarg) < 0) {
      code = CLI_USAGE;
      goto out;
    }
  }
  if (optind >= argc) {
    code = cli_usage_error("merge", "no SHARD.json given");
    goto out;
  }
  if ((code = cli_cmp_read_baseline(&o, &baseline))) goto out;
  if ((code = read_shards((const char *const *)argv + optind, (size_t)(argc - optind), &r))) goto out;
  code = cli_cmp_finish("merge", c->json, &o, &r, o.baseline ? &baseline : NULL);
out:
  cmp_result_release(&r);
  cmp_result_release(&baseline);
  cli_cmp_out_release(&o);
  return code;
}

/* compare_cli.c: the regression options `compare` and `merge` share, their output and their exit status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare_cli.h"
#include "cli.h"

int cli_cmp_out_option(const char *cmd, cli_cmp_out *o, int opt, const char *arg) {
  char err[512];
  switch (opt) {
  case 'b': o->baseline = arg; return 1;
  case 'F': {
    cmp_threshold t;
    if (cmp_threshold_parse(&t, arg, err, sizeof err)) {
      cli_usage_error(cmd, "--fail-if: %s", err);
      return -1;
    }
    o->thresholds = realloc(o->thresholds, (o->nthresholds + 1) * sizeof *o->thresholds);
    if (!o->thresholds) {
      cli_error("out of memory");
      exit(CLI_FAIL);
    }
    o->thresholds[o->nthresholds++] = t;
    return 1;
  }
  case 'f':
    o->format = cmp_format_find(arg);
    if (o->format < 0) {
      cli_usage_error(cmd, "--format wants table, markdown or csv, not '%s'", arg);
      return -1;
    }
    return 1;
  case 'n': o->no_fail = 1; return 1;
  case 'r': o->results = arg; return 1;
  default: return 0;
  }
}

void cli_cmp_out_release(cli_cmp_out *o) {
  for (size_t i = 0; i < o->nthresholds; i++) cmp_threshold_release(&o->thresholds[i]);
  free(o->thresholds);
  memset(o, 0, sizeof *o);
}

int cli_cmp_read_baseline(const cli_cmp_out *o, cmp_result *baseline) {
  char err[1024];
  if (!o->baseline) return 0;
  if (cmp_result_read(baseline, o->baseline, err, sizeof err)) {
    cli_error("baseline: %s", err);
    return CLI_FAIL;
  }
  if (baseline->shard_n) {
    cli_error("baseline: '%s' is shard %u/%u of a comparison: merge the shards first ('memplay merge')", o->baseline,
              baseline->shard_k, baseline->shard_n);
    return CLI_FAIL;
  }
  if (strcmp(baseline->version, MEMPLAY_VERSION))
    cli_warning("baseline '%s' was written by memplay %s, this is %s: a model that changed between them shows as a "
                "change", o->baseline, baseline->version, MEMPLAY_VERSION);
  return 0;
}

/* Writes the JSON result to path through a temporary file beside it: all of it, or nothing. */
static int write_results(const char *path, const cmp_result *r) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return cli_error("out of memory"), -1;
  snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) {
    cli_error("cannot write '%s': %s", path, strerror(errno));
    free(tmp);
    return -1;
  }
  cmp_result_json(r, f, 0);
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path)) {
    cli_error("cannot write '%s': %s", path, strerror(errno ? errno : EIO));
    unlink(tmp);
    free(tmp);
    return -1;
  }
  free(tmp);
  return 0;
}

int cli_cmp_finish(const char *cmd, int json, const cli_cmp_out *o, cmp_result *r, const cmp_result *baseline) {
  (void)cmd;
  cmp_check(r, o->thresholds, o->nthresholds, baseline, o->baseline);
  if (o->results && write_results(o->results, r)) return CLI_FAIL;
  if (json) cmp_result_json(r, stdout, 1);
  else cmp_result_print(r, o->format, stdout);
  switch (cmp_verdict(r, o->no_fail)) {
  case CMP_VERDICT_FAILED: return CLI_FAIL;
  case CMP_VERDICT_REGRESSION:
  case CMP_VERDICT_NOT_FITTING: return CLI_NO;
  default: return CLI_OK;
  }
}

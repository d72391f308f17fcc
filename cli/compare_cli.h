/* compare_cli.h: what `compare` and `merge` share: the regression options, the output, the exit status. */
#ifndef CLI_COMPARE_CLI_H
#define CLI_COMPARE_CLI_H

#include "compare/compare.h"

/* --baseline, --fail-if (repeatable), --format, --no-fail, --results. */
typedef struct cli_cmp_out {
  const char *baseline;
  cmp_threshold *thresholds;
  size_t nthresholds;
  int format; /* CMP_FORMAT_* */
  int no_fail;
  const char *results; /* --results FILE.json */
} cli_cmp_out;

/* The getopt_long rows of these options (to put in a command's table) and their codes. */
#define CLI_CMP_OUT_OPTIONS                              \
  {"baseline", required_argument, NULL, 'b'},            \
  {"fail-if", required_argument, NULL, 'F'},             \
  {"format", required_argument, NULL, 'f'},              \
  {"no-fail", no_argument, NULL, 'n'},                   \
  {"results", required_argument, NULL, 'r'}

/* Handles one of these options: 1 handled, 0 not one of them, -1 after a usage error. */
int cli_cmp_out_option(const char *cmd, cli_cmp_out *o, int opt, const char *arg);
void cli_cmp_out_release(cli_cmp_out *o);
/* Reads the baseline (when given): 0, or CLI_FAIL after the message. */
int cli_cmp_read_baseline(const cli_cmp_out *o, cmp_result *baseline);
/* Checks r against the baseline and thresholds, writes --results, prints r (JSON with json), and
 * returns the exit status: 1 a cell failed, 3 a threshold crossed or a cell that does not fit
 * (0 with --no-fail), else 0. */
int cli_cmp_finish(const char *cmd, int json, const cli_cmp_out *o, cmp_result *r, const cmp_result *baseline);

#endif

/* fuzz_results.c: libFuzzer harness for a comparison's result files (compare --baseline, merge). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare/compare.h"

/*
 * A result file comes from elsewhere: a CI job's artifact read as a baseline, a shard's results
 * merged. The input is the file. Reading it must succeed or fail with a message; a result read
 * is then used as memplay uses one: checked against thresholds of every metric with itself as
 * the baseline, related, printed in every format, and written as JSON, which must read back;
 * then merged alone (a shard of 1 merges; any other is refused with a message).
 */
static char path[64], again[64];

static void once(void) {
  if (path[0]) return;
  snprintf(path, sizeof path, "/tmp/fuzz_results.%d.json", (int)getpid());
  snprintf(again, sizeof again, "/tmp/fuzz_results.%d.again.json", (int)getpid());
}

static int write_file(const char *p, const uint8_t *data, size_t size) {
  FILE *f = fopen(p, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  return fclose(f);
}

static void use(cmp_result *r) {
  static const char *const exprs[] = {"peak_reserved > +2%", "peak_allocated >= 1GiB", "fragmentation > 0.25",
                                      "device_mallocs < -10%", "ooms > 0",           "step_time <= +0%",
                                      "samples_per_s < -5%"};
  cmp_threshold t[sizeof exprs / sizeof *exprs];
  size_t nt = 0;
  char err[512];
  for (size_t i = 0; i < sizeof exprs / sizeof *exprs; i++)
    if (!cmp_threshold_parse(&t[nt], exprs[i], err, sizeof err)) nt++;
  cmp_result_relate(r);
  cmp_check(r, t, nt, r, path);
  (void)cmp_verdict(r, 0);
  FILE *null = fopen("/dev/null", "w");
  for (int fmt = CMP_FORMAT_TABLE; fmt <= CMP_FORMAT_CSV; fmt++) cmp_result_print(r, fmt, null);
  cmp_result_json(r, null, 1);
  fclose(null);
  for (size_t i = 0; i < nt; i++) cmp_threshold_release(&t[i]);
}

/* Merges r with nothing else (it moves what it takes out of r). */
static void merge_alone(cmp_result *r) {
  cmp_result merged;
  const char *const paths[] = {path};
  char err[512] = "";
  if (!cmp_merge(r, 1, paths, &merged, err, sizeof err)) cmp_result_release(&merged);
  else if (!err[0]) abort(); /* refused without a message */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  once();
  if (write_file(path, data, size)) return 0;
  cmp_result r;
  char err[512] = "";
  if (cmp_result_read(&r, path, err, sizeof err)) {
    if (!err[0]) abort(); /* refused without a message */
    return 0;
  }
  use(&r);
  /* what memplay writes of a result it read must read back */
  FILE *f = fopen(again, "w");
  if (!f) abort();
  cmp_result_json(&r, f, 0);
  fclose(f);
  cmp_result back;
  if (cmp_result_read(&back, again, err, sizeof err)) {
    fprintf(stderr, "a result written again does not read back: %s\n", err);
    abort();
  }
  cmp_result_release(&back);
  merge_alone(&r);
  cmp_result_release(&r);
  return 0;
}

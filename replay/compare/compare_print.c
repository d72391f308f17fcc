/* compare_print.c: a comparison for people (an aligned table, Markdown for a pull request) and for spreadsheets (CSV). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/report.h"
#include "sim/hashmap.h"
#include "compare.h"

int cmp_format_find(const char *name) {
  if (!strcmp(name, "table")) return CMP_FORMAT_TABLE;
  if (!strcmp(name, "markdown") || !strcmp(name, "md")) return CMP_FORMAT_MARKDOWN;
  if (!strcmp(name, "csv")) return CMP_FORMAT_CSV;
  return -1;
}

int cmp_verdict(const cmp_result *r, int no_fail) {
  if (cmp_result_failed(r)) return CMP_VERDICT_FAILED;
  if (no_fail) return CMP_VERDICT_PASS;
  if (r->nregressions) return CMP_VERDICT_REGRESSION;
  if (cmp_result_not_fitting(r)) return CMP_VERDICT_NOT_FITTING;
  return CMP_VERDICT_PASS;
}

const char *cmp_verdict_name(int v) {
  switch (v) {
  case CMP_VERDICT_FAILED: return "failed";
  case CMP_VERDICT_REGRESSION: return "regression";
  case CMP_VERDICT_NOT_FITTING: return "does_not_fit";
  default: return "pass";
  }
}

/* ---- values as text ---------------------------------------------------------------------------- */

static const char *fmt_seconds(char *b, size_t n, double s) {
  if (s >= 1) snprintf(b, n, "%.3f s", s);
  else if (s >= 1e-3) snprintf(b, n, "%.3f ms", s * 1e3);
  else snprintf(b, n, "%.3f us", s * 1e6);
  return b;
}

/* A metric for people, with its unit; "-" when unknown. */
static const char *fmt_metric(char *b, size_t n, const cmp_cell *c, int m) {
  if (!(c->known & (1u << m))) return "-";
  double v = c->metric[m];
  switch (cmp_metric_unit(m)) {
  case CMP_UNIT_BYTES: return report_bytes(b, n, (int64_t)v);
  case CMP_UNIT_RATIO: snprintf(b, n, "%.1f%%", 100 * v); return b;
  case CMP_UNIT_COUNT: snprintf(b, n, "%.0f", v); return b;
  case CMP_UNIT_SECONDS: return fmt_seconds(b, n, v);
  default: snprintf(b, n, "%.1f/s", v); return b;
  }
}

static const char *fmt_relative(char *b, size_t n, const cmp_cell *c, int m, int is_ref) {
  if (is_ref) return "ref";
  if (!(c->vs_known & (1u << m))) return "-";
  snprintf(b, n, "%+.1f%%", 100 * c->vs_reference[m]);
  return b;
}

/* The metrics a cell crossed a threshold on, "peak_reserved,ooms"; "" when none. */
static void regressed(const cmp_result *r, size_t ci, char *b, size_t n) {
  b[0] = 0;
  for (size_t i = 0; i < r->nregressions; i++) {
    if (r->regressions[i].cell != ci) continue;
    const char *name = cmp_metric_name(r->thresholds[r->regressions[i].threshold].metric);
    if (strstr(b, name)) continue;
    snprintf(b + strlen(b), n - strlen(b), "%s%s", b[0] ? "," : "", name);
  }
}

/* ---- the table --------------------------------------------------------------------------------- */

enum { COLS = CMP_TABLE_COLS };
static const char *const heads[COLS] = {"trace", "policy", "peak allocated", "peak reserved", "vs ref", "frag",
                                        "device calls", "OOMs", "step time", "vs ref", "fits", "status", "regressed"};
static const int right[COLS] = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
static const int col_metric[COLS] = {-1, -1, CMP_PEAK_ALLOCATED, CMP_PEAK_RESERVED, -1, CMP_FRAGMENTATION,
                                     CMP_DEVICE_MALLOCS, CMP_OOMS, CMP_STEP_TIME, -1, -1, -1, -1};

typedef struct grid {
  char **cells; /* rows x COLS */
  size_t rows;
} grid;

static void put(grid *g, size_t row, int col, const char *s) { g->cells[row * COLS + (size_t)col] = strdup(s); }

static void fill_row(grid *gr, size_t row, const cmp_result *r, size_t ci) {
  const cmp_cell *c = &r->cells[ci];
  int is_ref = c->index % r->npolicies == r->reference;
  char b[64], reg[256];
  put(gr, row, 0, c->trace);
  put(gr, row, 1, c->policy);
  put(gr, row, 2, fmt_metric(b, sizeof b, c, CMP_PEAK_ALLOCATED));
  put(gr, row, 3, fmt_metric(b, sizeof b, c, CMP_PEAK_RESERVED));
  put(gr, row, 4, c->error ? "-" : fmt_relative(b, sizeof b, c, CMP_PEAK_RESERVED, is_ref));
  put(gr, row, 5, fmt_metric(b, sizeof b, c, CMP_FRAGMENTATION));
  /* Device calls: cudaMalloc, and for expandable segments the pages mapped: "0+12 map". */
  if (c->known & (1u << CMP_DEVICE_MAPS) && c->metric[CMP_DEVICE_MAPS] > 0) {
    snprintf(b, sizeof b, "%.0f+%.0f map", c->metric[CMP_DEVICE_MALLOCS], c->metric[CMP_DEVICE_MAPS]);
    put(gr, row, 6, b);
  } else {
    put(gr, row, 6, fmt_metric(b, sizeof b, c, CMP_DEVICE_MALLOCS));
  }
  put(gr, row, 7, fmt_metric(b, sizeof b, c, CMP_OOMS));
  put(gr, row, 8, fmt_metric(b, sizeof b, c, CMP_STEP_TIME));
  put(gr, row, 9, c->error || !(c->known & (1u << CMP_STEP_TIME)) ? "-" : fmt_relative(b, sizeof b, c, CMP_STEP_TIME, is_ref));
  int fits = cmp_cell_fits(c);
  put(gr, row, 10, fits < 0 ? "-" : fits ? "yes" : "no");
  put(gr, row, 11, c->error ? "FAILED" : "ok");
  regressed(r, ci, reg, sizeof reg);
  put(gr, row, 12, reg[0] ? reg : "");
}

static grid make_grid(const cmp_result *r) {
  grid g = {sim_xcalloc((r->ncells + 1) * COLS, sizeof(char *)), r->ncells + 1};
  for (int k = 0; k < COLS; k++) put(&g, 0, k, heads[k]);
  for (size_t i = 0; i < r->ncells; i++) fill_row(&g, i + 1, r, i);
  return g;
}

static void grid_free(grid *g) {
  for (size_t i = 0; i < g->rows * COLS; i++) free(g->cells[i]);
  free(g->cells);
}

/* The last column (regressed) shows only when something regressed. */
static int ncols(const cmp_result *r) { return r->nregressions ? COLS : COLS - 1; }

void cmp_table_make(const cmp_result *r, cmp_table *t) {
  grid g = make_grid(r);
  *t = (cmp_table){.text = g.cells, .rows = g.rows, .ncols = ncols(r), .right = right, .col_metric = col_metric};
}

void cmp_table_release(cmp_table *t) {
  grid g = {t->text, t->rows};
  grid_free(&g);
  memset(t, 0, sizeof *t);
}

int cmp_cell_regressed(const cmp_result *r, size_t ci, int m) {
  for (size_t i = 0; i < r->nregressions; i++) {
    if (r->regressions[i].cell != ci) continue;
    int rm = r->thresholds[r->regressions[i].threshold].metric;
    if (m < 0 || rm == m || (m == CMP_DEVICE_MALLOCS && rm == CMP_DEVICE_MAPS)) return 1;
  }
  return 0;
}

static void print_table(const cmp_result *r, const grid *g, FILE *f) {
  int w[COLS] = {0}, nc = ncols(r);
  for (size_t i = 0; i < g->rows; i++)
    for (int k = 0; k < nc; k++) {
      int n = (int)strlen(g->cells[i * COLS + (size_t)k]);
      if (n > w[k]) w[k] = n;
    }
  size_t cap = 64;
  for (int k = 0; k < nc; k++) cap += (size_t)w[k] + 2;
  char *line = sim_xmalloc(cap);
  for (size_t i = 0; i < g->rows; i++) {
    size_t n = 0;
    for (int k = 0; k < nc; k++) {
      const char *s = g->cells[i * COLS + (size_t)k];
      n += (size_t)snprintf(line + n, cap - n, right[k] ? "%*s  " : "%-*s  ", w[k], s);
    }
    while (n && line[n - 1] == ' ') n--; /* no trailing blanks */
    fprintf(f, "%.*s\n", (int)n, line);
  }
  free(line);
}

/* Markdown: '|' in a cell is escaped. */
static void md_cell(FILE *f, const char *s) {
  fputs("| ", f);
  for (; *s; s++) {
    if (*s == '|') fputc('\\', f);
    fputc(*s, f);
  }
  fputc(' ', f);
}

static void print_markdown(const cmp_result *r, const grid *g, FILE *f) {
  int nc = ncols(r);
  for (size_t i = 0; i < g->rows; i++) {
    for (int k = 0; k < nc; k++) md_cell(f, g->cells[i * COLS + (size_t)k]);
    fputs("|\n", f);
    if (i == 0) {
      for (int k = 0; k < nc; k++) fputs(right[k] ? "| ---: " : "| --- ", f);
      fputs("|\n", f);
    }
  }
}

/* ---- CSV: raw values, the JSON's field names ------------------------------------------------------ */

static void csv_str(FILE *f, const char *s, int last) {
  if (s && strpbrk(s, ",\"\n\r")) {
    fputc('"', f);
    for (; *s; s++) {
      if (*s == '"') fputc('"', f);
      fputc(*s, f);
    }
    fputc('"', f);
  } else if (s) {
    fputs(s, f);
  }
  fputc(last ? '\n' : ',', f);
}

static void print_csv(const cmp_result *r, FILE *f) {
  fputs("index,trace,policy,status,allocator,device,capacity_bytes,events", f);
  for (int m = 0; m < CMP__NMETRICS; m++) fprintf(f, ",%s", cmp_metric_field(m));
  fputs(",fits", f);
  for (int m = 0; m < CMP__NMETRICS; m++) fprintf(f, ",vs_reference_%s", cmp_metric_name(m));
  fputs(",regressed,run_id,error\n", f);
  for (size_t i = 0; i < r->ncells; i++) {
    const cmp_cell *c = &r->cells[i];
    char b[64];
    fprintf(f, "%zu,", c->index);
    csv_str(f, c->trace, 0);
    csv_str(f, c->policy, 0);
    csv_str(f, c->error ? "failed" : "ok", 0);
    csv_str(f, c->allocator, 0);
    csv_str(f, c->device, 0);
    if (c->capacity != UINT64_MAX) fprintf(f, "%llu", (unsigned long long)c->capacity);
    fprintf(f, ",%llu", (unsigned long long)c->events);
    for (int m = 0; m < CMP__NMETRICS; m++) {
      fputc(',', f);
      if (c->known & (1u << m)) fprintf(f, "%.9g", c->metric[m]);
    }
    int fits = cmp_cell_fits(c);
    fprintf(f, ",%s", fits < 0 ? "" : fits ? "true" : "false");
    for (int m = 0; m < CMP__NMETRICS; m++) {
      fputc(',', f);
      if (c->vs_known & (1u << m)) fprintf(f, "%.9g", c->vs_reference[m]);
    }
    fputc(',', f);
    regressed(r, i, b, sizeof b);
    csv_str(f, b, 0);
    if (c->run_id) fprintf(f, "%lld", (long long)c->run_id);
    fputc(',', f);
    csv_str(f, c->error ? c->error : "", 1);
  }
}

/* ---- the report under the table -------------------------------------------------------------------- */

static const char *fmt_value(char *b, size_t n, int m, double v) {
  cmp_cell c = {.known = 1u << m};
  c.metric[m] = v;
  return fmt_metric(b, n, &c, m);
}

static void print_regression(const cmp_result *r, const cmp_regression *x, const char *item, FILE *f) {
  const cmp_threshold *t = &r->thresholds[x->threshold];
  const cmp_cell *c = &r->cells[x->cell];
  char a[64], b[64];
  fprintf(f, "%s%s / %s: %s %s", item, c->trace, c->policy, cmp_metric_name(t->metric),
          fmt_value(b, sizeof b, t->metric, x->after));
  if (!isnan(x->before)) {
    fprintf(f, " (%s %s", !strcmp(x->against, "baseline") ? "baseline" : "reference policy",
            fmt_value(a, sizeof a, t->metric, x->before));
    if (x->before != 0) fprintf(f, ", %+.2f%%", 100 * (x->after - x->before) / fabs(x->before));
    fputc(')', f);
  }
  fprintf(f, " crosses '%s'\n", t->text);
}

static void print_report(const cmp_result *r, int md, FILE *f) {
  const char *item = md ? "- " : "  ";
  size_t failed = cmp_result_failed(r), nofit = cmp_result_not_fitting(r);
  fprintf(f, "\n%zu cell%s (%zu trace%s x %zu polic%s), reference policy '%s'", r->ncells, r->ncells == 1 ? "" : "s",
          r->ntraces, r->ntraces == 1 ? "" : "s", r->npolicies, r->npolicies == 1 ? "y" : "ies",
          r->policies[r->reference].label);
  if (r->shard_n) fprintf(f, "; shard %u/%u of %zu cells", r->shard_k, r->shard_n, cmp_result_total(r));
  fprintf(f, "; %zu failed; %zu do not fit\n", failed, nofit);
  if (r->comparison_id) fprintf(f, "stored as runs of comparison '%s'\n", r->comparison_id);
  if (failed) fprintf(f, "\nfailed cells:\n");
  for (size_t i = 0; i < r->ncells; i++)
    if (r->cells[i].error) fprintf(f, "%s%s / %s: %s\n", item, r->cells[i].trace, r->cells[i].policy, r->cells[i].error);
  if (!r->nthresholds) return;
  fprintf(f, "\n%zu regression%s against %s (", r->nregressions, r->nregressions == 1 ? "" : "s",
          r->baseline ? r->baseline : "the reference policy, for relative thresholds");
  for (size_t i = 0; i < r->nthresholds; i++) fprintf(f, "%s'%s'", i ? ", " : "", r->thresholds[i].text);
  fprintf(f, ")%s\n", r->nregressions ? ":" : "");
  for (size_t i = 0; i < r->nregressions; i++) print_regression(r, &r->regressions[i], item, f);
  if (r->nmissing) fprintf(f, "\n%zu cell%s on one side only:\n", r->nmissing, r->nmissing == 1 ? "" : "s");
  for (size_t i = 0; i < r->nmissing; i++)
    fprintf(f, "%s%s / %s: %s\n", item, r->missing[i].trace, r->missing[i].policy,
            !strcmp(r->missing[i].where, "run") ? "in the baseline, not in this run" : "new: not in the baseline");
  if (r->nunchecked) fprintf(f, "\n%zu check%s not made:\n", r->nunchecked, r->nunchecked == 1 ? "" : "s");
  for (size_t i = 0; i < r->nunchecked; i++)
    fprintf(f, "%s%s / %s: '%s': %s\n", item, r->cells[r->unchecked[i].cell].trace,
            r->cells[r->unchecked[i].cell].policy, r->thresholds[r->unchecked[i].threshold].text, r->unchecked[i].why);
}

void cmp_result_print_report(const cmp_result *r, FILE *f) { print_report(r, 0, f); }

void cmp_result_print(const cmp_result *r, int format, FILE *f) {
  if (format == CMP_FORMAT_CSV) return print_csv(r, f);
  grid g = make_grid(r);
  if (format == CMP_FORMAT_MARKDOWN) print_markdown(r, &g, f);
  else print_table(r, &g, f);
  grid_free(&g);
  print_report(r, format == CMP_FORMAT_MARKDOWN, f);
}

/* compare_check.c: the metrics of a cell, policies and thresholds as text, relative columns, the regression check. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/allocator.h"
#include "sim/hashmap.h"
#include "compare.h"

static const struct {
  const char *name, *field;
  int unit;
} metrics[] = {
#define CMP_X_ROW(id, name, field, unit) {name, field, unit},
  CMP_METRICS(CMP_X_ROW)
#undef CMP_X_ROW
};

const char *cmp_metric_name(int m) { return metrics[m].name; }
const char *cmp_metric_field(int m) { return metrics[m].field; }
int cmp_metric_unit(int m) { return metrics[m].unit; }

int cmp_metric_find(const char *name) {
  for (int m = 0; m < CMP__NMETRICS; m++)
    if (!strcmp(name, metrics[m].name) || !strcmp(name, metrics[m].field)) return m;
  return -1;
}

int cmp_cell_fits(const cmp_cell *c) {
  if (c->error) return -1;
  return c->metric[CMP_OOMS] == 0;
}

/* ---- policies ------------------------------------------------------------------------------- */

int cmp_policy_parse(cmp_policy *p, const char *text, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  p->capacity = UINT64_MAX;
  p->label = strdup(text);
  char *spec = strdup(text);
  char *at = strchr(spec, '@');
  if (at) *at++ = 0;
  while (at) {
    char *next = strchr(at, '@');
    if (next) *next++ = 0;
    uint64_t size;
    if (!*at) {
      snprintf(err, errlen, "policy '%s': empty device or capacity after '@'", text);
      goto fail;
    } else if (isdigit((unsigned char)*at)) {
      if (sim_parse_size(at, &size) || size == 0) {
        snprintf(err, errlen, "policy '%s': '%s' is not a capacity (e.g. 40GiB)", text, at);
        goto fail;
      }
      p->capacity = size;
    } else if (p->device) {
      snprintf(err, errlen, "policy '%s' names two devices", text);
      goto fail;
    } else {
      p->device = strdup(at);
    }
    at = next;
  }
  sim_spec s;
  char serr[512];
  if (sim_spec_parse(&s, spec, serr, sizeof serr)) {
    snprintf(err, errlen, "policy '%s': %s", text, serr);
    goto fail;
  }
  sim_spec_release(&s);
  p->allocator = spec;
  return 0;
fail:
  free(spec);
  cmp_policy_release(p);
  return -1;
}

void cmp_policy_release(cmp_policy *p) {
  free(p->label);
  free(p->allocator);
  free(p->device);
  memset(p, 0, sizeof *p);
}

/* ---- thresholds ------------------------------------------------------------------------------ */

/* The operator at *s: its code and length, or 0. */
static int parse_op(const char *s, int *len) {
  *len = 2;
  if (!strncmp(s, ">=", 2)) return 'G';
  if (!strncmp(s, "<=", 2)) return 'L';
  *len = 1;
  if (*s == '>' || *s == '<') return *s;
  return 0;
}

/* The value part: a number, a relative change (+2%, -5%, 3%), or for byte metrics a size (20GiB). */
static int parse_value(cmp_threshold *t, const char *v, char *err, size_t errlen) {
  size_t n = strlen(v);
  while (n && isspace((unsigned char)v[n - 1])) n--;
  char buf[64];
  if (n == 0 || n >= sizeof buf) {
    snprintf(err, errlen, "threshold '%s': no value after the operator", t->text);
    return -1;
  }
  memcpy(buf, v, n);
  buf[n] = 0;
  if (buf[n - 1] == '%') {
    t->relative = 1;
    buf[--n] = 0;
  }
  char *end;
  t->value = strtod(buf, &end);
  if (n && !*end && isfinite(t->value) && (isdigit((unsigned char)buf[n - 1]) || buf[n - 1] == '.')) return 0;
  uint64_t size;
  if (!t->relative && metrics[t->metric].unit == CMP_UNIT_BYTES && !sim_parse_size(buf, &size)) {
    t->value = (double)size;
    return 0;
  }
  snprintf(err, errlen, "threshold '%s': '%s' is not a number%s", t->text, v,
           t->relative ? " of percent (e.g. +2%)" : metrics[t->metric].unit == CMP_UNIT_BYTES
                                                   ? ", a size (20GiB) or a change in percent (+2%)"
                                                   : " or a change in percent (+2%)");
  return -1;
}

int cmp_threshold_parse(cmp_threshold *t, const char *text, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->text = strdup(text);
  const char *s = text;
  while (isspace((unsigned char)*s)) s++;
  const char *name = s;
  while (*s && (isalnum((unsigned char)*s) || *s == '_')) s++;
  char metric[64];
  size_t nlen = (size_t)(s - name);
  snprintf(metric, sizeof metric, "%.*s", (int)(nlen < sizeof metric ? nlen : sizeof metric - 1), name);
  t->metric = cmp_metric_find(metric);
  if (t->metric < 0) {
    char list[512] = "";
    for (int m = 0; m < CMP__NMETRICS; m++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", m ? ", " : "", metrics[m].name);
    snprintf(err, errlen, "threshold '%s': unknown metric '%s' (known: %s)", text, metric, list);
    goto fail;
  }
  while (isspace((unsigned char)*s)) s++;
  int len;
  t->op = parse_op(s, &len);
  if (!t->op) {
    snprintf(err, errlen, "threshold '%s': expected >, >=, < or <= after '%s'", text, metric);
    goto fail;
  }
  s += len;
  while (isspace((unsigned char)*s)) s++;
  if (parse_value(t, s, err, errlen)) goto fail;
  return 0;
fail:
  cmp_threshold_release(t);
  return -1;
}

void cmp_threshold_release(cmp_threshold *t) {
  free(t->text);
  memset(t, 0, sizeof *t);
}

static int crosses(int op, double x, double limit) {
  switch (op) {
  case '>': return x > limit;
  case 'G': return x >= limit;
  case '<': return x < limit;
  default: return x <= limit;
  }
}

/* ---- the result ------------------------------------------------------------------------------ */

static void cell_release(cmp_cell *c) {
  free(c->trace);
  free(c->policy);
  free(c->allocator);
  free(c->settings);
  free(c->device);
  free(c->version);
  free(c->error);
}

void cmp_result_release(cmp_result *r) {
  free(r->version);
  free(r->comparison_id);
  for (size_t i = 0; i < r->npolicies; i++) cmp_policy_release(&r->policies[i]);
  free(r->policies);
  for (size_t i = 0; i < r->ntraces; i++) free(r->traces[i]);
  free(r->traces);
  free(r->device);
  free(r->timing);
  free(r->scenario);
  for (size_t i = 0; i < r->nparams; i++) free(r->params[i]);
  free(r->params);
  for (size_t i = 0; i < r->ncells; i++) cell_release(&r->cells[i]);
  free(r->cells);
  for (size_t i = 0; i < r->nthresholds; i++) cmp_threshold_release(&r->thresholds[i]);
  free(r->thresholds);
  free(r->baseline);
  free(r->regressions);
  for (size_t i = 0; i < r->nmissing; i++) {
    free(r->missing[i].trace);
    free(r->missing[i].policy);
  }
  free(r->missing);
  free(r->unchecked);
  memset(r, 0, sizeof *r);
}

size_t cmp_result_total(const cmp_result *r) { return r->ntraces * r->npolicies; }

size_t cmp_result_failed(const cmp_result *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->ncells; i++) n += r->cells[i].error != NULL;
  return n;
}

size_t cmp_result_not_fitting(const cmp_result *r) {
  size_t n = 0;
  for (size_t i = 0; i < r->ncells; i++) n += cmp_cell_fits(&r->cells[i]) == 0;
  return n;
}

/* The cell of matrix index idx, or NULL (not in this result). Cells are in index order. */
static const cmp_cell *cell_at(const cmp_result *r, size_t idx) {
  size_t lo = 0, hi = r->ncells;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r->cells[mid].index < idx) lo = mid + 1;
    else hi = mid;
  }
  return lo < r->ncells && r->cells[lo].index == idx ? &r->cells[lo] : NULL;
}

static const cmp_cell *reference_cell(const cmp_result *r, const cmp_cell *c) {
  size_t t = c->index / r->npolicies;
  return cell_at(r, t * r->npolicies + r->reference);
}

/* A relative change, or NAN when the base is 0 (and the value is not). */
static double change(double before, double after) {
  if (before == after) return 0;
  if (before == 0) return NAN;
  return (after - before) / fabs(before);
}

void cmp_result_relate(cmp_result *r) {
  for (size_t i = 0; i < r->ncells; i++) {
    cmp_cell *c = &r->cells[i];
    const cmp_cell *ref = reference_cell(r, c);
    c->vs_known = 0;
    if (!ref || c->error || ref->error) continue;
    for (int m = 0; m < CMP__NMETRICS; m++) {
      if (!(c->known & ref->known & (1u << m))) continue;
      double d = change(ref->metric[m], c->metric[m]);
      if (isnan(d)) continue;
      c->vs_reference[m] = d;
      c->vs_known |= 1u << m;
    }
  }
}

/* ---- the regression check ---------------------------------------------------------------------- */

static const cmp_cell *baseline_cell(const cmp_result *b, const cmp_cell *c) {
  for (size_t i = 0; i < b->ncells; i++)
    if (!strcmp(b->cells[i].trace, c->trace) && !strcmp(b->cells[i].policy, c->policy)) return &b->cells[i];
  return NULL;
}

static const cmp_cell *result_cell(const cmp_result *r, const char *trace, const char *policy) {
  for (size_t i = 0; i < r->ncells; i++)
    if (!strcmp(r->cells[i].trace, trace) && !strcmp(r->cells[i].policy, policy)) return &r->cells[i];
  return NULL;
}

#define CMP_PUSH(arr, n, v)                                    \
  do {                                                         \
    (arr) = sim_xrealloc((arr), ((n) + 1) * sizeof *(arr));    \
    (arr)[(n)++] = (v);                                        \
  } while (0)

static void add_unchecked(cmp_result *r, size_t cell, size_t t, const char *why) {
  cmp_unchecked u = {cell, t, why};
  CMP_PUSH(r->unchecked, r->nunchecked, u);
}

/* One threshold against one cell. */
static void check_one(cmp_result *r, size_t ci, size_t ti, const cmp_result *baseline) {
  const cmp_cell *c = &r->cells[ci];
  const cmp_threshold *t = &r->thresholds[ti];
  unsigned bit = 1u << t->metric;
  if (c->error) return add_unchecked(r, ci, ti, "failed cell");
  if (!(c->known & bit)) return add_unchecked(r, ci, ti, "unknown value");
  double after = c->metric[t->metric];
  if (!t->relative) {
    if (crosses(t->op, after, t->value)) {
      cmp_regression g = {ci, ti, NAN, after, "absolute"};
      CMP_PUSH(r->regressions, r->nregressions, g);
    }
    return;
  }
  const cmp_cell *b = baseline ? baseline_cell(baseline, c) : reference_cell(r, c);
  if (!b) return baseline ? (void)0 : add_unchecked(r, ci, ti, "no reference cell");
  if (b->error) return add_unchecked(r, ci, ti, baseline ? "failed baseline cell" : "failed reference cell");
  if (!(b->known & bit)) return add_unchecked(r, ci, ti, "unknown baseline value");
  double d = change(b->metric[t->metric], after);
  double pct = isnan(d) ? (after > 0 ? INFINITY : -INFINITY) : 100 * d;
  if (crosses(t->op, pct, t->value)) {
    cmp_regression g = {ci, ti, b->metric[t->metric], after, baseline ? "baseline" : "reference"};
    CMP_PUSH(r->regressions, r->nregressions, g);
  }
}

/* With a baseline: the cells on one side only. */
static void find_missing(cmp_result *r, const cmp_result *b) {
  for (size_t i = 0; i < b->ncells; i++)
    if (!result_cell(r, b->cells[i].trace, b->cells[i].policy)) {
      cmp_missing m = {strdup(b->cells[i].trace), strdup(b->cells[i].policy), "run"};
      CMP_PUSH(r->missing, r->nmissing, m);
    }
  for (size_t i = 0; i < r->ncells; i++)
    if (!baseline_cell(b, &r->cells[i])) {
      cmp_missing m = {strdup(r->cells[i].trace), strdup(r->cells[i].policy), "baseline"};
      CMP_PUSH(r->missing, r->nmissing, m);
    }
}

void cmp_check(cmp_result *r, const cmp_threshold *t, size_t nt, const cmp_result *baseline,
               const char *baseline_path) {
  for (size_t i = 0; i < nt; i++) {
    cmp_threshold copy = t[i];
    copy.text = strdup(t[i].text);
    CMP_PUSH(r->thresholds, r->nthresholds, copy);
  }
  if (baseline_path) r->baseline = strdup(baseline_path);
  if (baseline) find_missing(r, baseline);
  for (size_t ci = 0; ci < r->ncells; ci++)
    for (size_t ti = 0; ti < r->nthresholds; ti++) check_one(r, ci, ti, baseline);
}

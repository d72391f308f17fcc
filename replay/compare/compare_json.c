/* compare_json.c: a comparison as JSON, written and read back (results, shards, baselines), and shards merged. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonscan.h"
#include "io/jsonw.h"
#include "sim/hashmap.h"
#include "compare.h"

#define CMP_FORMAT_NAME "memplay-compare"

/* ---- writing ---------------------------------------------------------------------------------- */

static void kcapacity(yajl_gen g, const char *k, uint64_t v) {
  jsonw_str(g, k);
  if (v == UINT64_MAX) jsonw_null(g);
  else jsonw_uint(g, v);
}

static void metric_value(yajl_gen g, const cmp_cell *c, int m) {
  if (!(c->known & (1u << m))) jsonw_null(g);
  else if (cmp_metric_unit(m) == CMP_UNIT_BYTES || cmp_metric_unit(m) == CMP_UNIT_COUNT)
    jsonw_uint(g, (uint64_t)c->metric[m]);
  else jsonw_double(g, c->metric[m]);
}

static void cell_json(yajl_gen g, const cmp_cell *c) {
  yajl_gen_map_open(g);
  jsonw_kuint(g, "index", c->index);
  jsonw_kstr(g, "trace", c->trace);
  jsonw_kstr(g, "policy", c->policy);
  jsonw_kstr(g, "status", c->error ? "failed" : "ok");
  jsonw_kstr(g, "error", c->error);
  jsonw_kstr(g, "allocator", c->allocator);
  jsonw_str(g, "settings");
  jsonw_raw(g, c->settings);
  jsonw_kstr(g, "device", c->device);
  kcapacity(g, "capacity_bytes", c->capacity);
  jsonw_kstr(g, "memplay_version", c->version);
  jsonw_kuint(g, "events", c->events);
  for (int m = 0; m < CMP__NMETRICS; m++) {
    jsonw_str(g, cmp_metric_field(m));
    metric_value(g, c, m);
  }
  int fits = cmp_cell_fits(c);
  jsonw_str(g, "fits");
  if (fits < 0) jsonw_null(g);
  else jsonw_bool(g, fits);
  jsonw_str(g, "vs_reference");
  yajl_gen_map_open(g);
  for (int m = 0; m < CMP__NMETRICS; m++)
    if (c->vs_known & (1u << m)) jsonw_kdouble(g, cmp_metric_name(m), c->vs_reference[m]);
  yajl_gen_map_close(g);
  jsonw_str(g, "run_id");
  if (c->run_id) jsonw_int(g, c->run_id);
  else jsonw_null(g);
  yajl_gen_map_close(g);
}

static void settings_json(yajl_gen g, const cmp_result *r) {
  jsonw_kstr(g, "format", CMP_FORMAT_NAME);
  jsonw_kint(g, "format_version", CMP_FORMAT_VERSION);
  jsonw_kstr(g, "memplay_version", r->version);
  jsonw_kstr(g, "comparison_id", r->comparison_id);
  jsonw_kstr(g, "device", r->device);
  kcapacity(g, "capacity_bytes", r->capacity);
  jsonw_kstr(g, "timing", r->timing);
  jsonw_kstr(g, "scenario", r->scenario);
  jsonw_str(g, "scenario_params");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->nparams; i++) jsonw_str(g, r->params[i]);
  yajl_gen_array_close(g);
  jsonw_kstr(g, "reference", r->npolicies ? r->policies[r->reference].label : NULL);
  jsonw_str(g, "policies");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->npolicies; i++) jsonw_str(g, r->policies[i].label);
  yajl_gen_array_close(g);
  jsonw_str(g, "traces");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->ntraces; i++) jsonw_str(g, r->traces[i]);
  yajl_gen_array_close(g);
  jsonw_str(g, "shard");
  if (!r->shard_n) jsonw_null(g);
  else {
    yajl_gen_map_open(g);
    jsonw_kuint(g, "index", r->shard_k);
    jsonw_kuint(g, "count", r->shard_n);
    yajl_gen_map_close(g);
  }
  jsonw_kuint(g, "cells_total", cmp_result_total(r));
}

static void check_json(yajl_gen g, const cmp_result *r) {
  jsonw_str(g, "check");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "baseline", r->baseline);
  jsonw_str(g, "thresholds");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->nthresholds; i++) jsonw_str(g, r->thresholds[i].text);
  yajl_gen_array_close(g);
  jsonw_str(g, "regressions");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->nregressions; i++) {
    const cmp_regression *x = &r->regressions[i];
    const cmp_threshold *t = &r->thresholds[x->threshold];
    yajl_gen_map_open(g);
    jsonw_kstr(g, "trace", r->cells[x->cell].trace);
    jsonw_kstr(g, "policy", r->cells[x->cell].policy);
    jsonw_kstr(g, "metric", cmp_metric_name(t->metric));
    jsonw_kstr(g, "threshold", t->text);
    jsonw_kstr(g, "against", x->against);
    jsonw_str(g, "before");
    if (isnan(x->before)) jsonw_null(g);
    else jsonw_double(g, x->before);
    jsonw_kdouble(g, "after", x->after);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  jsonw_str(g, "missing");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->nmissing; i++) {
    yajl_gen_map_open(g);
    jsonw_kstr(g, "trace", r->missing[i].trace);
    jsonw_kstr(g, "policy", r->missing[i].policy);
    jsonw_kstr(g, "missing_from", r->missing[i].where);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  jsonw_str(g, "unchecked");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->nunchecked; i++) {
    yajl_gen_map_open(g);
    jsonw_kstr(g, "trace", r->cells[r->unchecked[i].cell].trace);
    jsonw_kstr(g, "policy", r->cells[r->unchecked[i].cell].policy);
    jsonw_kstr(g, "threshold", r->thresholds[r->unchecked[i].threshold].text);
    jsonw_kstr(g, "why", r->unchecked[i].why);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
}

void cmp_result_json(const cmp_result *r, FILE *f, int pretty) {
  yajl_gen g = jsonw_file(f, pretty);
  yajl_gen_map_open(g);
  settings_json(g, r);
  jsonw_str(g, "cells");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->ncells; i++) cell_json(g, &r->cells[i]);
  yajl_gen_array_close(g);
  jsonw_str(g, "summary");
  yajl_gen_map_open(g);
  jsonw_kuint(g, "cells", r->ncells);
  jsonw_kuint(g, "failed", cmp_result_failed(r));
  jsonw_kuint(g, "not_fitting", cmp_result_not_fitting(r));
  jsonw_kuint(g, "regressions", r->nregressions);
  jsonw_kuint(g, "missing", r->nmissing);
  jsonw_kstr(g, "verdict", cmp_verdict_name(cmp_verdict(r, 0)));
  yajl_gen_map_close(g);
  check_json(g, r);
  yajl_gen_map_close(g);
  yajl_gen_free(g);
  fputc('\n', f);
}

/* ---- reading ---------------------------------------------------------------------------------- */

typedef struct reader {
  const char *path;
  char *err;
  size_t errlen;
} reader;

static char *read_all(const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = sim_xmalloc(cap);
  size_t k;
  while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += k;
    if (cap - n < 2) buf = sim_xrealloc(buf, cap *= 2);
  }
  int bad = ferror(f);
  fclose(f);
  buf[n] = 0;
  if (bad) {
    snprintf(err, errlen, "cannot read '%s'", path);
    free(buf);
    return NULL;
  }
  return buf;
}

static int bad_field(reader *rd, const char *where, const char *field, const char *want) {
  snprintf(rd->err, rd->errlen, "'%s': %s%s'%s' is missing or not %s (not a memplay compare result of this version?)",
           rd->path, where ? where : "", where ? ": " : "", field, want);
  return -1;
}

static yajl_val field(yajl_val obj, const char *name) {
  const char *p[2] = {name, NULL};
  return yajl_tree_get(obj, p, yajl_t_any);
}

/* A string field (NULL allowed when nullable). */
static int get_str(reader *rd, const char *where, yajl_val o, const char *name, int nullable, char **out) {
  yajl_val v = field(o, name);
  *out = NULL;
  if (v && YAJL_IS_STRING(v)) *out = strdup(v->u.string);
  else if (!(nullable && v && YAJL_IS_NULL(v))) return bad_field(rd, where, name, nullable ? "a string or null" : "a string");
  return 0;
}

/* A whole number >= 0; null gives UINT64_MAX when nullable. */
static int get_uint(reader *rd, const char *where, yajl_val o, const char *name, int nullable, uint64_t *out) {
  yajl_val v = field(o, name);
  if (v && YAJL_IS_INTEGER(v) && v->u.number.i >= 0) *out = (uint64_t)v->u.number.i;
  else if (v && YAJL_IS_NUMBER(v) && !YAJL_IS_DOUBLE(v)) *out = strtoull(v->u.number.r, NULL, 10);
  else if (nullable && v && YAJL_IS_NULL(v)) *out = UINT64_MAX;
  else return bad_field(rd, where, name, "a whole number");
  return 0;
}

static int read_metrics(reader *rd, const char *where, yajl_val o, cmp_cell *c) {
  for (int m = 0; m < CMP__NMETRICS; m++) {
    yajl_val v = field(o, cmp_metric_field(m));
    if (!v) return bad_field(rd, where, cmp_metric_field(m), "a number or null");
    if (YAJL_IS_NULL(v)) continue;
    if (!YAJL_IS_NUMBER(v)) return bad_field(rd, where, cmp_metric_field(m), "a number or null");
    /* every metric is a count, bytes, a ratio, seconds or a rate: none is negative, and bytes
     * and counts are printed as 64-bit integers */
    double x = YAJL_IS_INTEGER(v) ? (double)v->u.number.i : YAJL_IS_DOUBLE(v) ? v->u.number.d : -1;
    if (!(x >= 0 && x < 0x1p63)) {
      snprintf(rd->err, rd->errlen, "'%s': %s: '%s' is out of range (%s): a metric is from 0 to 2^63", rd->path, where,
               cmp_metric_field(m), v->u.number.r);
      return -1;
    }
    c->metric[m] = x;
    c->known |= 1u << m;
  }
  return 0;
}

static int read_cell(reader *rd, yajl_val o, size_t i, cmp_cell *c) {
  char where[64];
  snprintf(where, sizeof where, "cells[%zu]", i);
  if (!YAJL_IS_OBJECT(o)) return bad_field(rd, NULL, where, "an object");
  uint64_t idx, events, run_id;
  if (get_uint(rd, where, o, "index", 0, &idx) || get_str(rd, where, o, "trace", 0, &c->trace) ||
      get_str(rd, where, o, "policy", 0, &c->policy) || get_str(rd, where, o, "error", 1, &c->error) ||
      get_str(rd, where, o, "allocator", 1, &c->allocator) || get_str(rd, where, o, "device", 1, &c->device) ||
      get_uint(rd, where, o, "capacity_bytes", 1, &c->capacity) ||
      get_str(rd, where, o, "memplay_version", 0, &c->version) || get_uint(rd, where, o, "events", 0, &events) ||
      get_uint(rd, where, o, "run_id", 1, &run_id) || read_metrics(rd, where, o, c))
    return -1;
  c->index = idx;
  c->events = events;
  c->run_id = run_id == UINT64_MAX ? 0 : (int64_t)run_id;
  yajl_val s = field(o, "settings");
  if (!s || !(YAJL_IS_OBJECT(s) || YAJL_IS_NULL(s))) return bad_field(rd, where, "settings", "an object or null");
  if (YAJL_IS_OBJECT(s)) {
    yajl_gen g = jsonw_mem();
    jsonw_tree(g, s);
    c->settings = strdup(jsonw_text(g, NULL));
    yajl_gen_free(g);
  }
  return 0;
}

static int read_strings(reader *rd, yajl_val root, const char *name, char ***out, size_t *n) {
  yajl_val a = field(root, name);
  if (!a || !YAJL_IS_ARRAY(a)) return bad_field(rd, NULL, name, "an array of strings");
  *out = sim_xcalloc(a->u.array.len + 1, sizeof **out);
  for (*n = 0; *n < a->u.array.len; (*n)++) {
    yajl_val v = a->u.array.values[*n];
    if (!YAJL_IS_STRING(v)) return bad_field(rd, NULL, name, "an array of strings");
    (*out)[*n] = strdup(v->u.string);
  }
  return 0;
}

/* The comparison's settings: version, policies, traces, shard. */
static int read_settings(reader *rd, yajl_val root, cmp_result *r) {
  char *format = NULL, *reference = NULL, **labels = NULL;
  size_t nlabels = 0;
  uint64_t fv;
  int rc = -1;
  if (get_str(rd, NULL, root, "format", 0, &format) || get_uint(rd, NULL, root, "format_version", 0, &fv)) goto out;
  if (strcmp(format, CMP_FORMAT_NAME) || fv != CMP_FORMAT_VERSION) {
    snprintf(rd->err, rd->errlen, "'%s' is a %s file of format version %llu; this memplay reads %s version %d",
             rd->path, format, (unsigned long long)fv, CMP_FORMAT_NAME, CMP_FORMAT_VERSION);
    goto out;
  }
  if (get_str(rd, NULL, root, "memplay_version", 0, &r->version) ||
      get_str(rd, NULL, root, "comparison_id", 1, &r->comparison_id) ||
      get_str(rd, NULL, root, "device", 1, &r->device) || get_uint(rd, NULL, root, "capacity_bytes", 1, &r->capacity) ||
      get_str(rd, NULL, root, "timing", 1, &r->timing) || get_str(rd, NULL, root, "scenario", 1, &r->scenario) ||
      read_strings(rd, root, "scenario_params", &r->params, &r->nparams) ||
      get_str(rd, NULL, root, "reference", 0, &reference) ||
      read_strings(rd, root, "policies", &labels, &nlabels) || read_strings(rd, root, "traces", &r->traces, &r->ntraces))
    goto out;
  r->policies = sim_xcalloc(nlabels + 1, sizeof *r->policies);
  for (; r->npolicies < nlabels; r->npolicies++) {
    char perr[512];
    if (cmp_policy_parse(&r->policies[r->npolicies], labels[r->npolicies], perr, sizeof perr)) {
      snprintf(rd->err, rd->errlen, "'%s': %s", rd->path, perr);
      goto out;
    }
    if (!strcmp(labels[r->npolicies], reference)) r->reference = r->npolicies;
  }
  yajl_val shard = field(root, "shard");
  uint64_t k = 0, n = 0;
  if (!shard || !(YAJL_IS_NULL(shard) || YAJL_IS_OBJECT(shard))) {
    bad_field(rd, NULL, "shard", "an object or null");
    goto out;
  }
  if (YAJL_IS_OBJECT(shard) &&
      (get_uint(rd, "shard", shard, "index", 0, &k) || get_uint(rd, "shard", shard, "count", 0, &n)))
    goto out;
  if (YAJL_IS_OBJECT(shard) && (k < 1 || k > n || n > CMP_MAX_SHARDS)) {
    snprintf(rd->err, rd->errlen, "'%s': shard %llu/%llu is not a share --shard gives (1 <= K <= N <= %d)", rd->path,
             (unsigned long long)k, (unsigned long long)n, CMP_MAX_SHARDS);
    goto out;
  }
  r->shard_k = (unsigned)k;
  r->shard_n = (unsigned)n;
  rc = 0;
out:
  for (size_t i = 0; i < nlabels; i++) free(labels[i]);
  free(labels);
  free(format);
  free(reference);
  return rc;
}

int cmp_result_read(cmp_result *r, const char *path, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  char *text = read_all(path, err, errlen);
  if (!text) return -1;
  char perr[512];
  yajl_val root = jsonscan_tree(text, perr, sizeof perr);
  free(text);
  reader rd = {path, err, errlen};
  int rc = -1;
  if (!root || !YAJL_IS_OBJECT(root)) {
    size_t n = strlen(perr);
    while (n && (perr[n - 1] == '\n' || perr[n - 1] == ' ')) perr[--n] = 0;
    snprintf(err, errlen, "'%s' is not JSON: %s", path, root ? "not an object" : perr);
    goto out;
  }
  if (read_settings(&rd, root, r)) goto out;
  yajl_val cells = field(root, "cells");
  if (!cells || !YAJL_IS_ARRAY(cells)) {
    bad_field(&rd, NULL, "cells", "an array");
    goto out;
  }
  r->cells = sim_xcalloc(cells->u.array.len + 1, sizeof *r->cells);
  size_t total = cmp_result_total(r);
  for (size_t i = 0; i < cells->u.array.len; i++) {
    cmp_cell *c = &r->cells[r->ncells++];
    if (read_cell(&rd, cells->u.array.values[i], i, c)) goto out;
    if (c->index >= total || (i && c->index <= r->cells[i - 1].index)) {
      snprintf(err, errlen, "'%s': cells[%zu]: index %zu out of order or beyond the %zu cells", path, i, c->index,
               total);
      goto out;
    }
    if (strcmp(c->trace, r->traces[c->index / r->npolicies]) ||
        strcmp(c->policy, r->policies[c->index % r->npolicies].label)) {
      snprintf(err, errlen, "'%s': cells[%zu] is not the cell its index %zu names", path, i, c->index);
      goto out;
    }
  }
  cmp_result_relate(r);
  rc = 0;
out:
  yajl_tree_free(root);
  if (rc) cmp_result_release(r); /* what was read before the fault */
  return rc;
}

/* ---- merging ---------------------------------------------------------------------------------- */

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* Whether two shards belong to the same comparison: the same settings, policies and traces. */
static const char *differs(const cmp_result *a, const cmp_result *b) {
  if (!same_str(a->version, b->version)) return "memplay version";
  if (!same_str(a->device, b->device) || a->capacity != b->capacity || !same_str(a->timing, b->timing))
    return "device, capacity or timing";
  if (!same_str(a->scenario, b->scenario) || a->nparams != b->nparams) return "scenario";
  for (size_t i = 0; i < a->nparams; i++)
    if (strcmp(a->params[i], b->params[i])) return "scenario";
  if (a->npolicies != b->npolicies || a->reference != b->reference) return "policies";
  for (size_t i = 0; i < a->npolicies; i++)
    if (strcmp(a->policies[i].label, b->policies[i].label)) return "policies";
  if (a->ntraces != b->ntraces) return "traces";
  for (size_t i = 0; i < a->ntraces; i++)
    if (strcmp(a->traces[i], b->traces[i])) return "traces";
  if (a->shard_n != b->shard_n) return "shard count";
  return NULL;
}

/* Every shard 1..N exactly once. */
static int check_shards(const cmp_result *s, size_t n, const char *const *paths, char *err, size_t errlen) {
  unsigned count = s[0].shard_n;
  for (size_t i = 0; i < n; i++) {
    if (!s[i].shard_n) return snprintf(err, errlen, "'%s' is not a shard (it was not run with --shard)", paths[i]), -1;
    const char *why = differs(&s[0], &s[i]);
    if (why) return snprintf(err, errlen, "'%s' and '%s' are shards of different comparisons (%s)", paths[0], paths[i], why), -1;
    for (size_t j = 0; j < i; j++)
      if (s[j].shard_k == s[i].shard_k)
        return snprintf(err, errlen, "shard %u/%u given twice: '%s' and '%s'", s[i].shard_k, count, paths[j], paths[i]),
               -1;
  }
  char missing[512] = "";
  size_t nmissing = 0;
  unsigned char *given = sim_xcalloc((size_t)count + 1, 1); /* read_settings held count to CMP_MAX_SHARDS */
  for (size_t i = 0; i < n; i++) given[s[i].shard_k] = 1;
  for (unsigned k = 1; k <= count; k++)
    if (!given[k] && strlen(missing) < sizeof missing - 32)
      snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%u/%u", nmissing++ ? ", " : "", k, count);
  free(given);
  if (nmissing) return snprintf(err, errlen, "missing shard%s %s", nmissing > 1 ? "s" : "", missing), -1;
  return 0;
}

static int by_index(const void *a, const void *b) {
  size_t x = ((const cmp_cell *)a)->index, y = ((const cmp_cell *)b)->index;
  return x < y ? -1 : x > y;
}

int cmp_merge(cmp_result *s, size_t n, const char *const *paths, cmp_result *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!n) return snprintf(err, errlen, "no shards given"), -1;
  if (check_shards(s, n, paths, err, errlen)) return -1;
  /* The first shard's settings become the whole's; every shard's cells move over. */
  *out = s[0];
  memset(&s[0], 0, sizeof s[0]);
  out->shard_k = out->shard_n = 0;
  free(out->comparison_id);
  out->comparison_id = NULL;
  size_t total = out->ncells;
  for (size_t i = 1; i < n; i++) total += s[i].ncells;
  out->cells = sim_xrealloc(out->cells, (total + 1) * sizeof *out->cells);
  for (size_t i = 1; i < n; i++) {
    memcpy(out->cells + out->ncells, s[i].cells, s[i].ncells * sizeof *s[i].cells);
    out->ncells += s[i].ncells;
    s[i].ncells = 0;
  }
  qsort(out->cells, out->ncells, sizeof *out->cells, by_index);
  if (out->ncells != cmp_result_total(out)) {
    snprintf(err, errlen, "the shards hold %zu cells of the %zu the comparison has", out->ncells, cmp_result_total(out));
    cmp_result_release(out); /* what moved over from the shards */
    return -1;
  }
  cmp_result_relate(out);
  return 0;
}

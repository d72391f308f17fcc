/* kineto.c: the PyTorch profiler (Kineto) importer: its settings, the steps of an import, detection, registry row. */
#include <errno.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "io/limits.h"
#include "kineto_int.h"

/* The steps, and the files that take them (kineto_int.h has the whole story):
 *   1. parse the file into records, joining launches to activities      reader.c parse.c pipe.c
 *                                                                         records.c join.c
 *   2. join the rest by correlation; finish sort 2; find the baseline    join.c baseline.c
 *   3. the categorizing pass over sort 2                                 categories.c walk.c
 *   4. the writing pass: the trace row, its events, its notes            meta.c walk.c notes.c */

void kineto_fail(kparse *p, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err, sizeof p->err, fmt, ap);
  va_end(ap);
}

/* ---- the import's state ------------------------------------------------------------------------ */

/* What --set may change. */
typedef struct kineto_opts {
  uint64_t memory; /* sort_memory: for the sorts, whatever the file's size */
  long window;     /* join_window: records in the join's window */
  int scanner;     /* json_scanner: the scanner in front of yajl (1) or yajl alone (0) */
} kineto_opts;

static int kineto_options(import_ctx *ic, kineto_opts *o) {
  o->memory = KINETO_SORT_MEMORY;
  const char *mset = import_param(ic, "sort_memory");
  if (mset && (sim_parse_size(mset, &o->memory) || o->memory < 4096)) {
    import_error(ic, "cannot import '%s': --set sort_memory wants a size of at least 4KiB, not '%s'", ic->path, mset);
    return -1;
  }
  const char *win = import_param(ic, "join_window"), *scan = import_param(ic, "json_scanner");
  o->window = win ? strtol(win, NULL, 10) : KINETO_JOIN_WINDOW;
  if (o->window < 0 || o->window > 4096 || (scan && strcmp(scan, "0") && strcmp(scan, "1"))) {
    import_error(ic, "cannot import '%s': --set join_window wants 0 to 4096 and json_scanner 0 or 1", ic->path);
    return -1;
  }
  o->scanner = !scan || !strcmp(scan, "1");
  return 0;
}

static kparse *kparse_new(import_ctx *ic, uint64_t memory) {
  kparse *p = sim_xcalloc(1, sizeof *p);
  p->ic = ic;
  sim_map_init(&p->texts);
  sim_map_init(&p->frame_flags);
  sim_map_init(&p->name_class);
  p->by_corr = extsort_new(sizeof(krec), (size_t)memory / 2, kineto_cmp_corr);
  p->by_time = extsort_new(sizeof(krec), (size_t)memory * 3 / 8, kineto_cmp_time);
  p->by_time_mem = extsort_new(sizeof(krec), (size_t)memory / 8, kineto_cmp_time);
  p->cap = jsonw_mem();
  p->h = yajl_alloc(&kineto_cbs, NULL, p);
  yajl_config(p->h, yajl_dont_validate_strings, 1);
  return p;
}

static void kparse_free(kparse *p) {
  if (p->h) yajl_free(p->h);
  if (p->cap) yajl_gen_free(p->cap);
  extsort_free(p->by_corr);
  extsort_free(p->by_time);
  extsort_free(p->by_time_mem);
  for (size_t i = 0; i < p->ntops; i++) {
    free(p->tops[i].key);
    free(p->tops[i].json);
  }
  free(p->tops);
  free(p->top_key);
  free(p->name);
  free(p->cat_text);
  sim_map_release(&p->texts);
  sim_map_release(&p->frame_flags);
  sim_map_release(&p->name_class);
  free(p->arena);
  free(p);
}

/* ---- the import, step by step ------------------------------------------------------------------- */

/* After the parse: the rest of the join through sort 1 (whose memory then goes to the
 * decisions' sort), sort 2 finished, and read once for the baseline. */
static int kineto_order(kparse *p, joiner *j, kbase *b) {
  int rc = kineto_join_by_correlation(p, j);
  extsort_free(p->by_corr);
  p->by_corr = NULL;
  if (!rc && (extsort_finish(p->by_time) || extsort_finish(p->by_time_mem))) {
    kineto_fail(p, "%s", *extsort_error(p->by_time) ? extsort_error(p->by_time) : extsort_error(p->by_time_mem));
    rc = -1;
  }
  if (!rc && kineto_find_baseline(p, b)) rc = -1;
  return rc;
}

/* What both walks need: the time base, and the names of the phase markers. */
static int walk_setup(kparse *p, kwalk *kw) {
  const char *base = kineto_top_json(p, "baseTimeNanoseconds");
  int rc = 0;
  if (base) {
    /* a whole number of nanoseconds below 2^62 (io/limits.h), so base + time cannot wrap */
    char *end;
    errno = 0;
    long long v = strtoll(base, &end, 10);
    if (*end || errno || v > IO_MAX_TIME_NS || v < -IO_MAX_TIME_NS) {
      kineto_fail(p, "field 'baseTimeNanoseconds' must be a whole number of nanoseconds below 2^62, not %.40s", base);
      rc = -1;
    }
    kw->base = rc ? 0 : v;
  }
  static const char *const phases[4] = {"backward", "optimizer", "zero_grad", "forward"};
  for (int i = 0; i < 4; i++)
    if ((kw->names[i] = kineto_intern(p, phases[i], strlen(phases[i]), 0)) < 0) rc = -1;
  return rc;
}

/* The writing pass: the trace row, its events (each allocation with its category), its notes. */
static int kineto_write(kparse *p, kwalk *kw, const kbase *b, const joiner *j, store_trace *m) {
  import_ctx *ic = p->ic;
  m->name = import_trace_name(ic, NULL);
  m->source_format = (char *)"kineto";
  m->source_file = (char *)ic->path;
  m->framework = (char *)"pytorch";
  m->allocator = (char *)"torch";
  m->attrs = kineto_trace_attrs(p, b, m);
  kw->writing = 1;
  int rc = 0;
  if (!m->name) {
    kineto_fail(p, "%s", store_error(ic->s));
    rc = -1;
  } else if (store_writer_begin(ic->s, m, &kw->w)) {
    kineto_fail(p, "%s", store_error(ic->s));
    rc = -1;
  } else if (kineto_walk(kw, b) || kineto_write_notes(kw, b, j)) {
    rc = -1;
  }
  if (!rc && !store_writer_events(kw->w))
    import_warn(ic, "'%s' holds no memory events, kernels, copies or runtime calls", ic->path);
  if (!rc) {
    int64_t id = store_writer_trace_id(kw->w);
    rc = import_finish_trace(ic, kw->w, m->name);
    kw->w = NULL;
    /* how the categories were decided: the notes the import driver's pass would leave */
    if (!rc && categorize_note(ic->s, id, kw->by_method, kw->bytes_by_method)) {
      kineto_fail(p, "%s", store_error(ic->s));
      rc = -1;
    }
  }
  return rc;
}

static int kineto_import(import_ctx *ic) {
  kineto_opts o;
  if (kineto_options(ic, &o)) return -1;
  kparse *p = kparse_new(ic, o.memory);
  kbase b = {0};
  joiner j;
  kineto_joiner_init(&j, p, (size_t)o.window);
  p->join = &j;
  kwalk kw = {.p = p, .step = -1};
  store_trace m = {0};
  int rc = kineto_parse(p, o.scanner);
  if (!rc) rc = kineto_order(p, &j, &b);
  if (!rc) rc = walk_setup(p, &kw);
  if (!rc) rc = kineto_categorize(&kw, &b, o.memory);
  if (!rc) rc = kineto_write(p, &kw, &b, &j, &m);
  if (rc && !ic->err[0]) import_error(ic, "cannot import '%s': %s", ic->path, p->err);
  if (kw.w) store_writer_abort(kw.w);
  kineto_walk_release(&kw);
  kineto_joiner_release(&j);
  kineto_base_release(&b);
  free(m.name);
  free(m.attrs);
  free(m.device_name);
  kparse_free(p);
  return rc;
}

/* ---- detection and the registry row ------------------------------------------------------------- */

/* A JSON object with a top-level key of Kineto's (schemaVersion, deviceProperties, traceEvents)
 * among the first bytes (a key nested deeper, as in a memplay JSON Lines header's attrs, does
 * not count). */
static int kineto_detect(const unsigned char *head, size_t n, const char *path) {
  (void)path;
  size_t i = 0;
  if (n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF) i = 3;
  while (i < n && isspace(head[i])) i++;
  if (i >= n || head[i] != '{') return 0;
  static const char *const keys[] = {"schemaVersion", "deviceProperties", "traceEvents"};
  int depth = 0;
  for (; i < n; i++) {
    unsigned char c = head[i];
    if (c == '"') {
      size_t start = ++i;
      while (i < n && head[i] != '"') i += head[i] == '\\' ? 2 : 1;
      if (i >= n) return 0;
      size_t len = i - start, j = i + 1;
      while (j < n && isspace(head[j])) j++;
      if (depth == 1 && j < n && head[j] == ':')
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
          if (len == strlen(keys[k]) && !memcmp(head + start, keys[k], len)) return k < 2 ? 95 : 80;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return 0; /* the first value ended without them */
    }
  }
  return 0;
}

const importer import_kineto = {
  .name = "kineto",
  .summary = "PyTorch profiler / Kineto Chrome trace (.json, .json.gz) from export_chrome_trace or TensorBoard",
  .detect = kineto_detect,
  .import = kineto_import,
};

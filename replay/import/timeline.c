/* import_timeline.c: the PyTorch memory timeline (export_memory_timeline's raw rows): sizes, lifetimes, categories. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "sim/hashmap.h"
#include "sim/slab.h"
#include "categorize.h"
#include "importer.h"
#include "io/limits.h"

/*
 * torch.profiler's export_memory_timeline writes, for a path ending in raw.json.gz, a JSON list
 * of rows [ts, action, bytes, category] (torch/profiler/_memory_profiler.py,
 * MemoryProfileTimeline.export_memory_timeline_raw):
 *   ts        nanoseconds; -1 for memory that existed before profiling (PREEXISTING rows)
 *   action    Action enum value: 1 PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION, 4 DESTROY
 *   bytes     positive for PREEXISTING and CREATE, negative for DESTROY; an INCREMENT_VERSION
 *             is two rows: -bytes with the old version's category, +bytes with the new one's
 *   category  _CATEGORY_TO_INDEX, the position in _CATEGORY_TO_COLORS: 0 PARAMETER,
 *             1 OPTIMIZER_STATE, 2 INPUT, 3 TEMPORARY, 4 ACTIVATION, 5 GRADIENT,
 *             6 AUTOGRAD_DETAIL, 7 none (unknown). Not the Category enum's own values.
 * Rows carry no address or tensor id. Each PREEXISTING or CREATE row starts an allocation with
 * an identity of its own; a DESTROY ends the most recent live allocation of the same size and
 * current category; an INCREMENT_VERSION moves one from the old category to the new.
 */

enum { TL_PREEXISTING = 1, TL_CREATE = 2, TL_INCREMENT_VERSION = 3, TL_DESTROY = 4 };
#define TL_CATEGORIES 8
#define TL_UNKNOWN 7
#define TL_AUTOGRAD_DETAIL 6
#define TL_HISTORY 8
#define TL_READ_CHUNK (1u << 20)

static const struct {
  const char *name; /* PyTorch's, lower case */
  int cat;          /* memplay's */
} tl_categories[TL_CATEGORIES] = {
  {"parameter", SIM_CAT_PARAMETER},   {"optimizer_state", SIM_CAT_OPTIMIZER_STATE},
  {"input", SIM_CAT_INPUT},           {"temporary", SIM_CAT_TEMPORARY},
  {"activation", SIM_CAT_ACTIVATION}, {"gradient", SIM_CAT_GRADIENT},
  /* Tensors made by the backward pass that are not parameter gradients (gradients of
   * activations, autograd's own buffers): they live and die inside the backward pass, which
   * is what memplay calls temporary. The PyTorch name is kept in the event's args. */
  {"autograd_detail", SIM_CAT_TEMPORARY},
  {"unknown", SIM_CAT_UNKNOWN},
};

typedef struct tl_alloc {
  uint32_t next;     /* the next allocation with the same size and category (a stack) */
  uint64_t id;       /* the address memplay gives it */
  int64_t seq;
  uint64_t size;
  uint8_t cat;       /* current PyTorch category index */
  uint8_t first_cat; /* the one its allocation event carries */
  uint8_t nhist;
  uint8_t hist[TL_HISTORY];
} tl_alloc;

typedef struct tl_row {
  int64_t v[4];
  int n;
} tl_row;

typedef struct tl_state {
  import_ctx *ic;
  yajl_handle h;
  int depth;
  tl_row row;
  int64_t nrow;
  char err[512];
  int failed;
  /* what the rows built */
  store_writer *w;
  char *name;
  int device;        /* -1: host */
  sim_slab allocs;
  sim_map by_key;    /* size << 3 | category -> newest live allocation */
  uint64_t next_id;
  int have_pending_inc;
  tl_row pending_inc;
  tl_row *pre;       /* PREEXISTING rows, held until the first timed row gives them a time */
  size_t npre, pre_cap;
  int timed;
  int64_t last_ts;
  struct { int64_t seq; uint8_t cat; } *late;
  size_t nlate, late_cap;
  int64_t n_pre, n_versions, n_category_changes, n_autograd, n_unmatched_destroy, n_unmatched_version,
      n_out_of_order, n_late, n_live_at_end;
} tl_state;

static void tl_fail(tl_state *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tl_fail(tl_state *t, const char *fmt, ...) {
  if (t->failed) return;
  t->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, sizeof t->err, fmt, ap);
  va_end(ap);
}

static int parse_int(const char *s, size_t n, int64_t *out) {
  char buf[64];
  if (!n || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (*end || errno) return -1;
  *out = v;
  return 0;
}

/* ---- writing -------------------------------------------------------------------------------- */

static int ensure_writer(tl_state *t) {
  if (t->w) return 0;
  import_ctx *ic = t->ic;
  t->name = import_trace_name(ic, NULL);
  if (!t->name) {
    tl_fail(t, "%s", store_error(ic->s));
    return -1;
  }
  const char *dev = import_param(ic, "device");
  store_trace m = {.name = t->name, .source_format = (char *)"memory_timeline", .source_file = (char *)ic->path,
                   .framework = (char *)"pytorch", .allocator = (char *)"torch",
                   .device_index = dev && t->device >= 0 ? t->device : -1,
                   .attrs = (char *)"{\"timestamps\":\"ns\",\"category_index\":\"_CATEGORY_TO_INDEX\"}"};
  if (store_writer_begin(ic->s, &m, &t->w)) {
    tl_fail(t, "%s", store_error(ic->s));
    return -1;
  }
  return 0;
}

static int put(tl_state *t, sim_event *ev) {
  if (store_writer_event(t->w, ev)) {
    tl_fail(t, "%s", store_error(t->ic->s));
    return -1;
  }
  return 0;
}

static int arg(tl_state *t, int64_t seq, const char *key, const char *json) {
  if (store_writer_arg(t->w, seq, key, json)) {
    tl_fail(t, "%s", store_error(t->ic->s));
    return -1;
  }
  return 0;
}

static uint64_t key_of(uint64_t size, int cat) { return size << 3 | (uint64_t)cat; }

static void push(tl_state *t, uint32_t idx) {
  tl_alloc *a = sim_slab_at(&t->allocs, idx);
  int existed;
  uint64_t *slot = sim_map_put(&t->by_key, key_of(a->size, a->cat), &existed);
  a->next = existed ? (uint32_t)*slot : 0;
  *slot = idx;
}

/* Takes the newest live allocation of this size and category off its stack: its index, or 0. */
static uint32_t pop(tl_state *t, uint64_t size, int cat) {
  uint64_t k = key_of(size, cat);
  uint64_t *slot = sim_map_get(&t->by_key, k);
  if (!slot) return 0;
  uint32_t idx = (uint32_t)*slot;
  tl_alloc *a = sim_slab_at(&t->allocs, idx);
  if (a->next) *slot = a->next;
  else sim_map_del(&t->by_key, k, NULL);
  return idx;
}

static int create(tl_state *t, const tl_row *r, int64_t ts, int preexisting) {
  int raw = (int)r->v[3];
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = (uint8_t)(t->device < 0 ? SIM_EV_HOST_ALLOC : SIM_EV_ALLOC);
  ev.mem = t->device < 0 ? SIM_MEM_PAGEABLE : SIM_MEM_DEVICE;
  ev.device = (int16_t)t->device;
  ev.ts = ts;
  ev.size = (uint64_t)r->v[2];
  ev.addr = ++t->next_id;
  ev.category = (uint8_t)tl_categories[raw].cat;
  ev.cat_source = ev.category != SIM_CAT_UNKNOWN ? SIM_CATSRC_SOURCE : SIM_CATSRC_NONE;
  if (preexisting) ev.flags = SIM_EVF_PREEXISTING;
  if (put(t, &ev)) return -1;
  if (raw == TL_AUTOGRAD_DETAIL) {
    t->n_autograd++;
    if (arg(t, ev.seq, "pytorch_category", "\"autograd_detail\"")) return -1;
  }
  uint32_t idx = sim_slab_new(&t->allocs);
  tl_alloc *a = sim_slab_at(&t->allocs, idx);
  *a = (tl_alloc){.id = ev.addr, .seq = ev.seq, .size = ev.size, .cat = (uint8_t)raw, .first_cat = (uint8_t)raw,
                  .nhist = 1, .hist = {(uint8_t)raw}};
  push(t, idx);
  return 0;
}

/* The categories of an allocation's versions, when they differ, as an event arg. */
static int write_history(tl_state *t, const tl_alloc *a) {
  int differs = 0;
  for (int i = 1; i < a->nhist; i++) differs |= a->hist[i] != a->hist[0];
  if (!differs) return 0;
  char buf[256];
  size_t off = 0;
  buf[off++] = '[';
  for (int i = 0; i < a->nhist; i++)
    off += (size_t)snprintf(buf + off, sizeof buf - off, "%s\"%s\"", i ? "," : "", tl_categories[a->hist[i]].name);
  snprintf(buf + off, sizeof buf - off, "]");
  return arg(t, a->seq, "pytorch_categories", buf);
}

static int flush_preexisting(tl_state *t, int64_t ts) {
  for (size_t i = 0; i < t->npre; i++)
    if (create(t, &t->pre[i], ts, 1)) return -1;
  t->npre = 0;
  return 0;
}

/* The row's shape and codes: 1 when it is a raw timeline row, else 0 (the import fails). */
static int row_valid(tl_state *t, const tl_row *r) {
  if (r->n != 4) {
    if (t->nrow == 0 && r->n > 4)
      tl_fail(t, "row 0 has %d values, not [ts, action, bytes, category]: this looks like the plotted memory timeline "
                 "([times, sizes]); memplay reads the raw one (export_memory_timeline to a path ending in raw.json.gz)",
              r->n);
    else tl_fail(t, "row %" PRId64 " has %d values, not 4 ([ts, action, bytes, category])", t->nrow, r->n);
    return 0;
  }
  int64_t action = r->v[1], cat = r->v[3];
  if (action < TL_PREEXISTING || action > TL_DESTROY) {
    tl_fail(t, "row %" PRId64 ": unknown action %" PRId64 " (1 PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION, 4 DESTROY)",
            t->nrow, action);
    return 0;
  }
  if (cat < 0 || cat >= TL_CATEGORIES) {
    tl_fail(t, "row %" PRId64 ": unknown category %" PRId64 " (0 to 7)", t->nrow, cat);
    return 0;
  }
  if (t->have_pending_inc && action != TL_INCREMENT_VERSION) {
    tl_fail(t, "row %" PRId64 ": an INCREMENT_VERSION row without its pair", t->nrow - 1);
    return 0;
  }
  return 1;
}

/* A PREEXISTING row: written at the time of the first timed row, held until that row comes. */
static int row_preexisting(tl_state *t, const tl_row *r) {
  int64_t bytes = r->v[2];
  if (bytes < 0) {
    tl_fail(t, "row %" PRId64 ": PREEXISTING with negative bytes %" PRId64, t->nrow, bytes);
    return 0;
  }
  t->n_pre++;
  if (t->timed) return create(t, r, t->last_ts, 1) == 0;
  sim_grow((void **)&t->pre, &t->pre_cap, t->npre + 1, sizeof *t->pre);
  t->pre[t->npre++] = *r;
  return 1;
}

/* A timed row's time: the first one writes the PREEXISTING rows held until then. */
static int row_time(tl_state *t, int64_t ts) {
  if (ts < 0) {
    tl_fail(t, "row %" PRId64 ": negative time %" PRId64 " on a row that is not PREEXISTING", t->nrow, ts);
    return 0;
  }
  if (!t->timed) {
    t->timed = 1;
    if (flush_preexisting(t, ts)) return 0;
  } else if (ts < t->last_ts) {
    t->n_out_of_order++;
  }
  t->last_ts = ts;
  return 1;
}

/* An INCREMENT_VERSION row: the first of a pair is held; the second moves an allocation from the
 * old version's category to the new one's. */
static int row_increment_version(tl_state *t, const tl_row *r) {
  int64_t ts = r->v[0], bytes = r->v[2], cat = r->v[3];
  if (!t->have_pending_inc) {
    if (bytes > 0) {
      tl_fail(t, "row %" PRId64 ": an INCREMENT_VERSION pair must start with the old version (negative bytes)", t->nrow);
      return 0;
    }
    t->pending_inc = *r;
    t->have_pending_inc = 1;
    return 1;
  }
  t->have_pending_inc = 0;
  const tl_row *o = &t->pending_inc;
  if (bytes != -o->v[2] || ts != o->v[0]) {
    tl_fail(t, "row %" PRId64 ": the second row of an INCREMENT_VERSION pair must have the same time and the "
               "opposite bytes (%" PRId64 ", not %" PRId64 ")", t->nrow, -o->v[2], bytes);
    return 0;
  }
  t->n_versions++;
  int from = (int)o->v[3], to = (int)cat;
  if (from == to) return 1;
  t->n_category_changes++;
  uint32_t idx = pop(t, (uint64_t)bytes, from);
  if (!idx) {
    t->n_unmatched_version++;
    return 1;
  }
  tl_alloc *a = sim_slab_at(&t->allocs, idx);
  a->cat = (uint8_t)to;
  if (a->nhist < TL_HISTORY) a->hist[a->nhist++] = (uint8_t)to;
  if (a->first_cat == TL_UNKNOWN && to != TL_UNKNOWN) {
    /* Made without a category, known from a later version: the allocation takes it. */
    a->first_cat = (uint8_t)to;
    sim_grow((void **)&t->late, &t->late_cap, t->nlate + 1, sizeof *t->late);
    t->late[t->nlate].seq = a->seq;
    t->late[t->nlate++].cat = (uint8_t)tl_categories[to].cat;
    t->n_late++;
  }
  push(t, idx);
  return 1;
}

/* A DESTROY row frees the newest live allocation of its size and category. */
static int row_destroy(tl_state *t, const tl_row *r) {
  int64_t ts = r->v[0], bytes = r->v[2], cat = r->v[3];
  if (bytes > 0) {
    tl_fail(t, "row %" PRId64 ": DESTROY with positive bytes %" PRId64, t->nrow, bytes);
    return 0;
  }
  uint32_t idx = pop(t, (uint64_t)-bytes, (int)cat);
  if (!idx) {
    t->n_unmatched_destroy++;
    return 1;
  }
  tl_alloc *a = sim_slab_at(&t->allocs, idx);
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = (uint8_t)(t->device < 0 ? SIM_EV_HOST_FREE : SIM_EV_FREE);
  ev.mem = t->device < 0 ? SIM_MEM_PAGEABLE : SIM_MEM_DEVICE;
  ev.device = (int16_t)t->device;
  ev.ts = ts;
  ev.addr = a->id;
  ev.size = a->size;
  int rc = put(t, &ev) || write_history(t, a);
  sim_slab_free(&t->allocs, idx);
  return rc == 0;
}

/* One row: 1 to go on, 0 when the import fails (t->err says why). */
static int handle_row(tl_state *t) {
  tl_row *r = &t->row;
  if (!row_valid(t, r) || ensure_writer(t)) return 0;
  int64_t ts = r->v[0], action = r->v[1], bytes = r->v[2];
  if (action == TL_PREEXISTING) return row_preexisting(t, r);
  if (!row_time(t, ts)) return 0;
  switch (action) {
  case TL_CREATE:
    if (bytes < 0) {
      tl_fail(t, "row %" PRId64 ": CREATE with negative bytes %" PRId64, t->nrow, bytes);
      return 0;
    }
    return create(t, r, ts, 0) == 0;
  case TL_INCREMENT_VERSION: return row_increment_version(t, r);
  case TL_DESTROY: return row_destroy(t, r);
  }
  return 1;
}

/* ---- parsing ---------------------------------------------------------------------------------- */

static int value(tl_state *t, int is_num, const char *s, size_t n) {
  if (t->depth == 0) {
    tl_fail(t, "the file is a single JSON value, not a list of [ts, action, bytes, category] rows");
    return 0;
  }
  if (t->depth == 1) {
    tl_fail(t, "row %" PRId64 " is not a list [ts, action, bytes, category]", t->nrow);
    return 0;
  }
  if (t->depth > 2 || !is_num) {
    tl_fail(t, "row %" PRId64 " holds a value that is not an integer", t->nrow);
    return 0;
  }
  if (t->row.n < 4 && parse_int(s, n, &t->row.v[t->row.n])) {
    tl_fail(t, "row %" PRId64 ": '%.*s' is not an integer", t->nrow, (int)(n > 40 ? 40 : n), s);
    return 0;
  }
  /* ranges before any arithmetic (io/limits.h): the time, the bytes (either sign) */
  int64_t v = t->row.n < 4 ? t->row.v[t->row.n] : 0;
  if ((t->row.n == 0 && (v > IO_MAX_TIME_NS || v < -IO_MAX_TIME_NS)) ||
      (t->row.n == 2 && (v > (int64_t)IO_MAX_BYTES || v < -(int64_t)IO_MAX_BYTES))) {
    tl_fail(t, "row %" PRId64 ": %s %.*s is out of range (at most 2^%d either way)", t->nrow,
            t->row.n == 0 ? "the time" : "the byte count", (int)(n > 40 ? 40 : n), s, t->row.n == 0 ? 62 : 48);
    return 0;
  }
  t->row.n++;
  return 1;
}

static int cb_null(void *c) { return value(c, 0, "", 0); }
static int cb_bool(void *c, int b) {
  (void)b;
  return value(c, 0, "", 0);
}
static int cb_number(void *c, const char *s, size_t n) { return value(c, 1, s, n); }
static int cb_string(void *c, const unsigned char *s, size_t n) { return value(c, 0, (const char *)s, n); }
static int cb_map(void *c) {
  tl_state *t = c;
  if (t->depth == 0) tl_fail(t, "the file is a JSON object, not a list of [ts, action, bytes, category] rows");
  else tl_fail(t, "row %" PRId64 " holds an object, not [ts, action, bytes, category]", t->nrow);
  return 0;
}
static int cb_key(void *c, const unsigned char *k, size_t n) {
  (void)k, (void)n;
  return cb_map(c);
}
static int cb_start_array(void *c) {
  tl_state *t = c;
  if (t->depth == 2) {
    if (t->nrow == 0)
      tl_fail(t, "row 0 holds lists: this looks like the plotted memory timeline ([times, sizes]); memplay reads the "
                 "raw one (export_memory_timeline to a path ending in raw.json.gz)");
    else tl_fail(t, "row %" PRId64 " holds a list, not an integer", t->nrow);
    return 0;
  }
  if (++t->depth == 2) t->row.n = 0;
  return 1;
}
static int cb_end_array(void *c) {
  tl_state *t = c;
  if (t->depth-- == 2) {
    int rc = handle_row(t);
    t->nrow++;
    return rc;
  }
  return 1;
}

static const yajl_callbacks tl_cbs = {cb_null, cb_bool, NULL, NULL, cb_number, cb_string,
                                      cb_map,  cb_key,  cb_map, cb_start_array, cb_end_array};

static uint64_t newlines(const unsigned char *b, size_t n) {
  uint64_t c = 0;
  for (const unsigned char *e = b + n; (b = memchr(b, '\n', (size_t)(e - b))); b++) c++;
  return c;
}

static int parse(tl_state *t) {
  import_ctx *ic = t->ic;
  unsigned char *buf = sim_xmalloc(TL_READ_CHUNK);
  uint64_t base = 0, lines = 0;
  int rc = 0;
  for (;;) {
    ssize_t n = input_read(ic->in, buf, TL_READ_CHUNK);
    if (n < 0) {
      import_error(ic, "cannot import '%s': %s", ic->path, input_error(ic->in));
      rc = -1;
      break;
    }
    yajl_status st = n ? yajl_parse(t->h, buf, (size_t)n) : yajl_complete_parse(t->h);
    if (st != yajl_status_ok) {
      size_t used = yajl_get_bytes_consumed(t->h);
      if (used > (size_t)n) used = (size_t)n;
      unsigned long long byte = (unsigned long long)(base + used), line = (unsigned long long)(lines + newlines(buf, used) + 1);
      if (t->failed) {
        import_error(ic, "cannot import '%s': line %llu (byte %llu): %s", ic->path, line, byte, t->err);
      } else if (!n) {
        import_error(ic, "cannot import '%s': the JSON ends early at byte %llu (line %llu): the file is truncated",
                     ic->path, byte, line);
      } else {
        unsigned char *m = yajl_get_error(t->h, 0, buf, (size_t)n);
        char *msg = (char *)m, *nl;
        if (!strncmp(msg, "parse error: ", 13)) msg += 13;
        if ((nl = strchr(msg, '\n'))) *nl = 0;
        import_error(ic, "cannot import '%s': line %llu (byte %llu): invalid JSON: %s", ic->path, line, byte, msg);
        yajl_free_error(t->h, m);
      }
      rc = -1;
      break;
    }
    if (!n) break;
    lines += newlines(buf, (size_t)n);
    base += (uint64_t)n;
  }
  free(buf);
  return rc;
}

static int note(tl_state *t, const char *name, const char *sev, int64_t v, const char *detail) {
  if (!v) return 0;
  if (store_writer_stat(t->w, name, sev, v, detail)) {
    tl_fail(t, "%s", store_error(t->ic->s));
    return -1;
  }
  return 0;
}

static int finish(tl_state *t) {
  import_ctx *ic = t->ic;
  if (t->have_pending_inc) {
    tl_fail(t, "the last INCREMENT_VERSION row has no pair");
    return -1;
  }
  if (t->nrow == 0) {
    tl_fail(t, "the list has no rows");
    return -1;
  }
  if (flush_preexisting(t, 0)) return -1;
  /* Allocations still live at the end keep their history too. */
  size_t it = 0;
  uint64_t k, v;
  while (sim_map_next(&t->by_key, &it, &k, &v))
    for (uint32_t idx = (uint32_t)v; idx; idx = ((tl_alloc *)sim_slab_at(&t->allocs, idx))->next) {
      t->n_live_at_end++;
      if (write_history(t, sim_slab_at(&t->allocs, idx))) return -1;
    }
  if (note(t, "preexisting_blocks", "info", t->n_pre, "PREEXISTING rows: allocated before profiling began") ||
      note(t, "version_changes", "info", t->n_versions, "INCREMENT_VERSION pairs (no change in memory)") ||
      note(t, "category_changes", "info", t->n_category_changes,
           "version changes that changed the category (kept in the event arg pytorch_categories)") ||
      note(t, "autograd_detail_as_temporary", "info", t->n_autograd,
           "AUTOGRAD_DETAIL allocations, categorized temporary (event arg pytorch_category)") ||
      note(t, "categories_known_late", "info", t->n_late, "allocations made without a category that a later version had") ||
      note(t, "live_at_end", "info", t->n_live_at_end, NULL) ||
      note(t, "destroys_without_allocation", "warning", t->n_unmatched_destroy,
           "DESTROY rows with no live allocation of that size and category: skipped") ||
      note(t, "version_changes_without_allocation", "warning", t->n_unmatched_version,
           "INCREMENT_VERSION pairs with no live allocation of that size and category: skipped") ||
      note(t, "timestamps_out_of_order", "warning", t->n_out_of_order, "rows kept in file order"))
    return -1;
  int64_t id = store_writer_trace_id(t->w);
  if (import_finish_trace(ic, t->w, t->name)) {
    t->w = NULL;
    return -1;
  }
  t->w = NULL;
  /* all at once: each chunk they fall in is rewritten once */
  uint64_t *changes = sim_xmalloc((t->nlate ? t->nlate : 1) * sizeof *changes);
  for (size_t i = 0; i < t->nlate; i++)
    changes[i] = (uint64_t)t->late[i].seq << 8 | (uint64_t)(t->late[i].cat & 15) | (uint64_t)SIM_CATSRC_SOURCE << 4;
  int rc = t->nlate ? store_set_categories(ic->s, id, changes, t->nlate) : 0;
  free(changes);
  if (rc) {
    tl_fail(t, "%s", store_error(ic->s));
    return -1;
  }
  return 0;
}

static int timeline_import(import_ctx *ic) {
  tl_state *t = sim_xcalloc(1, sizeof *t);
  t->ic = ic;
  sim_slab_init(&t->allocs, sizeof(tl_alloc));
  sim_map_init(&t->by_key);
  const char *dev = import_param(ic, "device");
  int rc = 0;
  if (dev) {
    char *end;
    long d = strtol(dev, &end, 10);
    if (!strcmp(dev, "cpu")) t->device = -1;
    else if (*dev && !*end && d >= 0 && d <= 32767) t->device = (int)d;
    else {
      import_error(ic, "cannot import '%s': --set device wants a device index or 'cpu', not '%s'", ic->path, dev);
      rc = -1;
    }
  }
  if (!rc) {
    t->h = yajl_alloc(&tl_cbs, NULL, t);
    rc = parse(t);
    if (!rc && finish(t)) {
      if (!ic->err[0]) import_error(ic, "cannot import '%s': %s", ic->path, t->err);
      rc = -1;
    }
    yajl_free(t->h);
  }
  if (t->w) store_writer_abort(t->w);
  sim_slab_release(&t->allocs);
  sim_map_release(&t->by_key);
  free(t->pre);
  free(t->late);
  free(t->name);
  free(t);
  return rc;
}

/* A JSON list whose first element is a list of four integers. */
static int timeline_detect(const unsigned char *head, size_t n, const char *path) {
  (void)path;
  size_t i = 0;
#define SKIP_WS() \
  while (i < n && isspace(head[i])) i++
  SKIP_WS();
  if (i >= n || head[i++] != '[') return 0;
  SKIP_WS();
  if (i >= n || head[i++] != '[') return 0;
  for (int k = 0; k < 4; k++) {
    SKIP_WS();
    if (i < n && head[i] == '-') i++;
    size_t digits = 0;
    while (i < n && isdigit(head[i])) i++, digits++;
    if (!digits) return 0;
    SKIP_WS();
    if (i >= n || head[i++] != (k < 3 ? ',' : ']')) return k == 3 && digits ? 30 : 0;
  }
#undef SKIP_WS
  return 90;
}

const importer import_timeline = {
  .name = "memory_timeline",
  .summary = "PyTorch memory timeline, raw form (export_memory_timeline to *.raw.json.gz): sizes, lifetimes, categories",
  .detect = timeline_detect,
  .import = timeline_import,
  .lacks = IMPORT_LACKS_DEVICE | IMPORT_LACKS_STREAM, /* rows are [ts, action, bytes, category] */
};

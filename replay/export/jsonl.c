/* export_jsonl.c: a stored trace written back as memplay JSON Lines, losslessly (docs/formats.md). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "exporter.h"
#include "io/decimal.h"
#include "io/jsonw.h"

typedef struct xctx {
  store *s;
  FILE *out;
  yajl_gen g;
  sim_map stacks_done;
  sim_map names; /* name id -> 1 + index in name_list: a trace names its kernels over and over */
  struct xname {
    char *text; /* NULL when the store has none */
    size_t len;
  } *name_list;
  size_t nnames, names_cap;
  char *line; /* an event's line, built without the generator (event_line) */
  size_t line_cap;
  char *err;
  size_t errlen;
} xctx;

static int xfail(xctx *x, const char *what) {
  snprintf(x->err, x->errlen, "%s: %s", what, store_error(x->s));
  return -1;
}

/* Lines are built in the generator's buffer and written whole. */
static void end_line(xctx *x) {
  size_t n;
  const char *text = jsonw_text(x->g, &n);
  fwrite(text, 1, n, x->out);
  fputc('\n', x->out);
  yajl_gen_clear(x->g);
  yajl_gen_reset(x->g, NULL);
}

/* The text of a name id, looked up in the store once, and its length in *len. NULL when the
 * store has none. */
static const char *name_of(xctx *x, int64_t id, size_t *len) {
  int existed;
  uint64_t *slot = sim_map_put(&x->names, (uint64_t)id, &existed);
  if (!existed) {
    const char *v = store_string(x->s, id);
    sim_grow((void **)&x->name_list, &x->names_cap, x->nnames + 1, sizeof *x->name_list);
    x->name_list[x->nnames] = (struct xname){v ? strdup(v) : NULL, v ? strlen(v) : 0};
    *slot = ++x->nnames;
  }
  *len = x->name_list[*slot - 1].len;
  return x->name_list[*slot - 1].text;
}

/* Writes the definition line of a call stack the first time it is needed. */
static int stack_def(xctx *x, int64_t id) {
  if (id <= 0 || sim_map_get(&x->stacks_done, (uint64_t)id)) return 0;
  sqlite3_stmt *q = store_stmt(x->s,
                               "SELECT c.parent_id, n.value, f.value, fr.line FROM callsites c "
                               "JOIN frames fr ON fr.id = c.frame_id JOIN strings n ON n.id = fr.name_id "
                               "JOIN strings f ON f.id = fr.file_id WHERE c.id = ?1");
  if (!q) return xfail(x, "cannot read call stacks");
  yajl_gen g = x->g;
  yajl_gen_map_open(g);
  jsonw_kstr(g, "kind", "stack");
  jsonw_kint(g, "id", id);
  jsonw_str(g, "frames");
  yajl_gen_array_open(g);
  for (int64_t cur = id; cur > 0;) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, cur);
    if (sqlite3_step(q) != SQLITE_ROW) return xfail(x, "cannot read call stacks");
    cur = sqlite3_column_int64(q, 0);
    yajl_gen_map_open(g);
    jsonw_kstr(g, "name", (const char *)sqlite3_column_text(q, 1));
    const char *file = (const char *)sqlite3_column_text(q, 2);
    if (file && *file) jsonw_kstr(g, "file", file);
    int64_t line = sqlite3_column_int64(q, 3);
    if (line) jsonw_kint(g, "line", line);
    yajl_gen_map_close(g);
  }
  sqlite3_reset(q);
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
  end_line(x);
  *sim_map_put(&x->stacks_done, (uint64_t)id, NULL) = 1;
  return 0;
}

static void header(xctx *x, const store_trace *t) {
  yajl_gen g = x->g;
  yajl_gen_map_open(g);
  jsonw_kint(g, "memplay", 1);
  jsonw_kstr(g, "name", t->name);
  jsonw_kstr(g, "source_format", t->source_format);
  if (t->source_file) jsonw_kstr(g, "source_file", t->source_file);
  if (t->device_name) jsonw_kstr(g, "device_name", t->device_name);
  if (t->device_memory) jsonw_kint(g, "device_memory", t->device_memory);
  if (t->device_index >= 0) jsonw_kint(g, "device_index", t->device_index);
  if (t->framework) jsonw_kstr(g, "framework", t->framework);
  if (t->allocator) jsonw_kstr(g, "allocator", t->allocator);
  if (t->allocator_settings) {
    if (t->allocator_settings[0] == '{') jsonw_kraw(g, "allocator_settings", t->allocator_settings);
    else jsonw_kstr(g, "allocator_settings", t->allocator_settings);
  }
  if (t->batch_size) jsonw_kint(g, "batch_size", t->batch_size);
  jsonw_kstr(g, "imported_at", t->imported_at);
  if (t->attrs) jsonw_kraw(g, "attrs", t->attrs);
  yajl_gen_map_close(g);
  end_line(x);
}

static int recorded_line(xctx *x, sqlite3_stmt *r) {
  /* columns: seq, before_seq, ts, action, device, stream, addr, size, allocated, reserved, device_free, stack_id */
  int64_t stack = sqlite3_column_int64(r, 11);
  if (stack_def(x, stack)) return -1;
  yajl_gen g = x->g;
  yajl_gen_map_open(g);
  jsonw_kstr(g, "kind", (const char *)sqlite3_column_text(r, 3));
  jsonw_kint(g, "ts", sqlite3_column_int64(r, 2));
  if (sqlite3_column_int64(r, 4)) jsonw_kint(g, "device", sqlite3_column_int64(r, 4));
  if (sqlite3_column_int64(r, 5)) jsonw_kint(g, "stream", sqlite3_column_int64(r, 5));
  jsonw_kuint(g, "addr", (uint64_t)sqlite3_column_int64(r, 6));
  jsonw_kuint(g, "size", (uint64_t)sqlite3_column_int64(r, 7));
  static const char *const opt[] = {"allocated", "reserved", "device_free"};
  for (int i = 0; i < 3; i++)
    if (sqlite3_column_type(r, 8 + i) != SQLITE_NULL) jsonw_kint(g, opt[i], sqlite3_column_int64(r, 8 + i));
  if (stack) jsonw_kint(g, "stack", stack);
  yajl_gen_map_close(g);
  end_line(x);
  return 0;
}

/* An event's line is built in x->line, key by key, as the generator would write it (a third of an
 * export's time went to the generator): "key":value pairs, strings by jsonw_quote. */
#define PUT_KEY(o, lit) (memcpy((o), (lit), sizeof(lit) - 1), (o) + sizeof(lit) - 1)

static char *put_name(char *o, const char *s) { return jsonw_quote(o, s, strlen(s)); }

/* The event's extra fields from the args cursor that runs alongside, through the generator (their
 * values are JSON as recorded), appended to the line at o: the end of the line so far. */
static char *put_args(xctx *x, char *o, int64_t seq, sqlite3_stmt *a, int *a_row) {
  yajl_gen g = x->g;
  int opened = 0;
  while (*a_row == SQLITE_ROW && sqlite3_column_int64(a, 0) <= seq) {
    if (sqlite3_column_int64(a, 0) == seq) {
      if (!opened) yajl_gen_map_open(g);
      opened = 1;
      jsonw_kraw(g, (const char *)sqlite3_column_text(a, 1), (const char *)sqlite3_column_text(a, 2));
    }
    *a_row = sqlite3_step(a);
  }
  if (!opened) return o;
  yajl_gen_map_close(g);
  size_t n, at = (size_t)(o - x->line);
  const char *text = jsonw_text(g, &n);
  sim_grow((void **)&x->line, &x->line_cap, at + n + 16, 1);
  o = PUT_KEY(x->line + at, ",\"args\":");
  memcpy(o, text, n);
  yajl_gen_clear(g);
  yajl_gen_reset(g, NULL);
  return o + n;
}

/* One event (seq: as stored, for the args cursor). */
static int event_line(xctx *x, const sim_event *ev, int64_t seq, sqlite3_stmt *a, int *a_row) {
  int kind = ev->kind;
  int host = kind == SIM_EV_HOST_ALLOC || kind == SIM_EV_HOST_FREE;
  int64_t stack = ev->stack;
  if (stack_def(x, stack)) return -1;
  size_t name_n = 0;
  const char *name = ev->name > 0 ? name_of(x, ev->name, &name_n) : NULL;
  /* the keys, 20 numbers, the enumerated names and the flags' names take well under 1 KiB */
  sim_grow((void **)&x->line, &x->line_cap, 1024 + 6 * name_n, 1);
  char *o = PUT_KEY(x->line, "{\"kind\":");
  o = put_name(o, sim_event_kind_name(kind));
  o = decimal_i64(PUT_KEY(o, ",\"ts\":"), ev->ts);
  if (ev->dur) o = decimal_i64(PUT_KEY(o, ",\"dur\":"), ev->dur);
  if (ev->dev_ts >= 0) o = decimal_i64(PUT_KEY(o, ",\"dev_ts\":"), ev->dev_ts);
  if (ev->api_dur >= 0) o = decimal_i64(PUT_KEY(o, ",\"api_dur\":"), ev->api_dur);
  int64_t device = ev->device;
  if (device != (host ? -1 : 0)) o = decimal_i64(PUT_KEY(o, ",\"device\":"), device);
  int64_t stream = ev->stream;
  if (stream != (kind == SIM_EV_SYNC ? -1 : 0)) o = decimal_i64(PUT_KEY(o, ",\"stream\":"), stream);
  uint64_t addr = ev->addr, size = ev->size;
  int addressed = kind == SIM_EV_ALLOC || kind == SIM_EV_FREE || kind == SIM_EV_FREE_REQUESTED ||
                  kind == SIM_EV_FREE_COMPLETED || host;
  if (addr || addressed) o = decimal_u64(PUT_KEY(o, ",\"addr\":"), addr);
  if (size || kind == SIM_EV_ALLOC || kind == SIM_EV_HOST_ALLOC) o = decimal_u64(PUT_KEY(o, ",\"size\":"), size);
  int mem = ev->mem;
  int mem_default = kind == SIM_EV_ALLOC ? SIM_MEM_DEVICE : host ? SIM_MEM_PINNED : SIM_MEM_UNKNOWN;
  if (mem != mem_default) o = put_name(PUT_KEY(o, ",\"mem\":"), sim_mem_kind_name(mem));
  int dir = ev->dir;
  if (dir) o = put_name(PUT_KEY(o, ",\"dir\":"), sim_copy_dir_name(dir));
  int cat = ev->category, src = ev->cat_source;
  if (cat) o = put_name(PUT_KEY(o, ",\"category\":"), sim_category_name(cat));
  if (src != (cat ? SIM_CATSRC_SOURCE : SIM_CATSRC_NONE))
    o = put_name(PUT_KEY(o, ",\"cat_source\":"), sim_cat_source_name(src));
  if (stack) o = decimal_i64(PUT_KEY(o, ",\"stack\":"), stack);
  if (ev->step >= 0) o = decimal_i64(PUT_KEY(o, ",\"step\":"), ev->step);
  if (name) o = jsonw_quote(PUT_KEY(o, ",\"name\":"), name, name_n);
  int flags = ev->flags;
  if (flags) {
    o = PUT_KEY(o, ",\"flags\":[");
    for (int b = 0, first = 1; b < SIM_EVF__COUNT; b++)
      if (flags & (1 << b)) {
        if (!first) *o++ = ',';
        first = 0;
        o = put_name(o, sim_event_flag_name(b));
      }
    *o++ = ']';
  }
  o = put_args(x, o, seq, a, a_row);
  o = PUT_KEY(o, "}\n");
  fwrite(x->line, 1, (size_t)(o - x->line), x->out);
  return 0;
}

static int final_state(xctx *x, int64_t trace_id) {
  yajl_gen g = x->g;
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(store_db(x->s),
                         "SELECT device, address, total_size, stream, pool, expandable, allocated_size, requested_size, "
                         "active_size, stack_id FROM segments WHERE trace_id = ?1 ORDER BY device, address",
                         -1, &q, NULL) != SQLITE_OK)
    return xfail(x, "cannot read segments");
  sqlite3_bind_int64(q, 1, trace_id);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t stack = sqlite3_column_int64(q, 9);
    if (stack_def(x, stack)) {
      sqlite3_finalize(q);
      return -1;
    }
    yajl_gen_map_open(g);
    jsonw_kstr(g, "kind", "segment");
    if (sqlite3_column_int64(q, 0)) jsonw_kint(g, "device", sqlite3_column_int64(q, 0));
    jsonw_kuint(g, "addr", (uint64_t)sqlite3_column_int64(q, 1));
    jsonw_kuint(g, "size", (uint64_t)sqlite3_column_int64(q, 2));
    if (sqlite3_column_int64(q, 3)) jsonw_kint(g, "stream", sqlite3_column_int64(q, 3));
    if (sqlite3_column_type(q, 4) != SQLITE_NULL) jsonw_kstr(g, "pool", (const char *)sqlite3_column_text(q, 4));
    if (sqlite3_column_int(q, 5)) jsonw_kbool(g, "expandable", 1);
    static const char *const opt[] = {"allocated_size", "requested_size", "active_size"};
    for (int i = 0; i < 3; i++)
      if (sqlite3_column_type(q, 6 + i) != SQLITE_NULL) jsonw_kint(g, opt[i], sqlite3_column_int64(q, 6 + i));
    if (stack) jsonw_kint(g, "stack", stack);
    yajl_gen_map_close(g);
    end_line(x);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return xfail(x, "cannot read segments");
  if (sqlite3_prepare_v2(store_db(x->s),
                         "SELECT segment_address, address, size, requested_size, state, stack_id FROM blocks "
                         "WHERE trace_id = ?1 ORDER BY segment_address, address",
                         -1, &q, NULL) != SQLITE_OK)
    return xfail(x, "cannot read blocks");
  sqlite3_bind_int64(q, 1, trace_id);
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t stack = sqlite3_column_int64(q, 5);
    if (stack_def(x, stack)) {
      sqlite3_finalize(q);
      return -1;
    }
    yajl_gen_map_open(g);
    jsonw_kstr(g, "kind", "block");
    jsonw_kuint(g, "segment", (uint64_t)sqlite3_column_int64(q, 0));
    jsonw_kuint(g, "addr", (uint64_t)sqlite3_column_int64(q, 1));
    jsonw_kuint(g, "size", (uint64_t)sqlite3_column_int64(q, 2));
    if (sqlite3_column_int64(q, 3)) jsonw_kuint(g, "requested_size", (uint64_t)sqlite3_column_int64(q, 3));
    jsonw_kstr(g, "state", (const char *)sqlite3_column_text(q, 4));
    if (stack) jsonw_kint(g, "stack", stack);
    yajl_gen_map_close(g);
    end_line(x);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_DONE) return xfail(x, "cannot read blocks");
  if (sqlite3_prepare_v2(store_db(x->s),
                         "SELECT name, severity, value, detail FROM trace_stats WHERE trace_id = ?1 ORDER BY name", -1,
                         &q, NULL) != SQLITE_OK)
    return xfail(x, "cannot read import notes");
  sqlite3_bind_int64(q, 1, trace_id);
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    yajl_gen_map_open(g);
    jsonw_kstr(g, "kind", "stat");
    jsonw_kstr(g, "name", (const char *)sqlite3_column_text(q, 0));
    jsonw_kstr(g, "severity", (const char *)sqlite3_column_text(q, 1));
    jsonw_kint(g, "value", sqlite3_column_int64(q, 2));
    if (sqlite3_column_type(q, 3) != SQLITE_NULL) jsonw_kstr(g, "detail", (const char *)sqlite3_column_text(q, 3));
    yajl_gen_map_close(g);
    end_line(x);
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : xfail(x, "cannot read import notes");
}

static int jsonl_write(store *s, const store_trace *t, FILE *out, char *err, size_t errlen) {
  xctx x = {.s = s, .out = out, .g = jsonw_mem(), .err = err, .errlen = errlen};
  sim_map_init(&x.stacks_done);
  sim_map_init(&x.names);
  sqlite3 *db = store_db(s);
  sqlite3_stmt *r = NULL, *a = NULL;
  store_reader *e = NULL;
  int rc = -1;
  /* one snapshot, its locks taken once: the names and stacks looked up as events need them are
   * statements of their own, each a read transaction in autocommit (four fcntl calls apiece) */
  store_read_begin(s);
  if (store_reader_open(s, t->id, &e)) {
    snprintf(err, errlen, "cannot read trace '%s': %s", t->name, store_error(s));
    goto done;
  }
  if (sqlite3_prepare_v2(db,
                         "SELECT seq, before_seq, ts, action, device, stream, addr, size, allocated, reserved, "
                         "device_free, stack_id FROM recorded WHERE trace_id = ?1 ORDER BY seq",
                         -1, &r, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT seq, key, value FROM event_args WHERE trace_id = ?1 ORDER BY seq, key", -1, &a,
                         NULL) != SQLITE_OK) {
    snprintf(err, errlen, "cannot read trace '%s': %s", t->name, sqlite3_errmsg(db));
    goto done;
  }
  sqlite3_bind_int64(r, 1, t->id);
  sqlite3_bind_int64(a, 1, t->id);
  header(&x, t);
  int r_row = sqlite3_step(r), a_row = sqlite3_step(a), e_row;
  sim_event ev;
  while ((e_row = store_reader_next(e, &ev)) > 0) {
    int64_t seq = ev.seq + t->first_seq; /* as stored, as recorded actions and args count */
    while (r_row == SQLITE_ROW && sqlite3_column_int64(r, 1) <= seq) {
      if (recorded_line(&x, r)) goto done;
      r_row = sqlite3_step(r);
    }
    if (event_line(&x, &ev, seq, a, &a_row)) goto done;
  }
  if (e_row < 0) {
    snprintf(err, errlen, "%s", store_error(s));
    goto done;
  }
  for (; r_row == SQLITE_ROW; r_row = sqlite3_step(r))
    if (recorded_line(&x, r)) goto done;
  if (r_row != SQLITE_DONE || (a_row != SQLITE_DONE && a_row != SQLITE_ROW)) {
    xfail(&x, "cannot read recorded allocator actions");
    goto done;
  }
  if (final_state(&x, t->id)) goto done;
  rc = 0;
done:
  store_reader_close(e);
  sqlite3_finalize(r);
  sqlite3_finalize(a);
  store_read_end(s);
  yajl_gen_free(x.g);
  sim_map_release(&x.stacks_done);
  sim_map_release(&x.names);
  for (size_t i = 0; i < x.nnames; i++) free(x.name_list[i].text);
  free(x.name_list);
  free(x.line);
  return rc;
}

const exporter export_jsonl = {
  .name = "jsonl",
  .summary = "memplay JSON Lines, the format `memplay import` reads back without loss",
  .write = jsonl_write,
};

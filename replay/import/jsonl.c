/* import_jsonl.c: memplay's own JSON Lines format: a header line, then one event per line (docs/formats.md). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "sim/allocator.h"
#include "sim/hashmap.h"
#include "importer.h"
#include "io/limits.h"
#include "io/jsonw.h"
#include "jsonl_lines.h"

/*
 * Each line is parsed into a flat list of fields (key, JSON type, text; nested values, such as
 * stacks, args and settings, as JSON text) by the reader (jsonl_lines.c), then interpreted here
 * by its "kind". Every problem stops the import with "file:line: message".
 */

/* ---- typed access to a line's fields ---------------------------------------------------- */

/* The names of enumerated fields met lately (kind, category, ...), with what they mean: a line
 * names the same few again and again. Direct-mapped by length and letters. */
#define MEMO_SLOTS 64
typedef struct name_memo {
  int key;        /* the field, -1 for an empty slot */
  unsigned char len;
  char text[27];
  int value;
} name_memo;

typedef struct jctx {
  import_ctx *ic;
  jsonl_view l;
  int nused; /* the line's fields read so far (each marked used) */
  int64_t lineno;
  const char *kind;
  name_memo memo[MEMO_SLOTS];
} jctx;

/* from_name(s) for field k, remembered (n: the length of s). */
static int name_value(jctx *j, int k, const char *s, size_t n, int (*from_name)(const char *)) {
  if (!n || n >= sizeof j->memo[0].text) return from_name(s);
  const unsigned char *u = (const unsigned char *)s;
  name_memo *m = &j->memo[((unsigned)k * 31u + n * 7u + u[0] + u[n / 2] * 5u + u[n - 1] * 11u) % MEMO_SLOTS];
  if (m->key == k && m->len == n && jsonl_same_bytes(m->text, (const unsigned char *)s, n)) return m->value;
  int v = from_name(s);
  m->key = k;
  m->len = (unsigned char)n;
  memcpy(m->text, s, n);
  m->value = v;
  return v;
}

static const char *fkey(const jsonl_view *l, const jfield *f) { return f->key >= 0 ? jsonl_key_names[f->key] : l->buf + f->koff; }
static const char *fval(const jsonl_view *l, const jfield *f) { return l->buf + f->off; }

/* The line's field of key, marked used; NULL when the line has none. */
static inline jfield *field(jctx *j, int key) {
  if (!((j->l.seen >> key) & 1)) return NULL;
  jfield *f = &j->l.f[j->l.by_key[key]];
  j->nused += !f->used;
  f->used = 1;
  return f;
}

static int fail(jctx *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(jctx *j, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  import_error(j->ic, "%s:%" PRId64 ": %s", j->ic->path, j->lineno, msg);
  return -1;
}

static const char *type_name(int t) {
  static const char *const names[] = {"null", "a boolean", "a number", "a string", "an object or array"};
  return names[t];
}

/* An integer field f of key k that is not a plain number of at most 18 digits (or is negative
 * where it must not be): its value from its text, or the error. */
static int i64_text(jctx *j, int k, const jfield *f, int64_t *out, int nonneg) {
  const char *v = fval(&j->l, f);
  if (f->type != J_NUM) return fail(j, "field '%s' must be an integer, not %s", jsonl_key_names[k], type_name(f->type));
  errno = 0;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (*end || errno) return fail(j, "field '%s' must be an integer, not '%s'", jsonl_key_names[k], v);
  if (nonneg && x < 0) return fail(j, "field '%s' must not be negative (got %s)", jsonl_key_names[k], v);
  if (x > IO_MAX_TIME_NS || x < -IO_MAX_TIME_NS)
    return fail(j, "field '%s' is out of range (%s; memplay takes at most 2^62 either way)", jsonl_key_names[k], v);
  *out = x;
  return 0;
}

/* Integer fields: absent leaves *out alone and returns 0; present but wrong is an error. */
static inline int get_i64(jctx *j, int k, int64_t *out, int nonneg) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  if (f->plain && (!nonneg || f->num >= 0)) { /* 18 digits are within IO_MAX_TIME_NS */
    *out = f->num;
    return 0;
  }
  return i64_text(j, k, f, out, nonneg);
}

/* An address field f of key k that is not a plain number: its value from its text, or the error. */
static int addr_text(jctx *j, int k, const jfield *f, uint64_t *out) {
  const char *v = fval(&j->l, f);
  errno = 0;
  char *end;
  if (f->type == J_NUM && v[0] != '-') {
    unsigned long long x = strtoull(v, &end, 10);
    if (!*end && !errno) {
      *out = x;
      return 0;
    }
  } else if (f->type == J_STR && (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) && v[2]) {
    unsigned long long x = strtoull(v + 2, &end, 16);
    if (!*end && !errno) {
      *out = x;
      return 0;
    }
  }
  return fail(j, "field '%s' must be a non-negative integer or a \"0x...\" string, not %s%s%s", jsonl_key_names[k],
              f->type == J_STR ? "'" : "", f->type == J_STR || f->type == J_NUM ? v : type_name(f->type),
              f->type == J_STR ? "'" : "");
}

static int field_missing(jctx *j, int k) {
  return fail(j, "an event of kind '%s' needs field '%s'", j->kind, jsonl_key_names[k]);
}

/* Addresses: a non-negative integer up to 2^64-1, or a "0x..." string. */
static inline int get_addr(jctx *j, int k, uint64_t *out, int required) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return required ? field_missing(j, k) : 0;
  if (f->plain && fval(&j->l, f)[0] != '-') {
    *out = (uint64_t)f->num;
    return 0;
  }
  return addr_text(j, k, f, out);
}

static int size_too_large(jctx *j, int k, const char *v) {
  return fail(j, "field '%s' is %s bytes, more than memplay's limit of 2^48 (256 TiB) for one size", jsonl_key_names[k], v);
}

/* A size field f of key k that is not a plain number within the limit: its value from its text
 * (a size with a unit), or the error. */
static int size_text(jctx *j, int k, const jfield *f, uint64_t *out) {
  const char *v = fval(&j->l, f);
  if (f->type == J_NUM) {
    if (v[0] == '-') return fail(j, "field '%s' must not be negative (got %s)", jsonl_key_names[k], v);
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || (errno && errno != ERANGE)) return fail(j, "field '%s' must be a whole number of bytes, not '%s'", jsonl_key_names[k], v);
    if (errno == ERANGE || x > IO_MAX_BYTES) return size_too_large(j, k, v);
    *out = x;
    return 0;
  }
  if (f->type == J_STR && sim_parse_size(v, out) == 0) {
    if (*out > IO_MAX_BYTES) return size_too_large(j, k, v);
    return 0;
  }
  return fail(j, "field '%s' must be a number of bytes (or a size such as \"4KiB\"), not %s", jsonl_key_names[k],
              f->type == J_STR ? v : type_name(f->type));
}

/* Sizes: a non-negative integer, or a string with a unit ("4KiB"), up to IO_MAX_BYTES. */
static inline int get_size(jctx *j, int k, uint64_t *out, int required) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return required ? field_missing(j, k) : 0;
  if (f->plain && fval(&j->l, f)[0] != '-' && (uint64_t)f->num <= IO_MAX_BYTES) {
    *out = (uint64_t)f->num;
    return 0;
  }
  return size_text(j, k, f, out);
}

static int not_a_string(jctx *j, int k, const jfield *f) {
  return fail(j, "field '%s' must be a string, not %s", jsonl_key_names[k], type_name(f->type));
}

/* A string field: its field (NULL when absent or null), or *bad set on an error. */
static inline jfield *str_field(jctx *j, int k, int *bad) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return NULL;
  if (f->type != J_STR) {
    *bad = not_a_string(j, k, f);
    return NULL;
  }
  return f;
}

static inline int get_str(jctx *j, int k, const char **out) {
  int bad = 0;
  jfield *f = str_field(j, k, &bad);
  if (f) *out = fval(&j->l, f);
  return bad;
}

static int get_bool(jctx *j, int k, int *out) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  if (f->type != J_BOOL) return fail(j, "field '%s' must be true or false, not %s", jsonl_key_names[k], type_name(f->type));
  *out = fval(&j->l, f)[0] == '1';
  return 0;
}

/* An enumerated name field. */
static inline int get_enum(jctx *j, int k, int (*from_name)(const char *), uint8_t *out, const char *accepted) {
  int bad = 0;
  jfield *f = str_field(j, k, &bad);
  if (!f) return bad;
  const char *s = fval(&j->l, f);
  int v = name_value(j, k, s, f->len, from_name);
  if (v < 0) return fail(j, "field '%s' has unknown value '%s' (accepted: %s)", jsonl_key_names[k], s, accepted);
  *out = (uint8_t)v;
  return 0;
}

/* A nested value as JSON text (object or array), or NULL. */
static int get_raw(jctx *j, int k, const char **out, int want_object) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  const char *v = fval(&j->l, f);
  if (f->type != J_RAW || (want_object && v[0] != '{') || (!want_object && v[0] != '['))
    return fail(j, "field '%s' must be %s", jsonl_key_names[k], want_object ? "an object" : "an array");
  *out = v;
  return 0;
}

static inline int unused_fields(jctx *j) {
  if (j->nused == j->l.n) return 0;
  for (int i = 0; i < j->l.n; i++)
    if (!j->l.f[i].used) return fail(j, "unknown field '%s' in a '%s' line", fkey(&j->l, &j->l.f[i]), j->kind);
  return 0;
}

/* ---- the import --------------------------------------------------------------------------- */

enum { A_LIVE = 1, A_REQUESTED = 2, A_FREED = 3 };
#define MAX_FREED_REMEMBERED 65536 /* frees remembered, so that a double free is reported as one */

/* The last frees of one kind of memory, oldest overwritten: read only to word an error. */
typedef struct freed_ring {
  uint64_t *addr;
  size_t n, next;
} freed_ring;

typedef struct jstate {
  jctx j;
  store_writer *w;
  char *name;
  const char *header_text; /* not used after the writer exists */
  store_trace meta;
  int have_header;
  sim_map addrs, host;     /* live address -> A_LIVE or A_REQUESTED */
  freed_ring addrs_freed, host_freed;
  sim_map stacks;          /* file-local stack id -> store id */
  int64_t last_ts;
} jstate;

/* The raw values below were captured by jsonl_lines.c, which refuses a value nested deeper than
 * JSONSCAN_TREE_MAX_DEPTH: yajl's tree of one is safe to free, without jsonscan_tree's look. */
static int parse_frames(jctx *j, const char *json, int64_t *stack_id) {
  char e[128];
  yajl_val v = yajl_tree_parse(json, e, sizeof e);
  if (!v || !YAJL_IS_ARRAY(v)) {
    yajl_tree_free(v);
    return fail(j, "a stack must be an array of frames");
  }
  size_t n = v->u.array.len;
  store_frame *fr = sim_xcalloc(n ? n : 1, sizeof *fr);
  for (size_t i = 0; i < n; i++) {
    yajl_val f = v->u.array.values[i];
    if (YAJL_IS_STRING(f)) {
      fr[i].name = f->u.string;
      continue;
    }
    if (!YAJL_IS_OBJECT(f)) {
      free(fr);
      yajl_tree_free(v);
      return fail(j, "frame %zu of a stack must be an object {\"name\", \"file\", \"line\"} or a string", i);
    }
    for (size_t k = 0; k < f->u.object.len; k++) {
      const char *key = f->u.object.keys[k];
      yajl_val x = f->u.object.values[k];
      if (!strcmp(key, "name") && YAJL_IS_STRING(x)) fr[i].name = x->u.string;
      else if ((!strcmp(key, "file") || !strcmp(key, "filename")) && YAJL_IS_STRING(x)) fr[i].file = x->u.string;
      else if (!strcmp(key, "line") && YAJL_IS_INTEGER(x)) fr[i].line = YAJL_GET_INTEGER(x);
      else {
        int rc = fail(j, "frame %zu of a stack has an unknown or mistyped field '%s'", i, key); /* key is v's */
        free(fr);
        yajl_tree_free(v);
        return rc;
      }
    }
  }
  int64_t id = store_intern_stack(j->ic->s, fr, n);
  free(fr);
  yajl_tree_free(v);
  if (id < 0) return fail(j, "%s", store_error(j->ic->s));
  *stack_id = id;
  return 0;
}

static int get_stack(jstate *st, int k, int64_t *out) {
  jctx *j = &st->j;
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  if (f->type == J_NUM) {
    int64_t local = 0;
    if (f->plain && f->num >= 0) local = f->num;
    else if (i64_text(j, k, f, &local, 1)) return -1;
    uint64_t *id = sim_map_get(&st->stacks, (uint64_t)local);
    if (!id) return fail(j, "stack %" PRId64 " is used before a \"stack\" line defines it", local);
    *out = (int64_t)*id;
    return 0;
  }
  if (f->type == J_RAW && fval(&j->l, f)[0] == '[') return parse_frames(j, fval(&j->l, f), out);
  return fail(j, "field '%s' must be a stack id or an array of frames", jsonl_key_names[k]);
}

static int get_flags(jctx *j, uint8_t *out) {
  const char *raw = NULL;
  if (get_raw(j, K_flags, &raw, 0)) return -1;
  if (!raw) return 0;
  yajl_val v = yajl_tree_parse(raw, NULL, 0);
  unsigned m = 0;
  for (size_t i = 0; v && i < v->u.array.len; i++) {
    yajl_val x = v->u.array.values[i];
    unsigned bit = YAJL_IS_STRING(x) ? sim_event_flag_from_name(x->u.string) : 0;
    if (!bit) {
      yajl_tree_free(v);
      return fail(j, "unknown flag in 'flags' (accepted: step_begin, step_end, phase, async, sync_event, device_api, "
                     "preexisting)");
    }
    m |= bit;
  }
  yajl_tree_free(v);
  *out = (uint8_t)m;
  return 0;
}

static int header(jstate *st) {
  jctx *j = &st->j;
  int64_t version = 0;
  if (get_i64(j, K_memplay, &version, 1)) return -1;
  if (version != 1) return fail(j, "unsupported memplay trace version %" PRId64 " (this memplay reads version 1)", version);
  store_trace *m = &st->meta;
  const char *s;
#define STR_FIELD(key, dst)                 \
  s = NULL;                               \
  if (get_str(j, key, &s)) return -1;     \
  if (s) dst = strdup(s);
  STR_FIELD(K_name, m->name);
  STR_FIELD(K_source_format, m->source_format);
  STR_FIELD(K_source_file, m->source_file);
  STR_FIELD(K_device_name, m->device_name);
  STR_FIELD(K_framework, m->framework);
  STR_FIELD(K_allocator, m->allocator);
  STR_FIELD(K_imported_at, m->imported_at);
#undef STR_FIELD
  int64_t v = 0;
  if (get_i64(j, K_device_memory, &v, 1)) return -1;
  if ((uint64_t)v > IO_MAX_BYTES) return size_too_large(j, K_device_memory, "more than 2^48");
  m->device_memory = v;
  v = -1;
  if (get_i64(j, K_device_index, &v, 0)) return -1;
  if (v < -1 || v > IO_MAX_DEVICE) return fail(j, "field 'device_index' must be -1 or a device index up to 1023, not %" PRId64, v);
  m->device_index = (int)v;
  v = 0;
  if (get_i64(j, K_batch_size, &v, 1)) return -1;
  m->batch_size = v;
  jfield *f = field(j, K_allocator_settings);
  if (f && f->type != J_NULL) {
    if (f->type == J_RAW && fval(&j->l, f)[0] == '{') m->allocator_settings = strdup(fval(&j->l, f));
    else if (f->type == J_STR) m->allocator_settings = strdup(fval(&j->l, f));
    else return fail(j, "field 'allocator_settings' must be an object or a string");
  }
  const char *attrs = NULL;
  if (get_raw(j, K_attrs, &attrs, 1)) return -1;
  if (attrs) m->attrs = strdup(attrs);
  for (int i = 0; i < j->l.n; i++)
    if (!j->l.f[i].used) return fail(j, "unknown field '%s' in the header line", fkey(&j->l, &j->l.f[i]));
  st->have_header = 1;
  return 0;
}

static int ensure_writer(jstate *st) {
  if (st->w) return 0;
  import_ctx *ic = st->j.ic;
  store_trace m = st->meta;
  if (ic->name) {
    st->name = import_trace_name(ic, NULL);
  } else if (m.name) {
    st->name = import_given_name(ic, m.name);
  } else {
    st->name = import_trace_name(ic, NULL);
  }
  if (!st->name) return fail(&st->j, "%s", store_error(ic->s));
  m.name = st->name;
  if (!m.source_format) m.source_format = (char *)"jsonl";
  if (!m.source_file) m.source_file = (char *)ic->path;
  if (!st->have_header) m.device_index = -1;
  if (import_begin_trace(ic, &m, &st->w)) {
    import_error(ic, "cannot import '%s': %s", ic->path, store_error(ic->s));
    return -1;
  }
  return 0;
}

static int write_args(jstate *st, int64_t seq, const char *raw) {
  jctx *j = &st->j;
  if (!raw) return 0;
  yajl_val v = yajl_tree_parse(raw, NULL, 0);
  int rc = 0;
  for (size_t i = 0; v && i < v->u.object.len && !rc; i++) {
    yajl_gen g = jsonw_mem();
    jsonw_tree(g, v->u.object.values[i]);
    if (store_writer_arg(st->w, seq, v->u.object.keys[i], jsonw_text(g, NULL)))
      rc = fail(j, "%s", store_error(j->ic->s));
    yajl_gen_free(g);
  }
  yajl_tree_free(v);
  return rc;
}

static void freed_push(freed_ring *r, uint64_t a) {
  if (!r->addr) r->addr = sim_xmalloc(MAX_FREED_REMEMBERED * sizeof *r->addr);
  r->addr[r->next] = a;
  r->next = (r->next + 1) % MAX_FREED_REMEMBERED;
  if (r->n < MAX_FREED_REMEMBERED) r->n++;
}

static int freed_recently(const freed_ring *r, uint64_t a) {
  for (size_t i = 0; i < r->n; i++)
    if (r->addr[i] == a) return 1;
  return 0;
}

/* Tracks allocation state so that bad frees are caught at the line that makes them. The table
 * holds the live addresses only (a few thousand at most, so its look-ups stay in the processor's
 * caches); the last frees are kept apart, in order, and read only to word an error. */
static int track(jstate *st, sim_event *ev) {
  jctx *j = &st->j;
  int host = ev->kind == SIM_EV_HOST_ALLOC || ev->kind == SIM_EV_HOST_FREE;
  sim_map *m = host ? &st->host : &st->addrs;
  freed_ring *r = host ? &st->host_freed : &st->addrs_freed;
  uint64_t a = ev->addr;
  if (ev->kind == SIM_EV_ALLOC || ev->kind == SIM_EV_HOST_ALLOC) {
    int existed;
    uint64_t *cur = sim_map_put(m, a, &existed);
    if (existed) return fail(j, "allocation at address %" PRIu64 ", which is still live (free it first)", a);
    *cur = A_LIVE;
    return 0;
  }
  uint64_t *cur = sim_map_get(m, a);
  int state = cur ? (int)*cur : freed_recently(r, a) ? A_FREED : 0;
  switch (ev->kind) {
  case SIM_EV_FREE_REQUESTED:
    if (state == A_LIVE) {
      *cur = A_REQUESTED;
      return 0;
    }
    break;
  case SIM_EV_FREE_COMPLETED:
    if (state == A_REQUESTED) goto freed;
    if (state == A_LIVE) return fail(j, "free_completed of address %" PRIu64 " without a free_requested before it", a);
    break;
  case SIM_EV_FREE:
  case SIM_EV_HOST_FREE:
    if (state == A_LIVE) goto freed;
    if (state == A_REQUESTED)
      return fail(j, "free of address %" PRIu64 " after its free_requested (complete it with free_completed)", a);
    break;
  }
  if (state == A_FREED || (state == A_REQUESTED && ev->kind == SIM_EV_FREE_REQUESTED))
    return fail(j, "double free: address %" PRIu64 " was already freed", a);
  return fail(j, "free of address %" PRIu64 ", which was never allocated", a);
freed:
  sim_map_del_slot(m, cur);
  freed_push(r, a);
  return 0;
}

static int event_line(jstate *st, int kind) {
  jctx *j = &st->j;
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = (uint8_t)kind;
  ev.ts = st->last_ts;
  if (kind == SIM_EV_HOST_ALLOC || kind == SIM_EV_HOST_FREE) {
    ev.device = -1;
    ev.mem = SIM_MEM_PINNED;
  }
  if (kind == SIM_EV_ALLOC) ev.mem = SIM_MEM_DEVICE;
  if (kind == SIM_EV_SYNC) ev.stream = -1;
  int64_t v;
  if (get_i64(j, K_ts, &ev.ts, 0) || get_i64(j, K_dur, &ev.dur, 1) || get_i64(j, K_dev_ts, &ev.dev_ts, 0) ||
      get_i64(j, K_api_dur, &ev.api_dur, 0))
    return -1;
  v = ev.device;
  if (get_i64(j, K_device, &v, 0)) return -1;
  if (v < -1 || v > 32767) return fail(j, "field 'device' must be -1 (host) or a device index, not %" PRId64, v);
  ev.device = (int16_t)v;
  if (get_i64(j, K_stream, &ev.stream, 0)) return -1;
  v = -1;
  if (get_i64(j, K_step, &v, 0)) return -1;
  if (v < -1 || v > INT32_MAX) return fail(j, "field 'step' is out of range");
  ev.step = (int32_t)v;
  int needs_addr = kind == SIM_EV_ALLOC || sim_event_is_free(&ev) || kind == SIM_EV_HOST_ALLOC || kind == SIM_EV_HOST_FREE;
  int needs_size = kind == SIM_EV_ALLOC || kind == SIM_EV_HOST_ALLOC;
  if (get_addr(j, K_addr, &ev.addr, needs_addr) || get_size(j, K_size, &ev.size, needs_size)) return -1;
  if (get_enum(j, K_mem, sim_mem_kind_from_name, &ev.mem, "device, pinned, pageable, managed, unknown") ||
      get_enum(j, K_dir, sim_copy_dir_from_name, &ev.dir, "h2d, d2h, d2d, h2h, p2p, none") ||
      get_enum(j, K_category, sim_category_from_name, &ev.category,
               "parameter, optimizer_state, gradient, activation, input, temporary, workspace, unknown"))
    return -1;
  if (field(j, K_category) && ev.category != SIM_CAT_UNKNOWN) ev.cat_source = SIM_CATSRC_SOURCE;
  if (get_enum(j, K_cat_source, sim_cat_source_from_name, &ev.cat_source, "source, stack, lifetime, user, none") ||
      get_flags(j, &ev.flags) || get_stack(st, K_stack, &ev.stack))
    return -1;
  const char *name = NULL;
  if (get_str(j, K_name, &name)) return -1;
  if (name) {
    ev.name = store_intern_string(j->ic->s, name, strlen(name));
    if (ev.name < 0) return fail(j, "%s", store_error(j->ic->s));
  }
  if (kind == SIM_EV_MEMCPY && ev.dir == SIM_COPY_NONE)
    return fail(j, "a 'memcpy' event needs field 'dir' (h2d, d2h, d2d, h2h or p2p)");
  if ((kind == SIM_EV_HOST_ALLOC || kind == SIM_EV_HOST_FREE) && ev.mem != SIM_MEM_PINNED && ev.mem != SIM_MEM_PAGEABLE)
    return fail(j, "a host allocation's 'mem' must be pinned or pageable");
  const char *args = NULL;
  if (get_raw(j, K_args, &args, 1) || unused_fields(j)) return -1;
  if (needs_addr && track(st, &ev)) return -1;
  if (ensure_writer(st)) return -1;
  if (store_writer_event(st->w, &ev)) return fail(j, "%s", store_error(j->ic->s));
  st->last_ts = ev.ts;
  return write_args(st, ev.seq, args);
}

static int recorded_line(jstate *st, const char *action) {
  jctx *j = &st->j;
  store_recorded r = {.action = action, .allocated = -1, .reserved = -1, .device_free = -1};
  int64_t v = 0;
  r.ts = st->last_ts;
  if (get_i64(j, K_ts, &r.ts, 0) || get_i64(j, K_device, &v, 0) || get_i64(j, K_stream, &r.stream, 0) ||
      get_addr(j, K_addr, &r.addr, 0) || get_size(j, K_size, &r.size, 0) || get_i64(j, K_allocated, &r.allocated, 1) ||
      get_i64(j, K_reserved, &r.reserved, 1) || get_i64(j, K_device_free, &r.device_free, 1) ||
      get_stack(st, K_stack, &r.stack) || unused_fields(j))
    return -1;
  r.device = (int)v;
  if (ensure_writer(st)) return -1;
  r.before_seq = store_writer_events(st->w);
  if (store_writer_recorded(st->w, &r)) return fail(j, "%s", store_error(j->ic->s));
  return 0;
}

static int segment_line(jstate *st) {
  jctx *j = &st->j;
  store_segment g = {.allocated_size = -1, .requested_size = -1, .active_size = -1};
  int64_t v = 0;
  if (get_i64(j, K_device, &v, 0) || get_addr(j, K_addr, &g.address, 1) || get_size(j, K_size, &g.total_size, 1) ||
      get_i64(j, K_stream, &g.stream, 0) || get_str(j, K_pool, &g.pool) || get_bool(j, K_expandable, &g.expandable) ||
      get_i64(j, K_allocated_size, &g.allocated_size, 1) || get_i64(j, K_requested_size, &g.requested_size, 1) ||
      get_i64(j, K_active_size, &g.active_size, 1) || get_stack(st, K_stack, &g.stack) || unused_fields(j))
    return -1;
  g.device = (int)v;
  if (ensure_writer(st)) return -1;
  if (store_writer_segment(st->w, &g)) return fail(j, "%s", store_error(j->ic->s));
  return 0;
}

static int block_line(jstate *st) {
  jctx *j = &st->j;
  store_block b = {.state = "inactive"};
  if (get_addr(j, K_segment, &b.segment_address, 1) || get_addr(j, K_addr, &b.address, 1) ||
      get_size(j, K_size, &b.size, 1) || get_size(j, K_requested_size, &b.requested_size, 0) ||
      get_str(j, K_state, &b.state) || get_stack(st, K_stack, &b.stack) || unused_fields(j))
    return -1;
  if (strcmp(b.state, "active_allocated") && strcmp(b.state, "active_pending_free") && strcmp(b.state, "inactive"))
    return fail(j, "field 'state' must be active_allocated, active_pending_free or inactive");
  if (ensure_writer(st)) return -1;
  if (store_writer_block(st->w, &b)) return fail(j, "%s", store_error(j->ic->s));
  return 0;
}

static int stack_line(jstate *st) {
  jctx *j = &st->j;
  int64_t local = -1;
  const char *frames = NULL;
  if (get_i64(j, K_id, &local, 1) || get_raw(j, K_frames, &frames, 0) || unused_fields(j)) return -1;
  if (local < 0 || !frames) return fail(j, "a 'stack' line needs 'id' and 'frames'");
  int64_t id;
  if (parse_frames(j, frames, &id)) return -1;
  *sim_map_put(&st->stacks, (uint64_t)local, NULL) = (uint64_t)id;
  return 0;
}

static int stat_line(jstate *st) {
  jctx *j = &st->j;
  const char *name = NULL, *severity = "info", *detail = NULL;
  int64_t value = 0;
  if (get_str(j, K_name, &name) || get_str(j, K_severity, &severity) || get_i64(j, K_value, &value, 0) ||
      get_str(j, K_detail, &detail) || unused_fields(j))
    return -1;
  if (!name) return fail(j, "a 'stat' line needs 'name'");
  if (ensure_writer(st)) return -1;
  if (store_writer_stat(st->w, name, severity, value, detail)) return fail(j, "%s", store_error(j->ic->s));
  return 0;
}

static int handle_line(jstate *st, int first) {
  jctx *j = &st->j;
  j->kind = NULL;
  j->nused = 0;
  if ((j->l.seen >> K_memplay) & 1) {
    if (!first) return fail(j, "a header line (with \"memplay\") must be the first line");
    j->kind = "header";
    return header(st);
  }
  int bad = 0;
  jfield *kf = str_field(j, K_kind, &bad);
  if (bad) return -1;
  if (!kf) return fail(j, "missing field 'kind'");
  const char *kind = fval(&j->l, kf);
  j->kind = kind;
  int k = name_value(j, K_kind, kind, kf->len, sim_event_kind_from_name);
  if (k > 0) return event_line(st, k);
  static const char *const recorded[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap",
                                         "oom",           "snapshot",     "totals",      NULL};
  for (size_t i = 0; recorded[i]; i++)
    if (!strcmp(kind, recorded[i])) return recorded_line(st, recorded[i]);
  if (!strcmp(kind, "segment")) return segment_line(st);
  if (!strcmp(kind, "block")) return block_line(st);
  if (!strcmp(kind, "stack")) return stack_line(st);
  if (!strcmp(kind, "stat")) return stat_line(st);
  return fail(j,
              "unknown kind '%s' (accepted: alloc, free, free_requested, free_completed, memcpy, memset, kernel, "
              "sync, marker, host_alloc, host_free, api, empty_cache, segment_alloc, segment_free, segment_map, "
              "segment_unmap, oom, snapshot, totals, segment, block, stack, stat)",
              kind);
}

/* Each line of the input, parsed by the reader and handled (blank lines skipped): 0, or -1 at
 * the first line that fails. */
static int read_lines(jstate *st, jsonl_reader *rd) {
  jctx *j = &st->j;
  for (int first = 1;; first = 0) {
    int got = jsonl_reader_next(rd, &j->l, &j->lineno);
    if (got < 0) import_error(j->ic, "%s", jsonl_reader_error(rd));
    if (got <= 0) return got;
    int rc = handle_line(st, first);
    if (rc) return rc;
  }
}

/* The trace is finished (a file of a header alone makes an empty trace). */
static int finish_trace(jstate *st, int rc) {
  jctx *j = &st->j;
  if (!rc && !st->w) {
    if (j->lineno == 0 || !st->have_header) rc = fail(j, "no events in the file");
    else if (ensure_writer(st)) rc = -1;
  }
  if (!rc) {
    rc = import_finish_trace(j->ic, st->w, st->name);
    st->w = NULL;
  }
  if (st->w) store_writer_abort(st->w);
  return rc;
}

static void jstate_free(jstate *st) {
  sim_map_release(&st->addrs);
  sim_map_release(&st->host);
  free(st->addrs_freed.addr);
  free(st->host_freed.addr);
  sim_map_release(&st->stacks);
  free(st->name);
  free(st->meta.name);
  free(st->meta.source_format);
  free(st->meta.source_file);
  free(st->meta.device_name);
  free(st->meta.framework);
  free(st->meta.allocator);
  free(st->meta.imported_at);
  free(st->meta.allocator_settings);
  free(st->meta.attrs);
  free(st);
}

static int jsonl_import(import_ctx *ic) {
  jstate *st = sim_xcalloc(1, sizeof *st);
  jctx *j = &st->j;
  for (int i = 0; i < MEMO_SLOTS; i++) j->memo[i].key = -1;
  j->ic = ic;
  st->meta.device_index = -1;
  sim_map_init(&st->addrs);
  sim_map_init(&st->host);
  sim_map_init(&st->stacks);
  jsonl_reader *rd = jsonl_reader_new(ic->in, ic->path);
  int rc = read_lines(st, rd);
  jsonl_reader_free(rd); /* its thread stops before the trace ends (or is rolled back) */
  rc = finish_trace(st, rc);
  jstate_free(st);
  return rc;
}

static int jsonl_detect(const unsigned char *head, size_t n, const char *path) {
  size_t i = 0;
  while (i < n && isspace(head[i])) i++;
  if (i >= n || head[i] != '{') return 0;
  /* One object per line: the first line closes before its newline and names a kind or memplay. */
  const unsigned char *nl = memchr(head + i, '\n', n - i);
  size_t end = nl ? (size_t)(nl - head) : n;
  int has_kind = memmem(head + i, end - i, "\"kind\"", 6) || memmem(head + i, end - i, "\"memplay\"", 9);
  size_t pl = strlen(path);
  int ext = pl > 6 && (!strcmp(path + pl - 6, ".jsonl") || (pl > 9 && !strcmp(path + pl - 9, ".jsonl.gz")));
  if (has_kind && nl) return 90;
  if (ext) return 40;
  return has_kind ? 30 : 0;
}

const importer import_jsonl = {
  .name = "jsonl",
  .summary = "memplay's own JSON Lines trace format (docs/formats.md)",
  .detect = jsonl_detect,
  .import = jsonl_import,
};

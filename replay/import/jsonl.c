/* import_jsonl.c: memplay's own JSON Lines format: a header line, then one event per line (docs/formats.md). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "sim/allocator.h"
#include "sim/hashmap.h"
#include "importer.h"
#include "io/limits.h"
#include "io/jsonscan.h"
#include "io/jsonw.h"

/*
 * Each line is parsed into a flat list of fields (key, JSON type, text); nested values (stacks,
 * args, settings) are captured as JSON text. The line is then interpreted by its "kind". Every
 * problem stops the import with "file:line: message".
 *
 * The parse: the scanner in front of yajl (io/jsonscan.h) takes a line that is one valid JSON
 * value whose strings are plain ASCII without escapes (nearly every line), calling the same
 * callbacks yajl would; any other line (escapes, other bytes, anything invalid, a callback
 * that refused something) is parsed again from its start by yajl, which decodes it or says
 * what is wrong, so that every message is yajl's or the callbacks' as before.
 */

enum jkey {
  K_active_size,
  K_addr,
  K_allocated,
  K_allocated_size,
  K_allocator,
  K_allocator_settings,
  K_api_dur,
  K_args,
  K_attrs,
  K_batch_size,
  K_cat_source,
  K_category,
  K_detail,
  K_dev_ts,
  K_device,
  K_device_free,
  K_device_index,
  K_device_memory,
  K_device_name,
  K_dir,
  K_dur,
  K_expandable,
  K_flags,
  K_frames,
  K_framework,
  K_id,
  K_imported_at,
  K_kind,
  K_mem,
  K_memplay,
  K_name,
  K_pool,
  K_requested_size,
  K_reserved,
  K_segment,
  K_severity,
  K_size,
  K_source_file,
  K_source_format,
  K_stack,
  K_state,
  K_step,
  K_stream,
  K_ts,
  K_value,
  K__COUNT
};

/* Sorted, for the binary search in key_of. */
static const char *const key_names[K__COUNT] = {
  "active_size",
  "addr",
  "allocated",
  "allocated_size",
  "allocator",
  "allocator_settings",
  "api_dur",
  "args",
  "attrs",
  "batch_size",
  "cat_source",
  "category",
  "detail",
  "dev_ts",
  "device",
  "device_free",
  "device_index",
  "device_memory",
  "device_name",
  "dir",
  "dur",
  "expandable",
  "flags",
  "frames",
  "framework",
  "id",
  "imported_at",
  "kind",
  "mem",
  "memplay",
  "name",
  "pool",
  "requested_size",
  "reserved",
  "segment",
  "severity",
  "size",
  "source_file",
  "source_format",
  "stack",
  "state",
  "step",
  "stream",
  "ts",
  "value",
};

/* The known keys by first letter: first[c] .. first[c + 1] in key_names, and each one's length. */
typedef struct key_index {
  unsigned char first[257];
  unsigned char len[K__COUNT];
} key_index;

static void key_index_init(key_index *x) {
  int k = 0;
  for (int c = 0; c < 256; c++) {
    x->first[c] = (unsigned char)k;
    while (k < K__COUNT && (unsigned char)key_names[k][0] == c) k++;
  }
  x->first[256] = K__COUNT;
  for (k = 0; k < K__COUNT; k++) x->len[k] = (unsigned char)strlen(key_names[k]);
}

static int key_of(const key_index *x, const unsigned char *s, size_t n) {
  if (!n) return -1;
  for (int k = x->first[s[0]], e = x->first[s[0] + 1]; k < e; k++)
    if (x->len[k] == n && !memcmp(key_names[k], s, n)) return k;
  return -1;
}

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_RAW };
#define MAX_FIELDS 48

typedef struct jfield {
  int key;         /* enum jkey, or -1 for a key memplay does not know */
  size_t koff;     /* key text in buf (a key memplay does not know; the others are key_names') */
  int type;
  int plain;       /* a number of at most 18 digits, no fraction or exponent: its value is num */
  int64_t num;
  size_t off, len; /* value text in buf */
  int used;
} jfield;

typedef struct jline {
  jfield f[MAX_FIELDS];
  int n;
  char *buf;
  size_t blen, bcap;
  int depth;       /* 0 outside, 1 inside the line's object, >1 inside a captured value */
  int objects;     /* top-level values completed on this line */
  int nonobject;   /* a top-level value that is not an object */
  size_t pending_key; /* offset in buf of the key awaiting its value */
  int pending_id;     /* its enum jkey, or -1 */
  uint64_t seen;      /* known keys seen on this line */
  int by_key[K__COUNT]; /* field index + 1 of each known key, 0 when absent */
  yajl_gen cap;    /* capture of a nested value */
  key_index keys;
  int fast;        /* parsing with the scanner: a string that is not plain ASCII sends the line to yajl */
  int declined;    /* ... and one did */
  char err[256];
} jline;

/* Whether the scanner may pass s on: plain ASCII (yajl validates anything else as UTF-8). */
static int plain_text(jline *l, const unsigned char *s, size_t n) {
  if (!l->fast) return 1;
  unsigned char any = 0;
  for (size_t i = 0; i < n; i++) any |= s[i];
  if (any < 0x80) return 1;
  l->declined = 1;
  return 0;
}

static size_t buf_add(jline *l, const void *p, size_t n) {
  if (l->blen + n + 1 > l->bcap) sim_grow((void **)&l->buf, &l->bcap, l->blen + n + 1, 1);
  size_t off = l->blen;
  memcpy(l->buf + off, p, n);
  l->buf[off + n] = 0;
  l->blen += n + 1;
  return off;
}

static jfield *add_value(jline *l, int type, const void *text, size_t n) {
  if (l->n >= MAX_FIELDS) {
    snprintf(l->err, sizeof l->err, "too many fields");
    return NULL;
  }
  size_t off = buf_add(l, text, n);
  jfield *f = &l->f[l->n++];
  f->koff = l->pending_key;
  f->key = l->pending_id;
  if (f->key >= 0) l->by_key[f->key] = l->n;
  f->type = type;
  f->plain = 0;
  f->off = off;
  f->len = n;
  f->used = 0;
  return f;
}

/* Scalars at depth 1 become fields; inside a capture they go to the generator. */
static int top_scalar(jline *l) {
  if (l->depth == 0) {
    if (l->objects) snprintf(l->err, sizeof l->err, "more than one JSON value on one line");
    else l->nonobject = 1;
    return 0;
  }
  return l->depth == 1;
}

static int cb_null(void *c) {
  jline *l = c;
  if (l->depth > 1) return yajl_gen_null(l->cap) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  return add_value(l, J_NULL, "", 0) != NULL;
}
static int cb_bool(void *c, int b) {
  jline *l = c;
  if (l->depth > 1) return yajl_gen_bool(l->cap, b) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  return add_value(l, J_BOOL, b ? "1" : "0", 1) != NULL;
}
static int cb_num(void *c, const char *s, size_t n) {
  jline *l = c;
  if (l->depth > 1) return yajl_gen_number(l->cap, s, n) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  jfield *f = add_value(l, J_NUM, s, n);
  if (!f) return 0;
  /* the common integer, read here once (get_i64 and the others fall back to the text) */
  size_t i = s[0] == '-';
  if (n > i && n - i <= 18) {
    int64_t v = 0;
    size_t d = i;
    for (; d < n && s[d] >= '0' && s[d] <= '9'; d++) v = v * 10 + (s[d] - '0');
    if (d == n) {
      f->plain = 1;
      f->num = i ? -v : v;
    }
  }
  return 1;
}
static int cb_str(void *c, const unsigned char *s, size_t n) {
  jline *l = c;
  if (!plain_text(l, s, n)) return 0;
  if (l->depth > 1) return yajl_gen_string(l->cap, s, n) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  return add_value(l, J_STR, s, n) != NULL;
}
static int cb_key(void *c, const unsigned char *s, size_t n) {
  jline *l = c;
  if (!plain_text(l, s, n)) return 0;
  if (l->depth > 1) return yajl_gen_string(l->cap, s, n) == yajl_gen_status_ok;
  int k = key_of(&l->keys, s, n);
  int dup = 0;
  if (k >= 0) {
    dup = (l->seen >> k) & 1;
    l->seen |= UINT64_C(1) << k;
  } else {
    for (int i = 0; i < l->n && !dup; i++)
      dup = l->f[i].key < 0 && strlen(l->buf + l->f[i].koff) == n && !memcmp(l->buf + l->f[i].koff, s, n);
  }
  if (dup) {
    snprintf(l->err, sizeof l->err, "field '%.*s' appears twice", (int)(n > 64 ? 64 : n), s);
    return 0;
  }
  l->pending_key = k < 0 ? buf_add(l, s, n) : 0;
  l->pending_id = k;
  return 1;
}

static int open_nested(jline *l, int map) {
  if (l->depth == 0) {
    if (l->objects) {
      snprintf(l->err, sizeof l->err, "more than one JSON value on one line");
      return 0;
    }
    if (!map) {
      l->nonobject = 1;
      return 0;
    }
    l->depth = 1;
    return 1;
  }
  if (l->depth == 1) yajl_gen_clear(l->cap), yajl_gen_reset(l->cap, NULL);
  l->depth++;
  return (map ? yajl_gen_map_open(l->cap) : yajl_gen_array_open(l->cap)) == yajl_gen_status_ok;
}
static int close_nested(jline *l, int map) {
  if (l->depth == 1) {
    l->depth = 0;
    l->objects++;
    return 1;
  }
  if ((map ? yajl_gen_map_close(l->cap) : yajl_gen_array_close(l->cap)) != yajl_gen_status_ok) return 0;
  if (--l->depth == 1) {
    size_t n;
    const char *t = jsonw_text(l->cap, &n);
    return add_value(l, J_RAW, t, n) != NULL;
  }
  return 1;
}
static int cb_smap(void *c) { return open_nested(c, 1); }
static int cb_emap(void *c) { return close_nested(c, 1); }
static int cb_sarr(void *c) { return open_nested(c, 0); }
static int cb_earr(void *c) { return close_nested(c, 0); }

static const yajl_callbacks line_cbs = {cb_null, cb_bool, NULL, NULL, cb_num, cb_str, cb_smap, cb_key, cb_emap, cb_sarr, cb_earr};

/* ---- typed access to a line's fields ---------------------------------------------------- */

typedef struct jctx {
  import_ctx *ic;
  jline l;
  int64_t lineno;
  const char *kind;
} jctx;

static const char *fkey(const jline *l, const jfield *f) { return f->key >= 0 ? key_names[f->key] : l->buf + f->koff; }
static const char *fval(const jline *l, const jfield *f) { return l->buf + f->off; }

static jfield *field(jctx *j, int key) {
  int i = j->l.by_key[key];
  if (!i) return NULL;
  j->l.f[i - 1].used = 1;
  return &j->l.f[i - 1];
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

/* Integer fields: absent leaves *out alone and returns 0; present but wrong is an error. */
static int get_i64(jctx *j, int k, int64_t *out, int nonneg) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  if (f->plain && (!nonneg || f->num >= 0)) { /* 18 digits are within IO_MAX_TIME_NS */
    *out = f->num;
    return 0;
  }
  const char *v = fval(&j->l, f);
  if (f->type != J_NUM) return fail(j, "field '%s' must be an integer, not %s", key_names[k], type_name(f->type));
  errno = 0;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (*end || errno) return fail(j, "field '%s' must be an integer, not '%s'", key_names[k], v);
  if (nonneg && x < 0) return fail(j, "field '%s' must not be negative (got %s)", key_names[k], v);
  if (x > IO_MAX_TIME_NS || x < -IO_MAX_TIME_NS)
    return fail(j, "field '%s' is out of range (%s; memplay takes at most 2^62 either way)", key_names[k], v);
  *out = x;
  return 0;
}

/* Addresses: a non-negative integer up to 2^64-1, or a "0x..." string. */
static int get_addr(jctx *j, int k, uint64_t *out, int required) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) {
    if (required) return fail(j, "an event of kind '%s' needs field '%s'", j->kind, key_names[k]);
    return 0;
  }
  const char *v = fval(&j->l, f);
  if (f->plain && v[0] != '-') {
    *out = (uint64_t)f->num;
    return 0;
  }
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
  return fail(j, "field '%s' must be a non-negative integer or a \"0x...\" string, not %s%s%s", key_names[k],
              f->type == J_STR ? "'" : "", f->type == J_STR || f->type == J_NUM ? v : type_name(f->type),
              f->type == J_STR ? "'" : "");
}

static int size_too_large(jctx *j, int k, const char *v) {
  return fail(j, "field '%s' is %s bytes, more than memplay's limit of 2^48 (256 TiB) for one size", key_names[k], v);
}

/* Sizes: a non-negative integer, or a string with a unit ("4KiB"), up to IO_MAX_BYTES. */
static int get_size(jctx *j, int k, uint64_t *out, int required) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) {
    if (required) return fail(j, "an event of kind '%s' needs field '%s'", j->kind, key_names[k]);
    return 0;
  }
  const char *v = fval(&j->l, f);
  if (f->plain && v[0] != '-' && (uint64_t)f->num <= IO_MAX_BYTES) {
    *out = (uint64_t)f->num;
    return 0;
  }
  if (f->type == J_NUM) {
    if (v[0] == '-') return fail(j, "field '%s' must not be negative (got %s)", key_names[k], v);
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || (errno && errno != ERANGE)) return fail(j, "field '%s' must be a whole number of bytes, not '%s'", key_names[k], v);
    if (errno == ERANGE || x > IO_MAX_BYTES) return size_too_large(j, k, v);
    *out = x;
    return 0;
  }
  if (f->type == J_STR && sim_parse_size(v, out) == 0) {
    if (*out > IO_MAX_BYTES) return size_too_large(j, k, v);
    return 0;
  }
  return fail(j, "field '%s' must be a number of bytes (or a size such as \"4KiB\"), not %s", key_names[k],
              f->type == J_STR ? v : type_name(f->type));
}

static int get_str(jctx *j, int k, const char **out) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  if (f->type != J_STR) return fail(j, "field '%s' must be a string, not %s", key_names[k], type_name(f->type));
  *out = fval(&j->l, f);
  return 0;
}

static int get_bool(jctx *j, int k, int *out) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  if (f->type != J_BOOL) return fail(j, "field '%s' must be true or false, not %s", key_names[k], type_name(f->type));
  *out = fval(&j->l, f)[0] == '1';
  return 0;
}

/* An enumerated name field. */
static int get_enum(jctx *j, int k, int (*from_name)(const char *), uint8_t *out, const char *accepted) {
  const char *s = NULL;
  if (get_str(j, k, &s)) return -1;
  if (!s) return 0;
  int v = from_name(s);
  if (v < 0) return fail(j, "field '%s' has unknown value '%s' (accepted: %s)", key_names[k], s, accepted);
  *out = (uint8_t)v;
  return 0;
}

/* A nested value as JSON text (object or array), or NULL. */
static int get_raw(jctx *j, int k, const char **out, int want_object) {
  jfield *f = field(j, k);
  if (!f || f->type == J_NULL) return 0;
  const char *v = fval(&j->l, f);
  if (f->type != J_RAW || (want_object && v[0] != '{') || (!want_object && v[0] != '['))
    return fail(j, "field '%s' must be %s", key_names[k], want_object ? "an object" : "an array");
  *out = v;
  return 0;
}

static int unused_fields(jctx *j) {
  for (int i = 0; i < j->l.n; i++)
    if (!j->l.f[i].used) return fail(j, "unknown field '%s' in a '%s' line", fkey(&j->l, &j->l.f[i]), j->kind);
  return 0;
}

/* ---- the import --------------------------------------------------------------------------- */

enum { A_LIVE = 1, A_REQUESTED = 2, A_FREED = 3 };
#define MAX_FREED_REMEMBERED 65536

typedef struct jstate {
  jctx j;
  store_writer *w;
  char *name;
  const char *header_text; /* not used after the writer exists */
  store_trace meta;
  int have_header;
  sim_map addrs, host;     /* address -> A_* */
  size_t nfreed;
  sim_map stacks;          /* file-local stack id -> store id */
  int64_t last_ts;
} jstate;

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
    f->used = 0;
    int64_t local = 0;
    if (get_i64(j, k, &local, 1)) return -1;
    uint64_t *id = sim_map_get(&st->stacks, (uint64_t)local);
    if (!id) return fail(j, "stack %" PRId64 " is used before a \"stack\" line defines it", local);
    *out = (int64_t)*id;
    return 0;
  }
  if (f->type == J_RAW && fval(&j->l, f)[0] == '[') return parse_frames(j, fval(&j->l, f), out);
  return fail(j, "field '%s' must be a stack id or an array of frames", key_names[k]);
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

/* Forgets old frees, keeping the live addresses (later double frees then read as frees of unknown
 * addresses). */
static void forget_frees(jstate *st, sim_map *m) {
  sim_map fresh;
  sim_map_init(&fresh);
  size_t it = 0;
  uint64_t k, v;
  while (sim_map_next(m, &it, &k, &v))
    if (v != A_FREED) *sim_map_put(&fresh, k, NULL) = v;
  sim_map_release(m);
  *m = fresh;
  st->nfreed = 0;
}

/* Tracks allocation state so that bad frees are caught at the line that makes them. */
static int track(jstate *st, sim_event *ev) {
  jctx *j = &st->j;
  int host = ev->kind == SIM_EV_HOST_ALLOC || ev->kind == SIM_EV_HOST_FREE;
  sim_map *m = host ? &st->host : &st->addrs;
  int existed;
  uint64_t *cur = sim_map_put(m, ev->addr, &existed); /* one look-up; an unknown address fails the import */
  int state = existed ? (int)*cur : 0;
  uint64_t a = ev->addr;
  switch (ev->kind) {
  case SIM_EV_ALLOC:
  case SIM_EV_HOST_ALLOC:
    if (state == A_LIVE || state == A_REQUESTED)
      return fail(j, "allocation at address %" PRIu64 ", which is still live (free it first)", a);
    if (state == A_FREED) st->nfreed--;
    *cur = A_LIVE;
    return 0;
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
  *cur = A_FREED;
  if (st->nfreed >= MAX_FREED_REMEMBERED) {
    *cur = A_LIVE; /* kept through the clean-up, then freed */
    forget_frees(st, m);
    *sim_map_put(m, a, NULL) = A_FREED;
  }
  st->nfreed++;
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
  if (j->l.by_key[K_memplay]) {
    if (!first) return fail(j, "a header line (with \"memplay\") must be the first line");
    j->kind = "header";
    return header(st);
  }
  const char *kind = NULL;
  if (get_str(j, K_kind, &kind)) return -1;
  if (!kind) return fail(j, "missing field 'kind'");
  j->kind = kind;
  int k = sim_event_kind_from_name(kind);
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

/* Clears what the parser gathered from the line before. */
static inline void line_reset(jline *l) {
  for (int i = 0; i < l->n; i++)
    if (l->f[i].key >= 0) l->by_key[l->f[i].key] = 0;
  l->n = 0;
  l->blen = 0;
  l->objects = 0;
  l->nonobject = 0;
  l->pending_key = 0;
  l->seen = 0;
  l->depth = 0;
  l->declined = 0;
  l->err[0] = 0;
}

/* Fails the import on a line that is not one whole JSON object, saying what it is instead. */
static int line_invalid(jctx *j, yajl_handle h, yajl_status ys, const char *line, size_t len) {
  if (j->l.err[0]) return fail(j, "%s", j->l.err);
  if (j->l.nonobject) return fail(j, "each line must be one JSON object");
  if (ys != yajl_status_ok) {
    unsigned char *m = yajl_get_error(h, 0, (const unsigned char *)line, len);
    char *nl = strchr((char *)m, '\n');
    if (nl) *nl = 0;
    int rc = fail(j, "invalid JSON: %s (at column %zu)", (char *)m, yajl_get_bytes_consumed(h) + 1);
    yajl_free_error(h, m);
    return rc;
  }
  if (j->l.objects > 1) return fail(j, "more than one JSON value on one line");
  return fail(j, "the JSON object does not end on this line");
}

/* Parses one line into j->l: the scanner first, yajl when the scanner declines it. 0, or -1 after
 * the message when the line is not one whole JSON object. */
static int parse_line(jctx *j, yajl_handle h, const char *line, size_t len) {
  line_reset(&j->l);
  j->l.fast = 1;
  int sc = jsonscan_value(line, len, &line_cbs, &j->l);
  j->l.fast = 0;
  if (sc == JSONSCAN_OK && j->l.depth == 0 && j->l.objects == 1 && !j->l.err[0]) return 0;
  line_reset(&j->l);
  yajl_status ys = yajl_parse(h, (const unsigned char *)line, len);
  if (ys != yajl_status_ok || j->l.depth != 0 || j->l.objects != 1) return line_invalid(j, h, ys, line, len);
  /* the line ends here: a value yajl still holds back (a number after the object) is one too many */
  ys = yajl_complete_parse(h);
  if (j->l.err[0]) return fail(j, "%s", j->l.err);
  if (ys != yajl_status_ok) {
    unsigned char *m = yajl_get_error(h, 0, NULL, 0);
    char *nl = strchr((char *)m, '\n');
    if (nl) *nl = 0;
    int rc = fail(j, "invalid JSON: %s (at the end of the line)", (char *)m);
    yajl_free_error(h, m);
    return rc;
  }
  return 0;
}

/* Each line of the input, parsed and handled (blank lines skipped): 0, or -1 at the first
 * line that fails. */
static int read_lines(jstate *st, yajl_handle h) {
  jctx *j = &st->j;
  import_ctx *ic = j->ic;
  int first = 1;
  char *line;
  size_t len;
  for (;;) {
    int got = input_line(ic->in, &line, &len);
    if (got == -2) {
      j->lineno++;
      return fail(j, "the line is longer than 64 MiB (memplay's limit for one line)");
    }
    if (got < 0) {
      import_error(ic, "%s", input_error(ic->in));
      return -1;
    }
    if (got == 0) return 0;
    j->lineno++;
    size_t sp = 0;
    while (sp < len && isspace((unsigned char)line[sp])) sp++;
    if (sp == len) continue;
    if (parse_line(j, h, line, len)) return -1;
    int rc = handle_line(st, first);
    first = 0;
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
  jctx *j = &st->j;
  yajl_gen_free(j->l.cap);
  free(j->l.buf);
  sim_map_release(&st->addrs);
  sim_map_release(&st->host);
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
  key_index_init(&j->l.keys);
  j->ic = ic;
  j->l.cap = jsonw_mem();
  st->meta.device_index = -1;
  sim_map_init(&st->addrs);
  sim_map_init(&st->host);
  sim_map_init(&st->stacks);
  yajl_handle h = yajl_alloc(&line_cbs, NULL, &j->l);
  yajl_config(h, yajl_allow_multiple_values, 1);
  int rc = read_lines(st, h);
  rc = finish_trace(st, rc);
  yajl_free(h);
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

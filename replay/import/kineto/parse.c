/* parse.c: Kineto: the JSON parse callbacks: each traceEvents element into its fields, other values kept. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "io/limits.h"
#include "kineto_int.h"

/*
 * yajl and the scanner (jsonscan.h) call these alike. Depth 1 is the document's object, 2 the
 * traceEvents array, 3 an element, 4 its args. An element's fields go into p->e (a field of the
 * wrong type is remembered in p->bad, for the handler to report); at its end the element goes
 * to the handler (kineto_element_done). Top-level values other than traceEvents are captured
 * as JSON text for the trace's attrs.
 */

/* ---- small parsers -------------------------------------------------------------------------- */

/* An integer in JSON number text; 0 or -1 when it is not a whole number in range. */
static int parse_int(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  int neg = 0;
  if (i < n && s[i] == '-') neg = 1, i++;
  if (i == n) return -1;
  uint64_t v = 0;
  for (; i < n; i++) {
    unsigned d = (unsigned)(s[i] - '0');
    if (d > 9) break;
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (i < n) {
    /* 12.0 or 1.2e3: accept when the value is whole */
    char buf[64];
    if (n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || errno || d != (double)(int64_t)d) return -1;
    *out = (int64_t)d;
    return 0;
  }
  if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
    /* Addresses above 2^63 are written as large unsigned numbers: keep the bits. */
    if (neg) return -1;
    *out = (int64_t)v;
    return 0;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* Microseconds as JSON number text ("1669783687464181", "5394573.877") to integer nanoseconds,
 * exactly (no trip through a double unless an exponent forces one). */
static int parse_us(const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  int neg = 0;
  if (i < n && s[i] == '-') neg = 1, i++;
  uint64_t whole = 0;
  size_t digits = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
    if (whole > UINT64_MAX / 10 - 1) return -1;
    whole = whole * 10 + (uint64_t)(s[i] - '0');
  }
  uint64_t frac = 0;
  int fd = 0, round_up = 0;
  if (i < n && s[i] == '.') {
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
      if (fd < 3) frac = frac * 10 + (uint64_t)(s[i] - '0'), fd++;
      else if (fd == 3) round_up = s[i] >= '5', fd++;
    }
  }
  if (i < n || !digits) {
    char buf[64];
    if (n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || errno || !(d > -4.6e15 && d < 4.6e15)) return -1; /* below 2^62 ns */
    double ns = d * 1000.0;
    *out = (int64_t)(ns < 0 ? ns - 0.5 : ns + 0.5);
    return 0;
  }
  while (fd < 3) frac *= 10, fd++;
  if (whole > (uint64_t)IO_MAX_TIME_NS / 1000 - 1) return -1; /* io/limits.h: times stay below 2^62 ns */
  int64_t v = (int64_t)(whole * 1000 + frac + (uint64_t)round_up);
  *out = neg ? -v : v;
  return 0;
}

/* A failure in the parser's callbacks (the file's structure), apart from the handler's. */
static void ps_fail(kparse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ps_fail(kparse *p, const char *fmt, ...) {
  if (p->pfailed) return;
  p->pfailed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->perr, sizeof p->perr, fmt, ap);
  va_end(ap);
}

static void bad_field(kparse *p, const char *key, const char *want) {
  if (!p->bad[0]) snprintf(p->bad, sizeof p->bad, "field '%s' must be %s", key, want);
}

/* ---- parse callbacks ------------------------------------------------------------------------ */

static int elem_key_of(const unsigned char *k, size_t n) {
  switch (n) {
  case 2:
    if (!memcmp(k, "ph", 2)) return E_PH;
    if (!memcmp(k, "ts", 2)) return E_TS;
    break;
  case 3:
    if (!memcmp(k, "cat", 3)) return E_CAT;
    if (!memcmp(k, "pid", 3)) return E_PID;
    if (!memcmp(k, "tid", 3)) return E_TID;
    if (!memcmp(k, "dur", 3)) return E_DUR;
    break;
  case 4:
    if (!memcmp(k, "name", 4)) return E_NAME;
    if (!memcmp(k, "args", 4)) return E_ARGS;
    break;
  }
  return -1;
}

const char *const kineto_args_names[A__COUNT] = {
  [A_ADDR] = "Addr",          [A_BYTES_SIGNED] = "Bytes", [A_TOTAL_ALLOC] = "Total Allocated",
  [A_TOTAL_RES] = "Total Reserved", [A_DEVTYPE] = "Device Type", [A_DEVID] = "Device Id",
  [A_DEVICE] = "device",      [A_STREAM] = "stream",     [A_CORR] = "correlation",
  [A_NBYTES] = "bytes",       [A_SYNC_KIND] = "cuda_sync_kind",
};

static int args_key_of(const unsigned char *k, size_t n) {
  switch (n) {
  case 4:
    if (!memcmp(k, "Addr", 4)) return A_ADDR;
    break;
  case 5:
    if (!memcmp(k, "Bytes", 5)) return A_BYTES_SIGNED;
    if (!memcmp(k, "bytes", 5)) return A_NBYTES;
    break;
  case 6:
    if (!memcmp(k, "device", 6)) return A_DEVICE;
    if (!memcmp(k, "stream", 6)) return A_STREAM;
    break;
  case 9:
    if (!memcmp(k, "Device Id", 9)) return A_DEVID;
    break;
  case 11:
    if (!memcmp(k, "correlation", 11)) return A_CORR;
    if (!memcmp(k, "Device Type", 11)) return A_DEVTYPE;
    break;
  case 14:
    if (!memcmp(k, "Total Reserved", 14)) return A_TOTAL_RES;
    if (!memcmp(k, "cuda_sync_kind", 14)) return A_SYNC_KIND;
    break;
  case 15:
    if (!memcmp(k, "Total Allocated", 15)) return A_TOTAL_ALLOC;
    break;
  }
  return -1;
}

static int cat_of(const unsigned char *s, size_t n) {
  switch (n) {
  case 4:
    if (!memcmp(s, "ac2g", 4)) return CAT_FLOW;
    break;
  case 6:
    if (!memcmp(s, "cpu_op", 6)) return CAT_CPU_OP;
    if (!memcmp(s, "kernel", 6)) return CAT_KERNEL;
    if (!memcmp(s, "fwdbwd", 6)) return CAT_FLOW;
    break;
  case 9:
    if (!memcmp(s, "cuda_sync", 9)) return CAT_CUDA_SYNC;
    break;
  case 10:
    if (!memcmp(s, "gpu_memcpy", 10)) return CAT_MEMCPY;
    if (!memcmp(s, "gpu_memset", 10)) return CAT_MEMSET;
    if (!memcmp(s, "cuda_event", 10)) return CAT_CUDA_EVENT;
    break;
  case 11:
    if (!memcmp(s, "cuda_driver", 11)) return CAT_DRIVER;
    break;
  case 12:
    if (!memcmp(s, "cuda_runtime", 12)) return CAT_RUNTIME;
    break;
  case 15:
    if (!memcmp(s, "user_annotation", 15)) return CAT_USER_ANNOTATION;
    if (!memcmp(s, "python_function", 15)) return CAT_PYTHON_FUNCTION;
    break;
  case 17:
    if (!memcmp(s, "cpu_instant_event", 17)) return CAT_INSTANT;
    break;
  }
  return CAT_OTHER;
}

static void elem_reset(kparse *p) {
  kelem *e = &p->e;
  e->ph = 0;
  e->cat = CAT_NONE;
  e->have = e->args = 0;
  e->sync_kind[0] = 0;
  p->bad[0] = 0;
  p->name_len = 0;
  p->cat_len = 0;
  p->elem_key = p->args_key = -1;
  p->in_args = 0;
}

/* JSON value types as the callbacks see them. */
enum { T_NULL, T_BOOL, T_NUM, T_STR };

/* A scalar field of the element. */
static void elem_field(kparse *p, int type, const char *s, size_t n) {
  kelem *e = &p->e;
  int k = p->elem_key;
  if (k < 0) return;
  e->have |= 1u << k;
  switch (k) {
  case E_PH:
    if (type != T_STR) bad_field(p, "ph", "a string");
    else e->ph = n ? s[0] : 0;
    break;
  case E_CAT:
    if (type != T_STR) {
      bad_field(p, "cat", "a string");
      break;
    }
    e->cat = cat_of((const unsigned char *)s, n);
    if (e->cat == CAT_OTHER) {
      sim_grow((void **)&p->cat_text, &p->cat_cap, n + 1, 1);
      memcpy(p->cat_text, s, n);
      p->cat_text[n] = 0;
      p->cat_len = n;
    }
    break;
  case E_NAME:
    if (type != T_STR) {
      bad_field(p, "name", "a string");
      break;
    }
    sim_grow((void **)&p->name, &p->name_cap, n + 1, 1);
    memcpy(p->name, s, n);
    p->name[n] = 0;
    p->name_len = n;
    break;
  case E_TID:
    if (type == T_NUM) {
      if (parse_int(s, n, &e->tid)) bad_field(p, "tid", "an integer or a string");
    } else {
      /* a named track ("Spans"): hash it so that it is a thread of its own */
      uint64_t h = 1469598103934665603ull;
      for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
      e->tid = (int64_t)(h >> 1) | INT64_C(0x4000000000000000);
    }
    break;
  case E_PID:
    break;
  case E_TS:
    if (type != T_NUM || parse_us(s, n, &e->ts)) bad_field(p, "ts", "a number of microseconds");
    break;
  case E_DUR:
    if (type != T_NUM || parse_us(s, n, &e->dur)) bad_field(p, "dur", "a number of microseconds");
    break;
  case E_ARGS:
    if (type != T_NULL) bad_field(p, "args", "an object");
    break;
  }
}

/* A scalar in the element's args. */
static void args_field(kparse *p, int type, const char *s, size_t n) {
  kelem *e = &p->e;
  int k = p->args_key;
  if (k < 0) return;
  if (k == A_SYNC_KIND) {
    if (type == T_STR) {
      size_t m = n < sizeof e->sync_kind - 1 ? n : sizeof e->sync_kind - 1;
      memcpy(e->sync_kind, s, m);
      e->sync_kind[m] = 0;
      e->args |= 1u << k;
    }
    return;
  }
  if (type == T_NULL) return;
  if (type != T_NUM || parse_int(s, n, &e->a[k])) {
    bad_field(p, kineto_args_names[k], "an integer");
    return;
  }
  /* ranges before any arithmetic (io/limits.h): byte counts, device numbers */
  int64_t v = e->a[k];
  if ((k == A_BYTES_SIGNED || k == A_TOTAL_ALLOC || k == A_TOTAL_RES || k == A_NBYTES) &&
      (v > (int64_t)IO_MAX_BYTES || v < -(int64_t)IO_MAX_BYTES)) {
    bad_field(p, kineto_args_names[k], "a number of bytes of at most 2^48 (256 TiB)");
    return;
  }
  if ((k == A_DEVID || k == A_DEVICE) && (v < -1 || v > IO_MAX_DEVICE)) {
    bad_field(p, kineto_args_names[k], "a device number from -1 to 1023");
    return;
  }
  e->args |= 1u << k;
}

/* A scalar inside an element, args object or args array. */
static int elem_scalar(kparse *p, int type, const char *s, size_t n) {
  if (p->depth == 3) elem_field(p, type, s, n);
  else if (p->depth == 4 && p->in_args) args_field(p, type, s, n);
  return 1;
}

/* Top-level value capture (metadata such as deviceProperties). */
static int capture_ok(kparse *p, yajl_gen_status st) {
  if (st != yajl_gen_status_ok) {
    ps_fail(p, "cannot read the value of top-level field '%s'", p->top_key ? p->top_key : "?");
    return 0;
  }
  return 1;
}

static void capture_done(kparse *p) {
  size_t len;
  const char *t = jsonw_text(p->cap, &len);
  if (p->captured + len > KINETO_MAX_CAPTURE) {
    p->top_dropped++;
  } else {
    p->captured += len;
    sim_grow((void **)&p->tops, &p->tops_cap, p->ntops + 1, sizeof *p->tops);
    char *j = sim_xmalloc(len + 1);
    memcpy(j, t, len);
    j[len] = 0;
    p->tops[p->ntops++] = (top_value){strdup(p->top_key ? p->top_key : ""), j};
  }
  yajl_gen_clear(p->cap);
  yajl_gen_reset(p->cap, NULL);
  p->capturing = 0;
}

static int on_scalar(kparse *p, int type, const char *s, size_t n) {
  if (p->in_events) {
    if (p->depth == 2) {
      ps_fail(p, "traceEvents[%" PRId64 "] is not an object", p->nelem);
      return 0;
    }
    return elem_scalar(p, type, s, n);
  }
  if (p->depth == 0) {
    ps_fail(p, "the file is a JSON %s, not an object with traceEvents", type == T_STR ? "string" : "scalar");
    return 0;
  }
  /* a value at the top level, or inside a captured one */
  if (p->depth == 1) {
    yajl_gen_clear(p->cap);
    yajl_gen_reset(p->cap, NULL);
  }
  yajl_gen_status st = type == T_NULL   ? yajl_gen_null(p->cap)
                       : type == T_BOOL ? yajl_gen_bool(p->cap, s[0] == '1')
                       : type == T_NUM  ? yajl_gen_number(p->cap, s, n)
                                        : yajl_gen_string(p->cap, (const unsigned char *)s, n);
  if (!capture_ok(p, st)) return 0;
  if (p->depth == 1) capture_done(p);
  return 1;
}

static int cb_null(void *c) { return on_scalar(c, T_NULL, "", 0); }
static int cb_bool(void *c, int b) { return on_scalar(c, T_BOOL, b ? "1" : "0", 1); }
static int cb_number(void *c, const char *s, size_t n) { return on_scalar(c, T_NUM, s, n); }
static int cb_string(void *c, const unsigned char *s, size_t n) { return on_scalar(c, T_STR, (const char *)s, n); }

static int cb_map_key(void *c, const unsigned char *k, size_t n) {
  kparse *p = c;
  if (p->in_events) {
    if (p->depth == 3) p->elem_key = elem_key_of(k, n);
    else if (p->depth == 4 && p->in_args) p->args_key = args_key_of(k, n);
    return 1;
  }
  if (p->depth == 1) {
    free(p->top_key);
    p->top_key = sim_xmalloc(n + 1);
    memcpy(p->top_key, k, n);
    p->top_key[n] = 0;
    return 1;
  }
  return capture_ok(p, yajl_gen_string(p->cap, k, n));
}

static int open_container(kparse *p, int map) {
  if (p->in_events) {
    p->depth++;
    if (p->depth == 3) {
      if (!map) {
        ps_fail(p, "traceEvents[%" PRId64 "] is not an object", p->nelem);
        return 0;
      }
      elem_reset(p);
    } else if (p->depth == 4) {
      if (p->elem_key == E_ARGS) {
        if (!map) bad_field(p, "args", "an object");
        else p->in_args = 1;
        p->e.have |= 1u << E_ARGS;
      } else if (p->elem_key >= 0) {
        bad_field(p, p->elem_key == E_TS ? "ts" : p->elem_key == E_DUR ? "dur" : "a known field", "a scalar");
      }
    }
    return 1;
  }
  if (p->depth == 0) {
    if (!map) {
      ps_fail(p, "the file is a JSON array, not an object with traceEvents (not a PyTorch profiler trace)");
      return 0;
    }
    p->depth = 1;
    return 1;
  }
  if (p->depth == 1 && p->top_key && !strcmp(p->top_key, "traceEvents")) {
    if (map) {
      ps_fail(p, "traceEvents is an object, not an array");
      return 0;
    }
    p->in_events = 1;
    p->seen_events = 1;
    p->depth = 2;
    return 1;
  }
  if (p->depth == 1) {
    yajl_gen_clear(p->cap);
    yajl_gen_reset(p->cap, NULL);
    p->capturing = 1;
  }
  p->depth++;
  return capture_ok(p, map ? yajl_gen_map_open(p->cap) : yajl_gen_array_open(p->cap));
}

static int close_container(kparse *p, int map) {
  if (p->in_events) {
    if (p->depth == 2) { /* the end of traceEvents */
      p->in_events = 0;
      p->depth = 1;
      return 1;
    }
    if (p->depth == 3) {
      p->depth = 2;
      if (p->ghost) {
        p->ghost = 0;
        return 1;
      }
      int rc = kineto_element_done(p);
      p->nelem++;
      return rc;
    }
    if (p->depth == 4 && p->in_args) p->in_args = 0;
    p->depth--;
    return 1;
  }
  if (p->depth == 1) { /* the end of the document's object */
    p->depth = 0;
    return 1;
  }
  if (!capture_ok(p, map ? yajl_gen_map_close(p->cap) : yajl_gen_array_close(p->cap))) return 0;
  if (--p->depth == 1) capture_done(p);
  return 1;
}

static int cb_start_map(void *c) { return open_container(c, 1); }
static int cb_end_map(void *c) { return close_container(c, 1); }
static int cb_start_array(void *c) { return open_container(c, 0); }
static int cb_end_array(void *c) { return close_container(c, 0); }

const yajl_callbacks kineto_cbs = {cb_null,      cb_bool,    NULL,           NULL,        cb_number, cb_string,
                                   cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array};

/* import_kineto.c: PyTorch profiler (Kineto) Chrome traces: memory events, kernels, copies, runtime calls, steps. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "sim/allocator.h"
#include "sim/hashmap.h"
#include "categorize.h"
#include "engine/extsort.h"
#include "importer.h"
#include "io/jsonscan.h"
#include "io/jsonw.h"

/*
 * How a trace is read (docs/formats.md, "PyTorch profiler (Kineto) traces"):
 *
 *   parse    The file is streamed, never held whole nor made into a tree. yajl's event parser
 *            reads what lies outside traceEvents; the elements of traceEvents go through a
 *            strict scanner in front of yajl (jsonscan.h), which calls the same callbacks and
 *            hands yajl whatever it does not take. A reading thread feeds a parser thread,
 *            which packs each element into batches that this thread handles in file order.
 *   records  Each element becomes a fixed-size record. Kineto does not write events in time
 *            order (each thread's operators, then its memory events, then each GPU activity
 *            next to its runtime call), and memplay stores them in host issue order, so they
 *            are reordered in bounded memory by external sorts (extsort.h):
 *              1. runtime calls and device activities meet by correlation id -- most in a small
 *                 window while reading, the rest in a sort -- and each activity takes its
 *                 launch's host time (ts) and duration (api_dur);
 *              2. everything by host time: operators (the call stacks of the events inside
 *                 them, and the step and phase markers), memory events, joined activities.
 *   walks    Sort 2 is read three times: for the memory allocated before the window (the
 *            baseline that makes replayed totals absolute), for the categories (categorize.h:
 *            the rules need to know when each allocation is freed), and to write the events,
 *            each allocation with its category.
 */

/* Memory for reordering, whatever the size of the file: half for the join's sort (then for the
 * categories' decisions), three eighths for the events' sort, an eighth for memory events'. */
#define KINETO_SORT_MEMORY (64u << 20)
#define KINETO_MAX_CAPTURE (8u << 20) /* top-level metadata kept as JSON text */
#define KINETO_MAX_DROPPED_KINDS 24

/* ---- the records the sorts carry ---------------------------------------------------------- */

enum { R_RUNTIME = 1, R_ACTIVITY, R_OP, R_MEMORY, R_OOM, R_EVENT };
/* Device activity kinds (krec.sub for R_ACTIVITY). */
enum { ACT_KERNEL = 1, ACT_MEMCPY, ACT_MEMSET, ACT_SYNC, ACT_EVENT };
/* Runtime call kinds (krec.sub for R_RUNTIME). */
enum { RT_OTHER = 0, RT_SYNC_DEVICE, RT_SYNC_STREAM, RT_SYNC_EVENT, RT_QUERY };
/* Operator classes (krec.sub for R_OP, a bit set). */
enum { OP_STEP = 1, OP_OPTIMIZER = 2, OP_ZERO_GRAD = 4, OP_BACKWARD = 8, OP_PYTHON = 16 };
/* Runtime call flags (krec.flags for R_RUNTIME). */
enum { RTF_ASYNC = 1 };

#define NO_THREAD INT64_MIN

/* One record: 96 bytes whatever its type, fields shared where types never need both. */
typedef struct krec {
  int64_t ts, dur;  /* ns, as written (relative to baseTimeNanoseconds when the file has it) */
  int64_t idx;      /* position in traceEvents (R_EVENT: its launch's) */
  int64_t tid;      /* host thread, NO_THREAD when none */
  union {
    int64_t corr;   /* R_RUNTIME, R_ACTIVITY: correlation id, -1 none */
    int64_t dev_ts; /* R_EVENT: start on the device, -1 unknown */
    int64_t addr;   /* R_MEMORY */
    int64_t file;   /* R_OP: python_function file (string id) */
  };
  union {
    int64_t total_alloc; /* R_MEMORY, R_OOM: -1 unknown */
    int64_t api_dur;     /* R_EVENT */
  };
  union {
    int64_t total_res; /* R_MEMORY, R_OOM */
    int64_t stream;    /* R_ACTIVITY, R_EVENT */
  };
  int64_t bytes;    /* R_MEMORY: signed Bytes; R_ACTIVITY, R_EVENT: bytes; R_OP step: the step number */
  int64_t name;     /* string id */
  int32_t device, line;
  int64_t ord;      /* R_EVENT: the activity's own position in traceEvents (its launch's come in file order) */
  uint8_t type, sub;
  uint8_t kind; /* R_EVENT: sim_event_kind; R_ACTIVITY sync: which; R_OP: categorize_frame_flags of the frame */
  uint8_t mem, dir, flags, devtype, rtflags;
} krec;

/* Sort 1: by correlation id, a launch before its activities. */
static int cmp_corr(const void *a, const void *b) {
  const krec *x = a, *y = b;
  if (x->corr != y->corr) return x->corr < y->corr ? -1 : 1;
  int sx = x->type != R_RUNTIME, sy = y->type != R_RUNTIME;
  if (sx != sy) return sx - sy;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sort 2: by host time; at the same time operators first, outer (longer) ones before inner,
 * then everything else in file order (an activity at its launch's place, by rank). */
static int cmp_time(const void *a, const void *b) {
  const krec *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  int ox = x->type != R_OP, oy = y->type != R_OP;
  if (ox != oy) return ox - oy;
  if (!ox && x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
  if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
  return (x->ord > y->ord) - (x->ord < y->ord);
}

/* ---- the element being parsed ------------------------------------------------------------- */

enum {
  CAT_NONE = 0,
  CAT_CPU_OP,
  CAT_USER_ANNOTATION,
  CAT_PYTHON_FUNCTION,
  CAT_INSTANT,
  CAT_KERNEL,
  CAT_MEMCPY,
  CAT_MEMSET,
  CAT_CUDA_SYNC,
  CAT_CUDA_EVENT,
  CAT_RUNTIME,
  CAT_DRIVER,
  CAT_FLOW,
  CAT_OTHER,
};

/* Element keys and args keys (bit positions in kelem.have). */
enum { E_PH, E_CAT, E_NAME, E_PID, E_TID, E_TS, E_DUR, E_ARGS };
enum {
  A_ADDR,
  A_BYTES_SIGNED, /* "Bytes" of a memory event */
  A_TOTAL_ALLOC,
  A_TOTAL_RES,
  A_DEVTYPE,
  A_DEVID,
  A_DEVICE,
  A_STREAM,
  A_CORR,
  A_NBYTES, /* "bytes" of a copy or memset */
  A_SYNC_KIND,
  A__COUNT
};

typedef struct kelem {
  char ph;
  int cat;
  uint32_t have;     /* E_* bits */
  uint32_t args;     /* A_* bits */
  int64_t ts, dur, tid;
  int64_t a[A__COUNT];
  char sync_kind[24];
} kelem;

/* A parsed element as the handler sees it (from the parser's state, or from a batch). */
typedef struct kview {
  const kelem *e;
  const char *name, *cat, *bad; /* NUL-terminated; cat: the category's text when memplay does not know it;
                                   bad: the first field of a wrong type, or "" */
  size_t name_len, cat_len;
  int64_t nelem; /* its position in traceEvents */
} kview;

typedef struct top_value {
  char *key;
  char *json;
} top_value;

typedef struct dropped_kind {
  char name[48];
  int64_t n;
  int unknown;
} dropped_kind;

typedef struct joiner joiner;

/*
 * The import's state. The parser thread owns the part from h to nelem (and perr, pmsg); the
 * handler (this thread) owns the rest; they meet only through the batches (kpipe).
 */
typedef struct kparse {
  import_ctx *ic;
  extsort *by_corr, *by_time, *by_time_mem; /* sort 2 keeps memory events apart (see merged_next) */
  joiner *join;
  /* the parser's: where it is */
  yajl_handle h;
  int depth;          /* open containers */
  int in_events;      /* inside traceEvents (the array is at depth 2) */
  int seen_events;    /* a traceEvents array was found */
  int elem_key;       /* current key in the element (E_*), -1 other */
  int args_key;       /* current key in args (A_*), -1 other */
  int ghost;          /* the next element is the reader's stand-in for ones the scanner read */
  int in_args;        /* the args object is open (depth 4) */
  /* top-level values other than traceEvents, captured as JSON */
  char *top_key;
  yajl_gen cap;
  int capturing;
  size_t captured;
  top_value *tops;
  size_t ntops, tops_cap;
  int64_t top_dropped;
  /* the element */
  kelem e;
  char bad[200]; /* the first field with a wrong type */
  char *name;
  size_t name_len, name_cap;
  char *cat_text; /* for unknown categories */
  size_t cat_len, cat_cap;
  int64_t nelem;
  char err[768];    /* the handler's failure (and everything after the parse) */
  int failed;
  char perr[768];   /* a failure of the parser's callbacks */
  int pfailed;
  char pmsg[IMPORT_ERRLEN]; /* the reader's message when the parse failed */
  struct kpipe *pipe;        /* elements go to the handler through it (NULL: handled at once) */
  /* the handler's: what was seen */
  int64_t n_ops, n_memory, n_runtime, n_activity, n_flow, n_meta, n_oom;
  dropped_kind dropped[KINETO_MAX_DROPPED_KINDS];
  size_t ndropped;
  int64_t dropped_other;
  uint64_t devices_used; /* bit per device index < 64 (the trace row's device; events keep any index) */
  int64_t non_cuda_memory;
  /* op name texts by string id, for interning call stacks */
  sim_map texts; /* string id -> offset + 1 in arena */
  sim_map frame_flags; /* name id << 32 ^ file id -> categorize_frame_flags */
  sim_map name_class;  /* name id | kind << 56 -> what the name says + 1 (kind 1: an operator's class, 2: a
                          runtime call's kind and flags, 3: a copy's direction and memory) */
  char *arena;
  size_t alen, acap;
} kparse;

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
    if (*end || errno || !(d > -9.2e15 && d < 9.2e15)) return -1;
    double ns = d * 1000.0;
    *out = (int64_t)(ns < 0 ? ns - 0.5 : ns + 0.5);
    return 0;
  }
  while (fd < 3) frac *= 10, fd++;
  if (whole > (uint64_t)INT64_MAX / 1000 - 1) return -1;
  int64_t v = (int64_t)(whole * 1000 + frac + (uint64_t)round_up);
  *out = neg ? -v : v;
  return 0;
}

static int starts_with(const char *s, size_t n, const char *p) {
  size_t k = strlen(p);
  return n >= k && !memcmp(s, p, k);
}

static int contains(const char *s, size_t n, const char *p) { return memmem(s, n, p, strlen(p)) != NULL; }

/* ---- errors and positions ------------------------------------------------------------------- */

static void kp_fail(kparse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kp_fail(kparse *p, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err, sizeof p->err, fmt, ap);
  va_end(ap);
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

static const char *const args_names[A__COUNT] = {
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

static int element_done(kparse *p);

/* JSON value types as the callbacks see them. */
enum { T_NULL, T_BOOL, T_NUM, T_STR };

/* A scalar inside an element, args object or args array. */
static int elem_scalar(kparse *p, int type, const char *s, size_t n) {
  kelem *e = &p->e;
  if (p->depth == 3) {
    int k = p->elem_key;
    if (k < 0) return 1;
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
    return 1;
  }
  if (p->depth == 4 && p->in_args) {
    int k = p->args_key;
    if (k < 0) return 1;
    if (k == A_SYNC_KIND) {
      if (type == T_STR) {
        size_t m = n < sizeof e->sync_kind - 1 ? n : sizeof e->sync_kind - 1;
        memcpy(e->sync_kind, s, m);
        e->sync_kind[m] = 0;
        e->args |= 1u << k;
      }
      return 1;
    }
    if (type == T_NULL) return 1;
    if (type != T_NUM || parse_int(s, n, &e->a[k])) {
      bad_field(p, args_names[k], "an integer");
      return 1;
    }
    e->args |= 1u << k;
    return 1;
  }
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
      int rc = element_done(p);
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

static const yajl_callbacks kineto_cbs = {cb_null,      cb_bool,    NULL,           NULL,        cb_number, cb_string,
                                          cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array};

/* ---- elements into records ------------------------------------------------------------------ */

static int64_t intern(kparse *p, const char *s, size_t n, int keep_text) {
  int64_t id = store_intern_string(p->ic->s, s, n);
  if (id < 0) {
    kp_fail(p, "%s", store_error(p->ic->s));
    return -1;
  }
  if (keep_text) {
    int existed;
    uint64_t *slot = sim_map_put(&p->texts, (uint64_t)id, &existed);
    if (!existed) {
      sim_grow((void **)&p->arena, &p->acap, p->alen + n + 1, 1);
      memcpy(p->arena + p->alen, s, n);
      p->arena[p->alen + n] = 0;
      *slot = p->alen + 1;
      p->alen += n + 1;
    }
  }
  return id;
}

static const char *text_of(const kparse *p, int64_t id) {
  uint64_t *v = id > 0 ? sim_map_get(&p->texts, (uint64_t)id) : NULL;
  return v ? p->arena + *v - 1 : "";
}

static void drop(kparse *p, const char *what, size_t n, int unknown) {
  for (size_t i = 0; i < p->ndropped; i++)
    if (strlen(p->dropped[i].name) == n && !memcmp(p->dropped[i].name, what, n)) {
      p->dropped[i].n++;
      return;
    }
  if (p->ndropped < KINETO_MAX_DROPPED_KINDS && n < sizeof p->dropped[0].name) {
    dropped_kind *d = &p->dropped[p->ndropped++];
    memcpy(d->name, what, n);
    d->name[n] = 0;
    d->n = 1;
    d->unknown = unknown;
    return;
  }
  p->dropped_other++;
}

static int need(kparse *p, const kview *v, int bit, const char *field) {
  if (v->e->have & (1u << bit)) return 1;
  kp_fail(p, "traceEvents[%" PRId64 "] (%.*s): missing field '%s'", v->nelem, (int)(v->name_len > 60 ? 60 : v->name_len),
          v->name, field);
  return 0;
}

static int need_arg(kparse *p, const kview *v, int bit) {
  if (v->e->args & (1u << bit)) return 1;
  kp_fail(p, "traceEvents[%" PRId64 "] (%.*s): missing args field '%s'", v->nelem,
          (int)(v->name_len > 60 ? 60 : v->name_len), v->name, args_names[bit]);
  return 0;
}

static void note_device(kparse *p, int64_t d) {
  if (d >= 0 && d < 64) p->devices_used |= UINT64_C(1) << d;
}

static int add_time(kparse *p, const krec *r) {
  extsort *x = r->type == R_MEMORY || r->type == R_OOM ? p->by_time_mem : p->by_time;
  if (extsort_add(x, r)) {
    kp_fail(p, "%s", extsort_error(x));
    return 0;
  }
  return 1;
}

/*
 * Sort 2 is two sorts in the same order: memory events, and everything else. The pass that
 * finds the baseline reads only the first; the others read both, merged here.
 */
typedef struct merged {
  const krec *a, *b; /* the next record of each, NULL at its end */
} merged;

static int merged_start(kparse *p, merged *m) {
  const void *va = NULL, *vb = NULL;
  int ga, gb;
  if (extsort_rewind(p->by_time) || extsort_rewind(p->by_time_mem) || (ga = extsort_next(p->by_time, &va)) < 0 ||
      (gb = extsort_next(p->by_time_mem, &vb)) < 0) {
    kp_fail(p, "%s", *extsort_error(p->by_time) ? extsort_error(p->by_time) : extsort_error(p->by_time_mem));
    return -1;
  }
  m->a = ga ? va : NULL;
  m->b = gb ? vb : NULL;
  return 0;
}

/* The next record in time order: 1, 0 at the end, -1. (*r stays valid until the next call.) */
static int merged_next(kparse *p, merged *m, const krec **r, krec *hold) {
  if (!m->a && !m->b) return 0;
  int from_a = m->a && (!m->b || cmp_time(m->a, m->b) <= 0);
  extsort *x = from_a ? p->by_time : p->by_time_mem;
  *hold = from_a ? *m->a : *m->b; /* the sort reuses its buffer on the next call */
  *r = hold;
  const void *v = NULL;
  int got = extsort_next(x, &v);
  if (got < 0) {
    kp_fail(p, "%s", extsort_error(x));
    return -1;
  }
  if (from_a) m->a = got ? v : NULL;
  else m->b = got ? v : NULL;
  return 1;
}

static int add_corr(kparse *p, const krec *r) {
  if (extsort_add(p->by_corr, r)) {
    kp_fail(p, "%s", extsort_error(p->by_corr));
    return 0;
  }
  return 1;
}

/* Splits a python_function name "path/file.py(123): func" into its parts. */
static void split_python(const char *s, size_t n, size_t *file_len, int32_t *line, const char **func, size_t *func_len) {
  const char *colon = memmem(s, n, "): ", 3);
  *file_len = 0;
  *line = 0;
  *func = s;
  *func_len = n;
  if (!colon) return;
  const char *open = colon;
  while (open > s && open[-1] >= '0' && open[-1] <= '9') open--;
  if (open == colon || open == s || open[-1] != '(') return;
  *line = (int32_t)strtol(open, NULL, 10);
  *file_len = (size_t)(open - 1 - s);
  *func = colon + 3;
  *func_len = n - (size_t)(colon + 3 - s);
}

static int op_record(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need(p, v, E_DUR, "dur")) return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = R_OP;
  r.ts = e->ts;
  r.dur = e->dur < 0 ? 0 : e->dur;
  r.tid = (e->have & (1u << E_TID)) ? e->tid : 0;
  r.idx = v->nelem;
  const char *nm = v->name;
  size_t nl = v->name_len;
  if (e->cat == CAT_PYTHON_FUNCTION) {
    size_t fl, funcl;
    const char *func;
    split_python(nm, nl, &fl, &r.line, &func, &funcl);
    r.sub |= OP_PYTHON;
    if (fl && (r.file = intern(p, nm, fl, 1)) < 0) return 0;
    nm = func;
    nl = funcl;
  }
  if ((r.name = intern(p, nm, nl, 1)) < 0) return 0;
  if (!(r.sub & OP_PYTHON)) { /* what the name says, once per distinct name */
    int known;
    uint64_t *c = sim_map_put(&p->name_class, (uint64_t)r.name | UINT64_C(1) << 56, &known);
    if (!known) {
      unsigned cls = 0;
      if (starts_with(nm, nl, "ProfilerStep#")) cls = OP_STEP;
      else if (starts_with(nm, nl, "Optimizer.step")) cls = OP_OPTIMIZER;
      else if (starts_with(nm, nl, "Optimizer.zero_grad")) cls = OP_ZERO_GRAD;
      else if (starts_with(nm, nl, "autograd::engine::evaluate_function") || contains(nm, nl, "Backward") ||
               contains(nm, nl, "AccumulateGrad"))
        cls = OP_BACKWARD;
      *c = cls + 1;
    }
    r.sub |= (uint8_t)(*c - 1);
    if (r.sub & OP_STEP) r.bytes = strtoll(nm + 13, NULL, 10);
  }
  /* what the frame says to the category rules, once per distinct frame */
  uint64_t fkey = (uint64_t)r.name << 32 ^ (uint64_t)r.file;
  int known;
  uint64_t *fl = sim_map_put(&p->frame_flags, fkey, &known);
  if (!known) *fl = categorize_frame_flags(text_of(p, r.name), text_of(p, r.file));
  r.kind = (uint8_t)*fl;
  p->n_ops++;
  return add_time(p, &r);
}

static int memory_record(kparse *p, const kview *v, int oom) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need_arg(p, v, A_BYTES_SIGNED) || (!oom && !need_arg(p, v, A_ADDR)) ||
      !need_arg(p, v, A_DEVTYPE))
    return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = oom ? R_OOM : R_MEMORY;
  r.ts = e->ts;
  r.tid = (e->have & (1u << E_TID)) ? e->tid : 0;
  r.idx = v->nelem;
  r.addr = (e->args & (1u << A_ADDR)) ? e->a[A_ADDR] : 0;
  r.bytes = e->a[A_BYTES_SIGNED];
  r.total_alloc = (e->args & (1u << A_TOTAL_ALLOC)) ? e->a[A_TOTAL_ALLOC] : -1;
  r.total_res = (e->args & (1u << A_TOTAL_RES)) ? e->a[A_TOTAL_RES] : -1;
  int64_t dt = e->a[A_DEVTYPE], did = (e->args & (1u << A_DEVID)) ? e->a[A_DEVID] : 0;
  if (dt < 0 || dt > 255) {
    kp_fail(p, "traceEvents[%" PRId64 "] (%s): 'Device Type' %" PRId64 " is not a device type", v->nelem, v->name, dt);
    return 0;
  }
  r.devtype = (uint8_t)dt;
  if (dt == 0) {
    r.device = -1;
  } else {
    if (did < 0 || did > 32767) {
      kp_fail(p, "traceEvents[%" PRId64 "] (%s): 'Device Id' %" PRId64 " is not a device index", v->nelem, v->name, did);
      return 0;
    }
    r.device = (int32_t)did;
    note_device(p, did);
    if (dt != 1) p->non_cuda_memory++;
  }
  if (!oom && r.bytes == 0) {
    drop(p, "[memory] of 0 bytes", 19, 0);
    return 1;
  }
  if (oom) p->n_oom++;
  else p->n_memory++;
  return add_time(p, &r);
}

/*
 * What a runtime (or driver) call is to memplay. Queries -- calls that read state and change
 * nothing on the device or in the allocator (cudaEventQuery, cudaStreamIsCapturing,
 * cudaGetDevice, cudaOccupancy..., cudaPeekAtLastError, the unnamed "INVALID") -- are counted,
 * by name, and not stored: in real traces they are most of the calls (PyTorch's caching
 * allocator polls its events with cudaEventQuery), and their time is already in the gaps
 * between the launches around them.
 */
static int runtime_kind(const char *n, size_t len) {
  if (contains(n, len, "DeviceSynchronize") || contains(n, len, "CtxSynchronize")) return RT_SYNC_DEVICE;
  if (contains(n, len, "StreamSynchronize")) return RT_SYNC_STREAM;
  if (contains(n, len, "EventSynchronize")) return RT_SYNC_EVENT;
  if (contains(n, len, "Get") || contains(n, len, "Query") || contains(n, len, "Peek") ||
      contains(n, len, "IsCapturing") || contains(n, len, "Occupancy") || (len == 7 && !memcmp(n, "INVALID", 7)))
    return RT_QUERY;
  return RT_OTHER;
}

/* "Memcpy HtoD (Pinned -> Device)": the direction and the host memory kind from the name. */
static void copy_kind(const char *n, size_t len, uint8_t *dir, uint8_t *mem) {
  *dir = SIM_COPY_NONE;
  *mem = SIM_MEM_UNKNOWN;
  if (contains(n, len, "HtoD")) *dir = SIM_COPY_H2D;
  else if (contains(n, len, "DtoH")) *dir = SIM_COPY_D2H;
  else if (contains(n, len, "DtoD")) *dir = SIM_COPY_D2D;
  else if (contains(n, len, "HtoH")) *dir = SIM_COPY_H2H;
  else if (contains(n, len, "PtoP") || contains(n, len, "Peer")) *dir = SIM_COPY_P2P;
  else if (contains(n, len, "AtoD") || contains(n, len, "AtoA") || contains(n, len, "DtoA")) *dir = SIM_COPY_D2D;
  else if (contains(n, len, "HtoA")) *dir = SIM_COPY_H2D;
  else if (contains(n, len, "AtoH")) *dir = SIM_COPY_D2H;
  if (contains(n, len, "Pinned")) *mem = SIM_MEM_PINNED;
  else if (contains(n, len, "Pageable")) *mem = SIM_MEM_PAGEABLE;
  else if (contains(n, len, "Managed")) *mem = SIM_MEM_MANAGED;
  else if (contains(n, len, "Device")) *mem = SIM_MEM_DEVICE;
}

/* ---- elements from the parser to the handler -------------------------------------------------- */

/*
 * With the scanner, parsing and handling run on two threads: a parser thread (reader, scanner,
 * yajl, the callbacks above) packs each element into a batch, and the importer's thread
 * unpacks and handles them (records, interning, the join window, the sorts) in file order.
 * An element's position in the file travels with it, for the handler's messages. When the
 * parser leaves the scanner's loop (at the end of traceEvents, or for something the scanner
 * does not take) it first waits until every element sent has been handled, then handles what
 * remains itself while the importer's thread waits for it: so there is always one handler,
 * and the order is the file's.
 */
#define KBATCH_BYTES (1u << 20)
#define KBATCHES 4

/* An element in a batch: this, then its name, category text and mistyped field, each ending in
 * a NUL, the whole padded to 8 bytes. */
typedef struct kitem {
  uint32_t size, name_len, cat_len, bad_len;
  int64_t nelem;
  uint64_t end_off, end_line; /* just past the element: byte offset and line */
  kelem e;
} kitem;

enum { BATCH_ITEMS, BATCH_DRAIN, BATCH_END };

typedef struct kbatch {
  char *data;
  size_t len, cap;
  int kind;
} kbatch;

typedef struct kpipe {
  kparse *p;
  pthread_t thread;
  int running;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  kbatch b[KBATCHES];
  size_t queue[KBATCHES], qhead, qlen; /* batches for the handler, in order */
  size_t free_list[KBATCHES], nfree;
  long cur;       /* the parser's batch, -1 none */
  size_t pending; /* offset of the element in cur whose position is not known yet, SIZE_MAX none */
  int stop;       /* the handler failed: the parser stops */
  int drained;    /* the handler handled everything sent before a drain */
  int direct;     /* the parser handles elements itself */
  int rc;         /* the parser's result */
} kpipe;

static int handle_element(kparse *p, const kview *v);

static int element_done(kparse *p) {
  kview v = {&p->e, p->name_len ? p->name : "", p->cat_len ? p->cat_text : "", p->bad, p->name_len, p->cat_len,
             p->nelem};
  kpipe *pp = p->pipe;
  if (!pp || pp->direct) return handle_element(p, &v);
  size_t need = (sizeof(kitem) + v.name_len + v.cat_len + strlen(v.bad) + 3 + 7) & ~(size_t)7;
  kbatch *b = pp->cur >= 0 ? &pp->b[pp->cur] : NULL;
  if (!b || b->len + need > b->cap) {
    pthread_mutex_lock(&pp->lock);
    if (b) { /* full: to the handler */
      b->kind = BATCH_ITEMS;
      pp->queue[(pp->qhead + pp->qlen++) % KBATCHES] = (size_t)pp->cur;
      pthread_cond_broadcast(&pp->cond);
    }
    while (!pp->nfree && !pp->stop) pthread_cond_wait(&pp->cond, &pp->lock);
    int stop = pp->stop;
    if (!stop) pp->cur = (long)pp->free_list[--pp->nfree];
    else pp->cur = -1;
    pthread_mutex_unlock(&pp->lock);
    if (stop) return 0;
    b = &pp->b[pp->cur];
    b->len = 0;
    if (need > b->cap) {
      b->cap = need;
      b->data = sim_xrealloc(b->data, need);
    }
  }
  kitem *it = (kitem *)(void *)(b->data + b->len);
  it->size = (uint32_t)need;
  it->name_len = (uint32_t)v.name_len;
  it->cat_len = (uint32_t)v.cat_len;
  it->bad_len = (uint32_t)strlen(v.bad);
  it->nelem = v.nelem;
  it->end_off = it->end_line = 0;
  it->e = p->e;
  char *t = (char *)(it + 1);
  memcpy(t, v.name, v.name_len + 1);
  memcpy(t + v.name_len + 1, v.cat, v.cat_len + 1);
  memcpy(t + v.name_len + v.cat_len + 2, v.bad, it->bad_len + 1);
  pp->pending = b->len;
  b->len += need;
  return 1;
}

/* The element just sent ended at this position. */
static void pipe_commit(kpipe *pp, uint64_t off, uint64_t line) {
  if (!pp || pp->pending == SIZE_MAX || pp->cur < 0) return;
  kitem *it = (kitem *)(void *)(pp->b[pp->cur].data + pp->pending);
  it->end_off = off;
  it->end_line = line;
  pp->pending = SIZE_MAX;
}

/* Hands the current batch over as the last (kind BATCH_DRAIN: and waits until it is handled,
 * to handle the rest itself). 0, or -1 when the handler stopped. */
static int pipe_finish(kpipe *pp, int kind) {
  pthread_mutex_lock(&pp->lock);
  while (pp->cur < 0 && !pp->nfree && !pp->stop) pthread_cond_wait(&pp->cond, &pp->lock);
  if (!pp->stop) {
    if (pp->cur < 0) {
      pp->cur = (long)pp->free_list[--pp->nfree];
      pp->b[pp->cur].len = 0;
    }
    pp->b[pp->cur].kind = kind;
    pp->queue[(pp->qhead + pp->qlen++) % KBATCHES] = (size_t)pp->cur;
    pp->cur = -1;
    pthread_cond_broadcast(&pp->cond);
  }
  while (kind == BATCH_DRAIN && !pp->drained && !pp->stop) pthread_cond_wait(&pp->cond, &pp->lock);
  int stop = pp->stop;
  if (kind == BATCH_DRAIN && !stop) pp->direct = 1;
  pthread_mutex_unlock(&pp->lock);
  return stop ? -1 : 0;
}

/* The handler's loop on the importer's thread: 0 when the parser ended or took over, -1 when an
 * element could not be handled (the message is in the import context). */
static int pipe_handle(kpipe *pp) {
  kparse *p = pp->p;
  import_ctx *ic = p->ic;
  for (;;) {
    pthread_mutex_lock(&pp->lock);
    while (!pp->qlen) pthread_cond_wait(&pp->cond, &pp->lock);
    size_t bi = pp->queue[pp->qhead];
    pp->qhead = (pp->qhead + 1) % KBATCHES;
    pp->qlen--;
    pthread_mutex_unlock(&pp->lock);
    kbatch *b = &pp->b[bi];
    int failed = 0;
    for (size_t off = 0; off < b->len && !failed;) {
      const kitem *it = (const kitem *)(const void *)(b->data + off);
      const char *t = (const char *)(it + 1);
      kview v = {&it->e, t, t + it->name_len + 1, t + it->name_len + it->cat_len + 2, it->name_len, it->cat_len,
                 it->nelem};
      if (!handle_element(p, &v)) {
        import_error(ic, "cannot import '%s': line %llu (byte %llu%s): %s", ic->path, (unsigned long long)it->end_line,
                     (unsigned long long)it->end_off, input_is_gzip(ic->in) ? " of the uncompressed JSON" : "", p->err);
        failed = 1;
      }
      off += it->size;
    }
    int kind = b->kind;
    pthread_mutex_lock(&pp->lock);
    pp->free_list[pp->nfree++] = bi;
    if (failed) pp->stop = 1;
    else if (kind == BATCH_DRAIN) pp->drained = 1;
    pthread_cond_broadcast(&pp->cond);
    pthread_mutex_unlock(&pp->lock);
    if (failed) return -1;
    if (kind != BATCH_ITEMS) return 0;
  }
}

/* ---- the join of launches and device activities -------------------------------------------- */

/*
 * A device activity belongs at the position of the runtime call that launched it (same
 * correlation id). Kineto writes each activity right before its call, so most pairs meet in a
 * small window of recent records while the file is read; whatever leaves the window unmatched
 * (a launch whose activity is elsewhere, an activity launched before the window opened, any
 * other layout) goes through sort 1 and meets there. Memory is the window plus sort 1's buffer.
 */

#define KINETO_JOIN_WINDOW 32

typedef struct jwin_entry {
  krec r;
  int64_t joined; /* runtime calls: activities already joined to it */
} jwin_entry;

struct joiner {
  kparse *p;
  /* the window: a ring of recent runtime calls and one of unmatched activities, with their
   * correlation ids apart (-2: a free slot) so that a look-up is one short scan */
  jwin_entry *rts, *acts;
  int64_t *rt_corr, *act_corr;
  size_t size, rt_next, act_next;
  /* sort 1's groups */
  krec *group;
  size_t ngroup, cap;
  krec rt;
  int have_rt;
  int64_t rt_joined;
  int64_t corr;
  int64_t merged, before_window, extra_runtime, kernels;
  sim_map queries; /* name id -> calls not stored (runtime_kind) */
};

static void joiner_init(joiner *j, kparse *p, size_t size) {
  memset(j, 0, sizeof *j);
  j->p = p;
  sim_map_init(&j->queries);
  j->size = size;
  if (!size) return;
  j->rts = sim_xcalloc(size, sizeof *j->rts);
  j->acts = sim_xcalloc(size, sizeof *j->acts);
  j->rt_corr = sim_xmalloc(size * sizeof *j->rt_corr);
  j->act_corr = sim_xmalloc(size * sizeof *j->act_corr);
  for (size_t i = 0; i < size; i++) j->rt_corr[i] = j->act_corr[i] = -2;
}

static void joiner_release(joiner *j) {
  free(j->rts);
  free(j->acts);
  free(j->rt_corr);
  free(j->act_corr);
  free(j->group);
  sim_map_release(&j->queries);
  memset(j, 0, sizeof *j);
}

/* A runtime call that is an event of its own (no device activity, or one memplay does not keep). */
static int emit_runtime(joiner *j, const krec *rt) {
  if (rt->sub == RT_QUERY) {
    ++*sim_map_put(&j->queries, (uint64_t)rt->name, NULL);
    return 1;
  }
  krec r = *rt;
  r.type = R_EVENT;
  r.dev_ts = -1;
  r.api_dur = -1;
  r.device = -1;
  r.stream = 0;
  r.ord = 0;
  switch (rt->sub) {
  case RT_SYNC_DEVICE:
  case RT_SYNC_STREAM: /* Kineto does not record which stream: a wait for the whole device */
    r.kind = SIM_EV_SYNC;
    r.stream = -1;
    break;
  case RT_SYNC_EVENT:
    r.kind = SIM_EV_SYNC;
    r.stream = -1;
    r.flags = SIM_EVF_SYNC_EVENT;
    break;
  default:
    r.kind = SIM_EV_API;
    break;
  }
  return add_time(j->p, &r);
}

/* The event for activity act launched by rt: at the launch's place, with its host time (every
 * activity of one launch, such as the kernels of a CUDA graph, carries the same ts and
 * api_dur). Returns 1 when it made one, 0 when the activity adds nothing to the call, -1. */
static int emit_joined(joiner *j, const krec *rt, const krec *act) {
  krec r = *act;
  r.type = R_EVENT;
  r.dev_ts = act->ts;
  r.ts = rt->ts;
  r.idx = rt->idx;
  r.tid = rt->tid;
  r.api_dur = rt->dur;
  r.ord = act->idx;
  r.flags = 0;
  switch (act->sub) {
  case ACT_KERNEL:
    r.kind = SIM_EV_KERNEL;
    j->kernels++;
    break;
  case ACT_MEMCPY:
  case ACT_MEMSET:
    r.kind = act->sub == ACT_MEMCPY ? SIM_EV_MEMCPY : SIM_EV_MEMSET;
    if (rt->rtflags & RTF_ASYNC) r.flags |= SIM_EVF_ASYNC;
    break;
  case ACT_SYNC:
    if (act->kind == 3) return 0; /* cudaStreamWaitEvent: a dependency between streams, not a host wait */
    r.name = rt->name;
    r.flags = act->kind == 2 ? SIM_EVF_SYNC_EVENT : 0;
    if (act->kind == 1 || r.stream < 0 || r.stream == UINT32_MAX) r.stream = -1;
    r.kind = SIM_EV_SYNC;
    break;
  default:
    return 0; /* a cudaEvent record: the call stays an event of its own */
  }
  return add_time(j->p, &r) ? 1 : -1;
}

/* An activity whose launch is not in the file: at its device start. */
static int emit_unlaunched(joiner *j, const krec *act) {
  krec r = *act;
  r.type = R_EVENT;
  r.dev_ts = act->ts;
  r.api_dur = -1;
  r.tid = NO_THREAD;
  r.ord = 0;
  switch (act->sub) {
  case ACT_KERNEL: r.kind = SIM_EV_KERNEL, j->kernels++; break;
  case ACT_MEMCPY: r.kind = SIM_EV_MEMCPY; break;
  case ACT_MEMSET: r.kind = SIM_EV_MEMSET; break;
  default: return 1; /* a sync or event record without its call says nothing of its own */
  }
  j->before_window++;
  return add_time(j->p, &r);
}

/* A runtime call leaves the window: sort 1 takes it with the count it already joined, so that
 * activities still to come meet it there (one that joined some is represented by them). */
static int window_evict_rt(joiner *j, size_t k) {
  if (j->rt_corr[k] == -2) return 1;
  j->rt_corr[k] = -2;
  krec r = j->rts[k].r;
  r.bytes = j->rts[k].joined;
  return add_corr(j->p, &r);
}

static int window_evict_act(joiner *j, size_t k) {
  if (j->act_corr[k] == -2) return 1;
  j->act_corr[k] = -2;
  return add_corr(j->p, &j->acts[k].r);
}

static int window_runtime(joiner *j, const krec *rt) {
  if (rt->corr < 0) return emit_runtime(j, rt);
  if (!j->size) {
    krec r = *rt;
    r.bytes = 0;
    return add_corr(j->p, &r);
  }
  /* its activities, already read, in the order they came */
  int64_t joined = 0;
  for (size_t n = 0; n < j->size; n++) {
    size_t k = (j->act_next + n) % j->size;
    if (j->act_corr[k] != rt->corr) continue;
    int rc = emit_joined(j, rt, &j->acts[k].r);
    if (rc < 0) return 0;
    joined += rc;
    j->act_corr[k] = -2;
  }
  if (joined) j->merged++;
  size_t k = j->rt_next;
  if (!window_evict_rt(j, k)) return 0;
  j->rts[k].r = *rt;
  j->rts[k].joined = joined;
  j->rt_corr[k] = rt->corr;
  j->rt_next = (k + 1) % j->size;
  return 1;
}

static int window_activity(joiner *j, const krec *act) {
  if (act->corr < 0) return emit_unlaunched(j, act);
  if (!j->size) return add_corr(j->p, act);
  for (size_t k = 0; k < j->size; k++) {
    if (j->rt_corr[k] != act->corr) continue;
    jwin_entry *e = &j->rts[k];
    int rc = emit_joined(j, &e->r, act);
    if (rc < 0) return 0;
    if (rc && !e->joined) j->merged++;
    e->joined += rc;
    return 1;
  }
  size_t k = j->act_next;
  if (!window_evict_act(j, k)) return 0;
  j->acts[k].r = *act;
  j->act_corr[k] = act->corr;
  j->act_next = (k + 1) % j->size;
  return 1;
}

/* Sort 1's group for one correlation id: its runtime call (if any) and activities. */
static int flush_group(joiner *j) {
  if (!j->have_rt) {
    for (size_t i = 0; i < j->ngroup; i++)
      if (!emit_unlaunched(j, &j->group[i])) return 0;
  } else {
    int64_t joined = j->rt_joined, before = joined;
    for (size_t i = 0; i < j->ngroup; i++) {
      int rc = emit_joined(j, &j->rt, &j->group[i]);
      if (rc < 0) return 0;
      joined += rc;
    }
    if (joined && !before) j->merged++;
    if (!joined && !emit_runtime(j, &j->rt)) return 0;
  }
  j->ngroup = 0;
  j->have_rt = 0;
  return 1;
}

static int join_by_correlation(kparse *p, joiner *j) {
  /* empty the window into sort 1 */
  for (size_t k = 0; k < j->size; k++)
    if (!window_evict_act(j, k) || !window_evict_rt(j, k)) return -1;
  if (extsort_finish(p->by_corr) || extsort_rewind(p->by_corr)) {
    kp_fail(p, "%s", extsort_error(p->by_corr));
    return -1;
  }
  const void *v;
  int got;
  j->corr = INT64_MIN;
  while ((got = extsort_next(p->by_corr, &v)) == 1) {
    const krec *r = v;
    if (r->corr != j->corr) {
      if ((j->have_rt || j->ngroup) && !flush_group(j)) return -1;
      j->corr = r->corr;
    }
    if (r->type == R_RUNTIME) {
      if (j->have_rt) { /* a second call with the same correlation id: an event of its own */
        j->extra_runtime++;
        if (!r->bytes && !emit_runtime(j, r)) return -1;
      } else {
        j->rt = *r;
        j->rt_joined = r->bytes;
        j->have_rt = 1;
      }
    } else {
      sim_grow((void **)&j->group, &j->cap, j->ngroup + 1, sizeof *j->group);
      j->group[j->ngroup++] = *r;
    }
  }
  if (got < 0) {
    kp_fail(p, "%s", extsort_error(p->by_corr));
    return -1;
  }
  if ((j->have_rt || j->ngroup) && !flush_group(j)) return -1;
  return 0;
}

/* ---- an element, handled ------------------------------------------------------------------------ */

static int runtime_record(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need(p, v, E_DUR, "dur")) return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = R_RUNTIME;
  r.ts = e->ts;
  r.dur = e->dur < 0 ? 0 : e->dur;
  r.tid = (e->have & (1u << E_TID)) ? e->tid : 0;
  r.idx = v->nelem;
  r.device = -1;
  r.corr = (e->args & (1u << A_CORR)) ? e->a[A_CORR] : -1;
  if (r.corr < -1) r.corr = -1;
  if ((r.name = intern(p, v->name, v->name_len, 1)) < 0) return 0;
  int known;
  uint64_t *c = sim_map_put(&p->name_class, (uint64_t)r.name | UINT64_C(2) << 56, &known);
  if (!known)
    *c = 1 + ((unsigned)runtime_kind(v->name, v->name_len) | (contains(v->name, v->name_len, "Async") ? RTF_ASYNC << 4 : 0));
  r.sub = (uint8_t)((*c - 1) & 15);
  r.rtflags = (uint8_t)((*c - 1) >> 4);
  if (r.sub == RT_QUERY) { /* no device activity to meet: counted at once */
    p->n_runtime++;
    return emit_runtime(p->join, &r);
  }
  p->n_runtime++;
  return window_runtime(p->join, &r);
}

static int activity_record(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need(p, v, E_DUR, "dur")) return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = R_ACTIVITY;
  r.ts = e->ts;
  r.dur = e->dur < 0 ? 0 : e->dur;
  r.idx = v->nelem;
  r.tid = NO_THREAD;
  r.stream = (e->args & (1u << A_STREAM)) ? e->a[A_STREAM] : 0;
  r.device = (e->args & (1u << A_DEVICE)) ? (int32_t)e->a[A_DEVICE] : 0;
  if (r.device < 0 || r.device > 32767) r.device = 0;
  if ((r.name = intern(p, v->name, v->name_len, 0)) < 0) return 0;
  uint8_t dir = SIM_COPY_NONE, mem = SIM_MEM_UNKNOWN;
  if (e->cat == CAT_MEMCPY || e->cat == CAT_MEMSET) { /* what the name says, once per distinct name */
    int known;
    uint64_t *c = sim_map_put(&p->name_class, (uint64_t)r.name | UINT64_C(3) << 56, &known);
    if (!known) {
      copy_kind(v->name, v->name_len, &dir, &mem);
      *c = 1 + (dir | (unsigned)mem << 4);
    }
    dir = (uint8_t)((*c - 1) & 15);
    mem = (uint8_t)((*c - 1) >> 4);
  }
  switch (e->cat) {
  case CAT_KERNEL: r.sub = ACT_KERNEL; break;
  case CAT_MEMCPY:
    r.sub = ACT_MEMCPY;
    r.dir = dir == SIM_COPY_NONE ? SIM_COPY_D2D : dir;
    r.mem = mem;
    r.bytes = (e->args & (1u << A_NBYTES)) ? e->a[A_NBYTES] : 0;
    break;
  case CAT_MEMSET:
    r.sub = ACT_MEMSET;
    r.mem = mem;
    r.bytes = (e->args & (1u << A_NBYTES)) ? e->a[A_NBYTES] : 0;
    break;
  case CAT_CUDA_SYNC:
    r.sub = ACT_SYNC;
    /* "Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event" */
    if (!strcmp(e->sync_kind, "Stream Wait Event")) r.kind = 3;
    else if (!strncmp(e->sync_kind, "Event", 5)) r.kind = 2;
    else if (!strncmp(e->sync_kind, "Context", 7)) r.kind = 1;
    else r.kind = 0;
    break;
  default: r.sub = ACT_EVENT; break;
  }
  note_device(p, r.device);
  p->n_activity++;
  r.corr = (e->args & (1u << A_CORR)) ? e->a[A_CORR] : -1;
  if (r.corr < -1) r.corr = -1;
  return window_activity(p->join, &r);
}

static int handle_element(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (v->bad[0]) {
    kp_fail(p, "traceEvents[%" PRId64 "]%s%.*s%s: %s", v->nelem, v->name_len ? " (" : "",
            (int)(v->name_len > 60 ? 60 : v->name_len), v->name, v->name_len ? ")" : "", v->bad);
    return 0;
  }
  switch (e->cat) {
  case CAT_CPU_OP:
  case CAT_USER_ANNOTATION:
  case CAT_PYTHON_FUNCTION:
    if (e->ph == 'X') return op_record(p, v);
    break;
  case CAT_INSTANT:
    if (v->name_len == 8 && !memcmp(v->name, "[memory]", 8)) return memory_record(p, v, 0);
    if (v->name_len == 13 && !memcmp(v->name, "[OutOfMemory]", 13)) return memory_record(p, v, 1);
    break;
  case CAT_KERNEL:
  case CAT_MEMCPY:
  case CAT_MEMSET:
  case CAT_CUDA_SYNC:
  case CAT_CUDA_EVENT:
    if (e->ph == 'X') return activity_record(p, v);
    break;
  case CAT_RUNTIME:
  case CAT_DRIVER:
    if (e->ph == 'X') return runtime_record(p, v);
    break;
  case CAT_FLOW:
    p->n_flow++;
    return 1;
  case CAT_NONE:
    if (e->ph == 'M') {
      p->n_meta++;
      return 1;
    }
    break;
  default:
    break;
  }
  /* Not something memplay models: counted by category (or phase, or name). Categories Kineto
   * writes that carry nothing for memplay are "ignored"; others are "unknown" (data loss). */
  static const char *const ignored[] = {"Trace", "gpu_user_annotation", "overhead", "cuda_profiler_range",
                                        "python_function", NULL};
  int known = 0;
  for (size_t k = 0; e->cat == CAT_OTHER && ignored[k]; k++)
    known |= v->cat_len == strlen(ignored[k]) && !memcmp(v->cat, ignored[k], v->cat_len);
  if (e->cat == CAT_OTHER) drop(p, v->cat, v->cat_len, !known);
  else if (e->cat == CAT_NONE) {
    char what[48];
    int n = snprintf(what, sizeof what, "ph %c without cat", e->ph ? e->ph : '?');
    drop(p, what, (size_t)n, 0);
  } else {
    static const char *const names[] = {"", "cpu_op", "user_annotation", "python_function", "cpu_instant_event",
                                        "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_event",
                                        "cuda_runtime", "cuda_driver", "flow", "other"};
    char what[48];
    int n = e->cat == CAT_INSTANT ? snprintf(what, sizeof what, "instant %.30s", v->name)
                                  : snprintf(what, sizeof what, "%s ph %c", names[e->cat], e->ph ? e->ph : '?');
    drop(p, what, (size_t)(n < (int)sizeof what ? n : (int)sizeof what - 1), 0);
  }
  return 1;
}

/* ---- memory that existed before the window ------------------------------------------------------ */

typedef struct pre_block {
  uint64_t addr;
  int64_t size;
} pre_block;

/*
 * Per device (and the host, device -1): the recorded "Total Allocated" after the first memory
 * event that carries it, minus the bytes the window had allocated by then, is what was
 * allocated before profiling began. Blocks freed in the window but never allocated in it are
 * part of that baseline with a known address and size; the rest becomes one block of its own.
 */
typedef struct devbase {
  int device;
  int have_total;
  int64_t running;        /* bytes allocated in the window so far */
  int64_t baseline;
  int64_t explicit_bytes; /* in pre-existing blocks found through their frees */
  sim_map live;           /* addr -> size of blocks live in the window */
  sim_map pre_addrs;      /* addr -> 1 for pre-existing blocks */
  pre_block *pre;
  size_t npre, cap;
  int64_t duplicate_allocs, repeated_frees;
} devbase;

typedef struct kbase {
  devbase *d;
  size_t n, cap;
  int64_t first_ts;
  int any;
} kbase;

static devbase *devbase_get(kbase *b, int device) {
  for (size_t i = 0; i < b->n; i++)
    if (b->d[i].device == device) return &b->d[i];
  sim_grow((void **)&b->d, &b->cap, b->n + 1, sizeof *b->d);
  devbase *d = &b->d[b->n++];
  memset(d, 0, sizeof *d);
  d->device = device;
  sim_map_init(&d->live);
  sim_map_init(&d->pre_addrs);
  return d;
}

static void kbase_release(kbase *b) {
  for (size_t i = 0; i < b->n; i++) {
    sim_map_release(&b->d[i].live);
    sim_map_release(&b->d[i].pre_addrs);
    free(b->d[i].pre);
  }
  free(b->d);
  memset(b, 0, sizeof *b);
}

static int cmp_devbase(const void *a, const void *b) {
  const devbase *x = a, *y = b;
  return (x->device > y->device) - (x->device < y->device);
}

static int find_baseline(kparse *p, kbase *b) {
  /* The first event of the trace: the first of either sort. */
  const void *v;
  int got;
  if (extsort_rewind(p->by_time) || (got = extsort_next(p->by_time, &v)) < 0) {
    kp_fail(p, "%s", extsort_error(p->by_time));
    return -1;
  }
  if (got) {
    b->any = 1;
    b->first_ts = ((const krec *)v)->ts;
  }
  if (extsort_rewind(p->by_time_mem)) {
    kp_fail(p, "%s", extsort_error(p->by_time_mem));
    return -1;
  }
  while ((got = extsort_next(p->by_time_mem, &v)) == 1) {
    const krec *r = v;
    if (!b->any || r->ts < b->first_ts) {
      b->any = 1;
      b->first_ts = r->ts;
    }
    if (r->type != R_MEMORY) continue;
    devbase *d = devbase_get(b, r->device);
    uint64_t addr = (uint64_t)r->addr;
    if (r->bytes > 0) {
      int existed;
      uint64_t *slot = sim_map_put(&d->live, addr, &existed);
      if (existed) d->duplicate_allocs++;
      *slot = (uint64_t)r->bytes;
    } else if (!sim_map_del(&d->live, addr, NULL)) {
      int existed;
      sim_map_put(&d->pre_addrs, addr, &existed);
      if (existed) {
        d->repeated_frees++;
      } else {
        sim_grow((void **)&d->pre, &d->cap, d->npre + 1, sizeof *d->pre);
        d->pre[d->npre++] = (pre_block){addr, -r->bytes};
        d->explicit_bytes += -r->bytes;
      }
    }
    d->running += r->bytes;
    if (!d->have_total && r->total_alloc >= 0) {
      d->have_total = 1;
      d->baseline = r->total_alloc - d->running;
    }
  }
  if (got < 0) {
    kp_fail(p, "%s", extsort_error(p->by_time_mem));
    return -1;
  }
  if (b->n > 1) qsort(b->d, b->n, sizeof *b->d, cmp_devbase);
  for (size_t i = 0; i < b->n; i++) sim_map_release(&b->d[i].live);
  return 0;
}

/* ---- the events, as the passes see them ------------------------------------------------------ */

/*
 * Sort 2 is walked twice more, making the same events each time: once feeding them to the
 * category rules (categorize.h), whose decisions go through a small sort of their own into
 * allocation order, and once writing them, each allocation with its decided category. So the
 * trace is written categorized, and the pass the import driver runs afterwards has nothing
 * left to decide (it counts). Call stacks are the operators open on the event's thread.
 */

typedef struct opframe {
  int64_t end, name, file;
  int32_t line;
  uint8_t cls;
  unsigned flags; /* categorize_frame_flags of this frame and the ones around it */
  uint64_t key;   /* identifies the chain of frames down to this one */
} opframe;

typedef struct tstack {
  int64_t tid;
  opframe *f;
  size_t n, cap;
  int64_t stack_id; /* the interned call stack of the open operators, when valid */
  int valid;
} tstack;

typedef struct kdecision {
  int64_t ordinal; /* the allocation's position among allocations */
  uint8_t cat, src;
} kdecision;

static int cmp_decision(const void *a, const void *b) {
  int64_t x = ((const kdecision *)a)->ordinal, y = ((const kdecision *)b)->ordinal;
  return (x > y) - (x < y);
}

typedef struct kwalk {
  kparse *p;
  int writing; /* 0: the pass that categorizes; 1: the pass that writes */
  int64_t base; /* baseTimeNanoseconds */
  tstack *threads;
  size_t nthreads, threads_cap;
  store_frame *frames;
  size_t frames_cap;
  int32_t step;
  int64_t step_end;
  int backward_marked;
  int64_t names[4]; /* backward, optimizer, zero_grad, forward */
  int64_t allocs;   /* allocations so far */
  categorizer *cat;
  extsort *decisions;
  store_writer *w;
  const kdecision *next; /* the next decision, in allocation order */
  int64_t n_steps, n_phases, totals, preexisting;
  int64_t by_method[SIM_CATSRC__COUNT], bytes_by_method[SIM_CATSRC__COUNT]; /* allocations written */
} kwalk;

static void kwalk_reset(kwalk *kw) {
  for (size_t i = 0; i < kw->nthreads; i++) kw->threads[i].n = 0, kw->threads[i].valid = 0;
  kw->step = -1;
  kw->step_end = 0;
  kw->backward_marked = 0;
  kw->allocs = 0;
}

static tstack *thread_of(kwalk *kw, int64_t tid) {
  for (size_t i = 0; i < kw->nthreads; i++)
    if (kw->threads[i].tid == tid) return &kw->threads[i];
  sim_grow((void **)&kw->threads, &kw->threads_cap, kw->nthreads + 1, sizeof *kw->threads);
  tstack *t = &kw->threads[kw->nthreads++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  return t;
}

/* The thread's operators open at ts (an operator's end is inclusive); NULL for no thread. */
static tstack *thread_at(kwalk *kw, int64_t tid, int64_t ts) {
  if (tid == NO_THREAD) return NULL;
  tstack *t = thread_of(kw, tid);
  while (t->n && t->f[t->n - 1].end < ts) {
    t->n--;
    t->valid = 0;
  }
  return t;
}

/* The interned call stack of the open operators, innermost first; 0 when none, -1 on error. */
static int64_t thread_stack_id(kwalk *kw, tstack *t) {
  if (!t || !t->n) return 0;
  if (t->valid) return t->stack_id;
  sim_grow((void **)&kw->frames, &kw->frames_cap, t->n, sizeof *kw->frames);
  for (size_t i = 0; i < t->n; i++) {
    const opframe *f = &t->f[t->n - 1 - i];
    kw->frames[i] = (store_frame){text_of(kw->p, f->name), text_of(kw->p, f->file), f->line};
  }
  int64_t id = store_intern_stack(kw->p->ic->s, kw->frames, t->n);
  if (id < 0) {
    kp_fail(kw->p, "%s", store_error(kw->p->ic->s));
    return -1;
  }
  t->valid = 1;
  t->stack_id = id;
  return id;
}

static int32_t step_at(kwalk *kw, int64_t ts) {
  if (kw->step >= 0 && ts > kw->step_end) kw->step = -1;
  return kw->step;
}

static int walk_decided(void *arg, int64_t ordinal, int category, int cat_source) {
  kwalk *kw = arg;
  kdecision d = {ordinal, (uint8_t)category, (uint8_t)cat_source};
  if (extsort_add(kw->decisions, &d)) {
    kp_fail(kw->p, "%s", extsort_error(kw->decisions));
    return -1;
  }
  return 0;
}

/* One event to the pass: the category rules, or the store. */
static int emit(kwalk *kw, sim_event *ev, tstack *t) {
  const opframe *top = t && t->n ? &t->f[t->n - 1] : NULL;
  int alloc = ev->kind == SIM_EV_ALLOC || ev->kind == SIM_EV_HOST_ALLOC;
  int64_t ordinal = alloc ? kw->allocs++ : -1;
  if (!kw->writing) {
    ev->stack = top ? (int64_t)(top->key >> 1) + 1 : 0;
    ev->seq = ordinal;
    return categorizer_event(kw->cat, ev, top ? top->flags : 0);
  }
  if ((ev->stack = thread_stack_id(kw, t)) < 0) return -1;
  if (alloc) {
    while (kw->next && kw->next->ordinal < ordinal) {
      const void *v;
      int got = extsort_next(kw->decisions, &v);
      if (got < 0) {
        kp_fail(kw->p, "%s", extsort_error(kw->decisions));
        return -1;
      }
      kw->next = got ? v : NULL;
    }
    if (kw->next && kw->next->ordinal == ordinal) {
      ev->category = kw->next->cat;
      ev->cat_source = kw->next->src;
    }
    kw->by_method[ev->cat_source]++;
    kw->bytes_by_method[ev->cat_source] += (int64_t)ev->size;
  }
  if (store_writer_event(kw->w, ev)) {
    kp_fail(kw->p, "%s", store_error(kw->p->ic->s));
    return -1;
  }
  return 0;
}

static int marker(kwalk *kw, int64_t ts, int64_t dur, int64_t name, unsigned flags, int32_t step) {
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = SIM_EV_MARKER;
  ev.ts = kw->base + ts;
  ev.dur = dur;
  ev.name = name;
  ev.flags = (uint8_t)flags;
  ev.step = step;
  ev.device = -1;
  if (kw->writing) *(flags & SIM_EVF_STEP_BEGIN ? &kw->n_steps : &kw->n_phases) += 1;
  return emit(kw, &ev, NULL);
}

static int walk_op(kwalk *kw, const krec *r) {
  if (r->sub & OP_STEP) {
    kw->step = (int32_t)(r->bytes < 0 || r->bytes > INT32_MAX ? 0 : r->bytes);
    kw->step_end = r->ts + r->dur;
    kw->backward_marked = 0;
    return marker(kw, r->ts, r->dur, r->name, SIM_EVF_STEP_BEGIN, kw->step);
  }
  int32_t step = step_at(kw, r->ts);
  tstack *t = thread_at(kw, r->tid, r->ts);
  const opframe *up = t->n ? &t->f[t->n - 1] : NULL;
  unsigned flags = (up ? up->flags : 0) | r->kind;
  uint64_t key = ((up ? up->key : 0x9E3779B97F4A7C15ull) ^ (uint64_t)r->name * 0xff51afd7ed558ccdull ^
                  (uint64_t)r->file * 0xc4ceb9fe1a85ec53ull ^ (uint64_t)(uint32_t)r->line) *
                 0x9E3779B97F4A7C15ull;
  sim_grow((void **)&t->f, &t->cap, t->n + 1, sizeof *t->f);
  t->f[t->n++] = (opframe){r->ts + r->dur, r->name, r->file, r->line, r->sub, flags, key ^ (key >> 29)};
  t->valid = 0;
  if (r->sub & OP_OPTIMIZER) {
    kw->backward_marked = 0;
    return marker(kw, r->ts, r->dur, kw->names[1], SIM_EVF_PHASE, step);
  }
  if (r->sub & OP_ZERO_GRAD) return marker(kw, r->ts, r->dur, kw->names[2], SIM_EVF_PHASE, step);
  if ((r->sub & OP_BACKWARD) && !kw->backward_marked) {
    kw->backward_marked = 1;
    return marker(kw, r->ts, 0, kw->names[0], SIM_EVF_PHASE, step);
  }
  return 0;
}

static int walk_memory(kwalk *kw, const krec *r) {
  sim_event ev;
  sim_event_init(&ev);
  int host = r->device < 0;
  ev.kind = (uint8_t)(host ? (r->bytes > 0 ? SIM_EV_HOST_ALLOC : SIM_EV_HOST_FREE) : (r->bytes > 0 ? SIM_EV_ALLOC : SIM_EV_FREE));
  ev.mem = host ? SIM_MEM_PAGEABLE : SIM_MEM_DEVICE;
  ev.ts = kw->base + r->ts;
  ev.addr = (uint64_t)r->addr;
  ev.size = (uint64_t)(r->bytes < 0 ? -r->bytes : r->bytes);
  ev.device = (int16_t)r->device;
  ev.step = step_at(kw, r->ts);
  if (emit(kw, &ev, thread_at(kw, r->tid, r->ts))) return -1;
  if (!kw->writing || (r->total_alloc < 0 && r->total_res < 0)) return 0;
  store_recorded rec = {.before_seq = ev.seq + 1, .ts = ev.ts, .action = "totals", .device = r->device,
                        .addr = ev.addr, .size = ev.size, .allocated = r->total_alloc, .reserved = r->total_res,
                        .device_free = -1};
  kw->totals++;
  if (store_writer_recorded(kw->w, &rec)) {
    kp_fail(kw->p, "%s", store_error(kw->p->ic->s));
    return -1;
  }
  return 0;
}

static int walk_oom(kwalk *kw, const krec *r) {
  if (!kw->writing) return 0;
  store_recorded rec = {.before_seq = store_writer_events(kw->w), .ts = kw->base + r->ts, .action = "oom",
                        .device = r->device, .size = (uint64_t)(r->bytes < 0 ? -r->bytes : r->bytes),
                        .allocated = r->total_alloc, .reserved = r->total_res, .device_free = -1};
  if (store_writer_recorded(kw->w, &rec)) {
    kp_fail(kw->p, "%s", store_error(kw->p->ic->s));
    return -1;
  }
  return 0;
}

static int walk_activity(kwalk *kw, const krec *r) {
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = r->kind;
  ev.ts = kw->base + r->ts;
  ev.dur = r->dur;
  ev.dev_ts = r->dev_ts >= 0 ? kw->base + r->dev_ts : -1;
  ev.api_dur = r->api_dur;
  ev.name = r->name;
  ev.stream = r->stream;
  ev.flags = r->flags;
  ev.device = (int16_t)r->device;
  if (r->kind == SIM_EV_MEMCPY || r->kind == SIM_EV_MEMSET) {
    ev.size = (uint64_t)(r->bytes < 0 ? 0 : r->bytes);
    ev.mem = r->mem;
    ev.dir = r->dir;
  }
  ev.step = step_at(kw, r->ts);
  return emit(kw, &ev, thread_at(kw, r->tid, r->ts));
}

/* The blocks live before the window, at the time of the first event. */
static int walk_preexisting(kwalk *kw, const kbase *b) {
  for (size_t i = 0; i < b->n; i++) {
    const devbase *d = &b->d[i];
    int host = d->device < 0;
    for (size_t k = 0; k <= d->npre; k++) {
      sim_event ev;
      sim_event_init(&ev);
      if (k < d->npre) {
        ev.addr = d->pre[k].addr;
        ev.size = (uint64_t)d->pre[k].size;
      } else {
        int64_t rest = d->have_total ? d->baseline - d->explicit_bytes : 0;
        if (rest <= 0) break;
        /* An address no allocation has (far above any user-space pointer), one per device. */
        ev.addr = UINT64_C(0x7FF0000000000000) + ((uint64_t)(d->device + 1) << 12);
        ev.size = (uint64_t)rest;
      }
      ev.kind = host ? SIM_EV_HOST_ALLOC : SIM_EV_ALLOC;
      ev.mem = host ? SIM_MEM_PAGEABLE : SIM_MEM_DEVICE;
      ev.flags = SIM_EVF_PREEXISTING;
      ev.ts = kw->base + b->first_ts;
      ev.device = (int16_t)d->device;
      if (kw->writing) kw->preexisting++;
      if (emit(kw, &ev, NULL)) return -1;
    }
  }
  return 0;
}

/* One walk over sort 2: the categorizing pass (writing 0) or the writing pass. */
static int walk(kwalk *kw, const kbase *b) {
  kparse *p = kw->p;
  kwalk_reset(kw);
  if (kw->writing) {
    const void *v = NULL;
    int got = extsort_finish(kw->decisions) || extsort_rewind(kw->decisions) ? -1 : extsort_next(kw->decisions, &v);
    if (got < 0) {
      kp_fail(p, "%s", extsort_error(kw->decisions));
      return -1;
    }
    kw->next = got ? v : NULL;
  }
  if (walk_preexisting(kw, b)) return -1;
  merged m;
  if (merged_start(p, &m)) return -1;
  const krec *r;
  krec hold;
  int got;
  while ((got = merged_next(p, &m, &r, &hold)) == 1) {
    int rc = 0;
    switch (r->type) {
    case R_OP: rc = walk_op(kw, r); break;
    case R_MEMORY: rc = walk_memory(kw, r); break;
    case R_OOM: rc = walk_oom(kw, r); break;
    case R_EVENT: rc = walk_activity(kw, r); break;
    default: break;
    }
    if (rc) return -1;
  }
  if (got < 0) return -1;
  if (!kw->writing && categorizer_finish(kw->cat)) return -1;
  return 0;
}

/* ---- trace metadata ------------------------------------------------------------------------------ */

static const char *top_json(const kparse *p, const char *key) {
  for (size_t i = 0; i < p->ntops; i++)
    if (!strcmp(p->tops[i].key, key)) return p->tops[i].json;
  return NULL;
}

static yajl_val prop(yajl_val obj, const char *key) {
  if (!YAJL_IS_OBJECT(obj)) return NULL;
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (!strcmp(obj->u.object.keys[i], key)) return obj->u.object.values[i];
  return NULL;
}

static int count_devices(uint64_t mask, int *only) {
  int n = 0;
  for (int d = 0; d < 64; d++)
    if (mask >> d & 1) {
      n++;
      *only = d;
    }
  return n;
}

/* Device name and memory for the trace row, and the properties of the devices used, for attrs. */
static void device_meta(const kparse *p, store_trace *m, yajl_gen attrs) {
  const char *json = top_json(p, "deviceProperties");
  int only = -1, nused = count_devices(p->devices_used, &only);
  m->device_index = nused == 1 ? only : -1;
  yajl_val props = json ? yajl_tree_parse(json, NULL, 0) : NULL;
  if (!YAJL_IS_ARRAY(props)) {
    yajl_tree_free(props);
    return;
  }
  const char *name = NULL;
  int64_t mem = 0;
  int same = 1, first = 1;
  jsonw_str(attrs, "device_properties");
  yajl_gen_array_open(attrs);
  for (size_t i = 0; i < props->u.array.len; i++) {
    yajl_val d = props->u.array.values[i], id = prop(d, "id");
    if (!YAJL_IS_INTEGER(id) || YAJL_GET_INTEGER(id) < 0 || YAJL_GET_INTEGER(id) >= 64 ||
        !(p->devices_used >> YAJL_GET_INTEGER(id) & 1))
      continue;
    jsonw_tree(attrs, d);
    yajl_val n = prop(d, "name"), g = prop(d, "totalGlobalMem");
    const char *nm = YAJL_IS_STRING(n) ? n->u.string : NULL;
    int64_t gm = YAJL_IS_INTEGER(g) ? YAJL_GET_INTEGER(g) : 0;
    if (first) {
      name = nm;
      mem = gm;
      first = 0;
    } else if (!nm || !name || strcmp(nm, name) || gm != mem) {
      same = 0;
    }
  }
  yajl_gen_array_close(attrs);
  if (!first && same) {
    m->device_name = name ? strdup(name) : NULL;
    m->device_memory = mem;
  }
  yajl_tree_free(props);
}

static char *trace_attrs(const kparse *p, const kbase *b, store_trace *m) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  for (size_t i = 0; i < p->ntops; i++) {
    const char *k = p->tops[i].key;
    if (!strcmp(k, "deviceProperties")) continue;
    jsonw_kraw(g, k, p->tops[i].json);
  }
  jsonw_str(g, "devices_used");
  yajl_gen_array_open(g);
  for (int d = 0; d < 64; d++)
    if (p->devices_used >> d & 1) jsonw_int(g, d);
  yajl_gen_array_close(g);
  jsonw_str(g, "baseline_bytes");
  yajl_gen_map_open(g);
  for (size_t i = 0; i < b->n; i++) {
    char k[32];
    if (b->d[i].device < 0) snprintf(k, sizeof k, "host");
    else snprintf(k, sizeof k, "%d", b->d[i].device);
    if (b->d[i].have_total) jsonw_kint(g, k, b->d[i].baseline);
  }
  yajl_gen_map_close(g);
  device_meta(p, m, g);
  yajl_gen_map_close(g);
  char *t = strdup(jsonw_text(g, NULL));
  yajl_gen_free(g);
  return t;
}

static int note(kwalk *kw, const char *name, const char *sev, int64_t v, const char *detail) {
  if (!v) return 0;
  if (store_writer_stat(kw->w, name, sev, v, detail)) {
    kp_fail(kw->p, "%s", store_error(kw->p->ic->s));
    return -1;
  }
  return 0;
}

static int write_notes(kwalk *kw, const kbase *b, const joiner *j) {
  kparse *p = kw->p;
  char detail[1024];
  int64_t pre_explicit = 0, dup = 0, rep = 0, negative = 0;
  for (size_t i = 0; i < b->n; i++) {
    pre_explicit += (int64_t)b->d[i].npre;
    dup += b->d[i].duplicate_allocs;
    rep += b->d[i].repeated_frees;
    if (b->d[i].have_total && b->d[i].baseline < b->d[i].explicit_bytes) negative++;
  }
  if (note(kw, "operators_as_call_stacks", "info", p->n_ops,
           "cpu_op, user_annotation and python_function ranges: kept as the call stacks of the events inside them") ||
      note(kw, "runtime_calls_merged", "info", j->merged,
           "launches merged into their device activity (ts and api_dur of the activity)") ||
      note(kw, "flow_events", "info", p->n_flow, "ac2g/fwdbwd flow arrows: the correlation ids carry the same link") ||
      note(kw, "metadata_events", "info", p->n_meta, "process and thread names") ||
      note(kw, "activities_launched_before_window", "info", j->before_window,
           "device activities whose launch is not in the file: placed at their device start") ||
      note(kw, "preexisting_blocks", "info", kw->preexisting,
           "memory allocated before profiling began (blocks freed in the window, and the rest of the baseline)") ||
      note(kw, "preexisting_blocks_from_frees", "info", pre_explicit, NULL) ||
      note(kw, "step_markers", "info", kw->n_steps, "ProfilerStep#N ranges") ||
      note(kw, "phase_markers", "info", kw->n_phases, "backward, optimizer and zero_grad phases") ||
      note(kw, "duplicate_allocations", "warning", dup, "allocations of an address that was still live") ||
      note(kw, "repeated_frees", "warning", rep, "frees of a pre-existing address that was already freed") ||
      note(kw, "baseline_below_freed_blocks", "warning", negative,
           "devices whose recorded Total Allocated is below the blocks freed in the window before being allocated") ||
      note(kw, "runtime_calls_sharing_correlation", "warning", j->extra_runtime, NULL) ||
      note(kw, "kernel_launch_details", "info", j->kernels,
           "kernels whose grid, block, registers and shared memory were not kept (the event model has no place for them)") ||
      note(kw, "memory_on_non_cuda_devices", "info", p->non_cuda_memory, "[memory] events whose Device Type is not CUDA") ||
      note(kw, "top_level_fields_dropped", "data_loss", p->top_dropped, "metadata values over 8 MiB in all"))
    return -1;
  /* runtime queries, by name */
  int64_t queries = 0;
  size_t qoff = 0;
  char qdetail[1024];
  qdetail[0] = 0;
  size_t it = 0;
  uint64_t qk, qv;
  while (sim_map_next(&j->queries, &it, &qk, &qv)) {
    queries += (int64_t)qv;
    if (qoff < sizeof qdetail - 96)
      qoff += (size_t)snprintf(qdetail + qoff, sizeof qdetail - qoff, "%s%.60s: %llu", qoff ? ", " : "",
                               text_of(p, (int64_t)qk), (unsigned long long)qv);
  }
  if (note(kw, "runtime_queries", "info", queries, qdetail)) return -1;

  int64_t ignored = 0, unknown = 0;
  size_t off = 0, uoff = 0;
  char udetail[1024];
  detail[0] = udetail[0] = 0;
  for (size_t i = 0; i < p->ndropped; i++) {
    const dropped_kind *d = &p->dropped[i];
    char *buf = d->unknown ? udetail : detail;
    size_t *o = d->unknown ? &uoff : &off;
    if (*o < sizeof detail - 64)
      *o += (size_t)snprintf(buf + *o, sizeof detail - *o, "%s%s: %" PRId64, *o ? ", " : "", d->name, d->n);
    if (d->unknown) unknown += d->n;
    else ignored += d->n;
  }
  ignored += p->dropped_other;
  if (p->dropped_other && off < sizeof detail - 32)
    snprintf(detail + off, sizeof detail - off, "%sother: %" PRId64, off ? ", " : "", p->dropped_other);
  if (note(kw, "events_ignored", "info", ignored, detail) ||
      note(kw, "events_of_unknown_categories", "data_loss", unknown, udetail))
    return -1;
  return 0;
}

/* ---- the importer ---------------------------------------------------------------------------------- */


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

/*
 * The reader. yajl parses the whole file, except the elements of traceEvents that the scanner
 * (jsonscan.h) reads itself: before the array, a bracket-matching pass finds where traceEvents
 * opens and yajl gets everything up to that point; then each element's extent is found and the
 * scanner parses it with the same callbacks; an element it declines, and everything after the
 * array, go to yajl. So that yajl's grammar state always matches the file, the first element
 * the scanner reads is stood in for by "{}" (p->ghost: no callbacks act on it). Errors carry
 * the byte offset and line in the (uncompressed) file, from yajl's position in what it was fed
 * or from the element the callbacks rejected.
 */
#define KINETO_BUFFER (4u << 20)
#define KINETO_MAX_ELEMENT (64u << 20)

/*
 * Reading (and for .gz, inflating) runs on a thread of its own, a few chunks ahead of the
 * parser, so that the two overlap.
 */
#define PREFETCH_CHUNKS 4
#define PREFETCH_CHUNK (1u << 20)

typedef struct prefetch {
  input *in;
  pthread_t thread;
  int running;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  char *chunk[PREFETCH_CHUNKS];
  size_t len[PREFETCH_CHUNKS];
  int full[PREFETCH_CHUNKS];
  size_t head, head_off, tail; /* the reader's chunk and offset in it; the thread's chunk */
  int done, failed, stop;      /* the thread reached the end / an error; the reader wants it to stop */
} prefetch;

static void *prefetch_main(void *arg) {
  prefetch *f = arg;
  for (;;) {
    pthread_mutex_lock(&f->lock);
    while (f->full[f->tail] && !f->stop) pthread_cond_wait(&f->cond, &f->lock);
    int stop = f->stop;
    pthread_mutex_unlock(&f->lock);
    if (stop) return NULL;
    char *b = f->chunk[f->tail];
    size_t n = 0;
    int end = 0, failed = 0;
    while (n < PREFETCH_CHUNK) {
      ssize_t got = input_read(f->in, b + n, PREFETCH_CHUNK - n);
      if (got < 0) failed = 1;
      if (got <= 0) {
        end = 1;
        break;
      }
      n += (size_t)got;
    }
    pthread_mutex_lock(&f->lock);
    f->len[f->tail] = n;
    f->full[f->tail] = 1;
    f->tail = (f->tail + 1) % PREFETCH_CHUNKS;
    if (end) f->done = 1, f->failed = failed;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    if (end) return NULL;
  }
}

static int prefetch_start(prefetch *f, input *in) {
  memset(f, 0, sizeof *f);
  f->in = in;
  for (int i = 0; i < PREFETCH_CHUNKS; i++) f->chunk[i] = sim_xmalloc(PREFETCH_CHUNK);
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  if (pthread_create(&f->thread, NULL, prefetch_main, f)) return -1;
  f->running = 1;
  return 0;
}

/* Copies up to n bytes: the count, 0 at the end, -1 when reading failed (input_error says why). */
static ssize_t prefetch_read(prefetch *f, char *dst, size_t n) {
  for (;;) {
    pthread_mutex_lock(&f->lock);
    while (!f->full[f->head] && !f->done) pthread_cond_wait(&f->cond, &f->lock);
    int full = f->full[f->head], failed = f->failed;
    pthread_mutex_unlock(&f->lock);
    if (!full) return failed ? -1 : 0; /* nothing left */
    size_t avail = f->len[f->head] - f->head_off, take = n < avail ? n : avail;
    memcpy(dst, f->chunk[f->head] + f->head_off, take);
    f->head_off += take;
    if (f->head_off == f->len[f->head]) { /* the chunk is used up: back to the thread */
      pthread_mutex_lock(&f->lock);
      f->full[f->head] = 0;
      f->head = (f->head + 1) % PREFETCH_CHUNKS;
      f->head_off = 0;
      pthread_cond_broadcast(&f->cond);
      pthread_mutex_unlock(&f->lock);
    }
    if (take || !n) return (ssize_t)take;
  }
}

static void prefetch_stop(prefetch *f) {
  if (f->running) {
    pthread_mutex_lock(&f->lock);
    f->stop = 1;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    f->running = 0;
  }
  for (int i = 0; i < PREFETCH_CHUNKS; i++) free(f->chunk[i]);
}

typedef struct kreader {
  kparse *p;
  prefetch *pf;
  char *buf;
  size_t cap, pos, len; /* buf[pos..len) not yet consumed */
  size_t mark;          /* bytes from here on are kept by a refill */
  uint64_t base_off;    /* file offset of buf[0] */
  uint64_t base_lines;  /* newlines before buf[0] */
  int eof;
  int yajl_has_elem;    /* yajl has seen an element of traceEvents (real or stand-in) */
  size_t lines_pos;     /* newlines in buf[0..lines_pos) are counted in lines */
  uint64_t lines;
} kreader;

/* The reader's message when the parse fails (the import context is the handler's). */
static void reader_msg(kreader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reader_msg(kreader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->p->pmsg, sizeof r->p->pmsg, fmt, ap);
  va_end(ap);
}

static uint64_t count_lines(const char *b, size_t n) {
  uint64_t c = 0;
  for (const char *e = b + n; (b = memchr(b, '\n', (size_t)(e - b))); b++) c++;
  return c;
}

/* Keeps buf[mark..len), reads more behind it: bytes read, 0 at the end, -1 on error. */
static ssize_t reader_fill(kreader *r) {
  if (r->mark) {
    r->base_lines += count_lines(r->buf, r->mark);
    r->lines_pos = 0;
    r->lines = 0;
    r->base_off += r->mark;
    memmove(r->buf, r->buf + r->mark, r->len - r->mark);
    r->len -= r->mark;
    r->pos -= r->mark;
    r->mark = 0;
  }
  if (r->len == r->cap) {
    if (r->cap >= KINETO_MAX_ELEMENT) return 0;
    r->cap *= 2;
    r->buf = sim_xrealloc(r->buf, r->cap);
  }
  ssize_t n = prefetch_read(r->pf, r->buf + r->len, r->cap - r->len);
  if (n < 0) {
    reader_msg(r, "cannot import '%s': %s", r->p->ic->path, input_error(r->p->ic->in));
    return -1;
  }
  if (n == 0) r->eof = 1;
  r->len += (size_t)n;
  return n;
}

static void reader_error_at(kreader *r, size_t at, const char *what) {
  import_ctx *ic = r->p->ic;
  unsigned long long byte = (unsigned long long)(r->base_off + at);
  unsigned long long line = (unsigned long long)(r->base_lines + count_lines(r->buf, at) + 1);
  reader_msg(r, "cannot import '%s': line %llu (byte %llu%s): %s", ic->path, line, byte,
             input_is_gzip(ic->in) ? " of the uncompressed JSON" : "", what);
}

/* Gives yajl buf[from..to) (or, with text, that text standing at position from). 0 or -1. */
static int reader_feed(kreader *r, size_t from, size_t to, const char *text) {
  kparse *p = r->p;
  const unsigned char *b = text ? (const unsigned char *)text : (const unsigned char *)r->buf + from;
  size_t n = text ? strlen(text) : to - from;
  yajl_status st = n ? yajl_parse(p->h, b, n) : yajl_complete_parse(p->h);
  if (st == yajl_status_ok) return 0;
  size_t used = yajl_get_bytes_consumed(p->h);
  if (text || used > n) used = 0;
  if (p->pfailed || p->failed) {
    reader_error_at(r, from + used, p->pfailed ? p->perr : p->err);
  } else if (!n) {
    import_ctx *ic = p->ic;
    reader_msg(r, "cannot import '%s': the JSON ends early at byte %llu%s (line %llu): the file is truncated",
               ic->path, (unsigned long long)(r->base_off + r->len), input_is_gzip(ic->in) ? " of the uncompressed JSON" : "",
               (unsigned long long)(r->base_lines + count_lines(r->buf, r->len) + 1));
  } else {
    unsigned char *m = yajl_get_error(p->h, 0, b, n);
    char *msg = (char *)m, *nl;
    if (!strncmp(msg, "parse error: ", 13)) msg += 13;
    if ((nl = strchr(msg, '\n'))) *nl = 0;
    char what[600];
    snprintf(what, sizeof what, "invalid JSON: %s", msg);
    yajl_free_error(p->h, m);
    reader_error_at(r, from + used, what);
  }
  return -1;
}

/* Everything from pos to the end of the file through yajl. */
static int reader_yajl_rest(kreader *r) {
  for (;;) {
    if (r->pos < r->len && reader_feed(r, r->pos, r->len, NULL)) return -1;
    r->pos = r->mark = r->len;
    if (r->eof) return reader_feed(r, r->len, r->len, NULL);
    if (reader_fill(r) < 0) return -1;
  }
}

/* Feeds yajl up to and including the '[' that opens the top-level traceEvents: 1 found, 0 the
 * file ended (or yajl stopped, *failed says), -1 on error. */
static int reader_prefix(kreader *r) {
  static const char key[] = "traceEvents";
  int depth = 0, in_str = 0, esc = 0, match = 0, cand = 0;
  for (;;) {
    size_t i = r->pos;
    for (; i < r->len; i++) {
      char c = r->buf[i];
      if (in_str) {
        if (esc) esc = 0, match = -1;
        else if (c == '\\') esc = 1, match = -1;
        else if (c == '"') {
          in_str = 0;
          cand = depth == 1 && match == (int)sizeof key - 1;
        } else if (match >= 0) match = match < (int)sizeof key - 1 && key[match] == c ? match + 1 : -1;
        continue;
      }
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
      if (c == '"') {
        in_str = 1;
        match = 0;
        cand = 0;
      } else if (c == ':') {
        cand = cand == 1 ? 2 : 0;
      } else if (c == '[' && cand == 2) {
        if (reader_feed(r, r->pos, i + 1, NULL)) return -1;
        r->pos = r->mark = i + 1;
        return 1;
      } else {
        cand = 0;
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
      }
    }
    if (reader_feed(r, r->pos, r->len, NULL)) return -1;
    r->pos = r->mark = r->len;
    if (r->eof) return 0;
    if (reader_fill(r) < 0) return -1;
  }
}

/* The elements of traceEvents, through the scanner while it can: 0 when the rest is yajl's. */
static int reader_events(kreader *r) {
  kparse *p = r->p;
  int need_comma = 0;
  for (;;) {
    size_t unit = r->pos; /* separator and element: what yajl gets if the scanner does not take it */
    r->mark = unit;
    size_t i = unit;
    char c = 0;
    for (;;) { /* whitespace, the comma, whitespace, '{' */
      while (i < r->len && (r->buf[i] == ' ' || r->buf[i] == '\n' || r->buf[i] == '\r' || r->buf[i] == '\t')) i++;
      if (i == r->len) {
        if (r->eof) return 0;
        size_t off = i - r->pos;
        ssize_t got = reader_fill(r);
        if (got < 0) return -1;
        unit = r->pos;
        i = unit + off;
        continue;
      }
      c = r->buf[i];
      if (need_comma && c == ',') {
        need_comma = 0;
        i++;
        continue;
      }
      break;
    }
    if (need_comma || c != '{') return 0; /* the end of the array, or something for yajl to judge */
    int depth = p->depth, rc;
    size_t used = 0;
    while ((rc = jsonscan_object(r->buf + i, r->len - i, &kineto_cbs, p, &used)) == JSONSCAN_MORE ||
           (rc == JSONSCAN_DECLINED && jsonscan_extent(r->buf + i, r->len - i) == 0)) {
      /* the element goes on past what has been read: read more and start it again */
      p->depth = depth;
      p->in_args = 0;
      if (r->eof) return 0;
      size_t off = i - r->pos;
      ssize_t got = reader_fill(r);
      if (got < 0) return -1;
      unit = r->pos;
      i = unit + off;
      if (got == 0 && !r->eof) return 0; /* larger than the largest buffer: yajl streams it */
    }
    size_t end;
    if (rc == JSONSCAN_CANCELED) {
      if (p->pipe && p->pipe->stop) return -1; /* the handler failed: its message stands */
      reader_error_at(r, i + used, p->pfailed ? p->perr : p->err);
      return -1;
    }
    if (rc == JSONSCAN_OK) {
      end = i + used;
      if (!r->yajl_has_elem) {
        p->ghost = 1;
        if (reader_feed(r, unit, unit, "{}")) return -1;
        r->yajl_has_elem = 1;
      }
    } else {
      end = i + (size_t)jsonscan_extent(r->buf + i, r->len - i);
      p->depth = depth; /* the scanner's callbacks went part of the way: yajl starts the element again */
      p->in_args = 0;
      if (reader_feed(r, unit, end, NULL)) return -1;
      r->yajl_has_elem = 1;
    }
    /* where the element ends, for the handler's messages */
    r->lines += count_lines(r->buf + r->lines_pos, end - r->lines_pos);
    r->lines_pos = end;
    pipe_commit(p->pipe, r->base_off + end, r->base_lines + r->lines + 1);
    r->pos = end;
    need_comma = 1;
  }
}

static int parse_file(kparse *p, int scanner) {
  import_ctx *ic = p->ic;
  prefetch pf;
  if (prefetch_start(&pf, ic->in)) {
    prefetch_stop(&pf);
    import_error(ic, "cannot import '%s': cannot start the reading thread", ic->path);
    return -1;
  }
  kreader r = {.p = p, .pf = &pf, .cap = KINETO_BUFFER};
  r.buf = sim_xmalloc(r.cap);
  int rc = reader_fill(&r) < 0 ? -1 : 0;
  if (!rc && scanner) {
    int found = reader_prefix(&r);
    if (found < 0) rc = -1;
    else if (found && reader_events(&r) < 0) rc = -1;
    /* the rest is yajl's, and its elements are this thread's to handle */
    if (!rc && p->pipe && pipe_finish(p->pipe, BATCH_DRAIN)) rc = -1;
  }
  if (!rc && reader_yajl_rest(&r)) rc = -1;
  prefetch_stop(&pf);
  free(r.buf);
  if (!rc && !p->seen_events) {
    reader_msg(&r, "cannot import '%s': the JSON object has no traceEvents array (not a PyTorch profiler trace)",
               ic->path);
    rc = -1;
  }
  return rc;
}

static void *parser_main(void *arg) {
  kpipe *pp = arg;
  pp->rc = parse_file(pp->p, 1);
  if (!pp->direct) pipe_finish(pp, BATCH_END);
  return NULL;
}

/* Parses the file: with the scanner, on a parser thread while this one handles the elements. */
static int parse(kparse *p, int scanner) {
  import_ctx *ic = p->ic;
  int rc;
  if (!scanner) {
    rc = parse_file(p, 0);
  } else {
    kpipe pp;
    memset(&pp, 0, sizeof pp);
    pp.p = p;
    pp.cur = -1;
    pp.pending = SIZE_MAX;
    for (size_t i = 0; i < KBATCHES; i++) {
      pp.b[i].cap = KBATCH_BYTES;
      pp.b[i].data = sim_xmalloc(KBATCH_BYTES);
      pp.free_list[pp.nfree++] = i;
    }
    pthread_mutex_init(&pp.lock, NULL);
    pthread_cond_init(&pp.cond, NULL);
    p->pipe = &pp;
    int hrc = 0;
    if (pthread_create(&pp.thread, NULL, parser_main, &pp)) {
      pp.direct = 1; /* no thread: one thread does both */
      pp.rc = parse_file(p, 1);
    } else {
      hrc = pipe_handle(&pp);
      pthread_join(pp.thread, NULL);
    }
    p->pipe = NULL;
    for (size_t i = 0; i < KBATCHES; i++) free(pp.b[i].data);
    pthread_mutex_destroy(&pp.lock);
    pthread_cond_destroy(&pp.cond);
    if (hrc) return -1; /* the handler's message is in the import context */
    rc = pp.rc;
  }
  if (rc && !ic->err[0]) import_error(ic, "%s", p->pmsg[0] ? p->pmsg : "cannot import");
  return rc;
}

static int kineto_import(import_ctx *ic) {
  uint64_t memory = KINETO_SORT_MEMORY;
  const char *mset = import_param(ic, "sort_memory");
  if (mset && (sim_parse_size(mset, &memory) || memory < 4096)) {
    import_error(ic, "cannot import '%s': --set sort_memory wants a size of at least 4KiB, not '%s'", ic->path, mset);
    return -1;
  }
  const char *win = import_param(ic, "join_window"), *scan = import_param(ic, "json_scanner");
  long window = win ? strtol(win, NULL, 10) : KINETO_JOIN_WINDOW;
  if (window < 0 || window > 4096 || (scan && strcmp(scan, "0") && strcmp(scan, "1"))) {
    import_error(ic, "cannot import '%s': --set join_window wants 0 to 4096 and json_scanner 0 or 1", ic->path);
    return -1;
  }
  kparse *p = sim_xcalloc(1, sizeof *p);
  p->ic = ic;
  sim_map_init(&p->texts);
  sim_map_init(&p->frame_flags);
  sim_map_init(&p->name_class);
  p->by_corr = extsort_new(sizeof(krec), (size_t)memory / 2, cmp_corr);
  p->by_time = extsort_new(sizeof(krec), (size_t)memory * 3 / 8, cmp_time);
  p->by_time_mem = extsort_new(sizeof(krec), (size_t)memory / 8, cmp_time);
  p->cap = jsonw_mem();
  p->h = yajl_alloc(&kineto_cbs, NULL, p);
  yajl_config(p->h, yajl_dont_validate_strings, 1);
  kbase b = {0};
  joiner j;
  joiner_init(&j, p, (size_t)window);
  p->join = &j;
  kwalk kw = {.p = p, .step = -1};
  char *name = NULL;
  store_trace m = {0};
  int rc = parse(p, !scan || !strcmp(scan, "1"));
  if (!rc && join_by_correlation(p, &j)) rc = -1;
  extsort_free(p->by_corr); /* its memory goes to the decisions' sort */
  p->by_corr = NULL;
  if (!rc && (extsort_finish(p->by_time) || extsort_finish(p->by_time_mem))) {
    kp_fail(p, "%s", *extsort_error(p->by_time) ? extsort_error(p->by_time) : extsort_error(p->by_time_mem));
    rc = -1;
  }
  if (!rc && find_baseline(p, &b)) rc = -1;
  if (!rc) {
    const char *base = top_json(p, "baseTimeNanoseconds");
    if (base) kw.base = strtoll(base, NULL, 10);
    static const char *const phases[4] = {"backward", "optimizer", "zero_grad", "forward"};
    for (int i = 0; i < 4; i++)
      if ((kw.names[i] = intern(p, phases[i], strlen(phases[i]), 0)) < 0) rc = -1;
  }
  if (!rc) { /* the categorizing pass */
    kw.decisions = extsort_new(sizeof(kdecision), (size_t)memory / 2, cmp_decision);
    kw.cat = categorizer_new(kw.names, walk_decided, &kw);
    if (walk(&kw, &b)) rc = -1;
  }
  if (!rc) { /* the writing pass */
    name = import_trace_name(ic, NULL);
    m.name = name;
    m.source_format = (char *)"kineto";
    m.source_file = (char *)ic->path;
    m.framework = (char *)"pytorch";
    m.allocator = (char *)"torch";
    m.attrs = trace_attrs(p, &b, &m);
    kw.writing = 1;
    if (!name) {
      kp_fail(p, "%s", store_error(ic->s));
      rc = -1;
    } else if (store_writer_begin(ic->s, &m, &kw.w)) {
      kp_fail(p, "%s", store_error(ic->s));
      rc = -1;
    } else if (walk(&kw, &b) || write_notes(&kw, &b, &j)) {
      rc = -1;
    }
    if (!rc && !store_writer_events(kw.w))
      import_warn(ic, "'%s' holds no memory events, kernels, copies or runtime calls", ic->path);
    if (!rc) {
      int64_t id = store_writer_trace_id(kw.w);
      rc = import_finish_trace(ic, kw.w, name);
      kw.w = NULL;
      /* how the categories were decided: the notes the import driver's pass would leave */
      if (!rc && categorize_note(ic->s, id, kw.by_method, kw.bytes_by_method)) {
        kp_fail(p, "%s", store_error(ic->s));
        rc = -1;
      }
    }
  }
  if (rc && !ic->err[0]) import_error(ic, "cannot import '%s': %s", ic->path, p->err);
  if (kw.w) store_writer_abort(kw.w);
  categorizer_free(kw.cat);
  extsort_free(kw.decisions);
  for (size_t i = 0; i < kw.nthreads; i++) free(kw.threads[i].f);
  free(kw.threads);
  free(kw.frames);
  joiner_release(&j);
  kbase_release(&b);
  free(name);
  free(m.attrs);
  free(m.device_name);
  kparse_free(p);
  return rc;
}

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

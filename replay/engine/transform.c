/* transform.c: streaming transforms over event sources: nodes, filters, lifetimes, kernel classes. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/limits.h"
#include "transform.h"

/* ---- lifetimes ---------------------------------------------------------------------------- */

/* Marks the allocation at seq (of size bytes) persistent, moving it between the counts. */
static void mark_persistent(xf_lifetime *lt, int64_t seq, uint64_t size) {
  uint64_t bit = UINT64_C(1) << (seq & 63);
  if (lt->bits[seq >> 6] & bit) return;
  lt->bits[seq >> 6] |= bit;
  lt->transient_allocs--;
  lt->transient_bytes -= size;
  lt->persistent_allocs++;
  lt->persistent_bytes += size;
}

#define SEQ_BITS 40
#define SEQ_MASK ((UINT64_C(1) << SEQ_BITS) - 1)
/* A live allocation's step + 1 is kept in the 24 bits above its seq; a larger one (steps from
 * 2^24 - 1 up) is kept whole in a map of its own, the field then holding STEP_WIDE. */
#define STEP_WIDE ((UINT64_C(1) << (64 - SEQ_BITS)) - 1)

/* The slot of an allocation at seq, in step, with the step kept aside when it is too wide. */
static uint64_t live_slot(sim_map *wide, uint64_t addr, int64_t seq, int32_t step) {
  uint64_t s1 = (uint64_t)((uint32_t)step + 1u); /* 0 for step -1 */
  if (s1 < STEP_WIDE) return (uint64_t)seq | s1 << SEQ_BITS;
  *sim_map_put(wide, addr, NULL) = s1;
  return (uint64_t)seq | STEP_WIDE << SEQ_BITS;
}

/* The step a live slot holds (-1: none). */
static int64_t live_step(const sim_map *wide, uint64_t addr, uint64_t slot) {
  uint64_t s1 = slot >> SEQ_BITS;
  if (s1 == STEP_WIDE) s1 = *sim_map_get(wide, addr);
  return (int64_t)s1 - 1;
}

xf_lifetime *xf_lifetime_compute(replay_source *src, char *err, size_t errlen) {
  xf_lifetime *lt = sim_xcalloc(1, sizeof *lt);
  lt->refs = 1;
  size_t cap = 0;
  sim_map live, sizes, wide; /* addr -> seq | (step + 1) << 40; addr -> size; addr -> step + 1 */
  sim_map_init(&live);
  sim_map_init(&sizes);
  sim_map_init(&wide);
  sim_event ev;
  int rc;
  while ((rc = replay_source_next(src, &ev)) > 0) {
    if (ev.seq < 0 || (uint64_t)ev.seq > SEQ_MASK) continue;
    uint64_t need = (uint64_t)ev.seq / 64 + 1;
    if (need > cap) {
      size_t old = cap;
      sim_grow((void **)&lt->bits, &cap, need, sizeof *lt->bits);
      memset(lt->bits + old, 0, (cap - old) * sizeof *lt->bits);
    }
    if ((uint64_t)ev.seq + 1 > lt->nseq) lt->nseq = (uint64_t)ev.seq + 1;
    if (ev.kind == SIM_EV_ALLOC) {
      if (ev.category != SIM_CAT_UNKNOWN) lt->categorized_allocs++;
      lt->transient_allocs++;
      lt->transient_bytes += ev.size;
      if (ev.flags & SIM_EVF_PREEXISTING) {
        mark_persistent(lt, ev.seq, ev.size);
        continue;
      }
      int existed;
      uint64_t *slot = sim_map_put(&live, ev.addr, &existed);
      /* A repeated allocation of a live address replaces it: the first is never freed. */
      if (existed) mark_persistent(lt, (int64_t)(*slot & SEQ_MASK), *sim_map_get(&sizes, ev.addr));
      *slot = live_slot(&wide, ev.addr, ev.seq, ev.step);
      *sim_map_put(&sizes, ev.addr, NULL) = ev.size;
    } else if (sim_event_is_free(&ev)) {
      uint64_t *p = sim_map_get(&live, ev.addr);
      if (!p) continue;
      int64_t s = (int64_t)(*p & SEQ_MASK);
      int64_t step = live_step(&wide, ev.addr, *p);
      int was_wide = *p >> SEQ_BITS == STEP_WIDE;
      uint64_t size = *sim_map_get(&sizes, ev.addr);
      if (step >= 0 && ev.step >= 0 && ev.step != step) mark_persistent(lt, s, size);
      if (ev.kind != SIM_EV_FREE_REQUESTED) {
        sim_map_del(&live, ev.addr, NULL);
        sim_map_del(&sizes, ev.addr, NULL);
        if (was_wide) sim_map_del(&wide, ev.addr, NULL);
      }
    }
  }
  if (rc < 0) {
    const char *m = src->error ? src->error(src->ctx) : NULL;
    snprintf(err, errlen, "%s", m && *m ? m : "cannot read events");
    sim_map_release(&live);
    sim_map_release(&sizes);
    sim_map_release(&wide);
    free(lt->bits);
    free(lt);
    return NULL;
  }
  /* Never freed: persistent. */
  uint64_t k, v;
  for (size_t it = 0; sim_map_next(&live, &it, &k, &v);) mark_persistent(lt, (int64_t)(v & SEQ_MASK), *sim_map_get(&sizes, k));
  sim_map_release(&live);
  sim_map_release(&sizes);
  sim_map_release(&wide);
  if (!lt->bits) lt->bits = sim_xcalloc(1, sizeof *lt->bits);
  return lt;
}

void xf_lifetime_ref(xf_lifetime *lt) {
  if (lt) lt->refs++;
}

void xf_lifetime_unref(xf_lifetime *lt) {
  if (!lt || --lt->refs > 0) return;
  free(lt->bits);
  free(lt);
}

/* ---- filters ------------------------------------------------------------------------------ */

void xf_filter_init(xf_filter *f) {
  memset(f, 0, sizeof *f);
  f->rest = 1 << 30; /* R_UNKNOWN: every criterion checked until filter_finish works it out */
  f->device = -2;
  f->step_min = INT32_MIN;
  f->step_max = INT32_MAX;
  f->size_max = UINT64_MAX;
  f->seq_min = INT64_MIN;
  f->seq_max = INT64_MAX;
}

void xf_filter_release(xf_filter *f) {
  free(f->sites);
  free(f->names);
  free(f->xsites);
  free(f->sites_bits);
  free(f->names_bits);
  free(f->xsites_bits);
  xf_lifetime_unref(f->lt);
  xf_filter_init(f);
}

static int64_t *dup_ids(const int64_t *ids, size_t n) {
  if (!n) return NULL;
  int64_t *p = sim_xmalloc(n * sizeof *p);
  memcpy(p, ids, n * sizeof *p);
  return p;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* A copy of a set of ids; an empty set (which matches nothing) stays a set. */
static int64_t *dup_set(const int64_t *ids, size_t n) {
  if (!ids) return NULL;
  return n ? dup_ids(ids, n) : sim_xmalloc(sizeof *ids);
}

void xf_filter_copy(xf_filter *dst, const xf_filter *src) {
  *dst = *src;
  dst->sites = dup_set(src->sites, src->nsites);
  dst->names = dup_set(src->names, src->nnames);
  dst->xsites = dup_set(src->xsites, src->nxsites);
  dst->sites_bits = dst->names_bits = dst->xsites_bits = NULL; /* made again by filter_finish */
  dst->sites_nbits = dst->names_nbits = dst->xsites_nbits = 0;
  xf_lifetime_ref(dst->lt);
}

void xf_filter_set_sites(xf_filter *f, const int64_t *ids, size_t n) {
  free(f->sites);
  f->sites = dup_ids(ids, n);
  f->nsites = n;
  if (n) qsort(f->sites, n, sizeof *f->sites, cmp_i64);
  if (!n) f->sites = sim_xmalloc(sizeof *f->sites); /* an empty set matches nothing */
}

void xf_filter_set_names(xf_filter *f, const int64_t *ids, size_t n) {
  free(f->names);
  f->names = dup_ids(ids, n);
  f->nnames = n;
  if (n) qsort(f->names, n, sizeof *f->names, cmp_i64);
  if (!n) f->names = sim_xmalloc(sizeof *f->names);
}

void xf_filter_set_excluded_sites(xf_filter *f, const int64_t *ids, size_t n) {
  free(f->xsites);
  f->xsites = dup_ids(ids, n);
  f->nxsites = n;
  if (n) qsort(f->xsites, n, sizeof *f->xsites, cmp_i64);
}

void xf_filter_set_lifetime(xf_filter *f, xf_lifetime *lt) {
  xf_lifetime_ref(lt);
  xf_lifetime_unref(f->lt);
  f->lt = lt;
}

static int in_sorted(const int64_t *a, size_t n, int64_t v) {
  if (n <= 16) { /* short lists (the common case): a scan beats a search */
    for (size_t i = 0; i < n; i++)
      if (a[i] >= v) return a[i] == v;
    return 0;
  }
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && a[lo] == v;
}

int xf_filter_is_set(const xf_filter *f) {
  return f->kinds || f->categories || f->mems || f->dirs || f->flags_all || f->flags_none || f->lifetime || f->has_stream ||
         f->device != -2 || f->step_min != INT32_MIN || f->step_max != INT32_MAX || f->size_min ||
         f->size_max != UINT64_MAX || f->seq_min != INT64_MIN || f->seq_max != INT64_MAX || f->sites || f->names ||
         f->xsites;
}

static inline int filter_match(const xf_filter *f, const sim_event *ev);
int xf_filter_match(const xf_filter *f, const sim_event *ev) { return filter_match(f, ev); }

/* Membership of v in a sorted set, through its bitmap when it has one. */
static inline int in_set(const int64_t *a, size_t n, const uint64_t *bits, uint64_t nbits, int64_t v) {
  if (bits) return v >= 0 && (uint64_t)v < nbits && (bits[(uint64_t)v >> 6] >> ((uint64_t)v & 63)) & 1;
  return in_sorted(a, n, v);
}

/* The criteria beyond kind, category and lifetime, as bits of xf_filter.rest. */
enum {
  R_MEM = 1 << 0, R_DIR = 1 << 1, R_FLAGS = 1 << 2, R_STREAM = 1 << 3, R_DEVICE = 1 << 4, R_STEP = 1 << 5,
  R_SIZE = 1 << 6, R_SEQ = 1 << 7, R_SITES = 1 << 8, R_NAMES = 1 << 9, R_XSITES = 1 << 10,
  R_UNKNOWN = 1 << 30, /* not worked out yet: check everything */
};

static inline int filter_match(const xf_filter *f, const sim_event *ev) {
  if (f->kinds && !(f->kinds >> ev->kind & 1)) return 0;
  if (f->categories || f->lifetime) {
    /* Categories and lifetimes describe allocations only. */
    if (ev->kind != SIM_EV_ALLOC) return 0;
    int persistent = f->lt ? xf_lifetime_persistent(f->lt, ev->seq) : -1;
    if (f->lifetime) {
      if (persistent < 0) return 0;
      if (persistent != (f->lifetime == XF_LIFE_PERSISTENT)) return 0;
    }
    if (f->categories && !(f->categories >> ev->category & 1)) {
      if (ev->category != SIM_CAT_UNKNOWN || persistent < 0) return 0;
      if (!(f->categories & (persistent ? XF_CATS_PERSISTENT : XF_CATS_TRANSIENT))) return 0;
    }
  }
  int r = f->rest;
  if (!r) return 1;
  if (r & R_UNKNOWN) r = -1;
  if ((r & R_MEM) && f->mems && !(f->mems >> ev->mem & 1)) return 0;
  if ((r & R_DIR) && f->dirs && !(f->dirs >> ev->dir & 1)) return 0;
  if ((r & R_FLAGS) && ((ev->flags & f->flags_all) != f->flags_all || (ev->flags & f->flags_none))) return 0;
  if ((r & R_STREAM) && f->has_stream && ev->stream != f->stream) return 0;
  if ((r & R_DEVICE) && f->device != -2 && ev->device != f->device) return 0;
  if ((r & R_STEP) && (ev->step < f->step_min || ev->step > f->step_max)) return 0;
  if ((r & R_SIZE) && (ev->size < f->size_min || ev->size > f->size_max)) return 0;
  if ((r & R_SEQ) && (ev->seq < f->seq_min || ev->seq > f->seq_max)) return 0;
  if ((r & R_SITES) && f->sites && !in_set(f->sites, f->nsites, f->sites_bits, f->sites_nbits, ev->stack)) return 0;
  if ((r & R_NAMES) && f->names && !in_set(f->names, f->nnames, f->names_bits, f->names_nbits, ev->name)) return 0;
  if ((r & R_XSITES) && f->xsites && in_set(f->xsites, f->nxsites, f->xsites_bits, f->xsites_nbits, ev->stack))
    return 0;
  return 1;
}

#define SET_BITS_MAX (UINT64_C(1) << 24) /* ids below 16M: a bitmap of at most 2 MiB */

/* A bitmap of a sorted set of ids (NULL when an id is negative or too large). */
static uint64_t *set_bits(const int64_t *a, size_t n, uint64_t *nbits) {
  *nbits = 0;
  if (!a) return NULL;
  if (n && (a[0] < 0 || (uint64_t)a[n - 1] >= SET_BITS_MAX)) return NULL;
  uint64_t top = n ? (uint64_t)a[n - 1] + 1 : 1;
  uint64_t *bits = sim_xcalloc((size_t)((top + 63) / 64), sizeof *bits);
  for (size_t i = 0; i < n; i++) bits[(uint64_t)a[i] >> 6] |= UINT64_C(1) << ((uint64_t)a[i] & 63);
  *nbits = top;
  return bits;
}

/* Works out which criteria a filter uses (so matching tests only those) and the bitmaps of
 * its id sets; called once a transform holds the filter. */
static void filter_finish(xf_filter *f) {
  int r = 0;
  if (f->mems) r |= R_MEM;
  if (f->dirs) r |= R_DIR;
  if (f->flags_all || f->flags_none) r |= R_FLAGS;
  if (f->has_stream) r |= R_STREAM;
  if (f->device != -2) r |= R_DEVICE;
  if (f->step_min != INT32_MIN || f->step_max != INT32_MAX) r |= R_STEP;
  if (f->size_min || f->size_max != UINT64_MAX) r |= R_SIZE;
  if (f->seq_min != INT64_MIN || f->seq_max != INT64_MAX) r |= R_SEQ;
  if (f->sites) r |= R_SITES;
  if (f->names) r |= R_NAMES;
  if (f->xsites) r |= R_XSITES;
  f->rest = r;
  free(f->sites_bits);
  free(f->names_bits);
  free(f->xsites_bits);
  f->sites_bits = set_bits(f->sites, f->nsites, &f->sites_nbits);
  f->names_bits = set_bits(f->names, f->nnames, &f->names_nbits);
  f->xsites_bits = set_bits(f->xsites, f->nxsites, &f->xsites_nbits);
}

/* ---- kernel classes ----------------------------------------------------------------------- */

static const char *const class_names[] = {
#define XF_X(n) #n,
  XF_KERNEL_CLASSES(XF_X)
#undef XF_X
};

const char *xf_kernel_class_name(int cls) {
  return cls >= 0 && cls < XF_KERNEL__COUNT ? class_names[cls] : "other";
}

int xf_kernel_class_from_name(const char *name) {
  for (int i = 0; i < XF_KERNEL__COUNT; i++)
    if (!strcmp(class_names[i], name)) return i;
  return -1;
}

static int has_any(const char *s, const char *const *subs) {
  for (size_t i = 0; subs[i]; i++)
    if (strstr(s, subs[i])) return 1;
  return 0;
}

/*
 * The rules, first match wins (on the lowercased name): optimizer, attention, softmax, norm,
 * conv, matmul, reduction, copy, elementwise; else other. The order matters: an optimizer's
 * multi_tensor_apply kernel is elementwise in form, cuDNN's implicit-GEMM convolutions carry
 * "gemm" in their names, fused attention kernels carry "gemm" and "softmax".
 */
xf_kernel_class xf_kernel_class_of(const char *name) {
  if (!name) return XF_KERNEL_other;
  char low[256];
  size_t n = 0;
  for (; name[n] && n + 1 < sizeof low; n++) low[n] = (char)tolower((unsigned char)name[n]);
  low[n] = 0;
  /* ("lamb" would match every "lambda" in a templated kernel name: LAMB's kernels are
   * multi_tensor_apply ones) */
  static const char *const optimizer[] = {"adam", "sgd", "multi_tensor_apply", "adagrad", "rmsprop", "fused_optim",
                                          "optimizer", NULL};
  static const char *const attention[] = {"flash", "fmha", "attention", "attn", "sdpa", NULL};
  static const char *const softmax[] = {"softmax", NULL};
  static const char *const norm[] = {"layer_norm", "layernorm", "batch_norm", "batchnorm", "group_norm",
                                     "groupnorm", "rms_norm", "rmsnorm", "instance_norm", "welford", "bn_fw",
                                     "bn_bw", NULL};
  static const char *const conv[] = {"conv", "fprop", "dgrad", "wgrad", "implicit_gemm", "winograd", NULL};
  static const char *const matmul[] = {"gemm", "gemv", "matmul", "cutlass", "xmma", "cublas", "sm80_", "sm90_",
                                       "sm75_", "sm70_", "ampere_", "volta_", "turing_", "hopper", "s884",
                                       "s1688", "h884", "h1688", "bmm", "splitk", "magma", NULL};
  static const char *const reduction[] = {"reduce", "cross_entropy", "nll_loss", "sum_kernel", "argmax",
                                          "argmin", "norm_kernel", "mean_kernel", "max_kernel", "min_kernel",
                                          "cumsum", "scan", NULL};
  static const char *const copy[] = {"copy", "fill", "memset", "memcpy", "cat_", "catarray", "index", "gather",
                                     "scatter", "transpose", "permute", "embedding", NULL};
  static const char *const elementwise[] = {"elementwise", "vectorized", "unrolled", "pointwise", "gelu",
                                            "relu", "silu", "sigmoid", "tanh", "dropout", "add", "mul", "div",
                                            "where", "cast", "triton", NULL};
  if (has_any(low, optimizer)) return XF_KERNEL_optimizer;
  if (has_any(low, attention)) return XF_KERNEL_attention;
  if (has_any(low, softmax)) return XF_KERNEL_softmax;
  if (has_any(low, norm)) return XF_KERNEL_norm;
  if (has_any(low, conv)) return XF_KERNEL_conv;
  if (has_any(low, matmul)) return XF_KERNEL_matmul;
  if (has_any(low, reduction)) return XF_KERNEL_reduction;
  if (has_any(low, copy)) return XF_KERNEL_copy;
  if (has_any(low, elementwise)) return XF_KERNEL_elementwise;
  return XF_KERNEL_other;
}

/* ---- nodes -------------------------------------------------------------------------------- */

typedef enum node_kind {
  N_BASE,
  N_SCALE,
  N_RESIZE,
  N_DROP,
  N_INSERT,
  N_INSERT_AT,
  N_SET_COPY,
  N_SCALE_TIME,
  N_REPEAT,
  N_MAP,
  N_MERGE,
} node_kind;

struct xf_node {
  int refs;
  node_kind kind;
  int reorders; /* this node or one below changes the number or order of events */
  int depth;
  xf_node *in, *in2;
  xf_filter f;
  char *desc;
  /* base */
  xf_open_fn open;
  const sim_event *arr; /* an array base's events */
  size_t narr;
  replay_plan_kept *plan; /* ... and where its owner keeps their plan, or NULL */
  void *arg;
  void (*release)(void *arg);
  /* scale, set_copy, scale_time */
  double factor;
  uint64_t align;
  int mem, async;
  /* resize */
  sim_map sizes;
  /* insert */
  sim_event *evs;
  size_t nevs;
  xf_where where;
  int64_t seq;
  /* repeat */
  int64_t from, to;
  int times, has_once, once_transient;
  xf_filter once;
  /* insert_at */
  xf_insert_group *groups;
  size_t ngroups;
  int64_t fixed;
  /* map */
  xf_event_fn fn;
  /* merge */
  int64_t offset;
  int device;
};

static xf_node *node_new(node_kind kind, xf_node *in) {
  xf_node *n = sim_xcalloc(1, sizeof *n);
  n->refs = 1;
  n->kind = kind;
  xf_filter_init(&n->f);
  xf_filter_init(&n->once);
  sim_map_init(&n->sizes);
  if (in) {
    xf_node_ref(in);
    n->in = in;
    n->reorders = in->reorders;
    n->depth = in->depth + 1;
  }
  return n;
}

static void node_describe(xf_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void node_describe(xf_node *n, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  free(n->desc);
  n->desc = strdup(buf);
}

/* A short text for a filter, for descriptions. */
static void filter_text(const xf_filter *f, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
#define APP(...)                                                    \
  do {                                                              \
    if (o < n) o += (size_t)snprintf(buf + o, n - o, __VA_ARGS__); \
  } while (0)
  if (f->kinds) {
    APP(" kinds=");
    for (int k = 0; k < SIM_EV__COUNT; k++)
      if (f->kinds >> k & 1) APP("%s,", sim_event_kind_name(k));
    if (o && o < n) buf[--o] = 0;
  }
  if (f->categories) {
    APP(" categories=");
    for (int k = 0; k < SIM_CAT__COUNT; k++)
      if (f->categories >> k & 1) APP("%s,", sim_category_name(k));
    if (o && o < n) buf[--o] = 0;
  }
  if (f->lifetime) APP(" lifetime=%s", f->lifetime == XF_LIFE_PERSISTENT ? "persistent" : "transient");
  if (f->mems) {
    APP(" mem=");
    for (int k = 0; k < SIM_MEM__COUNT; k++)
      if (f->mems >> k & 1) APP("%s,", sim_mem_kind_name(k));
    if (o && o < n) buf[--o] = 0;
  }
  if (f->dirs) {
    APP(" dir=");
    for (int k = 0; k < SIM_COPY__COUNT; k++)
      if (f->dirs >> k & 1) APP("%s,", sim_copy_dir_name(k));
    if (o && o < n) buf[--o] = 0;
  }
  if (f->has_stream) APP(" stream=%lld", (long long)f->stream);
  if (f->device != -2) APP(" device=%d", f->device);
  if (f->step_min != INT32_MIN || f->step_max != INT32_MAX) APP(" steps=%d..%d", f->step_min, f->step_max);
  if (f->size_min || f->size_max != UINT64_MAX)
    APP(" size=%llu..%llu", (unsigned long long)f->size_min, (unsigned long long)f->size_max);
  if (f->seq_min != INT64_MIN || f->seq_max != INT64_MAX)
    APP(" seq=%lld..%lld", (long long)f->seq_min, (long long)f->seq_max);
  if (f->sites) APP(" sites=%zu", f->nsites);
  if (f->names) APP(" names=%zu", f->nnames);
  if (f->xsites) APP(" excluded_sites=%zu", f->nxsites);
#undef APP
}

xf_node *xf_base(xf_open_fn open, void *arg, void (*release)(void *arg)) {
  xf_node *n = node_new(N_BASE, NULL);
  n->open = open;
  n->arg = arg;
  n->release = release;
  return n;
}

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return 0;
}

/* The array base's plan when its owner has one of these very events, else NULL. */
static const replay_plan *arr_plan(const xf_node *n) { return n->plan ? replay_plan_kept_get(n->plan, n->arr, n->narr) : NULL; }

static int arr_open(void *arg, replay_source *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  const xf_node *n = arg;
  replay_array_source *x = sim_xcalloc(1, sizeof *x);
  *out = replay_array_source_planned(x, n->arr, n->narr, arr_plan(n));
  out->close = free;
  return 0;
}

xf_node *xf_base_array(const sim_event *evs, size_t n, void *arg, void (*release)(void *arg), replay_plan_kept *plan) {
  xf_node *node = node_new(N_BASE, NULL);
  node->open = arr_open;
  node->arr = evs;
  node->narr = n;
  node->arg = arg;
  node->release = release;
  node->plan = plan;
  return node;
}

const replay_plan *xf_plan_note(const xf_node *base) {
  if (!base || base->kind != N_BASE || !base->plan) return NULL;
  return replay_plan_kept_note(base->plan, base->arr, base->narr);
}

const replay_plan *xf_base_plan(const xf_node *base) {
  return base && base->kind == N_BASE ? arr_plan(base) : NULL;
}

xf_node *xf_scale(xf_node *in, const xf_filter *f, double factor, uint64_t align, char *err, size_t errlen) {
  if (!(factor >= 0) || !isfinite(factor)) return bad(err, errlen, "scale: factor must be a number >= 0, not %g", factor), NULL;
  if (factor > 1e9) return bad(err, errlen, "scale: factor %g is too large", factor), NULL;
  if (align > IO_MAX_BYTES) return bad(err, errlen, "scale: align %llu is larger than a trace's sizes (2^48 bytes)", (unsigned long long)align), NULL;
  xf_node *n = node_new(N_SCALE, in);
  xf_filter_copy(&n->f, f);
  if (!n->f.kinds) n->f.kinds = 1u << SIM_EV_ALLOC;
  filter_finish(&n->f);
  n->factor = factor;
  n->align = align ? align : 1;
  char ft[256];
  filter_text(&n->f, ft, sizeof ft);
  node_describe(n, "scale%s factor=%g align=%llu", ft, factor, (unsigned long long)n->align);
  return n;
}

xf_node *xf_resize(xf_node *in, const sim_map *sizes) {
  xf_node *n = node_new(N_RESIZE, in);
  sim_map_copy(&n->sizes, sizes);
  node_describe(n, "resize allocations=%zu", n->sizes.len);
  return n;
}

xf_node *xf_drop(xf_node *in, const xf_filter *f) {
  xf_node *n = node_new(N_DROP, in);
  xf_filter_copy(&n->f, f);
  filter_finish(&n->f);
  n->reorders = 1;
  char ft[256];
  filter_text(&n->f, ft, sizeof ft);
  node_describe(n, "drop%s", ft);
  return n;
}

xf_node *xf_insert(xf_node *in, const sim_event *evs, size_t nevs, xf_where where, int64_t seq, const xf_filter *f,
                   char *err, size_t errlen) {
  if (where > XF_AFTER_EACH) return bad(err, errlen, "insert: unknown position"), NULL;
  if ((where == XF_BEFORE_EACH || where == XF_AFTER_EACH) && (!f || !xf_filter_is_set(f)))
    return bad(err, errlen, "insert: 'before' and 'after' need a filter that selects events"), NULL;
  xf_node *n = node_new(N_INSERT, in);
  if (f) xf_filter_copy(&n->f, f);
  filter_finish(&n->f);
  n->reorders = 1;
  n->where = where;
  n->seq = seq;
  n->nevs = nevs;
  n->evs = sim_xmalloc((nevs ? nevs : 1) * sizeof *n->evs);
  if (nevs) memcpy(n->evs, evs, nevs * sizeof *evs);
  static const char *const wn[] = {"start", "end", "seq", "before", "after"};
  char ft[256];
  filter_text(&n->f, ft, sizeof ft);
  node_describe(n, "insert events=%zu at=%s%s", nevs, wn[where], ft);
  if (where == XF_BEFORE_SEQ) node_describe(n, "insert events=%zu before seq=%lld", nevs, (long long)seq);
  return n;
}

xf_node *xf_set_copy(xf_node *in, const xf_filter *f, int mem, int async, double dur_factor, char *err,
                     size_t errlen) {
  if (mem < 0 || mem >= SIM_MEM__COUNT) return bad(err, errlen, "pin: unknown memory kind %d", mem), NULL;
  if (!(dur_factor >= 0) || !isfinite(dur_factor))
    return bad(err, errlen, "pin: duration factor must be a number >= 0, not %g", dur_factor), NULL;
  xf_node *n = node_new(N_SET_COPY, in);
  xf_filter_copy(&n->f, f);
  n->f.kinds = 1u << SIM_EV_MEMCPY;
  filter_finish(&n->f);
  n->mem = mem;
  n->async = async;
  n->factor = dur_factor;
  char ft[256];
  filter_text(&n->f, ft, sizeof ft);
  node_describe(n, "set_copy%s mem=%s async=%d duration_factor=%g", ft, sim_mem_kind_name(mem), async, dur_factor);
  return n;
}

xf_node *xf_scale_time(xf_node *in, const xf_filter *f, double factor, int64_t fixed_ns, char *err, size_t errlen) {
  if (!(factor >= 0) || !isfinite(factor) || factor > 1e9)
    return bad(err, errlen, "scale_time: factor must be a number >= 0, not %g", factor), NULL;
  if (fixed_ns < 0 || fixed_ns > IO_MAX_TIME_NS)
    return bad(err, errlen, "scale_time: the fixed part must be from 0 to 2^62 ns"), NULL;
  xf_node *n = node_new(N_SCALE_TIME, in);
  xf_filter_copy(&n->f, f);
  if (!n->f.kinds) n->f.kinds = 1u << SIM_EV_KERNEL;
  filter_finish(&n->f);
  n->factor = factor;
  n->fixed = fixed_ns;
  char ft[256];
  filter_text(&n->f, ft, sizeof ft);
  node_describe(n, "scale_time%s factor=%g fixed_ns=%lld", ft, factor, (long long)fixed_ns);
  return n;
}

static int cmp_group(const void *a, const void *b) {
  const xf_insert_group *x = a, *y = b;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  return x->after - y->after;
}

xf_node *xf_insert_at(xf_node *in, const xf_insert_group *groups, size_t ngroups, const sim_event *evs, size_t nevs) {
  xf_node *n = node_new(N_INSERT_AT, in);
  n->reorders = 1;
  n->groups = sim_xmalloc((ngroups ? ngroups : 1) * sizeof *n->groups);
  if (ngroups) memcpy(n->groups, groups, ngroups * sizeof *groups);
  n->ngroups = ngroups;
  qsort(n->groups, ngroups, sizeof *n->groups, cmp_group);
  n->evs = sim_xmalloc((nevs ? nevs : 1) * sizeof *n->evs);
  if (nevs) memcpy(n->evs, evs, nevs * sizeof *evs);
  n->nevs = nevs;
  node_describe(n, "insert_at places=%zu events=%zu", ngroups, nevs);
  return n;
}

xf_node *xf_repeat(xf_node *in, int64_t from, int64_t to, int times, const xf_filter *once, int once_transient,
                   char *err, size_t errlen) {
  if (from < 0 || to <= from) return bad(err, errlen, "repeat: the block [%lld, %lld) is empty", (long long)from, (long long)to), NULL;
  if (times < 0 || times > 100000) return bad(err, errlen, "repeat: times must be 0..100000, not %d", times), NULL;
  xf_node *n = node_new(N_REPEAT, in);
  n->reorders = 1;
  n->from = from;
  n->to = to;
  n->times = times;
  if (once && xf_filter_is_set(once)) {
    xf_filter_copy(&n->once, once);
    filter_finish(&n->once);
    n->has_once = 1;
    n->once_transient = once_transient;
  }
  char ft[256];
  filter_text(&n->once, ft, sizeof ft);
  node_describe(n, "repeat seq=%lld..%lld times=%d%s%s%s", (long long)from, (long long)(to - 1), times,
                n->has_once ? " once:" : "", n->has_once ? ft : "", n->once_transient ? " (transient)" : "");
  return n;
}

xf_node *xf_map(xf_node *in, const xf_filter *f, xf_event_fn fn, void *arg, void (*release)(void *arg)) {
  xf_node *n = node_new(N_MAP, in);
  if (f) xf_filter_copy(&n->f, f);
  filter_finish(&n->f);
  n->reorders = 1;
  n->fn = fn;
  n->arg = arg;
  n->release = release;
  char ft[256];
  filter_text(&n->f, ft, sizeof ft);
  node_describe(n, "map%s", ft);
  return n;
}

xf_node *xf_merge(xf_node *a, xf_node *b, int64_t offset_ns, int device) {
  xf_node *n = node_new(N_MERGE, a);
  xf_node_ref(b);
  n->in2 = b;
  n->reorders = 1;
  if (b->depth + 1 > n->depth) n->depth = b->depth + 1;
  n->offset = offset_ns;
  n->device = device;
  node_describe(n, "merge offset_ns=%lld device=%d", (long long)offset_ns, device);
  return n;
}

void xf_node_ref(xf_node *n) {
  if (n) n->refs++;
}

void xf_node_unref(xf_node *n) {
  if (!n || --n->refs > 0) return;
  xf_node_unref(n->in);
  xf_node_unref(n->in2);
  xf_filter_release(&n->f);
  xf_filter_release(&n->once);
  sim_map_release(&n->sizes);
  free(n->evs);
  free(n->groups);
  free(n->desc);
  if (n->release) n->release(n->arg);
  free(n);
}

int xf_node_is_base(const xf_node *n) { return n->kind == N_BASE; }
int xf_node_depth(const xf_node *n) { return n->depth; }

static void describe_into(const xf_node *n, char **buf, size_t *len, size_t *cap) {
  if (n->in) describe_into(n->in, buf, len, cap);
  if (n->kind == N_MERGE) {
    const char *pre = "merge input:\n";
    size_t need = *len + strlen(pre) + 1;
    sim_grow((void **)buf, cap, need, 1);
    memcpy(*buf + *len, pre, strlen(pre) + 1);
    *len += strlen(pre);
    char *sub = xf_node_describe(n->in2);
    need = *len + strlen(sub) + 1;
    sim_grow((void **)buf, cap, need, 1);
    memcpy(*buf + *len, sub, strlen(sub) + 1);
    *len += strlen(sub);
    free(sub);
  }
  if (n->desc) {
    size_t l = strlen(n->desc);
    sim_grow((void **)buf, cap, *len + l + 2, 1);
    memcpy(*buf + *len, n->desc, l);
    *len += l;
    (*buf)[(*len)++] = '\n';
    (*buf)[*len] = 0;
  }
}

char *xf_node_describe(const xf_node *n) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  sim_grow((void **)&buf, &cap, 1, 1);
  buf[0] = 0;
  describe_into(n, &buf, &len, &cap);
  return buf;
}

/* ---- opened transforms -------------------------------------------------------------------- */

/* A FIFO of events a transform has ready. */
typedef struct evq {
  sim_event *a;
  size_t head, len, cap;
} evq;

static void evq_push(evq *q, const sim_event *ev) {
  if (q->head && q->head == q->len) q->head = q->len = 0;
  if (q->len == q->cap) {
    if (q->head) {
      memmove(q->a, q->a + q->head, (q->len - q->head) * sizeof *q->a);
      q->len -= q->head;
      q->head = 0;
    }
    if (q->len == q->cap) sim_grow((void **)&q->a, &q->cap, q->len + 1, sizeof *q->a);
  }
  q->a[q->len++] = *ev;
}

static int evq_pop(evq *q, sim_event *ev) {
  if (q->head == q->len) return 0;
  *ev = q->a[q->head++];
  return 1;
}

typedef struct stage {
  const xf_node *n;
  uint32_t kinds; /* the event kinds the stage can change */
  sim_map map; /* scale, resize: changed sizes by address */
  int track;   /* -1 until the first free says whether the trace's frees carry sizes */
} stage;

typedef struct xstate {
  replay_source in, in2;
  const xf_node *n;
  char err[XF_ERRLEN];
  sim_map map;  /* per transform: changed sizes, dropped addresses, aliases */
  sim_map map2;
  evq q;
  int started, done;
  int64_t last_ts;
  uint64_t occurrence;
  /* repeat */
  sim_event *block;
  size_t nblock, block_cap;
  int in_block, block_done;
  sim_event pending;
  int has_pending;
  int64_t shift;     /* ts added to events after the block */
  uint64_t next_alias;
  /* merge */
  sim_event ha, hb;
  int has_a, has_b, end_a, end_b;
  int64_t base_a, base_b;
  /* renumber */
  int64_t out_seq;
  stage *stages; /* fused one-to-one transforms */
  size_t nstages;
  const sim_event *arr; /* their array base, read directly */
  size_t arr_n, arr_pos;
  const replay_plan *plan; /* its plan, when made and the stages keep kinds and addresses */
  sim_event *view;      /* the events lent: arr[view_at ..) through the stages */
  size_t view_at, view_n, view_pos;
} xstate;

static const char *x_error(void *ctx) {
  xstate *x = ctx;
  if (x->err[0]) return x->err;
  if (x->in.error) {
    const char *m = x->in.error(x->in.ctx);
    if (m && *m) return m;
  }
  if (x->in2.error) return x->in2.error(x->in2.ctx);
  return NULL;
}

static void x_close(void *ctx) {
  xstate *x = ctx;
  if (x->in.close) replay_source_close(&x->in);
  if (x->in2.close) replay_source_close(&x->in2);
  sim_map_release(&x->map);
  sim_map_release(&x->map2);
  free(x->q.a);
  free(x->block);
  free(x->view);
  for (size_t i = 0; i < x->nstages; i++) sim_map_release(&x->stages[i].map);
  free(x->stages);
  free(x);
}

static int in_next(xstate *x, sim_event *ev) { return x->in.next(x->in.ctx, ev); }

static inline int is_free_kind(int k) {
  return k == SIM_EV_FREE || k == SIM_EV_FREE_REQUESTED || k == SIM_EV_FREE_COMPLETED;
}
static inline int completes(int k) { return k == SIM_EV_FREE || k == SIM_EV_FREE_COMPLETED; }

/* A duration from a double, rounded, and held below 2^62 ns (a product with a large factor
 * would not fit in 64 bits: converting it would be undefined). */
static inline int64_t round_pos(double v) { return v >= 4.6e18 ? INT64_C(4600000000000000000) : (int64_t)(v + 0.5); }

/* A size times factor, rounded up to align (at most IO_MAX_BYTES), and held to a trace's sizes:
 * at most IO_MAX_BYTES (the largest multiple of align below it, past it). */
static uint64_t scaled(uint64_t size, double factor, uint64_t align) {
  /* signed conversions: a single instruction each, where unsigned 64-bit ones are not */
  double v = (double)(int64_t)(size & ((UINT64_C(1) << 62) - 1)) * factor;
  if (v > (double)IO_MAX_BYTES) v = (double)IO_MAX_BYTES;
  uint64_t s = (uint64_t)(int64_t)v;
  if ((double)(int64_t)s < v) s++; /* rounded up */
  if (align > 1) s = (s + align - 1) / align * align;
  if (s > IO_MAX_BYTES) s = IO_MAX_BYTES / align * align;
  if (s == 0 && size > 0) s = align > 1 ? align : 1;
  return s;
}

/* The transforms that turn each event into one event: applied as stages, several fused into
 * one source when they are stacked (one call per event instead of one per transform). */

static int fusable(const xf_node *n) {
  return n->kind == N_SCALE || n->kind == N_RESIZE || n->kind == N_SET_COPY || n->kind == N_SCALE_TIME;
}

/*
 * scale, resize: new sizes for allocations; their frees follow. A free's size is only
 * informational (the engine frees by address), so the changed sizes are tracked only when the
 * trace's frees carry sizes at all, which the first free tells.
 */
static void stage_sizes(stage *st, sim_event *ev) {
  const xf_node *n = st->n;
  if (ev->kind == SIM_EV_ALLOC) {
    uint64_t ns = ev->size;
    if (n->kind == N_SCALE) {
      if (filter_match(&n->f, ev)) ns = scaled(ev->size, n->factor, n->align);
    } else {
      uint64_t *p = ev->seq >= 0 ? sim_map_get(&n->sizes, (uint64_t)ev->seq) : NULL;
      if (p) ns = *p;
    }
    if (ns != ev->size) {
      if (st->track) *sim_map_put(&st->map, ev->addr, NULL) = ns;
      ev->size = ns;
    }
  } else if (is_free_kind(ev->kind)) {
    if (st->track < 0) {
      st->track = ev->size != 0;
      if (!st->track) sim_map_release(&st->map);
    }
    if (st->track && st->map.len) {
      uint64_t *p = sim_map_get(&st->map, ev->addr);
      if (p) {
        if (ev->size) ev->size = *p;
        if (completes(ev->kind)) sim_map_del(&st->map, ev->addr, NULL);
      }
    }
  } else if (n->kind == N_SCALE && (ev->kind == SIM_EV_MEMCPY || ev->kind == SIM_EV_MEMSET ||
                                    ev->kind == SIM_EV_HOST_ALLOC) &&
             filter_match(&n->f, ev)) {
    uint64_t ns = scaled(ev->size, n->factor, n->align);
    if (ev->kind != SIM_EV_HOST_ALLOC && ev->size && ev->dur > 0)
      ev->dur = round_pos((double)ev->dur * (double)ns / (double)ev->size);
    ev->size = ns;
  }
}

static void stage_apply(stage *st, sim_event *ev) {
  const xf_node *n = st->n;
  switch (n->kind) {
  case N_SCALE:
  case N_RESIZE: stage_sizes(st, ev); break;
  case N_SET_COPY:
    if (ev->kind == SIM_EV_MEMCPY && filter_match(&n->f, ev)) {
      ev->mem = (uint8_t)n->mem;
      if (n->async) ev->flags |= SIM_EVF_ASYNC;
      if (n->factor != 1 && ev->dur > 0) ev->dur = round_pos((double)ev->dur * n->factor);
    }
    break;
  case N_SCALE_TIME:
    if (ev->dur > n->fixed && filter_match(&n->f, ev))
      ev->dur = n->fixed + round_pos((double)(ev->dur - n->fixed) * n->factor); /* below 2^63: each below 2^62 */
    if (ev->dur > IO_MAX_TIME_NS) ev->dur = IO_MAX_TIME_NS; /* held to a trace's durations */
    break;
  default: break;
  }
}

static int drop_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  for (;;) {
    int r = in_next(x, ev);
    if (r <= 0) return r;
    if (is_free_kind(ev->kind) && x->map.len) {
      uint64_t *p = sim_map_get(&x->map, ev->addr);
      if (p) {
        if (completes(ev->kind)) sim_map_del(&x->map, ev->addr, NULL);
        continue;
      }
    }
    if (!xf_filter_match(&x->n->f, ev)) return 1;
    if (ev->kind == SIM_EV_ALLOC) *sim_map_put(&x->map, ev->addr, NULL) = 1;
  }
}

static void insert_all(xstate *x, int64_t ts) {
  const xf_node *n = x->n;
  for (size_t i = 0; i < n->nevs; i++) {
    sim_event e = n->evs[i];
    e.seq = -1;
    if (e.ts < 0) e.ts = ts;
    if (e.addr) {
      e.addr |= XF_ADDR_INSERTED;
      if (n->where == XF_BEFORE_EACH || n->where == XF_AFTER_EACH)
        e.addr |= (x->occurrence & ((UINT64_C(1) << 21) - 1)) << 40;
    }
    evq_push(&x->q, &e);
  }
  x->occurrence++;
}

static int insert_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  const xf_node *n = x->n;
  if (evq_pop(&x->q, ev)) return 1;
  if (x->done) return 0;
  sim_event e;
  int r = in_next(x, &e);
  if (r < 0) return r;
  if (r == 0) {
    x->done = 1;
    if (n->where == XF_AT_END || (n->where == XF_BEFORE_SEQ && !x->started) ||
        (n->where == XF_AT_START && !x->started)) {
      x->started = 1;
      insert_all(x, x->last_ts);
    }
    return evq_pop(&x->q, ev);
  }
  x->last_ts = e.ts;
  switch (n->where) {
  case XF_AT_START:
    if (!x->started) {
      x->started = 1;
      insert_all(x, e.ts);
    }
    break;
  case XF_BEFORE_SEQ:
    if (!x->started && e.seq >= n->seq) {
      x->started = 1;
      insert_all(x, e.ts);
    }
    break;
  case XF_BEFORE_EACH:
    if (xf_filter_match(&n->f, &e)) insert_all(x, e.ts);
    break;
  case XF_AFTER_EACH:
    if (xf_filter_match(&n->f, &e)) {
      evq_push(&x->q, &e);
      insert_all(x, e.ts);
      return evq_pop(&x->q, ev);
    }
    break;
  case XF_AT_END: break;
  }
  evq_push(&x->q, &e);
  return evq_pop(&x->q, ev);
}

/* The group of (seq, after), or NULL. */
static const xf_insert_group *find_group(const xf_node *n, int64_t seq, int after) {
  size_t lo = 0, hi = n->ngroups;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const xf_insert_group *g = &n->groups[mid];
    if (g->seq < seq || (g->seq == seq && g->after < after)) lo = mid + 1;
    else hi = mid;
  }
  return lo < n->ngroups && n->groups[lo].seq == seq && n->groups[lo].after == after ? &n->groups[lo] : NULL;
}

static void push_group(xstate *x, const xf_insert_group *g, const sim_event *anchor) {
  for (size_t i = 0; i < g->count && g->first + i < x->n->nevs; i++) {
    sim_event e = x->n->evs[g->first + i];
    e.seq = -1;
    if (e.ts < 0) e.ts = anchor->ts;
    evq_push(&x->q, &e);
  }
}

static int insert_at_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  const xf_node *n = x->n;
  if (evq_pop(&x->q, ev)) return 1;
  sim_event e;
  int r = in_next(x, &e);
  if (r <= 0) return r;
  if (e.seq >= 0 && n->ngroups) {
    const xf_insert_group *before = find_group(n, e.seq, 0), *after = find_group(n, e.seq, 1);
    if (before || after) {
      if (before) push_group(x, before, &e);
      evq_push(&x->q, &e);
      if (after) push_group(x, after, &e);
      return evq_pop(&x->q, ev);
    }
  }
  *ev = e;
  return 1;
}

/*
 * repeat. x->map: original address -> where it lives now, for allocations made in the block
 * and still live (0: copy 0's own address; REPEAT_DROPPED: dropped with the block);
 * x->map2: the addresses the copy being written has made (original -> alias).
 */
#define REPEAT_DROPPED UINT64_MAX

/* t + d into *out when it stays within the times a trace holds (replay/io/limits.h): 0, else -1. */
static int time_moved(int64_t t, int64_t d, int64_t *out) {
  return __builtin_add_overflow(t, d, out) || *out > IO_MAX_TIME_NS || *out < -IO_MAX_TIME_NS ? -1 : 0;
}

/* Moves ev's times by d: 0, or -1 with x->err saying so when they would leave a trace's range. */
static int move_event(xstate *x, sim_event *ev, int64_t d, const char *what) {
  int64_t ts, dev_ts = ev->dev_ts;
  if (time_moved(ev->ts, d, &ts) || (ev->dev_ts >= 0 && time_moved(ev->dev_ts, d, &dev_ts))) {
    snprintf(x->err, sizeof x->err, "%s: an event at %lld ns would move %lld ns, past 2^62 ns, the most a trace holds", what,
             (long long)ev->ts, (long long)d);
    return -1;
  }
  ev->ts = ts;
  ev->dev_ts = dev_ts;
  return 0;
}

static void push_free(xstate *x, const sim_event *like, uint64_t addr) {
  sim_event f = *like;
  f.kind = SIM_EV_FREE;
  f.addr = addr;
  f.seq = -1;
  f.dur = 0;
  f.category = 0;
  f.cat_source = 0;
  f.flags = 0;
  evq_push(&x->q, &f);
}

/* How far each copy of the block is moved: to the event after it, else by the block's length
 * and one mean gap; at most INT64_MAX. */
static int64_t repeat_span(const xstate *x) {
  int64_t first = x->block[0].ts, last = x->has_pending ? x->pending.ts : x->block[x->nblock - 1].ts, w;
  if (__builtin_sub_overflow(last, first, &w)) return INT64_MAX;
  if (w < 0) return 0;
  if (x->has_pending) return w;
  int64_t gap = w / (int64_t)x->nblock;
  return w > INT64_MAX - gap ? INT64_MAX : w + gap;
}

/* 0, or -1 (x->err says why) when a copy's times would leave a trace's range. */
static int repeat_emit_copies(xstate *x) {
  const xf_node *n = x->n;
  if (!x->nblock) return 0;
  int64_t span = repeat_span(x);
  for (int c = 1; c < n->times; c++) {
    int64_t by;
    if (__builtin_mul_overflow(span, (int64_t)c, &by)) by = INT64_MAX;
    sim_map_clear(&x->map2);
    for (size_t i = 0; i < x->nblock; i++) {
      const sim_event *o = &x->block[i];
      /* step boundaries are not work: the copies stay inside the step the block is in */
      if (o->kind == SIM_EV_MARKER && (o->flags & (SIM_EVF_STEP_BEGIN | SIM_EVF_STEP_END))) continue;
      sim_event e = *o;
      if (move_event(x, &e, by, "repeat")) return -1;
      if (e.kind == SIM_EV_ALLOC) {
        uint64_t alias = XF_ADDR_COPY | x->next_alias++;
        e.addr = alias;
        if (n->has_once && filter_match(&n->once, o)) {
          if (!n->once_transient) continue;
          evq_push(&x->q, &e);
          push_free(x, &e, alias);
          continue;
        }
        int existed;
        uint64_t *slot = sim_map_put(&x->map, o->addr, &existed);
        uint64_t old = existed ? (*slot ? *slot : o->addr) : 0;
        *slot = alias;
        *sim_map_put(&x->map2, o->addr, NULL) = alias;
        evq_push(&x->q, &e);
        if (existed) push_free(x, &e, old); /* the previous copy's is still live: rebound now */
      } else if (is_free_kind(e.kind)) {
        uint64_t *a = sim_map_get(&x->map2, o->addr);
        if (!a) continue; /* memory from before the block, or made once: the first copy freed it */
        e.addr = *a;
        evq_push(&x->q, &e);
        if (completes(e.kind)) {
          sim_map_del(&x->map, o->addr, NULL);
          sim_map_del(&x->map2, o->addr, NULL);
        }
      } else {
        evq_push(&x->q, &e);
      }
    }
  }
  if (n->times == 0) x->shift = -span;
  else if (__builtin_mul_overflow(span, (int64_t)(n->times - 1), &x->shift)) x->shift = INT64_MAX;
  return 0;
}

static int repeat_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  const xf_node *n = x->n;
  for (;;) {
    if (evq_pop(&x->q, ev)) return 1;
    if (x->has_pending) {
      *ev = x->pending;
      x->has_pending = 0;
    } else {
      if (x->done) return 0;
      int r = in_next(x, ev);
      if (r < 0) return r;
      if (r == 0) {
        x->done = 1;
        if (x->in_block) {
          x->in_block = 0;
          x->block_done = 1;
          if (repeat_emit_copies(x)) return -1;
        }
        continue;
      }
    }
    if (!x->block_done) {
      if (!x->in_block && ev->seq >= n->from && ev->seq < n->to) {
        x->in_block = 1;
      } else if (x->in_block && ev->seq >= n->to) {
        x->in_block = 0;
        x->block_done = 1;
        x->pending = *ev;
        x->has_pending = 1;
        if (repeat_emit_copies(x)) return -1;
        continue;
      }
      if (!x->in_block) return 1;
      sim_grow((void **)&x->block, &x->block_cap, x->nblock + 1, sizeof *x->block);
      x->block[x->nblock++] = *ev;
      if (ev->kind == SIM_EV_ALLOC) {
        *sim_map_put(&x->map, ev->addr, NULL) = n->times == 0 ? REPEAT_DROPPED : 0;
      } else if (is_free_kind(ev->kind) && n->times == 0) {
        /* memory from before the block stays live when the block is dropped */
        uint64_t *a = sim_map_get(&x->map, ev->addr);
        if (a && completes(ev->kind)) sim_map_del(&x->map, ev->addr, NULL);
        continue;
      } else if (completes(ev->kind)) {
        sim_map_del(&x->map, ev->addr, NULL);
      }
      if (n->times == 0) continue;
      return 1;
    }
    /* after the block */
    if (x->shift && move_event(x, ev, x->shift, "repeat")) return -1;
    if (x->map.len && (is_free_kind(ev->kind) || ev->kind == SIM_EV_ALLOC)) {
      uint64_t orig = ev->addr;
      uint64_t *a = sim_map_get(&x->map, orig);
      if (a) {
        if (ev->kind == SIM_EV_ALLOC) {
          sim_map_del(&x->map, orig, NULL); /* the address is the trace's again */
        } else {
          uint64_t where = *a;
          if (completes(ev->kind)) sim_map_del(&x->map, orig, NULL);
          if (where == REPEAT_DROPPED) continue;
          if (where) ev->addr = where;
        }
      }
    }
    return 1;
  }
}

static int map_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  const xf_node *n = x->n;
  sim_event out[64];
  for (;;) {
    if (evq_pop(&x->q, ev)) return 1;
    int r = in_next(x, ev);
    if (r <= 0) return r;
    if (!filter_match(&n->f, ev)) return 1;
    size_t nout = 0;
    if (n->fn(n->arg, ev, out, sizeof out / sizeof *out, &nout, x->err, sizeof x->err)) return -1;
    for (size_t i = 0; i < nout; i++) evq_push(&x->q, &out[i]);
  }
}

static int merge_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  const xf_node *n = x->n;
  if (!x->started) {
    x->started = 1;
    int r = x->in.next(x->in.ctx, &x->ha);
    if (r < 0) return r;
    x->has_a = r > 0;
    r = x->in2.next(x->in2.ctx, &x->hb);
    if (r < 0) return r;
    x->has_b = r > 0;
    x->base_a = x->has_a ? x->ha.ts : 0;
    x->base_b = x->has_b ? x->hb.ts : 0;
  }
  if (!x->has_a && !x->has_b) return 0;
  int64_t tb = 0; /* b's next time on a's time line */
  if (x->has_b && (__builtin_sub_overflow(x->hb.ts, x->base_b, &tb) || time_moved(tb, x->base_a, &tb) ||
                   time_moved(tb, n->offset, &tb))) {
    snprintf(x->err, sizeof x->err, "merge: an event of the second trace (at %lld ns) would fall past 2^62 ns on the merged time line",
             (long long)x->hb.ts);
    return -1;
  }
  if (x->has_a && (!x->has_b || x->ha.ts <= tb)) {
    *ev = x->ha;
    int r = x->in.next(x->in.ctx, &x->ha);
    if (r < 0) return r;
    x->has_a = r > 0;
    return 1;
  }
  *ev = x->hb;
  int64_t d; /* its device time moves as its host time does */
  if (ev->dev_ts >= 0 && (__builtin_sub_overflow(tb, ev->ts, &d) || time_moved(ev->dev_ts, d, &ev->dev_ts))) {
    snprintf(x->err, sizeof x->err, "merge: an event of the second trace (device time %lld ns) would fall past 2^62 ns on the merged time line",
             (long long)x->hb.dev_ts);
    return -1;
  }
  ev->ts = tb;
  if (n->device >= 0) ev->device = (int16_t)n->device;
  if (ev->addr) ev->addr |= XF_ADDR_MERGED;
  int r = x->in2.next(x->in2.ctx, &x->hb);
  if (r < 0) return r;
  x->has_b = r > 0;
  return 1;
}

static int renumber_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  int r = in_next(x, ev);
  if (r <= 0) return r;
  ev->seq = x->out_seq++;
  return 1;
}

/* The stages over an array base: read the array here, a block at a time (view) or one event at a
 * time (next, which takes what a view has left first). */
enum { XF_VIEW = 1024 };

static void stages_event(xstate *x, sim_event *ev) {
  uint32_t bit = 1u << ev->kind;
  for (size_t i = 0; i < x->nstages; i++)
    if (x->stages[i].kinds & bit) stage_apply(&x->stages[i], ev);
}

static ptrdiff_t stages_array_view(void *ctx, const sim_event **evs) {
  xstate *x = ctx;
  if (x->view_pos == x->view_n) {
    if (!x->view) x->view = sim_xmalloc(XF_VIEW * sizeof *x->view);
    size_t k = x->arr_n - x->arr_pos < XF_VIEW ? x->arr_n - x->arr_pos : XF_VIEW;
    memcpy(x->view, x->arr + x->arr_pos, k * sizeof *x->view);
    for (size_t i = 0; i < k; i++) stages_event(x, &x->view[i]);
    x->view_at = x->arr_pos;
    x->arr_pos += k;
    x->view_n = k;
    x->view_pos = 0;
  }
  *evs = x->view + x->view_pos;
  return (ptrdiff_t)(x->view_n - x->view_pos);
}

static void stages_array_advance(void *ctx, size_t k) { ((xstate *)ctx)->view_pos += k; }

static const uint32_t *stages_array_slots(void *ctx) {
  xstate *x = ctx;
  return x->plan->slot + x->view_at + x->view_pos;
}

static const uint8_t *stages_array_steps(void *ctx) {
  xstate *x = ctx;
  return x->plan->step ? x->plan->step + x->view_at + x->view_pos : NULL;
}

static int stages_array_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  if (x->view_pos < x->view_n) {
    *ev = x->view[x->view_pos++];
    return 1;
  }
  if (x->arr_pos >= x->arr_n) return 0;
  *ev = x->arr[x->arr_pos++];
  stages_event(x, ev);
  return 1;
}

static int stages_next(void *ctx, sim_event *ev) {
  xstate *x = ctx;
  int r = in_next(x, ev);
  if (r <= 0) return r;
  uint32_t bit = 1u << ev->kind;
  for (size_t i = 0; i < x->nstages; i++)
    if (x->stages[i].kinds & bit) stage_apply(&x->stages[i], ev);
  return 1;
}

static int open_node(const xf_node *n, replay_source *out, char *err, size_t errlen) {
  /* an array base reads the node (its array may be empty, and NULL); any other base its arg */
  if (n->kind == N_BASE) return n->open(n->open == arr_open ? (void *)n : n->arg, out, err, errlen);
  if (fusable(n)) {
    /* the run of one-to-one transforms down from n, applied innermost first */
    size_t k = 0;
    const xf_node *m = n;
    for (; fusable(m); m = m->in) k++;
    xstate *x = sim_xcalloc(1, sizeof *x);
    x->n = n;
    x->stages = sim_xcalloc(k, sizeof *x->stages);
    x->nstages = k;
    m = n;
    const uint32_t frees = (1u << SIM_EV_FREE) | (1u << SIM_EV_FREE_REQUESTED) | (1u << SIM_EV_FREE_COMPLETED);
    for (size_t i = k; i-- > 0; m = m->in) {
      x->stages[i].n = m;
      switch (m->kind) {
      case N_SCALE:
        /* the kinds its filter takes (allocations by default), and frees when allocations change */
        x->stages[i].kinds = m->f.kinds & ((1u << SIM_EV_ALLOC) | (1u << SIM_EV_MEMCPY) | (1u << SIM_EV_MEMSET) |
                                           (1u << SIM_EV_HOST_ALLOC));
        if (m->f.kinds & (1u << SIM_EV_ALLOC)) x->stages[i].kinds |= frees;
        break;
      case N_RESIZE: x->stages[i].kinds = (1u << SIM_EV_ALLOC) | frees; break;
      case N_SET_COPY: x->stages[i].kinds = 1u << SIM_EV_MEMCPY; break;
      default: x->stages[i].kinds = m->f.kinds ? m->f.kinds : UINT32_MAX; break;
      }
      sim_map_init(&x->stages[i].map);
      x->stages[i].track = -1;
    }
    if (m->kind == N_BASE && m->arr) { /* the stages keep kinds and addresses: the array's plan is theirs */
      x->arr = m->arr;
      x->arr_n = m->narr;
      x->plan = arr_plan(m);
      *out = (replay_source){.next = stages_array_next, .error = x_error, .close = x_close, .ctx = x,
                             .view = stages_array_view, .advance = stages_array_advance, .length_hint = m->narr,
                             .view_slots = x->plan ? stages_array_slots : NULL,
                             .plan_records = x->plan ? x->plan->nslots : 0,
                             .view_steps = x->plan ? stages_array_steps : NULL};
      return 0;
    }
    if (open_node(m, &x->in, err, errlen)) {
      free(x->stages);
      free(x);
      return -1;
    }
    *out = (replay_source){.next = stages_next, .error = x_error, .close = x_close, .ctx = x};
    return 0;
  }
  xstate *x = sim_xcalloc(1, sizeof *x);
  x->n = n;
  sim_map_init(&x->map);
  sim_map_init(&x->map2);
  x->next_alias = 1;
  if (open_node(n->in, &x->in, err, errlen)) {
    free(x);
    return -1;
  }
  if (n->in2 && open_node(n->in2, &x->in2, err, errlen)) {
    replay_source_close(&x->in);
    free(x);
    return -1;
  }
  int (*next)(void *, sim_event *) = NULL;
  switch (n->kind) {
  case N_DROP: next = drop_next; break;
  case N_INSERT: next = insert_next; break;
  case N_INSERT_AT: next = insert_at_next; break;
  case N_REPEAT: next = repeat_next; break;
  case N_MAP: next = map_next; break;
  case N_MERGE: next = merge_next; break;
  default: break;
  }
  *out = (replay_source){.next = next, .error = x_error, .close = x_close, .ctx = x};
  return 0;
}

int xf_open(const xf_node *n, replay_source *out, char *err, size_t errlen) {
  err[0] = 0;
  if (open_node(n, out, err, errlen)) return -1;
  if (!n->reorders) return 0;
  xstate *x = sim_xcalloc(1, sizeof *x);
  x->in = *out;
  *out = (replay_source){.next = renumber_next, .error = x_error, .close = x_close, .ctx = x};
  return 0;
}

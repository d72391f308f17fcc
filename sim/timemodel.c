/* timemodel.c: the time model's simulation: host, streams, copy engines, allocator costs, the critical path. */
#include <limits.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hashmap.h"
#include "timemodel.h"
#include "copyfit.h"

/*
 * Reading guide. Events arrive in host issue order. For each one the host's clock is the
 * recorded launch time plus `shift`, the sum of what earlier calls gained or lost against
 * their recorded durations (applied when those calls return, in recorded time: a heap of
 * pending adjustments). The call then runs its rules (launch, copy, sync, allocate), placing
 * device operations on streams, host links and copy engines, and finally says how long it
 * kept the host. As it goes it attributes host time, in order, to what the host was doing or
 * waiting for: waits are explained by walking back the chain of device operations that
 * decided when the wait ended. Those attributions are the critical path: they tile the
 * predicted time exactly, which is what the breakdown and the largest items report.
 */

/* ---- constants ------------------------------------------------------------------------------ */

#define TM_OP_RING (1u << 16)      /* device operations kept for walks back along the critical path */
#define TM_HIST 32                 /* recent operations per stream, for dependency inference */
#define TM_DEP_TOLERANCE 2000      /* ns: a recorded start this close after a recorded end follows it */
#define TM_SEG_RING 1024           /* recent attributed segments, to split them at step ends */
#define TM_ITEM_CACHE_BITS 8       /* critical-path items looked up without the map */
#define TM_KERNEL_NAMES (1 << 20)  /* kernels with a name id below this find their item by it */
#define TM_FIXED_KINDS 16          /* event kinds whose unnamed items have a slot of their own (a power of two) */
#define TM_NFIXED (SIM_TM__NWHAT * TM_FIXED_KINDS) /* those slots: the first items, what * TM_FIXED_KINDS + kind */
#define TM_MAX_DEVICES 64
#define TM_MAX_ENGINES 16
#define TM_MAX_QUEUE 65536
#define TM_GIB 1073741824.0
#define TM_UNKNOWN INT64_MIN
#define TM_MAX_DUR INT64_C(4500000000000000) /* a scaled duration's bound (below 2^52 ns) */
#define TM_MAX_CHUNKS (UINT64_C(1) << 12)     /* the most chunks a staged copy is simulated in */

/*
 * The range the model follows, in which no sum or difference of its times can pass 2^63 ns. An
 * event's recorded times (ts, dev_ts) lie within +-2^61 ns (73 years: a clock counted from 1970
 * reaches it in 2043) and its recorded durations (dur, api_dur) below 2^56 ns (2.3 years); the
 * predicted host time keeps within 2^60 ns (36 years) of the recorded one, so that every host
 * time lies within +-TM_CLOCK_MAX; a device operation ends by TM_CLOCK_MAX. Two such times are
 * then less than 2^62.6 ns apart, with room for one event's own work past the bound (each of
 * its parts at most TM_MAX_DUR). Sums over operations that may overlap (busy time, blocked
 * time) are checked as they grow. Past any of these the model stops (tm_stop): the rest of the
 * trace is not predicted, and the result says at which event and why.
 */
#define TM_TIME_BITS 61
#define TM_DUR_BITS 56
#define TM_SHIFT_MAX (INT64_C(1) << 60)
#define TM_CLOCK_MAX ((INT64_C(1) << TM_TIME_BITS) + TM_SHIFT_MAX)

/* The per-event path, inlined into sim_tm_event even where gcc would not: the common path of
 * an event then makes no call. */
#define TM_HOT static inline __attribute__((always_inline))

enum { LINK_H2D = 0, LINK_D2H = 1, LINK_P2P = 2, LINK_NONE = -1, NLINKS = 3 };
enum { HEAP_ADJUST = 0, HEAP_STEP_END = 1 };

static const char *const class_names[SIM_TM__NCLASS] = {"host", "compute", "copies", "allocation", "sync"};
static const char *const what_names[SIM_TM__NWHAT] = {
  "kernel", "memset", "copy", "staging", "cudaMalloc", "cudaFree", "cuMemMap", "cuMemUnmap",
  "cudaMallocHost", "cudaFreeHost", "sync", "launch latency", "device wait", "host", "call",
};
static const int what_class[SIM_TM__NWHAT] = {
  SIM_TM_COMPUTE, SIM_TM_COMPUTE, SIM_TM_COPY, SIM_TM_COPY, SIM_TM_ALLOC, SIM_TM_ALLOC, SIM_TM_ALLOC, SIM_TM_ALLOC,
  SIM_TM_ALLOC, SIM_TM_ALLOC, SIM_TM_SYNC, SIM_TM_SYNC, SIM_TM_SYNC, SIM_TM_HOST, SIM_TM_HOST,
};
static const char *const bucket_names[SIM_TM__NCB] = {"h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable",
                                                      "d2d", "other"};

const char *sim_tm_class_name(int c) { return c >= 0 && c < SIM_TM__NCLASS ? class_names[c] : "?"; }
const char *sim_tm_what_name(int w) { return w >= 0 && w < SIM_TM__NWHAT ? what_names[w] : "?"; }
const char *sim_tm_copy_bucket_name(int b) { return b >= 0 && b < SIM_TM__NCB ? bucket_names[b] : "?"; }

/* ---- state ----------------------------------------------------------------------------------- */

/* A device operation, kept in a ring of the last TM_OP_RING for walks back along the critical
 * path (48 bytes: the ring is written at every launch). Operation `id` is in slot id % TM_OP_RING
 * while fewer than TM_OP_RING operations followed it (op_get). */
typedef struct tm_op {
  int64_t start, end;
  int64_t avail; /* when its launch made it available on the device */
  int64_t pred;  /* the operation whose end set its start, -1 none */
  int64_t seq;   /* its event */
  uint32_t item; /* its critical-path item */
  uint8_t kind;  /* its event's kind */
} tm_op;

typedef struct tm_stream {
  int device;
  int64_t id;
  int64_t ready, last_op; /* predicted end of its last operation */
  int64_t rec_ready;      /* recorded end of its last operation, TM_UNKNOWN */
  int64_t rec_last;       /* recorded start of its last operation, below 0 unknown */
  int64_t h_rec[TM_HIST], h_end[TM_HIST], h_op[TM_HIST];
  uint32_t h_n;
} tm_stream;

typedef struct tm_device {
  int used;
  int64_t link_free[NLINKS], link_op[NLINKS], link_rec[NLINKS];
  int64_t engine_free[TM_MAX_ENGINES], engine_op[TM_MAX_ENGINES], engine_rec[TM_MAX_ENGINES];
  int64_t bounce_free, bounce_op;
  /* The launch queue: the last launch_queue operations, oldest at q_old, in a ring from q to q_end.
   * Slots not yet used hold an operation that started at INT64_MIN: none waits for them. */
  struct tm_queued { int64_t start, rec, op; } *q, *q_old, *q_end;
} tm_device;

typedef struct tm_pending {
  int64_t t;    /* recorded host time */
  int type;     /* HEAP_* */
  int64_t value; /* adjustment (ns) or step index */
} tm_pending;

/* What a piece of predicted time is attributed to: a critical-path item's identity, its hash
 * (the map's key) worked out once, when the key is made. */
typedef struct tm_key {
  uint64_t hash;
  int64_t name;
  uint8_t what, kind, dir, mem;
} tm_key;

/* A piece of a walk back along the critical path: [t0, t1) for event seq, to item `item`. */
typedef struct tm_seg {
  int64_t t0, t1, seq;
  size_t item;
} tm_seg;

/* A critical-path item's running totals, touched at every attribution (what it is, the item
 * itself, is kept apart). cur: the time so far of the occurrence of event last_seq (at first
 * INT64_MAX, above any max, so that the first occurrence takes the rare branch that notes its
 * order); max: the largest finished one, of event max_seq; order: its place among the items by
 * first attribution. Laid out so that no two fields read together sit side by side: the
 * compiler would read them as one wide load, which has to wait for the two narrower stores
 * before it to complete. */
typedef struct tm_item_state {
  int64_t total, cur, count, last_seq, max, order, max_seq;
  int cls;
} tm_item_state;

struct sim_tm {
  sim_tm_config cfg;
  sim_device_profile dev; /* the profile, copied */
  sim_device_profile rec; /* the recorded device's, copied, when scaling */
  int scaling;            /* recorded durations are scaled from rec to dev */
  int unscaled;           /* kernel_scale is 1 */
  int plain;              /* kernels take their recorded durations: unscaled, not scaling, no scenario's */
  /* host */
  int started;
  int64_t shift, start, frontier;
  tm_pending *heap;
  size_t nheap, heap_cap;
  uint64_t catch_up; /* time_key() of the earliest pending entry's time, 0: every event (not started, stopped) */
  /* device */
  tm_device devs[TM_MAX_DEVICES];
  tm_stream *streams;
  size_t nstreams, streams_cap;
  sim_map stream_idx;
  tm_stream *last_stream;   /* the stream looked up last, NULL none (streams grow only in stream_lookup, which sets it) */
  tm_device *last_dev;      /* and its device */
  tm_op *ops;
  int64_t nops;
  int64_t last_end, last_end_op; /* the latest-ending operation on any device */
  int64_t queue;                 /* launch queue length in operations */
  sim_map pinned;                /* pinned host allocations: address -> bytes */
  /* attribution */
  int64_t cum[SIM_TM__NCLASS];
  sim_map item_idx;
  uint64_t item_cache_key[1 << TM_ITEM_CACHE_BITS]; /* item hash + 1, 0 empty */
  size_t item_cache_idx[1 << TM_ITEM_CACHE_BITS];
  uint32_t *kernel_item;  /* a kernel's item by its name id: index + 1, 0 not yet */
  size_t kernel_item_cap;
  tm_item_state *items;
  sim_tm_item *item_meta; /* what each item is (its totals are in items) */
  size_t nitems, items_cap;
  int64_t nattributed; /* items attributed some time so far */
  /* the ring of recent attributed segments, [t0, t1) of class cls, as three arrays: each store
   * then takes the ring's index as it is */
  int64_t seg_t0[TM_SEG_RING], seg_t1[TM_SEG_RING];
  uint8_t seg_cls[TM_SEG_RING];
  uint64_t nsegs;
  tm_seg *walk;
  size_t walk_cap;
  /* steps */
  sim_tm_step *steps;
  size_t nsteps, steps_cap;
  int64_t *step_rec_start; /* the recorded time each step began (steps_cap of them) */
  int64_t open_step; /* index, -1 none */
  int32_t step_counter;
  /* results kept as we go */
  sim_tm_result r;
};

/* ---- small helpers ---------------------------------------------------------------------------- */

/* The model stops at event seq: from now on every event takes sim_tm_event's rare branch, which
 * passes it over. */
__attribute__((cold, format(printf, 3, 4))) static void tm_stop(sim_tm *tm, int64_t seq, const char *fmt, ...) {
  if (tm->r.stopped) return;
  tm->r.stopped = 1;
  tm->r.stopped_seq = seq;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tm->r.stopped_why, sizeof tm->r.stopped_why, fmt, ap);
  va_end(ap);
  tm->catch_up = 0;
}

/* Adds d to a sum over operations that may overlap (no clock bounds it). */
static inline void sum_add(sim_tm *tm, int64_t *sum, int64_t d, int64_t seq) {
  if (__builtin_expect(__builtin_add_overflow(*sum, d, sum), 0))
    tm_stop(tm, seq, "the time it sums (busy or blocked) passes 2^63 ns");
}

/* Whether t is a recorded time, and d a recorded duration, the model follows (-1, unknown, is). */
static inline int time_ok(int64_t t) { return (uint64_t)t + (UINT64_C(1) << TM_TIME_BITS) < UINT64_C(1) << (TM_TIME_BITS + 1); }
static inline int dur_ok(int64_t d) { return (uint64_t)d + (UINT64_C(1) << TM_DUR_BITS) < UINT64_C(1) << (TM_DUR_BITS + 1); }

/* Stops the model at an event with a time or duration out of range, saying which. */
__attribute__((cold, noinline)) static void out_of_range(sim_tm *tm, const sim_event *ev) {
  const struct { const char *name; int64_t v; int ok; const char *range; } f[] = {
      {"ts", ev->ts, time_ok(ev->ts), "+-2^61 ns (73 years), the times"},
      {"dev_ts", ev->dev_ts, time_ok(ev->dev_ts), "+-2^61 ns (73 years), the times"},
      {"dur", ev->dur, dur_ok(ev->dur), "+-2^56 ns (2.3 years), the durations"},
      {"api_dur", ev->api_dur, dur_ok(ev->api_dur), "+-2^56 ns (2.3 years), the durations"}};
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    if (f[i].ok) continue;
    tm_stop(tm, ev->seq, "its %s of %" PRId64 " ns lies outside %s the model follows", f[i].name, f[i].v, f[i].range);
    return;
  }
}

/* Whether the event's recorded times and durations are all in the model's range; when one is
 * not, the model stops at the event. Paths that read only some of them check those inline and
 * come here when one is out. */
static inline int in_range(sim_tm *tm, const sim_event *ev) {
  if (time_ok(ev->ts) && time_ok(ev->dev_ts) && dur_ok(ev->dur) && dur_ok(ev->api_dur)) return 1;
  out_of_range(tm, ev);
  return 0;
}

static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* count calls of `base` each plus `ns_per_gib` for every GiB of `bytes`, bounded as a kernel's time
 * (a profile edited to absurd costs asks more) */
static inline int64_t call_cost(uint64_t count, int64_t base, int64_t ns_per_gib, uint64_t bytes) {
  double per = (double)ns_per_gib * ((double)bytes / TM_GIB) + 0.5;
  if (!((double)count * (double)base + per < (double)TM_MAX_DUR)) return TM_MAX_DUR;
  return (int64_t)count * base + (int64_t)per;
}

static inline int64_t at_rate(uint64_t bytes, double bytes_per_s) {
  double ns = bytes_per_s > 0 ? (double)bytes * 1e9 / bytes_per_s + 0.5 : 0;
  return ns < (double)TM_MAX_DUR ? (int64_t)ns : TM_MAX_DUR; /* a profile of 1 B/s asks more */
}

/* The host time a call took as recorded: api_dur, or for syncs and API calls their dur. */
static int64_t recorded_call(const sim_event *ev) {
  if (ev->api_dur >= 0) return ev->api_dur;
  if ((ev->kind == SIM_EV_SYNC || ev->kind == SIM_EV_API) && ev->dur > 0) return ev->dur;
  return -1;
}

/* Whether operation id is in the ring after nops operations: committed (below nops) and not yet
 * overwritten (slots are written in id order). Ids start at TM_OP_RING, so none (-1) and every
 * id before the ring's are out of range alike. */
static inline int op_held(int64_t nops, int64_t id) { return (uint64_t)(nops - 1 - id) < TM_OP_RING; }

static inline tm_op *op_get(sim_tm *tm, int64_t id) {
  return op_held(tm->nops, id) ? &tm->ops[(uint64_t)id & (TM_OP_RING - 1)] : NULL;
}

/* ---- the pending-adjustment heap (recorded time order; adjustments before step ends) -------- */

static int pend_less(const tm_pending *a, const tm_pending *b) {
  return a->t != b->t ? a->t < b->t : a->type < b->type;
}

/* The earliest pending entry's time, INT64_MAX when none is. */
static inline int64_t heap_next(const sim_tm *tm) { return tm->nheap ? tm->heap[0].t : INT64_MAX; }

/* A recorded time as sim_tm_event compares it with tm->catch_up: the times the model follows
 * (+-2^61 ns) in order from 0 to 2^62, every other above them. An event then takes the rare
 * branch when a pending entry is due or its time is out of range, in one comparison. */
static inline uint64_t time_key(int64_t t) {
  const int64_t lim = INT64_C(1) << TM_TIME_BITS;
  return t < -lim ? 0 : t >= lim ? (uint64_t)lim << 1 : (uint64_t)(t + lim);
}

static void heap_push(sim_tm *tm, int64_t t, int type, int64_t value) {
  sim_grow((void **)&tm->heap, &tm->heap_cap, tm->nheap + 1, sizeof *tm->heap);
  size_t i = tm->nheap++;
  tm->heap[i] = (tm_pending){t, type, value};
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!pend_less(&tm->heap[i], &tm->heap[p])) break;
    tm_pending x = tm->heap[i];
    tm->heap[i] = tm->heap[p];
    tm->heap[p] = x;
    i = p;
  }
  if (tm->started && !tm->r.stopped) tm->catch_up = time_key(heap_next(tm));
}

static tm_pending heap_pop(sim_tm *tm) {
  tm_pending top = tm->heap[0];
  tm->heap[0] = tm->heap[--tm->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < tm->nheap && pend_less(&tm->heap[l], &tm->heap[m])) m = l;
    if (r < tm->nheap && pend_less(&tm->heap[r], &tm->heap[m])) m = r;
    if (m == i) break;
    tm_pending x = tm->heap[i];
    tm->heap[i] = tm->heap[m];
    tm->heap[m] = x;
    i = m;
  }
  if (tm->started && !tm->r.stopped) tm->catch_up = time_key(heap_next(tm));
  return top;
}

/* ---- attribution: the critical path ------------------------------------------------------------- */

static inline tm_key key_of(int what, int kind, int64_t name, int dir, int mem) {
  uint64_t hash = ((uint64_t)name & ((UINT64_C(1) << 40) - 1)) | ((uint64_t)(kind & 0xff) << 40) |
                  ((uint64_t)(what & 0xf) << 48) | ((uint64_t)(dir & 0xf) << 52) | ((uint64_t)(mem & 0xf) << 56);
  return (tm_key){hash, name, (uint8_t)what, (uint8_t)kind, (uint8_t)dir, (uint8_t)mem};
}

/* A critical-path item missing from the cache (seen for the first time, or evicted): its index.
 * Kept out of line: the attribution's common path then needs fewer registers. */
__attribute__((noinline, cold)) static size_t item_new(sim_tm *tm, const tm_key *k) {
  int existed;
  uint64_t *slot = sim_map_put(&tm->item_idx, k->hash, &existed);
  if (!existed) {
    size_t cap = tm->items_cap;
    sim_grow((void **)&tm->items, &tm->items_cap, tm->nitems + 1, sizeof *tm->items);
    if (tm->items_cap != cap) tm->item_meta = sim_xrealloc(tm->item_meta, tm->items_cap * sizeof *tm->item_meta);
    /* last_seq: no event's (seqs are -1 or more), so the first attribution starts an occurrence */
    tm->items[tm->nitems] =
        (tm_item_state){.last_seq = INT64_MIN, .cur = INT64_MAX, .order = -1, .cls = what_class[k->what]};
    tm->item_meta[tm->nitems] = (sim_tm_item){.cls = what_class[k->what], .what = k->what, .kind = k->kind,
                                              .dir = k->dir, .mem = k->mem, .name = k->name};
    *slot = tm->nitems++;
  }
  return (size_t)*slot;
}

/* The slot of the item of `what` for an event of kind `kind` (< TM_FIXED_KINDS): made with the model. */
TM_HOT size_t item_fixed(int what, int kind) { return (size_t)what * TM_FIXED_KINDS + (size_t)kind; }

/* The items without name, direction or memory kind of the first TM_FIXED_KINDS event kinds,
 * most attributions' (the host's gaps, calls by kind, device waits, launch latency), made with
 * the model at fixed indices: an attribution to one needs no lookup. */
static void items_fixed_init(sim_tm *tm) {
  sim_grow((void **)&tm->items, &tm->items_cap, TM_NFIXED, sizeof *tm->items);
  tm->item_meta = sim_xrealloc(tm->item_meta, tm->items_cap * sizeof *tm->item_meta);
  for (int what = 0; what < SIM_TM__NWHAT; what++) {
    for (int kind = 0; kind < TM_FIXED_KINDS; kind++) {
      size_t i = item_fixed(what, kind);
      tm->items[i] = (tm_item_state){.last_seq = INT64_MIN, .cur = INT64_MAX, .order = -1, .cls = what_class[what]};
      tm->item_meta[i] = (sim_tm_item){.cls = what_class[what], .what = what, .kind = kind};
    }
  }
  tm->nitems = TM_NFIXED;
}

/* The index of k's item, made when first asked for (the items are reported in the order they
 * were first attributed time, kept in `order`). Items with neither name nor direction nor
 * memory kind, most of them, have a slot each; the others go through a small direct-mapped
 * cache in front of the map (most attributions repeat a few items). */
static inline size_t item_index(sim_tm *tm, const tm_key *k) {
  if (!(k->hash & ~(((uint64_t)TM_FIXED_KINDS - 1) << 40 | UINT64_C(0xf) << 48)))
    return item_fixed(k->what, k->kind & (TM_FIXED_KINDS - 1));
  uint64_t hash = k->hash;
  uint64_t c = (hash * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - TM_ITEM_CACHE_BITS);
  if (tm->item_cache_key[c] != hash + 1) {
    tm->item_cache_idx[c] = item_new(tm, k);
    tm->item_cache_key[c] = hash + 1;
  }
  return tm->item_cache_idx[c];
}

/* An occurrence of item s ended that is the largest so far, or (cur's start value) s is
 * attributed time for the first time. */
__attribute__((noinline, cold)) static void item_new_max(sim_tm *tm, tm_item_state *s) {
  if (s->count) s->max = s->cur, s->max_seq = s->last_seq;
  else s->order = tm->nattributed++;
}

/* Adds dt of event seq to item s. Each item keeps its total, its occurrences (the attributions
 * to one event make one) and the largest. */
TM_HOT void item_add(sim_tm *tm, tm_item_state *s, int64_t dt, int64_t seq) {
  s->total += dt;
  if (seq != s->last_seq) { /* a new occurrence (an item's first too: see item_new) */
    if (__builtin_expect(s->cur > s->max, 0)) item_new_max(tm, s);
    s->cur = dt;
    s->last_seq = seq;
    s->count++;
  } else {
    s->cur += dt;
  }
}

/* Notes the n-th attributed segment, [t0, t1) of class cls, in the ring of recent ones. */
TM_HOT void seg_note(sim_tm *tm, uint64_t n, int64_t t0, int64_t t1, int cls) {
  uint64_t i = n & (TM_SEG_RING - 1);
  tm->seg_t0[i] = t0;
  tm->seg_t1[i] = t1;
  tm->seg_cls[i] = (uint8_t)cls;
}

/* Attributes [t0, t1) (non-empty, from the frontier on) to item idx of class cls, for event seq.
 * Callers that know the item's class pass it as a constant. */
TM_HOT void emit_to_cls(sim_tm *tm, int64_t t0, int64_t t1, size_t idx, int cls, int64_t seq) {
  int64_t dt = t1 - t0;
  tm->frontier = t1;
  tm->cum[cls] += dt;
  item_add(tm, &tm->items[idx], dt, seq);
  seg_note(tm, tm->nsegs++, t0, t1, cls);
}

TM_HOT void emit_to(sim_tm *tm, int64_t t0, int64_t t1, size_t idx, int64_t seq) {
  emit_to_cls(tm, t0, t1, idx, tm->items[idx].cls, seq);
}

/* Attributes [t0, t1) of predicted time to k; the part before the frontier is already explained. */
TM_HOT void emit(sim_tm *tm, int64_t t0, int64_t t1, const tm_key *k, int64_t seq) {
  if (t0 < tm->frontier) t0 = tm->frontier;
  if (t1 <= t0) return;
  emit_to(tm, t0, t1, item_index(tm, k), seq);
}

/* The item of `what` without name, direction or memory kind for an event of kind `kind`: its
 * fixed slot, or (a kind past those) through the item cache. */
TM_HOT size_t item_unnamed(sim_tm *tm, int what, int kind) {
  if (__builtin_expect((unsigned)kind < TM_FIXED_KINDS, 1)) return item_fixed(what, kind);
  tm_key k = key_of(what, kind, 0, 0, 0);
  return item_index(tm, &k);
}

/* emit() for an item without name, direction or memory kind (its class is its what's). */
TM_HOT void emit_fixed(sim_tm *tm, int64_t t0, int64_t t1, int what, int kind, int64_t seq) {
  if (t0 < tm->frontier) t0 = tm->frontier;
  if (t1 <= t0) return;
  emit_to_cls(tm, t0, t1, item_unnamed(tm, what, kind), what_class[what], seq);
}

/* Attributes [t0, t1) to `what` done by event ev (a call, a sync: named after the call). */
TM_HOT void emit_what(sim_tm *tm, int64_t t0, int64_t t1, int what, const sim_event *ev) {
  if (t1 <= t0 || t1 <= tm->frontier) return;
  int named = (what == SIM_TM_W_CALL && ev->kind == SIM_EV_API) || what == SIM_TM_W_SYNC;
  if (!named) {
    emit_fixed(tm, t0, t1, what, ev->kind, ev->seq);
    return;
  }
  tm_key k = key_of(what, ev->kind, ev->name, 0, 0);
  emit(tm, t0, t1, &k, ev->seq);
}

/* The cumulative attribution at predicted time e (segments after e taken back out). */
static void cum_at(sim_tm *tm, int64_t e, int64_t out[SIM_TM__NCLASS]) {
  memcpy(out, tm->cum, sizeof tm->cum);
  uint64_t n = tm->nsegs < TM_SEG_RING ? tm->nsegs : TM_SEG_RING;
  for (uint64_t j = 0; j < n; j++) {
    uint64_t i = (tm->nsegs - 1 - j) % TM_SEG_RING;
    if (tm->seg_t1[i] <= e) break;
    out[tm->seg_cls[i]] -= tm->seg_t1[i] - max64(tm->seg_t0[i], e);
  }
}

/* A walk's pieces as it finds them, last first: kept in registers while it runs (tm->walk is
 * the buffer, grown out of line). */
typedef struct tm_walk {
  tm_seg *w;
  size_t n, cap;
} tm_walk;

__attribute__((noinline)) static tm_seg *walk_grow(sim_tm *tm, size_t n) {
  sim_grow((void **)&tm->walk, &tm->walk_cap, n + 1, sizeof *tm->walk);
  return tm->walk;
}

static inline void walk_push(sim_tm *tm, tm_walk *wk, int64_t t0, int64_t t1, size_t item, int64_t seq) {
  if (__builtin_expect(wk->n == wk->cap, 0)) {
    wk->w = walk_grow(tm, wk->n);
    wk->cap = tm->walk_cap;
  }
  wk->w[wk->n++] = (tm_seg){t0, t1, seq, item};
}

/* A piece of a walk attributed to an item without name, direction or memory kind. */
static inline void walk_fixed(sim_tm *tm, tm_walk *wk, int64_t t0, int64_t t1, int what, int kind, int64_t seq) {
  if (t1 > t0) walk_push(tm, wk, t0, t1, item_unnamed(tm, what, kind), seq);
}

/* The item of a device operation of event ev (what: SIM_TM_W_KERNEL, _MEMSET or _COPY), through
 * the item cache; a kernel's is then kept by its name id too. */
__attribute__((noinline)) static uint32_t op_item_lookup(sim_tm *tm, const sim_event *ev, int what, int dir, int mem) {
  tm_key k = key_of(what, ev->kind, what == SIM_TM_W_KERNEL || what == SIM_TM_W_MEMSET ? ev->name : 0, dir, mem);
  size_t idx = item_index(tm, &k);
  /* a kernel's key is its name alone: its kind is always a kernel's, it has no dir or mem */
  if (what == SIM_TM_W_KERNEL && ev->name >= 0 && ev->name < TM_KERNEL_NAMES) {
    size_t n = (size_t)ev->name;
    if (n >= tm->kernel_item_cap) {
      size_t cap = tm->kernel_item_cap;
      sim_grow((void **)&tm->kernel_item, &tm->kernel_item_cap, n + 1, sizeof *tm->kernel_item);
      memset(tm->kernel_item + cap, 0, (tm->kernel_item_cap - cap) * sizeof *tm->kernel_item);
    }
    tm->kernel_item[n] = (uint32_t)idx + 1;
  }
  return (uint32_t)idx; /* items are far fewer than 2^32: each holds a distinct name or kind */
}

/* The item of a device operation: a kernel's by its name id once it has been looked up. */
TM_HOT uint32_t op_item(sim_tm *tm, const sim_event *ev, int what, int dir, int mem) {
  if (what == SIM_TM_W_KERNEL && (uint64_t)ev->name < tm->kernel_item_cap) {
    uint32_t x = tm->kernel_item[ev->name];
    if (x) return x - 1;
  }
  return op_item_lookup(tm, ev, what, dir, mem);
}

/* Attributes the n pieces of a walk, in time order (the walk found them last first): emit_to's
 * work, with the frontier and the ring's count kept in registers. */
static void walk_emit(sim_tm *tm, const tm_seg *w, size_t n) {
  int64_t f = tm->frontier;
  uint64_t nsegs = tm->nsegs;
  for (size_t i = n; i-- > 0;) {
    tm_seg g = w[i];
    int64_t t0 = g.t0 < f ? f : g.t0;
    if (g.t1 <= t0) continue;
    tm_item_state *s = &tm->items[g.item];
    int cls = s->cls;
    tm->cum[cls] += g.t1 - t0;
    item_add(tm, s, g.t1 - t0, g.seq);
    seg_note(tm, nsegs++, t0, g.t1, cls);
    f = g.t1;
  }
  tm->frontier = f;
  tm->nsegs = nsegs;
}

/* Operations are kernels, memsets and copies: their device waits' and launches' items are fixed. */
_Static_assert(SIM_EV_KERNEL < TM_FIXED_KINDS && SIM_EV_MEMSET < TM_FIXED_KINDS && SIM_EV_MEMCPY < TM_FIXED_KINDS,
               "an operation's kind has fixed items");

/*
 * The host waited from lo to hi for device operation `id` (its end, or its start when hi is
 * past its end: `tail` names that part). Walks back the chain of operations that decided when
 * it happened, down to lo, and attributes each piece in time order.
 */
static void wait_for(sim_tm *tm, int64_t lo, int64_t hi, int64_t id, int tail, const sim_event *ev) {
  if (hi <= max64(lo, tm->frontier)) return;
  lo = max64(lo, tm->frontier);
  tm_walk wk = {tm->walk, 0, tm->walk_cap};
  int64_t t = hi;
  tm_op *cur = op_get(tm, id);
  if (cur && t > cur->end) {
    int64_t t0 = max64(cur->end, lo);
    if (tail == SIM_TM_W_SYNC) {
      tm_key k = key_of(tail, ev->kind, ev->name, 0, 0);
      if (t > t0) walk_push(tm, &wk, t0, t, item_index(tm, &k), ev->seq);
    } else {
      walk_fixed(tm, &wk, t0, t, tail, ev->kind, ev->seq);
    }
    t = max64(cur->end, lo);
  }
  const int64_t nops = tm->nops; /* op_get, with the ring in registers: the walk writes only its buffer */
  tm_op *const ops = tm->ops;
  while (cur && t > lo) {
    int64_t s0 = max64(cur->start, lo);
    if (t > s0) { /* the operation ran */
      walk_push(tm, &wk, s0, t, cur->item, cur->seq);
      t = s0;
    }
    if (t <= lo) break;
    if (op_held(nops, cur->pred)) {
      tm_op *p = &ops[(uint64_t)cur->pred & (TM_OP_RING - 1)];
      int64_t pe = max64(min64(p->end, t), lo);
      if (t > pe) walk_push(tm, &wk, pe, t, item_fixed(SIM_TM_W_DEVICE_WAIT, cur->kind), cur->seq);
      t = pe;
      cur = p;
    } else {
      int64_t a = max64(cur->avail, lo);
      if (t > a) walk_push(tm, &wk, a, t, item_fixed(SIM_TM_W_DEVICE_WAIT, cur->kind), cur->seq);
      t = a;
      int64_t l = max64(cur->avail - tm->dev.launch_latency, lo);
      if (t > l) walk_push(tm, &wk, l, t, item_fixed(SIM_TM_W_LAUNCH, cur->kind), cur->seq);
      t = l;
      break;
    }
  }
  walk_fixed(tm, &wk, lo, t, SIM_TM_W_DEVICE_WAIT, ev->kind, ev->seq);
  walk_emit(tm, wk.w, wk.n);
}

/* ---- steps ------------------------------------------------------------------------------------ */

static void step_close(sim_tm *tm, int64_t idx, int64_t e, int64_t end_seq, int64_t recorded) {
  sim_tm_step *s = &tm->steps[idx];
  if (tm->frontier < e) {
    emit_fixed(tm, tm->frontier, e, SIM_TM_W_HOST, SIM_EV_MARKER, end_seq);
  }
  int64_t now[SIM_TM__NCLASS];
  cum_at(tm, e, now);
  for (int c = 0; c < SIM_TM__NCLASS; c++) s->breakdown[c] = now[c] - s->breakdown[c];
  s->end_ns = e;
  s->end_seq = end_seq;
  if (recorded >= 0) s->recorded_ns = recorded;
  s->complete = 1;
  if (tm->open_step == idx) tm->open_step = -1;
}

static void step_open(sim_tm *tm, const sim_event *ev, int64_t h) {
  size_t cap = tm->steps_cap;
  sim_grow((void **)&tm->steps, &tm->steps_cap, tm->nsteps + 1, sizeof *tm->steps);
  if (tm->steps_cap != cap) tm->step_rec_start = sim_xrealloc(tm->step_rec_start, tm->steps_cap * sizeof(int64_t));
  tm->step_rec_start[tm->nsteps] = ev->ts;
  sim_tm_step *s = &tm->steps[tm->nsteps];
  memset(s, 0, sizeof *s);
  s->step = ev->step >= 0 ? ev->step : tm->step_counter;
  tm->step_counter = s->step < INT32_MAX ? s->step + 1 : s->step; /* the next unnumbered step's number */
  s->begin_seq = ev->seq;
  s->end_seq = -1;
  s->start_ns = h;
  s->end_ns = h;
  s->recorded_ns = -1;
  cum_at(tm, h, s->breakdown); /* the cumulative values at the start; turned into a difference at the end */
  tm->open_step = (int64_t)tm->nsteps++;
  if (ev->dur > 0) {
    s->recorded_ns = ev->dur;
    heap_push(tm, ev->ts + ev->dur, HEAP_STEP_END, tm->open_step);
  }
}

__attribute__((noinline)) static void on_marker(sim_tm *tm, const sim_event *ev, int64_t h) {
  if (ev->flags & SIM_EVF_STEP_END) {
    if (tm->open_step >= 0) {
      sim_tm_step *s = &tm->steps[tm->open_step];
      int64_t rec = ev->dur > 0 ? ev->dur : s->recorded_ns >= 0 ? s->recorded_ns : ev->ts - tm->step_rec_start[tm->open_step];
      step_close(tm, tm->open_step, h, ev->seq, rec);
    }
  }
  if (ev->flags & SIM_EVF_STEP_BEGIN) {
    /* A step still open without a recorded end ends where the next begins. */
    if (tm->open_step >= 0 && tm->steps[tm->open_step].recorded_ns < 0)
      step_close(tm, tm->open_step, h, ev->seq, ev->ts - tm->step_rec_start[tm->open_step]);
    step_open(tm, ev, h);
  }
}

/* Applies what recorded time up to t holds: calls that returned, steps that ended (seq: the
 * event that reached t). */
static void advance_to(sim_tm *tm, int64_t t, int64_t seq) {
  while (tm->nheap && tm->heap[0].t <= t) {
    tm_pending p = heap_pop(tm);
    if (p.type == HEAP_ADJUST) {
      tm->shift += p.value; /* each within +-2^62.6, the shift within +-2^60 before */
      if (tm->shift > TM_SHIFT_MAX || tm->shift < -TM_SHIFT_MAX) {
        tm_stop(tm, seq, "the predicted host time runs more than 2^60 ns (36 years) from the recorded one");
        return;
      }
    } else if (tm->started) {
      sim_tm_step *s = &tm->steps[p.value];
      if (!s->complete) step_close(tm, p.value, p.t + tm->shift, s->end_seq, s->recorded_ns);
    }
  }
}

/* ---- device state --------------------------------------------------------------------------- */

static void device_init(sim_tm *tm, tm_device *dv) {
  dv->used = 1;
  {
    for (int k = 0; k < NLINKS; k++) dv->link_op[k] = -1, dv->link_rec[k] = TM_UNKNOWN, dv->link_free[k] = INT64_MIN;
    for (int k = 0; k < TM_MAX_ENGINES; k++)
      dv->engine_op[k] = -1, dv->engine_rec[k] = TM_UNKNOWN, dv->engine_free[k] = INT64_MIN;
    dv->bounce_free = INT64_MIN;
    dv->bounce_op = -1;
    dv->q = sim_xmalloc((size_t)tm->queue * sizeof *dv->q);
    for (int64_t k = 0; k < tm->queue; k++) dv->q[k] = (struct tm_queued){INT64_MIN, -1, -1};
    dv->q_old = dv->q;
    dv->q_end = dv->q + tm->queue;
  }
}

static inline tm_device *device_of(sim_tm *tm, const sim_event *ev, int *index) {
  int d = ev->device >= 0 && ev->device < TM_MAX_DEVICES ? ev->device : 0;
  tm_device *dv = &tm->devs[d];
  if (!dv->used) device_init(tm, dv);
  if (index) *index = d;
  return dv;
}

/* Streams are found by a key of their device and handle. Handles are any 64-bit value, so two
 * streams can share a key: the second takes the next key of the chain, and a look-up follows the
 * chain until it meets its own stream (or a key no stream holds). */
static uint64_t stream_key(int device, int64_t stream) { return (uint64_t)stream ^ ((uint64_t)device << 56); }
static uint64_t stream_key_next(uint64_t key) { return key * UINT64_C(0x9E3779B97F4A7C15) + 1; }

static int stream_is(const tm_stream *s, int device, int64_t stream) { return s->id == stream && s->device == device; }

/* The stream, made when there is none. */
static tm_stream *stream_lookup(sim_tm *tm, int device, int64_t stream) {
  int existed;
  uint64_t *slot;
  for (uint64_t key = stream_key(device, stream);; key = stream_key_next(key)) {
    slot = sim_map_put(&tm->stream_idx, key, &existed);
    if (!existed || stream_is(&tm->streams[*slot], device, stream)) break;
  }
  if (!existed) {
    sim_grow((void **)&tm->streams, &tm->streams_cap, tm->nstreams + 1, sizeof *tm->streams);
    tm_stream *s = &tm->streams[tm->nstreams];
    memset(s, 0, sizeof *s);
    s->device = device;
    s->id = stream;
    s->ready = INT64_MIN;
    s->last_op = -1;
    s->rec_ready = s->rec_last = TM_UNKNOWN;
    *slot = tm->nstreams++;
  }
  tm->last_stream = &tm->streams[*slot];
  return tm->last_stream;
}

/* stream_of() for another stream than the last: its device set up, the stream found or made. */
__attribute__((noinline)) static tm_stream *stream_switch(sim_tm *tm, const sim_event *ev, int d) {
  tm->last_dev = device_of(tm, ev, NULL);
  return stream_lookup(tm, d, ev->stream);
}

/* The stream of a device operation, and its device (*dv): most events repeat the last one. */
TM_HOT tm_stream *stream_of(sim_tm *tm, const sim_event *ev, tm_device **dv) {
  int d = ev->device >= 0 && ev->device < TM_MAX_DEVICES ? ev->device : 0;
  tm_stream *st = tm->last_stream;
  if (!st || !stream_is(st, d, ev->stream)) st = stream_switch(tm, ev, d);
  *dv = tm->last_dev;
  return st;
}

/* The stream, or NULL when the device has none of that handle. */
static tm_stream *stream_find(sim_tm *tm, int device, int64_t stream) {
  for (uint64_t key = stream_key(device, stream);; key = stream_key_next(key)) {
    uint64_t *slot = sim_map_get(&tm->stream_idx, key);
    if (!slot) return NULL;
    if (stream_is(&tm->streams[*slot], device, stream)) return &tm->streams[*slot];
  }
}

/* The operation on another stream of the device whose recorded end is the latest at or just
 * before rec_start and after `after`: what a start the stream cannot explain was waiting for. */
static const tm_stream *infer_dependency(sim_tm *tm, const tm_stream *self, int64_t rec_start, int64_t after,
                                         uint32_t *slot) {
  const tm_stream *best = NULL;
  int64_t best_end = after;
  for (size_t i = 0; i < tm->nstreams; i++) {
    const tm_stream *s = &tm->streams[i];
    if (s == self || s->device != self->device || !s->h_n) continue;
    uint32_t n = s->h_n < TM_HIST ? s->h_n : TM_HIST;
    for (uint32_t j = 0; j < n; j++) { /* newest first; recorded ends never decrease on a stream */
      uint32_t k = (s->h_n - 1 - j) % TM_HIST;
      int64_t e = s->h_rec[k];
      if (e == TM_UNKNOWN) continue;
      if (e <= rec_start + TM_DEP_TOLERANCE) {
        if (e > best_end) best = s, best_end = e, *slot = k;
        break;
      }
    }
  }
  return best;
}

typedef struct op_place {
  int64_t avail;    /* when the launch makes it available */
  int link;         /* LINK_* */
  int engine;       /* needs a copy engine */
  uint64_t bounce;  /* waits for the staging buffer */
  int64_t start, pred, engine_k;
  int64_t rec_end;  /* its recorded end, TM_UNKNOWN */
  int before;       /* the recording shows it ran before the stream's last placed operation */
} op_place;

/* An operation whose recorded start rec_start came later than the recording's own rules allow
 * (rec_ready) waited for something: an operation of another stream the recording shows it
 * followed (inferred), or what the trace does not show (kept). Its start, from t, and the
 * operation that set it (returned in registers: the caller's stay there). */
typedef struct tm_start {
  int64_t t, pred;
} tm_start;

__attribute__((noinline)) static tm_start op_waited(sim_tm *tm, const tm_stream *st, const sim_event *ev,
                                                   int64_t rec_ready, int64_t t, int64_t pred) {
  int64_t rec_start = ev->dev_ts;
  if (rec_start > rec_ready + TM_DEP_TOLERANCE && tm->cfg.infer_dependencies) {
    uint32_t k = 0;
    const tm_stream *dep = infer_dependency(tm, st, rec_start, rec_ready, &k);
    if (dep) {
      rec_ready = dep->h_rec[k];
      tm->r.inferred_dependencies++;
      if (dep->h_end[k] > t) t = dep->h_end[k], pred = dep->h_op[k];
    }
  }
  if (rec_start > rec_ready && tm->cfg.keep_device_waits) {
    t += rec_start - rec_ready;
    tm->r.device_waits++;
    sum_add(tm, &tm->r.device_wait_ns, rec_start - rec_ready, ev->seq);
  }
  return (tm_start){t, pred};
}

/* Decides when an operation of stream st can start (the rules in the order the device applies them). */
TM_HOT void op_start(sim_tm *tm, tm_device *dv, tm_stream *st, const sim_event *ev, op_place *p) {
  int64_t t = p->avail, pred = -1, rec_start = ev->dev_ts;
  /* An operation that the recording shows started before the stream's last placed one (it was
   * launched before the trace began, and the trace places it at its device start) ran ahead of
   * it: it keeps its own time and does not hold the stream back. */
  p->before = rec_start >= 0 && rec_start < st->rec_last; /* an unknown rec_last is below 0 */
  if (!p->before && st->ready > t) t = st->ready, pred = st->last_op;
  if (p->bounce && dv->bounce_free > t) t = dv->bounce_free, pred = dv->bounce_op;
  if (p->link != LINK_NONE && dv->link_free[p->link] > t) t = dv->link_free[p->link], pred = dv->link_op[p->link];
  p->engine_k = -1;
  if (p->engine) {
    int n = tm->dev.copy_engines < TM_MAX_ENGINES ? tm->dev.copy_engines : TM_MAX_ENGINES;
    int k = 0;
    for (int j = 1; j < n; j++)
      if (dv->engine_free[j] < dv->engine_free[k]) k = j;
    p->engine_k = k;
    if (dv->engine_free[k] > t) t = dv->engine_free[k], pred = dv->engine_op[k];
  }
  /* what the recording says it could have started at, by the same rules (nothing to compare
   * with when it ran ahead of the stream) */
  if (rec_start >= 0 && ev->ts >= 0 && !p->before) {
    int64_t rec_ready = max64(st->rec_ready, ev->ts + tm->dev.launch_latency);
    if (p->link != LINK_NONE && dv->link_rec[p->link] != TM_UNKNOWN)
      rec_ready = max64(rec_ready, dv->link_rec[p->link]);
    if (p->engine && dv->engine_rec[p->engine_k] != TM_UNKNOWN)
      rec_ready = max64(rec_ready, dv->engine_rec[p->engine_k]);
    if (rec_start > rec_ready) {
      tm_start w = op_waited(tm, st, ev, rec_ready, t, pred);
      t = w.t, pred = w.pred;
    }
  }
  p->start = t;
  p->pred = pred;
  p->rec_end = rec_start >= 0 && ev->dur >= 0 ? rec_start + ev->dur : TM_UNKNOWN;
}

/* Records a placed operation [p->start, end), of critical-path item `item` (op_item), everywhere
 * it occupies. Returns its id. */
TM_HOT int64_t op_commit(sim_tm *tm, tm_device *dv, tm_stream *st, const sim_event *ev, const op_place *p, int64_t end,
                        uint32_t item) {
  int64_t id = tm->nops++;
  tm_op *o = &tm->ops[(uint64_t)id & (TM_OP_RING - 1)];
  *o = (tm_op){.start = p->start, .end = end, .avail = p->avail, .pred = p->pred, .seq = ev->seq,
               .item = item, .kind = ev->kind};
  if (p->link != LINK_NONE && end > dv->link_free[p->link]) {
    dv->link_free[p->link] = end;
    dv->link_op[p->link] = id;
    dv->link_rec[p->link] = p->rec_end;
  }
  if (p->engine_k >= 0 && end > dv->engine_free[p->engine_k]) {
    dv->engine_free[p->engine_k] = end;
    dv->engine_op[p->engine_k] = id;
    dv->engine_rec[p->engine_k] = p->rec_end;
  }
  if (end > tm->last_end) {
    tm->last_end = end, tm->last_end_op = id;
    if (__builtin_expect(end > TM_CLOCK_MAX, 0))
      tm_stop(tm, ev->seq, "a device operation ends past 2^61 + 2^60 ns (110 years)");
  }
  if (p->before) return id; /* ran ahead of what the stream already holds: the stream is unchanged */
  st->ready = end;
  st->last_op = id;
  st->rec_ready = p->rec_end;
  st->rec_last = ev->dev_ts;
  uint32_t h = st->h_n++ % TM_HIST;
  st->h_rec[h] = p->rec_end;
  st->h_end[h] = end;
  st->h_op[h] = id;
  *dv->q_old = (struct tm_queued){p->start, ev->dev_ts, id};
  if (++dv->q_old == dv->q_end) dv->q_old = dv->q;
  return id;
}

/* The latest predicted end over the streams a synchronization waits for (device < 0: all).
 * With rec_return known, streams the recording shows still busy when it returned are left out. */
static int64_t device_ready(sim_tm *tm, int device, int64_t rec_return, int64_t *op) {
  int64_t t = INT64_MIN;
  *op = -1;
  for (size_t i = 0; i < tm->nstreams; i++) {
    const tm_stream *s = &tm->streams[i];
    if (device >= 0 && s->device != device) continue;
    if (rec_return != TM_UNKNOWN && s->rec_ready != TM_UNKNOWN && s->rec_ready > rec_return + TM_DEP_TOLERANCE)
      continue;
    if (s->ready > t) t = s->ready, *op = s->last_op;
  }
  return t;
}

/* Waits in a call from t until `ready` (the end of operation op); returns the new time. */
static int64_t host_wait(sim_tm *tm, int64_t t, int64_t ready, int64_t op, const sim_event *ev) {
  if (ready <= t) return t;
  wait_for(tm, t, ready, op, SIM_TM_W_DEVICE_WAIT, ev);
  return ready;
}

/* ---- the rules ------------------------------------------------------------------------------- */

/*
 * The launch queue: a launch blocks while launch_queue operations are still waiting to start.
 * *rec_blocked says whether the recording, by the same rule, was blocked then (its recorded
 * duration then holds the wait, which the model replaces with its own).
 */
static int64_t launch_wait(sim_tm *tm, int64_t h, const sim_event *ev, const struct tm_queued *q);

TM_HOT int64_t launch_queue(sim_tm *tm, tm_device *dv, int64_t h, const sim_event *ev, int *rec_blocked) {
  *rec_blocked = 0;
  const struct tm_queued *q = dv->q_old; /* the oldest of the last launch_queue (or an unused slot) */
  if (ev->ts >= 0 && q->rec > ev->ts) *rec_blocked = 1; /* a recorded start, then: above 0 */
  return q->start <= h ? h : launch_wait(tm, h, ev, q);
}

/* A launch waits for room in the queue: until the oldest queued operation starts. */
static int64_t launch_wait(sim_tm *tm, int64_t h, const sim_event *ev, const struct tm_queued *q) {
  int64_t t = q->start;
  tm_op *o = op_get(tm, q->op);
  wait_for(tm, h, t, o ? o->pred : -1, SIM_TM_W_DEVICE_WAIT, ev);
  tm->r.launch_blocks++;
  sum_add(tm, &tm->r.blocked_launch_ns, t - h, ev->seq);
  return t;
}

/* The host's own time in a launch call: as recorded, unless the recording shows the launch
 * blocked on a full queue (then the profile's launch overhead; the wait is modeled). A call
 * without a recorded duration takes none: its time is in the recorded gap that follows. */
static int64_t call_overhead(sim_tm *tm, int64_t rec, int rec_blocked) {
  if (rec < 0) return 0;
  return rec_blocked ? min64(rec, tm->dev.launch_overhead) : rec;
}

/* The duration a scenario sets for a device operation, or -1. */
static int64_t scenario_duration(sim_tm *tm, const sim_event *ev) {
  if (!tm->cfg.duration) return -1;
  int64_t d = tm->cfg.duration(tm->cfg.duration_arg, ev);
  return d >= 0 ? min64(d, TM_MAX_DUR) : -1;
}

/* A recorded duration on the target device: scaled by the ratio of the rate that bounds it. */
static int64_t device_scaled_to(sim_tm *tm, const sim_event *ev, int64_t dur) {
  int b = SIM_TM_KB_MEMORY;
  if (ev->kind == SIM_EV_KERNEL) {
    b = tm->cfg.kernel_bound ? tm->cfg.kernel_bound(tm->cfg.kernel_bound_arg, ev) : SIM_TM_KB_MEMORY;
    if (b < 0 || b >= SIM_TM__NKB || ev->dur < SIM_TM_SHORT_KERNEL_NS) b = SIM_TM_KB_KEEP;
    if (b != SIM_TM_KB_KEEP && tm->cfg.scale_policy != SIM_TM_SCALE_CLASSIFIED) {
      /* the range: the faster or the slower of its compute rate and the memory bandwidth */
      int compute = b == SIM_TM_KB_MEMORY ? SIM_TM_KB_FP32 : b;
      double rc = tm->r.bound_ratio[compute], rm = tm->r.bound_ratio[SIM_TM_KB_MEMORY];
      int fast = rc <= rm ? compute : SIM_TM_KB_MEMORY, slow = rc <= rm ? SIM_TM_KB_MEMORY : compute;
      b = tm->cfg.scale_policy == SIM_TM_SCALE_FASTEST ? fast : slow;
    }
  }
  double scaled = (double)dur * tm->r.bound_ratio[b]; /* held below 2^52 ns, as kernel_scale's */
  int64_t out = scaled >= 4.5e15 ? INT64_C(4500000000000000) : (int64_t)(scaled + 0.5);
  if (ev->kind == SIM_EV_KERNEL) {
    tm->r.bound_kernels[b]++;
    sum_add(tm, &tm->r.bound_recorded_ns[b], dur, ev->seq);
    sum_add(tm, &tm->r.bound_predicted_ns[b], out, ev->seq);
  }
  return out;
}

static inline int64_t device_scaled(sim_tm *tm, const sim_event *ev, int64_t dur) {
  if (!tm->scaling || dur <= 0) return dur;
  return device_scaled_to(tm, ev, dur);
}

/* A kernel's or memset's duration on the device, counted (the kernels, memsets, kernels without
 * a recorded duration). Out of line: most replays take the plain path in on_kernel. */
__attribute__((noinline)) static int64_t kernel_duration(sim_tm *tm, const sim_event *ev) {
  int64_t dur;
  if (ev->kind == SIM_EV_KERNEL) {
    /* held below 2^52 ns: never wraps, sums stay in range (at scale 1, exactly what the
     * product rounds to: every duration below the bound is a double) */
    if (ev->dur <= 0) dur = 0;
    else if (tm->unscaled) dur = ev->dur >= TM_MAX_DUR ? TM_MAX_DUR : ev->dur;
    else {
      double scaled = (double)ev->dur * tm->cfg.kernel_scale;
      dur = scaled >= (double)TM_MAX_DUR ? TM_MAX_DUR : (int64_t)(scaled + 0.5);
    }
    dur = device_scaled(tm, ev, dur);
    tm->r.kernels++;
  } else { /* memset: recorded (scaled to the device), or bytes at memory bandwidth */
    dur = ev->dur > 0 ? device_scaled(tm, ev, ev->dur) : tm->dev.copy_latency + at_rate(ev->size, tm->dev.mem_bw);
    tm->r.memsets++;
  }
  int64_t set = scenario_duration(tm, ev);
  if (set >= 0) dur = set;
  else if (ev->dur <= 0 && ev->kind == SIM_EV_KERNEL) tm->r.ops_without_duration++;
  return dur;
}

/* The host's clock at event ev (its recorded time, moved by what earlier calls gained or lost),
 * with the program's own code since the last thing the host did attributed up to it. */
TM_HOT int64_t host_reaches(sim_tm *tm, const sim_event *ev) {
  int64_t h = ev->ts + tm->shift;
  if (h > tm->frontier) emit_fixed(tm, tm->frontier, h, SIM_TM_W_HOST, 0, ev->seq);
  return h;
}

/* The call that began at h ended m later, against its recorded duration rec (< 0: none): what
 * the host does after the call's recorded return moves by the difference. */
static inline void call_returned(sim_tm *tm, const sim_event *ev, int64_t m, int64_t rec) {
  int64_t recorded = rec < 0 ? 0 : rec;
  if (m != recorded) heap_push(tm, ev->ts + recorded, HEAP_ADJUST, m - recorded);
}

/* A kernel or memset launched at h on stream st of device dv: every rule. */
__attribute__((noinline)) static void kernel_launch(sim_tm *tm, const sim_event *ev, int64_t h, tm_device *dv,
                                                   tm_stream *st) {
  if (!in_range(tm, ev)) return;
  int64_t rec = ev->api_dur >= 0 ? ev->api_dur : -1; /* recorded_call's rule for a kernel or memset */
  int blocked;
  int64_t t = launch_queue(tm, dv, h, ev, &blocked);
  int64_t own = call_overhead(tm, rec, blocked);
  int64_t dur;
  if (tm->plain && ev->kind == SIM_EV_KERNEL) { /* what kernel_duration gives then */
    dur = ev->dur <= 0 ? 0 : ev->dur >= TM_MAX_DUR ? TM_MAX_DUR : ev->dur;
    tm->r.kernels++;
    if (ev->dur <= 0) tm->r.ops_without_duration++;
  } else {
    dur = kernel_duration(tm, ev);
  }
  op_place p = {.avail = t + tm->dev.launch_latency, .link = LINK_NONE};
  op_start(tm, dv, st, ev, &p);
  int what = ev->kind == SIM_EV_KERNEL ? SIM_TM_W_KERNEL : SIM_TM_W_MEMSET;
  op_commit(tm, dv, st, ev, &p, p.start + dur, op_item(tm, ev, what, 0, 0));
  sum_add(tm, &tm->r.compute_busy_ns, dur, ev->seq);
  /* a kernel's call: unnamed, of a kind below TM_FIXED_KINDS (no look-up path to compile) */
  emit_fixed(tm, t, t + own, SIM_TM_W_CALL, ev->kind & (TM_FIXED_KINDS - 1), ev->seq);
  call_returned(tm, ev, t + own - h, rec);
}

/* A kernel or memset launch (most events): placed on its stream, its call attributed. Out of
 * line, as each kind of event is: sim_tm_event only chooses. The common case is kept apart, with
 * what kernel_launch's rules come to for it: a kernel of a plain replay, with a recorded
 * duration, launched into a queue with room (as the recording had). */
__attribute__((noinline)) static void on_kernel(sim_tm *tm, const sim_event *ev) {
  int64_t h = host_reaches(tm, ev);
  tm_device *dv;
  tm_stream *st = stream_of(tm, ev, &dv);
  const struct tm_queued *q = dv->q_old; /* launch_queue's oldest */
  int64_t dur = ev->dur;
  if (!tm->plain || ev->kind != SIM_EV_KERNEL || dur <= 0 || dur >= TM_MAX_DUR || q->start > h ||
      (ev->ts >= 0 && q->rec > ev->ts) || !dur_ok(ev->api_dur) || !time_ok(ev->dev_ts)) {
    kernel_launch(tm, ev, h, dv, st);
    return;
  }
  tm->r.kernels++;
  uint32_t item = op_item(tm, ev, SIM_TM_W_KERNEL, 0, 0);
  op_place p = {.avail = h + tm->dev.launch_latency, .link = LINK_NONE};
  op_start(tm, dv, st, ev, &p);
  op_commit(tm, dv, st, ev, &p, p.start + dur, item);
  sum_add(tm, &tm->r.compute_busy_ns, dur, ev->seq);
  /* its call takes its recorded time (none: none), and so ends as recorded: nothing moves */
  if (ev->api_dur > 0) emit_fixed(tm, h, h + ev->api_dur, SIM_TM_W_CALL, SIM_EV_KERNEL, ev->seq);
}

int sim_tm_copy_bucket(int dir, int mem) {
  int pinned = mem == SIM_MEM_PINNED;
  switch (dir) {
  case SIM_COPY_H2D: return pinned ? SIM_TM_CB_H2D_PINNED : SIM_TM_CB_H2D_PAGEABLE;
  case SIM_COPY_D2H: return pinned ? SIM_TM_CB_D2H_PINNED : SIM_TM_CB_D2H_PAGEABLE;
  case SIM_COPY_D2D: return SIM_TM_CB_D2D;
  default: return SIM_TM_CB_OTHER;
  }
}

static int copy_bucket(int dir, int pinned) { return sim_tm_copy_bucket(dir, pinned ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE); }

/* A copy as the bandwidth model sees it, worked out before it is placed. */
typedef struct copy_plan {
  int dir, host_side, staged, sync_copy;
  uint64_t size, chunk;      /* chunk: the staging buffer (the whole copy when there is none) */
  double dma_bw, stage_bw;   /* staged copies: the DMA's bandwidth, and the host's staging one */
  int64_t modeled, dur;      /* the modeled duration, and the one used */
  double f;                  /* dur / modeled: a staged copy's chunks stretch alike */
  tm_key self, staging;      /* what its time is attributed to */
} copy_plan;

/* The bandwidth model: the modeled duration, compared with the recorded one (the copy
 * statistics), and the duration used: the recorded one when the timing says so, or a
 * scenario's. */
static void copy_plan_init(sim_tm *tm, const sim_event *ev, copy_plan *c) {
  const sim_device_profile *pf = &tm->dev;
  int dir = ev->dir;
  int pinned = ev->mem == SIM_MEM_PINNED;
  uint64_t size = ev->size;
  c->dir = dir;
  c->size = size;
  c->host_side = dir == SIM_COPY_H2D || dir == SIM_COPY_D2H;
  c->staged = c->host_side && !pinned; /* pageable, managed or unknown host memory is staged */
  /* cudaMemcpy (not Async) from or to host memory returns when the copy is done. */
  c->sync_copy = c->host_side && !(ev->flags & SIM_EVF_ASYNC);
  double bw, dma_bw = 0, stage_bw = 0;
  uint64_t chunk = pf->staging_buffer ? pf->staging_buffer : size;
  /* at most TM_MAX_CHUNKS chunks, each simulated: a larger copy (or a smaller buffer) takes larger
   * chunks. 4 MiB of buffer covers copies up to 16 GiB; past that the part of the copy that does
   * not overlap, one chunk's staging, is at most 1/4096 of it. A buffer of 1 byte would be a loop
   * of 2^47, and 2^20 chunks a copy took 3.5 s for 11 copies under the sanitizer (fuzz_timemodel). */
  if (c->staged && size / chunk >= TM_MAX_CHUNKS) chunk = size / TM_MAX_CHUNKS + 1;
  uint64_t nchunks = c->staged && size > chunk ? (size + chunk - 1) / chunk : 1;
  if (dir == SIM_COPY_H2D) bw = pinned ? pf->h2d_pinned_bw : pf->h2d_pageable_bw, dma_bw = pf->h2d_pinned_bw;
  else if (dir == SIM_COPY_D2H) bw = pinned ? pf->d2h_pinned_bw : pf->d2h_pageable_bw, dma_bw = pf->d2h_pinned_bw;
  else if (dir == SIM_COPY_P2P) bw = pf->p2p_bw;
  else if (dir == SIM_COPY_H2H) bw = pf->host_copy_bw;
  else bw = pf->d2d_bw;
  if (c->staged && bw < dma_bw) stage_bw = 1.0 / (1.0 / bw - 1.0 / dma_bw); /* staging + DMA take 1/bw per byte */
  int64_t modeled = call_cost(nchunks, pf->copy_latency, 0, 0) + at_rate(size, bw); /* each at most TM_MAX_DUR */
  if (modeled > TM_MAX_DUR) modeled = TM_MAX_DUR;
  if (dir == SIM_COPY_H2H) modeled = at_rate(size, bw);
  int64_t recorded = ev->dur > 0 ? (ev->dur >= TM_MAX_DUR ? TM_MAX_DUR : ev->dur) : -1; /* bounded as a kernel's */
  /* the trace's own copies, fitted, where they say what this machine's links deliver */
  int64_t predicted = tm->r.copies_fitted ? sim_copy_fit_time(tm->cfg.copy_fit, dir, ev->mem, size) : -1;
  if (predicted < 0) predicted = modeled;
  if (predicted > TM_MAX_DUR) predicted = TM_MAX_DUR;
  if (recorded > 0 && size > 0) {
    sim_tm_copy_stats *cs = &tm->r.copies[copy_bucket(dir, pinned)][size >= SIM_TM_LARGE_COPY];
    cs->n++;
    cs->bytes = cs->bytes + size >= cs->bytes ? cs->bytes + size : UINT64_MAX;
    sum_add(tm, &cs->recorded_ns, recorded, ev->seq);
    sum_add(tm, &cs->predicted_ns, predicted, ev->seq);
    cs->abs_rel_err_sum += (double)(predicted > recorded ? predicted - recorded : recorded - predicted) / (double)recorded;
  }
  int64_t dur = tm->cfg.copy_timing == SIM_TM_TIMING_RECORDED && recorded > 0 ? recorded : predicted;
  int64_t set = scenario_duration(tm, ev);
  if (set >= 0) dur = set;
  c->chunk = chunk;
  c->dma_bw = dma_bw;
  c->stage_bw = stage_bw;
  c->modeled = modeled;
  c->dur = dur;
  /* the chunks' own times, stretched by f, add up to dur: past the bound, f comes from what
   * modeled would have been unbounded */
  double unbounded = modeled < TM_MAX_DUR ? (double)modeled
                                          : (double)nchunks * (double)pf->copy_latency + (double)size * 1e9 / bw;
  c->f = unbounded > 0 ? (double)dur / unbounded : 1.0;
  c->self = key_of(SIM_TM_W_COPY, ev->kind, 0, dir, ev->mem);
  c->staging = key_of(SIM_TM_W_STAGING, ev->kind, 0, dir, ev->mem);
}

/* The time the host spends staging n bytes of a chunk (filling or draining the bounce buffer). */
static int64_t copy_stage_time(const copy_plan *c, uint64_t n) {
  return (int64_t)((c->stage_bw > 0 ? (double)n * 1e9 / c->stage_bw : 0) * c->f + 0.5);
}

/* The time the DMA takes for n bytes of a chunk. */
static int64_t copy_dma_time(const sim_tm *tm, const copy_plan *c, uint64_t n) {
  return (int64_t)(((double)tm->dev.copy_latency + (double)at_rate(n, c->dma_bw)) * c->f + 0.5);
}

/* A copy the DMA engine makes on its own (device memory, or pinned host memory); a synchronous
 * one keeps the host until it is done. Returns the host's time after the call. */
static int64_t copy_direct(sim_tm *tm, const sim_event *ev, tm_device *dv, tm_stream *st, op_place *p,
                           const copy_plan *c, int64_t t, int64_t own) {
  const sim_device_profile *pf = &tm->dev;
  op_start(tm, dv, st, ev, p);
  int64_t end = p->start + c->dur;
  int64_t id = op_commit(tm, dv, st, ev, p, end, op_item(tm, ev, SIM_TM_W_COPY, c->dir, ev->mem));
  sum_add(tm, &tm->r.copy_busy_ns, c->dur, ev->seq);
  emit_what(tm, t, t + own, SIM_TM_W_CALL, ev);
  t += own;
  if (c->sync_copy) {
    int64_t t0 = t;
    t = host_wait(tm, t, end, id, ev);
    emit_what(tm, t, t + pf->sync_latency, SIM_TM_W_SYNC, ev);
    t += pf->sync_latency;
    sum_add(tm, &tm->r.blocked_copy_ns, t - t0, ev->seq);
  }
  return t;
}

/* Pageable host memory to the device: the host fills the bounce buffer (after the previous
 * staged copy drained it), the DMA follows in stream order; the next chunk waits for the buffer.
 * The host returns after the last fill. Returns the host's time; *end: the copy's end. */
static int64_t copy_staged_h2d(sim_tm *tm, const sim_event *ev, tm_device *dv, tm_stream *st, op_place *p,
                               const copy_plan *c, int64_t t, int64_t *end) {
  uint64_t left = c->size, n = left < c->chunk ? left : c->chunk;
  /* cudaMemcpy (not Async) first waits for the stream to finish what it holds. */
  if (c->sync_copy && st->ready > t) t = host_wait(tm, t, st->ready, st->last_op, ev);
  int64_t s0 = max64(t, dv->bounce_free);
  if (s0 > t) t = host_wait(tm, t, s0, dv->bounce_op, ev);
  int64_t fill = copy_stage_time(c, n);
  emit(tm, t, t + fill, &c->staging, ev->seq);
  t += fill;
  p->avail = max64(p->avail, t);
  p->bounce = 0;
  op_start(tm, dv, st, ev, p);
  int64_t dma_end = p->start + copy_dma_time(tm, c, n);
  left -= n;
  int first_wait = 1;
  while (left > 0) {
    n = left < c->chunk ? left : c->chunk;
    /* wait for the buffer: the previous chunk's transfer */
    if (dma_end > t) {
      if (first_wait && p->start > t) {
        wait_for(tm, t, p->start, p->pred, SIM_TM_W_DEVICE_WAIT, ev);
        t = max64(t, p->start);
      }
      emit(tm, t, dma_end, &c->self, ev->seq);
      t = dma_end;
    }
    first_wait = 0;
    fill = copy_stage_time(c, n);
    emit(tm, t, t + fill, &c->staging, ev->seq);
    t += fill;
    dma_end = max64(t, dma_end) + copy_dma_time(tm, c, n);
    left -= n;
  }
  *end = dma_end;
  int64_t id = op_commit(tm, dv, st, ev, p, dma_end, op_item(tm, ev, SIM_TM_W_COPY, c->dir, ev->mem));
  dv->bounce_free = dma_end;
  dv->bounce_op = id;
  return t;
}

/* The device to pageable host memory: each chunk's transfer follows the stream, the host copies
 * it out of the buffer, and the call returns when the last chunk is out. Returns the host's
 * time; *end: the copy's end. */
static int64_t copy_staged_d2h(sim_tm *tm, const sim_event *ev, tm_device *dv, tm_stream *st, op_place *p,
                               const copy_plan *c, int64_t t, int64_t *end) {
  op_start(tm, dv, st, ev, p);
  uint64_t left = c->size;
  int64_t dma_start = p->start, fill_end = t;
  int64_t dma_end = dma_start;
  if (p->start > t) {
    wait_for(tm, t, p->start, p->pred, SIM_TM_W_DEVICE_WAIT, ev);
    t = p->start;
  }
  do {
    uint64_t n = left < c->chunk ? left : c->chunk;
    dma_end = max64(dma_start, fill_end) + copy_dma_time(tm, c, n);
    emit(tm, t, dma_end, &c->self, ev->seq);
    t = max64(t, dma_end);
    int64_t drain = copy_stage_time(c, n);
    emit(tm, t, t + drain, &c->staging, ev->seq);
    t += drain;
    fill_end = t;
    dma_start = dma_end;
    left -= n;
  } while (left > 0);
  *end = dma_end;
  int64_t id = op_commit(tm, dv, st, ev, p, dma_end, op_item(tm, ev, SIM_TM_W_COPY, c->dir, ev->mem));
  dv->bounce_free = t;
  dv->bounce_op = id;
  emit_what(tm, t, t + tm->dev.sync_latency, SIM_TM_W_SYNC, ev);
  return t + tm->dev.sync_latency;
}

__attribute__((noinline)) static int64_t on_copy(sim_tm *tm, const sim_event *ev, int64_t h, int64_t rec) {
  const sim_device_profile *pf = &tm->dev;
  tm->r.copies_n++;
  copy_plan c;
  copy_plan_init(tm, ev, &c);
  if (c.dir == SIM_COPY_H2H) { /* the host copies: fully synchronous */
    emit(tm, h, h + c.dur, &c.self, ev->seq);
    sum_add(tm, &tm->r.blocked_copy_ns, c.dur, ev->seq);
    return h + c.dur;
  }
  tm_device *dv;
  tm_stream *st = stream_of(tm, ev, &dv);
  /* A call that blocks records its wait in its duration: its own part is the launch overhead. */
  int blocked;
  int64_t t = launch_queue(tm, dv, h, ev, &blocked);
  int64_t own = c.staged || c.sync_copy ? (rec >= 0 ? min64(rec, pf->launch_overhead) : 0) : call_overhead(tm, rec, blocked);
  op_place p = {.avail = t + pf->launch_latency, .link = LINK_NONE};
  if (c.host_side) p.link = c.dir == SIM_COPY_H2D ? LINK_H2D : LINK_D2H, p.engine = 1;
  if (c.dir == SIM_COPY_P2P) p.link = LINK_P2P, p.engine = 1;
  if (!c.staged) return copy_direct(tm, ev, dv, st, &p, &c, t, own);

  /* Staged through the pinned bounce buffer, chunk by chunk; the host copies each chunk. The
   * recorded duration, when used, stretches staging and transfers alike. */
  emit_what(tm, t, t + own, SIM_TM_W_CALL, ev);
  t += own;
  int64_t t_in = t, end;
  p.bounce = 1;
  if (c.dir == SIM_COPY_H2D) t = copy_staged_h2d(tm, ev, dv, st, &p, &c, t, &end);
  else t = copy_staged_d2h(tm, ev, dv, st, &p, &c, t, &end);
  sum_add(tm, &tm->r.copy_busy_ns, end - p.start, ev->seq);
  sum_add(tm, &tm->r.blocked_copy_ns, t - t_in, ev->seq);
  return t;
}

static int64_t on_sync(sim_tm *tm, const sim_event *ev, int64_t h, int64_t rec) {
  tm->r.syncs++;
  int64_t rec_return = rec >= 0 && ev->ts >= 0 ? ev->ts + rec : TM_UNKNOWN;
  int64_t ready = INT64_MIN, op = -1;
  int d = ev->device >= 0 && ev->device < TM_MAX_DEVICES ? ev->device : -1;
  if (ev->stream >= 0 && ev->stream != SIM_NO_STREAM) {
    tm_stream *s = stream_find(tm, d < 0 ? 0 : d, ev->stream);
    if (s) ready = s->ready, op = s->last_op;
  } else {
    ready = device_ready(tm, d, rec_return, &op);
  }
  int64_t t = h;
  if (ready > h) {
    t = host_wait(tm, h, ready, op, ev);
    emit_what(tm, t, t + tm->dev.sync_latency, SIM_TM_W_SYNC, ev);
    t += tm->dev.sync_latency;
  } else {
    int64_t own = rec >= 0 ? min64(rec, tm->dev.sync_latency) : 0;
    emit_what(tm, t, t + own, SIM_TM_W_SYNC, ev);
    t += own;
  }
  sum_add(tm, &tm->r.blocked_sync_ns, t - h, ev->seq);
  return t;
}

/* What the allocator's own driver calls cost, from t. cudaMalloc and cudaFree wait for the
 * device first; unmapping waits for the stream that used the memory. */
static int64_t allocator_calls_made(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int64_t t) {
  const sim_device_profile *pf = &tm->dev;
  int64_t t0 = t, op;
  int d = ev->device >= 0 && ev->device < TM_MAX_DEVICES ? ev->device : 0;
  if ((a->mallocs || a->frees) && tm->cfg.malloc_syncs) {
    int64_t ready = device_ready(tm, d, TM_UNKNOWN, &op);
    t = host_wait(tm, t, ready, op, ev);
  }
  if (a->frees) {
    int64_t c = call_cost(a->frees, pf->free_base, pf->free_per_gib, a->free_bytes);
    emit_fixed(tm, t, t + c, SIM_TM_W_FREE, ev->kind, ev->seq);
    t += c;
  }
  if (a->unmaps) {
    tm_stream *s = ev->stream != SIM_NO_STREAM ? stream_find(tm, d, ev->stream) : NULL;
    int64_t ready = s ? s->ready : device_ready(tm, d, TM_UNKNOWN, &op);
    if (s) op = s->last_op;
    t = host_wait(tm, t, ready, op, ev);
    int64_t c = call_cost(a->unmaps, pf->unmap_base, pf->unmap_per_gib, a->unmap_bytes);
    emit_fixed(tm, t, t + c, SIM_TM_W_UNMAP, ev->kind, ev->seq);
    t += c;
  }
  if (a->mallocs) {
    int64_t c = call_cost(a->mallocs, pf->malloc_base, pf->malloc_per_gib, a->malloc_bytes);
    emit_fixed(tm, t, t + c, SIM_TM_W_MALLOC, ev->kind, ev->seq);
    t += c;
  }
  if (a->maps) {
    int64_t c = call_cost(a->maps, pf->map_base, pf->map_per_gib, a->map_bytes);
    emit_fixed(tm, t, t + c, SIM_TM_W_MAP, ev->kind, ev->seq);
    t += c;
  }
  tm->r.device_mallocs += a->mallocs;
  tm->r.device_frees += a->frees;
  tm->r.device_maps += a->maps;
  tm->r.device_unmaps += a->unmaps;
  sum_add(tm, &tm->r.blocked_alloc_ns, t - t0, ev->seq);
  return t;
}

static int64_t on_host_memory(sim_tm *tm, const sim_event *ev, int64_t h, int64_t rec) {
  const sim_device_profile *pf = &tm->dev;
  if (ev->kind == SIM_EV_HOST_ALLOC) {
    if (ev->mem != SIM_MEM_PINNED) {
      emit_what(tm, h, h + max64(rec, 0), SIM_TM_W_CALL, ev);
      return h + max64(rec, 0);
    }
    int existed;
    *sim_map_put(&tm->pinned, ev->addr, &existed) = ev->size;
    int64_t c = call_cost(1, pf->pin_base, pf->pin_per_gib, ev->size);
    emit_fixed(tm, h, h + c, SIM_TM_W_PIN, ev->kind, ev->seq);
    tm->r.host_pins++;
    sum_add(tm, &tm->r.blocked_alloc_ns, c, ev->seq);
    return h + c;
  }
  uint64_t bytes;
  if (!sim_map_del(&tm->pinned, ev->addr, &bytes)) {
    emit_what(tm, h, h + max64(rec, 0), SIM_TM_W_CALL, ev);
    return h + max64(rec, 0);
  }
  /* cudaFreeHost waits for the device before it unpins. */
  int64_t op;
  int64_t ready = device_ready(tm, ev->device >= 0 && ev->device < TM_MAX_DEVICES ? ev->device : -1, TM_UNKNOWN, &op);
  int64_t t = host_wait(tm, h, ready, op, ev);
  int64_t c = call_cost(1, pf->unpin_base, pf->unpin_per_gib, bytes);
  emit_fixed(tm, t, t + c, SIM_TM_W_UNPIN, ev->kind, ev->seq);
  sum_add(tm, &tm->r.blocked_alloc_ns, t + c - h, ev->seq);
  return t + c;
}

/* Most events make no driver call: checked here, inline. */
static inline int64_t allocator_calls(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int64_t t) {
  if (!a || !(a->mallocs | a->frees | a->maps | a->unmaps)) return t;
  return allocator_calls_made(tm, ev, a, t);
}

/* ---- the driver ------------------------------------------------------------------------------ */

static const char *const bound_names[SIM_TM__NKB] = {"kept", "tensor cores, 16-bit", "tensor cores, TF32",
                                                       "CUDA cores, fp32", "memory bandwidth"};
const char *sim_tm_bound_name(int bound) { return bound >= 0 && bound < SIM_TM__NKB ? bound_names[bound] : "?"; }

/* rec / dev, or 1 when either is unknown */
static double rate_ratio(double rec, double dev) { return rec > 0 && dev > 0 ? rec / dev : 1.0; }

/* The ratios that scale recorded durations to the target device, when it is another card. A
 * card without 16-bit tensor cores (bf16 0) runs that math at its fp16 rate, one without TF32
 * at its fp32 rate. */
static void scaling_init(sim_tm *tm) {
  for (int b = 0; b < SIM_TM__NKB; b++) tm->r.bound_ratio[b] = 1.0;
  const sim_device_profile *rec = tm->cfg.recorded_device;
  tm->cfg.recorded_device = NULL;
  if (!rec || tm->cfg.kernels_as_recorded || !strcasecmp(rec->name, tm->dev.name)) return;
  tm->rec = *rec;
  tm->cfg.recorded_device = &tm->rec;
  tm->scaling = 1;
  const sim_device_profile *d = &tm->dev;
  double rec16 = rec->bf16_flops > 0 ? rec->bf16_flops : rec->fp16_flops;
  double dev16 = d->bf16_flops > 0 ? d->bf16_flops : d->fp16_flops;
  tm->r.bound_ratio[SIM_TM_KB_COMPUTE16] = rate_ratio(rec16, dev16);
  tm->r.bound_ratio[SIM_TM_KB_TF32] = rate_ratio(rec->tf32_flops > 0 ? rec->tf32_flops : rec->fp32_flops,
                                                 d->tf32_flops > 0 ? d->tf32_flops : d->fp32_flops);
  tm->r.bound_ratio[SIM_TM_KB_FP32] = rate_ratio(rec->fp32_flops, d->fp32_flops);
  tm->r.bound_ratio[SIM_TM_KB_MEMORY] = rate_ratio(rec->mem_bw, d->mem_bw);
  tm->r.device_scaled = 1;
}

sim_tm *sim_tm_new(const sim_tm_config *cfg) {
  sim_tm *tm = sim_xcalloc(1, sizeof *tm);
  tm->cfg = *cfg;
  tm->dev = *cfg->device;
  tm->cfg.device = &tm->dev;
  if (tm->dev.copy_engines < 1) tm->dev.copy_engines = 1;
  tm->unscaled = !(tm->cfg.kernel_scale > 0) || tm->cfg.kernel_scale == 1.0;
  tm->queue = tm->dev.launch_queue < 1 ? 1 : tm->dev.launch_queue > TM_MAX_QUEUE ? TM_MAX_QUEUE : tm->dev.launch_queue;
  /* Left unwritten (op_get reads only slots of committed ops): a short replay touches only the
   * pages it uses, instead of the whole ring's 3 MiB; a long one writes all of it. */
  tm->ops = cfg->events_hint >= (int64_t)TM_OP_RING ? sim_xmalloc_huge(TM_OP_RING * sizeof *tm->ops)
                                                    : sim_xmalloc(TM_OP_RING * sizeof *tm->ops);
  sim_map_init(&tm->stream_idx);
  sim_map_init(&tm->item_idx);
  sim_map_init(&tm->pinned);
  tm->open_step = -1;
  tm->last_end = INT64_MIN;
  tm->last_end_op = -1;
  tm->nops = TM_OP_RING; /* the first operation's id (op_get) */
  tm->catch_up = 0; /* the first event starts the clock */
  items_fixed_init(tm);
  scaling_init(tm);
  tm->plain = tm->unscaled && !tm->scaling && !tm->cfg.duration;
  tm->r.copies_fitted = cfg->copy_fit && !tm->scaling && cfg->copy_timing != SIM_TM_TIMING_PROFILE;
  tm->r.copy_fit = tm->r.copies_fitted ? cfg->copy_fit : NULL;
  return tm;
}

void sim_tm_free(sim_tm *tm) {
  if (!tm) return;
  for (int d = 0; d < TM_MAX_DEVICES; d++) {
    free(tm->devs[d].q);
  }
  free(tm->heap);
  free(tm->streams);
  sim_map_release(&tm->stream_idx);
  sim_map_release(&tm->item_idx);
  sim_map_release(&tm->pinned);
  free(tm->ops);
  free(tm->items);
  free(tm->item_meta);
  free(tm->kernel_item);
  free(tm->walk);
  free(tm->steps);
  free(tm->step_rec_start);
  free(tm);
}

/* Any event but a kernel's, a memset's or a plain call's. */
__attribute__((noinline)) static void on_other(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int role) {
  if (!in_range(tm, ev)) return;
  int64_t h = host_reaches(tm, ev);
  int64_t rec = recorded_call(ev), end;
  int replaced = role == SIM_TM_ROLE_ALLOCATOR_CALL || (ev->flags & SIM_EVF_DEVICE_API);
  switch (ev->kind) {
  case SIM_EV_MEMCPY: end = on_copy(tm, ev, h, rec); break;
  case SIM_EV_SYNC: end = allocator_calls(tm, ev, a, on_sync(tm, ev, h, rec)); break;
  case SIM_EV_MARKER:
    on_marker(tm, ev, h);
    end = h;
    break;
  case SIM_EV_HOST_ALLOC:
  case SIM_EV_HOST_FREE: end = on_host_memory(tm, ev, h, rec); break;
  default: {
    /* allocations, frees, empty_cache, api calls: their own recorded time (unless it was the
     * recorded allocator's driver call, which the replayed allocator's calls replace), then
     * what the replayed allocator's driver calls cost */
    int64_t own = replaced || rec < 0 ? 0 : rec;
    emit_what(tm, h, h + own, SIM_TM_W_CALL, ev);
    end = allocator_calls(tm, ev, a, h + own);
  }
  }
  call_returned(tm, ev, end - h, rec);
}

/* The event kinds whose calls take their recorded time and nothing else, unless the allocator
 * made driver calls for them or they stand for one (on_other's default, less API calls, whose
 * items are named). */
#define TM_PLAIN_CALLS                                                                                         \
  (1u << SIM_EV_NONE | 1u << SIM_EV_ALLOC | 1u << SIM_EV_FREE_REQUESTED | 1u << SIM_EV_FREE_COMPLETED |       \
   1u << SIM_EV_FREE | 1u << SIM_EV_EMPTY_CACHE)

/* A call of one of TM_PLAIN_CALLS' kinds that made no driver call and stands for none: on_other's
 * default for it (recorded_call's rule is then api_dur's, and the call ends as recorded). */
__attribute__((noinline)) static void on_plain_call(sim_tm *tm, const sim_event *ev) {
  int64_t h = host_reaches(tm, ev);
  /* its kind is below TM_FIXED_KINDS (the mask says so: no look-up path to compile) */
  if (ev->api_dur > 0) emit_fixed(tm, h, h + ev->api_dur, SIM_TM_W_CALL, ev->kind & (TM_FIXED_KINDS - 1), ev->seq);
}

/* Hands the event to the function for its kind. */
static inline void event_dispatch(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int role) {
  unsigned kind = ev->kind;
  if (kind == SIM_EV_KERNEL || kind == SIM_EV_MEMSET) {
    on_kernel(tm, ev);
  } else if (kind < 32 && (TM_PLAIN_CALLS >> kind & 1) && role == SIM_TM_ROLE_NONE &&
             !(ev->flags & SIM_EVF_DEVICE_API) && (!a || !(a->mallocs | a->frees | a->maps | a->unmaps)) &&
             dur_ok(ev->api_dur)) {
    on_plain_call(tm, ev);
  } else {
    on_other(tm, ev, a, role);
  }
}

/* An event that first applies what recorded time up to it holds (calls that returned, steps
 * that ended), or the first event, which starts the host's clock. Then the event itself. */
__attribute__((noinline)) static void event_catch_up(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int role) {
  if (tm->r.stopped || !in_range(tm, ev)) return;
  if (tm->nheap && tm->heap[0].t <= ev->ts) advance_to(tm, ev->ts, ev->seq);
  if (tm->r.stopped) return;
  if (!tm->started) {
    tm->started = 1;
    tm->start = tm->frontier = ev->ts + tm->shift;
    tm->catch_up = time_key(heap_next(tm));
  }
  event_dispatch(tm, ev, a, role);
}

void sim_tm_event(sim_tm *tm, const sim_event *ev, const sim_tm_alloc *a, int role) {
  /* most events have nothing to apply, are not the first and lie in the model's range */
  if (__builtin_expect((uint64_t)ev->ts + (UINT64_C(1) << TM_TIME_BITS) >= tm->catch_up, 0)) { /* time_key, or above */
    event_catch_up(tm, ev, a, role);
    return;
  }
  event_dispatch(tm, ev, a, role);
}

static int cmp_item(const void *a, const void *b) {
  const sim_tm_item *x = a, *y = b;
  if (x->total_ns != y->total_ns) return x->total_ns < y->total_ns ? 1 : -1;
  if (x->what != y->what) return x->what - y->what;
  return x->name < y->name ? -1 : x->name > y->name;
}

void sim_tm_finish(sim_tm *tm, sim_tm_result *res) {
  if (!tm->r.stopped) advance_to(tm, INT64_MAX, -1);
  if (tm->started && !tm->r.stopped && tm->last_end > tm->frontier) {
    /* the program's end waits for the device's last work */
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = SIM_EV_SYNC;
    ev.seq = -1;
    wait_for(tm, tm->frontier, tm->last_end, tm->last_end_op, SIM_TM_W_DEVICE_WAIT, &ev);
  }
  if (tm->open_step >= 0) { /* a step that never ended */
    sim_tm_step *s = &tm->steps[tm->open_step];
    int64_t now[SIM_TM__NCLASS];
    cum_at(tm, tm->frontier, now);
    for (int c = 0; c < SIM_TM__NCLASS; c++) s->breakdown[c] = now[c] - s->breakdown[c];
    s->end_ns = tm->frontier;
    s->complete = 0;
  }
  sim_tm_result *r = &tm->r;
  r->start_ns = tm->started ? tm->start : 0;
  r->end_ns = tm->started ? tm->frontier : 0;
  r->total_ns = r->end_ns - r->start_ns;
  memcpy(r->breakdown, tm->cum, sizeof tm->cum);
  r->steps = tm->steps;
  r->nsteps = tm->nsteps;
  tm->steps = NULL;
  double pred = 0, recd = 0;
  size_t nrec = 0;
  for (size_t i = 0; i < r->nsteps; i++) {
    if (!r->steps[i].complete) continue;
    r->complete_steps++;
    pred += (double)(r->steps[i].end_ns - r->steps[i].start_ns);
    if (r->steps[i].recorded_ns >= 0) recd += (double)r->steps[i].recorded_ns, nrec++;
  }
  r->step_time_s = r->complete_steps ? pred / (double)r->complete_steps / 1e9 : -1;
  r->recorded_step_time_s = nrec == r->complete_steps && nrec ? recd / (double)nrec / 1e9 : -1;
  r->samples_per_s = r->step_time_s > 0 && tm->cfg.batch_size > 0 ? (double)tm->cfg.batch_size / r->step_time_s : -1;
  /* the largest items */
  size_t top = tm->cfg.top_items ? tm->cfg.top_items : 10;
  size_t n = (size_t)tm->nattributed;
  sim_tm_item *all = sim_xmalloc((n ? n : 1) * sizeof *all);
  for (size_t i = 0; i < tm->nitems; i++) { /* in the order they were first attributed time */
    tm_item_state *s = &tm->items[i];
    if (!s->count) continue;
    if (s->cur > s->max) s->max = s->cur, s->max_seq = s->last_seq;
    sim_tm_item *it = &all[s->order];
    *it = tm->item_meta[i];
    it->total_ns = s->total;
    it->count = s->count;
    it->max_ns = s->max;
    it->max_seq = s->max_seq;
  }
  qsort(all, n, sizeof *all, cmp_item);
  r->items = all;
  r->nitems = n < top ? n : top;
  *res = *r;
  memset(&tm->r, 0, sizeof tm->r);
}

void sim_tm_result_release(sim_tm_result *res) {
  free(res->steps);
  free(res->items);
  memset(res, 0, sizeof *res);
}

/* fuzz_engine.c: libFuzzer harness for the engine's ways of replaying one trace: new or kept, planned or not, observed, checked or lean, they must agree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "result_diff.h"
#include "store/store.h"
#include "store/store_source.h"

/*
 * The engine has several paths to one answer: a new engine or one kept between replays (whose
 * model is reset, and told of a new capacity, rather than made again); the live allocations in a
 * hash table, or in a dense table a plan numbers; a plain loop, one that tells observers of every
 * event, one that checks the model's invariants after every event; and lean replays, which keep
 * only the figures and take a free's request and its completion as one free. Each path was made
 * for speed, and each must give what the plainest gives.
 *
 * The input is a model (byte 0), a capacity and a device count (byte 1), then events of four
 * bytes: allocations (sizes from a byte to gigabytes, four streams, two devices, categories and
 * call sites), frees of live allocations at once or as a request and its completion (apart, or
 * one right after the other), frees of addresses never allocated, freed twice or dropped by an
 * OOM, an address allocated again while live, synchronizations, cache releases, host allocations
 * and kernels. The trace is replayed by a new engine as the reference, then: checked after every
 * event, observed, planned, planned and observed, lean and lean planned, and by an engine kept
 * across every input, after a replay at another capacity; and, written into a store as a trace,
 * from the store's packed chunks and their plans, as `memplay replay TRACE` reads them. Each must
 * agree with the reference (the lean ones on the figures they keep); a failure prints the first
 * field that differs and aborts. Last, a replay stopped after an event must give the figures of
 * the events up to it, and the state it captured must add up; and under the models that restore a
 * state (torch, bfc), the trace cut there is replayed as a recorded window is, from that state
 * with the allocations live then as preexisting ones: every way above must agree on the window
 * too, and the window must go on placing as the whole trace did until a model calls its device.
 */

#define MAX_EVENTS 512

static const char *const models[] = {
  "torch",
  "torch:expandable_segments:True",
  "torch:max_split_size_mb:20,roundup_power2_divisions:4",
  "torch:garbage_collection_threshold:0.6,per_process_memory_fraction:0.8",
  "bfc",
  "bfc:allow_growth:true",
  "async",
  "async:release_threshold:max,reuse_allow_opportunistic:false",
  "cuda",
  "ideal",
};
#define NMODELS (sizeof models / sizeof *models)

static const uint64_t capacities[] = {UINT64_MAX, UINT64_C(64) << 20, UINT64_C(300) << 20, UINT64_C(2) << 30};
#define NCAPS (sizeof capacities / sizeof *capacities)

/* The store every input is written into (in memory, for the whole run), and its call stacks. */
static store *db;
static int64_t stacks[8];

typedef struct trace {
  sim_event ev[MAX_EVENTS];
  size_t n;
  uint64_t live[64]; /* addresses allocated and not yet freed (nor requested) */
  size_t nlive;
  uint64_t requested[64]; /* addresses whose free was requested and has not completed */
  size_t nrequested;
  uint64_t gone[16]; /* addresses freed before, for frees of nothing */
  size_t ngone;
  uint64_t next_addr;
  int ndevices;
} trace;

static sim_event *push(trace *t, int kind, uint64_t addr, uint64_t size, int64_t stream, int device) {
  sim_event *e = &t->ev[t->n];
  sim_event_init(e);
  e->seq = (int64_t)t->n;
  e->ts = (int64_t)t->n * 1000;
  e->kind = (uint8_t)kind;
  e->addr = addr;
  e->size = size;
  e->stream = stream;
  e->device = (int16_t)device;
  e->mem = SIM_MEM_DEVICE;
  t->n++;
  return e;
}

/* Takes the i-th of n addresses out of a list (the last takes its place). */
static uint64_t take(uint64_t *list, size_t *n, unsigned i) {
  size_t k = i % *n;
  uint64_t a = list[k];
  list[k] = list[--*n];
  return a;
}

static void forget(trace *t, uint64_t addr) {
  if (t->ngone == 16) t->ngone = 0;
  t->gone[t->ngone++] = addr;
}

/* The device of an address: the trace gives each device its own range of addresses. */
static int device_of(const trace *t, uint64_t addr) { return t->ndevices > 1 ? (int)(addr >> 40 & 1) : 0; }

static void add_alloc(trace *t, const uint8_t *p) {
  uint64_t size = ((uint64_t)p[1] << 8 | p[2]) << (p[3] % 20); /* up to 32 GiB */
  int device = t->ndevices > 1 ? p[3] >> 7 : 0;
  uint64_t addr;
  if (p[0] & 0x80 && t->nlive) addr = t->live[p[2] % t->nlive]; /* a duplicate: already live */
  else addr = ((uint64_t)device << 40) + (t->next_addr += 0x1000);
  sim_event *e = push(t, SIM_EV_ALLOC, addr, size, (p[3] >> 5) & 3, device);
  e->category = (uint8_t)(p[1] % SIM_CAT__COUNT);
  e->cat_source = e->category ? SIM_CATSRC_SOURCE : SIM_CATSRC_NONE;
  e->stack = stacks[p[2] & 7];
  if (e->size && !(p[0] & 0x80) && t->nlive < 64) t->live[t->nlive++] = addr;
}

/* A free of a live allocation: at once, requested only, or requested and completed at once. */
static void add_free(trace *t, const uint8_t *p, int how) {
  if (!t->nlive) return;
  uint64_t addr = take(t->live, &t->nlive, p[1]);
  int64_t stream = (p[2] >> 4) & 3;
  int dev = device_of(t, addr);
  if (how == 0) {
    push(t, SIM_EV_FREE, addr, 0, stream, dev);
    forget(t, addr);
  } else {
    push(t, SIM_EV_FREE_REQUESTED, addr, 0, stream, dev);
    if (how == 2) {
      push(t, SIM_EV_FREE_COMPLETED, addr, 0, stream, dev);
      forget(t, addr);
    } else if (t->nrequested < 64) {
      t->requested[t->nrequested++] = addr;
    }
  }
}

static void add_other(trace *t, const uint8_t *p) {
  int dev = t->ndevices > 1 ? p[3] & 1 : 0;
  switch (p[0] & 15) {
  case 8: /* a requested free completes */
    if (t->nrequested) {
      uint64_t addr = take(t->requested, &t->nrequested, p[1]);
      push(t, SIM_EV_FREE_COMPLETED, addr, 0, p[2] & 3, device_of(t, addr));
      forget(t, addr);
    }
    break;
  case 9: /* a free of nothing: an address freed before, or never allocated */
    push(t, p[1] & 1 ? SIM_EV_FREE : SIM_EV_FREE_REQUESTED + (p[1] & 2) / 2,
         t->ngone && p[1] & 4 ? t->gone[p[2] % t->ngone] : UINT64_C(0xdead0000) + p[2], 0, 0, dev);
    break;
  case 10: { /* a synchronization: a stream, or the whole device */
    sim_event *e = push(t, SIM_EV_SYNC, 0, 0, p[1] & 4 ? -1 : p[1] & 3, dev);
    e->dur = p[2];
    break;
  }
  case 11:
    push(t, SIM_EV_EMPTY_CACHE, 0, 0, 0, dev);
    break;
  case 12: { /* host memory */
    uint64_t addr = UINT64_C(0x7f0000000000) + ((uint64_t)(p[1] & 7) << 20);
    sim_event *e = push(t, p[2] & 1 ? SIM_EV_HOST_FREE : SIM_EV_HOST_ALLOC, addr, (uint64_t)p[3] << 12, 0, -1);
    e->mem = p[2] & 2 ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
    break;
  }
  default: { /* a kernel */
    sim_event *e = push(t, SIM_EV_KERNEL, 0, 0, p[1] & 3, dev);
    e->dur = (int64_t)p[2] * 100;
    break;
  }
  }
}

static void build(trace *t, const uint8_t *p, const uint8_t *end) {
  for (; p + 4 <= end && t->n + 2 <= MAX_EVENTS; p += 4) {
    switch (p[0] & 15) {
    case 0: case 1: case 2: case 3: case 4:
      add_alloc(t, p);
      break;
    case 5: case 6: case 7:
      add_free(t, p, (p[0] & 15) - 5);
      break;
    default:
      add_other(t, p);
    }
  }
}

/* One replay of n events (by the kept engine, or a new one when kept is NULL); a failure aborts. */
static void run_events(replay_engine *kept, const replay_config *cfg, const sim_event *ev, size_t n,
                       const replay_plan *plan, replay_result *r) {
  char err[512] = "";
  replay_array_source as;
  replay_source src = replay_array_source_planned(&as, ev, n, plan);
  int rc = kept ? replay_engine_run(kept, cfg, &src, r, err, sizeof err) : replay_run(cfg, &src, r, err, sizeof err);
  if (rc) {
    fprintf(stderr, "fuzz_engine: a replay failed under %s: %s\n", cfg->spec->ops->name, err);
    abort();
  }
}

static void run(replay_engine *kept, const replay_config *cfg, const trace *t, const replay_plan *plan,
                replay_result *r) {
  run_events(kept, cfg, t->ev, t->n, plan, r);
}

static void agree(const char *way, const replay_result *want, const replay_result *got, int what, const char *model) {
  char buf[512];
  const char *d = replay_result_diff(want, got, what, buf, sizeof buf);
  if (!d) return;
  fprintf(stderr, "fuzz_engine: under %s, the %s replay differs from the plain one: %s\n", model, way, d);
  abort();
}

/* The state at a moment a replay stopped at, walked: what its blocks and segments add up to. */
typedef struct walked {
  int64_t allocated, pending, segments;
  int called, walkable;
  int64_t st_allocated, st_reserved;
} walked;

static int walk_item(void *arg, int device, const sim_walk_item *item, const replay_block_owner *owner) {
  walked *w = arg;
  (void)device, (void)owner;
  if (item->is_segment) w->segments += (int64_t)item->size;
  else if (item->state == SIM_BLOCK_ALLOCATED) w->allocated += (int64_t)item->size;
  else if (item->state == SIM_BLOCK_PENDING_FREE) w->pending += (int64_t)item->size;
  return 0;
}

static void walk_state(void *arg, const replay_state *st) {
  walked *w = arg;
  w->called++;
  w->walkable = st->walkable;
  w->st_allocated = st->allocated;
  w->st_reserved = st->reserved;
  if (st->walkable && replay_state_walk(st, walk_item, w)) abort();
}

/* A replay stopped after event k gives the figures of a replay of the events up to k. */
static void stopped_agrees(const replay_config *plain, trace *t, size_t k, const char *model) {
  walked w = {0};
  replay_stop stop = {.seq = (int64_t)k, .after_ns = -1, .capture = walk_state, .arg = &w};
  replay_config cfg = *plain;
  cfg.stop = &stop;
  replay_result want, got;
  run(NULL, &cfg, t, NULL, &got);
  size_t n = t->n;
  t->n = k + 1;
  run(NULL, plain, t, NULL, &want);
  t->n = n;
  if (w.called != 1 || !got.stopped) {
    fprintf(stderr, "fuzz_engine: under %s, a replay stopped after event %zu captured %d times\n", model, k, w.called);
    abort();
  }
  got.stopped = 0;
  agree("stopped", &want, &got, RESULT_FIGURES, model);
  /* cuda's reserved bytes are the driver's pages, which its segments (one a request) leave out */
  int paged = !strcmp(plain->spec->ops->name, "cuda");
  int segments_fit = paged ? w.segments <= w.st_reserved : w.segments == w.st_reserved;
  if (w.walkable && (w.allocated != w.st_allocated || !segments_fit)) {
    fprintf(stderr, "fuzz_engine: under %s, the state after event %zu walks to %lld allocated (%lld pending) in %lld"
            " reserved, where it says %lld in %lld\n", model, k, (long long)w.allocated, (long long)w.pending,
            (long long)w.segments, (long long)w.st_allocated, (long long)w.st_reserved);
    abort();
  }
  replay_result_release(&want);
  replay_result_release(&got);
}

static void store_failed(const char *what) {
  fprintf(stderr, "fuzz_engine: %s: %s\n", what, store_error(db));
  abort();
}

/* The store, and a call stack for each of the numbers 1 to 7 the trace gives its allocations. */
static void open_store(void) {
  char err[STORE_ERRLEN];
  if (store_open(&db, ":memory:", STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "fuzz_engine: %s\n", err);
    abort();
  }
  for (int i = 1; i < 8; i++) {
    char func[16];
    snprintf(func, sizeof func, "layer%d", i);
    store_frame fr[2] = {{func, "model.py", i}, {"main", "train.py", 1}};
    if ((stacks[i] = store_intern_stack(db, fr, 2)) <= 0) store_failed("a call stack");
  }
}

/* The trace written into the store and replayed from it, as `memplay replay` reads a stored trace:
 * the same result as from memory. */
static void stored_agrees(const replay_config *plain, const sim_event *events, size_t n, const replay_result *want,
                          const char *model) {
  store_trace meta = {.name = (char *)"fuzz", .source_format = (char *)"generated"};
  store_writer *w;
  if (store_begin(db) || store_writer_begin(db, &meta, &w)) store_failed("a new trace");
  for (size_t i = 0; i < n; i++) {
    sim_event ev = events[i];
    if (store_writer_event(w, &ev)) store_failed("an event");
  }
  int64_t id = store_writer_trace_id(w);
  if (store_writer_end(w) || store_commit(db)) store_failed("the trace's end");
  replay_source src;
  char err[512] = "";
  replay_result got;
  if (store_source_open(&src, db, id)) store_failed("the stored trace");
  if (replay_run(plain, &src, &got, err, sizeof err)) {
    fprintf(stderr, "fuzz_engine: a replay from the store failed under %s: %s\n", model, err);
    abort();
  }
  replay_source_close(&src);
  agree("stored", want, &got, RESULT_ALL, model);
  replay_result_release(&got);
  if (store_begin(db) || store_trace_delete(db, id) || store_commit(db)) store_failed("the trace's removal");
}

static replay_engine *kept; /* across inputs, as a script's loop keeps it across replays */

static void null_event(void *ctx, const sim_event *ev, const replay_outcome *o) { (void)ctx, (void)ev, (void)o; }

/* Every way of replaying the events gives what the plain replay gave (want): checked, observed,
 * planned, lean, and by the kept engine after a replay with the configuration `other`. */
static void ways_agree(const replay_config *plain, const replay_config *other, const sim_event *ev, size_t n,
                       const replay_result *want, const char *model) {
  replay_observer obs = {NULL, null_event, NULL};
  replay_config checked = *plain, observed = *plain, lean = *plain;
  checked.check_level = 2;
  observed.observers = &obs, observed.nobservers = 1;
  lean.lean = 1;
  replay_plan plan;
  int planned = replay_plan_build(&plan, ev, n) == 0;
  struct {
    const char *way;
    replay_engine *engine;
    const replay_config *cfg;
    int planned, what;
  } ways[] = {
    {"checked", NULL, &checked, 0, RESULT_ALL},
    {"observed", NULL, &observed, 0, RESULT_ALL},
    {"planned", NULL, plain, 1, RESULT_ALL},
    {"planned and observed", NULL, &observed, 1, RESULT_ALL},
    {"lean", NULL, &lean, 0, RESULT_FIGURES},
    {"lean planned", NULL, &lean, 1, RESULT_FIGURES},
    {"kept engine's", kept, plain, 1, RESULT_ALL},
    {"kept engine's lean", kept, &lean, 1, RESULT_FIGURES},
    {"kept engine's unplanned", kept, plain, 0, RESULT_ALL},
  };
  replay_result got;
  run_events(kept, other, ev, n, planned ? &plan : NULL, &got); /* the kept engine's model then resets */
  replay_result_release(&got);
  for (size_t i = 0; i < sizeof ways / sizeof *ways; i++) {
    run_events(ways[i].engine, ways[i].cfg, ev, n, ways[i].planned && planned ? &plan : NULL, &got);
    agree(ways[i].way, want, &got, ways[i].what, model);
    replay_result_release(&got);
  }
  replay_plan_release(&plan);
}

/* ---- a window: the trace cut after an event, replayed from the state there ------------------- */

/* One device's start: its segments, each followed by its blocks in use, and each block's address
 * in the trace. */
typedef struct start_items {
  sim_walk_item *items;
  uint64_t *trace_addr;
  size_t n, cap, nsegments, nblocks;
} start_items;

/* A window of a trace: the state a replay stopped at as its start, the allocations live then as
 * its preexisting ones, then the events after the cut. */
typedef struct window {
  sim_event ev[2 * MAX_EVENTS];
  size_t n, npre; /* events; the preexisting ones first */
  start_items dev[2];
  int unowned; /* a block in use the engine knows no allocation of */
} window;

static void start_add(start_items *d, const sim_walk_item *item, uint64_t trace_addr) {
  if (d->n == d->cap) {
    size_t cap = d->cap;
    sim_grow((void **)&d->items, &d->cap, d->n + 1, sizeof *d->items);
    sim_grow((void **)&d->trace_addr, &cap, d->n + 1, sizeof *d->trace_addr);
  }
  d->items[d->n] = *item;
  d->trace_addr[d->n++] = trace_addr;
  if (item->is_segment) d->nsegments++;
  else d->nblocks++;
}

/* Each segment, and each block in use with the preexisting allocation that takes it (free blocks
 * are the gaps a restore leaves). A block whose free was requested waits for its completion. */
static int window_item(void *arg, int device, const sim_walk_item *item, const replay_block_owner *owner) {
  window *w = arg;
  sim_walk_item it = *item;
  it.handle = 0;
  if (item->is_segment) {
    start_add(&w->dev[device], &it, 0);
    return 0;
  }
  if (item->state == SIM_BLOCK_FREE) return 0;
  if (!owner->known) {
    w->unowned = 1;
    return 0;
  }
  if (owner->freed) it.state = SIM_BLOCK_PENDING_FREE;
  start_add(&w->dev[device], &it, owner->trace_addr);
  sim_event *e = &w->ev[w->n++];
  sim_event_init(e);
  e->kind = SIM_EV_ALLOC;
  e->flags |= SIM_EVF_PREEXISTING;
  e->addr = owner->trace_addr;
  e->size = owner->size;
  e->stream = item->stream;
  e->device = (int16_t)device;
  e->mem = SIM_MEM_DEVICE;
  e->category = (uint8_t)owner->category;
  e->cat_source = owner->category ? SIM_CATSRC_SOURCE : SIM_CATSRC_NONE;
  e->stack = owner->stack;
  return 0;
}

static void window_capture(void *arg, const replay_state *st) {
  if (!st->walkable || replay_state_walk(st, window_item, arg)) abort();
}

/* The window of t after event k: the state there, walked, then the events after it. */
static void window_make(window *w, const replay_config *plain, const trace *t, size_t k) {
  replay_stop stop = {.seq = (int64_t)k, .after_ns = -1, .capture = window_capture, .arg = w};
  replay_config cfg = *plain;
  cfg.stop = &stop;
  replay_result r;
  run(NULL, &cfg, t, NULL, &r);
  replay_result_release(&r);
  w->npre = w->n;
  for (size_t i = k + 1; i < t->n; i++) w->ev[w->n++] = t->ev[i];
  for (size_t i = 0; i < w->n; i++) w->ev[i].seq = (int64_t)i;
}

/* What one event's allocation did, as an observer sees it. */
typedef struct step {
  uint64_t addr, size;
  int oom, called; /* did not fit; the model called its device (or its reserved bytes moved) */
} step;

typedef struct steps {
  step s[2 * MAX_EVENTS];
  size_t n;
} steps;

static void note_step(void *ctx, const sim_event *ev, const replay_outcome *o) {
  steps *s = ctx;
  (void)ev;
  s->s[s->n++] = (step){o->placement.addr, o->placement.size, o->oom,
                        o->device_mallocs || o->device_frees || o->device_maps || o->device_unmaps || o->reserved_delta};
}

/* Whether ev allocates an address a zero-byte allocation took up to event k. Such an allocation
 * has no block, so a window's start does not carry it: the engine of the whole trace holds its
 * address (a new allocation there is a duplicate) and the window's does not. */
static int zero_sized_before(const trace *t, size_t k, const sim_event *ev) {
  if (ev->kind != SIM_EV_ALLOC) return 0;
  for (size_t i = 0; i <= k; i++)
    if (t->ev[i].kind == SIM_EV_ALLOC && !t->ev[i].size && t->ev[i].addr == ev->addr) return 1;
  return 0;
}

/* The window's replay and the whole trace's make the same placements after the cut, up to the
 * first event where a model calls its device, which both must do (and fit, or not, alike); after
 * it the addresses a simulated device hands out differ by design (the window's start holds its
 * segments' memory without the driver's history). The comparison also ends at an allocation of
 * an address a zero-byte allocation took before the cut (zero_sized_before). */
static void continues(const replay_config *plain, const replay_config *wcfg, const trace *t, size_t k,
                      const window *w, const char *model) {
  static steps whole, win;
  replay_observer obs[2] = {{&whole, note_step, NULL}, {&win, note_step, NULL}};
  replay_config a = *plain, b = *wcfg;
  a.observers = &obs[0], a.nobservers = 1;
  b.observers = &obs[1], b.nobservers = 1;
  whole.n = win.n = 0;
  replay_result r;
  run(NULL, &a, t, NULL, &r);
  replay_result_release(&r);
  run_events(NULL, &b, w->ev, w->n, NULL, &r);
  replay_result_release(&r);
  if (whole.n != t->n || win.n != w->n) {
    fprintf(stderr, "fuzz_engine: under %s, observers saw %zu of %zu and %zu of %zu events\n", model, whole.n, t->n,
            win.n, w->n);
    abort();
  }
  for (size_t i = k + 1, j = w->npre; i < t->n; i++, j++) {
    if (zero_sized_before(t, k, &t->ev[i])) return;
    const step *x = &whole.s[i], *y = &win.s[j];
    if (x->called != y->called || x->oom != y->oom) {
      fprintf(stderr, "fuzz_engine: under %s, cut after event %zu, event %zu %s the device and %s in the whole trace,"
              " and %s it and %s in the window\n", model, k, i, x->called ? "called" : "did not call",
              x->oom ? "did not fit" : "fitted", y->called ? "called" : "did not call", y->oom ? "did not fit" : "fitted");
      abort();
    }
    if (x->called || x->oom) return;
    if (x->addr != y->addr || x->size != y->size) {
      fprintf(stderr, "fuzz_engine: under %s, cut after event %zu, event %zu was placed at %#llx (%llu bytes) in the"
              " whole trace and at %#llx (%llu bytes) in the window\n", model, k, i, (unsigned long long)x->addr,
              (unsigned long long)x->size, (unsigned long long)y->addr, (unsigned long long)y->size);
      abort();
    }
  }
}

/*
 * The trace cut after event k and replayed from the state the replay reached there, as a replay
 * of a recorded window starts (the models that can restore one): every way of replaying the
 * window agrees with its plain replay, a replay from the store included, and the window goes on
 * as the whole trace did.
 */
static void window_agrees(const replay_config *plain, const replay_config *other, const trace *t, size_t k,
                          const char *model) {
  static window w;
  for (int d = 0; d < 2; d++) free(w.dev[d].items), free(w.dev[d].trace_addr);
  memset(&w, 0, sizeof w);
  window_make(&w, plain, t, k);
  if (w.unowned) {
    fprintf(stderr, "fuzz_engine: under %s, a block in use after event %zu has no allocation\n", model, k);
    abort();
  }
  replay_start start[2];
  size_t nstart = 0;
  for (int d = 0; d < 2; d++) {
    const start_items *s = &w.dev[d];
    if (s->n) start[nstart++] = (replay_start){d, s->items, s->trace_addr, s->n, s->nsegments, s->nblocks};
  }
  replay_config wcfg = *plain;
  wcfg.start = start, wcfg.nstart = nstart;
  replay_result want;
  run_events(NULL, &wcfg, w.ev, w.n, NULL, &want);
  ways_agree(&wcfg, other, w.ev, w.n, &want, model);
  stored_agrees(&wcfg, w.ev, w.n, &want, model);
  replay_result_release(&want);
  continues(plain, &wcfg, t, k, &w, model);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  if (!kept) kept = replay_engine_new();
  if (!db) open_store();
  const char *model = models[data[0] % NMODELS];
  static trace t;
  memset(&t, 0, sizeof t);
  t.ndevices = 1 + (data[1] >> 7);
  build(&t, data + 2, data + size);

  sim_spec spec;
  char err[512];
  if (sim_spec_parse(&spec, model, err, sizeof err) != SIM_OK) {
    fprintf(stderr, "fuzz_engine: %s: %s\n", model, err);
    abort();
  }
  replay_config plain = {.spec = &spec, .capacity = capacities[data[1] % NCAPS], .timeline_points = 16,
                         .top_sites = 4};
  replay_config other = plain;
  other.capacity = capacities[(data[1] + 1) % NCAPS];
  replay_result want;
  run(NULL, &plain, &t, NULL, &want);
  ways_agree(&plain, &other, t.ev, t.n, &want, model);
  stored_agrees(&plain, t.ev, t.n, &want, model);
  replay_result_release(&want);
  if (t.n) {
    size_t k = (size_t)data[size - 1] * t.n / 256;
    stopped_agrees(&plain, &t, k, model);
    if (spec.ops->restore) window_agrees(&plain, &other, &t, k, model);
  }
  sim_spec_release(&spec);
  return 0;
}

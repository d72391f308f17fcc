/* categorize.c: the post-import pass that gives every allocation a category (rules in categorize.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/hashmap.h"
#include "../sim/slab.h"
#include "categorize.h"

/* What the frames of a call stack say (a bit set, accumulated from the outermost frame in). */
enum {
  FF_GRAD = 1,     /* gradient accumulation, zero_grad */
  FF_OPT = 2,      /* optimizer code */
  FF_BWD = 4,      /* the autograd engine, a backward function */
  FF_PINIT = 8,    /* module construction, moving or loading a model */
  FF_TOCOPY = 16,  /* a tensor conversion or copy (aten::to, _to_copy) */
  FF_DATA = 32,    /* data loading, pinning */
  FF_FWD = 64,     /* a module's forward */
  FF_KNOWN = 128,  /* computed (so that 0 flags can be cached) */
};

/* The class of an allocation's code, in order of precedence. */
enum { CL_NONE, CL_FORWARD, CL_TOCOPY, CL_INPUT, CL_PARAM_INIT, CL_BACKWARD, CL_OPTIMIZER, CL_GRAD };

/* Phases of a training step. */
enum { PH_NONE, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_ZERO_GRAD };

typedef struct live {
  uint32_t next_free;     /* slab free list (must be first) */
  int64_t seq;
  uint64_t size;
  int64_t epoch, boundaries, bwd_starts, stack;
  uint8_t cls, phase, preexisting, h2d;
} live;

typedef struct pending {
  int64_t seq;
  uint8_t cat, src;
} pending;

typedef struct cstate {
  store *s;
  int64_t trace_id;
  sim_map dev, host; /* address -> slab index */
  sim_slab slab;
  sim_map flags;     /* callsite id -> frame flags */
  int phase;
  int64_t phase_end; /* ns, -1 when the phase lasts until the next one */
  int64_t epoch, boundaries, bwd_starts;
  int explicit_steps;
  int64_t name_backward, name_optimizer, name_zero_grad, name_forward;
  uint32_t last_tocopy; /* live index of the latest conversion allocation, for its copy */
  int64_t last_tocopy_stack;
  pending *upd;
  size_t nupd, upd_cap;
  categorize_stats st;
  char *err;
  size_t errlen;
} cstate;

/* ---- call stacks ------------------------------------------------------------------------------ */

static int has(const char *s, const char *p) { return s && strstr(s, p) != NULL; }
static int is(const char *s, const char *p) { return s && !strcmp(s, p); }
static int starts(const char *s, const char *p) { return s && !strncmp(s, p, strlen(p)); }

static unsigned frame_flags(const char *n, const char *f) {
  unsigned fl = 0;
  if (has(n, "AccumulateGrad") || is(n, "zero_grad") || starts(n, "Optimizer.zero_grad")) fl |= FF_GRAD;
  if (starts(n, "Optimizer.step") || starts(f, "torch/optim/") || has(f, "/torch/optim/") ||
      has(f, "/torch/distributed/optim/"))
    fl |= FF_OPT;
  if (has(n, "evaluate_function") || has(n, "Backward") || is(n, "backward") || has(n, "_engine_run_backward") ||
      is(n, "_backward_impl") || has(n, "autograd::Engine::thread_main") || is(n, "_make_grads"))
    fl |= FF_BWD;
  if ((has(f, "torch/nn/modules/") &&
       (is(n, "__init__") || is(n, "reset_parameters") || is(n, "_apply") || is(n, "to") || is(n, "cuda") ||
        is(n, "_load_from_state_dict") || is(n, "load_state_dict"))) ||
      has(f, "torch/nn/init.py"))
    fl |= FF_PINIT;
  if (is(n, "aten::to") || is(n, "aten::_to_copy") || has(n, "at::native::_to_copy") || has(n, "at::_ops::_to_copy"))
    fl |= FF_TOCOPY;
  if (has(f, "torch/utils/data/") || has(n, "DataLoader") || has(n, "pin_memory")) fl |= FF_DATA;
  if (is(n, "forward") || is(n, "_call_impl") || is(n, "_wrapped_call_impl") || starts(n, "nn.Module:") ||
      has(n, "DistributedDataParallel.forward") || is(n, "CompiledFunction") || has(n, "## forward") ||
      starts(n, "Torch-Compiled Region"))
    fl |= FF_FWD;
  return fl;
}

/* The flags of call site id: its frame's and every outer frame's, cached per call site. */
static int stack_flags(cstate *c, int64_t id, unsigned *out) {
  *out = 0;
  if (id <= 0) return 0;
  uint64_t *hit = sim_map_get(&c->flags, (uint64_t)id);
  if (hit) {
    *out = (unsigned)*hit & ~(unsigned)FF_KNOWN;
    return 0;
  }
  sqlite3_stmt *q = store_stmt(c->s,
                               "SELECT c.parent_id, n.value, f.value FROM callsites c JOIN frames fr ON fr.id = c.frame_id "
                               "JOIN strings n ON n.id = fr.name_id JOIN strings f ON f.id = fr.file_id WHERE c.id = ?1");
  if (!q) return -1;
  /* Walk outwards to a cached call site, then fill the cache on the way back in. */
  int64_t chain[256];
  unsigned own[256];
  size_t n = 0;
  unsigned outer = 0;
  for (int64_t cur = id; cur > 0;) {
    uint64_t *h = sim_map_get(&c->flags, (uint64_t)cur);
    if (h) {
      outer = (unsigned)*h & ~(unsigned)FF_KNOWN;
      break;
    }
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, cur);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
      if (rc == SQLITE_DONE) break;
      return store_fail(c->s, q, "cannot read call stack");
    }
    int64_t parent = sqlite3_column_int64(q, 0);
    unsigned fl = frame_flags((const char *)sqlite3_column_text(q, 1), (const char *)sqlite3_column_text(q, 2));
    if (n == sizeof chain / sizeof chain[0]) { /* very deep: fold the middle into one entry */
      own[n - 1] |= fl;
    } else {
      chain[n] = cur;
      own[n++] = fl;
    }
    cur = parent;
  }
  sqlite3_reset(q);
  for (size_t i = n; i-- > 0;) {
    outer |= own[i];
    *sim_map_put(&c->flags, (uint64_t)chain[i], NULL) = outer | FF_KNOWN;
  }
  *out = outer;
  return 0;
}

static int class_of(unsigned fl) {
  if (fl & FF_GRAD) return CL_GRAD;
  if (fl & FF_OPT) return CL_OPTIMIZER;
  if (fl & FF_BWD) return CL_BACKWARD;
  if (fl & FF_PINIT) return CL_PARAM_INIT;
  if (fl & FF_DATA) return CL_INPUT;
  if ((fl & FF_TOCOPY) && !(fl & FF_FWD)) return CL_TOCOPY;
  if (fl & FF_FWD) return CL_FORWARD;
  return CL_NONE;
}

/* ---- updates ------------------------------------------------------------------------------------ */

int categorize_set(store *s, int64_t trace_id, int64_t seq, int category, int cat_source) {
  sqlite3_stmt *q = store_stmt(s, "UPDATE events SET info = (info & ~(255 << 16)) | (?2 << 16) | (?3 << 20) WHERE id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id << 32 | seq);
  sqlite3_bind_int(q, 2, category & 15);
  sqlite3_bind_int(q, 3, cat_source & 15);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot set the category of an event");
  return 0;
}

static int flush_updates(cstate *c) {
  for (size_t i = 0; i < c->nupd; i++)
    if (categorize_set(c->s, c->trace_id, c->upd[i].seq, c->upd[i].cat, c->upd[i].src)) {
      snprintf(c->err, c->errlen, "%s", store_error(c->s));
      return -1;
    }
  c->nupd = 0;
  return 0;
}

/* ---- the rules ---------------------------------------------------------------------------------- */

/* Decides the category of a live allocation whose life ends now (end: it is still live when the
 * trace ends). */
static int decide(cstate *c, const live *e, int end) {
  int same_epoch = !end && c->epoch == e->epoch;
  int64_t crossed = c->boundaries - e->boundaries;
  int cat = SIM_CAT_UNKNOWN, src = SIM_CATSRC_STACK;
  switch (e->cls) {
  case CL_GRAD: cat = SIM_CAT_GRADIENT; break;
  case CL_OPTIMIZER: cat = same_epoch ? SIM_CAT_TEMPORARY : SIM_CAT_OPTIMIZER_STATE; break;
  case CL_BACKWARD: cat = same_epoch ? SIM_CAT_TEMPORARY : SIM_CAT_GRADIENT; break;
  case CL_PARAM_INIT: cat = SIM_CAT_PARAMETER; break;
  case CL_INPUT: cat = SIM_CAT_INPUT; break;
  default:
    if (e->cls == CL_TOCOPY && e->h2d) {
      cat = SIM_CAT_INPUT;
      break;
    }
    if (crossed >= 2 || (end && (e->preexisting || (c->explicit_steps && e->boundaries == 0)))) {
      cat = SIM_CAT_PARAMETER; /* persistent */
      src = SIM_CATSRC_LIFETIME;
      break;
    }
    if ((e->phase == PH_FORWARD || e->phase == PH_NONE) && c->bwd_starts > e->bwd_starts) cat = SIM_CAT_ACTIVATION;
    else if (!end) cat = SIM_CAT_TEMPORARY;
    if (e->cls != CL_FORWARD) src = SIM_CATSRC_LIFETIME;
    break;
  }
  if (cat == SIM_CAT_UNKNOWN) return 0;
  c->st.changed++;
  c->st.count[src]++;
  c->st.count[SIM_CATSRC_NONE]--;
  c->st.bytes[src] += (int64_t)e->size;
  c->st.bytes[SIM_CATSRC_NONE] -= (int64_t)e->size;
  c->st.by_category[cat]++;
  c->st.by_category[SIM_CAT_UNKNOWN]--;
  sim_grow((void **)&c->upd, &c->upd_cap, c->nupd + 1, sizeof *c->upd);
  c->upd[c->nupd++] = (pending){e->seq, (uint8_t)cat, (uint8_t)src};
  return c->nupd >= 4096 ? flush_updates(c) : 0;
}

static void set_phase(cstate *c, int phase, int64_t end) {
  if (phase == PH_BACKWARD && c->phase != PH_BACKWARD) c->bwd_starts++;
  if (phase != c->phase) c->epoch++;
  if (phase == PH_FORWARD && c->phase == PH_OPTIMIZER && !c->explicit_steps) c->boundaries++; /* a new step */
  c->phase = phase;
  c->phase_end = end;
}

static void on_marker(cstate *c, const sim_event *ev) {
  if (ev->flags & SIM_EVF_STEP_BEGIN) {
    c->explicit_steps = 1;
    c->boundaries++;
    c->epoch++;
    c->phase = PH_FORWARD;
    c->phase_end = -1;
    return;
  }
  if (!(ev->flags & SIM_EVF_PHASE) || ev->name <= 0) return;
  int64_t end = ev->dur > 0 ? ev->ts + ev->dur : -1;
  if (ev->name == c->name_backward) set_phase(c, PH_BACKWARD, end);
  else if (ev->name == c->name_optimizer) set_phase(c, PH_OPTIMIZER, end);
  else if (ev->name == c->name_zero_grad) set_phase(c, PH_ZERO_GRAD, end);
  else if (ev->name == c->name_forward) set_phase(c, PH_FORWARD, end);
}

static int on_alloc(cstate *c, const sim_event *ev, sim_map *m) {
  c->st.allocations++;
  int decided = ev->category != SIM_CAT_UNKNOWN || ev->cat_source != SIM_CATSRC_NONE;
  c->st.count[ev->cat_source < SIM_CATSRC__COUNT ? ev->cat_source : 0]++;
  c->st.bytes[ev->cat_source < SIM_CATSRC__COUNT ? ev->cat_source : 0] += (int64_t)ev->size;
  c->st.by_category[ev->category < SIM_CAT__COUNT ? ev->category : 0]++;
  unsigned fl;
  if (stack_flags(c, ev->stack, &fl)) {
    snprintf(c->err, c->errlen, "%s", store_error(c->s));
    return -1;
  }
  int cls = class_of(fl);
  /* The allocations' code moves the phase on where no marker did. */
  if (cls == CL_BACKWARD && c->phase != PH_BACKWARD) set_phase(c, PH_BACKWARD, -1);
  else if (cls == CL_OPTIMIZER && c->phase != PH_OPTIMIZER) set_phase(c, PH_OPTIMIZER, -1);
  else if (cls == CL_FORWARD && (c->phase == PH_BACKWARD || c->phase == PH_OPTIMIZER)) set_phase(c, PH_FORWARD, -1);
  int existed;
  uint64_t *slot = sim_map_put(m, ev->addr, &existed);
  if (existed) { /* allocated again while live: the old one ends here */
    live *old = sim_slab_at(&c->slab, (uint32_t)*slot);
    if (decide(c, old, 0)) return -1;
    sim_slab_free(&c->slab, (uint32_t)*slot);
  }
  if (decided) {
    sim_map_del(m, ev->addr, NULL);
    return 0;
  }
  uint32_t idx = sim_slab_new(&c->slab);
  *sim_map_get(m, ev->addr) = idx;
  live *e = sim_slab_at(&c->slab, idx);
  *e = (live){.seq = ev->seq, .size = ev->size, .epoch = c->epoch, .boundaries = c->boundaries,
              .bwd_starts = c->bwd_starts, .stack = ev->stack, .cls = (uint8_t)cls, .phase = (uint8_t)c->phase,
              .preexisting = (ev->flags & SIM_EVF_PREEXISTING) != 0};
  if (cls == CL_TOCOPY) {
    c->last_tocopy = idx;
    c->last_tocopy_stack = ev->stack;
  }
  return 0;
}

static int on_free(cstate *c, const sim_event *ev, sim_map *m) {
  uint64_t v;
  if (!sim_map_del(m, ev->addr, &v)) return 0;
  live *e = sim_slab_at(&c->slab, (uint32_t)v);
  unsigned fl;
  if (stack_flags(c, ev->stack, &fl)) {
    snprintf(c->err, c->errlen, "%s", store_error(c->s));
    return -1;
  }
  /* Gradient accumulation consumes what the backward pass computed for a parameter: the
   * tensor it frees was that parameter's gradient (PyTorch's memory profiler says the same). */
  if ((fl & FF_GRAD) && !(fl & FF_OPT) && (e->cls == CL_BACKWARD || e->cls == CL_NONE)) e->cls = CL_GRAD;
  int rc = decide(c, e, 0);
  if (c->last_tocopy == (uint32_t)v) c->last_tocopy = 0;
  sim_slab_free(&c->slab, (uint32_t)v);
  return rc;
}

static int64_t string_id(store *s, const char *text) {
  sqlite3_stmt *q = store_stmt(s, "SELECT id FROM strings WHERE value = ?1");
  if (!q) return -1;
  sqlite3_bind_text(q, 1, text, -1, SQLITE_STATIC);
  int64_t id = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
  sqlite3_reset(q);
  return id;
}

static int write_notes(cstate *c) {
  static const char *const names[SIM_CATSRC__COUNT] = {"categories_undecided", "categories_from_source",
                                                       "categories_from_stack", "categories_from_lifetime",
                                                       "categories_set_by_user"};
  sqlite3_stmt *q = store_stmt(c->s,
                               "INSERT INTO trace_stats(trace_id, name, severity, value, detail) VALUES (?1, ?2, 'info', ?3, ?4) "
                               "ON CONFLICT(trace_id, name) DO UPDATE SET value = excluded.value, detail = excluded.detail");
  if (!q) return -1;
  for (int k = 0; k < SIM_CATSRC__COUNT; k++) {
    if (!c->st.count[k]) continue;
    char detail[160];
    snprintf(detail, sizeof detail, "allocations (%lld bytes in all) whose category %s", (long long)c->st.bytes[k],
             k == SIM_CATSRC_NONE ? "no rule decided" : k == SIM_CATSRC_SOURCE ? "the source gave"
             : k == SIM_CATSRC_STACK ? "came from the call stack" : k == SIM_CATSRC_LIFETIME ? "came from the lifetime"
             : "was set by hand");
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, c->trace_id);
    sqlite3_bind_text(q, 2, names[k], -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, c->st.count[k]);
    sqlite3_bind_text(q, 4, detail, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(q) != SQLITE_DONE) return store_fail(c->s, q, "cannot store import note");
  }
  sqlite3_reset(q);
  return 0;
}

int categorize_trace(store *s, int64_t trace_id, categorize_stats *stats, char *err, size_t errlen) {
  cstate c;
  memset(&c, 0, sizeof c);
  c.s = s;
  c.trace_id = trace_id;
  c.err = err;
  c.errlen = errlen;
  c.phase_end = -1;
  sim_map_init(&c.dev);
  sim_map_init(&c.host);
  sim_map_init(&c.flags);
  sim_slab_init(&c.slab, sizeof(live));
  err[0] = 0;
  int rc = 0;
  if ((c.name_backward = string_id(s, "backward")) < 0 || (c.name_optimizer = string_id(s, "optimizer")) < 0 ||
      (c.name_zero_grad = string_id(s, "zero_grad")) < 0 || (c.name_forward = string_id(s, "forward")) < 0) {
    snprintf(err, errlen, "%s", store_error(s));
    rc = -1;
  }
  store_reader *r = NULL;
  if (!rc && store_reader_open(s, trace_id, &r)) {
    snprintf(err, errlen, "%s", store_error(s));
    rc = -1;
  }
  sim_event ev;
  int got = 0;
  while (!rc && (got = store_reader_next(r, &ev)) == 1) {
    if (c.phase_end >= 0 && ev.ts > c.phase_end) set_phase(&c, c.explicit_steps ? PH_FORWARD : PH_NONE, -1);
    switch (ev.kind) {
    case SIM_EV_MARKER: on_marker(&c, &ev); break;
    case SIM_EV_ALLOC: rc = on_alloc(&c, &ev, &c.dev); break;
    case SIM_EV_HOST_ALLOC: rc = on_alloc(&c, &ev, &c.host); break;
    case SIM_EV_FREE:
    case SIM_EV_FREE_REQUESTED:
    case SIM_EV_FREE_COMPLETED: rc = on_free(&c, &ev, &c.dev); break;
    case SIM_EV_HOST_FREE: rc = on_free(&c, &ev, &c.host); break;
    case SIM_EV_MEMCPY:
      /* A conversion that copied from the host: the data came in from outside the model. */
      if (ev.dir == SIM_COPY_H2D && c.last_tocopy && ev.stack == c.last_tocopy_stack) {
        live *e = sim_slab_at(&c.slab, c.last_tocopy);
        e->h2d = 1;
        c.last_tocopy = 0;
      }
      break;
    default: break;
    }
  }
  if (!rc && got < 0) {
    snprintf(err, errlen, "%s", store_error(s));
    rc = -1;
  }
  store_reader_close(r);
  /* What is still live when the trace ends. */
  sim_map *maps[2] = {&c.dev, &c.host};
  for (int i = 0; i < 2 && !rc; i++) {
    size_t it = 0;
    uint64_t k, v;
    while (!rc && sim_map_next(maps[i], &it, &k, &v)) rc = decide(&c, sim_slab_at(&c.slab, (uint32_t)v), 1);
  }
  if (!rc) rc = flush_updates(&c);
  if (!rc && write_notes(&c)) {
    snprintf(err, errlen, "%s", store_error(s));
    rc = -1;
  }
  if (stats) *stats = c.st;
  sim_map_release(&c.dev);
  sim_map_release(&c.host);
  sim_map_release(&c.flags);
  sim_slab_release(&c.slab);
  free(c.upd);
  return rc;
}

int64_t categorize_mark(store *s) {
  sqlite3_stmt *q = store_stmt(s, "SELECT coalesce(max(id), 0) FROM traces");
  if (!q) return -1;
  if (sqlite3_step(q) != SQLITE_ROW) return store_fail(s, q, "cannot read traces");
  int64_t id = sqlite3_column_int64(q, 0);
  sqlite3_reset(q);
  return id;
}

int categorize_since(store *s, int64_t mark, char *err, size_t errlen) {
  for (;;) {
    sqlite3_stmt *q = store_stmt(s, "SELECT min(id) FROM traces WHERE id > ?1");
    if (!q) {
      snprintf(err, errlen, "%s", store_error(s));
      return -1;
    }
    sqlite3_bind_int64(q, 1, mark);
    if (sqlite3_step(q) != SQLITE_ROW) {
      snprintf(err, errlen, "%s", store_error(s));
      sqlite3_reset(q);
      return -1;
    }
    int none = sqlite3_column_type(q, 0) == SQLITE_NULL;
    mark = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    if (none) return 0;
    if (categorize_trace(s, mark, NULL, err, errlen)) return -1;
  }
}

/* categorize.c: the category rules as an engine over events, and the pass run on every imported trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "sim/slab.h"
#include "categorize.h"

/* What frames say (categorize_frame_flags). */
enum {
  FF_GRAD = 1,    /* gradient accumulation, zero_grad */
  FF_OPT = 2,     /* optimizer code */
  FF_BWD = 4,     /* the autograd engine, a backward function */
  FF_PINIT = 8,   /* module construction, moving or loading a model */
  FF_TOCOPY = 16, /* a tensor conversion or copy (aten::to, _to_copy) */
  FF_DATA = 32,   /* data loading, pinning */
  FF_FWD = 64,    /* a module's forward */
};

/* The class of an allocation's code, in order of precedence. */
enum { CL_NONE, CL_FORWARD, CL_TOCOPY, CL_INPUT, CL_PARAM_INIT, CL_BACKWARD, CL_OPTIMIZER, CL_GRAD };

/* Phases of a training step. */
enum { PH_NONE, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_ZERO_GRAD };

static int has(const char *s, const char *p) { return s && strstr(s, p) != NULL; }
static int is(const char *s, const char *p) { return s && !strcmp(s, p); }
static int starts(const char *s, const char *p) { return s && !strncmp(s, p, strlen(p)); }

unsigned categorize_frame_flags(const char *n, const char *f) {
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

/* ---- the engine -------------------------------------------------------------------------------- */

typedef struct live {
  uint32_t next_free; /* the slab's free list (must be first) */
  int64_t seq;
  int64_t epoch, boundaries, bwd_starts;
  uint8_t cls, phase, preexisting, h2d;
} live;

struct categorizer {
  categorize_fn fn;
  void *arg;
  int64_t names[4]; /* backward, optimizer, zero_grad, forward */
  sim_map dev, host; /* address -> slab index */
  sim_slab slab;
  int phase;
  int64_t phase_end; /* ns, -1 when the phase lasts until the next one */
  int64_t epoch, boundaries, bwd_starts;
  int explicit_steps;
  uint32_t last_tocopy; /* the latest conversion allocation, for the copy that follows it */
  int64_t last_tocopy_stack;
};

categorizer *categorizer_new(const int64_t phase_names[4], categorize_fn fn, void *arg) {
  categorizer *c = sim_xcalloc(1, sizeof *c);
  c->fn = fn;
  c->arg = arg;
  memcpy(c->names, phase_names, sizeof c->names);
  sim_map_init(&c->dev);
  sim_map_init(&c->host);
  sim_slab_init(&c->slab, sizeof(live));
  c->phase_end = -1;
  return c;
}

void categorizer_free(categorizer *c) {
  if (!c) return;
  sim_map_release(&c->dev);
  sim_map_release(&c->host);
  sim_slab_release(&c->slab);
  free(c);
}

/* Decides the category of a live allocation whose life ends now (end: the trace ended first). */
static int decide(categorizer *c, const live *e, int end) {
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
  return c->fn(c->arg, e->seq, cat, src);
}

static void set_phase(categorizer *c, int phase, int64_t end) {
  if (phase == PH_BACKWARD && c->phase != PH_BACKWARD) c->bwd_starts++;
  if (phase != c->phase) c->epoch++;
  if (phase == PH_FORWARD && c->phase == PH_OPTIMIZER && !c->explicit_steps) c->boundaries++; /* a new step */
  c->phase = phase;
  c->phase_end = end;
}

static void on_marker(categorizer *c, const sim_event *ev) {
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
  if (ev->name == c->names[0]) set_phase(c, PH_BACKWARD, end);
  else if (ev->name == c->names[1]) set_phase(c, PH_OPTIMIZER, end);
  else if (ev->name == c->names[2]) set_phase(c, PH_ZERO_GRAD, end);
  else if (ev->name == c->names[3]) set_phase(c, PH_FORWARD, end);
}

static int on_alloc(categorizer *c, const sim_event *ev, unsigned fl, sim_map *m) {
  int cls = class_of(fl);
  int pre = (ev->flags & SIM_EVF_PREEXISTING) != 0;
  /* The allocations' code moves the phase on where no marker did; a block live before the
   * trace began says nothing about the phase the trace is in. */
  if (!pre) {
    if (cls == CL_BACKWARD && c->phase != PH_BACKWARD) set_phase(c, PH_BACKWARD, -1);
    else if (cls == CL_OPTIMIZER && c->phase != PH_OPTIMIZER) set_phase(c, PH_OPTIMIZER, -1);
    else if (cls == CL_FORWARD && (c->phase == PH_BACKWARD || c->phase == PH_OPTIMIZER)) set_phase(c, PH_FORWARD, -1);
  }
  uint64_t old;
  if (sim_map_del(m, ev->addr, &old)) { /* allocated again while live: the old one ends here */
    int rc = decide(c, sim_slab_at(&c->slab, (uint32_t)old), 0);
    if (c->last_tocopy == (uint32_t)old) c->last_tocopy = 0;
    sim_slab_free(&c->slab, (uint32_t)old);
    if (rc) return -1;
  }
  if (ev->category != SIM_CAT_UNKNOWN || ev->cat_source != SIM_CATSRC_NONE) return 0; /* decided already */
  uint32_t idx = sim_slab_new(&c->slab);
  *sim_map_put(m, ev->addr, NULL) = idx;
  live *e = sim_slab_at(&c->slab, idx);
  if (pre) /* made before the trace's start, whenever the importer learns of it */
    *e = (live){.seq = ev->seq, .cls = (uint8_t)cls, .phase = PH_NONE, .preexisting = 1};
  else
    *e = (live){.seq = ev->seq, .epoch = c->epoch, .boundaries = c->boundaries, .bwd_starts = c->bwd_starts,
                .cls = (uint8_t)cls, .phase = (uint8_t)c->phase};
  if (cls == CL_TOCOPY && !pre) {
    c->last_tocopy = idx;
    c->last_tocopy_stack = ev->stack;
  }
  return 0;
}

static int on_free(categorizer *c, const sim_event *ev, unsigned fl, sim_map *m) {
  uint64_t v;
  if (!sim_map_del(m, ev->addr, &v)) return 0;
  live *e = sim_slab_at(&c->slab, (uint32_t)v);
  /* Gradient accumulation consumes what the backward pass computed for a parameter: the
   * tensor it frees was that parameter's gradient (PyTorch's memory profiler says the same). */
  if ((fl & FF_GRAD) && !(fl & FF_OPT) && (e->cls == CL_BACKWARD || e->cls == CL_NONE)) e->cls = CL_GRAD;
  /* A block live before the recording began has no allocation stack; the code that frees it
   * says whose it was: the optimizer frees (replaces) its own state. */
  else if (e->preexisting && e->cls == CL_NONE && (fl & FF_OPT)) e->cls = CL_OPTIMIZER;
  int rc = decide(c, e, 0);
  if (c->last_tocopy == (uint32_t)v) c->last_tocopy = 0;
  sim_slab_free(&c->slab, (uint32_t)v);
  return rc;
}

int categorizer_event(categorizer *c, const sim_event *ev, unsigned fl) {
  if (c->phase_end >= 0 && ev->ts > c->phase_end) set_phase(c, c->explicit_steps ? PH_FORWARD : PH_NONE, -1);
  switch (ev->kind) {
  case SIM_EV_MARKER: on_marker(c, ev); return 0;
  case SIM_EV_ALLOC: return on_alloc(c, ev, fl, &c->dev);
  case SIM_EV_HOST_ALLOC: return on_alloc(c, ev, fl, &c->host);
  case SIM_EV_FREE:
  case SIM_EV_FREE_REQUESTED:
  case SIM_EV_FREE_COMPLETED: return on_free(c, ev, fl, &c->dev);
  case SIM_EV_HOST_FREE: return on_free(c, ev, fl, &c->host);
  case SIM_EV_MEMCPY:
    /* A conversion that copied from the host: the data came in from outside the model. */
    if (ev->dir == SIM_COPY_H2D && c->last_tocopy && ev->stack == c->last_tocopy_stack) {
      ((live *)sim_slab_at(&c->slab, c->last_tocopy))->h2d = 1;
      c->last_tocopy = 0;
    }
    return 0;
  default: return 0;
  }
}

int categorizer_finish(categorizer *c) {
  sim_map *maps[2] = {&c->dev, &c->host};
  for (int i = 0; i < 2; i++) {
    size_t it = 0;
    uint64_t k, v;
    while (sim_map_next(maps[i], &it, &k, &v))
      if (decide(c, sim_slab_at(&c->slab, (uint32_t)v), 1)) return -1;
    sim_map_clear(maps[i]);
  }
  return 0;
}

/* ---- the pass over a stored trace --------------------------------------------------------------- */

static uint64_t category_change(int64_t seq, int category, int cat_source) {
  return (uint64_t)seq << 8 | (uint64_t)(category & 15) | (uint64_t)(cat_source & 15) << 4;
}

int categorize_set(store *s, int64_t trace_id, int64_t seq, int category, int cat_source) {
  uint64_t change = category_change(seq, category, cat_source);
  return store_set_categories(s, trace_id, &change, 1);
}

typedef struct pass {
  store *s;
  int64_t trace_id;
  int64_t first_seq; /* the reader counts seqs from it; changes name stored seqs */
  sim_map flags;     /* call site id -> frame flags + 1 */
  uint64_t *changes; /* applied chunk by chunk once the pass is over */
  size_t nchanges, cap;
} pass;

static int pass_decided(void *arg, int64_t seq, int category, int cat_source) {
  pass *ps = arg;
  sim_grow((void **)&ps->changes, &ps->cap, ps->nchanges + 1, sizeof *ps->changes);
  ps->changes[ps->nchanges++] = category_change(seq + ps->first_seq, category, cat_source);
  return 0;
}

/* The flags of call site id: its frame's and every outer frame's, cached per call site. */
static int stack_flags(pass *ps, int64_t id, unsigned *out) {
  *out = 0;
  if (id <= 0) return 0;
  uint64_t *hit = sim_map_get(&ps->flags, (uint64_t)id);
  if (hit) {
    *out = (unsigned)*hit - 1;
    return 0;
  }
  sqlite3_stmt *q = store_stmt(ps->s,
                               "SELECT c.parent_id, n.value, f.value FROM callsites c JOIN frames fr ON fr.id = c.frame_id "
                               "JOIN strings n ON n.id = fr.name_id JOIN strings f ON f.id = fr.file_id WHERE c.id = ?1");
  if (!q) return -1;
  /* Walk outwards to a cached call site, then fill the cache on the way back in. */
  int64_t chain[256];
  unsigned own[256];
  size_t n = 0;
  unsigned outer = 0;
  for (int64_t cur = id; cur > 0;) {
    uint64_t *h = sim_map_get(&ps->flags, (uint64_t)cur);
    if (h) {
      outer = (unsigned)*h - 1;
      break;
    }
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, cur);
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) {
      if (rc == SQLITE_DONE) break;
      return store_fail(ps->s, q, "cannot read call stack");
    }
    int64_t parent = sqlite3_column_int64(q, 0);
    unsigned fl = categorize_frame_flags((const char *)sqlite3_column_text(q, 1), (const char *)sqlite3_column_text(q, 2));
    if (n == sizeof chain / sizeof chain[0]) {
      own[n - 1] |= fl; /* very deep: the outer frames count for the last one kept */
    } else {
      chain[n] = cur;
      own[n++] = fl;
    }
    cur = parent;
  }
  sqlite3_reset(q);
  for (size_t i = n; i-- > 0;) {
    outer |= own[i];
    *sim_map_put(&ps->flags, (uint64_t)chain[i], NULL) = (uint64_t)outer + 1;
  }
  *out = outer;
  return 0;
}

static int64_t string_id(store *s, const char *text) {
  sqlite3_stmt *q = store_stmt(s, "SELECT id FROM strings WHERE value = ?1");
  if (!q) return -1;
  sqlite3_bind_text(q, 1, text, -1, SQLITE_STATIC);
  int64_t id = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
  sqlite3_reset(q);
  return id;
}

/* Allocations by how their category was decided: counts and bytes by cat_source. */
static int count_methods(store *s, int64_t trace_id, int64_t count[SIM_CATSRC__COUNT], int64_t bytes[SIM_CATSRC__COUNT]) {
  memset(count, 0, SIM_CATSRC__COUNT * sizeof *count);
  memset(bytes, 0, SIM_CATSRC__COUNT * sizeof *bytes);
  store_reader *r;
  if (store_reader_open(s, trace_id, &r)) return -1;
  const sim_event *v;
  ptrdiff_t k;
  while ((k = store_reader_view(r, &v)) > 0) {
    for (ptrdiff_t i = 0; i < k; i++)
      if ((v[i].kind == SIM_EV_ALLOC || v[i].kind == SIM_EV_HOST_ALLOC) && v[i].cat_source < SIM_CATSRC__COUNT) {
        count[v[i].cat_source]++;
        sim_bytes_sum(&bytes[v[i].cat_source], v[i].size);
      }
    store_reader_advance(r, (size_t)k);
  }
  store_reader_close(r);
  return k < 0 ? -1 : 0;
}

int categorize_note(store *s, int64_t trace_id, const int64_t count[SIM_CATSRC__COUNT],
                    const int64_t bytes[SIM_CATSRC__COUNT]) {
  static const char *const names[SIM_CATSRC__COUNT] = {"categories_undecided", "categories_from_source",
                                                       "categories_from_stack", "categories_from_lifetime",
                                                       "categories_set_by_user"};
  static const char *const how[SIM_CATSRC__COUNT] = {"no rule decided", "the source gave", "came from the call stack",
                                                     "came from the lifetime", "was set by hand"};
  sqlite3_stmt *q = store_stmt(s, "INSERT INTO trace_stats(trace_id, name, severity, value, detail) VALUES (?1, ?2, 'info', ?3, ?4) "
                                  "ON CONFLICT(trace_id, name) DO UPDATE SET value = excluded.value, detail = excluded.detail");
  if (!q) return -1;
  for (int k = 0; k < SIM_CATSRC__COUNT; k++) {
    if (!count[k]) continue;
    char detail[160];
    snprintf(detail, sizeof detail, "allocations (%lld bytes in all) whose category %s", (long long)bytes[k], how[k]);
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, trace_id);
    sqlite3_bind_text(q, 2, names[k], -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, count[k]);
    sqlite3_bind_text(q, 4, detail, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store import note");
  }
  sqlite3_reset(q);
  return 0;
}

void categorize_tally_alloc(categorize_tally *t, const sim_event *ev) {
  t->count[ev->cat_source & 15]++;
  sim_bytes_sum(&t->bytes[ev->cat_source & 15], ev->size);
  if (ev->cat_source == SIM_CATSRC_NONE) *sim_map_put(&t->pending, (uint64_t)ev->seq, NULL) = ev->size;
}

void categorize_tally_decided(categorize_tally *t, int64_t seq, int cat_source) {
  uint64_t size;
  if (!sim_map_del(&t->pending, (uint64_t)seq, &size)) return;
  t->count[SIM_CATSRC_NONE]--;
  sim_bytes_drop(&t->bytes[SIM_CATSRC_NONE], size);
  t->count[cat_source & 15]++;
  sim_bytes_sum(&t->bytes[cat_source & 15], size);
}

static int first_seq_of(store *s, int64_t trace_id, int64_t *first) {
  sqlite3_stmt *q = store_stmt(s, "SELECT first_seq FROM traces WHERE id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  *first = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
  sqlite3_reset(q);
  return 0;
}

/* One stored event through the rules: the kinds they look at, with the fields they read. */
static int pass_event(pass *ps, categorizer *c, const sim_event *in) {
  switch (in->kind) {
  case SIM_EV_ALLOC:
  case SIM_EV_FREE_REQUESTED:
  case SIM_EV_FREE_COMPLETED:
  case SIM_EV_FREE:
  case SIM_EV_MEMCPY:
  case SIM_EV_MARKER:
  case SIM_EV_HOST_ALLOC:
  case SIM_EV_HOST_FREE: break;
  default: return 0;
  }
  sim_event ev;
  sim_event_init(&ev);
  ev.seq = in->seq;
  ev.ts = in->ts;
  ev.dur = in->dur;
  ev.addr = in->addr;
  ev.size = in->size;
  ev.kind = in->kind;
  ev.dir = in->dir;
  ev.category = in->category;
  ev.cat_source = in->cat_source;
  ev.flags = in->flags;
  ev.stack = in->stack;
  ev.name = in->name;
  unsigned fl = 0;
  if (ev.kind != SIM_EV_MARKER && stack_flags(ps, ev.stack, &fl)) return -1;
  return categorizer_event(c, &ev, fl);
}

int categorize_trace(store *s, int64_t trace_id, char *err, size_t errlen) {
  err[0] = 0;
  /* An importer that used the rules while writing has left its counts: what they left
   * undecided, the same rules run again would leave undecided too. */
  sqlite3_stmt *nq = store_stmt(s, "SELECT count(*) FROM trace_stats "
                                  "WHERE trace_id = ?1 AND name IN ('categories_undecided', 'categories_from_source', "
                                   "'categories_from_stack', 'categories_from_lifetime', 'categories_set_by_user')");
  if (!nq) {
    snprintf(err, errlen, "%s", store_error(s));
    return -1;
  }
  sqlite3_bind_int64(nq, 1, trace_id);
  int noted = sqlite3_step(nq) == SQLITE_ROW && sqlite3_column_int64(nq, 0) > 0;
  sqlite3_reset(nq);
  if (noted) return 0;
  int64_t count[SIM_CATSRC__COUNT], bytes[SIM_CATSRC__COUNT];
  if (count_methods(s, trace_id, count, bytes)) {
    snprintf(err, errlen, "%s", store_error(s));
    return -1;
  }
  /* Traces whose allocations are all decided (the source said, or the importer used the same
   * rules) need only the notes. */
  if (count[SIM_CATSRC_NONE]) {
    pass ps = {.s = s, .trace_id = trace_id};
    sim_map_init(&ps.flags);
    int64_t names[4];
    static const char *const phase_names[4] = {"backward", "optimizer", "zero_grad", "forward"};
    int rc = first_seq_of(s, trace_id, &ps.first_seq);
    for (int i = 0; i < 4 && !rc; i++)
      if ((names[i] = string_id(s, phase_names[i])) < 0) rc = -1;
    categorizer *c = rc ? NULL : categorizer_new(names, pass_decided, &ps);
    store_reader *r = NULL;
    if (!rc && store_reader_open(s, trace_id, &r)) rc = -1;
    const sim_event *v;
    ptrdiff_t k = 0;
    while (!rc && (k = store_reader_view(r, &v)) > 0) {
      for (ptrdiff_t i = 0; i < k && !rc; i++) rc = pass_event(&ps, c, &v[i]);
      store_reader_advance(r, (size_t)k);
    }
    if (k < 0) rc = -1;
    store_reader_close(r);
    if (!rc && categorizer_finish(c)) rc = -1;
    if (!rc && ps.nchanges && store_set_categories(s, trace_id, ps.changes, ps.nchanges)) rc = -1;
    categorizer_free(c);
    sim_map_release(&ps.flags);
    free(ps.changes);
    if (rc) {
      snprintf(err, errlen, "%s", store_error(s));
      return -1;
    }
  }
  if ((count[SIM_CATSRC_NONE] && count_methods(s, trace_id, count, bytes)) || categorize_note(s, trace_id, count, bytes)) {
    snprintf(err, errlen, "%s", store_error(s));
    return -1;
  }
  return 0;
}

/* ---- the rules fed by the writer (categorize_online) -------------------------------------------- */

struct categorize_online {
  store *s;
  store_writer *w;
  categorizer *c;
  sim_map flags;   /* call site id -> frame flags + 1 */
  categorize_tally tally;
};

static int online_decided(void *arg, int64_t seq, int category, int cat_source) {
  categorize_online *co = arg;
  categorize_tally_decided(&co->tally, seq, cat_source);
  store_writer_set_category(co->w, seq, category, cat_source);
  return 0;
}

static int or_frame_flags(void *arg, const store_frame *f) {
  *(unsigned *)arg |= categorize_frame_flags(f->name, f->file);
  return 0;
}

static int online_event(void *arg, const sim_event *in) {
  categorize_online *co = arg;
  switch (in->kind) { /* the kinds the pass reads (categorize_trace) */
  case SIM_EV_ALLOC: case SIM_EV_FREE_REQUESTED: case SIM_EV_FREE_COMPLETED: case SIM_EV_FREE:
  case SIM_EV_MEMCPY: case SIM_EV_MARKER: case SIM_EV_HOST_ALLOC: case SIM_EV_HOST_FREE: break;
  default: return 0;
  }
  /* The event as the pass would read it back: no stack or name is 0. */
  sim_event ev = *in;
  if (ev.stack < 0) ev.stack = 0;
  if (ev.name < 0) ev.name = 0;
  if (ev.kind == SIM_EV_ALLOC || ev.kind == SIM_EV_HOST_ALLOC) {
    categorize_tally_alloc(&co->tally, &ev);
  }
  unsigned fl = 0;
  if (ev.kind != SIM_EV_MARKER && ev.stack > 0) {
    uint64_t *hit = sim_map_get(&co->flags, (uint64_t)ev.stack);
    if (hit) {
      fl = (unsigned)*hit - 1;
    } else {
      if (store_stack_frames(co->s, ev.stack, or_frame_flags, &fl)) return -1;
      *sim_map_put(&co->flags, (uint64_t)ev.stack, NULL) = (uint64_t)fl + 1;
    }
  }
  return categorizer_event(co->c, &ev, fl);
}

categorize_online *categorize_online_begin(store *s, store_writer *w) {
  static const char *const phase_names[4] = {"backward", "optimizer", "zero_grad", "forward"};
  int64_t names[4];
  for (int i = 0; i < 4; i++) /* interned now: a marker may use one before the trace ends */
    if ((names[i] = store_intern_string(s, phase_names[i], strlen(phase_names[i]))) <= 0) return NULL;
  categorize_online *co = sim_xcalloc(1, sizeof *co);
  co->s = s;
  co->w = w;
  co->c = categorizer_new(names, online_decided, co);
  sim_map_init(&co->flags);
  sim_map_init(&co->tally.pending);
  store_writer_observe(w, online_event, co);
  return co;
}

int categorize_online_finish(categorize_online *co) {
  store_writer_observe(co->w, NULL, NULL);
  return categorizer_finish(co->c);
}

int categorize_online_note(categorize_online *co, int64_t trace_id) {
  return categorize_note(co->s, trace_id, co->tally.count, co->tally.bytes);
}

void categorize_online_free(categorize_online *co) {
  if (!co) return;
  categorizer_free(co->c);
  sim_map_release(&co->flags);
  sim_map_release(&co->tally.pending);
  free(co);
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
      store_fail(s, q, "cannot read traces");
      snprintf(err, errlen, "%s", store_error(s));
      sqlite3_reset(q);
      return -1;
    }
    int none = sqlite3_column_type(q, 0) == SQLITE_NULL;
    mark = sqlite3_column_int64(q, 0);
    sqlite3_reset(q);
    if (none) return 0;
    if (categorize_trace(s, mark, err, errlen)) return -1;
  }
}

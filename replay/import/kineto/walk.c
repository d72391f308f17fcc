/* walk.c: Kineto: the walks over the sorted records: call stacks, markers, memory events, activities. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_int.h"

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
    kineto_fail(p, "%s", *extsort_error(p->by_time) ? extsort_error(p->by_time) : extsort_error(p->by_time_mem));
    return -1;
  }
  m->a = ga ? va : NULL;
  m->b = gb ? vb : NULL;
  return 0;
}

/* The next record in time order: 1, 0 at the end, -1. (*r stays valid until the next call.) */
static int merged_next(kparse *p, merged *m, const krec **r, krec *hold) {
  if (!m->a && !m->b) return 0;
  int from_a = m->a && (!m->b || kineto_cmp_time(m->a, m->b) <= 0);
  extsort *x = from_a ? p->by_time : p->by_time_mem;
  *hold = from_a ? *m->a : *m->b; /* the sort reuses its buffer on the next call */
  *r = hold;
  const void *v = NULL;
  int got = extsort_next(x, &v);
  if (got < 0) {
    kineto_fail(p, "%s", extsort_error(x));
    return -1;
  }
  if (from_a) m->a = got ? v : NULL;
  else m->b = got ? v : NULL;
  return 1;
}

/* ---- the events, as the passes see them ------------------------------------------------------ */

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
    kw->frames[i] = (store_frame){kineto_text(kw->p, f->name), kineto_text(kw->p, f->file), f->line};
  }
  int64_t id = store_intern_stack(kw->p->ic->s, kw->frames, t->n);
  if (id < 0) {
    kineto_fail(kw->p, "%s", store_error(kw->p->ic->s));
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
  if (alloc && kineto_decision_apply(kw, ev, ordinal)) return -1;
  if (store_writer_event(kw->w, ev)) {
    kineto_fail(kw->p, "%s", store_error(kw->p->ic->s));
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
    kineto_fail(kw->p, "%s", store_error(kw->p->ic->s));
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
    kineto_fail(kw->p, "%s", store_error(kw->p->ic->s));
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

int kineto_walk(kwalk *kw, const kbase *b) {
  kparse *p = kw->p;
  kwalk_reset(kw);
  if (kw->writing && kineto_decisions_rewind(kw)) return -1;
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

void kineto_walk_release(kwalk *kw) {
  categorizer_free(kw->cat);
  extsort_free(kw->decisions);
  for (size_t i = 0; i < kw->nthreads; i++) free(kw->threads[i].f);
  free(kw->threads);
  free(kw->frames);
}

/* join.c: Kineto: runtime calls and the device activities they launched, joined by correlation id. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_int.h"

/*
 * A device activity belongs at the position of the runtime call that launched it (same
 * correlation id). Kineto writes each activity right before its call, so most pairs meet in a
 * small window of recent records while the file is read; whatever leaves the window unmatched
 * (a launch whose activity is elsewhere, an activity launched before the window opened, any
 * other layout) goes through sort 1 and meets there. Memory is the window plus sort 1's buffer.
 */

struct jwin_entry {
  krec r;
  int64_t joined; /* runtime calls: activities already joined to it */
};

void kineto_joiner_init(joiner *j, kparse *p, size_t size) {
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

void kineto_joiner_release(joiner *j) {
  free(j->rts);
  free(j->acts);
  free(j->rt_corr);
  free(j->act_corr);
  free(j->group);
  sim_map_release(&j->queries);
  memset(j, 0, sizeof *j);
}

/* A runtime call that is an event of its own (no device activity, or one memplay does not keep). */
int kineto_emit_runtime(joiner *j, const krec *rt) {
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
  return kineto_add_time(j->p, &r);
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
  return kineto_add_time(j->p, &r) ? 1 : -1;
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
  return kineto_add_time(j->p, &r);
}

/* A runtime call leaves the window: sort 1 takes it with the count it already joined, so that
 * activities still to come meet it there (one that joined some is represented by them). */
static int window_evict_rt(joiner *j, size_t k) {
  if (j->rt_corr[k] == -2) return 1;
  j->rt_corr[k] = -2;
  krec r = j->rts[k].r;
  r.bytes = j->rts[k].joined;
  return kineto_add_corr(j->p, &r);
}

static int window_evict_act(joiner *j, size_t k) {
  if (j->act_corr[k] == -2) return 1;
  j->act_corr[k] = -2;
  return kineto_add_corr(j->p, &j->acts[k].r);
}

int kineto_window_runtime(joiner *j, const krec *rt) {
  if (rt->corr < 0) return kineto_emit_runtime(j, rt);
  if (!j->size) {
    krec r = *rt;
    r.bytes = 0;
    return kineto_add_corr(j->p, &r);
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

int kineto_window_activity(joiner *j, const krec *act) {
  if (act->corr < 0) return emit_unlaunched(j, act);
  if (!j->size) return kineto_add_corr(j->p, act);
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
    if (!joined && !kineto_emit_runtime(j, &j->rt)) return 0;
  }
  j->ngroup = 0;
  j->have_rt = 0;
  return 1;
}

int kineto_join_by_correlation(kparse *p, joiner *j) {
  /* empty the window into sort 1 */
  for (size_t k = 0; k < j->size; k++)
    if (!window_evict_act(j, k) || !window_evict_rt(j, k)) return -1;
  if (extsort_finish(p->by_corr) || extsort_rewind(p->by_corr)) {
    kineto_fail(p, "%s", extsort_error(p->by_corr));
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
        if (!r->bytes && !kineto_emit_runtime(j, r)) return -1;
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
    kineto_fail(p, "%s", extsort_error(p->by_corr));
    return -1;
  }
  if ((j->have_rt || j->ngroup) && !flush_group(j)) return -1;
  return 0;
}

/* plan.c: numbering a trace's allocations once, for the engine's dense table of live records (source.h). */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "live.h"
#include "source.h"
#include "steps.h"

/*
 * As the engine's live table would go: an allocation of an address not held takes a record (the
 * one given back last, else a new one), an allocation of an address held names that address's
 * record, a free names the record of its address, and a free that completes gives the record back.
 * The addresses held are in a table of the engine's own kind (live.h), each entry's site its
 * record: planning `memplay bench`'s 2 M events ran at 41-44 M events/s in a sim_map (up to three
 * quarters full, its calls not inlined), at 49-52 M in this table (docs/performance.md).
 */
void replay_planner_init(replay_planner *p) { memset(p, 0, sizeof *p); }

static inline uint32_t planner_step(replay_planner *p, const sim_event *ev) {
  if (ev->kind == SIM_EV_ALLOC) {
    if (!p->held) {
      p->held = sim_xmalloc(sizeof *p->held);
      live_init(p->held, LIVE_START_BITS);
    }
    int existed;
    live_entry *le = live_put(p->held, ev->addr, &existed);
    if (existed) return le->site;
    if (p->nspare) le->site = p->spare[--p->nspare];
    else if (p->next < REPLAY_PLAN_NONE - 1) le->site = p->next++;
    else p->full = 1, le->site = 0;
    return le->site;
  }
  if (!sim_kind_is_free(ev->kind) || !p->held || !p->held->len) return REPLAY_PLAN_NONE;
  live_entry *le = live_get(p->held, ev->addr);
  if (!le) return REPLAY_PLAN_NONE;
  uint32_t slot = le->site;
  if (ev->kind == SIM_EV_FREE_REQUESTED) return slot; /* still held until the free completes */
  if (p->nspare == p->cap_spare) sim_grow((void **)&p->spare, &p->cap_spare, p->nspare + 1, sizeof *p->spare);
  p->spare[p->nspare++] = slot;
  live_del(p->held, le);
  return slot;
}

uint32_t replay_planner_step(replay_planner *p, const sim_event *ev) { return planner_step(p, ev); }

void replay_planner_release(replay_planner *p) {
  if (p->held) live_release(p->held);
  free(p->held);
  free(p->spare);
  memset(p, 0, sizeof *p);
}

/* Event ev's allocation arguments (source.h: replay_alloc_arg) in plan p, whose stream and device
 * the first allocation that does not begin a window sets (*chosen: whether one has). */
static replay_alloc_arg plan_arg(replay_plan *p, const sim_event *ev, int *chosen) {
  if (ev->kind != SIM_EV_ALLOC) return (replay_alloc_arg){0, 0};
  if (ev->flags & SIM_EVF_PREEXISTING) return (replay_alloc_arg){REPLAY_ARG_EVENT, 0};
  if (!*chosen) {
    p->arg_stream = ev->stream;
    p->arg_device = ev->device;
    *chosen = 1;
  }
  if (ev->stream != p->arg_stream || ev->device != p->arg_device) return (replay_alloc_arg){REPLAY_ARG_EVENT, 0};
  return (replay_alloc_arg){ev->size, ev->addr};
}

/* Each event's step and allocation arguments, from the events and their numbers (a plan gathered
 * from views). */
static void plan_steps_args(replay_plan *p) {
  int chosen = 0;
  p->step = sim_xmalloc(p->n ? p->n : 1);
  p->arg = sim_xmalloc((p->n ? p->n : 1) * sizeof *p->arg);
  for (size_t i = 0; i < p->n; i++) {
    p->step[i] = replay_step_of(p->events, p->slot, i, p->n);
    p->arg[i] = plan_arg(p, &p->events[i], &chosen);
  }
}

/* The numbers, the steps and the arguments in one pass over the events: an event's step once the
 * next one's number is known (a second pass read the events again: planning `memplay bench`'s 2 M
 * events took 30-32 ms with it, 25 ms so, 22-23 ms with no steps; 44-45 ms with the arguments,
 * most of it the page faults of their array). */
int replay_plan_build(replay_plan *p, const sim_event *events, size_t n) {
  replay_planner pl;
  replay_planner_init(&pl);
  *p = (replay_plan){.events = events, .n = n};
  p->slot = sim_xmalloc((n ? n : 1) * sizeof *p->slot);
  p->step = sim_xmalloc(n ? n : 1);
  p->arg = sim_xmalloc((n ? n : 1) * sizeof *p->arg);
  int chosen = 0;
  for (size_t i = 0; i < n && !pl.full; i++) {
    p->slot[i] = planner_step(&pl, &events[i]);
    p->arg[i] = plan_arg(p, &events[i], &chosen);
    if (i) p->step[i - 1] = replay_step_of(events, p->slot, i - 1, n);
  }
  if (n && !pl.full) p->step[n - 1] = replay_step_of(events, p->slot, n - 1, n);
  int full = pl.full;
  p->nslots = pl.next;
  replay_planner_release(&pl);
  if (full) {
    replay_plan_release(p);
    return -1;
  }
  return 0;
}

void replay_plan_release(replay_plan *p) {
  free(p->slot);
  free(p->step);
  free(p->arg);
  memset(p, 0, sizeof *p);
}

void replay_plan_gather_add(replay_plan_gather *g, const uint32_t *slots, size_t k) {
  if (g->lost) return;
  if (!slots) {
    replay_plan_gather_release(g);
    g->lost = 1;
    return;
  }
  sim_grow((void **)&g->slot, &g->cap, g->n + k, sizeof *g->slot);
  memcpy(g->slot + g->n, slots, k * sizeof *slots);
  for (size_t i = 0; i < k; i++) /* the records: the largest number plus one */
    if (slots[i] != REPLAY_PLAN_NONE && slots[i] >= g->records) g->records = slots[i] + 1;
  g->n += k;
}

int replay_plan_gather_end(replay_plan_gather *g, const sim_event *events, size_t n, replay_plan *out) {
  memset(out, 0, sizeof *out);
  if (g->lost || g->n != n || !g->slot) {
    replay_plan_gather_release(g);
    return -1;
  }
  *out = (replay_plan){.events = events, .n = n, .slot = g->slot, .nslots = g->records};
  plan_steps_args(out);
  memset(g, 0, sizeof *g);
  return 0;
}

void replay_plan_gather_release(replay_plan_gather *g) {
  free(g->slot);
  memset(g, 0, sizeof *g);
}

const replay_plan *replay_plan_kept_get(const replay_plan_kept *k, const sim_event *events, size_t n) {
  const replay_plan *p = k->lent ? k->lent : &k->plan;
  return p->slot && p->events == events && p->n == n ? p : NULL;
}

const replay_plan *replay_plan_kept_note(replay_plan_kept *k, const sim_event *events, size_t n) {
  if (!replay_plan_kept_get(k, events, n) && ++k->replays == 2) replay_plan_build(&k->plan, events, n); /* or none */
  return replay_plan_kept_get(k, events, n);
}

void replay_plan_kept_release(replay_plan_kept *k) {
  replay_plan_release(&k->plan);
  k->replays = 0;
  k->lent = NULL;
}

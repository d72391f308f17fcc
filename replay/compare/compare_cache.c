/* compare_cache.c: the events of the traces a comparison replays, held in memory between its cells.
 *
 * A worker keeps the events of the trace it replayed last, so that the next cell of the same trace
 * (cells are traces-major) replays from memory instead of reading the store again. When there are
 * fewer traces than workers, the cells of one trace are spread over the workers, and each would
 * read and decode the same events: they then share one copy, read by the first worker that needs
 * it while the others wait, and never written again (its plan made at once, so that no replay
 * changes it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_source.h"
#include "compare_int.h"

replay_source cmp_cache_source(trace_cache *tc, replay_array_source *a) {
  const replay_plan *p = tc->shared ? replay_plan_kept_get(&tc->kept, tc->events, tc->n)
                                    : replay_plan_kept_note(&tc->kept, tc->events, tc->n);
  return replay_array_source_planned(a, tc->events, tc->n, p);
}

int cmp_cache_load(trace_cache *tc, store *s, const store_trace *t, char *err, size_t errlen) {
  if (tc->trace_id == t->id) return 0;
  tc->trace_id = 0;
  tc->n = 0;
  replay_plan_kept_release(&tc->kept);
  replay_source src;
  if (store_source_open(&src, s, t->id)) return snprintf(err, errlen, "%s", store_error(s)), -1;
  size_t want = t->event_count > 0 ? (size_t)t->event_count : 1;
  if (want > tc->cap) { /* written through: a large one in huge pages */
    free(tc->events);
    tc->events = sim_xmalloc_huge(want * sizeof *tc->events);
    tc->cap = want;
  }
  ptrdiff_t k = 1;
  replay_plan_gather g = {0}; /* the store's plan, lent with the events */
  if (src.view) { /* a source that lends its events: copied a block at a time */
    const sim_event *evs;
    while ((k = src.view(src.ctx, &evs)) > 0) {
      sim_grow((void **)&tc->events, &tc->cap, tc->n + (size_t)k, sizeof *tc->events);
      memcpy(tc->events + tc->n, evs, (size_t)k * sizeof *evs);
      replay_plan_gather_add(&g, src.view_slots ? src.view_slots(src.ctx) : NULL, (size_t)k);
      tc->n += (size_t)k;
      src.advance(src.ctx, (size_t)k);
    }
  } else {
    sim_event ev;
    while ((k = replay_source_next(&src, &ev)) > 0) {
      sim_grow((void **)&tc->events, &tc->cap, tc->n + 1, sizeof *tc->events);
      tc->events[tc->n++] = ev;
    }
  }
  if (k < 0) {
    const char *m = src.error ? src.error(src.ctx) : NULL;
    snprintf(err, errlen, "%s", m && *m ? m : store_error(s));
  }
  replay_source_close(&src);
  if (k < 0 || replay_plan_gather_end(&g, tc->events, tc->n, &tc->kept.plan)) replay_plan_gather_release(&g);
  if (k < 0) return -1;
  tc->trace_id = t->id;
  return 0;
}

void cmp_cache_release(trace_cache *tc) {
  free(tc->events);
  replay_plan_kept_release(&tc->kept);
  memset(tc, 0, sizeof *tc);
}

/* ---- shared between workers ---------------------------------------------------------------- */

/* A trace's events as the workers share them (session_once's values), or why they cannot be read. */
typedef struct shared_trace {
  trace_cache tc;
  char *err; /* NULL: read */
} shared_trace;

static void shared_free(void *value) {
  shared_trace *e = value;
  cmp_cache_release(&e->tc);
  free(e->err);
  free(e);
}

session_once *cmp_shared_new(void) { return session_once_new(shared_free); }

/* Reads the events of the trace, with their plan: made now when the store had none, since a shared
 * cache is never written again. */
static void *shared_read(store *s, const store_trace *t) {
  shared_trace *e = sim_xcalloc(1, sizeof *e);
  char err[1024];
  if (cmp_cache_load(&e->tc, s, t, err, sizeof err)) {
    cmp_cache_release(&e->tc);
    e->err = strdup(err);
    return e;
  }
  if (!replay_plan_kept_get(&e->tc.kept, e->tc.events, e->tc.n)) replay_plan_build(&e->tc.kept.plan, e->tc.events, e->tc.n);
  e->tc.shared = 1;
  return e;
}

trace_cache *cmp_shared_get(session_once *sh, store *s, const store_trace *t, char *err, size_t errlen) {
  shared_trace *e = session_once_get(sh, s, t, shared_read);
  if (e->err) return snprintf(err, errlen, "%s", e->err), NULL;
  return &e->tc;
}

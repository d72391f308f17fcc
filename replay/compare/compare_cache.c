/* compare_cache.c: the events of the traces a comparison replays, held in memory between its cells.
 *
 * A worker keeps the events of the trace it replayed last, so that the next cell of the same trace
 * (cells are traces-major) replays from memory instead of reading the store again. When there are
 * fewer traces than workers, the cells of one trace are spread over the workers, and each would
 * read and decode the same events: they then share one copy, read by the first worker that needs
 * it while the others wait, and never written again (its plan made at once, so that no replay
 * changes it).
 */
#include <pthread.h>
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

enum { SHARED_LOADING, SHARED_READY, SHARED_FAILED };

struct cmp_shared_trace {
  int state;
  trace_cache tc;
  char *err; /* SHARED_FAILED: why */
};

void cmp_shared_init(cmp_shared *sh) {
  memset(sh, 0, sizeof *sh);
  pthread_mutex_init(&sh->lock, NULL);
  pthread_cond_init(&sh->loaded, NULL);
}

/* The entry of trace id, or NULL; with sh->lock held. */
static struct cmp_shared_trace *shared_find(const cmp_shared *sh, int64_t id) {
  for (size_t i = 0; i < sh->n; i++)
    if (sh->v[i]->tc.trace_id == id) return sh->v[i];
  return NULL;
}

/* Reads the events of t into the new entry e (loading, named by t's id), with their plan. */
static void shared_load(cmp_shared *sh, struct cmp_shared_trace *e, store *s, const store_trace *t, char *err,
                        size_t errlen) {
  trace_cache own = {0};
  int rc = cmp_cache_load(&own, s, t, err, errlen);
  /* planned now, when the store had no plan: a shared cache is never written again */
  if (!rc && !replay_plan_kept_get(&own.kept, own.events, own.n)) replay_plan_build(&own.kept.plan, own.events, own.n);
  pthread_mutex_lock(&sh->lock);
  if (rc) {
    cmp_cache_release(&own);
    e->err = strdup(err);
    e->state = SHARED_FAILED;
  } else {
    e->tc = own;
    e->tc.shared = 1;
    e->state = SHARED_READY;
  }
  pthread_cond_broadcast(&sh->loaded);
  pthread_mutex_unlock(&sh->lock);
}

trace_cache *cmp_shared_get(cmp_shared *sh, store *s, const store_trace *t, char *err, size_t errlen) {
  pthread_mutex_lock(&sh->lock);
  struct cmp_shared_trace *e = shared_find(sh, t->id);
  if (!e) { /* this worker reads it */
    e = sim_xcalloc(1, sizeof *e);
    e->state = SHARED_LOADING;
    e->tc.trace_id = t->id; /* found by the others while it loads */
    sim_grow((void **)&sh->v, &sh->cap, sh->n + 1, sizeof *sh->v);
    sh->v[sh->n++] = e;
    pthread_mutex_unlock(&sh->lock);
    shared_load(sh, e, s, t, err, errlen);
    pthread_mutex_lock(&sh->lock);
  }
  while (e->state == SHARED_LOADING) pthread_cond_wait(&sh->loaded, &sh->lock);
  trace_cache *tc = e->state == SHARED_READY ? &e->tc : NULL;
  if (!tc) snprintf(err, errlen, "%s", e->err);
  pthread_mutex_unlock(&sh->lock);
  return tc;
}

void cmp_shared_release(cmp_shared *sh) {
  for (size_t i = 0; i < sh->n; i++) {
    cmp_cache_release(&sh->v[i]->tc);
    free(sh->v[i]->err);
    free(sh->v[i]);
  }
  free(sh->v);
  pthread_cond_destroy(&sh->loaded);
  pthread_mutex_destroy(&sh->lock);
  memset(sh, 0, sizeof *sh);
}

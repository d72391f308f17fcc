/* compare_run.c: a comparison planned (traces matched, cells numbered, a shard's share taken) and run on worker threads. */
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/jsonw.h"
#include "session/session.h"
#include "store/store_source.h"
#include "sim/hashmap.h"
#include "compare_int.h"

/* ---- checking and planning ------------------------------------------------------------------ */

int cmp_request_check(const cmp_request *req, char *err, size_t errlen) {
  if (!req->npatterns) return snprintf(err, errlen, "no TRACE given"), CMP_EUSAGE;
  if (!req->npolicies) return snprintf(err, errlen, "no --policy given"), CMP_EUSAGE;
  if (req->reference >= req->npolicies)
    return snprintf(err, errlen, "--reference %zu: there are %zu policies", req->reference + 1, req->npolicies),
           CMP_EUSAGE;
  if (req->shard_n && (req->shard_k < 1 || req->shard_k > req->shard_n))
    return snprintf(err, errlen, "bad shard %u/%u (K/N with 1 <= K <= N)", req->shard_k, req->shard_n), CMP_EUSAGE;
  if (req->shard_n && req->save)
    return snprintf(err, errlen, "a shard reads the store read-only: it stores no runs (pass --no-save)"),
           CMP_EUSAGE;
  if (req->no_time && (req->device || req->timing || req->scenario_path))
    return snprintf(err, errlen, "--no-time predicts no time: it takes no %s",
                    req->device ? "--device" : req->timing ? "--timing" : "--scenario (a scenario's replays name their own device)"),
           CMP_EUSAGE;
  if (req->jobs < 1) return snprintf(err, errlen, "--jobs must be at least 1"), CMP_EUSAGE;
  int has_device = req->device != NULL;
  for (size_t i = 0; i < req->npolicies; i++) {
    cmp_policy p;
    if (cmp_policy_parse(&p, req->policies[i], err, errlen)) return CMP_EUSAGE;
    has_device &= p.device != NULL || req->device != NULL;
    if (req->no_time && p.device) {
      snprintf(err, errlen, "policy '%s' names a device profile: --no-time predicts no time", req->policies[i]);
      cmp_policy_release(&p);
      return CMP_EUSAGE;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(req->policies[j], req->policies[i])) {
        snprintf(err, errlen, "policy '%s' given twice", req->policies[i]);
        cmp_policy_release(&p);
        return CMP_EUSAGE;
      }
    cmp_policy_release(&p);
  }
  for (size_t i = 0; i < req->nparams; i++) {
    const char *eq = strchr(req->params[i], '=');
    if (!eq || eq == req->params[i]) return snprintf(err, errlen, "--set wants KEY=VALUE, not '%s'", req->params[i]), CMP_EUSAGE;
    if (!strncmp(req->params[i], "allocator=", 10) || !strncmp(req->params[i], "capacity=", 9))
      return snprintf(err, errlen, "--set %.*s: each policy gives the scenario its allocator and capacity (--policy, --capacity)",
                      (int)(eq - req->params[i]), req->params[i]),
             CMP_EUSAGE;
  }
  if (req->nparams && !req->scenario_path) return snprintf(err, errlen, "--set needs a --scenario"), CMP_EUSAGE;
  if (req->timing && req->scenario_path)
    return snprintf(err, errlen, "--timing does not apply with --scenario (the scenario times its variants)"), CMP_EUSAGE;
  if (req->timing) {
    if (session_check_timing(req->timing, err, errlen)) return CMP_EUSAGE;
    if (!has_device) return snprintf(err, errlen, "--timing needs a device profile (--device NAME)"), CMP_EUSAGE;
  }
  return CMP_OK;
}

typedef struct trace_list {
  char **names;
  size_t n;
  const cmp_request *req;
  unsigned *matched; /* per pattern: how many traces it matched */
} trace_list;

static int add_trace(void *arg, const store_trace *t) {
  trace_list *l = arg;
  int any = 0;
  for (size_t i = 0; i < l->req->npatterns; i++)
    if (!fnmatch(l->req->patterns[i], t->name, 0)) {
      l->matched[i]++;
      any = 1;
    }
  if (any) {
    l->names = sim_xrealloc(l->names, (l->n + 1) * sizeof *l->names);
    l->names[l->n++] = strdup(t->name);
  }
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The traces the patterns match, sorted by name. */
static int match_traces(store *s, const cmp_request *req, cmp_result *r, char *err, size_t errlen) {
  trace_list l = {.req = req, .matched = sim_xcalloc(req->npatterns, sizeof(unsigned))};
  int rc = CMP_OK;
  if (store_trace_each(s, add_trace, &l)) {
    snprintf(err, errlen, "%s", store_error(s));
    rc = CMP_EFAIL;
  }
  for (size_t i = 0; !rc && i < req->npatterns; i++)
    if (!l.matched[i]) {
      snprintf(err, errlen, "no trace matches '%s' in '%s' (see 'memplay list')", req->patterns[i], store_path(s));
      rc = CMP_EUSAGE;
    }
  free(l.matched);
  if (l.n) qsort(l.names, l.n, sizeof *l.names, by_name);
  r->traces = l.names;
  r->ntraces = l.n;
  return rc;
}

/* Every device profile named exists. */
static int check_devices(store *s, const cmp_result *r, char *err, size_t errlen) {
  session *ses = session_new(s);
  int rc = CMP_OK;
  for (size_t i = 0; !rc && i <= r->npolicies; i++) {
    const char *name = i < r->npolicies ? r->policies[i].device : r->device;
    if (!name) continue;
    devices_entry d;
    char derr[512];
    int found = session_find_device(ses, name, &d, derr, sizeof derr);
    if (found < 0) snprintf(err, errlen, "%s", derr), rc = CMP_EFAIL;
    else if (found) snprintf(err, errlen, "no device profile '%s' (see 'memplay devices')", name), rc = CMP_EUSAGE;
  }
  session_free(ses);
  return rc;
}

/* A new comparison's id: when it started (UTC) and a few bits that tell two apart. */
static char *new_comparison_id(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char b[64];
  size_t n = strftime(b, sizeof b, "cmp-%Y%m%dT%H%M%SZ", &tm);
  snprintf(b + n, sizeof b - n, "-%04x", (unsigned)((ts.tv_nsec / 1000) ^ (long)getpid() * 2654435761u) & 0xffff);
  return strdup(b);
}

/* The result's settings and its empty cells: this shard's share of the matrix. */
static void plan_cells(const cmp_request *req, cmp_result *r) {
  r->version = strdup(MEMPLAY_VERSION);
  r->shard_k = req->shard_k;
  r->shard_n = req->shard_n;
  size_t total = cmp_result_total(r);
  r->cells = sim_xcalloc(total ? total : 1, sizeof *r->cells);
  for (size_t i = 0; i < total; i++) {
    if (req->shard_n && i % req->shard_n != req->shard_k - 1) continue;
    cmp_cell *c = &r->cells[r->ncells++];
    c->index = i;
    c->trace = strdup(r->traces[i / r->npolicies]);
    c->policy = strdup(r->policies[i % r->npolicies].label);
  }
}

/* ---- one cell ---------------------------------------------------------------------------------- */


typedef struct workers {
  const char *path;
  int flags;
  const cmp_request *req;
  cmp_result *r;
  pthread_mutex_t lock; /* next, done, events, the progress callback, saving */
  size_t next, done;   /* the next unit to take; cells done */
  uint64_t events;
  size_t *units;       /* unit u is the cells [units[u], units[u + 1]) */
  size_t nunits;
  int share;           /* fewer traces than workers: their events read once, shared (compare_cache.c), */
  session_once *shared;
  session_once *windows; /* and so are recorded windows' start states */
} workers;

/* The events of the cell's trace t in memory: the shared copy, or the worker's own (tc). NULL with a
 * message when they cannot be read. */
static trace_cache *cell_cache(workers *w, trace_cache *tc, store *s, const store_trace *t, char *err, size_t errlen) {
  if (w->share) return cmp_shared_get(w->shared, s, t, err, errlen);
  return cmp_cache_load(tc, s, t, err, errlen) ? NULL : tc;
}

/* A real value as its JSON prints it (9 significant digits), so that a result read back from its JSON
 * (a shard, a baseline) gives the same relative columns and verdicts as the run that wrote it. */
static double as_printed(double v) {
  char b[40];
  snprintf(b, sizeof b, "%.9g", v);
  return strtod(b, NULL);
}

static void set_metric(cmp_cell *c, int m, double v) {
  int whole = cmp_metric_unit(m) == CMP_UNIT_BYTES || cmp_metric_unit(m) == CMP_UNIT_COUNT; /* exact below 2^53 */
  c->metric[m] = whole ? v : as_printed(v);
  c->known |= 1u << m;
}

/* A worker's copy of the recorded settings of the trace its last cell replayed, as JSON text
 * (jsonw_raw's reading of them): the cells of one trace share them, and reading them again for
 * each cell was most of what a cell cost besides its replay (about 4 us of kk_ctx128_fullstep's
 * 280, docs/performance.md, round thirty-one). */
typedef struct recorded_memo {
  char *src, *json;
} recorded_memo;

static const char *recorded_json(recorded_memo *m, const char *recorded) {
  if (!recorded) return "null";
  if (m->src && !strcmp(m->src, recorded)) return m->json;
  free(m->src);
  free(m->json);
  yajl_gen g = jsonw_mem();
  jsonw_raw(g, recorded);
  m->json = strdup(jsonw_text(g, NULL));
  m->src = strdup(recorded);
  yajl_gen_free(g);
  return m->json;
}

static void recorded_memo_release(recorded_memo *m) {
  free(m->src);
  free(m->json);
  memset(m, 0, sizeof *m);
}

/* The room s takes as a JSON string (jsonw_quote writes at most 2 + 6n bytes), or as null. */
static size_t quoted_room(const char *s) { return s ? 2 + 6 * strlen(s) : 4; }

/* s as a JSON string at o (jsonw_str's text), or null: the byte after it. */
static char *quoted(char *o, const char *s) { return s ? jsonw_quote(o, s, strlen(s)) : stpcpy(o, "null"); }

/* The model and everything it was given, as a JSON object, written as a generator writes one (no
 * spaces) into one buffer of the room it can take. */
static char *settings_json(const session_run *run, recorded_memo *memo) {
  const sim_spec *sp = run->spec;
  const char *recorded = recorded_json(memo, run->recorded);
  size_t room = 96 + strlen(recorded) + quoted_room(sp->ops->name) + quoted_room(run->window_start) +
                quoted_room(run->window_note); /* 96: the keys, braces and separators */
  for (size_t i = 0; i < sp->nopts; i++) room += 2 + quoted_room(sp->opts[i].key) + quoted_room(sp->opts[i].value);
  char *b = sim_xmalloc(room), *o = stpcpy(b, "{\"model\":");
  o = stpcpy(quoted(o, sp->ops->name), ",\"options\":{");
  for (size_t i = 0; i < sp->nopts; i++) {
    if (i) *o++ = ',';
    o = quoted(o, sp->opts[i].key);
    *o++ = ':';
    o = quoted(o, sp->opts[i].value);
  }
  o = stpcpy(stpcpy(o, "},\"recorded\":"), recorded);
  /* a recorded window: the state the replay started from (rebuilt, or an assumption) */
  if (run->window_start) {
    o = stpcpy(quoted(stpcpy(o, ",\"window_start\":{\"state\":"), run->window_start), ",\"assumption\":");
    o = stpcpy(quoted(o, run->window_note), "}");
  }
  stpcpy(o, "}");
  return b;
}

/* The cell's metrics from its run; step_time_s and samples_per_s (< 0: unknown) are the time model's,
 * or a scenario variant's own. */
static void fill_cell(cmp_cell *c, const session_run *run, recorded_memo *memo, double step_time_s,
                      double samples_per_s) {
  const replay_result *x = &run->result;
  c->allocator = strdup(run->allocator);
  c->settings = settings_json(run, memo);
  c->device = run->has_device ? strdup(run->device.p.name) : NULL;
  c->capacity = run->capacity;
  c->events = x->events;
  set_metric(c, CMP_PEAK_ALLOCATED, (double)x->peak_allocated);
  set_metric(c, CMP_PEAK_RESERVED, (double)x->peak_reserved);
  set_metric(c, CMP_FRAGMENTATION, x->fragmentation);
  set_metric(c, CMP_DEVICE_MALLOCS, (double)x->device_mallocs);
  set_metric(c, CMP_DEVICE_MAPS, (double)x->device_maps);
  set_metric(c, CMP_OOMS, (double)x->ooms);
  if (step_time_s >= 0) set_metric(c, CMP_STEP_TIME, step_time_s);
  if (samples_per_s >= 0) set_metric(c, CMP_SAMPLES_PER_S, samples_per_s);
}

/* The stored run's metadata and the JSON merged into its result, for a cell's run. */
static yajl_gen cell_record(const workers *w, const store_trace *t, const session_run *run, const cmp_cell *c,
                            run_meta *m) {
  *m = session_meta(run);
  m->trace_id = t->id;
  m->trace_name = t->name;
  if (c->known & (1u << CMP_STEP_TIME)) m->step_time_s = c->metric[CMP_STEP_TIME];
  if (c->known & (1u << CMP_SAMPLES_PER_S)) m->samples_per_s = c->metric[CMP_SAMPLES_PER_S];
  m->kind = "compare";
  m->scenario = w->r->comparison_id;
  m->variant = c->policy;
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  jsonw_kstr(g, "comparison_id", w->r->comparison_id);
  jsonw_kstr(g, "policy", c->policy);
  jsonw_kstr(g, "memplay_version", MEMPLAY_VERSION);
  jsonw_kraw(g, "settings", c->settings);
  if (w->r->scenario) jsonw_kstr(g, "compare_scenario", w->r->scenario);
  yajl_gen_map_close(g);
  return g;
}

/* Stores the cell's run (serialised: one writer at a time). */
static int save_cell(workers *w, session *ses, const store_trace *t, const session_run *run, cmp_cell *c, char *err,
                     size_t errlen) {
  run_meta m;
  yajl_gen g = cell_record(w, t, run, c, &m);
  pthread_mutex_lock(&w->lock);
  int rc = session_save(ses, &m, &run->result, jsonw_text(g, NULL), SESSION_RESULT_PATCH, &c->run_id, err, errlen);
  pthread_mutex_unlock(&w->lock);
  yajl_gen_free(g);
  return rc;
}

/* The runs of a worker's plain cells, kept until its unit is done and then stored together, in
 * one transaction: one commit for a trace's policies, and where units are single cells (fewer
 * traces than workers), one for up to CMP_SAVE_BATCH of them, not one per cell. */
#define CMP_SAVE_BATCH 64
typedef struct pending {
  store_trace t;
  session_run *run; /* allocated: a prepared run is not moved */
  cmp_cell *c;
} pending;

typedef struct pending_list {
  pending *p;
  size_t n, cap;
} pending_list;

/* What a worker keeps from one cell to the next. */
typedef struct worker_own {
  trace_cache tc;    /* the events of the trace it replayed last */
  pending_list pl;   /* runs to store */
  recorded_memo rec; /* that trace's recorded settings */
  int snapshot;      /* it reads one snapshot of the store (a read transaction throughout), */
  store_trace t;     /* so that its last trace's row holds for the next cell of that trace */
} worker_own;

/* Stores the pending runs in one transaction; when that fails, their cells fail with its message. */
static void save_pending(workers *w, session *ses, store *s, pending_list *pl) {
  if (!pl->n) return;
  char err[1024];
  pthread_mutex_lock(&w->lock);
  int rc = store_begin(s) ? (snprintf(err, sizeof err, "%s", store_error(s)), -1) : 0;
  for (size_t i = 0; !rc && i < pl->n; i++) {
    run_meta m;
    yajl_gen g = cell_record(w, &pl->p[i].t, pl->p[i].run, pl->p[i].c, &m);
    rc = session_save_in(ses, &m, &pl->p[i].run->result, jsonw_text(g, NULL), SESSION_RESULT_PATCH,
                         &pl->p[i].c->run_id, err, sizeof err);
    yajl_gen_free(g);
  }
  if (!rc && store_commit(s)) rc = (snprintf(err, sizeof err, "%s", store_error(s)), -1);
  if (rc) store_rollback(s);
  pthread_mutex_unlock(&w->lock);
  for (size_t i = 0; i < pl->n; i++) {
    if (rc) {
      cmp_cell *c = pl->p[i].c;
      c->run_id = 0;
      free(c->error);
      c->error = strdup(err);
      c->known = 0;
    }
    session_run_release(pl->p[i].run);
    free(pl->p[i].run);
    store_trace_clear(&pl->p[i].t);
  }
  pl->n = 0;
}

/* A cell of a comparison with a scenario: the scenario's last variant (stored through ses). */
static void run_scenario_cell(workers *w, session *ses, store *s, worker_own *o, const store_trace *t,
                              const cmp_policy *p, cmp_cell *c) {
  cmp_scenario sc;
  const session_run *run;
  double step, sps;
  char err[1024];
  /* the trace's events from the worker's memory, as plain cells read them */
  trace_cache none = {0}, *tc; /* the events from the store */
  if (t->event_count > CMP_CACHE_EVENTS || !(tc = cell_cache(w, &o->tc, s, t, err, sizeof err))) tc = &none;
  if (cmp_scenario_run(&sc, w->req, s, ses, t, tc->events, tc->n, replay_plan_kept_get(&tc->kept, tc->events, tc->n),
                       p, &run, &step, &sps, err, sizeof err) ||
      (fill_cell(c, run, &o->rec, step, sps), w->req->save && save_cell(w, ses, t, run, c, err, sizeof err))) {
    free(c->error);
    c->error = strdup(err);
    c->known = 0;
  } else if (w->req->cell_after) {
    w->req->cell_after(w->req->cell_arg, c, NULL, NULL, &run->result, NULL);
  }
  cmp_scenario_release(&sc);
}

/* The front end's own look at a cell that ran (cmp_request.cell_after), with a pass over the same events. */
static void after_cell(workers *w, session *ses, const session_request *q, const session_run *run, trace_cache *tc,
                       int cached, const cmp_cell *c) {
  if (!w->req->cell_after) return;
  replay_array_source events;
  replay_source src;
  session_pass again = {.source = cached ? &src : NULL, .stored_events = 1};
  if (cached) src = cmp_cache_source(tc, &events);
  w->req->cell_after(w->req->cell_arg, c, ses, q, &run->result, &again);
}

/* The row of the cell's trace: the worker's own from its last cell when that was the same trace
 * and the worker reads one snapshot, else found now (in *own, which the caller clears). NULL with
 * the cell's error when it cannot be read. */
static const store_trace *cell_trace(worker_own *o, store *s, cmp_cell *c, store_trace *own) {
  store_trace *t = o->snapshot ? &o->t : own;
  if (o->snapshot && o->t.name && !strcmp(o->t.name, c->trace)) return t;
  store_trace_clear(t);
  int rc = store_trace_find(s, c->trace, t);
  if (!rc) return t;
  memset(t, 0, sizeof *t);
  c->error = strdup(rc < 0 ? store_error(s) : "the trace is no longer in the store");
  return NULL;
}

static void run_cell(workers *w, session *ses, store *s, worker_own *o, cmp_cell *c) {
  const cmp_policy *p = &w->r->policies[c->index % w->r->npolicies];
  char err[1024];
  c->version = strdup(MEMPLAY_VERSION);
  c->capacity = UINT64_MAX;
  store_trace own = {0};
  const store_trace *t = cell_trace(o, s, c, &own);
  if (!t) return;
  trace_cache *tc = &o->tc;
  session_request q;
  session_request_init(&q);
  q.trace = t;
  q.allocator = p->allocator;
  q.device = p->device ? p->device : w->req->device;
  q.no_device = w->req->no_time;
  q.capacity = p->capacity != UINT64_MAX ? p->capacity : w->req->capacity;
  q.timing = w->req->timing;
  /* a cell that is not stored, and that no report looks into (its timeline, its state at the peak),
   * is only its metrics (fill_cell): the engine keeps nothing else */
  q.lean = !w->req->save && !w->req->cell_after && !w->req->cell_observer;
  if (w->req->scenario_path) {
    run_scenario_cell(w, ses, s, o, t, p, c);
    store_trace_clear(&own);
    return;
  }
  replay_array_source events;
  replay_source src;
  session_pass pass = {.source = &src, .stored_events = 1}; /* the stored events, unchanged */
  replay_observer obs;
  if (w->req->cell_observer) obs = w->req->cell_observer(w->req->cell_arg, c), pass.observers = &obs, pass.nobservers = 1;
  int cached = t->event_count <= CMP_CACHE_EVENTS;
  if (cached && !(tc = cell_cache(w, tc, s, t, err, sizeof err))) {
    c->error = strdup(err);
    store_trace_clear(&own);
    return;
  }
  if (cached) {
    src = cmp_cache_source(tc, &events);
    pass.stored = tc->events;
    pass.nstored = tc->n;
  } else {
    pass.source = NULL;
  }
  session_run *run = sim_xcalloc(1, sizeof *run);
  if (session_prepare(ses, &q, run, err, sizeof err) || session_execute(ses, run, &pass, err, sizeof err)) {
    free(c->error);
    c->error = strdup(err);
    c->known = 0;
  } else {
    fill_cell(c, run, &o->rec, run->has_time ? run->time.step_time_s : -1,
              run->has_time ? run->time.samples_per_s : -1);
    after_cell(w, ses, &q, run, tc, cached, c);
    if (w->req->save) { /* stored with the unit's other cells (save_pending); no snapshot is read */
      run->trace = NULL; /* the row moves into the list */
      run->recorded = NULL;
      run->recorded_options = NULL;
      pending_list *pl = &o->pl;
      sim_grow((void **)&pl->p, &pl->cap, pl->n + 1, sizeof *pl->p);
      pl->p[pl->n++] = (pending){.t = own, .run = run, .c = c};
      return;
    }
  }
  session_run_release(run);
  free(run);
  store_trace_clear(&own);
}

/* A worker: its own store connection (s, or one it opens when s is NULL) and session; takes cells
 * until none are left, and closes the connection. */
static void worker_loop(workers *w, store *s) {
  char err[1024];
  int open_rc = s ? 0 : store_open(&s, w->path, w->flags, err, sizeof err);
  session *ses = open_rc ? NULL : session_new(s);
  if (ses && w->windows) session_share_windows(ses, w->windows);
  worker_own o = {0};
  /* A worker that only reads holds one read transaction throughout: one snapshot of the store,
   * and no lock taken and dropped around every statement. */
  o.snapshot = !open_rc && !w->req->save && !w->req->scenario_path && !store_exec(s, "BEGIN");
  for (;;) {
    pthread_mutex_lock(&w->lock);
    size_t u = w->next++;
    pthread_mutex_unlock(&w->lock);
    if (u >= w->nunits) break;
    for (size_t i = w->units[u]; i < w->units[u + 1]; i++) {
      cmp_cell *c = &w->r->cells[i];
      if (open_rc) {
        c->version = strdup(MEMPLAY_VERSION);
        c->capacity = UINT64_MAX;
        c->error = strdup(err);
      } else {
        run_cell(w, ses, s, &o, c);
      }
      pthread_mutex_lock(&w->lock);
      w->done++;
      w->events += c->events;
      if (w->req->progress) w->req->progress(w->req->progress_arg, w->done, w->r->ncells, w->events);
      pthread_mutex_unlock(&w->lock);
    }
    if (!w->share || o.pl.n >= CMP_SAVE_BATCH) save_pending(w, ses, s, &o.pl); /* a trace's cells, or a batch */
  }
  save_pending(w, ses, s, &o.pl);
  free(o.pl.p);
  if (o.snapshot) store_exec(s, "COMMIT");
  store_trace_clear(&o.t);
  recorded_memo_release(&o.rec);
  cmp_cache_release(&o.tc);
  session_free(ses);
  store_close(s);
}

static void *worker_main(void *arg) {
  worker_loop(arg, NULL);
  return NULL;
}

/* The units of work: a trace's cells together (so that a worker reads each trace once) when there
 * are at least as many traces as threads, else single cells. */
static void make_units(workers *w, size_t nthreads) {
  const cmp_result *r = w->r;
  size_t ntraces = 0;
  for (size_t i = 0; i < r->ncells; i++)
    ntraces += !i || r->cells[i].index / r->npolicies != r->cells[i - 1].index / r->npolicies;
  w->units = sim_xcalloc(r->ncells + 1, sizeof *w->units);
  for (size_t i = 0; i < r->ncells; i++)
    if (ntraces < nthreads || !i || r->cells[i].index / r->npolicies != r->cells[i - 1].index / r->npolicies)
      w->units[w->nunits++] = i;
  w->units[w->nunits] = r->ncells;
  w->share = ntraces < nthreads && nthreads > 1;
}

/* Runs the planned cells on req->jobs threads (the calling thread is one of them, on s, which it closes). */
static void run_cells(const char *path, int flags, store *s, const cmp_request *req, cmp_result *r) {
  workers w = {.path = path, .flags = flags, .req = req, .r = r};
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&w.lock, &ma);
  pthread_mutexattr_destroy(&ma);
  size_t nthreads = (size_t)req->jobs;
  if (nthreads > r->ncells) nthreads = r->ncells ? r->ncells : 1;
  make_units(&w, nthreads);
  if (w.share) w.shared = cmp_shared_new(), w.windows = session_windows_new();
  pthread_t *th = sim_xcalloc(nthreads, sizeof *th);
  size_t started = 0;
  for (size_t i = 1; i < nthreads; i++)
    if (!pthread_create(&th[started], NULL, worker_main, &w)) started++;
  /* the calling thread's worker takes the connection that planned the comparison: opening one
   * reads and checks the store's schema, the work of three replays of a 19,000-event trace */
  worker_loop(&w, s);
  for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(th);
  session_once_free(w.shared);
  session_once_free(w.windows); /* after the sessions that took from it */
  free(w.units);
  pthread_mutex_destroy(&w.lock);
}

int cmp_run(const char *path, const cmp_request *req, cmp_result *r, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  int rc = cmp_request_check(req, err, errlen);
  if (rc) return rc;
  int flags = req->shard_n ? STORE_READONLY | STORE_IMMUTABLE : req->save ? 0 : STORE_READONLY;
  store *s;
  if (store_open(&s, path, flags, err, errlen)) return CMP_EFAIL;
  r->npolicies = req->npolicies;
  r->policies = sim_xcalloc(req->npolicies, sizeof *r->policies);
  for (size_t i = 0; i < req->npolicies; i++) cmp_policy_parse(&r->policies[i], req->policies[i], err, errlen);
  r->reference = req->reference;
  r->device = req->device ? strdup(req->device) : NULL;
  r->capacity = req->capacity;
  r->timing = req->timing ? strdup(req->timing) : NULL;
  r->scenario = req->scenario ? strdup(req->scenario) : NULL;
  r->params = sim_xcalloc(req->nparams + 1, sizeof *r->params);
  for (; r->nparams < req->nparams; r->nparams++) r->params[r->nparams] = strdup(req->params[r->nparams]);
  rc = match_traces(s, req, r, err, errlen);
  if (!rc) rc = check_devices(s, r, err, errlen);
  if (rc) {
    store_close(s);
    return rc;
  }
  if (req->save) r->comparison_id = new_comparison_id();
  plan_cells(req, r);
  run_cells(path, flags, s, req, r); /* the calling thread's worker closes s */
  cmp_result_relate(r);
  return CMP_OK;
}

/* session.c: resolving a replay request (allocator, settings, device, capacity, time), running it, storing it. */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/jsonscan.h"
#include "io/jsonw.h"
#include "io/settings.h"
#include "session.h"
#include "sim/copyfit.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"
#include "labels.h"
#include "shared_device.h"
#include "window_start.h"
#include "store/store_runs.h"
#include "store/store_source.h"

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(sim_xmalloc(n), s, n);
}

/* ---- what a session keeps between runs ------------------------------------------------------ */

typedef struct spec_entry {
  char *text;
  sim_spec spec;
} spec_entry;

/* A trace's recorded allocator settings (JSON text) as the options models read. */
typedef struct settings_entry {
  char *json;
  settings s;
} settings_entry;

/* A device profile looked up by name (key: the name) or matched to a recorded device (key: the
 * recorded name and memory); rc as devices_store_get/match return it (0 found, 1 absent). */
typedef struct device_entry {
  char *key;
  int by_match;
  int rc;
  devices_entry e;
} device_entry;

struct session {
  store *s;
  session_labels *labels; /* the store's names, each read once */
  replay_names names;
  /* each entry allocated on its own: a run keeps pointers to its spec and settings */
  spec_entry **specs;
  size_t nspecs, spec_cap;
  settings_entry **settings;
  size_t nsettings, settings_cap;
  device_entry *devices;
  size_t ndevices, device_cap;
  window_cache window; /* the start state of the trace last replayed */
  session_once *windows; /* or shared with other sessions (not owned) */
  replay_engine *engine; /* kept between runs: its tables, and the models it can reset */
  /* the copies of the trace last fitted, on its recorded device: every run of that trace
   * (another policy, another pass) takes a copy instead of reading the trace again */
  struct {
    int64_t trace_id, events; /* the trace (its id, and its length: an id freed by rm can come back) */
    char device[64];
    int have; /* 1: fitted (fit holds it), -1: the trace has no copies to fit */
    sim_copy_fit fit;
  } copies;
  /* which way the addresses of the trace last asked about went (SIM_VA_*, -1: nothing tells), and
   * what told (session_trace_address_order) */
  struct {
    int64_t trace_id, events;
    int have, order;
    const char *why;
  } addresses;
};

session *session_new(store *s) {
  session *ses = sim_xcalloc(1, sizeof *ses);
  ses->s = s;
  ses->labels = session_labels_new(s);
  ses->names = session_labels_names(ses->labels);
  return ses;
}

void session_share_windows(session *ses, session_once *w) { ses->windows = w; }

void session_free(session *ses) {
  if (!ses) return;
  replay_engine_free(ses->engine); /* first: its kept models were made from the specs below */
  for (size_t i = 0; i < ses->nspecs; i++) {
    free(ses->specs[i]->text);
    sim_spec_release(&ses->specs[i]->spec);
    free(ses->specs[i]);
  }
  for (size_t i = 0; i < ses->nsettings; i++) {
    free(ses->settings[i]->json);
    settings_release(&ses->settings[i]->s);
    free(ses->settings[i]);
  }
  for (size_t i = 0; i < ses->ndevices; i++) free(ses->devices[i].key);
  free(ses->settings);
  free(ses->specs);
  free(ses->devices);
  window_cache_release(&ses->window);
  session_labels_free(ses->labels);
  free(ses);
}

store *session_store(const session *ses) { return ses->s; }

const replay_names *session_names(const session *ses) { return &ses->names; }

session_labels *session_labels_of(session *ses) { return ses->labels; }

/* The parsed SPEC, parsed once per session. NULL with a message when it is not a valid SPEC. */
static const sim_spec *session_spec(session *ses, const char *text, char *err, size_t errlen) {
  for (size_t i = 0; i < ses->nspecs; i++)
    if (!strcmp(ses->specs[i]->text, text)) return &ses->specs[i]->spec;
  sim_spec spec;
  if (sim_spec_parse(&spec, text, err, errlen) != SIM_OK) return NULL;
  sim_grow((void **)&ses->specs, &ses->spec_cap, ses->nspecs + 1, sizeof *ses->specs);
  spec_entry *e = ses->specs[ses->nspecs++] = sim_xmalloc(sizeof *e);
  e->text = xstrdup(text);
  e->spec = spec;
  return &e->spec;
}

/* Recorded settings as options, flattened once per session (NULL json: none). A recording that
 * is not a JSON object gives options that carry the reason (sim_recorded.error). */
static const sim_recorded *session_settings(session *ses, const char *json) {
  if (!json) return NULL;
  for (size_t i = 0; i < ses->nsettings; i++)
    if (!strcmp(ses->settings[i]->json, json)) return &ses->settings[i]->s.recorded;
  sim_grow((void **)&ses->settings, &ses->settings_cap, ses->nsettings + 1, sizeof *ses->settings);
  settings_entry *e = ses->settings[ses->nsettings++] = sim_xmalloc(sizeof *e);
  e->json = xstrdup(json);
  settings_init(&e->s, json);
  return &e->s.recorded;
}

/* A device profile by name (by_match 0) or for a recorded device (by_match 1), looked up once per
 * session: 0 found, 1 absent, -1 error. Without a store, names find the built-ins and recorded
 * devices match nothing. */
static int session_device(session *ses, int by_match, const char *name, uint64_t memory, devices_entry *out,
                          char *err, size_t errlen) {
  char key[512];
  snprintf(key, sizeof key, "%s\n%llu", name ? name : "", (unsigned long long)memory);
  for (size_t i = 0; i < ses->ndevices; i++) {
    const device_entry *d = &ses->devices[i];
    if (d->by_match == by_match && !strcmp(d->key, key)) {
      if (d->rc == 0) *out = d->e;
      return d->rc;
    }
  }
  device_entry d = {.by_match = by_match, .rc = 1};
  if (!ses->s) {
    const sim_device_profile *p = by_match ? NULL : sim_device_builtin(name);
    if (p) {
      d.e.p = *p;
      snprintf(d.e.source, sizeof d.e.source, "builtin");
      d.rc = 0;
    }
  } else {
    d.rc = by_match ? devices_store_match(ses->s, name, memory, &d.e, err, errlen)
                    : devices_store_get(ses->s, name, &d.e, err, errlen);
    if (d.rc < 0) return -1;
  }
  d.key = xstrdup(key);
  sim_grow((void **)&ses->devices, &ses->device_cap, ses->ndevices + 1, sizeof *ses->devices);
  ses->devices[ses->ndevices++] = d;
  if (d.rc == 0) *out = d.e;
  return d.rc;
}

int session_find_device(session *ses, const char *name, devices_entry *out, char *err, size_t errlen) {
  return session_device(ses, 0, name, 0, out, err, errlen);
}

/* ---- the request ---------------------------------------------------------------------------- */

void session_request_init(session_request *req) {
  memset(req, 0, sizeof *req);
  req->capacity = UINT64_MAX;
  req->batch = -1;
}

int session_check_allocator(const char *text, char *err, size_t errlen) {
  sim_spec spec;
  if (sim_spec_parse(&spec, text, err, errlen) != SIM_OK) return SESSION_EUSAGE;
  sim_spec_release(&spec);
  return SESSION_OK;
}

/* The time model's defaults: copies from the profile's bandwidths, device waits kept,
 * dependencies inferred, cudaMalloc's synchronization decided by the allocator. */
static sim_tm_config time_defaults(void) {
  return (sim_tm_config){.copy_timing = SIM_TM_TIMING_MODEL, .keep_device_waits = 1, .infer_dependencies = 1,
                         .malloc_syncs = -1, .kernel_scale = 1.0};
}

int session_check_timing(const char *timing, char *err, size_t errlen) {
  sim_tm_config c = time_defaults();
  return time_options_parse(&c, timing, err, errlen) ? SESSION_EUSAGE : SESSION_OK;
}

/* The run whose models are being created on this thread: env_lookup notes in it every variable a
 * model reads and finds set, for its report and its stored row. */
static _Thread_local session_run *env_run;

static const char *env_lookup(const char *name) {
  const char *v = getenv(name);
  session_run *run = env_run;
  if (!v || !run) return v;
  size_t n = strlen(name);
  for (size_t i = 0; i < run->nenv; i++)
    if (!strncmp(run->env[i], name, n) && run->env[i][n] == '=') return v;
  if (run->nenv < SESSION_MAX_ENV) {
    char *e = sim_xmalloc(n + strlen(v) + 2);
    sprintf(e, "%s=%s", name, v);
    run->env[run->nenv++] = e;
  }
  return v;
}

/* The device: the one named, else the profile the trace's recorded device matches (for the time
 * prediction only). A named device gives the capacity and the card's memory when the request
 * does not. */
static int resolve_device(session *ses, const session_request *req, session_run *run, char *err, size_t errlen) {
  const store_trace *t = req->trace;
  if (req->device) {
    int rc = session_device(ses, 0, req->device, 0, &run->device, err, errlen);
    if (rc < 0) return SESSION_EFAIL;
    if (rc == 1) {
      snprintf(err, errlen, "no device profile '%s' (see 'memplay devices')", req->device);
      return SESSION_EFAIL;
    }
    run->has_device = 1;
    run->device_reason = "option";
    if (run->capacity == UINT64_MAX) {
      run->capacity = sim_device_usable(&run->device.p);
      run->capacity_source = "device";
    }
    if (!run->total_memory) run->total_memory = run->device.p.total_memory;
    /* the card it was recorded on, to scale recorded kernel times from */
    uint64_t mem = t && t->device_memory > 0 ? (uint64_t)t->device_memory : 0;
    if (ses->s && t && t->device_name && session_device(ses, 1, t->device_name, mem, &run->recorded_device, err, errlen) == 0)
      run->has_recorded_device = 1;
    err[0] = 0;
  } else if (!req->no_device && ses->s && t) {
    uint64_t mem = t->device_memory > 0 ? (uint64_t)t->device_memory : 0;
    int rc = session_device(ses, 1, t->device_name, mem, &run->device, err, errlen);
    if (rc < 0) return SESSION_EFAIL;
    if (rc == 0) {
      run->has_device = 1;
      run->device_reason = "recorded";
      run->recorded_device = run->device;
      run->has_recorded_device = 1;
    }
  }
  if (!run->total_memory && t && t->device_memory > 0) run->total_memory = (uint64_t)t->device_memory;
  return SESSION_OK;
}

/* SPEC spellings of a framework's own switch to another allocator that memplay models on its
 * own: PyTorch's backend:cudaMallocAsync (PYTORCH_CUDA_ALLOC_CONF) is cudaMallocAsync's pool. */
static const struct {
  const char *model, *key, *value, *to, *env;
} spec_switches[] = {
  {"torch", "backend", "cudaMallocAsync", "async", "PYTORCH_CUDA_ALLOC_CONF"},
};

/* The model a SPEC's own switch names, in the SPEC or in the environment variable the framework
 * reads it from (the other options are dropped: the switched-to allocator does not read them),
 * or NULL. */
static const char *spec_switch(const sim_spec *spec, const session_run *run) {
  for (size_t k = 0; k < sizeof spec_switches / sizeof spec_switches[0]; k++) {
    if (strcmp(spec->ops->name, spec_switches[k].model)) continue;
    for (size_t i = 0; i < spec->nopts; i++)
      if (!strcmp(spec->opts[i].key, spec_switches[k].key) && !strcmp(spec->opts[i].value, spec_switches[k].value))
        return spec_switches[k].to;
    session_run *writable = (session_run *)run;
    env_run = writable; /* the variable is a setting read from the environment: the report names it */
    const char *v = run->getenv_fn ? run->getenv_fn(spec_switches[k].env) : NULL;
    env_run = NULL;
    char want[128];
    snprintf(want, sizeof want, "%s:%s", spec_switches[k].key, spec_switches[k].value);
    if (v && strstr(v, want)) return spec_switches[k].to;
  }
  return NULL;
}

/* The allocator: as asked, else the one that recorded the trace when memplay models it. Its
 * recorded settings go with it only when they are its own. */
static int resolve_allocator(session *ses, const session_request *req, session_run *run, char *err, size_t errlen) {
  const store_trace *t = req->trace;
  const char *text = req->allocator;
  if (!text)
    text = t && t->allocator && sim_allocator_find(t->allocator) ? t->allocator
           : req->fallback_allocator                            ? req->fallback_allocator
                                                                 : "ideal";
  run->spec = session_spec(ses, text, err, errlen);
  if (!run->spec) return SESSION_EUSAGE;
  const char *to = spec_switch(run->spec, run);
  if (to) {
    run->note = run->spec->nopts > 1 ? "backend:cudaMallocAsync is PyTorch's switch to cudaMallocAsync: replayed "
                                       "with the async model (the other torch options do not apply to it)"
                                     : "backend:cudaMallocAsync is PyTorch's switch to cudaMallocAsync: replayed "
                                       "with the async model";
    text = to;
    run->spec = session_spec(ses, text, err, errlen);
    if (!run->spec) return SESSION_EUSAGE;
  }
  run->allocator = xstrdup(text);
  run->recorded = t && t->allocator && !strcmp(t->allocator, run->spec->ops->name) ? t->allocator_settings : NULL;
  run->recorded_options = session_settings(ses, run->recorded);
  return SESSION_OK;
}

/* With no capacity given and no device, an allocator option `memory_limit` (TensorFlow's logical
 * device limit) is the memory the process has: the report says so instead of "unlimited". */
static void resolve_limit(session_run *run) {
  if (run->capacity != UINT64_MAX) return;
  for (size_t i = 0; i < run->spec->nopts; i++) {
    uint64_t v;
    if (!strcmp(run->spec->opts[i].key, "memory_limit") && !sim_parse_size(run->spec->opts[i].value, &v) && v > 0) {
      run->capacity = v;
      run->capacity_source = "memory_limit";
    }
  }
}

/* The time model's options: the request's, completed from the trace and the allocator. */
static void resolve_time(const session_request *req, session_run *run) {
  sim_tm_config *c = &run->tcfg;
  if (req->batch >= 0) c->batch_size = req->batch;
  else if (c->batch_size <= 0 && req->trace) c->batch_size = req->trace->batch_size;
  /* stream-ordered pools (cudaMallocAsync) grow without synchronizing the device */
  if (c->malloc_syncs < 0) c->malloc_syncs = !(run->spec->ops->traits & SIM_ALLOC_STREAM_ORDERED);
}

int session_address_order_of(const char *name) {
  static const char *const names[] = {"auto", "up", "down"}; /* SESSION_ADDRESSES_*, in order */
  for (int k = 0; k < 3; k++)
    if (name && !strcmp(name, names[k])) return k;
  return -1;
}

static void vote_segment(void *arg, uint64_t addr, int is_new) { sim_va_votes_add(arg, addr, is_new); }

/* The "address_order" a saved derived trace's attrs carry (t:save() writes its source's): SIM_VA_*,
 * or -1 when there is none. */
static int attrs_address_order(const char *attrs) {
  if (!attrs || !strstr(attrs, "\"address_order\"")) return -1; /* most traces: no parse */
  char perr[128];
  yajl_val root = jsonscan_tree(attrs, perr, sizeof perr);
  const char *path[] = {"address_order", NULL};
  yajl_val v = root ? yajl_tree_get(root, path, yajl_t_string) : NULL;
  const char *name = v ? YAJL_GET_STRING(v) : NULL;
  int order = !name ? -1 : !strcmp(name, "up") ? SIM_VA_UP : !strcmp(name, "down") ? SIM_VA_DOWN : -1;
  yajl_tree_free(root);
  return order;
}

int session_trace_address_order(store *s, const store_trace *t, const char **why, char *err, size_t errlen) {
  *why = NULL;
  if (!s || !t || t->id <= 0) return -1;
  sim_va_votes v = {0};
  if (store_trace_segments(s, t->id, vote_segment, &v)) {
    snprintf(err, errlen, "%s", store_error(s));
    return -2;
  }
  int order = sim_va_votes_order(&v);
  if (order >= 0) {
    *why = "recorded";
    return order;
  }
  order = attrs_address_order(t->attrs);
  if (order >= 0) *why = "derived";
  return order;
}

/* Which way the simulated driver hands out addresses: the request's; else the way the trace's
 * recorded segments went (a snapshot's, on the platform it was taken on) or its source trace's
 * did, read once per trace; else down, as the Linux driver goes (docs/allocators.md, "The
 * simulated device"). */
static int resolve_addresses(session *ses, const session_request *req, session_run *run, char *err, size_t errlen) {
  if (req->address_order != SESSION_ADDRESSES_AUTO) {
    run->address_order = req->address_order == SESSION_ADDRESSES_UP ? SIM_VA_UP : SIM_VA_DOWN;
    run->address_source = "option";
    return SESSION_OK;
  }
  int order = -1;
  const char *why = NULL;
  if (ses->s && req->trace && req->trace->id > 0) {
    if (!ses->addresses.have || ses->addresses.trace_id != req->trace->id ||
        ses->addresses.events != req->trace->event_count) {
      int o = session_trace_address_order(ses->s, req->trace, &why, err, errlen);
      if (o == -2) return SESSION_EFAIL;
      ses->addresses.trace_id = req->trace->id;
      ses->addresses.events = req->trace->event_count;
      ses->addresses.order = o;
      ses->addresses.why = why;
      ses->addresses.have = 1;
    }
    order = ses->addresses.order;
    why = ses->addresses.why;
  }
  run->address_order = order < 0 ? SIM_VA_DOWN : order;
  run->address_source = order < 0 ? "default" : why;
  return SESSION_OK;
}

int session_prepare(session *ses, const session_request *req, session_run *run, char *err, size_t errlen) {
  memset(run, 0, sizeof *run);
  run->trace = req->trace;
  run->capacity = req->capacity;
  run->total_memory = req->total_memory;
  run->shared_device = req->shared_device;
  run->getenv_fn = req->use_environment ? env_lookup : NULL;
  run->stop_at_oom = req->stop_at_oom;
  run->check = req->check;
  run->live_start = req->live_start;
  run->timeline_points = req->timeline_points;
  run->top_sites = req->top_sites;
  run->max_ooms = req->max_ooms;
  run->lean = req->lean;
  run->tcfg = time_defaults();
  if (req->shared_device && req->capacity == UINT64_MAX) {
    snprintf(err, errlen, "shared_device needs a capacity (the GPU's memory)");
    return SESSION_EUSAGE;
  }
  int rc = resolve_device(ses, req, run, err, errlen);
  if (rc) return rc;
  char terr[512];
  if (time_options_parse(&run->tcfg, req->timing, terr, sizeof terr)) {
    snprintf(err, errlen, "timing: %s", terr);
    return SESSION_EUSAGE;
  }
  rc = resolve_allocator(ses, req, run, err, errlen);
  if (!rc) rc = resolve_addresses(ses, req, run, err, errlen);
  if (rc) return rc;
  if (run->capacity != UINT64_MAX && !run->capacity_source) run->capacity_source = "option";
  resolve_limit(run);
  resolve_time(req, run);
  return SESSION_OK;
}


/* Clears what an earlier pass left. */
static void reset_pass(session_run *run) {
  if (run->executed) replay_result_release(&run->result);
  if (run->has_time) sim_tm_result_release(&run->time);
  run->executed = run->has_time = 0;
  memset(&run->result, 0, sizeof run->result);
  memset(&run->time, 0, sizeof run->time);
}

void session_run_release(session_run *run) {
  reset_pass(run);
  free(run->copy_fit);
  for (size_t i = 0; i < run->nenv; i++) free(run->env[i]); /* gathered over every pass, each once */
  free(run->allocator);
  memset(run, 0, sizeof *run);
}

void session_take_result(session_run *run, replay_result *out) {
  if (run->executed) *out = run->result;
  else memset(out, 0, sizeof *out);
  memset(&run->result, 0, sizeof run->result);
  run->executed = 0;
}

/* ---- the pass ------------------------------------------------------------------------------- */

/* On the device the trace was recorded on, its own copies say what the machine's links
 * delivered: they are fitted once per run (from the sums the store kept of the trace's copies
 * when it was written, store_trace_copy_fit) and the time
 * model uses the fit instead of the profile's bandwidths (docs/timemodel.md). Scenarios'
 * derived traces are fitted from the stored trace they derive from. */
/* The time model stopped: the trace's times, or what it predicted, left the range it follows. */
static void time_stopped_error(const session_run *run, char *err, size_t errlen) {
  char at[64] = "at the end";
  if (run->time.stopped_seq >= 0) snprintf(at, sizeof at, "at event %lld", (long long)run->time.stopped_seq);
  snprintf(err, errlen,
           "the time model stopped %s: %s; no time is predicted (the memory alone: replay or compare with "
           "--no-time, or device = false in a script)",
           at, run->time.stopped_why);
}

static void fit_copies(session *ses, session_run *run, const session_pass *pass) {
  if (run->copy_fit_done) return;
  run->copy_fit_done = 1;
  if (!ses->s || !run->trace || !run->has_recorded_device || run->tcfg.copy_timing != SIM_TM_TIMING_MODEL ||
      strcasecmp(run->recorded_device.p.name, run->device.p.name))
    return;
  if (!ses->copies.have || ses->copies.trace_id != run->trace->id || ses->copies.events != run->trace->event_count ||
      strcmp(ses->copies.device, run->device.p.name)) {
    sim_copy_fit *f = &ses->copies.fit;
    sim_copy_fit_init(f);
    if (pass->stored) {
      for (size_t i = 0; i < pass->nstored; i++) sim_copy_fit_add(f, &pass->stored[i]);
    } else if (store_trace_copy_fit(ses->s, run->trace->id, f) < 0) {
      return;
    }
    if (f->copies) sim_copy_fit_solve(f, &run->device.p);
    ses->copies.trace_id = run->trace->id;
    ses->copies.events = run->trace->event_count;
    snprintf(ses->copies.device, sizeof ses->copies.device, "%s", run->device.p.name);
    ses->copies.have = f->copies ? 1 : -1;
  }
  if (ses->copies.have < 0) return;
  run->copy_fit = sim_xmalloc(sizeof *run->copy_fit);
  *run->copy_fit = ses->copies.fit;
}

/* The engine's configuration for a prepared run. */
static replay_config engine_config(const session_run *run, const sim_spec *spec) {
  /* a memory_limit is the allocator's own bound, which it enforces; the card under it is larger */
  int own_limit = run->capacity_source && !strcmp(run->capacity_source, "memory_limit");
  return (replay_config){
    .spec = spec,
    .capacity = own_limit ? UINT64_MAX : run->capacity,
    .total_memory = run->total_memory,
    .cc_major = run->has_device ? run->device.p.cc_major : 0,
    .cc_minor = run->has_device ? run->device.p.cc_minor : 0,
    .address_order = run->address_order,
    .recorded = run->recorded_options,
    .getenv_fn = run->getenv_fn,
    .stop_at_oom = run->stop_at_oom,
    .timeline_points = run->timeline_points,
    .top_sites = run->top_sites,
    .max_ooms = run->max_ooms,
    .check_level = run->check ? 2 : 0,
    .lean = run->lean,
  };
}


int session_execute(session *ses, session_run *run, const session_pass *pass, char *err, size_t errlen) {
  static const session_pass none;
  if (!pass) pass = &none;
  reset_pass(run);
  /* another implementation of the same model, with the options parsed for it */
  sim_spec spec = *run->spec;
  if (pass->ops) spec.ops = pass->ops;
  replay_config cfg = engine_config(run, &spec);
  cfg.stop = pass->stop;
  cfg.device_watch = pass->watch;
  shared_pool pool;
  if (run->shared_device) {
    shared_pool_init(&pool, run->capacity, run->total_memory);
    pool.address_order = run->address_order;
    cfg.make_device = shared_device_make;
    cfg.release_device = shared_device_release;
    cfg.device_arg = &pool;
    cfg.capacity = UINT64_MAX;
    if (!cfg.total_memory) cfg.total_memory = run->capacity;
  } else if (pass->make_device) {
    cfg.make_device = pass->make_device;
    cfg.release_device = pass->release_device;
    cfg.device_arg = pass->device_arg;
  }
  /* observers: the time model's first, then the pass's */
  replay_observer *obs = sim_xcalloc(pass->nobservers + 1, sizeof *obs);
  time_observer tobs;
  if (run->has_device) {
    run->tcfg.device = &run->device.p;
    run->tcfg.recorded_device = run->has_recorded_device ? &run->recorded_device.p : NULL;
    fit_copies(ses, run, pass);
    run->tcfg.copy_fit = run->copy_fit;
    run->tcfg.events_hint = pass->source ? (int64_t)pass->source->length_hint : run->trace ? run->trace->event_count : 0;
    time_observer_init(&tobs, &run->tcfg, pass->names ? pass->names : &ses->names);
    obs[cfg.nobservers++] = time_observer_hook(&tobs);
  }
  for (size_t i = 0; i < pass->nobservers; i++) obs[cfg.nobservers++] = pass->observers[i];
  cfg.observers = obs;
  window_start_decide(ses->s, &ses->window, ses->windows, run, pass, &cfg);
  /* the events: the pass's, else the stored trace's */
  replay_source stored, *src = pass->source;
  int rc = SESSION_OK;
  if (!src) {
    if (!ses->s || !run->trace || store_source_open(&stored, ses->s, run->trace->id)) {
      snprintf(err, errlen, "%s", ses->s ? store_error(ses->s) : "there is no store to read the trace from");
      rc = SESSION_EFAIL;
      goto out;
    }
    src = &stored;
  }
  run->executed = 1;
  env_run = run;
  /* the session's engine keeps its tables, and resets the models it can, from run to run */
  if (!ses->engine) ses->engine = replay_engine_new();
  if (replay_engine_run(ses->engine, &cfg, src, &run->result, err, errlen)) rc = SESSION_EFAIL;
  env_run = NULL;
  if (src == &stored) replay_source_close(&stored);
out:
  if (run->has_device) {
    if (rc == SESSION_OK || run->executed) {
      time_observer_finish(&tobs, &run->time);
      run->has_time = 1;
      if (run->time.stopped && rc == SESSION_OK) {
        time_stopped_error(run, err, errlen);
        rc = SESSION_EFAIL;
      }
    }
    time_observer_release(&tobs);
  }
  free(obs);
  return rc;
}

/* ---- a moment ------------------------------------------------------------------------------ */

int session_at_parse(const char *text, session_at *at, char *err, size_t errlen) {
  memset(at, 0, sizeof *at);
  if (!strcmp(text, "peak")) return at->kind = SESSION_AT_PEAK, 0;
  if (!strcmp(text, "oom")) return at->kind = SESSION_AT_OOM, 0;
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno || v < 0 || v != v) goto bad;
  if (!*end) {
    long long n = strtoll(text, &end, 10);
    if (*end || n < 0) goto bad;
    at->kind = SESSION_AT_EVENT;
    at->value = n;
    return 0;
  }
  static const struct { const char *unit; double ns; } units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
                                                                   {"min", 60e9}, {"h", 3600e9}};
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (!strcmp(end, units[i].unit) && v * units[i].ns < 9.2e18) {
      at->kind = SESSION_AT_TIME;
      at->value = (int64_t)(v * units[i].ns + 0.5);
      return 0;
    }
bad:
  snprintf(err, errlen, "'%s' is not a moment: peak, oom, an event index (1234) or a time since the trace's start "
           "with a unit (1.5s, 250ms, 40us)", text);
  return -1;
}

typedef struct at_capture {
  replay_moment *m;
  const char *what;
  int taken;
} at_capture;

static void at_take(void *arg, const replay_state *st) {
  at_capture *c = arg;
  replay_moment_take(c->m, st, c->what);
  c->taken = 1;
}

int session_execute_at(session *ses, session_run *run, const session_pass *pass, const session_at *at,
                       replay_moment *m, char *err, size_t errlen) {
  static const session_pass none;
  session_pass p = pass ? *pass : none;
  replay_stop stop = {.seq = -1, .after_ns = -1};
  static const char *const what[] = {"peak", "oom", "event", "time"};
  at_capture cap = {.m = m, .what = what[at->kind]};
  memset(m, 0, sizeof *m);
  stop.capture = at_take;
  stop.arg = &cap;
  if (at->kind == SESSION_AT_PEAK) {
    int rc = session_execute(ses, run, pass, err, errlen);
    if (rc) return rc;
    if (run->result.peak_allocated_seq < 0) {
      snprintf(err, errlen, "the trace allocates no device memory: it has no peak");
      return SESSION_EUSAGE;
    }
    stop.seq = run->result.peak_allocated_seq;
    p.observers = NULL; /* they saw the whole replay */
    p.nobservers = 0;
  } else if (at->kind == SESSION_AT_OOM) {
    stop.at_oom = 1;
  } else if (at->kind == SESSION_AT_EVENT) {
    stop.seq = at->value;
  } else {
    stop.after_ns = at->value;
  }
  p.stop = &stop;
  /* the peak's pass keeps the whole run's result; the moment's pass only finds the state */
  replay_result whole;
  int keep = at->kind == SESSION_AT_PEAK;
  if (keep) session_take_result(run, &whole);
  int rc = session_execute(ses, run, &p, err, errlen);
  if (keep) {
    if (run->executed) replay_result_release(&run->result);
    run->result = whole;
    run->executed = 1;
  }
  if (rc) return rc;
  if (cap.taken) return SESSION_OK;
  char limit[48] = "unlimited";
  if (run->capacity != UINT64_MAX) report_bytes(limit, sizeof limit, (int64_t)run->capacity);
  if (at->kind == SESSION_AT_OOM)
    snprintf(err, errlen, "no allocation ran out of memory in this replay (capacity %s): there is no OOM to show",
             limit);
  else if (at->kind == SESSION_AT_EVENT)
    snprintf(err, errlen, "event %lld is past the trace's end (it has %llu events)", (long long)at->value,
             (unsigned long long)run->result.events);
  else
    snprintf(err, errlen, "%.9g s is past the trace's end", (double)at->value / 1e9);
  return SESSION_EUSAGE;
}

/* ---- the result ----------------------------------------------------------------------------- */

run_meta session_meta(const session_run *run) {
  run_meta m = {.trace_id = run->trace ? run->trace->id : 0,
                .trace_name = run->trace ? run->trace->name : NULL,
                .kind = "replay",
                .allocator = run->allocator,
                .capacity = run->capacity,
                .capacity_source = run->capacity_source,
                .env = (const char *const *)run->env,
                .nenv = run->nenv,
                .note = run->note,
                .address_order = run->address_source ? (run->address_order == SIM_VA_UP ? "up" : "down") : NULL,
                .address_source = run->address_source,
                .backend = "sim",
                .step_time_s = -1,
                .samples_per_s = -1};
  if (run->has_device) {
    m.device = run->device.p.name;
    m.device_source = run->device.source;
    m.device_reason = run->device_reason;
    m.card_bytes = run->device.p.total_memory;
    m.context_bytes = run->device.p.context_bytes;
  }
  m.window_start = run->window_start;
  m.window_note = run->window_start ? run->window_note : NULL;
  m.window_segments = run->window_segments;
  m.window_blocks = run->window_blocks;
  if (run->has_time) {
    m.time = &run->time;
    m.time_config = &run->tcfg;
    m.step_time_s = run->time.step_time_s;
    m.samples_per_s = run->time.samples_per_s;
  }
  return m;
}

void session_json(const session *ses, yajl_gen g, const run_meta *m, const replay_result *r, int timeline) {
  report_json(g, &ses->names, m, r, timeline);
}

int session_save_in(session *ses, const run_meta *m, const replay_result *r, const char *result_json, int how,
                    int64_t *run_id, char *err, size_t errlen) {
  store *s = ses->s;
  int64_t id = 0;
  if (!s) {
    snprintf(err, errlen, "there is no store to keep the run in");
    return SESSION_EFAIL;
  }
  if (store_run_save_named(s, &ses->names, m, r, &id) ||
      (result_json && how != SESSION_RESULT_REPORT && store_run_set_result(s, id, result_json, how == SESSION_RESULT_PATCH))) {
    snprintf(err, errlen, "%s", store_error(s));
    return SESSION_EFAIL;
  }
  if (run_id) *run_id = id;
  return SESSION_OK;
}

int session_save(session *ses, const run_meta *m, const replay_result *r, const char *result_json, int how,
                 int64_t *run_id, char *err, size_t errlen) {
  store *s = ses->s;
  if (s && store_begin(s)) {
    snprintf(err, errlen, "%s", store_error(s));
    return SESSION_EFAIL;
  }
  int rc = session_save_in(ses, m, r, result_json, how, run_id, err, errlen);
  if (rc == SESSION_OK && store_commit(s)) {
    snprintf(err, errlen, "%s", store_error(s));
    rc = SESSION_EFAIL;
  }
  if (rc && s) store_rollback(s);
  if (rc && run_id) *run_id = 0;
  return rc;
}

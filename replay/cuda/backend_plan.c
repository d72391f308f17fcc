/* backend_plan.c: planning a replay on a real GPU, in simulation first: prediction, needs, refusal, scaling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/device_sim.h"
#include "sim/hashmap.h"
#include "backend_cuda.h"
#include "engine/report.h"

/* ---- sizes -------------------------------------------------------------------------------- */

uint64_t backend_scale_size(uint64_t size, double factor) {
  if (size == 0 || factor == 1.0) return size;
  double v = floor((double)size * factor + 0.5);
  if (v < 1) return 1;
  if (v >= 18446744073709551615.0) return UINT64_MAX;
  return (uint64_t)v;
}

uint64_t backend_budget(uint64_t free_memory) {
  return free_memory > BACKEND_MARGIN ? free_memory - BACKEND_MARGIN : 0;
}

static int scaled_next(void *ctx, sim_event *ev) {
  backend_scaled *s = ctx;
  int rc = replay_source_next(&s->inner, ev);
  if (rc == 1) ev->size = backend_scale_size(ev->size, s->factor);
  return rc;
}

static const char *scaled_error(void *ctx) {
  backend_scaled *s = ctx;
  return s->inner.error ? s->inner.error(s->inner.ctx) : NULL;
}

static void scaled_close(void *ctx) {
  backend_scaled *s = ctx;
  replay_source_close(&s->inner);
}

replay_source backend_scaled_source(backend_scaled *s, replay_source inner, double factor) {
  s->inner = inner;
  s->factor = factor;
  return (replay_source){.next = scaled_next, .error = scaled_error, .close = scaled_close, .ctx = s};
}

/* ---- steps -------------------------------------------------------------------------------- */

int backend_step_opens(backend_stepper *s, const sim_event *ev) {
  int opens = 0;
  if (ev->kind == SIM_EV_MARKER && (ev->flags & SIM_EVF_STEP_BEGIN)) {
    opens = 1;
    s->by_marker = 1;
  } else if (!s->by_marker && ev->step >= 0 && s->started && ev->step != s->cur) {
    opens = 1;
  }
  if (!s->started) opens = 1;
  s->started = 1;
  if (opens || (!s->by_marker && ev->step >= 0)) s->cur = ev->step;
  return opens;
}

/* ---- one simulated pass --------------------------------------------------------------------- */

typedef struct gpu_mem {
  int known;
  uint64_t free_memory, total_memory;
} gpu_mem;

typedef struct pass {
  const backend_plan_config *cfg;
  backend_plan *p;
  gpu_mem *mem;             /* per device, shared by the passes */
  sim_device *devs[REPLAY_MAX_DEVICES];
  uint64_t dev_seen_used[REPLAY_MAX_DEVICES];
  uint64_t total_used;
  backend_stepper stepper;
  size_t usage_cap, steps_cap;
} pass;

static int device_memory(pass *ps, int device, char *err, size_t errlen) {
  gpu_mem *g = &ps->mem[device];
  if (g->known) return 0;
  if (ps->cfg->gpu_memory(ps->cfg->gpu_arg, device, &g->free_memory, &g->total_memory, err, errlen)) return -1;
  g->known = 1;
  return 0;
}

static int plan_make_device(void *arg, int device, sim_device *dev, char *err, size_t errlen) {
  pass *ps = arg;
  if (device_memory(ps, device, err, errlen)) return -1;
  const gpu_mem *g = &ps->mem[device];
  sim_simdev_init(dev, ps->cfg->run->capacity, g->total_memory);
  sim_simdev_set_va_order(dev, ps->cfg->run->address_order);
  dev->free_memory = g->free_memory;
  ps->devs[device] = dev;
  return 0;
}

static void plan_release_device(void *arg, int device, sim_device *dev) {
  pass *ps = arg;
  backend_gpu_plan *g = &ps->p->gpus[device];
  if (dev->used_peak > g->predicted_peak) g->predicted_peak = dev->used_peak;
  sim_simdev_release(dev);
  ps->devs[device] = NULL;
}

static void mark_used(pass *ps, int device) {
  backend_plan *p = ps->p;
  if (device < 0) device = 0;
  if (device >= REPLAY_MAX_DEVICES) return;
  p->gpus[device].used = 1;
  if (device + 1 > p->ngpus) p->ngpus = device + 1;
}

static uint64_t piece(uint64_t size) { return size < BACKEND_CHUNK ? size : BACKEND_CHUNK; }

static void max_into(uint64_t *v, uint64_t x) {
  if (x > *v) *v = x;
}

/* What the run will need for a copy or memset: device buffer, host buffers. */
static void copy_needs(pass *ps, const sim_event *ev) {
  backend_plan *p = ps->p;
  int d = ev->device < 0 ? 0 : ev->device;
  if (d >= REPLAY_MAX_DEVICES) return;
  uint64_t n = piece(ev->size);
  if (ev->kind == SIM_EV_MEMSET) {
    max_into(&p->gpus[d].scratch, n);
    return;
  }
  switch (ev->dir) {
  case SIM_COPY_H2D:
  case SIM_COPY_D2H:
    max_into(&p->gpus[d].scratch, n);
    if (ev->mem == SIM_MEM_PINNED) max_into(&p->pinned_staging, n);
    else max_into(&p->pageable_staging, n);
    break;
  case SIM_COPY_D2D:
  case SIM_COPY_P2P: max_into(&p->gpus[d].scratch, 2 * n); break;
  case SIM_COPY_H2H: max_into(&p->pageable_staging, 2 * n); break;
  default: break;
  }
}

static void plan_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  pass *ps = ctx;
  backend_plan *p = ps->p;
  (void)o;
  if (ev->ts < p->first_ts) p->first_ts = ev->ts;
  if (ev->ts > p->last_ts) p->last_ts = ev->ts;
  if (backend_step_opens(&ps->stepper, ev)) {
    sim_grow((void **)&p->steps, &ps->steps_cap, p->nsteps + 1, sizeof *p->steps);
    p->steps[p->nsteps++] = (backend_step){ev->seq, ev->ts, ev->step};
  }
  switch (ev->kind) {
  case SIM_EV_ALLOC:
  case SIM_EV_FREE:
  case SIM_EV_FREE_REQUESTED:
  case SIM_EV_FREE_COMPLETED: mark_used(ps, ev->device); break;
  case SIM_EV_KERNEL:
    p->kernels++;
    mark_used(ps, ev->device);
    break;
  case SIM_EV_MEMCPY:
    if (ev->dir == SIM_COPY_NONE) {
      p->skipped++;
      break;
    }
    p->copies++;
    if (ev->dir != SIM_COPY_H2H) mark_used(ps, ev->device);
    copy_needs(ps, ev);
    break;
  case SIM_EV_MEMSET:
    p->memsets++;
    mark_used(ps, ev->device);
    copy_needs(ps, ev);
    break;
  case SIM_EV_SYNC:
    p->syncs++;
    if (ev->device >= 0) mark_used(ps, ev->device);
    break;
  case SIM_EV_HOST_ALLOC: p->host_allocs++; break;
  case SIM_EV_API: p->skipped++; break;
  default: break;
  }
  /* Device memory in use, total over GPUs, when it changes. */
  uint64_t total = 0;
  for (int d = 0; d < p->ngpus; d++) {
    const sim_device *dev = ps->devs[d];
    if (!dev) continue;
    total += dev->used;
    if (dev->used > ps->dev_seen_used[d]) {
      ps->dev_seen_used[d] = dev->used;
      p->gpus[d].predicted_peak_seq = ev->seq;
    }
  }
  if (total != ps->total_used || p->nusage == 0) {
    ps->total_used = total;
    sim_grow((void **)&p->usage, &ps->usage_cap, p->nusage + 1, sizeof *p->usage);
    p->usage[p->nusage++] = (backend_usage){ev->seq, total};
  }
  if (total > p->predicted_device_peak) {
    p->predicted_device_peak = total;
    p->predicted_device_peak_seq = ev->seq;
  }
}

static void reset_pass_results(backend_plan *p) {
  replay_result_release(&p->predicted);
  free(p->steps);
  free(p->usage);
  p->steps = NULL;
  p->usage = NULL;
  p->nsteps = p->nusage = 0;
  p->kernels = p->copies = p->memsets = p->syncs = p->host_allocs = p->skipped = 0;
  p->pinned_staging = p->pageable_staging = 0;
  p->predicted_device_peak = 0;
  p->predicted_device_peak_seq = -1;
  p->first_ts = INT64_MAX;
  p->last_ts = INT64_MIN;
  p->ngpus = 0;
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++) {
    backend_gpu_plan *g = &p->gpus[d];
    g->used = 0;
    g->predicted_peak = g->scratch = g->need = 0;
    g->predicted_peak_seq = -1;
  }
}

static int run_pass(const backend_plan_config *cfg, gpu_mem *mem, backend_plan *p, double factor, char *err,
                    size_t errlen) {
  reset_pass_results(p);
  pass ps;
  memset(&ps, 0, sizeof ps);
  ps.cfg = cfg;
  ps.p = p;
  ps.mem = mem;
  replay_observer obs = {&ps, plan_event, NULL};
  replay_source inner;
  if (cfg->open(cfg->open_arg, &inner, err, errlen)) return -1;
  backend_scaled sc;
  replay_source src = backend_scaled_source(&sc, inner, factor);
  session_pass sp = {.source = &src, .observers = &obs, .nobservers = 1, .make_device = plan_make_device,
                     .release_device = plan_release_device, .device_arg = &ps, .watch = cfg->watch};
  int r = session_execute(cfg->ses, cfg->run, &sp, err, errlen);
  replay_source_close(&src);
  session_take_result(cfg->run, &p->predicted);
  if (r) return -1;
  if (p->nsteps == 0) p->first_ts = p->last_ts = 0;
  p->takes_device_memory = p->predicted.device_mallocs + p->predicted.device_maps > 0;
  p->predicted_at_requested_peak = backend_plan_used_at(p, p->predicted.peak_requested_seq);
  /* What each GPU must have free. */
  for (int d = 0; d < p->ngpus; d++) {
    backend_gpu_plan *g = &p->gpus[d];
    if (!g->used) continue;
    if (device_memory(&ps, d, err, errlen)) return -1;
    g->free_memory = mem[d].free_memory;
    g->total_memory = mem[d].total_memory;
    g->budget = backend_budget(g->free_memory);
    uint64_t peak = g->predicted_peak < cfg->run->capacity ? g->predicted_peak : cfg->run->capacity;
    g->need = peak + g->scratch;
  }
  return 0;
}

/* Checks the needs against the budgets; fills p->fits and p->why. */
static void judge(const backend_plan_config *cfg, backend_plan *p) {
  p->fits = 1;
  p->why[0] = 0;
  for (int d = 0; d < p->ngpus; d++) {
    const backend_gpu_plan *g = &p->gpus[d];
    if (!g->used || g->need <= g->budget) continue;
    p->fits = 0;
    char need[32], peak[32], scr[32], fr[32], bud[32];
    uint64_t avail = g->budget > g->scratch ? g->budget - g->scratch : 0;
    uint64_t capacity = cfg->run->capacity;
    uint64_t peak_bytes = g->predicted_peak < capacity ? g->predicted_peak : capacity;
    double most = peak_bytes ? (double)avail / (double)peak_bytes * p->scale : 0;
    snprintf(p->why, sizeof p->why,
             "the replay needs %s on GPU %d (a predicted peak of %s%s, and %s of copy buffers), but only %s is free "
             "and %s of it may be used: rerun with --scale fit, or with --scale %.3g or less",
             report_bytes(need, sizeof need, g->need), d, report_bytes(peak, sizeof peak, peak_bytes),
             g->predicted_peak > capacity ? " (capped by --capacity)" : "",
             report_bytes(scr, sizeof scr, g->scratch), report_bytes(fr, sizeof fr, g->free_memory),
             report_bytes(bud, sizeof bud, g->budget), most);
    return;
  }
}

int backend_plan_make(const backend_plan_config *cfg, backend_plan *p, char *err, size_t errlen) {
  memset(p, 0, sizeof *p);
  gpu_mem *mem = sim_xcalloc(REPLAY_MAX_DEVICES, sizeof *mem);
  double f = cfg->scale > 0 ? cfg->scale : 1.0;
  int rc = 0;
  p->scale = f;
  if (run_pass(cfg, mem, p, f, err, errlen)) {
    rc = -1;
    goto out;
  }
  judge(cfg, p);
  if (cfg->scale > 0 || p->fits) goto out;
  /* --scale fit: shrink until every GPU has room; each try aims just under the tightest GPU. */
  p->fitted = 1;
  for (int tries = 0; tries < BACKEND_FIT_TRIES && !p->fits; tries++) {
    double next = f;
    for (int d = 0; d < p->ngpus; d++) {
      const backend_gpu_plan *g = &p->gpus[d];
      if (!g->used || g->need <= g->budget || g->need == 0) continue;
      double ratio = (double)g->budget / (double)g->need * 0.97;
      if (f * ratio < next) next = f * ratio;
    }
    if (next >= f) next = f * 0.9;
    if (next < 1e-6) break;
    f = next;
    p->scale = f;
    if (run_pass(cfg, mem, p, f, err, errlen)) {
      rc = -1;
      goto out;
    }
    judge(cfg, p);
  }
  if (!p->fits) {
    char keep[sizeof p->why];
    memcpy(keep, p->why, sizeof keep);
    int n = snprintf(p->why, sizeof p->why, "no scale factor makes the trace fit (tried down to %.3g): ", f);
    if (n > 0 && (size_t)n < sizeof p->why) strncat(p->why, keep, sizeof p->why - (size_t)n - 1);
  }
out:
  free(mem);
  return rc;
}

void backend_plan_release(backend_plan *p) {
  replay_result_release(&p->predicted);
  free(p->steps);
  free(p->usage);
  memset(p, 0, sizeof *p);
}

uint64_t backend_plan_used_at(const backend_plan *p, int64_t seq) {
  if (seq < 0 || p->nusage == 0) return 0;
  size_t lo = 0, hi = p->nusage; /* the last change at or before seq */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (p->usage[mid].seq <= seq) lo = mid + 1;
    else hi = mid;
  }
  return lo ? p->usage[lo - 1].used : 0;
}

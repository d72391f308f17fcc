/* backend_cuda.c: the `cuda` replay backend: a planned trace performed on real GPUs, timed and measured. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_int.h"
#include "sim/hashmap.h"

/*
 * How each event is performed (docs/gpu.md, "The cuda backend"):
 *  - allocations and frees: through the engine and the allocator, which take memory through the
 *    real device primitive (cudart_device.c), or through the driver's own pool (driver_pool.c);
 *  - copies: of the recorded size, in the recorded direction, between a device copy buffer and a
 *    pinned (cudaHostAlloc) or pageable (malloc) host buffer as the recorded host memory kind
 *    says (unknown: pageable); asynchronous ones with cudaMemcpyAsync on the recorded stream,
 *    the others with cudaMemcpy; device-to-device and peer copies within the GPU's buffer;
 *    anything over BACKEND_CHUNK in pieces;
 *  - memsets: cudaMemsetAsync / cudaMemset of the copy buffer;
 *  - kernels: the spin kernel (spin.ptx) for the recorded duration, on the recorded stream;
 *  - synchronizations: cudaStreamSynchronize of the recorded stream, or cudaDeviceSynchronize;
 *  - host allocations: cudaHostAlloc (pinned) or malloc (pageable), freed as recorded;
 *  - markers and API calls: nothing (markers delimit steps).
 * Recorded stream 0 (and negative streams) is the legacy default stream; every other recorded
 * stream gets a stream of its own, created non-blocking on first use.
 */

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Records the first failure, prefixed with the event it served. Returns -1. */
int backend_run_fail(brun *r, const char *fmt, ...) {
  if (r->failed) return -1;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (r->seq >= 0) snprintf(r->err, sizeof r->err, "event %" PRId64 ": %s", r->seq, msg);
  else snprintf(r->err, sizeof r->err, "%s", msg);
  r->failed = 1;
  return -1;
}

int backend_rt_check(brun *r, cudaError_t e, const char *fmt, ...) {
  if (e == cudaSuccess) return 0;
  char what[600], msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  cudart_fail(msg, sizeof msg, e, "%s", what);
  return backend_run_fail(r, "%s", msg);
}

int backend_use_gpu(brun *r, int d) { return backend_rt_check(r, cudaSetDevice(d), "cudaSetDevice(%d)", d); }

/* ---- GPUs and streams ------------------------------------------------------------------------- */

static int gpu_open(brun *r, int d) {
  bgpu *g = &r->gpus[d];
  if (g->open) return 0;
  if (d >= r->info.ngpus)
    return backend_run_fail(r, "the trace uses device %d, but only %d GPU%s visible", d, r->info.ngpus,
                    r->info.ngpus == 1 ? " is" : "s are");
  if (backend_use_gpu(r, d)) return -1;
  sim_map_init(&g->streams);
  g->open = 1;
  char msg[600];
  if (cudart_spin_load(&r->drv, &g->spin, r->info.gpus[d].sms, msg, sizeof msg))
    return backend_run_fail(r, "GPU %d: %s", d, msg);
  g->scratch_size = r->plan->gpus[d].scratch;
  if (g->scratch_size) {
    char b[32];
    if (backend_rt_check(r, cudaMalloc(&g->scratch, g->scratch_size), "cudaMalloc of the %s copy buffer on GPU %d",
                 report_bytes(b, sizeof b, g->scratch_size), d))
      return -1;
    if (backend_rt_check(r, cudaMemset(g->scratch, 0, g->scratch_size), "cudaMemset of the copy buffer on GPU %d", d)) return -1;
  }
  if (backend_rt_check(r, cudaDeviceSynchronize(), "cudaDeviceSynchronize on GPU %d", d)) return -1;
  size_t f = 0, t = 0;
  if (backend_rt_check(r, cudaMemGetInfo(&f, &t), "cudaMemGetInfo on GPU %d", d)) return -1;
  g->base_free = f;
  g->total = t;
  return 0;
}

static void gpu_close(brun *r, int d) {
  bgpu *g = &r->gpus[d];
  if (!g->open) return;
  if (cudaSetDevice(d) == cudaSuccess) {
    for (size_t i = 0; i < g->nlist; i++)
      if (g->list[i]) backend_rt_check(r, cudaStreamDestroy(g->list[i]), "cudaStreamDestroy on GPU %d", d);
    if (g->scratch) backend_rt_check(r, cudaFree(g->scratch), "cudaFree of the copy buffer on GPU %d", d);
    cudart_spin_unload(&r->drv, &g->spin);
  }
  sim_map_release(&g->streams);
  free(g->list);
  memset(g, 0, sizeof *g);
}

/* The stream standing for recorded stream s on GPU d (NULL: the legacy default stream). */
int backend_stream_of(brun *r, int d, int64_t s, cudaStream_t *out) {
  *out = NULL;
  if (s <= 0) return 0;
  bgpu *g = &r->gpus[d];
  int existed;
  uint64_t *slot = sim_map_put(&g->streams, (uint64_t)s, &existed);
  if (existed) {
    *out = g->list[*slot];
    return 0;
  }
  sim_grow((void **)&g->list, &g->caplist, g->nlist + 1, sizeof *g->list);
  *slot = g->nlist;
  g->list[g->nlist] = NULL;
  cudaStream_t st = NULL;
  if (backend_rt_check(r, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags for stream %" PRId64 " on GPU %d", s, d))
    return -1;
  g->list[g->nlist++] = st;
  *out = st;
  return 0;
}

static int device_of(const sim_event *ev) { return ev->device < 0 ? 0 : ev->device; }

/* ---- memory in use ------------------------------------------------------------------------------ */

static uint64_t in_use(const brun *r) {
  uint64_t total = 0;
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++)
    if (r->gpus[d].dev) total += r->gpus[d].dev->used;
  return total;
}

static int sample_all(brun *r) {
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++) {
    sim_device *dev = r->gpus[d].dev;
    if (dev && cudart_device_sample(dev)) return backend_run_fail(r, "%s", cudart_device_error(dev));
  }
  return 0;
}

/* ---- the device factory for the engine ------------------------------------------------------------ */

static int run_make_device(void *arg, int device, sim_device *dev, char *err, size_t errlen) {
  brun *r = arg;
  if (gpu_open(r, device)) {
    snprintf(err, errlen, "%s", r->err);
    return -1;
  }
  bgpu *g = &r->gpus[device];
  if (cudart_device_init(dev, &r->drv, device, r->cfg->run->capacity, g->base_free, err, errlen)) return -1;
  /* Models that size themselves by the free memory (bfc) see what the plan showed them: the GPU
   * as the program found it, without memplay's own copy buffers. */
  dev->free_memory = r->plan->gpus[device].free_memory;
  cudart_device_set_owner(dev, r);
  g->dev = dev;
  return 0;
}

static void run_release_device(void *arg, int device, sim_device *dev) {
  brun *r = arg;
  const char *e = cudart_device_error(dev);
  if (e) backend_run_fail(r, "%s", e);
  r->gpus[device].dev = NULL;
  r->m->samples += cudart_device_samples(dev);
  cudart_device_release(dev);
}

/* ---- performing events ----------------------------------------------------------------------------- */

static const char *dir_name(int dir) { return sim_copy_dir_name(dir); }

static int do_copy(brun *r, const sim_event *ev) {
  backend_measured *m = r->m;
  int d = device_of(ev);
  if (ev->dir == SIM_COPY_NONE) return 0;
  if (ev->dir != SIM_COPY_H2H && gpu_open(r, d)) return -1;
  bgpu *g = &r->gpus[d];
  int pinned = ev->mem == SIM_MEM_PINNED;
  char *host = pinned ? r->pinned : r->pageable;
  char *dev = g->scratch;
  uint64_t piece = BACKEND_CHUNK, left = ev->size, done = 0;
  if (ev->dir == SIM_COPY_D2D || ev->dir == SIM_COPY_P2P) {
    if (g->scratch_size / 2 < piece) piece = g->scratch_size / 2;
  } else if (ev->dir == SIM_COPY_H2H) {
    uint64_t cap = r->plan->pageable_staging / 2;
    if (cap < piece) piece = cap;
  } else {
    uint64_t cap = pinned ? r->plan->pinned_staging : r->plan->pageable_staging;
    if (cap < piece) piece = cap;
    if (g->scratch_size < piece) piece = g->scratch_size;
  }
  if (left && piece == 0) return backend_run_fail(r, "no copy buffer was planned for this %s copy", dir_name(ev->dir));
  cudaStream_t st = NULL;
  int async = (ev->flags & SIM_EVF_ASYNC) != 0;
  if (ev->dir != SIM_COPY_H2H && (backend_use_gpu(r, d) || (async && backend_stream_of(r, d, ev->stream, &st)))) return -1;
  while (left) {
    uint64_t n = left < piece ? left : piece;
    void *dst, *src;
    enum cudaMemcpyKind kind;
    switch (ev->dir) {
    case SIM_COPY_H2D: dst = dev, src = host, kind = cudaMemcpyHostToDevice; break;
    case SIM_COPY_D2H: dst = host, src = dev, kind = cudaMemcpyDeviceToHost; break;
    case SIM_COPY_H2H: dst = r->pageable, src = (char *)r->pageable + piece, kind = cudaMemcpyHostToHost; break;
    default: dst = dev, src = dev + piece, kind = cudaMemcpyDeviceToDevice; break;
    }
    char b[32];
    cudaError_t e = async ? cudaMemcpyAsync(dst, src, n, kind, st) : cudaMemcpy(dst, src, n, kind);
    if (backend_rt_check(r, e, "%s (%s, %s%s%s, stream %" PRId64 ", GPU %d)", async ? "cudaMemcpyAsync" : "cudaMemcpy",
                 dir_name(ev->dir), report_bytes(b, sizeof b, n), ev->dir == SIM_COPY_H2D || ev->dir == SIM_COPY_D2H ? " of " : "",
                 ev->dir == SIM_COPY_H2D || ev->dir == SIM_COPY_D2H ? (pinned ? "pinned memory" : "pageable memory") : "",
                 ev->stream, d))
      return -1;
    left -= n;
    done++;
  }
  if (done > 1) m->chunks += done - 1;
  m->copies++;
  return 0;
}

static int do_memset(brun *r, const sim_event *ev) {
  int d = device_of(ev);
  if (gpu_open(r, d) || backend_use_gpu(r, d)) return -1;
  bgpu *g = &r->gpus[d];
  int async = (ev->flags & SIM_EVF_ASYNC) != 0;
  cudaStream_t st = NULL;
  if (async && backend_stream_of(r, d, ev->stream, &st)) return -1;
  uint64_t piece = g->scratch_size < BACKEND_CHUNK ? g->scratch_size : BACKEND_CHUNK;
  if (ev->size && piece == 0) return backend_run_fail(r, "no buffer was planned for this memset");
  for (uint64_t left = ev->size; left;) {
    uint64_t n = left < piece ? left : piece;
    char b[32];
    cudaError_t e = async ? cudaMemsetAsync(g->scratch, 0, n, st) : cudaMemset(g->scratch, 0, n);
    if (backend_rt_check(r, e, "%s of %s (stream %" PRId64 ", GPU %d)", async ? "cudaMemsetAsync" : "cudaMemset",
                 report_bytes(b, sizeof b, n), ev->stream, d))
      return -1;
    left -= n;
  }
  r->m->memsets++;
  return 0;
}

static int do_kernel(brun *r, const sim_event *ev) {
  int d = device_of(ev);
  if (gpu_open(r, d) || backend_use_gpu(r, d)) return -1;
  cudaStream_t st;
  if (backend_stream_of(r, d, ev->stream, &st)) return -1;
  char msg[600];
  if (cudart_spin_launch(&r->drv, &r->gpus[d].spin, st, ev->dur > 0 ? (uint64_t)ev->dur : 0, msg, sizeof msg))
    return backend_run_fail(r, "%s (stream %" PRId64 ", GPU %d)", msg, ev->stream, d);
  r->m->kernels++;
  return 0;
}

/* What the program waited for: stream < 0 the whole GPU, 0 the legacy default stream, else its
 * stream (on a GPU where that stream was never used there is nothing to wait for). */
static int sync_gpu(brun *r, int d, int64_t stream) {
  bgpu *g = &r->gpus[d];
  if (!g->open) return 0;
  if (backend_use_gpu(r, d)) return -1;
  if (stream < 0) {
    if (backend_rt_check(r, cudaDeviceSynchronize(), "cudaDeviceSynchronize (GPU %d)", d)) return -1;
  } else {
    cudaStream_t st = NULL;
    if (stream > 0) {
      uint64_t *i = sim_map_get(&g->streams, (uint64_t)stream);
      if (!i) return 0;
      st = g->list[*i];
    }
    if (backend_rt_check(r, cudaStreamSynchronize(st), "cudaStreamSynchronize (stream %" PRId64 ", GPU %d)", stream, d))
      return -1;
  }
  if (g->pool && backend_pool_refresh(g->pool)) return -1;
  return 0;
}

static int do_sync(brun *r, const sim_event *ev) {
  r->m->syncs++;
  if (ev->device >= 0) {
    if (gpu_open(r, ev->device)) return -1;
    return sync_gpu(r, ev->device, ev->stream);
  }
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++)
    if (sync_gpu(r, d, ev->stream)) return -1;
  return 0;
}

static int do_host(brun *r, const sim_event *ev) {
  if (ev->kind == SIM_EV_HOST_ALLOC) {
    if (sim_map_get(&r->host, ev->addr)) return 0; /* the engine counts it as a repeat */
    void *p = NULL;
    int pinned = ev->mem == SIM_MEM_PINNED;
    if (pinned) {
      char b[32];
      if (backend_rt_check(r, cudaHostAlloc(&p, ev->size ? ev->size : 1, cudaHostAllocPortable), "cudaHostAlloc of %s",
                   report_bytes(b, sizeof b, ev->size)))
        return -1;
    } else if (!(p = malloc(ev->size ? ev->size : 1))) {
      return backend_run_fail(r, "cannot allocate %" PRIu64 " bytes of host memory: %s", ev->size, strerror(errno));
    }
    *sim_map_put(&r->host, ev->addr, NULL) = (uint64_t)(uintptr_t)p;
    *sim_map_put(&r->host_pinned, ev->addr, NULL) = (uint64_t)pinned;
    r->m->host_allocs++;
    return 0;
  }
  uint64_t p, pinned = 0;
  if (!sim_map_del(&r->host, ev->addr, &p)) return 0;
  sim_map_del(&r->host_pinned, ev->addr, &pinned);
  if (pinned) return backend_rt_check(r, cudaFreeHost((void *)(uintptr_t)p), "cudaFreeHost");
  free((void *)(uintptr_t)p);
  return 0;
}

static void run_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  brun *r = ctx;
  backend_measured *m = r->m;
  (void)o;
  if (r->failed) return;
  switch (ev->kind) {
  case SIM_EV_MEMCPY: do_copy(r, ev); break;
  case SIM_EV_MEMSET: do_memset(r, ev); break;
  case SIM_EV_KERNEL: do_kernel(r, ev); break;
  case SIM_EV_SYNC: do_sync(r, ev); break;
  case SIM_EV_HOST_ALLOC:
  case SIM_EV_HOST_FREE: do_host(r, ev); break;
  default: break;
  }
  /* A device call the model did not report back (a failed cudaFree, say) still stops the run. */
  for (int d = 0; d < r->plan->ngpus && !r->failed; d++) {
    const char *e = r->gpus[d].dev ? cudart_device_error(r->gpus[d].dev) : NULL;
    if (e) backend_run_fail(r, "%s", e);
  }
  if (r->failed) return;
  const backend_plan *p = r->plan;
  int at_req = ev->seq == p->predicted.peak_requested_seq, at_pred = ev->seq == p->predicted_device_peak_seq;
  if ((at_req || at_pred) && sample_all(r)) return;
  uint64_t used = in_use(r);
  if (used > m->peak_used) {
    m->peak_used = used;
    m->peak_used_seq = ev->seq;
  }
  if (at_req) m->at_requested_peak = used;
  if (at_pred) m->at_predicted_peak = used;
}

/* ---- the source: pacing, step clocks, and stopping at the first failure ------------------------ */

/* The host time a call took when it was recorded: a synchronization's or an API call's duration,
 * else the API time it records (none: 0). */
static int64_t recorded_call_ns(const sim_event *ev) {
  if (ev->kind == SIM_EV_SYNC || ev->kind == SIM_EV_API) return ev->dur > 0 ? ev->dur : 0;
  return ev->api_dur > 0 ? ev->api_dur : 0;
}

static void pace(brun *r, const sim_event *ev) {
  int64_t now = now_ns(), target;
  if (r->cfg->pace == BACKEND_PACE_GAPS) { /* now is when the previous call returned */
    target = ev->ts > r->prev_end_ts ? now + (ev->ts - r->prev_end_ts) : now;
    r->prev_end_ts = ev->ts + recorded_call_ns(ev);
  } else {
    target = r->t0 + (ev->ts - r->first_ts);
  }
  if (target <= now) return;
  int64_t wait = target - now;
  if (wait > 200000) { /* sleep most of it, spin the rest */
    struct timespec ts = {(time_t)((wait - 100000) / 1000000000), (long)((wait - 100000) % 1000000000)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
  }
  while (now_ns() < target) {
  }
  r->m->pace_wait_s += (double)wait / 1e9;
}

static int run_next(void *ctx, sim_event *ev) {
  brun *r = ctx;
  if (r->failed) return -1;
  int got = replay_source_next(&r->inner, ev);
  if (got != 1) {
    r->seq = -1; /* what fails from now on (the allocators' clean-up) serves no event */
    return got;
  }
  r->seq = ev->seq;
  if (r->t0 == 0) {
    r->first_ts = r->prev_end_ts = ev->ts; /* the first event waits for nothing */
    r->t0 = now_ns();
  }
  if (r->cfg->pace) pace(r, ev);
  if (backend_step_opens(&r->stepper, ev)) {
    int64_t now = now_ns();
    if (r->step > 0 && r->step - 1 < r->m->nsteps) r->m->step_s[r->step - 1] = (double)(now - r->step_t0) / 1e9;
    r->step++;
    r->step_t0 = now;
  }
  return 1;
}

static const char *run_error(void *ctx) {
  brun *r = ctx;
  if (r->failed) return r->err;
  return r->inner.error ? r->inner.error(r->inner.ctx) : NULL;
}

/* ---- the run ------------------------------------------------------------------------------------- */

static int host_buffers(brun *r) {
  const backend_plan *p = r->plan;
  char b[32];
  if (p->pinned_staging &&
      backend_rt_check(r, cudaHostAlloc(&r->pinned, p->pinned_staging, cudaHostAllocPortable), "cudaHostAlloc of the %s pinned copy buffer",
               report_bytes(b, sizeof b, p->pinned_staging)))
    return -1;
  if (p->pageable_staging) {
    r->pageable = malloc(p->pageable_staging);
    if (!r->pageable)
      return backend_run_fail(r, "cannot allocate the %s pageable copy buffer: %s", report_bytes(b, sizeof b, p->pageable_staging),
                      strerror(errno));
    memset(r->pageable, 0, p->pageable_staging); /* touch every page now, not during the timed run */
  }
  if (r->pinned) memset(r->pinned, 0, p->pinned_staging);
  return 0;
}

/* Everything the run took is given back: the GPUs' memory and streams, the host buffers. */
static void run_give_back(brun *r) {
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++) gpu_close(r, d);
  size_t it = 0;
  uint64_t k, v;
  while (sim_map_next(&r->host, &it, &k, &v)) {
    uint64_t *pinned = sim_map_get(&r->host_pinned, k);
    if (pinned && *pinned) cudaFreeHost((void *)(uintptr_t)v);
    else free((void *)(uintptr_t)v);
  }
  if (r->pinned) backend_rt_check(r, cudaFreeHost(r->pinned), "cudaFreeHost of the pinned copy buffer");
  free(r->pageable);
  sim_map_release(&r->host);
  sim_map_release(&r->host_pinned);
}

int backend_cuda_run(const backend_run_config *cfg, const backend_plan *plan, backend_measured *m, char *err,
                     size_t errlen) {
  memset(m, 0, sizeof *m);
  m->paced = cfg->pace;
  m->peak_used_seq = -1;
  brun *r = sim_xcalloc(1, sizeof *r);
  r->cfg = cfg;
  r->plan = plan;
  r->m = m;
  r->seq = -1;
  sim_map_init(&r->host);
  sim_map_init(&r->host_pinned);
  m->nsteps = plan->nsteps;
  m->step_s = sim_xcalloc(plan->nsteps ? plan->nsteps : 1, sizeof *m->step_s);
  int rc = -1;
  char msg[1024];
  if (cudart_probe(&r->info, msg, sizeof msg) || cudart_driver_load(&r->drv, msg, sizeof msg)) {
    snprintf(r->err, sizeof r->err, "%s", msg);
    goto out;
  }
  /* Everything fixed is set up before the clock starts: GPUs, kernels, copy buffers. */
  size_t o = 0;
  for (int d = 0; d < plan->ngpus; d++) {
    if (!plan->gpus[d].used) continue;
    if (gpu_open(r, d)) goto out;
    if (o < sizeof m->gpu_names)
      o += (size_t)snprintf(m->gpu_names + o, sizeof m->gpu_names - o, "%s%s (GPU %d)", o ? ", " : "",
                            r->info.gpus[d].name, d);
  }
  if (host_buffers(r)) goto out;

  replay_observer obs = {r, run_event, NULL};
  replay_source inner;
  if (cfg->open(cfg->open_arg, &inner, msg, sizeof msg)) {
    snprintf(r->err, sizeof r->err, "%s", msg);
    goto out;
  }
  backend_scaled sc;
  r->inner = backend_scaled_source(&sc, inner, plan->scale);
  replay_source src = {.next = run_next, .error = run_error, .close = NULL, .ctx = r};
  session_pass sp = {.source = &src,
                     .ops = backend_uses_driver_pool(cfg->run) ? &backend_pool_ops : NULL,
                     .observers = &obs,
                     .nobservers = 1,
                     .make_device = run_make_device,
                     .release_device = run_release_device,
                     .device_arg = r,
                     .watch = cfg->watch};
  int er = session_execute(cfg->ses, cfg->run, &sp, msg, sizeof msg);
  session_take_result(cfg->run, &m->engine);
  replay_source_close(&r->inner);
  if (er && !r->failed) snprintf(r->err, sizeof r->err, "%s", msg);
  if (er || r->failed) goto out;
  /* The end: wait for everything still running on every GPU, then stop the clocks. */
  r->seq = -1;
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++)
    if (r->gpus[d].open && (backend_use_gpu(r, d) || backend_rt_check(r, cudaDeviceSynchronize(), "cudaDeviceSynchronize at the end (GPU %d)", d)))
      goto out;
  int64_t end = now_ns();
  m->wall_s = r->t0 ? (double)(end - r->t0) / 1e9 : 0;
  if (r->step > 0 && r->step - 1 < m->nsteps) m->step_s[r->step - 1] = (double)(end - r->step_t0) / 1e9;
  rc = 0;
out:
  run_give_back(r);
  if (r->failed || rc) {
    snprintf(err, errlen, "%s", r->err[0] ? r->err : "the replay on the GPU failed");
    rc = -1;
  }
  free(r);
  return rc;
}

void backend_measured_release(backend_measured *m) {
  free(m->step_s);
  replay_result_release(&m->engine);
  memset(m, 0, sizeof *m);
}

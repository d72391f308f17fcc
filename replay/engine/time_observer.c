/* time_observer.c: the time model as a replay observer, and its options. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "time_observer.h"

/* The driver calls through which allocators take and give back device memory. */
static const char *const allocator_calls[] = {
  "cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemMap", "cuMemSetAccess",
  "cuMemUnmap", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree", NULL,
};

int time_observer_is_allocator_call(const char *name) {
  if (!name) return 0;
  /* names carry version suffixes in some traces: cudaMalloc_v3020, cuMemAlloc_v2 */
  size_t n = strlen(name);
  const char *us = strrchr(name, '_');
  if (us && us[1] == 'v' && isdigit((unsigned char)us[2])) n = (size_t)(us - name);
  for (int i = 0; allocator_calls[i]; i++)
    if (strlen(allocator_calls[i]) == n && !strncmp(allocator_calls[i], name, n)) return 1;
  return 0;
}

/* The role of an API event (SIM_EV_API with a name). Only a trace that records its allocations
 * lets the replayed allocator make the calls that replace the recorded ones; in one that does
 * not, the recorded calls keep their time. */
__attribute__((noinline)) static int role_of(time_observer *to, const sim_event *ev) {
  if (!ev->name || !to->names.string || !to->seen_alloc) return SIM_TM_ROLE_NONE;
  int existed;
  uint64_t *slot = sim_map_put(&to->roles, (uint64_t)ev->name, &existed);
  if (!existed) {
    const char *name = replay_name(&to->names, ev->name);
    *slot = 1 + (uint64_t)(time_observer_is_allocator_call(name) ? SIM_TM_ROLE_ALLOCATOR_CALL : SIM_TM_ROLE_NONE);
  }
  return (int)(*slot - 1);
}

/* Any of the words, case-insensitively, in a name. */
static int names_any(const char *name, const char *const *words) {
  for (int i = 0; words[i]; i++)
    if (strcasestr(name, words[i])) return 1;
  return 0;
}

/* The rule (docs/timemodel.md, "Another device"): communication kernels are bound by the
 * network and kept; matrix multiplications and convolutions are compute-bound, on the tensor
 * cores in 16 bits or TF32 when their names say so (cuBLAS/CUTLASS name the math: h1688,
 * s16816, tensorop, bf16), else on the CUDA cores; matrix-vector products, and everything else
 * (elementwise, reductions, norms, softmax, copies, scans, indexing, the optimizer's
 * multi-tensor kernels, fused Triton kernels), are memory-bound. */
int time_observer_kernel_bound(const char *name) {
  static const char *const comm[] = {"nccl", "rccl", "allreduce", "all_reduce", "allgather", "reducescatter", NULL};
  static const char *const matvec[] = {"gemv", "gemvx", "dot_kernel", NULL};
  static const char *const math[] = {"gemm", "conv", "cudnn", "mma", "cutlass", "winograd", "fmha", "flash",
                                     "attention", "triton_mm", "triton_tem", NULL};
  static const char *const half[] = {"bf16", "f16", "fp16", "half", "bfloat", "h1688", "h16816", "h884", "hmma",
                                     "fmha", "flash", NULL};
  static const char *const tf32[] = {"tf32", "s1688", "s16816", "tensorop", "xmma", NULL};
  if (!name || !*name) return SIM_TM_KB_MEMORY;
  if (names_any(name, comm)) return SIM_TM_KB_KEEP;
  if (names_any(name, matvec) || strcasestr(name, "convert") || strcasestr(name, "elementwise") ||
      !names_any(name, math))
    return SIM_TM_KB_MEMORY;
  if (names_any(name, half)) return SIM_TM_KB_COMPUTE16;
  if (names_any(name, tf32)) return SIM_TM_KB_TF32;
  return SIM_TM_KB_FP32;
}

static int kernel_bound(void *arg, const sim_event *ev) {
  time_observer *to = arg;
  if (!ev->name || !to->names.string) return SIM_TM_KB_MEMORY;
  int existed;
  uint64_t *slot = sim_map_put(&to->bounds, (uint64_t)ev->name, &existed);
  if (!existed) *slot = 1 + (uint64_t)time_observer_kernel_bound(replay_name(&to->names, ev->name));
  return (int)(*slot - 1);
}

/* Every model fed the event, with what the allocator did (NULL: no driver call). */
__attribute__((noinline)) static void feed(time_observer *to, const sim_event *ev, const sim_tm_alloc *a, int role) {
  sim_tm_event(to->tm, ev, a, role);
  for (int i = 0; i < 2; i++)
    if (to->bound[i]) sim_tm_event(to->bound[i], ev, a, role);
}

/* An event for which the allocator made driver calls (few of them). */
__attribute__((noinline)) static void feed_calls(time_observer *to, const sim_event *ev, const replay_outcome *o,
                                                 int role) {
  sim_tm_alloc a = {o->device_mallocs, o->device_frees, o->device_maps, o->device_unmaps,
                    o->device_malloc_bytes, o->device_free_bytes, o->device_map_bytes, o->device_unmap_bytes};
  feed(to, ev, &a, role);
}

/* Feeds an event of the given role: the models, with the allocator's calls when it made some. */
static inline void feed_role(time_observer *to, const sim_event *ev, const replay_outcome *o, int role) {
  if (o->device_mallocs | o->device_frees | o->device_maps | o->device_unmaps) feed_calls(to, ev, o, role);
  else if (!to->bound[0]) sim_tm_event(to->tm, ev, NULL, role); /* most: one model (the range has both or none) */
  else feed(to, ev, NULL, role);
}

/* An API event: its role first (kept out of line: the common path then saves no registers). */
__attribute__((noinline)) static void on_api(time_observer *to, const sim_event *ev, const replay_outcome *o) {
  feed_role(to, ev, o, role_of(to, ev));
}

static void on_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  time_observer *to = ctx;
  if (ev->kind == SIM_EV_API) {
    on_api(to, ev, o);
    return;
  }
  if (ev->kind == SIM_EV_ALLOC) to->seen_alloc = 1;
  feed_role(to, ev, o, SIM_TM_ROLE_NONE);
}

void time_observer_init(time_observer *to, const sim_tm_config *cfg, const replay_names *names) {
  memset(to, 0, sizeof *to); /* seen_alloc starts at 0: whatever the caller's memory held */
  to->names = names ? *names : (replay_names){0};
  sim_map_init(&to->roles);
  sim_map_init(&to->bounds);
  sim_tm_config c = *cfg;
  c.kernel_bound = kernel_bound;
  c.kernel_bound_arg = to;
  c.scale_policy = SIM_TM_SCALE_CLASSIFIED;
  to->tm = sim_tm_new(&c);
  /* another device than the recorded one: the two bounds of the range too */
  if (cfg->recorded_device && !cfg->kernels_as_recorded && strcasecmp(cfg->recorded_device->name, cfg->device->name)) {
    c.scale_policy = SIM_TM_SCALE_FASTEST;
    to->bound[0] = sim_tm_new(&c);
    c.scale_policy = SIM_TM_SCALE_SLOWEST;
    to->bound[1] = sim_tm_new(&c);
  }
}

replay_observer time_observer_hook(time_observer *to) { return (replay_observer){to, on_event, NULL}; }

void time_observer_finish(time_observer *to, sim_tm_result *res) {
  sim_tm_finish(to->tm, res);
  for (int i = 0; i < 2; i++) {
    if (!to->bound[i]) continue;
    sim_tm_result b;
    sim_tm_finish(to->bound[i], &b);
    res->range_total_ns[i] = b.total_ns;
    res->range_step_time_s[i] = b.step_time_s;
    res->has_range = 1;
    if (b.stopped && !res->stopped) { /* a bound's prediction left the range: no range, then */
      res->stopped = 1;
      res->stopped_seq = b.stopped_seq;
      memcpy(res->stopped_why, b.stopped_why, sizeof res->stopped_why);
    }
    sim_tm_result_release(&b);
  }
}

void time_observer_release(time_observer *to) {
  sim_tm_free(to->tm);
  for (int i = 0; i < 2; i++)
    if (to->bound[i]) sim_tm_free(to->bound[i]);
  sim_map_release(&to->roles);
  sim_map_release(&to->bounds);
  memset(to, 0, sizeof *to);
}

/* ---- options ---------------------------------------------------------------------------------- */

static int choice(const char *v, const char *yes, const char *no, int *out) {
  if (!strcasecmp(v, yes)) *out = 1;
  else if (!strcasecmp(v, no)) *out = 0;
  else return -1;
  return 0;
}

int time_options_parse(sim_tm_config *cfg, const char *text, char *err, size_t errlen) {
  if (!text || !*text) return 0;
  char *copy = strdup(text), *save = NULL;
  if (!copy) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = 0;
  for (char *item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) eq = strchr(item, ':');
    if (!eq) {
      snprintf(err, errlen, "time option '%s' wants KEY=VALUE", item);
      rc = -1;
      break;
    }
    *eq = 0;
    const char *k = item, *v = eq + 1;
    int b = 0;
    if (!strcmp(k, "copies")) {
      if (!strcasecmp(v, "profile")) cfg->copy_timing = SIM_TM_TIMING_PROFILE;
      else if (choice(v, "recorded", "model", &b)) goto bad;
      else cfg->copy_timing = b ? SIM_TM_TIMING_RECORDED : SIM_TM_TIMING_MODEL;
    } else if (!strcmp(k, "kernels")) {
      if (choice(v, "recorded", "scaled", &b)) goto bad;
      cfg->kernels_as_recorded = b;
    } else if (!strcmp(k, "device_waits")) {
      if (choice(v, "keep", "drop", &b)) goto bad;
      cfg->keep_device_waits = b;
    } else if (!strcmp(k, "dependencies")) {
      if (choice(v, "infer", "off", &b)) goto bad;
      cfg->infer_dependencies = b;
    } else if (!strcmp(k, "malloc_syncs")) {
      if (choice(v, "true", "false", &b) && choice(v, "1", "0", &b)) goto bad;
      cfg->malloc_syncs = b;
    } else if (!strcmp(k, "batch")) {
      char *end;
      errno = 0;
      long long n = strtoll(v, &end, 10);
      if (end == v || *end || errno || n <= 0) goto bad;
      cfg->batch_size = n;
    } else if (!strcmp(k, "kernel_scale")) {
      char *end;
      errno = 0;
      double x = strtod(v, &end);
      /* a factor, in range: past 1000 no what-if is meant, and times could leave 64 bits */
      if (end == v || *end || errno || !isfinite(x) || x <= 0 || x > 1000) goto bad;
      cfg->kernel_scale = x;
    } else {
      snprintf(err, errlen,
               "unknown time option '%s' (copies, kernels, device_waits, dependencies, kernel_scale, malloc_syncs, batch)", k);
      rc = -1;
    }
    continue;
  bad:
    snprintf(err, errlen, "time option '%s' does not take '%s'", k, v);
    rc = -1;
  }
  free(copy);
  return rc;
}

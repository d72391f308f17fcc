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

static int role_of(time_observer *to, const sim_event *ev) {
  if (ev->kind == SIM_EV_ALLOC) to->seen_alloc = 1;
  /* Only a trace that records its allocations lets the replayed allocator make the calls that
   * replace the recorded ones; in one that does not, the recorded calls keep their time. */
  if (ev->kind != SIM_EV_API || !ev->name || !to->names.string || !to->seen_alloc) return SIM_TM_ROLE_NONE;
  int existed;
  uint64_t *slot = sim_map_put(&to->roles, (uint64_t)ev->name, &existed);
  if (!existed) {
    const char *name = replay_name(&to->names, ev->name);
    *slot = 1 + (uint64_t)(time_observer_is_allocator_call(name) ? SIM_TM_ROLE_ALLOCATOR_CALL : SIM_TM_ROLE_NONE);
  }
  return (int)(*slot - 1);
}

static void on_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  time_observer *to = ctx;
  sim_tm_alloc a = {o->device_mallocs, o->device_frees, o->device_maps, o->device_unmaps,
                    o->device_malloc_bytes, o->device_free_bytes, o->device_map_bytes, o->device_unmap_bytes};
  sim_tm_event(to->tm, ev, &a, role_of(to, ev));
}

void time_observer_init(time_observer *to, const sim_tm_config *cfg, const replay_names *names) {
  memset(to, 0, sizeof *to); /* seen_alloc starts at 0: whatever the caller's memory held */
  to->tm = sim_tm_new(cfg);
  to->names = names ? *names : (replay_names){0};
  sim_map_init(&to->roles);
}

replay_observer time_observer_hook(time_observer *to) { return (replay_observer){to, on_event, NULL}; }

void time_observer_finish(time_observer *to, sim_tm_result *res) { sim_tm_finish(to->tm, res); }

void time_observer_release(time_observer *to) {
  sim_tm_free(to->tm);
  sim_map_release(&to->roles);
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
      if (choice(v, "recorded", "model", &b)) goto bad;
      cfg->copy_timing = b ? SIM_TM_TIMING_RECORDED : SIM_TM_TIMING_MODEL;
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
               "unknown time option '%s' (copies, device_waits, dependencies, kernel_scale, malloc_syncs, batch)", k);
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

/* event.c: names of the event model's enumerations, as they appear in files, the store and output. */
#include <string.h>

#include "event.h"

static const char *const kind_names[SIM_EV__COUNT] = {
  [SIM_EV_NONE] = "none",
  [SIM_EV_ALLOC] = "alloc",
  [SIM_EV_FREE_REQUESTED] = "free_requested",
  [SIM_EV_FREE_COMPLETED] = "free_completed",
  [SIM_EV_FREE] = "free",
  [SIM_EV_MEMCPY] = "memcpy",
  [SIM_EV_MEMSET] = "memset",
  [SIM_EV_KERNEL] = "kernel",
  [SIM_EV_SYNC] = "sync",
  [SIM_EV_MARKER] = "marker",
  [SIM_EV_HOST_ALLOC] = "host_alloc",
  [SIM_EV_HOST_FREE] = "host_free",
  [SIM_EV_API] = "api",
  [SIM_EV_EMPTY_CACHE] = "empty_cache",
};

static const char *const mem_names[SIM_MEM__COUNT] = {
  [SIM_MEM_UNKNOWN] = "unknown", [SIM_MEM_DEVICE] = "device", [SIM_MEM_PINNED] = "pinned",
  [SIM_MEM_PAGEABLE] = "pageable", [SIM_MEM_MANAGED] = "managed",
};

static const char *const dir_names[SIM_COPY__COUNT] = {
  [SIM_COPY_NONE] = "none", [SIM_COPY_H2D] = "h2d", [SIM_COPY_D2H] = "d2h",
  [SIM_COPY_D2D] = "d2d", [SIM_COPY_H2H] = "h2h", [SIM_COPY_P2P] = "p2p",
};

static const char *const category_names[SIM_CAT__COUNT] = {
  [SIM_CAT_UNKNOWN] = "unknown", [SIM_CAT_PARAMETER] = "parameter",
  [SIM_CAT_OPTIMIZER_STATE] = "optimizer_state", [SIM_CAT_GRADIENT] = "gradient",
  [SIM_CAT_ACTIVATION] = "activation", [SIM_CAT_INPUT] = "input",
  [SIM_CAT_TEMPORARY] = "temporary", [SIM_CAT_WORKSPACE] = "workspace",
};

static const char *const catsrc_names[SIM_CATSRC__COUNT] = {
  [SIM_CATSRC_NONE] = "none", [SIM_CATSRC_SOURCE] = "source", [SIM_CATSRC_STACK] = "stack",
  [SIM_CATSRC_LIFETIME] = "lifetime", [SIM_CATSRC_USER] = "user",
};

static const char *const flag_names[SIM_EVF__COUNT] = {
  "step_begin", "step_end", "phase", "async", "sync_event", "device_api", "preexisting",
};

const char *sim_event_flag_name(int bit) { return bit >= 0 && bit < SIM_EVF__COUNT ? flag_names[bit] : "?"; }

unsigned sim_event_flag_from_name(const char *name) {
  for (int i = 0; i < SIM_EVF__COUNT; i++)
    if (!strcmp(flag_names[i], name)) return 1u << i;
  return 0;
}

void sim_event_init(sim_event *ev) {
  memset(ev, 0, sizeof *ev);
  ev->dev_ts = -1;
  ev->api_dur = -1;
  ev->step = -1;
}

static const char *name_of(const char *const *names, int n, int v) {
  return (v >= 0 && v < n && names[v]) ? names[v] : "?";
}

static int lookup(const char *const *names, int n, const char *name) {
  if (!name) return -1;
  for (int i = 0; i < n; i++)
    if (names[i] && strcmp(names[i], name) == 0) return i;
  return -1;
}

const char *sim_event_kind_name(int v) { return name_of(kind_names, SIM_EV__COUNT, v); }
const char *sim_mem_kind_name(int v) { return name_of(mem_names, SIM_MEM__COUNT, v); }
const char *sim_copy_dir_name(int v) { return name_of(dir_names, SIM_COPY__COUNT, v); }
const char *sim_category_name(int v) { return name_of(category_names, SIM_CAT__COUNT, v); }
const char *sim_cat_source_name(int v) { return name_of(catsrc_names, SIM_CATSRC__COUNT, v); }

int sim_event_kind_from_name(const char *s) {
  int k = lookup(kind_names, SIM_EV__COUNT, s);
  return k == SIM_EV_NONE ? -1 : k;
}
int sim_mem_kind_from_name(const char *s) { return lookup(mem_names, SIM_MEM__COUNT, s); }
int sim_copy_dir_from_name(const char *s) { return lookup(dir_names, SIM_COPY__COUNT, s); }
int sim_category_from_name(const char *s) { return lookup(category_names, SIM_CAT__COUNT, s); }
int sim_cat_source_from_name(const char *s) { return lookup(catsrc_names, SIM_CATSRC__COUNT, s); }

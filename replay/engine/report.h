/* report.h: a replay's result as JSON (the contract scripts parse) and as a stored run. */
#ifndef REPLAY_REPORT_H
#define REPLAY_REPORT_H

#include <stdio.h>
#include <yajl/yajl_gen.h>

#include "sim/timemodel.h"
#include "engine.h"
#include "names.h"

/* What a run was: stored beside its result. */
typedef struct run_meta {
  int64_t trace_id;
  const char *trace_name;
  const char *kind;      /* replay, whatif, validate, backend */
  const char *allocator; /* the SPEC as given */
  uint64_t capacity;     /* UINT64_MAX: none */
  const char *capacity_source; /* "option", "device", "memory_limit", or NULL (see session.h) */
  uint64_t card_bytes, context_bytes; /* capacity_source "device": the card's memory and what the
                                         CUDA context takes of it */
  const char *const *env;      /* environment settings the model read (NAME=value), nenv of them */
  size_t nenv;
  const char *note;            /* what the session changed in the request, or NULL */
  const char *address_order;   /* the simulated driver's addresses: "up", "down", or NULL (not simulated) */
  const char *address_source;  /* why: "option", "recorded", "default" (see session.h) */
  const char *device;    /* device profile name, or NULL */
  const char *backend;   /* sim, cuda */
  const char *scenario, *variant;
  double step_time_s, samples_per_s; /* < 0: unknown */
  /* The time model's prediction on `device`, or NULL (no profile, no prediction). */
  const sim_tm_result *time;
  const sim_tm_config *time_config;
  const char *device_source; /* builtin, user, calibrated */
  const char *device_reason; /* "option" (--device) or "recorded" (the trace's device name matched) */
  /* How a recorded window's start was taken ("rebuilt", "live_set"), or NULL: no window. */
  const char *window_start, *window_note;
  size_t window_segments, window_blocks;
} run_meta;

/* Writes the result's members into an open JSON object (the caller opens and closes it).
 * With timeline, the downsampled timeline is included. names labels call sites (may be NULL). */
void report_json(yajl_gen g, const replay_names *names, const run_meta *m, const replay_result *r, int timeline);

/* A critical-path item in words: "kernel volta_sgemm_128x64_nn", "copy h2d pageable", ... */
void report_time_item_label(const replay_names *names, const sim_tm_item *it, char *buf, size_t n);
/* The lines a time prediction adds when it scaled kernels to another device (the ratios, the
 * kernels by bound, the all-compute and all-memory range) and when its copy times were fitted
 * from the trace's own copies (each class's fit and residual). */
void report_time_scaling_text(FILE *f, const sim_tm_config *c, const sim_tm_result *r);

/* The capacity a run used, for a report's header: "22.35 GiB (24.00 GB), as given with --capacity",
 * "unlimited", ... in both units where they differ, and where the figure came from. */
const char *report_capacity(char *buf, size_t n, const run_meta *m);

/* A byte count for people: "512 B", "1.50 GiB" (binary units, two decimals). Returns buf. */
const char *report_bytes(char *buf, size_t n, int64_t v);

#endif

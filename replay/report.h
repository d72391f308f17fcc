/* report.h: a replay's result as JSON (the contract scripts parse) and as a stored run. */
#ifndef REPLAY_REPORT_H
#define REPLAY_REPORT_H

#include <yajl/yajl_gen.h>

#include "engine.h"
#include "store.h"

/* What a run was: stored beside its result. */
typedef struct run_meta {
  int64_t trace_id;
  const char *trace_name;
  const char *kind;      /* replay, whatif, validate, backend */
  const char *allocator; /* the SPEC as given */
  uint64_t capacity;     /* UINT64_MAX: none */
  const char *device;    /* device profile name, or NULL */
  const char *backend;   /* sim, cuda */
  const char *scenario, *variant;
  double step_time_s, samples_per_s; /* < 0: unknown */
} run_meta;

/* Writes the result's members into an open JSON object (the caller opens and closes it).
 * With timeline, the downsampled timeline is included. The store labels call sites. */
void report_json(yajl_gen g, store *s, const run_meta *m, const replay_result *r, int timeline);

/* Stores a run with its timeline, OOMs and composition; *run_id receives its id. */
int report_save_run(store *s, const run_meta *m, const replay_result *r, int64_t *run_id);

#endif

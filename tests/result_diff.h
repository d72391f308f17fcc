/* result_diff.h: where two replay results of the same events differ, for the tests and the fuzzers that compare the engine's ways of replaying. */
#ifndef TESTS_RESULT_DIFF_H
#define TESTS_RESULT_DIFF_H

#include <stdio.h>
#include <string.h>

#include "engine/engine.h"

/*
 * replay_result_diff(a, b, what, buf, n) writes the first field in which b differs from a into
 * buf ("peak_reserved: 1048576 != 2097152") and returns buf, or returns NULL when they agree.
 * `what` says which figures must agree:
 *   RESULT_ALL      every figure a replay computes (not its time, nor whether it was lean);
 *   RESULT_FIGURES  all but what a lean replay does not keep (replay_config.lean): the timeline
 *                   and the state at the peak (its largest free block, categories, call sites).
 */
enum { RESULT_ALL = 0, RESULT_FIGURES = 1 };

#define RESULT_DIFF_(field)                                                                     \
  do {                                                                                          \
    if ((long long)a->field != (long long)b->field) {                                           \
      snprintf(buf, n, "%s: %lld != %lld", #field, (long long)a->field, (long long)b->field);   \
      return buf;                                                                               \
    }                                                                                           \
  } while (0)

#define RESULT_DIFF_REAL_(field)                                                                \
  do {                                                                                          \
    if (a->field != b->field) {                                                                 \
      snprintf(buf, n, "%s: %.17g != %.17g", #field, a->field, b->field);                       \
      return buf;                                                                               \
    }                                                                                           \
  } while (0)

/* The per-device figures, the OOMs and the skipped events. */
static inline const char *result_diff_parts_(const replay_result *a, const replay_result *b, char *buf, size_t n) {
  RESULT_DIFF_(ndevices);
  for (int d = 0; d < a->ndevices; d++) {
    RESULT_DIFF_(devices[d].device);
    RESULT_DIFF_(devices[d].peak_allocated);
    RESULT_DIFF_(devices[d].peak_reserved);
    RESULT_DIFF_(devices[d].peak_requested);
    RESULT_DIFF_(devices[d].peak_active);
    RESULT_DIFF_(devices[d].device_mallocs);
    RESULT_DIFF_(devices[d].device_frees);
    RESULT_DIFF_(devices[d].ooms);
  }
  RESULT_DIFF_(noom_list);
  for (size_t i = 0; i < a->noom_list; i++) {
    RESULT_DIFF_(oom_list[i].seq);
    RESULT_DIFF_(oom_list[i].device);
    RESULT_DIFF_(oom_list[i].stream);
    RESULT_DIFF_(oom_list[i].size);
    RESULT_DIFF_(oom_list[i].allocated);
    RESULT_DIFF_(oom_list[i].reserved);
    RESULT_DIFF_(oom_list[i].largest_free);
    if (strcmp(a->oom_list[i].message, b->oom_list[i].message)) {
      snprintf(buf, n, "oom_list[%zu].message: \"%.160s\" != \"%.160s\"", i, a->oom_list[i].message,
               b->oom_list[i].message);
      return buf;
    }
  }
  RESULT_DIFF_(unknown_frees);
  RESULT_DIFF_(dropped_frees);
  RESULT_DIFF_(duplicate_allocs);
  return NULL;
}

/* The timeline and the state at the peak: what only a full replay keeps. */
static inline const char *result_diff_full_(const replay_result *a, const replay_result *b, char *buf, size_t n) {
  RESULT_DIFF_(at_peak_largest_free);
  for (int i = 0; i < SIM_CAT__COUNT; i++) {
    RESULT_DIFF_(category_bytes[i]);
    RESULT_DIFF_(category_count[i]);
  }
  for (int i = 0; i < SIM_CATSRC__COUNT; i++) RESULT_DIFF_(catsrc_bytes[i]);
  RESULT_DIFF_(nsites);
  for (size_t i = 0; i < a->nsites; i++) {
    RESULT_DIFF_(sites[i].stack);
    RESULT_DIFF_(sites[i].bytes);
    RESULT_DIFF_(sites[i].count);
  }
  RESULT_DIFF_(ntimeline);
  for (size_t i = 0; i < a->ntimeline; i++) {
    RESULT_DIFF_(timeline[i].seq);
    RESULT_DIFF_(timeline[i].ts);
    RESULT_DIFF_(timeline[i].allocated);
    RESULT_DIFF_(timeline[i].reserved);
    RESULT_DIFF_(timeline[i].requested);
  }
  return NULL;
}

static inline const char *replay_result_diff(const replay_result *a, const replay_result *b, int what, char *buf,
                                             size_t n) {
  RESULT_DIFF_(events);
  RESULT_DIFF_(allocs);
  RESULT_DIFF_(frees);
  RESULT_DIFF_(ooms);
  RESULT_DIFF_(stopped_at_oom);
  RESULT_DIFF_(stopped);
  RESULT_DIFF_(peak_allocated);
  RESULT_DIFF_(peak_reserved);
  RESULT_DIFF_(peak_requested);
  RESULT_DIFF_(peak_active);
  RESULT_DIFF_(peak_allocated_seq);
  RESULT_DIFF_(peak_reserved_seq);
  RESULT_DIFF_(peak_requested_seq);
  RESULT_DIFF_(peak_ts);
  RESULT_DIFF_(at_peak_reserved);
  RESULT_DIFF_REAL_(fragmentation);
  RESULT_DIFF_REAL_(fragmentation_gmlake);
  RESULT_DIFF_(device_mallocs);
  RESULT_DIFF_(device_frees);
  RESULT_DIFF_(device_maps);
  RESULT_DIFF_(device_unmaps);
  RESULT_DIFF_(host_pinned_peak);
  RESULT_DIFF_(host_pageable_peak);
  RESULT_DIFF_(final_allocated);
  RESULT_DIFF_(final_reserved);
  const char *d = result_diff_parts_(a, b, buf, n);
  if (!d && what == RESULT_ALL) d = result_diff_full_(a, b, buf, n);
  return d;
}

#undef RESULT_DIFF_
#undef RESULT_DIFF_REAL_

#endif

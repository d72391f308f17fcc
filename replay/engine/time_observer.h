/* time_observer.h: the time model as a replay observer: it runs in the same pass as the allocator model. */
#ifndef REPLAY_TIME_OBSERVER_H
#define REPLAY_TIME_OBSERVER_H

#include "sim/hashmap.h"
#include "sim/timemodel.h"
#include "engine.h"
#include "names.h"

/*
 * Passes every replayed event to the time model with what the allocator did for it (the
 * driver calls it made and their bytes), and tells the model which API events were the
 * recorded allocator's own driver calls (cudaMalloc, cudaFree, cuMemMap, ...: their recorded
 * time is replaced by the replayed allocator's, once the trace has shown that it records its
 * allocations; a trace without allocation events keeps the calls' time). Event names are
 * read through a names table.
 */
typedef struct time_observer {
  sim_tm *tm;
  /* on another device than the recorded one: the same model with every scaled kernel at the
   * faster and at the slower of its two bounds, for the range printed beside the prediction */
  sim_tm *bound[2];
  sim_map bounds; /* kernel name id -> SIM_TM_KB_* + 1 */
  replay_names names; /* for event names (without them, no call is an allocator call) */
  sim_map roles; /* name id -> role + 1 */
  int seen_alloc; /* an allocation event has been replayed */
} time_observer;

void time_observer_init(time_observer *to, const sim_tm_config *cfg, const replay_names *names);
/* The observer to put in replay_config.observers. */
replay_observer time_observer_hook(time_observer *to);
/* After the replay: the prediction (release with sim_tm_result_release). */
void time_observer_finish(time_observer *to, sim_tm_result *res);
void time_observer_release(time_observer *to);

/* What bounds a kernel named so (SIM_TM_KB_*; docs/timemodel.md, "Another device"). */
int time_observer_kernel_bound(const char *name);

/* 1 when an API name is a device allocator's driver call ("cudaMalloc", "cuMemMap_v2", ...). */
int time_observer_is_allocator_call(const char *name);

/*
 * Time model options in the SPEC style: "copies=recorded,device_waits=drop,kernel_scale=0.5".
 * Keys: copies (recorded | model | profile: the profile's bandwidths even where the trace's
 * own copies are fitted), kernels (scaled | recorded: on another device than the recorded one,
 * recorded kernel times scaled by what bounds them, or kept), device_waits (keep | drop), dependencies (infer | off),
 * kernel_scale (a factor), malloc_syncs (true | false), batch (samples per step, for a trace
 * that does not record it). Returns 0, or -1 with a message.
 */
int time_options_parse(sim_tm_config *cfg, const char *text, char *err, size_t errlen);

#endif

/* engine.h: the replay engine: streams events through an allocator model and measures what happens. */
#ifndef REPLAY_ENGINE_H
#define REPLAY_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/allocator.h"
#include "source.h"

#define REPLAY_MAX_DEVICES 64

/* What the allocator did for one event; observers (the time model) see it after each event. */
typedef struct replay_outcome {
  int oom;                 /* the allocation did not fit */
  int ignored;             /* the event was skipped (free of a dropped or unknown allocation) */
  uint64_t device_mallocs; /* driver calls made while handling this event */
  uint64_t device_frees;
  uint64_t device_maps, device_unmaps;
  uint64_t device_malloc_bytes, device_free_bytes; /* bytes those calls took and gave back */
  uint64_t device_map_bytes, device_unmap_bytes;
  int64_t reserved_delta;  /* change in reserved bytes on the event's device */
  sim_placement placement; /* for a placed allocation */
  /* The totals over devices after the event, and the requested bytes live by category (an array
   * of SIM_CAT__COUNT, valid during the call): what plots and exports draw over time. */
  int64_t allocated, reserved, requested;
  const int64_t *category_bytes;
} replay_outcome;

typedef struct replay_observer {
  void *ctx;
  void (*event)(void *ctx, const sim_event *ev, const replay_outcome *o);
  void (*finish)(void *ctx);
} replay_observer;

/* The state a device starts in instead of an empty allocator (a recorded window's start, as
 * `memplay validate` rebuilds it): segments, each followed by its live blocks, as the model's
 * restore takes them (sim_allocator_ops.restore), and for each block the address its
 * allocation has in the trace; the trace's preexisting allocation at that address then takes
 * the restored block instead of a new placement. Only on simulated devices. */
typedef struct replay_start {
  int device;
  sim_walk_item *items;
  uint64_t *trace_addr; /* per item: a block's address in the trace (0 for a segment) */
  size_t n;
  size_t nsegments, nblocks;
} replay_start;

void replay_start_release(replay_start *s);
/*
 * The state at a moment, for a caller that asked to stop there (replay_stop): valid only during
 * the capture call. The fields say what the engine knows; replay_state_walk visits each model's
 * segments and blocks, with what the trace said of the request a block holds.
 */
typedef struct replay_state {
  const sim_event *event;     /* the last event handled (NULL: none yet) */
  int oom;                    /* that event was an allocation that did not fit */
  uint64_t oom_size;          /* its requested bytes */
  int64_t oom_stream;
  char oom_message[320];      /* the model's own words for it */
  int64_t allocated, reserved, requested, active; /* totals over devices */
  uint64_t largest_free;      /* the largest free block of any device */
  const char *allocator;      /* the model's name */
  int walkable;               /* every model in use can walk its state */
  int ndevices;
  void *engine_;              /* private */
} replay_state;

/* What the trace said of the request a block holds (known 0: the engine knows of none). */
typedef struct replay_block_owner {
  int known;
  uint64_t trace_addr; /* the request's recorded address */
  uint64_t size;       /* its requested bytes */
  int64_t stack;       /* its call stack id (0: none) */
  int category;        /* sim_category */
  int freed;           /* the program freed it; the free has not completed */
} replay_block_owner;

typedef int (*replay_state_fn)(void *arg, int device, const sim_walk_item *item, const replay_block_owner *owner);
/* Walks every device's model in device order: 0, the first non-zero the callback returned, or -1
 * when a model in use cannot walk its state (state->walkable says so beforehand). */
int replay_state_walk(const replay_state *st, replay_state_fn fn, void *arg);

/* A moment to stop at: the engine calls capture there, then ends the replay (the result then
 * covers the events up to that moment, and says `stopped`). Each way of naming the moment is off
 * at -1 (at_oom at 0); the first that matches stops the replay. */
typedef struct replay_stop {
  int64_t seq;      /* after the event with this index */
  int64_t after_ns; /* before the first event more than this many ns after the trace's first event */
  int at_oom;       /* after the first allocation that does not fit */
  void (*capture)(void *arg, const replay_state *st);
  void *arg;
} replay_stop;

/* Makes the device primitive for device index `device` (default: a simulated device). */
typedef int (*replay_device_factory)(void *arg, int device, sim_device *dev, char *err, size_t errlen);

/* replay_config.top_sites: the result lists no call site (the engine still follows them, for the
 * moments of `replay --at`). */
#define REPLAY_NO_SITES SIZE_MAX

typedef struct replay_config {
  const sim_spec *spec;         /* the allocator model and its options */
  uint64_t capacity;            /* bytes per device the process may take; UINT64_MAX: unlimited */
  uint64_t total_memory;        /* the card's memory as models see it (0: capacity, or 80 GiB) */
  int cc_major, cc_minor;       /* the card's compute capability (0: the simulated device's default) */
  int address_order;            /* the simulated device's SIM_VA_DOWN (0) or SIM_VA_UP (sim/device_sim.h) */
  const sim_recorded *recorded; /* allocator settings recorded in the trace, as options (io/settings.h), or NULL */
  const char *(*getenv_fn)(const char *);
  int stop_at_oom;
  size_t timeline_points;       /* at most this many timeline points (0: 1000) */
  size_t top_sites;             /* call sites kept at the peak (0: 10; REPLAY_NO_SITES: none) */
  size_t max_ooms;              /* OOMs described in detail (0: 100) */
  int check_level;              /* 2: run the model's full invariant check after every event */
  /* 1 (lean): the result holds its peaks and totals, the OOMs and the device's calls, and nothing
   * kept event by event for the rest: no timeline, no state at the peak (categories, call sites,
   * largest free block), and observers see no category bytes. For a caller that reads none of
   * them (a comparison's cells that are not stored): about 30% of a replay of
   * kk_ctx128_fullstep. Ignored with stop or check_level 2. */
  int lean;
  replay_observer *observers;
  size_t nobservers;
  const replay_start *start;    /* the devices' starting states, or NULL: every device starts empty */
  size_t nstart;
  const replay_stop *stop;      /* NULL: replay to the end */
  replay_device_factory make_device;
  void (*release_device)(void *arg, int device, sim_device *dev);
  void *device_arg;
  const sim_device_watch *device_watch; /* told of every call a model makes to its device, or NULL */
} replay_config;

typedef struct replay_oom {
  int64_t seq;
  int device;
  int64_t stream;
  uint64_t size;
  int64_t allocated, reserved;
  uint64_t largest_free;
  char message[320];
} replay_oom;

typedef struct replay_point {
  int64_t seq, ts;
  int64_t allocated, reserved, requested; /* maxima over the points' span */
} replay_point;

typedef struct replay_site {
  int64_t stack; /* call stack id, 0 for allocations without one */
  int64_t bytes; /* requested bytes live at the peak */
  int64_t count;
} replay_site;

typedef struct replay_device_result {
  int device;
  int64_t peak_allocated, peak_reserved, peak_requested, peak_active;
  uint64_t device_mallocs, device_frees, ooms;
} replay_device_result;

typedef struct replay_result {
  uint64_t events;          /* events read */
  uint64_t allocs, frees;   /* device allocations placed, frees completed */
  uint64_t ooms;            /* allocations that did not fit */
  int stopped_at_oom;
  int stopped;              /* stopped at cfg->stop's moment (after capturing it) */
  int lean;                 /* a lean replay (replay_config.lean): no timeline and, at the peak, only
                               the event, its time and the two totals */
  /* Peaks of the totals over all devices (for one device: that device's). */
  int64_t peak_allocated, peak_reserved, peak_requested, peak_active;
  int64_t peak_allocated_seq, peak_reserved_seq, peak_requested_seq;
  int64_t peak_ts;
  /* The state when allocated memory peaked. */
  int64_t at_peak_reserved;
  uint64_t at_peak_largest_free;
  double fragmentation;     /* 1 - allocated/reserved at the peak */
  double fragmentation_gmlake; /* 1 - peak active / peak reserved */
  int64_t category_bytes[SIM_CAT__COUNT]; /* requested bytes live at the peak, by category */
  int64_t category_count[SIM_CAT__COUNT];
  int64_t catsrc_bytes[SIM_CATSRC__COUNT]; /* the same bytes, by how their category was decided */
  replay_site *sites;       /* largest call sites at the peak, largest first */
  size_t nsites;
  uint64_t device_mallocs, device_frees, device_maps, device_unmaps;
  replay_oom *oom_list;
  size_t noom_list;
  replay_point *timeline;
  size_t ntimeline;
  int64_t host_pinned_peak, host_pageable_peak;
  int64_t final_allocated, final_reserved;
  /* Things the trace did that the engine had to skip. */
  uint64_t unknown_frees;    /* frees of addresses never allocated (or already freed) */
  uint64_t dropped_frees;    /* frees of allocations dropped by an OOM */
  uint64_t duplicate_allocs; /* allocations of an address already live */
  replay_device_result devices[REPLAY_MAX_DEVICES];
  int ndevices;
  double elapsed_s;
} replay_result;

/* Replays src. Returns 0, or -1 with a message (a source error, an allocator that could not
 * be created, a failed invariant check). An OOM is a result, not an error.
 *
 * The state at the peak of allocated bytes (its largest free block, categories, call sites) is
 * taken when that state is about to change, not at every new peak. On a source that can rewind,
 * the largest free block waits past allocations too; when one that sets no new peak changes the
 * models (an OOM whose recovery released cached memory), it is taken by a second pass over the
 * source, without the observers: such a source may then be read twice, and where it stands after
 * replay_run is unspecified. */
int replay_run(const replay_config *cfg, replay_source *src, replay_result *res, char *err, size_t errlen);

/*
 * An engine kept between replays, for a caller that replays again and again (a script's loop, a
 * comparison's worker): replay_engine_run is replay_run on it. Each run starts from the same
 * empty state as a new engine, and gives the same result; what is kept is the memory of its
 * tables (the live allocations, sized by the largest live set seen so far, the call sites, the
 * host allocations, the blocks of start states), which a new engine would allocate and grow
 * again. The allocator models and devices are made from the run's configuration; a model that
 * can reset itself is kept for the next run whose configuration gives the same one, and reset
 * then instead of made again. One thread at a time; results are the
 * caller's (replay_result_release), independent of the engine, which may be freed first.
 */
typedef struct replay_engine replay_engine;
replay_engine *replay_engine_new(void);
int replay_engine_run(replay_engine *e, const replay_config *cfg, replay_source *src, replay_result *res, char *err,
                      size_t errlen);
void replay_engine_free(replay_engine *e); /* NULL is allowed */
void replay_result_release(replay_result *r);

#endif

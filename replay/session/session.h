/* session.h: the one place that turns a replay request into a finished run, its result and its stored row. */
#ifndef REPLAY_SESSION_H
#define REPLAY_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>

#include "engine/engine.h"
#include "engine/moment.h"
#include "engine/names.h"
#include "engine/report.h"
#include "engine/time_observer.h"
#include "store/devices_store.h"
#include "store/store.h"

/*
 * Every front end that replays a trace (the command line's `replay`, the Lua library's
 * trace:replay{...}, the real-GPU backend's plan and run, `validate` when it stores its result)
 * asks a session, so that the defaults are decided in one place: which allocator (the one that
 * recorded the trace, when memplay models it), which of the trace's recorded settings it reads,
 * which device profile (named, or the one matching the trace's recorded device), the capacity
 * and card memory the model sees, the time model's options, and what a run stores.
 *
 * Prepared once per session (session_new), reused by every run: the store and its names, the
 * allocator SPECs parsed so far, the recorded settings flattened into options so far, the device
 * profiles looked up so far (by name, and by the
 * recorded device a trace names). Done per run: resolving the request (session_prepare), the
 * engine's pass with its observers (session_execute, as often as the caller needs: the GPU
 * plan runs several passes at different scales), storing it (session_save).
 *
 * A session is used by one thread at a time.
 */
typedef struct session session;

/* Makes a session over store s. s may be NULL (a script without a store): device profiles are
 * then the built-ins, and nothing is stored or named. The session does not own s. */
session *session_new(store *s);
void session_free(session *ses);
store *session_store(const session *ses);
/* Values built once per trace and shared by several threads (once.c): what a comparison's workers
 * share when they replay the same traces. */
typedef struct session_once session_once;
/* release frees a value (at session_once_free). */
session_once *session_once_new(void (*release)(void *value));
void session_once_free(session_once *o);
/* The value of trace t: built by build(s, t) in this thread when no thread asked for it before,
 * else the one another thread built, waited for while it builds. build returns a value in every
 * case (one that says why, when it cannot hold what was asked); it is never written again, and
 * lives until session_once_free. */
void *session_once_get(session_once *o, store *s, const store_trace *t, void *(*build)(store *s, const store_trace *t));

/* The start states of recorded windows (a snapshot that begins mid-run: window_start.c), one per
 * trace, for sessions to share (session_share_windows); freed with session_once_free. */
session_once *session_windows_new(void);
/* ses takes windows' start states from w instead of rebuilding its own; w outlives ses. */
void session_share_windows(session *ses, session_once *w);
/* Rebuilds a recorded window's start state and keeps it in the store now (as the first replay
 * that needs it would), for a front end that has just imported t: 1 when it kept one; 0 when
 * there was nothing to keep (t is no window, its start is kept already, or it cannot be rebuilt:
 * a replay then says why); -1 when the store did not keep it (err says why). */
int session_keep_window_start(store *s, const store_trace *t, char *err, size_t errlen);
/* The names of the session's store (event names, call-stack labels), read once each. */
const replay_names *session_names(const session *ses);
/* The cache behind them (session/labels.h), for a front end that reads frames or shares it. */
struct session_labels *session_labels_of(session *ses);

/* What the front end was asked for: session_request_init, then the fields the user gave. */
typedef struct session_request {
  const store_trace *trace;       /* the trace's metadata (its recorded allocator, settings, device, batch) */
  const char *allocator;          /* a SPEC; NULL: the allocator that recorded the trace when memplay models
                                     it, else fallback_allocator */
  const char *fallback_allocator; /* NULL: "ideal" */
  const char *device;             /* a device profile's name; NULL: the profile matching the trace's recorded
                                     device, if any (it predicts time; it sets no capacity) */
  int no_device;                  /* no device profile at all, not even the recorded one */
  uint64_t capacity;              /* bytes the process may take per device; UINT64_MAX (not given): the
                                     named device's memory, else unlimited */
  uint64_t total_memory;          /* the card's memory as models see it; 0: the named device's, else the
                                     trace's recorded, else the capacity */
  int shared_device;              /* each device index is a process sharing one GPU of `capacity` bytes */
  int address_order;              /* which way the simulated driver hands out addresses: SESSION_ADDRESSES_AUTO
                                     (0: the way the trace's recorded segments went, else down), _UP, _DOWN */
  const char *timing;             /* time model options (time_options_parse); used with a device profile */
  int64_t batch;                  /* samples per step for throughput; < 0: the timing options' batch=, else
                                     the trace's; >= 0: this value, whatever the timing options say */
  int use_environment;            /* models read this process's environment (PYTORCH_CUDA_ALLOC_CONF, ...);
                                     else they see none: a replay then does not depend on where it runs */
  int stop_at_oom, check;         /* stop at the first OOM; check the model's invariants after every event */
  int live_start;                 /* a recorded window starts from its live blocks, not the rebuilt state */
  size_t timeline_points, top_sites, max_ooms; /* 0: the engine's defaults (top_sites: SESSION_NO_SITES) */
  int lean; /* the result's peaks, totals, OOMs and device calls only (replay_config.lean): no timeline
               and no state at the peak, for a caller that reads neither */
} session_request;

/* session_request.address_order (sim/device_sim.h, SIM_VA_UP and SIM_VA_DOWN). */
enum { SESSION_ADDRESSES_AUTO, SESSION_ADDRESSES_UP, SESSION_ADDRESSES_DOWN };
/* The order a front end's option names: "auto", "up" or "down"; -1 for anything else. */
int session_address_order_of(const char *name);
/* Which way a stored trace's addresses went where it was recorded: SIM_VA_UP or SIM_VA_DOWN as its
 * recorded segments voted (sim_va_votes), else as its attrs' "address_order" says (t:save() keeps
 * there the order of a derived trace's source); -1 when neither tells, -2 on a store error (err
 * says why). *why: "recorded", "derived", or NULL. */
int session_trace_address_order(store *s, const store_trace *t, const char **why, char *err, size_t errlen);

/* top_sites: keep no call site at the peak (the result's top sites are an empty list). */
#define SESSION_NO_SITES REPLAY_NO_SITES

/* No trace, no allocator, no device: defaults everywhere (capacity and batch not given). */
void session_request_init(session_request *req);

enum {
  SESSION_OK = 0,
  SESSION_EUSAGE = 1, /* the request is wrong (a bad SPEC or timing option): the user must change it */
  SESSION_EFAIL = 2,  /* it cannot be done (no such device profile, an unreadable trace, a store error) */
};

#define SESSION_MAX_ENV 8

/* A request resolved: what will run. Fill it with session_prepare; do not move it afterwards.
 * trace and recorded point into the request's trace: a caller that outlives it clears them after
 * session_execute (session_meta then names no trace). */
typedef struct session_run {
  const store_trace *trace;
  char *allocator;        /* the SPEC that runs, as text */
  const sim_spec *spec;   /* its model and options (owned by the session) */
  const char *recorded;   /* the trace's recorded settings (JSON), when they are this model's; else NULL */
  const sim_recorded *recorded_options; /* the same as the options models read (owned by the session) */
  const char *(*getenv_fn)(const char *);
  uint64_t capacity, total_memory;
  int shared_device;
  int address_order;           /* SIM_VA_UP or SIM_VA_DOWN */
  const char *address_source;  /* why: "option", "recorded" (the trace's segments went that way),
                                  "derived" (its source trace's did), "default" */
  int stop_at_oom, check;
  int live_start;
  size_t timeline_points, top_sites, max_ooms;
  int lean;
  const char *capacity_source; /* where capacity came from: "option" (the user's SIZE), "device" (the
                                  profile's memory less its context_bytes), "memory_limit" (the
                                  allocator's own limit, with no device), NULL: unlimited */
  const char *note;            /* what the session changed in the request and why, or NULL */
  /* The environment variables read for the run (by the model, or for the SPEC) and found set
   * (name=value), in the order read, each once over all of the run's passes. */
  char *env[SESSION_MAX_ENV];
  size_t nenv;
  int has_device;           /* a device profile was chosen: the time model runs */
  devices_entry device;
  const char *device_reason; /* "option" (named) or "recorded" (the trace's device matched) */
  sim_tm_config tcfg;        /* the time model's options, when has_device */
  int has_recorded_device;   /* the trace's recorded device matches a profile */
  devices_entry recorded_device;
  /* on the recorded device: copy times fitted from the trace's own copies (NULL: none) */
  struct sim_copy_fit *copy_fit;
  int copy_fit_done;
  /* After session_execute: how a recorded window's start was taken. NULL: the trace is no window
   * (it starts from an empty allocator); "rebuilt": from the state `memplay validate` rebuilds
   * (the recorded allocator and settings, the stored events, a simulated device); "live_set":
   * from an empty allocator, the live blocks allocated first in address order. window_note says
   * it in words, with the reason for "live_set". */
  const char *window_start;
  char window_note[480];
  size_t window_segments, window_blocks;
  int executed;
  replay_result result;
  int has_time;
  sim_tm_result time;
} session_run;

/* What one pass adds to a prepared run; every field may be left 0. */
typedef struct session_pass {
  replay_source *source;                /* the events; NULL: the stored trace (run->trace->id) */
  const sim_allocator_ops *ops;         /* another implementation of the run's model, given the same options
                                           (a real GPU's own pool for a model with SIM_ALLOC_DRIVER_POOL) */
  replay_observer *observers;           /* seen after the time model's */
  size_t nobservers;
  replay_device_factory make_device;    /* devices other than simulated ones */
  void (*release_device)(void *arg, int device, sim_device *dev);
  void *device_arg;
  const replay_names *names;            /* names of a trace kept elsewhere; NULL: the session's store's */
  int stored_events;                    /* source gives the stored trace's own events, unchanged */
  /* The stored trace's events, when the caller holds them in memory: what the session reads of the
   * trace besides the replay (the fit of its recorded copies) is read from here, not the store. */
  const sim_event *stored;
  size_t nstored;
  const replay_stop *stop;              /* a moment to stop at (NULL: the whole trace) */
  const sim_device_watch *watch;        /* told of every call the model makes to its device (NULL: none) */
} session_pass;

/* A device profile by name, as session_prepare finds it: 0 found (*out), 1 absent, -1 error. */
int session_find_device(session *ses, const char *name, devices_entry *out, char *err, size_t errlen);

/* Checks a SPEC and time options the way session_prepare will (for a front end that reports usage
 * errors before it opens the store). SESSION_OK, or SESSION_EUSAGE with a message. */
int session_check_allocator(const char *spec, char *err, size_t errlen);
int session_check_timing(const char *timing, char *err, size_t errlen);

/* Resolves a request into *run. SESSION_OK, or an error code with a message. */
int session_prepare(session *ses, const session_request *req, session_run *run, char *err, size_t errlen);
/* Runs the engine's pass (pass may be NULL); a run executed before is reset first. SESSION_OK,
 * or SESSION_EFAIL with a message (a source error, an allocator that could not be created). An
 * OOM is a result, not an error. */
int session_execute(session *ses, session_run *run, const session_pass *pass, char *err, size_t errlen);
void session_run_release(session_run *run);

/* A moment of a replay, as a user names it (`--at`): the peak of allocated memory, the first OOM,
 * an event index, or a time since the trace's first event (a number with a unit: 1.5s, 250ms). */
typedef struct session_at {
  enum { SESSION_AT_PEAK, SESSION_AT_OOM, SESSION_AT_EVENT, SESSION_AT_TIME } kind;
  int64_t value; /* the event index, or the time in ns */
} session_at;
/* Parses an --at value: 0, or -1 with a message. */
int session_at_parse(const char *text, session_at *at, char *err, size_t errlen);
/*
 * Replays the run up to that moment and takes the allocator's state there into *m (released
 * with replay_moment_release). The peak needs a first pass to the end (whose result the run
 * keeps, as session_execute's) and a second that stops there; the others one pass that stops.
 * The pass's observers see the first pass only. The run's result is the first pass's. SESSION_OK, SESSION_EFAIL with a
 * message (as session_execute), or SESSION_EUSAGE when the moment never comes (no OOM, an index
 * or time past the trace's end).
 */
int session_execute_at(session *ses, session_run *run, const session_pass *pass, const session_at *at,
                       replay_moment *m, char *err, size_t errlen);
/* Moves the last pass's result into *out, which the caller then releases (replay_result_release);
 * the run keeps none. A front end that keeps each pass's result (the GPU plan) takes them. */
void session_take_result(session_run *run, replay_result *out);

/* What the run was, for its JSON and its stored row (kind "replay", backend "sim"); the caller
 * may change the fields that differ (kind, backend, scenario, variant, ...). */
run_meta session_meta(const session_run *run);
/* The result's members (the `replay --json` contract) into an open JSON object. */
void session_json(const session *ses, yajl_gen g, const run_meta *m, const replay_result *r, int timeline);

/* How session_save treats result_json. */
enum { SESSION_RESULT_REPORT = 0, SESSION_RESULT_PATCH = 1, SESSION_RESULT_REPLACE = 2 };
/*
 * Stores a run in one transaction: the row, timeline, OOMs and composition of r, with the result
 * JSON of session_json, to which result_json (a JSON object) is merged (PATCH) or which it
 * replaces (REPLACE). *run_id (may be NULL) receives its id. SESSION_OK, or SESSION_EFAIL with the
 * store's message; nothing is stored then.
 */
int session_save(session *ses, const run_meta *m, const replay_result *r, const char *result_json, int how,
                 int64_t *run_id, char *err, size_t errlen);
/* The same inside the caller's transaction (a script's runs are stored with its other writes):
 * on failure the caller rolls back. */
int session_save_in(session *ses, const run_meta *m, const replay_result *r, const char *result_json, int how,
                    int64_t *run_id, char *err, size_t errlen);

#endif

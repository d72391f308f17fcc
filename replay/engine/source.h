/* source.h: a stream of events in recorded order: from the store, from memory, from a generator, or transformed. */
#ifndef REPLAY_SOURCE_H
#define REPLAY_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/event.h"
#include "sim/hashmap.h"

typedef struct replay_plan replay_plan;
typedef struct replay_alloc_arg replay_alloc_arg;

/*
 * next() fills *ev and returns 1, returns 0 at the end, or -1 on error with a message that
 * error() returns. close() frees the source (and what it wraps, when it owns it).
 *
 * A source whose events already sit in memory may also lend them without a copy: view() points
 * *evs at the events not yet read and returns how many there are (0 at the end, -1 on error);
 * they stay valid, and unread, until advance(ctx, k) marks the first k of them read. next() must
 * work all the same (wrapping sources call it); view and advance are NULL when the source cannot
 * lend its events (and are left out by initializers that predate them).
 */
typedef struct replay_source {
  int (*next)(void *ctx, sim_event *ev);
  const char *(*error)(void *ctx);
  void (*close)(void *ctx);
  void *ctx;
  ptrdiff_t (*view)(void *ctx, const sim_event **evs);
  void (*advance)(void *ctx, size_t k);
  /* Back to the first event: 0, or -1 with a message that error() returns. NULL when the source
   * cannot; the engine then needs none (it reads a source that can once more in rare cases, to
   * take a figure it could not keep on the way: replay_engine_run). */
  int (*rewind)(void *ctx);
  /* How many events the source holds, when it knows (0: unknown): a hint the engine sizes its
   * tables by (the live set of a short trace is small), never a promise (it reads to the end all
   * the same). */
  size_t length_hint;
  /* The plan's numbers (replay_plan, below) of the events the last view() lent, one per event, or
   * NULL when it has none for them. NULL: the source has no plan. plan_records: how many records
   * the plan numbers, when the source knows (0: unknown), a hint as length_hint is. */
  const uint32_t *(*view_slots)(void *ctx);
  size_t plan_records;
  /* The plan's steps (replay_plan.step) of the events the last view() lent, or NULL (NULL: the
   * source has none; the engine then tells each event's step from the event). */
  const uint8_t *(*view_steps)(void *ctx);
  /* The plan's allocation arguments (replay_plan.arg) of the events the last view lent, and the
   * stream and device of those it holds (*stream, *device), or NULL. Only a source whose events
   * are the plan's own, unchanged, lends them (a transform that scales sizes does not), and only
   * with its steps and numbers, which it then lends with every view. */
  const replay_alloc_arg *(*view_args)(void *ctx, int64_t *stream, int *device);
} replay_source;

static inline int replay_source_next(replay_source *s, sim_event *ev) { return s->next(s->ctx, ev); }
static inline void replay_source_close(replay_source *s) {
  if (s->close) s->close(s->ctx);
  s->ctx = NULL;
}

/* Events held in memory (benchmarks, tests): the array is borrowed, not copied. */
typedef struct replay_array_source {
  const sim_event *events;
  size_t n, pos;
  const replay_plan *plan;
} replay_array_source;
replay_source replay_array_source_init(replay_array_source *a, const sim_event *events, size_t n);

/*
 * A plan of a trace: which record of the engine's live allocations each event names. Which
 * address is live at each event does not depend on the allocator (an allocation that did not fit
 * still holds its address until its free completes), so a trace can number its allocations once
 * (a cached trace when it is replayed again, the store when it writes a trace): the engine then
 * keeps them in a dense table, each record taken back by the next allocation (the most recently
 * freed first, whose record is still in the processor's cache), instead of looking each address up
 * in a hash table.
 *
 * An event's number: for an allocation, its record (a new one, or the record its address already
 * holds: a duplicate, or a reuse of an address an OOM dropped); for a free, the record of the
 * address it frees, or REPLAY_PLAN_NONE when no allocation holds it; for any other event,
 * REPLAY_PLAN_NONE. The numbers hold for any run of consecutive events of the trace, not only from
 * its first (at any event, the addresses such a run holds are among those the plan holds). The
 * engine follows a plan in replays without a moment to stop at or a check after every event; the
 * result is the same either way.
 *
 * replay_planner numbers events one at a time, in order; replay_plan numbers an array of them.
 */
#define REPLAY_PLAN_NONE UINT32_MAX
struct live_table;
typedef struct replay_planner {
  struct live_table *held; /* address -> its record (the engine's table of live records, live.h) */
  uint32_t *spare;      /* records given back, the last on top */
  size_t nspare, cap_spare;
  uint32_t next;        /* records numbered so far */
  int full;             /* more records than a number holds: the numbers are not to be used */
} replay_planner;
void replay_planner_init(replay_planner *p);
uint32_t replay_planner_step(replay_planner *p, const sim_event *ev); /* ev's number */
void replay_planner_release(replay_planner *p);                        /* a zeroed planner is allowed */

/*
 * What each event is to the loop of a planned replay (replay_plan.step), one byte an event, so that
 * the loop knows without reading the event: a lean loop reads no free's event (docs/performance.md,
 * round twenty-nine). A pair holds for any run of events that holds both of its events.
 */
enum {
  REPLAY_STEP_OTHER,   /* an event for the engine's general handler: a host allocation or free, a
                          synchronization, empty_cache */
  REPLAY_STEP_NONE,    /* an event that changes no memory: a kernel, a copy, a marker */
  REPLAY_STEP_ALLOC,   /* an allocation */
  REPLAY_STEP_FREE,    /* a free, or a free's completion */
  REPLAY_STEP_REQUEST, /* a free request whose completion does not come next */
  REPLAY_STEP_PAIR     /* a free request whose completion (the same address and record) comes next */
};

/*
 * What a lean planned loop reads of an allocation (replay_plan.arg), 16 bytes in place of its
 * 96-byte event, so that such a replay of a trace larger than the processor's caches does not
 * stream every event through them (docs/performance.md, round thirty). An allocation on the plan's
 * stream and device (those of its first allocation that does not begin a window) has its size and
 * address here; any other (another stream or device, or one of the allocations a window begins
 * with, SIM_EVF_PREEXISTING) has REPLAY_ARG_EVENT as its size: the loop reads its event (as it
 * does, to the same end, for an allocation of that many bytes). Other events' entries are zero.
 */
struct replay_alloc_arg {
  uint64_t size, addr;
};
#define REPLAY_ARG_EVENT UINT64_MAX

struct replay_plan {
  const sim_event *events; /* the array planned (borrowed) */
  size_t n;
  uint32_t *slot;
  uint8_t *step;   /* each event's REPLAY_STEP_* (made with the numbers) */
  uint32_t nslots; /* records the dense table needs: the most addresses held at once */
  replay_alloc_arg *arg; /* each event's (made with the numbers) */
  int64_t arg_stream;    /* the stream and device of the allocations arg holds */
  int arg_device;
};
/* Plans events[0..n-1]: 0, or -1 (too many records to number: the array is replayed unplanned). */
int replay_plan_build(replay_plan *p, const sim_event *events, size_t n);
void replay_plan_release(replay_plan *p); /* a zeroed plan is allowed */
/*
 * A plan kept with events replayed again and again (a cached trace, a comparison's): made at their
 * second replay unless one is there already (taken from the store as they were read, or lent by
 * whoever lent the events). get gives the plan kept when it is one of events[0..n), else NULL;
 * note counts a replay of them about to run, makes the plan at the second, and gives what get
 * gives. Start from {0}.
 */
typedef struct replay_plan_kept {
  replay_plan plan;        /* made or taken here (slot NULL: none) */
  unsigned replays;
  const replay_plan *lent; /* or one borrowed (not freed here) */
} replay_plan_kept;
const replay_plan *replay_plan_kept_get(const replay_plan_kept *k, const sim_event *events, size_t n);
const replay_plan *replay_plan_kept_note(replay_plan_kept *k, const sim_event *events, size_t n);
void replay_plan_kept_release(replay_plan_kept *k);

/* A plan taken from a source's views as its events are copied out (a cache of a stored trace, whose
 * reader lends the store's plan): add each view's numbers (NULL: that view had none, and the plan
 * is given up); end makes them the plan of the events copied (n: as many as were added), 0, or -1
 * when some view had none (nothing kept). Start from {0}; release frees what end did not take. */
typedef struct replay_plan_gather {
  uint32_t *slot;
  size_t n, cap;
  uint32_t records;
  int lost;
} replay_plan_gather;
void replay_plan_gather_add(replay_plan_gather *g, const uint32_t *slots, size_t k);
int replay_plan_gather_end(replay_plan_gather *g, const sim_event *events, size_t n, replay_plan *out);
void replay_plan_gather_release(replay_plan_gather *g);

/* An array source with its plan (NULL: none; a plan of other events is not used). */
replay_source replay_array_source_planned(replay_array_source *a, const sim_event *events, size_t n,
                                          const replay_plan *plan);

#endif

/* source.h: a stream of events in recorded order: from the store, from memory, from a generator, or transformed. */
#ifndef REPLAY_SOURCE_H
#define REPLAY_SOURCE_H

#include <stddef.h>

#include "sim/event.h"

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
} replay_array_source;
replay_source replay_array_source_init(replay_array_source *a, const sim_event *events, size_t n);

#endif

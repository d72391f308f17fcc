/* source.h: a stream of events in recorded order: from the store, from memory, from a generator, or transformed. */
#ifndef REPLAY_SOURCE_H
#define REPLAY_SOURCE_H

#include <stddef.h>

#include "../sim/event.h"

/*
 * next() fills *ev and returns 1, returns 0 at the end, or -1 on error with a message that
 * error() returns. close() frees the source (and what it wraps, when it owns it).
 */
typedef struct replay_source {
  int (*next)(void *ctx, sim_event *ev);
  const char *(*error)(void *ctx);
  void (*close)(void *ctx);
  void *ctx;
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

/* names.h: how reports and observers read the strings a trace refers to by id, wherever they are kept. */
#ifndef REPLAY_ENGINE_NAMES_H
#define REPLAY_ENGINE_NAMES_H

#include <stdint.h>

/*
 * Events carry names and call stacks as ids (sim/event.h); the strings live with the trace (in
 * the store, for a stored trace). The engine's reports and observers read them through this
 * table, so that they do not depend on where traces are kept. Either function may be NULL, and
 * a NULL table knows no names.
 */
typedef struct replay_names {
  void *ctx;
  /* The string with this id (an event's or kernel's name), or NULL. Valid while ctx lives. */
  const char *(*string)(void *ctx, int64_t id);
  /* A call stack in words, innermost frame first, allocated with malloc; NULL when unknown. */
  char *(*stack_label)(void *ctx, int64_t stack);
} replay_names;

static inline const char *replay_name(const replay_names *n, int64_t id) {
  return n && n->string && id ? n->string(n->ctx, id) : NULL;
}

static inline char *replay_stack_label(const replay_names *n, int64_t stack) {
  return n && n->stack_label ? n->stack_label(n->ctx, stack) : NULL;
}

/*
 * A names table in front of another that asks it once per id and keeps the answer: the names a
 * replay's result reads again and again (its critical path's, its top call sites' labels, a
 * script's thousands of replays of one trace) then cost one look-up each for as long as the cache
 * lives, and none before a report asks. The answers must not change meanwhile: one cache per
 * trace of a store, cleared (replay_names_cache_clear) when what it caches may have changed. The
 * inner table is copied; its ctx must outlive the cache. One thread at a time.
 */
typedef struct replay_names_cache replay_names_cache;
replay_names_cache *replay_names_cache_new(const replay_names *inner);
/* The table that answers from the cache (valid while it lives): strings stay valid until the
 * cache is cleared or freed; stack labels are the caller's copies, as the inner table's. */
replay_names replay_names_cache_table(replay_names_cache *c);
/* Forgets every answer (the inner table is asked again). */
void replay_names_cache_clear(replay_names_cache *c);
void replay_names_cache_free(replay_names_cache *c); /* NULL is allowed */

#endif

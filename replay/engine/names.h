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

#endif

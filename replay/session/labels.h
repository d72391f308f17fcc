/* labels.h: a store's names and call-stack labels read once per connection and kept, for replays that run many times. */
#ifndef REPLAY_SESSION_LABELS_H
#define REPLAY_SESSION_LABELS_H

#include "engine/names.h"
#include "store/store.h"

/*
 * A report labels its top call sites and the time model names its critical-path items by id
 * (engine/names.h); read from the store, a label walks its stack one row per frame, and a
 * script's call-site filter walks the frames of every site. A cache reads each id once and
 * answers from memory after that, so replaying a trace again touches no SQLite for its names.
 *
 * Why a cached label stays true: strings, frames and call stacks are content-addressed rows that
 * nothing deletes (`rm` deletes a trace's events, runs keep theirs; docs/trace-store.md), so an
 * id this connection has read keeps its meaning for as long as the connection is open. Another
 * connection can only add rows, with new ids, which are read when first asked for. The one way
 * an id could change meaning is a rollback of this connection's own transaction that had added
 * it (the id may be given out again): a caller that rolls back and goes on using the store calls
 * session_labels_clear. An id the store does not know is not kept (it may be written later).
 *
 * One cache per store connection (the session keeps one for its store; the Lua library one per
 * store a script opened), used by one thread at a time.
 */
typedef struct session_labels session_labels;

/* A cache over s (NULL: a cache that knows no names). It does not own s. */
session_labels *session_labels_new(store *s);
void session_labels_free(session_labels *sl);
/* Forgets every name read (after a rollback of a transaction that wrote names). */
void session_labels_clear(session_labels *sl);
/* The names as reports and observers read them (engine/names.h): strings and stack labels from
 * the cache, read from the store on a miss. Valid while sl lives. */
replay_names session_labels_names(session_labels *sl);
/* Calls fn for each frame of call stack id, innermost first, until it returns non-zero, as
 * store_stack_frames does, from the cache (the frames are read once; a stack the store does not
 * know has none, and is not kept). 0, or -1 when the store failed (store_error says why). */
int session_labels_frames(session_labels *sl, int64_t stack, int (*fn)(void *arg, const store_frame *f), void *arg);

#endif

/* store_starts.h: a recorded window's start state kept beside its trace (window_starts, docs/trace-store.md). */
#ifndef STORE_STARTS_H
#define STORE_STARTS_H

#include "engine/engine.h"
#include "store.h"

/*
 * key names the code that rebuilt the state (validate_start_key): a row kept under another key is
 * not taken. The row is derived data, so a failure to keep one loses nothing (the next replay
 * rebuilds it), and a read-only store keeps none.
 */

/* The state kept for trace_id under key: 1 with *out filled (release it with
 * replay_start_release) and *agrees (may be NULL) whether validate agreed with the recording; 0
 * when there is none, or none that decodes; -1 when the store cannot be read (store_error). */
int store_window_start_get(store *s, int64_t trace_id, const char *key, replay_start *out, int *agrees);
/* Keeps st for trace_id under key, in place of any row it had: 0, or -1 (store_error). */
int store_window_start_put(store *s, int64_t trace_id, const char *key, const replay_start *st, int agrees);
/* check-store: 1 when trace_id's kept row does not decode (why says how), 0 when it does or there
 * is none, -1 when the store cannot be read (store_error). */
int store_window_start_fault(store *s, int64_t trace_id, char *why, size_t whylen);

#endif

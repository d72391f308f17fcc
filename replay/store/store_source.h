/* store_source.h: a stored trace as an event source for the replay engine. */
#ifndef REPLAY_STORE_SOURCE_H
#define REPLAY_STORE_SOURCE_H

#include "engine/source.h"
#include "store.h"

/* Streams the events of trace_id in recorded order (never the whole trace in memory). */
int store_source_open(replay_source *src, store *s, int64_t trace_id);

#endif

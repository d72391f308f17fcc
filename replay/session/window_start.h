/* window_start.h: where a replay of a recorded window starts (the session's private part). */
#ifndef REPLAY_SESSION_WINDOW_START_H
#define REPLAY_SESSION_WINDOW_START_H

#include "engine/engine.h"
#include "session.h"

/* The start state of the trace last asked about, kept for the session's next passes. */
typedef struct window_cache {
  int64_t trace_id; /* 0: none */
  int ok;           /* rebuilt; else err says why not */
  int agrees;       /* validate agreed with the recording from it */
  int state_only;   /* the trace records one moment's state, taken as it is */
  replay_start start;
  char err[256];
} window_cache;

void window_cache_release(window_cache *wc);

/* Decides how the run's pass starts and says so in run (window_start, window_note, counts):
 * cfg->start is set when it starts from the rebuilt state, taken from shared when it is not NULL,
 * else kept in own. */
void window_start_decide(store *s, window_cache *own, session_once *shared, session_run *run,
                         const session_pass *pass, replay_config *cfg);

#endif

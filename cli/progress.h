/* progress.h: one line of progress on stderr, redrawn in place, when stderr is a terminal. */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stdint.h>

/*
 * Long work (import, the replay of a big trace, compare, whatif) reports how far it is: what is
 * done of how much, the rate, and the time left, on one line of stderr redrawn at most ten
 * times a second. It shows nothing when stderr is not a terminal, with --quiet, or with
 * MEMPLAY_PROGRESS=0 in the environment (MEMPLAY_PROGRESS=1 forces it on, for a terminal that
 * isatty does not see).
 */
typedef struct cli_progress {
  int on;
  const char *what; /* "compare", "replay", ... */
  const char *unit; /* what done counts: "cells", "events" */
  double start, last;
  int drawn; /* a line is on screen */
} cli_progress;

/* Starts a progress line for `what` counting `unit`s; quiet: show nothing. */
void cli_progress_init(cli_progress *p, const char *what, const char *unit, int quiet);
/* done of total units (total 0: unknown); events, when not 0, gives an events-per-second rate. */
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total, uint64_t events);
/* Erases the line (before the command prints its answer). */
void cli_progress_done(cli_progress *p);

#endif

/* progress.c: the progress line on a terminal's stderr: done of total, rate, time left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

/* The line is memplay's own words (no names from a trace), and its carriage return and erase
 * sequence are meant for the terminal: it goes to the descriptor itself, past the filter that
 * shows control characters in everything else memplay prints escaped (textguard.c). */
static void progress_write(const char *s) {
  fflush(stderr);
  size_t n = strlen(s);
  while (n) {
    ssize_t w = write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_init(cli_progress *p, const char *what, const char *unit, int quiet) {
  memset(p, 0, sizeof *p);
  const char *env = getenv("MEMPLAY_PROGRESS");
  p->on = !quiet && (env && *env ? strcmp(env, "0") != 0 : isatty(STDERR_FILENO));
  p->what = what;
  p->unit = unit;
  p->start = now_s();
}

/* "1.2 s", "3 min 5 s", "1 h 02 min". */
static const char *eta(char *b, size_t n, double s) {
  if (s < 60) snprintf(b, n, "%.1f s", s);
  else if (s < 3600) snprintf(b, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
  else snprintf(b, n, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
  return b;
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total, uint64_t events) {
  if (!p->on) return;
  double t = now_s();
  if (p->drawn && t - p->last < 0.1 && done != total) return;
  p->last = t;
  double el = t - p->start;
  char line[256], b[32];
  int n;
  if (total) n = snprintf(line, sizeof line, "%s: %llu/%llu %s (%.0f%%)", p->what, (unsigned long long)done,
                          (unsigned long long)total, p->unit, 100.0 * (double)done / (double)total);
  else n = snprintf(line, sizeof line, "%s: %llu %s", p->what, (unsigned long long)done, p->unit);
  if (el > 0 && events) n += snprintf(line + n, sizeof line - (size_t)n, ", %.1f M events/s", (double)events / el / 1e6);
  else if (el > 0 && done) n += snprintf(line + n, sizeof line - (size_t)n, ", %.1f %s/s", (double)done / el, p->unit);
  if (total && done && done < total)
    snprintf(line + n, sizeof line - (size_t)n, ", %s left", eta(b, sizeof b, el * (double)(total - done) / (double)done));
  char out[300];
  snprintf(out, sizeof out, "\r%s\033[K", line);
  progress_write(out);
  p->drawn = 1;
}

void cli_progress_done(cli_progress *p) {
  if (!p->on || !p->drawn) return;
  progress_write("\r\033[K");
  p->drawn = 0;
}

/* window_start.c: where a replay of a recorded window starts: the state validate rebuilds, or the live set. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_starts.h"
#include "validate/validate.h"
#include "window_start.h"

/*
 * A snapshot that begins mid-run (a ring-buffer window) holds the blocks live at its start as
 * preexisting allocations, and what `memplay validate` needs to rebuild the whole state there:
 * the segments that existed, cached free space included. A replay under the allocator that
 * recorded the trace, with its recorded settings, on the stored events and a simulated device,
 * starts from that rebuilt state, so that it answers as validate does (the same peaks). Any other
 * replay of a window cannot: another allocator (or other options) would not have made those
 * segments, and a transformed trace's preexisting allocations are not the recorded ones. It starts
 * from an empty allocator, the live blocks allocated first in address order, and says so.
 */

void window_cache_release(window_cache *wc) {
  replay_start_release(&wc->start);
  memset(wc, 0, sizeof *wc);
}

/* Whether the trace is a window (its importer said so in its attrs), or the state at one moment
 * (an out-of-memory dump: state_only). */
static int attr_true(const store_trace *t, const char *key) {
  char a[64], b[64];
  snprintf(a, sizeof a, "\"%s\":true", key);
  snprintf(b, sizeof b, "\"%s\": true", key);
  return t && t->attrs && (strstr(t->attrs, a) || strstr(t->attrs, b));
}
static int is_window(const store_trace *t) { return attr_true(t, "window") || attr_true(t, "state_only"); }

/* Why the rebuilt state does not apply to this pass, or NULL when it does. */
static const char *not_rebuilt(const session_run *run, const session_pass *pass) {
  const store_trace *t = run->trace;
  if (!t->allocator || strcmp(t->allocator, run->spec->ops->name)) return "another allocator than the recorded one";
  /* a state-only trace's state is a fact of its moment: it holds under options of the same model
   * too (a larger memory limit, say) */
  if (run->spec->nopts && !attr_true(t, "state_only")) return "options other than the recorded settings";
  if (pass->source && !pass->stored_events) return "a transformed trace";
  if (pass->make_device || run->shared_device) return "a device other than the simulated one";
  if (!run->spec->ops->restore) return "a model that cannot restore a recorded state";
  if (run->live_start) return "asked for";
  return NULL;
}

/* Window t's start state in *st: the one kept in the store (store_starts.h) while the rules that
 * rebuild it are the same, else rebuilt by validate and kept there (*kept is 0 when keeping it
 * failed; a read-only store keeps none, without failing). 1 when it was kept already, 0 when
 * rebuilt now, -1 when it cannot be rebuilt (err says why). */
static int start_state(store *s, const store_trace *t, replay_start *st, int *agrees, int *kept, char *err,
                       size_t errlen) {
  const char *key = validate_start_key();
  *kept = 0;
  if (store_window_start_get(s, t->id, key, st, agrees) == 1) return 1;
  if (validate_window_start(s, t, st, agrees, err, errlen)) return -1;
  *kept = !store_window_start_put(s, t->id, key, st, *agrees);
  return 0;
}

/* A window's start is rebuilt once and kept; a state-only trace's state is read as recorded, which
 * costs no more than reading it back. Kept or not, the replay goes on. */
static void rebuild(store *s, window_cache *wc, const store_trace *t) {
  if (wc->trace_id == t->id) return;
  window_cache_release(wc);
  wc->trace_id = t->id;
  if (attr_true(t, "state_only")) {
    wc->ok = !validate_recorded_state(s, t, &wc->start, wc->err, sizeof wc->err);
    wc->agrees = 1;
    wc->state_only = 1;
    return;
  }
  int kept;
  wc->ok = start_state(s, t, &wc->start, &wc->agrees, &kept, wc->err, sizeof wc->err) >= 0;
}

/* Kept at import, so that even the first replay of a window, and a store read only afterwards
 * (a comparison's shards, `compare --no-save`), finds its start ready. A state that cannot be
 * rebuilt keeps nothing: the replay that needs it says why. */
int session_keep_window_start(store *s, const store_trace *t, char *err, size_t errlen) {
  if (!s || !t || !is_window(t) || attr_true(t, "state_only")) return 0;
  replay_start st;
  memset(&st, 0, sizeof st);
  int agrees, kept;
  char why[256];
  int rc = start_state(s, t, &st, &agrees, &kept, why, sizeof why);
  replay_start_release(&st);
  if (rc) return 0; /* kept already, or not to be rebuilt */
  if (!kept) return snprintf(err, errlen, "%s", store_error(s)), -1;
  return 1;
}

/* ---- shared by several sessions ------------------------------------------------------------- */

static void window_free(void *value) {
  window_cache_release(value);
  free(value);
}

session_once *session_windows_new(void) { return session_once_new(window_free); }

static void *window_built(store *s, const store_trace *t) {
  window_cache *wc = sim_xcalloc(1, sizeof *wc);
  rebuild(s, wc, t);
  return wc;
}

/* ---- the decision ------------------------------------------------------------------------------ */

void window_start_decide(store *s, window_cache *own, session_once *shared, session_run *run,
                         const session_pass *pass, replay_config *cfg) {
  run->window_start = NULL;
  run->window_note[0] = 0;
  run->window_segments = run->window_blocks = 0;
  const store_trace *t = run->trace;
  if (!s || !t || !is_window(t)) return;
  const char *why = not_rebuilt(run, pass);
  if (!why) {
    window_cache *wc = own;
    if (shared) wc = session_once_get(shared, s, t, window_built);
    else rebuild(s, own, t);
    if (wc->ok && wc->start.n) {
      cfg->start = &wc->start;
      cfg->nstart = 1;
      run->window_start = "rebuilt";
      run->window_segments = wc->start.nsegments;
      run->window_blocks = wc->start.nblocks;
      if (wc->state_only)
        snprintf(run->window_note, sizeof run->window_note,
                 "the recorded state: %zu segments (regions) holding %zu live blocks (chunks) and the free space "
                 "between them, as the recording shows them",
                 wc->start.nsegments, wc->start.nblocks);
      else
        snprintf(run->window_note, sizeof run->window_note,
                 "the recorded state at the window's start, as validate rebuilds it: %zu segments holding %zu live "
                 "blocks and the cached free space between them%s",
                 wc->start.nsegments, wc->start.nblocks,
                 wc->agrees ? "" : " (validate does not agree with this recording everywhere: see memplay validate)");
      return;
    }
    why = wc->ok ? "no segment at its start" : wc->err;
  }
  run->window_start = "live_set";
  snprintf(run->window_note, sizeof run->window_note,
           "assumed: an empty allocator at the window's start, the blocks live then allocated first, in address "
           "order, without the cached segments the recording had (%s)",
           why);
}

/* store_source.c: the store reader behind the replay_source interface, lending each decoded chunk. */
#include <stdlib.h>

#include "store_source.h"

typedef struct ssrc {
  store *s;
  int64_t trace_id;
  store_reader *r;
} ssrc;

static int ss_next(void *ctx, sim_event *ev) { return store_reader_next(((ssrc *)ctx)->r, ev); }
static ptrdiff_t ss_view(void *ctx, const sim_event **evs) { return store_reader_view(((ssrc *)ctx)->r, evs); }
static void ss_advance(void *ctx, size_t k) { store_reader_advance(((ssrc *)ctx)->r, k); }
static const uint32_t *ss_slots(void *ctx) { return store_reader_slots(((ssrc *)ctx)->r); }
static const char *ss_error(void *ctx) { return store_error(((ssrc *)ctx)->s); }
/* Back to the trace's first event: a new reader (the engine asks in rare cases, replay_engine_run). */
static int ss_rewind(void *ctx) {
  ssrc *x = ctx;
  store_reader_close(x->r);
  x->r = NULL;
  return store_reader_open(x->s, x->trace_id, &x->r) ? -1 : 0;
}
static void ss_close(void *ctx) {
  ssrc *x = ctx;
  store_reader_close(x->r);
  free(x);
}

int store_source_open(replay_source *src, store *s, int64_t trace_id) {
  ssrc *x = malloc(sizeof *x);
  if (!x) return -1;
  x->s = s;
  x->trace_id = trace_id;
  if (store_reader_open(s, trace_id, &x->r)) {
    free(x);
    return -1;
  }
  *src = (replay_source){.next = ss_next, .error = ss_error, .close = ss_close, .ctx = x, .view = ss_view,
                         .advance = ss_advance, .rewind = ss_rewind, .length_hint = store_reader_length(x->r),
                         .view_slots = ss_slots};
  return 0;
}

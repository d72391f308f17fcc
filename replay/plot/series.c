/* series.c: memory over time, recorded from a replay into min/max buckets that never lose the peak. */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "plot.h"

void plot_series_init(plot_series *s, const char *label, uint64_t capacity, size_t max_buckets) {
  memset(s, 0, sizeof *s);
  s->label = strdup(label ? label : "");
  s->capacity = capacity;
  s->max_buckets = max_buckets >= 2 ? max_buckets : 1000;
  s->buckets = sim_xmalloc(s->max_buckets * sizeof *s->buckets);
  s->width = 1;
  s->peak.seq = -1;
}

void plot_series_release(plot_series *s) {
  free(s->label);
  free(s->buckets);
  free(s->ooms);
  memset(s, 0, sizeof *s);
}

int64_t plot_series_x(const plot_series *s, int64_t seq, int64_t ts) { return s->has_ts ? sim_ns_between(s->first_ts, ts) : seq; }

/* b takes in what a (its neighbour) saw: the lower lows and the higher highs. */
static void bucket_merge(plot_bucket *a, const plot_bucket *b) {
  if (b->lo.allocated < a->lo.allocated) a->lo = b->lo;
  if (b->hi.allocated > a->hi.allocated) a->hi = b->hi;
  if (b->rlo < a->rlo) a->rlo = b->rlo, a->rlo_seq = b->rlo_seq, a->rlo_ts = b->rlo_ts;
  if (b->rhi > a->rhi) a->rhi = b->rhi, a->rhi_seq = b->rhi_seq, a->rhi_ts = b->rhi_ts;
}

static void bucket_push(plot_series *s) {
  if (s->n == s->max_buckets) { /* full: neighbours merge, the width doubles */
    size_t n = s->n / 2;
    for (size_t i = 0; i < n; i++) {
      plot_bucket m = s->buckets[2 * i];
      bucket_merge(&m, &s->buckets[2 * i + 1]);
      s->buckets[i] = m;
    }
    if (s->n % 2) s->buckets[n++] = s->buckets[s->n - 1];
    s->n = n;
    s->width *= 2;
  }
  s->buckets[s->n++] = s->cur;
  s->cur_n = 0;
}

static void point_of(plot_point *p, const sim_event *ev, const replay_outcome *o, int cats) {
  p->seq = ev->seq;
  p->ts = ev->ts;
  p->allocated = o->allocated;
  p->reserved = o->reserved;
  if (cats && o->category_bytes) memcpy(p->cat, o->category_bytes, sizeof p->cat);
  else memset(p->cat, 0, sizeof p->cat);
}

/* One event into the current bucket. */
static void series_add(plot_series *s, const sim_event *ev, const replay_outcome *o) {
  if (s->cur_n == 0) {
    point_of(&s->cur.lo, ev, o, s->has_categories);
    s->cur.hi = s->cur.lo;
    s->cur.rlo = s->cur.rhi = o->reserved;
    s->cur.rlo_seq = s->cur.rhi_seq = ev->seq;
    s->cur.rlo_ts = s->cur.rhi_ts = ev->ts;
  } else {
    if (o->allocated < s->cur.lo.allocated) point_of(&s->cur.lo, ev, o, s->has_categories);
    if (o->allocated > s->cur.hi.allocated) point_of(&s->cur.hi, ev, o, s->has_categories);
    if (o->reserved < s->cur.rlo) s->cur.rlo = o->reserved, s->cur.rlo_seq = ev->seq, s->cur.rlo_ts = ev->ts;
    if (o->reserved > s->cur.rhi) s->cur.rhi = o->reserved, s->cur.rhi_seq = ev->seq, s->cur.rhi_ts = ev->ts;
  }
  if (++s->cur_n >= s->width) bucket_push(s);
}

static void series_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  plot_series *s = ctx;
  if (!o) return;
  if (s->events == 0) s->first_ts = s->last_ts = ev->ts;
  if (ev->ts != s->first_ts) s->has_ts = 1;
  if (ev->ts > s->last_ts) s->last_ts = ev->ts;
  s->events++;
  if (o->allocated > s->peak.allocated || s->peak.seq < 0) point_of(&s->peak, ev, o, 1);
  if (o->reserved > s->peak_reserved) s->peak_reserved = o->reserved;
  if (o->oom) {
    s->ooms_total++;
    if (s->nooms < PLOT_MAX_MARKS) {
      if (!s->ooms) s->ooms = sim_xmalloc(PLOT_MAX_MARKS * sizeof *s->ooms);
      s->ooms[s->nooms++] = (plot_mark){ev->seq, ev->ts, ev->size};
    }
  }
  series_add(s, ev, o);
}

void plot_series_finish(plot_series *s) {
  if (s->cur_n) bucket_push(s);
}

static void series_finish(void *ctx) { plot_series_finish(ctx); }

replay_observer plot_series_observer(plot_series *s) {
  s->has_categories = 1;
  return (replay_observer){.ctx = s, .event = series_event, .finish = series_finish};
}

void plot_series_from_result(plot_series *s, const char *label, uint64_t capacity, const replay_result *r) {
  plot_series_init(s, label, capacity, r->ntimeline > 2 ? r->ntimeline : 2);
  for (size_t i = 0; i < r->ntimeline; i++) {
    const replay_point *p = &r->timeline[i];
    sim_event ev;
    sim_event_init(&ev);
    ev.seq = p->seq;
    ev.ts = p->ts;
    replay_outcome o = {.allocated = p->allocated, .reserved = p->reserved};
    series_event(s, &ev, &o);
  }
  plot_series_finish(s);
  /* the timeline keeps each span's maxima: the peak is the result's own */
  if (r->peak_allocated_seq >= 0) {
    s->peak.allocated = r->peak_allocated;
    s->peak.seq = r->peak_allocated_seq;
    s->peak.ts = r->peak_ts;
  }
  s->events = r->events;
  for (size_t i = 0; i < r->noom_list && s->nooms < PLOT_MAX_MARKS; i++) {
    if (!s->ooms) s->ooms = sim_xmalloc(PLOT_MAX_MARKS * sizeof *s->ooms);
    /* a stored OOM has its event index only: its time is that of the timeline point before it */
    int64_t ts = s->first_ts;
    for (size_t k = 0; k < r->ntimeline && r->timeline[k].seq <= r->oom_list[i].seq; k++) ts = r->timeline[k].ts;
    s->ooms[s->nooms++] = (plot_mark){r->oom_list[i].seq, ts, r->oom_list[i].size};
  }
  s->ooms_total = r->ooms;
}

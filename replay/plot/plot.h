/* plot.h: pictures of replays: memory over time and segment maps, as SVG or one self-contained HTML page. */
#ifndef REPLAY_PLOT_H
#define REPLAY_PLOT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "engine/moment.h"
#include "engine/names.h"
#include <yajl/yajl_gen.h>

/*
 * Plotting consumes what a replay gives (a series recorded by an observer, or a result's
 * timeline) and the state at a moment (replay_moment); it knows nothing of the engine's insides.
 *
 * A series keeps memory over time downsampled into at most `max_buckets` buckets of consecutive
 * events: each bucket keeps the events at which allocated memory was lowest and highest (with the
 * live bytes by category there) and the lowest and highest reserved memory, so a curve drawn
 * through them keeps every dip and every peak, the run's peak included. When the buckets fill,
 * neighbours merge and the width doubles: memory stays bounded whatever the trace's length.
 */
typedef struct plot_point {
  int64_t seq, ts;
  int64_t allocated, reserved;
  int64_t cat[SIM_CAT__COUNT]; /* requested bytes live, by category */
} plot_point;

typedef struct plot_bucket {
  plot_point lo, hi;          /* the events of lowest and highest allocated memory */
  int64_t rlo, rhi;           /* lowest and highest reserved */
  int64_t rlo_seq, rhi_seq, rlo_ts, rhi_ts;
} plot_bucket;

typedef struct plot_mark {
  int64_t seq, ts;
  uint64_t size;
} plot_mark;

typedef struct plot_series {
  char *label;                /* what the run was ("torch", "bfc:allow_growth=true") */
  uint64_t capacity;          /* UINT64_MAX: unlimited */
  int has_categories;         /* the buckets carry live bytes by category */
  plot_bucket *buckets;
  size_t n, max_buckets;
  uint64_t width;             /* events per bucket */
  plot_bucket cur;
  uint64_t cur_n;
  uint64_t events;
  int64_t first_ts, last_ts;
  int has_ts;                 /* events carry times (else the x axis is the event index) */
  plot_point peak;            /* allocated memory at its highest */
  int64_t peak_reserved;
  plot_mark *ooms;            /* the first OOMs (at most PLOT_MAX_MARKS) */
  size_t nooms;
  uint64_t ooms_total;
} plot_series;

#define PLOT_MAX_MARKS 200
#define PLOT_MAX_SERIES 16 /* series a figure draws (more are left out) */

/* An empty series (max_buckets 0: 1000). */
void plot_series_init(plot_series *s, const char *label, uint64_t capacity, size_t max_buckets);
/* An observer that records the replay into s (pass it to the engine or the session). */
replay_observer plot_series_observer(plot_series *s);
/* After the replay: the last bucket closed. Idempotent. */
void plot_series_finish(plot_series *s);
/* A series from a result's own timeline (a stored run, a script's result): allocated and
 * reserved at the timeline's resolution, no categories. */
void plot_series_from_result(plot_series *s, const char *label, uint64_t capacity, const replay_result *r);
void plot_series_release(plot_series *s);
/* The x of a point: ns since the first event when the series has times, else the event index. */
int64_t plot_series_x(const plot_series *s, int64_t seq, int64_t ts);

/* A call stack as the frames a user wants to see (one per line, innermost first), or NULL. */
typedef char *(*plot_frames_fn)(void *arg, int64_t stack);

/*
 * What a picture shows: figures, one under the other. A figure draws its series overlaid on one
 * time axis, and its segment maps side by side under it (each labelled). `memplay plot` makes one
 * figure; a comparison makes one per trace (its policies' curves overlaid, their maps at each
 * policy's peak side by side), with its table as HTML before them.
 */
typedef struct plot_map {
  const char *label;
  const replay_moment *moment;
} plot_map;

typedef struct plot_figure {
  const char *title;
  const plot_series *const *series;
  size_t nseries;
  const plot_map *maps;
  size_t nmaps;
} plot_figure;

typedef struct plot_page {
  const char *title;
  const plot_figure *figures;
  size_t nfigures;
  const char *html_head;     /* HTML put before the figures (a comparison's table), or NULL; SVG ignores it */
  plot_frames_fn frames;     /* call sites for the HTML page's hover details (NULL: none) */
  void *frames_arg;
} plot_page;

/* Writes the page as one SVG document, or as one HTML page (inline SVG, data and script; no
 * network). 0, or -1 when writing failed. */
int plot_write_svg(const plot_page *p, FILE *f);
int plot_write_html(const plot_page *p, FILE *f);

/* The frames of a stored call stack a user is shown (io/frames.h filters them), one per line,
 * innermost first, at most 12: a plot_frames_fn over a store. */
char *plot_store_frames(void *store_arg, int64_t stack);

/* ---- the state at a moment, in words and as data ---- */
/* What `memplay replay --at` prints: the moment, the OOM's request against the free space, the
 * pools, the fragmentation, and every segment with its blocks. */
void plot_moment_text(FILE *f, const replay_moment *m, const replay_names *names);
/* The same as members of an open JSON object. */
void plot_moment_json(yajl_gen g, const replay_moment *m);

/* ---- timelines for other tools ---- */
/* Memory over time as CSV: one row per bucket low and high, in event order: event, time in
 * seconds (empty without times), allocated, reserved, then live bytes per category (when the
 * series has them). */
int plot_write_csv(const plot_series *s, FILE *f);

/*
 * The Trace Event Format (the JSON ui.perfetto.dev and chrome://tracing open), written as the
 * replay goes: an observer that keeps each stream's kernels, copies and memsets as slices, the
 * allocator syncs and OOMs as instants, and at the end writes them with the series' counters
 * (allocated, reserved, live bytes per category) and the process and thread names. Times are
 * microseconds since the trace's first event (the event index, when the trace has no times).
 */
typedef struct plot_perfetto plot_perfetto;
plot_perfetto *plot_perfetto_new(const replay_names *names, const char *process_name);
replay_observer plot_perfetto_observer(plot_perfetto *p);
/* An OOM known from elsewhere (a stored run's), at the event with this index and time. */
void plot_perfetto_oom(plot_perfetto *p, int64_t seq, int64_t ts, uint64_t size);
/* Writes the document with the counters of s (recorded in the same replay). 0, or -1. */
int plot_perfetto_write(plot_perfetto *p, const plot_series *s, FILE *f);
void plot_perfetto_free(plot_perfetto *p);

/* "1.50 GiB", for labels. */
const char *plot_bytes(char *buf, size_t n, double bytes);

#endif

/* svg.c: the figures drawn as SVG: memory over time (series overlaid) and segment maps side by side. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot_int.h"

const char *plot_bytes(char *buf, size_t n, double b) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int k = 0;
  double v = b < 0 ? -b : b;
  while (v >= 1024 && k < 4) v /= 1024, k++;
  if (k == 0) snprintf(buf, n, "%.0f B", b);
  else snprintf(buf, n, "%s%.2f %s", b < 0 ? "-" : "", v, u[k]);
  return buf;
}

void plot_xml_text(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default:
      if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') fputc(' ', f);
      else fputc(*s, f);
    }
  }
}

const char *const plot_series_colors[PLOT_NCOLORS] = {"#1f5fa8", "#d9480f", "#2b8a3e", "#862e9c",
                                                     "#c2255c", "#0b7285", "#5c940d", "#495057"};
const char *const plot_category_colors[SIM_CAT__COUNT] = {
  "#adb5bd", /* unknown */
  "#4263eb", /* parameter */
  "#f59f00", /* optimizer state */
  "#37b24d", /* gradient */
  "#f03e3e", /* activation */
  "#15aabf", /* input */
  "#ae3ec9", /* temporary */
  "#868e96", /* workspace */
};

/* ---- axes ------------------------------------------------------------------------------------ */

/* A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) for about n ticks over span. */
double plot_nice_step(double span, int n) {
  if (span <= 0) return 1;
  double raw = span / n, p = pow(10, floor(log10(raw))), m = raw / p;
  double step = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
  return step * p;
}

/* The unit the y axis counts in: GiB from 1 GiB up, else MiB, else KiB. */
static double y_unit(double max, const char **name) {
  if (max >= 1073741824.0) return *name = "GiB", 1073741824.0;
  if (max >= 1048576.0) return *name = "MiB", 1048576.0;
  return *name = "KiB", 1024.0;
}

/* The layout of one figure's chart. */
typedef struct chart {
  double left, top, width, height; /* the plot area */
  double x0, x1;                   /* data x domain */
  double ymax;                     /* bytes at the top */
  int has_ts;
} chart;

static double cx(const chart *c, double x) { return c->left + (x - c->x0) / (c->x1 - c->x0) * c->width; }
static double cy(const chart *c, double y) { return c->top + c->height - y / c->ymax * c->height; }

static int categories_present(const plot_figure *fig, int present[SIM_CAT__COUNT]);
static int legend_height(const plot_figure *fig, double ymax);

static void chart_layout(chart *c, const plot_figure *fig, double top) {
  memset(c, 0, sizeof *c);
  c->left = 78, c->top = top + 54, c->width = PLOT_WIDTH - 78 - 24, c->height = 300;
  c->x0 = 0, c->x1 = 1;
  double ymax = 0;
  int first = 1;
  for (size_t i = 0; i < fig->nseries; i++) {
    const plot_series *s = fig->series[i];
    if (s->has_ts) c->has_ts = 1;
  }
  for (size_t i = 0; i < fig->nseries; i++) {
    const plot_series *s = fig->series[i];
    double end = c->has_ts ? (double)sim_ns_between(s->first_ts, s->last_ts) : (double)(s->events ? s->events - 1 : 0);
    if (first || end > c->x1) c->x1 = end;
    first = 0;
    if ((double)s->peak.allocated > ymax) ymax = (double)s->peak.allocated;
    if ((double)s->peak_reserved > ymax) ymax = (double)s->peak_reserved;
    for (size_t k = 0; k < s->n; k++)
      if ((double)s->buckets[k].rhi > ymax) ymax = (double)s->buckets[k].rhi;
    if (s->capacity != UINT64_MAX && s->capacity && (double)s->capacity < 4 * (ymax > 0 ? ymax : 1) &&
        (double)s->capacity > ymax)
      ymax = (double)s->capacity;
  }
  if (c->x1 <= c->x0) c->x1 = c->x0 + 1;
  const char *u;
  double unit = y_unit(ymax, &u), step = plot_nice_step(ymax / unit * 1.08, 6) * unit;
  c->ymax = ymax > 0 ? ceil(ymax * 1.08 / step) * step : 1;
  c->top = top + 34 + legend_height(fig, c->ymax);
}

/* x in the series' own terms (time since its first event, or event index) */
static double sx(const plot_series *s, const chart *c, int64_t seq, int64_t ts) {
  return c->has_ts ? (double)sim_ns_between(s->first_ts, ts) : (double)seq;
}

/* Labels of the x axis: "1.5 s", "250 ms", or an event index. */
void plot_x_label(char *buf, size_t n, double v, int has_ts, double step) {
  if (!has_ts) {
    snprintf(buf, n, "%.0f", v);
    return;
  }
  const char *u = "s";
  double d = 1e9;
  if (step < 1e3) u = "ns", d = 1;
  else if (step < 1e6) u = "\xc2\xb5s", d = 1e3;
  else if (step < 1e9) u = "ms", d = 1e6;
  double x = v / d, st = step / d;
  int dec = st >= 1 ? 0 : st >= 0.1 ? 1 : st >= 0.01 ? 2 : 3;
  snprintf(buf, n, "%.*f %s", dec, x, u);
}

static void draw_axes(FILE *f, const chart *c, int fig) {
  const char *u;
  double unit = y_unit(c->ymax / 1.08, &u), step = plot_nice_step(c->ymax / unit, 6);
  fprintf(f, "<g class=\"y-axis\" font-size=\"11\" fill=\"#495057\">\n");
  for (double v = 0; v * unit <= c->ymax * 1.0001; v += step) {
    double y = cy(c, v * unit);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e9ecef\"/>", c->left, c->left + c->width, y,
            y);
    int dec = step >= 1 ? 0 : step >= 0.1 ? 1 : 2;
    fprintf(f, "<text class=\"y-tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", c->left - 6, y + 4,
            dec, v);
  }
  fprintf(f, "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" text-anchor=\"middle\">memory (%s)</text>\n",
          c->top + c->height / 2, c->top + c->height / 2, u);
  fprintf(f, "</g>\n");
  fprintf(f, "<g class=\"x-axis\" id=\"xaxis-%d\" font-size=\"11\" fill=\"#495057\">\n", fig);
  double xs = plot_nice_step(c->x1 - c->x0, 8);
  for (double v = ceil(c->x0 / xs) * xs; v <= c->x1 + xs * 1e-9; v += xs) {
    char lab[48];
    plot_x_label(lab, sizeof lab, v, c->has_ts, xs);
    double x = cx(c, v);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#adb5bd\"/>", x, x, c->top + c->height,
            c->top + c->height + 4);
    fprintf(f, "<text class=\"x-tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x,
            c->top + c->height + 17, lab);
  }
  fprintf(f, "</g>\n");
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#495057\" text-anchor=\"middle\">%s</text>\n",
          c->left + c->width / 2, c->top + c->height + 34, c->has_ts ? "time since the first event" : "event index");
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#adb5bd\"/>\n", c->left,
          c->top, c->width, c->height);
}

/* ---- curves ---------------------------------------------------------------------------------- */

/* The stacked live bytes by category of a series, one area per category that ever holds bytes. */
static void draw_categories(FILE *f, const plot_series *s, const chart *c, int present[SIM_CAT__COUNT]) {
  double *base = calloc(s->n ? s->n : 1, sizeof *base);
  for (int k = 0; k < SIM_CAT__COUNT; k++) {
    if (!present[k]) continue;
    fprintf(f, "<path class=\"category\" data-category=\"%s\" fill=\"%s\" fill-opacity=\"0.55\" stroke=\"none\" d=\"",
            sim_category_name(k), plot_category_colors[k]);
    for (size_t i = 0; i < s->n; i++) {
      const plot_point *p = &s->buckets[i].hi;
      fprintf(f, "%c%.1f %.1f", i ? 'L' : 'M', cx(c, sx(s, c, p->seq, p->ts)), cy(c, base[i] + (double)p->cat[k]));
    }
    for (size_t i = s->n; i-- > 0;) {
      const plot_point *p = &s->buckets[i].hi;
      fprintf(f, "L%.1f %.1f", cx(c, sx(s, c, p->seq, p->ts)), cy(c, base[i]));
      base[i] += (double)p->cat[k];
    }
    fprintf(f, "Z\"/>\n");
  }
  free(base);
}

/* The allocated (or reserved) curve through each bucket's low and high, in event order. */
static void draw_line(FILE *f, const plot_series *s, const chart *c, int reserved, int idx) {
  fprintf(f, "<path class=\"series\" data-series=\"%d\" data-kind=\"%s\" fill=\"none\" stroke=\"%s\" "
             "stroke-width=\"%s\"%s vector-effect=\"non-scaling-stroke\" d=\"",
          idx, reserved ? "reserved" : "allocated", plot_series_colors[idx % PLOT_NCOLORS], reserved ? "1.2" : "1.6",
          reserved ? " stroke-dasharray=\"5 3\"" : "");
  for (size_t i = 0; i < s->n; i++) {
    const plot_bucket *b = &s->buckets[i];
    int64_t s1, t1, s2, t2;
    double v1, v2;
    if (reserved) {
      int lo_first = b->rlo_seq <= b->rhi_seq;
      s1 = lo_first ? b->rlo_seq : b->rhi_seq, t1 = lo_first ? b->rlo_ts : b->rhi_ts;
      s2 = lo_first ? b->rhi_seq : b->rlo_seq, t2 = lo_first ? b->rhi_ts : b->rlo_ts;
      v1 = (double)(lo_first ? b->rlo : b->rhi), v2 = (double)(lo_first ? b->rhi : b->rlo);
    } else {
      const plot_point *a = b->lo.seq <= b->hi.seq ? &b->lo : &b->hi, *z = a == &b->lo ? &b->hi : &b->lo;
      s1 = a->seq, t1 = a->ts, v1 = (double)a->allocated, s2 = z->seq, t2 = z->ts, v2 = (double)z->allocated;
    }
    fprintf(f, "%c%.1f %.1f", i ? 'L' : 'M', cx(c, sx(s, c, s1, t1)), cy(c, v1));
    if (s2 != s1) fprintf(f, "L%.1f %.1f", cx(c, sx(s, c, s2, t2)), cy(c, v2));
  }
  fprintf(f, "\"/>\n");
}

static void draw_marks(FILE *f, const plot_series *s, const chart *c, int idx, int nseries, double top_peak) {
  char b[32];
  for (size_t i = 0; i < s->nooms; i++) {
    double x = sx(s, c, s->ooms[i].seq, s->ooms[i].ts);
    fprintf(f, "<g class=\"oom-mark zx\" data-x=\"%.17g\"><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#e03131\" stroke-width=\"1\" stroke-dasharray=\"2 2\"/><path d=\"M%.1f %.1fl-4 -7h8z\" "
               "fill=\"#e03131\"/><title>OOM at event %" PRId64 ": %s requested</title></g>\n",
            x, cx(c, x), cx(c, x), c->top, c->top + c->height, cx(c, x), c->top, s->ooms[i].seq,
            plot_bytes(b, sizeof b, (double)s->ooms[i].size));
  }
  if (s->peak.seq < 0) return;
  double x = sx(s, c, s->peak.seq, s->peak.ts), px = cx(c, x), py = cy(c, (double)s->peak.allocated);
  const char *anchor = px > c->left + c->width * 0.8 ? "end" : px < c->left + c->width * 0.2 ? "start" : "middle";
  /* several runs: their labels one above the other, over the highest peak */
  double ly = (nseries > 1 ? top_peak : py) - 8 - 14 * (double)(nseries - 1 - idx);
  if (ly < c->top + 12) ly = c->top + 12 + 14 * (double)idx;
  fprintf(f, "<g class=\"peak zx\" data-x=\"%.17g\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"#fff\"/>"
             "<text class=\"peak-label\" data-series=\"%d\" data-bytes=\"%" PRId64 "\" x=\"%.1f\" y=\"%.1f\" "
             "text-anchor=\"%s\" font-size=\"12\" font-weight=\"600\" fill=\"%s\">%s%speak %s</text></g>\n",
          x, px, py, plot_series_colors[idx % PLOT_NCOLORS], idx, s->peak.allocated, px, ly, anchor,
          plot_series_colors[idx % PLOT_NCOLORS], nseries > 1 ? s->label : "", nseries > 1 ? " " : "",
          plot_bytes(b, sizeof b, (double)s->peak.allocated));
}

/* Which categories the first series (the one whose composition is drawn) ever holds. */
static int categories_present(const plot_figure *fig, int present[SIM_CAT__COUNT]) {
  memset(present, 0, SIM_CAT__COUNT * sizeof *present);
  if (!fig->nseries || !fig->series[0]->has_categories) return 0;
  int any = 0;
  const plot_series *s = fig->series[0];
  for (size_t i = 0; i < s->n; i++)
    for (int k = 0; k < SIM_CAT__COUNT; k++)
      if (s->buckets[i].hi.cat[k] > 0) present[k] = any = 1;
  return any;
}

/* The legend: an item per series line, per category drawn, the capacity and the OOMs, laid out in
 * rows above the chart. */
enum { SW_LINE, SW_DASH, SW_AREA, SW_OOM };

typedef struct legend_entry {
  int swatch;
  const char *colour, *key;
  char label[160];
} legend_entry;

#define LEGEND_MAX (2 * PLOT_MAX_SERIES + SIM_CAT__COUNT + 2)

static size_t legend_entries(const plot_figure *fig, const int present[SIM_CAT__COUNT], double ymax, legend_entry *e) {
  size_t n = 0;
  for (size_t i = 0; i < fig->nseries && i < PLOT_MAX_SERIES; i++) {
    const char *name = fig->nseries > 1 ? fig->series[i]->label : "";
    for (int r = 0; r < 2; r++) {
      e[n] = (legend_entry){r ? SW_DASH : SW_LINE, plot_series_colors[i % PLOT_NCOLORS], r ? "reserved" : "allocated", ""};
      snprintf(e[n++].label, sizeof e->label, "%s%s%s", name, *name ? " " : "", r ? "reserved" : "allocated");
    }
  }
  for (int k = 0; k < SIM_CAT__COUNT; k++)
    if (present[k]) {
      e[n] = (legend_entry){SW_AREA, plot_category_colors[k], "category", ""};
      snprintf(e[n++].label, sizeof e->label, "%s", sim_category_name(k));
    }
  uint64_t cap = fig->nseries ? fig->series[0]->capacity : UINT64_MAX;
  if (cap != UINT64_MAX && (double)cap <= ymax) {
    char b[32];
    e[n] = (legend_entry){SW_LINE, "#e03131", "capacity", ""};
    snprintf(e[n++].label, sizeof e->label, "capacity %s", plot_bytes(b, sizeof b, (double)cap));
  }
  int ooms = 0;
  for (size_t i = 0; i < fig->nseries; i++) ooms |= fig->series[i]->nooms > 0;
  if (ooms) {
    e[n] = (legend_entry){SW_OOM, "#e03131", "oom", ""};
    snprintf(e[n++].label, sizeof e->label, "OOM");
  }
  return n;
}

/* Places the entries from (x0, y0) in rows of width w (f NULL: only counts the rows). */
static int legend_rows(FILE *f, const legend_entry *e, size_t n, double x0, double y0, double w) {
  double x = x0, y = y0;
  int rows = n ? 1 : 0;
  for (size_t i = 0; i < n; i++) {
    double iw = 30 + 6.4 * (double)strlen(e[i].label);
    if (x > x0 && x + iw > x0 + w) x = x0, y += 16, rows++;
    if (f) {
      fprintf(f, "<g class=\"legend-item\" data-key=\"%s\">", e[i].key);
      if (e[i].swatch == SW_AREA)
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"9\" fill=\"%s\" fill-opacity=\"0.55\"/>", x,
                y - 4.5, e[i].colour);
      else if (e[i].swatch == SW_OOM)
        fprintf(f, "<path d=\"M%.1f %.1fl-4 -7h8z\" fill=\"%s\"/>", x + 9, y + 4, e[i].colour);
      else
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>", x,
                x + 18, y, y, e[i].colour, e[i].swatch == SW_DASH ? " stroke-dasharray=\"5 3\"" : "");
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 22, y + 4);
      plot_xml_text(f, e[i].label);
      fprintf(f, "</text></g>\n");
    }
    x += iw;
  }
  return rows;
}

/* The legend's rows, in pixels, with the space under them. */
static int legend_height(const plot_figure *fig, double ymax) {
  int present[SIM_CAT__COUNT];
  categories_present(fig, present);
  legend_entry e[LEGEND_MAX];
  size_t n = legend_entries(fig, present, ymax, e);
  return 16 * legend_rows(NULL, e, n, 0, 0, PLOT_WIDTH - 78 - 24) + 8;
}

static double chart_draw(FILE *f, const plot_figure *fig, double top, int idx) {
  chart c;
  chart_layout(&c, fig, top);
  int present[SIM_CAT__COUNT];
  categories_present(fig, present);
  if (fig->title) {
    fprintf(f, "<text class=\"figure-title\" x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"600\" fill=\"#212529\">",
            c.left, top + 16);
    plot_xml_text(f, fig->title);
    fprintf(f, "</text>\n");
  }
  legend_entry e[LEGEND_MAX];
  size_t ne = legend_entries(fig, present, c.ymax, e);
  fprintf(f, "<g class=\"legend\" font-size=\"11\" fill=\"#212529\">\n");
  legend_rows(f, e, ne, c.left, top + 34, c.width);
  fprintf(f, "</g>\n");
  draw_axes(f, &c, idx);
  fprintf(f, "<g class=\"chart\" id=\"chart-%d\" data-x0=\"%.17g\" data-x1=\"%.17g\" data-left=\"%.1f\" data-width=\"%.1f\" "
             "data-top=\"%.1f\" data-height=\"%.1f\" data-ts=\"%d\">\n",
          idx, c.x0, c.x1, c.left, c.width, c.top, c.height, c.has_ts);
  fprintf(f, "<clipPath id=\"clip-%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n", idx,
          c.left, c.top - 40, c.width, c.height + 40);
  fprintf(f, "<g clip-path=\"url(#clip-%d)\"><g class=\"zoom\">\n", idx);
  if (fig->nseries) draw_categories(f, fig->series[0], &c, present);
  for (size_t i = 0; i < fig->nseries; i++) {
    draw_line(f, fig->series[i], &c, 1, (int)i);
    draw_line(f, fig->series[i], &c, 0, (int)i);
  }
  fprintf(f, "</g>\n");
  uint64_t cap = fig->nseries ? fig->series[0]->capacity : UINT64_MAX;
  if (cap != UINT64_MAX && (double)cap <= c.ymax)
    fprintf(f, "<line class=\"capacity\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e03131\" "
               "stroke-width=\"1.5\"/>\n",
            c.left, c.left + c.width, cy(&c, (double)cap), cy(&c, (double)cap));
  double top_peak = c.top + c.height;
  for (size_t i = 0; i < fig->nseries; i++)
    if (fig->series[i]->peak.seq >= 0 && cy(&c, (double)fig->series[i]->peak.allocated) < top_peak)
      top_peak = cy(&c, (double)fig->series[i]->peak.allocated);
  for (size_t i = 0; i < fig->nseries; i++) draw_marks(f, fig->series[i], &c, (int)i, (int)fig->nseries, top_peak);
  fprintf(f, "</g></g>\n");
  return c.top + c.height + 50;
}

/* ---- segment maps ---------------------------------------------------------------------------- */

#define MAP_ROW 16
#define MAP_GAP 3

/* Where each segment of a map goes: rows of bars to one scale, the largest segment a full row. */
typedef struct map_layout {
  double x, y, w, scale; /* the map's box and pixels per byte */
  int rows;
} map_layout;

static int map_place(const replay_moment *m, double w, double scale, double *xs, int *rows_of) {
  double x = 0;
  int row = 0;
  for (size_t i = 0; i < m->nsegments; i++) {
    double sw = (double)m->segments[i].size * scale;
    if (sw < 2) sw = 2;
    if (x > 0 && x + sw > w) x = 0, row++;
    if (xs) xs[i] = x, rows_of[i] = row;
    x += sw + MAP_GAP;
  }
  return m->nsegments ? row + 1 : 0;
}

static void map_layout_of(map_layout *l, const replay_moment *m, double x, double y, double w) {
  uint64_t big = 1;
  for (size_t i = 0; i < m->nsegments; i++)
    if (m->segments[i].size > big) big = m->segments[i].size;
  if (m->oom && m->oom_size > big) big = m->oom_size;
  l->x = x, l->y = y, l->w = w, l->scale = w / (double)big;
  l->rows = map_place(m, w, l->scale, NULL, NULL);
  /* many small segments: a larger scale fills the rows better, up to about 40 rows */
  while (l->rows > 40 && l->scale > 1e-30) {
    l->scale /= 2;
    l->rows = map_place(m, w, l->scale, NULL, NULL);
  }
}

static double map_height(const map_layout *l, const replay_moment *m) {
  return 40 + (double)l->rows * (MAP_ROW + 6) + (m->oom ? 44 : 0) + 40;
}

static const char *block_state_name(int st) {
  return st == SIM_BLOCK_FREE ? "free" : st == SIM_BLOCK_PENDING_FREE ? "freed, pending" : "allocated";
}

static void map_summary(FILE *f, const replay_moment *m, double x, double y) {
  char a[32], b[32], c[32];
  fprintf(f, "<text class=\"map-summary\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#495057\">%zu segments, "
             "reserved %s, allocated %s, %s free in %" PRIu64 " blocks</text>\n",
          x, y, m->nsegments, plot_bytes(a, sizeof a, (double)m->reserved), plot_bytes(b, sizeof b, (double)m->allocated),
          plot_bytes(c, sizeof c, (double)m->free_bytes), m->free_blocks);
}

static void map_block(FILE *f, const replay_moment *m, size_t bi, double x, double y, double w) {
  const replay_moment_block *b = &m->blocks[bi];
  const char *fill = b->state == SIM_BLOCK_FREE           ? "#f8f9fa"
                     : b->state == SIM_BLOCK_PENDING_FREE ? "#ced4da"
                                                          : plot_category_colors[b->category];
  char s1[32], s2[32];
  fprintf(f, "<rect class=\"block\" data-state=\"%s\"",
          b->state == SIM_BLOCK_FREE ? "free" : b->state == SIM_BLOCK_PENDING_FREE ? "pending" : "allocated");
  if (b->known && b->stack) fprintf(f, " data-s=\"%" PRId64 "\"", b->stack);
  fprintf(f, " x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>%s %s", x, y, w < 0.3 ? 0.3 : w,
          MAP_ROW, fill, block_state_name(b->state), plot_bytes(s1, sizeof s1, (double)b->size));
  if (b->state != SIM_BLOCK_FREE)
    fprintf(f, " (requested %s, %s)", plot_bytes(s2, sizeof s2, (double)b->requested),
            b->known ? sim_category_name(b->category) : "unknown");
  fprintf(f, " at 0x%" PRIx64 "</title></rect>\n", b->addr);
}

/* The failed request drawn to the map's scale, under it, with what it could not use. */
static void map_request(FILE *f, const replay_moment *m, const map_layout *l, double y) {
  char a[32], b[32], c[32];
  double w = (double)m->oom_size * l->scale;
  fprintf(f, "<rect class=\"request\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" stroke=\"#e03131\" "
             "stroke-width=\"2\" stroke-dasharray=\"4 2\"/>\n",
          l->x, y, w < 2 ? 2 : w, MAP_ROW);
  fprintf(f, "<text class=\"request-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#e03131\">needed %s, largest "
             "free block %s, %s free in %" PRIu64 " blocks</text>\n",
          l->x, y + MAP_ROW + 14, plot_bytes(a, sizeof a, (double)m->oom_size),
          plot_bytes(b, sizeof b, (double)m->largest_free), plot_bytes(c, sizeof c, (double)m->free_bytes), m->free_blocks);
}

static void map_draw(FILE *f, const plot_map *pm, const map_layout *l) {
  const replay_moment *m = pm->moment;
  char a[32];
  fprintf(f, "<g class=\"segment-map\" data-moment=\"%s\" data-segments=\"%zu\">\n", m->what, m->nsegments);
  /* the title and summary in a viewport of the map's width: maps side by side never overlap */
  fprintf(f, "<svg x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"36\" overflow=\"hidden\">\n", l->x, l->y, l->w);
  fprintf(f, "<text class=\"map-title\" x=\"0\" y=\"14\" font-size=\"13\" font-weight=\"600\" fill=\"#212529\">");
  plot_xml_text(f, pm->label ? pm->label : m->allocator);
  const char *at = !strcmp(m->what, "peak") ? "the peak" : !strcmp(m->what, "oom") ? "the first OOM" : "event";
  fprintf(f, " at %s (event %" PRId64 ")</text>\n", at, m->seq);
  map_summary(f, m, 0, 30);
  fprintf(f, "</svg>\n");
  if (!m->walked)
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#495057\">the %s model keeps no segments</text>\n",
            l->x, l->y + 54, m->allocator);
  double *xs = malloc((m->nsegments ? m->nsegments : 1) * sizeof *xs);
  int *rows = malloc((m->nsegments ? m->nsegments : 1) * sizeof *rows);
  map_place(m, l->w, l->scale, xs, rows);
  const replay_moment_segment *lseg = NULL;
  const replay_moment_block *lf = replay_moment_largest_free(m, &lseg);
  double lfx = 0, lfy = 0;
  for (size_t i = 0; i < m->nsegments; i++) {
    const replay_moment_segment *s = &m->segments[i];
    double sxp = l->x + xs[i], syp = l->y + 40 + rows[i] * (MAP_ROW + 6), sw = (double)s->size * l->scale;
    if (sw < 2) sw = 2;
    fprintf(f, "<rect class=\"segment\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"#fff\" stroke=\"#495057\" "
               "stroke-width=\"0.6\"><title>segment %s at 0x%" PRIx64 ", stream %" PRId64 ", %s pool%s</title></rect>\n",
            sxp, syp, sw, MAP_ROW, plot_bytes(a, sizeof a, (double)s->size), s->addr, s->stream,
            s->pool ? "large" : "small", s->expandable ? ", expandable" : "");
    for (size_t k = s->first; k < s->first + s->nblocks; k++) {
      double bx = sxp + (double)(m->blocks[k].addr - s->addr) * l->scale, bw = (double)m->blocks[k].size * l->scale;
      map_block(f, m, k, bx, syp, bw);
      if (&m->blocks[k] == lf) lfx = bx, lfy = syp;
    }
  }
  if (lf) {
    double bw = (double)lf->size * l->scale;
    fprintf(f, "<rect class=\"largest-free\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"none\" "
               "stroke=\"#1971c2\" stroke-width=\"2\"/>\n",
            lfx, lfy, bw < 2 ? 2 : bw, MAP_ROW);
    fprintf(f, "<text class=\"largest-free-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#1971c2\">largest free "
               "block %s</text>\n",
            l->x, l->y + 40 + l->rows * (MAP_ROW + 6) + 12, plot_bytes(a, sizeof a, (double)lf->size));
  }
  if (m->oom) map_request(f, m, l, l->y + 40 + l->rows * (MAP_ROW + 6) + 22);
  free(xs);
  free(rows);
  fprintf(f, "</g>\n");
}

static double maps_draw(FILE *f, const plot_figure *fig, double top, int draw) {
  if (!fig->nmaps) return top;
  double gap = 24, w = (PLOT_WIDTH - 78 - 24 - gap * (double)(fig->nmaps - 1)) / (double)fig->nmaps, h = 0;
  for (size_t i = 0; i < fig->nmaps; i++) {
    map_layout l;
    map_layout_of(&l, fig->maps[i].moment, 78 + (double)i * (w + gap), top, w);
    double mh = map_height(&l, fig->maps[i].moment);
    if (mh > h) h = mh;
    if (draw) map_draw(f, &fig->maps[i], &l);
  }
  return top + h;
}

/* ---- the document ---------------------------------------------------------------------------- */

double plot_figure_height(const plot_figure *fig) {
  double h = fig->title ? 24 : 0;
  if (fig->nseries) {
    chart c;
    chart_layout(&c, fig, 0);
    h = c.top + c.height + 50;
  }
  return maps_draw(NULL, fig, h, 0) + 10;
}

void plot_figure_svg(FILE *f, const plot_figure *fig, int idx, double top) {
  double y = top;
  if (fig->nseries) y = chart_draw(f, fig, top, idx);
  else if (fig->title) {
    fprintf(f, "<text class=\"figure-title\" x=\"78\" y=\"%.1f\" font-size=\"15\" font-weight=\"600\">", top + 16);
    plot_xml_text(f, fig->title);
    fprintf(f, "</text>\n");
    y += 24;
  }
  maps_draw(f, fig, y, 1);
}

int plot_write_svg(const plot_page *p, FILE *f) {
  double h = 0;
  for (size_t i = 0; i < p->nfigures; i++) h += plot_figure_height(&p->figures[i]);
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
             "font-family=\"sans-serif\">\n",
          PLOT_WIDTH, h + 10, PLOT_WIDTH, h + 10);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
  if (p->title) {
    fprintf(f, "<title>");
    plot_xml_text(f, p->title);
    fprintf(f, "</title>\n");
  }
  double y = 0;
  for (size_t i = 0; i < p->nfigures; i++) {
    plot_figure_svg(f, &p->figures[i], (int)i, y);
    y += plot_figure_height(&p->figures[i]);
  }
  fprintf(f, "</svg>\n");
  return ferror(f) ? -1 : 0;
}

/* compare_html.c: a comparison's pictures gathered per cell while it runs, and the page drawn from them with its table. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "compare_html.h"

/* What one cell gives the page. */
typedef struct cell_pics {
  plot_series series;
  int has_series;
  replay_moment moment;
  int has_moment;
  char note[320]; /* why the cell has no map, or "" */
} cell_pics;

struct cmp_html {
  pthread_mutex_t lock; /* slots and nslots (not what a slot holds: its cell's worker owns that) */
  cell_pics **slots;    /* by the cell's index in the matrix */
  size_t nslots;
};

cmp_html *cmp_html_new(void) {
  cmp_html *h = sim_xcalloc(1, sizeof *h);
  pthread_mutex_init(&h->lock, NULL);
  return h;
}

void cmp_html_free(cmp_html *h) {
  if (!h) return;
  for (size_t i = 0; i < h->nslots; i++) {
    cell_pics *p = h->slots[i];
    if (!p) continue;
    if (p->has_series) plot_series_release(&p->series);
    if (p->has_moment) replay_moment_release(&p->moment);
    free(p);
  }
  free(h->slots);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

/* The slot of the cell with this index, made when missing. */
static cell_pics *slot(cmp_html *h, size_t index) {
  pthread_mutex_lock(&h->lock);
  if (index >= h->nslots) {
    size_t n = index + 1 > 2 * h->nslots ? index + 1 : 2 * h->nslots;
    h->slots = sim_xrealloc(h->slots, n * sizeof *h->slots);
    memset(h->slots + h->nslots, 0, (n - h->nslots) * sizeof *h->slots);
    h->nslots = n;
  }
  if (!h->slots[index]) h->slots[index] = sim_xcalloc(1, sizeof **h->slots);
  cell_pics *p = h->slots[index];
  pthread_mutex_unlock(&h->lock);
  return p;
}

static const cell_pics *find(const cmp_html *h, size_t index) { return index < h->nslots ? h->slots[index] : NULL; }

/* ---- gathering, on the workers ----------------------------------------------------------------- */

static replay_observer on_cell(void *arg, const cmp_cell *c) {
  cell_pics *p = slot(arg, c->index);
  plot_series_init(&p->series, c->policy, UINT64_MAX, 0);
  p->has_series = 1;
  return plot_series_observer(&p->series);
}

/* The cell's segment map at its peak: a second pass over the same events that stops there. */
static void take_map(cell_pics *p, const cmp_cell *c, session *ses, const session_request *q, const replay_result *res,
                     const session_pass *again) {
  if (res->peak_allocated_seq < 0) {
    snprintf(p->note, sizeof p->note, "no map: '%s' allocates no device memory", c->trace);
    return;
  }
  session_run run;
  memset(&run, 0, sizeof run);
  session_at at = {.kind = SESSION_AT_EVENT, .value = res->peak_allocated_seq};
  char err[256];
  if (session_prepare(ses, q, &run, err, sizeof err) ||
      session_execute_at(ses, &run, again, &at, &p->moment, err, sizeof err)) {
    snprintf(p->note, sizeof p->note, "no map: %s", err);
  } else {
    p->has_moment = 1;
    snprintf(p->moment.what, sizeof p->moment.what, "peak");
  }
  session_run_release(&run);
}

static void after_cell(void *arg, const cmp_cell *c, session *ses, const session_request *q, const replay_result *res,
                       const session_pass *again) {
  cell_pics *p = slot(arg, c->index);
  if (!ses) { /* a scenario's variant: its own timeline, no map */
    if (p->has_series) plot_series_release(&p->series);
    plot_series_from_result(&p->series, c->policy, c->capacity, res);
    p->has_series = 1;
    snprintf(p->note, sizeof p->note, "no map: the cell is a scenario's variant");
    return;
  }
  plot_series_finish(&p->series);
  p->series.capacity = c->capacity;
  take_map(p, c, ses, q, res, again);
}

void cmp_html_attach(cmp_html *h, cmp_request *req) {
  req->cell_observer = on_cell;
  req->cell_after = after_cell;
  req->cell_arg = h;
}

/* ---- the page ---------------------------------------------------------------------------------- */

static void html_text(FILE *f, const char *s) {
  for (; *s; s++) switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
}

static const char table_style[] =
  "<style>table.compare{border-collapse:collapse;font-size:12px;margin:0 0 10px}"
  "table.compare th,table.compare td{padding:2px 6px;border-bottom:1px solid #dee2e6;text-align:left;white-space:nowrap}"
  "table.compare th{background:#f1f3f5}table.compare td.num,table.compare th.num{text-align:right}"
  "table.compare tr.regressed td{background:#fff5f5}"
  "table.compare tr.regressed td.regressed{background:#ffc9c9;color:#c92a2a;font-weight:bold}"
  "table.compare td.failed,table.compare td.nofit{color:#c92a2a;font-weight:bold}"
  "pre.compare-report{font-size:12px;background:#f8f9fa;padding:8px;margin:0 0 16px;box-sizing:border-box;overflow-x:auto}"
  "p.note{font-size:12px;color:#868e96;margin:0 0 4px}</style>\n";

/* The class of table cell k of row ci: its metric regressed, the cell failed or does not fit. */
static const char *cell_class(const cmp_result *r, const cmp_table *t, size_t ci, int k) {
  const cmp_cell *c = &r->cells[ci];
  if (t->col_metric[k] >= 0 && cmp_cell_regressed(r, ci, t->col_metric[k])) return "regressed";
  if (k == t->ncols - 1 && t->ncols == CMP_TABLE_COLS && cmp_cell_regressed(r, ci, -1)) return "regressed";
  if (k == 11 && c->error) return "failed";
  if (k == 10 && cmp_cell_fits(c) == 0) return "nofit";
  return NULL;
}

static void write_table(FILE *f, const cmp_result *r) {
  cmp_table t;
  cmp_table_make(r, &t);
  fputs("<table class=\"compare\">\n<thead><tr>", f);
  for (int k = 0; k < t.ncols; k++) {
    fputs(t.right[k] ? "<th class=\"num\">" : "<th>", f);
    html_text(f, t.text[k]);
    fputs("</th>", f);
  }
  fputs("</tr></thead>\n<tbody>\n", f);
  for (size_t i = 1; i < t.rows; i++) {
    size_t ci = i - 1;
    fprintf(f, "<tr class=\"cell%s\" data-cell=\"%zu\">", cmp_cell_regressed(r, ci, -1) ? " regressed" : "",
            r->cells[ci].index);
    for (int k = 0; k < t.ncols; k++) {
      const char *cls = cell_class(r, &t, ci, k);
      fprintf(f, "<td class=\"%s%s%s\">", t.right[k] ? "num" : "", t.right[k] && cls ? " " : "", cls ? cls : "");
      html_text(f, t.text[i * CMP_TABLE_COLS + (size_t)k]);
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</tbody>\n</table>\n", f);
  cmp_table_release(&t);
}

/* What the page shows before the figures: the table, then the report the table prints under it. */
static char *page_head(const cmp_html *h, const cmp_result *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  fputs(table_style, f);
  write_table(f, r);
  char *rep = NULL;
  size_t rlen = 0;
  FILE *rf = open_memstream(&rep, &rlen);
  if (rf) {
    cmp_result_print_report(r, rf);
    fclose(rf);
    const char *body = rep;
    while (*body == '\n') body++;
    fputs("<pre class=\"compare-report\">", f);
    html_text(f, body);
    fputs("</pre>\n", f);
    free(rep);
  }
  for (size_t i = 0; i < r->ncells; i++) {
    const cell_pics *p = find(h, r->cells[i].index);
    if (!p || !p->note[0]) continue;
    fputs("<p class=\"note\">", f);
    html_text(f, r->cells[i].trace);
    fputs(" / ", f);
    html_text(f, r->cells[i].policy);
    fputs(": ", f);
    html_text(f, p->note);
    fputs("</p>\n", f);
  }
  fclose(f);
  return buf;
}

/* One figure per trace with cells: its policies' series overlaid, their maps side by side. */
typedef struct figures {
  plot_figure *figs;
  const plot_series **series;
  plot_map *maps;
  char **titles;
  size_t n;
} figures;

static void make_figures(const cmp_html *h, const cmp_result *r, figures *out) {
  memset(out, 0, sizeof *out);
  size_t np = r->npolicies;
  out->figs = sim_xcalloc(r->ntraces + 1, sizeof *out->figs);
  out->titles = sim_xcalloc(r->ntraces + 1, sizeof *out->titles);
  out->series = sim_xcalloc(r->ntraces * np + 1, sizeof *out->series);
  out->maps = sim_xcalloc(r->ntraces * np + 1, sizeof *out->maps);
  for (size_t t = 0; t < r->ntraces; t++) {
    plot_figure *fig = &out->figs[out->n];
    fig->series = out->series + t * np;
    fig->maps = out->maps + t * np;
    size_t ns = 0, nm = 0;
    for (size_t k = 0; k < np; k++) {
      const cell_pics *p = find(h, t * np + k);
      if (!p || !p->has_series) continue;
      out->series[t * np + ns++] = &p->series;
      if (p->has_moment) out->maps[t * np + nm++] = (plot_map){r->policies[k].label, &p->moment};
    }
    if (!ns) continue;
    fig->nseries = ns;
    fig->nmaps = nm;
    size_t tl = strlen(r->traces[t]) + 64;
    out->titles[out->n] = sim_xmalloc(tl);
    snprintf(out->titles[out->n], tl, "%s: %zu polic%s%s", r->traces[t], ns, ns == 1 ? "y" : "ies",
             nm ? ", segment maps at each peak" : "");
    fig->title = out->titles[out->n];
    out->n++;
  }
}

static void free_figures(figures *fs) {
  for (size_t i = 0; i < fs->n; i++) free(fs->titles[i]);
  free(fs->titles);
  free(fs->figs);
  free(fs->series);
  free(fs->maps);
}

int cmp_html_write(const cmp_html *h, const cmp_result *r, plot_frames_fn frames, void *frames_arg, FILE *f) {
  char *head = page_head(h, r);
  if (!head) return -1;
  figures fs;
  make_figures(h, r, &fs);
  char title[160];
  snprintf(title, sizeof title, "memplay compare: %zu trace%s x %zu polic%s", r->ntraces, r->ntraces == 1 ? "" : "s",
           r->npolicies, r->npolicies == 1 ? "y" : "ies");
  plot_page page = {.title = title, .figures = fs.figs, .nfigures = fs.n, .html_head = head, .frames = frames,
                    .frames_arg = frames_arg};
  int rc = plot_write_html(&page, f);
  free_figures(&fs);
  free(head);
  return rc;
}

/* compare_html.h: a comparison as one HTML page: the table with regressions highlighted, each trace's curves and peak maps. */
#ifndef REPLAY_COMPARE_HTML_H
#define REPLAY_COMPARE_HTML_H

#include <stdio.h>

#include "compare/compare.h"
#include "plot/plot.h"

/*
 * The pictures of a comparison, gathered while it runs: cmp_html_attach sets the request's
 * per-cell callbacks, so that every cell's worker records its own memory over time (downsampled
 * as `memplay plot` does) and then takes the segment map at its peak, each cell into its own slot
 * (no lock but the one that finds the slot). A scenario's cell has its variant's timeline and no
 * map. cmp_html_write then draws the page: the table and the regression report, then one figure
 * per trace: its policies' curves overlaid, their maps side by side. The page is the same
 * whatever the number of worker threads.
 */
typedef struct cmp_html cmp_html;

cmp_html *cmp_html_new(void);
/* Sets req's cell_observer, cell_after and cell_arg. */
void cmp_html_attach(cmp_html *h, cmp_request *req);
/* Writes the page of r (after cmp_check, so that its regressions show). frames: the call sites
 * for the hover details (plot_store_frames over a store), or NULL. 0, or -1 when writing failed. */
int cmp_html_write(const cmp_html *h, const cmp_result *r, plot_frames_fn frames, void *frames_arg, FILE *f);
void cmp_html_free(cmp_html *h);

#endif

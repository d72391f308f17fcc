/* plot_int.h: what the SVG and HTML writers share inside the plot library. */
#ifndef REPLAY_PLOT_INT_H
#define REPLAY_PLOT_INT_H

#include <stdio.h>

#include "plot.h"

#define PLOT_WIDTH 1100
#define PLOT_NCOLORS 8

extern const char *const plot_series_colors[PLOT_NCOLORS];
extern const char *const plot_category_colors[SIM_CAT__COUNT];

/* Text escaped for XML and HTML. */
void plot_xml_text(FILE *f, const char *s);
double plot_nice_step(double span, int n);
void plot_x_label(char *buf, size_t n, double v, int has_ts, double step);
/* One figure's height, and its drawing at y = top (inside an <svg> the caller opened). */
double plot_figure_height(const plot_figure *fig);
void plot_figure_svg(FILE *f, const plot_figure *fig, int idx, double top);

#endif

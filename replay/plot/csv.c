/* csv.c: memory over time as CSV, from a series' buckets (each low and high of allocated memory, in event order). */
#include <inttypes.h>

#include "plot.h"

static void row(FILE *f, const plot_series *s, const plot_point *p) {
  fprintf(f, "%" PRId64 ",", p->seq);
  if (s->has_ts) fprintf(f, "%.9f", (double)sim_ns_between(s->first_ts, p->ts) / 1e9);
  fprintf(f, ",%" PRId64 ",%" PRId64, p->allocated, p->reserved);
  for (int k = 0; s->has_categories && k < SIM_CAT__COUNT; k++) fprintf(f, ",%" PRId64, p->cat[k]);
  fputc('\n', f);
}

int plot_write_csv(const plot_series *s, FILE *f) {
  fprintf(f, "event,time_s,allocated,reserved");
  for (int k = 0; s->has_categories && k < SIM_CAT__COUNT; k++) fprintf(f, ",%s", sim_category_name(k));
  fputc('\n', f);
  for (size_t i = 0; i < s->n; i++) {
    const plot_bucket *b = &s->buckets[i];
    const plot_point *a = b->lo.seq <= b->hi.seq ? &b->lo : &b->hi, *z = a == &b->lo ? &b->hi : &b->lo;
    row(f, s, a);
    if (z->seq != a->seq) row(f, s, z);
  }
  return ferror(f) ? -1 : 0;
}

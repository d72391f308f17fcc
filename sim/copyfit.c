/* copyfit.c: a device's copy times fitted from the copies a trace recorded (copyfit.h). */
#include <math.h>
#include <string.h>

#include "copyfit.h"

const char *sim_copy_fit_rule_name(int rule) {
  switch (rule) {
  case SIM_COPY_FIT_LSQ: return "least squares";
  case SIM_COPY_FIT_LATENCY: return "latency (profile bandwidth)";
  case SIM_COPY_FIT_ORIGIN: return "bandwidth (no latency)";
  case SIM_COPY_FIT_DERIVED: return "derived from the other host memory kind";
  default: return "none";
  }
}

void sim_copy_fit_init(sim_copy_fit *f) { memset(f, 0, sizeof *f); }

static sim_copy_fit_class *class_of(sim_copy_fit *f, int dir, int mem, uint64_t size) {
  int b = sim_tm_copy_bucket(dir, mem);
  return &f->c[b][size >= SIM_TM_LARGE_COPY];
}

void sim_copy_fit_add(sim_copy_fit *f, const sim_event *ev) {
  if (ev->kind != SIM_EV_MEMCPY || ev->dur <= 0 || ev->size == 0) return;
  sim_copy_fit_class *c = class_of(f, ev->dir, ev->mem, ev->size);
  double x = (double)ev->size, y = (double)ev->dur;
  c->n++;
  c->sx += x;
  c->sy += y;
  c->sxx += x * x;
  c->sxy += x * y;
  c->syy += y * y;
  f->copies++;
}

/* The profile's bandwidth for a class (bytes per second). */
static double profile_bw(const sim_device_profile *pf, int bucket) {
  switch (bucket) {
  case SIM_TM_CB_H2D_PINNED: return pf->h2d_pinned_bw;
  case SIM_TM_CB_H2D_PAGEABLE: return pf->h2d_pageable_bw;
  case SIM_TM_CB_D2H_PINNED: return pf->d2h_pinned_bw;
  case SIM_TM_CB_D2H_PAGEABLE: return pf->d2h_pageable_bw;
  case SIM_TM_CB_D2D: return pf->d2d_bw;
  default: return pf->p2p_bw;
  }
}

/* Latency a and seconds-per-byte b from the sums, by the rules of copyfit.h. */
static void solve_class(sim_copy_fit_class *c, double bw_profile) {
  double n = (double)c->n;
  double mx = c->sx / n, my = c->sy / n;
  double vx = c->sxx / n - mx * mx;
  double a, b; /* ns, ns per byte */
  c->rule = SIM_COPY_FIT_LSQ;
  b = vx > 1e-9 * mx * mx && c->n >= 2 ? (c->sxy / n - mx * my) / vx : -1;
  if (b <= 0) { /* no growth with size the data can show: the profile's bandwidth */
    b = bw_profile > 0 ? 1e9 / bw_profile : 0;
    c->rule = SIM_COPY_FIT_LATENCY;
  }
  a = my - b * mx;
  if (a < 0) { /* through the origin: total time over total bytes */
    a = 0;
    b = c->sx > 0 ? c->sy / c->sx : 0;
    c->rule = SIM_COPY_FIT_ORIGIN;
  }
  double ssr = c->syy - 2 * a * c->sy - 2 * b * c->sxy + n * a * a + 2 * a * b * c->sx + b * b * c->sxx;
  c->latency_ns = a;
  c->bw = b > 0 ? 1e9 / b : 0;
  c->rms_resid_ns = sqrt(ssr > 0 ? ssr / n : 0);
  c->mean_dur_ns = my;
  c->valid = 1;
}

/* A class without copies from its sibling (the other host memory kind, same direction and size). */
static void derive_class(sim_copy_fit_class *to, const sim_copy_fit_class *from, double bw_to, double bw_from) {
  if (to->n || !from->n || !from->valid || bw_to <= 0 || bw_from <= 0) return;
  to->valid = 1;
  to->rule = SIM_COPY_FIT_DERIVED;
  to->latency_ns = from->latency_ns;
  to->bw = from->bw * bw_to / bw_from;
}

void sim_copy_fit_solve(sim_copy_fit *f, const sim_device_profile *pf) {
  for (int bkt = 0; bkt < SIM_TM__NCB; bkt++)
    for (int large = 0; large < 2; large++)
      if (f->c[bkt][large].n) solve_class(&f->c[bkt][large], profile_bw(pf, bkt));
  static const int pairs[2][2] = {{SIM_TM_CB_H2D_PINNED, SIM_TM_CB_H2D_PAGEABLE},
                                  {SIM_TM_CB_D2H_PINNED, SIM_TM_CB_D2H_PAGEABLE}};
  for (int i = 0; i < 2; i++)
    for (int large = 0; large < 2; large++) {
      int a = pairs[i][0], b = pairs[i][1];
      derive_class(&f->c[b][large], &f->c[a][large], profile_bw(pf, b), profile_bw(pf, a));
      derive_class(&f->c[a][large], &f->c[b][large], profile_bw(pf, a), profile_bw(pf, b));
    }
}

int64_t sim_copy_fit_time(const sim_copy_fit *f, int dir, int mem, uint64_t size) {
  const sim_copy_fit_class *c = class_of((sim_copy_fit *)f, dir, mem, size);
  if (!c->valid) return -1;
  double t = c->latency_ns + (c->bw > 0 ? (double)size * 1e9 / c->bw : 0);
  /* at most 2^62 ns, as a trace's own durations are (sums a store was edited to could ask more) */
  if (!(t < 0x1p62)) return INT64_C(1) << 62;
  return t > 0 ? (int64_t)(t + 0.5) : 0;
}

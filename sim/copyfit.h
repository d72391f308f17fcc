/* copyfit.h: a device's copy times fitted from the copies a trace recorded: latency and bandwidth per kind and size. */
#ifndef SIM_COPYFIT_H
#define SIM_COPYFIT_H

#include <stdint.h>

#include "devices.h"
#include "event.h"
#include "timemodel.h"

/*
 * The copies a trace recorded say what its machine's links delivered, which a profile of the
 * card on an idle machine does not (a busy server's shared PCIe switches, the driver's real
 * per-copy cost). For each class the time model reports copies by (direction and host memory
 * kind, below or at least 1 MiB), the recorded durations are fitted as latency + bytes /
 * bandwidth by least squares. Where the data cannot separate the two (one copy, all copies of
 * one size, no growth with size), the profile's bandwidth is kept and the latency is what
 * remains; a negative latency is replaced by a fit through the origin (the class's total bytes
 * over its total time). Every rule keeps the class's total time: the fit's aggregate error on
 * the copies it was fitted to is zero, and the residual says how well single copies agree.
 */
typedef struct sim_copy_fit_class {
  /* sums over the class's recorded copies: bytes x, durations y (ns) */
  uint64_t n;
  double sx, sy, sxx, sxy, syy;
  /* the fit */
  int valid;
  int rule;             /* SIM_COPY_FIT_* */
  double latency_ns;    /* per copy */
  double bw;            /* bytes per second */
  double rms_resid_ns;  /* root mean square of (fitted - recorded) */
  double mean_dur_ns;   /* the class's mean recorded duration */
} sim_copy_fit_class;

enum {
  SIM_COPY_FIT_LSQ = 1,      /* latency and bandwidth by least squares */
  SIM_COPY_FIT_LATENCY = 2,  /* the profile's bandwidth, the latency fitted */
  SIM_COPY_FIT_ORIGIN = 3,   /* no latency: bandwidth = total bytes / total time */
  SIM_COPY_FIT_DERIVED = 4,  /* no copies of its own: the other host memory kind's fit, in the
                                profile's ratio of the two kinds' bandwidths */
};
const char *sim_copy_fit_rule_name(int rule);

typedef struct sim_copy_fit {
  sim_copy_fit_class c[SIM_TM__NCB][2]; /* [bucket][0: below 1 MiB, 1: at least] */
  uint64_t copies;                      /* copies added */
} sim_copy_fit;

void sim_copy_fit_init(sim_copy_fit *f);
/* Adds an event: a copy with a recorded duration and a size counts, anything else is ignored. */
void sim_copy_fit_add(sim_copy_fit *f, const sim_event *ev);
/* Fits every class that has copies; pf gives the bandwidths the data cannot. */
void sim_copy_fit_solve(sim_copy_fit *f, const sim_device_profile *pf);
/* A copy's fitted duration in ns, or -1 when its class has no fit. */
int64_t sim_copy_fit_time(const sim_copy_fit *f, int dir, int mem, uint64_t size);

#endif

/* compare.h: a matrix of traces x allocator policies replayed through the session, its metrics, regression checks, shards. */
#ifndef REPLAY_COMPARE_H
#define REPLAY_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/engine.h"
#include "session/session.h"

/*
 * A comparison replays every (trace, policy) cell through the replay session and keeps, per
 * cell, the metrics below; relative columns compare each cell with the reference policy's cell
 * of the same trace. cmp_result is the whole answer in memory, and its JSON (cmp_result_json,
 * docs/sweeps.md lists the fields) is the same answer on disk: `compare --json`, a shard's
 * `--results FILE`, a `--baseline`, and what `merge` reads all have this one shape, so any
 * renderer (the table, Markdown, CSV, an HTML report) works from either.
 *
 * The cells are ordered traces (by name) major, policies (as given) minor; cell i is
 * (traces[i / npolicies], policies[i % npolicies]). Shard K of N takes the cells with
 * i % N == K - 1.
 */

/* The metrics of a cell: X(id, name in --fail-if, JSON field, unit). Units: bytes, ratio (0..1),
 * count, seconds, rate (per second). */
#define CMP_METRICS(X)                                          \
  X(PEAK_ALLOCATED, "peak_allocated", "peak_allocated_bytes", CMP_UNIT_BYTES) \
  X(PEAK_RESERVED, "peak_reserved", "peak_reserved_bytes", CMP_UNIT_BYTES)    \
  X(FRAGMENTATION, "fragmentation", "fragmentation", CMP_UNIT_RATIO)          \
  X(DEVICE_MALLOCS, "device_mallocs", "device_mallocs", CMP_UNIT_COUNT)       \
  X(DEVICE_MAPS, "device_maps", "device_maps", CMP_UNIT_COUNT)                \
  X(OOMS, "ooms", "ooms", CMP_UNIT_COUNT)                                     \
  X(STEP_TIME, "step_time", "step_time_s", CMP_UNIT_SECONDS)                  \
  X(SAMPLES_PER_S, "samples_per_s", "samples_per_s", CMP_UNIT_RATE)

enum { CMP_UNIT_BYTES, CMP_UNIT_RATIO, CMP_UNIT_COUNT, CMP_UNIT_SECONDS, CMP_UNIT_RATE };
#define CMP_X_ENUM(id, name, field, unit) CMP_##id,
enum { CMP_METRICS(CMP_X_ENUM) CMP__NMETRICS };
#undef CMP_X_ENUM

/* A metric's --fail-if name, JSON field and unit; cmp_metric_find: its index, or -1. */
const char *cmp_metric_name(int m);
const char *cmp_metric_field(int m);
int cmp_metric_unit(int m);
int cmp_metric_find(const char *name);

/* The version of the JSON shape ("format_version"); a file of another version is refused. */
#define CMP_FORMAT_VERSION 1

/* A policy: an allocator SPEC, and optionally its own device profile and capacity. */
typedef struct cmp_policy {
  char *label;     /* as given: "torch:expandable_segments:True@H100-80GB" */
  char *allocator; /* the SPEC part */
  char *device;    /* its own device profile, else NULL (the comparison's) */
  uint64_t capacity; /* its own capacity, else UINT64_MAX (the comparison's) */
} cmp_policy;

/* One replay of one trace under one policy. */
typedef struct cmp_cell {
  size_t index;         /* in the whole matrix */
  char *trace;          /* its name */
  char *policy;         /* the policy's label */
  char *allocator;      /* the SPEC that ran */
  char *settings;       /* JSON object: {"model", "options", "recorded"}: everything the model was given */
  char *device;         /* the device profile the time model used, or NULL */
  uint64_t capacity;    /* UINT64_MAX: unlimited */
  char *version;        /* memplay's version that ran it */
  char *error;          /* non-NULL: the cell failed to run (the message); its metrics are unknown */
  uint64_t events;
  double metric[CMP__NMETRICS];
  unsigned known;       /* bit m: metric m is known (step time needs a device profile) */
  double vs_reference[CMP__NMETRICS]; /* (value - reference) / reference, when bit m of vs_known */
  unsigned vs_known;
  int64_t run_id;       /* the stored run, 0 when not stored */
} cmp_cell;

/* Whether the cell fits: 1 yes, 0 no (an OOM was predicted: against the capacity, or an allocator's
 * own limit such as bfc's memory_limit), -1 unknown (the cell failed). */
int cmp_cell_fits(const cmp_cell *c);

/* A threshold: METRIC OP VALUE, absolute, or relative when VALUE ends in '%'. */
typedef struct cmp_threshold {
  char *text; /* as given */
  int metric;
  int op;     /* '>', 'G' (>=), '<', 'L' (<=) */
  double value; /* absolute; or the change in percent when relative */
  int relative;
} cmp_threshold;

/* Parses "peak_reserved > +2%", "ooms > 0", "fragmentation > 0.25", "peak_reserved > 20GiB".
 * 0, or -1 with a message. */
int cmp_threshold_parse(cmp_threshold *t, const char *text, char *err, size_t errlen);
void cmp_threshold_release(cmp_threshold *t);

/* A threshold crossed by a cell. */
typedef struct cmp_regression {
  size_t cell;       /* index into the result's cells */
  size_t threshold;  /* index into the result's thresholds */
  double before;     /* the baseline's (or the reference policy's) value; NAN for an absolute threshold */
  double after;      /* the cell's value */
  const char *against; /* "baseline", "reference" or "absolute" */
} cmp_regression;

/* A cell on one side of a regression check only, or one whose threshold could not be checked. */
typedef struct cmp_missing {
  char *trace, *policy;
  const char *where; /* "run" (in the baseline, not in this run) or "baseline" (new in this run) */
} cmp_missing;

typedef struct cmp_unchecked {
  size_t cell, threshold;
  const char *why; /* "unknown value", "unknown baseline value", "no baseline cell", "failed cell" */
} cmp_unchecked;

/* The whole comparison. */
typedef struct cmp_result {
  char *version;       /* memplay's */
  char *comparison_id; /* the runs' comparison id; NULL when nothing was stored */
  cmp_policy *policies;
  size_t npolicies, reference;
  char **traces; /* sorted by name */
  size_t ntraces;
  char *device;      /* the comparison's device profile, or NULL */
  uint64_t capacity; /* the comparison's capacity, UINT64_MAX none */
  char *timing;      /* time model options, or NULL */
  char *scenario;    /* the what-if scenario every cell ran (its last variant is the cell), or NULL */
  char **params;     /* its parameters, "KEY=VALUE" */
  size_t nparams;
  unsigned shard_k, shard_n; /* 0/0: not a shard (all cells) */
  cmp_cell *cells; /* in index order; a shard holds only its own */
  size_t ncells;
  /* The regression check (cmp_check): */
  cmp_threshold *thresholds;
  size_t nthresholds;
  char *baseline; /* the baseline file, or NULL */
  cmp_regression *regressions;
  size_t nregressions;
  cmp_missing *missing;
  size_t nmissing;
  cmp_unchecked *unchecked;
  size_t nunchecked;
} cmp_result;

void cmp_result_release(cmp_result *r);
/* Total cells of the matrix, and the cells that failed. */
size_t cmp_result_total(const cmp_result *r);
size_t cmp_result_failed(const cmp_result *r);
/* Cells with an OOM predicted. */
size_t cmp_result_not_fitting(const cmp_result *r);
/* Fills the relative columns (vs_reference) of every cell whose reference cell is present. */
void cmp_result_relate(cmp_result *r);

/* ---- planning and running ------------------------------------------------------------------ */

/* What the user asked for. */
typedef struct cmp_request {
  const char *const *patterns; /* trace names or glob patterns */
  size_t npatterns;
  const char *const *policies; /* policy texts: SPEC[@DEVICE][@SIZE] */
  size_t npolicies;
  size_t reference;            /* index into policies */
  const char *device;          /* NULL: none (each trace's recorded device, when a profile matches) */
  int no_time;                 /* no device profile at all: no time prediction, not even on the recorded device */
  uint64_t capacity;           /* UINT64_MAX: the device's, else unlimited */
  const char *timing;
  const char *scenario_path;   /* a what-if scenario (Lua) applied to every cell, or NULL: plain replays */
  const char *scenario;        /* its name (the file name without .lua) */
  const char *const *params;   /* its parameters, KEY=VALUE (--set) */
  size_t nparams;
  unsigned shard_k, shard_n;   /* 0/0: every cell; else 1 <= shard_k <= shard_n <= CMP_MAX_SHARDS */
  int jobs;                    /* worker threads, >= 1 */
  int save;                    /* store each cell as a run (needs a writable store) */
  /* Called (serialised) after each cell: cells done, cells to do, events replayed so far. */
  void (*progress)(void *arg, size_t done, size_t total, uint64_t events);
  void *progress_arg;
  /*
   * What a front end gathers per cell besides the metrics (the curves and maps of a report), all
   * optional, called on the worker thread that runs the cell, each cell on one thread only (so
   * per-cell state needs no lock; the callbacks guard what they share). For a plain replay:
   * cell_observer gives an observer for the cell's pass, and cell_after is called once the cell
   * ran, with the worker's session, the cell's request and the run's result, and a pass over the
   * same events to replay them again (session_prepare and session_execute_at on a run of its own).
   * For a scenario's cell: cell_after only, with ses, q and again NULL and the variant's result.
   */
  replay_observer (*cell_observer)(void *arg, const cmp_cell *c);
  void (*cell_after)(void *arg, const cmp_cell *c, session *ses, const session_request *q, const replay_result *res,
                     const session_pass *again);
  void *cell_arg;
} cmp_request;

enum { CMP_OK = 0, CMP_EUSAGE = 1, CMP_EFAIL = 2 };
/* The most shares a comparison is split into (--shard K/N), and a results file may name. */
#define CMP_MAX_SHARDS 1000000

/* Parses a policy text into *p. 0, or -1 with a message. */
int cmp_policy_parse(cmp_policy *p, const char *text, char *err, size_t errlen);
void cmp_policy_release(cmp_policy *p);

/* Checks what can be checked before the store is read (policies, shard, reference, timing):
 * CMP_OK or CMP_EUSAGE with a message. */
int cmp_request_check(const cmp_request *req, char *err, size_t errlen);

/* Plans the matrix over the traces of the store at path (opened read-only as immutable when
 * the request is a shard) and runs this request's cells with req->jobs threads, each with its
 * own store connection and session. A cell that fails is kept with its error; the others go on.
 * CMP_OK (cells may have failed: cmp_result_failed), CMP_EUSAGE (a pattern that matches
 * nothing, an unknown device) or CMP_EFAIL, with a message. */
int cmp_run(const char *store_path, const cmp_request *req, cmp_result *out, char *err, size_t errlen);

/* ---- files: results, baselines, shards ------------------------------------------------------ */

/* Writes the result as JSON (one object; the fields are listed in docs/sweeps.md). */
void cmp_result_json(const cmp_result *r, FILE *f, int pretty);
/* Reads a result written by cmp_result_json. 0, or -1 with a message naming the file and the field
 * (r is then empty: nothing to release). */
int cmp_result_read(cmp_result *r, const char *path, char *err, size_t errlen);
/* Combines shard results into the whole comparison: every shard 1..N once, all of the same
 * comparison. 0, or -1 with a message naming the missing, duplicate or mismatched shards. */
int cmp_merge(cmp_result *shards, size_t n, const char *const *paths, cmp_result *out, char *err, size_t errlen);

/* ---- the regression check ------------------------------------------------------------------- */

/*
 * Checks r against thresholds: absolute ones against each cell's value; relative ones against the
 * same (trace, policy) cell of baseline when given, else the reference policy's cell of the
 * same trace. Fills r->regressions, r->missing (cells on one side only, with a baseline) and
 * r->unchecked; takes a copy of the thresholds. baseline_path names it in the report.
 */
void cmp_check(cmp_result *r, const cmp_threshold *t, size_t nt, const cmp_result *baseline,
               const char *baseline_path);

/* The answer, in the order it decides the exit status: cells that failed to run; then (unless
 * no_fail) a threshold crossed, or a cell that does not fit its capacity; else a pass. */
enum { CMP_VERDICT_PASS, CMP_VERDICT_FAILED, CMP_VERDICT_REGRESSION, CMP_VERDICT_NOT_FITTING };
int cmp_verdict(const cmp_result *r, int no_fail);
/* "pass", "failed", "regression", "does_not_fit". */
const char *cmp_verdict_name(int v);

/* ---- output -------------------------------------------------------------------------------- */

enum { CMP_FORMAT_TABLE, CMP_FORMAT_MARKDOWN, CMP_FORMAT_CSV };
/* Parses "table", "markdown" or "csv": the format, or -1. */
int cmp_format_find(const char *name);
/* Writes the cells (regressions marked), then the regression report (not in CSV). */
void cmp_result_print(const cmp_result *r, int format, FILE *f);

/* The table those printers show, as text: a header row, then a row per cell in order; ncols is
 * CMP_TABLE_COLS, less the last ("regressed") when nothing regressed. right[k]: column k is
 * numeric (right-aligned). col_metric[k]: the metric column k shows, or -1. For other renderers. */
#define CMP_TABLE_COLS 13
typedef struct cmp_table {
  char **text; /* rows x CMP_TABLE_COLS */
  size_t rows;
  int ncols;
  const int *right, *col_metric;
} cmp_table;
void cmp_table_make(const cmp_result *r, cmp_table *t);
void cmp_table_release(cmp_table *t);
/* Whether cell ci crossed a threshold on metric m (m < 0: on any). */
int cmp_cell_regressed(const cmp_result *r, size_t ci, int m);
/* The report the table and Markdown print under the cells (totals, failed cells, regressions). */
void cmp_result_print_report(const cmp_result *r, FILE *f);

#endif

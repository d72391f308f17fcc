/* notes.c: Kineto: what an import merged, counted or dropped, kept as the trace's notes (store stats). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kineto_int.h"

/* Elements memplay does not keep, counted by kind: the first KINETO_MAX_DROPPED_KINDS kinds by
 * name, the rest together. */
void kineto_drop(kparse *p, const char *what, size_t n, int unknown) {
  for (size_t i = 0; i < p->ndropped; i++)
    if (strlen(p->dropped[i].name) == n && !memcmp(p->dropped[i].name, what, n)) {
      p->dropped[i].n++;
      return;
    }
  if (p->ndropped < KINETO_MAX_DROPPED_KINDS && n < sizeof p->dropped[0].name) {
    dropped_kind *d = &p->dropped[p->ndropped++];
    memcpy(d->name, what, n);
    d->name[n] = 0;
    d->n = 1;
    d->unknown = unknown;
    return;
  }
  p->dropped_other++;
}

static int note(kwalk *kw, const char *name, const char *sev, int64_t v, const char *detail) {
  if (!v) return 0;
  if (store_writer_stat(kw->w, name, sev, v, detail)) {
    kineto_fail(kw->p, "%s", store_error(kw->p->ic->s));
    return -1;
  }
  return 0;
}

/* What was merged, counted or found wrong, each a number with what it means. */
static int note_counts(kwalk *kw, const kbase *b, const joiner *j) {
  kparse *p = kw->p;
  int64_t pre_explicit = 0, dup = 0, rep = 0, negative = 0;
  for (size_t i = 0; i < b->n; i++) {
    pre_explicit += (int64_t)b->d[i].npre;
    dup += b->d[i].duplicate_allocs;
    rep += b->d[i].repeated_frees;
    if (b->d[i].have_total && b->d[i].baseline < b->d[i].explicit_bytes) negative++;
  }
  if (note(kw, "operators_as_call_stacks", "info", p->n_ops,
           "cpu_op, user_annotation and python_function ranges: kept as the call stacks of the events inside them") ||
      note(kw, "runtime_calls_merged", "info", j->merged,
           "launches merged into their device activity (ts and api_dur of the activity)") ||
      note(kw, "flow_events", "info", p->n_flow, "ac2g/fwdbwd flow arrows: the correlation ids carry the same link") ||
      note(kw, "metadata_events", "info", p->n_meta, "process and thread names") ||
      note(kw, "activities_launched_before_window", "info", j->before_window,
           "device activities whose launch is not in the file: placed at their device start") ||
      note(kw, "preexisting_blocks", "info", kw->preexisting,
           "memory allocated before profiling began (blocks freed in the window, and the rest of the baseline)") ||
      note(kw, "preexisting_blocks_from_frees", "info", pre_explicit, NULL) ||
      note(kw, "step_markers", "info", kw->n_steps, "ProfilerStep#N ranges") ||
      note(kw, "phase_markers", "info", kw->n_phases, "backward, optimizer and zero_grad phases") ||
      note(kw, "duplicate_allocations", "warning", dup, "allocations of an address that was still live") ||
      note(kw, "repeated_frees", "warning", rep, "frees of a pre-existing address that was already freed") ||
      note(kw, "baseline_below_freed_blocks", "warning", negative,
           "devices whose recorded Total Allocated is below the blocks freed in the window before being allocated") ||
      note(kw, "runtime_calls_sharing_correlation", "warning", j->extra_runtime, NULL) ||
      note(kw, "kernel_launch_details", "info", j->kernels,
           "kernels whose grid, block, registers and shared memory were not kept (the event model has no place for them)") ||
      note(kw, "memory_on_non_cuda_devices", "info", p->non_cuda_memory, "[memory] events whose Device Type is not CUDA") ||
      note(kw, "top_level_fields_dropped", "data_loss", p->top_dropped, "metadata values over 8 MiB in all"))
    return -1;
  return 0;
}

/* Runtime queries, by name. */
static int note_queries(kwalk *kw, const joiner *j) {
  kparse *p = kw->p;
  int64_t queries = 0;
  size_t qoff = 0;
  char qdetail[1024];
  qdetail[0] = 0;
  size_t it = 0;
  uint64_t qk, qv;
  while (sim_map_next(&j->queries, &it, &qk, &qv)) {
    queries += (int64_t)qv;
    if (qoff < sizeof qdetail - 96)
      qoff += (size_t)snprintf(qdetail + qoff, sizeof qdetail - qoff, "%s%.60s: %llu", qoff ? ", " : "",
                               kineto_text(p, (int64_t)qk), (unsigned long long)qv);
  }
  return note(kw, "runtime_queries", "info", queries, qdetail);
}

/* Elements not kept: the kinds memplay knows to ignore, and those of categories it does not know. */
static int note_dropped(kwalk *kw) {
  kparse *p = kw->p;
  int64_t ignored = 0, unknown = 0;
  size_t off = 0, uoff = 0;
  char detail[1024], udetail[1024];
  detail[0] = udetail[0] = 0;
  for (size_t i = 0; i < p->ndropped; i++) {
    const dropped_kind *d = &p->dropped[i];
    char *buf = d->unknown ? udetail : detail;
    size_t *o = d->unknown ? &uoff : &off;
    if (*o < sizeof detail - 64)
      *o += (size_t)snprintf(buf + *o, sizeof detail - *o, "%s%s: %" PRId64, *o ? ", " : "", d->name, d->n);
    if (d->unknown) unknown += d->n;
    else ignored += d->n;
  }
  ignored += p->dropped_other;
  if (p->dropped_other && off < sizeof detail - 32)
    snprintf(detail + off, sizeof detail - off, "%sother: %" PRId64, off ? ", " : "", p->dropped_other);
  if (note(kw, "events_ignored", "info", ignored, detail) ||
      note(kw, "events_of_unknown_categories", "data_loss", unknown, udetail))
    return -1;
  return 0;
}

int kineto_write_notes(kwalk *kw, const kbase *b, const joiner *j) {
  if (note_counts(kw, b, j) || note_queries(kw, j) || note_dropped(kw)) return -1;
  return 0;
}

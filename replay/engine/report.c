/* report.c: replay results as JSON and as rows of the runs tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/jsonw.h"
#include "report.h"
#include "sim/copyfit.h"

static double secs(int64_t ns) { return (double)ns / 1e9; }

void report_time_item_label(const replay_names *names, const sim_tm_item *it, char *buf, size_t n) {
  const char *name = replay_name(names, it->name);
  switch (it->what) {
  case SIM_TM_W_KERNEL:
  case SIM_TM_W_MEMSET: snprintf(buf, n, "%s %s", sim_tm_what_name(it->what), name ? name : "(unnamed)"); break;
  case SIM_TM_W_COPY:
  case SIM_TM_W_STAGING:
    snprintf(buf, n, "%s %s %s", sim_tm_what_name(it->what), sim_copy_dir_name(it->dir), sim_mem_kind_name(it->mem));
    break;
  case SIM_TM_W_SYNC:
    if (name) snprintf(buf, n, "sync %s", name);
    else snprintf(buf, n, "sync (%s)", sim_event_kind_name(it->kind));
    break;
  case SIM_TM_W_CALL:
    if (name) snprintf(buf, n, "call %s", name);
    else snprintf(buf, n, "%s calls", sim_event_kind_name(it->kind));
    break;
  case SIM_TM_W_HOST: snprintf(buf, n, "host code between calls"); break;
  case SIM_TM_W_DEVICE_WAIT: snprintf(buf, n, "device wait before %s", sim_event_kind_name(it->kind)); break;
  default: snprintf(buf, n, "%s", sim_tm_what_name(it->what));
  }
}

static void breakdown_json(yajl_gen g, const char *key, const int64_t b[SIM_TM__NCLASS]) {
  jsonw_str(g, key);
  yajl_gen_map_open(g);
  for (int c = 0; c < SIM_TM__NCLASS; c++) jsonw_kdouble(g, sim_tm_class_name(c), secs(b[c]));
  yajl_gen_map_close(g);
}

/* What the time model assumed, as it was configured. */
static void time_assumptions_json(yajl_gen g, const sim_tm_config *c) {
  jsonw_str(g, "assumptions");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "copies", c->copy_timing == SIM_TM_TIMING_RECORDED ? "recorded"
                          : c->copy_timing == SIM_TM_TIMING_PROFILE ? "profile" : "model");
  jsonw_kstr(g, "device_waits", c->keep_device_waits ? "keep" : "drop");
  if (c->kernels_as_recorded) jsonw_kstr(g, "kernels", "recorded");
  jsonw_kstr(g, "dependencies", c->infer_dependencies ? "infer" : "off");
  jsonw_kdouble(g, "kernel_scale", c->kernel_scale > 0 ? c->kernel_scale : 1.0);
  jsonw_kbool(g, "malloc_syncs", c->malloc_syncs);
  jsonw_kint(g, "batch_size", c->batch_size);
  yajl_gen_map_close(g);
}

/* The whole run's time: its span, its breakdown, where the host blocked, how busy the device was. */
static void time_totals_json(yajl_gen g, const sim_tm_result *t) {
  jsonw_kdouble(g, "total_s", secs(t->total_ns));
  jsonw_kint(g, "start_ns", t->start_ns);
  jsonw_kint(g, "end_ns", t->end_ns);
  jsonw_kuint(g, "steps_complete", t->complete_steps);
  jsonw_str(g, "recorded_step_time_s");
  if (t->recorded_step_time_s >= 0) jsonw_double(g, t->recorded_step_time_s);
  else jsonw_null(g);
  breakdown_json(g, "breakdown_s", t->breakdown);
  jsonw_str(g, "host_blocked_s");
  yajl_gen_map_open(g);
  jsonw_kdouble(g, "sync", secs(t->blocked_sync_ns));
  jsonw_kdouble(g, "copies", secs(t->blocked_copy_ns));
  jsonw_kdouble(g, "allocation", secs(t->blocked_alloc_ns));
  jsonw_kdouble(g, "launch_queue", secs(t->blocked_launch_ns));
  yajl_gen_map_close(g);
  jsonw_str(g, "device_busy_s");
  yajl_gen_map_open(g);
  jsonw_kdouble(g, "compute", secs(t->compute_busy_ns));
  jsonw_kdouble(g, "copies", secs(t->copy_busy_ns));
  yajl_gen_map_close(g);
}

static void time_steps_json(yajl_gen g, const sim_tm_result *t) {
  jsonw_str(g, "steps");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < t->nsteps; i++) {
    const sim_tm_step *st = &t->steps[i];
    yajl_gen_map_open(g);
    jsonw_kint(g, "step", st->step);
    jsonw_kint(g, "begin_event", st->begin_seq);
    jsonw_kint(g, "end_event", st->end_seq);
    jsonw_kbool(g, "complete", st->complete);
    jsonw_kdouble(g, "predicted_s", secs(st->end_ns - st->start_ns));
    jsonw_str(g, "recorded_s");
    if (st->recorded_ns >= 0) jsonw_double(g, secs(st->recorded_ns));
    else jsonw_null(g);
    breakdown_json(g, "breakdown_s", st->breakdown);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

static void critical_path_json(yajl_gen g, const replay_names *names, const sim_tm_result *t) {
  jsonw_str(g, "critical_path");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < t->nitems; i++) {
    const sim_tm_item *it = &t->items[i];
    char label[400];
    report_time_item_label(names, it, label, sizeof label);
    yajl_gen_map_open(g);
    jsonw_kstr(g, "class", sim_tm_class_name(it->cls));
    jsonw_kstr(g, "what", sim_tm_what_name(it->what));
    jsonw_kstr(g, "item", label);
    jsonw_kdouble(g, "total_s", secs(it->total_ns));
    jsonw_kint(g, "count", it->count);
    jsonw_kdouble(g, "largest_s", secs(it->max_ns));
    jsonw_kint(g, "largest_event", it->max_seq);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

/* The copies by kind and size: recorded and predicted times, and the error of the prediction. */
static void time_copies_json(yajl_gen g, const sim_tm_result *t) {
  jsonw_str(g, "copies");
  yajl_gen_array_open(g);
  for (int b = 0; b < SIM_TM__NCB; b++)
    for (int large = 0; large < 2; large++) {
      const sim_tm_copy_stats *cs = &t->copies[b][large];
      if (!cs->n) continue;
      yajl_gen_map_open(g);
      jsonw_kstr(g, "kind", sim_tm_copy_bucket_name(b));
      jsonw_kstr(g, "size", large ? "at least 1 MiB" : "below 1 MiB");
      jsonw_kuint(g, "count", cs->n);
      jsonw_kuint(g, "bytes", cs->bytes);
      jsonw_kdouble(g, "recorded_s", secs(cs->recorded_ns));
      jsonw_kdouble(g, "predicted_s", secs(cs->predicted_ns));
      jsonw_kdouble(g, "total_error", cs->recorded_ns ? (double)(cs->predicted_ns - cs->recorded_ns) / (double)cs->recorded_ns : 0);
      jsonw_kdouble(g, "mean_abs_error", cs->abs_rel_err_sum / (double)cs->n);
      yajl_gen_map_close(g);
    }
  yajl_gen_array_close(g);
}

/* Kernels scaled to another device: the ratios assumed, the kernels by bound, and the range. */
static void time_scaling_json(yajl_gen g, const sim_tm_config *c, const sim_tm_result *t) {
  if (!t->device_scaled) return;
  jsonw_str(g, "device_scaling");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "recorded_device", c && c->recorded_device ? c->recorded_device->name : NULL);
  jsonw_str(g, "bounds");
  yajl_gen_array_open(g);
  for (int b = 0; b < SIM_TM__NKB; b++) {
    yajl_gen_map_open(g);
    jsonw_kstr(g, "bound", sim_tm_bound_name(b));
    jsonw_kdouble(g, "ratio", t->bound_ratio[b]);
    jsonw_kuint(g, "kernels", t->bound_kernels[b]);
    jsonw_kdouble(g, "recorded_s", secs(t->bound_recorded_ns[b]));
    jsonw_kdouble(g, "predicted_s", secs(t->bound_predicted_ns[b]));
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  if (t->has_range) {
    jsonw_str(g, "range");
    yajl_gen_map_open(g);
    jsonw_kdouble(g, "fastest_total_s", secs(t->range_total_ns[0]));
    jsonw_kdouble(g, "slowest_total_s", secs(t->range_total_ns[1]));
    jsonw_kdouble(g, "fastest_step_time_s", t->range_step_time_s[0]);
    jsonw_kdouble(g, "slowest_step_time_s", t->range_step_time_s[1]);
    yajl_gen_map_close(g);
  }
  yajl_gen_map_close(g);
}

/* Copy times fitted from the trace's own copies: each class's latency, bandwidth and residual. */
static void time_copy_fit_json(yajl_gen g, const sim_tm_result *t) {
  if (!t->copies_fitted || !t->copy_fit) return;
  jsonw_str(g, "copy_fit");
  yajl_gen_array_open(g);
  for (int b = 0; b < SIM_TM__NCB; b++)
    for (int large = 0; large < 2; large++) {
      const sim_copy_fit_class *fc = &t->copy_fit->c[b][large];
      if (!fc->valid) continue;
      yajl_gen_map_open(g);
      jsonw_kstr(g, "kind", sim_tm_copy_bucket_name(b));
      jsonw_kstr(g, "size", large ? "at least 1 MiB" : "below 1 MiB");
      jsonw_kuint(g, "count", fc->n);
      jsonw_kstr(g, "rule", sim_copy_fit_rule_name(fc->rule));
      jsonw_kdouble(g, "latency_s", fc->latency_ns / 1e9);
      jsonw_kdouble(g, "bandwidth_bytes_per_s", fc->bw);
      jsonw_kdouble(g, "rms_residual_s", fc->rms_resid_ns / 1e9);
      jsonw_kdouble(g, "mean_recorded_s", fc->mean_dur_ns / 1e9);
      yajl_gen_map_close(g);
    }
  yajl_gen_array_close(g);
}

/* What the range's ends are in words: all compute-bound and all memory-bound when every compute
 * ratio is below the memory one (the target's compute relatively faster), else each kernel's. */
static const char *range_reading(const sim_tm_result *r) {
  for (int b = SIM_TM_KB_COMPUTE16; b <= SIM_TM_KB_FP32; b++)
    if (r->bound_ratio[b] > r->bound_ratio[SIM_TM_KB_MEMORY])
      return "each kernel at the faster, then the slower, of its compute and memory bounds";
  return "all compute-bound to all memory-bound";
}

void report_time_scaling_text(FILE *f, const sim_tm_config *c, const sim_tm_result *r) {
  if (r->device_scaled) {
    fprintf(f, "  kernels scaled      from %s by what bounds each (recorded / target rate):\n",
            c && c->recorded_device ? c->recorded_device->name : "the recorded device");
    for (int b = 0; b < SIM_TM__NKB; b++)
      if (r->bound_kernels[b])
        fprintf(f, "    %-22s x%-6.3g %8llu kernels, %.3f ms recorded -> %.3f ms\n", sim_tm_bound_name(b),
                r->bound_ratio[b], (unsigned long long)r->bound_kernels[b], secs(r->bound_recorded_ns[b]) * 1e3,
                secs(r->bound_predicted_ns[b]) * 1e3);
    if (r->has_range && r->complete_steps)
      fprintf(f, "  range               step %.3f to %.3f ms (%s)\n", r->range_step_time_s[0] * 1e3,
              r->range_step_time_s[1] * 1e3, range_reading(r));
    else if (r->has_range)
      fprintf(f, "  range               %.3f to %.3f ms in total (%s)\n", secs(r->range_total_ns[0]) * 1e3,
              secs(r->range_total_ns[1]) * 1e3, range_reading(r));
  }
  if (r->copies_fitted && r->copy_fit) {
    fprintf(f, "  copies fitted       from the trace's own copies (latency + bytes / bandwidth, least squares):\n");
    for (int b = 0; b < SIM_TM__NCB; b++)
      for (int large = 0; large < 2; large++) {
        const sim_copy_fit_class *fc = &r->copy_fit->c[b][large];
        if (!fc->valid) continue;
        if (fc->rule == SIM_COPY_FIT_DERIVED)
          fprintf(f, "    %-13s %-5s  no copies: %7.2f us + %8.2f GB/s (%s)\n", sim_tm_copy_bucket_name(b),
                  large ? ">=1M" : "<1M", fc->latency_ns / 1e3, fc->bw / 1e9, sim_copy_fit_rule_name(fc->rule));
        else
          fprintf(f, "    %-13s %-5s %5llu copies: %7.2f us + %8.2f GB/s (%s), rms residual %.2f us of %.2f us mean\n",
                  sim_tm_copy_bucket_name(b), large ? ">=1M" : "<1M", (unsigned long long)fc->n, fc->latency_ns / 1e3,
                  fc->bw / 1e9, sim_copy_fit_rule_name(fc->rule), fc->rms_resid_ns / 1e3, fc->mean_dur_ns / 1e3);
      }
  }
}

static void time_counts_json(yajl_gen g, const sim_tm_result *t) {
  jsonw_str(g, "counts");
  yajl_gen_map_open(g);
  jsonw_kuint(g, "kernels", t->kernels);
  jsonw_kuint(g, "kernels_without_duration", t->ops_without_duration);
  jsonw_kuint(g, "memsets", t->memsets);
  jsonw_kuint(g, "copies", t->copies_n);
  jsonw_kuint(g, "syncs", t->syncs);
  jsonw_kuint(g, "host_pins", t->host_pins);
  jsonw_kuint(g, "inferred_dependencies", t->inferred_dependencies);
  jsonw_kuint(g, "device_waits", t->device_waits);
  jsonw_kdouble(g, "device_wait_s", secs(t->device_wait_ns));
  jsonw_kuint(g, "launch_queue_blocks", t->launch_blocks);
  yajl_gen_map_close(g);
}

static void time_json(yajl_gen g, const replay_names *names, const run_meta *m) {
  const sim_tm_result *t = m->time;
  jsonw_str(g, "time");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "device_source", m->device_source);
  jsonw_kstr(g, "device_chosen_by", m->device_reason);
  if (m->time_config) time_assumptions_json(g, m->time_config);
  time_totals_json(g, t);
  time_steps_json(g, t);
  critical_path_json(g, names, t);
  time_copies_json(g, t);
  time_copy_fit_json(g, t);
  time_scaling_json(g, m->time_config, t);
  time_counts_json(g, t);
  yajl_gen_map_close(g);
}

/* The run's settings, counts, peaks and final totals. */
static void summary_json(yajl_gen g, const run_meta *m, const replay_result *r) {
  jsonw_kstr(g, "trace", m->trace_name);
  if (m->trace_id > 0) jsonw_kint(g, "trace_id", m->trace_id);
  jsonw_kstr(g, "allocator", m->allocator);
  jsonw_kstr(g, "backend", m->backend ? m->backend : "sim");
  jsonw_kstr(g, "device", m->device);
  jsonw_str(g, "capacity_bytes");
  if (m->capacity == UINT64_MAX) jsonw_null(g);
  else jsonw_uint(g, m->capacity);
  if (m->capacity_source) jsonw_kstr(g, "capacity_source", m->capacity_source);
  if (m->capacity_source && !strcmp(m->capacity_source, "device")) {
    jsonw_kuint(g, "card_bytes", m->card_bytes);
    jsonw_kuint(g, "context_bytes", m->context_bytes);
  }
  if (m->nenv) {
    jsonw_str(g, "environment");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < m->nenv; i++) {
      const char *eq = strchr(m->env[i], '=');
      yajl_gen_string(g, (const unsigned char *)m->env[i], (size_t)(eq - m->env[i]));
      jsonw_str(g, eq + 1);
    }
    yajl_gen_map_close(g);
  }
  if (m->note) jsonw_kstr(g, "note", m->note);
  if (m->address_order) {
    jsonw_kstr(g, "address_order", m->address_order);
    jsonw_kstr(g, "address_order_source", m->address_source);
  }
  jsonw_kuint(g, "events", r->events);
  jsonw_kuint(g, "allocs", r->allocs);
  jsonw_kuint(g, "frees", r->frees);
  jsonw_kint(g, "peak_allocated_bytes", r->peak_allocated);
  jsonw_kint(g, "peak_reserved_bytes", r->peak_reserved);
  jsonw_kint(g, "peak_requested_bytes", r->peak_requested);
  jsonw_kint(g, "peak_active_bytes", r->peak_active);
  jsonw_kint(g, "peak_allocated_event", r->peak_allocated_seq);
  jsonw_kint(g, "peak_reserved_event", r->peak_reserved_seq);
  jsonw_kint(g, "final_allocated_bytes", r->final_allocated);
  jsonw_kint(g, "final_reserved_bytes", r->final_reserved);
  jsonw_kdouble(g, "fragmentation", r->fragmentation);
  jsonw_kdouble(g, "fragmentation_gmlake", r->fragmentation_gmlake);
  jsonw_kuint(g, "device_mallocs", r->device_mallocs);
  jsonw_kuint(g, "device_frees", r->device_frees);
  jsonw_kuint(g, "device_maps", r->device_maps);
  jsonw_kuint(g, "device_unmaps", r->device_unmaps);
  jsonw_kuint(g, "ooms", r->ooms);
  jsonw_kbool(g, "stopped_at_oom", r->stopped_at_oom);
  if (m->window_start) { /* a recorded window: how its start was taken */
    jsonw_str(g, "window_start");
    yajl_gen_map_open(g);
    jsonw_kstr(g, "state", m->window_start);
    jsonw_kuint(g, "segments", m->window_segments);
    jsonw_kuint(g, "blocks", m->window_blocks);
    jsonw_kstr(g, "assumption", m->window_note);
    yajl_gen_map_close(g);
  }
  if (m->step_time_s >= 0) jsonw_kdouble(g, "step_time_s", m->step_time_s);
  if (m->samples_per_s >= 0) jsonw_kdouble(g, "samples_per_s", m->samples_per_s);
}

/* Live memory at the peak of allocated bytes: by category, by how the category was found, by call
 * site (a lean replay kept none of them: its event, time and totals only). */
static void at_peak_json(yajl_gen g, const replay_names *names, const replay_result *r) {
  jsonw_str(g, "at_peak");
  yajl_gen_map_open(g);
  jsonw_kint(g, "event", r->peak_allocated_seq);
  jsonw_kint(g, "ts", r->peak_ts);
  jsonw_kint(g, "allocated_bytes", r->peak_allocated);
  jsonw_kint(g, "reserved_bytes", r->at_peak_reserved);
  if (r->lean) {
    yajl_gen_map_close(g);
    return;
  }
  jsonw_kuint(g, "largest_free_block_bytes", r->at_peak_largest_free);
  jsonw_str(g, "by_category");
  yajl_gen_map_open(g);
  for (int c = 0; c < SIM_CAT__COUNT; c++)
    if (r->category_bytes[c] || r->category_count[c]) jsonw_kint(g, sim_category_name(c), r->category_bytes[c]);
  yajl_gen_map_close(g);
  jsonw_str(g, "by_method");
  yajl_gen_map_open(g);
  for (int c = 0; c < SIM_CATSRC__COUNT; c++)
    if (r->catsrc_bytes[c]) jsonw_kint(g, sim_cat_source_name(c), r->catsrc_bytes[c]);
  yajl_gen_map_close(g);
  jsonw_str(g, "top_sites");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->nsites; i++) {
    yajl_gen_map_open(g);
    jsonw_kint(g, "stack_id", r->sites[i].stack);
    char *label = replay_stack_label(names, r->sites[i].stack);
    jsonw_kstr(g, "site", label);
    free(label);
    jsonw_kint(g, "bytes", r->sites[i].bytes);
    jsonw_kint(g, "count", r->sites[i].count);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
}

static void oom_list_json(yajl_gen g, const replay_result *r) {
  jsonw_str(g, "oom_list");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->noom_list; i++) {
    const replay_oom *o = &r->oom_list[i];
    yajl_gen_map_open(g);
    jsonw_kint(g, "event", o->seq);
    jsonw_kint(g, "device", o->device);
    jsonw_kint(g, "stream", o->stream);
    jsonw_kuint(g, "size_bytes", o->size);
    jsonw_kint(g, "allocated_bytes", o->allocated);
    jsonw_kint(g, "reserved_bytes", o->reserved);
    jsonw_kuint(g, "largest_free_block_bytes", o->largest_free);
    jsonw_kstr(g, "message", o->message);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

/* Host memory peaks, and the events the replay skipped. */
static void host_and_skipped_json(yajl_gen g, const replay_result *r) {
  jsonw_kint(g, "host_pinned_peak_bytes", r->host_pinned_peak);
  jsonw_kint(g, "host_pageable_peak_bytes", r->host_pageable_peak);
  jsonw_str(g, "skipped");
  yajl_gen_map_open(g);
  jsonw_kuint(g, "unknown_frees", r->unknown_frees);
  jsonw_kuint(g, "dropped_frees", r->dropped_frees);
  jsonw_kuint(g, "duplicate_allocs", r->duplicate_allocs);
  yajl_gen_map_close(g);
}

static void devices_json(yajl_gen g, const replay_result *r) {
  jsonw_str(g, "devices");
  yajl_gen_array_open(g);
  for (int i = 0; i < r->ndevices; i++) {
    const replay_device_result *d = &r->devices[i];
    yajl_gen_map_open(g);
    jsonw_kint(g, "device", d->device);
    jsonw_kint(g, "peak_allocated_bytes", d->peak_allocated);
    jsonw_kint(g, "peak_reserved_bytes", d->peak_reserved);
    jsonw_kint(g, "peak_requested_bytes", d->peak_requested);
    jsonw_kuint(g, "device_mallocs", d->device_mallocs);
    jsonw_kuint(g, "device_frees", d->device_frees);
    jsonw_kuint(g, "ooms", d->ooms);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

static void timeline_json(yajl_gen g, const replay_result *r) {
  jsonw_str(g, "timeline");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < r->ntimeline; i++) {
    const replay_point *p = &r->timeline[i];
    yajl_gen_map_open(g);
    jsonw_kint(g, "event", p->seq);
    jsonw_kint(g, "ts", p->ts);
    jsonw_kint(g, "allocated_bytes", p->allocated);
    jsonw_kint(g, "reserved_bytes", p->reserved);
    jsonw_kint(g, "requested_bytes", p->requested);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

void report_json(yajl_gen g, const replay_names *names, const run_meta *m, const replay_result *r, int timeline) {
  summary_json(g, m, r);
  at_peak_json(g, names, r);
  oom_list_json(g, r);
  host_and_skipped_json(g, r);
  devices_json(g, r);
  jsonw_kuint(g, "timeline_points", r->ntimeline);
  if (r->lean) jsonw_kbool(g, "lean", 1);
  else if (timeline) timeline_json(g, r);
  if (m->time) time_json(g, names, m);
  jsonw_kdouble(g, "elapsed_s", r->elapsed_s);
}

const char *report_bytes(char *buf, size_t n, int64_t v) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  /* The magnitude as unsigned: -INT64_MIN does not fit an int64. */
  uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  double x = (double)mag;
  int u = 0;
  while (x >= 1024 && u < 6) {
    x /= 1024;
    u++;
  }
  if (u == 0) snprintf(buf, n, "%s%llu B", v < 0 ? "-" : "", (unsigned long long)mag);
  else snprintf(buf, n, "%s%.2f %s", v < 0 ? "-" : "", x, units[u]);
  return buf;
}

/* A size in decimal units, as spec sheets write them: "24.00 GB". */
static const char *report_bytes_si(char *buf, size_t n, uint64_t v) {
  static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double x = (double)v;
  int u = 0;
  while (x >= 1000 && u < 5) {
    x /= 1000;
    u++;
  }
  snprintf(buf, n, "%.2f %s", x, units[u]);
  return buf;
}

const char *report_capacity(char *buf, size_t n, const run_meta *m) {
  if (m->capacity == UINT64_MAX) {
    snprintf(buf, n, "unlimited (no capacity or device given)");
    return buf;
  }
  char bin[112], si[48], card[48], ctx[48];
  report_bytes(bin, sizeof bin, (int64_t)m->capacity);
  if (m->capacity >= 1000) {
    size_t len = strlen(bin);
    snprintf(bin + len, sizeof bin - len, " (%s)", report_bytes_si(si, sizeof si, m->capacity));
  }
  const char *src = m->capacity_source ? m->capacity_source : "option";
  if (!strcmp(src, "device"))
    snprintf(buf, n, "%s: %s's %s less %s for the CUDA context (context_bytes)", bin, m->device ? m->device : "the device",
             report_bytes(card, sizeof card, (int64_t)m->card_bytes),
             report_bytes(ctx, sizeof ctx, (int64_t)m->context_bytes));
  else if (!strcmp(src, "memory_limit"))
    snprintf(buf, n, "%s: the allocator's memory_limit (no capacity or device given)", bin);
  else snprintf(buf, n, "%s, as given", bin);
  return buf;
}

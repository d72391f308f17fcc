/* cmd_info.c: `memplay info TRACE`: what a trace holds, and what is live at its peak, by category. */
#include <stdlib.h>
#include <string.h>

#include "import/importer.h"
#include "io/jsonw.h"
#include "session/session.h"
#include "cli.h"

static const char *const info_usage[] = {
  "memplay info TRACE [--db FILE] [--json]",
  NULL,
};
const cli_usage cmd_info_usage = {
  .summary = "describe a trace: metadata, events by kind, devices, streams, memory by category",
  .lines = info_usage,
};

static const struct option info_options[] = {CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};

/* What is live at the peak of requested bytes: the trace replayed through `ideal`. */
static int replay_ideal(store *s, const store_trace *t, replay_result *res) {
  char err[1024];
  session *ses = session_new(s);
  session_request req;
  session_request_init(&req);
  req.trace = t;
  req.allocator = "ideal";
  req.no_device = 1;
  req.top_sites = 5;
  session_run run;
  int rc = session_prepare(ses, &req, &run, err, sizeof err);
  if (!rc) rc = session_execute(ses, &run, NULL, err, sizeof err);
  int executed = run.executed;
  session_take_result(&run, res);
  session_run_release(&run);
  session_free(ses);
  if (rc) {
    if (executed) cli_error("cannot replay '%s': %s", t->name, err);
    else cli_error("%s", err);
    return -1;
  }
  return 0;
}

/* What the trace's format never records (IMPORT_LACKS_*). */
static unsigned info_lacks(const store_trace *t) {
  const importer *imp = t->source_format ? importer_find(t->source_format) : NULL;
  return imp ? imp->lacks : 0;
}

/* An import note as info shows it: "name (severity)". Caller frees. */
static char *note_label(const store_note *n) {
  size_t len = strlen(n->name) + strlen(n->severity) + 4;
  char *label = malloc(len);
  snprintf(label, len, "%s (%s)", n->name, n->severity);
  return label;
}

static void jsonw_knull_(yajl_gen g, const char *key) {
  jsonw_str(g, key);
  jsonw_null(g);
}

static void json_trace(yajl_gen g, const store_trace *t) {
  jsonw_kstr(g, "name", t->name);
  jsonw_kint(g, "id", t->id);
  jsonw_kint(g, "events", t->event_count);
  jsonw_kstr(g, "source_format", t->source_format);
  jsonw_kstr(g, "source_file", t->source_file);
  jsonw_kstr(g, "device_name", t->device_name);
  if (t->device_memory) jsonw_kint(g, "device_memory_bytes", t->device_memory);
  jsonw_kstr(g, "framework", t->framework);
  jsonw_kstr(g, "allocator", t->allocator);
  if (t->allocator_settings) jsonw_kraw(g, "allocator_settings", t->allocator_settings);
  if (t->batch_size) jsonw_kint(g, "batch_size", t->batch_size);
  jsonw_kstr(g, "imported_at", t->imported_at); /* the source's own time (kept across exports) */
  jsonw_kstr(g, "stored_at", t->stored_at);     /* when it came into this store */
  if (t->attrs) jsonw_kraw(g, "attrs", t->attrs);
  jsonw_kint(g, "duration_ns", t->event_count ? sim_ns_between(t->first_ts, t->last_ts) : 0);
}

/* key: {name: count, ...} */
static void json_counts(yajl_gen g, const char *key, const store_tally *v, size_t n) {
  jsonw_str(g, key);
  yajl_gen_map_open(g);
  for (size_t i = 0; i < n; i++) jsonw_kint(g, v[i].name, v[i].count);
  yajl_gen_map_close(g);
}

/* key: {name: {"count": count, "bytes": bytes}, ...} */
static void json_counts_bytes(yajl_gen g, const char *key, const store_tally *v, size_t n) {
  jsonw_str(g, key);
  yajl_gen_map_open(g);
  for (size_t i = 0; i < n; i++) {
    jsonw_str(g, v[i].name);
    yajl_gen_map_open(g);
    jsonw_kint(g, "count", v[i].count);
    jsonw_kint(g, "bytes", v[i].bytes);
    yajl_gen_map_close(g);
  }
  yajl_gen_map_close(g);
}

static void json_numbers(yajl_gen g, const char *key, const int64_t *v, size_t n) {
  jsonw_str(g, key);
  yajl_gen_array_open(g);
  for (size_t i = 0; i < n; i++) jsonw_int(g, v[i]);
  yajl_gen_array_close(g);
}

static void json_at_peak(yajl_gen g, const replay_result *res) {
  jsonw_kint(g, "peak_live_bytes", res->peak_requested);
  jsonw_kint(g, "peak_live_event", res->peak_allocated_seq);
  if (res->ooms) jsonw_kbool(g, "peak_live_at_least", 1); /* past a simulated device's bound */
  jsonw_str(g, "at_peak_by_category");
  yajl_gen_map_open(g);
  for (int k = 0; k < SIM_CAT__COUNT; k++)
    if (res->category_bytes[k]) jsonw_kint(g, sim_category_name(k), res->category_bytes[k]);
  yajl_gen_map_close(g);
  jsonw_str(g, "at_peak_by_method");
  yajl_gen_map_open(g);
  for (int k = 0; k < SIM_CATSRC__COUNT; k++)
    if (res->catsrc_bytes[k]) jsonw_kint(g, sim_cat_source_name(k), res->catsrc_bytes[k]);
  yajl_gen_map_close(g);
  jsonw_kint(g, "host_pinned_peak_bytes", res->host_pinned_peak);
  jsonw_kint(g, "host_pageable_peak_bytes", res->host_pageable_peak);
}

static void json_notes(yajl_gen g, const store_summary *sum) {
  jsonw_str(g, "notes");
  yajl_gen_map_open(g);
  for (size_t i = 0; i < sum->nnotes; i++) {
    char *label = note_label(&sum->notes[i]);
    jsonw_kint(g, label, sum->notes[i].value);
    free(label);
  }
  yajl_gen_map_close(g);
}

static void print_json(const store_trace *t, const store_summary *sum, const replay_result *res) {
  yajl_gen g = jsonw_file(stdout, 0);
  yajl_gen_map_open(g);
  json_trace(g, t);
  json_counts(g, "events_by_kind", sum->kinds, sum->nkinds);
  unsigned lacks = info_lacks(t);
  if (lacks & IMPORT_LACKS_DEVICE) jsonw_knull_(g, "devices"); /* not recorded */
  else json_numbers(g, "devices", sum->devices, sum->ndevices);
  if (lacks & IMPORT_LACKS_STREAM) jsonw_knull_(g, "streams");
  else json_numbers(g, "streams", sum->streams, sum->nstreams);
  json_counts(g, "recorded_actions", sum->recorded, sum->nrecorded);
  json_counts_bytes(g, "allocations_by_category", sum->categories, sum->ncategories);
  json_counts_bytes(g, "allocations_by_method", sum->cat_sources, sum->ncat_sources);
  json_at_peak(g, res);
  json_notes(g, sum);
  yajl_gen_map_close(g);
  yajl_gen_free(g);
  putchar('\n');
}

/* A sum of bytes over a trace's events: one that stopped at INT64_MAX (sim_bytes_sum) is at least that. */
static const char *sum_text(char *buf, size_t n, int64_t v) {
  char b[48];
  if (v < INT64_MAX) return report_bytes(buf, n, v);
  snprintf(buf, n, "at least %s", report_bytes(b, sizeof b, v));
  return buf;
}

/* The trace's own fields: name, source, device, allocator, events over time. */
static void print_trace(const store_trace *t) {
  char a[48], b[48];
  printf("trace        %s (id %lld)\n", t->name, (long long)t->id);
  printf("source       %s%s%s\n", t->source_format, t->source_file ? " from " : "",
         t->source_file ? t->source_file : "");
  /* the writer takes the import time when the file gives none: the two are then the same */
  if (t->stored_at && t->imported_at && !strcmp(t->imported_at, t->stored_at))
    printf("recorded     not recorded (the file gives no time)\n");
  else printf("recorded     %s (the time the file gives)\n", t->imported_at);
  printf("imported     %s (into this store)\n", t->stored_at ? t->stored_at : "not recorded (an older store)");
  if (t->device_name || t->device_memory)
    printf("device       %s%s%s\n", t->device_name ? t->device_name : "unknown", t->device_memory ? ", " : "",
           t->device_memory ? report_bytes(a, sizeof a, t->device_memory) : "");
  if (t->framework || t->allocator)
    printf("recorded by  %s%s%s allocator\n", t->framework ? t->framework : "", t->framework ? ", " : "",
           t->allocator ? t->allocator : "unknown");
  if (t->allocator_settings) printf("settings     %s\n", t->allocator_settings);
  if (t->batch_size) printf("batch size   %lld\n", (long long)t->batch_size);
  int64_t duration = t->event_count ? sim_ns_between(t->first_ts, t->last_ts) : 0;
  printf("events       %s over %s\n", cli_count(a, sizeof a, (uint64_t)t->event_count),
         cli_duration(b, sizeof b, (double)duration / 1e9));
}

/* Events by kind, devices, streams, recorded actions, allocations by category and how they were decided. */
static void print_contents(const store_trace *t, const store_summary *sum) {
  char a[48], b[48];
  for (size_t i = 0; i < sum->nkinds; i++)
    printf("  %-16s %12s\n", sum->kinds[i].name, cli_count(a, sizeof a, (uint64_t)sum->kinds[i].count));
  unsigned lacks = info_lacks(t);
  printf("devices     ");
  if (lacks & IMPORT_LACKS_DEVICE) printf(" not recorded (a %s file names none)", t->source_format);
  for (size_t i = 0; !(lacks & IMPORT_LACKS_DEVICE) && i < sum->ndevices; i++)
    printf(" %lld", (long long)sum->devices[i]);
  printf("\nstreams     ");
  if (lacks & IMPORT_LACKS_STREAM) printf(" not recorded (a %s file names none)", t->source_format);
  for (size_t i = 0; !(lacks & IMPORT_LACKS_STREAM) && i < sum->nstreams; i++)
    printf(" %lld", (long long)sum->streams[i]);
  printf("\n");
  if (sum->nrecorded) {
    printf("recorded allocator actions\n");
    for (size_t i = 0; i < sum->nrecorded; i++)
      printf("  %-16s %12s\n", sum->recorded[i].name, cli_count(a, sizeof a, (uint64_t)sum->recorded[i].count));
  }
  if (sum->ncategories) {
    printf("allocations by category (device and host, over the whole trace)\n");
    for (size_t i = 0; i < sum->ncategories; i++) {
      const store_tally *k = &sum->categories[i];
      printf("  %-16s %12s  %12s\n", k->name, cli_count(a, sizeof a, (uint64_t)k->count), sum_text(b, sizeof b, k->bytes));
    }
    printf("how the categories were decided (allocations)\n");
    for (size_t i = 0; i < sum->ncat_sources; i++) {
      const store_tally *m = &sum->cat_sources[i];
      printf("  %-16s %12s  %12s\n", !strcmp(m->name, "none") ? "undecided" : m->name,
             cli_count(a, sizeof a, (uint64_t)m->count), sum_text(b, sizeof b, m->bytes));
    }
  }
}

static void print_at_peak(const replay_result *res) {
  char a[48], b[48];
  printf("peak live    %s%s at event %lld", res->ooms ? "at least " : "", report_bytes(a, sizeof a, res->peak_requested),
         (long long)res->peak_allocated_seq);
  /* ideal OOMs only where a simulated device's bound stops it: the trace holds more live */
  printf(res->ooms ? " (then more than a simulated device holds: %s)\n" : "\n",
         report_bytes(b, sizeof b, (int64_t)SIM_SIZE_MAX));
  printf("live at the peak, by category\n");
  for (int k = 0; k < SIM_CAT__COUNT; k++)
    if (res->category_bytes[k])
      printf("  %-16s %12s  %5.1f%%\n", sim_category_name(k), report_bytes(a, sizeof a, res->category_bytes[k]),
             res->peak_requested ? 100.0 * (double)res->category_bytes[k] / (double)res->peak_requested : 0);
  printf("how the categories were decided (bytes at the peak)\n");
  for (int k = 0; k < SIM_CATSRC__COUNT; k++)
    if (res->catsrc_bytes[k])
      printf("  %-16s %12s  %5.1f%%\n", k == SIM_CATSRC_NONE ? "undecided" : sim_cat_source_name(k),
             report_bytes(a, sizeof a, res->catsrc_bytes[k]),
             res->peak_requested ? 100.0 * (double)res->catsrc_bytes[k] / (double)res->peak_requested : 0);
  if (res->host_pinned_peak || res->host_pageable_peak)
    printf("host memory  pinned peak %s, pageable peak %s\n", report_bytes(a, sizeof a, res->host_pinned_peak),
           report_bytes(b, sizeof b, res->host_pageable_peak));
}

static void print_notes(const store_summary *sum) {
  if (!sum->nnotes) return;
  printf("import notes\n");
  for (size_t i = 0; i < sum->nnotes; i++) {
    char *label = note_label(&sum->notes[i]);
    printf("  %-40s %lld\n", label, (long long)sum->notes[i].value);
    free(label);
  }
}

int cmd_info(int argc, char **argv, cli *c) {
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", info_options)) != -1)
    if (cli_common_option(c, "info", opt, &code) < 0) return code;
  if (optind + 1 != argc) return cli_usage_error("info", optind >= argc ? "no TRACE given" : "info takes one TRACE");
  store_trace t;
  store *s = cli_open_trace(c, argv[optind], &t);
  if (!s) return CLI_FAIL;
  store_summary sum;
  replay_result res;
  memset(&res, 0, sizeof res);
  if (store_summary_read(s, t.id, &sum)) {
    cli_error("%s", store_error(s));
    code = CLI_FAIL;
  } else if (replay_ideal(s, &t, &res)) {
    code = CLI_FAIL;
  } else if (c->json) {
    print_json(&t, &sum, &res);
  } else {
    print_trace(&t);
    print_contents(&t, &sum);
    print_at_peak(&res);
    print_notes(&sum);
  }
  replay_result_release(&res);
  store_summary_clear(&sum);
  store_trace_clear(&t);
  store_close(s);
  return code;
}

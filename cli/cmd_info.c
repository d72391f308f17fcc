/* cmd_info.c: `memplay info TRACE`: what a trace holds, and what is live at its peak, by category. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "io/jsonw.h"
#include "store/store_source.h"
#include "cli.h"

static const char *const info_usage[] = {
  "memplay info TRACE [--db FILE] [--json]",
  NULL,
};
const cli_usage cmd_info_usage = {
  .summary = "describe a trace: metadata, events by kind, devices, streams, memory by category",
  .lines = info_usage,
};

typedef struct kv {
  char *key;
  int64_t a, b;
} kv;

static int query_pairs(store *s, const char *sql, int64_t trace_id, kv **out, size_t *n) {
  sqlite3_stmt *q;
  *out = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL) != SQLITE_OK) return store_fail(s, NULL, "cannot read trace");
  sqlite3_bind_int64(q, 1, trace_id);
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      *out = realloc(*out, cap * sizeof **out);
    }
    const char *k = (const char *)sqlite3_column_text(q, 0);
    (*out)[(*n)++] = (kv){strdup(k ? k : ""), sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2)};
  }
  sqlite3_finalize(q);
  return rc == SQLITE_DONE ? 0 : store_fail(s, NULL, "cannot read trace");
}

static void free_pairs(kv *p, size_t n) {
  for (size_t i = 0; i < n; i++) free(p[i].key);
  free(p);
}

int cmd_info(int argc, char **argv, cli *c) {
  static const struct option opts[] = {CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};
  int opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", opts)) != -1)
    if (cli_common_option(c, "info", opt, &code) < 0) return code;
  if (optind + 1 != argc) return cli_usage_error("info", optind >= argc ? "no TRACE given" : "info takes one TRACE");
  store_trace t;
  store *s = cli_open_trace(c, argv[optind], &t);
  if (!s) return CLI_FAIL;
  kv *kinds = NULL, *devs = NULL, *streams = NULL, *rec = NULL, *cats = NULL, *notes = NULL, *methods = NULL;
  size_t nk = 0, nd = 0, ns = 0, nr = 0, nc = 0, nn = 0, nm = 0;
  replay_result res;
  memset(&res, 0, sizeof res);
  if (query_pairs(s,
                  "SELECT k.name, count(*), 0 FROM events e JOIN event_kinds k ON k.id = e.kind "
                  "WHERE e.id BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 GROUP BY e.kind ORDER BY e.kind",
                  t.id, &kinds, &nk) ||
      query_pairs(s, "SELECT device, count(*), 0 FROM events WHERE id BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 "
                  "GROUP BY device ORDER BY device", t.id,
                  &devs, &nd) ||
      query_pairs(s,
                  "SELECT coalesce(stream, 0), count(*), 0 FROM events WHERE id BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 "
                  "AND kind IN (1,5,6,7) "
                  "GROUP BY stream ORDER BY stream",
                  t.id, &streams, &ns) ||
      query_pairs(s, "SELECT action, count(*), sum(size) FROM recorded WHERE trace_id = ?1 GROUP BY action ORDER BY action",
                  t.id, &rec, &nr) ||
      query_pairs(s,
                  "SELECT c.name, count(*), sum(e.size) FROM events e JOIN categories c ON c.id = e.category "
                  "WHERE e.id BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 AND e.kind IN (1, 10) GROUP BY e.category "
                  "ORDER BY e.category",
                  t.id, &cats, &nc) ||
      query_pairs(s,
                  "SELECT c.name, count(*), sum(e.size) FROM events e JOIN cat_sources c ON c.id = e.cat_source "
                  "WHERE e.id BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 AND e.kind IN (1, 10) GROUP BY e.cat_source "
                  "ORDER BY e.cat_source",
                  t.id, &methods, &nm) ||
      query_pairs(s, "SELECT name || ' (' || severity || ')', value, 0 FROM trace_stats WHERE trace_id = ?1 ORDER BY name",
                  t.id, &notes, &nn)) {
    cli_error("%s", store_error(s));
    code = CLI_FAIL;
    goto out;
  }
  /* Live memory at the peak of requested bytes: an `ideal` replay. */
  sim_spec spec;
  char err[1024];
  sim_spec_parse(&spec, "ideal", err, sizeof err);
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX, .top_sites = 5};
  replay_source src;
  if (store_source_open(&src, s, t.id)) {
    cli_error("%s", store_error(s));
    sim_spec_release(&spec);
    code = CLI_FAIL;
    goto out;
  }
  int rrc = replay_run(&cfg, &src, &res, err, sizeof err);
  replay_source_close(&src);
  sim_spec_release(&spec);
  if (rrc) {
    cli_error("cannot replay '%s': %s", t.name, err);
    code = CLI_FAIL;
    goto out;
  }
  int64_t duration = t.event_count ? t.last_ts - t.first_ts : 0;
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    yajl_gen_map_open(g);
    jsonw_kstr(g, "name", t.name);
    jsonw_kint(g, "id", t.id);
    jsonw_kint(g, "events", t.event_count);
    jsonw_kstr(g, "source_format", t.source_format);
    jsonw_kstr(g, "source_file", t.source_file);
    jsonw_kstr(g, "device_name", t.device_name);
    if (t.device_memory) jsonw_kint(g, "device_memory_bytes", t.device_memory);
    jsonw_kstr(g, "framework", t.framework);
    jsonw_kstr(g, "allocator", t.allocator);
    if (t.allocator_settings) jsonw_kraw(g, "allocator_settings", t.allocator_settings);
    if (t.batch_size) jsonw_kint(g, "batch_size", t.batch_size);
    jsonw_kstr(g, "imported_at", t.imported_at);
    if (t.attrs) jsonw_kraw(g, "attrs", t.attrs);
    jsonw_kint(g, "duration_ns", duration);
    jsonw_str(g, "events_by_kind");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < nk; i++) jsonw_kint(g, kinds[i].key, kinds[i].a);
    yajl_gen_map_close(g);
    jsonw_str(g, "devices");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < nd; i++) jsonw_int(g, strtoll(devs[i].key, NULL, 10));
    yajl_gen_array_close(g);
    jsonw_str(g, "streams");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < ns; i++) jsonw_int(g, strtoll(streams[i].key, NULL, 10));
    yajl_gen_array_close(g);
    jsonw_str(g, "recorded_actions");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < nr; i++) jsonw_kint(g, rec[i].key, rec[i].a);
    yajl_gen_map_close(g);
    jsonw_str(g, "allocations_by_category");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < nc; i++) {
      jsonw_str(g, cats[i].key);
      yajl_gen_map_open(g);
      jsonw_kint(g, "count", cats[i].a);
      jsonw_kint(g, "bytes", cats[i].b);
      yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    jsonw_str(g, "allocations_by_method");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < nm; i++) {
      jsonw_str(g, methods[i].key);
      yajl_gen_map_open(g);
      jsonw_kint(g, "count", methods[i].a);
      jsonw_kint(g, "bytes", methods[i].b);
      yajl_gen_map_close(g);
    }
    yajl_gen_map_close(g);
    jsonw_kint(g, "peak_live_bytes", res.peak_requested);
    jsonw_kint(g, "peak_live_event", res.peak_allocated_seq);
    jsonw_str(g, "at_peak_by_category");
    yajl_gen_map_open(g);
    for (int k = 0; k < SIM_CAT__COUNT; k++)
      if (res.category_bytes[k]) jsonw_kint(g, sim_category_name(k), res.category_bytes[k]);
    yajl_gen_map_close(g);
    jsonw_str(g, "at_peak_by_method");
    yajl_gen_map_open(g);
    for (int k = 0; k < SIM_CATSRC__COUNT; k++)
      if (res.catsrc_bytes[k]) jsonw_kint(g, sim_cat_source_name(k), res.catsrc_bytes[k]);
    yajl_gen_map_close(g);
    jsonw_kint(g, "host_pinned_peak_bytes", res.host_pinned_peak);
    jsonw_kint(g, "host_pageable_peak_bytes", res.host_pageable_peak);
    jsonw_str(g, "notes");
    yajl_gen_map_open(g);
    for (size_t i = 0; i < nn; i++) jsonw_kint(g, notes[i].key, notes[i].a);
    yajl_gen_map_close(g);
    yajl_gen_map_close(g);
    yajl_gen_free(g);
    putchar('\n');
  } else {
    char a[48], b[48];
    printf("trace        %s (id %lld)\n", t.name, (long long)t.id);
    printf("source       %s%s%s\n", t.source_format, t.source_file ? " from " : "", t.source_file ? t.source_file : "");
    printf("imported     %s\n", t.imported_at);
    if (t.device_name || t.device_memory)
      printf("device       %s%s%s\n", t.device_name ? t.device_name : "unknown", t.device_memory ? ", " : "",
             t.device_memory ? report_bytes(a, sizeof a, t.device_memory) : "");
    if (t.framework || t.allocator)
      printf("recorded by  %s%s%s allocator\n", t.framework ? t.framework : "", t.framework ? ", " : "",
             t.allocator ? t.allocator : "unknown");
    if (t.allocator_settings) printf("settings     %s\n", t.allocator_settings);
    if (t.batch_size) printf("batch size   %lld\n", (long long)t.batch_size);
    printf("events       %s over %s\n", cli_count(a, sizeof a, (uint64_t)t.event_count),
           cli_duration(b, sizeof b, (double)duration / 1e9));
    for (size_t i = 0; i < nk; i++) printf("  %-16s %12s\n", kinds[i].key, cli_count(a, sizeof a, (uint64_t)kinds[i].a));
    printf("devices     ");
    for (size_t i = 0; i < nd; i++) printf(" %s", devs[i].key);
    printf("\nstreams     ");
    for (size_t i = 0; i < ns; i++) printf(" %s", streams[i].key);
    printf("\n");
    if (nr) {
      printf("recorded allocator actions\n");
      for (size_t i = 0; i < nr; i++) printf("  %-16s %12s\n", rec[i].key, cli_count(a, sizeof a, (uint64_t)rec[i].a));
    }
    if (nc) {
      printf("allocations by category (device and host, over the whole trace)\n");
      for (size_t i = 0; i < nc; i++)
        printf("  %-16s %12s  %12s\n", cats[i].key, cli_count(a, sizeof a, (uint64_t)cats[i].a),
               report_bytes(b, sizeof b, cats[i].b));
      printf("how the categories were decided (allocations)\n");
      for (size_t i = 0; i < nm; i++)
        printf("  %-16s %12s  %12s\n", !strcmp(methods[i].key, "none") ? "undecided" : methods[i].key,
               cli_count(a, sizeof a, (uint64_t)methods[i].a), report_bytes(b, sizeof b, methods[i].b));
    }
    printf("peak live    %s at event %lld\n", report_bytes(a, sizeof a, res.peak_requested), (long long)res.peak_allocated_seq);
    printf("live at the peak, by category\n");
    for (int k = 0; k < SIM_CAT__COUNT; k++)
      if (res.category_bytes[k])
        printf("  %-16s %12s  %5.1f%%\n", sim_category_name(k), report_bytes(a, sizeof a, res.category_bytes[k]),
               res.peak_requested ? 100.0 * (double)res.category_bytes[k] / (double)res.peak_requested : 0);
    printf("how the categories were decided (bytes at the peak)\n");
    for (int k = 0; k < SIM_CATSRC__COUNT; k++)
      if (res.catsrc_bytes[k])
        printf("  %-16s %12s  %5.1f%%\n", k == SIM_CATSRC_NONE ? "undecided" : sim_cat_source_name(k),
               report_bytes(a, sizeof a, res.catsrc_bytes[k]),
               res.peak_requested ? 100.0 * (double)res.catsrc_bytes[k] / (double)res.peak_requested : 0);
    if (res.host_pinned_peak || res.host_pageable_peak)
      printf("host memory  pinned peak %s, pageable peak %s\n", report_bytes(a, sizeof a, res.host_pinned_peak),
             report_bytes(b, sizeof b, res.host_pageable_peak));
    if (nn) {
      printf("import notes\n");
      for (size_t i = 0; i < nn; i++) printf("  %-40s %lld\n", notes[i].key, (long long)notes[i].a);
    }
  }
out:
  replay_result_release(&res);
  free_pairs(kinds, nk);
  free_pairs(devs, nd);
  free_pairs(streams, ns);
  free_pairs(rec, nr);
  free_pairs(cats, nc);
  free_pairs(notes, nn);
  free_pairs(methods, nm);
  store_trace_clear(&t);
  store_close(s);
  return code;
}

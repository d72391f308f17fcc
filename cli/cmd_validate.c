/* cmd_validate.c: `memplay validate TRACE`: a recorded snapshot replayed through its allocator's model. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "session/session.h"
#include "engine/report.h"
#include "validate/validate.h"
#include "cli.h"

static const char *const validate_usage[] = {
  "memplay validate TRACE [--no-save] [--db FILE] [--json]",
  "  --no-save         do not store the result as a run",
  "  exit status 0 when every decision and the final state agree, 1 otherwise",
  NULL,
};
const cli_usage cmd_validate_usage = {
  .summary = "replay a recorded PyTorch snapshot through its allocator's model and compare every decision",
  .lines = validate_usage,
};

static const struct option validate_options[] = {
  {"no-save", no_argument, NULL, 'N'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

static const char *const block_states[] = {"inactive", "active_allocated", "active_pending_free"};

static double pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * (double)part / (double)whole : 100.0; }

static void json_blocks(yajl_gen g, const validate_block *b, size_t n) {
  yajl_gen_array_open(g);
  for (size_t i = 0; i < n; i++) {
    yajl_gen_map_open(g);
    jsonw_kuint(g, "addr", b[i].addr);
    jsonw_kuint(g, "size", b[i].size);
    jsonw_kstr(g, "state", block_states[b[i].state]);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

static void json_result(yajl_gen g, const store_trace *t, const validate_result *r) {
  jsonw_kstr(g, "trace", t->name);
  jsonw_kint(g, "trace_id", t->id);
  jsonw_kstr(g, "allocator", t->allocator);
  jsonw_str(g, "allocator_settings");
  if (t->allocator_settings && t->allocator_settings[0] == '{') jsonw_raw(g, t->allocator_settings);
  else if (t->allocator_settings) jsonw_str(g, t->allocator_settings);
  else jsonw_null(g);
  jsonw_kbool(g, "agree", !r->diverged);
  jsonw_kuint(g, "events", r->events);
  jsonw_kuint(g, "preexisting_blocks", r->preexisting);
  jsonw_kuint(g, "allocs", r->allocs);
  jsonw_kuint(g, "address_matches", r->address_matches);
  jsonw_kdouble(g, "address_agreement_pct", pct(r->address_matches, r->allocs));
  jsonw_kuint(g, "frees", r->frees);
  jsonw_kuint(g, "segment_events", r->segment_events);
  jsonw_kuint(g, "segment_matches", r->segment_matches);
  jsonw_kdouble(g, "segment_agreement_pct", pct(r->segment_matches, r->segment_events));
  jsonw_kuint(g, "extra_segment_events", r->extra_segment_events);
  jsonw_kuint(g, "ooms", r->ooms);
  jsonw_kuint(g, "oom_matches", r->oom_matches);
  jsonw_kuint(g, "extra_ooms", r->extra_ooms);
  jsonw_kuint(g, "empty_cache_calls", r->empty_cache_calls);
  jsonw_kuint(g, "unknown_frees", r->unknown_frees);
  jsonw_kbool(g, "final_state_match", r->final_state_match);
  jsonw_kuint(g, "final_segments", r->final_segments);
  jsonw_kuint(g, "final_segments_matched", r->final_segments_matched);
  jsonw_kuint(g, "final_blocks", r->final_blocks);
  jsonw_kuint(g, "final_blocks_matched", r->final_blocks_matched);
  jsonw_kuint(g, "replayed_segments", r->model_segments);
  jsonw_kuint(g, "replayed_blocks", r->model_blocks);
  jsonw_str(g, "first_divergence");
  if (!r->diverged) {
    jsonw_null(g);
  } else {
    const validate_divergence *d = &r->first;
    yajl_gen_map_open(g);
    if (d->event >= 0) jsonw_kint(g, "event", d->event);
    else jsonw_kstr(g, "event", "final");
    jsonw_kstr(g, "kind", d->kind);
    jsonw_kstr(g, "expected", d->expected);
    jsonw_kstr(g, "simulated", d->simulated);
    if (d->size) {
      jsonw_kuint(g, "size_bytes", d->size);
      jsonw_kint(g, "stream", d->stream);
    }
    jsonw_str(g, "free_blocks_near");
    json_blocks(g, d->free_near, d->nfree_near);
    jsonw_str(g, "segment");
    if (d->nsegment) {
      yajl_gen_map_open(g);
      jsonw_kuint(g, "addr", d->segment_addr);
      jsonw_str(g, "blocks");
      json_blocks(g, d->segment, d->nsegment);
      yajl_gen_map_close(g);
    } else {
      jsonw_null(g);
    }
    yajl_gen_map_close(g);
  }
  jsonw_kint(g, "replayed_peak_allocated_bytes", r->replayed_peak_allocated);
  jsonw_kint(g, "replayed_peak_reserved_bytes", r->replayed_peak_reserved);
  jsonw_kint(g, "replayed_peak_requested_bytes", r->replayed_peak_requested);
  jsonw_kint(g, "replayed_peak_active_bytes", r->replayed_peak_active);
  jsonw_kint(g, "recorded_peak_reserved_bytes", r->recorded_peak_reserved);
  jsonw_kint(g, "recorded_peak_requested_bytes", r->recorded_peak_requested);
  jsonw_kbool(g, "peak_allocated_is_lower_bound", r->peak_allocated_is_lower_bound);
  jsonw_kuint(g, "uncertain_blocks", r->uncertain_blocks);
  jsonw_kuint(g, "passes", r->passes);
  jsonw_kdouble(g, "elapsed_s", r->elapsed_s);
}

static void print_blocks(const validate_block *b, size_t n, uint64_t mark) {
  char a[32];
  for (size_t i = 0; i < n; i++)
    printf("      %#14" PRIx64 "  %12s  %s%s\n", b[i].addr, report_bytes(a, sizeof a, (int64_t)b[i].size),
           block_states[b[i].state], mark && mark >= b[i].addr && mark < b[i].addr + b[i].size ? "  <- expected" : "");
}

static void print_human(const store_trace *t, const validate_result *r, int64_t run_id) {
  char a[48], b[48], c[48];
  printf("validate '%s' under %s (%s): %s\n", t->name, t->allocator,
         t->allocator_settings ? "the recorded settings" : "PyTorch's defaults",
         r->diverged ? "DIVERGES" : "agrees with the recording");
  printf("  allocations      %s of %s at the recorded address (%.2f%%)\n", cli_count(a, sizeof a, r->address_matches),
         cli_count(b, sizeof b, r->allocs), pct(r->address_matches, r->allocs));
  printf("  segment events   %s of %s reproduced (%.2f%%)", cli_count(a, sizeof a, r->segment_matches),
         cli_count(b, sizeof b, r->segment_events), pct(r->segment_matches, r->segment_events));
  if (r->extra_segment_events) printf(", %s more by the replay", cli_count(c, sizeof c, r->extra_segment_events));
  printf("\n");
  printf("  OOMs             %" PRIu64 " of %" PRIu64 " reproduced", r->oom_matches, r->ooms);
  if (r->extra_ooms) printf(", %" PRIu64 " more by the replay", r->extra_ooms);
  printf("\n");
  if (r->empty_cache_calls) printf("  empty_cache      %" PRIu64 " calls inferred from release bursts\n", r->empty_cache_calls);
  printf("  final state      %" PRIu64 " of %" PRIu64 " segments, %" PRIu64 " of %" PRIu64 " blocks: %s\n",
         r->final_segments_matched, r->final_segments, r->final_blocks_matched, r->final_blocks,
         r->final_state_match ? "match" : "differ");
  printf("  window start     %" PRIu64 " blocks live before the first request", r->preexisting);
  if (r->uncertain_blocks) printf(", %" PRIu64 " with an unsplit remainder the window cannot see", r->uncertain_blocks);
  printf("\n");
  printf("  peak allocated   %s replayed%s\n", report_bytes(a, sizeof a, r->replayed_peak_allocated),
         r->peak_allocated_is_lower_bound ? " (a lower bound)" : "");
  printf("  peak reserved    %s replayed, %s recorded\n", report_bytes(a, sizeof a, r->replayed_peak_reserved),
         report_bytes(b, sizeof b, r->recorded_peak_reserved));
  printf("  peak requested   %s replayed, %s recorded\n", report_bytes(a, sizeof a, r->replayed_peak_requested),
         report_bytes(b, sizeof b, r->recorded_peak_requested));
  if (r->diverged) {
    const validate_divergence *d = &r->first;
    if (d->event >= 0) printf("first divergence at event %" PRId64 " (%s)\n", d->event, d->kind);
    else printf("first divergence in the final state\n");
    printf("  expected   %s\n  simulated  %s\n", d->expected, d->simulated);
    if (d->size)
      printf("  request    %s on stream %" PRId64 "\n", report_bytes(a, sizeof a, (int64_t)d->size), d->stream);
    if (d->nfree_near) {
      printf("  free blocks of that stream and pool nearest its size:\n");
      print_blocks(d->free_near, d->nfree_near, 0);
    }
    if (d->nsegment) {
      printf("  the segment at %#" PRIx64 " around the expected address:\n", d->segment_addr);
      print_blocks(d->segment, d->nsegment, strstr(d->expected, "0x") ? strtoull(strstr(d->expected, "0x"), NULL, 16) : 0);
    }
  }
  if (run_id > 0) printf("stored as run %" PRId64 "\n", run_id);
}

int cmd_validate(int argc, char **argv, cli *c) {
  int opt, code = CLI_OK, save = 1;
  while ((opt = cli_getopt(argc, argv, "h", validate_options)) != -1) {
    int r = cli_common_option(c, "validate", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    if (opt == 'N') save = 0;
  }
  if (optind + 1 != argc)
    return cli_usage_error("validate", optind >= argc ? "no TRACE given" : "validate takes one TRACE");
  store_trace t;
  store *s = cli_open_trace(c, argv[optind], &t);
  if (!s) return CLI_FAIL;
  validate_result r;
  char err[1024];
  int64_t run_id = 0;
  if (validate_run(s, &t, &r, err, sizeof err)) {
    cli_error("%s", err);
    code = CLI_FAIL;
    goto out;
  }
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  json_result(g, &t, &r);
  yajl_gen_map_close(g);
  if (save) {
    replay_result rr;
    validate_fill_replay_result(&r, &rr);
    run_meta m = {.trace_id = t.id, .trace_name = t.name, .kind = "validate", .allocator = t.allocator,
                  .capacity = UINT64_MAX, .backend = "sim", .step_time_s = -1, .samples_per_s = -1};
    size_t len;
    const char *text = jsonw_text(g, &len);
    char *json = strndup(text, len);
    session *ses = session_new(s);
    if (session_save(ses, &m, &rr, json, SESSION_RESULT_REPLACE, &run_id, err, sizeof err)) {
      cli_error("%s", err);
      code = CLI_FAIL;
    }
    session_free(ses);
    free(json);
  }
  if (c->json) {
    yajl_gen out = jsonw_file(stdout, 0);
    yajl_gen_map_open(out);
    json_result(out, &t, &r);
    if (run_id) jsonw_kint(out, "run_id", run_id);
    yajl_gen_map_close(out);
    yajl_gen_free(out);
    putchar('\n');
  } else {
    print_human(&t, &r, run_id);
  }
  yajl_gen_free(g);
  if (code == CLI_OK && r.diverged) code = CLI_FAIL;
out:
  store_trace_clear(&t);
  store_close(s);
  return code;
}

/* test_engine.c: the replay engine: peaks, OOMs, skipped frees, composition at the peak, timeline, devices. */
#include <sys/resource.h>

#include "engine/engine.h"
#include "gen/gen.h"
#include "sim/hashmap.h"
#include "test.h"

int test_failures;

typedef struct evbuf {
  sim_event *ev;
  size_t n, cap;
} evbuf;

static sim_event *add(evbuf *b, int kind, uint64_t addr, uint64_t size) {
  sim_grow((void **)&b->ev, &b->cap, b->n + 1, sizeof *b->ev);
  sim_event *e = &b->ev[b->n];
  sim_event_init(e);
  e->seq = (int64_t)b->n++;
  e->ts = e->seq * 100;
  e->kind = (uint8_t)kind;
  e->addr = addr;
  e->size = size;
  return e;
}

static int run(evbuf *b, const char *spec_text, uint64_t capacity, int stop, replay_result *r) {
  sim_spec spec;
  char err[512];
  if (sim_spec_parse(&spec, spec_text, err, sizeof err)) return -1;
  replay_config cfg = {.spec = &spec, .capacity = capacity, .stop_at_oom = stop, .timeline_points = 8, .top_sites = 3,
                       .check_level = 2};
  replay_array_source as;
  replay_source src = replay_array_source_init(&as, b->ev, b->n);
  int rc = replay_run(&cfg, &src, r, err, sizeof err);
  if (rc) fprintf(stderr, "replay: %s\n", err);
  sim_spec_release(&spec);
  return rc;
}

static void peaks_and_composition(void) {
  evbuf b = {0};
  sim_event *e;
  e = add(&b, SIM_EV_ALLOC, 1, 1000); /* parameter, stack 5 */
  e->category = SIM_CAT_PARAMETER, e->cat_source = SIM_CATSRC_SOURCE, e->stack = 5;
  e = add(&b, SIM_EV_ALLOC, 2, 3000); /* activation, stack 6 */
  e->category = SIM_CAT_ACTIVATION, e->cat_source = SIM_CATSRC_LIFETIME, e->stack = 6;
  e = add(&b, SIM_EV_ALLOC, 3, 500); /* activation, stack 6 */
  e->category = SIM_CAT_ACTIVATION, e->cat_source = SIM_CATSRC_LIFETIME, e->stack = 6;
  add(&b, SIM_EV_FREE, 2, 0);          /* leaving the peak of 4500 */
  e = add(&b, SIM_EV_ALLOC, 4, 3400);  /* 4900: a new peak, different composition */
  e->category = SIM_CAT_TEMPORARY, e->stack = 7;
  add(&b, SIM_EV_FREE, 4, 0);
  add(&b, SIM_EV_FREE, 3, 0);
  replay_result r;
  CHECK_EQ(run(&b, "ideal", UINT64_MAX, 0, &r), 0);
  CHECK_EQ(r.events, 7);
  CHECK_EQ(r.peak_allocated, 4900);
  CHECK_EQ(r.peak_allocated_seq, 4);
  CHECK_EQ(r.peak_requested, 4900);
  CHECK_EQ(r.category_bytes[SIM_CAT_PARAMETER], 1000);
  CHECK_EQ(r.category_bytes[SIM_CAT_ACTIVATION], 500);
  CHECK_EQ(r.category_bytes[SIM_CAT_TEMPORARY], 3400);
  CHECK_EQ(r.catsrc_bytes[SIM_CATSRC_NONE], 3400);
  CHECK_EQ(r.catsrc_bytes[SIM_CATSRC_LIFETIME], 500);
  CHECK_EQ(r.nsites, 3);
  if (r.nsites == 3) {
    CHECK_EQ(r.sites[0].stack, 7);
    CHECK_EQ(r.sites[0].bytes, 3400);
    CHECK_EQ(r.sites[1].stack, 5);
    CHECK_EQ(r.sites[2].stack, 6);
    CHECK_EQ(r.sites[2].bytes, 500);
    CHECK_EQ(r.sites[2].count, 1);
  }
  CHECK_EQ(r.final_allocated, 1000);
  CHECK_EQ(r.allocs, 4);
  CHECK_EQ(r.frees, 3);
  replay_result_release(&r);
  free(b.ev);
}

static void ooms_continue_or_stop(void) {
  evbuf b = {0};
  add(&b, SIM_EV_ALLOC, 1, 600);
  add(&b, SIM_EV_ALLOC, 2, 600); /* does not fit 1000 */
  add(&b, SIM_EV_ALLOC, 3, 300);
  add(&b, SIM_EV_FREE, 2, 0);    /* the dropped allocation's free is ignored */
  add(&b, SIM_EV_FREE, 99, 0);   /* never allocated */
  add(&b, SIM_EV_FREE, 1, 0);
  add(&b, SIM_EV_ALLOC, 2, 600); /* the address is free to use again */
  replay_result r;
  CHECK_EQ(run(&b, "ideal", 1000, 0, &r), 0);
  CHECK_EQ(r.ooms, 1);
  CHECK_EQ(r.noom_list, 1);
  if (r.noom_list) {
    CHECK_EQ(r.oom_list[0].seq, 1);
    CHECK_EQ(r.oom_list[0].size, 600);
    CHECK_EQ(r.oom_list[0].allocated, 600);
    CHECK(strstr(r.oom_list[0].message, "600 bytes requested") != NULL);
  }
  CHECK_EQ(r.dropped_frees, 1);
  CHECK_EQ(r.unknown_frees, 1);
  CHECK_EQ(r.peak_allocated, 900);
  CHECK_EQ(r.final_allocated, 900);
  CHECK_EQ(r.events, 7);
  replay_result_release(&r);
  CHECK_EQ(run(&b, "ideal", 1000, 1, &r), 0);
  CHECK_EQ(r.stopped_at_oom, 1);
  CHECK_EQ(r.events, 2);
  replay_result_release(&r);
  free(b.ev);
}

static void requested_then_completed(void) {
  evbuf b = {0};
  add(&b, SIM_EV_ALLOC, 1, 100);
  add(&b, SIM_EV_FREE_REQUESTED, 1, 0);
  add(&b, SIM_EV_FREE_REQUESTED, 1, 0); /* twice: skipped */
  add(&b, SIM_EV_ALLOC, 1, 50);         /* still live until completed: a repeated allocation */
  add(&b, SIM_EV_FREE_COMPLETED, 1, 0);
  add(&b, SIM_EV_ALLOC, 1, 70);
  replay_result r;
  CHECK_EQ(run(&b, "cuda", UINT64_MAX, 0, &r), 0);
  CHECK_EQ(r.unknown_frees, 1);
  CHECK_EQ(r.duplicate_allocs, 1);
  CHECK_EQ(r.frees, 1);
  CHECK_EQ(r.final_allocated, 70);
  CHECK_EQ(r.device_mallocs, 2);
  CHECK_EQ(r.device_frees, 1);
  CHECK_EQ(r.peak_reserved, 2 << 20);
  replay_result_release(&r);
  free(b.ev);
}

static void devices_and_host_memory(void) {
  evbuf b = {0};
  sim_event *e;
  e = add(&b, SIM_EV_ALLOC, 1, 100);
  e->device = 0;
  e = add(&b, SIM_EV_ALLOC, 2, 200);
  e->device = 3;
  e = add(&b, SIM_EV_HOST_ALLOC, 1, 5000); /* host address space is separate */
  e->mem = SIM_MEM_PINNED, e->device = -1;
  e = add(&b, SIM_EV_HOST_ALLOC, 9, 7000);
  e->mem = SIM_MEM_PAGEABLE, e->device = -1;
  e = add(&b, SIM_EV_HOST_FREE, 1, 0);
  e->device = -1;
  add(&b, SIM_EV_FREE, 1, 0);
  replay_result r;
  CHECK_EQ(run(&b, "ideal", UINT64_MAX, 0, &r), 0);
  CHECK_EQ(r.ndevices, 2);
  CHECK_EQ(r.peak_allocated, 300);
  CHECK_EQ(r.devices[0].device, 0);
  CHECK_EQ(r.devices[0].peak_allocated, 100);
  CHECK_EQ(r.devices[1].device, 3);
  CHECK_EQ(r.devices[1].peak_allocated, 200);
  CHECK_EQ(r.host_pinned_peak, 5000);
  CHECK_EQ(r.host_pageable_peak, 7000);
  CHECK_EQ(r.final_allocated, 200);
  replay_result_release(&r);
  free(b.ev);
}

static void timeline_keeps_maxima(void) {
  evbuf b = {0};
  for (int i = 0; i < 100; i++) {
    add(&b, SIM_EV_ALLOC, (uint64_t)i + 1, i == 37 ? 1000000 : 10);
    add(&b, SIM_EV_FREE, (uint64_t)i + 1, 0);
  }
  replay_result r;
  CHECK_EQ(run(&b, "ideal", UINT64_MAX, 0, &r), 0);
  CHECK(r.ntimeline <= 8 && r.ntimeline >= 4);
  int64_t best = 0, last_seq = -1;
  int ordered = 1;
  for (size_t i = 0; i < r.ntimeline; i++) {
    if (r.timeline[i].allocated > best) best = r.timeline[i].allocated;
    ordered &= r.timeline[i].seq > last_seq;
    last_seq = r.timeline[i].seq;
  }
  CHECK_EQ(best, 1000000); /* downsampling never loses the peak */
  CHECK(ordered);
  CHECK_EQ(r.timeline[0].seq, 0);
  replay_result_release(&r);
  free(b.ev);
}

typedef struct counter {
  int events, ooms;
  uint64_t mallocs;
  int finished;
} counter;

static void obs_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  counter *c = ctx;
  (void)ev;
  c->events++;
  c->ooms += o->oom;
  c->mallocs += o->device_mallocs;
}
static void obs_finish(void *ctx) { ((counter *)ctx)->finished = 1; }

static void observers_see_every_event(void) {
  evbuf b = {0};
  add(&b, SIM_EV_ALLOC, 1, 100);
  add(&b, SIM_EV_KERNEL, 0, 0);
  add(&b, SIM_EV_ALLOC, 2, 3 << 20);
  add(&b, SIM_EV_ALLOC, 3, 64 << 20); /* over capacity */
  counter c = {0};
  replay_observer obs = {&c, obs_event, obs_finish};
  sim_spec spec;
  char err[256];
  sim_spec_parse(&spec, "cuda", err, sizeof err);
  replay_config cfg = {.spec = &spec, .capacity = 32 << 20, .observers = &obs, .nobservers = 1};
  replay_array_source as;
  replay_source src = replay_array_source_init(&as, b.ev, b.n);
  replay_result r;
  CHECK_EQ(replay_run(&cfg, &src, &r, err, sizeof err), 0);
  CHECK_EQ(c.events, 4);
  CHECK_EQ(c.ooms, 1);
  CHECK_EQ(c.mallocs, 2);
  CHECK_EQ(c.finished, 1);
  replay_result_release(&r);
  sim_spec_release(&spec);
  free(b.ev);
}

static long rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Memory follows the live set: a ten times longer stream of the same workload costs no more. */
static void memory_grows_with_live_set_not_trace(void) {
  long before = rss_kib();
  for (int round = 0; round < 2; round++) {
    gen_config gc = {round ? 3000000 : 300000, 3, 4};
    gen *g = gen_new(&gc);
    replay_source src = gen_source(g);
    sim_spec spec;
    char err[256];
    sim_spec_parse(&spec, "cuda", err, sizeof err);
    replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX};
    replay_result r;
    CHECK_EQ(replay_run(&cfg, &src, &r, err, sizeof err), 0);
    CHECK_EQ(r.events, gc.events);
    replay_result_release(&r);
    sim_spec_release(&spec);
    gen_free(g);
    long now = rss_kib();
    if (round == 0) before = now;
    else CHECK(now - before < 16 * 1024); /* the longer stream adds less than 16 MiB */
  }
}

int main(void) {
  RUN(peaks_and_composition);
  RUN(ooms_continue_or_stop);
  RUN(requested_then_completed);
  RUN(devices_and_host_memory);
  RUN(timeline_keeps_maxima);
  RUN(observers_see_every_event);
  RUN(memory_grows_with_live_set_not_trace);
  TEST_MAIN_END();
}

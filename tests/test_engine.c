/* test_engine.c: the replay engine: peaks, OOMs, skipped frees, composition at the peak, timeline, devices. */
#include <sys/resource.h>

#include "engine/engine.h"
#include "gen/gen.h"
#include "sim/device_sim.h"
#include "sim/hashmap.h"
#include "result_diff.h"
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

/* Replays b through spec with capacity, from a source that can rewind (rewind 1: the largest
 * free block at the peak may wait past allocations) or one that cannot (taken at each new peak). */
static int run_src(evbuf *b, const char *spec_text, uint64_t capacity, int rewind, replay_result *r) {
  sim_spec spec;
  char err[512];
  if (sim_spec_parse(&spec, spec_text, err, sizeof err)) return -1;
  replay_config cfg = {.spec = &spec, .capacity = capacity, .top_sites = 3, .check_level = 2};
  replay_array_source as;
  replay_source src = replay_array_source_init(&as, b->ev, b->n);
  if (!rewind) src.rewind = NULL;
  replay_engine *e = replay_engine_new();
  int rc = replay_engine_run(e, &cfg, &src, r, err, sizeof err);
  replay_engine_free(e);
  if (rc) fprintf(stderr, "replay: %s\n", err);
  sim_spec_release(&spec);
  return rc;
}

#define MIB (UINT64_C(1) << 20)

/* The state at the peak is taken when it is about to change: the same figures as taking it at
 * every new peak, also when the allocation after the peak fails and the model's recovery
 * releases cached memory (the largest free block is then taken by a second pass). */
static void peak_state_taken_when_it_changes(void) {
  evbuf b = {0};
  sim_event *e;
  e = add(&b, SIM_EV_ALLOC, 1, 20 * MIB); /* a 20 MiB segment */
  e->category = SIM_CAT_PARAMETER, e->stack = 3;
  add(&b, SIM_EV_FREE, 1, 0);             /* cached */
  e = add(&b, SIM_EV_ALLOC, 2, 50 * MIB); /* a second segment: the peak, 20 MiB free beside it */
  e->category = SIM_CAT_ACTIVATION, e->stack = 4;
  add(&b, SIM_EV_ALLOC, 3, 60 * MIB);     /* does not fit: the cached segment is released, then OOM */
  add(&b, SIM_EV_FREE, 2, 0);
  e = add(&b, SIM_EV_ALLOC, 5, 10 * MIB);
  e->category = SIM_CAT_TEMPORARY, e->stack = 5;
  const char *models[] = {"torch", "ideal", "bfc", "cuda", "async"};
  for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
    replay_result lazy, eager;
    CHECK_EQ(run_src(&b, models[m], 100 * MIB, 1, &lazy), 0);
    CHECK_EQ(run_src(&b, models[m], 100 * MIB, 0, &eager), 0);
    CHECK_EQ(lazy.peak_allocated, eager.peak_allocated);
    CHECK_EQ(lazy.peak_allocated_seq, eager.peak_allocated_seq);
    CHECK_EQ(lazy.at_peak_reserved, eager.at_peak_reserved);
    CHECK_EQ(lazy.at_peak_largest_free, eager.at_peak_largest_free);
    CHECK_EQ(lazy.ooms, eager.ooms);
    CHECK(!memcmp(lazy.category_bytes, eager.category_bytes, sizeof lazy.category_bytes));
    CHECK(!memcmp(lazy.category_count, eager.category_count, sizeof lazy.category_count));
    CHECK_EQ(lazy.nsites, eager.nsites);
    for (size_t i = 0; i < lazy.nsites && i < eager.nsites; i++) {
      CHECK_EQ(lazy.sites[i].stack, eager.sites[i].stack);
      CHECK_EQ(lazy.sites[i].bytes, eager.sites[i].bytes);
    }
    if (!strcmp(models[m], "torch")) { /* the case the second pass is for */
      CHECK_EQ(lazy.peak_allocated_seq, 2);
      CHECK_EQ(lazy.ooms, 1);
      CHECK_EQ(lazy.at_peak_largest_free, 20 * MIB);
      CHECK_EQ(lazy.category_bytes[SIM_CAT_ACTIVATION], (int64_t)(50 * MIB));
      CHECK_EQ(lazy.category_bytes[SIM_CAT_PARAMETER], 0);
    }
    replay_result_release(&lazy);
    replay_result_release(&eager);
  }
  free(b.ev);
}

/* The generated trace of n events (seed), held in memory. */
static evbuf generated(uint64_t n, uint64_t seed) {
  gen_config gc = {n, seed, 0};
  gen *g = gen_new(&gc);
  evbuf b = {0};
  replay_source gs = gen_source(g);
  sim_event ev;
  while (replay_source_next(&gs, &ev) > 0) {
    sim_grow((void **)&b.ev, &b.cap, b.n + 1, sizeof *b.ev);
    b.ev[b.n++] = ev;
  }
  gen_free(g);
  return b;
}

/* The same on the generated trace with a capacity that makes it run out now and then, through one
 * engine kept for every replay: each replay gives what a new engine gives. */
static void kept_engine_matches_new_engines(void) {
  evbuf b = generated(60000, 7);
  replay_engine *kept = replay_engine_new();
  /* a model run again, with the same capacity or another, is reset by the kept engine, not made
   * again (a capacity is given to the reset device) */
  const char *models[] = {"torch", "torch", "ideal", "bfc", "bfc", "torch", "async", "async", "cuda", "cuda"};
  uint64_t caps[] = {UINT64_MAX, 3000 * MIB, 2000 * MIB};
  for (size_t m = 0; m < sizeof models / sizeof *models; m++)
    for (size_t c = 0; c < 3; c++) {
      sim_spec spec;
      char err[512];
      CHECK_EQ(sim_spec_parse(&spec, models[m], err, sizeof err), 0);
      /* the card's memory given, as a device profile gives it, then not: the capacity sets it */
      replay_config cfg = {.spec = &spec, .capacity = caps[c], .total_memory = m % 2 ? 0 : 80 * 1024 * MIB,
                           .top_sites = 5};
      replay_array_source as;
      replay_source src = replay_array_source_init(&as, b.ev, b.n);
      replay_result a, n;
      CHECK_EQ(replay_engine_run(kept, &cfg, &src, &a, err, sizeof err), 0);
      src = replay_array_source_init(&as, b.ev, b.n);
      src.rewind = NULL; /* every new peak taken as it comes */
      CHECK_EQ(replay_run(&cfg, &src, &n, err, sizeof err), 0);
      CHECK_EQ(a.events, n.events);
      CHECK_EQ(a.ooms, n.ooms);
      CHECK_EQ(a.peak_allocated, n.peak_allocated);
      CHECK_EQ(a.peak_reserved, n.peak_reserved);
      CHECK_EQ(a.at_peak_largest_free, n.at_peak_largest_free);
      CHECK_EQ(a.at_peak_reserved, n.at_peak_reserved);
      CHECK(!memcmp(a.category_bytes, n.category_bytes, sizeof a.category_bytes));
      CHECK(!memcmp(a.catsrc_bytes, n.catsrc_bytes, sizeof a.catsrc_bytes));
      CHECK_EQ(a.nsites, n.nsites);
      for (size_t i = 0; i < a.nsites && i < n.nsites; i++) CHECK_EQ(a.sites[i].bytes, n.sites[i].bytes);
      CHECK_EQ(a.ntimeline, n.ntimeline);
      CHECK_EQ(a.final_allocated, n.final_allocated);
      CHECK_EQ(a.device_mallocs, n.device_mallocs);
      CHECK_EQ(a.device_frees, n.device_frees);
      CHECK_EQ(a.device_maps, n.device_maps);
      CHECK_EQ(a.fragmentation, n.fragmentation);
      CHECK_EQ(a.unknown_frees + a.dropped_frees, n.unknown_frees + n.dropped_frees);
      replay_result_release(&a);
      replay_result_release(&n);
      sim_spec_release(&spec);
    }
  replay_engine_free(kept);
  free(b.ev);
}

static void null_event(void *ctx, const sim_event *ev, const replay_outcome *o) { (void)ctx, (void)ev, (void)o; }

/* Every figure of two results of the same events. */
static void check_same_result(const replay_result *a, const replay_result *b) {
  char buf[512];
  const char *d = replay_result_diff(a, b, RESULT_ALL, buf, sizeof buf);
  if (d) fprintf(stderr, "results differ: %s\n", d);
  CHECK(!d);
}

/* Every figure of two results of the same events but the timeline and the state at the peak (its
 * largest free block, categories and call sites), which a lean replay does not keep. */
static void check_same_figures(const replay_result *a, const replay_result *b) {
  char buf[512];
  const char *d = replay_result_diff(a, b, RESULT_FIGURES, buf, sizeof buf);
  if (d) fprintf(stderr, "results differ: %s\n", d);
  CHECK(!d);
}

/* A lean replay's result against a full one of the same events: the same figures, and nothing of
 * what it does not keep. */
static void check_lean_result(const replay_result *full, const replay_result *lean) {
  check_same_figures(full, lean);
  CHECK(full->ntimeline > 0);
  CHECK_EQ(lean->ntimeline, 0);
  CHECK_EQ(lean->nsites, 0);
  CHECK_EQ(lean->at_peak_largest_free, 0);
  int64_t cats = 0;
  for (int i = 0; i < SIM_CAT__COUNT; i++) cats |= lean->category_bytes[i] | lean->category_count[i];
  CHECK_EQ(cats, 0);
}

/* Events appended to r as copies of ev, numbered in r's order. */
static void push_copy(evbuf *r, const sim_event *ev) {
  sim_grow((void **)&r->ev, &r->cap, r->n + 1, sizeof *r->ev);
  r->ev[r->n] = *ev;
  r->ev[r->n].seq = (int64_t)r->n;
  r->n++;
}

/* The generated events with their addresses reused as a caching allocator reuses them (the
 * generator gives each allocation a new one): an allocation takes the address given back most
 * recently, so that a replay finds records by addresses it held before. Besides: every 40th free
 * is a request and its completion as the next event (a pair), every 70th a request completed
 * twelve events later; every 97th allocation repeats an address that is live (a duplicate) and
 * every 89th free names an address nothing holds. */
static evbuf reused(const evbuf *b) {
  evbuf r = {0};
  sim_map held; /* the generated address -> the address it was given */
  sim_map_init(&held);
  uint64_t *spare = NULL, top = UINT64_C(0x7f0000000000);
  size_t nspare = 0, cap = 0, nallocs = 0, nfrees = 0;
  struct { uint64_t addr; size_t due; } late[64];
  size_t nlate = 0;
  for (size_t i = 0; i < b->n; i++) {
    for (size_t k = 0; k < nlate;) /* completions that are due, their addresses given back */
      if (late[k].due <= r.n) {
        sim_event c = b->ev[i];
        c.kind = SIM_EV_FREE_COMPLETED, c.addr = late[k].addr, c.size = 0;
        push_copy(&r, &c);
        sim_grow((void **)&spare, &cap, nspare + 1, sizeof *spare);
        spare[nspare++] = late[k].addr;
        late[k] = late[--nlate];
      } else {
        k++;
      }
    sim_event ev = b->ev[i];
    if (ev.kind == SIM_EV_ALLOC) {
      int existed;
      uint64_t *to = sim_map_put(&held, ev.addr, &existed);
      *to = nspare ? spare[--nspare] : (top += 512 * (1 + ev.size / 512));
      ev.addr = *to;
      push_copy(&r, &ev);
      if (++nallocs % 97 == 0) push_copy(&r, &ev); /* the same address again while it is live */
    } else if (ev.kind == SIM_EV_FREE) {
      uint64_t to;
      if (!sim_map_del(&held, ev.addr, &to)) continue;
      ev.addr = to;
      nfrees++;
      if (nfrees % 89 == 0) { /* a free of an address nothing holds, then the real one */
        sim_event stray = ev;
        stray.addr = UINT64_C(0x10000) + 512 * nfrees;
        push_copy(&r, &stray);
      }
      if (nfrees % 40 == 0) {
        ev.kind = SIM_EV_FREE_REQUESTED;
        push_copy(&r, &ev);
        ev.kind = SIM_EV_FREE_COMPLETED;
        push_copy(&r, &ev);
      } else if (nfrees % 70 == 0 && nlate < 64) {
        ev.kind = SIM_EV_FREE_REQUESTED;
        push_copy(&r, &ev);
        late[nlate].addr = ev.addr, late[nlate].due = r.n + 12, nlate++;
        continue; /* its address is given back at its completion */
      } else {
        push_copy(&r, &ev);
      }
      sim_grow((void **)&spare, &cap, nspare + 1, sizeof *spare);
      spare[nspare++] = to;
    } else {
      push_copy(&r, &ev);
    }
  }
  free(spare);
  sim_map_release(&held);
  return r;
}

/* The plain replay (no observers, no moment to stop at, no per-event check) runs its own copy of
 * the event loop (plain_run, its records found by address when the events have no plan) and keeps
 * one device's figures in the totals: it must give what the checked and the observed replays give,
 * on one device, when a second comes part-way, and when addresses are reused. */
static void plain_replay_matches_checked_and_observed(void) {
  evbuf b = generated(20000, 11);
  evbuf two = {0}; /* the same, the second half's new allocations on device 2 */
  sim_grow((void **)&two.ev, &two.cap, b.n, sizeof *two.ev);
  memcpy(two.ev, b.ev, b.n * sizeof *b.ev);
  two.n = b.n;
  for (size_t i = b.n / 2; i < b.n; i++)
    if (two.ev[i].kind == SIM_EV_ALLOC) two.ev[i].device = 2;
  evbuf again = reused(&b); /* addresses reused: the records are found again by address */
  const char *models[] = {"torch", "ideal", "bfc", "async", "cuda"};
  uint64_t caps[] = {UINT64_MAX, 1500 * MIB};
  evbuf *traces[] = {&b, &two, &again};
  for (size_t t = 0; t < 3; t++)
    for (size_t c = 0; c < 2; c++)
      for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        sim_spec spec;
        char err[512];
        CHECK_EQ(sim_spec_parse(&spec, models[m], err, sizeof err), 0);
        replay_observer obs = {NULL, null_event, NULL};
        replay_config plain = {.spec = &spec, .capacity = caps[c], .timeline_points = 64, .top_sites = 5};
        replay_config checked = plain, observed = plain;
        checked.check_level = 2;
        observed.observers = &obs, observed.nobservers = 1;
        replay_result rp, rc, ro;
        replay_array_source as;
        replay_source src = replay_array_source_init(&as, traces[t]->ev, traces[t]->n);
        CHECK_EQ(replay_run(&plain, &src, &rp, err, sizeof err), 0);
        src = replay_array_source_init(&as, traces[t]->ev, traces[t]->n);
        CHECK_EQ(replay_run(&checked, &src, &rc, err, sizeof err), 0);
        src = replay_array_source_init(&as, traces[t]->ev, traces[t]->n);
        CHECK_EQ(replay_run(&observed, &src, &ro, err, sizeof err), 0);
        CHECK_EQ(rp.ndevices, t == 1 ? 2 : 1);
        if (t == 2 && c == 0) CHECK(rp.duplicate_allocs > 0 && rp.unknown_frees > 0 && rp.frees > 0);
        check_same_result(&rp, &rc);
        check_same_result(&rp, &ro);
        replay_result_release(&rp);
        replay_result_release(&rc);
        replay_result_release(&ro);
        sim_spec_release(&spec);
      }
  free(b.ev);
  free(two.ev);
  free(again.ev);
}

/* ---- what observers are told, against the test's own replay of the model -------------------- */

#define REF_DEVICES 2

typedef struct ref_rec {
  uint64_t addr;
  uintptr_t handle;
  int device, state; /* 1 live, 2 free requested, 3 dropped by an OOM */
} ref_rec;

/* The events replayed straight into one model per device, each action's outcome measured around
 * it (the device's counters and the model's reserved bytes before and after): what the engine
 * must tell its observers, found without it. */
typedef struct ref_replay {
  const sim_spec *spec;
  uint64_t capacity;
  sim_device dev[REF_DEVICES];
  sim_allocator a[REF_DEVICES];
  int made[REF_DEVICES];
  ref_rec *recs;
  size_t nrecs, cap;
  const replay_start *start; /* device 0's start, or NULL */
  sim_placement *restored;   /* its blocks, by item (segments: zero) */
} ref_replay;

static ref_rec *ref_find(ref_replay *r, uint64_t addr) {
  for (size_t i = 0; i < r->nrecs; i++)
    if (r->recs[i].addr == addr) return &r->recs[i];
  return NULL;
}

static void ref_forget(ref_replay *r, ref_rec *x) { *x = r->recs[--r->nrecs]; }

static int64_t ref_reserved(const ref_replay *r, int d) { return r->a[d].ops->stats(r->a[d].ctx)->reserved.current; }

/* What device d did since `was` (its reserved bytes then: res), added to o. */
static void ref_since(const ref_replay *r, int d, const sim_device *was, int64_t res, replay_outcome *o) {
  const sim_device *n = &r->dev[d];
  o->device_mallocs += n->mallocs - was->mallocs;
  o->device_frees += n->frees - was->frees;
  o->device_maps += n->maps - was->maps;
  o->device_unmaps += n->unmaps - was->unmaps;
  o->device_malloc_bytes += n->malloc_bytes - was->malloc_bytes;
  o->device_free_bytes += n->free_bytes - was->free_bytes;
  o->device_map_bytes += n->map_bytes - was->map_bytes;
  o->device_unmap_bytes += n->unmap_bytes - was->unmap_bytes;
  o->reserved_delta += ref_reserved(r, d) - res;
}

/* Device d made, and device 0 given its start: each segment restored with its blocks, its memory
 * held on the device. */
static void ref_make(ref_replay *r, int d) {
  char err[512];
  sim_simdev_init(&r->dev[d], r->capacity, 0);
  CHECK_EQ(sim_allocator_init(&r->a[d], r->spec, &r->dev[d], NULL, NULL, err, sizeof err), SIM_OK);
  r->made[d] = 1;
  const replay_start *st = r->start;
  if (d || !st) return;
  r->restored = sim_xcalloc(st->n, sizeof *r->restored);
  for (size_t i = 0, j; i < st->n; i = j) {
    for (j = i + 1; j < st->n && !st->items[j].is_segment; j++) {}
    sim_walk_item it[8];
    uintptr_t h[8];
    memcpy(it, st->items + i, (j - i) * sizeof *it);
    CHECK_EQ(r->a[0].ops->restore(r->a[0].ctx, it, j - i, h, err, sizeof err), SIM_OK);
    sim_simdev_hold(&r->dev[0], it[0].addr, it[0].size, it[0].size);
    for (size_t k = i + 1; k < j; k++) r->restored[k] = (sim_placement){it[k - i].addr, it[k - i].size, h[k - i]};
  }
}

/* A preexisting allocation that takes a block device 0 started with: 1, or 0 (none at its address). */
static int ref_take_restored(ref_replay *r, const sim_event *ev, replay_outcome *o) {
  for (size_t k = 0; r->start && k < r->start->n; k++) {
    if (r->start->trace_addr[k] != ev->addr || r->start->items[k].is_segment || !r->restored[k].handle) continue;
    sim_grow((void **)&r->recs, &r->cap, r->nrecs + 1, sizeof *r->recs);
    r->recs[r->nrecs++] = (ref_rec){ev->addr, r->restored[k].handle, 0, 1};
    o->placement = r->restored[k];
    r->restored[k].handle = 0; /* taken */
    return 1;
  }
  return 0;
}

static void ref_alloc(ref_replay *r, const sim_event *ev, int d, replay_outcome *o) {
  if ((ev->flags & SIM_EVF_PREEXISTING) && r->start) {
    if (!r->made[d]) ref_make(r, d);
    if (ref_take_restored(r, ev, o)) return;
  }
  ref_rec *x = ref_find(r, ev->addr);
  if (x && x->state != 3) {
    o->ignored = 1;
    return;
  }
  if (!r->made[d]) ref_make(r, d);
  sim_device was = r->dev[d];
  int64_t res = ref_reserved(r, d);
  sim_placement pl = {0, 0, 0};
  int rc = r->a[d].ops->alloc(r->a[d].ctx, ev->size, ev->stream, &pl);
  if (!x) {
    sim_grow((void **)&r->recs, &r->cap, r->nrecs + 1, sizeof *r->recs);
    x = &r->recs[r->nrecs++];
  }
  *x = (ref_rec){ev->addr, pl.handle, d, rc == SIM_OK ? 1 : 3};
  if (rc == SIM_OK) o->placement = pl;
  else o->oom = 1;
  ref_since(r, d, &was, res, o);
}

static void ref_free(ref_replay *r, const sim_event *ev, replay_outcome *o) {
  ref_rec *x = ref_find(r, ev->addr);
  int completes = ev->kind != SIM_EV_FREE_REQUESTED;
  if (!x || x->state == 3 || (x->state == 2 && !completes)) {
    o->ignored = 1;
    if (x && x->state == 3 && completes) ref_forget(r, x);
    return;
  }
  int d = x->device;
  const sim_allocator_ops *ops = r->a[d].ops;
  sim_device was = r->dev[d];
  int64_t res = ref_reserved(r, d);
  if (x->state == 1 && ops->free_requested) ops->free_requested(r->a[d].ctx, x->handle);
  x->state = 2;
  if (completes) {
    ops->free_completed(r->a[d].ctx, x->handle);
    ref_forget(r, x);
  }
  ref_since(r, d, &was, res, o);
}

static void ref_event(ref_replay *r, const sim_event *ev, replay_outcome *o) {
  memset(o, 0, sizeof *o);
  int d = ev->device < 0 ? 0 : ev->device;
  if (ev->kind == SIM_EV_ALLOC) ref_alloc(r, ev, d, o);
  else if (ev->kind == SIM_EV_FREE || ev->kind == SIM_EV_FREE_REQUESTED || ev->kind == SIM_EV_FREE_COMPLETED)
    ref_free(r, ev, o);
  else if (ev->kind == SIM_EV_SYNC || ev->kind == SIM_EV_EMPTY_CACHE)
    for (int k = 0; k < REF_DEVICES; k++) {
      const sim_allocator_ops *ops = r->a[k].ops;
      if (!r->made[k] || (ev->device >= 0 && ev->device != k)) continue;
      if (ev->kind == SIM_EV_SYNC ? !ops->synchronize : !ops->empty_cache) continue;
      sim_device was = r->dev[k];
      int64_t res = ref_reserved(r, k);
      if (ev->kind == SIM_EV_SYNC) ops->synchronize(r->a[k].ctx, ev->stream);
      else ops->empty_cache(r->a[k].ctx);
      ref_since(r, k, &was, res, o);
    }
}

static void ref_release(ref_replay *r) {
  for (int d = 0; d < REF_DEVICES; d++)
    if (r->made[d]) sim_allocator_release(&r->a[d]), sim_simdev_release(&r->dev[d]);
  free(r->recs);
  free(r->restored);
}

/* A trace that exercises every field of the outcome: allocations of 512 B to 96 MiB on two devices
 * and three streams against a small capacity (OOMs, and frees of the dropped allocations), frees in
 * two halves, duplicate allocations, unknown frees, double free requests, empty_cache and
 * synchronize on one device or all, kernels. */
static evbuf outcome_trace(size_t n, uint64_t seed) {
  evbuf b = {0};
  uint64_t *addrs = NULL, next = 0x10000;
  size_t naddrs = 0, cap = 0;
  uint64_t x = seed;
  while (b.n < n) {
    x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    unsigned r = (unsigned)(x >> 33) % 100;
    uint64_t pick = x >> 17;
    sim_event *e;
    if (r < 45 || naddrs == 0) {
      uint64_t size = (UINT64_C(512) << ((x >> 40) % 18)) + (x >> 24) % 4096; /* 512 B to ~96 MiB */
      if (r == 0 && naddrs) {
        e = add(&b, SIM_EV_ALLOC, addrs[pick % naddrs], size); /* the address of a live one */
      } else {
        sim_grow((void **)&addrs, &cap, naddrs + 1, sizeof *addrs);
        addrs[naddrs++] = next;
        e = add(&b, SIM_EV_ALLOC, next, size);
        next += 0x1000;
      }
      e->device = (int16_t)((x >> 50) % REF_DEVICES);
      e->stream = (int64_t)((x >> 52) % 3);
    } else if (r < 80) {
      size_t i = pick % naddrs;
      int halves = r >= 72;
      e = add(&b, halves ? SIM_EV_FREE_REQUESTED : SIM_EV_FREE, addrs[i], 0);
      if (halves && (x >> 45) % 4 == 0) continue; /* requested twice, or never completed */
      if (halves) add(&b, SIM_EV_FREE_COMPLETED, addrs[i], 0);
      addrs[i] = addrs[--naddrs];
    } else if (r < 84) {
      add(&b, SIM_EV_FREE, next + 0x800, 0); /* never allocated */
    } else if (r < 88) {
      e = add(&b, SIM_EV_EMPTY_CACHE, 0, 0);
      e->device = (int16_t)((int)((x >> 50) % (REF_DEVICES + 1)) - 1);
    } else if (r < 92) {
      e = add(&b, SIM_EV_SYNC, 0, 0);
      e->device = (int16_t)((int)((x >> 50) % (REF_DEVICES + 1)) - 1);
      e->stream = (int64_t)((x >> 52) % 3);
    } else {
      add(&b, SIM_EV_KERNEL, 0, 0);
    }
  }
  free(addrs);
  return b;
}

typedef struct outcome_log {
  replay_outcome *o;
  size_t n;
} outcome_log;

static void log_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  outcome_log *l = ctx;
  (void)ev;
  l->o[l->n++] = *o;
}

/* How many events' outcomes differ from the reference's (the first few printed). */
static size_t outcomes_differ(const char *what, const outcome_log *l, const replay_outcome *want, size_t n) {
  size_t bad = 0;
  if (l->n != n) return n + 1;
  for (size_t i = 0; i < n; i++) {
    const replay_outcome *a = &l->o[i], *w = &want[i];
    int same = a->oom == w->oom && a->ignored == w->ignored && a->device_mallocs == w->device_mallocs &&
               a->device_frees == w->device_frees && a->device_maps == w->device_maps &&
               a->device_unmaps == w->device_unmaps && a->device_malloc_bytes == w->device_malloc_bytes &&
               a->device_free_bytes == w->device_free_bytes && a->device_map_bytes == w->device_map_bytes &&
               a->device_unmap_bytes == w->device_unmap_bytes && a->reserved_delta == w->reserved_delta &&
               a->placement.addr == w->placement.addr && a->placement.size == w->placement.size &&
               !a->placement.handle == !w->placement.handle && a->category_bytes;
    if (!same && bad++ < 3)
      fprintf(stderr, "%s: event %zu: oom %d/%d ignored %d/%d mallocs %llu/%llu maps %llu/%llu reserved %+lld/%+lld "
              "at %#llx/%#llx\n", what, i, a->oom, w->oom, a->ignored, w->ignored,
              (unsigned long long)a->device_mallocs, (unsigned long long)w->device_mallocs,
              (unsigned long long)a->device_maps, (unsigned long long)w->device_maps, (long long)a->reserved_delta,
              (long long)w->reserved_delta, (unsigned long long)a->placement.addr,
              (unsigned long long)w->placement.addr);
  }
  return bad;
}

/* Each event's outcome (the driver calls and their bytes, reserved_delta, the placement, oom,
 * ignored) is what the model did for it, measured around its actions, for every model, with one
 * observer or two, with the per-event check, and through a kept engine whose models are reset. */
static void observers_told_what_the_model_did(void) {
  evbuf b = outcome_trace(4000, 5);
  const char *models[] = {"torch", "torch:expandable_segments:True", "bfc", "async", "cuda", "ideal"};
  uint64_t seen[6] = {0}; /* over all models: ooms, ignored, mallocs, frees, maps, unmaps */
  replay_outcome *want = sim_xcalloc(b.n, sizeof *want);
  outcome_log l1 = {sim_xcalloc(b.n, sizeof *l1.o), 0}, l2 = {sim_xcalloc(b.n, sizeof *l2.o), 0};
  replay_engine *kept = replay_engine_new();
  for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
    sim_spec spec;
    char err[512];
    CHECK_EQ(sim_spec_parse(&spec, models[m], err, sizeof err), 0);
    ref_replay ref = {.spec = &spec, .capacity = 600 * MIB};
    for (size_t i = 0; i < b.n; i++) ref_event(&ref, &b.ev[i], &want[i]);
    ref_release(&ref);
    for (size_t i = 0; i < b.n; i++) {
      const replay_outcome *w = &want[i];
      uint64_t f[6] = {(uint64_t)w->oom, (uint64_t)w->ignored, w->device_mallocs, w->device_frees, w->device_maps,
                       w->device_unmaps};
      for (int k = 0; k < 6; k++) seen[k] += f[k];
    }
    replay_observer obs[2] = {{&l1, log_event, NULL}, {&l2, log_event, NULL}};
    for (int run = 0; run < 4; run++) { /* two observers; one (the model kept, reset); checked; one, a new engine */
      replay_config cfg = {.spec = &spec, .capacity = 600 * MIB, .observers = obs, .nobservers = run ? 1 : 2,
                           .check_level = run == 2 ? 2 : 0};
      replay_array_source as;
      replay_source src = replay_array_source_init(&as, b.ev, b.n);
      replay_result r;
      l1.n = l2.n = 0;
      int rc = run == 3 ? replay_run(&cfg, &src, &r, err, sizeof err) : replay_engine_run(kept, &cfg, &src, &r, err, sizeof err);
      CHECK_EQ(rc, 0);
      CHECK(r.ooms > 0);
      char what[128];
      snprintf(what, sizeof what, "%s, run %d", models[m], run);
      CHECK_EQ(outcomes_differ(what, &l1, want, b.n), 0);
      if (run == 0) CHECK_EQ(outcomes_differ(what, &l2, want, b.n), 0);
      replay_result_release(&r);
    }
    sim_spec_release(&spec);
  }
  for (int k = 0; k < 6; k++) CHECK(seen[k] > 0);
  replay_engine_free(kept);
  free(want);
  free(l1.o);
  free(l2.o);
  free(b.ev);
}

/* The same for torch from a recorded start on device 0 (two segments, three live blocks): the
 * preexisting allocations take their blocks, and the first action on the device is told against
 * the state it started in, not against an empty one; a kept engine restores it again. */
static void observers_told_from_a_start_state(void) {
  const uint64_t seg = UINT64_C(0x100000000000), small = UINT64_C(0x100100000000);
  sim_walk_item items[] = {
    {.is_segment = 1, .addr = seg, .size = 20 * MIB, .pool = 1},
    {.addr = seg, .requested = 6 * MIB, .state = SIM_BLOCK_ALLOCATED},
    {.addr = seg + 8 * MIB, .requested = 4 * MIB, .state = SIM_BLOCK_ALLOCATED},
    {.is_segment = 1, .addr = small, .size = 2 * MIB, .pool = 0},
    {.addr = small, .requested = 4096, .state = SIM_BLOCK_ALLOCATED},
  };
  uint64_t trace_addr[] = {0, 0xa000, 0xb000, 0, 0xc000};
  replay_start st = {.device = 0, .items = items, .trace_addr = trace_addr, .n = 5, .nsegments = 2, .nblocks = 3};
  evbuf b = {0}, more = outcome_trace(3000, 9);
  for (size_t k = 0; k < 5; k++)
    if (trace_addr[k]) add(&b, SIM_EV_ALLOC, trace_addr[k], items[k].requested)->flags = SIM_EVF_PREEXISTING;
  add(&b, SIM_EV_FREE, 0xb000, 0); /* the device's first action */
  for (size_t i = 0; i < more.n; i++) {
    sim_event *e = add(&b, more.ev[i].kind, more.ev[i].addr, more.ev[i].size);
    e->device = more.ev[i].device, e->stream = more.ev[i].stream;
  }
  add(&b, SIM_EV_FREE_REQUESTED, 0xc000, 0);
  add(&b, SIM_EV_FREE_COMPLETED, 0xc000, 0);
  sim_spec spec;
  char err[512];
  CHECK_EQ(sim_spec_parse(&spec, "torch", err, sizeof err), 0);
  replay_outcome *want = sim_xcalloc(b.n, sizeof *want);
  ref_replay ref = {.spec = &spec, .capacity = 600 * MIB, .start = &st};
  for (size_t i = 0; i < b.n; i++) ref_event(&ref, &b.ev[i], &want[i]);
  ref_release(&ref);
  CHECK(want[0].placement.handle && want[3].reserved_delta == 0); /* taken, and a free into the cache */
  outcome_log l = {sim_xcalloc(b.n, sizeof *l.o), 0};
  replay_observer obs = {&l, log_event, NULL};
  replay_engine *kept = replay_engine_new();
  replay_plan plan;
  CHECK_EQ(replay_plan_build(&plan, b.ev, b.n), 0);
  for (int run = 0; run < 4; run++) { /* then the same planned */
    replay_config cfg = {.spec = &spec, .capacity = 600 * MIB, .observers = &obs, .nobservers = 1, .start = &st,
                         .nstart = 1};
    replay_array_source as;
    replay_source src = replay_array_source_planned(&as, b.ev, b.n, run >= 2 ? &plan : NULL);
    replay_result r;
    l.n = 0;
    CHECK_EQ(replay_engine_run(kept, &cfg, &src, &r, err, sizeof err), 0);
    CHECK_EQ(r.allocs >= 3, 1);
    const char *what[] = {"start", "start, kept", "start, planned", "start, planned, kept"};
    CHECK_EQ(outcomes_differ(what[run], &l, want, b.n), 0);
    replay_result_release(&r);
  }
  replay_plan_release(&plan);
  replay_engine_free(kept);
  sim_spec_release(&spec);
  free(want);
  free(l.o);
  free(b.ev);
  free(more.ev);
}

/* A device that starts from a state is in use before its first allocation: a cache release that
 * comes first releases the cached segments it started with (a window whose start has no live
 * block, only cached ones), and a trace that never allocates still counts the start in its
 * figures. Both ways, new engine and kept. */
static void a_start_state_is_in_use_before_any_allocation(void) {
  const uint64_t seg = UINT64_C(0x100000000000), small = UINT64_C(0x100100000000);
  sim_walk_item items[] = {
    {.is_segment = 1, .addr = seg, .size = 20 * MIB, .pool = 1},
    {.is_segment = 1, .addr = small, .size = 2 * MIB, .pool = 0},
  };
  uint64_t trace_addr[] = {0, 0};
  replay_start st = {.device = 0, .items = items, .trace_addr = trace_addr, .n = 2, .nsegments = 2};
  evbuf released = {0}, idle = {0};
  add(&released, SIM_EV_EMPTY_CACHE, 0, 0);
  add(&released, SIM_EV_ALLOC, 0xa000, 6 * MIB); /* a new 20 MiB segment: the cached one is gone */
  add(&idle, SIM_EV_KERNEL, 0, 0);
  sim_spec spec;
  char err[512];
  CHECK_EQ(sim_spec_parse(&spec, "torch", err, sizeof err), 0);
  replay_config cfg = {.spec = &spec, .capacity = 600 * MIB, .start = &st, .nstart = 1};
  replay_engine *kept = replay_engine_new();
  for (int run = 0; run < 2; run++) {
    replay_engine *e = run ? kept : NULL;
    replay_array_source as;
    replay_source src = replay_array_source_init(&as, released.ev, released.n);
    replay_result r;
    CHECK_EQ(e ? replay_engine_run(e, &cfg, &src, &r, err, sizeof err) : replay_run(&cfg, &src, &r, err, sizeof err), 0);
    CHECK_EQ(r.peak_reserved, (int64_t)(22 * MIB));
    CHECK_EQ(r.device_frees, 2);
    CHECK_EQ(r.device_mallocs, 1);
    CHECK_EQ(r.final_reserved, (int64_t)(20 * MIB));
    replay_result_release(&r);
    src = replay_array_source_init(&as, idle.ev, idle.n);
    CHECK_EQ(e ? replay_engine_run(e, &cfg, &src, &r, err, sizeof err) : replay_run(&cfg, &src, &r, err, sizeof err), 0);
    CHECK_EQ(r.ndevices, 1);
    CHECK_EQ(r.peak_reserved, (int64_t)(22 * MIB));
    CHECK_EQ(r.final_reserved, (int64_t)(22 * MIB));
    replay_result_release(&r);
  }
  replay_engine_free(kept);
  sim_spec_release(&spec);
  free(released.ev);
  free(idle.ev);
}

/* Runs of one kept engine that start from a recorded state, the model keeping what it restored
 * for the next run that starts as it did (allocator.h, `save`), give what new engines give: the
 * same states again, another state, the same on a device of another capacity or address order,
 * after a run from no state, and under a model that keeps nothing. */
static void kept_start_state_matches_a_restore(void) {
  const uint64_t seg = UINT64_C(0x100000000000), seg2 = UINT64_C(0x200000000000);
  sim_walk_item one[] = {
    {.is_segment = 1, .addr = seg, .size = 20 * MIB, .pool = 1},
    {.addr = seg, .requested = 6 * MIB, .state = SIM_BLOCK_ALLOCATED},
    {.addr = seg + 8 * MIB, .requested = 4 * MIB, .state = SIM_BLOCK_PENDING_FREE},
    {.is_segment = 1, .addr = seg2, .size = 2 * MIB, .pool = 0},
    {.addr = seg2 + 4096, .requested = 1000, .state = SIM_BLOCK_ALLOCATED},
  };
  sim_walk_item two[5];
  memcpy(two, one, sizeof one);
  two[1].requested = 3 * MIB; /* another state: one block smaller */
  uint64_t trace_addr[] = {0, 0xa000, 0xb000, 0, 0xc000};
  replay_start s1 = {.device = 0, .items = one, .trace_addr = trace_addr, .n = 5, .nsegments = 2, .nblocks = 3};
  replay_start s2 = s1;
  s2.items = two;
  evbuf b = {0}, more = outcome_trace(3000, 5);
  add(&b, SIM_EV_ALLOC, 0xa000, 6 * MIB)->flags = SIM_EVF_PREEXISTING;
  add(&b, SIM_EV_ALLOC, 0xc000, 1000)->flags = SIM_EVF_PREEXISTING;
  for (size_t i = 0; i < more.n; i++) *add(&b, more.ev[i].kind, more.ev[i].addr, more.ev[i].size) = more.ev[i];
  add(&b, SIM_EV_FREE, 0xa000, 0);
  add(&b, SIM_EV_FREE_COMPLETED, 0xb000, 0);
  const char *models[] = {"torch", "torch:expandable_segments:True", "bfc"};
  struct {
    const replay_start *start;
    uint64_t capacity;
    int address_order;
  } runs[] = {{&s1, UINT64_MAX, SIM_VA_DOWN}, {&s1, UINT64_MAX, SIM_VA_DOWN}, {&s2, UINT64_MAX, SIM_VA_DOWN},
              {&s1, UINT64_MAX, SIM_VA_DOWN}, {&s1, 300 * MIB, SIM_VA_DOWN},  {&s1, 300 * MIB, SIM_VA_UP},
              {&s1, 300 * MIB, SIM_VA_UP},    {&s1, UINT64_MAX, SIM_VA_UP},   {NULL, UINT64_MAX, SIM_VA_DOWN},
              {&s1, UINT64_MAX, SIM_VA_DOWN}, {&s1, UINT64_MAX, SIM_VA_DOWN}};
  replay_engine *kept = replay_engine_new();
  for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
    sim_spec spec;
    char err[512];
    CHECK_EQ(sim_spec_parse(&spec, models[m], err, sizeof err), 0);
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++)
      for (int way = 0; way < 3; way++) { /* full, lean, and checked after every event (the model's
                                             invariants hold in a state loaded back, not only its results) */
        replay_config cfg = {.spec = &spec, .capacity = runs[r].capacity, .address_order = runs[r].address_order,
                             .timeline_points = 64, .top_sites = 5, .start = runs[r].start,
                             .nstart = runs[r].start ? 1 : 0, .lean = way == 1, .check_level = way == 2 ? 2 : 0};
        replay_array_source as;
        replay_source src = replay_array_source_init(&as, b.ev, b.n);
        replay_result a, n;
        CHECK_EQ(replay_engine_run(kept, &cfg, &src, &a, err, sizeof err), 0);
        src = replay_array_source_init(&as, b.ev, b.n);
        CHECK_EQ(replay_run(&cfg, &src, &n, err, sizeof err), 0);
        CHECK(a.allocs > 2 && a.ooms == n.ooms);
        check_same_result(&n, &a);
        replay_result_release(&a);
        replay_result_release(&n);
      }
    sim_spec_release(&spec);
  }
  replay_engine_free(kept);
  free(b.ev);
  free(more.ev);
}

/* ---- a planned replay (source.h: replay_plan) ------------------------------------------------- */

/* What a plan numbers on a trace of every case: records taken back most recently freed first, a
 * duplicate allocation and a free naming the record their address holds, a free of nothing and
 * the other kinds naming none. */
static void plan_numbers_the_records(void) {
  evbuf b = {0};
  add(&b, SIM_EV_ALLOC, 0xa0, 10);
  add(&b, SIM_EV_ALLOC, 0xb0, 10);
  add(&b, SIM_EV_ALLOC, 0xa0, 10); /* a duplicate */
  add(&b, SIM_EV_FREE_REQUESTED, 0xa0, 0);
  add(&b, SIM_EV_ALLOC, 0xc0, 10);
  add(&b, SIM_EV_FREE_COMPLETED, 0xa0, 0); /* record 0 back */
  add(&b, SIM_EV_FREE, 0xd0, 0);           /* never allocated */
  add(&b, SIM_EV_KERNEL, 0, 0);
  add(&b, SIM_EV_FREE, 0xb0, 0); /* record 1 back */
  add(&b, SIM_EV_ALLOC, 0xe0, 10);
  add(&b, SIM_EV_ALLOC, 0xf0, 10);
  add(&b, SIM_EV_FREE_COMPLETED, 0xa0, 0); /* already freed */
  add(&b, SIM_EV_HOST_ALLOC, 0xe0, 10);
  add(&b, SIM_EV_FREE_REQUESTED, 0xf0, 0);
  add(&b, SIM_EV_FREE_REQUESTED, 0xf0, 0); /* requested twice: the record is still held */
  const uint32_t N = REPLAY_PLAN_NONE;
  const uint32_t want[] = {0, 1, 0, 0, 2, 0, N, N, 1, 1, 0, N, N, 0, 0};
  replay_plan p;
  CHECK_EQ(replay_plan_build(&p, b.ev, b.n), 0);
  CHECK(p.events == b.ev && p.n == b.n);
  CHECK_EQ(p.nslots, 3);
  for (size_t i = 0; i < b.n; i++) CHECK_EQ(p.slot[i], want[i]);
  replay_plan_release(&p);
  CHECK(p.slot == NULL);
  replay_plan_release(&p); /* a released plan may be released again */
  CHECK_EQ(replay_plan_build(&p, b.ev, 0), 0);
  CHECK_EQ(p.nslots, 0);
  replay_plan_release(&p);
  free(b.ev);
}

/* The reference for the planner: a plain array of the addresses each record holds, searched whole,
 * and a stack of the records given back. */
static uint32_t ref_step(uint64_t *addr_of, uint8_t *held, uint32_t *spare, size_t *nspare, uint32_t *next,
                         const sim_event *ev) {
  uint32_t r = REPLAY_PLAN_NONE;
  if (ev->kind != SIM_EV_ALLOC && !sim_kind_is_free(ev->kind)) return r;
  for (uint32_t k = 0; k < *next; k++)
    if (held[k] && addr_of[k] == ev->addr) r = k;
  if (ev->kind == SIM_EV_ALLOC) {
    if (r != REPLAY_PLAN_NONE) return r;
    r = *nspare ? spare[--*nspare] : (*next)++;
    held[r] = 1, addr_of[r] = ev->addr;
    return r;
  }
  if (r == REPLAY_PLAN_NONE || ev->kind == SIM_EV_FREE_REQUESTED) return r;
  held[r] = 0;
  spare[(*nspare)++] = r;
  return r;
}

/* The planner numbers as a plain map of addresses with a stack of records given back would, over
 * many events: a third of the addresses share their hash's top bits (one home, one long probe
 * run), the table grown past its first size and emptied again, 0 and UINT64_MAX among them. */
static void planner_numbers_as_a_map_would(void) {
  uint64_t inv = UINT64_C(0x9E3779B97F4A7C15); /* the hash's multiplier, inverted mod 2^64 (Newton) */
  for (int k = 0; k < 6; k++) inv *= 2 - UINT64_C(0x9E3779B97F4A7C15) * inv;
  CHECK(inv * UINT64_C(0x9E3779B97F4A7C15) == 1);
  enum { NADDR = 1200, NEV = 40000 };
  uint64_t pool[NADDR];
  for (int k = 0; k < NADDR; k++) /* hashes below 2^47 (home 0 in any table of up to 2^17 slots), the rest plain */
    pool[k] = k < 400 ? ((uint64_t)(k / 4) << 40 | (uint64_t)(k % 4)) * inv : UINT64_C(0x7f0000000000) + (uint64_t)k * 512;
  pool[400] = 0;
  pool[401] = UINT64_MAX;
  evbuf b = {0};
  uint64_t x = 7;
  for (int i = 0; i < NEV; i++) {
    x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
    int phase = i / 10000 % 2; /* grows the live set, then lets it fall */
    unsigned r = (unsigned)(x >> 33) % 100;
    uint64_t a = pool[(x >> 13) % NADDR];
    int kind = r < (phase ? 30u : 60u) ? SIM_EV_ALLOC
               : r < 80 ? SIM_EV_FREE
               : r < 88 ? SIM_EV_FREE_REQUESTED
               : r < 96 ? SIM_EV_FREE_COMPLETED
                        : SIM_EV_KERNEL;
    add(&b, kind, a, 8);
  }
  uint64_t addr_of[NADDR + 1];
  uint8_t held[NADDR + 1] = {0};
  uint32_t spare[NADDR + 1], next = 0;
  size_t nspare = 0, most = 0, live = 0;
  replay_planner pl;
  replay_planner_init(&pl);
  for (size_t i = 0; i < b.n; i++) {
    uint32_t want = ref_step(addr_of, held, spare, &nspare, &next, &b.ev[i]);
    uint32_t got = replay_planner_step(&pl, &b.ev[i]);
    if (got != want) {
      fprintf(stderr, "event %zu: kind %d addr %llx: number %u, want %u\n", i, b.ev[i].kind, (unsigned long long)b.ev[i].addr, got, want);
      CHECK(0);
      break;
    }
    live = next - nspare;
    if (live > most) most = live;
  }
  CHECK(most > 300 && live < most / 2); /* the index grew and emptied again */
  CHECK(!pl.full);
  replay_planner_release(&pl);
  free(b.ev);
}

/* A plan holds the size and address of each allocation on the stream and device of its first
 * allocation that does not begin a window, and tells the loop to read the event of any other. */
static void plan_holds_allocation_arguments(void) {
  evbuf b = {0};
  add(&b, SIM_EV_ALLOC, 0xa0, 10)->flags = SIM_EVF_PREEXISTING; /* begins the window: the event */
  add(&b, SIM_EV_ALLOC, 0xb0, 20)->stream = 7;                  /* the plan's stream, device 0 */
  add(&b, SIM_EV_ALLOC, 0xc0, 30)->stream = 8;                  /* another stream */
  sim_event *other = add(&b, SIM_EV_ALLOC, 0xd0, 40);           /* another device */
  other->stream = 7;
  other->device = -1;
  add(&b, SIM_EV_ALLOC, 0xe0, 0)->stream = 7; /* an allocation of nothing is one */
  add(&b, SIM_EV_FREE, 0xb0, 0);
  add(&b, SIM_EV_KERNEL, 0x10, 64);
  add(&b, SIM_EV_HOST_ALLOC, 0xf0, 50)->stream = 7;
  const replay_alloc_arg E = {REPLAY_ARG_EVENT, 0}, Z = {0, 0};
  const replay_alloc_arg want[] = {E, {20, 0xb0}, E, E, {0, 0xe0}, Z, Z, Z};
  replay_plan p;
  CHECK_EQ(replay_plan_build(&p, b.ev, b.n), 0);
  CHECK_EQ(p.arg_stream, 7);
  CHECK_EQ(p.arg_device, 0);
  for (size_t i = 0; i < b.n; i++) CHECK(p.arg[i].size == want[i].size && p.arg[i].addr == want[i].addr);
  replay_plan_release(&p);
  CHECK(p.arg == NULL);
  free(b.ev);
}

/* A plan gathered from views as their events are copied out is the plan of those events; a view
 * without numbers gives it up. */
static void plan_gathered_from_views(void) {
  evbuf b = outcome_trace(5000, 8);
  replay_plan whole, got;
  CHECK_EQ(replay_plan_build(&whole, b.ev, b.n), 0);
  replay_plan_gather g = {0};
  for (size_t at = 0; at < b.n; at += 1024) /* views of 1,024, the last shorter */
    replay_plan_gather_add(&g, whole.slot + at, b.n - at < 1024 ? b.n - at : 1024);
  CHECK_EQ(replay_plan_gather_end(&g, b.ev, b.n, &got), 0);
  CHECK(got.events == b.ev && got.n == b.n && got.nslots == whole.nslots);
  CHECK(got.slot && !memcmp(got.slot, whole.slot, b.n * sizeof *got.slot));
  CHECK(got.step && !memcmp(got.step, whole.step, b.n)); /* the one-pass steps as the gathered ones */
  CHECK(got.arg && !memcmp(got.arg, whole.arg, b.n * sizeof *got.arg)); /* and the arguments */
  CHECK(got.arg_stream == whole.arg_stream && got.arg_device == whole.arg_device);
  CHECK(g.slot == NULL); /* taken by the plan */
  replay_plan_release(&got);
  replay_plan_gather_add(&g, whole.slot, 1024);
  replay_plan_gather_add(&g, NULL, 1024); /* a view without numbers */
  replay_plan_gather_add(&g, whole.slot + 2048, 1024);
  CHECK_EQ(replay_plan_gather_end(&g, b.ev, 3072, &got), -1);
  CHECK(got.slot == NULL && g.slot == NULL);
  replay_plan_gather_add(&g, whole.slot, 1024);
  CHECK_EQ(replay_plan_gather_end(&g, b.ev, 2048, &got), -1); /* not as many as the events */
  replay_plan_gather_release(&g);
  replay_plan_release(&whole);
  free(b.ev);
}

/* Lends the first half of its events from one array, with their numbers, and the rest from a copy
 * without: a planned replay leaves its plan half-way. `view`: at most so many events a view (0: no
 * limit); the engine must never advance past the events a view lent. */
typedef struct split_source {
  const sim_event *a, *b;
  size_t n, half, pos;
  const replay_plan *plan;
  size_t view, lent;
} split_source;

static const uint32_t *split_slots(void *ctx) {
  split_source *s = ctx;
  return s->pos < s->half ? s->plan->slot + s->pos : NULL;
}

static const uint8_t *split_steps(void *ctx) {
  split_source *s = ctx;
  return s->pos < s->half ? s->plan->step + s->pos : NULL;
}

static const replay_alloc_arg *split_args(void *ctx, int64_t *stream, int *device) {
  split_source *s = ctx;
  *stream = s->plan->arg_stream;
  *device = s->plan->arg_device;
  return s->pos < s->half ? s->plan->arg + s->pos : NULL;
}

static ptrdiff_t split_view(void *ctx, const sim_event **evs) {
  split_source *s = ctx;
  *evs = (s->pos < s->half ? s->a : s->b) + s->pos;
  s->lent = (s->pos < s->half ? s->half : s->n) - s->pos;
  if (s->view && s->lent > s->view) s->lent = s->view;
  return (ptrdiff_t)s->lent;
}

static void split_advance(void *ctx, size_t k) {
  split_source *s = ctx;
  CHECK(k <= s->lent); /* a pair across two views is two steps */
  s->pos += k;
}

static int split_next(void *ctx, sim_event *ev) {
  split_source *s = ctx;
  const sim_event *evs;
  if (split_view(s, &evs) <= 0) return 0;
  *ev = *evs;
  s->pos++;
  return 1;
}

static int split_rewind(void *ctx) {
  ((split_source *)ctx)->pos = 0;
  return 0;
}

/* One replay of t under cfg: planned (0: no plan; 1: the plan; 2: the plan, left half-way), by the
 * kept engine or a new one; the observer's log of outcomes in l. */
static int replay_planned(replay_engine *kept, const replay_config *cfg, const evbuf *t, const evbuf *copy,
                          const replay_plan *plan, int planned, replay_result *r) {
  char err[512];
  replay_array_source as;
  split_source ss = {t->ev, copy->ev, t->n, t->n / 2, 0, plan, 0, 0};
  replay_source src = replay_array_source_planned(&as, t->ev, t->n, planned ? plan : NULL);
  if (planned == 2)
    src = (replay_source){.next = split_next, .ctx = &ss, .view = split_view, .advance = split_advance,
                          .rewind = split_rewind, .length_hint = t->n, .view_slots = split_slots};
  int rc = kept ? replay_engine_run(kept, cfg, &src, r, err, sizeof err) : replay_run(cfg, &src, r, err, sizeof err);
  if (rc) fprintf(stderr, "replay: %s\n", err);
  return rc;
}

/* A planned replay gives what the engine's hash table gives, plain and observed, kept or new, with
 * OOMs, duplicates, frees of nothing and requests twice (outcome_trace), on one device and
 * several, and when the source leaves the plan half-way. So does a lean one (replay_config.lean),
 * planned or not, but for the timeline and the state at the peak, which it does not keep; with a
 * per-event check it is a full replay. A lean replay that nobody observes takes a request and its
 * completion right after it as one free when the allocation is live: outcome_trace has such pairs
 * of live allocations, of ones an OOM dropped and of ones already requested, which it must take
 * one at a time (taking the last two as pairs counts their frees wrong: tried). */
static void planned_replay_matches_unplanned(void) {
  evbuf g = generated(20000, 11);
  evbuf traces[] = {g, outcome_trace(6000, 3), reused(&g)};
  const char *models[] = {"torch", "ideal", "bfc", "async", "cuda", "torch:expandable_segments:True"};
  uint64_t caps[] = {UINT64_MAX, 600 * MIB};
  replay_engine *kept = replay_engine_new();
  for (size_t t = 0; t < 3; t++) {
    evbuf *b = &traces[t], copy = {0};
    sim_grow((void **)&copy.ev, &copy.cap, b->n, sizeof *copy.ev);
    memcpy(copy.ev, b->ev, b->n * sizeof *b->ev);
    copy.n = b->n;
    replay_plan plan;
    CHECK_EQ(replay_plan_build(&plan, b->ev, b->n), 0);
    outcome_log want = {sim_xcalloc(b->n, sizeof *want.o), 0}, got = {sim_xcalloc(b->n, sizeof *got.o), 0};
    for (size_t c = 0; c < 2; c++)
      for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        sim_spec spec;
        char err[512];
        CHECK_EQ(sim_spec_parse(&spec, models[m], err, sizeof err), 0);
        replay_observer ow = {&want, log_event, NULL}, og = {&got, log_event, NULL};
        replay_config plain = {.spec = &spec, .capacity = caps[c], .timeline_points = 64, .top_sites = 5};
        replay_config base = plain, observed = plain, lean = plain, lean_observed = plain, lean_checked = plain;
        base.observers = &ow, base.nobservers = 1;
        observed.observers = &og, observed.nobservers = 1;
        lean.lean = lean_observed.lean = lean_checked.lean = 1;
        lean_observed.observers = &og, lean_observed.nobservers = 1;
        lean_checked.check_level = 2;
        replay_result r0, r;
        want.n = 0;
        CHECK_EQ(replay_planned(NULL, &base, b, &copy, &plan, 0, &r0), 0);
        if (c) CHECK(r0.ooms > 0);
        for (int k = 0; k < 24; k++) { /* planned, then left half-way; plain, then observed; kept, then new;
                                          full, lean, lean unplanned */
          const replay_config *cfg = k & 2 ? (k >= 8 ? &lean_observed : &observed) : (k >= 8 ? &lean : &plain);
          got.n = 0;
          CHECK_EQ(replay_planned(k & 4 ? NULL : kept, cfg, b, &copy, &plan, k >= 16 ? 0 : 1 + (k & 1), &r), 0);
          if (k < 8) check_same_result(&r0, &r);
          else check_lean_result(&r0, &r);
          if (k & 2) {
            char what[160];
            snprintf(what, sizeof what, "%s, trace %zu, cap %zu, way %d", models[m], t, c, k);
            CHECK_EQ(outcomes_differ(what, &got, want.o, b->n), 0);
          }
          replay_result_release(&r);
        }
        CHECK_EQ(replay_planned(NULL, &lean_checked, b, &copy, &plan, 0, &r), 0);
        check_same_result(&r0, &r); /* checked: lean is ignored */
        replay_result_release(&r);
        replay_result_release(&r0);
        /* the plan's numbers of the whole trace hold for a run that starts a third of the way in */
        size_t from = b->n / 3;
        evbuf tail = {b->ev + from, b->n - from, 0};
        split_source ss = {b->ev, NULL, b->n, b->n, from, &plan, 0, 0};
        replay_source src = {.next = split_next, .ctx = &ss, .view = split_view, .advance = split_advance,
                             .view_slots = split_slots};
        CHECK_EQ(replay_planned(NULL, &plain, &tail, &tail, NULL, 0, &r0), 0);
        CHECK_EQ(replay_engine_run(kept, &plain, &src, &r, err, sizeof err), 0);
        check_same_result(&r0, &r);
        replay_result_release(&r0);
        replay_result_release(&r);
        sim_spec_release(&spec);
      }
    replay_plan_release(&plan);
    free(want.o);
    free(got.o);
    free(copy.ev);
    free(b->ev);
  }
  replay_engine_free(kept);
}

/* A planned replay nobody observes takes the common events of a run on one device its own way
 * (engine.c: plain_run), leaving the rest to replay_event: full, it must give what the engine's
 * hash table gives, and lean the same figures, where every case of outcome_trace comes on one
 * device (OOMs, allocations an OOM dropped and their frees, duplicates, frees of nothing, requests
 * twice or never completed, cache releases and synchronizations, kernels), with allocations of
 * nothing and on device -1 (device 0) among them, stopping at the first OOM or not, from a start
 * state or not, new engine or kept. */
static void planned_replay_on_one_device_matches_unplanned(void) {
  evbuf b = {0}, more = outcome_trace(6000, 7);
  const uint64_t seg = UINT64_C(0x100000000000);
  sim_walk_item items[] = {
    {.is_segment = 1, .addr = seg, .size = 20 * MIB, .pool = 1},
    {.addr = seg, .requested = 6 * MIB, .state = SIM_BLOCK_ALLOCATED},
    {.addr = seg + 8 * MIB, .requested = 4 * MIB, .state = SIM_BLOCK_ALLOCATED},
  };
  uint64_t trace_addr[] = {0, 0xa000, 0xb000};
  replay_start st = {.device = 0, .items = items, .trace_addr = trace_addr, .n = 3, .nsegments = 1, .nblocks = 2};
  for (size_t k = 1; k < 3; k++) add(&b, SIM_EV_ALLOC, trace_addr[k], items[k].requested)->flags = SIM_EVF_PREEXISTING;
  size_t zero = 0, host = 0;
  for (size_t i = 0; i < more.n; i++) {
    const sim_event *m = &more.ev[i];
    sim_event *e = add(&b, m->kind, m->addr, m->size);
    e->stream = m->stream;
    e->device = m->device > 0 ? 0 : m->device; /* device -1 stays: an allocation there is device 0's */
    if (m->kind == SIM_EV_ALLOC && i % 53 == 0) e->size = 0, zero++;
    if (m->kind == SIM_EV_ALLOC && i % 7 == 0) e->device = -1, host++;
  }
  add(&b, SIM_EV_FREE, 0xa000, 0);
  /* requests whose completions do not come next: another event between, another address next */
  for (int k = 0; k < 2; k++) {
    add(&b, SIM_EV_ALLOC, 0xc000, 3 * MIB);
    add(&b, SIM_EV_ALLOC, 0xd000, 5 * MIB);
    add(&b, SIM_EV_FREE_REQUESTED, 0xc000, 0);
    if (k) add(&b, SIM_EV_KERNEL, 0, 0);
    add(&b, SIM_EV_FREE_REQUESTED, 0xd000, 0);
    add(&b, SIM_EV_FREE_COMPLETED, 0xc000, 0);
    add(&b, SIM_EV_FREE_COMPLETED, 0xd000, 0);
  }
  CHECK(zero > 0 && host > 0);
  replay_plan plan;
  CHECK_EQ(replay_plan_build(&plan, b.ev, b.n), 0);
  size_t nsteps[REPLAY_STEP_PAIR + 1] = {0};
  for (size_t i = 0; i < b.n; i++) nsteps[plan.step[i]]++;
  for (int k = REPLAY_STEP_OTHER; k <= REPLAY_STEP_PAIR; k++) CHECK(nsteps[k] > 0); /* every step is there */
  size_t held = 0, read = 0; /* allocations the plan's arguments hold, and ones whose events are read */
  for (size_t i = 0; i < b.n; i++)
    if (b.ev[i].kind == SIM_EV_ALLOC) *(plan.arg[i].size == REPLAY_ARG_EVENT ? &read : &held) += 1;
  CHECK(plan.arg_device == -1 && held > 100 && read > 1000); /* device -1's, on one stream of three */
  const char *models[] = {"torch", "ideal", "bfc", "async", "cuda", "torch:expandable_segments:True"};
  replay_engine *kept = replay_engine_new();
  for (size_t m = 0; m < sizeof models / sizeof *models; m++)
    for (int c = 0; c < 8; c++) { /* capacity, stop at the first OOM, start state */
      sim_spec spec;
      char err[512];
      CHECK_EQ(sim_spec_parse(&spec, models[m], err, sizeof err), 0);
      int started = (c & 4) && spec.ops->restore;
      replay_config full = {.spec = &spec, .capacity = c & 1 ? 600 * MIB : UINT64_MAX, .stop_at_oom = (c & 2) != 0,
                            .timeline_points = 64, .top_sites = 5, .start = started ? &st : NULL,
                            .nstart = started ? 1 : 0};
      replay_config lean = full;
      lean.lean = 1;
      replay_result r0, r;
      replay_array_source as;
      replay_source src = replay_array_source_init(&as, b.ev, b.n);
      CHECK_EQ(replay_run(&full, &src, &r0, err, sizeof err), 0);
      if (c & 1) CHECK(r0.ooms > 0 && r0.stopped_at_oom == ((c & 2) != 0));
      if (!(c & 2)) CHECK(r0.duplicate_allocs > 0 && r0.unknown_frees > 0 && r0.events == b.n);
      /* lean, then full; new engine, then kept; the plan's steps and arguments, none, steps in
       * views of 5 events, steps and arguments in views of 5 */
      for (int k = 0; k < 16; k++) {
        const replay_config *cfg = k % 4 < 2 ? &lean : &full;
        split_source ss = {b.ev, NULL, b.n, b.n, 0, &plan, k < 8 ? 0 : 5, 0}; /* all planned */
        src = k < 4 ? replay_array_source_planned(&as, b.ev, b.n, &plan)
                    : (replay_source){.next = split_next, .ctx = &ss, .view = split_view, .advance = split_advance,
                                      .view_slots = split_slots, .plan_records = plan.nslots,
                                      .view_steps = k >= 8 ? split_steps : NULL,
                                      .view_args = k >= 12 ? split_args : NULL};
        CHECK_EQ(k & 1 ? replay_engine_run(kept, cfg, &src, &r, err, sizeof err) : replay_run(cfg, &src, &r, err, sizeof err), 0);
        if (k % 4 < 2) check_lean_result(&r0, &r);
        else check_same_result(&r0, &r);
        CHECK_EQ(r.events, r0.events);
        CHECK_EQ(r.stopped_at_oom, r0.stopped_at_oom);
        replay_result_release(&r);
      }
      replay_result_release(&r0);
      sim_spec_release(&spec);
    }
  replay_engine_free(kept);
  replay_plan_release(&plan);
  free(b.ev);
  free(more.ev);
}

int main(void) {
  RUN(peaks_and_composition);
  RUN(ooms_continue_or_stop);
  RUN(requested_then_completed);
  RUN(devices_and_host_memory);
  RUN(timeline_keeps_maxima);
  RUN(observers_see_every_event);
  RUN(memory_grows_with_live_set_not_trace);
  RUN(peak_state_taken_when_it_changes);
  RUN(kept_engine_matches_new_engines);
  RUN(kept_start_state_matches_a_restore);
  RUN(plain_replay_matches_checked_and_observed);
  RUN(observers_told_what_the_model_did);
  RUN(observers_told_from_a_start_state);
  RUN(a_start_state_is_in_use_before_any_allocation);
  RUN(plan_numbers_the_records);
  RUN(plan_holds_allocation_arguments);
  RUN(planner_numbers_as_a_map_would);
  RUN(plan_gathered_from_views);
  RUN(planned_replay_matches_unplanned);
  RUN(planned_replay_on_one_device_matches_unplanned);
  TEST_MAIN_END();
}

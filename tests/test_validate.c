/* test_validate.c: validate on recordings made by the torch model itself: every feature of the format, whole and cut. */
#include <inttypes.h>
#include <unistd.h>

#include "store/store.h"
#include "validate/validate.h"
#include "sim/alloc_torch.h"
#include "sim/hashmap.h"
#include "test.h"

/*
 * A recording is made the way PyTorch makes one: the model serves a random workload (two
 * streams, small and large requests, frees completed at once or later as after record_stream,
 * empty_cache() now and then, a device small enough for cudaMalloc to fail) through a device
 * that logs every segment_alloc/free/map/unmap, and an oom entry is logged where a request
 * fails. The trace then holds the requests, those actions between them, and the final state;
 * a cut recording drops everything before some request and lists the blocks live there as
 * preexisting, with only their requested sizes, as the snapshot importer does. validate must
 * agree with every one of them, whatever the cut hides.
 */

int test_failures;

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

enum { A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_OOM };
static const char *const act_names[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom"};

typedef struct act {
  int64_t before; /* events written before it */
  int action;
  uint64_t addr, size;
  int64_t stream;
} act;

typedef struct range {
  uint64_t addr, size;
  int64_t stream;
} range;

typedef struct recdev {
  sim_device d;
  uint64_t next;
  int64_t events;    /* requests so far */
  int64_t stream;    /* the request being served */
  act *acts;
  size_t nacts, cap;
  range *ranges;     /* segments and reservations, for the stream of a release */
  size_t nranges, rcap;
} recdev;

static void log_act(recdev *r, int action, uint64_t addr, uint64_t size, int64_t stream) {
  sim_grow((void **)&r->acts, &r->cap, r->nacts + 1, sizeof *r->acts);
  r->acts[r->nacts++] = (act){r->events, action, addr, size, stream};
}

static int64_t stream_of(recdev *r, uint64_t addr) {
  for (size_t i = 0; i < r->nranges; i++)
    if (addr >= r->ranges[i].addr && addr - r->ranges[i].addr < r->ranges[i].size) return r->ranges[i].stream;
  return 0;
}

static void add_range(recdev *r, uint64_t addr, uint64_t size, int64_t stream) {
  sim_grow((void **)&r->ranges, &r->rcap, r->nranges + 1, sizeof *r->ranges);
  r->ranges[r->nranges++] = (range){addr, size, stream};
}

static int rd_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  recdev *r = ctx;
  if (r->d.used + size > r->d.capacity) return SIM_EOOM;
  *addr = r->next;
  r->next += (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB;
  r->d.used += size;
  add_range(r, *addr, size, stream);
  log_act(r, A_SEG_ALLOC, *addr, size, stream);
  return SIM_OK;
}

static int rd_free(void *ctx, uint64_t addr, uint64_t size) {
  recdev *r = ctx;
  r->d.used -= size;
  log_act(r, A_SEG_FREE, addr, size, stream_of(r, addr));
  return SIM_OK;
}

static int rd_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  recdev *r = ctx;
  *addr = r->next;
  r->next += size + 64 * MiB;
  add_range(r, *addr, size, r->stream);
  return SIM_OK;
}

static int rd_unreserve(void *ctx, uint64_t addr, uint64_t size) {
  (void)ctx, (void)addr, (void)size;
  return SIM_OK;
}

static int rd_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  recdev *r = ctx;
  if (r->d.used + size > r->d.capacity) return SIM_EOOM;
  r->d.used += size;
  log_act(r, A_SEG_MAP, addr, size, stream);
  return SIM_OK;
}

static int rd_unmap(void *ctx, uint64_t addr, uint64_t size) {
  recdev *r = ctx;
  r->d.used -= size;
  log_act(r, A_SEG_UNMAP, addr, size, stream_of(r, addr));
  return SIM_OK;
}

static const sim_device_ops recdev_ops = {
  .size = sizeof(sim_device_ops),
  .malloc = rd_malloc, .free = rd_free, .reserve = rd_reserve, .unreserve = rd_unreserve,
  .map = rd_map, .unmap = rd_unmap,
};

/* ---- the workload -------------------------------------------------------------------------------- */

typedef struct live {
  uint64_t addr, size;
  int64_t stream;
  uintptr_t handle;
  int waiting; /* free requested; completes at step `due` */
  int due;
} live;

typedef struct ev {
  int kind; /* SIM_EV_* */
  uint64_t addr, size;
  int64_t stream;
} ev;

typedef struct recording {
  ev *evs;
  size_t nev, evcap;
  act *acts;
  size_t nacts;
  sim_walk_item *final;
  size_t nfinal, fcap;
  sim_walk_item *at_cut; /* the state just before event `cut` */
  size_t nat_cut, ccap;
  int64_t cut;
  uint64_t allocs, ooms, empty_caches, delayed;
} recording;

static uint64_t rng;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void emit(recording *rec, recdev *r, int kind, uint64_t addr, uint64_t size, int64_t stream) {
  sim_grow((void **)&rec->evs, &rec->evcap, rec->nev + 1, sizeof *rec->evs);
  rec->evs[rec->nev++] = (ev){kind, addr, size, stream};
  r->events++;
}

typedef struct collector {
  sim_walk_item **v;
  size_t *n, *cap;
} collector;

static int collect(void *arg, const sim_walk_item *it) {
  collector *c = arg;
  sim_grow((void **)c->v, c->cap, *c->n + 1, sizeof **c->v);
  (*c->v)[(*c->n)++] = *it;
  return 0;
}

static const int64_t side_stream = INT64_C(94000000000000); /* a cudaStream_t as PyTorch records it */

static uint64_t pick_size(void) {
  uint64_t k = rnd() % 100;
  if (k < 45) return 1 + rnd() % MiB;                       /* small pool */
  if (k < 85) return MiB + 1 + rnd() % (9 * MiB);           /* 1-10 MiB: 20 MiB segments */
  return 10 * MiB + rnd() % (90 * MiB);                     /* their own segments */
}

static int find_state(void *arg, const sim_walk_item *it) {
  uint64_t *q = arg; /* q[0]: address sought, q[1]: its state, when found */
  if (!it->is_segment && it->addr == q[0]) q[1] = (uint64_t)it->state + 1;
  return 0;
}

/* A failed cudaMalloc makes release_cached_blocks synchronize: the waiting blocks it completed
 * get their free_completed entries there, before the releases logged during the call. */
static void synchronized(recording *rec, recdev *r, sim_allocator *a, live *lv, size_t *nlive, size_t acts_before) {
  int64_t at = r->events;
  for (size_t i = 0; i < *nlive; i++) {
    if (!lv[i].waiting) continue;
    uint64_t q[2] = {lv[i].addr, 0};
    a->ops->walk(a->ctx, find_state, q);
    if (q[1] == SIM_BLOCK_PENDING_FREE + 1) continue;
    emit(rec, r, SIM_EV_FREE_COMPLETED, lv[i].addr, lv[i].size, lv[i].stream);
    lv[i--] = lv[--*nlive];
  }
  for (size_t k = acts_before; k < r->nacts; k++)
    if (r->acts[k].before == at) r->acts[k].before = r->events;
}

/* Runs `steps` requests through a fresh model with `spec` on a device of `capacity` bytes. */
static void record(recording *rec, const char *spec, uint64_t capacity, uint64_t total, int steps, int64_t cut_at) {
  memset(rec, 0, sizeof *rec);
  recdev r;
  memset(&r, 0, sizeof r);
  r.d.ops = &recdev_ops;
  r.d.ctx = &r;
  r.d.capacity = capacity;
  r.d.total_memory = r.d.free_memory = total;
  r.next = UINT64_C(0x7f0000000000);
  sim_spec sp;
  sim_allocator a;
  char err[SIM_ERRLEN];
  if (sim_spec_parse(&sp, spec, err, sizeof err) || sim_allocator_init(&a, &sp, &r.d, NULL, NULL, err, sizeof err)) {
    fprintf(stderr, "cannot make '%s': %s\n", spec, err);
    exit(1);
  }
  live *lv = NULL;
  size_t nlive = 0, lcap = 0;
  rec->cut = -1;
  for (int step = 0; step < steps; step++) {
    if (cut_at >= 0 && rec->cut < 0 && r.events >= cut_at) { /* the window starts here */
      rec->cut = r.events;
      collector c = {&rec->at_cut, &rec->nat_cut, &rec->ccap};
      a.ops->walk(a.ctx, collect, &c);
    }
    /* frees whose stream uses are done */
    for (size_t i = 0; i < nlive; i++)
      if (lv[i].waiting && lv[i].due <= step) {
        emit(rec, &r, SIM_EV_FREE_COMPLETED, lv[i].addr, lv[i].size, lv[i].stream);
        a.ops->free_completed(a.ctx, lv[i].handle);
        lv[i--] = lv[--nlive];
      }
    uint64_t k = rnd() % 1000;
    if (k < 8) { /* torch.cuda.empty_cache(): it synchronizes first, completing every waiting block */
      for (size_t i = 0; i < nlive; i++)
        if (lv[i].waiting) {
          emit(rec, &r, SIM_EV_FREE_COMPLETED, lv[i].addr, lv[i].size, lv[i].stream);
          lv[i--] = lv[--nlive];
        }
      a.ops->empty_cache(a.ctx);
      rec->empty_caches++;
      continue;
    }
    int active = 0;
    for (size_t i = 0; i < nlive; i++) active += !lv[i].waiting;
    if (k < 520 || active < 4) {
      uint64_t size = pick_size();
      int64_t stream = rnd() % 5 == 0 ? side_stream : 0;
      r.stream = stream;
      sim_placement p;
      size_t acts_before = r.nacts;
      int ok = a.ops->alloc(a.ctx, size, stream, &p) == SIM_OK;
      synchronized(rec, &r, &a, lv, &nlive, acts_before);
      if (ok) {
        emit(rec, &r, SIM_EV_ALLOC, p.addr, size, stream);
        sim_grow((void **)&lv, &lcap, nlive + 1, sizeof *lv);
        lv[nlive++] = (live){p.addr, size, stream, p.handle, 0, 0};
        rec->allocs++;
      } else {
        log_act(&r, A_OOM, 0, sim_torch_round_size(a.ctx, size), stream);
        rec->ooms++;
      }
    } else {
      size_t i;
      do i = rnd() % nlive; while (lv[i].waiting);
      emit(rec, &r, SIM_EV_FREE_REQUESTED, lv[i].addr, lv[i].size, lv[i].stream);
      a.ops->free_requested(a.ctx, lv[i].handle);
      if (rnd() % 6 == 0) { /* used on another stream: free_completed comes later */
        lv[i].waiting = 1;
        lv[i].due = step + 1 + (int)(rnd() % 12);
        rec->delayed++;
      } else {
        emit(rec, &r, SIM_EV_FREE_COMPLETED, lv[i].addr, lv[i].size, lv[i].stream);
        a.ops->free_completed(a.ctx, lv[i].handle);
        lv[i] = lv[--nlive];
      }
    }
    if (a.ops->check(a.ctx, err, sizeof err)) {
      fprintf(stderr, "model broken while recording: %s\n", err);
      test_failures++;
      break;
    }
  }
  collector c = {&rec->final, &rec->nfinal, &rec->fcap};
  a.ops->walk(a.ctx, collect, &c);
  rec->acts = r.acts;
  rec->nacts = r.nacts;
  free(r.ranges);
  free(lv);
  sim_allocator_release(&a);
  sim_spec_release(&sp);
}

static void release_recording(recording *rec) {
  free(rec->evs);
  free(rec->acts);
  free(rec->final);
  free(rec->at_cut);
}

/* ---- storing it as the snapshot importer would -------------------------------------------------- */

static const char *state_name(int s) {
  return s == SIM_BLOCK_ALLOCATED ? "active_allocated" : s == SIM_BLOCK_PENDING_FREE ? "active_pending_free" : "inactive";
}

static int64_t store_recording(store *s, const recording *rec, const char *name, const char *settings, uint64_t total) {
  store_trace meta = {.name = (char *)name, .source_format = (char *)"pytorch_snapshot", .framework = (char *)"pytorch",
                      .allocator = (char *)"torch", .allocator_settings = (char *)settings,
                      .device_memory = (int64_t)total, .device_index = 0};
  store_writer *w;
  if (store_begin(s) || store_writer_begin(s, &meta, &w)) {
    fprintf(stderr, "%s\n", store_error(s));
    exit(1);
  }
  int64_t from = rec->cut >= 0 ? rec->cut : 0, written = 0;
  /* the blocks live where the window starts */
  for (size_t i = 0; rec->cut >= 0 && i < rec->nat_cut; i++) {
    const sim_walk_item *it = &rec->at_cut[i];
    if (it->is_segment || it->state == SIM_BLOCK_FREE) continue;
    sim_event e;
    sim_event_init(&e);
    e.kind = SIM_EV_ALLOC;
    e.mem = SIM_MEM_DEVICE;
    e.flags = SIM_EVF_PREEXISTING;
    e.addr = it->addr;
    e.size = it->requested;
    e.stream = it->stream;
    e.device = 0;
    store_writer_event(w, &e);
    written++;
  }
  size_t ai = 0;
  while (ai < rec->nacts && rec->acts[ai].before < from) ai++;
  for (int64_t k = from; k <= (int64_t)rec->nev; k++) {
    for (; ai < rec->nacts && rec->acts[ai].before == k; ai++) {
      const act *x = &rec->acts[ai];
      store_recorded sr = {.before_seq = written, .action = act_names[x->action], .stream = x->stream,
                           .addr = x->addr, .size = x->size, .allocated = -1, .reserved = -1,
                           .device_free = x->action == A_OOM ? 0 : -1};
      store_writer_recorded(w, &sr);
    }
    if (k == (int64_t)rec->nev) break;
    const ev *x = &rec->evs[k];
    sim_event e;
    sim_event_init(&e);
    e.kind = (uint8_t)x->kind;
    e.mem = SIM_MEM_DEVICE;
    e.addr = x->addr;
    e.size = x->size;
    e.stream = x->stream;
    e.device = 0;
    store_writer_event(w, &e);
    written++;
  }
  uint64_t seg = 0;
  for (size_t i = 0; i < rec->nfinal; i++) {
    const sim_walk_item *it = &rec->final[i];
    if (it->is_segment) {
      seg = it->addr;
      store_segment g = {.device = 0, .address = it->addr, .total_size = it->size, .stream = it->stream,
                         .pool = it->pool ? "large" : "small", .expandable = it->expandable,
                         .allocated_size = -1, .requested_size = -1, .active_size = -1};
      store_writer_segment(w, &g);
    } else {
      store_block b = {.segment_address = seg, .address = it->addr, .size = it->size, .requested_size = it->requested,
                       .state = state_name(it->state)};
      store_writer_block(w, &b);
    }
  }
  int64_t id = store_writer_trace_id(w);
  if (store_writer_end(w) || store_commit(s)) {
    fprintf(stderr, "%s\n", store_error(s));
    exit(1);
  }
  return id;
}

static char dir[256];
static store *st;

/* Records, stores, validates; returns the result. */
static void check_case(const char *name, const char *spec, const char *settings, uint64_t capacity, int steps,
                       double cut_fraction, validate_result *out) {
  static const uint64_t total = 4 * GiB;
  recording rec;
  record(&rec, spec, capacity, total, steps, cut_fraction > 0 ? (int64_t)(cut_fraction * steps) : -1);
  int64_t id = store_recording(st, &rec, name, settings, total);
  store_trace t;
  char ref[32], err[1024];
  snprintf(ref, sizeof ref, "%" PRId64, id);
  CHECK_EQ(store_trace_find(st, ref, &t), 0);
  validate_result *r = out;
  int rc = validate_run(st, &t, r, err, sizeof err);
  CHECK_EQ(rc, 0);
  if (rc) fprintf(stderr, "  %s: %s\n", name, err);
  fprintf(stderr, "  %s: %" PRIu64 " events, %" PRIu64 "/%" PRIu64 " addresses, %" PRIu64 "/%" PRIu64
                  " segment events, %" PRIu64 "/%" PRIu64 " OOMs, %" PRIu64 " empty_cache, %" PRIu64
                  " live at the start (%" PRIu64 " uncertain, %" PRIu64 " passes), final %s\n",
          name, r->events, r->address_matches, r->allocs, r->segment_matches, r->segment_events, r->oom_matches, r->ooms,
          r->empty_cache_calls, r->preexisting, r->uncertain_blocks, r->passes, r->final_state_match ? "match" : "DIFFERS");
  if (r->diverged)
    fprintf(stderr, "  first divergence at %" PRId64 " (%s): expected %s, simulated %s\n", r->first.event, r->first.kind,
            r->first.expected, r->first.simulated);
  CHECK(rec.allocs > 0);
  store_trace_clear(&t);
  release_recording(&rec);
}

static void agrees(const validate_result *r) {
  CHECK(!r->diverged);
  CHECK_EQ(r->address_matches, r->allocs);
  CHECK_EQ(r->segment_matches, r->segment_events);
  CHECK_EQ(r->extra_segment_events, 0);
  CHECK_EQ(r->oom_matches, r->ooms);
  CHECK_EQ(r->extra_ooms, 0);
  CHECK(r->final_state_match);
  CHECK_EQ(r->replayed_peak_reserved >= r->recorded_peak_reserved ? 1 : 0, 1);
}

static const char *plain = "{\"max_split_size\": -1, \"garbage_collection_threshold\": 0.0, \"expandable_segments\": false}";
static const char *expandable = "{\"max_split_size\": -1, \"expandable_segments\": true}";
static const char *split40 = "{\"max_split_size\": 41943040, \"expandable_segments\": false}";

static void whole_recordings_agree(void) {
  validate_result r;
  rng = 1;
  check_case("plain", "torch", plain, 700 * MiB, 3000, 0, &r);
  agrees(&r);
  CHECK(r.ooms > 0);
  CHECK(r.segment_events > 0);
  rng = 2;
  check_case("expandable", "torch:expandable_segments:True", expandable, 700 * MiB, 3000, 0, &r);
  agrees(&r);
  rng = 3;
  check_case("max_split", "torch:max_split_size_mb:40", split40, 700 * MiB, 3000, 0, &r);
  agrees(&r);
}

static void cut_recordings_agree(void) {
  validate_result r;
  for (int seed = 11; seed < 17; seed++) {
    char name[32];
    snprintf(name, sizeof name, "plain-cut-%d", seed);
    rng = (uint64_t)seed;
    check_case(name, "torch", plain, 700 * MiB, 2500, 0.3 + 0.08 * (seed - 11), &r);
    agrees(&r);
    CHECK(r.preexisting > 0);
  }
  for (int seed = 21; seed < 25; seed++) {
    char name[32];
    snprintf(name, sizeof name, "expandable-cut-%d", seed);
    rng = (uint64_t)seed;
    check_case(name, "torch:expandable_segments:True", expandable, 700 * MiB, 2500, 0.3 + 0.1 * (seed - 21), &r);
    agrees(&r);
  }
  for (int seed = 31; seed < 34; seed++) {
    char name[32];
    snprintf(name, sizeof name, "max_split-cut-%d", seed);
    rng = (uint64_t)seed;
    check_case(name, "torch:max_split_size_mb:40", split40, 700 * MiB, 2500, 0.4, &r);
    agrees(&r);
  }
}

/* Recordings with one thing moved must not agree, and must say where. */
static void tampered_recordings_diverge(void) {
  recording rec;
  rng = 5;
  record(&rec, "torch", 700 * MiB, 4 * GiB, 1500, -1);
  /* the second new segment recorded elsewhere: the one at its real address was there all along */
  size_t k = 0;
  while (k < rec.nacts && rec.acts[k].action != A_SEG_ALLOC) k++;
  for (k++; k < rec.nacts && rec.acts[k].action != A_SEG_ALLOC; k++) continue;
  CHECK(k < rec.nacts);
  rec.acts[k].addr += 64 * MiB;
  /* and the 100th allocation recorded 512 bytes higher */
  size_t j = 0;
  for (int seen = 0; j < rec.nev; j++)
    if (rec.evs[j].kind == SIM_EV_ALLOC && ++seen == 100) break;
  uint64_t was = rec.evs[j].addr;
  for (size_t q = j; q < rec.nev; q++)
    if (rec.evs[q].addr == was) {
      rec.evs[q].addr += 512;
      if (q > j && rec.evs[q].kind == SIM_EV_ALLOC) break;
    }
  int64_t id = store_recording(st, &rec, "tampered", plain, 4 * GiB);
  store_trace t;
  char ref[32], err[1024];
  snprintf(ref, sizeof ref, "%" PRId64, id);
  CHECK_EQ(store_trace_find(st, ref, &t), 0);
  validate_result r;
  CHECK_EQ(validate_run(st, &t, &r, err, sizeof err), 0);
  CHECK(r.diverged);
  CHECK_EQ(r.segment_matches + 1, r.segment_events);
  CHECK_EQ(r.address_matches + 1, r.allocs);
  CHECK_EQ(r.first.event, rec.acts[k].before); /* the earlier of the two */
  CHECK_STR(r.first.kind, "segment_alloc");
  CHECK(strstr(r.first.expected, "segment_alloc of 20971520 bytes") != NULL);
  store_trace_clear(&t);
  release_recording(&rec);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/memplay-validate-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  char path[300], err[STORE_ERRLEN];
  snprintf(path, sizeof path, "%s/v.db", dir);
  if (store_open(&st, path, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  RUN(whole_recordings_agree);
  RUN(cut_recordings_agree);
  RUN(tampered_recordings_diverge);
  store_close(st);
  if (getenv("MEMPLAY_TEST_KEEP")) {
    fprintf(stderr, "kept %s\n", path);
    TEST_MAIN_END();
  }
  unlink(path);
  snprintf(path, sizeof path, "%s/v.db-wal", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/v.db-shm", dir);
  unlink(path);
  rmdir(dir);
  TEST_MAIN_END();
}

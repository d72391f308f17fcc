/* validate.c: a recorded PyTorch snapshot replayed through the torch model, decision by decision. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/settings.h"
#include "sim/alloc_torch.h"
#include "sim/hashmap.h"
#include "validate.h"
#include "start_digest.h"

/*
 * The recording (contract: docs/formats.md, "PyTorch memory snapshots") gives three things:
 * the requests (events, the blocks live before the window first, flagged preexisting), what the
 * allocator did between them (recorded segment_alloc/free/map/unmap and oom, each placed before
 * the request it preceded), and the final segments and blocks. A burst of segment_free or
 * segment_unmap between two requests is one of:
 *  - release_cached_blocks after a failed cudaMalloc (an OOM retry): it is followed by the
 *    segment the retry got, or by the oom entry when the retry failed too;
 *  - garbage collection or release_available_cached_blocks inside a request, also followed by
 *    its segment;
 *  - torch.cuda.empty_cache(), followed by nothing, or by a request that the cache could have
 *    served had empty_cache not run first.
 * The replay lets the model decide: the device refuses a cudaMalloc (or page map) whenever the
 * next recorded action is a release or an OOM rather than a new segment, so the model's own
 * retry chain produces the releases, and empty_cache is called for bursts no request explains.
 */

#define MiB (UINT64_C(1) << 20)
#define MAX_PASSES 256
#define DEFAULT_TOTAL_MEMORY (UINT64_C(80) << 30)

enum { R_SEG_ALLOC, R_SEG_FREE, R_SEG_MAP, R_SEG_UNMAP, R_OOM, R_OTHER };
static const char *const action_names[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom", "other"};

typedef struct vrec {
  int64_t before_seq;
  uint64_t addr, size;
  int64_t stream;
  int action;
  int consumed;
} vrec;

typedef struct vseg {
  uint64_t addr, size;
  int64_t stream;
  int pool; /* 0 small, 1 large */
  int expandable;
} vseg;

typedef struct vblk {
  uint64_t seg, addr, size, requested;
  int state;
} vblk;

/* A block live before the window. */
typedef struct vpre {
  uint64_t addr, requested;
  int64_t stream;
  int state;          /* SIM_BLOCK_ALLOCATED, or PENDING_FREE when its first event completes a free */
  int freed;          /* the window frees it */
  uint64_t size;      /* for restore: exact, or 0 (the model sizes it) */
  int uncertain;      /* its unsplit remainder t is unknown */
  uint64_t base_size; /* the model's size with t = 0 (round_size of the request) */
  uint64_t t;         /* remainder assumed */
  uint64_t limit;     /* the next known block start or the segment end */
  int seg;            /* index of the initial segment holding it, -1: none */
  int freed_now;      /* freed so far in the current pass */
} vpre;

/* An expandable segment's reservation: its base, the size the model reserves (1 1/8 of the card
 * as validate assumes it), and the end of what has been mapped in it so far (the extent the
 * recording has shown: the card's real size, and so the reservation's, may be smaller). */
typedef struct vres {
  uint64_t addr, size, hi;
} vres;

/* An event as the passes read it: the fields they use, its seq being its index (the trace is
 * read from the store once, by scan_requests, and every pass after reads these). */
typedef struct vev {
  uint64_t addr, size;
  int64_t stream;
  uint8_t kind, flags;
} vev;

typedef struct validator {
  store *s;
  const store_trace *t;
  validate_result *r;
  const sim_allocator_ops *ops;
  sim_spec spec;
  vrec *rec;
  size_t nrec;
  vseg *fsegs, *isegs;
  size_t nfsegs, nisegs;
  vblk *fblks;
  size_t nfblks;
  vpre *pre;
  size_t npre;
  sim_map pre_idx;   /* address -> index + 1 */
  sim_map fstart;    /* start of the free block after an uncertain block -> index + 1 */
  uint64_t total_memory;
  /* the current pass */
  sim_device dev;
  sim_allocator a;
  int have_model;
  size_t lo, hi;     /* recorded actions placed before the current request */
  sim_map live;      /* trace address -> handle */
  sim_map dropped;   /* trace addresses the model could not place */
  sim_map waiting;   /* trace addresses freed but not yet completed */
  sim_map deferred;  /* completions left to the model's own synchronization (see replay_pass) */
  vev *evs;          /* the trace's events, read once (scan_requests) */
  size_t nevs, evs_cap;
  size_t at;         /* the current pass's next event in evs */
  sim_event *ahead;  /* events read ahead of the one being replayed */
  size_t nahead, ahead_cap, ahead_at;
  vres *resv;
  size_t nresv, resv_cap;
  uint64_t synth_next;
  int restart;
  int64_t cur_seq;
  int64_t context_at; /* >= 0: stop before this request to describe the state there */
  char *err;
  size_t errlen;
} validator;

static int vfail(validator *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vfail(validator *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->err, v->errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* The model with the settings the trace recorded (which models read as options: io/settings.h). */
static int model_init(validator *v, sim_allocator *a, sim_device *dev, char *err, size_t errlen) {
  settings recorded;
  settings_init(&recorded, v->t->allocator_settings);
  int rc = sim_allocator_init(a, &v->spec, dev, &recorded.recorded, NULL, err, errlen);
  settings_release(&recorded);
  return rc;
}

static int action_of(const char *s) {
  for (int i = 0; i < R_OTHER; i++)
    if (!strcmp(s, action_names[i])) return i;
  return R_OTHER;
}

/* ---- divergences ------------------------------------------------------------------------------- */

/* Records a disagreement; only the first one is kept in detail (`at`: the expected address,
 * whose segment describes the context). */
static void diverge(validator *v, const char *kind, uint64_t size, int64_t stream, uint64_t at, const char *expected,
                    const char *simulated) {
  validate_result *r = v->r;
  if (r->diverged) return;
  r->diverged = 1;
  validate_divergence *d = &r->first;
  memset(d, 0, sizeof *d);
  d->event = v->cur_seq;
  snprintf(d->kind, sizeof d->kind, "%s", kind);
  snprintf(d->expected, sizeof d->expected, "%s", expected);
  snprintf(d->simulated, sizeof d->simulated, "%s", simulated);
  d->size = size;
  d->stream = stream;
  d->segment_addr = at;
}

#define FMT(buf, ...) (snprintf(buf, sizeof buf, __VA_ARGS__), buf)

/* ---- the model's state as items ---------------------------------------------------------------- */

typedef struct items {
  sim_walk_item *v;
  size_t n, cap;
} items;

static int collect(void *arg, const sim_walk_item *it) {
  items *x = arg;
  sim_grow((void **)&x->v, &x->cap, x->n + 1, sizeof *x->v);
  x->v[x->n++] = *it;
  return 0;
}

static void walk_model(validator *v, items *out) {
  memset(out, 0, sizeof *out);
  v->a.ops->walk(v->a.ctx, collect, out);
}

static int cmp_free_near(const void *a, const void *b) {
  const validate_block *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Fills the divergence's context from the model's state now (just before the request). */
static void describe_context(validator *v) {
  validate_divergence *d = &v->r->first;
  items all;
  walk_model(v, &all);
  uint64_t rounded = d->size ? sim_torch_round_size(v->a.ctx, d->size) : 0;
  int pool = rounded > MiB;
  validate_block *cand = NULL;
  size_t n = 0, cap = 0;
  int segpool = -1;
  for (size_t i = 0; i < all.n; i++) {
    const sim_walk_item *it = &all.v[i];
    if (it->is_segment) {
      segpool = it->pool;
      continue;
    }
    if (it->state == SIM_BLOCK_FREE && it->stream == d->stream && segpool == pool && d->size) {
      sim_grow((void **)&cand, &cap, n + 1, sizeof *cand);
      cand[n++] = (validate_block){it->addr, it->size, it->state};
    }
  }
  if (n) {
    qsort(cand, n, sizeof *cand, cmp_free_near);
    size_t at = 0;
    while (at < n && cand[at].size < rounded) at++;
    size_t from = at > 3 ? at - 3 : 0;
    for (size_t i = from; i < n && d->nfree_near < VALIDATE_NEAR; i++) d->free_near[d->nfree_near++] = cand[i];
  }
  free(cand);
  /* The segment holding the expected address. */
  uint64_t want = d->segment_addr;
  d->segment_addr = 0;
  for (size_t i = 0; i < all.n && want; i++) {
    const sim_walk_item *it = &all.v[i];
    if (!it->is_segment || want < it->addr || want >= it->addr + it->size) continue;
    d->segment_addr = it->addr;
    size_t j = i + 1, end = i + 1;
    while (end < all.n && !all.v[end].is_segment) end++;
    /* centre the listing on the expected address */
    size_t at = j;
    while (at < end && all.v[at].addr + all.v[at].size <= want) at++;
    size_t from = at > j + VALIDATE_NEAR / 2 ? at - VALIDATE_NEAR / 2 : j;
    for (size_t k = from; k < end && d->nsegment < VALIDATE_NEAR; k++)
      d->segment[d->nsegment++] = (validate_block){all.v[k].addr, all.v[k].size, all.v[k].state};
    break;
  }
  free(all.v);
}

/* ---- the recorded device ----------------------------------------------------------------------- */

static vrec *first_pending(validator *v) {
  for (size_t i = v->lo; i < v->hi; i++) {
    vrec *a = &v->rec[i];
    if (a->consumed) continue;
    if (a->action == R_OTHER) {
      a->consumed = 1;
      continue;
    }
    return a;
  }
  return NULL;
}

static uint64_t synth(validator *v, uint64_t size) {
  uint64_t a = v->synth_next;
  v->synth_next += (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB) + 2 * MiB;
  return a;
}

static void add_reservation(validator *v, uint64_t addr, uint64_t size, uint64_t hi) {
  sim_grow((void **)&v->resv, &v->resv_cap, v->nresv + 1, sizeof *v->resv);
  v->resv[v->nresv++] = (vres){addr, size, hi > addr ? hi : addr};
}

/* The reservation whose assumed range holds addr (the highest base at or below it), or NULL. */
static vres *reservation_at(const validator *v, uint64_t addr) {
  vres *best = NULL;
  for (size_t i = 0; i < v->nresv; i++)
    if (addr >= v->resv[i].addr && addr - v->resv[i].addr < v->resv[i].size && (!best || v->resv[i].addr > best->addr))
      best = &v->resv[i];
  return best;
}

/* Whether a map at addr is more of a reservation already made: inside what it has mapped so
 * far, or right after it (it grows upwards), or at a base not yet mapped. A map anywhere else
 * starts a reservation of its own, wherever the model's assumed sizes would put it. */
static int known_extent(const validator *v, uint64_t addr) {
  for (size_t i = 0; i < v->nresv; i++) {
    const vres *r = &v->resv[i];
    if (addr >= r->addr && addr <= r->hi) return 1;
  }
  return 0;
}

/* A new segment (cudaMalloc): the recorded base address, or a refusal where the recording
 * released memory or gave up before its next segment. */
static int vd_malloc(void *ctx, uint64_t size, int64_t stream, uint64_t *addr) {
  validator *v = ctx;
  (void)stream;
  vrec *a = first_pending(v);
  if (a && a->action != R_SEG_ALLOC) return SIM_EOOM;
  if (!a) {
    char s[80];
    v->r->extra_segment_events++;
    *addr = synth(v, size);
    diverge(v, "segment_alloc", 0, stream, 0, "no new segment here", FMT(s, "cudaMalloc of %" PRIu64 " bytes", size));
  } else {
    a->consumed = 1;
    if (a->size == size) {
      v->r->segment_matches++;
      *addr = a->addr;
    } else {
      char e[80], s[80];
      *addr = synth(v, size);
      diverge(v, "segment_alloc", 0, stream, a->addr,
              FMT(e, "segment_alloc of %" PRIu64 " bytes at %#" PRIx64, a->size, a->addr),
              FMT(s, "cudaMalloc of %" PRIu64 " bytes", size));
    }
  }
  v->dev.used += size;
  if (v->dev.used > v->dev.used_peak) v->dev.used_peak = v->dev.used;
  return SIM_OK;
}

/* A release (cudaFree or page unmap): matched against the burst the recording shows here. */
static int release(validator *v, int action, uint64_t addr, uint64_t size) {
  for (size_t i = v->lo; i < v->hi; i++) {
    vrec *a = &v->rec[i];
    if (a->consumed || a->action == R_OTHER) continue;
    if (a->action != R_SEG_FREE && a->action != R_SEG_UNMAP) break;
    if (a->action != action || a->addr != addr) continue;
    a->consumed = 1;
    char e[80], s[80];
    if (a->size == size) v->r->segment_matches++;
    else
      diverge(v, action_names[action], 0, a->stream, addr,
              FMT(e, "%s of %" PRIu64 " bytes at %#" PRIx64, action_names[action], a->size, a->addr),
              FMT(s, "%s of %" PRIu64 " bytes", action_names[action], size));
    return SIM_OK;
  }
  char e[80], s[100];
  v->r->extra_segment_events++;
  diverge(v, action_names[action], 0, 0, addr, FMT(e, "the memory at %#" PRIx64 " kept", addr),
          FMT(s, "%s of %" PRIu64 " bytes at %#" PRIx64, action_names[action], size, addr));
  return SIM_OK;
}

static int vd_free(void *ctx, uint64_t addr, uint64_t size) {
  validator *v = ctx;
  v->dev.used -= size;
  return release(v, R_SEG_FREE, addr, size);
}

static int vd_unmap(void *ctx, uint64_t addr, uint64_t size) {
  validator *v = ctx;
  v->dev.used -= size;
  return release(v, R_SEG_UNMAP, addr, size);
}

static int vd_map(void *ctx, uint64_t addr, uint64_t size, int64_t stream) {
  validator *v = ctx;
  vrec *a = first_pending(v);
  if (a && a->action != R_SEG_MAP) return SIM_EOOM;
  char e[80], s[80];
  if (!a) {
    v->r->extra_segment_events++;
    diverge(v, "segment_map", 0, stream, addr, "no mapping here",
            FMT(s, "segment_map of %" PRIu64 " bytes at %#" PRIx64, size, addr));
  } else {
    a->consumed = 1;
    vres *r = reservation_at(v, addr);
    if (r && addr + size > r->hi) r->hi = addr + size;
    if (a->addr == addr && a->size == size) v->r->segment_matches++;
    else
      diverge(v, "segment_map", 0, stream, a->addr, FMT(e, "segment_map of %" PRIu64 " bytes at %#" PRIx64, a->size, a->addr),
              FMT(s, "segment_map of %" PRIu64 " bytes at %#" PRIx64, size, addr));
  }
  v->dev.used += size;
  if (v->dev.used > v->dev.used_peak) v->dev.used_peak = v->dev.used;
  return SIM_OK;
}

/* Address space for a new expandable segment: its first mapping is at its base, so the base is
 * the next recorded segment_map outside every reservation known so far. */
static int vd_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  validator *v = ctx;
  for (size_t i = v->lo; i < v->nrec; i++) {
    const vrec *a = &v->rec[i];
    if (a->action == R_SEG_MAP && !a->consumed && !known_extent(v, a->addr)) {
      *addr = a->addr;
      add_reservation(v, *addr, size, *addr);
      return SIM_OK;
    }
  }
  *addr = synth(v, size);
  add_reservation(v, *addr, size, *addr);
  return SIM_OK;
}

static int vd_unreserve(void *ctx, uint64_t addr, uint64_t size) {
  validator *v = ctx;
  (void)size;
  for (size_t i = 0; i < v->nresv; i++)
    if (v->resv[i].addr == addr) {
      v->resv[i] = v->resv[--v->nresv];
      break;
    }
  return SIM_OK;
}

static const sim_device_ops recorded_device = {
  .size = sizeof(sim_device_ops),
  .malloc = vd_malloc,
  .free = vd_free,
  .reserve = vd_reserve,
  .unreserve = vd_unreserve,
  .map = vd_map,
  .unmap = vd_unmap,
};

/* ---- loading the recording ---------------------------------------------------------------------- */

static int load(validator *v) {
  store *s = v->s;
  int64_t id = v->t->id;
  size_t cap = 0;
  sqlite3_stmt *q = store_stmt(s, "SELECT before_seq, action, addr, size, stream FROM recorded WHERE trace_id = ?1 "
                                  "ORDER BY seq");
  if (!q) return vfail(v, "%s", store_error(s));
  sqlite3_bind_int64(q, 1, id);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    sim_grow((void **)&v->rec, &cap, v->nrec + 1, sizeof *v->rec);
    vrec *a = &v->rec[v->nrec++];
    a->before_seq = sqlite3_column_int64(q, 0) - v->t->first_seq; /* counted as the reader counts */
    a->action = action_of((const char *)sqlite3_column_text(q, 1));
    a->addr = (uint64_t)sqlite3_column_int64(q, 2);
    a->size = (uint64_t)sqlite3_column_int64(q, 3);
    a->stream = sqlite3_column_int64(q, 4);
    a->consumed = 0;
  }
  sqlite3_reset(q);
  if (rc != SQLITE_DONE) return store_fail(s, q, "cannot read recorded allocator actions"), vfail(v, "%s", store_error(s));
  cap = 0;
  q = store_stmt(s, "SELECT address, total_size, stream, pool, expandable FROM segments WHERE trace_id = ?1 "
                    "ORDER BY address");
  if (!q) return vfail(v, "%s", store_error(s));
  sqlite3_bind_int64(q, 1, id);
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    sim_grow((void **)&v->fsegs, &cap, v->nfsegs + 1, sizeof *v->fsegs);
    vseg *g = &v->fsegs[v->nfsegs++];
    g->addr = (uint64_t)sqlite3_column_int64(q, 0);
    g->size = (uint64_t)sqlite3_column_int64(q, 1);
    g->stream = sqlite3_column_int64(q, 2);
    const char *pool = (const char *)sqlite3_column_text(q, 3);
    g->pool = pool && !strcmp(pool, "small") ? 0 : pool && !strcmp(pool, "large") ? 1 : g->size > 2 * MiB;
    g->expandable = sqlite3_column_int(q, 4) != 0;
  }
  sqlite3_reset(q);
  if (rc != SQLITE_DONE) return store_fail(s, q, "cannot read segments"), vfail(v, "%s", store_error(s));
  cap = 0;
  q = store_stmt(s, "SELECT segment_address, address, size, requested_size, state FROM blocks WHERE trace_id = ?1 "
                    "ORDER BY segment_address, address");
  if (!q) return vfail(v, "%s", store_error(s));
  sqlite3_bind_int64(q, 1, id);
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    sim_grow((void **)&v->fblks, &cap, v->nfblks + 1, sizeof *v->fblks);
    vblk *b = &v->fblks[v->nfblks++];
    b->seg = (uint64_t)sqlite3_column_int64(q, 0);
    b->addr = (uint64_t)sqlite3_column_int64(q, 1);
    b->size = (uint64_t)sqlite3_column_int64(q, 2);
    b->requested = (uint64_t)sqlite3_column_int64(q, 3);
    const char *st = (const char *)sqlite3_column_text(q, 4);
    b->state = !st                               ? SIM_BLOCK_FREE
               : !strcmp(st, "active_allocated")   ? SIM_BLOCK_ALLOCATED
               : !strcmp(st, "active_pending_free") ? SIM_BLOCK_PENDING_FREE
                                                    : SIM_BLOCK_FREE;
  }
  sqlite3_reset(q);
  if (rc != SQLITE_DONE) return store_fail(s, q, "cannot read blocks"), vfail(v, "%s", store_error(s));
  return 0;
}

/* ---- the state at the window's start --------------------------------------------------------------- */

static int cmp_seg(const void *a, const void *b) {
  const vseg *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void seg_add(vseg **arr, size_t *n, size_t *cap, vseg g) {
  sim_grow((void **)arr, cap, *n + 1, sizeof **arr);
  (*arr)[(*n)++] = g;
}

/* Removes [a, a+size) from the mapped ranges (a segment_map seen backwards), wherever it lies. */
static void ranges_subtract(vseg **r, size_t *n, size_t *cap, uint64_t a, uint64_t size) {
  uint64_t e = a + size;
  for (size_t i = 0; i < *n;) {
    vseg g = (*r)[i];
    uint64_t ge = g.addr + g.size;
    if (ge <= a || g.addr >= e) {
      i++;
      continue;
    }
    (*r)[i] = (*r)[--*n];
    if (g.addr < a) seg_add(r, n, cap, (vseg){g.addr, a - g.addr, g.stream, g.pool, 1});
    if (ge > e) seg_add(r, n, cap, (vseg){e, ge - e, g.stream, g.pool, 1});
  }
}

/* Adds [a, a+size) (a segment_unmap seen backwards), joined with the ranges it touches. */
static void ranges_add(vseg **r, size_t *n, size_t *cap, vseg add) {
  ranges_subtract(r, n, cap, add.addr, add.size); /* never counted twice */
  for (size_t i = 0; i < *n;) {
    vseg g = (*r)[i];
    if (g.stream == add.stream && g.pool == add.pool &&
        (g.addr + g.size == add.addr || add.addr + add.size == g.addr)) {
      uint64_t lo = g.addr < add.addr ? g.addr : add.addr;
      add.size += g.size;
      add.addr = lo;
      (*r)[i] = (*r)[--*n];
      i = 0;
      continue;
    }
    i++;
  }
  seg_add(r, n, cap, add);
}

/* Initial segments: the final ones, less what the window allocated or mapped, plus what it
 * freed or unmapped (walking the recorded actions backwards). */
static int initial_segments(validator *v) {
  vseg *plain = NULL, *ranges = NULL;
  size_t np = 0, pcap = 0, nr = 0, rcap = 0;
  sim_map at; /* plain segment address -> index + 1 */
  sim_map_init(&at);
  for (size_t i = 0; i < v->nfsegs; i++) {
    if (v->fsegs[i].expandable) {
      seg_add(&ranges, &nr, &rcap, v->fsegs[i]);
    } else {
      seg_add(&plain, &np, &pcap, v->fsegs[i]);
      *sim_map_put(&at, v->fsegs[i].addr, NULL) = np;
    }
  }
  for (size_t k = v->nrec; k-- > 0;) {
    const vrec *a = &v->rec[k];
    if (a->action == R_SEG_ALLOC) {
      uint64_t idx;
      if (sim_map_del(&at, a->addr, &idx)) plain[idx - 1].size = 0; /* did not exist before it */
    } else if (a->action == R_SEG_FREE) {
      seg_add(&plain, &np, &pcap, (vseg){a->addr, a->size, a->stream, a->size != 2 * MiB, 0});
      *sim_map_put(&at, a->addr, NULL) = np;
    } else if (a->action == R_SEG_MAP) {
      ranges_subtract(&ranges, &nr, &rcap, a->addr, a->size);
    } else if (a->action == R_SEG_UNMAP) {
      /* the pool of a range the window unmapped: that of a range it touches, else by page size */
      int pool = a->size % (20 * MiB) == 0;
      for (size_t i = 0; i < nr; i++)
        if (ranges[i].stream == a->stream && (ranges[i].addr + ranges[i].size == a->addr || ranges[i].addr == a->addr + a->size))
          pool = ranges[i].pool;
      ranges_add(&ranges, &nr, &rcap, (vseg){a->addr, a->size, a->stream, pool, 1});
    }
  }
  sim_map_release(&at);
  size_t cap = 0;
  for (size_t i = 0; i < np; i++)
    if (plain[i].size) seg_add(&v->isegs, &v->nisegs, &cap, plain[i]);
  /* coalesce touching ranges of one stream and pool (a snapshot reports them as one) */
  if (nr) qsort(ranges, nr, sizeof *ranges, cmp_seg);
  for (size_t i = 0; i < nr; i++) {
    vseg g = ranges[i];
    while (i + 1 < nr && ranges[i + 1].addr == g.addr + g.size && ranges[i + 1].stream == g.stream &&
           ranges[i + 1].pool == g.pool)
      g.size += ranges[++i].size;
    seg_add(&v->isegs, &v->nisegs, &cap, g);
  }
  free(plain);
  free(ranges);
  if (v->nisegs) qsort(v->isegs, v->nisegs, sizeof *v->isegs, cmp_seg);
  for (size_t i = 1; i < v->nisegs; i++)
    if (v->isegs[i].addr < v->isegs[i - 1].addr + v->isegs[i - 1].size)
      return vfail(v, "cannot rebuild the window's start: segments at %#" PRIx64 " and %#" PRIx64 " overlap",
                   v->isegs[i - 1].addr, v->isegs[i].addr);
  return 0;
}

static int seg_of(const validator *v, uint64_t addr) {
  size_t lo = 0, hi = v->nisegs;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v->isegs[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (!lo) return -1;
  const vseg *g = &v->isegs[lo - 1];
  return addr - g->addr < g->size ? (int)(lo - 1) : -1;
}

static int cmp_pre(const void *a, const void *b) {
  const vpre *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The one read of the trace from the store: its events kept for the passes (vev), the
 * preexisting blocks, how the window treats each, and the recorded peak of requested bytes. */
static int scan_requests(validator *v) {
  store_reader *rd;
  if (store_reader_open(v->s, v->t->id, &rd)) return vfail(v, "%s", store_error(v->s));
  sim_event ev;
  int got;
  size_t cap = 0;
  sim_map open; /* preexisting address not yet freed -> index + 1 */
  sim_map req;  /* live address -> requested bytes */
  sim_map_init(&open);
  sim_map_init(&req);
  int64_t requested = 0, peak = 0;
  while ((got = store_reader_next(rd, &ev)) > 0) {
    if (ev.seq != (int64_t)v->nevs) { /* the reader counts seqs from 0, one by one */
      got = -2;
      break;
    }
    sim_grow((void **)&v->evs, &v->evs_cap, v->nevs + 1, sizeof *v->evs);
    v->evs[v->nevs++] = (vev){.addr = ev.addr, .size = ev.size, .stream = ev.stream, .kind = ev.kind, .flags = ev.flags};
    if (ev.kind == SIM_EV_ALLOC && (ev.flags & SIM_EVF_PREEXISTING)) {
      int existed;
      uint64_t *slot = sim_map_put(&open, ev.addr, &existed);
      if (existed) continue;
      sim_grow((void **)&v->pre, &cap, v->npre + 1, sizeof *v->pre);
      vpre *p = &v->pre[v->npre++];
      memset(p, 0, sizeof *p);
      p->addr = ev.addr;
      p->requested = ev.size;
      p->stream = ev.stream;
      p->state = SIM_BLOCK_ALLOCATED;
      p->seg = -1;
      *slot = v->npre;
      *sim_map_put(&req, ev.addr, NULL) = ev.size;
      sim_bytes_sum(&requested, ev.size);
    } else if (ev.kind == SIM_EV_ALLOC) {
      int existed;
      *sim_map_put(&req, ev.addr, &existed) = ev.size;
      if (!existed) sim_bytes_sum(&requested, ev.size);
    } else if (sim_event_is_free(&ev)) {
      uint64_t idx;
      if (sim_map_del(&open, ev.addr, &idx)) {
        vpre *p = &v->pre[idx - 1];
        if (ev.kind == SIM_EV_FREE_COMPLETED) p->state = SIM_BLOCK_PENDING_FREE; /* freed before the window */
        p->freed = 1;
      }
      uint64_t sz;
      if (ev.kind != SIM_EV_FREE_REQUESTED && sim_map_del(&req, ev.addr, &sz)) sim_bytes_drop(&requested, sz);
    }
    if (requested > peak) peak = requested;
  }
  store_reader_close(rd);
  sim_map_release(&open);
  sim_map_release(&req);
  if (got == -2) return vfail(v, "cannot validate '%s': its events are not numbered in order", v->t->name);
  if (got < 0) return vfail(v, "%s", store_error(v->s));
  v->r->recorded_peak_requested = peak;
  return 0;
}

/* Orders the live-at-start blocks by address (pre_idx follows), finds each one's initial
 * segment, and takes the exact size of those the final state still holds. */
static void order_preexisting(validator *v) {
  if (v->npre) qsort(v->pre, v->npre, sizeof *v->pre, cmp_pre);
  sim_map_clear(&v->pre_idx);
  sim_map final_at; /* final allocated block address -> index + 1 */
  sim_map_init(&final_at);
  for (size_t i = 0; i < v->nfblks; i++)
    if (v->fblks[i].state != SIM_BLOCK_FREE) *sim_map_put(&final_at, v->fblks[i].addr, NULL) = i + 1;
  for (size_t i = 0; i < v->npre; i++) {
    vpre *p = &v->pre[i];
    *sim_map_put(&v->pre_idx, p->addr, NULL) = i + 1;
    p->seg = seg_of(v, p->addr);
    uint64_t *fi = p->freed ? NULL : sim_map_get(&final_at, p->addr);
    if (fi) {
      p->size = v->fblks[*fi - 1].size;
      if (v->fblks[*fi - 1].state == SIM_BLOCK_PENDING_FREE) p->state = SIM_BLOCK_PENDING_FREE;
    }
  }
  sim_map_release(&final_at);
}

/* How far each block could reach: the next block of its segment, or the segment's end. */
static void preexisting_limits(validator *v) {
  for (size_t i = 0; i < v->npre; i++) {
    vpre *p = &v->pre[i];
    if (p->seg < 0) continue;
    const vseg *g = &v->isegs[p->seg];
    p->limit = g->addr + g->size;
    if (i + 1 < v->npre && v->pre[i + 1].seg == p->seg) p->limit = v->pre[i + 1].addr;
  }
}

/* What the model makes of the unknown ones: restore into a scratch instance and read back. */
static int model_sizes(validator *v) {
  sim_device dev;
  memset(&dev, 0, sizeof dev);
  dev.ops = &recorded_device;
  dev.total_memory = dev.free_memory = v->total_memory;
  dev.capacity = UINT64_MAX;
  sim_allocator a;
  char err[SIM_ERRLEN];
  if (model_init(v, &a, &dev, err, sizeof err) != SIM_OK)
    return vfail(v, "cannot make the '%s' model with the recorded settings: %s", v->ops->name, err);
  for (size_t i = 0; i < v->npre; i++) {
    vpre *p = &v->pre[i];
    if (p->size || p->seg < 0) continue;
    uint64_t r = sim_torch_round_size(a.ctx, p->requested ? p->requested : 1);
    p->base_size = r;
    if (p->limit < p->addr + r) continue; /* restore reports it */
    const vseg *g = &v->isegs[p->seg];
    /* Would a block reaching `limit` have been split for this request? Ask the model through a
     * one-block restore of a segment just that long. */
    sim_walk_item probe[2] = {
      {.is_segment = 1, .addr = p->addr, .size = p->limit - p->addr, .stream = g->stream, .pool = g->pool},
      {.addr = p->addr, .size = 0, .requested = p->requested, .stream = g->stream, .state = SIM_BLOCK_ALLOCATED},
    };
    uintptr_t h[2];
    if (a.ops->restore(a.ctx, probe, 2, h, err, sizeof err) != SIM_OK) continue;
    if (probe[1].size < p->limit - p->addr) {
      p->uncertain = 1; /* a free block follows it at addr + r + t, t unknown */
      p->size = r;
    } else {
      p->size = probe[1].size; /* the remainder could not have been split off */
    }
  }
  sim_allocator_release(&a);
  return 0;
}

/* Where the window's allocations land inside the free space after an uncertain block, before
 * that block is freed, is where that free block began: t is found. */
static int find_remainders(validator *v) {
  uint64_t open = 0;
  for (size_t i = 0; i < v->npre; i++) open += v->pre[i].uncertain;
  if (!open) return 0;
  for (size_t k = 0; open && k < v->nevs; k++) {
    const vev ev = v->evs[k];
    if (ev.flags & SIM_EVF_PREEXISTING) continue;
    if (sim_kind_is_free(ev.kind)) {
      uint64_t *pi = sim_map_get(&v->pre_idx, ev.addr);
      if (pi && v->pre[*pi - 1].uncertain && !v->pre[*pi - 1].freed_now) {
        v->pre[*pi - 1].freed_now = 1;
        open--;
      }
      continue;
    }
    if (ev.kind != SIM_EV_ALLOC) continue;
    /* the last preexisting block at or below the address */
    size_t lo = 0, hi = v->npre;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (v->pre[mid].addr <= ev.addr) lo = mid + 1;
      else hi = mid;
    }
    if (!lo) continue;
    vpre *p = &v->pre[lo - 1];
    if (!p->uncertain || p->freed_now || ev.addr < p->addr + p->size || ev.addr >= p->limit) continue;
    if (ev.addr - p->addr - p->size <= MiB) {
      p->t = ev.addr - p->addr - p->size;
      p->size = ev.addr - p->addr;
    }
    p->uncertain = 0;
    open--;
  }
  for (size_t i = 0; i < v->npre; i++) v->pre[i].freed_now = 0;
  return 0;
}

/* Sizes the live-at-start blocks: exact where the snapshot still holds them, else as the model
 * would have cut them, then by where the window's first allocation after each one landed. */
static int size_preexisting(validator *v) {
  order_preexisting(v);
  preexisting_limits(v);
  if (model_sizes(v)) return -1;
  return find_remainders(v);
}

/* ---- one replay ------------------------------------------------------------------------------------ */

/* Where the reservation of an expandable segment's first range begins. PyTorch maps a new
 * segment from its base upward, and maps into the lowest hole first, so a recorded segment_map
 * below the lowest range mapped at the window's start, of the same stream and pool (20 MiB
 * multiples are large-pool pages, smaller maps small-pool ones) and a whole number of pages
 * below it, shows that the reservation reaches down there. 0 for later ranges of a group. */
static uint64_t reservation_base(const validator *v, const vseg *g) {
  for (size_t i = 0; i < v->nisegs && &v->isegs[i] != g; i++)
    if (v->isegs[i].expandable && v->isegs[i].stream == g->stream && v->isegs[i].pool == g->pool) return 0;
  uint64_t page = g->pool ? 20 * MiB : 2 * MiB, base = g->addr;
  for (size_t i = 0; i < v->nrec; i++) {
    const vrec *a = &v->rec[i];
    if (a->action != R_SEG_MAP || a->stream != g->stream || a->addr >= base) continue;
    if ((a->size % (20 * MiB) == 0) != g->pool || (g->addr - a->addr) % page || g->addr - a->addr > v->total_memory)
      continue;
    base = a->addr;
  }
  return base;
}

/* Initial segment g and its live blocks as the model's restore takes them (appended to *it); *pi:
 * the first live-at-start block not yet placed, advanced past the segment's. Returns the index of
 * the segment's first block in v->pre. */
static size_t segment_items(const validator *v, size_t g, items *it, size_t *pi) {
  const vseg *s = &v->isegs[g];
  size_t seg_at = it->n;
  collect(it, &(sim_walk_item){.is_segment = 1, .addr = s->addr, .size = s->size, .stream = s->stream,
                               .pool = s->pool, .expandable = s->expandable});
  while (*pi < v->npre && v->pre[*pi].addr < s->addr) (*pi)++;
  size_t first = *pi;
  while (*pi < v->npre && v->pre[*pi].seg == (int)g) {
    const vpre *p = &v->pre[(*pi)++];
    collect(it, &(sim_walk_item){.addr = p->addr, .size = p->uncertain ? p->base_size + p->t : p->size,
                                 .requested = p->requested, .stream = s->stream, .state = p->state});
  }
  if (s->expandable) it->v[seg_at].requested = reservation_base(v, s);
  return first;
}

static int restore_all(validator *v) {
  items it = {0};
  uintptr_t *handles = NULL;
  size_t hcap = 0, pi = 0;
  int rc = 0;
  for (size_t g = 0; g < v->nisegs && !rc; g++) {
    const vseg *s = &v->isegs[g];
    it.n = 0;
    size_t first = segment_items(v, g, &it, &pi);
    sim_grow((void **)&handles, &hcap, it.n, sizeof *handles);
    char err[SIM_ERRLEN];
    if (v->a.ops->restore(v->a.ctx, it.v, it.n, handles, err, sizeof err) != SIM_OK) {
      rc = vfail(v, "cannot rebuild the window's start in the segment at %#" PRIx64 ": %s", s->addr, err);
      break;
    }
    for (size_t k = 1; k < it.n; k++) {
      *sim_map_put(&v->live, v->pre[first + k - 1].addr, NULL) = handles[k];
      if (v->pre[first + k - 1].state == SIM_BLOCK_PENDING_FREE) *sim_map_put(&v->waiting, v->pre[first + k - 1].addr, NULL) = 1;
    }
    vres *in = s->expandable ? reservation_at(v, s->addr) : NULL;
    if (in && s->addr + s->size > in->hi) in->hi = s->addr + s->size;
    if (s->expandable && !in) {
      uint64_t page = s->pool ? 20 * MiB : 2 * MiB, space = v->total_memory + v->total_memory / 8;
      uint64_t base = it.v[0].requested ? it.v[0].requested : s->addr;
      add_reservation(v, base, (space + page - 1) / page * page, s->addr + s->size);
    }
  }
  free(it.v);
  free(handles);
  return rc;
}

/* The blocks live at the start that no segment holds cannot be replayed. */
static void check_orphans(validator *v) {
  for (size_t i = 0; i < v->npre; i++)
    if (v->pre[i].seg < 0) {
      char e[80];
      v->cur_seq = 0;
      diverge(v, "reconstruction", v->pre[i].requested, v->pre[i].stream, v->pre[i].addr,
              FMT(e, "a block at %#" PRIx64 " live before the window", v->pre[i].addr), "no segment holds it");
      return;
    }
}

static int rule_c(validator *v, uint64_t placed_at, uint64_t request);

/* A request the recording shows failing (an oom entry): replayed, expected to fail. */
static void replay_failed(validator *v, vrec *o) {
  v->r->ooms++;
  sim_placement pl;
  int rc = v->a.ops->alloc(v->a.ctx, o->size, o->stream, &pl);
  o->consumed = 1;
  if (rc == SIM_EOOM) {
    v->r->oom_matches++;
    return;
  }
  if (rc == SIM_OK && rule_c(v, pl.addr, o->size)) return;
  char e[80], s[80];
  diverge(v, "oom", o->size, o->stream, 0, FMT(e, "out of memory for %" PRIu64 " bytes", o->size),
          rc == SIM_OK ? FMT(s, "placed at %#" PRIx64, pl.addr) : "failed");
  if (rc == SIM_OK) {
    v->a.ops->free_requested(v->a.ctx, pl.handle);
    v->a.ops->free_completed(v->a.ctx, pl.handle);
  }
}

static void empty_cache(validator *v) {
  v->r->empty_cache_calls++;
  v->a.ops->empty_cache(v->a.ctx);
}

/* Releases the recording shows that nothing explained: each is a disagreement. */
static void drop_unconsumed(validator *v, size_t from, size_t to) {
  for (size_t i = from; i < to; i++) {
    vrec *a = &v->rec[i];
    if (a->consumed || a->action == R_OTHER) continue;
    a->consumed = 1;
    if (a->action == R_OOM) continue;
    char e[100];
    diverge(v, action_names[a->action], 0, a->stream, a->addr,
            FMT(e, "%s of %" PRIu64 " bytes at %#" PRIx64, action_names[a->action], a->size, a->addr),
            "not done by the replay");
  }
}

/* The first unconsumed oom entry of the gap at or after index i, or NULL. */
static vrec *next_oom(validator *v, size_t i) {
  for (; i < v->hi; i++)
    if (!v->rec[i].consumed && v->rec[i].action == R_OOM) return &v->rec[i];
  return NULL;
}

/* What the allocator did between two requests (before request `ev`, NULL at the end). An oom
 * entry ends a request that failed: everything before it in the gap is that request's doing
 * (segments it mapped before running out, the releases of its retry), or an empty_cache() just
 * before it. Otherwise a new segment is the next request's, and releases before it are its
 * retry's, or empty_cache()'s when the cache could have served it. Releases that nothing
 * follows are empty_cache(). */
static void replay_gap(validator *v, const sim_event *ev) {
  int is_alloc = ev && ev->kind == SIM_EV_ALLOC;
  for (;;) {
    vrec *a = first_pending(v);
    if (!a) return;
    size_t i = (size_t)(a - v->rec);
    vrec *oom = next_oom(v, i);
    if (a->action == R_SEG_ALLOC || a->action == R_SEG_MAP) {
      if (!oom) return; /* the request's own segment */
      replay_failed(v, oom); /* a request that got part of its memory, then failed */
      drop_unconsumed(v, i, (size_t)(oom - v->rec));
      continue;
    }
    if (a->action == R_OOM) {
      replay_failed(v, a);
      continue;
    }
    /* a run of releases: what ends it? */
    size_t end = i;
    while (end < v->hi && (v->rec[end].consumed || v->rec[end].action == R_OTHER || v->rec[end].action == R_SEG_FREE ||
                           v->rec[end].action == R_SEG_UNMAP))
      end++;
    vrec *t = end < v->hi ? &v->rec[end] : NULL;
    if (t && oom) {
      /* the failing request's retry released them, unless the cache could have served it */
      if (sim_torch_would_reuse(v->a.ctx, oom->size, oom->stream)) empty_cache(v);
      replay_failed(v, oom);
      drop_unconsumed(v, i, (size_t)(oom - v->rec));
      continue;
    }
    if (t && is_alloc) {
      /* the request's retry (or garbage collection) releases them, unless the cache could have
       * served it: then it was empty_cache() first */
      if (sim_torch_would_reuse(v->a.ctx, ev->size, ev->stream)) {
        empty_cache(v);
        drop_unconsumed(v, i, end);
      }
      return;
    }
    empty_cache(v);
    drop_unconsumed(v, i, end);
  }
}

static void segment_blocks_after(validator *v, uint64_t addr, uint64_t *placed, uint64_t *free_after) {
  items all;
  walk_model(v, &all);
  *placed = *free_after = 0;
  for (size_t i = 0; i < all.n; i++)
    if (!all.v[i].is_segment && all.v[i].addr == addr) {
      *placed = all.v[i].size;
      if (i + 1 < all.n && !all.v[i + 1].is_segment && all.v[i + 1].state == SIM_BLOCK_FREE)
        *free_after = all.v[i + 1].size;
      break;
    }
  free(all.v);
}

/* Rule C: the model chose the free block after a live-at-start block whose unsplit remainder t
 * is unknown, where the recording did not: the real remainder must have made that free block
 * too small for this request. t grows by just enough, and the replay starts again. */
static int rule_c(validator *v, uint64_t placed_at, uint64_t request) {
  uint64_t *pi = sim_map_get(&v->fstart, placed_at);
  if (!pi || v->restart) return 0;
  vpre *p = &v->pre[*pi - 1];
  if (!p->uncertain || p->freed_now) return 0;
  uint64_t placed, after;
  segment_blocks_after(v, placed_at, &placed, &after);
  uint64_t fsize = placed + after, rounded = sim_torch_round_size(v->a.ctx, request);
  uint64_t room = p->limit - p->addr - p->base_size, t = p->t + (fsize - rounded) + 512;
  if (t > MiB) t = MiB;
  if (t > room) t = room;
  if (fsize < rounded || t <= p->t) return 0;
  p->t = t;
  v->restart = 1;
  return 1;
}

static void replay_alloc(validator *v, const sim_event *ev) {
  validate_result *r = v->r;
  r->allocs++;
  sim_placement pl;
  int rc = v->a.ops->alloc(v->a.ctx, ev->size, ev->stream, &pl);
  if (rc != SIM_OK) {
    r->extra_ooms++;
    sim_map_put(&v->dropped, ev->addr, NULL);
    char e[80];
    diverge(v, "address", ev->size, ev->stream, ev->addr, FMT(e, "placed at %#" PRIx64, ev->addr), "out of memory");
    return;
  }
  int existed;
  *sim_map_put(&v->live, ev->addr, &existed) = pl.handle;
  sim_map_del(&v->dropped, ev->addr, NULL);
  if (pl.addr == ev->addr) {
    r->address_matches++;
    return;
  }
  if (rule_c(v, pl.addr, ev->size)) return;
  char e[80], s[80];
  diverge(v, "address", ev->size, ev->stream, ev->addr, FMT(e, "placed at %#" PRIx64, ev->addr),
          FMT(s, "placed at %#" PRIx64, pl.addr));
}

static void replay_free(validator *v, const sim_event *ev) {
  uint64_t *h = sim_map_get(&v->live, ev->addr);
  if (!h) {
    if (sim_map_get(&v->dropped, ev->addr)) {
      if (ev->kind != SIM_EV_FREE_REQUESTED) sim_map_del(&v->dropped, ev->addr, NULL);
      return;
    }
    v->r->unknown_frees++;
    char e[80];
    diverge(v, "free", ev->size, ev->stream, ev->addr, FMT(e, "a free of the block at %#" PRIx64, ev->addr),
            "no such block");
    return;
  }
  uintptr_t handle = *h;
  uint64_t *pi = sim_map_get(&v->pre_idx, ev->addr);
  if (pi) v->pre[*pi - 1].freed_now = 1;
  if (ev->kind != SIM_EV_FREE_COMPLETED) v->a.ops->free_requested(v->a.ctx, handle);
  if (ev->kind == SIM_EV_FREE_REQUESTED) *sim_map_put(&v->waiting, ev->addr, NULL) = 1;
  if (ev->kind != SIM_EV_FREE_REQUESTED) {
    int deferred = 0;
    uint64_t *d = sim_map_get(&v->deferred, ev->addr);
    if (d && !*d) { /* the model completes it itself, in the next request's synchronization */
      *d = handle + 1;
      deferred = 1;
    }
    if (!deferred) v->a.ops->free_completed(v->a.ctx, handle);
    sim_map_del(&v->waiting, ev->addr, NULL);
    sim_map_del(&v->live, ev->addr, NULL);
    if (pi) sim_map_del(&v->pre_idx, ev->addr, NULL); /* a later block here is a new one */
    v->r->frees++;
  }
}

static void compare_final(validator *v) {
  validate_result *r = v->r;
  items all;
  walk_model(v, &all);
  sim_map segs, blks; /* address -> index + 1 in the model's items */
  sim_map_init(&segs);
  sim_map_init(&blks);
  for (size_t i = 0; i < all.n; i++) {
    if (all.v[i].is_segment) {
      *sim_map_put(&segs, all.v[i].addr, NULL) = i + 1;
      r->model_segments++;
    } else {
      *sim_map_put(&blks, all.v[i].addr, NULL) = i + 1;
      r->model_blocks++;
    }
  }
  r->final_segments = v->nfsegs;
  r->final_blocks = v->nfblks;
  v->cur_seq = -1;
  for (size_t i = 0; i < v->nfsegs; i++) {
    const vseg *g = &v->fsegs[i];
    uint64_t *k = sim_map_get(&segs, g->addr);
    const sim_walk_item *m = k ? &all.v[*k - 1] : NULL;
    char e[80], s[80];
    if (m && m->size == g->size && m->pool == g->pool && m->expandable == g->expandable) r->final_segments_matched++;
    else
      diverge(v, "final_state", 0, g->stream, g->addr, FMT(e, "a segment of %" PRIu64 " bytes at %#" PRIx64, g->size, g->addr),
              m ? FMT(s, "a segment of %" PRIu64 " bytes", m->size) : "no segment there");
  }
  static const char *const states[] = {"free", "allocated", "waiting to be freed"};
  for (size_t i = 0; i < v->nfblks; i++) {
    const vblk *b = &v->fblks[i];
    uint64_t *k = sim_map_get(&blks, b->addr);
    const sim_walk_item *m = k ? &all.v[*k - 1] : NULL;
    if (m && m->size == b->size && m->state == b->state) {
      r->final_blocks_matched++;
    } else {
      char e[120], s[120];
      diverge(v, "final_state", 0, 0, b->addr,
              FMT(e, "a %s block of %" PRIu64 " bytes at %#" PRIx64, states[b->state], b->size, b->addr),
              m ? FMT(s, "a %s block of %" PRIu64 " bytes", states[m->state], m->size) : "no block starting there");
    }
  }
  r->final_state_match = r->final_segments_matched == v->nfsegs && r->final_blocks_matched == v->nfblks &&
                         r->model_segments == v->nfsegs && r->model_blocks == v->nfblks;
  if (!r->final_state_match) {
    char e[80], s[80];
    diverge(v, "final_state", 0, 0, 0, FMT(e, "%zu segments and %zu blocks", v->nfsegs, v->nfblks),
            FMT(s, "%" PRIu64 " segments and %" PRIu64 " blocks", r->model_segments, r->model_blocks));
  }
  sim_map_release(&segs);
  sim_map_release(&blks);
  free(all.v);
}

static void pass_release(validator *v) {
  if (v->have_model) sim_allocator_release(&v->a);
  v->have_model = 0;
  sim_map_release(&v->live);
  sim_map_release(&v->dropped);
  sim_map_release(&v->waiting);
  sim_map_release(&v->deferred);
  free(v->ahead);
  v->ahead = NULL;
  v->nahead = v->ahead_cap = v->ahead_at = 0;
  v->at = 0;
  free(v->resv);
  v->resv = NULL;
  v->nresv = v->resv_cap = 0;
}

/* The pass's next event from those scan_requests kept: 1, 0 at the end. */
static int read_event(validator *v, sim_event *ev) {
  if (v->at >= v->nevs) return 0;
  const vev *e = &v->evs[v->at];
  sim_event_init(ev);
  ev->seq = (int64_t)v->at++;
  ev->addr = e->addr;
  ev->size = e->size;
  ev->stream = e->stream;
  ev->kind = e->kind;
  ev->flags = e->flags;
  return 1;
}

/* The next event: one read ahead first, else the next kept one. 1, 0 at the end. */
static int next_event(validator *v, sim_event *ev) {
  if (v->ahead_at < v->nahead) {
    *ev = v->ahead[v->ahead_at++];
    if (v->ahead_at == v->nahead) v->ahead_at = v->nahead = 0;
    return 1;
  }
  return read_event(v, ev);
}

static int peek_event(validator *v, size_t k, sim_event *ev) {
  while (v->nahead - v->ahead_at <= k) {
    sim_grow((void **)&v->ahead, &v->ahead_cap, v->nahead + 1, sizeof *v->ahead);
    int got = read_event(v, &v->ahead[v->nahead]);
    if (got <= 0) return got;
    v->nahead++;
  }
  *ev = v->ahead[v->ahead_at + k];
  return 1;
}

/*
 * release_cached_blocks (an OOM retry) first synchronizes: every block waiting for its stream
 * uses is completed, and the recording shows those free_completed entries just before the
 * releases, inside the request that failed to find a block. Replayed before that request, they
 * would hand it memory it did not have when it searched. So a run of free_completed that
 * completes every waiting block, right before an OOM entry, or before releases that end in a new
 * segment, is left to the model's own synchronization in that request; what it leaves undone is
 * completed after it. A free_completed right after its own free_requested is most often a plain
 * free() (no stream uses): it is left to the synchronization only before an OOM entry, where the
 * failing request cannot have seen the block free (and if the block could not serve it anyway,
 * either reading gives the same state).
 */
static void plan_deferral(validator *v, const sim_event *first, size_t next_rec, int adjacent) {
  size_t run = 1;
  sim_event nx;
  for (;;) {
    if (!peek_event(v, run - 1, &nx)) return;
    if (nx.kind != SIM_EV_FREE_COMPLETED || !sim_map_get(&v->waiting, nx.addr)) break;
    run++;
  }
  if (run != v->waiting.len) return;
  /* the gap before nx: releases, then a segment or an OOM */
  size_t i = next_rec;
  while (i < v->nrec && v->rec[i].before_seq < nx.seq) i++;
  int releases = 0;
  for (; i < v->nrec && v->rec[i].before_seq == nx.seq; i++) {
    int a = v->rec[i].action;
    if (a == R_SEG_FREE || a == R_SEG_UNMAP) releases++;
    else if (a != R_OTHER) break;
  }
  if (i >= v->nrec || v->rec[i].before_seq != nx.seq) return;
  int a = v->rec[i].action;
  if (!(a == R_OOM || (releases && !adjacent && (a == R_SEG_ALLOC || a == R_SEG_MAP)))) return;
  *sim_map_put(&v->deferred, first->addr, NULL) = 0;
  for (size_t k = 0; k + 1 < run; k++) {
    sim_event e;
    peek_event(v, k, &e);
    *sim_map_put(&v->deferred, e.addr, NULL) = 0;
  }
}

/* After the request: completions the model's synchronization did not make, made now. */
static void complete_deferred(validator *v) {
  size_t it = 0;
  uint64_t k, h;
  while (sim_map_next(&v->deferred, &it, &k, &h))
    if (h) v->a.ops->free_completed(v->a.ctx, (uintptr_t)(h - 1));
  sim_map_clear(&v->deferred);
}

/* A pass starts over: the result (but for what earlier passes found), the marks on the
 * recorded actions, and the maps of the preexisting blocks with the current guesses. */
static void pass_reset(validator *v) {
  validate_result *r = v->r;
  validate_result keep = *r;
  memset(r, 0, sizeof *r);
  r->recorded_peak_requested = keep.recorded_peak_requested;
  r->passes = keep.passes + 1;
  r->preexisting = v->npre;
  for (size_t i = 0; i < v->nrec; i++) v->rec[i].consumed = 0;
  for (size_t i = 0; i < v->npre; i++) {
    v->pre[i].freed_now = 0;
    if (v->pre[i].uncertain) r->uncertain_blocks++;
  }
  /* where the free block after each uncertain block starts, with the current guess of t */
  sim_map_clear(&v->fstart);
  for (size_t i = 0; i < v->npre; i++)
    if (v->pre[i].uncertain) *sim_map_put(&v->fstart, v->pre[i].addr + v->pre[i].base_size + v->pre[i].t, NULL) = i + 1;
  /* pre_idx maps every preexisting address again */
  sim_map_clear(&v->pre_idx);
  for (size_t i = 0; i < v->npre; i++) *sim_map_put(&v->pre_idx, v->pre[i].addr, NULL) = i + 1;
  v->restart = 0;
}

/* A model on the recorded device, restored to the state at the window's start. */
static int pass_model(validator *v) {
  sim_map_init(&v->live);
  sim_map_init(&v->dropped);
  sim_map_init(&v->waiting);
  sim_map_init(&v->deferred);
  memset(&v->dev, 0, sizeof v->dev);
  v->dev.ops = &recorded_device;
  v->dev.ctx = v;
  v->dev.total_memory = v->dev.free_memory = v->total_memory;
  v->dev.capacity = UINT64_MAX;
  v->dev.cc_major = 9;
  char err[SIM_ERRLEN];
  if (model_init(v, &v->a, &v->dev, err, sizeof err) != SIM_OK)
    return vfail(v, "cannot make the '%s' model with the recorded settings: %s", v->ops->name, err);
  v->have_model = 1;
  v->lo = v->hi = 0;
  if (restore_all(v)) return -1;
  check_orphans(v);
  for (size_t i = 0; i < v->nisegs; i++) v->dev.used += v->isegs[i].size;
  return 0;
}

/* The recorded peak of reserved bytes: the start, then the recorded segment actions. */
static void recorded_peak_reserved(validator *v) {
  validate_result *r = v->r;
  int64_t reserved = 0;
  for (size_t i = 0; i < v->nisegs; i++) reserved += (int64_t)v->isegs[i].size;
  r->recorded_peak_reserved = reserved;
  for (size_t i = 0; i < v->nrec; i++) {
    const vrec *a = &v->rec[i];
    if (a->action == R_SEG_ALLOC || a->action == R_SEG_MAP) reserved += (int64_t)a->size;
    if (a->action == R_SEG_FREE || a->action == R_SEG_UNMAP) reserved -= (int64_t)a->size;
    if (a->action <= R_SEG_UNMAP) r->segment_events++;
    if (reserved > r->recorded_peak_reserved) r->recorded_peak_reserved = reserved;
  }
}

/* The window's requests, each after the recorded actions that came before it. *next: the first
 * recorded action not yet in a gap; *stopped: stopped at v->context_at. 0, or -1. */
static int replay_requests(validator *v, size_t *next, int *stopped) {
  validate_result *r = v->r;
  sim_event ev;
  uint64_t just_requested = UINT64_MAX; /* the address freed by the event before, if it was free_requested */
  v->at = 0;
  while (next_event(v, &ev) > 0) {
    r->events++;
    if (ev.kind == SIM_EV_ALLOC && (ev.flags & SIM_EVF_PREEXISTING)) continue;
    if (v->context_at >= 0 && ev.seq >= v->context_at) {
      *stopped = 1;
      break;
    }
    /* An empty_cache event that ends a recorded burst of releases (the snapshot importer's) is a
     * reading of the burst; the gap rules judge the burst with the model instead, with the
     * request that follows it. */
    if (ev.kind == SIM_EV_EMPTY_CACHE && *next < v->nrec && v->rec[*next].before_seq <= ev.seq) continue;
    int adjacent = ev.kind == SIM_EV_FREE_COMPLETED && ev.addr == just_requested;
    just_requested = ev.kind == SIM_EV_FREE_REQUESTED ? ev.addr : UINT64_MAX;
    if (ev.kind == SIM_EV_FREE_COMPLETED && sim_map_get(&v->waiting, ev.addr) && !v->deferred.len)
      plan_deferral(v, &ev, *next, adjacent);
    v->cur_seq = ev.seq;
    v->lo = *next;
    while (*next < v->nrec && v->rec[*next].before_seq <= ev.seq) (*next)++;
    v->hi = *next;
    replay_gap(v, &ev);
    switch (ev.kind) {
    case SIM_EV_ALLOC: replay_alloc(v, &ev); break;
    case SIM_EV_FREE:
    case SIM_EV_FREE_REQUESTED:
    case SIM_EV_FREE_COMPLETED: replay_free(v, &ev); break;
    case SIM_EV_EMPTY_CACHE: empty_cache(v); break;
    case SIM_EV_SYNC:
      if (v->a.ops->synchronize) v->a.ops->synchronize(v->a.ctx, ev.stream);
      break;
    default: break;
    }
    if (v->restart) break;
    drop_unconsumed(v, v->lo, v->hi);
    if (v->deferred.len && ev.kind != SIM_EV_FREE_COMPLETED) complete_deferred(v);
  }
  return 0;
}

/* After the last request: the recorded actions left, the final state compared, the model's
 * figures, and whether the replay diverged. */
static void pass_finish(validator *v, size_t next) {
  validate_result *r = v->r;
  v->cur_seq = r->events;
  v->lo = next;
  v->hi = v->nrec;
  replay_gap(v, NULL);
  drop_unconsumed(v, v->lo, v->hi);
  compare_final(v);
  const sim_alloc_stats *st = v->a.ops->stats(v->a.ctx);
  r->replayed_peak_allocated = st->allocated.peak;
  r->replayed_peak_reserved = st->reserved.peak;
  r->replayed_peak_requested = st->requested.peak;
  r->replayed_peak_active = st->active.peak;
  r->final_allocated = st->allocated.current;
  r->final_reserved = st->reserved.current;
  r->device_mallocs = v->dev.mallocs;
  r->device_frees = v->dev.frees;
  r->device_maps = v->dev.maps;
  r->device_unmaps = v->dev.unmaps;
  for (size_t i = 0; i < v->npre; i++)
    if (v->pre[i].uncertain) r->peak_allocated_is_lower_bound = 1;
  if (r->segment_matches != r->segment_events || r->extra_segment_events || r->address_matches != r->allocs ||
      r->oom_matches != r->ooms || r->extra_ooms || !r->final_state_match)
    r->diverged = 1;
  if (r->diverged && r->first.event < 0) describe_context(v);
}

/* One replay from the rebuilt start. Returns 0 (done, or v->restart set), or -1. */
static int replay_pass(validator *v) {
  pass_reset(v);
  if (pass_model(v)) return -1;
  recorded_peak_reserved(v);
  size_t next = 0; /* first recorded action not yet in a gap */
  int stopped = 0;
  if (replay_requests(v, &next, &stopped)) return -1;
  if (v->restart || stopped) return 0;
  pass_finish(v, next);
  return 0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The state the last pass started from, for a replay (validate_window_start). */
static void export_start(const validator *v, replay_start *out) {
  items it = {0};
  size_t pi = 0, cap = 0;
  memset(out, 0, sizeof *out);
  out->device = v->t->device_index >= 0 ? v->t->device_index : 0;
  for (size_t g = 0; g < v->nisegs; g++) {
    size_t at = it.n, first = segment_items(v, g, &it, &pi);
    sim_grow((void **)&out->trace_addr, &cap, it.n, sizeof *out->trace_addr);
    out->trace_addr[at] = 0;
    for (size_t k = at + 1; k < it.n; k++) out->trace_addr[k] = v->pre[first + k - at - 1].addr;
    out->nsegments++;
    out->nblocks += it.n - at - 1;
  }
  out->items = it.v;
  out->n = it.n;
}

static int validate_core(store *s, const store_trace *t, validate_result *r, replay_start *start, char *err,
                         size_t errlen);

int validate_recorded_state(store *s, const store_trace *t, replay_start *out, char *err, size_t errlen) {
  validator v;
  validate_result r;
  memset(&v, 0, sizeof v);
  memset(out, 0, sizeof *out);
  v.s = s;
  v.t = t;
  v.r = &r;
  v.err = err;
  v.errlen = errlen;
  int rc = load(&v);
  items it = {0};
  size_t cap = 0, b = 0;
  out->device = t->device_index >= 0 ? t->device_index : 0;
  for (size_t g = 0; !rc && g < v.nfsegs; g++) {
    const vseg *sg = &v.fsegs[g];
    collect(&it, &(sim_walk_item){.is_segment = 1, .addr = sg->addr, .size = sg->size, .stream = sg->stream,
                                  .pool = sg->pool, .expandable = sg->expandable});
    out->nsegments++;
    while (b < v.nfblks && v.fblks[b].seg < sg->addr) b++;
    for (; b < v.nfblks && v.fblks[b].seg == sg->addr; b++) {
      const vblk *k = &v.fblks[b];
      if (k->state == SIM_BLOCK_FREE) continue;
      collect(&it, &(sim_walk_item){.addr = k->addr, .size = k->size, .requested = k->requested,
                                    .stream = sg->stream, .state = k->state});
      out->nblocks++;
    }
  }
  sim_grow((void **)&out->trace_addr, &cap, it.n ? it.n : 1, sizeof *out->trace_addr);
  for (size_t i = 0; i < it.n; i++) out->trace_addr[i] = it.v[i].is_segment ? 0 : it.v[i].addr;
  out->items = it.v;
  out->n = it.n;
  free(v.rec);
  free(v.fsegs);
  free(v.fblks);
  if (rc) replay_start_release(out);
  return rc;
}

int validate_run(store *s, const store_trace *t, validate_result *r, char *err, size_t errlen) {
  return validate_core(s, t, r, NULL, err, errlen);
}

const char *validate_start_key(void) { return VALIDATE_START_DIGEST; }

int validate_window_start(store *s, const store_trace *t, replay_start *out, int *agrees, char *err, size_t errlen) {
  validate_result r;
  memset(out, 0, sizeof *out);
  if (validate_core(s, t, &r, out, err, errlen)) return -1;
  if (agrees) *agrees = !r.diverged;
  return 0;
}

static int validate_core(store *s, const store_trace *t, validate_result *r, replay_start *start, char *err,
                         size_t errlen) {
  memset(r, 0, sizeof *r);
  double t0 = now_s();
  validator v;
  memset(&v, 0, sizeof v);
  v.s = s;
  v.t = t;
  v.r = r;
  v.err = err;
  v.errlen = errlen;
  v.context_at = -1;
  v.total_memory = t->device_memory > 0 ? (uint64_t)t->device_memory : DEFAULT_TOTAL_MEMORY;
  err[0] = 0;
  if (!t->allocator || !*t->allocator)
    return snprintf(err, errlen, "cannot validate '%s': the trace does not say which allocator recorded it", t->name), -1;
  if (strcmp(t->allocator, sim_torch_ops.name))
    return snprintf(err, errlen,
                    "cannot validate '%s': it was recorded by '%s', and validate replays PyTorch snapshots "
                    "through the 'torch' model",
                    t->name, t->allocator),
           -1;
  v.ops = &sim_torch_ops;
  if (sim_spec_parse(&v.spec, v.ops->name, err, errlen)) return -1;
  sim_map_init(&v.pre_idx);
  sim_map_init(&v.fstart);
  int rc = load(&v);
  if (!rc && !v.nfsegs && !v.nrec)
    rc = vfail(&v, "cannot validate '%s': it holds no recorded allocator state (validate needs a PyTorch memory "
                   "snapshot: its segments and segment events)", t->name);
  if (!rc) rc = initial_segments(&v);
  if (!rc) rc = scan_requests(&v);
  if (!rc) rc = size_preexisting(&v);
  /* Replay until no live-at-start remainder needs to grow (rule C), then describe the first
   * divergence from the state just before it. */
  while (!rc) {
    rc = replay_pass(&v);
    int again = !rc && v.restart && r->passes < MAX_PASSES;
    pass_release(&v);
    if (!again) break;
  }
  if (!rc && start) export_start(&v, start);
  if (!rc && !start && r->diverged && r->first.event >= 0) {
    validate_result done = *r;
    v.context_at = done.first.event;
    rc = replay_pass(&v);
    if (!rc) {
      done.first.nfree_near = 0;
      done.first.nsegment = 0;
      v.r = &done;
      describe_context(&v);
    }
    pass_release(&v);
    *r = done;
  }
  sim_map_release(&v.pre_idx);
  sim_map_release(&v.fstart);
  free(v.evs);
  free(v.rec);
  free(v.fsegs);
  free(v.isegs);
  free(v.fblks);
  free(v.pre);
  sim_spec_release(&v.spec);
  r->elapsed_s = now_s() - t0;
  return rc;
}

void validate_fill_replay_result(const validate_result *v, replay_result *out) {
  memset(out, 0, sizeof *out);
  out->events = v->events;
  out->allocs = v->allocs;
  out->frees = v->frees;
  out->ooms = v->ooms;
  out->peak_allocated = v->replayed_peak_allocated;
  out->peak_reserved = v->replayed_peak_reserved;
  out->peak_requested = v->replayed_peak_requested;
  out->peak_active = v->replayed_peak_active;
  out->peak_allocated_seq = out->peak_reserved_seq = out->peak_requested_seq = -1;
  out->final_allocated = v->final_allocated;
  out->final_reserved = v->final_reserved;
  out->device_mallocs = v->device_mallocs;
  out->device_frees = v->device_frees;
  out->device_maps = v->device_maps;
  out->device_unmaps = v->device_unmaps;
  out->fragmentation_gmlake =
      v->replayed_peak_reserved > 0 ? 1.0 - (double)v->replayed_peak_active / (double)v->replayed_peak_reserved : 0;
  out->elapsed_s = v->elapsed_s;
}

/* engine.c: the replay engine: events in, allocator decisions and measurements out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/device_sim.h"
#include "sim/hashmap.h"
#include "engine_int.h"
#include "steps.h"

/*
 * The engine knows allocators only through sim_allocator_ops and events only through
 * sim_event. It keeps what is live (memory grows with the live set, never with the trace),
 * one model instance per device, the peaks of the totals, the composition of live memory at
 * the peak, and a timeline whose resolution halves whenever it fills. Its record and its devices'
 * are in engine_int.h; a device's start from a recorded state, and that state kept with the
 * model, in engine_start.c.
 */

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- devices ---------------------------------------------------------------------------- */

static int sim_factory(void *arg, int device, sim_device *dev, char *err, size_t errlen) {
  const replay_config *cfg = arg;
  (void)device, (void)err, (void)errlen;
  sim_simdev_init(dev, cfg->capacity, cfg->total_memory);
  sim_simdev_set_va_order(dev, cfg->address_order);
  if (cfg->cc_major > 0) dev->cc_major = cfg->cc_major, dev->cc_minor = cfg->cc_minor;
  return 0;
}

static void sim_release(void *arg, int device, sim_device *dev) {
  (void)arg, (void)device;
  sim_simdev_release(dev);
}

static inline void device_sync(engine *e, devstate *ds);
static void seen_take(devstate *ds);

/* The device's peaks, raised to its current figures. */
static void device_peaks(devstate *ds) {
  replay_device_result *r = ds->res;
  if (ds->allocated > r->peak_allocated) r->peak_allocated = ds->allocated;
  if (ds->reserved > r->peak_reserved) r->peak_reserved = ds->reserved;
  if (ds->requested > r->peak_requested) r->peak_requested = ds->requested;
  if (ds->active > r->peak_active) r->peak_active = ds->active;
}

/* While one device is in use, the totals after each event are its figures: its peaks are taken
 * from the totals' (when another device comes, or at the end), beside those of its start state. */
static void device_peaks_from_totals(engine *e, devstate *ds) {
  const replay_result *r = e->res;
  replay_device_result *d = ds->res;
  if (r->peak_allocated > d->peak_allocated) d->peak_allocated = r->peak_allocated;
  if (r->peak_reserved > d->peak_reserved) d->peak_reserved = r->peak_reserved;
  if (r->peak_requested > d->peak_requested) d->peak_requested = r->peak_requested;
  if (r->peak_active > d->peak_active) d->peak_active = r->peak_active;
}

/* The only device's own figures, which were the totals (device_sync keeps only those). */
static void device_own(engine *e, devstate *ds) {
  ds->allocated = e->out.allocated, ds->reserved = e->out.reserved;
  ds->requested = e->out.requested, ds->active = e->active;
}

/* ---- models kept between runs ----------------------------------------------------------------
 * A kept engine keeps each device's model after a run where the model can reset itself, the
 * device is simulated and the model read no environment (a model that reads it is made afresh,
 * so that each run notes what it read); the next run whose configuration gives the same model
 * resets it and the device instead of making them again (sim_allocator_ops.reset). */

/* Appends "key=value\n" to a growing text. */
static void key_append(char **t, size_t *n, size_t *cap, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  sim_grow((void **)t, cap, *n + la + lb + 3, 1);
  memcpy(*t + *n, a, la);
  (*t)[*n + la] = '=';
  memcpy(*t + *n + la + 1, b, lb);
  *n += la + lb + 2;
  (*t)[*n - 1] = '\n';
  (*t)[*n] = 0;
}

/* What makes one model another: its options, the settings the trace recorded and the card's kind;
 * not the device's capacity or memory, which a kept model is told of (device_fit). */
static model_key key_of(const replay_config *cfg) {
  model_key k = {cfg->spec->ops, cfg->cc_major, cfg->cc_minor, NULL};
  size_t n = 0, cap = 0;
  key_append(&k.opts, &n, &cap, "spec", "");
  for (size_t i = 0; i < cfg->spec->nopts; i++) key_append(&k.opts, &n, &cap, cfg->spec->opts[i].key, cfg->spec->opts[i].value);
  const sim_recorded *r = cfg->recorded;
  key_append(&k.opts, &n, &cap, "recorded", r ? (r->error ? r->error : "") : "none");
  for (size_t i = 0; r && i < r->nopts; i++) key_append(&k.opts, &n, &cap, r->opts[i].key, r->opts[i].value);
  return k;
}

static int key_same(const model_key *a, const model_key *b) {
  return a->ops == b->ops && a->cc_major == b->cc_major && a->cc_minor == b->cc_minor && !strcmp(a->opts, b->opts);
}

static int model_keepable(const replay_config *cfg, const devstate *ds) {
  return !cfg->make_device && !cfg->getenv_fn && sim_allocator_can_reset(ds->a.ops);
}

static void model_drop(devstate *ds) {
  engine_start_forget(ds);
  sim_simdev_clearing(&ds->dev);
  sim_allocator_release(&ds->a);
  sim_release(NULL, 0, &ds->dev);
  free(ds->key.opts);
  ds->key.opts = NULL;
  ds->kept = 0;
}

/* The reset device of a kept model made the run's: its capacity and the card's memory, the model
 * told when they change (a comparison's policies that differ in capacity). 1, or 0 when the model
 * cannot follow. */
static int device_fit(const replay_config *cfg, devstate *ds) {
  sim_device *d = &ds->dev;
  if (d->capacity == cfg->capacity && d->total_memory == sim_simdev_total_memory(cfg->capacity, cfg->total_memory))
    return 1;
  if (!sim_allocator_can_follow_device(ds->a.ops)) return 0;
  sim_simdev_resize(d, cfg->capacity, cfg->total_memory);
  return ds->a.ops->device_changed(ds->a.ctx) == SIM_OK;
}

/* The kept model of ds reset for this run: 1, or 0 when the run needs another (the kept one dropped). */
static int model_reuse(const replay_config *cfg, devstate *ds) {
  model_key k = key_of(cfg);
  int same = model_keepable(cfg, ds) && key_same(&k, &ds->key);
  free(k.opts);
  if (same) sim_simdev_clearing(&ds->dev);
  if (same && ds->a.ops->reset(ds->a.ctx) == SIM_OK) {
    sim_simdev_reset(&ds->dev);
    sim_simdev_set_va_order(&ds->dev, cfg->address_order);
    if (device_fit(cfg, ds)) {
      free(ds->key.opts);
      ds->key.opts = NULL;
      ds->kept = 0;
      return 1;
    }
  }
  model_drop(ds);
  return 0;
}

/* A device first used: its model made (or a kept one reset), its start state restored. */
static devstate *device_new(engine *e, int device) {
  if (device >= REPLAY_MAX_DEVICES) {
    snprintf(e->err, e->errlen, "device index %d is out of range (at most %d devices)", device, REPLAY_MAX_DEVICES);
    return NULL;
  }
  devstate *ds = &e->devs[device];
  const replay_config *cfg = e->cfg;
  e->touched |= UINT64_C(1) << device;
  int reused = ds->kept && model_reuse(cfg, ds);
  if (reused) goto made;
  int rc = cfg->make_device ? cfg->make_device(cfg->device_arg, device, &ds->dev, e->err, e->errlen)
                            : sim_factory((void *)cfg, device, &ds->dev, e->err, e->errlen);
  if (rc) return NULL;
  rc = sim_allocator_init(&ds->a, cfg->spec, &ds->dev, cfg->recorded, cfg->getenv_fn, e->err, e->errlen);
  if (rc != SIM_OK) {
    if (cfg->make_device && cfg->release_device) cfg->release_device(cfg->device_arg, device, &ds->dev);
    else if (!cfg->make_device) sim_release(NULL, device, &ds->dev);
    return NULL;
  }
made:
  ds->dev.watch = cfg->device_watch;
  ds->dev.index = device;
  ds->dev.calls = 0;
  ds->used = 1;
  e->used_mask |= UINT64_C(1) << device;
  if (e->nused == 1) { /* the first device's figures were the totals */
    device_own(e, &e->devs[e->used[0]]);
    device_peaks_from_totals(e, &e->devs[e->used[0]]);
  }
  int k = e->nused++;
  for (; k > 0 && e->used[k - 1] > device; k--) e->used[k] = e->used[k - 1];
  e->used[k] = (uint8_t)device;
  ds->st = ds->a.ops->stats(ds->a.ctx);
  ds->free_now = sim_allocator_free_op(ds->a.ops);
  ds->res = &e->res->devices[e->res->ndevices++];
  ds->res->device = device;
  if (cfg->nstart) {
    if (!(reused && engine_start_load(e, ds, device)) && engine_start_keep(e, ds, device)) return NULL;
    device_sync(e, ds);
    if (e->nused == 1) device_own(e, ds);
    device_peaks(ds); /* the start state, before the event that made the device */
  }
  seen_take(ds); /* its first action is told from here */
  return ds;
}

static inline devstate *device_get(engine *e, int device) {
  if (device < 0) device = 0;
  if (device < REPLAY_MAX_DEVICES && e->devs[device].used) return &e->devs[device];
  return device_new(e, device);
}

/* Folds a device's stat changes into the totals. */
static inline void device_sync(engine *e, devstate *ds) {
  const sim_alloc_stats *st = ds->st;
  if (e->nused == 1) { /* the totals are the device's figures (its own copy waits: device_own) */
    e->out.allocated = st->allocated.current;
    e->out.reserved = st->reserved.current;
    e->out.requested = st->requested.current;
    e->active = st->active.current;
    return;
  }
  e->out.allocated += st->allocated.current - ds->allocated;
  e->out.reserved += st->reserved.current - ds->reserved;
  e->out.requested += st->requested.current - ds->requested;
  e->active += st->active.current - ds->active;
  ds->allocated = st->allocated.current;
  ds->reserved = st->reserved.current;
  ds->requested = st->requested.current;
  ds->active = st->active.current;
  if (e->nused > 1) device_peaks(ds); /* of one device, the totals' peaks */
}

static uint64_t largest_free_all(engine *e) {
  uint64_t best = 0;
  for (int k = 0; k < e->nused; k++) {
    devstate *ds = &e->devs[e->used[k]];
    uint64_t v = ds->a.ops->largest_free(ds->a.ctx);
    if (v > best) best = v;
  }
  return best;
}

/* ---- call sites ------------------------------------------------------------------------- */

#define SITE_SMALL_MAX (1u << 20)

static uint32_t site_new(engine *e, int64_t stack) {
  sim_grow((void **)&e->sites, &e->sites_cap, e->nsites + 1, sizeof *e->sites);
  e->sites[e->nsites] = (site_rec){.stack = stack};
  return (uint32_t)e->nsites++;
}

/* The site of a stack id not seen before in this run, or one past the small ids. */
static uint32_t site_add(engine *e, int64_t stack) {
  if (stack >= 0 && stack < SITE_SMALL_MAX) {
    size_t i = (size_t)stack;
    if (i >= e->site_small_cap) {
      size_t old = e->site_small_cap;
      sim_grow((void **)&e->site_small, &e->site_small_cap, i + 1, sizeof *e->site_small);
      memset(e->site_small + old, 0, (e->site_small_cap - old) * sizeof *e->site_small);
    }
    uint32_t idx = site_new(e, stack);
    e->site_small[i] = idx + 1;
    return idx;
  }
  int existed;
  uint64_t *slot = sim_map_put(&e->site_idx, (uint64_t)stack, &existed);
  if (existed) return (uint32_t)*slot;
  uint32_t idx = site_new(e, stack);
  *slot = idx;
  return idx;
}

static inline uint32_t site_of(engine *e, int64_t stack) {
  if ((uint64_t)stack < e->site_small_cap && e->site_small[stack]) return e->site_small[stack] - 1;
  return site_add(e, stack);
}

static void site_change(engine *e, uint32_t i, int64_t bytes, int64_t count) {
  site_rec *s = &e->sites[i];
  s->bytes += bytes;
  s->count += count;
  if (!s->dirty) {
    s->dirty = 1;
    if (e->ndirty == e->dirty_cap) sim_grow((void **)&e->dirty, &e->dirty_cap, e->ndirty + 1, sizeof *e->dirty);
    e->dirty[e->ndirty++] = i;
  }
}

/* Makes the peak copy of every site equal to its live value: only sites changed since the
 * last capture need copying, so the cost over a whole replay is linear in its events. */
static void sites_capture(engine *e) {
  for (size_t k = 0; k < e->ndirty; k++) {
    site_rec *s = &e->sites[e->dirty[k]];
    s->peak_bytes = s->bytes;
    s->peak_count = s->count;
    s->dirty = 0;
  }
  e->ndirty = 0;
}

/* Takes what is pending of the state at the peak. */
static void peak_take(engine *e) {
  replay_result *r = e->res;
  if (e->pend_lf) {
    r->at_peak_largest_free = largest_free_all(e);
    e->pend_lf = 0;
  }
  if (e->pend_cats) {
    memcpy(r->category_bytes, e->cat_bytes, sizeof e->cat_bytes);
    memcpy(r->category_count, e->cat_count, sizeof e->cat_count);
    memcpy(r->catsrc_bytes, e->catsrc_bytes, sizeof e->catsrc_bytes);
    sites_capture(e);
    e->pend_cats = 0;
  }
}

/* Called before anything changes the state: takes what is pending of the state at the peak. */
static inline void peak_capture(engine *e) {
  if (e->pend_cats | e->pend_lf) peak_take(e);
}

static int cmp_site(const void *a, const void *b) {
  const replay_site *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static void sites_finish(engine *e) {
  size_t top = e->cfg->top_sites ? e->cfg->top_sites : 10, n = 0;
  replay_site *all = sim_xmalloc((e->nsites ? e->nsites : 1) * sizeof *all);
  for (size_t i = 0; i < e->nsites; i++)
    if (e->sites[i].peak_bytes > 0)
      all[n++] = (replay_site){e->sites[i].stack, e->sites[i].peak_bytes, e->sites[i].peak_count};
  qsort(all, n, sizeof *all, cmp_site);
  e->res->nsites = top == REPLAY_NO_SITES ? 0 : n < top ? n : top;
  e->res->sites = all;
}

/* ---- timeline --------------------------------------------------------------------------- */

static void timeline_push(engine *e) {
  replay_result *r = e->res;
  if (!r->timeline) r->timeline = sim_xmalloc(e->max_points * sizeof *r->timeline); /* a lean run makes none */
  if (r->ntimeline == e->max_points) {
    /* Full: merge neighbours, halving the resolution. */
    size_t n = r->ntimeline / 2;
    for (size_t i = 0; i < n; i++) {
      replay_point *a = &r->timeline[2 * i], *b = &r->timeline[2 * i + 1];
      replay_point m = *a;
      if (b->allocated > m.allocated) m.allocated = b->allocated;
      if (b->reserved > m.reserved) m.reserved = b->reserved;
      if (b->requested > m.requested) m.requested = b->requested;
      r->timeline[i] = m;
    }
    if (r->ntimeline % 2) r->timeline[n++] = r->timeline[r->ntimeline - 1];
    r->ntimeline = n;
    e->bucket *= 2;
  }
  r->timeline[r->ntimeline++] = e->cur;
  e->cur_n = 0;
}

/* Counts an event into the current point, which starts at the first event of its bucket. */
static inline void timeline_tick(engine *e, const sim_event *ev) {
  if (e->cur_n == 0) e->cur = (replay_point){ev->seq, ev->ts, e->out.allocated, e->out.reserved, e->out.requested};
  if (++e->cur_n >= e->bucket) timeline_push(e);
}

/* The same for an event that may have changed the totals: the point keeps their maxima. */
static inline void timeline_add(engine *e, const sim_event *ev) {
  if (e->cur_n) {
    if (e->out.allocated > e->cur.allocated) e->cur.allocated = e->out.allocated;
    if (e->out.reserved > e->cur.reserved) e->cur.reserved = e->out.reserved;
    if (e->out.requested > e->cur.requested) e->cur.requested = e->out.requested;
  }
  timeline_tick(e, ev);
}

/* ---- what observers are told of an action ---------------------------------------------------
 * Only the models change a device's counters and reserved bytes, and only in an action (an
 * allocation, a free, a synchronize or empty_cache), so the difference between the device now and
 * as it was at the end of its previous action (or its making) is what the action did. */

static inline uint64_t device_calls(const sim_device *d) { return d->mallocs + d->frees + d->maps + d->unmaps; }

/* The device as it is now, as the baseline of its next action. */
static void seen_take(devstate *ds) {
  const sim_device *d = &ds->dev;
  ds->seen = (dev_snap){d->mallocs, d->frees, d->maps, d->unmaps, d->malloc_bytes, d->free_bytes, d->map_bytes,
                        d->unmap_bytes, ds->st->reserved.current};
  ds->seen_calls = device_calls(d);
}

/* An action that made driver calls (few do): their counts and bytes into the outcome. */
__attribute__((noinline)) static void seen_calls(engine *e, devstate *ds, replay_outcome *out) {
  const sim_device *d = &ds->dev;
  const dev_snap *s = &ds->seen;
  out->device_mallocs += d->mallocs - s->mallocs;
  out->device_frees += d->frees - s->frees;
  out->device_maps += d->maps - s->maps;
  out->device_unmaps += d->unmaps - s->unmaps;
  out->device_malloc_bytes += d->malloc_bytes - s->malloc_bytes;
  out->device_free_bytes += d->free_bytes - s->free_bytes;
  out->device_map_bytes += d->map_bytes - s->map_bytes;
  out->device_unmap_bytes += d->unmap_bytes - s->unmap_bytes;
  seen_take(ds);
  e->out_rare = 1;
}

/* After an action on ds: what it did into the outcome (an event's only action, `add` 0, or one of
 * a device-wide action's, `add` 1: the changes of reserved bytes add up), ds's baseline moved on. */
static inline void seen_note(engine *e, devstate *ds, replay_outcome *out, int add) {
  int64_t r = ds->st->reserved.current;
  if (add) out->reserved_delta += r - ds->seen.reserved;
  else out->reserved_delta = r - ds->seen.reserved;
  ds->seen.reserved = r;
  if (device_calls(&ds->dev) != ds->seen_calls) seen_calls(e, ds, out);
}

/* The outcome back to its state between events (its totals aside) once the observers have seen
 * it: what the event's handler may have set. */
static inline void outcome_rest(engine *e, int op) {
  replay_outcome *o = &e->out;
  o->reserved_delta = 0;
  if (op == OP_ALLOC) o->placement = (sim_placement){0, 0, 0};
  if (e->out_rare) {
    o->oom = o->ignored = 0;
    o->device_mallocs = o->device_frees = o->device_maps = o->device_unmaps = 0;
    o->device_malloc_bytes = o->device_free_bytes = o->device_map_bytes = o->device_unmap_bytes = 0;
    e->out_rare = 0;
  }
}

/* ---- events ----------------------------------------------------------------------------- */

/* Called after every event that may have changed the totals (the others cannot raise a peak).
 * lean: a constant (replay_config.lean): no state at the peak is wanted. */
__attribute__((always_inline)) static inline void peaks(engine *e, const sim_event *ev, int lean) {
  replay_result *r = e->res;
  if (e->out.allocated > r->peak_allocated) {
    r->peak_allocated = e->out.allocated;
    r->peak_allocated_seq = ev->seq;
    r->peak_ts = ev->ts;
    r->at_peak_reserved = e->out.reserved;
    /* the rest when the state is about to change (peak_capture) */
    if (!lean) {
      if (e->lazy_lf) e->pend_lf = 1, e->lf_lost = 0;
      else r->at_peak_largest_free = largest_free_all(e);
      e->pend_cats = 1;
    }
  }
  if (e->out.reserved > r->peak_reserved) {
    r->peak_reserved = e->out.reserved;
    r->peak_reserved_seq = ev->seq;
  }
  if (e->out.requested > r->peak_requested) {
    r->peak_requested = e->out.requested;
    r->peak_requested_seq = ev->seq;
  }
  if (e->active > r->peak_active) r->peak_active = e->active;
}

/* The peaks and the timeline after an event that may have changed the totals. Totals within the
 * current timeline point's maxima are within the peaks too (the point's maxima are totals seen,
 * the peaks the largest seen): most events then cost the point's comparisons alone. */
__attribute__((always_inline)) static inline void totals_seen(engine *e, const sim_event *ev, int lean) {
  if (!lean && e->cur_n && e->out.allocated <= e->cur.allocated && e->out.reserved <= e->cur.reserved &&
      e->out.requested <= e->cur.requested && e->active <= e->res->peak_active) {
    timeline_tick(e, ev);
    return;
  }
  peaks(e, ev, lean);
  if (!lean) timeline_add(e, ev);
}

static inline void account(engine *e, const live_entry *le, int sign) {
  int64_t b = sign * (int64_t)le->size;
  e->cat_bytes[le->category] += b;
  e->cat_count[le->category] += sign;
  e->catsrc_bytes[le->cat_source] += b;
  site_change(e, le->site, b, sign);
}

/* What an allocation's record keeps for the categories, the call sites and a stopped state's owners
 * (a lean replay reads none of them and leaves them out). */
static inline void note_owner(live_entry *le, const sim_event *ev, uint32_t site) {
  le->size = ev->size;
  le->category = ev->category < SIM_CAT__COUNT ? ev->category : SIM_CAT_UNKNOWN;
  le->cat_source = ev->cat_source < SIM_CATSRC__COUNT ? ev->cat_source : SIM_CATSRC_NONE;
  le->site = site;
}

static void record_oom(engine *e, devstate *ds, const sim_event *ev) {
  replay_result *r = e->res;
  r->ooms++;
  ds->res->ooms++;
  size_t max = e->cfg->max_ooms ? e->cfg->max_ooms : 100;
  if (r->noom_list >= max) return;
  if (r->noom_list == 0) r->oom_list = sim_xmalloc(max * sizeof *r->oom_list);
  replay_oom *o = &r->oom_list[r->noom_list++];
  memset(o, 0, sizeof *o);
  o->seq = ev->seq;
  o->device = ev->device < 0 ? 0 : ev->device;
  o->stream = ev->stream;
  o->size = ev->size;
  o->allocated = ds->st->allocated.current;
  o->reserved = ds->st->reserved.current;
  o->largest_free = ds->a.ops->largest_free(ds->a.ctx);
  ds->a.ops->describe_oom(ds->a.ctx, ev->size, ev->stream, o->message, sizeof o->message);
}

/* The handlers return 0, 1 for an allocation that did not fit, or -1 on error; `out` is NULL
 * when nobody observes the replay. */
/* A preexisting allocation whose block the device started with: it takes that block. 1 when it
 * did, 0 when no restored block is at its address (it is placed as any allocation). */
static int take_restored(engine *e, const sim_event *ev, uint32_t slot, int planned, replay_outcome *out) {
  const uint64_t *idx = sim_map_get(&e->restored_at, ev->addr);
  if (!idx || !e->restored_own || *idx > e->nrestored || e->restored[*idx - 1].taken) return 0;
  restored_block *rb = &e->restored[*idx - 1];
  rb->taken = 1;
  int existed;
  live_entry *le = planned ? dense_put(&e->dense, slot, ev->addr, &existed) : live_put(&e->live, ev->addr, &existed);
  if (existed) { /* cannot happen: preexisting addresses are distinct */
    e->res->duplicate_allocs++;
    return 1;
  }
  le->handle = rb->handle;
  le->device = (int8_t)rb->device;
  if (!e->lean) note_owner(le, ev, site_of(e, ev->stack));
  if (rb->state == SIM_BLOCK_PENDING_FREE) {
    le->state = REQUESTED; /* freed before the window, not yet reusable */
  } else {
    le->state = LIVE;
    if (!e->lean) {
      peak_capture(e);
      account(e, le, +1);
      /* the start state may be the peak: its composition fills in as its blocks are taken */
      if (e->out.allocated >= e->res->peak_allocated) e->pend_cats = 1;
    }
  }
  e->res->allocs++;
  if (out) out->placement = (sim_placement){rb->addr, rb->size, rb->handle};
  return 1;
}

/*
 * An allocation came while the state at the peak was still pending (the models have changed
 * since; the engine's own tables have not yet). When it raises the peak, the pending state is no
 * longer wanted. Otherwise: the categories and call sites are taken now, as they were (placed: the
 * caller accounts it next); the largest free block, when the models are as they were (a refusal
 * that released nothing), else it is lost (replay_engine_run takes it by a second pass).
 */
static void peak_settle(engine *e, devstate *ds, int placed) {
  const sim_alloc_stats *st = ds->st;
  int64_t was_allocated = e->nused == 1 ? e->out.allocated : ds->allocated; /* before the event */
  int64_t was_reserved = e->nused == 1 ? e->out.reserved : ds->reserved;
  if (placed && e->out.allocated + (st->allocated.current - was_allocated) > e->res->peak_allocated) return;
  if (e->pend_lf) {
    if (!placed && st->allocated.current == was_allocated && st->reserved.current == was_reserved)
      e->res->at_peak_largest_free = largest_free_all(e);
    else
      e->lf_lost = 1;
    e->pend_lf = 0;
  }
  if (placed) peak_capture(e);
}

/* planned: a constant; slot, the plan's record of the event (live.h). lean: a constant
 * (replay_config.lean): the categories and call sites of live memory are not followed. */
__attribute__((always_inline)) static inline int do_alloc(engine *e, const sim_event *ev, uint32_t slot, int planned,
                                                          int lean, replay_outcome *out) {
  int d = ev->device < 0 ? 0 : ev->device;
  devstate *ds = d < REPLAY_MAX_DEVICES && (e->used_mask >> d & 1) ? &e->devs[d] : NULL;
  if (!ds) peak_capture(e); /* making a device may change what the peak waits to take (a region taken up front) */
  /* a device's start was restored before the first event (devices_started) */
  if ((ev->flags & SIM_EVF_PREEXISTING) && e->cfg->nstart && take_restored(e, ev, slot, planned, out)) return 0;
  int existed;
  live_entry *le = planned ? dense_put(&e->dense, slot, ev->addr, &existed) : live_put(&e->live, ev->addr, &existed);
  if (existed && le->state != DROPPED) {
    e->res->duplicate_allocs++;
    if (out) out->ignored = 1, e->out_rare = 1;
    return 0;
  }
  if (!ds && !(ds = device_get(e, ev->device))) {
    if (planned) dense_del(&e->dense, le);
    else live_del(&e->live, le);
    return -1;
  }
  if (!ev->size) peak_capture(e); /* an allocation of nothing sets no peak: no reason to wait */
  sim_placement own = {0, 0, 0}, *pl = out ? &out->placement : &own; /* the outcome's is zero before */
  int rc = ds->a.ops->alloc(ds->a.ctx, ev->size, ev->stream, pl);
  le->handle = pl->handle;
  le->device = (int8_t)(ev->device < 0 ? 0 : ev->device);
  if (!lean) note_owner(le, ev, 0);
  int oom = 0;
  if (rc == SIM_OK) {
    le->state = LIVE;
    if (!lean) {
      le->site = site_of(e, ev->stack);
      if (e->pend_cats | e->pend_lf) peak_settle(e, ds, 1);
      account(e, le, +1);
    }
    e->res->allocs++;
  } else if (rc == SIM_EOOM) {
    le->state = DROPPED;
    oom = 1;
    if (out) out->oom = 1, out->placement = (sim_placement){0, 0, 0}, e->out_rare = 1;
    if (e->pend_lf) peak_settle(e, ds, 0);
    record_oom(e, ds, ev);
  } else {
    snprintf(e->err, e->errlen, "event %lld: allocator '%s' failed with status %d", (long long)ev->seq,
             ds->a.ops->name, rc);
    return -1;
  }
  device_sync(e, ds);
  if (out) seen_note(e, ds, out, 0);
  return oom;
}

/* The model lets go of a live or requested allocation: its free requested (when live) and, when it
 * completes, done; its record given back. Its device. */
__attribute__((always_inline)) static inline devstate *let_go(engine *e, live_entry *le, int completes, int planned,
                                                              int lean) {
  devstate *ds = &e->devs[le->device];
  const sim_allocator_ops *ops = ds->a.ops;
  int live = le->state == LIVE;
  if (live && !lean) account(e, le, -1);
  if (live && completes && ds->free_now) {
    ds->free_now(ds->a.ctx, le->handle); /* the request and its completion in one call */
  } else {
    if (live && ops->free_requested) ops->free_requested(ds->a.ctx, le->handle);
    if (completes) ops->free_completed(ds->a.ctx, le->handle);
  }
  if (completes) {
    e->res->frees++;
    if (planned) dense_del(&e->dense, le);
    else live_del(&e->live, le);
  } else {
    le->state = REQUESTED;
  }
  device_sync(e, ds);
  return ds;
}

__attribute__((always_inline)) static inline int do_free(engine *e, const sim_event *ev, uint32_t slot, int planned,
                                                         int lean, replay_outcome *out) {
  live_entry *le = planned ? dense_get(&e->dense, slot) : live_get(&e->live, ev->addr);
  if (!le) {
    e->res->unknown_frees++;
    if (out) out->ignored = 1, e->out_rare = 1;
    return 0;
  }
  int completes = ev->kind != SIM_EV_FREE_REQUESTED;
  if (le->state == DROPPED) {
    e->res->dropped_frees++;
    if (out) out->ignored = 1, e->out_rare = 1;
    if (completes && planned) dense_del(&e->dense, le);
    else if (completes) live_del(&e->live, le);
    return 0;
  }
  if (le->state == REQUESTED && ev->kind == SIM_EV_FREE_REQUESTED) {
    e->res->unknown_frees++; /* requested twice */
    if (out) out->ignored = 1, e->out_rare = 1;
    return 0;
  }
  if (!lean) peak_capture(e);
  devstate *ds = let_go(e, le, completes, planned, lean);
  if (out) seen_note(e, ds, out, 0);
  return 0;
}

/* A free request and, as the next event, its completion, in a lean replay nobody observes: when the
 * allocation is live, both at once (what the two do one after the other: the request alone cannot
 * raise a total, so nothing is seen between them): 2, the events read; else 0, and the engine reads
 * them one at a time. (A trace that records requests and completions, as PyTorch's snapshots do,
 * has one pair for each free that no stream holds back.) */
__attribute__((always_inline)) static inline int free_pair(engine *e, const sim_event *ev, const uint32_t *slot,
                                                           int planned) {
  if (!replay_is_pair(ev, planned ? slot : NULL)) return 0;
  live_entry *le = planned ? dense_get(&e->dense, slot[0]) : live_get(&e->live, ev->addr);
  if (!le || le->state != LIVE) return 0;
  let_go(e, le, 1, planned, 1);
  peaks(e, &ev[1], 1);
  return 2;
}

static void do_host(engine *e, const sim_event *ev) {
  if (ev->kind == SIM_EV_HOST_ALLOC) {
    int mem = ev->mem == SIM_MEM_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
    int existed;
    uint64_t *slot = sim_map_put(&e->host, ev->addr, &existed);
    if (existed) {
      e->res->duplicate_allocs++;
      return;
    }
    *slot = (ev->size & ((UINT64_C(1) << 56) - 1)) | ((uint64_t)mem << 56);
    e->host_live[mem] += (int64_t)ev->size;
  } else {
    uint64_t v;
    if (!sim_map_del(&e->host, ev->addr, &v)) {
      e->res->unknown_frees++;
      return;
    }
    e->host_live[v >> 56] -= (int64_t)(v & ((UINT64_C(1) << 56) - 1));
  }
  if (e->host_live[SIM_MEM_PINNED] > e->res->host_pinned_peak) e->res->host_pinned_peak = e->host_live[SIM_MEM_PINNED];
  if (e->host_live[SIM_MEM_PAGEABLE] > e->res->host_pageable_peak)
    e->res->host_pageable_peak = e->host_live[SIM_MEM_PAGEABLE];
}

/* Runs an allocator-wide action (synchronize, empty_cache) on the event's device, or on all. */
static void do_device_action(engine *e, const sim_event *ev, replay_outcome *out) {
  for (int k = 0; k < e->nused; k++) {
    int d = e->used[k];
    devstate *ds = &e->devs[d];
    if (ev->device >= 0 && ev->device != d) continue;
    const sim_allocator_ops *ops = ds->a.ops;
    void (*fn)(void *, int64_t) = NULL;
    if (ev->kind == SIM_EV_SYNC) fn = ops->synchronize;
    if (!fn && !(ev->kind == SIM_EV_EMPTY_CACHE && ops->empty_cache)) continue;
    peak_capture(e);
    if (fn) fn(ds->a.ctx, ev->stream);
    else ops->empty_cache(ds->a.ctx);
    device_sync(e, ds);
    if (out) seen_note(e, ds, out, 1);
  }
}

static int check_models(engine *e, const sim_event *ev) {
  for (int k = 0; k < e->nused; k++) {
    devstate *ds = &e->devs[e->used[k]];
    if (!ds->a.ops->check) continue;
    char msg[SIM_ERRLEN];
    if (ds->a.ops->check(ds->a.ctx, msg, sizeof msg)) {
      snprintf(e->err, e->errlen, "allocator '%s' is inconsistent after event %lld: %s", ds->a.ops->name,
               (long long)ev->seq, msg);
      return -1;
    }
  }
  return 0;
}

/* ---- stopping at a moment ------------------------------------------------------------------ */

static void state_fill(engine *e, replay_state *st, const sim_event *ev, int oom) {
  memset(st, 0, sizeof *st);
  st->event = ev;
  st->allocated = e->out.allocated;
  st->reserved = e->out.reserved;
  st->requested = e->out.requested;
  st->active = e->active;
  st->largest_free = largest_free_all(e);
  st->walkable = 1;
  st->engine_ = e;
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++) {
    devstate *ds = &e->devs[d];
    if (!ds->used) continue;
    st->ndevices++;
    st->allocator = ds->a.ops->name;
    if (!ds->a.ops->walk) st->walkable = 0;
  }
  if (oom && ev) {
    devstate *ds = &e->devs[ev->device < 0 ? 0 : ev->device];
    st->oom = 1;
    st->oom_size = ev->size;
    st->oom_stream = ev->stream;
    ds->a.ops->describe_oom(ds->a.ctx, ev->size, ev->stream, st->oom_message, sizeof st->oom_message);
  }
}

static void capture(engine *e, const sim_event *ev, int oom) {
  replay_state st;
  state_fill(e, &st, ev, oom);
  e->cfg->stop->capture(e->cfg->stop->arg, &st);
  e->res->stopped = 1;
}

/* Before an event: 1 when the moment asked for by time has come (captured then). */
static int stop_before(engine *e, const sim_event *ev) {
  const replay_stop *s = e->cfg->stop;
  if (!e->have_first) {
    e->first_ts = ev->ts;
    e->have_first = 1;
  }
  if (s->after_ns < 0 || sim_ns_between(e->first_ts, ev->ts) <= s->after_ns) return 0;
  capture(e, e->have_last ? &e->last : NULL, 0);
  return 1;
}

/* After an event (rc: 1 when it did not fit): 1 when it is the moment (captured then). */
static int stop_after(engine *e, const sim_event *ev, int rc) {
  const replay_stop *s = e->cfg->stop;
  e->last = *ev;
  e->have_last = 1;
  if ((s->at_oom && rc == 1) || (s->seq >= 0 && ev->seq >= s->seq)) {
    capture(e, ev, rc == 1);
    return 1;
  }
  return 0;
}

typedef struct owner_entry {
  uintptr_t handle;
  const live_entry *le;
} owner_entry;

static int cmp_owner(const void *a, const void *b) {
  const owner_entry *x = a, *y = b;
  if (x->le->device != y->le->device) return x->le->device < y->le->device ? -1 : 1;
  return x->handle < y->handle ? -1 : x->handle > y->handle;
}

/* The live requests, sorted by device and handle, to find a block's owner. */
static owner_entry *owners_sorted(engine *e, size_t *n) {
  owner_entry *o = sim_xmalloc((e->live.len + e->dense.len + 1) * sizeof *o);
  size_t k = 0;
  for (size_t i = 0; i <= e->live.mask; i++) {
    const live_entry *le = &e->live.slots[i];
    if (le->state == LIVE || le->state == REQUESTED) o[k++] = (owner_entry){le->handle, le};
  }
  for (size_t i = 0; e->planned > 0 && i < e->dense.hi; i++) {
    const live_entry *le = &e->dense.recs[i];
    if (le->state == LIVE || le->state == REQUESTED) o[k++] = (owner_entry){le->handle, le};
  }
  qsort(o, k, sizeof *o, cmp_owner);
  *n = k;
  return o;
}

typedef struct walk_ctx {
  engine *e;
  int device;
  owner_entry *owners;
  size_t nowners;
  replay_state_fn fn;
  void *arg;
} walk_ctx;

static int walk_item(void *arg, const sim_walk_item *item) {
  walk_ctx *w = arg;
  replay_block_owner ow = {0};
  if (!item->is_segment && item->handle) {
    size_t lo = 0, hi = w->nowners;
    while (lo < hi) { /* the first entry not below (device, handle) */
      size_t mid = (lo + hi) / 2;
      const owner_entry *m = &w->owners[mid];
      if (m->le->device < w->device || (m->le->device == w->device && m->handle < item->handle)) lo = mid + 1;
      else hi = mid;
    }
    if (lo < w->nowners && w->owners[lo].le->device == w->device && w->owners[lo].handle == item->handle) {
      const live_entry *le = w->owners[lo].le;
      ow = (replay_block_owner){1, le->addr, le->size, w->e->sites[le->site].stack, le->category,
                                le->state == REQUESTED};
      if (le->state != LIVE && le->state != REQUESTED) ow.known = 0;
    }
  }
  return w->fn(w->arg, w->device, item, &ow);
}

int replay_state_walk(const replay_state *st, replay_state_fn fn, void *arg) {
  engine *e = st->engine_;
  if (!st->walkable) return -1;
  walk_ctx w = {.e = e, .fn = fn, .arg = arg};
  w.owners = owners_sorted(e, &w.nowners);
  int rc = 0;
  for (int d = 0; d < REPLAY_MAX_DEVICES && !rc; d++) {
    devstate *ds = &e->devs[d];
    if (!ds->used) continue;
    w.device = d;
    rc = ds->a.ops->walk(ds->a.ctx, walk_item, &w);
  }
  free(w.owners);
  return rc;
}

/* The three copies of the event loop (replay_event's mode, a constant in each): the plain
 * replay (no observers, no moment to stop at, no per-event check), the observed one (observers
 * and nothing else: every replay that runs the time model), and the full one (any mix). */
enum { MODE_PLAIN, MODE_OBSERVED, MODE_FULL };
/* Added to a mode (never to MODE_FULL: a run that follows a plan or is lean has no moment to stop
 * at and no per-event check): MODE_PLANNED, the records of the live allocations are the dense
 * table's, at the plan's slots; MODE_LEAN, no timeline and no state at the peak are kept
 * (replay_config.lean). */
enum { MODE_PLANNED = 4, MODE_LEAN = 8 };

/* Each loop asks memory for the event EVENTS_AHEAD places on while it handles one: a trace larger
 * than the caches is otherwise read from memory at the pace the processor's own prefetcher keeps,
 * behind the loop (the planned torch replay of `memplay bench`'s generated trace of 2 M events,
 * 192 MB: 49-51 M events/s without, 54 with; docs/performance.md, round twenty-nine). The address
 * is an integer's, as it may lie past the array's end: a prefetch reads nothing and never faults. */
#define EVENTS_AHEAD 32
static inline void event_ahead(const sim_event *evs, size_t i) {
  __builtin_prefetch((const void *)((uintptr_t)evs + (i + EVENTS_AHEAD) * sizeof *evs));
}

/* Tells the observers what the event did. */
static inline void observers_tell(engine *e, const sim_event *ev) {
  e->obs0.event(e->obs0.ctx, ev, &e->out);
  for (size_t i = 1; i < e->nobs; i++) e->cfg->observers[i].event(e->cfg->observers[i].ctx, ev, &e->out);
}

/* Replays one event: 0 to go on, 1 to stop (at an OOM, when asked to), 2 or 3 at the moment asked
 * for (after or before the event), -1 on error. */
__attribute__((always_inline)) static inline int replay_event(engine *e, const sim_event *ev, uint32_t slot, int mode) {
  const int planned = mode & MODE_PLANNED, lean = mode & MODE_LEAN;
  mode &= ~(MODE_PLANNED | MODE_LEAN);
  int op = kind_op[ev->kind], rc = 0;
  int told = mode == MODE_OBSERVED || (mode == MODE_FULL && e->nobs);
  if (mode == MODE_FULL && e->cfg->stop && stop_before(e, ev)) return 3;
  if (op == OP_NONE && (mode != MODE_FULL || (!told && !e->cfg->stop))) {
    if (!lean) timeline_tick(e, ev); /* kernels, copies, markers: nothing changes, the outcome is at rest */
    if (mode == MODE_OBSERVED) observers_tell(e, ev);
    return 0;
  }
  replay_outcome *o = told ? &e->out : NULL;
  if (op == OP_FREE) rc = do_free(e, ev, slot, planned, lean, o); /* tests, not a jump table: frees and allocations are most events */
  else if (op == OP_ALLOC) rc = do_alloc(e, ev, slot, planned, lean, o);
  else if (op == OP_HOST) do_host(e, ev);
  else if (op == OP_DEVICE) do_device_action(e, ev, o);
  if (rc < 0) return -1;
  if (op != OP_HOST && op != OP_NONE) {
    totals_seen(e, ev, lean);
  } else if (!lean) {
    timeline_tick(e, ev);
  }
  if (told) {
    observers_tell(e, ev);
    outcome_rest(e, op);
  }
  if (mode == MODE_FULL) {
    if (e->cfg->check_level >= 2 && check_models(e, ev)) return -1;
    if (e->cfg->stop && stop_after(e, ev, rc)) return 2;
  }
  return rc && e->cfg->stop_at_oom ? 1 : 0;
}

/* ---- a run nobody observes, on one device ---------------------------------------------------
 * A replay with no observer, no moment to stop at and no per-event check takes the events that make
 * up nearly all of a trace in a loop of its own while one device is in use (plain_run): an
 * allocation of a free record; a free, a free request or a completion of a live or requested
 * allocation (lean: a free, or a request its completion follows); events that change nothing. What
 * stays the same from one event to the next (the device's model and statistics, the table of
 * records) is taken once, in a plain_hold. A planned run finds its records in the dense table at
 * the plan's numbers; a run without a plan (`hashed`) finds them by address in the hash table, for
 * views of PLAIN_VIEW_MIN events or more (a source that lends no view hands the engine one event at
 * a time, and would pay the loop's set-up at each). What each event is to the loop comes with the
 * plan, its step (source.h), so that the loop need not read a free's event (a lean one never does);
 * without the plan's steps (a store's plan, lent a view at a time, or no plan) each is told from
 * its event. With them, a lean loop takes an allocation's size and address from the plan's
 * arguments where they hold it (replay_alloc_arg), and reads its event only at a new peak or an
 * OOM. Each step does what do_alloc, do_free, let_go, peaks and the timeline do for its event, in
 * the same order; any other event (a duplicate, a record an OOM dropped, a preexisting allocation
 * of a start state, another device, a synchronization) goes to replay_event, and the loop goes on
 * after it. The steps are the loop's own copies, not calls of those handlers: calling do_alloc's
 * last step and let_go from here cost this loop 5% (memplay bench, planned torch,
 * docs/performance.md); unit_engine's planned_replay_on_one_device_matches_unplanned holds the loop
 * to replay_event's results, with the plan's steps and without, with its arguments and without, and
 * without a plan; plain_replay_matches_checked_and_observed does too, with addresses reused. */

typedef struct plain_hold {
  devstate *ds;
  int16_t dev;
  int restores; /* the run has start states (a preexisting allocation may take a restored block) */
  int (*alloc)(void *, uint64_t, int64_t, sim_placement *);
  void (*free_now)(void *, uintptr_t);
  void *ctx;
  const sim_alloc_stats *st;
  live_dense *t;       /* the records, numbered by the plan */
  live_table *lt;      /* or by address (a run without a plan: plain_run's `hashed`) */
  replay_result *r;
  const replay_alloc_arg *args; /* the view's (lean, on the device of its allocations), or NULL */
  int64_t stream;               /* theirs */
  struct lean_marks *marks;
} plain_hold;

/* The events of a lean loop's latest peaks, whose numbers and times are read when the loop stops:
 * a new peak then waits for no event's line (a loop with the plan's arguments reads no other). */
typedef struct lean_marks {
  const sim_event *allocated, *reserved, *requested;
} lean_marks;

/* After an event on the run's only device, its totals against the peaks (peaks, lean, with the
 * totals read from the device's statistics). */
__attribute__((always_inline)) static inline void lean_peaks(replay_result *r, const sim_alloc_stats *st,
                                                             const sim_event *ev, lean_marks *m) {
  int64_t a = st->allocated.current, v = st->reserved.current, q = st->requested.current, c = st->active.current;
  if (a > r->peak_allocated) {
    r->peak_allocated = a;
    r->at_peak_reserved = v;
    m->allocated = ev;
  }
  if (v > r->peak_reserved) r->peak_reserved = v, m->reserved = ev;
  if (q > r->peak_requested) r->peak_requested = q, m->requested = ev;
  if (c > r->peak_active) r->peak_active = c;
}

/* The marked peaks' event numbers and time, once the loop stops (its events still lent). */
static inline void lean_marks_take(replay_result *r, const lean_marks *m) {
  if (m->allocated) r->peak_allocated_seq = m->allocated->seq, r->peak_ts = m->allocated->ts;
  if (m->reserved) r->peak_reserved_seq = m->reserved->seq;
  if (m->requested) r->peak_requested_seq = m->requested->seq;
}

/* After an event the step took: the totals, the peaks, the timeline (lean: the peaks alone). */
__attribute__((always_inline)) static inline void plain_after(engine *e, const plain_hold *h, const sim_event *ev,
                                                              int lean) {
  if (lean) {
    lean_peaks(h->r, h->st, ev, h->marks);
    return;
  }
  device_sync(e, h->ds);
  totals_seen(e, ev, 0);
}

/* An allocation of size at the trace's address addr on stream, record `slot` (do_alloc's common
 * case), once plain_alloc or the plan has told that it is one: as plain_alloc says. */
__attribute__((always_inline)) static inline int plain_take(engine *e, const plain_hold *h, const sim_event *ev,
                                                            uint32_t slot, uint64_t size, uint64_t addr,
                                                            int64_t stream, int lean, int hashed) {
  live_entry *le;
  if (hashed) {
    int existed;
    le = live_put(h->lt, addr, &existed);
    if (existed) return 2; /* a duplicate, or an address an OOM dropped: replay_event's */
  } else {
    live_dense *t = h->t;
    if (slot >= t->cap || t->recs[slot].state != EMPTY) return 2;
    le = &t->recs[slot];
    le->addr = addr;
    le->state = LIVE;
    t->len++;
    if (slot >= t->hi) t->hi = (size_t)slot + 1;
  }
  sim_placement pl = {0, 0, 0};
  int ar = h->alloc(h->ctx, size, stream, &pl), stop = 0;
  le->handle = pl.handle;
  le->device = (int8_t)h->dev;
  if (!lean) note_owner(le, ev, 0);
  if (ar == SIM_OK) {
    if (!lean) {
      le->site = site_of(e, ev->stack);
      if (e->pend_cats | e->pend_lf) peak_settle(e, h->ds, 1);
      account(e, le, +1);
    }
    h->r->allocs++;
  } else if (ar == SIM_EOOM) {
    le->state = DROPPED;
    if (!lean && e->pend_lf) peak_settle(e, h->ds, 0);
    record_oom(e, h->ds, ev);
    stop = e->cfg->stop_at_oom ? 1 : 0;
  } else {
    snprintf(e->err, e->errlen, "event %lld: allocator '%s' failed with status %d", (long long)ev->seq,
             h->ds->a.ops->name, ar);
    return -1;
  }
  plain_after(e, h, ev, lean);
  return stop;
}

/* An allocation, event i of the view (do_alloc's common case): 0, 1 when the run stops at its OOM,
 * -1 on error, or 2 when it is not one the step takes (nothing done). One the plan's arguments
 * hold is taken from them without a look at its event (but at a new peak or an OOM). */
__attribute__((always_inline)) static inline int plain_alloc(engine *e, const plain_hold *h, const sim_event *evs,
                                                             size_t i, uint32_t slot, int lean, int hashed) {
  if (lean && h->args && h->args[i].size != REPLAY_ARG_EVENT)
    return plain_take(e, h, &evs[i], slot, h->args[i].size, h->args[i].addr, h->stream, 1, 0);
  const sim_event *ev = &evs[i];
  if ((ev->device != h->dev && !(ev->device < 0 && h->dev == 0)) ||
      ((ev->flags & SIM_EVF_PREEXISTING) && h->restores) || (!lean && !ev->size))
    return 2;
  return plain_take(e, h, ev, slot, ev->size, ev->addr, ev->stream, lean, hashed);
}

/* The record a free names: the plan's record *slot, or (hashed) the record of its address. */
__attribute__((always_inline)) static inline live_entry *plain_rec(const plain_hold *h, const sim_event *ev,
                                                                   const uint32_t *slot, int hashed) {
  return hashed ? live_get(h->lt, ev->addr) : dense_get(h->t, *slot);
}

__attribute__((always_inline)) static inline void plain_rec_del(const plain_hold *h, live_entry *le, int hashed) {
  if (hashed) live_del(h->lt, le);
  else dense_del(h->t, le);
}

/* A free of a live allocation, or a request its completion follows (free_pair's case), the event's
 * step `step`: the events taken, 1 or 2, or 0 (not one the step takes). A free gives memory back:
 * of the totals a lean loop follows, only the active bytes may rise at one (cudaMallocAsync's pool
 * counts a free pending on its stream as active, merged with the free memory beside it), so that
 * is the only peak a lean free looks for. The unplanned loop looks for all four after every event;
 * unit_engine's planned_replay_on_one_device_matches_unplanned holds the two to the same peaks. */
__attribute__((always_inline)) static inline int lean_free(const plain_hold *h, const sim_event *ev, int step,
                                                           const uint32_t *slot, size_t left, int hashed) {
  int pair = step == REPLAY_STEP_PAIR;
  if (step == REPLAY_STEP_REQUEST || (pair && left < 2)) return 0;
  live_entry *le = plain_rec(h, ev, slot, hashed);
  if (!le || le->state != LIVE) return 0;
  h->free_now(h->ctx, le->handle);
  h->r->frees++;
  plain_rec_del(h, le, hashed);
  if (h->st->active.current > h->r->peak_active) h->r->peak_active = h->st->active.current;
  return 1 + pair;
}

/* A free, a free request or a completion of a live allocation, or the completion of a requested
 * one (do_free's and let_go's cases), the event's step `step`: 1, or 0 (not one the step takes). */
__attribute__((always_inline)) static inline int full_free(engine *e, const plain_hold *h, const sim_event *ev,
                                                           int step, const uint32_t *slot, int hashed) {
  live_entry *le = plain_rec(h, ev, slot, hashed);
  if (!le) return 0;
  int live = le->state == LIVE, completes = step == REPLAY_STEP_FREE;
  if (!live && !(le->state == REQUESTED && completes)) return 0;
  const sim_allocator_ops *ops = h->ds->a.ops;
  peak_capture(e);
  if (live) account(e, le, -1);
  if (live && completes) {
    h->free_now(h->ctx, le->handle);
  } else {
    if (live && ops->free_requested) ops->free_requested(h->ctx, le->handle);
    if (completes) ops->free_completed(h->ctx, le->handle);
  }
  if (completes) {
    h->r->frees++;
    plain_rec_del(h, le, hashed);
  } else {
    le->state = REQUESTED;
  }
  plain_after(e, h, ev, 0);
  return 1;
}

/* From evs[i], the events the steps take: the index of the first they leave to replay_event (n at
 * the end), *rc as replay_event says of the last (1: stopped at an OOM; -1: an error). steps: the
 * plan's (each event's REPLAY_STEP_*), or NULL (told from the events; a constant in each copy).
 * hashed (a constant): the events have no plan (slots and steps NULL), their records are found by
 * address in the hash table. */
__attribute__((always_inline)) static inline size_t plain_run(engine *e, const sim_event *evs, const uint32_t *slots,
                                                            const uint8_t *steps, size_t i, size_t n, int *rc,
                                                            int lean, int hashed) {
  *rc = 0;
  if (e->nused != 1 || !e->devs[e->used[0]].free_now) return i;
  devstate *ds = &e->devs[e->used[0]];
  const int d = e->args_device;
  const replay_alloc_arg *args = lean && steps && (d == e->used[0] || (d < 0 && e->used[0] == 0)) ? e->args : NULL;
  lean_marks marks = {NULL, NULL, NULL};
  const plain_hold h = {ds,        e->used[0], e->cfg->nstart != 0, ds->a.ops->alloc, ds->free_now, ds->a.ctx,
                        ds->st,    &e->dense,  &e->live,            e->res,           args,         e->args_stream,
                        &marks};
  for (; i < n; i++) {
    const sim_event *ev = &evs[i];
    int step = steps ? steps[i] : replay_step_of(evs, slots, i, n);
    if (!args) event_ahead(evs, i); /* with them, an event is read at a new peak at most */
    if (step == REPLAY_STEP_ALLOC) {
      int r = plain_alloc(e, &h, evs, i, hashed ? 0 : slots[i], lean, hashed);
      if (r == 2) break;
      if (r) {
        *rc = r;
        break;
      }
    } else if (step >= REPLAY_STEP_FREE) {
      const uint32_t *slot = hashed ? NULL : &slots[i];
      int took = lean ? lean_free(&h, ev, step, slot, n - i, hashed) : full_free(e, &h, ev, step, slot, hashed);
      if (!took) break;
      i += (size_t)took - 1;
    } else if (step == REPLAY_STEP_OTHER) {
      break;
    } else if (!lean) {
      timeline_tick(e, ev);
    }
  }
  if (lean) lean_marks_take(h.r, &marks);
  device_sync(e, ds);
  return i;
}

/* plain_run with the plan's steps, with its numbers alone, or with neither (slots NULL: hashed; a
 * copy each). */
__attribute__((always_inline)) static inline size_t plain_run_steps(engine *e, const sim_event *evs,
                                                                  const uint32_t *slots, const uint8_t *steps,
                                                                  size_t i, size_t n, int *rc, int lean) {
  if (!slots) return plain_run(e, evs, NULL, NULL, i, n, rc, lean, 1);
  return steps ? plain_run(e, evs, slots, steps, i, n, rc, lean, 0) : plain_run(e, evs, slots, NULL, i, n, rc, lean, 0);
}

/* An unplanned view of fewer events than this is replayed event by event (a source that lends no
 * view is read one event at a time): plain_run's set-up would cost more than it saves. */
#define PLAIN_VIEW_MIN 64

/* The loop of one mode (a constant): replays evs[0..n-1] until one asks to stop; how many were
 * read, *rc what replay_event said of the last. slots and steps: the plan's for these events, or
 * NULL. */
__attribute__((always_inline)) static inline size_t replay_loop(engine *e, const sim_event *evs, const uint32_t *slots,
                                                             const uint8_t *steps, size_t n, int mode, int *rc) {
  size_t i = 0;
  int r = 0;
  const int planned = mode & MODE_PLANNED, plain = (mode & ~(MODE_PLANNED | MODE_LEAN)) == MODE_PLAIN;
  const int held = plain && (planned || n >= PLAIN_VIEW_MIN); /* plain_run takes the common events */
  if ((mode & MODE_LEAN) && plain) { /* nobody sees each event */
    while (i < n) {
      if (held) {
        i = plain_run_steps(e, evs, slots, steps, i, n, &r, 1);
        if (r || i == n) break;
      }
      if (evs[i].kind == SIM_EV_FREE_REQUESTED && i + 1 < n) {
        int read = free_pair(e, &evs[i], planned ? &slots[i] : NULL, planned);
        if (read) {
          i += (size_t)read;
          continue;
        }
      }
      if ((r = replay_event(e, &evs[i], planned ? slots[i] : 0, mode))) break;
      i++;
    }
  } else if (held) {
    while (i < n) {
      i = plain_run_steps(e, evs, slots, steps, i, n, &r, 0);
      if (r || i == n) break;
      if ((r = replay_event(e, &evs[i], planned ? slots[i] : 0, mode))) break;
      i++;
    }
  } else if (planned) {
    for (; i < n; i++) {
      event_ahead(evs, i);
      if ((r = replay_event(e, &evs[i], slots[i], mode))) break;
    }
  } else {
    for (; i < n; i++) {
      event_ahead(evs, i);
      if ((r = replay_event(e, &evs[i], 0, mode))) break;
    }
  }
  *rc = r;
  return i;
}

/* The loop of a mode (a constant), lean or not as the run is. */
__attribute__((always_inline)) static inline size_t replay_loop_lean(engine *e, const sim_event *evs,
                                                                  const uint32_t *slots, const uint8_t *steps,
                                                                  size_t n, int mode, int *rc) {
  return e->lean ? replay_loop(e, evs, slots, steps, n, mode | MODE_LEAN, rc)
                 : replay_loop(e, evs, slots, steps, n, mode, rc);
}

/* slots and steps: the plan's for evs, or NULL (steps: NULL too when slots is). */
__attribute__((always_inline)) static inline size_t replay_some(engine *e, const sim_event *evs, const uint32_t *slots,
                                                             const uint8_t *steps, size_t n, int *rc) {
  const replay_config *cfg = e->cfg;
  if (cfg->stop || cfg->check_level >= 2) return replay_loop(e, evs, NULL, NULL, n, MODE_FULL, rc); /* never planned */
  if (slots)
    return cfg->nobservers ? replay_loop_lean(e, evs, slots, steps, n, MODE_OBSERVED | MODE_PLANNED, rc)
                           : replay_loop_lean(e, evs, slots, steps, n, MODE_PLAIN | MODE_PLANNED, rc);
  return cfg->nobservers ? replay_loop_lean(e, evs, NULL, NULL, n, MODE_OBSERVED, rc)
                         : replay_loop_lean(e, evs, NULL, NULL, n, MODE_PLAIN, rc);
}

replay_engine *replay_engine_new(void) {
  engine *e = sim_xcalloc(1, sizeof *e);
  live_init(&e->live, LIVE_START_BITS);
  sim_map_init(&e->restored_at);
  sim_map_init(&e->host);
  sim_map_init(&e->site_idx);
  return e;
}

/* The live table for a run of the source, empty: it keeps the size an earlier run grew it to,
 * unless the source's length hint says this run needs less. */
static void live_begin(live_table *t, const replay_source *src) {
  unsigned bits = 64 - t->shift, most = bits;
  if (src->length_hint && src->length_hint < ((size_t)1 << LIVE_START_BITS) / 4)
    for (most = LIVE_SMALL_BITS; ((size_t)1 << most) < 4 * src->length_hint; most++) {}
  if (bits > most) {
    live_release(t);
    live_init(t, most);
  } else if (t->len) {
    memset(t->slots, 0, (t->mask + 1) * sizeof *t->slots);
    t->len = 0;
  }
}

/* The per-run state of a kept engine back to empty (the tables keep their memory); res cleared
 * and given room for the timeline. */
static void engine_begin(engine *e, const replay_config *cfg, replay_source *src, replay_result *res, char *err,
                         size_t errlen) {
  memset(res, 0, sizeof *res);
  live_begin(&e->live, src);
  /* a plan is followed only in the two plain copies of the event loop (replay_some) */
  e->planned = src->view_slots && !cfg->stop && cfg->check_level < 2 ? 0 : -1;
  dense_begin(&e->dense, src->plan_records);
  e->nrestored = 0;
  e->restored_own = 0; /* restored_at is the last run's until a device starts from a state */
  sim_map_clear(&e->host);
  sim_map_clear(&e->site_idx);
  for (size_t i = 0; i < e->nsites; i++) /* the small-id index holds only the sites' own ids */
    if (e->sites[i].stack >= 0 && e->sites[i].stack < SITE_SMALL_MAX) e->site_small[e->sites[i].stack] = 0;
  e->nsites = 0;
  e->ndirty = 0;
  /* everything else starts at zero, as in a new engine (the devices no run has begun are) */
  for (uint64_t t = e->touched; t; t &= t - 1) {
    devstate *ds = &e->devs[__builtin_ctzll(t)];
    if (!ds->kept) {
      memset(ds, 0, sizeof *ds);
      e->touched &= ~(t & -t);
      continue;
    }
    devstate keep = *ds; /* a model kept from an earlier run, its device and start state with it */
    memset(ds, 0, sizeof *ds);
    ds->kept = 1, ds->key = keep.key, ds->dev = keep.dev, ds->a = keep.a, ds->start = keep.start;
  }
  memset(e->host_live, 0, sizeof e->host_live);
  e->out.allocated = e->out.reserved = e->out.requested = e->active = 0;
  memset(e->cat_bytes, 0, sizeof e->cat_bytes);
  memset(e->cat_count, 0, sizeof e->cat_count);
  memset(e->catsrc_bytes, 0, sizeof e->catsrc_bytes);
  e->pend_cats = e->pend_lf = e->lf_lost = 0;
  e->lean = res->lean = cfg->lean && !cfg->stop && cfg->check_level < 2;
  /* the largest free block waits past allocations when a second pass can take it if lost: on a
   * simulated device, a source that rewinds, a replay to the end */
  e->lazy_lf = src->rewind && !cfg->make_device && !cfg->stop;
  memset(e->used, 0, sizeof e->used);
  e->nused = 0;
  e->used_mask = 0;
  memset(&e->cur, 0, sizeof e->cur);
  e->cur_n = 0;
  memset(&e->out, 0, sizeof e->out);
  e->out.category_bytes = e->cat_bytes;
  e->out_rare = 0;
  e->obs0 = cfg->nobservers ? cfg->observers[0] : (replay_observer){0};
  e->nobs = cfg->nobservers;
  memset(&e->last, 0, sizeof e->last);
  e->have_last = e->have_first = 0;
  e->first_ts = 0;
  e->cfg = cfg;
  e->res = res;
  e->err = err;
  e->errlen = errlen;
  err[0] = 0;
  e->bucket = 1;
  e->max_points = cfg->timeline_points ? cfg->timeline_points : 1000;
  if (e->max_points < 2) e->max_points = 2;
  res->peak_allocated_seq = res->peak_reserved_seq = res->peak_requested_seq = -1;
}

/* The run stops following its plan (a view came without its numbers): the records held move to
 * the hash table, which the rest of the run uses. */
static void unplan(engine *e) {
  for (size_t i = 0; i < e->dense.hi; i++) {
    const live_entry *d = &e->dense.recs[i];
    if (d->state == EMPTY) continue;
    int existed;
    *live_put(&e->live, d->addr, &existed) = *d;
  }
  dense_begin(&e->dense, 0);
  e->planned = -1;
}

/* The plan's numbers of the events of the view just taken, or NULL when the run does not follow a
 * plan: the first view decides, and a run that follows one leaves it at a view without numbers. */
static const uint32_t *view_slots(engine *e, replay_source *src) {
  if (e->planned < 0) return NULL;
  const uint32_t *slots = src->view_slots(src->ctx);
  if (!e->planned) e->planned = slots ? 1 : -1;
  else if (!slots) unplan(e);
  return slots;
}

/* Replays the source to its end: 0, 1 when stopped at an OOM, -1 on error. The events are taken
 * a view at a time where the source offers views, else one by one. */
static int replay_events(engine *e, replay_source *src) {
  int rc = 0;
  for (;;) {
    const sim_event *evs;
    sim_event one;
    ptrdiff_t n;
    if (src->view) {
      n = src->view(src->ctx, &evs);
    } else {
      n = replay_source_next(src, &one);
      evs = &one;
    }
    if (n == 0) break;
    if (n < 0) {
      const char *m = src->error ? src->error(src->ctx) : NULL;
      snprintf(e->err, e->errlen, "%s", m && *m ? m : "cannot read events");
      rc = -1;
      break;
    }
    if (e->start_due) { /* the start states are the figures before the first event */
      e->start_due = 0;
      peaks(e, evs, e->lean);
    }
    const uint32_t *slots = src->view ? view_slots(e, src) : NULL;
    const uint8_t *steps = slots && src->view_steps ? src->view_steps(src->ctx) : NULL;
    e->args = steps && src->view_args ? src->view_args(src->ctx, &e->args_stream, &e->args_device) : NULL;
    size_t i = replay_some(e, evs, slots, steps, (size_t)n, &rc);
    if (rc == 3) rc = 2; /* stopped before that event: it was not read */
    else if (rc) i++;    /* the event that stopped the replay was read */
    e->res->events += i;
    if (src->view) src->advance(src->ctx, i);
    if (rc) break;
  }
  return rc;
}

/* After the last event: the last timeline point, the composition at the peak, the observers. */
static void replay_finish(engine *e) {
  const replay_config *cfg = e->cfg;
  if (e->cur_n) timeline_push(e);
  peak_capture(e);
  for (size_t i = 0; i < cfg->nobservers; i++)
    if (cfg->observers[i].finish) cfg->observers[i].finish(cfg->observers[i].ctx);
  sites_finish(e);
}

/* The figures computed from the peaks and the final totals. */
static void summarize(engine *e) {
  replay_result *res = e->res;
  res->fragmentation = res->at_peak_reserved > 0 ? 1.0 - (double)res->peak_allocated / (double)res->at_peak_reserved : 0;
  if (res->fragmentation < 0) res->fragmentation = 0;
  res->fragmentation_gmlake = res->peak_reserved > 0 ? 1.0 - (double)res->peak_active / (double)res->peak_reserved : 0;
  if (res->fragmentation_gmlake < 0) res->fragmentation_gmlake = 0;
  res->final_allocated = e->out.allocated;
  res->final_reserved = e->out.reserved;
}

/* Each device used: its call counts into the result, then its model and device released. */
static void release_devices(engine *e) {
  const replay_config *cfg = e->cfg;
  replay_result *res = e->res;
  if (e->nused == 1) device_peaks_from_totals(e, &e->devs[e->used[0]]);
  for (int k = 0; k < e->nused; k++) {
    int d = e->used[k];
    devstate *ds = &e->devs[d];
    ds->res->device_mallocs = ds->dev.mallocs;
    ds->res->device_frees = ds->dev.frees;
    res->device_mallocs += ds->dev.mallocs;
    res->device_frees += ds->dev.frees;
    res->device_maps += ds->dev.maps;
    res->device_unmaps += ds->dev.unmaps;
    if (model_keepable(cfg, ds)) {
      ds->kept = 1;
      ds->key = key_of(cfg);
      continue;
    }
    engine_start_forget(ds);
    sim_allocator_release(&ds->a);
    if (cfg->make_device) {
      if (cfg->release_device) cfg->release_device(cfg->device_arg, d, &ds->dev);
    } else {
      sim_release(NULL, d, &ds->dev);
    }
  }
}

void replay_engine_free(replay_engine *e) {
  if (!e) return;
  for (int d = 0; d < REPLAY_MAX_DEVICES; d++)
    if (e->devs[d].kept) model_drop(&e->devs[d]);
  live_release(&e->live);
  dense_release(&e->dense);
  sim_map_release(&e->restored_at);
  free(e->restored);
  free(e->seg_items);
  free(e->seg_handles);
  sim_map_release(&e->host);
  sim_map_release(&e->site_idx);
  free(e->sites);
  free(e->site_small);
  free(e->dirty);
  free(e);
}

/* The largest free block at the peak, lost on the way (peak_settle): a second pass over the
 * source, without the observers, taking it at every new peak as it comes. 0, or -1 with a message. */
static int second_pass(const replay_config *cfg, replay_source *src, replay_result *res, char *err, size_t errlen) {
  if (src->rewind(src->ctx)) {
    const char *m = src->error ? src->error(src->ctx) : NULL;
    snprintf(err, errlen, "%s", m && *m ? m : "cannot read the events again");
    return -1;
  }
  replay_source again_src = *src;
  again_src.rewind = NULL; /* no waiting this time */
  replay_config c = *cfg;
  c.observers = NULL;
  c.nobservers = 0;
  replay_result again;
  int rc = replay_run(&c, &again_src, &again, err, errlen);
  if (!rc && (again.peak_allocated_seq != res->peak_allocated_seq || again.peak_allocated != res->peak_allocated)) {
    snprintf(err, errlen, "the second pass over the events found another peak (event %lld, not %lld)",
             (long long)again.peak_allocated_seq, (long long)res->peak_allocated_seq);
    rc = -1;
  }
  if (!rc) res->at_peak_largest_free = again.at_peak_largest_free;
  replay_result_release(&again);
  return rc;
}

/* A device that starts from a state is in use from before the first event: an action on it (a
 * synchronization, a cache release) may come before any allocation does, and its start counts in
 * the figures even when none comes. */
static int devices_started(engine *e) {
  for (size_t s = 0; s < e->cfg->nstart; s++)
    if (e->cfg->start[s].n && !device_get(e, e->cfg->start[s].device)) return -1;
  e->start_due = e->nused > 0;
  return 0;
}

int replay_engine_run(replay_engine *e, const replay_config *cfg, replay_source *src, replay_result *res, char *err,
                      size_t errlen) {
  int64_t t0 = now_ns();
  engine_begin(e, cfg, src, res, err, errlen);
  int rc = devices_started(e) ? -1 : replay_events(e, src);
  if (rc == 1) res->stopped_at_oom = 1; /* stopped at an OOM */
  if (rc > 0) rc = 0;                     /* or at the moment asked for (res->stopped) */
  replay_finish(e);
  summarize(e);
  release_devices(e);
  if (!rc && e->lf_lost) rc = second_pass(cfg, src, res, err, errlen);
  res->elapsed_s = (double)(now_ns() - t0) / 1e9;
  return rc;
}

int replay_run(const replay_config *cfg, replay_source *src, replay_result *res, char *err, size_t errlen) {
  engine *e = replay_engine_new();
  int rc = replay_engine_run(e, cfg, src, res, err, errlen);
  replay_engine_free(e);
  return rc;
}

void replay_start_release(replay_start *s) {
  free(s->items);
  free(s->trace_addr);
  memset(s, 0, sizeof *s);
}

void replay_result_release(replay_result *r) {
  free(r->sites);
  free(r->oom_list);
  free(r->timeline);
  memset(r, 0, sizeof *r);
}

/* ---- the in-memory source ----------------------------------------------------------------- */

static int array_next(void *ctx, sim_event *ev) {
  replay_array_source *a = ctx;
  if (a->pos >= a->n) return 0;
  *ev = a->events[a->pos++];
  return 1;
}

static ptrdiff_t array_view(void *ctx, const sim_event **evs) {
  replay_array_source *a = ctx;
  *evs = a->events + a->pos;
  return (ptrdiff_t)(a->n - a->pos);
}

static void array_advance(void *ctx, size_t k) { ((replay_array_source *)ctx)->pos += k; }

static int array_rewind(void *ctx) {
  ((replay_array_source *)ctx)->pos = 0;
  return 0;
}

static const uint32_t *array_slots(void *ctx) {
  replay_array_source *a = ctx;
  return a->plan->slot + a->pos;
}

static const uint8_t *array_steps(void *ctx) {
  replay_array_source *a = ctx;
  return a->plan->step ? a->plan->step + a->pos : NULL;
}

static const replay_alloc_arg *array_args(void *ctx, int64_t *stream, int *device) {
  replay_array_source *a = ctx;
  *stream = a->plan->arg_stream;
  *device = a->plan->arg_device;
  return a->plan->arg ? a->plan->arg + a->pos : NULL;
}

replay_source replay_array_source_planned(replay_array_source *a, const sim_event *events, size_t n,
                                          const replay_plan *plan) {
  a->events = events;
  a->n = n;
  a->pos = 0;
  a->plan = plan && plan->events == events && plan->n == n ? plan : NULL;
  return (replay_source){.next = array_next, .ctx = a, .view = array_view, .advance = array_advance,
                         .rewind = array_rewind, .length_hint = n, .view_slots = a->plan ? array_slots : NULL,
                         .plan_records = a->plan ? a->plan->nslots : 0, .view_steps = a->plan ? array_steps : NULL,
                         .view_args = a->plan ? array_args : NULL};
}

replay_source replay_array_source_init(replay_array_source *a, const sim_event *events, size_t n) {
  return replay_array_source_planned(a, events, n, NULL);
}

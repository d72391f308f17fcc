/* engine_start.c: a device started from a recorded state (a window's start), and that state kept with its model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/device_sim.h"
#include "engine_int.h"

/*
 * A trace that begins mid-run starts each device from a state the configuration gives
 * (replay_config.start): segments and the blocks in them, restored into the device's model through
 * its `restore` op before the first event. The blocks wait (engine.c: take_restored) for the
 * trace's preexisting allocations at their addresses.
 */

/* The restored blocks' addresses made this run's, for blocks other than a kept state's alone. */
static void restored_own(engine *e) {
  if (!e->restored_own) sim_map_clear(&e->restored_at);
  e->restored_own = 1;
  e->restored_for = NULL;
}

/* The memory of a restored segment is held already: counted by the device, its addresses never
 * handed out again. */
static void segment_held(devstate *ds, const sim_walk_item *seg) {
  uint64_t lo = seg->expandable && seg->requested ? seg->requested : seg->addr;
  sim_simdev_hold(&ds->dev, lo, seg->addr + seg->size - lo, seg->size);
}

/* Restores one segment and its blocks (items[0..n-1]) into the device's model. */
static int start_segment(engine *e, devstate *ds, int device, const replay_start *st, size_t at, size_t n) {
  if (n > e->seg_cap) {
    size_t cap = e->seg_cap;
    sim_grow((void **)&e->seg_items, &e->seg_cap, n, sizeof *e->seg_items);
    sim_grow((void **)&e->seg_handles, &cap, n, sizeof *e->seg_handles);
  }
  sim_walk_item *it = e->seg_items;
  uintptr_t *h = e->seg_handles;
  memcpy(it, st->items + at, n * sizeof *it);
  char msg[SIM_ERRLEN];
  int rc = ds->a.ops->restore(ds->a.ctx, it, n, h, msg, sizeof msg);
  if (rc != SIM_OK) {
    snprintf(e->err, e->errlen, "cannot start device %d from the recorded state: the segment at %#llx: %s", device,
             (unsigned long long)it[0].addr, msg);
  } else {
    segment_held(ds, &it[0]);
    restored_own(e);
    sim_grow((void **)&e->restored, &e->cap_restored, e->nrestored + n, sizeof *e->restored);
    for (size_t k = 1; k < n; k++) {
      e->restored[e->nrestored++] = (restored_block){h[k], it[k].addr, it[k].size, device, it[k].state, 0};
      *sim_map_put(&e->restored_at, st->trace_addr[at + k], NULL) = e->nrestored;
    }
  }
  return rc == SIM_OK ? 0 : -1;
}

/* The device's starting state, when the configuration gives one. */
static int device_start(engine *e, devstate *ds, int device) {
  const replay_config *cfg = e->cfg;
  for (size_t s = 0; s < cfg->nstart; s++) {
    const replay_start *st = &cfg->start[s];
    if (st->device != device || !st->n) continue;
    if (!ds->a.ops->restore || cfg->make_device) {
      snprintf(e->err, e->errlen, "device %d cannot start from a recorded state: %s", device,
               cfg->make_device ? "only a simulated device can" : "the allocator model cannot restore one");
      return -1;
    }
    for (size_t i = 0; i < st->n;) {
      size_t j = i + 1;
      while (j < st->n && !st->items[j].is_segment) j++;
      if (!st->items[i].is_segment || start_segment(e, ds, device, st, i, j - i)) {
        if (!st->items[i].is_segment) snprintf(e->err, e->errlen, "device %d: a start state must begin with a segment", device);
        return -1;
      }
      i = j;
    }
  }
  return 0;
}

/* ---- a start state kept with its model -------------------------------------------------------
 * A loop of replays of a recorded window restores the same segments before every replay (for
 * kk_ctx128_fullstep, a twentieth of its time: docs/performance.md, round thirty). A model that
 * can (allocator.h, `save`) keeps the state its restores left, and the next run that starts its
 * device from the same states (a comparison's next cell too, whatever its capacity) puts it back
 * and holds the segments' memory again (engine_start_load) instead of restoring them. */

void engine_start_forget(devstate *ds) {
  start_kept *k = &ds->start;
  free(k->lens);
  free(k->items);
  free(k->trace_addr);
  free(k->blocks);
  memset(k, 0, sizeof *k);
}

/* Whether the run starts ds (device `device`) from the states the kept one was restored from. */
static int start_same(const replay_config *cfg, const devstate *ds, int device) {
  const start_kept *k = &ds->start;
  size_t nl = 0, at = 0;
  for (size_t s = 0; s < cfg->nstart; s++) {
    const replay_start *st = &cfg->start[s];
    if (st->device != device || !st->n) continue;
    if (nl == k->nlens || k->lens[nl++] != st->n) return 0;
    /* the same bytes (a state whose padding differs is restored again: slower, not wrong) */
    if (memcmp(st->items, k->items + at, st->n * sizeof *st->items) ||
        memcmp(st->trace_addr, k->trace_addr + at, st->n * sizeof *st->trace_addr))
      return 0;
    at += st->n;
  }
  return nl == k->nlens;
}

/* The kept state put back, when the run starts ds as it was started: 1, else 0 (nothing done). */
int engine_start_load(engine *e, devstate *ds, int device) {
  start_kept *k = &ds->start;
  if (!k->ok || !start_same(e->cfg, ds, device)) return 0;
  ds->a.ops->load(ds->a.ctx);
  for (size_t i = 0; i < k->n; i++)
    if (k->items[i].is_segment) segment_held(ds, &k->items[i]);
  sim_grow((void **)&e->restored, &e->cap_restored, e->nrestored + k->nblocks, sizeof *e->restored);
  int same = !e->restored_own && !e->nrestored && e->restored_for == k;
  if (!same) restored_own(e);
  memcpy(e->restored + e->nrestored, k->blocks, k->nblocks * sizeof *k->blocks); /* none taken */
  for (size_t i = 0, b = e->nrestored; !same && i < k->n; i++)
    if (!k->items[i].is_segment) *sim_map_put(&e->restored_at, k->trace_addr[i], NULL) = ++b;
  if (!e->nrestored) e->restored_for = k; /* its blocks alone, so far */
  e->nrestored += k->nblocks;
  e->restored_own = 1;
  return 1;
}

/* The device's start states restored, and kept with its model when it can keep them. 0, or -1. */
int engine_start_keep(engine *e, devstate *ds, int device) {
  const replay_config *cfg = e->cfg;
  size_t first = e->nrestored;
  engine_start_forget(ds);
  if (device_start(e, ds, device)) return -1;
  if (cfg->make_device || !sim_allocator_can_keep_start(ds->a.ops)) return 0;
  start_kept *k = &ds->start;
  for (size_t s = 0; s < cfg->nstart; s++) {
    const replay_start *st = &cfg->start[s];
    if (st->device != device || !st->n) continue;
    k->lens = sim_xrealloc(k->lens, (k->nlens + 1) * sizeof *k->lens);
    k->lens[k->nlens++] = st->n;
    k->items = sim_xrealloc(k->items, (k->n + st->n) * sizeof *k->items);
    k->trace_addr = sim_xrealloc(k->trace_addr, (k->n + st->n) * sizeof *k->trace_addr);
    memcpy(k->items + k->n, st->items, st->n * sizeof *st->items);
    memcpy(k->trace_addr + k->n, st->trace_addr, st->n * sizeof *st->trace_addr);
    k->n += st->n;
  }
  if (!k->nlens || ds->a.ops->save(ds->a.ctx)) { /* no state starts this device, or the model keeps none */
    engine_start_forget(ds);
    return 0;
  }
  k->nblocks = e->nrestored - first;
  k->blocks = sim_xmalloc((k->nblocks ? k->nblocks : 1) * sizeof *k->blocks);
  memcpy(k->blocks, e->restored + first, k->nblocks * sizeof *k->blocks);
  k->ok = 1;
  return 0;
}


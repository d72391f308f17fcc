/* merge.c: Nsight Systems: a process's calls and the rows they caused, merged into events in time order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsys_int.h"

/* A device activity may appear to start slightly before its launch call (GPU timestamps are
 * converted to the CPU clock): a row without its call is given up for lost only this long
 * after the calls have passed its start. */
#define ORPHAN_SLACK_NS 1000000
/* The optimistic pass gives up when this many rows wait for a call: the calls' correlationIds
 * are far from their start order (nsys takes both as a call enters, so only a thread stopped in
 * between separates them), and the careful pass sorts the calls first. */
#define FAST_PENDING_MAX 65536
/* Calls remembered to drop duplicates (rows repeated with the same correlationId). */
#define DEDUP_WINDOW 65536

static int out_less(const nout *a, const nout *b) {
  if (a->ts != b->ts) return a->ts < b->ts;
  if (a->corr != b->corr) return a->corr < b->corr;
  if (a->own != b->own) return a->own < b->own;
  if (a->table != b->table) return a->table < b->table;
  return a->rowid < b->rowid;
}

static void out_push(merge *m, const nout *o) {
  sim_grow((void **)&m->oh, &m->ohcap, m->noh + 1, sizeof *m->oh);
  size_t i = m->noh++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!out_less(o, &m->oh[up])) break;
    m->oh[i] = m->oh[up];
    i = up;
  }
  m->oh[i] = *o;
}

static void out_pop(merge *m, nout *o) {
  *o = m->oh[0];
  nout last = m->oh[--m->noh];
  size_t i = 0, n = m->noh;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, s = i;
    const nout *best = &last;
    if (l < n && out_less(&m->oh[l], best)) s = l, best = &m->oh[l];
    if (r < n && out_less(&m->oh[r], best)) s = r;
    if (s == i) break;
    m->oh[i] = m->oh[s];
    i = s;
  }
  if (n) m->oh[i] = last;
}

/* Writes out every waiting event earlier than w. */
static int out_flush(merge *m, int64_t w) {
  while (m->noh && m->oh[0].ts < w) {
    nout o;
    out_pop(m, &o);
    if (o.ev.ts < m->last_ts) o.ev.ts = m->last_ts; /* never happens for rows with their call; kept monotonic */
    m->last_ts = o.ev.ts;
    if (store_writer_event(m->w, &o.ev)) {
      import_error(m->x->ic, "cannot import '%s': %s", m->x->path, store_error(m->x->ic->s));
      return -1;
    }
  }
  return 0;
}

static void ph_push(merge *m, npend e) {
  sim_grow((void **)&m->ph, &m->phcap, m->nph + 1, sizeof *m->ph);
  size_t i = m->nph++;
  while (i > 0 && e.own < m->ph[(i - 1) / 2].own) {
    m->ph[i] = m->ph[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  m->ph[i] = e;
}

static void ph_pop(merge *m) {
  npend last = m->ph[--m->nph];
  size_t i = 0, n = m->nph;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, s = i;
    int64_t best = last.own;
    if (l < n && m->ph[l].own < best) s = l, best = m->ph[l].own;
    if (r < n && m->ph[r].own < best) s = r;
    if (s == i) break;
    m->ph[i] = m->ph[s];
    i = s;
  }
  if (n) m->ph[i] = last;
}

static int ph_stale(const merge *m, const npend *e) {
  const nitem *it = &m->pool[e->idx];
  return it->gen != e->gen || it->matched;
}

/* Earliest own start of a row still waiting for its call (INT64_MAX: none). */
static int64_t pending_min(merge *m) {
  while (m->nph && ph_stale(m, &m->ph[0])) ph_pop(m);
  return m->nph ? m->ph[0].own : INT64_MAX;
}

static void pend_add(merge *m, const nitem *src) {
  uint32_t i;
  if (m->npoolfree) i = m->poolfree[--m->npoolfree];
  else {
    sim_grow((void **)&m->pool, &m->poolcap, m->npool + 1, sizeof *m->pool);
    i = (uint32_t)m->npool++;
    m->pool[i].gen = 0;
  }
  uint32_t gen = m->pool[i].gen + 1;
  m->pool[i] = *src;
  m->pool[i].gen = gen;
  m->pool[i].matched = 0;
  m->pool[i].next = 0;
  /* append to the correlation's list, keeping cursor order */
  int existed;
  uint64_t *head = sim_map_put(&m->pending, (uint64_t)src->corr, &existed);
  if (!existed) *head = i + 1;
  else {
    uint32_t j = (uint32_t)*head - 1;
    while (m->pool[j].next) j = m->pool[j].next - 1;
    m->pool[j].next = i + 1;
  }
  m->unmatched++;
  ph_push(m, (npend){src->start, i, gen});
}

static void pend_free(merge *m, uint32_t i) {
  m->pool[i].matched = 1;
  m->pool[i].gen++;
  sim_grow((void **)&m->poolfree, &m->poolfreecap, m->npoolfree + 1, sizeof *m->poolfree);
  m->poolfree[m->npoolfree++] = i;
  m->unmatched--;
}

/* ---- rows without their call ------------------------------------------------------------------------ */

/* A row without its call: timed by itself (ts), found at correlation corr. */
static int lone_row(merge *m, const nitem *it, int64_t ts) {
  m->nbatch = 0;
  if (it->table == TB_SYNC) return 0; /* says only which stream a call waited for */
  int rc = it->table == TB_MEMORY ? nsys_memory_event(m, it, ts, 0, it->corr > 0 ? it->corr : 0)
                                  : nsys_activity_event(m, it, ts, it->corr > 0 ? it->corr : 0, 0);
  for (size_t i = 0; i < m->nbatch && !rc; i++) out_push(m, &m->batch[i]);
  m->nbatch = 0;
  return rc;
}

/* A row without a correlation, timed by itself. */
static int uncorrelated(merge *m, const nitem *it) {
  size_t before = m->noh;
  if (lone_row(m, it, it->start < m->last_ts ? m->last_ts : it->start)) return -1;
  if (m->noh > before && !m->all_mode) m->counts[N_UNCORRELATED]++;
  return 0;
}

/* Pulls every correlated row up to correlationId upto: those of upto itself (the common case:
 * ids grow with time) straight into m->direct, earlier ones into the pending map. */
static int pull(merge *m, int64_t upto) {
  m->ndirect = 0;
  for (int t = 0; t < TB_ITEMS; t++) {
    ncursor *c = &m->items[t];
    while (c->has && c->cur.corr <= upto) {
      if (c->cur.corr == 0) {
        /* an uncorrelated row met on the way (CUR_MIXED): it waits for its time, in order */
        zq *z = &m->zq[t];
        if (z->head && z->head * 2 >= z->n) { /* keep the waiting rows at the front */
          memmove(z->rows, z->rows + z->head, (z->n - z->head) * sizeof *z->rows);
          z->n -= z->head;
          z->head = 0;
        }
        sim_grow((void **)&z->rows, &z->cap, z->n + 1, sizeof *z->rows);
        z->rows[z->n++] = c->cur;
      } else if (c->cur.corr == upto) {
        sim_grow((void **)&m->direct, &m->directcap, m->ndirect + 1, sizeof *m->direct);
        m->direct[m->ndirect++] = c->cur;
      } else {
        pend_add(m, &c->cur);
        if (m->x->fast && m->unmatched > FAST_PENDING_MAX) {
          m->x->restart = 1;
          snprintf(m->x->why, sizeof m->x->why, "%s is far from correlationId order", nsys_tb_names[TB_RUNTIME]);
          return -1;
        }
      }
      if (nsys_cursor_next(m->x, c) < 0) return -1;
    }
  }
  return 0;
}

/* A call recorded twice: the same correlationId and the same function. (Two different calls
 * can share an id: a cuCtxSynchronize and the cudaDeviceReset after it, in a real export.) */
static int is_dup(merge *m, int64_t corr, int64_t name) {
  if (!m->ring) {
    m->ring = sim_xmalloc(2 * DEDUP_WINDOW * sizeof *m->ring);
    for (size_t i = 0; i < 2 * DEDUP_WINDOW; i++) m->ring[i] = INT64_MIN;
  }
  if (!m->dedup && corr <= m->max_corr) {
    /* ids usually only grow: from the first that does not, remember the recent ones in a map */
    m->dedup = 1;
    for (size_t i = 0; i < DEDUP_WINDOW; i++)
      if (m->ring[2 * i] != INT64_MIN) *sim_map_put(&m->seen, (uint64_t)m->ring[2 * i], NULL) = (uint64_t)m->ring[2 * i + 1];
  }
  if (corr > m->max_corr) m->max_corr = corr;
  int64_t *slot = &m->ring[2 * m->ringpos];
  if (m->dedup) {
    uint64_t *v = sim_map_get(&m->seen, (uint64_t)corr);
    if (v && *v == (uint64_t)name) return 1;
    if (v) {
      *v = (uint64_t)name;
      return 0;
    }
    if (slot[0] != INT64_MIN) sim_map_del(&m->seen, (uint64_t)slot[0], NULL);
    *sim_map_put(&m->seen, (uint64_t)corr, NULL) = (uint64_t)name;
  }
  slot[0] = corr;
  slot[1] = name;
  m->ringpos = (m->ringpos + 1) % DEDUP_WINDOW;
  return 0;
}

static int cmp_out(const void *a, const void *b) {
  const nout *x = a, *y = b;
  return out_less(x, y) ? -1 : out_less(y, x) ? 1 : 0;
}

/* A call that caused no rows: an event of its own, a synchronization (with the stream it waited
 * for, when its synchronization row says) or another API call. */
static void call_event(merge *m, const nitem *call, int64_t dur, int64_t name, int cls, const nitem *sync) {
  int64_t start = call->start;
  nout o = {.ts = start, .corr = call->corr, .own = start, .rowid = call->rowid, .table = TB_RUNTIME};
  sim_event_init(&o.ev);
  o.ev.ts = start;
  o.ev.dur = dur;
  o.ev.name = name;
  o.ev.device = -1;
  if (cls == CALL_OTHER) o.ev.kind = SIM_EV_API;
  else {
    o.ev.kind = SIM_EV_SYNC;
    o.ev.stream = -1;
    if (sync) {
      o.ev.device = nsys_dev16(sync->device);
      if (cls == CALL_SYNC_EVENT) o.ev.flags |= SIM_EVF_SYNC_EVENT;
      if (cls != CALL_SYNC_DEVICE && sync->stream >= 0 && sync->stream != CUPTI_INVALID)
        o.ev.stream = nsys_map_stream(m, sync->stream, sync->context);
      else if (cls == CALL_SYNC_STREAM) m->counts[N_SYNC_NO_STREAM]++;
    } else if (cls != CALL_SYNC_DEVICE) {
      if (cls == CALL_SYNC_EVENT) o.ev.flags |= SIM_EVF_SYNC_EVENT;
      if (cls == CALL_SYNC_STREAM) m->counts[N_SYNC_NO_STREAM]++;
    }
  }
  out_push(m, &o);
}

/* One call: the rows it caused become its events; with none, the call is an event itself. */
static int do_call(merge *m, const nitem *call) {
  nsys *x = m->x;
  int64_t start = call->start, corr = call->corr, dur = call->end - call->start;
  if (dur < 0) {
    m->counts[N_NEG_DUR]++;
    dur = 0;
  }
  int64_t info = nsys_call_info(x, call->v[0]);
  if (info < 0) return -1;
  int64_t name = info >> 8;
  if (corr > 0 && is_dup(m, corr, name)) {
    m->counts[N_DUP_CALL]++;
    for (size_t i = 0; i < m->ndirect; i++) pend_add(m, &m->direct[i]); /* never their call: they wait as orphans */
    m->ndirect = 0;
    return 0;
  }
  int cls = (int)(info & 15), async = (int)(info >> 4 & 1);
  const nitem *sync = NULL;
  m->nbatch = 0;
  uint64_t *head = corr > 0 && m->unmatched ? sim_map_get(&m->pending, (uint64_t)corr) : NULL;
  uint32_t first = head ? (uint32_t)*head : 0;
  if (head) sim_map_del(&m->pending, (uint64_t)corr, NULL);
  int rc = 0;
  for (uint32_t i = first;; i = m->pool[i - 1].next) {
    /* the rows that waited, then those pulled for this call */
    nitem *it = i ? &m->pool[i - 1] : NULL;
    for (size_t d = 0; !it && d < m->ndirect && !rc; d++) {
      nitem *dt = &m->direct[d];
      if (dt->table == TB_SYNC) sync = dt;
      else if (dt->table == TB_MEMORY) rc = nsys_memory_event(m, dt, dt->start < start ? start : dt->start, name, corr);
      else rc = nsys_activity_event(m, dt, start, corr, async);
    }
    if (!it) break;
    if (rc) continue;
    if (it->table == TB_SYNC) sync = it;
    else if (it->table == TB_MEMORY) rc = nsys_memory_event(m, it, it->start < start ? start : it->start, name, corr);
    else rc = nsys_activity_event(m, it, start, corr, async);
  }
  if (!rc && m->nbatch) {
    /* the call's cost goes with the first thing it did */
    if (m->nbatch > 1) qsort(m->batch, m->nbatch, sizeof *m->batch, cmp_out);
    size_t first_real = 0;
    while (first_real + 1 < m->nbatch && m->batch[first_real].synthetic) first_real++;
    m->batch[first_real].ev.api_dur = dur;
    for (size_t i = 0; i < m->nbatch; i++) out_push(m, &m->batch[i]);
  } else if (!rc) {
    call_event(m, call, dur, name, cls, sync);
  }
  for (uint32_t i = first; i;) {
    uint32_t nx = m->pool[i - 1].next;
    pend_free(m, i - 1);
    i = nx;
  }
  m->nbatch = 0;
  return rc;
}

/* Rows whose call did not come (lost, or not traced) once the calls have passed their start. */
static int evict_orphans(merge *m, int64_t before) {
  for (;;) {
    int64_t own = pending_min(m);
    if (own == INT64_MAX || (before != INT64_MAX && own + ORPHAN_SLACK_NS >= before)) return 0;
    npend e = m->ph[0];
    ph_pop(m);
    nitem *it = &m->pool[e.idx];
    /* unlink it from its correlation's list */
    uint64_t *head = sim_map_get(&m->pending, (uint64_t)it->corr);
    if (head) {
      uint32_t j = (uint32_t)*head, prev = 0;
      while (j && j - 1 != e.idx) prev = j, j = m->pool[j - 1].next;
      if (j) {
        if (prev) m->pool[prev - 1].next = it->next;
        else if (it->next) *head = it->next;
        else sim_map_del(&m->pending, (uint64_t)it->corr, NULL);
      }
    }
    nitem copy = *it;
    pend_free(m, e.idx);
    if (copy.table != TB_SYNC) m->counts[N_ORPHAN]++;
    if (lone_row(m, &copy, copy.start < m->last_ts ? m->last_ts : copy.start)) return -1;
  }
}

/* Moves uncorrelated rows earlier than w into the output, then writes what is earlier than w. */
static int advance(merge *m, int64_t w) {
  for (int t = 0; t < TB_ITEMS; t++) {
    zq *z = &m->zq[t];
    while (z->head < z->n && z->rows[z->head].start < w)
      if (uncorrelated(m, &z->rows[z->head++])) return -1;
    ncursor *c = &m->zeros[t];
    while (c->has && c->cur.start < w) {
      if (uncorrelated(m, &c->cur)) return -1;
      if (nsys_cursor_next(m->x, c) < 0) return -1;
    }
  }
  return out_flush(m, w);
}

int nsys_merge_run(merge *m) {
  nsys *x = m->x;
  nproc *p = m->p;
  nsys_live_clear(p);
  /* the calls, in start order; without any, every row is timed by itself */
  int have_calls = 0;
  if (x->tb[TB_RUNTIME].usable && (x->fast || p->t[TB_RUNTIME].rows)) {
    if (nsys_rt_open(m)) return -1;
    have_calls = nsys_rt_next(m);
    if (have_calls < 0) return -1;
  }
  m->all_mode = !have_calls;
  if (nsys_open_items(m)) return -1;
  if (nsys_emit_preexisting(m)) return -1;
  /* calls drive the merge */
  while (m->rt.has) {
    nitem call = m->rt.cur;
    if (call.corr > 0 && pull(m, call.corr)) return -1;
    if (do_call(m, &call)) return -1;
    if (nsys_rt_next(m) < 0) return -1;
    /* what can be written: nothing later comes before the next call's start, nor before a row
     * still waiting for its call */
    int64_t next = m->rt.has ? m->rt.cur.start : INT64_MAX;
    if (next == INT64_MAX) break;
    if (evict_orphans(m, next)) return -1;
    int64_t w = pending_min(m);
    if (next < w) w = next;
    for (int t = 0; t < TB_ITEMS; t++) /* rows not read yet of a table read in start order come no earlier */
      if (m->items[t].has && m->items[t].mode == CUR_MIXED && t != TB_SYNC && m->items[t].cur.start < w)
        w = m->items[t].cur.start;
    if (advance(m, w)) return -1;
  }
  x->other_class_rows += m->other_class;
  if (!m->all_mode) {
    /* the calls are over: whatever waits, and whatever is left, has no call */
    if (evict_orphans(m, INT64_MAX)) return -1;
    int64_t base = m->last_ts;
    for (int t = 0; t < TB_ITEMS; t++) {
      ncursor *c = &m->items[t];
      while (c->has) {
        nitem it = c->cur;
        if (nsys_cursor_next(x, c) < 0) return -1;
        int64_t ts = it.start < base ? base : it.start;
        if (advance(m, ts)) return -1;
        if (it.corr == 0) { /* after what waits in the queue, which is earlier */
          if (advance(m, it.start) || uncorrelated(m, &it)) return -1;
          continue;
        }
        if (it.table != TB_SYNC) m->counts[N_ORPHAN]++;
        if (lone_row(m, &it, ts < m->last_ts ? m->last_ts : ts)) return -1;
        base = ts;
      }
    }
  }
  if (advance(m, INT64_MAX)) return -1;
  /* the last events (time INT64_MAX cannot occur) */
  return out_flush(m, INT64_MAX);
}

void nsys_merge_release(merge *m) {
  nsys_cursor_close(&m->rt);
  for (int t = 0; t < TB_ITEMS; t++) {
    nsys_cursor_close(&m->items[t]);
    nsys_cursor_close(&m->zeros[t]);
  }
  free(m->pool);
  free(m->poolfree);
  sim_map_release(&m->pending);
  free(m->ph);
  free(m->oh);
  free(m->batch);
  free(m->direct);
  for (int t = 0; t < TB_ITEMS; t++) free(m->zq[t].rows);
  free(m->ring);
  sim_map_release(&m->seen);
}

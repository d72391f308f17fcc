/* events.c: Nsight Systems: rows into events: allocations and frees, kernels, copies, memsets, preexisting blocks. */
#include <stdint.h>
#include <stdio.h>

#include "nsys_int.h"

/* ---- what rows say --------------------------------------------------------------------------------- */

/* Memory kinds: what memplay makes of them. */
enum { MC_DEVICE, MC_MANAGED, MC_PINNED, MC_PAGEABLE, MC_STATIC, MC_BAD };
static int mem_class(int mk) {
  switch (mk) {
  case MK_DEVICE:
  case MK_ARRAY:
  case MK_UNKNOWN: return MC_DEVICE;
  case MK_MANAGED: return MC_MANAGED;
  case MK_PINNED: return MC_PINNED;
  case MK_PAGEABLE: return MC_PAGEABLE;
  case MK_DEVICE_STATIC:
  case MK_MANAGED_STATIC: return MC_STATIC;
  default: return MC_BAD;
  }
}

int64_t nsys_map_stream(const merge *m, int64_t stream, int64_t context) {
  if (stream < 0 || stream == CUPTI_INVALID) return 0;
  int64_t pid = (m->x->fast ? m->x->fast_key : m->p->key) & 0xFFFFFF;
  for (size_t i = 0; i < m->x->nctxs; i++)
    if (m->x->ctxs[i].context == context && m->x->ctxs[i].pid == pid && m->x->ctxs[i].null_stream == stream) return 0;
  return stream;
}

int16_t nsys_dev16(int64_t d) { return (int16_t)(d < 0 || d > 32767 ? -1 : d); }

static void note_device(merge *m, int64_t d) {
  if (d >= 0 && d < 64) m->devmask_used |= UINT64_C(1) << d;
}

static void batch_add(merge *m, const nout *o) {
  sim_grow((void **)&m->batch, &m->batchcap, m->nbatch + 1, sizeof *m->batch);
  m->batch[m->nbatch++] = *o;
}

/* ---- memory events ------------------------------------------------------------------------------- */

/* An allocation at address o->ev.addr (l: what is live there already): its event in *o, and 1,
 * or 0 when it makes none. */
static int memory_alloc(merge *m, const nitem *it, nout *o, const nlive *l, int mk, uint64_t bytes) {
  uint64_t addr = o->ev.addr;
  int mc = mem_class(mk);
  if (l) {
    /* the driver handed out a live address again: its free was not recorded */
    m->counts[N_REALLOC]++;
    if (mem_class(l->mk) != MC_STATIC) {
      nout f = *o;
      int host = mem_class(l->mk) == MC_PINNED || mem_class(l->mk) == MC_PAGEABLE;
      f.ev.kind = host ? SIM_EV_HOST_FREE : SIM_EV_FREE;
      f.ev.size = l->bytes;
      f.ev.device = host ? -1 : l->device;
      f.ev.mem = host ? (mem_class(l->mk) == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE)
                      : (mem_class(l->mk) == MC_MANAGED ? SIM_MEM_MANAGED : SIM_MEM_DEVICE);
      f.ev.name = 0;
      f.synthetic = 1;
      f.rowid--; /* just before the allocation */
      batch_add(m, &f);
    }
    nsys_live_del(m->p, addr);
  }
  nsys_live_add(m->p, addr, bytes, (int)it->device, mk);
  if (mc == MC_STATIC) {
    m->static_count++;
    m->static_bytes += (int64_t)bytes;
    return 0;
  }
  o->ev.size = bytes;
  if (mc == MC_PINNED || mc == MC_PAGEABLE) {
    o->ev.kind = SIM_EV_HOST_ALLOC;
    o->ev.device = -1;
    o->ev.mem = mc == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
  } else {
    o->ev.kind = SIM_EV_ALLOC;
    o->ev.device = nsys_dev16(it->device);
    o->ev.stream = nsys_map_stream(m, it->stream, it->context);
    o->ev.mem = mc == MC_MANAGED ? SIM_MEM_MANAGED : mk == MK_UNKNOWN ? SIM_MEM_UNKNOWN : SIM_MEM_DEVICE;
    note_device(m, it->device);
    if (it->v[4] > 0) m->pool_allocs++;
    else m->plain_allocs++;
  }
  return 1;
}

/* A free at address o->ev.addr of the allocation l: its event in *o, and 1, or 0 when it makes
 * none; -1 when the optimistic pass must give way. */
static int memory_free(merge *m, const nitem *it, nout *o, const nlive *l, uint64_t bytes) {
  nsys *x = m->x;
  if (!l) {
    if (x->fast) { /* perhaps allocated before the capture: the careful pass finds out */
      x->restart = 1;
      snprintf(x->why, sizeof x->why, "a free of an address with nothing live (allocated before the capture?)");
      return -1;
    }
    m->counts[N_UNMATCHED_FREE]++;
    return 0;
  }
  int lc = mem_class(l->mk);
  if (l->bytes != bytes && lc != MC_STATIC) m->counts[N_SIZE_MISMATCH]++;
  o->ev.size = l->bytes;
  int16_t ldev = l->device;
  int l_unknown = l->mk == MK_UNKNOWN;
  nsys_live_del(m->p, o->ev.addr);
  if (lc == MC_STATIC) return 0;
  if (lc == MC_PINNED || lc == MC_PAGEABLE) {
    o->ev.kind = SIM_EV_HOST_FREE;
    o->ev.device = -1;
    o->ev.mem = lc == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
  } else {
    o->ev.kind = SIM_EV_FREE;
    o->ev.device = ldev;
    o->ev.stream = nsys_map_stream(m, it->stream, it->context);
    o->ev.mem = lc == MC_MANAGED ? SIM_MEM_MANAGED : l_unknown ? SIM_MEM_UNKNOWN : SIM_MEM_DEVICE;
  }
  return 1;
}

/* A memory event: the allocation or free it records, matched by address within the process
 * (unified addressing makes an address unique across the process's devices). */
int nsys_memory_event(merge *m, const nitem *it, int64_t ts, int64_t name, int64_t corr) {
  nsys *x = m->x;
  int mk = it->v[2] >= 0 && it->v[2] < ENUM_MAX ? x->mk_map[it->v[2]] : BAD;
  int op = it->v[3] >= 0 && it->v[3] < ENUM_MAX ? x->op_map[it->v[3]] : BAD;
  m->counts[N_MEMORY_EVENTS]++;
  if (mk == BAD || op == BAD) {
    m->counts[N_BAD_ENUM]++;
    return 0;
  }
  uint64_t addr = (uint64_t)it->v[0], bytes = (uint64_t)(it->v[1] < 0 ? 0 : it->v[1]);
  nout o = {.ts = ts, .corr = corr, .own = it->start, .rowid = it->rowid, .table = TB_MEMORY};
  sim_event_init(&o.ev);
  o.ev.ts = ts;
  o.ev.addr = addr;
  o.ev.name = name;
  o.ev.flags = SIM_EVF_DEVICE_API;
  const nlive *l = nsys_live_find(m->p, addr);
  int rc = op == OP_ALLOC ? memory_alloc(m, it, &o, l, mk, bytes) : memory_free(m, it, &o, l, bytes);
  if (rc > 0) batch_add(m, &o);
  return rc < 0 ? -1 : 0;
}

/* ---- device activities ---------------------------------------------------------------------------- */

static int copy_dir(int ck, int sk, int dk) {
  switch (ck) {
  case CK_HTOD:
  case CK_HTOA:
  case CK_UVM_HTOD: return SIM_COPY_H2D;
  case CK_DTOH:
  case CK_ATOH:
  case CK_UVM_DTOH: return SIM_COPY_D2H;
  case CK_DTOD:
  case CK_DTOA:
  case CK_ATOD:
  case CK_ATOA:
  case CK_UVM_DTOD: return SIM_COPY_D2D;
  case CK_HTOH: return SIM_COPY_H2H;
  case CK_PTOP: return SIM_COPY_P2P;
  default: break;
  }
  int sh = sk == MK_PAGEABLE || sk == MK_PINNED, dh = dk == MK_PAGEABLE || dk == MK_PINNED;
  if (sk >= MK__COUNT || dk >= MK__COUNT || sk == MK_UNKNOWN || dk == MK_UNKNOWN) return SIM_COPY_NONE;
  return sh && dh ? SIM_COPY_H2H : sh ? SIM_COPY_H2D : dh ? SIM_COPY_D2H : SIM_COPY_D2D;
}

static int sim_mem_of(int mk) {
  switch (mk) {
  case MK_PAGEABLE: return SIM_MEM_PAGEABLE;
  case MK_PINNED: return SIM_MEM_PINNED;
  case MK_DEVICE:
  case MK_ARRAY:
  case MK_DEVICE_STATIC: return SIM_MEM_DEVICE;
  case MK_MANAGED:
  case MK_MANAGED_STATIC: return SIM_MEM_MANAGED;
  default: return SIM_MEM_UNKNOWN;
  }
}

/* Turns a device activity into its event at host time ts. */
int nsys_activity_event(merge *m, const nitem *it, int64_t ts, int64_t corr, int async) {
  nsys *x = m->x;
  nout o = {.ts = ts, .corr = corr, .own = it->start, .rowid = it->rowid, .table = it->table};
  sim_event *ev = &o.ev;
  sim_event_init(ev);
  ev->ts = ts;
  ev->dev_ts = it->start;
  ev->dur = it->end - it->start;
  if (ev->dur < 0) {
    m->counts[N_NEG_DUR]++;
    ev->dur = 0;
  }
  ev->device = nsys_dev16(it->device);
  ev->stream = nsys_map_stream(m, it->stream, it->context);
  note_device(m, it->device);
  if (it->table == TB_KERNEL) {
    ev->kind = SIM_EV_KERNEL;
    ev->name = it->v[0] >= 0 ? nsys_kernel_name(x, it->v[0]) : 0;
    if (ev->name < 0) return -1;
  } else if (it->table == TB_MEMCPY) {
    int ck = it->v[1] >= 0 && it->v[1] < ENUM_MAX ? x->ck_map[it->v[1]] : BAD;
    int sk = it->v[2] >= 0 && it->v[2] < ENUM_MAX ? x->mk_map[it->v[2]] : BAD;
    int dk = it->v[3] >= 0 && it->v[3] < ENUM_MAX ? x->mk_map[it->v[3]] : BAD;
    if (ck == BAD) {
      m->counts[N_BAD_ENUM]++;
      ck = CK_UNKNOWN;
    }
    ev->kind = SIM_EV_MEMCPY;
    ev->size = (uint64_t)(it->v[0] < 0 ? 0 : it->v[0]);
    ev->dir = (uint8_t)copy_dir(ck, sk, dk);
    int host = ev->dir == SIM_COPY_H2D || ev->dir == SIM_COPY_H2H ? sk : ev->dir == SIM_COPY_D2H ? dk : -1;
    ev->mem = ck >= CK_UVM_HTOD && ck <= CK_UVM_DTOD ? SIM_MEM_MANAGED
              : host >= 0                           ? (uint8_t)sim_mem_of(host)
              : ev->dir == SIM_COPY_NONE            ? SIM_MEM_UNKNOWN
                                                    : SIM_MEM_DEVICE;
    if (it->v[4] > 0) ev->addr = (uint64_t)it->v[4];
    if (it->v[5] > 1) m->counts[N_BATCHED_COPIES]++;
    ev->name = nsys_copy_name(x, 0, ck, sk, dk);
    if (ev->name < 0) return -1;
    if (async) ev->flags |= SIM_EVF_ASYNC;
  } else {
    int mk = it->v[1] >= 0 && it->v[1] < ENUM_MAX ? x->mk_map[it->v[1]] : MK_DEVICE;
    if (mk == BAD) mk = MK_UNKNOWN;
    ev->kind = SIM_EV_MEMSET;
    ev->size = (uint64_t)(it->v[0] < 0 ? 0 : it->v[0]);
    ev->mem = (uint8_t)sim_mem_of(mk);
    ev->name = nsys_copy_name(x, 1, 0, 0, mk);
    if (ev->name < 0) return -1;
    if (async) ev->flags |= SIM_EVF_ASYNC;
  }
  batch_add(m, &o);
  return 0;
}

/* ---- the allocations live when the capture began ---------------------------------------------------- */

int nsys_emit_preexisting(merge *m) {
  nproc *p = m->p;
  int64_t ts = m->rt.has && m->rt.cur.start < p->min_start ? m->rt.cur.start : p->min_start;
  m->last_ts = INT64_MIN;
  for (size_t i = 0; i < p->npre; i++) {
    const npre *a = &p->pre[i];
    int mc = mem_class(a->mk);
    nsys_live_add(p, a->addr, a->bytes, a->device, a->mk);
    if (mc == MC_STATIC || mc == MC_BAD) continue;
    sim_event ev;
    sim_event_init(&ev);
    ev.ts = ts;
    ev.addr = a->addr;
    ev.size = a->bytes;
    ev.flags = SIM_EVF_DEVICE_API | SIM_EVF_PREEXISTING;
    if (mc == MC_PINNED || mc == MC_PAGEABLE) {
      ev.kind = SIM_EV_HOST_ALLOC;
      ev.device = -1;
      ev.mem = mc == MC_PINNED ? SIM_MEM_PINNED : SIM_MEM_PAGEABLE;
    } else {
      ev.kind = SIM_EV_ALLOC;
      ev.device = a->device;
      ev.mem = mc == MC_MANAGED ? SIM_MEM_MANAGED : SIM_MEM_DEVICE;
      note_device(m, a->device);
    }
    m->counts[N_PREEXISTING]++;
    if (store_writer_event(m->w, &ev)) {
      import_error(m->x->ic, "cannot import '%s': %s", m->x->path, store_error(m->x->ic->s));
      return -1;
    }
    m->last_ts = ts;
  }
  return 0;
}

/* records.c: Kineto: each element into a record: operators, memory events, runtime calls, device activities. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_int.h"

/* ---- the records and their orders ------------------------------------------------------------ */

/* Sort 1: by correlation id, a launch before its activities. */
int kineto_cmp_corr(const void *a, const void *b) {
  const krec *x = a, *y = b;
  if (x->corr != y->corr) return x->corr < y->corr ? -1 : 1;
  int sx = x->type != R_RUNTIME, sy = y->type != R_RUNTIME;
  if (sx != sy) return sx - sy;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Sort 2: by host time; at the same time operators first, outer (longer) ones before inner,
 * then everything else in file order (an activity at its launch's place, by rank). */
int kineto_cmp_time(const void *a, const void *b) {
  const krec *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  int ox = x->type != R_OP, oy = y->type != R_OP;
  if (ox != oy) return ox - oy;
  if (!ox && x->dur != y->dur) return x->dur > y->dur ? -1 : 1;
  if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
  return (x->ord > y->ord) - (x->ord < y->ord);
}

/* ---- elements into records ------------------------------------------------------------------ */

static int starts_with(const char *s, size_t n, const char *p) {
  size_t k = strlen(p);
  return n >= k && !memcmp(s, p, k);
}

static int contains(const char *s, size_t n, const char *p) { return memmem(s, n, p, strlen(p)) != NULL; }

int64_t kineto_intern(kparse *p, const char *s, size_t n, int keep_text) {
  int64_t id = store_intern_string(p->ic->s, s, n);
  if (id < 0) {
    kineto_fail(p, "%s", store_error(p->ic->s));
    return -1;
  }
  if (keep_text) {
    int existed;
    uint64_t *slot = sim_map_put(&p->texts, (uint64_t)id, &existed);
    if (!existed) {
      sim_grow((void **)&p->arena, &p->acap, p->alen + n + 1, 1);
      memcpy(p->arena + p->alen, s, n);
      p->arena[p->alen + n] = 0;
      *slot = p->alen + 1;
      p->alen += n + 1;
    }
  }
  return id;
}

const char *kineto_text(const kparse *p, int64_t id) {
  uint64_t *v = id > 0 ? sim_map_get(&p->texts, (uint64_t)id) : NULL;
  return v ? p->arena + *v - 1 : "";
}

static int need(kparse *p, const kview *v, int bit, const char *field) {
  if (v->e->have & (1u << bit)) return 1;
  kineto_fail(p, "traceEvents[%" PRId64 "] (%.*s): missing field '%s'", v->nelem,
              (int)(v->name_len > 60 ? 60 : v->name_len), v->name, field);
  return 0;
}

static int need_arg(kparse *p, const kview *v, int bit) {
  if (v->e->args & (1u << bit)) return 1;
  kineto_fail(p, "traceEvents[%" PRId64 "] (%.*s): missing args field '%s'", v->nelem,
              (int)(v->name_len > 60 ? 60 : v->name_len), v->name, kineto_args_names[bit]);
  return 0;
}

static void note_device(kparse *p, int64_t d) {
  if (d >= 0 && d < 64) p->devices_used |= UINT64_C(1) << d;
}

int kineto_add_time(kparse *p, const krec *r) {
  extsort *x = r->type == R_MEMORY || r->type == R_OOM ? p->by_time_mem : p->by_time;
  if (extsort_add(x, r)) {
    kineto_fail(p, "%s", extsort_error(x));
    return 0;
  }
  return 1;
}

int kineto_add_corr(kparse *p, const krec *r) {
  if (extsort_add(p->by_corr, r)) {
    kineto_fail(p, "%s", extsort_error(p->by_corr));
    return 0;
  }
  return 1;
}

/* Splits a python_function name "path/file.py(123): func" into its parts. */
static void split_python(const char *s, size_t n, size_t *file_len, int32_t *line, const char **func, size_t *func_len) {
  const char *colon = memmem(s, n, "): ", 3);
  *file_len = 0;
  *line = 0;
  *func = s;
  *func_len = n;
  if (!colon) return;
  const char *open = colon;
  while (open > s && open[-1] >= '0' && open[-1] <= '9') open--;
  if (open == colon || open == s || open[-1] != '(') return;
  *line = (int32_t)strtol(open, NULL, 10);
  *file_len = (size_t)(open - 1 - s);
  *func = colon + 3;
  *func_len = n - (size_t)(colon + 3 - s);
}

static int op_record(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need(p, v, E_DUR, "dur")) return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = R_OP;
  r.ts = e->ts;
  r.dur = e->dur < 0 ? 0 : e->dur;
  r.tid = (e->have & (1u << E_TID)) ? e->tid : 0;
  r.idx = v->nelem;
  const char *nm = v->name;
  size_t nl = v->name_len;
  if (e->cat == CAT_PYTHON_FUNCTION) {
    size_t fl, funcl;
    const char *func;
    split_python(nm, nl, &fl, &r.line, &func, &funcl);
    r.sub |= OP_PYTHON;
    if (fl && (r.file = kineto_intern(p, nm, fl, 1)) < 0) return 0;
    nm = func;
    nl = funcl;
  }
  if ((r.name = kineto_intern(p, nm, nl, 1)) < 0) return 0;
  if (!(r.sub & OP_PYTHON)) { /* what the name says, once per distinct name */
    int known;
    uint64_t *c = sim_map_put(&p->name_class, (uint64_t)r.name | UINT64_C(1) << 56, &known);
    if (!known) {
      unsigned cls = 0;
      if (starts_with(nm, nl, "ProfilerStep#")) cls = OP_STEP;
      else if (starts_with(nm, nl, "Optimizer.step")) cls = OP_OPTIMIZER;
      else if (starts_with(nm, nl, "Optimizer.zero_grad")) cls = OP_ZERO_GRAD;
      else if (starts_with(nm, nl, "autograd::engine::evaluate_function") || contains(nm, nl, "Backward") ||
               contains(nm, nl, "AccumulateGrad"))
        cls = OP_BACKWARD;
      *c = cls + 1;
    }
    r.sub |= (uint8_t)(*c - 1);
    if (r.sub & OP_STEP) r.bytes = strtoll(nm + 13, NULL, 10);
  }
  r.kind = (uint8_t)kineto_frame_flags(p, r.name, r.file);
  p->n_ops++;
  return kineto_add_time(p, &r);
}

static int memory_record(kparse *p, const kview *v, int oom) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need_arg(p, v, A_BYTES_SIGNED) || (!oom && !need_arg(p, v, A_ADDR)) ||
      !need_arg(p, v, A_DEVTYPE))
    return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = oom ? R_OOM : R_MEMORY;
  r.ts = e->ts;
  r.tid = (e->have & (1u << E_TID)) ? e->tid : 0;
  r.idx = v->nelem;
  r.addr = (e->args & (1u << A_ADDR)) ? e->a[A_ADDR] : 0;
  r.bytes = e->a[A_BYTES_SIGNED];
  r.total_alloc = (e->args & (1u << A_TOTAL_ALLOC)) ? e->a[A_TOTAL_ALLOC] : -1;
  r.total_res = (e->args & (1u << A_TOTAL_RES)) ? e->a[A_TOTAL_RES] : -1;
  int64_t dt = e->a[A_DEVTYPE], did = (e->args & (1u << A_DEVID)) ? e->a[A_DEVID] : 0;
  if (dt < 0 || dt > 255) {
    kineto_fail(p, "traceEvents[%" PRId64 "] (%s): 'Device Type' %" PRId64 " is not a device type", v->nelem, v->name,
                dt);
    return 0;
  }
  r.devtype = (uint8_t)dt;
  if (dt == 0) {
    r.device = -1;
  } else {
    if (did < 0 || did > 32767) {
      kineto_fail(p, "traceEvents[%" PRId64 "] (%s): 'Device Id' %" PRId64 " is not a device index", v->nelem, v->name,
                  did);
      return 0;
    }
    r.device = (int32_t)did;
    note_device(p, did);
    if (dt != 1) p->non_cuda_memory++;
  }
  if (!oom && r.bytes == 0) {
    kineto_drop(p, "[memory] of 0 bytes", 19, 0);
    return 1;
  }
  if (oom) p->n_oom++;
  else p->n_memory++;
  return kineto_add_time(p, &r);
}

/*
 * What a runtime (or driver) call is to memplay. Queries -- calls that read state and change
 * nothing on the device or in the allocator (cudaEventQuery, cudaStreamIsCapturing,
 * cudaGetDevice, cudaOccupancy..., cudaPeekAtLastError, the unnamed "INVALID") -- are counted,
 * by name, and not stored: in real traces they are most of the calls (PyTorch's caching
 * allocator polls its events with cudaEventQuery), and their time is already in the gaps
 * between the launches around them.
 */
static int runtime_kind(const char *n, size_t len) {
  if (contains(n, len, "DeviceSynchronize") || contains(n, len, "CtxSynchronize")) return RT_SYNC_DEVICE;
  if (contains(n, len, "StreamSynchronize")) return RT_SYNC_STREAM;
  if (contains(n, len, "EventSynchronize")) return RT_SYNC_EVENT;
  if (contains(n, len, "Get") || contains(n, len, "Query") || contains(n, len, "Peek") ||
      contains(n, len, "IsCapturing") || contains(n, len, "Occupancy") || (len == 7 && !memcmp(n, "INVALID", 7)))
    return RT_QUERY;
  return RT_OTHER;
}

/* "Memcpy HtoD (Pinned -> Device)": the direction and the host memory kind from the name. */
static void copy_kind(const char *n, size_t len, uint8_t *dir, uint8_t *mem) {
  *dir = SIM_COPY_NONE;
  *mem = SIM_MEM_UNKNOWN;
  if (contains(n, len, "HtoD")) *dir = SIM_COPY_H2D;
  else if (contains(n, len, "DtoH")) *dir = SIM_COPY_D2H;
  else if (contains(n, len, "DtoD")) *dir = SIM_COPY_D2D;
  else if (contains(n, len, "HtoH")) *dir = SIM_COPY_H2H;
  else if (contains(n, len, "PtoP") || contains(n, len, "Peer")) *dir = SIM_COPY_P2P;
  else if (contains(n, len, "AtoD") || contains(n, len, "AtoA") || contains(n, len, "DtoA")) *dir = SIM_COPY_D2D;
  else if (contains(n, len, "HtoA")) *dir = SIM_COPY_H2D;
  else if (contains(n, len, "AtoH")) *dir = SIM_COPY_D2H;
  if (contains(n, len, "Pinned")) *mem = SIM_MEM_PINNED;
  else if (contains(n, len, "Pageable")) *mem = SIM_MEM_PAGEABLE;
  else if (contains(n, len, "Managed")) *mem = SIM_MEM_MANAGED;
  else if (contains(n, len, "Device")) *mem = SIM_MEM_DEVICE;
}

/* ---- an element, handled ------------------------------------------------------------------------ */

static int runtime_record(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need(p, v, E_DUR, "dur")) return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = R_RUNTIME;
  r.ts = e->ts;
  r.dur = e->dur < 0 ? 0 : e->dur;
  r.tid = (e->have & (1u << E_TID)) ? e->tid : 0;
  r.idx = v->nelem;
  r.device = -1;
  r.corr = (e->args & (1u << A_CORR)) ? e->a[A_CORR] : -1;
  if (r.corr < -1) r.corr = -1;
  if ((r.name = kineto_intern(p, v->name, v->name_len, 1)) < 0) return 0;
  int known;
  uint64_t *c = sim_map_put(&p->name_class, (uint64_t)r.name | UINT64_C(2) << 56, &known);
  if (!known)
    *c = 1 + ((unsigned)runtime_kind(v->name, v->name_len) | (contains(v->name, v->name_len, "Async") ? RTF_ASYNC << 4 : 0));
  r.sub = (uint8_t)((*c - 1) & 15);
  r.rtflags = (uint8_t)((*c - 1) >> 4);
  if (r.sub == RT_QUERY) { /* no device activity to meet: counted at once */
    p->n_runtime++;
    return kineto_emit_runtime(p->join, &r);
  }
  p->n_runtime++;
  return kineto_window_runtime(p->join, &r);
}

static int activity_record(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (!need(p, v, E_TS, "ts") || !need(p, v, E_DUR, "dur")) return 0;
  krec r;
  memset(&r, 0, sizeof r);
  r.type = R_ACTIVITY;
  r.ts = e->ts;
  r.dur = e->dur < 0 ? 0 : e->dur;
  r.idx = v->nelem;
  r.tid = NO_THREAD;
  r.stream = (e->args & (1u << A_STREAM)) ? e->a[A_STREAM] : 0;
  r.device = (e->args & (1u << A_DEVICE)) ? (int32_t)e->a[A_DEVICE] : 0;
  if (r.device < 0 || r.device > 32767) r.device = 0;
  if ((r.name = kineto_intern(p, v->name, v->name_len, 0)) < 0) return 0;
  uint8_t dir = SIM_COPY_NONE, mem = SIM_MEM_UNKNOWN;
  if (e->cat == CAT_MEMCPY || e->cat == CAT_MEMSET) { /* what the name says, once per distinct name */
    int known;
    uint64_t *c = sim_map_put(&p->name_class, (uint64_t)r.name | UINT64_C(3) << 56, &known);
    if (!known) {
      copy_kind(v->name, v->name_len, &dir, &mem);
      *c = 1 + (dir | (unsigned)mem << 4);
    }
    dir = (uint8_t)((*c - 1) & 15);
    mem = (uint8_t)((*c - 1) >> 4);
  }
  switch (e->cat) {
  case CAT_KERNEL: r.sub = ACT_KERNEL; break;
  case CAT_MEMCPY:
    r.sub = ACT_MEMCPY;
    r.dir = dir == SIM_COPY_NONE ? SIM_COPY_D2D : dir;
    r.mem = mem;
    r.bytes = (e->args & (1u << A_NBYTES)) ? e->a[A_NBYTES] : 0;
    break;
  case CAT_MEMSET:
    r.sub = ACT_MEMSET;
    r.mem = mem;
    r.bytes = (e->args & (1u << A_NBYTES)) ? e->a[A_NBYTES] : 0;
    break;
  case CAT_CUDA_SYNC:
    r.sub = ACT_SYNC;
    /* "Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event" */
    if (!strcmp(e->sync_kind, "Stream Wait Event")) r.kind = 3;
    else if (!strncmp(e->sync_kind, "Event", 5)) r.kind = 2;
    else if (!strncmp(e->sync_kind, "Context", 7)) r.kind = 1;
    else r.kind = 0;
    break;
  default: r.sub = ACT_EVENT; break;
  }
  note_device(p, r.device);
  p->n_activity++;
  r.corr = (e->args & (1u << A_CORR)) ? e->a[A_CORR] : -1;
  if (r.corr < -1) r.corr = -1;
  return kineto_window_activity(p->join, &r);
}

int kineto_handle_element(kparse *p, const kview *v) {
  const kelem *e = v->e;
  if (v->bad[0]) {
    kineto_fail(p, "traceEvents[%" PRId64 "]%s%.*s%s: %s", v->nelem, v->name_len ? " (" : "",
                (int)(v->name_len > 60 ? 60 : v->name_len), v->name, v->name_len ? ")" : "", v->bad);
    return 0;
  }
  switch (e->cat) {
  case CAT_CPU_OP:
  case CAT_USER_ANNOTATION:
  case CAT_PYTHON_FUNCTION:
    if (e->ph == 'X') return op_record(p, v);
    break;
  case CAT_INSTANT:
    if (v->name_len == 8 && !memcmp(v->name, "[memory]", 8)) return memory_record(p, v, 0);
    if (v->name_len == 13 && !memcmp(v->name, "[OutOfMemory]", 13)) return memory_record(p, v, 1);
    break;
  case CAT_KERNEL:
  case CAT_MEMCPY:
  case CAT_MEMSET:
  case CAT_CUDA_SYNC:
  case CAT_CUDA_EVENT:
    if (e->ph == 'X') return activity_record(p, v);
    break;
  case CAT_RUNTIME:
  case CAT_DRIVER:
    if (e->ph == 'X') return runtime_record(p, v);
    break;
  case CAT_FLOW:
    p->n_flow++;
    return 1;
  case CAT_NONE:
    if (e->ph == 'M') {
      p->n_meta++;
      return 1;
    }
    break;
  default:
    break;
  }
  /* Not something memplay models: counted by category (or phase, or name). Categories Kineto
   * writes that carry nothing for memplay are "ignored"; others are "unknown" (data loss). */
  static const char *const ignored[] = {"Trace", "gpu_user_annotation", "overhead", "cuda_profiler_range",
                                        "python_function", NULL};
  int known = 0;
  for (size_t k = 0; e->cat == CAT_OTHER && ignored[k]; k++)
    known |= v->cat_len == strlen(ignored[k]) && !memcmp(v->cat, ignored[k], v->cat_len);
  if (e->cat == CAT_OTHER) kineto_drop(p, v->cat, v->cat_len, !known);
  else if (e->cat == CAT_NONE) {
    char what[48];
    int n = snprintf(what, sizeof what, "ph %c without cat", e->ph ? e->ph : '?');
    kineto_drop(p, what, (size_t)n, 0);
  } else {
    static const char *const names[] = {"", "cpu_op", "user_annotation", "python_function", "cpu_instant_event",
                                        "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "cuda_event",
                                        "cuda_runtime", "cuda_driver", "flow", "other"};
    char what[48];
    int n = e->cat == CAT_INSTANT ? snprintf(what, sizeof what, "instant %.30s", v->name)
                                  : snprintf(what, sizeof what, "%s ph %c", names[e->cat], e->ph ? e->ph : '?');
    kineto_drop(p, what, (size_t)(n < (int)sizeof what ? n : (int)sizeof what - 1), 0);
  }
  return 1;
}

/* inject.c: libmemplay_recorder.so: loaded by the CUDA driver (CUDA_INJECTION64_PATH), it records through CUPTI. */
#include <cupti.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert.h"

/*
 * The driver calls InitializeInjection during cuInit in every process that has
 * CUDA_INJECTION64_PATH naming this library. It subscribes to CUPTI and enables activity records
 * for allocations and frees (MEMORY2: runtime and driver API alike, so a framework's own
 * cuMemAlloc calls are seen), copies, memsets, kernels, synchronizations and the runtime and
 * driver API calls that issued them (for host times); callbacks supply what the records lack:
 * cuMemMap/cuMemUnmap ranges, the device addresses of copies and memsets, each context's
 * device and default stream. Records are kept in memory, in the compact form of convert.h; at
 * exit they are flushed and written as memplay JSON Lines to $MEMPLAY_RECORD_DIR/PID.jsonl
 * (the current directory when unset). A process that cannot record writes PID.error instead.
 */

/* The codes convert.c works with are CUPTI's own. */
#define SAME(cupti, ours) ((int)(cupti) == (int)(ours))
_Static_assert(SAME(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, REC_MEM_PAGEABLE) && SAME(CUPTI_ACTIVITY_MEMORY_KIND_PINNED, REC_MEM_PINNED) &&
                 SAME(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, REC_MEM_DEVICE) && SAME(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, REC_MEM_MANAGED) &&
                 SAME(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, REC_MEM_DEVICE_STATIC) &&
                 SAME(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC, REC_MEM_MANAGED_STATIC),
               "CUPTI memory kinds");
_Static_assert(SAME(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, REC_COPY_HTOD) && SAME(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, REC_COPY_DTOH) &&
                 SAME(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, REC_COPY_DTOD) && SAME(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, REC_COPY_HTOH) &&
                 SAME(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, REC_COPY_PTOP) && SAME(CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, REC_COPY_ATOD),
               "CUPTI copy kinds");
_Static_assert(SAME(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, REC_OP_ALLOCATION) &&
                 SAME(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, REC_OP_RELEASE),
               "CUPTI memory operations");
_Static_assert(SAME(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, REC_SYNC_EVENT) &&
                 SAME(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, REC_SYNC_STREAM_WAIT_EVENT) &&
                 SAME(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, REC_SYNC_STREAM) &&
                 SAME(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, REC_SYNC_CONTEXT),
               "CUPTI synchronization types");
_Static_assert(CUPTI_INVALID_STREAM_ID == REC_INVALID_ID && CUPTI_INVALID_CONTEXT_ID == REC_INVALID_ID, "CUPTI ids");

#define BUFFER_SIZE ((size_t)8 << 20)

static struct {
  pthread_mutex_t lock;
  rec_state st;
  sim_map api_names; /* domain << 32 | callback id -> kept name id, 0 when not kept */
  int active;
  pid_t pid; /* the process that initialised: a forked child writes nothing */
  CUpti_SubscriberHandle sub;
  uint32_t cupti_version;
} g = {.lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP}; /* recursive: CUPTI may hand over a buffer while a callback runs */

static const char *out_dir(void) {
  const char *d = getenv("MEMPLAY_RECORD_DIR");
  return d && *d ? d : ".";
}

static void report_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report_error(const char *fmt, ...) {
  char msg[1024], path[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "memplay recorder: %s\n", msg);
  snprintf(path, sizeof path, "%s/%ld.error", out_dir(), (long)getpid());
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "%s\n", msg);
    fclose(f);
  }
}

static const char *cupti_text(CUptiResult r) {
  const char *s = NULL;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  return s;
}

/* ---- activity records ------------------------------------------------------------------------ */

/* The kept name of an API call (0: not kept), looked up once per callback id. */
static uint32_t api_name(CUpti_CallbackDomain dom, CUpti_CallbackId cbid) {
  uint64_t key = (uint64_t)dom << 32 | cbid;
  uint64_t *known = sim_map_get(&g.api_names, key);
  if (known) return (uint32_t)*known;
  const char *name = NULL;
  if (cuptiGetCallbackName(dom, cbid, &name) != CUPTI_SUCCESS) name = NULL;
  uint32_t id = name ? rec_api_name(&g.st, name) : 0;
  *sim_map_put(&g.api_names, key, NULL) = id;
  return id;
}

static void take_memory(rec_record *r, const CUpti_ActivityMemory4 *m) {
  r->kind = REC_MEMORY;
  r->op = (uint8_t)m->memoryOperationType;
  r->mem = (uint8_t)m->memoryKind;
  r->correlation = m->correlationId;
  r->addr = m->address;
  r->bytes = m->bytes;
  r->start = r->end = m->timestamp;
  r->device = m->deviceId;
  r->context = m->contextId;
  r->stream = m->isAsync ? m->streamId : REC_INVALID_ID;
}

static void take_memcpy(rec_record *r, const CUpti_ActivityMemcpy6 *m) {
  r->kind = REC_MEMCPY;
  r->copy_kind = m->copyKind;
  r->src_kind = m->srcKind;
  r->dst_kind = m->dstKind;
  r->flags = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? REC_F_ASYNC : 0;
  r->bytes = m->bytes;
  r->start = m->start;
  r->end = m->end;
  r->device = m->deviceId;
  r->context = m->contextId;
  r->stream = m->streamId;
  r->correlation = m->correlationId;
}

static void take_memset(rec_record *r, const CUpti_ActivityMemset4 *m) {
  r->kind = REC_MEMSET;
  r->mem = (uint8_t)m->memoryKind;
  r->flags = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? REC_F_ASYNC : 0;
  r->bytes = m->bytes;
  r->start = m->start;
  r->end = m->end;
  r->device = m->deviceId;
  r->context = m->contextId;
  r->stream = m->streamId;
  r->correlation = m->correlationId;
}

static void take_kernel(rec_record *r, const CUpti_ActivityKernel10 *k) {
  r->kind = REC_KERNEL;
  r->start = k->start;
  r->end = k->end;
  r->device = k->deviceId;
  r->context = k->contextId;
  r->stream = k->streamId;
  r->correlation = k->correlationId;
  r->name = rec_intern(&g.st, k->name ? k->name : "");
}

static void take_sync(rec_record *r, const CUpti_ActivitySynchronization2 *s) {
  r->kind = REC_SYNC;
  r->op = (uint8_t)s->type;
  r->start = s->start;
  r->end = s->end;
  r->context = s->contextId;
  r->stream = s->streamId;
  r->correlation = s->correlationId;
}

/* A runtime or driver API call: kept apart, for the host times of the records it issued. */
static void take_api(const CUpti_Activity *a) {
  const CUpti_ActivityAPI *api = (const CUpti_ActivityAPI *)a;
  CUpti_CallbackDomain dom = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  rec_add_api(&g.st, api->correlationId, api->start, api->end, api_name(dom, api->cbid));
}

static void take_device(const CUpti_ActivityDevice5 *d) {
  rec_device_info(&g.st, d->id, d->name ? d->name : "", d->globalMemorySize, (int)d->computeCapabilityMajor,
                  (int)d->computeCapabilityMinor);
}

/* One activity record: kept in the compact form of convert.h, or as an API call or a device's
 * description; other kinds are ignored. */
static void take(const CUpti_Activity *a) {
  rec_record r;
  memset(&r, 0, sizeof r);
  r.device = r.context = r.stream = REC_INVALID_ID;
  switch (a->kind) {
  case CUPTI_ACTIVITY_KIND_MEMORY2: take_memory(&r, (const CUpti_ActivityMemory4 *)a); break;
  case CUPTI_ACTIVITY_KIND_MEMCPY: take_memcpy(&r, (const CUpti_ActivityMemcpy6 *)a); break;
  case CUPTI_ACTIVITY_KIND_MEMSET: take_memset(&r, (const CUpti_ActivityMemset4 *)a); break;
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
  case CUPTI_ACTIVITY_KIND_KERNEL: take_kernel(&r, (const CUpti_ActivityKernel10 *)a); break;
  case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: take_sync(&r, (const CUpti_ActivitySynchronization2 *)a); break;
  case CUPTI_ACTIVITY_KIND_RUNTIME:
  case CUPTI_ACTIVITY_KIND_DRIVER: take_api(a); return;
  case CUPTI_ACTIVITY_KIND_DEVICE: take_device((const CUpti_ActivityDevice5 *)a); return;
  default: return;
  }
  rec_add(&g.st, &r);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER_SIZE);
  *size = *buffer ? BUFFER_SIZE : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)size;
  CUpti_Activity *a = NULL;
  pthread_mutex_lock(&g.lock);
  if (g.active && valid > 0)
    while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) take(a);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g.st.dropped += dropped;
  pthread_mutex_unlock(&g.lock);
  free(buffer);
}

/* ---- callbacks ---------------------------------------------------------------------------------- */

static void context_created(CUcontext ctx) {
  uint32_t id = 0, dev = 0, s = 0;
  if (cuptiGetContextId(ctx, &id) != CUPTI_SUCCESS) return;
  if (cuptiGetDeviceId(ctx, &dev) == CUPTI_SUCCESS) rec_context(&g.st, id, dev);
  if (cuptiGetStreamIdEx(ctx, NULL, 0, &s) == CUPTI_SUCCESS) rec_default_stream(&g.st, id, s);
  if (cuptiGetStreamIdEx(ctx, CU_STREAM_PER_THREAD, 1, &s) == CUPTI_SUCCESS) rec_default_stream(&g.st, id, s);
}

static void api_exit(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (dom == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (!cb->functionReturnValue || *(const CUresult *)cb->functionReturnValue != CUDA_SUCCESS) return;
    rec_record r;
    memset(&r, 0, sizeof r);
    r.device = r.stream = REC_INVALID_ID;
    r.context = REC_INVALID_ID;
    uint32_t v;
    if (cb->context && cuptiGetContextId(cb->context, &v) == CUPTI_SUCCESS) r.context = v;
    if (cb->context && cuptiGetDeviceId(cb->context, &v) == CUPTI_SUCCESS) r.device = v;
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    r.start = r.end = now;
    r.correlation = cb->correlationId;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemMap) {
      const cuMemMap_params *p = cb->functionParams;
      r.kind = REC_MAP;
      r.addr = (uint64_t)p->ptr;
      r.bytes = p->size;
    } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemUnmap) {
      const cuMemUnmap_params *p = cb->functionParams;
      r.kind = REC_UNMAP;
      r.addr = (uint64_t)p->ptr;
      r.bytes = p->size;
    } else {
      return;
    }
    rec_add(&g.st, &r);
    return;
  }
  if (!cb->functionReturnValue || *(const cudaError_t *)cb->functionReturnValue != cudaSuccess) return;
  uint64_t addr = 0;
  switch (cbid) {
  case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020: {
    const cudaMemcpy_v3020_params *p = cb->functionParams;
    addr = (uint64_t)(uintptr_t)(p->kind == cudaMemcpyDeviceToHost ? p->src : p->dst);
    if (p->kind == cudaMemcpyHostToHost || p->kind == cudaMemcpyDefault) addr = 0;
    break;
  }
  case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020: {
    const cudaMemcpyAsync_v3020_params *p = cb->functionParams;
    addr = (uint64_t)(uintptr_t)(p->kind == cudaMemcpyDeviceToHost ? p->src : p->dst);
    if (p->kind == cudaMemcpyHostToHost || p->kind == cudaMemcpyDefault) addr = 0;
    break;
  }
  case CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020:
    addr = (uint64_t)(uintptr_t)((const cudaMemset_v3020_params *)cb->functionParams)->devPtr;
    break;
  case CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020:
    addr = (uint64_t)(uintptr_t)((const cudaMemsetAsync_v3020_params *)cb->functionParams)->devPtr;
    break;
  default: return;
  }
  rec_add_call_addr(&g.st, cb->correlationId, addr);
}

static void CUPTIAPI callback(void *userdata, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  (void)userdata;
  pthread_mutex_lock(&g.lock);
  if (g.active) {
    if (dom == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      context_created(((const CUpti_ResourceData *)data)->context);
    } else if (dom == CUPTI_CB_DOMAIN_DRIVER_API || dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
      const CUpti_CallbackData *cb = data;
      if (cb->callbackSite == CUPTI_API_EXIT) api_exit(dom, cbid, cb);
    }
  }
  pthread_mutex_unlock(&g.lock);
}

/* ---- the end ------------------------------------------------------------------------------------- */

static char *command_line(void) {
  FILE *f = fopen("/proc/self/cmdline", "rb");
  if (!f) return NULL;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  if (n == 0) return NULL;
  for (size_t i = 0; i + 1 < n; i++)
    if (!buf[i]) buf[i] = ' ';
  buf[n] = 0;
  return strdup(buf);
}

static void finish(void) {
  if (!g.active || getpid() != g.pid) return;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&g.lock);
  g.active = 0;
  char part[4200], path[4096], err[256];
  snprintf(path, sizeof path, "%s/%ld.jsonl", out_dir(), (long)g.pid);
  snprintf(part, sizeof part, "%s.part", path);
  FILE *f = fopen(part, "w");
  if (!f) {
    pthread_mutex_unlock(&g.lock);
    report_error("cannot write '%s': %s", part, strerror(errno));
    return;
  }
  char *cmd = command_line();
  rec_meta meta = {NULL, cmd, (int64_t)g.pid, (int)g.cupti_version};
  int rc = rec_write_jsonl(&g.st, f, &meta, NULL, err, sizeof err);
  free(cmd);
  rec_release(&g.st);
  sim_map_release(&g.api_names);
  pthread_mutex_unlock(&g.lock);
  if (fclose(f) || rc) {
    report_error("cannot write '%s': %s", part, rc ? err : strerror(errno));
    return;
  }
  if (rename(part, path)) report_error("cannot rename '%s' to '%s': %s", part, path, strerror(errno));
}

#define TRY(call, what)                                                            \
  do {                                                                             \
    CUptiResult r_ = (call);                                                       \
    if (r_ != CUPTI_SUCCESS) {                                                     \
      report_error("cannot record: %s failed: %s%s", what, cupti_text(r_),        \
                   r_ == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED            \
                     ? " (another CUPTI client, such as a profiler, is attached)" \
                     : "");                                                        \
      return 0;                                                                    \
    }                                                                              \
  } while (0)

__attribute__((visibility("default"))) int InitializeInjection(void);

int InitializeInjection(void) {
  pthread_mutex_lock(&g.lock);
  int again = g.active;
  pthread_mutex_unlock(&g.lock);
  if (again) return 1;
  rec_init(&g.st);
  sim_map_init(&g.api_names);
  g.pid = getpid();
  cuptiGetVersion(&g.cupti_version);
  TRY(cuptiSubscribe(&g.sub, callback, NULL), "cuptiSubscribe");
  TRY(cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
      "cuptiEnableCallback(context created)");
  TRY(cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap),
      "cuptiEnableCallback(cuMemMap)");
  TRY(cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap),
      "cuptiEnableCallback(cuMemUnmap)");
  static const CUpti_CallbackId runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020};
  for (size_t i = 0; i < sizeof runtime_cbids / sizeof *runtime_cbids; i++)
    TRY(cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_cbids[i]), "cuptiEnableCallback(runtime)");
  TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    char what[64];
    snprintf(what, sizeof what, "cuptiActivityEnable(kind %d)", (int)kinds[i]);
    TRY(cuptiActivityEnable(kinds[i]), what);
  }
  /* Device descriptions are welcome but not essential. */
  (void)cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
  pthread_mutex_lock(&g.lock);
  g.active = 1;
  pthread_mutex_unlock(&g.lock);
  atexit(finish);
  return 1;
}

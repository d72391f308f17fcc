/* calibrate_cuda.c: measuring a GPU for its device profile: copies, allocation costs, launches, copy engines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "cudart_int.h"

/*
 * Every figure is host wall-clock time around one operation and the synchronization that
 * completes it, the median of several trials: the time a program waits for that operation.
 * Copies run on one non-blocking stream between buffers made before any timing; the straight
 * line fitted through each kind's sizes gives its latency and bandwidth (calibrate.c).
 */

/* Sizes: copies from 4 KiB upwards by 4x, allocations at the sizes allocators ask for. */
#define COPY_MIN (UINT64_C(4) << 10)
#define COPY_MAX (UINT64_C(256) << 20)
#define COPY_MAX_QUICK (UINT64_C(64) << 20)
static const uint64_t malloc_sizes[] = {512, 64 << 10, 2 << 20, 32 << 20, 256 << 20, UINT64_C(1) << 30,
                                        UINT64_C(4) << 30};
static const uint64_t malloc_sizes_quick[] = {512, 2 << 20, 256 << 20};
static const uint64_t host_sizes[] = {4 << 10, 1 << 20, 64 << 20, 256 << 20};
static const uint64_t host_sizes_quick[] = {1 << 20, 64 << 20};
#define COUNT(a) (sizeof(a) / sizeof *(a))
#define TRIALS 11
#define TRIALS_QUICK 3
#define TRIAL_BUDGET_S 0.5 /* stop the rounds of a measurement after this long a size (at least 3 trials) */
#define LAUNCHES 2000
#define LAUNCHES_QUICK 300
#define QUEUE_PROBE 4096        /* long kernels launched to find how many the host may queue */
#define QUEUE_KERNEL_NS 50000   /* each runs this long ... */
#define QUEUE_BLOCKED_NS 25000  /* ... so a launch that took this much longer than usual waited */
#define QUEUE_WINDOW 64
static const uint64_t map_sizes[] = {2 << 20, 32 << 20, 256 << 20, UINT64_C(1) << 30};
static const uint64_t map_sizes_quick[] = {2 << 20, 256 << 20};

typedef struct cctx {
  int gpu, quick, vmm;
  cudart_driver drv;
  cudart_spin spin;
  cudaStream_t s1, s2;
  void *dev;       /* 2 x max copy size */
  char *pinned;    /* 2 x max copy size */
  char *pageable;  /* max copy size */
  uint64_t max;
  char *err;
  size_t errlen;
} cctx;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define CHECK_RT(call, ...) \
  do {                      \
    cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) return cudart_fail(c->err, c->errlen, e_, __VA_ARGS__); \
  } while (0)

static int trials(const cctx *c) { return c->quick ? TRIALS_QUICK : TRIALS; }

/* One copy of n bytes of kind k, to completion. */
static int copy_once(cctx *c, int k, uint64_t n, double *secs) {
  void *dst, *src;
  enum cudaMemcpyKind kind;
  char *d = c->dev;
  switch (k) {
  case CALIB_H2D_PINNED: dst = d, src = c->pinned, kind = cudaMemcpyHostToDevice; break;
  case CALIB_H2D_PAGEABLE: dst = d, src = c->pageable, kind = cudaMemcpyHostToDevice; break;
  case CALIB_D2H_PINNED: dst = c->pinned, src = d, kind = cudaMemcpyDeviceToHost; break;
  case CALIB_D2H_PAGEABLE: dst = c->pageable, src = d, kind = cudaMemcpyDeviceToHost; break;
  default: dst = d, src = d + c->max, kind = cudaMemcpyDeviceToDevice; break;
  }
  char b[32];
  double t0 = now_s();
  CHECK_RT(cudaMemcpyAsync(dst, src, n, kind, c->s1), "cudaMemcpyAsync (%s, %s)", calib_copy_keys[k],
           report_bytes(b, sizeof b, n));
  CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize after a copy (%s)", calib_copy_keys[k]);
  *secs = now_s() - t0;
  return 0;
}

/* One trial at one size: the seconds of its first part (a copy, an allocation) and of its second
 * (the allocation's free; 0 for a copy). 0, or -1 with the message in c->err. */
typedef int (*trial_fn)(cctx *c, const void *arg, uint64_t size, double *first, double *second);

/* The trials of a measurement at every size of sizes[n], in rounds of one trial a size (after one
 * untimed trial of each when `warm`). A slow moment of the machine then falls on a trial of a few
 * sizes, which their medians leave out, and not on every trial of one size, which its median keeps:
 * back to back, all eleven trials of a 256 MiB copy to an H100 once ran at 34 GB/s where the
 * GPU copies at 55, and set its profile's line (docs/measurements/h100-2026-11-27c). Rounds go
 * on until `want`, or, after three, once they have taken TRIAL_BUDGET_S a size (`budgeted`).
 * Each size's medians go to first[i], second[i]; returns the trials made, or -1. */
static int rounds(cctx *c, trial_fn f, const void *arg, const uint64_t *sizes, size_t n, int want, int budgeted,
                  int warm, double *first, double *second) {
  double t1[CALIB_MAX_SIZES][TRIALS], t2[CALIB_MAX_SIZES][TRIALS], x, y;
  if (want > TRIALS) want = TRIALS;
  if (n > CALIB_MAX_SIZES) n = CALIB_MAX_SIZES;
  for (size_t i = 0; warm && i < n; i++)
    if (f(c, arg, sizes[i], &x, &y)) return -1;
  int got = 0;
  double start = now_s();
  while (got < want && (got < 3 || !budgeted || now_s() - start < TRIAL_BUDGET_S * (double)n)) {
    for (size_t i = 0; i < n; i++)
      if (f(c, arg, sizes[i], &t1[i][got], &t2[i][got])) return -1;
    got++;
  }
  for (size_t i = 0; i < n; i++) {
    first[i] = median(t1[i], got);
    second[i] = median(t2[i], got);
  }
  return got;
}

static int copy_trial(cctx *c, const void *kind, uint64_t n, double *secs, double *none) {
  *none = 0;
  return copy_once(c, *(const int *)kind, n, secs);
}

static int copies(cctx *c, calib_profile *p) {
  for (int k = 0; k < CALIB_COPIES; k++) {
    calib_series *s = &p->copy[k];
    uint64_t sizes[CALIB_MAX_SIZES];
    double t[CALIB_MAX_SIZES], none[CALIB_MAX_SIZES];
    size_t n = 0;
    for (uint64_t z = COPY_MIN; z <= c->max && n < CALIB_MAX_SIZES; z *= c->quick ? 16 : 4) sizes[n++] = z;
    int got = rounds(c, copy_trial, &k, sizes, n, trials(c), 1, 1, t, none);
    if (got < 0) return -1;
    s->key = calib_copy_keys[k];
    for (s->n = 0; s->n < n; s->n++) s->pts[s->n] = (calib_point){sizes[s->n], t[s->n], got};
    calib_fit(s);
  }
  return 0;
}

/* A cudaMalloc and its cudaFree, or (*host) a cudaMallocHost and its cudaFreeHost. */
static int alloc_trial(cctx *c, const void *host, uint64_t n, double *alloc_s, double *free_s) {
  int h = *(const int *)host;
  char b[32];
  void *x = NULL;
  double t0 = now_s();
  CHECK_RT(h ? cudaMallocHost(&x, n) : cudaMalloc(&x, n), "%s of %s", h ? "cudaMallocHost" : "cudaMalloc",
           report_bytes(b, sizeof b, n));
  double t1 = now_s();
  CHECK_RT(h ? cudaFreeHost(x) : cudaFree(x), "%s of %s", h ? "cudaFreeHost" : "cudaFree", report_bytes(b, sizeof b, n));
  *alloc_s = t1 - t0;
  *free_s = now_s() - t1;
  return 0;
}

/* The points of the sizes up to `fits` (sizes[] grows), measured by f in rounds: 0, or -1. */
static int cost_points(cctx *c, trial_fn f, const void *arg, const uint64_t *sizes, size_t nsizes, uint64_t fits,
                       int want, int budgeted, calib_alloc_point *pts, size_t *npts) {
  double ta[CALIB_MAX_SIZES], tf[CALIB_MAX_SIZES];
  size_t n = 0;
  while (n < nsizes && n < CALIB_MAX_SIZES && sizes[n] <= fits) n++;
  int got = n ? rounds(c, f, arg, sizes, n, want, budgeted, 0, ta, tf) : 0;
  if (got < 0) return -1;
  for (*npts = 0; *npts < n; (*npts)++) pts[*npts] = (calib_alloc_point){sizes[*npts], ta[*npts], tf[*npts], got};
  return 0;
}

static int allocations(cctx *c, calib_profile *p) {
  void *w;
  CHECK_RT(cudaMalloc(&w, 1 << 20), "cudaMalloc (warm-up)");
  CHECK_RT(cudaFree(w), "cudaFree (warm-up)");
  size_t f = 0, tot = 0;
  CHECK_RT(cudaMemGetInfo(&f, &tot), "cudaMemGetInfo");
  const uint64_t *ms = c->quick ? malloc_sizes_quick : malloc_sizes;
  const uint64_t *hs = c->quick ? host_sizes_quick : host_sizes;
  size_t nms = c->quick ? COUNT(malloc_sizes_quick) : COUNT(malloc_sizes);
  size_t nhs = c->quick ? COUNT(host_sizes_quick) : COUNT(host_sizes);
  static const int device = 0, host = 1;
  if (cost_points(c, alloc_trial, &device, ms, nms, f / 2, trials(c), 1, p->malloc_pts, &p->nmalloc)) return -1;
  return cost_points(c, alloc_trial, &host, hs, nhs, UINT64_MAX, c->quick ? 2 : 5, 0, p->host_pts, &p->nhost);
}

static int launches(cctx *c, calib_profile *p) {
  int n = c->quick ? LAUNCHES_QUICK : LAUNCHES;
  for (int i = 0; i < 100; i++)
    if (cudart_spin_launch(&c->drv, &c->spin, c->s1, 0, c->err, c->errlen)) return -1;
  CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize after the warm-up launches");
  double t0 = now_s();
  for (int i = 0; i < n; i++)
    if (cudart_spin_launch(&c->drv, &c->spin, c->s1, 0, c->err, c->errlen)) return -1;
  double t1 = now_s();
  CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize after the launches");
  double t2 = now_s();
  p->launch_s = (t1 - t0) / n;
  p->kernel_s = (t2 - t0) / n;
  double t[TRIALS];
  for (int i = 0; i < trials(c); i++) {
    double a = now_s();
    CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize of an idle stream");
    t[i] = now_s() - a;
  }
  p->sync_s = median(t, trials(c));
  /* One launch on an idle stream, to the end of its synchronization. */
  for (int i = 0; i < trials(c); i++) {
    double a = now_s();
    if (cudart_spin_launch(&c->drv, &c->spin, c->s1, 0, c->err, c->errlen)) return -1;
    CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize after one launch");
    t[i] = now_s() - a;
  }
  p->single_s = median(t, trials(c));
  /* The launch queue: long kernels, launched until launching keeps pace with the kernels ending
   * (64 launches in a row took as long as 32 kernels run: a hiccup of the host's is shorter);
   * the queue held as many as were launched before the first of those that waited. */
  double *each = malloc(QUEUE_PROBE * sizeof *each);
  if (!each) {
    snprintf(c->err, c->errlen, "out of memory");
    return -1;
  }
  int tried = 0, blocked_at = 0;
  double usual = 0, window = 0;
  for (; tried < QUEUE_PROBE && !blocked_at; tried++) {
    double a = now_s();
    if (cudart_spin_launch(&c->drv, &c->spin, c->s1, QUEUE_KERNEL_NS, c->err, c->errlen)) {
      free(each);
      return -1;
    }
    each[tried] = now_s() - a;
    window += each[tried];
    if (tried >= QUEUE_WINDOW) window -= each[tried - QUEUE_WINDOW];
    if (tried == 15) {
      double first[16];
      memcpy(first, each, sizeof first);
      usual = median(first, 16);
    }
    if (tried + 1 < QUEUE_WINDOW || window < QUEUE_WINDOW / 2 * (QUEUE_KERNEL_NS / 1e9)) continue;
    for (int i = tried + 1 - QUEUE_WINDOW; i <= tried && !blocked_at; i++)
      if (each[i] > usual + QUEUE_BLOCKED_NS / 1e9) blocked_at = i;
    if (!blocked_at) blocked_at = tried + 1 - QUEUE_WINDOW;
  }
  free(each);
  CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize after the launch-queue probe");
  p->launch_queue = blocked_at ? blocked_at : tried;
  p->launch_queue_tried = tried;
  return 0;
}

/* What a mapping trial maps with: the reserved range, and the memory's properties and access. */
typedef struct map_arg {
  CUdeviceptr va;
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
} map_arg;

static int map_trial(cctx *c, const void *arg, uint64_t n, double *map_s, double *unmap_s) {
  const map_arg *m = arg;
  char b[32];
  CUmemGenericAllocationHandle h;
  CUresult r;
  double t0 = now_s();
  if ((r = c->drv.MemCreate(&h, n, &m->prop, 0)) != CUDA_SUCCESS)
    return cudart_drv_fail(&c->drv, c->err, c->errlen, r, "cuMemCreate of %s", report_bytes(b, sizeof b, n));
  if ((r = c->drv.MemMap(m->va, n, 0, h, 0)) != CUDA_SUCCESS ||
      (r = c->drv.MemSetAccess(m->va, n, &m->access, 1)) != CUDA_SUCCESS) {
    cudart_drv_fail(&c->drv, c->err, c->errlen, r, "cuMemMap of %s", report_bytes(b, sizeof b, n));
    c->drv.MemUnmap(m->va, n);
    c->drv.MemRelease(h);
    return -1;
  }
  double t1 = now_s();
  if ((r = c->drv.MemUnmap(m->va, n)) != CUDA_SUCCESS || (r = c->drv.MemRelease(h)) != CUDA_SUCCESS)
    return cudart_drv_fail(&c->drv, c->err, c->errlen, r, "cuMemUnmap of %s", report_bytes(b, sizeof b, n));
  *map_s = t1 - t0;
  *unmap_s = now_s() - t1;
  return 0;
}

/* cuMemCreate + cuMemMap + cuMemSetAccess, and cuMemUnmap + cuMemRelease, by size, in one range
 * reserved for the largest size that fits in half of what is free. */
static int mappings(cctx *c, calib_profile *p) {
  if (!c->vmm) return 0;
  const uint64_t *sizes = c->quick ? map_sizes_quick : map_sizes;
  size_t nsizes = c->quick ? COUNT(map_sizes_quick) : COUNT(map_sizes);
  size_t f = 0, tot = 0;
  CHECK_RT(cudaMemGetInfo(&f, &tot), "cudaMemGetInfo");
  map_arg m;
  memset(&m, 0, sizeof m);
  m.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  m.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  m.prop.location.id = c->gpu;
  m.access.location = m.prop.location;
  m.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  uint64_t largest = 0;
  for (size_t i = 0; i < nsizes; i++)
    if (sizes[i] <= f / 2) largest = sizes[i];
  if (!largest) return 0;
  CUresult r = c->drv.MemAddressReserve(&m.va, largest, 0, 0, 0);
  if (r != CUDA_SUCCESS) return cudart_drv_fail(&c->drv, c->err, c->errlen, r, "cuMemAddressReserve");
  int rc = cost_points(c, map_trial, &m, sizes, nsizes, largest, trials(c), 1, p->map_pts, &p->nmap);
  r = c->drv.MemAddressFree(m.va, largest);
  if (!rc && r != CUDA_SUCCESS) rc = cudart_drv_fail(&c->drv, c->err, c->errlen, r, "cuMemAddressFree");
  return rc;
}

/* Host memory copied by the runtime (cudaMemcpy host to host), between two halves of the pageable buffer. */
static int host_copies(cctx *c, calib_profile *p) {
  uint64_t n = c->max / 2;
  double t[TRIALS];
  for (int i = 0; i < trials(c); i++) {
    double a = now_s();
    CHECK_RT(cudaMemcpy(c->pageable + n, c->pageable, n, cudaMemcpyHostToHost), "cudaMemcpy (h2h)");
    t[i] = now_s() - a;
  }
  p->host_copy_size = n;
  p->host_copy_s = median(t, trials(c));
  return 0;
}

/* Host-to-device and device-to-host at once, on two streams, against one after the other. */
static int engines(cctx *c, calib_profile *p) {
  uint64_t n = c->max;
  char *d = c->dev;
  double one[TRIALS], both[TRIALS];
  int k = trials(c);
  for (int i = 0; i < k; i++) {
    double t0 = now_s();
    CHECK_RT(cudaMemcpyAsync(d, c->pinned, n, cudaMemcpyHostToDevice, c->s1), "cudaMemcpyAsync (h2d)");
    CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize");
    CHECK_RT(cudaMemcpyAsync(c->pinned + c->max, d + c->max, n, cudaMemcpyDeviceToHost, c->s1), "cudaMemcpyAsync (d2h)");
    CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize");
    double t1 = now_s();
    CHECK_RT(cudaMemcpyAsync(d, c->pinned, n, cudaMemcpyHostToDevice, c->s1), "cudaMemcpyAsync (h2d)");
    CHECK_RT(cudaMemcpyAsync(c->pinned + c->max, d + c->max, n, cudaMemcpyDeviceToHost, c->s2), "cudaMemcpyAsync (d2h)");
    CHECK_RT(cudaStreamSynchronize(c->s1), "cudaStreamSynchronize");
    CHECK_RT(cudaStreamSynchronize(c->s2), "cudaStreamSynchronize");
    double t2 = now_s();
    one[i] = t1 - t0;
    both[i] = t2 - t1;
  }
  double a = median(one, k), b = median(both, k);
  p->bidir_speedup = b > 0 ? a / b : 0;
  p->copy_engines = p->bidir_speedup > 1.5 ? 2 : 1;
  return 0;
}

static int setup(cctx *c, calib_profile *p) {
  CHECK_RT(cudaSetDevice(c->gpu), "cudaSetDevice(%d)", c->gpu);
  if (cudart_driver_load(&c->drv, c->err, c->errlen)) return -1;
  if (cudart_spin_load(&c->drv, &c->spin, p->sms, c->err, c->errlen)) return -1;
  size_t f = 0, t = 0;
  CHECK_RT(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
  p->free_memory = f;
  c->max = c->quick ? COPY_MAX_QUICK : COPY_MAX;
  while (c->max > COPY_MIN && 2 * c->max > f / 4) c->max /= 4;
  char b[32];
  CHECK_RT(cudaStreamCreateWithFlags(&c->s1, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  CHECK_RT(cudaStreamCreateWithFlags(&c->s2, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  CHECK_RT(cudaMalloc(&c->dev, 2 * c->max), "cudaMalloc of the %s device buffer", report_bytes(b, sizeof b, 2 * c->max));
  CHECK_RT(cudaMemset(c->dev, 0, 2 * c->max), "cudaMemset of the device buffer");
  CHECK_RT(cudaHostAlloc((void **)&c->pinned, 2 * c->max, cudaHostAllocPortable), "cudaHostAlloc of the %s pinned buffer",
           report_bytes(b, sizeof b, 2 * c->max));
  memset(c->pinned, 0, 2 * c->max);
  c->pageable = malloc(c->max);
  if (!c->pageable) {
    snprintf(c->err, c->errlen, "cannot allocate %s of host memory: %s", report_bytes(b, sizeof b, c->max), strerror(errno));
    return -1;
  }
  memset(c->pageable, 0, c->max); /* fault every page in before timing */
  CHECK_RT(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return 0;
}

static void teardown(cctx *c) {
  if (c->dev) cudaFree(c->dev);
  if (c->pinned) cudaFreeHost(c->pinned);
  free(c->pageable);
  if (c->s1) cudaStreamDestroy(c->s1);
  if (c->s2) cudaStreamDestroy(c->s2);
  if (c->spin.module) cudart_spin_unload(&c->drv, &c->spin);
  (void)cudaGetLastError();
}

int calib_measure(int gpu, int quick, calib_profile *p, char *err, size_t errlen) {
  cudart_info *info = calloc(1, sizeof *info);
  if (!info) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = -1;
  if (cudart_probe(info, err, errlen)) goto out;
  if (gpu < 0 || gpu >= info->ngpus) {
    snprintf(err, errlen, "there is no GPU %d (%d visible)", gpu, info->ngpus);
    goto out;
  }
  const cudart_gpu *g = &info->gpus[gpu];
  memset(p, 0, sizeof *p);
  calib_profile_name(g->name, p->name, sizeof p->name);
  snprintf(p->device_name, sizeof p->device_name, "%s", g->name);
  snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "%s", g->pci_bus_id);
  p->gpu = gpu;
  p->cc_major = g->cc_major;
  p->cc_minor = g->cc_minor;
  p->sms = g->sms;
  p->total_memory = g->total_memory;
  p->driver_version = info->driver_version;
  p->runtime_version = info->runtime_version;
  p->copy_engines_reported = g->copy_engines;
  p->quick = quick;
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(p->measured_at, sizeof p->measured_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
  cctx c;
  memset(&c, 0, sizeof c);
  c.gpu = gpu;
  c.quick = quick;
  c.err = err;
  c.errlen = errlen;
  c.vmm = g->vmm;
  if (setup(&c, p) == 0 && copies(&c, p) == 0 && host_copies(&c, p) == 0 && allocations(&c, p) == 0 &&
      mappings(&c, p) == 0 && launches(&c, p) == 0 && engines(&c, p) == 0)
    rc = 0;
  teardown(&c);
out:
  free(info);
  return rc;
}

/* calibrate.h: a measured device profile: what `memplay calibrate` measures, fits, prints and stores. */
#ifndef REPLAY_CALIBRATE_H
#define REPLAY_CALIBRATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <yajl/yajl_gen.h>

#include "store/store.h"

/*
 * The measuring (calibrate_cuda.c) needs a GPU; everything else here is plain C: fitting a
 * latency and a bandwidth to the copy times and a line to the allocation costs, the profile's
 * JSON (the `params` of a row of the store's device_profiles table: a device profile's fields,
 * docs/devices.md, in base units, and the measurements they came from), the table a person
 * reads, and storing.
 */

#define CALIB_MAX_SIZES 16
/* What the profile gives for the pinned buffer pageable copies are staged through (not measured). */
#define CALIB_ASSUMED_STAGING (UINT64_C(4) << 20)

typedef struct calib_point {
  uint64_t size;  /* bytes */
  double seconds; /* median of the trials, one operation */
  int trials;
} calib_point;

/* A copy kind measured over a range of sizes, and the straight line through it:
 * time(size) = latency_s + size / bytes_per_s. */
typedef struct calib_series {
  const char *key; /* h2d_pinned, h2d_pageable, d2h_pinned, d2h_pageable, d2d */
  calib_point pts[CALIB_MAX_SIZES];
  size_t n;
  double latency_s, bytes_per_s;
} calib_series;

enum { CALIB_H2D_PINNED, CALIB_H2D_PAGEABLE, CALIB_D2H_PINNED, CALIB_D2H_PAGEABLE, CALIB_D2D, CALIB_COPIES };

typedef struct calib_alloc_point {
  uint64_t size;
  double alloc_s, free_s; /* medians */
  int trials;
} calib_alloc_point;

typedef struct calib_profile {
  char name[256];        /* the profile's name: --name, else the device's */
  char device_name[256];
  char pci_bus_id[32];
  int gpu;
  int cc_major, cc_minor, sms;
  uint64_t total_memory, free_memory;
  int driver_version, runtime_version;
  int quick;
  char measured_at[32];  /* UTC, ISO 8601 */
  calib_series copy[CALIB_COPIES];
  calib_alloc_point malloc_pts[CALIB_MAX_SIZES]; /* cudaMalloc / cudaFree */
  size_t nmalloc;
  calib_alloc_point host_pts[CALIB_MAX_SIZES];   /* cudaMallocHost / cudaFreeHost */
  size_t nhost;
  calib_alloc_point map_pts[CALIB_MAX_SIZES];    /* cuMemCreate+cuMemMap+cuMemSetAccess / cuMemUnmap+cuMemRelease */
  size_t nmap;
  uint64_t host_copy_size;
  double host_copy_s;    /* one host-to-host copy (cudaMemcpy) of host_copy_size */
  double launch_s;       /* host time to launch one kernel */
  double kernel_s;       /* time per empty kernel launched back to back, to completion */
  double single_s;       /* one empty kernel launched on an idle stream, to the end of its synchronization */
  double sync_s;         /* cudaStreamSynchronize of an idle stream */
  int launch_queue;      /* launches of long kernels accepted before one blocked the host */
  int launch_queue_tried; /* launches tried (launch_queue == this: none blocked) */
  int copy_engines_reported; /* asyncEngineCount */
  int copy_engines;      /* in use, measured: 2 when opposite-direction copies run at once, else 1 */
  double bidir_speedup;  /* (time h2d + time d2h) / time of both at once */
} calib_profile;

/* Fits time = latency + size / bandwidth to the series by least squares (latency at least 0). */
void calib_fit(calib_series *s);
/* The same for allocation costs: time = base + size * per_byte, for the allocating (0) or the
 * freeing (1) call of each point. */
void calib_cost_line(const calib_alloc_point *pts, size_t n, int freeing, double *base_s, double *per_byte_s);
/* The device profile name a device name gives: "NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3"
 * (letters, digits, '-', '_', '.'). */
void calib_profile_name(const char *device_name, char *out, size_t n);
/* Whether a profile name is valid: letters, digits, '-', '_', '.', 1 to 63 of them. */
int calib_name_ok(const char *name);
/* The profile as the JSON object stored in device_profiles.params. */
void calib_params_json(yajl_gen g, const calib_profile *p);
/* Stores (or replaces) the profile as device profile p->name, source 'calibrated'. */
int calib_store(store *s, const calib_profile *p);
/* The table a person reads. */
void calib_print(FILE *f, const calib_profile *p);
/* Copy-series key names, in CALIB_* order. */
extern const char *const calib_copy_keys[CALIB_COPIES];

/* ---- measuring (calibrate_cuda.c: only in builds with CUDA) -------------------------------- */

/* Measures GPU `gpu` into p (quick: fewer sizes and trials). Returns 0, or -1 with a message. */
int calib_measure(int gpu, int quick, calib_profile *p, char *err, size_t errlen);

#endif

/* calibrate.c: device profiles from measurements: the fit, the JSON, the table, and storing them. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "store/devices_store.h"
#include "io/jsonw.h"

const char *const calib_copy_keys[CALIB_COPIES] = {"h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable", "d2d"};

static void line(const double *x, const double *y, size_t n, double *icept, double *slope);

void calib_fit(calib_series *s) {
  double x[CALIB_MAX_SIZES], y[CALIB_MAX_SIZES], icept, slope;
  size_t n = s->n < CALIB_MAX_SIZES ? s->n : CALIB_MAX_SIZES;
  for (size_t i = 0; i < n; i++) {
    x[i] = (double)s->pts[i].size;
    y[i] = s->pts[i].seconds;
  }
  line(x, y, n, &icept, &slope);
  if (slope <= 0 && n) { /* no growth with size: the largest point's rate */
    slope = x[n - 1] > 0 ? y[n - 1] / x[n - 1] : 0;
    icept = n > 1 ? y[0] : 0;
  }
  s->latency_s = icept;
  s->bytes_per_s = slope > 0 ? 1.0 / slope : 0;
}

/* Least squares through (x, y) points with the intercept kept at 0 or above. */
static void line(const double *x, const double *y, size_t n, double *icept, double *slope) {
  *icept = *slope = 0;
  if (n == 0) return;
  if (n == 1) {
    *slope = x[0] > 0 ? y[0] / x[0] : 0;
    return;
  }
  double sx = 0, sy = 0, sxx = 0, sxy = 0, k = (double)n;
  for (size_t i = 0; i < n; i++) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  double den = k * sxx - sx * sx;
  *slope = den != 0 ? (k * sxy - sx * sy) / den : 0;
  *icept = (sy - *slope * sx) / k;
  if (*slope < 0) { /* no growth with size: a fixed cost */
    *slope = 0;
    *icept = sy / k;
  }
  if (*icept < 0) { /* noise at small sizes: a line through the origin */
    *icept = 0;
    *slope = sxx > 0 ? sxy / sxx : 0;
  }
}

void calib_cost_line(const calib_alloc_point *pts, size_t n, int freeing, double *base_s, double *per_byte_s) {
  double x[CALIB_MAX_SIZES], y[CALIB_MAX_SIZES];
  if (n > CALIB_MAX_SIZES) n = CALIB_MAX_SIZES;
  for (size_t i = 0; i < n; i++) {
    x[i] = (double)pts[i].size;
    y[i] = freeing ? pts[i].free_s : pts[i].alloc_s;
  }
  line(x, y, n, base_s, per_byte_s);
}

void calib_profile_name(const char *device_name, char *out, size_t n) {
  const char *s = device_name;
  if (!strncmp(s, "NVIDIA ", 7)) s += 7;
  size_t o = 0;
  for (; *s && o + 1 < n && o < 63; s++) {
    int ok = isalnum((unsigned char)*s) || *s == '.' || *s == '_' || *s == '-';
    if (ok) out[o++] = *s;
    else if (o && out[o - 1] != '-') out[o++] = '-';
  }
  while (o && out[o - 1] == '-') o--;
  if (!o && n > 4) o = (size_t)snprintf(out, n, "gpu");
  out[o] = 0;
}

int calib_name_ok(const char *name) {
  size_t n = strlen(name);
  if (!n || n > 63) return 0;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.') return 0;
  return 1;
}

static int64_t ns(double seconds) { return (int64_t)llround(seconds * 1e9); }
static double pos(double v) { return v > 0 ? v : 0; }

/* An allocation cost as a profile's base (ns) and per-GiB (ns) fields. */
static void cost_fields(yajl_gen g, const char *base_key, const char *gib_key, const calib_alloc_point *pts, size_t n,
                        int freeing) {
  if (!n) return;
  double base, per_byte;
  calib_cost_line(pts, n, freeing, &base, &per_byte);
  jsonw_kint(g, base_key, ns(base));
  jsonw_kint(g, gib_key, ns(per_byte * (double)(UINT64_C(1) << 30)));
}

static void points(yajl_gen g, const char *key, const calib_alloc_point *pts, size_t n) {
  if (!n) return;
  jsonw_str(g, key);
  yajl_gen_array_open(g);
  for (size_t i = 0; i < n; i++) {
    yajl_gen_map_open(g);
    jsonw_kuint(g, "size", pts[i].size);
    jsonw_kdouble(g, "alloc_us", pts[i].alloc_s * 1e6);
    jsonw_kdouble(g, "free_us", pts[i].free_s * 1e6);
    jsonw_kint(g, "trials", pts[i].trials);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

/* What the device is: its description, the name it matches, its memory and compute capability. */
static void identity_fields(yajl_gen g, const calib_profile *p) {
  char text[160]; /* a profile's text fields hold up to 159 characters */
  snprintf(text, sizeof text, "%.80s, measured by memplay calibrate%s on %.31s", p->device_name,
           p->quick ? " --quick" : "", p->measured_at);
  jsonw_kstr(g, "description", text);
  snprintf(text, sizeof text, "%.159s", p->device_name);
  jsonw_kstr(g, "match", text);
  jsonw_kuint(g, "total_memory", p->total_memory);
  jsonw_kint(g, "cc_major", p->cc_major);
  jsonw_kint(g, "cc_minor", p->cc_minor);
}

/* Copy rates, copy engines and latency. */
static void copy_fields(yajl_gen g, const calib_profile *p) {
  const calib_series *c = p->copy;
  double h2d = c[CALIB_H2D_PINNED].bytes_per_s, d2h = c[CALIB_D2H_PINNED].bytes_per_s;
  /* Pageable copies are staged through pinned memory: a pageable rate above the pinned one is
   * measurement noise, kept in calibration.copies but capped here. */
  double h2dp = c[CALIB_H2D_PAGEABLE].bytes_per_s, d2hp = c[CALIB_D2H_PAGEABLE].bytes_per_s;
  double d2d = c[CALIB_D2D].bytes_per_s;
  jsonw_kdouble(g, "mem_bw", 2 * d2d); /* a device copy reads and writes every byte */
  jsonw_kdouble(g, "h2d_pinned_bw", h2d);
  jsonw_kdouble(g, "d2h_pinned_bw", d2h);
  jsonw_kdouble(g, "h2d_pageable_bw", h2dp < h2d ? h2dp : h2d);
  jsonw_kdouble(g, "d2h_pageable_bw", d2hp < d2h ? d2hp : d2h);
  jsonw_kdouble(g, "d2d_bw", d2d);
  jsonw_kdouble(g, "p2p_bw", h2d);
  jsonw_kdouble(g, "host_copy_bw", p->host_copy_s > 0 ? (double)p->host_copy_size / p->host_copy_s : 0);
  jsonw_kint(g, "copy_engines", p->copy_engines);
  jsonw_kint(g, "copy_latency", ns(pos(c[CALIB_H2D_PINNED].latency_s - p->sync_s)));
  jsonw_kuint(g, "staging_buffer", CALIB_ASSUMED_STAGING);
}

/* Launch and synchronization times, and the costs of allocating, mapping and pinning. */
static void call_fields(yajl_gen g, const calib_profile *p) {
  jsonw_kint(g, "launch_overhead", ns(p->launch_s));
  jsonw_kint(g, "launch_latency", ns(pos(p->single_s - p->launch_s - p->sync_s)));
  jsonw_kint(g, "launch_queue", p->launch_queue);
  jsonw_kint(g, "sync_latency", ns(p->sync_s));
  cost_fields(g, "malloc_base", "malloc_per_gib", p->malloc_pts, p->nmalloc, 0);
  cost_fields(g, "free_base", "free_per_gib", p->malloc_pts, p->nmalloc, 1);
  cost_fields(g, "map_base", "map_per_gib", p->map_pts, p->nmap, 0);
  cost_fields(g, "unmap_base", "unmap_per_gib", p->map_pts, p->nmap, 1);
  cost_fields(g, "pin_base", "pin_per_gib", p->host_pts, p->nhost, 0);
  cost_fields(g, "unpin_base", "unpin_per_gib", p->host_pts, p->nhost, 1);
}

/* Each copy direction measured: its latency, rate and points. */
static void copies_json(yajl_gen g, const calib_series *c) {
  jsonw_str(g, "copies");
  yajl_gen_map_open(g);
  for (int k = 0; k < CALIB_COPIES; k++) {
    const calib_series *sr = &c[k];
    if (!sr->n) continue;
    jsonw_str(g, calib_copy_keys[k]);
    yajl_gen_map_open(g);
    jsonw_kdouble(g, "latency_us", sr->latency_s * 1e6);
    jsonw_kdouble(g, "gbps", sr->bytes_per_s / 1e9);
    jsonw_str(g, "points");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < sr->n; i++) {
      yajl_gen_map_open(g);
      jsonw_kuint(g, "size", sr->pts[i].size);
      jsonw_kdouble(g, "us", sr->pts[i].seconds * 1e6);
      jsonw_kint(g, "trials", sr->pts[i].trials);
      yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
  }
  yajl_gen_map_close(g);
}

/* calibration: how and where it was measured, what it assumed, and the measurements. */
static void calibration_json(yajl_gen g, const calib_profile *p) {
  jsonw_str(g, "calibration");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "tool", "memplay calibrate " MEMPLAY_VERSION);
  jsonw_kstr(g, "measured_at", p->measured_at);
  jsonw_kstr(g, "device_name", p->device_name);
  jsonw_kstr(g, "pci_bus_id", p->pci_bus_id);
  jsonw_kint(g, "gpu", p->gpu);
  jsonw_kint(g, "sms", p->sms);
  jsonw_kint(g, "driver_version", p->driver_version);
  jsonw_kint(g, "runtime_version", p->runtime_version);
  jsonw_kuint(g, "free_memory", p->free_memory);
  jsonw_kbool(g, "quick", p->quick);
  jsonw_kint(g, "copy_engines_reported", p->copy_engines_reported);
  jsonw_kdouble(g, "bidir_speedup", p->bidir_speedup);
  jsonw_kdouble(g, "kernel_us", p->kernel_s * 1e6);
  jsonw_kdouble(g, "single_launch_us", p->single_s * 1e6);
  jsonw_kint(g, "launch_queue_tried", p->launch_queue_tried);
  jsonw_str(g, "assumed");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "p2p_bw", "not measured: the host-to-device pinned rate");
  jsonw_kstr(g, "staging_buffer", "not measured: 4 MiB");
  jsonw_kstr(g, "flops", "not measured: absent");
  if (!p->nmap) jsonw_kstr(g, "map", "not measured (no virtual memory management on this GPU): absent");
  yajl_gen_map_close(g);
  copies_json(g, p->copy);
  points(g, "malloc", p->malloc_pts, p->nmalloc);
  points(g, "malloc_host", p->host_pts, p->nhost);
  points(g, "map", p->map_pts, p->nmap);
  yajl_gen_map_close(g);
}

void calib_params_json(yajl_gen g, const calib_profile *p) {
  /* The fields of a device profile (docs/devices.md), in base units: bytes, bytes per second,
   * nanoseconds, nanoseconds per GiB. What calibrate does not measure is listed under
   * calibration.assumed with the value given. */
  yajl_gen_map_open(g);
  identity_fields(g, p);
  copy_fields(g, p);
  call_fields(g, p);
  calibration_json(g, p);
  yajl_gen_map_close(g);
}

/*
 * Stores the profile as the time model reads it (devices_store.h), keeping the measurements in
 * its params under "calibration". It is checked as a profile first, and replaces any profile
 * whose name differs only in case, as devices_store_put does.
 */
int calib_store(store *s, const calib_profile *p) {
  yajl_gen g = jsonw_mem();
  calib_params_json(g, p);
  size_t len;
  const char *json = jsonw_text(g, &len);
  char now[32], err[512];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int rc = -1;
  sim_device_profile prof; /* read back as devices_store reads a stored row */
  sim_device_defaults(&prof);
  snprintf(prof.name, sizeof prof.name, "%.*s", SIM_DEVICE_NAME_MAX - 1, p->name);
  if (devices_profile_from_json(json, &prof, err, sizeof err) || sim_device_check(&prof, err, sizeof err)) {
    store_seterr_text(s, err);
    goto out;
  }
  sqlite3_stmt *q = store_stmt(s, "DELETE FROM device_profiles WHERE name = :name COLLATE NOCASE");
  if (!q) goto out;
  sqlite3_bind_text(q, 1, p->name, -1, SQLITE_STATIC);
  if (sqlite3_step(q) != SQLITE_DONE) {
    store_fail(s, q, "cannot replace the device profile");
    goto out;
  }
  q = store_stmt(s, "INSERT INTO device_profiles(name, source, total_memory, params, updated_at) "
                    "VALUES (:name, 'calibrated', :total, :params, :now)");
  if (q) {
    sqlite3_bind_text(q, 1, p->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, (int64_t)p->total_memory);
    sqlite3_bind_text(q, 3, json, (int)len, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, now, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_DONE) rc = 0;
    else store_fail(s, q, "cannot store the device profile");
  }
out:
  yajl_gen_free(g);
  return rc;
}

static const char *size_text(char *buf, size_t n, uint64_t v) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && v % 1024 == 0 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, n, "%llu %s", (unsigned long long)v, units[u]);
  return buf;
}

static const char *us_text(char *buf, size_t n, double s) {
  if (s >= 1e-3) snprintf(buf, n, "%.3f ms", s * 1e3);
  else snprintf(buf, n, "%.1f us", s * 1e6);
  return buf;
}

static void cost_row(FILE *f, const char *what, const calib_alloc_point *pts, size_t n, int freeing) {
  if (!n) return;
  double base, per_byte;
  char a[32], b[32], c[32], d[32];
  calib_cost_line(pts, n, freeing, &base, &per_byte);
  fprintf(f, "  %-26s %-11s %-11s %s to %s\n", what, us_text(a, sizeof a, base),
          us_text(b, sizeof b, per_byte * (double)(UINT64_C(1) << 30)), size_text(c, sizeof c, pts[0].size),
          size_text(d, sizeof d, pts[n - 1].size));
}

void calib_print(FILE *f, const calib_profile *p) {
  char a[32], b[32], c[32], d[32];
  fprintf(f, "%s (GPU %d, compute capability %d.%d, %d SMs, %.2f GiB, %.2f GiB free)%s\n", p->device_name, p->gpu,
          p->cc_major, p->cc_minor, p->sms, (double)p->total_memory / (1 << 30), (double)p->free_memory / (1 << 30),
          p->quick ? ", quick" : "");
  fprintf(f, "copies                       latency     bandwidth   sizes\n");
  for (int k = 0; k < CALIB_COPIES; k++) {
    const calib_series *s = &p->copy[k];
    if (!s->n) continue;
    fprintf(f, "  %-26s %-11s %6.2f GB/s  %s to %s\n", calib_copy_keys[k], us_text(a, sizeof a, s->latency_s),
            s->bytes_per_s / 1e9, size_text(b, sizeof b, s->pts[0].size), size_text(c, sizeof c, s->pts[s->n - 1].size));
  }
  if (p->host_copy_s > 0)
    fprintf(f, "  %-26s %-11s %6.2f GB/s  %s\n", "h2h (cudaMemcpy)", "", (double)p->host_copy_size / p->host_copy_s / 1e9,
            size_text(a, sizeof a, p->host_copy_size));
  fprintf(f, "allocation costs             per call    per GiB     sizes\n");
  cost_row(f, "cudaMalloc", p->malloc_pts, p->nmalloc, 0);
  cost_row(f, "cudaFree", p->malloc_pts, p->nmalloc, 1);
  cost_row(f, "cuMemCreate+Map+SetAccess", p->map_pts, p->nmap, 0);
  cost_row(f, "cuMemUnmap+Release", p->map_pts, p->nmap, 1);
  cost_row(f, "cudaMallocHost", p->host_pts, p->nhost, 0);
  cost_row(f, "cudaFreeHost", p->host_pts, p->nhost, 1);
  fprintf(f, "kernels                      launch %s on the host, %s to completion on an idle stream, %s each back to "
             "back; synchronize %s\n",
          us_text(a, sizeof a, p->launch_s), us_text(b, sizeof b, p->single_s), us_text(c, sizeof c, p->kernel_s),
          us_text(d, sizeof d, p->sync_s));
  fprintf(f, "launch queue                 %d launches%s before the host waits\n", p->launch_queue,
          p->launch_queue == p->launch_queue_tried ? " (all that were tried)" : "");
  fprintf(f, "copy engines                 %d in use (opposite directions at once: %.2fx the speed of one after the "
             "other); the device reports %d\n",
          p->copy_engines, p->bidir_speedup, p->copy_engines_reported);
}

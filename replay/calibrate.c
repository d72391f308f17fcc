/* calibrate.c: device profiles from measurements: the fit, the JSON, the table, and storing them. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "jsonw.h"

const char *const calib_copy_keys[CALIB_COPIES] = {"h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable", "d2d"};

void calib_fit(calib_series *s) {
  s->latency_s = 0;
  s->bytes_per_s = 0;
  if (s->n == 0) return;
  if (s->n == 1) {
    s->bytes_per_s = s->pts[0].seconds > 0 ? (double)s->pts[0].size / s->pts[0].seconds : 0;
    return;
  }
  double sx = 0, sy = 0, sxx = 0, sxy = 0, n = (double)s->n;
  for (size_t i = 0; i < s->n; i++) {
    double x = (double)s->pts[i].size, y = s->pts[i].seconds;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double den = n * sxx - sx * sx;
  double slope = den != 0 ? (n * sxy - sx * sy) / den : 0;
  double icept = (sy - slope * sx) / n;
  if (slope <= 0) { /* no growth with size: take the largest point's rate */
    const calib_point *big = &s->pts[s->n - 1];
    slope = big->seconds > 0 && big->size ? big->seconds / (double)big->size : 0;
    icept = s->pts[0].seconds;
  }
  if (icept < 0) {
    /* Noise at small sizes put the line below zero: fit one through the origin instead. */
    icept = 0;
    double num = 0, dd = 0;
    for (size_t i = 0; i < s->n; i++) {
      num += (double)s->pts[i].size * s->pts[i].seconds;
      dd += (double)s->pts[i].size * (double)s->pts[i].size;
    }
    slope = dd > 0 ? num / dd : slope;
  }
  s->latency_s = icept;
  s->bytes_per_s = slope > 0 ? 1.0 / slope : 0;
}

static void kus(yajl_gen g, const char *k, double seconds) { jsonw_kdouble(g, k, seconds * 1e6); }

void calib_params_json(yajl_gen g, const calib_profile *p) {
  char cc[16];
  snprintf(cc, sizeof cc, "%d.%d", p->cc_major, p->cc_minor);
  yajl_gen_map_open(g);
  jsonw_kstr(g, "device_name", p->device_name);
  jsonw_kstr(g, "compute_capability", cc);
  jsonw_kint(g, "sms", p->sms);
  jsonw_kuint(g, "total_memory", p->total_memory);
  for (int c = 0; c < CALIB_COPIES; c++) {
    const calib_series *s = &p->copy[c];
    if (!s->n) continue;
    jsonw_str(g, calib_copy_keys[c]);
    yajl_gen_map_open(g);
    kus(g, "latency_us", s->latency_s);
    jsonw_kdouble(g, "gbps", s->bytes_per_s / 1e9);
    yajl_gen_map_close(g);
  }
  kus(g, "launch_us", p->launch_s);
  kus(g, "kernel_us", p->kernel_s);
  kus(g, "sync_us", p->sync_s);
  jsonw_kint(g, "copy_engines", p->copy_engines);
  jsonw_kint(g, "copy_engines_reported", p->copy_engines_reported);
  for (int which = 0; which < 2; which++) {
    const calib_alloc_point *pts = which ? p->host_pts : p->malloc_pts;
    size_t n = which ? p->nhost : p->nmalloc;
    if (!n) continue;
    jsonw_str(g, which ? "malloc_host" : "malloc");
    yajl_gen_array_open(g);
    for (size_t i = 0; i < n; i++) {
      yajl_gen_map_open(g);
      jsonw_kuint(g, "size", pts[i].size);
      kus(g, which ? "alloc_us" : "malloc_us", pts[i].alloc_s);
      kus(g, "free_us", pts[i].free_s);
      yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
  }
  jsonw_str(g, "calibration");
  yajl_gen_map_open(g);
  jsonw_kstr(g, "tool", "memplay calibrate " MEMPLAY_VERSION);
  jsonw_kstr(g, "measured_at", p->measured_at);
  jsonw_kstr(g, "pci_bus_id", p->pci_bus_id);
  jsonw_kint(g, "gpu", p->gpu);
  jsonw_kint(g, "driver_version", p->driver_version);
  jsonw_kint(g, "runtime_version", p->runtime_version);
  jsonw_kuint(g, "free_memory", p->free_memory);
  jsonw_kbool(g, "quick", p->quick);
  jsonw_kdouble(g, "bidir_speedup", p->bidir_speedup);
  jsonw_str(g, "copies");
  yajl_gen_map_open(g);
  for (int c = 0; c < CALIB_COPIES; c++) {
    const calib_series *s = &p->copy[c];
    if (!s->n) continue;
    jsonw_str(g, calib_copy_keys[c]);
    yajl_gen_array_open(g);
    for (size_t i = 0; i < s->n; i++) {
      yajl_gen_map_open(g);
      jsonw_kuint(g, "size", s->pts[i].size);
      kus(g, "us", s->pts[i].seconds);
      jsonw_kint(g, "trials", s->pts[i].trials);
      yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
  }
  yajl_gen_map_close(g);
  yajl_gen_map_close(g);
  yajl_gen_map_close(g);
}

int calib_store(store *s, const calib_profile *p) {
  yajl_gen g = jsonw_mem();
  calib_params_json(g, p);
  size_t len;
  const char *json = jsonw_text(g, &len);
  char now[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int rc = -1;
  sqlite3_stmt *q = store_stmt(s, "INSERT INTO device_profiles(name, source, total_memory, params, updated_at) "
                                  "VALUES (:name, 'calibrated', :total, :params, :now) "
                                  "ON CONFLICT(name) DO UPDATE SET source = excluded.source, "
                                  "total_memory = excluded.total_memory, params = excluded.params, "
                                  "updated_at = excluded.updated_at");
  if (q) {
    sqlite3_bind_text(q, 1, p->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, (int64_t)p->total_memory);
    sqlite3_bind_text(q, 3, json, (int)len, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, now, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_DONE) rc = 0;
    else store_fail(s, q, "cannot store the device profile");
  }
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

void calib_print(FILE *f, const calib_profile *p) {
  char a[32], b[32], c[32];
  fprintf(f, "%s (GPU %d, compute capability %d.%d, %d SMs, %.2f GiB, %.2f GiB free)%s\n", p->device_name, p->gpu,
          p->cc_major, p->cc_minor, p->sms, (double)p->total_memory / (1 << 30), (double)p->free_memory / (1 << 30),
          p->quick ? ", quick" : "");
  fprintf(f, "copies             latency     bandwidth   sizes\n");
  for (int k = 0; k < CALIB_COPIES; k++) {
    const calib_series *s = &p->copy[k];
    if (!s->n) continue;
    fprintf(f, "  %-16s %-11s %6.2f GB/s  %s to %s\n", s->key ? s->key : calib_copy_keys[k],
            us_text(a, sizeof a, s->latency_s), s->bytes_per_s / 1e9, size_text(b, sizeof b, s->pts[0].size),
            size_text(c, sizeof c, s->pts[s->n - 1].size));
  }
  if (p->nmalloc) fprintf(f, "cudaMalloc / cudaFree\n");
  for (size_t i = 0; i < p->nmalloc; i++)
    fprintf(f, "  %-10s malloc %-11s free %s\n", size_text(a, sizeof a, p->malloc_pts[i].size),
            us_text(b, sizeof b, p->malloc_pts[i].alloc_s), us_text(c, sizeof c, p->malloc_pts[i].free_s));
  if (p->nhost) fprintf(f, "cudaMallocHost / cudaFreeHost (pinned host memory)\n");
  for (size_t i = 0; i < p->nhost; i++)
    fprintf(f, "  %-10s alloc  %-11s free %s\n", size_text(a, sizeof a, p->host_pts[i].size),
            us_text(b, sizeof b, p->host_pts[i].alloc_s), us_text(c, sizeof c, p->host_pts[i].free_s));
  fprintf(f, "kernels            launch %s (host), %s per kernel back to back; synchronize %s\n",
          us_text(a, sizeof a, p->launch_s), us_text(b, sizeof b, p->kernel_s), us_text(c, sizeof c, p->sync_s));
  fprintf(f, "copy engines       %d in use (opposite directions at once: %.2fx the speed of one after the other); "
             "the device reports %d\n",
          p->copy_engines, p->bidir_speedup, p->copy_engines_reported);
}

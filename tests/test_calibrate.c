/* test_calibrate.c: device profiles from measurements, without a GPU: the fit, the JSON, storing, printing. */
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "cuda/calibrate.h"
#include "io/jsonw.h"
#include "test.h"

int test_failures;

static void series(calib_series *s, double latency, double bps, double noise) {
  s->n = 0;
  int k = 0;
  for (uint64_t n = 4096; n <= (UINT64_C(256) << 20); n *= 4, k++) {
    double jitter = (k % 2 ? 1 : -1) * noise;
    s->pts[s->n++] = (calib_point){n, latency + (double)n / bps + jitter, 5};
  }
}

static void test_fit(void) {
  calib_series s = {.key = "h2d_pinned"};
  series(&s, 10e-6, 25e9, 0);
  calib_fit(&s);
  CHECK_NEAR(s.latency_s, 10e-6, 1e-9);
  CHECK_NEAR(s.bytes_per_s / 1e9, 25.0, 1e-6);
  /* Small jitter moves the fit only a little. */
  series(&s, 10e-6, 25e9, 0.5e-6);
  calib_fit(&s);
  CHECK_NEAR(s.latency_s, 10e-6, 1e-6);
  CHECK_NEAR(s.bytes_per_s / 1e9, 25.0, 0.1);
  /* A line that would cross below zero is fitted through the origin instead. */
  s.n = 2;
  s.pts[0] = (calib_point){1000, 1e-9, 3};
  s.pts[1] = (calib_point){1000000, 100e-6, 3};
  calib_fit(&s);
  CHECK(s.latency_s == 0);
  CHECK_NEAR(s.bytes_per_s, 1e10, 1e7);
  /* One point: its rate. */
  s.n = 1;
  s.pts[0] = (calib_point){1 << 20, 1e-4, 3};
  calib_fit(&s);
  CHECK_NEAR(s.bytes_per_s, (double)(1 << 20) / 1e-4, 1);
  s.n = 0;
  calib_fit(&s);
  CHECK(s.bytes_per_s == 0);
}

static calib_profile *profile(void) {
  calib_profile *p = calloc(1, sizeof *p);
  snprintf(p->name, sizeof p->name, "NVIDIA Test GPU");
  snprintf(p->device_name, sizeof p->device_name, "NVIDIA Test GPU");
  snprintf(p->measured_at, sizeof p->measured_at, "2026-01-01T00:00:00Z");
  p->cc_major = 9;
  p->sms = 132;
  p->total_memory = UINT64_C(80) << 30;
  p->driver_version = 13000;
  p->runtime_version = 13000;
  const double bw[CALIB_COPIES] = {25e9, 10e9, 26e9, 8e9, 1500e9};
  for (int c = 0; c < CALIB_COPIES; c++) {
    p->copy[c].key = calib_copy_keys[c];
    series(&p->copy[c], 8e-6, bw[c], 0);
    calib_fit(&p->copy[c]);
  }
  /* cudaMalloc: 10 us + 500 us per GiB; cudaFree: 20 us + 100 us per GiB */
  const uint64_t sizes[] = {512, 2 << 20, 256 << 20, UINT64_C(1) << 30};
  for (int i = 0; i < 4; i++) {
    double gib = (double)sizes[i] / (double)(UINT64_C(1) << 30);
    p->malloc_pts[p->nmalloc++] = (calib_alloc_point){sizes[i], 10e-6 + 500e-6 * gib, 20e-6 + 100e-6 * gib, 11};
  }
  p->host_pts[p->nhost++] = (calib_alloc_point){1 << 20, 300e-6, 200e-6, 5};
  p->host_copy_size = 128 << 20;
  p->host_copy_s = (double)(128 << 20) / 12e9;
  p->launch_s = 2.5e-6;
  p->kernel_s = 3e-6;
  p->single_s = 14e-6;
  p->sync_s = 4e-6;
  p->launch_queue = 1024;
  p->launch_queue_tried = 1100;
  p->copy_engines = 2;
  p->copy_engines_reported = 3;
  p->bidir_speedup = 1.9;
  return p;
}

static double num(yajl_val root, const char **path) {
  yajl_val v = yajl_tree_get(root, path, yajl_t_number);
  return v ? YAJL_GET_DOUBLE(v) : -1;
}

static void test_json(void) {
  calib_profile *p = profile();
  yajl_gen g = jsonw_mem();
  calib_params_json(g, p);
  char errbuf[256];
  yajl_val root = yajl_tree_parse(jsonw_text(g, NULL), errbuf, sizeof errbuf);
  CHECK(root != NULL);
  /* A device profile's fields, in base units (docs/devices.md). */
  CHECK_NEAR(num(root, (const char *[]){"h2d_pinned_bw", NULL}), 25e9, 1e3);
  CHECK_NEAR(num(root, (const char *[]){"d2h_pageable_bw", NULL}), 8e9, 1e3);
  CHECK_NEAR(num(root, (const char *[]){"h2d_pageable_bw", NULL}), 10e9, 1e3);
  CHECK_NEAR(num(root, (const char *[]){"d2d_bw", NULL}), 1500e9, 1e6);
  CHECK_NEAR(num(root, (const char *[]){"mem_bw", NULL}), 3000e9, 1e6);
  CHECK_NEAR(num(root, (const char *[]){"host_copy_bw", NULL}), 12e9, 1e3);
  CHECK_NEAR(num(root, (const char *[]){"copy_latency", NULL}), 4000, 1); /* 8 us less the 4 us synchronization */
  CHECK_NEAR(num(root, (const char *[]){"launch_overhead", NULL}), 2500, 0);
  CHECK_NEAR(num(root, (const char *[]){"launch_latency", NULL}), 7500, 0); /* 14 - 2.5 - 4 us */
  CHECK_NEAR(num(root, (const char *[]){"sync_latency", NULL}), 4000, 0);
  CHECK_NEAR(num(root, (const char *[]){"launch_queue", NULL}), 1024, 0);
  CHECK_NEAR(num(root, (const char *[]){"malloc_base", NULL}), 10000, 2);
  CHECK_NEAR(num(root, (const char *[]){"malloc_per_gib", NULL}), 500000, 2);
  CHECK_NEAR(num(root, (const char *[]){"free_base", NULL}), 20000, 2);
  CHECK_NEAR(num(root, (const char *[]){"free_per_gib", NULL}), 100000, 2);
  CHECK_NEAR(num(root, (const char *[]){"pin_base", NULL}), 0, 0); /* one size: a line through the origin */
  CHECK_NEAR(num(root, (const char *[]){"copy_engines", NULL}), 2, 0);
  CHECK_NEAR(num(root, (const char *[]){"total_memory", NULL}), (double)(UINT64_C(80) << 30), 0);
  CHECK_NEAR(num(root, (const char *[]){"cc_major", NULL}), 9, 0);
  CHECK(num(root, (const char *[]){"p2p_bw", NULL}) > 0);
  CHECK(num(root, (const char *[]){"staging_buffer", NULL}) > 0);
  CHECK(yajl_tree_get(root, (const char *[]){"map_base", NULL}, yajl_t_number) == NULL); /* not measured */
  yajl_val match = yajl_tree_get(root, (const char *[]){"match", NULL}, yajl_t_string);
  CHECK_STR(match ? match->u.string : NULL, "NVIDIA Test GPU");
  /* ... and what they were computed from. */
  yajl_val m = yajl_tree_get(root, (const char *[]){"calibration", "malloc", NULL}, yajl_t_array);
  CHECK(m && YAJL_GET_ARRAY(m)->len == 4);
  yajl_val pts = yajl_tree_get(root, (const char *[]){"calibration", "copies", "h2d_pinned", "points", NULL}, yajl_t_array);
  CHECK(pts && YAJL_GET_ARRAY(pts)->len == 9);
  CHECK_NEAR(num(root, (const char *[]){"calibration", "copies", "d2h_pageable", "gbps", NULL}), 8.0, 1e-6);
  yajl_val assumed = yajl_tree_get(root, (const char *[]){"calibration", "assumed", "p2p_bw", NULL}, yajl_t_string);
  CHECK(assumed != NULL);
  yajl_tree_free(root);
  yajl_gen_free(g);
  free(p);
}

static void test_names(void) {
  char n[64];
  calib_profile_name("NVIDIA H100 80GB HBM3", n, sizeof n);
  CHECK_STR(n, "H100-80GB-HBM3");
  calib_profile_name("Tesla V100-SXM2-32GB", n, sizeof n);
  CHECK_STR(n, "Tesla-V100-SXM2-32GB");
  calib_profile_name("NVIDIA A100-SXM4-80GB (MIG 1g.10gb)", n, sizeof n);
  CHECK_STR(n, "A100-SXM4-80GB-MIG-1g.10gb");
  calib_profile_name("  ", n, sizeof n);
  CHECK_STR(n, "gpu");
  CHECK(calib_name_ok("lab-a100_2.x"));
  CHECK(!calib_name_ok("has space"));
  CHECK(!calib_name_ok(""));
}

static void test_store_and_print(void) {
  char dir[] = "/tmp/memplay-test-calibrate-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char db[256];
  snprintf(db, sizeof db, "%s/t.db", dir);
  store *s;
  char err[256];
  CHECK_EQ(store_open(&s, db, STORE_CREATE, err, sizeof err), 0);
  calib_profile *p = profile();
  CHECK_EQ(calib_store(s, p), -1); /* a name that is not a valid profile name is refused */
  CHECK(strstr(store_error(s), "is not valid") != NULL);
  snprintf(p->name, sizeof p->name, "NVIDIA-Test-GPU");
  CHECK_EQ(calib_store(s, p), 0);
  p->copy_engines = 1; /* calibrating again replaces the profile */
  CHECK_EQ(calib_store(s, p), 0);
  sqlite3_stmt *q = store_stmt(s, "SELECT count(*), min(source), min(total_memory), "
                                  "min(json_extract(params, '$.copy_engines')) FROM device_profiles "
                                  "WHERE name = :n COLLATE NOCASE");
  sqlite3_bind_text(q, 1, p->name, -1, SQLITE_STATIC);
  CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
  CHECK_EQ(sqlite3_column_int64(q, 0), 1);
  CHECK_STR((const char *)sqlite3_column_text(q, 1), "calibrated");
  CHECK_EQ(sqlite3_column_int64(q, 2), (int64_t)(UINT64_C(80) << 30));
  CHECK_EQ(sqlite3_column_int64(q, 3), 1);
  store_close(s);

  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  calib_print(f, p);
  fclose(f);
  CHECK(strstr(text, "h2d_pinned") != NULL);
  CHECK(strstr(text, " 25.00 GB/s") != NULL);
  CHECK(strstr(text, "512 B to 1 GiB") != NULL);
  CHECK(strstr(text, "500.0 us") != NULL); /* cudaMalloc per GiB */
  CHECK(strstr(text, "1024 launches before the host waits") != NULL);
  CHECK(strstr(text, "the device reports 3") != NULL);
  free(text);
  free(p);
  store_remove_files(db);
  rmdir(dir);
}

int main(void) {
  RUN(test_fit);
  RUN(test_json);
  RUN(test_names);
  RUN(test_store_and_print);
  TEST_MAIN_END();
}

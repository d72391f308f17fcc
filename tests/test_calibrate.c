/* test_calibrate.c: device profiles from measurements, without a GPU: the fit, the JSON, storing, printing. */
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "../replay/calibrate.h"
#include "../replay/jsonw.h"
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
  p->malloc_pts[p->nmalloc++] = (calib_alloc_point){512, 3e-6, 2e-6, 11};
  p->malloc_pts[p->nmalloc++] = (calib_alloc_point){UINT64_C(1) << 30, 900e-6, 400e-6, 11};
  p->host_pts[p->nhost++] = (calib_alloc_point){1 << 20, 300e-6, 200e-6, 5};
  p->launch_s = 2.5e-6;
  p->kernel_s = 3e-6;
  p->sync_s = 4e-6;
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
  CHECK_NEAR(num(root, (const char *[]){"h2d_pinned", "gbps", NULL}), 25.0, 1e-6);
  CHECK_NEAR(num(root, (const char *[]){"d2h_pageable", "gbps", NULL}), 8.0, 1e-6);
  CHECK_NEAR(num(root, (const char *[]){"d2d", "latency_us", NULL}), 8.0, 1e-3);
  CHECK_NEAR(num(root, (const char *[]){"launch_us", NULL}), 2.5, 1e-9);
  CHECK_NEAR(num(root, (const char *[]){"copy_engines", NULL}), 2, 0);
  CHECK_NEAR(num(root, (const char *[]){"total_memory", NULL}), (double)(UINT64_C(80) << 30), 0);
  yajl_val m = yajl_tree_get(root, (const char *[]){"malloc", NULL}, yajl_t_array);
  CHECK(m && YAJL_GET_ARRAY(m)->len == 2);
  yajl_val pts = yajl_tree_get(root, (const char *[]){"calibration", "copies", "h2d_pinned", NULL}, yajl_t_array);
  CHECK(pts && YAJL_GET_ARRAY(pts)->len == 9);
  yajl_val cc = yajl_tree_get(root, (const char *[]){"compute_capability", NULL}, yajl_t_string);
  CHECK_STR(cc ? cc->u.string : NULL, "9.0");
  yajl_tree_free(root);
  yajl_gen_free(g);
  free(p);
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
  CHECK_EQ(calib_store(s, p), 0);
  p->copy_engines = 1; /* calibrating again replaces the profile */
  CHECK_EQ(calib_store(s, p), 0);
  sqlite3_stmt *q = store_stmt(s, "SELECT count(*), min(source), min(total_memory), "
                                  "min(json_extract(params, '$.copy_engines')) FROM device_profiles WHERE name = :n");
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
  CHECK(strstr(text, "1 GiB") != NULL);
  CHECK(strstr(text, "the device reports 3") != NULL);
  free(text);
  free(p);
  char side[300];
  unlink(db);
  snprintf(side, sizeof side, "%s-wal", db);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", db);
  unlink(side);
  rmdir(dir);
}

int main(void) {
  RUN(test_fit);
  RUN(test_json);
  RUN(test_store_and_print);
  TEST_MAIN_END();
}

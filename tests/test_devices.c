/* test_devices.c: device profiles: the built-ins, figures with units, matching trace names, the store. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda/calibrate.h"
#include "store/devices_store.h"
#include "io/jsonw.h"
#include "test.h"

int test_failures;

static void test_builtins(void) {
  static const char *const want[] = {"V100-16GB", "V100-32GB", "A100-40GB", "A100-80GB", "H100",
                                     "H200",      "L4",        "T4",        "RTX3090",   "RTX4090"};
  CHECK_EQ(sim_builtin_ndevices, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const sim_device_profile *p = sim_device_builtin(want[i]);
    CHECK(p != NULL);
    if (!p) continue;
    char err[256];
    if (sim_device_check(p, err, sizeof err)) {
      fprintf(stderr, "%s: %s\n", want[i], err);
      test_failures++;
    }
    CHECK(p->cc_major >= 7);
    CHECK(p->copy_engines >= 2);
    CHECK(p->fp32_flops > 1e12);
    CHECK(p->h2d_pageable_bw < p->h2d_pinned_bw);
    CHECK(p->staging_buffer > 0);
  }
  CHECK(sim_device_builtin("a100-80gb") == sim_device_builtin("A100-80GB"));
  CHECK(sim_device_builtin("A100") == NULL);
  CHECK_EQ(sim_device_builtin("V100-32GB")->total_memory, UINT64_C(34089730048));
  CHECK_EQ(sim_device_builtin("H200")->cc_major, 9);
  CHECK_EQ(sim_device_builtin("T4")->cc_minor, 5);
  CHECK_EQ(sim_device_builtin("V100-16GB")->bf16_flops, 0);
}

static void test_units(void) {
  sim_device_profile p;
  sim_device_defaults(&p);
  char err[256];
  CHECK_EQ(sim_device_set(&p, "h2d_pinned_bw", "25GB/s", err, sizeof err), 0);
  CHECK_NEAR(p.h2d_pinned_bw, 25e9, 1);
  CHECK_EQ(sim_device_set(&p, "mem_bw", "1.5TB/s", err, sizeof err), 0);
  CHECK_NEAR(p.mem_bw, 1.5e12, 1);
  CHECK_EQ(sim_device_set(&p, "d2h_pinned_bw", "12GiB/s", err, sizeof err), 0);
  CHECK_NEAR(p.d2h_pinned_bw, 12.0 * 1073741824.0, 1);
  CHECK_EQ(sim_device_set(&p, "fp32_flops", "19.5TFLOPS", err, sizeof err), 0);
  CHECK_NEAR(p.fp32_flops, 19.5e12, 1);
  CHECK_EQ(sim_device_set(&p, "bf16_flops", "312T", err, sizeof err), 0);
  CHECK_NEAR(p.bf16_flops, 312e12, 1);
  CHECK_EQ(sim_device_set(&p, "launch_latency", "5us", err, sizeof err), 0);
  CHECK_EQ(p.launch_latency, 5000);
  CHECK_EQ(sim_device_set(&p, "pin_base", "1.5ms", err, sizeof err), 0);
  CHECK_EQ(p.pin_base, 1500000);
  CHECK_EQ(sim_device_set(&p, "malloc_per_gib", "32ms", err, sizeof err), 0);
  CHECK_EQ(p.malloc_per_gib, 32000000);
  CHECK_EQ(sim_device_set(&p, "total_memory", "80GB", err, sizeof err), 0);
  CHECK_EQ(p.total_memory, UINT64_C(80000000000));
  CHECK_EQ(sim_device_set(&p, "staging_buffer", "4MiB", err, sizeof err), 0);
  CHECK_EQ(p.staging_buffer, UINT64_C(4) << 20);
  CHECK_EQ(sim_device_set(&p, "copy_engines", "3", err, sizeof err), 0);
  CHECK_EQ(p.copy_engines, 3);
  CHECK_EQ(sim_device_set(&p, "description", "a card", err, sizeof err), 0);
  CHECK_STR(p.description, "a card");
  /* errors name what was wrong */
  CHECK_EQ(sim_device_set(&p, "h2d_pinned_bw", "fast", err, sizeof err), -1);
  CHECK(strstr(err, "h2d_pinned_bw") && strstr(err, "fast"));
  CHECK_EQ(sim_device_set(&p, "launch_latency", "5 parsecs", err, sizeof err), -1);
  CHECK_EQ(sim_device_set(&p, "copy_engines", "-1", err, sizeof err), -1);
  CHECK_EQ(sim_device_set(&p, "warp_drive", "9", err, sizeof err), -1);
  CHECK(strstr(err, "warp_drive") != NULL);
  CHECK_NEAR(p.h2d_pinned_bw, 25e9, 1); /* unchanged by the failures */
  /* formatting with units */
  char buf[64];
  sim_device_format(&p, sim_device_field_find("h2d_pinned_bw"), buf, sizeof buf);
  CHECK_STR(buf, "25.00 GB/s");
  sim_device_format(&p, sim_device_field_find("launch_latency"), buf, sizeof buf);
  CHECK_STR(buf, "5.00 us");
  sim_device_format(&p, sim_device_field_find("malloc_per_gib"), buf, sizeof buf);
  CHECK_STR(buf, "32.000 ms per GiB");
  /* checks */
  sim_device_profile q = *sim_device_builtin("L4");
  CHECK_EQ(sim_device_check(&q, err, sizeof err), 0);
  q.h2d_pageable_bw = q.h2d_pinned_bw * 2;
  CHECK_EQ(sim_device_check(&q, err, sizeof err), -1);
  q = *sim_device_builtin("L4");
  q.copy_engines = 0;
  CHECK_EQ(sim_device_check(&q, err, sizeof err), -1);
  CHECK(strstr(err, "copy_engines") != NULL);
  CHECK(!sim_device_name_ok("bad name"));
  CHECK(sim_device_name_ok("my-A100_2.0"));
}

static int best(const char *name, uint64_t memory, const char **out) {
  int score = 0;
  *out = NULL;
  for (size_t i = 0; i < sim_builtin_ndevices; i++) {
    int s = sim_device_match(&sim_builtin_devices[i], name, memory);
    if (s > score) score = s, *out = sim_builtin_devices[i].name;
  }
  return score;
}

static void test_matching(void) {
  const char *n;
  CHECK(best("NVIDIA A100-SXM4-80GB", UINT64_C(84990623744), &n) > 0);
  CHECK_STR(n, "A100-80GB");
  CHECK(best("NVIDIA A100-SXM4-40GB", 0, &n) > 0);
  CHECK_STR(n, "A100-40GB");
  CHECK(best("Tesla V100-SXM2-32GB", UINT64_C(34089730048), &n) > 0);
  CHECK_STR(n, "V100-32GB");
  CHECK(best("Tesla V100-SXM2-16GB", 0, &n) > 0);
  CHECK_STR(n, "V100-16GB");
  CHECK(best("NVIDIA GeForce RTX 4090", 0, &n) > 0);
  CHECK_STR(n, "RTX4090");
  CHECK(best("RTX4090", 0, &n) > 0);
  CHECK_STR(n, "RTX4090");
  CHECK(best("Tesla T4", 0, &n) > 0);
  CHECK_STR(n, "T4");
  CHECK(best("NVIDIA H100 80GB HBM3", 0, &n) > 0);
  CHECK_STR(n, "H100");
  CHECK(best("H200", 0, &n) > 0);
  CHECK_STR(n, "H200");
  CHECK(best("NVIDIA L4", 0, &n) > 0);
  CHECK_STR(n, "L4");
  CHECK_EQ(best("NVIDIA L40S", 0, &n), 0); /* not an L4 */
  CHECK_EQ(best("AMD Instinct MI300X", 0, &n), 0);
  CHECK_EQ(best("", 0, &n), 0);
  CHECK_EQ(sim_device_match(sim_device_builtin("T4"), "NVIDIA GeForce RTX 4090", 0), 0);
}

static void test_json_round_trip(void) {
  for (size_t i = 0; i < sim_builtin_ndevices; i++) {
    const sim_device_profile *b = &sim_builtin_devices[i];
    yajl_gen g = jsonw_mem();
    yajl_gen_map_open(g);
    devices_profile_json(g, b);
    yajl_gen_map_close(g);
    size_t len;
    const char *text = jsonw_text(g, &len);
    sim_device_profile p;
    sim_device_defaults(&p);
    char err[256];
    CHECK_EQ(devices_profile_from_json(text, &p, err, sizeof err), 0);
    for (size_t k = 0; k < sim_device_nfields; k++) {
      const sim_device_field *f = &sim_device_fields[k];
      if (f->kind == SIM_DF_TEXT) {
        CHECK_STR(sim_device_get_text(&p, f), sim_device_get_text(b, f));
      } else {
        double x = sim_device_get_number(&p, f), y = sim_device_get_number(b, f);
        if (!(fabs(x - y) <= 1e-8 * fabs(y))) {
          fprintf(stderr, "%s.%s: %g != %g\n", b->name, f->key, x, y);
          test_failures++;
        }
      }
    }
    yajl_gen_free(g);
  }
  sim_device_profile p;
  sim_device_defaults(&p);
  char err[256];
  CHECK_EQ(devices_profile_from_json("[1]", &p, err, sizeof err), -1);
  CHECK_EQ(devices_profile_from_json("{\"mem_bw\":\"fast\"}", &p, err, sizeof err), -1);
  CHECK(strstr(err, "mem_bw") != NULL);
  CHECK_EQ(devices_profile_from_json("{\"future_field\":1,\"mem_bw\":5e11}", &p, err, sizeof err), 0);
  CHECK_NEAR(p.mem_bw, 5e11, 1);
}

static void test_store(void) {
  char dir[] = "/tmp/memplay-devices-XXXXXX", path[128], err[1024];
  if (!mkdtemp(dir)) {
    test_failures++;
    return;
  }
  snprintf(path, sizeof path, "%s/t.db", dir);
  store *s;
  if (store_open(&s, path, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    test_failures++;
    return;
  }
  devices_entry e;
  /* built-ins are visible before the store is seeded, by any case */
  CHECK_EQ(devices_store_get(s, "a100-80gb", &e, err, sizeof err), 0);
  CHECK_STR(e.p.name, "A100-80GB");
  CHECK_STR(e.source, "builtin");
  CHECK_EQ(devices_store_get(s, "nope", &e, err, sizeof err), 1);
  CHECK_EQ(devices_store_seed(s, err, sizeof err), 0);
  sqlite3_stmt *q;
  sqlite3_prepare_v2(store_db(s), "SELECT count(*) FROM device_profiles WHERE source = 'builtin'", -1, &q, NULL);
  CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
  CHECK_EQ(sqlite3_column_int64(q, 0), (int64_t)sim_builtin_ndevices);
  sqlite3_finalize(q);
  CHECK_EQ(devices_store_seed(s, err, sizeof err), 0); /* again: nothing changes */
  /* a user profile from a built-in */
  CHECK_EQ(devices_store_get(s, "A100-80GB", &e, err, sizeof err), 0);
  snprintf(e.p.name, sizeof e.p.name, "my-a100");
  e.p.match[0] = 0;
  CHECK_EQ(sim_device_set(&e.p, "h2d_pinned_bw", "12GB/s", err, sizeof err), 0);
  CHECK_EQ(devices_store_put(s, &e.p, "user", err, sizeof err), -1); /* now below the pageable rate */
  CHECK(strstr(err, "pageable") != NULL);
  CHECK_EQ(sim_device_set(&e.p, "h2d_pageable_bw", "6GB/s", err, sizeof err), 0);
  CHECK_EQ(devices_store_put(s, &e.p, "user", err, sizeof err), 0);
  CHECK_EQ(devices_store_get(s, "MY-A100", &e, err, sizeof err), 0);
  CHECK_STR(e.source, "user");
  CHECK_NEAR(e.p.h2d_pinned_bw, 12e9, 1);
  CHECK(e.updated_at[0] != 0);
  CHECK_EQ(devices_store_put(s, &e.p, "guessed", err, sizeof err), -1);
  e.p.copy_engines = 0;
  CHECK_EQ(devices_store_put(s, &e.p, "user", err, sizeof err), -1); /* checked */
  /* editing a built-in makes it a user profile; reset gives it back */
  CHECK_EQ(devices_store_get(s, "T4", &e, err, sizeof err), 0);
  e.p.h2d_pinned_bw = 5e9;
  CHECK_EQ(devices_store_put(s, &e.p, "user", err, sizeof err), 0);
  CHECK_EQ(devices_store_get(s, "T4", &e, err, sizeof err), 0);
  CHECK_STR(e.source, "user");
  CHECK_NEAR(e.p.h2d_pinned_bw, 5e9, 1);
  CHECK_EQ(devices_store_seed(s, err, sizeof err), 0); /* seeding keeps the edit */
  CHECK_EQ(devices_store_get(s, "T4", &e, err, sizeof err), 0);
  CHECK_STR(e.source, "user");
  CHECK_EQ(devices_store_reset(s, "T4", err, sizeof err), 0);
  CHECK_EQ(devices_store_get(s, "T4", &e, err, sizeof err), 0);
  CHECK_STR(e.source, "builtin");
  CHECK_NEAR(e.p.h2d_pinned_bw, sim_device_builtin("T4")->h2d_pinned_bw, 1);
  CHECK_EQ(devices_store_reset(s, "my-a100", err, sizeof err), 1);
  /* deleting */
  CHECK_EQ(devices_store_delete(s, "H100", err, sizeof err), -1);
  CHECK(strstr(err, "built-in") != NULL);
  CHECK_EQ(devices_store_delete(s, "my-a100", err, sizeof err), 0);
  CHECK_EQ(devices_store_delete(s, "my-a100", err, sizeof err), 1);
  /* matching a recorded device: the built-in, then a calibrated profile that claims it */
  CHECK_EQ(devices_store_match(s, "NVIDIA A100-SXM4-80GB", UINT64_C(84990623744), &e, err, sizeof err), 0);
  CHECK_STR(e.p.name, "A100-80GB");
  CHECK_EQ(devices_store_match(s, "Radeon", 0, &e, err, sizeof err), 1);
  CHECK_EQ(devices_store_match(s, NULL, 0, &e, err, sizeof err), 1);
  sim_device_profile cal = *sim_device_builtin("A100-80GB");
  snprintf(cal.name, sizeof cal.name, "lab-a100");
  cal.h2d_pinned_bw = 11.9e9;
  cal.h2d_pageable_bw = 4.3e9;
  CHECK_EQ(devices_store_put(s, &cal, "calibrated", err, sizeof err), 0);
  CHECK_EQ(devices_store_match(s, "NVIDIA A100-SXM4-80GB", UINT64_C(84990623744), &e, err, sizeof err), 0);
  CHECK_STR(e.p.name, "lab-a100");
  CHECK_STR(e.source, "calibrated");
  /* a stored row that is not JSON is an error that names the table and the profile */
  sqlite3_exec(store_db(s), "UPDATE device_profiles SET params = 'oops' WHERE name = 'lab-a100'", NULL, NULL, NULL);
  CHECK_EQ(devices_store_get(s, "lab-a100", &e, err, sizeof err), -1);
  CHECK(strstr(err, "device_profiles") && strstr(err, "lab-a100"));
  store_close(s);
  unlink(path);
  char side[160];
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  rmdir(dir);
}

/* What `memplay calibrate` stores is a profile the time model reads (calibrate.c writes the
 * fields of sim/devices.h; the measurements beside them are kept and ignored). */
static void test_calibrated_profile(void) {
  char dir[] = "/tmp/memplay-devcal-XXXXXX", path[128], err[1024];
  if (!mkdtemp(dir)) {
    test_failures++;
    return;
  }
  snprintf(path, sizeof path, "%s/t.db", dir);
  store *s;
  if (store_open(&s, path, STORE_CREATE, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    test_failures++;
    return;
  }
  calib_profile *p = calloc(1, sizeof *p);
  snprintf(p->name, sizeof p->name, "lab-h100");
  snprintf(p->device_name, sizeof p->device_name, "NVIDIA H100 80GB HBM3");
  snprintf(p->measured_at, sizeof p->measured_at, "2026-01-01T00:00:00Z");
  p->cc_major = 9;
  p->total_memory = UINT64_C(85045477376);
  const double bw[CALIB_COPIES] = {50e9, 20e9, 48e9, 18e9, 1500e9};
  for (int c = 0; c < CALIB_COPIES; c++) {
    p->copy[c].key = calib_copy_keys[c];
    p->copy[c].latency_s = 10e-6;
    p->copy[c].bytes_per_s = bw[c];
  }
  p->host_copy_size = 1 << 20;
  p->host_copy_s = 1e-4;
  p->launch_s = 3e-6;
  p->single_s = 15e-6;
  p->sync_s = 4e-6;
  p->launch_queue = 1000;
  p->copy_engines = 2;
  CHECK_EQ(calib_store(s, p), 0);
  free(p);
  devices_entry e;
  CHECK_EQ(devices_store_get(s, "lab-h100", &e, err, sizeof err), 0);
  CHECK_STR(e.source, "calibrated");
  CHECK_NEAR(e.p.h2d_pinned_bw, 50e9, 1);
  CHECK_NEAR(e.p.d2h_pageable_bw, 18e9, 1);
  CHECK_EQ(e.p.copy_engines, 2);
  CHECK_EQ(e.p.launch_queue, 1000);
  CHECK_EQ(e.p.sync_latency, 4000);
  CHECK_EQ(e.p.total_memory, UINT64_C(85045477376));
  CHECK_EQ(sim_device_check(&e.p, err, sizeof err), 0);
  /* it claims the trace's recorded device, over the built-in */
  CHECK_EQ(devices_store_match(s, "NVIDIA H100 80GB HBM3", 0, &e, err, sizeof err), 0);
  CHECK_STR(e.p.name, "lab-h100");
  store_close(s);
  unlink(path);
  char side[160];
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
  rmdir(dir);
}

int main(void) {
  RUN(test_builtins);
  RUN(test_units);
  RUN(test_matching);
  RUN(test_json_round_trip);
  RUN(test_store);
  RUN(test_calibrated_profile);
  TEST_MAIN_END();
}

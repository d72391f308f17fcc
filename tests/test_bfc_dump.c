/* test_bfc_dump.c: TensorFlow's BFC out-of-memory dumps imported and rebuilt, checked against the dump's own summaries. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import/importer.h"
#include "io/settings.h"
#include "sim/device_sim.h"
#include "validate/validate.h"
#include "test.h"

/*
 * For each shared dump (the .log files of traces/bfc): the import gives one trace; its state, restored into
 * the `bfc` model with the recorded memory limit, has per bin (every chunk, free or in use, by its
 * size's bin, as BFCAllocator::get_bin_debug_info counts) the dump's "Bin (N): Total Chunks: T,
 * Chunks in use: U. A allocated for chunks. B in use in bin." figures, and in use by size the
 * dump's "K Chunks of size N" lines; its bytes in use are the Stats' InUse; and the failed
 * request, replayed, runs out of memory as it did.
 */

int test_failures;

static char traces[512], dir[512];

/* TensorFlow's strings::HumanReadableNumBytes. */
static const char *human(char *buf, size_t n, uint64_t v) {
  if (v < 1024) {
    snprintf(buf, n, "%" PRIu64 "B", v);
    return buf;
  }
  static const char units[] = "KMGTPE";
  const char *u = units;
  while (v >= UINT64_C(1024) * 1024) {
    v /= 1024;
    u++;
  }
  snprintf(buf, n, *u == 'K' ? "%.1f%ciB" : "%.2f%ciB", (double)v / 1024.0, *u);
  return buf;
}

static int bin_of(uint64_t size) {
  uint64_t v = (size < 256 ? 256 : size) >> 8;
  int b = 63 ^ __builtin_clzll(v);
  return b < 20 ? b : 20;
}

typedef struct model_state {
  uint64_t total[21], in_use[21], bytes[21], bytes_in_use[21];
  uint64_t sizes[4096][2]; /* in-use chunk size -> count */
  size_t nsizes;
  uint64_t in_use_bytes, free_chunks, largest_free;
} model_state;

static int tally(void *arg, const sim_walk_item *it) {
  model_state *m = arg;
  if (it->is_segment) return 0;
  int b = bin_of(it->size), used = it->state != SIM_BLOCK_FREE;
  m->total[b]++;
  m->bytes[b] += it->size;
  if (!used) {
    m->free_chunks++;
    if (it->size > m->largest_free) m->largest_free = it->size;
    return 0;
  }
  m->in_use[b]++;
  m->bytes_in_use[b] += it->size;
  m->in_use_bytes += it->size;
  size_t k = 0;
  while (k < m->nsizes && m->sizes[k][0] != it->size) k++;
  if (k == m->nsizes && m->nsizes < 4096) m->sizes[m->nsizes++][0] = it->size;
  if (k < 4096) m->sizes[k][1]++;
  return 0;
}

/* The dump's own lines, read straight from the log, against the model's state. */
static void compare_with_log(const char *log, const model_state *m, uint64_t *stat_in_use) {
  FILE *f = fopen(log, "r");
  CHECK(f != NULL);
  if (!f) return;
  char line[4096];
  int bins = 0, sizes = 0;
  while (fgets(line, sizeof line, f)) {
    const char *p;
    unsigned long long bin, total, used, count, size;
    char alloc[32], inuse[32];
    if ((p = strstr(line, "] Bin (")) &&
        sscanf(p, "] Bin (%llu): \tTotal Chunks: %llu, Chunks in use: %llu. %31s allocated for chunks. %31s in use",
               &bin, &total, &used, alloc, inuse) == 5) {
      int b = bin_of(bin);
      char h[32];
      CHECK_EQ(m->total[b], total);
      CHECK_EQ(m->in_use[b], used);
      CHECK_STR(human(h, sizeof h, m->bytes[b]), alloc);
      CHECK_STR(human(h, sizeof h, m->bytes_in_use[b]), inuse);
      bins++;
    } else if ((p = strstr(line, "] ")) && strstr(p, " Chunks of size ") &&
               sscanf(p, "] %llu Chunks of size %llu totalling", &count, &size) == 2) {
      uint64_t have = 0;
      for (size_t k = 0; k < m->nsizes; k++)
        if (m->sizes[k][0] == size) have = m->sizes[k][1];
      CHECK_EQ(have, count);
      sizes++;
    } else if (!strncmp(line, "InUse:", 6)) {
      *stat_in_use = strtoull(line + 6, NULL, 10);
    }
  }
  fclose(f);
  CHECK_EQ(bins, 21);
  CHECK_EQ((size_t)sizes, m->nsizes); /* every size in use has its line, and no other */
}

static void one_dump(const char *file, uint64_t request, uint64_t free_chunks, uint64_t largest) {
  char log[1024], db[600], err[IMPORT_ERRLEN];
  snprintf(log, sizeof log, "%s/bfc/%s", traces, file);
  snprintf(db, sizeof db, "%s/dump.db", dir);
  unlink(db);
  store *s = NULL;
  CHECK_EQ(store_open(&s, db, STORE_CREATE, err, sizeof err), 0);
  import_ctx ctx = {.s = s, .path = log};
  int rc = import_file(&ctx, NULL); /* the format is recognised */
  if (rc) fprintf(stderr, "%s\n", ctx.err);
  CHECK_EQ(rc, 0);
  store_trace t;
  CHECK_EQ(store_trace_find(s, "1", &t), 0);
  CHECK_STR(t.allocator, "bfc");
  CHECK_STR(t.source_format, "tf_bfc_dump");
  replay_start st;
  CHECK_EQ(validate_recorded_state(s, &t, &st, err, sizeof err), 0);
  CHECK_EQ(st.nsegments, 1);

  /* the model, with the settings the trace recorded (memory_limit = the dump's Limit) */
  sim_spec spec;
  CHECK_EQ(sim_spec_parse(&spec, "bfc", err, sizeof err), SIM_OK);
  settings rec;
  settings_init(&rec, t.allocator_settings);
  sim_device dev;
  sim_simdev_init(&dev, UINT64_MAX, UINT64_C(40) << 30);
  sim_allocator a;
  CHECK_EQ(sim_allocator_init(&a, &spec, &dev, &rec.recorded, NULL, err, sizeof err), SIM_OK);
  uintptr_t *h = calloc(st.n, sizeof *h);
  CHECK_EQ(a.ops->restore(a.ctx, st.items, st.n, h, err, sizeof err), SIM_OK);
  model_state *m = calloc(1, sizeof *m);
  a.ops->walk(a.ctx, tally, m);
  uint64_t stat_in_use = 0;
  compare_with_log(log, m, &stat_in_use);
  CHECK_EQ(m->in_use_bytes, stat_in_use);
  CHECK_EQ(m->free_chunks, free_chunks);
  CHECK_EQ(m->largest_free, largest);
  CHECK_EQ(a.ops->largest_free(a.ctx), largest);
  CHECK_EQ((uint64_t)a.ops->stats(a.ctx)->allocated.current, stat_in_use);
  sim_placement pl;
  CHECK_EQ(a.ops->alloc(a.ctx, request, 0, &pl), SIM_EOOM); /* the failed request fails again */
  char check[SIM_ERRLEN];
  CHECK_EQ(a.ops->check(a.ctx, check, sizeof check), 0);
  free(m);
  free(h);
  sim_allocator_release(&a);
  sim_simdev_release(&dev);
  settings_release(&rec);
  sim_spec_release(&spec);
  replay_start_release(&st);
  store_trace_clear(&t);
  store_close(s);
}

static void fragmentation_dump(void) {
  /* 3.07 GiB failed with 7.87 GiB free in 20 chunks, the largest 3.03 GiB (the traces' README) */
  one_dump("hilse_imageexp_fragmentation_oom_18833643.log", 3300000000, 20, 3255434240);
}

/* 488.28 MiB failed with 2 free chunks, the largest 361.64 MiB */
static void full_dump(void) { one_dump("hilse_imageexp_oom_18832370.log", 512000000, 2, 379204608); }

int main(void) {
  const char *d = getenv("MEMPLAY_TRACES");
  char probe[600];
  struct stat sb;
  snprintf(probe, sizeof probe, "%s/bfc", d ? d : "");
  if (!d || !*d || stat(probe, &sb) || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, "no BFC dumps (MEMPLAY_TRACES/bfc): skipped\n");
    return TEST_SKIP;
  }
  snprintf(traces, sizeof traces, "%s", d);
  snprintf(dir, sizeof dir, "%s/memplay-bfc-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  RUN(fragmentation_dump);
  RUN(full_dump);
  char db[600];
  snprintf(db, sizeof db, "%s/dump.db", dir);
  unlink(db);
  rmdir(dir);
  TEST_MAIN_END();
}

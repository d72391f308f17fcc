/* bench_recorder.c: how fast the recorder keeps records and converts them at exit (prints a table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/recorder/convert.h"

/*
 * usage: bench_recorder [OPS]   (default 2000000)
 *
 * Synthesizes what CUPTI reports for a training loop of OPS operations, in the order its
 * buffers arrive (each buffer of 4096 API records, then the activities they issued): per
 * operation one relevant API call and two that are filtered out (cudaGetDevice,
 * cudaGetLastError), and its activity: a kernel (80%), a copy (5%), a memset (5%), or an
 * allocation freed 64 operations later (10%). It times keeping the records (the recorder's work
 * inside the program, per CUPTI record), converting them and writing the JSON Lines
 * (to /dev/null), and reports the memory the kept records take.
 */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int main(int argc, char **argv) {
  long ops = argc > 1 ? atol(argv[1]) : 2000000;
  if (ops <= 0) {
    fprintf(stderr, "usage: bench_recorder [OPS]\n");
    return 2;
  }
  rec_state st;
  rec_init(&st);
  uint32_t names[4];
  const char *kernels[] = {"ampere_sgemm_128x64_nn", "void at::native::vectorized_elementwise_kernel<4>",
                           "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>", "softmax_warp_forward"};
  for (int i = 0; i < 4; i++) names[i] = rec_intern(&st, kernels[i]);
  /* The recorder looks each callback id's name up once (inject.c); so does this. */
  uint32_t api_launch = rec_api_name(&st, "cudaLaunchKernel_v7000"), api_copy = rec_api_name(&st, "cudaMemcpyAsync_v3020"),
           api_set = rec_api_name(&st, "cudaMemsetAsync_v3020"), api_free = rec_api_name(&st, "cudaFree_v3020"),
           api_malloc = rec_api_name(&st, "cudaMalloc_v3020"), api_get_device = rec_api_name(&st, "cudaGetDevice_v3020"),
           api_last_error = rec_api_name(&st, "cudaGetLastError_v3020");
  rec_default_stream(&st, 1, 7);
  rec_context(&st, 1, 0);
  uint64_t seed = 88172645463325252ULL, t = 1000000, activities = 0, apis = 0;
  uint64_t live[64] = {0};
  double t0 = now_s();
  const long batch = 4096;
  for (long base = 0; base < ops; base += batch) {
    long end = base + batch < ops ? base + batch : ops;
    rec_record pending[4096 + 64];
    size_t np = 0;
    for (long i = base; i < end; i++) {
      uint32_t corr = (uint32_t)(3 * i + 1);
      uint64_t r = rng(&seed) % 100;
      uint32_t api;
      rec_record a;
      memset(&a, 0, sizeof a);
      a.correlation = corr;
      a.context = 1;
      a.device = 0;
      a.stream = 7;
      a.start = t + 3000;
      a.end = a.start + 2000 + rng(&seed) % 50000;
      if (r < 80) {
        api = api_launch;
        a.kind = REC_KERNEL;
        a.name = names[r % 4];
      } else if (r < 85) {
        api = api_copy;
        a.kind = REC_MEMCPY;
        a.copy_kind = REC_COPY_HTOD;
        a.src_kind = REC_MEM_PINNED;
        a.bytes = 1 << 20;
        a.flags = REC_F_ASYNC;
      } else if (r < 90) {
        api = api_set;
        a.kind = REC_MEMSET;
        a.mem = REC_MEM_DEVICE;
        a.bytes = 1 << 16;
      } else {
        uint64_t slot = (uint64_t)i % 64;
        a.kind = REC_MEMORY;
        a.mem = REC_MEM_DEVICE;
        a.start = a.end = t + 500;
        if (live[slot]) {
          api = api_free;
          a.op = REC_OP_RELEASE;
          a.addr = live[slot];
          live[slot] = 0;
        } else {
          api = api_malloc;
          a.op = REC_OP_ALLOCATION;
          a.addr = UINT64_C(0x7f0000000000) + (uint64_t)i * 4096;
          a.bytes = 2 << 20;
          live[slot] = a.addr;
        }
      }
      rec_add_api(&st, corr, t, t + 400, api);
      rec_add_api(&st, corr + 1, t + 500, t + 520, api_get_device);
      rec_add_api(&st, corr + 2, t + 600, t + 610, api_last_error);
      apis += 3;
      pending[np++] = a;
      t += 1000;
    }
    for (size_t k = 0; k < np; k++) rec_add(&st, &pending[k]);
    activities += np;
  }
  double t1 = now_s();
  size_t held = st.cap * sizeof(rec_record) + st.capapi * sizeof(rec_api) + st.api_by_corr.cap * sizeof(sim_map_entry);
  FILE *f = fopen("/dev/null", "w");
  rec_counts c;
  char err[128];
  if (!f || rec_write_jsonl(&st, f, NULL, &c, err, sizeof err)) {
    fprintf(stderr, "bench_recorder: cannot write\n");
    return 1;
  }
  fclose(f);
  double t2 = now_s();
  printf("%-34s %14s\n", "records", "count");
  printf("  %-32s %14ld\n", "operations", ops);
  printf("  %-32s %14llu\n", "API records (2/3 filtered out)", (unsigned long long)apis);
  printf("  %-32s %14llu\n", "activity records", (unsigned long long)activities);
  printf("  %-32s %14llu\n", "events written", (unsigned long long)c.events);
  printf("%-34s %14s %14s\n", "stage", "seconds", "per record");
  printf("  %-32s %14.3f %11.1f ns\n", "keep (inside the program)", t1 - t0, (t1 - t0) * 1e9 / (double)(apis + activities));
  printf("  %-32s %14.3f %11.1f ns\n", "convert and write (at exit)", t2 - t1, (t2 - t1) * 1e9 / (double)activities);
  printf("%-34s %14.1f MiB (%.1f bytes per operation)\n", "memory held until exit", (double)held / (1 << 20),
         (double)held / (double)ops);
  rec_release(&st);
  return 0;
}

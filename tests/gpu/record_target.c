/* record_target.c: a small CUDA program for `memplay record` to record (tests/gpu/test_device.sh). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * What it does, in order, so that the test can check the recorded trace:
 *   cudaMalloc 4 MiB and 3 MiB; cudaMemcpy 4 MiB host (pageable) to device;
 *   cudaMallocHost 1 MiB; cudaMemcpyAsync 1 MiB pinned host to device on a new stream;
 *   cudaMemsetAsync 3 MiB on that stream; cudaStreamSynchronize;
 *   cudaMemcpy 1 MiB device to pageable host; cudaFree both; cudaFreeHost; cudaDeviceSynchronize.
 * It exits with the status given as its first argument (default 0).
 */
#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "record_target: %s failed: %s\n", #call, cudaGetErrorString(e_));     \
      return 2;                                                                              \
    }                                                                                        \
  } while (0)

int main(int argc, char **argv) {
  const size_t mib = (size_t)1 << 20;
  void *a = NULL, *b = NULL, *pinned = NULL;
  char *pageable = calloc(4, mib);
  cudaStream_t s;
  if (!pageable) return 2;
  CHECK(cudaMalloc(&a, 4 * mib));
  CHECK(cudaMalloc(&b, 3 * mib));
  CHECK(cudaMemcpy(a, pageable, 4 * mib, cudaMemcpyHostToDevice));
  CHECK(cudaMallocHost(&pinned, mib));
  memset(pinned, 1, mib);
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CHECK(cudaMemcpyAsync(b, pinned, mib, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemsetAsync(b, 0, 3 * mib, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(pageable, a, mib, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaDeviceSynchronize());
  free(pageable);
  return argc > 1 ? atoi(argv[1]) : 0;
}

/* devices.h: device profiles: what a GPU can hold and how fast it moves data, for OOM and time predictions. */
#ifndef SIM_DEVICES_H
#define SIM_DEVICES_H

#include <stddef.h>
#include <stdint.h>

/*
 * A profile is a flat record of figures, each described once in SIM_DEVICE_FIELDS: its key
 * (as typed in `memplay devices NAME --set KEY=VALUE` and stored in the store's params JSON),
 * its kind (which fixes the unit), and one line of help. The built-in profiles and the source
 * of every figure are in docs/devices.md. Units inside the record are always base units:
 * bytes, bytes per second, floating-point operations per second, nanoseconds.
 */
#define SIM_DEVICE_NAME_MAX 64

enum {
  SIM_DF_TEXT,    /* text (char[]) */
  SIM_DF_BYTES,   /* uint64_t bytes: 80GB, 24GiB, 4MiB */
  SIM_DF_INT,     /* int: a count */
  SIM_DF_RATE,    /* double bytes per second: 25GB/s, 1.5TB/s */
  SIM_DF_FLOPS,   /* double operations per second: 19.5TFLOPS */
  SIM_DF_TIME,    /* int64_t nanoseconds: 5us, 1.5ms */
  SIM_DF_PER_GIB, /* int64_t nanoseconds per GiB moved or mapped: 72us (per GiB) */
};

#define SIM_DEVICE_TEXT_MAX 160

/* X(kind, key, help) */
#define SIM_DEVICE_FIELDS(X)                                                                              \
  X(SIM_DF_TEXT, description, "what the card is")                                                       \
  X(SIM_DF_TEXT, match, "comma-separated model names that identify it in a trace's recorded device name") \
  X(SIM_DF_BYTES, total_memory, "device memory as cudaGetDeviceProperties reports it (totalGlobalMem)")   \
  X(SIM_DF_BYTES, context_bytes, "what the CUDA context and the framework take before the first tensor")  \
  X(SIM_DF_INT, cc_major, "compute capability, major")                                                   \
  X(SIM_DF_INT, cc_minor, "compute capability, minor")                                                   \
  X(SIM_DF_RATE, mem_bw, "device memory bandwidth")                                                      \
  X(SIM_DF_RATE, h2d_pinned_bw, "host-to-device copy bandwidth from pinned host memory")                 \
  X(SIM_DF_RATE, d2h_pinned_bw, "device-to-host copy bandwidth into pinned host memory")                 \
  X(SIM_DF_RATE, h2d_pageable_bw, "host-to-device copy bandwidth from pageable host memory (staged)")    \
  X(SIM_DF_RATE, d2h_pageable_bw, "device-to-host copy bandwidth into pageable host memory (staged)")    \
  X(SIM_DF_RATE, d2d_bw, "device-to-device copy rate (bytes copied per second)")                         \
  X(SIM_DF_RATE, p2p_bw, "peer-to-peer copy rate between two devices, one direction")                   \
  X(SIM_DF_RATE, host_copy_bw, "host memcpy rate (host-to-host copies)")                                \
  X(SIM_DF_FLOPS, fp32_flops, "peak FP32 rate (no tensor cores)")                                        \
  X(SIM_DF_FLOPS, tf32_flops, "peak TF32 tensor-core rate, dense (0: not supported)")                    \
  X(SIM_DF_FLOPS, fp16_flops, "peak FP16 tensor-core rate, dense, FP32 accumulate")                      \
  X(SIM_DF_FLOPS, bf16_flops, "peak BF16 tensor-core rate, dense (0: not supported)")                    \
  X(SIM_DF_INT, copy_engines, "asynchronous copy engines (asyncEngineCount)")                            \
  X(SIM_DF_TIME, copy_latency, "fixed time of every copy on the device")                                 \
  X(SIM_DF_BYTES, staging_buffer, "pinned bounce buffer that pageable copies are staged through")        \
  X(SIM_DF_TIME, launch_overhead, "a launch's own host time when its recorded one includes a wait")     \
  X(SIM_DF_TIME, launch_latency, "from a launch to the start of its work on an idle stream")             \
  X(SIM_DF_INT, launch_queue, "device operations in flight before a launch blocks the host")             \
  X(SIM_DF_TIME, sync_latency, "host wake-up after the awaited work ends")                               \
  X(SIM_DF_TIME, malloc_base, "cudaMalloc: fixed cost of a call")                                        \
  X(SIM_DF_PER_GIB, malloc_per_gib, "cudaMalloc: cost per GiB allocated")                                \
  X(SIM_DF_TIME, free_base, "cudaFree: fixed cost of a call")                                            \
  X(SIM_DF_PER_GIB, free_per_gib, "cudaFree: cost per GiB freed")                                        \
  X(SIM_DF_TIME, map_base, "cuMemCreate + cuMemMap + cuMemSetAccess: fixed cost of a call")              \
  X(SIM_DF_PER_GIB, map_per_gib, "cuMemCreate + cuMemMap + cuMemSetAccess: cost per GiB mapped")         \
  X(SIM_DF_TIME, unmap_base, "cuMemUnmap + cuMemRelease: fixed cost of a call")                          \
  X(SIM_DF_PER_GIB, unmap_per_gib, "cuMemUnmap + cuMemRelease: cost per GiB unmapped")                   \
  X(SIM_DF_TIME, pin_base, "cudaMallocHost (pinning host memory): fixed cost of a call")                 \
  X(SIM_DF_PER_GIB, pin_per_gib, "cudaMallocHost: cost per GiB pinned")                                  \
  X(SIM_DF_TIME, unpin_base, "cudaFreeHost: fixed cost of a call")                                       \
  X(SIM_DF_PER_GIB, unpin_per_gib, "cudaFreeHost: cost per GiB released")

typedef struct sim_device_profile {
  char name[SIM_DEVICE_NAME_MAX];
  char description[SIM_DEVICE_TEXT_MAX];
  char match[SIM_DEVICE_TEXT_MAX];
  uint64_t total_memory;
  uint64_t context_bytes; /* the process's usable memory is total_memory minus this */
  int cc_major, cc_minor;
  double mem_bw, h2d_pinned_bw, d2h_pinned_bw, h2d_pageable_bw, d2h_pageable_bw, d2d_bw, p2p_bw, host_copy_bw;
  double fp32_flops, tf32_flops, fp16_flops, bf16_flops;
  int copy_engines;
  int64_t copy_latency;
  uint64_t staging_buffer;
  int64_t launch_overhead, launch_latency;
  int launch_queue;
  int64_t sync_latency;
  int64_t malloc_base, malloc_per_gib, free_base, free_per_gib;
  int64_t map_base, map_per_gib, unmap_base, unmap_per_gib;
  int64_t pin_base, pin_per_gib, unpin_base, unpin_per_gib;
} sim_device_profile;

/* One field of the record. */
typedef struct sim_device_field {
  const char *key;
  int kind;         /* SIM_DF_* */
  const char *help;
  size_t offset;    /* in sim_device_profile */
} sim_device_field;

extern const sim_device_field sim_device_fields[];
extern const size_t sim_device_nfields;
const sim_device_field *sim_device_field_find(const char *key);

/* The built-in profiles (docs/devices.md gives every figure's source). */
extern const sim_device_profile sim_builtin_devices[];
extern const size_t sim_builtin_ndevices;
/* The figures no public source gives per card (latencies, allocation costs), the same for all;
 * everything else zero. A starting point for profiles read from older stores. */
void sim_device_defaults(sim_device_profile *p);
/* The memory a process can use on the card: total_memory less context_bytes. */
uint64_t sim_device_usable(const sim_device_profile *p);
/* A built-in by name (case-insensitive), or NULL. */
const sim_device_profile *sim_device_builtin(const char *name);

/* Numeric fields as a double in base units (text fields: 0), and back. */
double sim_device_get_number(const sim_device_profile *p, const sim_device_field *f);
void sim_device_set_number(sim_device_profile *p, const sim_device_field *f, double v);
/* Whether v is a value field f can hold: not negative; a size at most SIM_SIZE_MAX (1 PiB), a
 * whole number at most 1,000,000, a time at most 4.5e15 ns (52 days), a rate finite. */
int sim_device_number_ok(const sim_device_field *f, double v);
const char *sim_device_get_text(const sim_device_profile *p, const sim_device_field *f);

/*
 * Sets a field from text as a user types it: a number with an optional unit of the field's
 * kind (80GB, 25GB/s, 19.5TFLOPS, 5us, 281ms). Returns 0, or -1 with a message.
 */
int sim_device_set(sim_device_profile *p, const char *key, const char *value, char *err, size_t errlen);
/* A field's value with its unit, for people ("25.0 GB/s", "80.0 GiB", "5.00 us"). */
void sim_device_format(const sim_device_profile *p, const sim_device_field *f, char *buf, size_t n);
/* Checks that the figures make sense (positive bandwidths, at least one copy engine, ...). */
int sim_device_check(const sim_device_profile *p, char *err, size_t errlen);
/* A valid profile name: letters, digits, '-', '_', '.', at most SIM_DEVICE_NAME_MAX-1 long. */
int sim_device_name_ok(const char *name);

/*
 * How well a recorded device name ("NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB") fits a
 * profile: 0 when none of its match names appears in the recorded name as whole words,
 * otherwise a score that grows as the memory the trace recorded (bytes, 0 unknown) or a size
 * written in the name ("80GB") comes closer to the profile's.
 */
int sim_device_match(const sim_device_profile *p, const char *recorded_name, uint64_t recorded_memory);

#endif

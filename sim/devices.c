/* devices.c: the built-in device profiles, their fields, and reading and writing figures with units. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "allocator.h"
#include "devices.h"

/* ---- the fields --------------------------------------------------------------------------- */

const sim_device_field sim_device_fields[] = {
#define SIM_X(kind, key, help) {#key, kind, help, offsetof(sim_device_profile, key)},
  SIM_DEVICE_FIELDS(SIM_X)
#undef SIM_X
};
const size_t sim_device_nfields = sizeof sim_device_fields / sizeof sim_device_fields[0];

const sim_device_field *sim_device_field_find(const char *key) {
  for (size_t i = 0; i < sim_device_nfields; i++)
    if (!strcmp(sim_device_fields[i].key, key)) return &sim_device_fields[i];
  return NULL;
}

/* ---- the built-in profiles ------------------------------------------------------------------
 * Every figure and its source is listed in docs/devices.md; keep the two in step. Figures that
 * no public source gives per card are shared (COMMON) and say so there.
 */
#define GB 1e9
#define TFLOPS 1e12
#define US INT64_C(1000)
#define MS INT64_C(1000000)
#define MIB (UINT64_C(1) << 20)

/* Pageable copies are staged; under load they reach about half the pinned rate. */
#define PAGEABLE(x) ((x) * 0.5)
/* A device-to-device memcpy reads and writes every byte: about 0.38 of memory bandwidth. */
#define D2D(x) ((x) * 0.38)

/* The CUDA context of a PyTorch process with lazy module loading (CUDA_MODULE_LOADING=LAZY, the
 * default since CUDA 12.2 and PyTorch 1.13): 287,047,680 bytes (273.75 MiB) measured by nvidia-smi
 * after the first tensor (pytorch/pytorch pull request 86509; 666,632,192 bytes with eager
 * loading). It varies with the GPU, the driver and the libraries loaded; docs/devices.md. */
#define CONTEXT_BYTES UINT64_C(287047680)

#define COMMON                                                                                    \
  .context_bytes = CONTEXT_BYTES,                                                                 \
  .host_copy_bw = 10 * GB, .copy_latency = 2 * US, .staging_buffer = 4 * MIB,                     \
  .launch_overhead = 5 * US, .launch_latency = 7 * US, .launch_queue = 1024, .sync_latency = 6 * US, \
  .malloc_base = 72 * US, .malloc_per_gib = 72 * US, .free_base = 70 * US, .free_per_gib = 531 * US, \
  .map_base = 10 * US, .map_per_gib = 72 * US, .unmap_base = 10 * US, .unmap_per_gib = 531 * US,   \
  .pin_base = 1 * MS, .pin_per_gib = 281 * MS, .unpin_base = 100 * US, .unpin_per_gib = 121 * MS

/* Host links: what a copy engine reaches on each PCIe generation (docs/devices.md). */
#define GEN3_V100 .h2d_pinned_bw = 9.6 * GB, .d2h_pinned_bw = 11.4 * GB, \
  .h2d_pageable_bw = PAGEABLE(9.6 * GB), .d2h_pageable_bw = PAGEABLE(11.4 * GB)
#define GEN3_T4 .h2d_pinned_bw = 9.7 * GB, .d2h_pinned_bw = 11.1 * GB, \
  .h2d_pageable_bw = PAGEABLE(9.7 * GB), .d2h_pageable_bw = PAGEABLE(11.1 * GB)
#define GEN4_SXM .h2d_pinned_bw = 25.13 * GB, .d2h_pinned_bw = 25.7 * GB, \
  .h2d_pageable_bw = PAGEABLE(25.13 * GB), .d2h_pageable_bw = PAGEABLE(25.7 * GB)
#define GEN4 .h2d_pinned_bw = 25.8 * GB, .d2h_pinned_bw = 25.7 * GB, \
  .h2d_pageable_bw = PAGEABLE(25.8 * GB), .d2h_pageable_bw = PAGEABLE(25.7 * GB)
#define GEN5 .h2d_pinned_bw = 55.6 * GB, .d2h_pinned_bw = 52.8 * GB, \
  .h2d_pageable_bw = PAGEABLE(55.6 * GB), .d2h_pageable_bw = PAGEABLE(52.8 * GB)

const sim_device_profile sim_builtin_devices[] = {
  {.name = "V100-16GB", .description = "NVIDIA Tesla V100 SXM2 16 GB (Volta, HBM2, PCIe Gen3 x16, NVLink 2)",
   .match = "V100", .total_memory = UINT64_C(16928342016), .cc_major = 7, .cc_minor = 0,
   .mem_bw = 900 * GB, GEN3_V100, .d2d_bw = D2D(900 * GB), .p2p_bw = 150 * GB,
   .fp32_flops = 15.7 * TFLOPS, .tf32_flops = 0, .fp16_flops = 125 * TFLOPS, .bf16_flops = 0,
   .copy_engines = 6, COMMON},
  {.name = "V100-32GB", .description = "NVIDIA Tesla V100 SXM2 32 GB (Volta, HBM2, PCIe Gen3 x16, NVLink 2)",
   .match = "V100", .total_memory = UINT64_C(34089730048), .cc_major = 7, .cc_minor = 0,
   .mem_bw = 900 * GB, GEN3_V100, .d2d_bw = D2D(900 * GB), .p2p_bw = 150 * GB,
   .fp32_flops = 15.7 * TFLOPS, .tf32_flops = 0, .fp16_flops = 125 * TFLOPS, .bf16_flops = 0,
   .copy_engines = 6, COMMON},
  {.name = "A100-40GB", .description = "NVIDIA A100 40 GB (Ampere, HBM2, PCIe Gen4 x16, NVLink 3)",
   .match = "A100", .total_memory = UINT64_C(42298834944), .cc_major = 8, .cc_minor = 0,
   .mem_bw = 1555 * GB, GEN4_SXM, .d2d_bw = D2D(1555 * GB), .p2p_bw = 300 * GB,
   .fp32_flops = 19.5 * TFLOPS, .tf32_flops = 156 * TFLOPS, .fp16_flops = 312 * TFLOPS, .bf16_flops = 312 * TFLOPS,
   .copy_engines = 3, COMMON},
  {.name = "A100-80GB", .description = "NVIDIA A100 SXM4 80 GB (Ampere, HBM2e, PCIe Gen4 x16, NVLink 3)",
   .match = "A100", .total_memory = UINT64_C(85100068864), .cc_major = 8, .cc_minor = 0,
   .mem_bw = 2039 * GB, GEN4_SXM, .d2d_bw = D2D(2039 * GB), .p2p_bw = 300 * GB,
   .fp32_flops = 19.5 * TFLOPS, .tf32_flops = 156 * TFLOPS, .fp16_flops = 312 * TFLOPS, .bf16_flops = 312 * TFLOPS,
   .copy_engines = 3, COMMON},
  {.name = "H100", .description = "NVIDIA H100 SXM5 80 GB (Hopper, HBM3, PCIe Gen5 x16, NVLink 4)",
   .match = "H100", .total_memory = UINT64_C(85045477376), .cc_major = 9, .cc_minor = 0,
   .mem_bw = 3350 * GB, GEN5, .d2d_bw = D2D(3350 * GB), .p2p_bw = 450 * GB,
   .fp32_flops = 66.9 * TFLOPS, .tf32_flops = 494.7 * TFLOPS, .fp16_flops = 989.4 * TFLOPS,
   .bf16_flops = 989.4 * TFLOPS, .copy_engines = 3, COMMON},
  {.name = "H200", .description = "NVIDIA H200 SXM 141 GB (Hopper, HBM3e, PCIe Gen5 x16, NVLink 4)",
   .match = "H200", .total_memory = UINT64_C(150754820096), .cc_major = 9, .cc_minor = 0,
   .mem_bw = 4800 * GB, GEN5, .d2d_bw = D2D(4800 * GB), .p2p_bw = 450 * GB,
   .fp32_flops = 66.9 * TFLOPS, .tf32_flops = 494.7 * TFLOPS, .fp16_flops = 989.4 * TFLOPS,
   .bf16_flops = 989.4 * TFLOPS, .copy_engines = 3, COMMON},
  {.name = "L4", .description = "NVIDIA L4 24 GB (Ada, GDDR6, PCIe Gen4 x16)",
   .match = "L4", .total_memory = UINT64_C(23670554624), .cc_major = 8, .cc_minor = 9,
   .mem_bw = 300 * GB, GEN4, .d2d_bw = D2D(300 * GB), .p2p_bw = 25.8 * GB,
   .fp32_flops = 30.3 * TFLOPS, .tf32_flops = 60 * TFLOPS, .fp16_flops = 121 * TFLOPS, .bf16_flops = 121 * TFLOPS,
   .copy_engines = 2, COMMON},
  {.name = "T4", .description = "NVIDIA T4 16 GB (Turing, GDDR6, PCIe Gen3 x16)",
   .match = "T4", .total_memory = UINT64_C(15843721216), .cc_major = 7, .cc_minor = 5,
   .mem_bw = 320 * GB, GEN3_T4, .d2d_bw = D2D(320 * GB), .p2p_bw = 9.7 * GB,
   .fp32_flops = 8.1 * TFLOPS, .tf32_flops = 0, .fp16_flops = 65 * TFLOPS, .bf16_flops = 0,
   .copy_engines = 3, COMMON},
  {.name = "RTX3090", .description = "NVIDIA GeForce RTX 3090 24 GB (Ampere, GDDR6X, PCIe Gen4 x16)",
   .match = "RTX 3090", .total_memory = UINT64_C(25286672384), .cc_major = 8, .cc_minor = 6,
   .mem_bw = 936 * GB, GEN4, .d2d_bw = D2D(936 * GB), .p2p_bw = 25.8 * GB,
   .fp32_flops = 35.6 * TFLOPS, .tf32_flops = 35.6 * TFLOPS, .fp16_flops = 71 * TFLOPS, .bf16_flops = 71 * TFLOPS,
   .copy_engines = 2, COMMON},
  {.name = "RTX4090", .description = "NVIDIA GeForce RTX 4090 24 GB (Ada, GDDR6X, PCIe Gen4 x16)",
   .match = "RTX 4090", .total_memory = UINT64_C(25386352640), .cc_major = 8, .cc_minor = 9,
   .mem_bw = 1008 * GB, GEN4, .d2d_bw = D2D(1008 * GB), .p2p_bw = 25.8 * GB,
   .fp32_flops = 82.6 * TFLOPS, .tf32_flops = 82.6 * TFLOPS, .fp16_flops = 165.2 * TFLOPS,
   .bf16_flops = 165.2 * TFLOPS, .copy_engines = 2, COMMON},
};
const size_t sim_builtin_ndevices = sizeof sim_builtin_devices / sizeof sim_builtin_devices[0];

uint64_t sim_device_usable(const sim_device_profile *p) {
  return p->total_memory > p->context_bytes ? p->total_memory - p->context_bytes : 0;
}

void sim_device_defaults(sim_device_profile *p) {
  static const sim_device_profile base = {.copy_engines = 1, COMMON};
  *p = base;
}

const sim_device_profile *sim_device_builtin(const char *name) {
  for (size_t i = 0; i < sim_builtin_ndevices; i++)
    if (!strcasecmp(sim_builtin_devices[i].name, name)) return &sim_builtin_devices[i];
  return NULL;
}

/* ---- field access ------------------------------------------------------------------------- */

double sim_device_get_number(const sim_device_profile *p, const sim_device_field *f) {
  const char *base = (const char *)p + f->offset;
  switch (f->kind) {
  case SIM_DF_BYTES: return (double)*(const uint64_t *)base;
  case SIM_DF_INT: return *(const int *)base;
  case SIM_DF_RATE:
  case SIM_DF_FLOPS: return *(const double *)base;
  case SIM_DF_TIME:
  case SIM_DF_PER_GIB: return (double)*(const int64_t *)base;
  default: return 0;
  }
}

void sim_device_set_number(sim_device_profile *p, const sim_device_field *f, double v) {
  char *base = (char *)p + f->offset;
  switch (f->kind) {
  case SIM_DF_BYTES: *(uint64_t *)base = v > 0 ? (uint64_t)llround(v) : 0; break;
  case SIM_DF_INT: *(int *)base = (int)lround(v); break;
  case SIM_DF_RATE:
  case SIM_DF_FLOPS: *(double *)base = v; break;
  case SIM_DF_TIME:
  case SIM_DF_PER_GIB: *(int64_t *)base = (int64_t)llround(v); break;
  default: break;
  }
}

int sim_device_number_ok(const sim_device_field *f, double v) {
  if (!(v >= 0) || !isfinite(v)) return 0;
  switch (f->kind) {
  case SIM_DF_BYTES: return v <= (double)SIM_SIZE_MAX;
  case SIM_DF_INT: return v <= 1000000 && v == floor(v);
  case SIM_DF_TIME:
  case SIM_DF_PER_GIB: return v <= 4.5e15; /* 52 days: the time model's bound on one operation */
  case SIM_DF_RATE:
  case SIM_DF_FLOPS: return 1;
  default: return 0;
  }
}

const char *sim_device_get_text(const sim_device_profile *p, const sim_device_field *f) {
  return f->kind == SIM_DF_TEXT ? (const char *)p + f->offset : NULL;
}

/* ---- parsing values with units ---------------------------------------------------------- */

typedef struct unit {
  const char *name;
  double factor;
} unit;

static const unit rate_units[] = {
  {"B/s", 1},       {"KB/s", 1e3},  {"MB/s", 1e6},  {"GB/s", 1e9},  {"TB/s", 1e12},
  {"KiB/s", 1024.}, {"MiB/s", 1048576.}, {"GiB/s", 1073741824.}, {"TiB/s", 1099511627776.}, {NULL, 0},
};
static const unit flops_units[] = {
  {"FLOPS", 1}, {"KFLOPS", 1e3}, {"MFLOPS", 1e6}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15},
  {"G", 1e9},   {"T", 1e12},     {"P", 1e15},     {NULL, 0},
};
static const unit time_units[] = {
  {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {NULL, 0},
};

/* A number, then optional spaces and a unit from the list (case-insensitive); no unit: factor 1. */
static int parse_with_unit(const char *s, const unit *units, double *out) {
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v < 0) return -1;
  while (*end == ' ') end++;
  if (!*end) {
    *out = v;
    return 0;
  }
  for (const unit *u = units; u->name; u++)
    if (!strcasecmp(end, u->name)) {
      *out = v * u->factor;
      return 0;
    }
  return -1;
}

static const char *kind_example(int kind) {
  switch (kind) {
  case SIM_DF_BYTES: return "a size such as 80GB, 24GiB or 4MiB";
  case SIM_DF_INT: return "a whole number";
  case SIM_DF_RATE: return "a rate such as 25GB/s or 1.5TB/s";
  case SIM_DF_FLOPS: return "a rate such as 19.5TFLOPS or 312T";
  case SIM_DF_TIME: return "a time such as 5us, 1.5ms or 2s";
  case SIM_DF_PER_GIB: return "a time per GiB such as 72us or 281ms";
  default: return "text";
  }
}

int sim_device_set(sim_device_profile *p, const char *key, const char *value, char *err, size_t errlen) {
  const sim_device_field *f = sim_device_field_find(key);
  if (!f) {
    snprintf(err, errlen, "unknown device field '%s' (see 'memplay devices --fields')", key);
    return -1;
  }
  if (f->kind == SIM_DF_TEXT) {
    size_t n = strlen(value);
    if (n >= SIM_DEVICE_TEXT_MAX) {
      snprintf(err, errlen, "value of '%s' is too long (at most %d characters)", key, SIM_DEVICE_TEXT_MAX - 1);
      return -1;
    }
    memcpy((char *)p + f->offset, value, n + 1);
    return 0;
  }
  double v;
  int rc;
  switch (f->kind) {
  case SIM_DF_BYTES: {
    uint64_t b;
    rc = sim_parse_size(value, &b);
    if (!rc && b > SIM_SIZE_MAX) {
      snprintf(err, errlen, "'%s' is '%s', more than a device could have (at most 1 PiB)", key, value);
      return -1;
    }
    v = (double)b;
    break;
  }
  case SIM_DF_RATE: rc = parse_with_unit(value, rate_units, &v); break;
  case SIM_DF_FLOPS: rc = parse_with_unit(value, flops_units, &v); break;
  case SIM_DF_TIME:
  case SIM_DF_PER_GIB: rc = parse_with_unit(value, time_units, &v); break;
  default: {
    char *end;
    errno = 0;
    long n = strtol(value, &end, 10);
    rc = (end == value || *end || errno || n < 0 || n > 1000000) ? -1 : 0;
    v = (double)n;
  }
  }
  if (rc || !sim_device_number_ok(f, v)) {
    snprintf(err, errlen, "'%s' wants %s, not '%s'", key, kind_example(f->kind), value);
    return -1;
  }
  sim_device_set_number(p, f, v);
  return 0;
}

void sim_device_format(const sim_device_profile *p, const sim_device_field *f, char *buf, size_t n) {
  double v = sim_device_get_number(p, f);
  switch (f->kind) {
  case SIM_DF_TEXT: snprintf(buf, n, "%s", sim_device_get_text(p, f)); break;
  case SIM_DF_BYTES:
    if (v >= 1073741824.) snprintf(buf, n, "%.2f GiB", v / 1073741824.);
    else if (v >= 1048576.) snprintf(buf, n, "%.2f MiB", v / 1048576.);
    else snprintf(buf, n, "%.0f B", v);
    break;
  case SIM_DF_INT: snprintf(buf, n, "%.0f", v); break;
  case SIM_DF_RATE: snprintf(buf, n, "%.2f GB/s", v / 1e9); break;
  case SIM_DF_FLOPS: snprintf(buf, n, v > 0 ? "%.1f TFLOPS" : "not supported", v / 1e12); break;
  case SIM_DF_TIME:
  case SIM_DF_PER_GIB: {
    const char *per = f->kind == SIM_DF_PER_GIB ? " per GiB" : "";
    if (v >= 1e9) snprintf(buf, n, "%.3f s%s", v / 1e9, per);
    else if (v >= 1e6) snprintf(buf, n, "%.3f ms%s", v / 1e6, per);
    else if (v >= 1e3) snprintf(buf, n, "%.2f us%s", v / 1e3, per);
    else snprintf(buf, n, "%.0f ns%s", v, per);
    break;
  }
  default: snprintf(buf, n, "?");
  }
}

int sim_device_name_ok(const char *name) {
  size_t n = strlen(name);
  if (!n || n >= SIM_DEVICE_NAME_MAX) return 0;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.') return 0;
  return 1;
}

int sim_device_check(const sim_device_profile *p, char *err, size_t errlen) {
  if (!sim_device_name_ok(p->name)) {
    snprintf(err, errlen, "device name '%s' is not valid (letters, digits, '-', '_', '.'; at most %d)", p->name,
             SIM_DEVICE_NAME_MAX - 1);
    return -1;
  }
  static const char *const positive[] = {"total_memory", "mem_bw", "h2d_pinned_bw", "d2h_pinned_bw",
                                          "h2d_pageable_bw", "d2h_pageable_bw", "d2d_bw", "p2p_bw",
                                          "host_copy_bw", "copy_engines", "staging_buffer", "launch_queue"};
  for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) {
    const sim_device_field *f = sim_device_field_find(positive[i]);
    if (!(sim_device_get_number(p, f) > 0)) {
      snprintf(err, errlen, "device '%s': '%s' must be greater than zero", p->name, f->key);
      return -1;
    }
  }
  if (p->context_bytes >= p->total_memory) {
    snprintf(err, errlen, "device '%s': 'context_bytes' must be less than 'total_memory'", p->name);
    return -1;
  }
  if (p->h2d_pageable_bw > p->h2d_pinned_bw || p->d2h_pageable_bw > p->d2h_pinned_bw) {
    snprintf(err, errlen, "device '%s': a pageable bandwidth cannot exceed the pinned one (pageable copies are staged "
             "through pinned memory)", p->name);
    return -1;
  }
  return 0;
}

/* ---- matching a recorded device name ------------------------------------------------------ */

#define MAX_TOKENS 16
#define TOKEN_MAX 24

/* Splits text into upper-case alphanumeric words. */
static int tokenize(const char *s, char tok[MAX_TOKENS][TOKEN_MAX]) {
  int n = 0;
  while (*s && n < MAX_TOKENS) {
    while (*s && !isalnum((unsigned char)*s)) s++;
    if (!*s) break;
    int k = 0;
    while (*s && isalnum((unsigned char)*s)) {
      if (k < TOKEN_MAX - 1) tok[n][k++] = (char)toupper((unsigned char)*s);
      s++;
    }
    tok[n++][k] = 0;
  }
  return n;
}

/* 1 when the words of pat appear in the name's words at word boundaries ("RTX 4090" matches
 * "GeForce RTX 4090" and "RTX4090"; "L4" does not match "L40S"; "T4" does not match "RTX 4090"). */
static int words_match(char name[MAX_TOKENS][TOKEN_MAX], int nn, const char *pat) {
  char pt[MAX_TOKENS][TOKEN_MAX];
  int np = tokenize(pat, pt);
  if (!np) return 0;
  char want[MAX_TOKENS * TOKEN_MAX] = "";
  for (int i = 0; i < np; i++) strcat(want, pt[i]);
  size_t wl = strlen(want);
  for (int i = 0; i < nn; i++) {
    char have[MAX_TOKENS * TOKEN_MAX] = "";
    for (int j = i; j < nn; j++) {
      strcat(have, name[j]);
      size_t hl = strlen(have);
      if (hl == wl && !strcmp(have, want)) return 1;
      if (hl >= wl) break;
    }
  }
  return 0;
}

/* A size written in the name ("80GB", "32GB"), in bytes (taken as GiB, as card names round), or 0. */
static uint64_t size_in_name(char name[MAX_TOKENS][TOKEN_MAX], int nn) {
  for (int i = 0; i < nn; i++) {
    char *end;
    unsigned long v = strtoul(name[i], &end, 10);
    if (end != name[i] && v > 0 && v < 4096 && !strcmp(end, "GB")) return (uint64_t)v << 30;
  }
  return 0;
}

int sim_device_match(const sim_device_profile *p, const char *recorded_name, uint64_t recorded_memory) {
  if (!recorded_name || !*p->match) return 0;
  char name[MAX_TOKENS][TOKEN_MAX];
  int nn = tokenize(recorded_name, name);
  int found = 0;
  const char *s = p->match;
  while (*s && !found) {
    size_t n = strcspn(s, ",");
    char pat[SIM_DEVICE_TEXT_MAX];
    snprintf(pat, sizeof pat, "%.*s", (int)n, s);
    found = words_match(name, nn, pat);
    s += n + (s[n] == ',');
  }
  if (!found) return 0;
  uint64_t want = recorded_memory ? recorded_memory : size_in_name(name, nn);
  if (!want || !p->total_memory) return 1;
  double rel = fabs((double)want - (double)p->total_memory) / (double)p->total_memory;
  return 1 + (int)(1000.0 * (rel < 1 ? 1 - rel : 0));
}

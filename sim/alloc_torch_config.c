/* alloc_torch_config.c: the torch model's settings: PYTORCH_CUDA_ALLOC_CONF options, or those a snapshot recorded. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/torch.h"

/*
 * As c10/cuda/CUDAAllocatorConfig.cpp parses PYTORCH_CUDA_ALLOC_CONF: PyTorch's defaults, then
 * each option in the order given. A replay's SPEC gives the options ("torch:expandable_segments:
 * True"); without any, the model takes the settings the trace recorded, which a PyTorch snapshot
 * keeps under its own names (max_split_size in bytes, ...) next to the configuration string.
 */

static void config_defaults(tconfig *c) {
  memset(c, 0, sizeof *c);
  c->max_split_size = UINT64_MAX;
  c->max_non_split_rounding = kLargeBuffer;
}

/* ---- PYTORCH_CUDA_ALLOC_CONF ------------------------------------------------------------------ */

/* A whole non-negative decimal number, as PyTorch's stoul/toSizeT read it. */
static int parse_count(const char *s, uint64_t *out) {
  if (!*s) return -1;
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  *out = v;
  return 0;
}

static int fail(char *err, size_t n, const char *fmt, const char *a, const char *b) {
  snprintf(err, n, fmt, a, b);
  return -1;
}

/* max_split_size_mb / max_non_split_rounding_mb: whole MiB, at least kLargeBuffer (20). */
static int parse_mb_at_least_20(const sim_option *o, uint64_t *out, char *err, size_t n) {
  uint64_t v;
  if (parse_count(o->value, &v)) return fail(err, n, "option '%s' wants a whole number of MiB, not '%s'", o->key, o->value);
  if (v < kLargeBuffer / MiB)
    return fail(err, n, "option '%s' is too small: it must be at least 20 (MiB), as in PyTorch, not '%s'", o->key,
                o->value);
  if (v > UINT64_MAX / MiB) v = UINT64_MAX / MiB;
  *out = v * MiB;
  return 0;
}

/* roundup_power2_divisions: `4` (every interval), or `[256:1,512:2,1024:4,>:8]` (keys in MiB,
 * powers of 2; entries before the first key take its value; `>` fills those after the last). */
static int parse_roundup(const sim_option *o, uint64_t div[kRoundUpPowerOfTwoIntervals], char *err, size_t n) {
  const char *v = o->value;
  uint64_t x;
  if (v[0] != '[') {
    if (parse_count(v, &x) || !is_pow2(x))
      return fail(err, n, "option '%s' wants a power of 2 or a list such as [256:1,512:2,>:4], not '%s'", o->key, v);
    for (int i = 0; i < kRoundUpPowerOfTwoIntervals; i++) div[i] = x;
    return 0;
  }
  size_t len = strlen(v);
  if (len < 2 || v[len - 1] != ']') return fail(err, n, "option '%s': the list '%s' does not end with ']'", o->key, v);
  char *text = sim_xmalloc(len);
  memcpy(text, v + 1, len - 2);
  text[len - 2] = 0;
  int first = 1, last_index = -1, rc = 0;
  for (char *item = text, *next; item && *item; item = next) {
    next = strchr(item, ',');
    if (next) *next++ = 0;
    char *colon = strchr(item, ':');
    if (!colon) {
      rc = fail(err, n, "option '%s': '%s' is not KEY:DIVISIONS", o->key, item);
      break;
    }
    *colon = 0;
    const char *key = item, *val = colon + 1;
    if (parse_count(val, &x) || (x && !is_pow2(x))) {
      rc = fail(err, n, "option '%s': divisions must be a power of 2 or 0, not '%s'", o->key, val);
      break;
    }
    if (!strcmp(key, ">")) {
      for (int i = last_index + 1; i < kRoundUpPowerOfTwoIntervals; i++) div[i] = x;
      continue;
    }
    uint64_t mb;
    if (parse_count(key, &mb) || !is_pow2(mb)) {
      rc = fail(err, n, "option '%s': interval '%s' must be a power of 2 (MiB)", o->key, key);
      break;
    }
    int index = log2_floor(mb);
    if (index > kRoundUpPowerOfTwoIntervals - 1) index = kRoundUpPowerOfTwoIntervals - 1;
    if (first) {
      for (int i = 0; i < index; i++) div[i] = x;
      first = 0;
    }
    div[index] = x;
    last_index = index;
  }
  free(text);
  return rc;
}

static int parse_fraction(const sim_option *o, double *out, int open, char *err, size_t n) {
  double v;
  if (sim_opt_double(o, &v, err, n)) return -1;
  if (open ? !(v > 0 && v < 1) : !(v >= 0 && v <= 1))
    return fail(err, n, open ? "option '%s' must lie in (0, 1), not '%s'" : "option '%s' must lie in [0, 1], not '%s'",
                o->key, o->value);
  *out = v;
  return 0;
}

static int config_option(tconfig *c, const sim_option *o, char *err, size_t n) {
  const char *k = o->key;
  int b;
  uint64_t x;
  if (!strcmp(k, "max_split_size_mb")) return parse_mb_at_least_20(o, &c->max_split_size, err, n);
  if (!strcmp(k, "max_non_split_rounding_mb")) return parse_mb_at_least_20(o, &c->max_non_split_rounding, err, n);
  if (!strcmp(k, "garbage_collection_threshold")) return parse_fraction(o, &c->garbage_collection_threshold, 1, err, n);
  if (!strcmp(k, "roundup_power2_divisions")) return parse_roundup(o, c->roundup_power2_divisions, err, n);
  if (!strcmp(k, "expandable_segments")) {
    if (sim_opt_bool(o, &b, err, n)) return -1;
    c->expandable_segments = b;
    return 0;
  }
  if (!strcmp(k, "per_process_memory_fraction")) {
    c->set_fraction = 1;
    return parse_fraction(o, &c->fraction, 0, err, n);
  }
  if (!strcmp(k, "backend")) {
    if (!strcmp(o->value, "native")) return 0;
    if (!strcmp(o->value, "cudaMallocAsync"))
      return fail(err, n, "option '%s:%s' selects another allocator: use the 'async' model instead", k, o->value);
    return fail(err, n, "option '%s' wants native or cudaMallocAsync, not '%s'", k, o->value);
  }
  /* Accepted as PyTorch accepts them; they do not change where device memory goes. */
  if (!strcmp(k, "pinned_num_register_threads")) {
    if (parse_count(o->value, &x) || !is_pow2(x) || x > 128)
      return fail(err, n, "option '%s' wants a power of 2 up to 128, not '%s'", k, o->value);
    return 0;
  }
  if (!strcmp(k, "pinned_reserve_segment_size_mb")) {
    if (parse_count(o->value, &x) || !x) return fail(err, n, "option '%s' wants a positive number, not '%s'", k, o->value);
    return 0;
  }
  return sim_opt_bool(o, &b, err, n); /* release_lock_on_cudamalloc, pinned_use_*, graph_capture_* */
}

const sim_option_spec _torch_options[] = {
  {"max_split_size_mb", "MiB (>= 20): blocks this large are never split, nor used for smaller requests"},
  {"max_non_split_rounding_mb", "MiB (>= 20, default 20): how much larger an oversize block may be than its request"},
  {"roundup_power2_divisions", "N or [MiB:N,...,>:N]: round sizes up to N divisions of a power of 2"},
  {"garbage_collection_threshold", "(0,1): free old cached blocks above this share of the allowed memory"},
  {"expandable_segments", "True/False: one growing segment per stream and pool, mapped in pages"},
  {"per_process_memory_fraction", "[0,1]: torch.cuda.set_per_process_memory_fraction (enables GC)"},
  {"backend", "native (cudaMallocAsync is the 'async' model)"},
  {"release_lock_on_cudamalloc", "True/False: accepted, no effect on placement"},
  {"pinned_use_cuda_host_register", "True/False: host memory, accepted and ignored"},
  {"pinned_num_register_threads", "power of 2: host memory, accepted and ignored"},
  {"pinned_use_background_threads", "True/False: host memory, accepted and ignored"},
  {"pinned_reserve_segment_size_mb", "MiB: host memory, accepted and ignored"},
  {"graph_capture_record_stream_reuse", "True/False: CUDA graphs only, accepted and ignored"},
  {NULL, NULL},
};

/* ---- the settings a snapshot recorded ------------------------------------------------------- */

/* A whole number as yajl reads a JSON integer: an optional '-', digits, within long long. */
static int recorded_integer(const char *s, long long *out) {
  int neg = *s == '-';
  const char *p = s + neg;
  if (!*p) return 0;
  unsigned long long v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9' || v > (unsigned long long)(LLONG_MAX - (*p - '0')) / 10) return 0;
    v = v * 10 + (unsigned long long)(*p - '0');
  }
  *out = neg ? -(long long)v : (long long)v;
  return 1;
}

/* Whether s is a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int recorded_number(const char *s) {
  const char *p = s + (*s == '-');
  if (*p == '0') p++;
  else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
  else return 0;
  if (*p == '.') {
    if (*++p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
  }
  return !*p;
}

/* The end of the item that starts at p in a flattened list: the next ',' (or ':' when stop is
 * ':') outside brackets, or the end of the text. */
static char *list_item_end(char *p, char stop) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '[') depth++;
    else if (*p == ']' && depth > 0) depth--;
    else if (!depth && (*p == ',' || *p == stop)) break;
  }
  return p;
}

/* One entry of the recorded roundup_power2_divisions object: MiB (a power of 2): divisions. */
static int recorded_division(tconfig *c, char *item, char *err, size_t n) {
  char *colon = list_item_end(item, ':');
  long long x = -1;
  uint64_t mb;
  if (*colon == ':') *colon++ = 0;
  if (parse_count(item, &mb) || !is_pow2(mb) || !*colon || !recorded_integer(colon, &x) || x < 0) {
    snprintf(err, n, "the recorded roundup_power2_divisions has an entry '%s' that is not MiB: divisions", item);
    return -1;
  }
  int index = log2_floor(mb);
  if (index < kRoundUpPowerOfTwoIntervals) c->roundup_power2_divisions[index] = (uint64_t)x;
  return 0;
}

/* roundup_power2_divisions as recorded: an object {"MiB": divisions, ...} ([1:0,2:4,...] once
 * flattened), or an array of divisions by interval ([0,4,...]), whose entries that are not whole
 * numbers of at least 0 are skipped. */
static int recorded_roundup(tconfig *c, const char *value, char *err, size_t n) {
  size_t len = strlen(value);
  if (len < 2 || value[len - 1] != ']') return 0;
  char *text = sim_xmalloc(len);
  memcpy(text, value + 1, len - 2);
  text[len - 2] = 0;
  int rc = 0, is_object = *list_item_end(text, ':') == ':';
  size_t j = 0;
  for (char *item = text; *item && !rc;) {
    char *end = list_item_end(item, 0), *next = *end ? end + 1 : end;
    *end = 0;
    long long x;
    if (is_object) rc = recorded_division(c, item, err, n);
    else if (j < kRoundUpPowerOfTwoIntervals && recorded_integer(item, &x) && x >= 0)
      c->roundup_power2_divisions[j] = (uint64_t)x;
    j++;
    item = next;
  }
  free(text);
  return rc;
}

/* One recorded setting, by PyTorch's own name for it; others (and values of another type) are
 * ignored. *structured: it was one of the settings that stand for PYTORCH_CUDA_ALLOC_CONF. */
static int recorded_setting(tconfig *c, const sim_option *o, int *structured, char *err, size_t n) {
  const char *k = o->key, *v = o->value;
  long long x;
  if (!strcmp(k, "max_split_size") && recorded_integer(v, &x)) {
    c->max_split_size = x < 0 ? UINT64_MAX : (uint64_t)x;
    *structured = 1;
  } else if (!strcmp(k, "max_non_split_rounding_size") && recorded_integer(v, &x) && x > 0) {
    c->max_non_split_rounding = (uint64_t)x;
  } else if (!strcmp(k, "garbage_collection_threshold") && recorded_number(v)) {
    c->garbage_collection_threshold = strtod(v, NULL);
    *structured = 1;
  } else if (!strcmp(k, "expandable_segments") && (!strcmp(v, "True") || !strcmp(v, "False"))) {
    c->expandable_segments = v[0] == 'T';
    *structured = 1;
  } else if (!strcmp(k, "roundup_power2_divisions") && v[0] == '[') {
    *structured = 1;
    return recorded_roundup(c, v, err, n);
  }
  return 0;
}

/* The snapshot's allocator_settings (io/settings.h flattens them into options): {"max_split_size":
 * -1, "garbage_collection_threshold": 0.0, "expandable_segments": false, "roundup_power2_divisions":
 * {"1": 0, ...}, ...}. Fields it does not have keep PyTorch's defaults; PYTORCH_CUDA_ALLOC_CONF (the
 * first one) is read only when none of the structured fields is there. */
static int config_recorded(tconfig *c, const sim_recorded *rec, char *err, size_t n) {
  if (rec->error) {
    snprintf(err, n, "%s", rec->error);
    return -1;
  }
  int rc = 0, structured = 0;
  for (size_t i = 0; i < rec->nopts && !rc; i++) rc = recorded_setting(c, &rec->opts[i], &structured, err, n);
  const char *conf_text = NULL;
  for (size_t i = 0; i < rec->nopts && !conf_text; i++)
    if (!strcmp(rec->opts[i].key, "PYTORCH_CUDA_ALLOC_CONF")) conf_text = rec->opts[i].value;
  if (!rc && !structured && conf_text && *conf_text) {
    char *copy = strdup(conf_text);
    sim_option *opts = NULL;
    size_t nopts = 0, cap = 0;
    rc = sim_options_split(&sim_torch_ops, copy, &opts, &nopts, &cap, err, n) ? -1 : 0;
    for (size_t i = 0; i < nopts && !rc; i++) rc = config_option(c, &opts[i], err, n);
    free(opts);
    free(copy);
  }
  return rc;
}

/* ---- the model's settings --------------------------------------------------------------------- */

/* The variable PyTorch reads its settings from when the process starts: PYTORCH_CUDA_ALLOC_CONF,
 * else PYTORCH_HIP_ALLOC_CONF (ROCm builds; the same syntax). NULL when neither is set. */
static const char *config_environment(const sim_alloc_config *cfg, const char **name) {
  static const char *const names[] = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"};
  for (size_t i = 0; cfg->getenv && i < sizeof names / sizeof names[0]; i++) {
    const char *v = cfg->getenv(names[i]);
    if (v && *v) {
      *name = names[i];
      return v;
    }
  }
  return NULL;
}

/* The environment's settings, as PyTorch parses them. */
static int config_from_environment(tconfig *c, const char *name, const char *text, char *err, size_t n) {
  char *copy = strdup(text);
  sim_option *opts = NULL;
  size_t nopts = 0, cap = 0;
  char oerr[400];
  int rc = sim_options_split(&sim_torch_ops, copy, &opts, &nopts, &cap, oerr, sizeof oerr) ? -1 : 0;
  for (size_t i = 0; i < nopts && !rc; i++) rc = config_option(c, &opts[i], oerr, sizeof oerr);
  if (rc) snprintf(err, n, "%s='%s' (from the environment): %s", name, text, oerr);
  free(opts);
  free(copy);
  return rc;
}

int _torch_config_init(tconfig *c, const sim_alloc_config *cfg, char *err, size_t n) {
  config_defaults(c);
  const char *env_name = NULL, *env = config_environment(cfg, &env_name);
  if (cfg->nopts || env) { /* PyTorch's defaults, the environment's settings, then the SPEC's options */
    if (env && config_from_environment(c, env_name, env, err, n)) return -1;
    for (size_t i = 0; i < cfg->nopts; i++)
      if (config_option(c, &cfg->opts[i], err, n)) return -1;
  } else if (cfg->recorded) { /* else the settings the trace recorded */
    if (config_recorded(c, cfg->recorded, err, n)) return -1;
  }
  for (int i = 0; i < kRoundUpPowerOfTwoIntervals; i++)
    if (c->roundup_power2_divisions[i] > 1) c->roundup = 1;
  return 0;
}

/* alloc_torch.c: the `torch` model: PyTorch's CUDA caching allocator, decision for decision. */
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_torch.h"
#include "fitset.h"
#include "hashmap.h"

/*
 * The rules are those of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) and of the
 * PYTORCH_CUDA_ALLOC_CONF parser (c10/core/AllocatorConfig.cpp); docs/allocators.md lists them
 * with what this model assumes. The functions below carry PyTorch's names and come in the order
 * malloc meets them: rounding, get_free_block, alloc_found_block; then free and free_block;
 * then how segments come and go (alloc_block, release_available_cached_blocks,
 * release_cached_blocks, garbage collection); then expandable segments; then statistics.
 *
 * What a replay cannot see is decided as follows:
 *  - free_requested and free_completed arrive as events: a block waits between the two as a
 *    block with outstanding record_stream events does (it is active, not allocated, not reusable);
 *  - the device-wide synchronize and release_cached_blocks complete every waiting block, as
 *    synchronize_and_free_events does;
 *  - no CUDA graph capture is under way (no private pools) and no free-memory callback frees
 *    anything;
 *  - per_process_memory_fraction stands for torch.cuda.set_per_process_memory_fraction.
 */

/* ---- constants ----------------------------------------------------------------------------- */

#define KiB (UINT64_C(1) << 10)
#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

enum {
  kMinBlockSize = 512,              /* every size is rounded to a multiple of 512 bytes */
  kRoundUpPowerOfTwoIntervals = 16, /* roundup_power2_divisions: one entry per power of 2 from 1 MiB to 32 GiB */
};
static const uint64_t kSmallSize = 1 * MiB;      /* largest request of the small pool */
static const uint64_t kSmallBuffer = 2 * MiB;    /* small-pool segment; small expandable page */
static const uint64_t kMinLargeAlloc = 10 * MiB; /* requests below this share a kLargeBuffer segment */
static const uint64_t kLargeBuffer = 20 * MiB;   /* large segment for 1-10 MiB; large expandable page */
static const uint64_t kRoundLarge = 2 * MiB;     /* larger segments are rounded up to this */
static const uint64_t kOneExaByte = UINT64_C(1) << 60; /* allocate() refuses requests this large */

_Static_assert(sizeof(uintptr_t) >= 8, "handles pack a generation and an index into 64 bits");

/* ---- configuration (PYTORCH_CUDA_ALLOC_CONF) ----------------------------------------------- */

typedef struct tconfig {
  uint64_t max_split_size;         /* UINT64_MAX: no limit */
  uint64_t max_non_split_rounding; /* how much larger an oversize block may be than the request */
  double garbage_collection_threshold; /* 0: off */
  int expandable_segments;
  uint64_t roundup_power2_divisions[kRoundUpPowerOfTwoIntervals];
  int roundup;                     /* any roundup_power2_divisions entry is above 1 */
  int set_fraction;                /* per_process_memory_fraction was given */
  double fraction;
} tconfig;

static void config_defaults(tconfig *c) {
  memset(c, 0, sizeof *c);
  c->max_split_size = UINT64_MAX;
  c->max_non_split_rounding = kLargeBuffer;
}

static int is_pow2(uint64_t v) { return v && !(v & (v - 1)); }
static int log2_floor(uint64_t v) { return 63 - __builtin_clzll(v); }

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

static const sim_option_spec torch_options[] = {
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

/* ---- blocks, pools and segments ------------------------------------------------------------- */

typedef struct tblock tblock;
typedef struct tpool tpool;
typedef struct tseg tseg;

struct tblock {
  /* First cache line: what a search of the pool reads. The pool's order is (stream, size, ptr);
   * that of unmapped ranges (stream, ptr). */
  int64_t stream;
  uint64_t size;
  uint64_t ptr;
  RB_ENTRY(tblock) link;        /* in pool->blocks (free, mapped) or pool->unmapped */
  uint16_t cls;                 /* its size class while in pool->blocks (fitset.h) */
  uint8_t allocated;
  uint8_t mapped;               /* backed by memory (always, outside expandable segments) */
  uint8_t waiting;              /* freed by the program, not yet reusable (event_count > 0) */
  uint8_t live;                 /* in use by the model (the arena keeps the rest) */
  /* Second cache line. */
  tblock *prev, *next;          /* neighbours in the segment */
  tpool *pool;
  tseg *es;                     /* its expandable segment, or NULL */
  uint64_t requested;           /* requested_size */
  int64_t gc_count_base;        /* get_free_blocks_call_count when it entered the pool */
  uint32_t index;
  uint32_t gen;                 /* handle = gen << 32 | index */
  uint8_t pad_[8];
};
/* A block waiting for free_completed is in no pool: its links chain the waiting list. */
#define WNEXT(b) RB_LEFT(b, link)
#define WPREV(b) RB_RIGHT(b, link)

_Static_assert(sizeof(tblock) == 128 && offsetof(tblock, prev) == 64, "a search reads one cache line per block");

RB_HEAD(tunmapped, tblock);

static inline int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

/* BlockComparatorSize, (stream, size, ptr) with streams compared as the raw cudaStream_t
 * pointers they are, orders the free blocks: fitset.h keeps that order and answers its
 * lower_bound quickly. */
SIM_FITSET_DEFINE(tfree, tblock, link, cls, stream, size, ptr)

/* BlockComparatorAddress */
static inline int by_address(const tblock *a, const tblock *b) {
  if (a->stream != b->stream) return cmp_u64((uint64_t)a->stream, (uint64_t)b->stream);
  return cmp_u64(a->ptr, b->ptr);
}

SIM_RB_GENERATE(tunmapped, tblock, link, by_address)

struct tpool {
  struct tfree blocks;       /* free mapped blocks */
  struct tunmapped unmapped; /* unmapped ranges of expandable segments */
  int is_small;
  int64_t get_free_blocks_call_count;
  struct tstat_set *stats;   /* the pool's own statistics (SMALL_POOL or LARGE_POOL) */
};

/* ExpandableSegment: address space for 1 1/8 of the card, mapped page by page. */
struct tseg {
  uint64_t base, size, page;
  int64_t stream;
  tpool *pool;
  tseg *next;
};

/* ---- statistics, declared once ---------------------------------------------------------------- */

enum { AGGREGATE, SMALL_POOL, LARGE_POOL, STAT_TYPES };

typedef sim_gauge tstat; /* current and peak (PyTorch's cumulative allocated/freed are not kept) */

/* DeviceStats: one Stat per type for each of these... */
#define TORCH_STAT_ARRAYS(X)                                                        \
  X(allocation)           /* blocks allocated */                                    \
  X(segment)              /* cudaMalloc'd segments */                               \
  X(active)               /* blocks allocated or waiting for free_completed */      \
  X(inactive_split)       /* free blocks inside split segments */                   \
  X(allocated_bytes)      /* sizes of allocated blocks */                           \
  X(reserved_bytes)       /* segments and mapped pages */                           \
  X(active_bytes)         /* sizes of active blocks */                              \
  X(inactive_split_bytes) /* sizes of free blocks inside split segments */          \
  X(requested_bytes)      /* requested sizes of active blocks */
/* ...these two single Stats... */
#define TORCH_STATS(X)       \
  X(oversize_allocations)    \
  X(oversize_segments)
/* ...and these counters (num_alloc_retries and num_ooms are the engine's, in sim_alloc_stats). */
#define TORCH_COUNTERS(X)                                                    \
  X(num_sync_all_streams) /* synchronize_and_free_events calls */           \
  X(num_device_alloc)     /* cudaMalloc and page maps */                     \
  X(num_device_free)      /* cudaFree and page unmaps */

/* One set per type, so that a call touches the few cache lines of its pool's set. */
struct tstat_set {
#define SIM_X(n) tstat n;
  TORCH_STAT_ARRAYS(SIM_X)
#undef SIM_X
};

typedef struct tstats {
  struct tstat_set type[STAT_TYPES];
#define SIM_X(n) tstat n;
  TORCH_STATS(SIM_X)
#undef SIM_X
#define SIM_X(n) uint64_t n;
  TORCH_COUNTERS(SIM_X)
#undef SIM_X
} tstats;

static inline void increase_stat(tstat *s, uint64_t amount) {
  s->current += (int64_t)amount;
  if (s->current > s->peak) s->peak = s->current;
}

static inline void decrease_stat(tstat *s, uint64_t amount) { s->current -= (int64_t)amount; }

/* Each array's AGGREGATE entry, except that the four byte counts the replay engine reads live in
 * the engine's sim_alloc_stats (so nothing is copied after each call). */
#define AGG_allocation(m) (&(m)->stats.type[AGGREGATE].allocation)
#define AGG_segment(m) (&(m)->stats.type[AGGREGATE].segment)
#define AGG_active(m) (&(m)->stats.type[AGGREGATE].active)
#define AGG_inactive_split(m) (&(m)->stats.type[AGGREGATE].inactive_split)
#define AGG_allocated_bytes(m) (&(m)->st.allocated)
#define AGG_reserved_bytes(m) (&(m)->st.reserved)
#define AGG_active_bytes(m) (&(m)->st.active)
#define AGG_inactive_split_bytes(m) (&(m)->stats.type[AGGREGATE].inactive_split_bytes)
#define AGG_requested_bytes(m) (&(m)->st.requested)

/* The AGGREGATE entry and the pool's own entry, as get_stat_types_for_pool selects them. */
#define POOL_INC(m, pool, name, amount)                 \
  do {                                                  \
    increase_stat(AGG_##name(m), (amount));             \
    increase_stat(&(pool)->stats->name, (amount));      \
  } while (0)
#define POOL_DEC(m, pool, name, amount)                 \
  do {                                                  \
    decrease_stat(AGG_##name(m), (amount));             \
    decrease_stat(&(pool)->stats->name, (amount));      \
  } while (0)

/* ---- the model -------------------------------------------------------------------------------- */

#define CHUNK_BITS 10
#define CHUNK_SIZE (1u << CHUNK_BITS)

typedef struct torch {
  /* what every call reads, first */
  sim_alloc_stats st;       /* what the replay engine reads; the four byte counts' AGGREGATE stats */
  tconfig cfg;
  sim_device *dev;
  tblock **chunks;          /* the block arena: stable addresses, indices for handles */
  tblock *free_list;
  uint32_t next_index;
  /* Blocks waiting for free_completed, oldest first: a list, and the newest apart (it is almost
   * always the next one completed, so it never enters the list). */
  tblock *waiting_newest, *waiting_head, *waiting_tail;
  uint64_t total_allocated_memory; /* segments and mapped pages */
  uint64_t allowed_memory_maximum;
  tpool small_blocks, large_blocks;
  tstats stats;
  tseg *segments;           /* live expandable segments */
  size_t nchunks, chunks_cap;
  uint64_t tree_conflicts;  /* inserts that found an equal key (a broken state; check reports it) */
} torch;

typedef struct alloc_params {
  uint64_t size;       /* rounded */
  int64_t stream;
  tpool *pool;
  uint64_t alloc_size; /* get_allocation_size(size) */
  tblock *block;
  int in_pool;         /* block is still in the pool's set (found by get_free_block) */
} alloc_params;

static tblock *block_at(const torch *m, uint32_t index) {
  if (!index || index >= m->next_index) return NULL;
  return &m->chunks[index >> CHUNK_BITS][index & (CHUNK_SIZE - 1)];
}

static tblock *block_new(torch *m, int64_t stream, uint64_t size, tpool *pool, uint64_t ptr) {
  tblock *b = m->free_list;
  if (b) {
    m->free_list = b->next;
  } else {
    if (!m->next_index) m->next_index = 1; /* index 0 means none */
    uint32_t i = m->next_index++;
    if ((i >> CHUNK_BITS) >= m->nchunks) {
      sim_grow((void **)&m->chunks, &m->chunks_cap, m->nchunks + 1, sizeof *m->chunks);
      tblock *chunk = aligned_alloc(64, CHUNK_SIZE * sizeof(tblock)); /* a block per cache line pair */
      if (!chunk) {
        fputs("memplay: out of memory\n", stderr);
        abort();
      }
      memset(chunk, 0, CHUNK_SIZE * sizeof(tblock));
      m->chunks[m->nchunks++] = chunk;
    }
    b = &m->chunks[i >> CHUNK_BITS][i & (CHUNK_SIZE - 1)];
    b->index = i;
  }
  b->stream = stream;
  b->size = size;
  b->ptr = ptr;
  RB_LEFT(b, link) = RB_RIGHT(b, link) = RB_PARENT(b, link) = NULL;
  b->allocated = b->waiting = 0;
  b->mapped = 1;
  b->live = 1;
  b->prev = b->next = NULL;
  b->pool = pool;
  b->es = NULL;
  b->requested = 0;
  b->gc_count_base = 0;
  return b;
}

static void block_delete(torch *m, tblock *b) {
  b->live = 0;
  b->gen++;
  b->next = m->free_list;
  m->free_list = b;
}

static uintptr_t handle_of(const tblock *b) { return (uintptr_t)b->gen << 32 | b->index; }

static tblock *block_of(const torch *m, uintptr_t h) {
  tblock *b = block_at(m, (uint32_t)(h & 0xffffffffu));
  return b && b->live && b->gen == (uint32_t)(h >> 32) ? b : NULL;
}

static int is_split(const tblock *b) { return b->prev || b->next; }

static void insert_into_blocks(torch *m, tpool *pool, tblock *b) {
  b->gc_count_base = pool->get_free_blocks_call_count;
  if (tfree_insert(&pool->blocks, b)) m->tree_conflicts++;
}

static void insert_unmapped(torch *m, tpool *pool, tblock *b) {
  if (RB_INSERT(tunmapped, &pool->unmapped, b)) m->tree_conflicts++;
}

/* ---- rounding ---------------------------------------------------------------------------------- */

static uint64_t roundup_power2_divisions(const torch *m, uint64_t size) {
  int index = log2_floor(size) - 20; /* intervals start at 1 MiB */
  if (index < 0) index = 0;
  if (index > kRoundUpPowerOfTwoIntervals - 1) index = kRoundUpPowerOfTwoIntervals - 1;
  return m->cfg.roundup_power2_divisions[index];
}

/* 1200 with 4 divisions lies between 1024 and 2048, divided at 1280, 1536, 1792: 1280. */
static uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (is_pow2(size)) return size;
  uint64_t power2_floor = UINT64_C(1) << log2_floor(size);
  uint64_t power2_division = power2_floor >> log2_floor(divisions);
  if (power2_division == 0) return power2_floor << 1;
  uint64_t round_size_floor = size & ~(power2_division - 1);
  return round_size_floor == size ? size : round_size_floor + power2_division;
}

static uint64_t round_size(const torch *m, uint64_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  uint64_t divisions = m->cfg.roundup ? roundup_power2_divisions(m, size) : 0;
  if (divisions > 1 && size > kMinBlockSize * divisions) return roundup_power2_next_division(size, divisions);
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static uint64_t get_allocation_size(uint64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

static tpool *get_pool(torch *m, uint64_t size) { return size <= kSmallSize ? &m->small_blocks : &m->large_blocks; }

/* ---- malloc ------------------------------------------------------------------------------------ */

static int gc_enabled(const torch *m) { return m->cfg.set_fraction && m->cfg.garbage_collection_threshold > 0; }

static uint64_t expandable_size(const tblock *b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); }

/* get_free_block without its side effects: the block it would take, or NULL. */
static tblock *find_free_block(torch *m, const alloc_params *p) {
  tpool *pool = p->pool;
  tblock *it = tfree_lower_bound(&pool->blocks, p->stream, p->size);
  if (!it) return NULL; /* none on this stream: no reuse across streams */
  if (it->es) {
    if (m->cfg.expandable_segments) {
      /* Best fit counts what an expandable block can grow into (the unmapped range after it). */
      tblock *next = tfree_next_in_stream(&pool->blocks, it);
      while (it->es && next && expandable_size(next) < expandable_size(it)) {
        it = next;
        next = tfree_next_in_stream(&pool->blocks, next);
      }
    } else {
      /* Expandable segments were turned off after some were made: only plain blocks qualify. */
      do {
        it = tfree_next_in_stream(&pool->blocks, it);
      } while (it && it->es);
      if (!it) return NULL;
    }
  }
  /* Do not return an oversized block for a large request. */
  if (p->size < m->cfg.max_split_size && it->size >= m->cfg.max_split_size) return NULL;
  /* Allow oversized block size to be rounded up but within a limit. */
  if (p->size >= m->cfg.max_split_size && it->size >= p->size + m->cfg.max_non_split_rounding) return NULL;
  return it;
}

/* The block stays in the pool's set until alloc_found_block knows whether its remainder can
 * keep its place there (the set's order is all that matters, not when it is updated). */
static int get_free_block(torch *m, alloc_params *p) {
  if (gc_enabled(m)) ++p->pool->get_free_blocks_call_count; /* block ages count only with GC on */
  tblock *b = find_free_block(m, p);
  if (!b) return 0;
  p->block = b;
  p->in_pool = 1;
  return 1;
}

static int should_split(const torch *m, const tpool *pool, uint64_t block_size, uint64_t size) {
  uint64_t remaining = block_size - size;
  if (pool->is_small || m->cfg.expandable_segments) return remaining >= kMinBlockSize;
  return size < m->cfg.max_split_size && remaining > kSmallSize;
}

static tblock *alloc_found_block(torch *m, alloc_params *p, uint64_t orig_size, int split_remainder) {
  tpool *pool = p->pool;
  tblock *block = p->block;
  const int already_split = is_split(block);
  if (split_remainder) {
    /* The allocation takes the front; the remainder keeps the old block and goes back. */
    tblock *remaining = block;
    block = block_new(m, p->stream, p->size, pool, remaining->ptr);
    block->es = remaining->es;
    block->prev = remaining->prev;
    if (block->prev) block->prev->next = block;
    block->next = remaining;
    remaining->prev = block;
    if (p->in_pool) { /* back into the pool with its smaller key, in place when it can */
      tfree_rekey(&pool->blocks, remaining, remaining->size - p->size, remaining->ptr + p->size);
      remaining->gc_count_base = pool->get_free_blocks_call_count;
    } else {
      remaining->ptr += p->size;
      remaining->size -= p->size;
      insert_into_blocks(m, pool, remaining);
    }
    if (already_split && !block->es) {
      POOL_DEC(m, pool, inactive_split_bytes, block->size);
    } else if (!block->es) {
      POOL_INC(m, pool, inactive_split_bytes, remaining->size);
      POOL_INC(m, pool, inactive_split, 1);
    }
  } else {
    if (p->in_pool) tfree_remove(&pool->blocks, block);
    if (already_split && !block->es) {
      POOL_DEC(m, pool, inactive_split_bytes, block->size);
      POOL_DEC(m, pool, inactive_split, 1);
    }
  }
  p->in_pool = 0;
  block->allocated = 1;
  block->requested = orig_size;
  block->gen++;
  POOL_INC(m, pool, allocation, 1);
  POOL_INC(m, pool, allocated_bytes, block->size);
  POOL_INC(m, pool, active, 1);
  POOL_INC(m, pool, active_bytes, block->size);
  POOL_INC(m, pool, requested_bytes, block->requested);
  if (block->size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_allocations, 1);
  return block;
}

static int alloc_block(torch *m, alloc_params *p, int is_retry);
static int release_available_cached_blocks(torch *m, const alloc_params *p);
static void release_cached_blocks(torch *m);
static void garbage_collect_cached_blocks(torch *m);

static int torch_alloc(void *ctx, uint64_t orig_size, int64_t stream, sim_placement *out) {
  torch *m = ctx;
  if (orig_size == 0) { /* allocate(0) hands out nullptr without reaching the allocator */
    *out = (sim_placement){0, 0, 0};
    return SIM_OK;
  }
  if (orig_size >= kOneExaByte) { /* "Tried to allocate more than 1EB memory" */
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  /* process_events(): blocks become reusable through free_completed, in trace order. */
  alloc_params p;
  p.size = round_size(m, orig_size);
  p.stream = stream;
  p.pool = get_pool(m, p.size);
  p.alloc_size = get_allocation_size(p.size);
  p.block = NULL;
  p.in_pool = 0;

  /* First, try to get a block from the existing pool (no free-memory callbacks are registered). */
  int block_found = get_free_block(m, &p);
  /* Can't reuse an existing block; try to get a new one. */
  if (!block_found) {
    if (gc_enabled(m)) garbage_collect_cached_blocks(m);
    block_found = alloc_block(m, &p, 0) ||
                  (release_available_cached_blocks(m, &p) && alloc_block(m, &p, 0)) ||
                  (release_cached_blocks(m), alloc_block(m, &p, 1));
  }
  if (!block_found) {
    m->st.num_ooms++;
    return SIM_EOOM;
  }
  tblock *b = alloc_found_block(m, &p, orig_size, should_split(m, p.pool, p.block->size, p.size));
  out->addr = b->ptr;
  out->size = b->size;
  out->handle = handle_of(b);
  m->st.num_allocs++;
  return SIM_OK;
}

/* ---- free -------------------------------------------------------------------------------------- */

/* combine previously split blocks; returns the size of the subsumed block, or 0 */
static uint64_t try_merge_blocks(torch *m, tblock *dst, tblock *src, tpool *pool) {
  if (!src || src->allocated || src->waiting || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) { /* [src dst] */
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else { /* [dst src] */
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  uint64_t subsumed = src->size;
  dst->size += subsumed;
  if (src->mapped) tfree_remove(&pool->blocks, src);
  else RB_REMOVE(tunmapped, &pool->unmapped, src);
  block_delete(m, src);
  return subsumed;
}

static int mergeable(const tblock *dst, const tblock *src) {
  return src && !src->allocated && !src->waiting && dst->mapped == src->mapped;
}

/* moves a block into the pool of cached free blocks (the free_completed moment), merged with its
 * free neighbours as try_merge_blocks does (prev, then next) */
static void free_block(torch *m, tblock *block) {
  uint64_t original_block_size = block->size, requested_size = block->requested;
  tpool *pool = block->pool;
  tblock *prev = mergeable(block, block->prev) ? block->prev : NULL;
  tblock *next = mergeable(block, block->next) ? block->next : NULL;
  tblock key = {.stream = block->stream, .size = block->size, .ptr = prev ? prev->ptr : block->ptr};
  int64_t net_change_inactive_split_blocks = 0, net_change_inactive_split_size = 0;
  if (prev) {
    key.size += prev->size;
    net_change_inactive_split_blocks -= 1;
    net_change_inactive_split_size -= (int64_t)prev->size;
  }
  if (next) {
    key.size += next->size;
    net_change_inactive_split_blocks -= 1;
    net_change_inactive_split_size -= (int64_t)next->size;
  }
  /* The merged block takes a merged neighbour's place in the pool (in place when it sorts there). */
  tblock *spot = next ? next : prev;
  if (prev && next) tfree_remove(&pool->blocks, prev);
  if (prev) {
    block->prev = prev->prev;
    if (block->prev) block->prev->next = block;
    block_delete(m, prev);
  }
  if (next) {
    block->next = next->next;
    if (block->next) block->next->prev = block;
  }
  block->ptr = key.ptr;
  block->size = key.size;
  if (spot) {
    block->gc_count_base = pool->get_free_blocks_call_count;
    tfree_replace(&pool->blocks, spot, block);
  } else {
    insert_into_blocks(m, pool, block);
  }
  if (next) block_delete(m, next);
  if (is_split(block)) {
    net_change_inactive_split_blocks += 1;
    net_change_inactive_split_size += (int64_t)block->size;
  }
  if (!block->es) { /* expandable segments keep no inactive_split */
    if (net_change_inactive_split_blocks > 0) POOL_INC(m, pool, inactive_split, (uint64_t)net_change_inactive_split_blocks);
    else if (net_change_inactive_split_blocks < 0)
      POOL_DEC(m, pool, inactive_split, (uint64_t)-net_change_inactive_split_blocks);
    if (net_change_inactive_split_size > 0) POOL_INC(m, pool, inactive_split_bytes, (uint64_t)net_change_inactive_split_size);
    else if (net_change_inactive_split_size < 0)
      POOL_DEC(m, pool, inactive_split_bytes, (uint64_t)-net_change_inactive_split_size);
  }
  POOL_DEC(m, pool, active, 1);
  POOL_DEC(m, pool, active_bytes, original_block_size);
  POOL_DEC(m, pool, requested_bytes, requested_size);
  m->st.num_frees++;
}

static void waiting_add(torch *m, tblock *b) {
  tblock *older = m->waiting_newest;
  if (older) { /* append the previous newest to the list */
    WNEXT(older) = NULL;
    WPREV(older) = m->waiting_tail;
    if (m->waiting_tail) WNEXT(m->waiting_tail) = older;
    else m->waiting_head = older;
    m->waiting_tail = older;
  }
  m->waiting_newest = b;
  b->waiting = 1;
}

static void waiting_remove(torch *m, tblock *b) {
  b->waiting = 0;
  if (b == m->waiting_newest) {
    m->waiting_newest = NULL;
    return;
  }
  if (WPREV(b)) WNEXT(WPREV(b)) = WNEXT(b);
  else m->waiting_head = WNEXT(b);
  if (WNEXT(b)) WPREV(WNEXT(b)) = WPREV(b);
  else m->waiting_tail = WPREV(b);
  WNEXT(b) = WPREV(b) = NULL;
}

/* Every waiting block becomes free, oldest first. */
static void free_all_waiting(torch *m) {
  for (tblock *b; (b = m->waiting_head ? m->waiting_head : m->waiting_newest);) {
    waiting_remove(m, b);
    free_block(m, b);
  }
}

/* free(): the program let go of the block. It stops counting as allocated now; it becomes
 * reusable at free_completed (at once for blocks without record_stream uses). */
static void free_request(torch *m, tblock *block) {
  block->allocated = 0;
  POOL_DEC(m, block->pool, allocation, 1);
  POOL_DEC(m, block->pool, allocated_bytes, block->size);
  if (block->size >= m->cfg.max_split_size) decrease_stat(&m->stats.oversize_allocations, 1);
  waiting_add(m, block);
}

static void torch_free_requested(void *ctx, uintptr_t handle) {
  torch *m = ctx;
  tblock *b = block_of(m, handle);
  if (!b || !b->allocated) return; /* nullptr, or a handle the model already let go of */
  free_request(m, b);
}

static void torch_free_completed(void *ctx, uintptr_t handle) {
  torch *m = ctx;
  tblock *b = block_of(m, handle);
  if (!b) return; /* nullptr, or completed early by a synchronization */
  if (b->allocated) free_request(m, b);
  if (!b->waiting) return;
  waiting_remove(m, b);
  free_block(m, b);
}

/* ---- segments ---------------------------------------------------------------------------------- */

static tblock *try_allocate_expandable_block(torch *m, int64_t stream, tpool *pool, uint64_t size);
static void unmap_block(torch *m, tblock *block);
static void release_expandable_segment(torch *m, tblock *block);

static int alloc_block(torch *m, alloc_params *p, int is_retry) {
  uint64_t size = p->alloc_size;
  if (is_retry) m->st.num_alloc_retries++;
  if (m->cfg.set_fraction && m->total_allocated_memory + size > m->allowed_memory_maximum) return 0;
  if (m->cfg.expandable_segments) {
    p->block = try_allocate_expandable_block(m, p->stream, p->pool, p->size);
    return p->block != NULL;
  }
  uint64_t ptr;
  if (sim_device_malloc(m->dev, size, p->stream, &ptr) != SIM_OK) return 0; /* cudaMalloc failed */
  m->total_allocated_memory += size;
  p->block = block_new(m, p->stream, size, p->pool, ptr);
  POOL_INC(m, p->pool, segment, 1);
  POOL_INC(m, p->pool, reserved_bytes, size);
  if (size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_segments, 1);
  m->stats.num_device_alloc++;
  return 1;
}

/* cudaFree of an unsplit free block */
static void release_block(torch *m, tblock *block) {
  tpool *pool = block->pool;
  m->stats.num_device_free++;
  sim_device_free(m->dev, block->ptr, block->size);
  m->total_allocated_memory -= block->size;
  POOL_DEC(m, pool, segment, 1);
  POOL_DEC(m, pool, reserved_bytes, block->size);
  if (block->size >= m->cfg.max_split_size) decrease_stat(&m->stats.oversize_segments, 1);
  tfree_remove(&pool->blocks, block);
  block_delete(m, block);
}

/* Free one or more oversize blocks to the device, but only enough to satisfy the target size
 * (only when max_split_size_mb is set). */
static int release_available_cached_blocks(torch *m, const alloc_params *p) {
  if (m->cfg.max_split_size == UINT64_MAX) return 0;
  tpool *pool = p->pool;
  uint64_t key_size = p->size < m->cfg.max_split_size ? m->cfg.max_split_size : p->size;
  tblock *it = tfree_lower_bound(&pool->blocks, p->stream, key_size);
  if (!it) {
    /* No single block is large enough: free oversize blocks, starting with the largest. */
    uint64_t total_released = 0;
    it = tfree_last_in_stream(&pool->blocks, p->stream);
    while (it && total_released < key_size && it->size >= m->cfg.max_split_size) {
      tblock *cur = it;
      total_released += it->size;
      it = tfree_prev_in_stream(&pool->blocks, it);
      release_block(m, cur);
    }
    if (total_released < key_size) return 0;
  } else {
    release_block(m, it);
  }
  return 1;
}

/* Frees every unsplit free block of a pool; free pages of expandable segments are unmapped. */
static void release_blocks(torch *m, tpool *pool) {
  tblock **to_unmap = NULL;
  size_t n = 0, cap = 0;
  for (tblock *it = tfree_first(&pool->blocks), *next; it; it = next) {
    next = tfree_next(&pool->blocks, it);
    if (it->es) {
      sim_grow((void **)&to_unmap, &cap, n + 1, sizeof *to_unmap);
      to_unmap[n++] = it;
    } else if (!it->prev && !it->next) {
      release_block(m, it);
    }
  }
  for (size_t i = 0; i < n; i++) {
    tblock *b = to_unmap[i];
    unmap_block(m, b);
    if (!b->prev && !b->next) release_expandable_segment(m, b);
  }
  free(to_unmap);
}

/* The host waited for every event: each waiting block becomes free (free_completed). */
static void synchronize_and_free_events(torch *m) {
  m->stats.num_sync_all_streams++;
  free_all_waiting(m);
}

/* What empty_cache() calls, and malloc's last resort. */
static void release_cached_blocks(torch *m) {
  synchronize_and_free_events(m);
  release_blocks(m, &m->large_blocks);
  release_blocks(m, &m->small_blocks);
}

static size_t gc_count(const tblock *b) {
  return (size_t)(int)(b->pool->get_free_blocks_call_count - b->gc_count_base);
}

/* Frees unsplit large blocks that have sat unused longer than average, until reserved memory is
 * back under garbage_collection_threshold of the allowed memory. */
static void garbage_collect_cached_blocks(torch *m) {
  uint64_t gc_threshold = (uint64_t)(m->cfg.garbage_collection_threshold * (double)m->allowed_memory_maximum);
  if (m->total_allocated_memory <= gc_threshold) return;
  uint64_t target_size = m->total_allocated_memory - gc_threshold, gc_reclaimed = 0;
  size_t total_age = 0;
  int freeable_block_count = 0;
  for (tblock *b = tfree_first(&m->large_blocks.blocks); b; b = tfree_next(&m->large_blocks.blocks, b)) {
    if (!is_split(b) && !b->es) {
      total_age += gc_count(b);
      ++freeable_block_count;
    }
  }
  if (freeable_block_count == 0) return;
  int block_freed = 1;
  while (gc_reclaimed < target_size && block_freed && freeable_block_count > 0) {
    double age_threshold = (double)total_age / freeable_block_count;
    block_freed = 0;
    for (tblock *b = tfree_first(&m->large_blocks.blocks), *next; b; b = next) {
      next = tfree_next(&m->large_blocks.blocks, b);
      if (!is_split(b) && !b->es && (double)gc_count(b) >= age_threshold) {
        block_freed = 1;
        gc_reclaimed += b->size;
        total_age -= gc_count(b);
        freeable_block_count--;
        release_block(m, b);
      }
    }
  }
}

/* ---- expandable segments ------------------------------------------------------------------------- */

static int allocatable(const tblock *b) { return b && !b->allocated && !b->waiting; }

static int has_available_address_space(const tblock *b, uint64_t size) {
  uint64_t bytes = 0;
  while (bytes < size && allocatable(b)) {
    bytes += b->size;
    b = b->next;
  }
  return bytes >= size;
}

static uint64_t reservation_size(const torch *m, uint64_t page) {
  uint64_t total = m->dev->total_memory;
  uint64_t space = total + total / 8; /* 1 1/8 of the card */
  return (space + page - 1) / page * page;
}

/* The lowest address, in this stream's segments, with `size` bytes of free and unmapped space;
 * else a new segment. */
static tblock *find_expandable_block(torch *m, int64_t stream, tpool *pool, uint64_t size) {
  tblock key = {.stream = stream, .ptr = 0};
  for (tblock *it = RB_NFIND(tunmapped, &pool->unmapped, &key); it && it->stream == stream;
       it = RB_NEXT(tunmapped, &pool->unmapped, it)) {
    tblock *c = it;
    if (allocatable(c->prev)) c = c->prev; /* a free block just before it counts too */
    if (has_available_address_space(c, size)) return c;
  }
  uint64_t page = pool->is_small ? kSmallBuffer : kLargeBuffer, space = reservation_size(m, page), base;
  if (sim_device_reserve(m->dev, space, &base) != SIM_OK) return NULL;
  tseg *es = sim_xcalloc(1, sizeof *es);
  *es = (tseg){base, space, page, stream, pool, m->segments};
  m->segments = es;
  tblock *candidate = block_new(m, stream, space, pool, base);
  candidate->mapped = 0;
  candidate->es = es;
  insert_unmapped(m, pool, candidate);
  return candidate;
}

/* Maps [to_map, +size) rounded out to whole pages; one segment_map for the range. */
static int map_block(torch *m, tblock *to_map, uint64_t size) {
  tseg *es = to_map->es;
  uint64_t begin = (to_map->ptr - es->base) / es->page;
  uint64_t end = (to_map->ptr + size - es->base + es->page - 1) / es->page;
  if (begin == end) return 0;
  uint64_t ptr = es->base + begin * es->page, mapped = (end - begin) * es->page;
  if (sim_device_map(m->dev, ptr, mapped, to_map->stream) != SIM_OK) return 0;
  tpool *pool = to_map->pool;
  RB_REMOVE(tunmapped, &pool->unmapped, to_map);
  to_map->mapped = 1;
  if (mapped < to_map->size) { /* to_map -> remaining (unmapped) -> to_map->next */
    tblock *remaining = block_new(m, to_map->stream, to_map->size - mapped, pool, to_map->ptr + mapped);
    remaining->mapped = 0;
    remaining->es = es;
    remaining->prev = to_map;
    remaining->next = to_map->next;
    if (to_map->next) to_map->next->prev = remaining;
    to_map->next = remaining;
    insert_unmapped(m, pool, remaining);
    to_map->size = mapped;
  }
  try_merge_blocks(m, to_map, to_map->prev, pool);
  try_merge_blocks(m, to_map, to_map->next, pool);
  insert_into_blocks(m, pool, to_map);
  m->total_allocated_memory += mapped;
  POOL_INC(m, pool, reserved_bytes, mapped);
  m->stats.num_device_alloc++;
  return 1;
}

static tblock *try_allocate_expandable_block(torch *m, int64_t stream, tpool *pool, uint64_t size) {
  tblock *candidate = find_expandable_block(m, stream, pool, size);
  if (!candidate) return NULL;
  /* candidate: unmapped -> ..., or free -> unmapped -> ... */
  if (!candidate->mapped && !map_block(m, candidate, candidate->size < size ? candidate->size : size)) return NULL;
  while (candidate->size < size) {
    uint64_t remaining = size - candidate->size;
    tblock *new_candidate = candidate->next;
    if (!map_block(m, new_candidate, remaining < new_candidate->size ? remaining : new_candidate->size)) return NULL;
    candidate = new_candidate; /* it absorbed the free block before it */
  }
  tfree_remove(&pool->blocks, candidate);
  return candidate;
}

/* Unmaps the whole pages inside a free block; one segment_unmap for them. */
static void unmap_block(torch *m, tblock *block) {
  tseg *es = block->es;
  uint64_t begin = (block->ptr - es->base + es->page - 1) / es->page;
  uint64_t end = (block->ptr + block->size - es->base) / es->page;
  if (begin >= end) return;
  uint64_t ptr = es->base + begin * es->page, size = (end - begin) * es->page;
  tpool *pool = block->pool;
  sim_device_unmap(m->dev, ptr, size);
  tfree_remove(&pool->blocks, block);
  uint64_t before_size = ptr - block->ptr;
  if (before_size > 0) { /* prev? -> before_free -> block */
    tblock *before_free = block_new(m, block->stream, before_size, pool, block->ptr);
    before_free->es = es;
    before_free->prev = block->prev;
    if (block->prev) block->prev->next = before_free;
    before_free->next = block;
    block->prev = before_free;
    insert_into_blocks(m, pool, before_free);
  }
  uint64_t after_size = block->size - (before_size + size);
  if (after_size > 0) { /* block -> after_free -> next? */
    tblock *after_free = block_new(m, block->stream, after_size, pool, ptr + size);
    after_free->es = es;
    after_free->next = block->next;
    if (block->next) block->next->prev = after_free;
    after_free->prev = block;
    block->next = after_free;
    insert_into_blocks(m, pool, after_free);
  }
  block->ptr = ptr;
  block->size = size;
  block->mapped = 0;
  try_merge_blocks(m, block, block->prev, pool);
  try_merge_blocks(m, block, block->next, pool);
  insert_unmapped(m, pool, block);
  m->total_allocated_memory -= size;
  POOL_DEC(m, pool, reserved_bytes, size);
  m->stats.num_device_free++;
}

static void release_expandable_segment(torch *m, tblock *block) {
  tseg *es = block->es;
  RB_REMOVE(tunmapped, &block->pool->unmapped, block);
  sim_device_unreserve(m->dev, es->base, es->size);
  for (tseg **pp = &m->segments; *pp; pp = &(*pp)->next)
    if (*pp == es) {
      *pp = es->next;
      break;
    }
  free(es);
  block_delete(m, block);
}

/* ---- the model's life ------------------------------------------------------------------------- */

static int torch_create(void **ctx, sim_device *dev, const sim_alloc_config *cfg, char *err, size_t n) {
  tconfig c;
  config_defaults(&c);
  if (cfg->nopts) { /* options given: PyTorch's defaults plus these */
    for (size_t i = 0; i < cfg->nopts; i++)
      if (config_option(&c, &cfg->opts[i], err, n)) return SIM_EINVAL;
  } else if (cfg->recorded) { /* else the settings the trace recorded */
    if (config_recorded(&c, cfg->recorded, err, n)) return SIM_EINVAL;
  }
  for (int i = 0; i < kRoundUpPowerOfTwoIntervals; i++)
    if (c.roundup_power2_divisions[i] > 1) c.roundup = 1;
  torch *m = sim_xcalloc(1, sizeof *m);
  m->dev = dev;
  m->cfg = c;
  m->small_blocks.is_small = 1;
  m->small_blocks.stats = &m->stats.type[SMALL_POOL];
  m->large_blocks.stats = &m->stats.type[LARGE_POOL];
  tfree_init(&m->small_blocks.blocks);
  tfree_init(&m->large_blocks.blocks);
  if (c.set_fraction) m->allowed_memory_maximum = (uint64_t)(c.fraction * (double)dev->total_memory);
  *ctx = m;
  return SIM_OK;
}

static void torch_destroy(void *ctx) {
  torch *m = ctx;
  tfree_release(&m->small_blocks.blocks);
  tfree_release(&m->large_blocks.blocks);
  for (size_t i = 0; i < m->nchunks; i++) free(m->chunks[i]);
  free(m->chunks);
  while (m->segments) {
    tseg *es = m->segments;
    m->segments = es->next;
    free(es);
  }
  free(m);
}

static void torch_empty_cache(void *ctx) {
  torch *m = ctx;
  release_cached_blocks(m);
}

/* A device-wide synchronize completes every recorded event: waiting blocks become free, as the
 * next process_events() would find them. A stream's synchronize completes nothing the model can
 * attribute (it does not know which streams a block was recorded on). */
static void torch_synchronize(void *ctx, int64_t stream) {
  torch *m = ctx;
  if (stream >= 0) return;
  free_all_waiting(m);
}

/* ---- restoring a recorded state ---------------------------------------------------------------- */

static void restore_block_stats(torch *m, tblock *b) {
  tpool *pool = b->pool;
  if (b->allocated) {
    POOL_INC(m, pool, allocation, 1);
    POOL_INC(m, pool, allocated_bytes, b->size);
    if (b->size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_allocations, 1);
  }
  if (b->allocated || b->waiting) {
    POOL_INC(m, pool, active, 1);
    POOL_INC(m, pool, active_bytes, b->size);
    POOL_INC(m, pool, requested_bytes, b->requested);
  }
}

/* Checks the blocks of [addr, end) and sizes those given as 0, before anything changes: the
 * order, the overlaps, and that each fits. Returns 0, or -1 with a message. */
static int plan_range(const torch *m, const tpool *pool, uint64_t addr, uint64_t end, sim_walk_item *items, size_t n,
                      char *err, size_t errlen) {
  uint64_t cursor = addr;
  for (size_t i = 0; i < n; i++) {
    sim_walk_item *it = &items[i];
    if (it->addr < cursor || it->addr >= end) {
      snprintf(err, errlen,
               "block at %#" PRIx64 " overlaps the block before it or lies outside its segment [%#" PRIx64 ", %#" PRIx64 ")",
               it->addr, addr, end);
      return -1;
    }
    if (it->state != SIM_BLOCK_ALLOCATED && it->state != SIM_BLOCK_PENDING_FREE) {
      snprintf(err, errlen, "block at %#" PRIx64 " is neither allocated nor waiting to be freed", it->addr);
      return -1;
    }
    uint64_t next = i + 1 < n ? items[i + 1].addr : end;
    if (next <= it->addr) next = it->addr; /* reported as an overlap at the next block */
    if (!it->size) {
      /* Only the request is known: rounded as malloc rounds it, plus whatever follows it up to
       * the next block when that remainder could not have been split off. */
      uint64_t r = round_size(m, it->requested ? it->requested : 1);
      if (next - it->addr < r) {
        snprintf(err, errlen,
                 "block at %#" PRIx64 " of %" PRIu64 " requested bytes (%" PRIu64 " rounded) does not fit before %#" PRIx64,
                 it->addr, it->requested, r, next);
        return -1;
      }
      it->size = should_split(m, pool, next - it->addr, r) ? r : next - it->addr;
    }
    if (it->size > end - it->addr) {
      snprintf(err, errlen, "block at %#" PRIx64 " of %" PRIu64 " bytes runs past its segment's end %#" PRIx64, it->addr,
               it->size, end);
      return -1;
    }
    cursor = it->addr + it->size;
  }
  return 0;
}

/* Links the (planned) blocks of [addr, end) of a segment, with free blocks between them. */
static void restore_range(torch *m, tpool *pool, tseg *es, uint64_t addr, uint64_t end, int64_t stream,
                          const sim_walk_item *items, size_t n, uintptr_t *handles, tblock **first, tblock **last) {
  tblock *prev = NULL, *head = NULL;
  uint64_t cursor = addr;
  for (size_t i = 0; i <= n; i++) {
    uint64_t start = i < n ? items[i].addr : end;
    if (start > cursor) { /* free space between live blocks is one free block */
      tblock *f = block_new(m, stream, start - cursor, pool, cursor);
      f->es = es;
      f->prev = prev;
      if (prev) prev->next = f;
      else head = f;
      prev = f;
    }
    if (i == n) break;
    const sim_walk_item *it = &items[i];
    tblock *b = block_new(m, stream, it->size, pool, it->addr);
    b->es = es;
    b->requested = it->requested;
    b->allocated = it->state == SIM_BLOCK_ALLOCATED;
    b->gen++;
    if (!b->allocated) waiting_add(m, b);
    b->prev = prev;
    if (prev) prev->next = b;
    else head = b;
    prev = b;
    cursor = it->addr + it->size;
    handles[i] = handle_of(b);
    restore_block_stats(m, b);
  }
  *first = head;
  *last = prev;
}

static tseg *restore_expandable(torch *m, tpool *pool, const sim_walk_item *seg, char *err, size_t errlen) {
  uint64_t page = pool->is_small ? kSmallBuffer : kLargeBuffer;
  for (tseg *es = m->segments; es; es = es->next)
    if (es->pool == pool && es->stream == seg->stream && seg->addr >= es->base && seg->addr < es->base + es->size) {
      if ((seg->addr - es->base) % page || seg->size % page || seg->addr + seg->size > es->base + es->size) break;
      return es;
    }
  if (seg->size % page) {
    snprintf(err, errlen, "expandable segment at %#" PRIx64 " of %" PRIu64 " bytes is not whole %" PRIu64 "-byte pages",
             seg->addr, seg->size, page);
    return NULL;
  }
  /* A new reservation, starting where the caller says, else at this range. */
  uint64_t base = seg->requested && seg->requested <= seg->addr && (seg->addr - seg->requested) % page == 0
                      ? seg->requested
                      : seg->addr;
  uint64_t space = reservation_size(m, page);
  if (seg->addr + seg->size - base > space) space = (seg->addr + seg->size - base + page - 1) / page * page;
  tseg *es = sim_xcalloc(1, sizeof *es);
  *es = (tseg){base, space, page, seg->stream, pool, m->segments};
  m->segments = es;
  tblock *all = block_new(m, seg->stream, space, pool, base);
  all->mapped = 0;
  all->es = es;
  insert_unmapped(m, pool, all);
  return es;
}

static int torch_restore(void *ctx, sim_walk_item *items, size_t n, uintptr_t *handles, char *err, size_t errlen) {
  torch *m = ctx;
  if (!n || !items[0].is_segment || !items[0].size) {
    snprintf(err, errlen, "restore needs a segment first");
    return SIM_EINVAL;
  }
  const sim_walk_item *seg = &items[0];
  tpool *pool = seg->pool ? &m->large_blocks : &m->small_blocks;
  uint64_t end = seg->addr + seg->size;
  for (size_t i = 1; i < n; i++) handles[i] = 0;
  handles[0] = 0;
  tblock *first, *last;
  if (plan_range(m, pool, seg->addr, end, items + 1, n - 1, err, errlen)) return SIM_EINVAL;
  if (!seg->expandable) {
    restore_range(m, pool, NULL, seg->addr, end, seg->stream, items + 1, n - 1, handles + 1, &first, &last);
    for (tblock *b = first; b; b = b->next)
      if (!b->allocated && !b->waiting) {
        insert_into_blocks(m, pool, b);
        if (is_split(b)) {
          POOL_INC(m, pool, inactive_split, 1);
          POOL_INC(m, pool, inactive_split_bytes, b->size);
        }
      }
    m->total_allocated_memory += seg->size;
    POOL_INC(m, pool, segment, 1);
    POOL_INC(m, pool, reserved_bytes, seg->size);
    if (seg->size >= m->cfg.max_split_size) increase_stat(&m->stats.oversize_segments, 1);
    return SIM_OK;
  }
  tseg *es = restore_expandable(m, pool, seg, err, errlen);
  if (!es) return SIM_EINVAL;
  /* The unmapped range that holds [addr, end) gives up that range. */
  tblock key = {.stream = seg->stream, .ptr = seg->addr};
  tblock *u = RB_NFIND(tunmapped, &pool->unmapped, &key);
  if (!u || u->ptr != seg->addr) u = u ? RB_PREV(tunmapped, &pool->unmapped, u) : RB_MAX(tunmapped, &pool->unmapped);
  if (!u || u->es != es || u->ptr > seg->addr || u->ptr + u->size < end) {
    snprintf(err, errlen, "expandable segment at %#" PRIx64 " overlaps one restored before it", seg->addr);
    return SIM_EINVAL;
  }
  restore_range(m, pool, es, seg->addr, end, seg->stream, items + 1, n - 1, handles + 1, &first, &last);
  RB_REMOVE(tunmapped, &pool->unmapped, u);
  tblock *before = u->prev, *after = u->next;
  if (u->ptr + u->size > end) { /* the unmapped rest after the range */
    tblock *tail = block_new(m, seg->stream, u->ptr + u->size - end, pool, end);
    tail->mapped = 0;
    tail->es = es;
    tail->next = u->next;
    if (u->next) u->next->prev = tail;
    after = tail;
    insert_unmapped(m, pool, tail);
  }
  if (u->ptr < seg->addr) { /* u keeps the unmapped part before the range */
    u->size = seg->addr - u->ptr;
    before = u;
    insert_unmapped(m, pool, u);
  } else {
    block_delete(m, u);
  }
  first->prev = before;
  if (before) before->next = first;
  last->next = after;
  if (after) after->prev = last;
  for (tblock *b = first;; b = b->next) {
    if (!b->allocated && !b->waiting) insert_into_blocks(m, pool, b);
    if (b == last) break;
  }
  m->total_allocated_memory += seg->size;
  POOL_INC(m, pool, reserved_bytes, seg->size);
  return SIM_OK;
}

/* ---- walking and checking ------------------------------------------------------------------------ */

/* A reported segment starts at a block with no mapped block before it (expandable segments are
 * reported as one segment per contiguous mapped range, as snapshot() does). */
static int is_head(const tblock *b) { return b->live && b->mapped && !(b->prev && b->prev->mapped); }

static int cmp_head(const void *a, const void *b) {
  const tblock *x = *(tblock *const *)a, *y = *(tblock *const *)b;
  return cmp_u64(x->ptr, y->ptr);
}

static tblock **collect_heads(const torch *m, size_t *count) {
  tblock **heads = NULL;
  size_t n = 0, cap = 0;
  for (uint32_t i = 1; i < m->next_index; i++) {
    tblock *b = block_at(m, i);
    if (!is_head(b)) continue;
    sim_grow((void **)&heads, &cap, n + 1, sizeof *heads);
    heads[n++] = b;
  }
  if (n) qsort(heads, n, sizeof *heads, cmp_head);
  *count = n;
  return heads;
}

static int torch_walk(void *ctx, sim_walk_fn fn, void *arg) {
  torch *m = ctx;
  size_t n;
  tblock **heads = collect_heads(m, &n);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    tblock *h = heads[i];
    sim_walk_item seg = {.is_segment = 1, .addr = h->ptr, .stream = h->stream, .pool = !h->pool->is_small,
                         .expandable = h->es != NULL};
    for (tblock *b = h; b && b->mapped; b = b->next) seg.size += b->size;
    rc = fn(arg, &seg);
    for (tblock *b = h; b && b->mapped && !rc; b = b->next) {
      sim_walk_item it = {.addr = b->ptr, .size = b->size, .stream = b->stream, .pool = seg.pool,
                          .expandable = seg.expandable};
      it.state = b->allocated ? SIM_BLOCK_ALLOCATED : b->waiting ? SIM_BLOCK_PENDING_FREE : SIM_BLOCK_FREE;
      it.requested = it.state == SIM_BLOCK_FREE ? 0 : b->requested;
      rc = fn(arg, &it);
    }
  }
  free(heads);
  return rc;
}

#define CHECK_FAIL(...)                    \
  do {                                     \
    snprintf(err, errlen, __VA_ARGS__);    \
    free(heads);                           \
    return -1;                             \
  } while (0)

static int torch_check(void *ctx, char *err, size_t errlen) {
  torch *m = ctx;
  tblock **heads = NULL;
  if (m->tree_conflicts) CHECK_FAIL("%" PRIu64 " blocks could not enter a pool (equal keys)", m->tree_conflicts);
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    if (!tfree_check(&pools[k]->blocks)) CHECK_FAIL("the %s pool's free blocks are not an ordered set", k ? "large" : "small");
    if (!tunmapped_RB_VALID(&pools[k]->unmapped)) CHECK_FAIL("the %s pool's unmapped ranges are not an ordered tree", k ? "large" : "small");
    for (tblock *b = tfree_first(&pools[k]->blocks); b; b = tfree_next(&pools[k]->blocks, b))
      if (!b->live || b->allocated || b->waiting || !b->mapped || b->pool != pools[k])
        CHECK_FAIL("block %#" PRIx64 " is in the %s pool but not a free mapped block of it", b->ptr, k ? "large" : "small");
    tblock *b;
    RB_FOREACH(b, tunmapped, &pools[k]->unmapped)
      if (!b->live || b->mapped || !b->es) CHECK_FAIL("block %#" PRIx64 " is in the unmapped set but mapped", b->ptr);
  }
  /* Every block tiles its segment; free neighbours have merged; the stats add up. */
  int64_t allocated[STAT_TYPES] = {0}, active[STAT_TYPES] = {0}, requested[STAT_TYPES] = {0},
          reserved[STAT_TYPES] = {0}, nalloc[STAT_TYPES] = {0};
  size_t nfree_in_trees = 0, nfree = 0, nunmapped = 0, nunmapped_trees = 0;
  for (int k = 0; k < 2; k++) {
    nfree_in_trees += pools[k]->blocks.count;
    tblock *b;
    RB_FOREACH(b, tunmapped, &pools[k]->unmapped) nunmapped_trees++;
  }
  for (uint32_t i = 1; i < m->next_index; i++) {
    tblock *b = block_at(m, i);
    if (!b->live) continue;
    int t = b->pool->is_small ? SMALL_POOL : LARGE_POOL;
    if (b->next && (b->next->prev != b || b->next->ptr != b->ptr + b->size))
      CHECK_FAIL("block %#" PRIx64 " and the block after it do not tile the segment", b->ptr);
    if (b->prev && b->prev->next != b) CHECK_FAIL("block %#" PRIx64 " is not linked back from the block before it", b->ptr);
    if ((b->prev && b->prev->pool != b->pool) || (b->prev && b->prev->es != b->es))
      CHECK_FAIL("block %#" PRIx64 " shares a segment with a block of another pool", b->ptr);
    int free_b = !b->allocated && !b->waiting;
    if (free_b && b->next && !b->next->allocated && !b->next->waiting && b->next->mapped == b->mapped)
      CHECK_FAIL("free blocks %#" PRIx64 " and %#" PRIx64 " are adjacent and not merged", b->ptr, b->next->ptr);
    if (b->allocated && b->waiting) CHECK_FAIL("block %#" PRIx64 " is both allocated and waiting", b->ptr);
    if (!b->mapped && (b->allocated || b->waiting)) CHECK_FAIL("block %#" PRIx64 " is in use but unmapped", b->ptr);
    if (free_b && b->mapped) nfree++;
    if (!b->mapped) nunmapped++;
    if (b->mapped) reserved[t] += (int64_t)b->size;
    if (b->allocated) {
      allocated[t] += (int64_t)b->size;
      nalloc[t]++;
    }
    if (b->allocated || b->waiting) {
      active[t] += (int64_t)b->size;
      requested[t] += (int64_t)b->requested;
    }
  }
  if (nfree != nfree_in_trees) CHECK_FAIL("%zu free blocks but %zu in the pools", nfree, nfree_in_trees);
  if (nunmapped != nunmapped_trees) CHECK_FAIL("%zu unmapped ranges but %zu in the sets", nunmapped, nunmapped_trees);
  for (int t = SMALL_POOL; t <= LARGE_POOL; t++) {
    const char *name = t == SMALL_POOL ? "small" : "large";
    if (allocated[t] != m->stats.type[t].allocated_bytes.current) CHECK_FAIL("%s pool: allocated_bytes is off", name);
    if (nalloc[t] != m->stats.type[t].allocation.current) CHECK_FAIL("%s pool: allocation count is off", name);
    if (active[t] != m->stats.type[t].active_bytes.current) CHECK_FAIL("%s pool: active_bytes is off", name);
    if (requested[t] != m->stats.type[t].requested_bytes.current) CHECK_FAIL("%s pool: requested_bytes is off", name);
    if (reserved[t] != m->stats.type[t].reserved_bytes.current) CHECK_FAIL("%s pool: reserved_bytes is off", name);
  }
#define SIM_X(n)                                                                                   \
  if (AGG_##n(m)->current != m->stats.type[SMALL_POOL].n.current + m->stats.type[LARGE_POOL].n.current) \
    CHECK_FAIL("%s: the aggregate is not the sum of the pools", #n);
  TORCH_STAT_ARRAYS(SIM_X)
#undef SIM_X
  if ((uint64_t)m->st.reserved.current != m->total_allocated_memory)
    CHECK_FAIL("reserved_bytes disagrees with the memory taken from the device");
  return 0;
}
#undef CHECK_FAIL

/* ---- what validate asks ----------------------------------------------------------------------- */

uint64_t sim_torch_round_size(void *ctx, uint64_t size) { return round_size(ctx, size); }

int sim_torch_would_reuse(void *ctx, uint64_t size, int64_t stream) {
  torch *m = ctx;
  if (!size) return 1;
  alloc_params p = {.size = round_size(m, size), .stream = stream};
  p.pool = get_pool(m, p.size);
  return find_free_block(m, &p) != NULL;
}

/* ---- statistics ---------------------------------------------------------------------------------- */

static const sim_alloc_stats *torch_stats(void *ctx) { return &((torch *)ctx)->st; }

/* cacheInfo(): the largest free block of any stream, in either pool. */
static uint64_t torch_largest_free(void *ctx) {
  torch *m = ctx;
  uint64_t best = 0;
  tpool *pools[2] = {&m->small_blocks, &m->large_blocks};
  for (int k = 0; k < 2; k++) {
    /* the last block of each stream is that stream's largest */
    for (size_t i = 0; i < pools[k]->blocks.n; i++) {
      tblock *b = tfree_last_in_stream(&pools[k]->blocks, pools[k]->blocks.s[i]->stream);
      if (b && b->size > best) best = b->size;
    }
  }
  return best;
}

/* format_size(): PyTorch's sizes in OOM messages. */
static void format_size(char *buf, size_t n, uint64_t size) {
  if (size <= 1024) snprintf(buf, n, "%" PRIu64 " bytes", size);
  else if (size <= 1048576) snprintf(buf, n, "%.2f KiB", (double)size / 1024.0);
  else if (size <= 1073741824) snprintf(buf, n, "%.2f MiB", (double)size / 1048576.0);
  else snprintf(buf, n, "%.2f GiB", (double)size / 1073741824.0);
}

static void torch_describe_oom(void *ctx, uint64_t size, int64_t stream, char *buf, size_t n) {
  torch *m = ctx;
  (void)stream;
  sim_device *d = m->dev;
  uint64_t limit = d->capacity < d->total_memory ? d->capacity : d->total_memory;
  uint64_t device_free = limit > d->used ? limit - d->used : 0;
  int64_t allocated = m->st.allocated.current, reserved = m->st.reserved.current;
  char want[32], total[32], free_s[32], used[32], alloc_s[32], unalloc[32], allowed[64] = "";
  if (size >= kOneExaByte) {
    snprintf(buf, n, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    return;
  }
  format_size(want, sizeof want, get_allocation_size(round_size(m, size)));
  format_size(total, sizeof total, d->total_memory);
  format_size(free_s, sizeof free_s, device_free);
  format_size(used, sizeof used, d->used);
  format_size(alloc_s, sizeof alloc_s, (uint64_t)allocated);
  format_size(unalloc, sizeof unalloc, (uint64_t)(reserved - allocated));
  if (m->cfg.set_fraction) {
    char a[32];
    format_size(a, sizeof a, m->allowed_memory_maximum);
    snprintf(allowed, sizeof allowed, "%s allowed; ", a);
  }
  int len = snprintf(buf, n,
                     "CUDA out of memory. Tried to allocate %s. GPU has a total capacity of %s of which %s is free. "
                     "Including non-PyTorch memory, this process has %s memory in use. %sOf the allocated memory %s is "
                     "allocated by PyTorch, and %s is reserved by PyTorch but unallocated.",
                     want, total, free_s, used, allowed, alloc_s, unalloc);
  static const char advice[] = " If reserved but unallocated memory is large try setting "
                               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
  if (len > 0 && (size_t)len + sizeof advice <= n) memcpy(buf + len, advice, sizeof advice);
}

const sim_allocator_ops sim_torch_ops = {
  .version = SIM_ALLOCATOR_VERSION,
  .name = "torch",
  .summary = "PyTorch's CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF options; default: the recorded settings)",
  .options = torch_options,
  .create = torch_create,
  .destroy = torch_destroy,
  .alloc = torch_alloc,
  .free_requested = torch_free_requested,
  .free_completed = torch_free_completed,
  .synchronize = torch_synchronize,
  .empty_cache = torch_empty_cache,
  .stats = torch_stats,
  .largest_free = torch_largest_free,
  .describe_oom = torch_describe_oom,
  .walk = torch_walk,
  .check = torch_check,
  .restore = torch_restore,
};

/* event.h: the event model every part of memplay shares (one recorded action of a GPU program). */
#ifndef SIM_EVENT_H
#define SIM_EVENT_H

#include <stdint.h>

/*
 * Events are kept in recorded order: the order in which the host issued them. A device
 * activity (kernel, copy, memset) sits at the position of its launch; `ts` is the host time
 * of that launch and `dev_ts` the time it started on the device.
 *
 * Adding a kind: append it before SIM_EV__COUNT (the numbers are stored in trace files and
 * must never change), give it a name in event.c, and document it in docs/formats.md.
 */
typedef enum sim_event_kind {
  SIM_EV_NONE = 0,
  SIM_EV_ALLOC = 1,          /* device (or managed) allocation request: addr identifies it, size in bytes */
  SIM_EV_FREE_REQUESTED = 2, /* program released it; allocator stops counting it as allocated */
  SIM_EV_FREE_COMPLETED = 3, /* memory is reusable (after stream uses finished) */
  SIM_EV_FREE = 4,           /* requested and completed at once */
  SIM_EV_MEMCPY = 5,         /* copy of size bytes in direction dir; mem = host memory kind */
  SIM_EV_MEMSET = 6,
  SIM_EV_KERNEL = 7,         /* name = kernel name, dur = device time */
  SIM_EV_SYNC = 8,           /* host waits: stream < 0 means the whole device */
  SIM_EV_MARKER = 9,         /* step and phase boundaries; name, flags say which */
  SIM_EV_HOST_ALLOC = 10,    /* host allocation: pinned (cudaMallocHost) or pageable */
  SIM_EV_HOST_FREE = 11,
  SIM_EV_API = 12,           /* a runtime/driver call with no device activity of its own (name) */
  SIM_EV_EMPTY_CACHE = 13,   /* the program asked its allocator to release cached memory */
  SIM_EV__COUNT
} sim_event_kind;

typedef enum sim_mem_kind {
  SIM_MEM_UNKNOWN = 0,
  SIM_MEM_DEVICE = 1,
  SIM_MEM_PINNED = 2,
  SIM_MEM_PAGEABLE = 3,
  SIM_MEM_MANAGED = 4,
  SIM_MEM__COUNT
} sim_mem_kind;

typedef enum sim_copy_dir {
  SIM_COPY_NONE = 0,
  SIM_COPY_H2D = 1,
  SIM_COPY_D2H = 2,
  SIM_COPY_D2D = 3,
  SIM_COPY_H2H = 4,
  SIM_COPY_P2P = 5,
  SIM_COPY__COUNT
} sim_copy_dir;

/* What an allocation holds. The what-if scenarios transform memory by category. */
typedef enum sim_category {
  SIM_CAT_UNKNOWN = 0,
  SIM_CAT_PARAMETER = 1,
  SIM_CAT_OPTIMIZER_STATE = 2,
  SIM_CAT_GRADIENT = 3,
  SIM_CAT_ACTIVATION = 4,
  SIM_CAT_INPUT = 5,
  SIM_CAT_TEMPORARY = 6,
  SIM_CAT_WORKSPACE = 7,
  SIM_CAT__COUNT
} sim_category;

/* How a category was decided. */
typedef enum sim_cat_source {
  SIM_CATSRC_NONE = 0,     /* not decided */
  SIM_CATSRC_SOURCE = 1,   /* the source format said so */
  SIM_CATSRC_STACK = 2,    /* from the call stack or the enclosing operator */
  SIM_CATSRC_LIFETIME = 3, /* from the allocation's lifetime */
  SIM_CATSRC_USER = 4,     /* set by hand or by a scenario */
  SIM_CATSRC__COUNT
} sim_cat_source;

/* Flags (bit set). */
enum {
  SIM_EVF_STEP_BEGIN = 1u << 0, /* marker: a step starts (dur = its recorded length when known) */
  SIM_EVF_STEP_END = 1u << 1,   /* marker: a step ends */
  SIM_EVF_PHASE = 1u << 2,      /* marker: a phase (forward, backward, optimizer, ...) starts */
  SIM_EVF_ASYNC = 1u << 3,      /* memcpy/memset: asynchronous API (cudaMemcpyAsync) */
  SIM_EVF_SYNC_EVENT = 1u << 4, /* sync: waits for an event rather than a stream */
  SIM_EVF_DEVICE_API = 1u << 5, /* alloc/free: a raw cudaMalloc/cudaFree recorded by the driver */
  SIM_EVF_PREEXISTING = 1u << 6, /* alloc: live before the recording began (rebuilt by the importer) */
};
#define SIM_EVF__COUNT 7

#define SIM_NO_STREAM INT64_MIN

/*
 * One event. Fields that do not apply to a kind are 0 (or -1 where 0 is meaningful:
 * device, step, dev_ts). Sizes and times are integers: bytes and nanoseconds.
 */
typedef struct sim_event {
  int64_t seq;       /* index in recorded order, from 0 */
  int64_t ts;        /* host time in ns */
  int64_t dur;       /* ns: device time for kernels/copies/memsets, host time for syncs and API calls */
  int64_t dev_ts;    /* ns: start on the device as recorded, -1 when unknown */
  int64_t api_dur;   /* ns spent in the host API call that issued it, -1 when unknown */
  uint64_t addr;     /* identifies an allocation (alloc/free), or a copy's device address */
  uint64_t size;     /* bytes */
  int64_t stream;    /* stream handle as recorded (0 = default stream) */
  int64_t stack;     /* call stack id in the store, 0 = none */
  int64_t name;      /* string id in the store (kernel, marker, API name), 0 = none */
  int32_t step;      /* training/inference step, -1 unknown */
  int16_t device;    /* device index, -1 = host */
  uint8_t kind;      /* sim_event_kind */
  uint8_t mem;       /* sim_mem_kind */
  uint8_t dir;       /* sim_copy_dir */
  uint8_t category;  /* sim_category */
  uint8_t cat_source;/* sim_cat_source */
  uint8_t flags;     /* SIM_EVF_* */
} sim_event;

/* An event with every field at its "absent" value. */
void sim_event_init(sim_event *ev);

const char *sim_event_kind_name(int kind);
const char *sim_mem_kind_name(int mem);
const char *sim_copy_dir_name(int dir);
const char *sim_category_name(int cat);
const char *sim_cat_source_name(int src);

/* Flag names ("step_begin", ...): by bit index, and back to a mask (0 when unknown). */
const char *sim_event_flag_name(int bit);
unsigned sim_event_flag_from_name(const char *name);

/* Reverse look-ups: return the enum value, or -1 when the name is unknown. */
int sim_event_kind_from_name(const char *name);
int sim_mem_kind_from_name(const char *name);
int sim_copy_dir_from_name(const char *name);
int sim_category_from_name(const char *name);
int sim_cat_source_from_name(const char *name);

/* True for the kinds that place or release device memory through an allocator model. */
static inline int sim_event_is_alloc(const sim_event *ev) { return ev->kind == SIM_EV_ALLOC; }
/* Whether an event of this kind frees (any of the three kinds of free). */
static inline int sim_kind_is_free(int kind) {
  return kind == SIM_EV_FREE || kind == SIM_EV_FREE_REQUESTED || kind == SIM_EV_FREE_COMPLETED;
}
static inline int sim_event_is_free(const sim_event *ev) { return sim_kind_is_free(ev->kind); }

/* The nanoseconds from one event time to another: a trace's times lie within +-2^62 ns, so the
 * two extremes are 2^63 apart, one more than int64 holds; that one is held to INT64_MAX. */
static inline int64_t sim_ns_between(int64_t from, int64_t to) {
  int64_t d;
  return __builtin_sub_overflow(to, from, &d) ? (to > from ? INT64_MAX : INT64_MIN) : d;
}

/* Adds an event's bytes to a sum over a trace's events: a trace may hold 2^32 events of up to
 * 2^48 bytes each, which pass 64 bits, so such a sum stops at INT64_MAX (8 EiB), where it stays. */
static inline void sim_bytes_sum(int64_t *sum, uint64_t bytes) {
  *sum = bytes > (uint64_t)(INT64_MAX - *sum) ? INT64_MAX : *sum + (int64_t)bytes;
}

/* Takes bytes added by sim_bytes_sum back out (a freed allocation); a sum stopped at INT64_MAX
 * stays there. */
static inline void sim_bytes_drop(int64_t *sum, uint64_t bytes) {
  if (*sum != INT64_MAX) *sum -= (int64_t)bytes;
}

#endif

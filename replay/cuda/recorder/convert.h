/* convert.h: the recorder's records (what CUPTI reported) and their conversion to memplay JSON Lines. */
#ifndef RECORDER_CONVERT_H
#define RECORDER_CONVERT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/hashmap.h"

/*
 * The recorder (inject.c) copies what it needs from each CUPTI activity record and callback into
 * an rec_record, in whatever order CUPTI delivers them, and at the program's exit converts them
 * here into a memplay trace: events in host issue order, frees matched to allocations, memory
 * kinds and copy directions in memplay's terms. Nothing here needs CUDA or a GPU: the tests feed
 * it synthetic record sequences. Codes are CUPTI's own values (cupti_activity.h); inject.c
 * checks them against the header at compile time.
 */

/* CUpti_ActivityMemoryKind */
enum {
  REC_MEM_UNKNOWN = 0,
  REC_MEM_PAGEABLE = 1,
  REC_MEM_PINNED = 2,
  REC_MEM_DEVICE = 3,
  REC_MEM_ARRAY = 4,
  REC_MEM_MANAGED = 5,
  REC_MEM_DEVICE_STATIC = 6,
  REC_MEM_MANAGED_STATIC = 7,
};

/* CUpti_ActivityMemcpyKind */
enum {
  REC_COPY_UNKNOWN = 0,
  REC_COPY_HTOD = 1,
  REC_COPY_DTOH = 2,
  REC_COPY_HTOA = 3,
  REC_COPY_ATOH = 4,
  REC_COPY_ATOA = 5,
  REC_COPY_ATOD = 6,
  REC_COPY_DTOA = 7,
  REC_COPY_DTOD = 8,
  REC_COPY_HTOH = 9,
  REC_COPY_PTOP = 10,
};

/* CUpti_ActivityMemoryOperationType */
enum { REC_OP_ALLOCATION = 1, REC_OP_RELEASE = 2 };

/* CUpti_ActivitySynchronizationType */
enum { REC_SYNC_EVENT = 1, REC_SYNC_STREAM_WAIT_EVENT = 2, REC_SYNC_STREAM = 3, REC_SYNC_CONTEXT = 4 };

#define REC_INVALID_ID 0xFFFFFFFFu /* CUPTI_INVALID_STREAM_ID, CUPTI_INVALID_CONTEXT_ID */

typedef enum rec_kind {
  REC_MEMORY = 1, /* MEMORY2: an allocation or release (op), mem kind, addr, bytes, start = its time */
  REC_MEMCPY = 2, /* MEMCPY: copy_kind, src_kind, dst_kind, bytes, start/end on the device */
  REC_MEMSET = 3, /* MEMSET: mem kind, bytes, start/end on the device */
  REC_KERNEL = 4, /* CONCURRENT_KERNEL: name, start/end on the device */
  REC_SYNC = 5,   /* SYNCHRONIZATION: op = type, start/end on the host */
  REC_MAP = 6,    /* cuMemMap (callback): addr, bytes, start = host time */
  REC_UNMAP = 7,  /* cuMemUnmap (callback): addr, bytes, start = host time */
} rec_kind;

enum { REC_F_ASYNC = 1 }; /* copy or memset issued by an asynchronous API */

typedef struct rec_record {
  uint64_t start, end;  /* ns (CUPTI timestamps: one clock for host and device) */
  uint64_t addr, bytes;
  uint32_t correlation; /* links the record to the API call that issued it; 0 none */
  uint32_t device, context, stream; /* CUPTI ids; REC_INVALID_ID when not known */
  uint32_t name;        /* string id (rec_intern), 0 none */
  uint8_t kind, op, mem, copy_kind, src_kind, dst_kind, flags;
} rec_record;

/* A runtime or driver API call: when the host issued it and how long it took. */
typedef struct rec_api {
  uint64_t start, end;
  uint32_t name;
} rec_api;

typedef struct rec_device {
  int known;
  uint32_t name;
  uint64_t total_memory;
  int cc_major, cc_minor;
} rec_device;

#define REC_MAX_DEVICES 64

typedef struct rec_state {
  rec_record *recs;
  size_t n, cap;
  rec_api *apis;
  size_t napi, capapi;
  sim_map api_by_corr;       /* correlation id -> index in apis */
  char **strs;               /* strs[id - 1] */
  size_t nstr, capstr;
  sim_map str_by_hash;       /* FNV-1a hash -> id (collisions probed by comparing text) */
  sim_map default_streams;   /* context << 32 | stream id -> 1: the NULL stream of that context */
  sim_map context_device;    /* context id -> device id */
  sim_map call_addr;         /* correlation id -> device address a copy or memset call named */
  rec_device devices[REC_MAX_DEVICES];
  uint64_t dropped;          /* activity records CUPTI could not deliver */
  uint64_t api_seen;         /* API calls reported (only relevant ones are kept) */
} rec_state;

void rec_init(rec_state *st);
void rec_release(rec_state *st);

/* Interns a string; returns its id (> 0). */
uint32_t rec_intern(rec_state *st, const char *s);
const char *rec_string(const rec_state *st, uint32_t id);

void rec_add(rec_state *st, const rec_record *r);
/* The string id of an API call's name when calls of that name can issue an activity memplay
 * keeps (rec_api_relevant), else 0. The recorder asks once per callback id and keeps the answer. */
uint32_t rec_api_name(rec_state *st, const char *name);
/* An API call; kept (for the host times of its activities) when name (from rec_api_name) is not 0. */
void rec_add_api(rec_state *st, uint32_t correlation, uint64_t start, uint64_t end, uint32_t name);
/* The device address a copy or memset call named (from its arguments, at the callback). */
void rec_add_call_addr(rec_state *st, uint32_t correlation, uint64_t addr);
/* Whether an API call of this name can be the source of an activity memplay records. */
int rec_api_relevant(const char *name);
/* The NULL (default) stream of a context has this CUPTI stream id: memplay calls it stream 0. */
void rec_default_stream(rec_state *st, uint32_t context, uint32_t stream);
/* A context belongs to a device (for synchronizations, which name only the context). */
void rec_context(rec_state *st, uint32_t context, uint32_t device);
void rec_device_info(rec_state *st, uint32_t device, const char *name, uint64_t total_memory, int cc_major,
                     int cc_minor);

typedef struct rec_meta {
  const char *name;    /* trace name, or NULL (then memplay names it) */
  const char *command; /* the command line, for attrs */
  int64_t pid;
  int cupti_version;   /* CUPTI API version */
} rec_meta;

/* What the conversion did, for messages and tests. */
typedef struct rec_counts {
  uint64_t events, allocs, frees, host_allocs, host_frees, copies, memsets, kernels, syncs;
  uint64_t unmatched_releases;  /* releases of addresses not allocated while recording */
  uint64_t unreleased_allocs;   /* an address allocated again while still live: a release was lost */
  uint64_t static_allocs;       /* __device__ globals and the like: no event */
  uint64_t stream_waits;        /* cudaStreamWaitEvent: not a host wait, no event */
  uint64_t unknown_copies;
  uint64_t uncorrelated;        /* activities whose API call was not seen (their own time is used) */
} rec_counts;

/*
 * Sorts the records into host issue order (the start of the API call that issued each, else
 * the record's own time; then correlation id, then device start) and writes the trace as memplay
 * JSON Lines: a header, the events, and import notes as "stat" lines. Times are rebased so that
 * the first event is at 0. Returns 0, or -1 with a message (a write error).
 */
int rec_write_jsonl(rec_state *st, FILE *out, const rec_meta *meta, rec_counts *counts, char *err, size_t errlen);

#endif

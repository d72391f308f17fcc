/* moment.h: the allocator's state at one moment of a replay: segments, blocks, pools, fragmentation. */
#ifndef REPLAY_ENGINE_MOMENT_H
#define REPLAY_ENGINE_MOMENT_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* A block inside a segment, in address order. */
typedef struct replay_moment_block {
  uint64_t addr, size;   /* as the model placed it */
  uint64_t requested;    /* bytes the request asked for (0: free) */
  int state;             /* SIM_BLOCK_* */
  int known;             /* the trace's request is known: the fields below hold */
  uint64_t trace_addr;   /* its recorded address */
  int64_t stack;         /* its call stack id (0: none) */
  int category;          /* sim_category */
} replay_moment_block;

typedef struct replay_moment_segment {
  int device;
  uint64_t addr, size;
  int64_t stream;
  int pool;              /* 0 small, 1 large (the model's; 0 when it has one pool) */
  int expandable;
  size_t first, nblocks; /* its blocks: blocks[first .. first+nblocks) */
  uint64_t allocated, pending, free; /* bytes in its blocks by state */
  uint64_t largest_free;
} replay_moment_segment;

/* Totals of one pool of one device. */
typedef struct replay_moment_pool {
  int device, pool;
  uint64_t segments, reserved, allocated, requested, pending, free, free_blocks, largest_free;
} replay_moment_pool;

typedef struct replay_moment {
  char what[16];           /* "peak", "oom", "event", "time": how the moment was named */
  int64_t seq, ts;         /* the last event handled (-1: none) and its time in ns */
  char allocator[64];      /* the model */
  int oom;                 /* the moment is an allocation that did not fit */
  uint64_t oom_size;
  int64_t oom_stream;
  char oom_message[320];
  int64_t allocated, reserved, requested, active; /* the engine's totals */
  int walked;              /* the model could list its segments (else only the totals hold) */
  replay_moment_segment *segments;
  size_t nsegments;
  replay_moment_block *blocks;
  size_t nblocks;
  replay_moment_pool *pools;
  size_t npools;
  /* Over all segments: */
  uint64_t block_bytes, requested_bytes;  /* in allocated blocks: as placed, as asked for */
  uint64_t free_bytes, free_blocks, largest_free, pending_bytes;
  double internal_fragmentation; /* 1 - requested / placed bytes of the allocated blocks */
  double external_fragmentation; /* 1 - largest free block / free bytes */
  int64_t category_bytes[SIM_CAT__COUNT]; /* requested bytes of the allocated blocks, by category */
} replay_moment;

/* Fills *m from the engine's state (inside a replay_stop capture); what names how it was asked
 * for. */
void replay_moment_take(replay_moment *m, const replay_state *st, const char *what);
void replay_moment_release(replay_moment *m);
/* The segment that holds the largest free block (NULL: none free), and the free block itself. */
const replay_moment_block *replay_moment_largest_free(const replay_moment *m, const replay_moment_segment **seg);

#endif
